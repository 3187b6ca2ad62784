/* Capabilities and the seccomp filter of the jail (contract: seccomp-priv.h).
 *
 * Both run in the jail's init, after the mounts and before the command is
 * executed, as an unprivileged host uid that holds every capability of its
 * own user namespace. Whatever the command starts inherits both.
 *
 * The filter is an allowlist for x86_64 only: anything not listed answers
 * EPERM, any other architecture (i386 through int 0x80, x32 through
 * nr | 0x40000000) kills the process with SIGSYS. It is sized for ordinary
 * programs (coreutils, sh, python3, curl, static binaries) and for the desktop
 * (Xvnc, xterm, a window manager, Chromium with --no-sandbox). The choice per
 * group follows Docker's default profile (moby/profiles/seccomp) and
 * flatpak/bubblewrap's, made stricter where the jail has no use for a call
 * (the reasons are beside each group below).
 *
 * libseccomp 2.5.4, measured here (see the tests):
 * - an unconditional rule and a conditional rule for the same syscall do not
 *   combine: a conditional rule added after an unconditional one is dropped
 *   silently (seccomp_rule_add returns 0), an unconditional one added after
 *   conditional ones replaces them; a rule whose action is the default action
 *   is refused (-EACCES); two comparisons on one argument in one rule are
 *   refused (-EINVAL). "Allow ioctl, but EPERM for TIOCSTI" therefore cannot
 *   be written as two rules: every argument filter here is a set of ALLOW
 *   rules, and what they do not cover falls to the default EPERM.
 * - comparisons are 64-bit, while the kernel reads int arguments (ioctl's
 *   request, socket's domain, personality) as 32 bits: 0x100005412 is TIOCSTI
 *   to the kernel. Every comparison on such an argument masks it to the bits
 *   the kernel reads (SCMP_CMP_MASKED_EQ), so upper bits cannot change the
 *   verdict in either direction.
 * - with only the native arch in the filter, the generated BPF kills
 *   nr >= 0x40000000 (x32) with the bad-arch action (except nr -1, which a
 *   tracer uses to skip a call). seccomp_export_pfc does not show that check;
 *   the tests read the loaded program back and check it.
 *
 * Cost, measured on the development VM (2 vCPU, kernel 6.18, -O2, no
 * sanitizers): adding the ~300 rules takes about 0.5 ms, libseccomp's BPF
 * generation about 1.5 ms, the kernel's load of the 560-instruction program
 * about 0.2 ms (0.54 ms for the linear layout, whose per-syscall verdict
 * cache is slower to compute). Building in every jail's init would cost
 * ~2.2 ms of the start budget, so the program is built once per process
 * (dg_seccomp_prepare, in the long-lived parent before it forks jails) and
 * each init only loads it: 0.2-0.3 ms. Without a prepare, install builds it
 * itself. At run time the kernel caches the syscalls that are allowed
 * whatever their arguments: getppid costs +15 ns under the filter, an
 * argument-filtered ioctl +0-50 ns.
 */
#include "desktop/spawner/seccomp-priv.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/securebits.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "the jail filter is written for x86_64 (syscall numbers, int 0x80 and x32 handling)"
#endif

/* ---------------------------------------------------------------- caps */

#define CAP_WORDS _LINUX_CAPABILITY_U32S_3
/* Capability numbers are probed with PR_CAPBSET_READ until EINVAL; this only
 * bounds the loop should a kernel never answer EINVAL. */
#define CAP_PROBE_MAX 1024

static int caps_get(struct __user_cap_data_struct d[CAP_WORDS])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	memset(d, 0, sizeof(*d) * CAP_WORDS);
	return (int)syscall(SYS_capget, &h, d);
}

static int caps_set(const struct __user_cap_data_struct d[CAP_WORDS])
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	return (int)syscall(SYS_capset, &h, d);
}

/* NOROOT: uid 0 gains nothing at execve. NO_SETUID_FIXUP: changing uids does
 * not touch capability sets. NO_CAP_AMBIENT_RAISE: ambient stays empty. Each
 * is locked, and KEEP_CAPS is locked off. */
#define DG_SECUREBITS                                                                  \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |               \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |                     \
	 SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

/* On success err->msg is empty, or holds a note when the securebits could not
 * be set because CAP_SETPCAP was not held (then the bounding set was already
 * empty, so no capability can come back, and the caller may log the note). */
