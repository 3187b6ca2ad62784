/* Containment, edge 5: resource bounds. The policy's limits hold: a fork bomb
 * stops at the pids cap while the host stays responsive, a memory hog is
 * OOM-killed inside the jail's cgroup, a CPU spin is throttled, a sleeper
 * ends at the wall clock, an output flood is cut at the cap, and a daemon
 * dies with the jail. Each limit that ends a run is named on stderr. */
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "containment.h"
#include "desktop/proto/proto.h"

DG_CONTAINMENT_MAIN

extern char **environ;

/* ---- fork bomb: pids 64 ---- */

/* Seconds for one fork+exec of /bin/true on the host. */
static double host_true_seconds(void)
{
	double t0 = dg_test_now();
	pid_t pid;
	char *const argv[] = {"/bin/true", NULL};
	if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0)
		return 1e9;
	int st;
	waitpid(pid, &st, 0);
	return dg_test_now() - t0;
}

Test(resources, forkbomb_jail, .timeout = 120)
{
	char *policy = dg_test_policy("{\"pids\": 64}");
	const char *argv[64];
	size_t len;
	const char *bytes = dg_test_probe_bytes(&len);
	dg_test_probe_jail_argv(policy, ARGV("forkbomb", "64", "2000"), argv, 64);
	leftovers_snapshot();
	struct dg_proc p;
	cr_assert_eq(dg_test_start(argv, NULL, bytes, len, -1, &p), 0);
	int holding = dg_test_pump(&p, "HOLDING", 30);
	/* While the jail holds every pid it may have, the host must still start
	 * processes promptly. */
	double worst = 0;
	for (int i = 0; holding && i < 5; i++) {
		double t = host_true_seconds();
		worst = t > worst ? t : worst;
	}
	struct dg_run r;
	dg_test_finish(&p, 30, &r);
	show_run("forkbomb", &r);
	char line[4096];
	int v = dg_test_verdict(r.out, line, sizeof(line));
	cr_expect(holding, "the probe never reported HOLDING");
	cr_expect_eq(v, 0, "want CONTAINED, got: %s", line);
	cr_expect_lt(worst, 1.0, "host fork+exec of /bin/true took %.3f s during the bomb", worst);
	cr_log_info("host fork+exec of /bin/true during the bomb: worst %.1f ms", worst * 1000);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_leftovers("forkbomb");
}

Test(resources, forkbomb_control) { control_leaked(NULL, ARGV("forkbomb", "64", "200")); }

/* ---- memory hog: memory_mb 64, 128 MiB touched ---- */

Test(resources, memhog_jail, .timeout = 120)
{
	char *policy = dg_test_policy("{\"memory_mb\": 64, \"scratch_mb\": 16}");
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(dg_test_probe_jail(policy, NULL, -1, PROBE_TIMEOUT, ARGV("memhog", "128"), &r),
		     0);
	show_run("memhog", &r);
	char line[4096];
	int v = dg_test_verdict(r.out, line, sizeof(line));
	cr_expect_neq(v, 1, "the hog touched all it asked for: %s", line);
	cr_expect_eq(r.exit_code, 137, "want exit 137 (killed by the memory limit), got %d",
		     r.exit_code);
	cr_expect(mentions(r.err, "memory"), "stderr does not name the memory limit: %.*s", SHOW,
		  r.err);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_leftovers("memhog");
}

Test(resources, memhog_control) { control_leaked(NULL, ARGV("memhog", "128")); }

/* ---- CPU spin: cpus 0.2, 1.5 s of wall time ---- */

Test(resources, cpuspin_jail, .timeout = 60)
{
	char *policy = dg_test_policy("{\"cpus\": 0.2}");
	jail_contained(policy, ARGV("cpuspin", "1500", "0.35"));
	dg_test_rm_tmp(policy);
}

Test(resources, cpuspin_control) { control_leaked(NULL, ARGV("cpuspin", "1500", "0.35")); }

/* ---- priority: the jail below the control plane, for good ---- */

#define STR(x) STR_(x)
#define STR_(x) #x

Test(resources, nice_jail, .timeout = 60)
{
	jail_contained(NULL, ARGV("nice", STR(DG_JAIL_NICE)));
}

Test(resources, nice_control) { control_leaked(NULL, ARGV("nice", STR(DG_JAIL_NICE))); }

/* ---- wall clock: exec_seconds 2 ---- */

Test(resources, wallclock_jail, .timeout = 60)
{
	char *policy = dg_test_policy("{\"exec_seconds\": 2}");
	struct dg_run r;
	jail_run(policy, ARGV("/bin/sleep", "1000"), 20, &r);
	cr_expect(!r.timed_out, "deskgate did not end the sleeper by itself");
	cr_expect_eq(r.exit_code, 124, "want exit 124, got %d", r.exit_code);
	cr_expect_lt(r.seconds, 3.5, "took %.2f s for a 2 s limit", r.seconds);
	cr_expect(mentions(r.err, "wall"), "stderr does not name the wall-clock limit: %.*s", SHOW,
		  r.err);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_leftovers("wallclock");
}

/* Without the jail nothing ends the sleeper: the test's own 3 s deadline
 * must be what stops it. */
