/* A human's takeover of a session (docs/api.md#takeover): an operator (or
 * an admin) takes control, the agent's actions are refused as paused
 * (runner.c), and the operator's own actions come on its channel
 * (/v1/sessions/{id}/operate) as canonical actions, decided by the same
 * policy and recorded with the operator as their actor. Control returns
 * when the operator releases it (or an admin does), after
 * limits.takeover_seconds, after limits.takeover_idle_seconds without an
 * operator's action, when the operator's channel closes, or with the
 * session. Its start and end are recorded ("takeover" events: who and why).
 *
 * Below session.c (which ends a takeover with its session), above the
 * runner (which it asks to withdraw an agent's action waiting for
 * approval, and to run the operator's).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gateway/server-priv.h"

static const long long US = 1000000;

json_t *dg_gw_takeover_json(const struct gw_session *s)
{
	if (!s->op.held)
		return json_null();
	const struct dg_gw_limits *l = &s->gw->cfg.limits;
	long long now = dg_now_ms();
	long long end = s->op.since_ms + (long long)l->takeover_seconds * 1000;
	long long idle = s->op.last_ms + (long long)l->takeover_idle_seconds * 1000;
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:b}", "operator", s->op.by.name, "role",
			 dg_role_name(s->op.by.role), "age_s",
			 (json_int_t)((now - s->op.since_ms) / 1000), "expires_in_s",
			 (json_int_t)((end - now + 999) / 1000), "idle_expires_in_s",
			 (json_int_t)((idle - now + 999) / 1000), "connected", s->op.conn != NULL);
}

/* The nearer of the two ends (the whole takeover, its idleness) decides
 * when the timer fires; an operator's action since only moves the idle one,
 * so a timer that fires early waits again. */
static void on_takeover_timer(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s =
		(struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_takeover));
	if (!s->used || !s->op.held)
		return;
	const struct dg_gw_limits *l = &s->gw->cfg.limits;
	long long now = dg_now_ms();
	long long end = s->op.since_ms + (long long)l->takeover_seconds * 1000;
	long long idle = s->op.last_ms + (long long)l->takeover_idle_seconds * 1000;
	if (now >= end)
		return dg_gw_takeover_end(s, "timeout", NULL);
	/* An operator's action in flight is not idleness. */
	if (now >= idle && !(s->cur && s->cur->human[0]))
		return dg_gw_takeover_end(s, "idle", NULL);
	long long next = end < idle ? end : idle;
	if (next <= now)
		next = now + 1000;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_takeover, on_takeover_timer,
			 (lws_usec_t)(next - now) * 1000);
}

int dg_gw_takeover_take(struct gw_session *s, const struct dg_principal *who, char *err,
			size_t errlen)
{
	if (s->state != S_READY || s->gone) {
		snprintf(err, errlen, "session %s is not ready", s->id);
		return -EAGAIN;
	}
	if (s->op.held) {
		if (strcmp(s->op.by.name, who->name) == 0)
			return 0; /* asked again: still theirs, the clocks unchanged */
		snprintf(err, errlen, "%s has control of session %s already", s->op.by.name, s->id);
		return -EBUSY;
	}
	const struct dg_gw_limits *l = &s->gw->cfg.limits;
	s->op.held = true;
	s->op.by = *who;
	s->op.since_ms = s->op.last_ms = dg_now_ms();
	s->op.conn = NULL;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_takeover, on_takeover_timer,
			 (lws_usec_t)(l->takeover_seconds < l->takeover_idle_seconds
					      ? l->takeover_seconds
					      : l->takeover_idle_seconds) * US);
	dg_gw_note(s, json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "type", "takeover", "state",
				"started", "by", who->name, "role", dg_role_name(who->role),
				"reason", "asked", "takeover_seconds", (int)l->takeover_seconds,
				"takeover_idle_seconds", (int)l->takeover_idle_seconds));
	dg_gw_runner_pause(s);
	/* CDP commands allowed earlier from the worker's verdict cache would
	 * still run unasked: the worker forgets them, and cdp-link.c keeps
	 * none while the takeover lasts. */
	if (s->profile == DG_PROFILE_BROWSER && s->worker &&
	    dg_ipc_send(lws_get_socket_fd(s->worker), DG_MSG_CDP_FORGET, "", 0) != 0)
		lwsl_err("deskgate: session %s: the worker could not be told to forget its CDP "
			 "verdicts\n", s->id);
	return 0;
}

void dg_gw_takeover_end(struct gw_session *s, const char *reason, const char *by)
{
	if (!s->op.held)
		return;
	lws_sul_cancel(&s->sul_takeover);
	struct conn *c = s->op.conn;
	char name[DG_TOKEN_NAME_MAX + 1];
	snprintf(name, sizeof(name), "%s", s->op.by.name);
	long long since = s->op.since_ms;
	memset(&s->op, 0, sizeof(s->op));
	json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:I}", "type", "takeover", "state", "ended",
			       "by", name, "reason", reason, "duration_ms",
			       (json_int_t)(dg_now_ms() - since));
	if (ev && by && strcmp(by, name) != 0)
		json_object_set_new(ev, "released_by", json_string(by));
	if (c) {
		/* The operator's queued actions are dropped unrun (one running
		 * at the desktop finishes, unanswered); the channel says why
		 * and closes. */
		dg_gw_runner_withdraw(s, c, "the takeover ended");
		c->s = NULL;
		json_t *last = json_deep_copy(ev);
		if (c->wsi) {
			dg_gw_ws_send_json(c, last);
			c->closing = true;
			snprintf(c->close_why, sizeof(c->close_why), "the takeover ended: %.100s",
				 reason);
			lws_callback_on_writable(c->wsi);
		} else {
			json_decref(last);
		}
	}
	dg_gw_note(s, ev);
}

int dg_gw_takeover_release(struct gw_session *s, const struct dg_principal *who, char *err,
			   size_t errlen)
{
	if (!s->op.held) {
		snprintf(err, errlen, "nobody has control of session %s", s->id);
		return -ENOENT;
	}
	if (strcmp(s->op.by.name, who->name) != 0 && who->role != DG_ROLE_ADMIN) {
		snprintf(err, errlen, "%s has control of session %s; only they or an admin may "
			 "hand it back", s->op.by.name, s->id);
		return -EPERM;
	}
	dg_gw_takeover_end(s, "released", who->name);
	return 0;
}

int dg_gw_takeover_may_attach(const struct gw_session *s, const struct conn *c, char *err,
			      size_t errlen)
{
	if (!s->op.held) {
		snprintf(err, errlen, "take control first (POST /v1/sessions/%s/takeover)", s->id);
		return -EPERM;
	}
	if (strcmp(s->op.by.name, c->who.name) != 0) {
		snprintf(err, errlen, "%s has control of the session", s->op.by.name);
		return -EBUSY;
	}
	if (s->op.conn) {
		snprintf(err, errlen, "the operator's channel is open already");
		return -EBUSY;
	}
	return 0;
}

void dg_gw_takeover_attach(struct gw_session *s, struct conn *c)
{
	s->op.conn = c;
	s->op.last_ms = dg_now_ms();
}

void dg_gw_takeover_detach(struct gw_session *s, struct conn *c)
{
	if (!s->op.held || s->op.conn != c)
		return;
	/* Nothing it sent runs once it is gone. */
	dg_gw_runner_withdraw(s, c, "the operator disconnected");
	s->op.conn = NULL;
	dg_gw_takeover_end(s, "disconnected", NULL);
}
