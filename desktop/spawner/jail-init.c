/* The jail's init: PID 1 of the jail's pid namespace.
 *
 * It becomes the jail's user, builds the filesystem, confines itself (caps,
 * seccomp), starts the command in a new session and then only reaps: it
 * forwards termination signals to the command, and exits with the command's
 * status when the command exits. Its exit tears down the pid namespace, so
 * nothing the command daemonized survives it. It dies with its parent
 * (PR_SET_PDEATHSIG) and is not dumpable, so the command cannot read the
 * memory or environment it inherited from the privileged parent.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/spawner/jail-priv.h"
#include "desktop/spawner/seccomp-priv.h"

extern char **environ;

/* Signals init passes on to the command's process group. */
static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

__attribute__((noreturn)) static void report_and_exit(struct dg_jail_child *c, int code, int e,
						      const struct dg_err *err)
{
	struct dg_jail_report rep;
	memset(&rep, 0, sizeof(rep));
	rep.err = e;
	rep.exit_code = code;
	snprintf(rep.msg, sizeof(rep.msg), "%s", err->msg);
	/* One write of a small struct into a pipe is atomic. */
	ssize_t k = write(c->report_fd, &rep, sizeof(rep));
	(void)k;
	_exit(code);
}

int dg_jail_become_user(struct dg_err *err)
{
	/* Host root's supplementary groups would still grant access through
	 * kgid 0; drop them while the namespace still allows setgroups. */
	if (setgroups(0, NULL) != 0)
		return dg_err_set(err, -errno, "jail: setgroups: %s", strerror(errno));
	if (setresgid(DG_JAIL_INNER_GID, DG_JAIL_INNER_GID, DG_JAIL_INNER_GID) != 0)
		return dg_err_set(err, -errno, "jail: setresgid %u: %s", DG_JAIL_INNER_GID,
				  strerror(errno));
	/* Inner uid 0 is unmapped, so leaving host uid 0 does not clear the
	 * namespace capabilities still needed to build the filesystem. */
	if (setresuid(DG_JAIL_INNER_UID, DG_JAIL_INNER_UID, DG_JAIL_INNER_UID) != 0)
		return dg_err_set(err, -errno, "jail: setresuid %u: %s", DG_JAIL_INNER_UID,
				  strerror(errno));
	return 0;
}

static int set_limit(int res, rlim_t v, const char *name, struct dg_err *err)
{
	struct rlimit rl = {v, v};
	if (setrlimit(res, &rl) != 0)
		return dg_err_set(err, -errno, "jail: setrlimit %s: %s", name, strerror(errno));
	return 0;
}

/* Second line behind the cgroup: no core dumps, no file larger than the
 * scratch space, bounded descriptors and processes for the jail's uid;
 * and the jail's priority, below the control plane's (DG_JAIL_NICE). */
int dg_jail_set_rlimits(const struct dg_limits *lim, struct dg_err *err)
{
	int r;
	/* Only ever lowered: a jail started from a process already below
	 * DG_JAIL_NICE (`nice -n 19 deskgate exec`) stays there, since going
	 * back up would need CAP_SYS_NICE in the host's namespace. */
	errno = 0;
	int nice_now = getpriority(PRIO_PROCESS, 0);
	if (nice_now == -1 && errno)
		return dg_err_set(err, -errno, "jail: getpriority: %s", strerror(errno));
	if (nice_now < DG_JAIL_NICE && setpriority(PRIO_PROCESS, 0, DG_JAIL_NICE) != 0)
		return dg_err_set(err, -errno, "jail: setpriority %d: %s", DG_JAIL_NICE,
				  strerror(errno));
	if ((r = set_limit(RLIMIT_NICE, 0, "nice", err)) ||
	    (r = set_limit(RLIMIT_CORE, 0, "core", err)) ||
	    (r = set_limit(RLIMIT_FSIZE, (rlim_t)lim->scratch_mb * 1024 * 1024, "fsize", err)) ||
	    (r = set_limit(RLIMIT_NOFILE, DG_JAIL_NOFILE, "nofile", err)) ||
	    (r = set_limit(RLIMIT_NPROC, lim->pids, "nproc", err)))
		return r;
	return 0;
}

/* The parent's environment strings sit in init's memory (it is a clone, not
 * an exec); wipe them so /proc/1/environ shows nothing. */
