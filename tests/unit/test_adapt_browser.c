/* Anthropic's browser toolset (actions/adapt-browser.c) and its answers
 * (actions/adapt-answer.c): each of the 31 members of
 * browser_toolset_20260801 from a minimal and a full input (as the SDK's
 * BetaBrowser*Input types allow) to the canonical action it means, complete
 * or pending; what a pending member asks the browser
 * (dg_adapt_resolve_wants) and the action dg_adapt_resolve makes from the
 * browser's answer, in screen coordinates; every refusal naming the field,
 * each limit at its boundary; the session's tools list (dg_toolsets_parse)
 * and the members it disables; the tool_result with its browser_state; and
 * hostile input, with random mutations of real blocks resolved against
 * random views. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "actions/actions.h"

/* A 1280x800 desktop; the model told about 1024x640 (the computer tools'
 * scaling, which browser members do not use: their coordinates are
 * viewport pixels); the pointer at (100, 200). */
#define DW 1280
#define DH 800
#define CX 100
#define CY 200

static struct dg_adapted ad;
static struct dg_err err;
static json_t *ans;
static json_t *jtmp[4];

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define leak_check() __lsan_do_recoverable_leak_check()
#else
#define leak_check() 0
#endif

static void cleanup(void)
{
	dg_adapted_free(&ad);
	json_decref(ans);
	ans = NULL;
	for (size_t i = 0; i < sizeof(jtmp) / sizeof(jtmp[0]); i++) {
		json_decref(jtmp[i]);
		jtmp[i] = NULL;
	}
	cr_assert_eq(leak_check(), 0, "memory leaked (see the LeakSanitizer report above)");
}

TestSuite(members, .fini = cleanup);
TestSuite(refuse, .fini = cleanup);
TestSuite(bounds, .fini = cleanup);
TestSuite(url, .fini = cleanup);
TestSuite(resolve, .fini = cleanup);
TestSuite(toolsets, .fini = cleanup);
TestSuite(answer, .fini = cleanup);
TestSuite(hostile, .fini = cleanup);

static const struct dg_adapt_scale scaled = {DW, DH, 1024, 640, NULL};
static const struct dg_adapt_scale *scale = &scaled;

/* The browser's answers: the viewport below 87 pixels of browser chrome,
 * across the whole screen; the same with an element's point; a viewport
 * 200 pixels from the left, 1000 wide, with a point. */
static const struct dg_browser_view VP = {0, 87, 1280, 713, false, 0, 0};
static const struct dg_browser_view EL = {0, 87, 1280, 713, true, 640, 400};
static const struct dg_browser_view VX = {200, 87, 1000, 713, true, 700, 500};

#define TAB "T-1.a_b"

/* ' for " in place. */
static char *dq(const char *sq)
{
	char *t = strdup(sq);
	cr_assert(t);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	return t;
}

/* Parses len bytes into ad (garbage before: parse must not rely on a
 * zeroed struct). */
static int parse_raw(const char *text, size_t len)
{
	dg_adapted_free(&ad);
	memset(&ad, 0xa5, sizeof(ad));
	memset(&err, 0, sizeof(err));
	return dg_adapt_parse(text, len, scale, CX, CY, &ad, &err);
}

static int parse(const char *sq)
{
	char *t = dq(sq);
	int rc = parse_raw(t, strlen(t));
	free(t);
	return rc;
}

/* A tool_use block of the browser toolset, as the Messages API returns it,
 * named name, around input (' for "). */
static int member(const char *name, const char *input)
{
	char *m = NULL;
	cr_assert(asprintf(&m, "{'type':'tool_use','id':'toolu_b1','name':'%s','toolset_name':"
			       "'browser','input':%s,'caller':{'type':'direct'}}", name, input) > 0);
	int rc = parse(m);
	free(m);
	return rc;
}

static int memberf(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int memberf(const char *name, const char *fmt, ...)
{
	char *input = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&input, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0);
	int rc = member(name, input);
	free(input);
	return rc;
}

static int resolve(const struct dg_browser_view *v)
{
	memset(&err, 0, sizeof(err));
	return dg_adapt_resolve(&ad, 0, v, &err);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	cr_assert(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

#define assert_ok(rc) cr_assert_eq((rc), 0, "rc %d, message \"%s\"", (rc), err.msg)

/* Nothing translated and nothing pending is kept after a refusal. */
static void assert_nothing(void)
{
	cr_assert_eq(ad.n, 0);
	cr_assert_not(ad.pending);
	cr_assert_null(ad.bcall.tmpl);
	struct dg_resolve_req q;
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
	for (int i = 0; i < DG_ADAPT_ACTIONS_MAX; i++) {
		cr_assert_null(ad.actions[i]);
		cr_assert_null(ad.wire_actions[i]);
		cr_assert_null(ad.text[i]);
	}
}

/* Refused with code and exactly this message; nothing kept. */
#define assert_refused(rc, code, want)                                                     \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert_str_eq(err.msg, (want));                                         \
		assert_nothing();                                                          \
	} while (0)

#define assert_refused_prefix(rc, code, prefix)                                           \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert(strncmp(err.msg, (prefix), strlen(prefix)) == 0,                 \
			  "message \"%s\" does not start with \"%s\"", err.msg, (prefix));  \
		assert_nothing();                                                          \
	} while (0)

/* A resolve refused with exactly this message: the call is still pending,
 * as it was (the runner answers it as failed, or may resolve again). */
#define assert_resolve_refused(v, want)                                                    \
	do {                                                                               \
		int rc_ = resolve(v);                                                      \
		cr_assert_eq(rc_, -EINVAL, "rc %d, message \"%s\"", rc_, err.msg);         \
		cr_assert_str_eq(err.msg, (want));                                         \
		cr_assert(ad.pending);                                                     \
		cr_assert_eq(ad.n, 1);                                                     \
		cr_assert_null(ad.actions[0]);                                             \
		cr_assert_null(ad.text[0]);                                                \
		cr_assert_not_null(ad.wire_actions[0]);                                    \
	} while (0)

/* Action 0 is whole and its canonical encoding is w: the
 * object, the text kept beside it, the parsed struct, and a parse of the
 * text again all agree, for the desktop's size. */
static void assert_action_exact(const char *w, const char *what)
{
	cr_assert_eq(ad.n, 1, "%s: n %d", what, ad.n);
	cr_assert_not(ad.pending, "%s: still pending", what);
	cr_assert_not_null(ad.actions[0], "%s: no canonical object", what);
	cr_assert_not_null(ad.wire_actions[0], "%s: no wire action", what);
	char *d = json_dumps(ad.actions[0], JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(d, w, "%s", what);
	free(d);
	cr_assert_not_null(ad.text[0], "%s: no text", what);
	cr_assert_str_eq(ad.text[0], w, "%s: the kept text", what);
	cr_assert_eq(ad.text_len[0], strlen(w), "%s: text_len", what);
	char *k = dg_action_canonical(&ad.act[0], NULL);
	cr_assert_str_eq(k, w, "%s: the kept struct", what);
	free(k);
	struct dg_action act;
	struct dg_err e;
	int rc = dg_action_parse(ad.text[0], ad.text_len[0], DW, DH, &act, &e);
	cr_assert_eq(rc, 0, "%s: the text does not parse again: %s", what, e.msg);
	k = dg_action_canonical(&act, NULL);
	dg_action_free(&act);
	cr_assert_str_eq(k, w, "%s: parsed again", what);
	free(k);
}

static void assert_action(const char *want, const char *what)
{
	char *w = dq(want);
	assert_action_exact(w, what);
	free(w);
}

/* A complete member: its action now, nothing to ask the browser. */
static void assert_complete(const char *want, const char *what)
{
	struct dg_resolve_req q;
	cr_assert(ad.browser, "%s", what);
	cr_assert_null(ad.bcall.tmpl, "%s: a template for a complete member", what);
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q), "%s wants resolving", what);
	assert_action(want, what);
}

/* A pending member asking for tab (or "" for none) and element ref (0:
 * the viewport alone; scrolled into view when given) with or without the
 * hit test. */
static void assert_pending(const char *tab, int ref, bool hit, const char *what)
{
	struct dg_resolve_req q;
	memset(&q, 0x5a, sizeof(q));
	cr_assert(ad.browser, "%s", what);
	cr_assert(ad.pending, "%s: not pending", what);
	cr_assert_eq(ad.n, 1, "%s: n %d", what, ad.n);
	cr_assert_null(ad.actions[0], "%s", what);
	cr_assert_null(ad.text[0], "%s", what);
	cr_assert_not_null(ad.wire_actions[0], "%s", what);
	cr_assert_not_null(ad.bcall.tmpl, "%s", what);
	cr_assert(dg_adapt_resolve_wants(&ad, 0, &q), "%s does not want resolving", what);
	cr_assert_str_eq(q.tab, tab, "%s: tab", what);
	cr_assert_eq(q.ref, ref, "%s: ref", what);
	cr_assert_eq(q.scroll, ref != 0, "%s: scroll", what);
	cr_assert_eq(q.hit, hit, "%s: hit", what);
	cr_assert_not(dg_adapt_resolve_wants(&ad, 1, &q), "%s: action 1", what);
	cr_assert_not(dg_adapt_resolve_wants(&ad, -1, &q), "%s: action -1", what);
}

/* Resolved with v into want, and then nothing more to ask. */
static void assert_resolved(const struct dg_browser_view *v, const char *want, const char *what)
{
	int rc = resolve(v);
	cr_assert_eq(rc, 0, "%s: resolve rc %d, \"%s\"", what, rc, err.msg);
	assert_action(want, what);
	struct dg_resolve_req q;
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q), "%s: resolved and still wanting", what);
}

/* ---- the members, each from a minimal and a full input -------------------------- */

enum kind { COMPLETE, PENDING };

struct row {
	const char *name;
	const char *input;
	enum kind kind;
	const char *tab; /* what resolving asks for */
	int ref;
	bool hit;
	const char *want; /* the canonical action (after resolving with the table's view) */
};

/* Minimal inputs: only the required fields. Pending ones resolve with EL
 * (viewport at (0, 87), element at (640, 400)). In the SDK's order
 * (BETA_BROWSER_MEMBER_NAME_VALUES), which dg_browser_member_name follows. */
static const struct row minimal[DG_BROWSER_MEMBERS] = {
	{"navigate", "{'url':'https://example.com/'}", COMPLETE, "", 0, false,
	 "{'type':'navigate','url':'https://example.com/'}"},
	{"list_tabs", "{}", COMPLETE, "", 0, false, "{'type':'list_tabs'}"},
	{"new_tab", "{}", COMPLETE, "", 0, false, "{'type':'new_tab'}"},
	{"switch_tab", "{'tab_id':'T2'}", COMPLETE, "", 0, false, "{'tab':'T2','type':'switch_tab'}"},
	{"close_tab", "{'tab_id':'T2'}", COMPLETE, "", 0, false, "{'tab':'T2','type':'close_tab'}"},
	{"read_page", "{}", COMPLETE, "", 0, false,
	 "{'depth':15,'filter':'visible','type':'read_page'}"},
	{"get_page_text", "{}", COMPLETE, "", 0, false, "{'type':'get_page_text'}"},
	{"read_console", "{}", COMPLETE, "", 0, false, "{'type':'read_console'}"},
	{"read_network", "{}", COMPLETE, "", 0, false, "{'type':'read_network'}"},
	{"find", "{'query':'search bar'}", COMPLETE, "", 0, false,
	 "{'query':'search bar','type':'find'}"},
	{"form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':'hello'}", PENDING, "", 3, false,
	 "{'ref':'ref_3','type':'form_input','value':'hello','x':640,'y':400}"},
	{"file_upload", "{'target':{'type':'ref','ref':'ref_4'},'paths':['/tmp/a.txt']}", PENDING, "", 4,
	 false, "{'paths':['/tmp/a.txt'],'ref':'ref_4','type':'file_upload','x':640,'y':400}"},
	{"scroll_to", "{'target':{'type':'ref','ref':'ref_5'}}", PENDING, "", 5, false,
	 "{'ref':'ref_5','type':'scroll_to','x':640,'y':400}"},
	{"screenshot", "{}", PENDING, "", 0, false, "{'region':[0,87,1280,800],'type':'screenshot'}"},
	{"zoom", "{'region':[10,20,110,70]}", PENDING, "", 0, false,
	 "{'region':[10,107,110,157],'type':'zoom'}"},
	{"left_click", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'button':'left','count':1,'modifiers':[],'type':'click','x':100,'y':137}"},
	{"right_click", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'button':'right','count':1,'modifiers':[],'type':'click','x':100,'y':137}"},
	{"middle_click", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'button':'middle','count':1,'modifiers':[],'type':'click','x':100,'y':137}"},
	{"double_click", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'button':'left','count':2,'modifiers':[],'type':'click','x':100,'y':137}"},
	{"triple_click", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'button':'left','count':3,'modifiers':[],'type':'click','x':100,'y':137}"},
	{"hover", "{'target':{'type':'coordinate','x':100,'y':50}}", PENDING, "", 0, false,
	 "{'modifiers':[],'type':'move','x':100,'y':137}"},
	{"left_click_drag",
	 "{'from':{'type':'coordinate','x':10,'y':20},'target':{'type':'coordinate','x':300,'y':400}}",
	 PENDING, "", 0, false,
	 "{'button':'left','modifiers':[],'path':[[10,107],[300,487]],'type':'drag'}"},
	{"left_mouse_down", "{'target':{'type':'coordinate','x':5,'y':6}}", PENDING, "", 0, false,
	 "{'button':'left','type':'mouse_down','x':5,'y':93}"},
	{"left_mouse_up", "{'target':{'type':'coordinate','x':5,'y':6}}", PENDING, "", 0, false,
	 "{'button':'left','type':'mouse_up','x':5,'y':93}"},
	/* The viewport's last pixel: on the desktop, off the 1024x640 model
	 * display (browser coordinates are not scaled). */
	{"mouse_move", "{'target':{'type':'coordinate','x':1279,'y':712}}", PENDING, "", 0, false,
	 "{'modifiers':[],'type':'move','x':1279,'y':799}"},
	{"scroll", "{'scroll_direction':'down','target':{'type':'coordinate','x':640,'y':300}}",
	 PENDING, "", 0, false, "{'dx':0,'dy':3,'modifiers':[],'type':'scroll','x':640,'y':387}"},
	{"type", "{'text':'hello'}", COMPLETE, "", 0, false, "{'text':'hello','type':'type'}"},
	{"key", "{'text':'ctrl+a'}", COMPLETE, "", 0, false, "{'keys':'Control_L+a','type':'key'}"},
	{"hold_key", "{'text':'shift','duration':1.5}", COMPLETE, "", 0, false,
	 "{'keys':'Shift_L','ms':1500,'type':'hold_key'}"},
	{"wait", "{'duration':2}", COMPLETE, "", 0, false, "{'ms':2000,'type':'wait'}"},
	{"javascript_exec", "{'text':'document.title'}", COMPLETE, "", 0, false,
	 "{'code':'document.title','type':'javascript'}"},
};

