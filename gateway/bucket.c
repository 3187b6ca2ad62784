/* The gateway's object store (config "object_store", docs/recordings.md):
 * sealed recordings are uploaded to the bucket, and recordings not on this
 * host are fetched from it into a bounded cache to be served.
 *
 * The S3 client blocks (recordings/objstore.c), the event loop must not:
 * every transfer runs in a child process forked from the gateway, one
 * upload and one fetch at a time. The child's contract: it inherits the
 * store's configuration and the recording key (in memory: the dropped
 * gateway cannot read the root-owned store file or key file again), closes
 * every descriptor but stderr and its report pipe, does one job with the
 * recordings library, writes its error message (if any) to the pipe and
 * _exits 0 (done) or 1 (failed). It never touches libwebsockets. The loop
 * polls the children every DG_GW_BUCKET_TICK_MS with waitpid(WNOHANG).
 *
 * Uploads. The state is on disk: a recording is uploaded when ROOT/ID/
 * uploaded exists (dg_rec_upload writes it after the copy fetched back
 * verified). A sealed recording is queued when its session ends, and at
 * start every recording without the marker (orphans sealed at start
 * included) is queued, so a restart loses nothing. A failed upload is
 * tried again after DG_GW_UPLOAD_RETRY_MS, doubled each time up to
 * DG_GW_UPLOAD_RETRY_MAX_MS, for as long as the gateway runs; the local
 * copy stays until the upload is confirmed, then is removed unless
 * keep_local.
 *
 * Fetches. GET /v1/recordings/{id}[/...] for a recording neither in the
 * recordings directory nor in STATE_DIR/bucket-cache waits (the
 * connection, not the loop) for a child that fetches recordings/ID/ into
 * the cache and verifies it with the gateway's key as sealed; one that
 * does not verify is removed and the requests get 502 naming it; one the
 * bucket lacks, 404. The outcome of a failed fetch is remembered for
 * DG_GW_FETCH_FAIL_MS. The cache is kept under object_store.cache_mb by
 * retention (oldest fetched first) after each fetch.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/server-priv.h"

enum job { JOB_UPLOAD, JOB_FETCH, JOB_RETENTION };

#define CHILD_OK 0
#define CHILD_FAILED 1
#define CHILD_NOT_FOUND 2  /* fetch: the bucket has no such recording */
#define CHILD_BAD 3        /* fetch: it does not verify */

struct upload {
	char id[DG_REC_ID_MAX + 1];
	unsigned tries;
	long long next_ms;
};

struct fetch_fail {
	char id[DG_REC_ID_MAX + 1];
	int status;              /* 404 or 502 */
	long long until_ms;
	char msg[DG_ERR_MAX];
};

struct child {
	pid_t pid;
	int fd;                  /* the report pipe's read end */
	char id[DG_REC_ID_MAX + 1];
};

struct gw_bucket {
	struct gw *gw;
	struct dg_rec_s3 s3;
	json_t *doc;             /* owns s3's strings */
	char cache[DG_CONFIG_PATH_MAX + sizeof(DG_GW_BUCKET_CACHE_DIR) + 1];
	struct upload *up;       /* pending uploads, at most DG_GW_UPLOADS_MAX */
	int n_up;
	struct child upc, fetchc, retc;
	bool retention_due;      /* a retention pass in the bucket is asked for */
	char fetchq[DG_GW_FETCHES_MAX][DG_REC_ID_MAX + 1]; /* waiting for a fetch child */
	int n_fetchq;
	struct conn *waiters[DG_GW_FETCH_WAITERS_MAX];
	char waiter_id[DG_GW_FETCH_WAITERS_MAX][DG_REC_ID_MAX + 1];
	struct fetch_fail fails[DG_GW_FETCH_FAILS];
	unsigned fail_next;
	lws_sorted_usec_list_t sul;
};

/* ---- the children --------------------------------------------------------------- */

/* In the child: what it reports, then its exit. */
static void child_exit(int code, const struct dg_err *err)
{
	if (code != CHILD_OK && err->msg[0]) {
		ssize_t w = write(3, err->msg, strnlen(err->msg, sizeof(err->msg)));
		(void)w;
	}
	_exit(code);
}

static int child_upload(struct gw *gw, const char *id, struct dg_err *err)
{
	int rc = dg_rec_upload(&gw->bucket->s3, gw->cfg.recordings, id, gw->rec_key, err);
	if (!rc && !gw->cfg.object_store.keep_local)
		rc = dg_rec_remove(gw->cfg.recordings, id, err);
	return rc ? CHILD_FAILED : CHILD_OK;
}

