/* The spawner: the only privileged part of `deskgate serve`.
 *
 * It is forked by `deskgate serve` before the gateway drops its privileges
 * and answers typed requests over a SOCK_SEQPACKET socketpair: create a
 * session (jail, desktop, worker; the worker's channel goes back as a
 * descriptor), destroy one, run an exec in one (the result channel goes back
 * as a descriptor), start the egress proxy (its channel goes back; at start
 * and whenever the gateway saw the last one die). It tells the gateway when
 * a session's desktop ended on its own. It dies with the gateway
 * (PR_SET_PDEATHSIG) and everything it started dies with it.
 * Single-threaded; the gateway is less trusted than the spawner, so every
 * request is checked as if hostile: a malformed one is answered with an
 * error, a broken datagram ends the spawner.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
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
#include "desktop/spawner/spawner.h"

struct session {
	bool used;
	bool warm;                 /* in the pool: started, given to nobody yet */
	char id[DG_SESSION_ID_MAX + 1];
	struct dg_policy limits;   /* .limits only */
	bool strict;
	struct dg_desktop desktop;
	struct dg_worker worker;
};

/* The warm pool: desktops started ahead, fully jailed, each given to one
 * session and never reused. A pool desktop has the pool's size, limits and
 * strictness; a request that asks for anything else starts cold. */
struct pool {
	int want[2];               /* by enum dg_profile */
	struct dg_policy limits;
	bool strict;
	int failures;              /* consecutive failed starts (backs off) */
	long long retry_at;        /* ms: after failures, not before */
};

struct spawner {
	int fd;
	int sigfd;
	bool verbose;
	struct pool pool;
	struct session sessions[DG_SPAWNER_SESSIONS_MAX];
	/* The egress proxy it started last: pid only (its channel is the
	 * gateway's); -1 once reaped. At most one runs. */
	struct dg_egress egress;
};

static void session_end(struct session *s);

/* Ends every session (their jails would die with the spawner anyway; this
 * also removes their cgroups) and exits. */
__attribute__((noreturn)) static void end_all_and_exit(struct spawner *sp, int status)
{
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		if (sp->sessions[i].used)
			session_end(&sp->sessions[i]);
	}
	dg_egress_stop(&sp->egress); /* its channel closed with the gateway: it is ending */
	_exit(status);
}

static void reply(struct spawner *sp, json_t *msg, const int *fds, int nfds)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (!s || dg_seq_send(sp->fd, s, strlen(s), fds, nfds) != 0) {
		/* The gateway is gone or the channel broke: nothing to serve. The
		 * gateway closes the channel when it stops, possibly right after
		 * asking for destroys: the sessions still here must end too. */
		end_all_and_exit(sp, 1);
	}
	free(s);
}

static void reply_error(struct spawner *sp, json_t *req, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void reply_error(struct spawner *sp, json_t *req, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *r = json_pack("{s:O?, s:b, s:s}", "req", json_object_get(req, "req"), "ok", 0,
			      "error", msg);
	reply(sp, r, NULL, 0);
}

static struct session *find(struct spawner *sp, const char *id)
{
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX; i++) {
		if (sp->sessions[i].used && strcmp(sp->sessions[i].id, id) == 0)
			return &sp->sessions[i];
	}
	return NULL;
}

static void session_end(struct session *s)
{
	dg_worker_stop(&s->worker);
	dg_desktop_destroy(&s->desktop);
	s->used = false;
}

/* Limits come as the policy's own "limits" object and go through the policy
 * loader, so the spawner enforces the same bounds whatever the gateway says. */
static int parse_limits(json_t *limits, struct dg_policy *p, struct dg_err *err)
{
	json_t *doc = json_pack("{s:i, s:O}", "version", DG_POLICY_VERSION, "limits", limits);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!text)
		return dg_err_set(err, -EINVAL, "limits missing or not an object");
	int r = dg_policy_parse(text, strlen(text), "session limits", p, err);
	free(text);
	return r;
}

/* Gives session s to the gateway: the worker's channel and the egress
 * listener go back with the reply; the spawner keeps only the pids. */
