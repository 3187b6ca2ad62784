/* action: the canonical action schema (see actions.h for the contract).
 *
 * Parsing walks a table of fields: which fields each type allows and
 * requires, then each present field in a fixed order, so for a given input
 * the first error reported is always the same. Nothing is written to the
 * caller's action until everything parsed; on any error it is zeroed.
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

enum field {
	F_X,
	F_Y,
	F_BUTTON,
	F_COUNT,
	F_MODIFIERS,
	F_PATH,
	F_DX,
	F_DY,
	F_TEXT,
	F_KEYS,
	F_MS,
	F_URL,
	F_REGION,
	F_ARGV,
	F_STDIN,
	F_TIMEOUT_MS,
	F_DEPTH,
	F_FILTER,
	F_REF,
	F_QUERY,
	F_TAB,
	F_VALUE,
	F_PATHS,
	F_CODE,
	F_N
};

static const char *const field_names[F_N] = {
	[F_X] = "x",         [F_Y] = "y",         [F_BUTTON] = "button", [F_COUNT] = "count",
	[F_MODIFIERS] = "modifiers",              [F_PATH] = "path",     [F_DX] = "dx",
	[F_DY] = "dy",       [F_TEXT] = "text",   [F_KEYS] = "keys",     [F_MS] = "ms",
	[F_URL] = "url",     [F_REGION] = "region", [F_ARGV] = "argv",   [F_STDIN] = "stdin",
	[F_TIMEOUT_MS] = "timeout_ms", [F_DEPTH] = "depth", [F_FILTER] = "filter", [F_REF] = "ref",
	[F_QUERY] = "query", [F_TAB] = "tab", [F_VALUE] = "value", [F_PATHS] = "paths",
	[F_CODE] = "code",
};

#define B(f) (1u << (f))
#define XY (B(F_X) | B(F_Y))

struct type_spec {
	const char *name;
	unsigned allowed;  /* fields besides "type" */
	unsigned required;
};

static const struct type_spec specs[DG_ACTION_N_TYPES] = {
	/* click and move need x, y or ref: checked in parse_obj. */
	[DG_ACTION_CLICK] = {"click", XY | B(F_BUTTON) | B(F_COUNT) | B(F_MODIFIERS) | B(F_REF), 0},
	[DG_ACTION_MOVE] = {"move", XY | B(F_MODIFIERS) | B(F_REF), 0},
	[DG_ACTION_DRAG] = {"drag", B(F_PATH) | B(F_BUTTON) | B(F_MODIFIERS), B(F_PATH)},
	[DG_ACTION_MOUSE_DOWN] = {"mouse_down", B(F_BUTTON) | XY, 0},
	[DG_ACTION_MOUSE_UP] = {"mouse_up", B(F_BUTTON) | XY, 0},
	[DG_ACTION_SCROLL] = {"scroll", XY | B(F_DX) | B(F_DY) | B(F_MODIFIERS), XY},
	[DG_ACTION_TYPE] = {"type", B(F_TEXT), B(F_TEXT)},
	[DG_ACTION_KEY] = {"key", B(F_KEYS), B(F_KEYS)},
	[DG_ACTION_HOLD_KEY] = {"hold_key", B(F_KEYS) | B(F_MS), B(F_KEYS) | B(F_MS)},
	[DG_ACTION_NAVIGATE] = {"navigate", B(F_URL), B(F_URL)},
	[DG_ACTION_BACK] = {"back", 0, 0},
	[DG_ACTION_FORWARD] = {"forward", 0, 0},
	[DG_ACTION_RELOAD] = {"reload", 0, 0},
	[DG_ACTION_SCREENSHOT] = {"screenshot", B(F_REGION), 0},
	[DG_ACTION_ZOOM] = {"zoom", B(F_REGION), B(F_REGION)},
	[DG_ACTION_CURSOR_POSITION] = {"cursor_position", 0, 0},
	[DG_ACTION_WAIT] = {"wait", B(F_MS), B(F_MS)},
	[DG_ACTION_EXEC] = {"exec", B(F_ARGV) | B(F_STDIN) | B(F_TIMEOUT_MS), B(F_ARGV)},
	[DG_ACTION_READ_PAGE] = {"read_page", B(F_DEPTH) | B(F_FILTER) | B(F_REF), 0},
	[DG_ACTION_GET_PAGE_TEXT] = {"get_page_text", 0, 0},
	[DG_ACTION_FIND] = {"find", B(F_QUERY), B(F_QUERY)},
	[DG_ACTION_LIST_TABS] = {"list_tabs", 0, 0},
	[DG_ACTION_NEW_TAB] = {"new_tab", 0, 0},
	[DG_ACTION_SWITCH_TAB] = {"switch_tab", B(F_TAB), B(F_TAB)},
	[DG_ACTION_CLOSE_TAB] = {"close_tab", B(F_TAB), B(F_TAB)},
	[DG_ACTION_READ_CONSOLE] = {"read_console", 0, 0},
	[DG_ACTION_READ_NETWORK] = {"read_network", 0, 0},
	[DG_ACTION_SCROLL_TO] = {"scroll_to", B(F_REF) | XY, B(F_REF)},
	[DG_ACTION_FORM_INPUT] = {"form_input", B(F_REF) | B(F_VALUE) | XY, B(F_REF) | B(F_VALUE)},
	[DG_ACTION_FILE_UPLOAD] = {"file_upload", B(F_REF) | B(F_PATHS) | XY, B(F_REF) | B(F_PATHS)},
	[DG_ACTION_JAVASCRIPT] = {"javascript", B(F_CODE), B(F_CODE)},
};