void dg_jail_scrub_environ(void)
{
	for (char **e = environ; e && *e; e++)
		memset(*e, 0, strlen(*e));
	environ = NULL;
}

static int move_fd(int from, int to)
{
	if (from == to)
		return fcntl(from, F_SETFD, 0);
	return dup2(from, to) < 0 ? -1 : 0;
}

/* Places the caller's descriptors at 0, 1, 2, 3, ..., `extra` (when >= 0)
 * at DG_JAIL_READY_FD, and closes every other one but `keep` (the
 * close-on-exec report pipe, which the caller placed above all of these).
 * Sources are first moved above every target so a later dup2 cannot
 * clobber an earlier source. */
static int arrange_fds(const struct dg_jail_prog *s, int extra, int keep)
{
	int src[3 + DG_JAIL_PASS_FDS_MAX + 1], dst[3 + DG_JAIL_PASS_FDS_MAX + 1];
	int n = 0;
	int fixed[3] = {s->stdin_fd, s->stdout_fd, s->stderr_fd};
	for (int i = 0; i < 3; i++, n++) {
		src[n] = fixed[i];
		dst[n] = i;
	}
	for (int i = 0; i < s->n_pass_fds; i++, n++) {
		src[n] = s->pass_fds[i];
		dst[n] = 3 + i;
	}
	if (extra >= 0) {
		src[n] = extra;
		dst[n++] = DG_JAIL_READY_FD;
	}
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int from = src[i] >= 0 ? src[i] : devnull;
		src[i] = fcntl(from, F_DUPFD_CLOEXEC, DG_JAIL_READY_FD + 1);
		if (src[i] < 0)
			return -1;
	}
	for (int i = 0; i < n; i++) {
		if (move_fd(src[i], dst[i]) != 0)
			return -1;
	}
	/* Close the gaps and everything above, but keep the targets and `keep`. */
	bool used[DG_JAIL_READY_FD + 1] = {false};
	for (int i = 0; i < n; i++)
		used[dst[i]] = true;
	for (int fd = 0; fd <= DG_JAIL_READY_FD; fd++) {
		if (!used[fd] && fd != keep)
			close(fd);
	}
	if (keep > DG_JAIL_READY_FD + 1 &&
	    syscall(SYS_close_range, DG_JAIL_READY_FD + 1, keep - 1, 0) != 0)
		return -1;
	return syscall(SYS_close_range, keep + 1, ~0u, 0) == 0 ? 0 : -1;
}

/* Looks the command up in the jail's PATH when it has no slash, like a shell
 * would, without a shell. */
static int exec_command(const char *const *argv, char *const *envp)
{
	const char *name = argv[0];
	if (strchr(name, '/')) {
		execve(name, (char *const *)argv, envp);
		return errno;
	}
	static const char *const path[] = {"/usr/local/bin", "/usr/bin", "/bin"};
	int saved = ENOENT;
	for (size_t i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		char full[PATH_MAX];
		int k = snprintf(full, sizeof(full), "%s/%s", path[i], name);
		if (k < 0 || (size_t)k >= sizeof(full))
			return ENAMETOOLONG;
		execve(full, (char *const *)argv, envp);
		if (errno != ENOENT && errno != ENOTDIR)
			saved = errno;
	}
	return saved;
}

/* Runs in a child of init: becomes program i of the spec. */
void dg_jail_run_prog(struct dg_jail_child *c, int i)
{
	struct dg_err err = {{0}};
	const struct dg_jail_prog *s = &c->spec->progs[i];
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Ignored signals survive exec; programs start with defaults. */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	/* A new session has no controlling terminal: TIOCSTI finds nothing to
	 * inject into even before seccomp refuses it. */
	if (setsid() < 0) {
		dg_err_set(&err, -errno, "jail: setsid: %s", strerror(errno));
		report_and_exit(c, DG_JAIL_EXIT_SETUP, errno, &err);
	}
	const char *cwd = s->cwd ? s->cwd : DG_JAIL_HOME;
	if (chdir(cwd) != 0) {
		dg_err_set(&err, -errno, "jail: chdir %s: %s", cwd, strerror(errno));
		report_and_exit(c, DG_JAIL_EXIT_SETUP, errno, &err);
	}
	/* The report pipe must survive the shuffle: move it above the targets. */
	int rep = fcntl(c->report_fd, F_DUPFD_CLOEXEC, DG_JAIL_READY_FD + 1);
	if (rep >= 0)
		c->report_fd = rep;
	int extra = i == 0 && c->spec->wait_ready ? c->ready_fd : -1;
	if (rep < 0 || arrange_fds(s, extra, rep) != 0) {
		dg_err_set(&err, -errno, "jail: arranging descriptors: %s", strerror(errno));
		report_and_exit(c, DG_JAIL_EXIT_SETUP, errno, &err);
	}
	int e = exec_command(s->argv, c->env[i].vars);
	dg_err_set(&err, -e, "cannot run \"%s\": %s", s->argv[0], strerror(e));
	report_and_exit(c, e == ENOENT ? DG_JAIL_EXIT_NOTFOUND : DG_JAIL_EXIT_NOEXEC, e, &err);
}

