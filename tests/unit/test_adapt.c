/* The Anthropic and OpenAI adapters: wire detection; every action of each
 * Anthropic computer tool version and of OpenAI computer use (preview and
 * batched) translated to the canonical action it means; key names; scaling
 * between the model's display and the desktop both ways, with rounding and
 * edges; each limit at its boundary; hostile input; and the answers' exact
 * JSON shapes, parsed back, with the base64 image decoded and compared. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "actions/actions.h"
#include "adapt-priv.h"

/* The usual setup: a 1280x800 desktop, the model told about 1024x640 (a
 * factor of 1.25), the pointer at (100, 200). */
#define DW 1280
#define DH 800
#define MW 1024
#define MH 640
#define CX 100
#define CY 200

static struct dg_adapted ad;
static struct dg_err err;
static json_t *ans;

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
	cr_assert_eq(leak_check(), 0, "memory leaked (see the LeakSanitizer report above)");
}

TestSuite(detect, .fini = cleanup);
TestSuite(anthropic, .fini = cleanup);
TestSuite(openai, .fini = cleanup);
TestSuite(scale, .fini = cleanup);
TestSuite(limits, .fini = cleanup);
TestSuite(answer, .fini = cleanup);
TestSuite(base64, .fini = cleanup);
TestSuite(hostile, .fini = cleanup);

static const struct dg_adapt_scale scaled = {DW, DH, MW, MH, NULL};
static const struct dg_adapt_scale same = {DW, DH, 0, 0, NULL};

/* Parses len bytes with the given scale into ad (which holds garbage
 * before: parse must not rely on a zeroed struct). */
static int parse_raw_sc(const struct dg_adapt_scale *sc, const char *text, size_t len)
{
	dg_adapted_free(&ad);
	memset(&ad, 0xa5, sizeof(ad));
	memset(&err, 0, sizeof(err));
	return dg_adapt_parse(text, len, sc, CX, CY, &ad, &err);
}

/* Parses JSON written with ' for " (no ' in the values, use \u0027). */
static int parse_sc(const struct dg_adapt_scale *sc, const char *sq)
{
	char *t = strdup(sq);
	cr_assert(t);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	int rc = parse_raw_sc(sc, t, strlen(t));
	free(t);
	return rc;
}

static int parse(const char *sq)
{
	return parse_sc(&scaled, sq);
}

/* The same, printf-formatted. */
static int parsef(const struct dg_adapt_scale *sc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int parsef(const struct dg_adapt_scale *sc, const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0);
	int rc = parse_sc(sc, text);
	free(text);
	return rc;
}

#define assert_ok(rc) cr_assert_eq((rc), 0, "rc %d, message \"%s\"", (rc), err.msg)

/* Refused with code and exactly this message; nothing translated kept. */
#define assert_refused(rc, code, want)                                                     \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert_str_eq(err.msg, (want));                                         \
		assert_no_actions();                                                       \
	} while (0)

/* Refused with code and a message starting with prefix. */
#define assert_refused_prefix(rc, code, prefix)                                           \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert(strncmp(err.msg, (prefix), strlen(prefix)) == 0,                 \
			  "message \"%s\" does not start with \"%s\"", err.msg, (prefix));  \
		assert_no_actions();                                                       \
	} while (0)

static void assert_no_actions(void)
{
	cr_assert_eq(ad.n, 0);
	for (int i = 0; i < DG_ADAPT_ACTIONS_MAX; i++) {
		cr_assert_null(ad.actions[i]);
		cr_assert_null(ad.wire_actions[i]);
		cr_assert_null(ad.text[i]);
	}
}

/* The canonical encoding of ad.actions[i], malloc'd; checks on the way that
 * the action is one the canonical parser accepts for the desktop and that
 * it is already in canonical form. */
static char *canon_of(int i, int dw, int dh)
{
	cr_assert(i < ad.n, "action %d of %d", i, ad.n);
	struct dg_action act;
	struct dg_err e;
	int rc = dg_action_parse_obj(ad.actions[i], dw, dh, &act, &e);
	cr_assert_eq(rc, 0, "action %d does not parse: %s", i, e.msg);
	char *c = dg_action_canonical(&act, NULL);
	dg_action_free(&act);
	cr_assert(c);
	char *d = json_dumps(ad.actions[i], JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert_str_eq(d, c, "action %d is not in canonical form", i);
	free(d);
	/* The parsed action and the text kept with it are that same action:
	 * what the gateway decides on and what it sends. */
	cr_assert(ad.text[i], "action %d has no canonical text", i);
	cr_assert_str_eq(ad.text[i], c, "action %d: kept text", i);
	cr_assert_eq(ad.text_len[i], strlen(c), "action %d: text_len", i);
	char *k = dg_action_canonical(&ad.act[i], NULL);
	cr_assert(k);
	cr_assert_str_eq(k, c, "action %d: the kept struct", i);
	free(k);
	return c;
}

/* ad.actions[i] is exactly this canonical encoding (' for "). */
#define assert_canon(i, want)                                                              \
	do {                                                                               \
		char *c_ = canon_of((i), ad.scale.desk_w, ad.scale.desk_h);                 \
		char *w_ = strdup(want);                                                   \
		for (char *p_ = w_; *p_; p_++)                                             \
			if (*p_ == '\'')                                                   \
				*p_ = '"';                                                 \
		cr_assert_str_eq(c_, w_);                                                  \
		free(c_);                                                                  \
		free(w_);                                                                  \
	} while (0)

/* ad.actions[i] means the same as the canonical action written (' for "). */
static void assert_same(int i, const char *sq)
{
	char *t = strdup(sq);
	for (char *p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	struct dg_action act;
	struct dg_err e;
	int rc = dg_action_parse(t, strlen(t), ad.scale.desk_w, ad.scale.desk_h, &act, &e);
	cr_assert_eq(rc, 0, "expected action does not parse: %s", e.msg);
	char *want = dg_action_canonical(&act, NULL);
	dg_action_free(&act);
	char *got = canon_of(i, ad.scale.desk_w, ad.scale.desk_h);
	cr_assert_str_eq(got, want, "action %d", i);
	free(got);
	free(want);
	free(t);
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	cr_assert(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

/* ---- detection ----------------------------------------------------------------- */

Test(detect, canonical_passes_through_in_desktop_coordinates)
{
	/* (1279, 799) is on the desktop but off the 1024x640 model display:
	 * canonical actions are not scaled. */
	assert_ok(parse("{'type':'click','x':1279,'y':799,'button':'right'}"));
	cr_assert_eq(ad.wire, DG_WIRE_CANONICAL);
	cr_assert_eq(ad.n, 1);
	cr_assert_not(ad.has_id);
	cr_assert_str_eq(ad.name[0], "click");
	cr_assert_null(ad.safety_checks);
	assert_canon(0, "{'button':'right','count':1,'modifiers':[],'type':'click','x':1279,'y':799}");
	cr_assert_eq(ad.wire_actions[0], ad.raw);
}

Test(detect, canonical_errors_are_the_schema_s)
{
	assert_refused(parse("{'type':'click','x':1280,'y':0}"), -EINVAL,
		       "action.x: 1280 is off the screen (width 1280)");
	cr_assert_eq(ad.wire, DG_WIRE_CANONICAL);
	assert_refused(parse("{'type':'exec','argv':[]}"), -EINVAL,
		       "action.argv: 0 strings; exec takes 1 to 256");
}

Test(detect, canonical_exec_and_navigate)
{
	assert_ok(parse("{'type':'navigate','url':'https://example.com/'}"));
	assert_canon(0, "{'type':'navigate','url':'https://example.com/'}");
	assert_ok(parse("{'type':'exec','argv':['ls','-l'],'stdin':'a\\u0000b'}"));
	cr_assert_str_eq(ad.name[0], "exec");
}

Test(detect, anthropic_block_input_and_openai)
{
	assert_ok(parse("{'type':'tool_use','id':'toolu_01','name':'computer',"
			"'input':{'action':'screenshot'}}"));
	cr_assert_eq(ad.wire, DG_WIRE_ANTHROPIC);
	cr_assert(ad.has_id);
	assert_ok(parse("{'action':'screenshot'}"));
	cr_assert_eq(ad.wire, DG_WIRE_ANTHROPIC);
	cr_assert_not(ad.has_id);
	cr_assert_str_eq(ad.call_id, "");
	assert_ok(parse("{'type':'computer_call','id':'cu_1','call_id':'call_1',"
			"'action':{'type':'screenshot'},'pending_safety_checks':[],"
			"'status':'completed'}"));
	cr_assert_eq(ad.wire, DG_WIRE_OPENAI);
	cr_assert_str_eq(dg_wire_name(ad.wire), "openai");
	cr_assert_str_eq(dg_wire_name(DG_WIRE_CANONICAL), "canonical");
	cr_assert_str_eq(dg_wire_name(DG_WIRE_ANTHROPIC), "anthropic");
	cr_assert_str_eq(dg_wire_name(DG_WIRE_UNKNOWN), "unknown");
}

Test(detect, what_is_not_a_message)
{
	assert_refused(parse("[1,2]"), -EINVAL, "message: an array is not a JSON object");
	cr_assert_eq(ad.wire, DG_WIRE_UNKNOWN);
	/* jansson decodes only objects and arrays at the top. */
	assert_refused_prefix(parse("'click'"), -EINVAL, "message: invalid JSON");
	assert_refused(parse("{}"), -EINVAL,
		       "message: neither \"type\" (a canonical action, \"tool_use\" or "
		       "\"computer_call\") nor \"action\" (an Anthropic computer tool input)");
	assert_refused(parse("{'type':'message','role':'assistant'}"), -EINVAL,
		       "message.type: unknown type \"message\" (a canonical action such as "
		       "\"click\", an Anthropic \"tool_use\" block or an OpenAI \"computer_call\" "
		       "item)");
	assert_refused(parse("{'type':7}"), -EINVAL, "message.type: 7 is not a string");
	assert_refused(parse("{'type':null,'action':'screenshot'}"), -EINVAL,
		       "message.type: null is not a string");
	assert_refused_prefix(parse("{'type':'click',"), -EINVAL, "message: invalid JSON at line 1");
	assert_refused_prefix(parse("{'action':'screenshot','action':'zoom'}"), -EINVAL,
			      "message: duplicated field");
	assert_refused(parse_raw_sc(&scaled, NULL, 0), -EINVAL, "message: no text");
}

Test(detect, a_bare_openai_action_is_read_as_canonical)
{
	/* Documented: OpenAI speakers send the computer_call item. A bare
	 * OpenAI click reads as a canonical click (desktop coordinates), and
	 * "wheel" is no canonical button. */
	assert_refused(parse("{'type':'click','button':'wheel','x':1,'y':1}"), -EINVAL,
		       "action.button: unknown button \"wheel\" (allowed: left, middle, right, "
		       "back, forward)");
	cr_assert_eq(ad.wire, DG_WIRE_CANONICAL);
}

Test(detect, bad_scale_or_cursor_is_a_caller_bug)
{
	struct dg_adapt_scale sc = {0, 800, 0, 0, NULL};
	const char *m = "{\"action\":\"screenshot\"}";
	dg_adapted_free(&ad);
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &sc, 0, 0, &ad, &err), -EINVAL);
	sc = (struct dg_adapt_scale){DW, DH, DG_ACTION_SCREEN_MAX + 1, 10, NULL};
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &sc, 0, 0, &ad, &err), -EINVAL);
	sc = (struct dg_adapt_scale){DW, DH, 10, 0, NULL};
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &sc, 0, 0, &ad, &err), -EINVAL);
	cr_assert_eq(dg_adapt_parse(m, strlen(m), NULL, 0, 0, &ad, &err), -EINVAL);
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &scaled, DW, 0, &ad, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "adapt: cursor (1280, 0) is off the desktop (1280x800)");
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &scaled, 0, -1, &ad, &err), -EINVAL);
	cr_assert_eq(dg_adapt_parse(m, strlen(m), &scaled, DW - 1, DH - 1, &ad, &err), 0, "%s",
		     err.msg);
}

/* ---- Anthropic ---------------------------------------------------------------------- */

/* A tool_use block as the Messages API returns it, around input (' for "). */
static int anthropic_block(const char *input)
{
	char *m = NULL;
	cr_assert(asprintf(&m, "{'type':'tool_use','id':'toolu_01A09q90qw90lq917835lq9',"
			       "'name':'computer','input':%s}", input) > 0);
	int rc = parse(m);
	free(m);
	return rc;
}

Test(anthropic, tool_use_block_exact_shape)
{
	/* The block as content[i] of a Messages API response, verbatim. */
	assert_ok(parse("{\n  'type': 'tool_use',\n  'id': 'toolu_01A09q90qw90lq917835lq9',\n"
			"  'name': 'computer',\n  'input': {'action': 'left_click', "
			"'coordinate': [512, 320]}\n}"));
	cr_assert_eq(ad.wire, DG_WIRE_ANTHROPIC);
	cr_assert(ad.has_id);
	cr_assert_str_eq(ad.call_id, "toolu_01A09q90qw90lq917835lq9");
	cr_assert_eq(ad.n, 1);
	cr_assert_not(ad.batched);
	cr_assert_str_eq(ad.name[0], "left_click");
	/* 512 * 1.25 = 640, 320 * 1.25 = 400 */
	assert_canon(0, "{'button':'left','count':1,'modifiers':[],'type':'click','x':640,'y':400}");
	cr_assert(json_equal(ad.wire_actions[0], json_object_get(ad.raw, "input")));
}

