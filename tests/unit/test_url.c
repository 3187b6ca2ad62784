/* The strict URL checker (policy/url.c) against the WHATWG URL standard.
 *
 * The property: for every input dg_url_parse accepts, the WHATWG parser
 * (what Chromium follows) succeeds, serializes it to exactly the same text
 * (href == input) and reads the same host, port, path and query. It is run
 * over every base-less case of web-platform-tests' urltestdata.json and over
 * toascii.json's hosts, then edge cases are pinned by hand. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy/policy.h"

#define WPT_DIR DG_SHARED_DIR "/testdata/wpt-url"

static json_t *load_json(const char *path)
{
	json_error_t je;
	json_t *j = json_load_file(path, JSON_ALLOW_NUL, &je);
	cr_assert(j, "cannot load %s: %s (line %d)", path, je.text, je.line);
	cr_assert(json_is_array(j), "%s is not an array", path);
	return j;
}

static const char *member(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Compares what we accepted with what WHATWG made of the same input.
 * Returns NULL when they agree, else what differs. */
static const char *disagreement(const char *input, const struct dg_url *u, const char *href,
				const char *hostname, const char *port, const char *pathname,
				const char *search)
{
	char want[16];
	if (!href || strcmp(href, input) != 0)
		return "href differs from the input";
	if (!hostname || strcmp(hostname, u->host) != 0)
		return "hostname differs";
	snprintf(want, sizeof(want), "%u", (unsigned)u->port);
	if (!port || strcmp(port, u->port_given ? want : "") != 0)
		return "port differs";
	if (!pathname || strlen(pathname) != u->path_len ||
	    strncmp(pathname, u->path, u->path_len) != 0)
		return "pathname differs";
	/* WHATWG's search is "" for both no query and an empty one. */
	size_t slen = u->query && u->query_len ? u->query_len + 1 : 0;
	if (!search || strlen(search) != slen ||
	    (slen && (search[0] != '?' || strncmp(search + 1, u->query, u->query_len) != 0)))
		return "search differs";
	return NULL;
}

Test(url, urltestdata)
{
	json_t *all = load_json(WPT_DIR "/urltestdata.json");
	size_t i, cases = 0, accepted = 0, refused = 0, disagreements = 0;
	json_t *c;
	json_array_foreach(all, i, c) {
		if (!json_is_object(c) || !json_is_null(json_object_get(c, "base")))
			continue;
		const json_t *in = json_object_get(c, "input");
		cr_assert(json_is_string(in), "case %zu has no input", i);
		cases++;
		const char *input = json_string_value(in);
		/* A C string cannot carry the NUL some inputs hold; such an input
		 * never reaches the checker whole, so it counts as refused. */
		if (strlen(input) != json_string_length(in)) {
			refused++;
			continue;
		}
		struct dg_url u;
		struct dg_err err = {{0}};
		if (dg_url_parse(input, &u, &err) != 0) {
			cr_assert(err.msg[0] != '\0', "refusal of \"%s\" without a reason", input);
			refused++;
			continue;
		}
		accepted++;
		const char *why = json_is_true(json_object_get(c, "failure"))
					  ? "WHATWG refuses it"
					  : disagreement(input, &u, member(c, "href"),
							 member(c, "hostname"), member(c, "port"),
							 member(c, "pathname"), member(c, "search"));
		if (why) {
			disagreements++;
			cr_log_error("urltestdata case %zu: accepted \"%s\" but %s", i, input, why);
		}
	}
	json_decref(all);
	cr_log_info("urltestdata.json: %zu base-less cases, %zu accepted, %zu refused, "
		    "%zu disagreements", cases, accepted, refused, disagreements);
	fprintf(stderr, "urltestdata.json: %zu base-less cases, %zu accepted, %zu refused, "
		"%zu disagreements\n", cases, accepted, refused, disagreements);
	cr_assert_eq(disagreements, 0);
	cr_assert(accepted >= 10, "only %zu accepted: the property was hardly exercised",
		  accepted);
}

/* toascii.json's hosts as https://HOST/: one whose output is null must be
 * refused; one we accept must be its own ASCII form. */
