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

#endif
