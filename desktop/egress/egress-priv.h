/* The egress proxy: the only way from a session's jail to the network.
 *
 * One process serves every session. Each jail's network namespace has only
 * loopback; the spawner creates a TCP socket listening on 127.0.0.1:3128
 * inside it and the gateway hands that listener to this process with the
 * session's id. Chromium in the jail uses it as its proxy, exec'd programs
 * get HTTP_PROXY/HTTPS_PROXY; nothing in the jail resolves names.
 *
 * The process runs in the host's network namespace as DG_EGRESS_UID, with
 * no groups, no capabilities and no_new_privs, dies with its parent, and
 * keeps its own copy of the compiled policy. Per connection it reads one
 * HTTP/1.x request head (bounded in size and time), which must be
 * `CONNECT host:port` or an absolute-form `METHOD http://host[:port]/...`;
 * decides host:port with the policy's "egress" allowlist
 * (dg_policy_decide_egress: a policy without rules allows nothing); resolves
 * the name once without blocking its loop; refuses the connection when any
 * address the name has is not public (dg_egress_addr_check); connects to
 * exactly the address it checked; then relays bytes both ways with bounded
 * buffers. Every decision and every close is reported to the gateway as an
 * event (below) for the session's recording.
 *
 * A connection whose first byte is 5 is SOCKS5, which only Chromium's
 * WebSockets use (see "SOCKS5" below): host:port is decided the same way,
 * then the WebSocket's URL with the session's "urls" rules before the origin
 * is connected.
 *
 * What is checked is the request head only: after it, bytes go on verbatim
 * both ways. A client that pipelines more requests on an absolute-form
 * connection reaches only the same origin address, which was told
 * "Connection: close"; an HTTPS tunnel's content is never seen.
 *
 * Single-threaded epoll loop; glibc's getaddrinfo_a runs its lookups in its
 * own helper threads, which is the one exception (they only resolve). Once
 * set up, before it says it is ready, the proxy confines itself with its own
 * seccomp filter (dg_egress_seccomp_install): its helper threads too.
 *
 * In `deskgate serve` the spawner starts the proxy (dg_egress_spawn, on the
 * gateway's {"op":"egress"} request) and hands its channel to the gateway;
 * when the proxy dies the gateway asks for another one and hands it every
 * live session again (gateway/egress-link.c). Other commands (audit, live)
 * start their own with dg_egress_start.
 *
 * Files: egress.c (process, loop, relay, the gateway's side), egress-http.c
 * (request heads), egress-addr.c (address ranges, resolver overrides),
 * egress-seccomp.c (the filter).
 */
#ifndef DG_EGRESS_PRIV_H
#define DG_EGRESS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>

#include "policy/policy.h"

/* The proxy's own uid and gid: neither the gateway's (0x5fffffff) nor any
 * jail's or worker's. */
#define DG_EGRESS_UID 0x5ffffffeu

/* ---- limits --------------------------------------------------------------- */

#define DG_EGRESS_HEAD_MAX (16 * 1024)          /* bytes of a request head, final CRLFCRLF
						 * included */
#define DG_EGRESS_METHOD_MAX 16                 /* bytes of a method name */
#define DG_EGRESS_HEAD_TIMEOUT_MS 10000         /* accept -> complete request head */
#define DG_EGRESS_RESOLVE_TIMEOUT_MS 10000      /* head -> name resolved (504 after) */
#define DG_EGRESS_CONNECT_TIMEOUT_MS 10000      /* connect to the origin (504 after) */
#define DG_EGRESS_IDLE_TIMEOUT_MS (5 * 60 * 1000) /* relay without a byte either way */
#define DG_EGRESS_LINGER_MS 2000                /* after an error answer: wait for the client's
						 * FIN (reading and discarding) so that closing
						 * with unread input does not reset the answer away */
#define DG_EGRESS_LINGER_BYTES (64 * 1024)      /* discarded at most while lingering */
#define DG_EGRESS_BUF (32 * 1024)               /* relay buffer per direction per connection */
#define DG_EGRESS_SESSIONS_MAX 256              /* sessions served at once */
#define DG_EGRESS_SESSION_CONNS_MAX 64          /* open connections per session; the next
						 * gets 429 */
