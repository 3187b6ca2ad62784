/* The policy end to end with a real browser (issue 14, "No path around the
 * policy"): WebSockets and the navigations the browser starts itself.
 *
 * Two loopback sites, reached only through the egress proxy and
 * --test-resolve: the allowed one as localhost:APORT (a secure context, so
 * service workers register) and a denied one as denied.test:DPORT. The
 * egress layer allows both hosts; only the "urls" rules stand between the
 * pages and the denied paths, which no request may reach:
 *  - WebSockets from a page, a fresh same-origin iframe's realm, a dedicated,
 *    a shared and a service worker, to an allowed path (the site echoes a
 *    message), a denied path and an "ask" path (refused: a page cannot wait
 *    for a human); each decision is recorded as a browser decision;
 *  - the omnibox: alt+Enter (new tab) and shift+Enter (new window) with a
 *    denied URL reach nothing; with an allowed URL the gateway follows the
 *    new tab, and a region scoped to that URL decides the next click.
 * The allowed site answers WebSocket handshakes itself (this file), so it
 * sees the handshake's request line as the origin would. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60
#define LOG_MAX 512

/* ---- a loopback site that also speaks WebSocket ----------------------------- */

struct wsite {
	int fd, port;
	pthread_t th;
	pthread_mutex_t mu;
	char *log[LOG_MAX]; /* request lines seen */
	int n;
	volatile bool stop;
};

static struct wsite site, denied;

static void wlog(struct wsite *s, const char *line)
{
	pthread_mutex_lock(&s->mu);
	if (s->n < LOG_MAX)
		s->log[s->n++] = strdup(line);
	pthread_mutex_unlock(&s->mu);
}

/* Whether a request line starting with prefix was seen. */
static bool saw(struct wsite *s, const char *prefix)
{
	bool found = false;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n && !found; i++)
		found = strncmp(s->log[i], prefix, strlen(prefix)) == 0;
	pthread_mutex_unlock(&s->mu);
	return found;
}

