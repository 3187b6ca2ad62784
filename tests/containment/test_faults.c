/* Fault tests (issue #9, part 3): kill -9 of each process type of `deskgate
 * serve` in the middle of sessions.
 *
 *  - Xvnc, Chromium (the browser process) and the worker of ONE session out
 *    of two: that session's agent is told the session ended, with a reason
 *    naming what died, and its in-flight action is answered and recorded;
 *    the session is gone (404, no process, no cgroup); the other session
 *    keeps working; both recordings verify as sealed.
 *  - the egress proxy: the sessions outlive it (their in-flight action is
 *    answered as usual) and the spawner starts a new one; recordings sealed
 *    (what the new proxy serves, and the give-up after repeated deaths:
 *    test_egress_restart.c).
 *  - the spawner: the gateway stops (with a failure status); no process of
 *    any session is left; the recordings are sealed (or sealed by the next
 *    start); the next start removes what is left and serves again.
 *  - the gateway: its spawner, egress proxy, workers and jails die with it;
 *    nothing new is mounted in the host's namespace; the next start in the
 *    same directories seals the orphaned recordings ("sealed after a
 *    crash", `deskgate verify` exit 0) and no jail, process or cgroup of the
 *    old slots is left.
 *
 * Each test starts its own server (dg_test_serve_start) and creates only the
 * desktops it needs. Bounds are generous (ASan, a loaded 2-core machine);
 * every wait polls a condition.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60.0     /* one action, at worst */
#define T_CREATE 120.0 /* one session creation, at worst */
#define T_END 30.0     /* from a kill to the session's "ended" */
#define T_GONE 30.0    /* from a session's end to nothing of it left */
/* The in-flight action: long enough that the kill lands while it runs. */
#define INFLIGHT "{\"type\":\"wait\",\"ms\":4000}"

static struct dg_server srv;
static char *mounts_before;

static void fixture_init(void)
{
	memset(&srv, 0, sizeof(srv));
	srv.pid = -1;
	mounts_before = dg_test_read_file("/proc/self/mountinfo");
}

static void fixture_fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, true); /* a failed test: keep the dir */
	free(mounts_before);
	mounts_before = NULL;
}

TestSuite(faults, .init = fixture_init, .fini = fixture_fini, .timeout = 540);

/* ---- the server ------------------------------------------------------------ */

static void serve(const char *extra)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_start(&srv, extra, 30, err, sizeof(err)), 0, "%s", err);
}

static char *log_tail(void)
{
	char *log = dg_test_serve_log(&srv);
	size_t l = strlen(log);
	if (l > 4000)
		memmove(log, log + l - 4000, 4001);
	return log;
}

static void assert_no_sanitizer_report(void)
{
	char *log = dg_test_serve_log(&srv);
	const char *san = strstr(log, "Sanitizer");
	cr_assert_null(san, "a sanitizer report in the server's log:\n%.3000s",
		       san ? (san - log > 200 ? san - 200 : log) : "");
	free(log);
}

/* The gateway's child or grandchild with this comm (the spawner; the
 * egress proxy, the spawner's child), or -1. */
static pid_t child_named(const char *comm)
{
	pid_t kids[16], grand[64];
	int n = dg_test_children(srv.pid, kids, 16);
	for (int i = 0; i < n; i++) {
		char v[64];
		if (dg_test_proc_status(kids[i], "Name", v, sizeof(v)) == 0 && strcmp(v, comm) == 0)
			return kids[i];
		int ng = dg_test_children(kids[i], grand, 64);
		for (int k = 0; k < ng; k++)
			if (dg_test_proc_status(grand[k], "Name", v, sizeof(v)) == 0 &&
			    strcmp(v, comm) == 0)
				return grand[k];
	}
	return -1;
}

static bool alive(pid_t p)
{
	char st[64];
	return p > 0 && dg_test_proc_status(p, "State", st, sizeof(st)) == 0 && st[0] != 'Z';
}

/* Stops the server and checks it stopped well: a clean exit, "stopped" in
 * its log, no sanitizer report, no child left. Removes its temp dir. */
static void stop_server(void)
{
	pid_t kids[16];
	int nk = dg_test_children(srv.pid, kids, 16);
	int st = dg_test_serve_stop(&srv, 60, true);
	char *tail = log_tail();
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "deskgate serve did not exit cleanly (status %d); log:\n%s", st, tail);
	cr_assert(strstr(tail, "deskgate: stopped"), "no 'deskgate: stopped' in the log:\n%s", tail);
	free(tail);
	assert_no_sanitizer_report();
	for (int i = 0; i < nk; i++) {
		double end = dg_test_now() + 10;
		while (alive(kids[i]) && dg_test_now() < end)
			usleep(20000);
		cr_assert(!alive(kids[i]), "the gateway's child %d outlived it", (int)kids[i]);
	}
	dg_test_serve_stop(&srv, 1, false);
}

