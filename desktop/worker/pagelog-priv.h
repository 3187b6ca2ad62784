/* pagelog: what each tab logged and requested, for read_console and
 * read_network (internal to desktop/worker/).
 *
 * Collected from the worker's own DevTools view, from the moment a tab is
 * attached: the guard (guard.c) attaches to every target before it runs
 * (auto-attach, waitForDebuggerOnStart) and, for the sessions this module
 * watches, enables Runtime, Network and Log as part of the target's setup
 * (dg_pagelog_attached), so the target resumes only once they are on and
 * nothing of its first load is missed. Watched are the first session on
 * each page, and on each out-of-process iframe and dedicated worker whose
 * parent session is known (their entries go to the parent's tab): a
 * target has a second session when the DevTools client attaches to it
 * too, whose events would be duplicates. Shared and service workers belong
 * to no tab and are not watched.
 *
 * Console entries: Runtime.consoleAPICalled (console.log, warn, error,
 * ...), Runtime.exceptionThrown (uncaught exceptions) and Log.entryAdded
 * (the browser's own messages: failed loads, blocked requests, CSP...).
 * One line each:
 *   [LEVEL] HH:MM:SS.mmm MESSAGE (URL:LINE)
 * LEVEL is the console call's type (log, info, debug, warning, error,
 * assert, table, trace, ...), "exception" for an uncaught exception, the
 * browser's level (verbose, info, warning, error) for its own messages;
 * the time is the browser's, UTC; MESSAGE is the arguments as the
 * console shows them (format specifiers %s %d %i %f %o %O %c applied,
 * objects as a one-level preview {a: 1, b: "x"} or [1, 2], other values
 * by their description), control characters escaped (\n, \t, \xNN) so
 * that an entry is one line; the location (1-based line) is the calling
 * script's, left out when unknown.
 *
 * Network entries: Network.requestWillBeSent, responseReceived,
 * loadingFinished and loadingFailed, one line a request (a redirect is one
 * line a hop):
 *   METHOD STATUS MIME TIME URL[ (NOTE)]
 * STATUS is the HTTP status, "blocked" for a request the policy refused
 * (the guard fails it with BlockedByClient), "failed" for another error
 * (NOTE: the browser's net::ERR_... text), "-" while no response came;
 * MIME is the response's type or "-"; TIME is "N ms" from the request to
 * its end, or "pending" while it is in flight. A request still in flight
 * at a read is listed, kept, and listed again by the next read with its
 * outcome.
 *
 * Every string comes from a hostile page and is bounded: a message is cut
 * at DG_PAGELOG_TEXT_MAX bytes, a URL at DG_PAGELOG_URL_MAX, each at a
 * UTF-8 character boundary, with the marker "…[cut: N bytes in all]"; a
 * tab keeps at most DG_PAGELOG_ENTRIES_MAX console entries and as many
 * network entries (the oldest dropped first), all tabs together at most
 * DG_PAGELOG_BYTES_MAX bytes (the oldest entry of the fullest log
 * dropped first); an answer says how many were dropped since the last
 * read. At most DG_PAGELOG_TABS_MAX tabs and DG_PAGELOG_SESSIONS_MAX
 * sessions are tracked; past them a new one is not watched (counted).
 * Malformed events are counted and skipped; nothing here fails the worker.
 *
 * The browser keeps every object a console call passes alive for a
 * session with Runtime enabled, until that session releases them: the log
 * keeps only text, and releases them as they come (one
 * Runtime.releaseObjectGroup in flight a session).
 *
 * A read empties what it answered: the next read answers what came since.
 * An answer holds at most DG_PAGELOG_ANSWER_MAX bytes; entries past it
 * stay for the next read, and the answer says how many. A closed tab's
 * entries go with it (Target.targetDestroyed).
 *
 * Used only by the worker's single thread.
 */
#ifndef DG_WORKER_PAGELOG_PRIV_H
#define DG_WORKER_PAGELOG_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define DG_PAGELOG_TABS_MAX 64              /* tabs with a log (DG_CDP_TARGETS_MAX) */
#define DG_PAGELOG_SESSIONS_MAX 256         /* sessions known (DG_GUARD_TARGETS_MAX) */
#define DG_PAGELOG_ENTRIES_MAX 500          /* console entries a tab keeps; network too */
#define DG_PAGELOG_TEXT_MAX 2000            /* bytes of a console message shown */
#define DG_PAGELOG_URL_MAX 2000             /* bytes of a URL shown */
#define DG_PAGELOG_WORD_MAX 64              /* bytes of a level, method, MIME type, error */
#define DG_PAGELOG_BYTES_MAX (4u * 1024 * 1024) /* entries of all tabs together */
#define DG_PAGELOG_ANSWER_MAX 100000        /* bytes of one answer */

enum dg_pagelog_kind {
	DG_PAGELOG_CONSOLE, /* read_console */
	DG_PAGELOG_NETWORK, /* read_network */
};

struct dg_pagelog_stats {
	uint64_t entries;          /* entries recorded */
	uint64_t dropped;          /* ... dropped unread (a log full) */
	uint64_t refused;          /* malformed events skipped */
	uint64_t tabs_refused;     /* pages not watched: DG_PAGELOG_TABS_MAX tabs already */
	uint64_t sessions_refused; /* sessions not known: DG_PAGELOG_SESSIONS_MAX already */
	size_t bytes;              /* bytes held now (counted against DG_PAGELOG_BYTES_MAX) */
	int tabs, sessions, watched;
};

struct dg_pagelog;

/* cdp: the DevTools client the log releases the console's objects with
 * (see pagelog.c, "the console's objects"; NULL: never). NULL when out of
 * memory. */
struct dg_cdp;
struct dg_pagelog *dg_pagelog_new(struct dg_cdp *cdp);
void dg_pagelog_free(struct dg_pagelog *l);

/* Sends one setup command on the session being attached (the guard's
 * setup: the target resumes once every one is answered). params (NULL:
 * none) is stolen. */
typedef void (*dg_pagelog_send_fn)(void *arg, const char *method, json_t *params);

/* The guard attached session (to target_id, of type as in targetInfo)
 * from parent (the session the Target.attachedToTarget event came on;
 * NULL: the browser's), and has not resumed it. When the session is to be
 * watched, send is called (within this call) with the commands that turn
 * its logs on. */
void dg_pagelog_attached(struct dg_pagelog *l, const char *parent, const char *session,
			 const char *target_id, const char *type, dg_pagelog_send_fn send,
			 void *arg);

/* Every DevTools event (the worker's event callback): the log events of
 * watched sessions are recorded; Target.detachedFromTarget forgets a
 * session, Target.targetDestroyed drops a tab with its entries. params is
 * an object. */
void dg_pagelog_event(struct dg_pagelog *l, const char *method, const char *session,
		      json_t *params);

/* The answer of read_console (kind DG_PAGELOG_CONSOLE) or read_network
 * for tab (a page's targetId): its entries since the last read, oldest
 * first, one a line (formats above), with a line before them when entries
 * were dropped and one after them when the answer is full; "no console
 * output since the last read" or "no network requests since the last
 * read" when there is none. What is answered is removed (in-flight
 * requests stay). *text is malloc'd UTF-8. Returns 0, or -EINVAL (no tab
 * given), -ENOMEM, with err. */
int dg_pagelog_read(struct dg_pagelog *l, const char *tab, enum dg_pagelog_kind kind,
		    char **text, struct dg_err *err);

void dg_pagelog_stats(const struct dg_pagelog *l, struct dg_pagelog_stats *s);

#endif
