/* proto: every channel between deskgate's processes, and each child
 * process's client side (the parent's half: OpenSSH's monitor_wrap idea).
 *
 * The processes are the gateway (gateway/), the spawner (desktop/spawner/,
 * root), the egress proxy (desktop/egress/) and one worker per desktop
 * (desktop/worker/). Every channel is an inherited socketpair: no path names
 * it. What crosses a channel is defined here and only here: the message
 * types and their size caps, the names both ends check (instance, session
 * ids, desktop profiles and sizes), the host ids each process runs as, and
 * the stubs a parent calls to talk to its child:
 *   the worker   dg_worker_* (worker-client.c): started by fork + exec of
 *                `deskgate worker` (desktop/worker/worker.h) by whoever holds
 *                its desktop, spoken to by whoever owns the session;
 *   the spawner  dg_spawner_request/recv/stop (spawner-client.c); forked by
 *                `deskgate serve` with dg_spawner_start (desktop/spawner/);
 *   the proxy    dg_egress_add/remove/recv/stop (egress-client.c); forked
 *                with dg_egress_start or, by the spawner, dg_egress_spawn
 *                (desktop/egress/egress.h).
 * Starting a forked child runs that child's own code, so the start
 * functions live with the child; this folder links none of them.
 *
 * Framing (ipc.c). A stream message is an 8-byte header {u32 type, u32
 * length} in host byte order (both ends are on one machine) followed by
 * length bytes. Each type has its own size cap; a message of an unknown type
 * or over its cap is a protocol violation: the receiver stops talking to
 * that peer (and, when the peer is less trusted, ends it). It never grows a
 * buffer past the cap. The spawner's and the proxy's channels are datagram
 * channels with descriptor passing (dg_seq_*, below).
 */
#ifndef DG_PROTO_H
#define DG_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"

/* Named here, not included: the spawner (root, desktop/spawner/) includes
 * this header and must see no JSON parser; whoever calls the functions
 * that take them includes <jansson.h> and policy/policy.h itself. */
struct json_t;
struct dg_policy;
struct dg_decision;

/* ---- host ids: who runs as whom (names.c) ------------------------------ */

/* Host uids/gids given to jails: slot N maps the jail's user to
 * DG_JAIL_ID_BASE + N on the host. The range is far above ordinary and
 * subordinate (/etc/subuid) ranges, so the ids own no files on the host. */
#define DG_JAIL_ID_BASE 0x60000000u
#define DG_JAIL_SLOTS 65536u

/* Worker uids follow the jail uids: the worker of the jail in slot N runs as
 * DG_WORKER_ID_BASE + N, neither the owner's uid nor the jail's. */
#define DG_WORKER_ID_BASE (DG_JAIL_ID_BASE + DG_JAIL_SLOTS)

/* The gateway's and the egress proxy's host uids (each also the gid) are
 * the instance's (dg_instance_gateway_uid, dg_instance_egress_uid): instance
 * I's pair is DG_INSTANCE_ID_BASE + 2 * (FNV-1a of I's name mod
 * DG_INSTANCE_IDS), gateway first. So an instance keeps its uids across
 * restarts (its recordings stay readable to it), and instances beside each
 * other share none: a gateway cannot read another instance's recordings,
 * nor signal or trace its egress proxy. Two names can hash to the same pair
 * (about 1 in 32768 for two instances): `deskgate serve` refuses to start
 * beside a running instance that holds its pair (docs/scale-out.md). The
 * range sits below the jails'; before instances had uids of their own,
 * every gateway ran as DG_INSTANCE_LEGACY_GATEWAY_UID (0x5fffffff), now an
 * egress proxy's uid, and every egress proxy as 0x5ffffffe. */
#define DG_INSTANCE_IDS 32768u
#define DG_INSTANCE_ID_BASE (DG_JAIL_ID_BASE - 2u * DG_INSTANCE_IDS)
#define DG_INSTANCE_LEGACY_GATEWAY_UID (DG_JAIL_ID_BASE - 1u)

/* ---- the instance (names.c) --------------------------------------------- */

/* The instance: the name of one deskgate (a gateway, an exec, a test run) on
 * this host. Slots (and so uids) are shared by every instance on a host
 * through the slot locks; the instance says whose a jail is: its cgroups
 * live under deskgate/<instance>/, its slot lock names it, its worker
 * carries it (argv), so that instances beside each other (a user's gateway,
 * CI, a second gateway) never take each other's jails for their own.
 * Grammar: [a-z0-9][a-z0-9-]*, at most DG_INSTANCE_MAX bytes, not starting
 * with "jail-". */
#define DG_INSTANCE_MAX 32
#define DG_INSTANCE_ENV "DESKGATE_INSTANCE"
#define DG_INSTANCE_FALLBACK "deskgate"

bool dg_instance_valid(const char *id);

/* Sets this process's instance; -EINVAL (err says why) for a bad name.
 * Call before the first jail starts. */
int dg_instance_set(const char *id, struct dg_err *err);

/* Chooses the instance from the environment: DESKGATE_INSTANCE when set
 * (-EINVAL when it is not a valid name), else the host name made valid
 * (lowercase, other bytes as '-', cut at DG_INSTANCE_MAX), else
 * DG_INSTANCE_FALLBACK. Programs call it once at start. */
int dg_instance_init(struct dg_err *err);

/* This process's instance (dg_instance_init's choice when nothing set it). */
const char *dg_instance(void);

/* The gateway uid of the instance named id (see DG_INSTANCE_IDS): a pure
 * function of the name. */
uint32_t dg_instance_uid_of(const char *id);

/* This process's instance's gateway uid, and its egress proxy's (the next
 * one). */
uint32_t dg_instance_gateway_uid(void);
uint32_t dg_instance_egress_uid(void);

/* ---- sessions and desktops (names.c) ------------------------------------ */

/* A session id is its gateway's instance, '-', and 32 random lowercase hex
 * digits ("c1-ae235e93..."): the instance is everything before the last
 * '-' (the hex part has none), so a balancer routes a session's requests to
 * its host from the id alone (docs/scale-out.md). Ids are [a-z0-9-]. */
#define DG_SESSION_ID_MAX 80          /* [a-z0-9-] */
#define DG_SESSION_ID_RANDOM_HEX 32   /* the random part */
_Static_assert(DG_INSTANCE_MAX + 1 + DG_SESSION_ID_RANDOM_HEX <= DG_SESSION_ID_MAX,
	       "a session id holds the longest instance");

bool dg_session_id_valid(const char *id);

enum dg_profile { DG_PROFILE_XTERM = 0, DG_PROFILE_BROWSER = 1 };

#define DG_DESKTOP_WIDTH_DEFAULT 1280
#define DG_DESKTOP_HEIGHT_DEFAULT 800
#define DG_DESKTOP_WIDTH_MIN 320
#define DG_DESKTOP_HEIGHT_MIN 200
#define DG_DESKTOP_WIDTH_MAX 3840
#define DG_DESKTOP_HEIGHT_MAX 2160
/* "xterm" or "browser". Returns 0 or -EINVAL. */
int dg_profile_parse(const char *name, enum dg_profile *p);
const char *dg_profile_name(enum dg_profile p);

