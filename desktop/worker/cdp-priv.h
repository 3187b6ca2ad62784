/* cdp: a Chrome DevTools Protocol client over Chromium's pipe transport
 * (--remote-debugging-pipe: we write commands to its fd 3, it writes replies
 * and events to its fd 4; every message is one JSON object ended by a NUL).
 *
 * Internal to desktop/worker/: used by the worker, which runs one poll()
 * loop over the RFB socket, these pipes and its control socket. The client
 * therefore never blocks and never runs threads: it says which descriptors it
 * wants polled (dg_cdp_pollfds) and does its work in the handlers the owner
 * calls when they are ready (dg_cdp_handle and friends). Every call must come
 * from the thread that owns the client.
 *
 * Every byte from Chromium is hostile (it renders attacker pages), so:
 *  - a message is at most DG_CDP_MSG_MAX bytes; a longer one is discarded up
 *    to its NUL as it arrives (never buffered whole) and counted as an error;
 *  - a message must not describe more than DG_CDP_NODES_MAX JSON values
 *    (checked by a scan before jansson allocates a tree for it);
 *  - a lone UTF-16 surrogate escaped in a string (\uD800 without its
 *    pair: a page's broken text, which Chromium passes on and jansson
 *    refuses) is read as U+FFFD, so that a page cannot make a reply or an
 *    event vanish with it;
 *  - malformed JSON, duplicate keys, wrong types, ids we did not issue or
 *    already completed, replies on another session than the command's: each
 *    is counted (dg_cdp_stats) and ignored; the client keeps working;
 *  - a reply refused by the two bounds above or as malformed JSON still
 *    ends its command when its first bytes name the id ({"id":N, as
 *    Chromium writes): status -EMSGSIZE, -E2BIG or -EPROTO, with why;
 *  - at most DG_CDP_PENDING_MAX commands wait for replies, at most
 *    DG_CDP_TARGETS_MAX page targets are tracked, at most DG_CDP_OUT_MAX
 *    bytes of commands wait to be written;
 *  - strings kept from the browser are bounded: a page URL longer than
 *    DG_CDP_URL_MAX bytes (or holding control bytes) is refused and reported
 *    as "" (unknown), never cut, because a cut URL is a different URL that a
 *    policy pattern could allow; a title longer than DG_CDP_TITLE_MAX bytes is
 *    cut at a UTF-8 character boundary (titles are only shown, never
 *    decided on), and its control bytes become spaces; error texts handed to
 *    callbacks are escaped and cut at DG_CDP_ERRTEXT_MAX.
 *
 * The current page. The client discovers targets (Target.setDiscoverTargets)
 * and attaches (flatten) to one page target, whose URL, title and loading
 * state it reports and on whose session navigate/back/forward/reload/evaluate
 * run. Rule: the current page is the page we attached to, for as long as it
 * exists; when it goes away (destroyed, or its session detached) the most
 * recently created page target still tracked (typically a popup or tab the
 * old page opened) becomes current and is attached to. A page opened while
 * the current one lives does not take over by itself: CDP says nothing
 * about which tab is in front (Chromium 156 sends no event when a tab is
 * activated), so the owner finds out (the guard's dg_guard_probe_tabs asks
 * every page for its visibility and focus) and moves the current page with
 * dg_cdp_switch.
 *
 * URL and title come from Chromium's target info (the tab's title as the
 * browser shows it: the page's URL while it sets none). Chromium sends
 * Target.targetInfoChanged at commits but not when a title is set later
 * (<title> parsed, document.title assigned), so the client also asks
 * (Target.getTargetInfo) after every main-frame load, same-document
 * navigation, evaluate and failed navigation command;
 * a title changed by the page on its own (a timer, a click through RFB) is
 * seen at the next of those or at dg_cdp_refresh, which the owner calls
 * after an action settles.
 *
 * Later (issue #5): auto-attach with waitForDebuggerOnStart in every session
 * and the Fetch domain. The hooks for it: every event reaches the owner's
 * event callback (with its sessionId), and dg_cdp_send sends any command on
 * any session.
 *
 * SIGPIPE: writes block SIGPIPE around write() and consume a SIGPIPE they
 * caused, so a dead browser is an EPIPE, never a dead worker.
 */
#ifndef DG_CDP_PRIV_H
#define DG_CDP_PRIV_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define DG_CDP_MSG_MAX (8u * 1024 * 1024)  /* bytes of one message, NUL excluded */
/* JSON values in one message, counted as brackets and commas outside
 * strings: jansson spends 40-80 bytes a value, so 8 MiB of "[0,0,...]"
 * would otherwise cost some 200 MiB; this bounds it near 16 MiB. */
#define DG_CDP_NODES_MAX 200000
#define DG_CDP_PENDING_MAX 512             /* commands awaiting replies: the worker's own
					    * and its CDP clients' (cdp-fw-priv.h: 4 x 64) */
