/* The gateway's side of the egress proxy's channel (desktop/proto/proto.h):
 * control messages to the proxy, its events back. The proxy itself and its
 * start-up are desktop/egress/.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "policy/policy.h"

/* Sends {"op":op,"session":id} with egress and urls (both stolen, NULL:
 * none) and, when before > 0, "conns_before". */
static int send_op(struct dg_egress *e, const char *op, const char *id, json_t *egress,
		   json_t *urls, uint64_t before, const int *fds, int nfds, struct dg_err *err)
{
	if (e->fd < 0) {
		json_decref(egress);
		json_decref(urls);
		return dg_err_set(err, -EPIPE, "egress: the proxy is not running");
	}
	if (!id || !dg_session_id_valid(id)) {
		json_decref(egress);
		json_decref(urls);
		return dg_err_set(err, -EINVAL, "egress: %s: bad session id", op);
	}
	json_t *m = json_pack("{s:s, s:s, s:o*, s:o*}", "op", op, "session", id, "egress", egress,
			      "urls", urls);
	if (m && before > 0)
		json_object_set_new(m, "conns_before", json_integer((json_int_t)before));
	char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	if (!s)
		return dg_err_set(err, -ENOMEM, "egress: out of memory");
	int r = dg_seq_send(e->fd, s, strlen(s), fds, nfds);
	free(s);
	if (r)
		return dg_err_set(err, r, "egress: sending %s for session %s: %s", op, id,
				  strerror(-r));
	return 0;
}

int dg_egress_add_after(struct dg_egress *e, const char *session_id, int listen_fd,
			const struct dg_policy *p, uint64_t conns_before, struct dg_err *err)
{
	if (listen_fd < 0)
		return dg_err_set(err, -EBADF, "egress: add: no listening socket");
	if (conns_before > DG_EGRESS_CONN_NUMBER_MAX)
		return dg_err_set(err, -EINVAL, "egress: add: conns_before %llu is over %llu",
				  (unsigned long long)conns_before,
				  (unsigned long long)DG_EGRESS_CONN_NUMBER_MAX);
	json_t *list = p ? dg_policy_egress_json(p) : NULL;
	json_t *urls = p ? dg_policy_urls_json(p) : NULL;
	if (p && (!list || (p->rules && !urls))) {
		json_decref(list);
		json_decref(urls);
		return dg_err_set(err, -ENOMEM, "egress: out of memory");
	}
	return send_op(e, "add", session_id, list, urls, conns_before, &listen_fd, 1, err);
}

int dg_egress_add(struct dg_egress *e, const char *session_id, int listen_fd,
		  const struct dg_policy *p, struct dg_err *err)
{
	return dg_egress_add_after(e, session_id, listen_fd, p, 0, err);
}

int dg_egress_remove(struct dg_egress *e, const char *session_id, struct dg_err *err)
{
	return send_op(e, "remove", session_id, NULL, NULL, 0, NULL, 0, err);
}

int dg_egress_recv(struct dg_egress *e, json_t **ev, struct dg_err *err)
{
	*ev = NULL;
	if (e->fd < 0)
		return dg_err_set(err, -EPIPE, "egress: the proxy is not running");
	char *buf = malloc(DG_SEQ_MAX + 1);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "egress: out of memory");
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	size_t len;
	int r = dg_seq_recv(e->fd, buf, DG_SEQ_MAX + 1, &len, fds, &nfds, err);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	if (r == 1 && nfds > 0)
		r = dg_err_set(err, -EPROTO, "egress: the proxy sent descriptors");
	if (r == 1) {
		*ev = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(*ev)) {
			json_decref(*ev);
			*ev = NULL;
			r = dg_err_set(err, -EPROTO, "egress: an event that is not a JSON object");
		}
	}
	free(buf);
	return r;
}

void dg_egress_stop(struct dg_egress *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
	if (e->pid <= 0)
		return;
	int st;
	for (int i = 0; i < DG_EGRESS_STOP_MS / 10; i++) {
		if (waitpid(e->pid, &st, WNOHANG) == e->pid) {
			e->pid = -1;
			return;
		}
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	kill(e->pid, SIGKILL);
	waitpid(e->pid, &st, 0);
	e->pid = -1;
}
