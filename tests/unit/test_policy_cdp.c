/* The policy's "cdp" section (policy/cdp.c, docs/cdp.md): parsing refuses
 * every bad pattern kind naming the key and index, the bounds hold at their
 * edges (DG_POLICY_CDP_RULES_MAX patterns, DG_POLICY_CDP_NAME_MAX bytes a
 * name), and dg_policy_decide_cdp orders deny patterns, the always-denied
 * methods, allow patterns and the built-in default as policy.h says; copies
 * share the section and free it with the last one (run under ASan). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"
#include "policy/policy.h"

#define ORIGIN "/test/policy.json"
#define PREFIX "policy " ORIGIN ": "

static struct dg_policy pol;
static struct dg_err err;
static struct dg_decision dec;

static void setup(void)
{
	dg_policy_default(&pol);
}

static void teardown(void)
{
	dg_policy_free(&pol);
}

TestSuite(cdp, .init = setup, .fini = teardown);

/* Parses the policy text into pol (freeing what it held). */
static int parse(const char *text)
{
	memset(&err, 0, sizeof(err));
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	return dg_policy_parse(text, strlen(text), ORIGIN, &pol, &err);
}

/* Parses {"version": 1, "cdp": <cdp>}. */
static int parse_cdp(const char *cdp)
{
	size_t n = strlen(cdp) + 32;
	char *text = malloc(n);
	cr_assert_not_null(text);
	snprintf(text, n, "{\"version\": 1, \"cdp\": %s}", cdp);
	int rc = parse(text);
	free(text);
	return rc;
}

#define assert_ok(rc) cr_assert_eq((rc), 0, "rc %d, message \"%s\"", (rc), err.msg)

/* The cdp value is refused with a message, after the origin, that holds want. */
#define refused(text, want)                                                                \
	do {                                                                               \
		int rc_ = parse_cdp(text);                                                 \
		cr_assert_eq(rc_, -EINVAL, "%s: rc %d (%s)", (text), rc_, err.msg);       \
		cr_assert(strncmp(err.msg, PREFIX, strlen(PREFIX)) == 0, "no origin: %s",  \
			  err.msg);                                                        \
		cr_assert(strstr(err.msg, (want)), "%s: message \"%s\" lacks \"%s\"", (text), \
			  err.msg, (want));                                                \
		cr_assert_null(pol.cdp);                                                   \
	} while (0)

#define ALLOW DG_VERDICT_ALLOW
#define DENY DG_VERDICT_DENY

/* Decides method under pol: verdict and rule. */
#define expect(method, want, want_rule)                                                    \
	do {                                                                               \
		cr_assert_eq(dg_policy_decide_cdp(&pol, (method), &dec), 0, "%s", (method)); \
		cr_assert_eq(dec.verdict, (want), "%s: %s by %s (%s)", (method),           \
			     dg_verdict_name(dec.verdict), dec.rule, dec.reason);          \
		cr_assert_str_eq(dec.rule, (want_rule), "%s: rule %s (%s)", (method),      \
				 dec.rule, dec.reason);                                    \
	} while (0)

/* A string of n copies of ch after the prefix (malloc'd). */
static char *repeat(const char *prefix, char ch, size_t n, const char *suffix)
{
	size_t p = strlen(prefix), s = strlen(suffix);
	char *out = malloc(p + n + s + 1);
	cr_assert_not_null(out);
	memcpy(out, prefix, p);
	memset(out + p, ch, n);
	memcpy(out + p + n, suffix, s + 1);
	return out;
}

/* ---- parsing ---------------------------------------------------------------- */

Test(cdp, loads_without_making_rules)
{
	assert_ok(parse_cdp("{\"allow\": [\"Page.*\", \"Runtime.evaluate\", \"*\"], "
			    "\"deny\": [\"Browser.close\"]}"));
	cr_assert_not_null(pol.cdp);
	/* Not a rule section: no rules, so no "default" is needed. */
	cr_assert_null(pol.rules);
	assert_ok(parse_cdp("{}"));
	cr_assert_not_null(pol.cdp);
	assert_ok(parse_cdp("{\"allow\": [], \"deny\": []}"));
	assert_ok(parse("{\"version\": 1, \"default\": \"deny\", \"actions\": {\"allow\": "
			 "[\"click\"]}, \"cdp\": {\"deny\": [\"Input.*\"]}}"));
	cr_assert_not_null(pol.rules);
	cr_assert_not_null(pol.cdp);
	/* Without the section: nothing. */
	assert_ok(parse("{\"version\": 1}"));
	cr_assert_null(pol.cdp);
}

