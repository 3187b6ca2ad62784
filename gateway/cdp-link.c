/* The CDP endpoint's gateway half (docs/cdp.md): each client's WebSocket
 * (GET /v1/sessions/{id}/cdp) is relayed to the session's worker as bytes,
 * never parsed here: the worker's firewall reads it, asks here for a
 * decision on each command (DG_MSG_CDP_DECIDE, decoded once by
 * dg_cdp_decide_decode and decided by decide.c), and sends the client's
 * answers and events back through here (DG_MSG_CDP_OUT).
 *
 * Below the runner in the gateway's order (it answers no agent); server.c
 * and desktop-link.c call in.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/server-priv.h"

#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif

json_t *dg_gw_cdp_version(const struct gw_session *s)
{
	char ws[300], url[400];
	dg_config_base_url(&s->gw->cfg, true, ws, sizeof(ws));
	snprintf(url, sizeof(url), "%s/v1/sessions/%s/cdp", ws, s->id);
	return json_pack("{s:s, s:s, s:s, s:s}", "Browser", "deskgate/" DG_VERSION " (Chromium)",
			 "Protocol-Version", "1.3", "User-Agent", "deskgate/" DG_VERSION,
			 "webSocketDebuggerUrl", url);
}

static int worker_fd(const struct gw_session *s)
{
	return s->worker ? lws_get_socket_fd(s->worker) : -1;
}

static struct conn *client_find(struct gw_session *s, uint32_t client)
{
	for (struct conn *c = s->cdp; c; c = c->next_cdp)
		if (c->cdp_client == client)
			return c;
	return NULL;
}

/* Closes c with code and why in its close frame, once what is queued for
 * it is sent (dg_gw_ws_writable). */
static void client_close(struct conn *c, enum lws_close_status code, const char *why)
{
	if (!c->wsi || c->closing)
		return;
	c->closing = true;
	snprintf(c->close_why, sizeof(c->close_why), "%s", why);
	lws_close_reason(c->wsi, code, (unsigned char *)why, strnlen(why, 120));
	lws_callback_on_writable(c->wsi);
}

void dg_gw_cdp_attach(struct gw_session *s, struct conn *c)
{
	c->cdp_client = ++s->cdp_next;
	c->next_cdp = s->cdp;
	s->cdp = c;
	s->n_cdp++;
	int fd = worker_fd(s);
	if (fd < 0 || dg_cdp_client_send(fd, DG_MSG_CDP_OPEN, c->cdp_client, NULL, 0) != 0)
		client_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, "the session's worker is gone");
	dg_gw_note(s, json_pack("{s:s, s:s, s:I, s:s}", "type", "cdp_client", "state", "open",
				"client", (json_int_t)c->cdp_client, "by", c->who.name));
}

void dg_gw_cdp_detach(struct gw_session *s, struct conn *c)
{
	for (struct conn **p = &s->cdp; *p; p = &(*p)->next_cdp) {
		if (*p != c)
			continue;
		*p = c->next_cdp;
		s->n_cdp--;
		int fd = worker_fd(s);
		if (fd >= 0)
			dg_cdp_client_send(fd, DG_MSG_CDP_CLOSE, c->cdp_client, NULL, 0);
		/* Why, when the gateway closed it: its close frame may not reach
		 * a client still sending (a reset can overtake it), this does. */
		dg_gw_note(s, json_pack("{s:s, s:s, s:I, s:s?}", "type", "cdp_client", "state",
					"closed", "client", (json_int_t)c->cdp_client, "reason",
					c->close_why[0] ? c->close_why : NULL));
		return;
	}
}

void dg_gw_cdp_from_client(struct gw_session *s, struct conn *c, const char *msg, size_t len)
{
	int fd = worker_fd(s);
	int rc = fd < 0 ? -EPIPE : dg_cdp_client_send(fd, DG_MSG_CDP_IN, c->cdp_client, msg, len);
	if (rc != 0)
		client_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, "the session's worker is gone");
}

/* Counts a command of method with its verdict: the session's counts (the
 * budgets'), the gateway's metrics by method. */
static void count(struct gw_session *s, const char *method, bool allow, bool action)
{
	s->n_cdp_commands++;
	if (!allow)
		s->n_cdp_refused++;
	if (allow)
		dg_gw_per_minute_add(&s->cdp_pm);
	if (allow && action) {
		s->n_cdp_actions++;
		dg_gw_count_action(s);
	}
	s->last_activity_ms = dg_now_ms();
	struct gw_cdp_methods *m = &s->gw->m.cdp;
	int i = 0;
	while (i < m->n_rows && strcmp(m->row[i].name, method) != 0)
		i++;
	if (i == m->n_rows && i < DG_GW_CDP_METHODS_MAX) {
		snprintf(m->row[i].name, sizeof(m->row[i].name), "%s", method);
		m->n_rows++;
	}
	if (i < m->n_rows)
		m->row[i].n[allow ? 0 : 1]++;
	else
		m->other[allow ? 0 : 1]++;
}

