/* pagelog (read_console, read_network) and script (javascript), without
 * Chromium.
 *
 * The page logs are fed DevTools events directly, as the worker's event
 * callback would, many of them hostile: a flood of console messages, a
 * 5 MB message, values of every type and of none, control bytes, more
 * tabs and sessions than the caps. The guard's part (the logs turned on
 * before a target runs) and the javascript action play against a fake
 * browser on two pipes, as in test_cdp.c (whose helpers are static there:
 * the few needed are repeated here), and so does the DevTools client's
 * mending of lone surrogates that both depend on.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp-priv.h"
#include "dg_fake_cdp.h"
#include "dg_test.h"
#include "guard-priv.h"
#include "pagelog-priv.h"
#include "script-priv.h"

static struct dg_err err;

/* ---- the page logs on their own ---- */

struct sent {
	int n;
	char methods[8][64];
};

static void record_send(void *arg, const char *method, json_t *params)
{
	struct sent *s = arg;
	cr_assert_lt(s->n, 8);
	snprintf(s->methods[s->n++], 64, "%s", method);
	json_decref(params);
}

/* Page T1 attached on session G1 (watched), its logs turned on. */
static struct dg_pagelog *one_tab(void)
{
	struct dg_pagelog *l = dg_pagelog_new(NULL);
	cr_assert(l);
	struct sent s = {0};
	dg_pagelog_attached(l, NULL, "G1", "T1", "page", record_send, &s);
	cr_assert_eq(s.n, 3);
	cr_assert_str_eq(s.methods[0], "Runtime.enable");
	cr_assert_str_eq(s.methods[1], "Network.enable");
	cr_assert_str_eq(s.methods[2], "Log.enable");
	return l;
}

/* An event given as JSON text (params), on session. */
static void ev(struct dg_pagelog *l, const char *session, const char *method, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void ev(struct dg_pagelog *l, const char *session, const char *method, const char *fmt, ...)
{
	char *text;
	va_list ap;
	va_start(ap, fmt);
	cr_assert_geq(vasprintf(&text, fmt, ap), 0);
	va_end(ap);
	json_error_t je;
	json_t *p = json_loads(text, JSON_ALLOW_NUL, &je);
	cr_assert(p, "bad test JSON: %s: %s", je.text, text);
	dg_pagelog_event(l, method, session, p);
	json_decref(p);
	free(text);
}

static char *rd(struct dg_pagelog *l, const char *tab, enum dg_pagelog_kind kind)
{
	char *t = NULL;
	cr_assert_eq(dg_pagelog_read(l, tab, kind, &t, &err), 0, "%s", err.msg);
	cr_assert(t);
	json_t *j = json_string(t);
	cr_assert(j, "the answer is not UTF-8: %s", t);
	json_decref(j);
	return t;
}

static void log_call(struct dg_pagelog *l, const char *session, const char *type,
		     const char *args)
{
	ev(l, session, "Runtime.consoleAPICalled",
	   "{\"type\":\"%s\",\"args\":%s,\"executionContextId\":1,\"timestamp\":1796241271880.868,"
	   "\"stackTrace\":{\"callFrames\":[{\"functionName\":\"\",\"url\":\"http://x.test/p\","
	   "\"lineNumber\":4,\"columnNumber\":2}]}}",
	   type, args);
}

static size_t lines(const char *t)
{
	size_t n = 1;
	for (; *t; t++)
		n += *t == '\n';
	return n;
}

Test(pagelog, console_lines_in_order_then_empty)
{
	struct dg_pagelog *l = one_tab();
	log_call(l, "G1", "log", "[{\"type\":\"string\",\"value\":\"hi %s, %d%% of %i\"},"
				 "{\"type\":\"string\",\"value\":\"there\"},{\"type\":\"number\","
				 "\"value\":42.7,\"description\":\"42.7\"},{\"type\":\"number\","
				 "\"value\":3},{\"type\":\"object\",\"className\":\"Object\","
				 "\"description\":\"Object\",\"preview\":{\"type\":\"object\","
				 "\"overflow\":true,\"properties\":[{\"name\":\"a\",\"type\":\"number\","
				 "\"value\":\"1\"},{\"name\":\"b\",\"type\":\"string\",\"value\":\"x\"},"
				 "{\"name\":\"g\",\"type\":\"accessor\"}]}},{\"type\":\"object\","
				 "\"subtype\":\"array\",\"description\":\"Array(2)\",\"preview\":{"
				 "\"type\":\"object\",\"subtype\":\"array\",\"overflow\":false,"
				 "\"properties\":[{\"name\":\"0\",\"type\":\"number\",\"value\":\"1\"},"
				 "{\"name\":\"1\",\"type\":\"object\",\"value\":\"Object\"}]}}]");
	log_call(l, "G1", "warning", "[{\"type\":\"string\",\"value\":\"careful\"}]");
	log_call(l, "G1", "error", "[{\"type\":\"object\",\"subtype\":\"error\",\"description\":"
				   "\"Error: e\\n    at <anonymous>:1:79\"},{\"type\":\"undefined\"},"
				   "{\"type\":\"object\",\"subtype\":\"null\",\"value\":null},"
				   "{\"type\":\"bigint\",\"unserializableValue\":\"7n\"},"
				   "{\"type\":\"number\",\"unserializableValue\":\"NaN\"},"
				   "{\"type\":\"object\",\"subtype\":\"node\",\"description\":\"div#a\"},"
				   "{\"type\":\"function\",\"description\":\"() => 1\"},"
				   "{\"type\":\"boolean\",\"value\":true},{\"type\":\"string\",\"value\":"
				   "\"tab\\there\\u0001\"}]");
	ev(l, "G1", "Runtime.exceptionThrown",
	   "{\"timestamp\":1796241271999,\"exceptionDetails\":{\"text\":\"Uncaught\",\"lineNumber\":0,"
	   "\"url\":\"http://x.test/app.js\",\"exception\":{\"type\":\"object\",\"subtype\":\"error\","
	   "\"description\":\"TypeError: late\\n    at f (http://x.test/app.js:1:118)\"}}}");
	ev(l, "G1", "Log.entryAdded",
	   "{\"entry\":{\"source\":\"network\",\"level\":\"error\",\"text\":\"Failed to load resource: "
	   "net::ERR_BLOCKED_BY_CLIENT.Inspector\",\"timestamp\":1796241272000,\"url\":"
	   "\"http://denied.test/x\"}}");
	/* Without a location or a time: both left out or unknown. */
	ev(l, "G1", "Runtime.consoleAPICalled", "{\"type\":\"info\",\"args\":[]}");
	char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t,
		"[log] 19:54:31.880 hi there, 42% of 3 {a: 1, b: \"x\", g: (...), \xe2\x80\xa6} "
		"[1, Object] (http://x.test/p:5)\n"
		"[warning] 19:54:31.880 careful (http://x.test/p:5)\n"
		"[error] 19:54:31.880 Error: e\\n    at <anonymous>:1:79 undefined null 7n NaN div#a "
		"() => 1 true tab\\there\\x01 (http://x.test/p:5)\n"
		"[exception] 19:54:31.999 Uncaught TypeError: late\\n    at f "
		"(http://x.test/app.js:1:118) (http://x.test/app.js:1)\n"
		"[error] 19:54:32.000 Failed to load resource: net::ERR_BLOCKED_BY_CLIENT.Inspector "
		"(blocked by the session's policy) (http://denied.test/x)\n"
		"[info] --:--:--.---");
	free(t);
	t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "no console output since the last read");
	free(t);
	t = rd(l, "T1", DG_PAGELOG_NETWORK);
	cr_assert_str_eq(t, "no network requests since the last read");
	free(t);
	/* A tab never seen: nothing, in words; no tab at all: an error. */
	t = rd(l, "T9", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "no console output since the last read");
	free(t);
	cr_assert_eq(dg_pagelog_read(l, "", DG_PAGELOG_CONSOLE, &t, &err), -EINVAL);
	cr_assert_null(t);
	dg_pagelog_free(l);
}