/* ---- HTTP ---------------------------------------------------------------------- */

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

static const char *str(json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));
	return s ? s : "";
}

struct sess {
	uint32_t slot;
	char id[64];
	char token[128];
	char ws_path[128];
	char path[128];
	struct dg_ws *ws;
	int sent; /* actions sent on ws */
};

static struct dg_ws *agent_connect(struct sess *s)
{
	char proto[300], err[256];
	int status;
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", s->token);
	struct dg_ws *ws = dg_ws_connect(srv.port, s->ws_path, NULL, proto, 30, &status, err,
					 sizeof(err));
	cr_assert(ws, "connect %s: status %d: %s", s->ws_path, status, err);
	return ws;
}

/* The agent's next answer (frames before it dropped). */
static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

/* POST /v1/sessions, then the agent's WebSocket (hello read). */
static void create(struct sess *s, const char *profile)
{
	memset(s, 0, sizeof(*s));
	static struct dg_test_procs before;
	dg_test_procs_under(srv.pid, &before);
	char body[64];
	snprintf(body, sizeof(body), "{\"profile\":\"%s\"}", profile);
	json_t *j = http("POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, body, 201);
	cr_assert(j);
	snprintf(s->id, sizeof(s->id), "%s", str(j, "id"));
	snprintf(s->token, sizeof(s->token), "%s", str(j, "session_token"));
	json_decref(j);
	cr_assert(s->id[0] && s->token[0]);
	snprintf(s->ws_path, sizeof(s->ws_path), "/v1/sessions/%s/ws", s->id);
	snprintf(s->path, sizeof(s->path), "/v1/sessions/%s", s->id);
	char why[256];
	cr_assert_eq(dg_test_new_slot(srv.pid, &before, 3, &s->slot, why, sizeof(why)), 0,
		     "session %s: %s", s->id, why);
	s->ws = agent_connect(s);
	json_t *hello = recv_json(s->ws, 10);
	cr_assert_str_eq(str(hello, "type"), "hello");
	json_decref(hello);
}

/* A canonical action that must succeed (its frame read too). */
static void act_ok(struct sess *s, const char *action)
{
	cr_assert_eq(dg_ws_send_text(s->ws, action), 0, "send: the connection closed");
	s->sent++;
	json_t *j = recv_json(s->ws, T_ACT);
	char *dump = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(str(j, "type"), "result", "%s: %.300s", action, dump);
	cr_assert(json_is_true(json_object_get(j, "ok")), "%s failed: %.300s", action, dump);
	free(dump);
	if (json_object_get(j, "frame")) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(s->ws, T_ACT, &m), 1, "no frame after the result");
		cr_assert(m.binary);
		dg_ws_msg_free(&m);
	}
	json_decref(j);
}

static void some_actions(struct sess *s)
{
	act_ok(s, "{\"type\":\"screenshot\"}");
	act_ok(s, "{\"type\":\"move\",\"x\":321,\"y\":234}");
	act_ok(s, "{\"type\":\"click\",\"x\":400,\"y\":300}");
	act_ok(s, "{\"type\":\"type\",\"text\":\"ab\"}");
	act_ok(s, "{\"type\":\"key\",\"keys\":\"BackSpace BackSpace\"}");
}

/* Sends the in-flight action (not waiting for its answer) and waits until
 * the gateway has handed it to the worker: the session's "actions" count
 * (GET /v1/sessions/{id}) counts an action when it starts. */
static void send_inflight(struct sess *s)
{
	cr_assert_eq(dg_ws_send_text(s->ws, INFLIGHT), 0);
	s->sent++;
	double end = dg_test_now() + T_ACT;
	json_int_t n = -1;
	while (dg_test_now() < end) {
		json_t *j = http("GET", s->path, DG_TEST_AGENT_TOKEN, NULL, 200);
		n = json_integer_value(json_object_get(j, "actions"));
		json_decref(j);
		if (n >= s->sent)
			return;
		dg_ws_service(10);
	}
	cr_assert_fail("session %s: the in-flight action never started (%lld of %d counted)", s->id,
		       (long long)n, s->sent);
}

/* What the agent got until its session ended: the answer to its in-flight
 * action (NULL if none) and the "ended" message; the connection must then
 * close. */
struct ending {
	json_t *result;
	json_t *ended;
};