/* The types that take a ref and whose x, y the runner fills in. */
static bool takes_element(enum dg_action_type t)
{
	return t == DG_ACTION_CLICK || t == DG_ACTION_MOVE || t == DG_ACTION_SCROLL_TO ||
	       t == DG_ACTION_FORM_INPUT || t == DG_ACTION_FILE_UPLOAD;
}

bool dg_action_unresolved(const struct dg_action *a)
{
	return a && takes_element(a->type) && a->ref != 0 && !a->has_xy;
}

bool dg_action_type_browser_only(enum dg_action_type t)
{
	switch (t) {
	case DG_ACTION_NAVIGATE:
	case DG_ACTION_BACK:
	case DG_ACTION_FORWARD:
	case DG_ACTION_RELOAD:
	case DG_ACTION_READ_PAGE:
	case DG_ACTION_GET_PAGE_TEXT:
	case DG_ACTION_FIND:
	case DG_ACTION_LIST_TABS:
	case DG_ACTION_NEW_TAB:
	case DG_ACTION_SWITCH_TAB:
	case DG_ACTION_CLOSE_TAB:
	case DG_ACTION_READ_CONSOLE:
	case DG_ACTION_READ_NETWORK:
	case DG_ACTION_SCROLL_TO:
	case DG_ACTION_FORM_INPUT:
	case DG_ACTION_FILE_UPLOAD:
	case DG_ACTION_JAVASCRIPT:
		return true;
	default:
		return false;
	}
}

static const char *const read_filters[] = {
	[DG_READ_VISIBLE] = "visible", [DG_READ_INTERACTIVE] = "interactive", [DG_READ_ALL] = "all",
};

static const struct {
	const char *name;
	enum dg_button button;
} buttons[] = {
	{"left", DG_BUTTON_LEFT},   {"middle", DG_BUTTON_MIDDLE},   {"right", DG_BUTTON_RIGHT},
	{"back", DG_BUTTON_BACK},   {"forward", DG_BUTTON_FORWARD},
};

/* In DG_MOD_* bit order, which is the canonical order. */
static const struct {
	const char *name;
	uint32_t keysym;
} modifiers[DG_MOD_COUNT] = {
	{"ctrl", 0xffe3}, {"shift", 0xffe1}, {"alt", 0xffe9}, {"super", 0xffeb}, {"meta", 0xffe7},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const char *dg_action_type_name(enum dg_action_type t)
{
	return (unsigned)t < DG_ACTION_N_TYPES ? specs[t].name : NULL;
}

int dg_action_type_from_name(const char *name)
{
	for (int t = 0; t < DG_ACTION_N_TYPES; t++)
		if (strcmp(specs[t].name, name) == 0)
			return t;
	return -1;
}

const char *dg_button_name(enum dg_button b)
{
	for (size_t i = 0; i < N_OF(buttons); i++)
		if (buttons[i].button == b)
			return buttons[i].name;
	return NULL;
}

int dg_modifier_keysyms(unsigned mods, uint32_t out[DG_MOD_COUNT])
{
	int n = 0;
	for (int i = 0; i < DG_MOD_COUNT; i++)
		if (mods & (1u << i))
			out[n++] = modifiers[i].keysym;
	return n;
}

void dg_action_free(struct dg_action *a)
{
	if (!a)
		return;
	free(a->path);
	free(a->text);
	free(a->url);
	free(a->query);
	free(a->tab);
	free(a->code);
	if (a->paths)
		for (int i = 0; i < a->n_paths; i++)
			free(a->paths[i]);
	free(a->paths);
	if (a->argv)
		for (int i = 0; i < a->argc; i++)
			free(a->argv[i]);
	free(a->argv);
	free(a->stdin_data);
	memset(a, 0, sizeof(*a));
}

/* ---- parsing ---------------------------------------------------------------- */

struct pctx {
	int w, h;
	const struct type_spec *spec;
	struct dg_err *err;
};

/* Records "action<where>: <message>" and returns code. where is ".x",
 * ".path[2][0]" or "" for the action as a whole. */
static int fail(struct pctx *c, int code, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct pctx *c, int code, const char *where, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, code, "action%s: %s", where, msg);
}



static int get_int(struct pctx *c, const char *where, const json_t *v, json_int_t *out)
{
	if (!json_is_integer(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, where, "%s is not an integer", val);
	}
	*out = json_integer_value(v);
	return 0;
}

static int get_ranged(struct pctx *c, const char *where, const json_t *v, long lo, long hi,
		      int *out)
{
	json_int_t i = 0; /* set by get_int on success; -O3 cannot see it */
	int rc = get_int(c, where, v, &i);
	if (rc < 0)
		return rc;
	if (i < lo || i > hi)
		return fail(c, -EINVAL, where, "%" JSON_INTEGER_FORMAT " is out of range [%ld, %ld]",
			    i, lo, hi);
	*out = (int)i;
	return 0;
}

/* A coordinate on an axis of size `size`: 0 <= v < size, or 0 <= v <= size
 * when edge (the exclusive right/bottom edge of a region). */
static int get_coord(struct pctx *c, const char *where, const json_t *v, bool horizontal,
		     bool edge, int *out)
{
	json_int_t i = 0; /* set by get_int on success; -O3 cannot see it */
	int rc = get_int(c, where, v, &i);
	if (rc < 0)
		return rc;
	int size = horizontal ? c->w : c->h;
	if (i < 0 || i > size || (i == size && !edge))
		return fail(c, -EINVAL, where, "%" JSON_INTEGER_FORMAT
			    " is off the screen (%s %d)", i, horizontal ? "width" : "height", size);
	*out = (int)i;
	return 0;
}

