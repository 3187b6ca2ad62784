/* read_console, read_network and javascript on a real Xvnc and Chromium,
 * through a `deskgate serve` gateway and its agent WebSocket: a loopback
 * site plays an allowed host (localhost:APORT) and a denied one
 * (denied.test:DPORT), both reached only through the egress proxy and its
 * test-only resolver override; the policy allows javascript by name.
 *
 * Checked: what a page logs from its first script on (log, warning, error,
 * an uncaught exception) comes back in order, once; its requests with
 * status, type and time, the one the policy refused as blocked (and the
 * denied site never sees it); javascript answers values as JSON (1+1,
 * document.title, a top-level let, a top-level await, an object, a DOM
 * node, a lone surrogate), a throw fails the action, and a script that
 * never ends is stopped within its bound, twice (a loop, and a loop after
 * an await that the evaluation's own timeout does not reach), with the
 * session working after each. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60

static struct dg_site allowed_site, denied_site;

static void handle(struct dg_site *s, int c, const char *path)
{
	(void)s;
	if (strcmp(path, "/page") == 0) {
		dg_site_reply(c, "200 OK", "text/html", "",
			      "<!doctype html><title>Log test</title><body>hello\n"
			      "<script>console.log('hello', 42, {a: 1});\n"
			      "console.warn('careful');\n"
			      "console.error('bad thing');</script>\n"
			      "<script>throw new Error('boom');</script>\n"
			      "<script>console.log('after the throw');</script>");
	} else if (strcmp(path, "/data") == 0) {
		dg_site_reply(c, "200 OK", "application/json", "", "{\"a\":1}");
	} else {
		dg_site_reply(c, "404 Not Found", "text/plain", "", "no");
	}
}

static struct dg_server srv;
static char *policy_path;

static void setup(void)
{
	dg_site_start(&denied_site, handle);
	dg_site_start(&allowed_site, handle);
	char policy[1024];
	snprintf(policy, sizeof(policy),
		 "{\"version\": 1, \"default\": \"allow\",\n"
		 " \"actions\": {\"allow\": [\"javascript\"]},\n"
		 " \"urls\": {\"deny\": [\"http://denied.test:%d/**\"]},\n"
		 " \"egress\": {\"allow\": [\"localhost:%d\", \"denied.test:%d\"]}}\n",
		 denied_site.port, allowed_site.port, denied_site.port);
	policy_path = dg_test_write_tmp("policy-page-log.json", policy);
	char extra[1024], err[1024];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", policy_path);
	int rc = dg_test_serve_two_sites(&srv, extra, allowed_site.port, denied_site.port, 30, err,
					 sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
}

static void teardown(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
	dg_site_stop(&allowed_site);
	dg_site_stop(&denied_site);
	if (policy_path)
		dg_test_rm_tmp(policy_path);
}

TestSuite(page_log, .init = setup, .fini = teardown, .timeout = 400);

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

static struct dg_ws *open_session(char *id, size_t idlen)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"browser\"}", 60, &r), 0);
	cr_assert_eq(r.status, 201, "create: %d %s", r.status, r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	snprintf(id, idlen, "%s", str(j, "id"));
	char path[128], proto[300], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	struct dg_ws *ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(ws, "connect: %d %s", status, err);
	json_decref(dg_test_agent_recv(ws, 10, false)); /* hello */
	return ws;
}

/* Sends a canonical action (JSON text) and returns its result. */
static json_t *act(struct dg_ws *ws, const char *action)
{
	cr_assert_eq(dg_ws_send_text(ws, action), 0);
	json_t *j = dg_test_agent_recv(ws, T_ACT, false);
	char *s = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(str(j, "type"), "result", "%s: %s", action, s);
	free(s);
	return j;
}

/* A reading action's text: ok, no screenshot. */
static char *text_of(struct dg_ws *ws, const char *action)
{
	json_t *r = act(ws, action);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, str(r, "error"));
	cr_assert_null(json_object_get(r, "frame"), "%s answered with a screenshot", action);
	char *t = strdup(str(r, "text"));
	cr_assert(json_object_get(r, "text"), "%s: no text", action);
	cr_log_info("%s (%.0f ms):\n%s", action, json_number_value(json_object_get(r, "total_ms")), t);
	json_decref(r);
	return t;
}

static json_t *js_action(const char *code)
{
	return json_pack("{s:s, s:s}", "type", "javascript", "code", code);
}

/* javascript code: its answer (ok) as text. */
static char *js(struct dg_ws *ws, const char *code)
{
	json_t *a = js_action(code);
	char *s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	char *t = text_of(ws, s);
	free(s);
	return t;
}

/* javascript code that must fail: its error; *ms the answer's total_ms. */
static char *js_error(struct dg_ws *ws, const char *code, double *ms)
{
	json_t *a = js_action(code);
	char *s = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	json_t *r = act(ws, s);
	free(s);
	cr_assert(json_is_false(json_object_get(r, "ok")), "%s did not fail", code);
	cr_assert_null(json_object_get(r, "text"), "%s failed with text", code);
	if (ms)
		*ms = json_number_value(json_object_get(r, "total_ms"));
	char *e = strdup(str(r, "error"));
	json_decref(r);
	return e;
}

static void js_is(struct dg_ws *ws, const char *code, const char *want)
{
	char *t = js(ws, code);
	cr_assert_str_eq(t, want, "javascript %s", code);
	free(t);
}

