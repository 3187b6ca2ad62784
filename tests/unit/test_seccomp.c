/* The jail's capability drop and seccomp filter (desktop/spawner/seccomp.c).
 *
 * Every check runs in a forked child that drops capabilities and/or installs
 * the filter and then makes the call; the result comes back through a pipe,
 * a SIGSYS through the wait status. Each denied call is also made by a child
 * without the filter (the control): as root on the host it must NOT answer
 * what the filter answers, or the probe could not tell a working filter from
 * one that does nothing. Controls are chosen to be harmless when they succeed
 * (nonexistent paths, invalid magic numbers, the child's own process).
 *
 * Besides the calls themselves, the loaded program is read back from a child
 * (PTRACE_SECCOMP_GET_FILTER) and run through a small BPF interpreter over
 * syscall numbers and argument values no real call could safely cover.
 *
 * Children leave with _exit: LeakSanitizer's exit-time check uses ptrace,
 * which the filter denies. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "seccomp-priv.h"
#include "dg_test.h"

#ifndef __NR_memfd_secret
#define __NR_memfd_secret 447
#endif
#ifndef __NR_process_mrelease
#define __NR_process_mrelease 448
#endif
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_futex_wake
#define __NR_futex_wake 454
#endif
#ifndef __NR_statmount
#define __NR_statmount 457
#endif
#ifndef __NR_listmount
#define __NR_listmount 458
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef PTRACE_SECCOMP_GET_FILTER
#define PTRACE_SECCOMP_GET_FILTER 0x420c
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

#define X32_BIT 0x40000000
#define NOPATH "/nonexistent-deskgate-seccomp/x"

TestSuite(seccomp, .timeout = 240);

/* ------------------------------------------------------------ harness */

enum mode {
	M_CONTROL = 0,
	M_FILTER = 1,  /* dg_seccomp_install */
	M_CAPS = 2,    /* dg_caps_drop_all */
	M_BOTH = 3,
};

struct res {
	long ret;
	int err;
	char note[1536];
};

struct outcome {
	int status;
	bool reported; /* the child got through the call and wrote back */
	struct res r;
};

typedef long (*probe_fn)(void);

/* In the child: what the probe wants to tell beyond ret/errno. */
static char *g_note;
static size_t g_note_len;
/* A fresh directory for probes that create files (set before forking). */
static char g_dir[256];

static void note(const char *fmt, ...)
{
	if (!g_note)
		return;
	size_t used = strlen(g_note);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g_note + used, g_note_len - used, fmt, ap);
	va_end(ap);
}

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

static size_t read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

static const char *describe(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "status %#x", status);
	return buf;
}

/* Sets the child up per mode; on failure reports ret -1000 and the message. */
static bool child_setup(enum mode m, struct res *r)
{
	struct rlimit no_core = { 0, 0 };
	setrlimit(RLIMIT_CORE, &no_core); /* SIGSYS would dump core */
	struct dg_err e = { { 0 } };
	if ((m & M_CAPS) && dg_caps_drop_all(&e) < 0) {
		r->ret = -1000;
		snprintf(r->note, sizeof(r->note), "dg_caps_drop_all: %s", e.msg);
		return false;
	}
	if ((m & M_FILTER) && dg_seccomp_install(&e) < 0) {
		r->ret = -1000;
		snprintf(r->note, sizeof(r->note), "dg_seccomp_install: %s", e.msg);
		return false;
	}
	return true;
}

static struct outcome run(enum mode m, probe_fn fn)
{
	struct outcome o;
	memset(&o, 0, sizeof(o));
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		static struct res r;
		memset(&r, 0, sizeof(r));
		if (child_setup(m, &r)) {
			g_note = r.note;
			g_note_len = sizeof(r.note);
			errno = 0;
			r.ret = fn();
			r.err = errno;
		}
		write_all(p[1], &r, sizeof(r));
		_exit(0);
	}
	close(p[1]);
	o.reported = read_all(p[0], &o.r, sizeof(o.r)) == sizeof(o.r);
	close(p[0]);
	while (waitpid(pid, &o.status, 0) < 0 && errno == EINTR)
		;
	if (o.reported && o.r.ret == -1000)
		cr_assert_fail("child setup failed: %s", o.r.note);
	return o;
}

static bool is_errno(const struct outcome *o, int e)
{
	return o->reported && o->r.ret == -1 && o->r.err == e;
}

static bool killed_by(const struct outcome *o, int sig)
{
	return WIFSIGNALED(o->status) && WTERMSIG(o->status) == sig;
}

static void prepare(void)
{
	struct dg_err e = { { 0 } };
	cr_assert_eq(dg_seccomp_prepare(&e), 0, "dg_seccomp_prepare: %s", e.msg);
}

enum control {
	CTL_ANY,  /* control checked as any user */
	CTL_ROOT, /* control only meaningful as root (checked when root) */
	CTL_NONE, /* no control: it would act on the host */
};

struct probe {
	const char *name;
	probe_fn fn;
	int want;       /* errno under the filter */
	enum control ctl;
};

/* Under the filter the call answers want; without it, something else. */
static void check_denied(const struct probe *p)
{
	char sb[96];
	struct outcome f = run(M_FILTER, p->fn);
	cr_expect(f.reported, "%s: filtered child did not report (%s)", p->name,
		  describe(f.status, sb, sizeof(sb)));
	cr_expect(is_errno(&f, p->want), "%s under the filter: ret %ld errno %d (%s), want %s",
		  p->name, f.r.ret, f.r.err, strerror(f.r.err), strerrorname_np(p->want));
	if (p->ctl == CTL_NONE || (p->ctl == CTL_ROOT && geteuid() != 0))
		return;
	struct outcome c = run(M_CONTROL, p->fn);
	cr_expect(c.reported, "%s control: child did not report (%s)", p->name,
		  describe(c.status, sb, sizeof(sb)));
	cr_expect(!is_errno(&c, p->want),
		  "%s control (no filter) also answers %s: the probe cannot see the filter",
		  p->name, strerrorname_np(p->want));
}

static void check_denied_all(const struct probe *ps, size_t n)
{
	prepare();
	for (size_t i = 0; i < n; i++)
		check_denied(&ps[i]);
}

/* Under the filter the call is let through: not EPERM, not killed. When
 * must_succeed, it also returns >= 0. */
static void check_allowed(const char *name, probe_fn fn, bool must_succeed)
{
	char sb[96];
	struct outcome f = run(M_FILTER, fn);
	cr_expect(f.reported, "%s: filtered child did not report (%s)", name,
		  describe(f.status, sb, sizeof(sb)));
	cr_expect(!is_errno(&f, EPERM), "%s under the filter: EPERM (%s)", name, f.r.note);
	if (must_succeed)
		cr_expect(f.r.ret >= 0, "%s under the filter: ret %ld errno %d (%s) %s", name,
			  f.r.ret, f.r.err, strerror(f.r.err), f.r.note);
}

static long fail_step(const char *step)
{
	int e = errno;
	note("%s: %s", step, strerror(e));
	errno = e;
	return -1;
}

static void make_dir(void)
{
	snprintf(g_dir, sizeof(g_dir), "/tmp/dg-seccomp-XXXXXX");
	cr_assert(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
}

static void remove_dir(void)
{
	char path[512];
	const char *names[] = { "fifo", "sock", "chr", "blk", "reg", "file" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", g_dir, names[i]);
		unlink(path);
	}
	rmdir(g_dir);
}

/* ------------------------------------------------------ allowed basics */

static long p_file_io(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/file", g_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail_step("open");
	if (write(fd, "hello", 5) != 5)
		return fail_step("write");
	char buf[8] = { 0 };
	if (pread(fd, buf, 5, 0) != 5 || memcmp(buf, "hello", 5))
		return fail_step("pread");
	void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return fail_step("mmap");
	if (memcmp(m, "hello", 5))
		return fail_step("mmap contents");
	munmap(m, 4096);
	struct stat st;
	if (fstat(fd, &st) || st.st_size != 5)
		return fail_step("fstat");
	close(fd);
	if (unlink(path))
		return fail_step("unlink");
	return 0;
}

static long p_fork_exec_true(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return fail_step("fork");
	if (pid == 0) {
		char *argv[] = { "/bin/true", NULL };
		execve(argv[0], argv, (char *[]){ NULL });
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return fail_step("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		note("/bin/true status %#x", st);
		errno = EIO;
		return -1;
	}
	return 0;
}

static long p_posix_spawn(void)
{
	pid_t pid;
	char *argv[] = { "/bin/true", NULL };
	int e = posix_spawn(&pid, argv[0], NULL, NULL, argv, (char *[]){ NULL });
	if (e) {
		errno = e;
		return fail_step("posix_spawn");
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		errno = EIO;
		return fail_step("posix_spawn /bin/true status");
	}
	return 0;
}

static void *thread_fn(void *arg)
{
	*(int *)arg = 42;
	return arg;
}

static long p_thread(void)
{
	pthread_t t;
	int v = 0;
	int e = pthread_create(&t, NULL, thread_fn, &v);
	if (e) {
		errno = e;
		return fail_step("pthread_create");
	}
	pthread_join(t, NULL);
	if (v != 42) {
		errno = EIO;
		return fail_step("thread did not run");
	}
	return 0;
}

static long p_pipe(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC))
		return fail_step("pipe2");
	char c = 'x';
	if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1)
		return fail_step("pipe io");
	return 0;
}

