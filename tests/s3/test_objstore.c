/* Object storage (issue #20): recordings/objstore.c and recordings/upload.c.
 *
 * Suite s3: against a real S3 server, s3rver, started by tests/s3/s3.js on
 * loopback (DG_TEST_S3_URL, DG_TEST_S3_BUCKET): a recording written by the
 * recordings library itself is uploaded, fetched back and compared byte
 * for byte; uploads are idempotent; a missing id, an unsealed recording,
 * wrong credentials, foreign names in the bucket, and the fetch bounds at
 * their values.
 *
 * Suite fake: against a small HTTP server of this file's own on loopback,
 * for what a real store does not do on demand: 5xx answers (retried), 4xx
 * (never retried), bodies past their bound, hostile ListObjectsV2 answers
 * (malformed, huge, "..", foreign prefixes, endless pages), SigV4
 * signatures checked as S3 does (s3rver does not); and the key,
 * config and listing checks, the listing scanner under random damage.
 *
 * Every error message any test sees is checked not to hold the secret. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "recordings-priv.h"

#define SECRET "s3cr3t-N0t-F0r-Pr1nt1ng"

static char base[64], root[128], state[128], dest[128];
static struct dg_err err;
static struct dg_rec_key *key;

static void no_secret(void)
{
	cr_assert_null(strstr(err.msg, SECRET), "the secret is in a message: %s", err.msg);
	cr_assert_null(strstr(err.msg, "S3RVER:"), "credentials in a message: %s", err.msg);
}

/* Asserts rc, that the message holds each of the given words, and no
 * secret. */
#define ERR_IS(rc_, want, ...) \
	do { \
		int got_ = (rc_); \
		cr_assert_eq(got_, (want), "rc %d (%s), want %d", got_, err.msg, (want)); \
		const char *words_[] = { __VA_ARGS__ }; \
		for (size_t i_ = 0; i_ < sizeof(words_) / sizeof(words_[0]); i_++) \
			cr_assert_not_null(strstr(err.msg, words_[i_]), "\"%s\" not in: %s", words_[i_], \
					   err.msg); \
		no_secret(); \
	} while (0)

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/dgs3-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/rec", base);
	snprintf(state, sizeof(state), "%s/state", base);
	snprintf(dest, sizeof(dest), "%s/dest", base);
	mkdir(root, 0750);
	mkdir(state, 0700);
	mkdir(dest, 0750);
	cr_assert_eq(dg_rec_key_load_or_create(state, &key, &err), 0, "%s", err.msg);
	memset(&err, 0, sizeof(err));
}

static void teardown(void)
{
	dg_rec_key_free(key);
	dg_rec_rm_tree(AT_FDCWD, base, 0, &dg_rec_limits_default);
}

/* A recording written by the library: `frames` distinct frames, an event
 * naming each, sealed or not. */
static void make_rec(const char *id, int frames, bool seal)
{
	struct dg_rec *r;
	struct dg_rec_meta m = { .id = id, .profile = "xterm", .width = 640, .height = 480,
				 .policy_text = "{}", .policy_len = 2 };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	for (int i = 0; i < frames; i++) {
		uint8_t png[2000];
		memcpy(png, "\x89PNG\r\n\x1a\n", 8);
		memset(png + 8, 'a' + i, sizeof(png) - 8);
		char hex[65];
		cr_assert_eq(dg_rec_frame(r, png, sizeof(png) - (size_t)i, hex, &err), 0, "%s", err.msg);
		json_t *e = json_pack("{s:s, s:s, s:s}", "type", "lifecycle", "state", "ready", "frame", hex);
		cr_assert_eq(dg_rec_event(r, e, &err), 0, "%s", err.msg);
		json_decref(e);
	}
	if (seal)
		cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	dg_rec_close(r);
}

static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL;
	struct stat st;
	cr_assert_eq(dg_read_file("test", path, 64 << 20, true, &buf, len, &st, &err), 0, "%s", err.msg);
	return buf;
}

static void same_file(const char *a, const char *b)
{
	size_t la, lb;
	char *x = slurp(a, &la), *y = slurp(b, &lb);
	cr_assert_eq(la, lb, "%s and %s differ in length", a, b);
	cr_assert_eq(memcmp(x, y, la), 0, "%s and %s differ", a, b);
	free(x);
	free(y);
}

/* Every file of ROOT/ID is in DEST/ID with the same bytes; the
 * "uploaded" marker stays home. */
static void same_recording(const char *id)
{
	char a[512], b[512];
	const char *files[] = { "session.json", "events.jsonl" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(a, sizeof(a), "%s/%s/%s", root, id, files[i]);
		snprintf(b, sizeof(b), "%s/%s/%s", dest, id, files[i]);
		same_file(a, b);
	}
	snprintf(a, sizeof(a), "%s/%s/frames", root, id);
	snprintf(b, sizeof(b), "%s/%s/frames", dest, id);
	DIR *d = opendir(a);
	cr_assert_not_null(d);
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char fa[1024], fb[1024];
		snprintf(fa, sizeof(fa), "%s/%s", a, de->d_name);
		snprintf(fb, sizeof(fb), "%s/%s", b, de->d_name);
		same_file(fa, fb);
	}
	closedir(d);
	snprintf(b, sizeof(b), "%s/%s/%s", dest, id, DG_REC_UPLOADED_FILE);
	cr_assert_eq(access(b, F_OK), -1, "the marker was uploaded");
}

/* ======================= against s3rver ====================================== */

static struct dg_rec_s3 real(void)
{
	const char *url = getenv("DG_TEST_S3_URL"), *bucket = getenv("DG_TEST_S3_BUCKET");
	cr_assert(url && bucket, "DG_TEST_S3_URL and DG_TEST_S3_BUCKET are unset: run through tests/s3/s3.js "
				 "(ctest -R s3/objstore)");
	return (struct dg_rec_s3){ .endpoint = url, .region = "us-east-1", .bucket = bucket,
				   .access_key = "S3RVER", .secret_key = "S3RVER", .timeout_ms = 20000 };
}

