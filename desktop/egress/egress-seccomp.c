/* The egress proxy's own seccomp filter (contract: egress-priv.h).
 *
 * The proxy is one known program: an epoll loop over descriptors it was
 * handed or accepted, outgoing TCP connections, and glibc's resolver, run by
 * getaddrinfo_a in helper threads. Its filter is therefore far narrower
 * than the jail's (desktop/spawner/seccomp.c, which must run arbitrary programs),
 * and its default is to kill the process rather than answer EPERM: a call
 * outside this list is a bug or an attack in progress, never something the
 * proxy copes with, and a dead proxy is restarted by the gateway (which gives
 * up after too many deaths, gateway/egress-link.c). The kill is
 * SCMP_ACT_KILL_PROCESS, so no helper thread survives its process; the
 * spawner, which reaps the proxy, logs the SIGSYS.
 *
 * Two calls answer an error instead, because glibc makes them on paths the
 * proxy takes and copes with the refusal:
 *   clone3                ENOSYS: pthread_create tries it first and falls back
 *                         to clone, whose flags the filter can see;
 *   socket(AF_NETLINK)    EAFNOSUPPORT: getaddrinfo asks the kernel for the
 *                         host's addresses (__check_pf) to sort a name's
 *                         results, and assumes both families when it cannot.
 * Foreign architectures (i386 through int 0x80, x32 through nr|0x40000000)
 * are killed, as in the jail.
 *
 * Argument filters (libseccomp compares 64 bits, the kernel reads int
 * arguments as 32: every comparison on one masks it, as in seccomp.c):
 *   clone        thread flags only: CLONE_VM|FS|FILES|SIGHAND|THREAD set,
 *                no exit signal, no namespace, vfork, ptrace, parent or
 *                pidfd flag (a fork or a new namespace is killed);
 *   socket       AF_INET and AF_INET6 (stream: origins and DNS over TCP;
 *                datagram: DNS, and getaddrinfo's source-address probe),
 *                AF_UNIX (nscd and NSS modules), with the protocol 0 or
 *                the type's own; AF_NETLINK refused as above; every other
 *                family (packet, raw, vsock, alg, ...) killed;
 *   openat/open  read-only: no write access mode, O_CREAT, O_TRUNC,
 *                O_APPEND or O_TMPFILE (the resolver reads /etc/hosts,
 *                resolv.conf, nsswitch.conf, gai.conf, NSS modules);
 *   ioctl        FIONREAD only (the resolver sizes a UDP answer);
 *   kill, tgkill, rt_sigqueueinfo
 *                to the proxy's own pid only (getaddrinfo_a's completion
 *                signal, raise and abort); tkill, which names a thread of
 *                any process, is not allowed.
 * Not listed, so killed: execve and execveat, fork (clone without the thread
 * flags), ptrace and every call that reaches into another process, mount and
 * the namespace calls, bind and listen (the proxy is handed its listeners),
 * socketpair, any write-open of a path, chmod/chown/unlink and friends,
 * prctl, seccomp, bpf, io_uring, userfaultfd, keyctl, perf_event_open, ...
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "desktop/egress/egress-priv.h"

#if !defined(__x86_64__)
#error "the egress filter is written for x86_64 (syscall numbers, int 0x80 and x32 handling)"
#endif

#define LOW32 0xffffffffull

struct esc {
	int nr;
	const char *name;
};
#define ESC(n) { __NR_##n, #n }

/* Allowed whatever the arguments. */
static const struct esc egress_allow[] = {
	/* the loop: descriptors it holds, accepted or connected */
	ESC(read), ESC(write), ESC(readv), ESC(writev), ESC(pread64), ESC(lseek), ESC(close),
	ESC(fcntl), ESC(epoll_wait), ESC(epoll_pwait), ESC(epoll_pwait2), ESC(epoll_ctl),
	ESC(poll), ESC(ppoll),
	ESC(accept), ESC(accept4), ESC(connect), ESC(shutdown), ESC(getsockopt), ESC(setsockopt),
	ESC(getsockname), ESC(getpeername), ESC(recvfrom), ESC(recvmsg), ESC(sendto),
	ESC(sendmsg), ESC(sendmmsg),
	/* the resolver's files (opened read-only, below) and NSS modules */
	ESC(fstat), ESC(newfstatat), ESC(stat), ESC(statx), ESC(uname),
	/* memory */
	ESC(brk), ESC(mmap), ESC(munmap), ESC(mprotect), ESC(mremap), ESC(madvise),
	/* getaddrinfo_a's helper threads (clone itself is filtered below);
	 * sched_getaffinity and sigaltstack are the sanitizer runtimes' setup of
	 * a new thread (a sanitizer build runs under the same filter) */
	ESC(futex), ESC(set_robust_list), ESC(rseq), ESC(sched_yield), ESC(sched_getaffinity),
	ESC(gettid), ESC(getpid), ESC(exit), ESC(exit_group), ESC(restart_syscall),
	/* signals: the proxy's own masks and handlers (sending is filtered below) */
	ESC(rt_sigprocmask), ESC(rt_sigaction), ESC(rt_sigreturn), ESC(sigaltstack),
	/* identity, read only (the resolver asks) */
	ESC(getuid), ESC(geteuid), ESC(getgid), ESC(getegid),
	/* time and randomness */
	ESC(clock_gettime), ESC(clock_nanosleep), ESC(nanosleep), ESC(gettimeofday),
	ESC(getrandom),
};