/* Which sessions are watched: the first on a page; frames and dedicated
 * workers through a known parent, into its tab; not the second session
 * on a target, service workers, children of unknown parents. */
Test(pagelog, watched_sessions)
{
	struct dg_pagelog *l = one_tab();
	struct sent s = {0};
	dg_pagelog_attached(l, NULL, "C1", "T1", "page", record_send, &s); /* the client's own */
	cr_assert_eq(s.n, 0);
	dg_pagelog_attached(l, "G1", "F1", "FR1", "iframe", record_send, &s);
	cr_assert_eq(s.n, 3);
	dg_pagelog_attached(l, "C1", "F2", "FR1", "iframe", record_send, &s); /* the same frame again */
	cr_assert_eq(s.n, 3);
	dg_pagelog_attached(l, "F1", "W1", "WK1", "worker", record_send, &s);
	cr_assert_eq(s.n, 6);
	dg_pagelog_attached(l, NULL, "SW", "SW1", "service_worker", record_send, &s);
	dg_pagelog_attached(l, "NOPE", "F3", "FR3", "iframe", record_send, &s);
	dg_pagelog_attached(l, NULL, "G1", "T1", "page", record_send, &s); /* told twice */
	cr_assert_eq(s.n, 6);
	struct dg_pagelog_stats st;
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.tabs, 1);
	cr_assert_eq(st.sessions, 5);
	cr_assert_eq(st.watched, 3);

	const char *one = "[{\"type\":\"string\",\"value\":\"%s\"}]";
	char args[128];
	const char *who[] = {"G1", "C1", "F1", "F2", "W1", "SW", "F3"};
	for (size_t i = 0; i < sizeof(who) / sizeof(who[0]); i++) {
		snprintf(args, sizeof(args), one, who[i]);
		log_call(l, who[i], "log", args);
	}
	char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_eq(lines(t), 3, "%s", t);
	cr_assert(strstr(t, " G1 (") && strstr(t, " F1 (") && strstr(t, " W1 ("), "%s", t);
	free(t);

	/* A detached session says no more; a closed tab goes with its entries. */
	ev(l, NULL, "Target.detachedFromTarget", "{\"sessionId\":\"F1\"}");
	log_call(l, "F1", "log", "[]");
	log_call(l, "G1", "log", "[]");
	ev(l, NULL, "Target.targetDestroyed", "{\"targetId\":\"T1\"}");
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.tabs, 0);
	cr_assert_eq(st.bytes, 0);
	log_call(l, "G1", "log", "[]");
	t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "no console output since the last read");
	free(t);
	dg_pagelog_free(l);
}

Test(pagelog, tabs_and_sessions_caps)
{
	struct dg_pagelog *l = dg_pagelog_new(NULL);
	struct sent s = {0};
	char sid[32], tid[32];
	for (int i = 0; i <= DG_PAGELOG_TABS_MAX; i++) {
		snprintf(sid, sizeof(sid), "S%d", i);
		snprintf(tid, sizeof(tid), "T%d", i);
		s.n = 0;
		dg_pagelog_attached(l, NULL, sid, tid, "page", record_send, &s);
		cr_assert_eq(s.n, i < DG_PAGELOG_TABS_MAX ? 3 : 0, "tab %d", i);
	}
	struct dg_pagelog_stats st;
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.tabs, DG_PAGELOG_TABS_MAX);
	cr_assert_eq(st.tabs_refused, 1);
	/* Frames fill the sessions left, one more is refused. */
	int left = DG_PAGELOG_SESSIONS_MAX - DG_PAGELOG_TABS_MAX;
	for (int i = 0; i <= left; i++) {
		snprintf(sid, sizeof(sid), "F%d", i);
		snprintf(tid, sizeof(tid), "FR%d", i);
		s.n = 0;
		dg_pagelog_attached(l, "S0", sid, tid, "iframe", record_send, &s);
		cr_assert_eq(s.n, i < left ? 3 : 0, "frame %d", i);
	}
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.sessions, DG_PAGELOG_SESSIONS_MAX);
	cr_assert_eq(st.sessions_refused, 1);
	/* A closed tab makes room. */
	ev(l, NULL, "Target.targetDestroyed", "{\"targetId\":\"T5\"}");
	s.n = 0;
	dg_pagelog_attached(l, NULL, "S99", "T99", "page", record_send, &s);
	cr_assert_eq(s.n, 3);
	dg_pagelog_free(l);
}

/* 100,000 messages: the tab keeps the last DG_PAGELOG_ENTRIES_MAX, and
 * the answer says how many went. */
Test(pagelog, flood_of_console_messages)
{
	struct dg_pagelog *l = one_tab();
	const int n = 100000;
	char args[128];
	for (int i = 0; i < n; i++) {
		snprintf(args, sizeof(args), "[{\"type\":\"string\",\"value\":\"message %d\"}]", i);
		log_call(l, "G1", "log", args);
	}
	struct dg_pagelog_stats st;
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.entries, (uint64_t)n);
	cr_assert_eq(st.dropped, (uint64_t)(n - DG_PAGELOG_ENTRIES_MAX));
	cr_assert_leq(st.bytes, DG_PAGELOG_BYTES_MAX);
	char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	char want[256];
	snprintf(want, sizeof(want), "[%d earlier entries were dropped unread: a tab's log keeps at "
		 "most %d, all tabs' at most %u bytes]\n[log] ", n - DG_PAGELOG_ENTRIES_MAX,
		 DG_PAGELOG_ENTRIES_MAX, DG_PAGELOG_BYTES_MAX);
	cr_assert(strncmp(t, want, strlen(want)) == 0, "%.300s", t);
	snprintf(want, sizeof(want), " message %d (", n - DG_PAGELOG_ENTRIES_MAX);
	cr_assert(strstr(t, want), "the oldest kept is not the first line");
	snprintf(want, sizeof(want), " message %d (http://x.test/p:5)", n - 1);
	cr_assert(strstr(t, want) && strlen(strstr(t, want)) == strlen(want), "the newest is last");
	cr_assert_eq(lines(t), DG_PAGELOG_ENTRIES_MAX + 1);
	free(t);
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.bytes, 0);
	t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "no console output since the last read");
	free(t);
	dg_pagelog_free(l);
}

