/* cdp-fw: the CDP firewall's routing (contract: cdp-fw-priv.h).
 *
 * A fixed table of clients (cdp-fw-int-priv.h); each holds its browser session, the sessions
 * it owns (with the session each was announced on), its messages waiting
 * for that browser session (raw bytes, in order) and its commands waiting
 * for a verdict or a reply (a fixed table, each with its arrival number:
 * allowed ones leave for Chromium in that order). A command sent to
 * Chromium carries a ticket (struct ticket, malloc'd, freed by its
 * completion, listed in the firewall until then) that names the client
 * slot's use and the command's slot and number; a slot freed meanwhile (the
 * client went away) no longer holds that number, and the reply is dropped.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/proto/proto.h"
#include "desktop/worker/cdp-classify-priv.h"
#include "desktop/worker/cdp-fw-int-priv.h"

/* Chromium's own answer to a command on a session it does not know. */
#define NOT_FOUND_CODE -32001
#define NOT_FOUND_TEXT "Session with given id not found."
/* The CDP code of a command the server refuses (Chromium's "server error"). */
#define REFUSED_CODE -32000
#define BUSY_TEXT "deskgate: too many commands in flight"
/* Largest integer id a client may use: JavaScript's safe integers. */
#define ID_MAX ((json_int_t)1 << 53)
/* Bytes of a DROP reason after the client number. */
#define REASON_MAX (DG_IPC_CDP_SMALL_MAX - DG_CDP_CLIENT_HDR - 1)


/* ---- to the owner ---- */

static void count_send(struct dg_cdpfw *fw, int r)
{
	if (r)
		fw->st.send_errors++;
}

void dg_cdpfw_to_client(struct dg_cdpfw *fw, const struct client *cl, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s) {
		fw->st.send_errors++;
		return;
	}
	size_t n = strlen(s);
	if (n > DG_CDP_CLIENT_MSG_MAX)
		fw->st.send_errors++; /* cannot happen: Chromium's are at most DG_CDP_MSG_MAX */
	else
		count_send(fw, dg_cdp_client_send(fw->ctl, DG_MSG_CDP_OUT, cl->num, s, n));
	free(s);
}

/* The answer to a command: error {code, message}; with session (not NULL,
 * not ""), on that session. */
static void answer_error(struct dg_cdpfw *fw, const struct client *cl, json_int_t id,
			 const char *session, int code, const char *message)
{
	json_t *j = json_pack("{s:I, s:{s:i, s:s}}", "id", id, "error", "code", code, "message",
			      message);
	if (j && session && *session)
		json_object_set_new(j, "sessionId", json_string(session));
	dg_cdpfw_to_client(fw, cl, j);
}

static void client_free(struct dg_cdpfw *fw, struct client *cl);

