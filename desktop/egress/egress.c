/* The egress proxy process (egress.h): its start in the parent, its
 * start-up in the child (privileges, limits, the loop's descriptors, the
 * seccomp filter), its loop and its exit. The gateway's side of its channel
 * is desktop/proto/egress-client.c; the loop's work is in egress-sessions.c,
 * egress-front.c, egress-conn.c and egress-events.c (egress-proxy-priv.h
 * says what each holds).
 *
 * Ownership: struct egress (G) exists only in the forked proxy; the gateway
 * side uses struct dg_egress alone.
 *
 * Fairness: level-triggered epoll, one read of at most DG_EGRESS_BUF per
 * ready descriptor per turn, at most DG_EGRESS_ACCEPT_BURST accepts per
 * listener per turn, per-session caps on connections, lookups and bytes:
 * one session's flood takes turns with every other descriptor and cannot
 * take more than its share of the global caps.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "desktop/egress/egress-proxy-priv.h"

_Static_assert(DG_EGRESS_BUF >= DG_EGRESS_HEAD_MAX + DG_EGRESS_REWRITE_EXTRA + 2,
	       "a rewritten head and the bytes read after it must fit one relay buffer");
_Static_assert(DG_EGRESS_NOFILE > 2 * DG_EGRESS_CONNS_MAX + DG_EGRESS_SESSIONS_MAX + 16,
	       "the descriptor limit must cover every connection the caps allow");

/* Present when built with LeakSanitizer: the proxy ends with _exit (it must
 * not run the atexit handlers of the process it was forked from), so it
 * asks for the leak check itself. */
extern void __lsan_do_leak_check(void) __attribute__((weak));

struct egress G;

__attribute__((noreturn)) static void proxy_exit(int status)
{
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX; i++)
		if (G.sessions[i].used)
			dg_egress_session_remove(&G.sessions[i]);
	dg_egress_bury();
	dg_egress_events_free();
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

static void loop(void)
{
	struct epoll_event evs[DG_EGRESS_EPOLL_BATCH];
	for (;;) {
		int n = epoll_wait(G.ep, evs, DG_EGRESS_EPOLL_BATCH,
				   dg_egress_next_timeout(dg_now_ms()));
		if (n < 0 && errno != EINTR) {
			dg_egress_log("epoll_wait: %s", strerror(errno));
			proxy_exit(1);
		}
		for (int i = 0; i < n; i++) {
			struct ep *ep = evs[i].data.ptr;
			uint32_t ev = evs[i].events;
			switch (ep->kind) {
			case EP_CTL: {
				int status;
				if (dg_egress_on_ctl(ev, &status))
					proxy_exit(status);
				break;
			}
			case EP_SIG:
				dg_egress_on_signal();
				break;
			case EP_LISTEN: {
				struct session *s = (struct session *)((char *)ep -
								       offsetof(struct session, lep));
				dg_egress_on_listen(s);
				break;
			}
			case EP_CLIENT: {
				struct conn *c = (struct conn *)((char *)ep - offsetof(struct conn, cep));
				if (!c->dead)
					dg_egress_on_client(c, ev);
				break;
			}
			case EP_ORIGIN: {
				struct conn *c = (struct conn *)((char *)ep - offsetof(struct conn, oep));
				if (!c->dead)
					dg_egress_on_origin(c, ev);
				break;
			}
			}
		}
		dg_egress_sweep(dg_now_ms());
		dg_egress_bury();
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

/* No groups, the instance's egress uid (dg_instance_egress_uid), no
 * capabilities (bounding set first, while CAP_SETPCAP is still held),
 * no_new_privs; verified, not trusted. */
static void drop_privileges(int fd)
{
	uid_t id = dg_instance_egress_uid();
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
	dg_egress_emit(json_pack("{s:s, s:i}", "event", "egress_ready", "pid", (int)getpid()));
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
