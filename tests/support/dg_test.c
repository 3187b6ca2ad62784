#include "dg_test.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"

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
	struct dg_proc p;
	memset(r, 0, sizeof(*r));
	int rc = dg_test_start(argv, envp, stdin_data, stdin_len, extra_fd, &p);
	if (rc)
		return rc;
	return dg_test_finish(&p, timeout_s, r);
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

/* ---- This run's instance ------------------------------------------------- */

/* Every test program is its own deskgate instance (DESKGATE_INSTANCE,
 * inherited by every deskgate it starts and read by the jails it starts
 * itself), so that what it counts as left behind is only what it made, with
 * other gateways and test runs on the same host. */
static char test_instance[DG_INSTANCE_MAX + 1];

__attribute__((constructor)) static void test_instance_init(void)
{
	snprintf(test_instance, sizeof(test_instance), "test-%d", (int)getpid());
	setenv(DG_INSTANCE_ENV, test_instance, 1);
	struct dg_err err = {{0}};
	if (dg_instance_set(test_instance, &err) != 0)
		abort();
}

const char *dg_test_instance(void)
{
	return test_instance;
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
	static const char *const words[] = {"CONTAINED ", "LEAKED ", "ERROR ", "KERNEL "};
	int kind = -1;
	line[0] = '\0';
	const char *p = text;
	while (p && *p) {
		const char *eol = strchr(p, '\n');
		size_t l = eol ? (size_t)(eol - p) : strlen(p);
		for (int i = 0; i < 4; i++)
			if (strncmp(p, words[i], strlen(words[i])) == 0) {
				kind = i;
				snprintf(line, len, "%.*s", (int)l, p);
			}
		p = eol ? eol + 1 : NULL;
	}
	return kind;
}

/* envp plus DESKGATE_INSTANCE when it lacks one, so that a deskgate started
 * with a chosen environment is still of this run (called in the child). */
static char *const *with_instance(const char *const *envp)
{
	size_t n = 0;
	bool has = false;
	for (; envp[n]; n++)
		has |= strncmp(envp[n], DG_INSTANCE_ENV "=", strlen(DG_INSTANCE_ENV) + 1) == 0;
	if (has)
		return (char *const *)envp;
	char **out = calloc(n + 2, sizeof(*out));
	if (!out || asprintf(&out[n], DG_INSTANCE_ENV "=%s", test_instance) < 0)
		_exit(127);
	memcpy(out, envp, n * sizeof(*out));
	return out;
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
		execve(argv[0], (char *const *)argv, envp ? with_instance(envp) : environ);
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

static int rm_tree_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

void dg_test_rm_tree(const char *path)
{
	nftw(path, rm_tree_cb, 16, FTW_DEPTH | FTW_PHYS);
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

/* ---- The gateway: `deskgate serve` and clients for it ---- */

#include <arpa/inet.h>
#include <limits.h>
#include <strings.h>
#include <sys/sysmacros.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <png.h>
#include <sys/socket.h>

int dg_test_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int port = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static char *read_file_all(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = calloc(1, 1);
	size_t len = 0;
	if (fd < 0)
		return buf;
	char tmp[65536];
	ssize_t k;
	while ((k = read(fd, tmp, sizeof(tmp))) > 0)
		append(&buf, &len, tmp, (size_t)k);
	close(fd);
	return buf;
}

char *dg_test_serve_log(const struct dg_server *s)
{
	return read_file_all(s->log);
}

/* The environment of the server: ours without DESKGATE_*, plus the tokens. */
static char **serve_env(void)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 4, sizeof(*env));
	if (!env)
		abort();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "DESKGATE_", 9) != 0)
			env[k++] = environ[i];
	}
	env[k++] = "DESKGATE_AGENT_TOKEN=" DG_TEST_AGENT_TOKEN;
	env[k++] = "DESKGATE_VIEWER_TOKEN=" DG_TEST_VIEWER_TOKEN;
	env[k++] = "DESKGATE_ADMIN_TOKEN=" DG_TEST_ADMIN_TOKEN;
	env[k] = NULL;
	return env;
}

