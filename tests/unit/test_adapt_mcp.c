/* The MCP tools (actions/adapt-mcp.c): the tools/list catalogue checked
 * against the adapters it fronts, by walking every tool's inputSchema: a
 * minimal argument object made from it (required fields, enums' first
 * value, integers' minimum, targets as coordinates) must pass
 * dg_mcp_call_message and dg_adapt_parse; without any required field, or
 * with a field the schema does not name, it must not; every property the
 * schema names, every value of its enums and both ends of its ranges must
 * be accepted, one past them refused; and every browser toolset member
 * must be reachable. So the schemas cannot drift from the adapters. Then
 * the messages themselves, hostile arguments, and the answers as
 * CallToolResults, garbage included. */
#include <criterion/criterion.h>

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"

/* A 1280x800 desktop shown to the model as 1024x640: the display the
 * computer tool's schema names; the pointer at (100, 200). */
#define DW 1280
#define DH 800
#define MW 1024
#define MH 640

static const struct dg_adapt_scale scale = {DW, DH, MW, MH, NULL};

static struct dg_adapted ad;
static struct dg_err err;
static json_t *tools, *res;
static char *msg;

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define leak_check() __lsan_do_recoverable_leak_check()
#else
#define leak_check() 0
#endif

static void setup(void)
{
	tools = dg_mcp_tools(true, MW, MH);
	cr_assert_not_null(tools);
}

static void cleanup(void)
{
	dg_adapted_free(&ad);
	json_decref(tools);
	json_decref(res);
	free(msg);
	tools = res = NULL;
	msg = NULL;
	cr_assert_eq(leak_check(), 0, "memory leaked (see the LeakSanitizer report above)");
}

TestSuite(catalogue, .init = setup, .fini = cleanup);
TestSuite(schemas, .init = setup, .fini = cleanup);
TestSuite(messages, .init = setup, .fini = cleanup);
TestSuite(hostile, .init = setup, .fini = cleanup);
TestSuite(result, .init = setup, .fini = cleanup);

#define assert_ok(rc) cr_assert_eq((rc), 0, "rc %d, message \"%s\"", (rc), err.msg)

/* ' for " in place. */
static json_t *J(const char *sq)
{
	char *t = strdup(sq);
	cr_assert(t);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	json_error_t je;
	json_t *v = json_loads(t, JSON_DECODE_ANY, &je);
	cr_assert_not_null(v, "bad test JSON %s: %s", t, je.text);
	free(t);
	return v;
}

/* ---- a call, through the adapters ----------------------------------------------- */

/* The member names the browser tools reached (bit i: member i). */
static unsigned reached;

/* tool called with args (NULL: none): 0 when dg_mcp_call_message made a
 * message and dg_adapt_parse took it (one action, or a pending member),
 * else the first stage's negative errno (err says why). */
static int call(const char *tool, const json_t *args)
{
	size_t len = 0;
	free(msg);
	msg = NULL;
	memset(&err, 0, sizeof(err));
	int rc = dg_mcp_call_message(tool, args, "mcp_1", &msg, &len, &err);
	if (rc < 0) {
		cr_assert_null(msg);
		cr_assert_neq(err.msg[0], '\0', "%s refused without a message", tool);
		return rc;
	}
	cr_assert_not_null(msg);
	cr_assert_eq(strlen(msg), len);
	dg_adapted_free(&ad);
	rc = dg_adapt_parse(msg, len, &scale, 100, 200, &ad, &err);
	if (rc < 0) {
		cr_assert_neq(err.msg[0], '\0');
		return rc;
	}
	cr_assert_eq(ad.n, 1, "%s: %d actions", tool, ad.n);
	bool exec = strcmp(tool, "exec") == 0;
	cr_assert_eq(ad.wire, exec ? DG_WIRE_CANONICAL : DG_WIRE_ANTHROPIC);
	cr_assert_eq(ad.browser, strncmp(tool, "browser_", 8) == 0, "%s", tool);
	if (exec)
		cr_assert_eq(ad.act[0].type, DG_ACTION_EXEC);
	else
		cr_assert_str_eq(ad.call_id, "mcp_1");
	for (int i = 0; ad.browser && i < DG_BROWSER_MEMBERS; i++)
		if (strcmp(ad.name[0], dg_browser_member_name(i)) == 0)
			reached |= 1u << i;
	return 0;
}

static int call_s(const char *tool, const char *args_sq)
{
	json_t *a = args_sq ? J(args_sq) : NULL;
	int rc = call(tool, a);
	json_decref(a);
	return rc;
}

#define assert_refused(rc, code, prefix)                                                   \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert(strncmp(err.msg, (prefix), strlen(prefix)) == 0,                 \
			  "message \"%s\" does not start with \"%s\"", err.msg, (prefix));  \
	} while (0)

/* ---- values made from a schema -------------------------------------------------- */