#define DG_CDP_TARGETS_MAX 64              /* page targets tracked */
#define DG_CDP_OUT_MAX (8u * 1024 * 1024)  /* bytes of commands queued to write (a CDP
					    * client's command may be DG_CDP_MSG_MAX) */
#define DG_CDP_URL_MAX 8192                /* bytes of a page URL kept */
#define DG_CDP_TITLE_MAX 1024              /* bytes of a page title kept */
#define DG_CDP_ID_MAX 64                   /* bytes of a targetId / sessionId */
#define DG_CDP_ERRTEXT_MAX 256             /* bytes of an error text from the browser */
/* Bytes one dg_cdp_handle_in call reads at most, so that a flood from the
 * browser cannot starve the rest of the worker's loop (poll is
 * level-triggered: the rest is read on the next round). */
#define DG_CDP_READ_BUDGET (1024u * 1024)

struct dg_cdp;

/* Completion of a command. Called exactly once for every command whose
 * sending call returned 0, never for one that returned an error:
 *  status 0           success; result is the reply's result object (for
 *                     dg_cdp_evaluate: the RemoteObject, see there)
 *  -EREMOTEIO         the browser answered with an error, or a navigation
 *                     failed (errorText), or the evaluated script threw;
 *                     error_message says what (escaped, bounded)
 *  -ENOENT            back/forward: no previous/next page
 *  -EPROTO            the reply was malformed (result missing, wrong types)
 *  -ECONNRESET        the page session the command ran on went away
 *  -EPIPE             the pipe closed (Chromium died) before the reply
 *  -ECANCELED         dg_cdp_free, or the owner's dg_cdp_fail_all
 * result is borrowed (json_incref it to keep it) and may be NULL on errors;
 * error_message is NULL on success. It never runs inside the call that sent
 * the command, only inside the handlers (and dg_cdp_fail_all/dg_cdp_free).
 * The callback may send new commands; it
 * must not call dg_cdp_free (except when status is -ECANCELED from free, when
 * it must not touch the client at all). */
typedef void (*dg_cdp_done_fn)(void *arg, int status, json_t *result, const char *error_message);

/* Every event from the browser, after the client's own bookkeeping (so
 * dg_cdp_url etc. already reflect it). session_id is NULL for browser-level
 * events; params is borrowed and is always an object. May send commands;
 * must not call dg_cdp_free. */
typedef void (*dg_cdp_event_fn)(void *arg, const char *method, const char *session_id,
				json_t *params);

/* Counters, for logs and tests. */
struct dg_cdp_stats {
	uint64_t messages;        /* complete messages received */
	uint64_t events;          /* well-formed events */
	uint64_t replies;         /* replies matched to a pending command */
	uint64_t errors;          /* messages refused: oversized, malformed, wrong types */
	uint64_t oversized;       /* of which longer than DG_CDP_MSG_MAX */
	uint64_t unknown_ids;     /* replies to ids not pending (ignored) */
	uint64_t targets_dropped; /* page targets not tracked: table full */
	uint64_t bytes_in, bytes_out;
};

/* Takes ownership of both descriptors (closed by dg_cdp_free, and by this
 * call when it fails) and makes them non-blocking. out_fd: we write commands
 * (Chromium's fd 3); in_fd: we read (Chromium's fd 4). Returns NULL when out
 * of memory. Nothing is sent before dg_cdp_start. A reader gone never
 * raises SIGPIPE; whether it must be masked per write is read here, once
 * (a caller that ignores SIGPIPE must not restore it later). */
struct dg_cdp *dg_cdp_new(int out_fd, int in_fd);

/* Completes every pending command with -ECANCELED (see dg_cdp_done_fn),
 * closes the descriptors and frees everything. NULL is fine. */
void dg_cdp_free(struct dg_cdp *c);

/* The owner's event callback (NULL: none). */
void dg_cdp_set_event_handler(struct dg_cdp *c, dg_cdp_event_fn fn, void *arg);

/* Starts discovery and the attach to a page. Sends Target.setDiscoverTargets;
 * the rest happens in the handlers. done (may be NULL) is called once: 0 when
 * a page is attached and its Page domain enabled (dg_cdp_ready), or an error
 * (the pipe closed, discovery refused). Call once. Returns 0 or a negative
 * errno (-EALREADY, or as dg_cdp_send). */
int dg_cdp_start(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err);

/* Fills pfd[0] (in_fd, POLLIN) and pfd[1] (out_fd, POLLOUT while commands
 * are queued, else no events: poll still reports POLLERR there). A closed
 * client gives fd -1 in both, which poll ignores. */
void dg_cdp_pollfds(const struct dg_cdp *c, struct pollfd pfd[2]);

