/* GET /v1/recordings/{id}/video.webm and /video.mp4 (docs/api.md): a sealed
 * recording rendered as a video by `deskgate export`.
 *
 * Encoding takes seconds of CPU a minute of video and links libav, which
 * the gateway must not: the export runs in a child, fork + execv of
 * /proc/self/exe with a fixed argv (no shell)
 *   deskgate export --format FMT -o STATE/exports/ID.FMT --key STATE/exports/recording-pub.pem ROOT/ID
 * at a lower priority, one at a time per gateway. The key is the public
 * half of the gateway's recording key, written at start (the dropped
 * gateway cannot read the root-owned private key file again). The child's
 * stdout and stderr go to a pipe whose first DG_GW_EXPORT_REPORT_MAX bytes
 * are kept for the error message. The loop polls it every
 * DG_GW_EXPORT_TICK_MS with waitpid(WNOHANG), kills it after
 * DG_GW_EXPORT_WAIT_S (504) and when the gateway stops.
 *
 * The video is a cache: STATE/exports/ID.FMT is served as it is while it is
 * newer than the recording's events.jsonl; at most DG_GW_EXPORTS_KEPT are
 * kept (the oldest go first). A request for a video that is not there waits
 * (the connection, not the loop): at most DG_GW_EXPORT_WAITERS_MAX requests
 * and DG_GW_EXPORT_QUEUE_MAX distinct videos wait, more get 503. A failed
 * export is remembered for DG_GW_EXPORT_FAIL_MS (500 naming it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gateway/server-priv.h"

struct vjob {
	char id[DG_REC_ID_MAX + 1];
	char fmt[8];                /* "webm" or "mp4" */
	char root[DG_CONFIG_PATH_MAX];
};

struct vfail {
	struct vjob job;
	int status;                 /* 500 or 504 */
	long long until_ms;
	char msg[DG_ERR_MAX];
};

struct gw_video {
	struct gw *gw;
	char dir[DG_CONFIG_PATH_MAX + sizeof(DG_GW_EXPORT_DIR) + 1];
	char key[DG_CONFIG_PATH_MAX + sizeof(DG_GW_EXPORT_DIR) + sizeof(DG_GW_EXPORT_PUBKEY) + 2];
	struct vjob run;            /* the running export, when pid */
	pid_t pid;
	int fd;
	long long started_ms;
	char out[DG_GW_EXPORT_REPORT_MAX];
	size_t out_len;
	struct vjob queue[DG_GW_EXPORT_QUEUE_MAX];
	int n_queue;
	struct conn *waiters[DG_GW_EXPORT_WAITERS_MAX];
	struct vjob waiter_job[DG_GW_EXPORT_WAITERS_MAX];
	struct vfail fails[DG_GW_EXPORT_FAILS];
	unsigned fail_next;
	bool ticking;
	lws_sorted_usec_list_t sul;
};

static bool same(const struct vjob *a, const char *id, const char *fmt)
{
	return strcmp(a->id, id) == 0 && strcmp(a->fmt, fmt) == 0;
}

int dg_gw_video_start(struct gw *gw, struct dg_err *err)
{
	struct gw_video *v = calloc(1, sizeof(*v));
	if (!v)
		return dg_err_set(err, -ENOMEM, "video exports: out of memory");
	v->gw = gw;
	v->fd = -1;
	snprintf(v->dir, sizeof(v->dir), "%s/%s", gw->cfg.state_dir, DG_GW_EXPORT_DIR);
	snprintf(v->key, sizeof(v->key), "%s/%s", v->dir, DG_GW_EXPORT_PUBKEY);
	char *pem = NULL;
	int rc = 0;
	if (mkdir(v->dir, 0750) != 0 && errno != EEXIST)
		rc = dg_err_set(err, -errno, "video exports: mkdir %s: %s", v->dir, strerror(errno));
	else if (chown(v->dir, dg_instance_gateway_uid(), dg_instance_gateway_uid()) != 0)
		rc = dg_err_set(err, -errno, "video exports: chown %s: %s", v->dir, strerror(errno));
	else
		rc = dg_rec_key_public_pem(gw->rec_key, &pem, err);
	if (!rc) {
		/* Root's, 0644: the export child (the gateway's uid) reads it. */
		char tmp[sizeof(v->key) + 4];
		snprintf(tmp, sizeof(tmp), "%s.new", v->key);
		FILE *f = fopen(tmp, "we");
		if (!f || fputs(pem, f) < 0 || fchmod(fileno(f), 0644) != 0 || fclose(f) != 0 ||
		    rename(tmp, v->key) != 0) {
			rc = dg_err_set(err, -errno, "video exports: writing %s: %s", v->key, strerror(errno));
			if (f)
				fclose(f);
		}
	}
	free(pem);
	if (rc) {
		free(v);
		return rc;
	}
	gw->video = v;
	return 0;
}