static long p_unix_sockets(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return fail_step("socketpair(AF_UNIX, SOCK_SEQPACKET)");
	int types[] = { SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET };
	for (int i = 0; i < 3; i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return fail_step("socket(AF_UNIX)");
		close(fd);
	}
	return 0;
}

/* A TCP connection over loopback, both ends in the child. */
static long p_inet_stream(void)
{
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return fail_step("socket(AF_INET, SOCK_STREAM)");
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al))
		return fail_step("bind/listen");
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
	if (c < 0)
		return fail_step("socket(AF_INET, SOCK_STREAM, IPPROTO_TCP)");
	if (connect(c, (struct sockaddr *)&a, sizeof(a)))
		return fail_step("connect");
	int s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0)
		return fail_step("accept4");
	if (send(c, "x", 1, 0) != 1)
		return fail_step("send");
	char ch;
	if (recv(s, &ch, 1, 0) != 1)
		return fail_step("recv");
	int fds[] = { socket(AF_INET6, SOCK_STREAM, 0), socket(AF_INET, SOCK_DGRAM, 0),
		      socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, IPPROTO_UDP) };
	for (int i = 0; i < 3; i++) {
		if (fds[i] < 0 && errno != EAFNOSUPPORT)
			return fail_step("socket(AF_INET6 stream / AF_INET dgram / AF_INET6 udp)");
		close(fds[i]);
	}
	return 0;
}

static long p_netlink_route(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return fail_step("socket(AF_NETLINK, NETLINK_ROUTE)");
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return fail_step("bind netlink");
	close(fd);
	return 0;
}

static long p_misc_allowed(void)
{
	struct {
		const char *what;
		long r;
	} calls[] = {
		{ "getrandom", syscall(SYS_getrandom, (char[16]){ 0 }, 16, 0) },
		{ "memfd_create", syscall(SYS_memfd_create, "x", MFD_CLOEXEC) },
		{ "eventfd2", syscall(SYS_eventfd2, 0, EFD_CLOEXEC) },
		{ "epoll_create1", syscall(SYS_epoll_create1, O_CLOEXEC) },
		{ "timerfd_create", syscall(SYS_timerfd_create, CLOCK_MONOTONIC, O_CLOEXEC) },
		{ "inotify_init1", syscall(SYS_inotify_init1, O_CLOEXEC) },
		{ "pidfd_open", syscall(SYS_pidfd_open, getpid(), 0) },
		{ "prlimit64", syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &(struct rlimit){ 0 }) },
		{ "sysinfo", syscall(SYS_sysinfo, &(char[256]){ 0 }) },
		{ "sched_getaffinity", syscall(SYS_sched_getaffinity, 0, 128, &(char[128]){ 0 }) },
		{ "personality(query)", syscall(SYS_personality, 0xffffffffUL) },
		{ "personality(PER_LINUX)", syscall(SYS_personality, 0UL) },
		{ "unshare(CLONE_FS)", syscall(SYS_unshare, CLONE_FS) },
		{ "seccomp(GET_ACTION_AVAIL)",
		  syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0,
			  &(uint32_t){ SECCOMP_RET_KILL_PROCESS }) },
		{ "capget", syscall(SYS_capget, &(uint32_t[2]){ 0x20080522, 0 }, &(uint32_t[6]){ 0 }) },
		{ "membarrier(QUERY)", syscall(SYS_membarrier, 0, 0, 0) },
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		if (calls[i].r < 0) {
			note("%s failed", calls[i].what);
			errno = EIO;
			return -1;
		}
	}
	/* MIT-SHM between Xvnc and its clients */
	int id = shmget(IPC_PRIVATE, 4096, 0600);
	if (id < 0)
		return fail_step("shmget");
	void *m = shmat(id, NULL, 0);
	shmctl(id, IPC_RMID, NULL);
	if (m == (void *)-1)
		return fail_step("shmat");
	shmdt(m);
	return 0;
}

Test(seccomp, allowed_basics_work)
{
	prepare();
	make_dir();
	const struct {
		const char *name;
		probe_fn fn;
	} ok[] = {
		{ "open/write/pread/mmap/unlink", p_file_io },
		{ "fork + exec /bin/true", p_fork_exec_true },
		{ "posix_spawn", p_posix_spawn },
		{ "pthread_create (clone3 falls back to clone)", p_thread },
		{ "pipe", p_pipe },
		{ "AF_UNIX sockets, socketpair", p_unix_sockets },
		{ "AF_INET/AF_INET6 stream and dgram", p_inet_stream },
		{ "AF_NETLINK NETLINK_ROUTE", p_netlink_route },
		{ "getrandom, memfd, eventfd, epoll, ...", p_misc_allowed },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		check_allowed(ok[i].name, ok[i].fn, true);
	remove_dir();
}

/* ----------------------------------------------------- denied families */

static long p_ptrace(void)
{
	return syscall(SYS_ptrace, PTRACE_PEEKDATA, getppid(), 0, 0);
}

static long p_process_vm_readv(void)
{
	char src[8] = "abc", dst[8];
	struct iovec l = { dst, sizeof(dst) }, r = { src, sizeof(src) };
	return syscall(SYS_process_vm_readv, getpid(), &l, 1, &r, 1, 0);
}

static long p_process_vm_writev(void)
{
	char src[8] = "abc", dst[8];
	struct iovec l = { src, sizeof(src) }, r = { dst, sizeof(dst) };
	return syscall(SYS_process_vm_writev, getpid(), &l, 1, &r, 1, 0);
}

static long p_kcmp(void)
{
	return syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 0, 0);
}

static long p_pidfd_getfd(void)
{
	long pfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (pfd < 0)
		return fail_step("pidfd_open");
	return syscall(SYS_pidfd_getfd, pfd, 0, 0);
}

static long p_process_madvise(void)
{
	long pfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (pfd < 0)
		return fail_step("pidfd_open");
	static char page[4096] __attribute__((aligned(4096)));
	struct iovec v = { page, sizeof(page) };
	return syscall(SYS_process_madvise, pfd, &v, 1, MADV_COLD, 0);
}

static long p_get_robust_list(void)
{
	void *head;
	size_t len;
	return syscall(SYS_get_robust_list, 0, &head, &len);
}

Test(seccomp, denied_process_access)
{
	static const struct probe ps[] = {
		{ "ptrace(PTRACE_PEEKDATA, parent)", p_ptrace, EPERM, CTL_ANY },
		{ "process_vm_readv(self)", p_process_vm_readv, EPERM, CTL_ANY },
		{ "process_vm_writev(self)", p_process_vm_writev, EPERM, CTL_ANY },
		{ "kcmp(self, self)", p_kcmp, EPERM, CTL_ANY },
		{ "pidfd_getfd(self)", p_pidfd_getfd, EPERM, CTL_ANY },
		{ "process_madvise(self)", p_process_madvise, EPERM, CTL_ROOT },
		{ "get_robust_list(self)", p_get_robust_list, EPERM, CTL_ANY },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
}

static long p_mount(void)
{
	return syscall(SYS_mount, "none", NOPATH, "tmpfs", 0, NULL);
}

static long p_umount2(void)
{
	return syscall(SYS_umount2, NOPATH, 0);
}

static long p_pivot_root(void)
{
	return syscall(SYS_pivot_root, NOPATH, NOPATH);
}

static long p_chroot(void)
{
	return syscall(SYS_chroot, NOPATH);
}

static long p_fsopen(void)
{
	return syscall(SYS_fsopen, "deskgate-no-such-fs", 0);
}

static long p_open_tree(void)
{
	return syscall(SYS_open_tree, AT_FDCWD, NOPATH, 0);
}

static long p_move_mount(void)
{
	return syscall(SYS_move_mount, AT_FDCWD, NOPATH, AT_FDCWD, NOPATH, 0);
}

static long p_setns(void)
{
	return syscall(SYS_setns, -1, 0);
}

static long p_unshare_user(void)
{
	return syscall(SYS_unshare, CLONE_NEWUSER);
}

static long p_unshare_ns(void)
{
	return syscall(SYS_unshare, CLONE_NEWNS);
}

static long p_unshare_net_high(void)
{
	/* upper bits set: still CLONE_NEWNET to the filter */
	return syscall(SYS_unshare, 0xffff000000000000UL | CLONE_NEWNET);
}

static long raw_clone(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long p_clone_newuser(void)
{
	return raw_clone(CLONE_NEWUSER);
}

static long p_clone_newpid(void)
{
	return raw_clone(CLONE_NEWPID);
}

static long p_clone_newnet(void)
{
	return raw_clone(CLONE_NEWNET);
}

struct clone_args_v0 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static long p_clone3(void)
{
	struct clone_args_v0 a = { .exit_signal = SIGCHLD };
	long pid = syscall(SYS_clone3, &a, sizeof(a));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long p_clone3_newuser(void)
{
	struct clone_args_v0 a = { .flags = CLONE_NEWUSER, .exit_signal = SIGCHLD };
	long pid = syscall(SYS_clone3, &a, sizeof(a));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

Test(seccomp, denied_mounts_and_namespaces)
{
	static const struct probe ps[] = {
		{ "mount(tmpfs on a missing path)", p_mount, EPERM, CTL_ANY },
		{ "umount2(missing path)", p_umount2, EPERM, CTL_ANY },
		{ "pivot_root(missing paths)", p_pivot_root, EPERM, CTL_ROOT },
		{ "chroot(missing path)", p_chroot, EPERM, CTL_ROOT },
		{ "fsopen(no such fs)", p_fsopen, EPERM, CTL_ROOT },
		{ "open_tree(missing path)", p_open_tree, EPERM, CTL_ANY },
		{ "move_mount(missing paths)", p_move_mount, EPERM, CTL_ROOT },
		{ "setns(-1)", p_setns, EPERM, CTL_ANY },
		{ "unshare(CLONE_NEWUSER)", p_unshare_user, EPERM, CTL_ROOT },
		{ "unshare(CLONE_NEWNS)", p_unshare_ns, EPERM, CTL_ROOT },
		{ "unshare(CLONE_NEWNET | upper bits)", p_unshare_net_high, EPERM, CTL_ANY },
		{ "clone(CLONE_NEWUSER) raw", p_clone_newuser, EPERM, CTL_ROOT },
		{ "clone(CLONE_NEWPID) raw", p_clone_newpid, EPERM, CTL_ROOT },
		{ "clone(CLONE_NEWNET) raw", p_clone_newnet, EPERM, CTL_ROOT },
		{ "clone3()", p_clone3, ENOSYS, CTL_ANY },
		{ "clone3(CLONE_NEWUSER)", p_clone3_newuser, ENOSYS, CTL_ROOT },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
}

static long p_bpf(void)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	return syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a));
}

static long p_perf_event_open(void)
{
	return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

static long p_userfaultfd(void)
{
	return syscall(SYS_userfaultfd, O_CLOEXEC);
}

static long p_io_uring_setup(void)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	return syscall(SYS_io_uring_setup, 1, &p);
}

static long p_io_setup(void)
{
	unsigned long ctx = 0;
	return syscall(SYS_io_setup, 1, &ctx);
}

static long p_open_by_handle_at(void)
{
	return syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0);
}

static long p_name_to_handle_at(void)
{
	struct {
		unsigned int bytes;
		int type;
	} h = { 0, 0 };
	int mnt;
	return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &h, &mnt, 0);
}

