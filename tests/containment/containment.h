/* Shared by the containment tests (issue #2, "What it must show").
 *
 * Every probe of tests/probes/dg_probe.c runs twice:
 *  - in a jail (`deskgate exec`, the probe's bytes on stdin): the test
 *    asserts CONTAINED and that the jail left nothing behind;
 *  - as the CONTROL, on the host as root (sometimes inside the probe's own
 *    `ns` harness: a private mount namespace, or a network namespace whose lo
 *    carries the "outside" addresses): the test asserts LEAKED, which proves
 *    the probe can see the leak it looks for. When the host itself blocks the
 *    call (the kernel lacks it, a sysctl forbids it), the control fails and
 *    says so: such a control proves nothing, and that must not pass quietly.
 *
 * Tests run one at a time (jobs = 1, see DG_CONTAINMENT_MAIN): several probes
 * measure time or CPU and would disturb each other.
 */
#ifndef DG_CONTAINMENT_H
#define DG_CONTAINMENT_H

#include <criterion/criterion.h>
#include <criterion/options.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_test.h"

/* A NULL-terminated argv literal. */
#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Seconds a single probe run may take before the test gives up on it. */
#define PROBE_TIMEOUT 60.0

/* The stand-ins for the outside world; `dg_probe ns --net` puts them on lo
 * of a throwaway network namespace for the controls. */
#define OUTSIDE_V4 "192.0.2.1"       /* TEST-NET-1 */
#define METADATA_V4 "169.254.169.254" /* cloud metadata service */
#define OUTSIDE_V6 "2001:db8::1"     /* IPv6 documentation prefix */

/* At most this much of a program's output goes into a failure message. */
#define SHOW 3000

static inline void show_run(const char *what, const struct dg_run *r)
{
	cr_log_info("%s: exit %d after %.2f s%s\n--- stdout ---\n%.*s\n--- stderr ---\n%.*s", what,
		    r->exit_code, r->seconds, r->timed_out ? " (killed at the test's deadline)" : "",
		    SHOW, r->out, SHOW, r->err);
}

/* Leftovers seen just before a jail run. The machine is shared (other
 * tests, other developers' jails), so a jail is judged by what is new after
 * its run: what it left behind, not what others did. */
static char leftovers_before[16384];

static inline void leftovers_snapshot(void)
{
	int n = dg_test_leftovers(leftovers_before, sizeof(leftovers_before));
	if (n > 0)
		cr_log_info("%d leftover(s) from others before this run, not counted (first: %.120s)",
			    n, leftovers_before);
}

/* Asserts that the jail run since leftovers_snapshot() left no process,
 * cgroup or slot behind. */
static inline void assert_no_leftovers(const char *after)
{
	char now[16384], fresh[16384] = "";
	dg_test_leftovers(now, sizeof(now));
	int n = 0;
	for (char *item = strtok(now, ";"); item; item = strtok(NULL, ";")) {
		while (*item == ' ')
			item++;
		if (!*item || strstr(leftovers_before, item))
			continue;
		n++;
		size_t l = strlen(fresh);
		snprintf(fresh + l, sizeof(fresh) - l, "%s; ", item);
	}
	cr_assert_eq(n, 0, "%d leftover(s) after %s: %s", n, after, fresh);
}

/* Runs probe argv in a jail under policy (NULL: defaults) and asserts
 * CONTAINED (exit 0) and no leftovers. envp: deskgate's environment (NULL:
 * inherit); extra_fd: leaked into deskgate (-1: none). */
static inline void jail_contained_env(const char *policy, const char *const *envp, int extra_fd,
				      const char *const *argv)
{
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(dg_test_probe_jail(policy, envp, extra_fd, PROBE_TIMEOUT, argv, &r), 0);
	char line[8192];
	int v = dg_test_verdict(r.out, line, sizeof(line));
	show_run(argv[0], &r);
	cr_expect(!r.timed_out, "jail probe %s did not finish", argv[0]);
	cr_expect_eq(v, 0, "jail probe %s: want CONTAINED, got: %s\n(exit %d, stderr: %.*s)", argv[0],
		     line[0] ? line : "(no verdict line)", r.exit_code, SHOW, r.err);
	if (v == 0)
		cr_expect_eq(r.exit_code, 0, "CONTAINED but exit %d", r.exit_code);
	dg_run_free(&r);
	assert_no_leftovers(argv[0]);
}

