/* The policy end to end with a real browser (issue #5): two loopback HTTP
 * servers play an allowed site (reached as localhost:APORT, a secure
 * context, so service workers register) and a denied one (denied.test:DPORT),
 * both reached only through the egress proxy, whose test-only resolver
 * override maps the names to them. Every kind of way out is tried from the
 * pages; the denied server must see no request at all. Then exec: curl in
 * the jail reaches the allowed site through the proxy and nothing else, each
 * exec held for a human's approval over HTTP. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60

/* ---- the two sites ---------------------------------------------------------- */

static struct dg_site allowed_site, denied_site;

/* The page that tries every way out at once; its title becomes "done" when
 * every attempt has had its chance. */
static char *all_page(int dport)
{
	char *p = NULL;
	int n = asprintf(&p,
		"<!doctype html><title>all</title><body>"
		"<iframe src=\"/ok-frame\"></iframe>"
		"<iframe src=\"http://denied.test:%d/frame\"></iframe>"
		"<img src=\"/ok.png\"><img src=\"http://denied.test:%d/img.png\">"
		"<iframe name=sink></iframe>"
		"<form id=f method=POST action=\"http://denied.test:%d/post\" target=sink>"
		"<input name=a value=b></form>"
		"<script>"
		"const D='http://denied.test:%d';"
		"fetch('/ok-fetch').catch(()=>{});"
		"fetch(D+'/fetch',{mode:'no-cors'}).catch(()=>{});"
		"try{new WebSocket('ws://denied.test:%d/ws')}catch(e){}"
		"try{window.open(D+'/popup')}catch(e){}"
		"document.getElementById('f').submit();"
		"const a=document.createElement('a');a.href='/file.bin';a.download='x.bin';"
		"document.body.appendChild(a);a.click();"
		"navigator.serviceWorker.register('/sw.js').catch(e=>{document.title='sw-failed '+e});"
		"setTimeout(()=>{if(document.title=='all')document.title='done'},2500);"
		"</script>",
		dport, dport, dport, dport, dport);
	cr_assert(n > 0);
	return p;
}

static void handle(struct dg_site *s, int c, const char *path)
{
	if (strcmp(path, "/") == 0) {
		dg_site_reply(c, "200 OK", "text/html", "", "<!doctype html><title>allowed</title>hello");
	} else if (strcmp(path, "/redirect") == 0) {
		char loc[128];
		snprintf(loc, sizeof(loc), "Location: http://denied.test:%d/landing\r\n", s->other_port);
		dg_site_reply(c, "302 Found", "text/plain", loc, "moved");
	} else if (strcmp(path, "/all.html") == 0) {
		char *page = all_page(s->other_port);
		dg_site_reply(c, "200 OK", "text/html", "", page);
		free(page);
	} else if (strcmp(path, "/sw.js") == 0) {
		char js[512];
		snprintf(js, sizeof(js),
			 "self.addEventListener('install',e=>e.waitUntil(Promise.allSettled(["
			 "fetch('/sw-ok'),fetch('http://denied.test:%d/sw',{mode:'no-cors'})])));",
			 s->other_port);
		dg_site_reply(c, "200 OK", "application/javascript", "", js);
	} else if (strncmp(path, "/selfnav", 8) == 0) {
		/* A page that keeps changing by itself: its title every 50 ms,
		 * its URL (pushState) every 120 ms, and it loads itself again
		 * 6 times. */
		dg_site_reply(c, "200 OK", "text/html", "",
			      "<!doctype html><title>nav</title><script>"
			      "const n=+new URLSearchParams(location.search).get('n')||0;let k=0;"
			      "setInterval(()=>{document.title='nav '+n+' '+(k++)},50);"
			      "setInterval(()=>{history.pushState(null,'','#'+k)},120);"
			      "if(n<6)setTimeout(()=>{location.href='/selfnav?n='+(n+1)},400);"
			      "</script>nav");
	} else if (strcmp(path, "/file.bin") == 0) {
		dg_site_reply(c, "200 OK", "application/octet-stream",
			      "Content-Disposition: attachment; filename=x.bin\r\n", "payload");
	} else {
		dg_site_reply(c, "200 OK", "text/plain", "", "ok");
	}
}

/* ---- the gateway ---------------------------------------------------------------- */

static struct dg_server srv;

