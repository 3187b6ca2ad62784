/* The action runner: an agent's messages become requests (adapted once:
 * each action parsed and its canonical text kept), queued per session and
 * run one action at a time; each action is decided (decide.c) on the
 * parsed struct, held for a human when the policy asks (the approvals,
 * bound to the kept text), sent to the worker as that text (or to the
 * spawner, for exec), recorded, and answered in the agent's wire format. Below the sessions' lifecycle:
 * it never ends a session (session.c calls dg_gw_runner_end when one ends).
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/server-priv.h"

static const long long US = 1000000;

static void record_action(struct gw_session *s, struct request *r, json_t *res, const char *error);
static void run_next(struct gw_session *s);
static void run_step(struct gw_session *s);
static void refuse_current(struct gw_session *s);
static void withdraw_approval(struct gw_session *s);

void dg_gw_request_free(struct request *r)
{
	free(r->b_url);
	free(r->b_title);
	dg_adapted_free(&r->ad);
	free(r->zoom_png);
	json_decref(r->last_result);
	json_decref(r->element);
	json_decref(r->tabs_before);
	free(r->error);
	free(r);
}

/* The canonical action of step i as the recording and observers show it:
 * a pending browser member's template when it never got its geometry. */
static json_t *step_action(const struct request *r, int i)
{
	if (r->ad.actions[i])
		return r->ad.actions[i];
	return r->ad.bcall.tmpl;
}

/* browser_state as the recording keeps it: the tabs after the action and
 * the tabs it opened. */
static json_t *state_json(const struct gw_session *s, const struct request *r)
{
	json_t *st = json_pack("{s:O}", "tabs", s->tabs);
	json_t *opened = json_array();
	for (size_t i = 0; st && opened && i < json_array_size(s->tabs); i++) {
		json_t *id = json_object_get(json_array_get(s->tabs, i), "id");
		bool before = false;
		for (size_t k = 0; k < json_array_size(r->tabs_before); k++)
			before = before || json_equal(json_array_get(r->tabs_before, k), id);
		if (!before && json_is_string(id))
			json_array_append(opened, id);
	}
	if (st && json_array_size(opened))
		json_object_set(st, "opened", opened);
	json_decref(opened);
	return st;
}

/* The recording's "action" event for the action of r that just ended
 * (performed, failed or refused): what the agent sent, the canonical
 * action, the decision and the state it was made in, the screens before and
 * after, and the outcome. Each action of a request is recorded once. */
static void record_action(struct gw_session *s, struct request *r, json_t *res, const char *error)
{
	if (r->recorded > r->index || r->index >= r->ad.n)
		return;
	r->recorded = r->index + 1;
	json_t *act = step_action(r, r->index);
	json_t *ev = json_pack("{s:s, s:i, s:O?, s:s, s:s, s:s, s:[i,i], s:[i,i], s:I}", "type",
			       "action", "index", r->index, "action", act,
			       "verdict", dg_verdict_name(r->decision.verdict), "rule", r->decision.rule,
			       "reason", r->decision.reason, "screen", s->width, s->height, "pointer",
			       r->b_px, r->b_py, "duration_ms",
			       (json_int_t)(dg_now_ms() - r->t_step));
	if (!ev)
		return;
	/* Who acted: the agent, or the operator holding control. */
	char actor[DG_TOKEN_NAME_MAX + 8];
	snprintf(actor, sizeof(actor), "%s%s", r->human[0] ? "human:" : "agent",
		 r->human);
	json_object_set_new(ev, "actor", json_string(actor));
	if (r->index == 0 && r->ad.raw) {
		/* What the agent sent, as the adapter decoded it (not again). */
		json_object_set(ev, "input", r->ad.raw);
		json_object_set_new(ev, "wire", json_string(dg_wire_name(r->ad.wire)));
	}
	json_object_set_new(ev, "url", r->b_url ? json_string(r->b_url) : json_null());
	json_object_set_new(ev, "title", r->b_title ? json_string(r->b_title) : json_null());
	json_object_set_new(ev, "frame_before", r->b_frame[0] ? json_string(r->b_frame) : json_null());
	const char *after = r->zoom_frame[0] ? r->zoom_frame : s->frame_hash;
	bool shown = res && json_object_get(res, "frame");
	json_object_set_new(ev, "frame_after", shown && after[0] ? json_string(after) : json_null());
	if (r->approved)
		json_object_set_new(ev, "approved_by", json_string(r->approved_by));
	/* Browser-use: the element the action was aimed at (role, name, box,
	 * point: screen pixels), the toolset member it came as, the tabs after
	 * it. */
	if (r->element && r->resolved_index == r->index)
		json_object_set(ev, "element", r->element);
	if (r->ad.browser) {
		json_object_set_new(ev, "toolset", json_string("browser"));
		json_object_set_new(ev, "member", json_string(r->ad.name[r->index]));
	}
	if (s->profile == DG_PROFILE_BROWSER && s->tabs)
		json_object_set_new(ev, "browser_state", state_json(s, r));
	if (res) {
		json_t *copy = json_deep_copy(res);
		json_object_del(copy, "id");
		json_object_set_new(ev, "result", copy);
	}
	if (error)
		json_object_set_new(ev, "error", json_string(error));
	if (s->url && res)
		json_object_set_new(ev, "url_after", json_string(s->url));
	if (s->title && res)
		json_object_set_new(ev, "title_after", json_string(s->title));
	dg_gw_rec_event(s, ev);
	/* Observers see every action with its verdict, refused ones included,
	 * without the agent's raw input or the worker's internals. */
	json_t *obs = json_pack("{s:s, s:O?, s:O?, s:O, s:O, s:O, s:b}", "type", "action", "action",
				json_object_get(act, "type"), "canonical",
				act, "verdict", json_object_get(ev, "verdict"), "rule",
				json_object_get(ev, "rule"), "reason", json_object_get(ev, "reason"), "ok",
				res && !error && json_is_true(json_object_get(res, "ok")));
	if (obs) {
		if (error)
			json_object_set_new(obs, "error", json_string(error));
		if (res && json_object_get(res, "cursor"))
			json_object_set(obs, "cursor", json_object_get(res, "cursor"));
		if (r->approved)
			json_object_set_new(obs, "approved_by", json_string(r->approved_by));
		if (json_object_get(ev, "element"))
			json_object_set(obs, "element", json_object_get(ev, "element"));
		json_object_set(obs, "actor", json_object_get(ev, "actor"));
		dg_gw_broadcast(s, obs);
	}
	json_decref(ev);
	r->zoom_frame[0] = '\0';
}

