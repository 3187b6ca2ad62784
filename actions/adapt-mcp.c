/* adapt-mcp: the MCP front door's tools (docs/mcp.md, "Tools"): the
 * tools/list catalogue, a tools/call as the one agent message the adapters
 * parse, and the gateway's answer to it as a CallToolResult. The contract
 * is in actions.h ("MCP tools").
 *
 * The browser tools' input schemas are made from adapt-browser.c's member
 * table (dg_adapt_browser_input): the fields each member takes and
 * requires, and the kinds of target it takes, so a schema cannot promise
 * what the adapter refuses. Only the values' shapes are written here, as
 * the SDK's BetaBrowser*Input types give them, with deskgate's ranges.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"
#include "actions/adapt-priv.h"

/* ---- schema pieces -------------------------------------------------------------- */

/* What a tool does to its environment, for its annotations. */
enum hint {
	H_READ,  /* reads only (readOnlyHint) */
	H_SAFE,  /* changes the page, but destroys nothing (a hover, a scroll) */
	H_WRITE, /* may do anything a click or a key may (destructiveHint) */
	H_EXEC,  /* a command in the jail: may destroy, the world it reaches is the policy's */
};

/* json_object_set_new steals v even when it fails: a builder chains
 * ok &= put(...) and drops the object at the end when !ok. */
static bool put(json_t *o, const char *key, json_t *v)
{
	return json_object_set_new(o, key, v) == 0;
}

static json_t *described(json_t *s, const char *desc)
{
	if (s && desc && !put(s, "description", json_string(desc))) {
		json_decref(s);
		return NULL;
	}
	return s;
}

static json_t *s_type(const char *type)
{
	return dg_adapt_obj("type", json_string(type), NULL);
}

/* {"type": "integer" or "number", "minimum": min, "maximum": max}. */
static json_t *s_range(const char *type, json_int_t min, json_int_t max)
{
	return dg_adapt_obj("type", json_string(type), "minimum", json_integer(min), "maximum",
			    json_integer(max), NULL);
}

static json_t *s_enum(const char *const *values, size_t n)
{
	json_t *e = json_array();
	bool ok = e != NULL;
	for (size_t i = 0; ok && i < n; i++)
		ok = json_array_append_new(e, json_string(values[i])) == 0;
	if (!ok) {
		json_decref(e);
		return NULL;
	}
	return dg_adapt_obj("type", json_string("string"), "enum", e, NULL);
}

/* {"type": "string", "pattern": pattern}. */
static json_t *s_pattern(const char *pattern)
{
	return dg_adapt_obj("type", json_string("string"), "pattern", json_string(pattern), NULL);
}

/* {"type": "array", "items": items, "minItems": min, "maxItems": max}. */
static json_t *s_array(json_t *items, int min, int max)
{
	return dg_adapt_obj("type", json_string("array"), "items", items, "minItems",
			    json_integer(min), "maxItems", json_integer(max), NULL);
}

/* An object schema of props (stolen) with the names in required (stolen;
 * left out when empty); no other properties. */
