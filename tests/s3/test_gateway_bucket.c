/* The gateway with an object store (issue #20, docs/recordings.md "object
 * storage"): real gateways (xterm sessions, root) and a real S3 server,
 * s3rver on loopback, started by tests/s3/s3.js (DG_TEST_S3_URL,
 * DG_TEST_S3_BUCKET; SIGUSR1 to DG_TEST_S3_PID stops it, SIGUSR2 starts it
 * again).
 *
 * A session ends: its recording is in the bucket, verifies as sealed, and
 * the local copy is gone (keep_local false); the gateway serves it back
 * from the bucket, and so does a second gateway (its own state dir, the
 * same key and bucket) for everything the player asks (the recording, its
 * events, a frame). The store down: the upload fails, is retried, the local
 * copy stays, and it is uploaded once the store is back; local retention
 * (retention_days) keeps such a recording, due for deletion, until then,
 * and says so. A gateway killed
 * with SIGKILL mid-session: the next start seals the orphan and uploads it.
 * Hostile: a bucket copy that does not verify, and one with a frame past
 * its bound, are not served (502 naming them); an unknown id is a 404
 * naming it. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dg_test.h"
#include "dg_test_agent.h"
#include "recordings/recordings.h"

#define T_UPLOAD 60 /* seconds an upload may take to be confirmed */

static struct dg_server a, b;
static char tmp[64], store[128];
static struct dg_rec_s3 s3;

static void s3_signal(int sig)
{
	const char *p = getenv("DG_TEST_S3_PID");
	cr_assert(p && atoi(p) > 0, "DG_TEST_S3_PID is not set: run me through tests/s3/s3.js");
	cr_assert_eq(kill(atoi(p), sig), 0);
	sleep(1); /* s3rver closes or listens asynchronously */
}

static void setup(void)
{
	const char *url = getenv("DG_TEST_S3_URL"), *bucket = getenv("DG_TEST_S3_BUCKET");
	cr_assert(url && bucket, "DG_TEST_S3_URL and DG_TEST_S3_BUCKET: run me through tests/s3/s3.js");
	snprintf(tmp, sizeof(tmp), "/tmp/dg-gwb-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	snprintf(store, sizeof(store), "%s/store.json", tmp);
	FILE *f = fopen(store, "w");
	cr_assert(f);
	fprintf(f, "{\"endpoint\":\"%s\",\"region\":\"us-east-1\",\"bucket\":\"%s\","
		   "\"access_key\":\"S3RVER\",\"secret_key\":\"S3RVER\",\"timeout_ms\":20000}\n",
		url, bucket);
	fclose(f);
	chmod(store, 0600);
	s3 = (struct dg_rec_s3){.endpoint = url, .region = "us-east-1", .bucket = bucket,
				.access_key = "S3RVER", .secret_key = "S3RVER"};
}

static void teardown(void)
{
	if (a.dir[0])
		dg_test_serve_stop(&a, 30, false);
	if (b.dir[0])
		dg_test_serve_stop(&b, 30, false);
	if (getenv("DG_TEST_S3_PID"))
		kill(atoi(getenv("DG_TEST_S3_PID")), SIGUSR2); /* a test that failed with it down */
	dg_test_rm_tree(tmp);
}

TestSuite(gateway_bucket, .init = setup, .fini = teardown, .timeout = 300);

static void serve(struct dg_server *s, bool keep_local)
{
	char extra[512], err[2048];
	snprintf(extra, sizeof(extra), "\"object_store\": {\"store\": \"%s\", \"keep_local\": %s}", store,
		 keep_local ? "true" : "false");
	cr_assert_eq(dg_test_serve_start(s, extra, 30, err, sizeof(err)), 0, "%s", err);
}

static void restart(struct dg_server *s)
{
	char extra[512], err[2048];
	snprintf(extra, sizeof(extra), "\"object_store\": {\"store\": \"%s\", \"keep_local\": false}",
		 store);
	cr_assert_eq(dg_test_serve_restart(s, extra, 30, err, sizeof(err)), 0, "%s", err);
}

static const char *str(json_t *j, const char *k)
{
	const char *v = json_string_value(json_object_get(j, k));
	return v ? v : "";
}

/* GET path as a viewer: the status, and the body (malloc'd) in *body. */
static int get(const struct dg_server *s, const char *path, char **body, size_t *len)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(s->port, "GET", path, DG_TEST_VIEWER_TOKEN, NULL, 120, &r), 0, "%s",
		     path);
	int st = r.status;
	if (len)
		*len = r.body_len;
	if (body)
		*body = r.body, r.body = NULL;
	dg_http_free(&r);
	return st;
}

