/* deskgate-probe, files and credentials: listing, reading and writing paths, device
 * nodes, mounts, leaked descriptors, filling a disk; the environment,
 * credential files, keyrings. */

#include "cli/probe-priv.h"

/* --------------------------------------------------------- filesystem */

/* list-dir PATH: leaked when PATH can be listed and shows any entry. */
int p_list_dir(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: list-dir PATH");
	DIR *d = opendir(argv[0]);
	if (!d) {
		note("opendir %s: %s", argv[0], en(errno));
		return finish(false);
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	note("%s lists %d entr%s", argv[0], n, n == 1 ? "y" : "ies");
	return finish(n > 0);
}

/* read-file PATH: leaked when PATH opens for reading (bytes are counted,
 * never shown). */
int p_read_file(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: read-file PATH");
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		note("open %s: %s", argv[0], en(errno));
		return finish(false);
	}
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	note("read %zd byte(s) of %s", n, argv[0]);
	return finish(true);
}

/* write-dir DIR: leaked when a new file can be created in DIR (it gets a
 * unique name and is removed at once). */
int p_write_dir(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: write-dir DIR");
	char name[128], path[4200];
	unique_name(name, sizeof(name), ".dg-probe-");
	snprintf(path, sizeof(path), "%s/%s", argv[0], name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		note("create %s: %s", path, en(errno));
		return finish(false);
	}
	close(fd);
	unlink(path);
	note("created (and removed) %s", path);
	return finish(true);
}

/* Kernel files that exist only when the kernel was built with something,
 * for the evidence of an ENOENT on the host. */
static const char *const kernel_files[][2] = {
	{"/proc/sysrq-trigger", "magic SysRq (/proc/sysrq-trigger)"},
};

/* open-write PATH...: leaked when any PATH opens for writing. Nothing is
 * ever written: opening /proc/sysrq-trigger or core_pattern is harmless.
 * Each open is judged (CALL_PERM, key: the path), so a file the host's
 * kernel does not have either is contained by the kernel, not by the
 * jail. */
int p_open_write(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: open-write PATH...");
	for (int i = 0; i < argc; i++) {
		const char *lacks = NULL;
		for (size_t k = 0; k < sizeof(kernel_files) / sizeof(kernel_files[0]); k++)
			if (strcmp(argv[i], kernel_files[k][0]) == 0)
				lacks = kernel_files[k][1];
		/* The key is the path, or its position when the path is no key. */
		char key[DG_PROBE_KEY_MAX], what[4200];
		if (charset_ok(argv[i], strlen(argv[i]), sizeof(key), "_./-"))
			fmt(key, sizeof(key), "%s", argv[i]);
		else
			fmt(key, sizeof(key), "path%d", i);
		fmt(what, sizeof(what), "open %s for writing", argv[i]);
		errno = 0;
		int fd = open(argv[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
		int e = errno;
		if (fd >= 0)
			close(fd);
		judge_ret(CALL_PERM, key, what, lacks, fd, e);
	}
	if (calls_worst == V_LEAKED)
		note("(nothing written)");
	return finish_calls();
}

/* sys-write: no /sys attribute opens for writing (none is written). */
int p_sys_write(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const char *const files[] = {
		"/sys/kernel/mm/transparent_hugepage/enabled",
		"/sys/kernel/mm/ksm/run",
		"/sys/power/state",
		"/sys/class/net/lo/mtu",
		"/sys/kernel/profiling",
		"/sys/kernel/uevent_helper",
		"/sys/module/printk/parameters/time",
		"/sys/fs/cgroup/pids/cgroup.procs",
		"/sys/fs/cgroup/cgroup.procs",
	};
	DIR *d = opendir("/sys");
	if (d) {
		int n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		note("/sys lists %d entries", n);
	} else {
		note("/sys: %s", en(errno));
	}
	bool leaked = false;
	int missing = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int fd = open(files[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			close(fd);
			note("%s opened for writing (not written)", files[i]);
			leaked = true;
		} else if (errno == ENOENT) {
			missing++;
		} else {
			note("%s: %s", files[i], en(errno));
		}
	}
	note("%d candidate file(s) absent", missing);
	return finish(leaked);
}

/* mknod DIR: leaked when a character device node (1,3: /dev/null) can be
 * made in DIR (removed at once). */
int p_mknod(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mknod DIR");
	char name[128], path[4200];
	unique_name(name, sizeof(name), ".dg-node-");
	snprintf(path, sizeof(path), "%s/%s", argv[0], name);
	if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) < 0) {
		note("mknod %s c 1 3: %s", path, en(errno));
		return finish(false);
	}
	unlink(path);
	note("made (and removed) char device %s", path);
	return finish(true);
}