void dg_cdpfw_drop(struct dg_cdpfw *fw, struct client *cl, const char *fmt, ...)
{
	char why[REASON_MAX + 1];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	/* The reason may quote the client: printable ASCII only. */
	for (char *p = why; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	count_send(fw, dg_cdp_client_send(fw->ctl, DG_MSG_CDP_DROP, cl->num, why, strlen(why)));
	fw->st.dropped++;
	client_free(fw, cl);
}

/* ---- clients ---- */

static struct client *client_find(struct dg_cdpfw *fw, uint32_t num)
{
	for (int i = 0; i < DG_CDPFW_CLIENTS_MAX; i++)
		if (fw->clients[i].used && fw->clients[i].num == num)
			return &fw->clients[i];
	return NULL;
}

static struct ticket *ticket_new(struct dg_cdpfw *fw, struct client *cl, struct cmd *k)
{
	struct ticket *t = malloc(sizeof(*t));
	if (!t)
		return NULL;
	*t = (struct ticket){fw, NULL, fw->tickets, (int)(cl - fw->clients), cl->gen, k,
			     ++fw->next_ticket};
	if (fw->tickets)
		fw->tickets->prev = t;
	fw->tickets = t;
	return t;
}

/* A ticket's completion: *copy gets it, it leaves the list and is freed.
 * Returns the firewall, or NULL when it is gone or the command was
 * cancelled with the DevTools client. */
static struct dg_cdpfw *ticket_end(struct ticket *t, int status, struct ticket *copy)
{
	*copy = *t;
	struct dg_cdpfw *fw = t->fw;
	if (fw) {
		if (t->prev)
			t->prev->next = t->next;
		else
			fw->tickets = t->next;
		if (t->next)
			t->next->prev = t->prev;
	}
	free(t);
	return status == -ECANCELED ? NULL : fw;
}

static void cmd_clear(struct client *cl, struct cmd *k)
{
	if (k->state == CMD_DECIDING || k->state == CMD_ALLOWED) {
		cl->held_bytes -= k->bytes;
		cl->held_nodes -= k->nodes;
	}
	json_decref(k->params);
	free(k->key);
	memset(k, 0, sizeof(*k));
	cl->n_cmds--;
}

/* Everything of the client goes; its browser session is detached, which
 * detaches every session it opened under it. Replies on their way find
 * their slot empty (their ticket no longer named there). */
static void client_free(struct dg_cdpfw *fw, struct client *cl)
{
	for (int i = 0; i < cl->n_queued; i++)
		free(cl->queue[i].data);
	for (int i = 0; i < DG_CDPFW_PENDING_MAX; i++)
		if (cl->cmds[i].state != CMD_FREE)
			cmd_clear(cl, &cl->cmds[i]);
	cl->n_queued = 0;
	cl->used = false;
	cl->closing = cl->browser[0] &&
		      dg_cdp_send(fw->cdp, "Target.detachFromTarget",
				  json_pack("{s:s}", "sessionId", cl->browser), NULL, NULL, NULL,
				  NULL) == 0;
	if (!cl->closing)
		memset(cl, 0, sizeof(*cl));
}

bool dg_cdpfw_owns(const struct client *cl, const char *session)
{
	if (cl->browser[0] && strcmp(cl->browser, session) == 0)
		return true;
	for (int i = 0; i < DG_CDPFW_SESSIONS_MAX; i++)
		if (cl->sessions[i].id[0] && strcmp(cl->sessions[i].id, session) == 0)
			return true;
	return false;
}

static void process(struct dg_cdpfw *fw, struct client *cl, const uint8_t *data, size_t len);

static void attached(void *arg, int status, json_t *reply, const char *error_message)
{
	(void)error_message;
	struct ticket t;
	struct dg_cdpfw *fw = ticket_end(arg, status, &t);
	if (!fw)
		return;
	fw->n_attaching--;
	struct client *cl = &fw->clients[t.client];
	bool mine = cl->used && cl->gen == t.gen;
	json_t *sid = json_object_get(json_object_get(reply, "result"), "sessionId");
	if (!mine) { /* the client went away meanwhile: so does its session */
		if (status == 0 && dg_cdp_valid_id(sid))
			dg_cdp_send(fw->cdp, "Target.detachFromTarget",
				    json_pack("{s:O}", "sessionId", sid), NULL, NULL, NULL, NULL);
		return;
	}
	if (status != 0 || !dg_cdp_valid_id(sid)) {
		json_t *m = json_object_get(json_object_get(reply, "error"), "message");
		dg_cdpfw_drop(fw, cl, "the browser gave no session for the client (%.200s)",
		     json_is_string(m) ? json_string_value(m) : status ? strerror(-status)
								: "no sessionId");
		return;
	}
	snprintf(cl->browser, sizeof(cl->browser), "%s", json_string_value(sid));
	fw->opened = true;
	/* The messages that waited, in order (one may drop the client). */
	uint64_t gen = cl->gen;
	for (int i = 0; i < cl->n_queued; i++) {
		struct queued q = cl->queue[i];
		cl->queue[i].data = NULL;
		cl->held_bytes -= q.len;
		if (cl->used && cl->gen == gen)
			process(fw, cl, q.data, q.len);
		free(q.data);
	}
	if (cl->used && cl->gen == gen)
		cl->n_queued = 0;
}

static void on_open(struct dg_cdpfw *fw, uint32_t num)
{
	struct client *cl = NULL;
	for (int i = 0; i < DG_CDPFW_CLIENTS_MAX && !cl; i++)
		if (!fw->clients[i].used && !fw->clients[i].closing)
			cl = &fw->clients[i];
	for (int i = 0; i < DG_CDPFW_CLIENTS_MAX && !cl; i++)
		if (!fw->clients[i].used)
			cl = &fw->clients[i];
	const char *refuse = !fw->cdp ? "this session has no browser"
			     : !cl    ? "too many CDP clients"
				      : NULL;
	if (refuse) {
		fw->st.refused_clients++;
		count_send(fw, dg_cdp_client_send(fw->ctl, DG_MSG_CDP_DROP, num, refuse,
						  strlen(refuse)));
		return;
	}
	memset(cl, 0, sizeof(*cl));
	cl->used = true;
	cl->num = num;
	cl->gen = ++fw->next_gen;
	fw->st.opened++;
	struct ticket *t = ticket_new(fw, cl, NULL), copy;
	struct dg_err e = {{0}};
	if (!t || dg_cdp_send_raw(fw->cdp, "Target.attachToBrowserTarget", NULL, NULL, attached, t,
				  &e)) {
		if (t)
			ticket_end(t, -ECANCELED, &copy);
		dg_cdpfw_drop(fw, cl, "no session for the client: %s", t ? e.msg : "out of memory");
		return;
	}
	fw->n_attaching++;
}

/* ---- commands ---- */

/* Reads one client message into its parts; NULL with why when it is not
 * a command (the caller drops the client). */
static json_t *parse(const uint8_t *data, size_t len, size_t *nodes, char *why, size_t why_len)
{
	if (len > DG_CDP_MSG_MAX) {
		snprintf(why, why_len, "longer than %u bytes", DG_CDP_MSG_MAX);
		return NULL;
	}
	*nodes = dg_cdp_nodes((const char *)data, len, DG_CDP_NODES_MAX);
	if (*nodes > DG_CDP_NODES_MAX) {
		snprintf(why, why_len, "more than %d JSON values", DG_CDP_NODES_MAX);
		return NULL;
	}
	json_error_t je;
	json_t *m = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &je);
	if (!m) {
		snprintf(why, why_len, "not JSON (at byte %d: %.80s)", je.position, je.text);
		return NULL;
	}
	const char *key;
	json_t *v;
	if (!json_is_object(m)) {
		snprintf(why, why_len, "not an object");
		goto bad;
	}
	json_object_foreach(m, key, v)
	{
		if (strcmp(key, "id") != 0 && strcmp(key, "method") != 0 &&
		    strcmp(key, "params") != 0 && strcmp(key, "sessionId") != 0) {
			snprintf(why, why_len, "unknown key \"%.40s\"", key);
			goto bad;
		}
	}
	json_t *id = json_object_get(m, "id"), *method = json_object_get(m, "method");
	json_t *params = json_object_get(m, "params"), *sid = json_object_get(m, "sessionId");
	if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > ID_MAX)
		snprintf(why, why_len, "id is not an integer from 0 to 2^53");
	else if (!json_is_string(method) || !dg_cdp_method_ok(json_string_value(method)))
		snprintf(why, why_len, "method is not a \"Domain.method\" name");
	else if (params && !json_is_object(params))
		snprintf(why, why_len, "params is not an object");
	else if (sid && !json_is_string(sid))
		snprintf(why, why_len, "sessionId is not a string");
	else
		return m;
