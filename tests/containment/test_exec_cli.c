/* `deskgate exec` as a user meets it: exit statuses, bad input, and nothing
 * left behind, also when deskgate itself is killed with SIGKILL. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "dg_test.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void assert_nothing_left(void)
{
	char what[4096];
	/* Teardown is synchronous, but the kernel reaps a killed pid namespace
	 * asynchronously: allow it a moment. */
	int n = 0;
	for (int i = 0; i < 100; i++) {
		n = dg_test_leftovers(what, sizeof(what));
		if (n == 0)
			break;
		usleep(10000);
	}
	cr_assert_eq(n, 0, "left behind: %s", what);
}

static void run(const char *policy, const char *const *argv, struct dg_run *r)
{
	cr_assert_eq(dg_test_exec(policy, argv, r), 0);
}

Test(exec_cli, exit_status_is_the_commands_own)
{
	struct dg_run r;
	run(NULL, ARGV("/bin/sh", "-c", "exit 7"), &r);
	cr_assert_eq(r.exit_code, 7, "exit %d, stderr: %s", r.exit_code, r.err);
	dg_run_free(&r);
	run(NULL, ARGV("/bin/sh", "-c", "kill -TERM $$"), &r);
	cr_assert_eq(r.exit_code, 128 + SIGTERM, "exit %d", r.exit_code);
	dg_run_free(&r);
	assert_nothing_left();
}

Test(exec_cli, stdin_passes_through_and_path_lookup_works)
{
	const char *argv[] = {DG_BIN, "exec", "--", "tr", "a-z", "A-Z", NULL};
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, "hello jail\n", 11, 60, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
	cr_assert_str_eq(r.out, "HELLO JAIL\n");
	dg_run_free(&r);
}

Test(exec_cli, missing_command_is_127_with_its_name)
{
	struct dg_run r;
	run(NULL, ARGV("/no/such/program"), &r);
	cr_assert_eq(r.exit_code, 127, "exit %d, stderr: %s", r.exit_code, r.err);
	cr_assert(strstr(r.err, "/no/such/program") && strstr(r.err, "No such file"),
		  "stderr: %s", r.err);
	dg_run_free(&r);
	run(NULL, ARGV("no-such-program-anywhere"), &r);
	cr_assert_eq(r.exit_code, 127, "exit %d, stderr: %s", r.exit_code, r.err);
	dg_run_free(&r);
	assert_nothing_left();
}

Test(exec_cli, non_executable_is_126)
{
	struct dg_run r;
	run(NULL, ARGV("/etc/hostname"), &r);
	cr_assert_eq(r.exit_code, 126, "exit %d, stderr: %s", r.exit_code, r.err);
	cr_assert(strstr(r.err, "/etc/hostname"), "stderr: %s", r.err);
	dg_run_free(&r);
	assert_nothing_left();
}

Test(exec_cli, unknown_flag_is_a_usage_error)
{
	struct dg_run r;
	cr_assert_eq(dg_test_run(ARGV(DG_BIN, "exec", "--frobnicate", "--", "/bin/true"), NULL, NULL,
				 0, 30, -1, &r), 0);
	cr_assert_eq(r.exit_code, 2);
	cr_assert(strstr(r.err, "unknown option --frobnicate"), "stderr: %s", r.err);
	dg_run_free(&r);
	cr_assert_eq(dg_test_run(ARGV(DG_BIN, "frobnicate"), NULL, NULL, 0, 30, -1, &r), 0);
	cr_assert_eq(r.exit_code, 2);
	cr_assert(strstr(r.err, "unknown command"), "stderr: %s", r.err);
	dg_run_free(&r);
	assert_nothing_left();
}

Test(exec_cli, no_command_is_a_usage_error)
{
	struct dg_run r;
	cr_assert_eq(dg_test_run(ARGV(DG_BIN, "exec", "--"), NULL, NULL, 0, 30, -1, &r), 0);
	cr_assert_eq(r.exit_code, 2);
	cr_assert(strstr(r.err, "no command"), "stderr: %s", r.err);
	dg_run_free(&r);
	cr_assert_eq(dg_test_run(ARGV(DG_BIN, "exec", "--policy"), NULL, NULL, 0, 30, -1, &r), 0);
	cr_assert_eq(r.exit_code, 2);
	cr_assert(strstr(r.err, "--policy needs a value"), "stderr: %s", r.err);
	dg_run_free(&r);
}

Test(exec_cli, bad_policy_file_names_the_problem)
{
	struct {
		const char *text, *expect;
	} cases[] = {
		{"{\"version\": 1, \"limits\": {\"pids\": 7}}", "limits.pids"},
		{"{\"version\": 1, \"limits\": {\"memroy_mb\": 100}}", "memroy_mb"},
		{"{\"version\": 1, \"limits\": {\"cpus\": \"fast\"}}", "limits.cpus"},
		{"{\"version\": 2}", "version"},
		{"{\"version\": 1,", "invalid JSON"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *path = dg_test_write_tmp("policy.json", cases[i].text);
		struct dg_run r;
		run(path, ARGV("/bin/true"), &r);
		cr_assert_eq(r.exit_code, 2, "%s: exit %d", cases[i].text, r.exit_code);
		cr_assert(strstr(r.err, cases[i].expect) && strstr(r.err, path),
			  "%s: stderr does not name %s and the path: %s", cases[i].text,
			  cases[i].expect, r.err);
		dg_run_free(&r);
		dg_test_rm_tmp(path);
	}
	struct dg_run r;
	run("/no/such/policy.json", ARGV("/bin/true"), &r);
	cr_assert_eq(r.exit_code, 2);
	cr_assert(strstr(r.err, "/no/such/policy.json"), "stderr: %s", r.err);
	dg_run_free(&r);
	assert_nothing_left();
}

/* kill -9 of deskgate while its jail runs: init dies with it (pdeathsig,
 * which ends the pid namespace), and the next start removes the cgroup the
 * dead process could not. */
Test(exec_cli, killed_deskgate_leaves_nothing_after_next_start)
{
	struct dg_proc p;
	const char *argv[] = {DG_BIN, "exec", "--", "/bin/sh", "-c",
			      "sleep 300 & sleep 300 & echo ready; wait", NULL};
	cr_assert_eq(dg_test_start(argv, NULL, NULL, 0, -1, &p), 0);
	cr_assert_eq(dg_test_pump(&p, "ready", 30), 1, "jail never said ready: %s", p.r.err);
	char what[4096];
	cr_assert_gt(dg_test_leftovers(what, sizeof(what)), 0, "a running jail must be visible");
	kill(p.pid, SIGKILL);
	struct dg_run r;
	dg_test_finish(&p, 10, &r);
	dg_run_free(&r);
	/* No jail process may outlive deskgate. */
	double t0 = dg_test_now();
	int procs = 1;
	while (dg_test_now() - t0 < 5) {
		what[0] = '\0';
		dg_test_leftovers(what, sizeof(what));
		procs = strstr(what, "process ") != NULL;
		if (!procs)
			break;
		usleep(10000);
	}
	cr_assert_eq(procs, 0, "jail processes outlived deskgate: %s", what);
	struct dg_run r2;
	run(NULL, ARGV("/bin/true"), &r2);
	cr_assert_eq(r2.exit_code, 0, "stderr: %s", r2.err);
	dg_run_free(&r2);
	assert_nothing_left();
}
