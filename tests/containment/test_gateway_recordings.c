/* Recordings made by the gateway (issue #6): every session is recorded and
 * sealed, a kill -9 of the gateway under load leaves every event before it
 * intact and the next start seals the orphan, a session recorded under a
 * permissive policy replays with exactly the expected changes under a
 * strict one, redaction keeps typed text out, and the HTTP endpoints refuse
 * path traversal and the wrong tokens; recordings as videos (issue #21),
 * checked with ffprobe (spawned without a shell). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- videos ---------------------------------------------------------------- */

#define T_EXPORT 300

/* An xterm session of three actions, ended (its recording sealed). */
static void record(struct sess *s)
{
	open_session(s, "{\"profile\":\"xterm\"}");
	const char *acts[] = {"{\"type\":\"click\",\"x\":300,\"y\":300}",
			      "{\"type\":\"type\",\"text\":\"echo video\\n\"}",
			      "{\"type\":\"key\",\"keys\":\"ctrl+l\"}"};
	for (int i = 0; i < 3; i++) {
		json_t *r = act(s, acts[i]);
		cr_assert(json_is_true(json_object_get(r, "ok")), "%s", acts[i]);
		json_decref(r);
	}
	end_session(s);
}

static void get(const char *id, const char *tail, const char *token, struct dg_http *r)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/recordings/%s%s", id, tail);
	cr_assert_eq(dg_test_http(srv.port, "GET", path, token, NULL, T_EXPORT, r), 0, "%s", path);
}

/* Writes the body to BUILD's tmp file and checks it with ffprobe. */
static void probe(const struct dg_http *r, const char *fmt)
{
	char file[256];
	snprintf(file, sizeof(file), "%s/video.%s", srv.dir, fmt);
	FILE *f = fopen(file, "w");
	cr_assert(f, "%s", file);
	cr_assert_eq(fwrite(r->body, 1, r->body_len, f), r->body_len);
	fclose(f);
	const char *argv[] = {"/usr/bin/ffprobe", "-v", "error", "-select_streams", "v:0",
			      "-count_frames", "-show_entries",
			      "stream=codec_name,nb_read_frames:format=format_name,duration", "-of",
			      "json", file, NULL};
	struct dg_run run;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 120, -1, &run), 0);
	cr_assert_eq(run.exit_code, 0, "ffprobe %s: %s", file, run.err);
	json_t *j = json_loads(run.out, 0, NULL);
	cr_assert(j, "ffprobe: %s", run.out);
	json_t *st = json_array_get(json_object_get(j, "streams"), 0), *fm = json_object_get(j, "format");
	const char *fname = str(fm, "format_name"), *codec = str(st, "codec_name");
	double dur = atof(str(fm, "duration"));
	long frames = atol(str(st, "nb_read_frames"));
	cr_assert(strcmp(fmt, "webm") == 0 ? strstr(fname, "webm") != NULL : strstr(fname, "mp4") != NULL,
		  "%s: format %s", fmt, fname);
	cr_assert(strcmp(fmt, "webm") == 0 ? strcmp(codec, "vp8") == 0 :
		  strcmp(codec, "h264") == 0 || strcmp(codec, "mpeg4") == 0, "%s: codec %s", fmt, codec);
	/* Three actions at 0.6 s, bounded pauses, the last screen's 1 s. */
	cr_assert(dur >= 2.5 && dur < 20, "%s: duration %g s", fmt, dur);
	cr_assert(frames >= 25, "%s: %ld frames", fmt, frames);
	cr_assert(r->body_len > 1000, "%s: %zu bytes", fmt, r->body_len);
	json_decref(j);
	dg_run_free(&run);
}

/* Sends GET path on a fresh connection with "Connection: close"; returns
 * the socket (the response is read by read_all). */
static int send_get(const char *id, const char *tail)
{
	int fd = dg_test_tcp_connect(srv.port);
	cr_assert_geq(fd, 0);
	char req[512];
	int n = snprintf(req, sizeof(req), "GET /v1/recordings/%s%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Authorization: Bearer %s\r\nConnection: close\r\n\r\n", id, tail,
			 DG_TEST_VIEWER_TOKEN);
	cr_assert_eq(write(fd, req, (size_t)n), n);
	return fd;
}