/* Parses "WxH" within the desktop bounds. */
int dg_desktop_parse_size(const char *text, int *w, int *h, struct dg_err *err);

/* ---- framing (ipc.c) ----------------------------------------------------- */

enum dg_msg_type {
	DG_MSG_ACTION = 1, /* owner -> worker: {"id":N,"action":{canonical action}} */
	DG_MSG_READY = 2,  /* worker -> owner: {"width":W,"height":H,"profile":P} */
	DG_MSG_RESULT = 3, /* worker -> owner: the outcome of one action (JSON) */
	DG_MSG_FRAME = 4,  /* worker -> owner: a PNG, right after the RESULT it belongs to */
	DG_MSG_EVENT = 5,  /* worker -> owner: something happened on its own (JSON) */
	DG_MSG_REQUEST = 6, /* worker -> owner: a browser request held for a verdict:
			     * {"req":N,"url":U,"method":M,"resource":R,"target":T} */
	DG_MSG_VERDICT = 7, /* owner -> worker: {"req":N,"allow":BOOL} */
	/* The CDP endpoint (docs/cdp.md): the owner relays each CDP client's
	 * messages as bytes; the worker, which parses them, asks the owner to
	 * decide each command and sends the client its answers and events.
	 * The binary ones start with the client's number, a u32 in host order
	 * (DG_CDP_CLIENT_HDR bytes), chosen by the owner. */
	DG_MSG_CDP_OPEN = 8,    /* owner -> worker: u32 client: a client connected */
	DG_MSG_CDP_CLOSE = 9,   /* owner -> worker: u32 client: it went away */
	DG_MSG_CDP_IN = 10,     /* owner -> worker: u32 client, its message (unparsed) */
	DG_MSG_CDP_OUT = 11,    /* worker -> owner: u32 client, a message to send it */
	DG_MSG_CDP_DROP = 12,   /* worker -> owner: u32 client, why (text): close it
				 * (a malformed or oversized message) */
	DG_MSG_CDP_DECIDE = 13, /* worker -> owner: a command to decide and record: u64 req,
				 * u32 client, u8 n, the session (n bytes), then the command
				 * {"method":M, "action"?:{canonical action, screen
				 *  coordinates}, "code"?:JS, "url"?:U,
				 *  "params"?:{what the recording keeps}} */
	DG_MSG_CDP_VERDICT = 14, /* owner -> worker: {"req":N,"allow":B,"cache":B,"rule":R,
				  * "reason":W}; a refusal with rule DG_CDP_RULE_DOWNLOADS is
				  * answered to the client as done (not applied: see
				  * docs/cdp.md); cache: the same command (its bytes after the
				  * session) may be allowed again without asking */
	DG_MSG_CDP_NOTE = 15,   /* worker -> owner: as CDP_DECIDE, a command the worker
				 * allowed under a cached verdict: to record, not answered */
	DG_MSG_CDP_FRAME = 16,  /* worker -> owner: u64 first, u64 last, a PNG: the screen
				 * after CDP clients' commands first..last (their req
				 * numbers; 0, 0: none, the screen as a client opened) */
	DG_MSG_CDP_FORGET = 17, /* owner -> worker, empty: drop every cached verdict (an
				 * operator took control: no command is allowed unasked) */
	DG_MSG_TYPE_MAX = 17,
};

#define DG_IPC_HEADER 8
#define DG_IPC_JSON_MAX (1024u * 1024)        /* ACTION, READY, RESULT, EVENT, REQUEST */
#define DG_IPC_VERDICT_MAX 256                /* VERDICT */
#define DG_IPC_FRAME_MAX (48u * 1024 * 1024)  /* a PNG of the largest desktop */
#define DG_CDP_CLIENT_HDR 4                   /* the client number of a CDP message */
#define DG_CDP_RULE_DOWNLOADS "builtin.downloads" /* the rule refusing a download behavior
						   * (policy.h's DG_POLICY_RULE_DOWNLOADS) */
#define DG_CDP_CLIENT_MSG_MAX (16u * 1024 * 1024) /* bytes of one CDP message either way */
#define DG_CDP_CODE_MAX (4u * 1024 * 1024)   /* bytes of a script a command runs (the
					       * injected scripts of Playwright run to
					       * hundreds of KiB) */
#define DG_IPC_CDP_MAX (DG_CDP_CLIENT_HDR + DG_CDP_CLIENT_MSG_MAX) /* CDP_IN, CDP_OUT */
#define DG_IPC_CDP_DECIDE_MAX (DG_CDP_CODE_MAX + 64u * 1024)    /* CDP_DECIDE, CDP_NOTE */
#define DG_IPC_CDP_SMALL_MAX 1024             /* CDP_OPEN, CDP_CLOSE, CDP_DROP, CDP_VERDICT */
#define DG_CDP_FRAME_HDR 16                   /* CDP_FRAME: first, last; then the PNG */

/* The cap for a message type, or 0 for an unknown type. */
size_t dg_ipc_max(uint32_t type);

/* Sends one message; blocks until written (the peer is expected to read).
 * Returns 0 or a negative errno (-EPIPE when the peer is gone, -EMSGSIZE
 * over the cap). */
int dg_ipc_send(int fd, uint32_t type, const void *data, size_t len);
/* The same with pre (pre_len bytes) before data, as one message: a CDP
 * message's client number before its bytes, without a copy. */
int dg_ipc_send_prefixed(int fd, uint32_t type, const void *pre, size_t pre_len, const void *data,
			 size_t len);

/* Bytes the reader asks the descriptor for at once: small messages (a CDP
 * command, its reply, a verdict) then cost one read() for header and
 * payload, and several that came together one read() in all. A payload
 * at least this long is read straight into its buffer. */
#define DG_IPC_READAHEAD (16 * 1024)

/* Incremental reader for a non-blocking descriptor. */
struct dg_ipc_reader {
	uint8_t hdr[DG_IPC_HEADER];
	size_t hdr_got;
	uint32_t type;
	uint8_t *buf;      /* owned; capacity grows up to the type's cap */
	size_t cap, len, got;
	uint8_t *ahead;    /* owned; DG_IPC_READAHEAD bytes, allocated on first use */
	size_t ahead_pos, ahead_len; /* read from the descriptor, not taken yet */
	bool batch;        /* dg_ipc_read_begin was called: see there */
	bool drained;      /* in a batch, a read() returned less than it asked for */
};

/* Reads what is available. Returns 1 when a whole message is ready (type in
 * r->type, payload in r->buf[0..r->len), valid until the next call), 0 when
 * more bytes are needed, -EPIPE at end of stream or when the peer is gone
 * (ECONNRESET), -EPROTO for an unknown type or an oversized message, or
 * another negative errno; err says which whenever the result is negative.
 * Bytes may be read ahead of the message returned: a caller that polls
 * the descriptor between calls must first call until 0 is returned, or
 * check dg_ipc_pending (poll does not see bytes already read). */