struct sess {
	char id[64];
	struct dg_ws *ws;
};

static void open_session(const struct dg_server *s, struct sess *x)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(s->port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"xterm\"}", 60, &r), 0);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	snprintf(x->id, sizeof(x->id), "%s", str(j, "id"));
	char path[128], proto[300], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", x->id);
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	x->ws = dg_ws_connect(s->port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(x->ws, "connect: %d %s", status, err);
	json_decref(dg_test_agent_recv(x->ws, 10, false));
	cr_assert_eq(dg_ws_send_text(x->ws, "{\"type\":\"click\",\"x\":200,\"y\":200}"), 0);
	json_t *res = dg_test_agent_recv(x->ws, 60, false);
	cr_assert(json_is_true(json_object_get(res, "ok")), "the click failed");
	json_decref(res);
}

static void end_session(const struct dg_server *s, struct sess *x)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s", x->id);
	dg_ws_close(x->ws);
	struct dg_http r;
	cr_assert_eq(dg_test_http(s->port, "DELETE", path, DG_TEST_AGENT_TOKEN, NULL, 30, &r), 0);
	cr_assert_eq(r.status, 200, "%s", r.body);
	dg_http_free(&r);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Whether recordings/ID/events.jsonl is in the bucket. */
static bool in_bucket(const char *id)
{
	char key[128];
	snprintf(key, sizeof(key), "%s%s/events.jsonl", DG_REC_S3_PREFIX, id);
	bool e = false;
	struct dg_err err = {{0}};
	int rc = dg_rec_s3_head(&s3, key, &e, NULL, &err);
	return rc == 0 && e;
}

static long metric(const struct dg_server *s, const char *name);

/* Waits until the gateway's local copy of id is gone, the bucket has it
 * and the gateway counts it as done (it polls its upload child). */
static void wait_uploaded(const struct dg_server *s, const char *id)
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/rec/%s", s->dir, id);
	double end = dg_test_now() + T_UPLOAD;
	while ((exists(dir) || !in_bucket(id) ||
		metric(s, "deskgate_recording_uploads_pending ") != 0) && dg_test_now() < end)
		usleep(200000);
	char *log = dg_test_serve_log(s);
	cr_assert(!exists(dir), "%s is still there after %d s: %s", dir, T_UPLOAD, log);
	cr_assert(in_bucket(id), "%s is not in the bucket: %s", id, log);
	free(log);
}

/* The bucket's copy of id, fetched and verified with s's key: its status. */
static const char *bucket_status(const struct dg_server *s, const char *id)
{
	char state[256], dest[128];
	snprintf(state, sizeof(state), "%s/state", s->dir);
	snprintf(dest, sizeof(dest), "%s/check-XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(dest));
	struct dg_rec_key *key;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_rec_key_load(state, &key, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_fetch(&s3, id, dest, &err), 0, "%s", err.msg);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/%s", dest, id);
	struct dg_rec_verify_result res;
	cr_assert_eq(dg_rec_verify(dir, key, &res, &err), 0, "%s", err.msg);
	dg_rec_key_free(key);
	return dg_rec_status_name(res.status);
}

static long metric(const struct dg_server *s, const char *name)
{
	char *body;
	cr_assert_eq(get(s, "/metrics", &body, NULL), 200);
	/* At the start of a line: a HELP line names it too. */
	char line[160];
	snprintf(line, sizeof(line), "\n%s", name);
	const char *p = strstr(body, line);
	cr_assert(p, "%s not in /metrics", name);
	char *e;
	long v = strtol(p + strlen(line), &e, 10);
	cr_assert(e > p + strlen(line), "%s: not a number in /metrics", name);
	free(body);
	return v;
}

/* Copies A's recording key into B's state dir (gateways that share a
 * bucket share the key that seals the recordings). */
static void share_key(const struct dg_server *from, const struct dg_server *to)
{
	char src[256], dst[256];
	snprintf(src, sizeof(src), "%s/state/%s", from->dir, DG_REC_KEY_FILE);
	snprintf(dst, sizeof(dst), "%s/state/%s", to->dir, DG_REC_KEY_FILE);
	char *text = NULL;
	size_t len;
	struct stat st;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_read_file("key", src, 8192, true, &text, &len, &st, &err), 0, "%s", err.msg);
	cr_assert_eq(unlink(dst), 0, "%s", dst);
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
	free(text);
}