void dg_gw_set_page(struct gw_session *s, json_t *res)
{
	const char *url = json_string_value(json_object_get(res, "url"));
	const char *title = json_string_value(json_object_get(res, "title"));
	if (url) {
		free(s->url);
		s->url = strdup(url);
	}
	if (title) {
		free(s->title);
		s->title = strdup(title);
	}
	json_t *tabs = json_object_get(res, "tabs");
	if (json_is_array(tabs)) {
		json_decref(s->tabs);
		s->tabs = json_incref(tabs);
	}
	json_t *cur = json_object_get(res, "cursor");
	if (json_is_array(cur)) {
		s->cursor_x = (int)json_integer_value(json_array_get(cur, 0));
		s->cursor_y = (int)json_integer_value(json_array_get(cur, 1));
	}
}

static void record_timing(struct gw *gw, double ms)
{
	static const double bounds[] = {5, 10, 20, 30, 50, 100, 200, 500, 1000, 2000, 5000};
	int i = 0;
	while (i < 11 && ms > bounds[i])
		i++;
	gw->m.action_ms_buckets[i]++;
	gw->m.action_ms_sum += ms;
	gw->m.action_ms_count++;
}

/* What happened to r, for its answer in the agent's format: whether it
 * ran, where it stopped, and why. */
static void outcome_of(const struct request *r, struct dg_adapt_outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->ok = !r->failed;
	o->done = r->failed ? r->index : r->ad.n;
	o->error = r->error;
	if (r->refused) {
		o->verdict = dg_verdict_name(r->decision.verdict);
		o->rule = r->decision.rule;
		o->reason = r->decision.reason;
	}
}

/* A browser member's answer text when the worker gave none: what was done,
 * where (viewport pixels, the frame the model acts in), on what. */
static char *browser_body(struct gw_session *s, struct request *r)
{
	const char *text = json_string_value(json_object_get(r->last_result, "text"));
	char *b = NULL;
	if (text)
		return strdup(text);
	if (!r->ad.actions[0])
		return NULL;
	const struct dg_action *a = &r->ad.act[0];
	const char *m = r->ad.name[0];
	int rc = 0;
	switch (a->type) {
	case DG_ACTION_NAVIGATE:
	case DG_ACTION_BACK:
	case DG_ACTION_FORWARD:
	case DG_ACTION_RELOAD: {
		json_t *t = json_string(s->title ? s->title : "");
		char *ts = t ? json_dumps(t, JSON_ENCODE_ANY) : NULL;
		rc = asprintf(&b, "%s done: the tab shows %s, title %s", m, s->url ? s->url : "?",
			      ts ? ts : "\"\"");
		free(ts);
		json_decref(t);
		break;
	}
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_SCROLL:
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP: {
		const json_t *el = r->element;
		int vx = a->x - r->vp[0], vy = a->y - r->vp[1];
		char *name = el ? json_dumps(json_object_get(el, "name"), JSON_ENCODE_ANY) : NULL;
		if (el)
			rc = asprintf(&b, "%s done on %s (%s %s) at (%d, %d) in the viewport", m,
				      json_string_value(json_object_get(el, "ref")),
				      json_string_value(json_object_get(el, "role")),
				      name ? name : "\"\"", vx, vy);
		else
			rc = asprintf(&b, "%s done at (%d, %d) in the viewport", m, vx, vy);
		free(name);
		break;
	}
	case DG_ACTION_TYPE:
		rc = asprintf(&b, "typed %zu bytes of text", a->text_len);
		break;
	case DG_ACTION_SCREENSHOT:
	case DG_ACTION_ZOOM:
		return NULL; /* the image says it */
	default:
		rc = asprintf(&b, "%s done", m);
		break;
	}
	return rc < 0 ? NULL : b;
}

/* The answer to a browser toolset member: its tool_result with
 * browser_state (adapt-answer.c); an image only for screenshot and zoom,
 * whose frames are the viewport or part of it. */
static void answer_browser(struct gw_session *s, struct request *r)
{
	struct dg_adapt_outcome o;
	outcome_of(r, &o);
	bool image = !r->failed && r->zoom_png && r->ad.actions[0] &&
		     (r->ad.act[0].type == DG_ACTION_SCREENSHOT || r->ad.act[0].type == DG_ACTION_ZOOM);
	if (image) {
		o.png = r->zoom_png;
		o.png_len = r->zoom_len;
	}
	char *body = r->failed ? NULL : browser_body(s, r);
	o.body = body;
	o.tabs = s->tabs ? s->tabs : NULL;
	o.tabs_before = r->tabs_before;
	json_t *out = NULL;
	struct dg_err err = {{0}};
	if (dg_adapt_answer(&r->ad, &o, &out, &err) != 0)
		dg_gw_error_json(r->agent, "internal", "building the answer: %s", err.msg);
	else
		dg_gw_ws_send_json(r->agent, out);
	free(body);
}

