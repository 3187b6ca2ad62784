/* cdp: the DevTools pipe client against a fake browser (no Chromium).
 *
 * The test plays Chromium's side of --remote-debugging-pipe with two pipes:
 * it reads the commands the client writes (NUL-terminated JSON) and writes
 * replies and events, some well-formed, many hostile: split at every byte,
 * several in one read, exactly at and one byte over DG_CDP_MSG_MAX, malformed
 * JSON and wrong types, ids never issued, oversized URLs and titles, more
 * targets and commands than the caps, a pipe that closes mid-message, and a
 * reader that stops reading (back-pressure).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdp-priv.h"
#include "dg_fake_cdp.h"
#include "dg_test.h"

/* ---- the fake browser (tests/support/dg_fake_cdp.h) ---- */

static struct dg_err err;

/* The next command, which must be `method` (on any session); returns its id. */
static json_int_t expect_cmd(struct dg_fake_cdp *f, const char *method, json_t **out)
{
	return dg_fake_cdp_expect(f, method, NULL, out);
}

/* A navigation's command: the client first gives the page the focus
 * (Page.bringToFront, answered here), then sends `method`; returns its id. */
static json_int_t expect_nav_cmd(struct dg_fake_cdp *f, const char *method, json_t **out)
{
	json_int_t id = expect_cmd(f, "Page.bringToFront", NULL);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	return expect_cmd(f, method, out);
}


/* A Page event about frame_id on a session. */
static void page_event(struct dg_fake_cdp *f, const char *session, const char *method,
		       const char *frame_id)
{
	dg_fake_cdp_sendf(f, "{\"method\":\"%s\",\"sessionId\":\"%s\",\"params\":{\"frameId\":\"%s\"}}",
	      method, session, frame_id);
}

/* Answers the client's title refresh (Target.getTargetInfo for target). */
static void answer_info(struct dg_fake_cdp *f, const char *target, const char *url, const char *title)
{
	json_t *cmd;
	json_int_t id = expect_cmd(f, "Target.getTargetInfo", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "targetId")),
			 target);
	cr_assert_null(json_object_get(cmd, "sessionId"));
	json_decref(cmd);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{\"targetInfo\":{\"targetId\":\"%s\",\"type\":\"page\","
		 "\"title\":\"%s\",\"url\":\"%s\"}}}",
	      (long long)id, target, title, url);
}

/* Plays the start: discovery, one page T1 (about:blank), attach, Page.enable. */
static void attach(struct dg_fake_cdp *f)
{
	cr_assert_eq(dg_cdp_start(f->c, NULL, NULL, &err), 0, "%s", err.msg);
	json_int_t id = expect_cmd(f, "Target.setDiscoverTargets", NULL);
	dg_fake_cdp_sendf(f, "{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":{\"targetId\":"
		 "\"T1\",\"type\":\"page\",\"title\":\"\",\"url\":\"about:blank\",\"attached\":false}}}");
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{}}", (long long)id);
	json_t *cmd;
	id = expect_cmd(f, "Target.attachToTarget", &cmd);
	json_t *params = json_object_get(cmd, "params");
	cr_assert_str_eq(json_string_value(json_object_get(params, "targetId")), "T1");
	cr_assert(json_is_true(json_object_get(params, "flatten")));
	json_decref(cmd);
	cr_assert_not(dg_cdp_ready(f->c));
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S1\"}}", (long long)id);
	id = expect_cmd(f, "Page.enable", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(cmd, "sessionId")), "S1");
	json_decref(cmd);
	cr_assert_not(dg_cdp_ready(f->c));
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert(dg_cdp_ready(f->c));
	answer_info(f, "T1", "about:blank", "about:blank");
	cr_assert_str_eq(dg_cdp_target_id(f->c), "T1");
	cr_assert_str_eq(dg_cdp_session_id(f->c), "S1");
	cr_assert_str_eq(dg_cdp_url(f->c), "about:blank");
	dg_fake_cdp_none(f);
}

/* jansson accepts only valid UTF-8. */
static bool utf8_ok(const char *s)
{
	json_t *j = json_string(s);
	json_decref(j);
	return j != NULL;
}

static struct dg_cdp_stats stats(struct dg_fake_cdp *f)
{
	struct dg_cdp_stats s;
	dg_cdp_stats(f->c, &s);
	return s;
}

/* ---- completion and event recorders ---- */

struct rec {
	int calls;
	int status;
	char msg[512];
	json_t *result;
};

static void rec_done(void *arg, int status, json_t *result, const char *msg)
{
	struct rec *r = arg;
	r->calls++;
	r->status = status;
	snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : "");
	json_decref(r->result);
	r->result = result ? json_incref(result) : NULL;
}

static void rec_free(struct rec *r)
{
	json_decref(r->result);
	r->result = NULL;
}

struct evrec {
	int calls;
	char method[128];
	char session[80];
	json_t *params;
};

static void ev_record(void *arg, const char *method, const char *session, json_t *params)
{
	struct evrec *e = arg;
	e->calls++;
	snprintf(e->method, sizeof(e->method), "%s", method);
	snprintf(e->session, sizeof(e->session), "%s", session ? session : "");
	cr_assert(json_is_object(params));
	json_decref(e->params);
	e->params = json_incref(params);
}

/* A user command on the browser session; returns the id the client used. */
static json_int_t send_user(struct dg_fake_cdp *f, struct rec *r)
{
	int rc = dg_cdp_send(f->c, "Browser.getVersion", NULL, NULL, rec_done, r, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	return expect_cmd(f, "Browser.getVersion", NULL);
}

/* ---- framing ---- */

Test(cdp, start_attaches_first_page)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	struct rec started = {0};
	cr_assert_eq(dg_cdp_start(f.c, rec_done, &started, &err), 0);
	cr_assert_eq(dg_cdp_start(f.c, NULL, NULL, &err), -EALREADY);
	json_int_t id = expect_cmd(&f, "Target.setDiscoverTargets", NULL);
	/* Not a page: never a candidate. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":{\"targetId\":"
		  "\"W1\",\"type\":\"service_worker\",\"title\":\"w\",\"url\":\"https://a/\"}}}");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)id);
	dg_fake_cdp_none(&f);
	cr_assert_eq(dg_cdp_n_targets(f.c), 0);
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":{\"targetId\":"
		  "\"P1\",\"type\":\"page\",\"title\":\"t\",\"url\":\"https://a/\"}}}");
	id = expect_cmd(&f, "Target.attachToTarget", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"sessionId\":\"SS\"}}", (long long)id);
	id = expect_cmd(&f, "Page.enable", NULL);
	cr_assert_eq(started.calls, 0);
	/* Page commands wait for Page.enable. */
	cr_assert_eq(dg_cdp_navigate(f.c, "https://b/", NULL, NULL, &err), -EAGAIN);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"SS\",\"result\":{}}", (long long)id);
	cr_assert_eq(started.calls, 1);
	cr_assert_eq(started.status, 0);
	cr_assert(dg_cdp_ready(f.c));
	cr_assert_str_eq(dg_cdp_url(f.c), "https://a/");
	cr_assert_str_eq(dg_cdp_title(f.c), "t");
	dg_fake_cdp_close(&f);
}

Test(cdp, reply_split_at_every_byte)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec r = {0};
	json_int_t id = send_user(&f, &r);
	char msg[128];
	int n = snprintf(msg, sizeof(msg), "{\"id\":%lld,\"result\":{\"product\":\"x\"}}", (long long)id);
	for (int i = 0; i <= n; i++) { /* the NUL too */
		cr_assert_eq(r.calls, 0);
		dg_fake_cdp_put(&f, msg + i, 1);
		dg_fake_cdp_pump(&f);
	}
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, 0);
	cr_assert_str_eq(json_string_value(json_object_get(r.result, "product")), "x");
	rec_free(&r);
	dg_fake_cdp_close(&f);
}

