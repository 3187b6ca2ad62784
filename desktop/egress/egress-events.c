/* The egress proxy's events to the gateway (egress-proxy-priv.h): built
 * here, sent on the control channel when it takes them, queued up to
 * DG_EGRESS_EVENTS_MAX when it does not, dropped and counted past that.
 * Every rule and reason an event carries is cut and made
 * printable (jtext). Calls nothing else of the proxy.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "desktop/egress/egress-proxy-priv.h"

void dg_egress_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "deskgate egress: %s\n", line);
}

static void ctl_interest(void)
{
	uint32_t want = EPOLLIN | (G.q_n ? EPOLLOUT : 0);
	if (want == G.ctl_ev)
		return;
	struct epoll_event e = {.events = want, .data.ptr = &G.ctl_ep};
	epoll_ctl(G.ep, EPOLL_CTL_MOD, G.ctl, &e);
	G.ctl_ev = want;
}

/* 1 sent, 0 the channel is full, -1 the gateway is gone (the read side
 * will see it and end the proxy). */
static int send_event(const char *s)
{
	ssize_t k;
	do
		k = send(G.ctl, s, strlen(s), MSG_DONTWAIT | MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k >= 0)
		return 1;
	return errno == EAGAIN ? 0 : -1;
}

static void enqueue(char *s)
{
	G.q[(G.q_head + G.q_n) % DG_EGRESS_EVENTS_MAX] = s;
	G.q_n++;
}

/* Queues the "egress_dropped" event when events were dropped and there is
 * room for it (and for reserve more). */
static void note_dropped(int reserve)
{
	if (!G.dropped || G.q_n + 1 + reserve > DG_EGRESS_EVENTS_MAX)
		return;
	json_t *d = json_pack("{s:s, s:I}", "event", "egress_dropped", "dropped",
			      (json_int_t)G.dropped);
	char *ds = d ? json_dumps(d, JSON_COMPACT) : NULL;
	json_decref(d);
	if (ds) {
		enqueue(ds);
		G.dropped = 0;
	}
}

void dg_egress_flush_events(void)
{
	for (int pass = 0; pass < 2; pass++) {
		while (G.q_n) {
			char *s = G.q[G.q_head];
			if (send_event(s) == 0)
				break;
			free(s);
			G.q[G.q_head] = NULL;
			G.q_head = (G.q_head + 1) % DG_EGRESS_EVENTS_MAX;
			G.q_n--;
		}
		note_dropped(0);
	}
	ctl_interest();
}

/* Sends ev (stolen) now, or queues it; past DG_EGRESS_EVENTS_MAX queued it
 * is dropped and counted, and the count goes out as one "egress_dropped"
 * event when there is room again, where the gap is. */
void dg_egress_emit(json_t *ev)
{
	char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!s) {
		G.dropped++;
		return;
	}
	if (G.verbose)
		dg_egress_log("%s", s);
	if (G.q_n == 0 && G.dropped == 0) {
		int r = send_event(s);
		if (r != 0) {
			free(s);
			return;
		}
	}
	note_dropped(1);
	if (G.dropped == 0 && G.q_n < DG_EGRESS_EVENTS_MAX) {
		enqueue(s);
	} else {
		free(s);
		G.dropped++;
	}
	ctl_interest();
}

/* Printable ASCII of s, at most max bytes, as a JSON string: reasons are
 * built from checked or quoted text, and this keeps it so. */
static json_t *jtext(const char *s, size_t max)
{
	char b[DG_EGRESS_REASON_MAX + 1];
	size_t i = 0;
	if (max > DG_EGRESS_REASON_MAX)
		max = DG_EGRESS_REASON_MAX;
	for (; s && s[i] && i < max; i++) {
		unsigned char ch = (unsigned char)s[i];
		b[i] = ch < 0x20 || ch >= 0x7f ? '?' : (char)ch;
	}
	b[i] = '\0';
	return json_string(b);
}

void dg_egress_emit_decision(struct session *s, uint64_t n, struct conn *c, const char *verdict,
			     const char *rule, const char *reason)
{
	json_t *ev = json_pack("{s:s, s:s, s:I}", "event", "egress", "session", s->id, "conn",
			       (json_int_t)n);
	if (!ev) {
		G.dropped++;
		return;
	}
	if (c && c->req_ok) {
		json_object_set_new(ev, "method", json_string(c->req.method));
		json_object_set_new(ev, "target", json_string(c->target));
	}
	json_object_set_new(ev, "verdict", json_string(verdict));
	json_object_set_new(ev, "rule", jtext(rule, DG_DECISION_RULE_MAX));
	json_object_set_new(ev, "reason", jtext(reason, DG_EGRESS_REASON_MAX));
	if (c && c->addr_s[0])
		json_object_set_new(ev, "address", json_string(c->addr_s));
	if (c)
		c->evented = true;
	dg_egress_emit(ev);
}

/* A WebSocket decided by the "urls" rules (SOCKS front): the shape of the
 * browser's requests that the guard holds, so that recordings and
 * observers show it with them; url is the ws:// URL, or NULL for a wss://
 * decided by its origin alone. */
void dg_egress_emit_url_decision(struct conn *c, const char *url, const char *origin,
				 const struct dg_decision *d)
{
	json_t *ev = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:s, s:o, s:s}", "event",
			       "decision", "session", c->s->id, "conn", (json_int_t)c->n, "layer",
			       "browser", "via", "egress", "method", "GET", "resource", "WebSocket",
			       "target", "websocket", "url", url ? json_string(url) : json_null(),
			       "verdict", dg_verdict_name(d->verdict));
	if (!ev) {
		G.dropped++;
		return;
	}
	if (origin)
		json_object_set_new(ev, "origin", json_string(origin));
	json_object_set_new(ev, "rule", jtext(d->rule, DG_DECISION_RULE_MAX));
	json_object_set_new(ev, "reason", jtext(d->reason, DG_EGRESS_REASON_MAX));
	dg_egress_emit(ev);
}

void dg_egress_emit_closed(struct session *s, uint64_t n, uint64_t up, uint64_t down,
			   long long ms, const char *error)
{
	json_t *ev = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "event", "egress_closed",
			       "session", s->id, "conn", (json_int_t)n, "bytes_up", (json_int_t)up,
			       "bytes_down", (json_int_t)down, "duration_ms", (json_int_t)ms);
	if (!ev) {
		G.dropped++;
		return;
	}
	json_object_set_new(ev, "error",
			    error && error[0] ? jtext(error, DG_EGRESS_REASON_MAX) : json_null());
	dg_egress_emit(ev);
}

void dg_egress_emit_session(const char *id, const char *op, const char *error, int closed)
{
	json_t *ev = json_pack("{s:s, s:s, s:s, s:b}", "event", "egress_session", "session", id,
			       "op", op, "ok", error == NULL);
	if (ev && error)
		json_object_set_new(ev, "error", jtext(error, DG_EGRESS_REASON_MAX));
	if (ev && closed >= 0)
		json_object_set_new(ev, "closed", json_integer(closed));
	dg_egress_emit(ev);
}

void dg_egress_ctl_error(const char *fmt, ...)
{
	char msg[DG_EGRESS_REASON_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dg_egress_log("ignored a control message: %s", msg);
	dg_egress_emit(json_pack("{s:s, s:o}", "event", "egress_error", "error",
				 jtext(msg, DG_EGRESS_REASON_MAX)));
}

void dg_egress_events_free(void)
{
	for (int i = 0; i < G.q_n; i++)
		free(G.q[(G.q_head + i) % DG_EGRESS_EVENTS_MAX]);
	G.q_n = 0;
}
