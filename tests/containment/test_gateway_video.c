/* GET /v1/recordings/{id}/video.webm|mp4 (issue #21): an xterm session
 * recorded through the gateway, ended, and fetched as WebM and MP4; both
 * checked with ffprobe (format, duration, decoded frames); the second GET is
 * the cached file (same bytes, fast); two exports asked for at once both
 * complete (the second waits for the first); a client that leaves while
 * waiting is forgotten; unknown id, bad format, no token and a live
 * session's recording are refused. ffprobe runs without a shell. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60
#define T_EXPORT 300

static struct dg_server srv;

static void fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
	else if (srv.dir[0])
		dg_test_serve_stop(&srv, 1, false);
}

TestSuite(gateway_video, .fini = fini, .timeout = 540);

static const char *str(json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));
	return s ? s : "";
}

struct sess {
	char id[64];
	struct dg_ws *ws;
};

static void open_session(struct sess *s)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"xterm\"}", 60, &r), 0);
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
	json_decref(dg_test_agent_recv(s->ws, 10, false));
}

static void act(struct sess *s, const char *action)
{
	cr_assert_eq(dg_ws_send_text(s->ws, action), 0);
	json_t *r = dg_test_agent_recv(s->ws, T_ACT, false);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s", action);
	json_decref(r);
}

static void end_session(struct sess *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", s->id);
	dg_ws_close(s->ws);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 30, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dg_http_free(&r);
}

static void record(struct sess *s)
{
	open_session(s);
	act(s, "{\"type\":\"click\",\"x\":300,\"y\":300}");
	act(s, "{\"type\":\"type\",\"text\":\"echo video\\n\"}");
	act(s, "{\"type\":\"key\",\"keys\":\"ctrl+l\"}");
	end_session(s);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
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
	double end = now_s() + T_EXPORT;
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		cr_assert(now_s() < end && poll(&p, 1, 1000) >= 0, "no response");
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
	for (double end = now_s() + 30; now_s() < end; usleep(5000)) {
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

Test(gateway_video, a_recording_as_webm_and_mp4_cached_and_refused)
{
	char err[1024];
	cr_assert_eq(dg_test_serve_start(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
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

	double t0 = now_s();
	get(a.id, "/video.webm", DG_TEST_VIEWER_TOKEN, &r);
	double first = now_s() - t0;
	cr_assert_eq(r.status, 200, "webm: %d %s", r.status, r.body);
	cr_assert(strstr(r.head, "video/webm"), "%s", r.head);
	cr_assert(strstr(r.head, "attachment") && strstr(r.head, a.id), "%s", r.head);
	probe(&r, "webm");
	t0 = now_s();
	get(a.id, "/video.webm", DG_TEST_VIEWER_TOKEN, &r2);
	double second = now_s() - t0;
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
	open_session(&c);
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