/* A 5 MB message, a 5 MB URL: each cut at its bound, at a character
 * boundary, with the marker; the entry stays one line. */
Test(pagelog, huge_message_and_url_cut)
{
	struct dg_pagelog *l = one_tab();
	const size_t big = 5u * 1024 * 1024;
	char *s = malloc(big + 1);
	/* "é" (2 bytes) after an odd byte: a cut at an even bound splits one. */
	s[0] = 'a';
	for (size_t i = 1; i + 1 < big; i += 2)
		memcpy(s + i, "\xc3\xa9", 2);
	s[big - 1] = '\n';
	s[big] = '\0';
	json_t *args = json_pack("[{s:s, s:s}]", "type", "string", "value", s);
	json_t *p = json_pack("{s:s, s:o, s:f, s:{s:[{s:s, s:i}]}}", "type", "log", "args", args,
			      "timestamp", 0.0, "stackTrace", "callFrames", "url", s, "lineNumber", 0);
	cr_assert(p);
	dg_pagelog_event(l, "Runtime.consoleAPICalled", "G1", p);
	json_decref(p);
	char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	char marker[64];
	snprintf(marker, sizeof(marker), "\xe2\x80\xa6[cut: %zu bytes in all]", big + 1);
	cr_assert(strncmp(t, "[log] 00:00:00.000 a\xc3\xa9", 22) == 0, "%.40s", t);
	const char *m = strstr(t, marker);
	cr_assert(m, "no marker: %.100s", t + 1900);
	cr_assert_eq((size_t)(m - t), strlen("[log] 00:00:00.000 ") + DG_PAGELOG_TEXT_MAX - 1);
	/* The URL is cut too (its newline byte is past the cut). */
	snprintf(marker, sizeof(marker), "\xe2\x80\xa6[cut: %zu bytes in all]:1)", big + 1);
	cr_assert(strstr(t, marker));
	cr_assert_null(strchr(t, '\n'));
	cr_assert_lt(strlen(t), DG_PAGELOG_TEXT_MAX + DG_PAGELOG_URL_MAX + 200);
	free(t);

	/* The same URL in the network log. */
	json_t *r = json_pack("{s:s, s:{s:s, s:s}, s:f}", "requestId", "R1", "request", "url", s,
			      "method", "POST", "timestamp", 1.0);
	dg_pagelog_event(l, "Network.requestWillBeSent", "G1", r);
	json_decref(r);
	t = rd(l, "T1", DG_PAGELOG_NETWORK);
	snprintf(marker, sizeof(marker), "\xe2\x80\xa6[cut: %zu bytes in all]", big + 1);
	cr_assert(strncmp(t, "POST - - pending a\xc3\xa9", 20) == 0, "%.40s", t);
	cr_assert(strstr(t, marker), "%.60s", t + 1990);
	free(t);
	free(s);
	dg_pagelog_free(l);
}

/* Each bound at its value and one past it: a message and a URL of
 * DG_PAGELOG_TEXT_MAX / DG_PAGELOG_URL_MAX bytes whole, one byte more cut;
 * DG_PAGELOG_ENTRIES_MAX entries kept, one more drops the oldest. */
Test(pagelog, bounds_at_their_value)
{
	struct dg_pagelog *l = one_tab();
	for (int extra = 0; extra < 2; extra++) {
		size_t n = DG_PAGELOG_TEXT_MAX + (size_t)extra, u = DG_PAGELOG_URL_MAX + (size_t)extra;
		char *m = malloc(n + 1), *url = malloc(u + 1);
		memset(m, 'm', n);
		m[n] = '\0';
		memset(url, 'u', u);
		url[u] = '\0';
		json_t *p = json_pack("{s:s, s:[{s:s, s:s}], s:{s:[{s:s}]}}", "type", "log", "args",
				      "type", "string", "value", m, "stackTrace", "callFrames", "url",
				      url);
		dg_pagelog_event(l, "Runtime.consoleAPICalled", "G1", p);
		json_decref(p);
		char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
		char want[128];
		snprintf(want, sizeof(want), "\xe2\x80\xa6[cut: %zu bytes in all]", n);
		cr_assert_eq(strstr(t, want) != NULL, extra == 1, "message of %zu bytes", n);
		snprintf(want, sizeof(want), "\xe2\x80\xa6[cut: %zu bytes in all])", u);
		cr_assert_eq(strstr(t, want) != NULL, extra == 1, "URL of %zu bytes", u);
		/* "[log] TIME " MESSAGE[MARKER] " (" URL[MARKER] ")": the kept
		 * parts are at their bound either way. */
		size_t marker = extra ? strlen(want) - 1 : 0;
		cr_assert_eq(strlen(t), strlen("[log] --:--:--.--- ") + DG_PAGELOG_TEXT_MAX + marker +
						strlen(" (") + DG_PAGELOG_URL_MAX + marker + 1,
			     "%zu bytes", strlen(t));
		free(t);
		free(m);
		free(url);
	}
	char args[64];
	for (int extra = 0; extra < 2; extra++) {
		for (int i = 0; i < DG_PAGELOG_ENTRIES_MAX + extra; i++) {
			snprintf(args, sizeof(args), "[{\"type\":\"string\",\"value\":\"n%d\"}]", i);
			log_call(l, "G1", "log", args);
		}
		char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
		cr_assert_eq(lines(t), (size_t)DG_PAGELOG_ENTRIES_MAX + (size_t)extra);
		if (extra)
			cr_assert(strncmp(t, "[1 earlier entry was dropped unread", 35) == 0, "%.80s", t);
		else
			cr_assert(strncmp(t, "[log] 19:54:31.880 n0 (", 23) == 0, "%.80s", t);
		free(t);
	}
	dg_pagelog_free(l);
}

/* Events of the wrong shape are counted and skipped; values of odd types
 * are shown as something, never crash the log. */