static void rm_tree(const char *path)
{
	struct stat st;
	if (lstat(path, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
				continue;
			char sub[PATH_MAX];
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			rm_tree(sub);
		}
		if (d)
			closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

uint32_t dg_test_serve_uid(const struct dg_server *s)
{
	char *log = dg_test_serve_log(s);
	const char *p = strstr(log, "serving on ");
	p = p ? strstr(p, "(instance ") : NULL;
	char name[DG_INSTANCE_MAX + 1] = "";
	if (p)
		sscanf(p, "(instance %32[a-z0-9-],", name);
	free(log);
	if (!name[0]) {
		fprintf(stderr, "dg_test_serve_uid: no \"(instance NAME,\" in %s\n", s->log);
		abort();
	}
	return dg_instance_uid_of(name);
}

static int serve_once(struct dg_server *s, const char *extra, const char *const *args,
		      double timeout_s, char *err, size_t errlen)
{
	s->port = dg_test_free_port();
	FILE *f = fopen(s->config, "w");
	if (!f || s->port <= 0) {
		if (f)
			fclose(f);
		snprintf(err, errlen, "cannot write %s or find a port", s->config);
		return -1;
	}
	fprintf(f, "{\"listen\": \"127.0.0.1:%d\", \"state_dir\": \"%s/state\", "
		   "\"recordings\": \"%s/rec\"%s%s}\n",
		s->port, s->dir, s->dir, extra && extra[0] ? ", " : "", extra ? extra : "");
	fclose(f);
	int logfd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0) {
		snprintf(err, errlen, "open %s: %s", s->log, strerror(errno));
		return -1;
	}
	char **env = serve_env();
	pid_t pid = fork();
	if (pid < 0) {
		close(logfd);
		free(env);
		snprintf(err, errlen, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		signal(SIGPIPE, SIG_DFL);
		const char *argv[64] = {DG_BIN, "serve", "--config", s->config};
		int n = 4;
		for (int i = 0; args && args[i] && n < 63; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		execve(argv[0], (char *const *)argv, env);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(logfd);
	free(env);
	s->pid = pid;
	double end = dg_test_now() + timeout_s;
	for (;;) {
		char *log = dg_test_serve_log(s);
		bool up = strstr(log, "serving on") != NULL;
		int st;
		pid_t w = up ? 0 : waitpid(pid, &st, WNOHANG);
		if (up) {
			free(log);
			s->start_s = dg_test_now();
			return 0;
		}
		if (w == pid || dg_test_now() > end) {
			if (w != pid) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
			}
			s->pid = -1;
			size_t l = strlen(log);
			snprintf(err, errlen, "deskgate serve did not start: %s",
				 l > 1500 ? log + l - 1500 : log);
			int taken = strstr(log, "cannot listen") != NULL;
			free(log);
			return taken ? 1 : -1;
		}
		free(log);
		usleep(20000);
	}
}

int dg_test_serve_start(struct dg_server *s, const char *extra_config, double timeout_s,
			char *err, size_t errlen)
{
	return dg_test_serve_start_args(s, extra_config, NULL, timeout_s, err, errlen);
}

int dg_test_serve_two_sites(struct dg_server *s, const char *extra_config, int allowed_port,
			    int denied_port, double timeout_s, char *err, size_t errlen)
{
	char a1[64], a2[64];
	snprintf(a1, sizeof(a1), "localhost:%d=127.0.0.1:%d", allowed_port, allowed_port);
	snprintf(a2, sizeof(a2), "denied.test:%d=127.0.0.1:%d", denied_port, denied_port);
	const char *args[] = {"--test-resolve", a1, "--test-resolve", a2, NULL};
	return dg_test_serve_start_args(s, extra_config, args, timeout_s, err, errlen);
}

int dg_test_serve_start_args(struct dg_server *s, const char *extra_config,
			     const char *const *args, double timeout_s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->pid = -1;
	snprintf(s->dir, sizeof(s->dir), "/tmp/dg-gw-XXXXXX");
	if (!mkdtemp(s->dir)) {
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		return -1;
	}
	/* The gateway drops to its own uid: it must be able to reach state/
	 * and rec/, which it creates (as root, before dropping) and owns. */
	chmod(s->dir, 0755);
	snprintf(s->config, sizeof(s->config), "%s/config.json", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/serve.log", s->dir);
	int r = 1;
	for (int i = 0; i < 3 && r == 1; i++)
		r = serve_once(s, extra_config, args, timeout_s, err, errlen);
	return r == 0 ? 0 : -1;
}

int dg_test_serve_restart(struct dg_server *s, const char *extra_config, double timeout_s,
			  char *err, size_t errlen)
{
	s->pid = -1;
	int r = 1;
	for (int i = 0; i < 3 && r == 1; i++)
		r = serve_once(s, extra_config, NULL, timeout_s, err, errlen);
	return r == 0 ? 0 : -1;
}

int dg_test_serve_stop(struct dg_server *s, double timeout_s, bool keep)
{
	int st = -1;
	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		double end = dg_test_now() + timeout_s;
		pid_t w;
		while ((w = waitpid(s->pid, &st, WNOHANG)) == 0 && dg_test_now() < end)
			usleep(10000);
		if (w != s->pid) {
			kill(s->pid, SIGKILL);
			waitpid(s->pid, &st, 0);
			st = -1;
		}
		s->pid = -1;
	}
	if (!keep && s->dir[0])
		rm_tree(s->dir);
	return st;
}

/* ppid of pid from /proc/PID/stat (after the comm's closing parenthesis). */
static pid_t ppid_of(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return -1;
	buf[k] = '\0';
	char *p = strrchr(buf, ')');
	int pp = -1;
	if (!p || sscanf(p + 1, " %*c %d", &pp) != 1)
		return -1;
	return pp;
}

int dg_test_children(pid_t pid, pid_t *out, int max)
{
	int n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d)) && n < max) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		if (ppid_of(p) == pid)
			out[n++] = p;
	}
	if (d)
		closedir(d);
	return n;
}

int dg_test_proc_status(pid_t pid, const char *key, char *out, size_t len)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t kl = strlen(key);
	int r = -1;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			const char *v = line + kl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			snprintf(out, len, "%s", v);
			size_t l = strlen(out);
			while (l && (out[l - 1] == '\n' || out[l - 1] == ' '))
				out[--l] = '\0';
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static unsigned real_uid(pid_t pid)
{
	char v[128];
	unsigned uid = 0;
	if (dg_test_proc_status(pid, "Uid", v, sizeof(v)) != 0 || sscanf(v, "%u", &uid) != 1)
		return (unsigned)-1;
	return uid;
}

static bool slot_of_uid(unsigned uid, uint32_t *slot)
{
	if (uid >= DG_JAIL_ID_BASE && uid < DG_JAIL_ID_BASE + DG_JAIL_SLOTS) {
		*slot = uid - DG_JAIL_ID_BASE;
		return true;
	}
	if (uid >= DG_WORKER_ID_BASE && uid < DG_WORKER_ID_BASE + DG_JAIL_SLOTS) {
		*slot = uid - DG_WORKER_ID_BASE;
		return true;
	}
	return false;
}

int dg_test_slots_under(pid_t root, uint32_t *slots, int max)
{
	static struct dg_test_procs procs; /* large: not on the stack */
	dg_test_procs_under(root, &procs);
	int n = 0;
	for (int k = 0; k < procs.n; k++) {
		bool seen = false;
		for (int i = 0; i < n; i++)
			seen |= slots[i] == procs.slot[k];
		if (!seen && n < max)
			slots[n++] = procs.slot[k];
	}
	return n;
}

int dg_test_slot_lock_share(pid_t root, uint32_t slot)
{
	char suffix[48];
	snprintf(suffix, sizeof(suffix), "/slots/%u.lock", (unsigned)slot);
	size_t sl = strlen(suffix);
	/* The holder is root's child, the spawner (desktop/spawner/jail.c). */
	pid_t cand[64];
	int nc = dg_test_children(root, cand, 64);
	int failed = 0; /* the first pidfd call's error, if any */
	for (int c = 0; c < nc; c++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)cand[c]);
		DIR *d = opendir(dir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char link[PATH_MAX + 64], target[PATH_MAX];
			snprintf(link, sizeof(link), "%s/%s", dir, e->d_name);
			ssize_t n = readlink(link, target, sizeof(target) - 1);
			if (n < (ssize_t)sl)
				continue;
			target[n] = '\0';
			if (strcmp(target + n - (ssize_t)sl, suffix) != 0)
				continue;
			int pidfd = (int)syscall(SYS_pidfd_open, cand[c], 0);
			if (pidfd < 0) {
				failed = failed ? failed : -errno;
				continue;
			}
			int fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(e->d_name), 0);
			int err = errno;
			close(pidfd);
			if (fd >= 0) {
				closedir(d);
				return fd;
			}
			failed = failed ? failed : -err;
			fprintf(stderr, "dg_test: pidfd_getfd %s: %s\n", link, strerror(err));
		}
		if (d)
			closedir(d);
	}
	return failed ? failed : -ENOENT;
}