Test(cdp, several_messages_in_one_read)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec a = {0}, b = {0};
	json_int_t ia = send_user(&f, &a), ib = send_user(&f, &b);
	struct evrec ev = {0};
	dg_cdp_set_event_handler(f.c, ev_record, &ev);
	char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "{\"id\":%lld,\"result\":{\"v\":2}}%c{\"method\":\"X.y\",\"params\":{}}%c"
			 "{\"id\":%lld,\"result\":{\"v\":1}}%c{\"method\":\"X.z\"}%c",
			 (long long)ib, 0, 0, (long long)ia, 0, 0);
	dg_fake_cdp_put(&f, buf, (size_t)n);
	dg_fake_cdp_pump(&f);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(b.calls, 1);
	/* Out of order, each to its own callback. */
	cr_assert_eq(json_integer_value(json_object_get(a.result, "v")), 1);
	cr_assert_eq(json_integer_value(json_object_get(b.result, "v")), 2);
	cr_assert_eq(ev.calls, 2);
	cr_assert_str_eq(ev.method, "X.z");
	cr_assert(json_is_object(ev.params)); /* absent params: an empty object */
	cr_assert_eq(stats(&f).errors, 0);
	rec_free(&a);
	rec_free(&b);
	json_decref(ev.params);
	dg_fake_cdp_close(&f);
}

/* Writes n bytes as the browser without blocking the test: whatever the
 * pipe does not take now is written after the client has read some. */
static void put_big(struct dg_fake_cdp *f, const char *p, size_t n)
{
	int fl = fcntl(f->ev_wr, F_GETFL);
	fcntl(f->ev_wr, F_SETFL, fl | O_NONBLOCK);
	while (n > 0) {
		ssize_t w = write(f->ev_wr, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else {
			cr_assert(w < 0 && errno == EAGAIN);
		}
		dg_fake_cdp_pump(f);
	}
	fcntl(f->ev_wr, F_SETFL, fl);
	dg_fake_cdp_pump(f);
}

/* An event {"method":"Big.event","params":{"pad":"aaa..."}} of exactly len
 * bytes, NUL included at [len]. */
static char *big_event(size_t len)
{
	const char *head = "{\"method\":\"Big.event\",\"params\":{\"pad\":\"";
	const char *tail = "\"}}";
	char *s = malloc(len + 1);
	cr_assert(s);
	size_t h = strlen(head), t = strlen(tail);
	memcpy(s, head, h);
	memset(s + h, 'a', len - h - t);
	memcpy(s + len - t, tail, t);
	s[len] = '\0';
	return s;
}

Test(cdp, message_at_max_accepted_one_over_discarded)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct evrec ev = {0};
	dg_cdp_set_event_handler(f.c, ev_record, &ev);

	char *at = big_event(DG_CDP_MSG_MAX);
	put_big(&f, at, DG_CDP_MSG_MAX + 1);
	free(at);
	cr_assert_eq(ev.calls, 1, "a message of exactly DG_CDP_MSG_MAX bytes is accepted (%s)",
		     dg_cdp_last_error(f.c));
	cr_assert_str_eq(ev.method, "Big.event");
	cr_assert_eq(stats(&f).errors, 0);

	char *over = big_event(DG_CDP_MSG_MAX + 1);
	put_big(&f, over, DG_CDP_MSG_MAX + 2);
	free(over);
	cr_assert_eq(ev.calls, 1, "one byte more is discarded");
	cr_assert_eq(stats(&f).oversized, 1);
	cr_assert_eq(stats(&f).errors, 1);
	cr_assert(strstr(dg_cdp_last_error(f.c), "longer than"));

	/* Much larger still: discarded as it streams, and the next one works. */
	size_t huge = 3 * (size_t)DG_CDP_MSG_MAX;
	char *h = malloc(huge);
	memset(h, '{', huge);
	put_big(&f, h, huge);
	free(h);
	put_big(&f, "\0", 1);
	cr_assert_eq(stats(&f).oversized, 2);
	dg_fake_cdp_sendf(&f, "{\"method\":\"After.big\",\"params\":{\"k\":1}}");
	cr_assert_eq(ev.calls, 2);
	cr_assert_str_eq(ev.method, "After.big");
	cr_assert(dg_cdp_ready(f.c));
	json_decref(ev.params);
	dg_fake_cdp_close(&f);
}

Test(cdp, malformed_messages_are_counted_and_skipped)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct evrec ev = {0};
	dg_cdp_set_event_handler(f.c, ev_record, &ev);
	struct rec r = {0};
	json_int_t id = send_user(&f, &r);
	const char *bad[] = {
		"",                                             /* empty */
		"{",                                            /* truncated */
		"not json",
		"[1,2,3]",                                      /* not an object */
		"\"text\"",
		"42",
		"{\"method\":\"A.b\",\"method\":\"A.c\"}",      /* duplicate key */
		"{}",                                           /* neither id nor method */
		"{\"method\":17}",
		"{\"method\":\"\"}",
		"{\"method\":\"A.b\",\"params\":[1]}",          /* params not an object */
		"{\"method\":\"A.b\",\"params\":\"x\"}",
		"{\"method\":\"A.b\",\"sessionId\":5}",
		"{\"method\":\"A.b\",\"sessionId\":\"has space\"}",
		"{\"id\":\"1\",\"result\":{}}",                 /* id as a string */
		"{\"id\":1.5,\"result\":{}}",
		"{\"id\":null,\"result\":{}}",
		"{\"method\":\"A.b\",\"params\":{\"s\":\"\\u0000\"}}", /* NUL in a string */
		"{\"method\":\"A.b\",\"params\":{\"s\":\"\xff\xfe\"}}", /* not UTF-8 */
		"{\"method\":\"Target.targetCreated\",\"params\":{}}",  /* no targetInfo */
		"{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":{\"targetId\":7,"
		"\"type\":\"page\",\"url\":\"u\",\"title\":\"t\"}}}",
		"{\"method\":\"Target.targetInfoChanged\",\"params\":{\"targetInfo\":{\"targetId\":"
		"\"T1\",\"type\":\"page\",\"url\":null,\"title\":\"t\"}}}",
		"{\"method\":\"Target.targetDestroyed\",\"params\":{\"targetId\":[]}}",
		"{\"method\":\"Page.frameStoppedLoading\",\"sessionId\":\"S1\",\"params\":{}}",
	};
	size_t n = sizeof(bad) / sizeof(bad[0]);
	for (size_t i = 0; i < n; i++) {
		dg_fake_cdp_put(&f, bad[i], strlen(bad[i]) + 1);
		dg_fake_cdp_pump(&f);
		cr_assert_eq(stats(&f).errors, i + 1, "message %zu (%s) refused", i, bad[i]);
	}
	cr_assert_eq(ev.calls, 0, "no malformed event reached the owner (last: %s)", ev.method);
	cr_assert_eq(r.calls, 0);
	/* Deep nesting: jansson's depth limit, not our stack. */
	char deep[8192];
	memset(deep, '[', sizeof(deep) - 1);
	deep[sizeof(deep) - 1] = '\0';
	dg_fake_cdp_put(&f, deep, sizeof(deep));
	dg_fake_cdp_pump(&f);
	cr_assert_eq(stats(&f).errors, n + 1);
	/* State is intact and the pending command still completes. */
	cr_assert_str_eq(dg_cdp_url(f.c), "about:blank");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"ok\":true}}", (long long)id);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, 0);
	rec_free(&r);
	json_decref(ev.params);
	dg_fake_cdp_close(&f);
}

