/* Sessions: one desktop (through the spawner), its worker's channel, its
 * agent connection, its observers, and the agent's requests run one action
 * at a time.
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

static void approval_clear(struct gw_session *s);
static void record_action(struct gw_session *s, struct request *r, json_t *res, const char *error);
static void answer(struct gw_session *s, struct request *r);
static void request_free(struct request *r);

struct gw_session *dg_gw_session_find(struct gw *gw, const char *id)
{
	for (int i = 0; i < gw->n_sessions; i++) {
		if (gw->sessions[i].used && strcmp(gw->sessions[i].id, id) == 0)
			return &gw->sessions[i];
	}
	return NULL;
}

json_t *dg_gw_session_json(const struct gw_session *s, bool with_token)
{
	(void)with_token;
	char http[300], ws[300];
	dg_config_base_url(&s->gw->cfg, false, http, sizeof(http));
	dg_config_base_url(&s->gw->cfg, true, ws, sizeof(ws));
	json_t *j = json_pack("{s:s, s:s, s:s, s:[i,i], s:[i,i], s:s, s:s, s:I, s:I, s:I}", "id", s->id,
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
	return j;
}

/* ---- timers --------------------------------------------------------------- */

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

static void on_idle(lws_sorted_usec_list_t *sul)
{
	on_timer(sul, offsetof(struct gw_session, sul_idle), "the session was idle too long");
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

/* ---- creating --------------------------------------------------------------- */

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

int dg_gw_session_create(struct gw *gw, struct conn *creator, json_t *body, char *err, size_t errlen,
			 int *status)
{
	*status = 400;
	if (!json_is_object(body)) {
		snprintf(err, errlen, "the body must be a JSON object");
		return -1;
	}
	const char *key;
	json_t *v;
	json_object_foreach(body, key, v)
	{
		if (strcmp(key, "profile") && strcmp(key, "size") && strcmp(key, "display") &&
		    strcmp(key, "policy")) {
			snprintf(err, errlen, "unknown field \"%.40s\" (profile, size, display, policy)", key);
			return -1;
		}
	}
	enum dg_profile profile = DG_PROFILE_BROWSER;
	v = json_object_get(body, "profile");
	if (v && (!json_is_string(v) || dg_profile_parse(json_string_value(v), &profile) != 0)) {
		snprintf(err, errlen, "profile must be \"xterm\" or \"browser\"");
		return -1;
	}
	int w = DG_DESKTOP_WIDTH_DEFAULT, h = DG_DESKTOP_HEIGHT_DEFAULT;
	if (get_size(body, "size", &w, &h, err, errlen) < 0)
		return -1;
	if (w < DG_DESKTOP_WIDTH_MIN || w > DG_DESKTOP_WIDTH_MAX || h < DG_DESKTOP_HEIGHT_MIN ||
	    h > DG_DESKTOP_HEIGHT_MAX) {
		snprintf(err, errlen, "size %dx%d is outside %dx%d .. %dx%d", w, h, DG_DESKTOP_WIDTH_MIN,
			 DG_DESKTOP_HEIGHT_MIN, DG_DESKTOP_WIDTH_MAX, DG_DESKTOP_HEIGHT_MAX);
		return -1;
	}
	int mw = w, mh = h;
	if (get_size(body, "display", &mw, &mh, err, errlen) < 0)
		return -1;
	if (mw < DG_MODEL_DIM_MIN || mw > DG_MODEL_DIM_MAX || mh < DG_MODEL_DIM_MIN ||
	    mh > DG_MODEL_DIM_MAX) {
		snprintf(err, errlen, "display %dx%d is outside %dx%d .. %dx%d", mw, mh,
			 DG_MODEL_DIM_MIN, DG_MODEL_DIM_MIN, DG_MODEL_DIM_MAX, DG_MODEL_DIM_MAX);
		return -1;
	}
	if (gw->egress_dead) {
		*status = 503;
		snprintf(err, errlen, "the egress proxy died: no session can reach anything until "
				      "deskgate restarts");
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
	dg_policy_copy(&policy, &gw->policy);
	char *ptext = strdup(gw->policy_text ? gw->policy_text : DG_GW_BUILTIN_POLICY_TEXT);
	size_t plen = ptext ? strlen(ptext) : 0;
	const char *pname = NULL;
	v = json_object_get(body, "policy");
	if (v) {
		pname = json_string_value(v);
		const char *path = pname ? dg_config_policy_path(&gw->cfg, pname) : NULL;
		if (!path) {
			dg_policy_free(&policy);
			free(ptext);
			snprintf(err, errlen, "no policy named \"%.40s\" in the configuration",
				 pname ? pname : "?");
			return -1;
		}
		struct dg_err perr = {{0}};
		/* "" is "default" without a file: the built-in one. */
		dg_policy_free(&policy);
		free(ptext);
		if (dg_gw_policy_load(path, &policy, &ptext, &plen, &perr) != 0) {
			*status = 500;
			snprintf(err, errlen, "%s", perr.msg);
			return -1;
		}
	}
	memset(s, 0, sizeof(*s));
	unsigned char rnd[16];
	if (!ptext || RAND_bytes(rnd, sizeof(rnd)) != 1) {
		dg_policy_free(&policy);
		free(ptext);
		*status = 500;
		snprintf(err, errlen, "no memory or randomness for a session");
		return -1;
	}
	dg_hex_encode(rnd, sizeof(rnd), s->id);
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
	lws_sul_schedule(gw->ctx, 0, &s->sul_create, on_create_timeout, DG_CREATE_TIMEOUT_S * US);
	long long life = gw->cfg.limits.session_seconds;
	if (policy.limits.session_seconds < life)
		life = policy.limits.session_seconds;
	lws_sul_schedule(gw->ctx, 0, &s->sul_life, on_life, (lws_usec_t)life * US);
	return 0;
}

/* The worker said READY: answer the POST that created the session. */
static void became_ready(struct gw_session *s)
{
	s->state = S_READY;
	lws_sul_cancel(&s->sul_create);
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

/* ---- ending ------------------------------------------------------------------ */

static void request_free(struct request *r)
{
	free(r->raw);
	free(r->b_url);
	free(r->b_title);
	dg_adapted_free(&r->ad);
	free(r->zoom_png);
	json_decref(r->last_result);
	free(r->error);
	free(r);
}

static void close_conn(struct conn *c, json_t *last)
{
	if (!c || !c->wsi)
		return;
	dg_gw_ws_send_json(c, last);
	c->s = NULL;
	c->closing = true;
	lws_callback_on_writable(c->wsi);
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
	if (s->cur) {
		struct request *r = s->cur;
		s->cur = NULL;
		char why[DG_ERR_MAX + 64];
		snprintf(why, sizeof(why), "the session ended: %s", reason);
		record_action(s, r, NULL, why);
		r->failed = true;
		free(r->error);
		r->error = strdup(why);
		if (r->agent)
			answer(s, r);
		request_free(r);
	}
	for (struct request *r = s->queue, *n; r; r = n) {
		n = r->next;
		char why[DG_ERR_MAX + 64];
		snprintf(why, sizeof(why), "not run: the session ended: %s", reason);
		r->failed = true;
		free(r->error);
		r->error = strdup(why);
		if (r->agent)
			answer(s, r);
		request_free(r);
	}
	s->queue = s->queue_tail = NULL;
	s->queued = 0;
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
	json_decref(ended);
	s->observers = NULL;
	s->n_observers = 0;
	lws_sul_cancel(&s->sul_life);
	lws_sul_cancel(&s->sul_idle);
	lws_sul_cancel(&s->sul_grace);
	lws_sul_cancel(&s->sul_create);
	approval_clear(s);
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
	if (s->cur)
		request_free(s->cur);
	for (struct request *r = s->queue, *n; r; r = n) {
		n = r->next;
		request_free(r);
	}
	dg_gw_egress_detach(s);
	dg_gw_rec_close(s, reason);
	free(s->policy_text);
	dg_ipc_reader_free(&s->rd);
	json_decref(s->pending_result);
	free(s->png);
	free(s->url);
	free(s->title);
	free(s->exec_buf);
	dg_policy_free(&s->policy);
	gw->m.sessions_ended++;
	memset(s, 0, sizeof(*s));
}

/* ---- agents and observers ----------------------------------------------------- */

static json_t *hello(const struct gw_session *s)
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
	dg_gw_ws_send_json(c, hello(s));
}

void dg_gw_session_agent_detach(struct gw_session *s, struct conn *c)
{
	if (s->agent != c)
		return;
	s->agent = NULL;
	for (struct request *r = s->queue; r; r = r->next)
		r->agent = NULL;
	if (s->cur)
		s->cur->agent = NULL;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_grace, on_grace,
			 (lws_usec_t)s->gw->cfg.limits.disconnect_grace_seconds * US + 1);
}

void dg_gw_session_observer_attach(struct gw_session *s, struct conn *c)
{
	c->next_observer = s->observers;
	s->observers = c;
	s->n_observers++;
	dg_gw_ws_send_json(c, hello(s));
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

static void broadcast(struct gw_session *s, json_t *ev)
{
	for (struct conn *o = s->observers; o; o = o->next_observer)
		dg_gw_ws_send_json(o, json_incref(ev));
	json_decref(ev);
}

/* An event for the recording and the observers alike (ev stolen). */
static void note(struct gw_session *s, json_t *ev)
{
	dg_gw_rec_event(s, ev);
	broadcast(s, ev);
}

/* The recording's "action" event for the action of r that just ended
 * (performed, failed or refused): what the agent sent, the canonical
 * action, the decision and the state it was made in, the screens before and
 * after, and the outcome. Each action of a request is recorded once. */
static void record_action(struct gw_session *s, struct request *r, json_t *res, const char *error)
{
	if (r->recorded > r->index || r->index >= r->ad.n)
		return;
	r->recorded = r->index + 1;
	json_t *ev = json_pack("{s:s, s:i, s:O, s:s, s:s, s:s, s:[i,i], s:[i,i], s:I}", "type",
			       "action", "index", r->index, "action", r->ad.actions[r->index],
			       "verdict", dg_verdict_name(r->decision.verdict), "rule", r->decision.rule,
			       "reason", r->decision.reason, "screen", s->width, s->height, "pointer",
			       r->b_px, r->b_py, "duration_ms",
			       (json_int_t)(dg_now_ms() - r->t_step));
	if (!ev)
		return;
	if (r->index == 0 && r->raw) {
		json_t *in = json_loadb(r->raw, r->raw_len, 0, NULL);
		json_object_set_new(ev, "input", in ? in : json_stringn(r->raw, r->raw_len));
		json_object_set_new(ev, "wire", json_string(dg_wire_name(r->ad.wire)));
	}
	json_object_set_new(ev, "url", r->b_url ? json_string(r->b_url) : json_null());
	json_object_set_new(ev, "title", r->b_title ? json_string(r->b_title) : json_null());
	json_object_set_new(ev, "frame_before", r->b_frame[0] ? json_string(r->b_frame) : json_null());
	const char *after = r->zoom_frame[0] ? r->zoom_frame : s->frame_hash;
	bool shown = res && json_object_get(res, "frame");
	json_object_set_new(ev, "frame_after", shown && after[0] ? json_string(after) : json_null());
	if (r->approved)
		json_object_set_new(ev, "approved_by", json_string(r->approved_by));
	if (res) {
		json_t *copy = json_deep_copy(res);
		json_object_del(copy, "id");
		json_object_set_new(ev, "result", copy);
	}
	if (error)
		json_object_set_new(ev, "error", json_string(error));
	if (s->url && res)
		json_object_set_new(ev, "url_after", json_string(s->url));
	if (s->title && res)
		json_object_set_new(ev, "title_after", json_string(s->title));
	dg_gw_rec_event(s, ev);
	/* Observers see every action with its verdict, refused ones included,
	 * without the agent's raw input or the worker's internals. */
	json_t *obs = json_pack("{s:s, s:O, s:O, s:O, s:O, s:O, s:b}", "type", "action", "action",
				json_object_get(r->ad.actions[r->index], "type"), "canonical",
				r->ad.actions[r->index], "verdict", json_object_get(ev, "verdict"), "rule",
				json_object_get(ev, "rule"), "reason", json_object_get(ev, "reason"), "ok",
				res && !error && json_is_true(json_object_get(res, "ok")));
	if (obs) {
		if (error)
			json_object_set_new(obs, "error", json_string(error));
		if (res && json_object_get(res, "cursor"))
			json_object_set(obs, "cursor", json_object_get(res, "cursor"));
		if (r->approved)
			json_object_set_new(obs, "approved_by", json_string(r->approved_by));
		broadcast(s, obs);
	}
	json_decref(ev);
	r->zoom_frame[0] = '\0';
}

/* ---- running requests ---------------------------------------------------------- */

static void run_next(struct gw_session *s);

static void set_page(struct gw_session *s, json_t *res)
{
	const char *url = json_string_value(json_object_get(res, "url"));
	const char *title = json_string_value(json_object_get(res, "title"));
	if (url) {
		free(s->url);
		s->url = strdup(url);
	}
	if (title) {
		free(s->title);
		s->title = strdup(title);
	}
	json_t *cur = json_object_get(res, "cursor");
	if (json_is_array(cur)) {
		s->cursor_x = (int)json_integer_value(json_array_get(cur, 0));
		s->cursor_y = (int)json_integer_value(json_array_get(cur, 1));
	}
}

static void record_timing(struct gw *gw, double ms)
{
	static const double bounds[] = {5, 10, 20, 30, 50, 100, 200, 500, 1000, 2000, 5000};
	int i = 0;
	while (i < 11 && ms > bounds[i])
		i++;
	gw->m.action_ms_buckets[i]++;
	gw->m.action_ms_sum += ms;
	gw->m.action_ms_count++;
}

/* Answers the agent for the request that just ended, in its wire format. */
static void answer(struct gw_session *s, struct request *r)
{
	struct conn *c = r->agent;
	double ms = (double)(dg_now_ms() - r->t0);
	record_timing(s->gw, ms);
	json_t *res = r->last_result;
	if (r->ad.wire == DG_WIRE_CANONICAL || r->ad.wire == DG_WIRE_UNKNOWN) {
		json_t *j = res ? json_deep_copy(res) : json_object();
		json_object_del(j, "id");
		json_object_set_new(j, "type", json_string("result"));
		json_object_set_new(j, "ok", json_boolean(!r->failed));
		if (r->error)
			json_object_set_new(j, "error", json_string(r->error));
		if (r->refused) {
			json_object_set_new(j, "verdict", json_string(dg_verdict_name(r->decision.verdict)));
			json_object_set_new(j, "rule", json_string(r->decision.rule));
			json_object_set_new(j, "reason", json_string(r->decision.reason));
			json_object_set_new(j, "action", json_incref(json_object_get(
								 r->ad.actions[r->index], "type")));
			json_object_del(j, "frame");
		} else {
			json_object_set_new(j, "verdict", json_string("allow"));
			if (r->approved)
				json_object_set_new(j, "approved_by", json_string(r->approved_by));
		}
		json_object_set_new(j, "total_ms", json_real(ms));
		bool frame = json_object_get(j, "frame") && (r->zoom_png || s->png);
		dg_gw_ws_send_json(c, j);
		if (frame && r->zoom_png)
			dg_gw_ws_send(c, true, r->zoom_png, r->zoom_len);
		else if (frame)
			dg_gw_ws_send(c, true, s->png, s->png_len);
		return;
	}
	struct dg_adapt_outcome o;
	memset(&o, 0, sizeof(o));
	o.ok = !r->failed;
	o.done = r->failed ? r->index : r->ad.n;
	o.error = r->error;
	if (r->refused) {
		o.verdict = dg_verdict_name(r->decision.verdict);
		o.rule = r->decision.rule;
		o.reason = r->decision.reason;
	}
	o.png = r->zoom_png ? r->zoom_png : s->png;
	o.png_len = r->zoom_png ? r->zoom_len : s->png_len;
	o.url = s->profile == DG_PROFILE_BROWSER ? s->url : NULL;
	bool cursor_q = r->ad.n > 0 && !r->failed &&
			strcmp(json_string_value(json_object_get(r->ad.actions[r->ad.n - 1], "type")),
			       "cursor_position") == 0;
	if (cursor_q && r->ad.wire == DG_WIRE_ANTHROPIC) {
		/* The position is the answer; an old screenshot would only mislead. */
		o.png = NULL;
		o.png_len = 0;
	}
	if (cursor_q) {
		o.has_cursor = true;
		o.cursor_x = s->cursor_x;
		o.cursor_y = s->cursor_y;
	}
	json_t *ex = json_object_get(res, "exec");
	char *text = NULL;
	if (ex) {
		text = json_dumps(ex, JSON_COMPACT);
		o.text = text;
	}
	json_t *out = NULL;
	struct dg_err err = {{0}};
	if (dg_adapt_answer(&r->ad, &o, &out, &err) != 0)
		dg_gw_error_json(c, "internal", "building the answer: %s", err.msg);
	else
		dg_gw_ws_send_json(c, out);
	free(text);
}

static void finish_request(struct gw_session *s)
{
	struct request *r = s->cur;
	s->cur = NULL;
	if (r->failed)
		s->n_errors++;
	if (r->agent)
		answer(s, r);
	request_free(r);
	run_next(s);
}

static int send_to_worker(struct gw_session *s, json_t *action)
{
	char *text = json_dumps(action, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	json_t *msg = json_pack("{s:I, s:o}", "id", (json_int_t)(s->n_actions + 1), "action",
				json_loads(text, 0, NULL));
	free(text);
	if (s->model_w != s->width || s->model_h != s->height)
		json_object_set_new(msg, "size", json_pack("[i,i]", s->model_w, s->model_h));
	/* The page the decision was made at, when a rule depends on it: the
	 * worker refuses an input action when another page is in front by the
	 * time it runs (a tab the page or the browser brought up since). */
	if (s->cur && s->cur->b_url && s->profile == DG_PROFILE_BROWSER &&
	    dg_policy_uses_page_url(&s->policy))
		json_object_set_new(msg, "page_url", json_string(s->cur->b_url));
	char *m = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!m)
		return -ENOMEM;
	int fd = lws_get_socket_fd(s->worker);
	int r = dg_ipc_send(fd, DG_MSG_ACTION, m, strlen(m));
	free(m);
	return r;
}

static void step_failed(struct gw_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void step_failed(struct gw_session *s, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record_action(s, s->cur, NULL, msg);
	s->cur->failed = true;
	free(s->cur->error);
	s->cur->error = strdup(msg);
	finish_request(s);
}

static void start_exec(struct gw_session *s, json_t *action)
{
	/* The action passed its schema (argv strings, stdin, timeout_ms within
	 * the exec caps); the stub checks them again against the channel's. */
	json_t *argv_j = json_object_get(action, "argv"), *in = json_object_get(action, "stdin");
	size_t argc = json_array_size(argv_j);
	const char *argv[DG_EXEC_ARGV_MAX + 1] = {0};
	for (size_t i = 0; i < argc && i < DG_EXEC_ARGV_MAX; i++)
		argv[i] = json_string_value(json_array_get(argv_j, i));
	struct dg_err err = {{0}};
	int n = dg_spawner_exec(&s->gw->spawner, s->id, argv, argc, json_string_value(in),
				json_string_length(in),
				json_integer_value(json_object_get(action, "timeout_ms")), &err);
	if (n < 0)
		return step_failed(s, "exec: %s", err.msg);
	s->exec_req = n;
}

/* Runs the current request's next action. */
static uint64_t actions_last_minute(struct gw_session *s, long long now_s)
{
	uint64_t n = 0;
	for (int i = 0; i < 60; i++) {
		if (now_s - s->minute_stamp[i] < 60)
			n += s->minute_count[i];
	}
	return n;
}

/* Counts an action that will run, for the actions_per_minute budget. */
static void count_action(struct gw_session *s)
{
	long long now_s = dg_now_ms() / 1000;
	int slot = (int)(now_s % 60);
	if (s->minute_stamp[slot] != now_s) {
		s->minute_stamp[slot] = now_s;
		s->minute_count[slot] = 0;
	}
	s->minute_count[slot]++;
}

/* The policy decides every action before the desktop sees it (the action
 * layer of #5); r->decision says what and why. */
static void decide(struct gw_session *s, struct request *r, json_t *action)
{
	struct dg_action a;
	struct dg_err err = {{0}};
	if (dg_action_parse_obj(action, s->width, s->height, &a, &err) != 0) {
		r->decision.verdict = DG_VERDICT_DENY;
		snprintf(r->decision.rule, sizeof(r->decision.rule), "schema");
		snprintf(r->decision.reason, sizeof(r->decision.reason), "%s", err.msg);
		r->t_step = dg_now_ms();
		return;
	}
	long long now_s = dg_now_ms() / 1000;
	struct dg_decide_ctx ctx = {
		.url = s->url && s->url[0] ? s->url : NULL,
		.screen_w = s->width,
		.screen_h = s->height,
		.pointer_x = s->cursor_x,
		.pointer_y = s->cursor_y,
		.actions_last_minute = actions_last_minute(s, now_s),
		.actions_total = s->n_actions,
		.exec_total = s->n_exec,
	};
	dg_policy_decide(&s->policy, &a, &ctx, &r->decision);
	dg_action_free(&a);
	free(r->b_url);
	free(r->b_title);
	r->b_url = s->url ? strdup(s->url) : NULL;
	r->b_title = s->title ? strdup(s->title) : NULL;
	snprintf(r->b_frame, sizeof(r->b_frame), "%s", s->frame_hash);
	r->b_px = s->cursor_x;
	r->b_py = s->cursor_y;
	r->t_step = dg_now_ms();
}

/* The binding of an approval: SHA-256 over the session id, a NUL and the
 * action's canonical JSON (sorted keys, compact), so approving one action
 * can never let another one through, here or in another session. */
static int action_hash(const struct gw_session *s, json_t *action, unsigned char out[DG_SHA256_LEN])
{
	char *text = json_dumps(action, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text)
		return -ENOMEM;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
		 EVP_DigestUpdate(c, s->id, strlen(s->id) + 1) == 1 &&
		 EVP_DigestUpdate(c, text, strlen(text)) == 1 && EVP_DigestFinal_ex(c, out, NULL) == 1;
	EVP_MD_CTX_free(c);
	free(text);
	return ok ? 0 : -ENOMEM;
}

static void approval_clear(struct gw_session *s)
{
	lws_sul_cancel(&s->sul_approval);
	free(s->appr.png);
	memset(&s->appr, 0, sizeof(s->appr));
}

static void refuse_current(struct gw_session *s);

static void on_approval_timeout(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s =
		(struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_approval));
	if (!s->used || !s->appr.pending || !s->cur)
		return;
	approval_clear(s);
	struct request *r = s->cur;
	r->decision.verdict = DG_VERDICT_DENY;
	snprintf(r->decision.rule, sizeof(r->decision.rule), "approval");
	snprintf(r->decision.reason, sizeof(r->decision.reason),
		 "nobody approved it within %u s (limits.approval_seconds)",
		 s->gw->cfg.limits.approval_seconds);
	note(s, json_pack("{s:s, s:s, s:s}", "type", "approval", "state", "expired", "reason",
			       r->decision.reason));
	refuse_current(s);
}

/* Holds the current action for a human: the agent's request waits (its
 * answer comes when someone decides or the approval expires). */
static void ask(struct gw_session *s, struct request *r, json_t *action)
{
	unsigned char rnd[DG_APPROVAL_ID_BYTES];
	if (RAND_bytes(rnd, sizeof(rnd)) != 1 || action_hash(s, action, s->appr.hash) != 0) {
		r->decision.verdict = DG_VERDICT_DENY;
		snprintf(r->decision.reason, sizeof(r->decision.reason),
			 "the policy asks for approval, and no approval could be set up");
		refuse_current(s);
		return;
	}
	dg_hex_encode(rnd, sizeof(rnd), s->appr.id);
	s->appr.pending = true;
	s->appr.created_ms = dg_now_ms();
	s->appr.expires_ms = s->appr.created_ms + (long long)s->gw->cfg.limits.approval_seconds * 1000;
	if (s->png) {
		s->appr.png = malloc(s->png_len);
		if (s->appr.png) {
			memcpy(s->appr.png, s->png, s->png_len);
			s->appr.png_len = s->png_len;
		}
	}
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_approval, on_approval_timeout,
			 (lws_usec_t)s->gw->cfg.limits.approval_seconds * US);
	char ah[2 * DG_SHA256_LEN + 1];
	dg_hex_encode(s->appr.hash, DG_SHA256_LEN, ah);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s, s:s, s:i}", "type", "approval", "state",
			       "pending", "id", s->appr.id, "action", action, "rule", r->decision.rule,
			       "reason", r->decision.reason, "action_sha256", ah, "expires_in_s",
			       (int)s->gw->cfg.limits.approval_seconds);
	note(s, ev);
	/* The canonical API tells its agent at once; the Anthropic and OpenAI
	 * shapes have no such message, so their agents just wait longer. */
	if (r->agent && (r->ad.wire == DG_WIRE_CANONICAL || r->ad.wire == DG_WIRE_UNKNOWN))
		dg_gw_ws_send_json(r->agent, json_pack("{s:s, s:s, s:s, s:s, s:i}", "type", "pending",
							"approval", s->appr.id, "rule", r->decision.rule,
							"reason", r->decision.reason, "expires_in_s",
							(int)s->gw->cfg.limits.approval_seconds));
}

