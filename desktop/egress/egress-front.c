/* The egress proxy's request fronts (egress-proxy-priv.h): what a
 * connection asks for, read from the client before any origin is touched.
 * An HTTP/1.x request head (CONNECT or absolute-form), or SOCKS5 (a first
 * byte of 5: the browser's WebSockets) with its greeting, its request and
 * then the tunnel's first bytes (a ws:// handshake decided by URL, a wss://
 * TLS record decided by origin). host:port is decided by the session's (or
 * the process's) policy; an allowed connection goes on to egress-conn.c
 * (dg_egress_proceed). Calls egress-conn.c and egress-events.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "desktop/egress/egress-proxy-priv.h"

/* The rules c is decided by: its session's own, else the process's. */
static const struct dg_policy *session_policy(const struct conn *c)
{
	return c->s && c->s->own_pol ? &c->s->pol : &G.pol;
}

static void socks_open(struct conn *c);
static void tunnel_advance(struct conn *c);

/* The request head is complete: decide, then find the address. */
static void decide(struct conn *c)
{
	struct dg_egress_req *r = &c->req;
	c->req_ok = true;
	snprintf(c->target, sizeof(c->target), "%s:%u", r->host, r->port);
	dg_policy_decide_egress(session_policy(c), r->host, r->port, &c->dec);
	if (c->dec.verdict != DG_VERDICT_ALLOW) {
		dg_egress_refuse(c, 403, c->dec.rule, c->dec.reason, true);
		return;
	}
	if (c->socks)
		socks_open(c);
	else
		dg_egress_proceed(c);
}

/* Drops the first n bytes of the head buffer (a SOCKS message handled). */
static void consume(struct conn *c, size_t n)
{
	memmove(c->head, c->head + n, c->head_got - n);
	c->head_got -= n;
}

/* A short SOCKS answer on a fresh connection: its socket buffer is empty,
 * so it goes out whole or the client is gone. */
static bool send_small(struct conn *c, const char *p, size_t n)
{
	ssize_t k;
	do
		k = send(c->cfd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k != (ssize_t)n) {
		dg_egress_conn_close(c, "the client does not take the SOCKS answer");
		return false;
	}
	return true;
}

/* ST_SOCKS: the greeting, then the request, then the egress decision. */
static void socks_advance(struct conn *c)
{
	struct dg_err e = {{0}};
	size_t used = 0;
	if (!c->socks_greeted) {
		int r = dg_egress_socks_greeting(c->head, c->head_got, &used, &e);
		if (r == -EAGAIN)
			return;
		if (r == -EACCES) {
			static const char none[2] = {DG_EGRESS_SOCKS_VERSION, (char)DG_EGRESS_SOCKS_NO_METHOD};
			dg_egress_emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
			if (send_small(c, none, sizeof(none)))
				dg_egress_conn_close(c, e.msg);
			return;
		}
		if (r != 0) {
			dg_egress_emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
			dg_egress_conn_close(c, e.msg);
			return;
		}
		static const char ok[2] = {DG_EGRESS_SOCKS_VERSION, 0};
		if (!send_small(c, ok, sizeof(ok)))
			return;
		consume(c, used);
		c->socks_greeted = true;
	}
	uint8_t code;
	int r = dg_egress_socks_request(c->head, c->head_got, &c->req, &used, &code, &e);
	if (r == -EAGAIN)
		return;
	if (r != 0) {
		char reply[DG_EGRESS_SOCKS_REPLY_LEN];
		dg_egress_emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
		if (send_small(c, reply, dg_egress_socks_reply(code, reply)))
			dg_egress_conn_close(c, e.msg);
		return;
	}
	consume(c, used);
	decide(c);
}

/* SOCKS, host and port allowed: the tunnel is answered open before the
 * origin is connected, so that the handshake can be read and decided
 * first; the origin sees nothing of a refused one. */
static void socks_open(struct conn *c)
{
	char reply[DG_EGRESS_SOCKS_REPLY_LEN];
	if (!send_small(c, reply, dg_egress_socks_reply(DG_EGRESS_SOCKS_OK, reply)))
		return;
	c->socks_replied = true;
	c->st = ST_TUNNEL;
	c->deadline = dg_now_ms() + G.head_ms;
	if (c->head_got > 0)
		tunnel_advance(c);
}

/* ST_TUNNEL: the WebSocket's first bytes say what it is. ws://: an HTTP/1.1
 * handshake, decided by its URL; wss://: a TLS record, decided by its
 * origin (the path is encrypted); anything else is refused. An "ask" is a
 * refusal: a page's WebSocket cannot wait for a human. */