static long p_keyctl(void)
{
	return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 0);
}

static long p_add_key(void)
{
	return syscall(SYS_add_key, NULL, NULL, NULL, 0, 0);
}

static long p_request_key(void)
{
	return syscall(SYS_request_key, "user", "deskgate-no-such-key", NULL, 0);
}

static long p_kexec_load(void)
{
	/* 0x8000 is no valid flag: refused before anything is loaded */
	return syscall(SYS_kexec_load, 0, 0, NULL, 0x8000UL);
}

static long p_kexec_file_load(void)
{
	return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0x8000UL);
}

static long p_init_module(void)
{
	return syscall(SYS_init_module, NULL, 0, "");
}

static long p_finit_module(void)
{
	return syscall(SYS_finit_module, -1, "", 0);
}

static long p_delete_module(void)
{
	return syscall(SYS_delete_module, "deskgate_no_such_module", O_NONBLOCK);
}

static long p_personality32(void)
{
	return syscall(SYS_personality, 0x0008UL /* PER_LINUX32 */);
}

static long p_personality_norandom(void)
{
	return syscall(SYS_personality, 0x0040000UL /* ADDR_NO_RANDOMIZE */);
}

Test(seccomp, denied_kernel_interfaces)
{
	static const struct probe ps[] = {
		{ "bpf(BPF_MAP_CREATE, zeroed)", p_bpf, EPERM, CTL_ROOT },
		{ "perf_event_open(NULL)", p_perf_event_open, EPERM, CTL_ANY },
		{ "userfaultfd", p_userfaultfd, EPERM, CTL_ROOT },
		{ "io_uring_setup", p_io_uring_setup, EPERM, CTL_ROOT },
		{ "io_setup (AIO)", p_io_setup, EPERM, CTL_ANY },
		{ "open_by_handle_at(NULL)", p_open_by_handle_at, EPERM, CTL_ROOT },
		{ "name_to_handle_at(/)", p_name_to_handle_at, EPERM, CTL_ANY },
		{ "keyctl(GET_KEYRING_ID)", p_keyctl, EPERM, CTL_ANY },
		{ "add_key(NULL)", p_add_key, EPERM, CTL_ANY },
		{ "request_key(missing)", p_request_key, EPERM, CTL_ANY },
		{ "kexec_load(bad flags)", p_kexec_load, EPERM, CTL_ROOT },
		{ "kexec_file_load(bad flags)", p_kexec_file_load, EPERM, CTL_ROOT },
		{ "init_module(NULL)", p_init_module, EPERM, CTL_ROOT },
		{ "finit_module(-1)", p_finit_module, EPERM, CTL_ROOT },
		{ "delete_module(missing)", p_delete_module, EPERM, CTL_ROOT },
		{ "personality(PER_LINUX32)", p_personality32, EPERM, CTL_ANY },
		{ "personality(ADDR_NO_RANDOMIZE)", p_personality_norandom, EPERM, CTL_ANY },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
}

static long p_swapon(void)
{
	return syscall(SYS_swapon, NOPATH, 0);
}

static long p_reboot(void)
{
	return syscall(SYS_reboot, 0, 0, 0, NULL); /* wrong magic: EINVAL unfiltered */
}

static long p_acct(void)
{
	return syscall(SYS_acct, NOPATH);
}

static long p_syslog(void)
{
	return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
}

static long p_iopl(void)
{
	return syscall(SYS_iopl, 0);
}

static long p_settimeofday(void)
{
	return syscall(SYS_settimeofday, NULL, NULL); /* sets nothing */
}

static long p_clock_settime(void)
{
	struct timespec ts = { 1, 0 };
	return syscall(SYS_clock_settime, CLOCK_MONOTONIC, &ts); /* cannot be set */
}

static long p_adjtimex(void)
{
	struct timex t;
	memset(&t, 0, sizeof(t)); /* modes 0: read only */
	return syscall(SYS_adjtimex, &t);
}

static long p_fanotify_init(void)
{
	return syscall(SYS_fanotify_init, 0, 0);
}

static long p_sethostname(void)
{
	return syscall(SYS_sethostname, "x", 100000); /* too long: EINVAL unfiltered */
}

static long p_modify_ldt(void)
{
	char buf[16];
	return syscall(SYS_modify_ldt, 0, buf, sizeof(buf));
}

static long p_mbind(void)
{
	return syscall(SYS_mbind, NULL, 0, 0 /* MPOL_DEFAULT */, NULL, 0, 0);
}

static long p_move_pages(void)
{
	return syscall(SYS_move_pages, 0, 0, NULL, NULL, NULL, 0);
}

static long p_vmsplice(void)
{
	int p[2];
	if (pipe(p))
		return fail_step("pipe");
	struct iovec v = { "x", 1 };
	return syscall(SYS_vmsplice, p[1], &v, 1, 0);
}

static long p_memfd_secret(void)
{
	return syscall(__NR_memfd_secret, 0);
}

static long p_cachestat(void)
{
	uint64_t range[2] = { 0, 0 }, cs[5];
	int fd = open("/bin/sh", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail_step("open /bin/sh");
	return syscall(__NR_cachestat, fd, range, cs, 0);
}

static long p_syncfs(void)
{
	int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail_step("open /");
	return syscall(SYS_syncfs, fd);
}

static long p_listmount(void)
{
	uint64_t req[4] = { 24 /* size */, 0, 0, 0 };
	uint64_t ids[4];
	return syscall(__NR_listmount, req, ids, 4, 0);
}

Test(seccomp, denied_host_administration)
{
	static const struct probe ps[] = {
		{ "swapon(missing path)", p_swapon, EPERM, CTL_ROOT },
		{ "reboot(wrong magic)", p_reboot, EPERM, CTL_ROOT },
		{ "acct(missing path)", p_acct, EPERM, CTL_ROOT },
		{ "syslog(SIZE_BUFFER)", p_syslog, EPERM, CTL_ROOT },
		{ "iopl(0)", p_iopl, EPERM, CTL_ANY },
		{ "settimeofday(NULL, NULL)", p_settimeofday, EPERM, CTL_ANY },
		{ "clock_settime(CLOCK_MONOTONIC)", p_clock_settime, EPERM, CTL_ANY },
		{ "adjtimex(read)", p_adjtimex, EPERM, CTL_ANY },
		{ "fanotify_init", p_fanotify_init, EPERM, CTL_ROOT },
		{ "sethostname(too long)", p_sethostname, EPERM, CTL_ROOT },
		{ "modify_ldt(read)", p_modify_ldt, EPERM, CTL_ANY },
		{ "mbind(nothing)", p_mbind, EPERM, CTL_ANY },
		{ "move_pages(nothing)", p_move_pages, EPERM, CTL_ANY },
		{ "vmsplice", p_vmsplice, EPERM, CTL_ANY },
		{ "memfd_secret", p_memfd_secret, EPERM, CTL_ANY },
		{ "cachestat", p_cachestat, EPERM, CTL_ANY },
		{ "syncfs", p_syncfs, EPERM, CTL_ANY },
		{ "listmount", p_listmount, EPERM, CTL_ANY },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
}

/* -------------------------------------------------------------- ioctl */

static int g_ioctl_fd = -1;
static unsigned long g_ioctl_req;

/* TIOCSTI on the slave of a fresh pty: succeeds as root without the filter
 * (it only pushes a byte into the child's own pty). */
static long ioctl_on_pty(unsigned long req)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return fail_step("posix_openpt");
	if (grantpt(m) || unlockpt(m))
		return fail_step("grantpt/unlockpt");
	char name[64];
	if (ptsname_r(m, name, sizeof(name)))
		return fail_step("ptsname_r");
	int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0)
		return fail_step("open pty slave");
	char c = 'x';
	return syscall(SYS_ioctl, s, req, &c);
}

static long p_tiocsti(void)
{
	return ioctl_on_pty(TIOCSTI);
}

static long p_tiocsti_hi(void)
{
	return ioctl_on_pty(0x100000000UL | TIOCSTI);
}

static long p_tiocsti_sext(void)
{
	return ioctl_on_pty(0xffffffff00000000UL | TIOCSTI);
}

static long p_tioclinux(void)
{
	return ioctl_on_pty(TIOCLINUX);
}

static long p_tioclinux_hi(void)
{
	return ioctl_on_pty(0x8000000000000000UL | TIOCLINUX);
}

static long p_tiocgwinsz(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return fail_step("posix_openpt");
	struct winsize ws;
	return syscall(SYS_ioctl, m, TIOCGWINSZ, &ws);
}

static long p_fionread(void)
{
	int p[2];
	if (pipe(p) || write(p[1], "abc", 3) != 3)
		return fail_step("pipe");
	int n = 0;
	long r = syscall(SYS_ioctl, p[0], FIONREAD, &n);
	if (r == 0 && n != 3) {
		note("FIONREAD gave %d", n);
		errno = EIO;
		return -1;
	}
	return r;
}

static long p_ioctl_generic(void)
{
	return syscall(SYS_ioctl, g_ioctl_fd, g_ioctl_req, 0);
}

Test(seccomp, ioctl_tiocsti_and_tioclinux_denied)
{
	static const struct probe ps[] = {
		{ "ioctl(pty, TIOCSTI 0x5412)", p_tiocsti, EPERM, CTL_ROOT },
		{ "ioctl(pty, TIOCSTI 0x100005412)", p_tiocsti_hi, EPERM, CTL_ROOT },
		{ "ioctl(pty, TIOCSTI 0xffffffff00005412)", p_tiocsti_sext, EPERM, CTL_ROOT },
		{ "ioctl(pty, TIOCLINUX)", p_tioclinux, EPERM, CTL_ANY },
		{ "ioctl(pty, TIOCLINUX | 1<<63)", p_tioclinux_hi, EPERM, CTL_ANY },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
	if (geteuid() == 0) {
		/* the control really injected: the filter is what stops it */
		struct outcome c = run(M_CONTROL, p_tiocsti_hi);
		cr_expect(c.reported && c.r.ret == 0, "TIOCSTI 0x100005412 without filter: %ld %s",
			  c.r.ret, strerror(c.r.err));
	}
	check_allowed("ioctl(pty master, TIOCGWINSZ)", p_tiocgwinsz, true);
	check_allowed("ioctl(pipe, FIONREAD)", p_fionread, true);
}

/* Requests around the denied ones, with assorted upper halves: the filter
 * answers EPERM exactly when the low 32 bits are TIOCSTI or TIOCLINUX. The
 * descriptor is a pipe, where every one of these requests is harmless. */
Test(seccomp, ioctl_request_neighbourhood)
{
	prepare();
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	g_ioctl_fd = p[0];
	static const uint32_t lows[] = { 0, 0x5400, 0x540f, 0x5410, 0x5411, 0x5412, 0x5413,
					 0x5418, 0x541b, 0x541c, 0x541d, 0x541f, 0x5420,
					 0x7fffffff, 0x80005412, 0xffffffff, 0xc0045412 };
	static const uint64_t highs[] = { 0, 1, 0x80000000, 0xffffffff };
	for (size_t i = 0; i < sizeof(lows) / sizeof(lows[0]); i++) {
		for (size_t h = 0; h < sizeof(highs) / sizeof(highs[0]); h++) {
			g_ioctl_req = (unsigned long)(highs[h] << 32 | lows[i]);
			bool bad = lows[i] == TIOCSTI || lows[i] == TIOCLINUX;
			struct outcome f = run(M_FILTER, p_ioctl_generic);
			cr_expect(f.reported, "ioctl %#lx: child died", g_ioctl_req);
			cr_expect(is_errno(&f, EPERM) == bad, "ioctl %#lx under the filter: %ld %s",
				  g_ioctl_req, f.r.ret, strerror(f.r.err));
		}
	}
	close(p[0]);
	close(p[1]);
}

/* ------------------------------------------------------------ sockets */

static int g_sock_domain, g_sock_type, g_sock_proto;
static unsigned long g_sock_domain_hi;

static long p_socket(void)
{
	return syscall(SYS_socket, g_sock_domain_hi | (unsigned)g_sock_domain, g_sock_type,
		       g_sock_proto);
}

static long p_socketpair_inet(void)
{
	int sv[2];
	return syscall(SYS_socketpair, AF_INET, SOCK_STREAM, 0, sv);
}

Test(seccomp, socket_families)
{
	prepare();
	static const struct {
		const char *name;
		int domain, type, proto;
		unsigned long hi;
		bool allowed;
		enum control ctl;
	} cases[] = {
		{ "AF_PACKET SOCK_RAW", AF_PACKET, SOCK_RAW, 0x0300, 0, false, CTL_ROOT },
		{ "AF_PACKET SOCK_DGRAM", AF_PACKET, SOCK_DGRAM, 0, 0, false, CTL_ROOT },
		{ "AF_VSOCK SOCK_STREAM", AF_VSOCK, SOCK_STREAM, 0, 0, false, CTL_ANY },
		{ "AF_ALG SOCK_SEQPACKET", AF_ALG, SOCK_SEQPACKET, 0, 0, false, CTL_ANY },
		{ "AF_INET SOCK_RAW ICMP", AF_INET, SOCK_RAW, IPPROTO_ICMP, 0, false, CTL_ROOT },
		{ "AF_INET6 SOCK_RAW", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6, 0, false, CTL_ROOT },
		{ "AF_INET SOCK_STREAM SCTP", AF_INET, SOCK_STREAM, IPPROTO_SCTP, 0, false, CTL_NONE },
		{ "AF_INET SOCK_DGRAM ICMP (ping)", AF_INET, SOCK_DGRAM, IPPROTO_ICMP, 0, false, CTL_NONE },
		{ "AF_NETLINK KOBJECT_UEVENT", AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, 0, false, CTL_ANY },
		{ "AF_NETLINK NETFILTER", AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER, 0, false, CTL_ANY },
		{ "AF_KEY", AF_KEY, SOCK_RAW, 2, 0, false, CTL_NONE },
		{ "AF_PACKET with upper bits", AF_PACKET, SOCK_RAW, 0, 0x100000000UL, false, CTL_ROOT },
		{ "AF_UNIX SOCK_STREAM", AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, 0, true, CTL_NONE },
		{ "AF_UNIX SOCK_DGRAM", AF_UNIX, SOCK_DGRAM, 0, 0, true, CTL_NONE },
		{ "AF_INET SOCK_STREAM|NONBLOCK", AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0, 0, true, CTL_NONE },
		{ "AF_INET6 SOCK_DGRAM UDP", AF_INET6, SOCK_DGRAM, IPPROTO_UDP, 0, true, CTL_NONE },
		{ "AF_NETLINK NETLINK_ROUTE", AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE, 0, true, CTL_NONE },
		{ "AF_NETLINK NETLINK_ROUTE dgram", AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE, 0, true, CTL_NONE },
	};
	char sb[96];
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		g_sock_domain = cases[i].domain;
		g_sock_type = cases[i].type;
		g_sock_proto = cases[i].proto;
		g_sock_domain_hi = cases[i].hi;
		struct outcome f = run(M_FILTER, p_socket);
		cr_expect(f.reported, "%s: filtered child died (%s)", cases[i].name,
			  describe(f.status, sb, sizeof(sb)));
		if (cases[i].allowed) {
			cr_expect(f.r.ret >= 0, "%s under the filter: %s", cases[i].name,
				  strerror(f.r.err));
			continue;
		}
		cr_expect(is_errno(&f, EPERM), "%s under the filter: ret %ld %s", cases[i].name,
			  f.r.ret, strerror(f.r.err));
		if (cases[i].ctl == CTL_NONE || (cases[i].ctl == CTL_ROOT && geteuid() != 0))
			continue;
		struct outcome c = run(M_CONTROL, p_socket);
		cr_expect(c.reported && !is_errno(&c, EPERM), "%s control also EPERM", cases[i].name);
	}
	struct probe pair = { "socketpair(AF_INET)", p_socketpair_inet, EPERM, CTL_ANY };
	check_denied(&pair);
}

/* -------------------------------------------------------------- mknod */

static long p_mknod_chr(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/chr", g_dir);
	long r = syscall(SYS_mknod, path, S_IFCHR | 0600, makedev(1, 3));
	int e = errno;
	unlink(path);
	errno = e;
	return r;
}

static long p_mknodat_blk(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/blk", g_dir);
	long r = syscall(SYS_mknodat, AT_FDCWD, path, S_IFBLK | 0600, makedev(7, 0));
	int e = errno;
	unlink(path);
	errno = e;
	return r;
}

static long p_mknod_chr_hibits(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/chr", g_dir);
	/* the kernel reads mode as 16 bits; bits above do not make it a FIFO */
	long r = syscall(SYS_mknod, path, 0x10000UL | S_IFCHR | 0600, makedev(1, 3));
	int e = errno;
	unlink(path);
	errno = e;
	return r;
}

static long p_mkfifo(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/fifo", g_dir);
	long r = mkfifo(path, 0600);
	if (r == 0)
		unlink(path);
	return r;
}

static long p_mknodat_sock(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/sock", g_dir);
	long r = syscall(SYS_mknodat, AT_FDCWD, path, S_IFSOCK | 0600, 0);
	if (r == 0)
		unlink(path);
	return r;
}

Test(seccomp, mknod_devices_denied_fifo_allowed)
{
	make_dir();
	static const struct probe ps[] = {
		{ "mknod(S_IFCHR 1:3)", p_mknod_chr, EPERM, CTL_ROOT },
		{ "mknodat(S_IFBLK 7:0)", p_mknodat_blk, EPERM, CTL_ROOT },
		{ "mknod(S_IFCHR | 0x10000)", p_mknod_chr_hibits, EPERM, CTL_ROOT },
	};
	check_denied_all(ps, sizeof(ps) / sizeof(ps[0]));
	check_allowed("mkfifo", p_mkfifo, true);
	check_allowed("mknodat(S_IFSOCK)", p_mknodat_sock, true);
	remove_dir();
}

/* ------------------------------------------------- foreign architectures */

static long p_x32_getpid(void)
{
	return syscall(X32_BIT | SYS_getpid);
}

/* Puts SIGSEGV back to its default action with the raw system call: the
 * sanitizers' handler (their sigaction interceptor keeps it in place) would
 * turn the kernel's SIGSEGV for int 0x80 into a report and an abort. */
static void segv_default(void)
{
	struct {
		void *handler; /* SIG_DFL */
		unsigned long flags;
		void *restorer;
		unsigned long mask;
	} sa = { 0 };
	syscall(SYS_rt_sigaction, SIGSEGV, &sa, NULL, sizeof(sa.mask));
}

static long p_int80_getpid(void)
{
	long ret;
	segv_default();
	/* i386 getpid is 20; int 0x80 enters the compat (i386) syscall path */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	if (ret < 0 && ret > -4096) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

/* A call through a foreign ABI is killed by the filter (SIGSYS). Which one
 * depends on the host's kernel, measured first without the filter (the
 * control): where the kernel answers the call (it runs it, or says ENOSYS,
 * as one without the x32 ABI does: the filter still sees the number), the
 * filter must kill it; where the kernel refuses it by itself (int 0x80 on a
 * kernel without IA32 emulation raises SIGSEGV before any filter sees it),
 * the control must show that refusal, a signal the filter does not send,
 * and the filtered call must not get through either: killed, by the same
 * signal or SIGSYS, without reporting back. */
Test(seccomp, foreign_arch_killed)
{
	prepare();
	char sb[96], cb[96];
	struct {
		const char *name;
		probe_fn fn;
	} cases[] = { { "x32 getpid (0x40000000|39)", p_x32_getpid },
		      { "int 0x80 getpid (i386 20)", p_int80_getpid } };
	for (size_t i = 0; i < 2; i++) {
		struct outcome c = run(M_CONTROL, cases[i].fn);
		struct outcome f = run(M_FILTER, cases[i].fn);
		describe(c.status, cb, sizeof(cb));
		describe(f.status, sb, sizeof(sb));
		if (c.reported) {
			cr_log_info("%s without the filter: %s, ret %ld errno %d", cases[i].name, cb,
				    c.r.ret, c.r.err);
			cr_expect(killed_by(&f, SIGSYS) && !f.reported, "%s under the filter: %s",
				  cases[i].name, sb);
			continue;
		}
		cr_log_info("%s without the filter: the kernel refuses it itself (%s); under the "
			    "filter: %s", cases[i].name, cb, sb);
		cr_expect(WIFSIGNALED(c.status) && !killed_by(&c, SIGSYS),
			  "%s control: neither a report nor the kernel's own signal: %s",
			  cases[i].name, cb);
		cr_expect(!f.reported && WIFSIGNALED(f.status) &&
				  (killed_by(&f, SIGSYS) || killed_by(&f, WTERMSIG(c.status))),
			  "%s under the filter: %s (the kernel alone: %s)", cases[i].name, sb, cb);
	}
}

/* --------------------------------------------------------------- caps */

/* Copies the Cap and seccomp lines of /proc/self/status into the note. */
static long p_status(void)
{
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail_step("open /proc/self/status");
	char buf[8192];
	size_t n = read_all(fd, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	close(fd);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n"))
		if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
		    !strncmp(line, "Seccomp", 7))
			note("%s\n", line);
	note("Securebits:\t%d\n", prctl(PR_GET_SECUREBITS, 0, 0, 0, 0));
	return 0;
}

/* The value of a "Name:\tvalue" line of a note, or NULL. */
static const char *field(const char *text, const char *name, char *out, size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, name, nl) && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == '\t' || *v == ' ')
				v++;
			size_t vl = strcspn(v, "\n");
			if (vl >= len)
				vl = len - 1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return out;
		}
	}
	return NULL;
}

