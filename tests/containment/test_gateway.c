/* `deskgate serve` end to end: a real server (gateway, spawner, workers,
 * jails with Xvnc, xterm and Chromium), real clients (HTTP over a socket, a
 * WebSocket client on the libwebsockets client API, the Python examples),
 * no mocks.
 *
 * Each test starts its own server with the limits it needs (a server starts
 * in a fraction of a second; the desktops are what cost time, and a test
 * creates only those it uses) and the fixture stops it: SIGTERM, a clean
 * exit, and nothing left of the jail slots it used. Browser tests prove
 * that inputs arrived through a page that writes what it received into its
 * title, which canonical results report.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actions/actions.h"
#include "desktop/spawner/spawner.h"
#include "dg_test.h"

#define AGENT2_TOKEN "second-agent-token-0123456789abcd"
#define TWO_AGENTS                                                                             \
	"\"tokens\": [{\"name\": \"agent-two\", \"role\": \"agent\", \"token\": \"" AGENT2_TOKEN \
	"\"}]"
#define T_ACT 60.0   /* seconds one action may take, at worst (ASan, a busy machine) */
#define T_CREATE 90.0 /* seconds a session creation may take */

/* ---- the server fixture ------------------------------------------------- */

static struct dg_server srv;
static uint32_t used_slots[256];
static int n_used_slots;

/* Remembers the jail slots of the server's sessions, to check afterwards
 * that nothing of them is left. */
static void note_slots(void)
{
	if (srv.pid <= 0)
		return;
	uint32_t s[256];
	int n = dg_test_slots_under(srv.pid, s, 256);
	for (int i = 0; i < n; i++) {
		bool seen = false;
		for (int j = 0; j < n_used_slots; j++)
			seen |= used_slots[j] == s[i];
		if (!seen && n_used_slots < 256)
			used_slots[n_used_slots++] = s[i];
	}
}

static void serve(const char *extra)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_start(&srv, extra, 30, err, sizeof(err)), 0, "%s", err);
}

/* Waits (bounded) until nothing is left of slot; returns what is left. */
static int slot_gone(uint32_t slot, double timeout_s, char *what, size_t len)
{
	double end = dg_test_now() + timeout_s;
	int n;
	while ((n = dg_test_leftovers_slot(slot, srv.pid, what, len)) != 0 && dg_test_now() < end)
		usleep(20000);
	return n;
}

/* Stops the server and checks it stopped well: a clean exit, no sanitizer
 * report, the spawner gone with it, nothing left of the jail slots its
 * sessions used. Called at the end of each test (criterion does not count
 * assertions made in .fini). On a failure the temp dir (config, log) is
 * kept for a look. */
static void stop_server(void)
{
	if (srv.pid <= 0)
		return;
	note_slots();
	pid_t kids[8];
	int nk = dg_test_children(srv.pid, kids, 8); /* the spawner */
	double t0 = dg_test_now();
	int st = dg_test_serve_stop(&srv, 30, true);
	double stop_s = dg_test_now() - t0;
	char *log = dg_test_serve_log(&srv);
	size_t l = strlen(log);
	const char *tail = l > 3000 ? log + l - 3000 : log;
	bool clean = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	bool said = strstr(log, "deskgate: stopped") != NULL;
	char what[4096] = "";
	int left = 0;
	for (int i = 0; i < n_used_slots; i++) {
		char w[1024];
		int n = slot_gone(used_slots[i], 5, w, sizeof(w));
		if (n) {
			left += n;
			size_t wl = strlen(what);
			snprintf(what + wl, sizeof(what) - wl, "slot %u: %s", used_slots[i], w);
		}
	}
	int alive = 0;
	for (int i = 0; i < nk; i++) {
		char state[64];
		double end = dg_test_now() + 5;
		while (dg_test_proc_status(kids[i], "State", state, sizeof(state)) == 0 &&
		       state[0] != 'Z' && dg_test_now() < end)
			usleep(10000);
		alive += dg_test_proc_status(kids[i], "State", state, sizeof(state)) == 0 &&
			 state[0] != 'Z';
	}
	cr_assert(clean, "deskgate serve did not exit cleanly (status %d); log:\n%s", st, tail);
	cr_assert(said, "no 'deskgate: stopped' in the log:\n%s", tail);
	/* With sanitizers, the spawner's and the workers' reports land here too. */
	const char *san = strstr(log, "Sanitizer");
	cr_assert_null(san, "a sanitizer report in the server's log:\n%.3000s",
		       san ? (san - log > 200 ? san - 200 : log) : "");
	cr_assert_eq(alive, 0, "the spawner outlived the gateway");
	cr_assert_eq(left, 0, "left behind: %s\nlog:\n%s", what, tail);
	cr_log_info("the server stopped in %.2f s; nothing left of the %d jail slots it used",
		    stop_s, n_used_slots);
	free(log);
	dg_test_serve_stop(&srv, 1, false); /* removes the temp dir */
}

static void fixture_init(void)
{
	memset(&srv, 0, sizeof(srv));
	srv.pid = -1;
	n_used_slots = 0;
}

/* After a failed test: stop the server anyway (its checks no longer count)
 * and keep its temp dir for a look. */
static void fixture_fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, true);
}

TestSuite(gateway, .init = fixture_init, .fini = fixture_fini, .timeout = 240);

/* ---- HTTP --------------------------------------------------------------- */

/* METHOD PATH, asserting the status; returns the JSON body (NULL if not JSON). */
static json_t *http(const char *method, const char *path, const char *token, const char *body,
		    int want)
{
	struct dg_http r;
	int e = dg_test_http(srv.port, method, path, token, body, T_CREATE, &r);
	cr_assert_eq(e, 0, "%s %s: no response", method, path);
	cr_assert_eq(r.status, want, "%s %s: status %d, want %d: %s", method, path, r.status, want,
		     r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	return j;
}

/* An HTTP error: the status, and a JSON body {"error":{"code","message"}}. */
static void http_error(const char *method, const char *path, const char *token,
		       const char *body, int want, const char *code)
{
	json_t *j = http(method, path, token, body, want);
	cr_assert(j, "%s %s: the %d error is not JSON", method, path, want);
	json_t *e = json_object_get(j, "error");
	const char *c = json_string_value(json_object_get(e, "code"));
	const char *m = json_string_value(json_object_get(e, "message"));
	cr_assert(c && m && m[0], "%s %s: no error code and message", method, path);
	if (code)
		cr_assert_str_eq(c, code, "%s %s: code %s (%s)", method, path, c, m);
	json_decref(j);
}

struct sess {
	uint32_t slot;   /* its jail slot */
	char id[64];
	char token[128]; /* the session token */
	char ws_path[128];
	char watch_path[128];
	json_t *j;
};

/* POST /v1/sessions with body; the session's JSON is kept in s->j. */
static void create(struct sess *s, const char *token, const char *body)
{
	static struct dg_test_procs before;
	dg_test_procs_under(srv.pid, &before);
	json_t *j = http("POST", "/v1/sessions", token, body, 201);
	char why[256];
	cr_assert_eq(dg_test_new_slot(srv.pid, &before, 3, &s->slot, why, sizeof(why)), 0, "%s", why);
	cr_assert(j, "the created session is not JSON");
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *tok = json_string_value(json_object_get(j, "session_token"));
	const char *ws = json_string_value(json_object_get(j, "ws_url"));
	const char *watch = json_string_value(json_object_get(j, "watch_url"));
	cr_assert(id && tok && ws && watch, "id, session_token, ws_url, watch_url");
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->token, sizeof(s->token), "%s", tok);
	snprintf(s->ws_path, sizeof(s->ws_path), "/v1/sessions/%s/ws", id);
	snprintf(s->watch_path, sizeof(s->watch_path), "/v1/sessions/%s/watch", id);
	char want[256];
	snprintf(want, sizeof(want), "ws://127.0.0.1:%d%s", srv.port, s->ws_path);
	cr_assert_str_eq(ws, want);
	snprintf(want, sizeof(want), "ws://127.0.0.1:%d%s", srv.port, s->watch_path);
	cr_assert_str_eq(watch, want);
	s->j = j;
	note_slots();
}

/* Nothing is left of an ended session: no process of its jail or worker
 * uid, no cgroup. */
static void assert_gone(const struct sess *s)
{
	char what[2048];
	int n = slot_gone(s->slot, 10, what, sizeof(what));
	if (n) {
		char *log = dg_test_serve_log(&srv);
		cr_log_error("server log:\n%s", log);
		free(log);
	}
	cr_assert_eq(n, 0, "session %s (slot %u) left: %s", s->id, s->slot, what);
}

/* ---- WebSocket ------------------------------------------------------------ */

static struct dg_ws *ws_open(const char *path, const char *bearer, const char *subprotocols,
			     int want_status)
{
	char err[256];
	int status;
	struct dg_ws *ws = dg_ws_connect(srv.port, path, bearer, subprotocols, 30, &status, err,
					 sizeof(err));
	if (want_status == 101)
		cr_assert(ws, "connect %s: status %d: %s", path, status, err);
	else
		cr_assert(!ws && status == want_status, "connect %s: status %d (want %d): %s", path,
			  status, want_status, err);
	return ws;
}

/* The next text message as JSON. Without events, an event or decision
 * fails the test: an agent socket that asked for none carries answers only. */
static json_t *recv_json(struct dg_ws *ws, double timeout_s, bool events)
{
	double end = dg_test_now() + timeout_s;
	for (;;) {
		struct dg_ws_msg m;
		double left = end - dg_test_now();
		int r = dg_ws_recv(ws, left > 0 ? left : 0, &m);
		cr_assert_eq(r, 1, "%s", r == 0 ? "no message in time" : "the connection closed");
		cr_assert(!m.binary, "a binary message where JSON was expected (%zu bytes)", m.len);
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		cr_assert(j, "not JSON: %.200s", m.data);
		dg_ws_msg_free(&m);
		if (!events)
			DG_TEST_NO_STRAY_EVENT(j);
		return j;
	}
}

/* An agent connection with the subprotocol-carried token; reads the hello. */
static struct dg_ws *agent(const struct sess *s, const char *token)
{
	char proto[300];
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", token);
	struct dg_ws *ws = ws_open(s->ws_path, NULL, proto, 101);
	json_t *hello = recv_json(ws, 10, false);
	cr_assert_str_eq(json_string_value(json_object_get(hello, "type")), "hello");
	cr_assert_str_eq(json_string_value(json_object_get(hello, "id")), s->id);
	json_decref(hello);
	return ws;
}

/* Sends text; the answer's JSON, and its PNG (binary frame) when it
 * announces one ("frame"). */
static json_t *send_recv(struct dg_ws *ws, const char *text, unsigned char **png, size_t *len)
{
	cr_assert_eq(dg_ws_send_text(ws, text), 0, "send: the connection closed");
	json_t *j = recv_json(ws, T_ACT, false);
	if (png)
		*png = NULL;
	if (len)
		*len = 0;
	if (json_object_get(j, "frame")) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(ws, T_ACT, &m), 1, "no frame after the result");
		cr_assert(m.binary, "the frame is not a binary message");
		cr_assert_eq(json_integer_value(json_object_get(json_object_get(j, "frame"), "bytes")),
			     (json_int_t)m.len);
		if (png) {
			*png = m.data;
			*len = m.len;
		} else {
			dg_ws_msg_free(&m);
		}
	}
	return j;
}

/* A canonical action that must succeed. */
static json_t *act_ok(struct dg_ws *ws, const char *action)
{
	json_t *j = send_recv(ws, action, NULL, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "result", "%s", action);
	cr_assert(json_is_true(json_object_get(j, "ok")), "%s failed: %s", action,
		  json_string_value(json_object_get(j, "error")));
	return j;
}

static void act_ok0(struct dg_ws *ws, const char *action)
{
	json_decref(act_ok(ws, action));
}

/* A message answered by a socket error {"type":"error","error":{code,message}}. */
static void ws_error(struct dg_ws *ws, const void *data, size_t len, bool binary,
		     const char *code)
{
	cr_assert_eq(dg_ws_send(ws, binary, data, len), 0);
	json_t *j = recv_json(ws, T_ACT, false);
	char *dump = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "error", "%.300s", dump);
	json_t *e = json_object_get(j, "error");
	const char *c = json_string_value(json_object_get(e, "code"));
	const char *m = json_string_value(json_object_get(e, "message"));
	cr_assert(c && m && m[0], "no code and message: %.300s", dump);
	if (code)
		cr_assert_str_eq(c, code, "%.300s", dump);
	free(dump);
	json_decref(j);
}

/* ---- the browser test page -------------------------------------------------
 *
 * Every input it receives is written into its title with a sequence number
 * ("click:640,400,b0,d1#3"), in SCREEN coordinates (the window is at 0,0, so
 * they are desktop pixels and no toolbar height is needed).
 */
static const char page[] =
	"data:text/html,<!doctype html><html><head><title>ready</title><style>"
	"html,body{margin:0;height:100%;background:%23c00}"
	"textarea{position:absolute;left:100px;top:400px;width:300px;height:150px}"
	"</style></head><body><textarea id=t></textarea><script>"
	"var n=0,drag=null,dragged=false;"
	"function T(s){document.title=s+'%23'+(++n)}"
	"function M(e){return(e.ctrlKey?',ctrl':'')+(e.shiftKey?',shift':'')+(e.altKey?',alt':'')}"
	"document.addEventListener('click',e=>{if(dragged){dragged=false;return}if(e.target.id!='t')T('click:'+e.screenX+','+e.screenY+',b'+e.button+',d'+e.detail+M(e))});"
	"document.addEventListener('dblclick',e=>T('dblclick:'+e.screenX+','+e.screenY));"
	"document.addEventListener('mousedown',e=>{drag=[e.screenX,e.screenY]});"
	"document.addEventListener('mouseup',e=>{if(drag&&(drag[0]!=e.screenX||drag[1]!=e.screenY)){dragged=true;T('drag:'+drag+'-'+e.screenX+','+e.screenY)}drag=null});"
	"document.addEventListener('wheel',e=>T('wheel:'+Math.sign(e.deltaY)+','+Math.sign(e.deltaX)));"
	"document.addEventListener('keydown',e=>{if(e.target.id!='t')T('key:'+(e.ctrlKey?'ctrl+':'')+(e.shiftKey?'shift+':'')+(e.altKey?'alt+':'')+e.key)});"
	"document.getElementById('t').addEventListener('input',e=>T('text:'+e.target.value));"
	"</script></body></html>";

