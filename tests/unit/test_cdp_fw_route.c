/* The CDP firewall's routing (desktop/worker/cdp-fw.c) between a fake
 * browser (tests/support/dg_fake_cdp.h: the test plays Chromium) and the
 * test playing the worker's owner on a socketpair: clients' messages in,
 * DECIDE out, verdicts in, commands to the browser on the right session
 * with ids of the worker's, replies and events back to the right client
 * only. The real browser's side is tests/containment/test_cdp_fw.c. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cdp-classify-priv.h"
#include "cdp-fw-priv.h"
#include "cdp-priv.h"
#include "desktop/proto/proto.h"
#include "dg_fake_cdp.h"

struct rig {
	struct dg_fake_cdp f;
	struct dg_cdpfw *fw;
	int owner;                /* the test's end of the worker's channel */
	int ctl;                  /* the firewall's end */
	struct dg_ipc_reader rd;
	char others[8192];        /* events the firewall left to the guard */
};

static struct dg_err err;

static void on_event(void *arg, const char *method, const char *session, json_t *params)
{
	(void)params;
	struct rig *g = arg;
	if (dg_cdpfw_event(g->fw, method, session, params))
		return;
	size_t l = strlen(g->others);
	snprintf(g->others + l, sizeof(g->others) - l, "%s@%s ", method, session ? session : "root");
}

static void rig_open(struct rig *g)
{
	memset(g, 0, sizeof(*g));
	dg_fake_cdp_open(&g->f);
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	g->owner = sp[0];
	g->ctl = sp[1];
	fcntl(g->owner, F_SETFL, O_NONBLOCK);
	g->fw = dg_cdpfw_new(g->f.c, sp[1]);
	cr_assert(g->fw);
	dg_cdpfw_set_view(g->fw, &(struct dg_cdp_view){.screen_w = 1280, .screen_h = 800});
	dg_cdp_set_event_handler(g->f.c, on_event, g);
}

static void rig_close(struct rig *g)
{
	dg_cdpfw_free(g->fw);
	dg_fake_cdp_close(&g->f);
	close(g->owner);
	close(g->ctl);
	dg_ipc_reader_free(&g->rd);
}

/* The owner sends. */
static void put(struct rig *g, uint32_t type, uint32_t client, const char *text)
{
	uint8_t buf[4096];
	size_t n = text ? strlen(text) : 0;
	cr_assert_lt(n + 4, sizeof(buf));
	memcpy(buf, &client, 4);
	if (n)
		memcpy(buf + 4, text, n);
	cr_assert_eq(dg_cdpfw_message(g->fw, type, buf, n + 4, &err), 0, "%s", err.msg);
}

static void verdict_cache(struct rig *g, json_int_t req, bool allow, bool cache, const char *rule,
			  const char *reason)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "{\"req\":%lld,\"allow\":%s,\"cache\":%s,\"rule\":\"%s\",\"reason\":\"%s\"}",
		 (long long)req, allow ? "true" : "false", cache ? "true" : "false", rule, reason);
	cr_assert_eq(dg_cdpfw_message(g->fw, DG_MSG_CDP_VERDICT, (const uint8_t *)text,
				      strlen(text), &err),
		     0, "%s", err.msg);
}

static void verdict(struct rig *g, json_int_t req, bool allow, const char *rule,
		    const char *reason)
{
	verdict_cache(g, req, allow, false, rule, reason);
}

/* The next message to the owner: its type, its client (CDP_OUT/DROP), its
 * text (malloc'd); false when none is waiting. */
static bool take(struct rig *g, uint32_t *type, uint32_t *client, char **text)
{
	int r = dg_ipc_read(g->owner, &g->rd, &err);
	cr_assert_geq(r, 0, "%s", err.msg);
	if (r == 0)
		return false;
	*type = g->rd.type;
	const uint8_t *p = g->rd.buf;
	size_t n = g->rd.len;
	*client = 0;
	if (*type == DG_MSG_CDP_DECIDE || *type == DG_MSG_CDP_NOTE) {
		/* As one JSON object, header fields and command. */
		struct dg_cdp_decide q;
		cr_assert_eq(dg_cdp_decide_decode(p, n, &q, &err), 0, "%s", err.msg);
		json_t *j = json_deep_copy(q.msg);
		json_object_set_new(j, "req", json_integer((json_int_t)q.req));
		json_object_set_new(j, "client", json_integer(q.client));
		json_object_set_new(j, "session", json_string(q.session));
		*text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		dg_cdp_decide_free(&q);
		return true;
	}
	const uint8_t *rest;
	cr_assert_eq(dg_cdp_client_of(p, n, client, &rest, &n), 0);
	p = rest;
	*text = strndup((const char *)p, n);
	return true;
}

static void nothing(struct rig *g)
{
	uint32_t type, client;
	char *text;
	if (take(g, &type, &client, &text))
		cr_assert_fail("unexpected message %u for %u: %s", type, client, text);
}

/* The next message, which must be of type (and for client, unless it is a
 * DECIDE): parsed (DROP: as {"reason": text}). */
