/* The egress proxy process and its start-up (egress.h, egress-priv.h); the
 * gateway's side of its channel is desktop/proto/egress-client.c.
 *
 * Ownership: struct egress (G) exists only in the forked proxy; the gateway
 * side uses struct dg_egress alone. In the proxy every connection belongs to
 * exactly one session and is freed only at the end of a loop turn (the
 * graveyard), so an epoll event later in the same batch never touches freed
 * memory. A name lookup belongs to its connection until that connection
 * closes; glibc may still be writing to it then (gai_cancel cannot stop a
 * running lookup), so it is kept, charged to the session, until glibc is
 * done with it.
 *
 * Fairness: level-triggered epoll, one read of at most DG_EGRESS_BUF per
 * ready descriptor per turn, at most DG_EGRESS_ACCEPT_BURST accepts per
 * listener per turn, per-session caps on connections, lookups and bytes:
 * one session's flood takes turns with every other descriptor and cannot
 * take more than its share of the global caps.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/egress/egress-priv.h"
#include "desktop/proto/proto.h"

_Static_assert(DG_EGRESS_BUF >= DG_EGRESS_HEAD_MAX + DG_EGRESS_REWRITE_EXTRA + 2,
	       "a rewritten head and the bytes read after it must fit one relay buffer");
_Static_assert(DG_EGRESS_NOFILE > 2 * DG_EGRESS_CONNS_MAX + DG_EGRESS_SESSIONS_MAX + 16,
	       "the descriptor limit must cover every connection the caps allow");

/* Present when built with LeakSanitizer: the proxy ends with _exit (it must
 * not run the atexit handlers of the process it was forked from), so it
 * asks for the leak check itself. */
extern void __lsan_do_leak_check(void) __attribute__((weak));

/* ---- the proxy's state ---------------------------------------------------- */

enum ep_kind { EP_CTL, EP_SIG, EP_LISTEN, EP_CLIENT, EP_ORIGIN };

/* What an epoll registration points at; embedded in its owner. */
struct ep {
	enum ep_kind kind;
};

enum cstate {
	ST_HEAD,    /* reading the request head */
	ST_SOCKS,   /* SOCKS5: reading the greeting, then the request */
	ST_TUNNEL,  /* SOCKS5 answered: reading the WebSocket's first bytes */
	ST_LOOKUP,  /* waiting for a lookup slot or for the lookup */
	ST_CONNECT, /* connecting to the origin */
	ST_RELAY,   /* relaying both ways */
	ST_REFUSE,  /* writing an error answer, then lingering until the client's FIN */
};

/* One direction of a relay: 0 client -> origin, 1 origin -> client. */
struct dir {
	char *buf; /* DG_EGRESS_BUF bytes, owned */
	size_t off, len;
	bool eof;  /* the source sent FIN */
	bool shut; /* FIN passed on to the destination */
	uint64_t bytes;
};

struct session;
struct lookup;

struct conn {
	struct ep cep, oep; /* client, origin */
	struct session *s;
	struct conn *snext, *sprev; /* the session's connections, in accept order */
	struct conn *next, *prev;   /* every connection */
	struct conn *grave;         /* the graveyard, once dead */
	uint64_t n;
	enum cstate st;
	int cfd, ofd;
	uint32_t cev, oev; /* registered epoll events; 0: not registered */
	bool dead;
	bool over_cap;     /* answered 429 for the session's connection cap */
	bool evented;      /* an "egress" event was sent: "egress_closed" follows */
	bool req_ok;
	bool socks;        /* a SOCKS5 connection: one of the browser's WebSockets */
	bool socks_greeted, socks_replied;
	char *head;        /* DG_EGRESS_HEAD_MAX bytes, owned, until the relay starts */
	size_t head_got;
	struct dg_egress_req req;
	char target[DG_URL_HOST_MAX + 8];
	struct dg_decision dec;
	struct lookup *lk;
	bool lookup_wait; /* waiting for one of the session's lookup slots */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	char addr_s[INET6_ADDRSTRLEN + 16];
	struct dir d[2];
	long long t0, deadline;
	char err[DG_EGRESS_REASON_MAX + 1]; /* for "egress_closed"; empty: none */
	char resp[DG_EGRESS_RESPONSE_MAX];
	size_t resp_off, resp_len;
	bool resp_sent;
	size_t lingered;
};

struct session {
	bool used;
	bool removing;
	char id[DG_SESSION_ID_MAX + 1];
	struct ep lep;
	int lfd;
	struct conn *head, *tail;
	int n_active;  /* connections within the cap (all states) */
	int n_capref;  /* connections answered 429 for the cap, still open */
	int lookups;   /* lookups in flight charged to the session */
	uint64_t bytes;
	uint64_t next_conn;
	/* The session's own egress rules when the gateway sent them (a session
	 * may run under another policy than the gateway's); else the
	 * process's policy decides. Owned. */
	struct dg_policy pol;
	bool own_pol;
};

struct lookup {
	struct gaicb cb;
	struct addrinfo hints;
	char name[DG_URL_HOST_MAX + 1];
	struct conn *c;    /* NULL once its connection is gone */
	struct session *s; /* charged to; NULL once the session is gone */
	struct lookup *next, *prev;
};

struct egress {
	int ep, ctl, sig;
	struct ep ctl_ep, sig_ep;
	uint32_t ctl_ev;
	struct dg_policy pol;
	struct dg_egress_override ov[DG_EGRESS_OVERRIDES_MAX];
	int n_ov;
	bool verbose;
	int head_ms, connect_ms, idle_ms;
	uint64_t bytes_max;
	struct session sessions[DG_EGRESS_SESSIONS_MAX];
	struct conn *conns;
	int n_conns;
	struct conn *grave;
	struct lookup *lookups;
	char *q[DG_EGRESS_EVENTS_MAX]; /* events the gateway has not taken yet */
	int q_head, q_n;
	uint64_t dropped;
	char *rbuf; /* DG_SEQ_MAX + 1 */
	bool filtered; /* its seccomp filter is installed */
};

static struct egress G;

static void logmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logmsg(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "deskgate egress: %s\n", line);
}

/* ---- events to the gateway ------------------------------------------------- */

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

static void flush_events(void)
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
static void emit(json_t *ev)
{
	char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!s) {
		G.dropped++;
		return;
	}
	if (G.verbose)
		logmsg("%s", s);
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

static void emit_decision(struct session *s, uint64_t n, struct conn *c, const char *verdict,
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
	emit(ev);
}

/* A WebSocket decided by the "urls" rules (SOCKS front): the shape of the
 * browser's requests that the guard holds, so that recordings and
 * observers show it with them; url is the ws:// URL, or NULL for a wss://
 * decided by its origin alone. */
static void emit_url_decision(struct conn *c, const char *url, const char *origin,
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
	emit(ev);
}

