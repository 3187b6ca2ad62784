/* The spawner: the only privileged part of `deskgate serve`.
 *
 * It is forked by `deskgate serve` before the gateway drops its privileges
 * and answers typed requests over a SOCK_SEQPACKET socketpair: create a
 * session (jail, desktop, worker; the worker's channel goes back as a
 * descriptor), destroy one, run an exec in one (the result channel goes back
 * as a descriptor), start the egress proxy (its channel goes back; at start
 * and whenever the gateway saw the last one die), check the paths of a file
 * upload in a session's desktop (upload.c). It tells the gateway when a
 * session's desktop ended on its own. It dies with the gateway
 * (PR_SET_PDEATHSIG) and everything it started dies with it.
 * Single-threaded; the gateway is less trusted than the spawner, so every
 * request is checked as if hostile: the channel carries typed fixed-layout
 * messages (desktop/proto/proto.h, decoded by dg_spawn_decode), never JSON.
 * A datagram that is not exactly one valid request ends the connection
 * (every session ends and the spawner exits, as when the channel closes);
 * a valid request that cannot be served is answered with an error.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/egress/egress.h"
#include "desktop/proto/proto.h"
#include "desktop/spawner/seccomp-priv.h"
#include "desktop/spawner/spawner-priv.h"
#include "desktop/spawner/spawner.h"

struct session {
	bool used;
	bool warm;                 /* in the pool: started, given to nobody yet */
	char id[DG_SESSION_ID_MAX + 1];
	struct dg_limits limits;
	bool strict;
	struct dg_desktop desktop;
	struct dg_worker worker;
	long long cap_at;          /* ms: the CPU quota is due then at the latest
				    * (DG_SPAWNER_START_CPU_MS); 0 once written */
	/* The jail or the worker ended first without showing it was the
	 * cause: the session ends once the other ends, or at end_at
	 * (DG_SPAWNER_END_PAIR_MS), with end_why unless the other shows it
	 * was the cause. 0 when nothing is pending. */
	long long end_at;
	char end_why[128];
};

/* The warm pool: desktops started ahead, fully jailed, each given to one
 * session and never reused. A pool desktop has the pool's size, limits and
 * strictness; a request that asks for anything else starts cold. */
struct pool {
	int want[2];               /* by enum dg_profile */
	struct dg_limits limits;
	bool strict;
	int failures;              /* consecutive failed starts (backs off) */
	long long retry_at;        /* ms: after failures, not before */
	long long refill_at;       /* ms: after a hand-over, not before
				    * (DG_SPAWNER_REFILL_AFTER_MS) */
};

struct spawner {
	int fd;
	int sigfd;
	bool verbose;
	bool broken;               /* a reply could not be sent */
	const struct dg_spawner_fx *fx;
	struct pool pool;
	struct session sessions[DG_SPAWNER_SESSIONS_MAX];
	/* The egress proxy it started last: pid only (its channel is the
	 * gateway's); -1 once reaped. At most one runs. */
	struct dg_egress egress;
};

static void session_end(struct spawner *sp, struct session *s);

struct dg_spawner_state {
	struct spawner sp;
};

/* Ends every session (their jails would die with the spawner anyway; this
 * also removes their cgroups) and exits. */
__attribute__((noreturn)) static void end_all_and_exit(struct spawner *sp, int status)
{
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		if (sp->sessions[i].used)
			session_end(sp, &sp->sessions[i]);
	}
	dg_egress_stop(&sp->egress); /* its channel closed with the gateway: it is ending */
	_exit(status);
}

static void reply(struct spawner *sp, const struct dg_spawn_msg *m, const int *fds, int nfds)
{
	static uint8_t buf[DG_SEQ_MAX];
	size_t len;
	struct dg_err err = {{0}};
	if (dg_spawn_encode(m, buf, sizeof(buf), &len, &err) != 0) {
		/* Only what this process wrote: a bug, not the gateway's doing. */
		fprintf(stderr, "deskgate spawner: cannot encode a reply: %s\n", err.msg);
		sp->broken = true;
		return;
	}
	/* The gateway is gone or the channel broke: nothing to serve. The
	 * gateway closes the channel when it stops, possibly right after asking
	 * for destroys: the caller ends the sessions still here. */
	if (!sp->broken && sp->fx->send(sp->fd, (const char *)buf, len, fds, nfds) != 0)
		sp->broken = true;
}

