/* Bounded whole-file reads (base.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

/* Reads at most max + 1 bytes: one more than allowed tells the file is too
 * large without trusting st_size, which can change between fstat and read.
 * O_NONBLOCK and the regular-file check keep a FIFO or device from blocking
 * startup or streaming forever. */
int dg_read_file(const char *what, const char *path, size_t max, bool nofollow, char **buf,
		 size_t *len, struct stat *st, struct dg_err *err)
{
	*buf = NULL;
	*len = 0;
	memset(st, 0, sizeof(*st));
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (nofollow ? O_NOFOLLOW : 0);
	int fd = open(path, flags);
	if (fd < 0) {
		int e = errno;
		if (nofollow && e == ELOOP)
			return dg_err_set(err, -ELOOP, "%s %s: is a symbolic link; refused", what,
					  path);
		return dg_err_set(err, -e, "%s %s: %s", what, path, strerror(e));
	}
	if (fstat(fd, st) < 0) {
		int e = errno;
		close(fd);
		return dg_err_set(err, -e, "%s %s: fstat: %s", what, path, strerror(e));
	}
	if (S_ISDIR(st->st_mode)) {
		close(fd);
		return dg_err_set(err, -EISDIR, "%s %s: %s", what, path, strerror(EISDIR));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return dg_err_set(err, -EINVAL, "%s %s: not a regular file", what, path);
	}
	if (st->st_size < 0 || (unsigned long long)st->st_size > max) {
		close(fd);
		return dg_err_set(err, -E2BIG, "%s %s: %lld bytes is more than the limit of %zu",
				  what, path, (long long)st->st_size, max);
	}
	const size_t cap = max + 1;
	char *b = malloc(cap + 1);
	if (!b) {
		close(fd);
		return dg_err_set(err, -ENOMEM, "%s %s: %s", what, path, strerror(ENOMEM));
	}
	size_t n = 0;
	while (n < cap) {
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			explicit_bzero(b, n);
			free(b);
			close(fd);
			return dg_err_set(err, -e, "%s %s: read: %s", what, path, strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	if (n > max) {
		explicit_bzero(b, n);
		free(b);
		return dg_err_set(err, -E2BIG, "%s %s: more than the limit of %zu bytes", what, path,
				  max);
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}