int dg_ipc_read(int fd, struct dg_ipc_reader *r, struct dg_err *err);

/* For a caller that poll() just told the descriptor is readable and that
 * will call dg_ipc_read until it returns 0: within that batch, once a
 * read() returned less than it asked for (the stream was empty then), the
 * call that needs more bytes returns 0 without another read() that would
 * find nothing. Each such read costs a system call, which on a
 * paravirtualised machine is several microseconds of a CDP round trip. */
void dg_ipc_read_begin(struct dg_ipc_reader *r);

/* True when bytes were read ahead and not returned yet: dg_ipc_read may
 * return a message without the descriptor being readable. */
bool dg_ipc_pending(const struct dg_ipc_reader *r);

void dg_ipc_reader_free(struct dg_ipc_reader *r);

/* ---- Datagram channel with descriptor passing (spawner, egress proxy) ----
 *
 * A SOCK_SEQPACKET socketpair: one message is one datagram of at most
 * DG_SEQ_MAX bytes (a typed spawner message, below, or the egress proxy's
 * JSON object), with up to DG_SEQ_FDS_MAX descriptors attached
 * (SCM_RIGHTS). A datagram that was truncated, or carries more descriptors
 * than asked for, is a protocol error; descriptors that arrived with it are
 * closed. */
#define DG_SEQ_MAX (64 * 1024)
#define DG_SEQ_FDS_MAX 4

int dg_seq_send(int fd, const char *data, size_t len, const int *fds, int nfds);

/* Receives one datagram into buf (cap bytes; NUL-terminated, so cap must
 * exceed DG_SEQ_MAX), descriptors into fds (close-on-exec). Returns 1, 0 when
 * none is waiting (non-blocking socket), -EPIPE at end of stream, -EPROTO. */
int dg_seq_recv(int fd, char *buf, size_t cap, size_t *len, int *fds, int *nfds,
		struct dg_err *err);

/* ---- the worker's channel (worker-client.c) ----------------------------- */

/* Scheduling: `deskgate serve` runs its control plane (gateway, spawner,
 * egress proxy, workers: everything on an action's or a CDP command's
 * path) at DG_CONTROL_NICE, and every jail at DG_JAIL_NICE, which its
 * programs cannot lower (RLIMIT_NICE 0). A desktop busy with a hostile
 * page then cannot queue the decisions about it, or any other session's,
 * behind its own work; and a command's hops through deskgate do not wait
 * for a core the browser answering it holds (docs/jail.md#scheduling). */
#define DG_CONTROL_NICE (-5)
#define DG_JAIL_NICE 0

/* Descriptors `deskgate worker` is started with (dg_worker_start). */
#define DG_WORKER_FD_CTL 3   /* socketpair to the owner (typed messages) */
#define DG_WORKER_FD_RFB 4   /* RFB stream to Xvnc */
#define DG_WORKER_FD_CDP_OUT 5 /* browser: DevTools commands (Chromium's fd 3) */
#define DG_WORKER_FD_CDP_IN 6  /* browser: DevTools replies (Chromium's fd 4) */
#define DG_WORKER_FD_VIEW 7    /* the live view's channel (below) */

/* The live view (docs/vnc.md). The worker re-serves its framebuffer as RFB
 * (libvncserver, view-only: a viewer's pointer, keys and clipboard are
 * dropped) to viewers its owner hands it: each viewer is one connected
 * SOCK_STREAM socket, attached (SCM_RIGHTS) to one datagram DG_VIEW_MSG on
 * the view channel, a SOCK_SEQPACKET socketpair (dg_seq_*). The worker
 * takes at most DG_VIEWERS_MAX viewers at once and closes any socket past
 * that; the owner counts them too. The owner must drain each viewer's
 * socket as it becomes readable (the worker writes updates to it without
 * waiting for a slow viewer: it is the owner that drops one). */
#define DG_VIEWERS_MAX 8
#define DG_VIEW_MSG "viewer"

/* Hands the worker viewer sock on its view channel view_fd (the socket is
 * the caller's still: close it afterwards). 0 or a negative errno. */
int dg_worker_view_add(int view_fd, int sock, struct dg_err *err);

#define DG_WORKER_READY_MS 20000

/* A desktop's channels as its driver gets them: what dg_worker_start hands
 * the worker. Filled by dg_desktop_start (desktop/spawner/spawner.h, whose
 * struct dg_desktop holds one); the descriptors are the host's ends, owned
 * by whoever holds the struct until dg_worker_start takes them. */
struct dg_desktop_io {
	enum dg_profile profile;
	int width, height;
	uint32_t slot;     /* the desktop's jail slot: its worker runs as
			    * DG_WORKER_ID_BASE + slot */
	int rfb_fd;        /* RFB stream to Xvnc (inetd mode) */
	int cdp_out_fd;    /* browser: DevTools commands to Chromium (its fd 3) */
	int cdp_in_fd;     /* browser: DevTools replies and events (its fd 4) */
};

/* The owner's handle on a worker. Owned by the process that started it. */
struct dg_worker {
	pid_t pid;
	int pidfd;
	int ctl;                   /* socketpair end, non-blocking */
	int view;                  /* the live view's channel (DG_WORKER_FD_VIEW's peer) */
	struct dg_ipc_reader *rd;  /* owned */
	long long next_id;
	char *ready;               /* the READY message (JSON), once received */
	/* Decides the browser's requests in the blocking helpers below
	 * (dg_worker_wait_ready, dg_worker_act); NULL: the built-in default.
	 * Borrowed: must outlive the worker. Set it after dg_worker_start,
	 * which clears the struct. */
	const struct dg_policy *policy;
};

/* The deskgate binary that runs workers: /proc/self/exe unless a program
 * that is not deskgate itself (a test) names it. Call before starting. */
void dg_worker_set_binary(const char *path);

/* Forks and executes `deskgate worker` for desktop d as its own uid, handing
 * it the desktop's RFB and DevTools descriptors (closed in d afterwards).
 * Returns 0 or a negative errno. */
int dg_worker_start(struct dg_desktop_io *d, struct dg_worker *w, struct dg_err *err);

/* Waits (blocking, bounded) for the worker's READY message. */
int dg_worker_wait_ready(struct dg_worker *w, int timeout_ms, struct dg_err *err);

/* Sends one action message: {"id":N,"action":ACTION_JSON,"size":[w,h]}, size
 * omitted when out_w is 0. Returns the id (> 0) or a negative errno. */
long long dg_worker_send_action(struct dg_worker *w, const char *action_json, int out_w, int out_h,
				struct dg_err *err);

/* Receives one message if a whole one is ready: returns 1 (type, data, len
 * set; data valid until the next call), 0 when none is, or a negative errno
 * when the worker closed the channel or broke the protocol (then it must be
 * stopped). */
int dg_worker_recv(struct dg_worker *w, uint32_t *type, const uint8_t **data, size_t *len,
		   struct dg_err *err);

