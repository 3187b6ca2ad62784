/* The worker process (see worker.h for its limits, desktop/proto/proto.h for its descriptors and messages).
 *
 * Life: connect libvncclient to the RFB socket it inherited, wait for a
 * first full frame, confine itself (seccomp: no filesystem, no new sockets,
 * no processes), say READY, then run actions one at a time. Every action
 * ends with a RESULT message and, for those that show the screen, a FRAME
 * (PNG). A malformed message from the owner, or the desktop going away, ends
 * the worker; the owner sees the channel close.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <rfb/rfbclient.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "actions/actions.h"
#include "desktop/proto/proto.h"
#include "desktop/worker/ack-priv.h"
#include "desktop/worker/gate-priv.h"
#include "desktop/worker/cdp-classify-priv.h"
#include "desktop/worker/cdp-fw-priv.h"
#include "desktop/worker/cdp-priv.h"
#include "desktop/worker/frame-priv.h"
#include "desktop/worker/guard-priv.h"
#include "desktop/worker/input-priv.h"
#include "desktop/worker/pagelog-priv.h"
#include "desktop/worker/script-priv.h"
#include "desktop/worker/tree-priv.h"
#include "desktop/worker/view-priv.h"
#include "desktop/worker/worker.h"

enum phase {
	PHASE_IDLE,
	PHASE_HOLD,     /* hold_key: keys down until hold_until */
	PHASE_WAIT,     /* wait: until hold_until */
	PHASE_BROWSER,  /* navigate/back/forward/reload: DevTools command pending */
	PHASE_LOAD,     /* the browser took the navigation: until its page loaded */
	PHASE_SETTLE,   /* waiting for the screen to settle */
	PHASE_PRECHECK, /* before input: asking the pages which tab is in front */
	PHASE_PRESWITCH, /* before input: the current page moves to the tab in front */
	PHASE_PREGATE,  /* before pointer input: until the page's gate is set up (gate.c) */
	PHASE_TABS,     /* settled: asking the pages which tab is in front */
	PHASE_SWITCH,   /* settled: the current page moves to the tab in front */
	PHASE_REFRESH,  /* settled: asking the browser for the page's URL and title */
	PHASE_BARRIER,  /* browser, after keys or a load: until the page has drawn frames since */
	PHASE_TYPE,     /* type: until the page (ack.c), or without a browser X, has every key */
	PHASE_READ,     /* read_page, get_page_text, find: until the page's reader answers (tree.c) */
	PHASE_TAB,      /* new_tab, switch_tab, a resolve's tab: until that tab is the current page */
	PHASE_TABNEW,   /* new_tab, close_tab of the last tab: Target.createTarget pending */
	PHASE_TABCLOSE, /* close_tab: until the tab is gone and a page is current */
	PHASE_CALL,     /* form_input, scroll_to, file_upload, a resolve: page.js answering (tree.c) */
	PHASE_UPLOAD,   /* file_upload: DOM.setFileInputFiles pending */
	PHASE_SCRIPT,   /* javascript: until the page's script answers (script.c) */
};

struct worker {
	rfbClient *vnc;
	struct dg_view *view;    /* the live view for people (view.c) */
	int ctl;
	struct dg_ipc_reader rd;
	struct dg_cdp *cdp;
	struct dg_guard *guard;  /* browser: the policy's browser layer */
	struct dg_cdpfw *fw;     /* the CDP endpoint's firewall (without a browser: refuses) */
	struct dg_ack ack;       /* browser: typing the page acknowledges */
	struct dg_gate gate;     /* browser: pointer input the page acknowledges */
	struct dg_tree tree;     /* browser: reading the page */
	struct dg_pagelog *log;  /* browser: each tab's console and network (pagelog.c) */
	struct dg_script script; /* browser: the javascript action (script.c) */
	uint64_t cdp_changes;    /* dg_cdp_changes last reported to the owner */
	bool probing;            /* a tab probe (dg_guard_probe_tabs) is in flight */
	bool probe_again;        /* ... and its answer is older than what follows it */
	long long next_probe;    /* ms: the next idle tab probe, with more than one page */
	bool await_paint;        /* settling after a page load: see advance() */
	/* Settling after pointer input in the browser also waits (bounded) for
	 * the page to have drawn two frames since: see frames_start. */
	bool frames_pending;
	long long frames_deadline;
	uint64_t frames_gen;
	long long gated_at;      /* ms the gate said the page has the input's frame; 0: not gated */
	bool gate_first;         /* ... for the document's first pointer input or press (dg_gate_first) */
	bool gate_changed;       /* ... and that the page changed something shown (its frame is due) */
	int change_wait_ms;      /* ... awaited this long at most (dg_gate_change_wait_ms) */
	int paint_lag_ms;        /* the recent peak of such frames' delays after the answer */
	const char *settled_by;  /* how this action's settling ended (the result's "settled") */
	bool pointer_only;       /* settling a move that X programs do not see: run_action() */
	bool pointer_drawn;      /* ... and the pointer's redraw at its new place has come */
	/* Pointer input in settling: where the pointer was before it (Xvnc
	 * draws the pointer into the framebuffer: moving it changes the screen
	 * around both places), and when the screen last changed elsewhere (0:
	 * not since the input). Read only while gated_at is set. */
	int px_before, py_before;
	long long painted_at;
	int quiet_ms;            /* the quiet period this settling waits for */
	enum dg_profile profile;
	int width, height;
	/* framebuffer bookkeeping */
	uint64_t area;           /* pixels received since connecting */
	long long last_update;   /* ms of the last framebuffer rectangle */
	/* last_update when the screen was last known settled (an action settled
	 * by its rule, not its bound; READY after its quiet), -1 if never: a
	 * screenshot of a screen unchanged since is answered without waiting
	 * for a quiet period again (the start's is shorter than a screenshot's,
	 * DG_WORKER_XTERM_SHOWN_QUIET_MS). */
	long long settled_update;
	unsigned syncs_out;      /* sync_rfb's 1x1 requests not answered yet */
	uint32_t sync_pixel;     /* ... and the pixel at 0, 0 when the last was sent */
	struct dg_input in;      /* the input sent to Xvnc (input.c) */
	/* the action in progress */
	enum phase phase;
	struct dg_action act;
	long long id;
	long long t_start, t_injected, hold_until, settle_from, nav_deadline;
	int out_w, out_h;        /* screenshot size the owner asked for */
	bool want_frame;
	char *error;             /* set when the action failed (malloc'd) */
	char *text;              /* what a reading action read (malloc'd), or NULL */
	char *page_url;          /* the page the owner decided the action at, or NULL */
	/* A resolve (the owner asks where an element is, or for the viewport,
	 * before it decides an action on it): see on_resolve. */
	bool resolving;
	int rs_ref;
	bool rs_scroll, rs_hit;
	json_t *resolved;        /* page.js's answer */
	int view_win[4];         /* the browser window's bounds, probed (probe_view) */
	char tab_want[DG_CDP_ID_MAX + 1]; /* PHASE_TAB: the tab to become current;
					     PHASE_TABCLOSE: the tab closing */
	bool tab_created;        /* PHASE_TAB: tab_want was just created (not tracked yet) */
	/* the last PNG, reused while the screen is unchanged */
	struct dg_png png;
	uint64_t png_hash;
	int png_key[6];
	bool png_valid;
	uint64_t png_area;       /* w->area when png was encoded */
	long long idle_png_ms;   /* when idle_png last encoded */
	/* the screen as CDP clients left it (cdp_frame) */
	uint64_t cdp_frame_area; /* w->area when the last one was sent */
	long long cdp_frame_ms;
};

static struct worker *W; /* libvncclient callbacks carry no user pointer we need */

/* A page's promise of its next two animation frames: input reaching the
 * page is handled before a frame's callbacks, so once it resolves the
 * page has run the handlers of what was sent before (barrier,
 * frames_start). */
#define TWO_FRAMES "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))"

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
	char line[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* The owner reads stderr as the desktop's log; the event says why. */
	if (W && W->ctl >= 0) {
		json_t *ev = json_pack("{s:s, s:s}", "event", "error", "message", line);
		char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
		if (s)
			dg_ipc_send(W->ctl, DG_MSG_EVENT, s, strlen(s));
		free(s);
		json_decref(ev);
	}
	dprintf(2, "deskgate worker: %s\n", line);
	/* _exit: LeakSanitizer cannot run under the worker's seccomp filter. */
	_exit(1);
}

/* libvncclient logs through process-wide hooks; keep errors, drop chatter. */
static void vnc_log(const char *fmt, ...)
{
	(void)fmt;
}

static void vnc_err(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	dprintf(2, "deskgate worker: rfb: %s", line);
}

/* Whether a changed rectangle is only the pointer Xvnc draws at px, py
 * (its image, up to DG_WORKER_POINTER_BOX pixels square, around the hot
 * spot). */
static bool pointer_rect(int px, int py, int x, int y, int w, int h)
{
	int b = DG_WORKER_POINTER_BOX;
	return x >= px - b && y >= py - b && x + w <= px + b && y + h <= py + b;
}

static void on_update(rfbClient *c, int x, int y, int w, int h)
{
	(void)c;
	/* sync_rfb's answer: the pixel at 0, 0 sent again, a change on the
	 * screen only if it differs (counted as one, it would restart every
	 * quiet period after a sync). */
	if (x == 0 && y == 0 && w == 1 && h == 1 && W->syncs_out > 0) {
		W->syncs_out--;
		if (memcmp(W->vnc->frameBuffer, &W->sync_pixel, sizeof(W->sync_pixel)) == 0)
			return;
	}
	if (w > 0 && h > 0)
		W->area += (uint64_t)w * (uint64_t)h;
	dg_view_damage(W->view, x, y, w, h);
	W->last_update = dg_now_ms();
#ifdef DG_WORKER_TRACE_SETTLE
	if (W->phase == PHASE_SETTLE)
		fprintf(stderr, "settle: update %d,%d %dx%d %lld ms after the input\n", x, y, w, h,
			W->last_update - W->t_injected);
#endif
	if (W->pointer_only && pointer_rect(W->in.px, W->in.py, x, y, w, h))
		W->pointer_drawn = true;
	if (W->phase == PHASE_SETTLE && !pointer_rect(W->px_before, W->py_before, x, y, w, h) &&
	    !pointer_rect(W->in.px, W->in.py, x, y, w, h)) {
		if (W->gated_at && W->gate_changed && !W->painted_at)
			W->paint_lag_ms = dg_gate_lag_fold(W->paint_lag_ms,
							   W->last_update - W->gated_at);
		W->painted_at = W->last_update;
	}
}

/* ---- RFB input ---------------------------------------------------------- */

static void pump_rfb(struct worker *w);

/* dg_input's sync: Xvnc handles a client's messages in order, so the
 * answer to a full 1x1 update request sent now (a rectangle of exactly the
 * pixel at 0, 0: on_update() tells it from the screen's changes) proves
 * that everything sent before it was processed. */
