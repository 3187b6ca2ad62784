/* The gateway server's internals, shared by its files (their order is
 * below, before the functions).
 *
 * Everything runs on the libwebsockets event loop in one thread: HTTP
 * requests, WebSocket connections, the spawner's channel, each worker's
 * channel and each exec's result channel are all wsis of that loop.
 */
#ifndef DG_SERVER_PRIV_H
#define DG_SERVER_PRIV_H

#include <libwebsockets.h>
#include <stdbool.h>

#include "actions/actions.h"
#include "desktop/proto/proto.h"
#include "gateway/gateway.h"
#include "recordings/recordings.h"

#define DG_GW_LEGACY_DEPTH 4 /* levels under state_dir or recordings given from the
			     * former shared gateway uid (recordings/<id>/frames/<png>,
			     * state_dir/<cache>/<id>/frames/<png>) */
#define DG_HTTP_BODY_MAX (64 * 1024)      /* bytes of an HTTP request body */
#define DG_HTTP_PATH_MAX 256
#define DG_CREATE_TIMEOUT_S 90            /* create request to a ready worker */
#define DG_WS_QUEUE_MAX (64 * 1024 * 1024) /* bytes queued to one slow client */
#define DG_EXEC_RESULT_MAX (8 * 1024 * 1024) /* bytes of an exec's result stream */
#define DG_GW_ELEMENT_TEXT_MAX 1024 /* bytes of an element's role, name or tag kept
					* from the worker's resolve (page.js cuts names at
					* 200 characters) */
#define DG_MODEL_DIM_MIN 64
#define DG_MODEL_DIM_MAX 8192
#define DG_SESSION_TOKEN_BYTES 32
#define DG_GW_RETENTION_PERIOD_S 3600      /* between retention passes */
#define DG_GW_RECORDINGS_LIST_MAX 1000     /* recordings one GET /v1/recordings lists */
#define DG_GW_STOP_FLUSH_MS 500         /* stopping: time to write the "ended" messages */
#define DG_GW_GONE_WAIT_MS 500          /* worker gone: wait this long for the spawner's why */
#define DG_GW_AUDIT_FILE_MAX (4 * 1024 * 1024) /* bytes of an audit result read back */
#define DG_GW_CDP_CLIENTS_MAX 4         /* CDP clients of one session at once */
/* NOTEs (commands the worker allowed under a cached verdict) are recorded
 * after the reply a client waits for is written, off the command's round
 * trip: at most this many wait, for at most this long. */
#define DG_GW_CDP_NOTES_MAX 64
#define DG_GW_CDP_NOTES_WAIT_MS 20
/* The live view (vnc-link.c): a viewer's bytes to the worker wait here up to
 * this much before the gateway stops reading its WebSocket; what the
 * worker sends a viewer waits up to DG_GW_VNC_BACKLOG_MAX (a raw frame of
 * the largest desktop, and some) before the viewer is dropped as too slow:
 * the gateway always drains the worker, so a slow viewer never holds it. */
#define DG_GW_VNC_IN_MAX (256 * 1024)
#define DG_GW_VNC_BACKLOG_MAX (40u * 1024 * 1024)
#define DG_GW_VNC_READ_CHUNK (64 * 1024)
#define DG_GW_OPERATOR_MSG_MAX DG_ACTION_JSON_MAX /* bytes of an operator's message: one
					 * canonical action (or a small batch), never more */
/* The egress proxy's supervision (egress-link.c). */
#define DG_GW_EGRESS_DEATHS_MAX 5       /* deaths within DG_GW_EGRESS_WINDOW_MS that end
					 * it: the 5th is not restarted (failed starts count) */
#define DG_GW_EGRESS_WINDOW_MS 60000
#define DG_GW_EGRESS_BACKOFF_MS 100     /* death -> restart request; doubled for each
					 * earlier death in the window */
#define DG_GW_EGRESS_BACKOFF_MAX_MS 5000
#define DG_GW_EGRESS_START_WAIT_MS (DG_EGRESS_START_MS + 5000) /* start-up: request ->
					 * the spawner's answer */
/* Connections of a session the gateway tracks as open (decided, not yet
 * closed), to record them as cut when the proxy dies: as many as the proxy
 * keeps open with an "egress" event. */
#define DG_GW_EGRESS_OPEN_MAX (DG_EGRESS_SESSION_CONNS_MAX + DG_EGRESS_SESSION_REFUSING_MAX)

/* The object store (bucket.c). */
#define DG_GW_BUCKET_TICK_MS 200        /* the transfer children are polled this often */
#define DG_GW_UPLOADS_MAX 4096          /* recordings waiting for their upload (more:
					 * the next start queues them) */
#define DG_GW_UPLOAD_RETRY_MS 1000      /* a failed upload is tried again after this, */
#define DG_GW_UPLOAD_RETRY_MAX_MS (5 * 60 * 1000) /* doubled each time up to this */
#define DG_GW_FETCHES_MAX 16            /* recordings waiting for a fetch */
#define DG_GW_FETCH_WAITERS_MAX 64      /* HTTP requests waiting for fetches */
#define DG_GW_FETCH_WAIT_S 600          /* one waits at most this long (then it is closed) */
#define DG_GW_FETCH_FAILS 64            /* failed fetches remembered, */
#define DG_GW_FETCH_FAIL_MS 10000       /* for this long */
#define DG_GW_BUCKET_CACHE_DIR "bucket-cache" /* under the state dir */