/* Full inputs: every field the member takes (tab_id on all that take it,
 * which makes them pending: the tab comes to the front first). They
 * resolve with VX (viewport at (200, 87), 1000x713; element at (700,
 * 500)). */
static const struct row full[DG_BROWSER_MEMBERS] = {
	{"navigate", "{'url':'Example.COM','tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'type':'navigate','url':'https://example.com/'}"},
	/* list_tabs and new_tab take no fields; an SDK's null is none. */
	{"list_tabs", "{'tab_id':null}", COMPLETE, "", 0, false, "{'type':'list_tabs'}"},
	{"new_tab", "{'tab_id':null}", COMPLETE, "", 0, false, "{'type':'new_tab'}"},
	/* switch_tab and close_tab name their tab in the action itself. */
	{"switch_tab", "{'tab_id':'" TAB "'}", COMPLETE, "", 0, false,
	 "{'tab':'" TAB "','type':'switch_tab'}"},
	{"close_tab", "{'tab_id':'" TAB "'}", COMPLETE, "", 0, false,
	 "{'tab':'" TAB "','type':'close_tab'}"},
	{"read_page", "{'depth':5,'filter':'interactive','ref':'ref_12','tab_id':'" TAB "'}", PENDING,
	 TAB, 0, false, "{'depth':5,'filter':'interactive','ref':'ref_12','type':'read_page'}"},
	{"get_page_text", "{'tab_id':'" TAB "'}", PENDING, TAB, 0, false, "{'type':'get_page_text'}"},
	{"read_console", "{'tab_id':'" TAB "'}", PENDING, TAB, 0, false, "{'type':'read_console'}"},
	{"read_network", "{'tab_id':'" TAB "'}", PENDING, TAB, 0, false, "{'type':'read_network'}"},
	{"find", "{'query':'add to cart','tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'query':'add to cart','type':'find'}"},
	{"form_input", "{'target':{'type':'ref','ref':'ref_999999999'},'value':true,'tab_id':'" TAB "'}",
	 PENDING, TAB, 999999999, false,
	 "{'ref':'ref_999999999','type':'form_input','value':true,'x':700,'y':500}"},
	{"file_upload",
	 "{'target':{'type':'ref','ref':'ref_4'},'paths':['/tmp/a.txt','/home/user/b c.pdf'],"
	 "'document_ids':null,'tab_id':'" TAB "'}",
	 PENDING, TAB, 4, false,
	 "{'paths':['/tmp/a.txt','/home/user/b c.pdf'],'ref':'ref_4','type':'file_upload','x':700,"
	 "'y':500}"},
	{"scroll_to", "{'target':{'type':'ref','ref':'ref_5'},'tab_id':'" TAB "'}", PENDING, TAB, 5,
	 false, "{'ref':'ref_5','type':'scroll_to','x':700,'y':500}"},
	{"screenshot", "{'tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'region':[200,87,1200,800],'type':'screenshot'}"},
	/* The whole viewport: x1, y1 at its size. */
	{"zoom", "{'region':[0,0,1000,713],'tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'region':[200,87,1200,800],'type':'zoom'}"},
	{"left_click", "{'target':{'type':'ref','ref':'ref_7'},'modifiers':'ctrl+shift','tab_id':'" TAB
		       "'}",
	 PENDING, TAB, 7, true,
	 "{'button':'left','count':1,'modifiers':['ctrl','shift'],'ref':'ref_7','type':'click','x':700,"
	 "'y':500}"},
	{"right_click",
	 "{'target':{'type':'coordinate','x':999,'y':712},'modifiers':'cmd+alt','tab_id':'" TAB "'}",
	 PENDING, TAB, 0, false,
	 "{'button':'right','count':1,'modifiers':['alt','super'],'type':'click','x':1199,'y':799}"},
	{"middle_click", "{'target':{'type':'ref','ref':'ref_1'},'modifiers':'shift','tab_id':'" TAB
			 "'}",
	 PENDING, TAB, 1, true,
	 "{'button':'middle','count':1,'modifiers':['shift'],'ref':'ref_1','type':'click','x':700,"
	 "'y':500}"},
	{"double_click",
	 "{'target':{'type':'coordinate','x':0,'y':0},'modifiers':'meta','tab_id':'" TAB "'}", PENDING,
	 TAB, 0, false,
	 "{'button':'left','count':2,'modifiers':['meta'],'type':'click','x':200,'y':87}"},
	{"triple_click", "{'target':{'type':'ref','ref':'ref_2'},'modifiers':'ctrl','tab_id':'" TAB
			 "'}",
	 PENDING, TAB, 2, true,
	 "{'button':'left','count':3,'modifiers':['ctrl'],'ref':'ref_2','type':'click','x':700,'y':500}"},
	{"hover", "{'target':{'type':'ref','ref':'ref_8'},'tab_id':'" TAB "'}", PENDING, TAB, 8, true,
	 "{'modifiers':[],'ref':'ref_8','type':'move','x':700,'y':500}"},
	{"left_click_drag",
	 "{'from':{'type':'coordinate','x':0,'y':0},'target':{'type':'coordinate','x':999,'y':712},"
	 "'tab_id':'" TAB "'}",
	 PENDING, TAB, 0, false,
	 "{'button':'left','modifiers':[],'path':[[200,87],[1199,799]],'type':'drag'}"},
	{"left_mouse_down", "{'target':{'type':'coordinate','x':1,'y':2},'tab_id':'" TAB "'}", PENDING,
	 TAB, 0, false, "{'button':'left','type':'mouse_down','x':201,'y':89}"},
	{"left_mouse_up", "{'target':{'type':'coordinate','x':1,'y':2},'tab_id':'" TAB "'}", PENDING,
	 TAB, 0, false, "{'button':'left','type':'mouse_up','x':201,'y':89}"},
	/* Numbers that are not integers are rounded, halves away from zero. */
	{"mouse_move", "{'target':{'type':'coordinate','x':10.4,'y':20.5},'tab_id':'" TAB "'}", PENDING,
	 TAB, 0, false, "{'modifiers':[],'type':'move','x':210,'y':108}"},
	{"scroll",
	 "{'scroll_direction':'left','scroll_amount':10,'target':{'type':'coordinate','x':5,'y':5},"
	 "'tab_id':'" TAB "'}",
	 PENDING, TAB, 0, false, "{'dx':-10,'dy':0,'modifiers':[],'type':'scroll','x':205,'y':92}"},
	{"type", "{'text':'hello\\nworld','tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'text':'hello\\nworld','type':'type'}"},
	{"key", "{'text':'Tab','repeat':3,'tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'keys':'Tab Tab Tab','type':'key'}"},
	{"hold_key", "{'text':'ctrl+shift','duration':30,'tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'keys':'Control_L+Shift_L','ms':30000,'type':'hold_key'}"},
	{"wait", "{'duration':0.25,'tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'ms':250,'type':'wait'}"},
	{"javascript_exec", "{'text':'1+1','tab_id':'" TAB "'}", PENDING, TAB, 0, false,
	 "{'code':'1+1','type':'javascript'}"},
};

static void check_row(const struct row *r, const struct dg_browser_view *v, const char *table)
{
	char what[96];
	snprintf(what, sizeof(what), "%s (%s)", r->name, table);
	int rc = member(r->name, r->input);
	cr_assert_eq(rc, 0, "%s: rc %d, \"%s\"", what, rc, err.msg);
	cr_assert_eq(ad.wire, DG_WIRE_ANTHROPIC, "%s", what);
	cr_assert(ad.has_id, "%s", what);
	cr_assert_str_eq(ad.call_id, "toolu_b1", "%s", what);
	cr_assert(ad.browser, "%s", what);
	cr_assert_not(ad.toolset, "%s", what);
	cr_assert_str_eq(ad.name[0], r->name, "%s", what);
	/* The wire action is the block's input, as received. */
	cr_assert_eq(ad.wire_actions[0], json_object_get(ad.raw, "input"), "%s", what);
	if (r->kind == COMPLETE) {
		assert_complete(r->want, what);
		/* Resolving a complete action is nothing to do. */
		cr_assert_eq(resolve(v), 0, "%s: %s", what, err.msg);
		assert_action(r->want, what);
	} else {
		assert_pending(r->tab, r->ref, r->hit, what);
		assert_resolved(v, r->want, what);
	}
	cr_assert_str_eq(ad.name[0], r->name, "%s: name after resolving", what);
	cr_assert_eq(ad.wire_actions[0], json_object_get(ad.raw, "input"), "%s", what);
}

Test(members, every_member_from_a_minimal_input)
{
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++) {
		cr_assert_str_eq(dg_browser_member_name(i), minimal[i].name, "member %d", i);
		check_row(&minimal[i], &EL, "minimal");
	}
	cr_assert_null(dg_browser_member_name(DG_BROWSER_MEMBERS));
	cr_assert_null(dg_browser_member_name(-1));
}

Test(members, every_member_from_a_full_input)
{
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++) {
		cr_assert_str_eq(dg_browser_member_name(i), full[i].name, "member %d", i);
		check_row(&full[i], &VX, "full");
	}
}

Test(members, only_element_members_need_the_point)
{
	/* Only ref targets need the element's point: the other pending
	 * members resolve from the viewport alone; without the point an
	 * element member is refused, and stays pending. */
	static const struct dg_browser_view VX0 = {200, 87, 1000, 713, false, 0, 0};
	int viewport = 0, element = 0;
	for (int t = 0; t < 2; t++) {
		const struct row *rows = t ? full : minimal;
		for (int i = 0; i < DG_BROWSER_MEMBERS; i++) {
			const struct row *r = &rows[i];
			if (r->kind != PENDING)
				continue;
			assert_ok(member(r->name, r->input));
			if (r->ref == 0) {
				assert_resolved(t ? &VX0 : &VP, r->want, r->name);
				viewport++;
			} else {
				assert_resolve_refused(t ? &VX0 : &VP,
						       "the browser did not say where the element is");
				element++;
			}
		}
	}
	cr_assert_eq(viewport, 33);
	cr_assert_eq(element, 10);
}