static void perform(struct gw_session *s, json_t *action, int t)
{
	count_action(s);
	s->n_actions++;
	if (t >= 0)
		s->gw->m.actions[t][0]++;
	if (t == DG_ACTION_EXEC) {
		s->n_exec++;
		start_exec(s, action);
		return;
	}
	int e = send_to_worker(s, action);
	if (e)
		step_failed(s, "the desktop's worker is gone (%s)", strerror(-e));
}

static int current_type(struct gw_session *s)
{
	struct request *r = s->cur;
	const char *type = json_string_value(json_object_get(r->ad.actions[r->index], "type"));
	return dg_action_type_from_name(type ? type : "");
}

/* The current action is not performed: the agent gets the decision. */
static void refuse_current(struct gw_session *s)
{
	struct request *r = s->cur;
	int t = current_type(s);
	record_action(s, r, NULL, NULL);
	r->refused = true;
	s->n_refused++;
	if (t >= 0)
		s->gw->m.actions[t][r->decision.verdict == DG_VERDICT_ASK ? 3 : 2]++;
	r->failed = true;
	finish_request(s);
}

static void run_step(struct gw_session *s)
{
	struct request *r = s->cur;
	json_t *action = r->ad.actions[r->index];
	touch(s);
	decide(s, r, action);
	if (r->decision.verdict == DG_VERDICT_ASK)
		return ask(s, r, action);
	if (r->decision.verdict != DG_VERDICT_ALLOW)
		return refuse_current(s);
	perform(s, action, current_type(s));
}