static void ctx_release(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

/* One rule, with a message naming the syscall and what the rule is for. */
static int rule(scmp_filter_ctx ctx, struct dg_err *err, uint32_t action, int nr,
		const char *name, const char *what, unsigned n, const struct scmp_arg_cmp *cmp)
{
	int r = seccomp_rule_add_exact_array(ctx, action, nr, n, cmp);
	if (r < 0)
		return dg_err_set(err, r, "seccomp rule for %s (%s): %s", name, what, strerror(-r));
	return 0;
}

static int allow(scmp_filter_ctx ctx, struct dg_err *err, int nr, const char *name,
		 const char *what, unsigned n, const struct scmp_arg_cmp *cmp)
{
	return rule(ctx, err, SCMP_ACT_ALLOW, nr, name, what, n, cmp);
}

static int add_clone(scmp_filter_ctx ctx, struct dg_err *err)
{
	/* Bits the kernel reads (the low 32) that a thread may leave either
	 * way: TLS and tid bookkeeping, System V undo sharing. */
	const uint64_t optional = CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID |
				  CLONE_CHILD_SETTID | CLONE_SYSVSEM | CLONE_DETACHED;
	const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD;
	struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32 & ~optional, thread);
	int r = allow(ctx, err, __NR_clone, "clone", "thread flags only", 1, &c);
	if (r == 0)
		r = rule(ctx, err, SCMP_ACT_ERRNO(ENOSYS), __NR_clone3, "clone3", "ENOSYS",
				    0, NULL);
	return r;
}