Test(members, form_values_and_click_kinds)
{
	/* BetaBrowserFormInputValue: string | number | boolean. */
	assert_ok(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':false}"));
	assert_resolved(&EL, "{'ref':'ref_3','type':'form_input','value':false,'x':640,'y':400}",
			"false");
	assert_ok(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':42}"));
	assert_resolved(&EL, "{'ref':'ref_3','type':'form_input','value':42,'x':640,'y':400}", "42");
	assert_ok(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':2.5}"));
	assert_resolved(&EL, "{'ref':'ref_3','type':'form_input','value':2.5,'x':640,'y':400}", "2.5");
	assert_ok(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':''}"));
	assert_resolved(&EL, "{'ref':'ref_3','type':'form_input','value':'','x':640,'y':400}", "''");
	/* Every click member on a ref: the hit test asked, the ref kept. */
	static const char *const clicks[][3] = {{"left_click", "left", "1"},
						{"right_click", "right", "1"},
						{"middle_click", "middle", "1"},
						{"double_click", "left", "2"},
						{"triple_click", "left", "3"}};
	for (size_t k = 0; k < 5; k++) {
		assert_ok(member(clicks[k][0], "{'target':{'type':'ref','ref':'ref_42'}}"));
		assert_pending("", 42, true, clicks[k][0]);
		char want[160];
		snprintf(want, sizeof(want), "{'button':'%s','count':%s,'modifiers':[],'ref':'ref_42',"
			 "'type':'click','x':640,'y':400}", clicks[k][1], clicks[k][2]);
		assert_resolved(&EL, want, clicks[k][0]);
	}
	/* Scroll directions. */
	static const char *const dirs[][2] = {{"up", "'dx':0,'dy':-3"}, {"down", "'dx':0,'dy':3"},
					      {"left", "'dx':-3,'dy':0"}, {"right", "'dx':3,'dy':0"}};
	for (size_t k = 0; k < 4; k++) {
		assert_ok(memberf("scroll", "{'scroll_direction':'%s','target':{'type':'coordinate',"
				  "'x':1,'y':1}}", dirs[k][0]));
		char want[160];
		snprintf(want, sizeof(want), "{%s,'modifiers':[],'type':'scroll','x':1,'y':88}",
			 dirs[k][1]);
		assert_resolved(&VP, want, dirs[k][0]);
	}
	/* read_page's filters. */
	assert_ok(member("read_page", "{'filter':'all'}"));
	assert_complete("{'depth':15,'filter':'all','type':'read_page'}", "all");
	assert_ok(member("read_page", "{'filter':'interactive','ref':'ref_1'}"));
	assert_complete("{'depth':15,'filter':'interactive','ref':'ref_1','type':'read_page'}",
			"interactive");
}

Test(members, null_optional_fields_count_as_absent)
{
	/* SDKs dump unset fields as null. */
	assert_ok(member("get_page_text", "{'tab_id':null}"));
	assert_complete("{'type':'get_page_text'}", "tab_id null");
	assert_ok(member("read_page", "{'depth':null,'filter':null,'ref':null,'tab_id':null}"));
	assert_complete("{'depth':15,'filter':'visible','type':'read_page'}", "read_page nulls");
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':null,"
				       "'tab_id':null}"));
	assert_pending("", 0, false, "left_click nulls");
	assert_resolved(&VP, "{'button':'left','count':1,'modifiers':[],'type':'click','x':1,'y':88}",
			"left_click nulls");
	assert_ok(member("scroll", "{'scroll_direction':'up','scroll_amount':null,'target':{'type':"
				   "'coordinate','x':1,'y':1}}"));
	assert_resolved(&VP, "{'dx':0,'dy':-3,'modifiers':[],'type':'scroll','x':1,'y':88}",
			"scroll_amount null");
	assert_ok(member("key", "{'text':'Tab','repeat':null}"));
	assert_complete("{'keys':'Tab','type':'key'}", "repeat null");
	assert_ok(member("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':['/tmp/x'],"
					"'document_ids':null}"));
	assert_pending("", 1, false, "document_ids null");
	/* A required field that is null is missing. */
	assert_refused(member("left_click", "{'target':null}"), -EINVAL,
		       "browser.input.target: required for left_click");
	assert_refused(member("navigate", "{'url':null}"), -EINVAL,
		       "browser.input.url: required for navigate");
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':null}"),
		       -EINVAL,
		       "browser.input.paths: required (files in the session's scratch space: /tmp, "
		       "/home/user)");
}

Test(members, the_block_around_the_member)
{
	/* The block's other fields are the tool_use block's: caller,
	 * cache_control; a refusal is still answerable (id, browser). */
	assert_ok(parse("{'type':'tool_use','id':'toolu_x','name':'screenshot','toolset_name':"
			"'browser','input':{},'cache_control':{'type':'ephemeral','ttl':'5m'}}"));
	assert_pending("", 0, false, "screenshot");
	assert_refused(parse("{'type':'tool_use','id':'toolu_x','name':'screenshot','toolset_name':"
			     "'browser','input':{},'extra':1}"),
		       -EINVAL,
		       "anthropic: unknown field \"extra\" for tool_use (allowed: id, name, input, "
		       "caller, cache_control, toolset_name)");
	cr_assert(ad.browser);
	cr_assert(ad.has_id);
	assert_refused(parse("{'type':'tool_use','id':'toolu_x','name':'screenshot','toolset_name':"
			     "'browser'}"),
		       -EINVAL, "anthropic.input: required for tool_use");
	/* The member's input has no "action": the name is the member. */
	assert_refused(member("screenshot", "{'action':'screenshot'}"), -EINVAL,
		       "browser.input: unknown field \"action\" for screenshot (allowed: tab_id)");
	/* A browser member's name without toolset_name is the computer tool's. */
	assert_refused(parse("{'type':'tool_use','id':'toolu_x','name':'navigate','input':{'url':"
			     "'a.b'}}"),
		       -EINVAL,
		       "anthropic.name: \"navigate\" is not \"computer\" (deskgate is the computer tool "
		       "only)");
	cr_assert_not(ad.browser);
}

/* ---- refusals, naming the field ----------------------------------------------------- */

Test(refuse, unknown_member_and_fields)
{
	assert_refused(member("clik", "{}"), -EINVAL,
		       "browser.name: \"clik\" is not a member of the browser toolset (navigate, "
		       "read_page, find, left_click, ...)");
	cr_assert(ad.browser);
	/* The computer toolset's cursor_position is no browser member. */
	assert_refused(member("cursor_position", "{}"), -EINVAL,
		       "browser.name: \"cursor_position\" is not a member of the browser toolset "
		       "(navigate, read_page, find, left_click, ...)");
	assert_refused(parse("{'type':'tool_use','id':'t','name':7,'toolset_name':'browser',"
			     "'input':{}}"),
		       -EINVAL,
		       "browser.name: 7 is not a member of the browser toolset (navigate, read_page, "
		       "find, left_click, ...)");
	assert_refused(member("navigate", "{'url':'a.b','x':1}"), -EINVAL,
		       "browser.input: unknown field \"x\" for navigate (allowed: url, tab_id)");
	assert_refused(member("list_tabs", "{'tab_id':'T1'}"), -EINVAL,
		       "browser.input: unknown field \"tab_id\" (list_tabs takes no fields)");
	assert_refused(member("new_tab", "{'url':'a.b'}"), -EINVAL,
		       "browser.input: unknown field \"url\" (new_tab takes no fields)");
	/* Fields of other members are unknown here. */
	assert_refused(member("hover", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':"
				       "'shift'}"),
		       -EINVAL, "browser.input: unknown field \"modifiers\" for hover (allowed: tab_id, "
				"target)");
	assert_refused(member("scroll", "{'scroll_direction':'up','target':{'type':'coordinate','x':1,"
					"'y':1},'modifiers':'shift'}"),
		       -EINVAL,
		       "browser.input: unknown field \"modifiers\" for scroll (allowed: tab_id, target, "
		       "scroll_direction, scroll_amount)");
	assert_refused(member("type", "{'text':'a','repeat':2}"), -EINVAL,
		       "browser.input: unknown field \"repeat\" for type (allowed: tab_id, text)");
	assert_refused(member("switch_tab", "{}"), -EINVAL,
		       "browser.input.tab_id: required for switch_tab");
	assert_refused(member("left_click_drag", "{'target':{'type':'coordinate','x':1,'y':1}}"),
		       -EINVAL, "browser.input.from: required for left_click_drag");
	assert_refused(member("hold_key", "{'text':'a'}"), -EINVAL,
		       "browser.input.duration: required for hold_key");
	assert_refused(member("scroll", "{'target':{'type':'coordinate','x':1,'y':1}}"), -EINVAL,
		       "browser.input.scroll_direction: required for scroll");
}

Test(refuse, wrong_types)
{
	assert_refused(member("navigate", "[]"), -EINVAL,
		       "browser.input: an array is not a JSON object");
	assert_refused(member("navigate", "'a.b'"), -EINVAL,
		       "browser.input: \"a.b\" is not a JSON object");
	assert_refused(member("navigate", "{'url':5}"), -EINVAL, "browser.input.url: 5 is not a string");
	assert_refused(member("get_page_text", "{'tab_id':5}"), -EINVAL,
		       "browser.input.tab_id: 5 is not a string");
	assert_refused(member("find", "{'query':['a']}"), -EINVAL,
		       "browser.input.query: an array is not a string");
	assert_refused(member("type", "{'text':1}"), -EINVAL, "browser.input.text: 1 is not a string");
	assert_refused(member("javascript_exec", "{'text':true}"), -EINVAL,
		       "browser.input.text: true is not a string");
	assert_refused(member("key", "{'text':{}}"), -EINVAL,
		       "browser.input.text: an object is not a string");
	assert_refused(member("wait", "{'duration':'1'}"), -EINVAL,
		       "browser.input.duration: \"1\" is not a number of seconds");
	assert_refused(member("read_page", "{'depth':'5'}"), -EINVAL,
		       "browser.input.depth: \"5\" is not a number");
	assert_refused(member("read_page", "{'ref':5}"), -EINVAL, "browser.input.ref: 5 is not a string");
	assert_refused(member("read_page", "{'filter':1}"), -EINVAL,
		       "browser.input.filter: 1 is not \"all\" or \"interactive\" (omit it: every "
		       "visible element)");
	assert_refused(member("left_click", "{'target':5}"), -EINVAL,
		       "browser.input.target: 5 is not a target object");
	assert_refused(member("left_click", "{'target':{'x':1,'y':2}}"), -EINVAL,
		       "browser.input.target.type: missing is not \"coordinate\" or \"ref\"");
	assert_refused(member("left_click", "{'target':{'type':'point','x':1,'y':2}}"), -EINVAL,
		       "browser.input.target.type: \"point\" is not \"coordinate\" or \"ref\"");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':'1','y':2}}"), -EINVAL,
		       "browser.input.target.x: \"1\" is not a number");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1}}"), -EINVAL,
		       "browser.input.target.y: required for a coordinate target");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1,'y':2,'z':3}}"),
		       -EINVAL,
		       "browser.input.target: unknown field \"z\" for a coordinate target (allowed: x, "
		       "y)");
	assert_refused(member("left_click", "{'target':{'type':'ref','ref':'ref_1','x':1}}"), -EINVAL,
		       "browser.input.target: unknown field \"x\" for a ref target (allowed: ref)");
	assert_refused(member("left_click", "{'target':{'type':'ref'}}"), -EINVAL,
		       "browser.input.target.ref: required for a ref target");
	assert_refused(member("left_click", "{'target':{'type':'ref','ref':7}}"), -EINVAL,
		       "browser.input.target.ref: 7 is not a string");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':"
					    "['shift']}"),
		       -EINVAL, "browser.input.modifiers: an array is not a string");
	assert_refused(member("scroll", "{'scroll_direction':1,'target':{'type':'coordinate','x':1,"
					"'y':1}}"),
		       -EINVAL, "browser.input.scroll_direction: 1 is not a string");
	assert_refused(member("scroll", "{'scroll_direction':'diagonal','target':{'type':"
					"'coordinate','x':1,'y':1}}"),
		       -EINVAL,
		       "browser.input.scroll_direction: unknown direction \"diagonal\" (allowed: up, "
		       "down, left, right)");
	assert_refused(member("scroll", "{'scroll_direction':'up','scroll_amount':'3','target':{'type':"
					"'coordinate','x':1,'y':1}}"),
		       -EINVAL, "browser.input.scroll_amount: \"3\" is not a number");
	assert_refused(member("zoom", "{'region':'0,0,1,1'}"), -EINVAL,
		       "browser.input.region: \"0,0,1,1\" is not [x0, y0, x1, y1]");
	assert_refused(member("zoom", "{'region':[0,0,5]}"), -EINVAL,
		       "browser.input.region: an array is not [x0, y0, x1, y1]");
	assert_refused(member("zoom", "{'region':[0,0,5,'5']}"), -EINVAL,
		       "browser.input.region[3]: \"5\" is not a number");
	assert_refused(member("key", "{'text':'a','repeat':'2'}"), -EINVAL,
		       "browser.input.repeat: \"2\" is not a number");
}

Test(refuse, pending_members_are_checked_before_the_browser_is_asked)
{
	/* A member refused by the schema is refused at parse, whether it is
	 * complete or pending: asking the browser first would bring a tab to
	 * the front or scroll an element into view for a call that cannot
	 * run. */
	assert_refused(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':{'a':1}}"),
		       -EINVAL, "browser.input.value: an object is not a string, a number or a boolean");
	assert_refused(member("form_input", "{'target':{'type':'ref','ref':'ref_3'},'value':[]}"),
		       -EINVAL, "browser.input.value: an array is not a string, a number or a boolean");
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_3'},'paths':"
					     "['rel/x']}"),
		       -EINVAL, "browser.input.paths[0]: not an absolute path");
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_3'},'paths':[]}"),
		       -EINVAL, "browser.input.paths: 0 paths; file_upload takes 1 to 16");
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_3'},'paths':"
					     "'/tmp/a'}"),
		       -EINVAL, "browser.input.paths: \"/tmp/a\" is not an array of paths");
	assert_refused(member("key", "{'text':'Retrun','tab_id':'T1'}"), -EINVAL,
		       "browser.input.text: unknown key \"Retrun\" in \"Retrun\"");
	assert_refused(member("type", "{'text':'','tab_id':'T1'}"), -EINVAL,
		       "browser.input.text: empty (type needs at least one character)");
	assert_refused(member("javascript_exec", "{'text':'','tab_id':'T1'}"), -EINVAL,
		       "browser.input.text: empty");
	assert_refused(member("find", "{'query':'','tab_id':'T1'}"), -EINVAL,
		       "browser.input.query: empty");
	assert_refused(member("read_page", "{'depth':0,'tab_id':'T1'}"), -EINVAL,
		       "browser.input.depth: 0 is out of range [1, 100]");
	assert_refused(member("navigate", "{'url':'a\\u0001b','tab_id':'T1'}"), -EINVAL,
		       "browser.input.url: control character U+0001 at byte 9");
	assert_refused(member("hold_key", "{'text':'a b','duration':1,'tab_id':'T1'}"), -EINVAL,
		       "browser.input.text: hold_key holds one chord, got 2");
	/* The same members complete (no tab) are refused the same. */
	assert_refused(member("key", "{'text':'Retrun'}"), -EINVAL,
		       "browser.input.text: unknown key \"Retrun\" in \"Retrun\"");
	assert_refused(member("hold_key", "{'text':'a b','duration':1}"), -EINVAL,
		       "browser.input.text: hold_key holds one chord, got 2");
}

Test(refuse, target_kinds_each_member_takes)
{
	/* Viewport points only (BetaBrowserCoordinateTarget). */
	static const char *const coord_only[] = {"mouse_move", "left_mouse_down", "left_mouse_up"};
	for (size_t k = 0; k < 3; k++)
		assert_refused(member(coord_only[k], "{'target':{'type':'ref','ref':'ref_1'}}"), -EINVAL,
			       "browser.input.target.type: \"ref\" is not \"coordinate\" (this member acts "
			       "at a viewport point)");
	assert_refused(member("scroll", "{'scroll_direction':'up','target':{'type':'ref','ref':"
					"'ref_1'}}"),
		       -EINVAL,
		       "browser.input.target.type: \"ref\" is not \"coordinate\" (this member acts at a "
		       "viewport point)");
	assert_refused(member("left_click_drag", "{'from':{'type':'ref','ref':'ref_1'},'target':{"
						 "'type':'coordinate','x':1,'y':1}}"),
		       -EINVAL,
		       "browser.input.from.type: \"ref\" is not \"coordinate\" (this member acts at a "
		       "viewport point)");
	assert_refused(member("left_click_drag", "{'from':{'type':'coordinate','x':1,'y':1},'target':"
						 "{'type':'ref','ref':'ref_1'}}"),
		       -EINVAL,
		       "browser.input.target.type: \"ref\" is not \"coordinate\" (this member acts at a "
		       "viewport point)");
	/* Element references only (BetaBrowserRefTarget). */
	assert_refused(member("form_input", "{'target':{'type':'coordinate','x':1,'y':1},'value':1}"),
		       -EINVAL,
		       "browser.input.target.type: \"coordinate\" is not \"ref\" (this member acts on an "
		       "element reference)");
	assert_refused(member("file_upload", "{'target':{'type':'coordinate','x':1,'y':1},'paths':"
					     "['/tmp/a']}"),
		       -EINVAL,
		       "browser.input.target.type: \"coordinate\" is not \"ref\" (this member acts on an "
		       "element reference)");
	assert_refused(member("scroll_to", "{'target':{'type':'coordinate','x':1,'y':1}}"), -EINVAL,
		       "browser.input.target.type: \"coordinate\" is not \"ref\" (this member acts on an "
		       "element reference)");
	/* Either (BetaBrowserClickTarget): clicks and hover, as the tables show. */
}

