/* adapt: the Anthropic computer tool and OpenAI computer use, translated to
 * and from canonical actions (see the "adapters" section of actions.h for
 * the contract).
 *
 * Every wire action is checked field by field here (types, ranges, model
 * coordinates), translated into a canonical object in desktop coordinates,
 * and that object goes through dg_action_parse_obj like any canonical
 * action, so an adapter can never produce what the canonical schema would
 * refuse. Errors the canonical parser finds in fields passed through (the
 * text of a type action, the keys of a key action) are renamed to the wire
 * field, so the agent reads "anthropic.input.text: ...", never a name it
 * did not send.
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

/* ---- names ------------------------------------------------------------------- */

const char *dg_wire_name(enum dg_wire w)
{
	switch (w) {
	case DG_WIRE_CANONICAL:
		return "canonical";
	case DG_WIRE_ANTHROPIC:
		return "anthropic";
	case DG_WIRE_OPENAI:
		return "openai";
	case DG_WIRE_HELLO:
		return "hello";
	case DG_WIRE_UNKNOWN:
		break;
	}
	return "unknown";
}

void dg_adapted_free(struct dg_adapted *a)
{
	if (!a)
		return;
	for (int i = 0; i < DG_ADAPT_ACTIONS_MAX; i++) {
		json_decref(a->actions[i]);
		json_decref(a->wire_actions[i]);
		dg_action_free(&a->act[i]);
		free(a->text[i]);
	}
	json_decref(a->bcall.tmpl);
	json_decref(a->raw);
	json_decref(a->safety_checks);
	memset(a, 0, sizeof(*a));
}

/* Drops the translated actions (on an error), keeping what identifies the
 * call so that it can still be answered. */
static void drop_actions(struct dg_adapted *a)
{
	for (int i = 0; i < DG_ADAPT_ACTIONS_MAX; i++) {
		json_decref(a->actions[i]);
		json_decref(a->wire_actions[i]);
		a->actions[i] = a->wire_actions[i] = NULL;
		dg_action_free(&a->act[i]);
		free(a->text[i]);
		a->text[i] = NULL;
		a->text_len[i] = 0;
		a->name[i][0] = '\0';
	}
	json_decref(a->bcall.tmpl);
	a->bcall.tmpl = NULL;
	a->pending = false;
	a->n = 0;
}

/* ---- messages ---------------------------------------------------------------- */

int dg_adapt_fail(struct dg_adapt_ctx *c, int code, const char *where, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, code, "%s%s: %s", c->prefix, where, msg);
}

/* true when the JSON string v is exactly s (v may hold NUL). */
bool dg_adapt_str_is(const json_t *v, const char *s)
{
	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	       memcmp(json_string_value(v), s, json_string_length(v)) == 0;
}

int dg_adapt_string(struct dg_adapt_ctx *c, const char *where, const json_t *v, const char **s,
		    size_t *len)
{
	if (!json_is_string(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, where, "%s is not a string", val);
	}
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

/* A JSON number as an integer. The SDKs type coordinates and amounts as
 * `number`, so a real is what a model may send (640.5): it is rounded to
 * the nearest integer, halves away from zero, and the wire action (kept in
 * the recording) still holds what was received. */
int dg_adapt_int(struct dg_adapt_ctx *c, const char *where, const json_t *v, json_int_t *out)
{
	char val[DG_SHOW_VALUE_BUF];
	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	dg_show_value(v, val, sizeof(val));
	if (!json_is_real(v))
		return dg_adapt_fail(c, -EINVAL, where, "%s is not a number", val);
	double d = json_real_value(v);
	/* jansson refuses NaN and infinities in its input; a bound keeps
	 * lround defined and the result far inside json_int_t. */
	if (!(d >= -DG_ADAPT_REAL_MAX && d <= DG_ADAPT_REAL_MAX))
		return dg_adapt_fail(c, -EINVAL, where, "%s is out of range (at most %g in magnitude)",
			     val, DG_ADAPT_REAL_MAX);
	*out = (json_int_t)lround(d);
	return 0;
}

/* An id: 1..DG_ADAPT_ID_MAX bytes of printable ASCII without spaces (the
 * ids the APIs issue are letters, digits, '_' and '-'; this keeps them safe
 * to log and to send back). */
int dg_adapt_id(struct dg_adapt_ctx *c, const char *where, const json_t *v, char *out)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF];
	int rc = dg_adapt_string(c, where, v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return dg_adapt_fail(c, -EINVAL, where, "empty");
	if (len > DG_ADAPT_ID_MAX)
		return dg_adapt_fail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
			     DG_ADAPT_ID_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f) {
			dg_show(s, len, esc, sizeof(esc));
			return dg_adapt_fail(c, -EINVAL, where,
				     "\"%s\" has a byte 0x%02X at %zu (ids are printable ASCII "
				     "without spaces)", esc, ch, i);
		}
	}
	if (out) {
		memcpy(out, s, len);
		out[len] = '\0';
	}
	return 0;
}

