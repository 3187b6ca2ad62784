/* cdp-classify: what a CDP client's command amounts to, for the policy.
 *
 * Every row of the mapping (cdp-classify-priv.h) with valid and malformed
 * parameters; the actions produced are checked against the canonical
 * parser for the view's screen; points at the viewport's and the screen's
 * edges, negative and huge numbers, wrong types, oversized strings and
 * arrays; the DOM key table; and a few hundred mutations of valid
 * commands, which must give 0 or -EINVAL with a message, never a crash
 * or a leak (run under ASan too).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdp-classify-priv.h"

/* The viewport at (100, 50), 800x600, on a 1280x1024 screen. */
#define SW 1280
#define SH 1024
static const struct dg_cdp_view view = {100, 50, 800, 600, SW, SH};

static struct dg_cdp_class cls;
static struct dg_err err;

static void teardown(void)
{
	dg_cdp_class_free(&cls);
}

TestSuite(cdp_classify, .fini = teardown);

/* Classifies method with params (stolen; NULL: absent) for v. */
static int run_view(const char *method, json_t *params, const struct dg_cdp_view *v)
{
	dg_cdp_class_free(&cls);
	memset(&err, 0, sizeof(err));
	memset(&cls, 0xa5, sizeof(cls)); /* classify must not rely on a zeroed result */
	int rc = dg_cdp_classify(method, params, v, &cls, &err);
	json_decref(params);
	cr_assert(rc == 0 || rc == -EINVAL, "%s: rc %d (%s)", method, rc, err.msg);
	if (rc < 0) {
		cr_assert(err.msg[0], "%s: -EINVAL without a message", method);
		cr_assert(!cls.action && !cls.code && !cls.url && !cls.params && !cls.refuse);
	}
	if (cls.refuse)
		cr_assert(!cls.action && !cls.code && !cls.url && !cls.params);
	if (cls.action) {
		/* What the owner gets is an action the canonical parser takes
		 * for the screen, in its canonical form already. */
		struct dg_action a;
		struct dg_err e;
		int w = v ? v->screen_w : 1, h = v ? v->screen_h : 1;
		if (w < 1 || h < 1)
			w = h = 1;
		cr_assert_eq(dg_action_parse_obj(cls.action, w, h, &a, &e), 0, "%s: %s", method,
			     e.msg);
		json_t *again = dg_action_to_json(&a);
		cr_assert(json_equal(again, cls.action));
		json_decref(again);
		dg_action_free(&a);
	}
	if (cls.code)
		cr_assert(json_is_string(cls.code) && json_string_length(cls.code) <= DG_CDP_CODE_MAX);
	if (cls.url)
		cr_assert(json_is_string(cls.url) && json_string_length(cls.url) <= DG_ACTION_URL_MAX);
	if (cls.params) {
		cr_assert(json_is_object(cls.params));
		char *d = json_dumps(cls.params, JSON_COMPACT);
		cr_assert(d);
		/* a few KiB; files (kept whole, escaped) at most ~6x 16 KiB */
		cr_assert_leq(strlen(d), 6u * DG_ACTION_PATHS_MAX * DG_ACTION_FILE_PATH_MAX + 1024);
		free(d);
	}
	return rc;
}

static int run_obj(const char *method, json_t *params)
{
	return run_view(method, params, &view);
}

/* params as JSON text (NULL: absent); NUL escapes are allowed. */
static json_t *load(const char *text)
{
	if (!text)
		return NULL;
	json_error_t je;
	json_t *p = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
	cr_assert(p, "bad test JSON %s: %s", text, je.text);
	return p;
}

static int run(const char *method, const char *params)
{
	return run_obj(method, load(params));
}