static void emit_closed(struct session *s, uint64_t n, uint64_t up, uint64_t down, long long ms,
			const char *error)
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
	emit(ev);
}

static void emit_session(const char *id, const char *op, const char *error, int closed)
{
	json_t *ev = json_pack("{s:s, s:s, s:s, s:b}", "event", "egress_session", "session", id,
			       "op", op, "ok", error == NULL);
	if (ev && error)
		json_object_set_new(ev, "error", jtext(error, DG_EGRESS_REASON_MAX));
	if (ev && closed >= 0)
		json_object_set_new(ev, "closed", json_integer(closed));
	emit(ev);
}

static void ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ctl_error(const char *fmt, ...)
{
	char msg[DG_EGRESS_REASON_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	logmsg("ignored a control message: %s", msg);
	emit(json_pack("{s:s, s:o}", "event", "egress_error", "error",
		       jtext(msg, DG_EGRESS_REASON_MAX)));
}

/* ---- connections ------------------------------------------------------------ */

static void interest(int fd, struct ep *ep, uint32_t *cur, uint32_t want)
{
	if (fd < 0 || *cur == want)
		return;
	struct epoll_event e = {.events = want, .data.ptr = ep};
	if (want == 0)
		epoll_ctl(G.ep, EPOLL_CTL_DEL, fd, NULL);
	else
		epoll_ctl(G.ep, *cur == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &e);
	*cur = want;
}

static void close_fd(int *fd, uint32_t *ev)
{
	dg_close_fd(fd); /* also leaves the epoll set: no descriptor is ever duplicated */
	*ev = 0;
}

static void lookup_free(struct lookup *l)
{
	if (l->prev)
		l->prev->next = l->next;
	else
		G.lookups = l->next;
	if (l->next)
		l->next->prev = l->prev;
	if (l->s)
		l->s->lookups--;
	if (l->cb.ar_result)
		freeaddrinfo(l->cb.ar_result);
	free(l);
}

/* The connection gives its lookup up: freed when glibc is done with it,
 * now or later. */
static void lookup_abandon(struct conn *c)
{
	struct lookup *l = c->lk;
	c->lk = NULL;
	if (!l)
		return;
	l->c = NULL;
	int r = gai_cancel(&l->cb);
	if (r == EAI_CANCELED || r == EAI_ALLDONE)
		lookup_free(l);
}

static void lookup_begin(struct conn *c);

/* Starts waiting lookups of s while it has slots. */
static void lookup_release(struct session *s)
{
	if (!s || !s->used || s->removing)
		return;
	for (struct conn *c = s->head; c && s->lookups < DG_EGRESS_SESSION_LOOKUPS_MAX;) {
		struct conn *next = c->snext;
		if (c->lookup_wait && !c->dead) {
			c->lookup_wait = false;
			lookup_begin(c);
		}
		c = next;
	}
}

/* Lets go of everything c holds towards the origin: its socket, its
 * lookup, the request head and the relay buffers. Returns whether a lookup
 * was charged to the session (the caller releases it once c is settled). */
static bool drop_origin(struct conn *c)
{
	close_fd(&c->ofd, &c->oev);
	bool had_lookup = c->lk != NULL;
	lookup_abandon(c);
	c->lookup_wait = false;
	free(c->head);
	c->head = NULL;
	for (int i = 0; i < 2; i++) {
		free(c->d[i].buf);
		c->d[i].buf = NULL;
	}
	return had_lookup;
}

/* Ends c: its "egress_closed" event when it had an "egress" one, with error
 * as what ended it ("" a clean end, NULL: c->err, the refusal, if any);
 * descriptors, lookup, counters. Freed at the end of the loop turn. */
static void conn_close(struct conn *c, const char *error)
{
	if (c->dead)
		return;
	struct session *s = c->s;
	if (c->evented)
		emit_closed(s, c->n, c->d[0].bytes, c->d[1].bytes, dg_now_ms() - c->t0,
			    error ? error : c->err);
	close_fd(&c->cfd, &c->cev);
	bool had_lookup = drop_origin(c);
	if (c->over_cap)
		s->n_capref--;
	else
		s->n_active--;
	if (c->sprev)
		c->sprev->snext = c->snext;
	else
		s->head = c->snext;
	if (c->snext)
		c->snext->sprev = c->sprev;
	else
		s->tail = c->sprev;
	if (c->prev)
		c->prev->next = c->next;
	else
		G.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	G.n_conns--;
	c->dead = true;
	c->grave = G.grave;
	G.grave = c;
	if (had_lookup)
		lookup_release(s);
}

static void bury(void)
{
	while (G.grave) {
		struct conn *c = G.grave;
		G.grave = c->grave;
		free(c);
	}
}

static void refuse_pump(struct conn *c);

/* Answers status and lingers (ST_REFUSE). With decision, reports the
 * refusal as an "egress" event (verdict deny); without, the connection was
 * already decided and the reason goes to its "egress_closed" event. */
static void refuse(struct conn *c, int status, const char *rule, const char *reason,
		   bool decision)
{
	if (decision)
		emit_decision(c->s, c->n, c, "deny", rule, reason);
	if (!c->err[0])
		snprintf(c->err, sizeof(c->err), "answered %d: %s", status, reason);
	bool had_lookup = drop_origin(c);
	if (c->socks && !c->socks_replied) {
		/* Still SOCKS: its reply code, not an HTTP answer. */
		uint8_t code = status == 403 ? DG_EGRESS_SOCKS_RULESET :
			       status == 502 ? DG_EGRESS_SOCKS_UNREACHABLE :
			       status == 504 || status == 408 ? DG_EGRESS_SOCKS_TIMEOUT :
			       DG_EGRESS_SOCKS_FAILURE;
		c->resp_len = dg_egress_socks_reply(code, c->resp);
		c->socks_replied = true;
	} else {
		c->resp_len = dg_egress_error_response(status, rule, reason, c->resp,
						       sizeof(c->resp));
	}
	c->resp_off = 0;
	c->st = ST_REFUSE;
	c->deadline = dg_now_ms() + DG_EGRESS_LINGER_MS;
	if (had_lookup)
		lookup_release(c->s);
	refuse_pump(c);
}

static void refuse_pump(struct conn *c)
{
	while (c->resp_off < c->resp_len) {
		ssize_t k = send(c->cfd, c->resp + c->resp_off, c->resp_len - c->resp_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			interest(c->cfd, &c->cep, &c->cev, EPOLLOUT);
			return;
		}
		if (k <= 0) {
			conn_close(c, NULL);
			return;
		}
		c->resp_off += (size_t)k;
	}
	if (!c->resp_sent) {
		shutdown(c->cfd, SHUT_WR);
		c->resp_sent = true;
	}
	/* Read and discard until the client's FIN: closing with unread input
	 * would reset the connection, and the client could lose the answer. */
	char tmp[4096];
	ssize_t k = recv(c->cfd, tmp, sizeof(tmp), MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
		interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
		return;
	}
	if (k <= 0) {
		conn_close(c, NULL);
		return;
	}
	c->lingered += (size_t)k;
	if (c->lingered > DG_EGRESS_LINGER_BYTES)
		conn_close(c, NULL);
	else
		interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
}

static struct conn *conn_new(struct session *s, int fd)
{
	struct conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->cep.kind = EP_CLIENT;
	c->oep.kind = EP_ORIGIN;
	c->s = s;
	c->cfd = fd;
	c->ofd = -1;
	c->n = ++s->next_conn;
	c->t0 = dg_now_ms();
	c->sprev = s->tail;
	if (s->tail)
		s->tail->snext = c;
	else
		s->head = c;
	s->tail = c;
	c->next = G.conns;
	if (G.conns)
		G.conns->prev = c;
	G.conns = c;
	G.n_conns++;
	return c;
}

/* ---- relay ------------------------------------------------------------------ */

static void relay_settle(struct conn *c);

/* Takes n more bytes of c's session; false (and c refused) past the cap. */
static bool charge(struct conn *c, int dir, size_t n)
{
	struct session *s = c->s;
	if (n > G.bytes_max - s->bytes) {
		char why[160];
		snprintf(why, sizeof(why), "the session reached its cap of %llu relayed bytes",
			 (unsigned long long)G.bytes_max);
		emit_decision(s, c->n, c, "deny", "egress.caps", why);
		s->bytes = G.bytes_max;
		conn_close(c, why);
		return false;
	}
	s->bytes += n;
	c->d[dir].bytes += n;
	return true;
}

static void relay_read(struct conn *c, int i)
{
	struct dir *d = &c->d[i];
	int src = i == 0 ? c->cfd : c->ofd;
	if (d->eof || d->len == DG_EGRESS_BUF)
		return;
	if (d->off + d->len == DG_EGRESS_BUF) {
		memmove(d->buf, d->buf + d->off, d->len);
		d->off = 0;
	}
	size_t room = DG_EGRESS_BUF - d->off - d->len;
	/* One byte past what the session may still relay: reading it proves the
	 * cap is passed, while exactly the cap still goes through. */
	uint64_t left = G.bytes_max - c->s->bytes;
	if (left + 1 < room)
		room = (size_t)left + 1;
	ssize_t k = recv(src, d->buf + d->off + d->len, room, MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {
		char e[128];
		snprintf(e, sizeof(e), "reading from the %s: %s", i == 0 ? "client" : "origin",
			 strerror(errno));
		conn_close(c, e);
		return;
	}
	if (k == 0) {
		d->eof = true;
		return;
	}
	if (!charge(c, i, (size_t)k))
		return;
	d->len += (size_t)k;
	c->deadline = dg_now_ms() + G.idle_ms;
}

static void relay_write(struct conn *c, int i)
{
	struct dir *d = &c->d[i];
	int dst = i == 0 ? c->ofd : c->cfd;
	if (d->len == 0)
		return;
	ssize_t k = send(dst, d->buf + d->off, d->len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {
		char e[128];
		snprintf(e, sizeof(e), "writing to the %s: %s", i == 0 ? "origin" : "client",
			 strerror(errno));
		conn_close(c, e);
		return;
	}
	d->off += (size_t)k;
	d->len -= (size_t)k;
	if (d->len == 0)
		d->off = 0;
	c->deadline = dg_now_ms() + G.idle_ms;
}

/* Passes FINs on, ends a finished relay, sets what to wait for. */
static void relay_settle(struct conn *c)
{
	if (c->dead)
		return;
	for (int i = 0; i < 2; i++) {
		struct dir *d = &c->d[i];
		if (d->eof && d->len == 0 && !d->shut) {
			shutdown(i == 0 ? c->ofd : c->cfd, SHUT_WR);
			d->shut = true;
		}
	}
	if (c->d[0].shut && c->d[1].shut) {
		conn_close(c, "");
		return;
	}
	uint32_t cw = 0, ow = 0;
	if (!c->d[0].eof && c->d[0].len < DG_EGRESS_BUF)
		cw |= EPOLLIN;
	if (c->d[1].len)
		cw |= EPOLLOUT;
	if (!c->d[1].eof && c->d[1].len < DG_EGRESS_BUF)
		ow |= EPOLLIN;
	if (c->d[0].len)
		ow |= EPOLLOUT;
	/* A descriptor with nothing to wait for leaves the set: epoll reports
	 * a hang-up whatever is asked, and the loop would spin on it. */
	interest(c->cfd, &c->cep, &c->cev, cw);
	interest(c->ofd, &c->oep, &c->oev, ow);
}

static void put(struct dir *d, const char *p, size_t n)
{
	memcpy(d->buf + d->off + d->len, p, n);
	d->len += n;
}

/* The origin answered the connect: start relaying. */
static void connected(struct conn *c)
{
	static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	c->st = ST_RELAY;
	c->deadline = dg_now_ms() + G.idle_ms;
	for (int i = 0; i < 2; i++) {
		c->d[i].buf = malloc(DG_EGRESS_BUF);
		if (!c->d[i].buf) {
			conn_close(c, "out of memory");
			return;
		}
	}
	size_t rest = c->head_got - c->req.head_len;
	if (c->socks) {
		/* The SOCKS reply went out before the handshake was read: all of
		 * head is tunnel bytes (req.head_len is 0). */
	} else if (c->req.connect) {
		put(&c->d[1], established, sizeof(established) - 1);
	} else {
		int n = dg_egress_rewrite_head(c->head, &c->req, c->d[0].buf, DG_EGRESS_BUF);
		if (n < 0) { /* cannot happen: the buffer holds a head and more */
			conn_close(c, "rewritten head too long");
			return;
		}
		c->d[0].len = (size_t)n;
		if (!charge(c, 0, (size_t)n))
			return;
	}
	/* Bytes the client sent after the head (a body, or tunnel bytes sent
	 * early) go on verbatim. */
	put(&c->d[0], c->head + c->req.head_len, rest);
	if (rest && !charge(c, 0, rest))
		return;
	free(c->head);
	c->head = NULL;
	relay_write(c, 0);
	if (!c->dead)
		relay_write(c, 1);
	relay_settle(c);
}

static void connect_start(struct conn *c)
{
	int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char why[DG_EGRESS_REASON_MAX];
	if (fd < 0) {
		snprintf(why, sizeof(why), "socket: %s", strerror(errno));
		refuse(c, 502, "egress.connect", why, false);
		return;
	}
	c->ofd = fd;
	int r;
	do
		r = connect(fd, (struct sockaddr *)&c->addr, c->addr_len);
	while (r < 0 && errno == EINTR);
	if (r == 0) {
		connected(c);
		return;
	}
	if (errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "connecting to %s: %s", c->addr_s, strerror(errno));
		refuse(c, 502, "egress.connect", why, false);
		return;
	}
	c->st = ST_CONNECT;
	c->deadline = dg_now_ms() + G.connect_ms;
	interest(c->ofd, &c->oep, &c->oev, EPOLLOUT);
}

/* Everything is checked: report the allow and connect to c->addr. */
static void allow(struct conn *c)
{
	dg_egress_addr_format((struct sockaddr *)&c->addr, c->addr_s, sizeof(c->addr_s));
	emit_decision(c->s, c->n, c, "allow", c->dec.rule, c->dec.reason);
	connect_start(c);
}

static void lookup_begin(struct conn *c)
{
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l) {
		refuse(c, 502, "egress.resolve", "out of memory for a lookup", true);
		return;
	}
	snprintf(l->name, sizeof(l->name), "%s", c->req.host);
	/* Every family, without AI_ADDRCONFIG: every address the name has is
	 * checked, also those of a family this host cannot reach (glibc sorts
	 * unreachable ones last, RFC 6724), and a host with only loopback
	 * configured does not see names vanish. */
	l->hints.ai_family = AF_UNSPEC;
	l->hints.ai_socktype = SOCK_STREAM;
	l->hints.ai_protocol = IPPROTO_TCP;
	l->cb.ar_name = l->name;
	l->cb.ar_request = &l->hints;
	/* The signal only wakes the loop, which then asks every lookup in
	 * flight whether it is done: a lost or merged signal loses nothing. */
	struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
	struct gaicb *list[1] = {&l->cb};
	int r = getaddrinfo_a(GAI_NOWAIT, list, 1, &sev);
	if (r != 0) {
		free(l);
		char why[DG_EGRESS_REASON_MAX];
		snprintf(why, sizeof(why), "looking up %s: %s", c->req.host, gai_strerror(r));
		refuse(c, 502, "egress.resolve", why, true);
		return;
	}
	l->c = c;
	l->s = c->s;
	c->s->lookups++;
	l->next = G.lookups;
	if (G.lookups)
		G.lookups->prev = l;
	G.lookups = l;
	c->lk = l;
}

/* c's lookup l is done: check every address, then connect to the first. */
static void lookup_done(struct conn *c, struct lookup *l)
{
	char why[DG_URL_HOST_MAX + DG_EGRESS_REASON_MAX + 32];
	int r = gai_error(&l->cb);
	c->lk = NULL;
	if (r != 0) {
		snprintf(why, sizeof(why), "looking up %s: %s", c->req.host, gai_strerror(r));
		refuse(c, 502, "egress.resolve", why, true);
		return;
	}
	bool found = false;
	for (struct addrinfo *ai = l->cb.ar_result; ai; ai = ai->ai_next) {
		struct sockaddr_storage a;
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(a)) {
			snprintf(why, sizeof(why), "%s has an address of family %d", c->req.host,
				 ai->ai_family);
			refuse(c, 403, "egress.address", why, true);
			return;
		}
		memset(&a, 0, sizeof(a));
		memcpy(&a, ai->ai_addr, ai->ai_addrlen);
		if (ai->ai_family == AF_INET)
			((struct sockaddr_in *)&a)->sin_port = htons(c->req.port);
		else
			((struct sockaddr_in6 *)&a)->sin6_port = htons(c->req.port);
		char w[DG_EGRESS_REASON_MAX];
		if (dg_egress_addr_check((struct sockaddr *)&a, w, sizeof(w)) != 0) {
			snprintf(why, sizeof(why), "%s resolves to %s", c->req.host, w);
			refuse(c, 403, "egress.address", why, true);
			return;
		}
		if (!found) {
			c->addr = a;
			c->addr_len = (socklen_t)ai->ai_addrlen;
			found = true;
		}
	}
	if (!found) {
		snprintf(why, sizeof(why), "%s has no address", c->req.host);
		refuse(c, 502, "egress.resolve", why, true);
		return;
	}
	allow(c);
}

