#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "desktop/proto/proto.h"

size_t dg_ipc_max(uint32_t type)
{
	switch (type) {
	case DG_MSG_ACTION:
	case DG_MSG_READY:
	case DG_MSG_RESULT:
	case DG_MSG_EVENT:
	case DG_MSG_REQUEST:
		return DG_IPC_JSON_MAX;
	case DG_MSG_VERDICT:
		return DG_IPC_VERDICT_MAX;
	case DG_MSG_FRAME:
		return DG_IPC_FRAME_MAX;
	case DG_MSG_CDP_FRAME:
		return DG_CDP_FRAME_HDR + DG_IPC_FRAME_MAX;
	case DG_MSG_CDP_IN:
	case DG_MSG_CDP_OUT:
		return DG_IPC_CDP_MAX;
	case DG_MSG_CDP_DECIDE:
	case DG_MSG_CDP_NOTE:
		return DG_IPC_CDP_DECIDE_MAX;
	case DG_MSG_CDP_OPEN:
	case DG_MSG_CDP_CLOSE:
	case DG_MSG_CDP_DROP:
	case DG_MSG_CDP_VERDICT:
	case DG_MSG_CDP_FORGET:
		return DG_IPC_CDP_SMALL_MAX;
	default:
		return 0;
	}
}

int dg_ipc_send_prefixed(int fd, uint32_t type, const void *pre, size_t pre_len, const void *data,
			  size_t len)
{
	size_t max = dg_ipc_max(type);
	if (max == 0)
		return -EINVAL;
	if (len > max || pre_len > max - len)
		return -EMSGSIZE;
	uint32_t hdr[2] = {type, (uint32_t)(pre_len + len)};
	struct iovec iov[3] = {{hdr, sizeof(hdr)}, {(void *)pre, pre_len}, {(void *)data, len}};
	size_t total = sizeof(hdr) + pre_len + len, sent = 0;
	while (sent < total) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = 3};
		/* MSG_NOSIGNAL: a dead peer is an error to report, not a signal. */
		ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (k < 0 && errno == ENOTSOCK)
			k = writev(fd, iov, 3);
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
		for (int i = 0; i < 3; i++) {
			size_t d = skip < iov[i].iov_len ? skip : iov[i].iov_len;
			if (d == 0)
				continue; /* an empty part may have no base (NULL + 0 is UB) */
			iov[i].iov_base = (char *)iov[i].iov_base + d;
			iov[i].iov_len -= d;
			skip -= d;
		}
	}
	return 0;
}

int dg_ipc_send(int fd, uint32_t type, const void *data, size_t len)
{
	return dg_ipc_send_prefixed(fd, type, NULL, 0, data, len);
}

/* Moves what was read ahead into p (up to want, counting in *got). */
static void take(struct dg_ipc_reader *r, void *p, size_t want, size_t *got)
{
	size_t have = r->ahead_len - r->ahead_pos, n = want - *got;
	if (n > have)
		n = have;
	if (n == 0)
		return;
	memcpy((char *)p + *got, r->ahead + r->ahead_pos, n);
	r->ahead_pos += n;
	*got += n;
	if (r->ahead_pos == r->ahead_len)
		r->ahead_pos = r->ahead_len = 0;
}

/* Fills p[*got..want) from what was read ahead, then from fd: into the
 * read-ahead buffer, or straight into p when at least DG_IPC_READAHEAD
 * bytes are missing. 1 when complete, 0 when fd has no more for now, or
 * a negative errno (-EPIPE at end of stream). */
static int fill(int fd, struct dg_ipc_reader *r, void *p, size_t want, size_t *got)
{
	for (;;) {
		take(r, p, want, got);
		if (*got == want)
			return 1;
		if (r->batch && r->drained) {
			r->batch = r->drained = false;
			return 0;
		}
		bool direct = want - *got >= DG_IPC_READAHEAD;
		if (!direct && !r->ahead && !(r->ahead = malloc(DG_IPC_READAHEAD)))
			return -ENOMEM;
		void *dst = direct ? (void *)((char *)p + *got) : (void *)r->ahead;
		size_t ask = direct ? want - *got : DG_IPC_READAHEAD;
		ssize_t k = read(fd, dst, ask);
		if (k == 0)
			return -EPIPE;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				r->batch = r->drained = false;
				return 0;
			}
			return -errno;
		}
		if ((size_t)k < ask)
			r->drained = r->batch;
		if (direct)
			*got += (size_t)k;
		else
			r->ahead_len = (size_t)k;
	}
}

