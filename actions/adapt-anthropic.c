/* adapt-anthropic: the Anthropic computer tool's input (tool_use blocks
 * and bare inputs), field by field, into canonical actions (see adapt.c
 * for the shared checks and the contract).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"
#include "actions/adapt-priv.h"

/* Anthropic's `text` on click, drag and scroll actions (and the browser
 * toolset's `modifiers`): one chord of modifier keys in xdotool syntax. */
int dg_adapt_mods(struct dg_adapt_ctx *c, const char *where, const json_t *v, unsigned *mods)
{
	const char *s = NULL;
	size_t len = 0;
	struct dg_err e;
	struct dg_chord chords[DG_ACTION_CHORDS_MAX];
	int n = 0;
	char name[DG_KEYSYM_NAME_BUF];
	int rc = dg_adapt_string(c, where, v, &s, &len);
	if (rc < 0)
		return rc;
	if (memchr(s, '\0', len))
		return dg_adapt_fail(c, -EINVAL, where, "contains NUL");
	if (dg_keys_parse(s, chords, DG_ACTION_CHORDS_MAX, &n, &e) < 0)
		return dg_adapt_fail(c, -EINVAL, where, "%s", e.msg);
	if (n != 1)
		return dg_adapt_fail(c, -EINVAL, where,
			     "modifiers held during the action are one chord (\"shift\", "
			     "\"ctrl+shift\"), got %d chords", n);
	*mods = 0;
	for (int k = 0; k < chords[0].n; k++) {
		unsigned bit = dg_adapt_modifier_bit(chords[0].keysyms[k]);
		if (!bit) {
			if (dg_keysym_name(chords[0].keysyms[k], name, sizeof(name)) < 0)
				snprintf(name, sizeof(name), "0x%x", (unsigned)chords[0].keysyms[k]);
			return dg_adapt_fail(c, -EINVAL, where,
				     "%s is not a modifier key (held during the action: ctrl, shift, "
				     "alt, super, meta)", name);
		}
		*mods |= bit;
	}
	return 0;
}

/* ---- Anthropic ------------------------------------------------------------------- */

enum afield { A_COORD, A_START, A_TEXT, A_DIR, A_AMOUNT, A_DURATION, A_REGION, A_REPEAT, A_N };

static const char *const afield_names[A_N] = {
	[A_COORD] = "coordinate",      [A_START] = "start_coordinate", [A_TEXT] = "text",
	[A_DIR] = "scroll_direction",  [A_AMOUNT] = "scroll_amount",   [A_DURATION] = "duration",
	[A_REGION] = "region",         [A_REPEAT] = "repeat",
};

enum akind { AK_KEY, AK_TYPE, AK_MOVE, AK_CLICK, AK_DRAG, AK_DOWN, AK_UP, AK_SCROLL, AK_HOLD,
	     AK_WAIT, AK_SCREENSHOT, AK_CURSOR, AK_ZOOM };

static const struct {
	const char *name;
	enum akind kind;
	const char *button; /* clicks */
	int count;          /* clicks */
	unsigned allowed, required;
} anthropic_actions[] = {
	{"key", AK_KEY, NULL, 0, B(A_TEXT) | B(A_REPEAT), B(A_TEXT)},
	{"type", AK_TYPE, NULL, 0, B(A_TEXT), B(A_TEXT)},
	{"mouse_move", AK_MOVE, NULL, 0, B(A_COORD), B(A_COORD)},
	{"left_click", AK_CLICK, "left", 1, B(A_COORD) | B(A_TEXT), 0},
	{"right_click", AK_CLICK, "right", 1, B(A_COORD) | B(A_TEXT), 0},
	{"middle_click", AK_CLICK, "middle", 1, B(A_COORD) | B(A_TEXT), 0},
	{"double_click", AK_CLICK, "left", 2, B(A_COORD) | B(A_TEXT), 0},
	{"triple_click", AK_CLICK, "left", 3, B(A_COORD) | B(A_TEXT), 0},
	{"left_click_drag", AK_DRAG, NULL, 0, B(A_COORD) | B(A_START) | B(A_TEXT), B(A_COORD)},
	{"left_mouse_down", AK_DOWN, NULL, 0, B(A_COORD), 0},
	{"left_mouse_up", AK_UP, NULL, 0, B(A_COORD), 0},
	{"scroll", AK_SCROLL, NULL, 0, B(A_COORD) | B(A_DIR) | B(A_AMOUNT) | B(A_TEXT),
	 B(A_DIR) | B(A_AMOUNT)},
	{"hold_key", AK_HOLD, NULL, 0, B(A_TEXT) | B(A_DURATION), B(A_TEXT) | B(A_DURATION)},
	{"wait", AK_WAIT, NULL, 0, B(A_DURATION), B(A_DURATION)},
	{"screenshot", AK_SCREENSHOT, NULL, 0, 0, 0},
	{"cursor_position", AK_CURSOR, NULL, 0, 0, 0},
	{"zoom", AK_ZOOM, NULL, 0, B(A_REGION), B(A_REGION)},
};