/* Mounting is only ever tried where it cannot touch the host: as an
 * unprivileged user (a jail), or in a mount namespace other than the
 * parent's (the `ns` harness unshares and execs the probe, so the probe's
 * parent, the test, is still in the host's namespace). Returns true when
 * safe; refuses when either namespace cannot be read. */
static bool mount_is_safe(void)
{
	if (geteuid() != 0)
		return true;
	char self[64] = "", parent[64] = "", path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)getppid());
	ssize_t a = readlink("/proc/self/ns/mnt", self, sizeof(self) - 1);
	ssize_t b = readlink(path, parent, sizeof(parent) - 1);
	return a > 0 && b > 0 && strcmp(self, parent) != 0;
}

/* remount: makes "/" and "/usr" read-write (and suid, dev, exec) through a
 * per-mount remount (MS_REMOUNT|MS_BIND with no flags). Leaked when either
 * succeeds. */
int p_remount(int argc, char **argv)
{
	(void)argc, (void)argv;
	if (!mount_is_safe())
		return error_out("root in its parent's mount namespace: run under `dg_probe ns`");
	static const char *const targets[][2] = {{"/", "remount_root"}, {"/usr", "remount_usr"}};
	for (int i = 0; i < 2; i++) {
		char what[64];
		snprintf(what, sizeof(what), "remount %s rw", targets[i][0]);
		errno = 0;
		long r = mount(NULL, targets[i][0], NULL, MS_REMOUNT | MS_BIND, NULL);
		int e = errno;
		if (r != 0 && e == EINVAL)
			/* Not a mount point here (e.g. /usr on the host's root):
			 * says nothing either way. */
			note("%s: EINVAL (not a mount point)", what);
		else
			judge_ret(CALL_SYSCALL, targets[i][1], what, NULL, r, e);
	}
	return finish_calls();
}

/* mount-tmpfs DIR: mounts a tmpfs on a fresh directory under DIR (then
 * unmounts it and removes the directory). Leaked when the mount succeeds. */
int p_mount_tmpfs(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mount-tmpfs DIR");
	if (!mount_is_safe())
		return error_out("root in its parent's mount namespace: run under `dg_probe ns`");
	char path[4200];
	snprintf(path, sizeof(path), "%s/dg-mnt-XXXXXX", argv[0]);
	if (!mkdtemp(path))
		return error_out("mkdtemp %s: %s", path, en(errno));
	errno = 0;
	long r = mount("dg-probe", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k");
	int e = errno;
	if (r == 0)
		umount2(path, MNT_DETACH);
	rmdir(path);
	judge_ret(CALL_SYSCALL, "mount_tmpfs", "mount tmpfs", "tmpfs", r, e);
	return finish_calls();
}

/* leaked-fd: every descriptor above 2 is a leak; a directory one is tried as
 * a way out (openat(fd, "etc/shadow")). Every descriptor number the
 * RLIMIT_NOFILE allows is checked (at most 65536). */
int p_leaked_fd(int argc, char **argv)
{
	(void)argc, (void)argv;
	bool leaked = false;
	struct rlimit rl;
	int top = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		top = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
	else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		top = 65536;
	for (int fd = 3; fd < top; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		leaked = true;
		char link[64], target[256] = "?";
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 1] = '\0';
		struct stat st;
		bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
		note("fd %d open (%s%s)", fd, target, dir ? ", a directory" : "");
		if (dir) {
			int s = openat(fd, "etc/shadow", O_RDONLY | O_CLOEXEC);
			if (s >= 0) {
				char buf[64];
				ssize_t k = read(s, buf, sizeof(buf));
				note("openat(%d, etc/shadow) read %zd byte(s)", fd, k);
				close(s);
			} else {
				note("openat(%d, etc/shadow): %s", fd, en(errno));
			}
		}
	}
	if (!leaked)
		note("no descriptor in 3..%d is open", top - 1);
	return finish(leaked);
}

