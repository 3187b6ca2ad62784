/* Programs run in turn (dg_jail_prog.in_turn, spawner.h): one after another
 * beside the jail's other programs, each once the one before exited 0; the
 * first that fails or cannot run ends the turn and nothing else; the start
 * does not wait for them; they get no descriptors. What a browser desktop
 * sets its screen's refresh rate with (three xrandr commands). Each jail's
 * main program sleeps; the commands in turn append to a file in the jail's
 * /tmp, read back with dg_jail_enter. */
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

static struct dg_policy policy;
static const char *const sleeper[] = {"/bin/sleep", "60", NULL};
static const char *const truth[] = {"/bin/true", NULL};

#define SH(script) ((const char *const[]){"/bin/sh", "-c", script, NULL})
#define IN_TURN(av) ((struct dg_jail_prog){.argv = (av), .stdin_fd = -1, .stdout_fd = -1, \
					    .stderr_fd = -1, .in_turn = true})

static int start(struct dg_jail *j, struct dg_jail_prog *progs, int n, struct dg_err *err)
{
	dg_policy_default(&policy);
	progs[0] = (struct dg_jail_prog){.argv = sleeper, .stdin_fd = -1, .stdout_fd = -1,
					 .stderr_fd = -1};
	struct dg_jail_spec spec = {.limits = &policy.limits, .progs = progs, .n_progs = n};
	return dg_jail_start(&spec, j, err);
}

/* /tmp/turn in the jail, read with a command entered into it ("" when the
 * file is not there). */
static char *turn_file(struct dg_jail *j)
{
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	const char *const argv[] = {"/bin/sh", "-c", "cat /tmp/turn 2>/dev/null; true", NULL};
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = -1, .stdout_fd = out[1], .stderr_fd = -1};
	struct dg_limits lim = policy.limits;
	lim.exec_desktop = 1;
	pid_t pid;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_jail_enter(j, &prog, &lim, &pid, &err), 0, "enter: %s", err.msg);
	close(out[1]);
	char *buf = calloc(1, 4097);
	size_t len = 0;
	for (;;) {
		struct pollfd p = {out[0], POLLIN, 0};
		if (poll(&p, 1, 10000) <= 0)
			break;
		ssize_t k = read(out[0], buf + len, 4096 - len);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(out[0]);
	int st;
	waitpid(pid, &st, 0);
	return buf;
}

/* Polls /tmp/turn until it reads `want` or `seconds` pass; returns what it
 * read last. */
static char *turn_file_until(struct dg_jail *j, const char *want, double seconds)
{
	double t0 = dg_test_now();
	for (;;) {
		char *s = turn_file(j);
		if (strcmp(s, want) == 0 || dg_test_now() - t0 > seconds)
			return s;
		free(s);
		usleep(50 * 1000);
	}
}

/* Once the turn is over (`settle_ms` after it could have gone on): the
 * file still reads `want`, the jail lives on; then the jail is ended. */
static void expect_turn_over(struct dg_jail *j, const char *want, int settle_ms, const char *what)
{
	usleep((useconds_t)settle_ms * 1000);
	char *s = turn_file(j);
	cr_expect_str_eq(s, want, "%s: \"%s\"", what, s);
	free(s);
	cr_expect_eq(dg_jail_try_reap(j), 0, "the jail ended with its turn");
	dg_jail_destroy(j);
}

Test(jail_turn, commands_run_one_after_another_beside_the_main_program, .timeout = 60)
{
	/* Run at once, the shortest sleep would write first: "3 2 1". */
	struct dg_jail_prog progs[4];
	progs[1] = IN_TURN(SH("sleep 0.6; echo 1 >> /tmp/turn"));
	progs[2] = IN_TURN(SH("sleep 0.3; echo 2 >> /tmp/turn"));
	progs[3] = IN_TURN(SH("echo 3 >> /tmp/turn"));
	struct dg_jail j;
	struct dg_err err = {{0}};
	double t0 = dg_test_now();
	cr_assert_eq(start(&j, progs, 4, &err), 0, "start: %s", err.msg);
	double started = dg_test_now() - t0;
	/* The start returns once every program exec'd, not when the turn ends. */
	cr_expect_lt(started, 0.6, "the start waited %.2f s, for the commands in turn", started);
	char *s = turn_file_until(&j, "1\n2\n3\n", 10);
	cr_expect_str_eq(s, "1\n2\n3\n", "in turn: \"%s\"", s);
	free(s);
	dg_jail_destroy(&j);
}