/* The pointer position an action acts at: its coordinate, or the cursor. */
static int anthropic_at(struct dg_adapt_ctx *c, const json_t *in, unsigned present, int *x, int *y)
{
	if (present & B(A_COORD))
		return dg_adapt_pair(c, ".coordinate", json_object_get(in, "coordinate"), x, y);
	*x = c->cx;
	*y = c->cy;
	return 0;
}

static int anthropic_region(struct dg_adapt_ctx *c, const json_t *v, json_t **out)
{
	char where[32], val[DG_SHOW_VALUE_BUF];
	int r[4] = {0, 0, 0, 0};
	json_int_t m[4] = {0, 0, 0, 0};
	*out = NULL;
	if (!json_is_array(v) || json_array_size(v) != 4) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".region", "%s is not an array [x1, y1, x2, y2]", val);
	}
	for (int k = 0; k < 4; k++) {
		snprintf(where, sizeof(where), ".region[%d]", k);
		int rc = dg_adapt_coord(c, where, json_array_get(v, (size_t)k), k % 2 == 0, k >= 2, &r[k]);
		if (rc < 0)
			return rc;
		rc = dg_adapt_int(c, where, json_array_get(v, (size_t)k), &m[k]);
		if (rc < 0)
			return rc;
	}
	if (m[2] <= m[0])
		return dg_adapt_fail(c, -EINVAL, ".region", "x2 (%" JSON_INTEGER_FORMAT
			     ") must be greater than x1 (%" JSON_INTEGER_FORMAT ")", m[2], m[0]);
	if (m[3] <= m[1])
		return dg_adapt_fail(c, -EINVAL, ".region", "y2 (%" JSON_INTEGER_FORMAT
			     ") must be greater than y1 (%" JSON_INTEGER_FORMAT ")", m[3], m[1]);
	/* Scaling down can fold a thin region onto one desktop pixel column:
	 * keep at least one pixel (x1 <= desk_w - 1, so x1 + 1 fits). */
	if (r[2] <= r[0])
		r[2] = r[0] + 1;
	if (r[3] <= r[1])
		r[3] = r[1] + 1;
	*out = json_pack("[iiii]", r[0], r[1], r[2], r[3]);
	return *out ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

/* key with `repeat` (computer toolset): the chords of s pressed `repeat`
 * times, as one canonical key action of the chords written out, so the
 * policy decides every press; 1..DG_ACTION_CHORDS_MAX chords in all. */
int dg_adapt_key_repeat(struct dg_adapt_ctx *c, const char *s, size_t len, const json_t *rv,
			struct dg_action *out)
{
	static const struct dg_adapt_rename map[] = {{"keys", "text"}};
	struct dg_chord chords[DG_ACTION_CHORDS_MAX];
	struct dg_err e;
	json_int_t r = 0;
	int n = 0;
	int rc = dg_adapt_int(c, ".repeat", rv, &r);
	if (rc < 0)
		return rc;
	if (r < 1 || r > DG_ACTION_CHORDS_MAX)
		return dg_adapt_fail(c, -EINVAL, ".repeat", "%" JSON_INTEGER_FORMAT
			     " is out of range [1, %d]", r, DG_ACTION_CHORDS_MAX);
	/* Bad text is the canonical parser's to name; a count needs it good. */
	if (len <= DG_ACTION_KEYS_MAX && !memchr(s, '\0', len) &&
	    dg_keys_parse(s, chords, DG_ACTION_CHORDS_MAX, &n, &e) == 0 &&
	    (long long)n * r > DG_ACTION_CHORDS_MAX)
		return dg_adapt_fail(c, -EINVAL, ".repeat", "%" JSON_INTEGER_FORMAT " times %d chords "
			     "is over the limit of %d chords", r, n, DG_ACTION_CHORDS_MAX);
	size_t total = (size_t)r * (len + 1);
	char *keys = malloc(total);
	if (!keys)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	for (json_int_t i = 0; i < r; i++) {
		memcpy(keys + (size_t)i * (len + 1), s, len);
		keys[(size_t)i * (len + 1) + len] = ' ';
	}
	json_t *k = json_stringn(keys, total - 1);
	free(keys);
	return dg_adapt_finish(c, dg_adapt_obj("type", json_string("key"), "keys", k, NULL), map,
			       N_OF(map), out);
}

