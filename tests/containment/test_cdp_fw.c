/* The CDP firewall (desktop/worker/cdp-fw.c) in a real worker with a real
 * Chromium: the test is the worker's owner. It opens CDP clients and
 * relays their messages as the gateway will (DG_MSG_CDP_OPEN/IN/CLOSE),
 * decides every DG_MSG_CDP_DECIDE itself (everything allowed but the one
 * method a test denies) and reads what the clients get (DG_MSG_CDP_OUT,
 * _DROP). Browser requests the guard holds (DG_MSG_REQUEST) are allowed
 * and remembered: a request seen proves the guard held it.
 *
 * Not here: a command naming the guard's session. The worker gives the
 * guard's session ids to nobody, so a test speaking the protocol cannot
 * learn one; tests/unit/test_cdp_fw_route.c checks it with a fake
 * browser whose guard session the test names itself. */
#include <criterion/criterion.h>

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "dg_test.h"

#define STEP_S 20.0          /* seconds for any one step */
#define CLIENTS 16           /* client numbers the tests use: 0..15 */
#define DENIED "Browser.getVersion"
#define NEW_TAB_URL "http://newtab.deskgate-test.invalid/tab"
#define NAV_URL "http://nav.deskgate-test.invalid/page"

struct desk {
	struct dg_policy policy;
	struct dg_desktop d;
	struct dg_worker w;
	json_t *inbox[CLIENTS];   /* what each client got and the test did not take */
	char dropped[CLIENTS][256];
	json_t *urls;             /* every URL the guard held */
	int decides;
	/* the action waited for */
	long long act_id;
	json_t *result;
	bool frame, want_frame;
};

static void desk_start(struct desk *k)
{
	memset(k, 0, sizeof(*k));
	struct dg_err err = {{0}};
	dg_worker_set_binary(DG_BIN);
	dg_policy_default(&k->policy);
	struct dg_desktop_spec spec = {.profile = DG_PROFILE_BROWSER,
				       .width = DG_DESKTOP_WIDTH_DEFAULT,
				       .height = DG_DESKTOP_HEIGHT_DEFAULT,
				       .limits = &k->policy.limits};
	cr_assert_eq(dg_desktop_start(&spec, &k->d, &err), 0, "desktop: %s", err.msg);
	cr_assert_eq(dg_worker_start(&k->d.io, &k->w, &err), 0, "worker: %s", err.msg);
	cr_assert_eq(dg_worker_wait_ready(&k->w, DG_WORKER_READY_MS, &err), 0, "ready: %s", err.msg);
	for (int i = 0; i < CLIENTS; i++)
		k->inbox[i] = json_array();
	k->urls = json_array();
}

static void desk_end(struct desk *k)
{
	dg_worker_stop(&k->w);
	dg_desktop_destroy(&k->d);
	for (int i = 0; i < CLIENTS; i++)
		json_decref(k->inbox[i]);
	json_decref(k->urls);
	json_decref(k->result);
}

/* One message from the worker, as its owner handles it. */
static void handle(struct desk *k, uint32_t type, const uint8_t *data, size_t len)
{
	struct dg_err err = {{0}};
	if (type == DG_MSG_REQUEST) {
		struct dg_worker_request r;
		cr_assert_eq(dg_worker_request_decode(data, len, &r, &err), 0);
		json_array_append_new(k->urls, json_string(r.url));
		cr_assert_eq(dg_worker_send_verdict(k->w.ctl, r.req, true, &err), 0);
		dg_worker_request_free(&r);
	} else if (type == DG_MSG_CDP_DECIDE) {
		struct dg_cdp_decide d;
		cr_assert_eq(dg_cdp_decide_decode(data, len, &d, &err), 0, "%s", err.msg);
		struct dg_cdp_verdict v = {.req = d.req, .allow = strcmp(d.method, DENIED) != 0};
		snprintf(v.rule, sizeof(v.rule), "%s", v.allow ? "test.allow" : "test.deny");
		snprintf(v.reason, sizeof(v.reason), "%s",
			 v.allow ? "the test allows it" : "the test denies it");
		k->decides++;
		dg_cdp_decide_free(&d);
		cr_assert_eq(dg_cdp_verdict_send(k->w.ctl, &v, &err), 0);
	} else if (type == DG_MSG_CDP_OUT || type == DG_MSG_CDP_DROP) {
		uint32_t c;
		const uint8_t *rest;
		size_t n;
		cr_assert_eq(dg_cdp_client_of(data, len, &c, &rest, &n), 0);
		cr_assert_lt(c, CLIENTS);
		if (type == DG_MSG_CDP_DROP) {
			snprintf(k->dropped[c], sizeof(k->dropped[c]), "%.*s", (int)n, rest);
			return;
		}
		json_t *j = json_loadb((const char *)rest, n, JSON_REJECT_DUPLICATES, NULL);
		cr_assert(json_is_object(j), "client %u got %.*s", c, (int)n, rest);
		json_array_append_new(k->inbox[c], j);
	} else if (type == DG_MSG_RESULT) {
		json_t *j = json_loadb((const char *)data, len, 0, NULL);
		if (json_integer_value(json_object_get(j, "id")) == k->act_id) {
			json_decref(k->result);
			k->result = j;
			k->want_frame = json_object_get(j, "frame") != NULL;
		} else {
			json_decref(j);
		}
	} else if (type == DG_MSG_FRAME) {
		k->frame = true;
	}
}