/* run with params printf-formatted (short texts only). */
static int runf(const char *method, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int runf(const char *method, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	cr_assert(n >= 0 && (size_t)n < sizeof(text));
	return run(method, text);
}

static char *dump(const json_t *v)
{
	char *d = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
	cr_assert(d);
	return d;
}

static void expect_json(const json_t *v, const char *want, const char *what)
{
	cr_assert(v, "%s: none (want %s)", what, want);
	char *d = dump(v);
	cr_assert_str_eq(d, want, "%s: %s, want %s", what, d, want);
	free(d);
}

/* 0 with the canonical action want (compact, sorted keys); code, url
 * NULL, no refusal. */
static void expect_action(int rc, const char *want)
{
	cr_assert_eq(rc, 0, "rc %d (%s)", rc, err.msg);
	cr_assert_null(cls.refuse, "refused: %s", cls.refuse);
	expect_json(cls.action, want, "action");
	cr_assert_null(cls.code);
	cr_assert_null(cls.url);
}

/* 0 and nothing to decide but the method. */
static void expect_nothing(int rc)
{
	cr_assert_eq(rc, 0, "rc %d (%s)", rc, err.msg);
	cr_assert(!cls.action && !cls.code && !cls.url && !cls.params && !cls.refuse,
		  "something: action %p code %p url %p params %p refuse %s", (void *)cls.action,
		  (void *)cls.code, (void *)cls.url, (void *)cls.params,
		  cls.refuse ? cls.refuse : "-");
}

/* -EINVAL with a message starting with prefix. */
static void expect_bad(int rc, const char *prefix)
{
	cr_assert_eq(rc, -EINVAL, "rc %d, want -EINVAL (%s)", rc, prefix);
	cr_assert(strncmp(err.msg, prefix, strlen(prefix)) == 0, "message \"%s\", want \"%s...\"",
		  err.msg, prefix);
}

static void expect_refused(int rc, const char *why)
{
	cr_assert_eq(rc, 0, "rc %d (%s)", rc, err.msg);
	cr_assert(cls.refuse, "not refused");
	cr_assert_str_eq(cls.refuse, why);
}

/* A JSON string: prefix, then n copies of c. */
static json_t *long_string(const char *prefix, char c, size_t n)
{
	size_t p = strlen(prefix);
	char *s = malloc(p + n);
	cr_assert(s);
	memcpy(s, prefix, p);
	memset(s + p, c, n);
	json_t *v = json_stringn(s, p + n);
	free(s);
	cr_assert(v);
	return v;
}

/* {key: long_string(prefix, c, n)} */
static json_t *with_long(const char *key, const char *prefix, char c, size_t n)
{
	json_t *o = json_pack("{s:o}", key, long_string(prefix, c, n));
	cr_assert(o);
	return o;
}

/* ---- navigation ---- */

Test(cdp_classify, navigate)
{
	expect_action(run("Page.navigate", "{\"url\":\"https://example.com/\",\"frameId\":\"F\"}"),
		      "{\"type\":\"navigate\",\"url\":\"https://example.com/\"}");
	expect_json(cls.params, "{\"url\":\"https://example.com/\"}", "params");
	expect_nothing(run("Page.navigate", "{\"url\":\"about:blank\"}"));
	expect_bad(run("Page.navigate", "{}"), "Page.navigate.url: missing");
	expect_bad(run("Page.navigate", NULL), "Page.navigate.url: missing");
	expect_bad(run("Page.navigate", "{\"url\":42}"), "Page.navigate.url: 42 is not a string");
	expect_bad(run("Page.navigate", "{\"url\":[\"x\"]}"), "Page.navigate.url: ");
	expect_bad(run("Page.navigate", "{\"url\":\"\"}"), "Page.navigate.url: ");
	expect_bad(run("Page.navigate", "{\"url\":\"https://a/\\u0001\"}"), "Page.navigate.url: ");
	expect_bad(run("Page.navigate", "{\"url\":\"https://a/\\u0000b\"}"),
		   "Page.navigate.url: contains NUL at byte 10");
	/* At the limit and one past it; the summary keeps a cut URL. */
	cr_assert_eq(run_obj("Page.navigate", with_long("url", "https://a/", 'x',
							DG_ACTION_URL_MAX - 10)), 0, "%s", err.msg);
	cr_assert_eq(json_string_length(json_object_get(cls.action, "url")), DG_ACTION_URL_MAX);
	cr_assert_eq(json_string_length(json_object_get(cls.params, "url")), DG_CDP_KEPT_MAX);
	cr_assert_eq(json_integer_value(json_object_get(cls.params, "url_bytes")),
		     DG_ACTION_URL_MAX);
	expect_bad(run_obj("Page.navigate", with_long("url", "https://a/", 'x',
						      DG_ACTION_URL_MAX - 9)),
		   "Page.navigate.url: 8193 bytes is over the limit of 8192 bytes");
	expect_bad(run_obj("Page.navigate", with_long("url", "", 'x', 10u * 1024 * 1024)),
		   "Page.navigate.url: ");
	/* A summary cut at a character boundary. */
	char url[2000];
	memset(url, 'x', sizeof(url));
	memcpy(url, "https://a/", 10);
	memcpy(url + DG_CDP_KEPT_MAX - 1, "\xc3\xa9", 2);
	cr_assert_eq(run_obj("Page.navigate", json_pack("{s:s%}", "url", url, sizeof(url))), 0,
		     "%s", err.msg);
	cr_assert_eq(json_string_length(json_object_get(cls.params, "url")), DG_CDP_KEPT_MAX - 1);
}

Test(cdp_classify, create_target)
{
	expect_action(run("Target.createTarget", "{\"url\":\"http://x.test/a\",\"newWindow\":true}"),
		      "{\"type\":\"navigate\",\"url\":\"http://x.test/a\"}");
	expect_nothing(run("Target.createTarget", "{\"url\":\"\"}"));
	expect_nothing(run("Target.createTarget", "{\"url\":\"about:blank\"}"));
	expect_bad(run("Target.createTarget", "{}"), "Target.createTarget.url: missing");
	expect_bad(run("Target.createTarget", "{\"url\":null}"),
		   "Target.createTarget.url: null is not a string");
}

Test(cdp_classify, history)
{
	expect_action(run("Page.reload", NULL), "{\"type\":\"reload\"}");
	cr_assert_null(cls.params);
	expect_action(run("Page.reload", "{\"ignoreCache\":true}"), "{\"type\":\"reload\"}");
	cr_assert_eq(run("Page.reload", "{\"scriptToEvaluateOnLoad\":\"alert(1)\"}"), 0);
	expect_json(cls.action, "{\"type\":\"reload\"}", "action");
	expect_json(cls.code, "\"alert(1)\"", "code");
	expect_bad(run("Page.reload", "{\"scriptToEvaluateOnLoad\":1}"),
		   "Page.reload.scriptToEvaluateOnLoad: 1 is not a string");
	expect_action(run("Page.navigateToHistoryEntry", "{\"entryId\":3}"), "{\"type\":\"back\"}");
	expect_json(cls.params, "{\"entryId\":3}", "params");
	expect_action(run("Page.navigateToHistoryEntry", "{\"entryId\":\"x\"}"),
		      "{\"type\":\"back\"}");
	cr_assert_null(cls.params);
	expect_nothing(run("Page.resetNavigationHistory", NULL));
}

/* ---- the mouse ---- */

Test(cdp_classify, mouse_buttons)
{
	expect_action(run("Input.dispatchMouseEvent",
			  "{\"type\":\"mousePressed\",\"x\":10,\"y\":20,\"button\":\"left\","
			  "\"clickCount\":1}"),
		      "{\"button\":\"left\",\"type\":\"mouse_down\",\"x\":110,\"y\":70}");
	expect_json(cls.params, "{\"button\":\"left\",\"type\":\"mousePressed\",\"x\":10,\"y\":20}",
		    "params");
	expect_action(run("Input.dispatchMouseEvent",
			  "{\"type\":\"mouseReleased\",\"x\":10.4,\"y\":19.6,\"button\":\"right\"}"),
		      "{\"button\":\"right\",\"type\":\"mouse_up\",\"x\":110,\"y\":70}");
	expect_action(run("Input.dispatchMouseEvent",
			  "{\"type\":\"mousePressed\",\"x\":0,\"y\":0,\"button\":\"none\"}"),
		      "{\"button\":\"left\",\"type\":\"mouse_down\",\"x\":100,\"y\":50}");
	expect_action(run("Input.dispatchMouseEvent", "{\"type\":\"mousePressed\",\"x\":0,\"y\":0}"),
		      "{\"button\":\"left\",\"type\":\"mouse_down\",\"x\":100,\"y\":50}");
	static const char *const b[] = {"middle", "back", "forward"};
	for (size_t i = 0; i < 3; i++) {
		char want[128];
		snprintf(want, sizeof(want),
			 "{\"button\":\"%s\",\"type\":\"mouse_down\",\"x\":100,\"y\":50}", b[i]);
		expect_action(runf("Input.dispatchMouseEvent",
				   "{\"type\":\"mousePressed\",\"x\":0,\"y\":0,\"button\":\"%s\"}",
				   b[i]),
			      want);
	}
	expect_bad(run("Input.dispatchMouseEvent",
		       "{\"type\":\"mousePressed\",\"x\":0,\"y\":0,\"button\":\"Left\"}"),
		   "Input.dispatchMouseEvent.button: unknown value \"Left\" (allowed: none, left, "
		   "middle, right, back, forward)");
	expect_bad(run("Input.dispatchMouseEvent",
		       "{\"type\":\"mousePressed\",\"x\":0,\"y\":0,\"button\":1}"),
		   "Input.dispatchMouseEvent.button: 1 is not a string");
	expect_action(run("Input.dispatchMouseEvent",
			  "{\"type\":\"mouseMoved\",\"x\":5,\"y\":5,\"modifiers\":15}"),
		      "{\"modifiers\":[\"ctrl\",\"shift\",\"alt\",\"super\"],\"type\":\"move\","
		      "\"x\":105,\"y\":55}");
	expect_action(run("Input.dispatchMouseEvent",
			  "{\"type\":\"mouseMoved\",\"x\":5,\"y\":5,\"modifiers\":258}"),
		      "{\"modifiers\":[\"ctrl\"],\"type\":\"move\",\"x\":105,\"y\":55}");
	expect_action(run("Input.emulateTouchFromMouseEvent",
			  "{\"type\":\"mousePressed\",\"x\":1,\"y\":2,\"button\":\"left\"}"),
		      "{\"button\":\"left\",\"type\":\"mouse_down\",\"x\":101,\"y\":52}");
}

Test(cdp_classify, mouse_malformed)
{
	const char *m = "Input.dispatchMouseEvent";
	expect_bad(run(m, "{\"x\":1,\"y\":1}"), "Input.dispatchMouseEvent.type: missing");
	expect_bad(run(m, NULL), "Input.dispatchMouseEvent.type: missing");
	expect_bad(run(m, "{\"type\":\"mouseClicked\",\"x\":1,\"y\":1}"),
		   "Input.dispatchMouseEvent.type: unknown value \"mouseClicked\"");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"y\":1}"), "Input.dispatchMouseEvent.x: missing");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1}"), "Input.dispatchMouseEvent.y: missing");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":\"1\",\"y\":1}"),
		   "Input.dispatchMouseEvent.x: \"1\" is not a number");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1,\"y\":null}"),
		   "Input.dispatchMouseEvent.y: null is not a number");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1,\"y\":true}"),
		   "Input.dispatchMouseEvent.y: ");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1,\"y\":1,\"modifiers\":-1}"),
		   "Input.dispatchMouseEvent.modifiers: -1 is not in 0..2147483647");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1,\"y\":1,\"modifiers\":2.0}"),
		   "Input.dispatchMouseEvent.modifiers: ");
	expect_bad(run(m, "{\"type\":\"mouseMoved\",\"x\":1,\"y\":1,\"modifiers\":\"2\"}"),
		   "Input.dispatchMouseEvent.modifiers: ");
	expect_bad(run(m, "{\"type\":\"mouseWheel\",\"x\":1,\"y\":1,\"deltaY\":\"5\"}"),
		   "Input.dispatchMouseEvent.deltaY: \"5\" is not a number");
	expect_bad(run(m, "{\"type\":7,\"x\":1,\"y\":1}"), "Input.dispatchMouseEvent.type: 7 is");
	/* a malformed field wins over a point outside */
	expect_bad(run(m, "{\"type\":\"mouseWheel\",\"x\":-5,\"y\":1,\"deltaX\":[]}"),
		   "Input.dispatchMouseEvent.deltaX: ");
	/* a screen the actions do not take */
	struct dg_cdp_view bad = {0, 0, 10, 10, 0, 10};
	expect_bad(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":1,\"y\":1}"), &bad),
		   "Input.dispatchMouseEvent: the screen (0x10)");
	bad.screen_w = DG_ACTION_SCREEN_MAX + 1;
	expect_bad(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":1,\"y\":1}"), &bad),
		   "Input.dispatchMouseEvent: the screen");
}