static json_t *expect(struct rig *g, uint32_t type, uint32_t client)
{
	uint32_t t, c;
	char *text;
	cr_assert(take(g, &t, &c, &text), "expected a message of type %u", type);
	cr_assert_eq(t, type, "expected type %u, got %u: %s", type, t, text);
	if (type != DG_MSG_CDP_DECIDE && type != DG_MSG_CDP_NOTE)
		cr_assert_eq(c, client, "for client %u, not %u: %s", client, c, text);
	json_t *j = type == DG_MSG_CDP_DROP ? json_pack("{s:s}", "reason", text)
					    : json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	cr_assert(j, "not JSON: %s", text);
	free(text);
	return j;
}

static json_int_t expect_decide_type(struct rig *g, uint32_t type, uint32_t client,
				     const char *method, const char *session)
{
	json_t *d = expect(g, type, 0);
	cr_assert_eq(json_integer_value(json_object_get(d, "client")), client);
	cr_assert_str_eq(json_string_value(json_object_get(d, "method")), method);
	cr_assert_str_eq(json_string_value(json_object_get(d, "session")), session);
	json_int_t req = json_integer_value(json_object_get(d, "req"));
	cr_assert_gt(req, 0);
	json_decref(d);
	return req;
}

static json_int_t expect_decide(struct rig *g, uint32_t client, const char *method,
				const char *session)
{
	return expect_decide_type(g, DG_MSG_CDP_DECIDE, client, method, session);
}

/* The next message to the client must be exactly want (JSON text). */
static void expect_out(struct rig *g, uint32_t client, const char *want)
{
	json_t *j = expect(g, DG_MSG_CDP_OUT, client);
	json_t *w = json_loads(want, 0, NULL);
	cr_assert(w, "bad want: %s", want);
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	cr_assert(json_equal(j, w), "got %s, want %s", s, want);
	free(s);
	json_decref(j);
	json_decref(w);
}

static void expect_drop(struct rig *g, uint32_t client, const char *reason_part)
{
	json_t *j = expect(g, DG_MSG_CDP_DROP, client);
	const char *r = json_string_value(json_object_get(j, "reason"));
	cr_assert(strstr(r, reason_part), "drop reason \"%s\", want \"%s\"", r, reason_part);
	json_decref(j);
}

/* OPEN of client, answered by the fake browser with session B. */
static void open_client(struct rig *g, uint32_t client, const char *b)
{
	size_t seen = strlen(g->others);
	put(g, DG_MSG_CDP_OPEN, client, NULL);
	json_int_t id = dg_fake_cdp_expect(&g->f, "Target.attachToBrowserTarget", "", NULL);
	dg_fake_cdp_sendf(&g->f,
			  "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":\"%s\","
			  "\"targetInfo\":{\"targetId\":\"x-%s\",\"type\":\"browser\",\"title\":\"\","
			  "\"url\":\"\"},\"waitingForDebugger\":false}}",
			  b, b);
	dg_fake_cdp_sendf(&g->f, "{\"id\":%lld,\"result\":{\"sessionId\":\"%s\"}}", (long long)id, b);
	cr_assert_eq(strlen(g->others), seen, "the guard saw the client's session: %s", g->others);
}

/* A command through: decided, allowed, sent on session (the browser's id
 * for the client's browser session), answered with result. */
static void round_trip(struct rig *g, uint32_t client, const char *msg, const char *method,
		       const char *decide_session, const char *browser_session,
		       const char *result, const char *want)
{
	put(g, DG_MSG_CDP_IN, client, msg);
	json_int_t req = expect_decide(g, client, method, decide_session);
	dg_fake_cdp_none(&g->f);
	verdict(g, req, true, "r", "ok");
	json_int_t id = dg_fake_cdp_expect(&g->f, method, browser_session, NULL);
	dg_fake_cdp_sendf(&g->f, "{\"id\":%lld,\"sessionId\":\"%s\",%s}", (long long)id,
			  browser_session, result);
	expect_out(g, client, want);
}