/* computer_20241022: key, type, mouse_move, left_click, left_click_drag,
 * right_click, middle_click, double_click, screenshot, cursor_position. */
Test(anthropic, v20241022_actions)
{
	assert_ok(anthropic_block("{'action':'key','text':'Return'}"));
	assert_canon(0, "{'keys':'Return','type':'key'}");
	assert_ok(anthropic_block("{'action':'key','text':'ctrl+s'}"));
	assert_canon(0, "{'keys':'Control_L+s','type':'key'}");
	assert_ok(anthropic_block("{'action':'type','text':'Hello, world!\\nsecond line'}"));
	assert_canon(0, "{'text':'Hello, world!\\nsecond line','type':'type'}");
	assert_ok(anthropic_block("{'action':'mouse_move','coordinate':[100,40]}"));
	assert_canon(0, "{'modifiers':[],'type':'move','x':125,'y':50}");
	/* 20241022's left_click takes no coordinate: it clicks at the pointer. */
	assert_ok(anthropic_block("{'action':'left_click'}"));
	assert_same(0, "{'type':'click','x':100,'y':200}");
	/* 20241022's drag goes from the pointer to coordinate. */
	assert_ok(anthropic_block("{'action':'left_click_drag','coordinate':[800,600]}"));
	assert_same(0, "{'type':'drag','path':[[100,200],[1000,750]]}");
	assert_ok(anthropic_block("{'action':'right_click'}"));
	assert_same(0, "{'type':'click','button':'right','x':100,'y':200}");
	assert_ok(anthropic_block("{'action':'middle_click','coordinate':[4,4]}"));
	assert_same(0, "{'type':'click','button':'middle','x':5,'y':5}");
	assert_ok(anthropic_block("{'action':'double_click','coordinate':[8,8]}"));
	assert_same(0, "{'type':'click','count':2,'x':10,'y':10}");
	assert_ok(anthropic_block("{'action':'screenshot'}"));
	assert_canon(0, "{'type':'screenshot'}");
	assert_ok(anthropic_block("{'action':'cursor_position'}"));
	assert_canon(0, "{'type':'cursor_position'}");
	cr_assert_str_eq(ad.name[0], "cursor_position");
}

/* computer_20250124: scroll, left_mouse_down/up, hold_key, wait,
 * triple_click, coordinates on clicks, text as modifiers. */
Test(anthropic, v20250124_scroll)
{
	assert_ok(anthropic_block("{'action':'scroll','coordinate':[400,300],"
				  "'scroll_direction':'down','scroll_amount':3}"));
	assert_canon(0, "{'dx':0,'dy':3,'modifiers':[],'type':'scroll','x':500,'y':375}");
	assert_ok(anthropic_block("{'action':'scroll','coordinate':[400,300],"
				  "'scroll_direction':'up','scroll_amount':5}"));
	assert_same(0, "{'type':'scroll','x':500,'y':375,'dy':-5}");
	assert_ok(anthropic_block("{'action':'scroll','coordinate':[0,0],"
				  "'scroll_direction':'left','scroll_amount':2}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dx':-2}");
	assert_ok(anthropic_block("{'action':'scroll','coordinate':[0,0],"
				  "'scroll_direction':'right','scroll_amount':1}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dx':1}");
	/* Without coordinate: at the pointer. With text: modifiers held. */
	assert_ok(anthropic_block("{'action':'scroll','scroll_direction':'down',"
				  "'scroll_amount':10,'text':'ctrl'}"));
	assert_canon(0, "{'dx':0,'dy':10,'modifiers':['ctrl'],'type':'scroll','x':100,'y':200}");
}

Test(anthropic, v20250124_buttons_and_keys)
{
	assert_ok(anthropic_block("{'action':'left_mouse_down'}"));
	assert_canon(0, "{'button':'left','type':'mouse_down','x':100,'y':200}");
	assert_ok(anthropic_block("{'action':'left_mouse_up','coordinate':[80,80]}"));
	assert_canon(0, "{'button':'left','type':'mouse_up','x':100,'y':100}");
	assert_ok(anthropic_block("{'action':'hold_key','text':'shift','duration':1.5}"));
	assert_canon(0, "{'keys':'Shift_L','ms':1500,'type':'hold_key'}");
	assert_ok(anthropic_block("{'action':'hold_key','text':'ctrl+alt','duration':2}"));
	assert_canon(0, "{'keys':'Control_L+Alt_L','ms':2000,'type':'hold_key'}");
	assert_ok(anthropic_block("{'action':'wait','duration':2}"));
	assert_canon(0, "{'ms':2000,'type':'wait'}");
	assert_ok(anthropic_block("{'action':'wait','duration':0.25}"));
	assert_canon(0, "{'ms':250,'type':'wait'}");
	assert_ok(anthropic_block("{'action':'triple_click','coordinate':[100,100]}"));
	assert_same(0, "{'type':'click','count':3,'x':125,'y':125}");
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[100,100],'text':'shift'}"));
	assert_canon(0, "{'button':'left','count':1,'modifiers':['shift'],'type':'click',"
			"'x':125,'y':125}");
	assert_ok(anthropic_block("{'action':'double_click','text':'ctrl+shift'}"));
	assert_same(0, "{'type':'click','count':2,'x':100,'y':200,'modifiers':['ctrl','shift']}");
	assert_ok(anthropic_block("{'action':'right_click','coordinate':[1,1],'text':'super'}"));
	assert_same(0, "{'type':'click','button':'right','x':1,'y':1,'modifiers':['super']}");
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[1,1],'text':'meta+alt'}"));
	assert_same(0, "{'type':'click','x':1,'y':1,'modifiers':['alt','meta']}");
	assert_ok(anthropic_block("{'action':'left_click_drag','start_coordinate':[10,10],"
				  "'coordinate':[20,30],'text':'alt'}"));
	assert_canon(0, "{'button':'left','modifiers':['alt'],'path':[[13,13],[25,38]],"
			"'type':'drag'}");
}

/* computer_20251124: zoom. */
Test(anthropic, v20251124_zoom)
{
	assert_ok(anthropic_block("{'action':'zoom','region':[0,0,1024,640]}"));
	assert_canon(0, "{'region':[0,0,1280,800],'type':'zoom'}");
	assert_ok(anthropic_block("{'action':'zoom','region':[100,50,300,250]}"));
	assert_canon(0, "{'region':[125,63,375,313],'type':'zoom'}");
	cr_assert_str_eq(ad.name[0], "zoom");
}

Test(anthropic, xdotool_key_names)
{
	static const struct {
		const char *text, *same;
	} cases[] = {
		{"ctrl+shift+t", "Control_L+Shift_L+t"},
		{"Return", "Return"},
		{"super", "Super_L"},
		{"Page_Down", "Page_Down"},
		{"KP_0", "KP_0"},
		{"space", "space"},
		{"alt+Tab", "Alt_L+Tab"},
		{"ctrl+a BackSpace", "Control_L+a BackSpace"},
		{"cmd+c", "Super_L+c"},
		{"Up", "Up"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char in[128], want[128];
		snprintf(in, sizeof(in), "{'action':'key','text':'%s'}", cases[i].text);
		snprintf(want, sizeof(want), "{'type':'key','keys':'%s'}", cases[i].same);
		assert_ok(anthropic_block(in));
		assert_same(0, want);
	}
	assert_ok(anthropic_block("{'action':'key','text':'ctrl+shift+t'}"));
	assert_canon(0, "{'keys':'Control_L+Shift_L+t','type':'key'}");
}

Test(anthropic, unknown_actions_and_fields)
{
	assert_refused(anthropic_block("{'action':'clik','coordinate':[1,1]}"), -EINVAL,
		       "anthropic.input.action: unknown action \"clik\"");
	/* A valid block is still answerable after the error. */
	cr_assert_eq(ad.wire, DG_WIRE_ANTHROPIC);
	cr_assert(ad.has_id);
	cr_assert_str_eq(ad.call_id, "toolu_01A09q90qw90lq917835lq9");
	assert_refused(parse("{'action':'navigate','url':'https://x/'}"), -EINVAL,
		       "anthropic.input.action: unknown action \"navigate\"");
	assert_refused(anthropic_block("{'action':'key','text':'a','coordinate':[1,1]}"), -EINVAL,
		       "anthropic.input: unknown field \"coordinate\" for key (allowed: text, repeat)");
	assert_refused(anthropic_block("{'action':'mouse_move','coordinate':[1,1],'text':'shift'}"),
		       -EINVAL,
		       "anthropic.input: unknown field \"text\" for mouse_move (allowed: coordinate)");
	assert_refused(anthropic_block("{'action':'screenshot','butto':1}"), -EINVAL,
		       "anthropic.input: unknown field \"butto\" (screenshot takes no fields)");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,1],'repeat':2}"),
		       -EINVAL,
		       "anthropic.input: unknown field \"repeat\" for left_click (allowed: "
		       "coordinate, text)");
	assert_refused(anthropic_block("{'coordinate':[1,1]}"), -EINVAL,
		       "anthropic.input.action: missing (what to do: left_click, type, key, "
		       "screenshot, ...)");
	assert_refused(anthropic_block("{'action':'key'}"), -EINVAL,
		       "anthropic.input.text: required for key");
	assert_refused(anthropic_block("{'action':'mouse_move'}"), -EINVAL,
		       "anthropic.input.coordinate: required for mouse_move");
	assert_refused(anthropic_block("{'action':'left_click_drag','start_coordinate':[1,1]}"),
		       -EINVAL, "anthropic.input.coordinate: required for left_click_drag");
	assert_refused(anthropic_block("{'action':'scroll','coordinate':[1,1],'scroll_amount':1}"),
		       -EINVAL, "anthropic.input.scroll_direction: required for scroll");
	assert_refused(anthropic_block("{'action':'hold_key','text':'a'}"), -EINVAL,
		       "anthropic.input.duration: required for hold_key");
	assert_refused(anthropic_block("{'action':'zoom'}"), -EINVAL,
		       "anthropic.input.region: required for zoom");
}

Test(anthropic, null_is_absent)
{
	/* What an SDK's dump of a partly set model looks like. */
	assert_ok(anthropic_block("{'action':'screenshot','coordinate':null,'text':null,"
				  "'duration':null,'scroll_direction':null}"));
	assert_canon(0, "{'type':'screenshot'}");
	assert_ok(anthropic_block("{'action':'left_click','coordinate':null}"));
	assert_same(0, "{'type':'click','x':100,'y':200}");
	assert_refused(anthropic_block("{'action':'key','text':null}"), -EINVAL,
		       "anthropic.input.text: required for key");
}

Test(anthropic, wrong_types)
{
	assert_refused(anthropic_block("{'action':'left_click','coordinate':'512,320'}"), -EINVAL,
		       "anthropic.input.coordinate: \"512,320\" is not an [x, y] pair");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,2,3]}"), -EINVAL,
		       "anthropic.input.coordinate: an array is not an [x, y] pair");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':['1',2]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: \"1\" is not a number");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,true]}"), -EINVAL,
		       "anthropic.input.coordinate[1]: true is not a number");
	assert_refused(anthropic_block("{'action':'type','text':42}"), -EINVAL,
		       "anthropic.input.text: 42 is not a string");
	assert_refused(anthropic_block("{'action':'key','text':['ctrl','s']}"), -EINVAL,
		       "anthropic.input.text: an array is not a string");
	assert_refused(anthropic_block("{'action':'scroll','scroll_direction':'down',"
				       "'scroll_amount':'3'}"),
		       -EINVAL, "anthropic.input.scroll_amount: \"3\" is not a number");
	assert_refused(anthropic_block("{'action':'scroll','scroll_direction':'sideways',"
				       "'scroll_amount':3}"),
		       -EINVAL,
		       "anthropic.input.scroll_direction: unknown direction \"sideways\" (allowed: "
		       "up, down, left, right)");
	assert_refused(anthropic_block("{'action':'wait','duration':'2'}"), -EINVAL,
		       "anthropic.input.duration: \"2\" is not a number of seconds");
	assert_refused(anthropic_block("{'action':'zoom','region':[0,0,10]}"), -EINVAL,
		       "anthropic.input.region: an array is not an array [x1, y1, x2, y2]");
	assert_refused(anthropic_block("{'action':7}"), -EINVAL,
		       "anthropic.input.action: 7 is not a string");
	assert_refused_prefix(anthropic_block("[]"), -EINVAL,
			      "anthropic.input: an array is not a JSON object");
}

