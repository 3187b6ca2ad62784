/* deskgate-probe, isolation: the process's status, ptrace and other processes'
 * memory, namespaces, the kernel interfaces (bpf, perf, userfaultfd,
 * io_uring, file handles, kexec, modules), foreign ABIs, TIOCSTI, the
 * process list. */

#include "cli/probe-priv.h"

/* ---------------------------------------------------------- isolation */

/* status: /proc/self/status shows every capability set empty, NoNewPrivs 1
 * and Seccomp 2 (filter mode). */
int p_status(int argc, char **argv)
{
	(void)argc, (void)argv;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return error_out("/proc/self/status: %s", en(errno));
	char line[256];
	bool leaked = false;
	int seen = 0;
	while (fgets(line, sizeof(line), f)) {
		char key[64], val[128];
		if (sscanf(line, "%63[^:]:%*[ \t]%127s", key, val) != 2)
			continue;
		bool cap = strncmp(key, "Cap", 3) == 0;
		if (cap || !strcmp(key, "NoNewPrivs") || !strcmp(key, "Seccomp")) {
			seen++;
			bool bad = cap ? strtoull(val, NULL, 16) != 0
				       : !strcmp(key, "NoNewPrivs") ? strcmp(val, "1") != 0
								    : strcmp(val, "2") != 0;
			note("%s %s%s", key, val, bad ? " (!)" : "");
			leaked |= bad;
		}
	}
	fclose(f);
	if (seen < 7)
		return error_out("only %d of the 7 fields found: %s", seen, evidence);
	return finish(leaked);
}

static void c_traceme(struct child_result *res, void *arg)
{
	(void)arg;
	errno = 0;
	res->ret = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	res->err = errno;
}

/* Attaches to pid, waits for the stop and detaches with no signal, so the
 * target only sees a brief stop. Returns ptrace's result. */
long attach_detach(pid_t pid, int *err)
{
	errno = 0;
	long r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	*err = errno;
	if (r == 0) {
		int st;
		waitpid(pid, &st, __WALL);
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	return r;
}

/* A process to reach into when the parent is outside the pid namespace (a
 * program run beside a desktop by dg_jail_enter: its supervisor is not in
 * the jail): the first other visible process of our own uid, which the
 * kernel alone would let us trace (a desktop's Xvnc); 0 when none. */
static pid_t other_process(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	pid_t found = 0, self = getpid();
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		pid_t p = (pid_t)atoi(e->d_name);
		struct stat st;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s", e->d_name);
		if (p > 1 && p != self && stat(path, &st) == 0 && st.st_uid == getuid())
			found = p;
	}
	closedir(d);
	return found;
}

/* ptrace: PTRACE_TRACEME in a child, PTRACE_ATTACH to an own child (allowed
 * by the kernel alone: only the filter stops it) and to the parent (or,
 * when the parent is outside the pid namespace, to another process of the
 * same uid). An attach that succeeds stops the target only for a moment. */
int p_ptrace(int argc, char **argv)
{
	(void)argc, (void)argv;
	int st, err;
	judge_child(CALL_SYSCALL, "ptrace_traceme", "PTRACE_TRACEME", NULL, c_traceme, NULL);
	pid_t kid = fork();
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	if (kid > 0) {
		long r = attach_detach(kid, &err);
		judge_ret(CALL_SYSCALL, "ptrace_attach_child", "PTRACE_ATTACH own child", NULL, r,
			  err);
		kill(kid, SIGKILL);
		waitpid(kid, &st, 0);
	}
	pid_t pp = getppid();
	if (pp > 0) {
		char what[64];
		snprintf(what, sizeof(what), "PTRACE_ATTACH parent %d", (int)pp);
		long r = attach_detach(pp, &err);
		judge_ret(CALL_SYSCALL, "ptrace_attach_parent", what, NULL, r, err);
	} else {
		note("parent outside the pid namespace (ppid 0)");
		pid_t other = other_process();
		if (other > 0) {
			char what[64];
			snprintf(what, sizeof(what), "PTRACE_ATTACH pid %d (same uid)", (int)other);
			long r = attach_detach(other, &err);
			judge_ret(CALL_SYSCALL, "ptrace_attach_other", what, NULL, r, err);
		}
	}
	return finish_calls();
}