Test(cdp_fw_route, commands_go_through_the_owner_on_the_clients_session)
{
	struct rig g;
	rig_open(&g);
	put(&g, DG_MSG_CDP_OPEN, 7, NULL);
	json_int_t id = dg_fake_cdp_expect(&g.f, "Target.attachToBrowserTarget", "", NULL);
	/* Before the session exists: the message waits. */
	put(&g, DG_MSG_CDP_IN, 7, "{\"id\":1,\"method\":\"Browser.getVersion\"}");
	nothing(&g);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"result\":{\"sessionId\":\"B7\"}}", (long long)id);
	json_int_t req = expect_decide(&g, 7, "Browser.getVersion", "");
	verdict(&g, req, true, "builtin.cdp", "allowed");
	json_t *cmd;
	json_int_t cid = dg_fake_cdp_expect(&g.f, "Browser.getVersion", "B7", &cmd);
	json_decref(cmd);
	dg_fake_cdp_sendf(&g.f,
			  "{\"id\":%lld,\"sessionId\":\"B7\",\"result\":{\"product\":\"X/1\"}}",
			  (long long)cid);
	expect_out(&g, 7, "{\"id\":1,\"result\":{\"product\":\"X/1\"}}");
	/* An error comes back exactly as the browser sent it. */
	round_trip(&g, 7, "{\"id\":9007199254740992,\"method\":\"Page.x\",\"params\":{\"a\":[1,2]}}",
		   "Page.x", "", "B7",
		   "\"error\":{\"code\":-32601,\"message\":\"'Page.x' wasn't found\",\"data\":\"d\"}",
		   "{\"id\":9007199254740992,\"error\":{\"code\":-32601,\"message\":\"'Page.x' "
		   "wasn't found\",\"data\":\"d\"}}");
	/* Denied: the rule and the reason, the connection stays. */
	put(&g, DG_MSG_CDP_IN, 7, "{\"id\":3,\"method\":\"Browser.close\"}");
	req = expect_decide(&g, 7, "Browser.close", "");
	verdict(&g, req, false, "builtin.cdp", "not for clients");
	expect_out(&g, 7, "{\"id\":3,\"error\":{\"code\":-32000,\"message\":\"deskgate: denied by "
			  "builtin.cdp: not for clients\"}}");
	dg_fake_cdp_none(&g.f);
	/* A verdict for nothing waiting: ignored, counted. */
	verdict(&g, 999, true, "r", "x");
	struct dg_cdpfw_stats st;
	dg_cdpfw_stats(g.fw, &st);
	cr_assert_eq(st.stale_verdicts, 1);
	cr_assert_eq(st.denied, 1);
	cr_assert_eq(st.allowed, 2);
	nothing(&g);
	rig_close(&g);
}

Test(cdp_fw_route, allowed_commands_leave_in_the_clients_order)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":1,\"method\":\"A.one\"}");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":2,\"method\":\"A.two\"}");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":3,\"method\":\"A.three\"}");
	json_int_t r1 = expect_decide(&g, 1, "A.one", "");
	json_int_t r2 = expect_decide(&g, 1, "A.two", "");
	json_int_t r3 = expect_decide(&g, 1, "A.three", "");
	verdict(&g, r3, true, "r", "ok");
	verdict(&g, r2, false, "r", "no");
	expect_out(&g, 1, "{\"id\":2,\"error\":{\"code\":-32000,\"message\":\"deskgate: denied by r: "
			  "no\"}}");
	dg_fake_cdp_none(&g.f); /* three waits for one */
	verdict(&g, r1, true, "r", "ok");
	json_int_t a = dg_fake_cdp_expect(&g.f, "A.one", "B1", NULL);
	json_int_t b = dg_fake_cdp_expect(&g.f, "A.three", "B1", NULL);
	/* Replies in any order, each with its client's id. */
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)b);
	expect_out(&g, 1, "{\"id\":3,\"result\":{}}");
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)a);
	expect_out(&g, 1, "{\"id\":1,\"result\":{}}");
	rig_close(&g);
}

