/* `deskgate exec`: one command in one fresh jail, its streams relayed.
 *
 * stdin is copied into the jail through a pipe (never the caller's own
 * descriptor, which could be a terminal or a host file the jail could
 * reopen); stdout and stderr are copied out, each cut at output_bytes: past
 * the cap the pipe is closed, so a flooding writer gets EPIPE/SIGPIPE and the
 * relay costs nothing more. The wall clock is exec_seconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"

#define DG_EXEC_BUF 65536
#define DG_EXEC_STATUS_TIMEOUT 124
#define DG_EXEC_STATUS_KILLED 137
#define DG_EXEC_STATUS_FAILED 125

struct stream {
	int fd;            /* our end; -1 once closed */
	int out;           /* where it goes (for outputs) */
	const char *name;
	uint64_t relayed;
	bool cut;
};

struct input {
	int src, dst;      /* host stdin -> jail pipe; -1 once closed */
	char buf[DG_EXEC_BUF];
	size_t len, off;
};

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static void pump_output(struct stream *s, uint64_t cap)
{
	char buf[DG_EXEC_BUF];
	ssize_t k = read(s->fd, buf, sizeof(buf));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		dg_close_fd(&s->fd);
		return;
	}
	size_t n = (size_t)k;
	if (s->relayed + n > cap) {
		n = (size_t)(cap - s->relayed);
		s->cut = true;
	}
	/* A caller that stopped reading our output does not stop the relay. */
	if (n > 0)
		write_all(s->out, buf, n);
	s->relayed += n;
	if (s->cut)
		dg_close_fd(&s->fd);
}

static void pump_input(struct input *in, short src_ev, short dst_ev)
{
	if (in->len == in->off && in->src >= 0 && (src_ev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t k = read(in->src, in->buf, sizeof(in->buf));
		if (k > 0) {
			in->len = (size_t)k;
			in->off = 0;
		} else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
			in->src = -1; /* not ours to close */
		}
	}
	if (in->dst >= 0 && in->len > in->off && (dst_ev & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t k = write(in->dst, in->buf + in->off, in->len - in->off);
		if (k > 0)
			in->off += (size_t)k;
		else if (k < 0 && errno != EINTR && errno != EAGAIN)
			dg_close_fd(&in->dst); /* the command closed its stdin */
	}
	if (in->dst >= 0 && in->src < 0 && in->len == in->off)
		dg_close_fd(&in->dst);
}

/* Runs the relay until init has exited and both outputs reached EOF (or were
 * cut), or the deadline passes. Returns true when the deadline ended it. */
static bool relay(struct dg_jail *j, struct input *in, struct stream out[2], uint64_t cap,
		  long long deadline)
{
	for (;;) {
		if (j->reaped && out[0].fd < 0 && out[1].fd < 0)
			return false;
		long long left = deadline - dg_now_ms();
		if (left <= 0)
			return true;
		bool want_src = in->src >= 0 && in->len == in->off;
		bool want_dst = in->dst >= 0 && in->len > in->off;
		struct pollfd p[5] = {
			{want_src ? in->src : -1, POLLIN, 0},
			{want_dst ? in->dst : -1, POLLOUT, 0},
			{out[0].fd, POLLIN, 0},
			{out[1].fd, POLLIN, 0},
			{j->reaped ? -1 : j->pidfd, POLLIN, 0},
		};
		int n = poll(p, 5, left > 1000 ? 1000 : (int)left);
		if (n < 0 && errno != EINTR)
			return false;
		if (n <= 0)
			continue;
		pump_input(in, p[0].revents, p[1].revents);
		for (int i = 0; i < 2; i++) {
			if (out[i].fd >= 0 && p[2 + i].revents)
				pump_output(&out[i], cap);
		}
		if (p[4].revents)
			dg_jail_try_reap(j);
	}
}

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
	char line[DG_ERR_MAX + 128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		write_all(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* Translates how init ended into the status `exec` reports, naming each limit
 * that was hit. */
static int final_status(const struct dg_jail *j, const struct dg_jail_verdict *verdict,
			const struct dg_limits *lim, bool timed_out, const struct stream out[2],
			int errfd)
{
	const struct dg_jail_verdict v = *verdict;
	for (int i = 0; i < 2; i++) {
		if (out[i].cut)
			say(errfd, "deskgate: exec: %s cut at %llu bytes (limits.output_bytes)\n",
			    out[i].name, (unsigned long long)lim->output_bytes);
	}
	if (v.pids_capped)
		say(errfd, "deskgate: exec: process limit of %u reached, forks were refused (limits.pids)\n",
		    lim->pids);
	if (timed_out) {
		say(errfd, "deskgate: exec: wall-clock limit of %u s reached (limits.exec_seconds)\n",
		    lim->exec_seconds);
		return DG_EXEC_STATUS_TIMEOUT;
	}
	int st = j->status;
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (v.oom_killed && code == DG_EXEC_STATUS_KILLED) {
		say(errfd, "deskgate: exec: memory limit of %llu MiB reached, killed (limits.memory_mb)\n",
		    (unsigned long long)lim->memory_mb);
		return DG_EXEC_STATUS_KILLED;
	}
	return code;
}

static int make_pipe(int p[2], int nonblock_end)
{
	if (pipe2(p, O_CLOEXEC) != 0)
		return -errno;
	fcntl(p[nonblock_end], F_SETFL, O_NONBLOCK);
	return 0;
}

int dg_exec_run(const struct dg_limits *lim, const char *const *argv, int stdin_fd, int stdout_fd,
		int stderr_fd)
{
	int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1};
	struct dg_err err = {{0}};
	if (make_pipe(in, 1) || make_pipe(o, 0) || make_pipe(e, 0)) {
		say(stderr_fd, "deskgate: exec: pipe: %s\n", strerror(errno));
		return DG_EXEC_STATUS_FAILED;
	}
	signal(SIGPIPE, SIG_IGN);
	struct dg_jail_prog prog = {
		.argv = argv, .stdin_fd = in[0], .stdout_fd = o[1], .stderr_fd = e[1],
	};
	struct dg_jail_spec spec = {.limits = lim, .progs = &prog, .n_progs = 1};
	struct dg_jail j;
	long long deadline = dg_now_ms() + (long long)lim->exec_seconds * 1000;
	int r = dg_jail_start(&spec, &j, &err);
	dg_close_fd(&in[0]);
	dg_close_fd(&o[1]);
	dg_close_fd(&e[1]);
	if (r) {
		dg_close_fd(&in[1]);
		dg_close_fd(&o[0]);
		dg_close_fd(&e[0]);
		say(stderr_fd, "deskgate: exec: %s\n", err.msg);
		return j.start_exit ? j.start_exit : DG_EXEC_STATUS_FAILED;
	}
	static struct input input;
	input.src = stdin_fd;
	input.dst = in[1];
	input.len = input.off = 0;
	struct stream out[2] = {{o[0], stdout_fd, "stdout", 0, false},
				{e[0], stderr_fd, "stderr", 0, false}};
	bool timed_out = relay(&j, &input, out, lim->output_bytes, deadline);
	if (timed_out)
		dg_jail_kill(&j);
	dg_close_fd(&input.dst);
	dg_close_fd(&out[0].fd);
	dg_close_fd(&out[1].fd);
	/* The cgroup's counters go with it: read them before teardown. */
	struct dg_jail_verdict verdict;
	dg_jail_verdict(&j, &verdict);
	dg_jail_destroy(&j);
	return final_status(&j, &verdict, lim, timed_out, out, stderr_fd);
}
