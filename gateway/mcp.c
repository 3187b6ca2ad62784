/* The MCP front door: /mcp, the streamable HTTP transport of the Model
 * Context Protocol (docs/mcp.md). An MCP session owns at most one desktop
 * session, created by its first tool call; a tool call becomes one agent
 * message (actions/ dg_mcp_call_message), handed to the runner exactly as
 * a WebSocket message is, and its answer (dg_mcp_result) goes back as the
 * JSON-RPC result, in JSON or as the last event of an SSE stream that
 * carries the call's progress before it.
 *
 * Connections that are not sockets: each MCP session has an agent conn
 * (the desktop session's agent, its creator: it hears "ready", "ended")
 * and each call a conn of its own (the runner's request->agent: it hears
 * that call's answer). Their sinks are below; they never free a conn,
 * because the runner may read it after sending (free_later does).
 *
 * Above session.c and runner.c in the gateway's order: only server.c
 * calls in here.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "gateway/server-priv.h"

#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif

#define DG_MCP_SESSIONS_MAX 256     /* MCP sessions the gateway holds at once */
#define DG_MCP_ENDED_KEPT 64        /* ended MCP sessions whose end reason a later
				     * request still gets (a 404 saying why) */
#define DG_MCP_RPC_ID_MAX 256       /* bytes of a JSON-RPC id string */
#define DG_MCP_CLIENT_TEXT_MAX 128  /* bytes of clientInfo name or version kept */
#define DG_MCP_PROGRESS_MS 1000     /* between progress notifications of a call */
#define DG_MCP_HDR_MAX 128          /* bytes of an Mcp-Session-Id or
				     * MCP-Protocol-Version header read */
#define DG_MCP_ACCEPT_MAX 512       /* bytes of an Accept header read */

static const char *const protocols[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

/* One chunk of a call's answer stream (with LWS_PRE headroom). */
struct mcp_out {
	struct mcp_out *next;
	size_t len;
	unsigned char data[];
};

struct mcp_call {
	struct mcp_call *next;
	struct mcp_call *all_prev, *all_next; /* every live call (calls_all) */
	struct mcp_session *m;  /* valid until done: a session outlives its calls' ends */
	struct gw *gw;
	char sid[DG_SESSION_ID_MAX + 1]; /* m's id, for the answer's header */
	struct conn rconn;      /* the runner's agent for this call */
	json_t *id;             /* the JSON-RPC id */
	json_t *progress;       /* _meta.progressToken, or NULL */
	unsigned long progress_n;
	bool exec;
	char tool[64];
	char *msg;              /* the agent message, until submitted */
	size_t msg_len;
	bool submitted;
	bool done;              /* answered (or dropped): nothing more to send */
	bool freeing;
	struct conn *http;      /* the connection it answers on; NULL once gone */
	bool sse;
	bool headers_sent;
	struct mcp_out *head, *tail;
	size_t queued;
	json_t *final;          /* JSON mode: the response waiting to be written */
	lws_sorted_usec_list_t sul_progress, sul_free;
};

struct mcp_session {
	bool used;
	struct gw *gw;
	char id[DG_SESSION_ID_MAX + 1];
	char owner[DG_TOKEN_NAME_MAX + 1];
	char protocol[16];
	json_t *info;           /* {"client": {name, version}, "protocol"} for the recording */
	json_t *opts;           /* capabilities.experimental.deskgate: the session's options */
	bool browser;
	int display_w, display_h;
	struct conn agent;      /* the desktop session's agent and creator */
	struct gw_session *s;   /* the desktop, once asked for; NULL before */
	bool ready;
	struct mcp_call *calls; /* not answered yet, in the order they came */
	unsigned long next_call;
	long long window_start;
	unsigned window_count;
	lws_sorted_usec_list_t sul_idle, sul_grace, sul_end;
	char end_reason[DG_ERR_MAX];
};

struct mcp_ended {
	char id[DG_SESSION_ID_MAX + 1];
	char owner[DG_TOKEN_NAME_MAX + 1];
	char reason[DG_ERR_MAX];
};

static struct mcp_session *sessions;
static struct mcp_call *calls_all; /* for the gateway's stop: freed calls leave it */
static struct mcp_ended ended[DG_MCP_ENDED_KEPT];
static unsigned ended_next;

static const long long US = 1000000;

static void session_end(struct mcp_session *m, const char *reason);
static void call_finish(struct mcp_call *c, json_t *response);

/* ---- JSON-RPC messages ------------------------------------------------------ */

static json_t *rpc_result(const json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "result", result ? result : json_object());
}

static json_t *rpc_error(const json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static json_t *rpc_error(const json_t *id, int code, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
			 "error", "code", code, "message", msg);
}