Test(gateway_bucket, a_sealed_recording_goes_to_the_bucket_and_is_served_back)
{
	serve(&a, false);
	struct sess x;
	open_session(&a, &x);
	end_session(&a, &x);
	wait_uploaded(&a, x.id);
	cr_assert_str_eq(bucket_status(&a, x.id), "sealed");
	cr_assert_eq(metric(&a, "deskgate_recording_uploads_total{result=\"ok\"} "), 1);
	cr_assert_eq(metric(&a, "deskgate_recording_uploads_pending "), 0);

	/* A itself serves it back from the bucket. */
	char path[256], *body;
	snprintf(path, sizeof(path), "/v1/recordings/%s", x.id);
	cr_assert_eq(get(&a, path, &body, NULL), 200, "%s", body);
	json_t *info = json_loads(body, 0, NULL);
	free(body);
	cr_assert_str_eq(str(json_object_get(info, "verify"), "status"), "sealed");
	json_decref(info);

	/* A second gateway, its own state dir, the same key and bucket. */
	serve(&b, false);
	dg_test_serve_stop(&b, 30, true);
	share_key(&a, &b);
	restart(&b);
	cr_assert_eq(get(&b, path, &body, NULL), 200, "%s", body);
	info = json_loads(body, 0, NULL);
	free(body);
	cr_assert_str_eq(str(info, "id"), x.id);
	cr_assert_str_eq(str(json_object_get(info, "verify"), "status"), "sealed", "%s",
			 str(json_object_get(info, "verify"), "message"));
	cr_assert(json_is_true(json_object_get(info, "from_bucket")));
	json_decref(info);
	/* Listed once fetched, as from the bucket. */
	cr_assert_eq(get(&b, "/v1/recordings", &body, NULL), 200);
	info = json_loads(body, 0, NULL);
	free(body);
	json_t *first = json_array_get(json_object_get(info, "recordings"), 0);
	cr_assert_eq(json_array_size(json_object_get(info, "recordings")), 1);
	cr_assert_str_eq(str(first, "id"), x.id);
	cr_assert(json_is_true(json_object_get(first, "from_bucket")));
	json_decref(info);
	/* What the player asks next: the events, and the frames they name. */
	snprintf(path, sizeof(path), "/v1/recordings/%s/events", x.id);
	size_t len;
	cr_assert_eq(get(&b, path, &body, &len), 200, "%s", body);
	cr_assert(strstr(body, "\"type\":\"seal\""), "no seal in the events served");
	const char *fr = strstr(body, "\"frame_after\":\"");
	cr_assert(fr, "no frame named in the events");
	char hash[65];
	memcpy(hash, fr + 15, 64);
	hash[64] = '\0';
	free(body);
	snprintf(path, sizeof(path), "/v1/recordings/%s/frames/%s.png", x.id, hash);
	cr_assert_eq(get(&b, path, &body, &len), 200);
	cr_assert(len > 8 && memcmp(body, "\x89PNG", 4) == 0, "not a PNG");
	free(body);
	cr_assert_eq(metric(&b, "deskgate_recording_fetches_total{result=\"ok\"} "), 1);
	/* As a video (issue #21): exported from the bucket's cache. */
	snprintf(path, sizeof(path), "/v1/recordings/%s/video.webm", x.id);
	cr_assert_eq(get(&b, path, &body, &len), 200, "%s", body);
	cr_assert(len > 1000 && memcmp(body, "\x1a\x45\xdf\xa3", 4) == 0, "not a WebM: %zu bytes", len);
	free(body);
	char cached[512];
	struct stat st;
	snprintf(cached, sizeof(cached), "%s/state/exports/%s.webm", b.dir, x.id);
	cr_assert(stat(cached, &st) == 0 && (size_t)st.st_size == len, "%s", cached);

	/* The gateway's retention looked at the bucket at start. */
	char *log = NULL;
	for (double end = dg_test_now() + 20; dg_test_now() < end; usleep(200000)) {
		free(log);
		log = dg_test_serve_log(&b);
		if (strstr(log, "retention in bucket deskgate-test: 0 of "))
			break;
	}
	cr_assert(strstr(log, "retention in bucket deskgate-test: 0 of "), "%s", log);
	free(log);

	/* Unknown: a 404 naming it. */
	cr_assert_eq(get(&b, "/v1/recordings/no-such-recording-1", &body, NULL), 404);
	cr_assert(strstr(body, "no-such-recording-1"), "%s", body);
	free(body);
}

