/* The canonical action schema: every type with all its fields and with its
 * defaults, each refusal naming its field, each limit at its boundary, the
 * screen's edges, the canonical encoding and hostile input. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"

#define W 1280
#define H 800

static struct dg_action act;
static struct dg_err err;

/* Criterion ends each test's process with _exit, which skips
 * LeakSanitizer's exit-time check; check for leaks after each test here. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define leak_check() __lsan_do_recoverable_leak_check()
#else
#define leak_check() 0
#endif

static void cleanup(void)
{
	dg_action_free(&act);
	cr_assert_eq(leak_check(), 0, "memory leaked (see the LeakSanitizer report above)");
}

TestSuite(action, .fini = cleanup);
TestSuite(limits, .fini = cleanup);
TestSuite(canonical, .fini = cleanup);
TestSuite(hostile, .fini = cleanup);

/* Parses len bytes of text for a W x H screen into act. */
static int parse_len(const char *text, size_t len)
{
	dg_action_free(&act);
	memset(&err, 0, sizeof(err));
	memset(&act, 0xa5, sizeof(act)); /* parse must not rely on a zeroed action */
	return dg_action_parse(text, len, W, H, &act, &err);
}

static int parse(const char *text)
{
	return parse_len(text, strlen(text));
}

/* Parses the printf-formatted text. */
static int parsef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int parsef(const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0);
	int rc = parse_len(text, (size_t)n);
	free(text);
	return rc;
}

/* A string of n copies of c, malloc'd. */
static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	cr_assert(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

#define assert_ok(rc) cr_assert_eq((rc), 0, "rc %d, message \"%s\"", (rc), err.msg)

/* Refused with -EINVAL and exactly this message; the action is left zeroed. */
#define assert_refused(rc, want_msg)                                                       \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, -EINVAL, "rc %d for \"%s\"", rc_, (want_msg));           \
		cr_assert_str_eq(err.msg, (want_msg));                                     \
		assert_zeroed();                                                           \
	} while (0)

/* Refused with code and a message that starts with prefix. */
#define assert_refused_prefix(rc, code, prefix)                                           \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, (code), "rc %d, message \"%s\"", rc_, err.msg);          \
		cr_assert(strncmp(err.msg, (prefix), strlen(prefix)) == 0,                 \
			  "message \"%s\" does not start with \"%s\"", err.msg, (prefix));  \
		assert_zeroed();                                                           \
	} while (0)

static void assert_zeroed(void)
{
	static const struct dg_action zero;
	cr_assert_eq(memcmp(&act, &zero, sizeof(act)), 0, "action not zeroed after an error");
}

/* The canonical encoding of act, malloc'd. */
static char *canon(void)
{
	size_t len = 0;
	char *s = dg_action_canonical(&act, &len);
	cr_assert(s);
	cr_assert_eq(len, strlen(s));
	return s;
}

#define assert_canon(want)                                                                 \
	do {                                                                               \
		char *c_ = canon();                                                        \
		cr_assert_str_eq(c_, (want));                                              \
		free(c_);                                                                  \
	} while (0)

/* ---- every type, all fields and defaults -------------------------------------- */

Test(action, click_all_fields)
{
	assert_ok(parse("{\"type\":\"click\",\"x\":100,\"y\":200,\"button\":\"right\",\"count\":2,"
			"\"modifiers\":[\"shift\",\"ctrl\"]}"));
	cr_assert_eq(act.type, DG_ACTION_CLICK);
	cr_assert_eq(act.x, 100);
	cr_assert_eq(act.y, 200);
	cr_assert_eq(act.button, DG_BUTTON_RIGHT);
	cr_assert_eq(act.count, 2);
	cr_assert_eq(act.modifiers, DG_MOD_CTRL | DG_MOD_SHIFT);
	uint32_t ks[DG_MOD_COUNT];
	cr_assert_eq(dg_modifier_keysyms(act.modifiers, ks), 2);
	cr_assert_eq(ks[0], 0xffe3); /* Control_L first: canonical order */
	cr_assert_eq(ks[1], 0xffe1);
	assert_canon("{\"button\":\"right\",\"count\":2,\"modifiers\":[\"ctrl\",\"shift\"],"
		     "\"type\":\"click\",\"x\":100,\"y\":200}");
}

Test(action, click_defaults)
{
	assert_ok(parse("{\"type\":\"click\",\"x\":1,\"y\":2}"));
	cr_assert_eq(act.button, DG_BUTTON_LEFT);
	cr_assert_eq(act.count, 1);
	cr_assert_eq(act.modifiers, 0);
	assert_canon("{\"button\":\"left\",\"count\":1,\"modifiers\":[],\"type\":\"click\","
		     "\"x\":1,\"y\":2}");
}

Test(action, buttons_and_modifiers)
{
	static const struct {
		const char *name;
		enum dg_button b;
	} bs[] = {{"left", DG_BUTTON_LEFT},     {"middle", DG_BUTTON_MIDDLE},
		  {"right", DG_BUTTON_RIGHT},   {"back", DG_BUTTON_BACK},
		  {"forward", DG_BUTTON_FORWARD}};
	for (size_t i = 0; i < sizeof(bs) / sizeof(bs[0]); i++) {
		assert_ok(parsef("{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"%s\"}", bs[i].name));
		cr_assert_eq(act.button, bs[i].b, "%s", bs[i].name);
		cr_assert_str_eq(dg_button_name(bs[i].b), bs[i].name);
	}
	cr_assert_eq(DG_BUTTON_BACK, 8);   /* X button numbers */
	cr_assert_eq(DG_BUTTON_FORWARD, 9);

	assert_ok(parse("{\"type\":\"click\",\"x\":1,\"y\":2,"
			"\"modifiers\":[\"meta\",\"super\",\"alt\",\"shift\",\"ctrl\"]}"));
	cr_assert_eq(act.modifiers, DG_MOD_CTRL | DG_MOD_SHIFT | DG_MOD_ALT | DG_MOD_SUPER |
					    DG_MOD_META);
	uint32_t ks[DG_MOD_COUNT];
	cr_assert_eq(dg_modifier_keysyms(act.modifiers, ks), 5);
	uint32_t want[] = {0xffe3, 0xffe1, 0xffe9, 0xffeb, 0xffe7};
	for (int i = 0; i < 5; i++)
		cr_assert_eq(ks[i], want[i], "modifier %d: 0x%x", i, ks[i]);
	cr_assert_eq(dg_modifier_keysyms(DG_MOD_META, ks), 1);
	cr_assert_eq(ks[0], 0xffe7);
}

Test(action, move)
{
	assert_ok(parse("{\"type\":\"move\",\"x\":5,\"y\":6,\"modifiers\":[\"alt\"]}"));
	cr_assert_eq(act.type, DG_ACTION_MOVE);
	cr_assert_eq(act.x, 5);
	cr_assert_eq(act.y, 6);
	cr_assert_eq(act.modifiers, DG_MOD_ALT);
	assert_ok(parse("{\"type\":\"move\",\"x\":5,\"y\":6}"));
	assert_canon("{\"modifiers\":[],\"type\":\"move\",\"x\":5,\"y\":6}");
}

Test(action, drag)
{
	assert_ok(parse("{\"type\":\"drag\",\"path\":[[1,2],[3,4],[1279,799]],\"button\":\"middle\","
			"\"modifiers\":[\"shift\"]}"));
	cr_assert_eq(act.type, DG_ACTION_DRAG);
	cr_assert_eq(act.n_path, 3);
	cr_assert_eq(act.path[0][0], 1);
	cr_assert_eq(act.path[0][1], 2);
	cr_assert_eq(act.path[1][0], 3);
	cr_assert_eq(act.path[1][1], 4);
	cr_assert_eq(act.path[2][0], 1279);
	cr_assert_eq(act.path[2][1], 799);
	cr_assert_eq(act.button, DG_BUTTON_MIDDLE);
	cr_assert_eq(act.modifiers, DG_MOD_SHIFT);
	assert_ok(parse("{\"type\":\"drag\",\"path\":[[1,2],[3,4]]}"));
	assert_canon("{\"button\":\"left\",\"modifiers\":[],\"path\":[[1,2],[3,4]],"
		     "\"type\":\"drag\"}");
}

