/* cdp-classify: what a CDP client's command amounts to, for the policy
 * (contract in cdp-classify-priv.h).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "base/base.h"
#include "desktop/worker/cdp-classify-priv.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* CDP's modifier bits (Input.dispatchMouseEvent, dispatchKeyEvent, ...). */
#define CDP_ALT 1
#define CDP_CTRL 2
#define CDP_META 4
#define CDP_SHIFT 8

/* Bytes of one chord written out: every key's name and a '+'. */
#define CHORD_BUF (DG_CHORD_MAX * (DG_KEYSYM_NAME_BUF + 1))

struct ctx {
	const char *method;
	const json_t *params;
	const struct dg_cdp_view *view;
	const char *arg; /* the method's entry's argument (a field name), or NULL */
	struct dg_cdp_class *out;
	struct dg_err *err;
	bool oom;        /* a summary field could not be kept */
};

/* ---- failures and fields ---- */

static int fail(struct ctx *c, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, const char *field, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, -EINVAL, "%s.%s: %s", c->method, field, msg);
}

static int nomem(struct ctx *c)
{
	return dg_err_set(c->err, -ENOMEM, "%s: out of memory", c->method);
}

/* A refusal by the actions' parser ("action.AFIELD...: what") as one of the
 * command's field ("METHOD.FIELD...: what"). */
static int relay(struct ctx *c, int rc, const char *afield, const char *field, const char *msg)
{
	size_t n = strlen(afield);
	if (rc == -ENOMEM)
		return nomem(c);
	if (strncmp(msg, "action.", 7) == 0 && strncmp(msg + 7, afield, n) == 0)
		return dg_err_set(c->err, -EINVAL, "%s.%s%s", c->method, field, msg + 7 + n);
	return dg_err_set(c->err, -EINVAL, "%s.%s: %s", c->method, field, msg);
}

static int wrong_type(struct ctx *c, const char *field, const json_t *v, const char *want)
{
	char val[DG_SHOW_VALUE_BUF];
	if (!v)
		return fail(c, field, "missing");
	dg_show_value(v, val, sizeof(val));
	return fail(c, field, "%s is not %s", val, want);
}

/* v as a string of at most max bytes without NUL. */
static int check_string(struct ctx *c, const char *field, const json_t *v, size_t max,
			const char **s, size_t *len)
{
	if (!json_is_string(v))
		return wrong_type(c, field, v, "a string");
	size_t n = json_string_length(v);
	const char *p = json_string_value(v);
	if (n > max)
		return fail(c, field, "%zu bytes is over the limit of %zu bytes", n, max);
	const char *nul = memchr(p, '\0', n);
	if (nul)
		return fail(c, field, "contains NUL at byte %zu", (size_t)(nul - p));
	*s = p;
	*len = n;
	return 0;
}

/* params.name as check_string; absent: an error when required, else 0
 * with *s NULL. */
static int string_field(struct ctx *c, const char *name, bool required, size_t max,
			const char **s, size_t *len)
{
	const json_t *v = json_object_get(c->params, name);
	*s = NULL;
	*len = 0;
	if (!v && !required)
		return 0;
	return check_string(c, name, v, max, s, len);
}

/* params.name, one of names[0..n-1]: its index in *out; absent: dflt when
 * not required. */
static int word_field(struct ctx *c, const char *name, bool required, const char *const *names,
		      int n, int dflt, int *out)
{
	const char *s;
	size_t len;
	int rc = string_field(c, name, required, DG_CDP_WORD_MAX, &s, &len);
	if (rc < 0)
		return rc;
	*out = dflt;
	if (!s)
		return 0;
	for (int i = 0; i < n; i++) {
		if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0) {
			*out = i;
			return 0;
		}
	}
	char esc[DG_SHOW_BUF], allowed[256] = "";
	size_t used = 0;
	for (int i = 0; i < n && used < sizeof(allowed); i++)
		used += (size_t)snprintf(allowed + used, sizeof(allowed) - used, "%s%s",
					 i ? ", " : "", names[i]);
	dg_show_bytes(s, len, DG_SHOW_MAX, true, esc, sizeof(esc));
	return fail(c, name, "unknown value \"%s\" (allowed: %s)", esc, allowed);
}

/* params[kx], params[ky]: numbers, 0 when absent. */
static int numbers_field(struct ctx *c, const char *kx, const char *ky, double d[2])
{
	const char *k[2] = {kx, ky};
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(c->params, k[i]);
		d[i] = 0;
		if (v && !json_is_number(v))
			return wrong_type(c, k[i], v, "a number");
		if (v)
			d[i] = json_number_value(v);
	}
	return 0;
}

/* params.name, an integer in lo..hi; absent: dflt. */
static int int_field(struct ctx *c, const char *name, json_int_t lo, json_int_t hi,
		     json_int_t dflt, json_int_t *out)
{
	const json_t *v = json_object_get(c->params, name);
	*out = dflt;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return wrong_type(c, name, v, "an integer");
	json_int_t i = json_integer_value(v);
	if (i < lo || i > hi)
		return fail(c, name, "%" JSON_INTEGER_FORMAT " is not in %" JSON_INTEGER_FORMAT
			    "..%" JSON_INTEGER_FORMAT, i, lo, hi);
	*out = i;
	return 0;
}