void dg_test_procs_under(pid_t root, struct dg_test_procs *out)
{
	out->n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d)) && out->n < DG_TEST_PROCS_MAX) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		uint32_t slot;
		if (!slot_of_uid(real_uid(p), &slot))
			continue;
		/* Is root an ancestor? (bounded walk: pids can be reused) */
		bool under = false;
		pid_t a = p;
		for (int depth = 0; depth < 64 && a > 1 && !under; depth++) {
			a = ppid_of(a);
			under = a == root;
		}
		if (under) {
			out->pid[out->n] = p;
			out->slot[out->n++] = slot;
		}
	}
	if (d)
		closedir(d);
}

/* A new process of a slot that had none before is the new session's at
 * once. A new process of a slot that had some is taken only once it has
 * been the only kind for DG_TEST_REUSED_SLOT_S: an ended session's slot
 * reused while its last processes go, not a running session's child. */
#define DG_TEST_REUSED_SLOT_S 1.0
int dg_test_new_slot(pid_t root, const struct dg_test_procs *before, double timeout_s,
		     uint32_t *slot, char *err, size_t errlen)
{
	static struct dg_test_procs now; /* large: not on the stack */
	double end = dg_test_now() + timeout_s, reused_since = 0;
	uint32_t reused = 0;
	for (;;) {
		dg_test_procs_under(root, &now);
		bool any_reused = false;
		for (int i = 0; i < now.n; i++) {
			bool old_pid = false, old_slot = false;
			for (int k = 0; k < before->n; k++) {
				old_pid |= before->pid[k] == now.pid[i];
				old_slot |= before->slot[k] == now.slot[i];
			}
			if (old_pid)
				continue;
			if (!old_slot) {
				*slot = now.slot[i];
				return 0;
			}
			if (!any_reused && reused_since == 0)
				reused_since = dg_test_now(), reused = now.slot[i];
			any_reused = true;
		}
		if (!any_reused)
			reused_since = 0;
		else if (dg_test_now() - reused_since >= DG_TEST_REUSED_SLOT_S) {
			*slot = reused;
			return 0;
		}
		if (dg_test_now() >= end)
			break;
		usleep(50000);
	}
	snprintf(err, errlen, "no new jail process under pid %d: %d processes of slots under it, "
			      "%d before", (int)root, now.n, before->n);
	return -1;
}

/* The pid holding the flock of a jail slot (from /proc/locks, which reads
 * without touching the lock), 0 when free, -1 when unknown. */
static pid_t slot_lock_holder(uint32_t slot)
{
	const char *d = getenv("DESKGATE_RUN_DIR");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/slots/%u.lock", d && d[0] == '/' ? d : DG_RUN_DIR_DEFAULT,
		 (unsigned)slot);
	struct stat st;
	if (stat(path, &st) != 0)
		return 0;
	FILE *f = fopen("/proc/locks", "re");
	if (!f)
		return -1;
	char line[256];
	pid_t holder = 0;
	while (!holder && fgets(line, sizeof(line), f)) {
		char kind[16];
		int pid;
		unsigned maj, min;
		unsigned long ino;
		if (sscanf(line, "%*d: %15s %*s %*s %d %x:%x:%lu", kind, &pid, &maj, &min, &ino) == 5 &&
		    strcmp(kind, "FLOCK") == 0 && ino == (unsigned long)st.st_ino &&
		    maj == major(st.st_dev) && min == minor(st.st_dev))
			holder = pid;
	}
	fclose(f);
	return holder;
}

static bool descends_from(pid_t p, pid_t root)
{
	for (int depth = 0; depth < 64 && p > 1; depth++) {
		if (p == root)
			return true;
		p = ppid_of(p);
	}
	return p == root;
}

/* The jail-cgroup hierarchies a leftover can be in (v2 at the root or at
 * unified/, v1 per controller). */
static const char *const cgroup_roots[] = {
	"/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/cpu",
	"/sys/fs/cgroup/unified",
};

/* The instance a slot lock names (its holder's, or its last holder's). */
static void slot_lock_instance(uint32_t slot, char *out, size_t len)
{
	const char *d = getenv("DESKGATE_RUN_DIR");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/slots/%u.lock", d && d[0] == '/' ? d : DG_RUN_DIR_DEFAULT,
		 (unsigned)slot);
	out[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* The instance of a jail or worker process: the deskgate/<instance>/ group
 * it is in (jails), else its "--instance X" argument (workers), else its
 * slot lock's (a jail's init before it is moved into its group). "" when
 * none says. */
static void process_instance(pid_t p, uint32_t slot, char *out, size_t len)
{
	char path[64];
	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)p);
	char *cg = read_file_all(path);
	const char *at = strstr(cg, "/deskgate/");
	if (at) {
		/* deskgate/<instance>/jail-N, or the flat deskgate/jail-N of a
		 * deskgate from before instances: not this run's either way. */
		at += strlen("/deskgate/");
		size_t n = strcspn(at, "/\n");
		if (strncmp(at, "jail-", 5) != 0 && n < len) {
			memcpy(out, at, n);
			out[n] = '\0';
		}
		free(cg);
		return;
	}
	free(cg);
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)p);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char args[4096];
		ssize_t n = read(fd, args, sizeof(args) - 1);
		close(fd);
		for (ssize_t i = 0; n > 0 && i < n;) {
			const char *a = args + i;
			size_t l = strnlen(a, (size_t)(n - i));
			if (strcmp(a, "--instance") == 0 && i + (ssize_t)l + 1 < n) {
				snprintf(out, len, "%s", a + l + 1);
				return;
			}
			i += (ssize_t)l + 1;
		}
	}
	slot_lock_instance(slot, out, len);
}

struct leftover_filter {
	bool one_slot;     /* only this slot's */
	uint32_t slot;
	pid_t ours;        /* with one_slot: a slot held by a process outside this tree
			    * is another jail's now (ours <= 0: held by anyone) */
	bool live_only;    /* skip zombies */
	bool stale_only;   /* only what no live jail owns: the slot's lock is free */
};

static void describe(char *what, size_t what_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void describe(char *what, size_t what_len, const char *fmt, ...)
{
	size_t l = strlen(what);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what + l, what_len - l, fmt, ap);
	va_end(ap);
}

/* Exited, not reaped (or gone). */
static bool is_dead(pid_t p)
{
	char state[64];
	return dg_test_proc_status(p, "State", state, sizeof(state)) != 0 || state[0] == 'Z' ||
	       state[0] == 'X';
}

/* The one scan behind every dg_test_leftovers*: processes of jail or
 * worker uids and jail cgroups, of this run's instance only, narrowed by f. */