Test(anthropic, coordinates_off_the_model_display)
{
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1024,0]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: 1024 is off the display (width 1024)");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[0,640]}"), -EINVAL,
		       "anthropic.input.coordinate[1]: 640 is off the display (height 640)");
	assert_refused(anthropic_block("{'action':'mouse_move','coordinate':[-1,0]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: -1 is off the display (width 1024)");
	assert_refused(anthropic_block("{'action':'left_click_drag','start_coordinate':[0,9999],"
				       "'coordinate':[1,1]}"),
		       -EINVAL,
		       "anthropic.input.start_coordinate[1]: 9999 is off the display (height 640)");
	/* 1100 is on the desktop (1280) but off the model's display. */
	assert_refused(anthropic_block("{'action':'zoom','region':[0,0,1100,100]}"), -EINVAL,
		       "anthropic.input.region[2]: 1100 is off the display (width 1024)");
	assert_refused(anthropic_block("{'action':'zoom','region':[10,0,10,100]}"), -EINVAL,
		       "anthropic.input.region: x2 (10) must be greater than x1 (10)");
	assert_refused(anthropic_block("{'action':'zoom','region':[0,50,10,40]}"), -EINVAL,
		       "anthropic.input.region: y2 (40) must be greater than y1 (50)");
	assert_refused(anthropic_block("{'action':'zoom','region':[1024,0,1024,10]}"), -EINVAL,
		       "anthropic.input.region[0]: 1024 is off the display (width 1024)");
	/* The last pixel maps to the desktop's last pixel. */
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[1023,639]}"));
	assert_same(0, "{'type':'click','x':1279,'y':799}");
}

Test(anthropic, modifier_text)
{
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,1],'text':'a'}"),
		       -EINVAL,
		       "anthropic.input.text: a is not a modifier key (held during the action: ctrl, "
		       "shift, alt, super, meta)");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,1],"
				       "'text':'shift ctrl'}"),
		       -EINVAL,
		       "anthropic.input.text: modifiers held during the action are one chord "
		       "(\"shift\", \"ctrl+shift\"), got 2 chords");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,1],"
				       "'text':'shfit'}"),
		       -EINVAL, "anthropic.input.text: unknown key \"shfit\" in \"shfit\"");
	assert_refused(anthropic_block("{'action':'left_click','coordinate':[1,1],'text':''}"),
		       -EINVAL, "anthropic.input.text: no keys in \"\"");
	/* Right-hand modifiers count too. */
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[1,1],"
				  "'text':'Shift_R+Control_R'}"));
	assert_same(0, "{'type':'click','x':1,'y':1,'modifiers':['ctrl','shift']}");
}

Test(anthropic, key_errors_name_the_wire_field)
{
	assert_refused(anthropic_block("{'action':'key','text':'ctrl+Retrun'}"), -EINVAL,
		       "anthropic.input.text: unknown key \"Retrun\" in \"ctrl+Retrun\"");
	assert_refused(anthropic_block("{'action':'hold_key','text':'a b','duration':1}"),
		       -EINVAL, "anthropic.input.text: hold_key holds one chord, got 2");
	assert_refused(anthropic_block("{'action':'type','text':''}"), -EINVAL,
		       "anthropic.input.text: empty (type needs at least one character)");
	assert_refused_prefix(anthropic_block("{'action':'type','text':'a\\u0007b'}"), -EINVAL,
			      "anthropic.input.text: ");
}

Test(anthropic, block_envelope)
{
	assert_refused(parse("{'type':'tool_use','id':'toolu_1','name':'str_replace_editor',"
			     "'input':{'action':'screenshot'}}"),
		       -EINVAL,
		       "anthropic.name: \"str_replace_editor\" is not \"computer\" (deskgate is the "
		       "computer tool only)");
	assert_refused(parse("{'type':'tool_use','name':'computer','input':{'action':'screenshot'}}"),
		       -EINVAL, "anthropic.id: required for tool_use");
	cr_assert_not(ad.has_id);
	assert_refused(parse("{'type':'tool_use','id':'toolu_1','name':'computer'}"), -EINVAL,
		       "anthropic.input: required for tool_use");
	assert_refused(parse("{'type':'tool_use','id':'toolu_1','input':{'action':'screenshot'}}"),
		       -EINVAL, "anthropic.name: required for tool_use");
	assert_refused(parse("{'type':'tool_use','id':'toolu_1','name':'computer',"
			     "'input':{'action':'screenshot'},'cache_control':{}}"),
		       -EINVAL, "anthropic.cache_control.type: required (\"ephemeral\")");
	cr_assert(ad.has_id, "the id is read first, so the refusal can be answered");
	assert_refused(parse("{'type':'tool_use','id':'toolu 1','name':'computer',"
			     "'input':{'action':'screenshot'}}"),
		       -EINVAL,
		       "anthropic.id: \"toolu 1\" has a byte 0x20 at 5 (ids are printable ASCII "
		       "without spaces)");
	cr_assert_not(ad.has_id);
	assert_refused(parse("{'type':'tool_use','id':'','name':'computer',"
			     "'input':{'action':'screenshot'}}"),
		       -EINVAL, "anthropic.id: empty");
	assert_refused(parse("{'type':'tool_use','id':5,'name':'computer',"
			     "'input':{'action':'screenshot'}}"),
		       -EINVAL, "anthropic.id: 5 is not a string");
	assert_refused(parse("{'type':'tool_use','id':'toolu_\\u00e9','name':'computer',"
			     "'input':{'action':'screenshot'}}"),
		       -EINVAL,
		       "anthropic.id: \"toolu_\\xc3\\xa9\" has a byte 0xC3 at 6 (ids are printable "
		       "ASCII without spaces)");
}

/* ---- OpenAI ---------------------------------------------------------------------- */

static const struct dg_adapt_scale xga = {1024, 768, 0, 0, NULL};

/* A computer_call item, preview form, around one action (' for "). */
static int openai_preview(const struct dg_adapt_scale *sc, const char *action)
{
	char *m = NULL;
	cr_assert(asprintf(&m, "{'type':'computer_call','id':'cu_67cc2b','call_id':'call_zw3',"
			       "'action':%s,'pending_safety_checks':[],'status':'completed'}",
			   action) > 0);
	int rc = parse_sc(sc, m);
	free(m);
	return rc;
}

static int openai_batch(const struct dg_adapt_scale *sc, const char *actions)
{
	char *m = NULL;
	cr_assert(asprintf(&m, "{'type':'computer_call','id':'cu_1','call_id':'call_b',"
			       "'actions':%s,'pending_safety_checks':[],'status':'completed'}",
			   actions) > 0);
	int rc = parse_sc(sc, m);
	free(m);
	return rc;
}

Test(openai, preview_item_exact_shape)
{
	/* An output item of a Responses API response, verbatim. */
	assert_ok(parse_sc(&xga, "{\n  'type': 'computer_call',\n  'id': "
				 "'cu_67cc2b8c1c5c8190a11cfea9df2f1e7b',\n  'call_id': "
				 "'call_zw3GsZLuI0x5hXp1Cmj2y9Hk',\n  'action': {\n    'type': "
				 "'click',\n    'button': 'left',\n    'x': 156,\n    'y': 50\n  },\n"
				 "  'pending_safety_checks': [],\n  'status': 'completed'\n}"));
	cr_assert_eq(ad.wire, DG_WIRE_OPENAI);
	cr_assert(ad.has_id);
	cr_assert_str_eq(ad.call_id, "call_zw3GsZLuI0x5hXp1Cmj2y9Hk");
	cr_assert_not(ad.batched);
	cr_assert_eq(ad.n, 1);
	cr_assert_str_eq(ad.name[0], "click");
	assert_canon(0, "{'button':'left','count':1,'modifiers':[],'type':'click','x':156,'y':50}");
	cr_assert(json_is_array(ad.safety_checks));
	cr_assert_eq(json_array_size(ad.safety_checks), 0);
	cr_assert(json_equal(ad.wire_actions[0], json_object_get(ad.raw, "action")));
}

Test(openai, every_action_type)
{
	assert_ok(openai_preview(&xga, "{'type':'click','button':'right','x':1,'y':2}"));
	assert_same(0, "{'type':'click','button':'right','x':1,'y':2}");
	assert_ok(openai_preview(&xga, "{'type':'click','button':'wheel','x':1,'y':2}"));
	assert_same(0, "{'type':'click','button':'middle','x':1,'y':2}");
	assert_ok(openai_preview(&xga, "{'type':'click','button':'back','x':1,'y':2}"));
	assert_same(0, "{'type':'back'}"); /* history: X gets no buttons 8 and 9 */
	assert_ok(openai_preview(&xga, "{'type':'click','button':'forward','x':1,'y':2}"));
	assert_same(0, "{'type':'forward'}");
	assert_ok(openai_preview(&xga, "{'type':'double_click','x':300,'y':400}"));
	assert_canon(0, "{'button':'left','count':2,'modifiers':[],'type':'click','x':300,'y':400}");
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':500,'y':400,'scroll_x':0,"
				       "'scroll_y':300}"));
	assert_canon(0, "{'dx':0,'dy':3,'modifiers':[],'type':'scroll','x':500,'y':400}");
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':500,'y':400,'scroll_x':-200,"
				       "'scroll_y':-250}"));
	assert_same(0, "{'type':'scroll','x':500,'y':400,'dx':-2,'dy':-3}");
	assert_ok(openai_preview(&xga, "{'type':'type','text':'hello \\u00e4\\ud83d\\ude00'}"));
	assert_canon(0, "{'text':'hello \xc3\xa4\xf0\x9f\x98\x80','type':'type'}");
	assert_ok(openai_preview(&xga, "{'type':'keypress','keys':['CTRL','A']}"));
	assert_canon(0, "{'keys':'Control_L+a','type':'key'}");
	assert_ok(openai_preview(&xga, "{'type':'wait'}"));
	assert_canon(0, "{'ms':1000,'type':'wait'}");
	assert_ok(openai_preview(&xga, "{'type':'screenshot'}"));
	assert_canon(0, "{'type':'screenshot'}");
	assert_ok(openai_preview(&xga, "{'type':'move','x':10,'y':20}"));
	assert_canon(0, "{'modifiers':[],'type':'move','x':10,'y':20}");
	assert_ok(openai_preview(&xga, "{'type':'drag','path':[{'x':10,'y':20},{'x':30,'y':40},"
				       "{'x':50,'y':60}]}"));
	assert_canon(0, "{'button':'left','modifiers':[],'path':[[10,20],[30,40],[50,60]],"
			"'type':'drag'}");
	cr_assert_str_eq(ad.name[0], "drag");
}

Test(openai, key_names)
{
	static const struct {
		const char *keys, *same;
	} cases[] = {
		{"['CTRL','C']", "Control_L+c"},
		{"['ENTER']", "Return"},
		{"['ARROWLEFT']", "Left"},
		{"['ctrl','shift','t']", "Control_L+Shift_L+t"},
		{"['CTRL+C']", "Control_L+c"},
		{"['ALT','F4']", "Alt_L+F4"},
		{"['META','L']", "Super_L+l"},
		{"['ESC']", "Escape"},
		{"['SPACE']", "space"},
		{"['+']", "plus"},
		{"['CTRL','+']", "Control_L+plus"},
		{"['PAGEDOWN']", "Page_Down"},
		{"['BACKSPACE']", "BackSpace"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char in[128], want[128];
		snprintf(in, sizeof(in), "{'type':'keypress','keys':%s}", cases[i].keys);
		snprintf(want, sizeof(want), "{'type':'key','keys':'%s'}", cases[i].same);
		assert_ok(openai_preview(&xga, in));
		assert_same(0, want);
	}
	assert_ok(openai_preview(&xga, "{'type':'keypress','keys':['CTRL','C']}"));
	assert_canon(0, "{'keys':'Control_L+c','type':'key'}");
}

Test(openai, key_errors)
{
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['CTLR','C']}"), -EINVAL,
		       "openai.action.keys[0]: unknown key \"CTLR\"");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['A','a']}"), -EINVAL,
		       "openai.action.keys[1]: key \"a\" is given twice");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':[]}"), -EINVAL,
		       "openai.action.keys: empty (keypress needs at least one key)");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':'CTRL+C'}"), -EINVAL,
		       "openai.action.keys: \"CTRL+C\" is not an array of key names");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':[17]}"), -EINVAL,
		       "openai.action.keys[0]: 17 is not a string");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['']}"), -EINVAL,
		       "openai.action.keys[0]: empty key name");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['CTRL++']}"), -EINVAL,
		       "openai.action.keys[0]: empty key name in \"CTRL++\"");
	assert_refused(openai_preview(&xga, "{'type':'click','button':'left','x':1,'y':1,"
					    "'keys':['A']}"),
		       -EINVAL,
		       "openai.action.keys[0]: \"A\" is not a modifier key (held during the action: "
		       "CTRL, SHIFT, ALT, META)");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['CTRL','A\\u0000']}"),
		       -EINVAL, "openai.action.keys[1]: contains NUL");
}

