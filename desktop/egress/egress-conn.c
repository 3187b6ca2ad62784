/* The egress proxy's connections (egress-proxy-priv.h): admission at a
 * session's listener under the caps, the name lookup, the address checks,
 * the connect to the origin, the relay both ways, refusals and their
 * linger, and the deadlines. What a connection asks for is read and decided
 * by egress-front.c, which calls dg_egress_proceed once it is allowed.
 * Calls egress-events.c only.
 *
 * Ownership: a connection belongs to exactly one session and is freed only
 * by dg_egress_bury at the end of a loop turn (the graveyard), so an epoll
 * event later in the same batch never touches freed memory. A name lookup
 * belongs to its connection until that connection closes; glibc may still
 * be writing to it then (gai_cancel cannot stop a running lookup), so it is
 * kept, charged to the session, until glibc is done with it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "desktop/egress/egress-proxy-priv.h"

void dg_egress_interest(int fd, struct ep *ep, uint32_t *cur, uint32_t want)
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

void dg_egress_conn_close(struct conn *c, const char *error)
{
	if (c->dead)
		return;
	struct session *s = c->s;
	if (c->evented)
		dg_egress_emit_closed(s, c->n, c->d[0].bytes, c->d[1].bytes,
				      dg_now_ms() - c->t0, error ? error : c->err);
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

void dg_egress_bury(void)
{
	while (G.grave) {
		struct conn *c = G.grave;
		G.grave = c->grave;
		free(c);
	}
}


void dg_egress_refuse(struct conn *c, int status, const char *rule, const char *reason,
		      bool decision)
{
	if (decision)
		dg_egress_emit_decision(c->s, c->n, c, "deny", rule, reason);
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
	dg_egress_refuse_pump(c);
}

void dg_egress_refuse_pump(struct conn *c)
{
	while (c->resp_off < c->resp_len) {
		ssize_t k = send(c->cfd, c->resp + c->resp_off, c->resp_len - c->resp_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			dg_egress_interest(c->cfd, &c->cep, &c->cev, EPOLLOUT);
			return;
		}
		if (k <= 0) {
			dg_egress_conn_close(c, NULL);
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
		dg_egress_interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
		return;
	}
	if (k <= 0) {
		dg_egress_conn_close(c, NULL);
		return;
	}
	c->lingered += (size_t)k;
	if (c->lingered > DG_EGRESS_LINGER_BYTES)
		dg_egress_conn_close(c, NULL);
	else
		dg_egress_interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
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

/* ---- relay ---------------------------------------------------------------- */


/* Takes n more bytes of c's session; false (and c refused) past the cap. */
static bool charge(struct conn *c, int dir, size_t n)
{
	struct session *s = c->s;
	if (n > G.bytes_max - s->bytes) {
		char why[160];
		snprintf(why, sizeof(why), "the session reached its cap of %llu relayed bytes",
			 (unsigned long long)G.bytes_max);
		dg_egress_emit_decision(s, c->n, c, "deny", "egress.caps", why);
		s->bytes = G.bytes_max;
		dg_egress_conn_close(c, why);
		return false;
	}
	s->bytes += n;
	c->d[dir].bytes += n;
	return true;
}

void dg_egress_relay_read(struct conn *c, int i)
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
		dg_egress_conn_close(c, e);
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

void dg_egress_relay_write(struct conn *c, int i)
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
		dg_egress_conn_close(c, e);
		return;
	}
	d->off += (size_t)k;
	d->len -= (size_t)k;
	if (d->len == 0)
		d->off = 0;
	c->deadline = dg_now_ms() + G.idle_ms;
}

/* Passes FINs on, ends a finished relay, sets what to wait for. */
void dg_egress_relay_settle(struct conn *c)
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
		dg_egress_conn_close(c, "");
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
	dg_egress_interest(c->cfd, &c->cep, &c->cev, cw);
	dg_egress_interest(c->ofd, &c->oep, &c->oev, ow);
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
			dg_egress_conn_close(c, "out of memory");
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
			dg_egress_conn_close(c, "rewritten head too long");
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
	dg_egress_relay_write(c, 0);
	if (!c->dead)
		dg_egress_relay_write(c, 1);
	dg_egress_relay_settle(c);
}

static void connect_start(struct conn *c)
{
	int fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	char why[DG_EGRESS_REASON_MAX];
	if (fd < 0) {
		snprintf(why, sizeof(why), "socket: %s", strerror(errno));
		dg_egress_refuse(c, 502, "egress.connect", why, false);
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
		dg_egress_refuse(c, 502, "egress.connect", why, false);
		return;
	}
	c->st = ST_CONNECT;
	c->deadline = dg_now_ms() + G.connect_ms;
	dg_egress_interest(c->ofd, &c->oep, &c->oev, EPOLLOUT);
}

/* Everything is checked: report the allow and connect to c->addr. */
static void allow(struct conn *c)
{
	dg_egress_addr_format((struct sockaddr *)&c->addr, c->addr_s, sizeof(c->addr_s));
	dg_egress_emit_decision(c->s, c->n, c, "allow", c->dec.rule, c->dec.reason);
	connect_start(c);
}