static json_t *s_object(json_t *props, json_t *required)
{
	json_t *o = dg_adapt_obj("type", json_string("object"), "properties", props, NULL);
	bool ok = o && required;
	if (ok && json_array_size(required) > 0)
		ok = put(o, "required", json_incref(required));
	ok = ok && put(o, "additionalProperties", json_false());
	json_decref(required);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static const char *const directions[] = {"up", "down", "left", "right"};

/* ---- the browser tools ------------------------------------------------------------ */

#define STR_(x) #x
#define STR(x) STR_(x)

/* "ref_N", 1 <= N <= DG_ACTION_REF_MAX: any number of at most
 * DG_ACTION_REF_DIGITS digits without a leading zero. */
_Static_assert(DG_ACTION_REF_MAX == 999999999 && DG_ACTION_REF_DIGITS == 9,
	       "ref_pattern: every N of DG_ACTION_REF_DIGITS digits is a reference");
static json_t *ref_pattern(void)
{
	char p[48];
	snprintf(p, sizeof(p), "^ref_[1-9][0-9]{0,%d}$", DG_ACTION_REF_DIGITS - 1);
	return s_pattern(p);
}

/* A tab id: 1..DG_ACTION_TAB_MAX bytes of [0-9A-Za-z._-]. */
static json_t *tab_pattern(void)
{
	char p[48];
	snprintf(p, sizeof(p), "^[0-9A-Za-z._-]{1,%d}$", DG_ACTION_TAB_MAX);
	return s_pattern(p);
}

static json_t *coord_target(void)
{
	static const char *const kind[] = {"coordinate"};
	json_t *req = json_pack("[sss]", "type", "x", "y");
	return s_object(dg_adapt_obj("type", s_enum(kind, 1),
				     "x", described(s_range("number", 0, DG_ACTION_SCREEN_MAX - 1),
						    "Pixels from the left edge of the viewport."),
				     "y", described(s_range("number", 0, DG_ACTION_SCREEN_MAX - 1),
						    "Pixels from the top edge of the viewport."),
				     NULL),
			req);
}

static json_t *ref_target(void)
{
	static const char *const kind[] = {"ref"};
	json_t *req = json_pack("[ss]", "type", "ref");
	return s_object(dg_adapt_obj("type", s_enum(kind, 1), "ref",
				     described(ref_pattern(), "An element reference "
					       "(\"ref_7\") from browser_snapshot or browser_find."),
				     NULL),
			req);
}

/* A target field taking the kinds given: one object schema, or a oneOf of
 * both. */
static json_t *target(unsigned kinds)
{
	if (kinds == (DG_BTARGET_COORD | DG_BTARGET_REF))
		return described(dg_adapt_obj("oneOf", json_pack("[oo]", coord_target(), ref_target()),
					      NULL),
				 "Where to act: a viewport point, or an element reference from "
				 "browser_snapshot or browser_find.");
	if (kinds == DG_BTARGET_REF)
		return described(ref_target(), "The element, by a reference from browser_snapshot "
				 "or browser_find (stale after a navigation).");
	return described(coord_target(), "A point in the viewport, in viewport pixels (as "
			 "browser_take_screenshot shows it).");
}

/* The schema of browser field f of member bm; text_desc describes its
 * text (what the text is differs from member to member). */
static json_t *field(enum dg_bfield f, const struct dg_bmember *bm, const char *text_desc)
{
	static const char *const filters[] = {"all", "interactive"};
	switch (f) {
	case BF_URL:
		return described(dg_adapt_obj("type", json_string("string"), "minLength",
					      json_integer(1), NULL),
				 "The URL to open (https:// when it names no scheme), or \"back\", "
				 "\"forward\" or \"reload\" to step through the tab's history.");
	case BF_TAB:
		return described(tab_pattern(), "The tab to act on (an id browser_tabs "
				 "lists); the active tab when omitted.");
	case BF_DEPTH:
		return described(s_range("integer", 1, DG_ACTION_DEPTH_MAX),
				 "Maximum tree depth (default " STR(DG_ACTION_DEPTH_DEFAULT) ").");
	case BF_FILTER:
		return described(s_enum(filters, N_OF(filters)), "Which elements: omitted, every "
				 "visible element; \"interactive\": interactive elements only; "
				 "\"all\": also those outside the viewport.");
	case BF_REF:
		return described(ref_pattern(), "An element reference to read the subtree "
				 "of; the page's root when omitted.");
	case BF_QUERY:
		return described(dg_adapt_obj("type", json_string("string"), "minLength",
					      json_integer(1), NULL),
				 "The element(s) to find, in plain words (\"the search box\").");
	case BF_TARGET:
		return target(bm->target);
	case BF_FROM:
		return described(target(bm->from), "Where the drag starts: a point in the viewport.");
	case BF_VALUE:
		return described(dg_adapt_obj("anyOf", json_pack("[ooo]", s_type("string"),
								 s_type("number"), s_type("boolean")),
					      NULL),
				 "The value to set (a text, a number, or true/false for a checkbox).");
	case BF_PATHS:
		return described(s_array(s_pattern("^/"), 1, DG_ACTION_PATHS_MAX),
				 "Absolute paths of the files, in the session's scratch space (/tmp, "
				 "/home/user).");
	case BF_DOCS:
		return s_array(s_type("string"), 1, DG_ACTION_PATHS_MAX);
	case BF_REGION:
		return described(s_array(s_range("number", 0, DG_ACTION_SCREEN_MAX), 4, 4),
				 "[x0, y0, x1, y1] in viewport pixels, x1 > x0 and y1 > y0.");
	case BF_MODS:
		return described(s_type("string"), "Modifier keys held during the action, one chord "
				 "(\"shift\", \"ctrl+shift\", \"cmd+alt\").");
	case BF_DIR:
		return s_enum(directions, N_OF(directions));
	case BF_AMOUNT:
		return described(s_range("integer", 1, DG_ADAPT_BROWSER_SCROLL_MAX),
				 "Scroll-wheel notches (default " STR(DG_ADAPT_BROWSER_SCROLL_DEFAULT) ").");
	case BF_TEXT:
		return described(dg_adapt_obj("type", json_string("string"), "minLength",
					      json_integer(1), NULL),
				 text_desc);
	case BF_REPEAT:
		return described(s_range("integer", 1, DG_ACTION_CHORDS_MAX),
				 "How many times to press it (default 1).");
	case BF_DURATION:
		return described(s_range("number", 0, DG_ADAPT_BROWSER_WAIT_MS / 1000), "Seconds.");
	case BF_N:
		break;
	}
	return NULL;
}

/* The order of the fields in a schema: the SDK's (from before target),
 * tab_id last. */
static const enum dg_bfield field_order[] = {
	BF_URL, BF_QUERY, BF_DEPTH, BF_FILTER, BF_REF, BF_FROM, BF_TARGET, BF_VALUE, BF_PATHS,
	BF_DOCS, BF_REGION, BF_DIR, BF_AMOUNT, BF_TEXT, BF_REPEAT, BF_DURATION, BF_MODS, BF_TAB,
};
_Static_assert(N_OF(field_order) == BF_N, "field_order names every field");

/* The input schema of member bm: every field it takes, those it requires
 * required. */
static json_t *member_schema(const struct dg_bmember *bm, const char *text_desc)
{
	json_t *props = json_object(), *req = json_array();
	bool ok = props && req;
	unsigned listed = 0;
	for (size_t k = 0; ok && k < N_OF(field_order); k++) {
		enum dg_bfield f = field_order[k];
		listed |= B(f);
		if (!(bm->accepted & B(f)))
			continue;
		ok &= put(props, dg_adapt_bfield_name(f), field(f, bm, text_desc));
		if (bm->required & B(f))
			ok &= json_array_append_new(req, json_string(dg_adapt_bfield_name(f))) == 0;
	}
	/* A field missing from field_order would be taken but not published:
	 * no schema at all rather than a wrong one. */
	ok &= (bm->accepted & ~listed) == 0;
	if (!ok) {
		json_decref(props);
		json_decref(req);
		return NULL;
	}
	return s_object(props, req);
}

/* The browser tools, in docs/mcp.md's order; member is the toolset member
 * the tool calls (NULL: browser_tabs, whose action picks it); text says
 * what the member's text is. */
static const struct btool {
	const char *tool, *member, *title, *desc, *text;
	enum hint hint;
} btools[] = {
	{"browser_navigate", "navigate", "Navigate", "Open a URL in a tab (the active one unless "
	 "tab_id names another), or go back, forward or reload.", NULL, H_SAFE},
	{"browser_tabs", NULL, "Tabs", "The browser's tabs: \"list\" every open tab, open a "
	 "\"new\" blank tab in front, \"select\" the tab tab_id (bring it to the front), or "
	 "\"close\" it.", NULL, H_WRITE},
	{"browser_snapshot", "read_page", "Page snapshot", "The page's accessibility tree as "
	 "text, with element references (ref_N) for the tools' targets.", NULL, H_READ},
	{"browser_get_page_text", "get_page_text", "Page text", "The page's readable text.", NULL,
	 H_READ},
	{"browser_find", "find", "Find elements", "The page's elements that match a description, "
	 "ranked, with their references.", NULL, H_READ},
	{"browser_console_messages", "read_console", "Console messages", "What the page logged "
	 "to its console since the last read.", NULL, H_READ},
	{"browser_network_requests", "read_network", "Network requests", "The requests the page "
	 "made since the last read.", NULL, H_READ},
	{"browser_form_input", "form_input", "Set a form value", "Set a form element (a text "
	 "field, a select, a checkbox) to a value as a user would.", NULL, H_WRITE},
	{"browser_file_upload", "file_upload", "Upload files", "Give a file input files from the "
	 "session's scratch space.", NULL, H_WRITE},
	{"browser_scroll_to", "scroll_to", "Scroll to an element", "Scroll an element into view.",
	 NULL, H_SAFE},
	{"browser_take_screenshot", "screenshot", "Screenshot", "A screenshot of the tab's "
	 "viewport.", NULL, H_READ},
	{"browser_zoom", "zoom", "Zoom", "A region of the viewport at full resolution.", NULL,
	 H_READ},
	{"browser_click", "left_click", "Click", "Left-click a point or an element.", NULL,
	 H_WRITE},
	{"browser_right_click", "right_click", "Right-click", "Right-click a point or an element.",
	 NULL, H_WRITE},
	{"browser_middle_click", "middle_click", "Middle-click", "Middle-click a point or an "
	 "element.", NULL, H_WRITE},
	{"browser_double_click", "double_click", "Double-click", "Double-click a point or an "
	 "element.", NULL, H_WRITE},
	{"browser_triple_click", "triple_click", "Triple-click", "Triple-click a point or an "
	 "element.", NULL, H_WRITE},
	{"browser_hover", "hover", "Hover", "Move the pointer onto a point or an element.", NULL,
	 H_SAFE},
	{"browser_drag", "left_click_drag", "Drag", "Press the left button at one point, move to "
	 "another and release it there.", NULL, H_WRITE},
	{"browser_mouse_down", "left_mouse_down", "Mouse down", "Press the left button at a "
	 "point.", NULL, H_WRITE},
	{"browser_mouse_up", "left_mouse_up", "Mouse up", "Release the left button at a point.",
	 NULL, H_WRITE},
	{"browser_mouse_move", "mouse_move", "Mouse move", "Move the pointer to a point.", NULL,
	 H_SAFE},
	{"browser_scroll", "scroll", "Scroll", "Turn the scroll wheel at a point.", NULL, H_SAFE},
	{"browser_type", "type", "Type", "Type text where the focus is.", "The text to type.",
	 H_WRITE},
	{"browser_press_key", "key", "Press keys", "Press a key, a chord or a sequence of them.",
	 "The key, chord or space-separated sequence to press (\"Return\", \"ctrl+a\", "
	 "\"Tab Tab\").", H_WRITE},
	{"browser_hold_key", "hold_key", "Hold a key", "Hold a key or chord down for a while.",
	 "The key or chord to hold.", H_WRITE},
	{"browser_wait", "wait", "Wait", "Wait a number of seconds.", NULL, H_READ},
	{"browser_evaluate", "javascript_exec", "Run JavaScript", "Run JavaScript in the page; "
	 "the answer is its last expression's value.", "The JavaScript to run.", H_WRITE},
};

/* browser_tabs' actions and the members they call; whether tab_id is
 * taken or required is the member's (dg_adapt_browser_input). */
static const struct {
	const char *action, *member;
} tab_actions[] = {
	{"list", "list_tabs"},
	{"new", "new_tab"},
	{"select", "switch_tab"},
	{"close", "close_tab"},
};

/* The member named name, into *bm. */
static int find_member(const char *name, struct dg_bmember *bm)
{
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++)
		if (dg_adapt_browser_input(i, bm) == 0 && strcmp(bm->name, name) == 0)
			return 0;
	return -ENOENT;
}