Test(cdp, every_bad_pattern_kind_names_key_and_index)
{
	refused("{\"allow\": [\"Page.*\", \"\"]}", "cdp.allow[1]: \"\": no '.'");
	refused("{\"allow\": [\"Page\"]}", "cdp.allow[0]: \"Page\": no '.' between the domain");
	refused("{\"deny\": [\"Page.*\", \"Runtime.*\", \".enable\"]}",
		"cdp.deny[2]: \".enable\": the domain is empty");
	refused("{\"allow\": [\"Page.\"]}", "cdp.allow[0]: \"Page.\": the method is empty");
	refused("{\"allow\": [\"page.navigate\"]}",
		"cdp.allow[0]: \"page.navigate\": the domain does not start with an upper-case");
	refused("{\"allow\": [\"1Page.navigate\"]}", "does not start with an upper-case");
	refused("{\"allow\": [\"_Page.navigate\"]}", "does not start with an upper-case");
	refused("{\"allow\": [\"Pa-ge.navigate\"]}",
		"cdp.allow[0]: \"Pa-ge.navigate\": the domain holds a byte other than");
	refused("{\"allow\": [\"Page.navi gate\"]}", "the method holds a byte other than");
	refused("{\"allow\": [\"P\\u00e4ge.x\"]}", "\"P\\xc3\\xa4ge.x\": the domain holds a byte");
	refused("{\"allow\": [\"Page.nav*\"]}", "cdp.allow[0]: \"Page.nav*\": '*' stands alone");
	refused("{\"allow\": [\"Page.**\"]}", "'*' stands alone");
	refused("{\"allow\": [\"*.enable\"]}", "cdp.allow[0]: \"*.enable\": '*' stands alone");
	refused("{\"allow\": [\"**\"]}", "\"**\": no '.'");
	refused("{\"allow\": [\"*.*\"]}", "'*' stands alone");
	refused("{\"allow\": [\"Page.a.b\"]}", "cdp.allow[0]: \"Page.a.b\": more than one '.'");
	refused("{\"allow\": [\"Page..b\"]}", "\"Page..b\": more than one '.'");
	refused("{\"allow\": [\" Page.x\"]}", "the domain holds a byte other than");
	/* NUL never reaches a pattern: the JSON parser refuses it. */
	refused("{\"allow\": [\"Page.nav\\u0000x\"]}", "invalid JSON");
	/* Every refusal says what a pattern is. */
	refused("{\"allow\": [\"Page\"]}", "a pattern is \"Domain.method\", \"Domain.*\" or \"*\"");
}

Test(cdp, name_length_bound)
{
	char *d64 = repeat("{\"allow\": [\"D", 'a', DG_POLICY_CDP_NAME_MAX - 1, ".m\"]}");
	char *d65 = repeat("{\"allow\": [\"D", 'a', DG_POLICY_CDP_NAME_MAX, ".m\"]}");
	char *m64 = repeat("{\"deny\": [\"Page.", 'm', DG_POLICY_CDP_NAME_MAX, "\"]}");
	char *m65 = repeat("{\"deny\": [\"Page.", 'm', DG_POLICY_CDP_NAME_MAX + 1, "\"]}");
	assert_ok(parse_cdp(d64));
	refused(d65, "the domain is longer than 64 bytes");
	assert_ok(parse_cdp(m64));
	refused(m65, "cdp.deny[0]: \"Page.mmmm");
	refused(m65, "the method is longer than 64 bytes");
	char *big = repeat("{\"allow\": [\"Page.", 'm', 100000, "\"]}");
	refused(big, "the method is longer than 64 bytes");
	free(d64);
	free(d65);
	free(m64);
	free(m65);
	free(big);
}

/* {"<list>": ["D0.m", ..., "D<n-1>.m"]} */
static char *list_of(const char *list, int n)
{
	size_t cap = 64 + (size_t)n * 16;
	char *s = malloc(cap);
	cr_assert_not_null(s);
	size_t o = (size_t)snprintf(s, cap, "{\"%s\": [", list);
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(s + o, cap - o, "%s\"D%d.m\"", i ? ", " : "", i);
	snprintf(s + o, cap - o, "]}");
	return s;
}

Test(cdp, patterns_per_list_bound)
{
	static const char *const lists[] = { "allow", "deny" };
	for (int k = 0; k < 2; k++) {
		char *at = list_of(lists[k], DG_POLICY_CDP_RULES_MAX);
		char *over = list_of(lists[k], DG_POLICY_CDP_RULES_MAX + 1);
		assert_ok(parse_cdp(at));
		/* The last one is used. */
		char last[32];
		snprintf(last, sizeof(last), "D%d.m", DG_POLICY_CDP_RULES_MAX - 1);
		char rule[32];
		snprintf(rule, sizeof(rule), "cdp.%s[%d]", lists[k], DG_POLICY_CDP_RULES_MAX - 1);
		expect(last, k ? DENY : ALLOW, rule);
		char want[64];
		snprintf(want, sizeof(want), "cdp.%s: 65 patterns is more than the limit of 64",
			 lists[k]);
		refused(over, want);
		free(at);
		free(over);
	}
}