#define DG_EGRESS_SESSION_REFUSING_MAX 16       /* 429 answers in flight per session beyond
						 * the cap; past them a connection is closed unanswered */
#define DG_EGRESS_CONNS_MAX 1024                /* connections of all sessions; past it a new
						 * one gets one try at a 503 and is closed */
#define DG_EGRESS_SESSION_BYTES_MAX (1ull << 30) /* relayed bytes per session, both ways */
#define DG_EGRESS_SESSION_LOOKUPS_MAX 16        /* name lookups in flight per session (those
						 * abandoned by a closed connection included);
						 * more wait for a free one */
#define DG_EGRESS_ACCEPT_BURST 8                /* accepts per listener per loop turn */
#define DG_EGRESS_CTL_BURST 16                  /* control messages per loop turn */
#define DG_EGRESS_EPOLL_BATCH 64                /* events per epoll_wait */
#define DG_EGRESS_EVENTS_MAX 1024               /* events queued while the gateway does not
						 * read; more are dropped and counted */
#define DG_EGRESS_OVERRIDES_MAX 16              /* entries of dg_egress_opts.resolve */
#define DG_EGRESS_NOFILE 4096                   /* RLIMIT_NOFILE of the proxy: above
						 * 2 * CONNS_MAX + SESSIONS_MAX + a few */
#define DG_EGRESS_START_MS 5000                 /* dg_egress_start waits this long for "ready" */
#define DG_EGRESS_STOP_MS 2000                  /* dg_egress_stop waits this long before SIGKILL */
#define DG_EGRESS_REASON_MAX 400                /* bytes of an event's reason */
#define DG_EGRESS_CONN_NUMBER_MAX (1ull << 53)  /* an add's "conns_before": connection
						 * numbers stay exact in every JSON reader */

/* ---- the gateway's side --------------------------------------------------- */

/* A handle on a proxy: its pid and the owner's end of a SOCK_SEQPACKET
 * socketpair (non-blocking, close-on-exec). The gateway adopts fd into its
 * event loop and calls dg_egress_recv when it is readable. pid is -1 in a
 * handle on a proxy this process did not fork (the gateway's, on the
 * spawner's child): dg_egress_stop then only closes the channel.
 * Note: policy/policy-priv.h has a struct of the same name (a compiled
 * egress pattern); no file includes both. */
struct dg_egress {
	pid_t pid;
	int fd;
};

struct dg_egress_opts {
	/* Test-only resolver override: names that map to a fixed address and
	 * skip the address-range check (so tests can point "allowed.test" and
	 * "denied.test" at loopback servers). Each entry "NAME:PORT=IP:PORT",
	 * NAME a canonical host (dg_url_parse's rules), IP a dotted quad or a
	 * bracketed IPv6 address; at most DG_EGRESS_OVERRIDES_MAX. The egress
	 * allowlist still applies to NAME:PORT. */
	const char *const *resolve;
	int n_resolve;
	bool verbose; /* one line on stderr per event */
	/* Test-only: when non-zero, replace the named default, lower only
	 * (a larger value is clamped to the default). */
	int head_timeout_ms;
	int connect_timeout_ms;
	int idle_timeout_ms;
	uint64_t session_bytes_max;
	/* Test-only: run without the seccomp filter, so that LeakSanitizer can
	 * check the proxy's memory when it exits (its stop-the-world needs a
	 * non-thread clone and ptrace, which the filter kills). Ignored by
	 * dg_egress_configure. */
	bool no_seccomp;
};

/* Forks the proxy. Call while still root, before the gateway drops its
 * privileges: the child sets PR_SET_PDEATHSIG, raises its descriptor limit
 * to DG_EGRESS_NOFILE, drops to DG_EGRESS_UID with no groups and no
 * capabilities (bounding set included), sets no_new_privs, and keeps its own
 * copy of the compiled policy p (inherited by fork: the caller may free its
 * own afterwards). o may be NULL. Returns once the child reported that it
 * dropped its privileges and installed its seccomp filter (unless
 * o->no_seccomp; bounded by DG_EGRESS_START_MS): 0, or a negative
 * errno with err naming what failed (a bad override, the child's own
 * report). */
int dg_egress_start(struct dg_egress *e, const struct dg_policy *p, const struct dg_egress_opts *o,
		    struct dg_err *err);

