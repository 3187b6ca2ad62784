/* An instance's uid pair held while its gateway runs (dg_instance_ids_claim).
 *
 * The pair is a hash of the instance's name (desktop/proto/names.c), so two
 * names can meet on one pair; without the claim, the second gateway would
 * run as the first one's uid and read its recordings. The lock file names
 * the instance that holds it: a gateway of the same instance (a second
 * gateway on purpose, a restart while the old one exits) shares it; a
 * different instance is refused. Lock files are never unlinked, as slot
 * locks are not, so that a claim never races an unlink.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "desktop/spawner/jail-priv.h"
#include "desktop/spawner/spawner.h"

#define IDS_LABEL_TRIES 50 /* 2 ms apart: a holder writes its label under an exclusive lock */

/* The holder's instance name from the lock file, "" when none is written. */
static void read_label(int fd, char *out, size_t n)
{
	ssize_t r = pread(fd, out, n - 1, 0);
	out[r > 0 ? r : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

int dg_instance_ids_claim(struct dg_err *err)
{
	char dir[4096], path[4200];
	int r = dg_jail_run_subdir("ids", dir, sizeof(dir), err);
	if (r)
		return r;
	const char *me = dg_instance();
	uint32_t uid = dg_instance_gateway_uid();
	snprintf(path, sizeof(path), "%s/%u.lock", dir, uid);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return dg_err_set(err, -errno, "instance ids: open %s: %s", path, strerror(errno));
	char label[DG_INSTANCE_MAX + 2];
	for (int i = 0; i < IDS_LABEL_TRIES; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			/* Nobody holds it: label it ours, then share it. */
			int n = snprintf(label, sizeof(label), "%s\n", me);
			if (ftruncate(fd, 0) != 0 || pwrite(fd, label, (size_t)n, 0) != n ||
			    flock(fd, LOCK_SH) != 0) {
				r = dg_err_set(err, -errno, "instance ids: labelling %s: %s", path,
					       strerror(errno));
				close(fd);
				return r;
			}
			return 0;
		}
		if (errno != EWOULDBLOCK)
			break;
		read_label(fd, label, sizeof(label));
		if (label[0] && strcmp(label, me) != 0) {
			close(fd);
			return dg_err_set(err, -EADDRINUSE,
					  "instance %s: its uids %u and %u are held by instance %s, "
					  "running on this host (the two names hash to the same pair): "
					  "rename one of them (config \"instance\")",
					  me, uid, uid + 1, label);
		}
		/* Ours, held by a gateway of the same instance: share it, unless a
		 * holder is writing its label right now (then look again). */
		if (label[0] && flock(fd, LOCK_SH | LOCK_NB) == 0)
			return 0;
		struct timespec ts = {0, 2 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	r = dg_err_set(err, errno == EWOULDBLOCK ? -EBUSY : -errno,
		       "instance ids: cannot lock %s: %s", path,
		       errno == EWOULDBLOCK ? "held, and its holder never named itself" : strerror(errno));
	close(fd);
	return r;
}