/* ---- the child ------------------------------------------------------------------ */

static int spawn(struct gw_video *v, const struct vjob *j)
{
	char out[sizeof(v->dir) + DG_REC_ID_MAX + 16], rec[DG_CONFIG_PATH_MAX + DG_REC_ID_MAX + 2];
	snprintf(out, sizeof(out), "%s/%s.%s", v->dir, j->id, j->fmt);
	snprintf(rec, sizeof(rec), "%s/%s", j->root, j->id);
	int fd;
	int pid = dg_gw_fork_reporting(&fd);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		/* Nothing of the gateway's stays open: stdin is /dev/null, stdout
		 * and stderr the report pipe. */
		signal(SIGPIPE, SIG_DFL);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) != 0 || dup2(fd, 1) != 1 || dup2(fd, 2) != 2)
			_exit(127);
		close_range(3, ~0U, 0);
		if (setpriority(PRIO_PROCESS, 0, DG_GW_EXPORT_NICE) != 0)
			fprintf(stderr, "setpriority %d: %s\n", DG_GW_EXPORT_NICE, strerror(errno));
		char *argv[] = {"deskgate", "export", "--format", (char *)j->fmt, "-o", out,
				"--key", v->key, rec, NULL};
		execv("/proc/self/exe", argv);
		fprintf(stderr, "execv /proc/self/exe: %s\n", strerror(errno));
		_exit(127);
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	v->pid = pid;
	v->fd = fd;
	v->run = *j;
	v->started_ms = dg_now_ms();
	v->out_len = 0;
	v->out[0] = '\0';
	return 0;
}

/* Keeps the first DG_GW_EXPORT_REPORT_MAX - 1 bytes, drops the rest. */
static void drain(struct gw_video *v)
{
	char buf[4096];
	ssize_t n;
	while ((n = read(v->fd, buf, sizeof(buf))) > 0) {
		size_t room = sizeof(v->out) - 1 - v->out_len;
		size_t k = (size_t)n < room ? (size_t)n : room;
		memcpy(v->out + v->out_len, buf, k);
		v->out_len += k;
		v->out[v->out_len] = '\0';
	}
}

static void wake(struct gw_video *v, const struct vjob *j)
{
	for (int i = 0; i < DG_GW_EXPORT_WAITERS_MAX; i++) {
		struct conn *c = v->waiters[i];
		if (c && same(&v->waiter_job[i], j->id, j->fmt)) {
			v->waiters[i] = NULL;
			c->export_wait = false;
			c->export_done = true;
			if (c->wsi)
				lws_callback_on_writable(c->wsi);
		}
	}
}

static void fail(struct gw_video *v, const struct vjob *j, int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(struct gw_video *v, const struct vjob *j, int status, const char *fmt, ...)
{
	struct vfail *f = &v->fails[v->fail_next++ % DG_GW_EXPORT_FAILS];
	f->job = *j;
	f->status = status;
	f->until_ms = dg_now_ms() + DG_GW_EXPORT_FAIL_MS;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "deskgate: %s\n", f->msg);
	wake(v, j);
}

static struct vfail *fail_find(struct gw_video *v, const char *id, const char *fmt)
{
	long long now = dg_now_ms();
	for (int i = 0; i < DG_GW_EXPORT_FAILS; i++)
		if (v->fails[i].until_ms > now && same(&v->fails[i].job, id, fmt))
			return &v->fails[i];
	return NULL;
}

/* The export's last line of output without its trailing newline, or what
 * ended it. */
