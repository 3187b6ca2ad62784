/* cdp against a real Chromium in a real jail: the desktop API starts Xvnc
 * and Chromium (--remote-debugging-pipe) and hands over the pipe ends; the
 * test runs its own poll loop over them, as the worker does.
 *
 * Note: dg_desktop_start/dg_desktop_destroy belong to the desktop launch code
 * (the lead's) and may still change slightly; only what is needed here is
 * used: the profile, the limits and the two DevTools descriptors.
 *
 * Pages are data: URLs until the policy issue replaces them with loopback
 * servers behind the egress proxy. Timings are printed on stderr.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp-priv.h"
#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "dg_test.h"

#define PAGE_A "data:text/html,<title>hello</title><h1>x</h1>"
#define PAGE_B "data:text/html,<title>second</title><h1>y</h1>"
#define STEP_TIMEOUT 8.0 /* seconds for any one step; a browser step takes ~0.2 s */

struct rec {
	int calls;
	int status;
	char msg[512];
	json_t *result;
	double at;
};

static void rec_done(void *arg, int status, json_t *result, const char *msg)
{
	struct rec *r = arg;
	r->calls++;
	r->status = status;
	r->at = dg_test_now();
	snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
	json_decref(r->result);
	r->result = result ? json_incref(result) : NULL;
}

static void rec_reset(struct rec *r)
{
	json_decref(r->result);
	memset(r, 0, sizeof(*r));
}

struct browser {
	struct dg_policy policy;
	struct dg_desktop d;
	struct dg_cdp *c;
	int last_rc;             /* last dg_cdp_handle result */
	struct dg_err err;
	double t_first_message;  /* when the first message arrived */
	/* The order of page events around a navigation, for the report. */
	char trace[2048];
	double t_stopped;        /* when the last Page.frameStoppedLoading came */
};

static void trace_event(void *arg, const char *method, const char *session, json_t *params)
{
	(void)params;
	struct browser *b = arg;
	if (!session || strncmp(method, "Page.", 5) != 0)
		return;
	if (strcmp(method, "Page.frameStoppedLoading") == 0)
		b->t_stopped = dg_test_now();
	size_t l = strlen(b->trace);
	snprintf(b->trace + l, sizeof(b->trace) - l, "%s ", method + 5);
}

/* Runs the client's poll loop until cond(arg) or the timeout; returns
 * whether cond held. Stops early when the pipe closed. */
