/* Fault tests: a session whose desktop, browser or worker dies, or whose
 * desktop speaks hostile RFB, ends with a clear error at the owner (this test
 * process), never takes the owner down, and leaves no process (jail or worker
 * uid), mount or cgroup behind.
 *
 * Two kinds of desktop:
 *  - real ones (Xvnc + xterm or Chromium in a jail), whose programs the test
 *    kills mid-session;
 *  - fake ones: a struct dg_desktop whose RFB descriptor is one end of a
 *    socketpair the test holds, so the test plays the RFB server (RFB 3.8,
 *    security None, raw encoding) and can send what a hostile Xvnc would.
 *    No jail is needed: the worker's uid derives from the slot number only.
 *
 * Each hostile fake session runs beside a well-behaved one; after the hostile
 * worker ended, the well-behaved one must still answer, which shows the owner
 * (which holds both) kept working.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "desktop/proto/proto.h"
#include "desktop/worker/worker.h"
#include "dg_test.h"

/* Slots for fake sessions: far above the slots real jails claim (lowest
 * free first), so their worker uids collide with nothing. */
#define SLOT_BAD 65100u
#define SLOT_GOOD 65101u
#define FAKE_W 640
#define FAKE_H 480
/* How long a worker may take to notice a dead or hostile peer and end
 * (everything but the read-timeout case is immediate in practice). */
#define END_BOUND_MS 3000
/* A worker that parsed hostile bytes must not have grown past this (its
 * 640x480 framebuffer and PNG are ~2.5 MB; the sanitizers add the rest). */
#define WORKER_RSS_MAX_KB (256L * 1024)

static long long ms_now(void)
{
	return (long long)(dg_test_now() * 1000);
}

/* ---- processes ---------------------------------------------------------- */

struct proc {
	pid_t pid, ppid;
	unsigned uid;
	char name[32];
};

static int read_proc(pid_t pid, struct proc *p)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	int have = 0;
	while (fgets(line, sizeof(line), f)) {
		int v;
		if (sscanf(line, "Name: %31s", p->name) == 1)
			have |= 1;
		else if (sscanf(line, "PPid: %d", &v) == 1)
			p->ppid = v, have |= 2;
		else if (sscanf(line, "Uid: %u", &p->uid) == 1)
			have |= 4;
	}
	fclose(f);
	return have == 7 ? 0 : -1;
}

/* Processes whose real uid is uid and whose name is name (NULL: any) and,
 * when ppid > 0, whose parent is ppid. Returns how many (at most max kept). */
static int find_procs(unsigned uid, const char *name, pid_t ppid, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	cr_assert(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		struct proc p;
		if (read_proc(atoi(e->d_name), &p) != 0 || p.uid != uid)
			continue;
		if ((name && strcmp(p.name, name) != 0) || (ppid > 0 && p.ppid != ppid))
			continue;
		if (n < max)
			out[n] = p.pid;
		n++;
	}
	closedir(d);
	return n;
}

/* Nothing of the session in slot is left: no process of its jail uid or
 * its worker uid, no cgroup of its jail (bounded wait: the kernel reaps
 * asynchronously). */
static void assert_slot_gone(uint32_t slot)
{
	pid_t pid;
	int jail = 0, worker = 0, cgroups = 0;
	char what[1024];
	for (int i = 0; i < 300; i++) {
		jail = find_procs(DG_JAIL_ID_BASE + slot, NULL, 0, &pid, 1);
		worker = find_procs(DG_WORKER_ID_BASE + slot, NULL, 0, &pid, 1);
		cgroups = dg_test_slot_cgroups(slot, what, sizeof(what));
		if (jail + worker + cgroups == 0)
			return;
		usleep(10000);
	}
	cr_assert_fail("slot %u: %d jail processes, %d worker processes, %d cgroups left", slot,
		       jail, worker, cgroups);
}

/* Nothing of any session is left: no jail-uid or worker-uid process, no
 * jail cgroup of this run's instance (bounded wait). */
static void assert_no_leftovers(void)
{
	char what[4096];
	int n = 0;
	for (int i = 0; i < 300 && (n = dg_test_leftovers(what, sizeof(what))) != 0; i++)
		usleep(10000);
	cr_assert_eq(n, 0, "left behind: %s", what);
}

/* ---- the owner's view of a worker --------------------------------------- */

/* Reads the worker's messages until its channel fails or bound_ms passes.
 * Returns the final dg_worker_recv code (-ETIMEDOUT when the bound passed)
 * and copies the last error EVENT (JSON) into ev ("" when none came). */
static int read_until_end(struct dg_worker *w, int bound_ms, char *ev, size_t ev_len,
			  struct dg_err *err)
{
	long long deadline = ms_now() + bound_ms;
	ev[0] = '\0';
	for (;;) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r = dg_worker_recv(w, &type, &data, &len, err);
		if (r < 0)
			return r;
		if (r == 1) {
			if (type == DG_MSG_EVENT && strstr((const char *)data, "\"error\""))
				snprintf(ev, ev_len, "%.*s", (int)len, (const char *)data);
			continue;
		}
		long long left = deadline - ms_now();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {w->ctl, POLLIN, 0};
		poll(&p, 1, (int)left);
	}
}