static void on_signal(void)
{
	struct signalfd_siginfo si;
	while (read(G.sig, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	struct session *touched[DG_EGRESS_SESSIONS_MAX];
	int nt = 0;
	for (struct lookup *l = G.lookups, *next; l; l = next) {
		next = l->next;
		if (gai_error(&l->cb) == EAI_INPROGRESS)
			continue;
		struct conn *c = l->c;
		struct session *s = l->s;
		if (c && !c->dead)
			lookup_done(c, l);
		lookup_free(l);
		bool seen = false;
		for (int i = 0; i < nt && !seen; i++)
			seen = touched[i] == s;
		if (s && !seen && nt < DG_EGRESS_SESSIONS_MAX)
			touched[nt++] = s;
	}
	for (int i = 0; i < nt; i++)
		lookup_release(touched[i]);
}

static const struct dg_policy *session_policy(const struct conn *c)
{
	return c->s && c->s->own_pol ? &c->s->pol : &G.pol;
}

static void proceed(struct conn *c);
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
		refuse(c, 403, c->dec.rule, c->dec.reason, true);
		return;
	}
	if (c->socks)
		socks_open(c);
	else
		proceed(c);
}

/* Finds the address of a decided connection, then connects. */
static void proceed(struct conn *c)
{
	struct dg_egress_req *r = &c->req;
	interest(c->cfd, &c->cep, &c->cev, 0); /* nothing more is read until connected */
	for (int i = 0; i < G.n_ov; i++) {
		if (G.ov[i].port == r->port && strcmp(G.ov[i].host, r->host) == 0) {
			c->addr = G.ov[i].addr;
			c->addr_len = G.ov[i].addr_len;
			allow(c);
			return;
		}
	}
	if (r->host_is_ip) {
		char why[DG_EGRESS_REASON_MAX];
		if (dg_egress_literal_addr(r->host, r->port, &c->addr, &c->addr_len) != 0) {
			refuse(c, 400, "egress.request", "the host is not an address", true);
			return;
		}
		if (dg_egress_addr_check((struct sockaddr *)&c->addr, why, sizeof(why)) != 0) {
			refuse(c, 403, "egress.address", why, true);
			return;
		}
		allow(c);
		return;
	}
	c->st = ST_LOOKUP;
	c->deadline = dg_now_ms() + DG_EGRESS_RESOLVE_TIMEOUT_MS;
	if (c->s->lookups >= DG_EGRESS_SESSION_LOOKUPS_MAX)
		c->lookup_wait = true;
	else
		lookup_begin(c);
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
		conn_close(c, "the client does not take the SOCKS answer");
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
			emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
			if (send_small(c, none, sizeof(none)))
				conn_close(c, e.msg);
			return;
		}
		if (r != 0) {
			emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
			conn_close(c, e.msg);
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
		emit_decision(c->s, c->n, c, "deny", "egress.request", e.msg);
		if (send_small(c, reply, dg_egress_socks_reply(code, reply)))
			conn_close(c, e.msg);
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
		emit_url_decision(c, NULL, origin, &d);
	} else if (c->head[0] >= 'A' && c->head[0] <= 'Z') {
		struct dg_egress_req hs;
		struct dg_err e = {{0}};
		int r = dg_egress_parse_ws_handshake(c->head, c->head_got, c->req.host, c->req.port,
						     &hs, &e);
		if (r == -EAGAIN)
			return;
		if (r != 0) {
			refuse(c, 400, "egress.request", e.msg, true);
			return;
		}
		char *url = malloc(DG_URL_MAX + 1);
		if (!url) {
			conn_close(c, "out of memory");
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
		emit_url_decision(c, url, NULL, &d);
		free(url);
	} else {
		refuse(c, 400, "egress.request",
		       "the SOCKS front carries WebSockets only: neither a WebSocket handshake nor "
		       "TLS", true);
		return;
	}
	if (d.verdict != DG_VERDICT_ALLOW) {
		refuse(c, 403, d.rule, d.reason, false);
		return;
	}
	c->req.head_len = 0; /* every byte read so far goes to the origin as it came */
	proceed(c);
}