static bool only_this(const char *id, void *arg)
{
	return strcmp(id, arg) == 0;
}

static int child_fetch(struct gw *gw, const char *id, struct dg_err *err)
{
	struct gw_bucket *b = gw->bucket;
	char dir[sizeof(b->cache) + DG_REC_ID_MAX + 2];
	snprintf(dir, sizeof(dir), "%s/%s", b->cache, id);
	int rc = dg_rec_fetch(&b->s3, id, b->cache, err);
	if (rc == -ENOENT)
		return CHILD_NOT_FOUND;
	if (rc)
		return CHILD_FAILED;
	struct dg_rec_verify_result res;
	rc = dg_rec_verify(dir, gw->rec_key, &res, err);
	if (rc || (res.status != DG_REC_SEALED && res.status != DG_REC_SEALED_CRASH)) {
		if (!rc)
			dg_err_set(err, -EBADMSG, "recording %s in bucket %s does not verify: %s: %s", id,
				   b->s3.bucket, dg_rec_status_name(res.status), res.msg);
		struct dg_err e2 = {{0}};
		dg_rec_remove(b->cache, id, &e2);
		return CHILD_BAD;
	}
	/* The cache's bound: the oldest fetched go first, never this one. */
	struct dg_rec_retention_opts o = {
		.max_total_bytes = (uint64_t)gw->cfg.object_store.cache_mb * 1024 * 1024,
		.pass = {only_this, NULL, (void *)id},
	};
	struct dg_rec_retention_result rr;
	struct dg_err e3 = {{0}};
	dg_rec_retention(b->cache, &o, &rr, &e3);
	return CHILD_OK;
}

static void report(const char *id, int rc, const char *msg, void *arg)
{
	(void)rc;
	(void)arg;
	fprintf(stderr, "deskgate: recording %s: %s\n", id, msg);
}

/* retention_days applies to the bucket as to the disk (retention_mb does
 * not: a bucket is priced by the byte, its owner sets its bound). */
static int child_retention(struct gw *gw, struct dg_err *err)
{
	unsigned n = 0, del = 0, failed = 0;
	struct dg_rec_pass pass = {NULL, report, NULL};
	int rc = dg_rec_s3_retention(&gw->bucket->s3, (int64_t)gw->cfg.limits.retention_days * 86400, 0,
				     &pass, &n, &del, &failed, err);
	fprintf(stderr, "deskgate: retention in bucket %s: %u of %u recordings deleted, %u failed\n",
		gw->bucket->s3.bucket, del, n, failed);
	return rc || failed ? CHILD_FAILED : CHILD_OK;
}

int dg_gw_fork_reporting(int *fd)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		close(p[0]);
		*fd = p[1];
		return 0;
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

static int child_start(struct gw *gw, struct child *c, const char *id, enum job job)
{
	int fd = -1;
	int pid = dg_gw_fork_reporting(&fd);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		/* Nothing of the gateway's stays open here (sockets, channels):
		 * only stderr and the report pipe, as fd 3. */
		if (dup2(fd, 3) != 3)
			_exit(CHILD_FAILED);
		close_range(4, ~0U, 0);
		struct dg_err err = {{0}};
		child_exit(job == JOB_UPLOAD ? child_upload(gw, id, &err) :
			   job == JOB_FETCH ? child_fetch(gw, id, &err) : child_retention(gw, &err), &err);
	}
	c->pid = pid;
	c->fd = fd;
	snprintf(c->id, sizeof(c->id), "%s", id);
	return 0;
}

/* Whether c's child ended: *code its exit (CHILD_FAILED when killed), msg
 * what it reported. */
static bool child_done(struct child *c, int *code, char *msg, size_t cap)
{
	int st;
	pid_t w = waitpid(c->pid, &st, WNOHANG);
	if (w == 0 || (w < 0 && errno == EINTR))
		return false;
	*code = w == c->pid && WIFEXITED(st) ? WEXITSTATUS(st) : CHILD_FAILED;
	ssize_t n = read(c->fd, msg, cap - 1);
	msg[n > 0 ? n : 0] = '\0';
	if (*code != CHILD_OK && !msg[0])
		snprintf(msg, cap, "the %s process ended abnormally",
			 w == c->pid && WIFSIGNALED(st) ? "killed" : "transfer");
	close(c->fd);
	c->pid = 0;
	c->fd = -1;
	return true;
}

/* ---- uploads -------------------------------------------------------------------- */