/* fill CAP_MB DIR...: writes into each DIR in turn until a write fails; the
 * total is bounded at 2*CAP_MB+2 MiB so a control run stays small. Contained
 * when every DIR stopped with ENOSPC, EDQUOT or EFBIG and the total stayed at
 * or below CAP_MB + 1 MiB (tmpfs rounding). Files are removed at the end. */
int p_fill(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: fill CAP_MB DIR...");
	long cap = parse_long(argv[0], 1, 1 << 20, "cap");
	const uint64_t mib = 1 << 20;
	uint64_t limit = (uint64_t)(2 * cap + 2) * mib, total = 0;
	signal(SIGXFSZ, SIG_IGN); /* RLIMIT_FSIZE then shows as EFBIG */
	static char chunk[256 * 1024];
	memset(chunk, 'f', sizeof(chunk));
	char paths[8][4200];
	int nfiles = 0;
	bool all_stopped = true;
	for (int i = 1; i < argc && nfiles < 8; i++) {
		char name[128];
		unique_name(name, sizeof(name), ".dg-fill-");
		snprintf(paths[nfiles], sizeof(paths[0]), "%s/%s", argv[i], name);
		int fd = open(paths[nfiles], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			note("create in %s: %s", argv[i], en(errno));
			continue;
		}
		nfiles++;
		uint64_t here = 0;
		int err = 0;
		while (total < limit) {
			ssize_t k = write(fd, chunk, sizeof(chunk));
			if (k < 0) {
				err = errno;
				break;
			}
			if (k == 0) {
				err = ENOSPC;
				break;
			}
			here += (uint64_t)k;
			total += (uint64_t)k;
		}
		if (err == 0 && fsync(fd) < 0)
			err = errno;
		close(fd);
		if (err)
			note("%s: stopped after %.2f MiB: %s", argv[i], (double)here / mib, en(err));
		else
			note("%s: wrote %.2f MiB without error", argv[i], (double)here / mib);
		if (err != ENOSPC && err != EDQUOT && err != EFBIG)
			all_stopped = false;
	}
	for (int i = 0; i < nfiles; i++)
		unlink(paths[i]);
	if (nfiles == 0)
		return error_out("no directory was writable: %s", evidence);
	note("total %.2f MiB, cap %ld MiB", (double)total / mib, cap);
	return finish(!all_stopped || total > (uint64_t)cap * mib + mib);
}

/* -------------------------------------------------------- credentials */

/* Names a jail's environment may hold: deskgate's allowlist, plus PWD, which
 * the /bin/sh that delivers the probe into the jail exports itself, plus the
 * names given with `env --allow` (a desktop's programs get DISPLAY, exec'd
 * programs the proxy variables: chosen by deskgate, never the host's). */
#define ENV_EXTRA_MAX 16
static const char *env_extra[ENV_EXTRA_MAX];
static int n_env_extra;
/* `env --host NAMES`: the names of the host's own environment. With them, a
 * name outside the allowlist is not judged here: a desktop's programs set
 * variables of their own (Chromium gives its crash handler
 * DBUS_SESSION_BUS_ADDRESS, and rewrites its environ block with its command
 * line), which may share a name with the host's. Each entry with a host
 * name is printed instead, as "HOSTVAR <fnv1a64 of its value> <where>
 * <name>", for the caller to compare with the host's value (which never
 * enters the jail, not even as a hash); other foreign names are counted.
 * Without --host, any name outside the allowlist leaks. The markers (secret
 * values the caller planted) leak either way. */
#define ENV_HOST_MAX 1024
static const char *env_host[ENV_HOST_MAX];
static int n_env_host;
static int env_inside;    /* names outside the allowlist that are not the host's */
static int env_hostnamed; /* entries named like one of the host's, printed as HOSTVAR */