/* Waits up to bound_ms for the worker process to end and reaps it with
 * wait4, for its status and peak RSS. Marks it reaped (pid -1), so that
 * dg_worker_stop then only closes the channel and the pidfd. */
static int reap_worker(struct dg_worker *w, int bound_ms, int *status, long *maxrss_kb)
{
	struct pollfd p = {w->pidfd, POLLIN, 0};
	if (poll(&p, 1, bound_ms) != 1)
		return -ETIMEDOUT;
	struct rusage ru;
	if (wait4(w->pid, status, 0, &ru) != w->pid)
		return -errno;
	*maxrss_kb = ru.ru_maxrss;
	w->pid = -1;
	return 0;
}

/* The worker ended on its own: it exited through die() (status 1) within
 * bound_ms, without having grown. */
static void assert_worker_died_cleanly(struct dg_worker *w, int bound_ms, const char *what)
{
	int status = 0;
	long rss = 0;
	cr_assert_eq(reap_worker(w, bound_ms, &status, &rss), 0, "%s: the worker is still running",
		     what);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		  "%s: the worker did not exit through its error path (status 0x%x)", what, status);
	cr_assert_lt(rss, WORKER_RSS_MAX_KB, "%s: the worker grew to %ld KiB", what, rss);
}

/* Sends one action; returns dg_worker_act's code, the parsed result (NULL
 * on failure; caller decrefs), the frame's size and the time taken. */
static int act(struct dg_worker *w, const char *action, int timeout_ms, json_t **res,
	       size_t *png_len, long long *ms, struct dg_err *err)
{
	char *result = NULL;
	uint8_t *png = NULL;
	size_t len = 0;
	long long t0 = ms_now();
	int r = dg_worker_act(w, action, 0, 0, timeout_ms, &result, &png, &len, NULL, NULL, err);
	*ms = ms_now() - t0;
	*res = result ? json_loads(result, 0, NULL) : NULL;
	if (png_len)
		*png_len = len;
	if (png && len >= 8)
		cr_assert_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0, "the frame is not a PNG");
	free(result);
	free(png);
	return r;
}

/* A screenshot that must succeed with a frame of the given size. */
static void screenshot_ok(struct dg_worker *w, int width, int height, const char *what)
{
	struct dg_err err = {{0}};
	json_t *res;
	size_t len;
	long long ms;
	int r = act(w, "{\"type\":\"screenshot\"}", 10000, &res, &len, &ms, &err);
	cr_assert_eq(r, 0, "%s: screenshot: %s", what, err.msg);
	cr_assert(json_is_true(json_object_get(res, "ok")), "%s: screenshot not ok", what);
	json_t *frame = json_object_get(res, "frame");
	cr_assert_eq(json_integer_value(json_object_get(frame, "width")), width);
	cr_assert_eq(json_integer_value(json_object_get(frame, "height")), height);
	cr_assert_gt(len, 8, "%s: no frame", what);
	json_decref(res);
}

/* ---- real desktops ------------------------------------------------------ */

struct desk {
	struct dg_policy policy;
	struct dg_desktop d;
	struct dg_worker w;
};

static void desk_start(struct desk *k, enum dg_profile profile, int width, int height)
{
	struct dg_err err = {{0}};
	dg_worker_set_binary(DG_BIN);
	dg_policy_default(&k->policy);
	struct dg_desktop_spec spec = {.profile = profile, .width = width, .height = height,
				       .limits = &k->policy.limits};
	cr_assert_eq(dg_desktop_start(&spec, &k->d, &err), 0, "desktop: %s", err.msg);
	cr_assert_eq(dg_worker_start(&k->d.io, &k->w, &err), 0, "worker: %s", err.msg);
	cr_assert_eq(dg_worker_wait_ready(&k->w, DG_WORKER_READY_MS, &err), 0, "ready: %s", err.msg);
}

static void desk_end(struct desk *k)
{
	uint32_t slot = k->d.jail.slot;
	dg_worker_stop(&k->w);
	dg_desktop_destroy(&k->d);
	assert_slot_gone(slot);
	assert_no_leftovers();
}

/* After the desktop's side died: the worker reports why on its own (an
 * error EVENT naming the cause, then the channel closes), exits through its
 * error path, and a further action fails at once with -EPIPE. */
