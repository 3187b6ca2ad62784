/* The owner's side of a worker: starting it unprivileged and talking to it.
 *
 * The worker is started by fork + exec of this same binary, after dropping to
 * the worker uid (no capabilities: a uid change away from root clears them),
 * no_new_privs and the parent-death signal. Its environment is empty. Every
 * message from it is checked against the IPC caps; a bad one ends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "policy/policy.h"

static const char *worker_binary = "/proc/self/exe";

void dg_worker_set_binary(const char *path)
{
	worker_binary = path;
}

/* In the forked child: becomes the worker. Only async-signal-safe calls. */
/* The instance is in argv only so that the host (tests, operators) can tell
 * whose worker this is; the worker checks it and does nothing else with it. */
__attribute__((noreturn)) static void exec_worker(const struct dg_desktop_io *d, int ctl, int view,
						  uid_t id, const char *instance)
{
	char size[32], *const envp[] = {NULL};
	snprintf(size, sizeof(size), "%dx%d", d->width, d->height);
	char *const argv[] = {"deskgate", "worker", "--profile", (char *)dg_profile_name(d->profile),
			      "--size", size, "--instance", (char *)instance, NULL};
	int src[5] = {ctl, d->rfb_fd, d->cdp_out_fd, d->cdp_in_fd, view};
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	for (int i = 0; i < 5; i++) {
		int from = src[i] >= 0 ? src[i] : devnull;
		src[i] = fcntl(from, F_DUPFD_CLOEXEC, 16);
		if (src[i] < 0)
			_exit(126);
	}
	for (int i = 0; i < 5; i++) {
		if (dup2(src[i], DG_WORKER_FD_CTL + i) < 0)
			_exit(126);
	}
	syscall(SYS_close_range, DG_WORKER_FD_VIEW + 1, ~0u, 0);
	struct rlimit nproc = {0, 0};
	if (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 || setresuid(id, id, id) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    setrlimit(RLIMIT_NPROC, &nproc) != 0 || setrlimit(RLIMIT_CORE, &nproc) != 0)
		_exit(126);
	/* The owner may have died between fork and the death signal. */
	if (getppid() == 1)
		_exit(126);
	execve(worker_binary, argv, envp);
	_exit(127);
}

int dg_worker_start(struct dg_desktop_io *d, struct dg_worker *w, struct dg_err *err)
{
	memset(w, 0, sizeof(*w));
	w->pid = -1;
	w->pidfd = w->ctl = w->view = -1;
	w->next_id = 1;
	int sp[2], vp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
		return dg_err_set(err, -errno, "worker: socketpair: %s", strerror(errno));
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, vp) != 0) {
		int e = errno;
		close(sp[0]);
		close(sp[1]);
		return dg_err_set(err, -e, "worker: socketpair for the live view: %s", strerror(e));
	}
	w->rd = calloc(1, sizeof(*w->rd));
	if (!w->rd) {
		int fds[4] = {sp[0], sp[1], vp[0], vp[1]};
		for (int i = 0; i < 4; i++)
			close(fds[i]);
		return dg_err_set(err, -ENOMEM, "worker: out of memory");
	}
	uid_t id = DG_WORKER_ID_BASE + d->slot;
	const char *instance = dg_instance(); /* chosen before fork: the child only execs */
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		int fds[4] = {sp[0], sp[1], vp[0], vp[1]};
		for (int i = 0; i < 4; i++)
			close(fds[i]);
		return dg_err_set(err, -e, "worker: fork: %s", strerror(e));
	}
	if (pid == 0)
		exec_worker(d, sp[1], vp[1], id, instance);
	close(sp[1]);
	close(vp[1]);
	w->pid = pid;
	w->ctl = sp[0];
	w->view = vp[0];
	w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	fcntl(w->ctl, F_SETFL, O_NONBLOCK);
	/* The worker holds the desktop's channels now. */
	int *fds[3] = {&d->rfb_fd, &d->cdp_out_fd, &d->cdp_in_fd};
	for (int i = 0; i < 3; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	return 0;
}

int dg_worker_recv(struct dg_worker *w, uint32_t *type, const uint8_t **data, size_t *len,
		   struct dg_err *err)
{
	int r = dg_ipc_read(w->ctl, w->rd, err);
	if (r != 1)
		return r;
	if (w->rd->type == DG_MSG_ACTION || w->rd->type == DG_MSG_VERDICT)
		return dg_err_set(err, -EPROTO, "worker: sent an owner-only message");
	*type = w->rd->type;
	*data = w->rd->buf;
	*len = w->rd->len;
	return 1;
}

