/* gate: pointer input the page acknowledges (see gate-priv.h for the
 * contract and its bounds).
 *
 * Steps, each a DevTools command on the current page's session:
 *   world    Page.createIsolatedWorld on the main frame, once per page
 *            session and document, started by the first action that finds
 *            none (that action settles the old way);
 *   install  the listener in that world, answering the count so far;
 *   wait     per action, a promise that resolves once the page has the
 *            input and has run the animation frame after it.
 * Every command carries a ticket with the gate's generation, so a reply
 * that comes after its wait was dropped or the gate was reset is ignored.
 */
#include <stdio.h>
#include <string.h>

#include "desktop/worker/gate-priv.h"

/* The listener: trusted pointer events on the window in the capture phase
 * (before the page's listeners on its elements). A button change is a
 * pointerdown, a pointerup or a chorded pointermove (button not -1); each
 * X button press or release of buttons 1-3 is exactly one. Every event is
 * numbered (k) and its time kept in a ring of DG_GATE_RING, so a wait can
 * tell when its action's first event came. A mutation observer keeps the
 * time and node of the page's last DG_GATE_RECORDS DOM changes; whether a
 * node is shown is asked only once the input's frame is committed (its
 * layout is then clean: asking in the observer would lay the page out in
 * the middle of its own work). Answers the count, the viewport in screen
 * pixels (the last event's screen minus client position; unknown, 0 0,
 * before the first) and the event number. */
#define SNAPSHOT "[s.n, s.ox, s.oy, innerWidth, innerHeight, s.k]"
#define SNAPSHOT_N 6
#define STR_(x) #x
#define STR(x) STR_(x)
#define INSTALL_JS                                                                             \
	"(() => { let s = window.__deskgatePointer; if (!s) { s = window.__deskgatePointer = "  \
	"{n: 0, k: 0, x: NaN, y: NaN, ox: 0, oy: 0, wake: null, ts: [], mk: 0, mq: []}; const " \
	"f = e => { if (!e.isTrusted) return; const now = performance.now(); s.ts[++s.k % "     \
	STR(DG_GATE_RING) "] = e.timeStamp > 0 && e.timeStamp <= now ? e.timeStamp : now; if "  \
	"(e.button !== -1) s.n++; s.x = e.screenX; s.y = e.screenY; s.ox = e.screenX - "       \
	"e.clientX; s.oy = e.screenY - e.clientY; if (s.wake) s.wake(); }; for (const t of "     \
	"['pointerdown', 'pointerup', 'pointermove']) addEventListener(t, f, true); new "       \
	"MutationObserver(rs => { const now = performance.now(); for (let i = Math.max(0, "     \
	"rs.length - " STR(DG_GATE_RECORDS) "); i < rs.length; i++) s.mq[s.mk++ % "             \
	STR(DG_GATE_RECORDS) "] = [now, rs[i].target]; }).observe(document, {subtree: true, "   \
	"childList: true, attributes: true, characterData: true}); } return " SNAPSHOT "; })()"

/* Resolves [answer, ...snapshot] once the count reaches %lld with the
 * pointer at %d, %d and an animation frame ran after it (the message
 * posted from the frame's callback runs once the frame is committed):
 * answer 1 when the page changed nothing shown since the action's first
 * event (after event %lld), 3 when it did (a rendered element in the
 * viewport, or more changes than kept: its pixels are on their way), 2
 * when an animation or transition runs (its first frame may look like the
 * last, the next ones come later: a click starting a 200 ms transition
 * was answered with its start), or 0 after %d ms. With more events than
 * the ring holds, the oldest kept one stands for the first. */