static json_t *http(const char *method, const char *path, const char *token, const char *body,
		    int want)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, method, path, token, body, 30, &r), 0, "%s %s", method,
		     path);
	cr_assert_eq(r.status, want, "%s %s: status %d, want %d: %s", method, path, r.status, want,
		     r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	return j;
}

static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

/* Sends a canonical action and returns its result (after a "pending"
 * notice when the policy asked: *pending then gets the approval id). */
static json_t *act(struct dg_ws *ws, const char *action, char *pending, size_t plen)
{
	cr_assert_eq(dg_ws_send_text(ws, action), 0);
	json_t *j = recv_json(ws, T_ACT);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (pending && type && strcmp(type, "pending") == 0) {
		snprintf(pending, plen, "%s", json_string_value(json_object_get(j, "approval")));
		return j;
	}
	cr_assert_str_eq(type, "result", "%s: %s", action, json_dumps(j, 0));
	return j;
}

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

/* Waits (with wait actions) until the page's title is want. */
static void wait_title(struct dg_ws *ws, const char *want)
{
	char last[256] = "";
	for (int i = 0; i < 40; i++) {
		json_t *r = act(ws, "{\"type\":\"wait\",\"ms\":250}", NULL, 0);
		snprintf(last, sizeof(last), "%s", str(r, "title"));
		json_decref(r);
		if (strcmp(last, want) == 0)
			return;
	}
	cr_assert_fail("the page's title stayed \"%s\", not \"%s\"", last, want);
}

static char *policy_path;

static void setup(void)
{
	dg_site_start(&denied_site, handle);
	dg_site_start(&allowed_site, handle);
	allowed_site.other_port = denied_site.port;
	denied_site.other_port = denied_site.port;
	char policy[2048];
	snprintf(policy, sizeof(policy),
		 "{\"version\": 1, \"default\": \"deny\",\n"
		 " \"actions\": {\"allow\": [\"screenshot\", \"navigate\", \"wait\", \"back\"],\n"
		 "             \"ask\": [\"exec\"]},\n"
		 " \"urls\": {\"allow\": [\"http://localhost:%d/**\"]},\n"
		 " \"egress\": {\"allow\": [\"localhost:%d\"]}}\n",
		 allowed_site.port, allowed_site.port);
	policy_path = dg_test_write_tmp("policy-browser.json", policy);
	char extra[1024];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\", \"limits\": {\"approval_seconds\": 3}",
		 policy_path);
	char err[1024];
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

TestSuite(policy_browser, .init = setup, .fini = teardown, .timeout = 300);

static struct dg_ws *open_session(char *id, size_t idlen)
{
	json_t *j = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"browser\"}", 201);
	snprintf(id, idlen, "%s", str(j, "id"));
	char path[128], proto[300], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	struct dg_ws *ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(ws, "connect: %d %s", status, err);
	json_decref(recv_json(ws, 10)); /* hello */
	return ws;
}

static unsigned long metric(const char *name)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "GET", "/metrics", DG_TEST_VIEWER_TOKEN, NULL, 10, &r), 0);
	const char *p = strstr(r.body, name);
	unsigned long v = p ? strtoul(p + strlen(name), NULL, 10) : 0;
	dg_http_free(&r);
	return v;
}

/* The next text message, events included (for an agent that asked). */
static json_t *recv_any(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, true);
}

/* Issue 16, point 5: with a page that navigates by itself, the next text
 * message after each action is its answer; page and decision events reach
 * the agent only once its hello asked for them. */
