/* Load and soak (issue #9, part 2): S concurrent xterm sessions, A actions
 * each, over the canonical WebSocket API, against a real `deskgate serve`.
 *
 * Checks:
 *  - no lost event: every action sent is answered (a result, ok, with its
 *    frame when it announces one), and each session's recording verifies
 *    as sealed (`deskgate verify --state-dir`) with exactly A "action"
 *    events, none failed;
 *  - the gateway process's memory (VmRSS) after the run, once every
 *    session ended and it settled, is within 5% of what it was before (the
 *    baseline is taken after warm-up rounds of the same S sessions, so the
 *    allocator's growth for S sessions at once is in it). PSS and
 *    Private_Dirty are printed, not judged: PSS moves with what the
 *    spawner and the egress proxy, forked from the gateway, share with it;
 *  - its open descriptors after the run are exactly those before;
 *  - it stops cleanly, with no sanitizer report.
 * Figures printed: actions/s, round-trip p50/p99, memory and descriptors
 * before and after.
 *
 * Memory under AddressSanitizer: freed blocks wait in ASan's quarantine (up
 * to 256 MiB by default) before they are reused, so the RSS of a sanitized
 * gateway grows with everything it ever freed until the quarantine is
 * full; the test starts the server with quarantine_size_mb=8 (appended to
 * ASAN_OPTIONS; use-after-free is still caught within the last 8 MiB
 * freed) so that its RSS measures the gateway, not the quarantine.
 *
 * Driving: one WebSocket per session, pipelined round-robin: one action is
 * sent on every session, then the answers are collected, and again. The
 * actions cycle through move, click, type, key, scroll, screenshot and wait
 * (each session at its own offset in the cycle).
 *
 * Parameters (environment):
 *   DESKGATE_SOAK_SESSIONS   sessions at once (default 20)
 *   DESKGATE_SOAK_ACTIONS    actions per session (default 50: CI's short soak)
 *   DESKGATE_SOAK_WARMUP     actions per session of a warm-up round
 *                            (default 10; 0: no warm-up)
 *   DESKGATE_SOAK_WARMUP_ROUNDS  warm-up rounds (default 2: glibc's heap
 *                            reaches its plateau for S sessions after two
 *                            or three rounds of them)
 *   DESKGATE_SOAK_ROUNDS     measured rounds (default 1): the S sessions are
 *                            created, driven and ended this many times, and
 *                            the gateway's memory and descriptors printed
 *                            after each (growth per round shows a leak per
 *                            session rather than per action)
 * The full soak of the issue (20 sessions x 1,000 actions, gateway under
 * ASan) takes longer than ctest's 600 s per test; run the binary directly:
 *   cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDG_SANITIZE=ON
 *   cmake --build build-asan -j2
 *   DESKGATE_SOAK_ACTIONS=1000 build-asan/tests/test_soak --verbose
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "dg_test.h"

#define T_ACT 120.0    /* one action's answer, at worst (ASan, 20 sessions on 2 cores) */
#define T_CREATE 180.0 /* one session's creation, at worst, with all the others at once */
#define T_GONE 60.0    /* from a session's end to nothing of it left */
#define MEM_TOLERANCE 0.05

static struct dg_server srv;
static struct sess *ss; /* freed by fini, also after a failed assertion */
static double *lat;

static void fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 60, true); /* a failed run: keep the dir for a look */
	free(ss);
	free(lat);
	ss = NULL;
	lat = NULL;
}

TestSuite(soak, .fini = fini, .timeout = 7200);

static const char *str(json_t *j, const char *k)
{
	const char *s = json_string_value(json_object_get(j, k));
	return s ? s : "";
}

static int env_int(const char *name, int def, int min, int max)
{
	const char *v = getenv(name);
	if (!v || !v[0])
		return def;
	char *end;
	long n = strtol(v, &end, 10);
	cr_assert(*end == '\0' && n >= min && n <= max, "%s=%s: want an integer in [%d, %d]", name,
		  v, min, max);
	return (int)n;
}