static void expect_no_caps(const char *ctx, const char *status)
{
	static const char *names[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	char v[64];
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *got = field(status, names[i], v, sizeof(v));
		cr_expect(got && !strcmp(got, "0000000000000000"), "%s: %s is %s", ctx, names[i],
			  got ? got : "(missing)");
	}
}

#define DG_SECUREBITS_WANT                                                             \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |               \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED)
#define DG_SECUREBITS_AMB (SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

Test(seccomp, caps_drop_all_empties_every_set)
{
	struct outcome d = run(M_CAPS, p_status);
	cr_assert(d.reported, "caps child did not report");
	expect_no_caps("after dg_caps_drop_all", d.r.note);
	char v[64];
	const char *sb = field(d.r.note, "Securebits", v, sizeof(v));
	int bits = sb ? atoi(sb) : 0;
	cr_expect((bits & (DG_SECUREBITS_WANT | DG_SECUREBITS_AMB)) ==
			  (DG_SECUREBITS_WANT | DG_SECUREBITS_AMB) &&
		  !(bits & SECBIT_KEEP_CAPS),
		  "securebits %#x", bits);

	if (geteuid() == 0) {
		struct outcome c = run(M_CONTROL, p_status);
		const char *eff = field(c.r.note, "CapEff", v, sizeof(v));
		cr_expect(eff && strcmp(eff, "0000000000000000"),
			  "control: root has no capabilities to drop (CapEff %s)", eff ? eff : "?");
	}
}

