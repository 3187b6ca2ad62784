/* Internals the DevTools client's two files share (desktop/worker/: cdp.c,
 * cdp-page.c); cdp-priv.h is the contract the worker, the guard and the
 * tests see, and struct dg_cdp stays opaque to them.
 *
 *   cdp.c       the pipe client: framing and parsing of the input, the
 *               pending-command table, the output queue, the client's life
 *               (new, start, handle, free) and its raw commands
 *   cdp-page.c  the page state on top of it: page targets, the current page
 *               and its session, its loads and title refreshes, the
 *               completion of every command by kind, and the page commands
 *               (navigate, back, forward, reload, evaluate, refresh, switch)
 *
 * The two call each other: cdp.c hands every reply to dg_cdp_finish and
 * every event to dg_cdp_on_browser_event; cdp-page.c sends and fails
 * commands through cdp.c. Every function here runs on the worker's one
 * thread, inside a dg_cdp_* call.
 */
#ifndef DG_WORKER_CDP_INT_PRIV_H
#define DG_WORKER_CDP_INT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "desktop/worker/cdp-priv.h"

/* Bytes per read of the pipe from the browser. */
#define READ_CHUNK (64u * 1024)
/* A message buffer grown past this is released after its message, so one
 * large reply does not pin megabytes for the session's life. */
#define MSG_KEEP (256u * 1024)
#define METHOD_MAX 128                  /* bytes of a method name, sent or received */
#define LAST_ERROR_MAX 256              /* bytes of dg_cdp_last_error */

/* What a pending command is, which says how its reply completes it
 * (dg_cdp_finish). */
enum kind {
	K_USER,         /* dg_cdp_send: result handed over as is */
	K_NAVIGATE,     /* Page.navigate: errorText is a failure */
	K_RELOAD,       /* Page.reload */
	K_HIST_BACK,    /* Page.getNavigationHistory for back */
	K_HIST_FORWARD, /* ... for forward */
	K_HIST_GO,      /* Page.navigateToHistoryEntry */
	K_EVALUATE,     /* Runtime.evaluate: the RemoteObject, or the exception */
	K_DISCOVER,     /* Target.setDiscoverTargets (start) */
	K_ATTACH,       /* Target.attachToTarget for `target` */
	K_PAGE_ENABLE,  /* Page.enable on a fresh page session */
	K_INFO,         /* Target.getTargetInfo for the current page, by the client */
	K_REFRESH,      /* the same, asked for by the owner (dg_cdp_refresh) */
	K_RAW,          /* dg_cdp_send_raw: the whole reply handed over */
};

/* A command sent and not answered yet. */
struct pending {
	int64_t id;                      /* 0: free slot */
	enum kind kind;
	char session[DG_CDP_ID_MAX + 1]; /* the session it was sent on; "" browser */
	uint64_t page_gen;               /* page session generation; 0: not page-bound */
	char target[DG_CDP_ID_MAX + 1];  /* K_ATTACH: the target */
	dg_cdp_done_fn done;
	void *arg;
};

/* A page target the browser reported. */
struct target {
	bool used;
	bool attach_failed;              /* never try it again */
	char id[DG_CDP_ID_MAX + 1];
	char *url;                       /* "" when refused */
	char *title;
	uint64_t seq;                    /* creation order */
};

struct dg_cdp {
	int out_fd, in_fd;
	bool closed;
	bool sigpipe_ignored;  /* SIGPIPE was ignored at dg_cdp_new: writes need no mask */

	/* input */
	char *rbuf;                      /* READ_CHUNK bytes */
	char *msg;                       /* a message split across reads */
	size_t msg_len, msg_cap;
	bool discarding;                 /* inside an oversized message */

	/* output */
	char *out;
	size_t out_off, out_len, out_cap;

	/* commands */
	int64_t next_id;
	struct pending pending[DG_CDP_PENDING_MAX];
	int n_pending;

	/* targets and the current page */
	struct target targets[DG_CDP_TARGETS_MAX];
	int n_targets;
	uint64_t target_seq;
	int cur;                          /* index in targets, -1: none */
	char prefer[DG_CDP_ID_MAX + 1];   /* dg_cdp_switch: attach this one next; "" */
	char session[DG_CDP_ID_MAX + 1];  /* its flattened session; "" */
	char main_frame[DG_CDP_ID_MAX + 1];
	uint64_t page_gen;                /* bumped for every new page session */
	bool started, attaching, ready;
	bool frame_loading;
	int nav_inflight;                 /* navigation commands awaiting replies */
	/* Title refreshes (Target.getTargetInfo): Chromium reports a title set
	 * after the commit (<title> parsed, document.title) in no event, so the
	 * client asks after loads and page commands. At most one in flight;
	 * triggers meanwhile ask once more after it. */
	bool info_inflight, info_again;
	bool load_refresh;                /* a load waits for its refresh: still loading */
	uint64_t changes, loads;

	dg_cdp_done_fn start_done;
	void *start_arg;
	dg_cdp_event_fn on_event;
	void *event_arg;

	struct dg_cdp_stats stats;
	char last_error[LAST_ERROR_MAX];
};

/* ---- the pipe client (cdp.c) -------------------------------------------- */

/* Remembers a note for dg_cdp_last_error. */
void dg_cdp_set_last_error(struct dg_cdp *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A refused message: counted, remembered for logs, otherwise ignored. */
void dg_cdp_refuse(struct dg_cdp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Copies browser text into out (DG_CDP_ERRTEXT_MAX + 1 bytes) for a
 * callback or a log: printable ASCII and UTF-8 kept, control bytes escaped
 * as \xNN, cut (with "...") so that the result fits. */
void dg_cdp_show(const char *in, char *out);

/* The common part of every command: queued (and written when the pipe
 * takes it) with a pending slot of kind, on session_id (NULL: the browser
 * session), bound to page_gen (0: not page-bound), target for K_ATTACH.
 * params is stolen. Returns 0 or a negative errno with err (-EPIPE closed,
 * -EINVAL, -EBUSY the table is full, -EMSGSIZE, -ENOBUFS, -ENOMEM). */
int dg_cdp_send_cmd(struct dg_cdp *c, enum kind kind, const char *method, json_t *params,
		    const char *session_id, uint64_t page_gen, const char *target,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err);

/* Completes the pending commands with id <= max_id (those that existed when
 * the failure happened, not ones their callbacks sent since) that match
 * page_gen (0: all); the client's own (discovery, attach) and the raw ones
 * only when with_internal. Returns how many. */
int dg_cdp_fail_pending(struct dg_cdp *c, int64_t max_id, uint64_t page_gen, bool with_internal,
			int status, const char *msg);

/* Runs the dg_cdp_start callback once, if it has not run yet. */
void dg_cdp_call_start_done(struct dg_cdp *c, int status, const char *msg);

/* ---- the page state (cdp-page.c) ---------------------------------------- */

/* Completes p (already out of the table) by its kind: the owner's
 * callback, or the client's own next step (attach, Page.enable, title
 * refresh, history). */
void dg_cdp_finish(struct dg_cdp *c, struct pending p, int status, json_t *result,
		   const char *msg);

/* An event (params an object) on session (NULL: the browser's): the
 * targets and the current page follow it. false when it was refused as
 * malformed (counted; not passed to the owner). */
bool dg_cdp_on_browser_event(struct dg_cdp *c, const char *method, const char *session,
			     json_t *params);

/* Frees a target's strings and empties its slot. */
void dg_cdp_target_clear(struct target *t);

#endif
