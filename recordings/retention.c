/* recordings: retention (the oldest recordings go first).
 *
 * Contract (recordings.h): never touch an active recording (the caller's
 * is_active, or a writer's flock held), nor, with keep_unuploaded, one
 * whose upload to the object store is not confirmed (its only copy: the
 * bound yields to it, and the result says so); delete by renaming to
 * .deleting-ID first so no reader ever sees half a recording; walk only
 * what is bounded (entries per directory, directory depth), follow no
 * symlink (unlinkat removes a link, never its target). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

struct entry {
	char id[DG_REC_ID_MAX + 1];
	int64_t end_s;
	uint64_t bytes;
	bool active, deleted;
	bool unconfirmed;          /* keep_unuploaded and no upload marker */
	bool held;                 /* counted in held (once, by whichever bound came first) */
};

/* Sum of the sizes of the regular files directly in dir (bounded). */
static int dir_bytes(int dirfd, const char *name, const struct dg_rec_limits *lim, uint64_t *sum)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	size_t n = 0;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d))) {
		if (++n > lim->dir_entries_max) {
			rc = -E2BIG;
			break;
		}
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			*sum += (uint64_t)st.st_size;
	}
	closedir(d);
	return rc;
}

/* Whether a writer holds the recording's lock (alive, in this process or
 * another). */