Test(cdp_classify, mouse_edges)
{
	const char *m = "Input.dispatchMouseEvent";
	const char *p = "{\"type\":\"mouseMoved\",\"x\":%s,\"y\":%s}";
	expect_action(runf(m, p, "799", "599"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":899,\"y\":649}");
	expect_action(runf(m, p, "799.49", "599.4"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":899,\"y\":649}");
	expect_refused(runf(m, p, "800", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "799.5", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "0", "600"), DG_CDP_REFUSE_POINT);
	expect_action(runf(m, p, "-0.4", "-0.0"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":100,\"y\":50}");
	expect_refused(runf(m, p, "-0.5", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "-1", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "0", "-1"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "1e308", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "-1e308", "0"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "0", "9223372036854775807"), DG_CDP_REFUSE_POINT);
	expect_refused(runf(m, p, "-9223372036854775807", "0"), DG_CDP_REFUSE_POINT);
	expect_action(runf(m, p, "4.9e-324", "1e-300"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":100,\"y\":50}");
	/* Reals jansson cannot hold (NaN, infinities) never reach the
	 * classifier: the decoder refuses them. */
	json_error_t je;
	cr_assert_null(json_loads("{\"x\":NaN}", 0, &je));
	cr_assert_null(json_loads("{\"x\":1e999}", 0, &je));
	cr_assert_null(json_real(NAN));
	/* The press and the wheel are refused alike. */
	expect_refused(run(m, "{\"type\":\"mousePressed\",\"x\":800,\"y\":0}"), DG_CDP_REFUSE_POINT);
	expect_refused(run(m, "{\"type\":\"mouseWheel\",\"x\":0,\"y\":-3,\"deltaY\":100}"),
		       DG_CDP_REFUSE_POINT);
	/* A viewport partly off the screen: its points off the screen are out. */
	struct dg_cdp_view off = {1200, 1000, 800, 600, SW, SH};
	expect_action(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":79,\"y\":23}"), &off),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":1279,\"y\":1023}");
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":80,\"y\":0}"), &off),
		       DG_CDP_REFUSE_POINT);
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":0,\"y\":24}"), &off),
		       DG_CDP_REFUSE_POINT);
	struct dg_cdp_view neg = {-10, -10, 800, 600, SW, SH};
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":9,\"y\":20}"), &neg),
		       DG_CDP_REFUSE_POINT);
	expect_action(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":10,\"y\":10}"), &neg),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":0,\"y\":0}");
	/* No viewport known, or none at all. */
	struct dg_cdp_view none = {0, 0, 0, 0, SW, SH};
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":0,\"y\":0}"), &none),
		       DG_CDP_REFUSE_POINT);
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":0,\"y\":0}"), NULL),
		       DG_CDP_REFUSE_POINT);
	struct dg_cdp_view huge = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, SW, SH};
	expect_refused(run_view(m, load("{\"type\":\"mouseMoved\",\"x\":5,\"y\":5}"), &huge),
		       DG_CDP_REFUSE_POINT);
}

Test(cdp_classify, wheel)
{
	const char *m = "Input.dispatchMouseEvent";
	const char *p = "{\"type\":\"mouseWheel\",\"x\":1,\"y\":2,\"deltaX\":%s,\"deltaY\":%s}";
	expect_action(runf(m, p, "0", "250"),
		      "{\"dx\":0,\"dy\":3,\"modifiers\":[],\"type\":\"scroll\",\"x\":101,\"y\":52}");
	expect_json(cls.params, "{\"deltaX\":0,\"deltaY\":250,\"type\":\"mouseWheel\",\"x\":1,\"y\":2}",
		    "params");
	expect_action(runf(m, p, "-150", "0.001"),
		      "{\"dx\":-2,\"dy\":1,\"modifiers\":[],\"type\":\"scroll\",\"x\":101,\"y\":52}");
	expect_action(runf(m, p, "-1", "-149"),
		      "{\"dx\":-1,\"dy\":-1,\"modifiers\":[],\"type\":\"scroll\",\"x\":101,\"y\":52}");
	expect_action(runf(m, p, "1e300", "-1e300"),
		      "{\"dx\":100,\"dy\":-100,\"modifiers\":[],\"type\":\"scroll\",\"x\":101,"
		      "\"y\":52}");
	expect_action(runf(m, p, "10049", "-10050"),
		      "{\"dx\":100,\"dy\":-100,\"modifiers\":[],\"type\":\"scroll\",\"x\":101,"
		      "\"y\":52}");
	expect_action(runf(m, p, "0", "-0.0"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":101,\"y\":52}");
	expect_action(run(m, "{\"type\":\"mouseWheel\",\"x\":1,\"y\":2}"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":101,\"y\":52}");
	expect_action(run(m, "{\"type\":\"mouseWheel\",\"x\":1,\"y\":2,\"deltaY\":100,"
			  "\"modifiers\":2}"),
		      "{\"dx\":0,\"dy\":1,\"modifiers\":[\"ctrl\"],\"type\":\"scroll\",\"x\":101,"
		      "\"y\":52}");
}

Test(cdp_classify, gestures)
{
	expect_action(run("Input.synthesizeTapGesture", "{\"x\":3,\"y\":4,\"tapCount\":2}"),
		      "{\"button\":\"left\",\"count\":1,\"modifiers\":[],\"type\":\"click\",\"x\":103,"
		      "\"y\":54}");
	expect_action(run("Input.synthesizePinchGesture", "{\"x\":3,\"y\":4,\"scaleFactor\":2}"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":103,\"y\":54}");
	expect_action(run("Input.synthesizeScrollGesture",
			  "{\"x\":3,\"y\":4,\"yDistance\":-250,\"xDistance\":100}"),
		      "{\"dx\":-1,\"dy\":3,\"modifiers\":[],\"type\":\"scroll\",\"x\":103,\"y\":54}");
	expect_refused(run("Input.synthesizeTapGesture", "{\"x\":-3,\"y\":4}"), DG_CDP_REFUSE_POINT);
	expect_bad(run("Input.synthesizeTapGesture", "{\"x\":3}"),
		   "Input.synthesizeTapGesture.y: missing");
	expect_bad(run("Input.synthesizeScrollGesture", "{\"x\":3,\"y\":4,\"yDistance\":\"1\"}"),
		   "Input.synthesizeScrollGesture.yDistance: ");
}

/* ---- touch and drag ---- */

Test(cdp_classify, touch)
{
	const char *m = "Input.dispatchTouchEvent";
	expect_action(run(m, "{\"type\":\"touchStart\",\"touchPoints\":[{\"x\":5,\"y\":6,"
			     "\"id\":1}]}"),
		      "{\"button\":\"left\",\"count\":1,\"modifiers\":[],\"type\":\"click\",\"x\":105,"
		      "\"y\":56}");
	expect_json(cls.params, "{\"points\":1,\"type\":\"touchStart\"}", "params");
	expect_action(run(m, "{\"type\":\"touchMove\",\"touchPoints\":[{\"x\":5,\"y\":6},"
			     "{\"x\":799,\"y\":599}],\"modifiers\":8}"),
		      "{\"button\":\"left\",\"modifiers\":[\"shift\"],\"path\":[[105,56],[899,649]],"
		      "\"type\":\"drag\"}");
	expect_nothing(run(m, "{\"type\":\"touchEnd\",\"touchPoints\":[]}"));
	expect_nothing(run(m, "{\"type\":\"touchCancel\",\"touchPoints\":[{\"x\":-5,\"y\":6}]}"));
	expect_nothing(run(m, "{\"type\":\"touchEnd\"}"));
	expect_nothing(run(m, "{\"type\":\"touchStart\",\"touchPoints\":[]}"));
	expect_refused(run(m, "{\"type\":\"touchStart\",\"touchPoints\":[{\"x\":5,\"y\":6},"
			      "{\"x\":800,\"y\":6}]}"),
		       DG_CDP_REFUSE_POINT);
	expect_bad(run(m, "{\"type\":\"touchStart\",\"touchPoints\":[{\"x\":5,\"y\":6},"
			  "{\"x\":5}]}"),
		   "Input.dispatchTouchEvent.touchPoints[1].y: missing");
	expect_bad(run(m, "{\"type\":\"touchStart\",\"touchPoints\":[7]}"),
		   "Input.dispatchTouchEvent.touchPoints[0]: 7 is not an object");
	expect_bad(run(m, "{\"type\":\"touchStart\",\"touchPoints\":{\"x\":1,\"y\":1}}"),
		   "Input.dispatchTouchEvent.touchPoints: an object is not an array of points");
	expect_bad(run(m, "{\"type\":\"touchStart\"}"),
		   "Input.dispatchTouchEvent.touchPoints: missing");
	expect_bad(run(m, "{\"type\":\"touchDown\",\"touchPoints\":[]}"),
		   "Input.dispatchTouchEvent.type: unknown value \"touchDown\"");
	/* 16 points: a drag along them; 17: refused as malformed. */
	for (int n = 16; n <= 17; n++) {
		json_t *pts = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(pts, json_pack("{s:i,s:f}", "x", i * 10, "y", i * 1.5));
		int rc = run_obj(m, json_pack("{s:s,s:o}", "type", "touchMove", "touchPoints", pts));
		if (n == 16) {
			cr_assert_eq(rc, 0, "%s", err.msg);
			cr_assert_eq(json_array_size(json_object_get(cls.action, "path")), 16);
			expect_json(json_array_get(json_object_get(cls.action, "path"), 15),
				    "[250,73]", "path[15]");
		} else {
			expect_bad(rc, "Input.dispatchTouchEvent.touchPoints: 17 points is over the "
				       "limit of 16");
		}
	}
}

Test(cdp_classify, drag_event)
{
	const char *m = "Input.dispatchDragEvent";
	expect_action(run(m, "{\"type\":\"dragOver\",\"x\":5,\"y\":6,\"data\":{\"items\":[],"
			     "\"dragOperationsMask\":1}}"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":105,\"y\":56}");
	expect_json(cls.params, "{\"type\":\"dragOver\",\"x\":5,\"y\":6}", "params");
	expect_action(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":6,\"data\":{\"items\":[],"
			     "\"files\":[\"/tmp/a.txt\"],\"dragOperationsMask\":1}}"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":105,\"y\":56}");
	expect_json(cls.params, "{\"files\":[\"/tmp/a.txt\"],\"type\":\"drop\",\"x\":5,\"y\":6}",
		    "params");
	expect_action(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":6,\"data\":{\"files\":[]}}"),
		      "{\"modifiers\":[],\"type\":\"move\",\"x\":105,\"y\":56}");
	expect_bad(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":6,\"data\":{\"files\":[\"a.txt\"]}}"),
		   "Input.dispatchDragEvent.data.files[0]: not an absolute path");
	expect_bad(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":6,\"data\":{\"files\":\"/a\"}}"),
		   "Input.dispatchDragEvent.data.files: \"/a\" is not an array of paths");
	expect_bad(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":6,\"data\":[]}"),
		   "Input.dispatchDragEvent.data: an array is not an object");
	expect_bad(run(m, "{\"type\":\"drag\",\"x\":5,\"y\":6}"),
		   "Input.dispatchDragEvent.type: unknown value");
	expect_bad(run(m, "{\"type\":\"drop\",\"x\":5}"), "Input.dispatchDragEvent.y: missing");
	expect_refused(run(m, "{\"type\":\"drop\",\"x\":5,\"y\":-6}"), DG_CDP_REFUSE_POINT);
}