/* Runs the owner's side until cond(k, arg) or STEP_S passed. */
static bool pump_until(struct desk *k, bool (*cond)(struct desk *, const void *), const void *arg)
{
	double end = dg_test_now() + STEP_S;
	struct dg_err err = {{0}};
	while (!cond(k, arg)) {
		double left = end - dg_test_now();
		if (left <= 0)
			return false;
		struct pollfd p = {k->w.ctl, POLLIN, 0};
		poll(&p, 1, (int)(left * 1000) + 1);
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r;
		while ((r = dg_worker_recv(&k->w, &type, &data, &len, &err)) == 1)
			handle(k, type, data, len);
		cr_assert_geq(r, 0, "worker: %s", err.msg);
	}
	return true;
}

static bool never(struct desk *k, const void *arg)
{
	(void)k, (void)arg;
	return false;
}

/* Lets the worker run for s seconds (what it sends is handled). */
static void settle(struct desk *k, double s)
{
	double end = dg_test_now() + s;
	struct dg_err err = {{0}};
	while (dg_test_now() < end) {
		struct pollfd p = {k->w.ctl, POLLIN, 0};
		poll(&p, 1, 20);
		uint32_t type;
		const uint8_t *data;
		size_t len;
		while (dg_worker_recv(&k->w, &type, &data, &len, &err) == 1)
			handle(k, type, data, len);
	}
	(void)never;
}

/* ---- a CDP client, as the gateway relays it ---- */

static void cdp_open(struct desk *k, uint32_t c)
{
	cr_assert_eq(dg_cdp_client_send(k->w.ctl, DG_MSG_CDP_OPEN, c, NULL, 0), 0);
}

static void cdp_close(struct desk *k, uint32_t c)
{
	cr_assert_eq(dg_cdp_client_send(k->w.ctl, DG_MSG_CDP_CLOSE, c, NULL, 0), 0);
}

static void cdp_raw(struct desk *k, uint32_t c, const char *text)
{
	cr_assert_eq(dg_cdp_client_send(k->w.ctl, DG_MSG_CDP_IN, c, text, strlen(text)), 0);
}

/* Sends {"id", "method", "params"?, "sessionId"?}. */
static void cdp_send(struct desk *k, uint32_t c, long long id, const char *method,
		     const char *params, const char *session)
{
	char text[4096];
	int n = snprintf(text, sizeof(text), "{\"id\":%lld,\"method\":\"%s\"", id, method);
	if (params)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ",\"params\":%s", params);
	if (session)
		n += snprintf(text + n, sizeof(text) - (size_t)n, ",\"sessionId\":\"%s\"", session);
	snprintf(text + n, sizeof(text) - (size_t)n, "}");
	cdp_raw(k, c, text);
}

struct want {
	uint32_t c;
	long long id;
	const char *method;
};

/* The index in the client's inbox of the reply to id (id >= 0) or the first
 * event method (id < 0); -1 when none is there. */
