/* fuzz_ipc: the messages between deskgate's processes
 * (desktop/proto/proto.h, desktop/worker/guard-priv.h), fed
 * through real socketpairs as a hostile or broken peer would send them.
 *
 * Input: one selector byte (its value modulo 5), one parameter byte, then
 * the peer's bytes.
 *   0  owner side of the worker channel: the bytes are the stream a worker
 *      writes, delivered in chunks of the parameter's size (0: at once) to
 *      dg_worker_recv, as the gateway reads it; each DG_MSG_REQUEST goes to
 *      dg_worker_answer_request (its verdict is sent on a second
 *      socketpair and drained), every other message is the gateway's
 *   1  worker side: the same stream read with dg_ipc_read as the worker
 *      does; an ACTION's "action" goes to dg_action_parse_obj, a VERDICT
 *      to dg_guard_verdict (the worker's own envelope check of ACTION is
 *      static in worker.c and not reachable here)
 *   2  the blocking helpers of the command-line tools: dg_worker_act
 *      (parameter even) or dg_worker_wait_ready (odd) against a fake
 *      worker that writes the bytes and reads what the helpers send
 *   3  datagram channels (SOCK_SEQPACKET): the bytes are records
 *      [flags u8][len u16 little-endian][len bytes]; flags & 7 descriptors
 *      (of /dev/null) go along with the datagram, flags & 8 pads it past
 *      DG_SEQ_MAX (a truncated datagram); each is sent, then received by
 *      dg_seq_recv, dg_spawner_recv (the gateway reading the spawner) or
 *      dg_egress_recv (the gateway reading the proxy), by parameter % 3
 *   4  dg_guard_verdict, dg_worker_answer_request, dg_cdp_decide_decode
 *      (a worker's CDP_DECIDE or CDP_NOTE, as the gateway reads it) and
 *      dg_cdp_verdict_decode (the owner's CDP_VERDICT, as the worker
 *      reads it) on the bytes as one message each
 * Not reachable without the processes: the proxy's control handler
 * (static, in its forked child; the spawner's dispatcher is fuzz_spawner's)
 * and the
 * gateway's handling of worker, spawner and proxy messages (gateway/
 * session.c and server.c, which need a running gateway).
 *
 * Checked: no crash, no leak, no descriptor left open (dg_fuzz_fd_end;
 * descriptors that arrive with datagrams must all be closed), results as
 * documented. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include "actions/actions.h"
#include "cdp-priv.h"
#include "guard-priv.h"
#include "desktop/proto/proto.h"
#include "policy/policy.h"
#include "fuzz_common.h"

static struct dg_policy policy;
static struct dg_cdp *cdp;      /* the guard's client: its browser never answers */
static int cdp_browser[2] = {-1, -1};
static struct dg_guard *guard;
static int devnull = -1;

static int emit_nothing(void *arg, uint32_t type, const char *json)
{
	(void)arg;
	(void)type;
	(void)json;
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static const char text[] =
		"{\"version\":1,\"default\":\"deny\",\"actions\":{\"allow\":[\"navigate\"]},"
		"\"urls\":{\"allow\":[\"https://example.com/**\"],\"ask\":[\"https://example.com/a/**\"]}}";
	struct dg_err err = {{0}};
	if (dg_policy_parse(text, sizeof(text) - 1, "fuzz_ipc", &policy, &err) != 0) {
		fprintf(stderr, "fuzz_ipc: the built-in policy does not load: %s\n", err.msg);
		abort();
	}
	int cmd[2], ev[2];
	if (pipe2(cmd, O_CLOEXEC) || pipe2(ev, O_CLOEXEC))
		abort();
	cdp = dg_cdp_new(cmd[1], ev[0]);
	guard = cdp ? dg_guard_new(cdp, emit_nothing, NULL) : NULL;
	if (!guard)
		abort();
	cdp_browser[0] = cmd[0];
	cdp_browser[1] = ev[1];
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		abort();
	return 0;
}

static void drain(int fd)
{
	char buf[4096];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* the reader is gone */
		p += w;
		n -= (size_t)w;
	}
}

