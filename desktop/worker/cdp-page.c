/* cdp: the DevTools client's page state (cdp-int-priv.h), on top of the
 * pipe client in cdp.c: a fixed table of page targets (id, URL, title,
 * creation order) kept from the Target.* events, the current page (the most
 * recently created page target still tracked, or the one dg_cdp_switch
 * asked for) with its flattened session and generation, its loads from the
 * Page.* events and its title refreshes, the completion of every command by
 * kind, and the page commands. See cdp-priv.h for the contract.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/worker/cdp-int-priv.h"

/* ---- targets ---- */

void dg_cdp_target_clear(struct target *t)
{
	free(t->url);
	free(t->title);
	memset(t, 0, sizeof(*t));
}

static int target_find(struct dg_cdp *c, const char *id)
{
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++)
		if (c->targets[i].used && strcmp(c->targets[i].id, id) == 0)
			return i;
	return -1;
}

/* The URL kept for a page: itself, or "" when longer than DG_CDP_URL_MAX or
 * holding control bytes (see cdp-priv.h: never cut). */
static char *keep_url(struct dg_cdp *c, const json_t *v)
{
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	bool ok = n <= DG_CDP_URL_MAX;
	for (size_t i = 0; ok && i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			ok = false;
	if (!ok) {
		dg_cdp_set_last_error(
			c, "page URL refused (%zu bytes, or control bytes): reported as unknown", n);
		return strdup("");
	}
	return strdup(s);
}

/* The title kept: cut to DG_CDP_TITLE_MAX bytes at a character boundary
 * (jansson has checked it is UTF-8), control bytes as spaces. */
static char *keep_title(const json_t *v)
{
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (n > DG_CDP_TITLE_MAX) {
		n = DG_CDP_TITLE_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	char *t = malloc(n + 1);
	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i++)
		t[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? ' ' : s[i];
	t[n] = '\0';
	return t;
}

/* Picks and attaches the next current page when there is none (rule in
 * cdp-priv.h: the most recently created page target still tracked). */
static void maybe_attach(struct dg_cdp *c)
{
	if (c->closed || !c->started || c->cur >= 0 || c->attaching)
		return;
	int best = -1;
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++) {
		struct target *t = &c->targets[i];
		if (t->used && !t->attach_failed && (best < 0 || t->seq > c->targets[best].seq))
			best = i;
	}
	int want = c->prefer[0] ? target_find(c, c->prefer) : -1;
	c->prefer[0] = '\0';
	if (want >= 0 && !c->targets[want].attach_failed)
		best = want;
	if (best < 0)
		return;
	struct dg_err e;
	json_t *params = json_pack("{sssb}", "targetId", c->targets[best].id, "flatten", 1);
	int r = dg_cdp_send_cmd(c, K_ATTACH, "Target.attachToTarget", params, NULL, 0,
				c->targets[best].id, NULL, NULL, &e);
	if (r == 0)
		c->attaching = true;
	else /* retried at the next target event */
		dg_cdp_set_last_error(c, "%s", e.msg);
}

/* Asks the browser for the current page's URL and title (see info_inflight).
 * for_load: the page's load is not over until the answer is in. */
static void request_info(struct dg_cdp *c, bool for_load)
{
	if (c->closed || c->cur < 0)
		return;
	c->load_refresh |= for_load;
	if (c->info_inflight) {
		c->info_again = true;
		return;
	}
	struct dg_err e;
	int r = dg_cdp_send_cmd(c, K_INFO, "Target.getTargetInfo",
				json_pack("{ss}", "targetId", c->targets[c->cur].id), NULL,
				c->page_gen, NULL, NULL, NULL, &e);
	if (r == 0) {
		c->info_inflight = true;
	} else { /* never leave the page "loading" for a refresh that cannot run */
		c->load_refresh = false;
		dg_cdp_set_last_error(c, "%s", e.msg);
	}
}

/* The current page's session is gone (its target destroyed, its session
 * detached): commands on it fail, and another page is picked. */
static void page_gone(struct dg_cdp *c, const char *why)
{
	uint64_t gen = c->page_gen;
	c->cur = -1;
	c->session[0] = c->main_frame[0] = '\0';
	c->ready = c->frame_loading = false;
	c->nav_inflight = 0;
	c->info_inflight = c->info_again = c->load_refresh = false;
	c->changes++;
	c->page_gen++; /* late replies of the old session no longer count */
	dg_cdp_fail_pending(c, c->next_id - 1, gen, true, -ECONNRESET, why);
	maybe_attach(c);
}

/* Target.targetCreated / targetInfoChanged: params.targetInfo. */
static bool on_target_info(struct dg_cdp *c, json_t *params, bool created)
{
	json_t *info = json_object_get(params, "targetInfo");
	json_t *id = json_object_get(info, "targetId"), *type = json_object_get(info, "type");
	json_t *url = json_object_get(info, "url"), *title = json_object_get(info, "title");
	if (!json_is_object(info) || !dg_cdp_valid_id(id) || !json_is_string(type) ||
	    !json_is_string(url) || !json_is_string(title)) {
		dg_cdp_refuse(c, "targetInfo without targetId, type, url and title strings");
		return false;
	}
	if (strcmp(json_string_value(type), "page") != 0)
		return true; /* only pages are tracked: frames and workers cannot crowd them out */
	int i = target_find(c, json_string_value(id));
	if (i < 0) {
		if (!created)
			return true; /* a page we never saw (the table was full): stays untracked */
		for (i = 0; i < DG_CDP_TARGETS_MAX && c->targets[i].used; i++)
			;
		if (i == DG_CDP_TARGETS_MAX) {
			c->stats.targets_dropped++;
			dg_cdp_set_last_error(c, "page target not tracked: %d already",
					      DG_CDP_TARGETS_MAX);
			return true;
		}
		struct target *t = &c->targets[i];
		snprintf(t->id, sizeof(t->id), "%s", json_string_value(id));
		t->seq = ++c->target_seq;
		t->used = true;
		c->n_targets++;
	}
	struct target *t = &c->targets[i];
	char *u = keep_url(c, url), *ti = keep_title(title);
	if (!u || !ti) {
		free(u);
		free(ti);
		dg_cdp_set_last_error(c, "out of memory");
		return true;
	}
	bool changed = !t->url || strcmp(t->url, u) != 0 || strcmp(t->title, ti) != 0;
	free(t->url);
	free(t->title);
	t->url = u;
	t->title = ti;
	if (changed && i == c->cur)
		c->changes++;
	maybe_attach(c);
	return true;
}

static bool on_target_destroyed(struct dg_cdp *c, json_t *params)
{
	json_t *id = json_object_get(params, "targetId");
	if (!dg_cdp_valid_id(id)) {
		dg_cdp_refuse(c, "Target.targetDestroyed without a targetId");
		return false;
	}
	int i = target_find(c, json_string_value(id));
	if (i < 0)
		return true;
	dg_cdp_target_clear(&c->targets[i]);
	c->n_targets--;
	if (i == c->cur)
		page_gone(c, "the page was closed");
	else
		maybe_attach(c);
	return true;
}

static bool on_detached(struct dg_cdp *c, json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	if (!dg_cdp_valid_id(sid)) {
		dg_cdp_refuse(c, "Target.detachedFromTarget without a sessionId");
		return false;
	}
	if (c->cur >= 0 && strcmp(c->session, json_string_value(sid)) == 0)
		page_gone(c, "the page session was detached");
	return true;
}

/* Page.frameStartedLoading / frameStoppedLoading / frameNavigated /
 * navigatedWithinDocument on the current page's session. The end of a load
 * is the main frame's frameStoppedLoading, which Chromium sends right after
 * Page.loadEventFired (measured: 0.1-2 ms): ending it at loadEventFired as
 * well would open a window in which the page reads as loaded while its
 * title is not read yet. */
static bool on_page_event(struct dg_cdp *c, const char *method, json_t *params)
{
	if (strcmp(method, "Page.frameNavigated") == 0) {
		json_t *frame = json_object_get(params, "frame");
		json_t *id = json_object_get(frame, "id");
		if (!json_is_object(frame) || !dg_cdp_valid_id(id)) {
			dg_cdp_refuse(c, "Page.frameNavigated without frame.id");
			return false;
		}
		/* The main frame has no parent; its id is the target's in Chromium,
		 * but follow what the browser says. */
		if (!json_object_get(frame, "parentId"))
			snprintf(c->main_frame, sizeof(c->main_frame), "%s", json_string_value(id));
		return true;
	}
	bool start = strcmp(method, "Page.frameStartedLoading") == 0;
	bool stop = strcmp(method, "Page.frameStoppedLoading") == 0;
	bool within = strcmp(method, "Page.navigatedWithinDocument") == 0;
	if (!start && !stop && !within)
		return true;
	json_t *id = json_object_get(params, "frameId");
	if (!dg_cdp_valid_id(id)) {
		dg_cdp_refuse(c, "%s without a frameId", method);
		return false;
	}
	if (strcmp(json_string_value(id), c->main_frame) != 0)
		return true;
	if (within) { /* history.pushState, #fragment: a new URL, no load */
		request_info(c, false);
		return true;
	}
	c->frame_loading = start;
	if (stop) {
		c->loads++;
		request_info(c, true);
	}
	return true;
}

/* Target.* events of the browser session, Page.* of the current page's. */
bool dg_cdp_on_browser_event(struct dg_cdp *c, const char *method, const char *session,
			     json_t *params)
{
	bool ok = true;
	if (!session) {
		if (strcmp(method, "Target.targetCreated") == 0)
			ok = on_target_info(c, params, true);
		else if (strcmp(method, "Target.targetInfoChanged") == 0)
			ok = on_target_info(c, params, false);
		else if (strcmp(method, "Target.targetDestroyed") == 0)
			ok = on_target_destroyed(c, params);
		else if (strcmp(method, "Target.detachedFromTarget") == 0)
			ok = on_detached(c, params);
	} else if (c->cur >= 0 && strcmp(session, c->session) == 0 &&
		   strncmp(method, "Page.", 5) == 0) {
		ok = on_page_event(c, method, params);
	}
	return ok;
}

/* ---- completions ---- */

/* A page-bound navigation command ended: the in-flight count drops, but only
 * for the session that is still current (page_gone reset it for others). */
static void nav_done(struct dg_cdp *c, const struct pending *p)
{
	if (p->page_gen == c->page_gen && c->nav_inflight > 0)
		c->nav_inflight--;
}

static void call_done(const struct pending *p, int status, json_t *result, const char *msg)
{
	if (p->done)
		p->done(p->arg, status, result, status == 0 ? NULL : (msg ? msg : "error"));
}

/* Back/forward, second step: the entry before/after the current one. */
static void history_step(struct dg_cdp *c, const struct pending *p, json_t *result)
{
	bool back = p->kind == K_HIST_BACK;
	json_t *cur = json_object_get(result, "currentIndex");
	json_t *entries = json_object_get(result, "entries");
	if (!json_is_integer(cur) || !json_is_array(entries) || json_integer_value(cur) < 0 ||
	    (size_t)json_integer_value(cur) >= json_array_size(entries)) {
		c->stats.errors++;
		call_done(p, -EPROTO, NULL, "malformed navigation history");
		return;
	}
	json_int_t want = json_integer_value(cur) + (back ? -1 : 1);
	if (want < 0 || (size_t)want >= json_array_size(entries)) {
		call_done(p, -ENOENT, NULL, back ? "no previous page" : "no next page");
		return;
	}
	json_t *entry_id = json_object_get(json_array_get(entries, (size_t)want), "id");
	if (!json_is_integer(entry_id)) {
		c->stats.errors++;
		call_done(p, -EPROTO, NULL, "malformed navigation history entry");
		return;
	}
	if (p->page_gen != c->page_gen || !c->ready) {
		call_done(p, -ECONNRESET, NULL, "the page went away");
		return;
	}
	struct dg_err e;
	int r = dg_cdp_send_cmd(c, K_HIST_GO, "Page.navigateToHistoryEntry",
				json_pack("{sI}", "entryId", json_integer_value(entry_id)),
				c->session, c->page_gen, NULL, p->done, p->arg, &e);
	if (r != 0)
		call_done(p, r, NULL, e.msg);
	else
		c->nav_inflight++;
}

static void attach_done(struct dg_cdp *c, const struct pending *p, int status, json_t *result)
{
	if (c->closed || status == -ECANCELED)
		return;
	c->attaching = false;
	int i = target_find(c, p->target);
	json_t *sid = json_object_get(result, "sessionId");
	if (status != 0 || !dg_cdp_valid_id(sid)) {
		if (status == 0)
			dg_cdp_refuse(c, "Target.attachToTarget reply without a sessionId");
		if (i >= 0)
			c->targets[i].attach_failed = true;
		maybe_attach(c);
		return;
	}
	if (i < 0) { /* destroyed meanwhile; its session detaches by itself */
		maybe_attach(c);
		return;
	}
	c->cur = i;
	c->page_gen++;
	snprintf(c->session, sizeof(c->session), "%s", json_string_value(sid));
	snprintf(c->main_frame, sizeof(c->main_frame), "%s", c->targets[i].id);
	c->ready = c->frame_loading = false;
	c->nav_inflight = 0;
	c->changes++;
	struct dg_err e;
	if (dg_cdp_send_cmd(c, K_PAGE_ENABLE, "Page.enable", NULL, c->session, c->page_gen, NULL,
			    NULL, NULL, &e) != 0) {
		dg_cdp_set_last_error(c, "%s", e.msg);
		c->targets[i].attach_failed = true;
		page_gone(c, e.msg);
	}
}

/* A reply to Target.getTargetInfo: the target's info, as in the events. */
static bool apply_info(struct dg_cdp *c, const struct pending *p, json_t *result)
{
	json_t *id = json_object_get(json_object_get(result, "targetInfo"), "targetId");
	if (!json_is_string(id) || c->cur < 0 ||
	    strcmp(json_string_value(id), c->targets[c->cur].id) != 0 || p->page_gen != c->page_gen) {
		dg_cdp_refuse(c, "Target.getTargetInfo answered for another target");
		return false;
	}
	return on_target_info(c, result, false);
}

void dg_cdp_finish(struct dg_cdp *c, struct pending p, int status, json_t *result,
		   const char *msg)
{
	char text[DG_CDP_ERRTEXT_MAX + 1];
	/* A script may have set the title; a navigation that failed may load
	 * nothing that would refresh it. Successful navigations refresh at their
	 * load (frameStoppedLoading), one round trip instead of two. */
	bool failed = status != 0 || json_is_string(json_object_get(result, "errorText"));
	if ((p.kind == K_EVALUATE ||
	     (failed && (p.kind == K_NAVIGATE || p.kind == K_RELOAD || p.kind == K_HIST_GO))) &&
	    p.page_gen == c->page_gen && !c->closed)
		request_info(c, false);
	switch (p.kind) {
	case K_USER:
	case K_RAW:
		call_done(&p, status, result, msg);
		return;
	case K_NAVIGATE:
		nav_done(c, &p);
		if (status == 0) {
			json_t *et = json_object_get(result, "errorText");
			if (json_is_string(et) && json_string_length(et) > 0) {
				dg_cdp_show(json_string_value(et), text);
				call_done(&p, -EREMOTEIO, result, text);
				return;
			}
		}
		call_done(&p, status, result, msg);
		return;
	case K_RELOAD:
	case K_HIST_GO:
		nav_done(c, &p);
		call_done(&p, status, result, msg);
		return;
	case K_HIST_BACK:
	case K_HIST_FORWARD:
		if (status != 0)
			call_done(&p, status, result, msg);
		else
			history_step(c, &p, result);
		return;
	case K_EVALUATE: {
		if (status != 0) {
			call_done(&p, status, result, msg);
			return;
		}
		json_t *exc = json_object_get(result, "exceptionDetails");
		if (exc) {
			json_t *d = json_object_get(json_object_get(exc, "exception"), "description");
			if (!json_is_string(d))
				d = json_object_get(exc, "text");
			dg_cdp_show(json_is_string(d) ? json_string_value(d) : "exception", text);
			call_done(&p, -EREMOTEIO, result, text);
			return;
		}
		json_t *obj = json_object_get(result, "result");
		if (!json_is_object(obj)) {
			c->stats.errors++;
			call_done(&p, -EPROTO, NULL, "Runtime.evaluate reply without a result object");
			return;
		}
		call_done(&p, 0, obj, NULL);
		return;
	}
	case K_DISCOVER:
		if (status == 0)
			maybe_attach(c);
		else if (status != -EPIPE && status != -ECANCELED)
			dg_cdp_call_start_done(c, status, msg);
		return;
	case K_ATTACH:
		attach_done(c, &p, status, result);
		return;
	case K_INFO:
		if (p.page_gen != c->page_gen || c->closed)
			return; /* page_gone/close_all reset the refresh state */
		c->info_inflight = false;
		if (status == 0)
			apply_info(c, &p, result);
		if (c->info_again) {
			c->info_again = false;
			request_info(c, false);
		} else {
			c->load_refresh = false;
		}
		return;
	case K_REFRESH:
		if (status == 0 && !apply_info(c, &p, result)) {
			call_done(&p, -EPROTO, NULL, "malformed Target.getTargetInfo reply");
			return;
		}
		call_done(&p, status, status == 0 ? json_object_get(result, "targetInfo") : NULL, msg);
		return;
	case K_PAGE_ENABLE:
		if (p.page_gen != c->page_gen || c->closed)
			return;
		if (status != 0) {
			dg_cdp_set_last_error(c, "Page.enable failed: %s", msg ? msg : "");
			if (c->cur >= 0)
				c->targets[c->cur].attach_failed = true;
			page_gone(c, "Page.enable failed");
			return;
		}
		c->ready = true;
		request_info(c, false); /* the info at attach time may be old */
		dg_cdp_call_start_done(c, 0, NULL);
		return;
	}
}

/* Page commands: on the current session, bound to its generation so that
 * they fail with -ECONNRESET when the page goes away. */
static int page_cmd(struct dg_cdp *c, enum kind kind, const char *method, json_t *params,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	if (!c->ready && !c->closed) {
		json_decref(params);
		return dg_err_set(err, -EAGAIN, "cdp: no page attached yet");
	}
	/* A navigation gives the page the keyboard focus, as Enter in the
	 * omnibox does: without it, keys typed after a navigate from the start
	 * page (whose omnibox has the focus) went into the omnibox. Page.
	 * bringToFront focuses the tab's contents; its answer is not awaited
	 * (commands on one session run in order, so it precedes the
	 * navigation). */
	if (!c->closed && (kind == K_NAVIGATE || kind == K_RELOAD || kind == K_HIST_BACK ||
			   kind == K_HIST_FORWARD)) {
		int f = dg_cdp_send_cmd(c, K_USER, "Page.bringToFront", NULL, c->session,
					c->page_gen, NULL, NULL, NULL, err);
		if (f) {
			json_decref(params);
			return f;
		}
	}
	int r = dg_cdp_send_cmd(c, kind, method, params, c->closed ? NULL : c->session,
				c->page_gen, NULL, done, arg, err);
	if (r == 0 && (kind == K_NAVIGATE || kind == K_RELOAD))
		c->nav_inflight++;
	return r;
}

int dg_cdp_navigate(struct dg_cdp *c, const char *url, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err)
{
	if (!url)
		return dg_err_set(err, -EINVAL, "cdp: navigate: no URL");
	if (strlen(url) > DG_CDP_URL_MAX)
		return dg_err_set(err, -E2BIG, "cdp: navigate: URL longer than %d bytes",
				  DG_CDP_URL_MAX);
	json_t *s = json_string(url);
	if (!s)
		return dg_err_set(err, -EINVAL, "cdp: navigate: URL is not UTF-8");
	json_t *params = json_object();
	if (!params || json_object_set_new(params, "url", s) != 0) {
		json_decref(params);
		return dg_err_set(err, -ENOMEM, "cdp: out of memory");
	}
	return page_cmd(c, K_NAVIGATE, "Page.navigate", params, done, arg, err);
}

int dg_cdp_back(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_HIST_BACK, "Page.getNavigationHistory", NULL, done, arg, err);
}

