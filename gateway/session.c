/* Sessions' lifecycle: one desktop (through the spawner), its recording,
 * its agent connection and its observers, its timers (lifetime, idleness,
 * the agent's grace period, the desktop's start-up). The agent's requests
 * are runner.c's; the worker's channel is desktop-link.c's.
 *
 * States: STARTING (the spawner is building the desktop; the POST that
 * created it waits), READY, and gone (the slot is free again). Every way a
 * session ends goes through dg_gw_session_end: the agent's DELETE, its
 * lifetime, idleness, the agent's disconnect after a grace period, the
 * desktop or worker dying, the gateway stopping.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/server-priv.h"


static const long long US = 1000000;

json_t *dg_gw_session_json(const struct gw_session *s, bool with_token)
{
	(void)with_token;
	char http[300], ws[300];
	dg_config_base_url(&s->gw->cfg, false, http, sizeof(http));
	dg_config_base_url(&s->gw->cfg, true, ws, sizeof(ws));
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:[i,i], s:[i,i], s:s, s:s, s:I, s:I, s:I}", "id",
			      s->id, "host", dg_instance(),
			      "state", s->state == S_STARTING ? "starting" : "ready", "profile",
			      dg_profile_name(s->profile), "size", s->width, s->height, "display",
			      s->model_w, s->model_h, "agent", s->owner, "policy",
			      s->policy_name[0] ? s->policy_name : "default", "age_s",
			      (json_int_t)((dg_now_ms() - s->created_ms) / 1000), "actions",
			      (json_int_t)s->n_actions, "errors", (json_int_t)s->n_errors);
	char url[700];
	snprintf(url, sizeof(url), "%s/v1/sessions/%s/ws", ws, s->id);
	json_object_set_new(j, "ws_url", json_string(url));
	snprintf(url, sizeof(url), "%s/v1/sessions/%s/watch", ws, s->id);
	json_object_set_new(j, "watch_url", json_string(url));
	if (s->url)
		json_object_set_new(j, "url", json_string(s->url));
	if (s->title)
		json_object_set_new(j, "title", json_string(s->title));
	json_object_set_new(j, "warm", json_boolean(s->warm));
	json_object_set_new(j, "takeover", dg_gw_takeover_json(s));
	return j;
}

static void on_timer(lws_sorted_usec_list_t *sul, size_t off, const char *why)
{
	struct gw_session *s = (struct gw_session *)((char *)sul - off);
	if (s->used)
		dg_gw_session_end(s, why);
}

static void on_life(lws_sorted_usec_list_t *sul)
{
	on_timer(sul, offsetof(struct gw_session, sul_life), "the session's lifetime ended");
}

/* The runner marks activity in s->last_activity_ms without rescheduling
 * (it sits below this file): the timer, when it fires early, waits for the
 * rest of the idle time from the last activity. */
static void on_idle(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s =
		(struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_idle));
	if (!s->used)
		return;
	long long left = s->last_activity_ms + (long long)s->gw->cfg.limits.idle_seconds * 1000 -
			 dg_now_ms();
	if (left > 0) {
		lws_sul_schedule(s->gw->ctx, 0, &s->sul_idle, on_idle, (lws_usec_t)left * 1000);
		return;
	}
	dg_gw_session_end(s, "the session was idle too long");
}

static void on_grace(lws_sorted_usec_list_t *sul)
{
	on_timer(sul, offsetof(struct gw_session, sul_grace), "the agent disconnected");
}

static void on_create_timeout(lws_sorted_usec_list_t *sul)
{
	on_timer(sul, offsetof(struct gw_session, sul_create), "the desktop did not start in time");
}

static void touch(struct gw_session *s)
{
	s->last_activity_ms = dg_now_ms();
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_idle, on_idle,
			 (lws_usec_t)s->gw->cfg.limits.idle_seconds * US);
}

static int get_size(json_t *body, const char *key, int *w, int *h, char *err, size_t errlen)
{
	json_t *v = json_object_get(body, key);
	if (!v)
		return 0;
	json_t *jw = json_object_get(v, "width"), *jh = json_object_get(v, "height");
	if (!json_is_object(v) || !json_is_integer(jw) || !json_is_integer(jh) ||
	    json_object_size(v) != 2) {
		snprintf(err, errlen, "%s must be {\"width\": W, \"height\": H}", key);
		return -1;
	}
	*w = (int)json_integer_value(jw);
	*h = (int)json_integer_value(jh);
	return 1;
}