/* ---- HTTP answers --------------------------------------------------------------- */

/* Writes a whole answer on c at once, with the session header when sid
 * is given: what the lws callback returns. */
static int write_whole(struct conn *c, int status, const char *type, const char *sid,
		       const char *extra_name, const char *extra, const char *body, size_t len)
{
	const char *hdrs[5] = {NULL};
	int n = 0;
	if (sid) {
		hdrs[n++] = "mcp-session-id:";
		hdrs[n++] = sid;
	}
	if (extra) {
		hdrs[n++] = extra_name;
		hdrs[n++] = extra;
	}
	return dg_gw_write_http_extra(c->wsi, status, type, hdrs, body, len);
}

/* A JSON-RPC message as the whole answer (msg stolen). */
static int reply(struct gw *gw, struct conn *c, int status, const char *sid, json_t *msg)
{
	char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (status >= 400)
		gw->m.http_errors++;
	int r = write_whole(c, status, s ? "application/json" : "text/plain", sid, NULL, NULL,
			    s ? s : "", s ? strlen(s) : 0);
	free(s);
	return r;
}

/* ---- calls: their answer streams ----------------------------------------------- */

static void out_push(struct mcp_call *c, const char *data, size_t len)
{
	if (!c->http)
		return;
	if (c->queued + len > DG_WS_QUEUE_MAX) {
		/* A client that does not read is cut off rather than buffered. */
		lws_set_timeout(c->http->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		return;
	}
	struct mcp_out *o = malloc(sizeof(*o) + LWS_PRE + len);
	if (!o)
		return;
	o->next = NULL;
	o->len = len;
	memcpy(o->data + LWS_PRE, data, len);
	if (c->tail)
		c->tail->next = o;
	else
		c->head = o;
	c->tail = o;
	c->queued += len;
	lws_callback_on_writable(c->http->wsi);
}

/* One SSE event carrying msg (stolen), as one HTTP chunk. */
static void sse_send(struct mcp_call *c, json_t *msg)
{
	char *s = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	json_decref(msg);
	if (!s)
		return;
	static const char ev[] = "event: message\ndata: ", tail[] = "\n\n";
	size_t n = strlen(s);
	char head[64];
	int hl = snprintf(head, sizeof(head), "%zx\r\n%s", strlen(ev) + n + strlen(tail), ev);
	char *buf = malloc((size_t)hl + n + 4);
	if (buf) {
		memcpy(buf, head, (size_t)hl);
		memcpy(buf + hl, s, n);
		memcpy(buf + hl + n, "\n\n\r\n", 4);
		out_push(c, buf, (size_t)hl + n + 4);
	}
	free(buf);
	free(s);
}

static void out_free(struct mcp_call *c)
{
	for (struct mcp_out *o = c->head, *n; o; o = n) {
		n = o->next;
		free(o);
	}
	c->head = c->tail = NULL;
	c->queued = 0;
}

static void call_free(struct mcp_call *c)
{
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		calls_all = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	lws_sul_cancel(&c->sul_progress);
	lws_sul_cancel(&c->sul_free);
	out_free(c);
	json_decref(c->id);
	json_decref(c->progress);
	json_decref(c->final);
	free(c->msg);
	free(c);
}

static void call_free_now(lws_sorted_usec_list_t *sul)
{
	call_free(lws_container_of(sul, struct mcp_call, sul_free));
}

/* Frees c on the next turn of the loop: whoever called a sink may still
 * read c->rconn. */
static void free_later(struct mcp_call *c)
{
	if (c->freeing)
		return;
	c->freeing = true;
	lws_sul_cancel(&c->sul_progress);
	if (c->http) {
		c->http->mcp_call = NULL;
		c->http = NULL;
	}
	lws_sul_schedule(c->gw->ctx, 0, &c->sul_free, call_free_now, 1);
}

static void unlink_call(struct mcp_call *c)
{
	struct mcp_session *m = c->m;
	for (struct mcp_call **p = &m->calls; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	c->next = NULL;
}

/* The call's last message (response stolen; NULL: none, the call was
 * cancelled): it goes out and the stream ends; the call is freed once
 * written, or at once when its connection is gone. */
static void call_finish(struct mcp_call *c, json_t *response)
{
	if (c->done) {
		json_decref(response);
		return;
	}
	c->done = true;
	lws_sul_cancel(&c->sul_progress);
	unlink_call(c);
	if (!c->http) {
		json_decref(response);
		free_later(c);
		return;
	}
	if (c->sse) {
		if (response)
			sse_send(c, response);
		out_push(c, "0\r\n\r\n", 5);
	} else {
		c->final = response;
		lws_callback_on_writable(c->http->wsi);
	}
}

int dg_gw_mcp_writable(struct conn *h)
{
	struct mcp_call *c = h->mcp_call;
	if (!c->sse) {
		if (!c->done)
			return 0;
		json_t *fin = c->final;
		c->final = NULL;
		struct gw *gw = c->gw;
		char sid[sizeof(c->sid)];
		memcpy(sid, c->sid, sizeof(sid));
		free_later(c);
		if (!fin)
			return -1; /* cancelled: nothing to say, the client went on */
		return reply(gw, h, 200, sid, fin);
	}
	struct mcp_out *o = c->head;
	if (!o)
		return 0;
	int n = lws_write(h->wsi, o->data + LWS_PRE, o->len, LWS_WRITE_HTTP);
	if (n < 0)
		return -1;
	c->head = o->next;
	if (!c->head)
		c->tail = NULL;
	c->queued -= o->len;
	free(o);
	if (c->head) {
		lws_callback_on_writable(h->wsi);
		return 0;
	}
	if (!c->done)
		return 0;
	free_later(c);
	return lws_http_transaction_completed(h->wsi) ? -1 : 0;
}

/* ---- progress ------------------------------------------------------------------- */

/* What the call waits for, in words, for its progress notification. */
static void call_state(const struct mcp_call *c, char *out, size_t len)
{
	const struct mcp_session *m = c->m;
	const struct gw_session *s = m->s;
	if (!c->submitted) {
		snprintf(out, len, "starting the desktop");
		return;
	}
	if (s && s->cur && s->cur->agent == &c->rconn) {
		if (s->appr.pending) {
			char base[300];
			dg_config_base_url(&m->gw->cfg, false, base, sizeof(base));
			snprintf(out, len, "waiting for a human to approve it (rule %.100s: %.300s): "
				 "approval %s at %.200s/approvals, expires in %lld s", s->cur->decision.rule,
				 s->cur->decision.reason, s->appr.id, base,
				 (s->appr.expires_ms - dg_now_ms()) / 1000);
		} else {
			snprintf(out, len, "%s is running", c->tool);
		}
		return;
	}
	snprintf(out, len, "%s waits for the session's earlier actions", c->tool);
}

static void on_progress(lws_sorted_usec_list_t *sul)
{
	struct mcp_call *c = lws_container_of(sul, struct mcp_call, sul_progress);
	if (c->done || !c->http || !c->progress)
		return;
	/* c->m is valid: a call is done before its session's slot is freed. */
	char what[DG_ERR_MAX + 600];
	call_state(c, what, sizeof(what));
	c->progress_n++;
	sse_send(c, json_pack("{s:s, s:s, s:{s:O, s:I, s:s}}", "jsonrpc", "2.0", "method",
			      "notifications/progress", "params", "progressToken", c->progress,
			      "progress", (json_int_t)c->progress_n, "message", what));
	lws_sul_schedule(c->gw->ctx, 0, &c->sul_progress, on_progress,
			 DG_MCP_PROGRESS_MS * 1000);
}

/* ---- the sinks -------------------------------------------------------------------- */

/* A call's answer from the runner: the agent's answer in the wire format
 * the call was sent in (a tool_result, an exec "result", an "error");
 * anything else (a "pending" note, a hello) is not the end. */
static void call_sink(struct conn *rc, int status, json_t *msg)
{
	(void)status;
	struct mcp_call *c = rc->sink_ctx;
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (c->done || !type ||
	    (strcmp(type, "tool_result") && strcmp(type, "result") && strcmp(type, "error"))) {
		json_decref(msg);
		return;
	}
	json_t *result = NULL;
	struct dg_err err = {{0}};
	json_t *resp;
	if (dg_mcp_result(msg, c->exec, &result, &err) == 0)
		resp = rpc_result(c->id, result);
	else
		resp = rpc_error(c->id, -32603, "building the result: %s", err.msg);
	json_decref(msg);
	call_finish(c, resp);
}

static void submit(struct mcp_call *c)
{
	struct mcp_session *m = c->m;
	c->submitted = true;
	char *msg = c->msg;
	size_t len = c->msg_len;
	c->msg = NULL;
	dg_gw_session_agent_message(m->s, &c->rconn, msg, len);
	free(msg);
}

/* The MCP session's agent conn: the desktop's creation answered (status
 * 201 ready, else failed) and the session's own messages ("ended"). */
static void agent_sink(struct conn *ac, int status, json_t *msg)
{
	struct mcp_session *m = ac->sink_ctx;
	const char *type = json_string_value(json_object_get(msg, "type"));
	if (status == 201 && m->s) {
		m->ready = true;
		if (m->s->agent && m->s->agent != &m->agent) {
			json_decref(msg);
			return session_end(m, "another agent connection took the session's desktop");
		}
		dg_gw_session_agent_attach(m->s, &m->agent);
		for (struct mcp_call *c = m->calls, *n; c && m->s; c = n) {
			n = c->next;
			if (!c->submitted)
				submit(c);
		}
	} else if (status >= 400) {
		const char *why = json_string_value(
			json_object_get(json_object_get(msg, "error"), "message"));
		char reason[DG_ERR_MAX + 64];
		snprintf(reason, sizeof(reason), "the desktop did not start: %s", why ? why : "?");
		m->s = NULL;
		for (struct mcp_call *c = m->calls, *n; c; c = n) {
			n = c->next;
			call_finish(c, rpc_result(c->id, json_pack("{s:[{s:s, s:s}], s:b}", "content",
								     "type", "text", "text", reason,
								     "isError", true)));
		}
	} else if (status == 0 && type && strcmp(type, "ended") == 0) {
		const char *why = json_string_value(json_object_get(msg, "reason"));
		m->s = NULL;
		m->ready = false;
		char reason[DG_ERR_MAX + 64];
		snprintf(reason, sizeof(reason), "its desktop session ended: %s", why ? why : "?");
		json_decref(msg);
		return session_end(m, reason);
	}
	json_decref(msg);
}

/* ---- MCP sessions --------------------------------------------------------------- */

static void on_end(lws_sorted_usec_list_t *sul)
{
	struct mcp_session *m = lws_container_of(sul, struct mcp_session, sul_end);
	json_decref(m->info);
	json_decref(m->opts);
	memset(m, 0, sizeof(*m));
}

/* Ends m (reason kept for a later request's 404): its calls are
 * answered, its desktop ended; the slot is freed on the next turn of the
 * loop (a sink of its agent conn may be what called). */
static void session_end(struct mcp_session *m, const char *reason)
{
	if (!m->used || m->end_reason[0])
		return;
	snprintf(m->end_reason, sizeof(m->end_reason), "%s", reason);
	struct mcp_ended *e = &ended[ended_next++ % DG_MCP_ENDED_KEPT];
	snprintf(e->id, sizeof(e->id), "%s", m->id);
	snprintf(e->owner, sizeof(e->owner), "%s", m->owner);
	snprintf(e->reason, sizeof(e->reason), "%s", reason);
	lws_sul_cancel(&m->sul_idle);
	lws_sul_cancel(&m->sul_grace);
	struct gw_session *s = m->s;
	m->s = NULL;
	if (s && s->used && (s->creator == &m->agent || s->agent == &m->agent)) {
		s->creator = NULL;
		dg_gw_session_end(s, reason);
	}
	for (struct mcp_call *c = m->calls, *n; c; c = n) {
		n = c->next;
		call_finish(c, rpc_result(c->id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type",
							     "text", "text", reason, "isError", true)));
	}
	lws_sul_schedule(m->gw->ctx, 0, &m->sul_end, on_end, 1);
}

static void on_idle(lws_sorted_usec_list_t *sul)
{
	struct mcp_session *m = lws_container_of(sul, struct mcp_session, sul_idle);
	session_end(m, "the MCP session was idle too long (limits.idle_seconds)");
}

static void on_grace(lws_sorted_usec_list_t *sul)
{
	struct mcp_session *m = lws_container_of(sul, struct mcp_session, sul_grace);
	session_end(m, "the MCP client went away in the middle of a call and did not come back "
		       "(limits.disconnect_grace_seconds)");
}

static void touch(struct mcp_session *m)
{
	lws_sul_cancel(&m->sul_grace);
	lws_sul_schedule(m->gw->ctx, 0, &m->sul_idle, on_idle,
			 (lws_usec_t)m->gw->cfg.limits.idle_seconds * US);
}

static struct mcp_session *session_find(const char *id, const char *owner)
{
	for (int i = 0; i < DG_MCP_SESSIONS_MAX; i++) {
		struct mcp_session *m = &sessions[i];
		if (m->used && !m->end_reason[0] && strcmp(m->id, id) == 0 &&
		    strcmp(m->owner, owner) == 0)
			return m;
	}
	return NULL;
}

static const char *ended_reason(const char *id, const char *owner)
{
	for (int i = 0; i < DG_MCP_ENDED_KEPT; i++)
		if (ended[i].id[0] && strcmp(ended[i].id, id) == 0 &&
		    strcmp(ended[i].owner, owner) == 0)
			return ended[i].reason;
	return NULL;
}

/* ---- requests ------------------------------------------------------------------- */

/* A bounded copy of a string field of o, or "" when absent or not a string. */
static json_t *short_string(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	size_t n = s ? strnlen(s, DG_MCP_CLIENT_TEXT_MAX) : 0;
	/* Cut at a character's start, so the copy stays UTF-8. */
	while (s && n > 0 && s[n] && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	json_t *j = json_stringn(s ? s : "", n);
	return j ? j : json_string("");
}

static int do_initialize(struct gw *gw, struct conn *h, const json_t *id, const json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));
	const json_t *client = json_object_get(params, "clientInfo");
	if (!json_is_object(params) || !want || !json_is_object(client) ||
	    !json_is_string(json_object_get(client, "name")))
		return reply(gw, h, 200, NULL, rpc_error(id, -32602, "initialize needs params with "
						       "protocolVersion and clientInfo {name, version}"));
	const json_t *caps = json_object_get(params, "capabilities");
	const json_t *opts = json_object_get(json_object_get(caps, "experimental"), "deskgate");
	bool browser = true;
	int dw = DG_DESKTOP_WIDTH_DEFAULT, dh = DG_DESKTOP_HEIGHT_DEFAULT;
	char err[DG_ERR_MAX];
	if (opts && (json_object_get(opts, "tools") ||
		     dg_gw_session_opts_check(gw, opts, &browser, &dw, &dh, err, sizeof(err)) != 0)) {
		if (json_object_get(opts, "tools"))
			snprintf(err, sizeof(err), "tools is not an MCP session's option: the MCP "
						   "tools are fixed");
		return reply(gw, h, 200, NULL, rpc_error(id, -32602, "capabilities.experimental."
						       "deskgate: %s", err));
	}
	struct mcp_session *m = NULL;
	for (int i = 0; i < DG_MCP_SESSIONS_MAX && !m; i++)
		if (!sessions[i].used)
			m = &sessions[i];
	if (!m)
		return reply(gw, h, 503, NULL, rpc_error(id, -32000, "the gateway holds %d MCP "
						       "sessions, its limit", DG_MCP_SESSIONS_MAX));
	/* An Mcp-Session-Id has the form of a session id (the instance first),
	 * so a balancer routes it to this host by the header alone. */
	char sid[DG_SESSION_ID_MAX + 1];
	if (dg_gw_new_id(sid, sizeof(sid)) != 0)
		return reply(gw, h, 500, NULL, rpc_error(id, -32603, "no randomness for a session id"));
	memset(m, 0, sizeof(*m));
	m->used = true;
	m->gw = gw;
	memcpy(m->id, sid, sizeof(m->id));
	snprintf(m->owner, sizeof(m->owner), "%s", h->who.name);
	const char *proto = protocols[0];
	for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
		if (strcmp(want, protocols[i]) == 0)
			proto = protocols[i];
	snprintf(m->protocol, sizeof(m->protocol), "%s", proto);
	m->info = json_pack("{s:{s:o, s:o}, s:s, s:s}", "client", "name", short_string(client, "name"),
			    "version", short_string(client, "version"), "protocol", proto,
			    "mcp_session", m->id);
	m->opts = opts ? json_deep_copy(opts) : json_object();
	m->browser = browser;
	m->display_w = dw;
	m->display_h = dh;
	dg_gw_sink_conn(&m->agent, CONN_AGENT, &h->who, agent_sink, m);
	touch(m);
	json_t *res = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
				proto, "capabilities", "tools", "listChanged", false, "serverInfo",
				"name", "deskgate", "title", "deskgate", "version", DG_VERSION,
				"instructions",
				"Every tool call acts on one disposable, sandboxed desktop of this MCP "
				"session, under deskgate's policy: a refused call answers with "
				"isError naming the rule; a call the policy asks a human about waits "
				"for an approval.");
	return reply(gw, h, 200, m->id, rpc_result(id, res));
}