Test(pagelog, weird_events)
{
	struct dg_pagelog *l = one_tab();
	ev(l, "G1", "Runtime.consoleAPICalled", "{\"type\":\"log\",\"args\":{}}");
	ev(l, "G1", "Runtime.consoleAPICalled", "{\"type\":\"log\"}");
	ev(l, "G1", "Runtime.exceptionThrown", "{\"exceptionDetails\":7}");
	ev(l, "G1", "Log.entryAdded", "{\"entry\":{\"text\":5}}");
	ev(l, "G1", "Network.requestWillBeSent", "{\"requestId\":\"R1\",\"request\":{\"url\":5}}");
	ev(l, "G1", "Network.loadingFinished", "{\"requestId\":\"\"}");
	ev(l, "G1", "Network.responseReceived", "{\"requestId\":\"has space\"}");
	struct dg_pagelog_stats st;
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.refused, 7);
	cr_assert_eq(st.entries, 0);
	/* Odd but shaped: a type that is a number, a value that is an object,
	 * an overlong level, a format with too few arguments, a lone %. */
	ev(l, "G1", "Runtime.consoleAPICalled",
	   "{\"type\":\"a very long level name that goes on and on and on and on and on and on\","
	   "\"timestamp\":-5,\"args\":[{\"type\":\"string\",\"value\":\"%%s %%d %%\"},{\"type\":5},"
	   "{\"type\":\"object\",\"value\":{\"a\":[1]}},{\"type\":\"number\",\"value\":[1]},"
	   "{\"type\":\"object\",\"preview\":{\"properties\":\"no\"}},{},7,"
	   "{\"type\":\"string\",\"value\":\"\\u0000nul\"}],\"stackTrace\":{\"callFrames\":[{\"url\":"
	   "\"\",\"lineNumber\":1}]}}");
	ev(l, "G1", "Runtime.exceptionThrown", "{\"exceptionDetails\":{}}");
	ev(l, "G1", "Runtime.consoleAPICalled",
	   "{\"type\":\"log\",\"args\":[{\"type\":\"string\",\"value\":\"%%s and %%x\"}]}");
	char *t = rd(l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "[log] --:--:--.--- ? object % number {} ? ? \\x00nul\n"
			    "[exception] --:--:--.---\n"
			    "[log] --:--:--.--- %s and %x");
	free(t);
	/* Events of sessions not known, methods of no interest. */
	log_call(l, "ZZ", "log", "[]");
	ev(l, "G1", "Runtime.executionContextCreated", "{\"context\":{}}");
	ev(l, "G1", "Network.dataReceived", "{\"requestId\":\"R9\"}");
	dg_pagelog_stats(l, &st);
	cr_assert_eq(st.entries, 3);
	dg_pagelog_free(l);
}

static void request(struct dg_pagelog *l, const char *rid, const char *method, const char *url,
		    double t)
{
	ev(l, "G1", "Network.requestWillBeSent",
	   "{\"requestId\":\"%s\",\"request\":{\"url\":\"%s\",\"method\":\"%s\",\"headers\":{}},"
	   "\"timestamp\":%f,\"wallTime\":1796241271.83}",
	   rid, url, method, t);
}

static void response(struct dg_pagelog *l, const char *rid, int status, const char *mime)
{
	ev(l, "G1", "Network.responseReceived",
	   "{\"requestId\":\"%s\",\"timestamp\":1,\"type\":\"Fetch\",\"response\":{\"url\":\"u\","
	   "\"status\":%d,\"mimeType\":\"%s\"}}",
	   rid, status, mime);
}

static void finished(struct dg_pagelog *l, const char *rid, double t)
{
	ev(l, "G1", "Network.loadingFinished", "{\"requestId\":\"%s\",\"timestamp\":%f}", rid, t);
}

Test(pagelog, network_requests)
{
	struct dg_pagelog *l = one_tab();
	request(l, "D1", "GET", "http://a.test/", 100.0);
	response(l, "D1", 200, "text/html");
	finished(l, "D1", 100.024);
	request(l, "B1", "GET", "http://denied.test/x", 100.1);
	ev(l, "G1", "Network.loadingFailed",
	   "{\"requestId\":\"B1\",\"timestamp\":100.106,\"type\":\"Fetch\",\"errorText\":"
	   "\"net::ERR_BLOCKED_BY_CLIENT.Inspector\",\"canceled\":false,\"blockedReason\":\"inspector\"}");
	request(l, "F1", "POST", "http://a.test/api", 100.2);
	ev(l, "G1", "Network.loadingFailed",
	   "{\"requestId\":\"F1\",\"timestamp\":100.25,\"errorText\":\"net::ERR_CONNECTION_RESET\"}");
	/* A redirect: one line a hop. */
	request(l, "R1", "GET", "http://a.test/old", 100.3);
	ev(l, "G1", "Network.requestWillBeSent",
	   "{\"requestId\":\"R1\",\"request\":{\"url\":\"http://a.test/new\",\"method\":\"GET\"},"
	   "\"timestamp\":100.31,\"redirectResponse\":{\"status\":301,\"mimeType\":\"text/plain\"}}");
	response(l, "R1", 404, "text/html");
	finished(l, "R1", 100.32);
	/* In flight at the read: listed, kept, and listed again with its end. */
	request(l, "P1", "GET", "http://a.test/slow", 100.4);
	response(l, "P1", 200, "application/json");
	/* Events of requests never seen: ignored. */
	finished(l, "ZZ", 1);
	char *t = rd(l, "T1", DG_PAGELOG_NETWORK);
	cr_assert_str_eq(t, "GET 200 text/html 24 ms http://a.test/\n"
			    "GET blocked - 6 ms http://denied.test/x (blocked by the session's policy)\n"
			    "POST failed - 50 ms http://a.test/api (net::ERR_CONNECTION_RESET)\n"
			    "GET 301 text/plain 10 ms http://a.test/old (redirected)\n"
			    "GET 404 text/html 10 ms http://a.test/new\n"
			    "GET 200 application/json pending http://a.test/slow");
	free(t);
	finished(l, "P1", 101.4);
	request(l, "N1", "GET", "http://a.test/next", 102);
	t = rd(l, "T1", DG_PAGELOG_NETWORK);
	cr_assert_str_eq(t, "GET 200 application/json 1000 ms http://a.test/slow\n"
			    "GET - - pending http://a.test/next");
	free(t);
	dg_pagelog_free(l);
}

/* An answer holds at most DG_PAGELOG_ANSWER_MAX bytes: the rest stays for
 * the next read, and the answer says how many. */
