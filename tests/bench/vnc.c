/* bench vnc: the live desktop over RFB (docs/vnc.md), end to end through
 * `deskgate serve`, one xterm session 1280x800.
 *
 * Figures:
 *   latency  an agent's action (type "x", then BackSpace: xterm echoes it)
 *            sent on the agent's WebSocket, to the first RFB update that
 *            shows a change at a viewer of /v1/sessions/{id}/vnc (raw
 *            encoding, an incremental request always outstanding); beside
 *            it, the same action's answer to the agent (its settled
 *            screenshot), which waits for the screen to be quiet for 30 ms;
 *   CPU      the worker's utime + stime (/proc/PID/stat) per action over N
 *            actions with 0, 1 and 4 viewers reading every update: what each
 *            viewer costs the worker.
 * Not a test: it prints numbers (docs/benchmarks.md has a run's).
 *
 * Usage: vnc. DG_BENCH_ACTIONS sets N (default 200). Runs as root (the
 * server's spawner needs it); build without sanitizers for real figures.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "dg_test.h"

#define VIEWERS_MAX 4

static struct dg_server srv;
static char vnc_path[160];

static void fail(const char *what, const char *detail)
{
	fprintf(stderr, "bench vnc: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	dg_test_serve_stop(&srv, 30, false);
	exit(2);
}

/* The session's worker: the one process of a worker uid under the server. */
static pid_t find_worker(void)
{
	pid_t stack[4096];
	int n = dg_test_children(srv.pid, stack, 4096);
	while (n > 0) {
		pid_t p = stack[--n];
		char v[128];
		unsigned uid = 0;
		if (dg_test_proc_status(p, "Uid", v, sizeof(v)) == 0)
			sscanf(v, "%u", &uid);
		if (uid >= DG_WORKER_ID_BASE && uid < DG_WORKER_ID_BASE + DG_JAIL_SLOTS)
			return p;
		n += dg_test_children(p, stack + n, 4096 - n);
	}
	return -1;
}

/* Waits for the agent's answer (its result, then the screenshot). */
static void answer(struct dg_ws *a)
{
	struct dg_ws_msg m;
	bool result = false;
	for (;;) {
		if (dg_ws_recv(a, 30, &m) != 1)
			fail("no answer from the agent's socket", NULL);
		bool bin = m.binary;
		if (!bin && strstr((const char *)m.data, "\"ok\":false"))
			fail("an action failed", (const char *)m.data);
		result = result || (!bin && strstr((const char *)m.data, "\"type\":\"result\""));
		bool framed = !bin && strstr((const char *)m.data, "\"frame\"");
		dg_ws_msg_free(&m);
		if (bin || (result && !framed))
			return;
	}
}

static const char *action(int i)
{
	return i % 2 ? "{\"type\":\"key\",\"keys\":\"BackSpace\"}" : "{\"type\":\"type\",\"text\":\"x\"}";
}

/* Reads every update the viewers have waiting, asking for the next after
 * each; returns whether any showed a change. */
static bool drain(struct dg_rfb *v, int n, double timeout_s)
{
	bool changed = false;
	for (int i = 0; i < n; i++) {
		char err[256];
		long area;
		while ((area = dg_rfb_update(&v[i], timeout_s, err, sizeof(err))) >= 0) {
			changed = changed || area > 0;
			if (dg_rfb_request(&v[i], true) != 0)
				fail("a viewer closed", NULL);
			timeout_s = 0;
		}
		if (area == -2)
			fail("a viewer's stream", err);
	}
	return changed;
}

static void open_viewers(struct dg_rfb *v, int n)
{
	for (int i = 0; i < n; i++) {
		char err[256];
		if (dg_rfb_open(&v[i], srv.port, vnc_path, DG_TEST_VIEWER_TOKEN, 10, err, sizeof(err)))
			fail("opening a viewer", err);
		if (dg_rfb_request(&v[i], false) != 0 || dg_rfb_update(&v[i], 10, err, sizeof(err)) <= 0 ||
		    dg_rfb_request(&v[i], true) != 0)
			fail("a viewer's first screen", err);
	}
}