void dg_gw_bucket_sealed(struct gw *gw, const char *id)
{
	struct gw_bucket *b = gw->bucket;
	if (!b)
		return;
	for (int i = 0; i < b->n_up; i++)
		if (strcmp(b->up[i].id, id) == 0)
			return;
	if (b->n_up == DG_GW_UPLOADS_MAX) {
		fprintf(stderr, "deskgate: recording %s: %d uploads are pending already; it is uploaded "
				"at the next start\n", id, DG_GW_UPLOADS_MAX);
		return;
	}
	struct upload *u = &b->up[b->n_up++];
	snprintf(u->id, sizeof(u->id), "%s", id);
	u->tries = 0;
	u->next_ms = 0;
}

static void upload_done(struct gw *gw, int code, const char *msg)
{
	struct gw_bucket *b = gw->bucket;
	int i = 0;
	while (i < b->n_up && strcmp(b->up[i].id, b->upc.id) != 0)
		i++;
	if (code == CHILD_OK) {
		gw->m.uploads_ok++;
		fprintf(stderr, "deskgate: recording %s: uploaded to s3://%s/%s%s/ and confirmed%s\n",
			b->upc.id, b->s3.bucket, DG_REC_S3_PREFIX, b->upc.id,
			gw->cfg.object_store.keep_local ? "" : "; the local copy is removed");
		if (i < b->n_up)
			b->up[i] = b->up[--b->n_up];
		return;
	}
	gw->m.uploads_failed++;
	if (i == b->n_up)
		return;
	struct upload *u = &b->up[i];
	if (!dg_gw_rec_root(gw, u->id) || strcmp(dg_gw_rec_root(gw, u->id), gw->cfg.recordings) != 0) {
		/* Gone meanwhile (retention, an operator): nothing left to send. */
		fprintf(stderr, "deskgate: recording %s: upload failed and the recording is gone from %s: "
				"not tried again: %s\n", u->id, gw->cfg.recordings, msg);
		b->up[i] = b->up[--b->n_up];
		return;
	}
	long long delay = DG_GW_UPLOAD_RETRY_MS;
	for (unsigned k = 0; k < u->tries && delay < DG_GW_UPLOAD_RETRY_MAX_MS; k++)
		delay *= 2;
	if (delay > DG_GW_UPLOAD_RETRY_MAX_MS)
		delay = DG_GW_UPLOAD_RETRY_MAX_MS;
	u->tries++;
	u->next_ms = dg_now_ms() + delay;
	fprintf(stderr, "deskgate: recording %s: upload %u failed (the local copy is kept; next try "
			"in %lld ms): %s\n", u->id, u->tries, delay, msg);
}

static void upload_next(struct gw *gw)
{
	struct gw_bucket *b = gw->bucket;
	long long now = dg_now_ms();
	for (int i = 0; i < b->n_up && !b->upc.pid; i++) {
		struct upload *u = &b->up[i];
		if (u->next_ms > now || dg_gw_session_find(gw, u->id))
			continue;
		int rc = child_start(gw, &b->upc, u->id, JOB_UPLOAD);
		if (rc) {
			u->next_ms = now + DG_GW_UPLOAD_RETRY_MS;
			fprintf(stderr, "deskgate: recording %s: cannot start its upload: %s\n", u->id,
				strerror(-rc));
		}
	}
}