Test(action, mouse_down_up)
{
	assert_ok(parse("{\"type\":\"mouse_down\"}"));
	cr_assert_eq(act.type, DG_ACTION_MOUSE_DOWN);
	cr_assert_eq(act.button, DG_BUTTON_LEFT);
	cr_assert(!act.has_xy);
	assert_canon("{\"button\":\"left\",\"type\":\"mouse_down\"}");

	assert_ok(parse("{\"type\":\"mouse_up\",\"button\":\"right\",\"x\":0,\"y\":0}"));
	cr_assert_eq(act.type, DG_ACTION_MOUSE_UP);
	cr_assert_eq(act.button, DG_BUTTON_RIGHT);
	cr_assert(act.has_xy);
	cr_assert_eq(act.x, 0);
	cr_assert_eq(act.y, 0);
	assert_canon("{\"button\":\"right\",\"type\":\"mouse_up\",\"x\":0,\"y\":0}");

	assert_refused(parse("{\"type\":\"mouse_down\",\"x\":3}"),
		       "action.y: required with x (give both or neither)");
	assert_refused(parse("{\"type\":\"mouse_up\",\"y\":3}"),
		       "action.x: required with y (give both or neither)");
	assert_refused(parse("{\"type\":\"mouse_up\",\"x\":1280,\"y\":3}"),
		       "action.x: 1280 is off the screen (width 1280)");
	assert_refused(parse("{\"type\":\"mouse_down\",\"count\":2}"),
		       "action: unknown field \"count\" for mouse_down (allowed: x, y, button)");
}

Test(action, scroll)
{
	assert_ok(parse("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"dx\":-3,\"dy\":5,"
			"\"modifiers\":[\"ctrl\"]}"));
	cr_assert_eq(act.type, DG_ACTION_SCROLL);
	cr_assert_eq(act.x, 10);
	cr_assert_eq(act.y, 20);
	cr_assert_eq(act.dx, -3);
	cr_assert_eq(act.dy, 5);
	cr_assert_eq(act.modifiers, DG_MOD_CTRL);

	assert_ok(parse("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"dy\":-1}"));
	cr_assert_eq(act.dx, 0);
	cr_assert_eq(act.dy, -1);
	assert_canon("{\"dx\":0,\"dy\":-1,\"modifiers\":[],\"type\":\"scroll\",\"x\":10,\"y\":20}");
	assert_ok(parse("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"dx\":1}"));
	cr_assert_eq(act.dx, 1);
	cr_assert_eq(act.dy, 0);

	assert_refused(parse("{\"type\":\"scroll\",\"x\":10,\"y\":20}"),
		       "action: scroll needs dx or dy other than 0");
	assert_refused(parse("{\"type\":\"scroll\",\"x\":10,\"y\":20,\"dx\":0,\"dy\":0}"),
		       "action: scroll needs dx or dy other than 0");
}

Test(action, type_text)
{
	assert_ok(parse("{\"type\":\"type\",\"text\":\"Hello, w\\u00f6rld \\u6f22\\u5b57 "
			"\\ud83d\\ude00\\n\"}"));
	cr_assert_eq(act.type, DG_ACTION_TYPE);
	cr_assert_str_eq(act.text, "Hello, wörld 漢字 😀\n");
	cr_assert_eq(act.text_len, strlen("Hello, wörld 漢字 😀\n"));

	uint32_t ks[32];
	size_t n;
	assert_ok(dg_text_to_keysyms(act.text, act.text_len, ks, 32, &n, &err));
	cr_assert_eq(n, 18);
	cr_assert_eq(ks[0], 'H');
	cr_assert_eq(ks[8], 0xf6);        /* ö, Latin-1 */
	cr_assert_eq(ks[13], 0x01006f22); /* 漢 */
	cr_assert_eq(ks[14], 0x01005b57); /* 字 */
	cr_assert_eq(ks[16], 0x0101f600); /* 😀, from a surrogate pair escape */
	cr_assert_eq(ks[17], 0xff0d);     /* Return */
	assert_canon("{\"text\":\"Hello, wörld 漢字 😀\\n\",\"type\":\"type\"}");
}

Test(action, type_line_breaks_and_refusals)
{
	assert_ok(parse("{\"type\":\"type\",\"text\":\"a\\r\\nb\\rc\\td\"}"));
	cr_assert_str_eq(act.text, "a\nb\nc\td");
	cr_assert_eq(act.text_len, 7);
	assert_canon("{\"text\":\"a\\nb\\nc\\td\",\"type\":\"type\"}");

	assert_refused(parse("{\"type\":\"type\",\"text\":\"\"}"),
		       "action.text: empty (type needs at least one character)");
	assert_refused(parse("{\"type\":\"type\",\"text\":\"a\\u0000b\"}"),
		       "action.text: control character U+0000 at byte 1 cannot be typed (only "
		       "\\n, \\r and \\t can; use a key action)");
	assert_refused(parse("{\"type\":\"type\",\"text\":\"ab\\b\"}"),
		       "action.text: control character U+0008 at byte 2 cannot be typed (only "
		       "\\n, \\r and \\t can; use a key action)");
	assert_refused(parse("{\"type\":\"type\",\"text\":\"\\u001b[2J\"}"),
		       "action.text: control character U+001B at byte 0 cannot be typed (only "
		       "\\n, \\r and \\t can; use a key action)");
	assert_refused(parse("{\"type\":\"type\",\"text\":\"\\u0085\"}"),
		       "action.text: control character U+0085 at byte 0 cannot be typed (only "
		       "\\n, \\r and \\t can; use a key action)");
	assert_refused(parse("{\"type\":\"type\",\"text\":[\"a\"]}"),
		       "action.text: an array is not a string");
}

/* Invalid UTF-8 never reaches the action: raw bytes and lone surrogate
 * escapes are refused by the decoder, with the position. */
Test(action, type_invalid_utf8)
{
	static const char *const bad[] = {
		"{\"type\":\"type\",\"text\":\"a\x80\"}",
		"{\"type\":\"type\",\"text\":\"\xc3\"}",
		"{\"type\":\"type\",\"text\":\"\xc0\xaf\"}",
		"{\"type\":\"type\",\"text\":\"\xe0\x80\xaf\"}",
		"{\"type\":\"type\",\"text\":\"\xed\xa0\x80\"}",
		"{\"type\":\"type\",\"text\":\"\xf4\x90\x80\x80\"}",
		"{\"type\":\"type\",\"text\":\"\xff\"}",
		"{\"type\":\"type\",\"text\":\"\\ud800\"}",
		"{\"type\":\"type\",\"text\":\"\\udc00x\"}",
		"{\"type\":\"type\",\"text\":\"\\ud83dx\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_refused_prefix(parse(bad[i]), -EINVAL, "action: invalid JSON at line 1, column");
}

/* An adapter may build objects with jansson's _nocheck calls; the parser
 * does not trust them to be UTF-8. */
Test(action, obj_with_unchecked_strings)
{
	static const struct {
		const char *key, *val, *type, *msg;
	} cases[] = {
		{"text", "a\xc0\xaf", "type",
		 "action.text: invalid UTF-8 at byte 1 (overlong encoding)"},
		{"url", "http://x/\xed\xa0\x80", "navigate",
		 "action.url: invalid UTF-8 at byte 9 (surrogate)"},
		{"keys", "\xc3", "key", "action.keys: unknown key \"\\xc3\" in \"\\xc3\""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *o = json_object();
		json_object_set_new(o, "type", json_string(cases[i].type));
		json_object_set_new_nocheck(o, cases[i].key, json_string_nocheck(cases[i].val));
		dg_action_free(&act);
		memset(&err, 0, sizeof(err));
		assert_refused(dg_action_parse_obj(o, W, H, &act, &err), cases[i].msg);
		json_decref(o);
	}
	json_t *o = json_object();
	json_object_set_new(o, "type", json_string("exec"));
	json_t *argv = json_array();
	json_array_append_new(argv, json_string_nocheck("ls\xff"));
	json_object_set_new(o, "argv", argv);
	assert_refused(dg_action_parse_obj(o, W, H, &act, &err),
		       "action.argv[0]: invalid UTF-8 at byte 2 (invalid lead byte)");
	json_decref(o);

	/* A key with a NUL cannot pass for the field before it. */
	o = json_object();
	json_object_set_new(o, "type", json_string("click"));
	json_object_set_new(o, "x", json_integer(1));
	json_object_set_new(o, "y", json_integer(1));
	json_object_setn_new_nocheck(o, "x\0z", 3, json_integer(2));
	assert_refused(dg_action_parse_obj(o, W, H, &act, &err),
		       "action: unknown field \"x\\x00z\" for click (allowed: x, y, button, count, "
		       "modifiers, ref)");
	json_decref(o);

	assert_refused(dg_action_parse_obj(NULL, W, H, &act, &err), "action: no object");
}

Test(action, key)
{
	assert_ok(parse("{\"type\":\"key\",\"keys\":\"ctrl+a BackSpace\"}"));
	cr_assert_eq(act.type, DG_ACTION_KEY);
	cr_assert_eq(act.n_chords, 2);
	cr_assert_eq(act.chords[0].n, 2);
	cr_assert_eq(act.chords[0].keysyms[0], 0xffe3);
	cr_assert_eq(act.chords[0].keysyms[1], 'a');
	cr_assert_eq(act.chords[1].n, 1);
	cr_assert_eq(act.chords[1].keysyms[0], 0xff08);
	assert_canon("{\"keys\":\"Control_L+a BackSpace\",\"type\":\"key\"}");

	assert_ok(parse("{\"type\":\"key\",\"keys\":\"ctrl+shift+Tab\"}"));
	cr_assert_eq(act.n_chords, 1);
	cr_assert_eq(act.chords[0].n, 3);
	cr_assert_eq(act.chords[0].keysyms[2], 0xff09);

	assert_refused(parse("{\"type\":\"key\",\"keys\":\"ctrl+Retrun\"}"),
		       "action.keys: unknown key \"Retrun\" in \"ctrl+Retrun\"");
	assert_refused(parse("{\"type\":\"key\",\"keys\":\"ctrl++\"}"),
		       "action.keys: empty key name in \"ctrl++\" (write '+' as plus)");
	assert_refused(parse("{\"type\":\"key\",\"keys\":\"+a\"}"),
		       "action.keys: empty key name in \"+a\" (write '+' as plus)");
	assert_refused(parse("{\"type\":\"key\",\"keys\":\"\"}"), "action.keys: no keys in \"\"");
	assert_refused(parse("{\"type\":\"key\",\"keys\":\"a\\u0000b\"}"),
		       "action.keys: contains NUL");
	assert_refused(parse("{\"type\":\"key\",\"keys\":[\"ctrl\",\"a\"]}"),
		       "action.keys: an array is not a string");
}

Test(action, hold_key)
{
	assert_ok(parse("{\"type\":\"hold_key\",\"keys\":\"shift\",\"ms\":1500}"));
	cr_assert_eq(act.type, DG_ACTION_HOLD_KEY);
	cr_assert_eq(act.n_chords, 1);
	cr_assert_eq(act.chords[0].keysyms[0], 0xffe1);
	cr_assert_eq(act.ms, 1500);
	assert_canon("{\"keys\":\"Shift_L\",\"ms\":1500,\"type\":\"hold_key\"}");
	assert_refused(parse("{\"type\":\"hold_key\",\"keys\":\"a b\",\"ms\":5}"),
		       "action.keys: hold_key holds one chord, got 2");
	assert_refused(parse("{\"type\":\"hold_key\",\"keys\":\"a\"}"),
		       "action.ms: required for hold_key");
}

Test(action, navigate)
{
	assert_ok(parse("{\"type\":\"navigate\",\"url\":\"https://example.com/a?b=c d#\\u00e9\"}"));
	cr_assert_eq(act.type, DG_ACTION_NAVIGATE);
	cr_assert_str_eq(act.url, "https://example.com/a?b=c d#é");
	assert_canon("{\"type\":\"navigate\",\"url\":\"https://example.com/a?b=c d#é\"}");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":\"\"}"), "action.url: empty");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":\"http://a/\\nb\"}"),
		       "action.url: control character U+000A at byte 9");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":\"http://a/\\u0000\"}"),
		       "action.url: control character U+0000 at byte 9");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":\"http://a/\\u007f\"}"),
		       "action.url: control character U+007F at byte 9");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":\"http://a/\\u009b\"}"),
		       "action.url: control character U+009B at byte 9");
	assert_refused(parse("{\"type\":\"navigate\",\"url\":5}"), "action.url: 5 is not a string");
}