/* For `deskgate serve`: checks o (as dg_egress_start does; no_seccomp is
 * ignored) and keeps it, the overrides parsed, for dg_egress_spawn. Call
 * once, before dg_spawner_start: the spawner inherits what was kept, so the
 * options of every proxy are fixed when deskgate starts and nothing the
 * gateway sends later can change them. Returns 0 or -EINVAL with err. */
int dg_egress_configure(const struct dg_egress_opts *o, struct dg_err *err);

/* For the spawner: starts a proxy as dg_egress_start does, with the options
 * dg_egress_configure kept and the built-in default policy, which allows no
 * egress (every session's add carries its own list). The caller owns the
 * child (reaps it) and hands e->fd on. Returns 0 or a negative errno. */
int dg_egress_spawn(struct dg_egress *e, struct dg_err *err);

/* Hands over a session's listening socket (duplicated by SCM_RIGHTS: the
 * caller keeps its copy and closes it when done; the gateway keeps it for
 * the session's life, to hand it to a restarted proxy; the proxy makes the
 * shared file description non-blocking). session_id must pass
 * dg_session_id_valid. p: the policy the session runs under, whose "egress"
 * list and "urls" section (for the WebSockets of the SOCKS front) are sent
 * along and decide for it (NULL: the policy the proxy was started with). The
 * add message must fit DG_SEQ_MAX (64 KiB): a policy whose lists are larger
 * is refused here. The proxy answers with an "egress_session" event (ok or
 * the reason it refused). */
int dg_egress_add(struct dg_egress *e, const char *session_id, int listen_fd,
		  const struct dg_policy *p, struct dg_err *err);

/* The same for a session an earlier proxy served: its connections are
 * numbered from conns_before + 1 (at most DG_EGRESS_CONN_NUMBER_MAX), so
 * that numbers stay unique in the session's recording. */
int dg_egress_add_after(struct dg_egress *e, const char *session_id, int listen_fd,
			const struct dg_policy *p, uint64_t conns_before, struct dg_err *err);

/* Stops accepting for the session and closes all its connections (each gets
 * its "egress_closed" event), then an "egress_session" event. */
int dg_egress_remove(struct dg_egress *e, const char *session_id, struct dg_err *err);

/* One event from the proxy if one is waiting: 1 (*ev set, caller owns it),
 * 0 none, < 0 the proxy is gone (-EPIPE) or broke the protocol (-EPROTO):
 * stop it. */
int dg_egress_recv(struct dg_egress *e, json_t **ev, struct dg_err *err);

/* Closes the channel (the proxy then closes everything and exits), waits up
 * to DG_EGRESS_STOP_MS, kills it if needed and reaps it. Idempotent. */
void dg_egress_stop(struct dg_egress *e);

/* Events, one JSON object per datagram:
 *   {"event":"egress_ready","pid":P}                       once, at start
 *   {"event":"egress","session":ID,"conn":N,"method":M,"target":"host:port",
 *    "verdict":"allow"|"deny","rule":R,"reason":TEXT,"address":"ip:port"}
 *       at each decision; method and target when the request was read,
 *       address when one was chosen; R is "egress.allow[i]" (allowed),
 *       "egress.default" (no pattern), "egress.address" (a non-public
 *       address), "egress.resolve" (lookup failed or timed out),
 *       "egress.request" (a malformed or incomplete request head),
 *       "egress.caps" (a connection or byte cap). A connection may have two:
 *       allow, then deny "egress.caps" when its session's byte cap is hit.
 *       An allowed connection whose origin fails is answered 502 (refused)
 *       or 504 (connect timeout) with X-Deskgate-Rule "egress.connect"; that
 *       is no new decision: the reason is in its "egress_closed" error.
 *   {"event":"decision","session":ID,"conn":N,"layer":"browser","via":"egress",
 *    "method":"GET","resource":"WebSocket","target":"websocket","url":URL|null,
 *    "origin":"wss://host[:port]" (url null),"verdict","rule","reason"}
 *       a WebSocket of the SOCKS front decided by the "urls" rules, in the
 *       shape of the browser's requests the guard holds: url the ws:// URL
 *       of the handshake; for wss:// (a TLS record first) only the origin,
 *       decided by dg_policy_decide_ws_origin. "ask" is reported as deny.
 *       A refused one is answered 403 in the tunnel (ws://) or closed
 *       (wss://) and has no "egress" event; an allowed one has its "egress"
 *       allow (method "SOCKS5") once connected.
 *   {"event":"egress_closed","session":ID,"conn":N,"bytes_up":U,
 *    "bytes_down":D,"duration_ms":T,"error":TEXT|null}
 *       when a connection that had an "egress" event closes; bytes are
 *       those relayed (client -> origin, origin -> client)
 *   {"event":"egress_session","session":ID,"op":"add"|"remove","ok":B,
 *    "error":TEXT (when !ok),"closed":K (remove)}
 *   {"event":"egress_dropped","dropped":K}   K events were dropped (queue full)
 *   {"event":"egress_error","error":TEXT}    a control message was ignored
 * N numbers a session's connections from 1 (from conns_before + 1 when
 * the add said so), in accept order.
 */