static void expect_session_error(struct desk *k, long long t_kill, const char *cause)
{
	struct dg_err err = {{0}};
	char ev[1024];
	int r = read_until_end(&k->w, END_BOUND_MS, ev, sizeof(ev), &err);
	long long took = ms_now() - t_kill;
	cr_assert_eq(r, -EPIPE, "the channel did not close (%d: %s)", r, err.msg);
	cr_assert(strstr(ev, cause), "no error event naming \"%s\"; got: %s", cause, ev);
	cr_log_info("%s: error after %lld ms: %s", cause, took, ev);
	assert_worker_died_cleanly(&k->w, END_BOUND_MS, cause);
	json_t *res;
	long long ms;
	r = act(&k->w, "{\"type\":\"screenshot\"}", 10000, &res, NULL, &ms, &err);
	cr_assert_eq(r, -EPIPE, "an action on the ended session: %d (%s)", r, err.msg);
	cr_assert_lt(ms, 100, "the failed action took %lld ms", ms);
	cr_assert_null(res);
}

Test(faults, xvnc_killed_mid_session, .timeout = 60)
{
	struct desk k;
	desk_start(&k, DG_PROFILE_XTERM, 640, 480);
	screenshot_ok(&k.w, 640, 480, "before");
	pid_t xvnc[4];
	int n = find_procs(DG_JAIL_ID_BASE + k.d.jail.slot, "Xvnc", 0, xvnc, 4);
	cr_assert_eq(n, 1, "%d Xvnc processes of the jail's uid", n);
	long long t_kill = ms_now();
	cr_assert_eq(kill(xvnc[0], SIGKILL), 0);
	expect_session_error(&k, t_kill, "the desktop closed its RFB connection");
	/* Xvnc is the jail's main program: its init ends with it. */
	bool reaped = false;
	for (int i = 0; i < 300 && !(reaped = dg_jail_try_reap(&k.d.jail) == 1); i++)
		usleep(10000);
	cr_assert(reaped, "the jail's init is still running 3 s after Xvnc died");
	cr_log_info("jail init ended %lld ms after Xvnc was killed (status 0x%x)",
		    ms_now() - t_kill, k.d.jail.status);
	desk_end(&k);
}

Test(faults, chromium_killed_mid_session, .timeout = 90)
{
	struct desk k;
	desk_start(&k, DG_PROFILE_BROWSER, 800, 600);
	screenshot_ok(&k.w, 800, 600, "before");
	/* The browser process is the jail init's child; its helpers (zygote,
	 * renderers) are its own children. */
	pid_t browser[4];
	int n = find_procs(DG_JAIL_ID_BASE + k.d.jail.slot, "chromium", k.d.jail.pid, browser, 4);
	cr_assert_eq(n, 1, "%d chromium processes are children of the jail's init", n);
	long long t_kill = ms_now();
	cr_assert_eq(kill(browser[0], SIGKILL), 0);
	expect_session_error(&k, t_kill, "the browser closed its DevTools pipe");
	desk_end(&k);
}

Test(faults, worker_killed_mid_session, .timeout = 60)
{
	struct desk k;
	desk_start(&k, DG_PROFILE_XTERM, 640, 480);
	screenshot_ok(&k.w, 640, 480, "before");
	cr_assert_eq(syscall(SYS_pidfd_send_signal, k.w.pidfd, SIGKILL, NULL, 0), 0);
	/* Whether the send or the wait for the answer notices, the owner gets
	 * -EPIPE at once, not after the action's timeout. */
	struct dg_err err = {{0}};
	json_t *res;
	long long ms;
	int r = act(&k.w, "{\"type\":\"screenshot\"}", 20000, &res, NULL, &ms, &err);
	cr_assert_eq(r, -EPIPE, "act on a killed worker: %d (%s)", r, err.msg);
	cr_assert_lt(ms, 1000, "act on a killed worker took %lld ms", ms);
	cr_assert_null(res);
	cr_log_info("killed worker: act failed after %lld ms: %s", ms, err.msg);
	/* Asking again is still an error, not a crash or a hang. */
	uint32_t type;
	const uint8_t *data;
	size_t len;
	cr_assert_lt(dg_worker_recv(&k.w, &type, &data, &len, &err), 0);
	int status = 0;
	long rss = 0;
	cr_assert_eq(reap_worker(&k.w, END_BOUND_MS, &status, &rss), 0);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
	desk_end(&k);
}

/* ---- fake RFB servers --------------------------------------------------- */

/* A fake session. Tests keep theirs in static storage: when an assertion
 * fails, the test leaves its frame while the drain thread still reads the
 * struct (the process ends right after). */
struct fake {
	int fd;                   /* the test's end: the RFB server */
	struct dg_desktop d;
	struct dg_worker w;
	pthread_t drain;          /* reads (and drops) what the client sends */
	bool draining;
	atomic_bool stop;
	atomic_ullong client_bytes;
};

