/* recordings: sealing what a dead gateway left.
 *
 * A writer holds an exclusive flock on events.jsonl for as long as the
 * recording is open; the kernel drops it when the process dies however it
 * dies. So a recording whose lock can be taken and whose last line is not a
 * seal was left by a dead writer. Sealing it: the chain is checked (never
 * sign what does not verify), a torn last line is cut off (it cannot be
 * appended after: the next line would glue to it) but its length and hash
 * are kept in the "orphaned" event, then that event and a seal with
 * "complete": false are appended. The signature vouches for what was on
 * disk when the next gateway started, which is all anyone can vouch for
 * after a crash. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

int dg_rec_seal_orphan(const char *dir, const struct dg_rec_key *k, struct dg_rec_orphan_result *res,
		       struct dg_err *err)
{
	struct dg_rec_orphan_result dummy;
	if (!res)
		res = &dummy;
	memset(res, 0, sizeof(*res));
	if (!dg_rec_key_has_private(k))
		return dg_err_set(err, -EINVAL, "%s: sealing needs the private key", dir);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "%s: %s", dir, strerror(errno));
	struct dg_rec_scan s = { .lim = &dg_rec_limits_default, .dirfd = dirfd, .fd = -1 };
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_scan_session(&s, &e2);
	if (rc) {
		close(dirfd);
		return dg_err_set(err, rc, "%s: %s", dir, e2.msg);
	}
	int fd = openat(dirfd, DG_REC_EVENTS_FILE,
			O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rc = dg_err_set(err, fd < 0 ? -errno : -EINVAL, "%s: events.jsonl: %s", dir,
				fd < 0 ? strerror(errno) : "not a regular file");
		goto fail;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ? dg_err_set(err, -EBUSY, "%s: a live writer holds it", dir)
					  : dg_err_set(err, -errno, "%s: flock: %s", dir, strerror(errno));
		goto fail;
	}
	s.fd = fd;
	rc = dg_rec_scan_events(&s, &e2);
	if (rc) {
		rc = dg_err_set(err, rc, "%s: %s%s", dir, e2.msg,
				rc == -EBADMSG ? " (not sealed: a broken chain is never signed)" : "");
		goto fail;
	}
	res->last_seq = s.last_seq;
	if (s.sealed) {
		res->already_sealed = true;
		goto done;
	}
	char torn_hex[DG_REC_HEX_LEN + 1];
	dg_hex_encode(s.torn_sha, DG_REC_SHA_LEN, torn_hex);
	if (s.torn_bytes) {
		if (ftruncate(fd, s.good_end) != 0 || fdatasync(fd) != 0) {
			rc = dg_err_set(err, -errno, "%s: cutting the torn last line: %s", dir,
					strerror(errno));
			goto fail;
		}
		res->torn_bytes = s.torn_bytes;
	}
	json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I, s:o}", "type", "lifecycle", "state",
			       "orphaned", "reason",
			       "the gateway recording this session stopped without ending it",
			       "last_seq", (json_int_t)s.last_seq, "torn_bytes",
			       (json_int_t)s.torn_bytes,
			       "torn_sha256", s.torn_bytes ? json_string(torn_hex) : json_null());
	if (!ev) {
		rc = dg_err_set(err, -ENOMEM, "%s: out of memory", dir);
		goto fail;
	}
	struct dg_rec *r;
	rc = dg_rec_resume(dirfd, fd, dir, s.last_seq, s.last_hash, s.good_end, &r, err);
	if (rc) {
		json_decref(ev);
		goto fail;
	}
	/* r owns dirfd and fd from here. */
	rc = dg_rec_event_internal(r, ev, err);
	if (rc == 0)
		rc = dg_rec_seal_as(r, k, false, err);
	dg_rec_close(r);
	dg_rec_scan_free(&s);
	return rc;
done:
fail:
	if (fd >= 0)
		close(fd);
	close(dirfd);
	dg_rec_scan_free(&s);
	return rc;
}

int dg_rec_seal_orphans(const char *root, const struct dg_rec_key *k, const struct dg_rec_pass *pass,
			unsigned *sealed, unsigned *failed, struct dg_err *err)
{
	unsigned ns = 0, nf = 0;
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	DIR *d = fdopendir(rootfd);
	if (!d) {
		close(rootfd);
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	}
	int rc = 0;
	size_t seen = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (++seen > dg_rec_limits_default.dir_entries_max) {
			rc = dg_err_set(err, -E2BIG, "recordings root %s: more than %zu entries; the rest "
					"were not looked at", root, dg_rec_limits_default.dir_entries_max);
			break;
		}
		const char *id = de->d_name;
		struct stat st;
		if (!dg_rec_id_valid(id) || fstatat(rootfd, id, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (pass && pass->is_active && pass->is_active(id, pass->arg))
			continue;
		int dfd = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd < 0)
			continue;
		int q = dg_rec_quick_sealed(dfd, &dg_rec_limits_default);
		close(dfd);
		if (q == 1)
			continue;
		char dir[4096];
		snprintf(dir, sizeof(dir), "%s/%s", root, id);
		struct dg_err e2 = { { 0 } };
		struct dg_rec_orphan_result res;
		int r = dg_rec_seal_orphan(dir, k, &res, &e2);
		if (r == 0 && res.already_sealed)
			continue;
		if (r == 0)
			ns++;
		else if (r != -EBUSY)
			nf++;
		if (pass && pass->report) {
			char msg[DG_ERR_MAX];
			if (r == 0)
				snprintf(msg, sizeof(msg), "sealed after a crash: events up to seq %llu%s",
					 (unsigned long long)res.last_seq,
					 res.torn_bytes ? " (a torn last line was cut)" : "");
			else
				snprintf(msg, sizeof(msg), "%s", e2.msg);
			pass->report(id, r, msg, pass->arg);
		}
	}
	closedir(d);
	if (sealed)
		*sealed = ns;
	if (failed)
		*failed = nf;
	return rc;
}