int dg_cdp_forward(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_HIST_FORWARD, "Page.getNavigationHistory", NULL, done, arg, err);
}

int dg_cdp_reload(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_RELOAD, "Page.reload", NULL, done, arg, err);
}

int dg_cdp_evaluate(struct dg_cdp *c, const char *expression, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err)
{
	if (!expression)
		return dg_err_set(err, -EINVAL, "cdp: evaluate: no expression");
	json_t *s = json_string(expression);
	if (!s)
		return dg_err_set(err, -EINVAL, "cdp: evaluate: expression is not UTF-8");
	json_t *params = json_pack("{sosb}", "expression", s, "returnByValue", 1);
	if (!params)
		return dg_err_set(err, -ENOMEM, "cdp: out of memory");
	return page_cmd(c, K_EVALUATE, "Runtime.evaluate", params, done, arg, err);
}

int dg_cdp_refresh(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	if (!c->ready && !c->closed)
		return dg_err_set(err, -EAGAIN, "cdp: no page attached yet");
	json_t *params = c->cur >= 0 ? json_pack("{ss}", "targetId", c->targets[c->cur].id) : NULL;
	return dg_cdp_send_cmd(c, K_REFRESH, "Target.getTargetInfo", params, NULL, c->page_gen,
			       NULL, done, arg, err);
}

