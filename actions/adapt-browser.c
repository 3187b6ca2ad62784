/* adapt-browser: Anthropic's browser toolset (browser_toolset_20260801), its
 * members translated into canonical actions; the tools list that says
 * which members the model was offered (dg_toolsets_parse); and resolving:
 * members that act at viewport coordinates or on an element wait for the
 * page's geometry (dg_adapt_resolve_wants, dg_adapt_resolve). The contract
 * is in actions.h ("Anthropic's toolsets", "Resolving"); the member docs
 * are the SDK's (@anthropic-ai/sdk, resources/beta/messages/messages.d.ts).
 *
 * Coordinates of the browser toolset are viewport pixels: the page's
 * viewport as a full-viewport screenshot shows it, which is a rectangle
 * of the screen one-to-one (the session's model display scaling is for
 * the computer tools, which see the whole screen). A member's canonical
 * action is in screen coordinates, made once the viewport's place is
 * known; until then the member is "pending" and its canonical object a
 * template (bcall.tmpl) with what to fill in (bcall.kind, bcall.v).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"
#include "actions/adapt-priv.h"

/* ---- the members -------------------------------------------------------------- */

static const char *const bfield_names[BF_N] = {
	[BF_URL] = "url",           [BF_TAB] = "tab_id",         [BF_DEPTH] = "depth",
	[BF_FILTER] = "filter",     [BF_REF] = "ref",            [BF_QUERY] = "query",
	[BF_TARGET] = "target",     [BF_VALUE] = "value",        [BF_PATHS] = "paths",
	[BF_DOCS] = "document_ids", [BF_REGION] = "region",      [BF_MODS] = "modifiers",
	[BF_FROM] = "from",         [BF_DIR] = "scroll_direction", [BF_AMOUNT] = "scroll_amount",
	[BF_TEXT] = "text",         [BF_REPEAT] = "repeat",      [BF_DURATION] = "duration",
};

enum bkind {
	BK_NAVIGATE, BK_CANON, BK_TAB_ACT, BK_READ_PAGE, BK_FIND, BK_FORM, BK_UPLOAD, BK_SCROLL_TO,
	BK_SCREENSHOT, BK_ZOOM, BK_CLICK, BK_HOVER, BK_DRAG, BK_UPDOWN, BK_MOVE, BK_SCROLL,
	BK_TYPE, BK_KEY, BK_HOLD, BK_WAIT, BK_JS,
};

/* What dg_adapt_resolve fills into a pending member's template. */
enum fill {
	FILL_NONE,     /* nothing: only its tab had to come to the front */
	FILL_POINT,    /* "x", "y": the viewport point v[0], v[1] */
	FILL_DRAG,     /* "path": the viewport points v[0], v[1] and v[2], v[3] */
	FILL_VIEWPORT, /* "region": the viewport */
	FILL_REGION,   /* "region": the viewport region v[0..3] */
	FILL_ELEMENT,  /* "x", "y": the element's point */
};

#define T B(BF_TAB)
#define TARGETED (B(BF_TARGET) | B(BF_MODS) | T)

/* In the SDK's order (BETA_BROWSER_MEMBER_NAME_VALUES): bit i of
 * dg_toolsets.browser_off is member i. */
static const struct {
	const char *name;
	enum bkind kind;
	const char *canon;  /* the canonical type (BK_CANON, BK_TAB_ACT, ...) */
	const char *button; /* clicks */
	int count;
	unsigned allowed, required;
} members[DG_BROWSER_MEMBERS] = {
	{"navigate", BK_NAVIGATE, "navigate", NULL, 0, B(BF_URL) | T, B(BF_URL)},
	{"list_tabs", BK_CANON, "list_tabs", NULL, 0, 0, 0},
	{"new_tab", BK_CANON, "new_tab", NULL, 0, 0, 0},
	{"switch_tab", BK_TAB_ACT, "switch_tab", NULL, 0, T, T},
	{"close_tab", BK_TAB_ACT, "close_tab", NULL, 0, T, T},
	{"read_page", BK_READ_PAGE, "read_page", NULL, 0,
	 B(BF_DEPTH) | B(BF_FILTER) | B(BF_REF) | T, 0},
	{"get_page_text", BK_CANON, "get_page_text", NULL, 0, T, 0},
	{"read_console", BK_CANON, "read_console", NULL, 0, T, 0},
	{"read_network", BK_CANON, "read_network", NULL, 0, T, 0},
	{"find", BK_FIND, "find", NULL, 0, B(BF_QUERY) | T, B(BF_QUERY)},
	{"form_input", BK_FORM, "form_input", NULL, 0, B(BF_TARGET) | B(BF_VALUE) | T,
	 B(BF_TARGET) | B(BF_VALUE)},
	{"file_upload", BK_UPLOAD, "file_upload", NULL, 0,
	 B(BF_TARGET) | B(BF_PATHS) | B(BF_DOCS) | T, B(BF_TARGET)},
	{"scroll_to", BK_SCROLL_TO, "scroll_to", NULL, 0, B(BF_TARGET) | T, B(BF_TARGET)},
	{"screenshot", BK_SCREENSHOT, "screenshot", NULL, 0, T, 0},
	{"zoom", BK_ZOOM, "zoom", NULL, 0, B(BF_REGION) | T, B(BF_REGION)},
	{"left_click", BK_CLICK, "click", "left", 1, TARGETED, B(BF_TARGET)},
	{"right_click", BK_CLICK, "click", "right", 1, TARGETED, B(BF_TARGET)},
	{"middle_click", BK_CLICK, "click", "middle", 1, TARGETED, B(BF_TARGET)},
	{"double_click", BK_CLICK, "click", "left", 2, TARGETED, B(BF_TARGET)},
	{"triple_click", BK_CLICK, "click", "left", 3, TARGETED, B(BF_TARGET)},
	{"hover", BK_HOVER, "move", NULL, 0, B(BF_TARGET) | T, B(BF_TARGET)},
	{"left_click_drag", BK_DRAG, "drag", NULL, 0, B(BF_FROM) | B(BF_TARGET) | T,
	 B(BF_FROM) | B(BF_TARGET)},
	{"left_mouse_down", BK_UPDOWN, "mouse_down", NULL, 0, B(BF_TARGET) | T, B(BF_TARGET)},
	{"left_mouse_up", BK_UPDOWN, "mouse_up", NULL, 0, B(BF_TARGET) | T, B(BF_TARGET)},
	{"mouse_move", BK_MOVE, "move", NULL, 0, B(BF_TARGET) | T, B(BF_TARGET)},
	{"scroll", BK_SCROLL, "scroll", NULL, 0, B(BF_DIR) | B(BF_TARGET) | B(BF_AMOUNT) | T,
	 B(BF_DIR) | B(BF_TARGET)},
	{"type", BK_TYPE, "type", NULL, 0, B(BF_TEXT) | T, B(BF_TEXT)},
	{"key", BK_KEY, "key", NULL, 0, B(BF_TEXT) | B(BF_REPEAT) | T, B(BF_TEXT)},
	{"hold_key", BK_HOLD, "hold_key", NULL, 0, B(BF_TEXT) | B(BF_DURATION) | T,
	 B(BF_TEXT) | B(BF_DURATION)},
	{"wait", BK_WAIT, "wait", NULL, 0, B(BF_DURATION) | T, B(BF_DURATION)},
	{"javascript_exec", BK_JS, "javascript", NULL, 0, B(BF_TEXT) | T, B(BF_TEXT)},
};