/* FNV-1a, 64 bits: only for comparing values on the host side. */
static uint64_t fnv1a64(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static bool env_is_host_name(const char *entry, size_t l)
{
	for (int i = 0; i < n_env_host; i++)
		if (strlen(env_host[i]) == l && strncmp(entry, env_host[i], l) == 0)
			return true;
	return false;
}

/* Splits a comma-separated list (modified in place) into out. */
static int split_names(char *list, const char **out, int max)
{
	int n = 0;
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return n;
}

static bool env_allowed(const char *entry)
{
	static const char *const allow[] = {"PATH", "HOME", "USER",  "LOGNAME", "SHELL",
					    "LANG", "TERM", "TZ",    "TMPDIR",  "PWD"};
	size_t l = strcspn(entry, "=");
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		if (strlen(allow[i]) == l && strncmp(entry, allow[i], l) == 0)
			return true;
	for (int i = 0; i < n_env_extra; i++)
		if (strlen(env_extra[i]) == l && strncmp(entry, env_extra[i], l) == 0)
			return true;
	return false;
}

/* Checks one environment block (NUL-separated entries). Returns true when it
 * shows a name outside the allowlist (with --host: one of the host's) or
 * any marker; notes the first few names (never values). */
static bool env_block_leaks(const char *where, const char *block, size_t len, int nmark,
			    char **marks, bool quiet)
{
	int bad = 0, marked = 0;
	char names[256] = "";
	size_t off = 0;
	while (off < len) {
		const char *e = block + off;
		size_t l = strnlen(e, len - off);
		size_t kl0 = strcspn(e, "=");
		if (l > 0 && !env_allowed(e) && n_env_host > 0 && !env_is_host_name(e, kl0)) {
			env_inside++;
		} else if (l > 0 && !env_allowed(e) && n_env_host > 0) {
			const char *val = kl0 < l ? e + kl0 + 1 : e + l;
			printf("HOSTVAR %016llx %s %.*s\n",
			       (unsigned long long)fnv1a64(val, (size_t)(e + l - val)), where,
			       (int)kl0, e);
			env_hostnamed++;
		} else if (l > 0 && !env_allowed(e)) {
			size_t nl = strlen(names), kl = strcspn(e, "=");
			if (bad++ < 6 && nl + kl + 2 < sizeof(names))
				fmt(names + nl, sizeof(names) - nl, "%s%.*s", nl ? "," : "", (int)kl,
				    e);
		}
		for (int m = 0; m < nmark; m++)
			if (marks[m][0] && memmem(e, l, marks[m], strlen(marks[m])))
				marked++;
		off += l + 1;
	}
	if (marked)
		note("%s holds %d entr%s with a secret marker", where, marked,
		     marked == 1 ? "y" : "ies");
	if (bad && !quiet)
		note("%s has %d name(s) outside the allowlist: %s%s", where, bad, names,
		     bad > 6 ? ",..." : "");
	return bad > 0 || marked > 0;
}

/* env [--allow NAME,...] [--host NAME,...] [MARKER...]: the process
 * environment and every readable /proc/PID/environ (PID 1 included) hold
 * only allowlisted names (with --host: see env_host) and none of the secret
 * values (markers) the caller put into deskgate's environment. */
int p_env(int argc, char **argv)
{
	bool leaked = false;
	while (argc >= 2 && (!strcmp(argv[0], "--allow") || !strcmp(argv[0], "--host"))) {
		char *list = strdup(argv[1]);
		if (!list)
			return error_out("out of memory");
		if (!strcmp(argv[0], "--allow"))
			n_env_extra += split_names(list, env_extra + n_env_extra,
						   ENV_EXTRA_MAX - n_env_extra);
		else
			n_env_host += split_names(list, env_host + n_env_host,
						  ENV_HOST_MAX - n_env_host);
		argc -= 2;
		argv += 2;
	}
	char *block = malloc(1 << 20);
	if (!block)
		return error_out("out of memory");
	size_t len = 0;
	for (char **e = environ; *e; e++) {
		size_t l = strlen(*e);
		if (len + l + 1 > (1 << 20))
			break;
		memcpy(block + len, *e, l + 1);
		len += l + 1;
	}
	leaked |= env_block_leaks("environ", block, len, argc, argv, false);
	int leaking = 0; /* /proc sources with names outside the allowlist */
	DIR *d = opendir("/proc");
	int readable = 0, unreadable = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]) && strcmp(de->d_name, "self"))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			unreadable++;
			continue;
		}
		len = 0;
		ssize_t k = 0;
		while (len < (1 << 20) && (k = read(fd, block + len, (1 << 20) - len)) > 0)
			len += (size_t)k;
		close(fd);
		if (k < 0 && len == 0) {
			unreadable++;
			continue;
		}
		readable++;
		bool l = env_block_leaks(path, block, len, argc, argv, leaking >= 3);
		leaking += l;
		leaked |= l;
	}
	if (d)
		closedir(d);
	note("%d /proc/*/environ readable (%d showing %s), %d not", readable, leaking,
	     n_env_host ? "a marker" : "names outside the allowlist", unreadable);
	if (n_env_host)
		note("%d of the host's name(s) looked for: %d entr%s named like one (HOSTVAR, for "
		     "the caller to compare), %d other name(s) set inside the session",
		     n_env_host, env_hostnamed, env_hostnamed == 1 ? "y" : "ies", env_inside);
	free(block);
	return finish(leaked);
}

