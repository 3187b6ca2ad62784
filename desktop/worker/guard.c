/* The browser layer of the policy: see guard-priv.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/proto/proto.h"
#include "desktop/worker/guard-priv.h"
#include "desktop/worker/pagelog-priv.h"

struct target {
	bool used;
	/* The last tab probe's answer (dg_guard_probe_tabs), pages only. */
	bool probe_wait, visible, focused;
	unsigned gen;            /* bumped at each reuse: stale callbacks are ignored */
	char session[DG_CDP_ID_MAX + 1];
	char id[DG_CDP_ID_MAX + 1]; /* targetId: a page's main frame has the same id */
	char type[DG_GUARD_TYPE_MAX + 1];
	int setup_pending;       /* setup commands not answered yet */
	int required_pending;    /* ... of which the target must wait for: a page
				  * opened by the browser itself (a noopener link's
				  * tab) answers Page.enable only once it runs */
	bool counted;            /* set up: counted in st.targets */
	bool failed;             /* a required setup command failed: never resumed */
	bool waiting;            /* the browser holds it for us */
};

/* A request held by the browser-level Fetch domain (no session). */
struct paused {
	bool used;
	uint64_t req;
	char request_id[DG_CDP_ID_MAX + 1];
};

/* Completion context of one setup command. */
struct setup_ref {
	struct dg_guard *g;
	int target;
	unsigned gen;
	bool required;
	const char *what;
};

/* Completion context of one probe command. */
struct probe_ref {
	struct dg_guard *g;
	int target;
	unsigned gen;
	unsigned probe;
};

struct dg_guard {
	struct dg_cdp *cdp;
	/* The tab probe in flight: its number, answers awaited, the caller. */
	unsigned probe_no;
	int probe_left;
	dg_guard_tabs_fn probe_done;
	void *probe_arg;
	dg_guard_emit_fn emit;
	void *emit_arg;
	struct target targets[DG_GUARD_TARGETS_MAX];
	struct paused paused[DG_GUARD_PAUSED_MAX];
	int n_paused;
	uint64_t next_req;
	unsigned next_gen;
	struct dg_pagelog *log;  /* page logs to turn on at attach, or NULL */
	int browser_pending;     /* browser-level setup commands not answered yet */
	bool browser_failed;     /* one of them failed: nothing is held */
	struct dg_guard_stats st;
};

/* A string from the browser we may keep: printable ASCII, at most max bytes. */
static bool short_text(const json_t *v, size_t max)
{
	if (!json_is_string(v))
		return false;
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (n == 0 || n > max || strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	}
	return true;
}

static void emit_json(struct dg_guard *g, uint32_t type, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (s)
		g->emit(g->emit_arg, type, s);
	free(s);
	json_decref(j);
}

/* Tells the owner something the guard did on its own (for the recordings). */
static void report(struct dg_guard *g, const char *kind, const char *verdict, const char *reason,
		   const char *url)
{
	json_t *ev = json_pack("{s:s, s:s, s:s, s:s, s:s}", "event", "guard", "kind", kind, "verdict",
			       verdict, "rule", "browser", "reason", reason);
	if (ev && url)
		json_object_set_new(ev, "url", json_string(url));
	emit_json(g, DG_MSG_EVENT, ev);
}

struct dg_guard *dg_guard_new(struct dg_cdp *c, dg_guard_emit_fn emit, void *arg)
{
	struct dg_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->cdp = c;
	g->emit = emit;
	g->emit_arg = arg;
	g->next_req = 1;
	return g;
}

void dg_guard_free(struct dg_guard *g)
{
	free(g);
}

static json_t *auto_attach_params(void)
{
	return json_pack("{s:b, s:b, s:b}", "autoAttach", 1, "waitForDebuggerOnStart", 1, "flatten", 1);
}

static void browser_setup_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result;
	(void)error_message;
	struct dg_guard *g = arg;
	if (status == -ECANCELED)
		return;
	g->browser_pending--;
	if (status != 0)
		g->browser_failed = true;
}