static void reply_ok(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct dg_spawn_msg r = {.type = DG_SPAWN_OK, .req = req->req};
	reply(sp, &r, NULL, 0);
}

static void reply_error(struct spawner *sp, const struct dg_spawn_msg *req, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reply_error(struct spawner *sp, const struct dg_spawn_msg *req, const char *fmt, ...)
{
	struct dg_spawn_msg r = {.type = DG_SPAWN_ERROR, .req = req->req};
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r.u.text, sizeof(r.u.text), fmt, ap);
	va_end(ap);
	reply(sp, &r, NULL, 0);
}

static struct session *find(struct spawner *sp, const char *id)
{
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		if (sp->sessions[i].used && strcmp(sp->sessions[i].id, id) == 0)
			return &sp->sessions[i];
	}
	return NULL;
}

static void session_end(struct spawner *sp, struct session *s)
{
	sp->fx->worker_stop(&s->worker);
	sp->fx->desktop_destroy(&s->desktop);
	s->used = false;
	s->end_at = 0;
}

/* Ends session s, and tells the gateway why when it is somebody's (a warm
 * desktop is nobody's yet: the pool starts another). */
static void session_end_told(struct spawner *sp, struct session *s, const char *why)
{
	struct dg_spawn_msg ev = {.type = DG_SPAWN_ENDED, .req = 0};
	snprintf(ev.session, sizeof(ev.session), "%s", s->id);
	snprintf(ev.u.text, sizeof(ev.u.text), "%s", why);
	bool warm = s->warm;
	session_end(sp, s);
	if (!warm)
		reply(sp, &ev, NULL, 0);
}

/* Ends s's start: its jail gets its CPU quota (dg_desktop_cap_cpu). A
 * quota that cannot be written ends the session: a desktop never runs on
 * without its limits. Returns 0, or -1 when s ended. */
static int cap_cpu(struct spawner *sp, struct session *s)
{
	if (!s->cap_at)
		return 0;
	struct dg_err err = {{0}};
	s->cap_at = 0;
	if (sp->fx->desktop_cap_cpu(&s->desktop, &s->limits, &err) == 0)
		return 0;
	fprintf(stderr, "deskgate spawner: session %s: %s; ending it\n", s->id[0] ? s->id : "(warm)",
		err.msg);
	session_end_told(sp, s, "its CPU limit could not be set");
	return -1;
}

/* Writes every CPU quota that is due (DG_SPAWNER_START_CPU_MS passed) and
 * returns when the next one is, or 0 when none is pending. */
static long long cap_overdue(struct spawner *sp)
{
	long long now = dg_now_ms(), next = 0;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		struct session *s = &sp->sessions[i];
		if (s->used && s->cap_at && s->cap_at <= now)
			cap_cpu(sp, s);
		if (s->used && s->cap_at && (!next || s->cap_at < next))
			next = s->cap_at;
	}
	return next;
}

/* Gives session s to the gateway: the worker's channel, the egress
 * listener and the worker's live view channel go back with the reply; the
 * spawner keeps only the pids. */
static void hand_over(struct spawner *sp, const struct dg_spawn_msg *req, struct session *s,
		      long long start_ms, bool warm)
{
	struct dg_spawn_msg r = {.type = DG_SPAWN_CREATED, .req = req->req};
	snprintf(r.session, sizeof(r.session), "%s", s->id);
	r.u.created.slot = s->desktop.jail.slot;
	r.u.created.start_ms = start_ms;
	r.u.created.warm = warm;
	int fds[3] = {s->worker.ctl, s->desktop.jail.egress_fd, s->worker.view};
	reply(sp, &r, fds, 3);
	close(s->worker.ctl);
	s->worker.ctl = -1;
	close(s->worker.view);
	s->worker.view = -1;
	close(s->desktop.jail.egress_fd);
	s->desktop.jail.egress_fd = -1;
}

/* A warm desktop that fits the request, or NULL. */
static struct session *pool_take(struct spawner *sp, enum dg_profile prof, int w, int h,
				 const struct dg_limits *lim, bool strict)
{
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		struct session *s = &sp->sessions[i];
		if (s->used && s->warm && s->desktop.io.profile == prof && s->desktop.io.width == w &&
		    s->desktop.io.height == h && s->strict == strict &&
		    memcmp(&s->limits, lim, sizeof(*lim)) == 0)
			return s;
	}
	return NULL;
}

