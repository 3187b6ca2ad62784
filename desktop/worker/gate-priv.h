/* gate: pointer input in the browser that the page acknowledges (internal
 * to desktop/worker/; the worker's settling after click, move, drag,
 * mouse_down and mouse_up in a browser session).
 *
 * Why: a pointer action's screenshot must show what the input caused. A
 * quiet screen alone (no framebuffer update for DG_SETTLE_QUIET_MS) is
 * slow, since every action waits the whole quiet period, and the page's
 * two animation frames asked for over DevTools can resolve before the X
 * input has even reached the page (DevTools and X are two paths into the
 * renderer: measured in about one click of five). So the page says when it
 * has the input: a listener in an isolated world of the page's main frame
 * (DG_GATE_WORLD, invisible to the page's scripts) counts the trusted
 * pointer events that change a button and keeps where the last pointer
 * event was; a promise evaluated there resolves once the count has reached
 * the button changes the worker sent and the pointer is where it was sent,
 * and then once the page has run the animation frame after it (the input's
 * handlers have run and their frame is painted and committed). From then
 * on, settling needs only the time the committed frame takes to reach
 * Xvnc and the worker: DG_GATE_QUIET_MS when nothing shown changed, and
 * when something did (a mutation observer in the same world sees the
 * page change a rendered element in its viewport after the action's
 * first event), the frame's arrival, awaited up to DG_GATE_CHANGE_WAIT_MS
 * (a loaded host's compositor can take longer than any quiet period).
 *
 * When the gate cannot tell, the caller settles as before (the two frames,
 * then the full quiet period): an animation or transition running on the
 * page once the input's frame is committed (a transition's first frame
 * can look like the page before it; its next frames come later); a page
 * that may have drawn what no DOM change shows: a canvas, video, embed or
 * object shown in its viewport (in the document: one inside a shadow root
 * is not looked for), the focus moved by the input (a :focus
 * style), a form control's value changed (a checkbox: its state is a
 * property, not an attribute) -- on a loaded host such a repaint came
 * later than DG_GATE_QUIET_MS after the answer (a canvas page's tenth
 * click, stale in web/settle beside the suite at ctest -j3); no world
 * on this document yet (it is made
 * for the next action), the point outside the page's viewport (the
 * browser's own toolbar), a pointer that did not move and no button
 * changed, the input not seen within DG_GATE_WAIT_MS (an iframe under the
 * pointer, a native drag that cancelled the pointer, a page whose own
 * listener swallowed the event, a busy page), or the count unknown after
 * such a miss until it has been read again between actions.
 *
 * A hostile page can only slow its own actions down to that fallback: it
 * cannot see or touch the isolated world's listener, and a page that
 * makes the wait fail gets the old, slower settling.
 */
#ifndef DG_WORKER_GATE_PRIV_H
#define DG_WORKER_GATE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include "desktop/worker/cdp-priv.h"

#define DG_GATE_WORLD "deskgate-pointer" /* the isolated world's name */
/* Longest wait for the page to see the input and draw its frame; past it
 * the action settles the old way. A click reached the page 2-6 ms after it
 * was sent on the quiet VM, and in up to 30 ms with the host at load 10. */
#define DG_GATE_WAIT_MS 60
/* ... for the first input on a page (no pointer event seen on it yet, so
 * its viewport is unknown): it reached a page 80-100 ms after its load. */
#define DG_GATE_FIRST_WAIT_MS 200
/* On a loaded host the page answers later (100-190 ms from the input under
 * ASan beside two heavy tests), so both waits grow with the answers the
 * gate got lately: DG_GATE_LAG_FACTOR times their recent peak (each answer
 * takes the peak down by a quarter of it, or up to itself), at most
 * DG_GATE_WAIT_MAX_MS. A fixed wait sized for that load would slow every
 * action the page never sees (an iframe under the pointer) on a quiet one. */
