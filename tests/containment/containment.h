/* Shared by the containment tests (issue #2, "What it must show").
 *
 * Every probe of cli/probe.c runs twice:
 *  - in a jail (`deskgate exec`, the probe's bytes on stdin): the test
 *    asserts CONTAINED and that the jail left nothing behind;
 *  - as the CONTROL, on the host as root (sometimes inside the probe's own
 *    `ns` harness: a private mount namespace, or a network namespace whose lo
 *    carries the "outside" addresses): the test asserts LEAKED, which proves
 *    the probe can see the leak it looks for. When the host itself blocks the
 *    call (the kernel lacks it, a sysctl forbids it), the control fails and
 *    says so: such a control proves nothing, and that must not pass quietly.
 *
 * The probes whose calls depend on the kernel's build or configuration
 * (cli/probe.c, "Kernel refusals": kexec, modules, x32, int 0x80, bpf, ...)
 * use the kernel-aware pair instead: control_leaked_or_kernel accepts the
 * host control's KERNEL (the kernel refuses the call to root too, with the
 * reason), and jail_contained_or_kernel runs that control first and hands
 * its results to the jail run, which must then be CONTAINED, or KERNEL when
 * the host control was (never LEAKED, never a quiet pass). Both branch on
 * what the host control measured, so they hold on kernels with and without
 * the call.
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

/* What is wrong with a control's verdict v (line its verdict line), in
 * why; empty when it is what the control wants: LEAKED, or also KERNEL when
 * kernel_ok. A control that could not run, or that the HOST refused
 * (CONTAINED; KERNEL when not kernel_ok), cannot show the probe detecting a
 * leak. */
static inline void control_problem(const char *probe, int v, const char *line,
				   const struct dg_run *r, bool kernel_ok, char *why, size_t len)
{
	why[0] = '\0';
	if (v == 2 || v < 0)
		snprintf(why, len, "control %s could not run: %s\n(exit %d, stderr: %.*s)", probe,
			 line[0] ? line : "(no verdict line)", r->exit_code, SHOW, r->err);
	else if (v == 0)
		snprintf(why, len, "control %s: the HOST itself refused it, so this control cannot "
			 "show that the probe detects the leak: %s", probe, line);
	else if (v == 3 && !kernel_ok)
		snprintf(why, len, "control %s: the host's kernel itself refuses it (contained by the "
			 "kernel), so this control cannot show that the probe detects the leak: %s",
			 probe, line);
	else if (r->exit_code != (v == 3 ? 3 : 1))
		snprintf(why, len, "control %s: %s but exit %d", probe, line, r->exit_code);
}

/* The probe's argv behind the `ns` harness when ns says so (NULL: none,
 * "ns": a private mount namespace, "ns-net": the network harness too), in
 * full (room for 64). */
static inline void control_argv(const char *ns, const char *const *argv, const char **full)
{
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
}

/* The host control of a probe, run and judged (see control_problem): its
 * verdict (1 LEAKED, 3 KERNEL) and verdict line; when results is not NULL,
 * its RESULT lines as "KEY=TOKEN" (at most HOST_RESULTS_MAX). The run is
 * freed before any assertion fails. */
#define HOST_RESULTS_MAX 32 /* cli/probe.c's DG_PROBE_HOST_MAX */
struct host_results {
	char kv[HOST_RESULTS_MAX][128];
	int n;
};

static inline int control_run(const char *ns, const char *const *envp, int extra_fd,
			      const char *const *argv, bool kernel_ok, char *line, size_t len,
			      struct host_results *results)
{
	const char *full[64];
	control_argv(ns, argv, full);
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(envp, extra_fd, PROBE_TIMEOUT, full, &r), 0);
	int v = dg_test_verdict(r.out, line, len);
	show_run(argv[0], &r);
	if (results) {
		results->n = 0;
		for (const char *p = r.out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
			if (!strncmp(p, "RESULT ", 7) && results->n < HOST_RESULTS_MAX)
				snprintf(results->kv[results->n++], sizeof(results->kv[0]), "%.*s",
					 (int)strcspn(p + 7, "\n"), p + 7);
	}
	char why[SHOW + 10000];
	control_problem(argv[0], v, line, &r, kernel_ok, why, sizeof(why));
	dg_run_free(&r);
	if (why[0])
		cr_assert_fail("%s", why);
	return v;
}