Test(action, types_without_fields)
{
	static const struct {
		const char *name;
		enum dg_action_type t;
	} ts[] = {{"back", DG_ACTION_BACK},
		  {"forward", DG_ACTION_FORWARD},
		  {"reload", DG_ACTION_RELOAD},
		  {"cursor_position", DG_ACTION_CURSOR_POSITION},
		  {"get_page_text", DG_ACTION_GET_PAGE_TEXT},
		  {"list_tabs", DG_ACTION_LIST_TABS},
		  {"new_tab", DG_ACTION_NEW_TAB},
		  {"read_console", DG_ACTION_READ_CONSOLE},
		  {"read_network", DG_ACTION_READ_NETWORK}};
	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		assert_ok(parsef("{\"type\":\"%s\"}", ts[i].name));
		cr_assert_eq(act.type, ts[i].t, "%s", ts[i].name);
		char want[64];
		snprintf(want, sizeof(want), "{\"type\":\"%s\"}", ts[i].name);
		assert_canon(want);
		char msg[128];
		snprintf(msg, sizeof(msg), "action: unknown field \"x\" (%s takes no fields)",
			 ts[i].name);
		assert_refused(parsef("{\"type\":\"%s\",\"x\":1}", ts[i].name), msg);
	}
}

/* read_page: its defaults, each field at its bounds, and references. */
Test(action, read_page)
{
	assert_ok(parse("{\"type\":\"read_page\"}"));
	cr_assert_eq(act.type, DG_ACTION_READ_PAGE);
	assert_canon("{\"depth\":15,\"filter\":\"visible\",\"type\":\"read_page\"}");
	assert_ok(parse("{\"type\":\"read_page\",\"depth\":1,\"filter\":\"interactive\","
			"\"ref\":\"ref_7\"}"));
	cr_assert_eq(act.depth, 1);
	cr_assert_eq(act.filter, DG_READ_INTERACTIVE);
	cr_assert_eq(act.ref, 7);
	assert_canon("{\"depth\":1,\"filter\":\"interactive\",\"ref\":\"ref_7\","
		     "\"type\":\"read_page\"}");
	assert_ok(parsef("{\"type\":\"read_page\",\"depth\":%d,\"filter\":\"all\"}",
			 DG_ACTION_DEPTH_MAX));
	cr_assert_eq(act.filter, DG_READ_ALL);
	assert_ok(parsef("{\"type\":\"read_page\",\"ref\":\"ref_%d\"}", DG_ACTION_REF_MAX));
	cr_assert_eq(act.ref, DG_ACTION_REF_MAX);
	assert_refused(parse("{\"type\":\"read_page\",\"depth\":0}"),
		       "action.depth: 0 is out of range [1, 100]");
	assert_refused(parsef("{\"type\":\"read_page\",\"depth\":%d}", DG_ACTION_DEPTH_MAX + 1),
		       "action.depth: 101 is out of range [1, 100]");
	assert_refused(parse("{\"type\":\"read_page\",\"filter\":\"visible \"}"),
		       "action.filter: unknown filter \"visible \" (allowed: visible, interactive, "
		       "all)");
	assert_refused(parse("{\"type\":\"read_page\",\"ref\":\"ref_1000000000\"}"),
		       "action.ref: \"ref_1000000000\" is past the last reference (ref_999999999)");
	static const char *const bad[] = {"ref_0", "ref_01", "ref_", "ref_1a", "Ref_1", "ref_-1",
					  "ref_ 1", "7", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[128];
		snprintf(want, sizeof(want), "action.ref: \"%s\" is not an element reference (ref_N)",
			 bad[i]);
		assert_refused(parsef("{\"type\":\"read_page\",\"ref\":\"%s\"}", bad[i]), want);
	}
	assert_refused(parse("{\"type\":\"read_page\",\"ref\":7}"),
		       "action.ref: 7 is not a string");
	assert_refused(parse("{\"type\":\"read_page\",\"x\":1}"),
		       "action: unknown field \"x\" for read_page (allowed: depth, filter, ref)");
}

Test(action, find)
{
	assert_ok(parse("{\"type\":\"find\",\"query\":\"search bar\"}"));
	cr_assert_eq(act.type, DG_ACTION_FIND);
	cr_assert_str_eq(act.query, "search bar");
	assert_canon("{\"query\":\"search bar\",\"type\":\"find\"}");
	char *q = repeat('q', DG_ACTION_QUERY_MAX);
	assert_ok(parsef("{\"type\":\"find\",\"query\":\"%s\"}", q));
	free(q);
	q = repeat('q', DG_ACTION_QUERY_MAX + 1);
	assert_refused(parsef("{\"type\":\"find\",\"query\":\"%s\"}", q),
		       "action.query: 1025 bytes is over the limit of 1024 bytes");
	free(q);
	assert_refused(parse("{\"type\":\"find\",\"query\":\"\"}"), "action.query: empty");
	assert_refused(parse("{\"type\":\"find\"}"), "action.query: required for find");
	assert_refused_prefix(parse("{\"type\":\"find\",\"query\":\"a\\u0001\"}"), -EINVAL,
			      "action.query: ");
}

