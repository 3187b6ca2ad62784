/* fuzz_adapt: one agent message through the wire adapters (actions/actions.h):
 * wire detection, the Anthropic computer tool and toolsets, the browser
 * toolset, OpenAI computer use (preview and batched) and canonical actions;
 * resolving what waits for the page's geometry; then the answer built for
 * it.
 *
 * The input is the message text, as the session WebSocket receives it. It
 * is parsed twice, as the gateway would for two sessions: the model told
 * about the desktop's own size, and about a smaller display (coordinates
 * scaled). Checked, besides the sanitizers:
 *  - the result code is one the header names; on error no action is kept
 *    and nothing is pending;
 *  - a pending call (a browser member waiting for the page's geometry) is
 *    one action with no canonical object or text yet, and says what to ask
 *    the browser (dg_adapt_resolve_wants);
 *  - a pending call or an action on an element is resolved with a view
 *    chosen from the input (a hash of it: viewport, element point, on the
 *    screen or off it, with edges favoured): a refusal has a message and
 *    leaves the call as it was; after success the call is one whole action
 *    whose object is canonical, whose text parses again to the same action
 *    (act[0]), and that wants nothing more; then with a view that fits
 *    every point, so that the success path is taken whenever it can be;
 *  - every translated action is accepted by dg_action_parse_obj for the
 *    desktop's size (the header's contract for actions[i]);
 *  - dg_adapt_answer builds an answer for the outcomes the gateway gives
 *    (all ran, once whole; refused at the last; failed; a parse error),
 *    with hostile reason, URL, body and tab strings taken from the input,
 *    and the answer is a JSON value that dumps; a browser member's answer
 *    names its toolset, marks exactly one tab active and never reports an
 *    empty state_changes. */
#include <errno.h>

#include "actions/actions.h"
#include "fuzz_common.h"

#define DESK_W 1280
#define DESK_H 800

/* Eight bytes are enough: the answer base64-encodes them and does not
 * decode the image. */
static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

/* A browser member's tool_result: toolset_name "browser"; its
 * browser_state (when tabs were given) lists tabs with exactly one active
 * when any, and state_changes only when there is one. */
static void browser_answer_check(const json_t *out, const struct dg_adapt_outcome *o)
{
	const json_t *ts = json_object_get(out, "toolset_name");
	DG_FUZZ_CHECK(json_is_string(ts) && strcmp(json_string_value(ts), "browser") == 0,
		      "a browser answer without toolset_name \"browser\"");
	const json_t *content = json_object_get(out, "content");
	const json_t *st = NULL;
	for (size_t i = 0; i < json_array_size(content); i++) {
		const json_t *b = json_array_get(content, i);
		const char *type = json_string_value(json_object_get(b, "type"));
		if (type && strcmp(type, "browser_state") == 0)
			st = b;
	}
	DG_FUZZ_CHECK((st != NULL) == (o->tabs != NULL), "browser_state %s but tabs %s",
		      st ? "given" : "missing", o->tabs ? "given" : "not");
	if (!st)
		return;
	const json_t *tabs = json_object_get(st, "tabs");
	DG_FUZZ_CHECK(json_is_array(tabs), "browser_state without tabs");
	size_t active = 0;
	for (size_t i = 0; i < json_array_size(tabs); i++)
		active += json_is_true(json_object_get(json_array_get(tabs, i), "active"));
	DG_FUZZ_CHECK(json_array_size(tabs) == 0 || active == 1, "%zu of %zu tabs active", active,
		      json_array_size(tabs));
	const json_t *changes = json_object_get(st, "state_changes");
	DG_FUZZ_CHECK(!changes || json_array_size(changes) > 0, "an empty state_changes");
}

static void answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	json_t *out = NULL;
	struct dg_err err = {{0}};
	int r = dg_adapt_answer(a, o, &out, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG, "dg_adapt_answer: %d", r);
	if (r == 0) {
		DG_FUZZ_CHECK(out != NULL, "answer 0 without a value");
		DG_FUZZ_CHECK(a->wire != DG_WIRE_CANONICAL, "a canonical message was answered");
		if (a->browser && a->wire == DG_WIRE_ANTHROPIC)
			browser_answer_check(out, o);
		char *s = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
		DG_FUZZ_CHECK(s != NULL, "the answer does not dump");
		free(s);
		json_decref(out);
	} else {
		DG_FUZZ_CHECK(out == NULL, "an error with an answer");
	}
}

/* A small generator seeded from the input (FNV-1a): the views the
 * browser answers with, chosen by the fuzzer through the message. */
struct rnd {
	uint64_t s;
};