/* Translates one Anthropic input object into a canonical action. */
int dg_adapt_anthropic_input(struct dg_adapt_ctx *c, const json_t *in, struct dg_action *out,
			     char *name)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF];
	memset(out, 0, sizeof(*out));
	int rc = dg_adapt_disc(c, in, "action", "what to do: left_click, type, key, screenshot, ...",
			  &s, &len);
	if (rc < 0)
		return rc;
	size_t t = 0;
	while (t < N_OF(anthropic_actions) && !(strlen(anthropic_actions[t].name) == len &&
						memcmp(anthropic_actions[t].name, s, len) == 0))
		t++;
	if (t == N_OF(anthropic_actions)) {
		dg_show(s, len, esc, sizeof(esc));
		return dg_adapt_fail(c, -EINVAL, ".action", "unknown action \"%s\"", esc);
	}
	const char *aname = anthropic_actions[t].name;
	snprintf(name, DG_ADAPT_NAME_MAX, "%s", aname);
	struct dg_adapt_fields f = {afield_names, A_N, "action", aname, anthropic_actions[t].allowed,
			   anthropic_actions[t].required};
	unsigned present = 0;
	rc = dg_adapt_check_fields(c, in, &f, &present);
	if (rc < 0)
		return rc;

	unsigned mods = 0;
	if ((present & B(A_TEXT)) && (anthropic_actions[t].allowed & B(A_COORD))) {
		/* On pointer actions, text is the modifiers held. */
		rc = dg_adapt_mods(c, ".text", json_object_get(in, "text"), &mods);
		if (rc < 0)
			return rc;
	}
	const json_t *text = json_object_get(in, "text");
	int x = 0, y = 0;
	json_t *canon = NULL;
	switch (anthropic_actions[t].kind) {
	case AK_KEY: {
		static const struct dg_adapt_rename map[] = {{"keys", "text"}};
		rc = dg_adapt_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		if (present & B(A_REPEAT))
			return dg_adapt_key_repeat(c, s, len, json_object_get(in, "repeat"), out);
		return dg_adapt_finish(c, dg_adapt_obj("type", json_string("key"), "keys", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case AK_TYPE: {
		static const struct dg_adapt_rename map[] = {{"text", "text"}};
		rc = dg_adapt_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		return dg_adapt_finish(c, dg_adapt_obj("type", json_string("type"), "text", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case AK_HOLD: {
		static const struct dg_adapt_rename map[] = {{"keys", "text"}, {"ms", "duration"}};
		int ms = 0;
		rc = dg_adapt_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		rc = dg_adapt_seconds(c, ".duration", json_object_get(in, "duration"),
				 DG_ACTION_HOLD_MS_MAX, &ms);
		if (rc < 0)
			return rc;
		return dg_adapt_finish(c, dg_adapt_obj("type", json_string("hold_key"), "keys",
					 json_stringn(s, len), "ms", json_integer(ms), NULL),
			      map, N_OF(map), out);
	}
	case AK_WAIT: {
		int ms = 0;
		rc = dg_adapt_seconds(c, ".duration", json_object_get(in, "duration"),
				 DG_ACTION_WAIT_MS_MAX, &ms);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("wait"), "ms", json_integer(ms), NULL);
		break;
	}
	case AK_MOVE:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("move"), "x", json_integer(x), "y",
				json_integer(y), NULL);
		break;
	case AK_CLICK:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("click"), "x", json_integer(x), "y",
				json_integer(y), "button", json_string(anthropic_actions[t].button),
				"count", json_integer(anthropic_actions[t].count), "modifiers",
				dg_adapt_modifiers_json(mods), NULL);
		break;
	case AK_DOWN:
	case AK_UP:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type",
				json_string(anthropic_actions[t].kind == AK_DOWN ? "mouse_down"
										 : "mouse_up"),
				"button", json_string("left"), "x", json_integer(x), "y",
				json_integer(y), NULL);
		break;
	case AK_DRAG: {
		/* 20241022 drags from where the pointer is; 20250124 names the
		 * start. */
		int sx = c->cx, sy = c->cy;
		if (present & B(A_START)) {
			rc = dg_adapt_pair(c, ".start_coordinate", json_object_get(in, "start_coordinate"),
				      &sx, &sy);
			if (rc < 0)
				return rc;
		}
		rc = dg_adapt_pair(c, ".coordinate", json_object_get(in, "coordinate"), &x, &y);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("drag"), "path",
				json_pack("[[ii][ii]]", sx, sy, x, y), "button", json_string("left"),
				"modifiers", dg_adapt_modifiers_json(mods), NULL);
		break;
	}
	case AK_SCROLL: {
		static const char *const dirs[4] = {"up", "down", "left", "right"};
		const json_t *dv = json_object_get(in, "scroll_direction");
		int d = 0, amount = 0;
		json_int_t ai = 0;
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		rc = dg_adapt_string(c, ".scroll_direction", dv, &s, &len);
		if (rc < 0)
			return rc;
		while (d < 4 && !dg_adapt_str_is(dv, dirs[d]))
			d++;
		if (d == 4) {
			dg_show(s, len, esc, sizeof(esc));
			return dg_adapt_fail(c, -EINVAL, ".scroll_direction",
				     "unknown direction \"%s\" (allowed: up, down, left, right)", esc);
		}
		rc = dg_adapt_int(c, ".scroll_amount", json_object_get(in, "scroll_amount"), &ai);
		if (rc < 0)
			return rc;
		if (ai < 1 || ai > DG_ACTION_SCROLL_MAX)
			return dg_adapt_fail(c, -EINVAL, ".scroll_amount",
				     "%" JSON_INTEGER_FORMAT " is out of range [1, %d] (wheel notches)",
				     ai, DG_ACTION_SCROLL_MAX);
		amount = (int)ai;
		int dx = d == 2 ? -amount : d == 3 ? amount : 0;
		int dy = d == 0 ? -amount : d == 1 ? amount : 0;
		canon = dg_adapt_obj("type", json_string("scroll"), "x", json_integer(x), "y",
				json_integer(y), "dx", json_integer(dx), "dy", json_integer(dy),
				"modifiers", dg_adapt_modifiers_json(mods), NULL);
		break;
	}
	case AK_SCREENSHOT:
		canon = dg_adapt_obj("type", json_string("screenshot"), NULL);
		break;
	case AK_CURSOR:
		canon = dg_adapt_obj("type", json_string("cursor_position"), NULL);
		break;
	case AK_ZOOM: {
		json_t *region = NULL;
		rc = anthropic_region(c, json_object_get(in, "region"), &region);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("zoom"), "region", region, NULL);
		break;
	}
	}
	return dg_adapt_finish(c, canon, NULL, 0, out);
}


