/* Recordings made by the gateway (issue #6): every session is recorded and
 * sealed, a kill -9 of the gateway under load leaves every event before it
 * intact and the next start seals the orphan, a session recorded under a
 * permissive policy replays with exactly the expected changes under a
 * strict one, redaction keeps typed text out, and the HTTP endpoints refuse
 * path traversal and the wrong tokens. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60

static struct dg_server srv;

static void fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
	else if (srv.dir[0])
		dg_test_serve_stop(&srv, 1, false);
}

TestSuite(gateway_recordings, .fini = fini, .timeout = 300);

static void serve(const char *extra)
{
	char err[1024];
	cr_assert_eq(dg_test_serve_start(&srv, extra, 30, err, sizeof(err)), 0, "%s", err);
}

static json_t *http(const char *method, const char *path, const char *token, int want)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, method, path, token, NULL, 30, &r), 0, "%s", path);
	cr_assert_eq(r.status, want, "%s %s: %d (want %d): %.300s", method, path, r.status, want,
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
	char id[64];
	struct dg_ws *ws;
};

static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

static void open_session(struct sess *s, const char *body)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, body, 60, &r), 0);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	snprintf(s->id, sizeof(s->id), "%s", str(j, "id"));
	char path[128], proto[300], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", s->id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	s->ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(s->ws, "connect: %d %s", status, err);
	json_decref(recv_json(s->ws, 10));
}

static json_t *act(struct sess *s, const char *action)
{
	cr_assert_eq(dg_ws_send_text(s->ws, action), 0);
	return recv_json(s->ws, T_ACT);
}

static void end_session(struct sess *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s->id);
	dg_ws_close(s->ws);
	json_decref(http("DELETE", path, DG_TEST_AGENT_TOKEN, 200));
}

static void rec_dir(const struct sess *s, char *out, size_t n)
{
	snprintf(out, n, "%s/rec/%s", srv.dir, s->id);
}

/* `deskgate verify --state-dir` on a recording: its exit code and output. */
static int verify(const char *dir, struct dg_run *r)
{
	char state[256];
	snprintf(state, sizeof(state), "%s/state", srv.dir);
	const char *argv[] = {DG_BIN, "verify", "--state-dir", state, dir, NULL};
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 60, -1, r), 0);
	return r->exit_code;
}

/* The events of a recording, as JSON, in order. */
static json_t *events(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "r");
	cr_assert(f, "%s", path);
	json_t *list = json_array();
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