/* 0 and 1: a stream read in chunks by the owner or the worker. */
static void stream(bool owner, const uint8_t *data, size_t size, size_t chunk)
{
	int sp[2], sink[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sink))
		abort();
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	fcntl(sp[1], F_SETFL, O_NONBLOCK); /* a full socket: read, then write on */
	struct dg_worker w;
	memset(&w, 0, sizeof(w));
	w.pid = w.pidfd = -1;
	w.ctl = sp[0];
	w.next_id = 1;
	w.rd = calloc(1, sizeof(*w.rd));
	DG_FUZZ_CHECK(w.rd, "out of memory");
	if (chunk == 0)
		chunk = size ? size : 1;
	size_t off = 0;
	bool open = true;
	int r = 0;
	while (r >= 0 && open) {
		if (off < size) {
			size_t n = size - off < chunk ? size - off : chunk;
			ssize_t k = send(sp[1], data + off, n, MSG_NOSIGNAL);
			if (k > 0)
				off += (size_t)k;
			else if (k < 0 && errno != EAGAIN && errno != EINTR)
				break;
		} else {
			shutdown(sp[1], SHUT_WR);
			open = false;
		}
		for (;;) {
			struct dg_err err = {{0}};
			uint32_t type = 0;
			const uint8_t *msg = NULL;
			size_t len = 0;
			if (owner) {
				r = dg_worker_recv(&w, &type, &msg, &len, &err);
			} else {
				r = dg_ipc_read(w.ctl, w.rd, &err);
				if (r == 1) {
					type = w.rd->type;
					msg = w.rd->buf;
					len = w.rd->len;
				}
			}
			if (r < 0)
				DG_FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", r);
			if (r != 1)
				break;
			DG_FUZZ_CHECK(len <= dg_ipc_max(type), "message of %zu bytes, type %u", len,
				      type);
			DG_FUZZ_CHECK(msg[len] == '\0', "payload not NUL-terminated in place");
			if (owner && type == DG_MSG_REQUEST) {
				struct dg_decision d;
				json_t *req = NULL;
				int k = dg_worker_answer_request(sink[0], &policy, msg, len, &d, &req,
								 &err);
				DG_FUZZ_CHECK(k == 0 || k == -EPROTO, "answer_request: %d", k);
				if (k == 0)
					DG_FUZZ_CHECK(d.verdict != DG_VERDICT_ASK,
						      "a browser request left waiting for approval");
				json_decref(req);
				drain(sink[1]);
			} else if (!owner && type == DG_MSG_ACTION) {
				json_t *m = json_loadb((const char *)msg, len, JSON_REJECT_DUPLICATES,
						       NULL);
				json_t *action = json_object_get(m, "action");
				if (json_is_object(action)) {
					struct dg_action a;
					dg_action_parse_obj(action, 1280, 800, &a, &err);
					dg_action_free(&a);
				}
				json_decref(m);
			} else if (!owner && type == DG_MSG_VERDICT) {
				dg_guard_verdict(guard, (const char *)msg, len, &err);
			}
		}
	}
	close(sp[1]);
	dg_worker_stop(&w);
	close(sink[0]);
	close(sink[1]);
}

/* 2: a fake worker on a thread: writes the input, reads whatever comes. */
struct fake_worker {
	int fd;
	const uint8_t *data;
	size_t size;
};

static void *fake_worker_run(void *arg)
{
	struct fake_worker *f = arg;
	write_all(f->fd, f->data, f->size);
	shutdown(f->fd, SHUT_WR);
	drain(f->fd); /* until the helper closes its end */
	return NULL;
}

static void on_event(void *arg, const char *json)
{
	(void)arg;
	DG_FUZZ_CHECK(json != NULL, "event without text");
}

static void helpers(const uint8_t *data, size_t size, uint8_t param)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp))
		abort();
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	struct dg_worker w;
	memset(&w, 0, sizeof(w));
	w.pid = w.pidfd = -1;
	w.ctl = sp[0];
	w.next_id = 1;
	w.policy = (param & 2) ? &policy : NULL;
	w.rd = calloc(1, sizeof(*w.rd));
	DG_FUZZ_CHECK(w.rd, "out of memory");
	struct fake_worker f = {sp[1], data, size};
	pthread_t t;
	if (pthread_create(&t, NULL, fake_worker_run, &f) != 0)
		abort();
	struct dg_err err = {{0}};
	if (param & 1) {
		int r = dg_worker_wait_ready(&w, 5000, &err);
		DG_FUZZ_CHECK(r <= 0, "wait_ready: %d", r);
		if (r == 0)
			DG_FUZZ_CHECK(w.ready != NULL, "ready without the message");
	} else {
		char *result = NULL;
		uint8_t *png = NULL;
		size_t png_len = 0;
		int r = dg_worker_act(&w, "{\"type\":\"screenshot\"}", 0, 0, 5000, &result, &png,
				      &png_len, on_event, NULL, &err);
		DG_FUZZ_CHECK(r <= 0, "act: %d", r);
		if (r == 0)
			DG_FUZZ_CHECK(result != NULL, "act without a result");
		free(result);
		free(png);
	}
	dg_worker_stop(&w); /* closes ctl: the fake worker's drain ends */
	pthread_join(t, NULL);
	close(sp[1]);
}