static json_t *tabs_schema(void)
{
	const char *actions[N_OF(tab_actions)];
	for (size_t i = 0; i < N_OF(tab_actions); i++)
		actions[i] = tab_actions[i].action;
	return s_object(dg_adapt_obj("action", s_enum(actions, N_OF(actions)), "tab_id",
				     described(tab_pattern(), "The tab to select or close "
					       "(an id \"list\" gives); required for those."),
				     NULL),
			json_pack("[s]", "action"));
}

/* ---- the catalogue ------------------------------------------------------------------ */

static json_t *annotations(enum hint h)
{
	switch (h) {
	case H_READ:
		return json_pack("{s:b, s:b}", "readOnlyHint", 1, "openWorldHint", 1);
	case H_SAFE:
	case H_WRITE:
		return json_pack("{s:b, s:b, s:b}", "readOnlyHint", 0, "destructiveHint",
				 h == H_WRITE, "openWorldHint", 1);
	case H_EXEC:
		break;
	}
	return json_pack("{s:b, s:b}", "readOnlyHint", 0, "destructiveHint", 1);
}

/* Appends one Tool (schema stolen) to tools. */
static bool add_tool(json_t *tools, const char *name, const char *title, const char *desc,
		     json_t *schema, enum hint h)
{
	json_t *t = dg_adapt_obj("name", json_string(name), "title", json_string(title),
				 "description", json_string(desc), "inputSchema", schema,
				 "annotations", annotations(h), NULL);
	return json_array_append_new(tools, t) == 0;
}