Test(gateway_recordings, a_session_is_recorded_sealed_and_served)
{
	serve("");
	struct sess s;
	open_session(&s, "{\"profile\":\"xterm\"}");
	json_decref(act(&s, "{\"type\":\"click\",\"x\":300,\"y\":300}"));
	json_decref(act(&s, "{\"type\":\"type\",\"text\":\"echo hi\\n\"}"));
	json_decref(act(&s, "{\"type\":\"key\",\"keys\":\"ctrl+l\"}"));
	char path[256];
	/* Live: listed, not verified yet. */
	json_t *list = http("GET", "/v1/recordings", DG_TEST_VIEWER_TOKEN, 200);
	json_t *first = json_array_get(json_object_get(list, "recordings"), 0);
	cr_assert_str_eq(str(first, "id"), s.id);
	cr_assert(json_is_true(json_object_get(first, "live")));
	cr_assert_null(json_object_get(first, "policy"), "the list carries no policy text");
	json_decref(list);
	end_session(&s);
	snprintf(path, sizeof(path), "/v1/recordings/%s", s.id);
	json_t *info = http("GET", path, DG_TEST_VIEWER_TOKEN, 200);
	json_t *v = json_object_get(info, "verify");
	cr_assert_str_eq(str(v, "status"), "sealed", "%s", str(v, "message"));
	cr_assert_str_eq(str(info, "token_name"), "env-agent");
	cr_assert_null(json_object_get(info, "redaction_salt"));
	json_decref(info);

	char dir[256];
	rec_dir(&s, dir, sizeof(dir));
	struct dg_run r;
	cr_assert_eq(verify(dir, &r), 0, "%s%s", r.out, r.err);
	dg_run_free(&r);
	json_t *ev = events(dir);
	size_t i;
	json_t *e;
	int actions = 0;
	char frame[80] = "";
	json_array_foreach(ev, i, e) {
		if (strcmp(str(e, "type"), "action") == 0) {
			actions++;
			cr_assert_str_eq(str(e, "verdict"), "allow");
			cr_assert(json_object_get(e, "input"), "an action event without the input");
			snprintf(frame, sizeof(frame), "%s", str(e, "frame_after"));
		}
	}
	cr_assert_eq(actions, 3);
	cr_assert_str_eq(str(json_array_get(ev, json_array_size(ev) - 1), "type"), "seal");
	json_decref(ev);
	/* The events and a frame over HTTP. */
	snprintf(path, sizeof(path), "/v1/recordings/%s/events", s.id);
	struct dg_http h;
	cr_assert_eq(dg_test_http(srv.port, "GET", path, DG_TEST_VIEWER_TOKEN, NULL, 10, &h), 0);
	cr_assert_eq(h.status, 200);
	cr_assert(strstr(h.body, "\"type\":\"seal\""));
	dg_http_free(&h);
	cr_assert_eq(strlen(frame), 64, "frame_after: \"%s\"", frame);
	snprintf(path, sizeof(path), "/v1/recordings/%s/frames/%s.png", s.id, frame);
	cr_assert_eq(dg_test_http(srv.port, "GET", path, DG_TEST_VIEWER_TOKEN, NULL, 10, &h), 0);
	cr_assert_eq(h.status, 200);
	cr_assert(h.body_len > 8 && memcmp(h.body, "\x89PNG", 4) == 0);
	dg_http_free(&h);

	/* Wrong tokens and hostile paths. */
	json_decref(http("GET", "/v1/recordings", DG_TEST_AGENT_TOKEN, 403));
	json_decref(http("GET", "/v1/recordings", NULL, 401));
	const char *bad[] = {
		"/v1/recordings/..", "/v1/recordings/../state/tokens.json",
		"/v1/recordings/%2e%2e/state", "/v1/recordings/.deleting-x",
		"/v1/recordings/ABC", "/v1/recordings/a%2fb",
		"/v1/recordings/x/events/../../../etc/passwd",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		cr_assert_eq(dg_test_http(srv.port, "GET", bad[k], DG_TEST_VIEWER_TOKEN, NULL, 10, &h), 0);
		cr_assert(h.status == 404 || h.status == 400 || h.status == 403, "%s: %d", bad[k], h.status);
		cr_assert(!strstr(h.body, "root:") && !strstr(h.body, "\"tokens\""), "%s leaked", bad[k]);
		dg_http_free(&h);
	}
	char bads[4][256];
	snprintf(bads[0], 256, "/v1/recordings/%s/frames/../session.json", s.id);
	snprintf(bads[1], 256, "/v1/recordings/%s/frames/%.60s.png", s.id, frame);
	snprintf(bads[2], 256, "/v1/recordings/%s/frames/%sX.png", s.id, frame);
	snprintf(bads[3], 256, "/v1/recordings/%s/session.json", s.id);
	for (int k = 0; k < 4; k++) {
		cr_assert_eq(dg_test_http(srv.port, "GET", bads[k], DG_TEST_VIEWER_TOKEN, NULL, 10, &h), 0);
		cr_assert(h.status == 404 || h.status == 400, "%s: %d", bads[k], h.status);
		dg_http_free(&h);
	}
}

/* kill -9 of the gateway while an agent acts: every event before the kill
 * is intact, and the next start seals the orphan ("sealed after a crash"). */