Test(refuse, document_ids_and_paths)
{
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'document_ids':"
					     "['doc_1']}"),
		       -EINVAL,
		       "browser.input.document_ids: deskgate stages no documents: write the file into "
		       "the session's scratch space (an exec action, into /tmp or /home/user) and give "
		       "its path in paths");
	/* Even beside paths. */
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':['/tmp/a'],"
					     "'document_ids':[]}"),
		       -EINVAL,
		       "browser.input.document_ids: deskgate stages no documents: write the file into "
		       "the session's scratch space (an exec action, into /tmp or /home/user) and give "
		       "its path in paths");
	assert_refused(member("file_upload", "{'target':{'type':'ref','ref':'ref_1'}}"), -EINVAL,
		       "browser.input.paths: required (files in the session's scratch space: /tmp, "
		       "/home/user)");
	assert_refused(member("file_upload", "{'paths':['/tmp/a']}"), -EINVAL,
		       "browser.input.target: required for file_upload");
}

Test(refuse, read_page_filter)
{
	/* BetaBrowserReadPageFilter is 'all' | 'interactive'; the canonical
	 * default "visible" is what omitting it means, not a wire value. */
	assert_refused(member("read_page", "{'filter':'visible'}"), -EINVAL,
		       "browser.input.filter: \"visible\" is not \"all\" or \"interactive\" (omit it: "
		       "every visible element)");
	assert_refused(member("read_page", "{'filter':'ALL'}"), -EINVAL,
		       "browser.input.filter: \"ALL\" is not \"all\" or \"interactive\" (omit it: every "
		       "visible element)");
}

/* ---- limits at their boundaries ------------------------------------------------------ */

Test(bounds, element_references)
{
	assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1'}}"));
	assert_pending("", 1, false, "ref_1");
	assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_999999999'}}"));
	assert_pending("", 999999999, false, "ref_999999999");
	assert_refused(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1000000000'}}"), -EINVAL,
		       "browser.input.target.ref: \"ref_1000000000\" is past the last reference "
		       "(ref_999999999)");
	static const char *const bad[] = {"ref_0", "7", "ref_", "ref_01", "ref_-1", "REF_1", "ref_1 ",
					  "ref_1x", ""};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char want[160];
		snprintf(want, sizeof(want), "browser.input.target.ref: \"%s\" is not an element "
			 "reference (ref_N, from read_page or find)", bad[k]);
		assert_refused(memberf("left_click", "{'target':{'type':'ref','ref':'%s'}}", bad[k]),
			       -EINVAL, want);
	}
	/* read_page's ref, checked by the canonical schema. */
	assert_ok(member("read_page", "{'ref':'ref_999999999'}"));
	assert_refused(member("read_page", "{'ref':'ref_1000000000'}"), -EINVAL,
		       "browser.input.ref: \"ref_1000000000\" is past the last reference (ref_999999999)");
	assert_refused(member("read_page", "{'ref':'ref_0'}"), -EINVAL,
		       "browser.input.ref: \"ref_0\" is not an element reference (ref_N)");
}

Test(bounds, coordinates_at_parse)
{
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':0,'y':0}}"));
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':-1,'y':0}}"), -EINVAL,
		       "browser.input.target.x: -1 is outside the viewport");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':0,'y':-1}}"), -EINVAL,
		       "browser.input.target.y: -1 is outside the viewport");
	/* -0.4 rounds to 0; -0.5 to -1. */
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':-0.4,'y':0}}"));
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':-0.5,'y':0}}"), -EINVAL,
		       "browser.input.target.x: -0.5 is outside the viewport");
	/* No viewport is larger than the largest screen. */
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':16383,'y':16383}}"));
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':16384,'y':0}}"),
		       -EINVAL, "browser.input.target.x: 16384 is outside the viewport");
	assert_refused(member("left_click_drag", "{'from':{'type':'coordinate','x':0,'y':16384},"
						 "'target':{'type':'coordinate','x':0,'y':0}}"),
		       -EINVAL, "browser.input.from.y: 16384 is outside the viewport");
	assert_refused(member("mouse_move", "{'target':{'type':'coordinate','x':1e300,'y':0}}"),
		       -EINVAL, "browser.input.target.x: 1e+300 is out of range (at most 1e+09 in "
				"magnitude)");
	assert_refused(member("mouse_move", "{'target':{'type':'coordinate','x':9223372036854775807,"
					    "'y':0}}"),
		       -EINVAL, "browser.input.target.x: 9223372036854775807 is outside the viewport");
}

Test(bounds, points_at_resolve)
{
	/* The viewport is 1280x713: x 1279 is its last column, 1280 off it. */
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':1279,'y':712}}"));
	assert_resolved(&VP, "{'button':'left','count':1,'modifiers':[],'type':'click','x':1279,"
			     "'y':799}", "last pixel");
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':1280,'y':0}}"));
	assert_resolve_refused(&VP, "browser.input.target.x: 1280 is outside the viewport (width "
				    "1280)");
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':0,'y':713}}"));
	assert_resolve_refused(&VP, "browser.input.target.y: 713 is outside the viewport (height "
				    "713)");
	/* In a narrower viewport the same point is off it: the check is the
	 * viewport's, not the screen's. */
	assert_ok(member("mouse_move", "{'target':{'type':'coordinate','x':1000,'y':0}}"));
	assert_resolve_refused(&VX, "browser.input.target.x: 1000 is outside the viewport (width "
				    "1000)");
	assert_ok(member("mouse_move", "{'target':{'type':'coordinate','x':999,'y':0}}"));
	assert_resolved(&VX, "{'modifiers':[],'type':'move','x':1199,'y':87}", "999");
	/* Each end of a drag. */
	assert_ok(member("left_click_drag", "{'from':{'type':'coordinate','x':1280,'y':0},'target':{"
					    "'type':'coordinate','x':0,'y':0}}"));
	assert_resolve_refused(&VP, "browser.input.from.x: 1280 is outside the viewport (width 1280)");
	assert_ok(member("left_click_drag", "{'from':{'type':'coordinate','x':0,'y':0},'target':{"
					    "'type':'coordinate','x':5,'y':713}}"));
	assert_resolve_refused(&VP, "browser.input.target.y: 713 is outside the viewport (height "
				    "713)");
	assert_ok(member("left_click_drag", "{'from':{'type':'coordinate','x':1279,'y':712},'target':{"
					    "'type':'coordinate','x':0,'y':0}}"));
	assert_resolved(&VP, "{'button':'left','modifiers':[],'path':[[1279,799],[0,87]],'type':"
			     "'drag'}", "drag edges");
	/* Scroll and the mouse buttons. */
	assert_ok(member("scroll", "{'scroll_direction':'up','target':{'type':'coordinate','x':1280,"
				   "'y':0}}"));
	assert_resolve_refused(&VP, "browser.input.target.x: 1280 is outside the viewport (width "
				    "1280)");
	assert_ok(member("left_mouse_up", "{'target':{'type':'coordinate','x':0,'y':713}}"));
	assert_resolve_refused(&VP, "browser.input.target.y: 713 is outside the viewport (height "
				    "713)");
	/* A refused resolve can be retried with another answer. */
	assert_resolved(&(struct dg_browser_view){0, 0, 1280, 800, false, 0, 0},
			"{'button':'left','type':'mouse_up','x':0,'y':713}", "retried");
}

Test(bounds, zoom_region)
{
	/* x1, y1 may equal the viewport's size (the region's exclusive end). */
	assert_ok(member("zoom", "{'region':[0,0,1280,713]}"));
	assert_resolved(&VP, "{'region':[0,87,1280,800],'type':'zoom'}", "whole viewport");
	assert_ok(member("zoom", "{'region':[0,0,1281,713]}"));
	assert_resolve_refused(&VP, "browser.input.region: [0, 0, 1281, 713] is outside the viewport "
				    "(1280x713)");
	assert_ok(member("zoom", "{'region':[0,0,1280,714]}"));
	assert_resolve_refused(&VP, "browser.input.region: [0, 0, 1280, 714] is outside the viewport "
				    "(1280x713)");
	assert_ok(member("zoom", "{'region':[999,712,1000,713]}"));
	assert_resolved(&VX, "{'region':[1199,799,1200,800],'type':'zoom'}", "last pixel");
	/* At parse: each value 0..16384, and x1 > x0, y1 > y0. */
	assert_ok(member("zoom", "{'region':[0,0,16384,16384]}"));
	assert_refused(member("zoom", "{'region':[0,0,16385,1]}"), -EINVAL,
		       "browser.input.region[2]: 16385 is outside the viewport");
	assert_refused(member("zoom", "{'region':[0,-1,5,5]}"), -EINVAL,
		       "browser.input.region[1]: -1 is outside the viewport");
	assert_refused(member("zoom", "{'region':[5,0,5,5]}"), -EINVAL,
		       "browser.input.region: x1, y1 (5, 5) must be greater than x0, y0 (5, 0)");
	assert_refused(member("zoom", "{'region':[0,5,5,5]}"), -EINVAL,
		       "browser.input.region: x1, y1 (5, 5) must be greater than x0, y0 (0, 5)");
	assert_refused(member("zoom", "{'region':[0,0,5,5,5]}"), -EINVAL,
		       "browser.input.region: an array is not [x0, y0, x1, y1]");
	assert_refused(member("zoom", "{'region':[]}"), -EINVAL,
		       "browser.input.region: an array is not [x0, y0, x1, y1]");
}

Test(bounds, scroll_amount)
{
	static const struct {
		const char *amount;
		int dy;
	} ok[] = {{"1", 1}, {"10", 10}, {"3", 3}, {"null", 3}, {"9.5", 10}, {"1.4", 1}};
	for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
		assert_ok(memberf("scroll", "{'scroll_direction':'down','scroll_amount':%s,'target':{"
				  "'type':'coordinate','x':1,'y':1}}", ok[k].amount));
		char want[128];
		snprintf(want, sizeof(want), "{'dx':0,'dy':%d,'modifiers':[],'type':'scroll','x':1,"
			 "'y':88}", ok[k].dy);
		assert_resolved(&VP, want, ok[k].amount);
	}
	/* Default 3 when absent. */
	assert_ok(member("scroll", "{'scroll_direction':'right','target':{'type':'coordinate','x':1,"
				   "'y':1}}"));
	assert_resolved(&VP, "{'dx':3,'dy':0,'modifiers':[],'type':'scroll','x':1,'y':88}", "default");
	static const char *const bad[][2] = {{"0", "0"}, {"11", "11"}, {"-1", "-1"}, {"10.5", "11"},
					     {"0.4", "0"}};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char want[128];
		snprintf(want, sizeof(want), "browser.input.scroll_amount: %s is out of range [1, 10] "
			 "(wheel notches)", bad[k][1]);
		assert_refused(memberf("scroll", "{'scroll_direction':'down','scroll_amount':%s,"
				       "'target':{'type':'coordinate','x':1,'y':1}}", bad[k][0]),
			       -EINVAL, want);
	}
}

Test(bounds, durations)
{
	/* wait and hold_key: 0 to 30 seconds (the SDK's "maximum 30"). */
	static const char *const members_[] = {"wait", "hold_key"};
	for (size_t m = 0; m < 2; m++) {
		const char *extra = m ? ",'text':'shift'" : "";
		const char *keys = m ? "'keys':'Shift_L'," : "";
		static const struct {
			const char *d;
			int ms;
		} ok[] = {{"30", 30000}, {"30.0", 30000}, {"30.0004", 30000}, {"0", 0},
			  {"0.0004", 0}, {"29.999", 29999}};
		for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
			assert_ok(memberf(members_[m], "{'duration':%s%s}", ok[k].d, extra));
			char want[128];
			snprintf(want, sizeof(want), "{%s'ms':%d,'type':'%s'}", keys, ok[k].ms,
				 members_[m]);
			assert_complete(want, ok[k].d);
		}
		assert_refused(memberf(members_[m], "{'duration':30.001%s}", extra), -EINVAL,
			       "browser.input.duration: 30.001 seconds is over the limit of 30 seconds");
		assert_refused(memberf(members_[m], "{'duration':31%s}", extra), -EINVAL,
			       "browser.input.duration: 31 seconds is over the limit of 30 seconds");
		assert_refused(memberf(members_[m], "{'duration':-0.001%s}", extra), -EINVAL,
			       "browser.input.duration: -0.001 seconds is negative");
		assert_refused(memberf(members_[m], "{'duration':1e300%s}", extra), -EINVAL,
			       "browser.input.duration: 1e+300 seconds is over the limit of 30 seconds");
	}
}

Test(bounds, modifiers)
{
	static const char *const ok[][2] = {{"shift", "'shift'"},
					    {"ctrl+shift", "'ctrl','shift'"},
					    {"cmd+alt", "'alt','super'"},
					    {"shift+ctrl", "'ctrl','shift'"},
					    {"Control_R", "'ctrl'"},
					    {"ctrl+shift+alt+super+meta", "'ctrl','shift','alt','super','meta'"}};
	for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
		assert_ok(memberf("left_click", "{'target':{'type':'coordinate','x':1,'y':1},"
				  "'modifiers':'%s'}", ok[k][0]));
		char want[192];
		snprintf(want, sizeof(want), "{'button':'left','count':1,'modifiers':[%s],'type':'click',"
			 "'x':1,'y':88}", ok[k][1]);
		assert_resolved(&VP, want, ok[k][0]);
	}
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':"
					    "'a'}"),
		       -EINVAL,
		       "browser.input.modifiers: a is not a modifier key (held during the action: ctrl, "
		       "shift, alt, super, meta)");
	assert_refused(member("double_click", "{'target':{'type':'coordinate','x':1,'y':1},"
					      "'modifiers':'ctrl+a'}"),
		       -EINVAL,
		       "browser.input.modifiers: a is not a modifier key (held during the action: ctrl, "
		       "shift, alt, super, meta)");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':"
					    "'shift ctrl'}"),
		       -EINVAL,
		       "browser.input.modifiers: modifiers held during the action are one chord "
		       "(\"shift\", \"ctrl+shift\"), got 2 chords");
	assert_refused_prefix(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},"
						   "'modifiers':''}"),
			      -EINVAL, "browser.input.modifiers: ");
	assert_refused_prefix(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},"
						   "'modifiers':'shift+shift'}"),
			      -EINVAL, "browser.input.modifiers: ");
	assert_refused(member("left_click", "{'target':{'type':'coordinate','x':1,'y':1},'modifiers':"
					    "'shift\\u0000'}"),
		       -EINVAL, "browser.input.modifiers: contains NUL");
}