Test(cdp, duplicates_within_a_list)
{
	refused("{\"allow\": [\"Page.*\", \"Runtime.evaluate\", \"Page.*\"]}",
		"cdp.allow[2]: \"Page.*\" is also cdp.allow[0]");
	refused("{\"deny\": [\"*\", \"*\"]}", "cdp.deny[1]: \"*\" is also cdp.deny[0]");
	refused("{\"deny\": [\"Page.navigate\", \"Page.navigate\"]}", "is also cdp.deny[0]");
	/* Not duplicates: a list and the other, or patterns that overlap. */
	assert_ok(parse_cdp("{\"allow\": [\"Page.*\"], \"deny\": [\"Page.*\"]}"));
	assert_ok(parse_cdp("{\"allow\": [\"Page.*\", \"Page.navigate\", \"*\"]}"));
	/* Names are case-sensitive, as in CDP. */
	assert_ok(parse_cdp("{\"allow\": [\"Page.navigate\", \"Page.Navigate\"]}"));
}

Test(cdp, unknown_keys_and_wrong_types)
{
	refused("{\"ask\": [\"Page.*\"]}", "unknown key \"cdp.ask\"");
	refused("{\"Allow\": []}", "unknown key \"cdp.Allow\"");
	refused("{\"allow\": [], \"default\": \"allow\"}", "unknown key \"cdp.default\"");
	refused("[]", "cdp: an array is not an object");
	refused("\"Page.*\"", "cdp: \"Page.*\" is not an object");
	refused("null", "cdp: null is not an object");
	refused("{\"allow\": \"Page.*\"}", "cdp.allow: \"Page.*\" is not an array of patterns");
	refused("{\"deny\": {}}", "cdp.deny: an object is not an array of patterns");
	refused("{\"deny\": null}", "cdp.deny: null is not an array of patterns");
	refused("{\"allow\": [\"Page.*\", 1]}", "cdp.allow[1]: 1 is not a pattern");
	refused("{\"allow\": [null]}", "cdp.allow[0]: null is not a pattern");
	refused("{\"allow\": [[\"Page.*\"]]}", "cdp.allow[0]: an array is not a pattern");
	refused("{\"allow\": [true]}", "cdp.allow[0]: true is not a pattern");
	/* The section itself, once: duplicate keys are refused by the parser. */
	cr_assert_eq(parse("{\"version\": 1, \"cdp\": {}, \"cdp\": {}}"), -EINVAL);
}

Test(cdp, a_refused_policy_keeps_nothing)
{
	assert_ok(parse_cdp("{\"allow\": [\"Tracing.*\"]}"));
	struct dg_policy before = pol;
	/* cdp parsed, then a later section refused: the new cdp is freed
	 * (LeakSanitizer) and pol is untouched. */
	struct dg_policy next = pol;
	memset(&err, 0, sizeof(err));
	const char *text = "{\"version\": 1, \"cdp\": {\"deny\": [\"Page.*\"]}, "
			   "\"limits\": {\"pids\": 1}}";
	cr_assert_eq(dg_policy_parse(text, strlen(text), ORIGIN, &next, &err), -EINVAL);
	cr_assert(strstr(err.msg, "limits.pids"), "%s", err.msg);
	cr_assert_eq(next.cdp, before.cdp);
	expect("Tracing.start", ALLOW, "cdp.allow[0]");
	/* A bad pattern after good ones in the same list. */
	refused("{\"allow\": [\"Page.*\", \"Runtime.*\"], \"deny\": [\"x\"]}", "cdp.deny[0]");
}

/* ---- decisions ---------------------------------------------------------------- */