/* Acts on the revents of the two entries filled by dg_cdp_pollfds: calls
 * dg_cdp_handle_in / dg_cdp_handle_out as needed. Returns 0, or -EPIPE once
 * the browser is gone (err says how), after which the client is closed. */
int dg_cdp_handle(struct dg_cdp *c, const struct pollfd pfd[2], struct dg_err *err);

/* Reads what is available (at most DG_CDP_READ_BUDGET bytes), splits it on
 * NUL bytes and dispatches each complete message: replies to their
 * callbacks, events to the bookkeeping and the event callback. Bad messages
 * are counted and skipped. Returns 0, or -EPIPE when the pipe closed or
 * failed: every pending command is then completed with -EPIPE and the
 * client is closed (only the accessors and dg_cdp_free remain useful). */
int dg_cdp_handle_in(struct dg_cdp *c, struct dg_err *err);

/* Writes queued commands until the pipe is full. Returns 0, or -EPIPE as
 * dg_cdp_handle_in. */
int dg_cdp_handle_out(struct dg_cdp *c, struct dg_err *err);

/* Sends a command. method: e.g. "Page.navigate"; params: an object or NULL,
 * always stolen (even when the call fails); session_id: the flattened session
 * to run on, NULL for the browser. done may be NULL (the reply is then only
 * checked and dropped). The command is written at once when the pipe takes
 * it, else queued. Returns 0 (done will be called), or, with done never
 * called: -EINVAL (bad arguments), -EBUSY (DG_CDP_PENDING_MAX commands
 * pending), -ENOBUFS (the write queue is full), -EMSGSIZE (the command alone
 * exceeds DG_CDP_OUT_MAX), -EPIPE (closed), -ENOMEM. */
int dg_cdp_send(struct dg_cdp *c, const char *method, json_t *params, const char *session_id,
		dg_cdp_done_fn done, void *arg, struct dg_err *err);

/* Sends a command whose reply the owner reads whole (the CDP firewall,
 * cdp-fw-priv.h, hands it to a client): as dg_cdp_send, but done gets
 * status 0 and result = the reply message itself for every reply the
 * browser sent to it, an error as much as a result ({"id", "result"} or
 * {"id", "error": {"code", "message", "data"?}}, "sessionId" on a session;
 * nothing in it checked but the id and the session), or a negative status
 * and no result when none came (-EPIPE, -ECANCELED at dg_cdp_free).
 * dg_cdp_fail_all leaves these commands alone. */
int dg_cdp_send_raw(struct dg_cdp *c, const char *method, json_t *params, const char *session_id,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err);

/* Commands on the current page. Each returns as dg_cdp_send, plus -EAGAIN
 * while no page is attached (!dg_cdp_ready).
 *
 * navigate: Page.navigate. A reply with errorText (net::ERR_...) completes
 *   with -EREMOTEIO and that text. url is at most DG_CDP_URL_MAX bytes
 *   (-E2BIG) of valid UTF-8; what it may be is the policy's business, not
 *   this client's.
 * back/forward: Page.getNavigationHistory, then Page.navigateToHistoryEntry;
 *   -ENOENT "no previous page" / "no next page" at either end.
 * reload: Page.reload.
 * evaluate: Runtime.evaluate with returnByValue; result is the RemoteObject
 *   ({"type":..., "value":...}); an exception completes with -EREMOTEIO and
 *   its description.
 * A navigation's completion means the browser took it; the page's load is
 * followed with dg_cdp_loading. */
int dg_cdp_navigate(struct dg_cdp *c, const char *url, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err);
int dg_cdp_back(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err);
int dg_cdp_forward(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err);
int dg_cdp_reload(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err);
int dg_cdp_evaluate(struct dg_cdp *c, const char *expression, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err);

/* Asks for the current page's URL and title now (Target.getTargetInfo):
 * done gets the targetInfo object once dg_cdp_url/dg_cdp_title reflect it.
 * Returns as dg_cdp_send, plus -EAGAIN while no page is attached. */
int dg_cdp_refresh(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err);

/* Makes the page target target_id the current page: the client's session
 * on the old one is detached (its pending page commands complete with
 * -ECONNRESET, dg_cdp_changes goes up) and the new one attached as at
 * start; until its Page.enable is answered !dg_cdp_ready. Returns 0 (also
 * when it is current already), -ENOENT for a page not tracked or that
 * could not be attached, -EPIPE when closed. */
int dg_cdp_switch(struct dg_cdp *c, const char *target_id, struct dg_err *err);

/* Completes every pending command the owner sent (dg_cdp_send and the page
 * commands) with status and message: its deadline passed, it gives up. The
 * client's own commands (discovery, attach) and the raw ones
 * (dg_cdp_send_raw) are left alone. Returns how many were completed. */