Test(cdp, too_many_values_refused_before_parsing)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct evrec ev = {0};
	dg_cdp_set_event_handler(f.c, ev_record, &ev);
	/* 2 bytes a value: about 40 bytes of jansson each, if it were parsed. */
	size_t values = DG_CDP_NODES_MAX + 10;
	const char *head = "{\"method\":\"A.b\",\"params\":{\"a\":[";
	size_t h = strlen(head), len = h + values * 2 + 2;
	char *s = malloc(len + 1);
	memcpy(s, head, h);
	for (size_t i = 0; i < values; i++)
		memcpy(s + h + 2 * i, "0,", 2);
	memcpy(s + h + values * 2 - 1, "0]}}", 4);
	s[len] = '\0';
	put_big(&f, s, len + 1);
	free(s);
	cr_assert_eq(ev.calls, 0);
	cr_assert_eq(stats(&f).errors, 1);
	cr_assert(strstr(dg_cdp_last_error(f.c), "JSON values"), "%s", dg_cdp_last_error(f.c));
	/* Commas inside strings are not values. */
	char *str = malloc(2 * DG_CDP_NODES_MAX + 64);
	int k = sprintf(str, "{\"method\":\"A.c\",\"params\":{\"s\":\"");
	memset(str + k, ',', (size_t)DG_CDP_NODES_MAX + 5);
	k += DG_CDP_NODES_MAX + 5;
	k += sprintf(str + k, "\\\"\"}}");
	put_big(&f, str, (size_t)k + 1);
	free(str);
	cr_assert_eq(ev.calls, 1, "%s", dg_cdp_last_error(f.c));
	json_decref(ev.params);
	dg_fake_cdp_close(&f);
}

/* ---- replies ---- */

Test(cdp, unknown_ids_and_wrong_sessions_ignored)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec r = {0};
	json_int_t id = send_user(&f, &r);
	dg_fake_cdp_sendf(&f, "{\"id\":999999,\"result\":{}}");
	dg_fake_cdp_sendf(&f, "{\"id\":0,\"result\":{}}");
	dg_fake_cdp_sendf(&f, "{\"id\":-1,\"result\":{}}");
	/* Our id, but on a session the command was not sent on. */
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert_eq(r.calls, 0);
	cr_assert_eq(stats(&f).unknown_ids, 4);
	cr_assert_eq(stats(&f).errors, 0);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)id);
	cr_assert_eq(r.calls, 1);
	/* A second reply to the same id is unknown now. */
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)id);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(stats(&f).unknown_ids, 5);
	rec_free(&r);
	dg_fake_cdp_close(&f);
}

Test(cdp, reply_errors)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec a = {0}, b = {0}, c = {0};
	json_int_t ia = send_user(&f, &a), ib = send_user(&f, &b), ic = send_user(&f, &c);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld}", (long long)ia); /* result missing */
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, -EPROTO);
	cr_assert_eq(stats(&f).errors, 1);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":[1]}", (long long)ib); /* result not an object */
	cr_assert_eq(b.status, -EPROTO);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"error\":{\"code\":-32000,\"message\":\"No\\u001b[31m way\"}}",
	      (long long)ic);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.status, -EREMOTEIO);
	cr_assert_str_eq(c.msg, "No\\x1b[31m way", "escaped: %s", c.msg);
	/* A long error text is cut (and stays UTF-8). */
	struct rec d = {0};
	json_int_t id = send_user(&f, &d);
	char longmsg[4000] = "";
	for (int i = 0; i < 500; i++)
		strcat(longmsg, "\xc3\xa9");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"error\":{\"message\":\"%s\"}}", (long long)id, longmsg);
	cr_assert_eq(d.status, -EREMOTEIO);
	cr_assert_leq(strlen(d.msg), DG_CDP_ERRTEXT_MAX);
	cr_assert(utf8_ok(d.msg), "cut text is valid UTF-8");
	rec_free(&a);
	rec_free(&b);
	rec_free(&c);
	rec_free(&d);
	dg_fake_cdp_close(&f);
}

/* ---- the current page ---- */

static void info(struct dg_fake_cdp *f, const char *method, const char *id, const char *type,
		 const char *url, const char *title)
{
	dg_fake_cdp_sendf(f, "{\"method\":\"%s\",\"params\":{\"targetInfo\":{\"targetId\":\"%s\",\"type\":"
		 "\"%s\",\"title\":\"%s\",\"url\":\"%s\"}}}",
	      method, id, type, title, url);
}

Test(cdp, url_and_title_tracking)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	uint64_t ch = dg_cdp_changes(f.c);
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://example.com/", "Example");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://example.com/");
	cr_assert_str_eq(dg_cdp_title(f.c), "Example");
	cr_assert_gt(dg_cdp_changes(f.c), ch);
	ch = dg_cdp_changes(f.c);
	/* Same info again: no change. */
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://example.com/", "Example");
	cr_assert_eq(dg_cdp_changes(f.c), ch);
	/* Other targets do not touch the current page. */
	info(&f, "Target.targetCreated", "T2", "page", "https://other/", "Other");
	info(&f, "Target.targetInfoChanged", "T2", "page", "https://other/2", "Other 2");
	info(&f, "Target.targetCreated", "F1", "iframe", "https://frame/", "Frame");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://example.com/");
	cr_assert_eq(dg_cdp_changes(f.c), ch);
	cr_assert_eq(dg_cdp_n_targets(f.c), 2);
	/* Unicode titles pass; control bytes become spaces. */
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://example.com/",
	     "caf\xc3\xa9 \xe2\x9c\x93\\n\\tend");
	cr_assert_str_eq(dg_cdp_title(f.c), "caf\xc3\xa9 \xe2\x9c\x93  end");
	dg_fake_cdp_close(&f);
}

Test(cdp, url_and_title_bounds)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	/* A URL of exactly DG_CDP_URL_MAX bytes is kept. */
	char *url = malloc(DG_CDP_URL_MAX + 2);
	strcpy(url, "https://example.com/");
	size_t p = strlen(url);
	memset(url + p, 'a', DG_CDP_URL_MAX - p);
	url[DG_CDP_URL_MAX] = '\0';
	info(&f, "Target.targetInfoChanged", "T1", "page", url, "t");
	cr_assert_eq(strlen(dg_cdp_url(f.c)), DG_CDP_URL_MAX);
	/* One more byte: refused, reported as unknown, never cut. */
	url[DG_CDP_URL_MAX] = 'a';
	url[DG_CDP_URL_MAX + 1] = '\0';
	uint64_t ch = dg_cdp_changes(f.c);
	info(&f, "Target.targetInfoChanged", "T1", "page", url, "t");
	cr_assert_str_eq(dg_cdp_url(f.c), "");
	cr_assert_gt(dg_cdp_changes(f.c), ch);
	cr_assert(dg_cdp_ready(f.c), "the page stays usable");
	free(url);
	/* Control bytes in a URL: refused too. */
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://a/\\u0001", "t");
	cr_assert_str_eq(dg_cdp_url(f.c), "");
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://a/", "t");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://a/");

	/* Title: cut to DG_CDP_TITLE_MAX bytes at a character boundary. 3-byte
	 * characters: 1024 is not a multiple of 3. */
	char title[4 * DG_CDP_TITLE_MAX] = "";
	for (int i = 0; i < DG_CDP_TITLE_MAX; i++)
		strcat(title, "\xe2\x82\xac"); /* U+20AC */
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://a/", title);
	size_t tl = strlen(dg_cdp_title(f.c));
	cr_assert_eq(tl, DG_CDP_TITLE_MAX / 3 * 3, "cut to %zu", tl);
	cr_assert(utf8_ok(dg_cdp_title(f.c)), "still UTF-8");
	/* Exactly at the bound: kept whole. */
	memset(title, 'x', DG_CDP_TITLE_MAX);
	title[DG_CDP_TITLE_MAX] = '\0';
	info(&f, "Target.targetInfoChanged", "T1", "page", "https://a/", title);
	cr_assert_eq(strlen(dg_cdp_title(f.c)), DG_CDP_TITLE_MAX);
	/* Over-long target ids are malformed. */
	char longid[DG_CDP_ID_MAX + 2];
	memset(longid, 'i', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	uint64_t e = stats(&f).errors;
	info(&f, "Target.targetCreated", longid, "page", "https://a/", "t");
	cr_assert_eq(stats(&f).errors, e + 1);
	cr_assert_eq(dg_cdp_n_targets(f.c), 1);
	dg_fake_cdp_close(&f);
}

