/* tree: read_page and get_page_text through page.js in an isolated world
 * (see tree-priv.h for the contract and its bounds).
 *
 * Steps, each a DevTools command on the current page's session whose reply
 * starts the next:
 *   world   Page.createIsolatedWorld on the main frame, when this page
 *           session has none yet (or its context stopped answering: a new
 *           document, once per reading);
 *   read    page.js (installing itself once per document) and the call,
 *           one Runtime.evaluate returning {ok, text | error} by value.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/worker/tree-priv.h"
#include "page-js.h"

/* Ends the reading or call with page.js's answer (value) or an error: a
 * reading gets the answer's "text", a call the answer itself. */
static void end(struct dg_tree *t, json_t *value, const char *error)
{
	t->busy = false;
	t->gen++;
	free(t->expr);
	t->expr = NULL;
	if (t->vdone)
		t->vdone(t->arg, error ? NULL : value, error);
	else
		t->done(t->arg, error ? NULL : json_string_value(json_object_get(value, "text")), error);
}

static void fail(struct dg_tree *t, const char *fmt, const char *detail)
{
	snprintf(t->error, sizeof(t->error), fmt, detail ? detail : "");
	end(t, NULL, t->error);
}

static bool send(struct dg_tree *t, const char *method, json_t *params, dg_cdp_done_fn fn)
{
	return dg_cdp_page_send(t->cdp, method, params, fn, t, t->gen);
}

/* The reading a reply belongs to, or NULL when it ended meanwhile. */
static struct dg_tree *claim(void *arg, int status)
{
	uint64_t gen;
	struct dg_tree *t = dg_cdp_claim(arg, status, &gen);
	return t && t->busy && t->gen == gen ? t : NULL;
}

static void create_world(struct dg_tree *t);

static void read_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct dg_tree *t = claim(arg, status);
	if (!t)
		return;
	json_t *exc = json_object_get(result, "exceptionDetails");
	if (status != 0 && !t->retried) { /* the context of an earlier document */
		t->ctx = 0;
		create_world(t);
		return;
	}
	if (status != 0) {
		fail(t, "reading the page failed: %s", error_message);
		return;
	}
	if (exc) {
		const char *m = json_string_value(json_object_get(
			json_object_get(exc, "exception"), "description"));
		fail(t, "reading the page failed: %.300s",
		     m ? m : json_string_value(json_object_get(exc, "text")));
		return;
	}
	if (!t->by_value) {
		json_t *ro = json_object_get(result, "result");
		if (json_is_string(json_object_get(ro, "objectId")))
			end(t, ro, NULL);
		else
			fail(t, "reading the page failed: %s", "the reader answered no element");
		return;
	}
	json_t *v = json_object_get(json_object_get(result, "result"), "value");
	json_t *ok = json_object_get(v, "ok");
	const char *text = json_string_value(json_object_get(v, "text"));
	const char *error = json_string_value(json_object_get(v, "error"));
	if (json_is_true(ok) && (t->vdone || text))
		end(t, v, NULL);
	else if (json_is_false(ok) && error)
		fail(t, "%.500s", error);
	else
		fail(t, "reading the page failed: %s", "the reader answered no text");
}

static void evaluate(struct dg_tree *t)
{
	json_t *p = json_pack("{s:s, s:i, s:b, s:b}", "expression", t->expr, "contextId", t->ctx,
			      "returnByValue", t->by_value, "awaitPromise", 0);
	if (!p || !send(t, "Runtime.evaluate", p, read_done))
		fail(t, "reading the page failed: %s", "the page's session is gone");
}

static void world_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct dg_tree *t = claim(arg, status);
	if (!t)
		return;
	t->ctx = dg_cdp_world_id(status, result);
	if (!t->ctx) {
		fail(t, "reading the page failed: no isolated world (%s)",
		     status != 0 ? error_message : "no context id");
		return;
	}
	snprintf(t->ctx_session, sizeof(t->ctx_session), "%s", dg_cdp_session_id(t->cdp));
	evaluate(t);
}

static void create_world(struct dg_tree *t)
{
	t->retried = true;
	if (!dg_cdp_world_create(t->cdp, DG_TREE_WORLD, world_done, t, t->gen))
		fail(t, "reading the page failed: %s", "the page's session is gone");
}

/* Starts in a reply, never inside dg_tree_read (done must not run there). */
static void first_step(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result, (void)error_message;
	struct dg_tree *t = claim(arg, status);
	if (!t)
		return;
	if (t->ctx && strcmp(t->ctx_session, dg_cdp_session_id(t->cdp)) == 0)
		evaluate(t);
	else
		create_world(t);
}

/* The call after page.js: options from the canonical action (integers and
 * fixed names only, written by jansson). */
