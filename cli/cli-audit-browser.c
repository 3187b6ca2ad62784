/* `deskgate audit`, the browser's paths around the `urls` rules: a bait
 * site on the host's loopback (reached through the egress proxy under a
 * test-only name, as `deskgate test --live --test-resolve` does), a fresh
 * browser desktop under a policy that allows the site but denies its
 * /secret/ paths, and the two ways around a Fetch-only guard that a
 * red-team pass found: a page's (and a worker's) WebSockets to a denied
 * path, and a denied URL typed into the omnibox and opened in a new tab
 * with alt+Enter. The bait's log says what arrived. The same run under a
 * policy without the deny is the control: there /secret/ must arrive, or
 * the probe proves nothing. See cli-priv.h. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli-priv.h"
#include "policy/policy.h"

/* The page: WebSockets from the page and from a dedicated worker to an
 * allowed and a denied path. */
static const char bait_page[] =
	"<!doctype html><title>deskgate audit bait</title><script>\n"
	"for (const p of ['/ok/page', '/secret/page'])\n"
	"  try { new WebSocket('ws://' + location.host + p); } catch (e) {}\n"
	"try { new Worker('/worker.js'); } catch (e) {}\n"
	"</script>bait";
static const char bait_worker[] =
	"for (const p of ['/ok/worker', '/secret/worker'])\n"
	"  try { new WebSocket('ws://' + location.host + p); } catch (e) {}\n";

/* One connection of the bait: its request head so far, and until when it
 * may take to arrive. */
struct bait_conn {
	int fd;
	long long deadline_ms;
	size_t n;
	char buf[DG_AUDIT_BAIT_HEAD_MAX];
};

struct bait {
	int fd, port;
	pthread_t thread;
	bool serving;      /* the thread runs (bait_serve) */
	pthread_mutex_t mu;
	bool stop;
	/* the probe's side: */
	bool progress;
	const char *label; /* "control" or "deny" */
	long long t0_ms;
	char log[DG_AUDIT_BAIT_LOG_MAX]; /* request lines, '\n'-separated */
	size_t len;
	struct bait_conn conns[DG_AUDIT_BAIT_CONNS]; /* the serving thread's own */
};

static void bait_log(struct bait *b, const char *line, size_t n)
{
	pthread_mutex_lock(&b->mu);
	if (b->len + n + 2 < sizeof(b->log)) {
		memcpy(b->log + b->len, line, n);
		b->len += n;
		b->log[b->len++] = '\n';
		b->log[b->len] = '\0';
	}
	pthread_mutex_unlock(&b->mu);
}

/* A complete (or bounded-out) head: logs its first line and answers the
 * page, the worker, or 404 (a WebSocket handshake gets 404 too: that it
 * arrived is what counts). */
static void bait_answer(struct bait *b, struct bait_conn *c)
{
	c->buf[c->n] = '\0';
	size_t first = strcspn(c->buf, "\r\n");
	if (first == 0)
		return;
	bait_log(b, c->buf, first);
	const char *body = NULL, *type = "text/html";
	if (strncmp(c->buf, "GET /page.html", 14) == 0)
		body = bait_page;
	else if (strncmp(c->buf, "GET /worker.js ", 15) == 0)
		body = bait_worker, type = "text/javascript";
	char head[256];
	int hl = snprintf(head, sizeof(head),
			  "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			  "Connection: close\r\n\r\n",
			  body ? "200 OK" : "404 Not Found", type, body ? strlen(body) : 0);
	if (write(c->fd, head, (size_t)hl) < 0 || (body && write(c->fd, body, strlen(body)) < 0))
		return;
}

static void bait_drop(struct bait_conn *conns, int *n, int i)
{
	close(conns[i].fd);
	conns[i] = conns[--*n];
}

/* Serves every connection at once: the browser keeps some open without a
 * request (preconnects), and one of those must not hold up the WebSocket
 * handshakes the probe waits for. Bounded: DG_AUDIT_BAIT_CONNS at once,
 * each DG_AUDIT_BAIT_HEAD_MS to send its head. */