bad:
	json_decref(m);
	return NULL;
}

/* A command that would give a page's scripts a protocol connection of
 * their own, past the firewall (the classifier refuses the sessions that
 * are not flattened, whose commands would travel inside others). NULL
 * when the command may be decided. */
static const char *unrelayable(const char *method)
{
	if (strcmp(method, "Target.exposeDevToolsProtocol") == 0)
		return "deskgate: not relayed (it would open a protocol connection past the firewall)";
	return NULL;
}

static struct cmd *cmd_slot(struct client *cl)
{
	for (int i = 0; i < DG_CDPFW_PENDING_MAX; i++)
		if (cl->cmds[i].state == CMD_FREE)
			return &cl->cmds[i];
	return NULL;
}

static void flush(struct dg_cdpfw *fw, struct client *cl);

/* ---- the verdict cache ---- */

static struct cached *cache_find(struct dg_cdpfw *fw, const char *key, size_t len)
{
	for (int i = 0; i < DG_CDPFW_CACHE_MAX; i++) {
		struct cached *e = &fw->cache[i];
		if (e->key && e->len == len && memcmp(e->key, key, len) == 0)
			return e;
	}
	return NULL;
}

/* Keeps k's command (its key, taken) as allowed unasked from now on. */
static void cache_keep(struct dg_cdpfw *fw, struct cmd *k)
{
	if (!k->key || cache_find(fw, k->key, k->key_len))
		return;
	struct cached *e = &fw->cache[0];
	for (int i = 0; i < DG_CDPFW_CACHE_MAX && e->key; i++)
		if (!fw->cache[i].key || fw->cache[i].used < e->used)
			e = &fw->cache[i];
	free(e->key);
	*e = (struct cached){k->key, k->key_len, ++fw->cache_clock};
	k->key = NULL;
}