Test(cdp, builtin_default_without_a_section)
{
	/* The built-in default policy, and policies of either default. */
	static const char *const texts[] = {
		NULL,
		"{\"version\": 1, \"default\": \"allow\", \"actions\": {\"allow\": [\"click\"]}}",
		"{\"version\": 1, \"default\": \"deny\", \"urls\": {\"allow\": [\"**\"]}}",
		"{\"version\": 1, \"cdp\": {}}",
	};
	static const char *const allowed[] = {
		"Page.navigate", "Page.enable", "Runtime.evaluate", "Runtime.enable",
		"DOM.getDocument", "DOMSnapshot.captureSnapshot", "CSS.enable",
		"Accessibility.getFullAXTree", "Input.dispatchMouseEvent", "Network.enable",
		"Fetch.enable", "Emulation.setDeviceMetricsOverride", "Target.setAutoAttach",
		"Target.attachToBrowserTarget", "Log.enable", "Console.enable", "Overlay.enable",
		"Performance.getMetrics", "Debugger.enable", "Profiler.start",
		"HeapProfiler.enable", "IO.read", "Animation.enable", "LayerTree.enable",
		"Inspector.enable", "Schema.getDomains", "Security.enable",
		"Browser.getVersion", "Browser.getWindowForTarget", "Browser.getWindowBounds",
		"Browser.setWindowBounds", "Browser.setDownloadBehavior",
	};
	static const char *const denied[] = {
		"Browser.close", "Browser.crash", "Browser.crashGpuProcess", "Browser.grantPermissions",
		"Browser.setPermission", "Browser.executeBrowserCommand", "Browser.getHistograms",
		"Tracing.start", "SystemInfo.getInfo", "SystemInfo.getProcessInfo",
		"Extensions.loadUnpacked", "Storage.clearDataForOrigin", "Storage.getCookies",
		"ServiceWorker.enable", "Memory.getDOMCounters", "CacheStorage.deleteCache",
		"IndexedDB.deleteDatabase", "WebAuthn.enable", "FileSystem.getDirectory",
		"Security.setIgnoreCertificateErrors", "Page.crash",
		"Target.exposeDevToolsProtocol", "Target.setRemoteLocations",
		"Target.sendMessageToTarget",
		/* Near misses of allowed names: exact domains only. */
		"Pages.navigate", "PageX.enable", "Dom.getDocument", "Io.read", "Browsers.getVersion",
		"Browser.getversion",
	};
	for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
		if (texts[t])
			assert_ok(parse(texts[t]));
		for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
			expect(allowed[i], ALLOW, "builtin.cdp");
		for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
			expect(denied[i], DENY, "builtin.cdp");
	}
}

Test(cdp, builtin_reasons_say_why)
{
	expect("Browser.close", DENY, "builtin.cdp");
	cr_assert_str_eq(dec.reason, "Browser.close ends the session's browser");
	expect("Tracing.start", DENY, "builtin.cdp");
	cr_assert(strstr(dec.reason, "the Tracing domain is not needed to drive a page"), "%s",
		  dec.reason);
	expect("Browser.grantPermissions", DENY, "builtin.cdp");
	cr_assert(strstr(dec.reason, "Browser methods act on the whole browser"), "%s", dec.reason);
	expect("Page.navigate", ALLOW, "builtin.cdp");
	cr_assert(strstr(dec.reason, "the Page domain is one a browser-use client needs"), "%s",
		  dec.reason);
	expect("Browser.getVersion", ALLOW, "builtin.cdp");
	cr_assert(strstr(dec.reason, "Browser.getVersion is one of the Browser methods"), "%s",
		  dec.reason);
	expect("Target.sendMessageToTarget", DENY, "builtin.cdp");
	cr_assert(strstr(dec.reason, "would not decide"), "%s", dec.reason);
}

Test(cdp, deny_beats_allow)
{
	assert_ok(parse_cdp("{\"allow\": [\"Page.*\", \"Tracing.*\"], \"deny\": [\"Page.navigate\"]}"));
	expect("Page.navigate", DENY, "cdp.deny[0]");
	cr_assert_str_eq(dec.reason, "the method matches the denied pattern \"Page.navigate\"");
	expect("Page.reload", ALLOW, "cdp.allow[0]");
	cr_assert_str_eq(dec.reason, "the method matches the allowed pattern \"Page.*\"");
	expect("Tracing.start", ALLOW, "cdp.allow[1]");
	/* The wider pattern denies, the narrower allows: still denied. */
	assert_ok(parse_cdp("{\"allow\": [\"Runtime.evaluate\"], \"deny\": [\"Runtime.*\"]}"));
	expect("Runtime.evaluate", DENY, "cdp.deny[0]");
	cr_assert_str_eq(dec.reason, "the method matches the denied pattern \"Runtime.*\"");
	/* Among the deny patterns, the first that matches names the rule. */
	assert_ok(parse_cdp("{\"deny\": [\"Runtime.evaluate\", \"Runtime.*\", \"*\"]}"));
	expect("Runtime.evaluate", DENY, "cdp.deny[0]");
	expect("Runtime.enable", DENY, "cdp.deny[1]");
	expect("Page.enable", DENY, "cdp.deny[2]");
	cr_assert_str_eq(dec.reason, "the method matches the denied pattern \"*\"");
	/* A deny pattern of a method the builtin denies anyway names itself. */
	assert_ok(parse_cdp("{\"deny\": [\"Browser.*\"]}"));
	expect("Browser.close", DENY, "cdp.deny[0]");
	expect("Browser.getVersion", DENY, "cdp.deny[0]");
}