/* ---- sessions ------------------------------------------------------------------ */

struct sess {
	char id[64];
	char token[128];
	char ws_path[128];
	char path[128];
	uint32_t slot;
	struct dg_ws *ws;
	int sent, answered, failed;
	bool busy, want_frame;
	double t_sent;
	/* creation, in a thread */
	int status;
	char body[1024];
};

static void *create_thread(void *arg)
{
	struct sess *s = arg;
	struct dg_http r;
	s->status = 0;
	if (dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
			 "{\"profile\":\"xterm\"}", T_CREATE, &r) == 0)
		s->status = r.status;
	snprintf(s->body, sizeof(s->body), "%s", r.body ? r.body : "");
	dg_http_free(&r);
	return NULL;
}

/* Creates n sessions at once (one HTTP request each, in threads), then
 * connects their agents. */
static void create_all(struct sess *ss, int n)
{
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	for (int i = 0; i < n; i++) {
		memset(&ss[i], 0, sizeof(ss[i]));
		cr_assert_eq(pthread_create(&th[i], NULL, create_thread, &ss[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	free(th);
	for (int i = 0; i < n; i++) {
		struct sess *s = &ss[i];
		cr_assert_eq(s->status, 201, "session %d of %d: POST /v1/sessions: %d %s", i + 1, n,
			     s->status, s->body);
		json_t *j = json_loads(s->body, 0, NULL);
		snprintf(s->id, sizeof(s->id), "%s", str(j, "id"));
		snprintf(s->token, sizeof(s->token), "%s", str(j, "session_token"));
		json_decref(j);
		cr_assert(s->id[0] && s->token[0], "%s", s->body);
		snprintf(s->ws_path, sizeof(s->ws_path), "/v1/sessions/%s/ws", s->id);
		snprintf(s->path, sizeof(s->path), "/v1/sessions/%s", s->id);
		char proto[300], err[256];
		int status;
		snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", s->token);
		s->ws = dg_ws_connect(srv.port, s->ws_path, NULL, proto, 60, &status, err, sizeof(err));
		cr_assert(s->ws, "connect %s: %d %s", s->ws_path, status, err);
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(s->ws, 30, &m), 1, "no hello");
		cr_assert(!m.binary && strstr((const char *)m.data, "\"hello\""), "%.200s", m.data);
		dg_ws_msg_free(&m);
	}
	/* The slots, to check afterwards that nothing of them is left. */
	uint32_t slots[1024];
	int ns = dg_test_slots_under(srv.pid, slots, 1024);
	cr_assert_geq(ns, n, "%d jail slots under the server for %d sessions", ns, n);
}

/* The action number k of a session (its offset in the cycle given). */
static void action_text(int k, int i, char *out, size_t len)
{
	int x = 100 + (k * 37 + i * 13) % 1000, y = 100 + (k * 23 + i * 7) % 600;
	switch (k % 7) {
	case 0:
		snprintf(out, len, "{\"type\":\"move\",\"x\":%d,\"y\":%d}", x, y);
		break;
	case 1:
		snprintf(out, len, "{\"type\":\"click\",\"x\":%d,\"y\":%d}", x, y);
		break;
	case 2:
		snprintf(out, len, "{\"type\":\"type\",\"text\":\"ab\"}");
		break;
	case 3:
		snprintf(out, len, "{\"type\":\"key\",\"keys\":\"BackSpace BackSpace\"}");
		break;
	case 4:
		snprintf(out, len, "{\"type\":\"scroll\",\"x\":%d,\"y\":%d,\"dy\":%d}", x, y,
			 k % 2 ? 1 : -1);
		break;
	case 5:
		snprintf(out, len, "{\"type\":\"screenshot\"}");
		break;
	default:
		snprintf(out, len, "{\"type\":\"wait\",\"ms\":20}");
		break;
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Takes what arrived for s; true when its answer is complete. */
static bool take(struct sess *s)
{
	struct dg_ws_msg m;
	while (s->busy && dg_ws_pending(s->ws) > 0) {
		cr_assert_eq(dg_ws_recv(s->ws, 0, &m), 1);
		if (m.binary) {
			cr_assert(s->want_frame, "session %s: a binary message nobody announced", s->id);
			int w, h;
			cr_assert_eq(dg_test_png_size(m.data, m.len, &w, &h), 0,
				     "session %s: the frame is not a PNG", s->id);
			dg_ws_msg_free(&m);
			s->want_frame = false;
			s->busy = false;
			return true;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		cr_assert(j, "session %s: not JSON: %.200s", s->id, m.data);
		dg_ws_msg_free(&m);
		const char *type = str(j, "type");
		DG_TEST_NO_STRAY_EVENT(j);
		char *dump = json_dumps(j, JSON_COMPACT);
		cr_assert_str_eq(type, "result", "session %s: answer %d is not a result: %.400s", s->id,
				 s->answered + 1, dump);
		if (!json_is_true(json_object_get(j, "ok"))) {
			s->failed++;
			cr_log_error("session %s: action %d failed: %.400s", s->id, s->answered + 1, dump);
		}
		free(dump);
		s->answered++;
		s->want_frame = json_object_get(j, "frame") != NULL;
		json_decref(j);
		if (!s->want_frame) {
			s->busy = false;
			return true;
		}
	}
	return false;
}

/* Drives n sessions for a actions each; writes each action's round trip
 * (ms) into lat (n * a of them) when not NULL. */
static void drive(struct sess *ss, int n, int a, double *lat)
{
	int k_lat = 0;
	for (int r = 0; r < a; r++) {
		for (int i = 0; i < n; i++) {
			char text[160];
			action_text(r + i, i, text, sizeof(text));
			ss[i].busy = true;
			ss[i].want_frame = false;
			ss[i].t_sent = dg_test_now();
			cr_assert_eq(dg_ws_send_text(ss[i].ws, text), 0,
				     "session %s: the connection closed (action %d)", ss[i].id, r + 1);
			ss[i].sent++;
		}
		int left = n;
		double end = dg_test_now() + T_ACT;
		while (left > 0) {
			for (int i = 0; i < n; i++) {
				if (ss[i].busy && take(&ss[i])) {
					left--;
					if (lat)
						lat[k_lat++] = (dg_test_now() - ss[i].t_sent) * 1000;
				}
				cr_assert(!ss[i].busy || !dg_ws_closed(ss[i].ws) || dg_ws_pending(ss[i].ws),
					  "session %s: the connection closed while action %d ran",
					  ss[i].id, r + 1);
			}
			if (left > 0) {
				cr_assert_lt(dg_test_now(), end, "round %d: %d sessions did not answer in %.0f s",
					     r + 1, left, T_ACT);
				dg_ws_service(0);
			}
		}
	}
}

/* Ends every session (DELETE; its agent is told) and waits until nothing
 * of them is left. */
static void end_all(struct sess *ss, int n, const uint32_t *slots, int nslots)
{
	for (int i = 0; i < n; i++) {
		struct dg_http r;
		cr_assert_eq(dg_test_http(srv.port, "DELETE", ss[i].path, DG_TEST_AGENT_TOKEN, NULL, 60, &r),
			     0);
		cr_assert_eq(r.status, 200, "DELETE %s: %d %s", ss[i].path, r.status, r.body);
		dg_http_free(&r);
	}
	for (int i = 0; i < n; i++) {
		bool ended = false;
		double end = dg_test_now() + 30;
		struct dg_ws_msg m;
		while (!ended && dg_ws_recv(ss[i].ws, end - dg_test_now() > 0 ? end - dg_test_now() : 0,
					    &m) == 1) {
			ended = !m.binary && strstr((const char *)m.data, "\"ended\"");
			dg_ws_msg_free(&m);
		}
		cr_assert(ended, "session %s: no \"ended\" after DELETE", ss[i].id);
		dg_ws_close(ss[i].ws);
		ss[i].ws = NULL;
	}
	double end = dg_test_now() + T_GONE;
	for (int i = 0; i < nslots; i++) {
		char what[2048];
		int left;
		while ((left = dg_test_leftovers_slot_live(slots[i], srv.pid, what, sizeof(what))) != 0 &&
		       dg_test_now() < end)
			usleep(50000);
		cr_assert_eq(left, 0, "slot %u left: %s", slots[i], what);
	}
	struct dg_http h;
	cr_assert_eq(dg_test_http(srv.port, "GET", "/healthz", NULL, NULL, 30, &h), 0);
	cr_assert(strstr(h.body, "\"sessions\":0"), "%s", h.body);
	dg_http_free(&h);
}

/* A round: n sessions created at once, a actions each, all ended. */
static void round_of(struct sess *ss, int n, int a, double *lat, double *drive_s, double *create_s)
{
	double t0 = dg_test_now();
	create_all(ss, n);
	uint32_t slots[1024];
	int nslots = dg_test_slots_under(srv.pid, slots, 1024);
	double t1 = dg_test_now();
	drive(ss, n, a, lat);
	double t2 = dg_test_now();
	end_all(ss, n, slots, nslots);
	if (create_s)
		*create_s = t1 - t0;
	if (drive_s)
		*drive_s = t2 - t1;
}

/* ---- the gateway's resources ---------------------------------------------------- */

struct usage {
	long rss_kb, pss_kb, priv_kb, hwm_kb;
	int fds;
	char fd_list[8192];
};

static void sample(struct usage *u)
{
	u->rss_kb = dg_test_proc_mem_kb(srv.pid, "VmRSS");
	u->pss_kb = dg_test_proc_mem_kb(srv.pid, "Pss");
	u->priv_kb = dg_test_proc_mem_kb(srv.pid, "Private_Dirty");
	u->hwm_kb = dg_test_proc_mem_kb(srv.pid, "VmHWM");
	u->fds = dg_test_proc_fds(srv.pid, u->fd_list, sizeof(u->fd_list));
	cr_assert(u->rss_kb > 0 && u->pss_kb > 0 && u->fds > 0, "cannot read the gateway's /proc");
}

/* Samples until the gateway is quiet: the same descriptors and memory
 * within 1% over four samples half a second apart (at most 30 s; the
 * sanitizer's allocator hands freed memory back every few seconds). */
static void settle(struct usage *u)
{
	double end = dg_test_now() + 30;
	struct usage prev;
	sample(&prev);
	int stable = 0;
	while (stable < 4 && dg_test_now() < end) {
		dg_ws_service(500);
		sample(u);
		bool same = u->fds == prev.fds && labs(u->rss_kb - prev.rss_kb) * 100 <= prev.rss_kb;
		stable = same ? stable + 1 : 0;
		prev = *u;
	}
	sample(u);
}

/* ---- recordings ------------------------------------------------------------------ */

static void check_recording(const struct sess *s, int want_actions)
{
	char dir[256], state[256], path[300];
	snprintf(dir, sizeof(dir), "%s/rec/%s", srv.dir, s->id);
	snprintf(state, sizeof(state), "%s/state", srv.dir);
	const char *argv[] = {DG_BIN, "verify", "--state-dir", state, dir, NULL};
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 300, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "session %s: deskgate verify: %s%s", s->id, r.out, r.err);
	cr_assert(strstr(r.out, ": sealed: "), "session %s: %s", s->id, r.out);
	dg_run_free(&r);
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s", path);
	char *line = NULL;
	size_t cap = 0;
	int actions = 0, errors = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *e = json_loads(line, 0, NULL);
		cr_assert(e, "session %s: a line of events.jsonl is not JSON", s->id);
		if (strcmp(str(e, "type"), "action") == 0) {
			actions++;
			json_t *err = json_object_get(e, "error");
			errors += err && !json_is_null(err);
		}
		json_decref(e);
	}
	free(line);
	fclose(f);
	cr_assert_eq(actions, want_actions, "session %s: %d actions sent, %d recorded", s->id,
		     want_actions, actions);
	cr_assert_eq(errors, 0, "session %s: %d actions recorded as failed", s->id, errors);
}

/* ---- the soak -------------------------------------------------------------------- */

Test(soak, sessions_actions_memory_and_descriptors)
{
	int n = env_int("DESKGATE_SOAK_SESSIONS", 20, 1, 1000);
	int a = env_int("DESKGATE_SOAK_ACTIONS", 50, 1, 1000000);
	int warm = env_int("DESKGATE_SOAK_WARMUP", 10, 0, 1000000);
	int rounds = env_int("DESKGATE_SOAK_ROUNDS", 1, 1, 1000);
	int warm_rounds = env_int("DESKGATE_SOAK_WARMUP_ROUNDS", 2, 0, 1000);
	char asan[1024];
	const char *old = getenv("ASAN_OPTIONS");
	snprintf(asan, sizeof(asan), "%s%squarantine_size_mb=8", old ? old : "", old && old[0] ? ":" : "");
	setenv("ASAN_OPTIONS", asan, 1);
	char extra[256], err[2048];
	snprintf(extra, sizeof(extra),
		 "\"limits\": {\"max_sessions\": %d, \"actions_per_second\": 1000, "
		 "\"idle_seconds\": 3600}",
		 n);
	cr_assert_eq(dg_test_serve_start(&srv, extra, 30, err, sizeof(err)), 0, "%s", err);
	struct usage fresh, before, after;
	sample(&fresh);
	ss = calloc((size_t)n, sizeof(*ss));

	/* Warm-up: the same sessions at once, fewer actions. */
	/* The baseline's RSS is the highest any warm-up round settled at: the
	 * same workload's heap already reached it, and glibc gives memory back
	 * unevenly (one run settled at 49040 kB after round 1 and 46892 kB
	 * after round 2, then at 49568 kB after the run: +5.7% over the lower
	 * figure, +1.1% over the higher, with nothing leaked). */
	double warm_create = 0;
	long warm_rss = 0;
	for (int k = 0; warm > 0 && k < warm_rounds; k++) {
		round_of(ss, n, warm, NULL, NULL, &warm_create);
		if (warm_rounds > 1) {
			settle(&before);
			if (before.rss_kb > warm_rss)
				warm_rss = before.rss_kb;
			fprintf(stderr, "soak: after warm-up round %d of %d: VmRSS %ld kB, PSS %ld kB, fds %d\n",
				k + 1, warm_rounds, before.rss_kb, before.pss_kb, before.fds);
		}
	}
	settle(&before);
	if (warm_rss > before.rss_kb)
		before.rss_kb = warm_rss;

	/* The run: the last round's figures and sessions are checked. */
	lat = calloc((size_t)n * (size_t)a, sizeof(*lat));
	double drive_s = 0, create_s = 0;
	for (int k = 0; k < rounds; k++) {
		round_of(ss, n, a, lat, &drive_s, &create_s);
		settle(&after);
		if (rounds > 1) {
			cr_log_info("soak: after round %d of %d: VmRSS %ld kB, PSS %ld kB, fds %d", k + 1,
				    rounds, after.rss_kb, after.pss_kb, after.fds);
			fprintf(stderr, "soak: after round %d of %d: VmRSS %ld kB (%+ld), PSS %ld kB, fds %d\n",
				k + 1, rounds, after.rss_kb, after.rss_kb - before.rss_kb, after.pss_kb,
				after.fds);
		}
		if (k + 1 < rounds) {
			for (int i = 0; i < n; i++)
				check_recording(&ss[i], a);
		}
	}
	/* Memory the allocator gives back after a while is not a leak: give it
	 * up to 30 s more before judging. */
	double end = dg_test_now() + 30;
	while ((after.rss_kb > before.rss_kb * (1 + MEM_TOLERANCE) || after.fds != before.fds) &&
	       dg_test_now() < end) {
		dg_ws_service(500);
		sample(&after);
	}

	long total = (long)n * a;
	qsort(lat, (size_t)total, sizeof(*lat), cmp_d);
	double p50 = lat[total / 2], p99 = lat[(size_t)((double)total * 0.99)],
	       max = lat[total - 1];
	char fig[3072];
	snprintf(fig, sizeof(fig),
		 "soak: %d sessions x %d actions (warm-up %d x %d each): %ld actions in %.1f s = %.1f "
		 "actions/s; round trip p50 %.1f ms, p99 %.1f ms, max %.1f ms; creating %d sessions "
		 "at once took %.1f s (warm-up %.1f s)\n"
		 "soak: gateway VmRSS %ld kB fresh, %ld kB before, %ld kB after (%+.2f%%); PSS %ld "
		 "kB before, %ld kB after (%+.2f%%); Private_Dirty %ld kB before, %ld kB after; "
		 "VmHWM %ld kB; fds %d fresh, %d before, %d after",
		 n, a, warm_rounds, warm, total, drive_s, total / drive_s, p50, p99, max, n, create_s, warm_create,
		 fresh.rss_kb, before.rss_kb, after.rss_kb,
		 100.0 * (after.rss_kb - before.rss_kb) / before.rss_kb, before.pss_kb, after.pss_kb,
		 100.0 * (after.pss_kb - before.pss_kb) / before.pss_kb, before.priv_kb, after.priv_kb,
		 after.hwm_kb, fresh.fds,
		 before.fds, after.fds);
	cr_log_info("%s", fig);
	fprintf(stderr, "%s\n", fig);

	/* No lost event. */
	for (int i = 0; i < n; i++) {
		cr_assert_eq(ss[i].sent, a);
		cr_assert_eq(ss[i].answered, a, "session %s: %d of %d actions answered", ss[i].id,
			     ss[i].answered, a);
		cr_assert_eq(ss[i].failed, 0, "session %s: %d actions failed", ss[i].id, ss[i].failed);
		check_recording(&ss[i], a);
	}
	/* No descriptor leak, no memory growth. */
	cr_assert_eq(after.fds, before.fds, "the gateway had %d descriptors before, %d after:\n"
		     "before: %s\nafter: %s", before.fds, after.fds, before.fd_list, after.fd_list);
	cr_assert_leq(after.rss_kb, before.rss_kb * (1 + MEM_TOLERANCE),
		      "the gateway's RSS grew from %ld kB to %ld kB", before.rss_kb, after.rss_kb);

	/* A clean stop. */
	int st = dg_test_serve_stop(&srv, 60, true);
	char *log = dg_test_serve_log(&srv);
	size_t l = strlen(log);
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "deskgate serve did not exit cleanly (status %d):\n%s", st,
		  l > 3000 ? log + l - 3000 : log);
	const char *san = strstr(log, "Sanitizer");
	cr_assert_null(san, "a sanitizer report in the server's log:\n%.3000s",
		       san ? (san - log > 200 ? san - 200 : log) : "");
	free(log);
	char what[8192];
	int left;
	end = dg_test_now() + T_GONE;
	while ((left = dg_test_leftovers_stale(what, sizeof(what))) != 0 && dg_test_now() < end)
		usleep(50000);
	cr_assert_eq(left, 0, "left behind: %s", what);
	dg_test_serve_stop(&srv, 1, false);
}