int dg_guard_start(struct dg_guard *g, struct dg_err *err)
{
	int r = dg_cdp_send(g->cdp, "Browser.setDownloadBehavior",
			    json_pack("{s:s, s:b}", "behavior", "deny", "eventsEnabled", 1), NULL, NULL,
			    NULL, err);
	if (r)
		return r;
	/* One interceptor at the browser target sees every request of every
	 * target, also those that start before any session exists for them:
	 * a tab the browser opens with its URL already loading (the omnibox's
	 * alt+Enter, shift+Enter, session restore) sends its first request
	 * before its target is announced, so a per-session Fetch.enable came
	 * too late for it (measured with Chromium 156). Per session it would
	 * pause each request a second time. */
	r = dg_cdp_send(g->cdp, "Fetch.enable",
			json_pack("{s:[{s:s, s:s}]}", "patterns", "urlPattern", "*", "requestStage",
				  "Request"),
			NULL, browser_setup_done, g, err);
	if (r)
		return r;
	g->browser_pending++;
	return dg_cdp_send(g->cdp, "Target.setAutoAttach", auto_attach_params(), NULL, NULL, NULL, err);
}

static int target_find(struct dg_guard *g, const char *session)
{
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++) {
		if (g->targets[i].used && strcmp(g->targets[i].session, session) == 0)
			return i;
	}
	return -1;
}

static void maybe_resume(struct dg_guard *g, int i)
{
	struct target *t = &g->targets[i];
	if (t->required_pending > 0 || t->failed || t->counted)
		return;
	t->counted = true;
	g->st.targets++;
	if (!t->waiting)
		return;
	t->waiting = false;
	dg_cdp_send(g->cdp, "Runtime.runIfWaitingForDebugger", NULL, t->session, NULL, NULL, NULL);
}

static void setup_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result;
	struct setup_ref *ref = arg;
	struct dg_guard *g = ref->g;
	if (status == -ECANCELED || !g) {
		free(ref);
		return;
	}
	struct target *t = &g->targets[ref->target];
	if (t->used && t->gen == ref->gen) {
		t->setup_pending--;
		if (ref->required)
			t->required_pending--;
		if (status != 0 && ref->required && !t->failed) {
			t->failed = true;
			g->st.targets_frozen++;
			char why[DG_ERR_MAX];
			snprintf(why, sizeof(why), "a %s target stays frozen: %s failed (%s)", t->type,
				 ref->what, error_message ? error_message : strerror(-status));
			report(g, "target", "deny", why, NULL);
		}
		maybe_resume(g, ref->target);
	}
	free(ref);
}

static void setup_cmd(struct dg_guard *g, int i, const char *method, json_t *params, bool required)
{
	struct target *t = &g->targets[i];
	struct setup_ref *ref = malloc(sizeof(*ref));
	if (!ref) {
		json_decref(params);
		t->failed = t->failed || required;
		return;
	}
	*ref = (struct setup_ref){g, i, t->gen, required, method};
	struct dg_err err = {{0}};
	if (dg_cdp_send(g->cdp, method, params, t->session, setup_done, ref, &err) != 0) {
		free(ref);
		if (required && !t->failed) {
			t->failed = true;
			g->st.targets_frozen++;
			report(g, "target", "deny", "a target stays frozen: its setup could not be sent",
			       NULL);
		}
		return;
	}
	t->setup_pending++;
	if (required)
		t->required_pending++;
}

static bool type_is(const char *type, const char *const *list)
{
	for (; *list; list++) {
		if (strcmp(type, *list) == 0)
			return true;
	}
	return false;
}

/* ---- page logs (pagelog-priv.h): their domains are part of a target's
 * setup, so that the target runs only once they are on. ---- */
struct log_ref {
	struct dg_guard *g;
	int target;
};

static void log_setup(void *arg, const char *method, json_t *params)
{
	struct log_ref *r = arg;
	setup_cmd(r->g, r->target, method, params, false);
}

void dg_guard_set_pagelog(struct dg_guard *g, struct dg_pagelog *log)
{
	g->log = log;
}

/* Target.attachedToTarget (on parent: NULL at the browser): a new session,
 * held until set up. */