Test(url, toascii)
{
	json_t *all = load_json(WPT_DIR "/toascii.json");
	size_t i, cases = 0, accepted = 0, refused = 0, disagreements = 0;
	json_t *c;
	json_array_foreach(all, i, c) {
		if (!json_is_object(c))
			continue;
		const json_t *in = json_object_get(c, "input");
		cr_assert(json_is_string(in), "case %zu has no input", i);
		cases++;
		if (strlen(json_string_value(in)) != json_string_length(in)) {
			refused++;
			continue;
		}
		char url[1024];
		snprintf(url, sizeof(url), "https://%s/", json_string_value(in));
		struct dg_url u;
		struct dg_err err = {{0}};
		if (dg_url_parse(url, &u, &err) != 0) {
			refused++;
			continue;
		}
		accepted++;
		const char *out = member(c, "output");
		if (!out || strcmp(out, json_string_value(in)) != 0 || strcmp(u.host, out) != 0) {
			disagreements++;
			cr_log_error("toascii case %zu: accepted \"%s\", WHATWG host %s", i, url,
				     out ? out : "failure");
		}
	}
	json_decref(all);
	cr_log_info("toascii.json: %zu cases, %zu accepted, %zu refused, %zu disagreements",
		    cases, accepted, refused, disagreements);
	fprintf(stderr, "toascii.json: %zu cases, %zu accepted, %zu refused, %zu disagreements\n",
		cases, accepted, refused, disagreements);
	cr_assert_eq(disagreements, 0);
	cr_assert(accepted >= 2, "only %zu accepted", accepted);
}

/* ---- edge cases by hand --------------------------------------------------- */

static struct dg_url u;
static struct dg_err err;

static int parse(const char *url)
{
	memset(&err, 0, sizeof(err));
	return dg_url_parse(url, &u, &err);
}

#define ok(url)                                                                            \
	cr_assert_eq(parse(url), 0, "\"%s\" refused: %s", (url), err.msg)

#define refused(url, why)                                                                  \
	do {                                                                               \
		cr_assert_eq(parse(url), -EINVAL, "\"%s\" accepted", (url));              \
		cr_assert(strncmp(err.msg, "url: ", 5) == 0, "message \"%s\"", err.msg);  \
		cr_assert(strstr(err.msg, (why)) != NULL,                                  \
			  "\"%s\": message \"%s\" lacks \"%s\"", (url), err.msg, (why));  \
		cr_assert_eq(u.host[0], '\0', "host left behind on refusal");             \
		cr_assert_null(u.path);                                                    \
	} while (0)

Test(url, parts)
{
	const char *s = "https://www.example.com:8443/a/b.html?x=1&y=%2F#frag";
	ok(s);
	cr_assert(u.https);
	cr_assert_str_eq(u.host, "www.example.com");
	cr_assert(!u.host_is_ip);
	cr_assert_eq(u.port, 8443);
	cr_assert(u.port_given);
	cr_assert_eq(u.path, s + 28);
	cr_assert_eq(u.path_len, strlen("/a/b.html"));
	cr_assert_eq(u.query, s + 38);
	cr_assert_eq(u.query_len, strlen("x=1&y=%2F"));

	ok("http://example.com/");
	cr_assert(!u.https);
	cr_assert_eq(u.port, 80);
	cr_assert(!u.port_given);
	cr_assert_eq(u.path_len, 1);
	cr_assert_null(u.query);

	ok("http://a.com/?");
	cr_assert_not_null(u.query);
	cr_assert_eq(u.query_len, 0);
	ok("http://a.com/#");
	ok("http://a.com//x//");
	ok("http://localhost/");
	ok("http://a--b.c/");
	ok("http://1.2.3.com/");     /* numeric labels, but not the last */
	ok("http://example.1a/");    /* "1a" is not a number */
	ok("http://example.0xg/");   /* nor is "0xg" */
	ok("http://a.com/%41%2f%2E/x..y/...");
	ok("http://a.com/a.b/.x/x./");
}

