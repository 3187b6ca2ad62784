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

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define B(f) (1u << (f))

/* ---- base64 ------------------------------------------------------------------ */

size_t dg_base64_len(size_t n)
{
	size_t groups = n / 3 + (n % 3 != 0);
	if (groups > (SIZE_MAX - 1) / 4)
		return (size_t)-1;
	return groups * 4;
}

void dg_base64_encode(const uint8_t *in, size_t n, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i = 0, o = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = abc[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
}

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
	}
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
		a->name[i][0] = '\0';
	}
	a->n = 0;
}

/* ---- messages ---------------------------------------------------------------- */

/* The parsing context: the scale, the cursor and where in the message we
 * are ("anthropic.input", "openai.actions[3]"), for messages. */
struct actx {
	struct dg_adapt_scale sc;  /* model size filled in */
	int cx, cy;                /* cursor, desktop space */
	char prefix[48];
	struct dg_err *err;
};

/* Records "<prefix><where>: <message>" and returns code. */
static int afail(struct actx *c, int code, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int afail(struct actx *c, int code, const char *where, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, code, "%s%s: %s", c->prefix, where, msg);
}


/* true when the JSON string v is exactly s (v may hold NUL). */
static bool str_is(const json_t *v, const char *s)
{
	return json_is_string(v) && json_string_length(v) == strlen(s) &&
	       memcmp(json_string_value(v), s, json_string_length(v)) == 0;
}

static int get_string(struct actx *c, const char *where, const json_t *v, const char **s,
		      size_t *len)
{
	if (!json_is_string(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, where, "%s is not a string", val);
	}
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

static int get_int(struct actx *c, const char *where, const json_t *v, json_int_t *out)
{
	if (!json_is_integer(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, where, "%s is not an integer", val);
	}
	*out = json_integer_value(v);
	return 0;
}

/* An id: 1..DG_ADAPT_ID_MAX bytes of printable ASCII without spaces (the
 * ids the APIs issue are letters, digits, '_' and '-'; this keeps them safe
 * to log and to send back). */
static int get_id(struct actx *c, const char *where, const json_t *v, char *out)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF];
	int rc = get_string(c, where, v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return afail(c, -EINVAL, where, "empty");
	if (len > DG_ADAPT_ID_MAX)
		return afail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
			     DG_ADAPT_ID_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch <= 0x20 || ch >= 0x7f) {
			dg_show(s, len, esc, sizeof(esc));
			return afail(c, -EINVAL, where,
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
static long long scale_axis(long long v, int from, int to)
{
	return (2 * v * to + from) / (2 * (long long)from);
}

/* A model coordinate on the horizontal or vertical axis, checked on the model
 * display and mapped to the desktop. edge: the exclusive end of a region
 * (0 <= v <= size, mapped to at most the desktop's size). */
static int get_coord(struct actx *c, const char *where, const json_t *v, bool horizontal,
		     bool edge, int *out)
{
	json_int_t i = 0; /* set by get_int on success; -O3 cannot see it */
	int rc = get_int(c, where, v, &i);
	if (rc < 0)
		return rc;
	int msize = horizontal ? c->sc.model_w : c->sc.model_h;
	int dsize = horizontal ? c->sc.desk_w : c->sc.desk_h;
	if (i < 0 || i > msize || (i == msize && !edge))
		return afail(c, -EINVAL, where, "%" JSON_INTEGER_FORMAT
			     " is off the display (%s %d)", i, horizontal ? "width" : "height",
			     msize);
	long long d = scale_axis(i, msize, dsize);
	long long max = edge ? dsize : dsize - 1;
	*out = (int)(d > max ? max : d);
	return 0;
}

/* An [x, y] pair of model coordinates. */
static int get_pair(struct actx *c, const char *where, const json_t *v, int *x, int *y)
{
	char w[96], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v) || json_array_size(v) != 2) {
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, where, "%s is not an [x, y] pair", val);
	}
	snprintf(w, sizeof(w), "%s[0]", where);
	int rc = get_coord(c, w, json_array_get(v, 0), true, false, x);
	if (rc < 0)
		return rc;
	snprintf(w, sizeof(w), "%s[1]", where);
	return get_coord(c, w, json_array_get(v, 1), false, false, y);
}

/* ---- keys ------------------------------------------------------------------- */

/* The DG_MOD_* bit of a modifier keysym (left or right), or 0. */
static unsigned modifier_bit(uint32_t ks)
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
static json_t *modifiers_json(unsigned mods)
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

/* Anthropic's `text` on click, drag and scroll actions: one chord of
 * modifier keys in xdotool syntax. */
static int anthropic_mods(struct actx *c, const json_t *v, unsigned *mods)
{
	const char *s = NULL;
	size_t len = 0;
	struct dg_err e;
	struct dg_chord chords[DG_ACTION_CHORDS_MAX];
	int n = 0;
	char name[DG_KEYSYM_NAME_BUF];
	int rc = get_string(c, ".text", v, &s, &len);
	if (rc < 0)
		return rc;
	if (memchr(s, '\0', len))
		return afail(c, -EINVAL, ".text", "contains NUL");
	if (dg_keys_parse(s, chords, DG_ACTION_CHORDS_MAX, &n, &e) < 0)
		return afail(c, -EINVAL, ".text", "%s", e.msg);
	if (n != 1)
		return afail(c, -EINVAL, ".text",
			     "modifiers held during the action are one chord (\"shift\", "
			     "\"ctrl+shift\"), got %d chords", n);
	*mods = 0;
	for (int k = 0; k < chords[0].n; k++) {
		unsigned bit = modifier_bit(chords[0].keysyms[k]);
		if (!bit) {
			if (dg_keysym_name(chords[0].keysyms[k], name, sizeof(name)) < 0)
				snprintf(name, sizeof(name), "0x%x", (unsigned)chords[0].keysyms[k]);
			return afail(c, -EINVAL, ".text",
				     "%s is not a modifier key (held during the action: ctrl, shift, "
				     "alt, super, meta)", name);
		}
		*mods |= bit;
	}
	return 0;
}

/* OpenAI key names: an array of 1..DG_CHORD_MAX names for one chord, each
 * element a name or a '+'-joined combination. chord gets the keysyms in
 * order; mods_only refuses keys that are not modifiers (the keys held
 * during a pointer action). */