static void on_head(struct conn *c)
{
	ssize_t k = recv(c->cfd, c->head + c->head_got, DG_EGRESS_HEAD_MAX - c->head_got,
			 MSG_DONTWAIT);
	if (k < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (k < 0) {
		conn_close(c, NULL);
		return;
	}
	if (k == 0) {
		if (c->st != ST_HEAD)
			conn_close(c, "the client ended its side during the SOCKS exchange");
		else if (c->head_got == 0) /* opened and closed: nothing to report */
			conn_close(c, NULL);
		else
			refuse(c, 400, "egress.request",
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
		refuse(c, 400, "egress.request", e.msg, true);
		return;
	}
	decide(c);
}

static void on_client(struct conn *c, uint32_t ev)
{
	switch (c->st) {
	case ST_HEAD:
	case ST_SOCKS:
	case ST_TUNNEL:
		on_head(c);
		break;
	case ST_REFUSE:
		refuse_pump(c);
		break;
	case ST_RELAY:
		if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
			relay_read(c, 0);
		if (!c->dead && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
			relay_write(c, 1);
		if (!c->dead) {
			relay_write(c, 0); /* what was just read goes on at once */
			relay_settle(c);
		}
		break;
	default:
		break; /* not registered in these states */
	}
}

static void on_origin(struct conn *c, uint32_t ev)
{
	if (c->st == ST_CONNECT) {
		int e = 0;
		socklen_t el = sizeof(e);
		getsockopt(c->ofd, SOL_SOCKET, SO_ERROR, &e, &el);
		if (e == EINPROGRESS || e == EALREADY)
			return;
		if (e) {
			char why[DG_EGRESS_REASON_MAX];
			snprintf(why, sizeof(why), "connecting to %s: %s", c->addr_s, strerror(e));
			refuse(c, 502, "egress.connect", why, false);
			return;
		}
		connected(c);
		return;
	}
	if (c->st != ST_RELAY)
		return;
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		relay_read(c, 1);
	if (!c->dead && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		relay_write(c, 0);
	if (!c->dead) {
		relay_write(c, 1);
		relay_settle(c);
	}
}

static void sweep(long long now)
{
	char why[DG_EGRESS_REASON_MAX];
	for (struct conn *c = G.conns, *next; c; c = next) {
		next = c->next;
		if (c->dead || now < c->deadline)
			continue;
		switch (c->st) {
		case ST_HEAD:
			if (c->head_got == 0) {
				conn_close(c, NULL);
			} else {
				snprintf(why, sizeof(why), "no complete request head within %d ms",
					 G.head_ms);
				refuse(c, 408, "egress.request", why, true);
			}
			break;
		case ST_SOCKS:
		case ST_TUNNEL:
			snprintf(why, sizeof(why), "no complete SOCKS exchange and WebSocket handshake "
				 "within %d ms", G.head_ms);
			refuse(c, 408, "egress.request", why, true);
			break;
		case ST_LOOKUP:
			snprintf(why, sizeof(why), "looking up %s took longer than %d ms", c->req.host,
				 DG_EGRESS_RESOLVE_TIMEOUT_MS);
			refuse(c, 504, "egress.resolve", why, true);
			break;
		case ST_CONNECT:
			snprintf(why, sizeof(why), "connecting to %s took longer than %d ms",
				 c->addr_s, G.connect_ms);
			refuse(c, 504, "egress.connect", why, false);
			break;
		case ST_RELAY:
			snprintf(why, sizeof(why), "idle for %d ms", G.idle_ms);
			conn_close(c, why);
			break;
		case ST_REFUSE:
			conn_close(c, NULL);
			break;
		}
	}
}

static int next_timeout(long long now)
{
	long long t = -1;
	for (struct conn *c = G.conns; c; c = c->next) {
		long long left = c->deadline - now;
		if (left < 0)
			left = 0;
		if (t < 0 || left < t)
			t = left;
	}
	return t > 60000 ? 60000 : (int)t;
}

/* ---- sessions ----------------------------------------------------------------- */

static struct session *find_session(const char *id)
{
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX; i++)
		if (G.sessions[i].used && strcmp(G.sessions[i].id, id) == 0)
			return &G.sessions[i];
	return NULL;
}

/* One try at a 503, then close: at the global cap nothing may be kept. */
static void refuse_now(struct session *s, int fd, int status, const char *why)
{
	char resp[DG_EGRESS_RESPONSE_MAX];
	size_t n = dg_egress_error_response(status, "egress.caps", why, resp, sizeof(resp));
	if (n)
		send(fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
	uint64_t num = ++s->next_conn;
	emit_decision(s, num, NULL, "deny", "egress.caps", why);
	char err[DG_EGRESS_REASON_MAX];
	snprintf(err, sizeof(err), "answered %d: %s", status, why);
	emit_closed(s, num, 0, 0, 0, err);
}

static void on_listen(struct session *s)
{
	char why[DG_EGRESS_REASON_MAX];
	for (int i = 0; i < DG_EGRESS_ACCEPT_BURST && s->used && s->lfd >= 0; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				logmsg("session %s: accept: %s", s->id, strerror(errno));
			return;
		}
		if (G.n_conns >= DG_EGRESS_CONNS_MAX) {
			snprintf(why, sizeof(why), "the proxy has %d connections open (cap %d)",
				 G.n_conns, DG_EGRESS_CONNS_MAX);
			refuse_now(s, fd, 503, why);
			continue;
		}
		if (s->n_active >= DG_EGRESS_SESSION_CONNS_MAX &&
		    s->n_capref >= DG_EGRESS_SESSION_REFUSING_MAX) {
			snprintf(why, sizeof(why), "the session has %d connections open (cap %d)",
				 s->n_active, DG_EGRESS_SESSION_CONNS_MAX);
			refuse_now(s, fd, 429, why);
			continue;
		}
		struct conn *c = conn_new(s, fd);
		if (!c) {
			close(fd);
			continue;
		}
		if (s->n_active >= DG_EGRESS_SESSION_CONNS_MAX) {
			c->over_cap = true;
			s->n_capref++;
			snprintf(why, sizeof(why), "the session has %d connections open (cap %d)",
				 s->n_active, DG_EGRESS_SESSION_CONNS_MAX);
			refuse(c, 429, "egress.caps", why, true);
			continue;
		}
		s->n_active++;
		if (s->bytes >= G.bytes_max) {
			snprintf(why, sizeof(why), "the session reached its cap of %llu relayed bytes",
				 (unsigned long long)G.bytes_max);
			refuse(c, 429, "egress.caps", why, true);
			continue;
		}
		c->head = malloc(DG_EGRESS_HEAD_MAX);
		if (!c->head) {
			conn_close(c, NULL);
			continue;
		}
		c->st = ST_HEAD;
		c->deadline = c->t0 + G.head_ms;
		interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
	}
}

static void session_remove(struct session *s)
{
	s->removing = true;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	int closed = 0;
	while (s->head) {
		conn_close(s->head, "the session was removed");
		closed++;
	}
	for (struct lookup *l = G.lookups; l; l = l->next)
		if (l->s == s)
			l->s = NULL;
	char id[sizeof(s->id)];
	snprintf(id, sizeof(id), "%s", s->id);
	if (s->own_pol)
		dg_policy_free(&s->pol);
	memset(s, 0, sizeof(*s));
	s->lfd = -1;
	emit_session(id, "remove", NULL, closed);
}

static int check_listener(int fd, char *why, size_t n)
{
	int v = 0, type = 0, dom = 0;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) != 0 || !v) {
		snprintf(why, n, "the descriptor is not a listening socket");
		return -1;
	}
	l = sizeof(type);
	getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l);
	l = sizeof(dom);
	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	if (type != SOCK_STREAM || (dom != AF_INET && dom != AF_INET6)) {
		snprintf(why, n, "the descriptor is not a TCP socket");
		return -1;
	}
	return 0;
}