/* An ambient capability raised before the drop does not survive it. */
static long p_ambient_then_drop(void)
{
	uint32_t hdr[2] = { 0x20080522, 0 };
	uint32_t d[6];
	if (syscall(SYS_capget, hdr, d))
		return fail_step("capget");
	d[2] |= 1u << 10; /* CAP_NET_BIND_SERVICE inheritable */
	if (syscall(SYS_capset, hdr, d))
		return fail_step("capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, 10, 0, 0))
		return fail_step("PR_CAP_AMBIENT_RAISE");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 10, 0, 0) != 1)
		return fail_step("ambient not raised");
	struct dg_err e = { { 0 } };
	if (dg_caps_drop_all(&e) < 0) {
		note("dg_caps_drop_all: %s\n", e.msg);
		errno = EIO;
		return -1;
	}
	return p_status();
}

Test(seccomp, caps_drop_clears_ambient)
{
	if (geteuid() != 0)
		cr_skip_test("needs root to raise an ambient capability");
	struct outcome o = run(M_CONTROL, p_ambient_then_drop);
	cr_assert(o.reported && o.r.ret == 0, "%s (%s)", o.r.note, strerror(o.r.err));
	expect_no_caps("ambient raised before the drop", o.r.note);
}

/* After the drop, even uid 0 cannot use a privilege: raising the nice value
 * needs CAP_SYS_NICE, and the securebits cannot be unlocked. */
static long p_privileged_after_drop(void)
{
	if (setpriority(PRIO_PROCESS, 0, -5) == 0) {
		note("setpriority(-5) succeeded");
		return 1;
	}
	if (prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) == 0) {
		note("securebits could be cleared");
		return 2;
	}
	return 0;
}

static long p_setpriority_neg(void)
{
	return setpriority(PRIO_PROCESS, 0, -5);
}

Test(seccomp, caps_drop_all_removes_privilege)
{
	if (geteuid() != 0)
		cr_skip_test("needs root for the control");
	struct outcome c = run(M_CONTROL, p_setpriority_neg);
	cr_expect(c.reported && c.r.ret == 0, "control: root cannot renice: %s", strerror(c.r.err));
	struct outcome d = run(M_CAPS, p_privileged_after_drop);
	cr_expect(d.reported && d.r.ret == 0, "after drop: %s", d.r.note);
}

/* The real caller: an unprivileged uid that created a user namespace, so it
 * holds every capability there. */