Test(cdp, targets_cap)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	char id[32];
	for (int i = 0; i < DG_CDP_TARGETS_MAX + 10; i++) {
		snprintf(id, sizeof(id), "P%d", i);
		info(&f, "Target.targetCreated", id, "page", "https://popup/", "popup");
	}
	cr_assert_eq(dg_cdp_n_targets(f.c), DG_CDP_TARGETS_MAX);
	cr_assert_eq(stats(&f).targets_dropped, 11);
	/* An untracked page's changes are ignored; destroying one frees a slot. */
	snprintf(id, sizeof(id), "P%d", DG_CDP_TARGETS_MAX + 5);
	info(&f, "Target.targetInfoChanged", id, "page", "https://x/", "x");
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.targetDestroyed\",\"params\":{\"targetId\":\"P3\"}}");
	cr_assert_eq(dg_cdp_n_targets(f.c), DG_CDP_TARGETS_MAX - 1);
	info(&f, "Target.targetCreated", "NEW", "page", "https://new/", "new");
	cr_assert_eq(dg_cdp_n_targets(f.c), DG_CDP_TARGETS_MAX);
	cr_assert_str_eq(dg_cdp_target_id(f.c), "T1");
	dg_fake_cdp_close(&f);
}

Test(cdp, current_page_goes_away_switches_to_newest)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	info(&f, "Target.targetCreated", "OLD", "page", "https://old/", "old");
	info(&f, "Target.targetCreated", "POPUP", "page", "https://popup/", "Popup");
	struct rec nav = {0}, ev = {0};
	cr_assert_eq(dg_cdp_navigate(f.c, "https://x/", rec_done, &nav, &err), 0);
	expect_nav_cmd(&f, "Page.navigate", NULL);
	cr_assert_eq(dg_cdp_evaluate(f.c, "1", rec_done, &ev, &err), 0);
	expect_cmd(&f, "Runtime.evaluate", NULL);
	cr_assert(dg_cdp_loading(f.c));
	uint64_t ch = dg_cdp_changes(f.c);
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.targetDestroyed\",\"params\":{\"targetId\":\"T1\"}}");
	cr_assert_eq(nav.calls, 1);
	cr_assert_eq(nav.status, -ECONNRESET);
	cr_assert_eq(ev.status, -ECONNRESET);
	cr_assert_not(dg_cdp_ready(f.c));
	cr_assert_not(dg_cdp_loading(f.c));
	cr_assert_str_eq(dg_cdp_url(f.c), "");
	cr_assert_gt(dg_cdp_changes(f.c), ch);
	cr_assert_eq(dg_cdp_navigate(f.c, "https://x/", NULL, NULL, &err), -EAGAIN);
	json_t *cmd;
	json_int_t id = expect_cmd(&f, "Target.attachToTarget", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "targetId")),
			 "POPUP");
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S2\"}}", (long long)id);
	id = expect_cmd(&f, "Page.enable", NULL);
	/* A late reply for the old session is not taken for the new one. */
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert_not(dg_cdp_ready(f.c));
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S2\",\"result\":{}}", (long long)id);
	cr_assert(dg_cdp_ready(f.c));
	answer_info(&f, "POPUP", "https://popup/", "Popup");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://popup/");
	cr_assert_str_eq(dg_cdp_title(f.c), "Popup");
	cr_assert_str_eq(dg_cdp_session_id(f.c), "S2");

	/* Detached session (target still there): re-attached, attach failures
	 * skip that target. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.detachedFromTarget\",\"params\":{\"sessionId\":\"S2\"}}");
	cr_assert_not(dg_cdp_ready(f.c));
	id = expect_cmd(&f, "Target.attachToTarget", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "targetId")),
			 "POPUP");
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"error\":{\"message\":\"No target with given id\"}}", (long long)id);
	id = expect_cmd(&f, "Target.attachToTarget", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "targetId")),
			 "OLD");
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S3\"}}", (long long)id);
	id = expect_cmd(&f, "Page.enable", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S3\",\"result\":{}}", (long long)id);
	cr_assert(dg_cdp_ready(f.c));
	cr_assert_str_eq(dg_cdp_url(f.c), "https://old/");
	/* The refresh after attaching brings the title the page set since. */
	answer_info(&f, "OLD", "https://old/", "Old, loaded");
	cr_assert_str_eq(dg_cdp_title(f.c), "Old, loaded");
	dg_fake_cdp_none(&f);
	rec_free(&nav);
	rec_free(&ev);
	dg_fake_cdp_close(&f);
}

Test(cdp, switch_moves_the_current_page)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	info(&f, "Target.targetCreated", "T2", "page", "https://two/", "Two");
	info(&f, "Target.targetCreated", "T3", "page", "https://three/", "Three");
	dg_fake_cdp_none(&f); /* a new page does not take over by itself */
	cr_assert_str_eq(dg_cdp_target_id(f.c), "T1");
	cr_assert_eq(dg_cdp_switch(f.c, "T1", &err), 0); /* current already: nothing */
	dg_fake_cdp_none(&f);
	cr_assert_eq(dg_cdp_switch(f.c, "NOPE", &err), -ENOENT);
	struct rec nav = {0};
	cr_assert_eq(dg_cdp_navigate(f.c, "https://x/", rec_done, &nav, &err), 0);
	expect_nav_cmd(&f, "Page.navigate", NULL);
	uint64_t ch = dg_cdp_changes(f.c);
	/* To the older of the two others, not the newest. */
	cr_assert_eq(dg_cdp_switch(f.c, "T2", &err), 0, "%s", err.msg);
	cr_assert_eq(nav.calls, 1);
	cr_assert_eq(nav.status, -ECONNRESET);
	cr_assert_gt(dg_cdp_changes(f.c), ch);
	cr_assert_not(dg_cdp_ready(f.c));
	json_t *cmd;
	json_int_t id = expect_cmd(&f, "Target.attachToTarget", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "targetId")),
			 "T2");
	json_decref(cmd);
	json_int_t det = expect_cmd(&f, "Target.detachFromTarget", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "sessionId")),
			 "S1");
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)det);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S2\"}}", (long long)id);
	id = expect_cmd(&f, "Page.enable", NULL);
	/* The old session's detach, announced late, does not touch the new one. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"Target.detachedFromTarget\",\"params\":{\"sessionId\":\"S1\"}}");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S2\",\"result\":{}}", (long long)id);
	cr_assert(dg_cdp_ready(f.c));
	answer_info(&f, "T2", "https://two/", "Two");
	cr_assert_str_eq(dg_cdp_target_id(f.c), "T2");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://two/");
	cr_assert_str_eq(dg_cdp_session_id(f.c), "S2");
	dg_fake_cdp_none(&f);
	rec_free(&nav);
	dg_fake_cdp_close(&f);
}

/* ---- page commands ---- */