/* params.name, a boolean; absent: false (*given false). */
static int bool_field(struct ctx *c, const char *name, bool *out)
{
	const json_t *v = json_object_get(c->params, name);
	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return wrong_type(c, name, v, "a boolean");
	*out = json_is_true(v);
	return 0;
}

/* params.modifiers: CDP's bits (others ignored), 0 when absent. */
static int modifiers_field(struct ctx *c, unsigned *bits)
{
	json_int_t m;
	int rc = int_field(c, "modifiers", 0, INT32_MAX, 0, &m);
	*bits = (unsigned)m & (CDP_ALT | CDP_CTRL | CDP_META | CDP_SHIFT);
	return rc;
}

/* CDP's modifier bits as the actions' DG_MOD_* (Meta is Super on X). */
static unsigned dg_mods(unsigned bits)
{
	return (bits & CDP_CTRL ? DG_MOD_CTRL : 0) | (bits & CDP_SHIFT ? DG_MOD_SHIFT : 0) |
	       (bits & CDP_ALT ? DG_MOD_ALT : 0) | (bits & CDP_META ? DG_MOD_SUPER : 0);
}

/* ---- the summary (params) ---- */

/* params[key] = v (stolen); a failure (v NULL included) is remembered. */
static void keep(struct ctx *c, const char *key, json_t *v)
{
	if (!c->out->params)
		c->out->params = json_object();
	if (json_object_set_new(c->out->params, key, v) != 0)
		c->oom = true;
}

/* len bytes of UTF-8 s cut to at most max at a character boundary. */
static size_t cut_len(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
		max--;
	return max;
}

/* s kept under key, cut to max bytes; when cut, its length as KEY_bytes. */
static void keep_str(struct ctx *c, const char *key, const char *s, size_t len, size_t max)
{
	char k[64];
	size_t n = cut_len(s, len, max);
	keep(c, key, json_stringn(s, n));
	if (n < len) {
		snprintf(k, sizeof(k), "%s_bytes", key);
		keep(c, k, json_integer((json_int_t)len));
	}
}

/* params.name as given (a number, checked), when given. */
static void keep_given(struct ctx *c, const char *name)
{
	const json_t *v = json_object_get(c->params, name);
	if (v)
		keep(c, name, json_deep_copy(v));
}

/* ---- actions ---- */

/* a[key] = v (stolen); NULL (a dropped) when either is NULL or out of memory. */
static json_t *with(json_t *a, const char *key, json_t *v)
{
	if (json_object_set_new(a, key, v) != 0) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *action(const char *type)
{
	return with(json_object(), "type", json_string(type));
}

static json_t *at(const char *type, int x, int y)
{
	return with(with(action(type), "x", json_integer(x)), "y", json_integer(y));
}

/* The canonical names of DG_MOD_* bits, in canonical order. */
static json_t *mod_names(unsigned mods)
{
	static const char *const names[DG_MOD_COUNT] = {"ctrl", "shift", "alt", "super", "meta"};
	json_t *a = json_array();
	for (int k = 0; a && k < DG_MOD_COUNT; k++) {
		if ((mods & (1u << k)) && json_array_append_new(a, json_string(names[k])) != 0) {
			json_decref(a);
			a = NULL;
		}
	}
	return a;
}

/* The screen the actions are parsed for: the view's, or 1x1 when there is
 * none (the actions without a point do not depend on it). */
static void screen_of(const struct dg_cdp_view *v, int *w, int *h)
{
	bool ok = v && v->screen_w >= 1 && v->screen_w <= DG_ACTION_SCREEN_MAX &&
		  v->screen_h >= 1 && v->screen_h <= DG_ACTION_SCREEN_MAX;
	*w = ok ? v->screen_w : 1;
	*h = ok ? v->screen_h : 1;
}

/* Parses obj (stolen; NULL: out of memory) as an action and sets
 * out->action to its canonical form. A refusal is relayed as field. */
static int emit(struct ctx *c, json_t *obj, const char *afield, const char *field)
{
	struct dg_action a;
	struct dg_err e;
	int w, h;
	if (!obj)
		return nomem(c);
	screen_of(c->view, &w, &h);
	int rc = dg_action_parse_obj(obj, w, h, &a, &e);
	json_decref(obj);
	if (rc < 0)
		return relay(c, rc, afield, field, e.msg);
	c->out->action = dg_action_to_json(&a);
	dg_action_free(&a);
	return c->out->action ? 0 : nomem(c);
}

static int refuse(struct ctx *c, const char *why)
{
	c->out->refuse = why;
	return 0;
}

/* ---- points ---- */

/* A command with a point needs a screen the actions take. */
static int view_check(struct ctx *c)
{
	const struct dg_cdp_view *v = c->view;
	if (v && (v->screen_w < 1 || v->screen_w > DG_ACTION_SCREEN_MAX || v->screen_h < 1 ||
		  v->screen_h > DG_ACTION_SCREEN_MAX))
		return dg_err_set(c->err, -EINVAL, "%s: the screen (%dx%d) is not 1 to %d pixels a side",
				  c->method, v->screen_w, v->screen_h, DG_ACTION_SCREEN_MAX);
	return 0;
}

/* obj.x, obj.y: numbers (prefix: where the object is, "" or "touchPoints[2].") */
static int point_of(struct ctx *c, const json_t *obj, const char *prefix, double xy[2])
{
	static const char *const k[2] = {"x", "y"};
	char field[64];
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(obj, k[i]);
		snprintf(field, sizeof(field), "%s%s", prefix, k[i]);
		if (!json_is_number(v))
			return wrong_type(c, field, v, "a number");
		xy[i] = json_number_value(v);
	}
	return 0;
}