static const char *title_of(json_t *res)
{
	const char *t = json_string_value(json_object_get(res, "title"));
	return t ? t : "";
}

/* The page's title now (through a canonical cursor_position). */
static char *title_now(struct dg_ws *ws)
{
	json_t *j = act_ok(ws, "{\"type\":\"cursor_position\"}");
	char *t = strdup(title_of(j));
	json_decref(j);
	return t;
}

/* Waits (bounded) until the title is not `old` and starts with prefix;
 * returns it without the "#N" suffix. */
static char *wait_title(struct dg_ws *ws, const char *old, const char *prefix)
{
	char *last = NULL;
	for (int i = 0; i < 60; i++) {
		free(last);
		last = title_now(ws);
		if ((!old || strcmp(last, old) != 0) && strncmp(last, prefix, strlen(prefix)) == 0) {
			char *hash = strrchr(last, '#');
			if (hash)
				*hash = '\0';
			return last;
		}
		usleep(50000);
	}
	cr_assert_fail("the title never became \"%s...\"; last: \"%s\"", prefix, last);
	return last;
}

static void navigate_test_page(struct dg_ws *ws)
{
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", page);
	char *text = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	json_t *res = act_ok(ws, text);
	free(text);
	const char *url = json_string_value(json_object_get(res, "url"));
	cr_assert(url && strncmp(url, "data:text/html", 14) == 0, "url reported: %s", url);
	json_decref(res);
	free(wait_title(ws, NULL, "ready"));
}

/* ---- the gateway holds no privileges ----------------------------------------- */

Test(gateway, the_gateway_process_has_no_capabilities)
{
	serve("");
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	char v[128];
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		cr_assert_eq(dg_test_proc_status(srv.pid, caps[i], v, sizeof(v)), 0, "%s", caps[i]);
		cr_assert_str_eq(v, "0000000000000000", "the gateway's %s is %s", caps[i], v);
	}
	unsigned r, e, sv, fs;
	cr_assert_eq(dg_test_proc_status(srv.pid, "Uid", v, sizeof(v)), 0);
	cr_assert_eq(sscanf(v, "%u %u %u %u", &r, &e, &sv, &fs), 4);
	unsigned gw_id = dg_test_serve_uid(&srv);
	cr_assert(r == gw_id && e == r && sv == r && fs == r,
		  "the gateway's uids are not its instance's (%u): %s", gw_id, v);
	cr_assert_eq(dg_test_proc_status(srv.pid, "Gid", v, sizeof(v)), 0);
	cr_assert_eq(sscanf(v, "%u %u %u %u", &r, &e, &sv, &fs), 4);
	cr_assert(r == gw_id && e == r && sv == r && fs == r,
		  "the gateway's gids are not its instance's (%u): %s", gw_id, v);
	cr_assert_eq(dg_test_proc_status(srv.pid, "Groups", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "", "supplementary groups remain: %s", v);
	cr_assert_eq(dg_test_proc_status(srv.pid, "NoNewPrivs", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1");

	/* Its one child: the spawner, which keeps root by design (it makes
	 * namespaces, cgroups and uid maps). The egress proxy, on its own
	 * unprivileged uid, the jails and the workers are the spawner's
	 * children, never the gateway's. */
	pid_t kids[8];
	int nk = dg_test_children(srv.pid, kids, 8);
	cr_assert_eq(nk, 1, "the gateway has %d children", nk);
	pid_t spawner = -1, egress = -1;
	cr_assert_eq(dg_test_proc_status(kids[0], "Name", v, sizeof(v)), 0);
	if (strcmp(v, "deskgate-spawn") == 0)
		spawner = kids[0];
	else
		cr_assert_fail("an unexpected child of the gateway: %s", v);
	pid_t skids[16];
	int ns = dg_test_children(spawner, skids, 16);
	for (int i = 0; i < ns; i++)
		if (dg_test_proc_status(skids[i], "Name", v, sizeof(v)) == 0 &&
		    strcmp(v, "deskgate-egress") == 0)
			egress = skids[i];
	cr_assert(spawner > 0 && egress > 0, "the spawner and the egress proxy");
	cr_assert_eq(dg_test_proc_status(spawner, "Uid", v, sizeof(v)), 0);
	cr_assert_eq(sscanf(v, "%u %u", &r, &e), 2);
	cr_assert(r == 0 && e == 0, "the spawner is not root: %s", v);
	cr_assert_eq(dg_test_proc_status(egress, "Uid", v, sizeof(v)), 0);
	cr_assert_eq(sscanf(v, "%u %u %u %u", &r, &e, &sv, &fs), 4);
	cr_assert(r == gw_id + 1 && e == r && sv == r && fs == r,
		  "the egress proxy's uids: %s", v);
	cr_assert_eq(dg_test_proc_status(egress, "CapEff", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "0000000000000000", "the egress proxy has capabilities");
	cr_assert_eq(dg_test_proc_status(egress, "CapPrm", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "0000000000000000", "the egress proxy has capabilities");
	kids[0] = spawner;
	pid_t grand[16];
	int ng = dg_test_children(kids[0], grand, 16);
	cr_assert_geq(ng, 2, "the spawner should run the session's jail and worker");
	json_decref(http("DELETE", "/v1/sessions/", DG_TEST_AGENT_TOKEN, NULL, 404));
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
	json_decref(s.j);
	stop_server();
}

/* ---- the event loop: one epoll set, each session's descriptors in it --------- */

/* The descriptors registered in pid's epoll set, from the one eventpoll
 * descriptor's fdinfo (a "tfd:" line each); -1 when it has none or more
 * than one. */
static int epoll_watched(pid_t pid)
{
	char fds[16384], *save = NULL;
	if (dg_test_proc_fds(pid, fds, sizeof(fds)) < 0)
		return -1;
	int epfd = -1, n_ep = 0;
	for (char *tok = strtok_r(fds, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		int fd;
		char target[128];
		if (sscanf(tok, " %d -> %127s", &fd, target) == 2 &&
		    strcmp(target, "anon_inode:[eventpoll]") == 0) {
			epfd = fd;
			n_ep++;
		}
	}
	if (n_ep != 1)
		return -1;
	char info[64], line[256];
	snprintf(info, sizeof(info), "/proc/%d/fdinfo/%d", (int)pid, epfd);
	FILE *f = fopen(info, "r");
	if (!f)
		return -1;
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strncmp(line, "tfd:", 4) == 0;
	fclose(f);
	return n;
}

/* The gateway waits on one epoll set, not on poll() over every
 * descriptor (whose cost grew with the sessions: docs/benchmarks.md, "100
 * sessions"), and a session's descriptors join it and leave it with the
 * session. */
Test(gateway, the_event_loop_watches_each_session_through_one_epoll_set)
{
	serve("");
	int idle = epoll_watched(srv.pid);
	cr_assert_geq(idle, 3, "the gateway's epoll set: %d descriptors (-1: no single set); "
		      "the listener, the spawner's and the egress proxy's channels at least", idle);
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	int busy = epoll_watched(srv.pid);
	cr_assert_gt(busy, idle, "a session's worker channel is not in the epoll set (%d, idle %d)",
		     busy, idle);
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
	json_decref(s.j);
	int after = -1;
	for (int i = 0; i < 100 && (after = epoll_watched(srv.pid)) != idle; i++)
		usleep(50 * 1000);
	cr_assert_eq(after, idle, "the ended session's descriptors stay in the epoll set (%d, idle %d)",
		     after, idle);
	stop_server();
}

/* ---- TLS: with a certificate configured the server speaks only HTTPS ------- */

Test(gateway, tls_when_a_certificate_is_configured)
{
	char dir[] = "/tmp/dg-tls-XXXXXX";
	cr_assert(mkdtemp(dir));
	char key[128], cert[128], extra[512], url[128];
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	struct dg_run r;
	const char *gen[] = {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
			     "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1", NULL};
	cr_assert_eq(dg_test_run(gen, NULL, NULL, 0, 60, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "openssl: %s", r.err);
	dg_run_free(&r);
	snprintf(extra, sizeof(extra), "\"tls\": {\"cert\": \"%s\", \"key\": \"%s\"}", cert, key);
	serve(extra);
	char *log = dg_test_serve_log(&srv);
	cr_assert(strstr(log, "https://") && strstr(log, "wss://"), "URLs are not https/wss: %s", log);
	free(log);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", srv.port);
	const char *tls[] = {"/usr/bin/curl", "-sS", "--cacert", cert, url, NULL};
	cr_assert_eq(dg_test_run(tls, NULL, NULL, 0, 30, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "curl over TLS: %s", r.err);
	cr_assert(strstr(r.out, "\"status\":\"ok\""), "healthz over TLS: %s", r.out);
	dg_run_free(&r);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", srv.port);
	const char *plain[] = {"/usr/bin/curl", "-sS", "--max-time", "5", url, NULL};
	cr_assert_eq(dg_test_run(plain, NULL, NULL, 0, 30, -1, &r), 0);
	cr_assert_neq(r.exit_code, 0, "plain HTTP was answered: %s", r.out);
	cr_assert_null(strstr(r.out, "\"status\":\"ok\""));
	dg_run_free(&r);
	stop_server();
	unlink(key);
	unlink(cert);
	rmdir(dir);
}

/* ---- HTTP: auth, validation, limits, ownership, metrics --------------------- */

Test(gateway, http_api)
{
	serve(TWO_AGENTS ", \"limits\": {\"max_sessions\": 2}");
	/* /healthz needs no token. */
	json_t *j = http("GET", "/healthz", NULL, NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
	json_decref(j);
	/* Everything else does: none or a wrong one is 401, with a JSON error. */
	http_error("GET", "/v1/sessions", NULL, NULL, 401, "unauthorized");
	http_error("GET", "/v1/sessions", "wrong-token-0123456789abcdefghijk", NULL, 401,
		   "unauthorized");
	http_error("GET", "/metrics", NULL, NULL, 401, "unauthorized");
	j = http("GET", "/v1/sessions", DG_TEST_VIEWER_TOKEN, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(j, "sessions")), 0);
	json_decref(j);
	/* Viewers watch; they do not create. */
	http_error("POST", "/v1/sessions", DG_TEST_VIEWER_TOKEN, "{\"profile\":\"xterm\"}", 403,
		   "forbidden");
	/* Bodies are checked strictly. */
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":", 400, "bad_json");
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "[1,2]", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profil\":\"xterm\"}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"emacs\"}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
		   "{\"profile\":\"xterm\",\"size\":{\"width\":10,\"height\":10}}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
		   "{\"profile\":\"xterm\",\"size\":{\"width\":100000,\"height\":800}}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
		   "{\"profile\":\"xterm\",\"size\":{\"width\":\"1280\",\"height\":800}}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
		   "{\"profile\":\"xterm\",\"display\":{\"width\":1,\"height\":1}}", 400, NULL);
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
		   "{\"profile\":\"xterm\",\"policy\":\"no-such-policy\"}", 400, NULL);
	http_error("PUT", "/v1/sessions", DG_TEST_AGENT_TOKEN, NULL, 405, "method_not_allowed");
	http_error("GET", "/v1/nothing", DG_TEST_AGENT_TOKEN, NULL, 404, "not_found");

	/* Two sessions, one per agent: the limit. */
	struct sess a, b;
	create(&a, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\",\"size\":{\"width\":1024,\"height\":768}}");
	create(&b, AGENT2_TOKEN, "{\"profile\":\"xterm\"}");
	cr_assert_str_eq(json_string_value(json_object_get(a.j, "agent")), "env-agent");
	cr_assert_str_eq(json_string_value(json_object_get(b.j, "agent")), "agent-two");
	json_t *size = json_object_get(a.j, "size");
	cr_assert_eq(json_integer_value(json_array_get(size, 0)), 1024);
	cr_assert_eq(json_integer_value(json_array_get(size, 1)), 768);
	/* The third is refused with 429 and a JSON error... */
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 429,
		   "too_many_sessions");
	/* ...while the existing sessions keep working. The session token opens
	 * the session's own channel. */
	struct dg_ws *wa = agent(&a, a.token);
	struct dg_ws *wb = agent(&b, AGENT2_TOKEN);
	json_t *r = act_ok(wa, "{\"type\":\"screenshot\"}");
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(r, "frame"), "width")), 1024);
	json_decref(r);
	act_ok0(wb, "{\"type\":\"screenshot\"}");
	/* A session token opens only its own session. */
	char proto[300];
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", a.token);
	ws_open(b.ws_path, NULL, proto, 401);

	/* Each agent lists its own sessions; a viewer lists all. */
	j = http("GET", "/v1/sessions", DG_TEST_AGENT_TOKEN, NULL, 200);
	json_t *list = json_object_get(j, "sessions");
	cr_assert_eq(json_array_size(list), 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(list, 0), "id")), a.id);
	cr_assert_null(json_object_get(json_array_get(list, 0), "session_token"));
	json_decref(j);
	j = http("GET", "/v1/sessions", DG_TEST_VIEWER_TOKEN, NULL, 200);
	cr_assert_eq(json_array_size(json_object_get(j, "sessions")), 2);
	json_decref(j);

	/* Another agent's session does not exist for an agent: not listed, not
	 * readable, not deletable; it lives on. */
	char pa[128], pb[128];
	snprintf(pa, sizeof(pa), "/v1/sessions/%s", a.id);
	snprintf(pb, sizeof(pb), "/v1/sessions/%s", b.id);
	http_error("GET", pa, AGENT2_TOKEN, NULL, 404, "not_found");
	http_error("DELETE", pa, AGENT2_TOKEN, NULL, 404, "not_found");
	http_error("DELETE", pb, DG_TEST_AGENT_TOKEN, NULL, 404, "not_found");
	/* A viewer sees a session but may not end it. */
	http_error("DELETE", pa, DG_TEST_VIEWER_TOKEN, NULL, 403, "forbidden");
	j = http("GET", pa, DG_TEST_AGENT_TOKEN, NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "ready");
	json_decref(j);
	act_ok0(wa, "{\"type\":\"move\",\"x\":10,\"y\":10}");
	act_ok0(wb, "{\"type\":\"move\",\"x\":10,\"y\":10}");

	/* Metrics: viewer or admin, Prometheus text. */
	http_error("GET", "/metrics", DG_TEST_AGENT_TOKEN, NULL, 403, "forbidden");
	struct dg_http m;
	cr_assert_eq(dg_test_http(srv.port, "GET", "/metrics", DG_TEST_VIEWER_TOKEN, NULL, 10, &m), 0);
	cr_assert_eq(m.status, 200);
	cr_assert(strstr(m.head, "text/plain"), "%s", m.head);
	cr_assert(strstr(m.body, "\ndeskgate_sessions 2\n"), "%s", m.body);
	cr_assert(strstr(m.body, "deskgate_actions_total{type=\"screenshot\""), "%s", m.body);
	cr_assert(strstr(m.body, "deskgate_actions_total{type=\"move\""), "%s", m.body);
	cr_assert(strstr(m.body, "deskgate_action_seconds_count 4\n"), "%s", m.body);
	cr_assert(strstr(m.body, "deskgate_errors_total{kind=\"auth\"}"), "%s", m.body);
	dg_http_free(&m);
	cr_assert_eq(dg_test_http(srv.port, "GET", "/metrics", DG_TEST_ADMIN_TOKEN, NULL, 10, &m), 0);
	cr_assert_eq(m.status, 200);
	dg_http_free(&m);

	/* Ended by their owners (b's by an admin). */
	j = http("DELETE", pa, DG_TEST_AGENT_TOKEN, NULL, 200);
	cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "ended");
	json_decref(j);
	assert_gone(&a);
	json_decref(http("DELETE", pb, DG_TEST_ADMIN_TOKEN, NULL, 200));
	assert_gone(&b);
	http_error("GET", pa, DG_TEST_AGENT_TOKEN, NULL, 404, "not_found");
	j = http("GET", "/healthz", NULL, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(j, "sessions")), 0);
	json_decref(j);
	dg_ws_close(wa);
	dg_ws_close(wb);
	json_decref(a.j);
	json_decref(b.j);
	stop_server();
}