/* Makes the call wait for, or go to, the session's desktop. */
static void call_start(struct mcp_call *c)
{
	struct mcp_session *m = c->m;
	if (m->s && m->ready) {
		submit(c);
		return;
	}
	if (m->s)
		return; /* starting: agent_sink submits it */
	char err[DG_ERR_MAX];
	int status = 500;
	struct gw_session *s = NULL;
	if (dg_gw_session_create(m->gw, &m->agent, m->opts, m->info, &s, err, sizeof(err),
				 &status) != 0) {
		char why[DG_ERR_MAX + 64];
		snprintf(why, sizeof(why), "deskgate could not start a desktop: %s", err);
		call_finish(c, rpc_result(c->id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type",
							     "text", "text", why, "isError", true)));
		return;
	}
	m->s = s;
}

static int do_call(struct gw *gw, struct conn *h, struct mcp_session *m, const json_t *id,
		   const json_t *params, bool sse)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	const json_t *args = json_object_get(params, "arguments");
	const json_t *meta = json_object_get(params, "_meta");
	const json_t *token = json_object_get(meta, "progressToken");
	if (!json_is_object(params) || !name || (args && !json_is_object(args) && !json_is_null(args)))
		return reply(gw, h, 200, m->id, rpc_error(id, -32602, "tools/call needs params "
							 "{name, arguments?: {...}}"));
	if (token && !json_is_string(token) && !json_is_integer(token))
		return reply(gw, h, 200, m->id, rpc_error(id, -32602, "_meta.progressToken must be "
							 "a string or an integer"));
	long long now = dg_now_ms();
	if (now - m->window_start >= 1000) {
		m->window_start = now;
		m->window_count = 0;
	}
	if (++m->window_count > gw->cfg.limits.actions_per_second) {
		gw->m.protocol_errors++;
		return reply(gw, h, 200, m->id, rpc_error(id, -32000, "rate limited: at most %u calls "
							 "a second (limits.actions_per_second)",
							 gw->cfg.limits.actions_per_second));
	}
	unsigned n = 0;
	for (struct mcp_call *c = m->calls; c; c = c->next)
		n++;
	if (n >= gw->cfg.limits.max_pending_actions) {
		gw->m.protocol_errors++;
		return reply(gw, h, 200, m->id, rpc_error(id, -32000, "%u calls are waiting already "
							 "(limits.max_pending_actions)", n));
	}
	char call_id[32];
	snprintf(call_id, sizeof(call_id), "mcp_%lu", ++m->next_call);
	char *msg = NULL;
	size_t len = 0;
	struct dg_err err = {{0}};
	int rc = dg_mcp_call_message(name, args, call_id, &msg, &len, &err);
	if (rc == -ENOENT)
		return reply(gw, h, 200, m->id, rpc_error(id, -32602, "%s", err.msg));
	if (rc != 0) {
		/* A bad argument is the model's to see and correct. */
		json_t *res = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
					err.msg, "isError", true);
		return reply(gw, h, 200, m->id, rpc_result(id, res));
	}
	struct mcp_call *c = calloc(1, sizeof(*c));
	if (!c) {
		free(msg);
		return reply(gw, h, 500, m->id, rpc_error(id, -32603, "out of memory"));
	}
	c->m = m;
	c->gw = gw;
	memcpy(c->sid, m->id, sizeof(c->sid));
	c->all_next = calls_all;
	if (calls_all)
		calls_all->all_prev = c;
	calls_all = c;
	c->id = json_deep_copy(id);
	c->progress = token ? json_deep_copy(token) : NULL;
	c->exec = strcmp(name, "exec") == 0;
	snprintf(c->tool, sizeof(c->tool), "%.63s", name);
	c->msg = msg;
	c->msg_len = len;
	dg_gw_sink_conn(&c->rconn, CONN_AGENT, &h->who, call_sink, c);
	c->http = h;
	c->sse = sse;
	h->mcp_call = c;
	struct mcp_call **tail = &m->calls;
	while (*tail)
		tail = &(*tail)->next;
	*tail = c;
	/* The answer may take as long as a human does: no idle timeout. */
	lws_set_timeout(h->wsi, NO_PENDING_TIMEOUT, 0);
	if (sse) {
		const char *hdrs[] = {"transfer-encoding:", "chunked", "mcp-session-id:", m->id, NULL};
		if (dg_gw_write_http_head(h->wsi, 200, "text/event-stream",
					  LWS_ILLEGAL_HTTP_CONTENT_LEN, hdrs) != 0) {
			c->http = NULL;
			h->mcp_call = NULL;
			call_finish(c, NULL);
			return -1;
		}
		if (c->progress)
			lws_sul_schedule(gw->ctx, 0, &c->sul_progress, on_progress,
					 DG_MCP_PROGRESS_MS * 1000);
	}
	call_start(c);
	return 0;
}