static int scan_leftovers(const struct leftover_filter *f, char *what, size_t what_len)
{
	what[0] = '\0';
	if (f->one_slot) {
		pid_t holder = slot_lock_holder(f->slot);
		if (holder > 0 && (f->ours <= 0 || !descends_from(holder, f->ours)))
			return 0;
	}
	int count = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		/* The owner of /proc/PID as well as the real uid: a worker is
		 * not dumpable between its uid change and its exec. */
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s", e->d_name);
		struct stat st;
		unsigned uid = real_uid(p);
		uint32_t slot;
		if (!slot_of_uid(uid, &slot) && !(stat(path, &st) == 0 && slot_of_uid(st.st_uid, &slot)))
			continue;
		if ((f->one_slot && slot != f->slot) || (f->stale_only && slot_lock_holder(slot) != 0))
			continue;
		char inst[DG_INSTANCE_MAX + 2];
		/* A dead process whose parent is the host's init or dead too was
		 * orphaned (a killed spawner's jail: its init, then what init had
		 * not reaped) and waits for the host's init to reap it: it holds
		 * nothing but its pid, no cgroup says whose it was, and its slot
		 * may be another jail's by now. */
		if (is_dead(p) && (f->live_only || ppid_of(p) == 1 || is_dead(ppid_of(p))))
			continue;
		process_instance(p, slot, inst, sizeof(inst));
		if (strcmp(inst, test_instance) != 0)
			continue;
		count++;
		describe(what, what_len, "process %d (uid %u, slot %u); ", (int)p, uid, (unsigned)slot);
	}
	if (d)
		closedir(d);
	for (size_t i = 0; i < sizeof(cgroup_roots) / sizeof(cgroup_roots[0]); i++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/deskgate/%s", cgroup_roots[i], test_instance);
		DIR *c = opendir(dir);
		while (c && (e = readdir(c))) {
			unsigned slot;
			char extra;
			if (sscanf(e->d_name, "jail-%u%c", &slot, &extra) != 1 ||
			    (f->one_slot && slot != f->slot) ||
			    (f->stale_only && slot_lock_holder(slot) != 0))
				continue;
			count++;
			describe(what, what_len, "cgroup %s/%s; ", dir, e->d_name);
		}
		if (c)
			closedir(c);
	}
	return count;
}

int dg_test_slot_cgroups(uint32_t slot, char *what, size_t what_len)
{
	what[0] = '\0';
	int n = 0;
	for (size_t i = 0; i < sizeof(cgroup_roots) / sizeof(cgroup_roots[0]); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/deskgate/%s/jail-%u", cgroup_roots[i], test_instance,
			 (unsigned)slot);
		if (access(path, F_OK) == 0) {
			describe(what, what_len, "%s; ", path);
			n++;
		}
	}
	return n;
}

int dg_test_leftovers(char *what, size_t what_len)
{
	struct leftover_filter f = {0};
	return scan_leftovers(&f, what, what_len);
}

int dg_test_leftovers_slot(uint32_t slot, pid_t ours, char *what, size_t what_len)
{
	struct leftover_filter f = {.one_slot = true, .slot = slot, .ours = ours};
	return scan_leftovers(&f, what, what_len);
}

int dg_test_leftovers_slot_live(uint32_t slot, pid_t ours, char *what, size_t what_len)
{
	struct leftover_filter f = {.one_slot = true, .slot = slot, .ours = ours, .live_only = true};
	return scan_leftovers(&f, what, what_len);
}

int dg_test_leftovers_stale(char *what, size_t what_len)
{
	struct leftover_filter f = {.stale_only = true};
	return scan_leftovers(&f, what, what_len);
}

pid_t dg_test_find_process(const char *comm, uid_t uid)
{
	pid_t found = -1;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		char v[64];
		if (dg_test_proc_status(p, "Name", v, sizeof(v)) == 0 && strcmp(v, comm) == 0 &&
		    real_uid(p) == uid)
			found = p;
	}
	if (d)
		closedir(d);
	return found;
}

/* ---- HTTP over a raw socket ---- */