static void hand_over(struct spawner *sp, json_t *req, struct session *s, const char *id,
		      long long start_ms, bool warm)
{
	json_t *r = json_pack("{s:O?, s:b, s:s, s:i, s:I, s:b}", "req", json_object_get(req, "req"),
			      "ok", 1, "session", id, "slot", (int)s->desktop.jail.slot,
			      "start_ms", (json_int_t)start_ms, "warm", warm);
	int fds[2] = {s->worker.ctl, s->desktop.jail.egress_fd};
	reply(sp, r, fds, 2);
	close(s->worker.ctl);
	s->worker.ctl = -1;
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
		    memcmp(&s->limits.limits, lim, sizeof(*lim)) == 0)
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
	if (dg_now_ms() < pl->retry_at)
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
		dg_policy_copy(&s->limits, &pl->limits);
		struct dg_desktop_spec spec = {.profile = (enum dg_profile)prof,
					       .width = DG_DESKTOP_WIDTH_DEFAULT,
					       .height = DG_DESKTOP_HEIGHT_DEFAULT,
					       .limits = &s->limits.limits,
					       .log_to_stderr = sp->verbose,
					       .strict = pl->strict,
					       .egress = true};
		struct dg_err err = {{0}};
		if (dg_desktop_start(&spec, &s->desktop, &err) != 0 ||
		    dg_worker_start(&s->desktop.io, &s->worker, &err) != 0) {
			if (s->desktop.jail.pid > 0 || s->desktop.jail.cgroup)
				dg_desktop_destroy(&s->desktop);
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
		s->strict = pl->strict;
		return true;
	}
	return false;
}

/* {"op":"pool","xterm":N,"browser":N,"limits":{...},"strict":B}: the pool's
 * sizes and what its desktops are started with. Smaller sizes do not end
 * warm desktops already started; they are used first. */
static void op_pool(struct spawner *sp, json_t *req)
{
	json_t *x = json_object_get(req, "xterm"), *b = json_object_get(req, "browser");
	struct dg_err err = {{0}};
	if (!json_is_integer(x) || !json_is_integer(b) || json_integer_value(x) < 0 ||
	    json_integer_value(b) < 0 || json_integer_value(x) > DG_SPAWNER_POOL_MAX ||
	    json_integer_value(b) > DG_SPAWNER_POOL_MAX)
		return reply_error(sp, req, "pool: xterm and browser must be integers 0..%d",
				   DG_SPAWNER_POOL_MAX);
	struct dg_policy lim;
	if (parse_limits(json_object_get(req, "limits"), &lim, &err) != 0)
		return reply_error(sp, req, "pool: %s", err.msg);
	dg_policy_free(&sp->pool.limits);
	sp->pool.limits = lim;
	sp->pool.strict = json_is_true(json_object_get(req, "strict"));
	sp->pool.want[DG_PROFILE_XTERM] = (int)json_integer_value(x);
	sp->pool.want[DG_PROFILE_BROWSER] = (int)json_integer_value(b);
	sp->pool.failures = 0;
	sp->pool.retry_at = 0;
	reply(sp, json_pack("{s:O?, s:b}", "req", json_object_get(req, "req"), "ok", 1), NULL, 0);
}