/* Decides k: under a cached verdict (true: allowed, the owner told), or by
 * asking the owner (true: asked; the verdict comes later). false when it
 * could be neither (answered). */
static bool decide(struct dg_cdpfw *fw, struct client *cl, struct cmd *k,
		   const struct dg_cdp_class *cls)
{
	json_t *j = json_pack("{s:s}", "method", k->method);
	if (j && cls->action)
		json_object_set(j, "action", cls->action);
	if (j && cls->code)
		json_object_set(j, "code", cls->code);
	if (j && cls->url)
		json_object_set(j, "url", cls->url);
	if (j && cls->params)
		json_object_set(j, "params", cls->params);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	size_t n = s ? strlen(s) : 0;
	if (!s || n > DG_IPC_CDP_DECIDE_MAX - 128) {
		free(s);
		answer_error(fw, cl, k->id, k->session, REFUSED_CODE,
			     s ? "deskgate: the command is too large to decide"
			       : "deskgate: out of memory");
		return false;
	}
	struct cached *e = cache_find(fw, s, n);
	if (e) {
		e->used = ++fw->cache_clock;
		k->state = CMD_ALLOWED;
		uint64_t req = k->req;
		char session[sizeof(k->session)];
		memcpy(session, k->session, sizeof(session));
		flush(fw, cl); /* (which may answer and clear k) */
		/* After the command left: recording it is off its path. */
		count_send(fw, dg_cdp_decide_send(fw->ctl, DG_MSG_CDP_NOTE, req, cl->num, session,
						  s, n));
		free(s);
		fw->st.cached++;
		return true;
	}
	count_send(fw, dg_cdp_decide_send(fw->ctl, DG_MSG_CDP_DECIDE, k->req, cl->num, k->session,
					  s, n));
	if (n <= DG_CDPFW_CACHE_KEY_MAX) {
		k->key = s;
		k->key_len = n;
	} else {
		free(s);
	}
	fw->st.decided++;
	return true;
}