int dg_caps_drop_all(struct dg_err *err)
{
	if (err)
		err->msg[0] = '\0';

	struct __user_cap_data_struct cur[CAP_WORDS];
	if (caps_get(cur) < 0)
		return dg_err_set(err, -errno, "capget: %s", strerror(errno));
	bool have_setpcap = cur[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP);

	/* Securebits first: setting them needs CAP_SETPCAP, which the bounding
	 * set drop below does not remove from the effective set but capset
	 * does. */
	int old = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (old < 0)
		return dg_err_set(err, -errno, "prctl(PR_GET_SECUREBITS): %s", strerror(errno));
	int want = (old & ~SECBIT_KEEP_CAPS) | DG_SECUREBITS;
	bool securebits_skipped = false;
	if (want != old && prctl(PR_SET_SECUREBITS, (unsigned long)want, 0, 0, 0) < 0) {
		int e = errno;
		if (e != EPERM || have_setpcap)
			return dg_err_set(err, -e, "prctl(PR_SET_SECUREBITS, %#x) (was %#x): %s",
					  (unsigned)want, (unsigned)old, strerror(e));
		securebits_skipped = true;
	}

	int ncaps = 0;
	for (; ncaps < CAP_PROBE_MAX; ncaps++) {
		int in = prctl(PR_CAPBSET_READ, (unsigned long)ncaps, 0, 0, 0);
		if (in < 0 && errno == EINVAL && ncaps > 0)
			break;
		if (in < 0)
			return dg_err_set(err, -errno, "prctl(PR_CAPBSET_READ, %d): %s", ncaps,
					  strerror(errno));
		if (in && prctl(PR_CAPBSET_DROP, (unsigned long)ncaps, 0, 0, 0) < 0)
			return dg_err_set(err, -errno,
					  "dropping capability %d from the bounding set%s: %s", ncaps,
					  have_setpcap ? "" : " (CAP_SETPCAP not held)",
					  strerror(errno));
	}
	if (ncaps > 32 * CAP_WORDS)
		return dg_err_set(err, -EOVERFLOW,
				  "kernel knows %d capabilities, capset v3 only %d", ncaps,
				  32 * CAP_WORDS);

	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return dg_err_set(err, -errno, "prctl(PR_CAP_AMBIENT_CLEAR_ALL): %s",
				  strerror(errno));

	struct __user_cap_data_struct none[CAP_WORDS];
	memset(none, 0, sizeof(none));
	if (caps_set(none) < 0)
		return dg_err_set(err, -errno, "capset(all zero): %s", strerror(errno));

	/* Read everything back: a capability that survived is a jail bug, not
	 * something to run a hostile program with. */
	if (caps_get(cur) < 0)
		return dg_err_set(err, -errno, "capget after drop: %s", strerror(errno));
	for (int w = 0; w < CAP_WORDS; w++)
		if (cur[w].effective || cur[w].permitted || cur[w].inheritable)
			return dg_err_set(err, -ENOTRECOVERABLE,
					  "capabilities left after capset: word %d eff %#x prm %#x inh %#x",
					  w, cur[w].effective, cur[w].permitted, cur[w].inheritable);
	for (int c = 0; c < ncaps; c++) {
		if (prctl(PR_CAPBSET_READ, (unsigned long)c, 0, 0, 0) != 0)
			return dg_err_set(err, -ENOTRECOVERABLE,
					  "capability %d still in the bounding set", c);
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, (unsigned long)c, 0, 0) != 0)
			return dg_err_set(err, -ENOTRECOVERABLE,
					  "capability %d still ambient (or unreadable)", c);
	}
	int now = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (!securebits_skipped && (now < 0 || (now & DG_SECUREBITS) != DG_SECUREBITS))
		return dg_err_set(err, -ENOTRECOVERABLE, "securebits %#x after setting %#x",
				  (unsigned)now, (unsigned)want);
	if (securebits_skipped && err)
		snprintf(err->msg, sizeof(err->msg),
			 "securebits not set (CAP_SETPCAP not held, securebits %#x); "
			 "the bounding set was already empty",
			 (unsigned)old);
	return 0;
}

/* ------------------------------------------------------------- seccomp */

/* Syscalls newer than the build machine's kernel headers (x86_64 numbers;
 * the syscall table is append-only). */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_map_shadow_stack