/* Answers the agent for the request that just ended, in its wire format. */
static void answer(struct gw_session *s, struct request *r)
{
	struct conn *c = r->agent;
	double ms = (double)(dg_now_ms() - r->t0);
	record_timing(s->gw, ms);
	json_t *res = r->last_result;
	if (r->ad.wire == DG_WIRE_CANONICAL || r->ad.wire == DG_WIRE_UNKNOWN) {
		json_t *j = res ? json_deep_copy(res) : json_object();
		json_object_del(j, "id");
		json_object_set_new(j, "type", json_string("result"));
		json_object_set_new(j, "ok", json_boolean(!r->failed));
		if (r->error)
			json_object_set_new(j, "error", json_string(r->error));
		if (r->refused) {
			json_object_set_new(j, "verdict", json_string(dg_verdict_name(r->decision.verdict)));
			json_object_set_new(j, "rule", json_string(r->decision.rule));
			json_object_set_new(j, "reason", json_string(r->decision.reason));
			json_object_set_new(j, "action", json_incref(json_object_get(
								 r->ad.actions[r->index], "type")));
			json_object_del(j, "frame");
		} else {
			json_object_set_new(j, "verdict", json_string("allow"));
			if (r->approved)
				json_object_set_new(j, "approved_by", json_string(r->approved_by));
		}
		json_object_set_new(j, "total_ms", json_real(ms));
		if (r->human[0])
			json_object_del(j, "frame"); /* an operator sees the screen on its watch channel */
		bool frame = json_object_get(j, "frame") && (r->zoom_png || s->png);
		dg_gw_ws_send_json(c, j);
		if (frame && r->zoom_png)
			dg_gw_ws_send(c, true, r->zoom_png, r->zoom_len);
		else if (frame)
			dg_gw_ws_send(c, true, s->png, s->png_len);
		return;
	}
	if (r->ad.browser)
		return answer_browser(s, r);
	struct dg_adapt_outcome o;
	outcome_of(r, &o);
	o.png = r->zoom_png ? r->zoom_png : s->png;
	o.png_len = r->zoom_png ? r->zoom_len : s->png_len;
	o.url = s->profile == DG_PROFILE_BROWSER ? s->url : NULL;
	bool cursor_q = r->ad.n > 0 && !r->failed &&
			r->ad.act[r->ad.n - 1].type == DG_ACTION_CURSOR_POSITION;
	if (cursor_q && r->ad.wire == DG_WIRE_ANTHROPIC) {
		/* The position is the answer; an old screenshot would only mislead. */
		o.png = NULL;
		o.png_len = 0;
	}
	if (cursor_q) {
		o.has_cursor = true;
		o.cursor_x = s->cursor_x;
		o.cursor_y = s->cursor_y;
	}
	json_t *ex = json_object_get(res, "exec");
	char *text = NULL;
	if (ex) {
		text = json_dumps(ex, JSON_COMPACT);
		o.text = text;
	}
	json_t *out = NULL;
	struct dg_err err = {{0}};
	if (dg_adapt_answer(&r->ad, &o, &out, &err) != 0)
		dg_gw_error_json(c, "internal", "building the answer: %s", err.msg);
	else
		dg_gw_ws_send_json(c, out);
	free(text);
}

static void finish_request(struct gw_session *s)
{
	struct request *r = s->cur;
	s->cur = NULL;
	if (r->failed)
		s->n_errors++;
	if (r->agent)
		answer(s, r);
	dg_gw_request_free(r);
	run_next(s);
}

int dg_gw_send_to_worker(struct gw_session *s, const char *action, size_t len)
{
	/* {"id":N,"action":<the canonical text as kept>[,"size":[w,h]][,"page_url":U]}:
	 * the action's bytes are not decoded or encoded again on the way. */
	char head[64], size[64] = "";
	snprintf(head, sizeof(head), "{\"id\":%lld,\"action\":", (long long)(s->n_actions + 1));
	if (s->model_w != s->width || s->model_h != s->height)
		snprintf(size, sizeof(size), ",\"size\":[%d,%d]", s->model_w, s->model_h);
	/* The page the decision was made at, when a rule depends on it: the
	 * worker refuses an input action when another page is in front by the
	 * time it runs (a tab the page or the browser brought up since). A URL
	 * that is not UTF-8 cannot be a JSON string: left out, as before. */
	char *page = NULL;
	if (s->cur && s->cur->b_url && s->profile == DG_PROFILE_BROWSER &&
	    dg_policy_uses_page_url(&s->policy)) {
		json_t *u = json_string(s->cur->b_url);
		page = u ? json_dumps(u, JSON_ENCODE_ANY) : NULL;
		json_decref(u);
	}
	size_t hl = strlen(head), sl = strlen(size), pl = page ? strlen(page) + 12 : 0;
	char *m = malloc(hl + len + sl + pl + 2);
	if (!m) {
		free(page);
		return -ENOMEM;
	}
	size_t n = 0;
	memcpy(m + n, head, hl);
	n += hl;
	memcpy(m + n, action, len);
	n += len;
	memcpy(m + n, size, sl);
	n += sl;
	if (page)
		n += (size_t)sprintf(m + n, ",\"page_url\":%s", page);
	m[n++] = '}';
	m[n] = '\0';
	free(page);
	int r = dg_ipc_send(lws_get_socket_fd(s->worker), DG_MSG_ACTION, m, n);
	free(m);
	return r;
}

void dg_gw_step_failed(struct gw_session *s, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record_action(s, s->cur, NULL, msg);
	s->cur->failed = true;
	free(s->cur->error);
	s->cur->error = strdup(msg);
	finish_request(s);
}