/* One message of an attached client. */
static void process(struct dg_cdpfw *fw, struct client *cl, const uint8_t *data, size_t len)
{
	char why[160];
	size_t nodes;
	json_t *m = parse(data, len, &nodes, why, sizeof(why));
	if (!m) {
		dg_cdpfw_drop(fw, cl, "malformed CDP message: %s", why);
		return;
	}
	fw->st.commands++;
	json_int_t id = json_integer_value(json_object_get(m, "id"));
	const char *method = json_string_value(json_object_get(m, "method"));
	json_t *params = json_object_get(m, "params"), *sid = json_object_get(m, "sessionId");
	const char *session = sid ? json_string_value(sid) : "";
	struct dg_cdp_class cls = {0};
	struct dg_err e = {{0}};
	struct cmd *k;
	if (sid && !dg_cdpfw_owns(cl, session)) {
		fw->st.not_found++;
		answer_error(fw, cl, id, NULL, NOT_FOUND_CODE, NOT_FOUND_TEXT);
	} else if (cl->n_cmds >= DG_CDPFW_PENDING_MAX ||
		   cl->held_bytes + len > DG_CDPFW_HELD_BYTES_MAX ||
		   cl->held_nodes + nodes > DG_CDPFW_HELD_NODES_MAX || !(k = cmd_slot(cl))) {
		fw->st.refused++;
		answer_error(fw, cl, id, session, REFUSED_CODE, BUSY_TEXT);
	} else if ((cls.refuse = unrelayable(method)) ||
		   dg_cdp_classify(method, params, &fw->view, &cls, &e) != 0 || cls.refuse) {
		/* The classifier's -EINVAL names the parameter that is wrong. */
		fw->st.refused++;
		char text[DG_ERR_MAX + 16];
		snprintf(text, sizeof(text), "%s%s", cls.refuse ? "" : "deskgate: ",
			 cls.refuse ? cls.refuse : e.msg);
		answer_error(fw, cl, id, session, REFUSED_CODE, text);
	} else {
		*k = (struct cmd){.state = CMD_DECIDING, .req = ++fw->next_req,
				  .seq = cl->next_seq++, .id = id, .bytes = len, .nodes = nodes};
		snprintf(k->session, sizeof(k->session), "%s", session);
		snprintf(k->method, sizeof(k->method), "%s", method);
		k->params = params ? json_incref(params) : NULL;
		cl->n_cmds++;
		cl->held_bytes += len;
		cl->held_nodes += nodes;
		if (!decide(fw, cl, k, &cls))
			cmd_clear(cl, k);
	}
	dg_cdp_class_free(&cls);
	json_decref(m);
}

static void on_in(struct dg_cdpfw *fw, struct client *cl, const uint8_t *data, size_t len)
{
	if (cl->browser[0]) {
		process(fw, cl, data, len);
		return;
	}
	if (cl->n_queued >= DG_CDPFW_QUEUE_MAX || cl->held_bytes + len > DG_CDPFW_HELD_BYTES_MAX) {
		dg_cdpfw_drop(fw, cl, "more than %d messages before its session was ready",
		     DG_CDPFW_QUEUE_MAX);
		return;
	}
	uint8_t *copy = malloc(len ? len : 1);
	if (!copy) {
		dg_cdpfw_drop(fw, cl, "out of memory");
		return;
	}
	memcpy(copy, data, len);
	cl->queue[cl->n_queued++] = (struct queued){copy, len};
	cl->held_bytes += len;
}

/* Chromium's reply to a client's command: to the client with its own id,
 * the reply's result or error as they are. */
static void replied(void *arg, int status, json_t *reply, const char *error_message)
{
	struct ticket t;
	struct dg_cdpfw *fw = ticket_end(arg, status, &t);
	if (!fw)
		return;
	struct client *cl = &fw->clients[t.client];
	struct cmd *k = t.cmd;
	if (!cl->used || cl->gen != t.gen || k->state != CMD_SENT || k->ticket != t.no)
		return; /* the client went away */
	json_t *error = json_object_get(reply, "error"), *result = json_object_get(reply, "result");
	json_t *j;
	char text[DG_ERR_MAX + 64];
	if (status != 0) {
		/* The browser went away, or its reply could not be read (too
		 * long, too many values: dg_cdp says which). */
		snprintf(text, sizeof(text), "deskgate: %s%s",
			 status == -EPIPE || status == -ECONNRESET || !error_message
				 ? "the browser went away"
				 : "the browser's reply was not relayed: ",
			 status == -EPIPE || status == -ECONNRESET || !error_message ? ""
											: error_message);
		j = json_pack("{s:I, s:{s:i, s:s}}", "id", k->id, "error", "code", REFUSED_CODE,
			      "message", text);
	}
	else if (json_is_object(error))
		j = json_pack("{s:I, s:O}", "id", k->id, "error", error);
	else if (json_is_object(result))
		j = json_pack("{s:I, s:O}", "id", k->id, "result", result);
	else
		j = json_pack("{s:I, s:{s:i, s:s}}", "id", k->id, "error", "code", -32603,
			      "message", "deskgate: the browser's reply had no result");
	/* On the session the client named, unless Chromium answered from the
	 * browser itself (a session it no longer knows: -32001, as it is). */
	if (j && k->session[0] && json_object_get(reply, "sessionId"))
		json_object_set_new(j, "sessionId", json_string(k->session));
	fw->st.replies++;
	cmd_clear(cl, k);
	dg_cdpfw_to_client(fw, cl, j);
}