static long p_userns_drop_then_filter(void)
{
	if (geteuid() == 0 && (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534)))
		return fail_step("becoming nobody");
	if (unshare(CLONE_NEWUSER))
		return fail_step("unshare(CLONE_NEWUSER)");
	struct dg_err e = { { 0 } };
	if (dg_caps_drop_all(&e) < 0) {
		note("dg_caps_drop_all: %s", e.msg);
		errno = EIO;
		return -1;
	}
	if (e.msg[0])
		note("caps note: %s\n", e.msg);
	if (dg_seccomp_install(&e) < 0) {
		note("dg_seccomp_install: %s", e.msg);
		errno = EIO;
		return -1;
	}
	return p_status();
}

Test(seccomp, caps_and_filter_in_user_namespace)
{
	struct outcome o = run(M_CONTROL, p_userns_drop_then_filter);
	cr_assert(o.reported && o.r.ret == 0, "%s (%s)", o.r.note, strerror(o.r.err));
	cr_expect(!strstr(o.r.note, "caps note"), "%s", o.r.note);
	expect_no_caps("in a user namespace", o.r.note);
	char v[64];
	const char *nnp = field(o.r.note, "NoNewPrivs", v, sizeof(v));
	cr_expect(nnp && !strcmp(nnp, "1"), "NoNewPrivs %s", nnp ? nnp : "?");
	const char *sc = field(o.r.note, "Seccomp", v, sizeof(v));
	cr_expect(sc && !strcmp(sc, "2"), "Seccomp %s", sc ? sc : "?");
}

/* Without CAP_SETPCAP nothing can be dropped from the bounding set: that is
 * an error. With the bounding set already empty, the securebits are skipped
 * and said so. */
static long p_drop_without_setpcap(void)
{
	uint32_t hdr[2] = { 0x20080522, 0 };
	uint32_t d[6];
	if (syscall(SYS_capget, hdr, d))
		return fail_step("capget");
	d[0] &= ~(1u << 8); /* CAP_SETPCAP out of effective */
	if (syscall(SYS_capset, hdr, d))
		return fail_step("capset");
	struct dg_err e = { { 0 } };
	int r = dg_caps_drop_all(&e);
	note("%s", e.msg);
	return r;
}

static long p_drop_with_empty_bounding(void)
{
	for (int c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0))
			return fail_step("PR_CAPBSET_DROP");
	uint32_t hdr[2] = { 0x20080522, 0 };
	uint32_t d[6];
	if (syscall(SYS_capget, hdr, d))
		return fail_step("capget");
	d[0] &= ~(1u << 8);
	if (syscall(SYS_capset, hdr, d))
		return fail_step("capset");
	struct dg_err e = { { 0 } };
	int r = dg_caps_drop_all(&e);
	note("%s\n", e.msg);
	if (r == 0)
		return p_status();
	return r;
}

Test(seccomp, caps_drop_without_setpcap)
{
	if (geteuid() != 0)
		cr_skip_test("needs capabilities to take away");
	struct outcome a = run(M_CONTROL, p_drop_without_setpcap);
	cr_expect(a.reported && a.r.ret < 0 && strstr(a.r.note, "bounding set"),
		  "bounding set not droppable: ret %ld, %s", a.r.ret, a.r.note);
	struct outcome b = run(M_CONTROL, p_drop_with_empty_bounding);
	cr_expect(b.reported && b.r.ret == 0, "empty bounding set: ret %ld, %s", b.r.ret, b.r.note);
	cr_expect(strstr(b.r.note, "securebits not set"), "the skip is not reported: %s", b.r.note);
	expect_no_caps("empty bounding set, no CAP_SETPCAP", b.r.note);
}

Test(seccomp, status_after_install)
{
	prepare();
	struct outcome f = run(M_BOTH, p_status);
	cr_assert(f.reported, "filtered child died");
	char v[64];
	const char *nnp = field(f.r.note, "NoNewPrivs", v, sizeof(v));
	cr_expect(nnp && !strcmp(nnp, "1"), "NoNewPrivs %s", nnp ? nnp : "?");
	const char *sc = field(f.r.note, "Seccomp", v, sizeof(v));
	cr_expect(sc && !strcmp(sc, "2"), "Seccomp %s", sc ? sc : "?");
	const char *nf = field(f.r.note, "Seccomp_filters", v, sizeof(v));
	cr_expect(nf && !strcmp(nf, "1"), "Seccomp_filters %s", nf ? nf : "?");
	expect_no_caps("caps drop + filter", f.r.note);
}

/* ----------------------------------------------- programs under the filter */

struct prog_run {
	int status;
	char out[8192];
};

/* Runs argv with caps dropped and the filter installed, stdout+stderr
 * captured, within timeout_s. */
static struct prog_run run_program(const char *const *argv, double timeout_s)
{
	struct prog_run pr;
	memset(&pr, 0, sizeof(pr));
	int p[2];
	cr_assert(pipe2(p, O_CLOEXEC) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct res r;
		memset(&r, 0, sizeof(r));
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(p[1], 1) < 0 || dup2(p[1], 2) < 0)
			_exit(124);
		if (!child_setup(M_BOTH, &r)) {
			dprintf(2, "setup: %s\n", r.note);
			_exit(125);
		}
		static const char *const envp[] = { "PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8",
						     "TERM=dumb", NULL };
		execve(argv[0], (char *const *)argv, (char *const *)envp);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	double deadline = dg_test_now() + timeout_s;
	for (;;) {
		int left = (int)((deadline - dg_test_now()) * 1000);
		if (left <= 0) {
			kill(pid, SIGKILL);
			snprintf(pr.out + len, sizeof(pr.out) - len, "\n[timed out]");
			break;
		}
		struct pollfd pf = { p[0], POLLIN, 0 };
		if (poll(&pf, 1, left) <= 0)
			continue;
		char buf[1024];
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		size_t room = sizeof(pr.out) - 1 - len;
		size_t take = (size_t)n < room ? (size_t)n : room;
		memcpy(pr.out + len, buf, take);
		len += take;
	}
	close(p[0]);
	waitpid(pid, &pr.status, 0);
	return pr;
}

static void expect_runs(const char *const *argv, const char *want_out)
{
	if (access(argv[0], X_OK)) {
		cr_log_warn("%s not installed; skipped", argv[0]);
		return;
	}
	char sb[96];
	struct prog_run pr = run_program(argv, 60);
	cr_expect(WIFEXITED(pr.status) && WEXITSTATUS(pr.status) == 0, "%s %s under the filter: %s\n%s",
		  argv[0], argv[1] ? argv[1] : "", describe(pr.status, sb, sizeof(sb)), pr.out);
	if (want_out)
		cr_expect(strstr(pr.out, want_out), "%s: output lacks \"%s\":\n%s", argv[0], want_out,
			  pr.out);
}

static const char py_script[] =
	"import os, socket, subprocess, threading, tempfile, json, hashlib, select\n"
	"r = []\n"
	"t = threading.Thread(target=lambda: r.append(sum(range(1000))))\n"
	"t.start(); t.join()\n"
	"assert r == [499500]\n"
	"out = subprocess.run(['/bin/echo', 'child'], capture_output=True, check=True).stdout\n"
	"assert out == b'child\\n', out\n"
	"l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n"
	"c = socket.create_connection(l.getsockname()); s, _ = l.accept()\n"
	"c.sendall(b'ping'); assert s.recv(4) == b'ping'\n"
	"a, b = socket.socketpair(); a.send(b'x'); assert b.recv(1) == b'x'\n"
	"with tempfile.TemporaryDirectory() as d:\n"
	"    p = os.path.join(d, 'f'); open(p, 'w').write('data')\n"
	"    os.mkfifo(os.path.join(d, 'fifo')); os.symlink(p, os.path.join(d, 'l'))\n"
	"    os.rename(p, p + '2'); os.chmod(p + '2', 0o600)\n"
	"print(hashlib.sha256(b'').hexdigest()[:8], json.dumps({'ok': True}), os.cpu_count() > 0)\n";

Test(seccomp, ordinary_programs_run)
{
	prepare();
	const char *sh[] = { "/bin/sh", "-c",
			     "echo shell-ok | cat; ls / >/dev/null; d=$(date); test -n \"$d\"; "
			     "f=$(mktemp); echo x >\"$f\"; grep -q x \"$f\"; rm \"$f\"; "
			     "sleep 0.01 & wait",
			     NULL };
	expect_runs(sh, "shell-ok");
	const char *py[] = { "/usr/bin/python3", "-c", py_script, NULL };
	expect_runs(py, "e3b0c442 {\"ok\": true} True");
	const char *xterm[] = { "/usr/bin/xterm", "-version", NULL };
	expect_runs(xterm, "XTerm");
	const char *curl[] = { "/usr/bin/curl", "-sS", "file:///etc/os-release", NULL };
	expect_runs(curl, "ID=");
	/* the filter, NNP and the empty capability sets survive execve */
	const char *cat[] = { "/bin/cat", "/proc/self/status", NULL };
	struct prog_run pr = run_program(cat, 30);
	char v[64];
	const char *sc = field(strstr(pr.out, "Seccomp:") ? strstr(pr.out, "Seccomp:") : "",
			       "Seccomp", v, sizeof(v));
	cr_expect(sc && !strcmp(sc, "2"), "Seccomp after exec: %s", sc ? sc : "?");
	const char *nnp = field(strstr(pr.out, "NoNewPrivs:") ? strstr(pr.out, "NoNewPrivs:") : "",
				"NoNewPrivs", v, sizeof(v));
	cr_expect(nnp && !strcmp(nnp, "1"), "NoNewPrivs after exec: %s", nnp ? nnp : "?");
	const char *caps = strstr(pr.out, "CapInh:");
	expect_no_caps("after exec as uid 0", caps ? caps : "");
}