Test(openai, batched_with_modifiers)
{
	assert_ok(openai_batch(&xga,
			       "[{'type':'click','button':'left','x':100,'y':200,'keys':['SHIFT']},"
			       "{'type':'keypress','keys':['CTRL','S']},"
			       "{'type':'type','text':'report.txt'},"
			       "{'type':'scroll','x':10,'y':10,'scroll_x':0,'scroll_y':-500,"
			       "'keys':['CTRL']},"
			       "{'type':'move','x':5,'y':6,'keys':['ALT','META']},"
			       "{'type':'drag','path':[{'x':1,'y':1},{'x':9,'y':9}],'keys':['SHIFT']},"
			       "{'type':'double_click','x':7,'y':7,'keys':['CONTROL','SHIFT']},"
			       "{'type':'wait'},{'type':'screenshot'}]"));
	cr_assert(ad.batched);
	cr_assert_eq(ad.n, 9);
	cr_assert_str_eq(ad.call_id, "call_b");
	assert_canon(0, "{'button':'left','count':1,'modifiers':['shift'],'type':'click',"
			"'x':100,'y':200}");
	assert_canon(1, "{'keys':'Control_L+s','type':'key'}");
	assert_canon(2, "{'text':'report.txt','type':'type'}");
	assert_canon(3, "{'dx':0,'dy':-5,'modifiers':['ctrl'],'type':'scroll','x':10,'y':10}");
	assert_canon(4, "{'modifiers':['alt','super'],'type':'move','x':5,'y':6}");
	assert_same(5, "{'type':'drag','path':[[1,1],[9,9]],'modifiers':['shift']}");
	assert_same(6, "{'type':'click','count':2,'x':7,'y':7,'modifiers':['ctrl','shift']}");
	assert_canon(7, "{'ms':1000,'type':'wait'}");
	assert_canon(8, "{'type':'screenshot'}");
	static const char *const names[] = {"click", "keypress", "type", "scroll", "move",
					    "drag", "double_click", "wait", "screenshot"};
	for (int i = 0; i < 9; i++) {
		cr_assert_str_eq(ad.name[i], names[i]);
		cr_assert(json_equal(ad.wire_actions[i],
				     json_array_get(json_object_get(ad.raw, "actions"), (size_t)i)));
	}
	/* keys null or empty on a pointer action: no modifiers. */
	assert_ok(openai_batch(&xga, "[{'type':'click','button':'left','x':1,'y':1,'keys':null},"
				     "{'type':'move','x':1,'y':1,'keys':[]}]"));
	assert_same(0, "{'type':'click','x':1,'y':1}");
	assert_same(1, "{'type':'move','x':1,'y':1}");
}

Test(openai, batch_errors_name_the_action)
{
	assert_refused(openai_batch(&xga, "[{'type':'screenshot'},{'type':'triple_click','x':1,"
					  "'y':1}]"),
		       -EINVAL, "openai.actions[1].type: unknown action \"triple_click\"");
	cr_assert(ad.has_id, "the call stays answerable");
	cr_assert_str_eq(ad.call_id, "call_b");
	cr_assert(json_is_array(ad.safety_checks));
	assert_refused(openai_batch(&xga, "[{'type':'screenshot'},{'type':'click','x':1,'y':1}]"),
		       -EINVAL, "openai.actions[1].button: required for click");
	assert_refused(openai_batch(&xga, "[{'type':'click','button':'middle','x':1,'y':1}]"),
		       -EINVAL,
		       "openai.actions[0].button: unknown button \"middle\" (allowed: left, right, "
		       "wheel, back, forward)");
	assert_refused(openai_batch(&xga, "[{'type':'move','x':'1','y':1}]"), -EINVAL,
		       "openai.actions[0].x: \"1\" is not a number");
	assert_refused(openai_batch(&xga, "[{'type':'move','x':1024,'y':1}]"), -EINVAL,
		       "openai.actions[0].x: 1024 is off the display (width 1024)");
	assert_refused(openai_batch(&xga, "[{'type':'wait','ms':500}]"), -EINVAL,
		       "openai.actions[0]: unknown field \"ms\" (wait takes no fields)");
	assert_refused(openai_batch(&xga, "[{'type':'type','text':'a','x':1}]"), -EINVAL,
		       "openai.actions[0]: unknown field \"x\" for type (allowed: text)");
	assert_refused(openai_batch(&xga, "[{'type':'type'}]"), -EINVAL,
		       "openai.actions[0].text: required for type");
	assert_refused(openai_batch(&xga, "[{'type':'type','text':''}]"), -EINVAL,
		       "openai.actions[0].text: empty (type needs at least one character)");
	assert_refused(openai_batch(&xga, "['click']"), -EINVAL,
		       "openai.actions[0]: \"click\" is not a JSON object");
	assert_refused(openai_batch(&xga, "[{'button':'left'}]"), -EINVAL,
		       "openai.actions[0].type: missing (what to do: click, type, keypress, "
		       "screenshot, ...)");
	assert_refused(openai_batch(&xga, "[]"), -EINVAL, "openai.actions: empty");
	assert_refused(openai_batch(&xga, "{'type':'click'}"), -EINVAL,
		       "openai.actions: an object is not an array of actions");
}

Test(openai, drag_paths)
{
	assert_refused(openai_preview(&xga, "{'type':'drag','path':[{'x':1,'y':1}]}"), -EINVAL,
		       "openai.action.path: 1 points; a drag takes 2 to 1024");
	assert_refused(openai_preview(&xga, "{'type':'drag','path':[[1,1],[2,2]]}"), -EINVAL,
		       "openai.action.path[0]: an array is not an {x, y} point");
	assert_refused(openai_preview(&xga, "{'type':'drag','path':[{'x':1,'y':1},"
					    "{'x':2,'y':2,'z':3}]}"),
		       -EINVAL, "openai.action.path[1]: unknown field \"z\" in a point (allowed: x, y)");
	assert_refused(openai_preview(&xga, "{'type':'drag','path':[{'x':1,'y':1},{'x':2}]}"),
		       -EINVAL, "openai.action.path[1]: a point needs x and y");
	assert_refused(openai_preview(&xga, "{'type':'drag','path':[{'x':1,'y':1},"
					    "{'x':2,'y':768}]}"),
		       -EINVAL, "openai.action.path[1].y: 768 is off the display (height 768)");
	assert_refused(openai_preview(&xga, "{'type':'drag','path':{}}"), -EINVAL,
		       "openai.action.path: an object is not an array of {x, y} points");
}

Test(openai, envelope)
{
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1',"
				      "'action':{'type':'screenshot'}}"),
		       -EINVAL, "openai.call_id: required for computer_call");
	cr_assert_eq(ad.wire, DG_WIRE_OPENAI);
	cr_assert_not(ad.has_id);
	assert_refused(parse_sc(&xga, "{'type':'computer_call','call_id':'call_1',"
				      "'action':{'type':'screenshot'}}"),
		       -EINVAL, "openai.id: required for computer_call");
	cr_assert(ad.has_id);
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1'}"),
		       -EINVAL, "openai.action: required (or actions, batched)");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},'actions':[]}"),
		       -EINVAL, "openai: both action and actions (give one)");
	/* The SDK's dump: the form not used is null. */
	assert_ok(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				 "'action':null,'actions':[{'type':'screenshot'}],"
				 "'pending_safety_checks':null,'status':'in_progress'}"));
	cr_assert(ad.batched);
	cr_assert_eq(json_array_size(ad.safety_checks), 0);
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},'status':'done'}"),
		       -EINVAL,
		       "openai.status: \"done\" is not a status (completed, in_progress, incomplete)");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},'role':'assistant'}"),
		       -EINVAL,
		       "openai: unknown field \"role\" for computer_call (allowed: id, call_id, "
		       "action, actions, pending_safety_checks, status)");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call\\n1',"
				      "'action':{'type':'screenshot'}}"),
		       -EINVAL,
		       "openai.call_id: \"call\\x0a1\" has a byte 0x0A at 4 (ids are printable ASCII "
		       "without spaces)");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':'click'}"),
		       -EINVAL, "openai.action: \"click\" is not a JSON object");
}

Test(openai, safety_checks_kept)
{
	assert_ok(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				 "'action':{'type':'click','button':'left','x':1,'y':1},"
				 "'pending_safety_checks':[{'id':'cu_sc_67cb','code':"
				 "'malicious_instructions','message':'We\\u0027ve detected "
				 "instructions that may cause your application to perform malicious "
				 "or unauthorized actions.'},{'id':'cu_sc_2','code':null}],"
				 "'status':'completed'}"));
	cr_assert_eq(json_array_size(ad.safety_checks), 2);
	json_t *want = json_loads("[{\"id\":\"cu_sc_67cb\",\"code\":\"malicious_instructions\","
				  "\"message\":\"We've detected instructions that may cause your "
				  "application to perform malicious or unauthorized actions.\"},"
				  "{\"id\":\"cu_sc_2\"}]",
				  0, NULL);
	cr_assert(json_equal(ad.safety_checks, want));
	json_decref(want);
}

Test(openai, safety_check_errors)
{
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},"
				      "'pending_safety_checks':[{'code':'x'}]}"),
		       -EINVAL, "openai.pending_safety_checks[0].id: required");
	cr_assert_null(ad.safety_checks);
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},"
				      "'pending_safety_checks':[{'id':'a','severity':'x'}]}"),
		       -EINVAL,
		       "openai.pending_safety_checks[0]: unknown field \"severity\" (allowed: id, "
		       "code, message)");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},"
				      "'pending_safety_checks':[{'id':'a','message':5}]}"),
		       -EINVAL, "openai.pending_safety_checks[0].message: 5 is not a string");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},"
				      "'pending_safety_checks':['a']}"),
		       -EINVAL, "openai.pending_safety_checks[0]: \"a\" is not an object");
	assert_refused(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_1',"
				      "'action':{'type':'screenshot'},"
				      "'pending_safety_checks':{}}"),
		       -EINVAL, "openai.pending_safety_checks: an object is not an array");
}

/* ---- scaling -------------------------------------------------------------------- */

Test(scale, rounds_to_nearest_halves_up)
{
	/* x 1.25: 1 -> 1.25 -> 1; 2 -> 2.5 -> 3; 3 -> 3.75 -> 4. */
	assert_ok(anthropic_block("{'action':'mouse_move','coordinate':[1,1]}"));
	assert_same(0, "{'type':'move','x':1,'y':1}");
	assert_ok(anthropic_block("{'action':'mouse_move','coordinate':[2,2]}"));
	assert_same(0, "{'type':'move','x':3,'y':3}");
	assert_ok(anthropic_block("{'action':'mouse_move','coordinate':[3,3]}"));
	assert_same(0, "{'type':'move','x':4,'y':4}");
	assert_ok(anthropic_block("{'action':'mouse_move','coordinate':[0,0]}"));
	assert_same(0, "{'type':'move','x':0,'y':0}");
}

Test(scale, wide_model_to_720p)
{
	/* The model told 1366x768, the desktop 1280x720. */
	struct dg_adapt_scale sc = {1280, 720, 1366, 768, NULL};
	/* 1365 * 1280 / 1366 = 1279.06; 683 -> 640.0; 767 * 720 / 768 = 719.06 */
	assert_ok(parse_sc(&sc, "{'action':'left_click','coordinate':[1365,767]}"));
	assert_same(0, "{'type':'click','x':1279,'y':719}");
	assert_ok(parse_sc(&sc, "{'action':'left_click','coordinate':[683,384]}"));
	assert_same(0, "{'type':'click','x':640,'y':360}");
	assert_refused(parse_sc(&sc, "{'action':'left_click','coordinate':[1366,0]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: 1366 is off the display (width 1366)");
	assert_refused(parse_sc(&sc, "{'action':'left_click','coordinate':[0,768]}"), -EINVAL,
		       "anthropic.input.coordinate[1]: 768 is off the display (height 768)");
}

Test(scale, model_larger_than_desktop_clamps)
{
	/* Down by 2: the model's last pixel 1279 -> 639.5 -> 640 -> clamped 639. */
	struct dg_adapt_scale sc = {640, 400, 1280, 800, NULL};
	assert_ok(parse_sc(&sc, "{'action':'left_click','coordinate':[1279,799]}"));
	assert_same(0, "{'type':'click','x':639,'y':399}");
	/* Up by 2, OpenAI, no clamping needed. */
	struct dg_adapt_scale up = {1280, 800, 640, 400, NULL};
	assert_ok(openai_preview(&up, "{'type':'move','x':639,'y':399}"));
	assert_same(0, "{'type':'move','x':1278,'y':798}");
	/* A thin zoom region folded onto one desktop pixel keeps one pixel:
	 * [1, 1, 2, 2] / 2 -> x1 = round(0.5) = 1, x2 = round(1.0) = 1 -> 2. */
	assert_ok(parse_sc(&sc, "{'action':'zoom','region':[1,1,2,2]}"));
	assert_canon(0, "{'region':[1,1,2,2],'type':'zoom'}");
	assert_ok(parse_sc(&sc, "{'action':'zoom','region':[0,0,1280,800]}"));
	assert_canon(0, "{'region':[0,0,640,400],'type':'zoom'}");
}

Test(scale, model_zero_means_same_as_desktop)
{
	assert_ok(parse_sc(&same, "{'action':'left_click','coordinate':[1279,799]}"));
	assert_same(0, "{'type':'click','x':1279,'y':799}");
	cr_assert_eq(ad.scale.model_w, DW);
	cr_assert_eq(ad.scale.model_h, DH);
}

Test(scale, openai_scroll_pixels_scale_then_notch)
{
	/* 400 model px * 1.25 = 500 desktop px = 5 notches; 40 px = 0.5 -> 1. */
	assert_ok(openai_preview(&scaled, "{'type':'scroll','x':512,'y':320,'scroll_x':40,"
					  "'scroll_y':400}"));
	assert_canon(0, "{'dx':1,'dy':5,'modifiers':[],'type':'scroll','x':640,'y':400}");
	/* Never 0 when the model asked for a scroll: 1 px -> 1 notch. */
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':0,'scroll_y':-1}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dy':-1}");
	/* 149 -> 1.49 -> 1; 150 -> 1.5 -> 2. */
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':149,'scroll_y':150}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dx':1,'dy':2}");
	assert_refused(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':0,"
					    "'scroll_y':0}"),
		       -EINVAL, "openai.action: scroll_x and scroll_y are both 0");
}