/* Sends the client's allowed commands to Chromium in the order it sent
 * them: up to the first one still waiting for its verdict. */
static void flush(struct dg_cdpfw *fw, struct client *cl)
{
	while (cl->used && cl->browser[0]) {
		struct cmd *next = NULL;
		for (int i = 0; i < DG_CDPFW_PENDING_MAX; i++) {
			struct cmd *k = &cl->cmds[i];
			if ((k->state == CMD_DECIDING || k->state == CMD_ALLOWED) &&
			    (!next || k->seq < next->seq))
				next = k;
		}
		if (!next || next->state != CMD_ALLOWED)
			return;
		/* Its session may have gone while it was decided. */
		if (next->session[0] && !dg_cdpfw_owns(cl, next->session)) {
			fw->st.not_found++;
			answer_error(fw, cl, next->id, NULL, NOT_FOUND_CODE, NOT_FOUND_TEXT);
			cmd_clear(cl, next);
			continue;
		}
		struct ticket *t = ticket_new(fw, cl, next), copy;
		struct dg_err e = {{0}};
		int r = -ENOMEM;
		if (t) {
			json_t *params = next->params;
			next->params = NULL;
			r = dg_cdp_send_raw(fw->cdp, next->method, params,
					    next->session[0] ? next->session : cl->browser, replied, t,
					    &e);
		}
		if (r) {
			if (t)
				ticket_end(t, -ECANCELED, &copy);
			char text[DG_ERR_MAX + 16];
			snprintf(text, sizeof(text), "deskgate: %s", t ? e.msg : "out of memory");
			answer_error(fw, cl, next->id, next->session, REFUSED_CODE, text);
			cmd_clear(cl, next);
			continue;
		}
		cl->held_bytes -= next->bytes;
		cl->held_nodes -= next->nodes;
		if (!fw->sent_first)
			fw->sent_first = next->req;
		fw->sent_last = next->req > fw->sent_last ? next->req : fw->sent_last;
		next->state = CMD_SENT;
		next->ticket = t->no;
	}
}

static int on_verdict(struct dg_cdpfw *fw, const uint8_t *data, size_t len, struct dg_err *err)
{
	struct dg_cdp_verdict v;
	int r = dg_cdp_verdict_decode(data, len, &v, err);
	if (r)
		return r;
	for (int c = 0; c < DG_CDPFW_CLIENTS_MAX; c++) {
		struct client *cl = &fw->clients[c];
		for (int i = 0; cl->used && i < DG_CDPFW_PENDING_MAX; i++) {
			struct cmd *k = &cl->cmds[i];
			if (k->state != CMD_DECIDING || k->req != v.req)
				continue;
			if (v.allow) {
				fw->st.allowed++;
				if (v.cache)
					cache_keep(fw, k);
				k->state = CMD_ALLOWED;
				flush(fw, cl);
				return 0;
			}
			fw->st.denied++;
			if (strcmp(v.rule, DG_CDP_RULE_DOWNLOADS) == 0) {
				/* Not applied, answered as done: the guard's refusal of
				 * every download stays, and clients (Playwright at
				 * connect) treat this command's failure as fatal. */
				json_t *j = json_pack("{s:I, s:{}}", "id", k->id, "result");
				if (j && k->session[0])
					json_object_set_new(j, "sessionId", json_string(k->session));
				dg_cdpfw_to_client(fw, cl, j);
				cmd_clear(cl, k);
				flush(fw, cl);
				return 0;
			}
			char text[sizeof(v.rule) + sizeof(v.reason) + 32];
			snprintf(text, sizeof(text), "deskgate: denied by %s: %s", v.rule, v.reason);
			answer_error(fw, cl, k->id, k->session, REFUSED_CODE, text);
			cmd_clear(cl, k);
			flush(fw, cl); /* those after it may go now */
			return 0;
		}
	}
	fw->st.stale_verdicts++;
	return 0;
}

/* ---- the owner's messages ---- */