/* A string value: *s and *len point into v. */
static int get_string(struct pctx *c, const char *where, const json_t *v, const char **s,
		      size_t *len)
{
	if (!json_is_string(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, where, "%s is not a string", val);
	}
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 0;
}

/* Checks s is valid UTF-8 (an object built with jansson's _nocheck calls
 * need not be); with no_controls, also refuses control characters (C0, DEL
 * and C1) and NUL. */
static int check_utf8(struct pctx *c, const char *where, const char *s, size_t len,
		      bool no_controls)
{
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		const char *why = NULL;
		size_t l = dg_utf8_decode((const unsigned char *)s + i, len - i, &cp, &why);
		if (l == 0)
			return fail(c, -EINVAL, where, "invalid UTF-8 at byte %zu (%s)", i, why);
		if (no_controls && (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)))
			return fail(c, -EINVAL, where, "control character U+%04X at byte %zu",
				    (unsigned)cp, i);
		i += l;
	}
	return 0;
}

static char *dup_bytes(const char *s, size_t len)
{
	char *d = malloc(len + 1);
	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

static int parse_button(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, ".button", v, &s, &len);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < N_OF(buttons); i++) {
		if (strlen(buttons[i].name) == len && memcmp(buttons[i].name, s, len) == 0) {
			a->button = buttons[i].button;
			return 0;
		}
	}
	char val[DG_SHOW_VALUE_BUF];
	dg_show_value(v, val, sizeof(val));
	return fail(c, -EINVAL, ".button",
		    "unknown button %s (allowed: left, middle, right, back, forward)", val);
}

static int parse_filter(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, ".filter", v, &s, &len);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < N_OF(read_filters); i++) {
		if (strlen(read_filters[i]) == len && memcmp(read_filters[i], s, len) == 0) {
			a->filter = (enum dg_read_filter)i;
			return 0;
		}
	}
	char val[DG_SHOW_VALUE_BUF];
	dg_show_value(v, val, sizeof(val));
	return fail(c, -EINVAL, ".filter", "unknown filter %s (allowed: visible, interactive, all)",
		    val);
}

int dg_ref_parse(const char *s, size_t len, int *ref)
{
	if (len < 5 || memcmp(s, "ref_", 4) != 0 || s[4] == '0')
		return -EINVAL;
	long n = 0;
	for (size_t i = 4; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (i - 4 < DG_ACTION_REF_DIGITS + 1) /* n stays below 10^10: no overflow */
			n = n * 10 + (s[i] - '0');
	}
	if (len - 4 > DG_ACTION_REF_DIGITS || n > DG_ACTION_REF_MAX)
		return -ERANGE;
	*ref = (int)n;
	return 0;
}

static int parse_ref(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, ".ref", v, &s, &len);
	if (rc < 0)
		return rc;
	rc = dg_ref_parse(s, len, &a->ref);
	if (rc < 0) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".ref", rc == -ERANGE ? "%s is past the last reference (ref_%d)"
							  : "%s is not an element reference (ref_N)",
			    val, DG_ACTION_REF_MAX);
	}
	return 0;
}

static int parse_modifiers(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".modifiers", "%s is not an array of modifier names", val);
	}
	size_t n = json_array_size(v);
	for (size_t i = 0; i < n; i++) {
		const json_t *m = json_array_get(v, i);
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), ".modifiers[%zu]", i);
		int rc = get_string(c, where, m, &s, &len);
		if (rc < 0)
			return rc;
		int k = 0;
		while (k < DG_MOD_COUNT &&
		       !(strlen(modifiers[k].name) == len && memcmp(modifiers[k].name, s, len) == 0))
			k++;
		dg_show_value(m, val, sizeof(val));
		if (k == DG_MOD_COUNT)
			return fail(c, -EINVAL, where,
				    "unknown modifier %s (allowed: ctrl, shift, alt, super, meta)", val);
		if (a->modifiers & (1u << k))
			return fail(c, -EINVAL, where, "modifier %s is given twice", val);
		a->modifiers |= 1u << k;
	}
	return 0;
}

static int parse_path(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".path", "%s is not an array of [x, y] points", val);
	}
	size_t n = json_array_size(v);
	if (n < 2 || n > DG_ACTION_PATH_MAX)
		return fail(c, -EINVAL, ".path", "%zu points; a drag takes 2 to %d", n,
			    DG_ACTION_PATH_MAX);
	a->path = calloc(n, sizeof(*a->path));
	if (!a->path)
		return fail(c, -ENOMEM, ".path", "out of memory");
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(v, i);
		snprintf(where, sizeof(where), ".path[%zu]", i);
		if (!json_is_array(p) || json_array_size(p) != 2) {
			dg_show_value(p, val, sizeof(val));
			return fail(c, -EINVAL, where, "%s is not an [x, y] pair", val);
		}
		for (int k = 0; k < 2; k++) {
			snprintf(where, sizeof(where), ".path[%zu][%d]", i, k);
			int rc = get_coord(c, where, json_array_get(p, (size_t)k), k == 0, false,
					   &a->path[i][k]);
			if (rc < 0)
				return rc;
		}
	}
	a->n_path = (int)n;
	return 0;
}