int dg_test_tcp_connect(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

void dg_http_free(struct dg_http *r)
{
	free(r->head);
	free(r->body);
	r->head = r->body = NULL;
}

int dg_test_http_raw(int port, const char *req, size_t len, double timeout_s, struct dg_http *r)
{
	memset(r, 0, sizeof(*r));
	r->head = calloc(1, 1);
	r->body = calloc(1, 1);
	int fd = dg_test_tcp_connect(port);
	if (fd < 0)
		return -1;
	double end = dg_test_now() + timeout_s;
	size_t off = 0;
	while (off < len) {
		ssize_t k = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (k <= 0) {
			close(fd);
			return -1;
		}
		off += (size_t)k;
	}
	char *buf = calloc(1, 1);
	size_t blen = 0;
	long long content_length = -1;
	size_t head_len = 0;
	int ret = -1;
	for (;;) {
		if (head_len && content_length >= 0 && blen - head_len >= (size_t)content_length) {
			ret = 0;
			break;
		}
		double left = end - dg_test_now();
		if (left <= 0)
			break;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		char tmp[65536];
		ssize_t k = recv(fd, tmp, sizeof(tmp), 0);
		if (k <= 0) {
			ret = head_len ? 0 : -1;
			break;
		}
		append(&buf, &blen, tmp, (size_t)k);
		if (!head_len) {
			char *e = strstr(buf, "\r\n\r\n");
			if (e) {
				head_len = (size_t)(e - buf) + 4;
				for (char *l = buf; l < e; l = strstr(l, "\r\n") + 2) {
					if (strncasecmp(l, "content-length:", 15) == 0)
						content_length = atoll(l + 15);
				}
			}
		}
	}
	close(fd);
	if (head_len) {
		free(r->head);
		r->head = strndup(buf, head_len);
		size_t bl = blen - head_len;
		if (content_length >= 0 && bl > (size_t)content_length)
			bl = (size_t)content_length;
		free(r->body);
		r->body = malloc(bl + 1);
		memcpy(r->body, buf + head_len, bl);
		r->body[bl] = '\0';
		r->body_len = bl;
		sscanf(r->head, "HTTP/1.%*d %d", &r->status);
	}
	free(buf);
	return ret;
}

int dg_test_http(int port, const char *method, const char *path, const char *token,
		 const char *body, double timeout_s, struct dg_http *r)
{
	char *req = NULL;
	char auth[512] = "";
	if (token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
	size_t blen = body ? strlen(body) : 0;
	int n = asprintf(&req,
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
			 "Connection: close\r\n%s%zu\r\n\r\n",
			 method, path, port, auth,
			 body ? "Content-Type: application/json\r\nContent-Length: " : "Content-Length: ",
			 blen);
	if (n < 0)
		abort();
	char *full = malloc((size_t)n + blen + 1);
	memcpy(full, req, (size_t)n);
	if (blen)
		memcpy(full + n, body, blen);
	free(req);
	int ret = dg_test_http_raw(port, full, (size_t)n + blen, timeout_s, r);
	free(full);
	return ret;
}

/* ---- WebSocket client (libwebsockets client API) ---- */

struct ws_item {
	struct ws_item *next;
	struct dg_ws_msg m;
};

struct dg_ws {
	struct lws *wsi;
	int state;            /* 0 connecting, 1 open, 2 closed or failed */
	int status;           /* HTTP status of the handshake, when known */
	int close_code;
	char err[256];
	char auth[512];
	struct ws_item *in_head, *in_tail;
	int n_in;
	unsigned char *rx;
	size_t rx_len;
	struct ws_item *out_head, *out_tail; /* data at LWS_PRE */
	bool want_close;
};

static struct lws_context *ws_ctx;
static lws_sorted_usec_list_t ws_tick;

static void ws_tick_cb(lws_sorted_usec_list_t *sul)
{
	/* A periodic wake-up, so lws_service returns at least this often. */
	lws_sul_schedule(ws_ctx, 0, sul, ws_tick_cb, 10 * LWS_US_PER_MS);
}

static void ws_push(struct ws_item **head, struct ws_item **tail, struct ws_item *it)
{
	it->next = NULL;
	if (*tail)
		(*tail)->next = it;
	else
		*head = it;
	*tail = it;
}

static int ws_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		 size_t len)
{
	(void)user;
	struct dg_ws *ws = wsi ? lws_get_opaque_user_data(wsi) : NULL;
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		if (!ws || !ws->auth[0])
			return 0;
		unsigned char **p = in, *end = *p + len;
		if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION,
						 (const unsigned char *)ws->auth, (int)strlen(ws->auth),
						 p, end))
			return -1;
		return 0;
	}
	case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
		if (ws)
			ws->status = (int)lws_http_client_http_response(wsi);
		return 0;
	case LWS_CALLBACK_CLIENT_ESTABLISHED:
		if (ws) {
			ws->state = 1;
			ws->status = 101;
			if (ws->out_head)
				lws_callback_on_writable(wsi);
		}
		return 0;
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		if (ws) {
			ws->state = 2;
			if (!ws->status)
				ws->status = (int)lws_http_client_http_response(wsi);
			snprintf(ws->err, sizeof(ws->err), "%.*s", in ? (int)len : 0,
				 in ? (const char *)in : "");
			if (in && !len)
				snprintf(ws->err, sizeof(ws->err), "%s", (const char *)in);
			ws->wsi = NULL;
			lws_set_opaque_user_data(wsi, NULL);
		}
		return 0;
	case LWS_CALLBACK_CLIENT_RECEIVE: {
		if (!ws)
			return 0;
		unsigned char *nb = realloc(ws->rx, ws->rx_len + len + 1);
		if (!nb)
			return -1;
		memcpy(nb + ws->rx_len, in, len);
		ws->rx = nb;
		ws->rx_len += len;
		ws->rx[ws->rx_len] = '\0';
		if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
			struct ws_item *it = calloc(1, sizeof(*it));
			it->m.binary = lws_frame_is_binary(wsi);
			it->m.data = ws->rx;
			it->m.len = ws->rx_len;
			ws->rx = NULL;
			ws->rx_len = 0;
			ws_push(&ws->in_head, &ws->in_tail, it);
			ws->n_in++;
		}
		return 0;
	}
	case LWS_CALLBACK_CLIENT_WRITEABLE: {
		if (!ws)
			return -1;
		if (ws->want_close && !ws->out_head) {
			lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
			return -1;
		}
		struct ws_item *it = ws->out_head;
		if (!it)
			return 0;
		int n = lws_write(wsi, it->m.data + LWS_PRE, it->m.len,
				  it->m.binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
		if (n < (int)it->m.len)
			return -1;
		ws->out_head = it->next;
		if (!ws->out_head)
			ws->out_tail = NULL;
		free(it->m.data);
		free(it);
		if (ws->out_head || ws->want_close)
			lws_callback_on_writable(wsi);
		return 0;
	}
	case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
		if (ws && len >= 2)
			ws->close_code = ((const unsigned char *)in)[0] << 8 |
					 ((const unsigned char *)in)[1];
		return 0;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (ws) {
			ws->state = 2;
			ws->wsi = NULL;
			lws_set_opaque_user_data(wsi, NULL);
		}
		return 0;
	default:
		return 0;
	}
}