Test(action, zoom)
{
	assert_ok(parse("{\"type\":\"zoom\",\"region\":[10,20,30,40]}"));
	cr_assert_eq(act.type, DG_ACTION_ZOOM);
	cr_assert_eq(act.region[0], 10);
	cr_assert_eq(act.region[1], 20);
	cr_assert_eq(act.region[2], 30);
	cr_assert_eq(act.region[3], 40);
	assert_canon("{\"region\":[10,20,30,40],\"type\":\"zoom\"}");
	/* The whole screen: x2, y2 are exclusive edges. */
	assert_ok(parse("{\"type\":\"zoom\",\"region\":[0,0,1280,800]}"));
	/* One pixel. */
	assert_ok(parse("{\"type\":\"zoom\",\"region\":[1279,799,1280,800]}"));

	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,0,1281,800]}"),
		       "action.region[2]: 1281 is off the screen (width 1280)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,0,1280,801]}"),
		       "action.region[3]: 801 is off the screen (height 800)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[1280,0,1280,800]}"),
		       "action.region[0]: 1280 is off the screen (width 1280)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,800,10,800]}"),
		       "action.region[1]: 800 is off the screen (height 800)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[-1,0,10,10]}"),
		       "action.region[0]: -1 is off the screen (width 1280)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[10,0,10,10]}"),
		       "action.region: x2 (10) must be greater than x1 (10)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[10,20,5,30]}"),
		       "action.region: x2 (5) must be greater than x1 (10)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,20,5,19]}"),
		       "action.region: y2 (19) must be greater than y1 (20)");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,0,5]}"),
		       "action.region: an array is not an array [x1, y1, x2, y2]");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,0,5,5,5]}"),
		       "action.region: an array is not an array [x1, y1, x2, y2]");
	assert_refused(parse("{\"type\":\"zoom\",\"region\":[0,0,5,\"5\"]}"),
		       "action.region[3]: \"5\" is not an integer");
}

Test(action, wait)
{
	assert_ok(parse("{\"type\":\"wait\",\"ms\":250}"));
	cr_assert_eq(act.type, DG_ACTION_WAIT);
	cr_assert_eq(act.ms, 250);
	assert_canon("{\"ms\":250,\"type\":\"wait\"}");
	assert_refused(parse("{\"type\":\"wait\"}"), "action.ms: required for wait");
}

Test(action, exec)
{
	assert_ok(parse("{\"type\":\"exec\",\"argv\":[\"python3\",\"-c\",\"print(1)\",\"\"],"
			"\"stdin\":\"in\\u0000put\",\"timeout_ms\":5000}"));
	cr_assert_eq(act.type, DG_ACTION_EXEC);
	cr_assert_eq(act.argc, 4);
	cr_assert_str_eq(act.argv[0], "python3");
	cr_assert_str_eq(act.argv[1], "-c");
	cr_assert_str_eq(act.argv[2], "print(1)");
	cr_assert_str_eq(act.argv[3], ""); /* empty arguments after argv[0] are fine */
	cr_assert_null(act.argv[4]);
	cr_assert_eq(act.stdin_len, 6); /* stdin is data: NUL kept */
	cr_assert_eq(memcmp(act.stdin_data, "in\0put", 6), 0);
	cr_assert_eq(act.timeout_ms, 5000);
	assert_canon("{\"argv\":[\"python3\",\"-c\",\"print(1)\",\"\"],\"stdin\":\"in\\u0000put\","
		     "\"timeout_ms\":5000,\"type\":\"exec\"}");

	/* Defaults: empty stdin, no timeout (the policy's applies). */
	assert_ok(parse("{\"type\":\"exec\",\"argv\":[\"ls\"]}"));
	cr_assert_eq(act.argc, 1);
	cr_assert_str_eq(act.stdin_data, "");
	cr_assert_eq(act.stdin_len, 0);
	cr_assert_eq(act.timeout_ms, 0);
	assert_canon("{\"argv\":[\"ls\"],\"stdin\":\"\",\"type\":\"exec\"}");

	assert_refused(parse("{\"type\":\"exec\",\"argv\":[\"\"]}"),
		       "action.argv[0]: empty (the program to run)");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":[\"sh\",\"a\\u0000b\"]}"),
		       "action.argv[1]: contains NUL at byte 1");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":[\"sh\",1]}"),
		       "action.argv[1]: 1 is not a string");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":\"ls -l\"}"),
		       "action.argv: \"ls -l\" is not an array of strings");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":[]}"),
		       "action.argv: 0 strings; exec takes 1 to 256");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":[\"ls\"],\"stdin\":null}"),
		       "action.stdin: null is not a string");
	assert_refused(parse("{\"type\":\"exec\",\"argv\":[\"ls\"],\"timeout_ms\":0}"),
		       "action.timeout_ms: 0 is out of range [1, 604800000]");
	assert_refused(parse("{\"type\":\"exec\",\"stdin\":\"x\"}"),
		       "action.argv: required for exec");
}

Test(action, type_names)
{
	for (int t = 0; t < DG_ACTION_N_TYPES; t++) {
		const char *name = dg_action_type_name((enum dg_action_type)t);
		cr_assert(name, "type %d has no name", t);
		cr_assert_eq(dg_action_type_from_name(name), t, "%s", name);
	}
	cr_assert_null(dg_action_type_name(DG_ACTION_N_TYPES));
	cr_assert_null(dg_action_type_name((enum dg_action_type)-1));
	cr_assert_eq(dg_action_type_from_name("clik"), -1);
	cr_assert_null(dg_button_name((enum dg_button)4));
	cr_assert_str_eq(dg_action_type_name(DG_ACTION_CURSOR_POSITION), "cursor_position");
}

/* ---- refusals name their field ------------------------------------------------ */

struct refusal {
	const char *json;
	const char *msg;
};

static void check_refusals(const struct refusal *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = parse(r[i].json);
		cr_assert_eq(rc, -EINVAL, "%s: rc %d", r[i].json, rc);
		cr_assert_str_eq(err.msg, r[i].msg, "for %s", r[i].json);
		assert_zeroed();
	}
}

Test(action, unknown_and_missing)
{
	static const struct refusal r[] = {
		{"{\"type\":\"clik\",\"x\":1,\"y\":2}", "action.type: unknown action \"clik\""},
		{"{\"type\":\"Click\",\"x\":1,\"y\":2}", "action.type: unknown action \"Click\""},
		{"{\"type\":\"click\\u0000\",\"x\":1,\"y\":2}",
		 "action.type: unknown action \"click\\x00\""},
		{"{\"x\":1,\"y\":2}", "action.type: missing (what the action is: click, type, key, ...)"},
		{"{}", "action.type: missing (what the action is: click, type, key, ...)"},
		{"{\"type\":5}", "action.type: 5 is not a string"},
		{"{\"type\":null}", "action.type: null is not a string"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"butto\":\"left\"}",
		 "action: unknown field \"butto\" for click (allowed: x, y, button, count, modifiers, ref)"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"text\":\"a\"}",
		 "action: unknown field \"text\" for click (allowed: x, y, button, count, modifiers, ref)"},
		{"{\"type\":\"type\",\"text\":\"a\",\"X\":1}",
		 "action: unknown field \"X\" for type (allowed: text)"},
		{"{\"type\":\"click\",\"x\":1}", "action.y: required for click (or ref: an element)"},
		{"{\"type\":\"click\",\"y\":1}", "action.x: required for click (or ref: an element)"},
		{"{\"type\":\"move\"}", "action.x: required for move (or ref: an element)"},
		{"{\"type\":\"drag\"}", "action.path: required for drag"},
		{"{\"type\":\"scroll\",\"x\":1,\"dy\":1}", "action.y: required for scroll"},
		{"{\"type\":\"type\"}", "action.text: required for type"},
		{"{\"type\":\"key\"}", "action.keys: required for key"},
		{"{\"type\":\"navigate\"}", "action.url: required for navigate"},
		{"{\"type\":\"zoom\"}", "action.region: required for zoom"},
		/* An unknown field is reported before a missing one. */
		{"{\"type\":\"click\",\"xx\":1}",
		 "action: unknown field \"xx\" for click (allowed: x, y, button, count, modifiers, ref)"},
	};
	check_refusals(r, sizeof(r) / sizeof(r[0]));
}