/* What the commands with a point share: a screen the actions take; then,
 * each when asked for, type among types, the point x, y, the modifiers. */
static int pointer_fields(struct ctx *c, const char *const *types, int n_types, int *type,
			  double xy[2], unsigned *mods)
{
	int rc = view_check(c);
	if (rc == 0 && types)
		rc = word_field(c, "type", true, types, n_types, 0, type);
	if (rc == 0 && xy)
		rc = point_of(c, c->params, "", xy);
	if (rc == 0 && mods)
		rc = modifiers_field(c, mods);
	return rc;
}

/* The screen point of viewport point xy; false when it is outside the
 * viewport (rounded) or the screen, or no viewport is known. */
static bool map_point(const struct dg_cdp_view *v, const double xy[2], int s[2])
{
	if (!v || v->vp_w <= 0 || v->vp_h <= 0)
		return false;
	double rx = round(xy[0]), ry = round(xy[1]);
	/* Written so that a NaN is outside too. */
	if (!(rx >= 0 && rx < v->vp_w && ry >= 0 && ry < v->vp_h))
		return false;
	long long px = (long long)v->vp_x + (long long)rx, py = (long long)v->vp_y + (long long)ry;
	if (px < 0 || px >= v->screen_w || py < 0 || py >= v->screen_h)
		return false;
	s[0] = (int)px;
	s[1] = (int)py;
	return true;
}

/* A wheel delta in CSS pixels as notches: rounded, at least 1 when not 0,
 * at most DG_ACTION_SCROLL_MAX. */
static int notches(double d)
{
	if (!(fabs(d) > 0))
		return 0;
	double n = round(fabs(d) / DG_CDP_NOTCH_PX);
	n = n < 1 ? 1 : n > DG_ACTION_SCROLL_MAX ? DG_ACTION_SCROLL_MAX : n;
	return d < 0 ? -(int)n : (int)n;
}

/* scroll at s by (dx, dy) notches, or move when both are 0. */
static json_t *scroll_at(const int s[2], int dx, int dy, unsigned mods)
{
	json_t *a = at(dx || dy ? "scroll" : "move", s[0], s[1]);
	if (dx || dy)
		a = with(with(a, "dx", json_integer(dx)), "dy", json_integer(dy));
	return with(a, "modifiers", mod_names(mods));
}

static void keep_point(struct ctx *c)
{
	keep_given(c, "x");
	keep_given(c, "y");
}

/* ---- navigation ---- */

static int navigate_to(struct ctx *c, bool empty_passes)
{
	const char *url;
	size_t len;
	int rc = string_field(c, "url", true, DG_ACTION_URL_MAX, &url, &len);
	if (rc < 0)
		return rc;
	if ((len == 11 && memcmp(url, "about:blank", 11) == 0) || (empty_passes && len == 0))
		return 0;
	rc = emit(c, with(action("navigate"), "url", json_stringn(url, len)), "url", "url");
	if (rc == 0)
		keep_str(c, "url", url, len, DG_CDP_KEPT_MAX);
	return rc;
}

static int navigate(struct ctx *c)
{
	return navigate_to(c, false);
}

static int create_target(struct ctx *c)
{
	return navigate_to(c, true);
}

/* A script the command runs: params[field] (required unless optional,
 * when absent or "" is nothing) as code. */
static int script_in(struct ctx *c, const char *field, bool optional)
{
	const char *s;
	size_t len;
	int rc = string_field(c, field, !optional, DG_CDP_CODE_MAX, &s, &len);
	if (rc < 0 || !s || (optional && len == 0))
		return rc;
	c->out->code = json_stringn(s, len);
	if (!c->out->code)
		return nomem(c);
	keep(c, "code_bytes", json_integer((json_int_t)len));
	keep(c, "code_head", json_stringn(s, cut_len(s, len, DG_CDP_CODE_HEAD)));
	return 0;
}

static int script(struct ctx *c)
{
	return script_in(c, c->arg, false);
}

/* A fulfilled response's body (base64, optional): the page runs what it
 * holds. */
static int fulfill(struct ctx *c)
{
	return script_in(c, "body", true);
}

static int condition(struct ctx *c)
{
	return script_in(c, "condition", true);
}

