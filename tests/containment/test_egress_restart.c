/* The egress proxy under supervision (issue #13): a real `deskgate serve`
 * whose policy lets sessions reach one loopback site (allowed.test) and a
 * loopback origin that never answers (hold.test), never a third site
 * (denied.test); the proxy's test-only resolver override maps the names.
 *
 *  - the proxy runs under its own seccomp filter;
 *  - SIGKILL of the proxy (found by its uid, under this gateway): the xterm
 *    session keeps running and answering; the connection it had in flight
 *    fails, and its recording says so; a new proxy is started by the
 *    spawner, after which curl from the same session reaches the allowed
 *    site again (absolute-form and CONNECT) and is still refused for the
 *    denied one; a new session can be created and gets out too; /metrics
 *    counts the restart; the log names the death and the restart;
 *  - DG_GW_EGRESS_DEATHS_MAX deaths in a row: the gateway stops restarting
 *    the proxy, ends every session saying why, answers 503 to new ones and
 *    stays up.
 * Both fail before supervision existed (the first death ended every
 * session and the proxy had no filter).
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress-priv.h"
#include "dg_test.h"
#include "dg_test_agent.h"
#include "server-priv.h"

#define T_ACT 60.0     /* one action, at worst (ASan, a loaded machine) */
#define T_CREATE 120.0 /* one session creation */
#define T_RESTART 30.0 /* a kill to the next proxy running */

static struct dg_server srv;
static struct dg_site allowed_site, denied_site;
static int hold_fd = -1, hold_port; /* an origin that accepts and never answers */
static char *policy_path;

static void site_handle(struct dg_site *s, int fd, const char *path)
{
	(void)s;
	(void)path;
	dg_site_reply(fd, "200 OK", "text/plain", "", "allowed site\n");
}

static void setup(void)
{
	memset(&srv, 0, sizeof(srv));
	srv.pid = -1;
	dg_site_start(&allowed_site, site_handle);
	dg_site_start(&denied_site, site_handle);
	hold_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	cr_assert(hold_fd >= 0 && bind(hold_fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		  listen(hold_fd, 8) == 0 && getsockname(hold_fd, (struct sockaddr *)&a, &len) == 0);
	hold_port = ntohs(a.sin_port);
	char policy[1024];
	snprintf(policy, sizeof(policy),
		 "{\"version\": 1, \"default\": \"deny\",\n"
		 " \"actions\": {\"allow\": [\"exec\", \"wait\", \"screenshot\"]},\n"
		 " \"egress\": {\"allow\": [\"allowed.test:%d\", \"hold.test:%d\"]}}\n",
		 allowed_site.port, hold_port);
	policy_path = dg_test_write_tmp("policy-egress-restart.json", policy);
}

static void teardown(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, true); /* a failed test: keep the dir */
	dg_site_stop(&allowed_site);
	dg_site_stop(&denied_site);
	if (hold_fd >= 0)
		close(hold_fd);
	hold_fd = -1;
	if (policy_path)
		dg_test_rm_tmp(policy_path);
	policy_path = NULL;
}

TestSuite(egress_restart, .init = setup, .fini = teardown, .timeout = 540);

static void serve(void)
{
	char r1[96], r2[96], r3[96], extra[512], err[2048];
	snprintf(r1, sizeof(r1), "allowed.test:%d=127.0.0.1:%d", allowed_site.port, allowed_site.port);
	snprintf(r2, sizeof(r2), "denied.test:%d=127.0.0.1:%d", denied_site.port, denied_site.port);
	snprintf(r3, sizeof(r3), "hold.test:%d=127.0.0.1:%d", hold_port, hold_port);
	const char *args[] = {"--test-resolve", r1, "--test-resolve", r2, "--test-resolve", r3, NULL};
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", policy_path);
	cr_assert_eq(dg_test_serve_start_args(&srv, extra, args, 30, err, sizeof(err)), 0, "%s", err);
}

static char *log_tail(void)
{
	char *log = dg_test_serve_log(&srv);
	size_t l = strlen(log);
	if (l > 4000)
		memmove(log, log + l - 4000, 4001);
	return log;
}

static bool log_has(const char *needle)
{
	char *log = dg_test_serve_log(&srv);
	bool has = strstr(log, needle) != NULL;
	free(log);
	return has;
}