Test(action, wrong_types)
{
	static const struct refusal r[] = {
		{"{\"type\":\"click\",\"x\":\"10\",\"y\":2}", "action.x: \"10\" is not an integer"},
		{"{\"type\":\"click\",\"x\":1.5,\"y\":2}", "action.x: 1.5 is not an integer"},
		{"{\"type\":\"click\",\"x\":10.0,\"y\":2}", "action.x: 10.0 is not an integer"},
		{"{\"type\":\"click\",\"x\":1e2,\"y\":2}", "action.x: 100.0 is not an integer"},
		{"{\"type\":\"click\",\"x\":true,\"y\":2}", "action.x: true is not an integer"},
		{"{\"type\":\"click\",\"x\":null,\"y\":2}", "action.x: null is not an integer"},
		{"{\"type\":\"click\",\"x\":[1],\"y\":2}", "action.x: an array is not an integer"},
		{"{\"type\":\"click\",\"x\":{},\"y\":2}", "action.x: an object is not an integer"},
		{"{\"type\":\"click\",\"x\":1,\"y\":false}", "action.y: false is not an integer"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":1}", "action.button: 1 is not a string"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"lef\"}",
		 "action.button: unknown button \"lef\" (allowed: left, middle, right, back, forward)"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"LEFT\"}",
		 "action.button: unknown button \"LEFT\" (allowed: left, middle, right, back, forward)"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"count\":\"2\"}",
		 "action.count: \"2\" is not an integer"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"count\":0}",
		 "action.count: 0 is out of range [1, 3]"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":\"ctrl\"}",
		 "action.modifiers: \"ctrl\" is not an array of modifier names"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[1]}",
		 "action.modifiers[0]: 1 is not a string"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"ctrl\",\"hyper\"]}",
		 "action.modifiers[1]: unknown modifier \"hyper\" (allowed: ctrl, shift, alt, super, "
		 "meta)"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"control\"]}",
		 "action.modifiers[0]: unknown modifier \"control\" (allowed: ctrl, shift, alt, "
		 "super, meta)"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"ctrl\",\"shift\",\"ctrl\"]}",
		 "action.modifiers[2]: modifier \"ctrl\" is given twice"},
		{"{\"type\":\"drag\",\"path\":{}}", "action.path: an object is not an array of [x, y] "
						    "points"},
		{"{\"type\":\"drag\",\"path\":[[1,2],[3]]}",
		 "action.path[1]: an array is not an [x, y] pair"},
		{"{\"type\":\"drag\",\"path\":[[1,2],5]}", "action.path[1]: 5 is not an [x, y] pair"},
		{"{\"type\":\"drag\",\"path\":[[1,2],[3,4,5]]}",
		 "action.path[1]: an array is not an [x, y] pair"},
		{"{\"type\":\"drag\",\"path\":[[1,2],[3,\"4\"]]}",
		 "action.path[1][1]: \"4\" is not an integer"},
		{"{\"type\":\"scroll\",\"x\":1,\"y\":2,\"dy\":1.0}", "action.dy: 1.0 is not an integer"},
		{"{\"type\":\"scroll\",\"x\":1,\"y\":2,\"dx\":\"1\"}",
		 "action.dx: \"1\" is not an integer"},
		{"{\"type\":\"wait\",\"ms\":1.5}", "action.ms: 1.5 is not an integer"},
		{"{\"type\":\"wait\",\"ms\":\"10\"}", "action.ms: \"10\" is not an integer"},
		{"{\"type\":\"exec\",\"argv\":[\"ls\"],\"timeout_ms\":\"5\"}",
		 "action.timeout_ms: \"5\" is not an integer"},
		{"{\"type\":\"zoom\",\"region\":\"0,0,1,1\"}",
		 "action.region: \"0,0,1,1\" is not an array [x1, y1, x2, y2]"},
		{"{\"type\":\"click\",\"x\":\"NaN\",\"y\":2}", "action.x: \"NaN\" is not an integer"},
		{"{\"type\":\"click\",\"x\":\"Infinity\",\"y\":2}",
		 "action.x: \"Infinity\" is not an integer"},
		{"{\"type\":\"click\",\"x\":\"0x10\",\"y\":2}", "action.x: \"0x10\" is not an integer"},
	};
	check_refusals(r, sizeof(r) / sizeof(r[0]));
}

Test(action, not_an_object_or_not_json)
{
	assert_refused(parse("[1,2]"), "action: an array is not a JSON object");
	assert_refused_prefix(parse("\"click\""), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("5"), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse(""), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{"), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"back\"} {}"), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"back\"}x"), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{'type':'back'}"), -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":NaN,\"y\":1}"), -EINVAL,
			      "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":Infinity,\"y\":1}"), -EINVAL,
			      "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":01,\"y\":1}"), -EINVAL,
			      "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":+1,\"y\":1}"), -EINVAL,
			      "action: invalid JSON");
	/* A NUL byte in the text itself (not the \u0000 escape). */
	assert_refused_prefix(parse_len("{\"type\":\"back\"}\0", 16), -EINVAL,
			      "action: invalid JSON");
	assert_refused_prefix(parse_len("{\"type\":\"ba\0ck\"}", 16), -EINVAL,
			      "action: invalid JSON");
	/* The length given is what counts, not a NUL terminator. */
	assert_ok(parse_len("{\"type\":\"back\"}garbage", 15));
	cr_assert_eq(dg_action_parse(NULL, 0, W, H, &act, &err), -EINVAL);
}

Test(action, duplicated_fields)
{
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":1,\"x\":2,\"y\":3}"), -EINVAL,
			      "action: duplicated field at line 1, column ");
	assert_refused_prefix(parse("{\"type\":\"click\",\"type\":\"move\",\"x\":1,\"y\":3}"),
			      -EINVAL, "action: duplicated field");
	assert_refused_prefix(parse("{\"type\":\"key\",\"keys\":\"a\",\"keys\":\"ctrl+alt+Delete\"}"),
			      -EINVAL, "action: duplicated field");
	/* The message names the field that came twice. */
	cr_assert(strstr(err.msg, "keys"), "%s", err.msg);
}

Test(action, off_the_screen)
{
	assert_ok(parse("{\"type\":\"click\",\"x\":1279,\"y\":799}"));
	cr_assert_eq(act.x, W - 1);
	cr_assert_eq(act.y, H - 1);
	assert_ok(parse("{\"type\":\"click\",\"x\":0,\"y\":0}"));
	assert_ok(parse("{\"type\":\"click\",\"x\":-0,\"y\":0}"));
	cr_assert_eq(act.x, 0);

	static const struct refusal r[] = {
		{"{\"type\":\"click\",\"x\":1280,\"y\":0}",
		 "action.x: 1280 is off the screen (width 1280)"},
		{"{\"type\":\"click\",\"x\":-1,\"y\":0}", "action.x: -1 is off the screen (width 1280)"},
		{"{\"type\":\"click\",\"x\":0,\"y\":800}",
		 "action.y: 800 is off the screen (height 800)"},
		{"{\"type\":\"click\",\"x\":0,\"y\":-1}", "action.y: -1 is off the screen (height 800)"},
		{"{\"type\":\"move\",\"x\":1280,\"y\":0}",
		 "action.x: 1280 is off the screen (width 1280)"},
		{"{\"type\":\"scroll\",\"x\":0,\"y\":800,\"dy\":1}",
		 "action.y: 800 is off the screen (height 800)"},
		{"{\"type\":\"drag\",\"path\":[[0,0],[1280,5]]}",
		 "action.path[1][0]: 1280 is off the screen (width 1280)"},
		{"{\"type\":\"drag\",\"path\":[[0,-1],[1,5]]}",
		 "action.path[0][1]: -1 is off the screen (height 800)"},
		{"{\"type\":\"click\",\"x\":9223372036854775807,\"y\":0}",
		 "action.x: 9223372036854775807 is off the screen (width 1280)"},
		{"{\"type\":\"click\",\"x\":-9223372036854775808,\"y\":0}",
		 "action.x: -9223372036854775808 is off the screen (width 1280)"},
		/* Would be 0 if truncated to 32 bits. */
		{"{\"type\":\"click\",\"x\":4294967296,\"y\":0}",
		 "action.x: 4294967296 is off the screen (width 1280)"},
	};
	check_refusals(r, sizeof(r) / sizeof(r[0]));

	/* Another screen size moves the edge. */
	dg_action_free(&act);
	const char *j = "{\"type\":\"click\",\"x\":1919,\"y\":1079}";
	assert_ok(dg_action_parse(j, strlen(j), 1920, 1080, &act, &err));
	j = "{\"type\":\"click\",\"x\":1920,\"y\":0}";
	assert_refused(dg_action_parse(j, strlen(j), 1920, 1080, &act, &err),
		       "action.x: 1920 is off the screen (width 1920)");
	/* A 1x1 screen has one point. */
	j = "{\"type\":\"click\",\"x\":0,\"y\":0}";
	assert_ok(dg_action_parse(j, strlen(j), 1, 1, &act, &err));
	j = "{\"type\":\"click\",\"x\":0,\"y\":1}";
	assert_refused(dg_action_parse(j, strlen(j), 1, 1, &act, &err),
		       "action.y: 1 is off the screen (height 1)");
}

Test(action, screen_size)
{
	const char *j = "{\"type\":\"back\"}";
	assert_ok(dg_action_parse(j, strlen(j), DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, &act,
				  &err));
	assert_refused(dg_action_parse(j, strlen(j), DG_ACTION_SCREEN_MAX + 1, 800, &act, &err),
		       "action: screen 16385x800 is not a valid size (1 to 16384)");
	assert_refused(dg_action_parse(j, strlen(j), 1280, DG_ACTION_SCREEN_MAX + 1, &act, &err),
		       "action: screen 1280x16385 is not a valid size (1 to 16384)");
	assert_refused(dg_action_parse(j, strlen(j), 0, 800, &act, &err),
		       "action: screen 0x800 is not a valid size (1 to 16384)");
	assert_refused(dg_action_parse(j, strlen(j), 1280, -5, &act, &err),
		       "action: screen 1280x-5 is not a valid size (1 to 16384)");
}