static int add_socket(scmp_filter_ctx ctx, struct dg_err *err)
{
	static const struct {
		int family, type, proto;
		const char *what;
	} ok[] = {
		{AF_INET, SOCK_STREAM, 0, "AF_INET/SOCK_STREAM/0"},
		{AF_INET, SOCK_STREAM, IPPROTO_TCP, "AF_INET/SOCK_STREAM/TCP"},
		{AF_INET, SOCK_DGRAM, 0, "AF_INET/SOCK_DGRAM/0"},
		{AF_INET, SOCK_DGRAM, IPPROTO_UDP, "AF_INET/SOCK_DGRAM/UDP"},
		{AF_INET6, SOCK_STREAM, 0, "AF_INET6/SOCK_STREAM/0"},
		{AF_INET6, SOCK_STREAM, IPPROTO_TCP, "AF_INET6/SOCK_STREAM/TCP"},
		{AF_INET6, SOCK_DGRAM, 0, "AF_INET6/SOCK_DGRAM/0"},
		{AF_INET6, SOCK_DGRAM, IPPROTO_UDP, "AF_INET6/SOCK_DGRAM/UDP"},
		{AF_UNIX, SOCK_STREAM, 0, "AF_UNIX/SOCK_STREAM/0"},
		{AF_UNIX, SOCK_DGRAM, 0, "AF_UNIX/SOCK_DGRAM/0"},
		{AF_UNIX, SOCK_SEQPACKET, 0, "AF_UNIX/SOCK_SEQPACKET/0"},
	};
	int r = 0;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]) && r == 0; i++) {
		/* The type's low four bits are the type, the rest
		 * SOCK_NONBLOCK/SOCK_CLOEXEC. */
		struct scmp_arg_cmp c[3] = {
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, (uint64_t)ok[i].family),
			SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)ok[i].type),
			SCMP_A2_64(SCMP_CMP_MASKED_EQ, LOW32, (uint64_t)ok[i].proto),
		};
		r = allow(ctx, err, __NR_socket, "socket", ok[i].what, 3, c);
	}
	if (r == 0) {
		struct scmp_arg_cmp nl = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK);
		r = rule(ctx, err, SCMP_ACT_ERRNO(EAFNOSUPPORT), __NR_socket, "socket",
				    "AF_NETLINK: EAFNOSUPPORT", 1, &nl);
	}
	return r;
}

static int add_open(scmp_filter_ctx ctx, struct dg_err *err)
{
	/* __O_TMPFILE is O_TMPFILE without O_DIRECTORY: a directory may be
	 * opened, an unnamed file may not be made in it. */
	const uint64_t writing = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE;
	struct scmp_arg_cmp at = SCMP_A2_64(SCMP_CMP_MASKED_EQ, writing, 0);
	int r = allow(ctx, err, __NR_openat, "openat", "read-only", 1, &at);
	struct scmp_arg_cmp op = SCMP_A1_64(SCMP_CMP_MASKED_EQ, writing, 0);
	if (r == 0)
		r = allow(ctx, err, __NR_open, "open", "read-only", 1, &op);
	return r;
}

static int add_self_signals(scmp_filter_ctx ctx, struct dg_err *err, pid_t self)
{
	static const struct esc to_self[] = {ESC(kill), ESC(tgkill), ESC(rt_sigqueueinfo)};
	struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, (uint64_t)(uint32_t)self);
	int r = 0;
	for (size_t i = 0; i < sizeof(to_self) / sizeof(to_self[0]) && r == 0; i++)
		r = allow(ctx, err, to_self[i].nr, to_self[i].name, "own pid", 1, &c);
	return r;
}

int dg_egress_seccomp_install(struct dg_err *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return dg_err_set(err, -errno, "egress seccomp: no_new_privs: %s", strerror(errno));
	__attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx =
		seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return dg_err_set(err, -ENOMEM, "egress seccomp: seccomp_init failed");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return dg_err_set(err, r, "egress seccomp: ACT_BADARCH: %s", strerror(-r));
	/* Every thread, should one exist already (a lookup started before the
	 * filter): none may run unfiltered. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (r < 0)
		return dg_err_set(err, r, "egress seccomp: CTL_TSYNC: %s", strerror(-r));
	for (size_t i = 0; i < sizeof(egress_allow) / sizeof(egress_allow[0]); i++) {
		r = allow(ctx, err, egress_allow[i].nr, egress_allow[i].name, "allow", 0, NULL);
		if (r)
			return r;
	}
	struct scmp_arg_cmp fionread = SCMP_A1_64(SCMP_CMP_MASKED_EQ, LOW32, FIONREAD);
	if ((r = allow(ctx, err, __NR_ioctl, "ioctl", "FIONREAD", 1, &fionread)) ||
	    (r = add_clone(ctx, err)) || (r = add_socket(ctx, err)) || (r = add_open(ctx, err)) ||
	    (r = add_self_signals(ctx, err, getpid())))
		return r;
	r = seccomp_load(ctx);
	if (r < 0)
		return dg_err_set(err, r, "egress seccomp: seccomp_load: %s", strerror(-r));
	return 0;
}
