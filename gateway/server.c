/* `deskgate serve`: the HTTP and WebSocket front of the gateway.
 *
 * Start-up, as root: load the config, the policy and the tokens, remove
 * jails a dead predecessor left, fork the spawner (which keeps root), open
 * the listening socket, then drop to the gateway's own uid with no
 * capabilities and no_new_privs. From then on this process only speaks
 * HTTP, WebSocket and the typed channels to the spawner and the workers.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <ev.h>

#include "gateway/server-priv.h"
#include "gateway/web-priv.h"

static struct gw *G;

/* ---- outgoing messages ---------------------------------------------------- */








/* ---- HTTP ----------------------------------------------------------------- */



static int reply_json(struct conn *c, int status, json_t *body)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	int r = dg_gw_write_http(c, status, "application/json", s ? s : "{}", s ? strlen(s) : 2);
	free(s);
	if (status >= 400)
		G->m.http_errors++;
	return r;
}

static int reply_error(struct conn *c, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int reply_error(struct conn *c, int status, const char *code, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return reply_json(c, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg));
}


/* Reads the bearer token of an HTTP request or WebSocket handshake (the
 * Authorization header, or a "bearer.<token>" subprotocol entry). */
static bool authenticate(struct conn *c)
{
	char hdr[DG_TOKEN_MAX + 64];
	const char *tok = NULL;
	size_t len = 0;
	c->authed = false;
	int n = lws_hdr_copy(c->wsi, hdr, sizeof(hdr), WSI_TOKEN_HTTP_AUTHORIZATION);
	if (n > 0 && dg_auth_bearer(hdr, &tok, &len) == 0) {
		c->authed = dg_auth_check(&G->auth, tok, len, &c->who) == 0;
	} else {
		n = lws_hdr_copy(c->wsi, hdr, sizeof(hdr), WSI_TOKEN_PROTOCOL);
		if (n > 0 && dg_auth_subprotocol(hdr, &tok, &len) == 0)
			c->authed = dg_auth_check(&G->auth, tok, len, &c->who) == 0;
	}
	if (!c->authed)
		G->m.auth_failures++;
	return c->authed;
}

static int method_of(struct lws *wsi)
{
	if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI))
		return 'G';
	if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI))
		return 'P';
	if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI))
		return 'D';
	return 0;
}

/* "/v1/sessions/<id>[/<tail>]": copies the id, returns the tail ("" if none)
 * or NULL when path is not of that form. */
static const char *session_path(const char *path, char *id, size_t idlen)
{
	const char *prefix = "/v1/sessions/";
	if (strncmp(path, prefix, strlen(prefix)) != 0)
		return NULL;
	const char *p = path + strlen(prefix);
	const char *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);
	if (n == 0 || n >= idlen)
		return NULL;
	memcpy(id, p, n);
	id[n] = '\0';
	return slash ? slash : "";
}

static int route(struct conn *c, const char *raw, size_t raw_len);

static int metrics_reply(struct conn *c)
{
	size_t cap = 16384 + (size_t)G->m.cdp.n_rows * 2 * (DG_CDP_METHOD_MAX + 96);
	char *b = malloc(cap);
	if (!b)
		return -1;
	size_t n = 0;
#define OUT(...) n += (size_t)snprintf(b + n, n < cap ? cap - n : 0, __VA_ARGS__)
	int live = 0;
	for (int i = 0; i < G->n_sessions; i++)
		live += G->sessions[i].used;
	OUT("# HELP deskgate_sessions Sessions that exist now.\n# TYPE deskgate_sessions gauge\n"
	    "deskgate_sessions %d\n", live);
	OUT("# HELP deskgate_sessions_created_total Sessions created.\n"
	    "# TYPE deskgate_sessions_created_total counter\ndeskgate_sessions_created_total %lu\n",
	    G->m.sessions_created);
	OUT("# TYPE deskgate_sessions_ended_total counter\ndeskgate_sessions_ended_total %lu\n",
	    G->m.sessions_ended);
	OUT("# HELP deskgate_actions_total Actions by type and outcome.\n"
	    "# TYPE deskgate_actions_total counter\n");
	static const char *const verdicts[4] = {"allow", "allow", "deny", "ask"};
	static const char *const outcomes[4] = {"ok", "failed", "refused", "refused"};
	for (int t = 0; t < DG_ACTION_N_TYPES; t++) {
		for (int k = 0; k < 4; k++) {
			if (G->m.actions[t][k])
				OUT("deskgate_actions_total{type=\"%s\",verdict=\"%s\",outcome=\"%s\"} %lu\n",
				    dg_action_type_name((enum dg_action_type)t), verdicts[k], outcomes[k],
				    G->m.actions[t][k]);
		}
	}
	static const double bounds[] = {5, 10, 20, 30, 50, 100, 200, 500, 1000, 2000, 5000};
	OUT("# HELP deskgate_action_seconds Action to answer, including the settled screenshot.\n"
	    "# TYPE deskgate_action_seconds histogram\n");
	unsigned long cum = 0;
	for (int i = 0; i < 11; i++) {
		cum += G->m.action_ms_buckets[i];
		OUT("deskgate_action_seconds_bucket{le=\"%g\"} %lu\n", bounds[i] / 1000, cum);
	}
	cum += G->m.action_ms_buckets[11];
	OUT("deskgate_action_seconds_bucket{le=\"+Inf\"} %lu\n", cum);
	OUT("deskgate_action_seconds_sum %g\ndeskgate_action_seconds_count %lu\n",
	    G->m.action_ms_sum / 1000, G->m.action_ms_count);
	OUT("# TYPE deskgate_http_requests_total counter\ndeskgate_http_requests_total %lu\n",
	    G->m.http_requests);
	OUT("# HELP deskgate_browser_requests_total The browser's requests, decided by the policy.\n"
	    "# TYPE deskgate_browser_requests_total counter\n"
	    "deskgate_browser_requests_total{verdict=\"allow\"} %lu\n"
	    "deskgate_browser_requests_total{verdict=\"deny\"} %lu\n",
	    G->m.requests[0], G->m.requests[1]);
	OUT("# HELP deskgate_recording_events_total Events written to recordings.\n"
	    "# TYPE deskgate_recording_events_total counter\ndeskgate_recording_events_total %lu\n"
	    "# HELP deskgate_recording_seconds_total Time spent writing recordings (events and frames).\n"
	    "# TYPE deskgate_recording_seconds_total counter\ndeskgate_recording_seconds_total %.6f\n",
	    G->m.rec_events, (double)G->m.rec_us / 1e6);
	OUT("# HELP deskgate_recording_uploads_total Uploads of sealed recordings to the object "
	    "store, by result (each try counts).\n# TYPE deskgate_recording_uploads_total counter\n"
	    "deskgate_recording_uploads_total{result=\"ok\"} %lu\n"
	    "deskgate_recording_uploads_total{result=\"failed\"} %lu\n"
	    "# HELP deskgate_recording_uploads_pending Recordings waiting for a confirmed upload.\n"
	    "# TYPE deskgate_recording_uploads_pending gauge\ndeskgate_recording_uploads_pending %d\n"
	    "# HELP deskgate_recording_fetches_total Recordings fetched from the object store to be "
	    "served, by result.\n# TYPE deskgate_recording_fetches_total counter\n"
	    "deskgate_recording_fetches_total{result=\"ok\"} %lu\n"
	    "deskgate_recording_fetches_total{result=\"failed\"} %lu\n",
	    G->m.uploads_ok, G->m.uploads_failed, dg_gw_bucket_pending(G), G->m.fetches_ok,
	    G->m.fetches_failed);
	OUT("# HELP deskgate_recording_retention_held Recordings the last retention pass kept "
	    "although due for deletion: not yet uploaded to the object store.\n"
	    "# TYPE deskgate_recording_retention_held gauge\ndeskgate_recording_retention_held %u\n"
	    "# HELP deskgate_recording_retention_over_budget 1 when the last retention pass left the "
	    "recordings over retention_mb (live or not yet uploaded recordings alone exceed it).\n"
	    "# TYPE deskgate_recording_retention_over_budget gauge\n"
	    "deskgate_recording_retention_over_budget %d\n",
	    G->m.retention_held, G->m.retention_over_budget ? 1 : 0);
	OUT("# HELP deskgate_egress_total Connections through the egress proxy, decided.\n"
	    "# TYPE deskgate_egress_total counter\n"
	    "deskgate_egress_total{verdict=\"allow\"} %lu\ndeskgate_egress_total{verdict=\"deny\"} %lu\n",
	    G->m.egress[0], G->m.egress[1]);
	OUT("# HELP deskgate_egress_restarts_total Egress proxies started because the one before "
	    "died.\n# TYPE deskgate_egress_restarts_total counter\ndeskgate_egress_restarts_total %lu\n"
	    "# HELP deskgate_egress_up Whether an egress proxy serves the sessions now.\n"
	    "# TYPE deskgate_egress_up gauge\ndeskgate_egress_up %d\n",
	    G->m.egress_restarts, G->egress_wsi != NULL);
	/* By method: names the worker checked ("Domain.method", [A-Za-z0-9_.]),
	 * safe as label values; past DG_GW_CDP_METHODS_MAX of them, "other". */
	const struct gw_cdp_methods *cm = &G->m.cdp;
	OUT("# HELP deskgate_cdp_commands_total CDP clients' commands, decided, by method.\n"
	    "# TYPE deskgate_cdp_commands_total counter\n");
	for (int i = 0; i < cm->n_rows; i++)
		for (int k = 0; k < 2; k++)
			if (cm->row[i].n[k])
				OUT("deskgate_cdp_commands_total{method=\"%s\",verdict=\"%s\"} %lu\n",
				    cm->row[i].name, k ? "deny" : "allow", cm->row[i].n[k]);
	for (int k = 0; k < 2; k++)
		if (cm->other[k])
			OUT("deskgate_cdp_commands_total{method=\"other\",verdict=\"%s\"} %lu\n",
			    k ? "deny" : "allow", cm->other[k]);
	OUT("# HELP deskgate_cdp_cached_total CDP commands the worker allowed under a verdict "
	    "the gateway let it keep.\n# TYPE deskgate_cdp_cached_total counter\n"
	    "deskgate_cdp_cached_total %lu\n", cm->cached);
	OUT("# TYPE deskgate_errors_total counter\n"
	    "deskgate_errors_total{kind=\"http\"} %lu\ndeskgate_errors_total{kind=\"auth\"} %lu\n"
	    "deskgate_errors_total{kind=\"protocol\"} %lu\n",
	    G->m.http_errors, G->m.auth_failures, G->m.protocol_errors);
#undef OUT
	if (n >= cap)
		n = cap - 1;
	int r = dg_gw_write_http(c, 200, "text/plain; version=0.0.4", b, n);
	free(b);
	return r;
}