/* ---- scaling ----------------------------------------------------------------- */

/* v (0 <= v <= from) scaled from an axis of size `from` to one of size `to`,
 * rounded to the nearest (halves up), in 64 bits: v, from, to are at most
 * DG_ACTION_SCREEN_MAX. */
long long dg_adapt_scale_axis(long long v, int from, int to)
{
	return (2 * v * to + from) / (2 * (long long)from);
}

/* A model coordinate on the horizontal or vertical axis, checked on the model
 * display and mapped to the desktop. edge: the exclusive end of a region
 * (0 <= v <= size, mapped to at most the desktop's size). */
int dg_adapt_coord(struct dg_adapt_ctx *c, const char *where, const json_t *v, bool horizontal,
		   bool edge, int *out)
{
	json_int_t i = 0; /* set by get_int on success; -O3 cannot see it */
	int rc = dg_adapt_int(c, where, v, &i);
	if (rc < 0)
		return rc;
	int msize = horizontal ? c->sc.model_w : c->sc.model_h;
	int dsize = horizontal ? c->sc.desk_w : c->sc.desk_h;
	if (i < 0 || i > msize || (i == msize && !edge))
		return dg_adapt_fail(c, -EINVAL, where, "%" JSON_INTEGER_FORMAT
			     " is off the display (%s %d)", i, horizontal ? "width" : "height",
			     msize);
	long long d = dg_adapt_scale_axis(i, msize, dsize);
	long long max = edge ? dsize : dsize - 1;
	*out = (int)(d > max ? max : d);
	return 0;
}

/* An [x, y] pair of model coordinates. */
int dg_adapt_pair(struct dg_adapt_ctx *c, const char *where, const json_t *v, int *x, int *y)
{
	char w[96], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v) || json_array_size(v) != 2) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, where, "%s is not an [x, y] pair", val);
	}
	snprintf(w, sizeof(w), "%s[0]", where);
	int rc = dg_adapt_coord(c, w, json_array_get(v, 0), true, false, x);
	if (rc < 0)
		return rc;
	snprintf(w, sizeof(w), "%s[1]", where);
	return dg_adapt_coord(c, w, json_array_get(v, 1), false, false, y);
}

/* ---- keys ------------------------------------------------------------------- */

/* The DG_MOD_* bit of a modifier keysym (left or right), or 0. */
unsigned dg_adapt_modifier_bit(uint32_t ks)
{
	switch (ks) {
	case 0xffe3: /* Control_L */
	case 0xffe4: /* Control_R */
		return DG_MOD_CTRL;
	case 0xffe1: /* Shift_L */
	case 0xffe2: /* Shift_R */
		return DG_MOD_SHIFT;
	case 0xffe9: /* Alt_L */
	case 0xffea: /* Alt_R */
		return DG_MOD_ALT;
	case 0xffeb: /* Super_L */
	case 0xffec: /* Super_R */
		return DG_MOD_SUPER;
	case 0xffe7: /* Meta_L */
	case 0xffe8: /* Meta_R */
		return DG_MOD_META;
	}
	return 0;
}