/* ---------------------------------------- the loaded program, interpreted */

#define PROG_MAX BPF_MAXINSNS

struct loaded {
	int len;
	struct sock_filter insns[PROG_MAX];
};

/* Reads the filter of a child that installed it (prepared or not). */
static void fetch_program(struct loaded *lp)
{
	if (geteuid() != 0)
		cr_skip_test("PTRACE_SECCOMP_GET_FILTER needs CAP_SYS_ADMIN");
	int ready[2];
	cr_assert(pipe2(ready, O_CLOEXEC) == 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		struct res r;
		memset(&r, 0, sizeof(r));
		char c = child_setup(M_FILTER, &r) ? 'y' : 'n';
		write_all(ready[1], &c, 1);
		for (;;)
			pause();
	}
	close(ready[1]);
	char c = 0;
	cr_assert(read_all(ready[0], &c, 1) == 1 && c == 'y', "child could not install the filter");
	close(ready[0]);
	cr_assert(ptrace(PTRACE_ATTACH, pid, 0, 0) == 0, "PTRACE_ATTACH: %s", strerror(errno));
	int st;
	cr_assert(waitpid(pid, &st, 0) == pid && WIFSTOPPED(st));
	long n = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, 0, NULL);
	long got = n > 0 && n <= PROG_MAX ? ptrace(PTRACE_SECCOMP_GET_FILTER, pid, 0, lp->insns) : -1;
	int e = errno;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	cr_assert(n > 0 && got == n, "PTRACE_SECCOMP_GET_FILTER: %ld/%ld %s", n, got, strerror(e));
	lp->len = (int)n;
}

/* Classic BPF as the seccomp checker allows it, over struct seccomp_data.
 * Returns the action, or 0xdeadbeef on an instruction it does not know. */
static uint32_t bpf_run(const struct loaded *lp, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = { 0 };
	const unsigned char *data = (const unsigned char *)d;
	for (int pc = 0; pc < lp->len; pc++) {
		const struct sock_filter *f = &lp->insns[pc];
		uint32_t k = f->k;
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (k + 4 > sizeof(*d) || k % 4)
				return 0xdeadbeef;
			memcpy(&a, data + k, 4);
			break;
		case BPF_LD | BPF_IMM: a = k; break;
		case BPF_LDX | BPF_IMM: x = k; break;
		case BPF_LD | BPF_MEM: a = mem[k % BPF_MEMWORDS]; break;
		case BPF_LDX | BPF_MEM: x = mem[k % BPF_MEMWORDS]; break;
		case BPF_ST: mem[k % BPF_MEMWORDS] = a; break;
		case BPF_STX: mem[k % BPF_MEMWORDS] = x; break;
		case BPF_ALU | BPF_AND | BPF_K: a &= k; break;
		case BPF_ALU | BPF_OR | BPF_K: a |= k; break;
		case BPF_ALU | BPF_ADD | BPF_K: a += k; break;
		case BPF_ALU | BPF_SUB | BPF_K: a -= k; break;
		case BPF_ALU | BPF_LSH | BPF_K: a <<= (k & 31); break;
		case BPF_ALU | BPF_RSH | BPF_K: a >>= (k & 31); break;
		case BPF_ALU | BPF_AND | BPF_X: a &= x; break;
		case BPF_MISC | BPF_TAX: x = a; break;
		case BPF_MISC | BPF_TXA: a = x; break;
		case BPF_JMP | BPF_JA: pc += (int)k; break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += a == k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGT | BPF_K: pc += a > k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += a >= k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (a & k) ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JEQ | BPF_X: pc += a == x ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGT | BPF_X: pc += a > x ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGE | BPF_X: pc += a >= x ? f->jt : f->jf; break;
		case BPF_RET | BPF_K: return k;
		case BPF_RET | BPF_A: return a;
		default: return 0xdeadbeef;
		}
	}
	return 0xdeadbeef; /* fell off the end */
}

#define ACT_ALLOW SECCOMP_RET_ALLOW
#define ACT_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define ACT_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
#define ACT_KILL SECCOMP_RET_KILL_PROCESS

static uint32_t verdict(const struct loaded *lp, uint32_t arch, int nr, uint64_t a0, uint64_t a1,
			uint64_t a2)
{
	struct seccomp_data d;
	memset(&d, 0, sizeof(d));
	d.nr = nr;
	d.arch = arch;
	d.args[0] = a0;
	d.args[1] = a1;
	d.args[2] = a2;
	return bpf_run(lp, &d);
}