/* process-vm-readv: reads the parent's memory (the address comes from its
 * maps when readable; EFAULT still means the permission check passed). When
 * the parent is outside the pid namespace, another process of the same uid
 * is the target. */
int p_process_vm_readv(int argc, char **argv)
{
	(void)argc, (void)argv;
	pid_t pp = getppid();
	if (pp <= 0) {
		pp = other_process();
		note("parent outside the pid namespace (ppid 0): %s", pp > 0 ? "another process of "
		     "the same uid is the target" : "no other process of the same uid either");
		if (pp <= 0)
			return finish(false);
	}
	unsigned long addr = 0x10000;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pp);
	FILE *f = fopen(path, "re");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;
			char perms[8];
			if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r') {
				addr = lo;
				break;
			}
		}
		fclose(f);
		note("maps of %d readable", (int)pp);
	} else {
		note("maps of %d: %s", (int)pp, en(errno));
	}
	char buf[16];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)addr, sizeof(buf)};
	errno = 0;
	long r = process_vm_readv(pp, &local, 1, &remote, 1, 0);
	int e = errno;
	if (r > 0) {
		note("read %ld byte(s) of process %d at %#lx", r, (int)pp, addr);
		return finish(true);
	}
	if (e == EPERM || e == ESRCH) {
		note("process_vm_readv(%d): %s", (int)pp, en(e));
		return finish(false);
	}
	note("process_vm_readv(%d) passed the permission check: %s", (int)pp, en(e));
	return finish(true);
}

struct ns_call {
	const char *what;
	const char *key;
	int kind; /* 0 unshare, 1 clone, 2 clone3 */
	unsigned long flags;
};

/* The fields of struct clone_args up to exit_signal (CLONE_ARGS_SIZE_VER0 is
 * 64 bytes: all eight u64 fields). */
struct dg_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static void c_ns_call(struct child_result *res, void *arg)
{
	const struct ns_call *c = arg;
	errno = 0;
	if (c->kind == 0) {
		res->ret = unshare((int)c->flags);
	} else if (c->kind == 1) {
		long r = syscall(SYS_clone, c->flags | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		res->ret = r;
	} else {
		struct dg_clone_args ca = {.flags = c->flags, .exit_signal = SIGCHLD};
		long r = syscall(SYS_clone3, &ca, sizeof(ca));
		if (r == 0)
			_exit(0);
		res->ret = r;
	}
	res->err = errno;
	if (res->ret > 0 && c->kind) {
		int st;
		waitpid((pid_t)res->ret, &st, __WALL);
	}
}

/* unshare: unshare and clone (raw, and clone3) with new user, net or mount
 * namespaces are refused. Each call runs in its own child. clone3 may also
 * answer ENOSYS (the jail makes libc fall back to clone, whose flags the
 * filter can read). */
int p_unshare(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const struct ns_call calls[] = {
		{"unshare(CLONE_NEWUSER)", "unshare_newuser", 0, CLONE_NEWUSER},
		{"unshare(CLONE_NEWNET)", "unshare_newnet", 0, CLONE_NEWNET},
		{"unshare(CLONE_NEWNS)", "unshare_newns", 0, CLONE_NEWNS},
		{"clone(CLONE_NEWUSER)", "clone_newuser", 1, CLONE_NEWUSER},
		{"clone(CLONE_NEWUSER|CLONE_NEWNET)", "clone_newuser_newnet", 1,
		 CLONE_NEWUSER | CLONE_NEWNET},
		{"clone(CLONE_NEWNET)", "clone_newnet", 1, CLONE_NEWNET},
		{"clone3(CLONE_NEWUSER)", "clone3_newuser", 2, CLONE_NEWUSER},
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		struct call k = {CALL_SYSCALL, calls[i].key, calls[i].what, NULL};
		struct call_end c;
		if (child_end(c_ns_call, (void *)&calls[i], calls[i].what, &c) < 0)
			continue;
		if (calls[i].kind == 2 && !c.sig && c.ret < 0 && c.err == ENOSYS &&
		    !is_host_control()) {
			/* The filter's own answer to clone3 (its flags are out
			 * of its reach): libc falls back to clone. */
			note("%s: ENOSYS", calls[i].what);
			continue;
		}
		judge_call(&k, &c);
	}
	return finish_calls();
}

/* bpf: loading a trivial socket filter program (r0 = 0; exit) is refused;
 * a program that loads is closed at once. */
int p_bpf(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct bpf_insn insns[2] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insn_cnt = 2;
	attr.insns = (uint64_t)(uintptr_t)insns;
	attr.license = (uint64_t)(uintptr_t) "GPL";
	errno = 0;
	long r = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "bpf_prog_load", "bpf(BPF_PROG_LOAD socket filter)", "bpf()", r, e);
	return finish_calls();
}