/* Records the command's event ev (stolen) with its decision. */
static void record(struct gw_session *s, const struct dg_decision *d, json_t *ev)
{
	json_object_set_new(ev, "verdict", json_string(dg_verdict_name(d->verdict)));
	json_object_set_new(ev, "rule", json_string(d->rule));
	json_object_set_new(ev, "reason", json_string(d->reason));
	dg_gw_note_decision(s, ev);
}

/* Answers the worker's decide request req with d (cache: it may apply it
 * again unasked), counts and records it (ev: the command's recording
 * event, stolen). */
static int answer_verdict(struct gw_session *s, uint64_t req, const struct dg_decision *d,
			  bool cache, json_t *ev, struct dg_err *err)
{
	bool allow = d->verdict == DG_VERDICT_ALLOW;
	struct dg_cdp_verdict v = {.req = req, .allow = allow, .cache = allow && cache};
	snprintf(v.rule, sizeof(v.rule), "%.63s", d->rule);
	snprintf(v.reason, sizeof(v.reason), "%.500s", d->reason);
	int fd = worker_fd(s);
	int rc = fd < 0 ? dg_err_set(err, -EPIPE, "the session's worker is gone")
			: dg_cdp_verdict_send(fd, &v, err);
	count(s, json_string_value(json_object_get(ev, "method")), allow,
	      json_object_get(ev, "action") != NULL);
	record(s, d, ev);
	return rc;
}

/* The files of a DOM.setFileInputFiles the policy allows are checked in
 * the jail first, as for the file_upload member: 0 when the check is on
 * its way (the verdict follows in dg_gw_cdp_upload_checked), else d says
 * why not. */
static int upload_check(struct gw_session *s, const struct dg_cdp_decide *q, json_t *ev,
			struct dg_decision *d)
{
	const json_t *files = json_object_get(q->params, "files");
	const char *paths[DG_ACTION_PATHS_MAX];
	size_t n = json_array_size(files);
	bool ok = n >= 1 && n <= DG_ACTION_PATHS_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (paths[i] = json_string_value(json_array_get(files, i))) != NULL;
	struct dg_err err = {{0}};
	int req = -1;
	if (!ok)
		snprintf(err.msg, sizeof(err.msg), "%.64s: 1 to %d files", q->method,
			 DG_ACTION_PATHS_MAX);
	else if (s->cdp_upload_req)
		snprintf(err.msg, sizeof(err.msg), "another file check of this session is in flight");
	else
		req = dg_spawner_upload_check(&s->gw->spawner, s->id, paths, n, &err);
	if (req < 0) {
		d->verdict = DG_VERDICT_DENY;
		snprintf(d->rule, sizeof(d->rule), "builtin.file_upload");
		snprintf(d->reason, sizeof(d->reason), "the files could not be checked: %.400s",
			 err.msg);
		return -1;
	}
	s->cdp_upload_req = req;
	s->cdp_upload_q = q->req;
	json_decref(s->cdp_upload_ev);
	s->cdp_upload_ev = ev;
	return 0;
}

void dg_gw_cdp_upload_checked(struct gw_session *s, const struct dg_upload_check *answer,
			      const char *error)
{
	json_t *ev = s->cdp_upload_ev;
	s->cdp_upload_ev = NULL;
	if (!ev)
		return;
	json_t *files = json_object_get(json_object_get(ev, "params"), "files");
	struct dg_decision d = {.verdict = DG_VERDICT_ALLOW};
	snprintf(d.rule, sizeof(d.rule), "builtin.file_upload");
	snprintf(d.reason, sizeof(d.reason), "every file is a regular file of the jail's scratch "
					     "space");
	if (!answer || answer->n != json_array_size(files)) {
		d.verdict = DG_VERDICT_DENY;
		snprintf(d.reason, sizeof(d.reason), "the files could not be checked: %.400s",
			 error ? error : "the check answered another number of files");
	}
	for (size_t i = 0; answer && d.verdict == DG_VERDICT_ALLOW && i < answer->n; i++) {
		if (answer->files[i].verdict == DG_UPLOAD_OK)
			continue;
		char why[DG_ERR_MAX];
		dg_upload_reason(&answer->files[i], json_string_value(json_array_get(files, i)), why,
				 sizeof(why));
		d.verdict = DG_VERDICT_DENY;
		snprintf(d.reason, sizeof(d.reason), "%.480s", why);
	}
	struct dg_err err = {{0}};
	if (answer_verdict(s, s->cdp_upload_q, &d, false, ev, &err) != 0)
		lwsl_err("deskgate: session %s: %s\n", s->id, err.msg);
}