#define OPENAI_KEY_ELEM_MAX ((DG_KEY_NAME_MAX + 1) * DG_CHORD_MAX)
static int openai_keys(struct actx *c, const json_t *v, bool mods_only, struct dg_chord *chord)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF], part[DG_KEY_NAME_MAX + 1];
	chord->n = 0;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, ".keys", "%s is not an array of key names", val);
	}
	size_t n = json_array_size(v);
	if (n == 0 && !mods_only)
		return afail(c, -EINVAL, ".keys", "empty (keypress needs at least one key)");
	if (n > DG_CHORD_MAX)
		return afail(c, -EINVAL, ".keys", "%zu keys is over the limit of %d keys", n,
			     DG_CHORD_MAX);
	for (size_t i = 0; i < n; i++) {
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), ".keys[%zu]", i);
		int rc = get_string(c, where, json_array_get(v, i), &s, &len);
		if (rc < 0)
			return rc;
		dg_show(s, len, esc, sizeof(esc));
		if (len == 0)
			return afail(c, -EINVAL, where, "empty key name");
		if (len > OPENAI_KEY_ELEM_MAX)
			return afail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
				     OPENAI_KEY_ELEM_MAX);
		if (memchr(s, '\0', len))
			return afail(c, -EINVAL, where, "contains NUL");
		/* "+" is the plus key; otherwise '+' joins names. */
		bool plus = len == 1 && s[0] == '+';
		for (size_t start = 0; start <= len;) {
			size_t end = plus ? len : start + strcspn(s + start, "+");
			size_t plen = end - start;
			if (plen == 0)
				return afail(c, -EINVAL, where, "empty key name in \"%s\"", esc);
			if (plen > DG_KEY_NAME_MAX)
				return afail(c, -EINVAL, where,
					     "a key name in \"%s\" is over %d bytes", esc,
					     DG_KEY_NAME_MAX);
			memcpy(part, s + start, plen);
			part[plen] = '\0';
			char pesc[DG_SHOW_BUF];
			dg_show(part, plen, pesc, sizeof(pesc));
			uint32_t ks = 0;
			if (dg_keysym_from_openai(part, &ks) < 0)
				return afail(c, -EINVAL, where, "unknown key \"%s\"", pesc);
			if (mods_only && !modifier_bit(ks))
				return afail(c, -EINVAL, where,
					     "\"%s\" is not a modifier key (held during the action: "
					     "CTRL, SHIFT, ALT, META)", pesc);
			for (int k = 0; k < chord->n; k++)
				if (chord->keysyms[k] == ks)
					return afail(c, -EINVAL, where,
						     "key \"%s\" is given twice", pesc);
			if (chord->n >= DG_CHORD_MAX)
				return afail(c, -EINVAL, ".keys", "more than %d keys", DG_CHORD_MAX);
			chord->keysyms[chord->n++] = ks;
			start = end + 1;
		}
	}
	return 0;
}

/* ---- the canonical action ------------------------------------------------------ */

/* Canonical field -> wire field, for renaming the canonical parser's errors. */
struct rename {
	const char *canon, *wire;
};

/* Rewrites a canonical error ("action.text: ...") to the wire's names
 * ("anthropic.input.text: ..."). A field without a wire name (which the
 * checks before should have caught) keeps its canonical message, prefixed
 * with the wire action. */
static int canon_fail(struct actx *c, int code, const char *msg, const struct rename *map,
		      size_t n_map)
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

/* Checks canon (a new reference, stolen; NULL when building it ran out of
 * memory) with the canonical parser for the desktop, and puts its canonical
 * form into *out. */
static int finish(struct actx *c, json_t *canon, const struct rename *map, size_t n_map,
		  json_t **out)
{
	struct dg_action act;
	struct dg_err e;
	*out = NULL;
	if (!canon)
		return afail(c, -ENOMEM, "", "out of memory");
	int rc = dg_action_parse_obj(canon, c->sc.desk_w, c->sc.desk_h, &act, &e);
	json_decref(canon);
	if (rc == -ENOMEM)
		return afail(c, -ENOMEM, "", "out of memory");
	if (rc < 0)
		return canon_fail(c, rc, e.msg, map, n_map);
	*out = dg_action_to_json(&act);
	dg_action_free(&act);
	return *out ? 0 : afail(c, -ENOMEM, "", "out of memory");
}

/* A JSON object from alternating keys and new references (NULL-terminated
 * list); any NULL value makes the whole NULL. */
static json_t *obj_new(const char *key, ...)
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

/* Which fields one wire action allows and requires, as bits into names. */
struct fields {
	const char *const *names;
	int n_names;
	const char *disc;     /* the discriminator field ("action", "type") */
	const char *action;   /* the action's name, for messages */
	unsigned allowed, required;
};

/* Checks the fields present in obj: each allowed (null counts as absent),
 * each required one there. Sets *present. */
static int check_fields(struct actx *c, const json_t *obj, const struct fields *f,
			unsigned *present)
{
	const char *key;
	size_t key_len;
	json_t *v;
	char esc[DG_SHOW_BUF], list[256];
	*present = 0;
	json_object_keylen_foreach((json_t *)obj, key, key_len, v)
	{
		if (strlen(f->disc) == key_len && memcmp(key, f->disc, key_len) == 0)
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
				return afail(c, -EINVAL, "", "unknown field \"%s\" (%s takes no fields)",
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
			return afail(c, -EINVAL, "", "unknown field \"%s\" for %s (allowed: %s)", esc,
				     f->action, list);
		}
		*present |= B(i);
	}
	for (int i = 0; i < f->n_names; i++) {
		if ((f->required & B(i)) && !(*present & B(i))) {
			char where[64];
			snprintf(where, sizeof(where), ".%s", f->names[i]);
			return afail(c, -EINVAL, where, "required for %s", f->action);
		}
	}
	return 0;
}

/* The discriminator of a wire action: obj must be an object and obj[disc]
 * a string; *s, *len point into it. */