static int pool_count(struct spawner *sp, enum dg_profile prof)
{
	int n = 0;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++)
		n += sp->sessions[i].used && sp->sessions[i].warm &&
		     sp->sessions[i].desktop.io.profile == prof;
	return n;
}

/* Starts one warm desktop when the pool is short of one. Returns true when
 * more remain to start (the loop comes back at once, after serving the
 * gateway's requests: requests go first). */
static bool pool_refill(struct spawner *sp)
{
	struct pool *pl = &sp->pool;
	if (dg_now_ms() < pl->retry_at || dg_now_ms() < pl->refill_at)
		return false;
	for (int prof = 0; prof < 2; prof++) {
		if (pool_count(sp, (enum dg_profile)prof) >= pl->want[prof])
			continue;
		struct session *s = NULL;
		for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX && !s; i++)
			if (!sp->sessions[i].used)
				s = &sp->sessions[i];
		if (!s)
			return false;
		memset(s, 0, sizeof(*s));
		s->limits = pl->limits;
		struct dg_desktop_spec spec = {.profile = (enum dg_profile)prof,
					       .width = DG_DESKTOP_WIDTH_DEFAULT,
					       .height = DG_DESKTOP_HEIGHT_DEFAULT,
					       .limits = &s->limits,
					       .log_to_stderr = sp->verbose,
					       .strict = pl->strict,
					       .egress = true,
					       .cpu_after_start = true};
		struct dg_err err = {{0}};
		if (sp->fx->desktop_start(&spec, &s->desktop, &err) != 0 ||
		    sp->fx->worker_start(&s->desktop.io, &s->worker, &err) != 0) {
			if (s->desktop.jail.pid > 0 || s->desktop.jail.cgroup)
				sp->fx->desktop_destroy(&s->desktop);
			fprintf(stderr, "deskgate spawner: warm %s desktop: %s\n",
				dg_profile_name((enum dg_profile)prof), err.msg);
			/* Back off: a machine that cannot start desktops must not
			 * spin on it. */
			pl->failures++;
			pl->retry_at = dg_now_ms() + (pl->failures < 6 ? 250LL << pl->failures : 16000);
			return false;
		}
		pl->failures = 0;
		s->used = true;
		s->warm = true;
		s->cap_at = dg_now_ms() + DG_SPAWNER_START_CPU_MS;
		s->strict = pl->strict;
		return true;
	}
	return false;
}

/* The pool's sizes and what its desktops are started with. Smaller sizes
 * do not end warm desktops already started; they are used first. */
static void op_pool(struct spawner *sp, const struct dg_spawn_msg *req)
{
	sp->pool.limits = req->u.pool.limits;
	sp->pool.strict = req->u.pool.strict;
	sp->pool.want[DG_PROFILE_XTERM] = (int)req->u.pool.xterm;
	sp->pool.want[DG_PROFILE_BROWSER] = (int)req->u.pool.browser;
	sp->pool.failures = 0;
	sp->pool.retry_at = 0;
	reply_ok(sp, req);
}

static void op_create(struct spawner *sp, const struct dg_spawn_msg *req)
{
	const char *id = req->session;
	if (find(sp, id))
		return reply_error(sp, req, "create: duplicate session id");
	struct session *s = NULL;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX && !s; i++) {
		if (!sp->sessions[i].used)
			s = &sp->sessions[i];
	}
	if (!s)
		return reply_error(sp, req, "create: all %d session slots are in use",
				   DG_SPAWNER_SESSIONS_MAX);
	int w = (int)req->u.create.width, h = (int)req->u.create.height;
	bool strict = req->u.create.strict;
	struct session *ws = pool_take(sp, req->u.create.profile, w, h, &req->u.create.limits, strict);
	if (ws) {
		/* A warm desktop started long ago, or is still starting:
		 * either way it is somebody's now, under its limits. */
		if (cap_cpu(sp, ws) != 0)
			return reply_error(sp, req, "create: a warm desktop's CPU limit could not "
					   "be set");
		snprintf(ws->id, sizeof(ws->id), "%s", id);
		ws->warm = false;
		sp->pool.refill_at = dg_now_ms() + DG_SPAWNER_REFILL_AFTER_MS;
		hand_over(sp, req, ws, 0, true);
		return;
	}
	memset(s, 0, sizeof(*s));
	s->limits = req->u.create.limits;
	struct dg_desktop_spec spec = {
		.profile = req->u.create.profile,
		.width = w,
		.height = h,
		.limits = &s->limits,
		.log_to_stderr = sp->verbose,
		.strict = strict,
		.egress = true,
		.cpu_after_start = true,
	};
	struct dg_err err = {{0}};
	long long t0 = dg_now_ms();
	if (sp->fx->desktop_start(&spec, &s->desktop, &err) != 0)
		return reply_error(sp, req, "create: starting the desktop: %s", err.msg);
	if (sp->fx->worker_start(&s->desktop.io, &s->worker, &err) != 0) {
		sp->fx->desktop_destroy(&s->desktop);
		return reply_error(sp, req, "create: starting the worker: %s", err.msg);
	}
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->used = true;
	s->strict = strict;
	s->cap_at = dg_now_ms() + DG_SPAWNER_START_CPU_MS;
	hand_over(sp, req, s, dg_now_ms() - t0, false);
}