static int parse_text(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0, n = 0;
	struct dg_err e;
	int rc = get_string(c, ".text", v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return fail(c, -EINVAL, ".text", "empty (type needs at least one character)");
	if (len > DG_ACTION_TEXT_MAX)
		return fail(c, -EINVAL, ".text", "%zu bytes is over the limit of %d bytes", len,
			    DG_ACTION_TEXT_MAX);
	if (dg_text_to_keysyms(s, len, NULL, 0, &n, &e) < 0)
		return fail(c, -EINVAL, ".text", "%s", e.msg);
	/* Line breaks become "\n" ("\r\n" and "\r" type the same Return), so
	 * texts that type the same keys have the same canonical form. */
	a->text = malloc(len + 1);
	if (!a->text)
		return fail(c, -ENOMEM, ".text", "out of memory");
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] == '\r') {
			a->text[o++] = '\n';
			if (i + 1 < len && s[i + 1] == '\n')
				i++;
		} else {
			a->text[o++] = s[i];
		}
	}
	a->text[o] = '\0';
	a->text_len = o;
	return 0;
}

static int parse_keys(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	struct dg_err e;
	int rc = get_string(c, ".keys", v, &s, &len);
	if (rc < 0)
		return rc;
	if (memchr(s, '\0', len))
		return fail(c, -EINVAL, ".keys", "contains NUL");
	if (dg_keys_parse(s, a->chords, DG_ACTION_CHORDS_MAX, &a->n_chords, &e) < 0)
		return fail(c, -EINVAL, ".keys", "%s", e.msg);
	return 0;
}

/* A one-line string field (url, query): 1..max bytes of UTF-8 without
 * control characters, copied NUL-terminated into *out. */
static int parse_line(struct pctx *c, const char *where, const json_t *v, size_t max, char **out)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, where, v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return fail(c, -EINVAL, where, "empty");
	if (len > max)
		return fail(c, -EINVAL, where, "%zu bytes is over the limit of %zu bytes", len, max);
	rc = check_utf8(c, where, s, len, true);
	if (rc < 0)
		return rc;
	*out = dup_bytes(s, len);
	return *out ? 0 : fail(c, -ENOMEM, where, "out of memory");
}

static int parse_region(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v) || json_array_size(v) != 4) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".region", "%s is not an array [x1, y1, x2, y2]", val);
	}
	for (int k = 0; k < 4; k++) {
		snprintf(where, sizeof(where), ".region[%d]", k);
		int rc = get_coord(c, where, json_array_get(v, (size_t)k), k % 2 == 0, k >= 2,
				   &a->region[k]);
		if (rc < 0)
			return rc;
	}
	if (a->region[2] <= a->region[0])
		return fail(c, -EINVAL, ".region", "x2 (%d) must be greater than x1 (%d)",
			    a->region[2], a->region[0]);
	if (a->region[3] <= a->region[1])
		return fail(c, -EINVAL, ".region", "y2 (%d) must be greater than y1 (%d)",
			    a->region[3], a->region[1]);
	return 0;
}

static int parse_argv(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".argv", "%s is not an array of strings", val);
	}
	size_t n = json_array_size(v);
	if (n < 1 || n > DG_ACTION_ARGV_MAX)
		return fail(c, -EINVAL, ".argv", "%zu strings; exec takes 1 to %d", n,
			    DG_ACTION_ARGV_MAX);
	a->argv = calloc(n + 1, sizeof(*a->argv));
	if (!a->argv)
		return fail(c, -ENOMEM, ".argv", "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), ".argv[%zu]", i);
		int rc = get_string(c, where, json_array_get(v, i), &s, &len);
		if (rc < 0)
			return rc;
		if (len > DG_ACTION_ARG_MAX)
			return fail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
				    DG_ACTION_ARG_MAX);
		if (i == 0 && len == 0)
			return fail(c, -EINVAL, where, "empty (the program to run)");
		/* execve takes C strings: a NUL would silently cut the argument. */
		const char *nul = memchr(s, '\0', len);
		if (nul)
			return fail(c, -EINVAL, where, "contains NUL at byte %zu", (size_t)(nul - s));
		rc = check_utf8(c, where, s, len, false);
		if (rc < 0)
			return rc;
		a->argv[i] = dup_bytes(s, len);
		if (!a->argv[i])
			return fail(c, -ENOMEM, where, "out of memory");
		a->argc = (int)i + 1;
	}
	return 0;
}

static int parse_stdin(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, ".stdin", v, &s, &len);
	if (rc < 0)
		return rc;
	if (len > DG_ACTION_STDIN_MAX)
		return fail(c, -EINVAL, ".stdin", "%zu bytes is over the limit of %d bytes", len,
			    DG_ACTION_STDIN_MAX);
	rc = check_utf8(c, ".stdin", s, len, false);
	if (rc < 0)
		return rc;
	free(a->stdin_data);
	a->stdin_data = dup_bytes(s, len);
	if (!a->stdin_data)
		return fail(c, -ENOMEM, ".stdin", "out of memory");
	a->stdin_len = len;
	return 0;
}

/* A tab id: 1..DG_ACTION_TAB_MAX bytes of [0-9A-Za-z._-] (DevTools target
 * ids are 32 hex digits; nothing else needs quoting in a log or a URL). */
static int parse_tab(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	char val[DG_SHOW_VALUE_BUF];
	int rc = get_string(c, ".tab", v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0 || len > DG_ACTION_TAB_MAX)
		return fail(c, -EINVAL, ".tab", "%zu bytes; a tab id is 1 to %d bytes", len,
			    DG_ACTION_TAB_MAX);
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      ch == '.' || ch == '_' || ch == '-')) {
			dg_show_value(v, val, sizeof(val));
			return fail(c, -EINVAL, ".tab", "%s is not a tab id (letters, digits, '.', '_', "
				    "'-')", val);
		}
	}
	a->tab = dup_bytes(s, len);
	return a->tab ? 0 : fail(c, -ENOMEM, ".tab", "out of memory");
}

/* form_input's value: a string (kept in text, no NUL), a number or a
 * boolean, as the element takes it. */