static int reload(struct ctx *c)
{
	int rc = script_in(c, "scriptToEvaluateOnLoad", true);
	return rc < 0 ? rc : emit(c, action("reload"), "", "");
}

/* navigateToHistoryEntry names an entry, not a direction: decided as back,
 * which the policy treats as forward's twin in practice. */
static int history(struct ctx *c)
{
	int rc = emit(c, action("back"), "", "");
	if (rc == 0 && json_is_integer(json_object_get(c->params, "entryId")))
		keep_given(c, "entryId");
	return rc;
}

static int continue_request(struct ctx *c)
{
	const char *url;
	size_t len;
	int rc = string_field(c, "url", false, DG_ACTION_URL_MAX, &url, &len);
	if (rc < 0 || !url)
		return rc;
	/* Checked as a navigation's URL is; only the URL is kept. */
	rc = emit(c, with(action("navigate"), "url", json_stringn(url, len)), "url", "url");
	if (rc < 0)
		return rc;
	c->out->url = json_incref(json_object_get(c->out->action, "url"));
	json_decref(c->out->action);
	c->out->action = NULL;
	keep_str(c, "url", url, len, DG_CDP_KEPT_MAX);
	return 0;
}

/* ---- files, downloads, contexts, sessions ---- */

/* files (field names it) as file_upload's paths, kept as params.files. */
static int files_in(struct ctx *c, const json_t *files, const char *field)
{
	char where[64];
	if (!json_is_array(files))
		return wrong_type(c, field, files, "an array of paths");
	size_t n = json_array_size(files);
	if (n < 1 || n > DG_ACTION_PATHS_MAX)
		return fail(c, field, "%zu paths; 1 to %d are taken", n, DG_ACTION_PATHS_MAX);
	json_t *kept = json_array();
	for (size_t i = 0; i < n && kept; i++) {
		const char *s = NULL;
		size_t len = 0;
		snprintf(where, sizeof(where), "%s[%zu]", field, i);
		int rc = check_string(c, where, json_array_get(files, i), DG_ACTION_FILE_PATH_MAX, &s,
				      &len);
		if (rc < 0) {
			json_decref(kept);
			return rc;
		}
		if (json_array_append_new(kept, json_stringn(s, len)) != 0) {
			json_decref(kept);
			kept = NULL;
		}
	}
	if (!kept)
		return nomem(c);
	/* The form of each path as file_upload's (absolute, canonical, no
	 * control characters): what the owner checks is what Chromium opens. */
	json_t *probe = with(with(action("file_upload"), "ref", json_string("ref_1")), "paths",
			     json_incref(kept));
	struct dg_action a;
	struct dg_err e;
	int rc = probe ? dg_action_parse_obj(probe, 1, 1, &a, &e) : -ENOMEM;
	json_decref(probe);
	if (rc == 0)
		dg_action_free(&a);
	if (rc < 0) {
		json_decref(kept);
		return rc == -ENOMEM ? nomem(c) : relay(c, rc, "paths", field, e.msg);
	}
	keep(c, "files", kept);
	return 0;
}

static int set_files(struct ctx *c)
{
	return files_in(c, json_object_get(c->params, "files"), "files");
}

static int download(struct ctx *c)
{
	const char *s;
	size_t len;
	int rc = string_field(c, "behavior", true, DG_CDP_WORD_MAX, &s, &len);
	if (rc == 0)
		keep(c, "behavior", json_stringn(s, len));
	return rc;
}

static int browser_context(struct ctx *c)
{
	const char *s;
	size_t len;
	int rc = string_field(c, "proxyServer", false, DG_CDP_CLIENT_MSG_MAX, &s, &len);
	if (rc == 0 && s && len > 0)
		keep(c, "proxyServer", json_true());
	return rc;
}

static int attach(struct ctx *c)
{
	bool flat;
	int rc = bool_field(c, "flatten", &flat);
	return rc < 0 || flat ? rc : refuse(c, DG_CDP_REFUSE_FLATTEN);
}

static int auto_attach(struct ctx *c)
{
	bool on, flat;
	const json_t *v = json_object_get(c->params, "autoAttach");
	if (!json_is_boolean(v))
		return wrong_type(c, "autoAttach", v, "a boolean");
	int rc = bool_field(c, "autoAttach", &on);
	if (rc == 0)
		rc = bool_field(c, "flatten", &flat);
	return rc < 0 || !on || flat ? rc : refuse(c, DG_CDP_REFUSE_FLATTEN);
}

static int send_to_target(struct ctx *c)
{
	return refuse(c, DG_CDP_REFUSE_FLAT);
}

/* ---- pointer and touch ---- */

enum { M_PRESSED, M_RELEASED, M_MOVED, M_WHEEL };
static const char *const mouse_types[] = {"mousePressed", "mouseReleased", "mouseMoved",
					  "mouseWheel"};
static const char *const buttons[] = {"none", "left", "middle", "right", "back", "forward"};