/* Recordings as videos (video.c). */
#define DG_GW_EXPORT_DIR "exports"      /* under the state dir: the videos, and */
#define DG_GW_EXPORT_PUBKEY "recording-pub.pem" /* the key the export checks seals with */
#define DG_GW_EXPORT_TICK_MS 200        /* the export child is polled this often */
#define DG_GW_EXPORT_WAIT_S 600         /* an export runs at most this long (then 504) */
#define DG_GW_EXPORT_QUEUE_MAX 8        /* videos waiting for the one export child */
#define DG_GW_EXPORT_WAITERS_MAX 16     /* HTTP requests waiting for exports (more: 503) */
#define DG_GW_EXPORT_FAILS 16           /* failed exports remembered, */
#define DG_GW_EXPORT_FAIL_MS 10000      /* for this long */
#define DG_GW_EXPORTS_KEPT 32           /* videos kept in the cache (the oldest go) */
#define DG_GW_EXPORT_REPORT_MAX 1024    /* bytes of the child's output kept */
#define DG_GW_EXPORT_NICE 10            /* the child's priority (the desktops' is 0) */

struct gw;
struct gw_session;
struct gw_bucket;
struct gw_video;
struct blast_run;
struct mcp_call;
struct mcp_session;

/* One outgoing WebSocket message, with the LWS_PRE headroom lws needs. */
struct outmsg {
	struct outmsg *next;
	bool binary;
	size_t len;
	unsigned char data[]; /* LWS_PRE + len */
};

enum conn_kind { CONN_NONE, CONN_HTTP, CONN_AGENT, CONN_WATCH, CONN_CDP, CONN_VNC, CONN_OPERATOR };

/* Per-wsi state of the server protocol. */
struct conn {
	enum conn_kind kind;
	struct lws *wsi;
	struct gw_session *s;
	struct dg_principal who;
	bool authed;
	/* HTTP */
	char path[DG_HTTP_PATH_MAX];
	int method; /* 'G', 'P', 'D' */
	char *body;
	size_t body_len;
	bool body_too_big;
	char *reply;          /* a response waiting for HTTP_WRITEABLE */
	size_t reply_len;
	int reply_status;
	bool waiting;         /* the create request waits for its session */
	bool fetch_wait;      /* a GET of a recording waits for its fetch (bucket.c) */
	bool fetch_done;      /* ... which ended: route it again, once */
	bool export_wait;     /* a GET of a video waits for its export (video.c) */
	bool export_done;     /* ... which ended: route it again, once */
	bool body_ignored;    /* unauthenticated: its body is read, not kept */
	struct mcp_call *mcp_call; /* POST /mcp: the tool call this connection answers (mcp.c) */
	/* A connection that is not a socket (mcp.c: an MCP session's agent, a
	 * tool call): what the runner and the session send to it goes to sink
	 * (msg stolen; status is an HTTP reply's, 0 for a message) instead
	 * of a socket. The sink must not free c: its senders may still read
	 * it after the call. */
	void (*sink)(struct conn *c, int status, json_t *msg);
	void *sink_ctx;
	/* WebSocket */
	struct outmsg *head, *tail;
	size_t queued;
	struct outmsg *frame; /* observers: only the latest frame waits */
	char *rx;
	size_t rx_len;
	bool rx_too_big;
	struct conn *next_observer;
	bool closing;         /* close once the queue is sent */
	char close_why[128];  /* why the gateway closes it; "" not the gateway */
	long long window_start;
	int window_count;     /* actions in the current one-second window */
	unsigned events;      /* the agent: dg_agent_event bits its hello asked for */
	uint32_t cdp_client;  /* CONN_CDP: its number in its session (the worker's too) */
	struct conn *next_cdp;
	struct blast_run *blast; /* POST /v1/blast: the run this connection waits for */
	/* CONN_VNC (vnc-link.c): its socket to the worker's live view, adopted;
	 * its bytes not yet written there; its number in its session */
	struct lws *vnc_raw;
	unsigned char *vnc_in;
	size_t vnc_in_len;
	bool vnc_paused;      /* its WebSocket is not read until vnc_in drains */
	uint32_t vnc_viewer;
	struct conn *next_vnc;
};

/* An agent's message, waiting or running. */
struct request {
	struct request *next;
	struct dg_adapted ad;
	int index;            /* the action of ad running now */
	bool failed;
	char *error;
	long long t0;
	double total_ms;
	json_t *last_result;  /* the worker's result of the last action run */
	bool refused;         /* the policy said deny or ask: decision holds why */
	struct dg_decision decision;
	bool approved;        /* the current action ran on a human's approval */
	char approved_by[DG_TOKEN_NAME_MAX + 1];
	unsigned char *zoom_png; /* a zoom's answer: not the session's screen */
	size_t zoom_len;
	struct conn *agent;   /* who asked (NULL once gone): the agent's channel, an MCP
			       * call, or an operator's channel */
	char human[DG_TOKEN_NAME_MAX + 1]; /* an operator's request: its token's name;
					    * "" for the agent's */
	/* For the recording: the state the current action was decided in
	 * (replay decides it again in it); the agent's message is ad.raw. */
	int recorded;         /* actions of ad recorded so far */
	char *b_url, *b_title;
	char b_frame[DG_REC_HEX_LEN + 1];
	int b_px, b_py;
	long long t_step;     /* ms: when the current action was decided */
	char zoom_frame[DG_REC_HEX_LEN + 1];
	/* Resolving (actions on a page's elements or viewport): the browser
	 * was asked where (resolving), and answered for action resolved_index;
	 * element: what it said of the element (a checked copy, for the
	 * recording and approvals), NULL when none. */
	bool resolving;
	int resolved_index;
	json_t *element;
	int vp[2];            /* the viewport's top left on the screen, as resolved */
	json_t *tabs_before;  /* the tab ids open when the request started (browser
			       * toolset: browser_state's tabs opened) */
};