/* The canonical modifiers array of mods. */
json_t *dg_adapt_modifiers_json(unsigned mods)
{
	static const char *const names[DG_MOD_COUNT] = {"ctrl", "shift", "alt", "super", "meta"};
	json_t *arr = json_array();
	for (int i = 0; arr && i < DG_MOD_COUNT; i++) {
		if ((mods & (1u << i)) && json_array_append_new(arr, json_string(names[i]))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* ---- the canonical action ------------------------------------------------------ */

/* Rewrites a canonical error ("action.text: ...") to the wire's names
 * ("anthropic.input.text: ..."). A field without a wire name (which the
 * checks before should have caught) keeps its canonical message, prefixed
 * with the wire action. */
static int canon_fail(struct dg_adapt_ctx *c, int code, const char *msg,
		      const struct dg_adapt_rename *map, size_t n_map)
{
	const char *p = msg;
	if (strncmp(p, "action.", 7) == 0) {
		p += 7;
		size_t flen = strcspn(p, ".[:");
		for (size_t i = 0; i < n_map; i++) {
			if (strlen(map[i].canon) == flen && strncmp(map[i].canon, p, flen) == 0)
				return dg_err_set(c->err, code, "%s.%s%s", c->prefix, map[i].wire,
						  p + flen);
		}
	}
	return dg_err_set(c->err, code, "%s: %s", c->prefix, msg);
}

int dg_adapt_finish(struct dg_adapt_ctx *c, json_t *canon, const struct dg_adapt_rename *map,
		    size_t n_map, struct dg_action *out)
{
	struct dg_err e;
	memset(out, 0, sizeof(*out));
	if (!canon)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	int rc = dg_action_parse_obj(canon, c->sc.desk_w, c->sc.desk_h, out, &e);
	json_decref(canon);
	if (rc == -ENOMEM)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	if (rc < 0)
		return canon_fail(c, rc, e.msg, map, n_map);
	return 0;
}

/* A JSON object from alternating keys and new references (NULL-terminated
 * list); any NULL value makes the whole NULL. */
json_t *dg_adapt_obj(const char *key, ...)
{
	json_t *o = json_object();
	bool ok = o != NULL;
	va_list ap;
	va_start(ap, key);
	for (const char *k = key; k; k = va_arg(ap, const char *)) {
		json_t *v = va_arg(ap, json_t *);
		if (!o || !v) {
			json_decref(v);
			ok = false;
		} else if (json_object_set_new(o, k, v) != 0) {
			ok = false;
		}
	}
	va_end(ap);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- fields of a wire action ----------------------------------------------------- */

/* Checks the fields present in obj: each allowed (null counts as absent),
 * each required one there. Sets *present. */
int dg_adapt_check_fields(struct dg_adapt_ctx *c, const json_t *obj,
			  const struct dg_adapt_fields *f, unsigned *present)
{
	const char *key;
	size_t key_len;
	json_t *v;
	char esc[DG_SHOW_BUF], list[256];
	*present = 0;
	json_object_keylen_foreach((json_t *)obj, key, key_len, v)
	{
		if (f->disc && strlen(f->disc) == key_len && memcmp(key, f->disc, key_len) == 0)
			continue;
		int i = 0;
		while (i < f->n_names &&
		       !(strlen(f->names[i]) == key_len && memcmp(f->names[i], key, key_len) == 0))
			i++;
		if (i < f->n_names && json_is_null(v))
			continue;
		if (i == f->n_names || !(f->allowed & B(i))) {
			dg_show(key, key_len, esc, sizeof(esc));
			if (!f->allowed)
				return dg_adapt_fail(c, -EINVAL, "", "unknown field \"%s\" (%s takes no fields)",
					     esc, f->action);
			size_t o = 0;
			list[0] = '\0';
			for (int k = 0; k < f->n_names; k++) {
				if (!(f->allowed & B(k)))
					continue;
				int w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "",
						 f->names[k]);
				if (w < 0 || (size_t)w >= sizeof(list) - o)
					break;
				o += (size_t)w;
			}
			return dg_adapt_fail(c, -EINVAL, "", "unknown field \"%s\" for %s (allowed: %s)", esc,
				     f->action, list);
		}
		*present |= B(i);
	}
	for (int i = 0; i < f->n_names; i++) {
		if ((f->required & B(i)) && !(*present & B(i))) {
			char where[64];
			snprintf(where, sizeof(where), ".%s", f->names[i]);
			return dg_adapt_fail(c, -EINVAL, where, "required for %s", f->action);
		}
	}
	return 0;
}

/* The discriminator of a wire action: obj must be an object and obj[disc]
 * a string; *s, *len point into it. */
int dg_adapt_disc(struct dg_adapt_ctx *c, const json_t *obj, const char *disc, const char *what,
		  const char **s, size_t *len)
{
	char val[DG_SHOW_VALUE_BUF], where[32];
	if (!json_is_object(obj)) {
		dg_show_value(obj, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	snprintf(where, sizeof(where), ".%s", disc);
	const json_t *v = json_object_get(obj, disc);
	if (!v)
		return dg_adapt_fail(c, -EINVAL, where, "missing (%s)", what);
	return dg_adapt_string(c, where, v, s, len);
}

/* A duration in seconds (a JSON number, integer or not) as milliseconds,
 * rounded to the nearest, 0..max_ms. */
int dg_adapt_seconds(struct dg_adapt_ctx *c, const char *where, const json_t *v, int max_ms,
		     int *ms)
{
	char val[DG_SHOW_VALUE_BUF];
	if (!json_is_number(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, where, "%s is not a number of seconds", val);
	}
	double d = json_number_value(v);
	dg_show_value(v, val, sizeof(val));
	if (!(d >= 0))
		return dg_adapt_fail(c, -EINVAL, where, "%s seconds is negative", val);
	/* Compare before converting: a huge value must not reach lround. */
	double msd = d * 1000.0;
	if (msd > (double)max_ms + 0.5 || lround(msd) > max_ms)
		return dg_adapt_fail(c, -EINVAL, where, "%s seconds is over the limit of %g seconds", val,
			     max_ms / 1000.0);
	*ms = (int)lround(msd);
	return 0;
}

int dg_adapt_store(struct dg_adapt_ctx *c, struct dg_adapted *a, struct dg_action *act,
		   const json_t *w, const char *name)
{
	int i = a->n;
	json_t *canon = dg_action_to_json(act);
	char *text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!text) {
		json_decref(canon);
		dg_action_free(act);
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	a->act[i] = *act;
	memset(act, 0, sizeof(*act));
	a->actions[i] = canon;
	a->text[i] = text;
	a->text_len[i] = strlen(text);
	a->wire_actions[i] = json_incref((json_t *)w);
	snprintf(a->name[i], DG_ADAPT_NAME_MAX, "%s", name);
	a->n++;
	return 0;
}

/* ---- detection ------------------------------------------------------------------- */

static int canonical(struct dg_adapt_ctx *c, const json_t *obj, size_t len, struct dg_adapted *a)
{
	struct dg_action act;
	if (len > DG_ACTION_JSON_MAX)
		return dg_err_set(c->err, -E2BIG, "action: %zu bytes is over the limit of %d bytes",
				  len, DG_ACTION_JSON_MAX);
	int rc = dg_action_parse_obj(obj, c->sc.desk_w, c->sc.desk_h, &act, c->err);
	if (rc < 0)
		return rc;
	snprintf(c->prefix, sizeof(c->prefix), "action");
	return dg_adapt_store(c, a, &act, obj, dg_action_type_name(act.type));
}

static int detect(struct dg_adapt_ctx *c, const json_t *obj, size_t len, struct dg_adapted *a)
{
	char val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	snprintf(c->prefix, sizeof(c->prefix), "message");
	if (!json_is_object(obj)) {
		dg_show_value(obj, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	const json_t *type = json_object_get(obj, "type");
	if (type) {
		const char *s = NULL;
		size_t slen = 0;
		int rc = dg_adapt_string(c, ".type", type, &s, &slen);
		if (rc < 0)
			return rc;
		if (dg_adapt_str_is(type, "tool_use")) {
			a->wire = DG_WIRE_ANTHROPIC;
			return dg_adapt_anthropic_block(c, obj, a);
		}
		if (dg_adapt_str_is(type, "computer_call")) {
			a->wire = DG_WIRE_OPENAI;
			return dg_adapt_openai_call(c, obj, a);
		}
		if (dg_adapt_str_is(type, "hello")) {
			a->wire = DG_WIRE_HELLO;
			return dg_adapt_hello(c, obj, a);
		}
		if (strlen(s) == slen && dg_action_type_from_name(s) >= 0) {
			a->wire = DG_WIRE_CANONICAL;
			return canonical(c, obj, len, a);
		}
		dg_show(s, slen, esc, sizeof(esc));
		return dg_adapt_fail(c, -EINVAL, ".type",
			     "unknown type \"%s\" (a canonical action such as \"click\", an "
			     "Anthropic \"tool_use\" block or an OpenAI \"computer_call\" item)",
			     esc);
	}
	if (json_object_get(obj, "action")) {
		struct dg_action act;
		char name[DG_ADAPT_NAME_MAX] = "";
		a->wire = DG_WIRE_ANTHROPIC;
		snprintf(c->prefix, sizeof(c->prefix), "anthropic.input");
		int rc = dg_adapt_anthropic_input(c, obj, &act, name);
		if (rc < 0)
			return rc;
		return dg_adapt_store(c, a, &act, obj, name);
	}
	return dg_adapt_fail(c, -EINVAL, "",
		     "neither \"type\" (a canonical action, \"tool_use\" or \"computer_call\") nor "
		     "\"action\" (an Anthropic computer tool input)");
}

int dg_adapt_parse(const char *msg, size_t len, const struct dg_adapt_scale *scale, int cursor_x,
		   int cursor_y, struct dg_adapted *a, struct dg_err *err)
{
	struct dg_adapt_ctx c = {.err = err};
	memset(a, 0, sizeof(*a));
	if (!scale)
		return dg_err_set(err, -EINVAL, "adapt: no scale");
	c.sc = *scale;
	if (c.sc.model_w == 0 && c.sc.model_h == 0) {
		c.sc.model_w = c.sc.desk_w;
		c.sc.model_h = c.sc.desk_h;
	}
	if (c.sc.desk_w < 1 || c.sc.desk_w > DG_ACTION_SCREEN_MAX || c.sc.desk_h < 1 ||
	    c.sc.desk_h > DG_ACTION_SCREEN_MAX || c.sc.model_w < 1 ||
	    c.sc.model_w > DG_ACTION_SCREEN_MAX || c.sc.model_h < 1 ||
	    c.sc.model_h > DG_ACTION_SCREEN_MAX)
		return dg_err_set(err, -EINVAL,
				  "adapt: desktop %dx%d or model display %dx%d is not a valid size "
				  "(1 to %d)", scale->desk_w, scale->desk_h, scale->model_w,
				  scale->model_h, DG_ACTION_SCREEN_MAX);
	if (cursor_x < 0 || cursor_x >= c.sc.desk_w || cursor_y < 0 || cursor_y >= c.sc.desk_h)
		return dg_err_set(err, -EINVAL, "adapt: cursor (%d, %d) is off the desktop (%dx%d)",
				  cursor_x, cursor_y, c.sc.desk_w, c.sc.desk_h);
	c.cx = cursor_x;
	c.cy = cursor_y;
	a->scale = c.sc;
	if (len > DG_ADAPT_JSON_MAX)
		return dg_err_set(err, -E2BIG, "message: %zu bytes is over the limit of %d bytes",
				  len, DG_ADAPT_JSON_MAX);
	if (!msg)
		return dg_err_set(err, -EINVAL, "message: no text");
	json_error_t je;
	/* As dg_action_parse: duplicates refused, NUL let through to the field
	 * checks so they can name the field. */
	json_t *obj = json_loadb(msg, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!obj) {
		char text[DG_SHOW_BUF];
		dg_show(je.text, strnlen(je.text, sizeof(je.text) - 1), text, sizeof(text));
		if (json_error_code(&je) == json_error_out_of_memory)
			return dg_err_set(err, -ENOMEM, "message: out of memory");
		if (json_error_code(&je) == json_error_duplicate_key)
			return dg_err_set(err, -EINVAL,
					  "message: duplicated field at line %d, column %d (%s)",
					  je.line, je.column, text);
		return dg_err_set(err, -EINVAL, "message: invalid JSON at line %d, column %d: %s",
				  je.line, je.column, text);
	}
	a->raw = obj;
	int rc = detect(&c, obj, len, a);
	if (rc < 0)
		drop_actions(a);
	return rc;
}