/* A session's options, as POST /v1/sessions (or an MCP client's
 * initialize) gives them: checked once, here. */
struct session_opts {
	enum dg_profile profile;
	int w, h, mw, mh;
	const char *pname;     /* borrowed from the body; NULL: the default policy */
	const json_t *tools;   /* borrowed; NULL: none declared */
	struct dg_toolsets toolsets;
};

static int opts_parse(struct gw *gw, const json_t *body, struct session_opts *o, char *err,
		      size_t errlen)
{
	memset(o, 0, sizeof(*o));
	if (!json_is_object(body)) {
		snprintf(err, errlen, "the body must be a JSON object");
		return -EINVAL;
	}
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)body, key, v)
	{
		if (strcmp(key, "profile") && strcmp(key, "size") && strcmp(key, "display") &&
		    strcmp(key, "policy") && strcmp(key, "tools")) {
			snprintf(err, errlen, "unknown field \"%.40s\" (profile, size, display, policy, "
				 "tools)", key);
			return -EINVAL;
		}
	}
	/* The tools the agent gives its model (the Messages API's tools
	 * entries): which toolset members the model could call. */
	o->tools = json_object_get(body, "tools");
	if (o->tools) {
		struct dg_err terr = {{0}};
		if (dg_toolsets_parse(o->tools, &o->toolsets, &terr) != 0) {
			snprintf(err, errlen, "%s", terr.msg);
			return -EINVAL;
		}
	}
	o->profile = DG_PROFILE_BROWSER;
	v = json_object_get(body, "profile");
	if (v && (!json_is_string(v) || dg_profile_parse(json_string_value(v), &o->profile) != 0)) {
		snprintf(err, errlen, "profile must be \"xterm\" or \"browser\"");
		return -EINVAL;
	}
	o->w = DG_DESKTOP_WIDTH_DEFAULT;
	o->h = DG_DESKTOP_HEIGHT_DEFAULT;
	if (get_size((json_t *)body, "size", &o->w, &o->h, err, errlen) < 0)
		return -EINVAL;
	if (o->w < DG_DESKTOP_WIDTH_MIN || o->w > DG_DESKTOP_WIDTH_MAX ||
	    o->h < DG_DESKTOP_HEIGHT_MIN || o->h > DG_DESKTOP_HEIGHT_MAX) {
		snprintf(err, errlen, "size %dx%d is outside %dx%d .. %dx%d", o->w, o->h,
			 DG_DESKTOP_WIDTH_MIN, DG_DESKTOP_HEIGHT_MIN, DG_DESKTOP_WIDTH_MAX,
			 DG_DESKTOP_HEIGHT_MAX);
		return -EINVAL;
	}
	o->mw = o->w;
	o->mh = o->h;
	if (get_size((json_t *)body, "display", &o->mw, &o->mh, err, errlen) < 0)
		return -EINVAL;
	if (o->mw < DG_MODEL_DIM_MIN || o->mw > DG_MODEL_DIM_MAX || o->mh < DG_MODEL_DIM_MIN ||
	    o->mh > DG_MODEL_DIM_MAX) {
		snprintf(err, errlen, "display %dx%d is outside %dx%d .. %dx%d", o->mw, o->mh,
			 DG_MODEL_DIM_MIN, DG_MODEL_DIM_MIN, DG_MODEL_DIM_MAX, DG_MODEL_DIM_MAX);
		return -EINVAL;
	}
	v = json_object_get(body, "policy");
	if (v) {
		o->pname = json_string_value(v);
		if (!o->pname || !dg_config_policy_path(&gw->cfg, o->pname)) {
			snprintf(err, errlen, "no policy named \"%.40s\" in the configuration",
				 o->pname ? o->pname : "?");
			return -EINVAL;
		}
	}
	return 0;
}

int dg_gw_session_opts_check(struct gw *gw, const json_t *body, bool *browser, int *display_w,
			     int *display_h, char *err, size_t errlen)
{
	struct session_opts o;
	int rc = opts_parse(gw, body, &o, err, errlen);
	if (rc == 0) {
		*browser = o.profile == DG_PROFILE_BROWSER;
		*display_w = o.mw;
		*display_h = o.mh;
	}
	return rc;
}

/* The session's own policy: the one its options name (or the gateway's),
 * or own (taken, with its text) when the caller made one. */