json_t *dg_gw_approvals_json(struct gw *gw)
{
	json_t *list = json_array();
	long long now = dg_now_ms();
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (!s->used || !s->appr.pending || !s->cur)
			continue;
		struct request *r = s->cur;
		json_t *a = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s, s:I, s:I, s:b}", "id", s->appr.id,
				      "session", s->id, "agent", s->owner, "action",
				      r->ad.actions[r->index], "rule", r->decision.rule, "reason",
				      r->decision.reason, "age_ms", (json_int_t)(now - s->appr.created_ms),
				      "expires_in_ms", (json_int_t)(s->appr.expires_ms - now), "frame",
				      s->appr.png != NULL);
		if (s->url)
			json_object_set_new(a, "url", json_string(s->url));
		if (s->title)
			json_object_set_new(a, "title", json_string(s->title));
		json_array_append_new(list, a);
	}
	return list;
}

struct gw_session *dg_gw_approval_find(struct gw *gw, const char *id)
{
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (s->used && s->appr.pending && s->cur && strcmp(s->appr.id, id) == 0)
			return s;
	}
	return NULL;
}

int dg_gw_approval_answer(struct gw *gw, const char *id, bool approve, const char *who, char *err,
			  size_t errlen)
{
	struct gw_session *s = dg_gw_approval_find(gw, id);
	if (!s) {
		snprintf(err, errlen, "no pending approval %.40s (answered, expired or never asked)", id);
		return -ENOENT;
	}
	struct request *r = s->cur;
	json_t *action = r->ad.actions[r->index];
	unsigned char h[DG_SHA256_LEN];
	if (action_hash(s, action, h) != 0 || CRYPTO_memcmp(h, s->appr.hash, sizeof(h)) != 0) {
		snprintf(err, errlen, "approval %.40s is not for the action waiting now", id);
		return -ESTALE;
	}
	/* Single use: whatever happens next, this id is spent. */
	approval_clear(s);
	note(s, json_pack("{s:s, s:s, s:s, s:s}", "type", "approval", "state",
			  approve ? "approved" : "denied", "id", id, "by", who));
	if (!approve) {
		r->decision.verdict = DG_VERDICT_DENY;
		snprintf(r->decision.rule, sizeof(r->decision.rule), "approval");
		snprintf(r->decision.reason, sizeof(r->decision.reason), "denied by %s", who);
		refuse_current(s);
		return 0;
	}
	r->approved = true;
	snprintf(r->approved_by, sizeof(r->approved_by), "%s", who);
	perform(s, action, current_type(s));
	return 0;
}