/* Blocking convenience for command-line tools: sends an action and waits up
 * to timeout_ms for its RESULT (malloc'd JSON) and FRAME (malloc'd PNG, NULL
 * when the action shows no screen). Events that arrive meanwhile are passed
 * to on_event when it is not NULL. */
int dg_worker_act(struct dg_worker *w, const char *action_json, int out_w, int out_h,
		  int timeout_ms, char **result, uint8_t **png, size_t *png_len,
		  void (*on_event)(void *arg, const char *json), void *arg, struct dg_err *err);

/* Blocking convenience for command-line tools: where the element ref_N of
 * the browser's current page is on the screen (the worker's resolve: the
 * element scrolled into view; with hit, a point that reaches the element
 * itself, not an overlay). 0 with *x, *y; -ENOENT when the worker could not
 * say (a stale ref, no such element, covered: err holds its words); other
 * negative errnos as dg_worker_act. */
int dg_worker_resolve(struct dg_worker *w, int ref, bool hit, int timeout_ms, int *x, int *y,
		      struct dg_err *err);

/* A DG_MSG_REQUEST (a browser request the worker holds), decoded once:
 * its number, its URL (into msg) and the message itself (owned: release
 * with dg_worker_request_free), whose method, resource and target the
 * gateway records. decode: 0 or -EPROTO (not an object with an integer
 * "req" and a string "url"; duplicate keys refused); r is zeroed on error. */
struct dg_worker_request {
	long long req;
	const char *url;
	struct json_t *msg;
};
int dg_worker_request_decode(const uint8_t *data, size_t len, struct dg_worker_request *r,
			     struct dg_err *err);
void dg_worker_request_free(struct dg_worker_request *r);

/* The browser layer's rule: url decided under policy (NULL: the built-in
 * default) with dg_policy_decide_url, ask counting as deny (nobody can
 * approve while the page waits). */
void dg_worker_decide_request(const struct dg_policy *policy, const char *url,
			      struct dg_decision *d);

/* Sends the verdict for request req on ctl (the worker's channel). */
int dg_worker_send_verdict(int ctl, long long req, bool allow, struct dg_err *err);

/* For tools without a gateway (and recv_wait): decodes a DG_MSG_REQUEST,
 * decides it with dg_worker_decide_request and sends the verdict on ctl.
 * d gets the decision; with
 * request non-NULL, *request gets the parsed message (caller frees).
 * Returns 0, -EPROTO for a malformed message, or a send error. */
int dg_worker_answer_request(int ctl, const struct dg_policy *policy,
			     const uint8_t *data, size_t len, struct dg_decision *d,
			     struct json_t **request, struct dg_err *err);

/* ---- the CDP endpoint's messages (cdp-msg.c; docs/cdp.md) -------------------
 *
 * A DG_MSG_CDP_DECIDE or DG_MSG_CDP_NOTE: one command of a CDP client, as
 * the worker's firewall read it, for the owner to decide with the
 * session's policy (DECIDE) and record. decode: 0 or -EPROTO (shorter than
 * its header; req 0; a session longer than DG_CDP_SESSION_MAX or not
 * printable ASCII; the command not an object, with an unknown key, method
 * not "Domain.method" of at most DG_CDP_METHOD_MAX bytes of
 * [A-Za-z0-9_.], action not an object, code, url not strings, params not
 * an object): d zeroed then. What it points to is owned by d->msg (free
 * with dg_cdp_decide_free). send: the command is cmd (cmd_len bytes of
 * JSON, sent as they are: the worker's verdict cache compares these
 * bytes); -EINVAL for a session the header cannot carry. */
#define DG_CDP_METHOD_MAX 128
#define DG_CDP_SESSION_MAX 64
#define DG_CDP_REASON_MAX 512
struct dg_cdp_decide {
	uint64_t req;
	uint32_t client;
	const char *method;
	const char *session;       /* "" at the client's browser level (in session_buf) */
	char session_buf[DG_CDP_SESSION_MAX + 1];
	struct json_t *action;     /* the canonical action it amounts to, or NULL */
	const char *code;          /* the script it runs, or NULL */
	size_t code_len;
	const char *url;           /* a URL it sends a request to, or NULL */
	struct json_t *params;     /* what the recording keeps of its parameters, or NULL */
	struct json_t *msg;
};
int dg_cdp_decide_decode(const uint8_t *data, size_t len, struct dg_cdp_decide *d,
			 struct dg_err *err);
int dg_cdp_decide_send(int fd, uint32_t type, uint64_t req, uint32_t client, const char *session,
		       const char *cmd, size_t cmd_len);
void dg_cdp_decide_free(struct dg_cdp_decide *d);

/* A CDP method name as the decide message takes it: "Domain.method", one
 * dot, [A-Za-z0-9_] on both sides, 3..DG_CDP_METHOD_MAX bytes. */
bool dg_cdp_method_ok(const char *m);

/* A DG_MSG_CDP_VERDICT, both ways: send one (rule and reason cut to fit
 * DG_IPC_CDP_SMALL_MAX), or decode one (0 or -EPROTO). */
struct dg_cdp_verdict {
	uint64_t req;
	bool allow;
	bool cache;                /* allow: the same command may be allowed again unasked */
	char rule[64];
	char reason[DG_CDP_REASON_MAX];
};
int dg_cdp_verdict_send(int fd, const struct dg_cdp_verdict *v, struct dg_err *err);
int dg_cdp_verdict_decode(const uint8_t *data, size_t len, struct dg_cdp_verdict *v,
			  struct dg_err *err);

/* The client number before a CDP_OPEN/CLOSE/IN/OUT/DROP message's bytes:
 * 0, or -EPROTO when the message is shorter than DG_CDP_CLIENT_HDR. */
int dg_cdp_client_of(const uint8_t *data, size_t len, uint32_t *client, const uint8_t **rest,
		     size_t *rest_len);
/* Sends one of those messages: client's number, then len bytes. */
int dg_cdp_client_send(int fd, uint32_t type, uint32_t client, const void *data, size_t len);

/* A DG_MSG_CDP_FRAME, both ways. decode: 0, or -EPROTO when shorter than
 * its header or with an empty PNG, or first..last not a range (first >
 * last, or only one of them 0); png points into data. */
int dg_cdp_frame_send(int fd, uint64_t first, uint64_t last, const void *png, size_t png_len);
int dg_cdp_frame_decode(const uint8_t *data, size_t len, uint64_t *first, uint64_t *last,
			const uint8_t **png, size_t *png_len);

/* Ends the worker (closing its channel, then SIGKILL) and reaps it. */
void dg_worker_stop(struct dg_worker *w);

/* The jail's /etc/passwd, generated (desktop/spawner/jail-mount.c): never
 * the host's. The gateway's blast run (gateway/blast.c) tells a host line
 * read in a jail from these. */
#define DG_JAIL_ETC_PASSWD                                        \
	"root:x:0:0:root:/root:/usr/sbin/nologin\n"               \
	"user:x:1000:1000:deskgate:/home/user:/bin/sh\n"          \
	"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"