void dg_ipc_read_begin(struct dg_ipc_reader *r)
{
	r->batch = true;
	r->drained = false;
}

bool dg_ipc_pending(const struct dg_ipc_reader *r)
{
	return r->ahead_len > r->ahead_pos;
}

/* A failed read, as the caller's error. A peer that dies with bytes of ours
 * still unread (a worker killed while an action waited for it) makes the
 * read fail with ECONNRESET rather than end the stream: that is the peer
 * gone too, reported as -EPIPE like a clean close. Every error carries a
 * message. */
static int read_error(int k, const char *closed, struct dg_err *err)
{
	if (k == -EPIPE || k == -ECONNRESET)
		return dg_err_set(err, -EPIPE, "%s", closed);
	return dg_err_set(err, k, "ipc: read: %s", strerror(-k));
}

int dg_ipc_read(int fd, struct dg_ipc_reader *r, struct dg_err *err)
{
	if (r->hdr_got < DG_IPC_HEADER) {
		int k = fill(fd, r, r->hdr, DG_IPC_HEADER, &r->hdr_got);
		if (k < 0)
			return read_error(k, "ipc: peer closed the channel", err);
		if (k == 0)
			return 0;
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
	int k = fill(fd, r, r->buf, r->len, &r->got);
	if (k < 0)
		return read_error(k, "ipc: peer closed mid-message", err);
	if (k == 0)
		return 0;
	r->buf[r->len] = '\0';
	r->hdr_got = 0;
	return 1;
}

void dg_ipc_reader_free(struct dg_ipc_reader *r)
{
	free(r->buf);
	free(r->ahead);
	memset(r, 0, sizeof(*r));
}

int dg_seq_send(int fd, const char *data, size_t len, const int *fds, int nfds)
{
	if (len > DG_SEQ_MAX || nfds < 0 || nfds > DG_SEQ_FDS_MAX)
		return -EMSGSIZE;
	struct iovec iov = {(void *)data, len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * DG_SEQ_FDS_MAX)];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	for (;;) {
		ssize_t k = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (k == (ssize_t)len)
			return 0;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN) {
			struct pollfd p = {fd, POLLOUT, 0};
			poll(&p, 1, 100);
			continue;
		}
		return k < 0 ? -errno : -EIO;
	}
}

int dg_seq_recv(int fd, char *buf, size_t cap, size_t *len, int *fds, int *nfds,
		struct dg_err *err)
{
	*len = 0;
	*nfds = 0;
	struct iovec iov = {buf, cap - 1};
	union {
		char buf[CMSG_SPACE(sizeof(int) * DG_SEQ_FDS_MAX)];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			   .msg_controllen = sizeof(ctl.buf)};
	ssize_t k;
	do
		k = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return errno == EAGAIN ? 0 : dg_err_set(err, -errno, "ipc: recvmsg: %s", strerror(errno));
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int got[DG_SEQ_FDS_MAX];
		if (n > DG_SEQ_FDS_MAX)
			n = DG_SEQ_FDS_MAX;
		memcpy(got, CMSG_DATA(c), n * sizeof(int));
		for (size_t i = 0; i < n; i++)
			fds[(*nfds)++] = got[i];
	}
	if (k == 0 && *nfds == 0)
		return dg_err_set(err, -EPIPE, "ipc: peer closed the channel");
	if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)k > DG_SEQ_MAX) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return dg_err_set(err, -EPROTO, "ipc: oversized or truncated datagram");
	}
	buf[k] = '\0';
	*len = (size_t)k;
	return 1;
}