/* The gateway saw the session's READY: its start is over. */
static void op_started(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct session *s = find(sp, req->session);
	if (!s)
		return reply_error(sp, req, "started: no such session");
	if (cap_cpu(sp, s) != 0)
		return reply_error(sp, req, "started: the CPU limit could not be set");
	reply_ok(sp, req);
}

static void op_destroy(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct session *s = find(sp, req->session);
	if (!s)
		return reply_error(sp, req, "destroy: no such session");
	session_end(sp, s);
	reply_ok(sp, req);
}

/* A new egress proxy, its channel to the gateway. The
 * request carries nothing: the proxy's options were fixed before this
 * process was forked (dg_egress_configure). A proxy started earlier that
 * still runs is killed first: the gateway asks only once it lost that one's
 * channel, and two proxies must never serve the same listeners. */
static void op_egress(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct dg_err err = {{0}};
	struct dg_egress e;
	pid_t previous = sp->egress.pid;
	sp->egress.pid = -1;
	if (sp->fx->egress_spawn(previous, &e, &err) != 0)
		return reply_error(sp, req, "egress: %s", err.msg);
	sp->egress.pid = e.pid;
	sp->egress.fd = -1;
	int fd = e.fd;
	struct dg_spawn_msg r = {.type = DG_SPAWN_CHANNEL, .req = req->req};
	r.u.channel.pid = (int32_t)e.pid;
	reply(sp, &r, &fd, 1);
	close(fd);
}

/* The egress proxy ended (st: its wait status): said on stderr, which is
 * the gateway's log; the gateway learns it from its channel. */
static void egress_reaped(struct spawner *sp, int st)
{
	int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	if (sig)
		fprintf(stderr, "deskgate spawner: the egress proxy (pid %d) was killed by signal %d%s\n",
			(int)sp->egress.pid, sig,
			sig == SIGSYS ? " (SIGSYS: its seccomp filter refused a system call)" : "");
	else
		fprintf(stderr, "deskgate spawner: the egress proxy (pid %d) exited with status %d\n",
			(int)sp->egress.pid, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	sp->egress.pid = -1;
}

/* ---- exec ----------------------------------------------------------------- */

struct capture {
	int fd;
	char *buf;
	size_t len, cap;
	bool truncated;
};

static void capture_read(struct capture *c)
{
	char tmp[16384];
	ssize_t k = read(c->fd, tmp, sizeof(tmp));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(c->fd);
		c->fd = -1;
		return;
	}
	size_t n = (size_t)k;
	if (c->len + n > c->cap) {
		n = c->cap - c->len;
		c->truncated = true;
	}
	memcpy(c->buf + c->len, tmp, n);
	c->len += n;
	if (c->truncated) {
		/* Past the cap: the writer gets EPIPE, as with `deskgate exec`. */
		close(c->fd);
		c->fd = -1;
	}
}

static void write_all(int fd, const void *p, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t k = write(fd, (const char *)p + done, n - done);
		if (k <= 0 && errno != EINTR)
			return;
		if (k > 0)
			done += (size_t)k;
	}
}

/* The exec runner: a child of the spawner serving one exec. It starts the
 * program in the session's jail, feeds stdin, collects output (each stream
 * capped), enforces the wall clock and writes one typed result
 * (struct dg_exec_result) to result_fd. */