/* ---- text ---- */

Test(cdp_classify, insert_text)
{
	const char *methods[] = {"Input.insertText", "Input.imeSetComposition"};
	for (int i = 0; i < 2; i++) {
		const char *m = methods[i];
		char want[128];
		expect_action(run(m, "{\"text\":\"secret \\u00e9\",\"selectionStart\":0}"),
			      "{\"text\":\"secret \\u00E9\",\"type\":\"type\"}");
		/* never the text in the summary */
		expect_json(cls.params, "{\"text_bytes\":9}", "params");
		expect_nothing(run(m, "{\"text\":\"\"}"));
		snprintf(want, sizeof(want), "%s.text: missing", m);
		expect_bad(run(m, "{}"), want);
		expect_bad(run(m, NULL), want);
		snprintf(want, sizeof(want), "%s.text: 5 is not a string", m);
		expect_bad(run(m, "{\"text\":5}"), want);
		snprintf(want, sizeof(want), "%s.text: contains NUL at byte 1", m);
		expect_bad(run(m, "{\"text\":\"a\\u0000b\"}"), want);
		snprintf(want, sizeof(want), "%s.text: ", m);
		expect_bad(run(m, "{\"text\":\"a\\u0007b\"}"), want);
		cr_assert(strstr(err.msg, "control character"), "%s", err.msg);
		cr_assert_eq(run_obj(m, with_long("text", "", 'a', DG_ACTION_TEXT_MAX)), 0, "%s",
			     err.msg);
		expect_bad(run_obj(m, with_long("text", "", 'a', DG_ACTION_TEXT_MAX + 1)), want);
		cr_assert(strstr(err.msg, "16385 bytes is over the limit of 16384 bytes"), "%s",
			  err.msg);
	}
	/* Line breaks as the canonical form has them. */
	expect_action(run("Input.insertText", "{\"text\":\"a\\r\\nb\"}"),
		      "{\"text\":\"a\\nb\",\"type\":\"type\"}");
}

/* ---- keys ---- */

/* The canonical form of xdotool-style keys. */
static void canon_keys(const char *keys, char *out, size_t len)
{
	struct dg_chord ch[2];
	int n = 0;
	struct dg_err e;
	cr_assert_eq(dg_keys_parse(keys, ch, 2, &n, &e), 0, "%s: %s", keys, e.msg);
	cr_assert_eq(dg_keys_format(ch, n, out, len), 0);
}

/* A keyDown of key (JSON string text) with modifiers gives the key
 * action of keys (xdotool style). */
static void expect_chord(const char *key_json, int modifiers, const char *keys)
{
	char want[256], canon[128];
	canon_keys(keys, canon, sizeof(canon));
	snprintf(want, sizeof(want), "{\"keys\":\"%s\",\"type\":\"key\"}", canon);
	expect_action(runf("Input.dispatchKeyEvent", "{\"type\":\"rawKeyDown\",\"key\":%s,"
			   "\"modifiers\":%d}", key_json, modifiers),
		      want);
}