enum session_state { S_STARTING, S_READY, S_ENDED };

/* Counts in each of the last 60 seconds (decide.c). */
struct gw_per_minute {
	unsigned count[60];
	long long stamp[60];
};

/* CDP commands by method, for /metrics: the first DG_GW_CDP_METHODS_MAX
 * methods seen get a row each, later ones count as "other" (a client
 * makes up method names: the rows stay bounded). */
#define DG_GW_CDP_METHODS_MAX 256
struct gw_cdp_methods {
	struct {
		char name[DG_CDP_METHOD_MAX + 1];
		unsigned long n[2];  /* [allowed, refused] */
	} row[DG_GW_CDP_METHODS_MAX];
	int n_rows;
	unsigned long other[2];
	unsigned long cached;       /* allowed by the worker under a cached verdict */
};

struct gw_cdp_note {
	struct gw_cdp_note *next;
	size_t len;
	uint8_t data[];
};

struct gw_session {
	bool used;
	struct gw *gw;
	char id[DG_SESSION_ID_MAX + 1];
	char owner[DG_TOKEN_NAME_MAX + 1];
	enum dg_profile profile;
	int width, height, model_w, model_h;
	char policy_name[DG_POLICY_NAME_MAX + 1];
	struct dg_policy policy;
	unsigned char token_hash[DG_SHA256_LEN];
	enum session_state state;
	char end_reason[DG_ERR_MAX];
	struct conn *creator;  /* the POST /v1/sessions waiting for READY */
	int create_req;
	struct lws *worker;    /* the worker's channel, adopted */
	struct dg_ipc_reader rd;
	struct conn *agent;
	struct conn *observers;
	int n_observers;
	struct request *queue, *queue_tail;
	int queued;
	struct request *cur;
	int exec_req;          /* spawner request of the running exec */
	struct lws *exec_wsi;  /* its result channel */
	char *exec_buf;
	size_t exec_len;
	int upload_req;        /* spawner request of the upload check in flight
				* (dg_spawner_upload_check); its answer goes to
				* dg_gw_upload_checked */
	json_t *pending_result;/* worker RESULT waiting for its FRAME */
	unsigned char *png;
	size_t png_len;
	int cursor_x, cursor_y;
	char *url, *title;
	json_t *tabs;          /* the worker's latest list of open tabs (browser) */
	struct dg_toolsets toolsets; /* the tools the agent's model was given */
	bool has_toolsets;
	long long created_ms, last_activity_ms;
	unsigned long n_actions, n_errors, n_exec, n_refused;
	unsigned long n_requests, n_requests_blocked; /* the browser's, decided here */
	int egress_fd;         /* the jail's egress listener (the gateway's duplicate), kept
				* for the session's life so that a restarted proxy can be
				* handed it again; closed at its end; -1 */
	bool egress_added;     /* the running proxy serves the session's listener */
	uint64_t egress_conn_max; /* highest connection number a proxy reported */
	uint64_t egress_open[DG_GW_EGRESS_OPEN_MAX]; /* decided connections not closed yet */
	int n_egress_open;
	unsigned long egress_untracked; /* open ones past DG_GW_EGRESS_OPEN_MAX */
	bool warm;             /* its desktop came from the warm pool */
	struct conn *cdp;      /* its CDP clients (cdp-link.c), at most DG_GW_CDP_CLIENTS_MAX */
	int n_cdp;
	uint32_t cdp_next;     /* the last client number given */
	int view_fd;           /* the worker's live view channel (DG_WORKER_FD_VIEW's
				* peer), -1 */
	struct conn *vnc;      /* its live viewers (vnc-link.c), at most DG_VIEWERS_MAX */
	int n_vnc;
	uint32_t vnc_next;     /* the last viewer number given */
	/* A CDP client's DOM.setFileInputFiles the policy allowed, its files
	 * being checked in the jail (one at a time): the spawner's request,
	 * the command's decide request, and its recording event (owned). */
	int cdp_upload_req;
	uint64_t cdp_upload_q;
	json_t *cdp_upload_ev;
	/* NOTEs waiting to be decided again and recorded (cdp-link.c), in the
	 * order they came; their bytes as the worker sent them (owned). */
	struct gw_cdp_note *notes, **notes_tail;
	int n_notes;
	unsigned long n_cdp_commands, n_cdp_refused;
	unsigned long n_cdp_actions; /* allowed CDP commands that are actions (input,
				      * navigation): they count as actions for budgets */
	/* actions decided in each of the last 60 seconds, for the policy's
	 * actions_per_minute budget; CDP commands allowed, for
	 * cdp_commands_per_minute */
	struct gw_per_minute apm, cdp_pm;
	/* An action the policy asked about waits here for a human (at most one:
	 * the session runs one action at a time). Bound to the hash of that
	 * exact action and session, single-use, expiring. */
	struct {
		bool pending;
		char id[DG_SESSION_ID_MAX + 1]; /* the form of a session id */
		unsigned char hash[DG_SHA256_LEN];
		long long created_ms, expires_ms;
		unsigned char *png;   /* the screen when it asked (owned) */
		size_t png_len;
	} appr;
	/* The recording (recordings/): opened at creation, sealed at the end. */
	struct dg_rec *rec;
	bool rec_broken;
	char rec_error[DG_ERR_MAX + 64];
	char *policy_text;     /* the policy's file text, as recorded (owned) */
	size_t policy_len;
	char frame_hash[DG_REC_HEX_LEN + 1]; /* the current screen's frame */
	bool gone;             /* its worker's channel closed: ending soon */
	/* A blast run's session (blast.c): no agent or CDP client may attach,
	 * and its execs' results go to blast_exec (res stolen; NULL with
	 * error when the exec could not run), not to the runner. */
	struct blast_run *blast;
	void (*blast_exec)(struct gw_session *s, json_t *res, const char *error);
	/* A human's takeover (takeover.c): while held, the agent's actions are
	 * refused as paused and the operator's run under the same policy. */
	struct {
		bool held;
		struct dg_principal by;
		long long since_ms, last_ms; /* taken; the operator's last action */
		struct conn *conn;           /* the operator's channel, while open */
	} op;
	lws_sorted_usec_list_t sul_takeover;
	lws_sorted_usec_list_t sul_life, sul_idle, sul_grace, sul_create, sul_approval, sul_rec,
		sul_gone, sul_notes;
};