static void on_attached(struct dg_guard *g, const char *parent, json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	json_t *info = json_object_get(params, "targetInfo");
	json_t *type = json_object_get(info, "type");
	if (!short_text(sid, DG_CDP_ID_MAX) || !short_text(type, DG_GUARD_TYPE_MAX)) {
		report(g, "target", "deny", "Target.attachedToTarget without a usable sessionId or type",
		       NULL);
		return;
	}
	int i = target_find(g, json_string_value(sid));
	if (i >= 0)
		return; /* told twice: already set up */
	for (int k = 0; k < DG_GUARD_TARGETS_MAX && i < 0; k++) {
		if (!g->targets[k].used)
			i = k;
	}
	if (i < 0) {
		g->st.targets_frozen++;
		report(g, "target", "deny", "too many targets: a new one stays frozen", NULL);
		return;
	}
	struct target *t = &g->targets[i];
	memset(t, 0, sizeof(*t));
	t->used = true;
	t->gen = ++g->next_gen;
	snprintf(t->session, sizeof(t->session), "%s", json_string_value(sid));
	snprintf(t->type, sizeof(t->type), "%s", json_string_value(type));
	json_t *tid = json_object_get(info, "targetId");
	if (short_text(tid, DG_CDP_ID_MAX))
		snprintf(t->id, sizeof(t->id), "%s", json_string_value(tid));
	t->waiting = json_is_true(json_object_get(params, "waitingForDebugger"));
	static const char *const parents[] = {"page", "iframe", "worker", "shared_worker",
					      "service_worker", NULL};
	static const char *const pages[] = {"page", "iframe", NULL};
	if (type_is(t->type, parents)) {
		/* Children (iframes in other processes, workers) attach through
		 * their parent's session. Their requests are held at the
		 * browser (dg_guard_start). */
		setup_cmd(g, i, "Target.setAutoAttach", auto_attach_params(), strcmp(t->type, "page") == 0 ||
										    strcmp(t->type, "iframe") == 0);
	}
	if (type_is(t->type, pages)) {
		setup_cmd(g, i, "Page.enable", NULL, false);
		setup_cmd(g, i, "Page.setInterceptFileChooserDialog", json_pack("{s:b}", "enabled", 1),
			  false);
	}
	if (g->log)
		dg_pagelog_attached(g->log, parent, t->session, t->id, t->type, log_setup,
				    &(struct log_ref){g, i});
	maybe_resume(g, i);
}

static void drop_paused(struct dg_guard *g, int k)
{
	g->paused[k].used = false;
	g->n_paused--;
}

/* A request of a closed target stays in the table until its verdict,
 * which the browser then ignores (the table is bounded either way). */
static void on_detached(struct dg_guard *g, json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	if (!short_text(sid, DG_CDP_ID_MAX))
		return;
	int i = target_find(g, json_string_value(sid));
	if (i >= 0)
		g->targets[i].used = false;
}

/* The type of the target whose frame made a request, when the frame is a
 * target's main frame (pages, out-of-process iframes); "frame" for another
 * frame, "other" without one (workers, the browser itself). For the
 * recordings only: nothing is decided on it. */
static const char *request_target(const struct dg_guard *g, json_t *frame)
{
	if (!short_text(frame, DG_CDP_ID_MAX))
		return "other";
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++) {
		if (g->targets[i].used && strcmp(g->targets[i].id, json_string_value(frame)) == 0)
			return g->targets[i].type;
	}
	return "frame";
}

static void fail_request(struct dg_guard *g, const char *session, const char *request_id)
{
	dg_cdp_send(g->cdp, "Fetch.failRequest",
		    json_pack("{s:s, s:s}", "requestId", request_id, "errorReason", "BlockedByClient"),
		    session, NULL, NULL, NULL);
}

/* Fetch.requestPaused of the browser-level interceptor (session NULL). One
 * on a session is not the guard's (it enables Fetch at the browser only):
 * failed at once. */