Test(cdp_classify, dom_keys)
{
	static const struct {
		const char *dom, *x;
	} table[] = {
		{"\"a\"", "a"},
		{"\"A\"", "a"},
		{"\"z\"", "z"},
		{"\"1\"", "1"},
		{"\"/\"", "slash"},
		{"\"+\"", "plus"},
		{"\"!\"", "exclam"},
		{"\" \"", "space"},
		{"\"\\u00e9\"", "eacute"},
		{"\"Enter\"", "Return"},
		{"\"Tab\"", "Tab"},
		{"\"Backspace\"", "BackSpace"},
		{"\"Escape\"", "Escape"},
		{"\"Delete\"", "Delete"},
		{"\"Insert\"", "Insert"},
		{"\"Home\"", "Home"},
		{"\"End\"", "End"},
		{"\"PageUp\"", "Page_Up"},
		{"\"PageDown\"", "Page_Down"},
		{"\"ArrowLeft\"", "Left"},
		{"\"ArrowRight\"", "Right"},
		{"\"ArrowUp\"", "Up"},
		{"\"ArrowDown\"", "Down"},
		{"\"F1\"", "F1"},
		{"\"F5\"", "F5"},
		{"\"F12\"", "F12"},
		{"\"F24\"", "F24"},
		{"\"ContextMenu\"", "Menu"},
		{"\"PrintScreen\"", "Print"},
		{"\"NumLock\"", "Num_Lock"},
		{"\"ScrollLock\"", "Scroll_Lock"},
		{"\"Pause\"", "Pause"},
		{"\"Help\"", "Help"},
		{"\"AudioVolumeMute\"", "XF86AudioMute"},
		{"\"AudioVolumeDown\"", "XF86AudioLowerVolume"},
		{"\"AudioVolumeUp\"", "XF86AudioRaiseVolume"},
		{"\"MediaPlayPause\"", "XF86AudioPlay"},
		{"\"MediaStop\"", "XF86AudioStop"},
		{"\"MediaTrackNext\"", "XF86AudioNext"},
		{"\"MediaTrackPrevious\"", "XF86AudioPrev"},
		{"\"BrowserBack\"", "XF86Back"},
		{"\"BrowserForward\"", "XF86Forward"},
		{"\"BrowserRefresh\"", "XF86Reload"},
		{"\"BrowserStop\"", "XF86Stop"},
		{"\"BrowserSearch\"", "XF86Search"},
		{"\"BrowserFavorites\"", "XF86Favorites"},
		{"\"BrowserHome\"", "XF86HomePage"},
		{"\"LaunchMail\"", "XF86Mail"},
		{"\"Power\"", "XF86PowerOff"},
		{"\"Sleep\"", "XF86Sleep"},
		{"\"WakeUp\"", "XF86WakeUp"},
		{"\"Eject\"", "XF86Eject"},
		{"\"Copy\"", "XF86Copy"},
		{"\"Cut\"", "XF86Cut"},
		{"\"Paste\"", "XF86Paste"},
		{"\"Open\"", "XF86Open"},
		{"\"Again\"", "Redo"},
	};
	char x[128];
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		snprintf(x, sizeof(x), "ctrl+%s", table[i].x);
		expect_chord(table[i].dom, 2, x);
	}
	/* AltGraph, Hyper and CapsLock are modifiers of their own: a press
	 * is nothing. */
	uint32_t ks;
	cr_assert_eq(dg_cdp_dom_key("CapsLock", &ks), 0);
	cr_assert(dg_keysym_is_modifier(ks));
	expect_nothing(run("Input.dispatchKeyEvent", "{\"type\":\"rawKeyDown\",\"key\":\"CapsLock\","
			   "\"modifiers\":2}"));
	cr_assert_eq(dg_cdp_dom_key("AltGraph", &ks), 0);
	cr_assert(dg_keysym_is_modifier(ks));
	cr_assert_eq(dg_cdp_dom_key("Hyper", &ks), 0);
	cr_assert(dg_keysym_is_modifier(ks));
	cr_assert_eq(dg_cdp_dom_key("Retrun", &ks), -ENOENT);
	cr_assert_eq(dg_cdp_dom_key(NULL, &ks), -ENOENT);
	cr_assert_eq(dg_cdp_dom_key("", &ks), -ENOENT);
}

Test(cdp_classify, key_modifiers)
{
	expect_chord("\"a\"", 2, "ctrl+a");
	expect_chord("\"a\"", 1, "alt+a");
	expect_chord("\"a\"", 4, "super+a");
	expect_chord("\"A\"", 10, "ctrl+shift+a");
	expect_chord("\"a\"", 15, "ctrl+shift+alt+super+a");
	expect_chord("\"a\"", 2 | 64, "ctrl+a");
	/* Ctrl held: the chord, even with text */
	expect_action(run("Input.dispatchKeyEvent", "{\"type\":\"keyDown\",\"key\":\"l\","
			  "\"code\":\"KeyL\",\"text\":\"l\",\"modifiers\":2,"
			  "\"windowsVirtualKeyCode\":76}"),
		      "{\"keys\":\"Control_L+l\",\"type\":\"key\"}");
	expect_json(cls.params, "{\"key\":\"l\",\"modifiers\":2,\"type\":\"keyDown\"}", "params");
	/* Shift alone: text is typed, a key without text is pressed */
	expect_action(run("Input.dispatchKeyEvent", "{\"type\":\"keyDown\",\"key\":\"A\","
			  "\"code\":\"KeyA\",\"text\":\"A\",\"modifiers\":8,"
			  "\"windowsVirtualKeyCode\":65}"),
		      "{\"text\":\"A\",\"type\":\"type\"}");
	expect_chord("\"Tab\"", 8, "shift+Tab");
	expect_chord("\"ArrowLeft\"", 0, "Left");
	expect_chord("\"a\"", 0, "a");
	/* With ctrl and shift, a shifted character names its key's symbol */
	expect_chord("\"!\"", 10, "ctrl+shift+exclam");
	expect_bad(run("Input.dispatchKeyEvent", "{\"type\":\"keyDown\",\"key\":\"a\","
		       "\"modifiers\":-2}"),
		   "Input.dispatchKeyEvent.modifiers: -2 is not in");
	expect_bad(run("Input.dispatchKeyEvent", "{\"type\":\"keyDown\",\"key\":\"a\","
		       "\"modifiers\":[2]}"),
		   "Input.dispatchKeyEvent.modifiers: an array is not an integer");
}