Test(pagelog, answer_bound_leaves_the_rest)
{
	struct dg_pagelog *l = one_tab();
	char url[1100];
	memset(url, 'u', sizeof(url) - 1);
	url[sizeof(url) - 1] = '\0';
	memcpy(url, "http://a.test/", 14);
	char rid[16];
	const int n = 200; /* about 220 KB of lines */
	for (int i = 0; i < n; i++) {
		snprintf(rid, sizeof(rid), "R%d", i);
		request(l, rid, "GET", url, 1);
		finished(l, rid, 2);
	}
	int seen = 0;
	for (int round = 0; round < 3; round++) {
		char *t = rd(l, "T1", DG_PAGELOG_NETWORK);
		cr_assert_leq(strlen(t), DG_PAGELOG_ANSWER_MAX + 200);
		int k = (int)lines(t);
		const char *more = strstr(t, "more entries not shown: an answer holds at most");
		if (round < 2) {
			cr_assert(more, "round %d: %.100s", round, t + strlen(t) - 100);
			k--;
		} else {
			cr_assert_null(more);
		}
		seen += k;
		free(t);
	}
	cr_assert_eq(seen, n);
	dg_pagelog_free(l);
}

/* All tabs together: DG_PAGELOG_BYTES_MAX, the fullest log loses first. */
Test(pagelog, total_bytes_bound)
{
	struct dg_pagelog *l = dg_pagelog_new(NULL);
	struct sent s = {0};
	char sid[16], tid[16], *msg = malloc(DG_PAGELOG_TEXT_MAX + 1);
	memset(msg, 'm', DG_PAGELOG_TEXT_MAX);
	msg[DG_PAGELOG_TEXT_MAX] = '\0';
	json_t *p = json_pack("{s:s, s:[{s:s, s:s}]}", "type", "log", "args", "type", "string",
			      "value", msg);
	for (int i = 0; i < DG_PAGELOG_TABS_MAX; i++) {
		snprintf(sid, sizeof(sid), "S%d", i);
		snprintf(tid, sizeof(tid), "T%d", i);
		s.n = 0;
		dg_pagelog_attached(l, NULL, sid, tid, "page", record_send, &s);
		for (int k = 0; k < DG_PAGELOG_ENTRIES_MAX; k++)
			dg_pagelog_event(l, "Runtime.consoleAPICalled", sid, p);
	}
	json_decref(p);
	free(msg);
	struct dg_pagelog_stats st;
	dg_pagelog_stats(l, &st);
	cr_assert_leq(st.bytes, DG_PAGELOG_BYTES_MAX);
	cr_assert_gt(st.bytes, DG_PAGELOG_BYTES_MAX - 8192);
	cr_assert_eq(st.entries, (uint64_t)DG_PAGELOG_TABS_MAX * DG_PAGELOG_ENTRIES_MAX);
	/* Every tab keeps about as much: the first tab did not keep it all. */
	char *t0 = rd(l, "T0", DG_PAGELOG_CONSOLE), *t63 = rd(l, "T63", DG_PAGELOG_CONSOLE);
	size_t a = lines(t0), b = lines(t63);
	cr_assert(a > 10 && b > 10 && a < b + 5 && b < a + 5, "%zu and %zu lines", a, b);
	cr_assert(strstr(t0, "earlier entries were dropped unread"));
	free(t0);
	free(t63);
	dg_pagelog_free(l);
}

/* ---- the fake browser (tests/support/dg_fake_cdp.h) ---- */

/* The next command, which must be method (on session, "" the browser's). */
static json_int_t expect_cmd(struct dg_fake_cdp *f, const char *method, const char *session,
			     json_t **out)
{
	return dg_fake_cdp_expect(f, method, session, out);
}

static void ok(struct dg_fake_cdp *f, json_int_t id, const char *session)
{
	if (session[0])
		dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"%s\",\"result\":{}}", (long long)id, session);
	else
		dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{}}", (long long)id);
}

/* Discovery and the client's page T1 on session S1 (the guard not involved). */
static void attach(struct dg_fake_cdp *f)
{
	cr_assert_eq(dg_cdp_start(f->c, NULL, NULL, &err), 0, "%s", err.msg);
	json_int_t id = expect_cmd(f, "Target.setDiscoverTargets", "", NULL);
	dg_fake_cdp_sendf(f, "{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":{\"targetId\":"
		 "\"T1\",\"type\":\"page\",\"title\":\"\",\"url\":\"about:blank\"}}}");
	ok(f, id, "");
	id = expect_cmd(f, "Target.attachToTarget", "", NULL);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S1\"}}", (long long)id);
	id = expect_cmd(f, "Page.enable", "S1", NULL);
	ok(f, id, "S1");
	id = expect_cmd(f, "Target.getTargetInfo", "", NULL);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\","
		 "\"title\":\"\",\"url\":\"about:blank\"}}}",
	      (long long)id);
	cr_assert(dg_cdp_ready(f->c));
}

/* ---- the guard turns the logs on before a target runs ---- */

struct both {
	struct dg_guard *g;
	struct dg_pagelog *l;
};

static void route(void *arg, const char *method, const char *session, json_t *params)
{
	struct both *b = arg;
	dg_guard_event(b->g, method, session, params);
	dg_pagelog_event(b->l, method, session, params);
}

static int no_emit(void *arg, uint32_t type, const char *json)
{
	(void)arg, (void)type, (void)json;
	return 0;
}