/* The status of the response on fd, read to its end; *body (malloc'd) its
 * first 4 KiB when body is not NULL. */
static int read_response(int fd, size_t *len, char **body)
{
	char head[4096] = "";
	size_t got = 0;
	char buf[65536];
	double end = dg_test_now() + T_EXPORT;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		cr_assert(dg_test_now() < end && poll(&p, 1, 1000) >= 0, "no response");
		if (!p.revents)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		if (got < sizeof(head) - 1) {
			size_t k = sizeof(head) - 1 - got < (size_t)n ? sizeof(head) - 1 - got : (size_t)n;
			memcpy(head + got, buf, k);
		}
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	int status = 0;
	sscanf(head, "HTTP/1.%*d %d", &status);
	if (body)
		*body = strdup(head);
	return status;
}

static int read_status(int fd, size_t *len)
{
	return read_response(fd, len, NULL);
}

static int read_status_body(int fd, char **body)
{
	size_t len;
	return read_response(fd, &len, body);
}

/* The gateway's export child (argv[1] "export"), waited for up to 30 s;
 * 0 when none came. */
static pid_t export_child(void)
{
	for (double end = dg_test_now() + 30; dg_test_now() < end; usleep(5000)) {
		pid_t kids[64];
		int n = dg_test_children(srv.pid, kids, 64);
		for (int i = 0; i < n; i++) {
			char path[64], cmd[256] = "";
			snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)kids[i]);
			FILE *f = fopen(path, "r");
			size_t k = f ? fread(cmd, 1, sizeof(cmd) - 1, f) : 0;
			if (f)
				fclose(f);
			if (k > 9 && strcmp(cmd, "deskgate") == 0 && strcmp(cmd + 9, "export") == 0)
				return kids[i];
		}
	}
	return 0;
}

/* Files under the exports cache whose name contains what. */
static int exports_named(const char *what)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/state/exports", srv.dir);
	DIR *d = opendir(dir);
	cr_assert(d, "%s", dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += strstr(e->d_name, what) != NULL;
	closedir(d);
	return n;
}

/* GET .../video.webm|mp4 (issue #21): both formats checked with ffprobe,
 * the second GET the cached file (same bytes, fast); two exports asked for
 * at once both complete (the second waits for the first); 16 requests wait
 * for one export and the 17th is refused; a client that leaves while
 * waiting is forgotten; unknown id, bad format, no token and a live
 * session's recording are refused; a killed export is a 500 naming the
 * recording; a stopping gateway ends its export and leaves no half video. */