static void wait_ended(struct sess *s, double timeout_s, struct ending *e)
{
	e->result = e->ended = NULL;
	double end = dg_test_now() + timeout_s;
	while (!e->ended) {
		struct dg_ws_msg m;
		double left = end - dg_test_now();
		int r = dg_ws_recv(s->ws, left > 0 ? left : 0, &m);
		cr_assert_eq(r, 1, "session %s: %s", s->id,
			     r == 0 ? "no \"ended\" message in time" : "closed without an \"ended\" message");
		if (m.binary) {
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		dg_ws_msg_free(&m);
		const char *type = str(j, "type");
		if (strcmp(type, "ended") == 0) {
			e->ended = j;
		} else if (strcmp(type, "result") == 0 && !e->result) {
			e->result = j;
		} else {
			json_decref(j);
		}
	}
	struct dg_ws_msg m;
	while (dg_ws_recv(s->ws, end - dg_test_now() > 0 ? end - dg_test_now() : 0, &m) == 1)
		dg_ws_msg_free(&m);
	cr_assert(dg_ws_closed(s->ws), "the connection stayed open after \"ended\"");
}

static void ending_free(struct ending *e)
{
	json_decref(e->result);
	json_decref(e->ended);
}

/* The in-flight action was answered: a failed result saying why. A
 * non-fatal check (cr_expect), so that the test goes on to show what else
 * holds. */
static void expect_inflight_answered(const struct sess *s, const struct ending *e)
{
	char *dump = e->ended ? json_dumps(e->ended, JSON_COMPACT) : strdup("(none)");
	cr_expect(e->result, "session %s: the in-flight action got no answer before %s", s->id, dump);
	if (e->result) {
		char *rd = json_dumps(e->result, JSON_COMPACT);
		cr_expect(json_is_false(json_object_get(e->result, "ok")) && str(e->result, "error")[0],
			  "session %s: the in-flight action's answer is not a failure saying why: %.400s",
			  s->id, rd);
		free(rd);
	}
	free(dump);
}

/* ---- what is left ---------------------------------------------------------------- */

/* Processes whose real uid is the slot's jail or worker uid. Zombies are
 * not counted: they hold nothing but their pid, and the children of a
 * killed process wait as zombies until the host's init reaps them. */
static int slot_processes(uint32_t slot, char *what, size_t len)
{
	what[0] = '\0';
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char v[128];
		unsigned uid;
		pid_t p = (pid_t)atoi(e->d_name);
		if (dg_test_proc_status(p, "Uid", v, sizeof(v)) != 0 || sscanf(v, "%u", &uid) != 1 ||
		    !alive(p))
			continue;
		if (uid == DG_JAIL_ID_BASE + slot || uid == DG_WORKER_ID_BASE + slot) {
			char name[64] = "?";
			dg_test_proc_status(p, "Name", name, sizeof(name));
			size_t l = strlen(what);
			snprintf(what + l, len - l, "process %d %s (uid %u); ", (int)p, name, uid);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

static int wait_slot_processes_gone(uint32_t slot, double timeout_s, char *what, size_t len)
{
	double end = dg_test_now() + timeout_s;
	int n;
	while ((n = slot_processes(slot, what, len)) != 0 && dg_test_now() < end)
		usleep(20000);
	return n;
}

/* Nothing of the slot: processes and cgroups (dg_test_leftovers_slot). */
static void assert_slot_gone(const struct sess *s)
{
	char what[2048];
	double end = dg_test_now() + T_GONE;
	int n;
	while ((n = dg_test_leftovers_slot_live(s->slot, srv.pid, what, sizeof(what))) != 0 &&
	       dg_test_now() < end)
		usleep(20000);
	if (n) {
		char *tail = log_tail();
		cr_log_error("server log:\n%s", tail);
		free(tail);
	}
	cr_assert_eq(n, 0, "session %s (slot %u) left: %s", s->id, s->slot, what);
}

static void assert_no_new_mounts(void)
{
	char what[4096];
	int n = dg_test_new_mounts(mounts_before, what, sizeof(what));
	cr_assert_eq(n, 0, "new mounts in the host's namespace: %s", what);
}

static void session_404(const struct sess *s)
{
	json_decref(http("GET", s->path, DG_TEST_AGENT_TOKEN, NULL, 404));
}

/* ---- recordings ---------------------------------------------------------------- */

struct rec_check {
	char status[32];  /* deskgate verify's status */
	int exit_code;
	int actions;      /* "action" events */
	int action_errors; /* of which with an "error" */
	bool orphaned;
	char end_reason[512]; /* the lifecycle "ended" event's reason */
	char out[1024];
};

static void check_recording(const struct sess *s, struct rec_check *c)
{
	memset(c, 0, sizeof(*c));
	char dir[256], state[256], path[300];
	snprintf(dir, sizeof(dir), "%s/rec/%s", srv.dir, s->id);
	snprintf(state, sizeof(state), "%s/state", srv.dir);
	const char *argv[] = {DG_BIN, "verify", "--state-dir", state, "--json", dir, NULL};
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 120, -1, &r), 0);
	c->exit_code = r.exit_code;
	snprintf(c->out, sizeof(c->out), "%s%s", r.out, r.err);
	json_t *j = json_loads(r.out, 0, NULL);
	snprintf(c->status, sizeof(c->status), "%s", str(j, "status"));
	json_decref(j);
	dg_run_free(&r);
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s", path);
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *e = json_loads(line, 0, NULL);
		if (!e)
			continue;
		if (strcmp(str(e, "type"), "action") == 0) {
			c->actions++;
			c->action_errors += json_object_get(e, "error") != NULL &&
					    !json_is_null(json_object_get(e, "error"));
		}
		if (strcmp(str(e, "type"), "lifecycle") == 0 && strcmp(str(e, "state"), "ended") == 0)
			snprintf(c->end_reason, sizeof(c->end_reason), "%s", str(e, "reason"));
		if (strcmp(str(e, "type"), "lifecycle") == 0 && strcmp(str(e, "state"), "orphaned") == 0)
			c->orphaned = true;
		json_decref(e);
	}
	free(line);
	fclose(f);
}