Test(cdp_fw_route, sessions_belong_to_the_client_that_made_them)
{
	struct rig g;
	rig_open(&g);
	/* The guard's session on a page (the root's auto-attach). */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":"
				"\"G1\",\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\",\"title\":"
				"\"\",\"url\":\"about:blank\"},\"waitingForDebugger\":true}}");
	cr_assert_str_eq(g.others, "Target.attachedToTarget@root ");
	open_client(&g, 1, "B1");
	open_client(&g, 2, "B2");
	/* Client 1 attaches to the page: P1 is its own. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"P1\",\"targetInfo\":{\"targetId\":\"T1\","
				"\"type\":\"page\",\"title\":\"\",\"url\":\"about:blank\"},"
				"\"waitingForDebugger\":false}}");
	expect_out(&g, 1, "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":\"P1\","
			  "\"targetInfo\":{\"targetId\":\"T1\",\"type\":\"page\",\"title\":\"\","
			  "\"url\":\"about:blank\"},\"waitingForDebugger\":false}}");
	round_trip(&g, 1, "{\"id\":5,\"method\":\"Runtime.evaluate\",\"sessionId\":\"P1\","
			  "\"params\":{\"expression\":\"1+1\"}}",
		   "Runtime.evaluate", "P1", "P1", "\"result\":{\"v\":2}",
		   "{\"id\":5,\"sessionId\":\"P1\",\"result\":{\"v\":2}}");
	/* Its events go to it alone, with the session; the guard's to nobody. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Page.loadEventFired\",\"sessionId\":\"P1\","
				"\"params\":{\"timestamp\":1}}");
	expect_out(&g, 1, "{\"method\":\"Page.loadEventFired\",\"sessionId\":\"P1\",\"params\":"
			  "{\"timestamp\":1}}");
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Page.loadEventFired\",\"sessionId\":\"G1\","
				"\"params\":{\"timestamp\":1}}");
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.targetCreated\",\"params\":{\"targetInfo\":"
				"{\"targetId\":\"T2\",\"type\":\"page\",\"title\":\"\",\"url\":\"\"}}}");
	nothing(&g);
	cr_assert(strstr(g.others, "Page.loadEventFired@G1 Target.targetCreated@root"), "%s",
		  g.others);
	/* The guard's session, another client's, an unknown one, one too long:
	 * not found, as Chromium says it, undecided. */
	const char *bad[] = {"G1", "P1", "B1", "nope", "B2x"};
	for (int i = 0; i < 5; i++) {
		char msg[256];
		snprintf(msg, sizeof(msg), "{\"id\":%d,\"method\":\"Runtime.evaluate\",\"sessionId\":"
					   "\"%s\"}", 40 + i, bad[i]);
		put(&g, DG_MSG_CDP_IN, 2, msg);
		snprintf(msg, sizeof(msg), "{\"id\":%d,\"error\":{\"code\":-32001,\"message\":"
					   "\"Session with given id not found.\"}}", 40 + i);
		expect_out(&g, 2, msg);
	}
	nothing(&g);
	dg_fake_cdp_none(&g.f);
	/* A child of P1 (an iframe), then P1 detached: both forgotten. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"P1\","
				"\"params\":{\"sessionId\":\"F1\",\"targetInfo\":{\"type\":\"iframe\"}}}");
	json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.detachedFromTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"P1\"}}");
	expect_out(&g, 1, "{\"method\":\"Target.detachedFromTarget\",\"params\":{\"sessionId\":"
			  "\"P1\"}}");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":6,\"method\":\"A.b\",\"sessionId\":\"F1\"}");
	expect_out(&g, 1, "{\"id\":6,\"error\":{\"code\":-32001,\"message\":\"Session with given id "
			  "not found.\"}}");
	/* The browser's own -32001 (no sessionId) comes back as it is. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"P2\",\"targetInfo\":{\"type\":\"page\"}}}");
	json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":7,\"method\":\"A.b\",\"sessionId\":\"P2\"}");
	json_int_t req = expect_decide(&g, 1, "A.b", "P2");
	verdict(&g, req, true, "r", "ok");
	json_int_t id = dg_fake_cdp_expect(&g.f, "A.b", "P2", NULL);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"error\":{\"code\":-32001,\"message\":\"Session with "
				"given id not found.\"}}", (long long)id);
	expect_out(&g, 1, "{\"id\":7,\"error\":{\"code\":-32001,\"message\":\"Session with given id "
			  "not found.\"}}");
	rig_close(&g);
}

Test(cdp_fw_route, withheld_sessions_are_detached)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	/* The browser's own UI pages are not the client's. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"U1\",\"targetInfo\":{\"type\":"
				"\"browser_ui\"},\"waitingForDebugger\":true}}");
	json_t *cmd;
	dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "B1", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"),
							   "sessionId")), "U1");
	json_decref(cmd);
	nothing(&g);
	for (int i = 0; i < DG_CDPFW_SESSIONS_MAX; i++) {
		dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
					"\"params\":{\"sessionId\":\"S%d\",\"targetInfo\":{\"type\":"
					"\"worker\"}}}", i);
		json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
	}
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"Sx\",\"targetInfo\":{\"type\":"
				"\"worker\"}}}");
	dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "B1", NULL);
	nothing(&g);
	struct dg_cdpfw_stats st;
	dg_cdpfw_stats(g.fw, &st);
	cr_assert_eq(st.sessions_withheld, 2);
	rig_close(&g);
}

Test(cdp_fw_route, malformed_messages_drop_the_client)
{
	const char *bad[][2] = {
		{"{\"id\":1,\"method\":\"A.b\"", "not JSON"},
		{"[1]", "not an object"},
		{"{\"method\":\"A.b\"}", "id is not"},
		{"{\"id\":-1,\"method\":\"A.b\"}", "id is not"},
		{"{\"id\":1.5,\"method\":\"A.b\"}", "id is not"},
		{"{\"id\":9007199254740993,\"method\":\"A.b\"}", "id is not"},
		{"{\"id\":1,\"method\":\"Ab\"}", "method is not"},
		{"{\"id\":1,\"method\":\"A.b\",\"params\":[]}", "params is not"},
		{"{\"id\":1,\"method\":\"A.b\",\"sessionId\":5}", "sessionId is not"},
		{"{\"id\":1,\"method\":\"A.b\",\"x\":5}", "unknown key \"x\""},
		{"{\"id\":1,\"id\":2,\"method\":\"A.b\"}", "not JSON"},
		{"{\"id\":1,\"method\":\"A.b\",\"params\":{\"s\":\"a\\u0000b\"}}", "not JSON"},
	};
	struct rig g;
	rig_open(&g);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		open_client(&g, 3, "B3");
		put(&g, DG_MSG_CDP_IN, 3, bad[i][0]);
		json_t *j = expect(&g, DG_MSG_CDP_DROP, 3);
		const char *why = json_string_value(json_object_get(j, "reason"));
		cr_assert(strncmp(why, "malformed CDP message: ", 23) == 0 && strstr(why, bad[i][1]),
			  "%s: %s", bad[i][0], why);
		json_decref(j);
		/* Its browser session goes with it. */
		json_t *cmd;
		dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "", &cmd);
		cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"),
								   "sessionId")), "B3");
		json_decref(cmd);
		/* What crossed the drop is ignored. */
		put(&g, DG_MSG_CDP_IN, 3, "{\"id\":1,\"method\":\"A.b\"}");
		nothing(&g);
		cr_assert_eq(dg_cdpfw_n_clients(g.fw), 0);
	}
	rig_close(&g);
}