/* perf: a software counter on the probe itself is refused (the kernel alone
 * allows it to unprivileged users at perf_event_paranoid <= 2). */
int p_perf(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	errno = 0;
	long r = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "perf_event_open", "perf_event_open(sw task clock, self)",
		  "perf events", r, e);
	return finish_calls();
}

/* userfaultfd: refused, also with UFFD_USER_MODE_ONLY (which the kernel
 * alone grants to unprivileged users). */
int p_userfaultfd(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "userfaultfd", "userfaultfd(0)", "userfaultfd", r, e);
	errno = 0;
	r = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "userfaultfd_user_mode", "userfaultfd(USER_MODE_ONLY)",
		  "userfaultfd", r, e);
	return finish_calls();
}

/* io-uring: io_uring_setup is refused (a ring that is made is closed). */
int p_io_uring(int argc, char **argv)
{
	(void)argc, (void)argv;
	char params[120]; /* struct io_uring_params, zeroed */
	memset(params, 0, sizeof(params));
	errno = 0;
	long r = syscall(SYS_io_uring_setup, 4, params);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "io_uring_setup", "io_uring_setup(4)", "io_uring", r, e);
	return finish_calls();
}

/* open-by-handle: open_by_handle_at is refused (a handle from
 * name_to_handle_at when that works, else a made-up one; any answer but EPERM
 * means the call reached the kernel). */
int p_open_by_handle(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct {
		struct file_handle h;
		unsigned char bytes[MAX_HANDLE_SZ];
	} fh;
	memset(&fh, 0, sizeof(fh));
	fh.h.handle_bytes = MAX_HANDLE_SZ;
	int mount_id;
	errno = 0;
	if (name_to_handle_at(AT_FDCWD, "/etc", &fh.h, &mount_id, 0) < 0) {
		note("name_to_handle_at(/etc): %s", en(errno));
		fh.h.handle_bytes = 8;
		fh.h.handle_type = 1;
	}
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	errno = 0;
	long r = syscall(SYS_open_by_handle_at, root, &fh.h, O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (r >= 0)
		close((int)r);
	if (root >= 0)
		close(root);
	judge_ret(CALL_SYSCALL, "open_by_handle_at", "open_by_handle_at", "file handles", r, e);
	return finish_calls();
}

/* kexec: kexec_load and kexec_file_load with invalid flags: past the
 * permission check the kernel answers EINVAL, so nothing is ever loaded. */
int p_kexec(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL);
	judge_ret(CALL_SYSCALL, "kexec_load", "kexec_load(bad flags)", "kexec", r, errno);
	errno = 0;
	r = syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 0xdead0000UL);
	judge_ret(CALL_SYSCALL, "kexec_file_load", "kexec_file_load(bad flags)", "kexec_file_load",
		  r, errno);
	return finish_calls();
}

/* modules: init_module with an empty image (ENOEXEC past the permission
 * check) and finit_module on fd -1 (EBADF) load nothing. */
int p_modules(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_init_module, NULL, 0UL, "");
	judge_ret(CALL_SYSCALL, "init_module", "init_module(empty)", "loadable modules", r, errno);
	errno = 0;
	r = syscall(SYS_finit_module, -1, "", 0);
	judge_ret(CALL_SYSCALL, "finit_module", "finit_module(-1)", "loadable modules", r, errno);
	return finish_calls();
}

static void c_x32(struct child_result *res, void *arg)
{
	(void)arg;
	errno = 0;
	res->ret = syscall(0x40000000L | SYS_getpid);
	res->err = errno;
}

static void c_int80(struct child_result *res, void *arg)
{
	(void)arg;
	long ax = 20; /* i386 getpid */
	__asm__ volatile("int $0x80" : "+a"(ax) : : "r8", "r9", "r10", "r11", "memory");
	res->ret = ax < 0 && ax > -4096 ? -1 : ax;
	res->err = ax < 0 && ax > -4096 ? (int)-ax : 0;
}