/* A plausible string for a field of this name. */
static const char *string_for(const char *name)
{
	static const struct {
		const char *name, *value;
	} v[] = {
		{"url", "https://example.com/"}, {"tab_id", "1"},   {"ref", "ref_1"},
		{"query", "the search box"},     {"text", "shift"}, {"modifiers", "shift"},
		{"paths", "/tmp/a.txt"},         {"argv", "true"},  {"stdin", "hello"},
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		if (strcmp(v[i].name, name) == 0)
			return v[i].value;
	return "a";
}

/* A valid value of schema s for a field named name: enums their first,
 * numbers their minimum, a oneOf or anyOf its first, an object its
 * required fields, an array minItems of its items (a region a real
 * rectangle). */
static json_t *gen(const char *name, const json_t *s)
{
	const json_t *alt = json_object_get(s, "oneOf");
	if (!alt)
		alt = json_object_get(s, "anyOf");
	if (alt)
		return gen(name, json_array_get(alt, 0));
	const json_t *e = json_object_get(s, "enum");
	if (e)
		return json_copy(json_array_get(e, 0));
	const char *type = json_string_value(json_object_get(s, "type"));
	cr_assert_not_null(type, "%s: a schema without a type", name);
	const json_t *min = json_object_get(s, "minimum");
	if (strcmp(type, "integer") == 0 || strcmp(type, "number") == 0)
		return json_integer(min ? json_integer_value(min) : 0);
	if (strcmp(type, "string") == 0)
		return json_string(string_for(name));
	if (strcmp(type, "boolean") == 0)
		return json_true();
	if (strcmp(type, "array") == 0) {
		if (strcmp(name, "region") == 0)
			return json_pack("[iiii]", 0, 0, 10, 10);
		const json_t *mi = json_object_get(s, "minItems");
		json_int_t n = mi ? json_integer_value(mi) : 1;
		json_t *a = json_array();
		for (json_int_t i = 0; i < n; i++)
			json_array_append_new(a, gen(name, json_object_get(s, "items")));
		return a;
	}
	cr_assert_str_eq(type, "object", "%s: unexpected type", name);
	json_t *o = json_object();
	const json_t *props = json_object_get(s, "properties");
	size_t i;
	const json_t *r;
	json_array_foreach(json_object_get(s, "required"), i, r)
	{
		const char *k = json_string_value(r);
		json_object_set_new(o, k, gen(k, json_object_get(props, k)));
	}
	return o;
}

static const json_t *tool_named(const char *name)
{
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t)
		if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
			return t;
	return NULL;
}

static const json_t *schema_of(const json_t *t)
{
	return json_object_get(t, "inputSchema");
}

/* The computer tool's schema is flat (its action says which fields
 * apply): what each action needs besides the action. */
static const struct {
	const char *action;
	const char *needs[2];
} computer_needs[] = {
	{"key", {"text"}},
	{"hold_key", {"text", "duration"}},
	{"type", {"text"}},
	{"cursor_position", {NULL}},
	{"mouse_move", {"coordinate"}},
	{"left_mouse_down", {NULL}},
	{"left_mouse_up", {NULL}},
	{"left_click", {NULL}},
	{"left_click_drag", {"coordinate"}},
	{"right_click", {NULL}},
	{"middle_click", {NULL}},
	{"double_click", {NULL}},
	{"triple_click", {NULL}},
	{"scroll", {"scroll_direction", "scroll_amount"}},
	{"wait", {"duration"}},
	{"screenshot", {NULL}},
	{"zoom", {"region"}},
};
#define N_COMPUTER (sizeof(computer_needs) / sizeof(computer_needs[0]))

/* The argument objects a tool's checks start from (*n of them, at most
 * 32): the computer tool's one per action with what it needs; a tool
 * whose required enum picks what it does (browser_tabs' action), one per
 * value; any other tool its minimal object. The first is the minimal one
 * of the schema. */
static int bases(const json_t *t, json_t **out, const char **disc)
{
	const json_t *s = schema_of(t);
	const json_t *props = json_object_get(s, "properties");
	const char *name = json_string_value(json_object_get(t, "name"));
	*disc = NULL;
	if (strcmp(name, "computer") == 0) {
		*disc = "action";
		for (size_t i = 0; i < N_COMPUTER; i++) {
			out[i] = json_pack("{ss}", "action", computer_needs[i].action);
			for (int k = 0; k < 2 && computer_needs[i].needs[k]; k++) {
				const char *f = computer_needs[i].needs[k];
				json_object_set_new(out[i], f, gen(f, json_object_get(props, f)));
			}
		}
		return (int)N_COMPUTER;
	}
	json_t *min = gen(name, s);
	size_t i;
	const json_t *r;
	json_array_foreach(json_object_get(s, "required"), i, r)
	{
		const json_t *e = json_object_get(json_object_get(props, json_string_value(r)), "enum");
		if (json_array_size(e) < 2)
			continue;
		*disc = json_string_value(r);
		size_t k;
		const json_t *v;
		json_array_foreach(e, k, v)
		{
			out[k] = json_deep_copy(min);
			json_object_set(out[k], *disc, (json_t *)v);
		}
		json_decref(min);
		return (int)json_array_size(e);
	}
	out[0] = min;
	return 1;
}

static void free_bases(json_t **b, int n)
{
	for (int i = 0; i < n; i++)
		json_decref(b[i]);
}

/* base with field f set to v (a new object; v stolen). */
static json_t *with(const json_t *base, const char *f, json_t *v)
{
	json_t *o = json_deep_copy(base);
	json_object_set_new(o, f, v);
	return o;
}

/* Whether some base with f set to v (not stolen) is accepted; every base
 * is tried (so that every member a value reaches counts as reached). */
static bool some_accepts(const char *tool, json_t **b, int n, const char *f, const json_t *v)
{
	bool any = false;
	for (int i = 0; i < n; i++) {
		json_t *a = with(b[i], f, json_deep_copy(v));
		any = call(tool, a) == 0 || any;
		json_decref(a);
	}
	return any;
}

static bool none_accepts(const char *tool, json_t **b, int n, const char *f, const json_t *v)
{
	for (int i = 0; i < n; i++) {
		json_t *a = with(b[i], f, json_deep_copy(v));
		int rc = call(tool, a);
		json_decref(a);
		if (rc == 0)
			return false;
	}
	return true;
}

/* ---- the catalogue --------------------------------------------------------------- */