static int find(struct desk *k, const struct want *w)
{
	for (size_t i = 0; i < json_array_size(k->inbox[w->c]); i++) {
		json_t *j = json_array_get(k->inbox[w->c], i);
		json_t *id = json_object_get(j, "id");
		if (w->id >= 0 ? json_integer_value(id) == w->id && id
			       : !id && strcmp(json_string_value(json_object_get(j, "method")),
					       w->method) == 0)
			return (int)i;
	}
	return -1;
}

static bool found(struct desk *k, const void *arg)
{
	return find(k, arg) >= 0;
}

/* Takes the wanted message out of the inbox, waiting for it. */
static json_t *take(struct desk *k, const struct want *w)
{
	cr_assert(pump_until(k, found, w), "client %u: no %s %lld within %.0f s (dropped: \"%s\")",
		  w->c, w->id >= 0 ? "reply" : w->method, w->id, STEP_S, k->dropped[w->c]);
	int i = find(k, w);
	json_t *j = json_incref(json_array_get(k->inbox[w->c], (size_t)i));
	json_array_remove(k->inbox[w->c], (size_t)i);
	return j;
}

/* A command and its reply (which must carry the client's id). */
static json_t *call(struct desk *k, uint32_t c, long long id, const char *method,
		    const char *params, const char *session)
{
	cr_assert_lt(id, 1000, "ids from 1000 are the burst's");
	cdp_send(k, c, id, method, params, session);
	return take(k, &(struct want){c, id, NULL});
}

/* A command that must succeed: its result. */
static json_t *call_ok(struct desk *k, uint32_t c, long long id, const char *method,
		       const char *params, const char *session)
{
	json_t *r = call(k, c, id, method, params, session);
	char *s = json_dumps(r, JSON_COMPACT);
	cr_assert(json_is_object(json_object_get(r, "result")), "%s: %s", method, s);
	const char *sid = json_string_value(json_object_get(r, "sessionId"));
	cr_assert_str_eq(sid ? sid : "", session ? session : "", "%s: the reply's session: %s",
			 method, s);
	free(s);
	json_t *res = json_incref(json_object_get(r, "result"));
	json_decref(r);
	return res;
}

/* A command that must fail with code, message containing text. */
static void call_error(struct desk *k, uint32_t c, long long id, const char *method,
		       const char *session, int code, const char *text)
{
	json_t *r = call(k, c, id, method, NULL, session);
	char *s = json_dumps(r, JSON_COMPACT);
	json_t *e = json_object_get(r, "error");
	cr_assert_eq(json_integer_value(json_object_get(e, "code")), code, "%s: %s", method, s);
	const char *m = json_string_value(json_object_get(e, "message"));
	cr_assert(m && strstr(m, text), "%s: %s, want \"%s\"", method, s, text);
	free(s);
	json_decref(r);
}

static bool was_dropped(struct desk *k, const void *arg)
{
	return k->dropped[*(const uint32_t *)arg][0] != '\0';
}

/* The sessionId of an attachedToTarget event the client got for a page
 * whose URL starts with url (NULL: any page); "" when none came within the
 * step. waiting gets its waitingForDebugger. */
static const char *attached_page(struct desk *k, uint32_t c, const char *url, bool *waiting)
{
	static char sid[128];
	for (;;) {
		json_t *ev = take(k, &(struct want){c, -1, "Target.attachedToTarget"});
		json_t *p = json_object_get(ev, "params");
		json_t *info = json_object_get(p, "targetInfo");
		const char *type = json_string_value(json_object_get(info, "type"));
		const char *u = json_string_value(json_object_get(info, "url"));
		cr_assert(type && strcmp(type, "browser_ui") != 0, "the browser's UI reached a client");
		cr_assert_null(json_object_get(ev, "sessionId"), "announced on the browser session");
		if (strcmp(type, "page") == 0 && (!url || (u && strncmp(u, url, strlen(url)) == 0))) {
			snprintf(sid, sizeof(sid), "%s",
				 json_string_value(json_object_get(p, "sessionId")));
			if (waiting)
				*waiting = json_is_true(json_object_get(p, "waitingForDebugger"));
			json_decref(ev);
			return sid;
		}
		json_decref(ev);
	}
}