static uint32_t rnd_next(struct rnd *g)
{
	g->s = g->s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(g->s >> 33);
}

/* 0..n-1, n > 0; a third of the time an edge: 0, n-1. */
static int rnd_in(struct rnd *g, int n)
{
	uint32_t k = rnd_next(g);
	if (k % 6 == 0)
		return 0;
	if (k % 6 == 1)
		return n - 1;
	return (int)(rnd_next(g) % (uint32_t)n);
}

/* A view as a browser might answer: mostly on the screen, sometimes one
 * past its edge or outside it altogether. */
static struct dg_browser_view rnd_view(struct rnd *g)
{
	struct dg_browser_view v;
	memset(&v, 0, sizeof(v));
	v.vp_x = rnd_in(g, DESK_W);
	v.vp_y = rnd_in(g, DESK_H);
	v.vp_w = 1 + rnd_in(g, DESK_W - v.vp_x);
	v.vp_h = 1 + rnd_in(g, DESK_H - v.vp_y);
	v.has_point = rnd_next(g) % 4 != 0;
	v.px = rnd_in(g, DESK_W);
	v.py = rnd_in(g, DESK_H);
	switch (rnd_next(g) % 10) {
	case 0:
		v.vp_w++; /* one past the screen's edge, or inside it */
		break;
	case 1:
		v.px = DESK_W; /* the point one past the screen */
		break;
	case 2:
		v.vp_x = -1 - rnd_in(g, 100);
		break;
	case 3:
		v.vp_h = 0;
		break;
	case 4:
		v.py = -(int)(rnd_next(g) & 0x7fffffff) - 1;
		break;
	}
	return v;
}

/* The call is whole: one canonical action per slot, its object canonical
 * for the desktop, its text (what goes to the worker) parsing to the same
 * action as act[i], and nothing pending. */
static void check_whole(const struct dg_adapted *a, struct dg_err *err)
{
	DG_FUZZ_CHECK(!a->pending, "whole but pending");
	DG_FUZZ_CHECK(a->n >= 1 && a->n <= DG_ADAPT_ACTIONS_MAX, "n = %d", a->n);
	for (int i = 0; i < a->n; i++) {
		DG_FUZZ_CHECK(a->actions[i] != NULL, "action %d of %d has no object", i, a->n);
		DG_FUZZ_CHECK(a->text[i] != NULL && strlen(a->text[i]) == a->text_len[i],
			      "action %d: text", i);
		struct dg_action act;
		int k = dg_action_parse_obj(a->actions[i], DESK_W, DESK_H, &act, err);
		char *s = json_dumps(a->actions[i], JSON_COMPACT | JSON_SORT_KEYS);
		DG_FUZZ_CHECK(k == 0, "translated action %d is not canonical: %s: %s", i, err->msg,
			      s ? s : "?");
		char *c = dg_action_canonical(&act, NULL);
		DG_FUZZ_CHECK(s && c && strcmp(s, c) == 0, "action %d not in canonical form: %s", i,
			      s ? s : "?");
		free(c);
		free(s);
		dg_action_free(&act);
		k = dg_action_parse(a->text[i], a->text_len[i], DESK_W, DESK_H, &act, err);
		DG_FUZZ_CHECK(k == 0, "text %d does not parse again: %s: %s", i, err->msg, a->text[i]);
		c = dg_action_canonical(&act, NULL);
		char *kept = dg_action_canonical(&a->act[i], NULL);
		DG_FUZZ_CHECK(c && kept && strcmp(c, a->text[i]) == 0 && strcmp(kept, a->text[i]) == 0,
			      "action %d: text, parse and act[%d] differ: %s", i, i, a->text[i]);
		free(c);
		free(kept);
		dg_action_free(&act);
		DG_FUZZ_CHECK(a->wire_actions[i] != NULL, "no wire action %d", i);
	}
}

/* The call is pending: one action without its object or text yet, which
 * wants the browser's answer. */
