/* ack: typing into the browser, paced in chunks that the page acknowledges
 * (see ack-priv.h for the contract and its bound).
 *
 * Steps of one typing, each a DevTools command on the current page's
 * session whose reply starts the next:
 *   world    Page.createIsolatedWorld on the main frame, once per page
 *            session and document (a context id that no longer answers is
 *            replaced);
 *   install  the counter and its keyup listener in that world (once per
 *            document: it checks for itself), answering the count so far
 *            and whether the page has the focus;
 *   chunk    up to DG_ACK_CHUNK characters typed, then a promise that
 *            resolves when the count reaches what was sent (or after the
 *            time left), repeated until the last character.
 * Every command carries a ticket with the typing's generation: a reply
 * after the typing ended (its bound passed) is dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"
#include "desktop/worker/ack-priv.h"

/* The counter, in the isolated world: keyups of text keys, on the window
 * in the capture phase (before the page's own listeners on its elements);
 * events a script dispatched (not isTrusted) do not count. */
#define INSTALL_JS                                                                              \
	"(() => { let s = window.__deskgateKeys; if (!s) { s = window.__deskgateKeys = "        \
	"{n: 0, wake: null}; const mods = ['Shift', 'Control', 'Alt', 'AltGraph', 'Meta', "     \
	"'CapsLock', 'NumLock']; addEventListener('keyup', e => { if (!e.isTrusted || "         \
	"e.ctrlKey || mods.includes(e.key)) return; s.n++; if (s.wake) s.wake(); }, true); } "  \
	"const a = document.activeElement; return [s.n, document.hasFocus() && !(a && "         \
	"(a.tagName === 'IFRAME' || a.tagName === 'FRAME'))]; })()"

/* Resolves with the count once it reaches %lld, or after %lld ms. */
#define WAIT_JS                                                                                 \
	"new Promise(r => { const s = window.__deskgateKeys; const t = setTimeout(() => { "     \
	"s.wake = null; r(s.n); }, %lld); s.wake = () => { if (s.n >= %lld) { clearTimeout(t); " \
	"s.wake = null; r(s.n); } }; s.wake(); })"

static void send_chunk(struct dg_ack *a);
static void wait_for(struct dg_ack *a, long long want);

static void end(struct dg_ack *a, const char *error)
{
	a->busy = false;
	a->gen++;
	free(a->ks);
	a->ks = NULL;
	a->done(a->arg, error);
}

/* Not counted from here on: the rest in one burst, done. */
static void uncounted(struct dg_ack *a)
{
	a->counting = false;
	if (a->next < a->n)
		a->keys(a->arg, a->ks + a->next, a->n - a->next);
	a->next = a->n;
	end(a, NULL);
}

/* Sends method on the current page's session with a ticket; false when it
 * could not be sent (the typing then goes on uncounted). */
static bool send(struct dg_ack *a, const char *method, json_t *params, dg_cdp_done_fn fn)
{
	return dg_cdp_page_send(a->cdp, method, params, fn, a, a->gen);
}

/* The typing a reply belongs to, or NULL when it ended meanwhile. */
static struct dg_ack *claim(void *arg, int status)
{
	uint64_t gen;
	struct dg_ack *a = dg_cdp_claim(arg, status, &gen);
	return a && a->busy && a->gen == gen ? a : NULL;
}

static bool evaluate(struct dg_ack *a, const char *js, bool await, dg_cdp_done_fn fn)
{
	json_t *p = json_pack("{s:s, s:i, s:b, s:b}", "expression", js, "contextId", a->ctx,
			      "returnByValue", 1, "awaitPromise", await);
	return p && send(a, "Runtime.evaluate", p, fn);
}

/* Runtime.evaluate's value, or NULL (an error, an exception). */
static json_t *value(int status, json_t *result)
{
	if (status != 0 || json_object_get(result, "exceptionDetails"))
		return NULL;
	return json_object_get(json_object_get(result, "result"), "value");
}