static int count(struct wsite *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* All lines, for a failure message (malloc'd). */
static char *all_lines(struct wsite *s)
{
	size_t cap = 16, len = 0;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n; i++)
		cap += strlen(s->log[i]) + 3;
	char *out = malloc(cap);
	out[0] = '\0';
	for (int i = 0; i < s->n; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s; ", s->log[i]);
	pthread_mutex_unlock(&s->mu);
	return out;
}

static void reply(int c, const char *type, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
			 type, strlen(body));
	if (write(c, head, (size_t)n) < 0 || write(c, body, strlen(body)) < 0)
		return;
}

static const char ws_page[] =
	"<!doctype html><title>ws</title><body><script>\n"
	"const P=location.port;\n"
	"function rep(ctx,k,v){fetch('/report/'+ctx+'/'+k+'/'+v).catch(()=>{})}\n"
	"function ws(W,ctx){for(const k of ['ok','secret','ask']){\n"
	" const path='/'+k+'/'+ctx+(k=='secret'?'/x?leak=1':'');let w;\n"
	" try{w=new W('ws://localhost:'+P+path)}catch(e){rep(ctx,k,'throw');continue}\n"
	" w.onopen=()=>w.send('echo-'+ctx);w.onmessage=e=>{rep(ctx,k,e.data);w.close()};\n"
	" w.onerror=()=>rep(ctx,k,'error')}}\n"
	"ws(WebSocket,'page');\n"
	/* A realm the page made itself, with no document of its own loaded. */
	"const f=document.body.appendChild(document.createElement('iframe'));\n"
	"ws(f.contentWindow.WebSocket,'fresh');\n"
	"try{new WebSocket('ws://denied.test:%d/elsewhere')}catch(e){}\n"
	/* Encrypted: only its origin can be decided, and no pattern names it. */
	"try{const s=new WebSocket('wss://localhost:'+P+'/tls');s.onerror=()=>rep('tls','wss','error')}catch(e){}\n"
	"new Worker('/w.js?ctx=dedicated');\n"
	"new SharedWorker('/w.js?ctx=shared').port.start();\n"
	"navigator.serviceWorker.register('/w.js?ctx=service').catch(e=>rep('service','register','failed'));\n"
	"</script>";

static const char worker_js[] =
	"const ctx=new URL(location.href).searchParams.get('ctx');const P=location.port;\n"
	"function rep(k,v){fetch('/report/'+ctx+'/'+k+'/'+v).catch(()=>{})}\n"
	"for(const k of ['ok','secret','ask']){\n"
	" const path='/'+k+'/'+ctx+(k=='secret'?'/x?leak=1':'');let w;\n"
	" try{w=new WebSocket('ws://localhost:'+P+path)}catch(e){rep(k,'throw');continue}\n"
	" w.onopen=()=>w.send('echo-'+ctx);w.onmessage=e=>{rep(k,e.data);w.close()};\n"
	" w.onerror=()=>rep(k,'error')}\n"
	"self.onconnect=e=>{};\n";

/* RFC 6455 4.2.2: base64(SHA-1(key + GUID)). */
static void ws_accept(const char *key, size_t klen, char out[64])
{
	char in[256];
	int n = snprintf(in, sizeof(in), "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int)klen, key);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_Digest(in, (size_t)n, md, &mdlen, EVP_sha1(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

/* The value of header name in head, or NULL. */
static const char *header(const char *head, const char *name, size_t *len)
{
	size_t nl = strlen(name);
	for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
		const char *l = p + 2;
		if (strncasecmp(l, name, nl) == 0 && l[nl] == ':') {
			const char *v = l + nl + 1;
			while (*v == ' ')
				v++;
			const char *e = strstr(v, "\r\n");
			*len = e ? (size_t)(e - v) : strlen(v);
			return v;
		}
	}
	return NULL;
}

/* One WebSocket: the handshake answered, one masked text frame read and
 * sent back unmasked, then a close. */
static void ws_echo(int c, const char *head)
{
	size_t klen;
	const char *key = header(head, "Sec-WebSocket-Key", &klen);
	if (!key || klen > 100)
		return;
	char acc[64], resp[256];
	ws_accept(key, klen, acc);
	int n = snprintf(resp, sizeof(resp),
			 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n", acc);
	if (write(c, resp, (size_t)n) != n)
		return;
	unsigned char f[256];
	size_t got = 0;
	while (got < 6 || got < 6 + (size_t)(f[1] & 0x7f)) {
		ssize_t k = read(c, f + got, sizeof(f) - got);
		if (k <= 0)
			return;
		got += (size_t)k;
		if (got >= 2 && (f[1] & 0x7f) > 125)
			return;
	}
	size_t len = f[1] & 0x7f;
	unsigned char out[130] = {0x81, (unsigned char)len};
	for (size_t i = 0; i < len; i++)
		out[2 + i] = f[6 + i] ^ f[2 + i % 4];
	if (write(c, out, 2 + len) < 0)
		return;
	unsigned char bye[2] = {0x88, 0};
	if (write(c, bye, 2) < 0)
		return;
	usleep(300000);
}

struct conn_arg {
	struct wsite *s;
	int c;
};

static void *wconn(void *arg)
{
	struct conn_arg a = *(struct conn_arg *)arg;
	free(arg);
	struct timeval tv = {3, 0};
	setsockopt(a.c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char buf[8192];
	size_t got = 0;
	while (got < sizeof(buf) - 1) {
		ssize_t k = read(a.c, buf + got, sizeof(buf) - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		buf[got] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[got] = '\0';
	char line[1024];
	size_t ll = strcspn(buf, "\r\n");
	snprintf(line, sizeof(line), "%.*s", (int)(ll < 1000 ? ll : 1000), buf);
	wlog(a.s, line);
	char path[512] = "";
	sscanf(line, "%*s %511s", path);
	size_t ul;
	const char *up = header(buf, "Upgrade", &ul);
	if (up && ul == 9 && strncasecmp(up, "websocket", 9) == 0) {
		ws_echo(a.c, buf);
	} else if (strcmp(path, "/ws.html") == 0) {
		char page[sizeof(ws_page) + 16];
		snprintf(page, sizeof(page), ws_page, denied.port);
		reply(a.c, "text/html", page);
	} else if (strncmp(path, "/w.js", 5) == 0) {
		reply(a.c, "application/javascript", worker_js);
	} else if (strncmp(path, "/typed/", 7) == 0) {
		reply(a.c, "text/html", "<!doctype html><title>typed</title><h1>typed</h1>");
	} else if (strcmp(path, "/first.html") == 0) {
		reply(a.c, "text/html", "<!doctype html><title>first</title><h1>first</h1>");
	} else {
		reply(a.c, "text/plain", "ok");
	}
	close(a.c);
	return NULL;
}

static void *wmain(void *arg)
{
	struct wsite *s = arg;
	while (!s->stop) {
		int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		struct conn_arg *a = malloc(sizeof(*a));
		*a = (struct conn_arg){s, c};
		pthread_t t;
		if (pthread_create(&t, NULL, wconn, a) == 0)
			pthread_detach(t);
		else {
			close(c);
			free(a);
		}
	}
	return NULL;
}

static void wsite_start(struct wsite *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert(s->fd >= 0 && bind(s->fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  listen(s->fd, 64) == 0, "site: %s", strerror(errno));
	socklen_t len = sizeof(a);
	getsockname(s->fd, (struct sockaddr *)&a, &len);
	s->port = ntohs(a.sin_port);
	struct timeval tv = {0, 200000};
	setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pthread_create(&s->th, NULL, wmain, s);
}

static void wsite_stop(struct wsite *s)
{
	if (s->fd <= 0)
		return;
	s->stop = true;
	pthread_join(s->th, NULL);
	close(s->fd);
	s->fd = -1;
	/* Connection threads end within their read timeouts; the log stays. */
	usleep(500000);
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n; i++)
		free(s->log[i]);
	s->n = 0;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the gateway ------------------------------------------------------------- */

static struct dg_server srv;
static char *policy_path;

static void setup(void)
{
	wsite_start(&denied);
	wsite_start(&site);
	int ap = site.port, dp = denied.port;
	char policy[2048];
	snprintf(policy, sizeof(policy),
		 "{\"version\": 1, \"default\": \"deny\",\n"
		 " \"actions\": {\"allow\": [\"screenshot\", \"navigate\", \"wait\", \"key\", \"type\","
		 " \"click\"]},\n"
		 " \"urls\": {\"allow\": [\"http://localhost:%d/**\"],\n"
		 "          \"ask\": [\"http://localhost:%d/ask/**\"],\n"
		 "          \"deny\": [\"http://localhost:%d/secret/**\"]},\n"
		 " \"regions\": [{\"name\": \"typed-only\", \"rect\": [0, 150, 1280, 600],\n"
		 "   \"url\": \"http://localhost:%d/typed/**\", \"actions\": [\"click\"],\n"
		 "   \"verdict\": \"deny\", \"reason\": \"no clicks on the typed page\"}],\n"
		 " \"egress\": {\"allow\": [\"localhost:%d\", \"denied.test:%d\"]}}\n",
		 ap, ap, ap, ap, ap, dp);
	policy_path = dg_test_write_tmp("policy-websocket.json", policy);
	char extra[1024];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", policy_path);
	char err[1024];
	int rc = dg_test_serve_two_sites(&srv, extra, ap, dp, 30, err, sizeof(err));
	cr_assert_eq(rc, 0, "%s", err);
}

static void teardown(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
	wsite_stop(&site);
	wsite_stop(&denied);
	if (policy_path)
		dg_test_rm_tmp(policy_path);
}

TestSuite(policy_websocket, .init = setup, .fini = teardown, .timeout = 400);

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

static json_t *act(struct dg_ws *ws, const char *action)
{
	cr_assert_eq(dg_ws_send_text(ws, action), 0);
	json_t *j = recv_json(ws, T_ACT);
	const char *type = json_string_value(json_object_get(j, "type"));
	cr_assert_str_eq(type ? type : "", "result", "%s: %s", action, json_dumps(j, 0));
	return j;
}

static void act_ok(struct dg_ws *ws, const char *action)
{
	json_t *r = act(ws, action);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, json_dumps(r, 0));
	json_decref(r);
}

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

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

static void navigate(struct dg_ws *ws, const char *path)
{
	char a[512];
	snprintf(a, sizeof(a), "{\"type\":\"navigate\",\"url\":\"http://localhost:%d%s\"}", site.port,
		 path);
	act_ok(ws, a);
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

/* The session's recorded events (events.jsonl, appended as they happen). */
static json_t *recorded(const char *id)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/rec/%s/events.jsonl", srv.dir, id);
	json_t *list = json_array();
	FILE *f = fopen(path, "r");
	if (!f)
		return list;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *j = json_loads(line, 0, NULL);
		if (j)
			json_array_append_new(list, j);
	}
	free(line);
	fclose(f);
	return list;
}

/* The recorded browser decision about url, or NULL (borrowed from list). */
static json_t *decision_for(json_t *list, const char *url)
{
	size_t i;
	json_t *ev;
	json_array_foreach(list, i, ev) {
		if (strcmp(str(ev, "type"), "decision") == 0 && strcmp(str(ev, "layer"), "browser") == 0 &&
		    strcmp(str(ev, "url"), url) == 0)
			return ev;
	}
	return NULL;
}

/* ---- WebSockets ---------------------------------------------------------------- */

Test(policy_websocket, every_context_is_decided_by_url)
{
	char id[64];
	struct dg_ws *ws = open_session(id, sizeof(id));
	navigate(ws, "/ws.html");
	static const char *const ctxs[] = {"page", "fresh", "dedicated", "shared", "service"};
	const int n_ctx = (int)(sizeof(ctxs) / sizeof(ctxs[0]));
	/* Every context reports its three attempts (the site logs the reports). */
	char want[160];
	bool done = false;
	for (int round = 0; round < 60 && !done; round++) {
		act_ok(ws, "{\"type\":\"wait\",\"ms\":250}");
		done = true;
		for (int i = 0; i < n_ctx && done; i++) {
			const char *kinds[] = {"ok", "secret", "ask"};
			for (int k = 0; k < 3 && done; k++) {
				snprintf(want, sizeof(want), "GET /report/%s/%s/", ctxs[i], kinds[k]);
				done = saw(&site, want);
			}
		}
	}
	char *lines = all_lines(&site);
	cr_assert(done, "not every context reported (last missing %s); the site saw: %s", want, lines);
	for (int i = 0; i < n_ctx; i++) {
		/* The allowed path worked: the site echoed the context's message. */
		snprintf(want, sizeof(want), "GET /report/%s/ok/echo-%s ", ctxs[i], ctxs[i]);
		cr_assert(saw(&site, want), "%s: the allowed WebSocket did not echo: %s", ctxs[i], lines);
		snprintf(want, sizeof(want), "GET /ok/%s ", ctxs[i]);
		cr_assert(saw(&site, want), "%s: no handshake for the allowed path: %s", ctxs[i], lines);
		/* The denied and "ask" paths failed in the page... */
		snprintf(want, sizeof(want), "GET /report/%s/secret/error ", ctxs[i]);
		cr_assert(saw(&site, want), "%s: the denied WebSocket did not fail: %s", ctxs[i], lines);
		snprintf(want, sizeof(want), "GET /report/%s/ask/error ", ctxs[i]);
		cr_assert(saw(&site, want), "%s: the ask WebSocket did not fail: %s", ctxs[i], lines);
	}
	snprintf(want, sizeof(want), "GET /report/tls/wss/error ");
	for (int i = 0; i < 20 && !saw(&site, want); i++)
		act_ok(ws, "{\"type\":\"wait\",\"ms\":250}");
	cr_assert(saw(&site, want), "the wss:// WebSocket did not fail: %s", lines);
	/* ...and never reached the site (whose every request is a GET). */
	cr_assert(!saw(&site, "GET /secret/"), "a denied handshake reached the site: %s", lines);
	cr_assert(!saw(&site, "GET /ask/"), "an ask handshake reached the site: %s", lines);
	pthread_mutex_lock(&site.mu);
	for (int i = 0; i < site.n; i++)
		cr_assert(strncmp(site.log[i], "GET /", 5) == 0, "the site got \"%s\"", site.log[i]);
	pthread_mutex_unlock(&site.mu);
	free(lines);
	lines = all_lines(&denied);
	cr_assert_eq(count(&denied), 0, "the denied site saw %d requests: %s", count(&denied), lines);
	free(lines);

	/* Recorded as browser decisions, with the ws:// URL. */
	json_t *list = recorded(id);
	char url[256], rule[160];
	snprintf(url, sizeof(url), "ws://localhost:%d/secret/page/x?leak=1", site.port);
	json_t *d = decision_for(list, url);
	cr_assert(d, "no recorded decision for %s: %s", url, json_dumps(list, 0));
	cr_assert_str_eq(str(d, "verdict"), "deny");
	snprintf(rule, sizeof(rule), "urls.deny[0] http://localhost:%d/secret/**", site.port);
	cr_assert_str_eq(str(d, "rule"), rule);
	cr_assert_str_eq(str(d, "resource"), "WebSocket");
	snprintf(url, sizeof(url), "ws://localhost:%d/ask/shared", site.port);
	d = decision_for(list, url);
	cr_assert(d, "no recorded decision for %s", url);
	cr_assert_str_eq(str(d, "verdict"), "deny");
	snprintf(rule, sizeof(rule), "urls.ask[0] http://localhost:%d/ask/**", site.port);
	cr_assert_str_eq(str(d, "rule"), rule);
	snprintf(url, sizeof(url), "ws://localhost:%d/ok/service", site.port);
	d = decision_for(list, url);
	cr_assert(d, "no recorded decision for %s", url);
	cr_assert_str_eq(str(d, "verdict"), "allow");
	char origin[128];
	snprintf(origin, sizeof(origin), "wss://localhost:%d", site.port);
	size_t k;
	json_t *ev;
	d = NULL;
	json_array_foreach(list, k, ev) {
		if (strcmp(str(ev, "origin"), origin) == 0)
			d = ev;
	}
	cr_assert(d, "no recorded decision for %s", origin);
	cr_assert_str_eq(str(d, "verdict"), "deny");
	cr_assert_str_eq(str(d, "layer"), "browser");
	snprintf(url, sizeof(url), "ws://denied.test:%d/elsewhere", denied.port);
	d = decision_for(list, url);
	cr_assert(d, "no recorded decision for %s", url);
	cr_assert_str_eq(str(d, "rule"), "default");
	json_decref(list);
	/* Counted with the browser's requests: 5 contexts x (denied + ask), and
	 * the denied site; the page's own requests were all allowed. */
	unsigned long denials = metric("deskgate_browser_requests_total{verdict=\"deny\"} ");
	cr_assert_geq(denials, 11, "%lu browser denials counted", denials);
	dg_ws_close(ws);
}

/* ---- navigations the browser starts ---------------------------------------------- */

/* Types url into the omnibox and presses keys (alt+Return, shift+Return). */
static json_t *omnibox(struct dg_ws *ws, const char *url, const char *keys)
{
	act_ok(ws, "{\"type\":\"key\",\"keys\":\"ctrl+l\"}");
	char a[512];
	snprintf(a, sizeof(a), "{\"type\":\"type\",\"text\":\"%s\"}", url);
	act_ok(ws, a);
	snprintf(a, sizeof(a), "{\"type\":\"key\",\"keys\":\"%s\"}", keys);
	return act(ws, a);
}

Test(policy_websocket, omnibox_new_tabs_are_held_and_followed)
{
	char id[64], url[256];
	struct dg_ws *ws = open_session(id, sizeof(id));
	navigate(ws, "/first.html");
	/* A denied URL into a new tab: nothing reaches a site. */
	snprintf(url, sizeof(url), "http://localhost:%d/secret/omni-tab.html", site.port);
	json_decref(omnibox(ws, url, "alt+Return"));
	act_ok(ws, "{\"type\":\"wait\",\"ms\":1000}");
	char *lines = all_lines(&site);
	cr_assert(!saw(&site, "GET /secret/"), "alt+Return reached the site: %s", lines);
	free(lines);
	snprintf(url, sizeof(url), "http://denied.test:%d/omni.html", denied.port);
	json_decref(omnibox(ws, url, "alt+Return"));
	act_ok(ws, "{\"type\":\"wait\",\"ms\":1000}");
	cr_assert_eq(count(&denied), 0, "the denied site saw a request");

	/* An allowed URL into a new tab: the gateway follows it. */
	char typed[256];
	snprintf(typed, sizeof(typed), "http://localhost:%d/typed/page.html", site.port);
	json_t *r = omnibox(ws, typed, "alt+Return");
	char last[512];
	snprintf(last, sizeof(last), "%s", str(r, "url"));
	json_decref(r);
	for (int i = 0; i < 40 && strcmp(last, typed) != 0; i++) {
		r = act(ws, "{\"type\":\"wait\",\"ms\":250}");
		snprintf(last, sizeof(last), "%s", str(r, "url"));
		json_decref(r);
	}
	cr_assert_str_eq(last, typed, "the gateway did not follow the new tab: it reports %s", last);
	cr_assert(saw(&site, "GET /typed/page.html "));
	/* The region scoped to the new tab's URL decides the next click. */
	r = act(ws, "{\"type\":\"click\",\"x\":640,\"y\":400}");
	cr_assert(!json_is_true(json_object_get(r, "ok")), "the click was performed: %s",
		  json_dumps(r, 0));
	cr_assert_str_eq(str(r, "verdict"), "deny");
	cr_assert_str_eq(str(r, "rule"), "regions[typed-only]");
	json_decref(r);
	/* ...and is recorded against it. */
	json_t *list = recorded(id);
	size_t i;
	json_t *ev, *click = NULL;
	json_array_foreach(list, i, ev) {
		json_t *a = json_object_get(ev, "action");
		if (strcmp(str(ev, "type"), "action") == 0 && strcmp(str(a, "type"), "click") == 0)
			click = ev;
	}
	cr_assert(click, "no recorded click");
	cr_assert_str_eq(str(click, "url"), typed);
	json_decref(list);
	/* Back to the first tab (ctrl+1): followed too, and the region no longer
	 * applies. */
	r = act(ws, "{\"type\":\"key\",\"keys\":\"ctrl+1\"}");
	snprintf(url, sizeof(url), "http://localhost:%d/first.html", site.port);
	cr_assert_str_eq(str(r, "url"), url, "after ctrl+1: %s", json_dumps(r, 0));
	json_decref(r);
	act_ok(ws, "{\"type\":\"click\",\"x\":640,\"y\":400}");
	/* A denied URL into a new window. */
	snprintf(url, sizeof(url), "http://localhost:%d/secret/omni-window.html", site.port);
	json_decref(omnibox(ws, url, "shift+Return"));
	act_ok(ws, "{\"type\":\"wait\",\"ms\":1000}");
	lines = all_lines(&site);
	cr_assert(!saw(&site, "GET /secret/"), "shift+Return reached the site: %s", lines);
	free(lines);
	dg_ws_close(ws);
	cr_assert(!saw(&site, "GET /secret/"));
	cr_assert_eq(count(&denied), 0);
}