#define WAIT_JS                                                                                \
	"new Promise(r => { const s = window.__deskgatePointer; if (!s) { r(null); return; } "   \
	"const want = %lld, x = %d, y = %d, k0 = %lld; const shown = n => { const e = "          \
	"n.nodeType === 1 ? n : n.parentElement; if (!e || !e.isConnected || (e.checkVisibility " \
	"&& !e.checkVisibility())) return false; const b = e.getBoundingClientRect(); return "   \
	"b.width > 0 && b.height > 0 && b.right > 0 && b.bottom > 0 && b.left < innerWidth && "  \
	"b.top < innerHeight; }; const changed = () => { const d = s.k - k0; if (d < 1) return " \
	"false; const from = s.ts[(d <= " STR(DG_GATE_RING) " ? k0 + 1 : s.k + 1) %% "          \
	STR(DG_GATE_RING) "]; const R = " STR(DG_GATE_RECORDS) "; if (s.mk > R && s.mq[s.mk "   \
	"%% R][0] >= from) return true; return s.mq.some(m => m[0] >= from && shown(m[1])); }; " \
	"let w; const t = setTimeout(() => { if (s.wake === w) s.wake = null; r([0, ...%s]); }, " \
	"%d); w = () => { if (s.n < want || s.x !== x || s.y !== y) return; s.wake = null; "     \
	"clearTimeout(t); requestAnimationFrame(() => { const c = new MessageChannel(); "        \
	"c.port1.onmessage = () => r([document.getAnimations().some(a => a.playState === "       \
	"'running') ? 2 : changed() ? 3 : 1, ...%s]); c.port2.postMessage(0); }); }; s.wake = " \
	"w; w(); })"

static void reset(struct dg_gate *g)
{
	g->gen++;
	g->ctx = 0;
	g->setting_up = false;
	g->count = -1;
	g->events = 0;
	g->view[2] = 0;
	if (g->waiting) {
		g->waiting = false;
		g->done(g->arg, DG_GATE_UNSURE);
	}
}

void dg_gate_init(struct dg_gate *g, struct dg_cdp *cdp, const uint64_t *presses)
{
	*g = (struct dg_gate){.cdp = cdp, .presses = presses, .count = -1};
}

static struct dg_gate *claim(void *arg, int status)
{
	uint64_t gen;
	struct dg_gate *g = dg_cdp_claim(arg, status, &gen);
	return g && g->gen == gen ? g : NULL;
}

static bool evaluate(struct dg_gate *g, const char *js, bool await, dg_cdp_done_fn fn)
{
	json_t *p = json_pack("{s:s, s:i, s:b, s:b}", "expression", js, "contextId", g->ctx,
			      "returnByValue", 1, "awaitPromise", await);
	return p && dg_cdp_page_send(g->cdp, "Runtime.evaluate", p, fn, g, g->gen);
}

/* An answer's snapshot (count, viewport and event number, from index i of
 * its array), or false when it is none (an error, an exception, the
 * document gone). */
static bool snapshot(struct dg_gate *g, int status, json_t *result, size_t i, long long *n,
		     long long *k)
{
	json_t *v = json_object_get(json_object_get(result, "result"), "value");
	if (status != 0 || json_object_get(result, "exceptionDetails") || !json_is_array(v) ||
	    json_array_size(v) != i + SNAPSHOT_N)
		return false;
	long long x[SNAPSHOT_N];
	for (size_t j = 0; j < SNAPSHOT_N; j++) {
		json_t *e = json_array_get(v, i + j);
		double d = json_is_number(e) ? json_number_value(e) : -1e18;
		if (!(d >= -1e6 && d <= 1e12))
			return false;
		x[j] = (long long)d;
	}
	if (x[0] < 0 || x[3] < 0 || x[4] < 0 || x[3] > 1000000 || x[4] > 1000000 || x[5] < 0)
		return false;
	*n = x[0];
	*k = x[5];
	if (x[3] > 0 && x[4] > 0 && (x[1] || x[2])) { /* known once an event gave the offset */
		g->view[0] = (int)x[1];
		g->view[1] = (int)x[2];
		g->view[2] = (int)x[3];
		g->view[3] = (int)x[4];
	}
	return true;
}

/* The count read between actions (or when the world was set up). Input
 * sent while the read was in flight may or may not be in it: then it is
 * not taken, and read again next time. */
static void counted(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_gate *g = claim(arg, status);
	if (!g)
		return;
	g->setting_up = false;
	long long n, k;
	if (!snapshot(g, status, result, 0, &n, &k)) {
		reset(g);
		return;
	}
	if (g->asked_presses == *g->presses) {
		g->count = n;
		g->events = k;
		g->presses_at = g->asked_presses;
	}
}

static void read_count(struct dg_gate *g)
{
	g->asked_presses = *g->presses;
	g->setting_up = evaluate(g, INSTALL_JS, false, counted);
	if (!g->setting_up)
		reset(g);
}