/* ---- limits -------------------------------------------------------------------- */

/* An OpenAI batch of n screenshot actions. */
static int batch_of(int n)
{
	size_t cap = (size_t)n * 32 + 256;
	char *m = malloc(cap), *p = m;
	cr_assert(m);
	p += sprintf(p, "{'type':'computer_call','id':'cu_1','call_id':'call_1','actions':[");
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s{'type':'screenshot'}", i ? "," : "");
	sprintf(p, "]}");
	int rc = parse_sc(&xga, m);
	free(m);
	return rc;
}

Test(limits, batch_length)
{
	assert_ok(batch_of(DG_ADAPT_ACTIONS_MAX));
	cr_assert_eq(ad.n, DG_ADAPT_ACTIONS_MAX);
	for (int i = 0; i < DG_ADAPT_ACTIONS_MAX; i++)
		cr_assert_str_eq(ad.name[i], "screenshot");
	assert_refused(batch_of(DG_ADAPT_ACTIONS_MAX + 1), -E2BIG,
		       "openai.actions: 65 actions is over the limit of 64");
	cr_assert(ad.has_id);
	assert_refused(batch_of(10000), -E2BIG,
		       "openai.actions: 10000 actions is over the limit of 64");
}

/* A message of exactly len bytes: an Anthropic screenshot input padded with
 * spaces. */
static int padded(size_t len)
{
	const char *m = "{\"action\":\"screenshot\"}";
	char *t = repeat(' ', len);
	memcpy(t, m, strlen(m));
	int rc = parse_raw_sc(&scaled, t, len);
	free(t);
	return rc;
}

Test(limits, message_size)
{
	assert_ok(padded(DG_ADAPT_JSON_MAX));
	assert_refused(padded(DG_ADAPT_JSON_MAX + 1), -E2BIG,
		       "message: 262145 bytes is over the limit of 262144 bytes");
	cr_assert_eq(ad.wire, DG_WIRE_UNKNOWN);
}

Test(limits, canonical_keeps_its_own_size)
{
	char *t = repeat(' ', DG_ACTION_JSON_MAX + 1);
	const char *m = "{\"type\":\"screenshot\"}";
	memcpy(t, m, strlen(m));
	assert_refused(parse_raw_sc(&scaled, t, DG_ACTION_JSON_MAX + 1), -E2BIG,
		       "action: 65537 bytes is over the limit of 65536 bytes");
	assert_ok(parse_raw_sc(&scaled, t, DG_ACTION_JSON_MAX));
	free(t);
}

/* An id of n bytes. */
static int with_id(size_t n, bool openai)
{
	char *id = repeat('a', n);
	int rc;
	if (openai)
		rc = parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'%s',"
				  "'action':{'type':'screenshot'}}", id);
	else
		rc = parsef(&scaled, "{'type':'tool_use','id':'%s','name':'computer',"
				     "'input':{'action':'screenshot'}}", id);
	free(id);
	return rc;
}

Test(limits, id_length)
{
	assert_ok(with_id(DG_ADAPT_ID_MAX, false));
	cr_assert_eq(strlen(ad.call_id), DG_ADAPT_ID_MAX);
	assert_refused(with_id(DG_ADAPT_ID_MAX + 1, false), -EINVAL,
		       "anthropic.id: 257 bytes is over the limit of 256 bytes");
	cr_assert_not(ad.has_id);
	assert_ok(with_id(DG_ADAPT_ID_MAX, true));
	cr_assert_eq(strlen(ad.call_id), DG_ADAPT_ID_MAX);
	assert_refused(with_id(DG_ADAPT_ID_MAX + 1, true), -EINVAL,
		       "openai.call_id: 257 bytes is over the limit of 256 bytes");
}

Test(limits, durations)
{
	assert_ok(anthropic_block("{'action':'wait','duration':60}"));
	assert_canon(0, "{'ms':60000,'type':'wait'}");
	/* Rounded to the millisecond before the limit is checked. */
	assert_ok(anthropic_block("{'action':'wait','duration':60.0004}"));
	assert_canon(0, "{'ms':60000,'type':'wait'}");
	assert_refused(anthropic_block("{'action':'wait','duration':60.001}"), -EINVAL,
		       "anthropic.input.duration: 60.001 seconds is over the limit of 60 seconds");
	assert_refused(anthropic_block("{'action':'wait','duration':1e300}"), -EINVAL,
		       "anthropic.input.duration: 1e+300 seconds is over the limit of 60 seconds");
	assert_refused(anthropic_block("{'action':'wait','duration':-1}"), -EINVAL,
		       "anthropic.input.duration: -1 seconds is negative");
	assert_ok(anthropic_block("{'action':'wait','duration':0}"));
	assert_canon(0, "{'ms':0,'type':'wait'}");
	assert_ok(anthropic_block("{'action':'hold_key','text':'a','duration':60}"));
	assert_canon(0, "{'keys':'a','ms':60000,'type':'hold_key'}");
	assert_refused(anthropic_block("{'action':'hold_key','text':'a','duration':61}"), -EINVAL,
		       "anthropic.input.duration: 61 seconds is over the limit of 60 seconds");
}

Test(limits, scroll_amount)
{
	assert_ok(anthropic_block("{'action':'scroll','scroll_direction':'up','scroll_amount':100}"));
	assert_same(0, "{'type':'scroll','x':100,'y':200,'dy':-100}");
	assert_refused(anthropic_block("{'action':'scroll','scroll_direction':'up',"
				       "'scroll_amount':101}"),
		       -EINVAL,
		       "anthropic.input.scroll_amount: 101 is out of range [1, 100] (wheel notches)");
	assert_refused(anthropic_block("{'action':'scroll','scroll_direction':'up',"
				       "'scroll_amount':0}"),
		       -EINVAL,
		       "anthropic.input.scroll_amount: 0 is out of range [1, 100] (wheel notches)");
	/* OpenAI: 10049 px -> 100.49 -> 100 notches; 10050 -> 101. */
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':0,"
				       "'scroll_y':10049}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dy':100}");
	assert_ok(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':-10049,"
				       "'scroll_y':0}"));
	assert_same(0, "{'type':'scroll','x':0,'y':0,'dx':-100}");
	assert_refused(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':0,"
					    "'scroll_y':10050}"),
		       -EINVAL,
		       "openai.action.scroll_y: 10050 pixels is 101 wheel notches, over the limit "
		       "of 100 (100 pixels a notch)");
	assert_refused_prefix(openai_preview(&xga, "{'type':'scroll','x':0,'y':0,'scroll_x':0,"
						   "'scroll_y':-9223372036854775808}"),
			      -EINVAL, "openai.action.scroll_y: -9223372036854775808 pixels is about");
}

Test(limits, text_and_keys)
{
	char *text = repeat('a', DG_ACTION_TEXT_MAX);
	assert_ok(parsef(&scaled, "{'action':'type','text':'%s'}", text));
	assert_ok(parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'c',"
			       "'action':{'type':'type','text':'%s'}}", text));
	free(text);
	text = repeat('a', DG_ACTION_TEXT_MAX + 1);
	assert_refused(parsef(&scaled, "{'action':'type','text':'%s'}", text), -EINVAL,
		       "anthropic.input.text: 16385 bytes is over the limit of 16384 bytes");
	assert_refused(parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'c',"
				    "'action':{'type':'type','text':'%s'}}", text),
		       -EINVAL, "openai.action.text: 16385 bytes is over the limit of 16384 bytes");
	free(text);
	/* A chord of DG_CHORD_MAX keys, then one more. */
	assert_ok(openai_preview(&xga, "{'type':'keypress','keys':['CTRL','SHIFT','ALT','META',"
				       "'A','B','C','D']}"));
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['CTRL','SHIFT','ALT',"
					    "'META','A','B','C','D','E']}"),
		       -EINVAL, "openai.action.keys: 9 keys is over the limit of 8 keys");
	assert_refused(openai_preview(&xga, "{'type':'keypress','keys':['CTRL+SHIFT+ALT+META',"
					    "'A+B+C+D+E']}"),
		       -EINVAL, "openai.action.keys: more than 8 keys");
}

Test(limits, drag_path_length)
{
	size_t cap = (DG_ACTION_PATH_MAX + 1) * 24 + 256;
	for (int n = DG_ACTION_PATH_MAX; n <= DG_ACTION_PATH_MAX + 1; n++) {
		char *m = malloc(cap), *p = m;
		p += sprintf(p, "{'type':'drag','path':[");
		for (int i = 0; i < n; i++)
			p += sprintf(p, "%s{'x':%d,'y':%d}", i ? "," : "", i % 1000, i % 700);
		sprintf(p, "]}");
		int rc = openai_preview(&xga, m);
		free(m);
		if (n == DG_ACTION_PATH_MAX) {
			assert_ok(rc);
			cr_assert_eq(json_array_size(json_object_get(ad.actions[0], "path")),
				     (size_t)DG_ACTION_PATH_MAX);
		} else {
			assert_refused(rc, -EINVAL,
				       "openai.action.path: 1025 points; a drag takes 2 to 1024");
		}
	}
}

Test(limits, safety_checks)
{
	for (int n = DG_ADAPT_SAFETY_MAX; n <= DG_ADAPT_SAFETY_MAX + 1; n++) {
		char *m = malloc(4096), *p = m;
		p += sprintf(p, "{'type':'computer_call','id':'cu','call_id':'c',"
				"'action':{'type':'screenshot'},'pending_safety_checks':[");
		for (int i = 0; i < n; i++)
			p += sprintf(p, "%s{'id':'sc_%d'}", i ? "," : "", i);
		sprintf(p, "]}");
		int rc = parse_sc(&xga, m);
		free(m);
		if (n == DG_ADAPT_SAFETY_MAX) {
			assert_ok(rc);
			cr_assert_eq(json_array_size(ad.safety_checks), (size_t)n);
		} else {
			assert_refused(rc, -E2BIG,
				       "openai.pending_safety_checks: 17 checks is over the limit of 16");
		}
	}
	char *msg = repeat('m', DG_ADAPT_SAFETY_TEXT_MAX);
	assert_ok(parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'c',"
			       "'action':{'type':'screenshot'},'pending_safety_checks':"
			       "[{'id':'a','message':'%s'}]}", msg));
	free(msg);
	msg = repeat('m', DG_ADAPT_SAFETY_TEXT_MAX + 1);
	assert_refused(parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'c',"
				    "'action':{'type':'screenshot'},'pending_safety_checks':"
				    "[{'id':'a','code':'%s'}]}", msg),
		       -EINVAL,
		       "openai.pending_safety_checks[0].code: 4097 bytes is over the limit of 4096 "
		       "bytes");
	free(msg);
}

/* ---- answers ------------------------------------------------------------------ */

/* Decodes standard base64 with OpenSSL (an independent decoder). */
static unsigned char *b64_decode(const char *s, size_t *out_len)
{
	size_t len = strlen(s);
	cr_assert_eq(len % 4, 0, "base64 length %zu", len);
	unsigned char *out = malloc(len / 4 * 3 + 1);
	cr_assert(out);
	int n = len ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)len) : 0;
	cr_assert(n >= 0, "not base64");
	size_t pad = len && s[len - 1] == '=' ? (s[len - 2] == '=' ? 2 : 1) : 0;
	*out_len = (size_t)n - pad;
	return out;
}

/* Builds the answer into ans, dumps and reloads it (as the agent would
 * read it) and returns the reloaded value (owned by ans afterwards). */
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

static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
			      'I', 'H', 'D', 'R', 0xff, 0xfe, 0x00, 0x7f};

static void assert_png(const char *b64)
{
	size_t n = 0;
	unsigned char *d = b64_decode(b64, &n);
	cr_assert_eq(n, sizeof(png));
	cr_assert_eq(memcmp(d, png, n), 0);
	free(d);
}

static const char *sget(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	cr_assert(json_is_string(v), "%s is not a string", key);
	return json_string_value(v);
}

Test(answer, anthropic_screenshot)
{
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[10,10]}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_eq(json_object_size(ans), 4);
	cr_assert_str_eq(sget(ans, "type"), "tool_result");
	cr_assert_str_eq(sget(ans, "tool_use_id"), "toolu_01A09q90qw90lq917835lq9");
	cr_assert(json_is_false(json_object_get(ans, "is_error")));
	json_t *content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 1);
	json_t *img = json_array_get(content, 0);
	cr_assert_eq(json_object_size(img), 2);
	cr_assert_str_eq(sget(img, "type"), "image");
	json_t *src = json_object_get(img, "source");
	cr_assert_eq(json_object_size(src), 3);
	cr_assert_str_eq(sget(src, "type"), "base64");
	cr_assert_str_eq(sget(src, "media_type"), "image/png");
	assert_png(sget(src, "data"));
}