/* Control messages (gateway -> proxy), one datagram each:
 *   {"op":"add","session":ID,"egress":[...],"urls":{...},"conns_before":K}
 *   with exactly one descriptor, a listening TCP socket ("egress": the
 *   session's own allowlist, optional; "urls": its urls section, for the
 *   WebSockets of the SOCKS front, optional; "conns_before": optional, 0 ..
 *   DG_EGRESS_CONN_NUMBER_MAX); {"op":"remove","session":ID}. The gateway
 *   is more trusted than the proxy's clients: a malformed message is
 *   logged, reported as "egress_error" and ignored. When the channel
 *   closes, the proxy exits. */

/* ---- the proxy's seccomp filter (egress-seccomp.c) ---------------------- */

/* Sets no_new_privs and installs the proxy's filter on every thread of the
 * calling process (libseccomp, TSYNC): an allowlist sized for the proxy's
 * loop, getaddrinfo_a's helper threads and glibc's resolver; anything else,
 * and any foreign architecture, kills the process (SCMP_ACT_KILL_PROCESS).
 * clone3 answers ENOSYS (glibc falls back to clone, allowed with thread
 * flags only) and socket(AF_NETLINK) EAFNOSUPPORT (getaddrinfo copes);
 * sockets are AF_INET, AF_INET6 and AF_UNIX only; paths are opened
 * read-only; signals go to the process itself only. The reasons for each
 * entry are in egress-seccomp.c. Called by the proxy once it is set up,
 * and by tests in a forked child. Returns 0 or a negative errno with err. */
int dg_egress_seccomp_install(struct dg_err *err);

/* ---- request heads (egress-http.c) -------------------------------------- */

struct dg_egress_req {
	bool connect;                      /* CONNECT host:port (else absolute-form) */
	char method[DG_EGRESS_METHOD_MAX + 1];
	char host[DG_URL_HOST_MAX + 1];    /* canonical: lowercase, IPv6 in brackets */
	bool host_is_ip;
	uint16_t port;
	int minor;                         /* HTTP/1.<minor>: 0 or 1 */
	size_t head_len;                   /* bytes of the head, final CRLFCRLF included */
	size_t path_off, path_len;         /* absolute-form: path and query in buf (origin-form) */
	size_t headers_off;                /* offset of the first header line (== head_len - 2
					    * when there is none) */
};

/* Parses the request head at the start of buf[0..len) (len may exceed the
 * head: what follows is body or tunnel data). Strict, because every byte
 * comes from the sandbox and the origin must read the request as the proxy
 * did:
 *   request line  METHOD SP target SP "HTTP/1.1"|"HTTP/1.0" CRLF, single
 *                 spaces, METHOD 1..DG_EGRESS_METHOD_MAX of A-Z;
 *   CONNECT       target host:port: host canonical as dg_url_parse wants it
 *                 (lowercase labels, a dotted quad or a bracketed canonical
 *                 IPv6 address), an explicit decimal port 1..65535 without
 *                 leading zeros;
 *   other methods target an absolute http:// URL that dg_url_parse accepts,
 *                 without a fragment; https:// is refused (HTTPS must use
 *                 CONNECT), so are origin-form ("/path") and "*";
 *   header lines  token ":" value, no whitespace before the colon, no
 *                 obs-fold (a line starting with SP or HTAB), values of
 *                 HTAB, SP, visible ASCII and bytes >= 0x80;
 *   Host          at most one; required for HTTP/1.1 absolute-form; when
 *                 given it must name the target's host (with or without
 *                 its port, case-insensitively), so a request cannot be
 *                 steered to another virtual host behind an allowed one;
 *   line ends     CRLF only: a bare LF or a bare CR anywhere is refused
 *                 (RFC 9112 lets a recipient accept bare LF; the origin may
 *                 not, and the two must agree), so is NUL.
 * Returns 0 (out filled), -EAGAIN when the head is not complete yet and what
 * was seen is valid, -E2BIG when no head ends within DG_EGRESS_HEAD_MAX
 * bytes, -EINVAL with the reason in err. Never reads past len, never
 * allocates. */