Test(bounds, key_repeat)
{
	assert_ok(member("key", "{'text':'a','repeat':32}"));
	cr_assert_eq(ad.act[0].n_chords, 32);
	assert_refused(member("key", "{'text':'a','repeat':33}"), -EINVAL,
		       "browser.input.repeat: 33 is out of range [1, 32]");
	assert_ok(member("key", "{'text':'a','repeat':1}"));
	assert_complete("{'keys':'a','type':'key'}", "repeat 1");
	assert_refused(member("key", "{'text':'a','repeat':0}"), -EINVAL,
		       "browser.input.repeat: 0 is out of range [1, 32]");
	assert_ok(member("key", "{'text':'a b','repeat':16}"));
	cr_assert_eq(ad.act[0].n_chords, 32);
	assert_refused(member("key", "{'text':'a b','repeat':17}"), -EINVAL,
		       "browser.input.repeat: 17 times 2 chords is over the limit of 32 chords");
	assert_ok(member("key", "{'text':'ctrl+a','repeat':2.5,'tab_id':'T1'}"));
	assert_pending("T1", 0, false, "repeat 2.5");
	assert_resolved(&VP, "{'keys':'Control_L+a Control_L+a Control_L+a','type':'key'}", "2.5");
	assert_refused_prefix(member("key", "{'text':'Retrun','repeat':2}"), -EINVAL,
			      "browser.input.text: ");
}

Test(bounds, tab_ids)
{
	char *t64 = repeat('a', DG_ACTION_TAB_MAX), *t65 = repeat('a', DG_ACTION_TAB_MAX + 1);
	assert_ok(memberf("screenshot", "{'tab_id':'%s'}", t64));
	assert_pending(t64, 0, false, "64");
	assert_ok(memberf("switch_tab", "{'tab_id':'%s'}", t64));
	assert_ok(memberf("close_tab", "{'tab_id':'%s'}", t64));
	/* Quoted in the message cut after 64 bytes. */
	char want[160];
	snprintf(want, sizeof(want), "browser.input.tab_id: \"%s...\" is not a tab id (list_tabs "
		 "gives them)", t64);
	assert_refused(memberf("screenshot", "{'tab_id':'%s'}", t65), -EINVAL, want);
	assert_refused(memberf("switch_tab", "{'tab_id':'%s'}", t65), -EINVAL, want);
	free(t64);
	free(t65);
	/* The charset: [0-9A-Za-z._-]. */
	assert_ok(member("read_console", "{'tab_id':'0aZ._-9'}"));
	assert_pending("0aZ._-9", 0, false, "charset");
	static const char *const bad[][2] = {{"", ""},
					     {"a b", "a b"},
					     {"a/b", "a/b"},
					     {"a\\u00e4", "a\\xc3\\xa4"},
					     {"a\\u0000", "a\\x00"},
					     {"a\\nb", "a\\x0ab"},
					     {"a:b", "a:b"}};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		snprintf(want, sizeof(want), "browser.input.tab_id: \"%s\" is not a tab id (list_tabs "
			 "gives them)", bad[k][1]);
		assert_refused(memberf("get_page_text", "{'tab_id':'%s'}", bad[k][0]), -EINVAL, want);
		assert_refused(memberf("close_tab", "{'tab_id':'%s'}", bad[k][0]), -EINVAL, want);
	}
}

Test(bounds, text_sizes)
{
	/* The canonical limits, named by the member's fields. */
	char *t = repeat('a', DG_ACTION_TEXT_MAX);
	assert_ok(memberf("type", "{'text':'%s'}", t));
	free(t);
	t = repeat('a', DG_ACTION_TEXT_MAX + 1);
	assert_refused(memberf("type", "{'text':'%s','tab_id':'T1'}", t), -EINVAL,
		       "browser.input.text: 16385 bytes is over the limit of 16384 bytes");
	free(t);
	t = repeat('a', DG_ACTION_QUERY_MAX);
	assert_ok(memberf("find", "{'query':'%s'}", t));
	free(t);
	t = repeat('a', DG_ACTION_QUERY_MAX + 1);
	assert_refused_prefix(memberf("find", "{'query':'%s'}", t), -EINVAL, "browser.input.query: ");
	free(t);
	t = repeat('a', DG_ACTION_CODE_MAX);
	assert_ok(memberf("javascript_exec", "{'text':'%s','tab_id':'T1'}", t));
	free(t);
	t = repeat('a', DG_ACTION_CODE_MAX + 1);
	assert_refused_prefix(memberf("javascript_exec", "{'text':'%s','tab_id':'T1'}", t), -EINVAL,
			      "browser.input.text: ");
	free(t);
	t = repeat('a', DG_ACTION_VALUE_MAX);
	assert_ok(memberf("form_input", "{'target':{'type':'ref','ref':'ref_1'},'value':'%s'}", t));
	free(t);
	t = repeat('a', DG_ACTION_VALUE_MAX + 1);
	assert_refused_prefix(memberf("form_input", "{'target':{'type':'ref','ref':'ref_1'},"
				      "'value':'%s'}", t),
			      -EINVAL, "browser.input.value: ");
	free(t);
	/* read_page depth 1..100. */
	assert_ok(member("read_page", "{'depth':1}"));
	assert_ok(member("read_page", "{'depth':100}"));
	assert_refused(member("read_page", "{'depth':101}"), -EINVAL,
		       "browser.input.depth: 101 is out of range [1, 100]");
	assert_refused(member("read_page", "{'depth':0}"), -EINVAL,
		       "browser.input.depth: 0 is out of range [1, 100]");
	/* 16 paths of at most 1024 bytes. */
	char paths[16 * 12 + 8] = "";
	for (int i = 0; i < 16; i++)
		snprintf(paths + strlen(paths), sizeof(paths) - strlen(paths), "%s'/tmp/f%02d'",
			 i ? "," : "", i);
	assert_ok(memberf("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':[%s]}", paths));
	assert_refused(memberf("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':[%s,"
			       "'/tmp/x']}", paths),
		       -EINVAL, "browser.input.paths: 17 paths; file_upload takes 1 to 16");
}

/* ---- navigate's URL ---------------------------------------------------------------------- */

Test(url, normalized_as_an_address_bar)
{
	static const char *const cases[][2] = {
		{"Example.COM", "https://example.com/"},
		{"shop.test:8080/x", "https://shop.test:8080/x"},
		{"http://a.b", "http://a.b/"},
		{"HTTPS://Ex.COM/Path?Q#F", "https://ex.com/Path?Q#F"},
		{"example.com?q=1", "https://example.com/?q=1"},
		{"example.com#top", "https://example.com/#top"},
		{"localhost:3000", "https://localhost:3000/"},
		{"https://example.com/", "https://example.com/"},
		{"https://example.com/A/B", "https://example.com/A/B"},
		/* Opaque schemes are kept as given, for the policy's checker. */
		{"about:blank", "about:blank"},
		{"data:text/html,hi", "data:text/html,hi"},
		/* A host with user info is left alone (only the scheme lowercased). */
		{"HTTP://User@Host.COM/x", "http://User@Host.COM/x"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		assert_ok(memberf("navigate", "{'url':'%s'}", cases[k][0]));
		char want[256];
		snprintf(want, sizeof(want), "{'type':'navigate','url':'%s'}", cases[k][1]);
		assert_complete(want, cases[k][0]);
	}
}

Test(url, history_steps)
{
	static const char *const steps[] = {"back", "forward", "reload"};
	for (size_t k = 0; k < 3; k++) {
		assert_ok(memberf("navigate", "{'url':'%s'}", steps[k]));
		char want[64];
		snprintf(want, sizeof(want), "{'type':'%s'}", steps[k]);
		assert_complete(want, steps[k]);
		cr_assert_str_eq(ad.name[0], "navigate");
		assert_ok(memberf("navigate", "{'url':'%s','tab_id':'T9'}", steps[k]));
		assert_pending("T9", 0, false, steps[k]);
		assert_resolved(&VP, want, steps[k]);
	}
	/* Only exactly those words. */
	assert_ok(member("navigate", "{'url':'Back'}"));
	assert_complete("{'type':'navigate','url':'https://back/'}", "Back");
}

Test(url, lengths)
{
	/* 8192 bytes with the scheme, accepted; one more, refused. */
	char *host = repeat('a', DG_ACTION_URL_MAX - strlen("https://") - 1);
	assert_ok(memberf("navigate", "{'url':'https://%s/'}", host));
	cr_assert_eq(strlen(ad.act[0].url), DG_ACTION_URL_MAX);
	assert_refused(memberf("navigate", "{'url':'https://%sa/'}", host), -EINVAL,
		       "browser.input.url: 8193 bytes: a URL is 1 to 8192 bytes without NUL");
	/* Without the scheme: 8192 bytes once https:// and / are added. */
	assert_ok(memberf("navigate", "{'url':'%s'}", host));
	cr_assert_eq(strlen(ad.act[0].url), DG_ACTION_URL_MAX);
	free(host);
	host = repeat('a', DG_ACTION_URL_MAX - strlen("https://") + 1);
	assert_refused(memberf("navigate", "{'url':'%s'}", host), -EINVAL,
		       "browser.input.url: 8193 bytes is over the limit of 8192 bytes");
	free(host);
	assert_refused(member("navigate", "{'url':''}"), -EINVAL,
		       "browser.input.url: 0 bytes: a URL is 1 to 8192 bytes without NUL");
	assert_refused(member("navigate", "{'url':'a\\u0000b'}"), -EINVAL,
		       "browser.input.url: 3 bytes: a URL is 1 to 8192 bytes without NUL");
	assert_refused_prefix(member("navigate", "{'url':'https://a.b/\\u007f'}"), -EINVAL,
			      "browser.input.url: control character U+007F");
}

/* ---- resolving ------------------------------------------------------------------------ */

Test(resolve, the_view_must_be_on_the_screen)
{
	assert_ok(member("screenshot", "{}"));
	/* Exactly the screen: accepted. */
	assert_resolved(&(struct dg_browser_view){0, 0, DW, DH, false, 0, 0},
			"{'region':[0,0,1280,800],'type':'screenshot'}", "the whole screen");
	static const struct {
		struct dg_browser_view v;
		const char *msg;
	} bad[] = {
		{{0, 88, 1280, 713, false, 0, 0},
		 "the browser's viewport [0, 88, 1280, 713] is not on the screen (1280x800)"},
		{{1, 87, 1280, 713, false, 0, 0},
		 "the browser's viewport [1, 87, 1280, 713] is not on the screen (1280x800)"},
		{{-1, 87, 100, 100, false, 0, 0},
		 "the browser's viewport [-1, 87, 100, 100] is not on the screen (1280x800)"},
		{{0, -1, 100, 100, false, 0, 0},
		 "the browser's viewport [0, -1, 100, 100] is not on the screen (1280x800)"},
		{{0, 0, 0, 100, false, 0, 0},
		 "the browser's viewport [0, 0, 0, 100] is not on the screen (1280x800)"},
		{{0, 0, 100, 0, false, 0, 0},
		 "the browser's viewport [0, 0, 100, 0] is not on the screen (1280x800)"},
		{{2147483647, 0, 2147483647, 1, false, 0, 0},
		 "the browser's viewport [2147483647, 0, 2147483647, 1] is not on the screen "
		 "(1280x800)"},
		{{0, 87, 1280, 713, true, 1280, 0}, "the element's point (1280, 0) is off the screen"},
		{{0, 87, 1280, 713, true, 0, 800}, "the element's point (0, 800) is off the screen"},
		{{0, 87, 1280, 713, true, -1, 5}, "the element's point (-1, 5) is off the screen"},
		/* On the screen but on the browser's own bars, or beside the page. */
		{{0, 87, 1280, 713, true, 5, 86},
		 "the element's point (5, 86) is outside the viewport [0, 87, 1280, 713]"},
		{{200, 87, 1000, 713, true, 199, 100},
		 "the element's point (199, 100) is outside the viewport [200, 87, 1000, 713]"},
		{{200, 87, 1000, 600, true, 1200, 100},
		 "the element's point (1200, 100) is outside the viewport [200, 87, 1000, 600]"},
		{{200, 87, 1000, 600, true, 300, 687},
		 "the element's point (300, 687) is outside the viewport [200, 87, 1000, 600]"},
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		assert_ok(member("screenshot", "{}"));
		assert_resolve_refused(&bad[k].v, bad[k].msg);
		assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1'}}"));
		assert_resolve_refused(&bad[k].v, bad[k].msg);
	}
	/* The element's point on the screen's last pixel: accepted. */
	assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1'}}"));
	assert_resolved(&(struct dg_browser_view){0, 87, 1280, 713, true, DW - 1, DH - 1},
			"{'ref':'ref_1','type':'scroll_to','x':1279,'y':799}", "last pixel");
	/* The viewport's first and last pixels: accepted. */
	assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1'}}"));
	assert_resolved(&(struct dg_browser_view){200, 87, 1000, 600, true, 200, 87},
			"{'ref':'ref_1','type':'scroll_to','x':200,'y':87}", "viewport's first pixel");
	assert_ok(member("scroll_to", "{'target':{'type':'ref','ref':'ref_1'}}"));
	assert_resolved(&(struct dg_browser_view){200, 87, 1000, 600, true, 1199, 686},
			"{'ref':'ref_1','type':'scroll_to','x':1199,'y':686}", "viewport's last pixel");
	/* No such action, no view. */
	assert_ok(member("screenshot", "{}"));
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_adapt_resolve(&ad, 1, &VP, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "resolve: no such action");
	cr_assert_eq(dg_adapt_resolve(&ad, -1, &VP, &err), -EINVAL);
	cr_assert_eq(dg_adapt_resolve(&ad, 0, NULL, &err), -EINVAL);
	cr_assert(ad.pending);
}

Test(resolve, twice)
{
	/* Resolving a resolved action changes nothing, whatever the view. */
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':10,'y':10}}"));
	assert_resolved(&VP, "{'button':'left','count':1,'modifiers':[],'type':'click','x':10,'y':97}",
			"first");
	assert_ok(resolve(&VX));
	assert_action("{'button':'left','count':1,'modifiers':[],'type':'click','x':10,'y':97}",
		      "second");
	assert_ok(member("hover", "{'target':{'type':'ref','ref':'ref_3'}}"));
	assert_resolved(&EL, "{'modifiers':[],'ref':'ref_3','type':'move','x':640,'y':400}", "first");
	assert_ok(resolve(&VX));
	assert_action("{'modifiers':[],'ref':'ref_3','type':'move','x':640,'y':400}", "second");
}

Test(resolve, canonical_actions_on_elements)
{
	/* A canonical click on an element: its point filled in, the ref kept. */
	assert_ok(parse("{'type':'click','ref':'ref_3','button':'right'}"));
	cr_assert_eq(ad.wire, DG_WIRE_CANONICAL);
	cr_assert_not(ad.pending);
	cr_assert_not(ad.browser);
	struct dg_resolve_req q;
	memset(&q, 0x5a, sizeof(q));
	cr_assert(dg_adapt_resolve_wants(&ad, 0, &q));
	cr_assert_str_eq(q.tab, "");
	cr_assert_eq(q.ref, 3);
	cr_assert(q.scroll);
	cr_assert(q.hit);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_adapt_resolve(&ad, 0, &VP, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "the browser did not say where ref_3 is");
	assert_ok(resolve(&EL));
	assert_action("{'button':'right','count':1,'modifiers':[],'ref':'ref_3','type':'click','x':640,"
		      "'y':400}", "canonical click");
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
	/* form_input: no hit test. */
	assert_ok(parse("{'type':'form_input','ref':'ref_9','value':'x'}"));
	cr_assert(dg_adapt_resolve_wants(&ad, 0, &q));
	cr_assert_eq(q.ref, 9);
	cr_assert_not(q.hit);
	assert_ok(resolve(&VX));
	assert_action("{'ref':'ref_9','type':'form_input','value':'x','x':700,'y':500}", "form_input");
	/* With x, y given it is resolved already; nothing to ask. */
	assert_ok(parse("{'type':'click','ref':'ref_3','x':1,'y':2}"));
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
	assert_ok(resolve(&EL));
	assert_action("{'button':'left','count':1,'modifiers':[],'ref':'ref_3','type':'click','x':1,"
		      "'y':2}", "given");
	/* Actions that name no element want nothing. */
	assert_ok(parse("{'type':'screenshot'}"));
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
	assert_ok(parse("{'action':'screenshot'}"));
	cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
	cr_assert_not(dg_adapt_resolve_wants(&ad, 1, &q));
	cr_assert_not(dg_adapt_resolve_wants(NULL, 0, &q));
}

/* ---- the tools list ------------------------------------------------------------------------ */

static struct dg_toolsets ts;

static int tools(const char *sq)
{
	char *t = dq(sq);
	json_error_t je;
	json_t *j = json_loads(t, JSON_REJECT_DUPLICATES, &je);
	cr_assert(j, "bad test JSON: %s: %s", je.text, t);
	free(t);
	memset(&ts, 0xa5, sizeof(ts));
	memset(&err, 0, sizeof(err));
	int rc = dg_toolsets_parse(j, &ts, &err);
	json_decref(j);
	return rc;
}

#define assert_tools_refused(rc, want)                                                     \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, -EINVAL, "rc %d, message \"%s\"", rc_, err.msg);         \
		cr_assert_str_eq(err.msg, (want));                                         \
	} while (0)