static int mouse(struct ctx *c)
{
	int type = 0, button = 0, s[2];
	double xy[2], d[2] = {0, 0};
	unsigned mods = 0;
	int rc = pointer_fields(c, mouse_types, N_OF(mouse_types), &type, xy, &mods);
	if (rc == 0)
		rc = word_field(c, "button", false, buttons, N_OF(buttons), 0, &button);
	if (rc == 0)
		rc = numbers_field(c, "deltaX", "deltaY", d);
	if (rc < 0)
		return rc;
	if (!map_point(c->view, xy, s))
		return refuse(c, DG_CDP_REFUSE_POINT);
	json_t *a;
	if (type == M_PRESSED || type == M_RELEASED)
		a = with(at(type == M_PRESSED ? "mouse_down" : "mouse_up", s[0], s[1]), "button",
			 json_string(buttons[button ? button : 1]));
	else if (type == M_MOVED)
		a = with(at("move", s[0], s[1]), "modifiers", mod_names(dg_mods(mods)));
	else
		a = scroll_at(s, notches(d[0]), notches(d[1]), dg_mods(mods));
	rc = emit(c, a, "", "");
	if (rc < 0)
		return rc;
	keep(c, "type", json_string(mouse_types[type]));
	keep_point(c);
	keep_given(c, "button");
	if (type == M_WHEEL) {
		keep_given(c, "deltaX");
		keep_given(c, "deltaY");
	}
	keep_given(c, "modifiers");
	return 0;
}

/* Input.synthesize*Gesture: click (tap), move (pinch) or scroll at x, y. */
static int gesture(struct ctx *c)
{
	int s[2];
	double xy[2], d[2] = {0, 0};
	int rc = pointer_fields(c, NULL, 0, NULL, xy, NULL);
	if (rc == 0)
		rc = numbers_field(c, "xDistance", "yDistance", d);
	if (rc < 0)
		return rc;
	if (!map_point(c->view, xy, s))
		return refuse(c, DG_CDP_REFUSE_POINT);
	json_t *a;
	if (strcmp(c->arg, "tap") == 0)
		a = at("click", s[0], s[1]);
	else if (strcmp(c->arg, "pinch") == 0)
		a = at("move", s[0], s[1]);
	else /* positive distances scroll left and up */
		a = scroll_at(s, -notches(d[0]), -notches(d[1]), 0);
	rc = emit(c, a, "", "");
	if (rc == 0)
		keep_point(c);
	return rc;
}

enum { T_START, T_MOVE, T_END, T_CANCEL };
static const char *const touch_types[] = {"touchStart", "touchMove", "touchEnd", "touchCancel"};

static int touch(struct ctx *c)
{
	int type = T_END, s[DG_CDP_TOUCH_POINTS_MAX][2];
	unsigned mods = 0;
	bool outside = false;
	int rc = pointer_fields(c, touch_types, N_OF(touch_types), &type, NULL, &mods);
	if (rc < 0 || type == T_END || type == T_CANCEL)
		return rc;
	const json_t *pts = json_object_get(c->params, "touchPoints");
	if (!json_is_array(pts))
		return wrong_type(c, "touchPoints", pts, "an array of points");
	size_t n = json_array_size(pts);
	if (n > DG_CDP_TOUCH_POINTS_MAX)
		return fail(c, "touchPoints", "%zu points is over the limit of %d", n,
			    DG_CDP_TOUCH_POINTS_MAX);
	for (size_t i = 0; i < n; i++) {
		char where[48];
		double xy[2];
		const json_t *p = json_array_get(pts, i);
		snprintf(where, sizeof(where), "touchPoints[%zu]", i);
		if (!json_is_object(p))
			return wrong_type(c, where, p, "an object");
		snprintf(where, sizeof(where), "touchPoints[%zu].", i);
		rc = point_of(c, p, where, xy);
		if (rc < 0)
			return rc;
		outside = outside || !map_point(c->view, xy, s[i]);
	}
	if (n == 0)
		return 0;
	if (outside)
		return refuse(c, DG_CDP_REFUSE_POINT);
	json_t *a;
	if (n == 1) {
		a = at("click", s[0][0], s[0][1]);
	} else {
		json_t *path = json_array();
		for (size_t i = 0; i < n && path; i++) {
			json_t *p = json_pack("[ii]", s[i][0], s[i][1]);
			if (json_array_append_new(path, p) != 0) {
				json_decref(path);
				path = NULL;
			}
		}
		a = with(action("drag"), "path", path);
	}
	rc = emit(c, with(a, "modifiers", mod_names(dg_mods(mods))), "", "");
	if (rc == 0) {
		keep(c, "type", json_string(touch_types[type]));
		keep(c, "points", json_integer((json_int_t)n));
		keep_given(c, "modifiers");
	}
	return rc;
}

static const char *const drag_types[] = {"dragEnter", "dragOver", "drop", "dragCancel"};

/* A drag over the page: a move at its point; the files a drop carries are
 * checked as DOM.setFileInputFiles's. */