static void on_paused(struct dg_guard *g, const char *session, json_t *params)
{
	json_t *rid = json_object_get(params, "requestId");
	json_t *req = json_object_get(params, "request");
	json_t *url = json_object_get(req, "url");
	json_t *method = json_object_get(req, "method");
	json_t *rtype = json_object_get(params, "resourceType");
	if (!short_text(rid, DG_CDP_ID_MAX))
		return; /* nothing to answer with: the request stays paused */
	g->st.requests++;
	const char *why = NULL;
	if (session)
		why = "a request paused on a session, where the guard holds none";
	else if (!json_is_string(url) || json_string_length(url) > DG_GUARD_URL_MAX)
		why = "a request URL longer than 8192 bytes";
	else if (strlen(json_string_value(url)) != json_string_length(url))
		why = "a request URL with a NUL byte";
	else if (g->n_paused >= DG_GUARD_PAUSED_MAX)
		why = "too many requests waiting for a verdict";
	if (why) {
		g->st.refused_locally++;
		g->st.blocked++;
		fail_request(g, session, json_string_value(rid));
		report(g, "request", "deny", why, NULL);
		return;
	}
	int k = 0;
	while (g->paused[k].used)
		k++;
	struct paused *p = &g->paused[k];
	p->used = true;
	p->req = g->next_req++;
	snprintf(p->request_id, sizeof(p->request_id), "%s", json_string_value(rid));
	g->n_paused++;
	json_t *m = json_pack("{s:I, s:s, s:s, s:s, s:s}", "req", (json_int_t)p->req, "url",
			      json_string_value(url), "method",
			      short_text(method, DG_GUARD_METHOD_MAX) ? json_string_value(method) : "?",
			      "resource",
			      short_text(rtype, DG_GUARD_TYPE_MAX) ? json_string_value(rtype) : "Other",
			      "target", request_target(g, json_object_get(params, "frameId")));
	emit_json(g, DG_MSG_REQUEST, m);
}

void dg_guard_event(struct dg_guard *g, const char *method, const char *session, json_t *params)
{
	if (strcmp(method, "Target.attachedToTarget") == 0) {
		on_attached(g, session, params);
	} else if (strcmp(method, "Target.detachedFromTarget") == 0) {
		on_detached(g, params);
	} else if (strcmp(method, "Fetch.requestPaused") == 0) {
		on_paused(g, session, params);
	} else if (strcmp(method, "Browser.downloadWillBegin") == 0) {
		g->st.downloads++;
		json_t *url = json_object_get(params, "url");
		report(g, "download", "deny", "downloads are denied",
		       json_is_string(url) && json_string_length(url) <= DG_GUARD_URL_MAX ?
			       json_string_value(url) : NULL);
	} else if (strcmp(method, "Page.fileChooserOpened") == 0) {
		g->st.file_choosers++;
		report(g, "file_chooser", "deny", "file choosers are intercepted and never shown", NULL);
	}
}

int dg_guard_verdict(struct dg_guard *g, const char *text, size_t len, struct dg_err *err)
{
	json_t *m = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *req = json_object_get(m, "req"), *allow = json_object_get(m, "allow");
	if (!json_is_object(m) || !json_is_integer(req) || !json_is_boolean(allow)) {
		json_decref(m);
		return dg_err_set(err, -EPROTO, "guard: malformed verdict");
	}
	uint64_t n = (uint64_t)json_integer_value(req);
	bool ok = json_is_true(allow);
	json_decref(m);
	for (int k = 0; k < DG_GUARD_PAUSED_MAX; k++) {
		struct paused *p = &g->paused[k];
		if (!p->used || p->req != n)
			continue;
		if (ok)
			dg_cdp_send(g->cdp, "Fetch.continueRequest",
				    json_pack("{s:s}", "requestId", p->request_id), NULL, NULL, NULL,
				    NULL);
		else
			fail_request(g, NULL, p->request_id);
		if (ok)
			g->st.allowed++;
		else
			g->st.blocked++;
		drop_paused(g, k);
		return 0;
	}
	g->st.stale_verdicts++;
	return 0;
}

bool dg_guard_failed(const struct dg_guard *g)
{
	return g->browser_failed;
}

/* ---- which tab is in front ---- */

/* Whether targets[i] is a page the probe asks: attached, not frozen, and
 * the first session on its target (a target has several when another
 * client, the DevTools client's own attach, took one too: each is
 * announced to the guard). */
static bool probe_page(const struct dg_guard *g, int i)
{
	const struct target *t = &g->targets[i];
	if (!t->used || t->failed || strcmp(t->type, "page") != 0 || !t->id[0])
		return false;
	for (int k = 0; k < i; k++) {
		const struct target *o = &g->targets[k];
		if (o->used && !o->failed && strcmp(o->id, t->id) == 0)
			return false;
	}
	return true;
}

int dg_guard_n_pages(const struct dg_guard *g)
{
	int n = 0;
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++)
		n += probe_page(g, i);
	return n;
}

/* The probe is over: the page in front is the visible one that has focus;
 * failing that, the only visible one. */