#define __NR_map_shadow_stack 453
#endif
#ifndef __NR_futex_wake
#define __NR_futex_wake 454
#endif
#ifndef __NR_futex_wait
#define __NR_futex_wait 455
#endif
#ifndef __NR_futex_requeue
#define __NR_futex_requeue 456
#endif
#ifndef __NR_mseal
#define __NR_mseal 462
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_getxattrat
#define __NR_getxattrat 464
#endif
#ifndef __NR_listxattrat
#define __NR_listxattrat 465
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#ifndef __NR_file_getattr
#define __NR_file_getattr 468
#endif
#ifndef __NR_file_setattr
#define __NR_file_setattr 469
#endif

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

struct dg_sc {
	int nr;
	const char *name;
};
#define SC(n) { __NR_##n, #n }

/* Allowed whatever the arguments. Not listed, so EPERM (the reason is given
 * where a neighbour is allowed):
 *   ptrace, process_vm_readv/writev, process_madvise, process_mrelease,
 *   pidfd_getfd, kcmp, get_robust_list: reach into other processes;
 *   mount, umount2, pivot_root, chroot, the fs* / open_tree / move_mount /
 *   mount_setattr API, statmount, listmount, setns: the mount and namespace
 *   layout is the jail's, fixed before the command runs;
 *   bpf, perf_event_open, userfaultfd, io_uring_*, the AIO calls (io_setup
 *   and friends), vmsplice, memfd_secret, modify_ldt, set/get_thread_area,
 *   remap_file_pages: large kernel attack surface that no program the jail
 *   runs needs (userfaultfd and io_uring in particular are exploit staples);
 *   keyctl, add_key, request_key: the kernel keyring is not namespaced;
 *   open_by_handle_at, name_to_handle_at: file handles bypass the mount
 *   tree (the "shocker" escape);
 *   kexec_*, *_module, swapon/off, reboot, acct, quotactl*, syslog, iopl,
 *   ioperm, settimeofday, clock_settime, adjtimex, clock_adjtime, vhangup,
 *   sethostname, setdomainname, lookup_dcookie, fanotify_*, sysfs, ustat,
 *   uselib, nfsservctl, and the unimplemented slots: host administration;
 *   mbind, set_mempolicy, set_mempolicy_home_node, migrate_pages,
 *   move_pages: NUMA placement, pointless in a jail and a history of bugs;
 *   sync, syncfs: flush every filesystem of the host (a cheap way to slow
 *   other tenants); the jail's writable filesystems are tmpfs, where they do
 *   nothing, and sync() cannot report failure to its caller anyway;
 *   cachestat: page-cache residency of the host's shared read-only files;
 *   lsm_*: nothing in the jail uses them. */