/* The computer toolset's members in the SDK's order
 * (BETA_COMPUTER_MEMBER_NAME_VALUES): bit i of computer_off. */
static const char *const computer_members[DG_COMPUTER_MEMBERS] = {
	"key", "hold_key", "type", "cursor_position", "mouse_move", "left_mouse_down",
	"left_mouse_up", "left_click", "left_click_drag", "right_click", "middle_click",
	"double_click", "triple_click", "scroll", "wait", "screenshot", "zoom",
};

const char *dg_browser_member_name(int i)
{
	return i >= 0 && i < DG_BROWSER_MEMBERS ? members[i].name : NULL;
}

const char *dg_adapt_computer_member_name(int i)
{
	return i >= 0 && i < DG_COMPUTER_MEMBERS ? computer_members[i] : NULL;
}

const char *dg_adapt_bfield_name(int f)
{
	return f >= 0 && f < BF_N ? bfield_names[f] : NULL;
}

/* The kinds of target a member of kind k takes in field f (BF_TARGET or
 * BF_FROM): the one place dg_adapt_browser_member and the schemas learn
 * it from. */
static unsigned target_kinds(enum bkind k, enum dg_bfield f)
{
	if (f == BF_FROM)
		return DG_BTARGET_COORD; /* a drag starts at a point */
	switch (k) {
	case BK_FORM:
	case BK_UPLOAD:
	case BK_SCROLL_TO:
		return DG_BTARGET_REF;
	case BK_CLICK:
	case BK_HOVER:
		return DG_BTARGET_REF | DG_BTARGET_COORD;
	default:
		return DG_BTARGET_COORD;
	}
}

int dg_adapt_browser_input(int i, struct dg_bmember *out)
{
	if (i < 0 || i >= DG_BROWSER_MEMBERS)
		return -ENOENT;
	out->name = members[i].name;
	out->accepted = members[i].allowed;
	out->required = members[i].required;
	/* file_upload takes document_ids to refuse it with a word on what to
	 * do instead, and checks paths itself (dg_adapt_browser_member). */
	if (members[i].kind == BK_UPLOAD) {
		out->accepted &= ~B(BF_DOCS);
		out->required |= B(BF_PATHS);
	}
	out->target = (out->accepted & B(BF_TARGET)) ? target_kinds(members[i].kind, BF_TARGET) : 0;
	out->from = (out->accepted & B(BF_FROM)) ? target_kinds(members[i].kind, BF_FROM) : 0;
	return 0;
}

/* ---- the tools list ---------------------------------------------------------------- */

/* One toolset entry's "configs": {MEMBER: {enabled?, defer_loading?} | null}. */
static int parse_configs(struct dg_adapt_ctx *c, const json_t *v, const char *const *names,
			 int n_names, uint32_t *off)
{
	char val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF], where[96];
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".configs", "%s is not an object of member configs",
				     val);
	}
	const char *key;
	size_t key_len;
	json_t *cfg;
	json_object_keylen_foreach((json_t *)v, key, key_len, cfg)
	{
		int m = 0;
		while (m < n_names && !(strlen(names[m]) == key_len && memcmp(names[m], key, key_len) == 0))
			m++;
		dg_show(key, key_len, esc, sizeof(esc));
		if (m == n_names)
			return dg_adapt_fail(c, -EINVAL, ".configs", "unknown member \"%s\" (the "
					     "toolset's members are its only keys)", esc);
		if (json_is_null(cfg))
			continue;
		snprintf(where, sizeof(where), ".configs.%s", names[m]);
		static const char *const cfg_names[] = {"enabled", "defer_loading"};
		struct dg_adapt_fields f = {cfg_names, 2, NULL, "a member config", B(0) | B(1), 0};
		unsigned present = 0;
		if (!json_is_object(cfg)) {
			dg_show_value(cfg, val, sizeof(val));
			return dg_adapt_fail(c, -EINVAL, where, "%s is not an object {enabled?, "
					     "defer_loading?}", val);
		}
		char saved[sizeof(c->prefix)];
		snprintf(saved, sizeof(saved), "%s", c->prefix);
		snprintf(c->prefix, sizeof(c->prefix), "%.20s%.27s", saved, where);
		int rc = dg_adapt_check_fields(c, cfg, &f, &present);
		for (int k = 0; rc == 0 && k < 2; k++) {
			const json_t *b = json_object_get(cfg, cfg_names[k]);
			if ((present & B(k)) && !json_is_boolean(b)) {
				dg_show_value(b, val, sizeof(val));
				char w2[32];
				snprintf(w2, sizeof(w2), ".%s", cfg_names[k]);
				rc = dg_adapt_fail(c, -EINVAL, w2, "%s is not true or false", val);
			}
		}
		snprintf(c->prefix, sizeof(c->prefix), "%s", saved);
		if (rc < 0)
			return rc;
		if (json_is_false(json_object_get(cfg, "enabled")))
			*off |= 1u << m;
	}
	return 0;
}

