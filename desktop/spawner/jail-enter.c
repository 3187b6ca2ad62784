/* Running one more program inside a live jail: the `exec` action runs in the
 * session's own jail, beside its desktop, so files it writes are the ones the
 * desktop sees.
 *
 * A supervisor process joins the jail's cgroup and namespaces, becomes the
 * jail's user and takes the jail's confinement (rlimits, no capabilities,
 * the same seccomp filter), then forks the program into the jail's pid
 * namespace. The supervisor exits with the program's status. SIGTERM to the
 * supervisor kills the program's whole process group (the exec's wall clock);
 * a program that escaped its group with setsid lives until the session ends,
 * like anything else started in the desktop.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/landlock.h>

#include "desktop/spawner/cgroup-priv.h"
#include "desktop/spawner/jail-priv.h"
#include "desktop/spawner/seccomp-priv.h"

/* The namespaces joined, user first: joining it grants the capabilities
 * needed to join the others, which it owns. pid last: it only applies to
 * children. */
static const struct {
	const char *name;
	int type;
} namespaces[] = {
	{"user", CLONE_NEWUSER}, {"mnt", CLONE_NEWNS},       {"net", CLONE_NEWNET},
	{"ipc", CLONE_NEWIPC},   {"uts", CLONE_NEWUTS},      {"cgroup", CLONE_NEWCGROUP},
	{"pid", CLONE_NEWPID},
};
#define N_NS (sizeof(namespaces) / sizeof(namespaces[0]))

__attribute__((noreturn)) static void report(struct dg_jail_child *c, const struct dg_err *err)
{
	struct dg_jail_report rep;
	memset(&rep, 0, sizeof(rep));
	rep.err = EPERM;
	rep.exit_code = DG_JAIL_EXIT_SETUP;
	snprintf(rep.msg, sizeof(rep.msg), "%s", err->msg);
	ssize_t k = write(c->report_fd, &rep, sizeof(rep));
	(void)k;
	_exit(DG_JAIL_EXIT_SETUP);
}

static int join(const struct dg_jail *j, struct dg_err *err)
{
	int fds[N_NS];
	for (size_t i = 0; i < N_NS; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)j->pid, namespaces[i].name);
		fds[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0)
			return dg_err_set(err, -errno, "jail enter: open %s: %s", path, strerror(errno));
	}
	int r = 0;
	for (size_t i = 0; i < N_NS && r == 0; i++) {
		if (setns(fds[i], namespaces[i].type) != 0)
			r = dg_err_set(err, -errno, "jail enter: setns %s: %s", namespaces[i].name,
				       strerror(errno));
	}
	for (size_t i = 0; i < N_NS; i++)
		close(fds[i]);
	/* setns(mnt) leaves the cwd in the old tree. */
	if (r == 0 && chdir("/") != 0)
		r = dg_err_set(err, -errno, "jail enter: chdir /: %s", strerror(errno));
	return r;
}

/* Supervisor: waits for the program; SIGTERM (or its parent's death, which
 * arrives as SIGTERM) kills the program's process group first. */
__attribute__((noreturn)) static void supervise(pid_t prog)
{
	syscall(SYS_close_range, 0, ~0u, 0);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	for (;;) {
		int st;
		pid_t p;
		while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
			if (p == prog)
				_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
		}
		siginfo_t si;
		if (sigwaitinfo(&set, &si) == SIGTERM) {
			kill(-prog, SIGKILL);
			kill(prog, SIGKILL);
		}
	}
}

/* ---- the desktop, out of exec's reach --------------------------------------
 *
 * A program run by exec shares the jail's files and network with the
 * desktop, not the desktop itself (unless limits.exec_desktop): it must not
 * drive the X server or the browser around the action rules. What reaches
 * them, and what closes each door:
 *  - the X server's path socket /tmp/.X11-unix/X0: hidden in a mount view of
 *    exec's own (an empty read-only tmpfs over the directory);
 *  - its abstract socket @/tmp/.X11-unix/X0: Xvnc does not listen there
 *    (-nolisten local), and Landlock's abstract-socket scope refuses
 *    connecting to one made outside exec's domain where the kernel has it;
 *  - the browser's profile, cache and singleton socket (the user data
 *    dir, ~/.cache/chromium, its directories in /tmp and /dev/shm): hidden
 *    like the X directory;
 *  - the processes themselves (ptrace, /proc/PID/fd, mem, environ: the
 *    DevTools pipe is Chromium's fds 3 and 4): a Landlock domain of its own;
 *    signals: Landlock's signal scope where the kernel has it.
 * Xvnc's RFB is a socketpair to the worker: nothing in the jail reaches it. */

/* An empty, read-only tmpfs over path when it is a directory (missing: a
 * desktop-less jail, nothing to hide). */