Test(cdp, navigate_and_loading)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec r = {0};
	cr_assert_not(dg_cdp_loading(f.c));
	cr_assert_eq(dg_cdp_navigate(f.c, "https://example.com/", rec_done, &r, &err), 0);
	json_t *cmd;
	json_int_t id = expect_nav_cmd(&f, "Page.navigate", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(cmd, "sessionId")), "S1");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"), "url")),
			 "https://example.com/");
	json_decref(cmd);
	cr_assert(dg_cdp_loading(f.c), "loading while the navigation awaits its reply");
	page_event(&f, "S1", "Page.frameStartedLoading", "T1");
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"frameId\":\"T1\",\"loaderId\":\"L\"}}",
	      (long long)id);
	cr_assert_eq(r.status, 0);
	cr_assert(dg_cdp_loading(f.c));
	/* A subframe stopping is not the page. */
	page_event(&f, "S1", "Page.frameStoppedLoading", "SUB");
	cr_assert(dg_cdp_loading(f.c));
	/* Nor is the same event on another session. */
	page_event(&f, "S9", "Page.frameStoppedLoading", "T1");
	cr_assert(dg_cdp_loading(f.c));
	uint64_t loads = dg_cdp_loads(f.c);
	page_event(&f, "S1", "Page.frameStoppedLoading", "T1");
	cr_assert_eq(dg_cdp_loads(f.c), loads + 1);
	/* Still loading until the title read after the load is in. */
	cr_assert(dg_cdp_loading(f.c));
	answer_info(&f, "T1", "https://example.com/", "Example Domain");
	cr_assert_not(dg_cdp_loading(f.c));
	cr_assert_str_eq(dg_cdp_title(f.c), "Example Domain");
	dg_fake_cdp_none(&f);
	/* Refreshes coalesce: one in flight (after an evaluate) when the load
	 * ends is answered first, with what may be the title from before the
	 * load, so exactly one more is asked, and the load ends with it. */
	page_event(&f, "S1", "Page.frameStartedLoading", "T1");
	cr_assert_eq(dg_cdp_evaluate(f.c, "1", NULL, NULL, &err), 0);
	id = expect_cmd(&f, "Runtime.evaluate", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"number\","
		  "\"value\":1}}}",
	      (long long)id);
	json_int_t first = expect_cmd(&f, "Target.getTargetInfo", NULL);
	page_event(&f, "S1", "Page.frameStoppedLoading", "T1");
	page_event(&f, "S1", "Page.frameStoppedLoading", "T1");
	dg_fake_cdp_none(&f);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\","
		  "\"title\":\"old\",\"url\":\"https://example.com/\"}}}",
	      (long long)first);
	cr_assert(dg_cdp_loading(f.c));
	answer_info(&f, "T1", "https://example.com/", "Example Domain");
	cr_assert_not(dg_cdp_loading(f.c));
	cr_assert_str_eq(dg_cdp_title(f.c), "Example Domain");
	dg_fake_cdp_none(&f);
	/* A same-document navigation asks too, without loading. */
	dg_fake_cdp_sendf(&f, "{\"method\":\"Page.navigatedWithinDocument\",\"sessionId\":\"S1\",\"params\":"
		  "{\"frameId\":\"T1\",\"url\":\"https://example.com/#x\"}}");
	cr_assert_not(dg_cdp_loading(f.c));
	answer_info(&f, "T1", "https://example.com/#x", "Example Domain");
	cr_assert_str_eq(dg_cdp_url(f.c), "https://example.com/#x");
	/* A refresh answered for another target is refused. */
	cr_assert_eq(dg_cdp_refresh(f.c, rec_done, &r, &err), 0);
	answer_info(&f, "T1", "https://example.com/#y", "Example Domain");
	cr_assert_eq(r.status, 0);
	cr_assert_str_eq(dg_cdp_url(f.c), "https://example.com/#y");
	cr_assert_eq(dg_cdp_refresh(f.c, rec_done, &r, &err), 0);
	json_int_t rid = expect_cmd(&f, "Target.getTargetInfo", NULL);
	uint64_t errors = stats(&f).errors;
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"targetInfo\":{\"targetId\":\"T9\",\"type\":\"page\","
		  "\"title\":\"x\",\"url\":\"https://evil/\"}}}",
	      (long long)rid);
	cr_assert_eq(r.status, -EPROTO);
	cr_assert_eq(stats(&f).errors, errors + 1);
	cr_assert_str_eq(dg_cdp_url(f.c), "https://example.com/#y");

	/* errorText: a failure with its text. */
	cr_assert_eq(dg_cdp_navigate(f.c, "http://nonexistent.invalid/", rec_done, &r, &err), 0);
	id = expect_nav_cmd(&f, "Page.navigate", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"frameId\":\"T1\",\"loaderId\":\"L2\","
		  "\"errorText\":\"net::ERR_NAME_NOT_RESOLVED\"}}",
	      (long long)id);
	cr_assert_eq(r.calls, 4);
	cr_assert_eq(r.status, -EREMOTEIO);
	cr_assert_str_eq(r.msg, "net::ERR_NAME_NOT_RESOLVED");
	answer_info(&f, "T1", "https://example.com/#y", "Example Domain");

	/* Page.loadEventFired alone does not end the load: frameStoppedLoading
	 * follows it. */
	page_event(&f, "S1", "Page.frameStartedLoading", "T1");
	cr_assert(dg_cdp_loading(f.c));
	dg_fake_cdp_sendf(&f, "{\"method\":\"Page.loadEventFired\",\"sessionId\":\"S1\",\"params\":"
		  "{\"timestamp\":1.0}}");
	cr_assert(dg_cdp_loading(f.c));
	dg_fake_cdp_none(&f);
	page_event(&f, "S1", "Page.frameStoppedLoading", "T1");
	answer_info(&f, "T1", "https://example.com/#y", "Example Domain");
	cr_assert_not(dg_cdp_loading(f.c));

	/* Bounds on what we send. */
	char *url = malloc(DG_CDP_URL_MAX + 2);
	memset(url, 'a', DG_CDP_URL_MAX + 1);
	url[DG_CDP_URL_MAX + 1] = '\0';
	cr_assert_eq(dg_cdp_navigate(f.c, url, NULL, NULL, &err), -E2BIG);
	free(url);
	cr_assert_eq(dg_cdp_navigate(f.c, "https://a/\xff", NULL, NULL, &err), -EINVAL);
	cr_assert_eq(dg_cdp_navigate(f.c, NULL, NULL, NULL, &err), -EINVAL);

	/* Reload. */
	cr_assert_eq(dg_cdp_reload(f.c, rec_done, &r, &err), 0);
	id = expect_nav_cmd(&f, "Page.reload", NULL);
	cr_assert(dg_cdp_loading(f.c));
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert_eq(r.calls, 5);
	cr_assert_eq(r.status, 0);
	cr_assert_not(dg_cdp_loading(f.c));
	dg_fake_cdp_none(&f);
	rec_free(&r);
	dg_fake_cdp_close(&f);
}

/* Answers the client's Page.getNavigationHistory with history_json. */
static void answer_history(struct dg_fake_cdp *f, const char *history_json)
{
	json_int_t id = expect_nav_cmd(f, "Page.getNavigationHistory", NULL);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":%s}", (long long)id, history_json);
}