static const char *last_line(struct gw_video *v)
{
	while (v->out_len && v->out[v->out_len - 1] == '\n')
		v->out[--v->out_len] = '\0';
	char *nl = strrchr(v->out, '\n');
	return nl ? nl + 1 : v->out;
}

/* The oldest videos beyond DG_GW_EXPORTS_KEPT are removed. */
static void trim(struct gw_video *v)
{
	for (int round = 0; round < 4; round++) {
		DIR *d = opendir(v->dir);
		if (!d)
			return;
		struct dirent *e;
		unsigned n = 0, seen = 0;
		char oldest[256] = "";
		struct timespec t = {0};
		while ((e = readdir(d)) && ++seen <= DG_REC_DIR_ENTRIES_MAX) {
			const char *dot = strrchr(e->d_name, '.');
			if (!dot || (strcmp(dot, ".webm") != 0 && strcmp(dot, ".mp4") != 0))
				continue;
			struct stat st;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			n++;
			if (!oldest[0] || st.st_mtim.tv_sec < t.tv_sec ||
			    (st.st_mtim.tv_sec == t.tv_sec && st.st_mtim.tv_nsec < t.tv_nsec)) {
				t = st.st_mtim;
				snprintf(oldest, sizeof(oldest), "%s", e->d_name);
			}
		}
		if (n > DG_GW_EXPORTS_KEPT && oldest[0])
			unlinkat(dirfd(d), oldest, 0);
		closedir(d);
		if (n <= DG_GW_EXPORTS_KEPT + 1)
			return;
	}
}

static void next(struct gw_video *v);

static void on_tick(lws_sorted_usec_list_t *sul)
{
	struct gw_video *v = (struct gw_video *)((char *)sul - offsetof(struct gw_video, sul));
	v->ticking = false;
	if (v->pid) {
		drain(v);
		int st;
		pid_t w = waitpid(v->pid, &st, WNOHANG);
		bool late = dg_now_ms() - v->started_ms > (long long)DG_GW_EXPORT_WAIT_S * 1000;
		if (w == 0 && late) {
			kill(v->pid, SIGKILL);
			waitpid(v->pid, NULL, 0);
		}
		if (w != 0 && !(w < 0 && errno == EINTR)) {
			drain(v);
			bool ok = w == v->pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (ok) {
				trim(v);
				wake(v, &v->run);
			} else {
				if (w == v->pid && WIFSIGNALED(st))
					fail(v, &v->run, 500, "recording %s: the %s export was killed (signal %d)",
					     v->run.id, v->run.fmt, WTERMSIG(st));
				else
					fail(v, &v->run, 500, "recording %s: the %s export failed: %s",
					     v->run.id, v->run.fmt, last_line(v));
			}
		} else if (w == 0 && late) {
			fail(v, &v->run, 504, "recording %s: the %s export took longer than %d s and was "
					      "stopped", v->run.id, v->run.fmt, DG_GW_EXPORT_WAIT_S);
		}
		if (w != 0 || late) {
			close(v->fd);
			v->fd = -1;
			v->pid = 0;
		}
	}
	next(v);
}

static void next(struct gw_video *v)
{
	while (!v->pid && v->n_queue && !v->gw->stopping) {
		struct vjob j = v->queue[0];
		memmove(&v->queue[0], &v->queue[1], (size_t)(--v->n_queue) * sizeof(v->queue[0]));
		int rc = spawn(v, &j);
		if (rc)
			fail(v, &j, 500, "recording %s: cannot start the %s export: %s", j.id, j.fmt,
			     strerror(-rc));
	}
	if (v->pid && !v->ticking) {
		v->ticking = true;
		lws_sul_schedule(v->gw->ctx, 0, &v->sul, on_tick, (lws_usec_t)DG_GW_EXPORT_TICK_MS * 1000);
	}
}

/* ---- the requests --------------------------------------------------------------- */