static void waited(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_ack *a = claim(arg, status);
	if (!a)
		return;
	json_t *v = value(status, result);
	if (!json_is_integer(v)) { /* the document went away: the page navigated */
		uncounted(a);
		return;
	}
	a->received = json_integer_value(v);
	if (a->received < a->want) {
		if (dg_now_ms() >= a->deadline) {
			dg_ack_advance(a);
			return;
		}
		wait_for(a, a->want);
		return;
	}
	if (a->next >= a->n) /* the last wait is for every key */
		end(a, NULL);
	else
		send_chunk(a);
}

/* Waits until the page's count reaches want. */
static void wait_for(struct dg_ack *a, long long want)
{
	char js[sizeof(WAIT_JS) + 64];
	long long left = a->deadline - dg_now_ms();
	a->want = want;
	snprintf(js, sizeof(js), WAIT_JS, left > 0 ? left : 0, want);
	if (!evaluate(a, js, true, waited))
		uncounted(a);
}

static void inserted(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result;
	struct dg_ack *a = claim(arg, status);
	if (!a)
		return;
	if (status != 0) {
		snprintf(a->error, sizeof(a->error),
			 "typing stopped: %zu of %zu characters typed; inserting the next %zu "
			 "failed: %s", a->next, a->n, a->inserting, error_message);
		end(a, a->error);
		return;
	}
	a->next += a->inserting;
	a->inserting = 0;
	if (a->next >= a->n)
		end(a, NULL);
	else
		send_chunk(a);
}

/* A run of characters outside the keymap, once the page has every key
 * before it: committed as an input method does (Input.insertText, whose
 * reply comes once the page has handled it). */
static void insert_run(struct dg_ack *a)
{
	char utf8[DG_ACK_INSERT_MAX * 4 + 1];
	size_t m = 0, len = 0;
	while (a->next + m < a->n && m < DG_ACK_INSERT_MAX &&
	       !dg_keysym_in_us_keymap(a->ks[a->next + m])) {
		uint32_t cp = dg_keysym_codepoint(a->ks[a->next + m]);
		if (cp < 0x80) {
			utf8[len++] = (char)cp;
		} else if (cp < 0x800) {
			utf8[len++] = (char)(0xc0 | cp >> 6);
			utf8[len++] = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			utf8[len++] = (char)(0xe0 | cp >> 12);
			utf8[len++] = (char)(0x80 | (cp >> 6 & 0x3f));
			utf8[len++] = (char)(0x80 | (cp & 0x3f));
		} else {
			utf8[len++] = (char)(0xf0 | cp >> 18);
			utf8[len++] = (char)(0x80 | (cp >> 12 & 0x3f));
			utf8[len++] = (char)(0x80 | (cp >> 6 & 0x3f));
			utf8[len++] = (char)(0x80 | (cp & 0x3f));
		}
		m++;
	}
	utf8[len] = '\0';
	a->inserting = m;
	json_t *p = json_pack("{s:s}", "text", utf8);
	if (!p || !send(a, "Input.insertText", p, inserted)) {
		a->inserting = 0;
		uncounted(a);
	}
}

/* One chunk, then a wait for the chunk before it: the page always has the
 * next chunk queued while it works through one (at most two in flight),
 * and the last wait is for every key. Characters outside the keymap go
 * as one insertion after the page has every key typed before them. */
static void send_chunk(struct dg_ack *a)
{
	if (!dg_keysym_in_us_keymap(a->ks[a->next])) {
		if (a->received < a->expect)
			wait_for(a, a->expect);
		else
			insert_run(a);
		return;
	}
	size_t m = 0;
	while (a->next + m < a->n && m < DG_ACK_CHUNK && dg_keysym_in_us_keymap(a->ks[a->next + m]))
		m++;
	a->keys(a->arg, a->ks + a->next, m);
	a->next += m;
	a->expect += (long long)m;
	wait_for(a, a->next < a->n ? a->expect - (long long)m : a->expect);
}

static void create_world(struct dg_ack *a);

static void installed(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_ack *a = claim(arg, status);
	if (!a)
		return;
	json_t *v = value(status, result);
	json_t *n = json_array_get(v, 0), *focus = json_array_get(v, 1);
	if (!json_is_integer(n) || !json_is_boolean(focus)) {
		if (a->ctx && status != 0) { /* a context of an earlier document: a new one */
			a->ctx = 0;
			create_world(a);
			return;
		}
		uncounted(a);
		return;
	}
	if (!json_is_true(focus)) {
		uncounted(a);
		return;
	}
	a->counting = true;
	a->expect = a->received = json_integer_value(n);
	send_chunk(a);
}