struct gw_metrics {
	unsigned long sessions_created, sessions_ended, http_requests, http_errors;
	unsigned long actions[DG_ACTION_N_TYPES][4]; /* [type][ok, failed, denied, asked] */
	unsigned long auth_failures, protocol_errors;
	unsigned long requests[2];   /* the browser's requests: [allowed, blocked] */
	unsigned long egress[2];     /* proxy connections: [allowed, denied] */
	unsigned long egress_restarts; /* proxies started after the first */
	struct gw_cdp_methods cdp;   /* CDP clients' commands */
	unsigned long rec_events, rec_us; /* recording writes and their cost */
	unsigned long uploads_ok, uploads_failed, fetches_ok, fetches_failed; /* bucket.c */
	unsigned retention_held;     /* the last local retention pass: kept, not yet uploaded */
	bool retention_over_budget;  /* ... and the directory stayed over retention_mb */
	double action_ms_sum;
	unsigned long action_ms_count;
	unsigned long action_ms_buckets[12];
};

/* A cached verify result of one recording (GET /v1/recordings). */
#define DG_GW_VERIFY_CACHE 256
struct gw_verify_cache {
	char id[DG_REC_ID_MAX + 1];
	long long size, mtime_s, mtime_ns;
	json_t *result;
};

struct gw {
	struct lws_context *ctx;
	struct lws_vhost *vh;
	struct dg_config cfg;
	struct dg_auth auth;
	struct dg_policy policy;
	struct dg_spawner spawner;
	struct lws *spawner_wsi;
	struct dg_egress egress;      /* the proxy for every session's way out */
	char *policy_text;            /* the gateway policy's text (owned) */
	size_t policy_len;
	struct dg_rec_key *rec_key;   /* signs every recording's seal */
	struct gw_video *video;       /* video exports (video.c) */
	struct gw_bucket *bucket;     /* the object store; NULL: none configured */
	lws_sorted_usec_list_t sul_retention, sul_flush;
	struct gw_verify_cache verify_cache[DG_GW_VERIFY_CACHE];
	unsigned verify_next;
	struct lws *egress_wsi;       /* its channel while one runs; NULL in a gap */
	bool egress_dead;             /* it died too often: sessions are refused */
	int egress_req;               /* the spawner request starting a proxy; 0: none */
	pid_t egress_pid;             /* the running proxy (the spawner's child) */
	long long egress_deaths[DG_GW_EGRESS_DEATHS_MAX]; /* ms, the latest first */
	int n_egress_deaths;
	lws_sorted_usec_list_t sul_egress; /* the back-off before a restart */
	bool spawner_lost;            /* the spawner died: exit non-zero */
	struct gw_session *sessions; /* cfg.limits.max_sessions of them */
	int n_sessions;
	struct gw_metrics m;
	bool verbose;
	bool stopping;
	char egress_why[DG_ERR_MAX];  /* what ended the proxy's channel, if seen */
	int agent_fd;                 /* capacity.agent_check's listener; -1: off */
	struct lws *agent_wsi;
	/* dg_gw_session_end, for recording-link.c and cdp-link.c (see the files'
	 * order below). */
	void (*session_end)(struct gw_session *s, const char *reason);
};

/* The files, each calling only those below it (no circle):
 *   server.c        HTTP routing, the WebSocket and raw-descriptor callbacks,
 *                   start-up (dg_gateway_serve)
 *   mcp.c           /mcp: MCP sessions, tool calls as agent messages
 *   desktop-link.c  the worker's channel, exec results, the spawner's
 *                   messages about sessions
 *   blast.c         /v1/blast: the five attempts in a fresh jail (its
 *                   sessions' exec results come from desktop-link.c through
 *                   gw_session.blast_exec)
 *   egress-link.c   the egress proxy: listeners, events, supervision
 *   session.c       sessions' lifecycle: create, ready, end, timers, who is
 *                   attached
 *   takeover.c      a human's takeover: who holds control, its timers, the
 *                   operator's channel
 *   runner.c        the agent's requests: approvals, perform, answer
 *   decide.c        the decision module: actions and browser requests
 *   vnc-link.c      the live view's viewers, relayed to the worker
 *   recording-link.c the recordings: per session, retention, listings
 *   conn.c          sending on connections, adopting descriptors, the
 *                   session table's lookup
 *   capacity.c      free capacity for a balancer: /v1/health, agent-check
 * (config.c, auth.c and web.c below them all.) The one edge upward is
 * gw->session_end, through which recording-link.c ends a session whose
 * recording failed, and cdp-link.c one whose worker sent a malformed
 * NOTE found when it is recorded, later (dg_gateway_serve sets it to
 * dg_gw_session_end). */