static int drag_event(struct ctx *c)
{
	int type = 0, s[2];
	double xy[2];
	unsigned mods = 0;
	int rc = pointer_fields(c, drag_types, N_OF(drag_types), &type, xy, &mods);
	if (rc < 0)
		return rc;
	const json_t *data = json_object_get(c->params, "data");
	if (data && !json_is_object(data))
		return wrong_type(c, "data", data, "an object");
	const json_t *files = json_object_get(data, "files");
	if (files && !(json_is_array(files) && json_array_size(files) == 0)) {
		rc = files_in(c, files, "data.files");
		if (rc < 0)
			return rc;
	}
	if (!map_point(c->view, xy, s))
		return refuse(c, DG_CDP_REFUSE_POINT);
	rc = emit(c, with(at("move", s[0], s[1]), "modifiers", mod_names(dg_mods(mods))), "", "");
	if (rc == 0) {
		keep(c, "type", json_string(drag_types[type]));
		keep_point(c);
	}
	return rc;
}

/* ---- text and keys ---- */

static int type_text(struct ctx *c, const char *s, size_t len)
{
	int rc = emit(c, with(action("type"), "text", json_stringn(s, len)), "text", "text");
	if (rc == 0)
		keep(c, "text_bytes", json_integer((json_int_t)len));
	return rc;
}

static int insert_text(struct ctx *c)
{
	const char *s;
	size_t len;
	int rc = string_field(c, "text", true, DG_ACTION_TEXT_MAX, &s, &len);
	return rc < 0 || len == 0 ? rc : type_text(c, s, len);
}

/* DOM key values whose X keysym has another name than the one
 * dg_keysym_from_openai resolves them to (or none). Case-sensitive, as
 * the DOM's names are. */
static const struct {
	const char *dom, *x;
} dom_names[] = {
	{"ContextMenu", "Menu"},
	{"PrintScreen", "Print"},
	{"NumLock", "Num_Lock"},
	{"ScrollLock", "Scroll_Lock"},
	{"AltGraph", "ISO_Level3_Shift"},
	{"Hyper", "Hyper_L"},
	{"Again", "Redo"},
	{"AudioVolumeMute", "XF86AudioMute"},
	{"AudioVolumeDown", "XF86AudioLowerVolume"},
	{"AudioVolumeUp", "XF86AudioRaiseVolume"},
	{"MediaPlayPause", "XF86AudioPlay"},
	{"MediaStop", "XF86AudioStop"},
	{"MediaTrackNext", "XF86AudioNext"},
	{"MediaTrackPrevious", "XF86AudioPrev"},
	{"BrowserBack", "XF86Back"},
	{"BrowserForward", "XF86Forward"},
	{"BrowserRefresh", "XF86Reload"},
	{"BrowserStop", "XF86Stop"},
	{"BrowserSearch", "XF86Search"},
	{"BrowserFavorites", "XF86Favorites"},
	{"BrowserHome", "XF86HomePage"},
	{"LaunchMail", "XF86Mail"},
	{"Power", "XF86PowerOff"},
	{"Sleep", "XF86Sleep"},
	{"WakeUp", "XF86WakeUp"},
	{"Eject", "XF86Eject"},
	{"Copy", "XF86Copy"},
	{"Cut", "XF86Cut"},
	{"Paste", "XF86Paste"},
	{"Open", "XF86Open"},
};

int dg_cdp_dom_key(const char *key, uint32_t *keysym)
{
	if (!key)
		return -ENOENT;
	for (size_t i = 0; i < N_OF(dom_names); i++)
		if (strcmp(dom_names[i].dom, key) == 0)
			return dg_keysym_from_name(dom_names[i].x, keysym);
	/* Enter, Tab, Backspace, Escape, Delete, Insert, Home, End, PageUp,
	 * PageDown, Arrow*, F1..F24, CapsLock, Control, Shift, Alt, Meta (the
	 * Super key), a single character (letters lower-case), then the X
	 * names (Pause, Help, Cancel, Select, Undo, Find...). */
	return dg_keysym_from_openai(key, keysym);
}

/* The key a windowsVirtualKeyCode names, for the keys shortcuts use:
 * letters, digits, F1..F24 and the named keys of the US layout. */
static int vk_keysym(json_int_t vk, uint32_t *keysym)
{
	static const struct {
		int vk;
		const char *x;
	} named[] = {
		{8, "BackSpace"}, {9, "Tab"},     {13, "Return"}, {27, "Escape"},
		{32, "space"},    {33, "Prior"},  {34, "Next"},   {35, "End"},
		{36, "Home"},     {37, "Left"},   {38, "Up"},     {39, "Right"},
		{40, "Down"},     {45, "Insert"}, {46, "Delete"},
	};
	char name[8];
	if ((vk >= 'A' && vk <= 'Z') || (vk >= '0' && vk <= '9')) {
		snprintf(name, sizeof(name), "%c", (char)(vk >= 'A' && vk <= 'Z' ? vk + 32 : vk));
		return dg_keysym_from_name(name, keysym);
	}
	if (vk >= 112 && vk <= 135) {
		snprintf(name, sizeof(name), "F%d", (int)(vk - 111));
		return dg_keysym_from_name(name, keysym);
	}
	for (size_t i = 0; i < N_OF(named); i++)
		if (named[i].vk == vk)
			return dg_keysym_from_name(named[i].x, keysym);
	return -ENOENT;
}