/* Runs probe argv on the host (the control) and asserts LEAKED. ns: NULL to
 * run the probe directly, "ns" for a private mount namespace, "ns-net" for
 * the network harness as well. */
static inline void control_leaked_env(const char *ns, const char *const *envp, int extra_fd,
				      const char *const *argv)
{
	char line[8192];
	control_run(ns, envp, extra_fd, argv, false, line, sizeof(line), NULL);
}

static inline void control_leaked(const char *ns, const char *const *argv)
{
	control_leaked_env(ns, NULL, -1, argv);
}

/* The control of a probe whose calls depend on the kernel: LEAKED (the
 * calls work on this host) or KERNEL (the host's kernel refuses one to root
 * too: then its evidence must give the kernel's reason). */
static inline int control_leaked_or_kernel(const char *ns, const char *const *argv)
{
	char line[8192];
	int v = control_run(ns, NULL, -1, argv, true, line, sizeof(line), NULL);
	if (v == 3) {
		cr_expect(strstr(line, " on the host: "), "control %s: KERNEL without the host's "
			  "reason: %s", argv[0], line);
		cr_log_info("control %s: contained by this host's kernel: %s", argv[0], line);
	}
	return v;
}

/* Runs the host control of a probe whose calls depend on the kernel (as
 * control_leaked_or_kernel; ns as control_leaked's), then the probe in a
 * jail under policy with the control's results (--host-result KEY=TOKEN).
 * Where the control LEAKED (the calls work on this host) the jail must say
 * CONTAINED; where it said KERNEL, CONTAINED (the jail answered otherwise,
 * e.g. the filter's SIGSYS) or KERNEL "as on the host"; never LEAKED or
 * ERROR. Returns the jail's verdict. */
static inline int jail_contained_or_kernel(const char *policy, const char *ns,
					   const char *const *argv)
{
	struct host_results hr;
	char host[8192], line[8192];
	int hv = control_run(ns, NULL, -1, argv, true, host, sizeof(host), &hr);
	const char *full[2 + 2 * HOST_RESULTS_MAX + 32];
	size_t n = 0;
	full[n++] = argv[0];
	for (int i = 0; i < hr.n; i++) {
		full[n++] = "--host-result";
		full[n++] = hr.kv[i];
	}
	for (size_t i = 1; argv[i] && n < sizeof(full) / sizeof(full[0]) - 1; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(dg_test_probe_jail(policy, NULL, -1, PROBE_TIMEOUT, full, &r), 0);
	int v = dg_test_verdict(r.out, line, sizeof(line));
	show_run(argv[0], &r);
	int exit_code = r.exit_code;
	bool timed_out = r.timed_out;
	dg_run_free(&r);
	cr_expect(!timed_out, "jail probe %s did not finish", argv[0]);
	if (hv == 1)
		cr_expect_eq(v, 0, "jail probe %s: the host control LEAKED (%s), so the jail must "
			     "contain it; got: %s", argv[0], host, line[0] ? line : "(no verdict line)");
	else
		cr_expect(v == 0 || (v == 3 && strstr(line, "as on the host without deskgate")),
			  "jail probe %s: the host's kernel refuses it (%s), so the jail must say "
			  "CONTAINED, or KERNEL as on the host; got: %s", argv[0], host,
			  line[0] ? line : "(no verdict line)");
	if (v == 0 || v == 3)
		cr_expect_eq(exit_code, v, "%s but exit %d", line, exit_code);
	if (v == 3)
		cr_log_info("jail probe %s: contained by the kernel: %s", argv[0], line);
	assert_no_leftovers(argv[0]);
	return v;
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