static int wait_for_go(struct dg_jail_child *c)
{
	char b;
	ssize_t k;
	do
		k = read(c->go_fd, &b, 1);
	while (k < 0 && errno == EINTR);
	return k == 1 ? 0 : -1;
}

/* The kernel clears the parent-death signal when credentials change, so it
 * is set again as the jail's user. The parent keeps the go pipe open for the
 * jail's life: a hang-up now means it died before the signal was armed. */
static int arm_parent_death(struct dg_jail_child *c)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		return -1;
	struct pollfd p = {c->go_fd, POLLIN, 0};
	if (poll(&p, 1, 0) != 0)
		return -1;
	return 0;
}

static int confine_self(struct dg_jail_child *c, struct dg_err *err)
{
	int r;
	if (prctl(PR_SET_DUMPABLE, 0) != 0)
		return dg_err_set(err, -errno, "jail: PR_SET_DUMPABLE: %s", strerror(errno));
	if (unshare(CLONE_NEWCGROUP) != 0)
		return dg_err_set(err, -errno, "jail: unshare cgroup namespace: %s", strerror(errno));
	if (sethostname(DG_JAIL_HOSTNAME, strlen(DG_JAIL_HOSTNAME)) != 0 ||
	    setdomainname("", 0) != 0)
		return dg_err_set(err, -errno, "jail: sethostname: %s", strerror(errno));
	if ((r = dg_jail_mount_root(c->spec, err)))
		return r;
	if ((r = dg_jail_set_rlimits(c->spec->limits, err)))
		return r;
	if ((r = dg_caps_drop_all(err)))
		return r;
	return dg_seccomp_install(err);
}

/* Reaps children until the main program exits; returns its exit code
 * (128 + signal when it was killed). */
static int reap_until(pid_t main_pid)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaddset(&set, forwarded[i]);
	for (;;) {
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p == main_pid)
				return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig > 0 && sig != SIGCHLD)
			kill(-main_pid, sig);
	}
}

/* Whether a unix stream socket at path accepts a connection now (closed
 * again at once: the server reads an empty client and drops it). */
static bool socket_listens(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(a.sun_path))
		return false;
	strcpy(a.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return false;
	bool ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(s);
	return ok;
}

/* Waits until the main program writes a line to its ready descriptor (the X
 * server's -displayfd) or, with `listening` (dg_jail_spec.ready_socket),
 * until that socket accepts a connection, whichever comes first: 1 for the
 * socket, 0 for the line. Fails when the descriptor closes without a line
 * (it exited) or the timeout passes. */
static int wait_ready(int fd, const char *listening, struct dg_err *err)
{
	char buf[32];
	size_t got = 0;
	long long t0 = dg_now_ms();
	for (;;) {
		long ms = (long)(dg_now_ms() - t0);
		if (ms >= DG_JAIL_READY_TIMEOUT_MS)
			return dg_err_set(err, -ETIMEDOUT,
					  "jail: the main program was not ready after %d ms",
					  DG_JAIL_READY_TIMEOUT_MS);
		if (listening && socket_listens(listening))
			return 1;
		struct pollfd p = {fd, POLLIN, 0};
		int wait = listening ? DG_JAIL_READY_SOCKET_POLL_MS : (int)(DG_JAIL_READY_TIMEOUT_MS - ms);
		if (poll(&p, 1, wait) <= 0)
			continue;
		ssize_t k = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return dg_err_set(err, -ECHILD, "jail: the main program ended before it was ready");
		got += (size_t)k;
		if (memchr(buf, '\n', got) || got == sizeof(buf) - 1)
			return 0;
	}
}