Test(url, label_boundaries)
{
	char host[300], url[400];
	memset(host, 'a', 63);
	host[63] = '\0';
	snprintf(url, sizeof(url), "http://%s.com/", host);
	ok(url);
	snprintf(url, sizeof(url), "http://a%s.com/", host);
	refused(url, "more than 63");

	/* 253 bytes of host: 63.63.63.61 */
	memset(host, 'b', 253);
	host[63] = host[127] = host[191] = '.';
	host[253] = '\0';
	snprintf(url, sizeof(url), "http://%s/", host);
	ok(url);
	cr_assert_eq(strlen(u.host), 253);
	host[253] = 'b';
	host[254] = '\0';
	snprintf(url, sizeof(url), "http://%s/", host);
	refused(url, "longer than 253");

	refused("http://example.com./", "ends with a dot");
	refused("http://.example.com/", "empty label");
	refused("http://a..b/", "empty label");
	refused("http://-a.com/", "starts or ends with '-'");
	refused("http://a-.com/", "starts or ends with '-'");
	refused("http://xn--1.com/", "punycode");          /* not valid punycode */
	refused("http://xn--aaa.com/", "punycode");         /* decodes to C1 controls */
	refused("http://xn--ls8h.la/", "punycode");         /* an emoji: IDNA2008 refuses it */
	refused("http://xn--mnchen-3ya.XN--/", "uppercase");
	refused("http://Example.com/", "uppercase");
	refused("http://exa%6dple.com/", "percent");
	refused("http://exa_mple.com/", "host has '_'");
	refused("http:///a", "empty host");
	refused("http://:8080/", "empty host");
}

/* Punycode that round-trips through libidn2 is what WHATWG reads too. */
Test(url, punycode_labels)
{
	struct dg_url u;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_url_parse("http://xn--zca.com/", &u, &err), 0, "%s", err.msg);
	cr_assert_str_eq(u.host, "xn--zca.com");
	cr_assert_eq(dg_url_parse("https://xn--mnchen-3ya.de/a", &u, &err), 0, "%s", err.msg);
	cr_assert_str_eq(u.host, "xn--mnchen-3ya.de");
}