int main(void)
{
	const char *e = getenv("DG_BENCH_ACTIONS");
	int N = e ? atoi(e) : 200;
	if (N < 10)
		N = 200;
	char err[2048];
	if (dg_test_serve_start(&srv, "\"limits\": {\"actions_per_second\": 100000, \"idle_seconds\": 3600}",
				30, err, sizeof(err)) != 0)
		fail("starting the server", err);
	struct dg_http r;
	if (dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, "{\"profile\":\"xterm\"}",
			 120, &r) != 0 || r.status != 201)
		fail("creating a session", r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	const char *id = json_string_value(json_object_get(j, "id"));
	if (!id)
		fail("no session id", r.body);
	char ws_path[160];
	snprintf(ws_path, sizeof(ws_path), "/v1/sessions/%s/ws", id);
	snprintf(vnc_path, sizeof(vnc_path), "/v1/sessions/%s/vnc", id);
	json_decref(j);
	dg_http_free(&r);
	int status;
	struct dg_ws *a = dg_ws_connect(srv.port, ws_path, DG_TEST_AGENT_TOKEN, NULL, 30, &status, err,
					sizeof(err));
	struct dg_ws_msg m;
	if (!a || dg_ws_recv(a, 10, &m) != 1)
		fail("the agent's socket", err);
	dg_ws_msg_free(&m);
	pid_t worker = find_worker();
	if (worker < 0)
		fail("no worker process found", NULL);

	/* latency: one viewer */
	static struct dg_rfb v[VIEWERS_MAX];
	open_viewers(v, 1);
	double *frame_ms = calloc((size_t)N, sizeof(double)), *answer_ms = calloc((size_t)N, sizeof(double));
	int got = 0;
	for (int i = 0; i < N; i++) {
		drain(v, 1, 0);
		double t0 = dg_test_now();
		if (dg_ws_send_text(a, action(i)) != 0)
			fail("the agent's socket closed", NULL);
		double end = t0 + 5;
		bool seen = false;
		while (!seen && dg_test_now() < end)
			seen = drain(v, 1, end - dg_test_now());
		double t1 = dg_test_now();
		answer(a);
		double t2 = dg_test_now();
		if (seen)
			frame_ms[got++] = (t1 - t0) * 1000;
		answer_ms[i] = (t2 - t0) * 1000;
	}
	dg_rfb_close(&v[0]);
	qsort(frame_ms, (size_t)got, sizeof(double), dg_test_cmp_double);
	qsort(answer_ms, (size_t)N, sizeof(double), dg_test_cmp_double);

	/* CPU: 0, 1 and 4 viewers */
	static const int counts[] = {0, 1, 4};
	double cpu[3], wall[3];
	for (int c = 0; c < 3; c++) {
		int n = counts[c];
		open_viewers(v, n);
		dg_ws_service(300);
		drain(v, n, 0);
		double c0 = dg_test_cpu_ms(worker), t0 = dg_test_now();
		for (int i = 0; i < N; i++) {
			if (dg_ws_send_text(a, action(i)) != 0)
				fail("the agent's socket closed", NULL);
			answer(a);
			drain(v, n, 0);
		}
		dg_ws_service(200);
		drain(v, n, 0);
		cpu[c] = (dg_test_cpu_ms(worker) - c0) / N;
		wall[c] = (dg_test_now() - t0) * 1000 / N;
		for (int i = 0; i < n; i++)
			dg_rfb_close(&v[i]);
	}

	printf("deskgate live view (RFB) benchmark: one xterm session 1280x800, %d actions per "
	       "figure, %ld CPUs\n\n", N, sysconf(_SC_NPROCESSORS_ONLN));
	printf("latency, agent action sent -> first viewer update showing it: p50 %.1f ms, p90 %.1f "
	       "ms, p99 %.1f ms (%d of %d seen)\n",
	       got ? frame_ms[got / 2] : -1, got ? frame_ms[got * 9 / 10] : -1,
	       got ? frame_ms[got * 99 / 100] : -1, got, N);
	printf("  the same actions' answers to the agent (settled screenshot): p50 %.1f ms, p90 %.1f ms\n\n",
	       answer_ms[N / 2], answer_ms[N * 9 / 10]);
	printf("%8s %22s %16s %20s\n", "viewers", "worker CPU ms/action", "extra vs 0", "action round trip ms");
	for (int c = 0; c < 3; c++)
		printf("%8d %22.3f %16.3f %20.1f\n", counts[c], cpu[c], cpu[c] - cpu[0], wall[c]);
	printf("(per viewer: %.3f ms CPU per action with 1, %.3f with 4)\n", cpu[1] - cpu[0],
	       (cpu[2] - cpu[0]) / 4);
	free(frame_ms);
	free(answer_ms);
	dg_ws_close(a);
	int st = dg_test_serve_stop(&srv, 30, false);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench vnc: the server did not stop cleanly\n");
		return 2;
	}
	return 0;
}