static int member_idx(const char *name)
{
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++)
		if (strcmp(dg_browser_member_name(i), name) == 0)
			return i;
	cr_assert_fail("no member %s", name);
	return -1;
}

Test(toolsets, a_valid_list_with_other_tools)
{
	assert_ok(tools("[{'type':'custom','name':'bash','input_schema':{'type':'object'}},"
			"{'type':'computer_20251124','name':'computer','display_width_px':1024,"
			"'display_height_px':640},"
			"{'type':'browser_toolset_20260801','configs':{'javascript_exec':{'enabled':"
			"false},'file_upload':{'enabled':false,'defer_loading':true},'navigate':null,"
			"'find':{},'read_page':{'enabled':true,'defer_loading':null},'zoom':{'enabled':"
			"null}},'cache_control':{'type':'ephemeral'}},"
			"{'name':'no type'},"
			"{'type':'computer_toolset_20260801','configs':{'zoom':{'enabled':false}}}]"));
	cr_assert(ts.browser);
	cr_assert(ts.computer);
	cr_assert_eq(ts.browser_off, (1u << member_idx("javascript_exec")) |
				     (1u << member_idx("file_upload")));
	cr_assert_eq(member_idx("javascript_exec"), 30);
	cr_assert_eq(member_idx("file_upload"), 11);
	cr_assert_eq(ts.computer_off, 1u << 16); /* zoom, the computer toolset's last */
	/* Nothing declared, nothing disabled. */
	assert_ok(tools("[]"));
	cr_assert_not(ts.browser);
	cr_assert_not(ts.computer);
	cr_assert_eq(ts.browser_off, 0);
	cr_assert_eq(ts.computer_off, 0);
	assert_ok(tools("[{'type':'browser_toolset_20260801'},{'type':'computer_toolset_20260801',"
			"'configs':null,'cache_control':null}]"));
	cr_assert(ts.browser);
	cr_assert(ts.computer);
	cr_assert_eq(ts.browser_off, 0);
	cr_assert_eq(ts.computer_off, 0);
	assert_ok(tools("[{'type':'browser_toolset_20260801','configs':{}}]"));
	cr_assert(ts.browser);
	cr_assert_not(ts.computer);
}

Test(toolsets, refusals)
{
	assert_tools_refused(tools("{}"), "tools: an object is not an array of tool definitions");
	assert_tools_refused(tools("[{'type':'custom','name':'a'},5]"),
			     "tools[1]: 5 is not a tool definition");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{'javascript':{"
				   "'enabled':false}}}]"),
			     "tools[0].configs: unknown member \"javascript\" (the toolset's members "
			     "are its only keys)");
	/* Members of the other toolset are unknown members. */
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{"
				   "'cursor_position':{}}}]"),
			     "tools[0].configs: unknown member \"cursor_position\" (the toolset's "
			     "members are its only keys)");
	assert_tools_refused(tools("[{'type':'computer_toolset_20260801','configs':{'navigate':{}}}]"),
			     "tools[0].configs: unknown member \"navigate\" (the toolset's members are "
			     "its only keys)");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{"
				   "'javascript_exec':{'enabled':'no'}}}]"),
			     "tools[0].configs.javascript_exec.enabled: \"no\" is not true or false");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{'navigate':{"
				   "'enabled':0}}}]"),
			     "tools[0].configs.navigate.enabled: 0 is not true or false");
	assert_tools_refused(tools("[{'type':'computer_toolset_20260801','configs':{'zoom':{"
				   "'defer_loading':'yes'}}}]"),
			     "tools[0].configs.zoom.defer_loading: \"yes\" is not true or false");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{'navigate':{"
				   "'enabled':false,'hidden':true}}}]"),
			     "tools[0].configs.navigate: unknown field \"hidden\" for a member config "
			     "(allowed: enabled, defer_loading)");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':{'navigate':true}}]"),
			     "tools[0].configs.navigate: true is not an object {enabled?, "
			     "defer_loading?}");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','configs':[]}]"),
			     "tools[0].configs: an array is not an object of member configs");
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801','name':'browser'}]"),
			     "tools[0]: unknown field \"name\" for browser_toolset_20260801 (allowed: "
			     "configs, cache_control)");
	assert_tools_refused(tools("[{'type':'computer_toolset_20260801','display_width_px':1}]"),
			     "tools[0]: unknown field \"display_width_px\" for "
			     "computer_toolset_20260801 (allowed: configs, cache_control)");
	/* The longest member names and a two-digit index fit the message. */
	assert_tools_refused(tools("[{},{},{},{},{},{},{},{},{},{},{'type':'browser_toolset_20260801',"
				   "'configs':{'left_click_drag':{'enabled':1}}}]"),
			     "tools[10].configs.left_click_drag.enabled: 1 is not true or false");
}

Test(toolsets, declared_twice)
{
	assert_tools_refused(tools("[{'type':'browser_toolset_20260801'},{'type':'custom','name':"
				   "'x'},{'type':'browser_toolset_20260801'}]"),
			     "tools[2].type: the browser toolset is declared twice");
	assert_tools_refused(tools("[{'type':'computer_toolset_20260801'},"
				   "{'type':'computer_toolset_20260801','configs':{}}]"),
			     "tools[1].type: the computer toolset is declared twice");
	/* One of each is fine, as are two computer tool versions. */
	assert_ok(tools("[{'type':'computer_toolset_20260801'},{'type':'browser_toolset_20260801'},"
			"{'type':'computer_20250124','name':'computer'},{'type':'computer_20251124',"
			"'name':'computer'}]"));
}

static json_t *n_entries(int n)
{
	json_t *arr = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:s}", "type", "custom", "name", "t"));
	json_array_set_new(arr, 0, json_pack("{s:s}", "type", "browser_toolset_20260801"));
	return arr;
}

Test(toolsets, entries_limit)
{
	jtmp[0] = n_entries(DG_TOOLSETS_ENTRIES_MAX);
	assert_ok(dg_toolsets_parse(jtmp[0], &ts, &err));
	cr_assert(ts.browser);
	jtmp[1] = n_entries(DG_TOOLSETS_ENTRIES_MAX + 1);
	assert_tools_refused(dg_toolsets_parse(jtmp[1], &ts, &err), "tools: 129 entries; at most 128");
	cr_assert_not(ts.browser, "a refused list declares nothing");
}

/* Parses a member with scale s (toolsets attached). */
static int member_sc(const struct dg_adapt_scale *s, const char *name, const char *input)
{
	const struct dg_adapt_scale *was = scale;
	scale = s;
	int rc = member(name, input);
	scale = was;
	return rc;
}

Test(toolsets, disabled_members_are_refused)
{
	assert_ok(tools("[{'type':'browser_toolset_20260801','configs':{'javascript_exec':{'enabled':"
			"false},'navigate':{'enabled':true}}}]"));
	struct dg_adapt_scale s = scaled;
	s.toolsets = &ts;
	assert_refused(member_sc(&s, "javascript_exec", "{'text':'1'}"), -EINVAL,
		       "browser.input: javascript_exec is disabled by the toolset's configs "
		       "(\"enabled\": false): the model was not offered it");
	cr_assert(ad.browser);
	cr_assert(ad.has_id);
	assert_ok(member_sc(&s, "navigate", "{'url':'a.b'}"));
	assert_ok(member_sc(&s, "find", "{'query':'x'}"));
	/* Refused before its input is read. */
	assert_refused(member_sc(&s, "javascript_exec", "[]"), -EINVAL,
		       "browser.input: javascript_exec is disabled by the toolset's configs "
		       "(\"enabled\": false): the model was not offered it");
	/* Without toolsets, every member is enabled. */
	assert_ok(member("javascript_exec", "{'text':'1'}"));
	/* Each member by its own bit, and only it. */
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++) {
		char *list = NULL;
		cr_assert(asprintf(&list, "[{'type':'browser_toolset_20260801','configs':{'%s':{"
				   "'enabled':false}}}]", dg_browser_member_name(i)) > 0);
		assert_ok(tools(list));
		free(list);
		cr_assert_eq(ts.browser_off, 1u << i, "member %d", i);
		char want[192];
		snprintf(want, sizeof(want), "browser.input: %s is disabled by the toolset's configs "
			 "(\"enabled\": false): the model was not offered it", minimal[i].name);
		assert_refused(member_sc(&s, minimal[i].name, minimal[i].input), -EINVAL, want);
		const struct row *next = &minimal[(i + 1) % DG_BROWSER_MEMBERS];
		cr_assert_eq(member_sc(&s, next->name, next->input), 0, "%s: %s", next->name, err.msg);
	}
}

Test(toolsets, computer_configs_refuse_computer_members)
{
	assert_ok(tools("[{'type':'computer_toolset_20260801','configs':{'zoom':{'enabled':false},"
			"'key':{'enabled':false}}},{'type':'browser_toolset_20260801'}]"));
	struct dg_adapt_scale s = scaled;
	s.toolsets = &ts;
	const struct dg_adapt_scale *was = scale;
	scale = &s;
	assert_refused(parse("{'type':'tool_use','id':'toolu_c','name':'zoom','toolset_name':"
			     "'computer','input':{'region':[0,0,10,10]}}"),
		       -EINVAL,
		       "anthropic.input: \"zoom\" is disabled by the toolset's configs (\"enabled\": "
		       "false): the model was not offered it");
	cr_assert(ad.toolset);
	assert_refused(parse("{'type':'tool_use','id':'toolu_c','name':'key','toolset_name':"
			     "'computer','input':{'text':'a'}}"),
		       -EINVAL,
		       "anthropic.input: \"key\" is disabled by the toolset's configs (\"enabled\": "
		       "false): the model was not offered it");
	assert_ok(parse("{'type':'tool_use','id':'toolu_c','name':'left_click','toolset_name':"
			"'computer','input':{'coordinate':[1,1]}}"));
	/* The browser toolset's zoom and key are other members. */
	assert_ok(member("zoom", "{'region':[0,0,10,10]}"));
	assert_ok(member("key", "{'text':'a'}"));
	/* And the browser's configs do not disable computer members. */
	assert_ok(tools("[{'type':'computer_toolset_20260801'},{'type':'browser_toolset_20260801',"
			"'configs':{'zoom':{'enabled':false}}}]"));
	assert_ok(parse("{'type':'tool_use','id':'toolu_c','name':'zoom','toolset_name':"
			"'computer','input':{'region':[0,0,10,10]}}"));
	assert_refused_prefix(member("zoom", "{'region':[0,0,10,10]}"), -EINVAL,
			      "browser.input: zoom is disabled");
	scale = was;
}

