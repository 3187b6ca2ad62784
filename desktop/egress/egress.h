/* The egress proxy: the only way from a session's jail to the network.
 *
 * One process serves every session. Each jail's network namespace has only
 * loopback; the spawner creates a TCP socket listening on 127.0.0.1:3128
 * inside it and the gateway hands that listener to this process with the
 * session's id. Chromium in the jail uses it as its proxy, exec'd programs
 * get HTTP_PROXY/HTTPS_PROXY; nothing in the jail resolves names.
 *
 * The process runs in the host's network namespace as its instance's
 * egress uid (dg_instance_egress_uid), with no groups, no capabilities and
 * no_new_privs, dies with its parent, and keeps its own copy of the
 * compiled policy. Per connection it reads one HTTP/1.x request head
 * (bounded in size and time), which must be `CONNECT host:port` or an
 * absolute-form `METHOD http://host[:port]/...`; decides host:port with the
 * policy's "egress" allowlist (dg_policy_decide_egress: a policy without
 * rules allows nothing); resolves
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
 * start their own with dg_egress_start. The channel (the gateway's side:
 * dg_egress_add, ..., its control messages and events) is in
 * desktop/proto/proto.h.
 *
 * Files: egress.c (start-up, the loop), egress-sessions.c (control
 * messages, sessions), egress-front.c (a connection's request: HTTP head,
 * SOCKS5, WebSocket tunnel), egress-conn.c (admission, lookups, connect,
 * relay, timeouts), egress-events.c (events to the gateway), with the
 * loop's state in egress-proxy-priv.h; egress-http.c (request heads),
 * egress-addr.c (address ranges, resolver overrides), egress-seccomp.c
 * (the filter); egress-priv.h (their internals, for tests and fuzzers).
 */
#ifndef DG_EGRESS_H
#define DG_EGRESS_H

#include "base/base.h"
#include "desktop/proto/proto.h"

struct dg_policy; /* policy/policy.h: the egress process includes it itself */

/* Forks the proxy. Call while still root, before the gateway drops its
 * privileges: the child sets PR_SET_PDEATHSIG, raises its descriptor limit
 * to DG_EGRESS_NOFILE, drops to the instance's egress uid with no groups
 * and no capabilities (bounding set included), sets no_new_privs, and keeps
 * its own copy of the compiled policy p (inherited by fork: the caller may
 * free its own afterwards). o may be NULL. Returns once the child reported
 * that it dropped its privileges and installed its seccomp filter (unless
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

#endif