static int session_policy(struct gw *gw, const struct session_opts *o, struct dg_gw_own_policy *own,
			  struct dg_policy *policy, char **ptext, size_t *plen, char *err,
			  size_t errlen, int *status)
{
	if (own) {
		*policy = own->policy;
		*ptext = own->text;
		*plen = own->len;
		memset(own, 0, sizeof(*own));
		return 0;
	}
	dg_policy_copy(policy, &gw->policy);
	*ptext = strdup(gw->policy_text ? gw->policy_text : DG_GW_BUILTIN_POLICY_TEXT);
	*plen = *ptext ? strlen(*ptext) : 0;
	if (o->pname) {
		const char *path = dg_config_policy_path(&gw->cfg, o->pname);
		struct dg_err perr = {{0}};
		/* "" is "default" without a file: the built-in one. */
		dg_policy_free(policy);
		free(*ptext);
		*ptext = NULL;
		if (dg_gw_policy_load(path, policy, ptext, plen, &perr) != 0) {
			*status = 500;
			snprintf(err, errlen, "%s", perr.msg);
			return -1;
		}
	}
	return 0;
}

int dg_gw_session_create(struct gw *gw, struct conn *creator, json_t *body, const json_t *mcp,
			 struct gw_session **out, char *err, size_t errlen, int *status)
{
	return dg_gw_session_create_own(gw, creator, body, mcp, NULL, out, err, errlen, status);
}

int dg_gw_session_create_own(struct gw *gw, struct conn *creator, json_t *body, const json_t *mcp,
			     struct dg_gw_own_policy *own, struct gw_session **out, char *err,
			     size_t errlen, int *status)
{
	*status = 400;
	if (out)
		*out = NULL;
	struct session_opts o;
	if (opts_parse(gw, body, &o, err, errlen) != 0)
		return -1;
	enum dg_profile profile = o.profile;
	int w = o.w, h = o.h, mw = o.mw, mh = o.mh;
	const json_t *tools = o.tools;
	if (gw->egress_dead) {
		*status = 503;
		snprintf(err, errlen, "the egress proxy died: no session can reach anything until "
				      "deskgate restarts");
		return -1;
	}
	if (gw->cfg.drain) {
		/* A balancer reads "drain" from the agent-check and sends none;
		 * a client that comes here directly is told the same. */
		*status = 503;
		snprintf(err, errlen, "host %s is draining (capacity.drain): it takes no new session",
			 dg_instance());
		return -1;
	}
	struct gw_session *s = NULL;
	for (int i = 0; i < gw->n_sessions && !s; i++) {
		if (!gw->sessions[i].used)
			s = &gw->sessions[i];
	}
	if (!s) {
		*status = 429;
		snprintf(err, errlen, "the gateway runs %d sessions, its limit (limits.max_sessions)",
			 gw->n_sessions);
		return -1;
	}
	/* The session holds its own reference to its policy (dg_policy_free at
	 * its end). */
	struct dg_policy policy;
	char *ptext = NULL;
	size_t plen = 0;
	const char *pname = o.pname;
	if (session_policy(gw, &o, own, &policy, &ptext, &plen, err, errlen, status) != 0)
		return -1;
	memset(s, 0, sizeof(*s));
	if (!ptext || dg_gw_new_id(s->id, sizeof(s->id)) != 0) {
		dg_policy_free(&policy);
		free(ptext);
		*status = 500;
		snprintf(err, errlen, "no memory or randomness for a session");
		return -1;
	}
	s->used = true;
	s->gw = gw;
	s->state = S_STARTING;
	s->profile = profile;
	s->width = w;
	s->height = h;
	s->model_w = mw;
	s->model_h = mh;
	s->policy = policy;
	s->policy_text = ptext;
	s->policy_len = plen;
	s->egress_fd = -1;
	s->view_fd = -1;
	s->toolsets = o.toolsets;
	s->has_toolsets = tools != NULL;
	snprintf(s->policy_name, sizeof(s->policy_name), "%s", pname ? pname : "");
	snprintf(s->owner, sizeof(s->owner), "%s", creator->who.name);
	s->creator = creator;
	s->created_ms = s->last_activity_ms = dg_now_ms();
	/* Every session is recorded, from before its desktop exists. */
	struct dg_err rerr = {{0}};
	if (dg_gw_rec_open(s, &rerr) != 0) {
		dg_policy_free(&s->policy);
		free(s->policy_text);
		memset(s, 0, sizeof(*s));
		*status = 500;
		snprintf(err, errlen, "%s", rerr.msg);
		return -1;
	}
	json_t *lc = json_pack("{s:s, s:s, s:s, s:[i,i], s:[i,i], s:s, s:s}", "type", "lifecycle",
			       "state", "created", "profile", dg_profile_name(profile), "size", w, h,
			       "display", mw, mh, "agent", s->owner, "policy",
			       pname ? pname : "default");
	if (lc && tools)
		json_object_set(lc, "tools", (json_t *)tools);
	if (lc && mcp)
		json_object_set(lc, "mcp", (json_t *)mcp);
	dg_gw_rec_event(s, lc);
	json_decref(lc);
	struct dg_err serr = {{0}};
	int req = dg_spawner_create(&gw->spawner, s->id, profile, w, h, &policy.limits,
				    policy.rules != NULL, &serr);
	if (req < 0) {
		s->creator = NULL;
		dg_gw_session_end(s, serr.msg);
		*status = 503;
		snprintf(err, errlen, "%s", serr.msg);
		return -1;
	}
	s->create_req = req;
	gw->m.sessions_created++;
	if (out)
		*out = s;
	lws_sul_schedule(gw->ctx, 0, &s->sul_create, on_create_timeout, DG_CREATE_TIMEOUT_S * US);
	long long life = gw->cfg.limits.session_seconds;
	if (policy.limits.session_seconds < life)
		life = policy.limits.session_seconds;
	lws_sul_schedule(gw->ctx, 0, &s->sul_life, on_life, (lws_usec_t)life * US);
	return 0;
}