Test(cdp, back_and_forward)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	const char *three = "{\"currentIndex\":%d,\"entries\":[{\"id\":11,\"url\":\"a\"},"
			    "{\"id\":12,\"url\":\"b\"},{\"id\":13,\"url\":\"c\"}]}";
	char h[256];
	struct rec r = {0};

	cr_assert_eq(dg_cdp_back(f.c, rec_done, &r, &err), 0);
	snprintf(h, sizeof(h), three, 0);
	answer_history(&f, h);
	cr_assert_eq(r.status, -ENOENT);
	cr_assert_str_eq(r.msg, "no previous page");
	dg_fake_cdp_none(&f);

	cr_assert_eq(dg_cdp_forward(f.c, rec_done, &r, &err), 0);
	snprintf(h, sizeof(h), three, 2);
	answer_history(&f, h);
	cr_assert_eq(r.status, -ENOENT);
	cr_assert_str_eq(r.msg, "no next page");

	cr_assert_eq(dg_cdp_back(f.c, rec_done, &r, &err), 0);
	snprintf(h, sizeof(h), three, 1);
	answer_history(&f, h);
	cr_assert_eq(r.calls, 2, "not done before the history step");
	json_t *cmd;
	json_int_t id = expect_cmd(&f, "Page.navigateToHistoryEntry", &cmd);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(cmd, "params"), "entryId")), 11);
	cr_assert_str_eq(json_string_value(json_object_get(cmd, "sessionId")), "S1");
	json_decref(cmd);
	cr_assert(dg_cdp_loading(f.c));
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert_eq(r.calls, 3);
	cr_assert_eq(r.status, 0);

	cr_assert_eq(dg_cdp_forward(f.c, rec_done, &r, &err), 0);
	snprintf(h, sizeof(h), three, 1);
	answer_history(&f, h);
	json_int_t id2 = expect_cmd(&f, "Page.navigateToHistoryEntry", &cmd);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(cmd, "params"), "entryId")), 13);
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"error\":{\"message\":\"bad entry\"}}",
	      (long long)id2);
	cr_assert_eq(r.status, -EREMOTEIO);
	answer_info(&f, "T1", "a", "A");

	/* Hostile histories. */
	const char *bad[] = {"{\"currentIndex\":5,\"entries\":[]}",
			     "{\"currentIndex\":-1,\"entries\":[{\"id\":1}]}",
			     "{\"currentIndex\":\"1\",\"entries\":[{\"id\":1},{\"id\":2}]}",
			     "{\"currentIndex\":1,\"entries\":{}}",
			     "{\"currentIndex\":1,\"entries\":[{\"id\":\"x\"},{\"id\":2}]}",
			     "{\"currentIndex\":1,\"entries\":[7,{\"id\":2}]}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int calls = r.calls;
		cr_assert_eq(dg_cdp_back(f.c, rec_done, &r, &err), 0);
		answer_history(&f, bad[i]);
		cr_assert_eq(r.calls, calls + 1);
		cr_assert_eq(r.status, -EPROTO, "history %s: %d", bad[i], r.status);
		dg_fake_cdp_none(&f);
	}
	rec_free(&r);
	dg_fake_cdp_close(&f);
}

Test(cdp, evaluate)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec r = {0};
	cr_assert_eq(dg_cdp_evaluate(f.c, "document.title", rec_done, &r, &err), 0);
	json_t *cmd;
	json_int_t id = expect_cmd(&f, "Runtime.evaluate", &cmd);
	json_t *params = json_object_get(cmd, "params");
	cr_assert_str_eq(json_string_value(json_object_get(params, "expression")), "document.title");
	cr_assert(json_is_true(json_object_get(params, "returnByValue")));
	json_decref(cmd);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"string\","
		  "\"value\":\"hi\"}}}",
	      (long long)id);
	cr_assert_eq(r.status, 0);
	cr_assert_str_eq(json_string_value(json_object_get(r.result, "value")), "hi");
	answer_info(&f, "T1", "about:blank", "about:blank");

	cr_assert_eq(dg_cdp_evaluate(f.c, "throw 1", rec_done, &r, &err), 0);
	id = expect_cmd(&f, "Runtime.evaluate", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"object\"},"
		  "\"exceptionDetails\":{\"text\":\"Uncaught\",\"exception\":{\"description\":"
		  "\"Error: boom\\n    at <anonymous>:1:7\"}}}}",
	      (long long)id);
	cr_assert_eq(r.status, -EREMOTEIO);
	cr_assert_str_eq(r.msg, "Error: boom\\x0a    at <anonymous>:1:7");
	answer_info(&f, "T1", "about:blank", "about:blank");

	cr_assert_eq(dg_cdp_evaluate(f.c, "1", rec_done, &r, &err), 0);
	id = expect_cmd(&f, "Runtime.evaluate", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":5}}", (long long)id);
	cr_assert_eq(r.status, -EPROTO);
	rec_free(&r);
	dg_fake_cdp_close(&f);
}

/* ---- bounds on what we keep and queue ---- */

Test(cdp, pending_commands_cap)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	static struct rec r[DG_CDP_PENDING_MAX];
	memset(r, 0, sizeof(r));
	json_int_t ids[DG_CDP_PENDING_MAX];
	for (int i = 0; i < DG_CDP_PENDING_MAX; i++) {
		cr_assert_eq(dg_cdp_send(f.c, "A.b", NULL, NULL, rec_done, &r[i], &err), 0,
			     "%d: %s", i, err.msg);
		ids[i] = expect_cmd(&f, "A.b", NULL);
	}
	cr_assert_eq(dg_cdp_n_pending(f.c), DG_CDP_PENDING_MAX);
	/* Refused: params stolen, done never called. */
	struct rec over = {0};
	cr_assert_eq(dg_cdp_send(f.c, "A.b", json_object(), NULL, rec_done, &over, &err), -EBUSY);
	cr_assert_eq(dg_cdp_navigate(f.c, "https://a/", rec_done, &over, &err), -EBUSY);
	dg_fake_cdp_none(&f);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)ids[7]);
	cr_assert_eq(r[7].calls, 1);
	cr_assert_eq(dg_cdp_send(f.c, "A.b", NULL, NULL, rec_done, &over, &err), 0);
	/* The owner gives up on them. */
	cr_assert_eq(dg_cdp_fail_all(f.c, -ETIMEDOUT, "deadline"), DG_CDP_PENDING_MAX);
	cr_assert_eq(r[0].status, -ETIMEDOUT);
	cr_assert_str_eq(r[0].msg, "deadline");
	cr_assert_eq(over.calls, 1);
	cr_assert_eq(dg_cdp_n_pending(f.c), 0);
	for (int i = 0; i < DG_CDP_PENDING_MAX; i++)
		cr_assert_eq(r[i].calls, 1);
	dg_fake_cdp_close(&f);
}

