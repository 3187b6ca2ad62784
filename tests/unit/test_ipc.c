/* ipc: the typed, length-prefixed messages between owner and worker, seen
 * from the owner, against a fake worker (the test's end of a socketpair).
 *
 * A malformed message from the worker (unknown type, over its type's cap, a
 * message the worker may not send, a stream cut mid-message) is an error the
 * owner gets back from dg_worker_recv / dg_worker_act at once, with a
 * message; the owner then stops that worker. The reader never allocates for
 * a header it refuses and never past the type's cap.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "dg_test.h"

/* An owner-side handle on a fake worker: w->ctl is the owner's end, *peer
 * the worker's. No process unless the test starts one. */
static void fake_worker(struct dg_worker *w, int *peer)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	memset(w, 0, sizeof(*w));
	w->pid = -1;
	w->pidfd = -1;
	w->ctl = sp[0];
	w->next_id = 1;
	fcntl(w->ctl, F_SETFL, O_NONBLOCK);
	w->rd = calloc(1, sizeof(*w->rd));
	cr_assert(w->rd);
	*peer = sp[1];
}

static void put_header(int fd, uint32_t type, uint32_t len)
{
	uint32_t h[2] = {type, len};
	cr_assert_eq(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
}

/* Polls for a message (bounded): the first non-zero dg_worker_recv code. */
static int recv_wait(struct dg_worker *w, uint32_t *type, const uint8_t **data, size_t *len,
		     struct dg_err *err)
{
	for (int i = 0; i < 500; i++) {
		int r = dg_worker_recv(w, type, data, len, err);
		if (r != 0)
			return r;
		struct pollfd p = {w->ctl, POLLIN, 0};
		poll(&p, 1, 10);
	}
	return 0;
}

Test(ipc, a_message_round_trips)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	const char *json = "{\"event\":\"ready\"}";
	cr_assert_eq(dg_ipc_send(peer, DG_MSG_READY, json, strlen(json)), 0);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), 1, "%s", err.msg);
	cr_assert_eq(type, DG_MSG_READY);
	cr_assert_eq(len, strlen(json));
	cr_assert_str_eq((const char *)data, json, "payload is NUL-terminated in place");
	/* Nothing more: 0, not an error. */
	cr_assert_eq(dg_worker_recv(&w, &type, &data, &len, &err), 0);
	dg_worker_stop(&w);
	close(peer);
}

Test(ipc, unknown_types_are_refused_without_allocating)
{
	const uint32_t types[] = {0, DG_MSG_TYPE_MAX + 1, 99, 0xffffffffu};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct dg_worker w;
		int peer;
		fake_worker(&w, &peer);
		put_header(peer, types[i], 4);
		cr_assert_eq(write(peer, "abcd", 4), 4);
		struct dg_err err = {{0}};
		uint32_t type;
		const uint8_t *data;
		size_t len;
		cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPROTO, "type %u", types[i]);
		char want[64];
		snprintf(want, sizeof(want), "unknown message type %u", types[i]);
		cr_assert(strstr(err.msg, want), "error: %s", err.msg);
		cr_assert_null(w.rd->buf);
		cr_assert_eq(w.rd->cap, 0);
		dg_worker_stop(&w);
		close(peer);
	}
}

Test(ipc, oversized_messages_are_refused_without_allocating)
{
	const struct {
		uint32_t type, len;
	} cases[] = {
		{DG_MSG_READY, DG_IPC_JSON_MAX + 1},  {DG_MSG_RESULT, DG_IPC_JSON_MAX + 1},
		{DG_MSG_EVENT, DG_IPC_JSON_MAX + 1},  {DG_MSG_FRAME, DG_IPC_FRAME_MAX + 1},
		{DG_MSG_RESULT, 0xffffffffu},         {DG_MSG_FRAME, 0xffffffffu},
		{DG_MSG_REQUEST, DG_IPC_JSON_MAX + 1},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dg_worker w;
		int peer;
		fake_worker(&w, &peer);
		put_header(peer, cases[i].type, cases[i].len);
		struct dg_err err = {{0}};
		uint32_t type;
		const uint8_t *data;
		size_t len;
		cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPROTO, "type %u, %u bytes",
			     cases[i].type, cases[i].len);
		char want[64];
		snprintf(want, sizeof(want), "is %u bytes (cap %zu)", cases[i].len,
			 dg_ipc_max(cases[i].type));
		cr_assert(strstr(err.msg, want), "error: %s", err.msg);
		cr_assert_null(w.rd->buf, "a buffer was allocated for a refused header");
		cr_assert_eq(w.rd->cap, 0);
		dg_worker_stop(&w);
		close(peer);
	}
}

struct writer {
	int fd;
	uint32_t type;
	const uint8_t *data;
	size_t len;
	int r;
};

static void *writer_main(void *arg)
{
	struct writer *wr = arg;
	wr->r = dg_ipc_send(wr->fd, wr->type, wr->data, wr->len);
	return NULL;
}

