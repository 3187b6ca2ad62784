/* Two desktops at once cannot see each other: not their X servers (display
 * :0 in each is its own), not their processes, not their files. Each check
 * runs a command inside one desktop's jail with dg_jail_enter, as the exec
 * action does, with limits.exec_desktop set so that the command may reach
 * its own desktop (the control: it does see what lives in its own jail;
 * test_exec_desktop shows exec without it reaches none). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "dg_test.h"

static struct dg_policy policy;

static void start(struct dg_desktop *d, int w, int h)
{
	struct dg_err err = {{0}};
	dg_policy_default(&policy);
	struct dg_desktop_spec spec = {.profile = DG_PROFILE_XTERM, .width = w, .height = h,
				       .limits = &policy.limits};
	cr_assert_eq(dg_desktop_start(&spec, d, &err), 0, "desktop: %s", err.msg);
}

/* Runs sh -c script inside the desktop's jail; returns its stdout. */
static char *run_in(struct dg_desktop *d, const char *script, int *status)
{
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = -1, .stdout_fd = out[1], .stderr_fd = out[1],
				    .env_extra = (const char *const[]){"DISPLAY=:0", NULL}};
	pid_t pid;
	struct dg_err err = {{0}};
	struct dg_limits lim = policy.limits;
	lim.exec_desktop = 1;
	cr_assert_eq(dg_jail_enter(&d->jail, &prog, &lim, &pid, &err), 0, "enter: %s", err.msg);
	close(out[1]);
	size_t cap = 65536, len = 0;
	char *buf = calloc(1, cap + 1);
	for (;;) {
		struct pollfd p = {out[0], POLLIN, 0};
		if (poll(&p, 1, 20000) <= 0)
			break;
		ssize_t k = read(out[0], buf + len, cap - len);
		if (k <= 0)
			break;
		len += (size_t)k;
	}
	close(out[0]);
	waitpid(pid, status, 0);
	return buf;
}

Test(isolation, two_desktops_cannot_see_each_other, .timeout = 120)
{
	struct dg_desktop a, b;
	start(&a, 1024, 768);
	start(&b, 1280, 800);
	int st;
	/* X: each jail's :0 is its own server. */
	char *out = run_in(&a, "xdpyinfo -display :0 | grep dimensions; "
			       "xdpyinfo -display unix:0 | grep dimensions", &st);
	cr_assert(strstr(out, "1024x768"), "desktop A reaches its own X server: %s", out);
	cr_assert_null(strstr(out, "1280x800"), "desktop A reached B's X server: %s", out);
	free(out);
	out = run_in(&b, "xdpyinfo -display :0 | grep dimensions", &st);
	cr_assert(strstr(out, "1280x800") && !strstr(out, "1024x768"), "desktop B: %s", out);
	free(out);
	/* No other display answers inside a jail (B's :0 is not A's :1 either). */
	out = run_in(&a, "for n in 1 2; do xdpyinfo -display :$n >/dev/null 2>&1 && echo reached :$n; done; echo done",
		     &st);
	cr_assert_null(strstr(out, "reached"), "desktop A reached another display: %s", out);
	free(out);

	/* Processes: one Xvnc visible, its own. */
	out = run_in(&a, "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c Xvnc", &st);
	cr_assert_eq(atoi(out), 1, "Xvnc processes visible from A: %s", out);
	free(out);

	/* Files: a file B writes is not in A. */
	out = run_in(&b, "echo secret-of-b > /tmp/b-marker && ls /tmp/b-marker", &st);
	cr_assert(strstr(out, "/tmp/b-marker"), "control: B sees its own file: %s", out);
	free(out);
	out = run_in(&a, "ls /tmp/b-marker 2>&1; cat /tmp/.X11-unix/X0 2>&1 | head -c 0; echo end", &st);
	cr_assert(strstr(out, "No such file"), "A sees B's file: %s", out);
	free(out);

	dg_desktop_destroy(&a);
	dg_desktop_destroy(&b);
	char what[4096];
	int n = 0;
	for (int i = 0; i < 200 && (n = dg_test_leftovers(what, sizeof(what))) != 0; i++)
		usleep(10000);
	cr_assert_eq(n, 0, "left behind: %s", what);
}