bool dg_cdpfw_handles(uint32_t type)
{
	return type == DG_MSG_CDP_OPEN || type == DG_MSG_CDP_CLOSE || type == DG_MSG_CDP_IN ||
	       type == DG_MSG_CDP_VERDICT || type == DG_MSG_CDP_FORGET;
}

/* Every kept verdict is dropped: the next command of each kind is asked
 * about again. */
static void cache_forget(struct dg_cdpfw *fw)
{
	for (int i = 0; i < DG_CDPFW_CACHE_MAX; i++) {
		free(fw->cache[i].key);
		fw->cache[i] = (struct cached){0};
	}
}

int dg_cdpfw_message(struct dg_cdpfw *fw, uint32_t type, const uint8_t *data, size_t len,
		     struct dg_err *err)
{
	if (type == DG_MSG_CDP_VERDICT)
		return on_verdict(fw, data, len, err);
	if (type == DG_MSG_CDP_FORGET) {
		if (len != 0)
			return dg_err_set(err, -EPROTO, "CDP forget message: %zu bytes", len);
		cache_forget(fw);
		return 0;
	}
	uint32_t num;
	const uint8_t *rest;
	size_t rest_len;
	if (!dg_cdpfw_handles(type) || dg_cdp_client_of(data, len, &num, &rest, &rest_len) != 0 ||
	    (type != DG_MSG_CDP_IN && rest_len != 0))
		return dg_err_set(err, -EPROTO, "CDP message of type %u: %zu bytes", type, len);
	struct client *cl = client_find(fw, num);
	if (type == DG_MSG_CDP_OPEN) {
		if (cl)
			return dg_err_set(err, -EPROTO, "CDP client %u opened twice", num);
		on_open(fw, num);
	} else if (!cl) {
		fw->st.unknown_clients++; /* dropped already: its last messages cross the DROP */
	} else if (type == DG_MSG_CDP_CLOSE) {
		fw->st.closed++;
		client_free(fw, cl);
	} else {
		on_in(fw, cl, rest, rest_len);
	}
	return 0;
}

/* ---- life ---- */

struct dg_cdpfw *dg_cdpfw_new(struct dg_cdp *c, int ctl)
{
	struct dg_cdpfw *fw = calloc(1, sizeof(*fw));
	if (!fw)
		return NULL;
	fw->cdp = c;
	fw->ctl = ctl;
	return fw;
}

void dg_cdpfw_free(struct dg_cdpfw *fw)
{
	if (!fw)
		return;
	/* Tickets still in the DevTools client must not find the firewall. */
	for (struct ticket *t = fw->tickets; t; t = t->next)
		t->fw = NULL;
	for (int c = 0; c < DG_CDPFW_CLIENTS_MAX; c++) {
		struct client *cl = &fw->clients[c];
		if (cl->used) {
			for (int i = 0; i < cl->n_queued; i++)
				free(cl->queue[i].data);
			for (int i = 0; i < DG_CDPFW_PENDING_MAX; i++) {
				json_decref(cl->cmds[i].params);
				free(cl->cmds[i].key);
			}
		}
	}
	for (int i = 0; i < DG_CDPFW_CACHE_MAX; i++)
		free(fw->cache[i].key);
	free(fw);
}

int dg_cdpfw_n_clients(const struct dg_cdpfw *fw)
{
	int n = 0;
	for (int c = 0; c < DG_CDPFW_CLIENTS_MAX; c++)
		n += fw->clients[c].used;
	return n;
}

void dg_cdpfw_set_view(struct dg_cdpfw *fw, const struct dg_cdp_view *view)
{
	fw->view = *view;
}

void dg_cdpfw_stats(const struct dg_cdpfw *fw, struct dg_cdpfw_stats *s)
{
	*s = fw->st;
}

bool dg_cdpfw_frame_due(const struct dg_cdpfw *fw, uint64_t *first, uint64_t *last, bool *opened)
{
	*first = fw->sent_first;
	*last = fw->sent_first ? fw->sent_last : 0;
	*opened = fw->opened;
	return *first || *opened;
}

void dg_cdpfw_frame_taken(struct dg_cdpfw *fw)
{
	fw->sent_first = fw->sent_last = 0;
	fw->opened = false;
}