static void *bait_main(void *arg)
{
	struct bait *b = arg;
	struct bait_conn *conns = b->conns;
	int n = 0;
	for (;;) {
		pthread_mutex_lock(&b->mu);
		bool stop = b->stop;
		pthread_mutex_unlock(&b->mu);
		if (stop)
			break;
		struct pollfd p[DG_AUDIT_BAIT_CONNS + 1];
		p[0] = (struct pollfd){b->fd, n < DG_AUDIT_BAIT_CONNS ? POLLIN : 0, 0};
		for (int i = 0; i < n; i++)
			p[i + 1] = (struct pollfd){conns[i].fd, POLLIN, 0};
		int np = n;
		if (poll(p, (nfds_t)np + 1, 100) < 0)
			continue;
		long long t = dg_now_ms();
		for (int i = np - 1; i >= 0; i--) {
			struct bait_conn *c = &conns[i];
			if (p[i + 1].revents) {
				ssize_t k = read(c->fd, c->buf + c->n, sizeof(c->buf) - 1 - c->n);
				if (k <= 0) {
					bait_drop(conns, &n, i);
					continue;
				}
				c->n += (size_t)k;
			}
			if (memmem(c->buf, c->n, "\r\n\r\n", 4) || c->n == sizeof(c->buf) - 1 ||
			    t >= c->deadline_ms) {
				bait_answer(b, c);
				bait_drop(conns, &n, i);
			}
		}
		if (p[0].revents & POLLIN) {
			int fd = accept4(b->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
			if (fd >= 0) {
				conns[n] = (struct bait_conn){.fd = fd, .deadline_ms = t + DG_AUDIT_BAIT_HEAD_MS};
				n++;
			}
		}
	}
	while (n > 0)
		bait_drop(conns, &n, n - 1);
	return NULL;
}

/* The bait site's socket (its port goes into the policy); served by a
 * thread only while a browser runs (bait_serve). */
static int bait_listen(struct bait *b, struct dg_err *err)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->mu, NULL);
	b->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	if (b->fd < 0 || bind(b->fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(b->fd, 64) != 0 || getsockname(b->fd, (struct sockaddr *)&a, &al) != 0) {
		int e = errno;
		if (b->fd >= 0)
			close(b->fd);
		pthread_mutex_destroy(&b->mu);
		return dg_err_set(err, -e, "audit: the bait site on 127.0.0.1: %s", strerror(e));
	}
	b->port = ntohs(a.sin_port);
	return 0;
}

/* Serves the bait site from a thread. Called only once the browser's
 * session is open: its processes (the egress proxy, the jail, the worker)
 * are forked from this process, and a fork while another thread runs
 * leaves the child with that thread's locks held and nobody to release
 * them (the egress proxy twice did not start within its 5 s, only in the
 * runs with the bait thread). bait_halt before the session is closed or
 * another is opened. */
static int bait_serve(struct bait *b, struct dg_err *err)
{
	b->stop = false;
	int r = pthread_create(&b->thread, NULL, bait_main, b);
	if (r != 0)
		return dg_err_set(err, -r, "audit: the bait site's thread: %s", strerror(r));
	b->serving = true;
	return 0;
}

static void bait_halt(struct bait *b)
{
	if (!b->serving)
		return;
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->thread, NULL);
	b->serving = false;
}

static void bait_close(struct bait *b)
{
	bait_halt(b);
	close(b->fd);
	pthread_mutex_destroy(&b->mu);
}

static bool bait_saw(struct bait *b, const char *needle)
{
	pthread_mutex_lock(&b->mu);
	bool seen = strstr(b->log, needle) != NULL;
	pthread_mutex_unlock(&b->mu);
	return seen;
}

/* With --progress: one line per step of a bait run, as it ends. */
static void bait_say(const struct bait *b, long long since_ms, const char *what, const char *detail)
{
	if (!b->progress)
		return;
	long long now = dg_now_ms();
	fprintf(stderr, "deskgate audit:   bait (%s) %7.1f s  %s %s (%.1f s)\n", b->label,
		(double)(now - b->t0_ms) / 1000.0, what, detail, (double)(now - since_ms) / 1000.0);
}

static int live_step(struct dg_rec_live *live, const char *action_json, struct dg_err *err)
{
	json_error_t je;
	json_t *step = json_pack("{s:o}", "action", json_loads(action_json, 0, &je));
	if (!step || !json_is_object(json_object_get(step, "action"))) {
		json_decref(step);
		return dg_err_set(err, -EINVAL, "audit: bad step %s", action_json);
	}
	struct dg_rec_live_result res;
	memset(&res, 0, sizeof(res));
	int r = live->step(live->arg, step, &res, err);
	json_decref(step);
	if (r == 0 && res.verdict != DG_VERDICT_ALLOW)
		r = dg_err_set(err, -EPERM, "audit: the step %s was refused by %s", action_json,
			       res.rule);
	return r;
}