int dg_toolsets_parse(const json_t *tools, struct dg_toolsets *t, struct dg_err *err)
{
	struct dg_adapt_ctx c = {.err = err};
	char val[DG_SHOW_VALUE_BUF];
	memset(t, 0, sizeof(*t));
	snprintf(c.prefix, sizeof(c.prefix), "tools");
	if (!json_is_array(tools)) {
		dg_show_value(tools, val, sizeof(val));
		return dg_adapt_fail(&c, -EINVAL, "", "%s is not an array of tool definitions", val);
	}
	if (json_array_size(tools) > DG_TOOLSETS_ENTRIES_MAX)
		return dg_adapt_fail(&c, -EINVAL, "", "%zu entries; at most %d",
				     json_array_size(tools), DG_TOOLSETS_ENTRIES_MAX);
	static const char *const names[] = {"configs", "cache_control"};
	for (size_t i = 0; i < json_array_size(tools); i++) {
		const json_t *e = json_array_get(tools, i);
		snprintf(c.prefix, sizeof(c.prefix), "tools[%zu]", i);
		if (!json_is_object(e)) {
			dg_show_value(e, val, sizeof(val));
			return dg_adapt_fail(&c, -EINVAL, "", "%s is not a tool definition", val);
		}
		const json_t *type = json_object_get(e, "type");
		bool browser = dg_adapt_str_is(type, "browser_toolset_20260801");
		bool computer = dg_adapt_str_is(type, "computer_toolset_20260801");
		if (!browser && !computer)
			continue; /* the agent's own tools, other tool versions */
		if ((browser && t->browser) || (computer && t->computer))
			return dg_adapt_fail(&c, -EINVAL, ".type", "the %s toolset is declared twice",
					     browser ? "browser" : "computer");
		struct dg_adapt_fields f = {names, 2, "type", browser ? "browser_toolset_20260801"
						     : "computer_toolset_20260801", B(0) | B(1), 0};
		unsigned present = 0;
		int rc = dg_adapt_check_fields(&c, e, &f, &present);
		if (rc < 0)
			return rc;
		if (browser) {
			const char *bn[DG_BROWSER_MEMBERS];
			for (int k = 0; k < DG_BROWSER_MEMBERS; k++)
				bn[k] = members[k].name;
			rc = parse_configs(&c, json_object_get(e, "configs"), bn, DG_BROWSER_MEMBERS,
					   &t->browser_off);
			t->browser = true;
		} else {
			rc = parse_configs(&c, json_object_get(e, "configs"), computer_members,
					   DG_COMPUTER_MEMBERS, &t->computer_off);
			t->computer = true;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Whether the computer toolset member named v was disabled by the tools
 * list (adapt-anthropic.c asks). */
bool dg_adapt_computer_off(const struct dg_adapt_ctx *c, const json_t *v)
{
	const struct dg_toolsets *t = c->sc.toolsets;
	if (!t || !t->computer)
		return false;
	for (int i = 0; i < DG_COMPUTER_MEMBERS; i++)
		if (dg_adapt_str_is(v, computer_members[i]))
			return (t->computer_off >> i) & 1u;
	return false;
}

/* ---- fields ----------------------------------------------------------------------- */

/* A coordinate target {"type": "coordinate", "x", "y"}: viewport pixels,
 * not negative (whether they are inside the viewport is known at
 * dg_adapt_resolve). */
static int coord_target(struct dg_adapt_ctx *c, const char *where, const json_t *v, int *x, int *y)
{
	static const char *const names[] = {"x", "y"};
	char val[DG_SHOW_VALUE_BUF], w2[64];
	struct dg_adapt_fields f = {names, 2, "type", "a coordinate target", B(0) | B(1), B(0) | B(1)};
	unsigned present = 0;
	char saved[sizeof(c->prefix)];
	snprintf(saved, sizeof(saved), "%s", c->prefix);
	snprintf(c->prefix, sizeof(c->prefix), "%.30s%.17s", saved, where);
	int rc = dg_adapt_check_fields(c, v, &f, &present);
	int *out[2] = {x, y};
	for (int k = 0; rc == 0 && k < 2; k++) {
		json_int_t i = 0;
		snprintf(w2, sizeof(w2), ".%s", names[k]);
		rc = dg_adapt_int(c, w2, json_object_get(v, names[k]), &i);
		if (rc == 0 && (i < 0 || i >= DG_ACTION_SCREEN_MAX)) {
			dg_show_value(json_object_get(v, names[k]), val, sizeof(val));
			rc = dg_adapt_fail(c, -EINVAL, w2, "%s is outside the viewport", val);
		}
		if (rc == 0)
			*out[k] = (int)i;
	}
	snprintf(c->prefix, sizeof(c->prefix), "%s", saved);
	return rc;
}

/* A ref target {"type": "ref", "ref": "ref_N"}. */
static int ref_target(struct dg_adapt_ctx *c, const char *where, const json_t *v, int *ref)
{
	static const char *const names[] = {"ref"};
	char val[DG_SHOW_VALUE_BUF];
	struct dg_adapt_fields f = {names, 1, "type", "a ref target", B(0), B(0)};
	unsigned present = 0;
	char saved[sizeof(c->prefix)];
	snprintf(saved, sizeof(saved), "%s", c->prefix);
	snprintf(c->prefix, sizeof(c->prefix), "%.30s%.17s", saved, where);
	int rc = dg_adapt_check_fields(c, v, &f, &present);
	if (rc == 0) {
		const json_t *r = json_object_get(v, "ref");
		const char *s = NULL;
		size_t len = 0;
		rc = dg_adapt_string(c, ".ref", r, &s, &len);
		int e = rc == 0 ? dg_ref_parse(s, len, ref) : 0;
		if (e < 0) {
			dg_show_value(r, val, sizeof(val));
			rc = dg_adapt_fail(c, -EINVAL, ".ref", e == -ERANGE ?
					   "%s is past the last reference (ref_%d)" :
					   "%s is not an element reference (ref_N, from read_page or "
					   "find)", val, DG_ACTION_REF_MAX);
		}
	}
	snprintf(c->prefix, sizeof(c->prefix), "%s", saved);
	return rc;
}

/* A target of the kinds given: *ref set (and *x, *y untouched) for a ref. */
static int any_target(struct dg_adapt_ctx *c, const char *where, const json_t *v, unsigned kinds,
		      int *x, int *y, int *ref)
{
	bool allow_ref = kinds & DG_BTARGET_REF, allow_coord = kinds & DG_BTARGET_COORD;
	char val[DG_SHOW_VALUE_BUF], w2[64];
	snprintf(w2, sizeof(w2), "%s.type", where);
	const json_t *type = json_is_object(v) ? json_object_get(v, "type") : NULL;
	if (!json_is_object(v)) {
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, where, "%s is not a target object", val);
	}
	if (dg_adapt_str_is(type, "coordinate") && allow_coord)
		return coord_target(c, where, v, x, y);
	if (dg_adapt_str_is(type, "ref") && allow_ref)
		return ref_target(c, where, v, ref);
	dg_show_value(type, val, sizeof(val));
	return dg_adapt_fail(c, -EINVAL, w2, "%s is not %s", type ? val : "missing",
			     allow_ref && allow_coord ? "\"coordinate\" or \"ref\""
			     : allow_ref ? "\"ref\" (this member acts on an element reference)"
					 : "\"coordinate\" (this member acts at a viewport point)");
}

/* "modifiers": one chord of modifier keys ("shift", "ctrl+shift",
 * "cmd+alt"), as the computer tool's text on clicks. */
static int browser_mods(struct dg_adapt_ctx *c, const json_t *v, unsigned *mods)
{
	return dg_adapt_mods(c, ".modifiers", v, mods);
}

/* The URL as a browser's address bar would take it, within what the
 * member documents: "back", "forward", "reload" are history steps (*type
 * says which); a URL without a scheme gets https://; the scheme and an
 * ASCII host are lowercased, and an authority without a path gets "/", as
 * every browser writes it (the policy's URL checker accepts only that
 * canonical form). Anything else is left as given, for the checker to
 * judge. */
static int browser_url(struct dg_adapt_ctx *c, const json_t *v, const char **type, json_t **url)
{
	const char *s = NULL;
	size_t len = 0;
	*url = NULL;
	int rc = dg_adapt_string(c, ".url", v, &s, &len);
	if (rc < 0)
		return rc;
	static const char *const steps[] = {"back", "forward", "reload"};
	for (int i = 0; i < 3; i++) {
		if (dg_adapt_str_is(v, steps[i])) {
			*type = steps[i];
			return 0;
		}
	}
	*type = "navigate";
	if (len == 0 || len > DG_ACTION_URL_MAX || memchr(s, '\0', len))
		return dg_adapt_fail(c, -EINVAL, ".url", "%zu bytes: a URL is 1 to %d bytes without NUL",
				     len, DG_ACTION_URL_MAX);
	/* scheme: letters, digits, + - . after a letter, then ':' */
	size_t sl = 0;
	while (sl < len && ((s[sl] >= 'a' && s[sl] <= 'z') || (s[sl] >= 'A' && s[sl] <= 'Z') ||
			    (sl > 0 && ((s[sl] >= '0' && s[sl] <= '9') || s[sl] == '+' ||
					s[sl] == '-' || s[sl] == '.'))))
		sl++;
	bool has_scheme = sl > 0 && sl < len && s[sl] == ':' &&
			  (sl + 2 < len && s[sl + 1] == '/' && s[sl + 2] == '/');
	static const char *const opaque[] = {"about:", "data:", "javascript:", "blob:", "mailto:",
					     "tel:", "view-source:", "chrome:", "file:"};
	for (size_t i = 0; !has_scheme && i < N_OF(opaque); i++)
		if (len >= strlen(opaque[i]) && strncasecmp(s, opaque[i], strlen(opaque[i])) == 0)
			return (*url = json_stringn(s, len)) ? 0
							     : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	const char *prefix = has_scheme ? "" : "https://";
	size_t plen = strlen(prefix);
	char *u = malloc(plen + len + 2);
	if (!u)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	memcpy(u, prefix, plen);
	memcpy(u + plen, s, len);
	size_t n = plen + len;
	u[n] = '\0';
	char *auth = strstr(u, "://");
	if (auth) {
		for (char *p = u; p < auth; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		char *h = auth + 3;
		size_t hl = strcspn(h, "/?#");
		bool ascii = true;
		for (size_t i = 0; i < hl; i++)
			ascii = ascii && (unsigned char)h[i] < 0x80 && h[i] != '@';
		for (size_t i = 0; ascii && i < hl; i++)
			if (h[i] >= 'A' && h[i] <= 'Z')
				h[i] = (char)(h[i] - 'A' + 'a');
		if (h[hl] != '/' && n + 1 <= DG_ACTION_URL_MAX) {
			memmove(h + hl + 1, h + hl, strlen(h + hl) + 1);
			h[hl] = '/';
			n++;
		}
	}
	*url = json_stringn(u, n);
	free(u);
	return *url ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

/* ---- a member into its canonical action (or template) -------------------------------- */

/* The input's "duration" (seconds, at most DG_ADAPT_BROWSER_WAIT_MS) as the
 * canonical "ms" of o (wait, hold_key). */
static int put_duration(struct dg_adapt_ctx *c, const json_t *in, json_t *o)
{
	int ms = 0;
	int rc = dg_adapt_seconds(c, ".duration", json_object_get(in, "duration"),
				  DG_ADAPT_BROWSER_WAIT_MS, &ms);
	if (rc == 0 && json_object_set_new(o, "ms", json_integer(ms)) != 0)
		rc = dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	return rc;
}

/* The canonical fields a member's fields become, for the canonical
 * parser's messages: they name the member's field. */
static const struct dg_adapt_rename canon_names[] = {
	{"url", "url"}, {"text", "text"}, {"keys", "text"}, {"ms", "duration"},
	{"code", "text"}, {"query", "query"}, {"depth", "depth"}, {"ref", "ref"},
	{"tab", "tab_id"}, {"value", "value"}, {"paths", "paths"}};

/* Checks a pending member's template with the canonical parser now, its
 * screen coordinates stood in for by the screen's first pixel: a member
 * the schema refuses (a form value that is an object, a relative upload
 * path, an unknown key) is refused before the browser is asked anything
 * (which brings a tab to the front and scrolls an element into view);
 * only the coordinates are left for dg_adapt_resolve to check. */
static int check_tmpl(struct dg_adapt_ctx *c, const json_t *tmpl, enum fill kind)
{
	json_t *o = json_deep_copy(tmpl);
	int rc = o ? 0 : -1;
	switch (kind) {
	case FILL_NONE:
		break;
	case FILL_POINT:
	case FILL_ELEMENT:
		if (rc == 0)
			rc = json_object_set_new(o, "x", json_integer(0)) |
			     json_object_set_new(o, "y", json_integer(0));
		break;
	case FILL_DRAG:
		if (rc == 0)
			rc = json_object_set_new(o, "path", json_pack("[[ii][ii]]", 0, 0, 0, 0));
		break;
	case FILL_VIEWPORT:
	case FILL_REGION:
		if (rc == 0)
			rc = json_object_set_new(o, "region", json_pack("[iiii]", 0, 0, 1, 1));
		break;
	}
	if (rc != 0) {
		json_decref(o);
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	struct dg_action act;
	rc = dg_adapt_finish(c, o, canon_names, N_OF(canon_names), &act);
	dg_action_free(&act);
	return rc;
}

static void set_tmpl(struct dg_adapted *a, json_t *tmpl, enum fill kind, int v0, int v1, int v2,
		     int v3)
{
	a->bcall.tmpl = tmpl;
	a->bcall.kind = (int)kind;
	a->bcall.v[0] = v0;
	a->bcall.v[1] = v1;
	a->bcall.v[2] = v2;
	a->bcall.v[3] = v3;
}

/* Parses the member named nv with input in: either its canonical action is
 * complete (stored as a's action 0) or a is pending with a template. */
int dg_adapt_browser_member(struct dg_adapt_ctx *c, const json_t *nv, const json_t *in,
			    struct dg_adapted *a)
{
	char val[DG_SHOW_VALUE_BUF], esc[DG_SHOW_BUF];
	int m = 0;
	while (m < DG_BROWSER_MEMBERS && !dg_adapt_str_is(nv, members[m].name))
		m++;
	if (m == DG_BROWSER_MEMBERS) {
		dg_show_value(nv, val, sizeof(val));
		snprintf(c->prefix, sizeof(c->prefix), "browser");
		return dg_adapt_fail(c, -EINVAL, ".name", "%s is not a member of the browser toolset "
				     "(navigate, read_page, find, left_click, ...)", val);
	}
	snprintf(a->name[0], DG_ADAPT_NAME_MAX, "%s", members[m].name);
	snprintf(c->prefix, sizeof(c->prefix), "browser.input");
	const struct dg_toolsets *ts = c->sc.toolsets;
	if (ts && ts->browser && ((ts->browser_off >> m) & 1u))
		return dg_adapt_fail(c, -EINVAL, "", "%s is disabled by the toolset's configs "
				     "(\"enabled\": false): the model was not offered it",
				     members[m].name);
	if (!json_is_object(in)) {
		dg_show_value(in, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, "", "%s is not a JSON object", val);
	}
	struct dg_adapt_fields f = {bfield_names, BF_N, NULL, members[m].name, members[m].allowed,
				    members[m].required};
	unsigned present = 0;
	int rc = dg_adapt_check_fields(c, in, &f, &present);
	if (rc < 0)
		return rc;
	const json_t *tab = json_object_get(in, "tab_id");
	if (present & B(BF_TAB)) {
		const char *s = NULL;
		size_t len = 0;
		rc = dg_adapt_string(c, ".tab_id", tab, &s, &len);
		if (rc < 0)
			return rc;
		bool okc = len > 0 && len <= DG_ACTION_TAB_MAX;
		for (size_t i = 0; okc && i < len; i++)
			okc = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z') ||
			      (s[i] >= 'a' && s[i] <= 'z') || s[i] == '.' || s[i] == '_' || s[i] == '-';
		if (!okc) {
			dg_show(s, len, esc, sizeof(esc));
			return dg_adapt_fail(c, -EINVAL, ".tab_id", "\"%s\" is not a tab id (list_tabs "
					     "gives them)", esc);
		}
		/* switch_tab and close_tab name their tab in the action itself;
		 * any other member acts on that tab, brought to the front. */
		if (members[m].kind != BK_TAB_ACT)
			memcpy(a->bcall.req.tab, s, len + 1);
	}
	const char *canon = members[m].canon;
	json_t *o = dg_adapt_obj("type", json_string(canon), NULL);
	if (!o)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	enum fill fill = FILL_NONE;
	int v[4] = {0, 0, 0, 0}, ref = 0;
	unsigned tk = target_kinds(members[m].kind, BF_TARGET);
	unsigned mods = 0;
	if (present & B(BF_MODS)) {
		rc = browser_mods(c, json_object_get(in, "modifiers"), &mods);
		if (rc < 0)
			goto out;
	}
	const json_t *text = json_object_get(in, "text");
	const char *s = NULL;
	size_t len = 0;
	switch (members[m].kind) {
	case BK_NAVIGATE: {
		const char *type = NULL;
		json_t *url = NULL;
		rc = browser_url(c, json_object_get(in, "url"), &type, &url);
		if (rc < 0)
			goto out;
		json_object_set_new(o, "type", json_string(type));
		if (url)
			json_object_set_new(o, "url", url);
		break;
	}
	case BK_CANON:
		break;
	case BK_TAB_ACT:
		json_object_set(o, "tab", (json_t *)tab);
		break;
	case BK_READ_PAGE: {
		const json_t *d = json_object_get(in, "depth"), *fl = json_object_get(in, "filter");
		if (present & B(BF_DEPTH)) {
			json_int_t di = 0;
			rc = dg_adapt_int(c, ".depth", d, &di);
			if (rc < 0)
				goto out;
			json_object_set_new(o, "depth", json_integer(di));
		}
		if (present & B(BF_FILTER)) {
			if (!dg_adapt_str_is(fl, "all") && !dg_adapt_str_is(fl, "interactive")) {
				dg_show_value(fl, val, sizeof(val));
				rc = dg_adapt_fail(c, -EINVAL, ".filter", "%s is not \"all\" or "
						   "\"interactive\" (omit it: every visible element)", val);
				goto out;
			}
			json_object_set(o, "filter", (json_t *)fl);
		}
		if (present & B(BF_REF))
			json_object_set(o, "ref", json_object_get(in, "ref"));
		break;
	}
	case BK_FIND:
		json_object_set(o, "query", json_object_get(in, "query"));
		break;
	case BK_FORM:
	case BK_UPLOAD:
	case BK_SCROLL_TO:
		rc = any_target(c, ".target", json_object_get(in, "target"), tk, &v[0], &v[1], &ref);
		if (rc < 0)
			goto out;
		fill = FILL_ELEMENT;
		if (members[m].kind == BK_FORM)
			json_object_set(o, "value", json_object_get(in, "value"));
		if (members[m].kind == BK_UPLOAD) {
			if (present & B(BF_DOCS)) {
				rc = dg_adapt_fail(c, -EINVAL, ".document_ids", "deskgate stages no "
						   "documents: write the file into the session's scratch "
						   "space (an exec action, into /tmp or /home/user) and give "
						   "its path in paths");
				goto out;
			}
			if (!(present & B(BF_PATHS))) {
				rc = dg_adapt_fail(c, -EINVAL, ".paths", "required (files in the session's "
						   "scratch space: /tmp, /home/user)");
				goto out;
			}
			json_object_set(o, "paths", json_object_get(in, "paths"));
		}
		break;
	case BK_SCREENSHOT:
		fill = FILL_VIEWPORT;
		break;
	case BK_ZOOM: {
		const json_t *r = json_object_get(in, "region");
		if (!json_is_array(r) || json_array_size(r) != 4) {
			dg_show_value(r, val, sizeof(val));
			rc = dg_adapt_fail(c, -EINVAL, ".region", "%s is not [x0, y0, x1, y1]", val);
			goto out;
		}
		for (int k = 0; k < 4; k++) {
			json_int_t i = 0;
			char w[32];
			snprintf(w, sizeof(w), ".region[%d]", k);
			rc = dg_adapt_int(c, w, json_array_get(r, (size_t)k), &i);
			if (rc == 0 && (i < 0 || i > DG_ACTION_SCREEN_MAX))
				rc = dg_adapt_fail(c, -EINVAL, w, "%" JSON_INTEGER_FORMAT " is outside the "
						   "viewport", i);
			if (rc < 0)
				goto out;
			v[k] = (int)i;
		}
		if (v[2] <= v[0] || v[3] <= v[1]) {
			rc = dg_adapt_fail(c, -EINVAL, ".region", "x1, y1 (%d, %d) must be greater than "
					   "x0, y0 (%d, %d)", v[2], v[3], v[0], v[1]);
			goto out;
		}
		fill = FILL_REGION;
		break;
	}
	case BK_CLICK:
	case BK_HOVER:
		rc = any_target(c, ".target", json_object_get(in, "target"), tk, &v[0], &v[1], &ref);
		if (rc < 0)
			goto out;
		fill = ref ? FILL_ELEMENT : FILL_POINT;
		if (members[m].kind == BK_CLICK) {
			json_object_set_new(o, "button", json_string(members[m].button));
			json_object_set_new(o, "count", json_integer(members[m].count));
		}
		json_object_set_new(o, "modifiers", dg_adapt_modifiers_json(mods));
		break;
	case BK_DRAG:
		rc = any_target(c, ".from", json_object_get(in, "from"),
				target_kinds(members[m].kind, BF_FROM), &v[0], &v[1], &ref);
		if (rc == 0)
			rc = any_target(c, ".target", json_object_get(in, "target"), tk, &v[2], &v[3],
					&ref);
		if (rc < 0)
			goto out;
		json_object_set_new(o, "button", json_string("left"));
		fill = FILL_DRAG;
		break;
	case BK_UPDOWN:
		json_object_set_new(o, "button", json_string("left"));
		/* fallthrough */
	case BK_MOVE:
		rc = any_target(c, ".target", json_object_get(in, "target"), tk, &v[0], &v[1], &ref);
		if (rc < 0)
			goto out;
		fill = FILL_POINT;
		break;
	case BK_SCROLL: {
		static const char *const dirs[4] = {"up", "down", "left", "right"};
		const json_t *dv = json_object_get(in, "scroll_direction");
		int d = 0;
		json_int_t amount = DG_ADAPT_BROWSER_SCROLL_DEFAULT;
		rc = any_target(c, ".target", json_object_get(in, "target"), tk, &v[0], &v[1], &ref);
		if (rc == 0)
			rc = dg_adapt_string(c, ".scroll_direction", dv, &s, &len);
		if (rc < 0)
			goto out;
		while (d < 4 && !dg_adapt_str_is(dv, dirs[d]))
			d++;
		if (d == 4) {
			dg_show(s, len, esc, sizeof(esc));
			rc = dg_adapt_fail(c, -EINVAL, ".scroll_direction", "unknown direction \"%s\" "
					   "(allowed: up, down, left, right)", esc);
			goto out;
		}
		if (present & B(BF_AMOUNT)) {
			rc = dg_adapt_int(c, ".scroll_amount", json_object_get(in, "scroll_amount"), &amount);
			if (rc < 0)
				goto out;
			if (amount < 1 || amount > DG_ADAPT_BROWSER_SCROLL_MAX) {
				rc = dg_adapt_fail(c, -EINVAL, ".scroll_amount", "%" JSON_INTEGER_FORMAT
						   " is out of range [1, %d] (wheel notches)", amount,
						   DG_ADAPT_BROWSER_SCROLL_MAX);
				goto out;
			}
		}
		int dx = d == 2 ? -(int)amount : d == 3 ? (int)amount : 0;
		int dy = d == 0 ? -(int)amount : d == 1 ? (int)amount : 0;
		json_object_set_new(o, "dx", json_integer(dx));
		json_object_set_new(o, "dy", json_integer(dy));
		fill = FILL_POINT;
		break;
	}
	case BK_TYPE:
		json_object_set(o, "text", (json_t *)text);
		break;
	case BK_KEY:
	case BK_HOLD: {
		rc = dg_adapt_string(c, ".text", text, &s, &len);
		if (rc < 0)
			goto out;
		if (present & B(BF_REPEAT)) {
			/* As the computer toolset's key: the chords written out. */
			struct dg_action act;
			rc = dg_adapt_key_repeat(c, s, len, json_object_get(in, "repeat"), &act);
			if (rc < 0)
				goto out;
			json_decref(o);
			o = dg_action_to_json(&act);
			dg_action_free(&act);
			if (!o)
				return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
		} else {
			json_object_set(o, "keys", (json_t *)text);
		}
		if (members[m].kind == BK_HOLD && (rc = put_duration(c, in, o)) < 0)
			goto out;
		break;
	}
	case BK_WAIT:
		if ((rc = put_duration(c, in, o)) < 0)
			goto out;
		break;
	case BK_JS:
		json_object_set(o, "code", (json_t *)text);
		break;
	}
	if (ref) {
		char r[32];
		snprintf(r, sizeof(r), "ref_%d", ref);
		json_object_set_new(o, "ref", json_string(r));
		a->bcall.req.ref = ref;
		a->bcall.req.scroll = true;
		/* A pointer action must reach the element itself, not an overlay
		 * above it; setting a value or scrolling does not go through the
		 * point. */
		a->bcall.req.hit = members[m].kind == BK_CLICK || members[m].kind == BK_HOVER;
	}
	a->browser = true;
	if (fill == FILL_NONE && !a->bcall.req.tab[0]) {
		/* Complete now: checked and stored as any action. */
		struct dg_action act;
		rc = dg_adapt_finish(c, o, canon_names, N_OF(canon_names), &act);
		o = NULL;
		if (rc < 0)
			return rc;
		return dg_adapt_store(c, a, &act, in, members[m].name);
	}
	/* Waits for the page's geometry (or its tab): stored as a template,
	 * once the schema accepts it. */
	rc = check_tmpl(c, o, fill);
	if (rc < 0)
		goto out;
	set_tmpl(a, o, fill, v[0], v[1], v[2], v[3]);
	o = NULL;
	a->wire_actions[0] = json_incref((json_t *)in);
	a->pending = true;
	a->n = 1;
	return 0;
out:
	json_decref(o);
	return rc;
}

/* ---- resolving ---------------------------------------------------------------------- */

bool dg_adapt_resolve_wants(const struct dg_adapted *a, int i, struct dg_resolve_req *req)
{
	if (!a || i < 0 || i >= a->n)
		return false;
	if (a->pending && i == 0) {
		*req = a->bcall.req;
		return true;
	}
	if (!dg_action_unresolved(&a->act[i]))
		return false;
	memset(req, 0, sizeof(*req));
	req->ref = a->act[i].ref;
	req->scroll = true;
	req->hit = a->act[i].type == DG_ACTION_CLICK || a->act[i].type == DG_ACTION_MOVE;
	return true;
}

/* A viewport point as a screen point, or an error naming the field
 * ("browser.input.target.x: 1400 is outside the viewport (width 1280)"). */
static int vp_point(struct dg_adapt_ctx *c, const struct dg_browser_view *v, const char *where,
		    int vx, int vy, int *sx, int *sy)
{
	char w[32];
	if (vx >= v->vp_w) {
		snprintf(w, sizeof(w), "%s.x", where);
		return dg_adapt_fail(c, -EINVAL, w, "%d is outside the viewport (width %d)", vx,
				     v->vp_w);
	}
	if (vy >= v->vp_h) {
		snprintf(w, sizeof(w), "%s.y", where);
		return dg_adapt_fail(c, -EINVAL, w, "%d is outside the viewport (height %d)", vy,
				     v->vp_h);
	}
	*sx = v->vp_x + vx;
	*sy = v->vp_y + vy;
	return 0;
}

int dg_adapt_resolve(struct dg_adapted *a, int i, const struct dg_browser_view *v,
		     struct dg_err *err)
{
	struct dg_adapt_ctx c = {.err = err, .sc = a->scale};
	snprintf(c.prefix, sizeof(c.prefix), "%s", a->pending ? "browser.input" : "action");
	if (i < 0 || i >= a->n || !v)
		return dg_err_set(err, -EINVAL, "resolve: no such action");
	if (v->vp_w < 1 || v->vp_h < 1 || v->vp_x < 0 || v->vp_y < 0 ||
	    (long long)v->vp_x + v->vp_w > a->scale.desk_w ||
	    (long long)v->vp_y + v->vp_h > a->scale.desk_h)
		return dg_err_set(err, -EINVAL, "the browser's viewport [%d, %d, %d, %d] is not on the "
				  "screen (%dx%d)", v->vp_x, v->vp_y, v->vp_w, v->vp_h,
				  a->scale.desk_w, a->scale.desk_h);
	if (v->has_point && (v->px < 0 || v->py < 0 || v->px >= a->scale.desk_w ||
			     v->py >= a->scale.desk_h))
		return dg_err_set(err, -EINVAL, "the element's point (%d, %d) is off the screen",
				  v->px, v->py);
	/* An action on an element acts inside the page: a point on the
	 * browser's own bars would be an action on the browser. */
	if (v->has_point && (v->px < v->vp_x || v->py < v->vp_y || v->px >= v->vp_x + v->vp_w ||
			     v->py >= v->vp_y + v->vp_h))
		return dg_err_set(err, -EINVAL, "the element's point (%d, %d) is outside the "
				  "viewport [%d, %d, %d, %d]", v->px, v->py, v->vp_x, v->vp_y,
				  v->vp_w, v->vp_h);
	if (!a->pending) {
		/* A canonical action on an element: its point filled in. */
		struct dg_action *act = &a->act[i];
		if (!dg_action_unresolved(act))
			return 0;
		if (!v->has_point)
			return dg_err_set(err, -EINVAL, "the browser did not say where ref_%d is",
					  act->ref);
		act->x = v->px;
		act->y = v->py;
		act->has_xy = true;
		json_t *canon = dg_action_to_json(act);
		char *text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		if (!text) {
			json_decref(canon);
			return dg_err_set(err, -ENOMEM, "resolve: out of memory");
		}
		json_decref(a->actions[i]);
		free(a->text[i]);
		a->actions[i] = canon;
		a->text[i] = text;
		a->text_len[i] = strlen(text);
		return 0;
	}
	json_t *o = json_deep_copy(a->bcall.tmpl);
	if (!o)
		return dg_err_set(err, -ENOMEM, "resolve: out of memory");
	int x = 0, y = 0, x2 = 0, y2 = 0, rc = 0;
	const int *bv = a->bcall.v;
	switch ((enum fill)a->bcall.kind) {
	case FILL_NONE:
		break;
	case FILL_POINT:
		rc = vp_point(&c, v, ".target", bv[0], bv[1], &x, &y);
		if (rc == 0)
			rc = json_object_set_new(o, "x", json_integer(x)) |
			     json_object_set_new(o, "y", json_integer(y));
		break;
	case FILL_DRAG:
		rc = vp_point(&c, v, ".from", bv[0], bv[1], &x, &y);
		if (rc == 0)
			rc = vp_point(&c, v, ".target", bv[2], bv[3], &x2, &y2);
		if (rc == 0)
			rc = json_object_set_new(o, "path", json_pack("[[ii][ii]]", x, y, x2, y2));
		break;
	case FILL_VIEWPORT:
		rc = json_object_set_new(o, "region", json_pack("[iiii]", v->vp_x, v->vp_y,
								v->vp_x + v->vp_w, v->vp_y + v->vp_h));
		break;
	case FILL_REGION:
		if (bv[2] > v->vp_w || bv[3] > v->vp_h) {
			rc = dg_adapt_fail(&c, -EINVAL, ".region", "[%d, %d, %d, %d] is outside the "
					   "viewport (%dx%d)", bv[0], bv[1], bv[2], bv[3], v->vp_w,
					   v->vp_h);
			break;
		}
		rc = json_object_set_new(o, "region", json_pack("[iiii]", v->vp_x + bv[0],
								v->vp_y + bv[1], v->vp_x + bv[2],
								v->vp_y + bv[3]));
		break;
	case FILL_ELEMENT:
		if (!v->has_point) {
			rc = dg_err_set(err, -EINVAL, "the browser did not say where the element is");
			break;
		}
		rc = json_object_set_new(o, "x", json_integer(v->px)) |
		     json_object_set_new(o, "y", json_integer(v->py));
		break;
	}
	if (rc != 0) {
		json_decref(o);
		return rc < 0 ? rc : dg_err_set(err, -ENOMEM, "resolve: out of memory");
	}
	struct dg_action act;
	rc = dg_adapt_finish(&c, o, canon_names, N_OF(canon_names), &act);
	if (rc < 0)
		return rc;
	/* dg_adapt_store appends: the pending slot 0 becomes action 0. */
	json_t *wire = a->wire_actions[0];
	a->wire_actions[0] = NULL;
	char name[DG_ADAPT_NAME_MAX];
	snprintf(name, sizeof(name), "%s", a->name[0]);
	a->n = 0;
	rc = dg_adapt_store(&c, a, &act, wire, name);
	json_decref(wire);
	if (rc < 0) {
		a->n = 1;
		return rc;
	}
	a->pending = false;
	return 0;
}