static void run_next(struct gw_session *s)
{
	if (s->cur || !s->queue || s->state != S_READY || s->gone)
		return;
	s->cur = s->queue;
	s->queue = s->queue->next;
	if (!s->queue)
		s->queue_tail = NULL;
	s->queued--;
	s->cur->next = NULL;
	s->cur->t0 = dg_now_ms();
	run_step(s);
}

/* One action of the current request ended with the worker's result. */
static void step_done(struct gw_session *s, json_t *res)
{
	struct request *r = s->cur;
	if (!r) {
		json_decref(res);
		return;
	}
	/* An exec's step ends with the screenshot after it: keep its output. */
	json_t *ex = r->last_result ? json_object_get(r->last_result, "exec") : NULL;
	if (ex) {
		json_object_set(res, "exec", ex);
		json_object_set_new(res, "action", json_string("exec"));
	}
	json_decref(r->last_result);
	r->last_result = res;
	set_page(s, res);
	bool ok = json_is_true(json_object_get(res, "ok"));
	record_action(s, r, res, ok ? NULL : json_string_value(json_object_get(res, "error")));
	if (!ok) {
		const char *e = json_string_value(json_object_get(res, "error"));
		r->failed = true;
		free(r->error);
		r->error = strdup(e ? e : "the action failed");
		json_t *tj = json_object_get(r->ad.actions[r->index], "type");
		int t = dg_action_type_from_name(json_string_value(tj) ? json_string_value(tj) : "");
		if (t >= 0) {
			s->gw->m.actions[t][0]--;
			s->gw->m.actions[t][1]++;
		}
		finish_request(s);
		return;
	}
	if (++r->index < r->ad.n)
		run_step(s);
	else
		finish_request(s);
}