static void sync_rfb(void *arg)
{
	struct worker *w = arg;
	unsigned before = w->syncs_out++;
	memcpy(&w->sync_pixel, w->vnc->frameBuffer, sizeof(w->sync_pixel)); /* 32 bits a pixel */
	if (!SendFramebufferUpdateRequest(w->vnc, 0, 0, 1, 1, FALSE))
		die("the desktop is gone");
	long long deadline = dg_now_ms() + DG_WORKER_SYNC_MAX_MS;
	while (w->syncs_out > before && dg_now_ms() < deadline) {
		if (w->vnc->buffered == 0) {
			struct pollfd p = {w->vnc->sock, POLLIN, 0};
			if (poll(&p, 1, (int)(deadline - dg_now_ms())) <= 0)
				continue;
		}
		pump_rfb(w);
	}
}

/* Types keysyms (a type action's text, or a chunk of it: see ack.c). */
static void type_keys(void *arg, const uint32_t *ks, size_t n)
{
	struct worker *w = arg;
	if (dg_input_type_keys(&w->in, ks, n) == -EPIPE)
		die("sending an input event failed: the desktop is gone");
}

/* ---- results ------------------------------------------------------------ */

static void set_error(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct worker *w, const char *fmt, ...)
{
	if (w->error)
		return;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&w->error, fmt, ap) < 0)
		w->error = NULL;
	va_end(ap);
}

static void send_json(struct worker *w, uint32_t type, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (!s)
		die("out of memory encoding a message");
	int r = dg_ipc_send(w->ctl, type, s, strlen(s));
	free(s);
	if (r)
		die("the owner went away (%s)", strerror(-r));
}

static void add_page(struct worker *w, json_t *res)
{
	if (!w->cdp)
		return;
	json_object_set_new(res, "url", json_string(dg_cdp_url(w->cdp)));
	json_object_set_new(res, "title", json_string(dg_cdp_title(w->cdp)));
	/* Every open tab, oldest first; URLs and titles within a budget, so
	 * that the result stays far below the channel's cap whatever the
	 * pages are (past it a tab keeps its id and says "elided"). */
	struct dg_cdp_tab tabs[DG_CDP_TARGETS_MAX];
	int n = dg_cdp_tabs(w->cdp, tabs, DG_CDP_TARGETS_MAX);
	json_t *arr = json_array();
	size_t budget = DG_WORKER_TABS_TEXT_MAX;
	for (int i = 0; arr && i < n; i++) {
		size_t cost = strlen(tabs[i].url) + strlen(tabs[i].title);
		bool fits = cost <= budget;
		budget -= fits ? cost : 0;
		json_t *t = json_pack("{s:s, s:s, s:s, s:b}", "id", tabs[i].id, "url",
				      fits ? tabs[i].url : "", "title", fits ? tabs[i].title : "",
				      "active", tabs[i].current);
		if (t && !fits)
			json_object_set_new(t, "elided", json_true());
		if (!t || json_array_append_new(arr, t) != 0)
			die("out of memory");
	}
	if (!arr)
		die("out of memory");
	json_object_set_new(res, "tabs", arr);
}

/* Encodes the current screen (or the zoom region) into w->png; returns the
 * encode time in ms.
 *
 * The screen (region NULL) always goes to dg_png_encode: the stripe cache in
 * w->png recompresses only the stripes that changed since the last screen
 * of this size, and an unchanged screen costs one hashing pass and gives
 * the same bytes again, so no whole-frame hash is taken first. A zoom is
 * encoded apart from that cache (and leaves it intact), so it is skipped
 * when the same pixels and region were encoded last time. */
static double encode(struct worker *w, const int region[4], int out_w, int out_h)
{
	double t0 = dg_now_ms_exact();
	struct dg_frame f = {w->vnc->frameBuffer, w->width, w->height, (size_t)w->width * 4};
	uint64_t h = 0;
	/* The screen's key has region -1s, which no zoom's key has. */
	int key[6] = {-1, -1, -1, -1, out_w, out_h};
	if (!region && w->png_valid && w->png_area == w->area &&
	    memcmp(key, w->png_key, sizeof(key)) == 0)
		return 0; /* no rectangle arrived since: the same pixels, the same PNG */
	if (region) {
		h = dg_frame_hash(&f);
		memcpy(key, region, 4 * sizeof(int));
		if (w->png_valid && h == w->png_hash && memcmp(key, w->png_key, sizeof(key)) == 0)
			return 0;
	}
	struct dg_err err = {{0}};
	int r = dg_png_encode(&f, region, out_w, out_h, &w->png, &err);
	if (r) {
		w->png_valid = false;
		set_error(w, "encoding the screenshot failed: %s", err.msg);
		return dg_now_ms_exact() - t0;
	}
	w->png_hash = h;
	memcpy(w->png_key, key, sizeof(key));
	w->png_valid = true;
	w->png_area = w->area;
	return dg_now_ms_exact() - t0;
}

static void finish(struct worker *w)
{
	long long t_end = dg_now_ms();
	double encode_ms = 0;
	bool frame = w->want_frame && !w->error;
	int out_w = w->out_w, out_h = w->out_h;
	if (frame) {
		if (w->act.type == DG_ACTION_ZOOM || w->act.has_region) {
			int region[4] = {w->act.region[0], w->act.region[1],
					 w->act.region[2] - w->act.region[0],
					 w->act.region[3] - w->act.region[1]};
			/* A zoom fills the display; a region screenshot is the
			 * region as it is (a browser's viewport). */
			if (w->act.type == DG_ACTION_ZOOM) {
				dg_frame_fit(region[2], region[3], w->out_w, w->out_h, &out_w, &out_h);
			} else {
				out_w = region[2];
				out_h = region[3];
			}
			encode_ms = encode(w, region, out_w, out_h);
		} else {
			encode_ms = encode(w, NULL, out_w, out_h);
		}
		frame = w->png_valid;
	}
	json_t *res = json_pack("{s:I, s:b, s:s, s:[i,i], s:I, s:f, s:I}", "id", (json_int_t)w->id,
				"ok", w->error == NULL, "action", dg_action_type_name(w->act.type),
				"cursor", w->in.px, w->in.py, "settle_ms",
				(json_int_t)(t_end - w->t_injected), "encode_ms", encode_ms,
				"total_ms", (json_int_t)(t_end - w->t_start));
	if (!res)
		die("out of memory");
	if (w->error)
		json_object_set_new(res, "error", json_string(w->error));
	if (w->settled_by)
		json_object_set_new(res, "settled", json_string(w->settled_by));
	if (frame)
		json_object_set_new(res, "frame",
				    json_pack("{s:i, s:i, s:I}", "width", out_w, "height", out_h,
					      "bytes", (json_int_t)w->png.len));
	/* A frame of part of the screen: it answers the action, but it is not
	 * the session's screen. */
	if (frame && (w->act.type == DG_ACTION_ZOOM || w->act.has_region))
		json_object_set_new(res, "region", json_pack("[iiii]", w->act.region[0],
							   w->act.region[1], w->act.region[2],
							   w->act.region[3]));
	if (w->text && !w->error)
		json_object_set_new(res, "text", json_string(w->text));
	add_page(w, res);
	if (w->cdp)
		w->cdp_changes = dg_cdp_changes(w->cdp);
	send_json(w, DG_MSG_RESULT, res);
	if (frame) {
		int r = dg_ipc_send(w->ctl, DG_MSG_FRAME, w->png.data, w->png.len);
		if (r)
			die("the owner went away (%s)", strerror(-r));
	}
	dg_action_free(&w->act);
	free(w->error);
	w->error = NULL;
	free(w->text);
	w->text = NULL;
	free(w->page_url);
	w->page_url = NULL;
	w->phase = PHASE_IDLE;
	if (w->cdp)
		dg_gate_idle(&w->gate);
}

/* Chromium announces no title set by a page after it loaded, so the
 * browser is asked before the result reports URL and title. */
static void refresh_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct worker *w = arg;
	(void)status, (void)result, (void)error_message;
	if (w->phase == PHASE_REFRESH)
		finish(w);
}

static void refresh(struct worker *w)
{
	struct dg_err err = {{0}};
	if (w->cdp && dg_cdp_ready(w->cdp)) {
		w->phase = PHASE_REFRESH;
		w->nav_deadline = dg_now_ms() + DG_WORKER_REFRESH_MAX_MS;
		if (dg_cdp_refresh(w->cdp, refresh_done, w, &err) == 0)
			return;
	}
	finish(w);
}

/* Moves the current page to the tab in front when it is another one;
 * returns whether a switch started. */
static bool follow_front(struct worker *w, const char *front)
{
	if (!front || strcmp(front, dg_cdp_target_id(w->cdp)) == 0)
		return false;
	struct dg_err err = {{0}};
	if (dg_cdp_switch(w->cdp, front, &err) != 0) {
		dprintf(2, "deskgate worker: following the tab in front: %s\n", err.msg);
		return false;
	}
	return true;
}

static bool probe_tabs(struct worker *w);
static void precheck_done(struct worker *w);

/* A probe's answer. After an action (PHASE_TABS) the page in front is the
 * one the result, and so the next decision, is about; while idle the
 * current page follows it; during an action it waits for the action's own
 * probe. A probe that started before the action's input is asked again. */
static void tabs_done(void *arg, const char *front)
{
	struct worker *w = arg;
	w->probing = false;
	w->next_probe = dg_now_ms() + DG_WORKER_TAB_PROBE_MS;
	if (w->probe_again) {
		w->probe_again = false;
		if (probe_tabs(w))
			return;
	}
	if (w->phase == PHASE_IDLE) {
		follow_front(w, front);
		return;
	}
	if (w->phase == PHASE_PRECHECK) {
		if (follow_front(w, front) && !dg_cdp_ready(w->cdp)) {
			w->phase = PHASE_PRESWITCH;
			w->nav_deadline = dg_now_ms() + DG_WORKER_REFRESH_MAX_MS;
			return;
		}
		precheck_done(w);
		return;
	}
	if (w->phase != PHASE_TABS)
		return;
	if (follow_front(w, front) && !dg_cdp_ready(w->cdp)) {
		w->phase = PHASE_SWITCH;
		w->nav_deadline = dg_now_ms() + DG_WORKER_REFRESH_MAX_MS;
		return;
	}
	refresh(w);
}

/* A tab probe, when there is more than one page (with one, it is in
 * front); false when none started. */
static bool probe_tabs(struct worker *w)
{
	if (!w->guard || w->probing || dg_guard_n_pages(w->guard) < 2)
		return false;
	struct dg_err err = {{0}};
	w->probing = true;
	if (dg_guard_probe_tabs(w->guard, tabs_done, w, &err) != 0) {
		w->probing = false;
		return false;
	}
	return true;
}