/* The computer tool's input on a w x h display (its arrays' items cannot
 * tell x from y: bounded by the longer side; the adapter checks each). */
static json_t *computer_schema(int w, int h)
{
	int side = w > h ? w : h;
	const char *actions[DG_COMPUTER_MEMBERS];
	for (int i = 0; i < DG_COMPUTER_MEMBERS; i++)
		actions[i] = dg_adapt_computer_member_name(i);
	int max_s = (DG_ACTION_HOLD_MS_MAX < DG_ACTION_WAIT_MS_MAX ? DG_ACTION_HOLD_MS_MAX
								   : DG_ACTION_WAIT_MS_MAX) / 1000;
	return s_object(
		dg_adapt_obj(
			"action", s_enum(actions, DG_COMPUTER_MEMBERS),
			"coordinate", described(s_array(s_range("number", 0, side - 1), 2, 2),
						"[x, y] on the display: where to act (mouse_move, "
						"left_click_drag's end; optional on clicks, "
						"left_mouse_down/up and scroll: the pointer's place)."),
			"start_coordinate", described(s_array(s_range("number", 0, side - 1), 2, 2),
						      "[x, y]: where left_click_drag starts (the "
						      "pointer's place when omitted)."),
			"text", described(s_type("string"), "type: the text; key: xdotool key chords "
					  "(\"ctrl+s\", \"Return\"); hold_key: one chord; clicks, "
					  "left_click_drag and scroll: modifier keys held (\"shift\")."),
			"scroll_direction", s_enum(directions, N_OF(directions)),
			"scroll_amount", described(s_range("integer", 1, DG_ACTION_SCROLL_MAX),
						   "scroll: wheel notches."),
			"duration", described(s_range("number", 0, max_s),
					      "hold_key, wait: seconds."),
			"region", described(s_array(s_range("number", 0, side), 4, 4),
					    "zoom: [x1, y1, x2, y2] on the display, x2 > x1, y2 > y1."),
			NULL),
		json_pack("[s]", "action"));
}