static int route_http(struct conn *c)
{
	G->m.http_requests++;
	/* Take the body out of c first: answering may free c. */
	char *raw = c->body;
	size_t raw_len = c->body_len;
	c->body = NULL;
	c->body_len = 0;
	int r = route(c, raw, raw_len);
	free(raw);
	return r;
}

/* GET /v1/approvals, GET /v1/approvals/{id}/frame, POST /v1/approvals/{id}
 * with {"decision": "approve"|"deny"}: viewers and admins only, never an
 * agent (nothing inside a session can approve its own actions). */
static int route_approvals(struct conn *c, const char *path, const char *raw, size_t raw_len)
{
	if (!dg_auth_may(&c->who, DG_PERM_APPROVE, NULL))
		return reply_error(c, 403, "forbidden", "approvals need a viewer or admin token");
	if (strcmp(path, "/v1/approvals") == 0) {
		if (c->method != 'G')
			return reply_error(c, 405, "method_not_allowed", "GET");
		return reply_json(c, 200, json_pack("{s:o}", "approvals", dg_gw_approvals_json(G)));
	}
	const char *rest = path + 14;
	/* An approval id has the form of a session id (the instance first):
	 * only a pending approval's exact id matches. */
	size_t n = strspn(rest, "0123456789abcdefghijklmnopqrstuvwxyz-");
	if (n == 0 || n > DG_SESSION_ID_MAX || (rest[n] && strcmp(rest + n, "/frame") != 0))
		return reply_error(c, 404, "not_found", "no such approval");
	char id[DG_SESSION_ID_MAX + 1];
	memcpy(id, rest, n);
	id[n] = '\0';
	if (rest[n]) {
		struct gw_session *s = dg_gw_approval_find(G, id);
		if (c->method != 'G')
			return reply_error(c, 405, "method_not_allowed", "GET");
		if (!s || !s->appr.png)
			return reply_error(c, 404, "not_found", "no pending approval with a screen");
		return dg_gw_write_http(c, 200, "image/png", (const char *)s->appr.png, s->appr.png_len);
	}
	if (c->method != 'P')
		return reply_error(c, 405, "method_not_allowed", "POST");
	json_t *body = raw_len ? json_loadb(raw, raw_len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	const char *d = json_string_value(json_object_get(body, "decision"));
	bool approve = d && strcmp(d, "approve") == 0;
	if (!json_is_object(body) || json_object_size(body) != 1 || !d ||
	    (!approve && strcmp(d, "deny") != 0)) {
		json_decref(body);
		return reply_error(c, 400, "bad_request", "the body must be {\"decision\": \"approve\"} "
							 "or {\"decision\": \"deny\"}");
	}
	json_decref(body);
	char err[DG_ERR_MAX];
	int r = dg_gw_approval_answer(G, id, approve, c->who.name, err, sizeof(err));
	if (r == -ENOENT)
		return reply_error(c, 404, "not_found", "%s", err);
	if (r != 0)
		return reply_error(c, 409, "conflict", "%s", err);
	return reply_json(c, 200, json_pack("{s:s, s:s, s:s}", "id", id, "decision",
					    approve ? "approved" : "denied", "by", c->who.name));
}

/* GET /v1/recordings[/{id}[/events | /frames/{sha256}.png | /video.webm |
 * /video.mp4]]: viewers and admins. The id and the hash are checked against their exact grammar
 * before any path is built, so no request can name a file outside the
 * recordings directory. */
static int route_recordings(struct conn *c, const char *path)
{
	if (!dg_auth_may(&c->who, DG_PERM_READ_RECORDINGS, NULL))
		return reply_error(c, 403, "forbidden", "recordings need a viewer or admin token");
	if (c->method != 'G')
		return reply_error(c, 405, "method_not_allowed", "GET");
	if (strcmp(path, "/v1/recordings") == 0)
		return reply_json(c, 200, json_pack("{s:o}", "recordings", dg_gw_rec_list(G)));
	const char *rest = path + 15;
	char id[DG_REC_ID_MAX + 1];
	size_t n = strcspn(rest, "/");
	if (n == 0 || n > DG_REC_ID_MAX)
		return reply_error(c, 404, "not_found", "no such recording");
	memcpy(id, rest, n);
	id[n] = '\0';
	if (!dg_rec_id_valid(id))
		return reply_error(c, 404, "not_found", "no such recording");
	const char *tail = rest + n;
	char file[DG_CONFIG_PATH_MAX + 256];
	bool video = strncmp(tail, "/video.", 7) == 0;
	if (*tail && strcmp(tail, "/events") != 0 && strncmp(tail, "/frames/", 8) != 0 && !video)
		return reply_error(c, 404, "not_found", "no such resource");
	const char *fmt = video ? tail + 7 : NULL;
	if (video && strcmp(fmt, "webm") != 0 && strcmp(fmt, "mp4") != 0)
		return reply_error(c, 404, "not_found", "recording %s: no video format \"%.16s\": "
				   "video.webm or video.mp4", id, fmt);
	/* Not on this host: fetched from the bucket first (the request waits,
	 * the loop does not), then routed again. */
	const char *root = dg_gw_rec_root(G, id);
	if (!root) {
		int status;
		char msg[DG_ERR_MAX];
		if (dg_gw_bucket_wait(G, c, id, &status, msg, sizeof(msg)) == 0)
			return 0;
		return reply_error(c, status, status == 404 ? "not_found" : status == 502 ? "bad_gateway"
				   : "unavailable", "%s", msg);
	}
	if (video) {
		if (dg_gw_session_find(G, id))
			return reply_error(c, 409, "conflict", "recording %s: still recording: its "
					   "session is running; the video can be made once it ends", id);
		int status;
		char msg[DG_ERR_MAX];
		int r = dg_gw_video_get(G, c, root, id, fmt, file, sizeof(file), &status, msg,
					sizeof(msg));
		if (r == 0)
			return 0;
		if (r < 0)
			return reply_error(c, status, status == 503 ? "unavailable" : status == 504 ?
					   "timeout" : "internal", "%s", msg);
		char hdr[DG_REC_ID_MAX + 128];
		int hn = snprintf(hdr, sizeof(hdr), "content-disposition: attachment; "
				  "filename=\"deskgate-%s.%s\"\r\ncache-control: no-store\r\n", id, fmt);
		r = lws_serve_http_file(c->wsi, file, fmt[0] == 'w' ? "video/webm" : "video/mp4",
					hdr, hn);
		return r < 0 ? -1 : 0;
	}
	if (!*tail) {
		json_t *j = dg_gw_rec_info(G, id);
		if (!j)
			return reply_error(c, 404, "not_found", "no such recording");
		return reply_json(c, 200, j);
	}
	if (strcmp(tail, "/events") == 0) {
		snprintf(file, sizeof(file), "%s/%s/events.jsonl", root, id);
		struct stat st;
		if (lstat(file, &st) != 0 || !S_ISREG(st.st_mode))
			return reply_error(c, 404, "not_found", "no such recording");
	} else if (strncmp(tail, "/frames/", 8) == 0) {
		char hash[DG_REC_HEX_LEN + 1];
		const char *h = tail + 8;
		if (strlen(h) != DG_REC_HEX_LEN + 4 || strcmp(h + DG_REC_HEX_LEN, ".png") != 0)
			return reply_error(c, 404, "not_found", "no such frame");
		memcpy(hash, h, DG_REC_HEX_LEN);
		hash[DG_REC_HEX_LEN] = '\0';
		int fd;
		size_t size;
		struct dg_err err = {{0}};
		if (!dg_rec_hash_valid(hash) ||
		    dg_rec_frame_open(root, id, hash, &fd, &size, &err) != 0)
			return reply_error(c, 404, "not_found", "no such frame");
		close(fd);
		snprintf(file, sizeof(file), "%s/%s/frames/%s.png", root, id, hash);
	}
	static const char nostore[] = "cache-control: no-store\r\n";
	bool frame = tail[1] == 'f';
	int r = lws_serve_http_file(c->wsi, file, frame ? "image/png" : "application/x-ndjson",
				    nostore, (int)strlen(nostore));
	/* < 0: close; 0: lws streams the rest; > 0: sent, and lws completed
	 * the transaction itself. */
	return r < 0 ? -1 : 0;
}

/* The error code of a failed session creation, by its status: the
 * client's mistake, a limit, or the gateway's own failure, never mixed. */
static const char *create_error_code(int status)
{
	switch (status) {
	case 400: return "bad_request";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 429: return "too_many_sessions";
	case 503: return "unavailable";
	default:  return "internal";
	}
}

/* The session token given at s's creation, sent as the bearer (or, on a
 * WebSocket handshake, in the subprotocol): c acts as s's agent. */
static bool session_token_login(struct conn *c, const struct gw_session *s, bool subprotocol)
{
	char hdr[DG_TOKEN_MAX + 64];
	const char *tok = NULL;
	size_t len = 0;
	int n = lws_hdr_copy(c->wsi, hdr, sizeof(hdr), WSI_TOKEN_HTTP_AUTHORIZATION);
	if (n <= 0 || dg_auth_bearer(hdr, &tok, &len) != 0) {
		n = subprotocol ? lws_hdr_copy(c->wsi, hdr, sizeof(hdr), WSI_TOKEN_PROTOCOL) : 0;
		if (n <= 0 || dg_auth_subprotocol(hdr, &tok, &len) != 0)
			tok = NULL;
	}
	if (!s || !tok || !dg_gw_session_token_ok(s, tok, len))
		return false;
	memset(&c->who, 0, sizeof(c->who));
	c->who.role = DG_ROLE_AGENT;
	snprintf(c->who.name, sizeof(c->who.name), "%s", s->owner);
	c->authed = true;
	return true;
}

/* The session token also opens GET .../json/version, where a CDP client
 * asks for the session's endpoint. */
static bool session_token_auth(struct conn *c)
{
	char id[DG_SESSION_ID_MAX + 2];
	const char *tail = session_path(c->path, id, sizeof(id));
	if (!tail || (strcmp(tail, "/json/version") && strcmp(tail, "/json/version/")))
		return false;
	return session_token_login(c, dg_gw_session_find(G, id), false);
}

/* GET, POST, DELETE /v1/sessions/{id}/takeover (takeover.c): its state;
 * taking control (an operator or admin); handing it back (its holder or an
 * admin). The session reads as missing to whoever may not see it. */
static int route_takeover(struct conn *c, const char *id)
{
	struct gw_session *s = dg_gw_session_find(G, id);
	if (!s || !(dg_auth_may(&c->who, DG_PERM_WATCH, NULL) ||
		    dg_auth_may(&c->who, DG_PERM_ACT, s->owner)))
		return reply_error(c, 404, "not_found", "no such session");
	if (c->method == 'G')
		return reply_json(c, 200, json_pack("{s:s, s:o, s:b}", "session", s->id, "takeover",
						    dg_gw_takeover_json(s), "may_take_control",
						    dg_auth_may(&c->who, DG_PERM_TAKEOVER, NULL)));
	if (c->method != 'P' && c->method != 'D')
		return reply_error(c, 405, "method_not_allowed", "GET, POST or DELETE");
	if (!dg_auth_may(&c->who, DG_PERM_TAKEOVER, NULL))
		return reply_error(c, 403, "forbidden", "taking control needs an operator or admin token");
	char err[DG_ERR_MAX];
	int rc = c->method == 'P' ? dg_gw_takeover_take(s, &c->who, err, sizeof(err))
				  : dg_gw_takeover_release(s, &c->who, err, sizeof(err));
	if (rc == -EBUSY || rc == -EAGAIN)
		return reply_error(c, 409, "conflict", "%s", err);
	if (rc == -ENOENT)
		return reply_error(c, 404, "not_found", "%s", err);
	if (rc == -EPERM)
		return reply_error(c, 403, "forbidden", "%s", err);
	if (rc != 0)
		return reply_error(c, 500, "internal", "%s", err);
	char ws[300], url[512];
	dg_config_base_url(&G->cfg, true, ws, sizeof(ws));
	snprintf(url, sizeof(url), "%s/v1/sessions/%s/operate", ws, s->id);
	json_t *j = json_pack("{s:s, s:o}", "session", s->id, "takeover", dg_gw_takeover_json(s));
	if (c->method == 'P')
		json_object_set_new(j, "operate_url", json_string(url));
	return reply_json(c, 200, j);
}

static int route(struct conn *c, const char *raw, size_t raw_len)
{
	const char *path = c->path;
	/* The web pages are public and hold no data (web-priv.h). */
	const struct dg_web_file *page = c->method == 'G' ? dg_web_find(path) : NULL;
	if (page)
		return dg_web_reply(c, page);
	if (strcmp(path, "/v1/health") == 0 && c->method == 'G')
		return reply_json(c, 200, dg_gw_health_json(G));
	if (strcmp(path, "/healthz") == 0 && c->method == 'G') {
		int live = 0;
		for (int i = 0; i < G->n_sessions; i++)
			live += G->sessions[i].used;
		return reply_json(c, 200, json_pack("{s:s, s:i}", "status", "ok", "sessions", live));
	}
	/* A POST's token was read with its headers (before its body). */
	if (!(c->method == 'P' ? c->authed : authenticate(c)) && !session_token_auth(c))
		return reply_error(c, 401, "unauthorized", "a valid bearer token is required");
	if (strcmp(path, "/mcp") == 0)
		return dg_gw_mcp_http(G, c, raw, raw_len);
	if (strcmp(path, "/metrics") == 0 && c->method == 'G') {
		if (!dg_auth_may(&c->who, DG_PERM_WATCH, NULL))
			return reply_error(c, 403, "forbidden", "metrics need a viewer or admin token");
		return metrics_reply(c);
	}
	if (strcmp(path, "/v1/sessions") == 0) {
		if (c->method == 'G') {
			json_t *list = json_array();
			for (int i = 0; i < G->n_sessions; i++) {
				struct gw_session *s = &G->sessions[i];
				if (s->used && (dg_auth_may(&c->who, DG_PERM_WATCH, NULL) ||
						dg_auth_may(&c->who, DG_PERM_ACT, s->owner)))
					json_array_append_new(list, dg_gw_session_json(s, false));
			}
			return reply_json(c, 200, json_pack("{s:o}", "sessions", list));
		}
		if (c->method == 'P') {
			if (!dg_auth_may(&c->who, DG_PERM_CREATE_SESSION, NULL))
				return reply_error(c, 403, "forbidden", "creating sessions needs an agent or admin token");
			if (c->body_too_big)
				return reply_error(c, 413, "too_large", "the body is over %d bytes", DG_HTTP_BODY_MAX);
			json_error_t jerr;
			json_t *body = raw_len ? json_loadb(raw, raw_len, JSON_REJECT_DUPLICATES, &jerr)
					       : json_object();
			if (!body)
				return reply_error(c, 400, "bad_json", "invalid JSON at line %d: %s", jerr.line, jerr.text);
			char err[DG_ERR_MAX];
			int status = 400;
			int r = dg_gw_session_create(G, c, body, NULL, NULL, err, sizeof(err), &status);
			json_decref(body);
			if (r != 0)
				return reply_error(c, status, create_error_code(status), "%s", err);
			c->waiting = true; /* answered when the desktop is ready */
			return 0;
		}
		return reply_error(c, 405, "method_not_allowed", "GET or POST");
	}
	if (strcmp(path, "/v1/approvals") == 0 || strncmp(path, "/v1/approvals/", 14) == 0)
		return route_approvals(c, path, raw, raw_len);
	if (strcmp(path, "/v1/recordings") == 0 || strncmp(path, "/v1/recordings/", 15) == 0)
		return route_recordings(c, path);
	if (strcmp(path, "/v1/blast") == 0)
		return dg_gw_blast_http(G, c, raw, raw_len);
	if (strcmp(path, "/v1/policies") == 0) {
		if (!dg_auth_may(&c->who, DG_PERM_WATCH, NULL))
			return reply_error(c, 403, "forbidden", "policies need a viewer or admin token");
		if (c->method != 'G')
			return reply_error(c, 405, "method_not_allowed", "GET");
		return reply_json(c, 200, json_pack("{s:o}", "policies", dg_gw_policies_json(G)));
	}
	char id[DG_SESSION_ID_MAX + 2];
	const char *tail = session_path(path, id, sizeof(id));
	if (tail && (strcmp(tail, "/json/version") == 0 || strcmp(tail, "/json/version/") == 0)) {
		/* What CDP clients ask first (Playwright's connectOverCDP with the
		 * trailing slash): where the session's CDP endpoint is. */
		struct gw_session *s = dg_gw_session_find(G, id);
		if (!s || !dg_auth_may(&c->who, DG_PERM_ACT, s->owner))
			return reply_error(c, 404, "not_found", "no such session");
		if (c->method != 'G')
			return reply_error(c, 405, "method_not_allowed", "GET");
		if (s->profile != DG_PROFILE_BROWSER)
			return reply_error(c, 404, "not_found", "an xterm session has no browser");
		return reply_json(c, 200, dg_gw_cdp_version(s));
	}
	if (tail && strcmp(tail, "/takeover") == 0)
		return route_takeover(c, id);
	if (tail && *tail == '\0') {
		struct gw_session *s = dg_gw_session_find(G, id);
		if (!s || !(dg_auth_may(&c->who, DG_PERM_WATCH, NULL) ||
			    dg_auth_may(&c->who, DG_PERM_ACT, s->owner)))
			return reply_error(c, 404, "not_found", "no such session");
		if (c->method == 'G')
			return reply_json(c, 200, dg_gw_session_json(s, false));
		if (c->method == 'D') {
			if (!dg_auth_may(&c->who, DG_PERM_ACT, s->owner))
				return reply_error(c, 403, "forbidden", "only its agent or an admin may end a session");
			dg_gw_session_end(s, "deleted");
			return reply_json(c, 200, json_pack("{s:s, s:s}", "id", id, "status", "ended"));
		}
		return reply_error(c, 405, "method_not_allowed", "GET or DELETE");
	}
	return reply_error(c, 404, "not_found", "no such resource");
}

/* ---- WebSocket ------------------------------------------------------------ */

/* Whether the Sec-WebSocket-Protocol value lists name as an entry. */
static bool subprotocol_listed(const char *value, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = value; *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		size_t len = strcspn(p, ", \t");
		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p += len;
	}
	return false;
}