/* capacity.c: what a balancer learns about this gateway (docs/scale-out.md). */
#define DG_GW_AGENT_BACKLOG 64 /* agent-check connections waiting, and accepted per wake-up */
struct gw_capacity {
	int sessions, max_sessions, free_slots;
	bool draining;                /* capacity.drain, or no new session can start */
	bool full;                    /* draining or no free slot: no new session here */
	long long mem_available_mb;   /* -1: unknown */
};
void dg_gw_capacity(const struct gw *gw, struct gw_capacity *out);
/* GET /v1/health's body (a new reference): counts only, no names. */
json_t *dg_gw_health_json(const struct gw *gw);
/* The agent-check line ("up ready 40%\n", "up drain 0%\n") into out: its
 * length, or -ENOSPC. */
int dg_gw_agent_line(const struct gw *gw, char *out, size_t outlen);
/* Opens capacity.agent_check's listening socket (non-blocking): the fd or
 * a negative errno with err. */
int dg_gw_agent_open(const struct gw *gw, struct dg_err *err);
/* The listener is readable: answers every waiting connection. 0 or -errno. */
int dg_gw_agent_readable(const struct gw *gw, int lfd);

/* mcp.c: the MCP front door (docs/mcp.md). dg_gw_mcp_http answers a
 * request to /mcp from an authenticated connection (raw, raw_len: its
 * body): what the lws HTTP callback returns. A connection answering a
 * tool call (c->mcp_call) is written by dg_gw_mcp_writable and, closed
 * before its answer, reported to dg_gw_mcp_http_closed. */
int dg_gw_mcp_start(struct gw *gw);
void dg_gw_mcp_stop(struct gw *gw);
int dg_gw_mcp_http(struct gw *gw, struct conn *c, const char *raw, size_t raw_len);
int dg_gw_mcp_writable(struct conn *c);
void dg_gw_mcp_http_closed(struct conn *c);

/* blast.c: POST /v1/blast, the five attempts in a fresh jail (docs/api.md).
 * dg_gw_blast_http answers a request from an authenticated connection (raw,
 * raw_len: its body): what the lws HTTP callback returns; the answer comes
 * when the run ends. A connection closed before it is reported to
 * dg_gw_blast_http_closed. */
int dg_gw_blast_http(struct gw *gw, struct conn *c, const char *raw, size_t raw_len);
void dg_gw_blast_http_closed(struct conn *c);