static void fake_start(struct fake *f, uint32_t slot)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	memset(f, 0, sizeof(*f));
	f->fd = sp[0];
	/* Non-blocking: every wait on the server's side is bounded. */
	fcntl(f->fd, F_SETFL, O_NONBLOCK);
	f->d.jail.pid = -1;
	f->d.jail.pidfd = f->d.jail.lock_fd = f->d.jail.life_fd = -1;
	f->d.jail.slot = slot;
	f->d.io.slot = slot; /* the worker runs as DG_WORKER_ID_BASE + slot */
	f->d.io.profile = DG_PROFILE_XTERM;
	f->d.io.width = FAKE_W;
	f->d.io.height = FAKE_H;
	f->d.io.rfb_fd = sp[1];
	f->d.io.cdp_out_fd = f->d.io.cdp_in_fd = -1;
	struct dg_err err = {{0}};
	dg_worker_set_binary(DG_BIN);
	cr_assert_eq(dg_worker_start(&f->d.io, &f->w, &err), 0, "worker: %s", err.msg);
	cr_assert_eq(f->d.io.rfb_fd, -1, "dg_worker_start handed the RFB end over");
}

/* Writes all of buf within timeout_ms. Returns 0, -ETIMEDOUT, or -EPIPE
 * (and similar) once the worker is gone. */