static const struct dg_sc allow_plain[] = {
	/* files and directories: the *at forms and their legacy spellings;
	 * chmod/chown only ever reach the jail's own files (caps are gone) */
	SC(read), SC(write), SC(readv), SC(writev), SC(pread64), SC(pwrite64),
	SC(preadv), SC(pwritev), SC(preadv2), SC(pwritev2),
	SC(open), SC(openat), SC(openat2), SC(creat), SC(close), SC(close_range),
	SC(lseek), SC(dup), SC(dup2), SC(dup3), SC(fcntl), SC(flock),
	SC(stat), SC(fstat), SC(lstat), SC(newfstatat), SC(statx), SC(statfs), SC(fstatfs),
	SC(access), SC(faccessat), SC(faccessat2),
	SC(getdents), SC(getdents64), SC(getcwd), SC(chdir), SC(fchdir), SC(umask),
	SC(rename), SC(renameat), SC(renameat2), SC(mkdir), SC(mkdirat), SC(rmdir),
	SC(link), SC(linkat), SC(unlink), SC(unlinkat), SC(symlink), SC(symlinkat),
	SC(readlink), SC(readlinkat),
	SC(chmod), SC(fchmod), SC(fchmodat), SC(fchmodat2),
	SC(chown), SC(fchown), SC(lchown), SC(fchownat),
	SC(utime), SC(utimes), SC(futimesat), SC(utimensat),
	SC(truncate), SC(ftruncate), SC(fallocate), SC(fadvise64), SC(readahead),
	SC(fsync), SC(fdatasync), SC(sync_file_range),
	SC(sendfile), SC(copy_file_range), SC(splice), SC(tee),
	SC(setxattr), SC(lsetxattr), SC(fsetxattr), SC(getxattr), SC(lgetxattr),
	SC(fgetxattr), SC(listxattr), SC(llistxattr), SC(flistxattr), SC(removexattr),
	SC(lremovexattr), SC(fremovexattr), SC(setxattrat), SC(getxattrat),
	SC(listxattrat), SC(removexattrat), SC(file_getattr), SC(file_setattr),
	SC(inotify_init), SC(inotify_init1), SC(inotify_add_watch), SC(inotify_rm_watch),
	SC(pipe), SC(pipe2),

	/* memory: mlock is bounded by RLIMIT_MEMLOCK; pkeys are used by V8;
	 * get_mempolicy only reads */
	SC(brk), SC(mmap), SC(munmap), SC(mprotect), SC(mremap), SC(msync), SC(mincore),
	SC(madvise), SC(mlock), SC(mlock2), SC(munlock), SC(mlockall), SC(munlockall),
	SC(pkey_mprotect), SC(pkey_alloc), SC(pkey_free), SC(memfd_create),
	SC(membarrier), SC(map_shadow_stack), SC(mseal), SC(get_mempolicy),

	/* processes and threads; clone is filtered below, clone3 answers ENOSYS */
	SC(fork), SC(vfork), SC(execve), SC(execveat), SC(exit), SC(exit_group),
	SC(wait4), SC(waitid), SC(set_tid_address), SC(set_robust_list), SC(rseq),
	SC(arch_prctl), SC(prctl), SC(gettid), SC(getpid), SC(getppid),
	SC(getpgid), SC(setpgid), SC(getpgrp), SC(getsid), SC(setsid),
	SC(futex), SC(futex_waitv), SC(futex_wake), SC(futex_wait), SC(futex_requeue),

	/* scheduling: raising priority or real-time classes still needs
	 * CAP_SYS_NICE, which is gone */
	SC(sched_yield), SC(sched_setparam), SC(sched_getparam), SC(sched_setscheduler),
	SC(sched_getscheduler), SC(sched_get_priority_max), SC(sched_get_priority_min),
	SC(sched_rr_get_interval), SC(sched_setaffinity), SC(sched_getaffinity),
	SC(sched_setattr), SC(sched_getattr), SC(getpriority), SC(setpriority),
	SC(ioprio_get), SC(ioprio_set), SC(getcpu),

	/* signals: the pid namespace bounds whom they reach */
	SC(rt_sigaction), SC(rt_sigprocmask), SC(rt_sigreturn), SC(rt_sigpending),
	SC(rt_sigtimedwait), SC(rt_sigsuspend), SC(rt_sigqueueinfo),
	SC(rt_tgsigqueueinfo), SC(sigaltstack), SC(pause), SC(alarm),
	SC(kill), SC(tkill), SC(tgkill), SC(pidfd_open), SC(pidfd_send_signal),
	SC(restart_syscall),

	/* time (reading and sleeping only) and event descriptors */
	SC(nanosleep), SC(clock_nanosleep), SC(clock_gettime), SC(clock_getres),
	SC(gettimeofday), SC(time), SC(times), SC(getitimer), SC(setitimer),
	SC(timer_create), SC(timer_settime), SC(timer_gettime), SC(timer_getoverrun),
	SC(timer_delete), SC(timerfd_create), SC(timerfd_settime), SC(timerfd_gettime),
	SC(eventfd), SC(eventfd2), SC(signalfd), SC(signalfd4),
	SC(poll), SC(ppoll), SC(select), SC(pselect6),
	SC(epoll_create), SC(epoll_create1), SC(epoll_ctl), SC(epoll_wait),
	SC(epoll_pwait), SC(epoll_pwait2),

	/* sockets: socket and socketpair are filtered below; the rest work on
	 * descriptors the filter already let through */
	SC(connect), SC(accept), SC(accept4), SC(bind), SC(listen), SC(shutdown),
	SC(getsockname), SC(getpeername), SC(setsockopt), SC(getsockopt),
	SC(sendto), SC(recvfrom), SC(sendmsg), SC(recvmsg), SC(sendmmsg), SC(recvmmsg),

	/* System V and POSIX IPC: the jail has its own IPC namespace, shared by
	 * Xvnc and its clients (MIT-SHM) */
	SC(shmget), SC(shmat), SC(shmctl), SC(shmdt), SC(semget), SC(semop),
	SC(semctl), SC(semtimedop), SC(msgget), SC(msgsnd), SC(msgrcv), SC(msgctl),
	SC(mq_open), SC(mq_unlink), SC(mq_timedsend), SC(mq_timedreceive),
	SC(mq_notify), SC(mq_getsetattr),

	/* identity and limits: in the user namespace without capabilities the
	 * set*id calls can only shuffle the ids the process already has */
	SC(getuid), SC(geteuid), SC(getgid), SC(getegid), SC(getresuid), SC(getresgid),
	SC(getgroups), SC(setuid), SC(setgid), SC(setreuid), SC(setregid),
	SC(setresuid), SC(setresgid), SC(setfsuid), SC(setfsgid), SC(setgroups),
	SC(getrlimit), SC(setrlimit), SC(prlimit64), SC(getrusage), SC(sysinfo), SC(uname),

	/* restricting oneself further is always fine */
	SC(capget), SC(capset), SC(seccomp),
	SC(landlock_create_ruleset), SC(landlock_add_rule), SC(landlock_restrict_self),
	SC(getrandom),
};

