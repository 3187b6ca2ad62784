/* The egress proxy end to end, without namespaces: the test starts the proxy
 * with dg_egress_start (as root, so it really drops to the instance's egress uid), hands
 * it listeners it made on 127.0.0.1:0 in the host's network namespace, and
 * runs two loopback HTTP servers (forked) that the resolver override names
 * allowed.test:80 and denied.test:80. The policy allows allowed.test:80 (and
 * a few names and literals whose addresses must still be refused), never
 * denied.test:80.
 *
 * Covered: proxied absolute-form GET (rewritten head seen by the origin),
 * 403 for a denied host with the denied server never contacted, CONNECT
 * tunnels with half-close, IP literals and names resolving to loopback
 * refused (egress.address) even when allowed, lookup failures, connect
 * failures (502) and timeouts (504), the per-session connection cap at its
 * boundary, the per-session byte cap at its boundary, idle and head
 * timeouts, dg_egress_remove, hostile clients answered 400 while another
 * session's tunnel keeps working, control-message errors, the bounded event
 * queue, the proxy's credentials, a rules-less policy allowing nothing, and
 * a clean exit when the channel closes.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "egress-priv.h"
#include "desktop/proto/proto.h"
#include "dg_test.h"

#define WAIT_MS 5000

/* ---- loopback HTTP servers ----------------------------------------------------- */

struct server {
	pid_t pid;
	int port;
	int count_fd; /* one byte per accepted connection */
	int accepted;
};

static struct server allowed_srv = {-1, 0, -1, 0}, denied_srv = {-1, 0, -1, 0};

/* The servers' answer head for a body of len bytes (the byte-cap test
 * computes sizes with it). */
static int resp_head(char *out, size_t n, size_t len)
{
	return snprintf(out, n, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			len);
}

static void write_all_or_exit(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k <= 0)
			_exit(0);
		p += k;
		n -= (size_t)k;
	}
}

/* One connection: read a head; "/size/N" answers N bytes of 'x', "/hold"
 * waits for EOF, anything else answers "server NAME\n" and the head as
 * received. */
__attribute__((noreturn)) static void serve(int fd, const char *name)
{
	static char head[65536];
	size_t got = 0;
	while (got < sizeof(head) - 1) {
		ssize_t k = read(fd, head + got, sizeof(head) - 1 - got);
		if (k <= 0)
			_exit(0);
		got += (size_t)k;
		head[got] = '\0';
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	char *end = strstr(head, "\r\n\r\n");
	if (!end)
		_exit(0);
	end[4] = '\0';
	const char *path = strchr(head, ' ');
	path = path ? path + 1 : "";
	char h[256];
	if (strncmp(path, "/hold", 5) == 0) {
		char b[4096];
		while (read(fd, b, sizeof(b)) > 0)
			;
		_exit(0);
	}
	if (strncmp(path, "/size/", 6) == 0) {
		size_t n = strtoul(path + 6, NULL, 10);
		write_all_or_exit(fd, h, (size_t)resp_head(h, sizeof(h), n));
		char chunk[65536];
		memset(chunk, 'x', sizeof(chunk));
		while (n) {
			size_t c = n < sizeof(chunk) ? n : sizeof(chunk);
			write_all_or_exit(fd, chunk, c);
			n -= c;
		}
	} else {
		char body[70000];
		int bl = snprintf(body, sizeof(body), "server %s\n%s", name, head);
		write_all_or_exit(fd, h, (size_t)resp_head(h, sizeof(h), (size_t)bl));
		write_all_or_exit(fd, body, (size_t)bl);
	}
	shutdown(fd, SHUT_WR);
	char b[4096];
	while (read(fd, b, sizeof(b)) > 0)
		;
	_exit(0);
}

static int tcp_listener(int backlog, int *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(fd, backlog), 0);
	socklen_t l = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &l);
	*port = ntohs(a.sin_port);
	return fd;
}

static void server_start(struct server *s, const char *name)
{
	int lfd = tcp_listener(128, &s->port);
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t parent = getpid();
	s->pid = fork();
	cr_assert_geq(s->pid, 0);
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(0);
		signal(SIGCHLD, SIG_IGN);
		close(p[0]);
		for (;;) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			if (write(p[1], "x", 1) != 1)
				_exit(0);
			pid_t me = getpid();
			pid_t k = fork();
			if (k == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != me)
					_exit(0);
				close(lfd);
				serve(c, name);
			}
			close(c);
		}
	}
	close(lfd);
	close(p[1]);
	s->count_fd = p[0];
	fcntl(s->count_fd, F_SETFL, O_NONBLOCK);
	s->accepted = 0;
}

/* Connections the server accepted so far. */
static int accepted(struct server *s)
{
	char b[256];
	ssize_t k;
	while ((k = read(s->count_fd, b, sizeof(b))) > 0)
		s->accepted += (int)k;
	return s->accepted;
}

/* Waits (bounded) until the server accepted n connections, then a little
 * longer to see that no more come; returns the count. A connection is
 * established before the server's accept returns, hence the wait. */
static int accepted_settled(struct server *s, int n)
{
	for (int i = 0; i < 200 && accepted(s) < n; i++)
		usleep(10000);
	usleep(100000);
	return accepted(s);
}

static void server_stop(struct server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
	}
	if (s->count_fd >= 0)
		close(s->count_fd);
	s->pid = -1;
	s->count_fd = -1;
}

/* ---- the proxy ------------------------------------------------------------------ */

static struct dg_egress eg = {-1, -1};
static json_t *stash; /* events received and not yet taken */
static int p1;        /* session s1's listener port */
static int slow_fd = -1, slow_client = -1, slow_port, closed_port;

static void setup(void)
{
	stash = json_array();
	server_start(&allowed_srv, "allowed");
	server_start(&denied_srv, "denied");
	/* A listener whose one-entry queue is full drops further SYNs, so
	 * connecting to it hangs: the connect timeout's origin. */
	slow_fd = tcp_listener(0, &slow_port);
	slow_client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)slow_port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	connect(slow_client, (struct sockaddr *)&a, sizeof(a));
	int fd = tcp_listener(1, &closed_port);
	close(fd); /* nothing listens there now: connection refused */
}

static void teardown(void)
{
	dg_egress_stop(&eg);
	server_stop(&allowed_srv);
	server_stop(&denied_srv);
	if (slow_fd >= 0)
		close(slow_fd);
	if (slow_client >= 0)
		close(slow_client);
	json_decref(stash);
	stash = NULL;
}

TestSuite(egress_proxy, .init = setup, .fini = teardown, .timeout = 120);

static bool matches(json_t *ev, const char *name, const char *session, long long conn)
{
	const char *e = json_string_value(json_object_get(ev, "event"));
	if (!e || strcmp(e, name) != 0)
		return false;
	if (session) {
		const char *s = json_string_value(json_object_get(ev, "session"));
		if (!s || strcmp(s, session) != 0)
			return false;
	}
	return conn < 0 || json_integer_value(json_object_get(ev, "conn")) == conn;
}

/* Reads what the proxy sent into the stash, waiting up to ms for one. */
static void pump_events(int ms)
{
	struct pollfd p = {eg.fd, POLLIN, 0};
	if (poll(&p, 1, ms) <= 0)
		return;
	for (;;) {
		json_t *ev = NULL;
		struct dg_err err = {{0}};
		int r = dg_egress_recv(&eg, &ev, &err);
		cr_assert_geq(r, 0, "egress: %s", err.msg);
		if (r == 0)
			return;
		json_array_append_new(stash, ev);
	}
}

/* The first event that matches (conn < 0: any), taken from the stash
 * (caller owns it), waiting up to WAIT_MS; fails the test otherwise. */
static json_t *wait_event(const char *name, const char *session, long long conn)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		size_t i;
		json_t *ev;
		json_array_foreach(stash, i, ev) {
			if (matches(ev, name, session, conn)) {
				json_incref(ev);
				json_array_remove(stash, i);
				return ev;
			}
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long ms = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms > WAIT_MS) {
			char *all = json_dumps(stash, JSON_COMPACT);
			cr_assert_fail("no %s event for %s conn %lld; have %s", name,
				       session ? session : "-", conn, all ? all : "?");
		}
		pump_events(100);
	}
}

/* Whether an event like that is in the stash after waiting ms. */
static bool has_event(const char *name, const char *session, long long conn, int ms)
{
	pump_events(ms);
	pump_events(0);
	size_t i;
	json_t *ev;
	json_array_foreach(stash, i, ev) {
		if (matches(ev, name, session, conn))
			return true;
	}
	return false;
}

static const char *str(json_t *ev, const char *key)
{
	const char *s = json_string_value(json_object_get(ev, key));
	return s ? s : "(none)";
}