/* A session that ended while the gateway ran: sealed, the end's reason
 * kept, and every action sent recorded (the in-flight one with its error;
 * errors < 0: not checked). The count is a non-fatal check. */
static void assert_sealed(const struct sess *s, const char *reason, int errors)
{
	struct rec_check c;
	check_recording(s, &c);
	cr_assert(c.exit_code == 0 && strcmp(c.status, "sealed") == 0,
		  "session %s: deskgate verify: exit %d, status %s: %s", s->id, c.exit_code, c.status,
		  c.out);
	if (reason)
		cr_assert_str_eq(c.end_reason, reason, "session %s: the recorded end", s->id);
	cr_expect_eq(c.actions, s->sent,
		     "session %s: %d actions sent, %d recorded (an event was lost)", s->id, s->sent,
		     c.actions);
	if (errors >= 0)
		cr_expect_eq(c.action_errors, errors, "session %s: %d failed actions recorded, want %d",
			     s->id, c.action_errors, errors);
}

/* ---- one process of one session killed ------------------------------------------ */

static bool names(const char *reason, const char *const *words)
{
	for (int i = 0; words[i]; i++) {
		if (strcasestr(reason, words[i]))
			return true;
	}
	return false;
}

enum victim { V_XVNC, V_CHROMIUM, V_WORKER };

static pid_t find_victim(enum victim v, const struct sess *s)
{
	switch (v) {
	case V_XVNC:
		return dg_test_find_live_process("Xvnc", DG_JAIL_ID_BASE + s->slot, false);
	case V_CHROMIUM:
		return dg_test_find_live_process("chromium", DG_JAIL_ID_BASE + s->slot, true);
	case V_WORKER:
		/* The worker is deskgate executed as /proc/self/exe: comm "exe". */
		return dg_test_find_live_process("exe", DG_WORKER_ID_BASE + s->slot, false);
	}
	return -1;
}

/* Through the gateway: a desktop's start runs without a CPU quota, and the
 * quota is written once the gateway saw the worker's READY (DG_SPAWN_STARTED),
 * long before the spawner's own bound (DG_SPAWNER_START_CPU_MS). In the
 * faults suite for its fini: a failed check leaves no gateway running. */
Test(faults, a_session_gets_its_cpu_quota_once_ready, .timeout = 120)
{
	serve("");
	struct sess a;
	create(&a, "xterm");
	pid_t xvnc = find_victim(V_XVNC, &a);
	cr_assert_gt(xvnc, 0, "no Xvnc in session %s (slot %u)", a.id, a.slot);
	char quota[32] = "";
	double end = dg_test_now() + 3;
	do {
		cr_assert_eq(dg_test_cpu_quota(xvnc, quota, sizeof(quota)), 0, "Xvnc's cgroup");
		if (strcmp(quota, "-1") != 0 && strcmp(quota, "max") != 0)
			break;
		usleep(20000);
	} while (dg_test_now() < end);
	cr_assert_str_eq(quota, "100000", "the default policy's cpus 1.0, 3 s after the session's 201");
	act_ok(&a, "{\"type\":\"screenshot\"}");
	dg_ws_close(a.ws);
	stop_server();
}