/* Compiles the "egress" list an add carried, and its "urls" section (for
 * the WebSockets of the SOCKS front; absent: every WebSocket gets "deny"),
 * into a policy of those sections alone (the policy loader checks every
 * pattern again: they came over the channel). */
static int session_rules(const json_t *list, const json_t *urls, struct dg_policy *p, char *why,
			 size_t n)
{
	json_t *u = json_is_object(urls) ? json_deep_copy(urls) : json_object();
	const char *dflt = json_string_value(json_object_get(u, "default"));
	json_t *doc = json_pack("{s:i, s:s, s:{s:O}}", "version", DG_POLICY_VERSION, "default",
				dflt ? dflt : "deny", "egress", "allow", list);
	json_object_del(u, "default");
	if (doc && json_object_size(u) > 0)
		json_object_set(doc, "urls", u);
	json_decref(u);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	struct dg_err err = {{0}};
	int r = text ? dg_policy_parse(text, strlen(text), "session egress", p, &err) : -ENOMEM;
	free(text);
	if (r)
		snprintf(why, n, "bad egress list: %.120s", text ? err.msg : "out of memory");
	return r;
}

static void op_add(const char *id, const json_t *egress, const json_t *urls,
		   const json_t *before, int *fds, int nfds)
{
	char why[160];
	struct session *s = NULL;
	struct dg_policy pol;
	bool own_pol = false;
	if (egress) {
		if (!json_is_array(egress) || (urls && !json_is_object(urls)) ||
		    session_rules(egress, urls, &pol, why, sizeof(why)) != 0) {
			if (!json_is_array(egress))
				snprintf(why, sizeof(why), "egress must be a list of host:port");
			goto fail;
		}
		own_pol = true;
	}
	if (before && (!json_is_integer(before) || json_integer_value(before) < 0 ||
		       (uint64_t)json_integer_value(before) > DG_EGRESS_CONN_NUMBER_MAX)) {
		snprintf(why, sizeof(why), "conns_before must be an integer 0..%llu",
			 (unsigned long long)DG_EGRESS_CONN_NUMBER_MAX);
		goto fail;
	}
	if (nfds != 1) {
		snprintf(why, sizeof(why), "add needs exactly one descriptor, got %d", nfds);
		goto fail;
	}
	if (find_session(id)) {
		snprintf(why, sizeof(why), "the session is already served");
		goto fail;
	}
	if (check_listener(fds[0], why, sizeof(why)) != 0)
		goto fail;
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX && !s; i++)
		if (!G.sessions[i].used)
			s = &G.sessions[i];
	if (!s) {
		snprintf(why, sizeof(why), "all %d session slots are in use", DG_EGRESS_SESSIONS_MAX);
		goto fail;
	}
	/* The description is shared with the spawner's copy, which is closed
	 * after the hand-over: non-blocking, so an accept whose connection
	 * went away meanwhile cannot stall the loop. */
	int fl = fcntl(fds[0], F_GETFL);
	fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
	memset(s, 0, sizeof(*s));
	s->used = true;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->pol = pol;
	s->own_pol = own_pol;
	own_pol = false;
	s->next_conn = before ? (uint64_t)json_integer_value(before) : 0;
	s->lep.kind = EP_LISTEN;
	s->lfd = fds[0];
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->lep};
	if (epoll_ctl(G.ep, EPOLL_CTL_ADD, s->lfd, &e) != 0) {
		snprintf(why, sizeof(why), "epoll: %s", strerror(errno));
		if (s->own_pol)
			dg_policy_free(&s->pol);
		memset(s, 0, sizeof(*s));
		s->lfd = -1;
		goto fail;
	}
	emit_session(id, "add", NULL, -1);
	return;