/* ---- the C client: Anthropic computer-use blocks ------------------------------ */

/* Checks an image content block: base64 of a PNG of w x h (0: any size);
 * returns its size in *gw, *gh. */
static void check_image(json_t *block, int w, int h, int *gw, int *gh)
{
	json_t *src = json_object_get(block, "source");
	cr_assert_str_eq(json_string_value(json_object_get(src, "type")), "base64");
	cr_assert_str_eq(json_string_value(json_object_get(src, "media_type")), "image/png");
	const char *data = json_string_value(json_object_get(src, "data"));
	cr_assert(data, "no image data");
	size_t len;
	unsigned char *png = dg_test_base64_decode(data, &len);
	cr_assert(png, "the image data is not base64");
	int pw, ph;
	cr_assert_eq(dg_test_png_size(png, len, &pw, &ph), 0, "the image is not a valid PNG");
	free(png);
	if (w)
		cr_assert(pw == w && ph == h, "image %dx%d, want %dx%d", pw, ph, w, h);
	if (gw)
		*gw = pw;
	if (gh)
		*gh = ph;
}

/* Sends a tool_use block (id NULL: the input alone) and checks the
 * tool_result: the id echoed, is_error as wanted, an image of w x h when w
 * (-1: no image). Returns the block's text ("" if none; caller frees). */
static char *anth(struct dg_ws *ws, const char *id, const char *input, bool want_error, int w,
		  int h)
{
	char *msg = NULL;
	if (id)
		cr_assert_geq(asprintf(&msg,
				       "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"computer\","
				       "\"input\":%s}",
				       id, input),
			      0);
	else
		msg = strdup(input);
	json_t *r = send_recv(ws, msg, NULL, NULL);
	char *dump = json_dumps(r, JSON_COMPACT);
	if (strlen(dump) > 400)
		strcpy(dump + 380, "...");
	cr_assert_str_eq(json_string_value(json_object_get(r, "type")), "tool_result", "%s: %s", msg,
			 dump);
	if (id)
		cr_assert_str_eq(json_string_value(json_object_get(r, "tool_use_id")), id, "%s", dump);
	else
		cr_assert_null(json_object_get(r, "tool_use_id"), "%s", dump);
	cr_assert_eq(json_is_true(json_object_get(r, "is_error")), want_error, "%s: %s", msg, dump);
	json_t *content = json_object_get(r, "content");
	cr_assert(json_is_array(content) && json_array_size(content) > 0, "%s", dump);
	char *text = strdup("");
	bool image = false;
	size_t i;
	json_t *b;
	json_array_foreach(content, i, b)
	{
		const char *t = json_string_value(json_object_get(b, "type"));
		if (t && strcmp(t, "image") == 0) {
			image = true;
			if (w >= 0)
				check_image(b, w, h, NULL, NULL);
		} else if (t && strcmp(t, "text") == 0) {
			free(text);
			text = strdup(json_string_value(json_object_get(b, "text")));
		} else {
			cr_assert_fail("unknown content block: %s", dump);
		}
	}
	if (w > 0)
		cr_assert(image, "%s: no image in %s", msg, dump);
	if (w < 0)
		cr_assert(!image, "%s: an image in %s", msg, dump);
	free(dump);
	free(msg);
	json_decref(r);
	return text;
}

static void anth0(struct dg_ws *ws, const char *id, const char *input, int w, int h)
{
	free(anth(ws, id, input, false, w, h));
}

/* An exec in the session; returns its "exec" object (stdout, exit_code...). */
static json_t *exec_in(struct dg_ws *ws, const char *argv_json, int timeout_ms)
{
	char msg[1024];
	if (timeout_ms)
		snprintf(msg, sizeof(msg), "{\"type\":\"exec\",\"argv\":%s,\"timeout_ms\":%d}",
			 argv_json, timeout_ms);
	else
		snprintf(msg, sizeof(msg), "{\"type\":\"exec\",\"argv\":%s}", argv_json);
	unsigned char *png;
	size_t len;
	json_t *r = send_recv(ws, msg, &png, &len);
	cr_assert(json_is_true(json_object_get(r, "ok")), "exec failed: %s",
		  json_string_value(json_object_get(r, "error")));
	cr_assert(png, "no screenshot after the exec");
	int w, h;
	cr_assert_eq(dg_test_png_size(png, len, &w, &h), 0);
	free(png);
	json_t *ex = json_incref(json_object_get(r, "exec"));
	cr_assert(ex, "no exec in the result");
	json_decref(r);
	return ex;
}

Test(gateway, c_client_anthropic_loop_xterm_and_browser)
{
	serve("");
	/* xterm, the model told of a 1024x640 display on a 1280x800 desktop */
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN,
	       "{\"profile\":\"xterm\",\"display\":{\"width\":1024,\"height\":640}}");
	struct dg_ws *ws = agent(&s, DG_TEST_AGENT_TOKEN);
	anth0(ws, "toolu_01", "{\"action\":\"screenshot\"}", 1024, 640);
	anth0(ws, "toolu_02", "{\"action\":\"left_click\",\"coordinate\":[512,320]}", 1024, 640);
	json_t *r = act_ok(ws, "{\"type\":\"cursor_position\"}");
	json_t *cur = json_object_get(r, "cursor");
	cr_assert(json_integer_value(json_array_get(cur, 0)) == 640 &&
		  json_integer_value(json_array_get(cur, 1)) == 400,
		  "model (512,320) should be desktop (640,400)");
	json_decref(r);
	anth0(ws, "toolu_03", "{\"action\":\"type\",\"text\":\"echo typed-$((6*7)) > /tmp/typed\"}",
	      1024, 640);
	anth0(ws, "toolu_04", "{\"action\":\"key\",\"text\":\"Return\"}", 1024, 640);
	anth0(ws, "toolu_05", "{\"action\":\"key\",\"text\":\"ctrl+l\"}", 1024, 640);
	anth0(ws, "toolu_06",
	      "{\"action\":\"scroll\",\"coordinate\":[512,320],\"scroll_direction\":\"down\","
	      "\"scroll_amount\":3}",
	      1024, 640);
	anth0(ws, "toolu_07",
	      "{\"action\":\"left_click_drag\",\"start_coordinate\":[100,100],\"coordinate\":[300,200]}",
	      1024, 640);
	/* zoom: the region, model coordinates, scaled up to the model's display */
	anth0(ws, "toolu_08", "{\"action\":\"zoom\",\"region\":[0,0,512,320]}", 1024, 640);
	char *t = anth(ws, "toolu_09", "{\"action\":\"cursor_position\"}", false, -1, 0);
	cr_assert_str_eq(t, "X=300,Y=200");
	free(t);
	/* the input alone: the same answer without tool_use_id */
	anth0(ws, NULL, "{\"action\":\"screenshot\"}", 1024, 640);
	/* coordinates are checked against the model's display */
	t = anth(ws, "toolu_10", "{\"action\":\"left_click\",\"coordinate\":[1024,10]}", true, 1024,
		 640);
	cr_assert(strstr(t, "off the display"), "%s", t);
	free(t);
	/* what was typed reached the shell in the xterm */
	json_t *ex = exec_in(ws, "[\"cat\",\"/tmp/typed\"]", 0);
	cr_assert_str_eq(json_string_value(json_object_get(ex, "stdout")), "typed-42\n");
	json_decref(ex);
	dg_ws_close(ws);
	json_decref(s.j);

	/* browser: every input shows in the test page's title */
	create(&s, DG_TEST_AGENT_TOKEN,
	       "{\"profile\":\"browser\",\"display\":{\"width\":1024,\"height\":640}}");
	ws = agent(&s, DG_TEST_AGENT_TOKEN);
	navigate_test_page(ws);
	char *old = title_now(ws);
	anth0(ws, "toolu_11", "{\"action\":\"screenshot\"}", 1024, 640);
	anth0(ws, "toolu_12", "{\"action\":\"left_click\",\"coordinate\":[512,320]}", 1024, 640);
	t = wait_title(ws, old, "click:");
	cr_assert_str_eq(t, "click:640,400,b0,d1", "model (512,320) must land at desktop (640,400)");
	free(t);
	free(old);
	old = title_now(ws);
	anth0(ws, "toolu_13", "{\"action\":\"double_click\",\"coordinate\":[256,160]}", 1024, 640);
	t = wait_title(ws, old, "dblclick:");
	cr_assert_str_eq(t, "dblclick:320,200");
	free(t);
	free(old);
	/* into the textarea (desktop x 100..400, below the toolbar from y 400) */
	old = title_now(ws);
	anth0(ws, "toolu_14", "{\"action\":\"left_click\",\"coordinate\":[200,440]}", 1024, 640);
	anth0(ws, "toolu_15", "{\"action\":\"type\",\"text\":\"hello from C \\u00e9t\\u00e9\"}", 1024,
	      640);
	/* The page sees the keys one by one: wait for the whole text. */
	t = wait_title(ws, old, "text:hello from C \xc3\xa9t\xc3\xa9");
	cr_assert_str_eq(t, "text:hello from C \xc3\xa9t\xc3\xa9");
	free(t);
	free(old);
	/* out of it, then a chord */
	anth0(ws, "toolu_16", "{\"action\":\"left_click\",\"coordinate\":[512,200]}", 1024, 640);
	old = title_now(ws);
	anth0(ws, "toolu_17", "{\"action\":\"key\",\"text\":\"ctrl+shift+k\"}", 1024, 640);
	t = wait_title(ws, old, "key:");
	cr_assert_str_eq(t, "key:ctrl+shift+K"); /* with Shift, the key's Shift level */
	free(t);
	free(old);
	old = title_now(ws);
	anth0(ws, "toolu_18",
	      "{\"action\":\"scroll\",\"coordinate\":[512,320],\"scroll_direction\":\"down\","
	      "\"scroll_amount\":3}",
	      1024, 640);
	t = wait_title(ws, old, "wheel:");
	cr_assert_str_eq(t, "wheel:1,0");
	free(t);
	free(old);
	old = title_now(ws);
	anth0(ws, "toolu_19",
	      "{\"action\":\"left_click_drag\",\"start_coordinate\":[400,200],\"coordinate\":[600,250]}",
	      1024, 640);
	t = wait_title(ws, old, "drag:");
	/* (400,200) -> (500,250); (600,250) -> (750,312.5) -> 313, halves up */
	cr_assert_str_eq(t, "drag:500,250-750,313");
	free(t);
	free(old);
	anth0(ws, "toolu_20", "{\"action\":\"zoom\",\"region\":[0,0,512,320]}", 1024, 640);
	t = anth(ws, "toolu_21", "{\"action\":\"cursor_position\"}", false, -1, 0);
	cr_assert_str_eq(t, "X=600,Y=250");
	free(t);
	/* a refused action changes nothing on the page */
	old = title_now(ws);
	t = anth(ws, "toolu_22", "{\"action\":\"key\",\"text\":\"ctrl+Retrun\"}", true, 1024, 640);
	cr_assert(strstr(t, "Retrun"), "%s", t);
	free(t);
	t = title_now(ws);
	cr_assert_str_eq(t, old, "something reached the page");
	free(t);
	free(old);
	dg_ws_close(ws);
	json_decref(s.j);
	stop_server();
}