static void one_session_loses(enum victim v, const char *profile, const char *label,
			      const char *const *words)
{
	serve("");
	struct sess a, b;
	create(&a, profile);
	create(&b, profile);
	some_actions(&a);
	some_actions(&b);
	pid_t pa = find_victim(v, &a), pb = find_victim(v, &b);
	cr_assert_gt(pa, 0, "no %s in session %s (slot %u)", label, a.id, a.slot);
	cr_assert_gt(pb, 0, "no %s in session %s (slot %u)", label, b.id, b.slot);
	cr_assert_neq(pa, pb);

	/* In the middle of an action. */
	send_inflight(&a);
	double t0 = dg_test_now();
	cr_assert_eq(kill(pa, SIGKILL), 0);
	struct ending e;
	wait_ended(&a, T_END, &e);
	double took = dg_test_now() - t0;
	const char *reason = str(e.ended, "reason");
	cr_log_info("%s of session %s killed: \"ended\" after %.2f s, reason \"%s\"; in-flight "
		    "action answered: %s",
		    label, a.id, took, reason, e.result ? str(e.result, "error") : "(no answer)");
	cr_assert_str_eq(str(e.ended, "session"), a.id);
	cr_expect(names(reason, words), "the reason \"%s\" does not say the %s died", reason, label);
	expect_inflight_answered(&a, &e);
	session_404(&a);
	char end_reason[512];
	snprintf(end_reason, sizeof(end_reason), "%s", reason);
	ending_free(&e);

	/* The other session carries on, its own process untouched. */
	cr_assert(alive(pb), "the %s of the other session died too", label);
	some_actions(&b);
	json_t *h = http("GET", b.path, DG_TEST_AGENT_TOKEN, NULL, 200);
	cr_assert_str_eq(str(h, "state"), "ready");
	json_decref(h);
	assert_slot_gone(&a);
	some_actions(&b);

	/* b ends normally. */
	json_decref(http("DELETE", b.path, DG_TEST_AGENT_TOKEN, NULL, 200));
	wait_ended(&b, T_END, &e);
	cr_assert_str_eq(str(e.ended, "reason"), "deleted");
	ending_free(&e);
	assert_slot_gone(&b);
	assert_sealed(&a, end_reason, 1);
	assert_sealed(&b, "deleted", 0);
	dg_ws_close(a.ws);
	dg_ws_close(b.ws);
	stop_server();
	assert_no_new_mounts();
}

Test(faults, xvnc_killed_mid_action)
{
	static const char *const words[] = {"Xvnc", "X server", "RFB", "display", NULL};
	one_session_loses(V_XVNC, "xterm", "X server (Xvnc)", words);
}

Test(faults, chromium_killed_mid_action)
{
	static const char *const words[] = {"browser", "chromium", NULL};
	one_session_loses(V_CHROMIUM, "browser", "browser (chromium)", words);
}

Test(faults, worker_killed_mid_action)
{
	static const char *const words[] = {"worker", NULL};
	one_session_loses(V_WORKER, "xterm", "worker", words);
}

/* ---- the egress proxy ------------------------------------------------------------- */

Test(faults, egress_proxy_killed)
{
	serve("");
	struct sess a, b;
	create(&a, "xterm");
	create(&b, "xterm");
	some_actions(&a);
	some_actions(&b);
	pid_t egress = child_named("deskgate-egress");
	cr_assert_gt(egress, 0, "no egress proxy under the gateway");
	char v[128];
	unsigned uid;
	cr_assert_eq(dg_test_proc_status(egress, "Uid", v, sizeof(v)), 0);
	cr_assert(sscanf(v, "%u", &uid) == 1 && uid == dg_test_serve_uid(&srv) + 1,
		  "the egress proxy's uid: %s", v);

	send_inflight(&a);
	cr_assert_eq(kill(egress, SIGKILL), 0);
	/* The sessions outlive it: the in-flight action is answered as usual. */
	json_t *j = recv_json(a.ws, T_ACT);
	char *dump = json_dumps(j, JSON_COMPACT);
	cr_assert(strcmp(str(j, "type"), "result") == 0 && json_is_true(json_object_get(j, "ok")),
		  "the in-flight action after the proxy's death: %.300s", dump);
	free(dump);
	if (json_object_get(j, "frame")) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(a.ws, T_ACT, &m), 1, "no frame after the result");
		dg_ws_msg_free(&m);
	}
	json_decref(j);
	pid_t again = -1;
	for (double end = dg_test_now() + T_END; dg_test_now() < end; usleep(20000)) {
		again = child_named("deskgate-egress");
		if (again > 0 && again != egress && alive(again))
			break;
	}
	cr_assert(again > 0 && again != egress, "no new egress proxy after the kill");
	cr_assert(!alive(egress));
	some_actions(&a);
	some_actions(&b);
	int st;
	cr_assert_eq(waitpid(srv.pid, &st, WNOHANG), 0, "the gateway exited");
	j = http("GET", "/healthz", NULL, NULL, 200);
	cr_assert_eq(json_integer_value(json_object_get(j, "sessions")), 2);
	json_decref(j);

	struct ending e;
	json_decref(http("DELETE", a.path, DG_TEST_AGENT_TOKEN, NULL, 200));
	wait_ended(&a, T_END, &e);
	cr_assert_str_eq(str(e.ended, "reason"), "deleted");
	ending_free(&e);
	json_decref(http("DELETE", b.path, DG_TEST_AGENT_TOKEN, NULL, 200));
	wait_ended(&b, T_END, &e);
	cr_assert_str_eq(str(e.ended, "reason"), "deleted");
	ending_free(&e);
	assert_slot_gone(&a);
	assert_slot_gone(&b);
	assert_sealed(&a, "deleted", 0);
	assert_sealed(&b, "deleted", 0);
	dg_ws_close(a.ws);
	dg_ws_close(b.ws);
	stop_server();
	assert_no_new_mounts();
}