/* Which session a handshake is for, and whether its token may: the agent
 * channel needs the session's agent (or admin), the watch channel a viewer. */
static int ws_bind(struct conn *c, char *why, size_t whylen, int *status)
{
	char path[DG_HTTP_PATH_MAX], id[DG_SESSION_ID_MAX + 2];
	*status = 404;
	if (lws_hdr_copy(c->wsi, path, sizeof(path), WSI_TOKEN_GET_URI) <= 0) {
		snprintf(why, whylen, "no path");
		return -1;
	}
	const char *tail = session_path(path, id, sizeof(id));
	if (!tail || (strcmp(tail, "/ws") != 0 && strcmp(tail, "/watch") != 0 &&
		      strcmp(tail, "/cdp") != 0 && strcmp(tail, "/vnc") != 0 &&
		      strcmp(tail, "/operate") != 0)) {
		snprintf(why, whylen, "no such endpoint");
		return -1;
	}
	struct gw_session *s = dg_gw_session_find(G, id);
	/* The session token given at creation also opens its channels. */
	if (!authenticate(c) && !session_token_login(c, s, true)) {
		*status = 401;
		snprintf(why, whylen, "a valid bearer token is required");
		return -1;
	}
	bool agent = strcmp(tail, "/ws") == 0, vnc = strcmp(tail, "/vnc") == 0;
	if (s && s->blast && strcmp(tail, "/watch") != 0 && !vnc) {
		/* Its jail runs the blast attempts, and nothing else. */
		*status = 409;
		snprintf(why, whylen, "the session runs a blast attempt: it takes no agent");
		return -1;
	}
	/* The live view speaks RFB, the other channels JSON: a client names
	 * the one it expects, when it names any. */
	char offered[DG_TOKEN_MAX + 64];
	if (lws_hdr_copy(c->wsi, offered, sizeof(offered), WSI_TOKEN_PROTOCOL) > 0 &&
	    subprotocol_listed(offered, DG_WS_RFB_PROTOCOL) != vnc) {
		*status = 400;
		snprintf(why, whylen, "this endpoint's subprotocol is %s",
			 vnc ? DG_WS_RFB_PROTOCOL : DG_WS_PROTOCOL);
		return -1;
	}
	if (strcmp(tail, "/operate") == 0) {
		/* The operator holding control; nobody else. */
		if (!s || !(dg_auth_may(&c->who, DG_PERM_WATCH, NULL) ||
			    dg_auth_may(&c->who, DG_PERM_ACT, s->owner))) {
			snprintf(why, whylen, "no such session");
			return -1;
		}
		if (!dg_auth_may(&c->who, DG_PERM_TAKEOVER, NULL)) {
			*status = 403;
			snprintf(why, whylen, "taking control needs an operator or admin token");
			return -1;
		}
		int rc = dg_gw_takeover_may_attach(s, c, why, whylen);
		if (rc) {
			*status = 409;
			return -1;
		}
		c->kind = CONN_OPERATOR;
		c->s = s;
		return 0;
	}
	if (strcmp(tail, "/cdp") == 0) {
		/* A CDP client acts on the browser: its agent or an admin, never
		 * an observer; several at once, within the limit. */
		if (!s || !dg_auth_may(&c->who, DG_PERM_ACT, s->owner)) {
			snprintf(why, whylen, "no such session");
			return -1;
		}
		if (s->profile != DG_PROFILE_BROWSER || s->state != S_READY) {
			*status = 409;
			snprintf(why, whylen, "the session has no browser ready");
			return -1;
		}
		if (s->n_cdp >= DG_GW_CDP_CLIENTS_MAX) {
			*status = 429;
			snprintf(why, whylen, "the session has %d CDP clients already", s->n_cdp);
			return -1;
		}
		c->kind = CONN_CDP;
		c->s = s;
		return 0;
	}
	if (!s || (agent && !dg_auth_may(&c->who, DG_PERM_ACT, s->owner)) ||
	    (!agent && !dg_auth_may(&c->who, DG_PERM_WATCH, NULL) &&
	     !dg_auth_may(&c->who, DG_PERM_ACT, s->owner))) {
		/* Another agent's session reads as no session at all. */
		snprintf(why, whylen, "no such session");
		return -1;
	}
	if (vnc && (s->state != S_READY || s->view_fd < 0)) {
		*status = 409;
		snprintf(why, whylen, "the session's desktop is not ready");
		return -1;
	}
	if (vnc && s->n_vnc >= DG_VIEWERS_MAX) {
		*status = 429;
		snprintf(why, whylen, "the session has %d live viewers already", s->n_vnc);
		return -1;
	}
	if (vnc) {
		c->kind = CONN_VNC;
		c->s = s;
		return 0;
	}
	if (agent && s->agent) {
		*status = 409;
		snprintf(why, whylen, "the session already has an agent connected");
		return -1;
	}
	if (!agent && (uint32_t)s->n_observers >= G->cfg.limits.max_observers) {
		*status = 429;
		snprintf(why, whylen, "the session has %d observers already", s->n_observers);
		return -1;
	}
	c->kind = agent ? CONN_AGENT : CONN_WATCH;
	c->s = s;
	return 0;
}