Test(cdp, domain_star_and_star)
{
	assert_ok(parse_cdp("{\"allow\": [\"Tracing.*\", \"SystemInfo.getInfo\"]}"));
	expect("Tracing.start", ALLOW, "cdp.allow[0]");
	expect("Tracing.end", ALLOW, "cdp.allow[0]");
	expect("SystemInfo.getInfo", ALLOW, "cdp.allow[1]");
	expect("SystemInfo.getProcessInfo", DENY, "builtin.cdp");
	/* A domain pattern is the whole domain, case-sensitive. */
	expect("TracingX.start", DENY, "builtin.cdp");
	expect("Tracin.start", DENY, "builtin.cdp");
	expect("SystemInfo.getinfo", DENY, "builtin.cdp");
	/* Unnamed methods still get the built-in default. */
	expect("Page.navigate", ALLOW, "builtin.cdp");

	assert_ok(parse_cdp("{\"deny\": [\"*\"]}"));
	expect("Page.navigate", DENY, "cdp.deny[0]");
	expect("Browser.getVersion", DENY, "cdp.deny[0]");

	assert_ok(parse_cdp("{\"allow\": [\"*\"]}"));
	expect("Tracing.start", ALLOW, "cdp.allow[0]");
	expect("Extensions.loadUnpacked", ALLOW, "cdp.allow[0]");
	expect("Browser.grantPermissions", ALLOW, "cdp.allow[0]");
	expect("Page.navigate", ALLOW, "cdp.allow[0]");
}

Test(cdp, always_denied_whatever_allow_says)
{
	static const char *const always[] = {
		"Browser.close", "Browser.crash", "Browser.crashGpuProcess", "Page.crash",
		"Target.exposeDevToolsProtocol", "Target.sendMessageToTarget",
		"Target.setRemoteLocations", "Security.setIgnoreCertificateErrors",
	};
	static const char *const policies[] = {
		"{\"allow\": [\"*\"]}",
		"{\"allow\": [\"Browser.*\", \"Page.*\", \"Target.*\", \"Security.*\"]}",
		"{\"allow\": [\"Browser.close\", \"Browser.crash\", \"Browser.crashGpuProcess\", "
		"\"Page.crash\", \"Target.exposeDevToolsProtocol\", \"Target.sendMessageToTarget\", "
		"\"Target.setRemoteLocations\", \"Security.setIgnoreCertificateErrors\"]}",
	};
	for (size_t k = 0; k < sizeof(policies) / sizeof(policies[0]); k++) {
		assert_ok(parse_cdp(policies[k]));
		for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
			expect(always[i], DENY, "builtin.cdp");
	}
	/* Neighbours of the always-denied are not. */
	assert_ok(parse_cdp(policies[0]));
	expect("Browser.closeX", ALLOW, "cdp.allow[0]");
	expect("Page.close", ALLOW, "cdp.allow[0]");
	expect("Security.setIgnoreCertificateError", ALLOW, "cdp.allow[0]");
	/* The policy's "default" opens nothing either. */
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\"}"));
	expect("Browser.close", DENY, "builtin.cdp");
	expect("Extensions.loadUnpacked", DENY, "builtin.cdp");
}

Test(cdp, malformed_methods)
{
	static const char *const bad[] = {
		"", ".", "Page", ".enable", "Page.", "page.navigate", "1Page.x", "_Page.x",
		"Page.navigate ", " Page.navigate", "Page..navigate", "Page.a.b", "Page.*", "*",
		"*.enable", "Pa-ge.x", "Page.nav\n", "P\xc3\xa4ge.x", "Page.nav\xff", "Page/navigate",
	};
	static const char *const policies[] = { "{}", "{\"allow\": [\"*\"]}",
						"{\"allow\": [\"Page.*\"]}" };
	for (size_t k = 0; k < sizeof(policies) / sizeof(policies[0]); k++) {
		assert_ok(parse_cdp(policies[k]));
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			expect(bad[i], DENY, "cdp.malformed");
	}
	expect("page.navigate", DENY, "cdp.malformed");
	cr_assert_str_eq(dec.reason, "\"page.navigate\" is not a CDP method \"Domain.method\": the "
				     "domain does not start with an upper-case letter, as CDP's do");
	expect("Page.nav\n", DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "\"Page.nav\\x0a\""), "%s", dec.reason);
	expect("Page", DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "no '.' between the domain and the method"), "%s", dec.reason);
}