Test(cdp_fw_route, bounds)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	for (int i = 0; i < DG_CDPFW_PENDING_MAX; i++) {
		char msg[64];
		snprintf(msg, sizeof(msg), "{\"id\":%d,\"method\":\"A.b\"}", i);
		put(&g, DG_MSG_CDP_IN, 1, msg);
		json_decref(expect(&g, DG_MSG_CDP_DECIDE, 0));
	}
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":100,\"method\":\"A.b\"}");
	expect_out(&g, 1, "{\"id\":100,\"error\":{\"code\":-32000,\"message\":\"deskgate: too many "
			  "commands in flight\"}}");
	/* Four clients; a fifth is refused. */
	open_client(&g, 2, "B2");
	open_client(&g, 3, "B3");
	open_client(&g, 4, "B4");
	put(&g, DG_MSG_CDP_OPEN, 5, NULL);
	expect_drop(&g, 5, "too many CDP clients");
	dg_fake_cdp_none(&g.f);
	/* Messages before the browser session: bounded. */
	put(&g, DG_MSG_CDP_CLOSE, 4, NULL);
	dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "", NULL);
	put(&g, DG_MSG_CDP_OPEN, 6, NULL);
	dg_fake_cdp_expect(&g.f, "Target.attachToBrowserTarget", "", NULL);
	for (int i = 0; i < DG_CDPFW_QUEUE_MAX; i++)
		put(&g, DG_MSG_CDP_IN, 6, "{\"id\":1,\"method\":\"A.b\"}");
	nothing(&g);
	put(&g, DG_MSG_CDP_IN, 6, "{\"id\":1,\"method\":\"A.b\"}");
	expect_drop(&g, 6, "before its session was ready");
	/* The owner's own mistakes are protocol errors. */
	uint8_t open1[4] = {1, 0, 0, 0};
	cr_assert_eq(dg_cdpfw_message(g.fw, DG_MSG_CDP_OPEN, open1, 4, &err), -EPROTO);
	cr_assert_eq(dg_cdpfw_message(g.fw, DG_MSG_CDP_IN, open1, 3, &err), -EPROTO);
	cr_assert_eq(dg_cdpfw_message(g.fw, DG_MSG_CDP_VERDICT, (const uint8_t *)"{}", 2, &err),
		     -EPROTO);
	rig_close(&g);
}

Test(cdp_fw_route, close_detaches_and_late_replies_are_dropped)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":1,\"method\":\"A.b\"}");
	json_int_t req = expect_decide(&g, 1, "A.b", "");
	verdict(&g, req, true, "r", "ok");
	json_int_t id = dg_fake_cdp_expect(&g.f, "A.b", "B1", NULL);
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"B1\","
				"\"params\":{\"sessionId\":\"P1\",\"targetInfo\":{\"type\":\"page\"}}}");
	json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
	put(&g, DG_MSG_CDP_CLOSE, 1, NULL);
	json_t *cmd;
	dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "", &cmd);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(cmd, "params"),
							   "sessionId")), "B1");
	json_decref(cmd);
	/* Events still on their way for its sessions: nobody's, not the guard's. */
	size_t seen = strlen(g.others);
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.attachedToTarget\",\"sessionId\":\"P1\","
				"\"params\":{\"sessionId\":\"W1\",\"targetInfo\":{\"type\":\"worker\"}}}");
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.detachedFromTarget\",\"params\":"
				"{\"sessionId\":\"B1\"}}");
	cr_assert_eq(strlen(g.others), seen, "%s", g.others);
	/* Once the browser says the session is gone, its ids are nobody's. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Page.x\",\"sessionId\":\"P1\",\"params\":{}}");
	cr_assert(strstr(g.others + seen, "Page.x@P1"), "%s", g.others);
	/* A new client in the same slot does not get the old one's reply. */
	open_client(&g, 1, "B9");
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)id);
	nothing(&g);
	/* A client gone before its session came: the session is detached. */
	put(&g, DG_MSG_CDP_OPEN, 2, NULL);
	id = dg_fake_cdp_expect(&g.f, "Target.attachToBrowserTarget", "", NULL);
	put(&g, DG_MSG_CDP_CLOSE, 2, NULL);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"result\":{\"sessionId\":\"B2\"}}", (long long)id);
	dg_fake_cdp_expect(&g.f, "Target.detachFromTarget", "", NULL);
	nothing(&g);
	/* A session the browser ends drops its client. */
	dg_fake_cdp_sendf(&g.f, "{\"method\":\"Target.detachedFromTarget\",\"params\":{\"sessionId\":"
				"\"B9\"}}");
	expect_drop(&g, 1, "the browser ended");
	dg_fake_cdp_none(&g.f);
	rig_close(&g);
}