int dg_cdp_switch(struct dg_cdp *c, const char *target_id, struct dg_err *err)
{
	if (c->closed)
		return dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
	int i = target_id ? target_find(c, target_id) : -1;
	if (i < 0)
		return dg_err_set(err, -ENOENT, "cdp: switch: no such page target");
	if (i == c->cur || (c->attaching && c->prefer[0] && strcmp(c->prefer, target_id) == 0))
		return 0;
	if (c->targets[i].attach_failed)
		return dg_err_set(err, -ENOENT, "cdp: switch: that page could not be attached");
	snprintf(c->prefer, sizeof(c->prefer), "%s", target_id);
	if (c->cur < 0)
		return 0; /* the next attach (maybe_attach) takes it */
	/* Our session on the old page goes; its late events and replies no
	 * longer count (page_gone bumps the generation). */
	char old[DG_CDP_ID_MAX + 1];
	snprintf(old, sizeof(old), "%s", c->session);
	page_gone(c, "another tab became the active one");
	dg_cdp_send_cmd(c, K_USER, "Target.detachFromTarget", json_pack("{ss}", "sessionId", old),
			NULL, 0, NULL, NULL, NULL, NULL);
	return 0;
}

bool dg_cdp_ready(const struct dg_cdp *c) { return c->ready; }
bool dg_cdp_loading(const struct dg_cdp *c)
{
	return c->frame_loading || c->nav_inflight > 0 || c->load_refresh;
}