Test(cdp, long_methods)
{
	assert_ok(parse_cdp("{\"allow\": [\"*\"]}"));
	/* The longest well-formed method: 64 + 1 + 64 bytes. */
	char *longest = repeat("D", 'a', DG_POLICY_CDP_NAME_MAX - 1, "");
	char *m = repeat("", 'm', DG_POLICY_CDP_NAME_MAX, "");
	char both[2 * DG_POLICY_CDP_NAME_MAX + 2];
	snprintf(both, sizeof(both), "%s.%s", longest, m);
	cr_assert_eq(strlen(both), 2 * DG_POLICY_CDP_NAME_MAX + 1);
	expect(both, ALLOW, "cdp.allow[0]");
	/* One more byte in the domain, or in the method. */
	char *d65 = repeat("D", 'a', DG_POLICY_CDP_NAME_MAX, ".m");
	expect(d65, DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "the domain is longer than 64 bytes"), "%s", dec.reason);
	char *m65 = repeat("Page.", 'm', DG_POLICY_CDP_NAME_MAX + 1, "");
	expect(m65, DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "the method is longer than 64 bytes"), "%s", dec.reason);
	char *both130 = repeat(both, 'm', 1, "");
	expect(both130, DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "longer than 129 bytes"), "%s", dec.reason);
	/* Very long: refused without reading it all; the reason shows a cut
	 * piece and fits. */
	char *huge = repeat("Page.", 'm', 1 << 20, "");
	expect(huge, DENY, "cdp.malformed");
	cr_assert(strstr(dec.reason, "longer than 129 bytes"), "%s", dec.reason);
	cr_assert_lt(strlen(dec.reason), 300);
	char *huge_domain = repeat("P", 'a', 1 << 20, "");
	expect(huge_domain, DENY, "cdp.malformed");
	free(longest);
	free(m);
	free(d65);
	free(m65);
	free(both130);
	free(huge);
	free(huge_domain);
}

Test(cdp, never_ask)
{
	static const char *const methods[] = { "Page.navigate", "Tracing.start", "Browser.close",
					       "x", "Runtime.evaluate" };
	static const char *const policies[] = { "{}", "{\"allow\": [\"*\"]}", "{\"deny\": [\"*\"]}" };
	for (size_t k = 0; k < 3; k++) {
		char text[128];
		snprintf(text, sizeof(text), "{\"version\": 1, \"default\": \"ask\", \"cdp\": %s}",
			 policies[k]);
		assert_ok(parse(text));
		for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
			cr_assert_eq(dg_policy_decide_cdp(&pol, methods[i], &dec), 0);
			cr_assert_neq(dec.verdict, DG_VERDICT_ASK, "%s", methods[i]);
		}
	}
}

Test(cdp, null_arguments)
{
	cr_assert_eq(dg_policy_decide_cdp(NULL, "Page.navigate", &dec), -EINVAL);
	cr_assert_eq(dec.verdict, DENY);
	cr_assert_str_eq(dec.rule, "internal");
	dec.verdict = ALLOW;
	cr_assert_eq(dg_policy_decide_cdp(&pol, NULL, &dec), -EINVAL);
	cr_assert_eq(dec.verdict, DENY);
	cr_assert_str_eq(dec.rule, "internal");
	cr_assert_eq(dg_policy_decide_cdp(&pol, "Page.navigate", NULL), -EINVAL);
}

/* ---- copies ------------------------------------------------------------------- */

Test(cdp, copies_share_and_free)
{
	assert_ok(parse("{\"version\": 1, \"default\": \"deny\", \"actions\": {\"allow\": "
			 "[\"click\"]}, \"cdp\": {\"allow\": [\"Tracing.*\"], \"deny\": "
			 "[\"Page.navigate\"]}}"));
	struct dg_policy a, b;
	dg_policy_copy(&a, &pol);
	dg_policy_copy(&b, &a);
	cr_assert_eq(a.cdp, pol.cdp);
	dg_policy_free(&pol);
	cr_assert_null(pol.cdp);
	cr_assert_null(pol.rules);
	cr_assert_eq(dg_policy_decide_cdp(&a, "Tracing.start", &dec), 0);
	cr_assert_str_eq(dec.rule, "cdp.allow[0]");
	dg_policy_free(&a);
	cr_assert_eq(dg_policy_decide_cdp(&b, "Page.navigate", &dec), 0);
	cr_assert_str_eq(dec.rule, "cdp.deny[0]");
	dg_policy_free(&b);
	dg_policy_free(&b); /* safe twice */
	cr_assert_null(b.cdp);

	/* A policy of only a cdp section: copies keep it too. */
	assert_ok(parse_cdp("{\"deny\": [\"Runtime.evaluate\"]}"));
	dg_policy_copy(&a, &pol);
	dg_policy_free(&pol);
	cr_assert_eq(dg_policy_decide_cdp(&a, "Runtime.evaluate", &dec), 0);
	cr_assert_str_eq(dec.rule, "cdp.deny[0]");
	/* After the free: the built-in default. */
	dg_policy_free(&a);
	expect("Runtime.evaluate", ALLOW, "builtin.cdp");

	/* The built-in default policy copies and frees with nothing to share. */
	struct dg_policy def;
	dg_policy_default(&def);
	dg_policy_copy(&a, &def);
	cr_assert_null(a.cdp);
	dg_policy_free(&a);
	dg_policy_free(&def);
}