Test(cdp_classify, key_events)
{
	const char *m = "Input.dispatchKeyEvent";
	/* typing: the text, never the key or the code in the summary */
	expect_action(run(m, "{\"type\":\"keyDown\",\"key\":\"p\",\"code\":\"KeyP\",\"text\":\"p\","
			     "\"windowsVirtualKeyCode\":80}"),
		      "{\"text\":\"p\",\"type\":\"type\"}");
	expect_json(cls.params, "{\"text_bytes\":1,\"type\":\"keyDown\"}", "params");
	expect_action(run(m, "{\"type\":\"char\",\"text\":\"\\u00e9\"}"),
		      "{\"text\":\"\\u00E9\",\"type\":\"type\"}");
	expect_action(run(m, "{\"type\":\"keyDown\",\"key\":\"Enter\",\"code\":\"Enter\","
			     "\"text\":\"\\r\",\"windowsVirtualKeyCode\":13}"),
		      "{\"text\":\"\\n\",\"type\":\"type\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Enter\",\"windowsVirtualKeyCode\":13}"),
		      "{\"keys\":\"Return\",\"type\":\"key\"}");
	expect_json(cls.params, "{\"key\":\"Enter\",\"type\":\"rawKeyDown\"}", "params");
	expect_nothing(run(m, "{\"type\":\"keyUp\",\"key\":\"a\",\"modifiers\":2}"));
	expect_nothing(run(m, "{\"type\":\"keyUp\",\"key\":\"Retrun\"}"));
	expect_nothing(run(m, "{\"type\":\"keyDown\"}"));
	expect_nothing(run(m, "{\"type\":\"keyDown\",\"text\":\"\"}"));
	/* a modifier's own press */
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Control\",\"code\":\"ControlLeft\","
			      "\"modifiers\":2,\"windowsVirtualKeyCode\":17}"));
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Shift\",\"modifiers\":8}"));
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Meta\",\"modifiers\":4}"));
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Alt\",\"modifiers\":1}"));
	/* the key by its code, then by its virtual key code */
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"code\":\"KeyW\",\"modifiers\":2}"),
		      "{\"keys\":\"Control_L+w\",\"type\":\"key\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"code\":\"Digit1\",\"modifiers\":2}"),
		      "{\"keys\":\"Control_L+1\",\"type\":\"key\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"windowsVirtualKeyCode\":87,\"modifiers\":2}"),
		      "{\"keys\":\"Control_L+w\",\"type\":\"key\"}");
	expect_json(cls.params, "{\"modifiers\":2,\"type\":\"rawKeyDown\",\"windowsVirtualKeyCode\":87}",
		    "params");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"windowsVirtualKeyCode\":116}"),
		      "{\"keys\":\"F5\",\"type\":\"key\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"code\":\"Foo\",\"windowsVirtualKeyCode\":"
			     "37,\"modifiers\":1}"),
		      "{\"keys\":\"Alt_L+Left\",\"type\":\"key\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"code\":\"Semicolon\",\"modifiers\":2}"),
		      "{\"keys\":\"Control_L+semicolon\",\"type\":\"key\"}");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"code\":\"KeyA\",\"windowsVirtualKeyCode\":87,"
			  "\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.windowsVirtualKeyCode: 87 is not the code of code \"KeyA\"");
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"windowsVirtualKeyCode\":186,\"modifiers\":2}"));
	/* the virtual key code must be the key's */
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"a\",\"windowsVirtualKeyCode\":87,"
			  "\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.windowsVirtualKeyCode: 87 is not the code of key \"a\"");
	expect_bad(run(m, "{\"type\":\"keyDown\",\"key\":\"a\",\"text\":\"a\","
			  "\"windowsVirtualKeyCode\":116}"),
		   "Input.dispatchKeyEvent.windowsVirtualKeyCode: 116 is not");
	expect_chord("\"!\"", 10, "ctrl+shift+exclam");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"!\",\"windowsVirtualKeyCode\":49,"
			     "\"modifiers\":10}"),
		      "{\"keys\":\"Control_L+Shift_L+exclam\",\"type\":\"key\"}");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"1\",\"code\":\"Numpad1\","
			     "\"windowsVirtualKeyCode\":97,\"modifiers\":2}"),
		      "{\"keys\":\"Control_L+1\",\"type\":\"key\"}");
	/* unknown keys, malformed fields */
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Retrun\",\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.key: unknown key \"Retrun\"");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Unidentified\"}"),
		   "Input.dispatchKeyEvent.key: unknown key \"Unidentified\"");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"ab\",\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.key: unknown key \"ab\"");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"\\u0001\",\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.key: unknown key \"\\x01\"");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"a\\u0000\",\"modifiers\":2}"),
		   "Input.dispatchKeyEvent.key: contains NUL at byte 1");
	json_t *p = with_long("key", "", 'a', DG_CDP_WORD_MAX + 1);
	json_object_set_new(p, "type", json_string("keyDown"));
	expect_bad(run_obj(m, p), "Input.dispatchKeyEvent.key: 65 bytes is over the limit of 64");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"key\":5}"),
		   "Input.dispatchKeyEvent.key: 5 is not a string");
	expect_bad(run(m, "{\"key\":\"a\"}"), "Input.dispatchKeyEvent.type: missing");
	expect_bad(run(m, "{\"type\":\"keyPress\",\"key\":\"a\"}"),
		   "Input.dispatchKeyEvent.type: unknown value \"keyPress\" (allowed: keyDown, "
		   "keyUp, rawKeyDown, char)");
	expect_bad(run(m, "{\"type\":\"keyDown\",\"windowsVirtualKeyCode\":-1}"),
		   "Input.dispatchKeyEvent.windowsVirtualKeyCode: -1 is not in");
	expect_bad(run(m, "{\"type\":\"keyDown\",\"windowsVirtualKeyCode\":\"65\"}"),
		   "Input.dispatchKeyEvent.windowsVirtualKeyCode: \"65\" is not an integer");
	expect_bad(run(m, "{\"type\":\"keyDown\",\"text\":\"\\b\"}"),
		   "Input.dispatchKeyEvent.text: ");
	p = with_long("text", "", 'a', DG_ACTION_TEXT_MAX + 1);
	json_object_set_new(p, "type", json_string("char"));
	expect_bad(run_obj(m, p), "Input.dispatchKeyEvent.text: 16385 bytes is over the limit");
}

Test(cdp_classify, key_commands)
{
	const char *m = "Input.dispatchKeyEvent";
	cr_assert_eq(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"Shift\",\"modifiers\":8,"
			    "\"commands\":[\"selectAll\"]}"),
		     0, "%s", err.msg);
	cr_assert_null(cls.action);
	expect_json(cls.params, "{\"commands\":[\"selectAll\"],\"modifiers\":8,\"type\":\"rawKeyDown\"}",
		    "params");
	expect_action(run(m, "{\"type\":\"rawKeyDown\",\"key\":\"a\",\"modifiers\":4,"
			     "\"commands\":[\"selectAll\"]}"),
		      "{\"keys\":\"Super_L+a\",\"type\":\"key\"}");
	expect_nothing(run(m, "{\"type\":\"rawKeyDown\",\"commands\":[]}"));
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"commands\":\"paste\"}"),
		   "Input.dispatchKeyEvent.commands: \"paste\" is not an array of strings");
	expect_bad(run(m, "{\"type\":\"rawKeyDown\",\"commands\":[1]}"),
		   "Input.dispatchKeyEvent.commands[0]: 1 is not a string");
	json_t *many = json_array();
	for (int i = 0; i < DG_CDP_COMMANDS_MAX + 1; i++)
		json_array_append_new(many, json_string("paste"));
	expect_bad(run_obj(m, json_pack("{s:s,s:o}", "type", "keyDown", "commands", many)),
		   "Input.dispatchKeyEvent.commands: 17 commands is over the limit of 16");
}

/* ---- scripts ---- */

Test(cdp_classify, scripts)
{
	static const struct {
		const char *method, *field;
	} rows[] = {
		{"Runtime.evaluate", "expression"},
		{"Runtime.compileScript", "expression"},
		{"Runtime.callFunctionOn", "functionDeclaration"},
		{"Page.addScriptToEvaluateOnNewDocument", "source"},
		{"Page.addScriptToEvaluateOnLoad", "scriptSource"},
		{"Debugger.evaluateOnCallFrame", "expression"},
		{"Debugger.setScriptSource", "scriptSource"},
		{"DOM.setOuterHTML", "outerHTML"},
		{"DOM.setAttributeValue", "value"},
		{"DOM.setAttributesAsText", "text"},
		{"Page.setDocumentContent", "html"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *m = rows[i].method, *f = rows[i].field;
		char want[160];
		cr_assert_eq(runf(m, "{\"%s\":\"document.title\",\"returnByValue\":true}", f), 0,
			     "%s", err.msg);
		cr_assert_null(cls.action);
		expect_json(cls.code, "\"document.title\"", m);
		expect_json(cls.params, "{\"code_bytes\":14,\"code_head\":\"document.title\"}", m);
		cr_assert_eq(runf(m, "{\"%s\":\"\"}", f), 0);
		expect_json(cls.code, "\"\"", m);
		snprintf(want, sizeof(want), "%s.%s: missing", m, f);
		expect_bad(run(m, "{}"), want);
		expect_bad(run(m, NULL), want);
		snprintf(want, sizeof(want), "%s.%s: an object is not a string", m, f);
		expect_bad(runf(m, "{\"%s\":{}}", f), want);
		snprintf(want, sizeof(want), "%s.%s: contains NUL at byte 3", m, f);
		expect_bad(runf(m, "{\"%s\":\"abc\\u0000\"}", f), want);
	}
	/* the limit and one past it; the head cut at a character boundary */
	cr_assert_eq(run_obj("Runtime.evaluate",
			     with_long("expression", "", 'a', DG_CDP_CODE_MAX)), 0);
	cr_assert_eq(json_string_length(cls.code), DG_CDP_CODE_MAX);
	cr_assert_eq(json_string_length(json_object_get(cls.params, "code_head")), DG_CDP_CODE_HEAD);
	expect_bad(run_obj("Runtime.evaluate", with_long("expression", "", 'a', DG_CDP_CODE_MAX + 1)),
		   "Runtime.evaluate.expression: 4194305 bytes is over the limit of 4194304 bytes");
	char head[DG_CDP_CODE_HEAD + 8];
	memset(head, 'a', sizeof(head));
	memcpy(head + DG_CDP_CODE_HEAD - 1, "\xc3\xa9", 2);
	head[sizeof(head) - 1] = '\0';
	cr_assert_eq(run_obj("Runtime.evaluate", json_pack("{s:s}", "expression", head)), 0);
	cr_assert_eq(json_string_length(json_object_get(cls.params, "code_head")),
		     DG_CDP_CODE_HEAD - 1);
	/* breakpoint conditions are scripts too, when given */
	const char *bps[] = {"Debugger.setBreakpoint", "Debugger.setBreakpointByUrl",
			     "Debugger.setBreakpointOnFunctionCall"};
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(run(bps[i], "{\"lineNumber\":1,\"condition\":\"x > 1\"}"), 0);
		expect_json(cls.code, "\"x > 1\"", bps[i]);
		expect_nothing(run(bps[i], "{\"lineNumber\":1,\"condition\":\"\"}"));
		expect_nothing(run(bps[i], "{\"lineNumber\":1}"));
		expect_bad(run(bps[i], "{\"condition\":false}"), bps[i]);
	}
	expect_nothing(run("Runtime.runIfWaitingForDebugger", NULL));
}