/* cred-files: no credential file or directory is readable: in $HOME, in
 * /root, in each /home/USER, and the container secret paths. */
int p_cred_files(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const char *const rel[] = {".ssh",         ".aws",           ".config/gcloud",
					  ".docker/config.json", ".kube/config", ".netrc",
					  ".git-credentials", ".gnupg",   ".azure"};
	static const char *const abs[] = {"/run/secrets", "/var/run/secrets",
					  "/var/run/secrets/kubernetes.io/serviceaccount/token",
					  "/etc/ssh/ssh_host_ed25519_key",
					  "/etc/ssh/ssh_host_rsa_key"};
	char homes[34][512];
	int nh = 0;
	const char *home = getenv("HOME");
	if (home && *home)
		snprintf(homes[nh++], sizeof(homes[0]), "%s", home);
	if (!home || strcmp(home, "/root"))
		snprintf(homes[nh++], sizeof(homes[0]), "/root");
	DIR *d = opendir("/home");
	struct dirent *e;
	while (d && (e = readdir(d)) && nh < 34) {
		if (e->d_name[0] == '.')
			continue;
		fmt(homes[nh], sizeof(homes[0]), "/home/%s", e->d_name);
		if (!home || strcmp(home, homes[nh]))
			nh++;
	}
	if (d)
		closedir(d);
	bool leaked = false;
	int checked = 0;
	for (int h = 0; h < nh; h++)
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			char p[1100];
			fmt(p, sizeof(p), "%s/%s", homes[h], rel[i]);
			checked++;
			int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			if (fd >= 0) {
				close(fd);
				note("%s readable", p);
				leaked = true;
			} else if (errno != ENOENT && errno != ENOTDIR) {
				note("%s: %s", p, en(errno));
			}
		}
	for (size_t i = 0; i < sizeof(abs) / sizeof(abs[0]); i++) {
		checked++;
		int fd = open(abs[i], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0) {
			close(fd);
			note("%s readable", abs[i]);
			leaked = true;
		} else if (errno != ENOENT && errno != ENOTDIR) {
			note("%s: %s", abs[i], en(errno));
		}
	}
	note("%d path(s) checked in %d home(s) and the secret mounts", checked, nh);
	return finish(leaked);
}

/* keyctl: the session and user keyrings cannot be reached. */
int p_keyctl(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	judge_ret(CALL_SYSCALL, "keyctl_session", "keyctl(GET_KEYRING_ID, session)", "keyrings", r,
		  errno);
	errno = 0;
	r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0);
	judge_ret(CALL_SYSCALL, "keyctl_user", "keyctl(GET_KEYRING_ID, user)", "keyrings", r, errno);
	return finish_calls();
}