static int parse_value(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char val[DG_SHOW_VALUE_BUF];
	if (json_is_boolean(v)) {
		a->value_kind = DG_VALUE_BOOL;
		a->flag = json_is_true(v);
		return 0;
	}
	if (json_is_number(v)) {
		a->value_kind = DG_VALUE_NUMBER;
		a->number = json_number_value(v);
		return 0;
	}
	if (!json_is_string(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".value", "%s is not a string, a number or a boolean", val);
	}
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (len > DG_ACTION_VALUE_MAX)
		return fail(c, -EINVAL, ".value", "%zu bytes is over the limit of %d bytes", len,
			    DG_ACTION_VALUE_MAX);
	const char *nul = memchr(s, '\0', len);
	if (nul)
		return fail(c, -EINVAL, ".value", "contains NUL at byte %zu", (size_t)(nul - s));
	int rc = check_utf8(c, ".value", s, len, false);
	if (rc < 0)
		return rc;
	a->value_kind = DG_VALUE_STRING;
	a->text = dup_bytes(s, len);
	a->text_len = len;
	return a->text ? 0 : fail(c, -ENOMEM, ".value", "out of memory");
}

/* One file_upload path: absolute, in canonical form (no empty, "." or ".."
 * component, no trailing slash), no control characters. Where it may be
 * is the runner's to check (the session's scratch space): the form is
 * checked here so that what is checked there is what the browser opens. */
static int check_file_path(struct pctx *c, const char *where, const char *s, size_t len)
{
	if (len == 0 || s[0] != '/')
		return fail(c, -EINVAL, where, "not an absolute path");
	if (len > DG_ACTION_FILE_PATH_MAX)
		return fail(c, -EINVAL, where, "%zu bytes is over the limit of %d bytes", len,
			    DG_ACTION_FILE_PATH_MAX);
	int rc = check_utf8(c, where, s, len, true);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < len;) {
		size_t j = i + 1;
		while (j < len && s[j] != '/')
			j++;
		size_t n = j - i - 1; /* the component after s[i] == '/' */
		if (n == 0 || (n == 1 && s[i + 1] == '.') ||
		    (n == 2 && s[i + 1] == '.' && s[i + 2] == '.'))
			return fail(c, -EINVAL, where, "not a canonical path (an empty, \".\" or "
				    "\"..\" component at byte %zu)", i);
		i = j;
	}
	return 0;
}

static int parse_paths(struct pctx *c, const json_t *v, struct dg_action *a)
{
	char where[64], val[DG_SHOW_VALUE_BUF];
	if (!json_is_array(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, -EINVAL, ".paths", "%s is not an array of paths", val);
	}
	size_t n = json_array_size(v);
	if (n < 1 || n > DG_ACTION_PATHS_MAX)
		return fail(c, -EINVAL, ".paths", "%zu paths; file_upload takes 1 to %d", n,
			    DG_ACTION_PATHS_MAX);
	a->paths = calloc(n, sizeof(*a->paths));
	if (!a->paths)
		return fail(c, -ENOMEM, ".paths", "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), ".paths[%zu]", i);
		int rc = get_string(c, where, json_array_get(v, i), &s, &len);
		if (rc == 0)
			rc = check_file_path(c, where, s, len);
		if (rc < 0)
			return rc;
		a->paths[i] = dup_bytes(s, len);
		if (!a->paths[i])
			return fail(c, -ENOMEM, where, "out of memory");
		a->n_paths = (int)i + 1;
	}
	return 0;
}

static int parse_code(struct pctx *c, const json_t *v, struct dg_action *a)
{
	const char *s = NULL;
	size_t len = 0;
	int rc = get_string(c, ".code", v, &s, &len);
	if (rc < 0)
		return rc;
	if (len == 0)
		return fail(c, -EINVAL, ".code", "empty");
	if (len > DG_ACTION_CODE_MAX)
		return fail(c, -EINVAL, ".code", "%zu bytes is over the limit of %d bytes", len,
			    DG_ACTION_CODE_MAX);
	const char *nul = memchr(s, '\0', len);
	if (nul)
		return fail(c, -EINVAL, ".code", "contains NUL at byte %zu", (size_t)(nul - s));
	rc = check_utf8(c, ".code", s, len, false);
	if (rc < 0)
		return rc;
	a->code = dup_bytes(s, len);
	a->code_len = len;
	return a->code ? 0 : fail(c, -ENOMEM, ".code", "out of memory");
}