/* clone flags that create namespaces. clone() cannot take CLONE_NEWTIME (its
 * bit is the exit signal there); unshare can. The kernel reads clone flags as
 * their low 32 bits, where all of these are. */
#define DG_CLONE_NS                                                                    \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |    \
	 CLONE_NEWNET | CLONE_NEWCGROUP)
#define DG_UNSHARE_NS (DG_CLONE_NS | CLONE_NEWTIME)

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

/* Adds ALLOW rules for nr covering every value of the low 32 bits of argument
 * arg except the deny values, whatever the upper 32 bits hold. Each rule is
 * one aligned range of 32-bit values (a common high prefix), written as a
 * masked compare; the ranges are the siblings along the paths from the root
 * of the binary trie to each denied value, so they cover the complement
 * exactly with at most 32 rules per denied value. */
static int allow_u32_except(scmp_filter_ctx ctx, struct dg_err *err, int nr, const char *name,
			    unsigned arg, const uint32_t *deny, size_t n_deny, uint32_t prefix,
			    unsigned depth)
{
	uint64_t mask = depth ? (LOW32 << (32 - depth)) & LOW32 : 0;
	bool hit = false;
	for (size_t i = 0; i < n_deny; i++)
		if ((deny[i] & mask) == prefix)
			hit = true;
	if (!hit) {
		char what[96];
		snprintf(what, sizeof(what), "arg%u range %#010x/%u", arg, (unsigned)prefix, depth);
		struct scmp_arg_cmp c = SCMP_CMP64(arg, SCMP_CMP_MASKED_EQ, mask, prefix);
		return rule(ctx, err, SCMP_ACT_ALLOW, nr, name, what, 1, &c);
	}
	if (depth == 32)
		return 0; /* a denied value itself */
	uint32_t bit = 1u << (31 - depth);
	int r = allow_u32_except(ctx, err, nr, name, arg, deny, n_deny, prefix, depth + 1);
	if (r == 0)
		r = allow_u32_except(ctx, err, nr, name, arg, deny, n_deny, prefix | bit, depth + 1);
	return r;
}

