/* adapt-openai: OpenAI computer use's computer_call items (one action or a
 * batch, the pending safety checks), field by field, into canonical
 * actions (see adapt.c for the shared checks and the contract).
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

/* OpenAI key names: an array of 1..DG_CHORD_MAX names for one chord, each
 * element a name or a '+'-joined combination. chord gets the keysyms in
 * order; mods_only refuses keys that are not modifiers (the keys held
 * during a pointer action). */
#define OPENAI_KEY_ELEM_MAX ((DG_KEY_NAME_MAX + 1) * DG_CHORD_MAX)
static int openai_keys(struct dg_adapt_ctx *c, const json_t *v, bool mods_only,
		       struct dg_chord *chord)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF], part[DG_KEY_NAME_MAX + 1];
	chord->n = 0;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".keys", "%s is not an array of key names", val);
	}
	size_t n = json_array_size(v);
	if (n == 0 && !mods_only)
		return dg_adapt_fail(c, -EINVAL, ".keys", "empty (keypress needs at least one key)");
	if (n > DG_CHORD_MAX)
		return dg_adapt_fail(c, -EINVAL, ".keys", "%zu keys is over the limit of %d keys", n,
			     DG_CHORD_MAX);
	for (size_t i = 0; i < n; i++) {
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), ".keys[%zu]", i);
		int rc = dg_adapt_string(c, where, json_array_get(v, i), &s, &len);
		if (rc < 0)
			return rc;
		dg_show(s, len, esc, sizeof(esc));
		if (len == 0)
			return dg_adapt_fail(c, -EINVAL, where, "empty key name");
		if (len > OPENAI_KEY_ELEM_MAX)
			return dg_adapt_fail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
				     OPENAI_KEY_ELEM_MAX);
		if (memchr(s, '\0', len))
			return dg_adapt_fail(c, -EINVAL, where, "contains NUL");
		/* "+" is the plus key; otherwise '+' joins names. */
		bool plus = len == 1 && s[0] == '+';
		for (size_t start = 0; start <= len;) {
			size_t end = plus ? len : start + strcspn(s + start, "+");
			size_t plen = end - start;
			if (plen == 0)
				return dg_adapt_fail(c, -EINVAL, where, "empty key name in \"%s\"", esc);
			if (plen > DG_KEY_NAME_MAX)
				return dg_adapt_fail(c, -EINVAL, where,
					     "a key name in \"%s\" is over %d bytes", esc,
					     DG_KEY_NAME_MAX);
			memcpy(part, s + start, plen);
			part[plen] = '\0';
			char pesc[DG_SHOW_BUF];
			dg_show(part, plen, pesc, sizeof(pesc));
			uint32_t ks = 0;
			if (dg_keysym_from_openai(part, &ks) < 0)
				return dg_adapt_fail(c, -EINVAL, where, "unknown key \"%s\"", pesc);
			if (mods_only && !dg_adapt_modifier_bit(ks))
				return dg_adapt_fail(c, -EINVAL, where,
					     "\"%s\" is not a modifier key (held during the action: "
					     "CTRL, SHIFT, ALT, META)", pesc);
			for (int k = 0; k < chord->n; k++)
				if (chord->keysyms[k] == ks)
					return dg_adapt_fail(c, -EINVAL, where,
						     "key \"%s\" is given twice", pesc);
			if (chord->n >= DG_CHORD_MAX)
				return dg_adapt_fail(c, -EINVAL, ".keys", "more than %d keys", DG_CHORD_MAX);
			chord->keysyms[chord->n++] = ks;
			start = end + 1;
		}
	}
	return 0;
}

/* ---- OpenAI ---------------------------------------------------------------------- */

enum ofield { O_X, O_Y, O_BUTTON, O_KEYS, O_SCROLL_X, O_SCROLL_Y, O_TEXT, O_PATH, O_N };

static const char *const ofield_names[O_N] = {
	[O_X] = "x",           [O_Y] = "y",     [O_BUTTON] = "button",   [O_KEYS] = "keys",
	[O_SCROLL_X] = "scroll_x", [O_SCROLL_Y] = "scroll_y", [O_TEXT] = "text",
	[O_PATH] = "path",
};

enum okind { OK_CLICK, OK_DOUBLE, OK_SCROLL, OK_TYPE, OK_KEYPRESS, OK_WAIT, OK_SCREENSHOT,
	     OK_MOVE, OK_DRAG };