static inline void jail_contained(const char *policy, const char *const *argv)
{
	jail_contained_env(policy, NULL, -1, argv);
}

/* Fails loudly when a control shows the host itself blocked the call: the
 * kernel lacks it (ENOSYS), a foreign ABI died by a signal other than the
 * filter's, or the host refused it. Such a control cannot show the probe
 * detecting a leak. */
static inline void check_control_line(const char *probe, int v, const char *line,
				      const struct dg_run *r)
{
	if (v == 2 || v < 0)
		cr_assert_fail("control %s could not run: %s\n(exit %d, stderr: %.*s)", probe,
			line[0] ? line : "(no verdict line)", r->exit_code, SHOW, r->err);
	if (v == 0)
		cr_assert_fail("control %s: the HOST itself refused it, so this control cannot show "
			"that the probe detects the leak: %s",
			probe, line);
	/* ENOSYS on the host (a kernel built without kexec, modules or the x32
	 * ABI) still proves the point of the control: the call passed every
	 * filter and reached the kernel's syscall table, which is exactly what
	 * the jail must prevent (there it dies by SIGSYS or gets EPERM). */
	if (strstr(line, "reached the kernel: ENOSYS"))
		cr_log_info("control %s: host kernel lacks the call (ENOSYS) but it was not "
			    "filtered: %s", probe, line);
	if (strstr(line, ": killed by "))
		cr_assert_fail("control %s: on the HOST the call died by a signal, not by reaching the "
			"kernel (e.g. no IA32 emulation): %s",
			probe, line);
}

/* Runs probe argv on the host (the control) and asserts LEAKED. ns: NULL to
 * run the probe directly, "ns" for a private mount namespace, "ns-net" for
 * the network harness as well. */
static inline void control_leaked_env(const char *ns, const char *const *envp, int extra_fd,
				      const char *const *argv)
{
	const char *full[64];
	size_t n = 0;
	if (ns) {
		full[n++] = "ns";
		if (strcmp(ns, "ns-net") == 0)
			full[n++] = "--net";
		full[n++] = "--";
	}
	for (size_t i = 0; argv[i] && n < 63; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(envp, extra_fd, PROBE_TIMEOUT, full, &r), 0);
	char line[8192];
	int v = dg_test_verdict(r.out, line, sizeof(line));
	show_run(argv[0], &r);
	check_control_line(argv[0], v, line, &r);
	cr_expect_eq(r.exit_code, 1, "control %s: LEAKED but exit %d", argv[0], r.exit_code);
	dg_run_free(&r);
}

static inline void control_leaked(const char *ns, const char *const *argv)
{
	control_leaked_env(ns, NULL, -1, argv);
}

/* `deskgate exec [--policy P] -- argv...` with a deadline and stdin. */
static inline void jail_run(const char *policy, const char *const *argv, double timeout_s,
			    struct dg_run *r)
{
	const char *full[64];
	size_t n = 0;
	full[n++] = DG_BIN;
	full[n++] = "exec";
	if (policy) {
		full[n++] = "--policy";
		full[n++] = policy;
	}
	full[n++] = "--";
	for (size_t i = 0; argv[i] && n < 63; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	leftovers_snapshot();
	cr_assert_eq(dg_test_run(full, NULL, NULL, 0, timeout_s, -1, r), 0);
	show_run(argv[0], r);
}

/* A process-unique token for names and secrets. */
static inline const char *test_tag(void)
{
	static char tag[32];
	snprintf(tag, sizeof(tag), "%x", (unsigned)getpid());
	return tag;
}

/* Case-insensitive substring test. */
static inline int mentions(const char *text, const char *word)
{
	return strcasestr(text, word) != NULL;
}

/* main with one job at a time unless --jobs says otherwise. */
#define DG_CONTAINMENT_MAIN                                                                    \
	int main(int argc, char *argv[])                                                       \
	{                                                                                      \
		struct criterion_test_set *tests = criterion_initialize();                      \
		criterion_options.jobs = 1;                                                    \
		int result = 0;                                                                \
		if (criterion_handle_args(argc, argv, true))                                   \
			result = !criterion_run_all_tests(tests);                              \
		criterion_finalize(tests);                                                     \
		return result;                                                                 \
	}

#endif