/* ---- the spawner ------------------------------------------------------------------ */

/* Waits for the gateway to exit on its own; returns its wait status, or -1. */
static int wait_exit(double timeout_s)
{
	double end = dg_test_now() + timeout_s;
	int st = 0;
	pid_t w;
	while ((w = waitpid(srv.pid, &st, WNOHANG)) == 0 && dg_test_now() < end)
		usleep(20000);
	return w == srv.pid ? st : -1;
}

/* The agent's connection closes (the gateway is gone); the "ended" message
 * when one came. */
static json_t *wait_closed(struct sess *s, double timeout_s)
{
	json_t *ended = NULL;
	double end = dg_test_now() + timeout_s;
	struct dg_ws_msg m;
	int r;
	while ((r = dg_ws_recv(s->ws, end - dg_test_now() > 0 ? end - dg_test_now() : 0, &m)) == 1) {
		if (!m.binary) {
			json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
			if (strcmp(str(j, "type"), "ended") == 0 && !ended)
				ended = json_incref(j);
			json_decref(j);
		}
		dg_ws_msg_free(&m);
	}
	cr_assert(dg_ws_closed(s->ws), "session %s: the agent's connection stayed open", s->id);
	return ended;
}

/* Cleanup of a dead gateway's leftovers by the next start, and a working
 * server after it. */
static void restart_and_check_cleanup(struct sess *ss, int n)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_restart(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < n; i++)
		assert_slot_gone(&ss[i]);
	char what[8192];
	double end = dg_test_now() + T_GONE;
	int left;
	while ((left = dg_test_leftovers_stale(what, sizeof(what))) != 0 && dg_test_now() < end)
		usleep(50000);
	cr_assert_eq(left, 0, "left behind after the restart: %s", what);
	assert_no_new_mounts();
	/* The recordings directory holds the sessions' recordings and nothing
	 * half-written. */
	char rec[200];
	snprintf(rec, sizeof(rec), "%s/rec", srv.dir);
	DIR *d = opendir(rec);
	cr_assert(d);
	struct dirent *e;
	int dirs = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		bool ours = false;
		for (int i = 0; i < n; i++)
			ours |= strcmp(e->d_name, ss[i].id) == 0;
		cr_assert(ours, "an unexpected entry in the recordings directory: %s", e->d_name);
		dirs++;
	}
	closedir(d);
	cr_assert_eq(dirs, n);
	/* The new server works. */
	struct sess c;
	create(&c, "xterm");
	some_actions(&c);
	json_decref(http("DELETE", c.path, DG_TEST_AGENT_TOKEN, NULL, 200));
	struct ending ec;
	wait_ended(&c, T_END, &ec);
	ending_free(&ec);
	assert_slot_gone(&c);
	dg_ws_close(c.ws);
}