/* ---- the answer ------------------------------------------------------------------------ */

static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
			      'I', 'H', 'D', 'R', 0xff, 0xfe, 0x00, 0x7f};

/* Builds the answer into ans, dumped and loaded back as the agent reads it. */
static int answer(const struct dg_adapt_outcome *o)
{
	json_decref(ans);
	ans = NULL;
	json_t *r = NULL;
	int rc = dg_adapt_answer(&ad, o, &r, &err);
	if (rc < 0) {
		cr_assert_null(r);
		return rc;
	}
	char *text = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	cr_assert(text);
	json_error_t je;
	ans = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	free(text);
	cr_assert(ans, "answer does not parse back: %s", je.text);
	return 0;
}

static json_t *J(int slot, const char *sq)
{
	char *t = dq(sq);
	json_error_t je;
	json_decref(jtmp[slot]);
	jtmp[slot] = json_loads(t, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
	cr_assert(jtmp[slot], "bad test JSON: %s: %s", je.text, t);
	free(t);
	return jtmp[slot];
}

/* ans is exactly this JSON (' for "). */
static void assert_answer(const char *sq)
{
	char *t = dq(sq);
	json_error_t je;
	json_t *want = json_loads(t, 0, &je);
	cr_assert(want, "bad test JSON: %s: %s", je.text, t);
	free(t);
	char *got = json_dumps(ans, JSON_COMPACT | JSON_SORT_KEYS);
	char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(got, w);
	free(got);
	free(w);
	json_decref(want);
}

static const char *text_of(const json_t *block)
{
	cr_assert_str_eq(json_string_value(json_object_get(block, "type")), "text");
	const char *s = json_string_value(json_object_get(block, "text"));
	cr_assert(s);
	return s;
}

static const json_t *content(size_t i)
{
	const json_t *c = json_object_get(ans, "content");
	cr_assert(json_is_array(c));
	cr_assert(i < json_array_size(c), "content[%zu] of %zu", i, json_array_size(c));
	return json_array_get(c, i);
}

Test(answer, a_member_s_tool_result)
{
	assert_ok(member("read_page", "{}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .body = "- main\n  - link \"Home\" [ref_1]"};
	assert_ok(answer(&o));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':false,'content':[{'type':'text','text':'- main\\n  - link "
		      "\\'Home\\' [ref_1]'}]}");
}

Test(answer, image_only_when_given)
{
	assert_ok(member("screenshot", "{}"));
	assert_ok(resolve(&VP));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(json_object_get(ans, "content")), 1);
	const json_t *img = content(0);
	cr_assert_str_eq(json_string_value(json_object_get(img, "type")), "image");
	const json_t *src = json_object_get(img, "source");
	cr_assert_eq(json_object_size(src), 3);
	cr_assert_str_eq(json_string_value(json_object_get(src, "type")), "base64");
	cr_assert_str_eq(json_string_value(json_object_get(src, "media_type")), "image/png");
	const char *b64 = json_string_value(json_object_get(src, "data"));
	unsigned char dec[64];
	int n = EVP_DecodeBlock(dec, (const unsigned char *)b64, (int)strlen(b64));
	cr_assert_eq(n, 21); /* 20 bytes, padded to 21 by the decoder */
	cr_assert_eq(memcmp(dec, png, sizeof(png)), 0);
	/* Without a PNG, no image, and something said. */
	struct dg_adapt_outcome o2 = {.ok = true, .done = 1};
	assert_ok(answer(&o2));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':false,'content':[{'type':'text','text':'deskgate ran screenshot'}]}");
	/* Body, text and image together, in that order. */
	struct dg_adapt_outcome o3 = {.ok = true, .done = 1, .body = "B", .text = "T",
				      .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o3));
	cr_assert_eq(json_array_size(json_object_get(ans, "content")), 2);
	cr_assert_str_eq(text_of(content(0)), "B\nT");
	cr_assert_str_eq(json_string_value(json_object_get(content(1), "type")), "image");
}

Test(answer, failures_and_refusals)
{
	assert_ok(member("navigate", "{'url':'evil.test'}"));
	struct dg_adapt_outcome r = {.done = 0, .verdict = "deny", .rule = "no-evil",
				     .reason = "evil.test is blocked", .body = "not shown"};
	assert_ok(answer(&r));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':true,'content':[{'type':'text','text':'deskgate refused navigate: "
		      "evil.test is blocked (rule no-evil)'}]}");
	struct dg_adapt_outcome f = {.done = 0, .error = "net::ERR_NAME_NOT_RESOLVED"};
	assert_ok(answer(&f));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':true,'content':[{'type':'text','text':'deskgate failed navigate: "
		      "net::ERR_NAME_NOT_RESOLVED'}]}");
	/* A block that did not parse is answered as a browser member. */
	cr_assert_neq(member("clik", "{}"), 0);
	struct dg_adapt_outcome p = {.error = err.msg};
	assert_ok(answer(&p));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':true,'content':[{'type':'text','text':'deskgate rejected the call: "
		      "browser.name: \\'clik\\' is not a member of the browser toolset (navigate, "
		      "read_page, find, left_click, ...)'}]}");
	/* A pending member whose resolve failed: answered by its name. */
	assert_ok(member("left_click", "{'target':{'type':'coordinate','x':1280,'y':0}}"));
	cr_assert_neq(resolve(&VP), 0);
	struct dg_adapt_outcome q = {.done = 0, .error = err.msg};
	assert_ok(answer(&q));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':true,'content':[{'type':'text','text':'deskgate failed left_click: "
		      "browser.input.target.x: 1280 is outside the viewport (width 1280)'}]}");
	/* Inconsistent outcomes are the caller's bug. */
	struct dg_adapt_outcome bad = {.ok = true, .done = 0};
	cr_assert_eq(answer(&bad), -EINVAL);
}

Test(answer, browser_state_tabs)
{
	assert_ok(member("new_tab", "{}"));
	struct dg_adapt_outcome o = {
		.ok = true, .done = 1,
		.tabs = J(0, "[{'id':'T1','url':'https://a.test/','title':'A','active':false},"
			     "{'id':'T2','url':'about:blank','title':'','active':true}]"),
		.tabs_before = J(1, "['T1']")};
	assert_ok(answer(&o));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':false,'content':[{'type':'text','text':'deskgate ran new_tab'},"
		      "{'type':'browser_state','tabs':[{'tab_id':'T1','title':'A','url':"
		      "'https://a.test/','active':false},{'tab_id':'T2','title':'','url':'about:blank',"
		      "'active':true}],'state_changes':[{'type':'tab_opened','tab_id':'T2'}]}]}");
	/* Nothing opened: state_changes omitted, not []. */
	o.tabs_before = J(1, "['T2','T1']");
	assert_ok(answer(&o));
	const json_t *st = content(1);
	cr_assert_str_eq(json_string_value(json_object_get(st, "type")), "browser_state");
	cr_assert_null(json_object_get(st, "state_changes"));
	cr_assert_eq(json_object_size(st), 2);
	/* No list before: nothing to compare, no state_changes. */
	o.tabs_before = NULL;
	assert_ok(answer(&o));
	cr_assert_null(json_object_get(content(1), "state_changes"));
	/* Every tab opened: each reported, in order. */
	o.tabs_before = J(1, "[]");
	assert_ok(answer(&o));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':false,'content':[{'type':'text','text':'deskgate ran new_tab'},"
		      "{'type':'browser_state','tabs':[{'tab_id':'T1','title':'A','url':"
		      "'https://a.test/','active':false},{'tab_id':'T2','title':'','url':'about:blank',"
		      "'active':true}],'state_changes':[{'type':'tab_opened','tab_id':'T1'},{'type':"
		      "'tab_opened','tab_id':'T2'}]}]}");
	/* No tabs: an empty inventory, no state_changes. */
	o.tabs = J(0, "[]");
	assert_ok(answer(&o));
	assert_answer("{'type':'tool_result','tool_use_id':'toolu_b1','toolset_name':'browser',"
		      "'is_error':false,'content':[{'type':'text','text':'deskgate ran new_tab'},"
		      "{'type':'browser_state','tabs':[]}]}");
	/* No tab list from the worker: no browser_state block. */
	o.tabs = NULL;
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(json_object_get(ans, "content")), 1);
}

/* The tab ids ans marks active. */
static int actives(char *ids, size_t len)
{
	const json_t *c = json_object_get(ans, "content");
	const json_t *st = json_array_get(c, json_array_size(c) - 1);
	cr_assert_str_eq(json_string_value(json_object_get(st, "type")), "browser_state");
	const json_t *tabs = json_object_get(st, "tabs");
	int n = 0;
	ids[0] = '\0';
	for (size_t i = 0; i < json_array_size(tabs); i++) {
		const json_t *t = json_array_get(tabs, i);
		cr_assert_eq(json_object_size(t), 4, "tab %zu: %zu fields", i, json_object_size(t));
		cr_assert(json_is_boolean(json_object_get(t, "active")));
		if (json_is_true(json_object_get(t, "active"))) {
			snprintf(ids + strlen(ids), len - strlen(ids), "%s%s", n ? "," : "",
				 json_string_value(json_object_get(t, "tab_id")));
			n++;
		}
	}
	return n;
}

Test(answer, exactly_one_tab_active)
{
	assert_ok(member("list_tabs", "{}"));
	char ids[128];
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .body = "tabs"};
	static const struct {
		const char *tabs, *active;
	} cases[] = {
		/* The worker marks none (a page closing): the newest. */
		{"[{'id':'a','url':'','title':''},{'id':'b','url':'','title':''}]", "b"},
		{"[{'id':'a','active':false},{'id':'b','active':false}]", "b"},
		/* Two marked: the first. */
		{"[{'id':'a','active':true},{'id':'b','active':true}]", "a"},
		{"[{'id':'a'},{'id':'b','active':true},{'id':'c'}]", "b"},
		/* Only true is true. */
		{"[{'id':'a','active':'true'},{'id':'b','active':1}]", "b"},
		/* Entries that are not tabs are left out, and never the active one. */
		{"[{'id':'a'},{'id':5,'active':true}]", "a"},
		{"[{'id':'a'},{'id':'b'},'junk',{'active':true},null]", "b"},
		{"[{'id':'a','active':true},{'id':null,'active':true},{'id':'c'}]", "a"},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		o.tabs = J(0, cases[k].tabs);
		assert_ok(answer(&o));
		cr_assert_eq(actives(ids, sizeof(ids)), 1, "%s: %s active", cases[k].tabs, ids);
		cr_assert_str_eq(ids, cases[k].active, "%s", cases[k].tabs);
	}
	/* Nothing that is a tab: an empty inventory. */
	o.tabs = J(0, "[5,{'id':1,'active':true}]");
	assert_ok(answer(&o));
	cr_assert_eq(actives(ids, sizeof(ids)), 0);
	cr_assert_eq(json_array_size(json_object_get(content(1), "tabs")), 0);
}

Test(answer, titles_and_urls_the_model_may_read)
{
	assert_ok(member("list_tabs", "{}"));
	struct dg_adapt_outcome o = {
		.ok = true, .done = 1,
		.tabs = J(0, "[{'id':'a','title':'Bell\\u0007 here','url':'https://a.test/\\u001b[2J',"
			     "'active':true},{'id':'b','title':'Caf\\u00e9 \\u2014 Men\\u00fc','url':"
			     "'https://b.test/','active':false},{'id':'c','title':7,'url':null},"
			     "{'id':'d','title':'line\\nbreak','url':'https://d.test/\\u0085'}]")};
	assert_ok(answer(&o));
	const json_t *tabs = json_object_get(content(1), "tabs");
	cr_assert_eq(json_array_size(tabs), 4);
	static const char *const want[][2] = {{"", ""},
					      {"Caf\xc3\xa9 \xe2\x80\x94 Men\xc3\xbc", "https://b.test/"},
					      {"", ""},
					      {"", ""}};
	for (size_t i = 0; i < 4; i++) {
		const json_t *t = json_array_get(tabs, i);
		cr_assert_str_eq(json_string_value(json_object_get(t, "title")), want[i][0], "tab %zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(t, "url")), want[i][1], "tab %zu", i);
	}
	/* A title that is not UTF-8 (jansson holds what the worker sent). */
	jtmp[2] = json_pack("[{s:s, s:o, s:s, s:b}]", "id", "a", "title",
			    json_stringn_nocheck("ab\xff", 3), "url", "https://a.test/", "active", 1);
	o.tabs = jtmp[2];
	assert_ok(answer(&o));
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(content(1), "tabs"), 0), "title")),
			 "");
}