static int add_arg_rules(scmp_filter_ctx ctx, struct dg_err *err)
{
	int r;

	/* clone without namespace flags (threads, fork, posix_spawn's
	 * CLONE_VM|CLONE_VFORK). Chromium's own sandbox needs CLONE_NEWUSER and
	 * is not used (--no-sandbox): nested user namespaces are the door to
	 * much of the kernel that the jail keeps shut. */
	struct scmp_arg_cmp clone_c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, DG_CLONE_NS, 0);
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_clone, "clone", "no CLONE_NEW* flag", 1,
		      &clone_c)))
		return r;
	struct scmp_arg_cmp unshare_c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, DG_UNSHARE_NS, 0);
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_unshare, "unshare", "no CLONE_NEW* flag", 1,
		      &unshare_c)))
		return r;
	/* clone3 passes its flags in memory, out of the filter's reach. ENOSYS
	 * makes glibc (pthread_create, posix_spawn) and Chromium fall back to
	 * clone, which is checked above. */
	if ((r = rule(ctx, err, SCMP_ACT_ERRNO(ENOSYS), __NR_clone3, "clone3", "ENOSYS", 0, NULL)))
		return r;

	/* personality: PER_LINUX and the query only (no 32-bit uname, no
	 * READ_IMPLIES_EXEC, no ADDR_NO_RANDOMIZE); the kernel reads 32 bits. */
	static const uint32_t personas[] = { 0, 0xffffffffu };
	for (size_t i = 0; i < sizeof(personas) / sizeof(personas[0]); i++) {
		struct scmp_arg_cmp c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, personas[i]);
		if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_personality, "personality",
			      i ? "query 0xffffffff" : "PER_LINUX", 1, &c)))
			return r;
	}

	/* ioctl: everything but TIOCSTI (push input into a terminal) and
	 * TIOCLINUX (console selection paste does the same). The jail's setsid
	 * already leaves no controlling terminal of the host; this is the
	 * second line. */
	static const uint32_t bad_ioctls[] = { TIOCSTI, TIOCLINUX };
	if ((r = allow_u32_except(ctx, err, __NR_ioctl, "ioctl", 1, bad_ioctls,
				  sizeof(bad_ioctls) / sizeof(bad_ioctls[0]), 0, 0)))
		return r;

	/* socket: unix sockets of any type; TCP and UDP over IPv4/IPv6 (the
	 * namespace has loopback and the egress listener only); netlink route
	 * (getaddrinfo's AI_ADDRCONFIG, Chromium's address tracker). Everything
	 * else (packet, raw, vsock, alg, key, bluetooth, xdp, SCTP, MPTCP, ping,
	 * other netlink families, ...) gets EPERM: those are where socket
	 * CVEs live, and some autoload modules. The type's low four bits are the
	 * type, the rest SOCK_NONBLOCK/SOCK_CLOEXEC. */
	struct scmp_arg_cmp unix_c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, AF_UNIX);
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_socket, "socket", "AF_UNIX", 1, &unix_c)))
		return r;
	struct scmp_arg_cmp nl_c[2] = {
		SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK),
		SCMP_A2_64(SCMP_CMP_MASKED_EQ, LOW32, NETLINK_ROUTE),
	};
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_socket, "socket", "AF_NETLINK/NETLINK_ROUTE",
		      2, nl_c)))
		return r;
	static const struct {
		int family, type, proto;
		const char *what;
	} inet[] = {
		{ AF_INET, SOCK_STREAM, 0, "AF_INET/SOCK_STREAM/0" },
		{ AF_INET, SOCK_STREAM, IPPROTO_TCP, "AF_INET/SOCK_STREAM/TCP" },
		{ AF_INET, SOCK_DGRAM, 0, "AF_INET/SOCK_DGRAM/0" },
		{ AF_INET, SOCK_DGRAM, IPPROTO_UDP, "AF_INET/SOCK_DGRAM/UDP" },
		{ AF_INET6, SOCK_STREAM, 0, "AF_INET6/SOCK_STREAM/0" },
		{ AF_INET6, SOCK_STREAM, IPPROTO_TCP, "AF_INET6/SOCK_STREAM/TCP" },
		{ AF_INET6, SOCK_DGRAM, 0, "AF_INET6/SOCK_DGRAM/0" },
		{ AF_INET6, SOCK_DGRAM, IPPROTO_UDP, "AF_INET6/SOCK_DGRAM/UDP" },
	};
	for (size_t i = 0; i < sizeof(inet) / sizeof(inet[0]); i++) {
		struct scmp_arg_cmp c[3] = {
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, (uint64_t)inet[i].family),
			SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, (uint64_t)inet[i].type),
			SCMP_A2_64(SCMP_CMP_MASKED_EQ, LOW32, (uint64_t)inet[i].proto),
		};
		if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_socket, "socket", inet[i].what, 3, c)))
			return r;
	}
	struct scmp_arg_cmp pair_c = SCMP_A0_64(SCMP_CMP_MASKED_EQ, LOW32, AF_UNIX);
	if ((r = rule(ctx, err, SCMP_ACT_ALLOW, __NR_socketpair, "socketpair", "AF_UNIX", 1,
		      &pair_c)))
		return r;

	/* mknod: FIFOs and sockets only, never device nodes (the mounts are
	 * nodev as well). S_IFMT masks the bits that select the type. */
	static const struct {
		int nr;
		unsigned arg;
		const char *name;
	} mknods[] = { { __NR_mknod, 1, "mknod" }, { __NR_mknodat, 2, "mknodat" } };
	static const uint32_t kinds[] = { S_IFIFO, S_IFSOCK };
	for (size_t i = 0; i < 2; i++) {
		for (size_t k = 0; k < 2; k++) {
			struct scmp_arg_cmp c = SCMP_CMP64(mknods[i].arg, SCMP_CMP_MASKED_EQ,
							   S_IFMT, kinds[k]);
			if ((r = rule(ctx, err, SCMP_ACT_ALLOW, mknods[i].nr, mknods[i].name,
				      k ? "S_IFSOCK" : "S_IFIFO", 1, &c)))
				return r;
		}
	}
	return 0;
}