/* ---- the spawner's channel (spawner-msg.c, spawner-client.c) ----------
 *
 * The spawner is root; the gateway is the less trusted peer. So the channel
 * carries no JSON: each datagram (dg_seq_*) is one fixed-layout typed
 * message, a closed set of types each with its own size cap and a fixed
 * number of descriptors (OpenSSH's monitor, bubblewrap's privileged half).
 * Layout, host byte order (both ends are one binary on one machine):
 *   header   u32 type, u32 req: the gateway numbers its requests from 1;
 *            a reply carries its request's number, an ENDED event 0
 *   string   u32 n, n bytes, one NUL (no NUL among the n bytes)
 *   limits   the fields of struct dg_limits in order, each at its width
 *   then by type (fields u32 unless named otherwise):
 *   CREATE   session string, profile, width, height, strict (0/1), limits
 *   DESTROY  session string
 *   POOL     xterm, browser (0..DG_SPAWNER_POOL_MAX), strict, limits
 *   EGRESS   nothing
 *   EXEC     session string, argc, i64 timeout_ms, argc strings (argv), the
 *            stdin string (the one string that may hold NULs)
 *   UPLOAD_CHECK  session string, n (1..DG_UPLOAD_PATHS_MAX), n path strings
 *            (each an upload path: dg_upload_path_valid)
 *   CREATED  session string, slot, i64 start_ms, warm (0/1) + 3 descriptors:
 *            the worker's channel, the egress listener of the jail, the
 *            worker's live view channel
 *   OK       nothing (destroy and pool)
 *   CHANNEL  i32 pid + 1 descriptor: the channel of a new egress proxy
 *            (pid: the proxy's) or an exec's result stream (pid: its runner)
 *   ERROR    the message string (at most DG_SPAWN_TEXT_MAX bytes)
 *   ENDED    session string, the reason string: a session's desktop ended
 *            on its own
 *   UPLOAD_CHECKED  session string, n (as asked), then n entries of 20
 *            bytes, in the order of the paths asked: verdict, at, detail,
 *            u64 size (struct dg_upload_file: the rules are there)
 * A datagram that does not decode to exactly one valid message (unknown
 * type, a size other than its fields', a field out of its bounds, a string
 * that is not canonical, the wrong number of descriptors) is a protocol
 * violation: the spawner ends the gateway's connection (and then every
 * session, and exits, as when the channel closes); the gateway stops
 * talking to the spawner. Encoding and decoding check the same rules, so
 * bytes that decode re-encode to the very same bytes. */

#define DG_SPAWNER_SESSIONS_MAX 256   /* sessions one spawner serves at once */
#define DG_SPAWNER_POOL_MAX 64        /* warm desktops of one profile */
/* After a warm desktop is handed over, the pool starts the next one no
 * sooner than this: a Chromium start takes both cores of a small host for
 * about a second, and the session just handed over makes its first
 * exchanges (WebSocket, hello, screenshot, first action) in that time.
 * Measured on the 2-core VM, POST to the first screenshot's PNG of a warm
 * browser desktop, 3 x 7 sessions in turns: median 10.7-12.4 ms refilling
 * at once, 7.7-8.6 ms with the delay. */
#define DG_SPAWNER_REFILL_AFTER_MS 1000
/* A desktop starts without its CPU quota (dg_desktop_cap_cpu): the quota
 * is written once the gateway says the worker was READY (STARTED), when a
 * warm desktop is handed over, or this long after the start, whichever
 * comes first, so a gateway that never says it bounds nothing. A cold
 * browser start takes about 1 s on the 2-core VM, 3-5 s on a loaded one. */
#define DG_SPAWNER_START_CPU_MS 15000
/* A desktop's worker and its X server end together (the worker dies when
 * its RFB connection closes; Xvnc, -inetd, exits 0 when its one client
 * goes), and a loaded host can reap them in either order. When the first
 * to end does not show it was the cause (Xvnc's clean exit; the worker's
 * own exit, not a signal), the spawner waits up to this long for the other
 * before it names the reason. Below the gateway's DG_GW_GONE_WAIT_MS. */
#define DG_SPAWNER_END_PAIR_MS 200
#define DG_EXEC_ARGV_MAX 256          /* strings of an exec's argv (at least 1) */
#define DG_EXEC_ARG_MAX 4096          /* bytes of one (argv[0] not empty) */
#define DG_EXEC_STDIN_MAX (32 * 1024) /* bytes of an exec's stdin */
/* An exec's timeout_ms: 0 (or anything past the session's exec_seconds)
 * means the session's exec_seconds. */
#define DG_EXEC_TIMEOUT_MS_MAX ((int64_t)DG_LIMIT_SECONDS_MAX * 1000)
#define DG_SPAWN_TEXT_MAX (DG_ERR_MAX - 1) /* bytes of an ERROR's message, an ENDED's reason */

enum dg_spawn_type {
	/* requests, gateway -> spawner */
	DG_SPAWN_CREATE = 1,
	DG_SPAWN_DESTROY = 2,
	DG_SPAWN_POOL = 3,
	DG_SPAWN_EGRESS = 4,
	DG_SPAWN_EXEC = 5,
	DG_SPAWN_UPLOAD_CHECK = 6,
	DG_SPAWN_STARTED = 7,
	/* replies and events, spawner -> gateway */
	DG_SPAWN_CREATED = 16,
	DG_SPAWN_OK = 17,
	DG_SPAWN_CHANNEL = 18,
	DG_SPAWN_ERROR = 19,
	DG_SPAWN_ENDED = 20,
	DG_SPAWN_UPLOAD_CHECKED = 21,
};
#define DG_SPAWN_REQUEST_LAST DG_SPAWN_STARTED /* requests are 1..this */

/* ---- upload checks: what a file_upload may hand the browser ------------
 *
 * The browser opens an upload's files by path, in the desktop's view of
 * the jail. Before the gateway lets it, the spawner looks at each path in
 * that view (the jail init's root) without following any symbolic link in
 * any component, and answers per path with a verdict:
 *   OK               a regular file on the session's scratch tmpfs (/tmp,
 *                    /home/user, /dev/shm), readable by the jail's user,
 *                    at most DG_UPLOAD_FILE_MAX bytes; size is its size
 *   MISSING          the component that ends at byte `at` does not exist
 *   SYMLINK          the component that ends at byte `at` is a symbolic link
 *   NOT_REGULAR      the file is no regular file; detail: what it is (its
 *                    S_IFMT bits: a directory, FIFO, socket or device)
 *   OUTSIDE_SCRATCH  the file is not on the session's scratch tmpfs
 *   BROWSER_FILES    the path is, or is below, the browser's own files up
 *                    to byte `at` (what exec never sees: the profile, its
 *                    cache, the X socket directory, Chromium's temporary
 *                    directories; desktop/spawner/spawner.h); decided from
 *                    the path alone, before anything is opened
 *   TOO_LARGE        more than DG_UPLOAD_FILE_MAX bytes; size is its size
 *   UNREADABLE       the jail's user may not read the file (at 0) or search
 *                    the directory that ends at byte `at`
 *   ERROR            looking failed otherwise: detail is the errno (e.g.
 *                    ENOTDIR with `at` at the component that is a file)
 * `at` is a length of the path asked: the prefix naming the component at
 * fault (0: the whole path). A file that passed can still be swapped for a
 * symbolic link before the browser opens it: the check is no lock (see
 * docs/jail.md, "What an upload may read"). */