/* x32: getpid through the x32 ABI (nr | 0x40000000) is killed (SIGSYS). The
 * filter sees the number on any x86-64 kernel; one built without the x32
 * ABI answers ENOSYS without a filter (the host control: KERNEL). */
int p_x32(int argc, char **argv)
{
	(void)argc, (void)argv;
	judge_child(CALL_ABI, "x32", "x32 getpid", "x32 ABI", c_x32, NULL);
	return finish_calls();
}

/* int80: getpid through int 0x80 (the i386 ABI) is killed (SIGSYS). A kernel
 * without IA32 emulation raises SIGSEGV instead, before any filter sees the
 * call: on the host and in a jail alike (KERNEL, given the host control). */
int p_int80(int argc, char **argv)
{
	(void)argc, (void)argv;
	judge_child(CALL_ABI, "int80", "int 0x80 getpid", "IA32 emulation", c_int80, NULL);
	return finish_calls();
}

/* The TIOCSTI child: a new session whose controlling terminal is a fresh
 * pty, so the kernel alone would allow TIOCSTI on it; then the ioctls. The
 * injected byte goes to this private pty only. */
static void c_tiocsti(struct child_result *res, void *arg)
{
	(void)arg;
	setsid();
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR /dev/ptmx: %s", en(errno));
		return;
	}
	char name[128];
	if (ptsname_r(m, name, sizeof(name)) != 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR ptsname: %s", en(errno));
		return;
	}
	int s = open(name, O_RDWR | O_CLOEXEC);
	if (s < 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR open %s: %s", name, en(errno));
		return;
	}
	ioctl(s, TIOCSCTTY, 0);
	static const struct {
		const char *what;
		unsigned long req;
	} calls[] = {
		{"TIOCSTI 0x5412", 0x5412UL},
		{"TIOCSTI 0x100005412", 0x100005412UL},
		{"TIOCLINUX 0x541c", 0x541CUL},
		{"TIOCLINUX 0x10000541c", 0x10000541CUL},
	};
	res->ret = 0;
	size_t off = 0;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		char c = i < 2 ? '#' : 12; /* TIOCLINUX 12: read the shift state */
		errno = 0;
		long r = syscall(SYS_ioctl, s, calls[i].req, &c);
		int e = errno;
		if (!(r < 0 && e == EPERM))
			res->ret = 1;
		off += (size_t)snprintf(res->msg + off, sizeof(res->msg) - off, "%s%s: %s",
					i ? "; " : "", calls[i].what,
					r < 0 ? en(e) : "succeeded");
		if (off >= sizeof(res->msg))
			break;
	}
}

/* tiocsti: TIOCSTI (and TIOCLINUX) are refused on the probe's own
 * controlling pty, also when the request has high bits set (the kernel
 * truncates the request to 32 bits; the filter must compare all 64). */
int p_tiocsti(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct child_result res;
	int st;
	if (run_child(c_tiocsti, NULL, 5, &res, &st) != 1) {
		char how[64];
		describe_status(how, sizeof(how), st);
		note("tiocsti child %s", how);
		return finish(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS));
	}
	if (res.ret == -2)
		return error_out("%s", res.msg + 6);
	note("%s", res.msg);
	return finish(res.ret != 0);
}

/* procs MAX PID [COMM]: at most MAX processes are visible, and PID (the test
 * runner on the host) is not one of them (when COMM is given, a process
 * with that pid counts only if its comm matches). */
int p_procs(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: procs MAX PID [COMM]");
	long max = parse_long(argv[0], 1, 1 << 22, "max");
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += isdigit((unsigned char)e->d_name[0]) != 0;
	closedir(d);
	note("%d process(es) visible (max %ld)", n, max);
	bool leaked = n > max;
	char path[64], comm[64] = "";
	snprintf(path, sizeof(path), "/proc/%s/comm", argv[1]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t k = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[k > 0 ? k : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		if (argc < 3 || strcmp(comm, argv[2]) == 0) {
			note("pid %s visible (%s)", argv[1], comm);
			leaked = true;
		} else {
			note("pid %s exists but is '%s', not the runner", argv[1], comm);
		}
	} else {
		note("pid %s: %s", argv[1], en(errno));
	}
	return finish(leaked);
}