static void ws_receive(struct conn *c, void *in, size_t len, bool first, bool final, bool binary)
{
	if (c->kind == CONN_WATCH)
		return; /* observers are read-only: anything they send is dropped */
	if (c->kind == CONN_VNC) {
		/* RFB bytes, whatever the framing: the worker's server reads them. */
		if (c->s)
			dg_gw_vnc_from_viewer(c, in, len);
		return;
	}
	if (first) {
		free(c->rx);
		c->rx = NULL;
		c->rx_len = 0;
		c->rx_too_big = false;
	}
	size_t max = G->cfg.limits.max_message_bytes;
	if (c->kind == CONN_CDP && max > DG_CDP_CLIENT_MSG_MAX)
		max = DG_CDP_CLIENT_MSG_MAX;
	if (c->kind == CONN_OPERATOR && max > DG_GW_OPERATOR_MSG_MAX)
		max = DG_GW_OPERATOR_MSG_MAX;
	if (!c->rx_too_big) {
		if (c->rx_len + len > max) {
			c->rx_too_big = true;
			free(c->rx);
			c->rx = NULL;
		} else {
			char *nb = realloc(c->rx, c->rx_len + len + 1);
			if (nb) {
				memcpy(nb + c->rx_len, in, len);
				c->rx = nb;
				c->rx_len += len;
				c->rx[c->rx_len] = '\0';
			}
		}
	}
	/* A CDP client's message past the bound closes it now, not once the
	 * rest of it has come. */
	if (!final && !(c->kind == CONN_CDP && c->rx_too_big))
		return;
	if (c->kind == CONN_CDP) {
		/* A CDP client's message goes to the worker as it came; the
		 * worker reads it. Too large or binary: this client is closed. */
		if ((c->rx_too_big || binary) && !c->closing) {
			G->m.protocol_errors++;
			c->closing = true;
			snprintf(c->close_why, sizeof(c->close_why), "%s",
				 c->rx_too_big ? "message too large" : "text only");
			lws_close_reason(c->wsi, c->rx_too_big ? LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE
							       : LWS_CLOSE_STATUS_UNACCEPTABLE_OPCODE,
					 (unsigned char *)(c->rx_too_big ? "message too large" : "text only"),
					 c->rx_too_big ? 17 : 9);
			lws_callback_on_writable(c->wsi);
		} else if (c->s && !c->closing) {
			dg_gw_cdp_from_client(c->s, c, c->rx ? c->rx : "", c->rx_len);
		}
		free(c->rx);
		c->rx = NULL;
		c->rx_len = 0;
		return;
	}
	if (c->rx_too_big) {
		G->m.protocol_errors++;
		dg_gw_error_json(c, "too_large", "a message is at most %zu bytes", max);
	} else if (binary) {
		G->m.protocol_errors++;
		dg_gw_error_json(c, "binary", "actions are JSON text messages, not binary");
	} else if (c->s && c->kind == CONN_OPERATOR) {
		dg_gw_operator_message(c->s, c, c->rx ? c->rx : "", c->rx_len);
	} else if (c->s) {
		dg_gw_session_agent_message(c->s, c, c->rx ? c->rx : "", c->rx_len);
	}
	free(c->rx);
	c->rx = NULL;
	c->rx_len = 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		    size_t len)
{
	struct conn *c = user;
	switch (reason) {
	case LWS_CALLBACK_HTTP: {
		memset(c, 0, sizeof(*c));
		c->kind = CONN_HTTP;
		c->wsi = wsi;
		c->method = method_of(wsi);
		snprintf(c->path, sizeof(c->path), "%.*s", (int)(len < DG_HTTP_PATH_MAX ? len : 0),
			 (const char *)in);
		if (len >= DG_HTTP_PATH_MAX)
			return reply_error(c, 414, "uri_too_long", "the path is too long");
		if (c->method == 'P') {
			/* The body follows; one without a valid token is not kept
			 * (401 once it is read). */
			c->body_ignored = !authenticate(c);
			return 0;
		}
		return route_http(c);
	}
	case LWS_CALLBACK_HTTP_BODY: {
		/* /mcp's messages are the agent's, bounded as its WebSocket's. */
		size_t max = strcmp(c->path, "/mcp") == 0 ? G->cfg.limits.max_message_bytes
							  : DG_HTTP_BODY_MAX;
		/* An empty body (a bodiless POST: taking control) comes as in
		 * NULL, len 0: nothing to keep. */
		if (c->body_ignored || len == 0)
			return 0;
		if (c->body_len + len > max) {
			c->body_too_big = true;
			return 0;
		}
		if (!c->body_too_big) {
			char *nb = realloc(c->body, c->body_len + len + 1);
			if (!nb)
				return -1;
			memcpy(nb + c->body_len, in, len);
			c->body = nb;
			c->body_len += len;
		}
		return 0;
	}
	case LWS_CALLBACK_HTTP_BODY_COMPLETION:
		return route_http(c);
	case LWS_CALLBACK_HTTP_WRITEABLE:
		if (c->mcp_call)
			return dg_gw_mcp_writable(c);
		if (c->export_wait)
			return 0;
		if (c->export_done && !c->reply) {
			/* Its export ended: the wait's timeout no longer applies. */
			lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
			c->fetch_done = false;
			return route_recordings(c, c->path);
		}
		if (c->fetch_done && !c->reply) {
			/* Its fetch ended: the wait's timeout no longer applies. */
			lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
			return route_recordings(c, c->path);
		}
		if (c->reply) {
			/* Completing the transaction may free c (lws reuses the
			 * connection for the next request): take what is needed first. */
			char *reply = c->reply;
			c->reply = NULL;
			int r = dg_gw_write_http_wsi(wsi, c->reply_status, "application/json", reply, c->reply_len);
			free(reply);
			return r;
		}
		return 0;
	case LWS_CALLBACK_CLOSED_HTTP:
		if (c && c->kind == CONN_HTTP) {
			dg_gw_mcp_http_closed(c);
			dg_gw_bucket_conn_closed(G, c);
			dg_gw_video_conn_closed(G, c);
			dg_gw_blast_http_closed(c);
			for (int i = 0; i < G->n_sessions; i++) {
				if (G->sessions[i].creator == c)
					G->sessions[i].creator = NULL;
			}
			free(c->body);
			free(c->reply);
			c->body = c->reply = NULL;
			c->wsi = NULL;
		}
		return 0;
	case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE: {
		struct conn tmp;
		memset(&tmp, 0, sizeof(tmp));
		tmp.wsi = wsi;
		/* Set before anything can fail: an upgrade to something other
		 * than a WebSocket (h2c) skips ws_bind, and an uninitialised
		 * reason would have put stack bytes in the answer (found by
		 * building the fuzzers with clang). */
		char why[128] = "only WebSocket upgrades are served";
		int status = 400;
		if (!in || strcmp((const char *)in, "websocket") != 0 ||
		    ws_bind(&tmp, why, sizeof(why), &status) != 0) {
			char body[256];
			snprintf(body, sizeof(body),
				 "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}",
				 status == 401 ? "unauthorized" : status == 409 ? "conflict" :
				 status == 403 ? "forbidden" :
				 status == 429 ? "too_many" : status == 400 ? "bad_request" : "not_found", why);
			dg_gw_write_http_wsi(wsi, status, "application/json", body, strlen(body));
			return 1;
		}
		return 0;
	}
	case LWS_CALLBACK_ESTABLISHED: {
		memset(c, 0, sizeof(*c));
		c->wsi = wsi;
		char why[128];
		int status;
		if (ws_bind(c, why, sizeof(why), &status) != 0)
			return -1; /* the session went away since the handshake was checked */
		if (c->kind == CONN_AGENT)
			dg_gw_session_agent_attach(c->s, c);
		else if (c->kind == CONN_CDP)
			dg_gw_cdp_attach(c->s, c);
		else if (c->kind == CONN_VNC)
			dg_gw_vnc_attach(c->s, c);
		else if (c->kind == CONN_OPERATOR) {
			dg_gw_takeover_attach(c->s, c);
			dg_gw_ws_send_json(c, dg_gw_session_hello(c->s));
		} else
			dg_gw_session_observer_attach(c->s, c);
		return 0;
	}
	case LWS_CALLBACK_RECEIVE:
		ws_receive(c, in, len, lws_is_first_fragment(wsi), lws_is_final_fragment(wsi),
			   lws_frame_is_binary(wsi));
		return 0;
	case LWS_CALLBACK_SERVER_WRITEABLE: {
		int r = dg_gw_ws_writable(c);
		/* A reply is out: the session's cached commands are recorded now,
		 * off its round trip (cdp-link.c). */
		if (c->kind == CONN_CDP && c->s && c->s->n_notes && !c->head)
			dg_gw_cdp_notes_run(c->s);
		return r;
	}
	case LWS_CALLBACK_CLOSED:
		if (c->s && c->kind == CONN_AGENT)
			dg_gw_session_agent_detach(c->s, c);
		else if (c->s && c->kind == CONN_CDP)
			dg_gw_cdp_detach(c->s, c);
		else if (c->s && c->kind == CONN_OPERATOR)
			dg_gw_takeover_detach(c->s, c);
		else if (c->s && c->kind == CONN_WATCH)
			dg_gw_session_observer_detach(c->s, c);
		else if (c->s && c->kind == CONN_VNC)
			dg_gw_vnc_detach(c->s, c);
		dg_gw_conn_free_queue(c);
		c->wsi = NULL;
		c->s = NULL;
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

/* Adopted descriptors: the spawner's channel, workers' channels and exec
 * result channels. Their opaque pointer says which. */


/* The egress proxy's events: decisions and closed connections, each for a
 * session's observers and recording. Returns -1 when the channel must
 * close (the proxy is gone or broke the protocol): the close hands over to
 * dg_gw_egress_lost, which restarts it. */
static int egress_readable(void)
{
	for (;;) {
		json_t *ev = NULL;
		struct dg_err err = {{0}};
		int r = dg_egress_recv(&G->egress, &ev, &err);
		if (r == 0)
			return 0;
		if (r < 0) {
			snprintf(G->egress_why, sizeof(G->egress_why), "%s", err.msg);
			return -1;
		}
		dg_gw_egress_event(G, ev);
		json_decref(ev);
	}
}

static void spawner_readable(void)
{
	for (;;) {
		struct dg_spawn_msg msg;
		int fds[DG_SEQ_FDS_MAX], nfds = 0;
		struct dg_err err = {{0}};
		int r = dg_spawner_recv(&G->spawner, &msg, fds, &nfds, &err);
		if (r == 0)
			return;
		if (r < 0) {
			lwsl_err("deskgate: the spawner is gone (%s); stopping\n", err.msg);
			G->spawner_lost = true;
			G->stopping = true;
			lws_cancel_service(G->ctx);
			return;
		}
		if (!dg_gw_egress_spawner_message(G, &msg, fds, nfds))
			dg_gw_spawner_message(G, &msg, fds, nfds);
	}
}

static int raw_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
			size_t len)
{
	struct raw_tag *t = lws_get_opaque_user_data(wsi);
	switch (reason) {
	case LWS_CALLBACK_RAW_RX_FILE:
		if (!t)
			return -1;
		if (t->kind == RAW_SPAWNER) {
			spawner_readable();
			return 0;
		}
		if (t->kind == RAW_EGRESS)
			return egress_readable();
		if (t->kind == RAW_WORKER)
			return dg_gw_worker_readable(t->s) < 0 ? -1 : 0;
		if (t->kind == RAW_EXEC)
			return dg_gw_exec_readable(t->s) < 0 ? -1 : 0;
		if (t->kind == RAW_AGENT_CHECK) {
			int rc = dg_gw_agent_readable(G, lws_get_socket_fd(wsi));
			if (rc < 0)
				lwsl_err("deskgate: agent-check: accept: %s\n", strerror(-rc));
			return 0;
		}
		if (t->kind == RAW_VNC)
			return dg_gw_vnc_readable(t);
		return -1;
	case LWS_CALLBACK_RAW_WRITEABLE_FILE:
		if (t && t->kind == RAW_VNC)
			return dg_gw_vnc_writable(t);
		return 0;
	case LWS_CALLBACK_RAW_CLOSE_FILE:
		if (!t)
			return 0;
		if (t->kind == RAW_SPAWNER || t->kind == RAW_EGRESS) {
			if (t->kind == RAW_SPAWNER) {
				G->spawner_wsi = NULL;
				if (!G->stopping)
					G->spawner_lost = true;
				G->stopping = true;
			} else if (wsi == G->egress_wsi) {
				G->egress_wsi = NULL;
				G->egress.fd = -1; /* lws closed it */
				dg_gw_egress_lost(G, G->egress_why[0] ? G->egress_why : "its channel closed");
			}
		} else if (t->kind == RAW_WORKER) {
			dg_gw_worker_closed(t->s);
		} else if (t->kind == RAW_EXEC) {
			dg_gw_exec_closed(t->s);
		} else if (t->kind == RAW_VNC) {
			dg_gw_vnc_raw_closed(t);
		}
		if (t->kind == RAW_AGENT_CHECK) {
			G->agent_wsi = NULL;
			G->agent_fd = -1; /* lws closed it */
		}
		if (t->kind != RAW_SPAWNER && t->kind != RAW_EGRESS && t->kind != RAW_AGENT_CHECK)
			free(t);
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}



static struct lws_protocols protocols[] = {
	{DG_WS_PROTOCOL, callback, sizeof(struct conn), 65536, 0, NULL, 0},
	{DG_WS_RFB_PROTOCOL, callback, sizeof(struct conn), 65536, 0, NULL, 0},
	{"dg-raw", raw_callback, 0, 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- start-up ------------------------------------------------------------- */

/* Becomes the instance's gateway uid with no capabilities (bounding set
 * included) and no_new_privs. Verifies the result rather than trusting it. */
static int drop_privileges(struct dg_err *err)
{
	uid_t id = dg_instance_gateway_uid();
	for (int cap = 0; cap <= 63; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
			return dg_err_set(err, -errno, "gateway: dropping capability %d: %s", cap,
					  strerror(errno));
	}
	if (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 || setresuid(id, id, id) != 0)
		return dg_err_set(err, -errno, "gateway: becoming uid %u: %s", id, strerror(errno));
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return dg_err_set(err, -errno, "gateway: no_new_privs: %s", strerror(errno));
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	if (syscall(SYS_capget, &h, d) != 0 || d[0].effective || d[0].permitted || d[1].effective ||
	    d[1].permitted)
		return dg_err_set(err, -EPERM, "gateway: capabilities remain after dropping them");
	return 0;
}

/* Gives what dirfd holds (to DG_GW_LEGACY_DEPTH levels) that the one uid
 * every gateway shared before instances had their own
 * (DG_INSTANCE_LEGACY_GATEWAY_UID) owns to this instance's gateway uid, so a
 * gateway upgraded in place still reads its recordings. As root, on the
 * gateway's own directories, so nothing is followed: no symlink (fchownat
 * AT_SYMLINK_NOFOLLOW, openat O_NOFOLLOW), and only entries the legacy uid
 * owns change hands (a hard link to another's file cannot be made by that
 * uid under protected_hardlinks). Takes dirfd. Returns how many changed. */
static long give_legacy(int dirfd, int depth)
{
	long n = 0;
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return 0;
	}
	uid_t to = dg_instance_gateway_uid();
	for (struct dirent *e; (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    st.st_uid != DG_INSTANCE_LEGACY_GATEWAY_UID)
			continue;
		if (fchownat(dirfd, e->d_name, to, to, AT_SYMLINK_NOFOLLOW) == 0)
			n++;
		if (S_ISDIR(st.st_mode) && depth > 1) {
			int sub = openat(dirfd, e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				n += give_legacy(sub, depth - 1);
		}
	}
	closedir(d);
	return n;
}

/* Creates dir (mode 0750) owned by the gateway's uid, so it can write there
 * once it has dropped root; a dir the legacy gateway uid owned has its
 * content given to this instance's (give_legacy). */
static int own_dir(const char *dir, struct dg_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	}
	if (mkdir(path, 0750) != 0 && errno != EEXIST)
		return dg_err_set(err, -errno, "gateway: mkdir %s: %s", path, strerror(errno));
	struct stat st;
	bool legacy = lstat(path, &st) == 0 && S_ISDIR(st.st_mode) &&
		      st.st_uid == DG_INSTANCE_LEGACY_GATEWAY_UID;
	if (chown(path, dg_instance_gateway_uid(), dg_instance_gateway_uid()) != 0)
		return dg_err_set(err, -errno, "gateway: chown %s: %s", path, strerror(errno));
	if (legacy) {
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		long n = fd >= 0 ? give_legacy(fd, DG_GW_LEGACY_DEPTH) : 0;
		fprintf(stderr, "deskgate serve: %s: %ld entries of the former gateway uid %u given "
				"to instance %s's uid %u\n", path, n, DG_INSTANCE_LEGACY_GATEWAY_UID,
			dg_instance(), dg_instance_gateway_uid());
	}
	return 0;
}

/* What the gateway needs of a path once it runs as its uid: a
 * directory to list, one to write in, or a file to read (the named
 * policies, read at each session's creation). */
enum dir_need { DIR_READ, DIR_WRITE, FILE_READ };

/* In a child that has become the gateway uid: 0 when dir can be listed (and
 * with DIR_WRITE, a file created in it and removed), else the errno. */
static int probe_dir_as_gateway(const char *dir, enum dir_need need)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		gid_t id = dg_instance_gateway_uid();
		if (setgroups(0, NULL) != 0 || setresgid(id, id, id) != 0 ||
		    setresuid(id, id, id) != 0)
			_exit(EPERM);
		int fd = open(dir, O_RDONLY | O_CLOEXEC | (need == FILE_READ ? 0 : O_DIRECTORY));
		if (fd < 0)
			_exit(errno);
		if (need == DIR_WRITE) {
			char probe[PATH_MAX];
			if (snprintf(probe, sizeof(probe), "%s/.deskgate-probe-XXXXXX", dir) >=
			    (int)sizeof(probe))
				_exit(ENAMETOOLONG);
			int t = mkstemp(probe);
			if (t < 0)
				_exit(errno);
			unlink(probe);
		}
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : EIO;
}

/* Refuses to start, naming the path and the uid, when the dropped gateway
 * would not be able to use dir: better than a 500 on the first session. */
static int check_dir_for_gateway(const char *what, const char *dir, enum dir_need need,
				 struct dg_err *err)
{
	int e = probe_dir_as_gateway(dir, need);
	if (e == 0)
		return 0;
	return dg_err_set(err, -e,
			  "%s %s: the gateway, which drops to uid %u, cannot %s it: %s (every "
			  "directory above it must be searchable by that uid)",
			  what, dir, dg_instance_gateway_uid(), need == DIR_WRITE ? "write in" : "read", strerror(e));
}

/* The named policies are read again at each session's creation, by the
 * dropped gateway: each must load now, and be readable by that uid. */
static int check_named_policies(const struct dg_config *cfg, struct dg_err *err)
{
	for (size_t i = 0; i < cfg->n_policies; i++) {
		const struct dg_config_policy *cp = &cfg->policies[i];
		struct dg_policy p;
		char *text = NULL, what[96];
		size_t len = 0;
		int r = dg_gw_policy_load(cp->path, &p, &text, &len, err);
		if (r)
			return r;
		dg_policy_free(&p);
		free(text);
		snprintf(what, sizeof(what), "policies.%s", cp->name);
		if ((r = check_dir_for_gateway(what, cp->path, FILE_READ, err)))
			return r;
	}
	return 0;
}

static volatile sig_atomic_t interrupted;

/* The gateway's event loop is libev's on epoll, with lws's descriptors and
 * timers in it (lws's evlib_ev plugin, the loop ours). lws's own loop
 * poll()s every descriptor on each pass: with 100 sessions (300-odd
 * descriptors) sock_poll and fdget were a quarter of the gateway's CPU and
 * its cost per action grew with the sessions (docs/benchmarks.md, "100
 * sessions"). A signal wakes the loop through lws_cancel_service. */
static void on_loop_deadline(struct ev_loop *loop, ev_timer *t, int revents)
{
	(void)t;
	(void)revents;
	ev_break(loop, EVBREAK_ONE);
}

/* Runs the loop for ms milliseconds (stopping: the last writes). */
static void run_loop_for(struct ev_loop *loop, int ms)
{
	ev_timer t;
	ev_timer_init(&t, on_loop_deadline, ms / 1000.0, 0);
	ev_timer_start(loop, &t);
	ev_run(loop, 0);
	ev_timer_stop(loop, &t);
}

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
	if (G && G->ctx)
		lws_cancel_service(G->ctx);
}

/* Whether the configuration or the environment names tokens: then
 * STATE_DIR/tokens.json is not read (dg_auth_init), and --new-tokens could
 * not generate anything. */
static bool tokens_given(const struct dg_config *cfg)
{
	return cfg->n_tokens || getenv(DG_ENV_AGENT_TOKEN) || getenv(DG_ENV_VIEWER_TOKEN) ||
	       getenv(DG_ENV_ADMIN_TOKEN);
}

/* --new-tokens: removes STATE_DIR/tokens.json so that dg_auth_init
 * generates (and the start prints) a new set; the old hashes are gone with
 * the file. */
static int forget_generated_tokens(const struct dg_config *cfg, struct dg_err *err)
{
	char path[DG_CONFIG_PATH_MAX + sizeof(DG_TOKENS_FILE) + 1];
	snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, DG_TOKENS_FILE);
	if (unlink(path) != 0 && errno != ENOENT)
		return dg_err_set(err, -errno, "--new-tokens: removing %s: %s", path, strerror(errno));
	return 0;
}