static void start_exec(struct gw_session *s, json_t *action)
{
	/* The action passed its schema (argv strings, stdin, timeout_ms within
	 * the exec caps); the stub checks them again against the channel's. */
	json_t *argv_j = json_object_get(action, "argv"), *in = json_object_get(action, "stdin");
	size_t argc = json_array_size(argv_j);
	const char *argv[DG_EXEC_ARGV_MAX + 1] = {0};
	for (size_t i = 0; i < argc && i < DG_EXEC_ARGV_MAX; i++)
		argv[i] = json_string_value(json_array_get(argv_j, i));
	struct dg_err err = {{0}};
	int n = dg_spawner_exec(&s->gw->spawner, s->id, argv, argc, json_string_value(in),
				json_string_length(in),
				json_integer_value(json_object_get(action, "timeout_ms")), &err);
	if (n < 0)
		return dg_gw_step_failed(s, "exec: %s", err.msg);
	s->exec_req = n;
}

/* The channel's bounds on upload paths are the file_upload action's. */
_Static_assert(DG_UPLOAD_PATHS_MAX == DG_ACTION_PATHS_MAX, "upload paths: channel vs action");
_Static_assert(DG_UPLOAD_PATH_MAX == DG_ACTION_FILE_PATH_MAX, "upload path bytes: channel vs action");

static void send_current(struct gw_session *s);

/* The spawner's verdicts on the current file_upload's paths (asked in
 * perform, in the desktop's own view of the jail: no symbolic link, a
 * regular file in the session's scratch space, none of the browser's own
 * files): every path ok, the action goes to the worker; any other verdict
 * fails it, naming the path and why. */
void dg_gw_upload_checked(struct gw_session *s, const struct dg_upload_check *answer,
			  const char *error)
{
	struct request *r = s->cur;
	if (!r || r->index >= r->ad.n || r->ad.act[r->index].type != DG_ACTION_FILE_UPLOAD)
		return; /* the session's request ended meanwhile */
	const struct dg_action *a = &r->ad.act[r->index];
	if (!answer)
		return dg_gw_step_failed(s, "not performed: the files could not be checked: %s",
					 error ? error : "no answer");
	if ((int)answer->n != a->n_paths)
		return dg_gw_step_failed(s, "not performed: the check answered %u of %d files",
					 (unsigned)answer->n, a->n_paths);
	for (int i = 0; i < a->n_paths; i++) {
		if (answer->files[i].verdict == DG_UPLOAD_OK)
			continue;
		char why[DG_ERR_MAX];
		dg_upload_reason(&answer->files[i], a->paths[i], why, sizeof(why));
		return dg_gw_step_failed(s, "not performed: %s: %s (a file_upload takes regular "
					 "files of the session's scratch space, /tmp, /home/user and "
					 "/dev/shm, without symbolic links)", a->paths[i], why);
	}
	send_current(s);
}

/* The binding of an approval: SHA-256 over the session id, a NUL and the
 * action's canonical JSON (sorted keys, compact), so approving one action
 * can never let another one through, here or in another session. */
static int action_hash(const struct gw_session *s, const char *text, size_t len,
		       unsigned char out[DG_SHA256_LEN])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
		 EVP_DigestUpdate(c, s->id, strlen(s->id) + 1) == 1 &&
		 EVP_DigestUpdate(c, text, len) == 1 && EVP_DigestFinal_ex(c, out, NULL) == 1;
	EVP_MD_CTX_free(c);
	return ok ? 0 : -ENOMEM;
}

void dg_gw_approval_clear(struct gw_session *s)
{
	lws_sul_cancel(&s->sul_approval);
	free(s->appr.png);
	memset(&s->appr, 0, sizeof(s->appr));
}

static void on_approval_timeout(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s =
		(struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_approval));
	if (!s->used || !s->appr.pending || !s->cur)
		return;
	dg_gw_approval_clear(s);
	struct request *r = s->cur;
	r->decision.verdict = DG_VERDICT_DENY;
	snprintf(r->decision.rule, sizeof(r->decision.rule), "approval");
	snprintf(r->decision.reason, sizeof(r->decision.reason),
		 "nobody approved it within %u s (limits.approval_seconds)",
		 s->gw->cfg.limits.approval_seconds);
	dg_gw_note(s, json_pack("{s:s, s:s, s:s}", "type", "approval", "state", "expired", "reason",
			       r->decision.reason));
	refuse_current(s);
}

/* Holds the current action for a human: the agent's request waits (its
 * answer comes when someone decides or the approval expires). */
static void ask(struct gw_session *s, struct request *r, json_t *action)
{
	if (dg_gw_new_id(s->appr.id, sizeof(s->appr.id)) != 0 || action_hash(s, r->ad.text[r->index], r->ad.text_len[r->index],
							     s->appr.hash) != 0) {
		r->decision.verdict = DG_VERDICT_DENY;
		snprintf(r->decision.reason, sizeof(r->decision.reason),
			 "the policy asks for approval, and no approval could be set up");
		refuse_current(s);
		return;
	}
	s->appr.pending = true;
	s->appr.created_ms = dg_now_ms();
	s->appr.expires_ms = s->appr.created_ms + (long long)s->gw->cfg.limits.approval_seconds * 1000;
	if (s->png) {
		s->appr.png = malloc(s->png_len);
		if (s->appr.png) {
			memcpy(s->appr.png, s->png, s->png_len);
			s->appr.png_len = s->png_len;
		}
	}
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_approval, on_approval_timeout,
			 (lws_usec_t)s->gw->cfg.limits.approval_seconds * US);
	char ah[2 * DG_SHA256_LEN + 1];
	dg_hex_encode(s->appr.hash, DG_SHA256_LEN, ah);
	json_t *ev = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s, s:s, s:i}", "type", "approval", "state",
			       "pending", "id", s->appr.id, "action", action, "rule", r->decision.rule,
			       "reason", r->decision.reason, "action_sha256", ah, "expires_in_s",
			       (int)s->gw->cfg.limits.approval_seconds);
	if (ev && r->element && r->resolved_index == r->index)
		json_object_set(ev, "element", r->element);
	dg_gw_note(s, ev);
	/* The canonical API tells its agent at once; the Anthropic and OpenAI
	 * shapes have no such message, so their agents just wait longer. */
	if (r->agent && (r->ad.wire == DG_WIRE_CANONICAL || r->ad.wire == DG_WIRE_UNKNOWN))
		dg_gw_ws_send_json(r->agent, json_pack("{s:s, s:s, s:s, s:s, s:i}", "type", "pending",
							"approval", s->appr.id, "rule", r->decision.rule,
							"reason", r->decision.reason, "expires_in_s",
							(int)s->gw->cfg.limits.approval_seconds));
}