Test(faults, spawner_killed)
{
	serve("");
	struct sess ss[2];
	create(&ss[0], "xterm");
	create(&ss[1], "xterm");
	some_actions(&ss[0]);
	some_actions(&ss[1]);
	pid_t spawner = child_named("deskgate-spawn");
	pid_t egress = child_named("deskgate-egress");
	cr_assert(spawner > 0 && egress > 0, "the spawner and the egress proxy");
	send_inflight(&ss[0]);
	cr_assert_eq(kill(spawner, SIGKILL), 0);

	/* The gateway cannot start or end a desktop without its spawner: it
	 * stops, and says why. */
	int st = wait_exit(60);
	char *tail = log_tail();
	cr_assert_neq(st, -1, "the gateway still runs 60 s after its spawner died; log:\n%s", tail);
	srv.pid = -1;
	cr_log_info("the gateway after its spawner was killed: %s %d; log:\n%s",
		    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		    tail);
	cr_assert(strstr(tail, "spawner"), "the log does not say the spawner died:\n%s", tail);
	free(tail);
	assert_no_sanitizer_report();
	/* The agents are told their session ended (by a gateway that is still
	 * alive to say so) before their connections close. */
	for (int i = 0; i < 2; i++) {
		json_t *ended = wait_closed(&ss[i], T_END);
		cr_log_info("session %s: %s%s", ss[i].id, ended ? "ended: " : "closed without \"ended\"",
			    ended ? str(ended, "reason") : "");
		cr_expect(ended && str(ended, "reason")[0],
			  "session %s: the agent's connection closed without an \"ended\" message "
			  "saying why", ss[i].id);
		json_decref(ended);
	}
	/* Nothing runs any more: no jail, no worker, no egress proxy. */
	for (int i = 0; i < 2; i++) {
		char what[2048];
		cr_assert_eq(wait_slot_processes_gone(ss[i].slot, T_GONE, what, sizeof(what)), 0,
			     "session %s (slot %u) left: %s", ss[i].id, ss[i].slot, what);
	}
	double end = dg_test_now() + T_GONE;
	while (alive(egress) && dg_test_now() < end)
		usleep(20000);
	cr_assert(!alive(egress), "the egress proxy outlived the gateway");
	assert_no_new_mounts();
	/* The recordings: sealed by the stopping gateway, or intact and sealed
	 * by the next start (checked after it). */
	for (int i = 0; i < 2; i++) {
		struct rec_check c;
		check_recording(&ss[i], &c);
		cr_log_info("session %s after the spawner died: %s", ss[i].id, c.out);
		cr_assert(strcmp(c.status, "sealed") == 0 || strcmp(c.status, "unsealed") == 0,
			  "session %s: %s", ss[i].id, c.out);
		if (strcmp(c.status, "sealed") == 0)
			cr_expect_eq(c.actions, ss[i].sent,
				     "session %s: %d actions sent, %d recorded (an event was lost)",
				     ss[i].id, ss[i].sent, c.actions);
	}
	/* A supervisor restarts a service that failed: losing the spawner is a
	 * failure, whatever the gateway did to stop cleanly. */
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) != 0,
		  "the gateway exited with status 0 after its spawner was killed: a supervisor "
		  "(Restart=on-failure) would not restart it");

	for (int i = 0; i < 2; i++) {
		char what[1024];
		if (dg_test_slot_cgroups(ss[i].slot, what, sizeof(what)))
			cr_log_info("slot %u before the restart (nobody could remove them with the spawner "
				    "dead): %s", ss[i].slot, what);
	}
	restart_and_check_cleanup(ss, 2);
	for (int i = 0; i < 2; i++) {
		struct rec_check c;
		check_recording(&ss[i], &c);
		cr_assert(c.exit_code == 0 && (strcmp(c.status, "sealed") == 0 ||
					       strcmp(c.status, "sealed-after-crash") == 0),
			  "session %s: %s", ss[i].id, c.out);
	}
	dg_ws_close(ss[0].ws);
	dg_ws_close(ss[1].ws);
	stop_server();
}

/* ---- the gateway ------------------------------------------------------------------ */