static const struct lws_protocols ws_protocols[] = {
	{"deskgate.v1", ws_cb, 0, 65536, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static int ws_init(void)
{
	if (ws_ctx)
		return 0;
	lws_set_log_level(LLL_ERR, NULL);
	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	info.port = CONTEXT_PORT_NO_LISTEN;
	info.protocols = ws_protocols;
	info.gid = (gid_t)-1;
	info.uid = (uid_t)-1;
	ws_ctx = lws_create_context(&info);
	if (!ws_ctx)
		return -1;
	lws_sul_schedule(ws_ctx, 0, &ws_tick, ws_tick_cb, 10 * LWS_US_PER_MS);
	return 0;
}

void dg_ws_service(int ms)
{
	if (ws_init() != 0)
		return;
	double end = dg_test_now() + ms / 1000.0;
	do
		lws_service(ws_ctx, 0);
	while (dg_test_now() < end);
}

struct dg_ws *dg_ws_connect(int port, const char *path, const char *bearer,
			    const char *subprotocols, double timeout_s, int *status, char *err,
			    size_t errlen)
{
	*status = 0;
	if (ws_init() != 0) {
		snprintf(err, errlen, "lws_create_context failed");
		return NULL;
	}
	struct dg_ws *ws = calloc(1, sizeof(*ws));
	if (!ws)
		abort();
	if (bearer)
		snprintf(ws->auth, sizeof(ws->auth), "Bearer %s", bearer);
	struct lws_client_connect_info ci;
	memset(&ci, 0, sizeof(ci));
	ci.context = ws_ctx;
	ci.address = "127.0.0.1";
	ci.port = port;
	ci.path = path;
	ci.host = "127.0.0.1";
	ci.origin = "127.0.0.1";
	ci.protocol = subprotocols;
	ci.local_protocol_name = "deskgate.v1";
	ci.opaque_user_data = ws;
	ci.pwsi = &ws->wsi;
	if (!lws_client_connect_via_info(&ci) && ws->state != 2) {
		snprintf(err, errlen, "lws_client_connect_via_info failed");
		free(ws);
		return NULL;
	}
	double end = dg_test_now() + timeout_s;
	while (ws->state == 0 && dg_test_now() < end)
		lws_service(ws_ctx, 0);
	if (ws->state != 1) {
		*status = ws->status;
		snprintf(err, errlen, "%s", ws->state == 0 ? "timed out" : ws->err);
		if (ws->wsi) {
			/* still connecting: stop it and forget it */
			lws_set_opaque_user_data(ws->wsi, NULL);
			lws_set_timeout(ws->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		}
		free(ws);
		return NULL;
	}
	*status = 101;
	return ws;
}

int dg_ws_send(struct dg_ws *ws, bool binary, const void *data, size_t len)
{
	if (!ws->wsi || ws->state != 1)
		return -1;
	struct ws_item *it = calloc(1, sizeof(*it));
	it->m.binary = binary;
	it->m.len = len;
	it->m.data = malloc(LWS_PRE + len + 1);
	if (!it->m.data)
		abort();
	memcpy(it->m.data + LWS_PRE, data, len);
	ws_push(&ws->out_head, &ws->out_tail, it);
	lws_callback_on_writable(ws->wsi);
	double end = dg_test_now() + 30;
	while (ws->out_head && ws->state == 1 && dg_test_now() < end)
		lws_service(ws_ctx, 0);
	return ws->out_head ? -1 : 0;
}

int dg_ws_send_text(struct dg_ws *ws, const char *text)
{
	return dg_ws_send(ws, false, text, strlen(text));
}

int dg_ws_recv(struct dg_ws *ws, double timeout_s, struct dg_ws_msg *m)
{
	memset(m, 0, sizeof(*m));
	double end = dg_test_now() + timeout_s;
	while (!ws->in_head && ws->state == 1 && dg_test_now() < end)
		lws_service(ws_ctx, 0);
	struct ws_item *it = ws->in_head;
	if (!it)
		return ws->state == 1 ? 0 : -1;
	ws->in_head = it->next;
	if (!ws->in_head)
		ws->in_tail = NULL;
	ws->n_in--;
	*m = it->m;
	free(it);
	return 1;
}

void dg_ws_msg_free(struct dg_ws_msg *m)
{
	free(m->data);
	m->data = NULL;
	m->len = 0;
}

void dg_ws_read_enable(struct dg_ws *ws, bool enable)
{
	if (ws->wsi)
		lws_rx_flow_control(ws->wsi, enable ? 1 : 0);
}

bool dg_ws_closed(const struct dg_ws *ws)
{
	return ws->state != 1;
}

int dg_ws_close_code(const struct dg_ws *ws)
{
	return ws->close_code;
}

int dg_ws_pending(const struct dg_ws *ws)
{
	return ws->n_in;
}

void dg_ws_close(struct dg_ws *ws)
{
	if (!ws)
		return;
	if (ws->wsi && ws->state == 1) {
		ws->want_close = true;
		lws_rx_flow_control(ws->wsi, 1);
		lws_callback_on_writable(ws->wsi);
		double end = dg_test_now() + 5;
		while (ws->state == 1 && dg_test_now() < end)
			lws_service(ws_ctx, 0);
	}
	if (ws->wsi) {
		lws_set_opaque_user_data(ws->wsi, NULL);
		lws_set_timeout(ws->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_SYNC);
	}
	for (struct ws_item *it = ws->in_head, *n; it; it = n) {
		n = it->next;
		free(it->m.data);
		free(it);
	}
	for (struct ws_item *it = ws->out_head, *n; it; it = n) {
		n = it->next;
		free(it->m.data);
		free(it);
	}
	free(ws->rx);
	free(ws);
}

unsigned char *dg_test_base64_decode(const char *in, size_t *len)
{
	size_t n = strlen(in);
	unsigned char *out = malloc(n / 4 * 3 + 4);
	if (!out)
		return NULL;
	uint32_t acc = 0;
	int bits = 0, pad = 0;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = in[i];
		int v;
		if (c >= 'A' && c <= 'Z')
			v = c - 'A';
		else if (c >= 'a' && c <= 'z')
			v = c - 'a' + 26;
		else if (c >= '0' && c <= '9')
			v = c - '0' + 52;
		else if (c == '+')
			v = 62;
		else if (c == '/')
			v = 63;
		else if (c == '=') {
			pad++;
			continue;
		} else {
			free(out);
			return NULL;
		}
		if (pad) {
			free(out);
			return NULL;
		}
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (pad > 2 || (n % 4 != 0 && pad)) {
		free(out);
		return NULL;
	}
	*len = o;
	return out;
}

int dg_test_png_size(const unsigned char *png, size_t len, int *w, int *h)
{
	png_image pi;
	memset(&pi, 0, sizeof(pi));
	pi.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&pi, png, len))
		return -1;
	pi.format = PNG_FORMAT_RGB;
	unsigned char *rgb = malloc(PNG_IMAGE_SIZE(pi));
	if (!rgb || !png_image_finish_read(&pi, NULL, rgb, 0, NULL)) {
		png_image_free(&pi);
		free(rgb);
		return -1;
	}
	*w = (int)pi.width;
	*h = (int)pi.height;
	free(rgb);
	return 0;
}

/* ---- the loopback site ------------------------------------------------------ */

static void site_log(struct dg_site *s, const char *line)
{
	pthread_mutex_lock(&s->mu);
	if (s->n < DG_SITE_LOG_MAX)
		s->log[s->n++] = strdup(line);
	pthread_mutex_unlock(&s->mu);
}

bool dg_site_saw(struct dg_site *s, const char *needle)
{
	bool found = false;
	pthread_mutex_lock(&s->mu);
	for (int i = 0; i < s->n && !found; i++)
		found = strstr(s->log[i], needle) != NULL;
	pthread_mutex_unlock(&s->mu);
	return found;
}

int dg_site_count(struct dg_site *s)
{
	pthread_mutex_lock(&s->mu);
	int n = s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

void dg_site_reply(int fd, const char *status, const char *type, const char *extra, const char *body)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 status, type, strlen(body), extra);
	if (write(fd, head, (size_t)n) < 0 || write(fd, body, strlen(body)) < 0)
		return;
}

static void *site_main(void *arg)
{
	struct dg_site *s = arg;
	while (!s->stop) {
		int c = accept(s->fd, NULL, NULL);
		if (c < 0)
			continue;
		char buf[8192];
		size_t got = 0;
		while (got < sizeof(buf) - 1) {
			ssize_t k = read(c, buf + got, sizeof(buf) - 1 - got);
			if (k <= 0)
				break;
			got += (size_t)k;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		buf[got] = '\0';
		char *eol = strstr(buf, "\r\n");
		if (eol)
			*eol = '\0';
		site_log(s, buf);
		char path[512] = "";
		sscanf(buf, "%*s %511s", path);
		s->handle(s, c, path);
		close(c);
	}
	return NULL;
}

void dg_site_start(struct dg_site *s, dg_site_handler handle)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	s->handle = handle;
	s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s->fd, 64) != 0) {
		fprintf(stderr, "dg_site_start: %s\n", strerror(errno));
		abort();
	}
	socklen_t len = sizeof(a);
	getsockname(s->fd, (struct sockaddr *)&a, &len);
	s->port = ntohs(a.sin_port);
	struct timeval tv = {0, 200000};
	setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	pthread_create(&s->th, NULL, site_main, s);
}

