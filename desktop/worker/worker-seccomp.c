/* The worker's own seccomp filter (contract: worker.h).
 *
 * Installed by the worker itself (dg_worker_main) once it holds every
 * descriptor it will use, so its allowlist is far narrower than the jail's
 * (desktop/spawner/seccomp.c, which must run arbitrary programs): anything
 * not listed answers EPERM, any other architecture kills the process. The
 * comparisons mask int arguments to the 32 bits the kernel reads, as in the
 * jail's filter.
 */
#include <errno.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "desktop/worker/worker.h"

#if !defined(__x86_64__)
#error "the worker filter is written for x86_64 (syscall numbers)"
#endif

struct dg_sc {
	int nr;
	const char *name;
};
#define SC(n) { __NR_##n, #n }

#define LOW32 0xffffffffull

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

/* The worker's filter: it already holds every descriptor it will use (the
 * control socket, the RFB socket, the DevTools pipes), so it needs no path,
 * no new socket and no process. What stays: I/O on its descriptors, memory,
 * time, signals for its own exit. */
static const struct dg_sc worker_allow[] = {
	SC(read), SC(write), SC(readv), SC(writev), SC(recvfrom), SC(recvmsg), SC(sendto),
	SC(sendmsg), SC(close), SC(poll), SC(ppoll), SC(select), SC(pselect6), SC(fstat),
	SC(newfstatat), SC(lseek), SC(fcntl), SC(mmap), SC(munmap), SC(mremap), SC(mprotect),
	SC(brk), SC(madvise), SC(futex), SC(clock_gettime), SC(clock_nanosleep), SC(nanosleep),
	SC(gettimeofday), SC(getpid), SC(gettid), SC(getuid), SC(geteuid), SC(getrandom),
	SC(sched_yield), SC(rt_sigreturn), SC(rt_sigprocmask), SC(rt_sigaction), SC(sigaltstack),
	SC(exit), SC(exit_group), SC(restart_syscall), SC(shutdown), SC(getsockopt),
	SC(setsockopt),
	/* The live view (view.c): libvncserver names each new viewer by its
	 * peer's address (a Unix socket's: nameless). */
	SC(getpeername),
};

int dg_seccomp_install_worker(struct dg_err *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return dg_err_set(err, -errno, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	__attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return dg_err_set(err, -ENOMEM, "seccomp_init failed");
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (r < 0)
		return dg_err_set(err, r, "seccomp_attr_set(ACT_BADARCH): %s", strerror(-r));
	for (size_t i = 0; i < sizeof(worker_allow) / sizeof(worker_allow[0]); i++) {
		r = rule(ctx, err, SCMP_ACT_ALLOW, worker_allow[i].nr, worker_allow[i].name,
			 "worker allow", 0, NULL);
		if (r)
			return r;
	}
	/* ioctl only for FIONREAD/FIONBIO-style queries on its own sockets. */
	struct scmp_arg_cmp fionread = SCMP_A1_64(SCMP_CMP_MASKED_EQ, LOW32, FIONREAD);
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_ioctl, "ioctl", "FIONREAD", 1, &fionread)))
		return r;
	r = seccomp_load(ctx);
	if (r < 0)
		return dg_err_set(err, r, "seccomp_load (worker filter): %s", strerror(-r));
	return 0;
}