static void world_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_ack *a = claim(arg, status);
	if (!a)
		return;
	a->ctx = dg_cdp_world_id(status, result);
	if (!a->ctx) {
		uncounted(a);
		return;
	}
	snprintf(a->ctx_session, sizeof(a->ctx_session), "%s", dg_cdp_session_id(a->cdp));
	if (!evaluate(a, INSTALL_JS, false, installed))
		uncounted(a);
}

static void create_world(struct dg_ack *a)
{
	if (!dg_cdp_world_create(a->cdp, DG_ACK_WORLD, world_done, a, a->gen))
		uncounted(a);
}

/* Starts in a reply, never inside dg_ack_type (done must not run there). */
static void first_step(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result, (void)error_message;
	struct dg_ack *a = claim(arg, status);
	if (!a)
		return;
	if (a->ctx && strcmp(a->ctx_session, dg_cdp_session_id(a->cdp)) == 0) {
		if (!evaluate(a, INSTALL_JS, false, installed))
			uncounted(a);
		return;
	}
	a->ctx = 0;
	create_world(a);
}

int dg_ack_type(struct dg_ack *a, struct dg_cdp *cdp, const char *text, size_t len,
		dg_ack_keys_fn keys, dg_ack_done_fn done, void *arg, struct dg_err *err)
{
	if (a->busy)
		return dg_err_set(err, -EBUSY, "typing: another typing is in progress");
	size_t max = len + 1, n = 0;
	uint32_t *ks = calloc(max, sizeof(*ks));
	if (!ks)
		return dg_err_set(err, -ENOMEM, "typing: out of memory");
	int r = dg_text_to_keysyms(text, len, ks, max, &n, err);
	if (r) {
		free(ks);
		return r;
	}
	char session[sizeof(a->ctx_session)];
	memcpy(session, a->ctx_session, sizeof(session));
	*a = (struct dg_ack){.cdp = cdp, .gen = a->gen + 1, .busy = true, .ctx = a->ctx, .ks = ks,
			     .n = n, .keys = keys, .done = done, .arg = arg};
	memcpy(a->ctx_session, session, sizeof(session)); /* the world of the last typing */
	a->t0 = dg_now_ms();
	a->deadline = a->t0 + DG_ACK_BASE_MS + (long long)n * DG_ACK_PER_KEY_MS;
	/* A harmless round trip first, so that done never runs inside this call
	 * even when nothing can be counted. */
	json_t *p = cdp ? json_pack("{s:s, s:b}", "expression", "0", "returnByValue", 1) : NULL;
	if (p && send(a, "Runtime.evaluate", p, first_step))
		return 0;
	/* No browser, or no page session: typed at once, uncounted; done runs
	 * from dg_ack_advance. */
	a->counting = false;
	keys(arg, ks, n);
	a->next = n;
	a->deadline = a->t0;
	return 0;
}

int dg_ack_advance(struct dg_ack *a)
{
	if (!a->busy)
		return -1;
	long long t = dg_now_ms();
	if (a->next >= a->n && !a->counting) { /* typed uncounted (no session at the start) */
		end(a, NULL);
		return 0;
	}
	if (t < a->deadline)
		return (int)(a->deadline - t);
	if (a->next == 0)
		snprintf(a->error, sizeof(a->error),
			 "not typed: the page did not answer within %lld ms (the bound: %d ms + %d "
			 "ms a character)", t - a->t0, DG_ACK_BASE_MS, DG_ACK_PER_KEY_MS);
	else
		snprintf(a->error, sizeof(a->error),
			 "typing stopped: %zu of %zu characters sent, but the page had received only "
			 "%lld of their keys after %lld ms (the bound: %d ms + %d ms a character)",
			 a->next, a->n, a->received - (a->expect - (long long)a->next), t - a->t0,
			 DG_ACK_BASE_MS, DG_ACK_PER_KEY_MS);
	end(a, a->error);
	return 0;
}

void dg_ack_free(struct dg_ack *a)
{
	free(a->ks);
	a->ks = NULL;
	a->busy = false;
}