Test(catalogue, names_titles_and_shapes)
{
	regex_t re;
	cr_assert_eq(regcomp(&re, "^[a-zA-Z0-9_-]{1,64}$", REG_EXTENDED | REG_NOSUB), 0);
	cr_assert_eq(json_array_size(tools), 30, "computer, exec and 28 browser tools");
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		cr_assert_not_null(name);
		cr_assert_eq(regexec(&re, name, 0, NULL, 0), 0, "tool name \"%s\"", name);
		for (size_t k = 0; k < i; k++)
			cr_assert_str_neq(json_string_value(json_object_get(json_array_get(tools, k),
									    "name")),
					  name, "%s twice", name);
		cr_assert(json_is_string(json_object_get(t, "title")), "%s", name);
		cr_assert_gt(json_string_length(json_object_get(t, "description")), 10, "%s", name);
		const json_t *s = schema_of(t);
		cr_assert_str_eq(json_string_value(json_object_get(s, "type")), "object", "%s", name);
		cr_assert(json_is_false(json_object_get(s, "additionalProperties")), "%s", name);
		const json_t *props = json_object_get(s, "properties");
		cr_assert(json_is_object(props), "%s", name);
		const json_t *req = json_object_get(s, "required");
		cr_assert(!req || json_array_size(req) > 0, "%s: an empty required list", name);
		size_t k;
		const json_t *r;
		json_array_foreach(req, k, r)
			cr_assert_not_null(json_object_get(props, json_string_value(r)), "%s", name);
		const json_t *an = json_object_get(t, "annotations");
		cr_assert(json_is_object(an), "%s", name);
		/* A read-only tool says nothing of destroying. */
		if (json_is_true(json_object_get(an, "readOnlyHint")))
			cr_assert_null(json_object_get(an, "destructiveHint"), "%s", name);
		cr_assert(strncmp(name, "browser_", 8) == 0 || strcmp(name, "computer") == 0 ||
			  strcmp(name, "exec") == 0, "%s", name);
	}
	regfree(&re);
	/* Exactly the reading tools say they only read. */
	static const char *const readers[] = {
		"browser_snapshot", "browser_get_page_text", "browser_find", "browser_console_messages",
		"browser_network_requests", "browser_take_screenshot", "browser_zoom", "browser_wait"};
	int n_ro = 0;
	json_array_foreach(tools, i, t)
		n_ro += json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint"));
	cr_assert_eq(n_ro, (int)(sizeof(readers) / sizeof(readers[0])));
	for (size_t k = 0; k < sizeof(readers) / sizeof(readers[0]); k++)
		cr_assert(json_is_true(json_object_get(json_object_get(tool_named(readers[k]),
								       "annotations"),
						       "readOnlyHint")),
			  "%s", readers[k]);
}

Test(catalogue, without_a_browser_only_computer_and_exec)
{
	json_t *t = dg_mcp_tools(false, 1280, 800);
	cr_assert_eq(json_array_size(t), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(t, 0), "name")), "computer");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(t, 1), "name")), "exec");
	/* The same two as a browser session's. */
	cr_assert(json_equal(json_array_get(t, 1), (json_t *)tool_named("exec")));
	json_decref(t);
}

Test(catalogue, the_display_is_named)
{
	const char *d = json_string_value(json_object_get(tool_named("computer"), "description"));
	cr_assert_not_null(strstr(d, "1024x640"), "%s", d);
	cr_assert_not_null(strstr(d, "0 <= x < 1024, 0 <= y < 640"), "%s", d);
	/* Its coordinates within the display's longer side; each axis is the
	 * adapter's to check. */
	const json_t *c = json_object_get(json_object_get(schema_of(tool_named("computer")),
							  "properties"), "coordinate");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(c, "items"), "maximum")),
		     MW - 1);
	assert_ok(call_s("computer", "{'action':'mouse_move','coordinate':[1023,639]}"));
	cr_assert_eq(call_s("computer", "{'action':'mouse_move','coordinate':[1024,0]}"), -EINVAL);
	cr_assert_eq(call_s("computer", "{'action':'mouse_move','coordinate':[0,640]}"), -EINVAL);
	json_t *t = dg_mcp_tools(false, DG_ACTION_SCREEN_MAX, 1);
	cr_assert_not_null(t);
	json_decref(t);
	cr_assert_null(dg_mcp_tools(true, 0, 800));
	cr_assert_null(dg_mcp_tools(true, 1280, DG_ACTION_SCREEN_MAX + 1));
	cr_assert_null(dg_mcp_tools(false, -1, -1));
}

Test(catalogue, docs_table_and_every_member)
{
	/* docs/mcp.md's table: tool -> the members it calls. */
	static const char *const names[] = {
		"computer", "exec", "browser_navigate", "browser_tabs", "browser_snapshot",
		"browser_get_page_text", "browser_find", "browser_console_messages",
		"browser_network_requests", "browser_form_input", "browser_file_upload",
		"browser_scroll_to", "browser_take_screenshot", "browser_zoom", "browser_click",
		"browser_right_click", "browser_middle_click", "browser_double_click",
		"browser_triple_click", "browser_hover", "browser_drag", "browser_mouse_down",
		"browser_mouse_up", "browser_mouse_move", "browser_scroll", "browser_type",
		"browser_press_key", "browser_hold_key", "browser_wait", "browser_evaluate"};
	cr_assert_eq(json_array_size(tools), sizeof(names) / sizeof(names[0]));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_assert_str_eq(json_string_value(json_object_get(json_array_get(tools, i), "name")),
				 names[i]);
	static const char *const pairs[][2] = {
		{"browser_navigate", "navigate"},      {"browser_snapshot", "read_page"},
		{"browser_console_messages", "read_console"}, {"browser_network_requests", "read_network"},
		{"browser_take_screenshot", "screenshot"}, {"browser_click", "left_click"},
		{"browser_drag", "left_click_drag"},   {"browser_mouse_down", "left_mouse_down"},
		{"browser_mouse_move", "mouse_move"},  {"browser_press_key", "key"},
		{"browser_evaluate", "javascript_exec"}, {"browser_hover", "hover"},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		json_t *a = gen(pairs[i][0], schema_of(tool_named(pairs[i][0])));
		assert_ok(call(pairs[i][0], a));
		cr_assert_str_eq(ad.name[0], pairs[i][1], "%s", pairs[i][0]);
		json_decref(a);
	}
}