/* Parses field f of value v into a. */
static int parse_field(struct pctx *c, enum field f, const json_t *v, struct dg_action *a)
{
	switch (f) {
	case F_X:
		return get_coord(c, ".x", v, true, false, &a->x);
	case F_Y:
		return get_coord(c, ".y", v, false, false, &a->y);
	case F_BUTTON:
		return parse_button(c, v, a);
	case F_COUNT:
		return get_ranged(c, ".count", v, 1, DG_ACTION_COUNT_MAX, &a->count);
	case F_MODIFIERS:
		return parse_modifiers(c, v, a);
	case F_PATH:
		return parse_path(c, v, a);
	case F_DX:
		return get_ranged(c, ".dx", v, -DG_ACTION_SCROLL_MAX, DG_ACTION_SCROLL_MAX, &a->dx);
	case F_DY:
		return get_ranged(c, ".dy", v, -DG_ACTION_SCROLL_MAX, DG_ACTION_SCROLL_MAX, &a->dy);
	case F_TEXT:
		return parse_text(c, v, a);
	case F_KEYS:
		return parse_keys(c, v, a);
	case F_MS:
		return get_ranged(c, ".ms", v, 0,
				  a->type == DG_ACTION_WAIT ? DG_ACTION_WAIT_MS_MAX
							    : DG_ACTION_HOLD_MS_MAX,
				  &a->ms);
	case F_URL:
		return parse_line(c, ".url", v, DG_ACTION_URL_MAX, &a->url);
	case F_REGION:
		return parse_region(c, v, a);
	case F_ARGV:
		return parse_argv(c, v, a);
	case F_STDIN:
		return parse_stdin(c, v, a);
	case F_TIMEOUT_MS:
		return get_ranged(c, ".timeout_ms", v, 1, DG_ACTION_TIMEOUT_MS_MAX, &a->timeout_ms);
	case F_DEPTH:
		return get_ranged(c, ".depth", v, 1, DG_ACTION_DEPTH_MAX, &a->depth);
	case F_FILTER:
		return parse_filter(c, v, a);
	case F_REF:
		return parse_ref(c, v, a);
	case F_QUERY:
		return parse_line(c, ".query", v, DG_ACTION_QUERY_MAX, &a->query);
	case F_TAB:
		return parse_tab(c, v, a);
	case F_VALUE:
		return parse_value(c, v, a);
	case F_PATHS:
		return parse_paths(c, v, a);
	case F_CODE:
		return parse_code(c, v, a);
	case F_N:
		break;
	}
	return fail(c, -EINVAL, "", "internal error: field %d", (int)f);
}

/* "x, y, button" for the fields in mask. */
static void list_fields(unsigned mask, char *out, size_t out_len)
{
	size_t o = 0;
	out[0] = '\0';
	for (int f = 0; f < F_N; f++) {
		if (!(mask & B(f)))
			continue;
		int w = snprintf(out + o, out_len - o, "%s%s", o ? ", " : "", field_names[f]);
		if (w < 0 || (size_t)w >= out_len - o)
			return;
		o += (size_t)w;
	}
}

/* Which field key (key_len bytes, possibly holding NUL) names, or F_N. */
static enum field field_index(const char *key, size_t key_len)
{
	for (int f = 0; f < F_N; f++)
		if (strlen(field_names[f]) == key_len && memcmp(field_names[f], key, key_len) == 0)
			return (enum field)f;
	return F_N;
}

static int parse_type(struct pctx *c, const json_t *obj, enum dg_action_type *t)
{
	const json_t *v = json_object_get(obj, "type");
	const char *s = NULL;
	size_t len = 0;
	char val[DG_SHOW_VALUE_BUF];
	if (!v)
		return fail(c, -EINVAL, ".type", "missing (what the action is: click, type, key, ...)");
	int rc = get_string(c, ".type", v, &s, &len);
	if (rc < 0)
		return rc;
	for (int i = 0; i < DG_ACTION_N_TYPES; i++) {
		if (strlen(specs[i].name) == len && memcmp(specs[i].name, s, len) == 0) {
			*t = (enum dg_action_type)i;
			return 0;
		}
	}
	dg_show_value(v, val, sizeof(val));
	return fail(c, -EINVAL, ".type", "unknown action %s", val);
}

/* The canonical encoding's length, checked so that every accepted action
 * encodes to text that dg_action_parse accepts again. */
static int check_canonical_size(struct pctx *c, const struct dg_action *a)
{
	size_t len = 0;
	char *s = dg_action_canonical(a, &len);
	if (!s)
		return fail(c, -ENOMEM, "", "out of memory");
	free(s);
	if (len > DG_ACTION_JSON_MAX)
		return fail(c, -E2BIG, "",
			    "canonical form is %zu bytes, over the limit of %d bytes", len,
			    DG_ACTION_JSON_MAX);
	return 0;
}

static int parse_obj(struct pctx *c, const json_t *obj, struct dg_action *a)
{
	char val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF], allowed[256];
	if (!json_is_object(obj)) {
		dg_show_value(obj, val, sizeof(val));
		return fail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	enum dg_action_type t = DG_ACTION_N_TYPES; /* set by parse_type on success */
	int rc = parse_type(c, obj, &t);
	if (rc < 0)
		return rc;
	a->type = t;
	c->spec = &specs[t];

	const char *key;
	size_t key_len;
	json_t *v;
	unsigned present = 0;
	json_object_keylen_foreach((json_t *)obj, key, key_len, v)
	{
		if (key_len == 4 && memcmp(key, "type", 4) == 0)
			continue;
		enum field f = field_index(key, key_len);
		if (f == F_N || !(c->spec->allowed & B(f))) {
			dg_show(key, key_len, esc, sizeof(esc));
			if (!c->spec->allowed)
				return fail(c, -EINVAL, "", "unknown field \"%s\" (%s takes no fields)",
					    esc, c->spec->name);
			list_fields(c->spec->allowed, allowed, sizeof(allowed));
			return fail(c, -EINVAL, "", "unknown field \"%s\" for %s (allowed: %s)", esc,
				    c->spec->name, allowed);
		}
		present |= B(f);
	}
	for (int f = 0; f < F_N; f++) {
		if ((c->spec->required & B(f)) && !(present & B(f))) {
			char where[64];
			snprintf(where, sizeof(where), ".%s", field_names[f]);
			return fail(c, -EINVAL, where, "required for %s", c->spec->name);
		}
	}

	/* Defaults, then the fields given. */
	a->button = DG_BUTTON_LEFT;
	a->count = 1;
	if (t == DG_ACTION_READ_PAGE)
		a->depth = DG_ACTION_DEPTH_DEFAULT;
	for (int f = 0; f < F_N; f++) {
		if (!(present & B(f)))
			continue;
		rc = parse_field(c, (enum field)f, json_object_get(obj, field_names[f]), a);
		if (rc < 0)
			return rc;
	}

	if (t == DG_ACTION_SCREENSHOT)
		a->has_region = (present & B(F_REGION)) != 0;
	if ((t == DG_ACTION_CLICK || t == DG_ACTION_MOVE) && !(present & B(F_REF))) {
		if (!(present & B(F_X)))
			return fail(c, -EINVAL, ".x", "required for %s (or ref: an element)",
				    c->spec->name);
		if (!(present & B(F_Y)))
			return fail(c, -EINVAL, ".y", "required for %s (or ref: an element)",
				    c->spec->name);
	}
	switch (t) {
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_SCROLL_TO:
	case DG_ACTION_FORM_INPUT:
	case DG_ACTION_FILE_UPLOAD:
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
		if ((present & XY) == B(F_X))
			return fail(c, -EINVAL, ".y", "required with x (give both or neither)");
		if ((present & XY) == B(F_Y))
			return fail(c, -EINVAL, ".x", "required with y (give both or neither)");
		a->has_xy = (present & XY) == XY;
		break;
	case DG_ACTION_SCROLL:
		if (a->dx == 0 && a->dy == 0)
			return fail(c, -EINVAL, "", "scroll needs dx or dy other than 0");
		break;
	case DG_ACTION_HOLD_KEY:
		if (a->n_chords != 1)
			return fail(c, -EINVAL, ".keys", "hold_key holds one chord, got %d",
				    a->n_chords);
		break;
	case DG_ACTION_EXEC:
		if (!a->stdin_data) {
			a->stdin_data = dup_bytes("", 0);
			if (!a->stdin_data)
				return fail(c, -ENOMEM, ".stdin", "out of memory");
		}
		break;
	default:
		break;
	}
	return check_canonical_size(c, a);
}