const char *dg_cdp_url(const struct dg_cdp *c)
{
	return c->cur >= 0 && c->targets[c->cur].url ? c->targets[c->cur].url : "";
}

const char *dg_cdp_title(const struct dg_cdp *c)
{
	return c->cur >= 0 && c->targets[c->cur].title ? c->targets[c->cur].title : "";
}

const char *dg_cdp_target_id(const struct dg_cdp *c)
{
	return c->cur >= 0 ? c->targets[c->cur].id : "";
}
const char *dg_cdp_session_id(const struct dg_cdp *c) { return c->session; }
uint64_t dg_cdp_changes(const struct dg_cdp *c) { return c->changes; }
uint64_t dg_cdp_loads(const struct dg_cdp *c) { return c->loads; }
int dg_cdp_n_targets(const struct dg_cdp *c) { return c->n_targets; }

int dg_cdp_tabs(const struct dg_cdp *c, struct dg_cdp_tab *out, int max)
{
	int n = 0;
	uint64_t after = 0; /* seqs start at 1: the next tab is the oldest one after this */
	while (n < max) {
		int best = -1;
		for (int i = 0; i < DG_CDP_TARGETS_MAX; i++)
			if (c->targets[i].used && c->targets[i].seq > after &&
			    (best < 0 || c->targets[i].seq < c->targets[best].seq))
				best = i;
		if (best < 0)
			break;
		const struct target *t = &c->targets[best];
		out[n++] = (struct dg_cdp_tab){t->id, t->url ? t->url : "", t->title ? t->title : "",
					       best == c->cur};
		after = t->seq;
	}
	return n;
}