static pid_t start_prog(struct dg_jail_child *c, int i, struct dg_err *err)
{
	pid_t p = fork();
	if (p < 0)
		return dg_err_set(err, -errno, "jail: fork: %s", strerror(errno));
	if (p == 0)
		dg_jail_run_prog(c, i);
	return p;
}

/* Init is a copy of the host process that started the jail: its command
 * line and environment (a gateway's config and recordings paths, a policy
 * file's path, --test-resolve flags) would be /proc/1/cmdline inside the
 * jail, readable by everything there. They are overwritten in this copy
 * (the parent's memory is its own) with DG_JAIL_INIT_NAME: the kernel
 * reads /proc/PID/cmdline and environ from these bytes, the stack's top,
 * between the addresses /proc/self/stat gives (fields 48 to 51). */
static void scrub_cmdline(void)
{
	char buf[2048];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	unsigned long v[4];
	int field = 2, got = 0;
	for (char *tok = p ? strtok(p + 1, " ") : NULL; tok && got < 4; tok = strtok(NULL, " ")) {
		if (++field >= 48 && field <= 51)
			v[got++] = strtoul(tok, NULL, 10);
	}
	if (got != 4 || v[1] <= v[0] || v[3] < v[2])
		return;
	memset((void *)v[2], 0, v[3] - v[2]);
	memset((void *)v[0], 0, v[1] - v[0]);
	if (v[1] - v[0] > sizeof(DG_JAIL_INIT_NAME))
		memcpy((void *)v[0], DG_JAIL_INIT_NAME, sizeof(DG_JAIL_INIT_NAME));
	prctl(PR_SET_NAME, DG_JAIL_INIT_NAME);
}

void dg_jail_init_main(struct dg_jail_child *c)
{
	struct dg_err err = {{0}};
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	scrub_cmdline();
	close(c->parent_fds[0]);
	close(c->parent_fds[1]);
	if (wait_for_go(c) != 0)
		_exit(DG_JAIL_EXIT_SETUP);
	/* Into the cgroup before anything else: confine_self's cgroup
	 * namespace and every allocation from here on belong to the jail. */
	int r = dg_cgroup_entry_join(c->cgroup, &c->cg_entry, &err);
	if (r != 0)
		report_and_exit(c, DG_JAIL_EXIT_SETUP, -r, &err);
	if (dg_jail_become_user(&err) != 0)
		report_and_exit(c, DG_JAIL_EXIT_SETUP, EPERM, &err);
	if (arm_parent_death(c) != 0)
		_exit(DG_JAIL_EXIT_SETUP);
	if (confine_self(c, &err) != 0)
		report_and_exit(c, DG_JAIL_EXIT_SETUP, EPERM, &err);
	dg_jail_scrub_environ();

	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	int ready[2] = {-1, -1};
	if (c->spec->wait_ready && pipe2(ready, O_CLOEXEC) != 0) {
		dg_err_set(&err, -errno, "jail: pipe: %s", strerror(errno));
		report_and_exit(c, DG_JAIL_EXIT_SETUP, errno, &err);
	}
	c->ready_fd = ready[1];
	pid_t main_pid = start_prog(c, 0, &err);
	if (main_pid < 0)
		report_and_exit(c, DG_JAIL_EXIT_SETUP, -main_pid, &err);
	int early = 0;
	if (c->spec->wait_ready) {
		close(ready[1]);
		if ((early = wait_ready(ready[0], c->spec->ready_socket, &err)) < 0)
			report_and_exit(c, DG_JAIL_EXIT_SETUP, ECHILD, &err);
	}
	for (int i = 1; i < c->spec->n_progs; i++) {
		if (start_prog(c, i, &err) < 0)
			report_and_exit(c, DG_JAIL_EXIT_SETUP, EAGAIN, &err);
	}
	/* Started on the socket: the line is still awaited, so that the start
	 * reports a server that never got ready, and its write has a reader. */
	if (early == 1 && wait_ready(ready[0], NULL, &err) != 0)
		report_and_exit(c, DG_JAIL_EXIT_SETUP, ECHILD, &err);
	/* Init needs no descriptor: the programs hold what they were given. */
	syscall(SYS_close_range, 0, ~0u, 0);
	_exit(reap_until(main_pid));
}