Test(cdp_fw_route, without_a_browser_clients_are_refused)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	struct dg_cdpfw *fw = dg_cdpfw_new(NULL, sp[1]);
	uint8_t one[4] = {1, 0, 0, 0};
	cr_assert_eq(dg_cdpfw_message(fw, DG_MSG_CDP_OPEN, one, 4, &err), 0);
	struct dg_ipc_reader rd = {0};
	cr_assert_eq(dg_ipc_read(sp[0], &rd, &err), 1);
	cr_assert_eq(rd.type, DG_MSG_CDP_DROP);
	cr_assert(strstr((const char *)rd.buf + 4, "no browser"));
	cr_assert_not(dg_cdpfw_event(fw, "A.b", "S", NULL));
	dg_ipc_reader_free(&rd);
	dg_cdpfw_free(fw);
	close(sp[0]);
	close(sp[1]);
}

Test(cdp_fw_route, classified_and_refused_before_deciding)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	const char *refused[] = {
		"{\"id\":1,\"method\":\"Target.sendMessageToTarget\",\"params\":{\"message\":\"{}\","
		"\"sessionId\":\"P\"}}",
		"{\"id\":2,\"method\":\"Target.exposeDevToolsProtocol\",\"params\":{\"targetId\":\"T\"}}",
		"{\"id\":3,\"method\":\"Target.attachToTarget\",\"params\":{\"targetId\":\"T\"}}",
		"{\"id\":4,\"method\":\"Target.setAutoAttach\",\"params\":{\"autoAttach\":true,"
		"\"waitForDebuggerOnStart\":false,\"flatten\":false}}",
	};
	for (int i = 0; i < 4; i++) {
		put(&g, DG_MSG_CDP_IN, 1, refused[i]);
		json_t *j = expect(&g, DG_MSG_CDP_OUT, 1);
		json_t *e = json_object_get(j, "error");
		cr_assert_eq(json_integer_value(json_object_get(j, "id")), i + 1);
		cr_assert_eq(json_integer_value(json_object_get(e, "code")), -32000);
		const char *m = json_string_value(json_object_get(e, "message"));
		cr_assert(strstr(m, i == 1 ? "past the firewall" : "flattened"), "%s", m);
		json_decref(j);
	}
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":5,\"method\":\"Target.setAutoAttach\",\"params\":"
				  "{\"autoAttach\":false,\"waitForDebuggerOnStart\":false}}");
	expect_decide(&g, 1, "Target.setAutoAttach", "");
	/* What the classifier makes of a command goes to the owner. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":6,\"method\":\"Page.navigate\",\"params\":"
				  "{\"url\":\"https://example.test/\"}}");
	json_t *d = expect(&g, DG_MSG_CDP_DECIDE, 0);
	json_t *a = json_object_get(d, "action");
	cr_assert_str_eq(json_string_value(json_object_get(a, "type")), "navigate");
	cr_assert_str_eq(json_string_value(json_object_get(a, "url")), "https://example.test/");
	json_decref(d);
	/* No viewport known: a point cannot be placed on the screen. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":7,\"method\":\"Input.dispatchMouseEvent\",\"params\":"
				  "{\"type\":\"mousePressed\",\"x\":5,\"y\":5,\"button\":\"left\"}}");
	json_t *j = expect(&g, DG_MSG_CDP_OUT, 1);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			 DG_CDP_REFUSE_POINT);
	json_decref(j);
	/* Malformed parameters the decision depends on: refused, named. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":8,\"method\":\"Page.navigate\",\"params\":{\"url\":5}}");
	j = expect(&g, DG_MSG_CDP_OUT, 1);
	const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
	cr_assert(strstr(m, "deskgate: Page.navigate.url"), "%s", m);
	json_decref(j);
	dg_fake_cdp_none(&g.f);
	rig_close(&g);
}

/* An allow the owner let it keep: the same command again goes to Chromium
 * at once, and the owner is told (NOTE, to record) after it left; another
 * command, or the same after an allow without "cache", is asked. */