TestSuite(s3, .init = setup, .fini = teardown);

Test(s3, upload_fetch_verify_byte_for_byte)
{
	struct dg_rec_s3 s = real();
	make_rec("rt-1", 3, true);
	cr_assert_eq(dg_rec_upload(&s, root, "rt-1", key, &err), 0, "%s", err.msg);
	char p[512];
	snprintf(p, sizeof(p), "%s/rt-1/uploaded", root);
	size_t len;
	char *marker = slurp(p, &len);
	cr_assert_not_null(strstr(marker, "s3://deskgate-test/recordings/rt-1/"), "%s", marker);
	free(marker);
	/* Nothing of the confirmation is left behind. */
	DIR *d = opendir(root);
	struct dirent *de;
	while ((de = readdir(d)))
		cr_assert(strncmp(de->d_name, ".s3", 3) != 0, "left behind: %s", de->d_name);
	closedir(d);

	cr_assert_eq(dg_rec_fetch(&s, "rt-1", dest, &err), 0, "%s", err.msg);
	same_recording("rt-1");
	struct dg_rec_verify_result res;
	snprintf(p, sizeof(p), "%s/rt-1", dest);
	cr_assert_eq(dg_rec_verify(p, key, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	cr_assert_eq(res.frames, 3);
	/* A second fetch into the same place is refused, not merged. */
	ERR_IS(dg_rec_fetch(&s, "rt-1", dest, &err), -EEXIST, "exists");
}

Test(s3, second_upload_is_idempotent)
{
	struct dg_rec_s3 s = real();
	make_rec("idem-1", 2, true);
	cr_assert_eq(dg_rec_upload(&s, root, "idem-1", key, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_upload(&s, root, "idem-1", key, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_fetch(&s, "idem-1", dest, &err), 0, "%s", err.msg);
	same_recording("idem-1");
}

static int collect(void *arg, const char *k)
{
	json_array_append_new(arg, json_string(k));
	return 0;
}

Test(s3, objects_put_head_get_list_delete)
{
	struct dg_rec_s3 s = real();
	char path[256], back[256];
	snprintf(path, sizeof(path), "%s/obj", base);
	FILE *f = fopen(path, "w");
	for (int i = 0; i < 100000; i++)
		fputc('a' + i % 26, f);
	fclose(f);
	cr_assert_eq(dg_rec_s3_put(&s, "t/ops/one.bin", path, &err), 0, "%s", err.msg);
	bool exists;
	int64_t size;
	cr_assert_eq(dg_rec_s3_head(&s, "t/ops/one.bin", &exists, &size, &err), 0, "%s", err.msg);
	cr_assert(exists);
	cr_assert_eq(size, 100000);
	/* The GET bound at its value, and one byte short of it. */
	snprintf(back, sizeof(back), "%s/back", base);
	cr_assert_eq(dg_rec_s3_get(&s, "t/ops/one.bin", back, 100000, &size, &err), 0, "%s", err.msg);
	cr_assert_eq(size, 100000);
	same_file(path, back);
	unlink(back);
	ERR_IS(dg_rec_s3_get(&s, "t/ops/one.bin", back, 99999, &size, &err), -EFBIG, "GET",
	       "deskgate-test", "t/ops/one.bin", "99999");
	cr_assert_eq(access(back, F_OK), -1, "a refused GET left its file");
	json_t *keys = json_array();
	cr_assert_eq(dg_rec_s3_put(&s, "t/ops/two.bin", path, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_s3_list(&s, "t/ops/", collect, keys, &err), 0, "%s", err.msg);
	cr_assert_eq(json_array_size(keys), 2);
	cr_assert_str_eq(json_string_value(json_array_get(keys, 0)), "t/ops/one.bin");
	json_decref(keys);
	cr_assert_eq(dg_rec_s3_delete(&s, "t/ops/one.bin", &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_s3_head(&s, "t/ops/one.bin", &exists, &size, &err), 0, "%s", err.msg);
	cr_assert_not(exists);
	ERR_IS(dg_rec_s3_get(&s, "t/ops/one.bin", back, 10, &size, &err), -ENOENT, "GET", "deskgate-test",
	       "t/ops/one.bin", "404", "NoSuchKey");
}

Test(s3, fetch_of_a_missing_id)
{
	struct dg_rec_s3 s = real();
	ERR_IS(dg_rec_fetch(&s, "never-uploaded", dest, &err), -ENOENT, "never-uploaded", "deskgate-test");
	char p[256];
	snprintf(p, sizeof(p), "%s/never-uploaded", dest);
	cr_assert_eq(access(p, F_OK), -1);
}

Test(s3, unsealed_recording_refused)
{
	struct dg_rec_s3 s = real();
	make_rec("open-1", 1, false);
	ERR_IS(dg_rec_upload(&s, root, "open-1", key, &err), -EBADMSG, "not sealed", "unsealed");
	char p[256];
	snprintf(p, sizeof(p), "%s/open-1/uploaded", root);
	cr_assert_eq(access(p, F_OK), -1);
	/* Nothing was sent. */
	ERR_IS(dg_rec_fetch(&s, "open-1", dest, &err), -ENOENT, "open-1");
}

Test(s3, wrong_credentials)
{
	struct dg_rec_s3 s = real();
	s.access_key = "NOT-A-KEY";
	s.secret_key = SECRET;
	make_rec("cred-1", 1, true);
	ERR_IS(dg_rec_upload(&s, root, "cred-1", key, &err), -EACCES, "deskgate-test", "cred-1", "HTTP 403",
	       "try 1 of");
	char p[256];
	snprintf(p, sizeof(p), "%s/cred-1/session.json", root);
	ERR_IS(dg_rec_s3_put(&s, "recordings/cred-1/session.json", p, &err), -EACCES,
	       "PUT s3://deskgate-test/recordings/cred-1/session.json", "HTTP 403", "(InvalidAccessKeyId)");
	ERR_IS(dg_rec_fetch(&s, "cred-1", dest, &err), -EACCES, "deskgate-test", "HTTP 403");
}

Test(s3, fetch_refuses_foreign_names)
{
	struct dg_rec_s3 s = real();
	make_rec("foreign-1", 1, true);
	cr_assert_eq(dg_rec_upload(&s, root, "foreign-1", key, &err), 0, "%s", err.msg);
	char p[256];
	snprintf(p, sizeof(p), "%s/foreign-1/session.json", root);
	cr_assert_eq(dg_rec_s3_put(&s, "recordings/foreign-1/frames/evil.sh", p, &err), 0, "%s", err.msg);
	ERR_IS(dg_rec_fetch(&s, "foreign-1", dest, &err), -EBADMSG, "recordings/foreign-1/frames/evil.sh",
	       "not a file of a recording");
	snprintf(p, sizeof(p), "%s/foreign-1", dest);
	cr_assert_eq(access(p, F_OK), -1);
	DIR *d = opendir(dest);
	struct dirent *de;
	while ((de = readdir(d)))
		cr_assert(de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")),
			  "left behind: %s", de->d_name);
	closedir(d);
}

Test(s3, fetch_bounds_at_their_values)
{
	struct dg_rec_s3 s = real();
	make_rec("bound-1", 2, true);
	cr_assert_eq(dg_rec_upload(&s, root, "bound-1", key, &err), 0, "%s", err.msg);
	/* 4 files: session.json, events.jsonl, 2 frames. */
	int64_t total = 0;
	const char *names[] = { "session.json", "events.jsonl" };
	char p[512];
	for (int i = 0; i < 2; i++) {
		struct stat st;
		snprintf(p, sizeof(p), "%s/bound-1/%s", root, names[i]);
		stat(p, &st);
		total += st.st_size;
	}
	total += 2000 + 1999;
	struct dg_rec_fetch_limits lim = { .files_max = 3, .bytes_max = total };
	ERR_IS(dg_rec_fetch_lim(&s, "bound-1", dest, &lim, &err), -EFBIG, "more than 3 files");
	lim.files_max = 4;
	lim.bytes_max = total - 1;
	ERR_IS(dg_rec_fetch_lim(&s, "bound-1", dest, &lim, &err), -EFBIG, "over");
	lim.bytes_max = total;
	cr_assert_eq(dg_rec_fetch_lim(&s, "bound-1", dest, &lim, &err), 0, "%s", err.msg);
	same_recording("bound-1");
}

/* ---- deskgate recordings (the CLI) ---- */

/* Runs deskgate with args; its stdout and stderr together into *out
 * (malloc'd). Returns the exit code. */
static int run_cli(const char *const *args, char **out)
{
	char log[256];
	snprintf(log, sizeof(log), "%s/cli.log", base);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	const char *argv[16] = { DG_BIN };
	for (int i = 0; args[i]; i++)
		argv[i + 1] = args[i];
	extern char **environ;
	pid_t pid;
	cr_assert_eq(posix_spawn(&pid, DG_BIN, &fa, NULL, (char *const *)argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	size_t len;
	*out = slurp(log, &len);
	cr_assert_null(strstr(*out, SECRET), "the secret is in the output: %s", *out);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static const char *store_file(const struct dg_rec_s3 *s, int mode)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/store.json", base);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "endpoint", s->endpoint, "region", s->region,
			      "bucket", s->bucket, "access_key", s->access_key, "secret_key", s->secret_key);
	cr_assert_eq(json_dump_file(j, path, 0), 0);
	json_decref(j);
	chmod(path, (mode_t)mode);
	return path;
}

Test(s3, cli_upload_and_fetch)
{
	struct dg_rec_s3 s = real();
	make_rec("cli-1", 2, true);
	char *out;
	const char *store = store_file(&s, 0600);
	const char *up[] = { "recordings", "--store", store, "--root", root, "--state-dir", state, "upload",
			     "cli-1", NULL };
	cr_assert_eq(run_cli(up, &out), 0, "%s", out);
	cr_assert_not_null(strstr(out, "uploaded cli-1 to s3://deskgate-test/recordings/cli-1/"), "%s", out);
	free(out);
	const char *fetch[] = { "recordings", "--store", store, "--root", dest, "fetch", "cli-1", NULL };
	cr_assert_eq(run_cli(fetch, &out), 0, "%s", out);
	free(out);
	same_recording("cli-1");
	/* A store file others may read; a fetch given a key. */
	store_file(&s, 0644);
	cr_assert_eq(run_cli(up, &out), 2, "%s", out);
	cr_assert_not_null(strstr(out, "chmod 600"), "%s", out);
	free(out);
	const char *fetch_key[] = { "recordings", "--store", store, "--root", dest, "--state-dir", state,
				    "fetch", "cli-1", NULL };
	cr_assert_eq(run_cli(fetch_key, &out), 2, "%s", out);
	free(out);
	/* Wrong credentials: exit 1, the bucket and the status named, no
	 * secret printed. */
	s.access_key = "NOT-A-KEY";
	s.secret_key = SECRET;
	store_file(&s, 0600);
	cr_assert_eq(run_cli(up, &out), 1, "%s", out);
	cr_assert_not_null(strstr(out, "deskgate-test"), "%s", out);
	cr_assert_not_null(strstr(out, "HTTP 403"), "%s", out);
	free(out);
}

/* ======================= against a fake store ================================ */

struct answer {
	int status;
	const char *body;       /* or NULL: fill bytes of 'x' */
	size_t len;             /* of the body (fill: how many) */
	bool no_length;         /* no Content-Length: the body ends at close */
	int delay_ms;           /* wait this long before answering */
};

#define FAKE_MAX 8
struct fake {
	int lfd, port;
	pthread_t t;
	struct answer a[FAKE_MAX];
	int n, served;
	char req[FAKE_MAX][1024];   /* each request's first line */
	char head[FAKE_MAX][8192];  /* and its whole head */
	const char *secret;         /* set: check each request's SigV4 signature
				       with it, 403 SignatureDoesNotMatch when wrong */
	bool sig_ok[FAKE_MAX];
};

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Reads a request: headers, then Content-Length bytes of body. */
static void read_request(int fd, char *line, size_t cap, char *head, size_t head_cap)
{
	char buf[65536];
	size_t got = 0;
	char *end = NULL;
	while (!end && got < sizeof(buf) - 1) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			return;
		got += (size_t)r;
		buf[got] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	if (!end)
		return;
	snprintf(line, cap, "%.*s", (int)strcspn(buf, "\r"), buf);
	snprintf(head, head_cap, "%.*s", (int)(end + 2 - buf), buf);
	if (strcasestr(buf, "\nexpect: 100-continue"))
		send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	const char *cl = strcasestr(buf, "\ncontent-length:");
	long body = cl && cl < end ? atol(cl + 16) : 0;
	long have = (long)(got - (size_t)(end + 4 - buf));
	while (have < body) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0)
			return;
		have += r;
	}
}

static void answer(int fd, const struct answer *a)
{
	char head[256];
	int n = a->no_length
			? snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nConnection: close\r\n\r\n", a->status)
			: snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
				   a->status, a->len);
	send_all(fd, head, (size_t)n);
	if (a->body) {
		send_all(fd, a->body, a->len);
		return;
	}
	char fill[65536];
	memset(fill, 'x', sizeof(fill));
	for (size_t left = a->len; left;) {
		size_t k = left < sizeof(fill) ? left : sizeof(fill);
		send_all(fd, fill, k);
		left -= k;
	}
}

#define A(st, b) { .status = (st), .body = (b), .len = sizeof(b) - 1 }

/* ---- SigV4, checked as S3 does (for the fake store) ---- */

static void hmac(const void *key, size_t klen, const char *msg, uint8_t out[32])
{
	unsigned len = 32;
	HMAC(EVP_sha256(), key, (int)klen, (const uint8_t *)msg, strlen(msg), out, &len);
}

/* The value of header name (lowercase) in head, trimmed, into out. */
static bool header(const char *head, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2;
		if (strncasecmp(h, name, nl) == 0 && h[nl] == ':') {
			const char *v = h + nl + 1;
			while (*v == ' ')
				v++;
			size_t vl = strcspn(v, "\r");
			while (vl && v[vl - 1] == ' ')
				vl--;
			snprintf(out, cap, "%.*s", (int)vl, v);
			return true;
		}
	}
	return false;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The canonical request of a head (S3: the path and query as sent, the
 * query's parameters sorted; every signed header; the payload hash as
 * x-amz-content-sha256 says). */
static void canonical_request(const char *head, const char *signed_hdrs, char *out, size_t cap)
{
	char method[16], target[2048];
	sscanf(head, "%15s %2047s", method, target);
	char *q = strchr(target, '?');
	if (q)
		*q++ = '\0';
	char *params[32];
	int np = 0;
	for (char *t = q ? strtok(q, "&") : NULL; t && np < 32; t = strtok(NULL, "&"))
		params[np++] = t;
	qsort(params, (size_t)np, sizeof(params[0]), cmp_str);
	size_t at = (size_t)snprintf(out, cap, "%s\n%s\n", method, target);
	for (int i = 0; i < np; i++)
		at += (size_t)snprintf(out + at, cap - at, "%s%s%s", i ? "&" : "", params[i],
				       strchr(params[i], '=') ? "" : "=");
	at += (size_t)snprintf(out + at, cap - at, "\n");
	char names[512], v[1024];
	snprintf(names, sizeof(names), "%s", signed_hdrs);
	for (char *n = strtok(names, ";"); n; n = strtok(NULL, ";")) {
		cr_assert(header(head, n, v, sizeof(v)), "signed header %s is not in the request", n);
		at += (size_t)snprintf(out + at, cap - at, "%s:%s\n", n, v);
	}
	cr_assert(header(head, "x-amz-content-sha256", v, sizeof(v)), "no x-amz-content-sha256");
	snprintf(out + at, cap - at, "\n%s\n%s", signed_hdrs, v);
}

static bool sigv4_ok(const char *head, const char *secret)
{
	char auth[1024], cred[256], signed_hdrs[512], sig[80], date[32];
	if (!header(head, "authorization", auth, sizeof(auth)) || !header(head, "x-amz-date", date, sizeof(date)))
		return false;
	if (sscanf(auth, "AWS4-HMAC-SHA256 Credential=%255[^,], SignedHeaders=%511[^,], Signature=%79s", cred,
		   signed_hdrs, sig) != 3)
		return false;
	/* S3 wants every x-amz-* header signed. */
	if (!strstr(signed_hdrs, "x-amz-content-sha256") || !strstr(signed_hdrs, "x-amz-date"))
		return false;
	char *scope = strchr(cred, '/'); /* AK/<day>/<region>/s3/aws4_request */
	if (!scope)
		return false;
	scope++;
	char day[16], region[64];
	if (sscanf(scope, "%15[^/]/%63[^/]/s3/aws4_request", day, region) != 2)
		return false;
	static char creq[16384];
	canonical_request(head, signed_hdrs, creq, sizeof(creq));
	uint8_t h[32];
	char hex[65], sts[512];
	SHA256((const uint8_t *)creq, strlen(creq), h);
	dg_hex_encode(h, 32, hex);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", date, scope, hex);
	char k0[256];
	uint8_t k[32];
	snprintf(k0, sizeof(k0), "AWS4%s", secret);
	hmac(k0, strlen(k0), day, k);
	hmac(k, 32, region, k);
	hmac(k, 32, "s3", k);
	hmac(k, 32, "aws4_request", k);
	hmac(k, 32, sts, h);
	dg_hex_encode(h, 32, hex);
	return strcmp(hex, sig) == 0;
}

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	for (int i = 0; i < f->n; i++) {
		struct pollfd p = { .fd = f->lfd, .events = POLLIN };
		if (poll(&p, 1, 10000) != 1)
			break;
		int c = accept(f->lfd, NULL, NULL);
		if (c < 0)
			break;
		read_request(c, f->req[i], sizeof(f->req[i]), f->head[i], sizeof(f->head[i]));
		static const struct answer denied = A(403, "<Error><Code>SignatureDoesNotMatch</Code></Error>");
		f->sig_ok[i] = f->secret && sigv4_ok(f->head[i], f->secret);
		if (f->a[i].delay_ms)
			usleep((useconds_t)f->a[i].delay_ms * 1000);
		answer(c, f->secret && !f->sig_ok[i] ? &denied : &f->a[i]);
		shutdown(c, SHUT_WR);
		close(c);
		f->served++;
	}
	return NULL;
}

static void fake_start(struct fake *f)
{
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(f->lfd, 8), 0);
	socklen_t sl = sizeof(sa);
	getsockname(f->lfd, (struct sockaddr *)&sa, &sl);
	f->port = ntohs(sa.sin_port);
	cr_assert_eq(pthread_create(&f->t, NULL, fake_run, f), 0);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->t, NULL);
	close(f->lfd);
}

static char fake_url[64];

static struct dg_rec_s3 fake_cfg(const struct fake *f)
{
	snprintf(fake_url, sizeof(fake_url), "http://127.0.0.1:%d/", f->port);
	return (struct dg_rec_s3){ .endpoint = fake_url, .region = "us-east-1", .bucket = "fake-bucket",
				   .access_key = "AKIDFAKE", .secret_key = SECRET, .timeout_ms = 10000,
				   .connect_timeout_ms = 2000 };
}


TestSuite(fake, .init = setup, .fini = teardown);

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

Test(fake, retries_5xx_then_succeeds)
{
	struct fake f = { .n = 3, .a = { A(500, "<Error><Code>InternalError</Code></Error>"), A(503, "busy"),
					A(200, "hello") } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	char p[256];
	snprintf(p, sizeof(p), "%s/got", base);
	int64_t size = 0;
	double t0 = now_s();
	cr_assert_eq(dg_rec_s3_get(&s, "a/b.png", p, 100, &size, &err), 0, "%s", err.msg);
	double took = now_s() - t0;
	fake_stop(&f);
	cr_assert_eq(f.served, 3);
	cr_assert_eq(size, 5);
	/* The back-off: DG_REC_S3_RETRY_DELAY_MS, then twice that. */
	cr_assert(took >= 3 * DG_REC_S3_RETRY_DELAY_MS / 1000.0, "took %.3f s", took);
	cr_assert_str_eq(f.req[0], "GET /fake-bucket/a/b.png HTTP/1.1");
}

Test(fake, gives_up_after_the_attempts)
{
	struct fake f = { .n = DG_REC_S3_ATTEMPTS };
	for (int i = 0; i < DG_REC_S3_ATTEMPTS; i++)
		f.a[i] = (struct answer)A(502, "<Error><Code>BadGateway</Code></Error>");
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	bool exists;
	ERR_IS(dg_rec_s3_delete(&s, "x/y", &err), -EIO, "DELETE", "fake-bucket", "x/y", "HTTP 502",
	       "BadGateway", "try 4 of 4");
	fake_stop(&f);
	cr_assert_eq(f.served, DG_REC_S3_ATTEMPTS);
	(void)exists;
}

Test(fake, never_retries_4xx)
{
	struct fake f = { .n = 2, .a = { A(403, "<Error><Code>AccessDenied</Code><Message>no</Message></Error>"),
					A(200, "") } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	char p[256];
	snprintf(p, sizeof(p), "%s/obj", base);
	FILE *fp = fopen(p, "w");
	fputs("data", fp);
	fclose(fp);
	ERR_IS(dg_rec_s3_put(&s, "rec/one.png", p, &err), -EACCES, "PUT", "s3://fake-bucket/rec/one.png",
	       "HTTP 403", "(AccessDenied)", "try 1 of");
	bool exists;
	cr_assert_eq(dg_rec_s3_head(&s, "rec/one.png", &exists, NULL, &err), 0, "%s", err.msg);
	fake_stop(&f);
	cr_assert(exists);
	/* The PUT was not tried again: the next request was the HEAD. */
	cr_assert_eq(f.served, 2);
	cr_assert_str_eq(f.req[0], "PUT /fake-bucket/rec/one.png HTTP/1.1");
	cr_assert_str_eq(f.req[1], "HEAD /fake-bucket/rec/one.png HTTP/1.1");
}

Test(fake, connection_refused_is_retried_then_an_error)
{
	struct fake f = { .n = 0 };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	fake_stop(&f); /* the port is closed now */
	bool exists;
	ERR_IS(dg_rec_s3_head(&s, "a", &exists, NULL, &err), -EIO, "HEAD", "fake-bucket", "try 4 of 4");
}

Test(fake, a_store_that_does_not_answer_times_out)
{
	struct fake f = { .n = DG_REC_S3_ATTEMPTS };
	for (int i = 0; i < DG_REC_S3_ATTEMPTS; i++)
		f.a[i] = (struct answer){ .status = 200, .delay_ms = 1000 };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	s.timeout_ms = 300;
	bool exists;
	double t0 = now_s();
	ERR_IS(dg_rec_s3_head(&s, "slow", &exists, NULL, &err), -ETIMEDOUT, "HEAD", "fake-bucket", "slow",
	       "try 4 of 4");
	double took = now_s() - t0;
	fake_stop(&f);
	cr_assert(took < 10, "took %.1f s", took);
}

Test(fake, get_bound_at_its_value)
{
	/* A body of exactly the bound, without Content-Length (so only the
	 * count can stop it), then one byte more, then a Content-Length past
	 * the bound. */
	struct fake f = { .n = 3,
			  .a = { { .status = 200, .len = 4096, .no_length = true },
				 { .status = 200, .len = 4097, .no_length = true },
				 { .status = 200, .len = 1 << 20 } } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	char p[256];
	snprintf(p, sizeof(p), "%s/got", base);
	int64_t size;
	cr_assert_eq(dg_rec_s3_get(&s, "k", p, 4096, &size, &err), 0, "%s", err.msg);
	cr_assert_eq(size, 4096);
	unlink(p);
	ERR_IS(dg_rec_s3_get(&s, "k", p, 4096, &size, &err), -EFBIG, "GET", "fake-bucket", "4096");
	cr_assert_eq(access(p, F_OK), -1);
	ERR_IS(dg_rec_s3_get(&s, "k", p, 4096, &size, &err), -EFBIG, "longer than 4096");
	cr_assert_eq(access(p, F_OK), -1);
	fake_stop(&f);
}

Test(fake, keys_checked_before_any_request)
{
	struct fake f = { .n = 0 };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	char max[DG_REC_S3_KEY_MAX + 2];
	memset(max, 'k', sizeof(max));
	max[DG_REC_S3_KEY_MAX] = '\0';
	cr_assert(dg_rec_s3_key_valid(max));
	max[DG_REC_S3_KEY_MAX] = 'k';
	max[DG_REC_S3_KEY_MAX + 1] = '\0';
	cr_assert_not(dg_rec_s3_key_valid(max));
	const char *badk[] = { "", "/a", "a/../b", "..", "a/..", "./a", "a//b", "a/", "a b", "a\tb", "a\x7f",
			       "caf\xc3\xa9" };
	for (size_t i = 0; i < sizeof(badk) / sizeof(badk[0]); i++) {
		cr_assert_not(dg_rec_s3_key_valid(badk[i]), "%s", badk[i]);
		bool exists;
		ERR_IS(dg_rec_s3_head(&s, badk[i], &exists, NULL, &err), -EINVAL, "not a valid key");
	}
	cr_assert(dg_rec_s3_key_valid("recordings/a-1/frames/..x.png"));
	cr_assert(dg_rec_s3_key_valid("a.b/c~d_e"));
	fake_stop(&f);
	cr_assert_eq(f.served, 0);
}

Test(fake, config_checked)
{
	struct dg_rec_s3 s = { .endpoint = "http://127.0.0.1:9", .region = "us-east-1", .bucket = "abc",
			       .access_key = "AK", .secret_key = SECRET };
	cr_assert_eq(dg_rec_s3_check(&s, &err), 0, "%s", err.msg);
	char b63[64];
	memset(b63, 'b', 63);
	b63[63] = '\0';
	s.bucket = b63;
	cr_assert_eq(dg_rec_s3_check(&s, &err), 0, "%s", err.msg);
	char b64[65];
	memset(b64, 'b', 64);
	b64[64] = '\0';
	s.bucket = b64;
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "bucket");
	s.bucket = "ab";
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "bucket");
	s.bucket = "Ab_c";
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "bucket");
	s.bucket = "abc";
	const char *eps[] = { "ftp://h", "http://user:pw@h", "http://h/?x", "http://", "h:80", "http://h#f",
			      "http:// h" };
	for (size_t i = 0; i < sizeof(eps) / sizeof(eps[0]); i++) {
		s.endpoint = eps[i];
		ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "endpoint");
	}
	s.endpoint = "https://s3.example:443/base/";
	cr_assert_eq(dg_rec_s3_check(&s, &err), 0, "%s", err.msg);
	s.access_key = "a:b";
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "access key");
	s.access_key = "AK";
	s.secret_key = SECRET " with a space";
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "secret key");
	s.secret_key = SECRET;
	s.region = "US east";
	ERR_IS(dg_rec_s3_check(&s, &err), -EINVAL, "region");
}