static int srv_write(struct fake *f, const void *buf, size_t n, int timeout_ms)
{
	long long deadline = ms_now() + timeout_ms;
	size_t off = 0;
	while (off < n) {
		ssize_t k = send(f->fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
		if (k > 0) {
			off += (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		long long left = deadline - ms_now();
		if (left <= 0 || atomic_load(&f->stop))
			return -ETIMEDOUT;
		struct pollfd p = {f->fd, POLLOUT, 0};
		poll(&p, 1, left > 50 ? 50 : (int)left);
	}
	return 0;
}

static int srv_read(struct fake *f, void *buf, size_t n, int timeout_ms)
{
	long long deadline = ms_now() + timeout_ms;
	size_t off = 0;
	while (off < n) {
		ssize_t k = read(f->fd, (char *)buf + off, n - off);
		if (k > 0) {
			off += (size_t)k;
			continue;
		}
		if (k == 0)
			return -EPIPE;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		long long left = deadline - ms_now();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {f->fd, POLLIN, 0};
		poll(&p, 1, (int)left);
	}
	return 0;
}

static void *drain_main(void *arg)
{
	struct fake *f = arg;
	static char buf[65536]; /* contents dropped: one buffer serves every thread */
	while (!atomic_load(&f->stop)) {
		struct pollfd p = {f->fd, POLLIN, 0};
		if (poll(&p, 1, 50) <= 0)
			continue;
		ssize_t k = read(f->fd, buf, sizeof(buf));
		if (k > 0)
			atomic_fetch_add(&f->client_bytes, (unsigned long long)k);
		else if (k == 0 || (errno != EAGAIN && errno != EINTR))
			break; /* the worker is gone */
	}
	return NULL;
}

/* From here on the client's messages (SetPixelFormat, SetEncodings, update
 * requests, input) are read and dropped, so its writes never block. */
static void srv_drain(struct fake *f)
{
	cr_assert_eq(pthread_create(&f->drain, NULL, drain_main, f), 0);
	f->draining = true;
}

static void put16(uint8_t *p, unsigned v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* ServerInit: width, height, 32 bpp BGRX true colour, name. name_len is
 * what the message claims; only strlen(name) bytes follow. */
static int srv_server_init(struct fake *f, unsigned w, unsigned h, uint32_t name_len,
			   const char *name)
{
	uint8_t m[24 + 64];
	put16(m, w);
	put16(m + 2, h);
	m[4] = 32;              /* bits per pixel */
	m[5] = 24;              /* depth */
	m[6] = 0;               /* little-endian */
	m[7] = 1;               /* true colour */
	put16(m + 8, 255);      /* red, green, blue max */
	put16(m + 10, 255);
	put16(m + 12, 255);
	m[14] = 16;             /* red, green, blue shift */
	m[15] = 8;
	m[16] = 0;
	m[17] = m[18] = m[19] = 0;
	put32(m + 20, name_len);
	size_t n = strlen(name);
	cr_assert_leq(n, 64);
	memcpy(m + 24, name, n);
	return srv_write(f, m, 24 + n, 2000);
}

/* The RFB 3.8 handshake up to (not including) ServerInit, checking what
 * the client answers. */
static void srv_handshake(struct fake *f)
{
	char ver[12];
	uint8_t b;
	cr_assert_eq(srv_write(f, "RFB 003.008\n", 12, 2000), 0);
	cr_assert_eq(srv_read(f, ver, 12, 5000), 0, "no version from the client");
	cr_assert_eq(memcmp(ver, "RFB 003.008\n", 12), 0, "client version %.11s", ver);
	cr_assert_eq(srv_write(f, "\x01\x01", 2, 2000), 0); /* one security type: None */
	cr_assert_eq(srv_read(f, &b, 1, 5000), 0);
	cr_assert_eq(b, 1, "client chose security type %u", b);
	cr_assert_eq(srv_write(f, "\0\0\0\0", 4, 2000), 0); /* SecurityResult OK */
	cr_assert_eq(srv_read(f, &b, 1, 5000), 0, "no ClientInit");
}

/* One FramebufferUpdate of n raw rectangles, each w x h at (x + i*dx, y),
 * filled with pixel. */
static int srv_update(struct fake *f, int n, int x, int y, int w, int h, int dx, uint32_t pixel,
		      int timeout_ms)
{
	size_t px = (size_t)w * (size_t)h * 4;
	size_t len = 4 + (size_t)n * (12 + px);
	uint8_t *m = malloc(len);
	cr_assert(m);
	m[0] = 0; /* FramebufferUpdate */
	m[1] = 0;
	put16(m + 2, (unsigned)n);
	uint8_t *p = m + 4;
	for (int i = 0; i < n; i++) {
		put16(p, (unsigned)(x + i * dx));
		put16(p + 2, (unsigned)y);
		put16(p + 4, (unsigned)w);
		put16(p + 6, (unsigned)h);
		put32(p + 8, 0); /* raw */
		p += 12;
		for (size_t j = 0; j < px; j += 4)
			memcpy(p + j, &pixel, 4);
		p += px;
	}
	int r = srv_write(f, m, len, timeout_ms);
	free(m);
	return r;
}

/* A well-behaved desktop up to READY: handshake, ServerInit, then two full
 * frames (the worker waits for one full frame, then for the profile's
 * window to cover half the screen and the screen to go quiet). */
static void fake_ready(struct fake *f)
{
	srv_handshake(f);
	cr_assert_eq(srv_server_init(f, FAKE_W, FAKE_H, 4, "fake"), 0);
	srv_drain(f);
	cr_assert_eq(srv_update(f, 1, 0, 0, FAKE_W, FAKE_H, 0, 0x00202020, 5000), 0);
	cr_assert_eq(srv_update(f, 1, 0, 0, FAKE_W, FAKE_H, 0, 0x00c0c0c0, 5000), 0);
	struct dg_err err = {{0}};
	long long t0 = ms_now();
	cr_assert_eq(dg_worker_wait_ready(&f->w, 5000, &err), 0, "ready: %s", err.msg);
	cr_assert_lt(ms_now() - t0, 2000, "READY took %lld ms", ms_now() - t0);
}

static void fake_end(struct fake *f)
{
	atomic_store(&f->stop, true);
	if (f->draining)
		pthread_join(f->drain, NULL);
	f->draining = false;
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	dg_worker_stop(&f->w);
}

/* The hostile session's worker ended with an error naming cause, within
 * bound_ms of t0, on its own. Returns how long it took. */
static long long expect_fake_error(struct fake *f, long long t0, int bound_ms, const char *cause)
{
	struct dg_err err = {{0}};
	char ev[1024];
	int r = read_until_end(&f->w, bound_ms, ev, sizeof(ev), &err);
	long long took = ms_now() - t0;
	cr_assert_eq(r, -EPIPE, "%s: the worker's channel did not close in %d ms (%d: %s)", cause,
		     bound_ms, r, err.msg);
	cr_assert(strstr(ev, cause), "no error event naming \"%s\"; got: \"%s\"", cause, ev);
	assert_worker_died_cleanly(&f->w, END_BOUND_MS, cause);
	return took;
}

Test(faults, a_fake_desktop_works, .timeout = 30)
{
	/* The control for every hostile case below. */
	static struct fake good;
	fake_start(&good, SLOT_GOOD);
	fake_ready(&good);
	screenshot_ok(&good.w, FAKE_W, FAKE_H, "fake desktop");
	cr_assert_gt(atomic_load(&good.client_bytes), 0, "the client sent nothing after ServerInit");
	fake_end(&good);
	assert_slot_gone(SLOT_GOOD);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

/* Hostile handshakes: each must end the worker before READY with an error
 * naming the handshake, promptly (not by a timeout), without growing. */
enum bad_hello {
	HELLO_GARBAGE,        /* not "RFB xxx.yyy\n" at all */
	HELLO_NO_SECURITY,    /* 0 security types, a 4 GiB "reason" */
	HELLO_HUGE_NAME,      /* ServerInit claims a 4 GiB desktop name */
	HELLO_HUGE_SCREEN,    /* ServerInit claims 65535x65535 */
	HELLO_WRONG_SIZE,     /* ServerInit size differs from the session's */
	HELLO_COUNT,
};

static const char *const hello_names[] = {"garbage version", "no security types",
					  "huge name length", "huge screen", "wrong size"};

static void send_bad_hello(struct fake *f, enum bad_hello kind)
{
	char ver[12];
	if (kind == HELLO_GARBAGE) {
		/* An HTTP answer where the version should be; the stream stays
		 * open, so only parsing can end the worker. */
		cr_assert_eq(srv_write(f, "HTTP/1.1 200 OK\r\n\r\n", 19, 2000), 0);
		return;
	}
	if (kind == HELLO_NO_SECURITY) {
		cr_assert_eq(srv_write(f, "RFB 003.008\n", 12, 2000), 0);
		cr_assert_eq(srv_read(f, ver, 12, 5000), 0);
		cr_assert_eq(srv_write(f, "\x00\xff\xff\xff\xff" "denied", 11, 2000), 0);
		return;
	}
	srv_handshake(f);
	if (kind == HELLO_HUGE_NAME)
		cr_assert_eq(srv_server_init(f, FAKE_W, FAKE_H, 0xffffffffu, "x"), 0);
	else if (kind == HELLO_HUGE_SCREEN)
		cr_assert_eq(srv_server_init(f, 65535, 65535, 4, "huge"), 0);
	else
		cr_assert_eq(srv_server_init(f, 1024, 768, 4, "size"), 0);
}

Test(faults, hostile_handshakes_end_only_their_worker, .timeout = 60)
{
	static struct fake good;
	fake_start(&good, SLOT_GOOD);
	fake_ready(&good);
	for (int kind = 0; kind < HELLO_COUNT; kind++) {
		static struct fake bad;
		fake_start(&bad, SLOT_BAD);
		long long t0 = ms_now();
		send_bad_hello(&bad, (enum bad_hello)kind);
		srv_drain(&bad);
		struct dg_err err = {{0}};
		int r = dg_worker_wait_ready(&bad.w, 5000, &err);
		long long ms = ms_now() - t0;
		cr_assert_lt(r, 0, "%s: the worker said READY", hello_names[kind]);
		cr_assert_neq(r, -ETIMEDOUT, "%s: no error within 5 s", hello_names[kind]);
		/* A size other than the session's is refused before libvncclient
		 * allocates a framebuffer for it. */
		const char *want = kind == HELLO_WRONG_SIZE || kind == HELLO_HUGE_SCREEN
					   ? "expected 640x480"
					   : "handshake";
		cr_assert(strstr(err.msg, want), "%s: error \"%s\" does not say \"%s\"",
			  hello_names[kind], err.msg, want);
		cr_assert_lt(ms, 2000, "%s: took %lld ms", hello_names[kind], ms);
		assert_worker_died_cleanly(&bad.w, END_BOUND_MS, hello_names[kind]);
		cr_log_info("%s: worker ended after %lld ms: %s", hello_names[kind], ms, err.msg);
		fake_end(&bad);
		assert_slot_gone(SLOT_BAD);
		/* The owner still drives its other session. */
		screenshot_ok(&good.w, FAKE_W, FAKE_H, hello_names[kind]);
	}
	fake_end(&good);
	assert_slot_gone(SLOT_GOOD);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

/* Hostile messages after READY, mid-session. */
enum bad_msg {
	MSG_RECT_OUT_OF_BOUNDS, /* x + w > width */
	MSG_RECT_HUGE,          /* 65535x65535 at 0,0 */
	MSG_UNKNOWN_ENCODING,
	MSG_HUGE_CUT_TEXT,      /* ServerCutText claiming 4 GiB */
	MSG_UNKNOWN_TYPE,
	MSG_COUNT,
};

static const char *const msg_names[] = {"rectangle out of bounds", "huge rectangle",
					"unknown encoding", "huge cut text", "unknown message type"};

static void send_bad_msg(struct fake *f, enum bad_msg kind)
{
	uint8_t m[32] = {0};
	size_t n = 16;
	m[0] = 0;
	put16(m + 2, 1);
	switch (kind) {
	case MSG_RECT_OUT_OF_BOUNDS:
		put16(m + 4, FAKE_W - 40);
		put16(m + 8, 100);
		put16(m + 10, 10);
		break;
	case MSG_RECT_HUGE:
		put16(m + 8, 65535);
		put16(m + 10, 65535);
		break;
	case MSG_UNKNOWN_ENCODING:
		put16(m + 8, 16);
		put16(m + 10, 16);
		put32(m + 12, 0x7fff1234u);
		break;
	case MSG_HUGE_CUT_TEXT:
		memset(m, 0, sizeof(m));
		m[0] = 3;
		put32(m + 4, 0xffffffffu);
		n = 8 + 8;
		memcpy(m + 8, "cut text", 8);
		break;
	default:
		/* libvncclient reads 256 bytes after an unknown type before it
		 * gives up: send them, so that the type, not the read timeout,
		 * ends the worker. */
		break;
	}
	if (kind == MSG_UNKNOWN_TYPE) {
		uint8_t junk[300];
		memset(junk, 0xee, sizeof(junk));
		cr_assert_eq(srv_write(f, junk, sizeof(junk), 2000), 0);
		return;
	}
	cr_assert_eq(srv_write(f, m, n, 2000), 0);
}

Test(faults, hostile_updates_end_only_their_worker, .timeout = 60)
{
	static struct fake good;
	fake_start(&good, SLOT_GOOD);
	fake_ready(&good);
	for (int kind = 0; kind < MSG_COUNT; kind++) {
		static struct fake bad;
		fake_start(&bad, SLOT_BAD);
		fake_ready(&bad);
		long long t0 = ms_now();
		send_bad_msg(&bad, (enum bad_msg)kind);
		long long ms = expect_fake_error(&bad, t0, END_BOUND_MS,
						 "the desktop closed its RFB connection or sent a bad "
						 "message");
		cr_log_info("%s: worker ended after %lld ms", msg_names[kind], ms);
		/* The ended session fails at once; the other one still works. */
		struct dg_err err = {{0}};
		json_t *res;
		long long act_ms;
		int r = act(&bad.w, "{\"type\":\"screenshot\"}", 10000, &res, NULL, &act_ms, &err);
		cr_assert_eq(r, -EPIPE, "%s: %d (%s)", msg_names[kind], r, err.msg);
		fake_end(&bad);
		assert_slot_gone(SLOT_BAD);
		screenshot_ok(&good.w, FAKE_W, FAKE_H, msg_names[kind]);
	}
	fake_end(&good);
	assert_slot_gone(SLOT_GOOD);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

Test(faults, absurd_rectangle_count_is_bounded_work, .timeout = 30)
{
	/* 65535 rectangles (the most one update can claim) of 1x1 pixel each:
	 * valid, so the worker must take it in its stride and keep serving. */
	static struct fake f;
	fake_start(&f, SLOT_BAD);
	fake_ready(&f);
	long long t0 = ms_now();
	cr_assert_eq(srv_update(&f, 65535, 0, 0, 1, 1, 0, 0x00ff0000, 10000), 0);
	screenshot_ok(&f.w, FAKE_W, FAKE_H, "after 65535 rectangles");
	cr_log_info("65535 rectangles: screenshot after %lld ms", ms_now() - t0);
	fake_end(&f);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

/* The flood: valid small updates as fast as the test can write them. */
struct flood {
	struct fake *f;
	_Atomic long long until; /* the test may end the flood early */
	atomic_ullong updates;
	int error;
};

static void *flood_main(void *arg)
{
	struct flood *fl = arg;
	uint32_t pixel = 0;
	while (ms_now() < atomic_load(&fl->until) && !atomic_load(&fl->f->stop)) {
		unsigned long long u = atomic_load(&fl->updates);
		int x = (int)(u * 37 % (FAKE_W - 64));
		int y = (int)(u * 11 % (FAKE_H - 16));
		/* 4 rectangles of 16x16 side by side: 4 KiB of pixels. */
		int r = srv_update(fl->f, 4, x, y, 16, 16, 16, pixel += 0x010203, 2000);
		if (r) {
			fl->error = r;
			break;
		}
		atomic_fetch_add(&fl->updates, 1);
	}
	return NULL;
}

Test(faults, update_flood_keeps_actions_bounded, .timeout = 60)
{
	static struct fake f;
	fake_start(&f, SLOT_BAD);
	fake_ready(&f);
	/* Several settle bounds long, so that an action meets the bound even
	 * when a loaded host pauses the flood's thread (a pause longer than the
	 * quiet period lets one action settle early); it ends once one did. */
	int flood_ms = 3 * DG_SETTLE_MAX_MS + 1000;
	static struct flood fl; /* static: the thread may outlive a failed test's frame */
	fl.f = &f;
	atomic_store(&fl.until, ms_now() + flood_ms);
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, flood_main, &fl), 0);
	for (int i = 0; i < 200 && atomic_load(&fl.updates) < 100; i++)
		usleep(5000);
	cr_assert_geq(atomic_load(&fl.updates), 100, "the flood did not start");
	/* Actions while the screen never stops changing: each must come back
	 * (the settle bound caps the wait), none may hang. */
	const char *const actions[] = {"{\"type\":\"screenshot\"}",
				       "{\"type\":\"move\",\"x\":100,\"y\":100}"};
	int done = 0, capped = 0;
	long long worst = 0;
	long long t_flood = ms_now();
	while (ms_now() < atomic_load(&fl.until) - DG_SETTLE_MAX_MS && !(capped > 0 && done >= 2)) {
		struct dg_err err = {{0}};
		json_t *res;
		size_t len;
		long long ms;
		const char *a = actions[done % 2];
		int r = act(&f.w, a, DG_SETTLE_MAX_MS + 10000, &res, &len, &ms, &err);
		cr_assert_eq(r, 0, "%s during the flood: %s (after %lld ms)", a, err.msg, ms);
		cr_assert(json_is_true(json_object_get(res, "ok")), "%s not ok", a);
		cr_assert_gt(len, 8, "%s: no frame", a);
		cr_assert_leq(ms, DG_SETTLE_MAX_MS + 1500, "%s took %lld ms during the flood", a, ms);
		long long settle_ms = json_integer_value(json_object_get(res, "settle_ms"));
		long long total_ms = json_integer_value(json_object_get(res, "total_ms"));
		cr_log_info("flood: %s: %lld ms at the owner, worker total %lld ms, settle %lld ms", a,
			    ms, total_ms, settle_ms);
		if (settle_ms >= DG_SETTLE_MAX_MS - 100)
			capped++;
		json_decref(res);
		worst = ms > worst ? ms : worst;
		done++;
	}
	atomic_store(&fl.until, 0);
	pthread_join(th, NULL);
	flood_ms = (int)(ms_now() - t_flood);
	cr_assert_eq(fl.error, 0, "the flood could not be written: %s", strerror(-fl.error));
	cr_log_info("flood: %llu updates in %d ms; %d actions, worst %lld ms, %d hit the %d ms cap",
		    atomic_load(&fl.updates), flood_ms, done, worst, capped, DG_SETTLE_MAX_MS);
	cr_assert_geq(atomic_load(&fl.updates), 1000, "only %llu updates: not a flood",
		      atomic_load(&fl.updates));
	cr_assert_geq(done, 1);
	cr_assert_geq(capped, 1, "no action waited for the cap: the flood did not keep the "
				 "screen busy");
	/* Quiet again: an action settles at once. */
	struct dg_err err = {{0}};
	json_t *res;
	long long ms;
	cr_assert_eq(act(&f.w, "{\"type\":\"screenshot\"}", 10000, &res, NULL, &ms, &err), 0,
		     "after the flood: %s", err.msg);
	cr_assert_lt(ms, 1000, "screenshot after the flood took %lld ms", ms);
	json_decref(res);
	fake_end(&f);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

Test(faults, half_an_update_times_out, .timeout = 60)
{
	static struct fake good, bad;
	fake_start(&good, SLOT_GOOD);
	fake_ready(&good);
	fake_start(&bad, SLOT_BAD);
	fake_ready(&bad);
	/* One 64x64 raw rectangle announced, half its pixels sent, then
	 * silence with the stream left open. */
	uint8_t m[16 + 64 * 32 * 4] = {0};
	put16(m + 2, 1);
	put16(m + 8, 64);
	put16(m + 10, 64);
	cr_assert_eq(srv_write(&bad, m, sizeof(m), 2000), 0);
	long long t0 = ms_now();
	struct dg_err err = {{0}};
	json_t *res;
	long long ms;
	int r = act(&bad.w, "{\"type\":\"screenshot\"}", 20000, &res, NULL, &ms, &err);
	cr_assert_lt(r, 0, "a screenshot of a stalled desktop succeeded");
	cr_assert_neq(r, -ETIMEDOUT, "the worker hung: the owner's own timeout ended the wait");
	cr_assert(strstr(err.msg, "the desktop closed its RFB connection or sent a bad message"),
		  "error: %s", err.msg);
	cr_assert_geq(ms, (DG_WORKER_RFB_READ_TIMEOUT_S - 1) * 1000, "ended after %lld ms", ms);
	cr_assert_leq(ms, (DG_WORKER_RFB_READ_TIMEOUT_S + 2) * 1000, "ended after %lld ms", ms);
	cr_log_info("stalled update: the owner saw the error after %lld ms: %s", ms_now() - t0,
		    err.msg);
	assert_worker_died_cleanly(&bad.w, END_BOUND_MS, "stalled update");
	fake_end(&bad);
	screenshot_ok(&good.w, FAKE_W, FAKE_H, "beside the stalled desktop");
	fake_end(&good);
	assert_slot_gone(SLOT_GOOD);
	assert_slot_gone(SLOT_BAD);
	assert_no_leftovers();
}

/* The other direction: a bad message from the owner ends the worker too
 * (it is a protocol violation, not something to guess around). */
Test(faults, malformed_control_messages_end_the_worker, .timeout = 30)
{
	static const struct {
		uint32_t type;
		const char *payload, *cause;
	} cases[] = {
		{99, "", "unknown message type 99"},
		{DG_MSG_READY, "{}", "message type 2 from the owner"},
		{DG_MSG_ACTION, "{\"id\":\"one\"}", "action message without id or action"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		static struct fake f;
		fake_start(&f, SLOT_BAD);
		fake_ready(&f);
		uint32_t hdr[2] = {cases[i].type, (uint32_t)strlen(cases[i].payload)};
		long long t0 = ms_now();
		cr_assert_eq(write(f.w.ctl, hdr, sizeof(hdr)), (ssize_t)sizeof(hdr));
		if (hdr[1])
			cr_assert_eq(write(f.w.ctl, cases[i].payload, hdr[1]), (ssize_t)hdr[1]);
		long long ms = expect_fake_error(&f, t0, END_BOUND_MS, cases[i].cause);
		cr_log_info("owner sent %s: worker ended after %lld ms", cases[i].cause, ms);
		fake_end(&f);
		assert_slot_gone(SLOT_BAD);
	}
	assert_no_leftovers();
}