static void op_create(struct spawner *sp, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "session"));
	const char *profile = json_string_value(json_object_get(req, "profile"));
	json_t *w = json_object_get(req, "width"), *h = json_object_get(req, "height");
	struct dg_err err = {{0}};
	enum dg_profile prof;
	if (!id || !dg_session_id_valid(id) || find(sp, id))
		return reply_error(sp, req, "create: bad or duplicate session id");
	if (!profile || dg_profile_parse(profile, &prof) != 0)
		return reply_error(sp, req, "create: unknown profile");
	if (!json_is_integer(w) || !json_is_integer(h))
		return reply_error(sp, req, "create: width and height must be integers");
	struct session *s = NULL;
	for (int i = 0; i < DG_SPAWNER_SESSIONS_MAX && !s; i++) {
		if (!sp->sessions[i].used)
			s = &sp->sessions[i];
	}
	if (!s)
		return reply_error(sp, req, "create: all %d session slots are in use",
				   DG_SPAWNER_SESSIONS_MAX);
	memset(s, 0, sizeof(*s));
	if (parse_limits(json_object_get(req, "limits"), &s->limits, &err) != 0)
		return reply_error(sp, req, "create: %s", err.msg);
	bool strict = json_is_true(json_object_get(req, "strict"));
	struct session *ws = pool_take(sp, prof, (int)json_integer_value(w), (int)json_integer_value(h),
				       &s->limits.limits, strict);
	if (ws) {
		dg_policy_free(&s->limits);
		snprintf(ws->id, sizeof(ws->id), "%s", id);
		ws->warm = false;
		hand_over(sp, req, ws, id, 0, true);
		return;
	}
	struct dg_desktop_spec spec = {
		.profile = prof,
		.width = (int)json_integer_value(w),
		.height = (int)json_integer_value(h),
		.limits = &s->limits.limits,
		.log_to_stderr = sp->verbose,
		.strict = json_is_true(json_object_get(req, "strict")),
		.egress = true,
	};
	long long t0 = dg_now_ms();
	if (dg_desktop_start(&spec, &s->desktop, &err) != 0)
		return reply_error(sp, req, "create: starting the desktop: %s", err.msg);
	if (dg_worker_start(&s->desktop.io, &s->worker, &err) != 0) {
		dg_desktop_destroy(&s->desktop);
		return reply_error(sp, req, "create: starting the worker: %s", err.msg);
	}
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->used = true;
	s->strict = strict;
	hand_over(sp, req, s, id, dg_now_ms() - t0, false);
}

static void op_destroy(struct spawner *sp, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "session"));
	struct session *s = id ? find(sp, id) : NULL;
	if (!s)
		return reply_error(sp, req, "destroy: no such session");
	session_end(s);
	reply(sp, json_pack("{s:O?, s:b, s:s}", "req", json_object_get(req, "req"), "ok", 1,
			    "session", id),
	      NULL, 0);
}

/* {"op":"egress"}: a new egress proxy, its channel to the gateway. The
 * request carries nothing: the proxy's options were fixed before this
 * process was forked (dg_egress_configure). A proxy started earlier that
 * still runs is killed first: the gateway asks only once it lost that one's
 * channel, and two proxies must never serve the same listeners. */