static json_t *exec_schema(void)
{
	return s_object(
		dg_adapt_obj("argv", described(s_array(s_type("string"), 1, DG_ACTION_ARGV_MAX),
					       "The command and its arguments (argv[0] is looked up "
					       "in PATH)."),
			     "stdin", described(s_type("string"), "Its standard input (none when "
						"omitted)."),
			     "timeout_ms", described(s_range("integer", 1, DG_ACTION_TIMEOUT_MS_MAX),
						     "Milliseconds before it is killed (the policy's "
						     "limit when omitted, and at most that)."),
			     NULL),
		json_pack("[s]", "argv"));
}

json_t *dg_mcp_tools(bool browser, int display_w, int display_h)
{
	if (display_w < 1 || display_w > DG_ACTION_SCREEN_MAX || display_h < 1 ||
	    display_h > DG_ACTION_SCREEN_MAX)
		return NULL;
	char desc[512];
	snprintf(desc, sizeof(desc), "The Anthropic computer tool (computer_20251124) on a %dx%d "
		 "display: coordinates are pixels of that display, 0 <= x < %d, 0 <= y < %d. "
		 "screenshot answers with an image; cursor_position with X=x,Y=y.",
		 display_w, display_h, display_w, display_h);
	json_t *tools = json_array();
	bool ok = tools != NULL;
	ok = ok && add_tool(tools, "computer", "Computer", desc, computer_schema(display_w, display_h), H_WRITE);
	ok = ok && add_tool(tools, "exec", "Run a command", "Run a command in the session's jail; "
			    "the answer is its exit status and output.", exec_schema(), H_EXEC);
	for (size_t i = 0; ok && browser && i < N_OF(btools); i++) {
		const struct btool *t = &btools[i];
		struct dg_bmember bm;
		json_t *schema;
		if (!t->member)
			schema = tabs_schema();
		else
			schema = find_member(t->member, &bm) == 0 ? member_schema(&bm, t->text) : NULL;
		ok = add_tool(tools, t->tool, t->title, t->desc, schema, t->hint);
	}
	if (!ok) {
		json_decref(tools);
		return NULL;
	}
	return tools;
}

/* ---- a call into an agent message --------------------------------------------------- */

/* exec's arguments as the canonical action (*out): argv, stdin, timeout_ms
 * only. */