__attribute__((noreturn)) static void run_exec(const struct dg_jail *jail,
					       const struct dg_limits *lim,
					       const struct dg_spawn_msg *req, int result_fd)
{
	struct dg_err err = {{0}};
	const char *stdin_data = req->u.exec.stdin_data;
	size_t stdin_len = req->u.exec.stdin_len;
	long long timeout = req->u.exec.timeout_ms;
	long long cap_ms = (long long)lim->exec_seconds * 1000;
	if (timeout <= 0 || timeout > cap_ms)
		timeout = cap_ms;
	const char *const *argv = req->u.exec.argv;
	int in[2], out[2], errp[2];
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC))
		_exit(1);
	/* The egress proxy is the only way out; both spellings, since curl
	 * reads only the lowercase http_proxy. */
	static const char *const proxy_env[] = {
		"http_proxy=" DG_JAIL_EGRESS_URL, "HTTP_PROXY=" DG_JAIL_EGRESS_URL,
		"https_proxy=" DG_JAIL_EGRESS_URL, "HTTPS_PROXY=" DG_JAIL_EGRESS_URL, NULL};
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = in[0], .stdout_fd = out[1],
				    .stderr_fd = errp[1], .env_extra = proxy_env};
	long long t0 = dg_now_ms();
	pid_t sup;
	int r = dg_jail_enter(jail, &prog, lim, &sup, &err);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	struct dg_exec_result res = {0};
	struct capture o = {-1, NULL, 0, 0, false}, e = {-1, NULL, 0, 0, false};
	if (r) {
		res.exit_code = r == -ENOENT ? 127 : r == -EACCES ? 126 : 125;
		snprintf(res.error, sizeof(res.error), "%s", err.msg);
		close(out[0]);
		close(errp[0]);
		close(in[1]);
	} else {
		o = (struct capture){out[0], malloc(lim->output_bytes), 0, lim->output_bytes, false};
		e = (struct capture){errp[0], malloc(lim->output_bytes), 0, lim->output_bytes, false};
		if (!o.buf || !e.buf)
			_exit(1);
		size_t off = 0;
		int wfd = in[1];
		fcntl(wfd, F_SETFL, O_NONBLOCK);
		if (!stdin_data || stdin_len == 0) {
			close(wfd);
			wfd = -1;
		}
		bool timed_out = false, reaped = false;
		int status = 0;
		int pidfd = (int)syscall(SYS_pidfd_open, sup, 0);
		while (!reaped || o.fd >= 0 || e.fd >= 0) {
			long long left = t0 + timeout - dg_now_ms();
			if (left <= 0 && !timed_out) {
				timed_out = true;
				kill(sup, SIGTERM);
			}
			struct pollfd p[4] = {{o.fd, POLLIN, 0}, {e.fd, POLLIN, 0},
					      {wfd, POLLOUT, 0}, {reaped ? -1 : pidfd, POLLIN, 0}};
			poll(p, 4, left > 0 ? (int)left : 100);
			if (p[0].revents)
				capture_read(&o);
			if (p[1].revents)
				capture_read(&e);
			if (wfd >= 0 && p[2].revents) {
				ssize_t k = write(wfd, stdin_data + off, stdin_len - off);
				if (k > 0)
					off += (size_t)k;
				if (off >= stdin_len || (k < 0 && errno != EAGAIN && errno != EINTR)) {
					close(wfd);
					wfd = -1;
				}
			}
			if (!reaped && waitpid(sup, &status, WNOHANG) == sup)
				reaped = true;
			if (timed_out && dg_now_ms() - (t0 + timeout) > DG_EXEC_KILL_GRACE_MS) {
				kill(sup, SIGKILL);
				if (o.fd >= 0)
					close(o.fd);
				if (e.fd >= 0)
					close(e.fd);
				o.fd = e.fd = -1;
			}
		}
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		res.ok = true;
		res.exit_code = timed_out ? 124 : code;
		res.flags = (o.truncated ? DG_EXEC_RESULT_STDOUT_TRUNCATED : 0) |
			    (e.truncated ? DG_EXEC_RESULT_STDERR_TRUNCATED : 0) |
			    (timed_out ? DG_EXEC_RESULT_TIMED_OUT : 0);
		res.duration_ms = dg_now_ms() - t0;
		res.out = o.buf;
		res.out_len = o.len;
		res.errout = e.buf;
		res.errout_len = e.len;
	}
	uint8_t hdr[DG_EXEC_RESULT_HEADER];
	if (dg_exec_result_header(&res, hdr, &err) == 0) {
		write_all(result_fd, hdr, sizeof(hdr));
		write_all(result_fd, res.out, res.out_len);
		write_all(result_fd, res.errout, res.errout_len);
		write_all(result_fd, res.error, strlen(res.error));
	} else {
		fprintf(stderr, "deskgate spawner: exec: %s\n", err.msg);
	}
	close(result_fd);
	/* Reap what was reparented to this process (see op_exec). */
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}