int dg_action_parse_obj(const json_t *obj, int screen_w, int screen_h, struct dg_action *a,
			struct dg_err *err)
{
	struct pctx c = {.w = screen_w, .h = screen_h, .err = err};
	memset(a, 0, sizeof(*a));
	if (screen_w < 1 || screen_w > DG_ACTION_SCREEN_MAX || screen_h < 1 ||
	    screen_h > DG_ACTION_SCREEN_MAX)
		return dg_err_set(err, -EINVAL, "action: screen %dx%d is not a valid size (1 to %d)",
				  screen_w, screen_h, DG_ACTION_SCREEN_MAX);
	if (!obj)
		return dg_err_set(err, -EINVAL, "action: no object");
	int rc = parse_obj(&c, obj, a);
	if (rc < 0)
		dg_action_free(a);
	return rc;
}

int dg_action_parse(const char *json, size_t len, int screen_w, int screen_h,
		    struct dg_action *a, struct dg_err *err)
{
	memset(a, 0, sizeof(*a));
	if (len > DG_ACTION_JSON_MAX)
		return dg_err_set(err, -E2BIG, "action: %zu bytes is over the limit of %d bytes",
				  len, DG_ACTION_JSON_MAX);
	if (!json)
		return dg_err_set(err, -EINVAL, "action: no text");
	json_error_t je;
	/* JSON_ALLOW_NUL lets "\u0000" through the decoder so that the field
	 * checks can refuse it with a message naming the field (or keep it, in
	 * exec.stdin). */
	json_t *obj = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	if (!obj) {
		char text[DG_SHOW_BUF];
		dg_show(je.text, strnlen(je.text, sizeof(je.text) - 1), text, sizeof(text));
		if (json_error_code(&je) == json_error_out_of_memory)
			return dg_err_set(err, -ENOMEM, "action: out of memory");
		if (json_error_code(&je) == json_error_duplicate_key)
			return dg_err_set(err, -EINVAL,
					  "action: duplicated field at line %d, column %d (%s)",
					  je.line, je.column, text);
		return dg_err_set(err, -EINVAL, "action: invalid JSON at line %d, column %d: %s",
				  je.line, je.column, text);
	}
	int rc = dg_action_parse_obj(obj, screen_w, screen_h, a, err);
	json_decref(obj);
	return rc;
}

/* ---- canonical form ---------------------------------------------------------- */

/* Sets key to value (a new reference, may be NULL) and records a failure in
 * *ok; json_object_set_new releases value when it fails. */
static void put(json_t *o, const char *key, json_t *value, bool *ok)
{
	if (json_object_set_new(o, key, value) != 0)
		*ok = false;
}