static long long num(json_t *ev, const char *key)
{
	json_t *v = json_object_get(ev, key);
	cr_assert(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

/* Hands the proxy a fresh listener for session id; returns its port. */
static int add_session(const char *id)
{
	int port;
	int fd = tcp_listener(128, &port);
	struct dg_err err = {{0}};
	cr_assert_eq(dg_egress_add(&eg, id, fd, NULL, &err), 0, "%s", err.msg);
	close(fd); /* the proxy has its own copy */
	json_t *ev = wait_event("egress_session", id, -1);
	cr_assert_str_eq(str(ev, "op"), "add");
	cr_assert(json_is_true(json_object_get(ev, "ok")), "add failed: %s", str(ev, "error"));
	json_decref(ev);
	return port;
}

/* Starts the proxy (opts: test overrides, or NULL) with the test policy, or
 * with the built-in default when rules is false, and session s1. The policy
 * is freed right after the start: the proxy keeps its own copy. */
static void up_with(const struct dg_egress_opts *extra, bool rules)
{
	if (geteuid() != 0)
		cr_skip_test("the proxy drops from root to its own uid: run as root");
	char text[1024], ov[4][96];
	snprintf(text, sizeof(text),
		 "{\"version\": 1, \"default\": \"deny\", \"egress\": {\"allow\": ["
		 "\"allowed.test:80\", \"localhost:80\", \"127.0.0.1:%d\", \"[::1]:%d\", "
		 "\"refused.test:80\", \"slow.test:80\", \"nothing.invalid:80\"]}}",
		 allowed_srv.port, allowed_srv.port);
	struct dg_policy pol;
	struct dg_err err = {{0}};
	dg_policy_default(&pol);
	if (rules)
		cr_assert_eq(dg_policy_parse(text, strlen(text), "test", &pol, &err), 0, "%s",
			     err.msg);
	snprintf(ov[0], sizeof(ov[0]), "allowed.test:80=127.0.0.1:%d", allowed_srv.port);
	snprintf(ov[1], sizeof(ov[1]), "denied.test:80=127.0.0.1:%d", denied_srv.port);
	snprintf(ov[2], sizeof(ov[2]), "refused.test:80=127.0.0.1:%d", closed_port);
	snprintf(ov[3], sizeof(ov[3]), "slow.test:80=127.0.0.1:%d", slow_port);
	const char *ovp[4] = {ov[0], ov[1], ov[2], ov[3]};
	struct dg_egress_opts o = {0};
	if (extra)
		o = *extra;
	o.resolve = ovp;
	o.n_resolve = 4;
	cr_assert_eq(dg_egress_start(&eg, &pol, &o, &err), 0, "%s", err.msg);
	dg_policy_free(&pol);
	p1 = add_session("s1");
}

static void up(void)
{
	up_with(NULL, true);
}

/* ---- clients ----------------------------------------------------------------------- */

static int dial_try(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	struct timeval tv = {WAIT_MS / 1000, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int dial(int port)
{
	int fd = dial_try(port);
	cr_assert_geq(fd, 0, "connect to %d: %s", port, strerror(-fd));
	return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		cr_assert_gt(k, 0, "send: %s", strerror(errno));
		p = (const char *)p + k;
		n -= (size_t)k;
	}
}

static void send_str(int fd, const char *s)
{
	send_all(fd, s, strlen(s));
}

/* Everything until EOF (or a reset, or the receive timeout), NUL-terminated. */
static char *read_all(int fd, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *b = malloc(cap + 1);
	for (;;) {
		if (n == cap) {
			cap *= 2;
			b = realloc(b, cap + 1);
		}
		ssize_t k = recv(fd, b + n, cap - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	b[n] = '\0';
	if (len)
		*len = n;
	return b;
}

/* A response head, read byte by byte so nothing after it is consumed. */
static char *read_head(int fd)
{
	char *b = calloc(1, 4096);
	size_t n = 0;
	while (n < 4095 && !(n >= 4 && memcmp(b + n - 4, "\r\n\r\n", 4) == 0)) {
		ssize_t k = recv(fd, b + n, 1, 0);
		if (k <= 0)
			break;
		n++;
	}
	return b;
}

static char *roundtrip(int port, const char *req, size_t *len)
{
	int fd = dial(port);
	send_str(fd, req);
	char *r = read_all(fd, len);
	close(fd);
	return r;
}

/* A CONNECT tunnel through the proxy, after its 200. */
static int tunnel(int port, const char *target)
{
	int fd = dial(port);
	char req[256];
	snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target);
	send_str(fd, req);
	char *h = read_head(fd);
	cr_assert_str_eq(h, "HTTP/1.1 200 Connection established\r\n\r\n");
	free(h);
	return fd;
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- tests ------------------------------------------------------------------------- */

Test(egress_proxy, get_allowed_is_proxied_and_rewritten)
{
	up();
	size_t n;
	char *r = roundtrip(p1,
			    "GET http://allowed.test/hello?x=1 HTTP/1.1\r\n"
			    "Host: allowed.test\r\n"
			    "Proxy-Connection: keep-alive\r\n"
			    "Proxy-Authorization: Basic eDp5\r\n"
			    "User-Agent: t\r\n\r\n",
			    &n);
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	const char *seen = "GET /hello?x=1 HTTP/1.1\r\nHost: allowed.test\r\nUser-Agent: t\r\n"
			   "Connection: close\r\n\r\n";
	char *body = strstr(r, "\r\n\r\n") + 4;
	cr_assert(starts(body, "server allowed\n"), "%s", r);
	cr_assert_str_eq(body + strlen("server allowed\n"), seen);

	json_t *ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	cr_assert_str_eq(str(ev, "rule"), "egress.allow[0]");
	cr_assert_str_eq(str(ev, "method"), "GET");
	cr_assert_str_eq(str(ev, "target"), "allowed.test:80");
	char addr[64];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", allowed_srv.port);
	cr_assert_str_eq(str(ev, "address"), addr);
	json_decref(ev);
	ev = wait_event("egress_closed", "s1", 1);
	cr_assert_eq(num(ev, "bytes_up"), (long long)strlen(seen));
	cr_assert_eq(num(ev, "bytes_down"), (long long)n);
	cr_assert(json_is_null(json_object_get(ev, "error")), "%s", str(ev, "error"));
	cr_assert_geq(num(ev, "duration_ms"), 0);
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 1), 1);
	cr_assert_eq(accepted(&denied_srv), 0);
	free(r);

	/* A large answer goes through the bounded buffers whole. */
	r = roundtrip(p1, "GET http://allowed.test/size/3000000 HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		      &n);
	char h[128];
	size_t hl = (size_t)resp_head(h, sizeof(h), 3000000);
	cr_assert_eq(n, hl + 3000000);
	cr_assert(starts(r, h));
	ev = wait_event("egress_closed", "s1", 2);
	cr_assert_eq(num(ev, "bytes_down"), (long long)n);
	json_decref(ev);
	free(r);
}

Test(egress_proxy, denied_host_gets_403_and_is_never_contacted)
{
	up();
	char *r = roundtrip(p1, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	cr_assert(strstr(r, "\r\nX-Deskgate-Rule: egress.default\r\n"), "%s", r);
	cr_assert(strstr(r, "egress.allow"), "%s", r);
	free(r);
	r = roundtrip(p1, "CONNECT denied.test:80 HTTP/1.1\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	for (int conn = 1; conn <= 2; conn++) {
		json_t *ev = wait_event("egress", "s1", conn);
		cr_assert_str_eq(str(ev, "verdict"), "deny");
		cr_assert_str_eq(str(ev, "rule"), "egress.default");
		cr_assert_str_eq(str(ev, "target"), "denied.test:80");
		cr_assert_str_eq(str(ev, "method"), conn == 1 ? "GET" : "CONNECT");
		cr_assert_null(json_object_get(ev, "address"));
		json_decref(ev);
		ev = wait_event("egress_closed", "s1", conn);
		cr_assert(strstr(str(ev, "error"), "answered 403"), "%s", str(ev, "error"));
		cr_assert_eq(num(ev, "bytes_up"), 0);
		json_decref(ev);
	}
	cr_assert_eq(accepted_settled(&denied_srv, 0), 0);
}

/* A session under its own policy: its egress list decides for it, the
 * proxy's policy still decides for the others. */
Test(egress_proxy, a_session_policy_decides_for_its_session_only)
{
	up();
	struct dg_policy own;
	struct dg_err err = {{0}};
	const char *text = "{\"version\": 1, \"default\": \"deny\", "
			   "\"egress\": {\"allow\": [\"denied.test:80\"]}}";
	cr_assert_eq(dg_policy_parse(text, strlen(text), "own", &own, &err), 0, "%s", err.msg);
	int port;
	int fd = tcp_listener(16, &port);
	cr_assert_eq(dg_egress_add(&eg, "own", fd, &own, &err), 0, "%s", err.msg);
	close(fd);
	dg_policy_free(&own);
	json_decref(wait_event("egress_session", "own", -1));
	char *r = roundtrip(port, "GET http://denied.test/x HTTP/1.1\r\nHost: denied.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 200"), "%s", r);
	free(r);
	r = roundtrip(port, "GET http://allowed.test/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403"), "the session's own list should not allow it: %s", r);
	free(r);
	r = roundtrip(p1, "GET http://denied.test/y HTTP/1.1\r\nHost: denied.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403"), "another session got the list: %s", r);
	free(r);
	cr_assert_eq(accepted_settled(&denied_srv, 1), 1);
}

Test(egress_proxy, connect_tunnel_with_half_close)
{
	up();
	int fd = tunnel(p1, "allowed.test:80");
	const char *req = "GET /tunnel HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
	send_str(fd, req);
	shutdown(fd, SHUT_WR); /* the answer must still come back */
	size_t n;
	char *r = read_all(fd, &n);
	close(fd);
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	cr_assert(strstr(r, "server allowed\nGET /tunnel HTTP/1.1\r\n"), "%s", r);
	json_t *ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	cr_assert_str_eq(str(ev, "method"), "CONNECT");
	cr_assert_str_eq(str(ev, "target"), "allowed.test:80");
	json_decref(ev);
	ev = wait_event("egress_closed", "s1", 1);
	cr_assert_eq(num(ev, "bytes_up"), (long long)strlen(req));
	cr_assert_eq(num(ev, "bytes_down"), (long long)n);
	cr_assert(json_is_null(json_object_get(ev, "error")));
	json_decref(ev);
	free(r);

	/* Tunnel bytes sent right behind the CONNECT head are not lost. */
	fd = dial(p1);
	send_str(fd, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\nGET /early HTTP/1.1\r\n"
		     "Host: allowed.test\r\n\r\n");
	r = read_all(fd, NULL);
	close(fd);
	cr_assert(starts(r, "HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK\r\n"), "%s",
		  r);
	cr_assert(strstr(r, "GET /early HTTP/1.1\r\n"), "%s", r);
	free(r);
}

Test(egress_proxy, ip_literals_are_checked_even_when_allowed)
{
	up();
	char req[256];
	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", allowed_srv.port);
	char *r = roundtrip(p1, req, NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	cr_assert(strstr(r, "X-Deskgate-Rule: egress.address"), "%s", r);
	free(r);
	snprintf(req, sizeof(req), "GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
		 allowed_srv.port, allowed_srv.port);
	r = roundtrip(p1, req, NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	snprintf(req, sizeof(req), "CONNECT [::1]:%d HTTP/1.1\r\n\r\n", allowed_srv.port);
	r = roundtrip(p1, req, NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	for (int conn = 1; conn <= 3; conn++) {
		json_t *ev = wait_event("egress", "s1", conn);
		cr_assert_str_eq(str(ev, "verdict"), "deny");
		cr_assert_str_eq(str(ev, "rule"), "egress.address");
		cr_assert(strstr(str(ev, "reason"), conn == 3 ? "::1/128 (loopback)"
							      : "127.0.0.0/8 (loopback)"),
			  "%s", str(ev, "reason"));
		json_decref(ev);
	}
	/* A literal the policy does not name is decided by the policy first. */
	r = roundtrip(p1, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", 4);
	cr_assert_str_eq(str(ev, "rule"), "egress.default");
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 0), 0);
}

Test(egress_proxy, names_resolving_to_private_addresses_are_refused)
{
	up();
	/* "localhost" is allowed by the policy and resolves (getaddrinfo_a,
	 * /etc/hosts) to loopback. */
	char *r = roundtrip(p1, "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "verdict"), "deny");
	cr_assert_str_eq(str(ev, "rule"), "egress.address");
	cr_assert(strstr(str(ev, "reason"), "localhost resolves to 127."), "%s", str(ev, "reason"));
	cr_assert(strstr(str(ev, "reason"), "(loopback)"), "%s", str(ev, "reason"));
	json_decref(ev);

	/* A name that does not resolve. */
	r = roundtrip(p1, "GET http://nothing.invalid/ HTTP/1.1\r\nHost: nothing.invalid\r\n\r\n",
		      NULL);
	cr_assert(starts(r, "HTTP/1.1 502") || starts(r, "HTTP/1.1 504"), "%s", r);
	free(r);
	ev = wait_event("egress", "s1", 2);
	cr_assert_str_eq(str(ev, "rule"), "egress.resolve");
	cr_assert(strstr(str(ev, "reason"), "nothing.invalid"), "%s", str(ev, "reason"));
	json_decref(ev);
}

Test(egress_proxy, connect_failure_502_and_timeout_504)
{
	struct dg_egress_opts o = {.connect_timeout_ms = 300};
	up_with(&o, true);
	char *r = roundtrip(p1, "GET http://refused.test/ HTTP/1.1\r\nHost: refused.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 502 Bad Gateway\r\n"), "%s", r);
	cr_assert(strstr(r, "Connection refused"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow"); /* decided; the origin failed */
	json_decref(ev);
	ev = wait_event("egress_closed", "s1", 1);
	cr_assert(strstr(str(ev, "error"), "answered 502"), "%s", str(ev, "error"));
	json_decref(ev);

	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = roundtrip(p1, "CONNECT slow.test:80 HTTP/1.1\r\n\r\n", NULL);
	long long ms = ms_since(&t0);
	cr_assert(starts(r, "HTTP/1.1 504 Gateway Timeout\r\n"), "%s", r);
	cr_assert(strstr(r, "longer than 300 ms"), "%s", r);
	cr_assert_geq(ms, 250);
	free(r);
}

Test(egress_proxy, connection_cap_at_its_boundary)
{
	up();
	int fds[DG_EGRESS_SESSION_CONNS_MAX];
	for (int i = 0; i < DG_EGRESS_SESSION_CONNS_MAX; i++) {
		fds[i] = dial(p1);
		send_str(fds[i], "GET http://allowed.test/ HTTP/1.1\r\n"); /* head not finished */
	}
	/* One more than the cap is answered 429. */
	int extra = dial(p1);
	char *r = read_all(extra, NULL);
	close(extra);
	cr_assert(starts(r, "HTTP/1.1 429 Too Many Requests\r\n"), "%s", r);
	cr_assert(strstr(r, "X-Deskgate-Rule: egress.caps"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", DG_EGRESS_SESSION_CONNS_MAX + 1);
	cr_assert_str_eq(str(ev, "rule"), "egress.caps");
	cr_assert(strstr(str(ev, "reason"), "64 connections open (cap 64)"), "%s",
		  str(ev, "reason"));
	json_decref(ev);
	/* The cap-th connection itself is served. */
	int last = DG_EGRESS_SESSION_CONNS_MAX - 1;
	send_str(fds[last], "Host: allowed.test\r\n\r\n");
	r = read_all(fds[last], NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	free(r);
	close(fds[last]);
	ev = wait_event("egress_closed", "s1", DG_EGRESS_SESSION_CONNS_MAX);
	json_decref(ev);
	/* Below the cap again: a new connection is served. */
	r = roundtrip(p1, "GET http://allowed.test/again HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		      NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	free(r);
	for (int i = 0; i < last; i++)
		close(fds[i]);
	/* Each unfinished head is reported as such when its client leaves. */
	ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "rule"), "egress.request");
	cr_assert(strstr(str(ev, "reason"), "before the request head was complete"), "%s",
		  str(ev, "reason"));
	json_decref(ev);
}

Test(egress_proxy, byte_cap_at_its_boundary)
{
	const char *req = "GET /size/1000 HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
	const char *req2 = "GET /size/1001 HTTP/1.1\r\nHost: allowed.test\r\n\r\n";
	char h[128];
	size_t answer = (size_t)resp_head(h, sizeof(h), 1000) + 1000;
	struct dg_egress_opts o = {.session_bytes_max = strlen(req) + answer};
	up_with(&o, true);
	int p2 = add_session("s2");

	/* s1: exactly the cap goes through and ends cleanly. */
	int fd = tunnel(p1, "allowed.test:80");
	send_str(fd, req);
	size_t n;
	char *r = read_all(fd, &n);
	close(fd);
	cr_assert_eq(n, answer);
	free(r);
	json_t *ev = wait_event("egress_closed", "s1", 1);
	cr_assert(json_is_null(json_object_get(ev, "error")), "%s", str(ev, "error"));
	cr_assert_eq(num(ev, "bytes_up") + num(ev, "bytes_down"), (long long)o.session_bytes_max);
	json_decref(ev);
	/* ... and the session has nothing left. */
	r = roundtrip(p1, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 429"), "%s", r);
	free(r);
	ev = wait_event("egress", "s1", 2);
	cr_assert_str_eq(str(ev, "rule"), "egress.caps");
	json_decref(ev);

	/* s2: one byte more than the cap is cut. */
	fd = tunnel(p2, "allowed.test:80");
	send_str(fd, req2);
	r = read_all(fd, &n);
	close(fd);
	cr_assert_lt(n, answer + 1);
	free(r);
	ev = wait_event("egress", "s2", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	json_decref(ev);
	ev = wait_event("egress", "s2", 1);
	cr_assert_str_eq(str(ev, "verdict"), "deny");
	cr_assert_str_eq(str(ev, "rule"), "egress.caps");
	json_decref(ev);
	ev = wait_event("egress_closed", "s2", 1);
	cr_assert(strstr(str(ev, "error"), "cap of"), "%s", str(ev, "error"));
	/* The read that passed the cap is not relayed at all. */
	cr_assert_leq(num(ev, "bytes_up") + num(ev, "bytes_down"), (long long)o.session_bytes_max);
	cr_assert_lt(num(ev, "bytes_down"), (long long)answer + 1);
	json_decref(ev);
}

Test(egress_proxy, idle_and_head_timeouts)
{
	struct dg_egress_opts o = {.idle_timeout_ms = 300, .head_timeout_ms = 300};
	up_with(&o, true);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int fd = tunnel(p1, "allowed.test:80");
	char b[16];
	ssize_t k = recv(fd, b, sizeof(b), 0); /* nothing moves: the proxy ends it */
	long long ms = ms_since(&t0);
	cr_assert_leq(k, 0);
	cr_assert_geq(ms, 250);
	cr_assert_lt(ms, WAIT_MS);
	close(fd);
	json_t *ev = wait_event("egress_closed", "s1", 1);
	cr_assert_str_eq(str(ev, "error"), "idle for 300 ms");
	json_decref(ev);

	/* An unfinished head gets 408; a connection that sent nothing is
	 * closed without an answer or an event. */
	int part = dial(p1);
	int silent = dial(p1);
	send_str(part, "GET http://allowed.test/ HTTP/1.1\r\n");
	char *r = read_all(part, NULL);
	cr_assert(starts(r, "HTTP/1.1 408 Request Timeout\r\n"), "%s", r);
	free(r);
	r = read_all(silent, NULL);
	cr_assert_str_eq(r, "");
	free(r);
	close(part);
	close(silent);
	ev = wait_event("egress", "s1", 2);
	cr_assert_str_eq(str(ev, "rule"), "egress.request");
	cr_assert(strstr(str(ev, "reason"), "within 300 ms"), "%s", str(ev, "reason"));
	json_decref(ev);
	cr_assert_not(has_event("egress", "s1", 3, 300));
}

Test(egress_proxy, remove_closes_the_sessions_connections)
{
	up();
	int fd = tunnel(p1, "allowed.test:80");
	send_str(fd, "GET /hold HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
	json_t *ev = wait_event("egress", "s1", 1);
	json_decref(ev);
	struct dg_err err = {{0}};
	cr_assert_eq(dg_egress_remove(&eg, "s1", &err), 0, "%s", err.msg);
	ev = wait_event("egress_session", "s1", -1);
	cr_assert_str_eq(str(ev, "op"), "remove");
	cr_assert(json_is_true(json_object_get(ev, "ok")));
	cr_assert_eq(num(ev, "closed"), 1);
	json_decref(ev);
	ev = wait_event("egress_closed", "s1", 1);
	cr_assert_str_eq(str(ev, "error"), "the session was removed");
	json_decref(ev);
	char b[16];
	cr_assert_leq(recv(fd, b, sizeof(b), 0), 0);
	close(fd);
	/* Its listener is gone too (the test closed its own copy). */
	int again = dial_try(p1);
	cr_assert_eq(again, -ECONNREFUSED, "connect after remove: %d", again);
	/* The same id can be served again, numbering its connections anew. */
	int p = add_session("s1");
	char *r = roundtrip(p, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	json_decref(ev);
}

Test(egress_proxy, hostile_client_gets_400_and_other_sessions_keep_working)
{
	up();
	int p2 = add_session("s2");
	int t = tunnel(p1, "allowed.test:80");

	int h = dial(p2);
	send_all(h, "\x00\x01GARBAGE\r\n\r\n", 13);
	char *r = read_all(h, NULL);
	close(h);
	cr_assert(starts(r, "HTTP/1.1 400 Bad Request\r\n"), "%s", r);
	cr_assert(strstr(r, "NUL"), "%s", r);
	free(r);

	/* Oversized head: more than the limit without an end. */
	size_t big = DG_EGRESS_HEAD_MAX + 4000;
	char *flood = malloc(big);
	memcpy(flood, "GET http://allowed.test/ HTTP/1.1\r\nX: ", 38);
	memset(flood + 38, 'A', big - 38);
	h = dial(p2);
	send_all(h, flood, big);
	free(flood);
	r = read_all(h, NULL);
	close(h);
	cr_assert(starts(r, "HTTP/1.1 400 Bad Request\r\n"), "%s", r);
	cr_assert(strstr(r, "longer than 16384 bytes"), "%s", r);
	free(r);

	r = roundtrip(p2, "GET http://allowed.test/ HTTP/1.1\nHost: allowed.test\n\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 400"), "%s", r);
	cr_assert(strstr(r, "bare LF"), "%s", r);
	free(r);
	r = roundtrip(p2, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 400"), "%s", r);
	cr_assert(strstr(r, "origin-form"), "%s", r);
	free(r);
	for (int conn = 1; conn <= 4; conn++) {
		json_t *ev = wait_event("egress", "s2", conn);
		cr_assert_str_eq(str(ev, "verdict"), "deny");
		cr_assert_str_eq(str(ev, "rule"), "egress.request");
		json_decref(ev);
	}
	cr_assert_eq(accepted_settled(&allowed_srv, 1), 1); /* only s1's tunnel */

	/* s1's tunnel was not disturbed. */
	send_str(t, "GET /after HTTP/1.1\r\nHost: allowed.test\r\n\r\n");
	r = read_all(t, NULL);
	close(t);
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	cr_assert(strstr(r, "GET /after HTTP/1.1"), "%s", r);
	free(r);
}

Test(egress_proxy, control_message_errors_are_reported_and_ignored)
{
	up();
	cr_assert_eq(dg_seq_send(eg.fd, "{bad", 4, NULL, 0), 0);
	json_t *ev = wait_event("egress_error", NULL, -1);
	cr_assert(strstr(str(ev, "error"), "valid session id"), "%s", str(ev, "error"));
	json_decref(ev);
	const char *frob = "{\"op\":\"frob\",\"session\":\"s1\"}";
	cr_assert_eq(dg_seq_send(eg.fd, frob, strlen(frob), NULL, 0), 0);
	ev = wait_event("egress_error", NULL, -1);
	cr_assert(strstr(str(ev, "error"), "unknown op"), "%s", str(ev, "error"));
	json_decref(ev);
	const char *bad_id = "{\"op\":\"remove\",\"session\":\"../X\"}";
	cr_assert_eq(dg_seq_send(eg.fd, bad_id, strlen(bad_id), NULL, 0), 0);
	ev = wait_event("egress_error", NULL, -1);
	json_decref(ev);

	/* add: a duplicate, no descriptor, a descriptor that is not a listener */
	int port;
	int l = tcp_listener(8, &port);
	struct dg_err err = {{0}};
	cr_assert_eq(dg_egress_add(&eg, "s1", l, NULL, &err), 0, "%s", err.msg);
	close(l);
	ev = wait_event("egress_session", "s1", -1);
	cr_assert(json_is_false(json_object_get(ev, "ok")));
	cr_assert(strstr(str(ev, "error"), "already served"), "%s", str(ev, "error"));
	json_decref(ev);
	const char *nofd = "{\"op\":\"add\",\"session\":\"s3\"}";
	cr_assert_eq(dg_seq_send(eg.fd, nofd, strlen(nofd), NULL, 0), 0);
	ev = wait_event("egress_session", "s3", -1);
	cr_assert(strstr(str(ev, "error"), "exactly one descriptor"), "%s", str(ev, "error"));
	json_decref(ev);
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	cr_assert_eq(dg_egress_add(&eg, "s3", sp[0], NULL, &err), 0, "%s", err.msg);
	ev = wait_event("egress_session", "s3", -1);
	cr_assert(strstr(str(ev, "error"), "not a listening socket"), "%s", str(ev, "error"));
	json_decref(ev);
	close(sp[0]);
	close(sp[1]);
	cr_assert_eq(dg_egress_remove(&eg, "nope", &err), 0, "%s", err.msg);
	ev = wait_event("egress_session", "nope", -1);
	cr_assert(json_is_false(json_object_get(ev, "ok")));
	json_decref(ev);
	/* The caller's side refuses bad ids before sending. */
	cr_assert_eq(dg_egress_add(&eg, "Bad Id", 0, NULL, &err), -EINVAL);
	cr_assert_eq(dg_egress_remove(&eg, "", &err), -EINVAL);

	/* Still serving. */
	char *r = roundtrip(p1, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
}

Test(egress_proxy, event_queue_is_bounded_and_counts_drops)
{
	up();
	/* The gateway reads nothing while clients make far more events than
	 * the channel and the queue hold. */
	const int requests = DG_EGRESS_EVENTS_MAX;
	for (int i = 0; i < requests; i++) {
		char *r = roundtrip(p1, "GET http://denied.test/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
				    NULL);
		cr_assert(starts(r, "HTTP/1.1 403"), "request %d: %s", i, r);
		free(r);
	}
	/* Every event is either delivered or counted as dropped. */
	long long delivered = 0, dropped = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (delivered + dropped < 2LL * requests && ms_since(&t0) < 10000) {
		pump_events(100);
		size_t i;
		json_t *ev;
		json_array_foreach(stash, i, ev) {
			if (matches(ev, "egress_dropped", NULL, -1))
				dropped += num(ev, "dropped");
			else if (matches(ev, "egress", "s1", -1) || matches(ev, "egress_closed", "s1", -1))
				delivered++;
		}
		json_array_clear(stash);
	}
	cr_assert_eq(delivered + dropped, 2LL * requests, "delivered %lld dropped %lld", delivered,
		     dropped);
	cr_assert_gt(dropped, 0, "nothing was dropped: the test did not fill the queue");
	cr_assert_geq(delivered, DG_EGRESS_EVENTS_MAX);
	/* And the proxy goes on. */
	char *r = roundtrip(p1, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", requests + 1);
	json_decref(ev);
}

Test(egress_proxy, runs_unprivileged_as_its_own_uid)
{
	up();
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)eg.pid);
	FILE *f = fopen(path, "r");
	cr_assert(f, "%s: %s", path, strerror(errno));
	char line[512], want[128];
	bool uid = false, gid = false, groups = false, capeff = false, capprm = false;
	while (fgets(line, sizeof(line), f)) {
		uint32_t id = dg_instance_egress_uid();
		snprintf(want, sizeof(want), "Uid:\t%u\t%u\t%u\t%u\n", id, id, id, id);
		if (starts(line, "Uid:"))
			uid = strcmp(line, want) == 0;
		want[0] = 'G';
		if (starts(line, "Gid:"))
			gid = strcmp(line, want) == 0;
		if (starts(line, "Groups:"))
			groups = strspn(line + 7, " \t\n") == strlen(line + 7);
		if (starts(line, "CapEff:"))
			capeff = strspn(line + 7, "\t0\n") == strlen(line + 7);
		if (starts(line, "CapPrm:"))
			capprm = strspn(line + 7, "\t0\n") == strlen(line + 7);
	}
	fclose(f);
	cr_assert(uid, "uid is not the instance's egress uid");
	cr_assert(gid, "gid is not the instance's egress uid");
	cr_assert(groups, "supplementary groups remain");
	cr_assert(capeff && capprm, "capabilities remain");
}

Test(egress_proxy, policy_without_rules_allows_nothing)
{
	up_with(NULL, false);
	char *r = roundtrip(p1, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", "s1", 1);
	cr_assert_str_eq(str(ev, "rule"), "egress.default");
	cr_assert(strstr(str(ev, "reason"), "no rules"), "%s", str(ev, "reason"));
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 0), 0);
}

/* Closes the channel with a tunnel open; the proxy must exit 0. Without
 * the filter (no_seccomp), LeakSanitizer checks the proxy's memory as it
 * exits and a leak makes the status non-zero. */
static void exits_cleanly(bool filtered)
{
	struct dg_egress_opts o = {.no_seccomp = !filtered};
	up_with(&o, true);
	int fd = tunnel(p1, "allowed.test:80"); /* open work does not keep it alive */
	close(eg.fd);
	eg.fd = -1;
	int st = 0;
	pid_t got = 0;
	for (int i = 0; i < 300 && got == 0; i++) {
		got = waitpid(eg.pid, &st, WNOHANG);
		if (got == 0)
			usleep(10000);
	}
	cr_assert_eq(got, eg.pid, "the proxy did not exit");
	eg.pid = -1;
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
	char b[16];
	cr_assert_leq(recv(fd, b, sizeof(b), 0), 0);
	close(fd);
}

Test(egress_proxy, exits_cleanly_when_the_channel_closes)
{
	exits_cleanly(true);
}

Test(egress_proxy, exits_cleanly_without_the_filter_leak_checked)
{
	exits_cleanly(false);
}

Test(egress_proxy, start_refuses_bad_overrides)
{
	struct dg_policy pol;
	dg_policy_default(&pol);
	const char *bad[] = {"allowed.test=127.0.0.1:1"};
	struct dg_egress_opts o = {.resolve = bad, .n_resolve = 1};
	struct dg_err err = {{0}};
	struct dg_egress e;
	cr_assert_eq(dg_egress_start(&e, &pol, &o, &err), -EINVAL);
	cr_assert(strstr(err.msg, "resolve override"), "%s", err.msg);
	cr_assert_eq(e.pid, -1);
	o.n_resolve = DG_EGRESS_OVERRIDES_MAX + 1;
	cr_assert_eq(dg_egress_start(&e, &pol, &o, &err), -EINVAL);
	cr_assert_eq(dg_egress_start(&e, NULL, NULL, &err), -EINVAL);
}

/* Descriptors the proxy holds open. */
static int proxy_fds(void)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)eg.pid);
	DIR *d = opendir(path);
	cr_assert(d, "%s: %s", path, strerror(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

Test(egress_proxy, refusals_beyond_the_cap_are_bounded_too)
{
	up();
	int held[DG_EGRESS_SESSION_CONNS_MAX + DG_EGRESS_SESSION_REFUSING_MAX];
	int n = 0;
	for (int i = 0; i < DG_EGRESS_SESSION_CONNS_MAX; i++)
		held[n++] = dial(p1); /* within the cap, heads never sent */
	/* The next REFUSING_MAX get 429 and linger (their clients neither read
	 * nor close), each holding a descriptor of the proxy's for a while. */
	for (int i = 0; i < DG_EGRESS_SESSION_REFUSING_MAX; i++)
		held[n++] = dial(p1);
	long long last = DG_EGRESS_SESSION_CONNS_MAX + DG_EGRESS_SESSION_REFUSING_MAX;
	json_t *ev = wait_event("egress", "s1", last);
	cr_assert_str_eq(str(ev, "rule"), "egress.caps");
	json_decref(ev);
	int before = proxy_fds();
	/* One more: still told 429, but closed at once, holding nothing. */
	int x = dial(p1);
	char *r = read_all(x, NULL);
	cr_assert(starts(r, "HTTP/1.1 429"), "%s", r);
	free(r);
	ev = wait_event("egress_closed", "s1", last + 1);
	json_decref(ev);
	cr_assert_eq(proxy_fds(), before);
	close(x);
	/* The lingering ones are still open (their closed events come later). */
	cr_assert_not(has_event("egress_closed", "s1", last, 0));
	for (int i = 0; i < n; i++)
		close(held[i]);
}

Test(egress_proxy, linger_is_bounded_in_bytes_and_time)
{
	up();
	/* Refused, then the client goes on sending without reading or
	 * closing: up to LINGER_BYTES the proxy keeps reading, past them it
	 * closes at once. */
	int a = dial(p1);
	send_str(a, "GET / HTTP/1.1\r\n\r\n");
	json_t *ev = wait_event("egress", "s1", 1);
	json_decref(ev);
	char *pad = calloc(1, DG_EGRESS_LINGER_BYTES + 1);
	memset(pad, 'z', DG_EGRESS_LINGER_BYTES);
	send_all(a, pad, DG_EGRESS_LINGER_BYTES);
	cr_assert_not(has_event("egress_closed", "s1", 1, 300), "closed at exactly the limit");
	send_all(a, pad, 1);
	ev = wait_event("egress_closed", "s1", 1);
	json_decref(ev);
	close(a);
	free(pad);

	/* A client that neither sends nor closes is let go after LINGER_MS. */
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int b = dial(p1);
	send_str(b, "GET / HTTP/1.1\r\n\r\n");
	cr_assert_not(has_event("egress_closed", "s1", 2, DG_EGRESS_LINGER_MS - 500));
	ev = wait_event("egress_closed", "s1", 2);
	cr_assert_geq(ms_since(&t0), DG_EGRESS_LINGER_MS - 100);
	json_decref(ev);
	close(b);
}

Test(egress_proxy, global_connection_cap)
{
	struct rlimit rl = {8192, 8192};
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	up();
	int per = DG_EGRESS_SESSION_CONNS_MAX;
	int nsess = DG_EGRESS_CONNS_MAX / per;   /* sessions that fill the cap exactly */
	cr_assert_eq(nsess * per, DG_EGRESS_CONNS_MAX);
	int *fds = calloc((size_t)DG_EGRESS_CONNS_MAX, sizeof(int));
	int n = 0;
	int ports[DG_EGRESS_CONNS_MAX / DG_EGRESS_SESSION_CONNS_MAX + 1];
	ports[0] = p1;
	for (int s = 1; s <= nsess; s++) {
		char id[16];
		snprintf(id, sizeof(id), "g%d", s);
		ports[s] = add_session(id);
	}
	int base = proxy_fds();
	for (int s = 0; s < nsess; s++)
		for (int i = 0; i < per; i++)
			fds[n++] = dial(ports[s]);
	send_str(fds[0], "GET http://allowed.test/ HTTP/1.1\r\n"); /* reported when closed */
	/* Wait until the proxy accepted every one (listeners are served in no
	 * fixed order). */
	for (int i = 0; i < 500 && proxy_fds() < base + DG_EGRESS_CONNS_MAX; i++)
		usleep(10000);
	cr_assert_eq(proxy_fds(), base + DG_EGRESS_CONNS_MAX);
	/* Session g<nsess> has no connection of its own, yet the proxy is full. */
	char last[16];
	snprintf(last, sizeof(last), "g%d", nsess);
	int x = dial(ports[nsess]);
	char *r = read_all(x, NULL);
	close(x);
	cr_assert(starts(r, "HTTP/1.1 503 Service Unavailable"), "%s", r);
	cr_assert(strstr(r, "1024 connections open (cap 1024)"), "%s", r);
	free(r);
	json_t *ev = wait_event("egress", last, 1);
	cr_assert_str_eq(str(ev, "rule"), "egress.caps");
	json_decref(ev);
	/* One connection fewer: served again. */
	close(fds[0]);
	ev = wait_event("egress_closed", "s1", 1);
	json_decref(ev);
	r = roundtrip(ports[nsess], "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		      NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	for (int i = 1; i < n; i++)
		close(fds[i]);
	free(fds);
}

Test(egress_proxy, session_slots_at_their_boundary)
{
	struct rlimit rl = {8192, 8192};
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	up(); /* s1 takes one slot */
	for (int i = 1; i < DG_EGRESS_SESSIONS_MAX; i++) {
		char id[16];
		snprintf(id, sizeof(id), "x%d", i);
		add_session(id);
	}
	int port;
	int l = tcp_listener(8, &port);
	struct dg_err err = {{0}};
	cr_assert_eq(dg_egress_add(&eg, "one-too-many", l, NULL, &err), 0, "%s", err.msg);
	close(l);
	json_t *ev = wait_event("egress_session", "one-too-many", -1);
	cr_assert(json_is_false(json_object_get(ev, "ok")));
	cr_assert(strstr(str(ev, "error"), "all 256 session slots"), "%s", str(ev, "error"));
	json_decref(ev);
	/* Removing one frees its slot. */
	cr_assert_eq(dg_egress_remove(&eg, "x7", &err), 0, "%s", err.msg);
	ev = wait_event("egress_session", "x7", -1);
	json_decref(ev);
	add_session("one-more");
}

/* ---- supervision helpers: numbering across proxies, the spawner's start ---------- */

Test(egress_proxy, conns_before_continues_the_numbering)
{
	up();
	int port;
	int l = tcp_listener(8, &port);
	struct dg_policy pol;
	struct dg_err err = {{0}};
	const char *text = "{\"version\": 1, \"default\": \"deny\", "
			   "\"egress\": {\"allow\": [\"allowed.test:80\"]}}";
	cr_assert_eq(dg_policy_parse(text, strlen(text), "test", &pol, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_egress_add_after(&eg, "s2", l, &pol, 41, &err), 0, "%s", err.msg);
	close(l);
	json_t *ev = wait_event("egress_session", "s2", -1);
	cr_assert(json_is_true(json_object_get(ev, "ok")), "%s", str(ev, "error"));
	json_decref(ev);
	char *r = roundtrip(port, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	ev = wait_event("egress", "s2", 42);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	json_decref(ev);
	json_decref(wait_event("egress_closed", "s2", 42));

	/* Bounds: the client refuses past DG_EGRESS_CONN_NUMBER_MAX; the proxy
	 * refuses what a client could send anyway. */
	l = tcp_listener(8, &port);
	cr_assert_eq(dg_egress_add_after(&eg, "s3", l, NULL, DG_EGRESS_CONN_NUMBER_MAX + 1, &err),
		     -EINVAL);
	cr_assert_eq(dg_egress_add_after(&eg, "s3", l, NULL, DG_EGRESS_CONN_NUMBER_MAX, &err), 0,
		     "%s", err.msg);
	ev = wait_event("egress_session", "s3", -1);
	cr_assert(json_is_true(json_object_get(ev, "ok")), "at the bound: %s", str(ev, "error"));
	json_decref(ev);
	static const char *const bad[] = {
		"{\"op\":\"add\",\"session\":\"s4\",\"conns_before\":-1}",
		"{\"op\":\"add\",\"session\":\"s5\",\"conns_before\":9007199254740993}",
		"{\"op\":\"add\",\"session\":\"s6\",\"conns_before\":\"7\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(dg_seq_send(eg.fd, bad[i], strlen(bad[i]), &l, 1), 0);
		char id[4];
		snprintf(id, sizeof(id), "s%zu", i + 4);
		ev = wait_event("egress_session", id, -1);
		cr_assert(json_is_false(json_object_get(ev, "ok")), "%s was accepted", bad[i]);
		cr_assert(strstr(str(ev, "error"), "conns_before"), "%s", str(ev, "error"));
		json_decref(ev);
	}
	close(l);
	dg_policy_free(&pol);
}

Test(egress_proxy, spawn_uses_the_configured_options_and_always_filters)
{
	if (geteuid() != 0)
		cr_skip_test("the proxy drops from root to its own uid: run as root");
	struct dg_err err = {{0}};
	struct dg_egress e;
	cr_assert_eq(dg_egress_spawn(&e, &err), -EINVAL, "spawned before configure");
	const char *bad[] = {"allowed.test=127.0.0.1:1"};
	struct dg_egress_opts o = {.resolve = bad, .n_resolve = 1};
	cr_assert_eq(dg_egress_configure(&o, &err), -EINVAL);
	char ov[96];
	snprintf(ov, sizeof(ov), "allowed.test:80=127.0.0.1:%d", allowed_srv.port);
	const char *good[] = {ov};
	o = (struct dg_egress_opts){.resolve = good, .n_resolve = 1, .no_seccomp = true};
	cr_assert_eq(dg_egress_configure(&o, &err), 0, "%s", err.msg);
	ov[0] = 'X'; /* kept parsed: the caller's strings may go */
	cr_assert_eq(dg_egress_spawn(&eg, &err), 0, "%s", err.msg);
	char v[64];
	cr_assert_eq(dg_test_proc_status(eg.pid, "Seccomp", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "2", "no_seccomp reached a spawned proxy");
	/* Its own policy allows nothing; a session's list decides for it, and
	 * the configured override resolves. */
	int port;
	int l = tcp_listener(8, &port);
	struct dg_policy p;
	const char *text = "{\"version\": 1, \"default\": \"deny\", "
			   "\"egress\": {\"allow\": [\"allowed.test:80\"]}}";
	cr_assert_eq(dg_policy_parse(text, strlen(text), "test", &p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_egress_add(&eg, "s1", l, &p, &err), 0, "%s", err.msg);
	int l0 = tcp_listener(8, &p1);
	cr_assert_eq(dg_egress_add(&eg, "s0", l0, NULL, &err), 0, "%s", err.msg);
	close(l);
	close(l0);
	dg_policy_free(&p);
	json_decref(wait_event("egress_session", "s1", -1));
	json_decref(wait_event("egress_session", "s0", -1));
	char *r = roundtrip(port, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	r = roundtrip(p1, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden"), "the default policy allowed: %s", r);
	free(r);
}

/* ---- the proxy's seccomp filter ---------------------------------------------------- */

Test(egress_proxy, runs_under_its_own_seccomp_filter)
{
	up();
	char v[64];
	cr_assert_eq(dg_test_proc_status(eg.pid, "Seccomp", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "2", "the proxy has no seccomp filter");
	cr_assert_eq(dg_test_proc_status(eg.pid, "Seccomp_filters", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1");
	/* It serves under it: absolute-form, CONNECT, a name looked up in
	 * /etc/hosts by getaddrinfo_a's thread (refused: loopback). */
	char *r = roundtrip(p1, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
			    NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK"), "%s", r);
	free(r);
	int fd = tunnel(p1, "allowed.test:80");
	send_str(fd, "GET /t HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n");
	r = read_all(fd, NULL);
	cr_assert(starts(r, "HTTP/1.1 200 OK") && strstr(r, "server allowed"), "%s", r);
	free(r);
	close(fd);
	r = roundtrip(p1, "GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n", NULL);
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden"), "%s", r);
	cr_assert(strstr(r, "localhost resolves to 127.0.0.1"), "%s", r);
	free(r);
	int st = 0;
	cr_assert_eq(waitpid(eg.pid, &st, WNOHANG), 0, "the proxy died under its filter");
}

/* The filter in a forked child: each call below must kill it (SIGSYS), and
 * the control must run to its end. */
static int try_execve(void)
{
	char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
	execve("/bin/true", argv, envp);
	return 0;
}
static int try_ptrace(void)
{
	return (int)syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0) * 0;
}
static int try_mount(void)
{
	return (int)syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, NULL) * 0;
}
static int try_packet(void)
{
	return socket(AF_PACKET, SOCK_RAW, 0) * 0;
}
static int try_raw_inet(void)
{
	return socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) * 0;
}
static int try_fork(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	return 0;
}
static int try_write_open(void)
{
	return (int)syscall(SYS_openat, AT_FDCWD, "/tmp/dg-egress-filter", O_WRONLY | O_CREAT, 0600) * 0;
}
static int try_bind(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	return bind(fd, (struct sockaddr *)&a, sizeof(a)) * 0;
}
static int try_kill_other(void)
{
	return kill(getppid(), 0) * 0;
}
static int try_x32(void)
{
	return (int)syscall(0x40000000 | SYS_getpid) * 0;
}
static int try_unshare(void)
{
	return (int)syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */) * 0;
}
static int try_socketpair(void)
{
	int sv[2];
	return socketpair(AF_UNIX, SOCK_STREAM, 0, sv) * 0;
}

static int under_filter(int (*fn)(void))
{
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0) {
		struct dg_err err = {{0}};
		if (dg_egress_seccomp_install(&err) != 0) {
			fprintf(stderr, "install: %s\n", err.msg);
			_exit(100);
		}
		_exit(fn());
	}
	int st = 0;
	cr_assert_eq(waitpid(p, &st, 0), p);
	return st;
}

Test(egress_proxy, seccomp_filter_kills_forbidden_calls)
{
	static const struct {
		const char *what;
		int (*fn)(void);
	} calls[] = {
		{"execve", try_execve},       {"ptrace", try_ptrace},
		{"mount", try_mount},         {"socket(AF_PACKET)", try_packet},
		{"socket(AF_INET, SOCK_RAW)", try_raw_inet},
		{"fork", try_fork},           {"openat for writing", try_write_open},
		{"bind", try_bind},           {"kill of another process", try_kill_other},
		{"an x32 syscall", try_x32},  {"unshare(CLONE_NEWUSER)", try_unshare},
		{"socketpair", try_socketpair},
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		int st = under_filter(calls[i].fn);
		cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS,
			  "%s under the proxy's filter: status %#x, not killed by SIGSYS", calls[i].what,
			  st);
	}
}

static void *thread_main(void *arg)
{
	return arg;
}

/* What the proxy needs, step by step: the exit code names the first step
 * that failed (0: all passed). */
static int allowed_calls(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 1;
	close(fd);
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	if (fd < 0)
		return 2;
	close(fd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 3;
	close(fd);
	if (socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0) != -1 || errno != EAFNOSUPPORT)
		return 4;
	if (syscall(435 /* clone3 */, NULL, 0) != -1 || errno != ENOSYS)
		return 5;
	static int token;
	pthread_t t;
	void *back = NULL;
	if (pthread_create(&t, NULL, thread_main, &token) != 0 || pthread_join(t, &back) != 0 ||
	    back != &token)
		return 6;
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	if (getaddrinfo("localhost", "80", &hints, &res) != 0 || !res)
		return 7;
	freeaddrinfo(res);
	fd = open("/etc/hosts", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 8;
	close(fd);
	if (kill(getpid(), 0) != 0)
		return 9;
	return 0;
}

Test(egress_proxy, seccomp_filter_allows_what_the_proxy_needs)
{
	int st = under_filter(allowed_calls);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "under the proxy's filter: status %#x (exit %d names the step that failed)", st,
		  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* ---- the SOCKS5 front: the browser's WebSockets (issue 14) ------------------------ */

/* A session "ws" whose own policy allows allowed.test:80 and denied.test:80
 * at the egress layer, and decides WebSocket URLs with "urls". */
static int add_ws_session(const char *id, const char *urls)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"version\": 1, \"default\": \"deny\", \"urls\": %s, "
		 "\"egress\": {\"allow\": [\"allowed.test:80\", \"denied.test:80\"]}}", urls);
	struct dg_policy own;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_policy_parse(text, strlen(text), "ws", &own, &err), 0, "%s", err.msg);
	int port;
	int fd = tcp_listener(16, &port);
	cr_assert_eq(dg_egress_add(&eg, id, fd, &own, &err), 0, "%s", err.msg);
	close(fd);
	dg_policy_free(&own);
	json_t *ev = wait_event("egress_session", id, -1);
	cr_assert(json_is_true(json_object_get(ev, "ok")), "add failed: %s", str(ev, "error"));
	json_decref(ev);
	return port;
}

static const char ws_urls[] =
	"{\"allow\": [\"http://allowed.test/**\"], \"ask\": [\"http://allowed.test/ask/**\"], "
	"\"deny\": [\"http://allowed.test/secret/**\"]}";

/* Reads exactly n bytes (the SOCKS answers). */
static void read_exact(int fd, unsigned char *b, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t k = recv(fd, b + got, n - got, 0);
		cr_assert_gt(k, 0, "the proxy closed after %zu of %zu bytes", got, n);
		got += (size_t)k;
	}
}

/* SOCKS5 as Chromium speaks it: no authentication, CONNECT to a name.
 * Returns the reply code; *fd stays open (the tunnel when 0). */
static int socks_connect(int port, const char *host, int hport, int *fd)
{
	*fd = dial(port);
	send_all(*fd, "\x05\x01\x00", 3);
	unsigned char m[2];
	read_exact(*fd, m, 2);
	cr_assert(m[0] == 5 && m[1] == 0, "method answer %02x %02x", m[0], m[1]);
	unsigned char req[300] = {5, 1, 0, 3, (unsigned char)strlen(host)};
	memcpy(req + 5, host, strlen(host));
	size_t n = 5 + strlen(host);
	req[n++] = (unsigned char)(hport >> 8);
	req[n++] = (unsigned char)hport;
	send_all(*fd, req, n);
	unsigned char rep[10];
	read_exact(*fd, rep, 10);
	cr_assert_eq(rep[0], 5);
	return rep[1];
}

static char *ws_handshake(int port, const char *path)
{
	int fd;
	cr_assert_eq(socks_connect(port, "allowed.test", 80, &fd), 0);
	char req[512];
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: allowed.test\r\nConnection: Upgrade\r\nUpgrade: "
		 "websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: "
		 "dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", path);
	send_str(fd, req);
	char *r = read_all(fd, NULL);
	close(fd);
	return r;
}

/* The URL decision of a connection ("decision" event), checked. */
static void expect_ws_decision(const char *session, long long conn, const char *url,
			       const char *verdict, const char *rule)
{
	json_t *ev = wait_event("decision", session, conn);
	cr_assert_str_eq(str(ev, "layer"), "browser");
	cr_assert_str_eq(str(ev, "resource"), "WebSocket");
	if (url)
		cr_assert_str_eq(str(ev, "url"), url);
	else
		cr_assert(json_is_null(json_object_get(ev, "url")));
	cr_assert_str_eq(str(ev, "verdict"), verdict, "%s: %s", url, str(ev, "reason"));
	cr_assert_str_eq(str(ev, "rule"), rule);
	json_decref(ev);
}

Test(egress_proxy, socks_ws_decided_by_url_before_the_origin_sees_it)
{
	up();
	int port = add_ws_session("ws", ws_urls);
	/* Denied and "ask" paths: answered 403 in the tunnel, the origin never
	 * connected. */
	char *r = ws_handshake(port, "/secret/x?leak=1");
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	cr_assert(strstr(r, "X-Deskgate-Rule: urls.deny[0] http://allowed.test/secret/**\r\n"), "%s", r);
	free(r);
	expect_ws_decision("ws", 1, "ws://allowed.test/secret/x?leak=1", "deny",
			   "urls.deny[0] http://allowed.test/secret/**");
	r = ws_handshake(port, "/ask/y");
	cr_assert(starts(r, "HTTP/1.1 403 Forbidden\r\n"), "%s", r);
	free(r);
	json_t *ev = wait_event("decision", "ws", 2);
	cr_assert_str_eq(str(ev, "verdict"), "deny");
	cr_assert_str_eq(str(ev, "rule"), "urls.ask[0] http://allowed.test/ask/**");
	cr_assert(strstr(str(ev, "reason"), "cannot wait"), "%s", str(ev, "reason"));
	json_decref(ev);
	/* An escaped letter is no way around the deny. */
	r = ws_handshake(port, "/%73ecret/z");
	cr_assert(starts(r, "HTTP/1.1 403"), "%s", r);
	free(r);
	cr_assert_eq(accepted_settled(&allowed_srv, 0), 0, "a refused handshake reached the origin");
	cr_assert(!has_event("egress", "ws", 1, 0), "a refused WebSocket had an egress allow");

	/* An allowed path: the origin reads the handshake as the browser sent it. */
	r = ws_handshake(port, "/ok/chat?room=1");
	cr_assert(starts(r, "HTTP/1.1 200 OK\r\n"), "%s", r);
	cr_assert(strstr(r, "server allowed\nGET /ok/chat?room=1 HTTP/1.1\r\nHost: allowed.test\r\n"
			 "Connection: Upgrade\r\nUpgrade: websocket\r\n"), "%s", r);
	free(r);
	expect_ws_decision("ws", 4, "ws://allowed.test/ok/chat?room=1", "allow",
			   "urls.allow[0] http://allowed.test/**");
	ev = wait_event("egress", "ws", 4);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	cr_assert_str_eq(str(ev, "method"), "SOCKS5");
	cr_assert_str_eq(str(ev, "target"), "allowed.test:80");
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 1), 1);
}

Test(egress_proxy, socks_egress_rules_still_apply)
{
	up();
	int port = add_ws_session("ws", ws_urls);
	int fd;
	cr_assert_eq(socks_connect(port, "other.test", 80, &fd), 0x02);
	close(fd);
	json_t *ev = wait_event("egress", "ws", 1);
	cr_assert_str_eq(str(ev, "verdict"), "deny");
	cr_assert_str_eq(str(ev, "rule"), "egress.default");
	json_decref(ev);
	/* denied.test is allowed by "egress" but by no "urls" pattern. */
	cr_assert_eq(socks_connect(port, "denied.test", 80, &fd), 0);
	send_str(fd, "GET / HTTP/1.1\r\nHost: denied.test\r\nUpgrade: websocket\r\n\r\n");
	char *r = read_all(fd, NULL);
	close(fd);
	cr_assert(starts(r, "HTTP/1.1 403"), "%s", r);
	cr_assert(strstr(r, "X-Deskgate-Rule: default\r\n"), "%s", r);
	free(r);
	expect_ws_decision("ws", 2, "ws://denied.test/", "deny", "default");
	cr_assert_eq(accepted_settled(&denied_srv, 0), 0);
}

Test(egress_proxy, socks_wss_decided_by_origin_only)
{
	up();
	/* allowed.test's verdict depends on the path: an encrypted handshake
	 * (a TLS record first) cannot be decided, and is refused. */
	int port = add_ws_session("ws", "{\"allow\": [\"https://allowed.test:80/**\"], "
				       "\"deny\": [\"https://allowed.test:80/secret/*\"]}");
	int fd;
	cr_assert_eq(socks_connect(port, "allowed.test", 80, &fd), 0);
	send_all(fd, "\x16\x03\x01\x00\x05hello", 10);
	char *r = read_all(fd, NULL);
	close(fd);
	free(r);
	json_t *ev = wait_event("decision", "ws", 1);
	cr_assert(json_is_null(json_object_get(ev, "url")));
	cr_assert_str_eq(str(ev, "origin"), "wss://allowed.test:80");
	cr_assert_str_eq(str(ev, "verdict"), "deny");
	cr_assert_str_eq(str(ev, "rule"), "urls.websocket_path");
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 0), 0);
	/* Every path of the origin allowed: the TLS bytes go through. */
	int p2 = add_ws_session("ws2", "{\"allow\": [\"https://allowed.test:80/**\"]}");
	cr_assert_eq(socks_connect(p2, "allowed.test", 80, &fd), 0);
	send_all(fd, "\x16\x03\x01\x01\x05hello\r\n\r\n", 14); /* no NUL: the server reads text */
	shutdown(fd, SHUT_WR);
	r = read_all(fd, NULL);
	close(fd);
	cr_assert(strstr(r, "server allowed\n\x16\x03\x01"), "%s", r);
	free(r);
	ev = wait_event("decision", "ws2", 1);
	cr_assert_str_eq(str(ev, "verdict"), "allow");
	cr_assert_str_eq(str(ev, "rule"), "urls.allow[0] https://allowed.test:80/**");
	json_decref(ev);
	cr_assert_eq(accepted_settled(&allowed_srv, 1), 1);
}

Test(egress_proxy, socks_hostile_clients)
{
	up();
	int port = add_ws_session("ws", ws_urls);
	unsigned char b[10];
	/* No "no authentication" method: answered "no acceptable method". */
	int fd = dial(port);
	send_all(fd, "\x05\x01\x02", 3);
	read_exact(fd, b, 2);
	cr_assert(b[0] == 5 && b[1] == 0xff);
	close(fd);
	/* BIND, an IPv6 address, a bad host name, a reserved byte. */
	const struct { const char *req; size_t n; unsigned char code; } bad[] = {
		{"\x05\x02\x00\x03\x0c" "allowed.test\x00\x50", 19, 0x07},
		{"\x05\x01\x00\x04" "0123456789abcdef\x00\x50", 22, 0x08},
		{"\x05\x01\x00\x03\x0c" "ALLOWED.test\x00\x50", 19, 0x01},
		{"\x05\x01\x00\x03\x0d" "allowed.test/\x00\x50", 20, 0x01},
		{"\x05\x01\x01\x03\x0c" "allowed.test\x00\x50", 19, 0x01},
		{"\x05\x01\x00\x03\x0c" "allowed.test\x00\x00", 19, 0x01},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = dial(port);
		send_all(fd, "\x05\x01\x00", 3);
		read_exact(fd, b, 2);
		send_all(fd, bad[i].req, bad[i].n);
		read_exact(fd, b, 10);
		cr_assert_eq(b[1], bad[i].code, "request %zu: code %02x", i, b[1]);
		close(fd);
	}
	/* In the tunnel: neither a handshake nor TLS; a GET without Upgrade; a
	 * Host that is not the tunnel's; a dot segment; a POST. */
	const char *tunnel_bad[][2] = {
		{"\x01\x02\x03\r\n\r\n", "WebSockets only"},
		{"GET /ok HTTP/1.1\r\nHost: allowed.test\r\n\r\n", "Upgrade: websocket"},
		{"GET /ok HTTP/1.1\r\nHost: denied.test\r\nUpgrade: websocket\r\n\r\n", "does not name"},
		{"GET /a/../secret/x HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n", "dot segment"},
		{"POST /ok HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n", "GET"},
		{"GET http://allowed.test/ok HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: websocket\r\n\r\n", "not a path"},
		{"GET /ok HTTP/1.1\r\nHost: allowed.test\r\nUpgrade: h2c\r\n\r\n", "Upgrade header"},
	};
	for (size_t i = 0; i < sizeof(tunnel_bad) / sizeof(tunnel_bad[0]); i++) {
		cr_assert_eq(socks_connect(port, "allowed.test", 80, &fd), 0);
		send_str(fd, tunnel_bad[i][0]);
		char *r = read_all(fd, NULL);
		close(fd);
		cr_assert(starts(r, "HTTP/1.1 400"), "case %zu: %s", i, r);
		cr_assert(strstr(r, tunnel_bad[i][1]), "case %zu: %s", i, r);
		free(r);
	}
	cr_assert_eq(accepted_settled(&allowed_srv, 0), 0);
}
