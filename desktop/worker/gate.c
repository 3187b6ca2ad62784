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

#include "base/base.h"
#include "desktop/worker/gate-priv.h"
#include "gate-js.h"

/* The listener (gate.js, embedded as dg_gate_js): called with the gate's
 * limits, it installs itself once per document and answers the snapshot
 * [count, viewport x, y, width, height, event number]; the viewport in
 * screen pixels is the last event's screen minus client position
 * (unknown, 0 0, before the first). */
#define SNAPSHOT_N 6
#define INSTALL_FMT "(%s)(%d, %d, %d, %d)"

/* The wait (gate.js's wait(want, x, y, k0, ms)): resolves [answer,
 * ...snapshot], answer 0 not seen in time, 1 nothing shown changed, 2
 * animating or maybe drawn unseen (gate.js), 3 something shown changed;
 * null when the listener is gone (another document). */
#define WAIT_FMT                                                                               \
	"window.__deskgatePointer ? window.__deskgatePointer.wait(%lld, %d, %d, %lld, %d) : null"

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
	static char install[sizeof(dg_gate_js) + sizeof(INSTALL_FMT) + 4 * 12];
	if (!install[0])
		snprintf(install, sizeof(install), INSTALL_FMT, dg_gate_js, DG_GATE_RING,
			 DG_GATE_RECORDS, DG_GATE_RULES, DG_GATE_MEDIA);
	g->asked_presses = *g->presses;
	g->setting_up = evaluate(g, install, false, counted);
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
	if (a >= 1 && a <= 3)
		g->lag_ms = dg_gate_lag_fold(g->lag_ms, dg_now_ms() - g->asked_at);
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
	char js[sizeof(WAIT_FMT) + 5 * 21];
	snprintf(js, sizeof(js), WAIT_FMT, g->count + (long long)sent, x, y, g->events,
		 dg_gate_wait_ms(g->lag_ms, v[2] == 0));
	g->want_presses = *g->presses;
	g->asked_at = dg_now_ms();
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
	return g->view[2] == 0 || (g->count == 0 && *g->presses != g->presses_at);
}

int dg_gate_first_quiet_ms(long long answer_ms)
{
	if (answer_ms < DG_GATE_FIRST_QUIET_MS)
		return DG_GATE_FIRST_QUIET_MS;
	return answer_ms > DG_GATE_FIRST_QUIET_MAX_MS ? DG_GATE_FIRST_QUIET_MAX_MS : (int)answer_ms;
}

int dg_gate_lag_fold(int peak_ms, long long sample_ms)
{
	if (sample_ms < 0)
		sample_ms = 0;
	if (sample_ms > DG_GATE_CHANGE_WAIT_MAX_MS)
		sample_ms = DG_GATE_CHANGE_WAIT_MAX_MS; /* past every bound it feeds */
	int decayed = peak_ms - peak_ms / 4;
	return sample_ms > decayed ? (int)sample_ms : decayed;
}

static int grown(int base, long long lag_ms, int max)
{
	long long ms = lag_ms * DG_GATE_LAG_FACTOR;
	if (ms < base)
		ms = base;
	return ms > max ? max : (int)ms;
}

int dg_gate_wait_ms(int lag_ms, bool first)
{
	return grown(first ? DG_GATE_FIRST_WAIT_MS : DG_GATE_WAIT_MS, lag_ms, DG_GATE_WAIT_MAX_MS);
}

int dg_gate_change_wait_ms(long long answer_ms, int paint_lag_ms)
{
	long long lag = answer_ms > paint_lag_ms ? answer_ms : paint_lag_ms;
	return grown(DG_GATE_CHANGE_WAIT_MS, lag, DG_GATE_CHANGE_WAIT_MAX_MS);
}