void dg_gw_session_agent_message(struct gw_session *s, struct conn *c, const char *text, size_t len)
{
	struct gw *gw = s->gw;
	long long now = dg_now_ms();
	if (now - c->window_start >= 1000) {
		c->window_start = now;
		c->window_count = 0;
	}
	if ((uint32_t)++c->window_count > gw->cfg.limits.actions_per_second) {
		gw->m.protocol_errors++;
		return dg_gw_error_json(c, "rate_limited", "at most %d messages a second",
					gw->cfg.limits.actions_per_second);
	}
	if ((uint32_t)s->queued >= gw->cfg.limits.max_pending_actions) {
		gw->m.protocol_errors++;
		return dg_gw_error_json(c, "too_many_pending",
					"%d requests are waiting already (limits.max_pending_actions)",
					s->queued);
	}
	struct request *r = calloc(1, sizeof(*r));
	if (!r)
		return dg_gw_error_json(c, "internal", "out of memory");
	struct dg_adapt_scale scale = {s->width, s->height, s->model_w, s->model_h};
	struct dg_err err = {{0}};
	int cx = s->cursor_x < s->width ? s->cursor_x : s->width - 1;
	int cy = s->cursor_y < s->height ? s->cursor_y : s->height - 1;
	if (dg_adapt_parse(text, len, &scale, cx, cy, &r->ad, &err) != 0) {
		gw->m.protocol_errors++;
		if (r->ad.wire == DG_WIRE_ANTHROPIC || (r->ad.wire == DG_WIRE_OPENAI && r->ad.has_id && s->png)) {
			struct dg_adapt_outcome o;
			memset(&o, 0, sizeof(o));
			o.error = err.msg;
			o.png = s->png;
			o.png_len = s->png_len;
			/* computer_call_output carries current_url in browser sessions,
			 * refusals included. */
			o.url = s->profile == DG_PROFILE_BROWSER ? s->url : NULL;
			json_t *out = NULL;
			struct dg_err e2 = {{0}};
			if (dg_adapt_answer(&r->ad, &o, &out, &e2) == 0)
				dg_gw_ws_send_json(c, out);
			else
				dg_gw_error_json(c, "bad_request", "%s", err.msg);
		} else {
			dg_gw_error_json(c, "bad_request", "%s", err.msg);
		}
		request_free(r);
		return;
	}
	r->agent = c;
	r->raw = malloc(len + 1);
	if (r->raw) {
		memcpy(r->raw, text, len);
		r->raw[len] = '\0';
		r->raw_len = len;
	}
	if (s->queue_tail)
		s->queue_tail->next = r;
	else
		s->queue = r;
	s->queue_tail = r;
	s->queued++;
	run_next(s);
}