static void check_pending(const struct dg_adapted *a)
{
	struct dg_resolve_req q;
	DG_FUZZ_CHECK(a->n == 1, "pending with %d actions", a->n);
	DG_FUZZ_CHECK(a->browser && a->wire == DG_WIRE_ANTHROPIC, "pending but not a browser member");
	DG_FUZZ_CHECK(a->actions[0] == NULL && a->text[0] == NULL, "pending with an action");
	DG_FUZZ_CHECK(a->wire_actions[0] != NULL && a->bcall.tmpl != NULL, "pending without its input");
	DG_FUZZ_CHECK(memchr(a->name[0], '\0', sizeof(a->name[0])) && a->name[0][0], "pending: name");
	DG_FUZZ_CHECK(dg_adapt_resolve_wants(a, 0, &q), "pending but wanting nothing");
	DG_FUZZ_CHECK(memchr(q.tab, '\0', sizeof(q.tab)) != NULL, "tab unterminated");
	DG_FUZZ_CHECK(q.ref >= 0 && q.ref <= DG_ACTION_REF_MAX, "ref %d", q.ref);
	DG_FUZZ_CHECK(q.scroll == (q.ref != 0) && (!q.hit || q.ref != 0), "scroll %d, hit %d, ref %d",
		      (int)q.scroll, (int)q.hit, q.ref);
	DG_FUZZ_CHECK(!dg_adapt_resolve_wants(a, 1, &q), "action 1 of a pending call");
}

/* Resolves action i with v; checks what is left either way. */
static void resolve_one(struct dg_adapted *a, int i, const struct dg_browser_view *v)
{
	struct dg_err err = {{0}};
	bool was = a->pending;
	int r = dg_adapt_resolve(a, i, v, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM, "dg_adapt_resolve: %d", r);
	if (r != 0) {
		DG_FUZZ_CHECK(err.msg[0] != '\0', "resolve refused without a message");
		DG_FUZZ_CHECK(a->pending == was, "a refused resolve changed pending");
		if (was)
			check_pending(a);
		return;
	}
	struct dg_resolve_req q;
	DG_FUZZ_CHECK(!dg_adapt_resolve_wants(a, i, &q), "resolved and still wanting");
	if (was) {
		DG_FUZZ_CHECK(a->n == 1, "resolved into %d actions", a->n);
		DG_FUZZ_CHECK(a->actions[0] != NULL, "resolved without an object");
	}
	check_whole(a, &err);
}