Test(pagelog, guard_enables_logs_before_resuming)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	struct both b = {dg_guard_new(f.c, no_emit, NULL), dg_pagelog_new(f.c)};
	dg_guard_set_pagelog(b.g, b.l);
	dg_cdp_set_event_handler(f.c, route, &b);
	cr_assert_eq(dg_guard_start(b.g, &err), 0, "%s", err.msg);
	expect_cmd(&f, "Browser.setDownloadBehavior", "", NULL);
	ok(&f, expect_cmd(&f, "Fetch.enable", "", NULL), "");
	expect_cmd(&f, "Target.setAutoAttach", "", NULL);
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":\"G1\","
		  "\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\",\"title\":\"\",\"url\":\"\"},"
		  "\"waitingForDebugger\":true}}");
	const char *setup[] = {"Target.setAutoAttach", "Page.enable",
			       "Page.setInterceptFileChooserDialog", "Runtime.enable",
			       "Network.enable", "Log.enable"};
	json_int_t ids[6];
	for (int i = 0; i < 6; i++) {
		json_t *cmd;
		ids[i] = expect_cmd(&f, setup[i], "G1", &cmd);
		if (i == 4) {
			json_t *p = json_object_get(cmd, "params");
			cr_assert_eq(json_integer_value(json_object_get(p, "maxTotalBufferSize")), 0);
		}
		json_decref(cmd);
	}
	dg_fake_cdp_none(&f);
	/* Every enable went before the target may run (a session's commands are
	 * handled in order), but only the auto-attach is awaited: a tab the
	 * browser opens for a noopener link answers the others once it runs. */
	for (int i = 1; i < 6; i++) {
		if (i == 5) /* a log domain the target lacks: not required */
			dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"G1\",\"error\":{\"code\":-32601,"
				  "\"message\":\"'Log.enable' wasn't found\"}}", (long long)ids[i]);
		else
			ok(&f, ids[i], "G1");
		dg_fake_cdp_none(&f); /* not resumed before the auto-attach is answered */
	}
	ok(&f, ids[0], "G1");
	expect_cmd(&f, "Runtime.runIfWaitingForDebugger", "G1", NULL);
	/* The page logs from its first script; the client's own session on it
	 * (announced too) is not watched. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":\"C1\","
		  "\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\",\"title\":\"\",\"url\":\"\"},"
		  "\"waitingForDebugger\":false}}");
	expect_cmd(&f, "Target.setAutoAttach", "C1", NULL);
	expect_cmd(&f, "Page.enable", "C1", NULL);
	expect_cmd(&f, "Page.setInterceptFileChooserDialog", "C1", NULL);
	dg_fake_cdp_none(&f);
	for (const char *const *s = (const char *const[]){"G1", "C1", NULL}; *s; s++)
		dg_fake_cdp_sendf(&f, "{\"method\":\"Runtime.consoleAPICalled\",\"sessionId\":\"%s\",\"params\":{"
			  "\"type\":\"log\",\"args\":[{\"type\":\"string\",\"value\":\"first\"}],"
			  "\"timestamp\":0}}", *s);
	char *t = rd(b.l, "T1", DG_PAGELOG_CONSOLE);
	cr_assert_str_eq(t, "[log] 00:00:00.000 first");
	free(t);
	dg_fake_cdp_none(&f); /* strings only: no object to release */

	/* Objects a console call passed are released (the page would keep
	 * them alive for the session): one release in flight, one more after
	 * it for what came meanwhile. */
	const char *with_object = "{\"method\":\"Runtime.consoleAPICalled\",\"sessionId\":\"%s\","
				  "\"params\":{\"type\":\"log\",\"args\":[{\"type\":\"object\","
				  "\"objectId\":\"1.2.3\",\"description\":\"Object\"}]}}";
	dg_fake_cdp_sendf(&f, with_object, "G1");
	json_t *cmd;
	json_int_t rel = expect_cmd(&f, "Runtime.releaseObjectGroup", "G1", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"),
							   "objectGroup")), "console");
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, with_object, "G1");
	dg_fake_cdp_sendf(&f, with_object, "G1");
	dg_fake_cdp_sendf(&f, with_object, "C1"); /* not watched: not ours to release */
	dg_fake_cdp_none(&f);
	ok(&f, rel, "G1");
	rel = expect_cmd(&f, "Runtime.releaseObjectGroup", "G1", NULL);
	dg_fake_cdp_none(&f);
	ok(&f, rel, "G1");
	dg_fake_cdp_none(&f);
	dg_fake_cdp_sendf(&f, "{\"method\":\"Runtime.exceptionThrown\",\"sessionId\":\"G1\",\"params\":{"
		  "\"exceptionDetails\":{\"text\":\"Uncaught\",\"exception\":{\"type\":\"object\","
		  "\"objectId\":\"1.2.4\"}}}}");
	expect_cmd(&f, "Runtime.releaseObjectGroup", "G1", NULL); /* left pending: cancelled at free */
	dg_guard_free(b.g);
	dg_pagelog_free(b.l);
	dg_fake_cdp_close(&f);
}

/* ---- the DevTools client mends lone surrogates ---- */

static void grab(void *arg, const char *method, const char *session, json_t *params)
{
	(void)method, (void)session;
	json_t **out = arg;
	json_decref(*out);
	*out = json_incref(json_object_get(params, "s"));
}

Test(cdp, lone_surrogates_read_as_replacement)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	json_t *got = NULL;
	dg_cdp_set_event_handler(f.c, grab, &got);
	struct {
		const char *in, *want;
	} cases[] = {
		{"a\\ud800b", "a\xef\xbf\xbd" "b"},                 /* lone high */
		{"a\\uDC00", "a\xef\xbf\xbd"},                      /* lone low, capitals */
		{"\\ud83d\\ude00!", "\xf0\x9f\x98\x80!"},           /* a pair stays */
		{"\\ud83d\\ud83d\\ude00", "\xef\xbf\xbd\xf0\x9f\x98\x80"}, /* high, then a pair */
		{"\\\\ud800", "\\ud800"},                           /* an escaped backslash */
		{"x\\n\\ud800", "x\n\xef\xbf\xbd"},
		{"\\ud800", "\xef\xbf\xbd"},                        /* at the end */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		dg_fake_cdp_sendf(&f, "{\"method\":\"X.y\",\"params\":{\"s\":\"%s\"}}", cases[i].in);
		cr_assert(json_is_string(got), "case %zu dropped", i);
		cr_assert_str_eq(json_string_value(got), cases[i].want, "case %zu", i);
		json_decref(got);
		got = NULL;
	}
	struct dg_cdp_stats st;
	dg_cdp_stats(f.c, &st);
	cr_assert_eq(st.errors, 0);
	/* Broken escapes stay broken: refused as before. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"X.y\",\"params\":{\"s\":\"\\ud80\"}}");
	cr_assert_null(got);
	dg_cdp_stats(f.c, &st);
	cr_assert_eq(st.errors, 1);
	dg_fake_cdp_close(&f);
}

/* ---- javascript ---- */

struct run {
	int done;
	char text[256 * 1024];
	char error[2048];
	bool failed;
};

static void run_done(void *arg, const char *text, const char *error)
{
	struct run *r = arg;
	r->done++;
	r->failed = error != NULL;
	snprintf(r->text, sizeof(r->text), "%s", text ? text : "");
	snprintf(r->error, sizeof(r->error), "%s", error ? error : "");
}

/* Starts code; returns the evaluate's id after checking how it runs. */
static json_int_t start(struct dg_fake_cdp *f, struct dg_script *s, struct run *r, const char *code)
{
	memset(r, 0, sizeof(*r));
	cr_assert_eq(dg_script_run(s, f->c, code, run_done, r, &err), 0, "%s", err.msg);
	json_t *cmd;
	json_int_t id = expect_cmd(f, "Runtime.evaluate", "S1", &cmd);
	json_t *p = json_object_get(cmd, "params");
	cr_assert_str_eq(json_string_value(json_object_get(p, "expression")), code);
	cr_assert(json_is_true(json_object_get(p, "replMode")));
	cr_assert(json_is_true(json_object_get(p, "awaitPromise")));
	cr_assert(json_is_false(json_object_get(p, "returnByValue")));
	cr_assert_eq(json_integer_value(json_object_get(p, "timeout")), DG_SCRIPT_TIMEOUT_MS);
	cr_assert_null(json_object_get(p, "contextId"), "not the main world");
	cr_assert_str_eq(json_string_value(json_object_get(p, "objectGroup")), DG_SCRIPT_GROUP);
	json_decref(cmd);
	cr_assert_eq(r->done, 0, "done ran inside dg_script_run");
	return id;
}

