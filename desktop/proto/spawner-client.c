/* The gateway's side of the spawner's channel (desktop/proto/proto.h):
 * requests out, replies and events back. The spawner itself is
 * desktop/spawner/spawner.c, which also forks it (dg_spawner_start).
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/proto/proto.h"

int dg_spawner_request(struct dg_spawner *sp, json_t *req, struct dg_err *err)
{
	json_object_set_new(req, "req", json_integer(++sp->next_req));
	char *s = json_dumps(req, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(req);
	if (!s)
		return dg_err_set(err, -ENOMEM, "spawner: out of memory");
	int r = dg_seq_send(sp->fd, s, strlen(s), NULL, 0);
	free(s);
	if (r)
		return dg_err_set(err, r, "spawner: sending a request: %s", strerror(-r));
	return (int)sp->next_req;
}

int dg_spawner_recv(struct dg_spawner *sp, json_t **msg, int *fds, int *nfds, struct dg_err *err)
{
	*msg = NULL;
	char *buf = malloc(DG_SEQ_MAX + 1);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "spawner: out of memory");
	size_t len;
	int r = dg_seq_recv(sp->fd, buf, DG_SEQ_MAX + 1, &len, fds, nfds, err);
	if (r == 1) {
		*msg = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
		if (!*msg) {
			for (int i = 0; i < *nfds; i++)
				close(fds[i]);
			r = dg_err_set(err, -EPROTO, "spawner: a reply that is not JSON");
		}
	}
	free(buf);
	return r;
}

void dg_spawner_stop(struct dg_spawner *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	sp->fd = -1;
	if (sp->pid > 0) {
		/* Closing the channel makes it end every session and exit. */
		int st;
		for (int i = 0; i < 500; i++) {
			if (waitpid(sp->pid, &st, WNOHANG) == sp->pid) {
				sp->pid = -1;
				return;
			}
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
		}
		kill(sp->pid, SIGKILL);
		waitpid(sp->pid, &st, 0);
		sp->pid = -1;
	}
}