/* The fields of a tool_use block deskgate does not act on, checked so that
 * what the SDKs send is accepted and nothing else: `caller` (who invoked the
 * tool: {type, tool_id?}) and `cache_control` ({type: "ephemeral", ttl?}). */
static int anthropic_caller(struct dg_adapt_ctx *c, const json_t *v)
{
	static const char *const names[] = {"tool_id"};
	struct dg_adapt_fields f = {names, 1, "type", "caller", B(0), 0};
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	if (!json_is_object(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".caller", "%s is not an object {type, tool_id?}", val);
	}
	snprintf(c->prefix, sizeof(c->prefix), "anthropic.caller");
	int rc = dg_adapt_check_fields(c, v, &f, &present);
	const json_t *t = json_object_get(v, "type");
	if (rc == 0 && !t)
		rc = dg_adapt_fail(c, -EINVAL, ".type", "required (\"direct\", or the server tool)");
	if (rc == 0)
		rc = dg_adapt_id(c, ".type", t, NULL);
	if (rc == 0 && (present & B(0)))
		rc = dg_adapt_id(c, ".tool_id", json_object_get(v, "tool_id"), NULL);
	snprintf(c->prefix, sizeof(c->prefix), "anthropic");
	return rc;
}

static int anthropic_cache_control(struct dg_adapt_ctx *c, const json_t *v)
{
	static const char *const names[] = {"ttl"};
	struct dg_adapt_fields f = {names, 1, "type", "cache_control", B(0), 0};
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	if (!json_is_object(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".cache_control", "%s is not an object {type, ttl?}",
			     val);
	}
	snprintf(c->prefix, sizeof(c->prefix), "anthropic.cache_control");
	int rc = dg_adapt_check_fields(c, v, &f, &present);
	const json_t *t = json_object_get(v, "type"), *ttl = json_object_get(v, "ttl");
	if (rc == 0 && !t)
		rc = dg_adapt_fail(c, -EINVAL, ".type", "required (\"ephemeral\")");
	if (rc == 0 && !dg_adapt_str_is(t, "ephemeral")) {
		dg_show_value(t, val, sizeof(val));
		rc = dg_adapt_fail(c, -EINVAL, ".type", "%s is not \"ephemeral\"", val);
	}
	if (rc == 0 && (present & B(0)) && !dg_adapt_str_is(ttl, "5m") && !dg_adapt_str_is(ttl, "1h")) {
		dg_show_value(ttl, val, sizeof(val));
		rc = dg_adapt_fail(c, -EINVAL, ".ttl", "%s is not \"5m\" or \"1h\"", val);
	}
	snprintf(c->prefix, sizeof(c->prefix), "anthropic");
	return rc;
}

