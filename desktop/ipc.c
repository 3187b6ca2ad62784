#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "desktop/ipc-priv.h"

size_t dg_ipc_max(uint32_t type)
{
	switch (type) {
	case DG_MSG_ACTION:
	case DG_MSG_READY:
	case DG_MSG_RESULT:
	case DG_MSG_EVENT:
		return DG_IPC_JSON_MAX;
	case DG_MSG_FRAME:
		return DG_IPC_FRAME_MAX;
	default:
		return 0;
	}
}

int dg_ipc_send(int fd, uint32_t type, const void *data, size_t len)
{
	size_t max = dg_ipc_max(type);
	if (max == 0)
		return -EINVAL;
	if (len > max)
		return -EMSGSIZE;
	uint32_t hdr[2] = {type, (uint32_t)len};
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)data, len}};
	size_t total = sizeof(hdr) + len, sent = 0;
	while (sent < total) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
		/* MSG_NOSIGNAL: a dead peer is an error to report, not a signal. */
		ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (k < 0 && errno == ENOTSOCK)
			k = writev(fd, iov, 2);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				/* Non-blocking peer socket: wait for room. */
				struct timespec ts = {0, 200000};
				nanosleep(&ts, NULL);
				continue;
			}
			return -errno;
		}
		sent += (size_t)k;
		size_t skip = (size_t)k;
		for (int i = 0; i < 2; i++) {
			size_t d = skip < iov[i].iov_len ? skip : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + d;
			iov[i].iov_len -= d;
			skip -= d;
		}
	}
	return 0;
}

static int fill(int fd, void *p, size_t want, size_t *got)
{
	while (*got < want) {
		ssize_t k = read(fd, (char *)p + *got, want - *got);
		if (k == 0)
			return -EPIPE;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		*got += (size_t)k;
	}
	return 1;
}

int dg_ipc_read(int fd, struct dg_ipc_reader *r, struct dg_err *err)
{
	if (r->hdr_got < DG_IPC_HEADER) {
		int k = fill(fd, r->hdr, DG_IPC_HEADER, &r->hdr_got);
		if (k <= 0)
			return k == -EPIPE ? dg_err_set(err, -EPIPE, "ipc: peer closed the channel") : k;
		uint32_t h[2];
		memcpy(h, r->hdr, sizeof(h));
		size_t max = dg_ipc_max(h[0]);
		if (max == 0)
			return dg_err_set(err, -EPROTO, "ipc: unknown message type %u", h[0]);
		if (h[1] > max)
			return dg_err_set(err, -EPROTO, "ipc: message of type %u is %u bytes (cap %zu)",
					  h[0], h[1], max);
		r->type = h[0];
		r->len = h[1];
		r->got = 0;
		/* One spare byte so JSON payloads can be NUL-terminated in place. */
		if (r->cap < r->len + 1) {
			uint8_t *nb = realloc(r->buf, r->len + 1);
			if (!nb)
				return dg_err_set(err, -ENOMEM, "ipc: out of memory for %zu bytes", r->len);
			r->buf = nb;
			r->cap = r->len + 1;
		}
	}
	int k = fill(fd, r->buf, r->len, &r->got);
	if (k <= 0)
		return k == -EPIPE ? dg_err_set(err, -EPIPE, "ipc: peer closed mid-message") : k;
	r->buf[r->len] = '\0';
	r->hdr_got = 0;
	return 1;
}

void dg_ipc_reader_free(struct dg_ipc_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}