static void do_cancel(struct mcp_session *m, const json_t *params)
{
	const json_t *rid = json_object_get(params, "requestId");
	for (struct mcp_call *c = m->calls; c; c = c->next) {
		if (!rid || !json_equal(c->id, rid))
			continue;
		if (c->submitted && m->s)
			dg_gw_runner_withdraw(m->s, &c->rconn, "the MCP client cancelled the call");
		call_finish(c, NULL);
		return;
	}
}

/* Whether the Accept header takes type (an absent header takes anything). */
static bool accepts(struct lws *wsi, const char *type)
{
	char acc[DG_MCP_ACCEPT_MAX];
	int n = lws_hdr_copy(wsi, acc, sizeof(acc), WSI_TOKEN_HTTP_ACCEPT);
	if (n <= 0)
		return true;
	return strstr(acc, type) != NULL || strstr(acc, "*/*") != NULL;
}

static int custom_header(struct lws *wsi, const char *name, char *out, size_t len)
{
	int n = lws_hdr_custom_length(wsi, name, (int)strlen(name));
	if (n <= 0)
		return 0;
	if ((size_t)n >= len)
		return -E2BIG;
	if (lws_hdr_custom_copy(wsi, out, (int)len, name, (int)strlen(name)) < 0)
		return -EINVAL;
	return n;
}