/* A code value's key: KeyA..KeyZ, Digit0..Digit9, or a key name. */
static int code_keysym(const char *code, size_t len, uint32_t *keysym)
{
	char name[2] = {0, 0};
	if (len == 4 && memcmp(code, "Key", 3) == 0 && code[3] >= 'A' && code[3] <= 'Z')
		name[0] = (char)(code[3] + 32);
	else if (len == 6 && memcmp(code, "Digit", 5) == 0 && code[5] >= '0' && code[5] <= '9')
		name[0] = code[5];
	return dg_cdp_dom_key(name[0] ? name : code, keysym);
}

/* The key of a key event (cdp-classify-priv.h): 0 with *keysym and *by
 * (the field that named it, for the summary), or with *by NULL when
 * nothing names one; -EINVAL for an unknown key, or a VK of another key
 * than the key or code names. */
static int key_of(struct ctx *c, const char *key, size_t klen, const char *code, size_t clen,
		  json_int_t vk, uint32_t *keysym, const char **by)
{
	uint32_t vks = 0, base, vbase;
	bool has_vk = vk >= 0 && vk_keysym(vk, &vks) == 0;
	char esc[DG_SHOW_BUF];
	*by = NULL;
	if (key && klen > 0) {
		if (dg_cdp_dom_key(key, keysym) < 0) {
			dg_show_bytes(key, klen, DG_SHOW_MAX, true, esc, sizeof(esc));
			return fail(c, "key", "unknown key \"%s\"", esc);
		}
		*by = "key";
	} else if (code && clen > 0 && code_keysym(code, clen, keysym) == 0) {
		*by = "code"; /* an unknown code names no key: key and VK matter */
	} else if (has_vk) {
		*keysym = vks;
		*by = "windowsVirtualKeyCode";
		return 0;
	} else {
		return 0;
	}
	if (dg_keysym_us_unshifted(*keysym, &base) < 0)
		base = *keysym;
	if (dg_keysym_us_unshifted(vks, &vbase) < 0)
		vbase = vks;
	if (has_vk && base != vbase) {
		bool k = strcmp(*by, "key") == 0;
		dg_show_bytes(k ? key : code, k ? klen : clen, DG_SHOW_MAX, true, esc, sizeof(esc));
		return fail(c, "windowsVirtualKeyCode",
			    "%" JSON_INTEGER_FORMAT " is not the code of %s \"%s\"", vk, *by, esc);
	}
	return 0;
}

/* key: the chord of mods (DG_MOD_*) and keysym; by names the field. */
static int key_chord(struct ctx *c, unsigned mods, uint32_t keysym, const char *by)
{
	struct dg_chord ch;
	char buf[CHORD_BUF];
	ch.n = dg_modifier_keysyms(mods, ch.keysyms);
	ch.keysyms[ch.n++] = keysym;
	if (dg_keys_format(&ch, 1, buf, sizeof(buf)) < 0)
		return fail(c, by, "the key 0x%x has no name", (unsigned)keysym);
	int rc = emit(c, with(action("key"), "keys", json_string(buf)), "keys", by);
	if (rc == 0)
		keep_given(c, by);
	return rc;
}

/* commands: the editing commands a key event runs, kept. */
static int commands_field(struct ctx *c)
{
	const json_t *v = json_object_get(c->params, "commands");
	if (!v)
		return 0;
	if (!json_is_array(v))
		return wrong_type(c, "commands", v, "an array of strings");
	if (json_array_size(v) > DG_CDP_COMMANDS_MAX)
		return fail(c, "commands", "%zu commands is over the limit of %d",
			    json_array_size(v), DG_CDP_COMMANDS_MAX);
	for (size_t i = 0; i < json_array_size(v); i++) {
		char where[32];
		const char *s;
		size_t len;
		snprintf(where, sizeof(where), "commands[%zu]", i);
		int rc = check_string(c, where, json_array_get(v, i), DG_CDP_WORD_MAX, &s, &len);
		if (rc < 0)
			return rc;
	}
	return 0;
}

enum { K_DOWN, K_UP, K_RAW_DOWN, K_CHAR };
static const char *const key_types[] = {"keyDown", "keyUp", "rawKeyDown", "char"};

