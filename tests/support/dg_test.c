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
		char path[300]; /* d_name is up to 255 bytes */
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

/* ---- Containment probe battery ---- */

const char *dg_test_probe_bytes(size_t *len)
{
	static char *bytes;
	static size_t n;
	if (!bytes) {
		int fd = open(DG_PROBE, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0)
			abort();
		bytes = malloc((size_t)st.st_size);
		if (!bytes)
			abort();
		while (n < (size_t)st.st_size) {
			ssize_t k = read(fd, bytes + n, (size_t)st.st_size - n);
			if (k <= 0)
				abort();
			n += (size_t)k;
		}
		close(fd);
	}
	*len = n;
	return bytes;
}

const char **dg_test_probe_jail_argv(const char *policy_path, const char *const *probe_argv,
				     const char **argv, size_t cap)
{
	size_t n = 0;
	argv[n++] = DG_BIN;
	argv[n++] = "exec";
	if (policy_path) {
		argv[n++] = "--policy";
		argv[n++] = policy_path;
	}
	argv[n++] = "--";
	argv[n++] = "/bin/sh";
	argv[n++] = "-c";
	argv[n++] = DG_TEST_PROBE_SH;
	argv[n++] = "sh";
	for (size_t i = 0; probe_argv[i]; i++) {
		if (n + 1 >= cap)
			abort();
		argv[n++] = probe_argv[i];
	}
	argv[n] = NULL;
	return argv;
}

int dg_test_probe_jail(const char *policy_path, const char *const *envp, int extra_fd,
		       double timeout_s, const char *const *probe_argv, struct dg_run *r)
{
	const char *argv[64];
	size_t len;
	const char *bytes = dg_test_probe_bytes(&len);
	dg_test_probe_jail_argv(policy_path, probe_argv, argv, 64);
	return dg_test_run(argv, envp, bytes, len, timeout_s, extra_fd, r);
}

int dg_test_probe_host(const char *const *envp, int extra_fd, double timeout_s,
		       const char *const *probe_argv, struct dg_run *r)
{
	const char *argv[64];
	size_t n = 0;
	argv[n++] = DG_PROBE;
	for (size_t i = 0; probe_argv[i]; i++) {
		if (n + 1 >= 64)
			abort();
		argv[n++] = probe_argv[i];
	}
	argv[n] = NULL;
	return dg_test_run(argv, envp, NULL, 0, timeout_s, extra_fd, r);
}

int dg_test_verdict(const char *text, char *line, size_t len)
{
	static const char *const words[] = {"CONTAINED ", "LEAKED ", "ERROR "};
	int kind = -1;
	line[0] = '\0';
	const char *p = text;
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t l = eol ? (size_t)(eol - p) : strlen(p);
		for (int i = 0; i < 3; i++)
			if (strncmp(p, words[i], strlen(words[i])) == 0) {
				kind = i;
				snprintf(line, len, "%.*s", (int)l, p);
			}
		p = eol ? eol + 1 : NULL;
	}
	return kind;
}

int dg_test_start(const char *const *argv, const char *const *envp, const char *stdin_data,
		  size_t stdin_len, int extra_fd, struct dg_proc *p)
{
	int in[2], out[2], err[2];
	memset(p, 0, sizeof(*p));
	p->r.out = calloc(1, 1);
	p->r.err = calloc(1, 1);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	p->start = dg_test_now();
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
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
	p->in = in[1];
	p->out = out[0];
	p->err = err[0];
	p->stdin_data = stdin_data;
	p->stdin_len = stdin_data ? stdin_len : 0;
	if (p->stdin_len == 0) {
		close(p->in);
		p->in = -1;
	} else {
		fcntl(p->in, F_SETFL, O_NONBLOCK);
	}
	return 0;
}

/* One round of relaying, waiting at most ms. */
static void proc_relay(struct dg_proc *p, int ms)
{
	struct pollfd f[3] = {{p->out, POLLIN, 0}, {p->err, POLLIN, 0}, {p->in, POLLOUT, 0}};
	if (poll(f, 3, ms) <= 0)
		return;
	char buf[65536];
	for (int i = 0; i < 2; i++) {
		if (f[i].fd < 0 || !(f[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t k = read(f[i].fd, buf, sizeof(buf));
		if (k > 0) {
			if (i == 0)
				append(&p->r.out, &p->r.out_len, buf, (size_t)k);
			else
				append(&p->r.err, &p->r.err_len, buf, (size_t)k);
		} else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(f[i].fd);
			if (i == 0)
				p->out = -1;
			else
				p->err = -1;
		}
	}
	if (p->in >= 0 && (f[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
		ssize_t k = write(p->in, p->stdin_data + p->stdin_off, p->stdin_len - p->stdin_off);
		if (k > 0)
			p->stdin_off += (size_t)k;
		if (p->stdin_off >= p->stdin_len || (k < 0 && errno != EAGAIN && errno != EINTR)) {
			close(p->in);
			p->in = -1;
		}
	}
}

int dg_test_pump(struct dg_proc *p, const char *needle, double timeout_s)
{
	double end = dg_test_now() + timeout_s;
	while (!strstr(p->r.out, needle)) {
		double left = end - dg_test_now();
		if (left <= 0 || (p->out < 0 && p->err < 0))
			return 0;
		proc_relay(p, (int)(left * 1000) + 1);
	}
	return 1;
}

int dg_test_finish(struct dg_proc *p, double timeout_s, struct dg_run *r)
{
	double end = dg_test_now() + timeout_s;
	while (p->out >= 0 || p->err >= 0 || p->in >= 0) {
		double left = end - dg_test_now();
		if (left <= 0) {
			kill(p->pid, SIGKILL);
			p->r.timed_out = 1;
			break;
		}
		proc_relay(p, (int)(left * 1000) + 1);
	}
	if (p->out >= 0)
		close(p->out);
	if (p->err >= 0)
		close(p->err);
	if (p->in >= 0)
		close(p->in);
	p->out = p->err = p->in = -1;
	waitpid(p->pid, &p->r.status, 0);
	p->r.seconds = dg_test_now() - p->start;
	p->r.exit_code = WIFEXITED(p->r.status) ? WEXITSTATUS(p->r.status)
						: 128 + WTERMSIG(p->r.status);
	*r = p->r;
	memset(&p->r, 0, sizeof(p->r));
	return 0;
}

void dg_test_rm_tmp(char *path)
{
	if (!path)
		return;
	unlink(path);
	char *slash = strrchr(path, '/');
	if (slash) {
		*slash = '\0';
		rmdir(path);
	}
	free(path);
}