/* ---- the schemas against the adapters -------------------------------------------- */

/* All the checks of one tool; returns the members it reached. */
static void check_tool(const json_t *t)
{
	const char *name = json_string_value(json_object_get(t, "name"));
	const json_t *s = schema_of(t);
	const json_t *props = json_object_get(s, "properties");
	json_t *b[32];
	const char *disc = NULL;
	int n = bases(t, b, &disc);

	/* The minimal object is accepted (each of the computer tool's; the
	 * other bases may need more: browser_tabs' select a tab_id). */
	for (int i = 0; i < n; i++) {
		int rc = call(name, b[i]);
		char *d = json_dumps(b[i], JSON_COMPACT);
		cr_assert(rc == 0 || (i > 0 && strcmp(name, "computer") != 0),
			  "%s %s: rc %d, \"%s\"", name, d, rc, err.msg);
		free(d);
	}
	/* A field the schema does not name is refused, whatever the base. */
	json_t *one = json_integer(1);
	cr_assert(none_accepts(name, b, n, "unknown_field", one), "%s", name);
	cr_assert(none_accepts(name, b, n, "Action", one), "%s", name);
	json_decref(one);
	/* Without any required field: refused. */
	size_t i;
	const json_t *r;
	json_array_foreach(json_object_get(s, "required"), i, r)
	{
		json_t *a = json_deep_copy(b[0]);
		json_object_del(a, json_string_value(r));
		cr_assert_neq(call(name, a), 0, "%s without %s", name, json_string_value(r));
		json_decref(a);
	}
	/* And the computer tool's actions without what they need. */
	for (int k = 0; strcmp(name, "computer") == 0 && k < n; k++) {
		for (int f = 0; f < 2 && computer_needs[k].needs[f]; f++) {
			json_t *a = json_deep_copy(b[k]);
			json_object_del(a, computer_needs[k].needs[f]);
			cr_assert_neq(call(name, a), 0, "computer %s without %s",
				      computer_needs[k].action, computer_needs[k].needs[f]);
			json_decref(a);
		}
	}
	/* Every property is taken (by some base), with every value of its enum
	 * and both ends of its range; one past an end, and a value outside the
	 * enum, by none. */
	const char *key;
	const json_t *ps;
	json_object_foreach((json_t *)props, key, ps)
	{
		json_t *v = gen(key, ps);
		cr_assert(some_accepts(name, b, n, key, v), "%s: %s refused", name, key);
		json_decref(v);
		/* (The discriminator's values are the bases'.) */
		const json_t *e = disc && strcmp(key, disc) == 0 ? NULL : json_object_get(ps, "enum");
		size_t k;
		const json_t *ev;
		json_array_foreach(e, k, ev)
			cr_assert(some_accepts(name, b, n, key, ev), "%s: %s %s refused", name, key,
				  json_string_value(ev));
		if (e) {
			json_t *bad = json_string("bogus");
			cr_assert(none_accepts(name, b, n, key, bad), "%s: %s bogus", name, key);
			json_decref(bad);
		}
		const char *type = json_string_value(json_object_get(ps, "type"));
		if (!type || (strcmp(type, "integer") != 0 && strcmp(type, "number") != 0))
			continue;
		json_int_t lo = json_integer_value(json_object_get(ps, "minimum"));
		json_int_t hi = json_integer_value(json_object_get(ps, "maximum"));
		cr_assert(json_is_integer(json_object_get(ps, "maximum")), "%s: %s has no maximum",
			  name, key);
		json_t *x[4] = {json_integer(lo), json_integer(hi), json_integer(lo - 1),
				json_integer(hi + 1)};
		cr_assert(some_accepts(name, b, n, key, x[0]), "%s: %s = %lld", name, key, (long long)lo);
		cr_assert(some_accepts(name, b, n, key, x[1]), "%s: %s = %lld", name, key, (long long)hi);
		cr_assert(none_accepts(name, b, n, key, x[2]), "%s: %s = %lld", name, key,
			  (long long)lo - 1);
		cr_assert(none_accepts(name, b, n, key, x[3]), "%s: %s = %lld", name, key,
			  (long long)hi + 1);
		for (int q = 0; q < 4; q++)
			json_decref(x[q]);
	}
	/* A discriminator outside its enum. */
	if (disc) {
		json_t *bad = json_string("bogus");
		cr_assert(none_accepts(name, b, n, disc, bad), "%s: %s bogus", name, disc);
		json_decref(bad);
	}
	free_bases(b, n);
}

Test(schemas, every_tool_against_its_adapter)
{
	reached = 0;
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t)
		check_tool(t);
	for (int m = 0; m < DG_BROWSER_MEMBERS; m++)
		cr_assert(reached & (1u << m), "no tool reaches member %s", dg_browser_member_name(m));
}

Test(schemas, targets_take_the_kinds_the_member_does)
{
	/* A click takes both; a form input a ref only; a drag points only. */
	assert_ok(call_s("browser_click", "{'target':{'type':'ref','ref':'ref_3'}}"));
	assert_ok(call_s("browser_click", "{'target':{'type':'coordinate','x':5,'y':6}}"));
	assert_ok(call_s("browser_form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':true}"));
	cr_assert_neq(call_s("browser_form_input", "{'target':{'type':'coordinate','x':5,'y':6},"
			     "'value':'x'}"), 0);
	cr_assert_neq(call_s("browser_drag", "{'from':{'type':'ref','ref':'ref_1'},'target':"
			     "{'type':'coordinate','x':5,'y':6}}"), 0);
	const json_t *p = json_object_get(schema_of(tool_named("browser_click")), "properties");
	cr_assert_eq(json_array_size(json_object_get(json_object_get(p, "target"), "oneOf")), 2);
	p = json_object_get(schema_of(tool_named("browser_form_input")), "properties");
	cr_assert_null(json_object_get(json_object_get(p, "target"), "oneOf"));
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(json_object_get(
		json_object_get(json_object_get(p, "target"), "properties"), "type"), "enum"), 0)),
			 "ref");
	/* form_input's value: a string, a number or a flag. */
	assert_ok(call_s("browser_form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':2.5}"));
	assert_ok(call_s("browser_form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':'x'}"));
	/* file_upload: paths required, document_ids not offered. */
	p = json_object_get(schema_of(tool_named("browser_file_upload")), "properties");
	cr_assert_null(json_object_get(p, "document_ids"));
	cr_assert_neq(call_s("browser_file_upload", "{'target':{'type':'ref','ref':'ref_3'},"
			     "'paths':['/tmp/a'],'document_ids':['d']}"), 0);
}