static char *expression(const struct dg_action *a)
{
	static const char *const filters[] = {"visible", "interactive", "all"};
	json_t *o;
	const char *fn;
	if (a->type == DG_ACTION_READ_PAGE) {
		fn = "readPage";
		o = json_pack("{s:i, s:s, s:i, s:i, s:i, s:i}", "depth", a->depth, "filter",
			      filters[a->filter], "ref", a->ref, "cap", DG_TREE_CAP, "nameMax",
			      DG_TREE_NAME_MAX, "visitMax", DG_TREE_VISIT_MAX);
	} else if (a->type == DG_ACTION_FIND) {
		/* The agent's query goes in as a JSON string, which is a JavaScript
		 * string literal: nothing in it can end the call. */
		fn = "find";
		o = json_pack("{s:s, s:i, s:i, s:i}", "query", a->query, "max", DG_TREE_FIND_MAX,
			      "nameMax", DG_TREE_NAME_MAX, "visitMax", DG_TREE_VISIT_MAX);
	} else {
		fn = "pageText";
		o = json_pack("{s:i}", "cap", DG_TREE_TEXT_MAX);
	}
	char *opts = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!opts)
		return NULL;
	char *e = NULL;
	if (asprintf(&e, "%s\n;window.__deskgatePage.%s(%s)", dg_page_js, fn, opts) < 0)
		e = NULL;
	free(opts);
	return e;
}

/* Starts a reading or call of expression e (taken). */
static int start(struct dg_tree *t, struct dg_cdp *cdp, char *e, struct dg_err *err)
{
	t->cdp = cdp;
	t->gen++;
	t->busy = true;
	t->retried = false;
	t->expr = e;
	t->deadline = dg_now_ms() + DG_TREE_MAX_MS;
	/* A harmless round trip first, so that done never runs inside this call. */
	json_t *p = json_pack("{s:s, s:b}", "expression", "0", "returnByValue", 1);
	if (p && send(t, "Runtime.evaluate", p, first_step))
		return 0;
	t->busy = false;
	free(t->expr);
	t->expr = NULL;
	return dg_err_set(err, -EAGAIN, "reading the page: the page's session is gone");
}

int dg_tree_read(struct dg_tree *t, struct dg_cdp *cdp, const struct dg_action *a,
		 dg_tree_done_fn done, void *arg, struct dg_err *err)
{
	if (t->busy)
		return dg_err_set(err, -EBUSY, "reading the page: another reading is in progress");
	if (a->type != DG_ACTION_READ_PAGE && a->type != DG_ACTION_GET_PAGE_TEXT &&
	    a->type != DG_ACTION_FIND)
		return dg_err_set(err, -EINVAL, "reading the page: %s is no reading",
				  dg_action_type_name(a->type));
	if (!cdp || !dg_cdp_ready(cdp))
		return dg_err_set(err, -EAGAIN, "reading the page: no page is attached yet");
	char *e = expression(a);
	if (!e)
		return dg_err_set(err, -ENOMEM, "reading the page: out of memory");
	t->done = done;
	t->vdone = NULL;
	t->by_value = true;
	t->arg = arg;
	return start(t, cdp, e, err);
}

int dg_tree_call(struct dg_tree *t, struct dg_cdp *cdp, const char *fn, json_t *opts,
		 bool by_value, dg_tree_value_fn done, void *arg, struct dg_err *err)
{
	char *o = opts ? json_dumps(opts, JSON_COMPACT) : NULL;
	json_decref(opts);
	if (t->busy) {
		free(o);
		return dg_err_set(err, -EBUSY, "reading the page: another reading is in progress");
	}
	if (!cdp || !dg_cdp_ready(cdp)) {
		free(o);
		return dg_err_set(err, -EAGAIN, "reading the page: no page is attached yet");
	}
	char *e = NULL;
	/* fn is one of the worker's own names, never input. */
	if (!o || asprintf(&e, "%s\n;window.__deskgatePage.%s(%s)", dg_page_js, fn, o) < 0)
		e = NULL;
	free(o);
	if (!e)
		return dg_err_set(err, -ENOMEM, "reading the page: out of memory");
	t->done = NULL;
	t->vdone = done;
	t->by_value = by_value;
	t->arg = arg;
	return start(t, cdp, e, err);
}

int dg_tree_advance(struct dg_tree *t)
{
	if (!t->busy)
		return -1;
	long long now = dg_now_ms();
	if (now < t->deadline)
		return (int)(t->deadline - now);
	snprintf(t->error, sizeof(t->error), "reading the page: the page did not answer within %d ms",
		 DG_TREE_MAX_MS);
	end(t, NULL, t->error);
	return 0;
}