static void tunnel_advance(struct conn *c)
{
	const struct dg_policy *p = session_policy(c);
	struct dg_decision d;
	if ((unsigned char)c->head[0] == 0x16) { /* TLS handshake record */
		char origin[DG_URL_HOST_MAX + 32];
		int k = snprintf(origin, sizeof(origin), "wss://%s", c->req.host);
		if (c->req.port != 443)
			snprintf(origin + k, sizeof(origin) - (size_t)k, ":%u", c->req.port);
		dg_policy_decide_ws_origin(p, true, c->req.host, c->req.port, &d);
		if (d.verdict == DG_VERDICT_ASK)
			d.verdict = DG_VERDICT_DENY;
		dg_egress_emit_url_decision(c, NULL, origin, &d);
	} else if (c->head[0] >= 'A' && c->head[0] <= 'Z') {
		struct dg_egress_req hs;
		struct dg_err e = {{0}};
		int r = dg_egress_parse_ws_handshake(c->head, c->head_got, c->req.host, c->req.port,
						     &hs, &e);
		if (r == -EAGAIN)
			return;
		if (r != 0) {
			dg_egress_refuse(c, 400, "egress.request", e.msg, true);
			return;
		}
		char *url = malloc(DG_URL_MAX + 1);
		if (!url) {
			dg_egress_conn_close(c, "out of memory");
			return;
		}
		int k = snprintf(url, DG_URL_MAX + 1, "ws://%s", c->req.host);
		if (c->req.port != 80)
			k += snprintf(url + k, (size_t)(DG_URL_MAX + 1 - k), ":%u", c->req.port);
		snprintf(url + k, (size_t)(DG_URL_MAX + 1 - k), "%.*s", (int)hs.path_len,
			 c->head + hs.path_off);
		dg_policy_decide_url(p, url, &d);
		if (d.verdict == DG_VERDICT_ASK) {
			d.verdict = DG_VERDICT_DENY;
			snprintf(d.reason, sizeof(d.reason), "%s",
				 "the policy asks for approval, and a page's WebSocket cannot wait for one");
		}
		dg_egress_emit_url_decision(c, url, NULL, &d);
		free(url);
	} else {
		dg_egress_refuse(c, 400, "egress.request",
				 "the SOCKS front carries WebSockets only: neither a WebSocket handshake nor "
		       "TLS", true);
		return;
	}
	if (d.verdict != DG_VERDICT_ALLOW) {
		dg_egress_refuse(c, 403, d.rule, d.reason, false);
		return;
	}
	c->req.head_len = 0; /* every byte read so far goes to the origin as it came */
	dg_egress_proceed(c);
}

static void on_head(struct conn *c)
{
	ssize_t k = recv(c->cfd, c->head + c->head_got, DG_EGRESS_HEAD_MAX - c->head_got,
			 MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {
		dg_egress_conn_close(c, NULL);
		return;
	}
	if (k == 0) {
		if (c->st != ST_HEAD)
			dg_egress_conn_close(c,
					     "the client ended its side during the SOCKS exchange");
		else if (c->head_got == 0) /* opened and closed: nothing to report */
			dg_egress_conn_close(c, NULL);
		else
			dg_egress_refuse(c, 400, "egress.request",
					 "the client ended its side before the request head was complete",
			       true);
		return;
	}
	c->head_got += (size_t)k;
	if (c->st == ST_HEAD && (unsigned char)c->head[0] == DG_EGRESS_SOCKS_VERSION) {
		c->socks = true;
		c->st = ST_SOCKS;
	}
	if (c->st == ST_SOCKS) {
		socks_advance(c);
		return;
	}
	if (c->st == ST_TUNNEL) {
		tunnel_advance(c);
		return;
	}
	struct dg_err e = {{0}};
	int r = dg_egress_parse_request(c->head, c->head_got, &c->req, &e);
	if (r == -EAGAIN)
		return;
	if (r != 0) {
		dg_egress_refuse(c, 400, "egress.request", e.msg, true);
		return;
	}
	decide(c);
}

void dg_egress_on_client(struct conn *c, uint32_t ev)
{
	switch (c->st) {
	case ST_HEAD:
	case ST_SOCKS:
	case ST_TUNNEL:
		on_head(c);
		break;
	case ST_REFUSE:
		dg_egress_refuse_pump(c);
		break;
	case ST_RELAY:
		if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
			dg_egress_relay_read(c, 0);
		if (!c->dead && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
			dg_egress_relay_write(c, 1);
		if (!c->dead) {
			dg_egress_relay_write(c, 0); /* what was just read goes on at once */
			dg_egress_relay_settle(c);
		}
		break;
	default:
		break; /* not registered in these states */
	}
}
