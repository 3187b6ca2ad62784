/* The egress proxy process's own state and the functions its files share
 * (desktop/egress/: egress.c, egress-events.c, egress-sessions.c,
 * egress-conn.c, egress-front.c). Only those files include it: the unit
 * tests and fuzzers use egress-priv.h, which knows nothing of the loop.
 *
 * Every function here runs in the forked proxy only, on its one thread
 * (getaddrinfo_a's helper threads never call them), and reads or changes G.
 *
 * The files, each calling only those listed after it (no circle):
 *   egress.c           start-up in the parent and the child, the loop, the exit
 *   egress-sessions.c  control messages in: add and remove a session
 *   egress-front.c     a connection's request: HTTP head, SOCKS5, WebSocket tunnel
 *   egress-conn.c      connections: admission, lookups, connect, relay, timeouts
 *   egress-events.c    events out to the gateway, queued when it does not read
 */
#ifndef DG_EGRESS_PROXY_PRIV_H
#define DG_EGRESS_PROXY_PRIV_H

#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "desktop/egress/egress-priv.h"
#include "desktop/proto/proto.h"

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


/* The proxy's one state (egress.c defines it), G for short: every line of
 * the loop names it. Zeroed and filled by the child's start-up. */
extern struct egress dg_egress_state;
#define G dg_egress_state

/* ---- events to the gateway (egress-events.c) ---------------------------- */

/* "deskgate egress: <text>" on stderr. */
void dg_egress_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sends ev (stolen; NULL counts as dropped) now, or queues it; past
 * DG_EGRESS_EVENTS_MAX queued it is dropped and counted, and the count goes
 * out as one "egress_dropped" event when there is room again. */
void dg_egress_emit(json_t *ev);

/* Sends what is queued while the gateway takes it (on EPOLLOUT). */
void dg_egress_flush_events(void);

/* Frees what is still queued (the proxy is ending). */
void dg_egress_events_free(void);

/* "egress": the decision on connection n of s (c, when there is one, gives
 * its method, target and address and is marked evented). */
void dg_egress_emit_decision(struct session *s, uint64_t n, struct conn *c, const char *verdict,
			     const char *rule, const char *reason);

/* "decision" (layer browser, via egress): a WebSocket of the SOCKS front
 * decided by the "urls" rules; url the ws:// URL, or NULL for a wss://
 * decided by its origin alone. */
void dg_egress_emit_url_decision(struct conn *c, const char *url, const char *origin,
				 const struct dg_decision *d);

/* "egress_closed": connection n of s ended after up/down bytes and ms;
 * error NULL or "" for a clean end. */
void dg_egress_emit_closed(struct session *s, uint64_t n, uint64_t up, uint64_t down,
			   long long ms, const char *error);

/* "egress_session": the answer to an add or remove (error NULL: ok; closed
 * >= 0: connections the remove closed). */
void dg_egress_emit_session(const char *id, const char *op, const char *error, int closed);

/* Logs a control message that was ignored and reports it as "egress_error". */
void dg_egress_ctl_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- connections (egress-conn.c) ---------------------------------------- */

/* Registers fd (ep its owner's registration) for want; *cur is what is
 * registered now (0: nothing). want 0 takes fd out of the set. */
void dg_egress_interest(int fd, struct ep *ep, uint32_t *cur, uint32_t want);

/* Accepts s's waiting connections (DG_EGRESS_ACCEPT_BURST at most),
 * refusing those past the caps. */
void dg_egress_on_listen(struct session *s);

/* Ends c: its "egress_closed" event when it had an "egress" one, with error
 * as what ended it ("" a clean end, NULL: c->err, the refusal, if any);
 * descriptors, lookup, counters. Freed by dg_egress_bury, at the end of the
 * loop turn. */
void dg_egress_conn_close(struct conn *c, const char *error);

/* Frees the connections closed during this loop turn. */
void dg_egress_bury(void);

/* Answers status and lingers (ST_REFUSE). With decision, reports the
 * refusal as an "egress" event (verdict deny); without, the connection was
 * already decided and the reason goes to its "egress_closed" event. A SOCKS
 * connection not yet answered gets the matching SOCKS reply code instead. */
void dg_egress_refuse(struct conn *c, int status, const char *rule, const char *reason,
		      bool decision);

/* ST_REFUSE: writes the rest of the answer, then reads and discards until
 * the client's FIN (at most DG_EGRESS_LINGER_BYTES). */
void dg_egress_refuse_pump(struct conn *c);

/* A decided connection: finds the address (an override, a literal, or a
 * lookup within the session's slots), checks it, reports the allow and
 * connects. */
void dg_egress_proceed(struct conn *c);

/* ST_RELAY: one read of direction i (0 client -> origin) charged to the
 * session, one write of direction i, and the FINs and interest after them. */
void dg_egress_relay_read(struct conn *c, int i);
void dg_egress_relay_write(struct conn *c, int i);
void dg_egress_relay_settle(struct conn *c);

/* The origin socket is ready (connect finished, or relay). */
void dg_egress_on_origin(struct conn *c, uint32_t ev);

/* SIGUSR1: lookups finished; each is taken and waiting ones started. */
void dg_egress_on_signal(void);

/* Ends or refuses every connection whose deadline passed at now. */
void dg_egress_sweep(long long now);

/* Milliseconds until the next deadline (-1: none; at most 60000). */
int dg_egress_next_timeout(long long now);

/* ---- the request fronts (egress-front.c) -------------------------------- */

/* The client socket is ready: the head, the SOCKS exchange, the tunnel's
 * first bytes, the refusal, or the relay, by c->st. */
void dg_egress_on_client(struct conn *c, uint32_t ev);

/* ---- sessions (egress-sessions.c) --------------------------------------- */

/* Control messages from the gateway (at most DG_EGRESS_CTL_BURST), and the
 * queued events on EPOLLOUT. Returns 0, or 1 when the proxy must end with
 * *status (the gateway closed the channel: 0; the channel failed: 1). */
int dg_egress_on_ctl(uint32_t ev, int *status);

/* Closes s's listener and connections, forgets it, reports the remove. */
void dg_egress_session_remove(struct session *s);

#endif