Test(gateway_recordings, videos_exported_cached_and_refused, .timeout = 540)
{
	serve("");
	struct sess a, b;
	record(&a);

	struct dg_http r, r2;
	get(a.id, "/video.webm", NULL, &r);
	cr_assert_eq(r.status, 401, "no token: %d %s", r.status, r.body);
	dg_http_free(&r);
	get("0123456789abcdef0123456789abcdef", "/video.webm", DG_TEST_VIEWER_TOKEN, &r);
	cr_assert_eq(r.status, 404, "unknown id: %d %s", r.status, r.body);
	dg_http_free(&r);
	get(a.id, "/video.avi", DG_TEST_VIEWER_TOKEN, &r);
	cr_assert_eq(r.status, 404, "bad format: %d", r.status);
	cr_assert(strstr(r.body, "avi") && strstr(r.body, a.id), "%s", r.body);
	dg_http_free(&r);

	double t0 = dg_test_now();
	get(a.id, "/video.webm", DG_TEST_VIEWER_TOKEN, &r);
	double first = dg_test_now() - t0;
	cr_assert_eq(r.status, 200, "webm: %d %s", r.status, r.body);
	cr_assert(strstr(r.head, "video/webm"), "%s", r.head);
	cr_assert(strstr(r.head, "attachment") && strstr(r.head, a.id), "%s", r.head);
	probe(&r, "webm");
	t0 = dg_test_now();
	get(a.id, "/video.webm", DG_TEST_VIEWER_TOKEN, &r2);
	double second = dg_test_now() - t0;
	cr_assert_eq(r2.status, 200);
	cr_assert(r2.body_len == r.body_len && memcmp(r2.body, r.body, r.body_len) == 0,
		  "the cached video differs");
	cr_assert(second < 2.0, "the second GET took %.2f s (the first %.2f s): not the cache",
		  second, first);
	fprintf(stderr, "webm: %zu bytes, first GET %.2f s, cached %.3f s\n", r.body_len, first, second);
	dg_http_free(&r);
	dg_http_free(&r2);
	char cached[512];
	snprintf(cached, sizeof(cached), "%s/state/exports/%s.webm", srv.dir, a.id);
	struct stat st;
	cr_assert_eq(stat(cached, &st), 0, "%s", cached);

	/* Two at once: the MP4 waits for the WebM of another recording. */
	record(&b);
	int fd = send_get(b.id, "/video.webm");
	usleep(300 * 1000);
	get(a.id, "/video.mp4", DG_TEST_VIEWER_TOKEN, &r);
	cr_assert_eq(r.status, 200, "mp4: %d %s", r.status, r.body);
	cr_assert(strstr(r.head, "video/mp4"), "%s", r.head);
	probe(&r, "mp4");
	dg_http_free(&r);
	size_t len;
	cr_assert_eq(read_status(fd, &len), 200);
	cr_assert_gt(len, 1000);

	/* The waiters' bound at its boundary: DG_GW_EXPORT_WAITERS_MAX (16)
	 * requests wait for one export, the 17th is refused. */
	enum { WAITERS = 16 };
	int fds[WAITERS + 1];
	snprintf(cached, sizeof(cached), "%s/state/exports/%s.mp4", srv.dir, a.id);
	cr_assert_eq(unlink(cached), 0, "%s", cached);
	for (int i = 0; i <= WAITERS; i++)
		fds[i] = send_get(a.id, "/video.mp4");
	int ok = 0, busy = 0;
	for (int i = 0; i <= WAITERS; i++) {
		int status = read_status(fds[i], &len);
		ok += status == 200;
		busy += status == 503;
	}
	cr_assert(ok == WAITERS && busy == 1, "%d served, %d refused", ok, busy);

	/* A client that leaves while waiting is forgotten; the export ends. */
	close(send_get(b.id, "/video.mp4"));
	get(b.id, "/video.mp4", DG_TEST_VIEWER_TOKEN, &r);
	cr_assert_eq(r.status, 200, "mp4 after a client left: %d %s", r.status, r.body);
	dg_http_free(&r);

	/* Live: still recording. */
	struct sess c;
	open_session(&c, "{\"profile\":\"xterm\"}");
	get(c.id, "/video.webm", DG_TEST_VIEWER_TOKEN, &r);
	cr_assert_eq(r.status, 409, "live: %d %s", r.status, r.body);
	cr_assert(strstr(r.body, "still recording"), "%s", r.body);
	dg_http_free(&r);
	end_session(&c);

	/* A killed export: 500 naming the recording; the next GET exports again. */
	fd = send_get(c.id, "/video.webm");
	pid_t kid = export_child();
	cr_assert_gt(kid, 0, "no export child");
	cr_assert_eq(kill(kid, SIGKILL), 0);
	char *body = NULL;
	int status = read_status_body(fd, &body);
	cr_assert_eq(status, 500, "killed export: %d %s", status, body);
	cr_assert(strstr(body, c.id) && strstr(body, "killed"), "%s", body);
	free(body);

	/* Stopping the gateway stops an export and leaves no half video. */
	fd = send_get(c.id, "/video.mp4");
	kid = export_child();
	cr_assert_gt(kid, 0, "no export child");
	cr_assert_eq(dg_test_serve_stop(&srv, 30, true), 0);
	close(fd);
	cr_assert(kill(kid, 0) != 0 && errno == ESRCH, "export %d outlived the gateway", (int)kid);
	cr_assert_eq(exports_named(".tmp-"), 0, "a temporary video was left");
	cr_assert_eq(exports_named(c.id), 0, "a video of the stopped export was left");
}