int dg_worker_request_decode(const uint8_t *data, size_t len, struct dg_worker_request *r,
			     struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	json_t *m = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *req = json_object_get(m, "req"), *url = json_object_get(m, "url");
	if (!json_is_object(m) || !json_is_integer(req) || !json_is_string(url)) {
		json_decref(m);
		return dg_err_set(err, -EPROTO, "worker: malformed request message");
	}
	r->req = (long long)json_integer_value(req);
	r->url = json_string_value(url);
	r->msg = m;
	return 0;
}

void dg_worker_request_free(struct dg_worker_request *r)
{
	json_decref(r->msg);
	memset(r, 0, sizeof(*r));
}

void dg_worker_decide_request(const struct dg_policy *policy, const char *url,
			      struct dg_decision *d)
{
	struct dg_policy def;
	if (!policy) {
		dg_policy_default(&def);
		policy = &def;
	}
	dg_policy_decide_url(policy, url, d);
	if (d->verdict == DG_VERDICT_ASK) {
		/* Nobody can approve a browser request while the page waits. */
		d->verdict = DG_VERDICT_DENY;
		snprintf(d->reason, sizeof(d->reason), "%s",
			 "the policy asks for approval, and browser requests cannot wait for one");
	}
}

int dg_worker_send_verdict(int ctl, long long req, bool allow, struct dg_err *err)
{
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "{\"req\":%lld,\"allow\":%s}", req,
			 allow ? "true" : "false");
	int r = dg_ipc_send(ctl, DG_MSG_VERDICT, msg, (size_t)n);
	if (r)
		return dg_err_set(err, r, "worker: sending a verdict: %s", strerror(-r));
	return 0;
}

int dg_worker_answer_request(int ctl, const struct dg_policy *policy,
			     const uint8_t *data, size_t len, struct dg_decision *d, json_t **request,
			     struct dg_err *err)
{
	struct dg_worker_request r;
	int rc = dg_worker_request_decode(data, len, &r, err);
	if (rc)
		return rc;
	dg_worker_decide_request(policy, r.url, d);
	rc = dg_worker_send_verdict(ctl, r.req, d->verdict == DG_VERDICT_ALLOW, err);
	if (request) {
		*request = r.msg;
		r.msg = NULL;
	}
	dg_worker_request_free(&r);
	return rc;
}

/* Waits for the next message, bounded by deadline (ms, monotonic). The
 * browser's requests are decided here, under w->policy, as they come. */
static int recv_wait(struct dg_worker *w, long long deadline, uint32_t *type, const uint8_t **data,
		     size_t *len, struct dg_err *err)
{
	for (;;) {
		int r = dg_worker_recv(w, type, data, len, err);
		if (r == 1 && *type == DG_MSG_REQUEST) {
			struct dg_decision d;
			if ((r = dg_worker_answer_request(w->ctl, w->policy, *data, *len, &d, NULL, err)))
				return r;
			continue;
		}
		if (r != 0)
			return r;
		long long left = deadline - dg_now_ms();
		if (left <= 0)
			return dg_err_set(err, -ETIMEDOUT, "worker: no answer in time");
		struct pollfd p = {w->ctl, POLLIN, 0};
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			return dg_err_set(err, -errno, "worker: poll: %s", strerror(errno));
	}
}

/* An error event from the worker, as a message for the caller. */
static int worker_error(const uint8_t *data, size_t len, struct dg_err *err)
{
	return dg_err_set(err, -EIO, "desktop: %.*s", (int)(len > 400 ? 400 : len), (const char *)data);
}

int dg_worker_wait_ready(struct dg_worker *w, int timeout_ms, struct dg_err *err)
{
	long long deadline = dg_now_ms() + timeout_ms;
	for (;;) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r = recv_wait(w, deadline, &type, &data, &len, err);
		if (r == -EPIPE)
			return dg_err_set(err, -EPIPE, "worker: ended before it was ready");
		if (r < 0)
			return r;
		if (type == DG_MSG_READY) {
			w->ready = strndup((const char *)data, len);
			return w->ready ? 0 : dg_err_set(err, -ENOMEM, "worker: out of memory");
		}
		if (type == DG_MSG_EVENT && strstr((const char *)data, "\"error\""))
			return worker_error(data, len, err);
	}
}

long long dg_worker_send_action(struct dg_worker *w, const char *action_json, int out_w, int out_h,
				struct dg_err *err)
{
	long long id = w->next_id++;
	char head[96];
	int n = out_w > 0 ? snprintf(head, sizeof(head), "{\"id\":%lld,\"size\":[%d,%d],\"action\":", id,
				     out_w, out_h)
			  : snprintf(head, sizeof(head), "{\"id\":%lld,\"action\":", id);
	size_t alen = strlen(action_json);
	char *msg = malloc((size_t)n + alen + 2);
	if (!msg)
		return dg_err_set(err, -ENOMEM, "worker: out of memory");
	memcpy(msg, head, (size_t)n);
	memcpy(msg + n, action_json, alen);
	msg[n + alen] = '}';
	msg[n + alen + 1] = '\0';
	/* The channel is non-blocking for reads; a send of an action is small
	 * and dg_ipc_send waits for room if it has to. */
	int r = dg_ipc_send(w->ctl, DG_MSG_ACTION, msg, (size_t)n + alen + 1);
	free(msg);
	if (r)
		return dg_err_set(err, r, "worker: sending the action: %s", strerror(-r));
	return id;
}