/* Stops the server: a clean exit, no sanitizer report, nothing left of its
 * jails. */
static void stop_server(const uint32_t *slots, int n_slots)
{
	int st = dg_test_serve_stop(&srv, 60, true);
	char *tail = log_tail();
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "deskgate serve did not exit cleanly (status %d); log:\n%s", st, tail);
	free(tail);
	char *log = dg_test_serve_log(&srv);
	const char *san = strstr(log, "Sanitizer");
	cr_assert_null(san, "a sanitizer report in the server's log:\n%.3000s",
		       san ? (san - log > 200 ? san - 200 : log) : "");
	free(log);
	for (int i = 0; i < n_slots; i++) {
		char what[1024] = "";
		int left = -1;
		for (double end = dg_test_now() + 30; dg_test_now() < end; usleep(100000)) {
			left = dg_test_leftovers_slot_live(slots[i], -1, what, sizeof(what));
			if (left == 0)
				break;
		}
		cr_assert_eq(left, 0, "slot %u: left behind: %s", slots[i], what);
	}
	dg_test_serve_stop(&srv, 1, false);
}

/* ---- HTTP and sessions ------------------------------------------------------------ */

static const char *str(json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));
	return s ? s : "";
}

static json_t *http(const char *method, const char *path, const char *token, const char *body,
		    int want)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, method, path, token, body, T_CREATE, &r), 0,
		     "%s %s: no response", method, path);
	cr_assert_eq(r.status, want, "%s %s: status %d, want %d: %s", method, path, r.status, want,
		     r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	return j;
}

static char *metrics(void)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "GET", "/metrics", DG_TEST_ADMIN_TOKEN, NULL, 30, &r), 0);
	cr_assert_eq(r.status, 200, "GET /metrics: %d %s", r.status, r.body);
	char *b = strdup(r.body);
	dg_http_free(&r);
	return b;
}

struct sess {
	char id[64];
	char token[128];
	uint32_t slot;
	struct dg_ws *ws;
};

/* The agent's next answer (frames before it dropped). */
static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

/* The agent's side of a session the POST created (its answer: created),
 * before: the jail processes under the gateway before the POST. */
static void open_session(struct sess *s, json_t *created, const struct dg_test_procs *before)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->id, sizeof(s->id), "%s", str(created, "id"));
	snprintf(s->token, sizeof(s->token), "%s", str(created, "session_token"));
	cr_assert(s->id[0] && s->token[0], "not a created session: %s", json_dumps(created, 0));
	char why[256];
	cr_assert_eq(dg_test_new_slot(srv.pid, before, 3, &s->slot, why, sizeof(why)), 0,
		     "session %s: %s", s->id, why);
	char path[128], proto[300], err[256];
	int status;
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", s->id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", s->token);
	s->ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(s->ws, "connect %s: status %d: %s", path, status, err);
	json_t *hello = recv_json(s->ws, 10);
	cr_assert_str_eq(str(hello, "type"), "hello");
	json_decref(hello);
}

static void create(struct sess *s)
{
	static struct dg_test_procs before;
	dg_test_procs_under(srv.pid, &before);
	json_t *j = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 201);
	open_session(s, j, &before);
	json_decref(j);
}

/* The result of the action sent last (its frame, if any, read too). */
static json_t *result(struct sess *s, double timeout_s)
{
	json_t *j = recv_json(s->ws, timeout_s);
	cr_assert_str_eq(str(j, "type"), "result", "%.300s", json_dumps(j, JSON_COMPACT));
	if (json_object_get(j, "frame")) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(s->ws, T_ACT, &m), 1, "no frame after the result");
		dg_ws_msg_free(&m);
	}
	return j;
}

/* The action that runs curl in the session's jail (through the proxy, as
 * every exec has http_proxy set): prints "<http code> <curl's exit>". */
static void curl_action(char *out, size_t n, const char *args)
{
	snprintf(out, n,
		 "{\"type\":\"exec\",\"argv\":[\"/bin/sh\",\"-c\",\"curl -sS -m 20 -o /dev/null "
		 "-w '%%{http_code}' %s; echo \\\" $?\\\"\"]}",
		 args);
}