/* ---- limits, each at its boundary ------------------------------------------- */

/* Parses {"type":"<type>","<field>":<value>...} with a numeric field. */
static void int_bound(const char *prefix, const char *field, long lo, long hi, const char *suffix)
{
	char msg[160];
	assert_ok(parsef("{%s\"%s\":%ld%s}", prefix, field, lo, suffix));
	assert_ok(parsef("{%s\"%s\":%ld%s}", prefix, field, hi, suffix));
	snprintf(msg, sizeof(msg), "action.%s: %ld is out of range [%ld, %ld]", field, lo - 1, lo,
		 hi);
	assert_refused(parsef("{%s\"%s\":%ld%s}", prefix, field, lo - 1, suffix), msg);
	snprintf(msg, sizeof(msg), "action.%s: %ld is out of range [%ld, %ld]", field, hi + 1, lo,
		 hi);
	assert_refused(parsef("{%s\"%s\":%ld%s}", prefix, field, hi + 1, suffix), msg);
}

Test(limits, integers)
{
	int_bound("\"type\":\"click\",\"x\":1,\"y\":1,", "count", 1, DG_ACTION_COUNT_MAX, "");
	int_bound("\"type\":\"scroll\",\"x\":1,\"y\":1,", "dx", -DG_ACTION_SCROLL_MAX,
		  DG_ACTION_SCROLL_MAX, ",\"dy\":1");
	int_bound("\"type\":\"scroll\",\"x\":1,\"y\":1,", "dy", -DG_ACTION_SCROLL_MAX,
		  DG_ACTION_SCROLL_MAX, ",\"dx\":1");
	int_bound("\"type\":\"hold_key\",\"keys\":\"a\",", "ms", 0, DG_ACTION_HOLD_MS_MAX, "");
	int_bound("\"type\":\"wait\",", "ms", 0, DG_ACTION_WAIT_MS_MAX, "");
	int_bound("\"type\":\"exec\",\"argv\":[\"ls\"],", "timeout_ms", 1, DG_ACTION_TIMEOUT_MS_MAX,
		  "");
	/* Values that would wrap into range if narrowed to int. */
	assert_refused(parse("{\"type\":\"click\",\"x\":1,\"y\":1,\"count\":4294967297}"),
		       "action.count: 4294967297 is out of range [1, 3]");
	assert_refused(parse("{\"type\":\"wait\",\"ms\":-4294967296}"),
		       "action.ms: -4294967296 is out of range [0, 60000]");
}

/* {"type":"drag","path":[[0,0],...]} with n points. */
static char *drag_json(size_t n)
{
	size_t cap = 64 + n * 8;
	char *s = malloc(cap);
	cr_assert(s);
	strcpy(s, "{\"type\":\"drag\",\"path\":[");
	for (size_t i = 0; i < n; i++)
		strcat(s, i ? ",[1,1]" : "[0,0]");
	strcat(s, "]}");
	return s;
}

Test(limits, drag_path)
{
	char *s = drag_json(DG_ACTION_PATH_MAX);
	assert_ok(parse(s));
	cr_assert_eq(act.n_path, DG_ACTION_PATH_MAX);
	free(s);
	s = drag_json(DG_ACTION_PATH_MAX + 1);
	assert_refused(parse(s), "action.path: 1025 points; a drag takes 2 to 1024");
	free(s);
	s = drag_json(2);
	assert_ok(parse(s));
	free(s);
	s = drag_json(1);
	assert_refused(parse(s), "action.path: 1 points; a drag takes 2 to 1024");
	free(s);
}

Test(limits, text)
{
	char *t = repeat('a', DG_ACTION_TEXT_MAX);
	assert_ok(parsef("{\"type\":\"type\",\"text\":\"%s\"}", t));
	cr_assert_eq(act.text_len, DG_ACTION_TEXT_MAX);
	free(t);
	t = repeat('a', DG_ACTION_TEXT_MAX + 1);
	assert_refused(parsef("{\"type\":\"type\",\"text\":\"%s\"}", t),
		       "action.text: 16385 bytes is over the limit of 16384 bytes");
	free(t);

	/* The limit is in bytes: 8192 two-byte characters fit, one more does not. */
	size_t n = DG_ACTION_TEXT_MAX / 2;
	char *e = malloc(2 * n + 3);
	for (size_t i = 0; i < n; i++)
		memcpy(e + 2 * i, "é", 2);
	e[2 * n] = '\0';
	assert_ok(parsef("{\"type\":\"type\",\"text\":\"%s\"}", e));
	cr_assert_eq(act.text_len, DG_ACTION_TEXT_MAX);
	memcpy(e + 2 * n, "é", 3);
	assert_refused(parsef("{\"type\":\"type\",\"text\":\"%s\"}", e),
		       "action.text: 16386 bytes is over the limit of 16384 bytes");
	free(e);
}

Test(limits, keys)
{
	char *pad = repeat(' ', DG_ACTION_KEYS_MAX - 1);
	assert_ok(parsef("{\"type\":\"key\",\"keys\":\"a%s\"}", pad));
	assert_refused(parsef("{\"type\":\"key\",\"keys\":\"a %s\"}", pad),
		       "action.keys: more than 8192 bytes");
	free(pad);

	char buf[4 * DG_ACTION_CHORDS_MAX + 8] = "";
	for (int i = 0; i < DG_ACTION_CHORDS_MAX; i++)
		strcat(buf, i ? " F1" : "F1");
	assert_ok(parsef("{\"type\":\"key\",\"keys\":\"%s\"}", buf));
	cr_assert_eq(act.n_chords, DG_ACTION_CHORDS_MAX);
	strcat(buf, " F1");
	cr_assert_eq(parsef("{\"type\":\"key\",\"keys\":\"%s\"}", buf), -EINVAL);
	cr_assert(strncmp(err.msg, "action.keys: more than 32 chords in \"F1 F1", 41) == 0, "%s",
		  err.msg);

	assert_ok(parse("{\"type\":\"key\",\"keys\":\"a+b+c+d+e+f+g+h\"}"));
	cr_assert_eq(act.chords[0].n, DG_CHORD_MAX);
	assert_refused(parse("{\"type\":\"key\",\"keys\":\"a+b+c+d+e+f+g+h+i\"}"),
		       "action.keys: more than 8 keys in one chord in \"a+b+c+d+e+f+g+h+i\"");
}

Test(limits, url)
{
	char *u = repeat('a', DG_ACTION_URL_MAX);
	memcpy(u, "https://", 8);
	assert_ok(parsef("{\"type\":\"navigate\",\"url\":\"%s\"}", u));
	cr_assert_eq(strlen(act.url), DG_ACTION_URL_MAX);
	free(u);
	u = repeat('a', DG_ACTION_URL_MAX + 1);
	assert_refused(parsef("{\"type\":\"navigate\",\"url\":\"%s\"}", u),
		       "action.url: 8193 bytes is over the limit of 8192 bytes");
	free(u);
}

/* {"type":"exec","argv":["a",...]} with n strings. */
static char *argv_json(size_t n, size_t arg_len)
{
	char *arg = repeat('a', arg_len);
	size_t cap = 64 + n * (arg_len + 3);
	char *s = malloc(cap);
	cr_assert(s);
	strcpy(s, "{\"type\":\"exec\",\"argv\":[");
	for (size_t i = 0; i < n; i++) {
		strcat(s, i ? ",\"" : "\"");
		strcat(s, arg);
		strcat(s, "\"");
	}
	strcat(s, "]}");
	free(arg);
	return s;
}

Test(limits, exec)
{
	char *s = argv_json(DG_ACTION_ARGV_MAX, 1);
	assert_ok(parse(s));
	cr_assert_eq(act.argc, DG_ACTION_ARGV_MAX);
	cr_assert_null(act.argv[DG_ACTION_ARGV_MAX]);
	free(s);
	s = argv_json(DG_ACTION_ARGV_MAX + 1, 1);
	assert_refused(parse(s), "action.argv: 257 strings; exec takes 1 to 256");
	free(s);

	s = argv_json(1, DG_ACTION_ARG_MAX);
	assert_ok(parse(s));
	cr_assert_eq(strlen(act.argv[0]), DG_ACTION_ARG_MAX);
	free(s);
	s = argv_json(2, DG_ACTION_ARG_MAX + 1);
	assert_refused(parse(s), "action.argv[0]: 4097 bytes is over the limit of 4096 bytes");
	free(s);

	char *in = repeat('x', DG_ACTION_STDIN_MAX);
	assert_ok(parsef("{\"type\":\"exec\",\"argv\":[\"cat\"],\"stdin\":\"%s\"}", in));
	cr_assert_eq(act.stdin_len, DG_ACTION_STDIN_MAX);
	free(in);
	in = repeat('x', DG_ACTION_STDIN_MAX + 1);
	assert_refused(parsef("{\"type\":\"exec\",\"argv\":[\"cat\"],\"stdin\":\"%s\"}", in),
		       "action.stdin: 32769 bytes is over the limit of 32768 bytes");
	free(in);
}