/* Serves A, records a session on it, stops the store and ends the
 * session; returns once A counted `failures` failed uploads (60 s at most). */
static void end_with_the_store_down(struct sess *x, long failures)
{
	serve(&a, false);
	open_session(&a, x);
	s3_signal(SIGUSR1);
	end_session(&a, x);
	double end = dg_test_now() + 60;
	while (metric(&a, "deskgate_recording_uploads_total{result=\"failed\"} ") < failures &&
	       dg_test_now() < end)
		usleep(200000);
}

Test(gateway_bucket, the_store_down_uploads_are_retried_and_the_local_copy_kept)
{
	struct sess x;
	end_with_the_store_down(&x, 2);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/rec/%s", a.dir, x.id);
	cr_assert_geq(metric(&a, "deskgate_recording_uploads_total{result=\"failed\"} "), 2,
		      "the upload was not retried");
	cr_assert_eq(metric(&a, "deskgate_recording_uploads_pending "), 1);
	cr_assert(exists(dir), "the local copy went before the upload was confirmed");
	char *log = dg_test_serve_log(&a);
	cr_assert(strstr(log, "the local copy is kept"), "%s", log);
	free(log);
	s3_signal(SIGUSR2);
	wait_uploaded(&a, x.id);
	cr_assert_str_eq(bucket_status(&a, x.id), "sealed");
	cr_assert_eq(metric(&a, "deskgate_recording_uploads_pending "), 0);
}

/* The store down: a recording past retention_days is not deleted while it
 * is not in the bucket (its only copy; docs/recordings.md), the pass says
 * so in the log and /metrics, and it is uploaded once the store is back. */
Test(gateway_bucket, local_retention_keeps_a_recording_not_yet_uploaded)
{
	struct sess x;
	end_with_the_store_down(&x, 1);
	cr_assert_eq(metric(&a, "deskgate_recording_uploads_pending "), 1);
	cr_assert_eq(kill(a.pid, SIGKILL), 0);
	waitpid(a.pid, NULL, 0);
	a.pid = -1;
	/* Two days old: retention_days 1 deletes it at the next start. */
	char dir[256], events[300];
	snprintf(dir, sizeof(dir), "%s/rec/%s", a.dir, x.id);
	snprintf(events, sizeof(events), "%s/events.jsonl", dir);
	struct timespec old[2] = {{.tv_sec = time(NULL) - 2 * 86400}, {.tv_sec = time(NULL) - 2 * 86400}};
	cr_assert_eq(utimensat(AT_FDCWD, events, old, 0), 0, "%s", events);
	char extra[600], err[2048];
	snprintf(extra, sizeof(extra), "\"object_store\": {\"store\": \"%s\", \"keep_local\": false}, "
		 "\"limits\": {\"retention_days\": 1}", store);
	cr_assert_eq(dg_test_serve_restart(&a, extra, 30, err, sizeof(err)), 0, "%s", err);
	cr_assert(exists(dir), "retention deleted a recording the bucket does not have");
	cr_assert_eq(metric(&a, "deskgate_recording_retention_held "), 1);
	char *log = dg_test_serve_log(&a);
	cr_assert(strstr(log, "1 recordings (") && strstr(log, "not yet uploaded to the object store"),
		  "%s", log);
	free(log);
	s3_signal(SIGUSR2);
	wait_uploaded(&a, x.id);
	cr_assert_str_eq(bucket_status(&a, x.id), "sealed");
}