#define DG_UPLOAD_PATHS_MAX 16           /* paths of one check (= DG_ACTION_PATHS_MAX) */
#define DG_UPLOAD_PATH_MAX 1024          /* bytes of one (= DG_ACTION_FILE_PATH_MAX) */
#define DG_UPLOAD_FILE_MAX (64ull * 1024 * 1024) /* bytes of one file uploaded */
#define DG_UPLOAD_ERRNO_MAX 4095         /* an ERROR's detail is 1..this */

enum dg_upload_verdict {
	DG_UPLOAD_OK = 0,
	DG_UPLOAD_MISSING = 1,
	DG_UPLOAD_SYMLINK = 2,
	DG_UPLOAD_NOT_REGULAR = 3,
	DG_UPLOAD_OUTSIDE_SCRATCH = 4,
	DG_UPLOAD_BROWSER_FILES = 5,
	DG_UPLOAD_TOO_LARGE = 6,
	DG_UPLOAD_UNREADABLE = 7,
	DG_UPLOAD_ERROR = 8,
	DG_UPLOAD_VERDICT_COUNT = 9,
};

/* One path's answer. The rules (checked both ways): at <= DG_UPLOAD_PATH_MAX;
 * size is 0 but for OK (<= DG_UPLOAD_FILE_MAX) and TOO_LARGE (above it);
 * detail is 0 but for NOT_REGULAR (S_IFDIR, S_IFCHR, S_IFBLK, S_IFIFO or
 * S_IFSOCK) and ERROR (1..DG_UPLOAD_ERRNO_MAX); at is 0 for OK, NOT_REGULAR,
 * OUTSIDE_SCRATCH and TOO_LARGE, at least 2 (a component) for MISSING,
 * SYMLINK and BROWSER_FILES. */
struct dg_upload_file {
	enum dg_upload_verdict verdict;
	uint32_t at;
	uint32_t detail;
	uint64_t size;
};

/* The answer to one check: n files, in the order of the paths asked. */
struct dg_upload_check {
	uint32_t n;
	struct dg_upload_file files[DG_UPLOAD_PATHS_MAX];
};

/* An upload path as the channel carries it: absolute, canonical (no empty,
 * "." or ".." component, no trailing slash), at most DG_UPLOAD_PATH_MAX
 * bytes, no control character (below 0x20, 0x7f). The action parser
 * (actions/action.c) accepts only such paths; the spawner checks again. */
bool dg_upload_path_valid(const char *path, size_t len);

/* f's verdict on path (the path asked) as a phrase for the agent, e.g. "a
 * symbolic link at /tmp/x", into buf (always NUL-terminated). */
void dg_upload_reason(const struct dg_upload_file *f, const char *path, char *buf, size_t len);

/* Per-type size caps of a whole datagram, header included. */
#define DG_SPAWN_HEADER 8
#define DG_SPAWN_STRING_MAX(n) (4 + (n) + 1)
#define DG_SPAWN_LIMITS_SIZE 48
#define DG_SPAWN_CREATE_MAX \
	(DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX) + 16 + DG_SPAWN_LIMITS_SIZE)
#define DG_SPAWN_DESTROY_MAX (DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX))
#define DG_SPAWN_STARTED_MAX DG_SPAWN_DESTROY_MAX
#define DG_SPAWN_POOL_MAX (DG_SPAWN_HEADER + 12 + DG_SPAWN_LIMITS_SIZE)
#define DG_SPAWN_EGRESS_MAX DG_SPAWN_HEADER
/* An exec's argv at its caps would not fit one datagram: the whole message
 * is capped at DG_SEQ_MAX, and an exec larger than that is refused. */
#define DG_SPAWN_EXEC_MAX DG_SEQ_MAX
#define DG_SPAWN_CREATED_MAX (DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX) + 16)
#define DG_SPAWN_OK_MAX DG_SPAWN_HEADER
#define DG_SPAWN_CHANNEL_MAX (DG_SPAWN_HEADER + 4)
#define DG_SPAWN_ERROR_MAX (DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SPAWN_TEXT_MAX))
#define DG_SPAWN_ENDED_MAX \
	(DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX) + DG_SPAWN_STRING_MAX(DG_SPAWN_TEXT_MAX))
#define DG_SPAWN_UPLOAD_ENTRY_SIZE 20
#define DG_SPAWN_UPLOAD_CHECK_MAX                                                 \
	(DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX) + 4 +            \
	 DG_UPLOAD_PATHS_MAX * DG_SPAWN_STRING_MAX(DG_UPLOAD_PATH_MAX))
#define DG_SPAWN_UPLOAD_CHECKED_MAX                                               \
	(DG_SPAWN_HEADER + DG_SPAWN_STRING_MAX(DG_SESSION_ID_MAX) + 4 +            \
	 DG_UPLOAD_PATHS_MAX * DG_SPAWN_UPLOAD_ENTRY_SIZE)

/* One message, decoded. Only the fields of its type are meaningful. */
struct dg_spawn_msg {
	enum dg_spawn_type type;
	uint32_t req;
	char session[DG_SESSION_ID_MAX + 1]; /* CREATE, DESTROY, EXEC, CREATED, ENDED,
					      * UPLOAD_CHECK, UPLOAD_CHECKED, STARTED */
	union {
		struct {
			enum dg_profile profile;
			uint32_t width, height; /* within DG_DESKTOP_{WIDTH,HEIGHT}_{MIN,MAX} */
			bool strict;            /* dg_desktop_spec.strict */
			struct dg_limits limits;
		} create;
		struct {
			uint32_t xterm, browser; /* desktops of each profile kept ahead */
			bool strict;
			struct dg_limits limits;
		} pool;
		struct {
			uint32_t argc;
			/* argc strings, then NULL; argv and stdin_data point into the
			 * bytes decoded (valid as long as they are) or the caller's
			 * strings (encoding) */
			const char *argv[DG_EXEC_ARGV_MAX + 1];
			const char *stdin_data; /* NUL-terminated; may hold NULs before */
			uint32_t stdin_len;
			int64_t timeout_ms;     /* 0..DG_EXEC_TIMEOUT_MS_MAX */
		} exec;
		struct {
			uint32_t slot;   /* below DG_JAIL_SLOTS */
			int64_t start_ms; /* >= 0 */
			bool warm;        /* from the pool */
		} created;
		struct {
			int32_t pid;      /* > 0 */
		} channel;
		char text[DG_SPAWN_TEXT_MAX + 1]; /* ERROR's message, ENDED's reason */
		struct {
			uint32_t n; /* 1..DG_UPLOAD_PATHS_MAX */
			/* n paths; they point into the bytes decoded or the
			 * caller's strings, as exec's argv */
			const char *paths[DG_UPLOAD_PATHS_MAX];
		} upload_check;
		struct dg_upload_check upload_checked;
	} u;
};

