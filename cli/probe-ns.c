/* deskgate-probe, the control harness (`dg_probe ns`): runs a probe, as root on the
 * host, in namespaces of its own, so that its controls can be harmless. */

#include "cli/probe-priv.h"

/* ------------------------------------------------------ control harness */

static int run_argv(char *const *argv)
{
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The stand-in "outside" that `ns --net` puts on lo. */
static const char *const ns_addrs[][2] = {
	{"-4", "169.254.169.254/32"}, /* cloud metadata */
	{"-4", "192.0.2.1/32"},       /* TEST-NET-1: "the internet" */
	{"-6", "2001:db8::1/128"},    /* documentation prefix: IPv6 outside */
};

static int listen_on(int fam, const char *host, int port, int type)
{
	union addr a;
	socklen_t len;
	if (parse_addr(host, port, &a, &len) < 0)
		return -1;
	int s = socket(fam, type | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A fresh address may not be bindable for a moment: retry up to 2 s. */
	int r;
	for (int i = 0; (r = bind(s, &a.sa, len)) < 0 && errno == EADDRNOTAVAIL && i < 200; i++)
		usleep(10000);
	if (r < 0 || (type == SOCK_STREAM && listen(s, 16) < 0)) {
		close(s);
		return -1;
	}
	return s;
}

/* Answers every DNS query with one A record, 192.0.2.1. */
static void dns_answer(int s)
{
	uint8_t q[512];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(s, q, sizeof(q) - 16, 0, (struct sockaddr *)&from, &fl);
	if (n < 12)
		return;
	q[2] |= 0x80; /* QR */
	q[3] = 0x80;  /* RA, rcode 0 */
	q[6] = 0;
	q[7] = 1; /* ANCOUNT */
	q[8] = q[9] = q[10] = q[11] = 0;
	/* Keep the question only (drop EDNS and the like). */
	size_t off = 12;
	while (off < (size_t)n && q[off])
		off += q[off] + 1u;
	off += 5;
	if (off > (size_t)n)
		return;
	static const uint8_t ans[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
	memcpy(q + off, ans, sizeof(ans));
	sendto(s, q, off + sizeof(ans), 0, (struct sockaddr *)&from, fl);
}

/* The servers of `ns --net`: TCP :80 on each outside address (a banner, then
 * close) and DNS on 127.0.0.1:53. Dies with its parent (the probe). */
static void ns_serve(int ready)
{
	struct pollfd p[8];
	int n = 0;
	p[n++].fd = listen_on(AF_INET, "169.254.169.254", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET, "192.0.2.1", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET6, "2001:db8::1", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET, "127.0.0.1", 53, SOCK_DGRAM);
	for (int i = 0; i < n; i++) {
		if (p[i].fd < 0)
			_exit(1);
		p[i].events = POLLIN;
	}
	char ok = 1;
	if (write(ready, &ok, 1) != 1)
		_exit(1);
	close(ready);
	double end = now_s() + 120;
	while (now_s() < end) {
		if (poll(p, (nfds_t)n, 1000) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			if (i == n - 1) {
				dns_answer(p[i].fd);
				continue;
			}
			int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				static const char banner[] = "dg-ns-server\n";
				if (write(c, banner, sizeof(banner) - 1) < 0) {
				}
				close(c);
			}
		}
	}
	_exit(0);
}

/* Bind-mounts a file holding text over target (in the private namespace). */
static int ns_bind_text(const char *dir, const char *name, const char *text, const char *target)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, text, strlen(text));
	close(fd);
	int r = w == (ssize_t)strlen(text) ? mount(path, target, NULL, MS_BIND, NULL) : -1;
	unlink(path); /* the bind mount keeps the file alive */
	return r;
}

/* ns [--net] -- NAME ARGS | -- /PATH ARGS: the CONTROL harness (root, on the
 * host). Enters a new mount namespace with / made private (so mounts and
 * remounts stay there) and, with --net, a new network namespace where lo is
 * up and carries 169.254.169.254, 192.0.2.1 and 2001:db8::1, with a TCP
 * server on port 80 of each and a DNS responder on 127.0.0.1:53 that
 * /etc/resolv.conf points to. Then runs the probe (or PATH) there. Traffic
 * never leaves that namespace. */
int ns_main(int argc, char **argv)
{
	bool net = false;
	int i = 0;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--net"))
			net = true;
		else
			return error_out("ns: unknown option %s", argv[i]);
	}
	if (i + 1 >= argc)
		return error_out("usage: ns [--net] -- NAME ARGS | -- /PATH ARGS");
	char **rest = argv + i + 1;
	int nrest = argc - i - 1;
	if (geteuid() != 0)
		return error_out("ns: the control harness needs root");
	if (unshare(CLONE_NEWNS | (net ? CLONE_NEWNET : 0)) < 0)
		return error_out("ns: unshare: %s", en(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return error_out("ns: make / private: %s", en(errno));
	if (net) {
		const char *ip = access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip"
			       : access("/sbin/ip", X_OK) == 0   ? "/sbin/ip"
								 : "/bin/ip";
		char *up[] = {(char *)ip, "link", "set", "lo", "up", NULL};
		if (run_argv(up) != 0)
			return error_out("ns: %s link set lo up failed", ip);
		for (size_t k = 0; k < sizeof(ns_addrs) / sizeof(ns_addrs[0]); k++) {
			/* nodad: an IPv6 address is usable at once, not "tentative" */
			char *add[] = {(char *)ip,	       (char *)ns_addrs[k][0], "addr", "add",
				       (char *)ns_addrs[k][1], "dev",		       "lo",
				       k == 2 ? "nodad" : NULL,  NULL};
			if (run_argv(add) != 0)
				return error_out("ns: %s addr add %s dev lo failed", ip,
						 ns_addrs[k][1]);
		}
		char dir[] = "/tmp/dg-ns-XXXXXX";
		if (!mkdtemp(dir))
			return error_out("ns: mkdtemp: %s", en(errno));
		int r1 = ns_bind_text(dir, "resolv.conf", "nameserver 127.0.0.1\n",
				      "/etc/resolv.conf");
		int e1 = errno;
		int r2 = ns_bind_text(dir, "nsswitch.conf", "hosts: files dns\n",
				      "/etc/nsswitch.conf");
		int e2 = errno;
		rmdir(dir);
		if (r1 < 0 || r2 < 0)
			return error_out("ns: bind resolv.conf/nsswitch.conf: %s",
					 en(r1 < 0 ? e1 : e2));
		int rp[2];
		if (pipe2(rp, O_CLOEXEC) < 0)
			return error_out("ns: pipe: %s", en(errno));
		pid_t parent = getpid();
		fflush(NULL);
		pid_t s = fork();
		if (s < 0)
			return error_out("ns: fork: %s", en(errno));
		if (s == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			close(rp[0]);
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			ns_serve(rp[1]);
		}
		close(rp[1]);
		char ok = 0;
		if (read(rp[0], &ok, 1) != 1)
			return error_out("ns: the servers did not start");
		close(rp[0]);
	}
	char *args[nrest + 2];
	const char *path;
	int k = 0;
	if (rest[0][0] == '/') {
		path = rest[0];
	} else {
		path = "/proc/self/exe";
		args[k++] = "dg_probe";
	}
	for (int j = 0; j < nrest; j++)
		args[k++] = rest[j];
	args[k] = NULL;
	execv(path, args);
	return error_out("ns: exec %s: %s", path, en(errno));
}