/* ---- zoom at the model's display size (issue 16, point 6) ------------------- */

/* A checkerboard of 80-pixel red and blue squares. */
static const char pattern_page[] =
	"data:text/html,<!doctype html><title>pattern</title><style>html,body{margin:0;"
	"height:100%25;background:repeating-conic-gradient(%23f00 0 25%25,%2300f 0 50%25) "
	"0 0/160px 160px}</style>";

/* A canonical action's PNG, decoded; its size must be w x h. */
static unsigned char *act_rgb(struct dg_ws *ws, const char *action, int w, int h)
{
	unsigned char *png = NULL;
	size_t len = 0;
	json_t *j = send_recv(ws, action, &png, &len);
	cr_assert(json_is_true(json_object_get(j, "ok")), "%s failed: %s", action,
		  json_string_value(json_object_get(j, "error")));
	json_decref(j);
	cr_assert(png, "%s: no PNG", action);
	int gw = 0, gh = 0;
	unsigned char *rgb = dg_test_png_rgb(png, len, &gw, &gh);
	free(png);
	cr_assert(rgb, "%s: the PNG does not decode", action);
	cr_assert(gw == w && gh == h, "%s: %dx%d, want %dx%d", action, gw, gh, w, h);
	return rgb;
}

/* The pixel at (x, y) of a w-wide RGB image when its 5x5 neighbourhood is
 * one colour (within 8 per channel); -1 near a square's edge. */
static long flat_pixel(const unsigned char *rgb, int w, int h, int x, int y)
{
	if (x < 2 || y < 2 || x >= w - 2 || y >= h - 2)
		return -1;
	const unsigned char *c = rgb + ((size_t)y * w + x) * 3;
	for (int dy = -2; dy <= 2; dy++)
		for (int dx = -2; dx <= 2; dx++) {
			const unsigned char *p = rgb + ((size_t)(y + dy) * w + (x + dx)) * 3;
			for (int k = 0; k < 3; k++)
				if (abs(p[k] - c[k]) > 8)
					return -1;
		}
	return (long)c[0] << 16 | c[1] << 8 | c[2];
}

/* The zoom of the desktop region [x0, y0, x0 + rw, y0 + rh], zw x zh, shows
 * what the screenshot (sw x sh of the dw x dh desktop) shows there: sampled
 * every 20 desktop pixels where both are flat, the colours agree, and both
 * squares' colours are seen. */
static void assert_zoom_is_region(const unsigned char *shot, int sw, int sh, int dw, int dh,
				  const unsigned char *zoom, int zw, int zh, int x0, int y0, int rw,
				  int rh)
{
	int compared = 0, red = 0, blue = 0;
	for (int dy = y0 + 10; dy < y0 + rh; dy += 20)
		for (int dx = x0 + 10; dx < x0 + rw; dx += 20) {
			long s = flat_pixel(shot, sw, sh, dx * sw / dw, dy * sh / dh);
			long z = flat_pixel(zoom, zw, zh, (dx - x0) * zw / rw, (dy - y0) * zh / rh);
			if (s < 0 || z < 0)
				continue;
			cr_assert_eq(s, z, "desktop (%d, %d): the screenshot shows %06lx, the zoom "
				     "%06lx", dx, dy, s, z);
			compared++;
			red += (z >> 16) > 0xc0 && (z & 0xff) < 0x40;
			blue += (z & 0xff) > 0xc0 && (z >> 16) < 0x40;
		}
	cr_assert(compared >= 100 && red > 10 && blue > 10,
		  "too few flat samples (%d; %d red, %d blue): is the pattern page shown?", compared,
		  red, blue);
}

Test(gateway, zoom_is_scaled_to_the_display)
{
	serve("");
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN,
	       "{\"profile\":\"browser\",\"display\":{\"width\":1024,\"height\":640}}");
	struct dg_ws *ws = agent(&s, DG_TEST_AGENT_TOKEN);
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", pattern_page);
	char *text = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	json_decref(act_ok(ws, text));
	free(text);
	free(wait_title(ws, NULL, "pattern"));
	/* A quarter of the 1280x800 desktop, as the model names it: shown at
	 * the display's 1024x640, not at the desktop's 640x400. */
	anth0(ws, "toolu_z1", "{\"action\":\"zoom\",\"region\":[0,0,512,320]}", 1024, 640);
	anth0(ws, "toolu_z2", "{\"action\":\"zoom\",\"region\":[512,320,1024,640]}", 1024, 640);
	/* Another aspect fits inside the display: 2:1 -> 1024x512; 1:2 -> 320x640. */
	anth0(ws, "toolu_z3", "{\"action\":\"zoom\",\"region\":[0,0,400,200]}", 1024, 512);
	anth0(ws, "toolu_z4", "{\"action\":\"zoom\",\"region\":[0,0,100,200]}", 320, 640);
	/* The pixels are the region's. */
	unsigned char *shot = act_rgb(ws, "{\"type\":\"screenshot\"}", 1024, 640);
	unsigned char *z = act_rgb(ws, "{\"type\":\"zoom\",\"region\":[0,0,640,400]}", 1024, 640);
	assert_zoom_is_region(shot, 1024, 640, 1280, 800, z, 1024, 640, 0, 0, 640, 400);
	free(z);
	z = act_rgb(ws, "{\"type\":\"zoom\",\"region\":[600,380,1240,780]}", 1024, 640);
	assert_zoom_is_region(shot, 1024, 640, 1280, 800, z, 1024, 640, 600, 380, 640, 400);
	free(z);
	free(shot);
	dg_ws_close(ws);
	json_decref(s.j);

	/* Without a display the model's size is the desktop's. */
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	ws = agent(&s, DG_TEST_AGENT_TOKEN);
	anth0(ws, "toolu_z5", "{\"action\":\"zoom\",\"region\":[0,0,640,400]}", 1280, 800);
	free(act_rgb(ws, "{\"type\":\"zoom\",\"region\":[640,400,1280,800]}", 1280, 800));
	dg_ws_close(ws);
	json_decref(s.j);
	stop_server();
}

/* ---- the Python clients (Debian's python3-websockets) ----------------------- */

#define PYTHON "/usr/bin/python3"

/* Runs a client against the server; returns its JSON lines (an array). */
/* A client script run against the gateway: its argv and, once it ended,
 * its JSON lines. */
struct client_run {
	const char *script, *profile;
	char path[512], base[64];
	const char *argv[7];
	struct dg_proc p;
	bool started, done;
	json_t *lines;
};

static void client_start(struct client_run *c)
{
	snprintf(c->path, sizeof(c->path), "%s/tests/clients/%s", DG_SOURCE_DIR, c->script);
	snprintf(c->base, sizeof(c->base), "http://127.0.0.1:%d", srv.port);
	const char *argv[] = {PYTHON, c->path, c->base, DG_TEST_AGENT_TOKEN, "--profile",
			      c->profile, NULL};
	memcpy(c->argv, argv, sizeof(argv));
	cr_assert_eq(dg_test_start(c->argv, NULL, NULL, 0, -1, &c->p), 0);
	c->started = true;
}

static void client_finish(struct client_run *c)
{
	struct dg_run r;
	cr_assert_eq(dg_test_finish(&c->p, 10, &r), 0);
	c->done = true;
	cr_assert_eq(r.exit_code, 0, "%s --profile %s failed (%d):\n%s\n%s", c->script, c->profile,
		     r.exit_code, r.out, r.err);
	c->lines = json_array();
	for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert(j, "%s: not a JSON line: %s", c->script, line);
		json_array_append_new(c->lines, j);
	}
	cr_log_info("%s --profile %s: %zu lines in %.1f s", c->script, c->profile,
		    json_array_size(c->lines), r.seconds);
	dg_run_free(&r);
}

/* Runs the n clients, at most at_once of them side by side (each its own
 * session), in the order given; each gets 120 s. While they run, notes the
 * jail slots of the sessions they create, so the end of the test checks
 * nothing of them is left. */
static void run_clients(struct client_run *c, size_t n, size_t at_once)
{
	size_t next = 0, running = 0;
	while (next < n || running > 0) {
		while (running < at_once && next < n) {
			client_start(&c[next++]);
			running++;
		}
		for (size_t i = 0; i < next; i++) {
			if (c[i].done)
				continue;
			if ((c[i].p.out >= 0 || c[i].p.err >= 0) && dg_test_now() - c[i].p.start < 120)
				dg_test_pump(&c[i].p, "\001never printed", 0.05);
			else {
				client_finish(&c[i]);
				running--;
			}
		}
		note_slots();
	}
}

static void check_anthropic_lines(json_t *lines, const char *profile)
{
	static const char *const steps[] = {"screenshot", "left_click", "type", "key", "scroll",
					    "left_click_drag", "zoom", "cursor_position"};
	cr_assert_eq(json_array_size(lines), 8, "%s: %zu lines", profile, json_array_size(lines));
	for (size_t i = 0; i < 8; i++) {
		json_t *l = json_array_get(lines, i);
		char id[16];
		snprintf(id, sizeof(id), "toolu_%02zu", i);
		cr_assert_str_eq(json_string_value(json_object_get(l, "step")), steps[i]);
		cr_assert_str_eq(json_string_value(json_object_get(l, "tool_use_id")), id);
		cr_assert(json_is_false(json_object_get(l, "is_error")), "%s %s: %s", profile, steps[i],
			  json_string_value(json_object_get(l, "text")));
		if (i < 7)
			cr_assert(json_is_true(json_object_get(l, "png_ok")), "%s %s: no PNG", profile,
				  steps[i]);
	}
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(lines, 7), "text")),
			 "X=300,Y=200");
}

/* The line of an OpenAI call: the output item is computer_call_output with
 * the call_id echoed and a screenshot of the desktop's size. */
static json_t *openai_line(json_t *lines, size_t i, const char *profile)
{
	json_t *l = json_array_get(lines, i);
	char *dump = json_dumps(l, JSON_COMPACT);
	cr_assert_str_eq(json_string_value(json_object_get(l, "item")), "computer_call_output", "%s",
			 dump);
	cr_assert(json_is_true(json_object_get(l, "call_id_echoed")), "%s", dump);
	cr_assert_str_eq(json_string_value(json_object_get(l, "output_type")), "computer_screenshot");
	json_t *size = json_object_get(l, "png_size");
	cr_assert(json_integer_value(json_array_get(size, 0)) == 1280 &&
		  json_integer_value(json_array_get(size, 1)) == 800, "%s", dump);
	const char *url = json_string_value(json_object_get(l, "current_url"));
	if (strcmp(profile, "browser") == 0)
		cr_assert(url && strncmp(url, "data:text/html", 14) == 0, "%s", dump);
	else
		cr_assert_null(url, "%s", dump);
	free(dump);
	return l;
}

static const char *messages0(json_t *l)
{
	json_t *m = json_object_get(l, "messages");
	return json_array_size(m) ? json_string_value(json_array_get(m, 0)) : NULL;
}

Test(gateway, python_clients_anthropic_and_openai)
{
	serve("");
	/* Two at a time, each its own session (the browser ones, the longest,
	 * first): 21 s instead of 40 s one after the other. */
	struct client_run c[4] = {{.script = "openai_loop.py", .profile = "browser"},
				  {.script = "anthropic_loop.py", .profile = "browser"},
				  {.script = "openai_loop.py", .profile = "xterm"},
				  {.script = "anthropic_loop.py", .profile = "xterm"}};
	run_clients(c, 4, 2);
	json_t *lines = c[3].lines;
	check_anthropic_lines(lines, "xterm");
	json_decref(lines);
	lines = c[1].lines;
	check_anthropic_lines(lines, "browser");
	json_decref(lines);

	/* OpenAI, batched, against xterm: what was typed ran in the shell. */
	lines = c[2].lines;
	cr_assert_eq(json_array_size(lines), 6);
	for (size_t i = 0; i < 5; i++)
		cr_assert_null(messages0(openai_line(lines, i, "xterm")), "call %zu refused", i);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(lines, 5), "exec_stdout")),
			 "openai-42\n");
	json_decref(lines);

	/* OpenAI against the browser's test page: each input arrived. */
	lines = c[0].lines;
	cr_assert_eq(json_array_size(lines), 10);
	static const char *const titles[] = {
		"ready",          "click:640,400,b0,d1,shift", "text:hi openai",
		"key:ctrl+shift+", "wheel:1,0",                 "dblclick:320,200",
		"drag:500,250-750,313", "drag:500,250-750,313", "drag:500,250-750,313",
	};
	for (size_t i = 0; i < 9; i++) {
		json_t *l = openai_line(lines, i, "browser");
		const char *t = json_string_value(json_object_get(l, "title"));
		cr_assert(t && strncmp(t, titles[i], strlen(titles[i])) == 0,
			  "call %zu: title \"%s\", want \"%s\"", i + 1, t, titles[i]);
		if (i < 8)
			cr_assert_null(messages0(l), "call %zu refused: %s", i + 1, messages0(l));
	}
	const char *k = json_string_value(json_object_get(json_array_get(lines, 3), "title"));
	cr_assert_str_eq(k, "key:ctrl+shift+K");
	/* the pending safety check came back acknowledged */
	json_t *ack = json_object_get(json_array_get(lines, 7), "acknowledged_safety_checks");
	cr_assert_eq(json_array_size(ack), 1);
	cr_assert_str_eq(json_string_value(json_array_get(ack, 0)), "cu_sc_1");
	/* the call with an unknown key was refused as a whole, saying why, and
	 * nothing of it ran (the title is unchanged) */
	const char *why = messages0(json_array_get(lines, 8));
	cr_assert(why && strstr(why, "CTLR"), "%s", why);
	/* the preview form (one "action") */
	openai_line(lines, 9, "browser");
	json_decref(lines);
	stop_server();
}