static bool locked(int dfd)
{
	int fd = openat(dfd, DG_REC_EVENTS_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/* Whether the recording's upload was confirmed: its marker is a regular
 * file (dg_rec_upload writes it last). Anything else, an error included,
 * reads as not confirmed: the recording is then kept, never lost. */
static bool upload_confirmed(int dfd)
{
	struct stat st;
	return fstatat(dfd, DG_REC_UPLOADED_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

/* Whether e may not be deleted; counts a recording held back for its
 * upload once in res. */
static bool kept(struct entry *e, struct dg_rec_retention_result *res)
{
	if (e->active)
		return true;
	if (!e->unconfirmed)
		return false;
	if (!e->held) {
		e->held = true;
		res->held++;
		res->bytes_held += e->bytes;
	}
	return true;
}

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	if (x->end_s != y->end_s)
		return x->end_s < y->end_s ? -1 : 1;
	return strcmp(x->id, y->id);
}

static void report(const struct dg_rec_retention_opts *o, const char *id, int rc, const char *msg)
{
	if (o->pass.report)
		o->pass.report(id, rc, msg, o->pass.arg);
}

static int delete_one(int rootfd, struct entry *e, const struct dg_rec_retention_opts *o,
		      const struct dg_rec_limits *lim, const char *why)
{
	char tmp[sizeof(DG_REC_DELETING_PREFIX) + DG_REC_ID_MAX];
	snprintf(tmp, sizeof(tmp), "%s%s", DG_REC_DELETING_PREFIX, e->id);
	int rc = renameat(rootfd, e->id, rootfd, tmp) == 0 ? 0 : -errno;
	if (rc == 0)
		rc = dg_rec_rm_tree(rootfd, tmp, 0, lim);
	char msg[DG_ERR_MAX];
	if (rc)
		snprintf(msg, sizeof(msg), "deleting (%s) failed: %s", why, strerror(-rc));
	else
		snprintf(msg, sizeof(msg), "deleted (%s), %llu bytes", why, (unsigned long long)e->bytes);
	report(o, e->id, rc, msg);
	/* Renamed counts as gone even when removal stopped half way: the next
	 * pass finishes it, and no reader sees it as a recording. */
	return rc && !faccessat(rootfd, e->id, F_OK, AT_SYMLINK_NOFOLLOW) ? rc : 0;
}

int dg_rec_remove(const char *root, const char *id, struct dg_err *err)
{
	if (!dg_rec_id_valid(id))
		return dg_err_set(err, -EINVAL, "removing a recording: not a session id");
	char tmp[sizeof(DG_REC_DELETING_PREFIX) + DG_REC_ID_MAX];
	snprintf(tmp, sizeof(tmp), "%s%s", DG_REC_DELETING_PREFIX, id);
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	int rc = renameat(rootfd, id, rootfd, tmp) == 0 ? 0 : -errno;
	if (rc == 0)
		rc = dg_rec_rm_tree(rootfd, tmp, 0, &dg_rec_limits_default);
	close(rootfd);
	return rc ? dg_err_set(err, rc, "removing recording %s/%s: %s", root, id, strerror(-rc)) : 0;
}

int dg_rec_retention_lim(const char *root, const struct dg_rec_retention_opts *o,
			 const struct dg_rec_limits *lim, struct dg_rec_retention_result *res,
			 struct dg_err *err)
{
	memset(res, 0, sizeof(*res));
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	int dupfd = dup(rootfd);
	DIR *d = dupfd < 0 ? NULL : fdopendir(dupfd);
	if (!d) {
		int e = errno;
		if (dupfd >= 0)
			close(dupfd);
		close(rootfd);
		return dg_err_set(err, -e, "recordings root %s: %s", root, strerror(e));
	}
	struct entry *list = NULL;
	size_t n = 0, cap = 0, seen = 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (++seen > lim->dir_entries_max) {
			rc = dg_err_set(err, -E2BIG, "recordings root %s: more than %zu entries; the rest "
					"were not looked at", root, lim->dir_entries_max);
			break;
		}
		const char *name = de->d_name;
		struct stat st;
		if (fstatat(rootfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
			continue;
		if (strncmp(name, DG_REC_DELETING_PREFIX, strlen(DG_REC_DELETING_PREFIX)) == 0 &&
		    dg_rec_id_valid(name + strlen(DG_REC_DELETING_PREFIX))) {
			dg_rec_rm_tree(rootfd, name, 0, lim); /* an interrupted pass's */
			continue;
		}
		if (!dg_rec_id_valid(name))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 64;
			struct entry *nl = realloc(list, ncap * sizeof(*nl));
			if (!nl) {
				rc = dg_err_set(err, -ENOMEM, "retention: out of memory");
				break;
			}
			list = nl;
			cap = ncap;
		}
		struct entry *e = &list[n];
		memset(e, 0, sizeof(*e));
		memcpy(e->id, name, strlen(name) + 1); /* a valid id fits */
		e->end_s = st.st_mtim.tv_sec;
		int dfd = openat(rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		struct stat fs;
		if (fstatat(dfd, DG_REC_EVENTS_FILE, &fs, AT_SYMLINK_NOFOLLOW) == 0 ||
		    fstatat(dfd, DG_REC_SESSION_FILE, &fs, AT_SYMLINK_NOFOLLOW) == 0)
			e->end_s = fs.st_mtim.tv_sec;
		dir_bytes(rootfd, name, lim, &e->bytes);
		dir_bytes(dfd, DG_REC_FRAMES_DIR, lim, &e->bytes);
		e->active = (o->pass.is_active && o->pass.is_active(name, o->pass.arg)) || locked(dfd);
		e->unconfirmed = o->keep_unuploaded && !upload_confirmed(dfd);
		close(dfd);
		n++;
	}
	closedir(d);
	if (rc) {
		free(list);
		close(rootfd);
		return rc;
	}
	if (n)
		qsort(list, n, sizeof(*list), by_age);
	int64_t now = o->now_s ? o->now_s : (int64_t)time(NULL);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		total += list[i].bytes;
		res->active += list[i].active;
	}
	res->recordings = (unsigned)n;
	res->bytes_before = total;
	for (size_t i = 0; o->max_age_s > 0 && i < n; i++) {
		struct entry *e = &list[i];
		if (now - e->end_s <= o->max_age_s || kept(e, res))
			continue;
		if (delete_one(rootfd, e, o, lim, "older than max_age") == 0) {
			e->deleted = true;
			total -= e->bytes;
			res->deleted++;
		} else {
			res->failed++;
		}
	}
	for (size_t i = 0; o->max_total_bytes > 0 && i < n && total > o->max_total_bytes; i++) {
		struct entry *e = &list[i];
		if (e->deleted || kept(e, res))
			continue;
		if (delete_one(rootfd, e, o, lim, "over max_total_bytes") == 0) {
			e->deleted = true;
			total -= e->bytes;
			res->deleted++;
		} else {
			res->failed++;
		}
	}
	res->bytes_after = total;
	res->over_budget = o->max_total_bytes > 0 && total > o->max_total_bytes;
	free(list);
	close(rootfd);
	return 0;
}

int dg_rec_retention(const char *root, const struct dg_rec_retention_opts *o,
		     struct dg_rec_retention_result *res, struct dg_err *err)
{
	return dg_rec_retention_lim(root, o, &dg_rec_limits_default, res, err);
}
