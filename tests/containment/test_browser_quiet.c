/* A quiet browser (issue #13): Chromium left alone on a page makes no
 * request of its own. Its background traffic (component and variations
 * updates, safe browsing, optimization guide and model downloads, GCM,
 * captive-portal checks, metrics, ...) would show in a session as egress
 * decisions the page never asked for, each refused by the proxy. A real
 * gateway starts a browser desktop; from the moment the session is ready it
 * is left idle for DG_QUIET_IDLE_S while an observer watches its
 * decisions. Then the egress proxy must have seen no connection but the
 * page's own (the observer, the recording and /metrics agree), and the
 * browser layer no request but the page's.
 *
 * Two desktops, because Chromium gets a different managed policy in each:
 * the built-in default policy (no rules: the jail's egress reaches nothing)
 * on about:blank, and a strict policy (rules) on a static page of a
 * loopback site, in French, with text typed into its text field: what
 * starts translation, spell-check dictionary and form-type fetches. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

/* How long the browser is left alone, counted from when the session is
 * ready (the POST answered) or the page has loaded. */
#define DG_QUIET_IDLE_S 30.0
#define T_ACT 60

static struct dg_server srv;
static struct dg_site site;
static bool site_on;
static char *policy_path;

static void handle(struct dg_site *s, int c, const char *path)
{
	(void)s;
	if (strcmp(path, "/") == 0)
		dg_site_reply(c, "200 OK", "text/html", "Cache-Control: max-age=3600\r\n",
			      "<!doctype html><html lang=fr><title>quiet</title>"
			      "<p>Il ne se passe rien ici. Le navigateur attend sans rien demander "
			      "au réseau, même quand on écrit dans le champ ci-dessous."
			      "<form><textarea name=texte autofocus "
			      "style=\"position:fixed;left:0;top:0;width:100%;height:100%\" "
			      "oninput=\"document.title='typed '+this.value.length\"></textarea>"
			      "<input name=courriel type=email autocomplete=email></form></html>");
	else
		dg_site_reply(c, "404 Not Found", "text/plain", "", "no");
}

/* One gateway for both cases: the built-in default policy, and the strict
 * policy under the name "strict" for the loopback page's session. */
static void serve(void)
{
	char extra[1024] = "", err[1024], map[64], policy[1024];
	dg_site_start(&site, handle);
	site_on = true;
	snprintf(policy, sizeof(policy),
		 "{\"version\": 1, \"default\": \"deny\",\n"
		 " \"actions\": {\"allow\": [\"screenshot\", \"navigate\", \"wait\", \"type\", \"click\"]},\n"
		 " \"urls\": {\"allow\": [\"http://localhost:%d/**\"]},\n"
		 " \"egress\": {\"allow\": [\"localhost:%d\"]}}\n",
		 site.port, site.port);
	policy_path = dg_test_write_tmp("policy-quiet.json", policy);
	/* A named policy is read again by the dropped gateway at each creation. */
	char dir[256];
	snprintf(dir, sizeof(dir), "%s", policy_path);
	*strrchr(dir, '/') = '\0';
	cr_assert_eq(chmod(dir, 0755), 0);
	snprintf(extra, sizeof(extra), "\"policies\": {\"strict\": \"%s\"}", policy_path);
	snprintf(map, sizeof(map), "localhost:%d=127.0.0.1:%d", site.port, site.port);
	const char *args[] = {"--test-resolve", map, NULL};
	cr_assert_eq(dg_test_serve_start_args(&srv, extra, args, 30, err, sizeof(err)), 0, "%s", err);
}

static void fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
	if (site_on)
		dg_site_stop(&site);
	if (policy_path)
		dg_test_rm_tmp(policy_path);
}

TestSuite(browser_quiet, .fini = fini, .timeout = 300);

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

static unsigned long metric(const char *name)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "GET", "/metrics", DG_TEST_VIEWER_TOKEN, NULL, 10, &r), 0);
	const char *p = strstr(r.body, name);
	cr_assert(p, "/metrics has no %s", name);
	unsigned long v = strtoul(p + strlen(name), NULL, 10);
	dg_http_free(&r);
	return v;
}