Test(answer, body_cut_and_made_valid)
{
	assert_ok(member("get_page_text", "{}"));
	/* At the limit: all of it. */
	char *body = repeat('a', DG_ADAPT_BODY_MAX);
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .body = body};
	assert_ok(answer(&o));
	cr_assert_eq(strlen(text_of(content(0))), DG_ADAPT_BODY_MAX);
	cr_assert_str_eq(text_of(content(0)), body);
	free(body);
	/* One past: cut with the note. */
	body = repeat('a', DG_ADAPT_BODY_MAX + 1);
	o.body = body;
	assert_ok(answer(&o));
	const char *t = text_of(content(0));
	static const char note[] = "\n[deskgate cut this answer at 1048576 bytes]";
	cr_assert_eq(strlen(t), DG_ADAPT_BODY_MAX + strlen(note));
	cr_assert_eq(memcmp(t, body, DG_ADAPT_BODY_MAX), 0);
	cr_assert_str_eq(t + DG_ADAPT_BODY_MAX, note);
	free(body);
	/* Cut at a character's start, never inside it. */
	body = repeat('a', DG_ADAPT_BODY_MAX + 1);
	memcpy(body + DG_ADAPT_BODY_MAX - 1, "\xc3\xa9", 3);
	o.body = body;
	assert_ok(answer(&o));
	t = text_of(content(0));
	cr_assert_eq(strlen(t), DG_ADAPT_BODY_MAX - 1 + strlen(note));
	cr_assert_str_eq(t + DG_ADAPT_BODY_MAX - 1, note);
	free(body);
	/* Invalid UTF-8 made valid; control characters but line breaks and
	 * tabs made spaces; text after the body on its own line. */
	o.body = "a\xff" "b\xc3\tc\nd\x01" "e\x7f" "f\xc2\x85" "g\xe2\x82";
	o.text = "note\x1b";
	assert_ok(answer(&o));
	cr_assert_str_eq(text_of(content(0)),
			 "a\xef\xbf\xbd" "b\xef\xbf\xbd\tc\nd e f g\xef\xbf\xbd\xef\xbf\xbd\nnote ");
	/* An empty body: nothing said but that it ran. */
	o.body = "";
	o.text = NULL;
	assert_ok(answer(&o));
	cr_assert_str_eq(text_of(content(0)), "deskgate ran get_page_text");
}

/* ---- hostile input ---------------------------------------------------------------------- */

Test(hostile, pending_freed_without_resolving)
{
	/* The suite runs under LeakSanitizer: cleanup checks after each test. */
	for (int i = 0; i < DG_BROWSER_MEMBERS; i++) {
		assert_ok(member(full[i].name, full[i].input));
		dg_adapted_free(&ad);
		cr_assert_not(ad.pending);
		cr_assert_null(ad.bcall.tmpl);
		dg_adapted_free(&ad); /* twice is harmless */
	}
	/* Parsed over a pending call without freeing it first is the
	 * caller's leak; a failed resolve then a free is not. */
	assert_ok(member("zoom", "{'region':[0,0,2000,10]}"));
	cr_assert_neq(resolve(&VP), 0);
	cr_assert_neq(resolve(&VX), 0);
	dg_adapted_free(&ad);
	cr_assert_eq(leak_check(), 0);
}

Test(hostile, a_message_at_the_size_limit)
{
	/* A type member padded with spaces to exactly DG_ADAPT_JSON_MAX. */
	static const char head[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"type\","
				   "\"toolset_name\":\"browser\",\"input\":{\"text\":\"hi\"}";
	char *m = malloc(DG_ADAPT_JSON_MAX + 2);
	cr_assert(m);
	memcpy(m, head, strlen(head));
	memset(m + strlen(head), ' ', DG_ADAPT_JSON_MAX + 2 - strlen(head));
	m[DG_ADAPT_JSON_MAX - 1] = '}';
	assert_ok(parse_raw(m, DG_ADAPT_JSON_MAX));
	assert_complete("{'text':'hi','type':'type'}", "256 KiB");
	m[DG_ADAPT_JSON_MAX - 1] = ' ';
	m[DG_ADAPT_JSON_MAX] = '}';
	assert_refused(parse_raw(m, DG_ADAPT_JSON_MAX + 1), -E2BIG,
		       "message: 262145 bytes is over the limit of 262144 bytes");
	free(m);
	/* Large fields inside the limit, each refused by its own bound. */
	char *big = repeat('x', 200000);
	assert_refused(memberf("type", "{'text':'%s'}", big), -EINVAL,
		       "browser.input.text: 200000 bytes is over the limit of 16384 bytes");
	assert_refused_prefix(memberf("left_click", "{'target':{'type':'ref','ref':'ref_%s'}}", big),
			      -EINVAL, "browser.input.target.ref: \"ref_xxxx");
	cr_assert(strlen(err.msg) < 300, "message of %zu bytes", strlen(err.msg));
	assert_refused_prefix(member(big, "{}"), -EINVAL, "browser.name: \"xxxx");
	cr_assert(strlen(err.msg) < 300, "message of %zu bytes", strlen(err.msg));
	assert_refused_prefix(memberf("screenshot", "{'%s':1}", big), -EINVAL,
			      "browser.input: unknown field \"xxxx");
	cr_assert(strlen(err.msg) < 500, "message of %zu bytes", strlen(err.msg));
	free(big);
}

Test(hostile, deep_nesting)
{
	/* Nesting jansson decodes, where a string or object is expected. */
	size_t depth = 1000;
	char *deep = malloc(depth * 2 + 1);
	cr_assert(deep);
	memset(deep, '[', depth);
	memset(deep + depth, ']', depth);
	deep[depth * 2] = '\0';
	assert_refused(memberf("form_input", "{'target':{'type':'ref','ref':'ref_1'},'value':%s}", deep),
		       -EINVAL, "browser.input.value: an array is not a string, a number or a boolean");
	assert_refused(memberf("left_click", "{'target':{'type':%s,'x':1,'y':1}}", deep), -EINVAL,
		       "browser.input.target.type: an array is not \"coordinate\" or \"ref\"");
	assert_refused(memberf("navigate", "{'url':%s}", deep), -EINVAL,
		       "browser.input.url: an array is not a string");
	assert_refused(memberf("zoom", "{'region':[%s,0,1,1]}", deep), -EINVAL,
		       "browser.input.region[0]: an array is not a number");
	assert_refused(memberf("file_upload", "{'target':{'type':'ref','ref':'ref_1'},'paths':%s}",
			       deep),
		       -EINVAL, "browser.input.paths[0]: an array is not a string");
	free(deep);
	/* Beyond what jansson decodes: not JSON. */
	depth = 100000;
	deep = malloc(depth * 2 + 1);
	cr_assert(deep);
	memset(deep, '[', depth);
	memset(deep + depth, ']', depth);
	deep[depth * 2] = '\0';
	assert_refused_prefix(memberf("form_input", "{'target':{'type':'ref','ref':'ref_1'},'value':"
				      "%s}", deep),
			      -EINVAL, "message: invalid JSON");
	free(deep);
}

Test(hostile, nul_and_control_bytes)
{
	static const char m1[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"navigate\\u0000\","
				 "\"toolset_name\":\"browser\",\"input\":{\"url\":\"a.b\"}}";
	assert_refused(parse_raw(m1, sizeof(m1) - 1), -EINVAL,
		       "browser.name: \"navigate\\x00\" is not a member of the browser toolset "
		       "(navigate, read_page, find, left_click, ...)");
	static const char m2[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"left_click\","
				 "\"toolset_name\":\"browser\",\"input\":{\"target\":{\"type\":"
				 "\"coordinate\\u0000\",\"x\":1,\"y\":1}}}";
	assert_refused(parse_raw(m2, sizeof(m2) - 1), -EINVAL,
		       "browser.input.target.type: \"coordinate\\x00\" is not \"coordinate\" or "
		       "\"ref\"");
	static const char m3[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"type\","
				 "\"toolset_name\":\"browser\\u0000\",\"input\":{\"text\":\"a\"}}";
	assert_refused(parse_raw(m3, sizeof(m3) - 1), -EINVAL,
		       "anthropic.toolset_name: \"browser\\x00\" is not \"computer\" or \"browser\" "
		       "(the toolsets deskgate speaks)");
	static const char m4[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"scroll\","
				 "\"toolset_name\":\"browser\",\"input\":{\"target\":{\"type\":"
				 "\"coordinate\",\"x\":1,\"y\":1},\"scroll_direction\":\"up\\u0000\"}}";
	assert_refused(parse_raw(m4, sizeof(m4) - 1), -EINVAL,
		       "browser.input.scroll_direction: unknown direction \"up\\x00\" (allowed: up, "
		       "down, left, right)");
	static const char m5[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"javascript_exec\","
				 "\"toolset_name\":\"browser\",\"input\":{\"text\":\"1\\u0000\"}}";
	assert_refused_prefix(parse_raw(m5, sizeof(m5) - 1), -EINVAL, "browser.input.text: ");
	/* Duplicate fields are refused before anything is read. */
	assert_refused_prefix(member("navigate", "{'url':'a.b','url':'c.d'}"), -EINVAL,
			      "message: duplicated field");
	assert_refused_prefix(member("left_click", "{'target':{'type':'ref','ref':'ref_1','ref':"
						   "'ref_2'}}"),
			      -EINVAL, "message: duplicated field");
}

/* Flips, inserts and deletes bytes of real blocks: every result is an
 * error with nothing kept, or one action (complete, or pending and then
 * resolved or refused against a random view), always the canonical
 * action of its text, and the answer can be built. */
Test(hostile, mutated_blocks_resolved_against_random_views)
{
	static const char *const seeds[] = {
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"left_click\",\"toolset_name\":"
		"\"browser\",\"input\":{\"target\":{\"type\":\"coordinate\",\"x\":100,\"y\":50},"
		"\"modifiers\":\"ctrl+shift\",\"tab_id\":\"T1\"}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"hover\",\"toolset_name\":\"browser\","
		"\"input\":{\"target\":{\"type\":\"ref\",\"ref\":\"ref_12\"}}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"left_click_drag\",\"toolset_name\":"
		"\"browser\",\"input\":{\"from\":{\"type\":\"coordinate\",\"x\":1,\"y\":2},\"target\":"
		"{\"type\":\"coordinate\",\"x\":300,\"y\":400}}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"zoom\",\"toolset_name\":\"browser\","
		"\"input\":{\"region\":[10,20,110,70]}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"form_input\",\"toolset_name\":"
		"\"browser\",\"input\":{\"target\":{\"type\":\"ref\",\"ref\":\"ref_3\"},\"value\":"
		"\"x\",\"tab_id\":\"T2\"}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"navigate\",\"toolset_name\":"
		"\"browser\",\"input\":{\"url\":\"Example.COM:80/a\"}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"scroll\",\"toolset_name\":\"browser\","
		"\"input\":{\"scroll_direction\":\"down\",\"scroll_amount\":5,\"target\":{\"type\":"
		"\"coordinate\",\"x\":640,\"y\":300}}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"key\",\"toolset_name\":\"browser\","
		"\"input\":{\"text\":\"ctrl+a\",\"repeat\":3,\"tab_id\":\"T3\"}}",
		"{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"screenshot\",\"toolset_name\":"
		"\"browser\",\"input\":{}}",
		"{\"type\":\"click\",\"ref\":\"ref_7\"}",
	};
	static const char alphabet[] = "{}[]\",:0123456789-.eE tnulrfaxy\\u+_";
	uint32_t s = 7;
#define RND() (s = s * 1103515245u + 12345u, (s >> 8))
	int accepted = 0, pending = 0, resolved = 0;
	for (int iter = 0; iter < 20000; iter++) {
		const char *seed = seeds[iter % (sizeof(seeds) / sizeof(seeds[0]))];
		size_t len = strlen(seed);
		char buf[1024];
		memcpy(buf, seed, len);
		int edits = 1 + (int)(RND() % 2);
		for (int e = 0; e < edits && len > 1 && len < sizeof(buf) - 1; e++) {
			size_t at = RND() % len;
			switch (RND() % 3) {
			case 0:
				buf[at] = RND() % 4 ? alphabet[RND() % (sizeof(alphabet) - 1)]
						    : (char)(RND() & 0xff);
				break;
			case 1:
				memmove(buf + at + 1, buf + at, len - at);
				buf[at] = alphabet[RND() % (sizeof(alphabet) - 1)];
				len++;
				break;
			default:
				memmove(buf + at, buf + at + 1, len - at - 1);
				len--;
				break;
			}
		}
		int rc = parse_raw(buf, len);
		if (rc != 0) {
			cr_assert(rc == -EINVAL || rc == -E2BIG, "rc %d", rc);
			cr_assert(err.msg[0]);
			assert_nothing();
		} else {
			accepted++;
			cr_assert_eq(ad.n, 1);
			struct dg_resolve_req q;
			if (ad.pending) {
				pending++;
				cr_assert(dg_adapt_resolve_wants(&ad, 0, &q));
				cr_assert(q.ref >= 0 && q.ref <= DG_ACTION_REF_MAX);
				cr_assert(memchr(q.tab, '\0', sizeof(q.tab)));
				cr_assert_eq(q.scroll, q.ref != 0);
			}
			if (ad.pending || dg_adapt_resolve_wants(&ad, 0, &q)) {
				struct dg_browser_view v = {
					(int)(RND() % 300), (int)(RND() % 200), 1 + (int)(RND() % 1300),
					1 + (int)(RND() % 800), RND() % 2 != 0, (int)(RND() % 1300),
					(int)(RND() % 820)};
				bool was = ad.pending;
				int r = resolve(&v);
				cr_assert(r == 0 || r == -EINVAL, "resolve rc %d", r);
				if (r == 0) {
					resolved++;
					cr_assert_not(ad.pending);
					cr_assert_not(dg_adapt_resolve_wants(&ad, 0, &q));
				} else {
					cr_assert(err.msg[0]);
					cr_assert_eq(ad.pending, was);
					cr_assert_eq(ad.n, 1);
				}
			}
			if (!ad.pending) {
				/* Whole: its object, text and struct agree. */
				char *d = json_dumps(ad.actions[0], JSON_COMPACT | JSON_SORT_KEYS);
				cr_assert(d);
				assert_action_exact(d, "mutated");
				free(d);
			}
		}
		struct dg_adapt_outcome o = {.ok = rc == 0 && !ad.pending, .done = rc == 0 && !ad.pending,
					     .error = err.msg, .png = png, .png_len = sizeof(png),
					     .body = buf[0] == '{' ? "body" : NULL};
		json_t *r = NULL;
		struct dg_err e2;
		int arc = dg_adapt_answer(&ad, &o, &r, &e2);
		cr_assert(arc == 0 || arc == -EINVAL, "answer rc %d", arc);
		cr_assert((arc == 0) == (r != NULL));
		json_decref(r);
	}
#undef RND
	cr_assert(accepted > 250, "only %d mutations accepted: the seeds are broken", accepted);
	cr_assert(pending > 150, "only %d pending", pending);
	cr_assert(resolved > 80, "only %d resolved", resolved);
}