/* Whether an Origin header (when there is one) is the gateway's own: a
 * page elsewhere must not reach /mcp through a browser (DNS rebinding). */
static bool origin_ok(struct gw *gw, struct lws *wsi)
{
	char origin[300], base[300];
	int n = lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN);
	if (n <= 0)
		return lws_hdr_total_length(wsi, WSI_TOKEN_ORIGIN) == 0;
	dg_config_base_url(&gw->cfg, false, base, sizeof(base));
	/* The base URL's origin: scheme://host[:port], without its path. */
	char *path = strstr(base, "://");
	path = path ? strchr(path + 3, '/') : NULL;
	if (path)
		*path = '\0';
	return strcasecmp(origin, base) == 0;
}

static bool valid_id(const json_t *id)
{
	if (json_is_integer(id))
		return true;
	return json_is_string(id) && json_string_length(id) > 0 &&
	       json_string_length(id) <= DG_MCP_RPC_ID_MAX;
}

int dg_gw_mcp_http(struct gw *gw, struct conn *h, const char *raw, size_t raw_len)
{
	if (!dg_auth_may(&h->who, DG_PERM_CREATE_SESSION, NULL))
		return reply(gw, h, 403, NULL, rpc_error(NULL, -32000, "MCP needs an agent or admin "
							"token (a viewer watches, it does not act)"));
	if (!origin_ok(gw, h->wsi))
		return reply(gw, h, 403, NULL, rpc_error(NULL, -32000, "Origin is not this gateway's"));
	if (h->method != 'P' && h->method != 'D')
	{
		static const char body[] = "{\"error\":{\"code\":\"method_not_allowed\",\"message\":"
					   "\"POST or DELETE: deskgate sends nothing unasked\"}}";
		return write_whole(h, 405, "application/json", NULL, "allow:", "POST, DELETE", body,
				   strlen(body));
	}
	char sid[DG_MCP_HDR_MAX], ver[DG_MCP_HDR_MAX];
	int sl = custom_header(h->wsi, "mcp-session-id:", sid, sizeof(sid));
	int vl = custom_header(h->wsi, "mcp-protocol-version:", ver, sizeof(ver));
	if (sl < 0 || vl < 0)
		return reply(gw, h, 400, NULL, rpc_error(NULL, -32600, "an Mcp-Session-Id or "
							"MCP-Protocol-Version header is too long"));
	if (vl > 0) {
		bool known = false;
		for (size_t i = 0; i < sizeof(protocols) / sizeof(protocols[0]); i++)
			known = known || strcmp(ver, protocols[i]) == 0;
		if (!known)
			return reply(gw, h, 400, NULL, rpc_error(NULL, -32600, "unsupported "
								"MCP-Protocol-Version %.20s", ver));
	}
	struct mcp_session *m = sl > 0 ? session_find(sid, h->who.name) : NULL;
	if (sl > 0 && !m) {
		const char *why = ended_reason(sid, h->who.name);
		return reply(gw, h, 404, NULL, why ? rpc_error(NULL, -32001, "the MCP session ended: "
							       "%s", why)
						   : rpc_error(NULL, -32001, "no such MCP session"));
	}
	if (h->method == 'D') {
		if (!m)
			return reply(gw, h, 400, NULL, rpc_error(NULL, -32600, "DELETE needs the "
								"Mcp-Session-Id header"));
		session_end(m, "the MCP client ended the session (DELETE /mcp)");
		return write_whole(h, 200, "application/json", NULL, NULL, NULL, "{}", 2);
	}
	if (h->body_too_big)
		return reply(gw, h, 413, NULL, rpc_error(NULL, -32600, "a message is at most %u bytes "
							"(limits.max_message_bytes)",
							gw->cfg.limits.max_message_bytes));
	json_error_t jerr;
	json_t *msg = raw_len ? json_loadb(raw, raw_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!msg) {
		gw->m.protocol_errors++;
		return reply(gw, h, 400, NULL, rpc_error(NULL, -32700, "parse error: %s",
							raw_len ? jerr.text : "an empty body"));
	}
	int r;
	const json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	const json_t *params = json_object_get(msg, "params");
	if (json_is_array(msg)) {
		r = reply(gw, h, 400, NULL, rpc_error(NULL, -32600, "batches are not supported: one "
							 "JSON-RPC message a request"));
	} else if (!json_is_object(msg) ||
		   !json_is_string(json_object_get(msg, "jsonrpc")) ||
		   strcmp(json_string_value(json_object_get(msg, "jsonrpc")), "2.0") != 0 ||
		   (id && !valid_id(id)) || (params && !json_is_object(params))) {
		gw->m.protocol_errors++;
		r = reply(gw, h, 400, NULL, rpc_error(valid_id(id) ? id : NULL, -32600, "not a "
						       "JSON-RPC 2.0 message (jsonrpc \"2.0\", id a "
						       "string or integer, params an object)"));
	} else if (!method) {
		/* A response to a request deskgate never sends: accepted, ignored. */
		r = write_whole(h, 202, "application/json", m ? m->id : NULL, NULL, NULL, "", 0);
	} else if (strcmp(method, "initialize") == 0 && id) {
		r = m ? reply(gw, h, 400, NULL, rpc_error(id, -32600, "initialize opens a session; "
							  "this request names one already"))
		      : do_initialize(gw, h, id, params);
	} else if (!m) {
		r = reply(gw, h, 400, NULL, rpc_error(id, -32600, "the Mcp-Session-Id header is "
							 "required after initialize"));
	} else if (!id) {
		touch(m);
		if (strcmp(method, "notifications/cancelled") == 0)
			do_cancel(m, params);
		r = write_whole(h, 202, "application/json", m->id, NULL, NULL, "", 0);
	} else {
		touch(m);
		if (strcmp(method, "ping") == 0)
			r = reply(gw, h, 200, m->id, rpc_result(id, NULL));
		else if (strcmp(method, "tools/list") == 0 && json_object_get(params, "cursor"))
			r = reply(gw, h, 200, m->id, rpc_error(id, -32602, "no such cursor: every "
								  "tool is on the first page"));
		else if (strcmp(method, "tools/list") == 0)
			r = reply(gw, h, 200, m->id,
				  rpc_result(id, json_pack("{s:o}", "tools",
							   dg_mcp_tools(m->browser, m->display_w,
									m->display_h))));
		else if (strcmp(method, "tools/call") == 0)
			r = do_call(gw, h, m, id, params, accepts(h->wsi, "text/event-stream"));
		else
			r = reply(gw, h, 200, m->id, rpc_error(id, -32601, "method not found: %.64s",
								method));
	}
	json_decref(msg);
	return r;
}