static int key_event(struct ctx *c)
{
	int type = K_UP;
	unsigned mods = 0;
	const char *key = NULL, *code = NULL, *text = NULL, *by = NULL;
	size_t klen = 0, clen = 0, tlen = 0;
	json_int_t vk = -1;
	uint32_t keysym = 0;
	int rc = word_field(c, "type", true, key_types, N_OF(key_types), 0, &type);
	if (rc == 0)
		rc = string_field(c, "key", false, DG_CDP_WORD_MAX, &key, &klen);
	if (rc == 0)
		rc = string_field(c, "code", false, DG_CDP_WORD_MAX, &code, &clen);
	if (rc == 0)
		rc = string_field(c, "text", false, DG_ACTION_TEXT_MAX, &text, &tlen);
	if (rc == 0)
		rc = modifiers_field(c, &mods);
	if (rc == 0)
		rc = int_field(c, "windowsVirtualKeyCode", 0, INT32_MAX, -1, &vk);
	if (rc == 0)
		rc = commands_field(c);
	if (rc < 0 || type == K_UP)
		return rc;
	rc = key_of(c, key, klen, code, clen, vk, &keysym, &by);
	if (rc < 0)
		return rc;
	if (by && dg_keysym_is_modifier(keysym))
		by = NULL; /* a modifier's own press: nothing but its commands */
	if (by && (mods & (CDP_CTRL | CDP_ALT | CDP_META)))
		rc = key_chord(c, dg_mods(mods), keysym, by);
	else if (tlen > 0)
		rc = type_text(c, text, tlen);
	else if (by)
		rc = key_chord(c, dg_mods(mods), keysym, by);
	if (rc < 0)
		return rc;
	if (json_array_size(json_object_get(c->params, "commands")) > 0)
		keep_given(c, "commands");
	if (c->out->params) {
		keep(c, "type", json_string(key_types[type]));
		keep_given(c, "modifiers");
	}
	return 0;
}

/* ---- the methods ---- */

static const struct {
	const char *method;
	int (*fn)(struct ctx *c);
	const char *arg;
} methods[] = {
	{"Page.navigate", navigate, NULL},
	{"Target.createTarget", create_target, NULL},
	{"Page.reload", reload, NULL},
	{"Page.navigateToHistoryEntry", history, NULL},
	{"Input.dispatchMouseEvent", mouse, NULL},
	{"Input.emulateTouchFromMouseEvent", mouse, NULL},
	{"Input.dispatchTouchEvent", touch, NULL},
	{"Input.dispatchDragEvent", drag_event, NULL},
	{"Input.synthesizeTapGesture", gesture, "tap"},
	{"Input.synthesizePinchGesture", gesture, "pinch"},
	{"Input.synthesizeScrollGesture", gesture, "scroll"},
	{"Input.insertText", insert_text, NULL},
	{"Input.imeSetComposition", insert_text, NULL},
	{"Input.dispatchKeyEvent", key_event, NULL},
	{"Runtime.evaluate", script, "expression"},
	{"Runtime.compileScript", script, "expression"},
	{"Runtime.callFunctionOn", script, "functionDeclaration"},
	{"Page.addScriptToEvaluateOnNewDocument", script, "source"},
	{"Page.addScriptToEvaluateOnLoad", script, "scriptSource"},
	{"Debugger.evaluateOnCallFrame", script, "expression"},
	{"Debugger.setScriptSource", script, "scriptSource"},
	/* Markup and responses a page runs as it loads them (an onerror
	 * attribute, a <script>, a fulfilled response's body): decided as
	 * the page's script is, so that they need the policy to name
	 * javascript too. */
	{"DOM.setOuterHTML", script, "outerHTML"},
	{"DOM.setAttributeValue", script, "value"},
	{"DOM.setAttributesAsText", script, "text"},
	{"Page.setDocumentContent", script, "html"},
	{"Fetch.fulfillRequest", fulfill, NULL},
	{"Debugger.setBreakpoint", condition, NULL},
	{"Debugger.setBreakpointByUrl", condition, NULL},
	{"Debugger.setBreakpointOnFunctionCall", condition, NULL},
	{"DOM.setFileInputFiles", set_files, NULL},
	{"Fetch.continueRequest", continue_request, NULL},
	{"Browser.setDownloadBehavior", download, NULL},
	{"Page.setDownloadBehavior", download, NULL},
	{"Target.createBrowserContext", browser_context, NULL},
	{"Target.attachToTarget", attach, NULL},
	{"Target.setAutoAttach", auto_attach, NULL},
	{"Target.sendMessageToTarget", send_to_target, NULL},
};

void dg_cdp_class_free(struct dg_cdp_class *c)
{
	if (!c)
		return;
	json_decref(c->action);
	json_decref(c->code);
	json_decref(c->url);
	json_decref(c->params);
	memset(c, 0, sizeof(*c));
}

int dg_cdp_classify(const char *method, const json_t *params, const struct dg_cdp_view *view,
		    struct dg_cdp_class *out, struct dg_err *err)
{
	memset(out, 0, sizeof(*out));
	if (!method)
		return dg_err_set(err, -EINVAL, "method: missing");
	size_t i = 0;
	while (i < N_OF(methods) && strcmp(methods[i].method, method) != 0)
		i++;
	if (i == N_OF(methods))
		return 0;
	if (params && !json_is_object(params))
		return dg_err_set(err, -EINVAL, "%s.params: not an object", method);
	struct ctx c = {method, params, view, methods[i].arg, out, err, false};
	int rc = methods[i].fn(&c);
	if (rc == 0 && c.oom)
		rc = nomem(&c);
	if (rc < 0 || out->refuse) {
		const char *why = rc < 0 ? NULL : out->refuse;
		dg_cdp_class_free(out);
		out->refuse = why;
	}
	return rc;
}