fail:
	if (own_pol)
		dg_policy_free(&pol);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	logmsg("add %s: %s", id, why);
	emit_session(id, "add", why, -1);
}

static void handle_ctl(const char *buf, size_t len, int *fds, int nfds)
{
	json_t *m = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	const char *op = json_string_value(json_object_get(m, "op"));
	const char *id = json_string_value(json_object_get(m, "session"));
	if (!op || !id || !dg_session_id_valid(id)) {
		ctl_error("not {\"op\":..., \"session\":ID} with a valid session id");
	} else if (strcmp(op, "add") == 0) {
		op_add(id, json_object_get(m, "egress"), json_object_get(m, "urls"),
		       json_object_get(m, "conns_before"), fds, nfds);
		nfds = 0;
	} else if (strcmp(op, "remove") == 0) {
		struct session *s = find_session(id);
		if (s)
			session_remove(s);
		else
			emit_session(id, "remove", "no such session", -1);
	} else {
		ctl_error("unknown op");
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	json_decref(m);
}

__attribute__((noreturn)) static void proxy_exit(int status)
{
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX; i++)
		if (G.sessions[i].used)
			session_remove(&G.sessions[i]);
	bury();
	for (int i = 0; i < G.q_n; i++)
		free(G.q[(G.q_head + i) % DG_EGRESS_EVENTS_MAX]);
	G.q_n = 0;
	free(G.rbuf);
	G.rbuf = NULL;
	/* Lookups glibc still runs stay listed in G.lookups (reachable): their
	 * memory is glibc's until they finish, and the process ends now. Under
	 * the seccomp filter there is no leak check: LeakSanitizer stops the
	 * world with a non-thread clone and ptrace, which the filter kills
	 * (tests run a proxy without it, dg_egress_opts.no_seccomp, for that). */
	if (__lsan_do_leak_check && !G.filtered)
		__lsan_do_leak_check();
	_exit(status);
}