static void curl(struct sess *s, const char *args, const char *want)
{
	char action[1024];
	curl_action(action, sizeof(action), args);
	cr_assert_eq(dg_ws_send_text(s->ws, action), 0);
	json_t *r = result(s, T_ACT);
	json_t *ex = json_object_get(r, "exec");
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, json_dumps(r, 0));
	cr_assert(strstr(str(ex, "stdout"), want), "curl %s: stdout \"%s\", stderr \"%s\" (want %s)",
		  args, str(ex, "stdout"), str(ex, "stderr"), want);
	json_decref(r);
}

static void wait_ok(struct sess *s)
{
	cr_assert_eq(dg_ws_send_text(s->ws, "{\"type\":\"wait\",\"ms\":50}"), 0);
	json_t *r = result(s, T_ACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "wait: %s", json_dumps(r, 0));
	json_decref(r);
}

/* ---- the proxy -------------------------------------------------------------------- */

/* This gateway's proxy (other gateways may run on the machine), or -1. */
static pid_t proxy(void)
{
	return dg_test_find_descendant(srv.pid, "deskgate-egress", dg_test_serve_uid(&srv) + 1);
}

static long long metric(const char *text, const char *name);
static char *metrics(void);

/* Waits until the gateway runs a proxy again, its restarts counted at
 * restarts (the process exists before the gateway has its channel: the
 * metrics say when it does); returns it, checked to be other than old. */
static pid_t next_proxy(pid_t old, long long restarts, double timeout_s)
{
	double end = dg_test_now() + timeout_s;
	long long up = -1, n = -1;
	while (dg_test_now() < end) {
		char *m = metrics();
		up = metric(m, "deskgate_egress_up");
		n = metric(m, "deskgate_egress_restarts_total");
		free(m);
		if (up == 1 && n >= restarts)
			break;
		usleep(20000);
	}
	pid_t p = proxy();
	char *tail = log_tail();
	cr_assert(up == 1 && n == restarts && p > 0 && p != old,
		  "no new egress proxy within %.0f s (old %d, now %d, up %lld, restarts %lld); "
		  "log:\n%s", timeout_s, (int)old, (int)p, up, n, tail);
	free(tail);
	return p;
}

static void kill_proxy(pid_t p)
{
	cr_assert_eq(kill(p, SIGKILL), 0, "kill %d: %s", (int)p, strerror(errno));
	char st[64];
	for (double end = dg_test_now() + 10; dg_test_now() < end; usleep(10000))
		if (dg_test_proc_status(p, "State", st, sizeof(st)) != 0 || st[0] == 'Z')
			return;
	cr_assert_fail("the egress proxy %d did not die", (int)p);
}

static long long metric(const char *text, const char *name)
{
	char key[128];
	snprintf(key, sizeof(key), "\n%s ", name);
	const char *p = strstr(text, key);
	return p ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* The recording's events of type type (a JSON array, caller frees). */
static json_t *rec_events(const struct sess *s, const char *type)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/rec/%s/events.jsonl", srv.dir, s->id);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s: %s", path, strerror(errno));
	json_t *all = json_array();
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *e = json_loads(line, 0, NULL);
		if (e && strcmp(str(e, "type"), type) == 0)
			json_array_append(all, e);
		json_decref(e);
	}
	free(line);
	fclose(f);
	return all;
}

/* ---- tests -------------------------------------------------------------------------- */