static void probe_finish(struct dg_guard *g)
{
	int focused = -1, visible = -1, n_visible = 0;
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++) {
		struct target *t = &g->targets[i];
		if (!probe_page(g, i) || !t->visible)
			continue;
		n_visible++;
		visible = i;
		if (t->focused && focused < 0)
			focused = i;
	}
	int front = focused >= 0 ? focused : n_visible == 1 ? visible : -1;
	dg_guard_tabs_fn fn = g->probe_done;
	g->probe_done = NULL;
	g->probe_left = 0;
	if (fn)
		fn(g->probe_arg, front >= 0 ? g->targets[front].id : NULL);
}

static void probe_answered(struct dg_guard *g, struct probe_ref *ref)
{
	struct target *t = &g->targets[ref->target];
	if (t->used && t->gen == ref->gen)
		t->probe_wait = false;
	if (ref->probe == g->probe_no && g->probe_left > 0 && --g->probe_left == 0)
		probe_finish(g);
}

/* The answer of document.visibilityState and document.hasFocus(), read in
 * the world created for it, where page scripts cannot redefine them. */
static void probe_value(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct probe_ref *ref = arg;
	if (status != -ECANCELED) {
		struct target *t = &ref->g->targets[ref->target];
		const char *v = json_string_value(
			json_object_get(json_object_get(result, "result"), "value"));
		if (status == 0 && v && t->used && t->gen == ref->gen) {
			size_t n = strlen(v);
			t->visible = strncmp(v, "visible ", 8) == 0;
			t->focused = n >= 5 && strcmp(v + n - 5, " true") == 0;
		}
		probe_answered(ref->g, ref);
	}
	free(ref);
}

static void probe_world(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct probe_ref *ref = arg;
	if (status == -ECANCELED) {
		free(ref);
		return;
	}
	struct dg_guard *g = ref->g;
	struct target *t = &g->targets[ref->target];
	json_t *ctx = json_object_get(result, "executionContextId");
	if (status == 0 && json_is_integer(ctx) && t->used && t->gen == ref->gen &&
	    ref->probe == g->probe_no) {
		json_t *params = json_pack("{s:s, s:I, s:b}", "expression",
					   "document.visibilityState + ' ' + document.hasFocus()",
					   "contextId", json_integer_value(ctx), "returnByValue", 1);
		if (dg_cdp_send(g->cdp, "Runtime.evaluate", params, t->session, probe_value, ref,
				NULL) == 0)
			return;
	}
	probe_answered(g, ref);
	free(ref);
}

int dg_guard_probe_tabs(struct dg_guard *g, dg_guard_tabs_fn done, void *arg, struct dg_err *err)
{
	if (g->probe_done)
		return dg_err_set(err, -EBUSY, "guard: a tab probe is in flight");
	g->probe_no++;
	g->probe_left = 1; /* held until every command is sent */
	g->probe_done = done;
	g->probe_arg = arg;
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++) {
		struct target *t = &g->targets[i];
		t->visible = t->focused = false;
		if (!probe_page(g, i))
			continue;
		struct probe_ref *ref = malloc(sizeof(*ref));
		if (!ref)
			continue;
		*ref = (struct probe_ref){g, i, t->gen, g->probe_no};
		json_t *params = json_pack("{s:s, s:s, s:b}", "frameId", t->id, "worldName",
					   "deskgate-tab-probe", "grantUniveralAccess", 0);
		if (dg_cdp_send(g->cdp, "Page.createIsolatedWorld", params, t->session, probe_world,
				ref, NULL) != 0) {
			free(ref);
			continue;
		}
		t->probe_wait = true;
		g->probe_left++;
	}
	if (--g->probe_left == 0)
		probe_finish(g);
	return 0;
}

int dg_guard_pending_setups(const struct dg_guard *g)
{
	int n = g->browser_pending;
	for (int i = 0; i < DG_GUARD_TARGETS_MAX; i++) {
		if (g->targets[i].used && !g->targets[i].failed)
			n += g->targets[i].setup_pending;
	}
	return n;
}

int dg_guard_n_paused(const struct dg_guard *g)
{
	return g->n_paused;
}

void dg_guard_stats(const struct dg_guard *g, struct dg_guard_stats *s)
{
	*s = g->st;
}