Test(url, numeric_last_label)
{
	ok("http://1.2.3.4/");
	cr_assert(u.host_is_ip);
	cr_assert_str_eq(u.host, "1.2.3.4");
	ok("http://0.0.0.0/");
	ok("http://255.255.255.255/");
	ok("http://10.0.0.1:8080/x");
	const char *bad[] = {
		"http://1.2.3/",          "http://example.123/",  "http://0x7f.1/",
		"http://127.1/",          "http://2130706433/",   "http://0x7f000001/",
		"http://0177.0.0.1/",     "http://01.2.3.4/",     "http://1.2.3.04/",
		"http://256.1.1.1/",      "http://1.2.3.4.5/",    "http://a.1.2.3/",
		"http://example.0x/",     "http://example.0xff/", "http://1.2.3.4./",
		"http://999999999999/",   "http://1..2.3/",       "http://0x7f.0.0.1/",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(parse(bad[i]), -EINVAL, "\"%s\" accepted", bad[i]);
	refused("http://1.2.3/", "dotted quad");
	refused("http://0x7f.0.0.1/", "dotted quad");
}

Test(url, ipv6)
{
	ok("http://[::1]/");
	cr_assert(u.host_is_ip);
	cr_assert_str_eq(u.host, "[::1]");
	ok("https://[2001:db8::1]:8443/");
	cr_assert_eq(u.port, 8443);
	ok("http://[::]/");
	ok("http://[::ffff:c000:280]/");
	ok("http://[1:0:0:2::3]/");        /* the longest run compressed */
	ok("http://[1::2:0:0:3:4]/");      /* the first of two equal runs */
	ok("http://[1:0:1:1:1:1:1:1]/");   /* a single zero is not compressed */
	ok("http://[1::]/");
	const struct {
		const char *url, *why;
	} bad[] = {
		{"http://[::FFFF:c000:280]/", "0-9 a-f"},
		{"http://[::ffff:192.0.2.128]/", "0-9 a-f"},
		{"http://[0::1]/", "canonical"},
		{"http://[::0001]/", "canonical"},
		{"http://[1:0:0:0:0:0:0:1]/", "canonical"},
		{"http://[1:0::1]/", "canonical"},
		{"http://[1:0:0:2::3:4]/", "canonical"}, /* [1::2:0:0:3:4] */
		{"http://[1::2:0:0:0:3]/", "canonical"}, /* [1:0:0:2::3] */
		{"http://[1::1:1:1:1:1:1]/", "canonical"},
		{"http://[fe80::1%25eth0]/", "0-9 a-f"},
		{"http://[::1/", "without ']'"},
		{"http://[::1]x/", "after the IPv6"},
		{"http://[:::1]/", "not an address"},
		{"http://[1:2:3:4:5:6:7:8:9]/", "not an address"},
		{"http://[]/", "not an address"},
		{"http://[::1]:0/", "1-65535"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(bad[i].url, bad[i].why);
}

Test(url, ports)
{
	ok("http://a.com:1/");
	cr_assert_eq(u.port, 1);
	ok("http://a.com:65535/");
	cr_assert_eq(u.port, 65535);
	ok("http://a.com:443/");
	ok("https://a.com:80/");
	refused("http://a.com:0/", "1-65535");
	refused("http://a.com:65536/", "more than 65535");
	refused("http://a.com:99999/", "more than 65535");
	refused("http://a.com:123456/", "1-65535");
	refused("http://a.com:080/", "leading zeros");
	refused("http://a.com:/", "empty port");
	refused("http://a.com:8a/", "non-digit");
	refused("http://a.com:-1/", "non-digit");
	refused("http://a.com:80/", "default");
	refused("https://a.com:443/", "default");
	refused("http://a.com:8080:80/", "1-65535");
	refused("http://a.com:80:8/", "non-digit");
}

Test(url, userinfo_and_bytes)
{
	refused("http://user@a.com/", "userinfo");
	refused("http://user:pw@a.com/", "userinfo");
	refused("http://a.com@evil.com/", "userinfo");
	refused("http://@a.com/", "userinfo");
	ok("http://a.com/@x");          /* '@' in the path is not userinfo */
	refused("http://a.com\\@evil.com/", "backslash");
	refused("http://a.com/a\\b", "backslash");
	refused("http://a.com\\evil.com/", "backslash");
	/* WHATWG strips tabs and newlines anywhere, and spaces and controls at
	 * the ends: each would make the text read as another URL. */
	refused("http://a.c\tom/", "0x09");
	refused("http://a.com/\n", "0x0a");
	refused("ht\ntp://a.com/", "0x0a");
	refused("http://a.com/\r", "0x0d");
	refused(" http://a.com/", "0x20");
	refused("http://a.com/ ", "0x20");
	refused("http://a.com/a b", "0x20");
	refused("http://a.com/\x7f", "0x7f");
	refused("http://\xc3\xa9.com/", "0xc3");
	refused("http://a.com/\xc3\xa9", "non-ASCII");
	refused("http://a\xef\xbc\x8e" "com/", "0xef");
	refused("", "empty");
}

Test(url, schemes)
{
	refused("HTTP://a.com/", "scheme \"HTTP\"");
	refused("Https://a.com/", "only");
	refused("javascript:alert(1)", "scheme \"javascript\"");
	refused("data:text/html,<b>x</b>", "scheme \"data\"");
	refused("blob:https://a.com/uuid", "scheme \"blob\"");
	refused("file:///etc/passwd", "scheme \"file\"");
	refused("ws://a.com/", "scheme \"ws\"");
	refused("wss://a.com/", "scheme \"wss\"");
	refused("ftp://a.com/", "scheme \"ftp\"");
	refused("http:a.com/", "\"http:\" must be followed by \"//\"");
	refused("https:/a.com/", "\"https:\" must be followed by \"//\"");
	refused("a\"b:x", "scheme is not http or https");
	refused("https:\\\\a.com/", "backslash");
	refused("//a.com/", "no scheme");
	refused("a.com/", "no scheme");
	refused("http://a.com", "no path");
	refused("http://a.com?x", "no path");
	refused("http://a.com#x", "no path");
}

Test(url, path_query_fragment)
{
	refused("http://a.com/a/../b", "dot segment");
	refused("http://a.com/a/./b", "dot segment");
	refused("http://a.com/..", "dot segment");
	refused("http://a.com/.", "dot segment");
	refused("http://a.com/a/%2e%2E/b", "dot segment");
	refused("http://a.com/a/.%2e", "dot segment");
	refused("http://a.com/%2e/", "dot segment");
	refused("http://a.com/a/..?x", "dot segment");
	refused("http://a.com/a/.#x", "dot segment");
	ok("http://a.com/a/?/../");     /* a query is not a path */
	refused("http://a.com/%", "two hex digits");
	refused("http://a.com/%4", "two hex digits");
	refused("http://a.com/%zz", "two hex digits");
	refused("http://a.com/?a=%g0", "two hex digits");
	refused("http://a.com/#%", "two hex digits");
	const char *bad[] = {
		"http://a.com/\"",  "http://a.com/<",   "http://a.com/>",   "http://a.com/`",
		"http://a.com/{",   "http://a.com/}",   "http://a.com/^",   "http://a.com/|",
		"http://a.com/[",   "http://a.com/]",   "http://a.com/?\"", "http://a.com/?<",
		"http://a.com/?'",  "http://a.com/?`",  "http://a.com/#`",  "http://a.com/#<",
		"http://a.com/##",  "http://a.com/#a#", "http://a.com/?{}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(parse(bad[i]), -EINVAL, "\"%s\" accepted", bad[i]);
	ok("http://a.com/p?q=1/2?3&r=:@!$()*+,;=-._~#f/?:@'");
	ok("http://a.com/'");
}

Test(url, length)
{
	/* exactly DG_URL_MAX bytes, then one more */
	static char buf[DG_URL_MAX + 2];
	const char *head = "https://a.com/";
	size_t h = strlen(head);
	memcpy(buf, head, h);
	memset(buf + h, 'x', DG_URL_MAX - h);
	buf[DG_URL_MAX] = '\0';
	ok(buf);
	cr_assert_eq(u.path_len, DG_URL_MAX - h + 1);
	buf[DG_URL_MAX] = 'x';
	buf[DG_URL_MAX + 1] = '\0';
	refused(buf, "longer than 8192");
	cr_assert_eq(dg_url_parse(NULL, &u, &err), -EINVAL);
	cr_assert(strstr(err.msg, "no URL"), "message \"%s\"", err.msg);
}

/* dg_url_parse_ws: ws and wss under http's rules, no fragment; http and
 * https as dg_url_parse reads them. */
Test(url, websocket_schemes)
{
	struct dg_url w;
	struct dg_err e = {{0}};
	cr_assert_eq(dg_url_parse_ws("ws://a.com:8080/chat?x=1", &w, &e), 0, "%s", e.msg);
	cr_assert(w.ws && !w.https);
	cr_assert_str_eq(w.host, "a.com");
	cr_assert_eq(w.port, 8080);
	cr_assert_eq(w.path_len, 5);
	cr_assert_eq(w.query_len, 3);
	cr_assert_eq(dg_url_parse_ws("wss://[2001:db8::1]/", &w, &e), 0, "%s", e.msg);
	cr_assert(w.ws && w.https && w.host_is_ip && w.port == 443);
	cr_assert_eq(dg_url_parse_ws("https://a.com/", &w, &e), 0, "%s", e.msg);
	cr_assert(!w.ws && w.https);
	cr_assert_eq(dg_url_parse_ws("http://a.com/#f", &w, &e), 0, "%s", e.msg);
	const char *bad[][2] = {
		{"ws://a.com/#f", "no fragment"},
		{"wss://a.com/x#", "no fragment"},
		{"ws://a.com:80/", "scheme's default"},
		{"wss://a.com:443/", "scheme's default"},
		{"WS://a.com/", "scheme \"WS\""},
		{"ws:a.com/", "scheme \"ws\""},
		{"ws://a.com", "no path"},
		{"ws://a.com/./x", "dot segment"},
		{"wss://A.com/", "uppercase"},
		{"ws://u@a.com/", "userinfo"},
		{"ftp://a.com/", "scheme \"ftp\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		cr_assert_eq(dg_url_parse_ws(bad[i][0], &w, &e), -EINVAL, "%s accepted", bad[i][0]);
		cr_assert(strstr(e.msg, bad[i][1]), "%s: \"%s\" lacks \"%s\"", bad[i][0], e.msg,
			  bad[i][1]);
		cr_assert_eq(w.host[0], '\0');
	}
	/* dg_url_parse stays http(s) only. */
	refused("ws://a.com/", "scheme \"ws\"");
}