#define OXY (B(O_X) | B(O_Y))
static const struct {
	const char *name;
	enum okind kind;
	unsigned allowed, required;
} openai_actions[] = {
	{"click", OK_CLICK, OXY | B(O_BUTTON) | B(O_KEYS), OXY | B(O_BUTTON)},
	{"double_click", OK_DOUBLE, OXY | B(O_KEYS), OXY},
	{"scroll", OK_SCROLL, OXY | B(O_SCROLL_X) | B(O_SCROLL_Y) | B(O_KEYS),
	 OXY | B(O_SCROLL_X) | B(O_SCROLL_Y)},
	{"type", OK_TYPE, B(O_TEXT), B(O_TEXT)},
	{"keypress", OK_KEYPRESS, B(O_KEYS), B(O_KEYS)},
	{"wait", OK_WAIT, 0, 0},
	{"screenshot", OK_SCREENSHOT, 0, 0},
	{"move", OK_MOVE, OXY | B(O_KEYS), OXY},
	{"drag", OK_DRAG, B(O_PATH) | B(O_KEYS), B(O_PATH)},
};

/* OpenAI scroll pixels on one axis (model pixels) as wheel notches. */
static int openai_notches(struct dg_adapt_ctx *c, const char *where, const json_t *v,
			  bool horizontal, int *out)
{
	json_int_t px = 0;
	int rc = dg_adapt_int(c, where, v, &px);
	if (rc < 0)
		return rc;
	int from = horizontal ? c->sc.model_w : c->sc.model_h;
	int to = horizontal ? c->sc.desk_w : c->sc.desk_h;
	/* Notches in double for the limit check (exact enough to decide
	 * "over the limit" for any input: the bound below is far from any
	 * rounding question), integers for the value. */
	double notches = fabs((double)px) * to / from / DG_ADAPT_PIXELS_PER_NOTCH;
	if (notches >= DG_ACTION_SCROLL_MAX + 1)
		return dg_adapt_fail(c, -EINVAL, where,
			     "%" JSON_INTEGER_FORMAT " pixels is about %.0f wheel notches, over the "
			     "limit of %d (%d pixels a notch)", px, notches, DG_ACTION_SCROLL_MAX,
			     DG_ADAPT_PIXELS_PER_NOTCH);
	long long apx = px < 0 ? -(long long)px : px;
	long long den = (long long)from * DG_ADAPT_PIXELS_PER_NOTCH;
	long long n = (2 * apx * to + den) / (2 * den);
	if (n == 0 && apx != 0)
		n = 1;
	if (n > DG_ACTION_SCROLL_MAX)
		return dg_adapt_fail(c, -EINVAL, where,
			     "%" JSON_INTEGER_FORMAT " pixels is %lld wheel notches, over the limit "
			     "of %d (%d pixels a notch)", px, n, DG_ACTION_SCROLL_MAX,
			     DG_ADAPT_PIXELS_PER_NOTCH);
	*out = (int)(px < 0 ? -n : n);
	return 0;
}

static int openai_path(struct dg_adapt_ctx *c, const json_t *v, json_t **out)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	*out = NULL;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".path", "%s is not an array of {x, y} points", val);
	}
	size_t n = json_array_size(v);
	if (n < 2 || n > DG_ACTION_PATH_MAX)
		return dg_adapt_fail(c, -EINVAL, ".path", "%zu points; a drag takes 2 to %d", n,
			     DG_ACTION_PATH_MAX);
	json_t *path = json_array();
	if (!path)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(v, i);
		int x = 0, y = 0, rc;
		snprintf(where, sizeof(where), ".path[%zu]", i);
		if (!json_is_object(p)) {
			dg_show_value(p, val, sizeof(val));
			rc = dg_adapt_fail(c, -EINVAL, where, "%s is not an {x, y} point", val);
			goto fail;
		}
		const char *key;
		size_t key_len;
		json_t *kv;
		json_object_keylen_foreach((json_t *)p, key, key_len, kv)
		{
			if (!(key_len == 1 && (key[0] == 'x' || key[0] == 'y'))) {
				dg_show(key, key_len, esc, sizeof(esc));
				rc = dg_adapt_fail(c, -EINVAL, where,
					   "unknown field \"%s\" in a point (allowed: x, y)", esc);
				goto fail;
			}
		}
		const json_t *xv = json_object_get(p, "x"), *yv = json_object_get(p, "y");
		if (!xv || !yv) {
			rc = dg_adapt_fail(c, -EINVAL, where, "a point needs x and y");
			goto fail;
		}
		snprintf(where, sizeof(where), ".path[%zu].x", i);
		rc = dg_adapt_coord(c, where, xv, true, false, &x);
		if (rc < 0)
			goto fail;
		snprintf(where, sizeof(where), ".path[%zu].y", i);
		rc = dg_adapt_coord(c, where, yv, false, false, &y);
		if (rc < 0)
			goto fail;
		if (json_array_append_new(path, json_pack("[ii]", x, y)) != 0) {
			rc = dg_adapt_fail(c, -ENOMEM, "", "out of memory");
			goto fail;
		}
		continue;
	fail:
		json_decref(path);
		return rc;
	}
	*out = path;
	return 0;
}