static void on_ctl(uint32_t ev)
{
	if (ev & EPOLLOUT)
		flush_events();
	if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (int i = 0; i < DG_EGRESS_CTL_BURST; i++) {
		int fds[DG_SEQ_FDS_MAX], nfds = 0;
		size_t len;
		struct dg_err err = {{0}};
		int r = dg_seq_recv(G.ctl, G.rbuf, DG_SEQ_MAX + 1, &len, fds, &nfds, &err);
		if (r == 0)
			return;
		if (r == -EPIPE || r == -ECONNRESET)
			proxy_exit(0); /* the gateway closed the channel: done */
		if (r == -EPROTO) {
			ctl_error("%s", err.msg);
			continue;
		}
		if (r < 0) {
			logmsg("control channel: %s", err.msg);
			proxy_exit(1);
		}
		handle_ctl(G.rbuf, len, fds, nfds);
	}
}

static void loop(void)
{
	struct epoll_event evs[DG_EGRESS_EPOLL_BATCH];
	for (;;) {
		int n = epoll_wait(G.ep, evs, DG_EGRESS_EPOLL_BATCH, next_timeout(dg_now_ms()));
		if (n < 0 && errno != EINTR) {
			logmsg("epoll_wait: %s", strerror(errno));
			proxy_exit(1);
		}
		for (int i = 0; i < n; i++) {
			struct ep *ep = evs[i].data.ptr;
			uint32_t ev = evs[i].events;
			switch (ep->kind) {
			case EP_CTL:
				on_ctl(ev);
				break;
			case EP_SIG:
				on_signal();
				break;
			case EP_LISTEN: {
				struct session *s = (struct session *)((char *)ep -
								       offsetof(struct session, lep));
				on_listen(s);
				break;
			}
			case EP_CLIENT: {
				struct conn *c = (struct conn *)((char *)ep - offsetof(struct conn, cep));
				if (!c->dead)
					on_client(c, ev);
				break;
			}
			case EP_ORIGIN: {
				struct conn *c = (struct conn *)((char *)ep - offsetof(struct conn, oep));
				if (!c->dead)
					on_origin(c, ev);
				break;
			}
			}
		}
		sweep(dg_now_ms());
		bury();
	}
}

/* ---- start-up (in the child) ------------------------------------------------- */

/* Reports a start-up failure to dg_egress_start and ends. */
__attribute__((noreturn)) static void fail_start(int fd, const char *what, int e)
{
	char msg[256];
	snprintf(msg, sizeof(msg), "{\"event\":\"egress_failed\",\"error\":\"%s: %s\"}", what,
		 strerror(e));
	send(fd, msg, strlen(msg), MSG_NOSIGNAL);
	_exit(1);
}

/* The same with a whole message. */
__attribute__((noreturn)) static void fail_msg(int fd, const char *what)
{
	json_t *m = json_pack("{s:s, s:s}", "event", "egress_failed", "error", what);
	char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	if (text)
		send(fd, text, strlen(text), MSG_NOSIGNAL);
	_exit(1);
}

/* No groups, DG_EGRESS_UID, no capabilities (bounding set first, while
 * CAP_SETPCAP is still held), no_new_privs; verified, not trusted. */
static void drop_privileges(int fd)
{
	uid_t id = DG_EGRESS_UID;
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
			fail_start(fd, "dropping the capability bounding set", errno);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
		fail_start(fd, "clearing ambient capabilities", errno);
	if (setgroups(0, NULL) != 0)
		fail_start(fd, "setgroups", errno);
	if (setresgid(id, id, id) != 0)
		fail_start(fd, "setresgid", errno);
	if (setresuid(id, id, id) != 0)
		fail_start(fd, "setresuid", errno);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fail_start(fd, "no_new_privs", errno);
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0)
		fail_start(fd, "capget", errno);
	if (d[0].effective || d[0].permitted || d[0].inheritable || d[1].effective ||
	    d[1].permitted || d[1].inheritable)
		fail_start(fd, "capabilities remain after dropping them", EPERM);
	if (setuid(0) == 0)
		fail_start(fd, "uid 0 could be regained", EPERM);
}