/* The whole text: DG_ACTION_JSON_MAX bytes are parsed, one more is refused
 * before parsing (so even garbage gets -E2BIG, not a JSON error). */
Test(limits, json_text)
{
	const char *obj = "{\"type\":\"back\"}";
	char *s = repeat(' ', DG_ACTION_JSON_MAX + 1);
	memcpy(s, obj, strlen(obj));
	assert_ok(parse_len(s, DG_ACTION_JSON_MAX));
	cr_assert_eq(act.type, DG_ACTION_BACK);
	assert_refused_prefix(parse_len(s, DG_ACTION_JSON_MAX + 1), -E2BIG,
			      "action: 65537 bytes is over the limit of 65536 bytes");
	free(s);
	s = repeat('x', DG_ACTION_JSON_MAX + 1);
	assert_refused_prefix(parse_len(s, DG_ACTION_JSON_MAX + 1), -E2BIG,
			      "action: 65537 bytes is over the limit of 65536 bytes");
	assert_refused_prefix(parse_len(s, DG_ACTION_JSON_MAX), -EINVAL, "action: invalid JSON");
	free(s);
}

/* {"argv":["aaa…",…],<extra>"type":"exec"} of exactly total bytes. */
static char *exec_of_size(size_t total, const char *extra)
{
	char *s = malloc(total + 1);
	cr_assert(s);
	const char *head = "{\"argv\":[", *tail_fmt = "],%s\"type\":\"exec\"}";
	char tail[64];
	snprintf(tail, sizeof(tail), tail_fmt, extra);
	size_t room = total - strlen(head) - strlen(tail);
	strcpy(s, head);
	size_t o = strlen(head);
	int first = 1;
	while (room > 0) {
		/* Each argument is "…" plus a comma after the first. */
		size_t over = first ? 2 : 3;
		size_t len = room - over > DG_ACTION_ARG_MAX ? DG_ACTION_ARG_MAX : room - over;
		if (room - over - len > 0 && room - over - len < 3)
			len -= 3; /* leave room for one more argument */
		if (!first)
			s[o++] = ',';
		s[o++] = '"';
		memset(s + o, 'a', len);
		o += len;
		s[o++] = '"';
		room -= len + over;
		first = 0;
	}
	strcpy(s + o, tail);
	cr_assert_eq(strlen(s), total);
	return s;
}

/* An accepted action's canonical form always parses again: an input at the
 * limit whose canonical form would grow past it (the default "stdin":"" is
 * added) is refused. */
Test(limits, canonical_form_within_the_limit)
{
	char *s = exec_of_size(DG_ACTION_JSON_MAX, "\"stdin\":\"\",");
	assert_ok(parse(s));
	char *c = canon();
	cr_assert_str_eq(c, s, "canonical form of a canonical input differs");
	free(c);
	free(s);

	s = exec_of_size(DG_ACTION_JSON_MAX, "");
	assert_refused_prefix(parse(s), -E2BIG,
			      "action: canonical form is 65547 bytes, over the limit of 65536 "
			      "bytes");
	free(s);
	s = exec_of_size(DG_ACTION_JSON_MAX - 11, "");
	assert_ok(parse(s));
	free(s);
}

/* ---- the canonical encoding ------------------------------------------------- */

static const char *const samples[] = {
	"{\"type\":\"read_page\",\"ref\":\"ref_12\",\"filter\":\"all\",\"depth\":3}",
	"{\"type\":\"get_page_text\"}",
	"{\"type\":\"find\",\"query\":\"add to cart \\u00e9\"}",
	"{\"type\":\"click\",\"x\":100,\"y\":200,\"button\":\"left\",\"count\":1,"
	"\"modifiers\":[\"ctrl\"]}",
	"{\"type\":\"click\",\"x\":1279,\"y\":799,\"count\":3,\"button\":\"forward\"}",
	"{\"type\":\"move\",\"x\":0,\"y\":0}",
	"{\"type\":\"drag\",\"path\":[[1,2],[3,4],[5,6]],\"button\":\"right\"}",
	"{\"type\":\"mouse_down\"}",
	"{\"type\":\"mouse_up\",\"x\":7,\"y\":8,\"button\":\"back\"}",
	"{\"type\":\"scroll\",\"x\":1,\"y\":2,\"dy\":-100,\"modifiers\":[\"super\",\"shift\"]}",
	"{\"type\":\"type\",\"text\":\"h\\u00e9llo\\r\\n\\t\\\"\\\\/ \\u6f22\\ud83d\\ude00\"}",
	"{\"type\":\"key\",\"keys\":\" ctrl+a  BackSpace return € XF86AudioMute \"}",
	"{\"type\":\"hold_key\",\"keys\":\"CTRL+Shift\",\"ms\":0}",
	"{\"type\":\"navigate\",\"url\":\"https://example.com/\\u00e9?q=\\\"x\\\"\"}",
	"{\"type\":\"back\"}",
	"{\"type\":\"forward\"}",
	"{\"type\":\"reload\"}",
	"{\"type\":\"screenshot\"}",
	"{\"type\":\"cursor_position\"}",
	"{\"type\":\"zoom\",\"region\":[0,0,1280,800]}",
	"{\"type\":\"wait\",\"ms\":60000}",
	"{\"type\":\"exec\",\"argv\":[\"sh\",\"-c\",\"echo \\\"$1\\\"\\n\",\"\\u0001\"],"
	"\"stdin\":\"\\u0000\\u00ff\",\"timeout_ms\":1}",
};

/* parse -> canonical -> parse -> canonical gives the same bytes, and the
 * second parse gives the same action. */
Test(canonical, round_trip)
{
	for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		assert_ok(parse(samples[i]));
		enum dg_action_type t = act.type;
		char *c1 = canon();
		assert_ok(parse(c1));
		cr_assert_eq(act.type, t, "%s", samples[i]);
		char *c2 = canon();
		cr_assert_str_eq(c1, c2, "sample %zu: %s", i, samples[i]);
		/* The canonical form is also what jansson's own sorted compact
		 * dump of dg_action_to_json gives. */
		json_t *o = dg_action_to_json(&act);
		cr_assert(o);
		char *c3 = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
		cr_assert_str_eq(c3, c1);
		free(c3);
		json_decref(o);
		free(c1);
		free(c2);
	}
}

/* Different spellings of the same action encode to the same bytes. */
Test(canonical, same_action_same_bytes)
{
	static const char *const groups[][4] = {
		{"{\"type\":\"click\",\"x\":1,\"y\":2}",
		 "{\"y\":2,\"x\":1,\"type\":\"click\"}",
		 "{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"left\",\"count\":1,\"modifiers\":[]}",
		 " {\n\t\"type\" : \"click\", \"x\": 1, \"y\": 2 }\n"},
		{"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"shift\",\"ctrl\"]}",
		 "{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"ctrl\",\"shift\"]}", NULL, NULL},
		{"{\"type\":\"key\",\"keys\":\"ctrl+l\"}", "{\"type\":\"key\",\"keys\":\"Control_L+l\"}",
		 "{\"type\":\"key\",\"keys\":\"CONTROL+l\"}", "{\"type\":\"key\",\"keys\":\" ctrl+l \"}"},
		{"{\"type\":\"key\",\"keys\":\"Return\"}", "{\"type\":\"key\",\"keys\":\"return\"}",
		 "{\"type\":\"key\",\"keys\":\"enter\"}", "{\"type\":\"key\",\"keys\":\"U000D\"}"},
		{"{\"type\":\"type\",\"text\":\"a\\nb\"}", "{\"type\":\"type\",\"text\":\"a\\r\\nb\"}",
		 "{\"type\":\"type\",\"text\":\"a\\rb\"}", "{\"type\":\"type\",\"text\":\"\\u0061\\nb\"}"},
		{"{\"type\":\"exec\",\"argv\":[\"ls\"]}",
		 "{\"type\":\"exec\",\"argv\":[\"ls\"],\"stdin\":\"\"}", NULL, NULL},
		{"{\"type\":\"click\",\"x\":0,\"y\":0}", "{\"type\":\"click\",\"x\":-0,\"y\":0}", NULL,
		 NULL},
	};
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		char *first = NULL;
		for (size_t i = 0; i < 4 && groups[g][i]; i++) {
			int rc = parse(groups[g][i]);
			/* "U000D" is a control character, not a key: the one
			 * spelling of Return that must be refused. */
			if (strstr(groups[g][i], "U000D")) {
				cr_assert_eq(rc, -EINVAL, "%s", groups[g][i]);
				continue;
			}
			assert_ok(rc);
			char *c = canon();
			if (!first)
				first = c;
			else {
				cr_assert_str_eq(c, first, "%s", groups[g][i]);
				free(c);
			}
		}
		free(first);
	}
}