/* Translates one OpenAI action object into a canonical action. */
static int openai_action(struct dg_adapt_ctx *c, const json_t *in, struct dg_action *out,
			 char *name)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF], val[DG_SHOW_VALUE_BUF];
	memset(out, 0, sizeof(*out));
	int rc = dg_adapt_disc(c, in, "type", "what to do: click, type, keypress, screenshot, ...", &s,
			  &len);
	if (rc < 0)
		return rc;
	size_t t = 0;
	while (t < N_OF(openai_actions) && !(strlen(openai_actions[t].name) == len &&
					     memcmp(openai_actions[t].name, s, len) == 0))
		t++;
	if (t == N_OF(openai_actions)) {
		dg_show(s, len, esc, sizeof(esc));
		return dg_adapt_fail(c, -EINVAL, ".type", "unknown action \"%s\"", esc);
	}
	const char *oname = openai_actions[t].name;
	snprintf(name, DG_ADAPT_NAME_MAX, "%s", oname);
	struct dg_adapt_fields f = {ofield_names, O_N, "type", oname, openai_actions[t].allowed,
			   openai_actions[t].required};
	unsigned present = 0;
	rc = dg_adapt_check_fields(c, in, &f, &present);
	if (rc < 0)
		return rc;

	struct dg_chord chord = {.n = 0};
	unsigned mods = 0;
	if (present & B(O_KEYS)) {
		rc = openai_keys(c, json_object_get(in, "keys"),
				 openai_actions[t].kind != OK_KEYPRESS, &chord);
		if (rc < 0)
			return rc;
		if (openai_actions[t].kind != OK_KEYPRESS)
			for (int k = 0; k < chord.n; k++)
				mods |= dg_adapt_modifier_bit(chord.keysyms[k]);
	}
	int x = 0, y = 0;
	if (openai_actions[t].allowed & B(O_X)) {
		rc = dg_adapt_coord(c, ".x", json_object_get(in, "x"), true, false, &x);
		if (rc < 0)
			return rc;
		rc = dg_adapt_coord(c, ".y", json_object_get(in, "y"), false, false, &y);
		if (rc < 0)
			return rc;
	}
	json_t *canon = NULL;
	switch (openai_actions[t].kind) {
	case OK_CLICK: {
		static const struct {
			const char *wire, *canon;
		} buttons[] = {{"left", "left"}, {"right", "right"}, {"wheel", "middle"},
			       {"back", "back"}, {"forward", "forward"}};
		const json_t *bv = json_object_get(in, "button");
		size_t b = 0;
		rc = dg_adapt_string(c, ".button", bv, &s, &len);
		if (rc < 0)
			return rc;
		while (b < N_OF(buttons) && !dg_adapt_str_is(bv, buttons[b].wire))
			b++;
		if (b == N_OF(buttons)) {
			dg_show_value(bv, val, sizeof(val));
			return dg_adapt_fail(c, -EINVAL, ".button",
				     "unknown button %s (allowed: left, right, wheel, back, forward)",
				     val);
		}
		/* The mouse's back and forward buttons are history navigation:
		 * the canonical back/forward action, decided as such (VNC carries
		 * no X buttons 8 and 9 to the desktop; the page would never see
		 * them). Where there is no browser, that action is refused. */
		if (strcmp(buttons[b].canon, "back") == 0 || strcmp(buttons[b].canon, "forward") == 0)
			canon = dg_adapt_obj("type", json_string(buttons[b].canon), NULL);
		else
			canon = dg_adapt_obj("type", json_string("click"), "x", json_integer(x), "y",
					json_integer(y), "button", json_string(buttons[b].canon),
					"modifiers", dg_adapt_modifiers_json(mods), NULL);
		break;
	}
	case OK_DOUBLE:
		canon = dg_adapt_obj("type", json_string("click"), "x", json_integer(x), "y",
				json_integer(y), "count", json_integer(2), "modifiers",
				dg_adapt_modifiers_json(mods), NULL);
		break;
	case OK_MOVE:
		canon = dg_adapt_obj("type", json_string("move"), "x", json_integer(x), "y",
				json_integer(y), "modifiers", dg_adapt_modifiers_json(mods), NULL);
		break;
	case OK_SCROLL: {
		int dx = 0, dy = 0;
		rc = openai_notches(c, ".scroll_x", json_object_get(in, "scroll_x"), true, &dx);
		if (rc < 0)
			return rc;
		rc = openai_notches(c, ".scroll_y", json_object_get(in, "scroll_y"), false, &dy);
		if (rc < 0)
			return rc;
		if (dx == 0 && dy == 0)
			return dg_adapt_fail(c, -EINVAL, "", "scroll_x and scroll_y are both 0");
		canon = dg_adapt_obj("type", json_string("scroll"), "x", json_integer(x), "y",
				json_integer(y), "dx", json_integer(dx), "dy", json_integer(dy),
				"modifiers", dg_adapt_modifiers_json(mods), NULL);
		break;
	}
	case OK_TYPE: {
		static const struct dg_adapt_rename map[] = {{"text", "text"}};
		rc = dg_adapt_string(c, ".text", json_object_get(in, "text"), &s, &len);
		if (rc < 0)
			return rc;
		return dg_adapt_finish(c, dg_adapt_obj("type", json_string("type"), "text", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case OK_KEYPRESS: {
		char keys[DG_ACTION_KEYS_MAX + 1];
		if (dg_keys_format(&chord, 1, keys, sizeof(keys)) < 0)
			return dg_adapt_fail(c, -EINVAL, ".keys", "a key has no X keysym name");
		canon = dg_adapt_obj("type", json_string("key"), "keys", json_string(keys), NULL);
		break;
	}
	case OK_WAIT:
		canon = dg_adapt_obj("type", json_string("wait"), "ms",
				json_integer(DG_ADAPT_OPENAI_WAIT_MS), NULL);
		break;
	case OK_SCREENSHOT:
		canon = dg_adapt_obj("type", json_string("screenshot"), NULL);
		break;
	case OK_DRAG: {
		json_t *path = NULL;
		rc = openai_path(c, json_object_get(in, "path"), &path);
		if (rc < 0)
			return rc;
		canon = dg_adapt_obj("type", json_string("drag"), "path", path, "modifiers",
				dg_adapt_modifiers_json(mods), NULL);
		break;
	}
	}
	return dg_adapt_finish(c, canon, NULL, 0, out);
}

/* Copies pending_safety_checks into a->safety_checks, each check checked. */
static int openai_safety(struct dg_adapt_ctx *c, const json_t *v, struct dg_adapted *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	json_t *copy = json_array();
	if (!copy)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	if (!v || json_is_null(v)) {
		a->safety_checks = copy;
		return 0;
	}
	int rc = 0;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		rc = dg_adapt_fail(c, -EINVAL, ".pending_safety_checks", "%s is not an array", val);
		goto out;
	}
	size_t n = json_array_size(v);
	if (n > DG_ADAPT_SAFETY_MAX) {
		rc = dg_adapt_fail(c, -E2BIG, ".pending_safety_checks",
			   "%zu checks is over the limit of %d", n, DG_ADAPT_SAFETY_MAX);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *chk = json_array_get(v, i);
		snprintf(where, sizeof(where), ".pending_safety_checks[%zu]", i);
		if (!json_is_object(chk)) {
			dg_show_value(chk, val, sizeof(val));
			rc = dg_adapt_fail(c, -EINVAL, where, "%s is not an object", val);
			goto out;
		}
		const char *key;
		size_t key_len;
		json_t *kv;
		json_object_keylen_foreach((json_t *)chk, key, key_len, kv)
		{
			if (!((key_len == 2 && memcmp(key, "id", 2) == 0) ||
			      (key_len == 4 && memcmp(key, "code", 4) == 0) ||
			      (key_len == 7 && memcmp(key, "message", 7) == 0))) {
				dg_show(key, key_len, esc, sizeof(esc));
				rc = dg_adapt_fail(c, -EINVAL, where,
					   "unknown field \"%s\" (allowed: id, code, message)", esc);
				goto out;
			}
		}
		char w2[96];
		snprintf(w2, sizeof(w2), "%s.id", where);
		const json_t *id = json_object_get(chk, "id");
		if (!id) {
			rc = dg_adapt_fail(c, -EINVAL, w2, "required");
			goto out;
		}
		rc = dg_adapt_id(c, w2, id, NULL);
		if (rc < 0)
			goto out;
		json_t *o = dg_adapt_obj("id", json_incref((json_t *)id), NULL);
		if (!o || json_array_append_new(copy, o) != 0) {
			rc = dg_adapt_fail(c, -ENOMEM, "", "out of memory");
			goto out;
		}
		static const char *const texts[2] = {"code", "message"};
		for (int k = 0; k < 2; k++) {
			const json_t *tv = json_object_get(chk, texts[k]);
			const char *s = NULL;
			size_t len = 0;
			if (!tv || json_is_null(tv))
				continue;
			snprintf(w2, sizeof(w2), "%s.%s", where, texts[k]);
			rc = dg_adapt_string(c, w2, tv, &s, &len);
			if (rc < 0)
				goto out;
			if (len > DG_ADAPT_SAFETY_TEXT_MAX) {
				rc = dg_adapt_fail(c, -EINVAL, w2, "%zu bytes is over the limit of %d bytes",
					   len, DG_ADAPT_SAFETY_TEXT_MAX);
				goto out;
			}
			if (memchr(s, '\0', len)) {
				rc = dg_adapt_fail(c, -EINVAL, w2, "contains NUL");
				goto out;
			}
			if (json_object_set(o, texts[k], (json_t *)tv) != 0) {
				rc = dg_adapt_fail(c, -ENOMEM, "", "out of memory");
				goto out;
			}
		}
	}
out:
	if (rc < 0) {
		json_decref(copy);
		return rc;
	}
	a->safety_checks = copy;
	return 0;
}

int dg_adapt_openai_call(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a)
{
	static const char *const names[] = {"id", "call_id", "action", "actions",
					    "pending_safety_checks", "status"};
	enum { F_ID, F_CALL_ID, F_ACTION, F_ACTIONS, F_SAFETY, F_STATUS };
	struct dg_adapt_fields f = {names, 6, "type", "computer_call", 0x3f, B(F_ID) | B(F_CALL_ID)};
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	snprintf(c->prefix, sizeof(c->prefix), "openai");
	/* call_id first, so that even a refused call can be answered. */
	const json_t *cid = json_object_get(obj, "call_id");
	if (cid && !json_is_null(cid)) {
		int rc = dg_adapt_id(c, ".call_id", cid, a->call_id);
		if (rc < 0)
			return rc;
		a->has_id = true;
	}
	int rc = dg_adapt_check_fields(c, obj, &f, &present);
	if (rc < 0)
		return rc;
	rc = dg_adapt_id(c, ".id", json_object_get(obj, "id"), NULL);
	if (rc < 0)
		return rc;
	if (present & B(F_STATUS)) {
		const json_t *st = json_object_get(obj, "status");
		if (!dg_adapt_str_is(st, "completed") && !dg_adapt_str_is(st, "in_progress") &&
		    !dg_adapt_str_is(st, "incomplete")) {
			dg_show_value(st, val, sizeof(val));
			return dg_adapt_fail(c, -EINVAL, ".status", "%s is not a status (completed, "
				     "in_progress, incomplete)", val);
		}
	}
	rc = openai_safety(c, json_object_get(obj, "pending_safety_checks"), a);
	if (rc < 0)
		return rc;

	if ((present & B(F_ACTION)) && (present & B(F_ACTIONS)))
		return dg_adapt_fail(c, -EINVAL, "", "both action and actions (give one)");
	if (!(present & (B(F_ACTION) | B(F_ACTIONS))))
		return dg_adapt_fail(c, -EINVAL, ".action", "required (or actions, batched)");
	char name[DG_ADAPT_NAME_MAX] = "";
	struct dg_action act;
	if (present & B(F_ACTION)) {
		const json_t *in = json_object_get(obj, "action");
		snprintf(c->prefix, sizeof(c->prefix), "openai.action");
		rc = openai_action(c, in, &act, name);
		if (rc < 0)
			return rc;
		return dg_adapt_store(c, a, &act, in, name);
	}
	const json_t *arr = json_object_get(obj, "actions");
	a->batched = true;
	if (!json_is_array(arr)) {
		dg_show_value(arr, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".actions", "%s is not an array of actions", val);
	}
	size_t n = json_array_size(arr);
	if (n == 0)
		return dg_adapt_fail(c, -EINVAL, ".actions", "empty");
	if (n > DG_ADAPT_ACTIONS_MAX)
		return dg_adapt_fail(c, -E2BIG, ".actions", "%zu actions is over the limit of %d", n,
			     DG_ADAPT_ACTIONS_MAX);
	for (size_t i = 0; i < n; i++) {
		const json_t *in = json_array_get(arr, i);
		snprintf(c->prefix, sizeof(c->prefix), "openai.actions[%zu]", i);
		rc = openai_action(c, in, &act, name);
		if (rc < 0)
			return rc;
		rc = dg_adapt_store(c, a, &act, in, name);
		if (rc < 0)
			return rc;
	}
	return 0;
}