/* ---- the worker's channel -------------------------------------------------------- */

static void worker_event(struct gw_session *s, json_t *ev)
{
	const char *kind = json_string_value(json_object_get(ev, "event"));
	if (kind && strcmp(kind, "page") == 0)
		set_page(s, ev);
	if (kind && (strcmp(kind, "guard") == 0 || strcmp(kind, "page") == 0)) {
		/* What the browser did on its own: a page change, or a download or
		 * file chooser the guard refused. */
		json_t *rec = json_deep_copy(ev);
		json_object_del(rec, "event");
		if (strcmp(kind, "guard") == 0) {
			/* Not a URL decision (downloads and file choosers are always
			 * refused): a layer of its own, which replay leaves alone. */
			json_object_set_new(rec, "type", json_string("decision"));
			json_object_set_new(rec, "layer", json_string("browser-guard"));
		} else {
			json_object_set_new(rec, "type", json_string("page"));
		}
		dg_gw_rec_event(s, rec);
		json_decref(rec);
	}
	json_t *out = json_deep_copy(ev);
	json_object_set_new(out, "type", json_string("event"));
	if (s->agent)
		dg_gw_ws_send_json(s->agent, json_incref(out));
	broadcast(s, out);
	if (kind && strcmp(kind, "error") == 0) {
		const char *m = json_string_value(json_object_get(ev, "message"));
		json_t *er = json_pack("{s:s, s:s, s:s}", "type", "error", "source", "worker", "message",
				       m ? m : "unknown error");
		dg_gw_rec_event(s, er);
		json_decref(er);
		char why[DG_ERR_MAX];
		snprintf(why, sizeof(why), "the desktop failed: %s", m ? m : "unknown error");
		dg_gw_session_end(s, why); /* answers the action in progress */
	}
}