/* Decides q, answers the worker (DG_MSG_CDP_DECIDE), records it. A NOTE
 * (noted) was allowed by the worker under a cached verdict: decided
 * again, here, for the recording (the same decision by construction:
 * dg_policy_cdp_cacheable), never answered. */
static int decide(struct gw_session *s, const struct dg_cdp_decide *q, bool noted,
		  struct dg_err *err)
{
	struct dg_decision d;
	bool cacheable;
	dg_gw_decide_cdp(s, q, &d, &cacheable);
	if (s->op.held && !noted) {
		/* An operator has control: a client's commands wait for the
		 * agent's turn like its actions (answered "deskgate: denied by
		 * takeover: paused by an operator ..."), and none is cached. */
		d.verdict = DG_VERDICT_DENY;
		cacheable = false;
		snprintf(d.rule, sizeof(d.rule), "takeover");
		snprintf(d.reason, sizeof(d.reason),
			 "paused by an operator: %s has control of the desktop", s->op.by.name);
	}
	json_t *ev = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s?}", "type", "cdp", "client",
			       (json_int_t)q->client, "req", (json_int_t)q->req, "method", q->method,
			       "session", q->session, "frame_before",
			       s->frame_hash[0] ? s->frame_hash : NULL);
	if (!ev)
		return dg_err_set(err, -ENOMEM, "out of memory");
	if (noted)
		json_object_set_new(ev, "cached", json_true());
	if (q->action)
		json_object_set(ev, "action", q->action);
	if (q->params)
		json_object_set(ev, "params", q->params);
	if (q->url)
		json_object_set_new(ev, "url", json_string(q->url));
	if (q->code)
		json_object_set_new(ev, "code_bytes", json_integer((json_int_t)q->code_len));
	if (noted) {
		if (d.verdict != DG_VERDICT_ALLOW || !cacheable) {
			/* Cannot happen; if it does, the recording says so. */
			lwsl_err("deskgate: session %s: the worker applied a cached verdict to %s, "
				 "which the policy decides %s (%s)\n", s->id, q->method,
				 dg_verdict_name(d.verdict), d.rule);
			snprintf(d.reason, sizeof(d.reason), "applied by the worker under a cached "
				 "verdict, though the policy now decides %s (%.60s): a bug",
				 dg_verdict_name(d.verdict), d.rule);
			snprintf(d.rule, sizeof(d.rule), "internal");
			d.verdict = DG_VERDICT_ALLOW;
		}
		s->gw->m.cdp.cached++;
		count(s, q->method, true, q->action != NULL);
		record(s, &d, ev);
		return 0;
	}
	if (d.verdict == DG_VERDICT_ALLOW && json_object_get(q->params, "files") &&
	    upload_check(s, q, ev, &d) == 0)
		return 0;
	return answer_verdict(s, q->req, &d, cacheable, ev, err);
}

/* The screen CDP clients' commands first..last left (DG_MSG_CDP_FRAME):
 * the session's current screen, stored in the recording (its hash is the
 * frame_before of the commands after it), shown to observers. */
static int frame(struct gw_session *s, const uint8_t *data, size_t len, struct dg_err *err)
{
	uint64_t first, last;
	const uint8_t *png;
	size_t n;
	if (dg_cdp_frame_decode(data, len, &first, &last, &png, &n) != 0)
		return dg_err_set(err, -EPROTO, "worker: a malformed CDP frame message");
	unsigned char *copy = malloc(n);
	if (!copy)
		return 0; /* this frame is not recorded; the next one may be */
	memcpy(copy, png, n);
	if (dg_gw_set_screen(s, copy, n) == 0)
		dg_gw_note(s, json_pack("{s:s, s:s, s:o, s:o}", "type", "cdp_frame", "frame",
					s->frame_hash,
					"first_req", first ? json_integer((json_int_t)first) : json_null(),
					"last_req", last ? json_integer((json_int_t)last) : json_null()));
	return 0;
}

static int decide_message(struct gw_session *s, const uint8_t *data, size_t len, bool noted,
			  struct dg_err *err)
{
	struct dg_cdp_decide q;
	int rc = dg_cdp_decide_decode(data, len, &q, err);
	if (rc)
		return rc;
	rc = decide(s, &q, noted, err);
	dg_cdp_decide_free(&q);
	return rc;
}