Test(jail_turn, the_first_that_fails_ends_the_turn_and_nothing_else, .timeout = 60)
{
	struct dg_jail_prog progs[5];
	progs[1] = IN_TURN(SH("echo 1 >> /tmp/turn"));
	progs[2] = IN_TURN(SH("echo 2 >> /tmp/turn; exit 3"));
	progs[3] = IN_TURN(SH("echo 3 >> /tmp/turn"));
	/* Not in turn: started with the main program whatever the turn does. */
	progs[4] = (struct dg_jail_prog){.argv = SH("sleep 0.3; echo beside >> /tmp/turn"),
					 .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1};
	struct dg_jail j;
	struct dg_err err = {{0}};
	cr_assert_eq(start(&j, progs, 5, &err), 0, "start: %s", err.msg);
	char *s = turn_file_until(&j, "1\n2\nbeside\n", 10);
	cr_expect_str_eq(s, "1\n2\nbeside\n", "after a failure: \"%s\"", s);
	free(s);
	expect_turn_over(&j, "1\n2\nbeside\n", 500, "the third ran after the second failed");
}

Test(jail_turn, a_command_that_cannot_run_ends_the_turn_not_the_start, .timeout = 60)
{
	struct dg_jail_prog progs[3];
	progs[1] = IN_TURN(((const char *const[]){"/usr/bin/deskgate-no-such-command", NULL}));
	progs[2] = IN_TURN(SH("echo ran >> /tmp/turn"));
	struct dg_jail j;
	struct dg_err err = {{0}};
	cr_assert_eq(start(&j, progs, 3, &err), 0, "start: %s", err.msg);
	expect_turn_over(&j, "", 700, "a command ran after one that could not");
}

Test(jail_turn, commands_in_turn_get_no_descriptors_and_are_never_first, .timeout = 30)
{
	struct dg_jail_prog progs[2];
	struct dg_jail j;
	struct dg_err err = {{0}};
	progs[1] = IN_TURN(truth);
	progs[1].stdout_fd = 2;
	cr_expect_eq(start(&j, progs, 2, &err), -EINVAL, "stdout given to a command in turn");
	cr_expect(strstr(err.msg, "runs in turn"), "message: %s", err.msg);
	progs[1] = IN_TURN(truth);
	int fds[1] = {0};
	progs[1].pass_fds = fds;
	progs[1].n_pass_fds = 1;
	cr_expect_eq(start(&j, progs, 2, &err), -EINVAL, "a descriptor passed to a command in turn");
	/* progs[0] in turn: the main program is what the jail lives with. */
	dg_policy_default(&policy);
	struct dg_jail_prog first = IN_TURN(sleeper);
	struct dg_jail_spec spec = {.limits = &policy.limits, .progs = &first, .n_progs = 1};
	cr_expect_eq(dg_jail_start(&spec, &j, &err), -EINVAL, "the main program in turn");
}

Test(jail_turn, at_most_DG_JAIL_PROGS_MAX_programs, .timeout = 30)
{
	struct dg_jail j;
	struct dg_err err = {{0}};
	/* The most programs a jail takes, DG_JAIL_PROGS_MAX, and one more. */
	struct dg_jail_prog many[DG_JAIL_PROGS_MAX + 1];
	for (int i = 1; i <= DG_JAIL_PROGS_MAX; i++)
		many[i] = IN_TURN(truth);
	cr_expect_eq(start(&j, many, DG_JAIL_PROGS_MAX + 1, &err), -EINVAL, "%d programs",
		     DG_JAIL_PROGS_MAX + 1);
	cr_assert_eq(start(&j, many, DG_JAIL_PROGS_MAX, &err), 0, "%d programs: %s",
		     DG_JAIL_PROGS_MAX, err.msg);
	dg_jail_destroy(&j);
}