static void lookup_begin(struct conn *c)
{
	struct lookup *l = calloc(1, sizeof(*l));
	if (!l) {
		dg_egress_refuse(c, 502, "egress.resolve", "out of memory for a lookup", true);
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
		dg_egress_refuse(c, 502, "egress.resolve", why, true);
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
		dg_egress_refuse(c, 502, "egress.resolve", why, true);
		return;
	}
	bool found = false;
	for (struct addrinfo *ai = l->cb.ar_result; ai; ai = ai->ai_next) {
		struct sockaddr_storage a;
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(a)) {
			snprintf(why, sizeof(why), "%s has an address of family %d", c->req.host,
				 ai->ai_family);
			dg_egress_refuse(c, 403, "egress.address", why, true);
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
			dg_egress_refuse(c, 403, "egress.address", why, true);
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
		dg_egress_refuse(c, 502, "egress.resolve", why, true);
		return;
	}
	allow(c);
}

void dg_egress_on_signal(void)
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

void dg_egress_proceed(struct conn *c)
{
	struct dg_egress_req *r = &c->req;
	dg_egress_interest(c->cfd, &c->cep, &c->cev, 0); /* nothing more is read until connected */
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
			dg_egress_refuse(c, 400, "egress.request", "the host is not an address",
					 true);
			return;
		}
		if (dg_egress_addr_check((struct sockaddr *)&c->addr, why, sizeof(why)) != 0) {
			dg_egress_refuse(c, 403, "egress.address", why, true);
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

void dg_egress_on_origin(struct conn *c, uint32_t ev)
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
			dg_egress_refuse(c, 502, "egress.connect", why, false);
			return;
		}
		connected(c);
		return;
	}
	if (c->st != ST_RELAY)
		return;
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR))
		dg_egress_relay_read(c, 1);
	if (!c->dead && (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)))
		dg_egress_relay_write(c, 0);
	if (!c->dead) {
		dg_egress_relay_write(c, 1);
		dg_egress_relay_settle(c);
	}
}

void dg_egress_sweep(long long now)
{
	char why[DG_EGRESS_REASON_MAX];
	for (struct conn *c = G.conns, *next; c; c = next) {
		next = c->next;
		if (c->dead || now < c->deadline)
			continue;
		switch (c->st) {
		case ST_HEAD:
			if (c->head_got == 0) {
				dg_egress_conn_close(c, NULL);
			} else {
				snprintf(why, sizeof(why), "no complete request head within %d ms",
					 G.head_ms);
				dg_egress_refuse(c, 408, "egress.request", why, true);
			}
			break;
		case ST_SOCKS:
		case ST_TUNNEL:
			snprintf(why, sizeof(why), "no complete SOCKS exchange and WebSocket handshake "
				 "within %d ms", G.head_ms);
			dg_egress_refuse(c, 408, "egress.request", why, true);
			break;
		case ST_LOOKUP:
			snprintf(why, sizeof(why), "looking up %s took longer than %d ms", c->req.host,
				 DG_EGRESS_RESOLVE_TIMEOUT_MS);
			dg_egress_refuse(c, 504, "egress.resolve", why, true);
			break;
		case ST_CONNECT:
			snprintf(why, sizeof(why), "connecting to %s took longer than %d ms",
				 c->addr_s, G.connect_ms);
			dg_egress_refuse(c, 504, "egress.connect", why, false);
			break;
		case ST_RELAY:
			snprintf(why, sizeof(why), "idle for %d ms", G.idle_ms);
			dg_egress_conn_close(c, why);
			break;
		case ST_REFUSE:
			dg_egress_conn_close(c, NULL);
			break;
		}
	}
}

int dg_egress_next_timeout(long long now)
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

/* One try at a 503, then close: at the global cap nothing may be kept. */
static void refuse_now(struct session *s, int fd, int status, const char *why)
{
	char resp[DG_EGRESS_RESPONSE_MAX];
	size_t n = dg_egress_error_response(status, "egress.caps", why, resp, sizeof(resp));
	if (n)
		send(fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
	uint64_t num = ++s->next_conn;
	dg_egress_emit_decision(s, num, NULL, "deny", "egress.caps", why);
	char err[DG_EGRESS_REASON_MAX];
	snprintf(err, sizeof(err), "answered %d: %s", status, why);
	dg_egress_emit_closed(s, num, 0, 0, 0, err);
}

void dg_egress_on_listen(struct session *s)
{
	char why[DG_EGRESS_REASON_MAX];
	for (int i = 0; i < DG_EGRESS_ACCEPT_BURST && s->used && s->lfd >= 0; i++) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				dg_egress_log("session %s: accept: %s", s->id, strerror(errno));
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
			dg_egress_refuse(c, 429, "egress.caps", why, true);
			continue;
		}
		s->n_active++;
		if (s->bytes >= G.bytes_max) {
			snprintf(why, sizeof(why), "the session reached its cap of %llu relayed bytes",
				 (unsigned long long)G.bytes_max);
			dg_egress_refuse(c, 429, "egress.caps", why, true);
			continue;
		}
		c->head = malloc(DG_EGRESS_HEAD_MAX);
		if (!c->head) {
			dg_egress_conn_close(c, NULL);
			continue;
		}
		c->st = ST_HEAD;
		c->deadline = c->t0 + G.head_ms;
		dg_egress_interest(c->cfd, &c->cep, &c->cev, EPOLLIN);
	}
}