static void op_egress(struct spawner *sp, json_t *req)
{
	if (sp->egress.pid > 0) {
		kill(sp->egress.pid, SIGKILL);
		waitpid(sp->egress.pid, NULL, 0);
		fprintf(stderr, "deskgate spawner: killed the previous egress proxy (pid %d)\n",
			(int)sp->egress.pid);
		sp->egress.pid = -1;
	}
	struct dg_err err = {{0}};
	struct dg_egress e;
	if (dg_egress_spawn(&e, &err) != 0)
		return reply_error(sp, req, "egress: %s", err.msg);
	sp->egress.pid = e.pid;
	sp->egress.fd = -1;
	int fd = e.fd;
	reply(sp, json_pack("{s:O?, s:b, s:i}", "req", json_object_get(req, "req"), "ok", 1, "pid",
			    (int)e.pid),
	      &fd, 1);
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

/* Output as a JSON string: invalid UTF-8 becomes U+FFFD. */
static json_t *text_json(const char *p, size_t n)
{
	json_t *j = json_stringn(p, n);
	if (j)
		return j;
	char *out = malloc(n * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; out && i < n;) {
		size_t l = 1;
		unsigned char c = (unsigned char)p[i];
		if (c >= 0xc2 && c <= 0xf4)
			l = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		json_t *t = i + l <= n && l > 1 ? json_stringn(p + i, l) : NULL;
		if (c < 0x80 && c != 0) {
			out[o++] = (char)c;
		} else if (t) {
			memcpy(out + o, p + i, l);
			o += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			l = 1;
		}
		json_decref(t);
		i += l;
	}
	j = out ? json_stringn(out, o) : json_string("");
	free(out);
	return j;
}

/* The exec runner: a child of the spawner serving one exec. It starts the
 * program in the session's jail, feeds stdin, collects output (each stream
 * capped), enforces the wall clock and writes one JSON result to result_fd. */
__attribute__((noreturn)) static void run_exec(struct session *s, json_t *req, int result_fd)
{
	struct dg_err err = {{0}};
	json_t *argv_j = json_object_get(req, "argv");
	const char *stdin_data = json_string_value(json_object_get(req, "stdin"));
	size_t stdin_len = json_string_length(json_object_get(req, "stdin"));
	long long timeout = json_integer_value(json_object_get(req, "timeout_ms"));
	const struct dg_limits *lim = &s->limits.limits;
	long long cap_ms = (long long)lim->exec_seconds * 1000;
	if (timeout <= 0 || timeout > cap_ms)
		timeout = cap_ms;
	size_t argc = json_array_size(argv_j);
	const char **argv = calloc(argc + 1, sizeof(*argv));
	for (size_t i = 0; argv && i < argc; i++)
		argv[i] = json_string_value(json_array_get(argv_j, i));
	int in[2], out[2], errp[2];
	if (!argv || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(errp, O_CLOEXEC))
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
	int r = dg_jail_enter(&s->desktop.jail, &prog, lim, &sup, &err);
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	json_t *res;
	if (r) {
		res = json_pack("{s:b, s:i, s:s}", "ok", 0, "exit_code",
				r == -ENOENT ? 127 : r == -EACCES ? 126 : 125, "error", err.msg);
	} else {
		struct capture o = {out[0], malloc(lim->output_bytes), 0, lim->output_bytes, false};
		struct capture e = {errp[0], malloc(lim->output_bytes), 0, lim->output_bytes, false};
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
		res = json_pack("{s:b, s:i, s:o, s:o, s:b, s:b, s:b, s:I}", "ok", 1, "exit_code",
				timed_out ? 124 : code, "stdout", text_json(o.buf, o.len), "stderr",
				text_json(e.buf, e.len), "stdout_truncated", o.truncated,
				"stderr_truncated", e.truncated, "timed_out", timed_out, "duration_ms",
				(json_int_t)(dg_now_ms() - t0));
	}
	char *text = json_dumps(res, JSON_COMPACT);
	if (text) {
		size_t n = strlen(text), done = 0;
		while (done < n) {
			ssize_t k = write(result_fd, text + done, n - done);
			if (k <= 0 && errno != EINTR)
				break;
			if (k > 0)
				done += (size_t)k;
		}
	}
	close(result_fd);
	/* Reap what was reparented to this process (see op_exec). */
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
		;
	_exit(0);
}

static bool exec_request_valid(json_t *req, char *why, size_t n)
{
	json_t *argv = json_object_get(req, "argv");
	if (!json_is_array(argv) || json_array_size(argv) < 1 ||
	    json_array_size(argv) > DG_EXEC_ARGV_MAX) {
		snprintf(why, n, "argv must be 1 to %d strings", DG_EXEC_ARGV_MAX);
		return false;
	}
	for (size_t i = 0; i < json_array_size(argv); i++) {
		json_t *a = json_array_get(argv, i);
		if (!json_is_string(a) || json_string_length(a) > DG_EXEC_ARG_MAX ||
		    strlen(json_string_value(a)) != json_string_length(a) ||
		    (i == 0 && json_string_length(a) == 0)) {
			snprintf(why, n, "argv[%zu] is not a usable string", i);
			return false;
		}
	}
	json_t *in = json_object_get(req, "stdin");
	if (in && (!json_is_string(in) || json_string_length(in) > DG_EXEC_STDIN_MAX)) {
		snprintf(why, n, "stdin must be a string of at most %d bytes", DG_EXEC_STDIN_MAX);
		return false;
	}
	json_t *t = json_object_get(req, "timeout_ms");
	if (t && !json_is_integer(t)) {
		snprintf(why, n, "timeout_ms must be an integer");
		return false;
	}
	return true;
}

static void op_exec(struct spawner *sp, json_t *req)
{
	const char *id = json_string_value(json_object_get(req, "session"));
	struct session *s = id ? find(sp, id) : NULL;
	char why[128];
	if (!s)
		return reply_error(sp, req, "exec: no such session");
	if (!exec_request_valid(req, why, sizeof(why)))
		return reply_error(sp, req, "exec: %s", why);
	int res[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, res) != 0)
		return reply_error(sp, req, "exec: socketpair: %s", strerror(errno));
	pid_t p = fork();
	if (p < 0) {
		close(res[0]);
		close(res[1]);
		return reply_error(sp, req, "exec: fork: %s", strerror(errno));
	}
	if (p == 0) {
		close(res[0]);
		close(sp->fd);
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
		run_exec(s, req, res[1]);
	}
	close(res[1]);
	reply(sp, json_pack("{s:O?, s:b, s:s}", "req", json_object_get(req, "req"), "ok", 1,
			    "session", id),
	      &res[0], 1);
	close(res[0]);
}