/* The program, built once per process: building it with libseccomp costs
 * about 2 ms, loading a built one about 0.2 ms (see the top of the file).
 * Read-only once built, so a process forked after dg_seccomp_prepare loads
 * the parent's copy. */
static struct {
	pthread_once_t once;
	int rc;
	struct dg_err err;
	unsigned short len;
	struct sock_filter insns[BPF_MAXINSNS];
} prog = { .once = PTHREAD_ONCE_INIT };

static int build(struct dg_err *err)
{
	__attribute__((cleanup(ctx_release))) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return dg_err_set(err, -ENOMEM, "seccomp_init failed");

	static const struct {
		enum scmp_filter_attr attr;
		uint32_t value;
		const char *name;
	} attrs[] = {
		{ SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS, "ACT_BADARCH=KILL_PROCESS" },
		/* binary-tree dispatch: denied and argument-filtered calls (ioctl,
		 * socket, clone) cost O(log n) instead of a walk over the list, and
		 * the kernel's per-syscall verdict cache is built 2.5x faster */
		{ SCMP_FLTATR_CTL_OPTIMIZE, 2, "CTL_OPTIMIZE=2" },
	};
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
		int r = seccomp_attr_set(ctx, attrs[i].attr, attrs[i].value);
		if (r < 0)
			return dg_err_set(err, r, "seccomp_attr_set(%s): %s", attrs[i].name,
					  strerror(-r));
	}

	for (size_t i = 0; i < sizeof(allow_plain) / sizeof(allow_plain[0]); i++) {
		int r = rule(ctx, err, SCMP_ACT_ALLOW, allow_plain[i].nr, allow_plain[i].name,
			     "allow", 0, NULL);
		if (r)
			return r;
	}
	int r = add_arg_rules(ctx, err);
	if (r)
		return r;

	/* libseccomp 2.5 exports only to a descriptor. */
	__attribute__((cleanup(dg_close_fd))) int fd = memfd_create("dg-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return dg_err_set(err, -errno, "memfd_create for the seccomp program: %s",
				  strerror(errno));
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return dg_err_set(err, r, "seccomp_export_bpf: %s", strerror(-r));
	off_t size = lseek(fd, 0, SEEK_CUR);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) ||
	    size > (off_t)sizeof(prog.insns))
		return dg_err_set(err, -E2BIG, "seccomp program of %lld bytes (at most %zu)",
				  (long long)size, sizeof(prog.insns));
	ssize_t got = pread(fd, prog.insns, (size_t)size, 0);
	if (got != size)
		return dg_err_set(err, got < 0 ? -errno : -EIO, "reading the seccomp program: %s",
				  got < 0 ? strerror(errno) : "short read");
	prog.len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	return 0;
}

static void build_once(void)
{
	prog.rc = build(&prog.err);
}

int dg_seccomp_prepare(struct dg_err *err)
{
	pthread_once(&prog.once, build_once);
	if (prog.rc < 0)
		return dg_err_set(err, prog.rc, "%s", prog.err.msg);
	return 0;
}

int dg_seccomp_install(struct dg_err *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return dg_err_set(err, -errno, "prctl(PR_SET_NO_NEW_PRIVS): %s", strerror(errno));
	int r = dg_seccomp_prepare(err);
	if (r < 0)
		return r;
	struct sock_fprog fp = { .len = prog.len, .filter = prog.insns };
	/* TSYNC: every thread gets the filter, should the caller have more than
	 * one; the kernel answers with the id of a thread it could not sync. */
	long t = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fp);
	if (t < 0)
		return dg_err_set(err, -errno, "seccomp(SECCOMP_SET_MODE_FILTER, %u insns): %s",
				  (unsigned)prog.len, strerror(errno));
	if (t > 0)
		return dg_err_set(err, -EBUSY, "seccomp: thread %ld has a diverging filter", t);
	return 0;
}
