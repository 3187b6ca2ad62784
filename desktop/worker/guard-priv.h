/* guard: the browser layer of the policy, inside the worker.
 *
 * Every request of the browser is held: the guard enables the Fetch domain
 * at the browser target (no session) for every URL at the request stage,
 * which holds the requests of every target, pages, popups, iframes,
 * dedicated, shared and service workers, and also of a tab the browser
 * opens itself with its URL already loading (omnibox alt+Enter or
 * shift+Enter, session restore), whose first request leaves before its
 * target is announced (measured with Chromium 156: a session-level
 * Fetch.enable came too late for it). The worker says READY only once the
 * browser acknowledged it.
 *
 * Every target is also attached to before it runs: auto-attach with
 * waitForDebuggerOnStart (flattened) at the browser and again in every
 * attached session; only once the browser acknowledged that auto-attach
 * (the required setup) does the guard let the target run
 * (Runtime.runIfWaitingForDebugger). Pages also get Page.enable and file
 * chooser interception, sent before the target runs (so in effect from its
 * start: a session's commands are handled in order) but not awaited: a tab
 * the browser opens itself for a noopener link (target=_blank) answers them
 * only once it runs, and waiting for them left such a tab blank for ever.
 * A target the guard cannot track (table full, a required setup command
 * failed) is never resumed: it stays frozen.
 *
 * Each paused request goes to the owner as a DG_MSG_REQUEST; the owner
 * decides it with the session's policy and answers with a DG_MSG_VERDICT;
 * the guard then continues the request or fails it with BlockedByClient.
 * Redirects pause again as new requests, so each hop is decided. Downloads
 * are denied at the browser (Browser.setDownloadBehavior) and reported.
 * WebSocket handshakes pass through neither Fetch nor Network.setBlockedURLs
 * (measured with Chromium 156, in pages, iframes and every kind of worker):
 * Chromium sends them to the egress proxy's SOCKS5 front, which decides
 * their URL with the same "urls" rules (desktop/egress/egress-priv.h, "SOCKS5").
 *
 * Everything here is driven by hostile DevTools messages: each string is
 * bounded and checked before it is kept or forwarded; a request whose URL is
 * too long or not text is failed at once without asking (and reported).
 *
 * Used only by the worker's single thread.
 */
#ifndef DG_GUARD_PRIV_H
#define DG_GUARD_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "desktop/worker/cdp-priv.h"

#define DG_GUARD_TARGETS_MAX 256  /* attached sessions tracked at once */
#define DG_GUARD_PAUSED_MAX 1024  /* requests awaiting the owner's verdict */
#define DG_GUARD_URL_MAX 8192     /* bytes of a request URL forwarded (DG_URL_MAX) */
#define DG_GUARD_TYPE_MAX 32      /* bytes of a target or resource type kept */
#define DG_GUARD_METHOD_MAX 16    /* bytes of an HTTP method kept */

struct dg_guard_stats {
	uint64_t targets;         /* sessions attached and set up */
	uint64_t targets_frozen;  /* attached but never resumed (full, or setup failed) */
	uint64_t requests;        /* requests paused */
	uint64_t allowed, blocked;
	uint64_t refused_locally; /* failed without asking: bad URL */
	uint64_t downloads;       /* downloads the browser was told to deny */
	uint64_t file_choosers;   /* file choosers intercepted */
	uint64_t stale_verdicts;  /* verdicts for requests no longer paused */
};

struct dg_guard;

/* emit: sends one message (type DG_MSG_REQUEST or DG_MSG_EVENT, JSON text)
 * to the owner; returns 0 or a negative errno. */
typedef int (*dg_guard_emit_fn)(void *arg, uint32_t type, const char *json);

/* The guard sends its commands through c (which it does not own). */
struct dg_guard *dg_guard_new(struct dg_cdp *c, dg_guard_emit_fn emit, void *arg);
void dg_guard_free(struct dg_guard *g);

/* Page logs (pagelog-priv.h): every target attached from now on is
 * offered to log (dg_pagelog_attached), and the commands that turn its
 * logs on are part of its setup. log is not owned; NULL: none. */
struct dg_pagelog;
void dg_guard_set_pagelog(struct dg_guard *g, struct dg_pagelog *log);

/* Turns on auto-attach at the browser and denies downloads. Call once the
 * client is started, before the first navigation. */
int dg_guard_start(struct dg_guard *g, struct dg_err *err);

/* Every DevTools event goes here (the client's event callback). */
void dg_guard_event(struct dg_guard *g, const char *method, const char *session, json_t *params);

/* The owner's DG_MSG_VERDICT: {"req":N,"allow":BOOL}. Returns 0, or -EPROTO
 * for a malformed message (the owner broke the protocol). */
int dg_guard_verdict(struct dg_guard *g, const char *json, size_t len, struct dg_err *err);

/* Which tab is in front. Chromium (156) announces no tab activation, so the
 * guard asks every page (its own session on it) for
 * document.visibilityState and document.hasFocus(), read in an isolated
 * world (Page.createIsolatedWorld) that page scripts cannot reach, so a
 * hostile page cannot pass for the tab in front. done gets, once every
 * page answered or failed, the targetId of the visible page that has
 * focus, or of the only visible page, or NULL when that says nothing (no
 * page visible; several, none focused). done runs from the DevTools
 * handlers, or within this call when there is no page to ask. One probe at
 * a time: -EBUSY while one is in flight. */
typedef void (*dg_guard_tabs_fn)(void *arg, const char *front_target_id);
int dg_guard_probe_tabs(struct dg_guard *g, dg_guard_tabs_fn done, void *arg, struct dg_err *err);
/* Page targets attached and not frozen. */
int dg_guard_n_pages(const struct dg_guard *g);

/* Whether the browser refused a browser-level setup command (Fetch.enable):
 * then nothing would be held, and the owner must not go on. */
bool dg_guard_failed(const struct dg_guard *g);

/* Setup commands not answered yet, the browser's and every attached
 * target's (tests, readiness). */
int dg_guard_pending_setups(const struct dg_guard *g);
int dg_guard_n_paused(const struct dg_guard *g);
void dg_guard_stats(const struct dg_guard *g, struct dg_guard_stats *s);

#endif