/* Every event the client got is on its browser session or one of sessions
 * (n of them). */
static void only_own_events(struct desk *k, uint32_t c, const char *const *sessions, int n)
{
	for (size_t i = 0; i < json_array_size(k->inbox[c]); i++) {
		json_t *j = json_array_get(k->inbox[c], i);
		const char *sid = json_string_value(json_object_get(j, "sessionId"));
		bool own = !sid;
		for (int s = 0; s < n && !own; s++)
			own = strcmp(sid, sessions[s]) == 0;
		char *text = json_dumps(j, JSON_COMPACT);
		cr_assert(own, "client %u got another's: %.300s", c, text);
		free(text);
	}
}

/* ---- the worker's own actions ---- */

static bool acted(struct desk *k, const void *arg)
{
	(void)arg;
	return k->result && (!k->want_frame || k->frame);
}

static json_t *act(struct desk *k, const char *action)
{
	struct dg_err err = {{0}};
	json_decref(k->result);
	k->result = NULL;
	k->frame = k->want_frame = false;
	k->act_id = dg_worker_send_action(&k->w, action, 0, 0, &err);
	cr_assert_gt(k->act_id, 0, "%s", err.msg);
	cr_assert(pump_until(k, acted, NULL), "%s: no result", action);
	json_t *r = k->result;
	k->result = NULL;
	return r;
}

static bool url_held(struct desk *k, const void *arg)
{
	for (size_t i = 0; i < json_array_size(k->urls); i++)
		if (strcmp(json_string_value(json_array_get(k->urls, i)), arg) == 0)
			return true;
	return false;
}

/* The worker still does its own work, with its guard: a navigation whose
 * request the guard holds, and a screenshot. */
static void worker_still_works(struct desk *k)
{
	json_t *r = act(k, "{\"type\":\"navigate\",\"url\":\"" NAV_URL "\"}");
	cr_log_info("navigate after the clients: %s",
		    json_is_true(json_object_get(r, "ok"))
			    ? "ok"
			    : json_string_value(json_object_get(r, "error")));
	json_decref(r);
	cr_assert(pump_until(k, url_held, NAV_URL), "the guard held no request for %s", NAV_URL);
	r = act(k, "{\"type\":\"navigate\",\"url\":\"data:text/html,<title>after</title>x\"}");
	cr_assert(json_is_true(json_object_get(r, "ok")), "navigate: %s",
		  json_string_value(json_object_get(r, "error")));
	cr_assert_str_eq(json_string_value(json_object_get(r, "title")), "after");
	json_decref(r);
	r = act(k, "{\"type\":\"screenshot\"}");
	cr_assert(json_is_true(json_object_get(r, "ok")));
	cr_assert(k->frame, "no screenshot");
	json_decref(r);
}