/* ---- the messages ------------------------------------------------------------------ */

/* got is the JSON want_sq (' for "). */
static void assert_json(const json_t *got, const char *want_sq)
{
	json_t *want = J(want_sq);
	char *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
	char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
	cr_assert(json_equal(want, (json_t *)got), "got %s, want %s", g, w);
	free(w);
	free(g);
	json_decref(want);
}

/* The message made is want_sq. */
static void assert_msg(const char *want_sq)
{
	json_t *got = json_loads(msg, 0, NULL);
	cr_assert_not_null(got);
	assert_json(got, want_sq);
	json_decref(got);
}

/* tool, arguments -> the message (' for "). */
static const struct {
	const char *tool, *args, *want;
} message_cases[] = {
	{"computer", "{'action':'left_click','coordinate':[10,20]}",
	 "{'type':'tool_use','id':'mcp_1','name':'computer','input':{'action':'left_click',"
	 "'coordinate':[10,20]}}"},
	{"browser_navigate", "{'url':'example.com'}",
	 "{'type':'tool_use','id':'mcp_1','name':'navigate','input':{'url':'example.com'},"
	 "'toolset_name':'browser'}"},
	{"exec", "{'argv':['ls','-l'],'stdin':'x','timeout_ms':5}",
	 "{'type':'exec','argv':['ls','-l'],'stdin':'x','timeout_ms':5}"},
	/* null counts as absent */
	{"exec", "{'argv':['ls'],'stdin':null,'timeout_ms':null}", "{'type':'exec','argv':['ls']}"},
	/* no arguments */
	{"browser_take_screenshot", NULL,
	 "{'type':'tool_use','id':'mcp_1','name':'screenshot','input':{},'toolset_name':'browser'}"},
	/* browser_tabs: its action picks the member */
	{"browser_tabs", "{'action':'list'}",
	 "{'type':'tool_use','id':'mcp_1','name':'list_tabs','input':{},'toolset_name':'browser'}"},
	{"browser_tabs", "{'action':'new','tab_id':null}",
	 "{'type':'tool_use','id':'mcp_1','name':'new_tab','input':{},'toolset_name':'browser'}"},
	{"browser_tabs", "{'action':'select','tab_id':'T-1'}",
	 "{'type':'tool_use','id':'mcp_1','name':'switch_tab','input':{'tab_id':'T-1'},"
	 "'toolset_name':'browser'}"},
	{"browser_tabs", "{'action':'close','tab_id':'7'}",
	 "{'type':'tool_use','id':'mcp_1','name':'close_tab','input':{'tab_id':'7'},"
	 "'toolset_name':'browser'}"},
};

Test(messages, each_kind)
{
	for (size_t i = 0; i < sizeof(message_cases) / sizeof(message_cases[0]); i++) {
		assert_ok(call_s(message_cases[i].tool, message_cases[i].args));
		assert_msg(message_cases[i].want);
	}
	cr_assert_str_eq(ad.name[0], "close_tab");
	assert_refused(call("computer", NULL), -EINVAL, "anthropic.input.action");
}

Test(messages, call_ids)
{
	json_t *a = J("{'action':'screenshot'}");
	char id[DG_ADAPT_ID_MAX + 2];
	memset(id, 'x', sizeof(id) - 1);
	id[DG_ADAPT_ID_MAX] = '\0';
	size_t len;
	assert_ok(dg_mcp_call_message("computer", a, id, &msg, &len, &err));
	free(msg);
	msg = NULL;
	id[DG_ADAPT_ID_MAX] = 'x';
	id[DG_ADAPT_ID_MAX + 1] = '\0';
	static const char *const bad[] = {"", "a b", "a\nb", "caf\xc3\xa9", NULL};
	assert_refused(dg_mcp_call_message("computer", a, id, &msg, &len, &err), -EINVAL, "call_id");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(dg_mcp_call_message("computer", a, bad[i], &msg, &len, &err), -EINVAL,
			       "call_id");
		cr_assert_null(msg);
	}
	/* len may be NULL */
	assert_ok(dg_mcp_call_message("computer", a, "mcp_9", &msg, NULL, &err));
	json_decref(a);
}

/* ---- hostile arguments ---------------------------------------------------------------- */

Test(hostile, unknown_tools)
{
	static const char *const names[] = {"", "Computer", "browser_", "browser_Click", "read_page",
					    "navigate", "exec ", "computer\n"};
	size_t len = 7;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_refused(dg_mcp_call_message(names[i], NULL, "mcp_1", &msg, &len, &err), -ENOENT,
			       "no tool named");
		cr_assert_null(msg);
		cr_assert_eq(len, 0);
	}
	assert_refused(dg_mcp_call_message(NULL, NULL, "mcp_1", &msg, NULL, &err), -ENOENT,
		       "no tool named");
	/* The name is quoted escaped. */
	assert_refused(dg_mcp_call_message("x\"\n", NULL, "mcp_1", &msg, NULL, &err), -ENOENT,
		       "no tool named \"x\\\"\\x0a\"");
}

