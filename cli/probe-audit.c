/* deskgate-probe, the probes of `deskgate audit` (cli/cli-audit.c), which compare
 * what the jail sees with facts only the host knows. */

#include "cli/probe-priv.h"

/* ------------------------------------------------ probes of `deskgate audit`
 *
 * These compare what the jail sees with facts only the host knows (file
 * identities, namespace inodes, the other desktop's screen size), passed as
 * arguments by `deskgate audit` (cli/cli-audit.c). Each is harmless on
 * the host too, where it must report LEAKED (the control).
 */

/* same-file PATH MAJ:MIN:INO [PATH MAJ:MIN:INO ...]: leaked when PATH, seen
 * from here, is the very file the host has there: the same device and inode
 * (a bind mount of it shows the same pair; a file of the jail's own tmpfs
 * with the same name does not). Nothing is read but its metadata. */
int p_same_file(int argc, char **argv)
{
	if (argc < 2 || argc % 2)
		return error_out("usage: same-file PATH MAJ:MIN:INO [PATH MAJ:MIN:INO ...]");
	bool leaked = false;
	for (int i = 0; i + 1 < argc; i += 2) {
		unsigned maj, min;
		unsigned long long ino;
		char tail;
		if (sscanf(argv[i + 1], "%u:%u:%llu%c", &maj, &min, &ino, &tail) != 3)
			return error_out("bad file identity '%s' (want MAJ:MIN:INO)", argv[i + 1]);
		struct stat st;
		if (lstat(argv[i], &st) != 0) {
			note("%s: %s", argv[i], en(errno));
			continue;
		}
		if (major(st.st_dev) == maj && minor(st.st_dev) == min && st.st_ino == ino) {
			int fd = open(argv[i], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			note("%s is the host's file (dev %u:%u ino %llu)%s%s", argv[i], maj, min, ino,
			     fd >= 0 ? ", readable" : ", open: ", fd >= 0 ? "" : en(errno));
			if (fd >= 0)
				close(fd);
			leaked = true;
		} else {
			note("%s exists but is not the host's (dev %u:%u ino %llu here)", argv[i],
			     major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
		}
	}
	return finish(leaked);
}

/* ids MIN_OUTSIDE: who the probe is. Leaked when a user or group id map
 * (/proc/self/uid_map, gid_map) maps any id to an outside id below
 * MIN_OUTSIDE (the range deskgate keeps for jails: host root and every
 * ordinary user are below it) or maps more than one id, or when the probe
 * holds a supplementary group other than its own gid. On the host (the
 * initial namespace maps everything, 0 to 0) it leaks. */
int p_ids(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: ids MIN_OUTSIDE_ID");
	char *end;
	errno = 0;
	unsigned long long min = strtoull(argv[0], &end, 0);
	if (errno || *end || end == argv[0])
		return error_out("bad id '%s'", argv[0]);
	bool leaked = false;
	note("uid %u gid %u", (unsigned)getuid(), (unsigned)getgid());
	static const char *const maps[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
	for (int m = 0; m < 2; m++) {
		FILE *f = fopen(maps[m], "re");
		if (!f)
			return error_out("%s: %s", maps[m], en(errno));
		unsigned long long in, out, count;
		int lines = 0;
		while (fscanf(f, "%llu %llu %llu", &in, &out, &count) == 3) {
			lines++;
			bool bad = out < min || count != 1;
			note("%s: %llu -> host %llu (%#llx) x%llu%s", maps[m] + 11, in, out, out, count,
			     bad ? " (!)" : "");
			leaked |= bad;
		}
		fclose(f);
		if (lines != 1) {
			note("%s has %d line(s)", maps[m] + 11, lines);
			leaked |= lines != 1;
		}
	}
	gid_t groups[64];
	int n = getgroups(64, groups);
	if (n < 0)
		return error_out("getgroups: %s", en(errno));
	for (int i = 0; i < n; i++)
		if (groups[i] != getgid()) {
			note("supplementary group %u", (unsigned)groups[i]);
			leaked = true;
		}
	note("%d supplementary group(s)", n);
	return finish(leaked);
}

/* ns-ids WHO:TYPE:INO ...: leaked when this process's namespace of TYPE
 * (user, mnt, net, ipc, uts, pid, cgroup) is WHO's (the host's, another
 * session's): the same nsfs inode. */
int p_ns_ids(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: ns-ids WHO:TYPE:INO ...");
	bool leaked = false;
	for (int i = 0; i < argc; i++) {
		char who[64], type[16];
		unsigned long long ino;
		if (sscanf(argv[i], "%63[^:]:%15[a-z]:%llu", who, type, &ino) != 3)
			return error_out("bad namespace id '%s' (want WHO:TYPE:INO)", argv[i]);
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/ns/%s", type);
		struct stat st;
		if (stat(path, &st) != 0)
			return error_out("%s: %s", path, en(errno));
		if (st.st_ino == ino) {
			note("%s namespace is %s's (%llu)", type, who, ino);
			leaked = true;
		} else {
			note("%s %llu (%s's %llu)", type, (unsigned long long)st.st_ino, who, ino);
		}
	}
	return finish(leaked);
}

/* Reads exactly len bytes within the deadline (ms since now_s() at t0). */
static int read_full(int s, void *buf, size_t len, double deadline)
{
	size_t got = 0;
	while (got < len) {
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {s, POLLIN, 0};
		int n = poll(&p, 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ETIMEDOUT;
		ssize_t k = recv(s, (char *)buf + got, len - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
		got += (size_t)k;
	}
	return 0;
}

/* Bytes of an X connection setup reply read at most. */
#define X11_REPLY_MAX (64 * 1024)
#define X11_DISPLAYS 10
#define X11_WAIT_S 2.0

/* Opens X connection setup (no authorization) on a connected socket and
 * reads the size of the server's first screen. Returns 0 (w, h, vendor
 * set), or a negative errno / -EPROTO with why. */
static int x11_setup(int s, int *w, int *h, char *vendor, size_t vlen, char *why, size_t wlen)
{
	static const uint8_t req[12] = {'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	if (send(s, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return -errno;
	double deadline = now_s() + X11_WAIT_S;
	uint8_t head[8];
	int r = read_full(s, head, sizeof(head), deadline);
	if (r)
		return r;
	size_t extra = (size_t)(head[6] | head[7] << 8) * 4;
	if (extra > X11_REPLY_MAX)
		return -EPROTO;
	uint8_t *d = malloc(extra + 8);
	if (!d)
		return -ENOMEM;
	memcpy(d, head, 8);
	if ((r = read_full(s, d + 8, extra, deadline))) {
		free(d);
		return r;
	}
	if (head[0] != 1) {
		/* Failed (0) or Authenticate (2): the reason follows the header. */
		size_t rl = head[0] == 0 ? head[1] : extra;
		fmt(why, wlen, "setup refused: %.*s", (int)(rl < extra ? rl : extra), d + 8);
		for (char *c = why; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '.';
		free(d);
		return -EACCES;
	}
	size_t total = extra + 8;
	if (total < 40) {
		free(d);
		return -EPROTO;
	}
	size_t vl = (size_t)(d[24] | d[25] << 8), nformats = d[29];
	size_t screen = 40 + ((vl + 3) & ~(size_t)3) + 8 * nformats;
	if (d[28] < 1 || screen + 24 > total) {
		free(d);
		return -EPROTO;
	}
	fmt(vendor, vlen, "%.*s", (int)(vl < 64 ? vl : 64), d + 40);
	for (char *c = vendor; *c; c++)
		if (!isprint((unsigned char)*c))
			*c = '.';
	*w = d[screen + 20] | d[screen + 21] << 8;
	*h = d[screen + 22] | d[screen + 23] << 8;
	free(d);
	return 0;
}

/* x11 WxH: connects, without authorization, to every X server this process
 * can name: displays :0 to :9, each by its abstract socket
 * (@/tmp/.X11-unix/XN) and by its file (/tmp/.X11-unix/XN), and reads the
 * size of each server's first screen. Leaked when one of them has size WxH:
 * the other desktop's (deskgate gives the two different sizes). A server of
 * another size (the jail's own) is noted, not a leak. */
int p_x11(int argc, char **argv)
{
	int ow, oh;
	char tail;
	if (argc < 1 || sscanf(argv[0], "%dx%d%c", &ow, &oh, &tail) != 2)
		return error_out("usage: x11 WxH (the other desktop's screen size)");
	bool leaked = false;
	int reached = 0;
	for (int n = 0; n < X11_DISPLAYS; n++) {
		for (int abstract = 1; abstract >= 0; abstract--) {
			struct sockaddr_un un = {.sun_family = AF_UNIX};
			char name[64];
			snprintf(name, sizeof(name), "/tmp/.X11-unix/X%d", n);
			size_t l = strlen(name);
			memcpy(un.sun_path + abstract, name, l);
			socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + l);
			int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (s < 0)
				return error_out("socket: %s", en(errno));
			if (connect(s, (struct sockaddr *)&un, alen) != 0) {
				if (n == 0)
					note("%s%s: %s", abstract ? "@" : "", name, en(errno));
				close(s);
				continue;
			}
			int w = 0, h = 0;
			char vendor[80] = "", why[256] = "";
			int r = x11_setup(s, &w, &h, vendor, sizeof(vendor), why, sizeof(why));
			close(s);
			reached++;
			if (r == 0) {
				bool other = w == ow && h == oh;
				note("%s%s: X server '%s', screen %dx%d%s", abstract ? "@" : "", name,
				     vendor, w, h, other ? " (the other desktop's)" : "");
				leaked |= other;
			} else {
				/* Connected, but no screen size: a server of unknown
				 * identity answered, which counts as reaching it. */
				note("%s%s: connected; %s", abstract ? "@" : "", name,
				     why[0] ? why : en(-r));
				leaked = true;
			}
		}
	}
	note("%d X socket(s) of displays :0..:%d answered", reached, X11_DISPLAYS - 1);
	return finish(leaked);
}

/* The pid of a process of this jail named comm (first found), or -1. */
static pid_t find_comm(const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = -1;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[64], name[64] = "";
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (k > 0 && name[k - 1] == '\n')
			name[k - 1] = '\0';
		if (strcmp(name, comm) == 0)
			found = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* Connects to a unix socket (abstract when the name starts with '@');
 * 0 or the errno. */
static int unix_connect(const char *name)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	bool abstract = name[0] == '@';
	size_t l = strlen(name);
	if (l >= sizeof(un.sun_path))
		return ENAMETOOLONG;
	memcpy(un.sun_path + (abstract ? 1 : 0), name + (abstract ? 1 : 0), l - (abstract ? 1 : 0));
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	int r = connect(s, (struct sockaddr *)&un, alen) == 0 ? 0 : errno;
	close(s);
	return r;
}

/* desktop: (run as exec actions are, in a session's jail) every door to the
 * session's own desktop: its X server's path socket /tmp/.X11-unix/X0 and
 * abstract socket, a signal (0) to its Xvnc, and in a browser session the
 * browser's singleton socket and profile. Leaked when any opens: exec could
 * then drive the desktop around the action rules (unless the policy's
 * limits.exec_desktop allows it, which the audit's control uses). */
int p_desktop(int argc, char **argv)
{
	(void)argc, (void)argv;
	bool leaked = false;
	const char *const xs[] = {"/tmp/.X11-unix/X0", "@/tmp/.X11-unix/X0"};
	for (size_t i = 0; i < 2; i++) {
		int e = unix_connect(xs[i]);
		note("connect %s: %s", xs[i], e ? en(e) : "connected");
		leaked |= e == 0;
	}
	pid_t x = find_comm("Xvnc");
	if (x > 0) {
		errno = 0;
		int r = kill(x, 0);
		note("signal 0 to Xvnc (pid %d): %s", (int)x, r == 0 ? "delivered" : en(errno));
		leaked |= r == 0;
	} else {
		note("no Xvnc seen in /proc");
	}
	DIR *d = opendir("/tmp");
	struct dirent *e;
	int sockets = 0;
	while (d && (e = readdir(d))) {
		const char *n = e->d_name + (e->d_name[0] == '.');
		if (strncmp(n, "org.chromium.", 13) != 0)
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/tmp/%.200s/SingletonSocket", e->d_name);
		int r = unix_connect(path);
		sockets++;
		note("connect %s: %s", path, r ? en(r) : "connected");
		leaked |= r == 0;
	}
	if (d)
		closedir(d);
	if (!sockets)
		note("no browser singleton directory in /tmp");
	const char *home = getenv("HOME");
	char prof[512];
	snprintf(prof, sizeof(prof), "%s/.chromium", home ? home : "/home/user");
	DIR *pd = opendir(prof);
	if (pd) {
		note("%s: listed", prof);
		leaked = true;
		closedir(pd);
	} else {
		note("%s: %s", prof, en(errno));
	}
	return finish(leaked);
}

/* Reads /proc/PID/cmdline (NULs made spaces) into buf. */
static void read_cmdline(const char *pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%.40s/cmdline", pid);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, len - 1);
	close(fd);
	if (k < 0)
		k = 0;
	for (ssize_t i = 0; i < k; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[k] = '\0';
}

static void read_comm(const char *pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%.40s/comm", pid);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, len - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* devtools: Chromium's DevTools pipe (its fds 3 and 4, whose other ends the
 * worker holds) from another process of the jail. Finds the browser process
 * (comm "chromium", --remote-debugging-pipe, no --type=) and tries to get a
 * descriptor of either pipe: by opening /proc/PID/fd/3 for writing and
 * /proc/PID/fd/4 for reading (nothing is written or read), by
 * pidfd_getfd, and by PTRACE_ATTACH. Leaked when any yields one. No browser
 * running: an error (nothing to check). */
int p_devtools(int argc, char **argv)
{
	(void)argc, (void)argv;
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	char pid[32] = "";
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char comm[64], cmd[8192];
		read_comm(e->d_name, comm, sizeof(comm));
		if (strcmp(comm, "chromium") != 0)
			continue;
		read_cmdline(e->d_name, cmd, sizeof(cmd));
		if (strstr(cmd, "--remote-debugging-pipe") && !strstr(cmd, "--type=")) {
			fmt(pid, sizeof(pid), "%s", e->d_name);
			break;
		}
	}
	closedir(d);
	if (!pid[0])
		return error_out("no Chromium browser process is visible");
	note("browser process %s", pid);
	bool leaked = false;
	static const struct {
		int fd, flags;
		const char *what;
	} ends[] = {{3, O_WRONLY, "command pipe (fd 3) for writing"},
		    {4, O_RDONLY, "reply pipe (fd 4) for reading"}};
	for (int i = 0; i < 2; i++) {
		char path[64], target[128] = "?";
		snprintf(path, sizeof(path), "/proc/%s/fd/%d", pid, ends[i].fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		int fd = open(path, ends[i].flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			note("opened its %s (%s)", ends[i].what, n > 0 ? target : "?");
			close(fd);
			leaked = true;
		} else {
			note("open %s (%s): %s", path, n > 0 ? target : "link unreadable", en(errno));
		}
	}
	long pfd = syscall(SYS_pidfd_open, atoi(pid), 0);
	if (pfd >= 0) {
		for (int i = 0; i < 2; i++) {
			errno = 0;
			long r = syscall(SYS_pidfd_getfd, (int)pfd, ends[i].fd, 0);
			int err = errno;
			char what[64];
			snprintf(what, sizeof(what), "pidfd_getfd(fd %d)", ends[i].fd);
			if (r >= 0)
				close((int)r);
			leaked |= !denied(what, r, err);
		}
		close((int)pfd);
	} else {
		note("pidfd_open: %s", en(errno));
	}
	int err;
	long r = attach_detach(atoi(pid), &err);
	leaked |= !denied("PTRACE_ATTACH", r, err);
	return finish(leaked);
}

/* proc-mem: for every other process this one can see (not itself), opens
 * /proc/PID/mem for reading and writing, never reading or writing it.
 * The jail refuses ptrace and process_vm_readv/writev ("reach into other
 * processes"); /proc/PID/mem is the same reach through a file. Leaked when
 * any opens, naming which. */
int p_proc_mem(int argc, char **argv)
{
	(void)argc, (void)argv;
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	int self = getpid(), opened = 0, refused = 0, seen = 0;
	char names[512] = "", errs[256] = "";
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]) || atoi(e->d_name) == self)
			continue;
		seen++;
		char path[300], comm[64];
		snprintf(path, sizeof(path), "/proc/%s/mem", e->d_name);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			read_comm(e->d_name, comm, sizeof(comm));
			size_t l = strlen(names);
			if (opened++ < 8)
				fmt(names + l, sizeof(names) - l, "%s%s(%s)", l ? "," : "", e->d_name,
				    comm);
		} else {
			refused++;
			if (!strstr(errs, en(errno))) {
				size_t l = strlen(errs);
				fmt(errs + l, sizeof(errs) - l, "%s%s", l ? "," : "", en(errno));
			}
		}
	}
	closedir(d);
	if (opened)
		note("/proc/PID/mem opened read-write for %d of %d other process(es): %s%s", opened,
		     seen, names, opened > 8 ? ",..." : "");
	note("%d refused (%s)", refused, errs[0] ? errs : "-");
	return finish(opened > 0);
}

/* Bytes of a proxy's answer read at most, and the default wait for it. */
#define PROXY_HEAD_MAX 4096
#define PROXY_WAIT_MS 5000

/* proxy ADDR PORT CONNECT|GET TARGET [WAIT_MS]: asks the HTTP proxy at
 * ADDR:PORT for TARGET (host:port): `CONNECT TARGET`, or `GET http://TARGET/`
 * in absolute form. For a target the proxy must refuse: contained when it
 * answers 403 (a policy or address rule); leaked when it lets the request
 * through: a 2xx (tunnel or origin reached), or a 502/504 whose
 * X-Deskgate-Rule is egress.resolve or egress.connect (it looked the name up
 * or connected). Anything else (no proxy, no answer in WAIT_MS, 400) is an
 * error. The evidence names the status, the rule and the proxy's reason. */
int p_proxy(int argc, char **argv)
{
	if (argc < 4)
		return error_out("usage: proxy ADDR PORT CONNECT|GET HOST:PORT [WAIT_MS]");
	int port = (int)parse_long(argv[1], 1, 65535, "port");
	bool connect_m = strcmp(argv[2], "CONNECT") == 0;
	if (!connect_m && strcmp(argv[2], "GET"))
		return error_out("method must be CONNECT or GET");
	long wait = argc > 4 ? parse_long(argv[4], 1, 60000, "WAIT_MS") : PROXY_WAIT_MS;
	union addr a;
	socklen_t alen;
	if (parse_addr(argv[0], port, &a, &alen) < 0)
		return error_out("bad address %s", argv[0]);
	if (!may_send_to(&a))
		return finish(true);
	int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return error_out("socket: %s", en(errno));
	if (connect(s, &a.sa, alen) != 0) {
		int e = errno;
		close(s);
		return error_out("no proxy at %s:%d: %s", argv[0], port, en(e));
	}
	char req[1024];
	int n = connect_m ? snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
				     argv[3], argv[3])
			  : snprintf(req, sizeof(req),
				     "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
				     argv[3], argv[3]);
	if (n <= 0 || (size_t)n >= sizeof(req) || send(s, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(s);
		return error_out("sending the request failed");
	}
	/* Read until the head and the body's first line are in, or the proxy
	 * closes, or the wait ends. */
	char resp[PROXY_HEAD_MAX + 1];
	size_t got = 0;
	double deadline = now_s() + (double)wait / 1000.0;
	while (got < PROXY_HEAD_MAX) {
		int left = (int)((deadline - now_s()) * 1000);
		struct pollfd p = {s, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t k = recv(s, resp + got, PROXY_HEAD_MAX - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
		resp[got] = '\0';
		char *body = strstr(resp, "\r\n\r\n");
		if (body && strchr(body + 4, '\n'))
			break;
		if (body && strncmp(resp, "HTTP/1.1 200", 12) == 0)
			break; /* a tunnel: nothing more comes until we speak */
	}
	close(s);
	resp[got] = '\0';
	int status = 0;
	if (got == 0 || sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		return error_out("%s %s: no answer from the proxy in %ld ms", argv[2], argv[3],
				 wait);
	char rule[128] = "-", reason[256] = "";
	char *h = strcasestr(resp, "\r\nX-Deskgate-Rule:");
	if (h)
		sscanf(h + 18, " %127[^\r\n]", rule);
	char *body = strstr(resp, "\r\n\r\n");
	if (body)
		sscanf(body + 4, "%255[^\r\n]", reason);
	for (char *c = reason; *c; c++)
		if (!isprint((unsigned char)*c))
			*c = '.';
	note("%s %s: proxy answered %d, rule %s%s%s", argv[2], argv[3], status, rule,
	     reason[0] ? ": " : "", reason);
	if (status == 403)
		return finish(false);
	if ((status >= 200 && status < 300) ||
	    ((status == 502 || status == 504) &&
	     (!strcmp(rule, "egress.resolve") || !strcmp(rule, "egress.connect"))))
		return finish(true);
	return error_out("%s", evidence);
}

/* mark PATH: creates PATH (a new, empty file) and leaves it: the other
 * session's marker that the probe in the audited session must not see.
 * Not a containment probe: exit 0 with "MARKED", 2 on failure. */
int p_mark(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mark PATH");
	int fd = open(argv[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_out("create %s: %s", argv[0], en(errno));
	close(fd);
	printf("MARKED %s\n", argv[0]);
	return 0;
}