void dg_site_stop(struct dg_site *s)
{
	s->stop = true;
	pthread_join(s->th, NULL);
	close(s->fd);
	for (int i = 0; i < s->n; i++)
		free(s->log[i]);
	s->n = 0;
}

/* ---- Soak and fault helpers (issue #9) ---------------------------------- */

long dg_test_proc_mem_kb(pid_t pid, const char *key)
{
	char path[64], line[256];
	bool rollup = strncmp(key, "Vm", 2) != 0;
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, rollup ? "smaps_rollup" : "status");
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t kl = strlen(key);
	long kb = -1;
	while (kb < 0 && fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':' && sscanf(line + kl + 1, "%ld", &kb) != 1)
			kb = -1;
	}
	fclose(f);
	return kb;
}

int dg_test_proc_fds(pid_t pid, char *what, size_t what_len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	if (what && what_len)
		what[0] = '\0';
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		n++;
		if (what && what_len) {
			char link[320], target[256];
			snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
			ssize_t k = readlink(link, target, sizeof(target) - 1);
			target[k > 0 ? k : 0] = '\0';
			size_t l = strlen(what);
			snprintf(what + l, what_len - l, "%s -> %s; ", e->d_name, target);
		}
	}
	closedir(d);
	return n;
}

pid_t dg_test_find_live_process(const char *comm, uid_t uid, bool top)
{
	pid_t found = -1;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		char v[64], st[64], pv[64];
		if (dg_test_proc_status(p, "Name", v, sizeof(v)) != 0 || strcmp(v, comm) != 0 ||
		    real_uid(p) != uid || dg_test_proc_status(p, "State", st, sizeof(st)) != 0 ||
		    st[0] == 'Z' || st[0] == 'X')
			continue;
		pid_t pp = ppid_of(p);
		if (!top || (pp > 0 && dg_test_proc_status(pp, "Name", pv, sizeof(pv)) == 0 &&
			     strcmp(pv, comm) != 0))
			found = p;
	}
	if (d)
		closedir(d);
	return found;
}

pid_t dg_test_find_descendant(pid_t root, const char *comm, uid_t uid)
{
	pid_t found = -1;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		pid_t p = (pid_t)atoi(e->d_name);
		char v[64], st[64];
		if (dg_test_proc_status(p, "Name", v, sizeof(v)) != 0 || strcmp(v, comm) != 0 ||
		    real_uid(p) != uid || dg_test_proc_status(p, "State", st, sizeof(st)) != 0 ||
		    st[0] == 'Z' || st[0] == 'X' || p == root || !descends_from(p, root))
			continue;
		found = p;
	}
	if (d)
		closedir(d);
	return found;
}


char *dg_test_read_file(const char *path)
{
	return read_file_all(path);
}