void dg_gw_session_ready(struct gw_session *s)
{
	s->state = S_READY;
	lws_sul_cancel(&s->sul_create);
	/* The desktop's start is over: the spawner caps its CPU now rather than
	 * at DG_SPAWNER_START_CPU_MS. Its answer is not waited for (an ERROR
	 * comes with the session's ENDED when the quota could not be set). */
	struct dg_err serr = {{0}};
	if (!s->warm && dg_spawner_started(&s->gw->spawner, s->id, &serr) < 0)
		fprintf(stderr, "deskgate: session %s: telling the spawner it started: %s\n", s->id,
			serr.msg);
	touch(s);
	json_t *lc = json_pack("{s:s, s:s, s:I, s:b}", "type", "lifecycle", "state", "ready",
			       "start_ms", (json_int_t)(dg_now_ms() - s->created_ms), "warm",
			       s->warm);
	if (s->url)
		json_object_set_new(lc, "url", json_string(s->url));
	if (s->title)
		json_object_set_new(lc, "title", json_string(s->title));
	dg_gw_rec_event(s, lc);
	json_decref(lc);
	unsigned char tok[DG_SESSION_TOKEN_BYTES];
	char token[2 * DG_SESSION_TOKEN_BYTES + 1];
	RAND_bytes(tok, sizeof(tok));
	dg_hex_encode(tok, sizeof(tok), token);
	SHA256((const unsigned char *)token, strlen(token), s->token_hash);
	json_t *j = dg_gw_session_json(s, true);
	json_object_set_new(j, "session_token", json_string(token));
	OPENSSL_cleanse(token, sizeof(token));
	if (s->creator) {
		dg_gw_http_reply(s->creator, 201, j);
		s->creator = NULL;
	} else {
		json_decref(j);
		/* Nobody waits for it any more: an orphan desktop is ended. */
		dg_gw_session_end(s, "its creator went away before it was ready");
	}
}

bool dg_gw_session_token_ok(const struct gw_session *s, const char *tok, size_t len)
{
	unsigned char h[DG_SHA256_LEN];
	SHA256((const unsigned char *)tok, len, h);
	return s->state == S_READY && CRYPTO_memcmp(h, s->token_hash, sizeof(h)) == 0;
}

static void close_conn(struct conn *c, json_t *last)
{
	if (c && c->sink) {
		c->s = NULL;
		dg_gw_ws_send_json(c, last);
		return;
	}
	if (!c || !c->wsi) {
		json_decref(last);
		return;
	}
	dg_gw_ws_send_json(c, last);
	c->s = NULL;
	c->closing = true;
	lws_callback_on_writable(c->wsi);
}

/* The session's listener is withdrawn from the egress proxy (idempotent):
 * the proxy stops accepting for it, and the gateway's copy is closed. */
static void egress_withdraw(struct gw_session *s)
{
	if (s->egress_fd >= 0) {
		close(s->egress_fd);
		s->egress_fd = -1;
	}
	if (!s->egress_added)
		return;
	s->egress_added = false;
	struct dg_err err = {{0}};
	if (s->gw->egress_wsi && dg_egress_remove(&s->gw->egress, s->id, &err) != 0)
		lwsl_err("deskgate: session %s: withdrawing its listener: %s\n", s->id, err.msg);
}

