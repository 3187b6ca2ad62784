/* Internals of the egress proxy (desktop/egress/egress.h): its limits, its
 * seccomp filter, and the parsers and address checks its loop uses, which
 * the unit tests and fuzzers call directly.
 */
#ifndef DG_EGRESS_PRIV_H
#define DG_EGRESS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <jansson.h>

#include "base/base.h"
#include "desktop/egress/egress.h"
#include "desktop/proto/proto.h"
#include "policy/policy.h"

/* ---- limits (those the gateway's side relies on are in desktop/proto/proto.h)
 */

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
#define DG_EGRESS_NOFILE 4096                   /* RLIMIT_NOFILE of the proxy: above
						 * 2 * CONNS_MAX + SESSIONS_MAX + a few */
#define DG_EGRESS_REASON_MAX 400                /* bytes of an event's reason */

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