/* The cap of a type's datagram, 0 for an unknown type; the descriptors a
 * message of that type carries. */
size_t dg_spawn_max(uint32_t type);
int dg_spawn_fds(enum dg_spawn_type type);

/* m into buf (cap bytes, at least dg_spawn_max(m->type) or DG_SEQ_MAX):
 * 0 and *len, or -EINVAL (a field out of its bounds), -E2BIG (over the
 * cap); err says which field. */
int dg_spawn_encode(const struct dg_spawn_msg *m, uint8_t *buf, size_t cap, size_t *len,
		    struct dg_err *err);

/* One datagram of len bytes that came with nfds descriptors into m:
 * 0, or -EPROTO with err naming what is wrong (see above). */
int dg_spawn_decode(const uint8_t *buf, size_t len, int nfds, struct dg_spawn_msg *m,
		    struct dg_err *err);

/* The exec's result, written by the spawner's exec runner on the stream
 * socket a CHANNEL reply handed over, then the stream closes:
 *   u32 DG_EXEC_RESULT_MAGIC, u32 ok, i32 exit_code (0..255), u32 flags
 *   (DG_EXEC_RESULT_*), i64 duration_ms (>= 0), u64 stdout bytes, u64
 *   stderr bytes, u32 error bytes (at most DG_SPAWN_TEXT_MAX, no NUL), then
 *   the three. Not ok: the program could not start (exit_code 125 setup,
 *   126 not executable, 127 not found; error says why; no output, no
 *   flags). Ok: the program's output (each cut at the session's
 *   limits.output_bytes), no error text. */
#define DG_EXEC_RESULT_MAGIC 0x52657844u /* "DxeR" */
#define DG_EXEC_RESULT_HEADER 44
#define DG_EXEC_RESULT_STDOUT_TRUNCATED 1u
#define DG_EXEC_RESULT_STDERR_TRUNCATED 2u
#define DG_EXEC_RESULT_TIMED_OUT 4u
struct dg_exec_result {
	bool ok;
	int32_t exit_code;
	uint32_t flags;
	int64_t duration_ms;
	const char *out, *errout;     /* not NUL-terminated */
	uint64_t out_len, errout_len;
	char error[DG_SPAWN_TEXT_MAX + 1];
};

/* The header of r (DG_EXEC_RESULT_HEADER bytes) into hdr, after which the
 * writer sends r->out, r->errout and the error text. -EINVAL when r breaks
 * the rules above. */
int dg_exec_result_header(const struct dg_exec_result *r, uint8_t hdr[DG_EXEC_RESULT_HEADER],
			  struct dg_err *err);

/* A whole result stream of len bytes into r (its out and errout point into
 * buf): 0 or -EPROTO. */
int dg_exec_result_decode(const uint8_t *buf, size_t len, struct dg_exec_result *r,
			  struct dg_err *err);

/* r as the exec action's JSON result: {"ok":false,"exit_code","error"}, or
 * {"ok":true,"exit_code","stdout","stderr","stdout_truncated",
 * "stderr_truncated","timed_out","duration_ms"} with invalid UTF-8 of the
 * output as U+FFFD. NULL when out of memory. (The gateway's side: the
 * spawner never calls it.) */
struct json_t *dg_exec_result_json(const struct dg_exec_result *r);

struct dg_spawner {
	pid_t pid;
	int fd;               /* SOCK_SEQPACKET, to the spawner */
	uint32_t next_req;
};

/* The gateway's stubs: each sends one request and returns its number
 * (> 0), or a negative errno (-EINVAL for a field out of its bounds,
 * -E2BIG for an exec over DG_SPAWN_EXEC_MAX, or a send error).
 *   create   a session: jail, desktop, worker -> CREATED (a warm one from
 *            the pool when one fits: created.warm) or ERROR
 *   destroy  -> OK or ERROR
 *   pool     keep xterm and browser desktops of each profile started ahead
 *            (default size, these limits and strictness); a create that
 *            fits takes one and another starts behind it; a desktop is
 *            never reused -> OK or ERROR
 *   egress   a new egress proxy, started with the options dg_egress_configure
 *            fixed before the spawner was forked; one it started earlier is
 *            killed first. The spawner reaps it (and logs how it ended); the
 *            gateway's handle on it has pid -1 -> CHANNEL or ERROR
 *   exec     argv (argc strings) in the session's jail, stdin fed to it,
 *            timeout_ms as above -> CHANNEL (the result stream) or ERROR
 *   upload_check  the n paths (1..DG_UPLOAD_PATHS_MAX, each
 *            dg_upload_path_valid) looked at in the session's desktop
 *            -> UPLOAD_CHECKED (a verdict per path, in their order) or
 *            ERROR (no such session, its desktop ended, the jail's root
 *            could not be opened)
 *   started  the session's worker said READY: its desktop's start is over
 *            and its jail gets its CPU quota now (dg_desktop_cap_cpu;
 *            already done for a warm one) -> OK or ERROR (no such session,
 *            the quota could not be written)
 * Unrequested: ENDED. */
int dg_spawner_create(struct dg_spawner *sp, const char *session, enum dg_profile profile,
		      int width, int height, const struct dg_limits *limits, bool strict,
		      struct dg_err *err);
int dg_spawner_destroy(struct dg_spawner *sp, const char *session, struct dg_err *err);
int dg_spawner_started(struct dg_spawner *sp, const char *session, struct dg_err *err);
int dg_spawner_pool(struct dg_spawner *sp, int xterm, int browser, const struct dg_limits *limits,
		    bool strict, struct dg_err *err);
int dg_spawner_egress(struct dg_spawner *sp, struct dg_err *err);
int dg_spawner_exec(struct dg_spawner *sp, const char *session, const char *const *argv,
		    size_t argc, const char *stdin_data, size_t stdin_len, long long timeout_ms,
		    struct dg_err *err);
int dg_spawner_upload_check(struct dg_spawner *sp, const char *session, const char *const *paths,
			    size_t n, struct dg_err *err);

/* Receives one message if one is waiting: 1 (m and fds set; the caller
 * owns the descriptors), 0, or a negative errno (-EPIPE: the spawner is
 * gone; -EPROTO: it broke the protocol, its descriptors closed). */
int dg_spawner_recv(struct dg_spawner *sp, struct dg_spawn_msg *m, int *fds, int *nfds,
		    struct dg_err *err);

/* Closes the channel (the spawner then ends every session and exits) and
 * reaps it. */
void dg_spawner_stop(struct dg_spawner *sp);

/* ---- the egress proxy's channel (egress-client.c) ----------------------- */

#define DG_EGRESS_OVERRIDES_MAX 16              /* entries of dg_egress_opts.resolve */
#define DG_EGRESS_START_MS 5000                 /* dg_egress_start waits this long for "ready" */
#define DG_EGRESS_STOP_MS 2000                  /* dg_egress_stop waits this long before SIGKILL */
#define DG_EGRESS_SESSION_CONNS_MAX 64          /* open connections per session; the next
						 * gets 429 */