Test(gateway_recordings, kill_9_of_the_gateway_keeps_every_event)
{
	serve("");
	struct sess s;
	open_session(&s, "{\"profile\":\"xterm\"}");
	int done = 0;
	for (int i = 0; i < 25; i++) {
		char a[128];
		snprintf(a, sizeof(a), "{\"type\":\"move\",\"x\":%d,\"y\":%d}", 100 + i * 7, 200 + i * 3);
		json_t *r = act(&s, a);
		cr_assert(json_is_true(json_object_get(r, "ok")));
		json_decref(r);
		done++;
	}
	/* And in the middle of more, without waiting for the answers. */
	for (int i = 0; i < 4; i++)
		dg_ws_send_text(s.ws, "{\"type\":\"move\",\"x\":500,\"y\":500}");
	usleep(30000);
	cr_assert_eq(kill(srv.pid, SIGKILL), 0);
	waitpid(srv.pid, NULL, 0);
	srv.pid = -1;
	dg_ws_close(s.ws);
	char dir[256];
	rec_dir(&s, dir, sizeof(dir));
	struct dg_run r;
	cr_assert_eq(verify(dir, &r), 1, "an orphan must not verify as sealed: %s", r.out);
	cr_assert(strstr(r.out, "not sealed") || strstr(r.out, "unsealed"), "%s", r.out);
	dg_run_free(&r);
	/* The next start cleans up and seals it. */
	char err[1024];
	cr_assert_eq(dg_test_serve_restart(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(verify(dir, &r), 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "after a crash"), "%s", r.out);
	dg_run_free(&r);
	json_t *ev = events(dir);
	size_t i;
	json_t *e;
	int moves = 0;
	bool orphaned = false;
	json_array_foreach(ev, i, e) {
		if (strcmp(str(e, "type"), "action") == 0)
			moves++;
		if (strcmp(str(e, "state"), "orphaned") == 0)
			orphaned = true;
	}
	cr_assert(orphaned);
	cr_assert_geq(moves, done, "%d actions answered before the kill, %d recorded", done, moves);
	json_decref(ev);
	char what[2048];
	cr_assert_eq(dg_test_leftovers_stale(what, sizeof(what)), 0, "left behind: %s", what);
}

/* A permissive recording replayed under a strict policy: exactly the
 * expected verdicts change. */
Test(gateway_recordings, replay_under_a_stricter_policy)
{
	serve("");
	struct sess s;
	open_session(&s, "{\"profile\":\"xterm\"}");
	const char *acts[] = {
		"{\"type\":\"click\",\"x\":600,\"y\":400}",       /* stays allowed */
		"{\"type\":\"type\",\"text\":\"BEGIN RSA PRIVATE KEY\"}", /* text.deny */
		"{\"type\":\"key\",\"keys\":\"ctrl+alt+t\"}",     /* keys.deny */
		"{\"type\":\"key\",\"keys\":\"Return\"}",         /* stays allowed */
		"{\"type\":\"mouse_down\"}",                      /* default deny */
		"{\"type\":\"mouse_up\"}",                        /* default deny */
		/* Last: the pointer stays in the top bar, and keyboard input
		 * there is the region's too. */
		"{\"type\":\"click\",\"x\":600,\"y\":10}",        /* top bar: deny */
	};
	for (size_t i = 0; i < sizeof(acts) / sizeof(acts[0]); i++)
		json_decref(act(&s, acts[i]));
	end_session(&s);
	char *strict = dg_test_write_tmp("strict.json",
		"{\"version\": 1, \"default\": \"deny\",\n"
		" \"actions\": {\"allow\": [\"click\", \"type\", \"key\", \"screenshot\"]},\n"
		" \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"verdict\": \"deny\"}],\n"
		" \"keys\": {\"deny\": [\"ctrl+alt+*\"]},\n"
		" \"text\": {\"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]}}\n");
	char dir[256];
	rec_dir(&s, dir, sizeof(dir));
	const char *argv[] = {DG_BIN, "replay", "--policy", strict, "--json", dir, NULL};
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 60, -1, &r), 0);
	cr_assert_eq(r.exit_code, 1, "%s%s", r.out, r.err);
	/* One JSON object a line: the changes, then a summary. */
	const char *want_rules[] = {"text.deny[0]", "keys.deny[0]", "default", "default",
				    "regions[top-bar]"};
	int n = 0;
	char *save = NULL;
	for (char *line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert(j, "not JSON: %s", line);
		const char *rule = str(j, "rule");
		if (json_object_get(j, "new") || json_object_get(j, "new_verdict")) {
			cr_assert_lt(n, 5, "more changes than expected: %s", line);
			cr_assert(strncmp(rule, want_rules[n], strlen(want_rules[n])) == 0,
				  "change %d: rule %s, want %s (%s)", n, rule, want_rules[n], line);
			n++;
		}
		json_decref(j);
	}
	cr_assert_eq(n, 5, "changes: %d\n%s", n, r.out);
	dg_run_free(&r);
	dg_test_rm_tmp(strict);
}

/* recording.redact_text: typed text never reaches the disk in clear. */
Test(gateway_recordings, redaction_keeps_typed_text_out)
{
	char *pol = dg_test_write_tmp("redact.json", "{\"version\": 1, \"recording\": {\"redact_text\": true}}\n");
	char extra[512];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", pol);
	serve(extra);
	struct sess s;
	open_session(&s, "{\"profile\":\"xterm\"}");
	json_t *r = act(&s, "{\"type\":\"type\",\"text\":\"hunter2-secret\"}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	json_decref(r);
	end_session(&s);
	char dir[256], path[300];
	rec_dir(&s, dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "r");
	cr_assert(f);
	char *buf = calloc(1, 1 << 20);
	size_t n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	cr_assert_gt(n, 0);
	cr_assert_null(strstr(buf, "hunter2"), "typed text in the recording");
	cr_assert(strstr(buf, "\"redacted\":true"), "no redaction marker");
	free(buf);
	struct dg_run vr;
	cr_assert_eq(verify(dir, &vr), 0, "%s", vr.out);
	dg_run_free(&vr);
	dg_test_rm_tmp(pol);
}