Test(policy_browser, agent_socket_answers_in_turn)
{
	char id[64], url[256];
	struct dg_ws *ws = open_session(id, sizeof(id));
	snprintf(url, sizeof(url), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d/selfnav\"}",
		 allowed_site.port);
	json_t *r = act(ws, url, NULL, 0);
	cr_assert(json_is_true(json_object_get(r, "ok")), "navigate: %s", str(r, "error"));
	json_decref(r);
	/* recv_json fails on anything but an answer; the page changes on its
	 * own between actions too. */
	usleep(1000000);
	for (int i = 0; i < 12; i++)
		json_decref(act(ws, "{\"type\":\"wait\",\"ms\":200}", NULL, 0));

	/* The agent asks for page and decision events: answered by a hello. */
	cr_assert_eq(dg_ws_send_text(ws, "{\"type\":\"hello\",\"events\":[\"decision\",\"page\"]}"), 0);
	r = recv_json(ws, T_ACT);
	cr_assert_str_eq(str(r, "type"), "hello");
	cr_assert_str_eq(str(r, "id"), id);
	char *ev = json_dumps(json_object_get(r, "events"), JSON_COMPACT);
	cr_assert_str_eq(ev, "[\"page\",\"decision\"]");
	free(ev);
	json_decref(r);
	int pages = 0, decisions = 0;
	const char *then[] = {url, "{\"type\":\"wait\",\"ms\":200}"};
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(dg_ws_send_text(ws, then[i]), 0);
		for (;;) {
			r = recv_any(ws, T_ACT);
			const char *type = str(r, "type");
			if (strcmp(type, "event") == 0 && strcmp(str(r, "event"), "page") == 0)
				pages++;
			else if (strcmp(type, "decision") == 0)
				decisions++;
			else
				cr_assert_str_eq(type, "result", "%s", json_dumps(r, 0));
			bool done = strcmp(type, "result") == 0;
			json_decref(r);
			if (done)
				break;
		}
		/* Between actions the worker reports what the page does on
		 * its own: 2 s of it, no action running. */
		for (double end = dg_test_now() + 2; i == 0 && dg_test_now() < end;) {
			struct dg_ws_msg m;
			if (dg_ws_recv(ws, end - dg_test_now(), &m) != 1)
				break;
			json_t *j = m.binary ? NULL : json_loadb((const char *)m.data, m.len, 0, NULL);
			dg_ws_msg_free(&m);
			if (j && strcmp(str(j, "type"), "event") == 0 &&
			    strcmp(str(j, "event"), "page") == 0)
				pages++;
			else if (j && strcmp(str(j, "type"), "decision") == 0)
				decisions++;
			else if (j)
				cr_assert_fail("between actions: %s", json_dumps(j, 0));
			json_decref(j);
		}
	}
	cr_assert_gt(pages, 0, "no page event after asking for them");
	cr_assert_gt(decisions, 0, "no decision after asking for them (the page loads itself)");

	/* Bad hellos are refused naming the field; the socket stays usable. */
	const char *bad[][2] = {{"{\"type\":\"hello\",\"events\":[\"pages\"]}", "hello.events[0]"},
				{"{\"type\":\"hello\",\"events\":[\"page\",\"page\"]}", "named twice"},
				{"{\"type\":\"hello\",\"events\":\"page\"}", "hello.events"},
				{"{\"type\":\"hello\",\"watch\":true}", "unknown field \"watch\""},
				{"{\"type\":\"hello\",\"events\":[\"page\",\"page\",\"page\",\"page\","
				 "\"page\",\"page\",\"page\",\"page\",\"page\"]}", "at most 8"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(dg_ws_send_text(ws, bad[i][0]), 0);
		for (;;) { /* events asked for earlier may still come first */
			r = recv_any(ws, T_ACT);
			if (strcmp(str(r, "type"), "error") == 0)
				break;
			cr_assert(strcmp(str(r, "type"), "event") == 0 ||
				  strcmp(str(r, "type"), "decision") == 0, "%s", json_dumps(r, 0));
			json_decref(r);
		}
		const char *msg = json_string_value(
			json_object_get(json_object_get(r, "error"), "message"));
		cr_assert(msg && strstr(msg, bad[i][1]), "%s: %s", bad[i][0], msg ? msg : "(none)");
		json_decref(r);
	}

	/* events [] asks for none again: answers only. */
	cr_assert_eq(dg_ws_send_text(ws, "{\"type\":\"hello\",\"events\":[]}"), 0);
	for (;;) {
		r = recv_any(ws, T_ACT);
		bool hello = strcmp(str(r, "type"), "hello") == 0;
		if (hello)
			cr_assert(json_array_size(json_object_get(r, "events")) == 0);
		json_decref(r);
		if (hello)
			break;
	}
	json_decref(act(ws, url, NULL, 0));
	usleep(1000000);
	for (int i = 0; i < 8; i++)
		json_decref(act(ws, "{\"type\":\"wait\",\"ms\":200}", NULL, 0));
	dg_ws_close(ws);
	char del[128];
	snprintf(del, sizeof(del), "/v1/sessions/%s", id);
	json_decref(http("DELETE", del, DG_TEST_AGENT_TOKEN, NULL, 200));
}