static int get_disc(struct actx *c, const json_t *obj, const char *disc, const char *what,
		    const char **s, size_t *len)
{
	char val[DG_SHOW_VALUE_BUF], where[32];
	if (!json_is_object(obj)) {
		dg_show_value(obj, val, sizeof(val));
		return afail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	snprintf(where, sizeof(where), ".%s", disc);
	const json_t *v = json_object_get(obj, disc);
	if (!v)
		return afail(c, -EINVAL, where, "missing (%s)", what);
	return get_string(c, where, v, s, len);
}

/* A duration in seconds (a JSON number, integer or not) as milliseconds,
 * rounded to the nearest, 0..max_ms. */
static int get_seconds(struct actx *c, const char *where, const json_t *v, int max_ms, int *ms)
{
	char val[DG_SHOW_VALUE_BUF];
	if (!json_is_number(v)) {
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, where, "%s is not a number of seconds", val);
	}
	double d = json_number_value(v);
	dg_show_value(v, val, sizeof(val));
	if (!(d >= 0))
		return afail(c, -EINVAL, where, "%s seconds is negative", val);
	/* Compare before converting: a huge value must not reach lround. */
	double msd = d * 1000.0;
	if (msd > (double)max_ms + 0.5 || lround(msd) > max_ms)
		return afail(c, -EINVAL, where, "%s seconds is over the limit of %g seconds", val,
			     max_ms / 1000.0);
	*ms = (int)lround(msd);
	return 0;
}

/* ---- Anthropic ------------------------------------------------------------------- */

enum afield { A_COORD, A_START, A_TEXT, A_DIR, A_AMOUNT, A_DURATION, A_REGION, A_N };

static const char *const afield_names[A_N] = {
	[A_COORD] = "coordinate",      [A_START] = "start_coordinate", [A_TEXT] = "text",
	[A_DIR] = "scroll_direction",  [A_AMOUNT] = "scroll_amount",   [A_DURATION] = "duration",
	[A_REGION] = "region",
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
	{"key", AK_KEY, NULL, 0, B(A_TEXT), B(A_TEXT)},
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
static int anthropic_at(struct actx *c, const json_t *in, unsigned present, int *x, int *y)
{
	if (present & B(A_COORD))
		return get_pair(c, ".coordinate", json_object_get(in, "coordinate"), x, y);
	*x = c->cx;
	*y = c->cy;
	return 0;
}

static int anthropic_region(struct actx *c, const json_t *v, json_t **out)
{
	char where[32], val[DG_SHOW_VALUE_BUF];
	int r[4] = {0, 0, 0, 0};
	json_int_t m[4] = {0, 0, 0, 0};
	*out = NULL;
	if (!json_is_array(v) || json_array_size(v) != 4) {
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, ".region", "%s is not an array [x1, y1, x2, y2]", val);
	}
	for (int k = 0; k < 4; k++) {
		snprintf(where, sizeof(where), ".region[%d]", k);
		int rc = get_coord(c, where, json_array_get(v, (size_t)k), k % 2 == 0, k >= 2, &r[k]);
		if (rc < 0)
			return rc;
		m[k] = json_integer_value(json_array_get(v, (size_t)k));
	}
	if (m[2] <= m[0])
		return afail(c, -EINVAL, ".region", "x2 (%" JSON_INTEGER_FORMAT
			     ") must be greater than x1 (%" JSON_INTEGER_FORMAT ")", m[2], m[0]);
	if (m[3] <= m[1])
		return afail(c, -EINVAL, ".region", "y2 (%" JSON_INTEGER_FORMAT
			     ") must be greater than y1 (%" JSON_INTEGER_FORMAT ")", m[3], m[1]);
	/* Scaling down can fold a thin region onto one desktop pixel column:
	 * keep at least one pixel (x1 <= desk_w - 1, so x1 + 1 fits). */
	if (r[2] <= r[0])
		r[2] = r[0] + 1;
	if (r[3] <= r[1])
		r[3] = r[1] + 1;
	*out = json_pack("[iiii]", r[0], r[1], r[2], r[3]);
	return *out ? 0 : afail(c, -ENOMEM, "", "out of memory");
}