static void on_gone(lws_sorted_usec_list_t *sul)
{
	on_timer(sul, offsetof(struct gw_session, sul_gone), "the desktop's worker ended");
}

/* The worker's channel closed: the session ends, with the spawner's reason
 * (what in the desktop died) when it comes within DG_GW_GONE_WAIT_MS. */
static void worker_gone(struct gw_session *s)
{
	if (!s->used || s->gone)
		return;
	s->gone = true;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_gone, on_gone, DG_GW_GONE_WAIT_MS * 1000);
}

/* A request the browser holds (the browser layer of #5): decided with the
 * session's policy, answered at once, and shown to observers. */
static int browser_request(struct gw_session *s, int fd)
{
	struct dg_decision d;
	json_t *req = NULL;
	struct dg_err err = {{0}};
	if (dg_worker_answer_request(fd, &s->policy, s->rd.buf, s->rd.len, &d, &req, &err) != 0) {
		dg_gw_session_end(s, err.msg);
		return -1;
	}
	s->n_requests++;
	s->gw->m.requests[d.verdict == DG_VERDICT_ALLOW ? 0 : 1]++;
	if (d.verdict != DG_VERDICT_ALLOW)
		s->n_requests_blocked++;
	json_t *ev = json_pack("{s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:s, s:s, s:s}", "type", "decision",
			       "layer", "browser", "url", json_object_get(req, "url"), "method",
			       json_object_get(req, "method"), "resource", json_object_get(req, "resource"),
			       "target", json_object_get(req, "target"), "verdict",
			       dg_verdict_name(d.verdict), "rule", d.rule, "reason", d.reason);
	json_decref(req);
	dg_gw_session_decision(s, ev);
	return 0;
}

/* Ties a browser or egress decision to the action that led to it: the
 * number of the action running (1-based, as the recording counts them), or
 * null when the page acted on its own between actions. */
void dg_gw_session_decision(struct gw_session *s, json_t *ev)
{
	json_object_set_new(ev, "during_action",
			    s->cur && !s->appr.pending ? json_integer((json_int_t)s->n_actions) : json_null());
	note(s, ev);
}

int dg_gw_worker_readable(struct gw_session *s)
{
	if (!s)
		return -1;
	int fd = lws_get_socket_fd(s->worker);
	for (;;) {
		struct dg_err err = {{0}};
		int r = dg_ipc_read(fd, &s->rd, &err);
		if (r == 0)
			return 0;
		if (r < 0) {
			/* The worker broke the protocol or went away: its session ends,
			 * nothing else does. */
			if (r == -EPIPE) {
				/* Usually the desktop died and the spawner, which knows
				 * what died, is about to say so: wait for it (bounded). */
				worker_gone(s);
				return -1;
			}
			dg_gw_session_end(s, "the desktop's worker broke the protocol");
			return -1;
		}
		json_t *j = NULL;
		if (s->rd.type != DG_MSG_FRAME) {
			j = json_loadb((const char *)s->rd.buf, s->rd.len, 0, NULL);
			if (!json_is_object(j)) {
				json_decref(j);
				dg_gw_session_end(s, "the desktop's worker sent a malformed message");
				return -1;
			}
		}
		switch (s->rd.type) {
		case DG_MSG_READY:
			if (s->state == S_STARTING) {
				set_page(s, j);
				became_ready(s);
			}
			json_decref(j);
			break;
		case DG_MSG_RESULT:
			if (json_object_get(j, "frame")) {
				json_decref(s->pending_result);
				s->pending_result = j;
			} else {
				step_done(s, j);
			}
			break;
		case DG_MSG_FRAME: {
			unsigned char *png = malloc(s->rd.len ? s->rd.len : 1);
			if (!png)
				return -1;
			memcpy(png, s->rd.buf, s->rd.len);
			const char *act = json_string_value(json_object_get(s->pending_result, "action"));
			if (act && strcmp(act, "zoom") == 0 && s->cur) {
				/* A zoom shows part of the screen: it answers the agent but
				 * is not the session's current screen. */
				free(s->cur->zoom_png);
				s->cur->zoom_png = png;
				s->cur->zoom_len = s->rd.len;
				dg_gw_rec_frame(s, png, s->rd.len, s->cur->zoom_frame);
			} else {
				free(s->png);
				s->png = png;
				s->png_len = s->rd.len;
				dg_gw_rec_frame(s, png, s->rd.len, s->frame_hash);
				for (struct conn *o = s->observers; o; o = o->next_observer)
					dg_gw_ws_send_frame(o, s->png, s->png_len);
			}
			json_t *res = s->pending_result;
			s->pending_result = NULL;
			if (res)
				step_done(s, res);
			break;
		}
		case DG_MSG_EVENT:
			worker_event(s, j);
			json_decref(j);
			break;
		case DG_MSG_REQUEST:
			json_decref(j);
			if (browser_request(s, fd) != 0)
				return -1;
			break;
		default:
			json_decref(j);
			dg_gw_session_end(s, "the desktop's worker sent an unknown message");
			return -1;
		}
		if (!s->used)
			return -1;
	}
}