static void settled(struct worker *w)
{
#ifdef DG_WORKER_TRACE_SETTLE
	if (w->phase == PHASE_SETTLE)
		fprintf(stderr, "settle: gate %lld painted %lld last %lld now %lld ms after the input\n",
			w->gated_at ? w->gated_at - w->t_injected : -1,
			w->painted_at ? w->painted_at - w->t_injected : -1,
			w->last_update - w->t_injected, dg_now_ms() - w->t_injected);
#endif
	if (w->cdp) {
		w->phase = PHASE_TABS;
		w->nav_deadline = dg_now_ms() + DG_WORKER_REFRESH_MAX_MS;
		if (w->probing) { /* an idle probe, older than the input: ask again */
			w->probe_again = true;
			return;
		}
		if (probe_tabs(w))
			return;
	}
	refresh(w);
}

/* The page's answer to frames_start, or its failure: either way settling
 * stops waiting for it (the deadline bounds a page that never answers). */
static void frames_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)status, (void)result, (void)error_message;
	struct worker *w = W;
	uint64_t *gen = arg;
	if (w && *gen == w->frames_gen)
		w->frames_pending = false;
	free(gen);
}

/* Pointer input in the browser: its events are dispatched before the
 * page's next animation frames, so once the page drew two frames since,
 * it has run its handlers (a click's new title, a hover's style); a quiet
 * screen alone could come first (the tab's title set by a click's handler
 * was read one action late). Asked while the screen settles, not before
 * (the two waits overlap: a click's answer took 67 ms instead of 39 when
 * they ran one after the other). */
static void frames_start(struct worker *w)
{
	const char *sid = dg_cdp_ready(w->cdp) ? dg_cdp_session_id(w->cdp) : NULL;
	uint64_t *gen = malloc(sizeof(*gen));
	if (!sid || !sid[0] || !gen) {
		free(gen);
		return;
	}
	*gen = ++w->frames_gen;
	json_t *params = json_pack("{s:s, s:b, s:b}", "expression",
				   TWO_FRAMES,
				   "awaitPromise", 1, "returnByValue", 1);
	/* The input is in the browser's X queue once Xvnc has answered a
	 * request sent after it: only then is the page asked for frames. */
	sync_rfb(w);
	struct dg_err err = {{0}};
	if (dg_cdp_send(w->cdp, "Runtime.evaluate", params, sid, frames_done, gen, &err) != 0) {
		free(gen);
		return;
	}
	w->frames_pending = true;
	w->frames_deadline = dg_now_ms() + DG_WORKER_BARRIER_MAX_MS;
}

static void settle(struct worker *w)
{
	w->frames_pending = false;
	w->gated_at = 0;
	w->gate_changed = false;
	w->painted_at = 0;
	w->pointer_only = false;
	w->pointer_drawn = false;
	w->t_injected = dg_now_ms();
	w->settle_from = w->t_injected;
	w->phase = PHASE_SETTLE;
	w->await_paint = false;
	w->quiet_ms = DG_SETTLE_QUIET_MS;
}

/* The gate's answer (gate.c) for the pointer input in settling: with the
 * input's frame committed, settling needs only DG_GATE_QUIET_MS more, or
 * the frame's arrival when the page changed something shown (see
 * advance()); unsure, it settles as before: the page's two frames, then
 * the full quiet period. */
static void gated(void *arg, enum dg_gate_answer answer)
{
	struct worker *w = arg;
	if (w->phase != PHASE_SETTLE || !w->frames_pending)
		return;
	w->frames_pending = false;
#ifdef DG_WORKER_TRACE_SETTLE
	fprintf(stderr, "settle: the gate said %s %lld ms after the input\n",
		answer == DG_GATE_STILL ? "still" : answer == DG_GATE_CHANGED ? "changed" : "unsure",
		dg_now_ms() - w->t_injected);
#endif
	if (answer == DG_GATE_UNSURE) {
		frames_start(w);
		return;
	}
	w->gated_at = dg_now_ms();
	w->gate_changed = answer == DG_GATE_CHANGED;
	w->change_wait_ms = dg_gate_change_wait_ms(w->gated_at - w->t_injected, w->paint_lag_ms);
}

/* Keyboard input in the browser: keys travel X -> browser process ->
 * renderer, and the renderer may paint them in several frames, with gaps
 * longer than the quiet period under load (a screenshot after typing "desk
 * lamp" once showed "d"). So after a type or key action the worker asks the
 * page to wait two animation frames (input is handled before a frame's
 * callbacks), and settles only then; bounded by DG_WORKER_BARRIER_MAX_MS. */
static void barrier_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct worker *w = arg;
	(void)status, (void)result, (void)error_message;
	if (w->phase == PHASE_BARRIER) {
		long long t = w->t_injected;
		bool paint = w->await_paint;
		settle(w);
		w->t_injected = t; /* the settle bound still counts from the input */
		w->quiet_ms = DG_WORKER_KEYS_QUIET_MS;
		w->await_paint = paint;
	}
}

/* paint: after a load, settling then waits for the page's paint (advance()). */
static void barrier(struct worker *w, bool paint)
{
	const char *sid = w->cdp && dg_cdp_ready(w->cdp) ? dg_cdp_session_id(w->cdp) : NULL;
	if (!sid || !sid[0]) {
		settle(w);
		w->await_paint = paint;
		return;
	}
	json_t *params = json_pack("{s:s, s:b, s:b}", "expression",
				   TWO_FRAMES,
				   "awaitPromise", 1, "returnByValue", 1);
	/* The keys are in the browser's X queue once Xvnc has answered a
	 * request sent after them: only then is the page asked for frames. */
	sync_rfb(w);
	w->phase = PHASE_BARRIER;
	w->await_paint = paint;
	w->t_injected = dg_now_ms();
	w->nav_deadline = w->t_injected + DG_WORKER_BARRIER_MAX_MS;
	struct dg_err err = {{0}};
	if (dg_cdp_send(w->cdp, "Runtime.evaluate", params, sid, barrier_done, w, &err) != 0)
		settle(w);
}

/* The page has received every key typed (or typing ended at its bound);
 * without a browser, the X server has them once it answers a sync. */
static void typed(void *arg, const char *error)
{
	struct worker *w = arg;
	if (error)
		set_error(w, "%s", error);
	if (w->phase == PHASE_TYPE && !w->cdp)
		sync_rfb(w);
	if (w->phase == PHASE_TYPE)
		w->cdp ? barrier(w, false) : settle(w);
}

/* ---- browser actions ---------------------------------------------------- */

/* read_page, get_page_text: the page's reader answered (or its bound
 * passed); the answer carries no screenshot. */
static void read_done(void *arg, const char *text, const char *error)
{
	struct worker *w = arg;
	if (error)
		set_error(w, "%s", error);
	else if (!(w->text = strdup(text)))
		die("out of memory");
	if (w->phase == PHASE_READ) {
		w->t_injected = dg_now_ms();
		finish(w);
	}
}

static void browser_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct worker *w = arg;
	(void)result;
	if (status != 0)
		set_error(w, "%s", error_message ? error_message : "browser command failed");
	if (w->phase != PHASE_BROWSER)
		return;
	if (status != 0)
		settle(w);
	else
		w->phase = PHASE_LOAD;
}

static void browser_action(struct worker *w)
{
	if (!w->cdp) {
		set_error(w, "%s needs the browser profile", dg_action_type_name(w->act.type));
		finish(w);
		return;
	}
	int r;
	struct dg_err err = {{0}};
	/* Set first: the callback may run before the command returns. */
	w->phase = PHASE_BROWSER;
	w->nav_deadline = dg_now_ms() + DG_WORKER_NAV_MAX_MS;
	w->t_injected = dg_now_ms();
	switch (w->act.type) {
	case DG_ACTION_NAVIGATE:
		r = dg_cdp_navigate(w->cdp, w->act.url, browser_done, w, &err);
		break;
	case DG_ACTION_BACK:
		r = dg_cdp_back(w->cdp, browser_done, w, &err);
		break;
	case DG_ACTION_FORWARD:
		r = dg_cdp_forward(w->cdp, browser_done, w, &err);
		break;
	default:
		r = dg_cdp_reload(w->cdp, browser_done, w, &err);
		break;
	}
	if (r) {
		w->phase = PHASE_IDLE;
		set_error(w, "browser command failed: %s", err.msg);
		finish(w);
	}
}

/* ---- tabs and elements (the browser toolset's members) ------------------ */

/* A step of an action ended: with an error the action ends now (its result
 * says why); otherwise the screen settles, then the result. */