/* ---- NOTEs, recorded off the round trip ----
 *
 * The worker sends a NOTE as the command leaves for Chromium; deciding it
 * again and writing its event here then would take the CPU from the
 * browser answering it. It waits instead until a reply to a client is
 * written, or DG_GW_CDP_NOTES_WAIT_MS, whichever is first; anything
 * recorded after it (a decided command, a frame, the end) runs the
 * waiting ones first, so the recording keeps the worker's order. */

/* Decides and records s's waiting NOTEs in order; the first error. */
static int notes_run(struct gw_session *s, struct dg_err *err)
{
	struct gw_cdp_note *list = s->notes;
	int rc = 0;
	s->notes = NULL;
	s->notes_tail = &s->notes;
	s->n_notes = 0;
	lws_sul_cancel(&s->sul_notes);
	for (struct gw_cdp_note *n = list, *next; n; n = next) {
		next = n->next;
		if (rc == 0)
			rc = decide_message(s, n->data, n->len, true, err);
		free(n);
	}
	return rc;
}

void dg_gw_cdp_notes_run(struct gw_session *s)
{
	struct dg_err err = {{0}};
	if (notes_run(s, &err) != 0)
		s->gw->session_end(s, err.msg);
}

static void on_notes_due(lws_sorted_usec_list_t *sul)
{
	dg_gw_cdp_notes_run((struct gw_session *)((char *)sul -
						  offsetof(struct gw_session, sul_notes)));
}

/* Keeps a NOTE to record later (decoded then: a malformed one ends the
 * session when it is reached). */
static int note_keep(struct gw_session *s, const uint8_t *data, size_t len, struct dg_err *err)
{
	struct gw_cdp_note *n = malloc(sizeof(*n) + len);
	if (!n || s->n_notes >= DG_GW_CDP_NOTES_MAX) {
		free(n);
		int rc = notes_run(s, err);
		return rc ? rc : decide_message(s, data, len, true, err);
	}
	n->next = NULL;
	n->len = len;
	memcpy(n->data, data, len);
	if (!s->notes_tail)
		s->notes_tail = &s->notes;
	*s->notes_tail = n;
	s->notes_tail = &n->next;
	if (s->n_notes++ == 0)
		lws_sul_schedule(s->gw->ctx, 0, &s->sul_notes, on_notes_due,
				 DG_GW_CDP_NOTES_WAIT_MS * 1000);
	return 0;
}

int dg_gw_cdp_from_worker(struct gw_session *s, uint32_t type, const uint8_t *data, size_t len,
			  struct dg_err *err)
{
	if (type == DG_MSG_CDP_NOTE)
		return note_keep(s, data, len, err);
	if ((type == DG_MSG_CDP_FRAME || type == DG_MSG_CDP_DECIDE) && notes_run(s, err) != 0)
		return -EPROTO;
	if (type == DG_MSG_CDP_FRAME)
		return frame(s, data, len, err);
	if (type == DG_MSG_CDP_DECIDE)
		return decide_message(s, data, len, false, err);
	uint32_t client;
	const uint8_t *rest;
	size_t n;
	if (dg_cdp_client_of(data, len, &client, &rest, &n) != 0)
		return dg_err_set(err, -EPROTO, "worker: a CDP message without its client");
	struct conn *c = client_find(s, client);
	if (!c)
		return 0; /* it closed while the message was on its way */
	if (type == DG_MSG_CDP_OUT) {
		dg_gw_ws_send(c, false, rest, n);
		return 0;
	}
	if (type == DG_MSG_CDP_DROP) {
		char why[128];
		snprintf(why, sizeof(why), "%.*s", (int)(n < sizeof(why) - 1 ? n : sizeof(why) - 1),
			 (const char *)rest);
		for (char *p = why; *p; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
				*p = '?';
		client_close(c, LWS_CLOSE_STATUS_INVALID_PAYLOAD, why);
		return 0;
	}
	return dg_err_set(err, -EPROTO, "worker: an unknown CDP message");
}

void dg_gw_cdp_end(struct gw_session *s, const char *reason)
{
	struct dg_err err = {{0}};
	if (notes_run(s, &err) != 0)
		lwsl_err("deskgate: session %s: cached CDP commands not recorded: %s\n", s->id,
			 err.msg);
	json_decref(s->cdp_upload_ev);
	s->cdp_upload_ev = NULL;
	for (struct conn *c = s->cdp, *n; c; c = n) {
		n = c->next_cdp;
		c->s = NULL;
		client_close(c, LWS_CLOSE_STATUS_GOINGAWAY, reason);
	}
	s->cdp = NULL;
	s->n_cdp = 0;
}