/* The current action runs: exec in the jail (through the spawner), any
 * other at the worker, as the canonical text kept since it was parsed. */
static void perform(struct gw_session *s)
{
	struct request *r = s->cur;
	int t = (int)r->ad.act[r->index].type;
	dg_gw_count_action(s);
	s->n_actions++;
	if (t >= 0)
		s->gw->m.actions[t][0]++;
	if (t == DG_ACTION_EXEC) {
		s->n_exec++;
		start_exec(s, r->ad.actions[r->index]);
		return;
	}
	if (t == DG_ACTION_FILE_UPLOAD) {
		/* The files are checked where the browser will read them first
		 * (dg_gw_upload_checked goes on). */
		const struct dg_action *a = &r->ad.act[r->index];
		struct dg_err err = {{0}};
		int n = dg_spawner_upload_check(&s->gw->spawner, s->id, (const char *const *)a->paths,
						(size_t)a->n_paths, &err);
		if (n < 0)
			return dg_gw_step_failed(s, "not performed: %s", err.msg);
		s->upload_req = n;
		return;
	}
	send_current(s);
}

/* The current action goes to the worker, as the canonical text kept. */
static void send_current(struct gw_session *s)
{
	struct request *r = s->cur;
	int e = dg_gw_send_to_worker(s, r->ad.text[r->index], r->ad.text_len[r->index]);
	if (e)
		dg_gw_step_failed(s, "the desktop's worker is gone (%s)", strerror(-e));
}

static int current_type(struct gw_session *s)
{
	return (int)s->cur->ad.act[s->cur->index].type;
}

/* The current action is not performed: the agent gets the decision. */
static void refuse_current(struct gw_session *s)
{
	struct request *r = s->cur;
	int t = current_type(s);
	record_action(s, r, NULL, NULL);
	r->refused = true;
	s->n_refused++;
	if (t >= 0)
		s->gw->m.actions[t][r->decision.verdict == DG_VERDICT_ASK ? 3 : 2]++;
	r->failed = true;
	finish_request(s);
}

/* The agent's hello, in its turn among its messages: from now on its
 * socket gets the events it names; answered with the session's hello and
 * the events it now gets. */
static void agent_hello(struct gw_session *s)
{
	struct request *r = s->cur;
	if (r->agent) {
		r->agent->events = r->ad.events;
		json_t *j = dg_gw_session_hello(s);
		json_t *names = json_array();
		for (int i = 0; i < DG_AGENT_EVENT_KINDS; i++)
			if (r->ad.events & (1u << i))
				json_array_append_new(names, json_string(dg_agent_event_name(1u << i)));
		json_object_set_new(j, "events", names);
		dg_gw_ws_send_json(r->agent, j);
	}
	s->cur = NULL;
	dg_gw_request_free(r);
	run_next(s);
}

/* Asks the worker where the current step's element and viewport are (and
 * brings its tab to the front): answered like an action (dg_gw_step_done
 * sees r->resolving). */
static void start_resolve(struct gw_session *s, struct request *r, const struct dg_resolve_req *q)
{
	json_t *rs = json_pack("{s:b, s:b}", "scroll", q->scroll, "hit", q->hit);
	if (rs && q->tab[0])
		json_object_set_new(rs, "tab", json_string(q->tab));
	if (rs && q->ref)
		json_object_set_new(rs, "ref", json_integer(q->ref));
	json_t *m = rs ? json_pack("{s:I, s:o}", "id", (json_int_t)(s->n_actions + 1), "resolve", rs)
		       : NULL;
	char *txt = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	int e = txt ? dg_ipc_send(lws_get_socket_fd(s->worker), DG_MSG_ACTION, txt, strlen(txt))
		    : -ENOMEM;
	free(txt);
	if (e)
		return dg_gw_step_failed(s, "the desktop's worker is gone (%s)", strerror(-e));
	r->resolving = true;
}

/* An integer of the worker's answer within [lo, hi]. */
static bool int_in(const json_t *v, long long lo, long long hi, int *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return false;
	*out = (int)json_integer_value(v);
	return true;
}

/* A string of the worker's answer of at most max bytes, copied into o. */
static bool str_into(json_t *o, const char *key, const json_t *v, size_t max)
{
	return json_is_string(v) && json_string_length(v) <= max &&
	       json_object_set_new(o, key, json_stringn(json_string_value(v),
							 json_string_length(v))) == 0;
}

/* The worker's answer to a resolve, parsed once here into the adapter's
 * typed view (and a checked copy of the element for the recording); then
 * the step goes on to its decision. */