__attribute__((noreturn)) static void proxy_main(int fd, const struct dg_policy *p,
						 const struct dg_egress_override *ov, int n_ov,
						 const struct dg_egress_opts *o)
{
	static const int reset[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM,
				    SIGCHLD};
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		signal(reset[i], SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_SETMASK, &set, NULL);

	struct rlimit nofile = {DG_EGRESS_NOFILE, DG_EGRESS_NOFILE};
	if (setrlimit(RLIMIT_NOFILE, &nofile) != 0)
		fail_start(fd, "raising RLIMIT_NOFILE", errno);
	struct rlimit core = {0, 0};
	setrlimit(RLIMIT_CORE, &core);
	drop_privileges(fd);

	memset(&G, 0, sizeof(G));
	G.ctl = fd;
	G.pol = *p; /* this process's own copy of the policy's memory */
	memcpy(G.ov, ov, sizeof(*ov) * (size_t)n_ov);
	G.n_ov = n_ov;
	G.verbose = o->verbose;
#define LOWER(v, dflt) ((v) > 0 && (v) < (dflt) ? (v) : (dflt))
	G.head_ms = LOWER(o->head_timeout_ms, DG_EGRESS_HEAD_TIMEOUT_MS);
	G.connect_ms = LOWER(o->connect_timeout_ms, DG_EGRESS_CONNECT_TIMEOUT_MS);
	G.idle_ms = LOWER(o->idle_timeout_ms, DG_EGRESS_IDLE_TIMEOUT_MS);
	G.bytes_max = o->session_bytes_max > 0 && o->session_bytes_max < DG_EGRESS_SESSION_BYTES_MAX
			      ? o->session_bytes_max
			      : DG_EGRESS_SESSION_BYTES_MAX;
#undef LOWER
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX; i++)
		G.sessions[i].lfd = -1;
	G.rbuf = malloc(DG_SEQ_MAX + 1);
	G.sig = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	G.ep = epoll_create1(EPOLL_CLOEXEC);
	if (!G.rbuf || G.sig < 0 || G.ep < 0)
		fail_start(fd, "setting up the loop", errno ? errno : ENOMEM);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	G.ctl_ep.kind = EP_CTL;
	G.sig_ep.kind = EP_SIG;
	G.ctl_ev = EPOLLIN;
	struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &G.ctl_ep};
	struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = &G.sig_ep};
	if (epoll_ctl(G.ep, EPOLL_CTL_ADD, fd, &e1) != 0 ||
	    epoll_ctl(G.ep, EPOLL_CTL_ADD, G.sig, &e2) != 0)
		fail_start(fd, "epoll_ctl", errno);
	/* Last: everything from here on runs under the filter, the lookups'
	 * threads too. "egress_ready" says it is in place. */
	if (!o->no_seccomp) {
		struct dg_err serr = {{0}};
		int r = dg_egress_seccomp_install(&serr);
		if (r)
			fail_msg(fd, serr.msg);
		G.filtered = true;
	}
	emit(json_pack("{s:s, s:i}", "event", "egress_ready", "pid", (int)getpid()));
	loop();
	_exit(1);
}

/* ---- starting a proxy (in the parent) ------------------------------------------ */

/* Checks o's overrides and parses them into ov (DG_EGRESS_OVERRIDES_MAX). */
static int parse_overrides(const struct dg_egress_opts *o, struct dg_egress_override *ov,
			   struct dg_err *err)
{
	if (o->n_resolve < 0 || o->n_resolve > DG_EGRESS_OVERRIDES_MAX ||
	    (o->n_resolve > 0 && !o->resolve))
		return dg_err_set(err, -EINVAL, "egress: %d resolve overrides (at most %d)",
				  o->n_resolve, DG_EGRESS_OVERRIDES_MAX);
	for (int i = 0; i < o->n_resolve; i++) {
		int r = dg_egress_override_parse(o->resolve[i], &ov[i], err);
		if (r)
			return r;
	}
	return 0;
}

/* Forks the proxy with checked options (o->resolve is not read: ov holds
 * the n_ov parsed overrides) and waits for its "egress_ready". */
static int start_checked(struct dg_egress *e, const struct dg_policy *p,
			 const struct dg_egress_override *ov, int n_ov,
			 const struct dg_egress_opts *o, struct dg_err *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return dg_err_set(err, -errno, "egress: socketpair: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int x = errno;
		close(sv[0]);
		close(sv[1]);
		return dg_err_set(err, -x, "egress: fork: %s", strerror(x));
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		prctl(PR_SET_NAME, "deskgate-egress");
		int fd = sv[1];
		if (fd != 3) {
			if (dup2(fd, 3) < 0)
				_exit(1);
			fd = 3;
		}
		syscall(SYS_close_range, 4, ~0u, 0);
		proxy_main(fd, p, ov, n_ov, o);
	}
	close(sv[1]);
	e->pid = pid;
	e->fd = sv[0];
	fcntl(e->fd, F_SETFL, fcntl(e->fd, F_GETFL) | O_NONBLOCK);

	/* Wait for the child's word that it dropped its privileges. */
	long long deadline = dg_now_ms() + DG_EGRESS_START_MS;
	for (;;) {
		json_t *ev = NULL;
		int r = dg_egress_recv(e, &ev, err);
		if (r < 0) {
			dg_egress_stop(e);
			return dg_err_set(err, r, "egress: the proxy ended during start-up");
		}
		if (r == 1) {
			const char *name = json_string_value(json_object_get(ev, "event"));
			if (name && strcmp(name, "egress_ready") == 0) {
				json_decref(ev);
				return 0;
			}
			const char *why = json_string_value(json_object_get(ev, "error"));
			int rc = dg_err_set(err, -EPERM, "egress: start-up: %s",
					    why ? why : "unexpected message");
			json_decref(ev);
			dg_egress_stop(e);
			return rc;
		}
		long long left = deadline - dg_now_ms();
		if (left <= 0) {
			dg_egress_stop(e);
			return dg_err_set(err, -ETIMEDOUT, "egress: the proxy did not start within %d ms",
					  DG_EGRESS_START_MS);
		}
		struct pollfd pf = {e->fd, POLLIN, 0};
		poll(&pf, 1, (int)left);
	}
}

int dg_egress_start(struct dg_egress *e, const struct dg_policy *p, const struct dg_egress_opts *o,
		    struct dg_err *err)
{
	e->pid = -1;
	e->fd = -1;
	static const struct dg_egress_opts none;
	if (!o)
		o = &none;
	if (!p)
		return dg_err_set(err, -EINVAL, "egress: no policy");
	struct dg_egress_override ov[DG_EGRESS_OVERRIDES_MAX];
	int r = parse_overrides(o, ov, err);
	return r ? r : start_checked(e, p, ov, o->n_resolve, o, err);
}

/* What dg_egress_spawn starts every proxy with: set by dg_egress_configure
 * in the process that forks the spawner, inherited by it. */
static struct {
	bool set;
	struct dg_egress_opts o; /* resolve NULL: the overrides are in ov */
	struct dg_egress_override ov[DG_EGRESS_OVERRIDES_MAX];
	int n_ov;
	struct dg_policy pol;    /* the built-in default: it allows no egress */
} spawn_cfg;

int dg_egress_configure(const struct dg_egress_opts *o, struct dg_err *err)
{
	static const struct dg_egress_opts none;
	if (!o)
		o = &none;
	int r = parse_overrides(o, spawn_cfg.ov, err);
	if (r)
		return r;
	spawn_cfg.o = *o;
	spawn_cfg.o.resolve = NULL;
	spawn_cfg.o.no_seccomp = false; /* every proxy of `deskgate serve` is filtered */
	spawn_cfg.n_ov = o->n_resolve;
	dg_policy_default(&spawn_cfg.pol);
	spawn_cfg.set = true;
	return 0;
}

int dg_egress_spawn(struct dg_egress *e, struct dg_err *err)
{
	e->pid = -1;
	e->fd = -1;
	if (!spawn_cfg.set)
		return dg_err_set(err, -EINVAL, "egress: dg_egress_configure was not called");
	return start_checked(e, &spawn_cfg.pol, spawn_cfg.ov, spawn_cfg.n_ov, &spawn_cfg.o, err);
}
