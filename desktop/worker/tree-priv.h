/* tree: reading the page for read_page and get_page_text (internal to
 * desktop/worker/; the worker's two reading actions in a browser session).
 *
 * The reader is page.js (embedded at build time), evaluated in an isolated
 * world of the current page's main frame (DG_TREE_WORLD): the page's
 * scripts can neither see it nor change what it calls. The DOM it reads
 * is the page's, and hostile; what it returns is bounded here:
 *   read_page       at most DG_TREE_CAP characters of tree, or an error
 *                   saying the cap (the output is refused, not cut: a cut
 *                   tree would mislead), after at most DG_TREE_VISIT_MAX
 *                   elements (the walk says where it stopped);
 *   get_page_text   at most DG_TREE_TEXT_MAX characters, cut with a note;
 *   find            at most DG_TREE_FIND_MAX elements, best first (the
 *                   ranking is page.js's, documented there);
 *   names and texts of one element at most DG_TREE_NAME_MAX characters.
 * Element references (ref_N) live in that world: a reference is valid in
 * the document that gave it, and unknown (a clear error) after a
 * navigation or once the element left the page.
 *
 * One reading at a time; every command carries the reading's generation,
 * so a reply after the reading ended (DG_TREE_MAX_MS) is dropped.
 */
#ifndef DG_WORKER_TREE_PRIV_H
#define DG_WORKER_TREE_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "actions/actions.h"
#include "base/base.h"
#include "desktop/worker/cdp-priv.h"

#define DG_TREE_WORLD "deskgate-page" /* the isolated world's name */
#define DG_TREE_CAP 50000             /* characters of a read_page tree */
#define DG_TREE_TEXT_MAX 100000       /* characters of get_page_text */
#define DG_TREE_NAME_MAX 200          /* characters of one name or text */
#define DG_TREE_VISIT_MAX 100000      /* elements one walk visits */
#define DG_TREE_MAX_MS 10000          /* longest reading before it fails */
#define DG_TREE_FIND_MAX 20           /* elements find answers with, best first */

/* The reading is over: text (valid during the call) or error (NULL when
 * text is given). Called once per dg_tree_read that returned 0, never
 * inside that call. */
typedef void (*dg_tree_done_fn)(void *arg, const char *text, const char *error);

/* A call is over (dg_tree_call): value (borrowed, valid during the call)
 * or error. Called once per dg_tree_call that returned 0, never inside it. */
typedef void (*dg_tree_value_fn)(void *arg, json_t *value, const char *error);

/* Zero-initialised is idle; lives as long as the worker. */
struct dg_tree {
	struct dg_cdp *cdp;
	uint64_t gen;
	bool busy;
	bool retried;               /* a fresh world was made for this reading */
	int ctx;                    /* the isolated world's context id; 0: none yet */
	char ctx_session[DG_CDP_ID_MAX + 1]; /* ... in this page session */
	char *expr;                 /* the reading's expression (malloc'd) */
	long long deadline;         /* ms */
	dg_tree_done_fn done;       /* a reading's, or NULL for a call */
	dg_tree_value_fn vdone;     /* a call's */
	bool by_value;
	void *arg;
	char error[DG_ERR_MAX];
};

/* Starts reading the current page of cdp for a (read_page, get_page_text
 * or find). Returns 0 (done will be called), or -EBUSY, -EINVAL (not
 * a reading action), -EAGAIN (no page attached), -ENOMEM, with err and
 * done never called. */
int dg_tree_read(struct dg_tree *t, struct dg_cdp *cdp, const struct dg_action *a,
		 dg_tree_done_fn done, void *arg, struct dg_err *err);

/* Calls page.js's function fn (a name of the object it returns: locate,
 * formInput, element, ...) with opts (a JSON object, stolen; its strings
 * are JSON string literals in the expression, so nothing in them can end
 * the call) in the isolated world of the current page, within
 * DG_TREE_MAX_MS. by_value: the function answers {ok: true, ...} (done
 * gets that object) or {ok: false, error} (done gets the error); by
 * reference: the function returns an object or throws, and done gets the
 * RemoteObject ({"type", "objectId", ...}: the object's handle in that
 * world, for DevTools commands that take one) or the exception's text.
 * Returns as dg_tree_read. */
int dg_tree_call(struct dg_tree *t, struct dg_cdp *cdp, const char *fn, json_t *opts,
		 bool by_value, dg_tree_value_fn done, void *arg, struct dg_err *err);

/* The worker's poll timeout while reading: ms until the bound; at the
 * bound the reading ends with an error (done runs) and 0 is returned. -1
 * when idle. */
int dg_tree_advance(struct dg_tree *t);

#endif
