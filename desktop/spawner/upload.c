/* The upload check: may the browser of a desktop be handed these files?
 *
 * A file_upload action gives Chromium paths, which it opens itself, in its
 * own view of the jail (the jail init's mount namespace). A path may name
 * only a file of the session's scratch space (the one tmpfs behind /tmp,
 * /home/user and /dev/shm), never one of the browser's own files, which
 * exec does not see (jail-enter.c) but could point at with a symbolic link
 * it made on the scratch space: /tmp/x -> /home/user/.chromium/Default/
 * Cookies would upload the session's cookies to the page.
 *
 * So the check runs here, as the jail's owner, in the desktop's view: from
 * the jail init's root (/proc/PID/root), one component at a time, each
 * opened O_PATH | O_NOFOLLOW with openat2's RESOLVE_NO_SYMLINKS and
 * RESOLVE_NO_MAGICLINKS (and RESOLVE_IN_ROOT, though no component is ".."),
 * so no symbolic link is ever followed: one met in any component is the
 * verdict. The browser's own files are refused from the path's bytes alone
 * (dg_desktop_hidden_prefix), before anything is opened; the rest is
 * looked at on the descriptors: each directory searchable by the jail's
 * user, the file regular, on the scratch tmpfs (its st_dev is /tmp's,
 * opened the same way), at most DG_UPLOAD_FILE_MAX bytes and readable by
 * the jail's user (mode bits: the jail's user owns the scratch files and
 * has no supplementary group).
 *
 * What it does not prevent: a file that passed can be swapped for a
 * symbolic link (by exec, or anything else running in the jail) between
 * this check and Chromium's open, which follows links. The check is no
 * lock. What keeps that from reaching the browser's files is that nothing
 * exec runs can name them (they are hidden in its mount namespace, so it
 * can make no hard link to them either, and a symbolic link it makes is
 * only followed by the browser after a swap that wins the race), and that
 * an upload runs only when the policy allows file_upload (a policy whose
 * default is deny must name it). See docs/jail.md, "What an upload may
 * read".
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "desktop/spawner/spawner.h"

/* One component (a name, no slash) under dir, never followed: a symbolic
 * link comes back as itself. A descriptor or a negative errno. */
static int open_step(int dir, const char *name)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dir, name, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* Whether the jail's user (host ids uid, gid) has permission bit (4 read,
 * 1 search) on st. */
static bool may(const struct stat *st, uid_t uid, gid_t gid, unsigned bit)
{
	unsigned mode = st->st_mode;
	if (st->st_uid == uid)
		return mode & (bit << 6);
	if (st->st_gid == gid)
		return mode & (bit << 3);
	return mode & bit;
}

struct view {
	int root;          /* the jail init's root */
	dev_t scratch;     /* the scratch tmpfs (/tmp's st_dev) */
	uid_t uid;         /* the jail's user, on the host */
	gid_t gid;
};

static void verdict(struct dg_upload_file *f, enum dg_upload_verdict v, size_t at)
{
	f->verdict = v;
	f->at = (uint32_t)at;
}

static void failed(struct dg_upload_file *f, int e, size_t at)
{
	verdict(f, DG_UPLOAD_ERROR, at);
	f->detail = (uint32_t)(e > 0 && e <= DG_UPLOAD_ERRNO_MAX ? e : EIO);
}

/* One path (dg_upload_path_valid) into f. */
static void check_one(const struct view *v, const char *path, struct dg_upload_file *f)
{
	memset(f, 0, sizeof(*f));
	size_t hidden = dg_desktop_hidden_prefix(path);
	if (hidden)
		return verdict(f, DG_UPLOAD_BROWSER_FILES, hidden);
	__attribute__((cleanup(dg_close_fd))) int cur = -1;
	char name[DG_UPLOAD_PATH_MAX + 1];
	struct stat st = {0};
	size_t len = strlen(path);
	for (size_t i = 0; i < len;) {
		/* path[i] is a slash; the component runs to j. */
		size_t j = i + 1;
		while (j < len && path[j] != '/')
			j++;
		memcpy(name, path + i + 1, j - i - 1);
		name[j - i - 1] = '\0';
		int fd = open_step(cur >= 0 ? cur : v->root, name);
		if (fd == -ENOENT)
			return verdict(f, DG_UPLOAD_MISSING, j);
		if (fd < 0)
			return failed(f, -fd, j);
		dg_close_fd(&cur);
		cur = fd;
		if (fstat(cur, &st) != 0)
			return failed(f, errno, j);
		if (S_ISLNK(st.st_mode))
			return verdict(f, DG_UPLOAD_SYMLINK, j);
		if (j < len && !S_ISDIR(st.st_mode))
			return failed(f, ENOTDIR, j);
		if (j < len && !may(&st, v->uid, v->gid, 1))
			return verdict(f, DG_UPLOAD_UNREADABLE, j);
		i = j;
	}
	if (st.st_dev != v->scratch)
		return verdict(f, DG_UPLOAD_OUTSIDE_SCRATCH, 0);
	if (!S_ISREG(st.st_mode)) {
		verdict(f, DG_UPLOAD_NOT_REGULAR, 0);
		f->detail = st.st_mode & S_IFMT;
		return;
	}
	f->size = (uint64_t)st.st_size;
	if (f->size > DG_UPLOAD_FILE_MAX)
		return verdict(f, DG_UPLOAD_TOO_LARGE, 0);
	if (!may(&st, v->uid, v->gid, 4)) {
		f->size = 0;
		return verdict(f, DG_UPLOAD_UNREADABLE, 0);
	}
	verdict(f, DG_UPLOAD_OK, 0);
}

int dg_desktop_upload_check(const struct dg_jail *j, const char *const *paths, uint32_t n,
			    struct dg_upload_check *out, struct dg_err *err)
{
	memset(out, 0, sizeof(*out));
	if (j->pid <= 0 || j->reaped)
		return dg_err_set(err, -ESRCH, "the desktop's jail is not running");
	if (n < 1 || n > DG_UPLOAD_PATHS_MAX)
		return dg_err_set(err, -EINVAL, "1 to %d paths, not %u", DG_UPLOAD_PATHS_MAX,
				  (unsigned)n);
	for (uint32_t i = 0; i < n; i++) {
		if (!dg_upload_path_valid(paths[i], strnlen(paths[i], DG_UPLOAD_PATH_MAX + 1)))
			return dg_err_set(err, -EINVAL, "paths[%u] is not an upload path", (unsigned)i);
	}
	/* This process is the jail init's parent: until it reaps init, the pid
	 * names no other process. */
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/%d/root", (int)j->pid);
	__attribute__((cleanup(dg_close_fd))) int root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return dg_err_set(err, -errno, "the desktop's root (%s): %s", proc, strerror(errno));
	__attribute__((cleanup(dg_close_fd))) int tmp = open_step(root, "tmp");
	struct stat st;
	if (tmp < 0)
		return dg_err_set(err, tmp, "the desktop's /tmp (%s/tmp): %s", proc, strerror(-tmp));
	if (fstat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
		return dg_err_set(err, -ENOTDIR, "the desktop's /tmp (%s/tmp) is not a directory",
				  proc);
	struct view v = {.root = root, .scratch = st.st_dev,
			 .uid = (uid_t)(DG_JAIL_ID_BASE + j->slot),
			 .gid = (gid_t)(DG_JAIL_ID_BASE + j->slot)};
	for (uint32_t i = 0; i < n; i++)
		check_one(&v, paths[i], &out->files[i]);
	out->n = n;
	return 0;
}