static void resolved(struct gw_session *s, struct request *r, json_t *res)
{
	dg_gw_set_page(s, res); /* the tab the action will act on */
	if (!json_is_true(json_object_get(res, "ok"))) {
		const char *e = json_string_value(json_object_get(res, "error"));
		char msg[DG_ERR_MAX];
		snprintf(msg, sizeof(msg), "%s", e ? e : "the browser could not say where it is");
		json_decref(res);
		return dg_gw_step_failed(s, "%s", msg);
	}
	json_t *rv = json_object_get(res, "resolved");
	json_t *vp = json_object_get(rv, "viewport"), *el = json_object_get(rv, "element");
	struct dg_browser_view v;
	memset(&v, 0, sizeof(v));
	bool ok = int_in(json_object_get(vp, "x"), 0, s->width, &v.vp_x) &&
		  int_in(json_object_get(vp, "y"), 0, s->height, &v.vp_y) &&
		  int_in(json_object_get(vp, "w"), 0, s->width, &v.vp_w) &&
		  int_in(json_object_get(vp, "h"), 0, s->height, &v.vp_h);
	json_t *copy = NULL;
	if (ok && el) {
		json_t *pt = json_object_get(el, "point"), *box = json_object_get(el, "box");
		int b[4];
		copy = json_object();
		ok = copy && json_array_size(pt) == 2 && json_array_size(box) == 4 &&
		     int_in(json_array_get(pt, 0), 0, s->width - 1, &v.px) &&
		     int_in(json_array_get(pt, 1), 0, s->height - 1, &v.py) &&
		     int_in(json_array_get(box, 0), -DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, &b[0]) &&
		     int_in(json_array_get(box, 1), -DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, &b[1]) &&
		     int_in(json_array_get(box, 2), 0, DG_ACTION_SCREEN_MAX, &b[2]) &&
		     int_in(json_array_get(box, 3), 0, DG_ACTION_SCREEN_MAX, &b[3]) &&
		     str_into(copy, "ref", json_object_get(el, "ref"), 16) &&
		     str_into(copy, "role", json_object_get(el, "role"), DG_GW_ELEMENT_TEXT_MAX) &&
		     str_into(copy, "name", json_object_get(el, "name"), DG_GW_ELEMENT_TEXT_MAX) &&
		     str_into(copy, "tag", json_object_get(el, "tag"), DG_GW_ELEMENT_TEXT_MAX) &&
		     json_object_set_new(copy, "box", json_pack("[iiii]", b[0], b[1], b[2], b[3])) == 0 &&
		     json_object_set_new(copy, "point", json_pack("[ii]", v.px, v.py)) == 0;
		v.has_point = true;
	}
	json_decref(res);
	if (!ok) {
		json_decref(copy);
		return dg_gw_step_failed(s, "the desktop's worker answered a malformed resolve");
	}
	json_decref(r->element);
	r->element = copy;
	r->vp[0] = v.vp_x;
	r->vp[1] = v.vp_y;
	struct dg_err err = {{0}};
	if (dg_adapt_resolve(&r->ad, r->index, &v, &err) != 0)
		return dg_gw_step_failed(s, "%s", err.msg);
	r->resolved_index = r->index;
	run_step(s);
}

/* r's current action is refused because an operator holds control. */
static void paused(struct gw_session *s, struct request *r)
{
	r->decision.verdict = DG_VERDICT_DENY;
	snprintf(r->decision.rule, sizeof(r->decision.rule), "takeover");
	snprintf(r->decision.reason, sizeof(r->decision.reason),
		 "paused by an operator: %s has control of the desktop", s->op.by.name);
}

static void run_step(struct gw_session *s)
{
	struct request *r = s->cur;
	if (r->ad.wire == DG_WIRE_HELLO)
		return agent_hello(s);
	s->last_activity_ms = dg_now_ms(); /* session.c's idle timer reads it */
	if (s->op.held && !r->human[0]) {
		/* The agent's turn is an operator's now: not decided, not
		 * resolved (which may scroll the page), not run. */
		dg_gw_decide_state(s, r);
		paused(s, r);
		return refuse_current(s);
	}
	/* An action on an element or at a viewport point is decided where it
	 * will act: the browser is asked first (resolved() comes back here). */
	struct dg_resolve_req q;
	if (r->resolved_index != r->index && dg_adapt_resolve_wants(&r->ad, r->index, &q)) {
		if (s->profile != DG_PROFILE_BROWSER)
			return dg_gw_step_failed(s, "not performed: %s acts on a browser's page, and "
						 "this desktop is an xterm", r->ad.name[r->index]);
		return start_resolve(s, r, &q);
	}
	dg_gw_decide_action(s, r, &r->ad.act[r->index]);
	if (r->decision.verdict == DG_VERDICT_ASK)
		return ask(s, r, r->ad.actions[r->index]);
	if (r->decision.verdict != DG_VERDICT_ALLOW)
		return refuse_current(s);
	perform(s);
}

json_t *dg_gw_approvals_json(struct gw *gw)
{
	json_t *list = json_array();
	long long now = dg_now_ms();
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (!s->used || !s->appr.pending || !s->cur)
			continue;
		struct request *r = s->cur;
		json_t *a = json_pack("{s:s, s:s, s:s, s:O, s:s, s:s, s:I, s:I, s:b}", "id", s->appr.id,
				      "session", s->id, "agent", s->owner, "action",
				      r->ad.actions[r->index], "rule", r->decision.rule, "reason",
				      r->decision.reason, "age_ms", (json_int_t)(now - s->appr.created_ms),
				      "expires_in_ms", (json_int_t)(s->appr.expires_ms - now), "frame",
				      s->appr.png != NULL);
		if (s->url)
			json_object_set_new(a, "url", json_string(s->url));
		if (s->title)
			json_object_set_new(a, "title", json_string(s->title));
		if (r->element && r->resolved_index == r->index)
			json_object_set(a, "element", r->element);
		json_array_append_new(list, a);
	}
	return list;
}

struct gw_session *dg_gw_approval_find(struct gw *gw, const char *id)
{
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (s->used && s->appr.pending && s->cur && strcmp(s->appr.id, id) == 0)
			return s;
	}
	return NULL;
}