void dg_gw_worker_closed(struct gw_session *s)
{
	if (s && s->used) {
		s->worker = NULL;
		worker_gone(s);
	}
}

/* ---- exec results ----------------------------------------------------------------- */

int dg_gw_exec_readable(struct gw_session *s)
{
	if (!s)
		return -1;
	int fd = lws_get_socket_fd(s->exec_wsi);
	char buf[16384];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EAGAIN)
			return 0;
		if (k <= 0)
			return -1; /* end of the result: handled in dg_gw_exec_closed */
		if (s->exec_len + (size_t)k > DG_EXEC_RESULT_MAX)
			return -1;
		char *nb = realloc(s->exec_buf, s->exec_len + (size_t)k + 1);
		if (!nb)
			return -1;
		memcpy(nb + s->exec_len, buf, (size_t)k);
		s->exec_buf = nb;
		s->exec_len += (size_t)k;
		s->exec_buf[s->exec_len] = '\0';
	}
}

void dg_gw_exec_closed(struct gw_session *s)
{
	if (!s || !s->used)
		return;
	s->exec_wsi = NULL;
	struct dg_exec_result er;
	json_t *res = s->exec_buf && dg_exec_result_decode((const uint8_t *)s->exec_buf, s->exec_len,
							   &er, NULL) == 0
			      ? dg_exec_result_json(&er)
			      : NULL;
	free(s->exec_buf);
	s->exec_buf = NULL;
	s->exec_len = 0;
	if (!s->cur)
		return json_decref(res);
	if (!json_is_object(res)) {
		json_decref(res);
		return step_failed(s, "exec: no result from the jail");
	}
	bool ok = json_is_true(json_object_get(res, "ok"));
	json_t *wrap = json_pack("{s:b, s:s, s:o}", "ok", ok, "action", "exec", "exec", res);
	if (!ok)
		json_object_set(wrap, "error", json_object_get(res, "error"));
	/* The answer carries the screen after the command, like every action. */
	json_decref(s->cur->last_result);
	s->cur->last_result = NULL;
	if (!ok) {
		step_done(s, wrap);
		return;
	}
	s->cur->last_result = wrap;
	json_t *shot = json_pack("{s:s}", "type", "screenshot");
	int e = send_to_worker(s, shot);
	json_decref(shot);
	if (e)
		step_failed(s, "the desktop's worker is gone");
	else
		s->exec_req = -1; /* the worker's RESULT/FRAME completes the step */
}

/* ---- the spawner's messages --------------------------------------------------------- */

void dg_gw_spawner_message(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds, int nfds)
{
	bool ended = msg->type == DG_SPAWN_ENDED;
	int req = (int)msg->req;
	struct gw_session *s = NULL;
	for (int i = 0; i < gw->n_sessions && !s; i++) {
		struct gw_session *x = &gw->sessions[i];
		if (!x->used)
			continue;
		if ((ended && strcmp(x->id, msg->session) == 0) ||
		    (req && (x->create_req == req || x->exec_req == req)))
			s = x;
	}
	if (!s) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	if (ended) {
		/* The action in progress is answered by dg_gw_session_end. */
		dg_gw_session_end(s, msg->u.text[0] ? msg->u.text : "the desktop ended");
		return;
	}
	const char *error = msg->type == DG_SPAWN_ERROR ? msg->u.text : NULL;
	if (req == s->create_req) {
		s->create_req = 0;
		if (msg->type != DG_SPAWN_CREATED || nfds != 2) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			dg_gw_session_end(s, error ? error : "the spawner could not start the desktop");
			return;
		}
		s->egress_fd = fds[1];
		s->warm = msg->u.created.warm;
		dg_gw_egress_attach(s);
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		s->worker = dg_gw_adopt(gw, fds[0], dg_gw_raw_tag(s, 2));
		if (!s->worker) {
			close(fds[0]);
			dg_gw_session_end(s, "cannot watch the worker's channel");
		}
		return;
	}
	if (req == s->exec_req) {
		s->exec_req = 0;
		if (msg->type != DG_SPAWN_CHANNEL || nfds != 1) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			if (s->cur)
				step_failed(s, "exec: %s", error ? error : "the spawner refused it");
			return;
		}
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		s->exec_wsi = dg_gw_adopt(gw, fds[0], dg_gw_raw_tag(s, 3));
		if (!s->exec_wsi) {
			close(fds[0]);
			if (s->cur)
				step_failed(s, "exec: cannot watch the result channel");
		}
		return;
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}