Test(policy_browser, every_way_out_of_the_browser)
{
	char id[64];
	struct dg_ws *ws = open_session(id, sizeof(id));
	char url[256];

	/* Allowed navigation. */
	snprintf(url, sizeof(url), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d/\"}",
		 allowed_site.port);
	json_t *r = act(ws, url, NULL, 0);
	cr_assert(json_is_true(json_object_get(r, "ok")), "allowed navigation: %s", str(r, "error"));
	cr_assert_str_eq(str(r, "title"), "allowed");
	json_decref(r);

	/* Navigation to the denied site: refused by the action layer. */
	snprintf(url, sizeof(url), "{\"type\":\"navigate\",\"url\":\"http://denied.test:%d/\"}",
		 denied_site.port);
	r = act(ws, url, NULL, 0);
	cr_assert(!json_is_true(json_object_get(r, "ok")));
	cr_assert_str_eq(str(r, "verdict"), "deny");
	cr_assert_str_eq(str(r, "rule"), "default");
	json_decref(r);

	/* A redirect to the denied site: the browser layer blocks the hop. */
	unsigned long blocked0 = metric("deskgate_browser_requests_total{verdict=\"deny\"} ");
	snprintf(url, sizeof(url), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d/redirect\"}",
		 allowed_site.port);
	r = act(ws, url, NULL, 0);
	cr_assert(!json_is_true(json_object_get(r, "ok")), "the redirect was followed");
	cr_assert(strstr(str(r, "error"), "BLOCKED_BY_CLIENT"), "error: %s", str(r, "error"));
	json_decref(r);
	cr_assert_gt(metric("deskgate_browser_requests_total{verdict=\"deny\"} "), blocked0);
	cr_assert(dg_site_saw(&allowed_site, "GET /redirect "));

	/* Every other way out, from one page. */
	snprintf(url, sizeof(url), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d/all.html\"}",
		 allowed_site.port);
	json_decref(act(ws, url, NULL, 0));
	wait_title(ws, "done");
	const char *want[] = {"GET /ok-frame ", "GET /ok.png ", "GET /ok-fetch ", "GET /sw.js ",
			      "GET /sw-ok "};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(dg_site_saw(&allowed_site, want[i]), "the allowed site never saw %s", want[i]);

	/* The download was refused: nothing in the jail's Downloads. exec is
	 * "ask": it waits for a viewer's approval. */
	char pending[128] = "";
	r = act(ws, "{\"type\":\"exec\",\"argv\":[\"/bin/sh\",\"-c\",\"ls -A $HOME/Downloads 2>/dev/null | wc -l\"]}",
		pending, sizeof(pending));
	cr_assert_str_eq(str(r, "type"), "pending");
	json_decref(r);
	json_t *list = http("GET", "/v1/approvals", DG_TEST_VIEWER_TOKEN, NULL, 200);
	json_t *first = json_array_get(json_object_get(list, "approvals"), 0);
	cr_assert_str_eq(str(first, "id"), pending);
	cr_assert_str_eq(str(first, "session"), id);
	cr_assert_str_eq(str(first, "rule"), "actions.ask[0]");
	json_decref(list);
	char path[160];
	snprintf(path, sizeof(path), "/v1/approvals/%s", pending);
	/* Never from the agent's side. */
	json_decref(http("GET", "/v1/approvals", DG_TEST_AGENT_TOKEN, NULL, 403));
	json_decref(http("POST", path, DG_TEST_AGENT_TOKEN, "{\"decision\":\"approve\"}", 403));
	json_decref(http("POST", path, DG_TEST_VIEWER_TOKEN, "{\"decision\":\"maybe\"}", 400));
	json_decref(http("POST", path, DG_TEST_VIEWER_TOKEN, "{\"decision\":\"approve\"}", 200));
	/* Single use. */
	json_decref(http("POST", path, DG_TEST_VIEWER_TOKEN, "{\"decision\":\"approve\"}", 404));
	r = recv_json(ws, T_ACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "approved exec: %s", json_dumps(r, 0));
	cr_assert_str_eq(str(r, "approved_by"), "env-viewer");
	json_t *ex = json_object_get(r, "exec");
	cr_assert_str_eq(str(ex, "stdout"), "0\n", "Downloads holds files: %s", str(ex, "stdout"));
	json_decref(r);

	/* Denied by a human. */
	r = act(ws, "{\"type\":\"exec\",\"argv\":[\"/bin/true\"]}", pending, sizeof(pending));
	json_decref(r);
	snprintf(path, sizeof(path), "/v1/approvals/%s", pending);
	json_decref(http("POST", path, DG_TEST_ADMIN_TOKEN, "{\"decision\":\"deny\"}", 200));
	r = recv_json(ws, T_ACT);
	cr_assert(!json_is_true(json_object_get(r, "ok")));
	cr_assert_str_eq(str(r, "rule"), "approval");
	json_decref(r);

	/* Nobody answers: refused when it expires (approval_seconds 3). */
	double t0 = dg_test_now();
	r = act(ws, "{\"type\":\"exec\",\"argv\":[\"/bin/true\"]}", pending, sizeof(pending));
	json_decref(r);
	r = recv_json(ws, 10);
	cr_assert(!json_is_true(json_object_get(r, "ok")));
	cr_assert_str_eq(str(r, "rule"), "approval");
	cr_assert(strstr(str(r, "reason"), "within 3 s"), "%s", str(r, "reason"));
	cr_assert_geq(dg_test_now() - t0, 2.5);
	json_decref(r);

	cr_assert(metric("deskgate_egress_total{verdict=\"deny\"} ") > 0,
		  "the proxy denied nothing (the WebSocket, popup and form go there)");
	dg_ws_close(ws);
	cr_assert_eq(dg_site_count(&denied_site), 0, "the denied site saw %d requests, first: %s",
		     dg_site_count(&denied_site), denied_site.n ? denied_site.log[0] : "");
}

