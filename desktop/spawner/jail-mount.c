/* The jail's filesystem: a fresh tmpfs root holding read-only binds of the
 * system directories, a curated /etc, one size-capped scratch tmpfs shared by
 * /tmp, the home directory and /dev/shm, a new /proc, a minimal /dev and no
 * /sys. Runs inside the jail's new user and mount namespaces, as the jail's
 * init, before pivot_root; nothing here touches the host's mounts because
 * the namespace is made private first.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "desktop/spawner/jail-priv.h"

/* Host directories bound read-only at the same path (when they exist as
 * directories; symlinks such as Debian's /bin -> usr/bin are recreated). */
static const char *const system_dirs[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"};

/* The curated /etc: host entries bound read-only when present. Chosen for
 * what the jail's programs need to run (dynamic linker, fonts, TLS roots,
 * X11 and Chromium configuration, alternatives symlinks) and nothing that
 * names the host's users, secrets or network. */
static const char *const etc_entries[] = {
	"alternatives", "ca-certificates", "chromium/master_preferences", "debian_version",
	"fonts",        "gai.conf",        "gtk-3.0",   "inputrc",     "ld.so.cache",
	"ld.so.conf",   "ld.so.conf.d",    "locale.alias", "localtime", "magic",
	"mime.types",   "os-release",      "protocols", "python3",     "python3.11",
	"services",     "ssl",             "X11",       "xdg",         "bash.bashrc",
	"timezone",     "mailcap",         "environment.d", "matchbox",
};

/* Generated /etc files: fixed content, never the host's. */
struct gen_file {
	const char *name;
	const char *text;
};
static const struct gen_file etc_generated[] = {
	{"passwd", DG_JAIL_ETC_PASSWD},
	{"group", "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"},
	{"hosts", "127.0.0.1\tlocalhost " DG_JAIL_HOSTNAME "\n::1\tlocalhost\n"},
	{"hostname", DG_JAIL_HOSTNAME "\n"},
	/* No nameserver: nothing inside the jail resolves names; the egress
	 * proxy does it for allowed hosts. */
	{"resolv.conf", "# deskgate: no resolver inside the jail\noptions attempts:1 timeout:1\n"},
	{"nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
			  "networks: files\nprotocols: files\nservices: files\n"},
};

/* Device nodes bound from the host (mknod is not possible in a user
 * namespace, and these are the harmless ones). */
static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int fail(struct dg_err *err, const char *what, const char *path)
{
	int e = errno;
	return dg_err_set(err, -e, "jail: %s %s: %s", what, path, strerror(e));
}

static int path_join(char *out, size_t n, const char *a, const char *b, struct dg_err *err)
{
	int k = snprintf(out, n, "%s/%s", a, b);
	if (k < 0 || (size_t)k >= n)
		return dg_err_set(err, -ENAMETOOLONG, "jail: path too long: %s/%s", a, b);
	return 0;
}

/* Maps statvfs flags of an existing mount to the MS_* flags a bind remount
 * must keep: in a user namespace, flags inherited from a more privileged
 * mount are locked, and a remount that drops one fails with EPERM. */
static unsigned long locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;
	if (statvfs(path, &sv) != 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/* Binds src onto dst (which must exist) and remounts it with extra flags. */
static int bind_mount(const char *src, const char *dst, unsigned long flags, struct dg_err *err)
{
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
		return fail(err, "bind", src);
	unsigned long keep = locked_flags(dst);
	if (mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | keep | flags, NULL) != 0)
		return fail(err, "remount", dst);
	return 0;
}

static int remount_ro(const char *path, struct dg_err *err)
{
	unsigned long keep = locked_flags(path);
	if (mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, NULL) != 0)
		return fail(err, "remount read-only", path);
	return 0;
}

static int make_dir(const char *path, mode_t mode, struct dg_err *err)
{
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return fail(err, "mkdir", path);
	/* mkdir's mode is filtered by the umask; the jail's modes are exact. */
	if (chmod(path, mode) != 0)
		return fail(err, "chmod", path);
	return 0;
}

static int make_file(const char *path, mode_t mode, struct dg_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
	if (fd < 0)
		return fail(err, "create", path);
	close(fd);
	return 0;
}

static int write_file(const char *path, const char *text, struct dg_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return fail(err, "create", path);
	size_t len = strlen(text);
	ssize_t k = write(fd, text, len);
	int e = errno;
	close(fd);
	if (k != (ssize_t)len) {
		errno = k < 0 ? e : EIO;
		return fail(err, "write", path);
	}
	return 0;
}

/* Mirrors host entry /<dir>/<name> into root: a symlink is recreated, a
 * directory or file is bound read-only, nosuid, nodev; a missing one is
 * skipped. */