/* The real exec_start: forks the runner. */
static int real_exec_start(const struct dg_jail *jail, const struct dg_limits *limits,
			   const struct dg_spawn_msg *req, int channel_fd, pid_t *pid, int *fd,
			   struct dg_err *err)
{
	int res[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, res) != 0)
		return dg_err_set(err, -errno, "socketpair: %s", strerror(errno));
	pid_t p = fork();
	if (p < 0) {
		int e = errno;
		close(res[0]);
		close(res[1]);
		return dg_err_set(err, -e, "fork: %s", strerror(e));
	}
	if (p == 0) {
		close(res[0]);
		close(channel_fd);
		/* The program runs in the jail's pid namespace as a child of the
		 * supervisor, which is outside it. When both are killed at once (the
		 * session ends during the exec), the program's zombie is reparented
		 * to the nearest subreaper, else the host's init, and until it is
		 * reaped the jail's init cannot finish dying: the spawner's destroy
		 * would wait on the host's init. This process reaps it instead. */
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		signal(SIGPIPE, SIG_IGN);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		run_exec(jail, limits, req, res[1]);
	}
	close(res[1]);
	*pid = p;
	*fd = res[0];
	return 0;
}

static void op_exec(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct session *s = find(sp, req->session);
	if (!s)
		return reply_error(sp, req, "exec: no such session");
	struct dg_err err = {{0}};
	pid_t p;
	int fd;
	if (sp->fx->exec_start(&s->desktop.jail, &s->limits, req, sp->fd, &p, &fd, &err) != 0)
		return reply_error(sp, req, "exec: %s", err.msg);
	struct dg_spawn_msg r = {.type = DG_SPAWN_CHANNEL, .req = req->req};
	r.u.channel.pid = (int32_t)p;
	reply(sp, &r, &fd, 1);
	close(fd);
}

/* ---- upload check --------------------------------------------------------- */

/* The paths of a file upload, looked at in the session's desktop (upload.c):
 * a verdict per path, in their order. */
static void op_upload_check(struct spawner *sp, const struct dg_spawn_msg *req)
{
	struct session *s = find(sp, req->session);
	if (!s)
		return reply_error(sp, req, "upload check: no such session");
	struct dg_spawn_msg r = {.type = DG_SPAWN_UPLOAD_CHECKED, .req = req->req};
	snprintf(r.session, sizeof(r.session), "%s", s->id);
	struct dg_err err = {{0}};
	if (sp->fx->upload_check(&s->desktop.jail, req->u.upload_check.paths, req->u.upload_check.n,
				 &r.u.upload_checked, &err) != 0)
		return reply_error(sp, req, "upload check: session %s: %s", s->id, err.msg);
	reply(sp, &r, NULL, 0);
}

/* ---- the loop ------------------------------------------------------------- */

/* Why a desktop ended, from how its jail's init did (a wait status): init
 * ends with its main program, the X server, and passes on how it ended
 * (128 + the signal that killed it). Returns whether that shows the X
 * server ended first: anything but Xvnc's clean exit, which follows its
 * client's (the worker's) end. */