Test(gateway_bucket, a_gateway_killed_mid_session_uploads_the_orphan_at_its_next_start)
{
	serve(&a, false);
	struct sess x;
	open_session(&a, &x);
	cr_assert_eq(kill(a.pid, SIGKILL), 0);
	waitpid(a.pid, NULL, 0);
	a.pid = -1;
	dg_ws_close(x.ws);
	restart(&a);
	wait_uploaded(&a, x.id);
	cr_assert_str_eq(bucket_status(&a, x.id), "sealed-after-crash");
}

/* A recording of the test's own, sealed with A's key, uploaded by the
 * library; then damaged in the bucket by put. */
static void plant_with(const char *state, const char *id, const char *damage_key,
		       const char *damage_path)
{
	char root[128];
	snprintf(root, sizeof(root), "%s/plant-XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(root));
	struct dg_rec_key *key;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_rec_key_load(state, &key, &err), 0, "%s", err.msg);
	struct dg_rec *r;
	struct dg_rec_meta m = {.id = id, .profile = "xterm", .width = 640, .height = 480,
				.policy_text = "{}", .policy_len = 2};
	struct dg_rec_opts o = {.fsync = DG_REC_FSYNC_NONE};
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	json_t *e = json_pack("{s:s, s:s}", "type", "lifecycle", "state", "ready");
	cr_assert_eq(dg_rec_event(r, e, &err), 0, "%s", err.msg);
	json_decref(e);
	cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	cr_assert_eq(dg_rec_upload(&s3, root, id, key, &err), 0, "%s", err.msg);
	dg_rec_key_free(key);
	if (damage_key)
		cr_assert_eq(dg_rec_s3_put(&s3, damage_key, damage_path, &err), 0, "%s", err.msg);
}

static void plant(const struct dg_server *s, const char *id, const char *damage_key,
		  const char *damage_path)
{
	char state[256];
	snprintf(state, sizeof(state), "%s/state", s->dir);
	plant_with(state, id, damage_key, damage_path);
}

Test(gateway_bucket, a_bucket_copy_that_does_not_verify_or_is_too_big_is_not_served)
{
	serve(&a, false);
	/* events.jsonl changed in the bucket: one byte of its first event. */
	char ev[256], key[128];
	snprintf(ev, sizeof(ev), "%s/events.jsonl", tmp);
	plant(&a, "hostile-tampered", NULL, NULL);
	char *orig = NULL;
	{
		char dl[256];
		snprintf(dl, sizeof(dl), "%s/dl-events", tmp);
		struct dg_err err = {{0}};
		snprintf(key, sizeof(key), "%shostile-tampered/events.jsonl", DG_REC_S3_PREFIX);
		cr_assert_eq(dg_rec_s3_get(&s3, key, dl, 1 << 20, NULL, &err), 0, "%s", err.msg);
		size_t len;
		struct stat st;
		cr_assert_eq(dg_read_file("events", dl, 1 << 20, true, &orig, &len, &st, &err), 0);
		char *p = strstr(orig, "\"ready\"");
		cr_assert(p);
		memcpy(p, "\"READY\"", 7);
		FILE *f = fopen(ev, "w");
		fwrite(orig, 1, len, f);
		fclose(f);
		cr_assert_eq(dg_rec_s3_put(&s3, key, ev, &err), 0, "%s", err.msg);
		free(orig);
	}
	char *body;
	cr_assert_eq(get(&a, "/v1/recordings/hostile-tampered", &body, NULL), 502, "%s", body);
	cr_assert(strstr(body, "hostile-tampered") && strstr(body, "does not verify"), "%s", body);
	free(body);
	cr_assert_eq(get(&a, "/v1/recordings/hostile-tampered/events", &body, NULL), 502, "%s", body);
	free(body);
	char cached[256];
	snprintf(cached, sizeof(cached), "%s/state/bucket-cache/hostile-tampered", a.dir);
	cr_assert(!exists(cached), "a copy that does not verify stays in the cache");

	/* A frame one byte past DG_REC_FRAME_MAX in the bucket: refused at its
	 * bound. */
	char big[256];
	snprintf(big, sizeof(big), "%s/big.png", tmp);
	int fd = open(big, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, DG_REC_FRAME_MAX + 1), 0);
	cr_assert_eq(write(fd, "\x89PNG\r\n\x1a\n", 8), 8);
	close(fd);
	snprintf(key, sizeof(key), "%shostile-big/frames/%064d.png", DG_REC_S3_PREFIX, 0);
	plant(&a, "hostile-big", key, big);
	cr_assert_eq(get(&a, "/v1/recordings/hostile-big", &body, NULL), 502, "%s", body);
	char bound[64];
	snprintf(bound, sizeof(bound), "longer than %d bytes", DG_REC_FRAME_MAX);
	cr_assert(strstr(body, "hostile-big") && strstr(body, bound), "%s", body);
	free(body);
	char *log = dg_test_serve_log(&a);
	cr_assert(strstr(log, "hostile-big"), "%s", log);
	free(log);
	cr_assert_geq(metric(&a, "deskgate_recording_fetches_total{result=\"failed\"} "), 2);
}

