/* fuzz_adapt: one agent message through the wire adapters (actions/actions.h):
 * wire detection, the Anthropic computer tool, OpenAI computer use (preview
 * and batched) and canonical actions, then the answer built for it.
 *
 * The input is the message text, as the session WebSocket receives it. It
 * is parsed twice, as the gateway would for two sessions: the model told
 * about the desktop's own size, and about a smaller display (coordinates
 * scaled). Checked, besides the sanitizers:
 *  - the result code is one the header names; on error no action is kept;
 *  - every translated action is accepted by dg_action_parse_obj for the
 *    desktop's size (the header's contract for actions[i]);
 *  - dg_adapt_answer builds an answer for the outcomes the gateway gives
 *    (all ran; refused at the last; failed; a parse error), with hostile
 *    reason and URL strings taken from the input, and the answer is a JSON
 *    value that dumps. */
#include <errno.h>

#include "actions/actions.h"
#include "fuzz_common.h"

#define DESK_W 1280
#define DESK_H 800

/* Eight bytes are enough: the answer base64-encodes them and does not
 * decode the image. */
static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

static void answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	json_t *out = NULL;
	struct dg_err err = {{0}};
	int r = dg_adapt_answer(a, o, &out, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG, "dg_adapt_answer: %d", r);
	if (r == 0) {
		DG_FUZZ_CHECK(out != NULL, "answer 0 without a value");
		DG_FUZZ_CHECK(a->wire != DG_WIRE_CANONICAL, "a canonical message was answered");
		char *s = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
		DG_FUZZ_CHECK(s != NULL, "the answer does not dump");
		free(s);
		json_decref(out);
	} else {
		DG_FUZZ_CHECK(out == NULL, "an error with an answer");
	}
}

static void one(const char *msg, size_t len, const struct dg_adapt_scale *scale,
		const char *hostile)
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
	if (r != 0) {
		DG_FUZZ_CHECK(a.n == 0, "an error that keeps %d actions", a.n);
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
	bool cursor_q = false;
	for (int i = 0; i < a.n; i++) {
		struct dg_action act;
		int k = dg_action_parse_obj(a.actions[i], DESK_W, DESK_H, &act, &err);
		char *s = json_dumps(a.actions[i], JSON_COMPACT | JSON_SORT_KEYS);
		DG_FUZZ_CHECK(k == 0, "translated action %d is not canonical: %s: %s", i, err.msg,
			      s ? s : "?");
		free(s);
		DG_FUZZ_CHECK(a.wire_actions[i] != NULL, "no wire action %d", i);
		DG_FUZZ_CHECK(memchr(a.name[i], '\0', sizeof(a.name[i])) != NULL, "name %d unterminated",
			      i);
		cursor_q = act.type == DG_ACTION_CURSOR_POSITION;
		dg_action_free(&act);
	}
	DG_FUZZ_CHECK(memchr(a.call_id, '\0', sizeof(a.call_id)) != NULL, "call_id unterminated");

	/* All ran. */
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

	static const struct dg_adapt_scale same = {DESK_W, DESK_H, 0, 0, NULL};
	static const struct dg_adapt_scale scaled = {DESK_W, DESK_H, 1024, 640, NULL};
	one(msg, size, &same, hostile);
	one(msg, size, &scaled, hostile);

	free(hostile);
	free(msg);
	return 0;
}
