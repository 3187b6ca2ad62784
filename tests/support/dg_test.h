/* Helpers shared by deskgate's tests: run a program and capture what it
 * printed, write temporary files, find leftovers. No shell is involved. */
#ifndef DG_TEST_H
#define DG_TEST_H

#include <stddef.h>
#include <sys/types.h>

#define DG_TEST_OUT_MAX (4u * 1024 * 1024)

struct dg_run {
	int status;          /* wait status */
	int exit_code;       /* WEXITSTATUS, or 128+signal */
	char *out;           /* NUL-terminated, malloc'd; at most DG_TEST_OUT_MAX kept */
	size_t out_len;
	char *err;
	size_t err_len;
	double seconds;      /* wall time */
	int timed_out;       /* killed by the test's own deadline */
};

/* Runs argv with envp (NULL: inherit) and stdin from the given bytes (NULL:
 * /dev/null), kills it after timeout_s. extra_fd, when >= 0, is left open
 * (not close-on-exec) in the child to model a leaked descriptor. */
int dg_test_run(const char *const *argv, const char *const *envp, const char *stdin_data,
		size_t stdin_len, double timeout_s, int extra_fd, struct dg_run *r);
void dg_run_free(struct dg_run *r);

/* `deskgate exec [--policy POLICY] -- argv...` with the test's binary. */
int dg_test_exec(const char *policy_path, const char *const *argv, struct dg_run *r);

/* Writes text to a fresh file under a fresh temp dir; returns a malloc'd path. */
char *dg_test_write_tmp(const char *name, const char *text);

/* Writes a policy file with the given limits JSON object text. */
char *dg_test_policy(const char *limits_json);

/* Counts what deskgate left behind: jail cgroups, processes owned by jail
 * uids, slot locks held. Returns a count and writes a description to what. */
int dg_test_leftovers(char *what, size_t what_len);

/* Monotonic seconds. */
double dg_test_now(void);

/* ---- Containment probe battery (tests/probes/dg_probe.c) ---- */

/* The shell line that carries the probe into a jail: the jail cannot see the
 * build directory, so the probe's bytes arrive on stdin, are written to the
 * jail's /tmp (exec allowed there) and run with the remaining arguments. */
#define DG_TEST_PROBE_SH "cat > /tmp/p && chmod 700 /tmp/p && exec /tmp/p \"$@\""

/* The probe binary's bytes, read once (aborts when unreadable). */
const char *dg_test_probe_bytes(size_t *len);

/* Fills argv (room for cap entries, NULL-terminated) with
 * `DG_BIN exec [--policy P] -- /bin/sh -c DG_TEST_PROBE_SH sh PROBE_ARGV...`.
 * Returns argv. */
const char **dg_test_probe_jail_argv(const char *policy_path, const char *const *probe_argv,
				     const char **argv, size_t cap);

/* Runs the probe in a jail (its bytes on stdin). envp: deskgate's
 * environment (NULL: inherit); extra_fd: leaked into deskgate (-1: none). */
int dg_test_probe_jail(const char *policy_path, const char *const *envp, int extra_fd,
		       double timeout_s, const char *const *probe_argv, struct dg_run *r);

/* Runs `DG_PROBE PROBE_ARGV...` on the host: the control. */
int dg_test_probe_host(const char *const *envp, int extra_fd, double timeout_s,
		       const char *const *probe_argv, struct dg_run *r);

/* Finds the probe's final line (CONTAINED/LEAKED/ERROR ...) in text and
 * copies it into line. Returns 0 CONTAINED, 1 LEAKED, 2 ERROR, -1 none. */
int dg_test_verdict(const char *text, char *line, size_t len);

/* A program started in the background, for tests that act while it runs
 * (e.g. time the host while a jail holds a fork bomb). */
struct dg_proc {
	pid_t pid;
	int in, out, err;        /* our ends; -1 once closed */
	const char *stdin_data;  /* borrowed: must outlive the run */
	size_t stdin_len, stdin_off;
	double start;
	struct dg_run r;         /* output so far */
};

/* Starts argv like dg_test_run does, without waiting. */
int dg_test_start(const char *const *argv, const char *const *envp, const char *stdin_data,
		  size_t stdin_len, int extra_fd, struct dg_proc *p);

/* Relays I/O until needle shows in stdout (returns 1), both outputs close or
 * timeout_s passes (returns 0). */
int dg_test_pump(struct dg_proc *p, const char *needle, double timeout_s);

/* Relays I/O to the end (killing the program after timeout_s), reaps it and
 * moves the result into r (free with dg_run_free). */
int dg_test_finish(struct dg_proc *p, double timeout_s, struct dg_run *r);

/* Removes a file made by dg_test_write_tmp/dg_test_policy and its temp
 * directory; frees path. */
void dg_test_rm_tmp(char *path);

#endif