Test(faults, gateway_killed_then_next_start_cleans_up)
{
	serve("");
	struct sess ss[2];
	create(&ss[0], "xterm");
	create(&ss[1], "browser");
	some_actions(&ss[0]);
	some_actions(&ss[1]);
	int answered[2] = {ss[0].sent, ss[1].sent};
	pid_t spawner = child_named("deskgate-spawn");
	pid_t egress = child_named("deskgate-egress");
	cr_assert(spawner > 0 && egress > 0, "the spawner and the egress proxy");
	pid_t procs[8];
	int np = 0;
	procs[np++] = spawner;
	procs[np++] = egress;
	for (int i = 0; i < 2; i++) {
		procs[np++] = find_victim(V_WORKER, &ss[i]);
		procs[np++] = find_victim(V_XVNC, &ss[i]);
		cr_assert(procs[np - 2] > 0 && procs[np - 1] > 0, "session %s: worker and Xvnc",
			  ss[i].id);
	}
	send_inflight(&ss[0]);
	cr_assert_eq(dg_ws_send_text(ss[1].ws, "{\"type\":\"move\",\"x\":500,\"y\":500}"), 0);
	ss[1].sent++;
	pid_t gw = srv.pid;
	cr_assert_eq(kill(gw, SIGKILL), 0);
	int st;
	cr_assert_eq(waitpid(gw, &st, 0), gw);
	srv.pid = -1;

	/* Everything it ran dies with it. */
	double end = dg_test_now() + T_GONE;
	int left = np;
	while (left && dg_test_now() < end) {
		left = 0;
		for (int i = 0; i < np; i++)
			left += alive(procs[i]);
		if (left)
			usleep(20000);
	}
	for (int i = 0; i < np; i++) {
		char name[64] = "?";
		dg_test_proc_status(procs[i], "Name", name, sizeof(name));
		cr_assert(!alive(procs[i]), "process %d (%s) outlived the gateway's kill -9",
			  (int)procs[i], name);
	}
	for (int i = 0; i < 2; i++) {
		char what[2048];
		cr_assert_eq(wait_slot_processes_gone(ss[i].slot, T_GONE, what, sizeof(what)), 0,
			     "session %s (slot %u) left: %s", ss[i].id, ss[i].slot, what);
		cr_assert_null(wait_closed(&ss[i], T_END));
	}
	assert_no_new_mounts();
	/* What the dead gateway left: unsealed recordings, intact. */
	for (int i = 0; i < 2; i++) {
		struct rec_check c;
		check_recording(&ss[i], &c);
		cr_assert(c.exit_code == 1 && strcmp(c.status, "unsealed") == 0,
			  "session %s before the restart: %s", ss[i].id, c.out);
	}

	/* The next start in the same directories seals them. */
	restart_and_check_cleanup(ss, 2);
	char *log = dg_test_serve_log(&srv);
	for (int i = 0; i < 2; i++) {
		char want[200];
		snprintf(want, sizeof(want), "recording %s: sealed after a crash", ss[i].id);
		cr_assert(strstr(log, want), "the restarted server's log does not say \"%s\":\n%.3000s",
			  want, log);
		struct rec_check c;
		check_recording(&ss[i], &c);
		cr_assert(c.exit_code == 0 && strcmp(c.status, "sealed-after-crash") == 0,
			  "session %s after the restart: %s", ss[i].id, c.out);
		cr_assert(c.orphaned, "session %s: no \"orphaned\" event", ss[i].id);
		cr_assert_geq(c.actions, answered[i],
			      "session %s: %d actions answered before the kill, %d recorded", ss[i].id,
			      answered[i], c.actions);
	}
	free(log);
	dg_ws_close(ss[0].ws);
	dg_ws_close(ss[1].ws);
	stop_server();
}

/* The whole tree killed at once (the gateway and its spawner, as an OOM kill
 * of the service or `systemctl kill -s KILL` would): nobody is left to
 * remove the jails' cgroups, and the next start must. The spawner is
 * stopped first so that it cannot clean up between the two kills. */
Test(faults, gateway_and_spawner_killed_together_then_next_start_cleans_up)
{
	serve("");
	struct sess ss[2];
	create(&ss[0], "xterm");
	create(&ss[1], "xterm");
	some_actions(&ss[0]);
	some_actions(&ss[1]);
	int answered[2] = {ss[0].sent, ss[1].sent};
	pid_t spawner = child_named("deskgate-spawn");
	pid_t egress = child_named("deskgate-egress");
	cr_assert(spawner > 0 && egress > 0, "the spawner and the egress proxy");
	send_inflight(&ss[0]);
	cr_assert_eq(kill(spawner, SIGSTOP), 0);
	pid_t gw = srv.pid;
	cr_assert_eq(kill(gw, SIGKILL), 0);
	cr_assert_eq(kill(spawner, SIGKILL), 0);
	int st;
	cr_assert_eq(waitpid(gw, &st, 0), gw);
	srv.pid = -1;

	double end = dg_test_now() + T_GONE;
	while ((alive(spawner) || alive(egress)) && dg_test_now() < end)
		usleep(20000);
	cr_assert(!alive(spawner) && !alive(egress), "the spawner or the egress proxy survived");
	for (int i = 0; i < 2; i++) {
		char what[2048];
		cr_assert_eq(wait_slot_processes_gone(ss[i].slot, T_GONE, what, sizeof(what)), 0,
			     "session %s (slot %u) left: %s", ss[i].id, ss[i].slot, what);
		if (dg_test_slot_cgroups(ss[i].slot, what, sizeof(what)))
			cr_log_info("slot %u before the restart: %s", ss[i].slot, what);
		cr_assert_null(wait_closed(&ss[i], T_END));
	}
	assert_no_new_mounts();

	restart_and_check_cleanup(ss, 2);
	for (int i = 0; i < 2; i++) {
		struct rec_check c;
		check_recording(&ss[i], &c);
		cr_assert(c.exit_code == 0 && strcmp(c.status, "sealed-after-crash") == 0,
			  "session %s after the restart: %s", ss[i].id, c.out);
		cr_assert_geq(c.actions, answered[i],
			      "session %s: %d actions answered before the kill, %d recorded", ss[i].id,
			      answered[i], c.actions);
	}
	dg_ws_close(ss[0].ws);
	dg_ws_close(ss[1].ws);
	stop_server();
}