static int mirror_entry(const char *root, const char *dir, const char *name, struct dg_err *err)
{
	char src[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX];
	int r;
	if ((r = path_join(tmp, sizeof(tmp), dir, name, err)) ||
	    (r = path_join(src, sizeof(src), "", tmp, err)) ||
	    (r = path_join(dst, sizeof(dst), root, tmp, err)))
		return r;
	struct stat st;
	if (lstat(src, &st) != 0)
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return fail(err, "readlink", src);
		target[n] = '\0';
		if (symlink(target, dst) != 0)
			return fail(err, "symlink", dst);
		return 0;
	}
	if (S_ISDIR(st.st_mode))
		r = make_dir(dst, 0755, err);
	else if (S_ISREG(st.st_mode))
		r = make_file(dst, 0644, err);
	else
		return 0;
	if (r)
		return r;
	return bind_mount(src, dst, MS_RDONLY | MS_NOSUID | MS_NODEV, err);
}

static int setup_system_dirs(const char *root, struct dg_err *err)
{
	for (size_t i = 0; i < sizeof(system_dirs) / sizeof(system_dirs[0]); i++) {
		int r = mirror_entry(root, "", system_dirs[i], err);
		if (r)
			return r;
	}
	return 0;
}

/* Creates the directories leading to path (below an existing base). */
static int make_parents(const char *path, size_t base_len, struct dg_err *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	for (char *s = dir + base_len + 1; (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		int r = make_dir(dir, 0755, err);
		*s = '/';
		if (r)
			return r;
	}
	return 0;
}

static int setup_etc(const char *root, const struct dg_jail_spec *spec, struct dg_err *err)
{
	char etc[PATH_MAX], path[PATH_MAX];
	int r;
	if ((r = path_join(etc, sizeof(etc), root, "etc", err)) || (r = make_dir(etc, 0755, err)))
		return r;
	if (mount("tmpfs", etc, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755," DG_JAIL_ETC_SIZE))
		return fail(err, "mount tmpfs", etc);
	for (size_t i = 0; i < sizeof(etc_generated) / sizeof(etc_generated[0]); i++) {
		if ((r = path_join(path, sizeof(path), etc, etc_generated[i].name, err)) ||
		    (r = write_file(path, etc_generated[i].text, err)))
			return r;
	}
	for (size_t i = 0; i < sizeof(etc_entries) / sizeof(etc_entries[0]); i++) {
		if ((r = path_join(path, sizeof(path), etc, etc_entries[i], err)) ||
		    (r = make_parents(path, strlen(etc), err)) ||
		    (r = mirror_entry(root, "etc", etc_entries[i], err)))
			return r;
	}
	for (int i = 0; i < spec->n_etc_files; i++) {
		if ((r = path_join(path, sizeof(path), etc, spec->etc_files[i].path, err)) ||
		    (r = make_parents(path, strlen(etc), err)) ||
		    (r = write_file(path, spec->etc_files[i].text, err)))
			return r;
	}
	return remount_ro(etc, err);
}

/* One tmpfs of scratch_mb holds tmp/, home/ and shm/, bound to /tmp,
 * /home/user and /dev/shm, so all writable space in the jail is one cap. */
static int setup_scratch(const char *root, const struct dg_limits *lim, struct dg_err *err)
{
	char stage[PATH_MAX], opts[128], src[PATH_MAX], dst[PATH_MAX];
	int r;
	if ((r = path_join(stage, sizeof(stage), root, ".scratch", err)) ||
	    (r = make_dir(stage, 0700, err)))
		return r;
	snprintf(opts, sizeof(opts), "mode=0755,size=%llum,nr_inodes=%llu",
		 (unsigned long long)lim->scratch_mb,
		 (unsigned long long)lim->scratch_mb * DG_JAIL_SCRATCH_INODES_PER_MB);
	if (mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
		return fail(err, "mount scratch tmpfs", stage);
	static const struct {
		const char *sub, *target;
		mode_t mode;
	} parts[] = {{"tmp", "tmp", 01777}, {"home", "home/user", 0700}, {"shm", "dev/shm", 01777}};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if ((r = path_join(src, sizeof(src), stage, parts[i].sub, err)) ||
		    (r = path_join(dst, sizeof(dst), root, parts[i].target, err)) ||
		    (r = make_dir(src, parts[i].mode, err)) || (r = make_dir(dst, 0755, err)))
			return r;
		if (mount(src, dst, NULL, MS_BIND, NULL) != 0)
			return fail(err, "bind scratch", dst);
	}
	if (umount2(stage, MNT_DETACH) != 0)
		return fail(err, "unmount", stage);
	if (rmdir(stage) != 0)
		return fail(err, "rmdir", stage);
	return 0;
}

/* Parts of /proc that write to the kernel are made read-only, as a second
 * line behind the jail's lack of capabilities. */
static const char *const proc_readonly[] = {"sys", "sysrq-trigger", "irq", "bus", "fs"};

static int setup_proc(const char *root, struct dg_err *err)
{
	char proc[PATH_MAX], path[PATH_MAX];
	int r;
	if ((r = path_join(proc, sizeof(proc), root, "proc", err)) || (r = make_dir(proc, 0555, err)))
		return r;
	if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return fail(err, "mount proc", proc);
	for (size_t i = 0; i < sizeof(proc_readonly) / sizeof(proc_readonly[0]); i++) {
		if ((r = path_join(path, sizeof(path), proc, proc_readonly[i], err)))
			return r;
		if (access(path, F_OK) != 0)
			continue;
		if ((r = bind_mount(path, path, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, err)))
			return r;
	}
	return 0;
}

static int setup_dev(const char *root, struct dg_err *err)
{
	char dev[PATH_MAX], path[PATH_MAX], src[PATH_MAX];
	int r;
	if ((r = path_join(dev, sizeof(dev), root, "dev", err)) || (r = make_dir(dev, 0755, err)))
		return r;
	if (mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755," DG_JAIL_DEV_SIZE) != 0)
		return fail(err, "mount tmpfs", dev);
	for (size_t i = 0; i < sizeof(dev_nodes) / sizeof(dev_nodes[0]); i++) {
		if ((r = path_join(path, sizeof(path), dev, dev_nodes[i], err)) ||
		    (r = path_join(src, sizeof(src), "/dev", dev_nodes[i], err)) ||
		    (r = make_file(path, 0666, err)))
			return r;
		if ((r = bind_mount(src, path, MS_NOSUID | MS_NOEXEC, err)))
			return r;
	}
	static const struct {
		const char *target, *name;
	} links[] = {{"/proc/self/fd", "fd"},     {"/proc/self/fd/0", "stdin"},
		     {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
		     {"pts/ptmx", "ptmx"}};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		if ((r = path_join(path, sizeof(path), dev, links[i].name, err)))
			return r;
		if (symlink(links[i].target, path) != 0)
			return fail(err, "symlink", path);
	}
	if ((r = path_join(path, sizeof(path), dev, "pts", err)) || (r = make_dir(path, 0755, err)))
		return r;
	if (mount("devpts", path, "devpts", MS_NOSUID | MS_NOEXEC,
		  "newinstance,ptmxmode=0666,mode=0620") != 0)
		return fail(err, "mount devpts", path);
	return 0;
}

/* Host caches programs would otherwise rebuild in every jail (fontconfig
 * scans every font for about a second without its cache). Read-only. */
static const char *const var_entries[] = {"cache/fontconfig"};

static int setup_skeleton(const char *root, struct dg_err *err)
{
	static const char *const dirs[] = {"home", "var", "var/cache"};
	char path[PATH_MAX];
	int r;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		if ((r = path_join(path, sizeof(path), root, dirs[i], err)) ||
		    (r = make_dir(path, 0755, err)))
			return r;
	}
	if ((r = path_join(path, sizeof(path), root, "var/tmp", err)))
		return r;
	if (symlink("../tmp", path) != 0)
		return fail(err, "symlink", path);
	for (size_t i = 0; i < sizeof(var_entries) / sizeof(var_entries[0]); i++) {
		if ((r = mirror_entry(root, "var", var_entries[i], err)))
			return r;
	}
	return 0;
}

static int pivot_into(const char *root, struct dg_err *err)
{
	if (chdir(root) != 0)
		return fail(err, "chdir", root);
	/* Stack the old root under the new one and detach it: no path from
	 * inside the jail leads back to the host's tree. */
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		return fail(err, "pivot_root", root);
	if (umount2(".", MNT_DETACH) != 0)
		return fail(err, "detach old root", root);
	if (chdir("/") != 0)
		return fail(err, "chdir", "/");
	return remount_ro("/", err);
}

/* Brings up lo: the jail's network namespace has nothing else, and later the
 * egress proxy's listener lives on its 127.0.0.1. */
static int loopback_up(struct dg_err *err)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(err, "socket", "lo");
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	int r = 0;
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
		r = fail(err, "SIOCGIFFLAGS", "lo");
	} else {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
			r = fail(err, "SIOCSIFFLAGS", "lo");
	}
	close(fd);
	return r;
}

int dg_jail_mount_root(const struct dg_jail_spec *spec, struct dg_err *err)
{
	const struct dg_limits *lim = spec->limits;
	const char *root = DG_JAIL_STAGE;
	int r;
	/* Nothing mounted below may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return fail(err, "make private", "/");
	if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755," DG_JAIL_ROOT_SIZE) != 0)
		return fail(err, "mount root tmpfs", root);
	if ((r = setup_skeleton(root, err)) || (r = setup_system_dirs(root, err)) ||
	    (r = setup_etc(root, spec, err)) || (r = setup_proc(root, err)) ||
	    (r = setup_dev(root, err)) || (r = setup_scratch(root, lim, err)))
		return r;
	char dev[PATH_MAX];
	if ((r = path_join(dev, sizeof(dev), root, "dev", err)) || (r = remount_ro(dev, err)))
		return r;
	if ((r = loopback_up(err)))
		return r;
	return pivot_into(root, err);
}