/* ---- the loop ------------------------------------------------------------- */

/* Reaps children: a session whose jail init or worker ended is over. */
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
			const char *what = NULL;
			char why[128];
			if (p == s->desktop.jail.pid) {
				s->desktop.jail.reaped = true;
				s->desktop.jail.status = st;
				/* init ends with its main program, the X server, and
				 * passes on how it ended. */
				if (WIFEXITED(st) && WEXITSTATUS(st) > 128)
					snprintf(why, sizeof(why), "the desktop ended: its X server (Xvnc) "
						 "was killed by signal %d", WEXITSTATUS(st) - 128);
				else if (WIFEXITED(st))
					snprintf(why, sizeof(why), "the desktop ended: its X server (Xvnc) "
						 "exited with status %d", WEXITSTATUS(st));
				else
					snprintf(why, sizeof(why), "the desktop ended: its init was killed "
						 "by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
				what = why;
			} else if (p == s->worker.pid) {
				s->worker.pid = -1;
				what = "the desktop's worker ended";
			}
			if (!what)
				continue;
			char id[sizeof(s->id)];
			snprintf(id, sizeof(id), "%s", s->id);
			bool warm = s->warm;
			session_end(s);
			if (warm) /* nobody's yet: the pool starts another */
				break;
			reply(sp, json_pack("{s:s, s:s, s:s}", "event", "ended", "session", id, "reason",
					    what),
			      NULL, 0);
			break;
		}
	}
}

static void handle(struct spawner *sp)
{
	char *buf = malloc(DG_SEQ_MAX + 1);
	int fds[DG_SEQ_FDS_MAX], nfds;
	size_t len;
	struct dg_err err = {{0}};
	int r = buf ? dg_seq_recv(sp->fd, buf, DG_SEQ_MAX + 1, &len, fds, &nfds, &err) : -ENOMEM;
	if (r == 0) {
		free(buf);
		return;
	}
	if (r < 0) {
		/* The gateway went away or broke the protocol. */
		end_all_and_exit(sp, r == -EPIPE ? 0 : 1);
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]); /* the gateway sends no descriptors */
	json_t *req = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	free(buf);
	const char *op = json_string_value(json_object_get(req, "op"));
	if (!op) {
		reply_error(sp, req, "a request must be a JSON object with an op");
		json_decref(req);
		return;
	}
	if (strcmp(op, "create") == 0)
		op_create(sp, req);
	else if (strcmp(op, "destroy") == 0)
		op_destroy(sp, req);
	else if (strcmp(op, "exec") == 0)
		op_exec(sp, req);
	else if (strcmp(op, "pool") == 0)
		op_pool(sp, req);
	else if (strcmp(op, "egress") == 0)
		op_egress(sp, req);
	else
		reply_error(sp, req, "unknown op");
	json_decref(req);
}

__attribute__((noreturn)) static void spawner_main(int fd, bool verbose)
{
	static struct spawner sp;
	sp.fd = fd;
	sp.verbose = verbose;
	sp.egress.pid = -1;
	sp.egress.fd = -1;
	struct dg_err err = {{0}};
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sp.sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	if (sp.sigfd < 0 || dg_seccomp_prepare(&err) != 0)
		_exit(1);
	bool more = false;
	for (;;) {
		struct pollfd p[2] = {{sp.fd, POLLIN, 0}, {sp.sigfd, POLLIN, 0}};
		long long wait = -1;
		if (more)
			wait = 0;
		else if (sp.pool.retry_at > dg_now_ms())
			wait = sp.pool.retry_at - dg_now_ms();
		if (poll(p, 2, (int)wait) < 0 && errno != EINTR)
			_exit(1);
		if (p[1].revents)
			reap(&sp);
		if (p[0].revents)
			handle(&sp);
		/* One warm desktop per turn, only when no request waits. */
		more = !(p[0].revents & POLLIN) && pool_refill(&sp);
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
