/* recordings: hashing, hash names, wall-clock text and careful file access
 * shared by the writer and the readers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

const struct dg_rec_limits dg_rec_limits_default = {
	.line_max = DG_REC_LINE_MAX,
	.events_max = DG_REC_EVENTS_MAX,
	.events_file_max = DG_REC_EVENTS_FILE_MAX,
	.session_max = DG_REC_SESSION_MAX,
	.frame_max = DG_REC_FRAME_MAX,
	.frames_max = DG_REC_FRAMES_MAX,
	.dir_entries_max = DG_REC_DIR_ENTRIES_MAX,
};

int dg_rec_sha256(const void *data, size_t len, uint8_t out[DG_REC_SHA_LEN])
{
	unsigned n = 0;
	if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != DG_REC_SHA_LEN)
		return -ENOMEM;
	return 0;
}

int dg_rec_unhex(const char *hex, uint8_t out[DG_REC_SHA_LEN])
{
	if (!dg_rec_hash_valid(hex))
		return -EINVAL;
	return dg_hex_decode(hex, DG_REC_SHA_LEN, out);
}

bool dg_rec_hash_valid(const char *s)
{
	if (!s)
		return false;
	/* Lowercase only: uppercase is not a frame name, one spelling per hash.
	 * A short string stops at its NUL, which is no digit. */
	for (int i = 0; i < DG_REC_HEX_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[DG_REC_HEX_LEN] == '\0';
}

bool dg_rec_id_valid(const char *id)
{
	if (!id || !id[0])
		return false;
	size_t n = 0;
	for (; id[n]; n++) {
		char c = id[n];
		if (n >= DG_REC_ID_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

void dg_rec_wall_str(int64_t ms, char out[DG_REC_WALL_BUF])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	if (ms < 0 || !gmtime_r(&s, &tm)) {
		snprintf(out, DG_REC_WALL_BUF, "1970-01-01T00:00:00.000Z");
		return;
	}
	snprintf(out, DG_REC_WALL_BUF, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

int dg_rec_open_reg(int dirfd, const char *name, int flags, const char *what, int *fd, int64_t *size,
		    struct dg_err *err)
{
	/* O_NONBLOCK: a FIFO planted in a recording must not hang the reader. */
	int f = openat(dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (f < 0) {
		int e = errno;
		if (e == ELOOP)
			return dg_err_set(err, -ELOOP, "%s is a symbolic link", what);
		return dg_err_set(err, -e, "%s: %s", what, strerror(e));
	}
	struct stat st;
	if (fstat(f, &st) != 0) {
		int e = errno;
		close(f);
		return dg_err_set(err, -e, "%s: %s", what, strerror(e));
	}
	if (!S_ISREG(st.st_mode)) {
		close(f);
		return dg_err_set(err, -EINVAL, "%s is not a regular file", what);
	}
	/* Back to blocking reads for a regular file (O_NONBLOCK has no effect
	 * on them, but keep the descriptor plain for whoever gets it). */
	int fl = fcntl(f, F_GETFL);
	if (fl >= 0)
		fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
	*fd = f;
	if (size)
		*size = (int64_t)st.st_size;
	return 0;
}

int dg_rec_read_fd(int fd, size_t max, const char *what, char **buf, size_t *len, struct dg_err *err)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return dg_err_set(err, -errno, "%s: %s", what, strerror(errno));
	if (st.st_size < 0 || (uint64_t)st.st_size > max)
		return dg_err_set(err, -EFBIG, "%s: %lld bytes is more than the limit of %zu", what,
				  (long long)st.st_size, max);
	char *b = malloc((size_t)st.st_size + 1);
	if (!b)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", what);
	/* Read the size fstat gave, plus one byte: a file that grows meanwhile
	 * is refused rather than read past its limit. */
	size_t got = 0, want = (size_t)st.st_size;
	for (;;) {
		char extra;
		char *dst = got < want ? b + got : &extra;
		size_t room = got < want ? want - got : 1;
		ssize_t n = read(fd, dst, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(b);
			return dg_err_set(err, -e, "%s: %s", what, strerror(e));
		}
		if (n == 0)
			break;
		if (dst == &extra) {
			free(b);
			return dg_err_set(err, -EAGAIN, "%s: changed while it was read", what);
		}
		got += (size_t)n;
	}
	b[got] = '\0';
	*buf = b;
	*len = got;
	return 0;
}

int dg_rec_read_at(int dirfd, const char *name, size_t max, const char *what, char **buf, size_t *len,
		   struct dg_err *err)
{
	int fd = -1;
	int rc = dg_rec_open_reg(dirfd, name, O_RDONLY, what, &fd, NULL, err);
	if (rc)
		return rc;
	rc = dg_rec_read_fd(fd, max, what, buf, len, err);
	close(fd);
	return rc;
}

int dg_rec_write_at(int dirfd, const char *name, const void *data, size_t len, int mode, bool sync,
		    struct dg_err *err)
{
	char tmp[256];
	int n = snprintf(tmp, sizeof(tmp), ".tmp-%s-%ld", name, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return dg_err_set(err, -ENAMETOOLONG, "%s: name too long", name);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return dg_err_set(err, -errno, "%s: creating: %s", name, strerror(errno));
	const char *p = data;
	size_t left = len;
	while (left) {
		ssize_t w = write(fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			unlinkat(dirfd, tmp, 0);
			return dg_err_set(err, -e, "%s: writing: %s", name, strerror(e));
		}
		p += w;
		left -= (size_t)w;
	}
	int e = sync && fdatasync(fd) != 0 ? errno : 0;
	if (close(fd) != 0 && !e)
		e = errno;
	if (e) {
		unlinkat(dirfd, tmp, 0);
		return dg_err_set(err, -e, "%s: writing: %s", name, strerror(e));
	}
	if (renameat(dirfd, tmp, dirfd, name) != 0) {
		e = errno;
		unlinkat(dirfd, tmp, 0);
		return dg_err_set(err, -e, "%s: renaming: %s", name, strerror(e));
	}
	if (sync && fsync(dirfd) != 0)
		return dg_err_set(err, -errno, "%s: syncing its directory: %s", name, strerror(errno));
	return 0;
}

/* Removes name under dirfd and everything below it, to DG_REC_RM_DEPTH_MAX
 * levels, without following symlinks. */
int dg_rec_rm_tree(int dirfd, const char *name, int depth, const struct dg_rec_limits *lim)
{
	if (depth > DG_REC_RM_DEPTH_MAX)
		return -ELOOP;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (++n > lim->dir_entries_max) {
			rc = -E2BIG;
			break;
		}
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue;
		int r = S_ISDIR(st.st_mode) ? dg_rec_rm_tree(fd, de->d_name, depth + 1, lim)
					    : (unlinkat(fd, de->d_name, 0) == 0 ? 0 : -errno);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && !rc)
		rc = -errno;
	return rc;
}

size_t dg_rec_utf8_len(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			n++;
	return n;
}
