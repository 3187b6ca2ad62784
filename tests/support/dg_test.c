#include "dg_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/desktop.h"

extern char **environ;

double dg_test_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void append(char **buf, size_t *len, const char *data, size_t n)
{
	if (*len + n > DG_TEST_OUT_MAX)
		n = DG_TEST_OUT_MAX - *len;
	char *nb = realloc(*buf, *len + n + 1);
	if (!nb)
		abort();
	memcpy(nb + *len, data, n);
	*len += n;
	nb[*len] = '\0';
	*buf = nb;
}

int dg_test_run(const char *const *argv, const char *const *envp, const char *stdin_data,
		size_t stdin_len, double timeout_s, int extra_fd, struct dg_run *r)
{
	int in[2], out[2], err[2];
	memset(r, 0, sizeof(*r));
	r->out = calloc(1, 1);
	r->err = calloc(1, 1);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	double start = dg_test_now();
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		if (extra_fd >= 0)
			fcntl(extra_fd, F_SETFD, 0);
		signal(SIGPIPE, SIG_DFL);
		execve(argv[0], (char *const *)argv, envp ? (char *const *)envp : environ);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	size_t off = 0;
	if (!stdin_data || stdin_len == 0) {
		close(in[1]);
		in[1] = -1;
	} else {
		fcntl(in[1], F_SETFL, O_NONBLOCK);
	}
	int open_fds = 2;
	while (open_fds > 0 || in[1] >= 0) {
		double left = timeout_s - (dg_test_now() - start);
		if (left <= 0) {
			kill(pid, SIGKILL);
			r->timed_out = 1;
			break;
		}
		struct pollfd p[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
		int n = poll(p, 3, (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			break;
		char buf[65536];
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t k = read(p[i].fd, buf, sizeof(buf));
			if (k > 0) {
				if (i == 0)
					append(&r->out, &r->out_len, buf, (size_t)k);
				else
					append(&r->err, &r->err_len, buf, (size_t)k);
			} else if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) {
				close(p[i].fd);
				if (i == 0)
					out[0] = -1;
				else
					err[0] = -1;
				open_fds--;
			}
		}
		if (in[1] >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = write(in[1], stdin_data + off, stdin_len - off);
			if (k > 0)
				off += (size_t)k;
			if (off >= stdin_len || (k < 0 && errno != EAGAIN && errno != EINTR)) {
				close(in[1]);
				in[1] = -1;
			}
		}
	}
	if (out[0] >= 0)
		close(out[0]);
	if (err[0] >= 0)
		close(err[0]);
	if (in[1] >= 0)
		close(in[1]);
	waitpid(pid, &r->status, 0);
	r->seconds = dg_test_now() - start;
	r->exit_code = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
	return 0;
}

void dg_run_free(struct dg_run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

int dg_test_exec(const char *policy_path, const char *const *argv, struct dg_run *r)
{
	const char *full[64];
	int n = 0;
	full[n++] = DG_BIN;
	full[n++] = "exec";
	if (policy_path) {
		full[n++] = "--policy";
		full[n++] = policy_path;
	}
	full[n++] = "--";
	for (int i = 0; argv[i] && n < 63; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	return dg_test_run(full, NULL, NULL, 0, 120, -1, r);
}

char *dg_test_write_tmp(const char *name, const char *text)
{
	char dir[] = "/tmp/dg-test-XXXXXX";
	if (!mkdtemp(dir))
		abort();
	char *path = NULL;
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		abort();
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
	return path;
}

char *dg_test_policy(const char *limits_json)
{
	char *text = NULL;
	if (asprintf(&text, "{\"version\": 1, \"limits\": %s}\n", limits_json) < 0)
		abort();
	char *path = dg_test_write_tmp("policy.json", text);
	free(text);
	return path;
}

/* A process is a leftover when its real uid is in the jail range. */
static int count_jail_processes(char *what, size_t what_len)
{
	int count = 0;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[64];
		snprintf(path, sizeof(path), "/proc/%s", e->d_name);
		struct stat st;
		if (stat(path, &st) == 0 && st.st_uid >= DG_JAIL_ID_BASE &&
		    st.st_uid < DG_JAIL_ID_BASE + DG_JAIL_SLOTS) {
			count++;
			size_t l = strlen(what);
			snprintf(what + l, what_len - l, "process %s (uid %u); ", e->d_name,
				 (unsigned)st.st_uid);
		}
	}
	closedir(d);
	return count;
}

static int count_jail_cgroups(const char *dir, char *what, size_t what_len)
{
	int count = 0;
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "jail-", 5) == 0) {
			count++;
			size_t l = strlen(what);
			snprintf(what + l, what_len - l, "cgroup %s/%s; ", dir, e->d_name);
		}
	}
	closedir(d);
	return count;
}

int dg_test_leftovers(char *what, size_t what_len)
{
	what[0] = '\0';
	int n = count_jail_processes(what, what_len);
	static const char *const dirs[] = {
		"/sys/fs/cgroup/deskgate",        "/sys/fs/cgroup/memory/deskgate",
		"/sys/fs/cgroup/pids/deskgate",   "/sys/fs/cgroup/cpu/deskgate",
		"/sys/fs/cgroup/unified/deskgate",
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		n += count_jail_cgroups(dirs[i], what, what_len);
	return n;
}