int dg_egress_parse_request(const char *buf, size_t len, struct dg_egress_req *out,
			    struct dg_err *err);

/* A WebSocket handshake read in a SOCKS tunnel to host:port (see "SOCKS5"
 * below): the same strict grammar, but the request line must be
 * "GET <path> HTTP/1.1" with an origin-form target that makes
 * "ws://host[:port]<path>" a URL dg_url_parse_ws accepts, with exactly one
 * Host header naming host (and its port), and exactly one Upgrade header
 * holding the token "websocket". out->path_off/path_len locate the target
 * in buf, out->head_len the head. Returns as dg_egress_parse_request. */
int dg_egress_parse_ws_handshake(const char *buf, size_t len, const char *host, uint16_t port,
				 struct dg_egress_req *out, struct dg_err *err);

/* ---- SOCKS5 (egress-http.c) ---------------------------------------------
 *
 * Chromium in the jail sends only its WebSockets (ws:// and wss://) to the
 * proxy's listener as SOCKS5 (--proxy-server "http=P;https=P;socks=
 * socks5://P": WebSockets take the "socks" entry, every other request the
 * HTTP proxy), so a connection whose first byte is 5 is a WebSocket, and
 * only the handshake's first bytes, read before the origin is connected,
 * say whether it is ws:// (an HTTP/1.1 handshake the proxy reads and
 * decides by URL) or wss:// (a TLS record: decided by origin,
 * dg_policy_decide_ws_origin). Served: version 5, the method "no
 * authentication", the command CONNECT, an IPv4 address or a host name
 * (checked as dg_egress_host_check does; Chromium sends names). */
#define DG_EGRESS_SOCKS_VERSION 5
#define DG_EGRESS_SOCKS_REPLY_LEN 10
/* Reply codes (RFC 1928 section 6). */
#define DG_EGRESS_SOCKS_OK 0x00
#define DG_EGRESS_SOCKS_FAILURE 0x01   /* general failure: malformed, caps */
#define DG_EGRESS_SOCKS_RULESET 0x02   /* not allowed by the ruleset */
#define DG_EGRESS_SOCKS_UNREACHABLE 0x04
#define DG_EGRESS_SOCKS_REFUSED 0x05
#define DG_EGRESS_SOCKS_TIMEOUT 0x06   /* TTL expired: used for timeouts */
#define DG_EGRESS_SOCKS_COMMAND 0x07   /* command not supported */
#define DG_EGRESS_SOCKS_ADDRESS 0x08   /* address type not supported */
#define DG_EGRESS_SOCKS_NO_METHOD 0xff /* method reply: no acceptable method */

/* The greeting VER NMETHODS METHODS at the start of buf[0..len): 0 when it
 * offers "no authentication" (*used: its length), -EAGAIN when incomplete,
 * -EACCES when it does not (answer DG_EGRESS_SOCKS_NO_METHOD), -EINVAL
 * when malformed. */
int dg_egress_socks_greeting(const char *buf, size_t len, size_t *used, struct dg_err *err);

/* The request VER CMD RSV ATYP DST.ADDR DST.PORT: 0 with out's host, port
 * and method ("SOCKS5") set and *used its length; -EAGAIN incomplete;
 * -EINVAL with *reply the code to answer with. Never reads past len. */
int dg_egress_socks_request(const char *buf, size_t len, struct dg_egress_req *out, size_t *used,
			    uint8_t *reply, struct dg_err *err);