/* Translates one Anthropic input object into a canonical action. */
static int anthropic_input(struct actx *c, const json_t *in, json_t **out, char *name)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF];
	*out = NULL;
	int rc = get_disc(c, in, "action", "what to do: left_click, type, key, screenshot, ...",
			  &s, &len);
	if (rc < 0)
		return rc;
	size_t t = 0;
	while (t < N_OF(anthropic_actions) && !(strlen(anthropic_actions[t].name) == len &&
						memcmp(anthropic_actions[t].name, s, len) == 0))
		t++;
	if (t == N_OF(anthropic_actions)) {
		dg_show(s, len, esc, sizeof(esc));
		return afail(c, -EINVAL, ".action", "unknown action \"%s\"", esc);
	}
	const char *aname = anthropic_actions[t].name;
	snprintf(name, DG_ADAPT_NAME_MAX, "%s", aname);
	struct fields f = {afield_names, A_N, "action", aname, anthropic_actions[t].allowed,
			   anthropic_actions[t].required};
	unsigned present = 0;
	rc = check_fields(c, in, &f, &present);
	if (rc < 0)
		return rc;

	unsigned mods = 0;
	if ((present & B(A_TEXT)) && (anthropic_actions[t].allowed & B(A_COORD))) {
		/* On pointer actions, text is the modifiers held. */
		rc = anthropic_mods(c, json_object_get(in, "text"), &mods);
		if (rc < 0)
			return rc;
	}
	const json_t *text = json_object_get(in, "text");
	int x = 0, y = 0;
	json_t *canon = NULL;
	switch (anthropic_actions[t].kind) {
	case AK_KEY: {
		static const struct rename map[] = {{"keys", "text"}};
		rc = get_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		return finish(c, obj_new("type", json_string("key"), "keys", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case AK_TYPE: {
		static const struct rename map[] = {{"text", "text"}};
		rc = get_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		return finish(c, obj_new("type", json_string("type"), "text", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case AK_HOLD: {
		static const struct rename map[] = {{"keys", "text"}, {"ms", "duration"}};
		int ms = 0;
		rc = get_string(c, ".text", text, &s, &len);
		if (rc < 0)
			return rc;
		rc = get_seconds(c, ".duration", json_object_get(in, "duration"),
				 DG_ACTION_HOLD_MS_MAX, &ms);
		if (rc < 0)
			return rc;
		return finish(c, obj_new("type", json_string("hold_key"), "keys",
					 json_stringn(s, len), "ms", json_integer(ms), NULL),
			      map, N_OF(map), out);
	}
	case AK_WAIT: {
		int ms = 0;
		rc = get_seconds(c, ".duration", json_object_get(in, "duration"),
				 DG_ACTION_WAIT_MS_MAX, &ms);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("wait"), "ms", json_integer(ms), NULL);
		break;
	}
	case AK_MOVE:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("move"), "x", json_integer(x), "y",
				json_integer(y), NULL);
		break;
	case AK_CLICK:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("click"), "x", json_integer(x), "y",
				json_integer(y), "button", json_string(anthropic_actions[t].button),
				"count", json_integer(anthropic_actions[t].count), "modifiers",
				modifiers_json(mods), NULL);
		break;
	case AK_DOWN:
	case AK_UP:
		rc = anthropic_at(c, in, present, &x, &y);
		if (rc < 0)
			return rc;
		canon = obj_new("type",
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
			rc = get_pair(c, ".start_coordinate", json_object_get(in, "start_coordinate"),
				      &sx, &sy);
			if (rc < 0)
				return rc;
		}
		rc = get_pair(c, ".coordinate", json_object_get(in, "coordinate"), &x, &y);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("drag"), "path",
				json_pack("[[ii][ii]]", sx, sy, x, y), "button", json_string("left"),
				"modifiers", modifiers_json(mods), NULL);
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
		rc = get_string(c, ".scroll_direction", dv, &s, &len);
		if (rc < 0)
			return rc;
		while (d < 4 && !str_is(dv, dirs[d]))
			d++;
		if (d == 4) {
			dg_show(s, len, esc, sizeof(esc));
			return afail(c, -EINVAL, ".scroll_direction",
				     "unknown direction \"%s\" (allowed: up, down, left, right)", esc);
		}
		rc = get_int(c, ".scroll_amount", json_object_get(in, "scroll_amount"), &ai);
		if (rc < 0)
			return rc;
		if (ai < 1 || ai > DG_ACTION_SCROLL_MAX)
			return afail(c, -EINVAL, ".scroll_amount",
				     "%" JSON_INTEGER_FORMAT " is out of range [1, %d] (wheel notches)",
				     ai, DG_ACTION_SCROLL_MAX);
		amount = (int)ai;
		int dx = d == 2 ? -amount : d == 3 ? amount : 0;
		int dy = d == 0 ? -amount : d == 1 ? amount : 0;
		canon = obj_new("type", json_string("scroll"), "x", json_integer(x), "y",
				json_integer(y), "dx", json_integer(dx), "dy", json_integer(dy),
				"modifiers", modifiers_json(mods), NULL);
		break;
	}
	case AK_SCREENSHOT:
		canon = obj_new("type", json_string("screenshot"), NULL);
		break;
	case AK_CURSOR:
		canon = obj_new("type", json_string("cursor_position"), NULL);
		break;
	case AK_ZOOM: {
		json_t *region = NULL;
		rc = anthropic_region(c, json_object_get(in, "region"), &region);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("zoom"), "region", region, NULL);
		break;
	}
	}
	return finish(c, canon, NULL, 0, out);
}

/* Stores canonical action canon (stolen) that came from wire object w. */
static void store(struct dg_adapted *a, json_t *canon, const json_t *w, const char *name)
{
	a->actions[a->n] = canon;
	a->wire_actions[a->n] = json_incref((json_t *)w);
	snprintf(a->name[a->n], DG_ADAPT_NAME_MAX, "%s", name);
	a->n++;
}