Test(hostile, arguments_not_an_object)
{
	static const char *const bad[] = {"[]", "[{}]", "'x'", "1", "true", "null"};
	size_t i;
	const json_t *t;
	json_array_foreach(tools, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			char prefix[64];
			snprintf(prefix, sizeof(prefix), "%s: the arguments", name);
			assert_refused(call_s(name, bad[k]), -EINVAL, prefix);
		}
	}
}

/* Refusals of exec's and browser_tabs' own fields (the tool's name in
 * the message), and of values passed on (the adapters'). */
static const struct {
	const char *tool, *args, *prefix;
} refusals[] = {
	{"exec", "{'argv':['ls'],'type':'click'}", "exec: unknown field \"type\""},
	{"exec", "{'argv':['ls'],'cwd':'/'}",
	 "exec: unknown field \"cwd\" for exec (allowed: argv, stdin, timeout_ms)"},
	{"exec", "{}", "exec.argv: required"},
	{"exec", "{'argv':[]}", "action.argv"},
	{"exec", "{'argv':'ls'}", "action.argv"},
	{"exec", "{'argv':['']}", "action.argv"},
	{"exec", "{'argv':['ls'],'timeout_ms':'5'}", "action.timeout_ms"},
	{"browser_tabs", "{'action':'open'}", "browser_tabs.action: "},
	{"browser_tabs", "{'action':1}", "browser_tabs.action: "},
	{"browser_tabs", "{'action':'LIST'}", "browser_tabs.action: "},
	{"browser_tabs", "{}", "browser_tabs.action: required"},
	{"browser_tabs", "{'action':null}", "browser_tabs.action: required"},
	{"browser_tabs", "{'action':'select'}", "browser_tabs.tab_id: required for \"select\""},
	{"browser_tabs", "{'action':'close','tab_id':null}", "browser_tabs.tab_id: required"},
	{"browser_tabs", "{'action':'list','tab_id':'1'}",
	 "browser_tabs.tab_id: not taken by \"list\""},
	{"browser_tabs", "{'action':'list','tab':'1'}", "browser_tabs: unknown field \"tab\""},
	/* The tab id's form is the adapter's. */
	{"browser_tabs", "{'action':'select','tab_id':'a b'}", "browser.input.tab_id"},
	{"browser_tabs", "{'action':'select','tab_id':7}", "browser.input.tab_id"},
};

Test(hostile, exec_and_browser_tabs_fields)
{
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
		assert_refused(call_s(refusals[i].tool, refusals[i].args), -EINVAL,
			       refusals[i].prefix);
}

Test(hostile, huge_strings)
{
	size_t n = 4 * 1024 * 1024;
	char *s = calloc(n + 1, 1);
	cr_assert(s);
	memset(s, 'a', n);
	static const char *const cases[][2] = {
		{"browser_type", "text"},     {"browser_navigate", "url"},
		{"browser_find", "query"},    {"browser_evaluate", "text"},
		{"browser_press_key", "text"}, {"computer", "text"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *a = json_pack("{ss}", cases[i][1], s);
		if (strcmp(cases[i][0], "computer") == 0)
			json_object_set_new(a, "action", json_string("type"));
		int rc = call(cases[i][0], a);
		cr_assert(rc == -E2BIG || rc == -EINVAL, "%s: rc %d", cases[i][0], rc);
		json_decref(a);
	}
	json_t *a = json_pack("{s[s]}", "argv", s);
	cr_assert_lt(call("exec", a), 0);
	json_decref(a);
	/* A huge tool name and id (msg: what the last call() left). */
	free(msg);
	msg = NULL;
	cr_assert_eq(dg_mcp_call_message(s, NULL, "mcp_1", &msg, NULL, &err), -ENOENT);
	cr_assert_lt(strlen(err.msg), 400);
	cr_assert_eq(dg_mcp_call_message("computer", NULL, s, &msg, NULL, &err), -EINVAL);
	free(s);
}

/* Deterministic mutations of the minimal objects: no crash, no leak, and
 * every refusal is an errno with a message. */
Test(hostile, mutated_arguments)
{
	unsigned long long seed = 0x9e3779b97f4a7c15ull;
	size_t i;
	const json_t *t;
	json_t *junk[] = {json_null(), json_true(), json_integer(-1), json_real(1e300),
			  json_string(""), json_string("\xe2\x80\xae"), json_array(),
			  json_object(), json_integer(DG_ACTION_SCREEN_MAX)};
	size_t n_junk = sizeof(junk) / sizeof(junk[0]);
	json_array_foreach(tools, i, t)
	{
		const char *name = json_string_value(json_object_get(t, "name"));
		const json_t *props = json_object_get(schema_of(t), "properties");
		for (int round = 0; round < 60; round++) {
			json_t *a = gen(name, schema_of(t));
			const char *key;
			const json_t *ps;
			json_object_foreach((json_t *)props, key, ps)
			{
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				unsigned r = (unsigned)(seed >> 33);
				if (r % 3 == 0)
					json_object_set(a, key, junk[(r / 3) % n_junk]);
				else if (r % 3 == 1)
					json_object_set_new(a, key, gen(key, ps));
			}
			int rc = call(name, a);
			cr_assert(rc == 0 || rc == -EINVAL || rc == -E2BIG, "%s: rc %d", name, rc);
			json_decref(a);
		}
	}
	for (size_t k = 0; k < n_junk; k++)
		json_decref(junk[k]);
}

/* ---- answers as CallToolResults -------------------------------------------------------- */

static int result_of(const char *answer_sq, bool exec)
{
	json_t *a = J(answer_sq);
	json_decref(res);
	res = (json_t *)0x1;
	memset(&err, 0, sizeof(err));
	int rc = dg_mcp_result(a, exec, &res, &err);
	json_decref(a);
	if (rc < 0) {
		cr_assert_null(res);
		cr_assert_neq(err.msg[0], '\0');
	}
	return rc;
}

Test(result, from_the_adapters_answers)
{
	/* A real browser answer, made by dg_adapt_answer. */
	assert_ok(call_s("browser_tabs", "{'action':'new'}"));
	json_t *tabs = J("[{'id':'1','url':'about:blank','title':'','active':false},"
			 "{'id':'2','url':'about:blank','title':'New','active':true}]");
	json_t *before = J("['1']");
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .tabs = tabs, .tabs_before = before};
	json_t *ans = NULL;
	assert_ok(dg_adapt_answer(&ad, &o, &ans, &err));
	assert_ok(dg_mcp_result(ans, false, &res, &err));
	const json_t *c = json_object_get(res, "content");
	cr_assert_eq(json_array_size(c), 2);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(c, 0), "text")),
			 "deskgate ran new_tab");
	const char *st = json_string_value(json_object_get(json_array_get(c, 1), "text"));
	cr_assert(strncmp(st, "browser_state: {", 16) == 0, "%s", st);
	json_t *stj = json_loads(st + 15, 0, NULL);
	cr_assert_not_null(stj);
	cr_assert_null(json_object_get(stj, "type"));
	cr_assert_eq(json_array_size(json_object_get(stj, "tabs")), 2);
	cr_assert_not_null(json_object_get(stj, "state_changes"));
	json_decref(stj);
	json_decref(ans);
	json_decref(res);
	res = NULL;
	/* A computer tool refusal. */
	assert_ok(call_s("computer", "{'action':'left_click','coordinate':[1,2]}"));
	struct dg_adapt_outcome r = {.done = 0, .verdict = "deny", .rule = "r1", .reason = "no"};
	assert_ok(dg_adapt_answer(&ad, &r, &ans, &err));
	assert_ok(dg_mcp_result(ans, false, &res, &err));
	assert_json(res, "{'content':[{'type':'text','text':'deskgate refused left_click: no (rule r1)'}],"
		      "'isError':true}");
	json_decref(ans);
	json_decref(tabs);
	json_decref(before);
}