/* ctrl+l, the URL typed, alt+Return: the omnibox opens it in a new tab.
 * The pauses let the omnibox take focus and settle its suggestion. */
static int omnibox(struct bait *b, struct dg_rec_live *live, const char *path, struct dg_err *err)
{
	long long t = dg_now_ms();
	int port = b->port;
	char act[512];
	snprintf(act, sizeof(act), "{\"type\":\"type\",\"text\":\"http://" DG_AUDIT_BAIT_HOST
		 ":%d%s\"}", port, path);
	int r = live_step(live, "{\"type\":\"key\",\"keys\":\"ctrl+l\"}", err);
	if (r == 0)
		r = live_step(live, "{\"type\":\"wait\",\"ms\":" DG_AUDIT_OMNIBOX_PAUSE_MS "}", err);
	if (r == 0)
		r = live_step(live, act, err);
	if (r == 0)
		r = live_step(live, "{\"type\":\"wait\",\"ms\":" DG_AUDIT_OMNIBOX_PAUSE_MS "}", err);
	if (r == 0)
		r = live_step(live, "{\"type\":\"key\",\"keys\":\"alt+Return\"}", err);
	bait_say(b, t, "omnibox", r ? err->msg : path);
	return r;
}

/* Waits (bounded) until the bait saw needle; true when it did. The wait
 * is the worker's "wait" action, not a sleep: the browser's requests are
 * held until the worker's owner decides them, and the owner (this process)
 * decides only while a step runs. A sleep left the page's worker script
 * and a new tab's first request unanswered under load. */
static bool bait_wait(struct bait *b, struct dg_rec_live *live, const char *needle, int ms)
{
	struct dg_err err = {{0}};
	long long t = dg_now_ms();
	for (long long end = t + ms; !bait_saw(b, needle) && dg_now_ms() < end;) {
		if (live_step(live, "{\"type\":\"wait\",\"ms\":" DG_AUDIT_BAIT_POLL_MS "}", &err))
			break;
	}
	bool seen = bait_saw(b, needle);
	char what[128];
	snprintf(what, sizeof(what), "%s%s", needle, seen ? "arrived" : "did not arrive");
	bait_say(b, t, "wait", err.msg[0] ? err.msg : what);
	return seen;
}

/* One run: a fresh browser desktop under policy p, the page loaded
 * until both allowed WebSockets arrived (a page that did not run them, on
 * a slow machine, is loaded again), then the omnibox, denied URL first and
 * an allowed one after (tried again until the allowed one arrives). A
 * browser whose reload never reaches the bait has lost its network (seen
 * under heavy load): the run ends there with 1, and a fresh one may do
 * better. 0 when it ran to the end, a negative errno when a step could not
 * run. What arrived is in the bait's log. */
static int bait_run(struct bait *b, const struct dg_policy *p, const char *resolve,
		    struct dg_err *err)
{
	struct dg_rec_live live = {0};
	long long t0 = dg_now_ms();
	int r = dg_cli_live_open(p, "browser", resolve, &live, err);
	if (r)
		return r;
	if ((r = bait_serve(b, err)))
		goto out;
	bait_say(b, t0, "browser", "started");
	long long tries_end = dg_now_ms() + DG_AUDIT_BAIT_TRIES_MS;
	bool ran = false;
	for (int i = 0; i < DG_AUDIT_PAGE_TRIES && !ran && (i == 0 || dg_now_ms() < tries_end);
	     i++) {
		char act[512], page[64];
		snprintf(act, sizeof(act), "{\"type\":\"navigate\",\"url\":\"http://" DG_AUDIT_BAIT_HOST
			 ":%d/page.html?try=%d\"}", b->port, i);
		long long t = dg_now_ms();
		r = live_step(&live, act, err);
		bait_say(b, t, "navigate", r ? err->msg : "page.html");
		if (r)
			goto out;
		snprintf(page, sizeof(page), "GET /page.html?try=%d ", i);
		if (!bait_wait(b, &live, page, DG_AUDIT_BAIT_WAIT_MS)) {
			r = 1;
			goto out;
		}
		bool ok_page = bait_wait(b, &live, "GET /ok/page ", DG_AUDIT_BAIT_WAIT_MS);
		ran = bait_wait(b, &live, "GET /ok/worker ", DG_AUDIT_BAIT_WAIT_MS) && ok_page;
	}
	bait_wait(b, &live, "GET /secret/page ", DG_AUDIT_BAIT_AFTER_MS);
	bait_wait(b, &live, "GET /secret/worker ", DG_AUDIT_BAIT_AFTER_MS);
	/* The denied URL first, then an allowed one the same way: its arrival
	 * shows the keys did open a tab, so a missing denied one means held. */
	bool opened = false;
	for (int i = 0; i < DG_AUDIT_OMNIBOX_TRIES && !opened && (i == 0 || dg_now_ms() < tries_end);
	     i++) {
		if ((r = omnibox(b, &live, "/secret/omnibox.html", err)) ||
		    (r = omnibox(b, &live, "/ok/omnibox.html", err)))
			goto out;
		opened = bait_wait(b, &live, "GET /ok/omnibox.html ", DG_AUDIT_BAIT_WAIT_MS);
	}
	/* Late arrivals count: what the bait saw by the end decides. */
	bait_wait(b, &live, "GET /secret/omnibox.html ", DG_AUDIT_BAIT_AFTER_MS);
out:
	bait_halt(b);
	dg_cli_live_close(&live);
	return r;
}