int dg_gw_approval_answer(struct gw *gw, const char *id, bool approve, const char *who, char *err,
			  size_t errlen)
{
	struct gw_session *s = dg_gw_approval_find(gw, id);
	if (!s) {
		snprintf(err, errlen, "no pending approval %.40s (answered, expired or never asked)", id);
		return -ENOENT;
	}
	struct request *r = s->cur;
	unsigned char h[DG_SHA256_LEN];
	if (action_hash(s, r->ad.text[r->index], r->ad.text_len[r->index], h) != 0 || CRYPTO_memcmp(h, s->appr.hash, sizeof(h)) != 0) {
		snprintf(err, errlen, "approval %.40s is not for the action waiting now", id);
		return -ESTALE;
	}
	/* Single use: whatever happens next, this id is spent. */
	dg_gw_approval_clear(s);
	dg_gw_note(s, json_pack("{s:s, s:s, s:s, s:s}", "type", "approval", "state",
			  approve ? "approved" : "denied", "id", id, "by", who));
	if (!approve) {
		r->decision.verdict = DG_VERDICT_DENY;
		snprintf(r->decision.rule, sizeof(r->decision.rule), "approval");
		snprintf(r->decision.reason, sizeof(r->decision.reason), "denied by %s", who);
		refuse_current(s);
		return 0;
	}
	r->approved = true;
	snprintf(r->approved_by, sizeof(r->approved_by), "%s", who);
	perform(s);
	return 0;
}

static void run_next(struct gw_session *s)
{
	if (s->cur || !s->queue || s->state != S_READY || s->gone)
		return;
	s->cur = s->queue;
	s->queue = s->queue->next;
	if (!s->queue)
		s->queue_tail = NULL;
	s->queued--;
	s->cur->next = NULL;
	s->cur->t0 = dg_now_ms();
	run_step(s);
}

/* One action of the current request ended with the worker's result. */
void dg_gw_step_done(struct gw_session *s, json_t *res)
{
	struct request *r = s->cur;
	if (!r) {
		json_decref(res);
		return;
	}
	if (r->resolving) {
		r->resolving = false;
		return resolved(s, r, res);
	}
	/* An exec's step ends with the screenshot after it: keep its output. */
	json_t *ex = r->last_result ? json_object_get(r->last_result, "exec") : NULL;
	if (ex) {
		json_object_set(res, "exec", ex);
		json_object_set_new(res, "action", json_string("exec"));
	}
	json_decref(r->last_result);
	r->last_result = res;
	dg_gw_set_page(s, res);
	bool ok = json_is_true(json_object_get(res, "ok"));
	record_action(s, r, res, ok ? NULL : json_string_value(json_object_get(res, "error")));
	if (!ok) {
		const char *e = json_string_value(json_object_get(res, "error"));
		r->failed = true;
		free(r->error);
		r->error = strdup(e ? e : "the action failed");
		int t = (int)r->ad.act[r->index].type;
		if (t >= 0) {
			s->gw->m.actions[t][0]--;
			s->gw->m.actions[t][1]++;
		}
		finish_request(s);
		return;
	}
	if (++r->index < r->ad.n)
		run_step(s);
	else
		finish_request(s);
}

/* Whether a message of c may be queued now: within its rate and the
 * session's queue (else c is told why). */
static bool admit(struct gw_session *s, struct conn *c)
{
	struct gw *gw = s->gw;
	long long now = dg_now_ms();
	if (now - c->window_start >= 1000) {
		c->window_start = now;
		c->window_count = 0;
	}
	if ((uint32_t)++c->window_count > gw->cfg.limits.actions_per_second) {
		gw->m.protocol_errors++;
		dg_gw_error_json(c, "rate_limited", "at most %d messages a second",
				 gw->cfg.limits.actions_per_second);
		return false;
	}
	if ((uint32_t)s->queued >= gw->cfg.limits.max_pending_actions) {
		gw->m.protocol_errors++;
		dg_gw_error_json(c, "too_many_pending",
				 "%d requests are waiting already (limits.max_pending_actions)",
				 s->queued);
		return false;
	}
	return true;
}

/* r (parsed) joins s's queue, answered to c when it has run. */
static void enqueue(struct gw_session *s, struct conn *c, struct request *r)
{
	r->agent = c;
	r->resolved_index = -1;
	if (s->queue_tail)
		s->queue_tail->next = r;
	else
		s->queue = r;
	s->queue_tail = r;
	s->queued++;
	run_next(s);
}

/* What a person at the screen does: an operator's actions are these. */
static bool human_action(enum dg_action_type t)
{
	switch (t) {
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_DRAG:
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
	case DG_ACTION_SCROLL:
	case DG_ACTION_TYPE:
	case DG_ACTION_KEY:
	case DG_ACTION_HOLD_KEY:
	case DG_ACTION_NAVIGATE:
	case DG_ACTION_BACK:
	case DG_ACTION_FORWARD:
	case DG_ACTION_RELOAD:
	case DG_ACTION_SCREENSHOT:
	case DG_ACTION_CURSOR_POSITION:
	case DG_ACTION_WAIT:
		return true;
	default:
		return false;
	}
}