static uint32_t native(const struct loaded *lp, int nr, uint64_t a0, uint64_t a1, uint64_t a2)
{
	return verdict(lp, AUDIT_ARCH_X86_64, nr, a0, a1, a2);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static const uint64_t arg_patterns[] = { 0, 1, 0xffffffffull, 0xffffffffffffffffull,
					 0x100000000ull, 0x5412 };

Test(seccomp, program_arch_and_x32)
{
	prepare();
	static struct loaded lp;
	fetch_program(&lp);
	cr_log_info("loaded program: %d instructions", lp.len);
	/* i386 (int 0x80), x32 and any other arch: kill */
	uint32_t arches[] = { AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, AUDIT_ARCH_ARM, 0 };
	for (size_t i = 0; i < sizeof(arches) / sizeof(arches[0]); i++)
		for (int nr = 0; nr < 500; nr += 7)
			cr_expect_eq(verdict(&lp, arches[i], nr, 0, 0, 0), ACT_KILL,
				     "arch %#x nr %d not killed", arches[i], nr);
	for (int nr = 0; nr < 600; nr++)
		cr_expect_eq(native(&lp, X32_BIT | nr, 0, 0, 0), ACT_KILL, "x32 nr %d not killed", nr);
	cr_expect_eq(native(&lp, (int)0x7fffffff, 0, 0, 0), ACT_KILL, "nr 0x7fffffff");
	/* nr -1 is a tracer skipping the call: not a foreign call */
	cr_expect_neq(native(&lp, -1, 0, 0, 0), ACT_KILL, "nr -1 killed");
	/* numbers past the table: denied, not allowed */
	for (int nr = 470; nr < 4096; nr++)
		cr_expect_eq(native(&lp, nr, 0, 0, 0), ACT_EPERM, "unknown nr %d: %#x", nr,
			     native(&lp, nr, 0, 0, 0));
}

Test(seccomp, program_denies_and_allows_by_number)
{
	prepare();
	static struct loaded lp;
	fetch_program(&lp);
	static const int denied[] = {
		SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_process_madvise,
		SYS_pidfd_getfd, SYS_kcmp, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot,
		SYS_fsopen, SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_open_tree, SYS_move_mount,
		SYS_mount_setattr, __NR_open_tree_attr, __NR_statmount, __NR_listmount, SYS_setns,
		SYS_bpf, SYS_perf_event_open, SYS_userfaultfd, SYS_io_uring_setup,
		SYS_io_uring_enter, SYS_io_uring_register, SYS_open_by_handle_at,
		SYS_name_to_handle_at, SYS_keyctl, SYS_add_key, SYS_request_key, SYS_kexec_load,
		SYS_kexec_file_load, SYS_init_module, SYS_finit_module, SYS_delete_module,
		SYS_swapon, SYS_swapoff, SYS_reboot, SYS_acct, SYS_quotactl, SYS_quotactl_fd,
		SYS_syslog, SYS_iopl, SYS_ioperm, SYS_uselib, SYS_settimeofday, SYS_clock_settime,
		SYS_adjtimex, SYS_clock_adjtime, SYS_lookup_dcookie, SYS_fanotify_init,
		SYS_fanotify_mark, SYS_nfsservctl, __NR_memfd_secret, SYS_sysfs, SYS_ustat,
		SYS__sysctl, SYS_create_module, SYS_get_kernel_syms, SYS_query_module,
		SYS_move_pages, SYS_migrate_pages, SYS_mbind, SYS_set_mempolicy, SYS_vhangup,
		SYS_sethostname, SYS_setdomainname, SYS_modify_ldt, SYS_io_setup, SYS_io_submit,
		SYS_vmsplice, SYS_sync, SYS_syncfs, __NR_cachestat, __NR_process_mrelease,
		SYS_get_robust_list, SYS_remap_file_pages, SYS_set_thread_area,
	};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		for (size_t p = 0; p < sizeof(arg_patterns) / sizeof(arg_patterns[0]); p++)
			cr_expect_eq(native(&lp, denied[i], arg_patterns[p], arg_patterns[p], 0),
				     ACT_EPERM, "nr %d with args %#llx: not EPERM", denied[i],
				     (unsigned long long)arg_patterns[p]);
	static const int allowed[] = {
		SYS_read, SYS_write, SYS_openat, SYS_close, SYS_mmap, SYS_mprotect, SYS_madvise,
		SYS_mremap, SYS_futex, SYS_epoll_wait, SYS_epoll_pwait, SYS_eventfd2,
		SYS_timerfd_create, SYS_signalfd4, SYS_inotify_init1, SYS_memfd_create,
		SYS_membarrier, SYS_rseq, SYS_set_robust_list, SYS_prctl, SYS_sched_getaffinity,
		SYS_sched_setscheduler, SYS_getrandom, SYS_statx, SYS_pidfd_open,
		SYS_pidfd_send_signal, SYS_pipe2, SYS_splice, SYS_tee, SYS_sendmsg, SYS_recvmsg,
		SYS_sendmmsg, SYS_recvmmsg, SYS_shmget, SYS_shmat, SYS_semget, SYS_semop,
		SYS_msgget, SYS_msgsnd, SYS_fadvise64, SYS_copy_file_range, SYS_fallocate,
		SYS_ftruncate, SYS_fchmodat, __NR_fchmodat2, SYS_fchownat, SYS_utimensat,
		SYS_flock, SYS_getdents64, SYS_readlink, SYS_symlink, SYS_link, SYS_renameat2,
		SYS_mkdir, SYS_rmdir, SYS_unlink, SYS_sysinfo, SYS_uname, SYS_times,
		SYS_getrusage, SYS_prlimit64, SYS_setrlimit, SYS_getpriority, SYS_setpriority,
		SYS_capget, SYS_seccomp, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
		SYS_landlock_restrict_self, SYS_kill, SYS_tkill, SYS_tgkill, SYS_wait4,
		SYS_waitid, SYS_execve, SYS_execveat, SYS_vfork, SYS_fork, SYS_arch_prctl,
		SYS_close_range, SYS_faccessat2, SYS_openat2, SYS_epoll_pwait2, SYS_futex_waitv,
		__NR_futex_wake, SYS_clock_gettime, SYS_clock_nanosleep, SYS_exit_group,
		SYS_rt_sigreturn, SYS_restart_syscall, SYS_sigaltstack, SYS_mq_open,
		SYS_pkey_alloc, SYS_mlock, SYS_getxattr, SYS_setxattr,
	};
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		for (size_t p = 0; p < sizeof(arg_patterns) / sizeof(arg_patterns[0]); p++)
			cr_expect_eq(native(&lp, allowed[i], arg_patterns[p], arg_patterns[p],
					    arg_patterns[p]),
				     ACT_ALLOW, "nr %d with args %#llx: not allowed", allowed[i],
				     (unsigned long long)arg_patterns[p]);
	cr_expect_eq(native(&lp, SYS_clone3, 0, 0, 0), ACT_ENOSYS, "clone3 is not ENOSYS");
}

Test(seccomp, program_argument_filters)
{
	prepare();
	static struct loaded lp;
	fetch_program(&lp);

	/* ioctl: EPERM exactly when the low 32 bits are TIOCSTI/TIOCLINUX */
	for (int i = 0; i < 300000; i++) {
		uint64_t v = rnd();
		switch (i % 4) {
		case 0: v = (v & 0xffffffff00000000ull) | (i & 1 ? TIOCSTI : TIOCLINUX); break;
		case 1: v = (v & 0xffffffff00000000ull) | (0x5400 + (v & 0x3f)); break;
		case 2: v &= 0xffffffffull; break;
		default: break;
		}
		uint32_t low = (uint32_t)v;
		uint32_t want = low == TIOCSTI || low == TIOCLINUX ? ACT_EPERM : ACT_ALLOW;
		uint32_t got = native(&lp, SYS_ioctl, 3, v, 0);
		if (got != want) {
			cr_expect_eq(got, want, "ioctl request %#llx: %#x", (unsigned long long)v, got);
			break;
		}
	}

	/* clone/unshare: any namespace bit denies, in any company */
	const uint64_t ns_clone = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
				  CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP;
	for (int b = 0; b < 64; b++) {
		uint64_t f = 1ull << b;
		cr_expect_eq(native(&lp, SYS_clone, f, 0, 0), (f & ns_clone) ? ACT_EPERM : ACT_ALLOW,
			     "clone flag bit %d", b);
		cr_expect_eq(native(&lp, SYS_clone, f | 0x3d0f00 /* pthread */, 0, 0),
			     (f & ns_clone) ? ACT_EPERM : ACT_ALLOW, "clone pthread flags + bit %d", b);
		cr_expect_eq(native(&lp, SYS_unshare, f, 0, 0),
			     (f & (ns_clone | CLONE_NEWTIME)) ? ACT_EPERM : ACT_ALLOW,
			     "unshare flag bit %d", b);
	}

	/* personality: 0 and the query, seen through the low 32 bits */
	const struct {
		uint64_t v;
		uint32_t want;
	} pers[] = { { 0, ACT_ALLOW }, { 0xffffffff, ACT_ALLOW }, { ~0ull, ACT_ALLOW },
		     { 0x100000000ull, ACT_ALLOW }, { 8, ACT_EPERM }, { 0x0040000, ACT_EPERM },
		     { 0x0400000, ACT_EPERM }, { 0x10000000ull | 8, ACT_EPERM } };
	for (size_t i = 0; i < sizeof(pers) / sizeof(pers[0]); i++)
		cr_expect_eq(native(&lp, SYS_personality, pers[i].v, 0, 0), pers[i].want,
			     "personality(%#llx)", (unsigned long long)pers[i].v);

	/* socket: every family, type and a few protocols */
	const uint64_t protos[] = { 0, 1, 6, 17, 58, 132, 255, 262, 0x100000000ull };
	for (uint64_t fam = 0; fam < 64; fam++) {
		for (uint64_t type = 0; type < 16; type++) {
			for (size_t p = 0; p < sizeof(protos) / sizeof(protos[0]); p++) {
				uint64_t proto = protos[p];
				uint32_t pr = (uint32_t)proto;
				bool ok = fam == AF_UNIX ||
					  (fam == AF_NETLINK && pr == NETLINK_ROUTE) ||
					  ((fam == AF_INET || fam == AF_INET6) &&
					   ((type == SOCK_STREAM && (pr == 0 || pr == IPPROTO_TCP)) ||
					    (type == SOCK_DGRAM && (pr == 0 || pr == IPPROTO_UDP))));
				uint64_t flags = (p & 1) ? SOCK_CLOEXEC | SOCK_NONBLOCK : 0;
				uint64_t hi = (type & 1) ? 0xdead00000000ull : 0;
				uint32_t got = native(&lp, SYS_socket, hi | fam, flags | type, proto);
				cr_expect_eq(got, ok ? ACT_ALLOW : ACT_EPERM,
					     "socket(%llu, %llu, %#llx): %#x", (unsigned long long)fam,
					     (unsigned long long)type, (unsigned long long)proto, got);
			}
		}
		cr_expect_eq(native(&lp, SYS_socketpair, fam, SOCK_STREAM, 0),
			     fam == AF_UNIX ? ACT_ALLOW : ACT_EPERM, "socketpair(%llu)",
			     (unsigned long long)fam);
	}

	/* mknod/mknodat: FIFOs and sockets only */
	const uint64_t modes[] = { S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK, S_IFREG, 0, S_IFDIR,
				   S_IFLNK };
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		uint32_t want = modes[i] == S_IFIFO || modes[i] == S_IFSOCK ? ACT_ALLOW : ACT_EPERM;
		cr_expect_eq(native(&lp, SYS_mknod, 0, modes[i] | 0644, 0), want, "mknod mode %#llo",
			     (unsigned long long)modes[i]);
		cr_expect_eq(native(&lp, SYS_mknodat, AT_FDCWD, 0, modes[i] | 0600), want,
			     "mknodat mode %#llo", (unsigned long long)modes[i]);
	}
}

/* The program built in the jail's init (no prepare) and the one prepared in
 * the parent are the same program. */
Test(seccomp, prepared_and_fresh_program_identical)
{
	static struct loaded fresh, prepared;
	fetch_program(&fresh); /* nothing prepared yet in this test process */
	prepare();
	fetch_program(&prepared);
	cr_assert_eq(fresh.len, prepared.len, "lengths %d vs %d", fresh.len, prepared.len);
	cr_expect(!memcmp(fresh.insns, prepared.insns, sizeof(fresh.insns[0]) * (size_t)fresh.len),
		  "programs differ");
}

/* ---------------------------------------------------------------- cost */

static long p_time_install(void)
{
	double t0 = dg_test_now();
	struct dg_err e = { { 0 } };
	int r = dg_seccomp_install(&e);
	double ms = (dg_test_now() - t0) * 1000;
	note("%.3f", ms);
	if (r < 0) {
		note(" %s", e.msg);
		errno = -r;
		return -1;
	}
	return 0;
}

Test(seccomp, install_cost)
{
	double fresh = 0, prepared = 0;
	const int n = 5;
	for (int i = 0; i < n; i++) {
		struct outcome o = run(M_CONTROL, p_time_install);
		cr_assert(o.reported && o.r.ret == 0, "%s", o.r.note);
		fresh += atof(o.r.note);
	}
	double t0 = dg_test_now();
	prepare();
	double prep_ms = (dg_test_now() - t0) * 1000;
	for (int i = 0; i < n; i++) {
		struct outcome o = run(M_CONTROL, p_time_install);
		cr_assert(o.reported && o.r.ret == 0, "%s", o.r.note);
		prepared += atof(o.r.note);
	}
	cr_log_info("seccomp install: %.2f ms building in the child, %.2f ms prepare, %.2f ms "
		    "loading a prepared program (this build's sanitizers included)",
		    fresh / n, prep_ms, prepared / n);
	cr_expect(prepared / n < fresh / n, "a prepared install is not cheaper");
}
