/* script: the javascript action (internal to desktop/worker/): code run
 * in the current page's main world, the value of its last expression
 * answered.
 *
 * The worker runs only what its owner sent: the gateway decided the
 * action with the session's policy (which may deny javascript outright)
 * before it reached the worker; nothing here decides anything.
 *
 * The code runs as the DevTools console runs it: Runtime.evaluate on the
 * current page's session, in its main frame's default (main) world, with
 * the page's DOM, window and variables; replMode (a top-level let or
 * const, top-level await), awaitPromise (a promise's value is awaited),
 * userGesture (as a click would: popups, focus). The answer is the value
 * as JSON text:
 *   undefined                "undefined"
 *   strings, numbers, true, false, null   as JSON ("ok" is "\"ok\"");
 *                            NaN, Infinity, -0, 1n as JavaScript writes them
 *   plain objects, arrays    JSON.stringify of them, run in the page (so a
 *                            page that replaced JSON.stringify answers for
 *                            itself), cut at DG_SCRIPT_ANSWER_MAX characters
 *                            with a note; one that does not serialize (a
 *                            cycle, a BigInt inside) by its description
 *   anything else            its description: functions their source, DOM
 *                            nodes "div#id.class", errors their stack, a Map
 *                            "Map(2)", a date its string
 * Every answer is cut at DG_SCRIPT_ANSWER_MAX characters with the note
 * "\n[the value was cut at 100000 characters]".
 *
 * Errors (the action fails): an exception, "the script threw: " and its
 * description (cut at DG_SCRIPT_ERROR_MAX bytes); a script still running
 * or awaiting after DG_SCRIPT_TIMEOUT_MS: Runtime.evaluate's own timeout
 * stops a synchronous loop (Chromium then answers "Internal error"), and
 * at DG_SCRIPT_TIMEOUT_MS + DG_SCRIPT_GRACE_MS the worker gives up: it
 * sends Runtime.terminateExecution (which stops a loop in a later task;
 * measured with Chromium 156, harmless when nothing runs) and answers
 * that the script did not finish. A promise that never settles leaves its
 * command pending in the DevTools client until the page's document goes
 * (a navigation answers it); its late reply is dropped.
 *
 * One script at a time; every command carries the run's generation, so a
 * reply after the run ended is dropped.
 */
#ifndef DG_WORKER_SCRIPT_PRIV_H
#define DG_WORKER_SCRIPT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "desktop/worker/cdp-priv.h"

#define DG_SCRIPT_TIMEOUT_MS 10000     /* Runtime.evaluate's timeout */
#define DG_SCRIPT_GRACE_MS 1000        /* ... and the worker's wait past it */
#define DG_SCRIPT_ANSWER_MAX 100000    /* characters of a value answered */
#define DG_SCRIPT_ERROR_MAX 1000       /* bytes of a thrown exception's description */
#define DG_SCRIPT_GROUP "deskgate-javascript" /* the object group, released after each run */

/* The run is over: text (valid during the call) or error. Called once per
 * dg_script_run that returned 0, never inside that call. */
typedef void (*dg_script_done_fn)(void *arg, const char *text, const char *error);

/* Zero-initialised is idle; lives as long as the worker (its commands'
 * late replies find it). */
struct dg_script {
	struct dg_cdp *cdp;
	uint64_t gen;
	bool busy;
	char session[DG_CDP_ID_MAX + 1]; /* the page session it runs on */
	json_t *value;                   /* the value while it is serialized */
	long long t0, deadline;          /* ms */
	dg_script_done_fn done;
	void *arg;
	char error[DG_SCRIPT_ERROR_MAX + 128];
};

/* Starts code (NUL-terminated UTF-8, as in a javascript action) on the
 * current page of cdp. Returns 0 (done will be called), or -EBUSY,
 * -EINVAL (no code), -EAGAIN (no page attached), -ENOMEM, with err and
 * done never called. */
int dg_script_run(struct dg_script *s, struct dg_cdp *cdp, const char *code,
		  dg_script_done_fn done, void *arg, struct dg_err *err);

/* The worker's poll timeout while a script runs: ms until the worker's
 * bound; at it the run ends with an error (done runs) and 0 is returned.
 * -1 when idle. */
int dg_script_advance(struct dg_script *s);

#endif