void dg_gw_operator_message(struct gw_session *s, struct conn *c, const char *text, size_t len)
{
	if (!admit(s, c))
		return;
	struct request *r = calloc(1, sizeof(*r));
	if (!r)
		return dg_gw_error_json(c, "internal", "out of memory");
	struct dg_adapt_scale scale = {s->width, s->height, s->model_w, s->model_h, NULL};
	struct dg_err err = {{0}};
	int cx = s->cursor_x < s->width ? s->cursor_x : s->width - 1;
	int cy = s->cursor_y < s->height ? s->cursor_y : s->height - 1;
	int rc = dg_adapt_parse(text, len, &scale, cx, cy, &r->ad, &err);
	if (rc == 0 && (r->ad.wire != DG_WIRE_CANONICAL || r->ad.pending))
		rc = dg_err_set(&err, -EINVAL, "an operator sends canonical actions with their "
				"screen coordinates, one or a batch (docs/agents.md)");
	for (int i = 0; rc == 0 && i < r->ad.n; i++)
		if (!human_action(r->ad.act[i].type))
			rc = dg_err_set(&err, -EINVAL, "actions[%d]: an operator's action is input, "
					"navigation, a screenshot or a wait, not %s", i,
					r->ad.name[i]);
	if (rc != 0) {
		s->gw->m.protocol_errors++;
		dg_gw_error_json(c, "bad_request", "%s", err.msg);
		dg_gw_request_free(r);
		return;
	}
	snprintf(r->human, sizeof(r->human), "%s", c->who.name);
	s->op.last_ms = dg_now_ms(); /* takeover.c's idle timer reads it */
	enqueue(s, c, r);
}

void dg_gw_session_agent_message(struct gw_session *s, struct conn *c, const char *text, size_t len)
{
	struct gw *gw = s->gw;
	if (!admit(s, c))
		return;
	struct request *r = calloc(1, sizeof(*r));
	if (!r)
		return dg_gw_error_json(c, "internal", "out of memory");
	struct dg_adapt_scale scale = {s->width, s->height, s->model_w, s->model_h,
				       s->has_toolsets ? &s->toolsets : NULL};
	struct dg_err err = {{0}};
	int cx = s->cursor_x < s->width ? s->cursor_x : s->width - 1;
	int cy = s->cursor_y < s->height ? s->cursor_y : s->height - 1;
	if (dg_adapt_parse(text, len, &scale, cx, cy, &r->ad, &err) != 0) {
		gw->m.protocol_errors++;
		if (r->ad.wire == DG_WIRE_ANTHROPIC || (r->ad.wire == DG_WIRE_OPENAI && r->ad.has_id && s->png)) {
			struct dg_adapt_outcome o;
			memset(&o, 0, sizeof(o));
			o.error = err.msg;
			o.png = s->png;
			o.png_len = s->png_len;
			/* The OpenAI answer carries the URL in browser sessions,
			 * refusals included. */
			o.url = s->profile == DG_PROFILE_BROWSER ? s->url : NULL;
			if (r->ad.browser) {
				/* A browser member shows no screen, only the tabs. */
				o.png = NULL;
				o.png_len = 0;
				o.tabs = s->tabs;
			}
			json_t *out = NULL;
			struct dg_err e2 = {{0}};
			if (dg_adapt_answer(&r->ad, &o, &out, &e2) == 0)
				dg_gw_ws_send_json(c, out);
			else
				dg_gw_error_json(c, "bad_request", "%s", err.msg);
		} else {
			dg_gw_error_json(c, "bad_request", "%s", err.msg);
		}
		dg_gw_request_free(r);
		return;
	}
	if (r->ad.browser && s->tabs) {
		/* browser_state's "tab_opened": the tabs the call finds open. */
		r->tabs_before = json_array();
		for (size_t i = 0; r->tabs_before && i < json_array_size(s->tabs); i++)
			json_array_append(r->tabs_before,
					  json_object_get(json_array_get(s->tabs, i), "id"));
	}
	enqueue(s, c, r);
}

void dg_gw_runner_withdraw(struct gw_session *s, struct conn *agent, const char *why)
{
	for (struct request **p = &s->queue, *prev = NULL; *p;) {
		struct request *r = *p;
		if (r->agent != agent) {
			prev = r;
			p = &r->next;
			continue;
		}
		*p = r->next;
		if (s->queue_tail == r)
			s->queue_tail = prev;
		s->queued--;
		dg_gw_request_free(r);
	}
	struct request *r = s->cur;
	if (!r || r->agent != agent)
		return;
	r->agent = NULL;
	if (!s->appr.pending)
		return;
	/* Nobody waits for its answer: a human must not be asked to let it
	 * run any more. */
	r->decision.verdict = DG_VERDICT_DENY;
	snprintf(r->decision.rule, sizeof(r->decision.rule), "approval");
	snprintf(r->decision.reason, sizeof(r->decision.reason), "withdrawn: %s", why);
	withdraw_approval(s);
}

/* The approval the current request waits for is withdrawn, and the request
 * refused with the decision already set in it. */
static void withdraw_approval(struct gw_session *s)
{
	dg_gw_approval_clear(s);
	dg_gw_note(s, json_pack("{s:s, s:s, s:s}", "type", "approval", "state", "withdrawn",
			       "reason", s->cur->decision.reason));
	refuse_current(s);
}

void dg_gw_runner_pause(struct gw_session *s)
{
	/* A takeover does not wait for an agent's action to be approved: it
	 * could otherwise run under the operator's hands. */
	if (!s->cur || !s->appr.pending || s->cur->human[0])
		return;
	paused(s, s->cur);
	withdraw_approval(s);
}

void dg_gw_runner_end(struct gw_session *s, const char *reason)
{
	if (s->cur) {
		struct request *r = s->cur;
		s->cur = NULL;
		char why[DG_ERR_MAX + 64];
		snprintf(why, sizeof(why), "the session ended: %s", reason);
		record_action(s, r, NULL, why);
		r->failed = true;
		free(r->error);
		r->error = strdup(why);
		if (r->agent)
			answer(s, r);
		dg_gw_request_free(r);
	}
	for (struct request *r = s->queue, *n; r; r = n) {
		n = r->next;
		char why[DG_ERR_MAX + 64];
		snprintf(why, sizeof(why), "not run: the session ended: %s", reason);
		r->failed = true;
		free(r->error);
		r->error = strdup(why);
		if (r->agent)
			answer(s, r);
		dg_gw_request_free(r);
	}
	s->queue = s->queue_tail = NULL;
	s->queued = 0;
	dg_gw_approval_clear(s);
}