static unsigned long egress_total(void)
{
	return metric("deskgate_egress_total{verdict=\"allow\"} ") +
	       metric("deskgate_egress_total{verdict=\"deny\"} ");
}

/* What a session's decisions show: the egress targets and browser URLs
 * that are not the page's own (own: a prefix; NULL: nothing is). */
struct seen {
	int egress, browser;       /* decisions of each layer that were not the page's */
	int own_egress, own_browser;
	char what[4096];           /* the foreign ones, listed */
};

static void seen_add(struct seen *s, json_t *ev, const char *own_host, const char *own_url)
{
	if (strcmp(str(ev, "type"), "decision") != 0)
		return;
	const char *layer = str(ev, "layer");
	size_t n = strlen(s->what);
	if (strcmp(layer, "egress") == 0) {
		const char *t = str(ev, "target");
		if (own_host && strcmp(t, own_host) == 0) {
			s->own_egress++;
			return;
		}
		s->egress++;
		snprintf(s->what + n, sizeof(s->what) - n, "egress %s %s (%s); ", str(ev, "method"),
			 t[0] ? t : "(no request)", str(ev, "verdict"));
	} else if (strcmp(layer, "browser") == 0) {
		const char *u = str(ev, "url");
		if (own_url && strncmp(u, own_url, strlen(own_url)) == 0) {
			s->own_browser++;
			return;
		}
		s->browser++;
		snprintf(s->what + n, sizeof(s->what) - n, "browser %s %.200s (%s); ", str(ev, "resource"),
			 u, str(ev, "verdict"));
	}
}

static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

/* Reads the observer's messages for seconds, adding its decisions to s. */
static void watch_for(struct dg_ws *obs, double seconds, struct seen *s, const char *own_host,
		      const char *own_url)
{
	double end = dg_test_now() + seconds;
	for (double left; (left = end - dg_test_now()) > 0;) {
		struct dg_ws_msg m;
		int r = dg_ws_recv(obs, left, &m);
		if (r == 0)
			break;
		cr_assert_eq(r, 1, "the observer's connection closed");
		if (!m.binary) {
			json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
			seen_add(s, j, own_host, own_url);
			json_decref(j);
		}
		dg_ws_msg_free(&m);
	}
}

/* Every decision of the recording's events.jsonl. */
static void recording_scan(const char *id, struct seen *s, const char *own_host, const char *own_url)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/rec/%s/events.jsonl", srv.dir, id);
	char *text = dg_test_read_file(path);
	cr_assert(text[0], "no recording at %s", path);
	int lines = 0;
	for (char *line = text, *nl; *line; line = nl ? nl + 1 : line + strlen(line)) {
		nl = strchr(line, '\n');
		json_t *ev = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
		cr_assert(ev, "%s: line %d is not JSON", path, lines + 1);
		seen_add(s, ev, own_host, own_url);
		json_decref(ev);
		lines++;
	}
	free(text);
}

/* A browser session being watched: its agent and observer connections,
 * and what is the page's own (own_host: an egress prefix, own_url: a URL
 * prefix; NULL: nothing is). */
struct quiet {
	const char *label, *url, *own_host, *own_url;
	char id[64];
	struct dg_ws *ws, *obs;
	struct seen live;
};

/* Starts a browser session under the named policy (NULL: the default),
 * navigates to q->url when given and types into its field, and opens an
 * observer. */