static json_t *modifiers_json(unsigned mods)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < DG_MOD_COUNT; i++) {
		if ((mods & (1u << i)) && json_array_append_new(arr, json_string(modifiers[i].name))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *ints_json(const int *v, int n)
{
	json_t *arr = json_array();
	for (int i = 0; arr && i < n; i++) {
		if (json_array_append_new(arr, json_integer(v[i]))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *keys_json(const struct dg_action *a)
{
	size_t len = DG_ACTION_KEYS_MAX + 1;
	char *buf = malloc(len);
	json_t *s = NULL;
	if (buf && dg_keys_format(a->chords, a->n_chords, buf, len) == 0)
		s = json_string(buf);
	free(buf);
	return s;
}

/* "ref": "ref_N" when n is not 0. */
static void put_ref(json_t *o, int n, bool *ok)
{
	if (n) {
		char ref[32];
		snprintf(ref, sizeof(ref), "ref_%d", n);
		put(o, "ref", json_string(ref), ok);
	}
}

/* A number as jansson would read it back the same: an integer when it is
 * one (so 3 stays 3, not 3.0), else a real. */
static json_t *json_real_or_integer(double d)
{
	if (d == floor(d) && fabs(d) < 9007199254740992.0)
		return json_integer((json_int_t)d);
	return json_real(d);
}

json_t *dg_action_to_json(const struct dg_action *a)
{
	if ((unsigned)a->type >= DG_ACTION_N_TYPES)
		return NULL;
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = true;
	put(o, "type", json_string(specs[a->type].name), &ok);
	switch (a->type) {
	case DG_ACTION_CLICK:
		put(o, "button", json_string(dg_button_name(a->button)), &ok);
		put(o, "count", json_integer(a->count), &ok);
		/* fallthrough */
	case DG_ACTION_MOVE:
		if (a->has_xy) {
			put(o, "x", json_integer(a->x), &ok);
			put(o, "y", json_integer(a->y), &ok);
		}
		put_ref(o, a->ref, &ok);
		put(o, "modifiers", modifiers_json(a->modifiers), &ok);
		break;
	case DG_ACTION_SCROLL_TO:
	case DG_ACTION_FORM_INPUT:
	case DG_ACTION_FILE_UPLOAD:
		if (a->has_xy) {
			put(o, "x", json_integer(a->x), &ok);
			put(o, "y", json_integer(a->y), &ok);
		}
		put_ref(o, a->ref, &ok);
		if (a->type == DG_ACTION_FORM_INPUT)
			put(o, "value", a->value_kind == DG_VALUE_STRING ? json_stringn(a->text, a->text_len)
					: a->value_kind == DG_VALUE_BOOL ? json_boolean(a->flag)
					: json_real_or_integer(a->number), &ok);
		if (a->type == DG_ACTION_FILE_UPLOAD) {
			json_t *paths = json_array();
			for (int i = 0; paths && i < a->n_paths; i++) {
				if (json_array_append_new(paths, json_string(a->paths[i]))) {
					json_decref(paths);
					paths = NULL;
				}
			}
			put(o, "paths", paths, &ok);
		}
		break;
	case DG_ACTION_SWITCH_TAB:
	case DG_ACTION_CLOSE_TAB:
		put(o, "tab", json_string(a->tab), &ok);
		break;
	case DG_ACTION_JAVASCRIPT:
		put(o, "code", json_stringn(a->code, a->code_len), &ok);
		break;
	case DG_ACTION_DRAG: {
		json_t *path = json_array();
		for (int i = 0; path && i < a->n_path; i++) {
			if (json_array_append_new(path, ints_json(a->path[i], 2))) {
				json_decref(path);
				path = NULL;
			}
		}
		put(o, "path", path, &ok);
		put(o, "button", json_string(dg_button_name(a->button)), &ok);
		put(o, "modifiers", modifiers_json(a->modifiers), &ok);
		break;
	}
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
		put(o, "button", json_string(dg_button_name(a->button)), &ok);
		if (a->has_xy) {
			put(o, "x", json_integer(a->x), &ok);
			put(o, "y", json_integer(a->y), &ok);
		}
		break;
	case DG_ACTION_SCROLL:
		put(o, "x", json_integer(a->x), &ok);
		put(o, "y", json_integer(a->y), &ok);
		put(o, "dx", json_integer(a->dx), &ok);
		put(o, "dy", json_integer(a->dy), &ok);
		put(o, "modifiers", modifiers_json(a->modifiers), &ok);
		break;
	case DG_ACTION_TYPE:
		put(o, "text", json_stringn(a->text, a->text_len), &ok);
		break;
	case DG_ACTION_HOLD_KEY:
		put(o, "ms", json_integer(a->ms), &ok);
		/* fallthrough */
	case DG_ACTION_KEY:
		put(o, "keys", keys_json(a), &ok);
		break;
	case DG_ACTION_NAVIGATE:
		put(o, "url", json_string(a->url), &ok);
		break;
	case DG_ACTION_ZOOM:
		put(o, "region", ints_json(a->region, 4), &ok);
		break;
	case DG_ACTION_SCREENSHOT:
		if (a->has_region)
			put(o, "region", ints_json(a->region, 4), &ok);
		break;
	case DG_ACTION_WAIT:
		put(o, "ms", json_integer(a->ms), &ok);
		break;
	case DG_ACTION_EXEC: {
		json_t *argv = json_array();
		for (int i = 0; argv && i < a->argc; i++) {
			if (json_array_append_new(argv, json_string(a->argv[i]))) {
				json_decref(argv);
				argv = NULL;
			}
		}
		put(o, "argv", argv, &ok);
		put(o, "stdin", json_stringn(a->stdin_data ? a->stdin_data : "", a->stdin_len), &ok);
		if (a->timeout_ms)
			put(o, "timeout_ms", json_integer(a->timeout_ms), &ok);
		break;
	}
	case DG_ACTION_READ_PAGE:
		put(o, "depth", json_integer(a->depth), &ok);
		put(o, "filter", json_string(read_filters[a->filter]), &ok);
		put_ref(o, a->ref, &ok);
		break;
	case DG_ACTION_FIND:
		put(o, "query", json_string(a->query), &ok);
		break;
	case DG_ACTION_BACK:
	case DG_ACTION_FORWARD:
	case DG_ACTION_RELOAD:
	case DG_ACTION_CURSOR_POSITION:
	case DG_ACTION_GET_PAGE_TEXT:
	case DG_ACTION_LIST_TABS:
	case DG_ACTION_NEW_TAB:
	case DG_ACTION_READ_CONSOLE:
	case DG_ACTION_READ_NETWORK:
	case DG_ACTION_N_TYPES:
		break;
	}
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

char *dg_action_canonical(const struct dg_action *a, size_t *len)
{
	json_t *o = dg_action_to_json(a);
	if (!o)
		return NULL;
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (s && len)
		*len = strlen(s);
	return s;
}