/* ---- exec: beside the desktop, in the session's jail ---------------------------- */

Test(gateway, exec_runs_in_the_sessions_jail)
{
	serve("");
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	struct dg_ws *ws = agent(&s, DG_TEST_AGENT_TOKEN);
	json_t *ex = exec_in(ws, "[\"sh\",\"-c\",\"echo hi > /tmp/from-exec; cat /tmp/from-exec; id -u\"]",
			     0);
	cr_assert_eq(json_integer_value(json_object_get(ex, "exit_code")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(ex, "stdout")), "hi\n1000\n");
	json_decref(ex);
	/* the same jail: the second command sees the first one's file */
	ex = exec_in(ws, "[\"cat\",\"/tmp/from-exec\"]", 0);
	cr_assert_eq(json_integer_value(json_object_get(ex, "exit_code")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(ex, "stdout")), "hi\n");
	json_decref(ex);
	/* stdin, stderr and the exit status */
	unsigned char *png;
	size_t len;
	json_t *r = send_recv(ws,
			      "{\"type\":\"exec\",\"argv\":[\"sh\",\"-c\",\"tr a-z A-Z; echo oops >&2; "
			      "exit 3\"],\"stdin\":\"quiet\"}",
			      &png, &len);
	cr_assert(png);
	free(png);
	ex = json_object_get(r, "exec");
	cr_assert_eq(json_integer_value(json_object_get(ex, "exit_code")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(ex, "stdout")), "QUIET");
	cr_assert_str_eq(json_string_value(json_object_get(ex, "stderr")), "oops\n");
	json_decref(r);
	/* a timeout: 124, well before the command would have ended */
	double t0 = dg_test_now();
	ex = exec_in(ws, "[\"sleep\",\"5\"]", 500);
	double took = dg_test_now() - t0;
	cr_assert_eq(json_integer_value(json_object_get(ex, "exit_code")), 124);
	cr_assert(json_is_true(json_object_get(ex, "timed_out")));
	cr_assert_lt(took, 4.0, "the timeout took %.1f s", took);
	json_decref(ex);
	/* a program that does not exist */
	r = send_recv(ws, "{\"type\":\"exec\",\"argv\":[\"/no/such/program\"]}", NULL, NULL);
	char *dump = json_dumps(r, JSON_COMPACT);
	ex = json_object_get(r, "exec");
	cr_assert(json_is_false(json_object_get(r, "ok")) ||
		  json_integer_value(json_object_get(ex, "exit_code")) == 127, "%s", dump);
	free(dump);
	json_decref(r);
	/* the desktop is still there */
	act_ok0(ws, "{\"type\":\"screenshot\"}");
	/* and an exec in the Anthropic format is not a thing: refused */
	char *t = anth(ws, "toolu_x", "{\"action\":\"exec\",\"argv\":[\"id\"]}", true, 1280, 800);
	free(t);
	dg_ws_close(ws);
	json_decref(s.j);
	stop_server();
}

/* ---- lifecycle: every way a session ends, and nothing is left ------------------- */

/* Reads until a message of type "ended" (or an "error" event) arrives, then
 * until the connection closes; returns the ended message. */
static json_t *wait_ended(struct dg_ws *ws, double timeout_s)
{
	double end = dg_test_now() + timeout_s;
	json_t *ended = NULL;
	while (!ended) {
		struct dg_ws_msg m;
		double left = end - dg_test_now();
		int r = dg_ws_recv(ws, left > 0 ? left : 0, &m);
		cr_assert_eq(r, 1, "%s", r == 0 ? "no \"ended\" message in time"
					       : "closed without an \"ended\" message");
		if (m.binary) {
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		dg_ws_msg_free(&m);
		const char *type = json_string_value(json_object_get(j, "type"));
		if (type && strcmp(type, "ended") == 0)
			ended = j;
		else
			json_decref(j);
	}
	struct dg_ws_msg m;
	while (dg_ws_recv(ws, end - dg_test_now() > 0 ? end - dg_test_now() : 0, &m) == 1)
		dg_ws_msg_free(&m);
	cr_assert(dg_ws_closed(ws), "the connection stayed open after \"ended\"");
	return ended;
}

static const char *reason_of(json_t *ended)
{
	const char *r = json_string_value(json_object_get(ended, "reason"));
	return r ? r : "";
}

static struct dg_ws *observer(const struct sess *s)
{
	struct dg_ws *o = ws_open(s->watch_path, DG_TEST_VIEWER_TOKEN, NULL, 101);
	json_t *hello = recv_json(o, 10, false);
	cr_assert_str_eq(json_string_value(json_object_get(hello, "type")), "hello");
	json_decref(hello);
	return o;
}

static void session_404(const struct sess *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s->id);
	http_error("GET", path, DG_TEST_AGENT_TOKEN, NULL, 404, "not_found");
}

Test(gateway, lifecycle_delete_idle_grace_and_a_dying_desktop)
{
	serve("\"limits\": {\"idle_seconds\": 3, \"disconnect_grace_seconds\": 1}");
	char path[128];
	/* DELETE: the agent and the observers are told, then closed */
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	struct dg_ws *a = agent(&s, DG_TEST_AGENT_TOKEN);
	struct dg_ws *o = observer(&s);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
	json_t *e = wait_ended(a, 10);
	cr_assert_str_eq(reason_of(e), "deleted");
	cr_assert_str_eq(json_string_value(json_object_get(e, "session")), s.id);
	json_decref(e);
	json_decref(wait_ended(o, 10));
	session_404(&s);
	assert_gone(&s);
	dg_ws_close(a);
	dg_ws_close(o);
	json_decref(s.j);

	/* DELETE while an exec runs: nothing of it is left either, and the
	 * spawner is not held up (the next session starts at once) */
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	a = agent(&s, DG_TEST_AGENT_TOKEN);
	cr_assert_eq(dg_ws_send_text(a, "{\"type\":\"exec\",\"argv\":[\"sleep\",\"30\"]}"), 0);
	dg_ws_service(300);
	double t0 = dg_test_now();
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 404)); /* the old id */
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
	json_decref(wait_ended(a, 10));
	assert_gone(&s);
	cr_log_info("a session with a running exec was gone %.2f s after DELETE",
		    dg_test_now() - t0);
	dg_ws_close(a);
	json_decref(s.j);

	/* idle: a session nobody acts on ends after idle_seconds */
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	a = agent(&s, DG_TEST_AGENT_TOKEN);
	t0 = dg_test_now();
	e = wait_ended(a, 10);
	double idle = dg_test_now() - t0;
	cr_assert(strstr(reason_of(e), "idle"), "reason: %s", reason_of(e));
	cr_assert(idle > 2.5 && idle < 5.0, "ended after %.2f s of idleness (limit 3 s)", idle);
	json_decref(e);
	session_404(&s);
	assert_gone(&s);
	dg_ws_close(a);
	json_decref(s.j);

	/* disconnect grace: a reconnect within it keeps the session... */
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	a = agent(&s, DG_TEST_AGENT_TOKEN);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	dg_ws_close(a);
	dg_ws_service(300);
	a = agent(&s, DG_TEST_AGENT_TOKEN);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	/* ...and without one it ends after disconnect_grace_seconds (before the
	 * idle limit could) */
	dg_ws_close(a);
	t0 = dg_test_now();
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	double gone = -1;
	while (dg_test_now() - t0 < 6) {
		struct dg_http r;
		cr_assert_eq(dg_test_http(srv.port, "GET", path, DG_TEST_AGENT_TOKEN, NULL, 10, &r), 0);
		int st = r.status;
		dg_http_free(&r);
		if (st == 404) {
			gone = dg_test_now() - t0;
			break;
		}
		cr_assert_eq(st, 200);
		usleep(50000);
	}
	cr_assert(gone > 0.7 && gone < 2.5, "gone %.2f s after the disconnect (grace 1 s)", gone);
	assert_gone(&s);
	json_decref(s.j);

	/* the desktop dies (its X server is killed): the agent and the observers
	 * are told, and nothing is left */
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	a = agent(&s, DG_TEST_AGENT_TOKEN);
	o = observer(&s);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	pid_t xvnc = dg_test_find_process("Xvnc", DG_JAIL_ID_BASE + s.slot);
	cr_assert_gt(xvnc, 0, "no Xvnc of uid %u", DG_JAIL_ID_BASE + s.slot);
	cr_assert_eq(kill(xvnc, SIGKILL), 0);
	e = wait_ended(a, 10);
	cr_assert(!strstr(reason_of(e), "idle"), "reason: %s", reason_of(e));
	cr_log_info("after its X server was killed: %s", reason_of(e));
	json_decref(e);
	e = wait_ended(o, 10);
	json_decref(e);
	session_404(&s);
	assert_gone(&s);
	dg_ws_close(a);
	dg_ws_close(o);
	json_decref(s.j);
	stop_server();
}

/* ---- hostile input: each refused clearly while another session works on ------- */

/* One action on the healthy session, which must complete promptly. */
static void healthy(struct dg_ws *ws, const char *after)
{
	double t0 = dg_test_now();
	json_t *r = send_recv(ws, "{\"type\":\"screenshot\"}", NULL, NULL);
	char *dump = json_dumps(r, JSON_COMPACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "the healthy session failed after %s: %.300s",
		  after, dump);
	free(dump);
	json_decref(r);
	double took = dg_test_now() - t0;
	cr_assert_lt(took, 10.0, "the healthy session took %.1f s after %s", took, after);
}

/* An Anthropic block refused: a tool_result with is_error and the reason. */
/* ---- the policy decides every action before the desktop sees it ------------ */

static void refused(struct dg_ws *ws, const char *action, const char *verdict, const char *rule)
{
	json_t *j = send_recv(ws, action, NULL, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")), "result", "%s", action);
	cr_assert(json_is_false(json_object_get(j, "ok")), "%s was not refused", action);
	cr_assert_str_eq(json_string_value(json_object_get(j, "verdict")), verdict, "%s", action);
	const char *r = json_string_value(json_object_get(j, "rule"));
	cr_assert(r && strstr(r, rule), "%s: rule %s, expected %s", action, r ? r : "(none)", rule);
	cr_assert(json_string_value(json_object_get(j, "reason")), "%s: no reason", action);
	cr_assert_null(json_object_get(j, "frame"), "a refused action shows no new screen");
	json_decref(j);
}

Test(gateway, the_policy_decides_each_action)
{
	char *policy = dg_test_write_tmp("policy.json",
		"{\"version\": 1, \"default\": \"deny\","
		" \"actions\": {\"allow\": [\"screenshot\", \"click\", \"key\", \"type\"],"
		" \"ask\": [\"exec\"]},"
		" \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"actions\": [\"click\"],"
		" \"verdict\": \"deny\", \"reason\": \"window controls are off limits\"}],"
		" \"keys\": {\"deny\": [\"super+*\"]},"
		" \"text\": {\"max_length\": 10, \"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]}}\n");
	char extra[512];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", policy);
	serve(extra);
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	struct dg_ws *ws = agent(&s, DG_TEST_AGENT_TOKEN);
	act_ok0(ws, "{\"type\":\"click\",\"x\":600,\"y\":400}");
	refused(ws, "{\"type\":\"click\",\"x\":600,\"y\":39}", "deny", "regions[top-bar]");
	act_ok0(ws, "{\"type\":\"click\",\"x\":600,\"y\":40}");
	refused(ws, "{\"type\":\"key\",\"keys\":\"super+l\"}", "deny", "keys.deny");
	refused(ws, "{\"type\":\"type\",\"text\":\"0123456789A\"}", "deny", "text.max_length");
	refused(ws, "{\"type\":\"type\",\"text\":\"BEGIN RSA PRIVATE KEY\"}", "deny", "text");
	refused(ws, "{\"type\":\"move\",\"x\":1,\"y\":1}", "deny", "default");
	/* ask: the agent is told it waits; a viewer's "deny" refuses it. */
	cr_assert_eq(dg_ws_send_text(ws, "{\"type\":\"exec\",\"argv\":[\"true\"]}"), 0);
	json_t *p = recv_json(ws, T_ACT, false);
	cr_assert_str_eq(json_string_value(json_object_get(p, "type")), "pending");
	cr_assert_str_eq(json_string_value(json_object_get(p, "rule")), "actions.ask[0]");
	char apath[128];
	snprintf(apath, sizeof(apath), "/v1/approvals/%s",
		 json_string_value(json_object_get(p, "approval")));
	json_decref(p);
	json_decref(http("POST", apath, DG_TEST_VIEWER_TOKEN, "{\"decision\":\"deny\"}", 200));
	p = recv_json(ws, T_ACT, false);
	cr_assert(json_is_false(json_object_get(p, "ok")));
	cr_assert_str_eq(json_string_value(json_object_get(p, "rule")), "approval");
	cr_assert(strstr(json_string_value(json_object_get(p, "reason")), "denied by"));
	json_decref(p);
	/* The Anthropic answer says why, with the current screen. */
	char *t = anth(ws, "toolu_pol", "{\"action\":\"left_click\",\"coordinate\":[5,5]}", true, 1280, 800);
	cr_assert(strstr(t, "window controls are off limits") && strstr(t, "regions[top-bar]"), "%s", t);
	free(t);
	act_ok0(ws, "{\"type\":\"screenshot\"}");
	dg_ws_close(ws);
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s.id);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
	json_decref(s.j);
	stop_server();
	dg_test_rm_tmp(policy);
}