static int exec_message(struct dg_adapt_ctx *c, const json_t *args, json_t **out)
{
	static const char *const names[] = {"argv", "stdin", "timeout_ms"};
	struct dg_adapt_fields f = {names, 3, NULL, "exec", B(0) | B(1) | B(2), B(0)};
	unsigned present = 0;
	snprintf(c->prefix, sizeof(c->prefix), "exec");
	int rc = dg_adapt_check_fields(c, args, &f, &present);
	if (rc < 0)
		return rc;
	json_t *o = dg_adapt_obj("type", json_string("exec"), NULL);
	bool ok = o != NULL;
	for (int i = 0; ok && i < 3; i++)
		if (present & B(i))
			ok = put(o, names[i], json_incref(json_object_get(args, names[i])));
	if (!ok) {
		json_decref(o);
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	*out = o;
	return 0;
}

/* browser_tabs' arguments as its member's name (*member) and input (*in). */
static int tabs_input(struct dg_adapt_ctx *c, const json_t *args, const char **member,
		      json_t **in)
{
	static const char *const names[] = {"action", "tab_id"};
	struct dg_adapt_fields f = {names, 2, NULL, "browser_tabs", B(0) | B(1), B(0)};
	char val[DG_SHOW_VALUE_BUF];
	unsigned present = 0;
	snprintf(c->prefix, sizeof(c->prefix), "browser_tabs");
	int rc = dg_adapt_check_fields(c, args, &f, &present);
	if (rc < 0)
		return rc;
	const json_t *action = json_object_get(args, "action");
	size_t k = 0;
	while (k < N_OF(tab_actions) && !dg_adapt_str_is(action, tab_actions[k].action))
		k++;
	if (k == N_OF(tab_actions)) {
		dg_show_value(action, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".action", "%s is not \"list\", \"new\", "
				     "\"select\" or \"close\"", val);
	}
	struct dg_bmember bm;
	if (find_member(tab_actions[k].member, &bm) < 0)
		return dg_adapt_fail(c, -EINVAL, ".action", "no member for \"%s\"",
				     tab_actions[k].action);
	bool tab = present & B(1);
	if (tab && !(bm.accepted & B(BF_TAB)))
		return dg_adapt_fail(c, -EINVAL, ".tab_id", "not taken by \"%s\" (only \"select\" "
				     "and \"close\" name a tab)", tab_actions[k].action);
	if (!tab && (bm.required & B(BF_TAB)))
		return dg_adapt_fail(c, -EINVAL, ".tab_id", "required for \"%s\" (an id \"list\" "
				     "gives)", tab_actions[k].action);
	*member = bm.name;
	*in = tab ? dg_adapt_obj("tab_id", json_incref(json_object_get(args, "tab_id")), NULL)
		  : json_object();
	return *in ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

/* The message of a call whose tool and arguments are known good, into *m. */
static int call_message(struct dg_adapt_ctx *c, const struct btool *bt, bool exec,
			const json_t *args, const char *call_id, json_t **m)
{
	json_t *in = NULL;
	const char *name = "computer";
	snprintf(c->prefix, sizeof(c->prefix), "call_id");
	json_t *id = json_string(call_id ? call_id : "");
	int rc = id ? dg_adapt_id(c, "", id, NULL) : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	if (rc == 0 && exec)
		rc = exec_message(c, args, m);
	if (rc < 0 || exec) {
		json_decref(id);
		return rc;
	}
	if (bt && !bt->member)
		rc = tabs_input(c, args, &name, &in);
	else if (bt)
		name = bt->member;
	if (rc < 0) {
		json_decref(id);
		return rc;
	}
	*m = dg_adapt_obj("type", json_string("tool_use"), "id", id, "name", json_string(name),
			  "input", in ? in : json_incref((json_t *)args), NULL);
	if (*m && bt && !put(*m, "toolset_name", json_string("browser"))) {
		json_decref(*m);
		*m = NULL;
	}
	return *m ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

int dg_mcp_call_message(const char *tool, const json_t *args, const char *call_id, char **msg,
			size_t *len, struct dg_err *err)
{
	struct dg_adapt_ctx c = {.err = err};
	char esc[DG_SHOW_BUF], val[DG_SHOW_VALUE_BUF];
	*msg = NULL;
	if (len)
		*len = 0;
	if (!tool)
		tool = "";
	const struct btool *bt = NULL;
	for (size_t i = 0; i < N_OF(btools) && !bt; i++)
		if (strcmp(tool, btools[i].tool) == 0)
			bt = &btools[i];
	bool exec = strcmp(tool, "exec") == 0;
	if (!bt && !exec && strcmp(tool, "computer") != 0) {
		dg_show(tool, strlen(tool), esc, sizeof(esc));
		return dg_err_set(err, -ENOENT, "no tool named \"%s\" (tools/list names them)", esc);
	}
	if (args && !json_is_object(args)) {
		dg_show_value(args, val, sizeof(val));
		return dg_err_set(err, -EINVAL, "%s: the arguments %s are not an object", tool, val);
	}
	json_t *empty = args ? NULL : json_object(), *m = NULL;
	if (!args && !empty)
		return dg_err_set(err, -ENOMEM, "out of memory");
	int rc = call_message(&c, bt, exec, args ? args : empty, call_id, &m);
	json_decref(empty);
	if (rc < 0)
		return rc;
	*msg = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!*msg)
		return dg_err_set(err, -ENOMEM, "out of memory");
	if (len)
		*len = strlen(*msg);
	return 0;
}

/* ---- an answer into a CallToolResult ------------------------------------------------- */

/* Appends {"type": "text", "text": s} (s malloc'd, taken; NULL: out of
 * memory) to content. */
static bool add_text(json_t *content, char *s)
{
	json_t *t = s ? dg_adapt_obj("type", json_string("text"), "text", json_string(s), NULL)
		      : NULL;
	free(s);
	return json_array_append_new(content, t) == 0;
}

/* obj[key] when it is a string, NULL when absent or null; -EINVAL (named)
 * when it is anything else. */
static int opt_string(struct dg_adapt_ctx *c, const json_t *obj, const char *key, const char **s)
{
	const json_t *v = json_object_get(obj, key);
	char where[48], val[DG_SHOW_VALUE_BUF];
	*s = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v)) {
		snprintf(where, sizeof(where), ".%s", key);
		dg_show_value(v, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, where, "%s is not a string", val);
	}
	*s = json_string_value(v);
	return 0;
}