Test(answer, anthropic_input_only_has_no_tool_use_id)
{
	assert_ok(parse("{'action':'screenshot'}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_null(json_object_get(ans, "tool_use_id"));
	cr_assert_str_eq(sget(ans, "type"), "tool_result");
	cr_assert_eq(json_object_size(ans), 3);
}

Test(answer, anthropic_cursor_position_in_model_space)
{
	assert_ok(anthropic_block("{'action':'cursor_position'}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .has_cursor = true, .cursor_x = 640,
				     .cursor_y = 400};
	assert_ok(answer(&o));
	json_t *content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 1);
	json_t *t = json_array_get(content, 0);
	cr_assert_eq(json_object_size(t), 2);
	cr_assert_str_eq(sget(t, "type"), "text");
	cr_assert_str_eq(sget(t, "text"), "X=512,Y=320");
	/* The desktop's last pixel is the model's last pixel; (1, 1) -> 0.8 -> 1. */
	o.cursor_x = DW - 1;
	o.cursor_y = DH - 1;
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "X=1023,Y=639");
	o.cursor_x = 1;
	o.cursor_y = 2;
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "X=1,Y=2");
	/* With a screenshot: the text first, then the image. */
	o.png = png;
	o.png_len = sizeof(png);
	assert_ok(answer(&o));
	content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 2);
	cr_assert_str_eq(sget(json_array_get(content, 0), "type"), "text");
	cr_assert_str_eq(sget(json_array_get(content, 1), "type"), "image");
	/* Caller bugs. */
	o.has_cursor = false;
	cr_assert_eq(answer(&o), -EINVAL);
	cr_assert_str_eq(err.msg, "answer: cursor_position ran but no cursor is given");
	o.has_cursor = true;
	o.cursor_x = DW;
	cr_assert_eq(answer(&o), -EINVAL);
}

Test(answer, anthropic_refused)
{
	assert_ok(anthropic_block("{'action':'left_click','coordinate':[10,10]}"));
	struct dg_adapt_outcome o = {.ok = false, .done = 0, .verdict = "deny", .rule = "no-bank",
				     .reason = "clicks on the bank's page are not allowed",
				     .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert(json_is_true(json_object_get(ans, "is_error")));
	cr_assert_str_eq(sget(ans, "tool_use_id"), "toolu_01A09q90qw90lq917835lq9");
	json_t *content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 2);
	cr_assert_str_eq(sget(json_array_get(content, 0), "text"),
			 "deskgate refused left_click: clicks on the bank's page are not allowed "
			 "(rule no-bank)");
	assert_png(sget(json_object_get(json_array_get(content, 1), "source"), "data"));
	/* An "ask" that was not approved says so; no screenshot: text only. */
	o.verdict = "ask";
	o.png = NULL;
	o.png_len = 0;
	assert_ok(answer(&o));
	content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 1);
	cr_assert_str_eq(sget(json_array_get(content, 0), "text"),
			 "deskgate refused left_click: clicks on the bank's page are not allowed "
			 "(rule no-bank, verdict ask)");
	o.rule = NULL;
	o.reason = NULL;
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "deskgate refused left_click (verdict ask)");
}

Test(answer, anthropic_failed_and_rejected)
{
	assert_ok(anthropic_block("{'action':'key','text':'ctrl+s'}"));
	struct dg_adapt_outcome o = {.ok = false, .done = 0, .error = "the desktop stopped"};
	assert_ok(answer(&o));
	cr_assert(json_is_true(json_object_get(ans, "is_error")));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "deskgate failed key: the desktop stopped");
	/* A call that did not parse is answered in kind, with the parse error. */
	cr_assert_eq(anthropic_block("{'action':'left_click','coordinate':[2000,10]}"), -EINVAL);
	struct dg_err perr = err;
	struct dg_adapt_outcome r = {.ok = false, .done = 0, .error = perr.msg, .png = png,
				     .png_len = sizeof(png)};
	assert_ok(answer(&r));
	cr_assert(json_is_true(json_object_get(ans, "is_error")));
	cr_assert_str_eq(sget(ans, "tool_use_id"), "toolu_01A09q90qw90lq917835lq9");
	json_t *content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 2);
	cr_assert_str_eq(sget(json_array_get(content, 0), "text"),
			 "deskgate rejected the call: anthropic.input.coordinate[0]: 2000 is off "
			 "the display (width 1024)");
}

Test(answer, anthropic_nothing_to_say)
{
	assert_ok(anthropic_block("{'action':'wait','duration':1}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1};
	assert_ok(answer(&o));
	json_t *content = json_object_get(ans, "content");
	cr_assert_eq(json_array_size(content), 1);
	cr_assert_str_eq(sget(json_array_get(content, 0), "text"), "deskgate ran wait");
	o.text = "waited 1000 ms";
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "waited 1000 ms");
}

Test(answer, untrusted_text_is_cleaned_and_cut)
{
	assert_ok(anthropic_block("{'action':'key','text':'a'}"));
	struct dg_adapt_outcome o = {.ok = false, .done = 0, .rule = "r\nx",
				     .reason = "bad\x01page \xff\xfe \xc3\xa4 \x1b[31m"};
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(ans, "content"), 0), "text"),
			 "deskgate refused key: bad page \xef\xbf\xbd\xef\xbf\xbd \xc3\xa4  [31m "
			 "(rule r x)");
	char *big = repeat('x', 100000);
	o.reason = big;
	o.rule = NULL;
	assert_ok(answer(&o));
	const char *t = sget(json_array_get(json_object_get(ans, "content"), 0), "text");
	cr_assert_eq(strlen(t), strlen("deskgate refused key: ") + DG_ADAPT_NOTE_MAX + 3);
	cr_assert_str_eq(t + strlen(t) - 4, "x...");
	/* Cut at a character boundary, never inside one. */
	for (size_t i = 0; i + 1 < 100000; i += 2) {
		big[i] = '\xc3';
		big[i + 1] = '\xa4';
	}
	big[99999] = '\0';
	assert_ok(answer(&o));
	t = sget(json_array_get(json_object_get(ans, "content"), 0), "text");
	cr_assert_eq(strlen(t), strlen("deskgate refused key: ") + DG_ADAPT_NOTE_MAX + 3);
	free(big);
}

Test(answer, openai_screenshot_and_safety_checks)
{
	assert_ok(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','call_id':'call_9',"
				 "'action':{'type':'click','button':'left','x':1,'y':1},"
				 "'pending_safety_checks':[{'id':'cu_sc_1','code':"
				 "'malicious_instructions','message':'Check the page.'}],"
				 "'status':'completed'}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert(json_is_array(ans));
	cr_assert_eq(json_array_size(ans), 1);
	json_t *item = json_array_get(ans, 0);
	cr_assert_eq(json_object_size(item), 4);
	cr_assert_str_eq(sget(item, "type"), "computer_call_output");
	cr_assert_str_eq(sget(item, "call_id"), "call_9");
	json_t *acks = json_object_get(item, "acknowledged_safety_checks");
	json_t *pending = json_object_get(ad.raw, "pending_safety_checks");
	cr_assert(json_equal(acks, pending), "acknowledged = pending, passed through");
	json_t *out = json_object_get(item, "output");
	cr_assert_eq(json_object_size(out), 2);
	cr_assert_str_eq(sget(out, "type"), "computer_screenshot");
	const char *url = sget(out, "image_url");
	const char *prefix = "data:image/png;base64,";
	cr_assert_eq(strncmp(url, prefix, strlen(prefix)), 0);
	assert_png(url + strlen(prefix));
}

Test(answer, openai_current_url)
{
	/* Neither ResponseInputItem.ComputerCallOutput nor its output has a URL
	 * field (openai SDK): the URL goes to the model in the user message. */
	assert_ok(openai_preview(&xga, "{'type':'screenshot'}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png),
				     .url = "https://example.com/a?b=c"};
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(ans), 2);
	json_t *item = json_array_get(ans, 0);
	cr_assert_eq(json_object_size(item), 4);
	json_t *out = json_object_get(item, "output");
	cr_assert_eq(json_object_size(out), 2, "output is {type, image_url}");
	cr_assert_null(json_object_get(out, "current_url"));
	cr_assert_eq(json_array_size(json_object_get(item, "acknowledged_safety_checks")), 0);
	json_t *msg = json_array_get(ans, 1);
	cr_assert_str_eq(sget(msg, "type"), "message");
	cr_assert_str_eq(sget(msg, "role"), "user");
	json_t *part = json_array_get(json_object_get(msg, "content"), 0);
	cr_assert_str_eq(sget(part, "type"), "input_text");
	cr_assert_str_eq(sget(part, "text"), "current_url: https://example.com/a?b=c");
	/* After a refusal's headline, on its own line. */
	o.ok = false;
	o.done = 0;
	o.error = "boom";
	assert_ok(answer(&o));
	part = json_array_get(json_object_get(json_array_get(ans, 1), "content"), 0);
	cr_assert_str_eq(sget(part, "text"),
			 "deskgate failed screenshot: boom\ncurrent_url: https://example.com/a?b=c");
	o.ok = true;
	o.done = 1;
	o.error = NULL;
	/* A URL that is not clean text is left out, not mangled. */
	static const char *const bad[] = {"https://example.com/\x01", "https://example.com/\xff",
					  ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.url = bad[i];
		assert_ok(answer(&o));
		cr_assert_eq(json_array_size(ans), 1, "url %zu left out", i);
	}
}

Test(answer, openai_refused_in_a_batch)
{
	assert_ok(openai_batch(&xga, "[{'type':'move','x':1,'y':1},"
				     "{'type':'click','button':'left','x':2,'y':2},"
				     "{'type':'type','text':'x'}]"));
	struct dg_adapt_outcome o = {.ok = false, .done = 1, .rule = "no-clicks",
				     .reason = "clicks are not allowed here", .png = png,
				     .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(ans), 2);
	cr_assert_str_eq(sget(json_array_get(ans, 0), "type"), "computer_call_output");
	json_t *msg = json_array_get(ans, 1);
	cr_assert_eq(json_object_size(msg), 3);
	cr_assert_str_eq(sget(msg, "type"), "message");
	cr_assert_str_eq(sget(msg, "role"), "user");
	json_t *content = json_object_get(msg, "content");
	cr_assert_eq(json_array_size(content), 1);
	json_t *part = json_array_get(content, 0);
	cr_assert_eq(json_object_size(part), 2);
	cr_assert_str_eq(sget(part, "type"), "input_text");
	cr_assert_str_eq(sget(part, "text"),
			 "deskgate refused click (action 2 of 3): clicks are not allowed here "
			 "(rule no-clicks). Action 1 ran; action 3 did not run.");
	o.done = 0;
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(json_array_get(ans, 1), "content"),
					     0), "text"),
			 "deskgate refused move (action 1 of 3): clicks are not allowed here "
			 "(rule no-clicks). No action ran; actions 2 to 3 did not run.");
	o.done = 2;
	o.rule = o.reason = NULL;
	o.error = "typing timed out";
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(json_array_get(json_object_get(json_array_get(ans, 1), "content"),
					     0), "text"),
			 "deskgate failed type (action 3 of 3): typing timed out. Actions 1 to 2 "
			 "ran.");
	/* All ran: the output item alone. */
	o = (struct dg_adapt_outcome){.ok = true, .done = 3, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(ans), 1);
}