#define DG_EGRESS_SESSION_REFUSING_MAX 16       /* 429 answers in flight per session beyond
						 * the cap; past them a connection is closed unanswered */
#define DG_EGRESS_CONN_NUMBER_MAX (1ull << 53)  /* an add's "conns_before": connection
						 * numbers stay exact in every JSON reader */

/* A handle on a proxy: its pid and the owner's end of a SOCK_SEQPACKET
 * socketpair (non-blocking, close-on-exec). The gateway adopts fd into its
 * event loop and calls dg_egress_recv when it is readable. pid is -1 in a
 * handle on a proxy this process did not fork (the gateway's, on the
 * spawner's child): dg_egress_stop then only closes the channel.
 * Note: policy/policy-priv.h has a struct of the same name (a compiled
 * egress pattern); no file includes both. */
struct dg_egress {
	pid_t pid;
	int fd;
};

struct dg_egress_opts {
	/* Test-only resolver override: names that map to a fixed address and
	 * skip the address-range check (so tests can point "allowed.test" and
	 * "denied.test" at loopback servers). Each entry "NAME:PORT=IP:PORT",
	 * NAME a canonical host (dg_url_parse's rules), IP a dotted quad or a
	 * bracketed IPv6 address; at most DG_EGRESS_OVERRIDES_MAX. The egress
	 * allowlist still applies to NAME:PORT. */
	const char *const *resolve;
	int n_resolve;
	bool verbose; /* one line on stderr per event */
	/* Test-only: when non-zero, replace the named default, lower only
	 * (a larger value is clamped to the default). */
	int head_timeout_ms;
	int connect_timeout_ms;
	int idle_timeout_ms;
	uint64_t session_bytes_max;
	/* Test-only: run without the seccomp filter, so that LeakSanitizer can
	 * check the proxy's memory when it exits (its stop-the-world needs a
	 * non-thread clone and ptrace, which the filter kills). Ignored by
	 * dg_egress_configure. */
	bool no_seccomp;
};

/* Hands over a session's listening socket (duplicated by SCM_RIGHTS: the
 * caller keeps its copy and closes it when done; the gateway keeps it for
 * the session's life, to hand it to a restarted proxy; the proxy makes the
 * shared file description non-blocking). session_id must pass
 * dg_session_id_valid. p: the policy the session runs under, whose "egress"
 * list and "urls" section (for the WebSockets of the SOCKS front) are sent
 * along and decide for it (NULL: the policy the proxy was started with). The
 * add message must fit DG_SEQ_MAX (64 KiB): a policy whose lists are larger
 * is refused here. The proxy answers with an "egress_session" event (ok or
 * the reason it refused). */
int dg_egress_add(struct dg_egress *e, const char *session_id, int listen_fd,
		  const struct dg_policy *p, struct dg_err *err);

/* The same for a session an earlier proxy served: its connections are
 * numbered from conns_before + 1 (at most DG_EGRESS_CONN_NUMBER_MAX), so
 * that numbers stay unique in the session's recording. */
int dg_egress_add_after(struct dg_egress *e, const char *session_id, int listen_fd,
			const struct dg_policy *p, uint64_t conns_before, struct dg_err *err);

/* Stops accepting for the session and closes all its connections (each gets
 * its "egress_closed" event), then an "egress_session" event. */
int dg_egress_remove(struct dg_egress *e, const char *session_id, struct dg_err *err);

/* One event from the proxy if one is waiting: 1 (*ev set, caller owns it),
 * 0 none, < 0 the proxy is gone (-EPIPE) or broke the protocol (-EPROTO):
 * stop it. */
int dg_egress_recv(struct dg_egress *e, struct json_t **ev, struct dg_err *err);

/* Closes the channel (the proxy then closes everything and exits), waits up
 * to DG_EGRESS_STOP_MS, kills it if needed and reaps it. Idempotent. */
void dg_egress_stop(struct dg_egress *e);

/* Events, one JSON object per datagram:
 *   {"event":"egress_ready","pid":P}                       once, at start
 *   {"event":"egress","session":ID,"conn":N,"method":M,"target":"host:port",
 *    "verdict":"allow"|"deny","rule":R,"reason":TEXT,"address":"ip:port"}
 *       at each decision; method and target when the request was read,
 *       address when one was chosen; R is "egress.allow[i]" (allowed),
 *       "egress.default" (no pattern), "egress.address" (a non-public
 *       address), "egress.resolve" (lookup failed or timed out),
 *       "egress.request" (a malformed or incomplete request head),
 *       "egress.caps" (a connection or byte cap). A connection may have two:
 *       allow, then deny "egress.caps" when its session's byte cap is hit.
 *       An allowed connection whose origin fails is answered 502 (refused)
 *       or 504 (connect timeout) with X-Deskgate-Rule "egress.connect"; that
 *       is no new decision: the reason is in its "egress_closed" error.
 *   {"event":"decision","session":ID,"conn":N,"layer":"browser","via":"egress",
 *    "method":"GET","resource":"WebSocket","target":"websocket","url":URL|null,
 *    "origin":"wss://host[:port]" (url null),"verdict","rule","reason"}
 *       a WebSocket of the SOCKS front decided by the "urls" rules, in the
 *       shape of the browser's requests the guard holds: url the ws:// URL
 *       of the handshake; for wss:// (a TLS record first) only the origin,
 *       decided by dg_policy_decide_ws_origin. "ask" is reported as deny.
 *       A refused one is answered 403 in the tunnel (ws://) or closed
 *       (wss://) and has no "egress" event; an allowed one has its "egress"
 *       allow (method "SOCKS5") once connected.
 *   {"event":"egress_closed","session":ID,"conn":N,"bytes_up":U,
 *    "bytes_down":D,"duration_ms":T,"error":TEXT|null}
 *       when a connection that had an "egress" event closes; bytes are
 *       those relayed (client -> origin, origin -> client)
 *   {"event":"egress_session","session":ID,"op":"add"|"remove","ok":B,
 *    "error":TEXT (when !ok),"closed":K (remove)}
 *   {"event":"egress_dropped","dropped":K}   K events were dropped (queue full)
 *   {"event":"egress_error","error":TEXT}    a control message was ignored
 * N numbers a session's connections from 1 (from conns_before + 1 when
 * the add said so), in accept order.
 */

/* Control messages (gateway -> proxy), one datagram each:
 *   {"op":"add","session":ID,"egress":[...],"urls":{...},"conns_before":K}
 *   with exactly one descriptor, a listening TCP socket ("egress": the
 *   session's own allowlist, optional; "urls": its urls section, for the
 *   WebSockets of the SOCKS front, optional; "conns_before": optional, 0 ..
 *   DG_EGRESS_CONN_NUMBER_MAX); {"op":"remove","session":ID}. The gateway
 *   is more trusted than the proxy's clients: a malformed message is
 *   logged, reported as "egress_error" and ignored. When the channel
 *   closes, the proxy exits. */

#endif