/* A reply of code into out; returns its length. */
size_t dg_egress_socks_reply(uint8_t code, char out[DG_EGRESS_SOCKS_REPLY_LEN]);

/* A port as the proxy accepts it anywhere: 1..65535 in decimal, 1 to 5
 * digits, no leading zero, no sign or space. Returns 0 or -EINVAL. */
int dg_egress_port_parse(const char *s, size_t n, uint16_t *port);

/* Checks s[0..n) as a canonical host (dg_url_parse's rules: lowercase
 * labels, dotted quad, bracketed canonical IPv6) and copies it to host
 * (DG_URL_HOST_MAX + 1 bytes). Returns 0 or -EINVAL with the reason. */
int dg_egress_host_check(const char *s, size_t n, char *host, bool *is_ip, struct dg_err *err);

/* The head to send to the origin for an absolute-form request r parsed from
 * buf: the request line in origin-form, every header line except Proxy-*,
 * Connection and Keep-Alive, then "Connection: close". Its length is at
 * most r->head_len + DG_EGRESS_REWRITE_EXTRA. Returns the length written to
 * out, or -E2BIG when cap is too small. */
#define DG_EGRESS_REWRITE_EXTRA 19 /* strlen("Connection: close\r\n") */
int dg_egress_rewrite_head(const char *buf, const struct dg_egress_req *r, char *out, size_t cap);

/* An error answer: "HTTP/1.1 <status> <text>", Content-Type text/plain,
 * Content-Length, Connection: close and, with rule, X-Deskgate-Rule; the
 * body is one line "deskgate egress: <reason>" (the reason cut to
 * DG_EGRESS_REASON_MAX, control bytes made spaces). Returns the length, or 0
 * when it does not fit cap (DG_EGRESS_RESPONSE_MAX always fits). */
#define DG_EGRESS_RESPONSE_MAX 1024
size_t dg_egress_error_response(int status, const char *rule, const char *reason, char *out,
				size_t cap);

/* ---- addresses (egress-addr.c) ------------------------------------------ */

/* Whether sa (AF_INET or AF_INET6) is a public unicast address the proxy
 * may connect to. 0 = public; -EACCES = refused, with why naming the
 * address and the range ("10.1.2.3 is in 10.0.0.0/8 (private)"). Refused:
 * IPv4 0/8, 10/8, 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24,
 * 192.0.2/24, 192.88.99/24, 192.168/16, 198.18/15, 198.51.100/24,
 * 203.0.113/24, 224/4, 240/4 (255.255.255.255 named broadcast); IPv6 ::,
 * ::1, ::/96 (IPv4-compatible), 100::/64, 2001:2::/48, 2001:10::/28,
 * 2001:20::/28, 2001:db8::/32, 3fff::/20, fc00::/7, fe80::/10, fec0::/10,
 * ff00::/8, anything else outside 2000::/3; and the IPv4 embedded in
 * ::ffff:0:0/96 (mapped), 64:ff9b::/96 (NAT64), 64:ff9b:1::/48 (local-use
 * NAT64, in its /96 form: the last 32 bits), 2002::/16 (6to4) and 2001::/32
 * (Teredo: server, and client as the inverted last 32 bits) is checked as
 * IPv4. Another family is refused. */
int dg_egress_addr_check(const struct sockaddr *sa, char *why, size_t why_len);

/* "1.2.3.4:80" or "[2001:db8::1]:443" into out (at least 64 bytes). */
void dg_egress_addr_format(const struct sockaddr *sa, char *out, size_t len);

/* One parsed resolver override. */
struct dg_egress_override {
	char host[DG_URL_HOST_MAX + 1];
	uint16_t port;
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

/* Parses "NAME:PORT=IP:PORT". Returns 0 or -EINVAL naming what is wrong. */
int dg_egress_override_parse(const char *s, struct dg_egress_override *o, struct dg_err *err);

/* Parses a literal host as dg_url_parse gives it ("1.2.3.4", "[::1]") with
 * port into sa. Returns 0 or -EINVAL. */
int dg_egress_literal_addr(const char *host, uint16_t port, struct sockaddr_storage *sa,
			   socklen_t *len);

#endif