/* Every recording under root without its "uploaded" marker. */
static void queue_unconfirmed(struct gw *gw)
{
	DIR *d = opendir(gw->cfg.recordings);
	if (!d)
		return;
	struct dirent *e;
	unsigned seen = 0;
	while ((e = readdir(d)) && ++seen <= DG_REC_DIR_ENTRIES_MAX) {
		if (!dg_rec_id_valid(e->d_name) || dg_gw_session_find(gw, e->d_name))
			continue;
		char p[DG_CONFIG_PATH_MAX + 256 + sizeof(DG_REC_UPLOADED_FILE) + 2];
		struct stat st;
		snprintf(p, sizeof(p), "%s/%s/%s", gw->cfg.recordings, e->d_name, DG_REC_UPLOADED_FILE);
		if (lstat(p, &st) == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", gw->cfg.recordings, e->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			dg_gw_bucket_sealed(gw, e->d_name);
	}
	closedir(d);
}

/* ---- fetches -------------------------------------------------------------------- */

static struct fetch_fail *fail_find(struct gw_bucket *b, const char *id)
{
	long long now = dg_now_ms();
	for (int i = 0; i < DG_GW_FETCH_FAILS; i++)
		if (b->fails[i].id[0] && strcmp(b->fails[i].id, id) == 0 && b->fails[i].until_ms > now)
			return &b->fails[i];
	return NULL;
}

static void wake(struct gw_bucket *b, const char *id)
{
	for (int i = 0; i < DG_GW_FETCH_WAITERS_MAX; i++) {
		struct conn *c = b->waiters[i];
		if (c && strcmp(b->waiter_id[i], id) == 0) {
			b->waiters[i] = NULL;
			c->fetch_wait = false;
			c->fetch_done = true;
			if (c->wsi)
				lws_callback_on_writable(c->wsi);
		}
	}
}

static void fetch_done(struct gw *gw, int code, const char *msg)
{
	struct gw_bucket *b = gw->bucket;
	const char *id = b->fetchc.id;
	if (code == CHILD_OK) {
		gw->m.fetches_ok++;
	} else {
		gw->m.fetches_failed++;
		struct fetch_fail *f = fail_find(b, id);
		if (!f)
			f = &b->fails[b->fail_next++ % DG_GW_FETCH_FAILS];
		snprintf(f->id, sizeof(f->id), "%s", id);
		f->status = code == CHILD_NOT_FOUND ? 404 : 502;
		f->until_ms = dg_now_ms() + DG_GW_FETCH_FAIL_MS;
		if (code == CHILD_NOT_FOUND)
			snprintf(f->msg, sizeof(f->msg), "no recording %s here nor in bucket %s", id,
				 b->s3.bucket);
		else
			snprintf(f->msg, sizeof(f->msg), "recording %s: fetching it from bucket %s failed: %s",
				 id, b->s3.bucket, msg);
		fprintf(stderr, "deskgate: %s\n", f->msg);
	}
	wake(b, id);
}

static void fetch_next(struct gw *gw)
{
	struct gw_bucket *b = gw->bucket;
	while (!b->fetchc.pid && b->n_fetchq) {
		char id[DG_REC_ID_MAX + 1];
		snprintf(id, sizeof(id), "%s", b->fetchq[0]);
		memmove(b->fetchq[0], b->fetchq[1], (size_t)(--b->n_fetchq) * sizeof(b->fetchq[0]));
		int rc = child_start(gw, &b->fetchc, id, JOB_FETCH);
		if (rc) {
			snprintf(b->fetchc.id, sizeof(b->fetchc.id), "%s", id);
			char msg[128];
			snprintf(msg, sizeof(msg), "cannot start the fetch: %s", strerror(-rc));
			fetch_done(gw, CHILD_FAILED, msg);
		}
	}
}

int dg_gw_bucket_wait(struct gw *gw, struct conn *c, const char *id, int *status, char *msg,
		      size_t cap)
{
	struct gw_bucket *b = gw->bucket;
	*status = 404;
	snprintf(msg, cap, "no such recording: %s", id);
	if (!b)
		return -ENOENT;
	struct fetch_fail *f = fail_find(b, id);
	if (f || c->fetch_done) {
		if (f) {
			*status = f->status;
			snprintf(msg, cap, "%s", f->msg);
		}
		return -ENOENT;
	}
	int slot = -1;
	for (int i = 0; i < DG_GW_FETCH_WAITERS_MAX && slot < 0; i++)
		if (!b->waiters[i])
			slot = i;
	bool queued = b->fetchc.pid && strcmp(b->fetchc.id, id) == 0;
	for (int i = 0; i < b->n_fetchq && !queued; i++)
		queued = strcmp(b->fetchq[i], id) == 0;
	if (slot < 0 || (!queued && b->n_fetchq == DG_GW_FETCHES_MAX)) {
		*status = 503;
		snprintf(msg, cap, "recording %s is not on this host and too many fetches from the "
				   "bucket are waiting; try again", id);
		return -EAGAIN;
	}
	if (!queued)
		snprintf(b->fetchq[b->n_fetchq++], sizeof(b->fetchq[0]), "%s", id);
	b->waiters[slot] = c;
	snprintf(b->waiter_id[slot], sizeof(b->waiter_id[slot]), "%s", id);
	c->fetch_wait = true;
	/* A fetch may take longer than an idle request may; bounded still. */
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_HTTP_CONTENT, DG_GW_FETCH_WAIT_S);
	fetch_next(gw);
	return 0;
}

void dg_gw_bucket_conn_closed(struct gw *gw, struct conn *c)
{
	struct gw_bucket *b = gw->bucket;
	if (!b || !c->fetch_wait)
		return;
	for (int i = 0; i < DG_GW_FETCH_WAITERS_MAX; i++)
		if (b->waiters[i] == c)
			b->waiters[i] = NULL;
	c->fetch_wait = false;
}

const char *dg_gw_bucket_cache(struct gw *gw)
{
	return gw->bucket ? gw->bucket->cache : NULL;
}