static void open_session(struct quiet *q, const char *policy)
{
	char body[128];
	snprintf(body, sizeof(body), "{\"profile\":\"browser\"%s%s%s}", policy ? ",\"policy\":\"" : "",
		 policy ? policy : "", policy ? "\"" : "");
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, body, 90, &r), 0);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	char path[128], proto[300], err[256];
	snprintf(q->id, sizeof(q->id), "%s", str(j, "id"));
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", q->id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	q->ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(q->ws, "connect: %d %s", status, err);
	json_decref(recv_json(q->ws, 10)); /* hello */
	snprintf(path, sizeof(path), "/v1/sessions/%s/watch", q->id);
	q->obs = dg_ws_connect(srv.port, path, DG_TEST_VIEWER_TOKEN, NULL, 30, &status, err, sizeof(err));
	cr_assert(q->obs, "watch: %d %s", status, err);
	if (!q->url)
		return;
	char nav[256];
	snprintf(nav, sizeof(nav), "{\"type\":\"navigate\",\"url\":\"%s\"}", q->url);
	cr_assert_eq(dg_ws_send_text(q->ws, nav), 0);
	json_t *res = recv_json(q->ws, T_ACT);
	cr_assert(json_is_true(json_object_get(res, "ok")), "navigate: %s", json_dumps(res, 0));
	cr_assert_str_eq(str(res, "title"), "quiet");
	json_decref(res);
	/* Into the text field (it fills the page), with a misspelling. */
	cr_assert_eq(dg_ws_send_text(q->ws, "{\"type\":\"click\",\"x\":640,\"y\":500}"), 0);
	res = recv_json(q->ws, T_ACT);
	cr_assert(json_is_true(json_object_get(res, "ok")), "click: %s", json_dumps(res, 0));
	json_decref(res);
	cr_assert_eq(dg_ws_send_text(q->ws, "{\"type\":\"type\",\"text\":\"Bonjour le mnode\"}"), 0);
	res = recv_json(q->ws, T_ACT);
	cr_assert(json_is_true(json_object_get(res, "ok")), "type: %s", json_dumps(res, 0));
	cr_assert_str_eq(str(res, "title"), "typed 16", "the text did not reach the field: title \"%s\"",
			 str(res, "title"));
	json_decref(res);
}

/* Ends the session and checks its live and recorded decisions. */
static int close_and_check(struct quiet *q)
{
	dg_ws_close(q->obs);
	dg_ws_close(q->ws);
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", q->id);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 30, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dg_http_free(&r);
	struct seen rec = {0};
	recording_scan(q->id, &rec, q->own_host, q->own_url);
	fprintf(stderr, "browser_quiet: %s: recording: %d foreign egress, %d foreign browser, %d own "
		"egress, %d own browser decisions; %s\n", q->label, rec.egress, rec.browser,
		rec.own_egress, rec.own_browser, rec.what);
	cr_assert_eq(q->live.egress + q->live.browser, 0,
		     "%s: the observer saw requests the page did not make while idle: %s", q->label,
		     q->live.what);
	cr_assert_eq(rec.egress + rec.browser, 0,
		     "%s: the recording holds requests the page did not make: %s", q->label, rec.what);
	if (q->url) {
		cr_assert_gt(rec.own_browser, 0, "%s: the page's own request is not in the recording",
			     q->label);
		cr_assert_gt(rec.own_egress, 0, "%s: the page's own connection is not in the recording",
			     q->label);
	}
	return rec.own_egress;
}

/* Two browser sessions of one gateway, left idle together for
 * DG_QUIET_IDLE_S once both are ready (the strict one after its page loaded
 * and text was typed): nothing but that page makes a request, live (the
 * observers), in the recordings, or in /metrics. */
Test(browser_quiet, idle_browsers_make_no_request_of_their_own)
{
	serve();
	char url[128], host[64];
	snprintf(url, sizeof(url), "http://localhost:%d/", site.port);
	snprintf(host, sizeof(host), "localhost:%d", site.port);
	struct quiet q[2] = {
		{.label = "default policy, about:blank"},
		{.label = "strict policy, a French page typed into", .url = url, .own_host = host,
		 .own_url = url},
	};
	unsigned long egress0 = egress_total();
	open_session(&q[0], NULL);
	open_session(&q[1], "strict");
	double t0 = dg_test_now();
	while (dg_test_now() - t0 < DG_QUIET_IDLE_S)
		for (int i = 0; i < 2; i++)
			watch_for(q[i].obs, 0.1, &q[i].live, q[i].own_host, q[i].own_url);
	double idle = dg_test_now() - t0;
	unsigned long egress1 = egress_total();
	cr_assert_geq(idle, DG_QUIET_IDLE_S - 0.5);
	int own = close_and_check(&q[0]);
	own += close_and_check(&q[1]);
	fprintf(stderr, "browser_quiet: idle %.1f s; /metrics egress %lu -> %lu\n", idle, egress0,
		egress1);
	cr_assert_eq(egress1 - egress0, (unsigned long)own,
		     "/metrics counted %lu egress decisions, the pages made %d", egress1 - egress0, own);
}