static int anthropic_block(struct actx *c, const json_t *obj, struct dg_adapted *a)
{
	static const char *const names[] = {"id", "name", "input"};
	struct fields f = {names, 3, "type", "tool_use", B(0) | B(1) | B(2), B(0) | B(1) | B(2)};
	char name[DG_ADAPT_NAME_MAX] = "";
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	json_t *canon = NULL;
	snprintf(c->prefix, sizeof(c->prefix), "anthropic");
	/* The id first, so that even a refused block can be answered. */
	const json_t *id = json_object_get(obj, "id");
	if (id && !json_is_null(id)) {
		int rc = get_id(c, ".id", id, a->call_id);
		if (rc < 0)
			return rc;
		a->has_id = true;
	}
	int rc = check_fields(c, obj, &f, &present);
	if (rc < 0)
		return rc;
	const json_t *nv = json_object_get(obj, "name");
	if (!str_is(nv, "computer")) {
		dg_show_value(nv, val, sizeof(val));
		return afail(c, -EINVAL, ".name", "%s is not \"computer\" (deskgate is the computer "
			     "tool only)", val);
	}
	const json_t *in = json_object_get(obj, "input");
	snprintf(c->prefix, sizeof(c->prefix), "anthropic.input");
	rc = anthropic_input(c, in, &canon, name);
	if (rc < 0)
		return rc;
	store(a, canon, in, name);
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
static int openai_notches(struct actx *c, const char *where, const json_t *v, bool horizontal,
			  int *out)
{
	json_int_t px = 0;
	int rc = get_int(c, where, v, &px);
	if (rc < 0)
		return rc;
	int from = horizontal ? c->sc.model_w : c->sc.model_h;
	int to = horizontal ? c->sc.desk_w : c->sc.desk_h;
	/* Notches in double for the limit check (exact enough to decide
	 * "over the limit" for any input: the bound below is far from any
	 * rounding question), integers for the value. */
	double notches = fabs((double)px) * to / from / DG_ADAPT_PIXELS_PER_NOTCH;
	if (notches >= DG_ACTION_SCROLL_MAX + 1)
		return afail(c, -EINVAL, where,
			     "%" JSON_INTEGER_FORMAT " pixels is about %.0f wheel notches, over the "
			     "limit of %d (%d pixels a notch)", px, notches, DG_ACTION_SCROLL_MAX,
			     DG_ADAPT_PIXELS_PER_NOTCH);
	long long apx = px < 0 ? -(long long)px : px;
	long long den = (long long)from * DG_ADAPT_PIXELS_PER_NOTCH;
	long long n = (2 * apx * to + den) / (2 * den);
	if (n == 0 && apx != 0)
		n = 1;
	if (n > DG_ACTION_SCROLL_MAX)
		return afail(c, -EINVAL, where,
			     "%" JSON_INTEGER_FORMAT " pixels is %lld wheel notches, over the limit "
			     "of %d (%d pixels a notch)", px, n, DG_ACTION_SCROLL_MAX,
			     DG_ADAPT_PIXELS_PER_NOTCH);
	*out = (int)(px < 0 ? -n : n);
	return 0;
}

static int openai_path(struct actx *c, const json_t *v, json_t **out)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	*out = NULL;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return afail(c, -EINVAL, ".path", "%s is not an array of {x, y} points", val);
	}
	size_t n = json_array_size(v);
	if (n < 2 || n > DG_ACTION_PATH_MAX)
		return afail(c, -EINVAL, ".path", "%zu points; a drag takes 2 to %d", n,
			     DG_ACTION_PATH_MAX);
	json_t *path = json_array();
	if (!path)
		return afail(c, -ENOMEM, "", "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(v, i);
		int x = 0, y = 0, rc;
		snprintf(where, sizeof(where), ".path[%zu]", i);
		if (!json_is_object(p)) {
			dg_show_value(p, val, sizeof(val));
			rc = afail(c, -EINVAL, where, "%s is not an {x, y} point", val);
			goto fail;
		}
		const char *key;
		size_t key_len;
		json_t *kv;
		json_object_keylen_foreach((json_t *)p, key, key_len, kv)
		{
			if (!(key_len == 1 && (key[0] == 'x' || key[0] == 'y'))) {
				dg_show(key, key_len, esc, sizeof(esc));
				rc = afail(c, -EINVAL, where,
					   "unknown field \"%s\" in a point (allowed: x, y)", esc);
				goto fail;
			}
		}
		const json_t *xv = json_object_get(p, "x"), *yv = json_object_get(p, "y");
		if (!xv || !yv) {
			rc = afail(c, -EINVAL, where, "a point needs x and y");
			goto fail;
		}
		snprintf(where, sizeof(where), ".path[%zu].x", i);
		rc = get_coord(c, where, xv, true, false, &x);
		if (rc < 0)
			goto fail;
		snprintf(where, sizeof(where), ".path[%zu].y", i);
		rc = get_coord(c, where, yv, false, false, &y);
		if (rc < 0)
			goto fail;
		if (json_array_append_new(path, json_pack("[ii]", x, y)) != 0) {
			rc = afail(c, -ENOMEM, "", "out of memory");
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
static int openai_action(struct actx *c, const json_t *in, json_t **out, char *name)
{
	const char *s = NULL;
	size_t len = 0;
	char esc[DG_SHOW_BUF], val[DG_SHOW_VALUE_BUF];
	*out = NULL;
	int rc = get_disc(c, in, "type", "what to do: click, type, keypress, screenshot, ...", &s,
			  &len);
	if (rc < 0)
		return rc;
	size_t t = 0;
	while (t < N_OF(openai_actions) && !(strlen(openai_actions[t].name) == len &&
					     memcmp(openai_actions[t].name, s, len) == 0))
		t++;
	if (t == N_OF(openai_actions)) {
		dg_show(s, len, esc, sizeof(esc));
		return afail(c, -EINVAL, ".type", "unknown action \"%s\"", esc);
	}
	const char *oname = openai_actions[t].name;
	snprintf(name, DG_ADAPT_NAME_MAX, "%s", oname);
	struct fields f = {ofield_names, O_N, "type", oname, openai_actions[t].allowed,
			   openai_actions[t].required};
	unsigned present = 0;
	rc = check_fields(c, in, &f, &present);
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
				mods |= modifier_bit(chord.keysyms[k]);
	}
	int x = 0, y = 0;
	if (openai_actions[t].allowed & B(O_X)) {
		rc = get_coord(c, ".x", json_object_get(in, "x"), true, false, &x);
		if (rc < 0)
			return rc;
		rc = get_coord(c, ".y", json_object_get(in, "y"), false, false, &y);
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
		rc = get_string(c, ".button", bv, &s, &len);
		if (rc < 0)
			return rc;
		while (b < N_OF(buttons) && !str_is(bv, buttons[b].wire))
			b++;
		if (b == N_OF(buttons)) {
			dg_show_value(bv, val, sizeof(val));
			return afail(c, -EINVAL, ".button",
				     "unknown button %s (allowed: left, right, wheel, back, forward)",
				     val);
		}
		canon = obj_new("type", json_string("click"), "x", json_integer(x), "y",
				json_integer(y), "button", json_string(buttons[b].canon), "modifiers",
				modifiers_json(mods), NULL);
		break;
	}
	case OK_DOUBLE:
		canon = obj_new("type", json_string("click"), "x", json_integer(x), "y",
				json_integer(y), "count", json_integer(2), "modifiers",
				modifiers_json(mods), NULL);
		break;
	case OK_MOVE:
		canon = obj_new("type", json_string("move"), "x", json_integer(x), "y",
				json_integer(y), "modifiers", modifiers_json(mods), NULL);
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
			return afail(c, -EINVAL, "", "scroll_x and scroll_y are both 0");
		canon = obj_new("type", json_string("scroll"), "x", json_integer(x), "y",
				json_integer(y), "dx", json_integer(dx), "dy", json_integer(dy),
				"modifiers", modifiers_json(mods), NULL);
		break;
	}
	case OK_TYPE: {
		static const struct rename map[] = {{"text", "text"}};
		rc = get_string(c, ".text", json_object_get(in, "text"), &s, &len);
		if (rc < 0)
			return rc;
		return finish(c, obj_new("type", json_string("type"), "text", json_stringn(s, len),
					 NULL),
			      map, N_OF(map), out);
	}
	case OK_KEYPRESS: {
		char keys[DG_ACTION_KEYS_MAX + 1];
		if (dg_keys_format(&chord, 1, keys, sizeof(keys)) < 0)
			return afail(c, -EINVAL, ".keys", "a key has no X keysym name");
		canon = obj_new("type", json_string("key"), "keys", json_string(keys), NULL);
		break;
	}
	case OK_WAIT:
		canon = obj_new("type", json_string("wait"), "ms",
				json_integer(DG_ADAPT_OPENAI_WAIT_MS), NULL);
		break;
	case OK_SCREENSHOT:
		canon = obj_new("type", json_string("screenshot"), NULL);
		break;
	case OK_DRAG: {
		json_t *path = NULL;
		rc = openai_path(c, json_object_get(in, "path"), &path);
		if (rc < 0)
			return rc;
		canon = obj_new("type", json_string("drag"), "path", path, "modifiers",
				modifiers_json(mods), NULL);
		break;
	}
	}
	return finish(c, canon, NULL, 0, out);
}