/* answer (exec or not) -> CallToolResult (' for "). */
static const struct {
	const char *answer;
	bool exec;
	const char *want;
} results[] = {
	{"{'type':'tool_result','tool_use_id':'mcp_1','is_error':false,'content':[{'type':'text',"
	 "'text':'X=1,Y=2'},{'type':'image','source':{'type':'base64','media_type':'image/png',"
	 "'data':'iVBO'}}]}", false,
	 "{'content':[{'type':'text','text':'X=1,Y=2'},{'type':'image','data':'iVBO','mimeType':"
	 "'image/png'}],'isError':false}"},
	/* The browser_state block goes last, as text, without its type. */
	{"{'type':'tool_result','tool_use_id':'mcp_1','is_error':true,'toolset_name':'browser',"
	 "'content':[{'type':'browser_state','tabs':[{'tab_id':'1','title':'t','url':'u','active':"
	 "true}]},{'type':'text','text':'deskgate refused navigate: no (rule r)'}]}", false,
	 "{'content':[{'type':'text','text':'deskgate refused navigate: no (rule r)'},{'type':"
	 "'text','text':'browser_state: {\\'tabs\\':[{\\'tab_id\\':\\'1\\',\\'title\\':"
	 "\\'t\\',\\'url\\':\\'u\\',\\'active\\':true}]}'}],'isError':true}"},
	/* No is_error: not an error; a string content: its text. */
	{"{'type':'tool_result','content':'fine'}", false,
	 "{'content':[{'type':'text','text':'fine'}],'isError':false}"},
	{"{'type':'tool_result','content':[]}", false, "{'content':[],'isError':false}"},
	/* exec ran: its object as compact JSON. */
	{"{'type':'result','ok':true,'action':'exec','verdict':'allow','exec':{'ok':true,"
	 "'exit_code':1,'stdout':'a\\n','stderr':'','timed_out':false},'total_ms':3.5}", true,
	 "{'content':[{'type':'text','text':'{\\'ok\\':true,\\'exit_code\\':1,\\'stdout\\':"
	 "\\'a\\\\n\\',\\'stderr\\':\\'\\',\\'timed_out\\':false}'}],'isError':false}"},
	/* refused, as the answers word it */
	{"{'type':'result','ok':false,'action':'exec','verdict':'deny','rule':'no-exec','reason':"
	 "'exec is off'}", true,
	 "{'content':[{'type':'text','text':'deskgate refused exec: exec is off (rule no-exec)'}],"
	 "'isError':true}"},
	{"{'type':'result','ok':false,'verdict':'ask','rule':'approval','reason':'withdrawn'}", true,
	 "{'content':[{'type':'text','text':'deskgate refused exec: withdrawn (rule approval, "
	 "verdict ask)'}],'isError':true}"},
	/* failed: its error */
	{"{'type':'result','ok':false,'verdict':'allow','error':'execve: No such file or directory',"
	 "'exec':{'ok':false,'exit_code':127,'error':'execve: No such file or directory'}}", true,
	 "{'content':[{'type':'text','text':'execve: No such file or directory'}],'isError':true}"},
	/* missing fields do not crash */
	{"{'type':'result','ok':false}", true,
	 "{'content':[{'type':'text','text':'exec failed (no error given)'}],'isError':true}"},
	{"{'type':'result','ok':true}", true,
	 "{'content':[{'type':'text','text':'deskgate ran exec'}],'isError':false}"},
	/* control characters in notes become spaces */
	{"{'type':'result','ok':false,'verdict':'deny','reason':'a\\nb\\u0001c','rule':'r\\t'}",
	 true, "{'content':[{'type':'text','text':'deskgate refused exec: a b c (rule r )'}],"
	 "'isError':true}"},
	/* the gateway's errors, for either */
	{"{'type':'error','error':{'code':'rate_limited','message':'at most 10 messages a second'}}",
	 false, "{'content':[{'type':'text','text':'rate_limited: at most 10 messages a second'}],"
	 "'isError':true}"},
	{"{'type':'error','error':{'code':'bad_request','message':'x'}}", true,
	 "{'content':[{'type':'text','text':'bad_request: x'}],'isError':true}"},
	{"{'type':'error','error':{}}", true,
	 "{'content':[{'type':'text','text':'error: (no message)'}],'isError':true}"},
};