void dg_gw_mcp_http_closed(struct conn *h)
{
	struct mcp_call *c = h->mcp_call;
	h->mcp_call = NULL;
	if (!c)
		return;
	c->http = NULL;
	out_free(c);
	if (c->done)
		return free_later(c);
	struct mcp_session *m = c->m;
	if (c->submitted && m->s)
		dg_gw_runner_withdraw(m->s, &c->rconn, "the MCP client's connection closed");
	call_finish(c, NULL);
	/* Its client went away mid-call: unless it comes back (any request),
	 * the session ends after the grace period. */
	for (struct mcp_call *o = m->calls; o; o = o->next)
		if (o->http)
			return;
	lws_sul_schedule(m->gw->ctx, 0, &m->sul_grace, on_grace,
			 (lws_usec_t)m->gw->cfg.limits.disconnect_grace_seconds * US + 1);
}

int dg_gw_mcp_start(struct gw *gw)
{
	(void)gw;
	sessions = calloc(DG_MCP_SESSIONS_MAX, sizeof(*sessions));
	return sessions ? 0 : -ENOMEM;
}

void dg_gw_mcp_stop(struct gw *gw)
{
	(void)gw;
	for (int i = 0; sessions && i < DG_MCP_SESSIONS_MAX; i++) {
		struct mcp_session *m = &sessions[i];
		if (!m->used)
			continue;
		lws_sul_cancel(&m->sul_idle);
		lws_sul_cancel(&m->sul_grace);
		lws_sul_cancel(&m->sul_end);
		json_decref(m->info);
		json_decref(m->opts);
	}
	while (calls_all) {
		if (calls_all->http)
			calls_all->http->mcp_call = NULL;
		call_free(calls_all);
	}
	free(sessions);
	sessions = NULL;
}