/* Different actions never share an encoding. */
Test(canonical, different_actions_differ)
{
	size_t n = sizeof(samples) / sizeof(samples[0]);
	char **c = calloc(n, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		assert_ok(parse(samples[i]));
		c[i] = canon();
		for (size_t j = 0; j < i; j++)
			cr_assert_str_neq(c[i], c[j], "samples %zu and %zu", i, j);
	}
	for (size_t i = 0; i < n; i++)
		free(c[i]);
	free(c);

	/* Optional fields without defaults show whether they were given. */
	assert_ok(parse("{\"type\":\"mouse_down\"}"));
	char *a = canon();
	assert_ok(parse("{\"type\":\"mouse_down\",\"x\":0,\"y\":0}"));
	char *b = canon();
	cr_assert_str_neq(a, b);
	free(a);
	free(b);
}

Test(canonical, free_is_idempotent)
{
	assert_ok(parse(samples[sizeof(samples) / sizeof(samples[0]) - 1]));
	dg_action_free(&act);
	dg_action_free(&act);
	dg_action_free(NULL);
	static const struct dg_action zero;
	cr_assert_eq(memcmp(&act, &zero, sizeof(act)), 0);
}

/* ---- hostile input ---------------------------------------------------------- */

Test(hostile, ten_megabytes_refused_by_size)
{
	size_t n = 10 * 1024 * 1024;
	char *s = repeat('[', n); /* would be deeply nested if parsed */
	assert_refused_prefix(parse_len(s, n), -E2BIG,
			      "action: 10485760 bytes is over the limit of 65536 bytes");
	free(s);
	/* A 10 MB string value, likewise. */
	s = repeat('a', n);
	memcpy(s, "{\"type\":\"type\",\"text\":\"", 23);
	memcpy(s + n - 2, "\"}", 2);
	assert_refused_prefix(parse_len(s, n), -E2BIG, "action: 10485760 bytes is over the limit");
	free(s);
}

Test(hostile, deep_nesting)
{
	/* As deep as fits the size limit, in a field and at the top. */
	size_t depth = (DG_ACTION_JSON_MAX - 64) / 2;
	char *s = malloc(DG_ACTION_JSON_MAX + 1);
	strcpy(s, "{\"type\":\"click\",\"y\":1,\"x\":");
	size_t o = strlen(s);
	memset(s + o, '[', depth);
	memset(s + o + depth, ']', depth);
	strcpy(s + o + 2 * depth, "}");
	assert_refused_prefix(parse(s), -EINVAL, "action: invalid JSON");
	cr_assert(strstr(err.msg, "depth"), "%s", err.msg);
	free(s);

	s = malloc(DG_ACTION_JSON_MAX + 1);
	memset(s, '[', DG_ACTION_JSON_MAX);
	assert_refused_prefix(parse_len(s, DG_ACTION_JSON_MAX), -EINVAL, "action: invalid JSON");
	free(s);

	/* Shallow enough to decode, still not an integer. */
	assert_refused(parse("{\"type\":\"click\",\"y\":1,\"x\":[[[[[[[[[[1]]]]]]]]]]}"),
		       "action.x: an array is not an integer");
	assert_refused(parse("{\"type\":\"click\",\"y\":1,\"x\":{\"a\":{\"b\":{}}}}"),
		       "action.x: an object is not an integer");
}

Test(hostile, huge_numbers)
{
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":99999999999999999999,\"y\":1}"),
			      -EINVAL, "action: invalid JSON");
	assert_refused_prefix(parse("{\"type\":\"click\",\"x\":1e400,\"y\":1}"), -EINVAL,
			      "action: invalid JSON");
	assert_refused(parse("{\"type\":\"click\",\"x\":1e300,\"y\":1}"),
		       "action.x: 1e+300 is not an integer");
	assert_refused(parse("{\"type\":\"click\",\"x\":-1e-300,\"y\":1}"),
		       "action.x: -1e-300 is not an integer");
	assert_refused(parse("{\"type\":\"wait\",\"ms\":9223372036854775807}"),
		       "action.ms: 9223372036854775807 is out of range [0, 60000]");
	assert_refused(parse("{\"type\":\"scroll\",\"x\":1,\"y\":1,\"dy\":-9223372036854775808}"),
		       "action.dy: -9223372036854775808 is out of range [-100, 100]");
}

/* Messages quote untrusted bytes escaped and cut, so they cannot forge log
 * lines or grow with the input. */
Test(hostile, messages_are_escaped_and_bounded)
{
	assert_refused(parse("{\"type\":\"clik\\n[ok] approved\\u001b[0m\"}"),
		       "action.type: unknown action \"clik\\x0a[ok] approved\\x1b[0m\"");
	assert_refused(parse("{\"type\":\"click\",\"x\":1,\"y\":2,\"a\\\"b\\\\\":1}"),
		       "action: unknown field \"a\\\"b\\\\\" for click (allowed: x, y, button, "
		       "count, modifiers, ref)");
	assert_refused(parse("{\"type\":\"\\u00e9\\u202e\"}"),
		       "action.type: unknown action \"\\xc3\\xa9\\xe2\\x80\\xae\"");

	char *big = repeat('z', 60000);
	cr_assert_eq(parsef("{\"type\":\"click\",\"x\":1,\"y\":2,\"%s\":1}", big), -EINVAL);
	cr_assert(strlen(err.msg) < 300, "message of %zu bytes", strlen(err.msg));
	cr_assert(strstr(err.msg, "zzz...\""), "%s", err.msg);
	cr_assert_eq(parsef("{\"type\":\"%s\"}", big), -EINVAL);
	cr_assert(strlen(err.msg) < 200, "message of %zu bytes", strlen(err.msg));
	cr_assert_eq(parsef("{\"type\":\"key\",\"keys\":\"%.8000s\"}", big), -EINVAL);
	cr_assert(strlen(err.msg) < 400, "message of %zu bytes", strlen(err.msg));
	free(big);

	/* No message holds a control byte, whatever the input. */
	static const char *const inputs[] = {
		"{\"type\":\"key\",\"keys\":\"\\u001b]0;x\\u0007\"}",
		"{\"type\":\"key\",\"keys\":\"ctrl+\\u00e9\\u0085x\"}",
		"{\"type\":\"click\",\"x\":\"\\r\\n\",\"y\":1}",
		"{\"type\":\"navigate\",\"url\":\"\\u0000\"}",
		"{\"type\":\"exec\",\"argv\":[\"ls\"],\"\\u0000\":1}",
		"{\"\n\":1}",
		"{\"type\":\"click\",\"x\":1,\"y\":2,\"button\":\"\\u0000\\t\"}",
		"{\"type\":\"click\",\"x\":1,\"y\":2,\"modifiers\":[\"\\n\"]}",
		"\x01\x02\x1b[31m",
	};
	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		cr_assert_lt(parse(inputs[i]), 0, "%s accepted", inputs[i]);
		for (const char *p = err.msg; *p; p++)
			cr_assert((unsigned char)*p >= 0x20 && (unsigned char)*p != 0x7f,
				  "control byte 0x%02x in message \"%s\"", (unsigned char)*p,
				  err.msg);
		cr_assert_gt(strlen(err.msg), 8, "empty message for input %zu", i);
	}
}

/* Bytes of random garbage and mutated valid actions never crash the parser
 * and, when accepted, always round-trip through the canonical form. */
Test(hostile, mutations)
{
	unsigned seed = 12345;
	size_t accepted = 0, refused = 0;
	for (int round = 0; round < 20000; round++) {
		const char *base = samples[round % (sizeof(samples) / sizeof(samples[0]))];
		size_t len = strlen(base);
		char buf[512];
		cr_assert_lt(len, sizeof(buf));
		memcpy(buf, base, len);
		int flips = 1 + (int)(rand_r(&seed) % 3);
		for (int f = 0; f < flips; f++) {
			size_t at = (size_t)rand_r(&seed) % len;
			static const char alphabet[] = "{}[]\":,0123456789-+.eE \\u\x80\xff\x00az";
			buf[at] = alphabet[(size_t)rand_r(&seed) % (sizeof(alphabet) - 1)];
		}
		int rc = parse_len(buf, len);
		if (rc == 0) {
			accepted++;
			char *c1 = canon();
			assert_ok(parse(c1));
			char *c2 = canon();
			cr_assert_str_eq(c1, c2);
			free(c1);
			free(c2);
		} else {
			refused++;
			cr_assert(rc == -EINVAL || rc == -E2BIG, "rc %d", rc);
			cr_assert(strncmp(err.msg, "action", 6) == 0, "%s", err.msg);
			assert_zeroed();
		}
	}
	cr_assert_gt(accepted, 100);
	cr_assert_gt(refused, 1000);
}