/* Answers the evaluate with a result object (JSON text) and expects the
 * group's release. */
static void result(struct dg_fake_cdp *f, json_int_t id, const char *obj)
{
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":%s}}", (long long)id, obj);
}

static void released(struct dg_fake_cdp *f)
{
	json_t *cmd;
	expect_cmd(f, "Runtime.releaseObjectGroup", "S1", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"),
							   "objectGroup")),
			 DG_SCRIPT_GROUP);
	json_decref(cmd);
}

static void value_is(struct dg_fake_cdp *f, struct dg_script *s, const char *obj, const char *want)
{
	struct run r;
	json_int_t id = start(f, s, &r, "x");
	result(f, id, obj);
	released(f);
	cr_assert_eq(r.done, 1);
	cr_assert_not(r.failed, "%s: %s", obj, r.error);
	cr_assert_str_eq(r.text, want, "%s", obj);
}

Test(script, values_as_json)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_script s = {0};
	value_is(&f, &s, "{\"type\":\"number\",\"value\":2,\"description\":\"2\"}", "2");
	value_is(&f, &s, "{\"type\":\"number\",\"value\":0.1,\"description\":\"0.1\"}", "0.1");
	value_is(&f, &s, "{\"type\":\"string\",\"value\":\"ok \\\"q\\\"\\n\"}", "\"ok \\\"q\\\"\\n\"");
	value_is(&f, &s, "{\"type\":\"string\",\"value\":\"a\\ud800b\"}", "\"a\xef\xbf\xbd" "b\"");
	value_is(&f, &s, "{\"type\":\"boolean\",\"value\":true}", "true");
	value_is(&f, &s, "{\"type\":\"undefined\"}", "undefined");
	value_is(&f, &s, "{\"type\":\"object\",\"subtype\":\"null\",\"value\":null}", "null");
	value_is(&f, &s, "{\"type\":\"number\",\"unserializableValue\":\"-Infinity\"}", "-Infinity");
	value_is(&f, &s, "{\"type\":\"bigint\",\"unserializableValue\":\"12n\"}", "12n");
	value_is(&f, &s, "{\"type\":\"function\",\"description\":\"() => 1\",\"objectId\":\"o1\"}",
		 "() => 1");
	value_is(&f, &s, "{\"type\":\"symbol\",\"description\":\"Symbol(x)\",\"objectId\":\"o1\"}",
		 "Symbol(x)");
	value_is(&f, &s, "{\"type\":\"object\",\"subtype\":\"node\",\"className\":\"HTMLBodyElement\","
			 "\"description\":\"body\",\"objectId\":\"o1\"}", "body");
	value_is(&f, &s, "{\"type\":\"object\",\"subtype\":\"map\",\"description\":\"Map(2)\","
			 "\"objectId\":\"o1\"}", "Map(2)");
	value_is(&f, &s, "{\"type\":\"weird\"}", "weird");

	/* A long string: cut at DG_SCRIPT_ANSWER_MAX characters, with the note. */
	struct run r;
	json_int_t id = start(&f, &s, &r, "'\xc3\xa9'.repeat(150000)");
	char *big = malloc(300100);
	int n = snprintf(big, 300100, "{\"type\":\"string\",\"value\":\"");
	for (int i = 0; i < 150000; i++) {
		memcpy(big + n, "\xc3\xa9", 2);
		n += 2;
	}
	snprintf(big + n, 300100 - (size_t)n, "\"}");
	/* Too big for one write into the pipe: fed in pieces. */
	char *msg = NULL;
	cr_assert_gt(asprintf(&msg, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":%s}}",
			      (long long)id, big), 0);
	size_t len = strlen(msg) + 1;
	for (size_t off = 0; off < len;) {
		size_t k = len - off < 32768 ? len - off : 32768;
		cr_assert_eq(write(f.ev_wr, msg + off, k), (ssize_t)k);
		off += k;
		cr_assert_eq(dg_cdp_handle_in(f.c, &err), 0);
	}
	free(msg);
	free(big);
	released(&f);
	cr_assert_eq(r.done, 1);
	char note[64];
	snprintf(note, sizeof(note), "\n[the value was cut at %d characters]", DG_SCRIPT_ANSWER_MAX);
	size_t tl = strlen(r.text);
	cr_assert_eq(tl, 1 + 2 * (DG_SCRIPT_ANSWER_MAX - 1) + strlen(note), "%zu bytes", tl);
	cr_assert_str_eq(r.text + tl - strlen(note), note);
	cr_assert(strncmp(r.text, "\"\xc3\xa9", 3) == 0);
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f);
}

/* DG_SCRIPT_ANSWER_MAX characters whole, one more cut; a thrown
 * description of DG_SCRIPT_ERROR_MAX bytes whole, one more cut. */
Test(script, bounds_at_their_value)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_script s = {0};
	struct run r;
	for (int extra = 0; extra < 2; extra++) {
		/* A string of MAX - 2 characters is MAX with its quotes. */
		size_t n = DG_SCRIPT_ANSWER_MAX - 2 + (size_t)extra;
		char *v = malloc(n + 1);
		memset(v, 'v', n);
		v[n] = '\0';
		json_int_t id = start(&f, &s, &r, "v");
		char *msg = NULL;
		cr_assert_gt(asprintf(&msg, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":"
					    "{\"type\":\"string\",\"value\":\"%s\"}}}", (long long)id, v), 0);
		size_t len = strlen(msg) + 1;
		for (size_t off = 0; off < len;) {
			size_t k = len - off < 32768 ? len - off : 32768;
			cr_assert_eq(write(f.ev_wr, msg + off, k), (ssize_t)k);
			off += k;
			cr_assert_eq(dg_cdp_handle_in(f.c, &err), 0);
		}
		free(msg);
		released(&f);
		cr_assert_eq(r.done, 1);
		bool cut = strstr(r.text, "\n[the value was cut at") != NULL;
		cr_assert_eq(cut, extra == 1, "%zu characters", n + 2);
		cr_assert_eq(strlen(r.text) - (cut ? strlen(strstr(r.text, "\n[the")) : 0),
			     (size_t)DG_SCRIPT_ANSWER_MAX);
		free(v);

		size_t e = DG_SCRIPT_ERROR_MAX + (size_t)extra;
		char *d = malloc(e + 1);
		memset(d, 'd', e);
		d[e] = '\0';
		id = start(&f, &s, &r, "throw d");
		dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":"
			  "\"string\"},\"exceptionDetails\":{\"exception\":{\"type\":\"string\","
			  "\"description\":\"%s\"}}}}", (long long)id, d);
		released(&f);
		cr_assert_eq(strlen(r.error), strlen("the script threw: ") + DG_SCRIPT_ERROR_MAX +
						       (extra ? 3 : 0));
		free(d);
	}
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f);
}

