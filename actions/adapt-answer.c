/* adapt-answer: the answers to Anthropic and OpenAI calls (tool_result
 * blocks, computer_call_output items with their text), built from what
 * happened to a parsed message; and the base64 they carry PNGs in.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"
#include "actions/adapt-priv.h"

/* ---- base64 ------------------------------------------------------------------ */

size_t dg_base64_len(size_t n)
{
	size_t groups = n / 3 + (n % 3 != 0);
	if (groups > (SIZE_MAX - 1) / 4)
		return (size_t)-1;
	return groups * 4;
}

void dg_base64_encode(const uint8_t *in, size_t n, char *out)
{
	static const char abc[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t i = 0, o = 0;
	for (; i + 3 <= n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = abc[v & 63];
	}
	if (n - i == 1) {
		uint32_t v = (uint32_t)in[i] << 16;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = '=';
		out[o++] = '=';
	} else if (n - i == 2) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		out[o++] = abc[(v >> 6) & 63];
		out[o++] = '=';
	}
	out[o] = '\0';
}

/* ---- answers -------------------------------------------------------------------- */

/* A growing text. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->s, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Appends untrusted text s: valid UTF-8 kept, each invalid byte as U+FFFD,
 * control characters (C0, DEL, C1) as spaces (but line breaks and tabs when
 * lines), cut after max bytes of output at a character boundary, where
 * cut (a note) is appended. */
static void sb_clean(struct sbuf *b, const char *s, size_t max, bool lines, const char *cut)
{
	size_t len = strlen(s), out = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		const char *why = NULL;
		size_t l = dg_utf8_decode((const unsigned char *)s + i, len - i, &cp, &why);
		const char *piece = s + i;
		size_t plen = l;
		if (l == 0) {
			piece = "\xef\xbf\xbd";
			plen = 3;
			l = 1;
		} else if ((cp < 0x20 && !(lines && (cp == '\n' || cp == '\t'))) ||
			   (cp >= 0x7f && cp < 0xa0)) {
			piece = " ";
			plen = 1;
		}
		if (out + plen > max) {
			sb_str(b, cut);
			return;
		}
		sb_add(b, piece, plen);
		out += plen;
		i += l;
	}
}

/* A note (an error, a reason, a rule): one line, at most DG_ADAPT_NOTE_MAX
 * bytes. */
static void sb_note(struct sbuf *b, const char *s)
{
	sb_clean(b, s, DG_ADAPT_NOTE_MAX, false, "...");
}

/* true when url may go to the model as current_url: 1..DG_ACTION_URL_MAX
 * bytes of valid UTF-8 without control characters. A URL that is not is
 * left out rather than mangled: a wrong URL would mislead the model. */