Test(cdp_fw_route, a_cached_verdict_is_applied_unasked_and_noted)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	const char *ev = "{\"id\":%d,\"method\":\"Runtime.evaluate\",\"params\":{\"expression\":\"1\"}}";
	char msg[256];
	snprintf(msg, sizeof(msg), ev, 1);
	put(&g, DG_MSG_CDP_IN, 1, msg);
	json_int_t req = expect_decide(&g, 1, "Runtime.evaluate", "");
	verdict_cache(&g, req, true, true, "cdp.allow[0]", "ok");
	json_int_t id = dg_fake_cdp_expect(&g.f, "Runtime.evaluate", "B1", NULL);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)id);
	expect_out(&g, 1, "{\"id\":1,\"result\":{}}");
	for (int i = 2; i < 5; i++) {
		snprintf(msg, sizeof(msg), ev, i);
		put(&g, DG_MSG_CDP_IN, 1, msg);
		id = dg_fake_cdp_expect(&g.f, "Runtime.evaluate", "B1", NULL);
		json_int_t n = expect_decide_type(&g, DG_MSG_CDP_NOTE, 1, "Runtime.evaluate", "");
		cr_assert_gt(n, req, "each command has a number of its own");
		req = n;
		dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}",
				  (long long)id);
		char want[64];
		snprintf(want, sizeof(want), "{\"id\":%d,\"result\":{}}", i);
		expect_out(&g, 1, want);
	}
	/* Another script: another command, asked. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":9,\"method\":\"Runtime.evaluate\",\"params\":{\"expression\":\"2\"}}");
	req = expect_decide(&g, 1, "Runtime.evaluate", "");
	verdict(&g, req, true, "r", "ok"); /* not cached */
	id = dg_fake_cdp_expect(&g.f, "Runtime.evaluate", "B1", NULL);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)id);
	expect_out(&g, 1, "{\"id\":9,\"result\":{}}");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":10,\"method\":\"Runtime.evaluate\",\"params\":{\"expression\":\"2\"}}");
	expect_decide(&g, 1, "Runtime.evaluate", "");
	dg_fake_cdp_none(&g.f);
	/* A refusal is never kept, whatever the owner says. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":11,\"method\":\"Browser.close\"}");
	req = expect_decide(&g, 1, "Browser.close", "");
	/* (the worker takes "cache" only with an allow: decode says so) */
	verdict_cache(&g, req, false, true, "builtin.cdp", "no");
	expect_out(&g, 1, "{\"id\":11,\"error\":{\"code\":-32000,\"message\":\"deskgate: denied "
			  "by builtin.cdp: no\"}}");
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":12,\"method\":\"Browser.close\"}");
	expect_decide(&g, 1, "Browser.close", "");
	struct dg_cdpfw_stats st;
	dg_cdpfw_stats(g.fw, &st);
	cr_assert_eq(st.cached, 3);
	rig_close(&g);
}

/* Client 1 sends Runtime.evaluate (id) of n bytes of fill as its script. */
static void put_script(struct rig *g, int id, size_t n, char fill)
{
	char *m = malloc(n + 128);
	uint32_t client = 1;
	memcpy(m, &client, 4);
	int k = 4 + snprintf(m + 4, 124, "{\"id\":%d,\"method\":\"Runtime.evaluate\",\"params\":{"
			     "\"expression\":\"", id);
	memset(m + k, fill, n);
	memcpy(m + k + n, "\"}}", 3);
	cr_assert_eq(dg_cdpfw_message(g->fw, DG_MSG_CDP_IN, (uint8_t *)m, (size_t)k + n + 3, &err), 0,
		     "%s", err.msg);
	free(m);
}

/* The length of the command the firewall asks about for a
 * Runtime.evaluate of n bytes of script (refused: not kept). */
static size_t probe_key(struct rig *g, size_t n)
{
	put_script(g, 5, n, 'y');
	cr_assert_eq(dg_ipc_read(g->owner, &g->rd, &err), 1);
	cr_assert_eq(g->rd.type, DG_MSG_CDP_DECIDE);
	size_t key = g->rd.len - 13; /* req, client, the session's length; no session */
	struct dg_cdp_decide q;
	cr_assert_eq(dg_cdp_decide_decode(g->rd.buf, g->rd.len, &q, &err), 0);
	json_int_t r = (json_int_t)q.req;
	dg_cdp_decide_free(&q);
	verdict(g, r, false, "r", "no");
	json_decref(expect(g, DG_MSG_CDP_OUT, 1));
	return key;
}

/* At most DG_CDPFW_CACHE_MAX commands are kept, the least recently used
 * forgotten; one longer than DG_CDPFW_CACHE_KEY_MAX is asked every time. */