int dg_audit_browser_paths(const struct dg_limits *lim, bool deny, bool progress,
			   struct dg_audit_bait_seen *seen, struct dg_err *err)
{
	memset(seen, 0, sizeof(*seen));
	struct bait *b = malloc(sizeof(*b));
	if (!b)
		return dg_err_set(err, -ENOMEM, "audit: out of memory");
	int r = bait_listen(b, err);
	if (r) {
		free(b);
		return r;
	}
	b->progress = progress;
	b->label = deny ? "deny" : "control";
	b->t0_ms = dg_now_ms();
	char text[2048], resolve[128], deny_rule[160] = "";
	if (deny)
		snprintf(deny_rule, sizeof(deny_rule),
			 ", \"deny\": [\"http://" DG_AUDIT_BAIT_HOST ":%d/secret/**\"]", b->port);
	snprintf(text, sizeof(text),
		 "{\"version\": 1, \"default\": \"allow\",\n"
		 " \"limits\": {\"memory_mb\": %llu, \"pids\": %u, \"cpus\": %g, \"scratch_mb\": %llu},\n"
		 " \"urls\": {\"allow\": [\"http://" DG_AUDIT_BAIT_HOST ":%d/**\"]%s},\n"
		 " \"egress\": {\"allow\": [\"" DG_AUDIT_BAIT_HOST ":%d\"]}}\n",
		 (unsigned long long)lim->memory_mb, lim->pids, lim->cpus,
		 (unsigned long long)lim->scratch_mb, b->port, deny_rule, b->port);
	snprintf(resolve, sizeof(resolve), DG_AUDIT_BAIT_HOST ":%d=127.0.0.1:%d", b->port, b->port);
	struct dg_policy p;
	if ((r = dg_policy_parse(text, strlen(text), "<audit bait policy>", &p, err)))
		goto out;
	/* A run that did not show the page, its worker and a tab opened from
	 * the omnibox proves less than it could: a fresh browser runs again.
	 * The bait's log spans every run: an allowed twin seen in one run and
	 * its denied twin in none is the finding; a denied one seen in any run
	 * is a leak. */
	for (int run = 0; run < DG_AUDIT_BAIT_RUNS; run++) {
		seen->runs = run + 1;
		if ((r = bait_run(b, &p, resolve, err)) < 0)
			break;
		if (bait_saw(b, "GET /ok/page ") && bait_saw(b, "GET /ok/worker ") &&
		    bait_saw(b, "GET /ok/omnibox.html "))
			break;
	}
	if (r > 0)
		r = 0;
	seen->ok_page = bait_saw(b, "GET /ok/page ");
	seen->ok_worker = bait_saw(b, "GET /ok/worker ");
	seen->ok_omnibox = bait_saw(b, "GET /ok/omnibox.html ");
	seen->secret_page = bait_saw(b, "GET /secret/page ");
	seen->secret_worker = bait_saw(b, "GET /secret/worker ");
	seen->secret_omnibox = bait_saw(b, "GET /secret/omnibox.html ");
	pthread_mutex_lock(&b->mu);
	snprintf(seen->log, sizeof(seen->log), "%s", b->log);
	pthread_mutex_unlock(&b->mu);
	for (char *c = seen->log; *c; c++)
		if (*c == '\n')
			*c = ';';
	dg_policy_free(&p);
out:
	bait_close(b);
	free(b);
	return r;
}