/* Whether file exists and is at least as new as ROOT/ID/events.jsonl. */
static bool fresh(const char *file, const char *root, const char *id)
{
	char ev[DG_CONFIG_PATH_MAX + DG_REC_ID_MAX + 16];
	snprintf(ev, sizeof(ev), "%s/%s/events.jsonl", root, id);
	struct stat a, b;
	if (lstat(file, &a) != 0 || !S_ISREG(a.st_mode) || a.st_size == 0 || lstat(ev, &b) != 0)
		return false;
	return a.st_mtim.tv_sec > b.st_mtim.tv_sec ||
	       (a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec >= b.st_mtim.tv_nsec);
}

int dg_gw_video_get(struct gw *gw, struct conn *c, const char *root, const char *id,
		    const char *fmt, char *file, size_t file_cap, int *status, char *msg, size_t cap)
{
	struct gw_video *v = gw->video;
	*status = 500;
	snprintf(msg, cap, "recording %s: video exports are not set up", id);
	if (!v)
		return -ENOSYS;
	snprintf(file, file_cap, "%s/%s.%s", v->dir, id, fmt);
	bool done = c->export_done;
	c->export_done = false;
	struct vfail *f = fail_find(v, id, fmt);
	if (f && done) {
		*status = f->status;
		snprintf(msg, cap, "%s", f->msg);
		return -EIO;
	}
	if (fresh(file, root, id))
		return 1;
	if (done) {
		snprintf(msg, cap, "recording %s: the %s export ended without a video", id, fmt);
		return -EIO;
	}
	int slot = -1;
	for (int i = 0; i < DG_GW_EXPORT_WAITERS_MAX && slot < 0; i++)
		if (!v->waiters[i])
			slot = i;
	bool queued = v->pid && same(&v->run, id, fmt);
	for (int i = 0; i < v->n_queue && !queued; i++)
		queued = same(&v->queue[i], id, fmt);
	if (slot < 0 || (!queued && v->n_queue == DG_GW_EXPORT_QUEUE_MAX)) {
		*status = 503;
		snprintf(msg, cap, "recording %s: too many video exports are waiting (%d requests, "
				   "%d videos); try again", id, DG_GW_EXPORT_WAITERS_MAX,
			 DG_GW_EXPORT_QUEUE_MAX);
		return -EAGAIN;
	}
	if (!queued) {
		struct vjob *j = &v->queue[v->n_queue++];
		snprintf(j->id, sizeof(j->id), "%s", id);
		snprintf(j->fmt, sizeof(j->fmt), "%s", fmt);
		snprintf(j->root, sizeof(j->root), "%s", root);
	}
	v->waiters[slot] = c;
	v->waiter_job[slot] = (struct vjob){0};
	snprintf(v->waiter_job[slot].id, sizeof(v->waiter_job[slot].id), "%s", id);
	snprintf(v->waiter_job[slot].fmt, sizeof(v->waiter_job[slot].fmt), "%s", fmt);
	c->export_wait = true;
	/* Beyond the export's own bound, so the child's 504 comes first. */
	lws_set_timeout(c->wsi, PENDING_TIMEOUT_HTTP_CONTENT, DG_GW_EXPORT_WAIT_S + 30);
	next(v);
	return 0;
}

void dg_gw_video_conn_closed(struct gw *gw, struct conn *c)
{
	struct gw_video *v = gw->video;
	if (!v || !c->export_wait)
		return;
	for (int i = 0; i < DG_GW_EXPORT_WAITERS_MAX; i++)
		if (v->waiters[i] == c)
			v->waiters[i] = NULL;
	c->export_wait = false;
}

void dg_gw_video_stop(struct gw *gw)
{
	struct gw_video *v = gw->video;
	if (!v)
		return;
	lws_sul_cancel(&v->sul);
	/* A video cut here is not there: export writes a temporary file and
	 * renames it when whole. The temporary is removed with it. */
	if (v->pid) {
		kill(v->pid, SIGKILL);
		waitpid(v->pid, NULL, 0);
		close(v->fd);
		DIR *d = opendir(v->dir);
		struct dirent *e;
		char prefix[DG_REC_ID_MAX + 16];
		snprintf(prefix, sizeof(prefix), "%s.%s.tmp-", v->run.id, v->run.fmt);
		while (d && (e = readdir(d)))
			if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
				unlinkat(dirfd(d), e->d_name, 0);
		if (d)
			closedir(d);
	}
	free(v);
	gw->video = NULL;
}