static void anth_refused(struct dg_ws *ws, const char *input, const char *needle)
{
	char *t = anth(ws, "toolu_bad", input, true, 1280, 800);
	cr_assert(strstr(t, needle), "the refusal should mention \"%s\": %s", needle, t);
	free(t);
}

Test(gateway, hostile_input_matrix)
{
	serve(TWO_AGENTS ", \"limits\": {\"max_sessions\": 2, \"max_message_bytes\": 65536, "
			 "\"handshake_seconds\": 2, \"max_pending_actions\": 4}");
	struct sess hs, good;
	create(&hs, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	create(&good, AGENT2_TOKEN, "{\"profile\":\"xterm\"}");
	struct dg_ws *a = agent(&hs, DG_TEST_AGENT_TOKEN);
	struct dg_ws *b = agent(&good, AGENT2_TOKEN);
	healthy(b, "the start");
	act_ok0(a, "{\"type\":\"screenshot\"}");

	/* invalid JSON */
	const char *bad_json = "{\"type\":\"click\",\"x\":1,";
	ws_error(a, bad_json, strlen(bad_json), false, "bad_request");
	healthy(b, "invalid JSON");
	/* a text message that is not UTF-8: the WebSocket protocol says to fail
	 * the connection (RFC 6455 8.1), with 1007; the session lives on and
	 * its agent reconnects */
	cr_assert_eq(dg_ws_send(a, false, "{\"\xff\xfe\"}", 6), 0);
	struct dg_ws_msg msg;
	cr_assert_eq(dg_ws_recv(a, 10, &msg), -1, "invalid UTF-8 was not refused");
	cr_assert_eq(dg_ws_close_code(a), 1007);
	dg_ws_close(a);
	a = agent(&hs, DG_TEST_AGENT_TOKEN);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	healthy(b, "invalid UTF-8");
	/* an unknown action */
	const char *unknown = "{\"type\":\"clik\",\"x\":1,\"y\":1}";
	ws_error(a, unknown, strlen(unknown), false, "bad_request");
	anth_refused(a, "{\"action\":\"left_clik\",\"coordinate\":[1,1]}", "left_clik");
	healthy(b, "an unknown action");
	/* wrong types */
	const char *types = "{\"type\":\"click\",\"x\":\"10\",\"y\":10}";
	ws_error(a, types, strlen(types), false, "bad_request");
	const char *arr = "[{\"type\":\"screenshot\"}]";
	ws_error(a, arr, strlen(arr), false, "bad_request");
	anth_refused(a, "{\"action\":\"left_click\",\"coordinate\":[\"1\",1]}", "coordinate");
	healthy(b, "wrong types");
	/* huge text: over the action's limit, within the message's */
	size_t n = DG_ACTION_TEXT_MAX + 100;
	char *big = malloc(n + 64);
	int k = snprintf(big, 64, "{\"type\":\"type\",\"text\":\"");
	memset(big + k, 'a', n);
	strcpy(big + k + n, "\"}");
	ws_error(a, big, strlen(big), false, "bad_request");
	free(big);
	healthy(b, "huge text");
	/* coordinates out of range */
	const char *off = "{\"type\":\"click\",\"x\":1280,\"y\":10}";
	ws_error(a, off, strlen(off), false, "bad_request");
	const char *neg = "{\"type\":\"move\",\"x\":-1,\"y\":10}";
	ws_error(a, neg, strlen(neg), false, "bad_request");
	anth_refused(a, "{\"action\":\"left_click\",\"coordinate\":[1280,10]}", "off the display");
	healthy(b, "coordinates out of range");
	/* binary garbage on the text channel */
	unsigned char garbage[512];
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(i * 131 + 7);
	ws_error(a, garbage, sizeof(garbage), true, "binary");
	healthy(b, "binary garbage");
	/* a message over max_message_bytes: refused, the connection stays usable */
	size_t huge = 70000;
	char *over = malloc(huge + 1);
	memset(over, ' ', huge);
	memcpy(over, "{\"type\":\"screenshot\"", 20);
	over[huge - 1] = '}';
	over[huge] = '\0';
	ws_error(a, over, huge, false, "too_large");
	free(over);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	healthy(b, "a message over the size cap");
	/* more sessions than allowed */
	http_error("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 429,
		   "too_many_sessions");
	healthy(b, "one session too many");

	/* a handshake that never completes: dropped after handshake_seconds,
	 * while the server keeps serving */
	int fd = dg_test_tcp_connect(srv.port);
	cr_assert_geq(fd, 0);
	char half[256];
	snprintf(half, sizeof(half), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n",
		 hs.ws_path);
	cr_assert_eq(send(fd, half, strlen(half), MSG_NOSIGNAL), (ssize_t)strlen(half));
	int fd2 = dg_test_tcp_connect(srv.port); /* and one that sends nothing at all */
	cr_assert_geq(fd2, 0);
	double t0 = dg_test_now();
	double dropped = -1, dropped2 = -1;
	int actions = 0;
	while (dg_test_now() - t0 < 8 && (dropped < 0 || dropped2 < 0)) {
		healthy(b, "a half-open handshake");
		actions++;
		dg_ws_service(50); /* below actions_per_second */
		struct pollfd p[2] = {{fd, POLLIN, 0}, {fd2, POLLIN, 0}};
		if (poll(p, 2, 0) > 0) {
			char buf[512];
			if (dropped < 0 && p[0].revents && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
				dropped = dg_test_now() - t0;
			if (dropped2 < 0 && p[1].revents && recv(fd2, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
				dropped2 = dg_test_now() - t0;
		}
	}
	close(fd);
	close(fd2);
	cr_assert(dropped > 1.0 && dropped < 5.0,
		  "a half-sent handshake was dropped after %.2f s (handshake_seconds 2)", dropped);
	cr_assert(dropped2 > 1.0 && dropped2 < 5.0,
		  "a silent connection was dropped after %.2f s (handshake_seconds 2)", dropped2);
	cr_assert_gt(actions, 3, "the healthy session was held up meanwhile");
	cr_log_info("half handshake dropped after %.2f s, silent connection after %.2f s; "
		    "%d actions on the healthy session meanwhile",
		    dropped, dropped2, actions);

	/* a flood: 100 actions at once. Beyond max_pending_actions they are
	 * refused (too_many_pending; rate_limited past actions_per_second), the
	 * others complete, every one is answered. */
	dg_ws_service(1100); /* a fresh rate window */
	for (int i = 0; i < 100; i++) {
		char m[64];
		snprintf(m, sizeof(m), "{\"type\":\"move\",\"x\":%d,\"y\":%d}", 10 + i, 10 + i);
		cr_assert_eq(dg_ws_send_text(a, m), 0);
	}
	int results = 0, pending = 0, limited = 0, frames_due = 0;
	double end = dg_test_now() + 120;
	while ((results + pending + limited < 100 || frames_due > 0) && dg_test_now() < end) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(a, end - dg_test_now(), &m), 1, "the flood was not answered");
		if (m.binary) {
			frames_due--;
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		dg_ws_msg_free(&m);
		const char *type = json_string_value(json_object_get(j, "type"));
		const char *code =
			json_string_value(json_object_get(json_object_get(j, "error"), "code"));
		if (type && strcmp(type, "result") == 0) {
			cr_assert(json_is_true(json_object_get(j, "ok")));
			results++;
			frames_due += json_object_get(j, "frame") != NULL;
		} else if (type && strcmp(type, "error") == 0 && code &&
			   strcmp(code, "too_many_pending") == 0) {
			pending++;
		} else if (type && strcmp(type, "error") == 0 && code &&
			   strcmp(code, "rate_limited") == 0) {
			limited++;
		} else {
			char *dump = json_dumps(j, JSON_COMPACT);
			cr_assert_fail("unexpected answer to the flood: %.300s", dump);
		}
		json_decref(j);
	}
	cr_log_info("flood of 100: %d completed, %d too_many_pending, %d rate_limited", results,
		    pending, limited);
	cr_assert_eq(results + pending + limited, 100);
	cr_assert_geq(results, 5, "at least the running one and max_pending_actions complete");
	cr_assert_gt(pending + limited, 0);
	cr_assert_gt(limited, 0, "past actions_per_second (50) messages are rate limited");
	healthy(b, "a flood on another session");
	dg_ws_service(1100);
	act_ok0(a, "{\"type\":\"screenshot\"}");

	/* a wrong or missing token on the WebSocket: 401 */
	ws_open(good.ws_path, NULL, NULL, 401);
	ws_open(good.ws_path, "wrong-token-0123456789abcdefghijk", NULL, 401);
	ws_open(good.ws_path, NULL, "deskgate.v1, bearer.wrong-token-0123456789abcdefghijk", 401);
	ws_open(good.watch_path, NULL, NULL, 401);
	healthy(b, "wrong tokens");
	/* another agent's session: refused as if it did not exist */
	ws_open(good.ws_path, DG_TEST_AGENT_TOKEN, NULL, 404);
	ws_open(hs.ws_path, AGENT2_TOKEN, NULL, 404);
	ws_open("/v1/sessions/00000000000000000000000000000000/ws", DG_TEST_AGENT_TOKEN, NULL, 404);
	/* a second agent on a session that has one */
	ws_open(good.ws_path, AGENT2_TOKEN, NULL, 409);
	healthy(b, "another agent's session id");
	act_ok0(a, "{\"type\":\"screenshot\"}");

	dg_ws_close(a);
	dg_ws_close(b);
	json_decref(hs.j);
	json_decref(good.j);
	stop_server();
}

/* ---- observers: read-only, latest frame only, never slowing the agent ---------- */

/* A page of random pixels: its screenshots do not compress (about 1.2 MB),
 * so an observer that does not read fills the socket buffers within a few
 * frames. */
static const char noise_page[] =
	"data:text/html,<title>noise</title><body style='margin:0'><canvas id=c width=800 "
	"height=500></canvas><script>var x=document.getElementById('c').getContext('2d'),"
	"d=x.createImageData(800,500);for(var i=0;i<d.data.length;i++)d.data[i]=i%254=="
	"3?255:Math.random()*256|0;x.putImageData(d,0,0)</script></body>";

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* n moves; returns the median round trip in ms; the last frame in *png. */
static double timed_moves(struct dg_ws *ws, int n, unsigned char **png, size_t *len)
{
	double *ms = calloc((size_t)n, sizeof(*ms));
	*png = NULL;
	for (int i = 0; i < n; i++) {
		char m[64];
		snprintf(m, sizeof(m), "{\"type\":\"move\",\"x\":%d,\"y\":%d}", 900 + i % 50, 600 + i % 50);
		double t0 = dg_test_now();
		free(*png);
		json_t *r = send_recv(ws, m, png, len);
		ms[i] = (dg_test_now() - t0) * 1000;
		cr_assert(json_is_true(json_object_get(r, "ok")));
		cr_assert(*png, "no frame");
		json_decref(r);
		dg_ws_service(25); /* below actions_per_second */
	}
	qsort(ms, (size_t)n, sizeof(*ms), cmp_d);
	double med = ms[n / 2];
	free(ms);
	return med;
}

Test(gateway, observers_are_read_only_and_never_slow_the_agent)
{
	serve(TWO_AGENTS);
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"browser\"}");
	struct dg_ws *a = agent(&s, DG_TEST_AGENT_TOKEN);
	navigate_test_page(a);
	json_decref(act_ok(a, "{\"type\":\"click\",\"x\":640,\"y\":400}"));
	char *t = wait_title(a, NULL, "click:");
	cr_assert_str_eq(t, "click:640,400,b0,d1");
	free(t);
	char *before = title_now(a);

	/* an observer: hello, then the current screen */
	struct dg_ws *o = ws_open(s.watch_path, DG_TEST_VIEWER_TOKEN, NULL, 101);
	json_t *hello = recv_json(o, 10, false);
	cr_assert_str_eq(json_string_value(json_object_get(hello, "type")), "hello");
	cr_assert_str_eq(json_string_value(json_object_get(hello, "id")), s.id);
	cr_assert_null(json_object_get(hello, "session_token"));
	json_decref(hello);
	struct dg_ws_msg m;
	cr_assert_eq(dg_ws_recv(o, 10, &m), 1);
	cr_assert(m.binary, "the observer's second message is not the screen");
	int w, h;
	cr_assert_eq(dg_test_png_size(m.data, m.len, &w, &h), 0);
	cr_assert(w == 1280 && h == 800);
	dg_ws_msg_free(&m);

	/* what the agent does shows up as events and frames */
	act_ok0(a, "{\"type\":\"move\",\"x\":700,\"y\":300}");
	bool saw_action = false, saw_frame = false;
	double end = dg_test_now() + 10;
	while (!(saw_action && saw_frame) && dg_test_now() < end) {
		if (dg_ws_recv(o, end - dg_test_now(), &m) != 1)
			break;
		if (m.binary) {
			saw_frame = true;
		} else {
			json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
			const char *type = json_string_value(json_object_get(j, "type"));
			if (type && strcmp(type, "action") == 0) {
				cr_assert_str_eq(json_string_value(json_object_get(j, "action")), "move");
				cr_assert(json_is_true(json_object_get(j, "ok")));
				saw_action = true;
			}
			json_decref(j);
		}
		dg_ws_msg_free(&m);
	}
	cr_assert(saw_action && saw_frame, "the observer saw action %d, frame %d", saw_action,
		  saw_frame);

	/* what an observer sends never reaches the session */
	cr_assert_eq(dg_ws_send_text(o, "{\"type\":\"click\",\"x\":100,\"y\":150}"), 0);
	cr_assert_eq(dg_ws_send_text(o, "{\"type\":\"tool_use\",\"id\":\"toolu_o\",\"name\":"
					"\"computer\",\"input\":{\"action\":\"left_click\","
					"\"coordinate\":[120,160]}}"),
		     0);
	cr_assert_eq(dg_ws_send_text(o, "{\"type\":\"key\",\"keys\":\"a\"}"), 0);
	dg_ws_service(1500);
	t = title_now(a);
	cr_assert_str_eq(t, before, "an observer's message reached the page");
	free(t);
	while (dg_ws_pending(o)) {
		cr_assert_eq(dg_ws_recv(o, 1, &m), 1);
		if (!m.binary) {
			json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
			const char *type = json_string_value(json_object_get(j, "type"));
			cr_assert(type && strcmp(type, "result") != 0 && strcmp(type, "tool_result") != 0,
				  "the observer got an answer: %s", m.data);
			json_decref(j);
		}
		dg_ws_msg_free(&m);
	}
	/* who may watch: viewers, admins, the session's own agent; not another agent */
	dg_ws_close(ws_open(s.watch_path, DG_TEST_ADMIN_TOKEN, NULL, 101));
	dg_ws_close(ws_open(s.watch_path, DG_TEST_AGENT_TOKEN, NULL, 101));
	ws_open(s.watch_path, AGENT2_TOKEN, NULL, 404);
	dg_ws_close(o);
	free(before);

	/* a slow observer: it never reads while the agent acts on a screen whose
	 * frames are large */
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", noise_page);
	char *text = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	act_ok0(a, text);
	free(text);
	free(wait_title(a, NULL, "noise"));
	unsigned char *png;
	size_t len;
	double base = timed_moves(a, 15, &png, &len);
	cr_assert_gt(len, 500000, "the noise page's frame is only %zu bytes", len);
	free(png);
	struct dg_ws *slow = ws_open(s.watch_path, DG_TEST_VIEWER_TOKEN, NULL, 101);
	dg_ws_read_enable(slow, false);
	const int N = 40;
	double with_slow = timed_moves(a, N, &png, &len);
	cr_log_info("agent move round trip, median: %.1f ms alone, %.1f ms with an observer that "
		    "does not read (frames of %zu bytes)",
		    base, with_slow, len);
	cr_assert_lt(with_slow, 2 * base + 30, "the slow observer slowed the agent: %.1f ms vs %.1f ms",
		     with_slow, base);
	/* once it reads again it gets what is queued and the latest screen, not
	 * every frame it missed */
	dg_ws_read_enable(slow, true);
	int frames = 0;
	bool closed = false;
	unsigned char *last = NULL;
	size_t last_len = 0;
	end = dg_test_now() + 20;
	for (;;) {
		int r = dg_ws_recv(slow, 1.5, &m);
		if (r < 0)
			closed = true;
		if (r != 1 || dg_test_now() > end)
			break;
		if (m.binary) {
			frames++;
			free(last);
			last = m.data;
			last_len = m.len;
		} else {
			dg_ws_msg_free(&m);
		}
	}
	cr_log_info("the slow observer got %d frames of %d actions afterwards", frames, N);
	cr_assert(!closed, "the slow observer was cut off");
	cr_assert_lt(frames, N, "every frame was queued for the slow observer");
	cr_assert(last && last_len == len && memcmp(last, png, len) == 0,
		  "the slow observer's last frame is not the latest screen");
	free(last);
	free(png);
	act_ok0(a, "{\"type\":\"screenshot\"}");
	dg_ws_close(slow);
	dg_ws_close(a);
	json_decref(s.j);
	stop_server();
}

/* ---- the live view (RFB over GET /v1/sessions/{id}/vnc) ----------------------------- */

/* The live view of s as a raw RFB client (dg_rfb, tests/support), with
 * token in a header; asserts the handshake went well. */
static void rfb_open(struct dg_rfb *r, const struct sess *s, const char *token)
{
	char path[160], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/vnc", s->id);
	cr_assert_eq(dg_rfb_open(r, srv.port, path, token, 10, err, sizeof(err)), 0, "%s", err);
}

static void rfb_send(struct dg_rfb *r, const void *data, size_t len)
{
	cr_assert_eq(dg_ws_send(r->ws, true, data, len), 0, "the live view closed");
}

static void rfb_request(struct dg_rfb *r, bool incremental)
{
	cr_assert_eq(dg_rfb_request(r, incremental), 0, "the live view closed");
}

/* One update's pixels; -1 when none came in time; a protocol error fails. */
static long rfb_update(struct dg_rfb *r, double timeout_s)
{
	char err[256] = "";
	long n = dg_rfb_update(r, timeout_s, err, sizeof(err));
	cr_assert(n >= -1, "%s", err);
	return n;
}

/* The agent's screenshot as RGB (its size must be the desktop's). */
static unsigned char *agent_rgb(struct dg_ws *a, int *w, int *h)
{
	unsigned char *png;
	size_t len;
	json_t *j = send_recv(a, "{\"type\":\"screenshot\"}", &png, &len);
	cr_assert(json_is_true(json_object_get(j, "ok")) && png, "no screenshot");
	json_decref(j);
	unsigned char *rgb = dg_test_png_rgb(png, len, w, h);
	free(png);
	cr_assert(rgb);
	return rgb;
}

/* The session's recorded events of type, in state (NULL: any), for reason
 * (NULL: any) (GET /v1/recordings/{id}/events). */
static int recorded(const struct sess *s, const char *type, const char *state, const char *reason)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/recordings/%s/events", s->id);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "GET", path, DG_TEST_ADMIN_TOKEN, NULL, 10, &r), 0);
	cr_assert_eq(r.status, 200, "%s: %d", path, r.status);
	int n = 0;
	for (char *line = strtok(r.body, "\n"); line; line = strtok(NULL, "\n")) {
		json_t *j = json_loads(line, 0, NULL);
		const char *t = json_string_value(json_object_get(j, "type"));
		const char *st = json_string_value(json_object_get(j, "state"));
		const char *why = json_string_value(json_object_get(j, "reason"));
		n += t && strcmp(t, type) == 0 && (!state || (st && strcmp(st, state) == 0)) &&
		     (!reason || (why && strcmp(why, reason) == 0));
		json_decref(j);
	}
	dg_http_free(&r);
	return n;
}

Test(gateway, vnc_live_view_is_view_only_and_bounded)
{
	serve(TWO_AGENTS);
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"browser\"}");
	struct dg_ws *a = agent(&s, DG_TEST_AGENT_TOKEN);
	navigate_test_page(a);
	json_decref(act_ok(a, "{\"type\":\"click\",\"x\":640,\"y\":400}"));
	free(wait_title(a, NULL, "click:"));
	char path[160];
	snprintf(path, sizeof(path), "/v1/sessions/%s/vnc", s.id);

	/* who may watch: viewers, admins, the session's own agent (token in a
	 * header or the subprotocol list); not another agent, nobody without a
	 * token, and only under the "binary" subprotocol */
	ws_open(path, NULL, "binary", 401);
	ws_open(path, AGENT2_TOKEN, "binary", 404);
	ws_open(path, DG_TEST_VIEWER_TOKEN, "deskgate.v1", 400);
	char proto[300];
	snprintf(proto, sizeof(proto), "binary, bearer.%s", DG_TEST_VIEWER_TOKEN);
	dg_ws_close(ws_open(path, NULL, proto, 101));
	dg_ws_close(ws_open(path, DG_TEST_ADMIN_TOKEN, "binary", 101));
	snprintf(proto, sizeof(proto), "/v1/sessions/%s/ws", s.id);
	ws_open(proto, DG_TEST_AGENT_TOKEN, "binary", 400);

	/* the viewer sees the agent's screen */
	struct dg_rfb v;
	rfb_open(&v, &s, DG_TEST_VIEWER_TOKEN);
	cr_assert(v.w == 1280 && v.h == 800, "the live view is %dx%d", v.w, v.h);
	rfb_request(&v, false);
	cr_assert_eq(rfb_update(&v, 10), 1280L * 800, "the first update is not the whole screen");
	/* the screen may still change between the two pictures: compare again
	 * (a whole screen each time) until they agree, bounded */
	int w, h;
	unsigned char *shot = agent_rgb(a, &w, &h);
	cr_assert(w == 1280 && h == 800);
	double d = dg_rfb_diff(&v, shot);
	for (int i = 0; i < 20 && d >= 2.0; i++) {
		free(shot);
		rfb_request(&v, false);
		cr_assert_eq(rfb_update(&v, 10), 1280L * 800);
		shot = agent_rgb(a, &w, &h);
		d = dg_rfb_diff(&v, shot);
	}
	cr_log_info("live view vs the agent's screenshot: mean difference %.2f per channel", d);
	cr_assert_lt(d, 2.0, "the live view does not show the agent's screen (%.2f)", d);
	free(shot);

	/* what the agent does reaches the viewer */
	rfb_request(&v, true);
	char *before = title_now(a);
	json_decref(act_ok(a, "{\"type\":\"key\",\"keys\":\"x\"}"));
	char *t = wait_title(a, before, "key:x");
	free(t);
	cr_assert_gt(rfb_update(&v, 10), 0, "no update after the agent's key");

	/* what the viewer sends never reaches the desktop: pointer (a click on
	 * the page, a drag), keys, clipboard */
	free(before);
	before = title_now(a);
	unsigned char ev[8] = {5, 1};
	dg_put16(ev + 2, 300);
	dg_put16(ev + 4, 200);
	rfb_send(&v, ev, 6);
	ev[1] = 0;
	rfb_send(&v, ev, 6);
	dg_put16(ev + 2, 500);
	rfb_send(&v, ev, 6);
	unsigned char key[8] = {4, 1};
	dg_put32(key + 4, 'q');
	rfb_send(&v, key, 8);
	key[1] = 0;
	rfb_send(&v, key, 8);
	unsigned char cut[8 + 5] = {6};
	dg_put32(cut + 4, 5);
	memcpy(cut + 8, "hello", 5);
	rfb_send(&v, cut, sizeof(cut));
	rfb_request(&v, true);
	dg_ws_service(1500);
	t = title_now(a);
	cr_assert_str_eq(t, before, "a viewer's input reached the page");
	free(t);
	free(before);
	cr_assert(!dg_ws_closed(v.ws), "the viewer was closed for its input");

	/* hostile viewers: garbage instead of a version, a clipboard message
	 * over libvncserver's bound; each is closed, the agent carries on */
	struct dg_ws *g = ws_open(path, DG_TEST_VIEWER_TOKEN, "binary", 101);
	cr_assert_eq(dg_ws_send(g, true, "GARBAGE GARBAGE GARBAGE", 23), 0);
	struct dg_ws_msg m;
	int k;
	double end = dg_test_now() + 10;
	while ((k = dg_ws_recv(g, 1, &m)) >= 0 && dg_test_now() < end)
		if (k == 1)
			dg_ws_msg_free(&m);
	cr_assert(dg_ws_closed(g), "a viewer speaking garbage stayed connected");
	dg_ws_close(g);
	struct dg_rfb big;
	rfb_open(&big, &s, DG_TEST_VIEWER_TOKEN);
	unsigned char huge[8] = {6};
	dg_put32(huge + 4, 64u * 1024 * 1024);
	rfb_send(&big, huge, sizeof(huge));
	unsigned char junk[4096];
	memset(junk, 'A', sizeof(junk));
	for (int i = 0; i < 64 && !dg_ws_closed(big.ws); i++)
		dg_ws_send(big.ws, true, junk, sizeof(junk));
	end = dg_test_now() + 10;
	while (!dg_ws_closed(big.ws) && dg_test_now() < end)
		dg_ws_service(100);
	cr_assert(dg_ws_closed(big.ws), "a viewer sending 64 MiB of clipboard stayed connected");
	dg_rfb_close(&big);
	act_ok0(a, "{\"type\":\"move\",\"x\":10,\"y\":10}");

	/* at most DG_VIEWERS_MAX at once: v and seven more; the next is refused */
	struct dg_ws *more[DG_VIEWERS_MAX];
	for (int i = 0; i < DG_VIEWERS_MAX - 1; i++)
		more[i] = ws_open(path, DG_TEST_VIEWER_TOKEN, "binary", 101);
	ws_open(path, DG_TEST_VIEWER_TOKEN, "binary", 429);
	for (int i = 0; i < DG_VIEWERS_MAX - 1; i++)
		dg_ws_close(more[i]);
	dg_ws_service(500);

	/* a viewer that never reads while it keeps asking for whole screens,
	 * on a screen of noise: the agent is not slowed, the viewer is dropped */
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", noise_page);
	char *text = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	act_ok0(a, text);
	free(text);
	free(wait_title(a, NULL, "noise"));
	unsigned char *png;
	size_t len;
	double base = timed_moves(a, 15, &png, &len);
	free(png);
	struct dg_rfb slow;
	rfb_open(&slow, &s, DG_TEST_VIEWER_TOKEN);
	dg_ws_read_enable(slow.ws, false);
	for (int i = 0; i < 30; i++)
		rfb_request(&slow, false);
	double with_slow = timed_moves(a, 30, &png, &len);
	free(png);
	cr_log_info("agent move round trip, median: %.1f ms alone, %.1f ms with a live viewer that "
		    "does not read",
		    base, with_slow);
	cr_assert_lt(with_slow, 2 * base + 30, "the slow viewer slowed the agent: %.1f ms vs %.1f ms",
		     with_slow, base);
	dg_ws_read_enable(slow.ws, true);
	end = dg_test_now() + 20;
	while (!dg_ws_closed(slow.ws) && dg_test_now() < end) {
		if (dg_ws_recv(slow.ws, 0.5, &m) == 1)
			dg_ws_msg_free(&m);
	}
	cr_assert(dg_ws_closed(slow.ws), "the viewer that did not read was kept");
	dg_rfb_close(&slow);

	/* the first viewer still sees the screen as the agent does */
	rfb_request(&v, false);
	while (rfb_update(&v, 10) != 1280L * 800)
		rfb_request(&v, false);
	shot = agent_rgb(a, &w, &h);
	d = dg_rfb_diff(&v, shot);
	cr_assert_lt(d, 2.0, "the live view drifted from the agent's screen (%.2f)", d);
	free(shot);
	dg_rfb_close(&v);
	dg_ws_service(500);

	/* the recording has each viewer's coming and going, and no action of theirs */
	int opened = recorded(&s, "vnc_viewer", "open", NULL);
	int closed = recorded(&s, "vnc_viewer", "closed", NULL);
	cr_log_info("recorded %d live viewers opened, %d closed", opened, closed);
	cr_assert_geq(opened, 12);
	cr_assert_eq(opened, closed);
	cr_assert_eq(recorded(&s, "vnc_viewer", "closed", "the viewer reads too slowly"), 1,
		     "the slow viewer was not dropped for reading too slowly");
	dg_ws_close(a);
	json_decref(s.j);
	stop_server();
}

