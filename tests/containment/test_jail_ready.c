/* A jail's programs start once its main program is ready (dg_jail_spec
 * wait_ready: a line on DG_JAIL_READY_FD, Xvnc's -displayfd), or, with
 * ready_socket, as soon as that socket accepts a connection, when that
 * comes first (Xvnc listens before it compiles its keymap); the start
 * still returns only after the line, and fails when the main program
 * ends without one. The main program here is a small Python server that
 * listens, waits, then writes its line; the times it and the other
 * program started at are read back from the jail's /tmp. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "dg_test.h"

#define SOCKET "/tmp/ready.sock"
#define STR_(x) #x
#define STR(x) STR_(x)

static struct dg_policy policy;
static char server_src[1024];

/* The main program: listens on SOCKET, notes the time, after `delay_s`
 * writes its ready line (or exits without one when `line` is false). */
static const char *const *server(double delay_s, bool line)
{
	snprintf(server_src, sizeof(server_src),
		 "import os, socket, time\n"
		 "s = socket.socket(socket.AF_UNIX)\n"
		 "s.bind('" SOCKET "'); s.listen(8)\n"
		 "time.sleep(%.2f)\n"
		 "open('/tmp/line', 'w').write(repr(time.time()))\n"
		 "%s\n"
		 "time.sleep(60)\n",
		 delay_s, line ? "os.write(" STR(DG_JAIL_READY_FD) ", b'0\\n')" : "raise SystemExit(0)");
	static const char *argv[] = {"/usr/bin/python3", "-c", server_src, NULL};
	return argv;
}

static const char *const started[] = {
	"/usr/bin/python3", "-c", "import time; open('/tmp/started', 'w').write(repr(time.time()))", NULL};

static int start(struct dg_jail *j, const char *const *main_argv, const char *ready_socket,
		 struct dg_err *err)
{
	dg_policy_default(&policy);
	struct dg_jail_prog progs[2] = {
		{.argv = main_argv, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1},
		{.argv = started, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1},
	};
	struct dg_jail_spec spec = {.limits = &policy.limits, .progs = progs, .n_progs = 2,
				    .wait_ready = true, .ready_socket = ready_socket};
	return dg_jail_start(&spec, j, err);
}

/* A file of the jail's /tmp holding a time, read with a command entered
 * into the jail; 0 when it is not there (after up to 5 s). */
static double time_in(struct dg_jail *j, const char *name)
{
	char script[128];
	snprintf(script, sizeof(script), "for i in $(seq 50); do [ -s /tmp/%s ] && break; sleep 0.1; done; "
		 "cat /tmp/%s 2>/dev/null; true", name, name);
	const char *const argv[] = {"/bin/sh", "-c", script, NULL};
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = -1, .stdout_fd = out[1], .stderr_fd = -1};
	pid_t pid;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_jail_enter(j, &prog, &policy.limits, &pid, &err), 0, "enter: %s", err.msg);
	close(out[1]);
	char buf[64] = "";
	size_t len = 0;
	struct pollfd p = {out[0], POLLIN, 0};
	while (len < sizeof(buf) - 1 && poll(&p, 1, 10000) > 0) {
		ssize_t k = read(out[0], buf + len, sizeof(buf) - 1 - len);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(out[0]);
	int st;
	waitpid(pid, &st, 0);
	return strtod(buf, NULL);
}

Test(jail_ready, the_programs_start_once_the_socket_listens, .timeout = 60)
{
	struct dg_jail j;
	struct dg_err err = {{0}};
	double t0 = dg_test_now();
	cr_assert_eq(start(&j, server(1.0, true), SOCKET, &err), 0, "start: %s", err.msg);
	double took = dg_test_now() - t0;
	cr_expect_geq(took, 0.9, "the start returned %.2f s in, before the ready line", took);
	double line = time_in(&j, "line"), began = time_in(&j, "started");
	cr_assert(line > 0 && began > 0, "times: line %f, started %f", line, began);
	cr_expect_lt(began, line - 0.5, "the program started %.2f s after the line, not on the socket",
		     began - line);
	dg_jail_destroy(&j);
}

Test(jail_ready, without_a_socket_the_programs_wait_for_the_line, .timeout = 60)
{
	struct dg_jail j;
	struct dg_err err = {{0}};
	cr_assert_eq(start(&j, server(0.5, true), NULL, &err), 0, "start: %s", err.msg);
	double line = time_in(&j, "line"), began = time_in(&j, "started");
	cr_assert(line > 0 && began > 0, "times: line %f, started %f", line, began);
	cr_expect_gt(began, line, "the program started %.2f s before the line", line - began);
	dg_jail_destroy(&j);
}

Test(jail_ready, a_server_that_listens_then_ends_without_its_line_fails_the_start, .timeout = 60)
{
	struct dg_jail j;
	struct dg_err err = {{0}};
	int r = start(&j, server(0.3, false), SOCKET, &err);
	cr_expect_eq(r, -ECHILD, "start: %d (%s)", r, err.msg);
	cr_expect(strstr(err.msg, "ended before it was ready"), "message: %s", err.msg);
}