int dg_gateway_serve(const struct dg_serve_opts *o, const struct dg_serve_root *root,
		     struct dg_err *usage)
{
	static struct gw gw;
	G = &gw;
	struct dg_err err = {{0}};
	const char *config = o->config, *listen = o->listen, *policy = o->policy,
		   *recordings = o->recordings, *state_dir = o->state_dir;
	const char *const *resolve = o->resolve;
	int n_resolve = o->n_resolve;
	gw.verbose = o->verbose;
	if (config ? dg_config_load(config, &gw.cfg, &err) : (dg_config_default(&gw.cfg), 0)) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	if ((listen && dg_config_set_listen(&gw.cfg, listen, &err)) ||
	    (policy && dg_config_set_policy(&gw.cfg, policy, &err)) ||
	    (recordings && dg_config_set_recordings(&gw.cfg, recordings, &err)) ||
	    (state_dir && dg_config_set_state_dir(&gw.cfg, state_dir, &err))) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	if (gw.cfg.instance[0] && dg_instance_set(gw.cfg.instance, &err)) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	if (o->new_tokens && tokens_given(&gw.cfg))
		return dg_err_set(usage, -EINVAL, "--new-tokens: the tokens come from the "
				  "configuration or the DESKGATE_*_TOKEN variables, so %s/%s "
				  "is not used", gw.cfg.state_dir, DG_TOKENS_FILE);
	const char *policy_path = dg_config_policy_path(&gw.cfg, NULL);
	if (dg_gw_policy_load(policy_path, &gw.policy, &gw.policy_text, &gw.policy_len, &err)) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "deskgate serve: must start as root: its spawner creates namespaces, "
				"cgroups and uid maps; the network-facing gateway then drops to uid %u\n",
			dg_instance_gateway_uid());
		return DG_EXIT_FAILED;
	}
	/* Before anything is made for the uid: a second instance whose name
	 * hashes to a running one's uids would read its recordings. */
	if (root->instance_ids_claim(&err) != 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_FAILED;
	}
	extern char **environ;
	struct dg_auth_generated gen;
	memset(&gen, 0, sizeof(gen));
	if (own_dir(gw.cfg.state_dir, &err) || own_dir(gw.cfg.recordings, &err) ||
	    check_dir_for_gateway("state_dir", gw.cfg.state_dir, DIR_READ, &err) ||
	    check_dir_for_gateway("recordings", gw.cfg.recordings, DIR_WRITE, &err) ||
	    check_named_policies(&gw.cfg, &err) ||
	    (o->new_tokens && forget_generated_tokens(&gw.cfg, &err)) ||
	    dg_auth_init(&gw.auth, &gw.cfg, (const char *const *)environ, &gen, &err)) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_FAILED;
	}
	/* Tokens from the environment are hashed now; nothing started later
	 * should inherit them. */
	unsetenv(DG_ENV_AGENT_TOKEN);
	unsetenv(DG_ENV_VIEWER_TOKEN);
	unsetenv(DG_ENV_ADMIN_TOKEN);
	unsetenv(DG_ENV_OPERATOR_TOKEN);
	if (root->cleanup_stale(&err) < 0)
		fprintf(stderr, "deskgate serve: cleaning up stale jails: %s\n", err.msg);
	/* The signing key is read (or made) while still root: the key file is
	 * root's, mode 0600; the gateway keeps it in memory only. Recordings a
	 * dead gateway left are sealed before any new session starts. */
	if (dg_gw_rec_start(&gw, &err) != 0 || dg_gw_video_start(&gw, &err) != 0) {
		fprintf(stderr, "deskgate serve: recordings: %s\n", err.msg);
		return DG_EXIT_FAILED;
	}
	/* The store's credentials, when they came from the environment, are
	 * in memory now (bucket.c); nothing started later inherits them. */
	unsetenv(DG_REC_S3_ENV_ACCESS_KEY);
	unsetenv(DG_REC_S3_ENV_SECRET_KEY);
	dg_worker_set_binary("/proc/self/exe");
	/* The spawner starts every egress proxy with these options (it inherits
	 * them); each session's add carries its own egress list. */
	struct dg_egress_opts eo = {.resolve = resolve, .n_resolve = n_resolve, .verbose = gw.verbose};
	if (root->egress_configure(&eo, &err) != 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	/* Inherited by the spawner, the egress proxy and the workers; each jail
	 * sets its own, lower (DG_JAIL_NICE). */
	if (setpriority(PRIO_PROCESS, 0, DG_CONTROL_NICE) != 0)
		fprintf(stderr, "deskgate serve: setpriority %d: %s (the control plane runs at "
				"the desktops' priority)\n", DG_CONTROL_NICE, strerror(errno));
	if (root->spawner_start(&gw.spawner, gw.verbose, &err) != 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		return DG_EXIT_FAILED;
	}
	if (dg_gw_egress_start(&gw, &err) != 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		dg_spawner_stop(&gw.spawner);
		return DG_EXIT_FAILED;
	}
	if (n_resolve)
		fprintf(stderr, "deskgate serve: TEST ONLY: %d names resolved by --test-resolve, "
				"exempt from the address checks\n", n_resolve);
	if (gw.cfg.limits.warm_xterm || gw.cfg.limits.warm_browser) {
		/* Warm desktops fit sessions of the default size and policy. */
		if (dg_spawner_pool(&gw.spawner, (int)gw.cfg.limits.warm_xterm,
				    (int)gw.cfg.limits.warm_browser, &gw.policy.limits,
				    gw.policy.rules != NULL, &err) < 0)
			fprintf(stderr, "deskgate serve: warm pool: %s\n", err.msg);
	}
	gw.n_sessions = (int)gw.cfg.limits.max_sessions;
	gw.session_end = dg_gw_session_end;
	gw.sessions = calloc((size_t)gw.n_sessions, sizeof(*gw.sessions));

	/* Not LLL_NOTICE when verbose: lws's libev glue logs every change of
	 * a descriptor's events at that level. */
	lws_set_log_level(gw.verbose ? LLL_ERR | LLL_WARN : LLL_ERR, NULL);
	struct ev_loop *loop = ev_loop_new(EVBACKEND_EPOLL);
	if (!loop) {
		fprintf(stderr, "deskgate serve: cannot create the event loop (epoll)\n");
		dg_spawner_stop(&gw.spawner);
		dg_egress_stop(&gw.egress);
		return DG_EXIT_FAILED;
	}
	void *foreign_loops[1] = {loop};
	struct lws_context_creation_info info;
	memset(&info, 0, sizeof(info));
	info.port = gw.cfg.listen_port;
	info.iface = gw.cfg.listen_addr;
	info.protocols = protocols;
	info.options = LWS_SERVER_OPTION_VALIDATE_UTF8 | LWS_SERVER_OPTION_LIBEV;
	info.foreign_loops = foreign_loops;
	info.timeout_secs = gw.cfg.limits.handshake_seconds;
	/* A connection that has not sent its request headers yet holds a header
	 * table under this timeout, not timeout_secs (lws default 10 s). */
	info.timeout_secs_ah_idle = gw.cfg.limits.handshake_seconds;
	if (gw.cfg.tls_cert[0]) {
		info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
		info.ssl_cert_filepath = gw.cfg.tls_cert;
		info.ssl_private_key_filepath = gw.cfg.tls_key;
	}
	gw.agent_fd = -1;
	if (gw.cfg.agent_check[0] && (gw.agent_fd = dg_gw_agent_open(&gw, &err)) < 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		ev_loop_destroy(loop);
		dg_spawner_stop(&gw.spawner);
		dg_egress_stop(&gw.egress);
		return DG_EXIT_FAILED;
	}
	gw.ctx = lws_create_context(&info);
	if (!gw.ctx) {
		fprintf(stderr, "deskgate serve: cannot listen on %s\n", gw.cfg.listen);
		ev_loop_destroy(loop);
		dg_spawner_stop(&gw.spawner);
		dg_egress_stop(&gw.egress);
		return DG_EXIT_FAILED;
	}
	gw.vh = lws_get_vhost_by_name(gw.ctx, "default");
	if (drop_privileges(&err) != 0) {
		fprintf(stderr, "deskgate serve: %s\n", err.msg);
		dg_spawner_stop(&gw.spawner);
		dg_egress_stop(&gw.egress);
		return DG_EXIT_FAILED;
	}
	gw.spawner_wsi = dg_gw_spawner_adopt(&gw, gw.spawner.fd);
	gw.egress_wsi = dg_gw_egress_adopt(&gw, gw.egress.fd);
	if (!gw.spawner_wsi || !gw.egress_wsi) {
		fprintf(stderr, "deskgate serve: cannot watch the spawner's or egress proxy's channel\n");
		return DG_EXIT_FAILED;
	}
	static struct raw_tag agent_tag = {.kind = RAW_AGENT_CHECK};
	if (gw.agent_fd >= 0 && !(gw.agent_wsi = dg_gw_adopt(&gw, gw.agent_fd, &agent_tag))) {
		fprintf(stderr, "deskgate serve: cannot watch the agent-check listener\n");
		return DG_EXIT_FAILED;
	}
	dg_gw_rec_timers(&gw);
	if (dg_gw_mcp_start(&gw) != 0) {
		fprintf(stderr, "deskgate serve: no memory for the MCP sessions' table\n");
		return DG_EXIT_FAILED;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	char http[256], ws[256];
	dg_config_base_url(&gw.cfg, false, http, sizeof(http));
	dg_config_base_url(&gw.cfg, true, ws, sizeof(ws));
	printf("deskgate: serving on %s (instance %s, pid %d, uid %u, no capabilities)\n",
	       gw.cfg.listen, dg_instance(), (int)getpid(), dg_instance_gateway_uid());
	printf("deskgate: agents: POST %s/v1/sessions, then connect %s/v1/sessions/<id>/ws\n", http, ws);
	printf("deskgate: browsers: %s/  (viewer token)\n", http);
	printf("deskgate: MCP hosts: %s/mcp  (agent token; docs/mcp.md)\n", http);
	if (gw.agent_fd >= 0)
		printf("deskgate: HAProxy agent-check on %s (docs/scale-out.md)%s\n", gw.cfg.agent_check,
		       gw.cfg.drain ? "; draining: no new session here" : "");
	for (size_t i = 0; i < gen.n; i++)
		printf("deskgate: generated %s token (shown once, kept hashed in %s/%s): %s\n",
		       dg_role_name(gen.t[i].role), gw.cfg.state_dir, DG_TOKENS_FILE, gen.t[i].token);
	dg_auth_generated_wipe(&gen);
	fflush(stdout);

	/* ev_run is false once no watcher is left: nothing could wake it. */
	while (!interrupted && !gw.stopping) {
		if (!ev_run(loop, EVRUN_ONCE)) {
			fprintf(stderr, "deskgate serve: the event loop has nothing left to watch\n");
			break;
		}
	}
	gw.stopping = true;
	dg_gw_video_stop(&gw); /* an export running now is not finished */
	for (int i = 0; i < gw.n_sessions; i++) {
		if (gw.sessions[i].used)
			dg_gw_session_end(&gw.sessions[i], gw.spawner_lost ?
				"the gateway is stopping: its spawner died" : "the gateway is stopping");
	}
	/* Let the agents and observers read why (bounded). */
	run_loop_for(loop, DG_GW_STOP_FLUSH_MS);
	dg_gw_rec_stop(&gw); /* every recording is sealed by now */
	dg_gw_mcp_stop(&gw);
	lws_context_destroy(gw.ctx);
	ev_loop_destroy(loop);
	dg_spawner_stop(&gw.spawner);
	dg_egress_stop(&gw.egress);
	free(gw.sessions);
	dg_auth_free(&gw.auth);
	dg_config_free(&gw.cfg);
	dg_policy_free(&gw.policy);
	free(gw.policy_text);
	printf("deskgate: stopped\n");
	/* A supervisor restarts a gateway that lost its spawner. */
	return gw.spawner_lost ? DG_EXIT_FAILED : 0;
}