/* ---- a whole command (dg_policy_decide_cdp_command) ---- */

static void command(const struct dg_cdp_command *cmd, enum dg_verdict v, const char *rule)
{
	struct dg_decide_ctx ctx = {.screen_w = 1280, .screen_h = 800};
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, cmd, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, v, "%s: verdict %d, rule %s (%s)", cmd->method, dec.verdict,
		     dec.rule, dec.reason);
	/* A rule may name its pattern after the rule ("urls.deny[0] https://..."). */
	cr_assert(strncmp(dec.rule, rule, strlen(rule)) == 0 &&
		  (dec.rule[strlen(rule)] == '\0' || dec.rule[strlen(rule)] == ' '),
		  "%s: rule %s, not %s (%s)", cmd->method, dec.rule, rule, dec.reason);
}

Test(cdp, whole_commands)
{
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"urls\": {\"deny\": "
			"[\"https://evil.example/**\"]}, \"keys\": {\"ask\": [\"ctrl+Return\"]}}"));
	/* the method first */
	command(&(struct dg_cdp_command){.method = "Tracing.start"}, DG_VERDICT_DENY, "builtin.cdp");
	/* downloads: deny and default pass, anything else is refused */
	command(&(struct dg_cdp_command){.method = "Browser.setDownloadBehavior",
					 .download_behavior = "deny"}, ALLOW, "builtin.cdp");
	command(&(struct dg_cdp_command){.method = "Browser.setDownloadBehavior",
					 .download_behavior = "allowAndName"},
		DG_VERDICT_DENY, DG_POLICY_RULE_DOWNLOADS);
	command(&(struct dg_cdp_command){.method = "Page.setDownloadBehavior", .download_behavior = ""},
		DG_VERDICT_DENY, DG_POLICY_RULE_DOWNLOADS);
	/* a proxy of its own */
	command(&(struct dg_cdp_command){.method = "Target.createBrowserContext", .proxy = true},
		DG_VERDICT_DENY, "builtin.cdp");
	/* a script: javascript must be named, even with "default": "allow" */
	command(&(struct dg_cdp_command){.method = "Runtime.evaluate", .code = "1", .code_len = 1},
		DG_VERDICT_DENY, "builtin.javascript");
	/* files: file_upload must be named */
	command(&(struct dg_cdp_command){.method = "DOM.setFileInputFiles", .files = true},
		DG_VERDICT_DENY, "builtin.file_upload");
	/* the URL of a request */
	command(&(struct dg_cdp_command){.method = "Fetch.continueRequest",
					 .url = "https://evil.example/x"},
		DG_VERDICT_DENY, "urls.deny[0]");
	/* an action; ask counts as deny */
	struct dg_action a;
	struct dg_err e = {{0}};
	cr_assert_eq(dg_action_parse("{\"type\":\"key\",\"keys\":\"ctrl+Return\"}", 35, 1280, 800,
				     &a, &e), 0, "%s", e.msg);
	command(&(struct dg_cdp_command){.method = "Input.dispatchKeyEvent", .action = &a},
		DG_VERDICT_DENY, "keys.ask[0]");
	cr_assert(strstr(dec.reason, "cannot wait for a human"), "%s", dec.reason);
	dg_action_free(&a);
	/* with javascript named, a script runs */
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"actions\": {\"allow\": "
			"[\"javascript\"]}}"));
	command(&(struct dg_cdp_command){.method = "Runtime.evaluate", .code = "1", .code_len = 1},
		ALLOW, "actions.allow[0]");
	/* a NULL command is a caller bug */
	struct dg_decide_ctx ctx = {.screen_w = 1280, .screen_h = 800};
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, NULL, &ctx, &dec), -EINVAL);
	cr_assert_eq(dec.verdict, DG_VERDICT_DENY);
}

/* The whole policy text is refused with a message that holds want. */
#define refused_text(text, want)                                                           \
	do {                                                                               \
		int rc_ = parse(text);                                                     \
		cr_assert_eq(rc_, -EINVAL, "%s: rc %d (%s)", (text), rc_, err.msg);       \
		cr_assert(strstr(err.msg, (want)), "%s: message \"%s\" lacks \"%s\"", (text), \
			  err.msg, (want));                                                \
	} while (0)