/* 3: datagrams. */
static void datagrams(const uint8_t *data, size_t size, uint8_t param)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp))
		abort();
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	int which = param % 3;
	struct dg_spawner spawner = {.pid = -1, .fd = sp[0]};
	struct dg_egress egress = {.pid = -1, .fd = sp[0]};
	char *buf = malloc(DG_SEQ_MAX + 1);
	char *big = NULL;
	DG_FUZZ_CHECK(buf, "out of memory");
	size_t off = 0;
	bool more = true;
	while (more) {
		if (off + 3 <= size) {
			uint8_t flags = data[off];
			size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
			off += 3;
			if (len > size - off)
				len = size - off;
			const uint8_t *payload = data + off;
			off += len;
			size_t send_len = len;
			if (flags & 8) { /* past the cap: the receiver sees a truncation */
				send_len = DG_SEQ_MAX + 1 + len;
				free(big);
				big = calloc(1, send_len);
				DG_FUZZ_CHECK(big, "out of memory");
				if (len)
					memcpy(big, payload, len);
				payload = (const uint8_t *)big;
			}
			int nfds = flags & 7;
			int fds[7];
			for (int i = 0; i < nfds; i++)
				fds[i] = devnull;
			struct iovec iov = {(void *)payload, send_len};
			union {
				char b[CMSG_SPACE(sizeof(int) * 7)];
				struct cmsghdr align;
			} ctl;
			struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
			if (nfds) {
				memset(&ctl, 0, sizeof(ctl));
				m.msg_control = ctl.b;
				m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
				struct cmsghdr *c = CMSG_FIRSTHDR(&m);
				c->cmsg_level = SOL_SOCKET;
				c->cmsg_type = SCM_RIGHTS;
				c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
				memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
			}
			if (sendmsg(sp[1], &m, MSG_NOSIGNAL) < 0)
				break;
		} else {
			close(sp[1]);
			sp[1] = -1;
			more = false;
		}
		for (;;) {
			struct dg_err err = {{0}};
			int fds[DG_SEQ_FDS_MAX], nfds = 0, r;
			size_t len = 0;
			json_t *msg = NULL;
			if (which == 0) {
				r = dg_seq_recv(sp[0], buf, DG_SEQ_MAX + 1, &len, fds, &nfds, &err);
				if (r == 1) {
					DG_FUZZ_CHECK(len <= DG_SEQ_MAX && buf[len] == '\0',
						      "datagram of %zu bytes", len);
					DG_FUZZ_CHECK(nfds >= 0 && nfds <= DG_SEQ_FDS_MAX, "%d fds", nfds);
					for (int i = 0; i < nfds; i++)
						close(fds[i]);
				} else {
					DG_FUZZ_CHECK(nfds == 0, "%d fds handed over with %d", nfds, r);
				}
			} else if (which == 1) {
				struct dg_spawn_msg sm;
				r = dg_spawner_recv(&spawner, &sm, fds, &nfds, &err);
				if (r == 1) {
					DG_FUZZ_CHECK(sm.type >= DG_SPAWN_CREATED &&
						      dg_spawn_fds(sm.type) == nfds,
						      "a reply of type %u with %d fds", (unsigned)sm.type,
						      nfds);
					for (int i = 0; i < nfds; i++)
						close(fds[i]);
				}
			} else {
				r = dg_egress_recv(&egress, &msg, &err);
				if (r == 1)
					DG_FUZZ_CHECK(json_is_object(msg), "an event that is no object");
			}
			json_decref(msg);
			if (r < 0)
				DG_FUZZ_CHECK(err.msg[0] != '\0', "error %d without a message", r);
			if (r != 1)
				break;
		}
	}
	free(big);
	free(buf);
	if (sp[1] >= 0)
		close(sp[1]);
	close(sp[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int fds_before = dg_fuzz_fd_begin();
	uint8_t sel = data[0] % 5, param = data[1];
	data += 2;
	size -= 2;
	struct dg_err err = {{0}};
	switch (sel) {
	case 0:
	case 1:
		stream(sel == 0, data, size, param);
		break;
	case 2:
		helpers(data, size, param);
		break;
	case 3:
		datagrams(data, size, param);
		break;
	case 4: {
		char *msg = dg_fuzz_dup(data, size);
		int r = dg_guard_verdict(guard, msg, size, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPROTO, "dg_guard_verdict: %d", r);
		int sink[2];
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sink))
			abort();
		struct dg_decision d;
		r = dg_worker_answer_request(sink[0], (param & 1) ? &policy : NULL,
					     (const uint8_t *)msg, size, &d, NULL, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPROTO, "dg_worker_answer_request: %d", r);
		struct dg_cdp_decide q;
		r = dg_cdp_decide_decode(data, size, &q, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPROTO, "dg_cdp_decide_decode: %d", r);
		if (r == 0) {
			DG_FUZZ_CHECK(q.req != 0 && dg_cdp_method_ok(q.method) &&
				      strlen(q.session) <= DG_CDP_SESSION_MAX,
				      "dg_cdp_decide_decode let through req %llu, method %s",
				      (unsigned long long)q.req, q.method);
			dg_cdp_decide_free(&q);
		}
		struct dg_cdp_verdict v;
		r = dg_cdp_verdict_decode(data, size, &v, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPROTO, "dg_cdp_verdict_decode: %d", r);
		DG_FUZZ_CHECK(r != 0 || !v.cache || v.allow, "a kept refusal");
		close(sink[0]);
		close(sink[1]);
		free(msg);
		break;
	}
	}
	dg_fuzz_fd_end(fds_before);
	return 0;
}