Test(answer, openai_rejected_call_still_answers_its_call_id)
{
	cr_assert_eq(openai_batch(&xga, "[{'type':'move','x':1,'y':1},{'type':'fly'}]"), -EINVAL);
	struct dg_err perr = err;
	struct dg_adapt_outcome o = {.ok = false, .done = 0, .error = perr.msg, .png = png,
				     .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_eq(json_array_size(ans), 2);
	cr_assert_str_eq(sget(json_array_get(ans, 0), "call_id"), "call_b");
	cr_assert_str_eq(sget(json_array_get(json_object_get(json_array_get(ans, 1), "content"),
					     0), "text"),
			 "deskgate rejected the call: openai.actions[1].type: unknown action \"fly\"");
}

Test(answer, caller_bugs_and_limits)
{
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	json_t *r = NULL;
	/* Canonical messages are the gateway's to answer. */
	assert_ok(parse("{'type':'screenshot'}"));
	cr_assert_eq(dg_adapt_answer(&ad, &o, &r, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "answer: canonical messages are answered by the gateway");
	cr_assert_null(r);
	/* OpenAI needs the screenshot. */
	assert_ok(openai_preview(&xga, "{'type':'screenshot'}"));
	o.png = NULL;
	o.png_len = 0;
	cr_assert_eq(answer(&o), -EINVAL);
	cr_assert_str_eq(err.msg, "answer: an OpenAI answer needs the screenshot");
	/* ok means all ran; a stop must be inside the batch. */
	o.png = png;
	o.png_len = sizeof(png);
	o.done = 0;
	cr_assert_eq(answer(&o), -EINVAL);
	o.ok = false;
	o.done = 1;
	cr_assert_eq(answer(&o), -EINVAL);
	o.done = -1;
	cr_assert_eq(answer(&o), -EINVAL);
	o.done = 0;
	assert_ok(answer(&o));
	/* A length without bytes; a PNG over the limit (never read). */
	o.png = NULL;
	o.png_len = 5;
	cr_assert_eq(answer(&o), -EINVAL);
	o.png = png;
	o.png_len = (size_t)DG_ADAPT_PNG_MAX + 1;
	cr_assert_eq(answer(&o), -E2BIG);
	/* A call that did not parse did not run. */
	cr_assert_eq(openai_preview(&xga, "{'type':'fly'}"), -EINVAL);
	o = (struct dg_adapt_outcome){.ok = true, .done = 0, .png = png, .png_len = sizeof(png)};
	cr_assert_eq(answer(&o), -EINVAL);
	/* Not even the call_id: nothing to answer to. */
	cr_assert_eq(parse_sc(&xga, "{'type':'computer_call','id':'cu_1','action':{}}"), -EINVAL);
	o.ok = false;
	cr_assert_eq(answer(&o), -EINVAL);
	cr_assert_str_eq(err.msg, "answer: the call has no call_id to answer to");
	/* A message that was not even JSON. */
	cr_assert_eq(parse("{"), -EINVAL);
	cr_assert_eq(answer(&o), -EINVAL);
	cr_assert_eq(dg_adapt_answer(NULL, &o, &r, &err), -EINVAL);
}

Test(answer, png_at_the_limit)
{
	uint8_t *big = malloc(DG_ADAPT_PNG_MAX);
	cr_assert(big);
	for (size_t i = 0; i < DG_ADAPT_PNG_MAX; i++)
		big[i] = (uint8_t)(i * 2654435761u >> 24);
	assert_ok(parse("{'action':'screenshot'}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = big,
				     .png_len = DG_ADAPT_PNG_MAX};
	json_t *r = NULL;
	assert_ok(dg_adapt_answer(&ad, &o, &r, &err));
	const char *data = json_string_value(json_object_get(
		json_object_get(json_array_get(json_object_get(r, "content"), 0), "source"),
		"data"));
	cr_assert_eq(strlen(data), dg_base64_len(DG_ADAPT_PNG_MAX));
	size_t n = 0;
	unsigned char *d = b64_decode(data, &n);
	cr_assert_eq(n, (size_t)DG_ADAPT_PNG_MAX);
	cr_assert_eq(memcmp(d, big, n), 0);
	free(d);
	json_decref(r);
	free(big);
}

/* ---- base64 -------------------------------------------------------------------- */

Test(base64, rfc4648_vectors)
{
	static const char *const in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const out[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
					  "Zm9vYmFy"};
	for (size_t i = 0; i < 7; i++) {
		char buf[16];
		memset(buf, 'X', sizeof(buf));
		cr_assert_eq(dg_base64_len(strlen(in[i])), strlen(out[i]));
		dg_base64_encode((const uint8_t *)in[i], strlen(in[i]), buf);
		cr_assert_str_eq(buf, out[i]);
	}
	uint8_t all[3] = {0xfb, 0xff, 0xbf};
	char buf[8];
	dg_base64_encode(all, 3, buf);
	cr_assert_str_eq(buf, "+/+/");
	cr_assert_eq(dg_base64_len(SIZE_MAX), (size_t)-1);
}

Test(base64, round_trips_through_openssl)
{
	uint8_t in[300];
	uint32_t s = 7;
	for (size_t i = 0; i < sizeof(in); i++) {
		s = s * 1103515245u + 12345u;
		in[i] = (uint8_t)(s >> 16);
	}
	for (size_t n = 0; n <= sizeof(in); n++) {
		char *enc = malloc(dg_base64_len(n) + 1);
		cr_assert(enc);
		enc[dg_base64_len(n)] = 'X';
		dg_base64_encode(in, n, enc);
		cr_assert_eq(strlen(enc), dg_base64_len(n), "length %zu", n);
		size_t m = 0;
		unsigned char *dec = b64_decode(enc, &m);
		cr_assert_eq(m, n);
		cr_assert_eq(memcmp(dec, in, n), 0, "length %zu", n);
		free(dec);
		free(enc);
	}
}

/* ---- hostile input ------------------------------------------------------------- */

Test(hostile, nul_bytes)
{
	static const char m1[] = "{\"action\":\"type\",\"text\":\"a\\u0000b\"}";
	assert_refused_prefix(parse_raw_sc(&scaled, m1, sizeof(m1) - 1), -EINVAL,
			      "anthropic.input.text: ");
	static const char m2[] = "{\"action\":\"key\",\"text\":\"ctrl\\u0000+a\"}";
	assert_refused(parse_raw_sc(&scaled, m2, sizeof(m2) - 1), -EINVAL,
		       "anthropic.input.text: contains NUL");
	static const char m3[] = "{\"action\":\"left_click\",\"text\":\"shift\\u0000\"}";
	assert_refused(parse_raw_sc(&scaled, m3, sizeof(m3) - 1), -EINVAL,
		       "anthropic.input.text: contains NUL");
	static const char m4[] = "{\"action\":\"scr\\u0000eenshot\"}";
	assert_refused(parse_raw_sc(&scaled, m4, sizeof(m4) - 1), -EINVAL,
		       "anthropic.input.action: unknown action \"scr\\x00eenshot\"");
	static const char m5[] = "{\"type\":\"click\\u0000\",\"x\":1,\"y\":1}";
	assert_refused_prefix(parse_raw_sc(&scaled, m5, sizeof(m5) - 1), -EINVAL,
			      "message.type: unknown type \"click\\x00\"");
	static const char m6[] = "{\"action\":\"screenshot\",\"coord\\u0000inate\":[1,1]}";
	/* jansson refuses NUL in keys even with JSON_ALLOW_NUL. */
	assert_refused_prefix(parse_raw_sc(&scaled, m6, sizeof(m6) - 1), -EINVAL,
			      "message: invalid JSON");
	static const char m7[] = "{\"type\":\"tool_use\",\"id\":\"t\\u0000\",\"name\":\"computer\","
				 "\"input\":{\"action\":\"screenshot\"}}";
	assert_refused(parse_raw_sc(&scaled, m7, sizeof(m7) - 1), -EINVAL,
		       "anthropic.id: \"t\\x00\" has a byte 0x00 at 1 (ids are printable ASCII "
		       "without spaces)");
	static const char m8[] = "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"computer\\u0000\","
				 "\"input\":{\"action\":\"screenshot\"}}";
	assert_refused_prefix(parse_raw_sc(&scaled, m8, sizeof(m8) - 1), -EINVAL, "anthropic.name: ");
}

Test(hostile, binary_and_deep_nesting)
{
	unsigned char bin[512];
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = (unsigned char)(i * 37 + 11);
	assert_refused_prefix(parse_raw_sc(&scaled, (const char *)bin, sizeof(bin)), -EINVAL,
			      "message: invalid JSON");
	size_t depth = 100000;
	char *deep = malloc(depth * 2 + 1);
	cr_assert(deep);
	memset(deep, '[', depth);
	memset(deep + depth, ']', depth);
	assert_refused_prefix(parse_raw_sc(&scaled, deep, depth * 2), -EINVAL, "message: invalid JSON");
	free(deep);
	assert_refused_prefix(parse_raw_sc(&scaled, "{\"action\":\"type\",\"text\":\"\xff\"}", 28),
			      -EINVAL, "message: invalid JSON");
	assert_refused_prefix(parse("{'action':'left_click','coordinate':[99999999999999999999,1]}"),
			      -EINVAL, "message: invalid JSON");
	assert_refused(parse("{'action':'left_click','coordinate':[9223372036854775807,1]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: 9223372036854775807 is off the display "
		       "(width 1024)");
	assert_refused(parse("{'action':'left_click','coordinate':[-9223372036854775808,1]}"),
		       -EINVAL,
		       "anthropic.input.coordinate[0]: -9223372036854775808 is off the display "
		       "(width 1024)");
	assert_refused(parse("{'action':'zoom','region':[0,0,9223372036854775807,1]}"), -EINVAL,
		       "anthropic.input.region[2]: 9223372036854775807 is off the display (width "
		       "1024)");
}

Test(hostile, long_unknown_names_are_cut_in_messages)
{
	char *name = repeat('z', 10000);
	assert_refused_prefix(parsef(&scaled, "{'action':'%s'}", name), -EINVAL,
			      "anthropic.input.action: unknown action \"zzzz");
	cr_assert(strlen(err.msg) < 200, "message of %zu bytes", strlen(err.msg));
	assert_refused_prefix(parsef(&scaled, "{'action':'screenshot','%s':1}", name), -EINVAL,
			      "anthropic.input: unknown field \"zzzz");
	cr_assert(strlen(err.msg) < 200);
	assert_refused_prefix(parsef(&xga, "{'type':'computer_call','id':'cu','call_id':'c',"
					   "'action':{'type':'keypress','keys':['%s']}}", name),
			      -EINVAL, "openai.action.keys[0]: 10000 bytes is over the limit");
	free(name);
}

/* Flips, inserts and deletes random bytes of real messages: every result is
 * an error or actions the canonical parser accepts for the desktop. */
Test(hostile, mutated_messages)
{
	static const char *const seeds[] = {
		"{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"computer\",\"input\":{"
		"\"action\":\"left_click_drag\",\"start_coordinate\":[10,20],\"coordinate\":[300,"
		"400],\"text\":\"shift\"}}",
		"{\"action\":\"scroll\",\"coordinate\":[100,100],\"scroll_direction\":\"down\","
		"\"scroll_amount\":3}",
		"{\"action\":\"zoom\",\"region\":[0,0,512,320]}",
		"{\"action\":\"hold_key\",\"text\":\"ctrl+shift\",\"duration\":1.5}",
		"{\"type\":\"computer_call\",\"id\":\"cu_1\",\"call_id\":\"call_1\",\"actions\":[{"
		"\"type\":\"click\",\"button\":\"left\",\"x\":100,\"y\":200,\"keys\":[\"SHIFT\"]},{"
		"\"type\":\"keypress\",\"keys\":[\"CTRL\",\"S\"]},{\"type\":\"scroll\",\"x\":1,\"y\":"
		"1,\"scroll_x\":0,\"scroll_y\":300},{\"type\":\"drag\",\"path\":[{\"x\":1,\"y\":2},{"
		"\"x\":3,\"y\":4}]}],\"pending_safety_checks\":[{\"id\":\"sc\",\"code\":\"c\"}]}",
		"{\"type\":\"drag\",\"path\":[[1,2],[3,4]],\"modifiers\":[\"ctrl\"]}",
	};
	static const char alphabet[] = "{}[]\",:0123456789-.eE tnulrfaxy\\u+";
	uint32_t s = 99;
#define RND() (s = s * 1103515245u + 12345u, (s >> 8))
	int accepted = 0;
	for (int iter = 0; iter < 4000; iter++) {
		const char *seed = seeds[iter % (sizeof(seeds) / sizeof(seeds[0]))];
		size_t len = strlen(seed);
		char buf[1024];
		memcpy(buf, seed, len);
		int edits = 1 + (int)(RND() % 3);
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
		const struct dg_adapt_scale *sc = iter % 2 ? &scaled : &same;
		int rc = parse_raw_sc(sc, buf, len);
		if (rc == 0) {
			accepted++;
			cr_assert(ad.n >= 1 && ad.n <= DG_ADAPT_ACTIONS_MAX);
			for (int i = 0; i < ad.n; i++)
				free(canon_of(i, DW, DH));
		} else {
			cr_assert(rc == -EINVAL || rc == -E2BIG, "rc %d", rc);
			cr_assert(err.msg[0]);
			assert_no_actions();
		}
		/* Whatever happened, an answer in kind can be built or is
		 * refused cleanly. */
		struct dg_adapt_outcome o = {.ok = rc == 0, .done = rc == 0 ? ad.n : 0,
					     .error = rc == 0 ? NULL : err.msg, .png = png,
					     .png_len = sizeof(png), .has_cursor = true,
					     .cursor_x = 5, .cursor_y = 5};
		json_t *r = NULL;
		struct dg_err e2;
		int arc = dg_adapt_answer(&ad, &o, &r, &e2);
		cr_assert(arc == 0 || arc == -EINVAL, "answer rc %d", arc);
		cr_assert((arc == 0) == (r != NULL));
		json_decref(r);
	}
#undef RND
	cr_assert(accepted > 30, "only %d mutations accepted: the seeds are broken", accepted);
}

/* ---- what the SDKs send (issue 16, point 7) ---------------------------------------- */

/* A block with extra top-level fields (' for "), desktop = model size. */
static int anthropic_block_with(const char *fields, const char *input)
{
	char *m = NULL;
	cr_assert(asprintf(&m, "{'type':'tool_use','id':'toolu_7','name':'computer',%s"
			       "'input':%s}", fields, input) > 0);
	int rc = parse_sc(&same, m);
	free(m);
	return rc;
}

Test(anthropic, sdk_block_fields)
{
	/* BetaToolUseBlock's caller, BetaToolUseBlockParam's cache_control,
	 * and toolset_name as the SDKs dump them. */
	assert_ok(anthropic_block_with("'caller':{'type':'direct'},'cache_control':{'type':"
				       "'ephemeral'},'toolset_name':null,",
				       "{'action':'left_click','coordinate':[5,6]}"));
	assert_same(0, "{'type':'click','x':5,'y':6}");
	cr_assert(!ad.toolset);
	assert_ok(anthropic_block_with("'caller':{'type':'code_execution_20250825','tool_id':"
				       "'srvtoolu_1'},'cache_control':{'type':'ephemeral','ttl':"
				       "'1h'},'toolset_name':'computer',",
				       "{'action':'screenshot'}"));
	cr_assert(ad.toolset);
	assert_ok(anthropic_block_with("'caller':null,'cache_control':null,",
				       "{'action':'screenshot'}"));
	/* The browser toolset's blocks are its members (adapt-browser.c): the
	 * computer tool's name is none, and the refusal is still answerable. */
	assert_refused(anthropic_block_with("'toolset_name':'browser',", "{'action':'screenshot'}"),
		       -EINVAL,
		       "browser.name: \"computer\" is not a member of the browser toolset (navigate, "
		       "read_page, find, left_click, ...)");
	cr_assert(ad.has_id);
	cr_assert(ad.browser);
	assert_refused(anthropic_block_with("'toolset_name':'bash',", "{'action':'screenshot'}"),
		       -EINVAL,
		       "anthropic.toolset_name: \"bash\" is not \"computer\" or \"browser\" (the "
		       "toolsets deskgate speaks)");
	assert_refused(anthropic_block_with("'toolset_name':7,", "{'action':'screenshot'}"), -EINVAL,
		       "anthropic.toolset_name: 7 is not \"computer\" or \"browser\" (the toolsets "
		       "deskgate speaks)");
	assert_refused(anthropic_block_with("'caller':'direct',", "{'action':'screenshot'}"), -EINVAL,
		       "anthropic.caller: \"direct\" is not an object {type, tool_id?}");
	assert_refused(anthropic_block_with("'caller':{'type':'direct','x':1},",
					    "{'action':'screenshot'}"),
		       -EINVAL, "anthropic.caller: unknown field \"x\" for caller (allowed: tool_id)");
	assert_refused(anthropic_block_with("'caller':{},", "{'action':'screenshot'}"), -EINVAL,
		       "anthropic.caller.type: required (\"direct\", or the server tool)");
	assert_refused(anthropic_block_with("'caller':{'type':'a b'},", "{'action':'screenshot'}"),
		       -EINVAL,
		       "anthropic.caller.type: \"a b\" has a byte 0x20 at 1 (ids are printable ASCII "
		       "without spaces)");
	assert_refused(anthropic_block_with("'cache_control':{'type':'persistent'},",
					    "{'action':'screenshot'}"),
		       -EINVAL, "anthropic.cache_control.type: \"persistent\" is not \"ephemeral\"");
	assert_refused(anthropic_block_with("'cache_control':{'type':'ephemeral','ttl':'2h'},",
					    "{'action':'screenshot'}"),
		       -EINVAL, "anthropic.cache_control.ttl: \"2h\" is not \"5m\" or \"1h\"");
	assert_refused(anthropic_block_with("'cache_control':{'type':'ephemeral','scope':1},",
					    "{'action':'screenshot'}"),
		       -EINVAL,
		       "anthropic.cache_control: unknown field \"scope\" for cache_control (allowed: "
		       "ttl)");
	assert_refused(anthropic_block_with("'citations':[],", "{'action':'screenshot'}"), -EINVAL,
		       "anthropic: unknown field \"citations\" for tool_use (allowed: id, name, "
		       "input, caller, cache_control, toolset_name)");
}

Test(anthropic, toolset_member_blocks)
{
	/* BetaComputerLeftClickToolUseBlock: the member is the name. */
	assert_ok(parse("{'type':'tool_use','id':'toolu_8','name':'left_click','toolset_name':"
			"'computer','input':{'coordinate':[512,320],'text':'shift'},'caller':"
			"{'type':'direct'}}"));
	assert_same(0, "{'type':'click','x':640,'y':400,'modifiers':['shift']}");
	cr_assert(ad.toolset);
	cr_assert_str_eq(ad.name[0], "left_click");
	assert_ok(parse("{'type':'tool_use','id':'toolu_8','name':'scroll','toolset_name':"
			"'computer','input':{'scroll_direction':'up','scroll_amount':2}}"));
	assert_same(0, "{'type':'scroll','x':100,'y':200,'dy':-2}");
	assert_refused(parse("{'type':'tool_use','id':'toolu_8','name':'left_click','input':"
			     "{'coordinate':[1,1]}}"),
		       -EINVAL,
		       "anthropic.name: \"left_click\" is not \"computer\" (deskgate is the computer "
		       "tool only)");
	assert_refused(parse("{'type':'tool_use','id':'toolu_8','name':'navigate','toolset_name':"
			     "'computer','input':{}}"),
		       -EINVAL,
		       "anthropic.name: \"navigate\" is not an action of the computer toolset "
		       "(left_click, type, key, screenshot, ...)");
	assert_refused(parse("{'type':'tool_use','id':'toolu_8','name':'left_click','toolset_name':"
			     "'computer','input':{'action':'right_click'}}"),
		       -EINVAL,
		       "anthropic.input.action: not a field of a toolset member's input (the "
		       "block's name is the action)");
	assert_refused(parse("{'type':'tool_use','id':'toolu_8','name':'key','toolset_name':"
			     "'computer','input':[]}"),
		       -EINVAL, "anthropic.input: an array is not a JSON object");
	assert_refused(parse("{'type':'tool_use','id':'toolu_8','name':'key','toolset_name':"
			     "'computer','input':{'text':'ctrl+a','x':1}}"),
		       -EINVAL, "anthropic.input: unknown field \"x\" for key (allowed: text, repeat)");
}

Test(anthropic, non_integer_numbers_rounded)
{
	/* The SDKs type coordinates and amounts as number: rounded to the
	 * nearest integer, halves away from zero; the wire action keeps what
	 * was received. */
	assert_ok(parse_sc(&same, "{'action':'left_click','coordinate':[640.5,400.49]}"));
	assert_same(0, "{'type':'click','x':641,'y':400}");
	cr_assert(json_is_real(json_array_get(json_object_get(ad.wire_actions[0], "coordinate"), 0)));
	assert_ok(parse_sc(&same, "{'action':'left_click','coordinate':[-0.4,2.0]}"));
	assert_same(0, "{'type':'click','x':0,'y':2}");
	/* Rounded in model space, then scaled: 640.5 -> 641 -> 801.25 -> 801. */
	assert_ok(parse("{'action':'mouse_move','coordinate':[640.5,400]}"));
	assert_same(0, "{'type':'move','x':801,'y':500}");
	assert_ok(parse_sc(&same, "{'action':'scroll','scroll_direction':'down','scroll_amount':1.5}"));
	assert_same(0, "{'type':'scroll','x':100,'y':200,'dy':2}");
	assert_ok(parse_sc(&same, "{'action':'scroll','scroll_direction':'down','scroll_amount':3.0}"));
	assert_same(0, "{'type':'scroll','x':100,'y':200,'dy':3}");
	assert_refused(parse_sc(&same, "{'action':'scroll','scroll_direction':'down',"
				       "'scroll_amount':0.4}"),
		       -EINVAL, "anthropic.input.scroll_amount: 0 is out of range [1, 100] (wheel "
				"notches)");
	assert_ok(parse_sc(&same, "{'action':'zoom','region':[0.5,0,10.4,10]}"));
	assert_canon(0, "{'region':[1,0,10,10],'type':'zoom'}");
	assert_refused(parse_sc(&same, "{'action':'zoom','region':[9.6,0,10.4,10]}"), -EINVAL,
		       "anthropic.input.region: x2 (10) must be greater than x1 (10)");
	/* Off the display after rounding: 1279.5 -> 1280. */
	assert_refused(parse_sc(&same, "{'action':'left_click','coordinate':[1279.5,0]}"), -EINVAL,
		       "anthropic.input.coordinate[0]: 1280 is off the display (width 1280)");
	assert_ok(parse_sc(&same, "{'action':'left_click','coordinate':[1279.49,0]}"));
	/* The bound on a real, at it and past it. */
	assert_refused(parse_sc(&same, "{'action':'left_click','coordinate':[1000000000.0,0]}"),
		       -EINVAL,
		       "anthropic.input.coordinate[0]: 1000000000 is off the display (width 1280)");
	assert_refused_prefix(parse_sc(&same, "{'action':'left_click','coordinate':[1000000000.5,0]}"),
			      -EINVAL, "anthropic.input.coordinate[0]: 1000000000.5 is out of range "
				       "(at most 1e+09 in magnitude)");
	assert_refused_prefix(parse_sc(&same, "{'action':'left_click','coordinate':[-1e300,0]}"),
			      -EINVAL, "anthropic.input.coordinate[0]: ");
}

Test(openai, non_integer_numbers_rounded)
{
	assert_ok(openai_batch(&xga, "[{'type':'click','button':'left','x':640.5,'y':400.2},"
				     "{'type':'scroll','x':1.5,'y':2,'scroll_x':0,'scroll_y':149.6},"
				     "{'type':'drag','path':[{'x':0.5,'y':1},{'x':10,'y':20.5}]}]"));
	assert_same(0, "{'type':'click','x':641,'y':400}");
	/* 149.6 -> 150 px -> 1.5 notches -> 2. */
	assert_same(1, "{'type':'scroll','x':2,'y':2,'dy':2}");
	assert_same(2, "{'type':'drag','path':[[1,1],[10,21]]}");
	assert_refused(openai_batch(&xga, "[{'type':'move','x':1023.5,'y':1}]"), -EINVAL,
		       "openai.actions[0].x: 1024 is off the display (width 1024)");
}

Test(answer, anthropic_toolset_member)
{
	assert_ok(parse("{'type':'tool_use','id':'toolu_9','name':'screenshot','toolset_name':"
			"'computer','input':{}}"));
	struct dg_adapt_outcome o = {.ok = true, .done = 1, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&o));
	cr_assert_str_eq(sget(ans, "toolset_name"), "computer");
	cr_assert_str_eq(sget(ans, "tool_use_id"), "toolu_9");
	/* The computer tool's own blocks are answered without it. */
	assert_ok(anthropic_block("{'action':'screenshot'}"));
	assert_ok(answer(&o));
	cr_assert_null(json_object_get(ans, "toolset_name"));
	/* A refused member is answered as a member. */
	cr_assert_neq(parse("{'type':'tool_use','id':'toolu_9','name':'zoom','toolset_name':"
			    "'computer','input':{}}"), 0);
	struct dg_adapt_outcome r = {.error = err.msg, .png = png, .png_len = sizeof(png)};
	assert_ok(answer(&r));
	cr_assert_str_eq(sget(ans, "toolset_name"), "computer");
	cr_assert(json_is_true(json_object_get(ans, "is_error")));
}

Test(anthropic, key_repeat)
{
	/* BetaComputerKeyInput.repeat: the chords pressed that many times. */
	assert_ok(anthropic_block("{'action':'key','text':'ctrl+a','repeat':3}"));
	assert_canon(0, "{'keys':'Control_L+a Control_L+a Control_L+a','type':'key'}");
	assert_ok(anthropic_block("{'action':'key','text':'Tab','repeat':null}"));
	assert_canon(0, "{'keys':'Tab','type':'key'}");
	assert_ok(anthropic_block("{'action':'key','text':'Tab','repeat':1.5}"));
	assert_canon(0, "{'keys':'Tab Tab','type':'key'}");
	/* At the limit of 32 chords in all, and past it. */
	assert_ok(anthropic_block("{'action':'key','text':'a b','repeat':16}"));
	cr_assert_eq(ad.act[0].n_chords, 32);
	assert_refused(anthropic_block("{'action':'key','text':'a b','repeat':17}"), -EINVAL,
		       "anthropic.input.repeat: 17 times 2 chords is over the limit of 32 chords");
	assert_ok(anthropic_block("{'action':'key','text':'a','repeat':32}"));
	assert_refused(anthropic_block("{'action':'key','text':'a','repeat':33}"), -EINVAL,
		       "anthropic.input.repeat: 33 is out of range [1, 32]");
	assert_refused(anthropic_block("{'action':'key','text':'a','repeat':0}"), -EINVAL,
		       "anthropic.input.repeat: 0 is out of range [1, 32]");
	assert_refused(anthropic_block("{'action':'key','text':'a','repeat':'2'}"), -EINVAL,
		       "anthropic.input.repeat: \"2\" is not a number");
	assert_refused_prefix(anthropic_block("{'action':'key','text':'Retrun','repeat':2}"),
			      -EINVAL, "anthropic.input.text: ");
	assert_refused(anthropic_block("{'action':'type','text':'a','repeat':2}"), -EINVAL,
		       "anthropic.input: unknown field \"repeat\" for type (allowed: text)");
}