static int count_key(void *arg, const char *key)
{
	(void)key;
	(*(int *)arg)++;
	return 0;
}

static int keys_under(const char *prefix)
{
	int n = 0;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_rec_s3_list(&s3, prefix, count_key, &n, &err), 0, "%s", err.msg);
	return n;
}

static void note_deleted(const char *id, int rc, const char *msg, void *arg)
{
	(void)msg;
	if (rc == 0 && strcmp(id, "old-1") == 0)
		*(bool *)arg = true;
}

/* dg_rec_s3_retention, which the gateway runs in a child at start and
 * every DG_GW_RETENTION_PERIOD_S, at its boundary: a recording exactly
 * max_age old stays, one second older goes, every object of it; foreign
 * keys and a recording without events.jsonl stay. */
Test(gateway_bucket, retention_deletes_from_the_bucket_at_its_bound)
{
	char state[128];
	snprintf(state, sizeof(state), "%s/state", tmp);
	cr_assert_eq(mkdir(state, 0700), 0);
	struct dg_rec_key *k;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_rec_key_load_or_create(state, &k, &err), 0, "%s", err.msg);
	dg_rec_key_free(k);
	plant_with(state, "old-1", NULL, NULL);
	/* A partial upload: a frame, no events.jsonl. */
	char f[256];
	snprintf(f, sizeof(f), "%s/frame.png", tmp);
	FILE *fp = fopen(f, "w");
	fputs("\x89PNG\r\n\x1a\nxx", fp);
	fclose(fp);
	cr_assert_eq(dg_rec_s3_put(&s3, DG_REC_S3_PREFIX "partial-1/frames/"
				   "0000000000000000000000000000000000000000000000000000000000000000.png",
				   f, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_s3_put(&s3, DG_REC_S3_PREFIX "NotAnId/events.jsonl", f, &err), 0, "%s",
		     err.msg);
	bool e;
	int64_t t = -1;
	cr_assert_eq(dg_rec_s3_stat(&s3, DG_REC_S3_PREFIX "old-1/events.jsonl", &e, NULL, &t, &err), 0,
		     "%s", err.msg);
	cr_assert(e && t > 0, "no Last-Modified: %lld", (long long)t);
	cr_assert_geq(keys_under(DG_REC_S3_PREFIX "old-1/"), 2);
	const int64_t day = 86400;
	unsigned n, del, failed;
	/* The suite's other recordings in the bucket are older: they may go. */
	bool gone = false;
	struct dg_rec_pass pass = {NULL, note_deleted, &gone};
	cr_assert_eq(dg_rec_s3_retention(&s3, day, t + day, &pass, &n, &del, &failed, &err), 0, "%s",
		     err.msg);
	cr_assert(!gone, "deleted at exactly max_age");
	cr_assert_geq(n, 1);
	cr_assert_eq(keys_under(DG_REC_S3_PREFIX "old-1/"), 2);
	cr_assert_eq(dg_rec_s3_retention(&s3, day, t + day + 1, &pass, &n, &del, &failed, &err), 0, "%s",
		     err.msg);
	cr_assert(gone, "not deleted one second past max_age");
	cr_assert_eq(failed, 0);
	cr_assert_eq(keys_under(DG_REC_S3_PREFIX "old-1/"), 0, "objects of a deleted recording remain");
	cr_assert_eq(keys_under(DG_REC_S3_PREFIX "partial-1/"), 1);
	cr_assert_eq(keys_under(DG_REC_S3_PREFIX "NotAnId/"), 1);
	cr_assert_eq(dg_rec_s3_retention(&s3, 0, 0, NULL, &n, &del, &failed, &err), -EINVAL);
}