static int hide_dir(const char *path, struct dg_err *err)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : dg_err_set(err, -errno, "jail enter: %s: %s", path,
							  strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (mount("deskgate-hidden", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=4k,nr_inodes=1,mode=000") != 0)
		return dg_err_set(err, -errno, "jail enter: hiding %s: %s", path, strerror(errno));
	return 0;
}

/* Hides every directory of dir whose name starts with prefix, or with a
 * dot and prefix. */
static int hide_matching(const char *dir, const char *prefix, struct dg_err *err)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : dg_err_set(err, -errno, "jail enter: %s: %s", dir,
							  strerror(errno));
	int r = 0, n = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		const char *name = e->d_name + (e->d_name[0] == '.');
		if (strncmp(name, prefix, strlen(prefix)) != 0)
			continue;
		if (++n > DG_JAIL_HIDE_MAX) {
			r = dg_err_set(err, -E2BIG, "jail enter: more than %d %s%s* in %s to hide",
				       DG_JAIL_HIDE_MAX, dir, prefix, dir);
			break;
		}
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) < (int)sizeof(path))
			r = hide_dir(path, err);
	}
	closedir(d);
	return r;
}

/* The desktop's own files: hidden from exec here, refused to uploads by
 * the spawner (upload.c, through dg_desktop_hidden_prefix). */
const char *const dg_desktop_hidden_dirs[] = {
	DG_DESKTOP_X11_DIR, DG_DESKTOP_BROWSER_DIR, DG_DESKTOP_BROWSER_CACHE_DIR, NULL};
const char *const dg_desktop_browser_tmp_parents[] = {"/tmp", "/dev/shm", NULL};

/* The length of dir when path is dir or below it, else 0. */
static size_t within(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/') ? n : 0;
}

size_t dg_desktop_hidden_prefix(const char *path)
{
	for (int i = 0; dg_desktop_hidden_dirs[i]; i++) {
		size_t n = within(path, dg_desktop_hidden_dirs[i]);
		if (n)
			return n;
	}
	static const char prefix[] = DG_DESKTOP_BROWSER_TMP_PREFIX;
	for (int i = 0; dg_desktop_browser_tmp_parents[i]; i++) {
		size_t n = within(path, dg_desktop_browser_tmp_parents[i]);
		if (!n)
			continue;
		/* Every component below the parent. */
		while (path[n] == '/') {
			const char *c = path + n + 1;
			size_t len = strcspn(c, "/");
			const char *name = c + (c[0] == '.');
			if (strncmp(name, prefix, sizeof(prefix) - 1) == 0)
				return (size_t)(c - path) + len;
			n += 1 + len;
		}
	}
	return 0;
}

/* In the supervisor, inside the jail's namespaces with the namespace's
 * capabilities: a mount namespace of exec's own, the desktop hidden in it.
 * The jail's mounts are private, so nothing of this reaches the desktop. */