Test(cdp, write_back_pressure)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	/* The smallest pipe the kernel gives: one page. */
	fcntl(f.cmd_rd, F_SETPIPE_SZ, 4096);
	size_t elen = 64 * 1024;
	char *expr = malloc(elen + 1);
	memset(expr, 'x', elen);
	expr[elen] = '\0';
	int queued = 0, r;
	while ((r = dg_cdp_evaluate(f.c, expr, NULL, NULL, &err)) == 0)
		queued++;
	cr_assert_eq(r, -ENOBUFS, "%d %s", r, err.msg);
	cr_assert_gt(queued, 10);
	cr_assert_leq(dg_cdp_queued(f.c), DG_CDP_OUT_MAX);
	cr_assert_gt(dg_cdp_queued(f.c), DG_CDP_OUT_MAX - elen - 200);
	struct pollfd pfd[2];
	dg_cdp_pollfds(f.c, pfd);
	cr_assert_eq(pfd[1].events, POLLOUT);
	/* A command that could never fit. */
	char *huge = malloc(DG_CDP_OUT_MAX + 1);
	memset(huge, 'y', DG_CDP_OUT_MAX);
	huge[DG_CDP_OUT_MAX] = '\0';
	cr_assert_eq(dg_cdp_evaluate(f.c, huge, NULL, NULL, &err), -EMSGSIZE);
	free(huge);
	/* The browser reads; the client writes as poll says it may. */
	int got = 0;
	for (;;) {
		json_t *cmd = dg_fake_cdp_next(&f);
		if (cmd) {
			const char *e = json_string_value(
				json_object_get(json_object_get(cmd, "params"), "expression"));
			cr_assert(e && strlen(e) == elen, "command %d intact", got);
			json_decref(cmd);
			got++;
			continue;
		}
		dg_cdp_pollfds(f.c, pfd);
		if (!pfd[1].events)
			break;
		cr_assert_eq(poll(&pfd[1], 1, 1000), 1);
		struct pollfd both[2] = {{.fd = -1}, pfd[1]};
		cr_assert_eq(dg_cdp_handle(f.c, both, &err), 0, "%s", err.msg);
	}
	cr_assert_eq(got, queued);
	cr_assert_eq(dg_cdp_queued(f.c), 0);
	cr_assert_eq(dg_cdp_evaluate(f.c, "1", NULL, NULL, &err), 0);
	free(expr);
	dg_fake_cdp_close(&f);
}

/* ---- the end of the pipe ---- */

Test(cdp, pipe_closed_mid_message)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	struct rec started = {0};
	cr_assert_eq(dg_cdp_start(f.c, rec_done, &started, &err), 0);
	expect_cmd(&f, "Target.setDiscoverTargets", NULL);
	info(&f, "Target.targetCreated", "T1", "page", "about:blank", "");
	json_int_t id = expect_cmd(&f, "Target.attachToTarget", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{\"sessionId\":\"S1\"}}", (long long)id);
	id = expect_cmd(&f, "Page.enable", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{}}", (long long)id);
	cr_assert_eq(started.status, 0);
	struct rec a = {0}, b = {0};
	cr_assert_eq(dg_cdp_evaluate(f.c, "1", rec_done, &a, &err), 0);
	cr_assert_eq(dg_cdp_send(f.c, "A.b", NULL, NULL, rec_done, &b, &err), 0);
	const char *part = "{\"id\":1,\"result\":{\"res";
	dg_fake_cdp_put(&f, part, strlen(part));
	close(f.ev_wr);
	f.ev_wr = -1;
	cr_assert_eq(dg_cdp_handle_in(f.c, &err), -EPIPE);
	cr_assert(strstr(err.msg, "middle of a message"), "%s", err.msg);
	cr_assert(dg_cdp_closed(f.c));
	cr_assert_not(dg_cdp_ready(f.c));
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.status, -EPIPE);
	cr_assert_eq(b.status, -EPIPE);
	cr_assert_eq(dg_cdp_n_pending(f.c), 0);
	cr_assert_eq(dg_cdp_send(f.c, "A.b", NULL, NULL, rec_done, &b, &err), -EPIPE);
	cr_assert_eq(dg_cdp_navigate(f.c, "https://a/", rec_done, &b, &err), -EPIPE);
	cr_assert_eq(b.calls, 1);
	cr_assert_eq(dg_cdp_handle_in(f.c, &err), -EPIPE);
	struct pollfd pfd[2];
	dg_cdp_pollfds(f.c, pfd);
	cr_assert_eq(pfd[0].fd, -1);
	cr_assert_eq(pfd[1].fd, -1);
	rec_free(&a);
	dg_fake_cdp_close(&f);
}

Test(cdp, start_fails_when_pipe_closes)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	struct rec started = {0};
	cr_assert_eq(dg_cdp_start(f.c, rec_done, &started, &err), 0);
	close(f.ev_wr);
	f.ev_wr = -1;
	cr_assert_eq(dg_cdp_handle_in(f.c, &err), -EPIPE);
	cr_assert(strstr(err.msg, "browser is gone"), "%s", err.msg);
	cr_assert_eq(started.calls, 1);
	cr_assert_eq(started.status, -EPIPE);
	dg_fake_cdp_close(&f);
}

Test(cdp, reader_gone_is_epipe_not_sigpipe)
{
	/* Default SIGPIPE disposition: a plain write would kill us. */
	signal(SIGPIPE, SIG_DFL);
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	close(f.cmd_rd);
	f.cmd_rd = -1;
	struct rec r = {0};
	cr_assert_eq(dg_cdp_send(f.c, "A.b", NULL, NULL, rec_done, &r, &err), 0);
	cr_assert_eq(r.calls, 0, "no callback inside the sending call");
	struct pollfd pfd[2];
	dg_cdp_pollfds(f.c, pfd);
	cr_assert_eq(poll(pfd, 2, 1000), 1);
	cr_assert(pfd[1].revents & POLLERR);
	cr_assert_eq(dg_cdp_handle(f.c, pfd, &err), -EPIPE);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, -EPIPE);
	sigset_t pend;
	sigpending(&pend);
	cr_assert_not(sigismember(&pend, SIGPIPE));
	dg_fake_cdp_close(&f);
}

Test(cdp, free_cancels_pending)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct rec r = {0};
	cr_assert_eq(dg_cdp_evaluate(f.c, "1", rec_done, &r, &err), 0);
	dg_cdp_free(f.c);
	f.c = NULL;
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.status, -ECANCELED);
	dg_fake_cdp_close(&f);
}

/* A callback that sends the next command from inside the reply handler. */
struct chain {
	struct dg_cdp *c;
	int left, done;
};

static void chain_done(void *arg, int status, json_t *result, const char *msg)
{
	(void)result;
	(void)msg;
	struct chain *ch = arg;
	cr_assert_eq(status, 0);
	ch->done++;
	if (ch->left-- > 0)
		cr_assert_eq(dg_cdp_send(ch->c, "A.next", NULL, NULL, chain_done, ch, &err), 0);
}

Test(cdp, callbacks_may_send)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct chain ch = {.c = f.c, .left = 3};
	cr_assert_eq(dg_cdp_send(f.c, "A.first", NULL, NULL, chain_done, &ch, &err), 0);
	json_int_t id = expect_cmd(&f, "A.first", NULL);
	for (int i = 0; i < 3; i++) {
		dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)id);
		id = expect_cmd(&f, "A.next", NULL);
	}
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"result\":{}}", (long long)id);
	cr_assert_eq(ch.done, 4);
	dg_fake_cdp_none(&f);
	dg_fake_cdp_close(&f);
}

/* ---- ack.c: typing the page acknowledges, against the fake browser ---- */

#include "ack-priv.h"

struct typing {
	size_t calls, sizes[16], total;
	int done;
	char error[DG_ERR_MAX];
};

static void typing_keys(void *arg, const uint32_t *ks, size_t n)
{
	struct typing *t = arg;
	cr_assert_lt(t->calls, 16);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(ks[i], 'a');
	t->sizes[t->calls++] = n;
	t->total += n;
}

static void typing_done(void *arg, const char *error)
{
	struct typing *t = arg;
	t->done++;
	snprintf(t->error, sizeof(t->error), "%s", error ? error : "");
}

/* The next Runtime.evaluate of the typing: its contextId and whether it
 * awaits a promise; answered with value (JSON text). */
static void answer_eval(struct dg_fake_cdp *f, int ctx, bool await, const char *value)
{
	json_t *cmd;
	json_int_t id = expect_cmd(f, "Runtime.evaluate", &cmd);
	json_t *p = json_object_get(cmd, "params");
	cr_assert_str_eq(json_string_value(json_object_get(cmd, "sessionId")), "S1");
	if (ctx)
		cr_assert_eq(json_integer_value(json_object_get(p, "contextId")), ctx);
	cr_assert_eq(json_is_true(json_object_get(p, "awaitPromise")), await);
	json_decref(cmd);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"number\","
		 "\"value\":%s}}}", (long long)id, value);
}