/* exec: programs in the jail get the proxy and nothing else. */
static json_t *approved_exec(struct dg_ws *ws, const char *action)
{
	char pending[128] = "", path[160];
	json_decref(act(ws, action, pending, sizeof(pending)));
	cr_assert(pending[0], "exec was not held for approval");
	snprintf(path, sizeof(path), "/v1/approvals/%s", pending);
	json_decref(http("POST", path, DG_TEST_VIEWER_TOKEN, "{\"decision\":\"approve\"}", 200));
	json_t *r = recv_json(ws, T_ACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, json_dumps(r, 0));
	return r;
}

static void curl(struct dg_ws *ws, const char *args, const char *want_stdout)
{
	char action[1024];
	snprintf(action, sizeof(action),
		 "{\"type\":\"exec\",\"argv\":[\"/bin/sh\",\"-c\",\"curl -sS -m 5 -o /dev/null -w '%%{http_code}' %s; echo \\\" $?\\\"\"]}",
		 args);
	json_t *r = approved_exec(ws, action);
	json_t *ex = json_object_get(r, "exec");
	cr_assert(strstr(str(ex, "stdout"), want_stdout), "curl %s: stdout %s, stderr %s (want %s)",
		  args, str(ex, "stdout"), str(ex, "stderr"), want_stdout);
	json_decref(r);
}

Test(policy_browser, exec_reaches_only_the_allowed_site)
{
	char id[64];
	struct dg_ws *ws = open_session(id, sizeof(id));
	char args[256];
	snprintf(args, sizeof(args), "http://localhost:%d/exec-ok", allowed_site.port);
	curl(ws, args, "200 0");
	cr_assert(dg_site_saw(&allowed_site, "GET /exec-ok "));
	/* The proxy answers 403 for what the policy does not allow. */
	snprintf(args, sizeof(args), "http://denied.test:%d/exec", denied_site.port);
	curl(ws, args, "403 0");
	curl(ws, "http://169.254.169.254/latest/meta-data/", "403 0");
	/* The host's loopback by IP literal, through the proxy or around it. */
	snprintf(args, sizeof(args), "http://127.0.0.1:%d/exec-ip", allowed_site.port);
	curl(ws, args, "403 0");
	snprintf(args, sizeof(args), "--noproxy '*' http://127.0.0.1:%d/exec-direct", allowed_site.port);
	curl(ws, args, "000 7");
	/* HTTPS through CONNECT to a host the policy does not name. */
	curl(ws, "https://example.com/", "000");
	dg_ws_close(ws);
	cr_assert_eq(dg_site_count(&denied_site), 0, "the denied site saw %d requests",
		     dg_site_count(&denied_site));
	cr_assert(!dg_site_saw(&allowed_site, "/exec-ip"), "the IP literal reached the host");
	cr_assert(!dg_site_saw(&allowed_site, "/exec-direct"), "a direct connection reached the host");
}