#define DG_GATE_LAG_FACTOR 3
#define DG_GATE_WAIT_MAX_MS 500
/* Quiet period once the page has committed the input's frame: long enough
 * for the compositor to draw it and Xvnc to send it, when the page may
 * have repainted what its listener cannot see (a canvas inside a shadow
 * root, a native control's hover look, a caret). Measured with such a
 * page (tests/bench/gate_quiet.js, "shadow": its click repaints a whole
 * canvas in a shadow root, and the gate says "still"), Xvnc at
 * DG_DESKTOP_XVNC_FPS 1000: traced, its repaint came 1-5 ms after the
 * answer on the quiet VM, p99 and at most 7 ms beside four busy loops;
 * stale screenshots none of 200 at 5 or 6 ms beside the four loops (at
 * 240 updates a second, quiet VM: 57 of 60 at 0 ms, 24-33 of 100 at 3, 1
 * of 100 at 5; the repaint came 3-9 ms after the answer, up to 17 under
 * the loops: with 10 ms here, a stale screen was possible). 8 ms keeps 1
 * ms over the longest seen (docs/benchmarks.md, "Xvnc's update clock"). */
#define DG_GATE_QUIET_MS 8
/* ... for a document's first pointer input (its viewport unknown) and its
 * first button press: their frames come later. Traced under the test
 * suite's load (ASan build), a canvas page's first click repainted 10-60
 * ms after a "still" answer that itself took 24-189 ms, where later clicks
 * answered in 5-35 ms and repainted within 13 ms at p90; on the quiet VM
 * the first click's repaint came 43 ms after the answer twice in eight.
 * First clicks on fresh canvas documents beside the suite were stale 4 of
 * 30 times with DG_GATE_QUIET_MS. So the period is the longer of this and
 * the time the page took to answer (a host slow to answer is slow to
 * draw), at most DG_GATE_FIRST_QUIET_MAX_MS: a cost paid once a document.
 * That evidence is a canvas page's, which now settles the old way anyway
 * (a shown canvas, below); an element-changing page's first click was
 * answered later than the clicks after it too (6-23 ms on the quiet VM)
 * but repainted as soon, and the period stays for any page's first press,
 * whose drawing may come late in ways no listener sees. */
#define DG_GATE_FIRST_QUIET_MS 30
#define DG_GATE_FIRST_QUIET_MAX_MS 250

/* Longest wait before pointer input for the gate's set-up on a page (its
 * world, the count so far: two DevTools round trips); past it the input
 * goes and settles the old way. */
#define DG_GATE_SETUP_MS 1000

/* Events the page's listener keeps the time of: a wait looks up when its
 * action's first event came there (a click is up to three events, a drag
 * about one per 8 pixels of its path). */
#define DG_GATE_RING 64
/* The page's DOM changes the listener keeps (time and node): with more
 * since the action's first event than it keeps, the page counts as
 * changed without looking further. */
#define DG_GATE_RECORDS 64
/* Canvas, video, embed and object elements the listener looks at at most
 * for one shown in the viewport; past it, the page counts as showing one. */
#define DG_GATE_MEDIA 64
/* Style rules the listener reads at most for :hover ones, when the
 * element under the pointer changed; past it, every such change counts as
 * one the page shows. */
#define DG_GATE_RULES 20000
/* Longest wait for the screen to change after the gate's answer when the
 * page changed something shown since the input: its frame is committed
 * but not yet on the screen. Its first pixels came 2-16 ms after the
 * answer and its last up to 28 ms after the input (traced, quiet VM and
 * four busy loops: docs/benchmarks.md), later than DG_GATE_QUIET_MS.
 * Past this, nothing shown changed after all (a colour set to itself). */
#define DG_GATE_CHANGE_WAIT_MS 250
/* ... grown, on a loaded host, to DG_GATE_LAG_FACTOR times the longer of
 * this action's answer (input to answer) and the recent peak of repaints'
 * delays after a "changed" answer, at most this: a host slow to answer is
 * slow to draw too. */
#define DG_GATE_CHANGE_WAIT_MAX_MS 1000

/* The gate's answer for one action. */
enum dg_gate_answer {
	DG_GATE_UNSURE,  /* not seen in time, animating, gone: settle the old way */
	DG_GATE_STILL,   /* the page has the input and its frame, and nothing shown changed */
	DG_GATE_CHANGED, /* ... and something shown changed: its pixels are coming */
};

/* Called once per dg_gate_start that returned true, never inside that
 * call. */