/* Up to the counter's answer: the first round trip, the isolated world on
 * the main frame (context 7), the counter installed there. */
static void typing_setup(struct dg_fake_cdp *f, struct dg_ack *a, struct typing *t, size_t n,
			 const char *installed)
{
	char *text = malloc(n + 1);
	memset(text, 'a', n);
	text[n] = '\0';
	cr_assert_eq(dg_ack_type(a, f->c, text, n, typing_keys, typing_done, t, &err), 0, "%s",
		     err.msg);
	free(text);
	cr_assert_eq(t->done, 0, "done ran inside dg_ack_type");
	answer_eval(f, 0, false, "0");
	json_t *cmd;
	json_int_t id = expect_cmd(f, "Page.createIsolatedWorld", &cmd);
	json_t *p = json_object_get(cmd, "params");
	cr_assert_str_eq(json_string_value(json_object_get(p, "frameId")), "T1");
	cr_assert_str_eq(json_string_value(json_object_get(p, "worldName")), DG_ACK_WORLD);
	json_decref(cmd);
	dg_fake_cdp_sendf(f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"executionContextId\":7}}",
	      (long long)id);
	cr_assert_eq(t->calls, 0, "keys typed before the page's count was known");
	answer_eval(f, 7, false, installed);
}

/* 150 characters: chunks of DG_ACK_CHUNK, each sent once the page has the
 * one before the last; done once the page has every key, not before. */
Test(ack, chunks_wait_for_the_page)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_ack a = {0};
	struct typing t = {0};
	const size_t n = 2 * DG_ACK_CHUNK + 22;
	typing_setup(&f, &a, &t, n, "[5, true]"); /* 5 keys counted before */
	cr_assert_eq(t.calls, 1);
	cr_assert_eq(t.sizes[0], DG_ACK_CHUNK);
	answer_eval(&f, 7, true, "5"); /* the wait for the chunk before: none */
	cr_assert_eq(t.calls, 2);
	cr_assert_eq(t.sizes[1], DG_ACK_CHUNK);
	char want[16];
	snprintf(want, sizeof(want), "%d", 5 + DG_ACK_CHUNK - 1); /* one key short */
	answer_eval(&f, 7, true, want);
	cr_assert_eq(t.calls, 2, "a chunk went before the page had the one before");
	snprintf(want, sizeof(want), "%d", 5 + DG_ACK_CHUNK);
	answer_eval(&f, 7, true, want);
	cr_assert_eq(t.calls, 3);
	cr_assert_eq(t.sizes[2], 22);
	cr_assert_eq(t.total, n);
	snprintf(want, sizeof(want), "%zu", 5 + n - 1);
	answer_eval(&f, 7, true, want);
	cr_assert_eq(t.done, 0, "answered before the page had the last key");
	snprintf(want, sizeof(want), "%zu", 5 + n);
	answer_eval(&f, 7, true, want);
	cr_assert_eq(t.done, 1);
	cr_assert_str_eq(t.error, "");
	cr_assert_eq(dg_ack_advance(&a), -1);
	dg_fake_cdp_none(&f);
	/* The next typing on this page reuses the world; one that no longer
	 * answers (a new document) is made again. */
	cr_assert_eq(dg_ack_type(&a, f.c, "aa", 2, typing_keys, typing_done, &t, &err), 0);
	answer_eval(&f, 0, false, "0");
	json_int_t id = expect_cmd(&f, "Runtime.evaluate", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"error\":{\"code\":-32000,\"message\":"
		 "\"Cannot find context with specified id\"}}", (long long)id);
	id = expect_cmd(&f, "Page.createIsolatedWorld", NULL);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"executionContextId\":9}}",
	      (long long)id);
	answer_eval(&f, 9, false, "[0, true]");
	answer_eval(&f, 9, true, "2");
	cr_assert_eq(t.done, 2);
	dg_ack_free(&a);
	dg_fake_cdp_close(&f);
}

/* Keys that go elsewhere than the page (no focus): typed at once, done. */
Test(ack, no_focus_types_at_once)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_ack a = {0};
	struct typing t = {0};
	typing_setup(&f, &a, &t, 300, "[0, false]");
	cr_assert_eq(t.calls, 1);
	cr_assert_eq(t.sizes[0], 300);
	cr_assert_eq(t.done, 1);
	cr_assert_str_eq(t.error, "");
	dg_fake_cdp_none(&f);
	dg_ack_free(&a);
	dg_fake_cdp_close(&f);
}

/* The bound: DG_ACK_BASE_MS + DG_ACK_PER_KEY_MS a character; at it the
 * typing stops, says how far it got, and a late reply changes nothing. */
Test(ack, bound_named_in_the_error)
{
	struct dg_fake_cdp f;
	dg_fake_cdp_open(&f);
	attach(&f);
	struct dg_ack a = {0};
	struct typing t = {0};
	const size_t n = DG_ACK_CHUNK + 10;
	long long t0 = dg_now_ms();
	typing_setup(&f, &a, &t, n, "[0, true]");
	answer_eval(&f, 7, true, "0");
	cr_assert_eq(t.calls, 2);
	json_int_t id = expect_cmd(&f, "Runtime.evaluate", NULL); /* waits for all: unanswered */
	long long bound = DG_ACK_BASE_MS + (long long)n * DG_ACK_PER_KEY_MS;
	int left = dg_ack_advance(&a);
	cr_assert(left > 0 && left <= bound && left >= bound - (dg_now_ms() - t0) - 5,
		  "advance says %d ms, the bound is %lld", left, bound);
	while (dg_ack_advance(&a) > 0)
		usleep(20000);
	cr_assert_geq(dg_now_ms() - t0, bound);
	cr_assert_eq(t.done, 1);
	char want[256];
	snprintf(want, sizeof(want), "typing stopped: %zu of %zu characters sent, but the page had "
		 "received only 0 of their keys after", n, n);
	cr_assert(strncmp(t.error, want, strlen(want)) == 0, "%s", t.error);
	snprintf(want, sizeof(want), "(the bound: %d ms + %d ms a character)", DG_ACK_BASE_MS,
		 DG_ACK_PER_KEY_MS);
	cr_assert(strstr(t.error, want), "%s", t.error);
	dg_fake_cdp_sendf(&f, "{\"id\":%lld,\"sessionId\":\"S1\",\"result\":{\"result\":{\"type\":\"number\","
		  "\"value\":%zu}}}", (long long)id, n);
	cr_assert_eq(t.done, 1);
	dg_fake_cdp_none(&f);
	dg_ack_free(&a);
	dg_fake_cdp_close(&f);
}

/* Without a browser (xterm): typed at once, done from dg_ack_advance. */
Test(ack, without_a_browser)
{
	struct dg_ack a = {0};
	struct typing t = {0};
	cr_assert_eq(dg_ack_type(&a, NULL, "aaa", 3, typing_keys, typing_done, &t, &err), 0);
	cr_assert_eq(t.total, 3);
	cr_assert_eq(t.done, 0);
	cr_assert_eq(dg_ack_advance(&a), 0);
	cr_assert_eq(t.done, 1);
	cr_assert_eq(dg_ack_advance(&a), -1);
	cr_assert_eq(dg_ack_type(&a, NULL, "a\x01", 2, typing_keys, typing_done, &t, &err), -EINVAL);
	cr_assert_eq(t.done, 1);
}