/* budgets.cdp_commands_per_minute and max_cdp_commands: the command that
 * would pass the budget is refused, the one before passes (ctx holds the
 * caller's counts of allowed commands). */
Test(cdp, budgets_at_their_bounds)
{
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
			"{\"cdp_commands_per_minute\": 3, \"max_cdp_commands\": 5}}"));
	struct dg_cdp_command cmd = {.method = "Page.enable"};
	struct dg_decide_ctx ctx = {.screen_w = 1280, .screen_h = 800, .cdp_last_minute = 2,
				    .cdp_total = 2};
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, &cmd, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, ALLOW, "%s %s", dec.rule, dec.reason);
	ctx.cdp_last_minute = 3;
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, &cmd, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, DENY);
	cr_assert_str_eq(dec.rule, "budgets.cdp_commands_per_minute");
	cr_assert(strstr(dec.reason, "3 CDP commands in the last minute; the budget is 3"), "%s",
		  dec.reason);
	ctx.cdp_last_minute = 0;
	ctx.cdp_total = 4;
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, &cmd, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, ALLOW);
	ctx.cdp_total = 5;
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, &cmd, &ctx, &dec), 0);
	cr_assert_str_eq(dec.rule, "budgets.max_cdp_commands");
	/* a method refused anyway names its own rule, not the budget */
	cmd.method = "Tracing.start";
	cr_assert_eq(dg_policy_decide_cdp_command(&pol, &cmd, &ctx, &dec), 0);
	cr_assert_str_eq(dec.rule, "builtin.cdp");
	/* the bounds of the values */
	refused_text("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
		     "{\"max_cdp_commands\": -1}}", "budgets.max_cdp_commands");
	refused_text("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
		     "{\"cdp_commands_per_minute\": 1000000001}}", "budgets.cdp_commands_per_minute");
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
			"{\"cdp_commands_per_minute\": 1000000000, \"max_cdp_commands\": 0}}"));
}

/* What the worker may apply again unasked: a decision from the command
 * alone. Anything that reads the context or the jail is never kept. */
Test(cdp, cacheable_commands)
{
	struct dg_action a;
	struct dg_err e = {{0}};
	cr_assert_eq(dg_action_parse("{\"type\":\"key\",\"keys\":\"Return\"}", 30, 1280, 800, &a,
				     &e), 0, "%s", e.msg);
	const struct dg_cdp_command method = {.method = "Page.enable"},
				    script = {.method = "Runtime.evaluate", .code = "1", .code_len = 1},
				    url = {.method = "Fetch.continueRequest", .url = "https://a.example/"},
				    action = {.method = "Input.dispatchKeyEvent", .action = &a},
				    files = {.method = "DOM.setFileInputFiles", .files = true},
				    download = {.method = "Browser.setDownloadBehavior",
						.download_behavior = "deny"},
				    proxy = {.method = "Target.createBrowserContext", .proxy = true};
	/* the built-in default (no rules) */
	cr_assert(dg_policy_cdp_cacheable(&pol, &method));
	cr_assert(dg_policy_cdp_cacheable(&pol, &script));
	cr_assert(dg_policy_cdp_cacheable(&pol, &url));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &action));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &files));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &download));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &proxy));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, NULL));
	/* action budgets: a script counts as an action, a method does not */
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
			"{\"actions_per_minute\": 10}}"));
	cr_assert(dg_policy_cdp_cacheable(&pol, &method));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &script));
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
			"{\"max_actions\": 10}}"));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &script));
	/* a CDP budget: nothing is kept */
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"budgets\": "
			"{\"max_cdp_commands\": 10}}"));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &method));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &url));
	/* regions apply to actions with a position, never to a script (which
	 * a region cannot name), so they leave a script cacheable */
	assert_ok(parse("{\"version\": 1, \"default\": \"allow\", \"regions\": [{\"name\": "
			"\"r\", \"rect\": [0, 0, 10, 10], \"verdict\": \"deny\"}]}"));
	cr_assert(dg_policy_cdp_cacheable(&pol, &method));
	cr_assert(dg_policy_cdp_cacheable(&pol, &script));
	cr_assert_not(dg_policy_cdp_cacheable(&pol, &action));
	refused_text("{\"version\": 1, \"default\": \"allow\", \"regions\": [{\"name\": \"r\", "
		     "\"rect\": [0, 0, 10, 10], \"verdict\": \"deny\", \"actions\": "
		     "[\"javascript\"]}]}", "has no position on the screen");
	dg_action_free(&a);
}