Test(egress_restart, sessions_survive_a_proxy_death)
{
	serve();
	struct sess a;
	create(&a);
	char args[256];
	snprintf(args, sizeof(args), "http://allowed.test:%d/before", allowed_site.port);
	curl(&a, args, "200 0");
	cr_assert(dg_site_saw(&allowed_site, "GET /before "));

	pid_t p1 = proxy();
	cr_assert_gt(p1, 0, "no egress proxy under the gateway");
	char v[64];
	cr_assert_eq(dg_test_proc_status(p1, "Seccomp", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "2", "the egress proxy runs without a seccomp filter (Seccomp: %s)", v);
	cr_assert_eq(dg_test_proc_status(p1, "NoNewPrivs", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1");

	/* A connection in flight: relayed to an origin that never answers. */
	char action[1024];
	snprintf(args, sizeof(args), "http://hold.test:%d/held", hold_port);
	curl_action(action, sizeof(action), args);
	cr_assert_eq(dg_ws_send_text(a.ws, action), 0);
	int held = -1;
	for (double end = dg_test_now() + T_ACT; held < 0 && dg_test_now() < end;) {
		held = accept4(hold_fd, NULL, NULL, SOCK_CLOEXEC);
		if (held < 0)
			dg_ws_service(20);
	}
	cr_assert_geq(held, 0, "the held request never reached its origin");

	kill_proxy(p1);
	/* The request in flight fails (the proxy that relayed it is gone)... */
	json_t *r = result(&a, T_ACT);
	json_t *ex = json_object_get(r, "exec");
	cr_log_info("the request in flight: stdout \"%s\", stderr \"%s\"", str(ex, "stdout"),
		    str(ex, "stderr"));
	cr_assert(strncmp(str(ex, "stdout"), "000 ", 4) == 0 && !strstr(str(ex, "stdout"), " 0\n") &&
		  !strstr(str(ex, "stdout"), " 28"),
		  "the request in flight did not fail with the proxy: stdout \"%s\" stderr \"%s\"",
		  str(ex, "stdout"), str(ex, "stderr"));
	json_decref(r);
	close(held);

	/* ...the session does not: it answers actions at once. */
	wait_ok(&a);
	char spath[128];
	snprintf(spath, sizeof(spath), "/v1/sessions/%s", a.id);
	json_decref(http("GET", spath, DG_TEST_AGENT_TOKEN, NULL, 200));

	/* A new proxy, filtered too, serves the session's listener again with
	 * the session's own list: absolute-form and CONNECT reach the allowed
	 * site, the denied site is refused. */
	pid_t p2 = next_proxy(p1, 1, T_RESTART);
	cr_assert_eq(dg_test_proc_status(p2, "Seccomp", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "2", "the restarted proxy runs without a seccomp filter");
	snprintf(args, sizeof(args), "http://allowed.test:%d/after", allowed_site.port);
	curl(&a, args, "200 0");
	cr_assert(dg_site_saw(&allowed_site, "GET /after "));
	snprintf(args, sizeof(args), "-p http://allowed.test:%d/tunnel", allowed_site.port);
	curl(&a, args, "200 0");
	cr_assert(dg_site_saw(&allowed_site, "GET /tunnel "));
	snprintf(args, sizeof(args), "http://denied.test:%d/after", denied_site.port);
	curl(&a, args, "403 0");
	cr_assert_eq(dg_site_count(&denied_site), 0, "the denied site was reached");

	/* New sessions are created and get out through the new proxy. */
	struct sess b;
	create(&b);
	snprintf(args, sizeof(args), "http://allowed.test:%d/new-session", allowed_site.port);
	curl(&b, args, "200 0");

	char *m = metrics();
	cr_assert_eq(metric(m, "deskgate_egress_restarts_total"), 1, "metrics:\n%s", m);
	cr_assert_eq(metric(m, "deskgate_egress_up"), 1, "metrics:\n%s", m);
	free(m);
	char needle[128];
	snprintf(needle, sizeof(needle), "deskgate: egress: the proxy (pid %d) died", (int)p1);
	cr_assert(log_has(needle), "the death is not in the log");
	snprintf(needle, sizeof(needle), "deskgate: egress: restarted the proxy (pid %d", (int)p2);
	cr_assert(log_has(needle), "the restart is not in the log");
	snprintf(needle, sizeof(needle), "the egress proxy (pid %d) was killed by signal 9", (int)p1);
	cr_assert(log_has(needle), "the spawner did not log how the proxy ended");

	/* The recording: the death (with the held connection cut, by number),
	 * the restart, and connection numbers that go on after the death. */
	json_t *px = rec_events(&a, "egress_proxy");
	cr_assert_eq(json_array_size(px), 2, "egress_proxy events: %s", json_dumps(px, 0));
	json_t *died = json_array_get(px, 0), *back = json_array_get(px, 1);
	cr_assert_str_eq(str(died, "state"), "died");
	cr_assert_eq(json_integer_value(json_object_get(died, "connections_cut")), 1, "%s",
		     json_dumps(died, 0));
	cr_assert_str_eq(str(back, "state"), "restarted");
	cr_assert_eq(json_integer_value(json_object_get(back, "pid")), p2);
	json_decref(px);
	json_t *dec = rec_events(&a, "decision");
	json_int_t held_conn = -1, last_conn = -1;
	size_t i;
	json_t *e;
	json_array_foreach(dec, i, e) {
		if (strcmp(str(e, "layer"), "egress") != 0)
			continue;
		char hold_target[64];
		snprintf(hold_target, sizeof(hold_target), "hold.test:%d", hold_port);
		if (strcmp(str(e, "target"), hold_target) == 0)
			held_conn = json_integer_value(json_object_get(e, "conn"));
		last_conn = json_integer_value(json_object_get(e, "conn"));
	}
	json_decref(dec);
	cr_assert_gt(held_conn, 0, "no decision for the held connection");
	cr_assert_gt(last_conn, held_conn, "connection numbers did not go on after the restart");
	json_t *closed = rec_events(&a, "egress_closed");
	bool cut_seen = false;
	json_array_foreach(closed, i, e) {
		if (json_integer_value(json_object_get(e, "conn")) == held_conn) {
			cut_seen = strstr(str(e, "error"), "the egress proxy died") != NULL;
			cr_assert(!cut_seen || json_is_null(json_object_get(e, "bytes_up")));
		}
	}
	cr_assert(cut_seen, "the held connection's close does not say the proxy died: %s",
		  json_dumps(closed, 0));
	json_decref(closed);

	char *log = dg_test_serve_log(&srv);
	for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
		if (strstr(line, "egress"))
			cr_log_info("log: %s", line);
	free(log);

	uint32_t slots[2] = {a.slot, b.slot};
	dg_ws_close(a.ws);
	dg_ws_close(b.ws);
	stop_server(slots, 2);
}

Test(egress_restart, repeated_deaths_end_the_supervision)
{
	serve();
	struct sess a;
	create(&a);
	pid_t p = proxy();
	cr_assert_gt(p, 0, "no egress proxy under the gateway");
	for (int k = 1; k < DG_GW_EGRESS_DEATHS_MAX; k++) {
		kill_proxy(p);
		p = next_proxy(p, k, T_RESTART);
	}
	char *m = metrics();
	cr_assert_eq(metric(m, "deskgate_egress_restarts_total"), DG_GW_EGRESS_DEATHS_MAX - 1,
		     "metrics:\n%s", m);
	free(m);
	wait_ok(&a); /* still alive after DG_GW_EGRESS_DEATHS_MAX - 1 deaths */

	kill_proxy(p);
	/* The last straw: the session ends saying why. */
	json_t *ended = NULL;
	for (double end = dg_test_now() + T_ACT; !ended && dg_test_now() < end;) {
		struct dg_ws_msg msg;
		if (dg_ws_recv(a.ws, 1, &msg) != 1)
			continue;
		json_t *j = msg.binary ? NULL : json_loadb((const char *)msg.data, msg.len, 0, NULL);
		dg_ws_msg_free(&msg);
		if (j && strcmp(str(j, "type"), "ended") == 0)
			ended = j;
		else
			json_decref(j);
	}
	cr_assert(ended, "the session did not end after the last death");
	cr_log_info("ended: %s", str(ended, "reason"));
	char want[160];
	snprintf(want, sizeof(want), "the egress proxy died %d times within %d s",
		 DG_GW_EGRESS_DEATHS_MAX, DG_GW_EGRESS_WINDOW_MS / 1000);
	cr_assert(strstr(str(ended, "reason"), want), "reason: %s", str(ended, "reason"));
	json_decref(ended);

	/* No new proxy, new sessions refused, the gateway up. */
	usleep((DG_GW_EGRESS_BACKOFF_MAX_MS + 1000) * 1000);
	cr_assert_leq(proxy(), 0, "a proxy was started after the supervision gave up");
	json_t *j = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}", 503);
	cr_assert(j && json_object_get(j, "error"), "the 503 is not a JSON error");
	json_decref(j);
	json_decref(http("GET", "/healthz", NULL, NULL, 200));
	m = metrics();
	cr_assert_eq(metric(m, "deskgate_egress_up"), 0, "metrics:\n%s", m);
	cr_assert_eq(metric(m, "deskgate_egress_restarts_total"), DG_GW_EGRESS_DEATHS_MAX - 1);
	free(m);
	cr_assert(log_has("not restarting it"), "the give-up is not in the log");
	int st;
	cr_assert_eq(waitpid(srv.pid, &st, WNOHANG), 0, "the gateway exited");
	dg_ws_close(a.ws);
	uint32_t slots[1] = {a.slot};
	stop_server(slots, 1);
}

/* A session created while no proxy runs waits for the next one. The gap is
 * made long and the order certain by stopping the spawner: the create is
 * queued to it before the proxy dies, the request for a new proxy after;
 * once the spawner goes on, the desktop is handed over while no proxy runs,
 * and the new proxy is handed its listener with the others. */
Test(egress_restart, a_session_created_without_a_proxy_waits_for_the_next)
{
	serve();
	struct sess a;
	create(&a);
	pid_t spawner = dg_test_find_descendant(srv.pid, "deskgate-spawn", 0);
	cr_assert_gt(spawner, 0, "no spawner under the gateway");
	pid_t p1 = proxy();
	cr_assert_gt(p1, 0);

	static struct dg_test_procs before;
	dg_test_procs_under(srv.pid, &before);
	cr_assert_eq(kill(spawner, SIGSTOP), 0);
	int fd = dg_test_tcp_connect(srv.port);
	cr_assert_geq(fd, 0);
	static const char body[] = "{\"profile\":\"xterm\"}";
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
			 "Content-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s",
			 DG_TEST_AGENT_TOKEN, sizeof(body) - 1, body);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	/* The gateway counts the session once it asked the spawner for it. */
	json_int_t live = 0;
	for (double end = dg_test_now() + 30; live < 2 && dg_test_now() < end; usleep(20000)) {
		json_t *h = http("GET", "/healthz", NULL, NULL, 200);
		live = json_integer_value(json_object_get(h, "sessions"));
		json_decref(h);
	}
	cr_assert_eq(live, 2, "the create request did not reach the gateway");
	kill_proxy(p1);
	bool asked = false;
	for (double end = dg_test_now() + 30; !asked && dg_test_now() < end; usleep(20000))
		asked = log_has("restarting it in");
	cr_assert(asked, "the gateway did not schedule a restart");
	usleep((DG_GW_EGRESS_BACKOFF_MS + 500) * 1000); /* its request is queued too */
	cr_assert_leq(proxy(), 0, "a proxy runs while the spawner is stopped");
	cr_assert_eq(kill(spawner, SIGCONT), 0);

	char resp[8192];
	size_t got = 0;
	for (double end = dg_test_now() + T_CREATE; dg_test_now() < end && got < sizeof(resp) - 1;) {
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t k = read(fd, resp + got, sizeof(resp) - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	resp[got] = '\0';
	cr_assert(strncmp(resp, "HTTP/1.1 201", 12) == 0, "the create during the gap: %.500s", resp);
	const char *json = strstr(resp, "\r\n\r\n");
	json_t *created = json ? json_loads(json + 4, 0, NULL) : NULL;
	cr_assert(created, "no JSON in %.500s", resp);
	struct sess b;
	open_session(&b, created, &before);
	json_decref(created);

	next_proxy(p1, 1, T_RESTART);
	char args[256];
	snprintf(args, sizeof(args), "http://allowed.test:%d/gap-session", allowed_site.port);
	curl(&b, args, "200 0");
	snprintf(args, sizeof(args), "http://allowed.test:%d/old-session", allowed_site.port);
	curl(&a, args, "200 0");
	cr_assert(log_has("handed it the listeners of 2 sessions"), "both sessions were not handed over");
	/* The new session's recording: served by the new proxy, no death of its
	 * own to report. */
	json_t *px = rec_events(&b, "egress_proxy");
	cr_assert_eq(json_array_size(px), 1, "egress_proxy events: %s", json_dumps(px, 0));
	cr_assert_str_eq(str(json_array_get(px, 0), "state"), "restarted");
	json_decref(px);

	uint32_t slots[2] = {a.slot, b.slot};
	dg_ws_close(a.ws);
	dg_ws_close(b.ws);
	stop_server(slots, 2);
}