static void world_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_gate *g = claim(arg, status);
	if (!g)
		return;
	g->setting_up = false;
	g->ctx = dg_cdp_world_id(status, result);
	if (!g->ctx)
		return;
	snprintf(g->ctx_session, sizeof(g->ctx_session), "%s", dg_cdp_session_id(g->cdp));
	read_count(g);
}

/* Whether the world is there for the current page and document (a load
 * since it was made means another document: its world is gone); if not,
 * sets it up (for a later action). */
static bool ready(struct dg_gate *g)
{
	if (!dg_cdp_ready(g->cdp))
		return false;
	bool same_doc = g->ctx_loads == dg_cdp_loads(g->cdp);
	if (g->ctx && same_doc && strcmp(g->ctx_session, dg_cdp_session_id(g->cdp)) == 0)
		return !g->setting_up;
	if (g->setting_up && !g->ctx && same_doc)
		return false; /* the world is being made */
	reset(g);
	g->ctx_loads = dg_cdp_loads(g->cdp);
	g->setting_up = dg_cdp_world_create(g->cdp, DG_GATE_WORLD, world_done, g, g->gen);
	return false;
}

static void waited(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_gate *g = claim(arg, status);
	if (!g || !g->waiting)
		return;
	g->waiting = false;
	json_t *v = json_object_get(json_object_get(result, "result"), "value");
	json_t *said = json_array_get(v, 0);
	long long n, k;
	if (!snapshot(g, status, result, 1, &n, &k) || !json_is_integer(said)) {
		reset(g); /* the document went away (a click navigated): a new world next time */
		g->done(g->arg, DG_GATE_UNSURE);
		return;
	}
	json_int_t a = json_integer_value(said);
	if (a >= 1 && a <= 3 && g->want_presses == *g->presses) {
		g->count = n;
		g->events = k;
		g->presses_at = g->want_presses;
		g->done(g->arg, a == 1 ? DG_GATE_STILL : a == 3 ? DG_GATE_CHANGED : DG_GATE_UNSURE);
		return;
	}
	/* Not seen in time: events of this input may still arrive, so the
	 * count is read again between actions. */
	g->count = -1;
	g->done(g->arg, DG_GATE_UNSURE);
}

bool dg_gate_start(struct dg_gate *g, int x, int y, bool moved, dg_gate_done_fn done, void *arg)
{
	dg_gate_cancel(g);
	if (!ready(g) || g->count < 0)
		return false;
	uint64_t sent = *g->presses - g->presses_at;
	if (!moved && sent == 0)
		return false; /* nothing reaches the page */
	const int *v = g->view;
	if (v[2] > 0 && (x < v[0] || y < v[1] || x >= v[0] + v[2] || y >= v[1] + v[3]))
		return false; /* the browser's own window, not the page */
	char js[sizeof(WAIT_JS) + 2 * sizeof(SNAPSHOT) + 96];
	snprintf(js, sizeof(js), WAIT_JS, g->count + (long long)sent, x, y, g->events, SNAPSHOT,
		 v[2] > 0 ? DG_GATE_WAIT_MS : DG_GATE_FIRST_WAIT_MS, SNAPSHOT);
	g->want_presses = *g->presses;
	g->done = done;
	g->arg = arg;
	g->waiting = evaluate(g, js, true, waited);
	if (!g->waiting)
		reset(g);
	return g->waiting;
}

void dg_gate_cancel(struct dg_gate *g)
{
	if (!g->waiting)
		return;
	g->waiting = false;
	g->count = -1; /* what the dropped wait would have read */
	g->gen++;
	g->setting_up = false;
}

void dg_gate_idle(struct dg_gate *g)
{
	if (g->waiting || g->setting_up || g->count >= 0 || !ready(g))
		return;
	read_count(g);
}

bool dg_gate_prepare(struct dg_gate *g)
{
	dg_gate_cancel(g);
	if (ready(g) && g->count < 0)
		read_count(g);
	return g->setting_up;
}

bool dg_gate_preparing(const struct dg_gate *g)
{
	return g->setting_up;
}

bool dg_gate_first(const struct dg_gate *g)
{
	return g->view[2] == 0;
}