Test(cdp_fw_route, the_verdict_cache_is_bounded)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	char msg[256];
	for (int i = 0; i <= DG_CDPFW_CACHE_MAX; i++) {
		snprintf(msg, sizeof(msg), "{\"id\":%d,\"method\":\"DOM.m%d\"}", i, i);
		put(&g, DG_MSG_CDP_IN, 1, msg);
		char method[32];
		snprintf(method, sizeof(method), "DOM.m%d", i);
		json_int_t req = expect_decide(&g, 1, method, "");
		verdict_cache(&g, req, true, true, "r", "ok");
		json_int_t id = dg_fake_cdp_expect(&g.f, method, "B1", NULL);
		dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}",
				  (long long)id);
		json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
		if (i == 1) { /* DOM.m0 used again: DOM.m1 is the oldest now */
			put(&g, DG_MSG_CDP_IN, 1, "{\"id\":0,\"method\":\"DOM.m0\"}");
			id = dg_fake_cdp_expect(&g.f, "DOM.m0", "B1", NULL);
			expect_decide_type(&g, DG_MSG_CDP_NOTE, 1, "DOM.m0", "");
			dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}",
					  (long long)id);
			json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
		}
	}
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":1,\"method\":\"DOM.m1\"}");
	json_int_t req = expect_decide(&g, 1, "DOM.m1", ""); /* forgotten */
	dg_fake_cdp_none(&g.f);
	/* Kept, but it leaves after the one before it, in the client's order. */
	put(&g, DG_MSG_CDP_IN, 1, "{\"id\":2,\"method\":\"DOM.m0\"}");
	expect_decide_type(&g, DG_MSG_CDP_NOTE, 1, "DOM.m0", "");
	dg_fake_cdp_none(&g.f);
	verdict(&g, req, true, "r", "ok");
	json_int_t id1 = dg_fake_cdp_expect(&g.f, "DOM.m1", "B1", NULL);
	json_int_t id0 = dg_fake_cdp_expect(&g.f, "DOM.m0", "B1", NULL);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)id1);
	dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}", (long long)id0);
	expect_out(&g, 1, "{\"id\":1,\"result\":{}}");
	expect_out(&g, 1, "{\"id\":2,\"result\":{}}");
	/* The key bound: n found where the command as asked (what follows the
	 * DECIDE's header) is exactly DG_CDPFW_CACHE_KEY_MAX bytes (probes
	 * refused: nothing kept). */
	size_t at = DG_CDPFW_CACHE_KEY_MAX / 2;
	for (int tries = 0; probe_key(&g, at) != DG_CDPFW_CACHE_KEY_MAX; tries++) {
		cr_assert_lt(tries, 8, "no script length gives a %u-byte command",
			     DG_CDPFW_CACHE_KEY_MAX);
		at += DG_CDPFW_CACHE_KEY_MAX - probe_key(&g, at);
	}
	cr_assert_eq(probe_key(&g, at + 1), DG_CDPFW_CACHE_KEY_MAX + 1);
	for (int over = 0; over < 2; over++) {
		size_t n = at + (size_t)over;
		for (int twice = 0; twice < 2; twice++) {
			put_script(&g, 20 + over, n, 'x');
			json_int_t id = 0;
			if (over == 0 && twice == 1) {
				id = dg_fake_cdp_expect(&g.f, "Runtime.evaluate", "B1", NULL);
				expect_decide_type(&g, DG_MSG_CDP_NOTE, 1, "Runtime.evaluate", "");
			} else {
				json_int_t req = expect_decide(&g, 1, "Runtime.evaluate", "");
				verdict_cache(&g, req, true, true, "r", "ok");
				id = dg_fake_cdp_expect(&g.f, "Runtime.evaluate", "B1", NULL);
			}
			dg_fake_cdp_sendf(&g.f, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{}}",
					  (long long)id);
			json_decref(expect(&g, DG_MSG_CDP_OUT, 1));
		}
	}
	rig_close(&g);
}

/* Sends the bytes as the browser, in pipe-sized pieces, the client reading
 * each. */
static void browser_bytes(struct rig *g, const char *p, size_t n)
{
	while (n > 0) {
		size_t k = n < 60000 ? n : 60000;
		dg_fake_cdp_put(&g->f, p, k);
		dg_fake_cdp_pump(&g->f);
		p += k;
		n -= k;
	}
}

/* A reply the worker cannot read (longer than DG_CDP_MSG_MAX, more than
 * DG_CDP_NODES_MAX values, not JSON) ends its command with an error that
 * says so, at once; the client goes on. */
Test(cdp_fw_route, an_unreadable_reply_is_answered_not_lost)
{
	struct rig g;
	rig_open(&g);
	open_client(&g, 1, "B1");
	static const char *const want[] = {"longer than", "JSON values", "malformed JSON"};
	for (int kind = 0; kind < 3; kind++) {
		char msg[96];
		snprintf(msg, sizeof(msg), "{\"id\":%d,\"method\":\"Page.captureScreenshot\"}", 40 + kind);
		put(&g, DG_MSG_CDP_IN, 1, msg);
		json_int_t req = expect_decide(&g, 1, "Page.captureScreenshot", "");
		verdict(&g, req, true, "r", "ok");
		json_int_t id = dg_fake_cdp_expect(&g.f, "Page.captureScreenshot", "B1", NULL);
		size_t n = kind == 0 ? DG_CDP_MSG_MAX + 100 : kind == 1 ? 3 * DG_CDP_NODES_MAX : 64;
		char *r = malloc(n + 64);
		int k = snprintf(r, 64, "{\"id\":%lld,\"sessionId\":\"B1\",\"result\":{\"data\":",
				 (long long)id);
		if (kind == 0) {
			r[k] = '"';
			memset(r + k + 1, 'A', n - (size_t)k - 4);
			memcpy(r + n - 3, "\"}}", 3);
		} else if (kind == 1) {
			r[k] = '[';
			for (size_t i = (size_t)k + 1; i < n - 3; i += 2)
				memcpy(r + i, "0,", 2);
			memcpy(r + n - 3, "0]}", 3); /* (one brace short: never parsed) */
		} else {
			memset(r + k, '!', n - (size_t)k);
		}
		r[n] = '\0';
		browser_bytes(&g, r, n + 1);
		free(r);
		json_t *j = expect(&g, DG_MSG_CDP_OUT, 1);
		const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
		cr_assert(m && strstr(m, "deskgate: the browser's reply was not relayed: ") &&
			  strstr(m, want[kind]), "kind %d: %s", kind, m ? m : "(no error)");
		cr_assert_eq(json_integer_value(json_object_get(j, "id")), 40 + kind);
		json_decref(j);
	}
	round_trip(&g, 1, "{\"id\":50,\"method\":\"Page.enable\"}", "Page.enable", "", "B1",
		   "\"result\":{}", "{\"id\":50,\"result\":{}}");
	rig_close(&g);
}