int dg_cdp_fail_all(struct dg_cdp *c, int status, const char *message);

/* The bounds the client reads the browser's messages with, for others that
 * read DevTools messages (the firewall reads its clients' with them):
 * dg_cdp_nodes: how many JSON values s (n bytes) describes, as counted
 *   against DG_CDP_NODES_MAX (brackets and commas outside strings, a scan
 *   before any parser allocates); the count stops at stop + 1;
 * dg_cdp_valid_id: v is an identifier (targetId, sessionId) as the client
 *   keeps them: a string of 1..DG_CDP_ID_MAX printable ASCII bytes. */
size_t dg_cdp_nodes(const char *s, size_t n, size_t stop);
bool dg_cdp_valid_id(const json_t *v);

/* ---- State (valid until the next handler call) ---- */

/* A page is attached and its Page domain enabled: page commands may run. */
bool dg_cdp_ready(const struct dg_cdp *c);
/* The pipe closed or failed; nothing more will happen. */
bool dg_cdp_closed(const struct dg_cdp *c);
/* The current page is loading: from the main frame's
 * Page.frameStartedLoading until its Page.frameStoppedLoading (which
 * follows Page.loadEventFired) and the URL and title read after it; also
 * while a navigation command sent by this client awaits its reply (Chromium
 * sends frameStartedLoading before that reply). So once a navigation's
 * callback ran, !dg_cdp_loading means "loaded, URL and title current". */
bool dg_cdp_loading(const struct dg_cdp *c);
/* The current page's URL and title; "" when unknown (no page, or refused as
 * described at the top). Never NULL. */
const char *dg_cdp_url(const struct dg_cdp *c);
const char *dg_cdp_title(const struct dg_cdp *c);
/* ---- Ticketed page commands (cdp-world.c) ----
 *
 * For helpers that talk to the page in steps, each reply starting the next
 * (ack.c, tree.c): a command on the current page's session carries a
 * ticket with its sender (owner) and the sender's generation at the time;
 * the reply handler gets both back with dg_cdp_claim and drops a reply
 * whose generation has passed (the step's work ended meanwhile).
 *
 * dg_cdp_page_send: false when nothing was sent (no page attached, out of
 *   memory, the queue full); params is consumed either way.
 * dg_cdp_claim: from a reply handler's arg: the owner, or NULL for a
 *   command cancelled with the client; frees the ticket, sets *gen.
 * dg_cdp_world_create: Page.createIsolatedWorld named name on the current
 *   page's main frame, without universal access (as dg_cdp_page_send);
 * dg_cdp_world_id: its reply's execution context id, or 0 when it failed.
 * A context id holds for one document: an evaluation in it after a
 * navigation fails, and a new world is the answer. */
bool dg_cdp_page_send(struct dg_cdp *c, const char *method, json_t *params, dg_cdp_done_fn fn,
		      void *owner, uint64_t gen);
void *dg_cdp_claim(void *arg, int status, uint64_t *gen);
bool dg_cdp_world_create(struct dg_cdp *c, const char *name, dg_cdp_done_fn fn, void *owner,
			 uint64_t gen);
int dg_cdp_world_id(int status, const json_t *result);

/* The current page's targetId and flattened sessionId; "" when none. */
const char *dg_cdp_target_id(const struct dg_cdp *c);
const char *dg_cdp_session_id(const struct dg_cdp *c);
/* Goes up by one or more whenever the current page's URL or title changes,
 * or another page becomes current: compare with the last value seen. */
uint64_t dg_cdp_changes(const struct dg_cdp *c);
/* Goes up when the current page's main frame stops loading. */
uint64_t dg_cdp_loads(const struct dg_cdp *c);
/* Page targets tracked now. */
int dg_cdp_n_targets(const struct dg_cdp *c);
/* One open tab as the client knows it: its targetId, URL and title (""
 * when unknown or refused; a title a script set in a tab that is not the
 * current page may be stale: Chromium announces none), and whether it is
 * the current page. Pointers into the client, valid until its next call. */
struct dg_cdp_tab {
	const char *id, *url, *title;
	bool current;
};
/* The open tabs in the order they opened, at most max of them (the client
 * tracks at most DG_CDP_TARGETS_MAX); returns how many were written. */
int dg_cdp_tabs(const struct dg_cdp *c, struct dg_cdp_tab *out, int max);
/* Commands awaiting replies. */
int dg_cdp_n_pending(const struct dg_cdp *c);
/* Bytes queued to write. */
size_t dg_cdp_queued(const struct dg_cdp *c);
void dg_cdp_stats(const struct dg_cdp *c, struct dg_cdp_stats *s);
/* What the last refused message was refused for ("" when none): for logs. */
const char *dg_cdp_last_error(const struct dg_cdp *c);

#endif