static bool jail_why(int st, char *why, size_t n)
{
	if (WIFEXITED(st) && WEXITSTATUS(st) > 128)
		snprintf(why, n, "the desktop ended: its X server (Xvnc) was killed by signal %d",
			 WEXITSTATUS(st) - 128);
	else if (WIFEXITED(st))
		snprintf(why, n, "the desktop ended: its X server (Xvnc) exited with status %d",
			 WEXITSTATUS(st));
	else
		snprintf(why, n, "the desktop ended: its init was killed by signal %d",
			 WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

#define WORKER_ENDED "the desktop's worker ended"

/* Ends every session whose pair's wait (end_at) is over; returns when the
 * next one is due, or 0 when none is pending. */
static long long end_pair_overdue(struct spawner *sp)
{
	long long now = dg_now_ms(), next = 0;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		struct session *s = &sp->sessions[i];
		if (s->used && s->end_at && s->end_at <= now) {
			s->end_at = 0;
			session_end_told(sp, s, s->end_why);
		}
		if (s->used && s->end_at && (!next || s->end_at < next))
			next = s->end_at;
	}
	return next;
}

/* Reaps children: a session whose jail init or worker ended is over. Which
 * one's end is the session's reason: see DG_SPAWNER_END_PAIR_MS. */
static void reap(struct spawner *sp)
{
	struct signalfd_siginfo si;
	while (read(sp->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		;
	int st;
	pid_t p;
	while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
		if (p == sp->egress.pid) {
			egress_reaped(sp, st);
			continue;
		}
		for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
			struct session *s = &sp->sessions[i];
			if (!s->used)
				continue;
			char why[128];
			bool cause;
			if (p == s->desktop.jail.pid) {
				s->desktop.jail.reaped = true;
				s->desktop.jail.status = st;
				cause = jail_why(st, why, sizeof(why));
			} else if (p == s->worker.pid) {
				s->worker.pid = -1;
				snprintf(why, sizeof(why), "%s", WORKER_ENDED);
				cause = WIFSIGNALED(st);
			} else {
				continue;
			}
			bool other_alive = p == s->desktop.jail.pid ? s->worker.pid > 0
								    : !s->desktop.jail.reaped;
			if (s->end_at) /* the second of the pair: the first's reason unless this one was the cause */
				session_end_told(sp, s, cause ? why : s->end_why);
			else if (cause || !other_alive)
				session_end_told(sp, s, why);
			else {
				s->end_at = dg_now_ms() + DG_SPAWNER_END_PAIR_MS;
				snprintf(s->end_why, sizeof(s->end_why), "%s", why);
			}
			break;
		}
	}
}

int dg_spawner_serve(struct dg_spawner_state *st, const uint8_t *buf, size_t len, int nfds,
		     struct dg_err *err)
{
	/* The decoded message points into buf; an exec runner forked while
	 * serving it has its own copy of both. */
	static struct dg_spawn_msg req;
	struct spawner *sp = &st->sp;
	if (dg_spawn_decode(buf, len, nfds, &req, err) != 0)
		return -EPROTO;
	if (req.type > DG_SPAWN_REQUEST_LAST)
		return dg_err_set(err, -EPROTO, "spawner channel: a %u message where a request was "
				  "due", (unsigned)req.type);
	switch (req.type) {
	case DG_SPAWN_CREATE: op_create(sp, &req); break;
	case DG_SPAWN_DESTROY: op_destroy(sp, &req); break;
	case DG_SPAWN_EXEC: op_exec(sp, &req); break;
	case DG_SPAWN_POOL: op_pool(sp, &req); break;
	case DG_SPAWN_EGRESS: op_egress(sp, &req); break;
	case DG_SPAWN_UPLOAD_CHECK: op_upload_check(sp, &req); break;
	case DG_SPAWN_STARTED: op_started(sp, &req); break;
	default: return dg_err_set(err, -EPROTO, "not reached"); /* decoding refused it */
	}
	return sp->broken ? dg_err_set(err, -EPIPE, "spawner channel: a reply was not sent") : 0;
}

static void handle(struct dg_spawner_state *st)
{
	struct spawner *sp = &st->sp;
	static char buf[DG_SEQ_MAX + 1];
	int fds[DG_SEQ_FDS_MAX], nfds;
	size_t len;
	struct dg_err err = {{0}};
	int r = dg_seq_recv(sp->fd, buf, sizeof(buf), &len, fds, &nfds, &err);
	if (r == 0)
		return;
	if (r < 0) {
		/* The gateway went away or broke the datagram protocol. */
		if (r != -EPIPE)
			fprintf(stderr, "deskgate spawner: %s; ending every session\n", err.msg);
		end_all_and_exit(sp, r == -EPIPE ? 0 : 1);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]); /* no request carries descriptors: decoding refuses any */
	r = dg_spawner_serve(st, (const uint8_t *)buf, len, nfds, &err);
	if (r == -EPROTO)
		fprintf(stderr, "deskgate spawner: %s; ending every session\n", err.msg);
	if (r != 0)
		end_all_and_exit(sp, 1);
}