/* Copies pending_safety_checks into a->safety_checks, each check checked. */
static int openai_safety(struct actx *c, const json_t *v, struct dg_adapted *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	json_t *copy = json_array();
	if (!copy)
		return afail(c, -ENOMEM, "", "out of memory");
	if (!v || json_is_null(v)) {
		a->safety_checks = copy;
		return 0;
	}
	int rc = 0;
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		rc = afail(c, -EINVAL, ".pending_safety_checks", "%s is not an array", val);
		goto out;
	}
	size_t n = json_array_size(v);
	if (n > DG_ADAPT_SAFETY_MAX) {
		rc = afail(c, -E2BIG, ".pending_safety_checks",
			   "%zu checks is over the limit of %d", n, DG_ADAPT_SAFETY_MAX);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *chk = json_array_get(v, i);
		snprintf(where, sizeof(where), ".pending_safety_checks[%zu]", i);
		if (!json_is_object(chk)) {
			dg_show_value(chk, val, sizeof(val));
			rc = afail(c, -EINVAL, where, "%s is not an object", val);
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
				rc = afail(c, -EINVAL, where,
					   "unknown field \"%s\" (allowed: id, code, message)", esc);
				goto out;
			}
		}
		char w2[96];
		snprintf(w2, sizeof(w2), "%s.id", where);
		const json_t *id = json_object_get(chk, "id");
		if (!id) {
			rc = afail(c, -EINVAL, w2, "required");
			goto out;
		}
		rc = get_id(c, w2, id, NULL);
		if (rc < 0)
			goto out;
		json_t *o = obj_new("id", json_incref((json_t *)id), NULL);
		if (!o || json_array_append_new(copy, o) != 0) {
			rc = afail(c, -ENOMEM, "", "out of memory");
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
			rc = get_string(c, w2, tv, &s, &len);
			if (rc < 0)
				goto out;
			if (len > DG_ADAPT_SAFETY_TEXT_MAX) {
				rc = afail(c, -EINVAL, w2, "%zu bytes is over the limit of %d bytes",
					   len, DG_ADAPT_SAFETY_TEXT_MAX);
				goto out;
			}
			if (memchr(s, '\0', len)) {
				rc = afail(c, -EINVAL, w2, "contains NUL");
				goto out;
			}
			if (json_object_set(o, texts[k], (json_t *)tv) != 0) {
				rc = afail(c, -ENOMEM, "", "out of memory");
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

static int openai_call(struct actx *c, const json_t *obj, struct dg_adapted *a)
{
	static const char *const names[] = {"id", "call_id", "action", "actions",
					    "pending_safety_checks", "status"};
	enum { F_ID, F_CALL_ID, F_ACTION, F_ACTIONS, F_SAFETY, F_STATUS };
	struct fields f = {names, 6, "type", "computer_call", 0x3f, B(F_ID) | B(F_CALL_ID)};
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	snprintf(c->prefix, sizeof(c->prefix), "openai");
	/* call_id first, so that even a refused call can be answered. */
	const json_t *cid = json_object_get(obj, "call_id");
	if (cid && !json_is_null(cid)) {
		int rc = get_id(c, ".call_id", cid, a->call_id);
		if (rc < 0)
			return rc;
		a->has_id = true;
	}
	int rc = check_fields(c, obj, &f, &present);
	if (rc < 0)
		return rc;
	rc = get_id(c, ".id", json_object_get(obj, "id"), NULL);
	if (rc < 0)
		return rc;
	if (present & B(F_STATUS)) {
		const json_t *st = json_object_get(obj, "status");
		if (!str_is(st, "completed") && !str_is(st, "in_progress") &&
		    !str_is(st, "incomplete")) {
			dg_show_value(st, val, sizeof(val));
			return afail(c, -EINVAL, ".status", "%s is not a status (completed, "
				     "in_progress, incomplete)", val);
		}
	}
	rc = openai_safety(c, json_object_get(obj, "pending_safety_checks"), a);
	if (rc < 0)
		return rc;

	if ((present & B(F_ACTION)) && (present & B(F_ACTIONS)))
		return afail(c, -EINVAL, "", "both action and actions (give one)");
	if (!(present & (B(F_ACTION) | B(F_ACTIONS))))
		return afail(c, -EINVAL, ".action", "required (or actions, batched)");
	char name[DG_ADAPT_NAME_MAX] = "";
	json_t *canon = NULL;
	if (present & B(F_ACTION)) {
		const json_t *in = json_object_get(obj, "action");
		snprintf(c->prefix, sizeof(c->prefix), "openai.action");
		rc = openai_action(c, in, &canon, name);
		if (rc < 0)
			return rc;
		store(a, canon, in, name);
		return 0;
	}
	const json_t *arr = json_object_get(obj, "actions");
	a->batched = true;
	if (!json_is_array(arr)) {
		dg_show_value(arr, val, sizeof(val));
		return afail(c, -EINVAL, ".actions", "%s is not an array of actions", val);
	}
	size_t n = json_array_size(arr);
	if (n == 0)
		return afail(c, -EINVAL, ".actions", "empty");
	if (n > DG_ADAPT_ACTIONS_MAX)
		return afail(c, -E2BIG, ".actions", "%zu actions is over the limit of %d", n,
			     DG_ADAPT_ACTIONS_MAX);
	for (size_t i = 0; i < n; i++) {
		const json_t *in = json_array_get(arr, i);
		snprintf(c->prefix, sizeof(c->prefix), "openai.actions[%zu]", i);
		rc = openai_action(c, in, &canon, name);
		if (rc < 0)
			return rc;
		store(a, canon, in, name);
	}
	return 0;
}

/* ---- detection ------------------------------------------------------------------- */

static int canonical(struct actx *c, const json_t *obj, size_t len, struct dg_adapted *a)
{
	struct dg_action act;
	if (len > DG_ACTION_JSON_MAX)
		return dg_err_set(c->err, -E2BIG, "action: %zu bytes is over the limit of %d bytes",
				  len, DG_ACTION_JSON_MAX);
	int rc = dg_action_parse_obj(obj, c->sc.desk_w, c->sc.desk_h, &act, c->err);
	if (rc < 0)
		return rc;
	json_t *canon = dg_action_to_json(&act);
	const char *name = dg_action_type_name(act.type);
	dg_action_free(&act);
	if (!canon)
		return dg_err_set(c->err, -ENOMEM, "action: out of memory");
	store(a, canon, obj, name);
	return 0;
}

static int detect(struct actx *c, const json_t *obj, size_t len, struct dg_adapted *a)
{
	char val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	snprintf(c->prefix, sizeof(c->prefix), "message");
	if (!json_is_object(obj)) {
		dg_show_value(obj, val, sizeof(val));
		return afail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	const json_t *type = json_object_get(obj, "type");
	if (type) {
		const char *s = NULL;
		size_t slen = 0;
		int rc = get_string(c, ".type", type, &s, &slen);
		if (rc < 0)
			return rc;
		if (str_is(type, "tool_use")) {
			a->wire = DG_WIRE_ANTHROPIC;
			return anthropic_block(c, obj, a);
		}
		if (str_is(type, "computer_call")) {
			a->wire = DG_WIRE_OPENAI;
			return openai_call(c, obj, a);
		}
		if (strlen(s) == slen && dg_action_type_from_name(s) >= 0) {
			a->wire = DG_WIRE_CANONICAL;
			return canonical(c, obj, len, a);
		}
		dg_show(s, slen, esc, sizeof(esc));
		return afail(c, -EINVAL, ".type",
			     "unknown type \"%s\" (a canonical action such as \"click\", an "
			     "Anthropic \"tool_use\" block or an OpenAI \"computer_call\" item)",
			     esc);
	}
	if (json_object_get(obj, "action")) {
		json_t *canon = NULL;
		char name[DG_ADAPT_NAME_MAX] = "";
		a->wire = DG_WIRE_ANTHROPIC;
		snprintf(c->prefix, sizeof(c->prefix), "anthropic.input");
		int rc = anthropic_input(c, obj, &canon, name);
		if (rc < 0)
			return rc;
		store(a, canon, obj, name);
		return 0;
	}
	return afail(c, -EINVAL, "",
		     "neither \"type\" (a canonical action, \"tool_use\" or \"computer_call\") nor "
		     "\"action\" (an Anthropic computer tool input)");
}

int dg_adapt_parse(const char *msg, size_t len, const struct dg_adapt_scale *scale,
		   int cursor_x, int cursor_y, struct dg_adapted *a, struct dg_err *err)
{
	struct actx c = {.err = err};
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

/* ---- answers -------------------------------------------------------------------- */

/* A growing text. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->s, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Appends untrusted text s: valid UTF-8 kept, each invalid byte as U+FFFD,
 * control characters (C0, DEL, C1) as spaces, cut after DG_ADAPT_NOTE_MAX
 * bytes of output at a character boundary with "...". */
static void sb_note(struct sbuf *b, const char *s)
{
	size_t len = strlen(s), out = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		const char *why = NULL;
		size_t l = dg_utf8_decode((const unsigned char *)s + i, len - i, &cp, &why);
		const char *piece = s + i;
		size_t plen = l;
		if (l == 0) {
			piece = "\xef\xbf\xbd";
			plen = 3;
			l = 1;
		} else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
			piece = " ";
			plen = 1;
		}
		if (out + plen > DG_ADAPT_NOTE_MAX) {
			sb_str(b, "...");
			return;
		}
		sb_add(b, piece, plen);
		out += plen;
		i += l;
	}
}

/* true when url may go to the model as current_url: 1..DG_ACTION_URL_MAX
 * bytes of valid UTF-8 without control characters. A URL that is not is
 * left out rather than mangled: a wrong URL would mislead the model. */
static bool url_ok(const char *url)
{
	size_t len = strlen(url);
	if (len == 0 || len > DG_ACTION_URL_MAX)
		return false;
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		const char *why = NULL;
		size_t l = dg_utf8_decode((const unsigned char *)url + i, len - i, &cp, &why);
		if (l == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			return false;
		i += l;
	}
	return true;
}

/* The headline for a call that did not fully run (see dg_adapt_answer). */
static void headline(const struct dg_adapted *a, const struct dg_adapt_outcome *o,
		     struct sbuf *b)
{
	if (a->n == 0) {
		sb_str(b, "deskgate rejected the call: ");
		sb_note(b, o->error ? o->error : "invalid message");
		return;
	}
	bool refused = o->verdict || o->rule || o->reason;
	sb_printf(b, "deskgate %s %s", refused ? "refused" : "failed", a->name[o->done]);
	if (a->n > 1)
		sb_printf(b, " (action %d of %d)", o->done + 1, a->n);
	if (refused) {
		if (o->reason) {
			sb_str(b, ": ");
			sb_note(b, o->reason);
		}
		bool verdict = o->verdict && strcmp(o->verdict, "deny") != 0;
		if (o->rule || verdict) {
			sb_str(b, " (");
			if (o->rule) {
				sb_str(b, "rule ");
				sb_note(b, o->rule);
			}
			if (verdict) {
				sb_str(b, o->rule ? ", verdict " : "verdict ");
				sb_note(b, o->verdict);
			}
			sb_str(b, ")");
		}
	} else {
		sb_str(b, ": ");
		sb_note(b, o->error ? o->error : "unknown error");
	}
	if (a->n > 1) {
		int d = o->done, rest = a->n - o->done - 1;
		if (d == 0)
			sb_printf(b, ". No action ran");
		else if (d == 1)
			sb_printf(b, ". Action 1 ran");
		else
			sb_printf(b, ". Actions 1 to %d ran", d);
		if (rest == 1)
			sb_printf(b, "; action %d did not run", a->n);
		else if (rest > 1)
			sb_printf(b, "; actions %d to %d did not run", o->done + 2, a->n);
		sb_str(b, ".");
	}
}

/* base64 of the PNG, optionally after a prefix; NULL when out of memory. */
static json_t *png_string(const struct dg_adapt_outcome *o, const char *prefix)
{
	size_t plen = strlen(prefix), blen = dg_base64_len(o->png_len);
	char *buf = malloc(plen + blen + 1);
	if (!buf)
		return NULL;
	memcpy(buf, prefix, plen);
	dg_base64_encode(o->png, o->png_len, buf + plen);
	/* ASCII by construction: skip jansson's UTF-8 scan of megabytes. */
	json_t *s = json_stringn_nocheck(buf, plen + blen);
	free(buf);
	return s;
}

static bool is_action(const struct dg_adapted *a, int i, const char *type)
{
	return i >= 0 && i < a->n && str_is(json_object_get(a->actions[i], "type"), type);
}

static json_t *anthropic_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	struct sbuf b = {0};
	if (!o->ok)
		headline(a, o, &b);
	if (o->ok && o->has_cursor && is_action(a, a->n - 1, "cursor_position")) {
		int mx = (int)scale_axis(o->cursor_x, a->scale.desk_w, a->scale.model_w);
		int my = (int)scale_axis(o->cursor_y, a->scale.desk_h, a->scale.model_h);
		if (mx > a->scale.model_w - 1)
			mx = a->scale.model_w - 1;
		if (my > a->scale.model_h - 1)
			my = a->scale.model_h - 1;
		sb_printf(&b, "X=%d,Y=%d", mx, my);
	}
	if (o->text) {
		if (b.len)
			sb_str(&b, "\n");
		sb_note(&b, o->text);
	}
	if (!b.len && !o->png && a->n > 0)
		sb_printf(&b, "deskgate ran %s", a->name[a->n - 1]);
	json_t *content = json_array();
	bool ok = content && !b.oom;
	if (ok && b.len)
		ok = json_array_append_new(content, obj_new("type", json_string("text"), "text",
							    json_stringn(b.s, b.len), NULL)) == 0;
	if (ok && o->png) {
		json_t *source = obj_new("type", json_string("base64"), "media_type",
					 json_string("image/png"), "data", png_string(o, ""), NULL);
		ok = json_array_append_new(content, obj_new("type", json_string("image"), "source",
							    source, NULL)) == 0;
	}
	free(b.s);
	if (!ok) {
		json_decref(content);
		return NULL;
	}
	json_t *r = obj_new("type", json_string("tool_result"), "content", content, "is_error",
			    json_boolean(!o->ok), NULL);
	if (r && a->has_id && json_object_set_new(r, "tool_use_id", json_string(a->call_id)) != 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static json_t *openai_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	json_t *output = obj_new("type", json_string("computer_screenshot"), "image_url",
				 png_string(o, "data:image/png;base64,"), NULL);
	if (output && o->url && url_ok(o->url) &&
	    json_object_set_new(output, "current_url", json_string(o->url)) != 0) {
		json_decref(output);
		output = NULL;
	}
	json_t *acks = a->safety_checks ? json_deep_copy(a->safety_checks) : json_array();
	json_t *item = obj_new("type", json_string("computer_call_output"), "call_id",
			       json_string(a->call_id), "acknowledged_safety_checks", acks, "output",
			       output, NULL);
	json_t *items = json_array();
	if (!item || !items || json_array_append_new(items, item) != 0) {
		json_decref(items);
		return NULL;
	}
	struct sbuf b = {0};
	if (!o->ok)
		headline(a, o, &b);
	if (o->text) {
		if (b.len)
			sb_str(&b, "\n");
		sb_note(&b, o->text);
	}
	bool ok = !b.oom;
	if (ok && b.len) {
		json_t *part = obj_new("type", json_string("input_text"), "text",
				       json_stringn(b.s, b.len), NULL);
		json_t *msg = obj_new("type", json_string("message"), "role", json_string("user"),
				      "content", json_pack("[o]", part), NULL);
		ok = json_array_append_new(items, msg) == 0;
	}
	free(b.s);
	if (!ok) {
		json_decref(items);
		return NULL;
	}
	return items;
}

int dg_adapt_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o, json_t **out,
		    struct dg_err *err)
{
	*out = NULL;
	if (!a || !o)
		return dg_err_set(err, -EINVAL, "answer: no call or no outcome");
	if (a->wire != DG_WIRE_ANTHROPIC && a->wire != DG_WIRE_OPENAI)
		return dg_err_set(err, -EINVAL, "answer: %s messages are answered by the gateway",
				  dg_wire_name(a->wire));
	if (a->n < 0 || a->n > DG_ADAPT_ACTIONS_MAX)
		return dg_err_set(err, -EINVAL, "answer: %d actions", a->n);
	if (a->n == 0 && (o->ok || o->done != 0))
		return dg_err_set(err, -EINVAL,
				  "answer: a call that did not parse cannot have run (ok %d, done %d)",
				  (int)o->ok, o->done);
	if (a->n > 0 && o->ok && o->done != a->n)
		return dg_err_set(err, -EINVAL, "answer: ok but %d of %d actions done", o->done,
				  a->n);
	if (a->n > 0 && !o->ok && (o->done < 0 || o->done >= a->n))
		return dg_err_set(err, -EINVAL,
				  "answer: action %d stopped the call, but it has %d actions", o->done,
				  a->n);
	if (o->has_cursor && (o->cursor_x < 0 || o->cursor_x >= a->scale.desk_w ||
			      o->cursor_y < 0 || o->cursor_y >= a->scale.desk_h))
		return dg_err_set(err, -EINVAL, "answer: cursor (%d, %d) is off the desktop (%dx%d)",
				  o->cursor_x, o->cursor_y, a->scale.desk_w, a->scale.desk_h);
	if (o->ok && !o->has_cursor && a->wire == DG_WIRE_ANTHROPIC &&
	    is_action(a, a->n - 1, "cursor_position"))
		return dg_err_set(err, -EINVAL, "answer: cursor_position ran but no cursor is given");
	if (!o->png && o->png_len)
		return dg_err_set(err, -EINVAL, "answer: %zu PNG bytes but no PNG", o->png_len);
	if (o->png && o->png_len > DG_ADAPT_PNG_MAX)
		return dg_err_set(err, -E2BIG, "answer: PNG of %zu bytes is over the limit of %d bytes",
				  o->png_len, DG_ADAPT_PNG_MAX);
	json_t *r;
	if (a->wire == DG_WIRE_ANTHROPIC) {
		r = anthropic_answer(a, o);
	} else {
		if (!a->has_id)
			return dg_err_set(err, -EINVAL, "answer: the call has no call_id to answer to");
		if (!o->png)
			return dg_err_set(err, -EINVAL,
					  "answer: an OpenAI answer needs the screenshot");
		r = openai_answer(a, o);
	}
	if (!r)
		return dg_err_set(err, -ENOMEM, "answer: out of memory");
	*out = r;
	return 0;
}