static void finish_or_settle(struct worker *w)
{
	if (w->error) {
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	settle(w);
}

static void finish_resolve(struct worker *w);
static void resolve_locate(struct worker *w);

/* The open tabs as text, one a line, oldest first: what list_tabs
 * answers (the result's "tabs" lists them too, as data). */
static char *tabs_text(struct worker *w)
{
	struct dg_cdp_tab tabs[DG_CDP_TARGETS_MAX];
	int n = dg_cdp_tabs(w->cdp, tabs, DG_CDP_TARGETS_MAX);
	size_t budget = DG_WORKER_TABS_TEXT_MAX;
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		die("out of memory");
	if (n == 0)
		fputs("[no tab is open]", f);
	for (int i = 0; i < n; i++) {
		json_t *u = json_string(tabs[i].url), *t = json_string(tabs[i].title);
		char *us = u ? json_dumps(u, JSON_ENCODE_ANY) : NULL;
		char *ts = t ? json_dumps(t, JSON_ENCODE_ANY) : NULL;
		size_t cost = (us ? strlen(us) : 0) + (ts ? strlen(ts) : 0);
		bool fits = us && ts && cost <= budget;
		budget -= fits ? cost : 0;
		fprintf(f, "%s- tab %s%s", i ? "\n" : "", tabs[i].id, tabs[i].current ? " (active)" : "");
		if (fits)
			fprintf(f, " title=%s url=%s", ts, us);
		else
			fputs(" [title and url elided: the list is long]", f);
		free(us);
		free(ts);
		json_decref(u);
		json_decref(t);
	}
	if (fclose(f) != 0 || !out)
		die("out of memory");
	return out;
}

/* Whether tab is open (tracked by the DevTools client). */
static bool tab_open(struct worker *w, const char *tab)
{
	struct dg_cdp_tab tabs[DG_CDP_TARGETS_MAX];
	int n = dg_cdp_tabs(w->cdp, tabs, DG_CDP_TARGETS_MAX);
	for (int i = 0; i < n; i++)
		if (strcmp(tabs[i].id, tab) == 0)
			return true;
	return false;
}

/* The error for a tab that is not open: -ENOENT, err naming the tabs. */
static int no_tab(struct worker *w, const char *tab, struct dg_err *err)
{
	struct dg_cdp_tab tabs[DG_CDP_TARGETS_MAX];
	int n = dg_cdp_tabs(w->cdp, tabs, DG_CDP_TARGETS_MAX);
	return dg_err_set(err, -ENOENT, "no tab %.64s is open (%d tab%s open%s%.64s%s)", tab, n,
			  n == 1 ? " is" : "s are", n ? "; the active one is " : "",
			  n ? dg_cdp_target_id(w->cdp) : "", n > 1 ? ": list_tabs lists them" : "");
}

/* Brings tab to the front (as a click on it in the tab strip would:
 * Target.activateTarget) and makes it the current page; PHASE_TAB until it
 * is (tab_arrived). created: the tab was just opened and may not be
 * tracked yet. Returns 0 (PHASE_TAB), 1 when it is current already, or
 * -ENOENT (no such tab: err says which are open). */
static int start_tab(struct worker *w, const char *tab, bool created, struct dg_err *err)
{
	if (!created && !tab_open(w, tab))
		return no_tab(w, tab, err);
	if (strcmp(tab, dg_cdp_target_id(w->cdp)) == 0 && dg_cdp_ready(w->cdp))
		return 1;
	json_t *p = json_pack("{s:s}", "targetId", tab);
	struct dg_err e = {{0}};
	if (!p || dg_cdp_send(w->cdp, "Target.activateTarget", p, NULL, NULL, NULL, &e) != 0)
		return dg_err_set(err, -EIO, "bringing tab %.64s to the front failed: %s", tab, e.msg);
	snprintf(w->tab_want, sizeof(w->tab_want), "%s", tab);
	w->tab_created = created;
	if (dg_cdp_switch(w->cdp, tab, &e) != 0 && !created)
		return dg_err_set(err, -ENOENT, "tab %.64s: %s", tab, e.msg);
	w->phase = PHASE_TAB;
	w->nav_deadline = dg_now_ms() + DG_WORKER_TAB_MAX_MS;
	return 0;
}

/* The tab a tab action or a resolve waited for is current (or the bound
 * passed: w->error says so). */
static void tab_arrived(struct worker *w)
{
	if (w->resolving) {
		if (w->error)
			finish_resolve(w);
		else
			resolve_locate(w);
		return;
	}
	finish_or_settle(w);
}

/* close_tab: Target.closeTarget of the action's tab, then PHASE_TABCLOSE
 * until it is gone. */
static void close_target(struct worker *w)
{
	json_t *p = json_pack("{s:s}", "targetId", w->act.tab);
	struct dg_err e = {{0}};
	if (!p || dg_cdp_send(w->cdp, "Target.closeTarget", p, NULL, NULL, NULL, &e) != 0) {
		set_error(w, "closing tab %.64s failed: %s", w->act.tab, e.msg);
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	snprintf(w->tab_want, sizeof(w->tab_want), "%s", w->act.tab);
	w->phase = PHASE_TABCLOSE;
	w->nav_deadline = dg_now_ms() + DG_WORKER_TAB_MAX_MS;
}

static void new_tab_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct worker *w = arg;
	if (w->phase != PHASE_TABNEW)
		return;
	const char *id = json_string_value(json_object_get(result, "targetId"));
	if (status != 0 || !id || strlen(id) > DG_CDP_ID_MAX) {
		set_error(w, "opening a tab failed: %s", status ? error_message : "no target id");
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	if (w->act.type == DG_ACTION_CLOSE_TAB) {
		/* The last tab closes only once another is open: the browser ends
		 * with its last tab. Now the asked one goes. */
		close_target(w);
		return;
	}
	free(w->text);
	if (asprintf(&w->text, "opened a new tab: %s (now the active tab)", id) < 0)
		die("out of memory");
	struct dg_err err = {{0}};
	int r = start_tab(w, id, true, &err);
	if (r < 0)
		set_error(w, "%s", err.msg);
	if (r != 0)
		tab_arrived(w);
}

/* Target.createTarget about:blank: a new tab in the browser's window, in
 * front. The guard attaches to it (and holds its requests) like any other. */
static void open_blank_tab(struct worker *w)
{
	json_t *p = json_pack("{s:s}", "url", "about:blank");
	struct dg_err e = {{0}};
	w->phase = PHASE_TABNEW;
	w->nav_deadline = dg_now_ms() + DG_WORKER_TAB_MAX_MS;
	if (!p || dg_cdp_send(w->cdp, "Target.createTarget", p, NULL, new_tab_done, w, &e) != 0) {
		w->phase = PHASE_IDLE;
		set_error(w, "opening a tab failed: %s", e.msg);
		w->t_injected = dg_now_ms();
		finish(w);
	}
}

static void close_tab(struct worker *w)
{
	if (!tab_open(w, w->act.tab)) {
		struct dg_err err = {{0}};
		no_tab(w, w->act.tab, &err);
		set_error(w, "%s", err.msg);
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	free(w->text);
	if (asprintf(&w->text, "closed tab %s", w->act.tab) < 0)
		die("out of memory");
	if (dg_cdp_n_targets(w->cdp) <= 1) {
		open_blank_tab(w); /* new_tab_done closes the asked one then */
		return;
	}
	close_target(w);
}

/* switch_tab and new_tab, once the tab is current: settled, then the
 * result (with its frame: the tab's page). */
static void switch_tab(struct worker *w)
{
	struct dg_err err = {{0}};
	int r = start_tab(w, w->act.tab, false, &err);
	if (r < 0)
		set_error(w, "%s", err.msg);
	else if (asprintf(&w->text, "tab %s is the active tab", w->act.tab) < 0)
		die("out of memory");
	if (r != 0)
		tab_arrived(w);
}

/* form_input, scroll_to: page.js answered; the page may repaint. */
static void element_done(void *arg, json_t *value, const char *error)
{
	struct worker *w = arg;
	if (w->phase != PHASE_CALL)
		return;
	if (error) {
		set_error(w, "%s", error);
	} else if (w->act.type == DG_ACTION_SCROLL_TO) {
		json_t *el = json_object_get(value, "element");
		if (asprintf(&w->text, "%s (%s) is in view at (%d, %d)",
			     json_string_value(json_object_get(el, "ref")),
			     json_string_value(json_object_get(el, "role")),
			     (int)json_integer_value(json_array_get(json_object_get(el, "point"), 0)),
			     (int)json_integer_value(json_array_get(json_object_get(el, "point"), 1))) < 0)
			die("out of memory");
	} else {
		const char *t = json_string_value(json_object_get(value, "text"));
		if (!(w->text = strdup(t ? t : "done")))
			die("out of memory");
	}
	finish_or_settle(w);
}

static void upload_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct worker *w = arg;
	(void)result;
	if (w->phase != PHASE_UPLOAD)
		return;
	if (status != 0) {
		set_error(w, "setting the files failed: %s", error_message ? error_message : "?");
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	if (asprintf(&w->text, "ref_%d holds %d file%s", w->act.ref, w->act.n_paths,
		     w->act.n_paths == 1 ? "" : "s") < 0)
		die("out of memory");
	settle(w);
}

/* file_upload: the element's handle (page.js checks it is a file input),
 * then DOM.setFileInputFiles with the paths the owner checked. */
static void file_input_done(void *arg, json_t *value, const char *error)
{
	struct worker *w = arg;
	if (w->phase != PHASE_CALL)
		return;
	const char *oid = json_string_value(json_object_get(value, "objectId"));
	json_t *files = json_array();
	for (int i = 0; files && i < w->act.n_paths; i++)
		if (json_array_append_new(files, json_string(w->act.paths[i])) != 0) {
			json_decref(files);
			files = NULL;
		}
	json_t *p = !error && oid && files ? json_pack("{s:o, s:s}", "files", files, "objectId", oid)
					   : NULL;
	if (!p)
		json_decref(files);
	struct dg_err e = {{0}};
	w->phase = PHASE_UPLOAD;
	if (error || !p || dg_cdp_send(w->cdp, "DOM.setFileInputFiles", p, dg_cdp_session_id(w->cdp),
				      upload_done, w, &e) != 0) {
		w->phase = PHASE_IDLE;
		set_error(w, "%s", error ? error : e.msg[0] ? e.msg : "out of memory");
		w->t_injected = dg_now_ms();
		finish(w);
	}
}

/* The element actions: a page.js call on the current page. */
static void element_action(struct worker *w)
{
	const struct dg_action *a = &w->act;
	struct dg_err err = {{0}};
	json_t *o;
	const char *fn;
	bool by_value = true;
	dg_tree_value_fn done = element_done;
	if (a->type == DG_ACTION_FORM_INPUT) {
		json_t *v = a->value_kind == DG_VALUE_STRING ? json_stringn(a->text, a->text_len)
			    : a->value_kind == DG_VALUE_BOOL ? json_boolean(a->flag)
							      : json_real(a->number);
		o = json_pack("{s:i, s:o, s:i}", "ref", a->ref, "value", v, "nameMax", DG_TREE_NAME_MAX);
		fn = "formInput";
	} else if (a->type == DG_ACTION_FILE_UPLOAD) {
		o = json_pack("{s:i, s:i, s:i}", "ref", a->ref, "count", a->n_paths, "nameMax",
			      DG_TREE_NAME_MAX);
		fn = "fileInput";
		by_value = false;
		done = file_input_done;
	} else {
		o = json_pack("{s:i, s:b, s:b, s:i}", "ref", a->ref, "scroll", 1, "hit", 0, "nameMax",
			      DG_TREE_NAME_MAX);
		fn = "locate";
	}
	w->phase = PHASE_CALL;
	if (o && dg_tree_call(&w->tree, w->cdp, fn, o, by_value, done, w, &err) == 0)
		return;
	w->phase = PHASE_IDLE;
	set_error(w, "%s", o ? err.msg : "out of memory");
	w->t_injected = dg_now_ms();
	finish(w);
}

static void probe_view(struct worker *w);

/* ---- resolving: where an element is, before the owner decides ----------- */

/* The answer to a resolve: {"id", "ok", "resolved": {"viewport",
 * "element"?} | "error", and the page (url, title, tabs)}; no frame. */
static void finish_resolve(struct worker *w)
{
	json_t *res = json_pack("{s:I, s:b}", "id", (json_int_t)w->id, "ok", w->error == NULL);
	if (!res)
		die("out of memory");
	if (w->error) {
		json_object_set_new(res, "error", json_string(w->error));
	} else {
		json_t *r = json_deep_copy(w->resolved);
		json_object_del(r, "ok");
		json_object_set_new(res, "resolved", r ? r : json_object());
	}
	add_page(w, res);
	if (w->cdp)
		w->cdp_changes = dg_cdp_changes(w->cdp);
	send_json(w, DG_MSG_RESULT, res);
	json_decref(w->resolved);
	w->resolved = NULL;
	w->resolving = false;
	free(w->error);
	w->error = NULL;
	w->phase = PHASE_IDLE;
}

static void resolve_done(void *arg, json_t *value, const char *error)
{
	struct worker *w = arg;
	if (w->phase != PHASE_CALL || !w->resolving)
		return;
	if (error)
		set_error(w, "%s", error);
	else
		w->resolved = json_incref(value);
	probe_view(w); /* the tab in front may have changed */
	finish_resolve(w);
}

static void resolve_locate(struct worker *w)
{
	struct dg_err err = {{0}};
	json_t *o = json_pack("{s:i, s:b, s:b, s:i}", "ref", w->rs_ref, "scroll", w->rs_scroll, "hit",
			      w->rs_hit, "nameMax", DG_TREE_NAME_MAX);
	w->phase = PHASE_CALL;
	if (o && dg_tree_call(&w->tree, w->cdp, "locate", o, true, resolve_done, w, &err) == 0)
		return;
	set_error(w, "%s", o ? err.msg : "out of memory");
	finish_resolve(w);
}

/* The owner's resolve: {"id": N, "resolve": {"tab"?: ID, "ref"?: N,
 * "scroll"?: B, "hit"?: B}}: the tab brought to the front when given, then
 * the viewport and, with ref, the element's box and point (page.js
 * locate). Checked like an action message: a malformed one ends the
 * worker. */
static void on_resolve(struct worker *w, json_int_t id, json_t *rs)
{
	json_t *tab = json_object_get(rs, "tab"), *ref = json_object_get(rs, "ref");
	json_t *scroll = json_object_get(rs, "scroll"), *hit = json_object_get(rs, "hit");
	if (!json_is_object(rs) || (tab && (!json_is_string(tab) || json_string_length(tab) == 0 ||
					    json_string_length(tab) > DG_CDP_ID_MAX)) ||
	    (ref && (!json_is_integer(ref) || json_integer_value(ref) < 1 ||
		     json_integer_value(ref) > DG_ACTION_REF_MAX)) ||
	    (scroll && !json_is_boolean(scroll)) || (hit && !json_is_boolean(hit)))
		die("protocol error: bad resolve");
	w->id = (long long)id;
	w->t_start = w->t_injected = dg_now_ms();
	w->resolving = true;
	w->rs_ref = ref ? (int)json_integer_value(ref) : 0;
	w->rs_scroll = json_is_true(scroll);
	w->rs_hit = json_is_true(hit);
	if (!w->cdp) {
		set_error(w, "not performed: this desktop is an xterm, not a browser");
		finish_resolve(w);
		return;
	}
	if (tab) {
		struct dg_err err = {{0}};
		int r = start_tab(w, json_string_value(tab), false, &err);
		if (r < 0) {
			set_error(w, "%s", err.msg);
			finish_resolve(w);
			return;
		}
		if (r == 0)
			return; /* tab_arrived goes on */
	}
	resolve_locate(w);
}

/* ---- page logs and scripts (pagelog.c, script.c) ------------------------- */

/* read_console, read_network: the current tab's log since the last read,
 * answered at once, without a screenshot. */
static void read_log(struct worker *w)
{
	struct dg_err err = {{0}};
	w->t_injected = dg_now_ms();
	enum dg_pagelog_kind kind =
		w->act.type == DG_ACTION_READ_CONSOLE ? DG_PAGELOG_CONSOLE : DG_PAGELOG_NETWORK;
	if (dg_pagelog_read(w->log, dg_cdp_target_id(w->cdp), kind, &w->text, &err) != 0)
		set_error(w, "%s", err.msg);
	finish(w);
}

/* javascript: the script's value or error; then the page's URL and title
 * are asked for (a script may have changed them) before the answer. */
static void script_done(void *arg, const char *text, const char *error)
{
	struct worker *w = arg;
	if (error)
		set_error(w, "%s", error);
	else if (!(w->text = strdup(text)))
		die("out of memory");
	if (w->phase == PHASE_SCRIPT) {
		w->t_injected = dg_now_ms();
		refresh(w);
	}
}

/* The worker runs only the code its owner sent: the gateway decided the
 * action with the session's policy before it came here. */
static void run_script(struct worker *w)
{
	struct dg_err err = {{0}};
	w->t_injected = dg_now_ms();
	w->phase = PHASE_SCRIPT; /* set first: script_done checks it */
	if (dg_script_run(&w->script, w->cdp, w->act.code, script_done, w, &err) == 0)
		return;
	w->phase = PHASE_IDLE;
	set_error(w, "%s", err.msg);
	finish(w);
}

/* ---- running actions ---------------------------------------------------- */

static void run_action(struct worker *w);

/* Input that a rule about the page's URL may have decided (regions). */
/* Pointer input in a browser whose settling the gate can follow (see
 * run_action: not a scroll, not a multi-click). */
static bool gated_type(const struct dg_action *a)
{
	return (a->type == DG_ACTION_CLICK && a->count <= 1) || a->type == DG_ACTION_MOVE ||
	       a->type == DG_ACTION_DRAG || a->type == DG_ACTION_MOUSE_DOWN ||
	       a->type == DG_ACTION_MOUSE_UP;
}

static bool is_input(enum dg_action_type t)
{
	return t == DG_ACTION_CLICK || t == DG_ACTION_MOVE || t == DG_ACTION_DRAG ||
	       t == DG_ACTION_MOUSE_DOWN || t == DG_ACTION_MOUSE_UP || t == DG_ACTION_SCROLL ||
	       t == DG_ACTION_TYPE || t == DG_ACTION_KEY || t == DG_ACTION_HOLD_KEY;
}

/* Before pointer input in a browser that the gate can follow, the gate is
 * set up on the page if it is not: the first input on a new page is the
 * one the page takes longest to see (its repaint came 80-100 ms after it,
 * later than the old settling waited), so it waits the few milliseconds
 * the set-up takes, bounded by DG_GATE_SETUP_MS. */
static void pregate(struct worker *w)
{
	if (w->cdp && gated_type(&w->act) && dg_gate_prepare(&w->gate)) {
		w->phase = PHASE_PREGATE;
		w->nav_deadline = dg_now_ms() + DG_GATE_SETUP_MS;
		return;
	}
	run_action(w);
}

/* The tab in front is known now: the action runs only at the page it was
 * decided at; otherwise it is refused, and the result reports the page in
 * front, for the owner to decide again. */
static void precheck_done(struct worker *w)
{
	const char *now = dg_cdp_url(w->cdp);
	if (strcmp(now, w->page_url) != 0) {
		set_error(w, "not performed: the action was decided at %.300s, but the page in front "
			     "is now %.300s", w->page_url, now[0] ? now : "unknown");
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	pregate(w);
}

static void start_action(struct worker *w)
{
	w->t_start = dg_now_ms();
	enum dg_action_type t = w->act.type;
	w->want_frame = t != DG_ACTION_CURSOR_POSITION && t != DG_ACTION_READ_PAGE &&
			t != DG_ACTION_GET_PAGE_TEXT && t != DG_ACTION_FIND &&
			t != DG_ACTION_LIST_TABS && t != DG_ACTION_READ_CONSOLE &&
			t != DG_ACTION_READ_NETWORK && t != DG_ACTION_JAVASCRIPT;
	if (!w->cdp || !w->page_url || !is_input(w->act.type)) {
		pregate(w);
		return;
	}
	w->phase = PHASE_PRECHECK;
	w->nav_deadline = dg_now_ms() + DG_WORKER_REFRESH_MAX_MS;
	if (w->probing) { /* an idle probe, maybe older than what the page did */
		w->probe_again = true;
		return;
	}
	if (!probe_tabs(w))
		precheck_done(w);
}

static void run_action(struct worker *w)
{
	const struct dg_action *a = &w->act;
	struct dg_err err = {{0}};
	int px0 = w->in.px, py0 = w->in.py;
	w->phase = PHASE_IDLE;
	/* Buttons 8, 9 never reach X over VNC: refused, never "ok" for nothing. */
	if (a->button == DG_BUTTON_BACK || a->button == DG_BUTTON_FORWARD) {
		const char *b = dg_button_name(a->button);
		set_error(w, "not performed: the desktop gets no %s mouse button over VNC; the \"%s\" "
			     "action navigates the browser's history", b, b);
		w->t_injected = dg_now_ms();
		return finish(w);
	}
	/* The owner fills in an element's point before it decides; an action
	 * without one was never decided at a point: refused. */
	if (dg_action_unresolved(a)) {
		set_error(w, "not performed: ref_%d was not resolved to a point on the screen", a->ref);
		w->t_injected = dg_now_ms();
		return finish(w);
	}
	if (dg_action_type_browser_only(a->type) && !w->cdp) {
		set_error(w, "not performed: %s acts on a browser's page, and this desktop is an xterm",
			  dg_action_type_name(a->type));
		w->t_injected = dg_now_ms();
		return finish(w);
	}
	switch (a->type) {
	case DG_ACTION_LIST_TABS:
		w->text = tabs_text(w);
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	case DG_ACTION_NEW_TAB:
		open_blank_tab(w);
		return;
	case DG_ACTION_SWITCH_TAB:
		switch_tab(w);
		return;
	case DG_ACTION_CLOSE_TAB:
		close_tab(w);
		return;
	case DG_ACTION_SCROLL_TO:
	case DG_ACTION_FORM_INPUT:
	case DG_ACTION_FILE_UPLOAD:
		element_action(w);
		return;
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_DRAG:
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
	case DG_ACTION_SCROLL:
	case DG_ACTION_KEY: {
		int r = dg_input_run(&w->in, a, &err);
		if (r == -EPIPE)
			die("%s", err.msg);
		if (r)
			set_error(w, "%s", err.msg);
		break;
	}
	case DG_ACTION_TYPE:
		w->phase = PHASE_TYPE; /* set first: typed() checks it */
		if (dg_ack_type(&w->ack, w->cdp, a->text, a->text_len, type_keys, typed, w, &err) == 0)
			return;
		w->phase = PHASE_IDLE;
		set_error(w, "%s", err.msg);
		break;
	case DG_ACTION_HOLD_KEY:
		if (dg_input_chord(&w->in, &a->chords[0], true, &err))
			die("%s", err.msg);
		w->hold_until = dg_now_ms() + a->ms;
		w->phase = PHASE_HOLD;
		return;
	case DG_ACTION_WAIT:
		w->hold_until = dg_now_ms() + a->ms;
		w->phase = PHASE_WAIT;
		return;
	case DG_ACTION_NAVIGATE:
	case DG_ACTION_BACK:
	case DG_ACTION_FORWARD:
	case DG_ACTION_RELOAD:
		browser_action(w);
		return;
	case DG_ACTION_SCREENSHOT:
	case DG_ACTION_ZOOM:
		/* Nothing to inject: settled at once unless the screen is moving. */
		settle(w);
		w->settle_from = 0;
		if (w->last_update == w->settled_update)
			w->quiet_ms = 0;
		return;
	case DG_ACTION_CURSOR_POSITION:
		w->t_injected = dg_now_ms();
		settled(w);
		return;
	case DG_ACTION_READ_PAGE:
	case DG_ACTION_GET_PAGE_TEXT:
	case DG_ACTION_FIND:
		w->t_injected = dg_now_ms();
		w->phase = PHASE_READ; /* a browser's: checked above */
		if (dg_tree_read(&w->tree, w->cdp, a, read_done, w, &err) == 0)
			return;
		set_error(w, "%s", err.msg);
		finish(w);
		return;
	case DG_ACTION_READ_CONSOLE:
	case DG_ACTION_READ_NETWORK:
	case DG_ACTION_JAVASCRIPT:
		if (!w->cdp) {
			w->t_injected = dg_now_ms();
			set_error(w, "not performed: %s %s a browser's page, and this desktop is an xterm",
				  dg_action_type_name(a->type),
				  a->type == DG_ACTION_JAVASCRIPT ? "runs in" : "reads");
			finish(w);
		} else if (a->type == DG_ACTION_JAVASCRIPT) {
			run_script(w);
		} else {
			read_log(w);
		}
		return;
	case DG_ACTION_EXEC:
	default:
		set_error(w, "%s is not run by the desktop's worker", dg_action_type_name(a->type));
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	if (w->error) {
		w->t_injected = dg_now_ms();
		finish(w);
		return;
	}
	if (w->cdp && a->type == DG_ACTION_KEY) {
		barrier(w, false);
		return;
	}
	/* Pointer input in the browser: its events are dispatched before the
	 * page's next animation frames, so once the page drew two frames since,
	 * the page has run its handlers (a click's title, a hover's style); a
	 * quiet screen alone could come first (the tab's title, set by the
	 * click's handler, was read one action late). */
	settle(w);
	w->px_before = px0;
	w->py_before = py0;
	/* A move in an X desktop with no button or key held: X programs see it
	 * only if they asked for motion events (an xterm does not, unless a
	 * program in it turned on any-motion mouse tracking), so once Xvnc has
	 * processed it (sync_rfb) only the pointer's redraw is due: the
	 * answer comes DG_SETTLE_POINTER_DRAWN_MS after it arrived, or after
	 * DG_SETTLE_POINTER_QUIET_MS of quiet without it (a pointer that did
	 * not move). If anything else on the screen changes, the full quiet
	 * period applies (advance()). */
	if (!w->cdp && a->type == DG_ACTION_MOVE && w->in.buttons == 0 && a->modifiers == 0) {
		w->pointer_only = true; /* its redraw may come before the sync's answer */
		sync_rfb(w);
		w->settle_from = dg_now_ms();
		w->painted_at = 0; /* drawn before Xvnc had the move: not in answer to it */
		return; /* advance() picks the quiet period */
	}
	/* Not gated: a scroll (its frames come from the compositor, not from
	 * input the page sees), a multi-click (its first click may have
	 * repainted while the next was sent) and keys (settled by barrier()). */
	if (!w->cdp || !gated_type(a))
		return;
	w->gate_first = dg_gate_first(&w->gate);
	if (dg_gate_start(&w->gate, w->in.px, w->in.py, w->in.px != px0 || w->in.py != py0,
			  gated, w)) {
		w->frames_pending = true;
		w->frames_deadline = dg_now_ms() + DG_WORKER_BARRIER_MAX_MS;
	} else {
		frames_start(w);
	}
}

/* The owner's message: {"id": N, "action": {...}, "size": [w, h]?}. The
 * owner is trusted but the message is still checked: a bad one is a
 * protocol error that ends the worker. */
static void on_action(struct worker *w, const char *text, size_t len)
{
	json_error_t jerr;
	json_t *msg = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	json_t *id = json_object_get(msg, "id");
	json_t *action = json_object_get(msg, "action");
	json_t *size = json_object_get(msg, "size");
	json_t *page_url = json_object_get(msg, "page_url");
	json_t *resolve = json_object_get(msg, "resolve");
	if (w->phase != PHASE_IDLE)
		die("protocol error: an action arrived while another runs");
	if (json_is_integer(id) && resolve && !action) {
		on_resolve(w, json_integer_value(id), resolve);
		json_decref(msg);
		return;
	}
	if (!json_is_integer(id) || !json_is_object(action))
		die("protocol error: action message without id or action");
	if (page_url && (!json_is_string(page_url) || json_string_length(page_url) > DG_CDP_URL_MAX))
		die("protocol error: bad page_url");
	w->id = (long long)json_integer_value(id);
	w->settled_by = NULL;
	w->out_w = w->width;
	w->out_h = w->height;
	if (size) {
		json_t *sw = json_array_get(size, 0), *sh = json_array_get(size, 1);
		if (!json_is_integer(sw) || !json_is_integer(sh) || json_integer_value(sw) < 1 ||
		    json_integer_value(sh) < 1 || json_integer_value(sw) > DG_FRAME_MAX_DIM ||
		    json_integer_value(sh) > DG_FRAME_MAX_DIM)
			die("protocol error: bad screenshot size");
		w->out_w = (int)json_integer_value(sw);
		w->out_h = (int)json_integer_value(sh);
	}
	free(w->page_url);
	w->page_url = page_url ? strdup(json_string_value(page_url)) : NULL;
	if (page_url && !w->page_url)
		die("out of memory");
	struct dg_err err = {{0}};
	int r = dg_action_parse_obj(action, w->width, w->height, &w->act, &err);
	json_decref(msg);
	if (r) {
		/* The owner validates first; a refusal here is reported, not fatal. */
		w->t_start = w->t_injected = dg_now_ms();
		w->want_frame = false;
		w->act.type = DG_ACTION_SCREENSHOT;
		set_error(w, "%s", err.msg);
		finish(w);
		return;
	}
	start_action(w);
}

/* Advances the action in progress; returns the poll timeout in ms. */
static int advance(struct worker *w)
{
	long long t = dg_now_ms();
	switch (w->phase) {
	case PHASE_HOLD:
		if (t < w->hold_until)
			return (int)(w->hold_until - t);
		if (dg_input_chord(&w->in, &w->act.chords[0], false, &(struct dg_err){{0}}))
			die("sending a key event failed: the desktop is gone");
		settle(w);
		return 0;
	case PHASE_WAIT:
		if (t < w->hold_until)
			return (int)(w->hold_until - t);
		settle(w);
		return 0;
	case PHASE_BROWSER:
	case PHASE_LOAD:
		if (w->phase == PHASE_LOAD && !dg_cdp_loading(w->cdp)) {
			barrier(w, true); /* the loaded page's frames, then its paint */
			return 0;
		}
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		set_error(w, "the browser did not finish within %d ms", DG_WORKER_NAV_MAX_MS);
		settle(w);
		return 0;
	case PHASE_SETTLE: {
		long long quiet_from = w->last_update > w->settle_from ? w->last_update : w->settle_from;
		int quiet_ms = w->quiet_ms;
		if (w->pointer_only) /* see run_action() */
			quiet_ms = w->painted_at     ? DG_SETTLE_QUIET_MS
				   : w->pointer_drawn ? DG_SETTLE_POINTER_DRAWN_MS
						      : DG_SETTLE_POINTER_QUIET_MS;
		/* Gated pointer input (gated()) that has not changed the screen
		 * since it was sent: the page has committed its frame, and only
		 * the time it takes to reach the worker is left. Once the screen
		 * changes, the full quiet period applies as before, so a repaint
		 * in parts or a transition is waited out. */
		bool due = false; /* the page changed something shown: its frame is awaited */
		if (w->gated_at && !w->painted_at) {
			quiet_from = w->gated_at > w->last_update ? w->gated_at : w->last_update;
			quiet_ms = w->gate_first
					   ? dg_gate_first_quiet_ms(w->gated_at - w->t_injected)
					   : DG_GATE_QUIET_MS;
			due = w->gate_changed && t - w->gated_at < w->change_wait_ms;
		}
		/* The browser reports a load a frame or more before it paints the
		 * page: after a load, wait (bounded) for a first update. */
		bool painted = !w->await_paint || w->last_update > w->settle_from ||
			       t - w->settle_from >= DG_WORKER_PAINT_WAIT_MS;
		bool framed = !w->frames_pending || t >= w->frames_deadline;
		bool limit = t - w->t_injected >= DG_SETTLE_MAX_MS;
		if ((painted && framed && !due && t - quiet_from >= quiet_ms) || limit) {
			w->frames_pending = false;
			w->settled_by = limit ? "limit"
					: w->pointer_only && !w->painted_at ? "pointer"
					: !w->gated_at ? "quiet"
					: w->painted_at ? "repaint"
					: w->gate_changed ? "no_repaint" : "page";
			if (!limit)
				w->settled_update = w->last_update;
			settled(w);
			return 0;
		}
		long long a = !painted ? w->settle_from + DG_WORKER_PAINT_WAIT_MS - t
			      : due ? w->gated_at + w->change_wait_ms - t
			      : t - quiet_from < quiet_ms ? quiet_from + quiet_ms - t
							      : w->frames_deadline - t;
		long long b = w->t_injected + DG_SETTLE_MAX_MS - t;
		long long next = a < b ? a : b;
		return (int)(next > 0 ? next : 0);
	}
	case PHASE_PREGATE:
		if (!dg_gate_preparing(&w->gate) || t >= w->nav_deadline) {
#ifdef DG_WORKER_TRACE_SETTLE
			fprintf(stderr, "settle: the gate was set up in %lld ms (%s)\n",
				t - (w->nav_deadline - DG_GATE_SETUP_MS),
				dg_gate_preparing(&w->gate) ? "not done" : "done");
#endif
			run_action(w); /* unprepared by the deadline: settled the old way */
			return 0;
		}
		return (int)(w->nav_deadline - t);
	case PHASE_PRECHECK:
	case PHASE_PRESWITCH:
		if ((w->phase == PHASE_PRESWITCH && dg_cdp_ready(w->cdp)) || t >= w->nav_deadline) {
			precheck_done(w); /* unanswered: the page known last is compared */
			return 0;
		}
		return (int)(w->nav_deadline - t);
	case PHASE_TABS:
	case PHASE_SWITCH:
		if (w->phase == PHASE_SWITCH && dg_cdp_ready(w->cdp)) {
			refresh(w);
			return 0;
		}
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		refresh(w); /* a page that does not answer: report what is known */
		return 0;
	case PHASE_REFRESH:
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		finish(w); /* the page's title may be stale; the screen is not */
		return 0;
	case PHASE_TYPE:
		return dg_ack_advance(&w->ack);
	case PHASE_READ:
	case PHASE_CALL:
		return dg_tree_advance(&w->tree);
	case PHASE_TAB:
		if (strcmp(dg_cdp_target_id(w->cdp), w->tab_want) == 0 && dg_cdp_ready(w->cdp)) {
			tab_arrived(w);
			return 0;
		}
		if (w->tab_created) /* tracked now? (a no-op until it is, and once it is current) */
			dg_cdp_switch(w->cdp, w->tab_want, &(struct dg_err){{0}});
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		set_error(w, "tab %.64s did not become the active tab within %d ms", w->tab_want,
			  DG_WORKER_TAB_MAX_MS);
		tab_arrived(w);
		return 0;
	case PHASE_TABCLOSE:
		if (!tab_open(w, w->tab_want) && dg_cdp_ready(w->cdp)) {
			settle(w);
			return 0;
		}
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		set_error(w, "tab %.64s did not close within %d ms", w->tab_want, DG_WORKER_TAB_MAX_MS);
		w->t_injected = t;
		finish(w);
		return 0;
	case PHASE_TABNEW:
	case PHASE_UPLOAD:
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		dg_cdp_fail_all(w->cdp, -ETIMEDOUT, "the browser did not answer in time");
		if (w->phase == PHASE_TABNEW || w->phase == PHASE_UPLOAD) { /* no callback ran */
			set_error(w, "the browser did not answer within %d ms", DG_WORKER_TAB_MAX_MS);
			w->t_injected = t;
			finish(w);
		}
		return 0;
	case PHASE_SCRIPT:
		return dg_script_advance(&w->script);
	case PHASE_BARRIER:
		if (t < w->nav_deadline)
			return (int)(w->nav_deadline - t);
		settle(w); /* a page that draws no frames (hidden, hung): settle anyway */
		return 0;
	case PHASE_IDLE:
	default:
		return -1;
	}
}

/* ---- RFB and set-up ----------------------------------------------------- */

static void pump_rfb(struct worker *w)
{
	do {
		if (!HandleRFBServerMessage(w->vnc))
			die("the desktop closed its RFB connection or sent a bad message");
	} while (w->vnc->buffered > 0);
}

/* libvncclient allocates the framebuffer at the size the server announced,
 * inside rfbInitClient, before the worker can compare it with the session's:
 * a hostile ServerInit of 65535x65535 would reserve 16 GiB. Refuse any other
 * size before allocating anything. */
static rfbBool alloc_framebuffer(rfbClient *c)
{
	if (c->width != W->width || c->height != W->height)
		die("the desktop is %dx%d, expected %dx%d", c->width, c->height, W->width, W->height);
	size_t bytes = (size_t)c->width * (size_t)c->height * (size_t)(c->format.bitsPerPixel / 8);
	free(c->frameBuffer);
	c->frameBuffer = malloc(bytes);
	return c->frameBuffer != NULL;
}

static void connect_rfb(struct worker *w)
{
	rfbClientLog = vnc_log;
	rfbClientErr = vnc_err;
	w->vnc = rfbGetClient(8, 3, 4);
	if (!w->vnc)
		die("out of memory");
	rfbClient *c = w->vnc;
	/* BGRX in memory, as the PNG encoder reads it. */
	c->format.redShift = 16;
	c->format.greenShift = 8;
	c->format.blueShift = 0;
	c->format.bigEndian = FALSE;
	/* Raw is the cheapest over a local socket; the desktop never sees a
	 * lossy encoding (tight with JPEG would be libvncclient's default). */
	c->appData.encodingsString = "copyrect raw";
	/* No cursor pseudo-encodings: Xvnc then draws the pointer into the
	 * framebuffer, so screenshots show it (as `scrot -p` does). */
	c->appData.useRemoteCursor = FALSE;
	c->appData.shareDesktop = TRUE;
	c->canHandleNewFBSize = FALSE;
	c->GotFrameBufferUpdate = on_update;
	c->MallocFrameBuffer = alloc_framebuffer;
	/* libvncclient's readTimeout counts only reads that fail with EAGAIN:
	 * on the blocking socket we inherit, a desktop that stops in the middle
	 * of a message would block the worker for ever. Non-blocking, such a
	 * read gives up after about readTimeout seconds (libvncclient waits
	 * for data with select between tries, as on the sockets it connects). */
	if (fcntl(DG_WORKER_FD_RFB, F_SETFL, fcntl(DG_WORKER_FD_RFB, F_GETFL) | O_NONBLOCK) != 0)
		die("fcntl on the RFB socket: %s", strerror(errno));
	c->readTimeout = DG_WORKER_RFB_READ_TIMEOUT_S;
	c->sock = DG_WORKER_FD_RFB;
	c->listenSpecified = TRUE;
	int argc = 0;
	if (!rfbInitClient(c, &argc, NULL)) {
		w->vnc = NULL; /* rfbInitClient frees the client on failure */
		die("RFB handshake with the desktop failed");
	}
	if (c->width != w->width || c->height != w->height)
		die("the desktop is %dx%d, expected %dx%d", c->width, c->height, w->width, w->height);
	/* The first update may be only a zero-area pseudo-rectangle: count
	 * pixels until a whole screen arrived. */
	long long deadline = dg_now_ms() + DG_WORKER_FIRST_FRAME_MS;
	while (w->area < (uint64_t)w->width * (uint64_t)w->height) {
		long long left = deadline - dg_now_ms();
		if (left <= 0)
			die("no first frame from the desktop after %d ms", DG_WORKER_FIRST_FRAME_MS);
		if (c->buffered == 0) {
			struct pollfd p = {c->sock, POLLIN, 0};
			if (poll(&p, 1, (int)left) <= 0)
				continue;
		}
		pump_rfb(w);
	}
	w->in = (struct dg_input){.vnc = c, .prime = w->profile == DG_PROFILE_BROWSER,
				  .px = w->width / 2, .py = w->height / 2,
				  .sync = sync_rfb, .sync_arg = w};
}

/* Whether at least half the framebuffer is the root window's colour; stops
 * reading once either half is reached (it runs on every start). */
static bool mostly_root(const struct worker *w)
{
	const uint32_t *px = (const uint32_t *)w->vnc->frameBuffer; /* 32 bits a pixel */
	size_t n = (size_t)w->width * (size_t)w->height, root = 0, other = 0;
	for (size_t i = 0; i < n && root * 2 < n && other * 2 <= n; i++) {
		if ((px[i] & 0xffffffu) == DG_WORKER_ROOT_PIXEL)
			root++;
		else
			other++;
	}
	return root * 2 >= n;
}

/* The first frame usually shows the X server's empty root window: the
 * profile's program maps its window (which fills the screen: the window
 * manager maximizes xterm, Chromium is sized to the screen) a little later.
 * The desktop is ready once its window is shown, updates covering at least
 * half the screen after the first frame or a first frame that is mostly
 * not the root (a worker whose start came after the window's: on a loaded
 * host it waited out the whole bound), and the screen then stayed quiet
 * (DG_WORKER_XTERM_SHOWN_QUIET_MS or DG_SETTLE_QUIET_MS, by profile); or
 * once the bound passed (a program that shows nothing is not the worker's
 * to fix). */
static void wait_content(struct worker *w)
{
	uint64_t first = w->area, half = (uint64_t)w->width * (uint64_t)w->height / 2;
	bool shown_first = !mostly_root(w);
	long long quiet = w->profile == DG_PROFILE_XTERM ? DG_WORKER_XTERM_SHOWN_QUIET_MS
							  : DG_SETTLE_QUIET_MS;
	long long t0 = dg_now_ms();
	for (;;) {
		long long t = dg_now_ms();
		bool shown = shown_first || w->area - first >= half;
		if (shown && t - w->last_update >= quiet) {
			w->settled_update = w->last_update;
			return;
		}
		if (t - t0 >= DG_WORKER_CONTENT_MS)
			return;
		long long wait = shown ? w->last_update + quiet - t : t0 + DG_WORKER_CONTENT_MS - t;
		if (w->vnc->buffered == 0) {
			struct pollfd p = {w->vnc->sock, POLLIN, 0};
			if (poll(&p, 1, (int)(wait > 0 ? wait : 0)) <= 0)
				continue;
		}
		pump_rfb(w);
	}
}

static int parse_args(struct worker *w, int argc, char **argv)
{
	struct dg_err err = {{0}};
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--profile") == 0) {
			if (dg_profile_parse(argv[i + 1], &w->profile))
				return -1;
		} else if (strcmp(argv[i], "--size") == 0) {
			if (dg_desktop_parse_size(argv[i + 1], &w->width, &w->height, &err))
				return -1;
		} else if (strcmp(argv[i], "--instance") == 0) {
			if (!dg_instance_valid(argv[i + 1]))
				return -1;
		} else {
			return -1;
		}
	}
	return w->width > 0 ? 0 : -1;
}

static void cdp_pump(struct worker *w, struct pollfd p[2])
{
	struct dg_err err = {{0}};
	if (dg_cdp_handle(w->cdp, p, &err))
		die("the browser closed its DevTools pipe: %s", err.msg);
}

static int guard_emit(void *arg, uint32_t type, const char *json)
{
	struct worker *w = arg;
	return dg_ipc_send(w->ctl, type, json, strlen(json));
}

static void cdp_event(void *arg, const char *method, const char *session, json_t *params)
{
	struct worker *w = arg;
	/* A CDP client's session's: its own, never the guard's or the logs'. */
	if (dg_cdpfw_event(w->fw, method, session, params))
		return;
	dg_guard_event(w->guard, method, session, params);
	dg_pagelog_event(w->log, method, session, params);
	/* A tab opened, closed or navigated: which one is in front may have
	 * changed (a new tab comes to the front a little after it is
	 * announced). */
	if (!session && strncmp(method, "Target.target", 13) == 0) {
		long long soon = dg_now_ms() + DG_WORKER_TAB_SOON_MS;
		if (w->next_probe > soon)
			w->next_probe = soon;
	}
}

/* ---- where the page's viewport is, for the CDP firewall ------------------------
 *
 * A CDP client's points are the page's viewport pixels; the firewall maps
 * them to the screen (regions) through the viewport's place: the browser
 * window's bounds (Browser.getWindowForTarget) and the page's layout
 * viewport (Page.getLayoutMetrics), the viewport filling the window's
 * width (centred) and its bottom, as page.js's viewport() computes it.
 * Probed when a client connects and after each resolve; until known,
 * commands with a point are refused. */

static void view_metrics_done(void *arg, int status, json_t *result, const char *error)
{
	struct worker *w = arg;
	(void)error;
	json_t *vp = json_object_get(result, "cssLayoutViewport");
	json_t *cw = json_object_get(vp, "clientWidth"), *ch = json_object_get(vp, "clientHeight");
	if (status != 0 || !json_is_number(cw) || !json_is_number(ch) || !w->fw)
		return;
	int vw = (int)json_number_value(cw), vh = (int)json_number_value(ch);
	int left = w->view_win[0], top = w->view_win[1], ww = w->view_win[2], wh = w->view_win[3];
	if (vw <= 0 || vh <= 0 || vw > DG_ACTION_SCREEN_MAX || vh > DG_ACTION_SCREEN_MAX)
		return;
	struct dg_cdp_view v = {
		.vp_x = left + (ww > vw ? (ww - vw) / 2 : 0),
		.vp_y = top + (wh > vh ? wh - vh : 0),
		.vp_w = vw,
		.vp_h = vh,
		.screen_w = w->width,
		.screen_h = w->height,
	};
	dg_cdpfw_set_view(w->fw, &v);
}

static void view_window_done(void *arg, int status, json_t *result, const char *error)
{
	struct worker *w = arg;
	(void)error;
	json_t *b = json_object_get(result, "bounds");
	const char *keys[4] = {"left", "top", "width", "height"};
	for (int i = 0; i < 4; i++) {
		json_t *v = json_object_get(b, keys[i]);
		if (status != 0 || !json_is_integer(v) || json_integer_value(v) < -DG_ACTION_SCREEN_MAX ||
		    json_integer_value(v) > DG_ACTION_SCREEN_MAX)
			return;
		w->view_win[i] = (int)json_integer_value(v);
	}
	struct dg_err err = {{0}};
	if (w->cdp && dg_cdp_ready(w->cdp))
		dg_cdp_send(w->cdp, "Page.getLayoutMetrics", NULL, dg_cdp_session_id(w->cdp),
			    view_metrics_done, w, &err);
}

static void probe_view(struct worker *w)
{
	struct dg_err err = {{0}};
	if (!w->cdp || !dg_cdp_ready(w->cdp))
		return;
	dg_cdp_send(w->cdp, "Browser.getWindowForTarget",
		    json_pack("{s:s}", "targetId", dg_cdp_target_id(w->cdp)), NULL, view_window_done,
		    w, &err);
}

static void browser_start(struct worker *w)
{
	struct dg_err err = {{0}};
	w->cdp = dg_cdp_new(DG_WORKER_FD_CDP_OUT, DG_WORKER_FD_CDP_IN);
	dg_gate_init(&w->gate, w->cdp, &w->in.presses);
	w->guard = w->cdp ? dg_guard_new(w->cdp, guard_emit, w) : NULL;
	w->log = dg_pagelog_new(w->cdp);
	w->fw = dg_cdpfw_new(w->cdp, w->ctl);
	if (!w->guard || !w->log || !w->fw)
		die("DevTools: out of memory");
	/* The screen; no viewport known yet: CDP commands with a point are
	 * refused (cdp-fw-priv.h). */
	dg_cdpfw_set_view(w->fw, &(struct dg_cdp_view){.screen_w = w->width, .screen_h = w->height});
	dg_guard_set_pagelog(w->guard, w->log);
	dg_cdp_set_event_handler(w->cdp, cdp_event, w);
	if (dg_cdp_start(w->cdp, NULL, NULL, &err) || dg_guard_start(w->guard, &err))
		die("DevTools: %s", err.msg);
	long long deadline = dg_now_ms() + DG_WORKER_DEVTOOLS_MS;
	/* READY only once the first page is guarded: attached, Fetch on. */
	while (!dg_cdp_ready(w->cdp) || dg_guard_pending_setups(w->guard) > 0) {
		long long left = deadline - dg_now_ms();
		if (left <= 0)
			die("the browser did not answer DevTools within %d ms", DG_WORKER_DEVTOOLS_MS);
		struct pollfd p[2];
		dg_cdp_pollfds(w->cdp, p);
		if (poll(p, 2, (int)left) > 0)
			cdp_pump(w, p);
		if (dg_guard_failed(w->guard))
			die("DevTools: the browser refused to hold its requests (Fetch.enable)");
	}
	w->cdp_changes = dg_cdp_changes(w->cdp);
}

/* Tells the owner when the page's URL or title changed on its own (a link,
 * a redirect, a script), for observers and the recordings. */
static void report_page(struct worker *w)
{
	if (!w->cdp || dg_cdp_changes(w->cdp) == w->cdp_changes)
		return;
	/* Not in the middle of a switch to another tab (no URL known yet),
	 * unless no page is left at all. */
	if (!dg_cdp_ready(w->cdp) && dg_cdp_n_targets(w->cdp) > 0)
		return;
	w->cdp_changes = dg_cdp_changes(w->cdp);
	json_t *ev = json_pack("{s:s}", "event", "page");
	add_page(w, ev);
	send_json(w, DG_MSG_EVENT, ev);
}

/* Sends the owner the screen CDP clients' commands left, for the
 * recording (DG_MSG_CDP_FRAME): when commands went to Chromium (or a
 * client attached) since the last one, the screen changed and has been
 * quiet for the settle period, and DG_WORKER_CDP_FRAME_MS passed. Only
 * between actions: an action's own frames show the screen then. Returns
 * how long until one may be due (ms), or -1. */
static int cdp_frame(struct worker *w)
{
	uint64_t first, last;
	bool opened;
	if (w->phase != PHASE_IDLE || !w->fw || !dg_cdpfw_frame_due(w->fw, &first, &last, &opened))
		return -1;
	if (!opened && w->area == w->cdp_frame_area)
		return -1; /* nothing new to show: the commands wait for a change */
	long long now = dg_now_ms(), due = w->last_update + DG_SETTLE_QUIET_MS;
	if (w->cdp_frame_ms + DG_WORKER_CDP_FRAME_MS > due)
		due = w->cdp_frame_ms + DG_WORKER_CDP_FRAME_MS;
	if (now < due)
		return (int)(due - now);
	encode(w, NULL, w->width, w->height);
	if (!w->png_valid) { /* not the next action's error: this frame is skipped */
		free(w->error);
		w->error = NULL;
	}
	w->cdp_frame_area = w->area;
	w->cdp_frame_ms = now;
	dg_cdpfw_frame_taken(w->fw);
	if (w->png_valid && dg_cdp_frame_send(w->ctl, first, last, w->png.data, w->png.len) == -EPIPE)
		_exit(0); /* the owner is gone: the session is over */
	return -1;
}

/* Keeps the PNG of the screen current between actions (see
 * DG_WORKER_IDLE_PNG_MS): once the screen changed since the last PNG and
 * has been quiet for the settle period, it is encoded at the size the
 * owner asked for last, so the next screenshot of an unchanged screen
 * only sends it. Returns how long until one may be due (ms), or -1. */
static int idle_png(struct worker *w)
{
	if (w->phase != PHASE_IDLE || (w->png_valid && w->png_area == w->area))
		return -1;
	long long now = dg_now_ms(), due = w->last_update + DG_SETTLE_QUIET_MS;
	if (w->idle_png_ms + DG_WORKER_IDLE_PNG_MS > due)
		due = w->idle_png_ms + DG_WORKER_IDLE_PNG_MS;
	if (now < due)
		return (int)(due - now);
	w->idle_png_ms = now;
	encode(w, NULL, w->out_w, w->out_h);
	if (!w->png_valid) { /* the next screenshot tries again and reports it */
		free(w->error);
		w->error = NULL;
	}
	return -1;
}

/* The sooner of two poll timeouts in ms, -1 meaning none. */
static int sooner(int a, int b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static void send_ready(struct worker *w)
{
	json_t *m = json_pack("{s:s, s:i, s:i, s:s}", "event", "ready", "width", w->width, "height",
			      w->height, "profile", dg_profile_name(w->profile));
	add_page(w, m);
	send_json(w, DG_MSG_READY, m);
}

static void loop(struct worker *w)
{
	struct dg_err err = {{0}};
	for (;;) {
		int timeout = advance(w);
		if (w->phase == PHASE_IDLE && w->cdp && !w->probing) {
			long long left = w->next_probe - dg_now_ms();
			if (left <= 0) {
				w->next_probe = dg_now_ms() + DG_WORKER_TAB_PROBE_MS;
				probe_tabs(w);
				left = DG_WORKER_TAB_PROBE_MS;
			}
			timeout = sooner(timeout, (int)left);
		}
		timeout = sooner(timeout, cdp_frame(w));
		timeout = sooner(timeout, idle_png(w));
		if (w->vnc->buffered > 0) {
			pump_rfb(w);
			continue;
		}
		/* Viewers get what changed before the worker sleeps again. */
		if (dg_view_due(w->view))
			dg_view_service(w->view, NULL, 0);
		/* The channel is read in every phase: verdicts on the browser's
		 * requests arrive while an action (a navigation) waits for them. */
		struct pollfd p[4 + 1 + DG_VIEWERS_MAX] = {
			{w->ctl, POLLIN, 0},
			{w->vnc->sock, POLLIN, 0},
			{-1, 0, 0},
			{-1, 0, 0},
		};
		if (w->cdp)
			dg_cdp_pollfds(w->cdp, &p[2]);
		int nv = dg_view_pollfds(w->view, &p[4]);
		/* Messages read ahead of the last one are not seen by poll. */
		bool ahead = dg_ipc_pending(&w->rd);
		int n = poll(p, (nfds_t)(4 + nv), ahead ? 0 : timeout);
		if (n < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		if (n <= 0 && !ahead)
			continue;
		if (p[1].revents)
			pump_rfb(w);
		for (int i = 0; i < nv; i++) {
			if (p[4 + i].revents) {
				dg_view_service(w->view, &p[4], nv);
				break;
			}
		}
		if (w->cdp && (p[2].revents || p[3].revents)) {
			cdp_pump(w, &p[2]);
			if (w->phase == PHASE_IDLE)
				report_page(w);
		}
		if (p[0].revents || ahead) {
			/* One message an iteration: an action changes the phase that
			 * the next one is read in. */
			int r = dg_ipc_read(w->ctl, &w->rd, &err);
			if (r == -EPIPE)
				_exit(0); /* the owner closed the channel: the session is over */
			if (r < 0)
				die("control channel: %s", err.msg);
			if (r == 1 && w->rd.type == DG_MSG_VERDICT && w->guard) {
				if (dg_guard_verdict(w->guard, (const char *)w->rd.buf, w->rd.len, &err))
					die("protocol error: %s", err.msg);
			} else if (r == 1 && dg_cdpfw_handles(w->rd.type)) {
				/* CDP clients, in every phase: they do not wait for actions. */
				if (dg_cdpfw_message(w->fw, w->rd.type, w->rd.buf, w->rd.len, &err))
					die("protocol error: %s", err.msg);
				if (w->rd.type == DG_MSG_CDP_OPEN)
					probe_view(w);
			} else if (r == 1) {
				/* One action at a time: the owner sends the next only after
				 * the result of this one. */
				if (w->rd.type != DG_MSG_ACTION || w->phase != PHASE_IDLE)
					die("protocol error: message type %u from the owner%s", w->rd.type,
					    w->phase != PHASE_IDLE ? " during an action" : "");
				on_action(w, (const char *)w->rd.buf, w->rd.len);
			}
		}
	}
}

int dg_worker_main(int argc, char **argv)
{
	static struct worker worker;
	struct worker *w = &worker;
	W = w;
	w->settled_update = -1;
	w->ctl = DG_WORKER_FD_CTL;
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (parse_args(w, argc, argv) != 0)
		die("usage: deskgate worker --profile xterm|browser --size WxH (started by deskgate)");
	connect_rfb(w);
	if (w->profile == DG_PROFILE_BROWSER)
		browser_start(w);
	else if (!(w->fw = dg_cdpfw_new(NULL, w->ctl)))
		die("out of memory");
	wait_content(w);
	struct dg_err err = {{0}};
	/* The live view's channel: non-blocking, read as viewers arrive. */
	if (fcntl(DG_WORKER_FD_VIEW, F_SETFL, O_NONBLOCK) != 0)
		die("the live view's channel (fd %d): %s", DG_WORKER_FD_VIEW, strerror(errno));
	w->view = dg_view_new(DG_WORKER_FD_VIEW, (char *)w->vnc->frameBuffer, w->width, w->height,
			      &err);
	if (!w->view)
		die("%s", err.msg);
	if (dg_seccomp_install_worker(&err))
		die("%s", err.msg);
	send_ready(w);
	/* The first screenshot is ready before anyone asks: its stripes are
	 * encoded now, while the owner answers its client (a later screenshot of
	 * an unchanged screen then costs one hashing pass); idle_png keeps it
	 * current between actions. */
	w->out_w = w->width;
	w->out_h = w->height;
	encode(w, NULL, w->out_w, w->out_h);
	loop(w);
	return 0;
}