typedef void (*dg_gate_done_fn)(void *arg, enum dg_gate_answer answer);

/* Lives as long as the worker. */
struct dg_gate {
	struct dg_cdp *cdp;
	uint64_t gen;                /* bumped per wait and per reset: late replies are dropped */
	int ctx;                     /* the isolated world's context id; 0: none */
	char ctx_session[DG_CDP_ID_MAX + 1]; /* ... in this page session */
	uint64_t ctx_loads;          /* ... made at this dg_cdp_loads (its document) */
	bool setting_up;             /* creating the world or reading the count */
	long long count;             /* the page's count of button changes; -1 unknown */
	long long events;            /* ... and its number of the last pointer event, then */
	const uint64_t *presses;     /* the worker's running total of button changes sent */
	uint64_t presses_at;         /* *presses when count was read */
	uint64_t asked_presses;      /* ... when the read in flight was sent */
	int view[4];                 /* the viewport in screen pixels (x, y, w, h); w 0: unknown */
	bool waiting;
	uint64_t want_presses;       /* *presses the wait in flight waits for */
	long long asked_at;          /* dg_now_ms() when the wait in flight was sent */
	int lag_ms;                  /* the recent peak of answers' delays (dg_gate_lag_fold) */
	dg_gate_done_fn done;
	void *arg;
};

/* presses: the worker's running total of button changes sent to Xvnc
 * (dg_input's), which must outlive the gate. */
void dg_gate_init(struct dg_gate *g, struct dg_cdp *cdp, const uint64_t *presses);

/* After pointer input: x, y where the pointer is now, moved whether the
 * input moved it. Returns true when the page was asked (done follows),
 * false when the gate cannot tell (see above; it may set itself up for
 * the next action meanwhile). One wait at a time: a new one drops the old. */
bool dg_gate_start(struct dg_gate *g, int x, int y, bool moved, dg_gate_done_fn done, void *arg);

/* Whether the pointer input just sent is the current document's first
 * (no pointer event has reached it yet: its viewport unknown) or holds its
 * first button press: these are the slowest to be seen and drawn (the
 * frame after them reached the worker later than DG_GATE_QUIET_MS after
 * the answer). Called after the input is sent, before dg_gate_start. */
bool dg_gate_first(const struct dg_gate *g);

/* The quiet period after the answer to such a first input that came
 * answer_ms after it: DG_GATE_FIRST_QUIET_MS, or answer_ms when longer,
 * at most DG_GATE_FIRST_QUIET_MAX_MS. Pure. */
int dg_gate_first_quiet_ms(long long answer_ms);

/* Before pointer input: sets the gate up on the current page when it is
 * not (its world, the count). True when that is in flight: the caller may
 * wait (bounded: DG_GATE_SETUP_MS) until dg_gate_preparing is false. */
bool dg_gate_prepare(struct dg_gate *g);
bool dg_gate_preparing(const struct dg_gate *g);

/* Between actions: reads the page's count again when it is unknown, so
 * the next action can be gated. */
void dg_gate_idle(struct dg_gate *g);

/* A recent peak of delays: the peak so far less a quarter of it, or the
 * new sample when that is longer. Pure; the caller keeps the peak. */
int dg_gate_lag_fold(int peak_ms, long long sample_ms);

/* How long the page is given to see the input (DG_GATE_WAIT_MS, or
 * DG_GATE_FIRST_WAIT_MS on a page's first input), grown with the recent
 * peak of answers' delays, at most DG_GATE_WAIT_MAX_MS. Pure. */
int dg_gate_wait_ms(int lag_ms, bool first);

/* How long to wait for the screen to change after a "changed" answer that
 * came answer_ms after the input, with paint_lag_ms the recent peak of
 * repaints' delays after such answers: DG_GATE_CHANGE_WAIT_MS, grown with
 * either, at most DG_GATE_CHANGE_WAIT_MAX_MS. Pure. */
int dg_gate_change_wait_ms(long long answer_ms, int paint_lag_ms);

/* The wait in flight is no longer wanted (its action ended): done is not
 * called for it. */
void dg_gate_cancel(struct dg_gate *g);

#endif