Test(cdp_fw, one_client_through_the_firewall, .timeout = 240)
{
	struct desk k;
	desk_start(&k);
	cdp_open(&k, 1);
	json_decref(call_ok(&k, 1, 1, "Target.setAutoAttach",
			    "{\"autoAttach\":true,\"waitForDebuggerOnStart\":true,\"flatten\":true}",
			    NULL));
	/* The page that is open, auto-attached on the client's browser session. */
	const char *auto_sid = attached_page(&k, 1, NULL, NULL);
	cr_assert_neq(auto_sid[0], '\0');
	json_t *targets = call_ok(&k, 1, 2, "Target.getTargets", NULL, NULL);
	const char *page = NULL;
	json_t *info;
	size_t i;
	json_array_foreach(json_object_get(targets, "targetInfos"), i, info)
	{
		if (strcmp(json_string_value(json_object_get(info, "type")), "page") == 0)
			page = json_string_value(json_object_get(info, "targetId"));
	}
	cr_assert(page, "no page among the targets");
	char params[512], sid[128];
	snprintf(params, sizeof(params), "{\"targetId\":\"%s\",\"flatten\":true}", page);
	json_t *att = call_ok(&k, 1, 3, "Target.attachToTarget", params, NULL);
	snprintf(sid, sizeof(sid), "%s", json_string_value(json_object_get(att, "sessionId")));
	json_decref(att);
	json_decref(targets);
	cr_assert_neq(sid[0], '\0');
	/* The attach's own announcement. */
	json_decref(take(&k, &(struct want){1, -1, "Target.attachedToTarget"}));

	json_t *ev = call_ok(&k, 1, 4, "Runtime.evaluate", "{\"expression\":\"1+1\"}", sid);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(ev, "result"), "value")), 2);
	json_decref(ev);
	json_t *nav = call_ok(&k, 1, 5, "Page.navigate", "{\"url\":\"about:blank\"}", sid);
	cr_assert(json_is_string(json_object_get(nav, "frameId")));
	json_decref(nav);
	/* Denied by the owner: the rule named, the connection usable. */
	call_error(&k, 1, 6, DENIED, NULL, -32000, "deskgate: denied by test.deny: the test denies it");
	/* A session the client does not own: Chromium's own answer, undecided. */
	int before = k.decides;
	call_error(&k, 1, 7, "Runtime.evaluate", "0123456789ABCDEF0123456789ABCDEF", -32001,
		   "Session with given id not found.");
	cr_assert_eq(k.decides, before);
	cr_log_info("not checked here: the guard's session (see the header)");

	/* A burst: every command answered once, by the browser or refused. */
	enum { BURST = 200 };
	for (int n = 0; n < BURST; n++) /* ids 1000.. */
		cdp_send(&k, 1, 1000 + n, "Runtime.evaluate", "{\"expression\":\"7\"}", sid);
	int ok = 0, busy = 0;
	for (int n = 0; n < BURST; n++) {
		json_t *r = take(&k, &(struct want){1, 1000 + n, NULL});
		json_t *e = json_object_get(r, "error");
		if (e) {
			cr_assert_str_eq(json_string_value(json_object_get(e, "message")),
					 "deskgate: too many commands in flight");
			busy++;
		} else {
			cr_assert_eq(json_integer_value(json_object_get(
					     json_object_get(json_object_get(r, "result"), "result"),
					     "value")), 7);
			ok++;
		}
		json_decref(r);
	}
	cr_log_info("burst of %d: %d answered by the browser, %d too many in flight", BURST, ok,
		    busy);
	cr_assert_geq(ok, 64);
	settle(&k, 0.3);
	cr_assert_eq(find(&k, &(struct want){1, 1000, NULL}), -1, "answered twice");
	json_t *still = call_ok(&k, 1, 8, "Runtime.evaluate", "{\"expression\":\"2+3\"}", sid);
	json_decref(still);

	/* Malformed messages drop their client only. */
	const char *bad[][2] = {{"garbage", "not JSON"},
				{"[1,2]", "not an object"},
				{"{\"method\":\"Runtime.evaluate\"}", "id is not"}};
	for (uint32_t b = 0; b < 3; b++) {
		uint32_t c = 10 + b;
		cdp_open(&k, c);
		cdp_raw(&k, c, bad[b][0]);
		cr_assert(pump_until(&k, was_dropped, &c), "%s: not dropped", bad[b][0]);
		cr_assert(strstr(k.dropped[c], "malformed CDP message: ") &&
			  strstr(k.dropped[c], bad[b][1]), "%s: %s", bad[b][0], k.dropped[c]);
		cdp_close(&k, c); /* the owner's CLOSE crosses the DROP: ignored */
	}
	json_decref(call_ok(&k, 1, 9, "Runtime.evaluate", "{\"expression\":\"1\"}", sid));
	cdp_close(&k, 1);
	worker_still_works(&k);
	desk_end(&k);
}

