/* Typed, length-prefixed messages between deskgate's processes (owner and
 * worker today; spawner and egress later). Every channel is an inherited
 * socketpair: no path names it.
 *
 * A message is an 8-byte header {u32 type, u32 length} in host byte order
 * (both ends are on one machine) followed by length bytes. Each type has its
 * own size cap; a message of an unknown type or over its cap is a protocol
 * violation: the receiver stops talking to that peer (and, when the peer is
 * less trusted, ends it). It never grows a buffer past the cap.
 */
#ifndef DG_IPC_PRIV_H
#define DG_IPC_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"

enum dg_msg_type {
	DG_MSG_ACTION = 1, /* owner -> worker: {"id":N,"action":{canonical action}} */
	DG_MSG_READY = 2,  /* worker -> owner: {"width":W,"height":H,"profile":P} */
	DG_MSG_RESULT = 3, /* worker -> owner: the outcome of one action (JSON) */
	DG_MSG_FRAME = 4,  /* worker -> owner: a PNG, right after the RESULT it belongs to */
	DG_MSG_EVENT = 5,  /* worker -> owner: something happened on its own (JSON) */
	DG_MSG_REQUEST = 6, /* worker -> owner: a browser request held for a verdict:
			     * {"req":N,"url":U,"method":M,"resource":R,"target":T} */
	DG_MSG_VERDICT = 7, /* owner -> worker: {"req":N,"allow":BOOL} */
	DG_MSG_TYPE_MAX = 7,
};

#define DG_IPC_HEADER 8
#define DG_IPC_JSON_MAX (1024u * 1024)        /* ACTION, READY, RESULT, EVENT, REQUEST */
#define DG_IPC_VERDICT_MAX 256                /* VERDICT */
#define DG_IPC_FRAME_MAX (48u * 1024 * 1024)  /* a PNG of the largest desktop */

/* The cap for a message type, or 0 for an unknown type. */
size_t dg_ipc_max(uint32_t type);

/* Sends one message; blocks until written (the peer is expected to read).
 * Returns 0 or a negative errno (-EPIPE when the peer is gone, -EMSGSIZE
 * over the cap). */
int dg_ipc_send(int fd, uint32_t type, const void *data, size_t len);

/* Incremental reader for a non-blocking descriptor. */
struct dg_ipc_reader {
	uint8_t hdr[DG_IPC_HEADER];
	size_t hdr_got;
	uint32_t type;
	uint8_t *buf;      /* owned; capacity grows up to the type's cap */
	size_t cap, len, got;
};

/* Reads what is available. Returns 1 when a whole message is ready (type in
 * r->type, payload in r->buf[0..r->len), valid until the next call), 0 when
 * more bytes are needed, -EPIPE at end of stream or when the peer is gone
 * (ECONNRESET), -EPROTO for an unknown type or an oversized message, or
 * another negative errno; err says which whenever the result is negative. */
int dg_ipc_read(int fd, struct dg_ipc_reader *r, struct dg_err *err);

void dg_ipc_reader_free(struct dg_ipc_reader *r);

/* ---- Datagram channel with descriptor passing (gateway <-> spawner) ----
 *
 * A SOCK_SEQPACKET socketpair: one message is one datagram, a JSON object of
 * at most DG_SEQ_MAX bytes, with up to DG_SEQ_FDS_MAX descriptors attached
 * (SCM_RIGHTS). A datagram that was truncated, or carries more descriptors
 * than asked for, is a protocol error; descriptors that arrived with it are
 * closed. */
#define DG_SEQ_MAX (64 * 1024)
#define DG_SEQ_FDS_MAX 4

int dg_seq_send(int fd, const char *json, size_t len, const int *fds, int nfds);

/* Receives one datagram into buf (cap bytes; NUL-terminated, so cap must
 * exceed DG_SEQ_MAX), descriptors into fds (close-on-exec). Returns 1, 0 when
 * none is waiting (non-blocking socket), -EPIPE at end of stream, -EPROTO. */
int dg_seq_recv(int fd, char *buf, size_t cap, size_t *len, int *fds, int *nfds,
		struct dg_err *err);

#endif