void dg_gw_session_end(struct gw_session *s, const char *reason)
{
	if (!s->used)
		return;
	struct gw *gw = s->gw;
	snprintf(s->end_reason, sizeof(s->end_reason), "%s", reason);
	lws_sul_cancel(&s->sul_gone);
	/* The action in progress (it may have reached the desktop) is recorded
	 * and answered with the reason, and queued ones are answered as not
	 * run, before the agent's connection closes. */
	dg_gw_takeover_end(s, "the session ended", NULL);
	dg_gw_runner_end(s, reason);
	if (s->creator) {
		dg_gw_http_reply(s->creator, 503,
				 json_pack("{s:{s:s, s:s}}", "error", "code", "desktop_failed", "message", reason));
		s->creator = NULL;
	}
	json_t *ended = json_pack("{s:s, s:s, s:s}", "type", "ended", "session", s->id, "reason", reason);
	if (s->agent) {
		close_conn(s->agent, json_incref(ended));
		s->agent = NULL;
	}
	for (struct conn *o = s->observers, *n; o; o = n) {
		n = o->next_observer;
		close_conn(o, json_incref(ended));
	}
	dg_gw_cdp_end(s, reason);
	dg_gw_vnc_end(s, reason);
	json_decref(ended);
	s->observers = NULL;
	s->n_observers = 0;
	lws_sul_cancel(&s->sul_life);
	lws_sul_cancel(&s->sul_idle);
	lws_sul_cancel(&s->sul_grace);
	lws_sul_cancel(&s->sul_create);
	if (s->worker) {
		dg_gw_raw_untag(lws_get_opaque_user_data(s->worker));
		lws_set_timeout(s->worker, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		s->worker = NULL;
	}
	if (s->exec_wsi) {
		dg_gw_raw_untag(lws_get_opaque_user_data(s->exec_wsi));
		lws_set_timeout(s->exec_wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		s->exec_wsi = NULL;
	}
	struct dg_err err = {{0}};
	/* The spawner ended those two itself; any other end asks it to. */
	if (!gw->stopping && strncmp(reason, "the desktop ended", 17) != 0 &&
	    strcmp(reason, "the desktop's worker ended") != 0)
		dg_spawner_destroy(&gw->spawner, s->id, &err);
	egress_withdraw(s);
	if (s->view_fd >= 0) {
		close(s->view_fd);
		s->view_fd = -1;
	}
	dg_gw_rec_close(s, reason);
	free(s->policy_text);
	dg_ipc_reader_free(&s->rd);
	json_decref(s->pending_result);
	free(s->png);
	free(s->url);
	free(s->title);
	json_decref(s->tabs);
	free(s->exec_buf);
	dg_policy_free(&s->policy);
	gw->m.sessions_ended++;
	memset(s, 0, sizeof(*s));
}

json_t *dg_gw_session_hello(const struct gw_session *s)
{
	json_t *j = dg_gw_session_json(s, false);
	json_object_set_new(j, "type", json_string("hello"));
	return j;
}

void dg_gw_session_agent_attach(struct gw_session *s, struct conn *c)
{
	s->agent = c;
	lws_sul_cancel(&s->sul_grace);
	touch(s);
	dg_gw_ws_send_json(c, dg_gw_session_hello(s));
}

void dg_gw_session_agent_detach(struct gw_session *s, struct conn *c)
{
	if (s->agent != c)
		return;
	s->agent = NULL;
	/* An operator's requests are not the agent's: they stay answered. */
	for (struct request *r = s->queue; r; r = r->next)
		if (r->agent == c)
			r->agent = NULL;
	if (s->cur && s->cur->agent == c)
		s->cur->agent = NULL;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_grace, on_grace,
			 (lws_usec_t)s->gw->cfg.limits.disconnect_grace_seconds * US + 1);
}

void dg_gw_session_observer_attach(struct gw_session *s, struct conn *c)
{
	c->next_observer = s->observers;
	s->observers = c;
	s->n_observers++;
	dg_gw_ws_send_json(c, dg_gw_session_hello(s));
	if (s->png)
		dg_gw_ws_send_frame(c, s->png, s->png_len);
}

void dg_gw_session_observer_detach(struct gw_session *s, struct conn *c)
{
	for (struct conn **p = &s->observers; *p; p = &(*p)->next_observer) {
		if (*p == c) {
			*p = c->next_observer;
			s->n_observers--;
			return;
		}
	}
}