/* conn.c */
void dg_gw_ws_send(struct conn *c, bool binary, const void *data, size_t len);
void dg_gw_ws_send_json(struct conn *c, json_t *obj); /* steals obj */
void dg_gw_ws_send_frame(struct conn *c, const void *png, size_t len); /* observers: latest only */
void dg_gw_error_json(struct conn *c, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* To every observer of s (ev stolen). */
void dg_gw_broadcast(struct gw_session *s, json_t *ev);
/* Writes c's next queued message (the lws WRITEABLE callback): -1 when the
 * connection must close. */
int dg_gw_ws_writable(struct conn *c);
/* Frees c's queues and its partial received message. */
void dg_gw_conn_free_queue(struct conn *c);
void dg_gw_http_reply(struct conn *c, int status, json_t *body); /* deferred; steals body */
/* Makes c (zeroed) a connection that is not a socket, of kind, acting for
 * who: what is sent to it goes to sink with ctx (see struct conn). */
void dg_gw_sink_conn(struct conn *c, enum conn_kind kind, const struct dg_principal *who,
		     void (*sink)(struct conn *c, int status, json_t *msg), void *ctx);
/* Answers an HTTP request at once with body (copied); returns what the
 * lws HTTP callback must return. */
int dg_gw_write_http(struct conn *c, int status, const char *type, const void *body, size_t len);
int dg_gw_write_http_wsi(struct lws *wsi, int status, const char *type, const char *body,
			 size_t len);
/* The same with extra headers: {"name:", "value", ..., NULL} (may be NULL). */
int dg_gw_write_http_extra(struct lws *wsi, int status, const char *type, const char *const *extra,
			   const char *body, size_t len);
/* Only the headers, for a body written later: len is its length, or
 * LWS_ILLEGAL_HTTP_CONTENT_LEN when unknown. 0 or -1. */
int dg_gw_write_http_head(struct lws *wsi, int status, const char *type, unsigned long long len,
			  const char *const *extra);
/* Descriptors in the event loop ("dg-raw"), tagged with what they are. */
enum raw_kind { RAW_SPAWNER = 1, RAW_WORKER, RAW_EXEC, RAW_EGRESS, RAW_AGENT_CHECK, RAW_VNC };
struct raw_tag {
	enum raw_kind kind;
	struct gw_session *s;
	struct conn *c;       /* RAW_VNC: the viewer it serves (NULL once gone) */
};
struct lws *dg_gw_adopt(struct gw *gw, int fd, void *opaque);
struct lws *dg_gw_spawner_adopt(struct gw *gw, int fd);
struct lws *dg_gw_egress_adopt(struct gw *gw, int fd); /* clears gw->egress_why */
void *dg_gw_raw_tag(struct gw_session *s, int kind);
void dg_gw_raw_untag(void *tag);
struct gw_session *dg_gw_session_find(struct gw *gw, const char *id);
/* A new session id (also an Mcp-Session-Id and an approval id): this instance, '-', and
 * DG_SESSION_ID_RANDOM_HEX random hex digits (proto.h). 0, or -EIO when
 * there is no randomness, -ENOSPC when out (outlen bytes) is too small. */
int dg_gw_new_id(char *out, size_t outlen);

/* recording-link.c: see there (dg_gw_policy_load: gateway.h). */
int dg_gw_rec_start(struct gw *gw, struct dg_err *err); /* as root, before sessions */
void dg_gw_rec_timers(struct gw *gw);
void dg_gw_rec_stop(struct gw *gw);
int dg_gw_rec_open(struct gw_session *s, struct dg_err *err);
void dg_gw_rec_event(struct gw_session *s, const json_t *ev);   /* ev borrowed */
int dg_gw_rec_frame(struct gw_session *s, const unsigned char *png, size_t len,
		    char hash[DG_REC_HEX_LEN + 1]);
void dg_gw_rec_failed(struct gw_session *s, const char *why);
void dg_gw_rec_close(struct gw_session *s, const char *reason);
json_t *dg_gw_rec_list(struct gw *gw);
json_t *dg_gw_rec_info(struct gw *gw, const char *id); /* NULL: no such recording */
void dg_gw_rec_cache_free(struct gw *gw);
/* The root holding recording id on this host: the recordings directory,
 * else the bucket's cache, else NULL. */
const char *dg_gw_rec_root(struct gw *gw, const char *id);

/* bucket.c: see there. */
int dg_gw_bucket_start(struct gw *gw, struct dg_err *err); /* as root, after orphans */
void dg_gw_bucket_timers(struct gw *gw);
void dg_gw_bucket_stop(struct gw *gw);
void dg_gw_bucket_sealed(struct gw *gw, const char *id);   /* queue its upload */
void dg_gw_bucket_retention(struct gw *gw);                /* ask for a pass in the bucket */
int dg_gw_bucket_pending(struct gw *gw);
const char *dg_gw_bucket_cache(struct gw *gw);             /* NULL: no object store */
/* c's GET of recording id, which is not on this host: 0 when c now waits
 * for its fetch (c->fetch_done and a writable callback when it ended: route
 * it again); else the answer to give, *status (404, 502, 503) and msg. */
int dg_gw_bucket_wait(struct gw *gw, struct conn *c, const char *id, int *status, char *msg,
		      size_t cap);
void dg_gw_bucket_conn_closed(struct gw *gw, struct conn *c);

/* fork() for a child of the gateway that reports through a pipe: the
 * child's pid in the parent (*fd the pipe's read end, close-on-exec), 0 in
 * the child (*fd the write end, close-on-exec; SIGTERM and SIGINT at their
 * defaults), or a negative errno (bucket.c). */
int dg_gw_fork_reporting(int *fd);

/* video.c: see there. */
int dg_gw_video_start(struct gw *gw, struct dg_err *err); /* as root, after the key */
void dg_gw_video_stop(struct gw *gw);                     /* kills a running export */
/* c's GET of recording id (in root, sealed) as a video of format fmt
 * ("webm", "mp4"): 1 when file now names the video to serve; 0 when c waits
 * for its export (c->export_done and a writable callback when it ended:
 * route it again); else < 0 with the answer, *status (500, 503, 504), msg. */
int dg_gw_video_get(struct gw *gw, struct conn *c, const char *root, const char *id,
		    const char *fmt, char *file, size_t file_cap, int *status, char *msg, size_t cap);
void dg_gw_video_conn_closed(struct gw *gw, struct conn *c);

/* GET /v1/policies: the gateway's policies (default first) as their JSON. */
json_t *dg_gw_policies_json(struct gw *gw);
/* An event for the recording and the observers alike (ev stolen). */
void dg_gw_note(struct gw_session *s, json_t *ev);
/* A decision of the browser or egress layer (ev stolen), tied to the action
 * that led to it, for the recording and the observers. */
void dg_gw_note_decision(struct gw_session *s, json_t *ev);

/* decide.c: the decision module. The action the current step of r runs (a:
 * the adapter's parsed action) under s's policy and state, into
 * r->decision (with the state it was made in, for the recording); an
 * action that will run counted for the actions_per_minute budget; a
 * browser REQUEST (data, len from the worker on fd) decoded, decided,
 * answered on fd and recorded: 0, or -EPROTO (malformed) or a send error
 * (err says which), when the caller ends the session. */
void dg_gw_decide_action(struct gw_session *s, struct request *r, const struct dg_action *a);
/* Only the state part: what r's current action is decided in, kept for the
 * recording (an action refused without a decision: paused by a takeover). */
void dg_gw_decide_state(struct gw_session *s, struct request *r);
void dg_gw_count_action(struct gw_session *s);
/* Adds one to pm's current second; the sum over the last minute. */
void dg_gw_per_minute_add(struct gw_per_minute *pm);
uint64_t dg_gw_per_minute_sum(const struct gw_per_minute *pm);
int dg_gw_decide_request(struct gw_session *s, int fd, const uint8_t *data, size_t len,
			 struct dg_err *err);
/* A CDP client's command as the worker read it (q), decided under s's
 * policy into d: the method's rule, then what it amounts to (the
 * canonical action, the script, the URL, downloads, a proxy); ask counts
 * as deny (a CDP client cannot wait for a human). */
void dg_gw_decide_cdp(struct gw_session *s, const struct dg_cdp_decide *q, struct dg_decision *d,
		      bool *cacheable);

/* runner.c */
void dg_gw_session_agent_message(struct gw_session *s, struct conn *c, const char *text, size_t len);
/* An operator's message on its channel c (s->op.conn): canonical actions
 * of a person at the screen only (input, navigation, screenshot, wait),
 * queued with the agent's and decided by the same policy; answered on c. */
void dg_gw_operator_message(struct gw_session *s, struct conn *c, const char *text, size_t len);
/* A takeover began: an agent's action waiting for a human's approval is
 * withdrawn and refused as paused (the one running at the desktop
 * finishes). */
void dg_gw_runner_pause(struct gw_session *s);
/* The worker's result of the current action (res stolen), or its failure. */
void dg_gw_step_done(struct gw_session *s, json_t *res);
void dg_gw_step_failed(struct gw_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The spawner's answer to s's upload check (s->upload_req, cleared): the
 * verdict on each path asked, in their order (answer->n of them), or
 * answer NULL and error saying why the spawner could not check. */
void dg_gw_upload_checked(struct gw_session *s, const struct dg_upload_check *answer,
			  const char *error);
/* Sends an action to s's worker: action is its canonical text (len bytes,
 * dg_adapted.text or a constant), sent as it is. 0 or a negative errno. */
int dg_gw_send_to_worker(struct gw_session *s, const char *action, size_t len);
/* png (malloc'd, len bytes, taken) is s's screen now: kept as its current
 * one, stored in its recording (s->frame_hash names it then, "" when it
 * could not be), sent to its observers. 0, or dg_gw_rec_frame's error. */
int dg_gw_set_screen(struct gw_session *s, unsigned char *png, size_t len);
/* The page, title and cursor a worker's message reports (borrowed). */
void dg_gw_set_page(struct gw_session *s, json_t *res);
/* s is ending (reason): the request in progress is recorded and answered,
 * queued ones answered as not run, all freed; any approval dropped. */
void dg_gw_runner_end(struct gw_session *s, const char *reason);
/* agent no longer wants its requests (an MCP call cancelled, its client
 * gone: why says which): the queued ones are dropped unrun; the one
 * running finishes unanswered, unless it waits for a human: then its
 * approval is withdrawn and it is recorded as refused. */
void dg_gw_runner_withdraw(struct gw_session *s, struct conn *agent, const char *why);
void dg_gw_approval_clear(struct gw_session *s);
/* Approvals: the pending ones as JSON (GET /v1/approvals); answering one:
 * 0, or -ENOENT (no such pending approval), -ESTALE (the action it was for
 * is no longer the one waiting). */
json_t *dg_gw_approvals_json(struct gw *gw);
struct gw_session *dg_gw_approval_find(struct gw *gw, const char *id);
int dg_gw_approval_answer(struct gw *gw, const char *id, bool approve, const char *who,
			  char *err, size_t errlen);

/* session.c */
/* Creates a session from the options body (POST /v1/sessions's fields),
 * for creator (its principal owns it; it gets the HTTP reply when the
 * desktop is ready or failed). mcp: what the recording's "created" event
 * says of the MCP client that asked (borrowed), or NULL. *out (when not
 * NULL) is the new session. 0, or -1 with err and the HTTP *status. */
int dg_gw_session_create(struct gw *gw, struct conn *creator, json_t *body, const json_t *mcp,
			 struct gw_session **out, char *err, size_t errlen, int *status);
/* A policy made by the gateway for one session (blast.c's drafts): the
 * compiled policy and its text (malloc'd, len bytes), as recorded. */
struct dg_gw_own_policy {
	struct dg_policy policy;
	char *text;
	size_t len;
};
/* dg_gw_session_create under own instead of the policy the options name:
 * own is emptied when taken (the session frees it); whatever is left in
 * it on failure stays the caller's. */
int dg_gw_session_create_own(struct gw *gw, struct conn *creator, json_t *body, const json_t *mcp,
			     struct dg_gw_own_policy *own, struct gw_session **out, char *err,
			     size_t errlen, int *status);
/* Checks an options body as dg_gw_session_create would, without creating
 * anything: 0 (and the profile and model display it asks for) or -EINVAL
 * with err. */
int dg_gw_session_opts_check(struct gw *gw, const json_t *body, bool *browser, int *display_w,
			     int *display_h, char *err, size_t errlen);
/* The worker said READY: answers the POST that created s. */
void dg_gw_session_ready(struct gw_session *s);
void dg_gw_session_end(struct gw_session *s, const char *reason);
json_t *dg_gw_session_json(const struct gw_session *s, bool with_token);
/* The session's JSON with "type": "hello" (a new reference): what every
 * connection gets first, and the answer to an agent's own hello. */
json_t *dg_gw_session_hello(const struct gw_session *s);
/* Sends ev (a new reference, taken) to s's agent when it asked for events
 * of kind (a dg_agent_event bit) in its hello; drops it otherwise. */
void dg_gw_agent_event(struct gw_session *s, unsigned kind, json_t *ev);
bool dg_gw_session_token_ok(const struct gw_session *s, const char *tok, size_t len);
void dg_gw_session_agent_attach(struct gw_session *s, struct conn *c);
void dg_gw_session_agent_detach(struct gw_session *s, struct conn *c);
void dg_gw_session_observer_attach(struct gw_session *s, struct conn *c);
void dg_gw_session_observer_detach(struct gw_session *s, struct conn *c);

/* takeover.c (docs/api.md#takeover): an operator (or admin) takes control
 * of a session (-EBUSY: someone else holds it, err names who; -EAGAIN: the
 * session is not ready), releases it (-ENOENT: nobody holds it; -EPERM: who
 * is neither the holder nor an admin), or loses it (reason: "released",
 * "timeout", "idle", "disconnected", "the session ended"); the takeover's
 * state as JSON (null when nobody holds it); the operator's channel. */
int dg_gw_takeover_take(struct gw_session *s, const struct dg_principal *who, char *err,
			size_t errlen);
int dg_gw_takeover_release(struct gw_session *s, const struct dg_principal *who, char *err,
			   size_t errlen);
void dg_gw_takeover_end(struct gw_session *s, const char *reason, const char *by);
json_t *dg_gw_takeover_json(const struct gw_session *s);
/* 0, or -EBUSY/-EPERM with err (the handshake's 409/403): whether c's
 * principal may open the operator's channel of s now. */
int dg_gw_takeover_may_attach(const struct gw_session *s, const struct conn *c, char *err,
			      size_t errlen);
void dg_gw_takeover_attach(struct gw_session *s, struct conn *c);
void dg_gw_takeover_detach(struct gw_session *s, struct conn *c);

/* egress-link.c: the session's listener goes to the proxy once the desktop
 * exists (attach; session.c withdraws it at the session's end); the proxy's
 * events reach their session. */
void dg_gw_egress_attach(struct gw_session *s);
void dg_gw_egress_event(struct gw *gw, json_t *ev);
/* Start-up, before the event loop: asks the spawner for the first proxy and
 * waits (bounded by DG_GW_EGRESS_START_WAIT_MS) for its channel. 0 or a
 * negative errno with err. */
int dg_gw_egress_start(struct gw *gw, struct dg_err *err);
/* The proxy's channel closed (why: what was seen): supervision, see
 * egress-link.c. */
void dg_gw_egress_lost(struct gw *gw, const char *why);
/* Whether msg from the spawner answers the egress start in flight; if so
 * it is handled (fds taken). */
bool dg_gw_egress_spawner_message(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds,
				  int nfds);

/* cdp-link.c: the CDP endpoint's gateway half (docs/cdp.md): clients'
 * WebSockets relayed to the worker unparsed, its answers relayed back, its
 * DECIDE messages decided (decide.c) and recorded. */
json_t *dg_gw_cdp_version(const struct gw_session *s);
void dg_gw_cdp_attach(struct gw_session *s, struct conn *c);
void dg_gw_cdp_detach(struct gw_session *s, struct conn *c);
void dg_gw_cdp_from_client(struct gw_session *s, struct conn *c, const char *msg, size_t len);
/* A CDP message from the worker (type DG_MSG_CDP_OUT, _DROP or _DECIDE): 0,
 * or -EPROTO (err says why) when the worker broke the protocol. */
int dg_gw_cdp_from_worker(struct gw_session *s, uint32_t type, const uint8_t *data, size_t len,
			  struct dg_err *err);
/* The spawner's answer to s's CDP upload check (s->cdp_upload_req, cleared
 * by the caller): answer NULL and error saying why when it could not check. */
void dg_gw_cdp_upload_checked(struct gw_session *s, const struct dg_upload_check *answer,
			      const char *error);
/* The session ends: its CDP clients are closed (reason). */
void dg_gw_cdp_end(struct gw_session *s, const char *reason);
/* Records s's waiting NOTEs (server.c calls it once a CDP client's queue
 * is written out; cdp-link.c before anything that must follow them). */
void dg_gw_cdp_notes_run(struct gw_session *s);

/* vnc-link.c: the live view (docs/vnc.md): each viewer's WebSocket relayed,
 * as bytes, to a socket handed to the worker's RFB server. attach: c
 * (bound to s) gets its socket; from_viewer: bytes it sent; the raw
 * callbacks of its socket (readable: -1 closes it; writable; closed);
 * detach: its WebSocket closed; end: s ends, its viewers are closed. */
void dg_gw_vnc_attach(struct gw_session *s, struct conn *c);
void dg_gw_vnc_from_viewer(struct conn *c, const void *data, size_t len);
int dg_gw_vnc_readable(struct raw_tag *t);
int dg_gw_vnc_writable(struct raw_tag *t);
void dg_gw_vnc_raw_closed(struct raw_tag *t);
void dg_gw_vnc_detach(struct gw_session *s, struct conn *c);
void dg_gw_vnc_end(struct gw_session *s, const char *reason);

/* desktop-link.c */
int dg_gw_worker_readable(struct gw_session *s);   /* <0: close the worker channel */
void dg_gw_worker_closed(struct gw_session *s);
int dg_gw_exec_readable(struct gw_session *s);
void dg_gw_exec_closed(struct gw_session *s);
void dg_gw_spawner_message(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds, int nfds);

#endif