/* A plain object or array is serialized in the page; one that does not
 * serialize is answered by its description. */
Test(script, objects_serialized_in_the_page)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_script s = {0};
	struct run r;
	const char *obj = "{\"type\":\"object\",\"className\":\"Object\",\"description\":\"Object\","
			  "\"objectId\":\"o7\"}";
	struct {
		const char *reply, *want;
	} cases[] = {
		{"\"result\":{\"result\":{\"type\":\"object\",\"value\":[\"{\\\"a\\\":1}\",7]}}",
		 "{\"a\":1}"},
		{"\"result\":{\"result\":{\"type\":\"object\",\"subtype\":\"null\",\"value\":null}}",
		 "Object"}, /* a cycle */
		{"\"result\":{\"result\":{\"type\":\"object\",\"value\":[\"x\",250000]}}",
		 "x\n[the value was cut at 100000 characters]"}, /* cut in the page */
		{"\"error\":{\"code\":-32000,\"message\":\"Could not find object with given id\"}",
		 "Object"},
		{"\"result\":{\"result\":{\"type\":\"string\",\"value\":\"forged\"}}", "Object"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_int_t id = start(&f, &s, &r, "({a: 1})");
		result(&f, id, obj);
		json_t *cmd;
		id = expect_cmd(&f, "Runtime.callFunctionOn", "S1", &cmd);
		json_t *p = json_object_get(cmd, "params");
		cr_assert_str_eq(json_string_value(json_object_get(p, "objectId")), "o7");
		cr_assert(json_is_true(json_object_get(p, "returnByValue")));
		cr_assert(strstr(json_string_value(json_object_get(p, "functionDeclaration")),
				 "JSON.stringify(this)"));
		cr_assert_eq(json_integer_value(json_object_get(
				     json_array_get(json_object_get(p, "arguments"), 0), "value")),
			     DG_SCRIPT_ANSWER_MAX);
		json_decref(cmd);
		cr_assert_eq(r.done, 0);
		dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",%s}", (long long)id, cases[i].reply);
		released(&f);
		cr_assert_eq(r.done, 1);
		cr_assert_not(r.failed, "%s", r.error);
		cr_assert_str_eq(r.text, cases[i].want, "case %zu", i);
	}
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f);
}

Test(script, errors)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_script s = {0};
	struct run r;
	/* A throw: its description. */
	json_int_t id = start(&f, &s, &r, "throw new Error('boom')");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"object\"},"
		  "\"exceptionDetails\":{\"text\":\"Uncaught\",\"exception\":{\"type\":\"object\","
		  "\"subtype\":\"error\",\"description\":\"Error: boom\\n    at <anonymous>:1:7\"}}}}",
	      (long long)id);
	released(&f);
	cr_assert(r.failed);
	cr_assert_str_eq(r.error, "the script threw: Error: boom\n    at <anonymous>:1:7");
	/* A thrown primitive; a thrown huge string, cut. */
	id = start(&f, &s, &r, "throw 42");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"number\"},"
		  "\"exceptionDetails\":{\"text\":\"Uncaught\",\"exception\":{\"type\":\"number\","
		  "\"value\":42}}}}",
	      (long long)id);
	released(&f);
	cr_assert_str_eq(r.error, "the script threw: 42");
	id = start(&f, &s, &r, "throw 'x'.repeat(5000)");
	char *x = malloc(5001);
	memset(x, 'x', 5000);
	x[5000] = '\0';
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"string\"},"
		  "\"exceptionDetails\":{\"text\":\"Uncaught\",\"exception\":{\"type\":\"string\","
		  "\"value\":\"%s\"}}}}",
	      (long long)id, x);
	free(x);
	released(&f);
	cr_assert_eq(strlen(r.error), strlen("the script threw: ") + DG_SCRIPT_ERROR_MAX + 3);
	cr_assert_str_eq(r.error + strlen(r.error) - 3, "\xe2\x80\xa6");
	/* The browser refuses it. */
	id = start(&f, &s, &r, "1");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"error\":{\"code\":-32000,\"message\":"
		  "\"Cannot find default execution context\"}}", (long long)id);
	released(&f);
	cr_assert_str_eq(r.error, "the script could not run: Cannot find default execution context");
	/* No code, no page, one at a time. */
	cr_assert_eq(dg_script_run(&s, f.c, "", run_done, &r, &err), -EINVAL);
	cr_assert_eq(dg_script_run(&s, NULL, "1", run_done, &r, &err), -EAGAIN);
	start(&f, &s, &r, "1");
	cr_assert_eq(dg_script_run(&s, f.c, "2", run_done, &r, &err), -EBUSY);
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f); /* cancels the run's command: done is not called */
	cr_assert_eq(r.done, 0);
}

/* The bound: a script not answered by DG_SCRIPT_TIMEOUT_MS +
 * DG_SCRIPT_GRACE_MS is stopped and answered with an error; its late
 * reply changes nothing; the next script runs. */
Test(script, bound, .timeout = 60)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_script s = {0};
	struct run r;
	long long t0 = dg_now_ms();
	json_int_t id = start(&f, &s, &r, "await new Promise(() => {})");
	int left = dg_script_advance(&s);
	cr_assert(left > DG_SCRIPT_TIMEOUT_MS && left <= DG_SCRIPT_TIMEOUT_MS + DG_SCRIPT_GRACE_MS,
		  "%d", left);
	while (dg_script_advance(&s) > 0)
		usleep(50000);
	long long took = dg_now_ms() - t0;
	cr_assert(took >= DG_SCRIPT_TIMEOUT_MS + DG_SCRIPT_GRACE_MS &&
		  took < DG_SCRIPT_TIMEOUT_MS + DG_SCRIPT_GRACE_MS + 500, "%lld ms", took);
	cr_assert_eq(r.done, 1);
	char want[128];
	snprintf(want, sizeof(want), "the script did not finish within %d ms", DG_SCRIPT_TIMEOUT_MS);
	cr_assert(strncmp(r.error, want, strlen(want)) == 0, "%s", r.error);
	expect_cmd(&f, "Runtime.terminateExecution", "S1", NULL);
	released(&f);
	result(&f, id, "{\"type\":\"number\",\"value\":1,\"description\":\"1\"}");
	cr_assert_eq(r.done, 1);
	cr_assert_eq(dg_script_advance(&s), -1);
	value_is(&f, &s, "{\"type\":\"number\",\"value\":3,\"description\":\"3\"}", "3");
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f);
}