Test(cdp_fw, two_clients_and_a_new_tab, .timeout = 240)
{
	struct desk k;
	desk_start(&k);
	cdp_open(&k, 1);
	cdp_open(&k, 2);
	const char *aa = "{\"autoAttach\":true,\"waitForDebuggerOnStart\":true,\"flatten\":true}";
	json_decref(call_ok(&k, 1, 1, "Target.setAutoAttach", aa, NULL));
	json_decref(call_ok(&k, 2, 1, "Target.setAutoAttach", aa, NULL));
	char a_old[128], b_old[128];
	snprintf(a_old, sizeof(a_old), "%s", attached_page(&k, 1, NULL, NULL));
	snprintf(b_old, sizeof(b_old), "%s", attached_page(&k, 2, NULL, NULL));
	cr_assert_str_neq(a_old, b_old);
	/* Each enables Page on its session of the open page. */
	json_decref(call_ok(&k, 1, 2, "Page.enable", NULL, a_old));
	json_decref(call_ok(&k, 2, 2, "Page.enable", NULL, b_old));
	/* Another's session is unknown to a client. */
	call_error(&k, 2, 3, "Runtime.evaluate", a_old, -32001, "Session with given id not found.");

	/* A new tab while both wait for the debugger on start: held for each
	 * client until it resumes it, its requests held by the guard. */
	json_t *created = call_ok(&k, 1, 4, "Target.createTarget", "{\"url\":\"" NEW_TAB_URL "\"}",
				  NULL);
	json_decref(created);
	bool wait_a = false, wait_b = false;
	char a_new[128], b_new[128];
	snprintf(a_new, sizeof(a_new), "%s", attached_page(&k, 1, NEW_TAB_URL, &wait_a));
	snprintf(b_new, sizeof(b_new), "%s", attached_page(&k, 2, NEW_TAB_URL, &wait_b));
	cr_assert(wait_a && wait_b, "the new tab waits for each client's debugger");
	settle(&k, 1.5);
	bool held_before = url_held(&k, NEW_TAB_URL);
	json_decref(call_ok(&k, 1, 5, "Runtime.runIfWaitingForDebugger", NULL, a_new));
	json_decref(call_ok(&k, 2, 5, "Runtime.runIfWaitingForDebugger", NULL, b_new));
	/* It runs: once its document exists (its first navigation is under
	 * way), it evaluates. */
	json_int_t two = 0;
	double end = dg_test_now() + STEP_S;
	for (long long id = 100; two != 2 && dg_test_now() < end; id++) {
		json_t *r = call(&k, 1, id, "Runtime.evaluate", "{\"expression\":\"1+1\"}", a_new);
		two = json_integer_value(json_object_get(
			json_object_get(json_object_get(r, "result"), "result"), "value"));
		json_decref(r);
		if (two != 2)
			settle(&k, 0.1);
	}
	cr_assert_eq(two, 2, "the new tab never ran");
	cr_assert(pump_until(&k, url_held, NEW_TAB_URL), "the guard held no request of the new tab");
	/* Measured with Chromium 156: before. The guard's resume releases the
	 * tab for every session; a client's waitForDebuggerOnStart holds
	 * nothing the guard does not (reported, not required). */
	cr_log_info("the new tab's request reached the guard %s the clients resumed it",
		    held_before ? "before" : "after");

	/* Each client sees only its own sessions' events. */
	json_decref(call_ok(&k, 2, 7, "Page.navigate", "{\"url\":\"about:blank#two\"}", b_old));
	json_decref(take(&k, &(struct want){2, -1, "Page.navigatedWithinDocument"}));
	json_decref(take(&k, &(struct want){1, -1, "Page.navigatedWithinDocument"}));
	settle(&k, 0.5);
	only_own_events(&k, 1, (const char *const[]){a_old, a_new}, 2);
	only_own_events(&k, 2, (const char *const[]){b_old, b_new}, 2);

	/* After CLOSE, nothing more for client 1: its sessions are gone with its
	 * browser session (the page still navigates for client 2). */
	cdp_close(&k, 1);
	settle(&k, 0.3);
	json_array_clear(k.inbox[1]);
	json_decref(call_ok(&k, 2, 8, "Page.navigate", "{\"url\":\"about:blank#three\"}", b_old));
	json_decref(take(&k, &(struct want){2, -1, "Page.navigatedWithinDocument"}));
	settle(&k, 0.5);
	cr_assert_eq(json_array_size(k.inbox[1]), 0, "client 1 got messages after its CLOSE");
	/* The number may be used again: a new client, with nothing of the old. */
	cdp_open(&k, 1);
	call_error(&k, 1, 1, "Runtime.evaluate", a_old, -32001, "Session with given id not found.");
	json_decref(call_ok(&k, 1, 2, "Target.getTargets", NULL, NULL));
	cdp_close(&k, 1);
	cdp_close(&k, 2);
	worker_still_works(&k);
	desk_end(&k);
}