/* ---- listings ---- */

#define LIST_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult xmlns=\"x\"><Name>b</Name>"

Test(fake, list_pages_follow_the_token)
{
	struct fake f = { .n = 2,
			  .a = { A(200, LIST_HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>t/1+=&amp;"
						  "</NextContinuationToken><Contents><Key>p/a&amp;b</Key></Contents>"
						  "<Contents><Key>p/c</Key></Contents></ListBucketResult>"),
				 A(200, LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>p/&#100;&#x65;"
						  "</Key></Contents></ListBucketResult>") } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	json_t *keys = json_array();
	cr_assert_eq(dg_rec_s3_list(&s, "p/", collect, keys, &err), 0, "%s", err.msg);
	fake_stop(&f);
	cr_assert_eq(json_array_size(keys), 3);
	cr_assert_str_eq(json_string_value(json_array_get(keys, 0)), "p/a&b");
	cr_assert_str_eq(json_string_value(json_array_get(keys, 2)), "p/de");
	json_decref(keys);
	/* Sorted, encoded query parameters (SigV4's canonical form). */
	cr_assert_str_eq(f.req[0], "GET /fake-bucket?list-type=2&prefix=p%2F HTTP/1.1");
	cr_assert_str_eq(f.req[1],
			 "GET /fake-bucket?continuation-token=t%2F1%2B%3D%26&list-type=2&prefix=p%2F HTTP/1.1");
}

static void list_refused(const char *body, int want, const char *word)
{
	struct fake f = { .n = 1, .a = { { .status = 200, .body = body, .len = strlen(body) } } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	json_t *keys = json_array();
	memset(&err, 0, sizeof(err));
	int rc = dg_rec_s3_list(&s, "p/", collect, keys, &err);
	cr_assert_eq(rc, want, "%s: rc %d: %s", body, rc, err.msg);
	ERR_IS(rc, want, "LIST", "fake-bucket", word);
	fake_stop(&f);
	json_decref(keys);
}

Test(fake, hostile_listings)
{
	list_refused(LIST_HEAD "<Contents><Key>p/../../etc/passwd</Key></Contents></ListBucketResult>", -EBADMSG,
		     "not a valid key");
	list_refused(LIST_HEAD "<Contents><Key>p/&#x2e;&#46;/x</Key></Contents>", -EBADMSG, "not a valid key");
	list_refused(LIST_HEAD "<Contents><Key>q/a</Key></Contents>", -EBADMSG, "not under the prefix");
	list_refused(LIST_HEAD "<Contents><Key>p/a", -EBADMSG, "without its </Key>");
	list_refused(LIST_HEAD "<Contents><Key>p/a&bogus;</Key></Contents>", -EBADMSG, "not a valid key");
	list_refused(LIST_HEAD "<Contents><Key>p/\x01</Key></Contents>", -EBADMSG, "not a valid key");
	list_refused("<html>hello</html>", -EBADMSG, "not a ListBucketResult");
	list_refused(LIST_HEAD "<IsTruncated>maybe</IsTruncated>", -EBADMSG, "neither true nor false");
	list_refused(LIST_HEAD "<IsTruncated>true</IsTruncated><Contents><Key>p/a</Key></Contents>", -EBADMSG,
		     "without a NextContinuationToken");
	/* A store that says "more" for ever without keys. */
	list_refused(LIST_HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken>",
		     -EBADMSG, "truncated page without keys");
}

Test(fake, listing_size_at_its_bound)
{
	/* Exactly DG_REC_S3_LIST_XML_MAX bytes (padded with a comment-free
	 * filler element), then one more. */
	static char doc[DG_REC_S3_LIST_XML_MAX + 2];
	const char *head = LIST_HEAD "<Contents><Key>p/a</Key></Contents><Pad>";
	const char *tail = "</Pad></ListBucketResult>";
	size_t hl = strlen(head), tl = strlen(tail);
	for (int extra = 0; extra < 2; extra++) {
		size_t len = DG_REC_S3_LIST_XML_MAX + (size_t)extra;
		memcpy(doc, head, hl);
		memset(doc + hl, 'z', len - hl - tl);
		memcpy(doc + len - tl, tail, tl);
		struct fake f = { .n = 1, .a = { { .status = 200, .body = doc, .len = len } } };
		fake_start(&f);
		struct dg_rec_s3 s = fake_cfg(&f);
		json_t *keys = json_array();
		if (extra == 0)
			cr_assert_eq(dg_rec_s3_list(&s, "p/", collect, keys, &err), 0, "%s", err.msg);
		else
			ERR_IS(dg_rec_s3_list(&s, "p/", collect, keys, &err), -EFBIG, "longer than 1048576");
		fake_stop(&f);
		json_decref(keys);
	}
}

static int check_key(void *arg, const char *k)
{
	(void)arg;
	cr_assert(dg_rec_s3_key_valid(k), "a listing passed an invalid key");
	cr_assert_eq(strncmp(k, "p/", 2), 0);
	return 0;
}

/* The scanner under random damage: cuts, flipped bytes, spliced tags.
 * Whatever it says, it never passes a bad key and never reads past the
 * buffer (the sanitizer build checks that). */
Test(fake, listing_scanner_under_damage)
{
	const char *good = LIST_HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>abc&amp;"
				     "</NextContinuationToken><Contents><Key>p/a&#x2F;b</Key><Size>3</Size>"
				     "</Contents><Contents><Key>p/x&lt;y</Key></Contents></ListBucketResult>";
	const char *bits[] = { "<Key>", "</Key>", "&", "&#", "..", "/", "<IsTruncated>", "</IsTruncated>", ";",
			       "\x00", "true" };
	size_t gl = strlen(good);
	unsigned seed = 20;
	struct dg_rec_s3_page pg;
	cr_assert_eq(dg_rec_s3_list_parse(good, gl, "p/", 10, check_key, NULL, &pg, &err), 0, "%s", err.msg);
	cr_assert_eq(pg.keys, 2);
	cr_assert_str_eq(pg.token, "abc&");
	cr_assert_eq(dg_rec_s3_list_parse(good, gl, "p/", 1, check_key, NULL, &pg, &err), -EBADMSG);
	for (int round = 0; round < 20000; round++) {
		char *buf = malloc(gl + 64);
		memcpy(buf, good, gl);
		size_t len = gl;
		for (int k = 0; k < 1 + (int)(rand_r(&seed) % 4); k++) {
			size_t at = rand_r(&seed) % len;
			switch (rand_r(&seed) % 3) {
			case 0:
				len = at; /* cut */
				break;
			case 1:
				buf[at] = (char)rand_r(&seed);
				break;
			default: {
				const char *b = bits[rand_r(&seed) % (sizeof(bits) / sizeof(bits[0]))];
				size_t bl = strlen(b) ? strlen(b) : 1;
				if (at + bl <= len)
					memcpy(buf + at, b, bl);
			}
			}
			if (len == 0)
				break;
		}
		/* An exact-size copy, so reading one byte past is caught. */
		char *exact = malloc(len ? len : 1);
		memcpy(exact, buf, len);
		int rc = dg_rec_s3_list_parse(exact, len, "p/", 10, check_key, NULL, &pg, &err);
		cr_assert(rc == 0 || rc == -EBADMSG, "rc %d", rc);
		free(exact);
		free(buf);
	}
}

/* The limits of recordings.h not reached above, each at its value and one
 * past it. */
Test(fake, limits_at_their_values)
{
	struct dg_rec_s3_page pg;
	/* Keys of one listing. */
	const char *two = LIST_HEAD "<Contents><Key>p/a</Key></Contents><Contents><Key>p/b</Key></Contents>";
	cr_assert_eq(dg_rec_s3_list_parse(two, strlen(two), "p/", 2, check_key, NULL, &pg, &err), 0, "%s",
		     err.msg);
	ERR_IS(dg_rec_s3_list_parse(two, strlen(two), "p/", 1, check_key, NULL, &pg, &err), -EBADMSG,
	       "more than 1 keys");
	/* The continuation token. */
	static char doc[4096];
	for (int extra = 0; extra < 2; extra++) {
		int n = snprintf(doc, sizeof(doc),
				 LIST_HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>%0*d"
					   "</NextContinuationToken><Contents><Key>p/a</Key></Contents>",
				 DG_REC_S3_TOKEN_MAX + extra, 7);
		int rc = dg_rec_s3_list_parse(doc, (size_t)n, "p/", 10, check_key, NULL, &pg, &err);
		if (extra == 0) {
			cr_assert_eq(rc, 0, "%s", err.msg);
			cr_assert_eq(strlen(pg.token), DG_REC_S3_TOKEN_MAX);
		} else {
			ERR_IS(rc, -EBADMSG, "NextContinuationToken");
		}
	}
	/* Endpoint, region, access key, secret key. */
	char url[DG_REC_S3_URL_MAX + 2], field[DG_REC_S3_FIELD_MAX + 2];
	struct dg_rec_s3 s = { .endpoint = url, .region = "r", .bucket = "abc", .access_key = "AK",
			       .secret_key = SECRET };
	for (int extra = 0; extra < 2; extra++) {
		size_t n = DG_REC_S3_URL_MAX + (size_t)extra;
		memcpy(url, "http://", 7);
		memset(url + 7, 'h', n - 7);
		url[n] = '\0';
		int rc = dg_rec_s3_check(&s, &err);
		if (extra == 0)
			cr_assert_eq(rc, 0, "%s", err.msg);
		else
			ERR_IS(rc, -EINVAL, "endpoint");
	}
	url[DG_REC_S3_URL_MAX] = '\0';
	const char **fields[] = { &s.region, &s.access_key, &s.secret_key };
	const char *names[] = { "region", "access key", "secret key" };
	for (size_t i = 0; i < 3; i++) {
		const char *keep = *fields[i];
		*fields[i] = field;
		for (int extra = 0; extra < 2; extra++) {
			memset(field, 'k', DG_REC_S3_FIELD_MAX + (size_t)extra);
			field[DG_REC_S3_FIELD_MAX + extra] = '\0';
			int rc = dg_rec_s3_check(&s, &err);
			if (extra == 0)
				cr_assert_eq(rc, 0, "%s: %s", names[i], err.msg);
			else
				ERR_IS(rc, -EINVAL, names[i]);
		}
		*fields[i] = keep;
	}
}

/* libcurl's signatures as S3 computes them (checked by the fake store: a
 * PUT with a body, a GET, a listing with an encoded, sorted query, a HEAD),
 * and a wrong secret refused with the bucket and the status named. */
Test(fake, sigv4_signatures_hold)
{
	struct fake f = { .n = 5, .secret = SECRET,
			  .a = { A(200, ""), A(200, "abc"),
				 A(200, LIST_HEAD "<IsTruncated>true</IsTruncated><NextContinuationToken>a/b=c"
						  "</NextContinuationToken><Contents><Key>p/q+r!/a</Key></Contents>"),
				 A(200, LIST_HEAD "<Contents><Key>p/q+r!/b</Key></Contents>"), A(200, "") } };
	fake_start(&f);
	struct dg_rec_s3 s = fake_cfg(&f);
	s.region = "eu-central-1";
	char p[256], back[256];
	snprintf(p, sizeof(p), "%s/obj", base);
	snprintf(back, sizeof(back), "%s/back", base);
	FILE *fp = fopen(p, "w");
	fputs("some bytes", fp);
	fclose(fp);
	cr_assert_eq(dg_rec_s3_put(&s, "recordings/a-1/frames/x~y_z.png", p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_s3_get(&s, "recordings/a-1/session.json", back, 10, NULL, &err), 0, "%s", err.msg);
	json_t *keys = json_array();
	cr_assert_eq(dg_rec_s3_list(&s, "p/q+r!/", collect, keys, &err), 0, "%s", err.msg);
	json_decref(keys);
	bool exists;
	s.secret_key = "not-the-secret";
	ERR_IS(dg_rec_s3_head(&s, "recordings/a-1/events.jsonl", &exists, NULL, &err), -EACCES, "HEAD",
	       "fake-bucket", "HTTP 403");
	fake_stop(&f);
	for (int i = 0; i < 4; i++)
		cr_assert(f.sig_ok[i], "request %d (%s) is not signed as S3 wants: %s", i, f.req[i], f.head[i]);
	cr_assert_not(f.sig_ok[4]);
	cr_assert_str_eq(f.req[2], "GET /fake-bucket?list-type=2&prefix=p%2Fq%2Br%21%2F HTTP/1.1");
	cr_assert_str_eq(f.req[3],
			 "GET /fake-bucket?continuation-token=a%2Fb%3Dc&list-type=2&prefix=p%2Fq%2Br%21%2F HTTP/1.1");
}