/* true when the JSON string v names an action of the computer tool. */
static bool anthropic_member(const json_t *v)
{
	for (size_t t = 0; t < N_OF(anthropic_actions); t++)
		if (dg_adapt_str_is(v, anthropic_actions[t].name))
			return true;
	return false;
}

int dg_adapt_anthropic_block(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a)
{
	static const char *const names[] = {"id", "name", "input", "caller", "cache_control",
					    "toolset_name"};
	enum { F_ID, F_NAME, F_INPUT, F_CALLER, F_CACHE, F_TOOLSET, F_N };
	struct dg_adapt_fields f = {names, F_N, "type", "tool_use", B(F_N) - 1,
				    B(F_ID) | B(F_NAME) | B(F_INPUT)};
	char name[DG_ADAPT_NAME_MAX] = "";
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	struct dg_action act;
	snprintf(c->prefix, sizeof(c->prefix), "anthropic");
	/* The id first, so that even a refused block can be answered, and the
	 * toolset, so that the answer names it. */
	const json_t *id = json_object_get(obj, "id");
	if (id && !json_is_null(id)) {
		int rc = dg_adapt_id(c, ".id", id, a->call_id);
		if (rc < 0)
			return rc;
		a->has_id = true;
	}
	const json_t *ts = json_object_get(obj, "toolset_name");
	if (dg_adapt_str_is(ts, "computer"))
		a->toolset = true;
	if (dg_adapt_str_is(ts, "browser"))
		a->browser = true;
	int rc = dg_adapt_check_fields(c, obj, &f, &present);
	if (rc < 0)
		return rc;
	if ((present & B(F_TOOLSET)) && !a->toolset && !a->browser) {
		dg_show_value(ts, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".toolset_name", "%s is not \"computer\" or "
			     "\"browser\" (the toolsets deskgate speaks)", val);
	}
	if (present & B(F_CALLER)) {
		rc = anthropic_caller(c, json_object_get(obj, "caller"));
		if (rc < 0)
			return rc;
	}
	if (present & B(F_CACHE)) {
		rc = anthropic_cache_control(c, json_object_get(obj, "cache_control"));
		if (rc < 0)
			return rc;
	}
	/* The computer tool is named "computer"; a member of a toolset is
	 * named after its action, its input without "action". */
	const json_t *nv = json_object_get(obj, "name");
	if (a->browser)
		return dg_adapt_browser_member(c, nv, json_object_get(obj, "input"), a);
	bool member = a->toolset && anthropic_member(nv);
	if (!member && !dg_adapt_str_is(nv, "computer")) {
		dg_show_value(nv, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".name", a->toolset ?
			     "%s is not an action of the computer toolset (left_click, type, key, "
			     "screenshot, ...)" :
			     "%s is not \"computer\" (deskgate is the computer tool only)", val);
	}
	const json_t *in = json_object_get(obj, "input");
	snprintf(c->prefix, sizeof(c->prefix), "anthropic.input");
	if (member && dg_adapt_computer_off(c, nv)) {
		dg_show_value(nv, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, "", "%s is disabled by the toolset's configs "
			     "(\"enabled\": false): the model was not offered it", val);
	}
	if (!member) {
		rc = dg_adapt_anthropic_input(c, in, &act, name);
	} else {
		if (!json_is_object(in)) {
			dg_show_value(in, val, sizeof(val));
			return dg_adapt_fail(c, -EINVAL, "", "%s is not a JSON object", val);
		}
		if (json_object_get(in, "action"))
			return dg_adapt_fail(c, -EINVAL, ".action", "not a field of a toolset member's "
				     "input (the block's name is the action)");
		json_t *copy = json_copy((json_t *)in);
		if (!copy || json_object_set(copy, "action", (json_t *)nv) != 0) {
			json_decref(copy);
			return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
		}
		rc = dg_adapt_anthropic_input(c, copy, &act, name);
		json_decref(copy);
	}
	if (rc < 0)
		return rc;
	return dg_adapt_store(c, a, &act, in, name);
}