/* ---- files, downloads, contexts, sessions ---- */

Test(cdp_classify, files)
{
	const char *m = "DOM.setFileInputFiles";
	cr_assert_eq(run(m, "{\"files\":[\"/tmp/a.txt\",\"/home/u/b c\"],\"backendNodeId\":4}"), 0);
	cr_assert(!cls.action && !cls.code && !cls.url && !cls.refuse);
	expect_json(cls.params, "{\"files\":[\"/tmp/a.txt\",\"/home/u/b c\"]}", "params");
	expect_bad(run(m, "{\"files\":[]}"), "DOM.setFileInputFiles.files: 0 paths; 1 to 16");
	expect_bad(run(m, "{}"), "DOM.setFileInputFiles.files: missing");
	expect_bad(run(m, "{\"files\":\"/tmp/a\"}"),
		   "DOM.setFileInputFiles.files: \"/tmp/a\" is not an array of paths");
	expect_bad(run(m, "{\"files\":[\"tmp/a\"]}"),
		   "DOM.setFileInputFiles.files[0]: not an absolute path");
	expect_bad(run(m, "{\"files\":[\"/tmp/a\",\"/tmp/../etc/passwd\"]}"),
		   "DOM.setFileInputFiles.files[1]: not a canonical path");
	expect_bad(run(m, "{\"files\":[\"/tmp/a\\u0001\"]}"),
		   "DOM.setFileInputFiles.files[0]: control character");
	expect_bad(run(m, "{\"files\":[\"/tmp/a\\u0000\"]}"),
		   "DOM.setFileInputFiles.files[0]: contains NUL at byte 6");
	expect_bad(run(m, "{\"files\":[\"/tmp/a\",3]}"),
		   "DOM.setFileInputFiles.files[1]: 3 is not a string");
	json_t *f = json_array();
	for (int i = 0; i < DG_ACTION_PATHS_MAX; i++)
		json_array_append_new(f, json_string("/tmp/x"));
	cr_assert_eq(run_obj(m, json_pack("{s:O}", "files", f)), 0, "%s", err.msg);
	json_array_append_new(f, json_string("/tmp/x"));
	expect_bad(run_obj(m, json_pack("{s:o}", "files", f)),
		   "DOM.setFileInputFiles.files: 17 paths; 1 to 16");
	json_t *big = with_long("p", "/", 'x', DG_ACTION_FILE_PATH_MAX - 1);
	cr_assert_eq(run_obj(m, json_pack("{s:[O]}", "files", json_object_get(big, "p"))), 0);
	json_decref(big);
	big = with_long("p", "/", 'x', DG_ACTION_FILE_PATH_MAX);
	expect_bad(run_obj(m, json_pack("{s:[O]}", "files", json_object_get(big, "p"))),
		   "DOM.setFileInputFiles.files[0]: 1025 bytes is over the limit of 1024 bytes");
	json_decref(big);
}

Test(cdp_classify, fetch)
{
	const char *m = "Fetch.continueRequest";
	cr_assert_eq(run(m, "{\"requestId\":\"r1\",\"url\":\"https://evil.test/x\"}"), 0);
	cr_assert(!cls.action && !cls.code && !cls.refuse);
	expect_json(cls.url, "\"https://evil.test/x\"", "url");
	expect_json(cls.params, "{\"url\":\"https://evil.test/x\"}", "params");
	expect_nothing(run(m, "{\"requestId\":\"r1\"}"));
	expect_nothing(run(m, NULL));
	expect_bad(run(m, "{\"url\":1}"), "Fetch.continueRequest.url: 1 is not a string");
	expect_bad(run(m, "{\"url\":\"\"}"), "Fetch.continueRequest.url: ");
	expect_bad(run(m, "{\"url\":\"http://a/\\n\"}"), "Fetch.continueRequest.url: ");
	expect_bad(run_obj(m, with_long("url", "http://a/", 'x', DG_ACTION_URL_MAX)),
		   "Fetch.continueRequest.url: 8201 bytes is over the limit");
	expect_nothing(run("Fetch.continueWithAuth", "{\"requestId\":\"r\"}"));
	expect_nothing(run("Fetch.fulfillRequest", "{\"requestId\":\"r\",\"responseCode\":200}"));
	cr_assert_eq(run("Fetch.fulfillRequest",
			 "{\"requestId\":\"r\",\"responseCode\":200,\"body\":\"PHNjcmlwdD4=\"}"), 0);
	expect_json(cls.code, "\"PHNjcmlwdD4=\"", "Fetch.fulfillRequest");
	expect_nothing(run("Fetch.failRequest", "{\"requestId\":\"r\"}"));
}

Test(cdp_classify, downloads_and_contexts)
{
	const char *ms[] = {"Browser.setDownloadBehavior", "Page.setDownloadBehavior"};
	for (int i = 0; i < 2; i++) {
		char want[128];
		cr_assert_eq(run(ms[i], "{\"behavior\":\"allow\",\"downloadPath\":\"/tmp\"}"), 0);
		cr_assert(!cls.action && !cls.code && !cls.url && !cls.refuse);
		expect_json(cls.params, "{\"behavior\":\"allow\"}", ms[i]);
		snprintf(want, sizeof(want), "%s.behavior: missing", ms[i]);
		expect_bad(run(ms[i], "{}"), want);
		snprintf(want, sizeof(want), "%s.behavior: true is not a string", ms[i]);
		expect_bad(run(ms[i], "{\"behavior\":true}"), want);
		snprintf(want, sizeof(want), "%s.behavior: 65 bytes", ms[i]);
		expect_bad(run_obj(ms[i], with_long("behavior", "", 'd', 65)), want);
	}
	const char *m = "Target.createBrowserContext";
	cr_assert_eq(run(m, "{\"proxyServer\":\"socks5://evil:1080\"}"), 0);
	expect_json(cls.params, "{\"proxyServer\":true}", "params");
	cr_assert(!cls.action && !cls.code && !cls.url && !cls.refuse);
	expect_nothing(run(m, "{\"proxyServer\":\"\"}"));
	expect_nothing(run(m, "{\"proxyBypassList\":\"*\"}"));
	expect_nothing(run(m, NULL));
	expect_bad(run(m, "{\"proxyServer\":1}"),
		   "Target.createBrowserContext.proxyServer: 1 is not a string");
}