int dg_worker_resolve(struct dg_worker *w, int ref, bool hit, int timeout_ms, int *x, int *y,
		      struct dg_err *err)
{
	long long id = w->next_id++;
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "{\"id\":%lld,\"resolve\":{\"ref\":%d,\"scroll\":true,"
			 "\"hit\":%s}}", id, ref, hit ? "true" : "false");
	int r = dg_ipc_send(w->ctl, DG_MSG_ACTION, msg, (size_t)n);
	if (r)
		return dg_err_set(err, r, "worker: sending the resolve: %s", strerror(-r));
	long long deadline = dg_now_ms() + timeout_ms;
	for (;;) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		r = recv_wait(w, deadline, &type, &data, &len, err);
		if (r < 0)
			return r;
		if (type == DG_MSG_EVENT && strstr((const char *)data, "\"event\":\"error\""))
			return worker_error(data, len, err);
		if (type != DG_MSG_RESULT)
			continue;
		json_t *res = json_loadb((const char *)data, len, 0, NULL);
		json_t *pt = json_object_get(json_object_get(json_object_get(res, "resolved"), "element"),
					     "point");
		json_t *px = json_array_get(pt, 0), *py = json_array_get(pt, 1);
		if (!json_is_true(json_object_get(res, "ok")) || !json_is_integer(px) ||
		    !json_is_integer(py)) {
			const char *e = json_string_value(json_object_get(res, "error"));
			r = dg_err_set(err, -ENOENT, "%s", e ? e : "the worker did not say where it is");
		} else {
			*x = (int)json_integer_value(px);
			*y = (int)json_integer_value(py);
			r = 0;
		}
		json_decref(res);
		return r;
	}
}

int dg_worker_act(struct dg_worker *w, const char *action_json, int out_w, int out_h,
		  int timeout_ms, char **result, uint8_t **png, size_t *png_len,
		  void (*on_event)(void *arg, const char *json), void *arg, struct dg_err *err)
{
	*result = NULL;
	*png = NULL;
	*png_len = 0;
	long long id = dg_worker_send_action(w, action_json, out_w, out_h, err);
	if (id < 0)
		return (int)id;
	long long deadline = dg_now_ms() + timeout_ms;
	for (;;) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r = recv_wait(w, deadline, &type, &data, &len, err);
		if (r < 0)
			return r;
		if (type == DG_MSG_EVENT) {
			if (on_event)
				on_event(arg, (const char *)data);
			if (strstr((const char *)data, "\"event\":\"error\""))
				return worker_error(data, len, err);
			continue;
		}
		if (type == DG_MSG_RESULT) {
			*result = strndup((const char *)data, len);
			if (!*result)
				return dg_err_set(err, -ENOMEM, "worker: out of memory");
			/* A frame follows when the result announces one. */
			json_t *res = json_loadb(*result, len, 0, NULL);
			bool has_frame = json_object_get(res, "frame") != NULL;
			json_decref(res);
			if (!has_frame)
				return 0;
			continue;
		}
		if (type == DG_MSG_FRAME && *result) {
			*png = malloc(len ? len : 1);
			if (!*png)
				return dg_err_set(err, -ENOMEM, "worker: out of memory");
			memcpy(*png, data, len);
			*png_len = len;
			return 0;
		}
		return dg_err_set(err, -EPROTO, "worker: unexpected message type %u", type);
	}
}

int dg_worker_view_add(int view_fd, int sock, struct dg_err *err)
{
	int r = dg_seq_send(view_fd, DG_VIEW_MSG, strlen(DG_VIEW_MSG), &sock, 1);
	if (r < 0)
		return dg_err_set(err, r, "worker: handing a viewer to the live view: %s", strerror(-r));
	return 0;
}

void dg_worker_stop(struct dg_worker *w)
{
	if (w->ctl >= 0)
		close(w->ctl);
	w->ctl = -1;
	if (w->view >= 0)
		close(w->view);
	w->view = -1;
	if (w->pid > 0) {
		if (w->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
		else
			kill(w->pid, SIGKILL);
		while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	w->pid = -1;
	if (w->pidfd >= 0)
		close(w->pidfd);
	w->pidfd = -1;
	if (w->rd) {
		dg_ipc_reader_free(w->rd);
		free(w->rd);
		w->rd = NULL;
	}
	free(w->ready);
	w->ready = NULL;
}