/* A mountinfo line without its first two fields (mount id, parent id). */
static const char *mount_key(const char *line, size_t *len)
{
	const char *p = line;
	for (int f = 0; f < 2 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		p = line;
	const char *nl = strchr(p, '\n');
	*len = nl ? (size_t)(nl - p) : strlen(p);
	return p;
}

int dg_test_new_mounts(const char *before, char *what, size_t what_len)
{
	what[0] = '\0';
	char *now = read_file_all("/proc/self/mountinfo");
	/* Multiset difference: each line of before matches at most one now. */
	size_t nb = 0;
	for (const char *p = before; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		nb++;
	bool *used = calloc(nb + 1, sizeof(*used));
	if (!used)
		abort();
	int count = 0;
	for (const char *l = now; *l;) {
		size_t kl;
		const char *k = mount_key(l, &kl);
		bool seen = false;
		size_t i = 0;
		for (const char *b = before; *b && !seen; i++) {
			size_t bl;
			const char *bk = mount_key(b, &bl);
			if (!used[i] && bl == kl && memcmp(bk, k, kl) == 0)
				seen = used[i] = true;
			const char *nl = strchr(b, '\n');
			b = nl ? nl + 1 : b + strlen(b);
		}
		if (!seen) {
			count++;
			size_t wl = strlen(what);
			snprintf(what + wl, what_len - wl, "%.*s; ", (int)kl, k);
		}
		const char *nl = strchr(l, '\n');
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(used);
	free(now);
	return count;
}

/* ---- Screenshots as pixels (issue #13: tests/containment/test_desktop_fonts.c) ---- */

unsigned char *dg_test_png_rgb(const unsigned char *png, size_t len, int *w, int *h)
{
	png_image pi;
	memset(&pi, 0, sizeof(pi));
	pi.version = PNG_IMAGE_VERSION;
	if (!png_image_begin_read_from_memory(&pi, png, len))
		return NULL;
	pi.format = PNG_FORMAT_RGB;
	unsigned char *rgb = malloc(PNG_IMAGE_SIZE(pi));
	if (!rgb || !png_image_finish_read(&pi, NULL, rgb, 0, NULL)) {
		png_image_free(&pi);
		free(rgb);
		return NULL;
	}
	*w = (int)pi.width;
	*h = (int)pi.height;
	return rgb;
}

int dg_test_stray_event(const void *json, char *buf, size_t len)
{
	const json_t *j = json;
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type || (strcmp(type, "event") != 0 && strcmp(type, "decision") != 0))
		return 0;
	char *text = json_dumps(j, JSON_COMPACT);
	snprintf(buf, len, "%s", text ? text : type);
	free(text);
	return 1;
}

/* ---- the raw RFB client ------------------------------------------------------ */

uint32_t dg_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned be16(const unsigned char *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

void dg_put16(unsigned char *p, unsigned v)
{
	p[0] = (unsigned char)(v >> 8);
	p[1] = (unsigned char)v;
}

void dg_put32(unsigned char *p, uint32_t v)
{
	dg_put16(p, v >> 16);
	dg_put16(p + 2, v & 0xffff);
}

/* Exactly n more bytes of the stream, or NULL (closed, a text message, or
 * none in time). */
static const unsigned char *rfb_read(struct dg_rfb *r, size_t n, double timeout_s)
{
	double end = dg_test_now() + timeout_s;
	while (r->len - r->off < n) {
		struct dg_ws_msg m;
		double left = end - dg_test_now();
		if (dg_ws_recv(r->ws, left > 0 ? left : 0, &m) != 1)
			return NULL;
		if (!m.binary) {
			dg_ws_msg_free(&m);
			return NULL;
		}
		if (r->off) {
			memmove(r->buf, r->buf + r->off, r->len - r->off);
			r->len -= r->off;
			r->off = 0;
		}
		unsigned char *nb = realloc(r->buf, r->len + m.len);
		if (!nb) {
			dg_ws_msg_free(&m);
			return NULL;
		}
		r->buf = nb;
		memcpy(r->buf + r->len, m.data, m.len);
		r->len += m.len;
		dg_ws_msg_free(&m);
	}
	const unsigned char *p = r->buf + r->off;
	r->off += n;
	return p;
}

static int rfb_fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return -1;
}

int dg_rfb_open(struct dg_rfb *r, int port, const char *path, const char *token,
		double timeout_s, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	int status = 0;
	r->ws = dg_ws_connect(port, path, token, "binary", timeout_s, &status, err, errlen);
	if (!r->ws)
		return -1;
	const unsigned char *p = rfb_read(r, 12, timeout_s);
	if (!p || memcmp(p, "RFB 003.008\n", 12) != 0)
		return rfb_fail(err, errlen, "no RFB 3.8 greeting");
	if (dg_ws_send(r->ws, true, "RFB 003.008\n", 12) != 0)
		return rfb_fail(err, errlen, "closed after the greeting");
	p = rfb_read(r, 1, timeout_s);
	unsigned n = p ? p[0] : 0;
	if (!n || !(p = rfb_read(r, n, timeout_s)) || !memchr(p, 1, n))
		return rfb_fail(err, errlen, "no security type None");
	if (dg_ws_send(r->ws, true, "\x01", 1) != 0 || !(p = rfb_read(r, 4, timeout_s)) ||
	    dg_be32(p) != 0)
		return rfb_fail(err, errlen, "the security handshake failed");
	if (dg_ws_send(r->ws, true, "\x01", 1) != 0 || !(p = rfb_read(r, 24, timeout_s)))
		return rfb_fail(err, errlen, "no ServerInit");
	r->w = (int)be16(p);
	r->h = (int)be16(p + 2);
	uint32_t name_len = dg_be32(p + 20);
	if (p[4] != 32 || r->w <= 0 || r->h <= 0 || name_len > 256 || !rfb_read(r, name_len, timeout_s))
		return rfb_fail(err, errlen, "a ServerInit this client cannot take");
	unsigned char enc[8] = {2, 0};
	dg_put16(enc + 2, 1);
	dg_put32(enc + 4, 0); /* raw */
	if (dg_ws_send(r->ws, true, enc, sizeof(enc)) != 0)
		return rfb_fail(err, errlen, "closed after ServerInit");
	r->fb = calloc((size_t)r->w * (size_t)r->h, 4);
	return r->fb ? 0 : rfb_fail(err, errlen, "out of memory");
}

int dg_rfb_request(struct dg_rfb *r, bool incremental)
{
	unsigned char q[10] = {3, incremental};
	dg_put16(q + 2, 0);
	dg_put16(q + 4, 0);
	dg_put16(q + 6, (unsigned)r->w);
	dg_put16(q + 8, (unsigned)r->h);
	return dg_ws_send(r->ws, true, q, sizeof(q));
}

long dg_rfb_update(struct dg_rfb *r, double timeout_s, char *err, size_t errlen)
{
	for (;;) {
		const unsigned char *p = rfb_read(r, 1, timeout_s);
		if (!p)
			return -1;
		if (p[0] == 2)
			continue; /* Bell */
		if (p[0] == 3) { /* ServerCutText */
			if (!(p = rfb_read(r, 7, timeout_s)) || !rfb_read(r, dg_be32(p + 3), timeout_s))
				return -1;
			continue;
		}
		if (p[0] != 0) {
			snprintf(err, errlen, "unexpected server message %u", p[0]);
			return -2;
		}
		if (!(p = rfb_read(r, 3, timeout_s)))
			return -1;
		unsigned rects = be16(p + 1);
		long area = 0;
		for (unsigned i = 0; i < rects; i++) {
			if (!(p = rfb_read(r, 12, timeout_s)))
				return -1;
			unsigned x = be16(p), y = be16(p + 2), w = be16(p + 4), h = be16(p + 6);
			int32_t enc = (int32_t)dg_be32(p + 8);
			if (enc != 0)
				continue; /* a pseudo-encoding: it carries no pixels here */
			if (x + w > (unsigned)r->w || y + h > (unsigned)r->h) {
				snprintf(err, errlen, "a rectangle %ux%u+%u+%u off the screen", w, h, x, y);
				return -2;
			}
			const unsigned char *px = rfb_read(r, (size_t)w * h * 4, timeout_s);
			if (!px)
				return -1;
			for (unsigned row = 0; row < h; row++)
				memcpy(r->fb + ((size_t)(y + row) * (size_t)r->w + x) * 4,
				       px + (size_t)row * w * 4, (size_t)w * 4);
			area += (long)w * h;
		}
		return area;
	}
}

double dg_rfb_diff(const struct dg_rfb *r, const unsigned char *rgb)
{
	double sum = 0;
	size_t n = (size_t)r->w * (size_t)r->h;
	for (size_t i = 0; i < n; i++) {
		const unsigned char *v = r->fb + i * 4, *a = rgb + i * 3;
		sum += abs(v[2] - a[0]) + abs(v[1] - a[1]) + abs(v[0] - a[2]);
	}
	return sum / (double)(n * 3);
}

void dg_rfb_close(struct dg_rfb *r)
{
	dg_ws_close(r->ws);
	free(r->buf);
	free(r->fb);
	memset(r, 0, sizeof(*r));
}

double dg_test_cpu_ms(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

int dg_test_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int dg_test_cpu_quota(pid_t pid, char *out, size_t len)
{
	char path[512], line[1024], group[768] = "";
	bool v2 = false;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *ctl = strchr(line, ':'), *grp = ctl ? strchr(ctl + 1, ':') : NULL;
		if (!grp)
			continue;
		*grp++ = '\0';
		ctl++;
		bool cpu = false;
		char *save = NULL;
		for (char *t = strtok_r(ctl, ",", &save); t; t = strtok_r(NULL, ",", &save))
			cpu |= strcmp(t, "cpu") == 0;
		if (cpu) {
			snprintf(group, sizeof(group), "%s", grp);
			v2 = false;
			break;
		}
		if (!ctl[0]) { /* the unified hierarchy's line: used when v1 has no cpu */
			snprintf(group, sizeof(group), "%s", grp);
			v2 = true;
		}
	}
	fclose(f);
	if (!group[0])
		return -ENOENT;
	snprintf(path, sizeof(path),
		 v2 ? "/sys/fs/cgroup%s/cpu.max" : "/sys/fs/cgroup/cpu%s/cpu.cfs_quota_us", group);
	if (!(f = fopen(path, "r")))
		return -errno;
	char word[32];
	int n = fscanf(f, "%31s", word);
	fclose(f);
	if (n != 1)
		return -EIO;
	snprintf(out, len, "%s", word);
	return 0;
}