/* The positions of needles in text, each after the one before. */
static void in_order(const char *text, const char *const *needles, const char *what)
{
	const char *p = text;
	for (; *needles; needles++) {
		const char *q = strstr(p, *needles);
		cr_assert(q, "%s: no \"%s\" (in this order) in:\n%s", what, *needles, text);
		p = q + strlen(*needles);
	}
}

static void ok_action(struct dg_ws *ws, const char *action)
{
	json_t *r = act(ws, action);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, str(r, "error"));
	json_decref(r);
}

Test(page_log, console_network_and_javascript)
{
	char id[64], nav[256], want[512];
	struct dg_ws *ws = open_session(id, sizeof(id));
	snprintf(nav, sizeof(nav), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d/page\"}",
		 allowed_site.port);
	ok_action(ws, nav);

	/* What the page logged from its first script, in order, once. */
	char *t = text_of(ws, "{\"type\":\"read_console\"}");
	snprintf(want, sizeof(want), " hello 42 {a: 1} (http://localhost:%d/page:2)",
		 allowed_site.port);
	in_order(t, (const char *const[]){"[log] ", want, "\n[warning] ", " careful (",
					  "\n[error] ", " bad thing (", "\n[exception] ",
					  " Uncaught Error: boom", "\n[log] ", " after the throw",
					  NULL},
		 "read_console");
	free(t);
	t = text_of(ws, "{\"type\":\"read_console\"}");
	cr_assert_str_eq(t, "no console output since the last read");
	free(t);

	/* javascript in the page's main world. */
	js_is(ws, "1+1", "2");
	js_is(ws, "document.title", "\"Log test\"");
	js_is(ws, "let x = 3; x * 2", "6");
	js_is(ws, "x + 1", "4"); /* the let stays, as in the console */
	js_is(ws, "await new Promise(r => setTimeout(r, 50, 'ok'))", "\"ok\"");
	js_is(ws, "({a: 1, b: [1, 'two', null]})", "{\"a\":1,\"b\":[1,\"two\",null]}");
	js_is(ws, "document.body", "body");
	js_is(ws, "window", "Window"); /* a cycle: by its description */
	js_is(ws, "-0", "-0");
	js_is(ws, "[1, 2n]", "Array(2)"); /* a BigInt inside: by its description */
	js_is(ws, "undefined", "undefined");
	js_is(ws, "'a' + String.fromCharCode(0xD800)", "\"a\xef\xbf\xbd\"");
	js_is(ws, "console.log('from the script'); 7", "7");
	char *e = js_error(ws, "throw new Error('nope')", NULL);
	cr_assert(strncmp(e, "the script threw: Error: nope", 29) == 0, "%s", e);
	free(e);

	/* Requests: the page, an allowed fetch, one the policy refuses. */
	char code[512];
	snprintf(code, sizeof(code),
		 "(await Promise.allSettled([fetch('/data').then(r => r.text()), "
		 "fetch('http://denied.test:%d/secret', {mode: 'no-cors'})])).map(r => r.status)",
		 denied_site.port);
	js_is(ws, code, "[\"fulfilled\",\"rejected\"]");
	t = text_of(ws, "{\"type\":\"read_network\"}");
	char page[128], data[128], denied[256];
	snprintf(page, sizeof(page), "GET 200 text/html ");
	snprintf(want, sizeof(want), " ms http://localhost:%d/page\n", allowed_site.port);
	snprintf(data, sizeof(data), " ms http://localhost:%d/data", allowed_site.port);
	snprintf(denied, sizeof(denied),
		 " ms http://denied.test:%d/secret (blocked by the session's policy)",
		 denied_site.port);
	in_order(t, (const char *const[]){page, want, "GET 200 application/json ", data, NULL},
		 "read_network (allowed)");
	in_order(t, (const char *const[]){"GET blocked - ", denied, NULL}, "read_network (refused)");
	free(t);
	cr_assert_not(dg_site_saw(&denied_site, "/secret"), "the denied site saw the request");
	t = text_of(ws, "{\"type\":\"read_network\"}");
	cr_assert_str_eq(t, "no network requests since the last read");
	free(t);
	/* The script's log line and the browser's own about the refusal. */
	t = text_of(ws, "{\"type\":\"read_console\"}");
	in_order(t, (const char *const[]){"[log] ", " from the script", NULL}, "read_console");
	snprintf(want, sizeof(want), "(blocked by the session's policy) (http://denied.test:%d/secret)",
		 denied_site.port);
	in_order(t, (const char *const[]){"[error] ", want, NULL}, "read_console");
	free(t);

	/* A loop: stopped by the evaluation's timeout; the session goes on. */
	double ms;
	e = js_error(ws, "while (true) {}", &ms);
	cr_assert_str_eq(e, "the script ran longer than 10000 ms and was stopped");
	cr_assert(ms >= 9900 && ms < 12500, "answered after %.0f ms", ms);
	free(e);
	js_is(ws, "1+2", "3");
	/* A loop after an await: stopped by the worker's bound. */
	e = js_error(ws, "await 0; while (true) {}", &ms);
	cr_assert(strncmp(e, "the script did not finish within 10000 ms", 41) == 0, "%s", e);
	cr_assert(ms >= 10900 && ms < 13500, "answered after %.0f ms", ms);
	free(e);
	js_is(ws, "document.title", "\"Log test\"");
	ok_action(ws, "{\"type\":\"screenshot\"}");

	dg_ws_close(ws);
	char del[128];
	snprintf(del, sizeof(del), "/v1/sessions/%s", id);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "DELETE", del, DG_TEST_AGENT_TOKEN, NULL, 30, &r), 0);
	cr_assert_eq(r.status, 200);
	dg_http_free(&r);
}