static void one(const char *msg, size_t len, const struct dg_adapt_scale *scale,
		const char *hostile, struct rnd *g, const json_t *tabs, const json_t *before)
{
	struct dg_adapted a;
	struct dg_err err = {{0}};
	int r = dg_adapt_parse(msg, len, scale, 640, 400, &a, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM, "dg_adapt_parse: %d", r);

	struct dg_adapt_outcome o;
	memset(&o, 0, sizeof(o));
	o.png = png;
	o.png_len = sizeof(png);
	o.url = hostile;
	o.tabs = tabs;
	o.tabs_before = before;
	if (r != 0) {
		DG_FUZZ_CHECK(a.n == 0, "an error that keeps %d actions", a.n);
		DG_FUZZ_CHECK(!a.pending && a.bcall.tmpl == NULL, "an error that keeps a pending call");
		DG_FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
		/* As the gateway answers a message that did not parse. */
		o.error = err.msg;
		answer(&a, &o);
		dg_adapted_free(&a);
		return;
	}
	if (a.wire == DG_WIRE_HELLO) {
		/* The agent's hello: no action, only event bits that exist;
		 * the gateway answers it, never dg_adapt_answer. */
		DG_FUZZ_CHECK(a.n == 0, "a hello with %d actions", a.n);
		DG_FUZZ_CHECK((a.events & ~((1u << DG_AGENT_EVENT_KINDS) - 1)) == 0, "events 0x%x",
			      a.events);
		for (unsigned bit = 1; bit < 1u << DG_AGENT_EVENT_KINDS; bit <<= 1)
			DG_FUZZ_CHECK(dg_agent_event_name(bit) != NULL, "event bit 0x%x unnamed", bit);
		answer(&a, &o); /* refused: -EINVAL */
		dg_adapted_free(&a);
		return;
	}
	DG_FUZZ_CHECK(a.n >= 1 && a.n <= DG_ADAPT_ACTIONS_MAX, "n = %d", a.n);
	DG_FUZZ_CHECK(a.wire != DG_WIRE_UNKNOWN, "parsed without a wire format");
	DG_FUZZ_CHECK(dg_wire_name(a.wire) != NULL, "wire %d", (int)a.wire);
	DG_FUZZ_CHECK(memchr(a.call_id, '\0', sizeof(a.call_id)) != NULL, "call_id unterminated");
	for (int i = 0; i < a.n; i++)
		DG_FUZZ_CHECK(memchr(a.name[i], '\0', sizeof(a.name[i])) != NULL, "name %d unterminated",
			      i);
	if (a.pending) {
		check_pending(&a);
		/* The browser's answer: one chosen from the input, then one that
		 * fits every viewport point the members take, with the element's
		 * point, until the call is whole. */
		struct dg_browser_view fits = {0, 0, DESK_W, DESK_H, true, DESK_W - 1, DESK_H - 1};
		for (int k = 0; k < 2 && a.pending; k++) {
			struct dg_browser_view v = k == 0 ? rnd_view(g) : fits;
			resolve_one(&a, 0, &v);
		}
		if (a.pending) {
			/* A point past the largest viewport, a region past it: the
			 * runner answers it as failed at the first. */
			o.done = 0;
			o.error = hostile;
			answer(&a, &o);
			dg_adapted_free(&a);
			return;
		}
	} else {
		check_whole(&a, &err);
		/* Canonical actions on an element wait for its point too. */
		for (int i = 0; i < a.n; i++) {
			struct dg_resolve_req q;
			if (dg_adapt_resolve_wants(&a, i, &q)) {
				DG_FUZZ_CHECK(q.ref >= 1 && q.scroll && q.tab[0] == '\0', "ref %d", q.ref);
				struct dg_browser_view v = rnd_view(g);
				resolve_one(&a, i, &v);
			}
		}
	}
	bool cursor_q = false;
	for (int i = 0; i < a.n; i++)
		cursor_q = a.act[i].type == DG_ACTION_CURSOR_POSITION;

	/* All ran; a browser member's answer text is the body. */
	o.body = hostile;
	o.ok = true;
	o.done = a.n;
	if (cursor_q) {
		o.has_cursor = true;
		o.cursor_x = DESK_W - 1;
		o.cursor_y = 0;
	}
	o.text = hostile;
	answer(&a, &o);
	/* Refused at the last action, with the policy's words (which may quote
	 * a page's URL: hostile). */
	memset(&o, 0, sizeof(o));
	o.done = a.n - 1;
	o.verdict = "deny";
	o.rule = hostile;
	o.reason = hostile;
	o.png = png;
	o.png_len = sizeof(png);
	o.tabs = tabs;
	o.tabs_before = before;
	answer(&a, &o);
	/* Failed at the first. */
	o.verdict = o.rule = o.reason = NULL;
	o.done = 0;
	o.error = hostile;
	o.url = hostile;
	answer(&a, &o);
	dg_adapted_free(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *msg = dg_fuzz_dup(data, size);
	/* The strings the answers carry come from the input too: its last
	 * bytes, up to a NUL (any bytes: control characters, invalid UTF-8). */
	size_t tail = size > 300 ? 300 : size;
	char *hostile = dg_fuzz_cstr(data + size - tail, tail);

	struct rnd g = {14695981039346656037ull};
	for (size_t i = 0; i < size; i++)
		g.s = (g.s ^ data[i]) * 1099511628211ull;

	/* The worker's tab list: a title and URL from the input (the worker
	 * reads them from pages: valid UTF-8, anything else), an id the page
	 * cannot choose, and entries that are not tabs; before, the first
	 * tab, or all of them. */
	json_t *title = json_string(hostile);
	json_t *tabs = json_pack("[{s:s, s:o, s:O, s:b}, {s:s, s:s, s:s, s:b}, {s:i}, s]", "id", "T1",
				 "title", title ? title : json_string(""), "url",
				 title ? title : json_null(), "active", (int)(g.s & 1), "id", "T2",
				 "title", "", "url", "about:blank", "active", (int)(g.s & 2), "id", 3,
				 "junk");
	json_t *before = g.s & 4 ? json_pack("[s]", "T1") : json_pack("[s, s]", "T1", "T2");
	DG_FUZZ_CHECK(tabs && before, "out of memory");

	/* Session tools lists: none, and one disabling a few members. */
	static struct dg_toolsets ts;
	static bool ts_done;
	if (!ts_done) {
		json_t *list = json_loads("[{\"type\":\"browser_toolset_20260801\",\"configs\":{"
					  "\"javascript_exec\":{\"enabled\":false},\"file_upload\":"
					  "{\"enabled\":false}}},{\"type\":\"computer_toolset_20260801\","
					  "\"configs\":{\"zoom\":{\"enabled\":false}}}]",
					  0, NULL);
		struct dg_err e;
		DG_FUZZ_CHECK(list && dg_toolsets_parse(list, &ts, &e) == 0, "the tools list");
		json_decref(list);
		ts_done = true;
	}
	static const struct dg_adapt_scale same = {DESK_W, DESK_H, 0, 0, NULL};
	struct dg_adapt_scale scaled = {DESK_W, DESK_H, 1024, 640, &ts};
	one(msg, size, &same, hostile, &g, tabs, before);
	one(msg, size, &scaled, hostile, &g, NULL, NULL);

	json_decref(tabs);
	json_decref(before);
	free(hostile);
	free(msg);
	return 0;
}