Test(resources, wallclock_control, .timeout = 60)
{
	struct dg_run r;
	cr_assert_eq(dg_test_run(ARGV("/bin/sleep", "1000"), NULL, NULL, 0, 3.0, -1, &r), 0);
	show_run("sleep", &r);
	cr_expect(r.timed_out, "sleep 1000 ended by itself on the host after %.2f s", r.seconds);
	dg_run_free(&r);
}

/* ---- output flood: output_bytes 65536, 10x that written ---- */

#define FLOOD_CAP 65536
#define FLOOD_BYTES "655360"

Test(resources, output_flood_yes_jail, .timeout = 60)
{
	char *policy = dg_test_policy("{\"output_bytes\": 65536}");
	struct dg_run r;
	jail_run(policy, ARGV("/usr/bin/yes"), 30, &r);
	cr_expect(!r.timed_out, "`yes` was not stopped");
	cr_expect_leq(r.out_len, FLOOD_CAP, "stdout carried %zu bytes", r.out_len);
	cr_expect(mentions(r.err, "output"), "stderr does not name the output limit: %.*s", SHOW,
		  r.err);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_leftovers("yes");
}

/* The probe's verdict goes to stderr (stdout is what it floods). Inside, it
 * must see its writes fail (or be killed) before all 640 KiB went out. */
Test(resources, output_flood_jail, .timeout = 60)
{
	char *policy = dg_test_policy("{\"output_bytes\": 65536}");
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(
		dg_test_probe_jail(policy, NULL, -1, PROBE_TIMEOUT, ARGV("flood", FLOOD_BYTES), &r), 0);
	show_run("flood", &r);
	char line[4096];
	int v = dg_test_verdict(r.err, line, sizeof(line));
	cr_expect(!r.timed_out);
	cr_expect_leq(r.out_len, FLOOD_CAP, "stdout carried %zu bytes", r.out_len);
	cr_expect_neq(v, 1, "the flood got all its bytes out: %s", line);
	cr_expect(mentions(r.err, "output"), "stderr does not name the output limit: %.*s", SHOW,
		  r.err);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_leftovers("flood");
}

Test(resources, output_flood_control)
{
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(NULL, -1, PROBE_TIMEOUT, ARGV("flood", FLOOD_BYTES), &r), 0);
	show_run("flood", &r);
	char line[4096];
	int v = dg_test_verdict(r.err, line, sizeof(line));
	cr_expect_eq(v, 1, "control flood: want LEAKED, got: %s", line);
	cr_expect_eq(r.out_len, 655360u, "control flood: stdout carried %zu bytes", r.out_len);
	cr_expect_gt(r.out_len, FLOOD_CAP);
	dg_run_free(&r);
}

/* ---- daemon: a setsid double-forked child must die with the jail ---- */

/* Runs `alive TAG` on the host; returns its verdict and line. */
static int alive(const char *tag, char *line, size_t len)
{
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(NULL, -1, PROBE_TIMEOUT, ARGV("alive", tag), &r), 0);
	int v = dg_test_verdict(r.out, line, len);
	dg_run_free(&r);
	return v;
}

/* The daemon keeps stdout and stderr open, as a hostile one would: the jail's
 * end must not wait for it (exec_seconds 10, so the wall clock would show). */
Test(resources, daemon_jail, .timeout = 60)
{
	char tag[40], line[4096];
	snprintf(tag, sizeof(tag), "j%s", test_tag());
	char *policy = dg_test_policy("{\"exec_seconds\": 10}");
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(dg_test_probe_jail(policy, NULL, -1, 30, ARGV("daemon", tag, "60", "keep"), &r),
		     0);
	show_run("daemon", &r);
	int v = dg_test_verdict(r.out, line, sizeof(line));
	cr_expect_eq(v, 1, "the daemon did not start: %s (exit %d)", line, r.exit_code);
	cr_expect_eq(r.exit_code, 1, "want the probe's own exit 1, got %d (124: the jail waited "
				     "for the daemon until the wall clock)",
		     r.exit_code);
	cr_expect_lt(r.seconds, 8.0, "the jail took %.2f s to end", r.seconds);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	v = alive(tag, line, sizeof(line));
	cr_expect_eq(v, 0, "the jail's daemon outlived the jail: %s", line);
	assert_no_leftovers("daemon");
}

Test(resources, daemon_control, .timeout = 60)
{
	char tag[40], line[4096];
	snprintf(tag, sizeof(tag), "c%s", test_tag());
	control_leaked(NULL, ARGV("daemon", tag, "60", "close"));
	int v = alive(tag, line, sizeof(line));
	/* Kill what the control left: every "pid N (" in the line. */
	for (char *p = strstr(line, "pid "); p; p = strstr(p + 4, "pid ")) {
		int pid = atoi(p + 4);
		if (pid > 1)
			kill(pid, SIGKILL);
	}
	cr_expect_eq(v, 1, "control: the daemon did not outlive its parent on the host: %s", line);
	usleep(100000);
	v = alive(tag, line, sizeof(line));
	cr_expect_eq(v, 0, "control: could not clean up the daemon: %s", line);
}