static bool url_ok(const char *url)
{
	size_t len = strlen(url);
	if (len == 0 || len > DG_ACTION_URL_MAX)
		return false;
	for (size_t i = 0; i < len;) {
		uint32_t cp = 0;
		const char *why = NULL;
		size_t l = dg_utf8_decode((const unsigned char *)url + i, len - i, &cp, &why);
		if (l == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
			return false;
		i += l;
	}
	return true;
}

/* What follows "deskgate refused <action>": ": <reason> (rule <rule>,
 * verdict <verdict>)", each part there when given (the verdict when it is
 * not "deny"). */
static void refusal(struct sbuf *b, const char *verdict, const char *rule, const char *reason)
{
	if (reason) {
		sb_str(b, ": ");
		sb_note(b, reason);
	}
	bool show_verdict = verdict && strcmp(verdict, "deny") != 0;
	if (rule || show_verdict) {
		sb_str(b, " (");
		if (rule) {
			sb_str(b, "rule ");
			sb_note(b, rule);
		}
		if (show_verdict) {
			sb_str(b, rule ? ", verdict " : "verdict ");
			sb_note(b, verdict);
		}
		sb_str(b, ")");
	}
}

/* The sbuf's text, or NULL (freed) when it ran out of memory. */
static char *sb_take(struct sbuf *b)
{
	if (b->oom || !b->s) {
		free(b->s);
		return b->oom ? NULL : strdup("");
	}
	return b->s;
}

char *dg_adapt_refusal_text(const char *action, const char *verdict, const char *rule,
			    const char *reason)
{
	struct sbuf b = {0};
	sb_str(&b, "deskgate refused ");
	sb_note(&b, action);
	refusal(&b, verdict, rule, reason);
	return sb_take(&b);
}

char *dg_adapt_note_text(const char *prefix, const char *s)
{
	struct sbuf b = {0};
	sb_str(&b, prefix);
	sb_note(&b, s);
	return sb_take(&b);
}

/* The headline for a call that did not fully run (see dg_adapt_answer). */
static void headline(const struct dg_adapted *a, const struct dg_adapt_outcome *o,
		     struct sbuf *b)
{
	if (a->n == 0) {
		sb_str(b, "deskgate rejected the call: ");
		sb_note(b, o->error ? o->error : "invalid message");
		return;
	}
	bool refused = o->verdict || o->rule || o->reason;
	sb_printf(b, "deskgate %s %s", refused ? "refused" : "failed", a->name[o->done]);
	if (a->n > 1)
		sb_printf(b, " (action %d of %d)", o->done + 1, a->n);
	if (refused) {
		refusal(b, o->verdict, o->rule, o->reason);
	} else {
		sb_str(b, ": ");
		sb_note(b, o->error ? o->error : "unknown error");
	}
	if (a->n > 1) {
		int d = o->done, rest = a->n - o->done - 1;
		if (d == 0)
			sb_printf(b, ". No action ran");
		else if (d == 1)
			sb_printf(b, ". Action 1 ran");
		else
			sb_printf(b, ". Actions 1 to %d ran", d);
		if (rest == 1)
			sb_printf(b, "; action %d did not run", a->n);
		else if (rest > 1)
			sb_printf(b, "; actions %d to %d did not run", o->done + 2, a->n);
		sb_str(b, ".");
	}
}

/* base64 of the PNG, optionally after a prefix; NULL when out of memory. */
static json_t *png_string(const struct dg_adapt_outcome *o, const char *prefix)
{
	size_t plen = strlen(prefix), blen = dg_base64_len(o->png_len);
	char *buf = malloc(plen + blen + 1);
	if (!buf)
		return NULL;
	memcpy(buf, prefix, plen);
	dg_base64_encode(o->png, o->png_len, buf + plen);
	/* ASCII by construction: skip jansson's UTF-8 scan of megabytes. */
	json_t *s = json_stringn_nocheck(buf, plen + blen);
	free(buf);
	return s;
}

static bool is_action(const struct dg_adapted *a, int i, const char *type)
{
	return i >= 0 && i < a->n && dg_adapt_str_is(json_object_get(a->actions[i], "type"), type);
}

/* A tool_result's content: the text so far in b (freed here) with o->text
 * after it, or "deskgate ran <ran>" when nothing is said and no image is
 * shown; then the image. NULL when out of memory. */
static json_t *text_and_image(struct sbuf *b, const struct dg_adapt_outcome *o, const char *ran)
{
	if (o->text) {
		if (b->len)
			sb_str(b, "\n");
		sb_note(b, o->text);
	}
	if (!b->len && !o->png && ran)
		sb_printf(b, "deskgate ran %s", ran);
	json_t *content = json_array();
	bool ok = content && !b->oom;
	if (ok && b->len)
		ok = json_array_append_new(content, dg_adapt_obj("type", json_string("text"), "text",
							    json_stringn(b->s, b->len), NULL)) == 0;
	if (ok && o->png) {
		json_t *source = dg_adapt_obj("type", json_string("base64"), "media_type",
					      json_string("image/png"), "data", png_string(o, ""), NULL);
		ok = json_array_append_new(content, dg_adapt_obj("type", json_string("image"), "source",
								 source, NULL)) == 0;
	}
	free(b->s);
	b->s = NULL;
	if (!ok) {
		json_decref(content);
		return NULL;
	}
	return content;
}

static json_t *anthropic_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	struct sbuf b = {0};
	if (!o->ok)
		headline(a, o, &b);
	if (o->ok && o->has_cursor && is_action(a, a->n - 1, "cursor_position")) {
		int mx = (int)dg_adapt_scale_axis(o->cursor_x, a->scale.desk_w, a->scale.model_w);
		int my = (int)dg_adapt_scale_axis(o->cursor_y, a->scale.desk_h, a->scale.model_h);
		if (mx > a->scale.model_w - 1)
			mx = a->scale.model_w - 1;
		if (my > a->scale.model_h - 1)
			my = a->scale.model_h - 1;
		sb_printf(&b, "X=%d,Y=%d", mx, my);
	}
	json_t *content = text_and_image(&b, o, a->n > 0 ? a->name[a->n - 1] : NULL);
	if (!content)
		return NULL;
	json_t *r = dg_adapt_obj("type", json_string("tool_result"), "content", content, "is_error",
			    json_boolean(!o->ok), NULL);
	if (r && a->has_id && json_object_set_new(r, "tool_use_id", json_string(a->call_id)) != 0) {
		json_decref(r);
		return NULL;
	}
	/* A toolset member's result names its toolset, as the SDK's own
	 * toolResult() does. */
	if (r && a->toolset && json_object_set_new(r, "toolset_name", json_string("computer")) != 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* A browser member's answer text (a page's tree, its text): its lines
 * kept, at most DG_ADAPT_BODY_MAX bytes. */
static void sb_body(struct sbuf *b, const char *s)
{
	char cut[80];
	snprintf(cut, sizeof(cut), "\n[deskgate cut this answer at %d bytes]", DG_ADAPT_BODY_MAX);
	sb_clean(b, s, DG_ADAPT_BODY_MAX, true, cut);
}

/* A string of the worker's tab list as the model may read it: valid UTF-8
 * without control characters, else "" (a tab's title or URL may be
 * anything a page wrote). */
static json_t *tab_string(const json_t *v)
{
	const char *s = json_string_value(v);
	return json_string(s && url_ok(s) ? s : "");
}

/* The browser_state block (BetaBrowserStateBlockParam): every tab after the
 * call, exactly one active when any is open, and the tabs it opened. */
static json_t *browser_state(const struct dg_adapt_outcome *o)
{
	json_t *tabs = json_array(), *changes = json_array();
	size_t n = json_array_size(o->tabs);
	/* Among the entries that are tabs (a string id; any other is left
	 * out), the first marked active, else (none in front: a page
	 * closing) the newest. */
	size_t active = n, newest = n;
	for (size_t i = 0; i < n; i++) {
		const json_t *t = json_array_get(o->tabs, i);
		if (!json_is_string(json_object_get(t, "id")))
			continue;
		newest = i;
		if (json_is_true(json_object_get(t, "active")) && active == n)
			active = i;
	}
	if (active == n)
		active = newest;
	bool ok = tabs && changes;
	for (size_t i = 0; ok && i < n; i++) {
		const json_t *t = json_array_get(o->tabs, i);
		const json_t *id = json_object_get(t, "id");
		if (!json_is_string(id))
			continue;
		json_t *e = dg_adapt_obj("tab_id", json_copy((json_t *)id), "title",
					 tab_string(json_object_get(t, "title")), "url",
					 tab_string(json_object_get(t, "url")), "active",
					 json_boolean(i == active), NULL);
		ok = e && json_array_append_new(tabs, e) == 0;
		bool before = false;
		for (size_t k = 0; k < json_array_size(o->tabs_before); k++)
			before = before || json_equal(json_array_get(o->tabs_before, k), (json_t *)id);
		if (ok && o->tabs_before && !before)
			ok = json_array_append_new(changes, dg_adapt_obj("type", json_string("tab_opened"),
							"tab_id", json_copy((json_t *)id), NULL)) == 0;
	}
	json_t *st = ok ? dg_adapt_obj("type", json_string("browser_state"), "tabs", tabs, NULL) : NULL;
	if (!ok)
		json_decref(tabs);
	/* "Nothing to report is expressed by omitting the field, never by an
	 * empty list." */
	if (st && json_array_size(changes) > 0 && json_object_set(st, "state_changes", changes) != 0) {
		json_decref(st);
		st = NULL;
	}
	json_decref(changes);
	return st;
}

/* A browser member's tool_result: text (the refusal or failure, else the
 * member's answer), the screenshot when the member shows one, and
 * browser_state; "toolset_name": "browser". */
json_t *dg_adapt_browser_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	struct sbuf b = {0};
	if (!o->ok)
		headline(a, o, &b);
	else if (o->body)
		sb_body(&b, o->body);
	json_t *content = text_and_image(&b, o, a->n > 0 ? a->name[0] : NULL);
	if (content && o->tabs && json_array_append_new(content, browser_state(o)) != 0) {
		json_decref(content);
		return NULL;
	}
	json_t *r = dg_adapt_obj("type", json_string("tool_result"), "content", content, "is_error",
				 json_boolean(!o->ok), "toolset_name", json_string("browser"), NULL);
	if (r && a->has_id && json_object_set_new(r, "tool_use_id", json_string(a->call_id)) != 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

static json_t *openai_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o)
{
	/* Exactly ResponseInputItem.ComputerCallOutput of the openai SDK: its
	 * output (ResponseComputerToolCallOutputScreenshot) has type, file_id,
	 * image_url and nothing else, and the item has no URL field either; the
	 * page's URL goes to the model in the user message below. */
	json_t *output = dg_adapt_obj("type", json_string("computer_screenshot"), "image_url",
				 png_string(o, "data:image/png;base64,"), NULL);
	json_t *acks = a->safety_checks ? json_deep_copy(a->safety_checks) : json_array();
	json_t *item = dg_adapt_obj("type", json_string("computer_call_output"), "call_id",
			       json_string(a->call_id), "acknowledged_safety_checks", acks, "output",
			       output, NULL);
	json_t *items = json_array();
	if (!item || !items || json_array_append_new(items, item) != 0) {
		json_decref(items);
		return NULL;
	}
	struct sbuf b = {0};
	if (!o->ok)
		headline(a, o, &b);
	if (o->text) {
		if (b.len)
			sb_str(&b, "\n");
		sb_note(&b, o->text);
	}
	if (o->url && url_ok(o->url)) {
		if (b.len)
			sb_str(&b, "\n");
		sb_str(&b, "current_url: ");
		sb_str(&b, o->url);
	}
	bool ok = !b.oom;
	if (ok && b.len) {
		json_t *part = dg_adapt_obj("type", json_string("input_text"), "text",
				       json_stringn(b.s, b.len), NULL);
		json_t *msg = dg_adapt_obj("type", json_string("message"), "role", json_string("user"),
				      "content", json_pack("[o]", part), NULL);
		ok = json_array_append_new(items, msg) == 0;
	}
	free(b.s);
	if (!ok) {
		json_decref(items);
		return NULL;
	}
	return items;
}

int dg_adapt_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o, json_t **out,
		    struct dg_err *err)
{
	*out = NULL;
	if (!a || !o)
		return dg_err_set(err, -EINVAL, "answer: no call or no outcome");
	if (a->wire != DG_WIRE_ANTHROPIC && a->wire != DG_WIRE_OPENAI)
		return dg_err_set(err, -EINVAL, "answer: %s messages are answered by the gateway",
				  dg_wire_name(a->wire));
	if (a->n < 0 || a->n > DG_ADAPT_ACTIONS_MAX)
		return dg_err_set(err, -EINVAL, "answer: %d actions", a->n);
	if (a->n == 0 && (o->ok || o->done != 0))
		return dg_err_set(err, -EINVAL,
				  "answer: a call that did not parse cannot have run (ok %d, done %d)",
				  (int)o->ok, o->done);
	if (a->n > 0 && o->ok && o->done != a->n)
		return dg_err_set(err, -EINVAL, "answer: ok but %d of %d actions done", o->done,
				  a->n);
	if (a->n > 0 && !o->ok && (o->done < 0 || o->done >= a->n))
		return dg_err_set(err, -EINVAL,
				  "answer: action %d stopped the call, but it has %d actions", o->done,
				  a->n);
	if (o->has_cursor && (o->cursor_x < 0 || o->cursor_x >= a->scale.desk_w ||
			      o->cursor_y < 0 || o->cursor_y >= a->scale.desk_h))
		return dg_err_set(err, -EINVAL, "answer: cursor (%d, %d) is off the desktop (%dx%d)",
				  o->cursor_x, o->cursor_y, a->scale.desk_w, a->scale.desk_h);
	if (o->ok && !o->has_cursor && a->wire == DG_WIRE_ANTHROPIC &&
	    is_action(a, a->n - 1, "cursor_position"))
		return dg_err_set(err, -EINVAL, "answer: cursor_position ran but no cursor is given");
	if (!o->png && o->png_len)
		return dg_err_set(err, -EINVAL, "answer: %zu PNG bytes but no PNG", o->png_len);
	if (o->png && o->png_len > DG_ADAPT_PNG_MAX)
		return dg_err_set(err, -E2BIG, "answer: PNG of %zu bytes is over the limit of %d bytes",
				  o->png_len, DG_ADAPT_PNG_MAX);
	json_t *r;
	if (a->wire == DG_WIRE_ANTHROPIC && a->browser) {
		r = dg_adapt_browser_answer(a, o);
	} else if (a->wire == DG_WIRE_ANTHROPIC) {
		r = anthropic_answer(a, o);
	} else {
		if (!a->has_id)
			return dg_err_set(err, -EINVAL, "answer: the call has no call_id to answer to");
		if (!o->png)
			return dg_err_set(err, -EINVAL,
					  "answer: an OpenAI answer needs the screenshot");
		r = openai_answer(a, o);
	}
	if (!r)
		return dg_err_set(err, -ENOMEM, "answer: out of memory");
	*out = r;
	return 0;
}