Test(result, each_kind)
{
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++) {
		assert_ok(result_of(results[i].answer, results[i].exec));
		assert_json(res, results[i].want);
	}
}

Test(result, garbage)
{
	static const struct {
		const char *answer;
		bool exec;
		const char *prefix;
	} bad[] = {
		{"[]", false, "answer: "},
		{"null", true, "answer: "},
		{"'tool_result'", false, "answer: "},
		{"{}", false, "answer.type: "},
		{"{'type':5}", true, "answer.type: "},
		{"{'type':'tool_result','content':[]}", true, "answer.type: "},
		{"{'type':'result','ok':true}", false, "answer.type: "},
		{"{'type':'tool_use','id':'x','name':'computer','input':{}}", false, "answer.type"},
		{"{'type':'tool_result'}", false, "answer.content: "},
		{"{'type':'tool_result','content':{}}", false, "answer.content: "},
		{"{'type':'tool_result','content':[1]}", false, "answer.content[0]: "},
		{"{'type':'tool_result','content':[{}]}", false, "answer.content[0].type: "},
		{"{'type':'tool_result','content':[{'type':'text'},{'type':'x'}]}", false,
		 "answer.content[0].text: missing"},
		{"{'type':'tool_result','content':[{'type':'text','text':'a'},{'type':'video'}]}", false,
		 "answer.content[1].type: "},
		{"{'type':'tool_result','content':[{'type':'text','text':5}]}", false,
		 "answer.content[0].text: "},
		{"{'type':'tool_result','content':[{'type':'image'}]}", false,
		 "answer.content[0].source: "},
		{"{'type':'tool_result','content':[{'type':'image','source':{'type':'url','url':'u'}}]}",
		 false, "answer.content[0].source: "},
		{"{'type':'tool_result','content':[{'type':'image','source':{'type':'base64',"
		 "'data':'x'}}]}", false, "answer.content[0].source.media_type: missing"},
		{"{'type':'tool_result','content':[{'type':'image','source':{'type':'base64',"
		 "'media_type':'image/png','data':[]}}]}", false, "answer.content[0].source.data: "},
		{"{'type':'tool_result','content':[],'is_error':'yes'}", false, "answer.is_error: "},
		{"{'type':'result'}", true, "answer.ok: "},
		{"{'type':'result','ok':1}", true, "answer.ok: "},
		{"{'type':'result','ok':false,'verdict':5}", true, "answer.verdict: "},
		{"{'type':'result','ok':false,'error':{}}", true, "answer.error: "},
		{"{'type':'result','ok':true,'exec':'out'}", true, "answer.exec: "},
		{"{'type':'result','ok':true,'action':[]}", true, "answer.action: "},
		{"{'type':'error'}", false, "answer.error: "},
		{"{'type':'error','error':'boom'}", true, "answer.error: "},
		{"{'type':'error','error':{'code':5}}", false, "answer.error.code: "},
		{"{'type':'error','error':{'code':'c','message':[]}}", false, "answer.error.message: "},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = result_of(bad[i].answer, bad[i].exec);
		cr_assert_eq(rc, -EINVAL, "%s: rc %d", bad[i].answer, rc);
		cr_assert(strncmp(err.msg, bad[i].prefix, strlen(bad[i].prefix)) == 0,
			  "%s: \"%s\" does not start with \"%s\"", bad[i].answer, err.msg,
			  bad[i].prefix);
	}
	res = NULL;
	cr_assert_eq(dg_mcp_result(NULL, false, &res, &err), -EINVAL);
	cr_assert_null(res);
}

/* Every value of a real answer replaced by junk in turn: no crash, 0 or
 * -EINVAL. */
Test(result, mutated_answers)
{
	static const char *const answers[] = {
		"{'type':'tool_result','tool_use_id':'a','is_error':false,'content':[{'type':'text',"
		"'text':'t'},{'type':'image','source':{'type':'base64','media_type':'image/png','data':"
		"'x'}},{'type':'browser_state','tabs':[]}]}",
		"{'type':'result','ok':true,'action':'exec','verdict':'allow','rule':'r','reason':'x',"
		"'error':'e','exec':{'ok':true,'stdout':''}}",
		"{'type':'error','error':{'code':'c','message':'m'}}",
	};
	json_t *junk[] = {json_null(), json_false(), json_integer(0), json_string(""), json_array(),
			  json_object()};
	for (size_t k = 0; k < sizeof(answers) / sizeof(answers[0]); k++) {
		json_t *a = J(answers[k]);
		/* Walk every object reached from a, replacing each of its values. */
		json_t *stack[64];
		int n = 0;
		stack[n++] = a;
		while (n > 0) {
			json_t *o = stack[--n];
			if (json_is_array(o)) {
				size_t i;
				json_t *v;
				json_array_foreach(o, i, v)
					if (n < 64 && (json_is_object(v) || json_is_array(v)))
						stack[n++] = v;
				continue;
			}
			const char *key;
			json_t *v;
			json_object_foreach(o, key, v)
			{
				json_t *keep = json_incref(v);
				for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
					json_object_set(o, key, junk[j]);
					for (int e = 0; e < 2; e++) {
						json_t *r = NULL;
						int rc = dg_mcp_result(a, e, &r, &err);
						cr_assert(rc == 0 || rc == -EINVAL, "rc %d", rc);
						cr_assert((rc == 0) == (r != NULL));
						json_decref(r);
					}
				}
				json_object_set(o, key, keep);
				json_decref(keep);
				if (n < 64 && (json_is_object(keep) || json_is_array(keep)))
					stack[n++] = keep;
			}
		}
		json_decref(a);
	}
	for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++)
		json_decref(junk[j]);
}