static int real_egress_spawn(pid_t previous, struct dg_egress *e, struct dg_err *err)
{
	if (previous > 0) {
		kill(previous, SIGKILL);
		waitpid(previous, NULL, 0);
		fprintf(stderr, "deskgate spawner: killed the previous egress proxy (pid %d)\n",
			(int)previous);
	}
	return dg_egress_spawn(e, err);
}

static const struct dg_spawner_fx real_fx = {
	.send = dg_seq_send,
	.desktop_start = dg_desktop_start,
	.desktop_destroy = dg_desktop_destroy,
	.worker_start = dg_worker_start,
	.worker_stop = dg_worker_stop,
	.egress_spawn = real_egress_spawn,
	.exec_start = real_exec_start,
	.upload_check = dg_desktop_upload_check,
	.desktop_cap_cpu = dg_desktop_cap_cpu,
};

struct dg_spawner_state *dg_spawner_state_new(int fd, bool verbose, const struct dg_spawner_fx *fx)
{
	struct dg_spawner_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->sp.fd = fd;
	st->sp.sigfd = -1;
	st->sp.verbose = verbose;
	st->sp.fx = fx;
	st->sp.egress.pid = -1;
	st->sp.egress.fd = -1;
	return st;
}

void dg_spawner_state_free(struct dg_spawner_state *st)
{
	if (!st)
		return;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		if (st->sp.sessions[i].used)
			session_end(&st->sp, &st->sp.sessions[i]);
	}
	free(st);
}

__attribute__((noreturn)) static void spawner_main(int fd, bool verbose)
{
	static struct dg_spawner_state st;
	struct spawner *sp = &st.sp;
	sp->fd = fd;
	sp->fx = &real_fx;
	sp->verbose = verbose;
	sp->egress.pid = -1;
	sp->egress.fd = -1;
	struct dg_err err = {{0}};
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sp->sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	if (sp->sigfd < 0 || dg_seccomp_prepare(&err) != 0)
		_exit(1);
	bool more = false;
	for (;;) {
		struct pollfd p[2] = {{sp->fd, POLLIN, 0}, {sp->sigfd, POLLIN, 0}};
		/* The next start's CPU quota due, or the next session end awaited
		 * (end_pair_overdue), whichever comes first. */
		long long cap = cap_overdue(sp), pair = end_pair_overdue(sp);
		long long due = pair && (!cap || pair < cap) ? pair : cap;
		if (sp->broken) /* a session it ended could not be told */
			end_all_and_exit(sp, 1);
		long long wait = -1;
		if (more)
			wait = 0;
		else {
			/* The pool's next start is due (or a spurious wake-up
			 * when it is full: pool_refill starts nothing then). */
			long long at = sp->pool.retry_at > sp->pool.refill_at ? sp->pool.retry_at
									       : sp->pool.refill_at;
			if (at > dg_now_ms())
				wait = at - dg_now_ms();
			if (due) {
				long long left = due > dg_now_ms() ? due - dg_now_ms() : 0;
				if (wait < 0 || left < wait)
					wait = left;
			}
		}
		if (poll(p, 2, (int)wait) < 0 && errno != EINTR)
			_exit(1);
		if (p[1].revents) {
			reap(sp);
			if (sp->broken) /* an ended session could not be told */
				end_all_and_exit(sp, 1);
		}
		if (p[0].revents)
			handle(&st);
		/* One warm desktop per turn, only when no request waits. */
		more = !(p[0].revents & POLLIN) && pool_refill(sp);
		if (!more && (p[0].revents & POLLIN))
			more = true; /* look again at the pool after the requests */
	}
}

int dg_spawner_start(struct dg_spawner *sp, bool verbose, struct dg_err *err)
{
	int sv[2];
	memset(sp, 0, sizeof(*sp));
	sp->fd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return dg_err_set(err, -errno, "spawner: socketpair: %s", strerror(errno));
	pid_t parent = getpid();
	pid_t p = fork();
	if (p < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return dg_err_set(err, -e, "spawner: fork: %s", strerror(e));
	}
	if (p == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		prctl(PR_SET_NAME, "deskgate-spawn");
		int keep = sv[1];
		if (keep != 3 && dup2(keep, 3) < 0)
			_exit(1);
		syscall(SYS_close_range, 4, ~0u, 0);
		spawner_main(3, verbose);
	}
	close(sv[1]);
	sp->pid = p;
	sp->fd = sv[0];
	return 0;
}