/* The pixels of an XWD file (xwd's output: a 32-bit TrueColor window) as
 * RGB; NULL when it is not one. */
static unsigned char *xwd_rgb(const unsigned char *d, size_t len, int *w, int *h)
{
	if (len < 100)
		return NULL;
	uint32_t f[25];
	for (int i = 0; i < 25; i++)
		f[i] = dg_be32(d + 4 * i);
	uint32_t hdr = f[0], bpp = f[11], bpl = f[12], ncolors = f[19];
	*w = (int)f[4];
	*h = (int)f[5];
	size_t off = hdr + (size_t)ncolors * 12;
	if (f[1] != 7 || bpp != 32 || *w <= 0 || *h <= 0 || off + (size_t)bpl * (size_t)*h > len)
		return NULL;
	bool msb = f[7] == 1; /* byte_order MSBFirst */
	unsigned char *rgb = malloc((size_t)*w * (size_t)*h * 3);
	for (int y = 0; y < *h; y++) {
		for (int x = 0; x < *w; x++) {
			const unsigned char *p = d + off + (size_t)y * bpl + (size_t)x * 4;
			uint32_t px = msb ? dg_be32(p) : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
			unsigned char *o = rgb + ((size_t)y * (size_t)*w + (size_t)x) * 3;
			o[0] = (unsigned char)((px & f[14]) >> __builtin_ctz(f[14]));
			o[1] = (unsigned char)((px & f[15]) >> __builtin_ctz(f[15]));
			o[2] = (unsigned char)((px & f[16]) >> __builtin_ctz(f[16]));
		}
	}
	return rgb;
}