Test(cdp_classify, sessions)
{
	expect_nothing(run("Target.attachToTarget", "{\"targetId\":\"T\",\"flatten\":true}"));
	expect_refused(run("Target.attachToTarget", "{\"targetId\":\"T\",\"flatten\":false}"),
		       DG_CDP_REFUSE_FLATTEN);
	expect_refused(run("Target.attachToTarget", "{\"targetId\":\"T\"}"), DG_CDP_REFUSE_FLATTEN);
	expect_refused(run("Target.attachToTarget", NULL), DG_CDP_REFUSE_FLATTEN);
	expect_bad(run("Target.attachToTarget", "{\"flatten\":\"yes\"}"),
		   "Target.attachToTarget.flatten: \"yes\" is not a boolean");
	expect_refused(run("Target.sendMessageToTarget", "{\"message\":\"{}\"}"),
		       DG_CDP_REFUSE_FLAT);
	const char *m = "Target.setAutoAttach";
	expect_nothing(run(m, "{\"autoAttach\":true,\"waitForDebuggerOnStart\":true,\"flatten\":true}"));
	expect_refused(run(m, "{\"autoAttach\":true,\"waitForDebuggerOnStart\":false}"),
		       DG_CDP_REFUSE_FLATTEN);
	expect_refused(run(m, "{\"autoAttach\":true,\"flatten\":false}"), DG_CDP_REFUSE_FLATTEN);
	expect_nothing(run(m, "{\"autoAttach\":false}"));
	expect_bad(run(m, "{}"), "Target.setAutoAttach.autoAttach: missing");
	expect_bad(run(m, "{\"autoAttach\":1}"), "Target.setAutoAttach.autoAttach: 1 is not a boolean");
	expect_bad(run(m, "{\"autoAttach\":true,\"flatten\":null}"),
		   "Target.setAutoAttach.flatten: null is not a boolean");
}

Test(cdp_classify, other_methods)
{
	expect_nothing(run("Page.enable", NULL));
	expect_nothing(run("Browser.close", "{}"));
	expect_nothing(run("Target.attachToBrowserTarget", NULL));
	expect_nothing(run("Network.setExtraHTTPHeaders", "{\"headers\":{\"a\":\"b\"}}"));
	expect_nothing(run("page.navigate", "{\"url\":\"https://x/\"}"));
	expect_nothing(run("", NULL));
	expect_nothing(run("Nonsense", "{\"url\":7}"));
	cr_assert_eq(dg_cdp_classify(NULL, NULL, &view, &cls, &err), -EINVAL);
	/* the caller checks params is an object; still refused here */
	json_t *arr = json_array();
	cr_assert_eq(dg_cdp_classify("Page.navigate", arr, &view, &cls, &err), -EINVAL);
	cr_assert_str_eq(err.msg, "Page.navigate.params: not an object");
	cr_assert_eq(dg_cdp_classify("Page.enable", arr, &view, &cls, &err), 0);
	json_decref(arr);
	dg_cdp_class_free(NULL);
	dg_cdp_class_free(&cls);
	dg_cdp_class_free(&cls);
}

/* ---- mutations ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* A value of a kind the fields do not expect, or at their edges. */
static json_t *odd_value(void)
{
	switch (next() % 22) {
	case 0: return json_null();
	case 1: return json_true();
	case 2: return json_false();
	case 3: return json_integer(-1);
	case 4: return json_integer(INT64_MAX);
	case 5: return json_integer(INT64_MIN);
	case 6: return json_real(1e308);
	case 7: return json_real(-1e308);
	case 8: return json_real(0.5);
	case 9: return json_string("");
	case 10: return json_string("about:blank");
	case 11: return json_stringn("a\0b", 3);
	case 12: return json_string("\x01\x7f");
	case 13: return long_string("", 'x', 20000 + next() % 5);
	case 14: return json_array();
	case 15: return json_pack("[ii]", 1, 2);
	case 16: return json_object();
	case 17: return json_pack("{s:i,s:i}", "x", 1, "y", 2);
	case 18: return json_string("/");
	case 19: return json_integer(next() % 1000);
	case 20: return json_string("Enter");
	default: {
		json_t *a = json_array();
		int n = (int)(next() % 40);
		for (int i = 0; i < n; i++)
			json_array_append_new(a, next() % 2 ? json_pack("{s:i,s:i}", "x", i, "y", i)
							    : json_string("/tmp/a"));
		return a;
	}
	}
}

/* Replaces, removes or adds one field, at the top or one level down. */
static void mutate(json_t *o)
{
	static const char *const extra[] = {"x", "y", "url", "type", "text", "key", "files",
					    "touchPoints", "modifiers", "flatten", "expression",
					    "behavior", "data", "commands", "button", "deltaY"};
	json_t *target = o;
	const char *k;
	json_t *v;
	void *tmp;
	/* sometimes descend into an object or array member */
	json_object_foreach_safe(o, tmp, k, v) {
		if (next() % 4 == 0 && json_is_array(v) && json_array_size(v) > 0) {
			json_t *e = json_array_get(v, next() % json_array_size(v));
			if (json_is_object(e)) {
				target = e;
				break;
			}
			json_array_set_new(v, next() % json_array_size(v), odd_value());
			return;
		}
		if (next() % 4 == 0 && json_is_object(v)) {
			target = v;
			break;
		}
	}
	size_t n = json_object_size(target);
	uint32_t what = next() % 3;
	if (n == 0 || what == 0) {
		json_object_set_new(target, extra[next() % (sizeof(extra) / sizeof(extra[0]))],
				    odd_value());
		return;
	}
	size_t pick = next() % n, i = 0;
	json_object_foreach_safe(target, tmp, k, v) {
		if (i++ != pick)
			continue;
		if (what == 1)
			json_object_del(target, k);
		else
			json_object_set_new(target, k, odd_value());
		return;
	}
}

Test(cdp_classify, mutations)
{
	static const struct {
		const char *method, *params;
	} seeds[] = {
		{"Page.navigate", "{\"url\":\"https://example.com/\"}"},
		{"Target.createTarget", "{\"url\":\"https://example.com/\"}"},
		{"Page.reload", "{\"scriptToEvaluateOnLoad\":\"1\"}"},
		{"Page.navigateToHistoryEntry", "{\"entryId\":1}"},
		{"Input.dispatchMouseEvent", "{\"type\":\"mousePressed\",\"x\":1,\"y\":2,"
					     "\"button\":\"left\",\"modifiers\":2}"},
		{"Input.dispatchMouseEvent", "{\"type\":\"mouseWheel\",\"x\":1,\"y\":2,"
					     "\"deltaX\":0,\"deltaY\":120}"},
		{"Input.dispatchTouchEvent", "{\"type\":\"touchStart\",\"touchPoints\":"
					     "[{\"x\":1,\"y\":2},{\"x\":3,\"y\":4}]}"},
		{"Input.dispatchDragEvent", "{\"type\":\"drop\",\"x\":1,\"y\":2,"
					    "\"data\":{\"files\":[\"/tmp/a\"]}}"},
		{"Input.synthesizeScrollGesture", "{\"x\":1,\"y\":2,\"yDistance\":-300}"},
		{"Input.insertText", "{\"text\":\"hello\"}"},
		{"Input.dispatchKeyEvent", "{\"type\":\"keyDown\",\"key\":\"a\",\"code\":\"KeyA\","
					   "\"text\":\"a\",\"modifiers\":2,"
					   "\"windowsVirtualKeyCode\":65,\"commands\":[\"selectAll\"]}"},
		{"Runtime.callFunctionOn", "{\"functionDeclaration\":\"function(){}\"}"},
		{"DOM.setFileInputFiles", "{\"files\":[\"/tmp/a\",\"/tmp/b\"]}"},
		{"Fetch.continueRequest", "{\"url\":\"https://x/\"}"},
		{"Browser.setDownloadBehavior", "{\"behavior\":\"deny\"}"},
		{"Target.createBrowserContext", "{\"proxyServer\":\"http://p\"}"},
		{"Target.attachToTarget", "{\"targetId\":\"T\",\"flatten\":true}"},
		{"Target.setAutoAttach", "{\"autoAttach\":true,\"flatten\":true}"},
	};
	const size_t n_seeds = sizeof(seeds) / sizeof(seeds[0]);
	int counts[2] = {0, 0};
	for (int round = 0; round < 600; round++) {
		size_t s = next() % n_seeds;
		json_t *p = load(seeds[s].params);
		int steps = 1 + (int)(next() % 3);
		for (int i = 0; i < steps; i++)
			mutate(p);
		int rc = run_obj(seeds[s].method, p); /* checks 0/-EINVAL, message, action */
		counts[rc == 0]++;
	}
	/* both outcomes are exercised */
	cr_assert_gt(counts[0], 50);
	cr_assert_gt(counts[1], 50);
}