static int hide_desktop(struct dg_err *err)
{
	if (unshare(CLONE_NEWNS) != 0)
		return dg_err_set(err, -errno, "jail enter: unshare mount namespace: %s",
				  strerror(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return dg_err_set(err, -errno, "jail enter: making mounts private: %s", strerror(errno));
	int r = 0;
	for (int i = 0; r == 0 && dg_desktop_hidden_dirs[i]; i++)
		r = hide_dir(dg_desktop_hidden_dirs[i], err);
	for (int i = 0; r == 0 && dg_desktop_browser_tmp_parents[i]; i++)
		r = hide_matching(dg_desktop_browser_tmp_parents[i], DG_DESKTOP_BROWSER_TMP_PREFIX,
				  err);
	return r;
}

/* Landlock's ABI 6 ruleset attributes (Linux 6.12), which Debian 12's
 * headers predate: scopes confine abstract unix sockets and signals to the
 * domain. */
struct landlock_ruleset_attr_v6 {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
#define DG_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define DG_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#define DG_LANDLOCK_ABI_SCOPES 6

/* A Landlock domain of its own: Landlock lets a process reach another
 * (ptrace access, which /proc/PID/mem, environ and fd need) only when that
 * one is in the same domain or one nested in it. A program run beside the
 * desktop gets a fresh domain, so it cannot reach into the desktop's
 * processes (the same uid, dumpable), as the seccomp filter's refusal of
 * ptrace and process_vm_* means. The ruleset handles only making block
 * devices, which nothing in a jail can do anyway. With scoped, and a kernel
 * of Landlock ABI 6 or later, abstract unix sockets and signals are
 * confined to the domain too (see hide_desktop); an older kernel lacks
 * them, and Xvnc's abstract socket is then closed by -nolisten local alone. */
static int own_domain(bool scoped, struct dg_err *err)
{
	struct landlock_ruleset_attr_v6 a;
	memset(&a, 0, sizeof(a));
	a.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
	size_t size = sizeof(struct landlock_ruleset_attr);
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (scoped && abi >= DG_LANDLOCK_ABI_SCOPES) {
		a.scoped = DG_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | DG_LANDLOCK_SCOPE_SIGNAL;
		size = sizeof(a);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return dg_err_set(err, -errno, "jail enter: no_new_privs: %s", strerror(errno));
	long fd = syscall(SYS_landlock_create_ruleset, &a, size, 0);
	if (fd < 0)
		return dg_err_set(err, -errno, "jail enter: landlock_create_ruleset: %s",
				  strerror(errno));
	long r = syscall(SYS_landlock_restrict_self, (int)fd, 0);
	int e = errno;
	close((int)fd);
	if (r != 0)
		return dg_err_set(err, -e, "jail enter: landlock_restrict_self: %s", strerror(e));
	return 0;
}

__attribute__((noreturn)) static void enter_main(const struct dg_jail *j, struct dg_jail_child *c,
						 pid_t parent)
{
	struct dg_err err = {{0}};
	sigset_t all;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(DG_JAIL_EXIT_SETUP);
	/* The cgroup first, while this process still has the host's rights
	 * (on v1 a single thread moving itself: no RCU grace period). */
	bool desktop = c->spec->limits->exec_desktop != 0;
	if (dg_cgroup_entry_join(j->cgroup, &c->cg_entry, &err) != 0 || join(j, &err) != 0 ||
	    (!desktop && hide_desktop(&err) != 0) || dg_jail_become_user(&err) != 0)
		report(c, &err);
	/* Credentials changed: the death signal must be armed again. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(DG_JAIL_EXIT_SETUP);
	if (prctl(PR_SET_DUMPABLE, 0) != 0 || dg_jail_set_rlimits(c->spec->limits, &err) != 0 ||
	    dg_caps_drop_all(&err) != 0 || own_domain(!desktop, &err) != 0 ||
	    dg_seccomp_install(&err) != 0)
		report(c, &err);
	dg_jail_scrub_environ();
	pid_t p = fork();
	if (p < 0) {
		dg_err_set(&err, -errno, "jail enter: fork: %s", strerror(errno));
		report(c, &err);
	}
	if (p == 0)
		dg_jail_run_prog(c, 0);
	supervise(p);
}

int dg_jail_enter(const struct dg_jail *j, const struct dg_jail_prog *prog,
		  const struct dg_limits *lim, pid_t *pid, struct dg_err *err)
{
	*pid = -1;
	if (j->pid <= 0 || j->reaped || !j->cgroup)
		return dg_err_set(err, -ESRCH, "jail enter: the jail is not running");
	if (!prog->argv || !prog->argv[0] || !prog->argv[0][0])
		return dg_err_set(err, -EINVAL, "jail enter: no command given");
	if (prog->n_pass_fds < 0 || prog->n_pass_fds > DG_JAIL_PASS_FDS_MAX)
		return dg_err_set(err, -EINVAL, "jail enter: %d descriptors to pass", prog->n_pass_fds);
	int r = dg_seccomp_prepare(err);
	if (r)
		return r;
	struct dg_jail_spec spec = {.limits = lim, .progs = prog, .n_progs = 1};
	struct dg_jail_child *c = calloc(1, sizeof(*c));
	if (!c)
		return dg_err_set(err, -ENOMEM, "jail enter: out of memory");
	dg_cgroup_entry_reset(&c->cg_entry);
	int rep[2] = {-1, -1};
	if ((r = dg_jail_env_build(prog, &c->env[0], err)))
		goto out;
	if (pipe2(rep, O_CLOEXEC) != 0) {
		r = dg_err_set(err, -errno, "jail enter: pipe: %s", strerror(errno));
		goto out;
	}
	c->spec = &spec;
	c->report_fd = rep[1];
	if ((r = dg_cgroup_entry_open(j->cgroup, &c->cg_entry, err)))
		goto out;
	pid_t parent = getpid();
	pid_t p = fork();
	if (p < 0) {
		r = dg_err_set(err, -errno, "jail enter: fork: %s", strerror(errno));
		goto out;
	}
	if (p == 0) {
		close(rep[0]);
		enter_main(j, c, parent);
	}
	dg_cgroup_entry_close(&c->cg_entry);
	close(rep[1]);
	rep[1] = -1;
	/* EOF: the program was executed; a record: it could not be. */
	struct dg_jail_report report;
	ssize_t k;
	do
		k = read(rep[0], &report, sizeof(report));
	while (k < 0 && errno == EINTR);
	if (k == (ssize_t)sizeof(report)) {
		report.msg[sizeof(report.msg) - 1] = '\0';
		r = dg_err_set(err, -(report.err ? report.err : EIO), "%s", report.msg);
		/* The reporter exits right after the report: the supervisor itself,
		 * or the program, which the supervisor then reaps (SIGTERM makes sure
		 * it does not wait for anything else). SIGKILL would orphan an
		 * unreaped program, which lives in the jail's pid namespace but is
		 * reparented outside it, to the host's init: the jail's init could
		 * then not finish dying until that init reaped it. */
		kill(p, SIGTERM);
		waitpid(p, NULL, 0);
		goto out;
	}
	*pid = p;
	r = 0;
out:
	if (rep[0] >= 0)
		close(rep[0]);
	if (rep[1] >= 0)
		close(rep[1]);
	dg_cgroup_entry_close(&c->cg_entry);
	free(c);
	return r;
}