Test(ipc, a_message_at_the_cap_is_accepted_and_bounds_the_buffer)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	uint8_t *big = malloc(DG_IPC_JSON_MAX);
	cr_assert(big);
	memset(big, 'x', DG_IPC_JSON_MAX);
	struct writer wr = {peer, DG_MSG_EVENT, big, DG_IPC_JSON_MAX, -1};
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, writer_main, &wr), 0);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), 1, "%s", err.msg);
	pthread_join(th, NULL);
	cr_assert_eq(wr.r, 0);
	cr_assert_eq(type, DG_MSG_EVENT);
	cr_assert_eq(len, DG_IPC_JSON_MAX);
	cr_assert_eq(memcmp(data, big, len), 0);
	cr_assert_leq(w.rd->cap, DG_IPC_JSON_MAX + 1, "buffer %zu bytes", w.rd->cap);
	/* One byte more is refused by the sender too, and nothing is sent. */
	big = realloc(big, DG_IPC_JSON_MAX + 1);
	cr_assert(big);
	cr_assert_eq(dg_ipc_send(peer, DG_MSG_EVENT, big, DG_IPC_JSON_MAX + 1), -EMSGSIZE);
	cr_assert_eq(dg_ipc_send(peer, 99, "x", 1), -EINVAL);
	cr_assert_eq(dg_worker_recv(&w, &type, &data, &len, &err), 0);
	free(big);
	dg_worker_stop(&w);
	close(peer);
}

Test(ipc, a_stream_cut_mid_header_is_an_error)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	uint32_t h[2] = {DG_MSG_RESULT, 10};
	cr_assert_eq(write(peer, h, 5), 5);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(dg_worker_recv(&w, &type, &data, &len, &err), 0, "half a header is not a message");
	close(peer);
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPIPE);
	cr_assert(strstr(err.msg, "peer closed"), "error: %s", err.msg);
	dg_worker_stop(&w);
}

Test(ipc, a_stream_cut_mid_payload_is_an_error)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	put_header(peer, DG_MSG_RESULT, 100);
	cr_assert_eq(write(peer, "{\"id\":1,", 8), 8);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(dg_worker_recv(&w, &type, &data, &len, &err), 0);
	cr_assert_leq(w.rd->cap, 101, "buffer %zu bytes for a 100-byte message", w.rd->cap);
	close(peer);
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPIPE);
	cr_assert(strstr(err.msg, "mid-message"), "error: %s", err.msg);
	dg_worker_stop(&w);
}

Test(ipc, an_owner_only_message_from_the_worker_is_refused)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	const char *json = "{\"id\":1,\"action\":{\"type\":\"screenshot\"}}";
	cr_assert_eq(dg_ipc_send(peer, DG_MSG_ACTION, json, strlen(json)), 0);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPROTO);
	cr_assert(strstr(err.msg, "owner-only"), "error: %s", err.msg);
	dg_worker_stop(&w);
	close(peer);
}

/* dg_worker_act, which waits for its answer, returns at once (not after its
 * timeout) when the answer is malformed. */
Test(ipc, act_fails_at_once_on_a_malformed_answer)
{
	const struct {
		uint32_t type, len;
		const char *cause;
	} cases[] = {
		{77, 0, "unknown message type 77"},
		{DG_MSG_FRAME, 4, "unexpected message type 4"}, /* a frame without its result */
		{DG_MSG_RESULT, DG_IPC_JSON_MAX + 1, "cap"},
		{DG_MSG_READY, 2, "unexpected message type 2"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct dg_worker w;
		int peer;
		fake_worker(&w, &peer);
		put_header(peer, cases[i].type, cases[i].len);
		if (cases[i].len && cases[i].len <= 4)
			cr_assert_eq(write(peer, "{}{}", cases[i].len), (ssize_t)cases[i].len);
		struct dg_err err = {{0}};
		char *result = NULL;
		uint8_t *png = NULL;
		size_t png_len = 0;
		double t0 = dg_test_now();
		int r = dg_worker_act(&w, "{\"type\":\"screenshot\"}", 0, 0, 10000, &result, &png,
				      &png_len, NULL, NULL, &err);
		double took = dg_test_now() - t0;
		cr_assert_eq(r, -EPROTO, "case %zu: %d (%s)", i, r, err.msg);
		cr_assert(strstr(err.msg, cases[i].cause), "case %zu: %s", i, err.msg);
		cr_assert_lt(took, 1.0, "case %zu took %.2f s", i, took);
		cr_assert_null(png);
		free(result);
		dg_worker_stop(&w);
		close(peer);
	}
	/* The worker closing the channel while the owner waits: -EPIPE. */
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	put_header(peer, DG_MSG_RESULT, 50);
	cr_assert_eq(write(peer, "{\"id\":1", 7), 7);
	shutdown(peer, SHUT_WR);
	struct dg_err err = {{0}};
	char *result = NULL;
	uint8_t *png = NULL;
	size_t png_len = 0;
	cr_assert_eq(dg_worker_act(&w, "{\"type\":\"screenshot\"}", 0, 0, 10000, &result, &png,
				   &png_len, NULL, NULL, &err),
		     -EPIPE, "%s", err.msg);
	cr_assert(strstr(err.msg, "mid-message"), "%s", err.msg);
	dg_worker_stop(&w);
	close(peer);
}

/* The owner's answer to a protocol violation: dg_worker_stop ends that
 * worker (a real process here) and the owner carries on. */
Test(ipc, a_violating_worker_is_ended_by_stop)
{
	struct dg_worker w;
	int peer;
	fake_worker(&w, &peer);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		uint32_t h[2] = {DG_MSG_FRAME, DG_IPC_FRAME_MAX + 1};
		if (write(peer, h, sizeof(h)) != (ssize_t)sizeof(h))
			_exit(2);
		for (;;)
			pause();
	}
	w.pid = pid;
	w.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	cr_assert_geq(w.pidfd, 0);
	close(peer);
	struct dg_err err = {{0}};
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_eq(recv_wait(&w, &type, &data, &len, &err), -EPROTO, "%s", err.msg);
	dg_worker_stop(&w);
	cr_assert_eq(w.pid, -1);
	cr_assert_eq(kill(pid, 0), -1, "the violating worker still exists");
	cr_assert_eq(errno, ESRCH);
}