/* ---- the loop's side ------------------------------------------------------------ */

static void on_tick(lws_sorted_usec_list_t *sul)
{
	struct gw_bucket *b = (struct gw_bucket *)((char *)sul - offsetof(struct gw_bucket, sul));
	struct gw *gw = b->gw;
	char msg[DG_ERR_MAX];
	int code;
	if (b->upc.pid && child_done(&b->upc, &code, msg, sizeof(msg)))
		upload_done(gw, code, msg);
	if (b->fetchc.pid && child_done(&b->fetchc, &code, msg, sizeof(msg)))
		fetch_done(gw, code, msg);
	if (b->retc.pid && child_done(&b->retc, &code, msg, sizeof(msg)) && code != CHILD_OK)
		fprintf(stderr, "deskgate: retention in bucket %s: %s\n", b->s3.bucket, msg);
	if (!gw->stopping) {
		upload_next(gw);
		fetch_next(gw);
		if (b->retention_due && !b->retc.pid) {
			b->retention_due = false;
			int rc = child_start(gw, &b->retc, "", JOB_RETENTION);
			if (rc)
				fprintf(stderr, "deskgate: retention in bucket %s: cannot start it: %s\n",
					b->s3.bucket, strerror(-rc));
		}
	}
	lws_sul_schedule(gw->ctx, 0, &b->sul, on_tick, (lws_usec_t)DG_GW_BUCKET_TICK_MS * 1000);
}

int dg_gw_bucket_start(struct gw *gw, struct dg_err *err)
{
	if (!gw->cfg.object_store.store[0])
		return 0;
	struct gw_bucket *b = calloc(1, sizeof(*b));
	if (b)
		b->up = calloc(DG_GW_UPLOADS_MAX, sizeof(*b->up));
	if (!b || !b->up) {
		free(b);
		return dg_err_set(err, -ENOMEM, "object store: out of memory");
	}
	b->gw = gw;
	b->upc.fd = b->fetchc.fd = b->retc.fd = -1;
	b->retention_due = gw->cfg.limits.retention_days != 0; /* a first pass at start */
	int rc = dg_rec_s3_load(gw->cfg.object_store.store, &b->s3, &b->doc, err);
	if (rc) {
		json_decref(b->doc);
		free(b->up);
		free(b);
		return rc;
	}
	snprintf(b->cache, sizeof(b->cache), "%s/%s", gw->cfg.state_dir, DG_GW_BUCKET_CACHE_DIR);
	if (mkdir(b->cache, 0750) != 0 && errno != EEXIST)
		rc = dg_err_set(err, -errno, "object store: mkdir %s: %s", b->cache, strerror(errno));
	else if (chown(b->cache, dg_instance_gateway_uid(), dg_instance_gateway_uid()) != 0)
		rc = dg_err_set(err, -errno, "object store: chown %s: %s", b->cache, strerror(errno));
	if (rc) {
		json_decref(b->doc);
		free(b->up);
		free(b);
		return rc;
	}
	gw->bucket = b;
	queue_unconfirmed(gw);
	if (b->n_up)
		fprintf(stderr, "deskgate: %d recordings are not confirmed in bucket %s yet: uploading "
				"them\n", b->n_up, b->s3.bucket);
	return 0;
}

void dg_gw_bucket_timers(struct gw *gw)
{
	if (gw->bucket)
		lws_sul_schedule(gw->ctx, 0, &gw->bucket->sul, on_tick,
				 (lws_usec_t)DG_GW_BUCKET_TICK_MS * 1000);
}

void dg_gw_bucket_retention(struct gw *gw)
{
	if (gw->bucket && gw->cfg.limits.retention_days)
		gw->bucket->retention_due = true;
}

int dg_gw_bucket_pending(struct gw *gw)
{
	return gw->bucket ? gw->bucket->n_up : 0;
}

void dg_gw_bucket_stop(struct gw *gw)
{
	struct gw_bucket *b = gw->bucket;
	if (!b)
		return;
	lws_sul_cancel(&b->sul);
	/* A transfer cut here is redone at the next start: nothing counts as
	 * uploaded before its marker, and a fetch appears whole or not at all. */
	struct child *cs[3] = {&b->upc, &b->fetchc, &b->retc};
	for (int i = 0; i < 3; i++) {
		if (!cs[i]->pid)
			continue;
		kill(cs[i]->pid, SIGKILL);
		waitpid(cs[i]->pid, NULL, 0);
		close(cs[i]->fd);
	}
	json_decref(b->doc);
	free(b->up);
	free(b);
	gw->bucket = NULL;
}