static bool run_until(struct browser *b, bool (*cond)(struct browser *, void *), void *arg,
		      double timeout)
{
	double end = dg_test_now() + timeout;
	while (!cond(b, arg)) {
		double left = end - dg_test_now();
		if (left <= 0 || dg_cdp_closed(b->c))
			return cond(b, arg);
		struct pollfd pfd[2];
		dg_cdp_pollfds(b->c, pfd);
		int n = poll(pfd, 2, (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			cr_assert_fail("poll: %s", strerror(errno));
		if (n > 0) {
			b->last_rc = dg_cdp_handle(b->c, pfd, &b->err);
			struct dg_cdp_stats s;
			dg_cdp_stats(b->c, &s);
			if (s.messages > 0 && !b->t_first_message)
				b->t_first_message = dg_test_now();
		}
	}
	return true;
}

static bool rec_called(struct browser *b, void *arg)
{
	(void)b;
	return ((struct rec *)arg)->calls > 0;
}

static bool loaded_with_title(struct browser *b, void *arg)
{
	return !dg_cdp_loading(b->c) && strcmp(dg_cdp_title(b->c), (const char *)arg) == 0;
}

static bool not_loading(struct browser *b, void *arg)
{
	(void)arg;
	return !dg_cdp_loading(b->c);
}

static bool is_closed(struct browser *b, void *arg)
{
	(void)arg;
	return dg_cdp_closed(b->c);
}

static void browser_start(struct browser *b)
{
	memset(b, 0, sizeof(*b));
	dg_policy_default(&b->policy);
	struct dg_desktop_spec spec = {.profile = DG_PROFILE_BROWSER,
				       .width = DG_DESKTOP_WIDTH_DEFAULT,
				       .height = DG_DESKTOP_HEIGHT_DEFAULT,
				       .limits = &b->policy.limits};
	struct dg_err err = {{0}};
	double t0 = dg_test_now();
	cr_assert_eq(dg_desktop_start(&spec, &b->d, &err), 0, "desktop: %s", err.msg);
	double t1 = dg_test_now();
	cr_assert_geq(b->d.io.cdp_out_fd, 0);
	cr_assert_geq(b->d.io.cdp_in_fd, 0);
	/* The client owns the pipe ends from here. */
	b->c = dg_cdp_new(b->d.io.cdp_out_fd, b->d.io.cdp_in_fd);
	b->d.io.cdp_out_fd = b->d.io.cdp_in_fd = -1;
	cr_assert(b->c);
	dg_cdp_set_event_handler(b->c, trace_event, b);
	struct rec started = {0};
	cr_assert_eq(dg_cdp_start(b->c, rec_done, &started, &err), 0, "%s", err.msg);
	cr_assert(run_until(b, rec_called, &started, 15.0), "no page attached after 15 s (%s)",
		  dg_cdp_last_error(b->c));
	cr_assert_eq(started.status, 0, "start: %s", started.msg);
	cr_assert(dg_cdp_ready(b->c));
	fprintf(stderr,
		"timing: desktop start %.0f ms; Chromium spawn (X ready) to first DevTools "
		"message %.0f ms; to page attached %.0f ms\n",
		(t1 - t0) * 1e3, (b->t_first_message - t1) * 1e3, (started.at - t1) * 1e3);
}

static void browser_stop(struct browser *b)
{
	dg_cdp_free(b->c);
	b->c = NULL;
	dg_desktop_destroy(&b->d);
}

/* Navigates and waits for the load and the expected title. Returns the ms
 * from the command to the load (URL and title current); *reply_ms (may be
 * NULL) gets the ms to the command's reply. */
static double navigate_wait_ms(struct browser *b, const char *url, const char *title,
			       double *reply_ms, double *stopped_ms)
{
	struct rec r = {0};
	b->trace[0] = '\0';
	double t0 = dg_test_now();
	cr_assert_eq(dg_cdp_navigate(b->c, url, rec_done, &r, &b->err), 0, "%s", b->err.msg);
	cr_assert(dg_cdp_loading(b->c));
	cr_assert(run_until(b, rec_called, &r, STEP_TIMEOUT), "navigate: no reply");
	cr_assert_eq(r.status, 0, "navigate %s: %d %s", url, r.status, r.msg);
	cr_assert(run_until(b, loaded_with_title, (void *)title, STEP_TIMEOUT),
		  "navigate %s: loading %d, title \"%s\"", url, dg_cdp_loading(b->c),
		  dg_cdp_title(b->c));
	double ms = (dg_test_now() - t0) * 1e3;
	if (reply_ms)
		*reply_ms = (r.at - t0) * 1e3;
	if (stopped_ms)
		*stopped_ms = (b->t_stopped - t0) * 1e3;
	rec_reset(&r);
	return ms;
}

static void navigate_wait(struct browser *b, const char *url, const char *title)
{
	navigate_wait_ms(b, url, title, NULL, NULL);
}

/* Runs a history/reload command and waits for the title. */
static void step_wait(struct browser *b, int (*cmd)(struct dg_cdp *, dg_cdp_done_fn, void *,
						     struct dg_err *),
		      const char *what, const char *title)
{
	struct rec r = {0};
	cr_assert_eq(cmd(b->c, rec_done, &r, &b->err), 0, "%s: %s", what, b->err.msg);
	cr_assert(run_until(b, rec_called, &r, STEP_TIMEOUT), "%s: no reply", what);
	cr_assert_eq(r.status, 0, "%s: %d %s", what, r.status, r.msg);
	cr_assert(run_until(b, loaded_with_title, (void *)title, STEP_TIMEOUT),
		  "%s: loading %d, title \"%s\", want \"%s\"", what, dg_cdp_loading(b->c),
		  dg_cdp_title(b->c), title);
	rec_reset(&r);
}

Test(cdp_browser, navigate_reports_url_and_title, .timeout = 30)
{
	signal(SIGPIPE, SIG_DFL);
	struct browser b;
	browser_start(&b);
	cr_assert_str_eq(dg_cdp_url(b.c), "about:blank");
	uint64_t ch = dg_cdp_changes(b.c), loads = dg_cdp_loads(b.c);
	double ms[3], reply[3], stopped[3];
	ms[0] = navigate_wait_ms(&b, PAGE_A, "hello", &reply[0], &stopped[0]);
	fprintf(stderr, "page events during navigate: %s\n", b.trace);
	cr_assert_str_eq(dg_cdp_url(b.c), PAGE_A);
	cr_assert_gt(dg_cdp_changes(b.c), ch);
	cr_assert_gt(dg_cdp_loads(b.c), loads);
	ms[1] = navigate_wait_ms(&b, PAGE_B, "second", &reply[1], &stopped[1]);
	ms[2] = navigate_wait_ms(&b, PAGE_A, "hello", &reply[2], &stopped[2]);
	fprintf(stderr,
		"timing: Page.navigate of a data: URL: reply %.0f, %.0f, %.0f ms; "
		"frameStoppedLoading %.0f, %.0f, %.0f ms; loaded with URL and title %.0f, %.0f, "
		"%.0f ms\n",
		reply[0], reply[1], reply[2], stopped[0], stopped[1], stopped[2], ms[0], ms[1], ms[2]);
	struct dg_cdp_stats s;
	dg_cdp_stats(b.c, &s);
	cr_assert_eq(s.errors, 0, "%s", dg_cdp_last_error(b.c));
	cr_assert_eq(s.unknown_ids, 0);
	browser_stop(&b);
}

Test(cdp_browser, back_forward_reload, .timeout = 30)
{
	struct browser b;
	browser_start(&b);
	navigate_wait(&b, PAGE_A, "hello");
	navigate_wait(&b, PAGE_B, "second");
	step_wait(&b, dg_cdp_back, "back", "hello");
	cr_assert_str_eq(dg_cdp_url(b.c), PAGE_A);
	step_wait(&b, dg_cdp_forward, "forward", "second");
	cr_assert_str_eq(dg_cdp_url(b.c), PAGE_B);
	uint64_t loads = dg_cdp_loads(b.c);
	step_wait(&b, dg_cdp_reload, "reload", "second");
	cr_assert_gt(dg_cdp_loads(b.c), loads, "reload loads the page again");
	/* Forward at the end of history: no next page. */
	struct rec r = {0};
	cr_assert_eq(dg_cdp_forward(b.c, rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	cr_assert_eq(r.status, -ENOENT, "%d %s", r.status, r.msg);
	cr_assert_str_eq(r.msg, "no next page");
	rec_reset(&r);
	/* Back to the start (about:blank), then no previous page. */
	step_wait(&b, dg_cdp_back, "back", "hello");
	/* The tab title of a page without one is its URL. */
	step_wait(&b, dg_cdp_back, "back", "about:blank");
	cr_assert_str_eq(dg_cdp_url(b.c), "about:blank");
	cr_assert_eq(dg_cdp_back(b.c, rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	cr_assert_eq(r.status, -ENOENT, "%d %s", r.status, r.msg);
	cr_assert_str_eq(r.msg, "no previous page");
	rec_reset(&r);
	browser_stop(&b);
}

static bool title_is(struct browser *b, void *arg)
{
	return strcmp(dg_cdp_title(b->c), (const char *)arg) == 0;
}

Test(cdp_browser, evaluate_and_title_change, .timeout = 30)
{
	struct browser b;
	browser_start(&b);
	navigate_wait(&b, PAGE_A, "hello");
	struct rec r = {0};
	double t0 = dg_test_now();
	cr_assert_eq(dg_cdp_evaluate(b.c, "6 * 7", rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	fprintf(stderr, "timing: Runtime.evaluate round trip %.1f ms\n", (r.at - t0) * 1e3);
	cr_assert_eq(r.status, 0, "%s", r.msg);
	cr_assert_eq(json_integer_value(json_object_get(r.result, "value")), 42);
	rec_reset(&r);

	uint64_t ch = dg_cdp_changes(b.c);
	cr_assert_eq(dg_cdp_evaluate(b.c, "document.title = \"set-by-test\"", rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	cr_assert_eq(r.status, 0, "%s", r.msg);
	cr_assert_str_eq(json_string_value(json_object_get(r.result, "value")), "set-by-test");
	rec_reset(&r);
	cr_assert(run_until(&b, title_is, "set-by-test", STEP_TIMEOUT), "title is \"%s\"",
		  dg_cdp_title(b.c));
	cr_assert_gt(dg_cdp_changes(b.c), ch, "the change is reported");
	cr_assert_str_eq(dg_cdp_url(b.c), PAGE_A);

	/* A title longer than the bound comes back cut. */
	cr_assert_eq(dg_cdp_evaluate(b.c, "document.title = 'T'.repeat(5000)", rec_done, &r, &b.err),
		     0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	rec_reset(&r);
	char want[DG_CDP_TITLE_MAX + 1];
	memset(want, 'T', DG_CDP_TITLE_MAX);
	want[DG_CDP_TITLE_MAX] = '\0';
	cr_assert(run_until(&b, title_is, want, STEP_TIMEOUT), "title of %zu bytes",
		  strlen(dg_cdp_title(b.c)));

	/* A script that throws. */
	cr_assert_eq(dg_cdp_evaluate(b.c, "throw new Error('boom')", rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	cr_assert_eq(r.status, -EREMOTEIO);
	cr_assert(strstr(r.msg, "boom"), "%s", r.msg);
	rec_reset(&r);
	browser_stop(&b);
}

Test(cdp_browser, failed_navigation_keeps_client_usable, .timeout = 30)
{
	struct browser b;
	browser_start(&b);
	struct rec r = {0};
	/* The jail has no network and Chromium resolves no name. */
	cr_assert_eq(dg_cdp_navigate(b.c, "http://nonexistent.invalid/", rec_done, &r, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &r, STEP_TIMEOUT));
	fprintf(stderr, "invalid navigation: status %d \"%s\"\n", r.status, r.msg);
	cr_assert(r.status == -EREMOTEIO || r.status == 0, "%d %s", r.status, r.msg);
	if (r.status == -EREMOTEIO)
		cr_assert(strncmp(r.msg, "net::ERR_", 9) == 0, "%s", r.msg);
	rec_reset(&r);
	/* Whatever Chromium shows for it (an error page), the load ends. */
	cr_assert(run_until(&b, not_loading, NULL, STEP_TIMEOUT), "still loading");
	fprintf(stderr, "invalid navigation: then url \"%s\" title \"%s\"\n", dg_cdp_url(b.c),
		dg_cdp_title(b.c));
	/* Still usable. */
	navigate_wait(&b, PAGE_B, "second");
	cr_assert_str_eq(dg_cdp_url(b.c), PAGE_B);
	struct dg_cdp_stats s;
	dg_cdp_stats(b.c, &s);
	cr_assert_eq(s.errors, 0, "%s", dg_cdp_last_error(b.c));
	browser_stop(&b);
}

Test(cdp_browser, browser_gone_fails_pending_with_epipe, .timeout = 30)
{
	signal(SIGPIPE, SIG_DFL);
	struct browser b;
	browser_start(&b);
	struct rec hang = {0}, late = {0};
	/* A promise that never settles: its reply never comes. */
	json_t *params = json_pack("{sssb}", "expression", "new Promise(() => {})", "awaitPromise", 1);
	cr_assert_eq(dg_cdp_send(b.c, "Runtime.evaluate", params, dg_cdp_session_id(b.c), rec_done,
				 &hang, &b.err),
		     0, "%s", b.err.msg);
	/* Let it reach the browser. */
	struct rec probe = {0};
	cr_assert_eq(dg_cdp_evaluate(b.c, "1", rec_done, &probe, &b.err), 0);
	cr_assert(run_until(&b, rec_called, &probe, STEP_TIMEOUT));
	rec_reset(&probe);
	cr_assert_eq(hang.calls, 0);
	/* Kill everything in the jail, Chromium included. */
	double t0 = dg_test_now();
	dg_desktop_destroy(&b.d);
	cr_assert(run_until(&b, is_closed, NULL, STEP_TIMEOUT));
	fprintf(stderr, "timing: desktop destroyed to EPIPE seen %.0f ms\n", (dg_test_now() - t0) * 1e3);
	cr_assert_eq(b.last_rc, -EPIPE, "handle: %d %s", b.last_rc, b.err.msg);
	cr_assert(strstr(b.err.msg, "closed"), "%s", b.err.msg);
	cr_assert_eq(hang.calls, 1);
	cr_assert_eq(hang.status, -EPIPE, "%d %s", hang.status, hang.msg);
	cr_assert_not(dg_cdp_ready(b.c));
	cr_assert_eq(dg_cdp_navigate(b.c, PAGE_A, rec_done, &late, &b.err), -EPIPE);
	cr_assert_eq(late.calls, 0);
	rec_reset(&hang);
	browser_stop(&b);
}