/* One block of a tool_result's content into content (a browser_state
 * block into *state instead, for the end). */
static int result_block(struct dg_adapt_ctx *c, const json_t *b, json_t *content, json_t *state)
{
	char val[DG_SHOW_VALUE_BUF];
	const json_t *type = json_object_get(b, "type");
	const char *text = NULL, *mime = NULL, *data = NULL;
	if (!json_is_object(b)) {
		dg_show_value(b, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, "", "%s is not a content block", val);
	}
	if (dg_adapt_str_is(type, "text")) {
		int rc = opt_string(c, b, "text", &text);
		if (rc < 0)
			return rc;
		if (!text)
			return dg_adapt_fail(c, -EINVAL, ".text", "missing");
		json_t *t = dg_adapt_obj("type", json_string("text"), "text",
					 json_incref(json_object_get(b, "text")), NULL);
		return json_array_append_new(content, t) == 0 ? 0
			: dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	if (dg_adapt_str_is(type, "image")) {
		const json_t *src = json_object_get(b, "source");
		snprintf(c->prefix + strlen(c->prefix), sizeof(c->prefix) - strlen(c->prefix),
			 ".source");
		if (!json_is_object(src) || !dg_adapt_str_is(json_object_get(src, "type"), "base64"))
			return dg_adapt_fail(c, -EINVAL, "", "not a base64 image source");
		int rc = opt_string(c, src, "media_type", &mime);
		if (rc == 0)
			rc = opt_string(c, src, "data", &data);
		if (rc < 0)
			return rc;
		if (!mime || !data)
			return dg_adapt_fail(c, -EINVAL, mime ? ".data" : ".media_type", "missing");
		json_t *t = dg_adapt_obj("type", json_string("image"), "data",
					 json_incref(json_object_get(src, "data")), "mimeType",
					 json_incref(json_object_get(src, "media_type")), NULL);
		return json_array_append_new(content, t) == 0 ? 0
			: dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	if (dg_adapt_str_is(type, "browser_state")) {
		json_t *copy = json_copy((json_t *)b);
		if (!copy || json_object_del(copy, "type") != 0 ||
		    json_array_append_new(state, copy) != 0)
			return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
		return 0;
	}
	dg_show_value(type, val, sizeof(val));
	return dg_adapt_fail(c, -EINVAL, ".type", "%s is not \"text\", \"image\" or "
			     "\"browser_state\"", val);
}

/* An Anthropic tool_result block's content into content; *is_error. */
static int tool_result(struct dg_adapt_ctx *c, const json_t *answer, json_t *content,
		       bool *is_error)
{
	char val[DG_SHOW_VALUE_BUF];
	const json_t *blocks = json_object_get(answer, "content");
	const json_t *ie = json_object_get(answer, "is_error");
	if (ie && !json_is_null(ie) && !json_is_boolean(ie)) {
		dg_show_value(ie, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".is_error", "%s is not true or false", val);
	}
	*is_error = json_is_true(ie);
	if (json_is_string(blocks))
		return json_array_append_new(content, dg_adapt_obj("type", json_string("text"), "text",
								   json_incref((json_t *)blocks),
								   NULL)) == 0
			       ? 0
			       : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	if (!json_is_array(blocks)) {
		dg_show_value(blocks, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".content", "%s is not an array of blocks", val);
	}
	json_t *state = json_array();
	if (!state)
		return dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < json_array_size(blocks); i++) {
		snprintf(c->prefix, sizeof(c->prefix), "answer.content[%zu]", i);
		rc = result_block(c, json_array_get(blocks, i), content, state);
	}
	for (size_t i = 0; rc == 0 && i < json_array_size(state); i++) {
		char *js = json_dumps(json_array_get(state, i), JSON_COMPACT);
		size_t n = js ? strlen(js) : 0;
		char *s = js ? malloc(n + sizeof("browser_state: ")) : NULL;
		if (s) {
			memcpy(s, "browser_state: ", sizeof("browser_state: ") - 1);
			memcpy(s + sizeof("browser_state: ") - 1, js, n + 1);
		}
		free(js);
		if (!add_text(content, s))
			rc = dg_adapt_fail(c, -ENOMEM, "", "out of memory");
	}
	json_decref(state);
	return rc;
}

/* The canonical exec result into content; *is_error. */
static int exec_result(struct dg_adapt_ctx *c, const json_t *answer, json_t *content,
		       bool *is_error)
{
	char val[DG_SHOW_VALUE_BUF];
	const json_t *ok = json_object_get(answer, "ok");
	const char *verdict = NULL, *rule = NULL, *reason = NULL, *error = NULL, *action = NULL;
	if (!json_is_boolean(ok)) {
		dg_show_value(ok, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".ok", "%s is not true or false", val);
	}
	int rc = opt_string(c, answer, "verdict", &verdict);
	if (rc == 0)
		rc = opt_string(c, answer, "rule", &rule);
	if (rc == 0)
		rc = opt_string(c, answer, "reason", &reason);
	if (rc == 0)
		rc = opt_string(c, answer, "error", &error);
	if (rc == 0)
		rc = opt_string(c, answer, "action", &action);
	if (rc < 0)
		return rc;
	const json_t *ex = json_object_get(answer, "exec");
	if (ex && !json_is_null(ex) && !json_is_object(ex)) {
		dg_show_value(ex, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".exec", "%s is not an object", val);
	}
	bool refused = verdict && strcmp(verdict, "allow") != 0;
	*is_error = refused || !json_is_true(ok);
	char *text;
	if (refused)
		text = dg_adapt_refusal_text(action ? action : "exec", verdict, rule, reason);
	else if (!json_is_true(ok))
		text = dg_adapt_note_text("", error ? error : "exec failed (no error given)");
	else if (json_is_object(ex))
		text = json_dumps(ex, JSON_COMPACT);
	else
		text = dg_adapt_note_text("deskgate ran ", action ? action : "exec");
	return add_text(content, text) ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

/* A gateway error message into content. */
static int gateway_error(struct dg_adapt_ctx *c, const json_t *answer, json_t *content)
{
	char val[DG_SHOW_VALUE_BUF];
	const json_t *e = json_object_get(answer, "error");
	const char *code = NULL, *message = NULL;
	if (!json_is_object(e)) {
		dg_show_value(e, val, sizeof(val));
		return dg_adapt_fail(c, -EINVAL, ".error", "%s is not an object {code, message}", val);
	}
	snprintf(c->prefix, sizeof(c->prefix), "answer.error");
	int rc = opt_string(c, e, "code", &code);
	if (rc == 0)
		rc = opt_string(c, e, "message", &message);
	if (rc < 0)
		return rc;
	char *head = dg_adapt_note_text("", code ? code : "error");
	size_t n = head ? strlen(head) : 0;
	char *prefix = head ? malloc(n + 3) : NULL;
	if (prefix) {
		memcpy(prefix, head, n);
		memcpy(prefix + n, ": ", 3);
	}
	free(head);
	char *text = prefix ? dg_adapt_note_text(prefix, message ? message : "(no message)") : NULL;
	free(prefix);
	return add_text(content, text) ? 0 : dg_adapt_fail(c, -ENOMEM, "", "out of memory");
}

int dg_mcp_result(const json_t *answer, bool exec, json_t **result, struct dg_err *err)
{
	struct dg_adapt_ctx c = {.err = err};
	char val[DG_SHOW_VALUE_BUF];
	*result = NULL;
	snprintf(c.prefix, sizeof(c.prefix), "answer");
	if (!json_is_object(answer)) {
		dg_show_value(answer, val, sizeof(val));
		return dg_adapt_fail(&c, -EINVAL, "", "%s is not an answer object", val);
	}
	const json_t *type = json_object_get(answer, "type");
	json_t *content = json_array();
	if (!content)
		return dg_adapt_fail(&c, -ENOMEM, "", "out of memory");
	bool is_error = true;
	int rc;
	if (dg_adapt_str_is(type, "error")) {
		rc = gateway_error(&c, answer, content);
	} else if (exec && dg_adapt_str_is(type, "result")) {
		rc = exec_result(&c, answer, content, &is_error);
	} else if (!exec && dg_adapt_str_is(type, "tool_result")) {
		rc = tool_result(&c, answer, content, &is_error);
	} else {
		dg_show_value(type, val, sizeof(val));
		rc = dg_adapt_fail(&c, -EINVAL, ".type", "%s is not %s or \"error\"", val,
				   exec ? "\"result\" (an exec's answer)"
					: "\"tool_result\" (a tool's answer)");
	}
	if (rc < 0) {
		json_decref(content);
		return rc;
	}
	*result = dg_adapt_obj("content", content, "isError", json_boolean(is_error), NULL);
	return *result ? 0 : dg_adapt_fail(&c, -ENOMEM, "", "out of memory");
}