/* Starts argv in the background (its output kept); asserts it started. */
static void start_bg(struct dg_proc *p, const char *const *argv, const char *const *envp)
{
	cr_assert_eq(dg_test_start(argv, envp, NULL, 0, -1, p), 0, "cannot start %s", argv[0]);
}

static void stop_bg(struct dg_proc *p)
{
	kill(p->pid, SIGTERM);
	struct dg_run r;
	dg_test_finish(p, 10, &r);
	dg_run_free(&r);
}

Test(gateway, vnc_a_debian_vnc_viewer_sees_the_desktop_through_deskgate_vnc)
{
	const char *viewer_bin = "/usr/bin/xtigervncviewer", *xvfb = "/usr/bin/Xvfb",
		   *xwd = "/usr/bin/xwd";
	cr_assert(access(viewer_bin, X_OK) == 0, "%s is missing: apt-get install tigervnc-viewer", viewer_bin);
	cr_assert(access(xvfb, X_OK) == 0, "%s is missing: apt-get install xvfb", xvfb);
	cr_assert(access(xwd, X_OK) == 0, "%s is missing: apt-get install x11-apps", xwd);
	serve("");
	struct sess s;
	create(&s, DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}");
	struct dg_ws *a = agent(&s, DG_TEST_AGENT_TOKEN);
	act_ok0(a, "{\"type\":\"type\",\"text\":\"echo seen through a VNC viewer\\n\"}");

	/* deskgate vnc on a free port, with the viewer's token */
	int port = dg_test_free_port();
	char listen[64], url[64], tok[128];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", srv.port);
	snprintf(tok, sizeof(tok), "DESKGATE_TOKEN=%s", DG_TEST_VIEWER_TOKEN);
	const char *bridge_argv[] = {DG_BIN, "vnc", "--session", s.id, "--listen", listen, "--url", url, NULL};
	const char *bridge_env[] = {tok, NULL};
	struct dg_proc bridge;
	start_bg(&bridge, bridge_argv, bridge_env);
	cr_assert_eq(dg_test_pump(&bridge, "listening on", 10), 1, "deskgate vnc did not listen: %s",
		     bridge.r.err ? bridge.r.err : "");

	/* TigerVNC's viewer on an X server of its own */
	char display[16];
	snprintf(display, sizeof(display), ":%d", 90 + (int)(getpid() % 500));
	const char *xvfb_argv[] = {xvfb, display, "-screen", "0", "1600x1000x24", "-nolisten", "tcp", NULL};
	struct dg_proc x;
	start_bg(&x, xvfb_argv, NULL);
	char sock[64];
	snprintf(sock, sizeof(sock), "/tmp/.X11-unix/X%s", display + 1);
	for (int i = 0; i < 100 && access(sock, F_OK) != 0; i++)
		usleep(50000);
	cr_assert(access(sock, F_OK) == 0, "Xvfb %s did not start", display);
	char server[64], denv[32];
	snprintf(server, sizeof(server), "127.0.0.1::%d", port);
	snprintf(denv, sizeof(denv), "DISPLAY=%s", display);
	const char *viewer_argv[] = {viewer_bin, "-ViewOnly", "-Shared", "-SecurityTypes", "None",
				     "-PreferredEncoding", "Tight", "-AutoSelect=0", "-FullColor",
				     "-NoJPEG", "-RemoteResize=0", server, NULL};
	const char *viewer_env[] = {denv, "HOME=/tmp", NULL};
	struct dg_proc vw;
	start_bg(&vw, viewer_argv, viewer_env);

	/* its window, once it shows the desktop: the agent's screenshot, closely */
	int w, h;
	unsigned char *shot = agent_rgb(a, &w, &h);
	double best = 1e9;
	int ww = 0, wh = 0;
	char *out = dg_test_write_tmp("viewer.xwd", "");
	double end = dg_test_now() + 30;
	while (dg_test_now() < end && best > 3) {
		usleep(500000);
		const char *xwd_argv[] = {xwd, "-display", display, "-name", "deskgate - TigerVNC", "-silent", "-out", out, NULL};
		struct dg_run r;
		if (dg_test_run(xwd_argv, NULL, NULL, 0, 10, -1, &r) != 0 || r.exit_code != 0) {
			dg_run_free(&r);
			continue;
		}
		dg_run_free(&r);
		char *data = dg_test_read_file(out);
		struct stat st;
		if (!data || stat(out, &st) != 0) {
			free(data);
			continue;
		}
		unsigned char *rgb = xwd_rgb((unsigned char *)data, (size_t)st.st_size, &ww, &wh);
		free(data);
		if (rgb && ww == w && wh == h) {
			double sum = 0;
			for (size_t i = 0; i < (size_t)w * (size_t)h * 3; i++)
				sum += abs(rgb[i] - shot[i]);
			double d = sum / ((double)w * h * 3);
			best = d < best ? d : best;
		}
		free(rgb);
	}
	cr_log_info("TigerVNC's window through deskgate vnc: %dx%d, mean difference %.2f from the "
		    "agent's screenshot", ww, wh, best);
	cr_assert(ww == w && wh == h, "the viewer's window is %dx%d, not the desktop's %dx%d", ww, wh, w, h);
	cr_assert_lt(best, 3.0, "the viewer's window does not show the desktop (%.2f)", best);
	free(shot);
	dg_test_rm_tmp(out);
	stop_bg(&vw);
	stop_bg(&x);
	/* the bridge stops cleanly on SIGTERM, saying what each viewer did */
	kill(bridge.pid, SIGTERM);
	struct dg_run br;
	dg_test_finish(&bridge, 10, &br);
	cr_log_info("deskgate vnc said:\n%s", br.err ? br.err : "");
	cr_assert_eq(br.exit_code, 0, "deskgate vnc exited %d: %s", br.exit_code, br.err ? br.err : "");
	cr_assert(br.err && strstr(br.err, "watching session"), "deskgate vnc never relayed a viewer");
	cr_assert(!strstr(br.err, "Sanitizer"), "a sanitizer report from deskgate vnc:\n%s", br.err);
	dg_run_free(&br);
	dg_ws_close(a);
	json_decref(s.j);
	stop_server();
}

/* ---- after everything ------------------------------------------------------------ */

/* Runs last (criterion orders tests by name). Every test above stopped its
 * server and checked its own jail slots; this checks the machine as a
 * whole: no jail or worker process, no jail cgroup that no live deskgate
 * owns. The live jails of other deskgate processes on the machine (other
 * test runs, a developer's server) are listed, not failed on. */
/* Jails under the gateway now. */
static int jails_now(void)
{
	uint32_t slots[16];
	return dg_test_slots_under(srv.pid, slots, 16);
}

/* The processes of jail slots under the gateway, "pid/slot/comm ...", for
 * a failure's message (static: valid until the next call). */
static const char *jail_procs(void)
{
	static struct dg_test_procs procs;
	static char out[2048];
	dg_test_procs_under(srv.pid, &procs);
	size_t n = 0;
	out[0] = '\0';
	for (int i = 0; i < procs.n && n < sizeof(out) - 80; i++) {
		char comm[32] = "?";
		dg_test_proc_status(procs.pid[i], "Name", comm, sizeof(comm));
		n += (size_t)snprintf(out + n, sizeof(out) - n, " %d/%u/%s", (int)procs.pid[i],
				      procs.slot[i], comm);
	}
	return out;
}

/* The warm pool: a session of the default size takes the started desktop
 * ("warm": true, no new jail for it), and the pool starts the next one no
 * sooner than DG_SPAWNER_REFILL_AFTER_MS after the hand-over (the new
 * session's first exchanges do not share the CPU with a desktop's start),
 * then within a bound; the next session takes that one. */
Test(gateway, the_warm_pool_hands_over_then_refills_after_a_pause)
{
	serve("\"limits\": {\"warm_xterm\": 1}");
	double end = dg_test_now() + 60;
	while (jails_now() < 1 && dg_test_now() < end)
		usleep(50000);
	cr_assert_eq(jails_now(), 1, "the pool did not start its desktop within 60 s");
	usleep(300000); /* a pool desktop is never started twice: still one */
	cr_assert_eq(jails_now(), 1, "the pool holds %d desktops, not 1", jails_now());
	/* The hand-over is after the POST was sent and before its 201, which
	 * can come much later on a loaded host (the desktop handed over may
	 * still be starting: the 201 waits for its READY). So the pause is
	 * checked from the POST's sending: no new jail before that + the pause. */
	double posted = dg_test_now();
	json_t *a = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 201);
	cr_assert(json_is_true(json_object_get(a, "warm")), "the session did not take the warm "
		  "desktop: %s", json_dumps(a, 0));
	double pause_end = posted + DG_SPAWNER_REFILL_AFTER_MS / 1000.0 - 0.1;
	/* each count with the time before it: a count begun before the pause's
	 * end that sees a second jail is a refill that came too soon */
	double at = dg_test_now();
	int seen = jails_now();
	if (at >= pause_end)
		cr_log_info("the 201 came %.0f ms after the POST: the pause was not checked",
			    (at - posted) * 1000);
	while (seen == 1 && at < pause_end) {
		usleep(20000);
		at = dg_test_now();
		seen = jails_now();
	}
	cr_assert(seen == 1 || at >= pause_end,
		  "the pool's next desktop started %.0f ms after the POST, before its %d ms pause:%s",
		  (at - posted) * 1000, DG_SPAWNER_REFILL_AFTER_MS, jail_procs());
	end = posted + 60;
	while (jails_now() < 2 && dg_test_now() < end)
		usleep(50000);
	cr_assert_eq(jails_now(), 2, "the pool was not refilled within 60 s of the hand-over");
	usleep(1000000); /* the refilled desktop's worker says READY */
	json_t *b = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 201);
	cr_assert(json_is_true(json_object_get(b, "warm")), "the second session found no warm "
		  "desktop: %s", json_dumps(b, 0));
	char path[160];
	json_t *ids[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/v1/sessions/%s",
			 json_string_value(json_object_get(ids[i], "id")));
		json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 200));
		json_decref(ids[i]);
	}
	note_slots();
}

Test(gateway, zz_nothing_of_deskgate_is_left_after_the_suite)
{
	char what[8192];
	int n = 0;
	for (int i = 0; i < 100 && (n = dg_test_leftovers_stale(what, sizeof(what))) != 0; i++)
		usleep(50000);
	cr_assert_eq(n, 0, "left behind: %s", what);
	if (dg_test_leftovers(what, sizeof(what)))
		cr_log_info("live jails of other deskgate processes: %s", what);
}

/* An upgrade to anything but a WebSocket gets a clear 400 with a fixed
 * reason (it once answered with an uninitialised status and reason). */
Test(gateway, a_non_websocket_upgrade_is_a_clear_400)
{
	serve("");
	const char req[] = "GET /v1/sessions/abc/ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
			   "Upgrade: h2c\r\n\r\n";
	struct dg_http r;
	cr_assert_eq(dg_test_http_raw(srv.port, req, sizeof(req) - 1, 10, &r), 0);
	cr_assert_eq(r.status, 400, "status %d: %s", r.status, r.body);
	cr_assert(strstr(r.body, "\"bad_request\"") && strstr(r.body, "only WebSocket upgrades"),
		  "%s", r.body);
	dg_http_free(&r);
	stop_server();
}
