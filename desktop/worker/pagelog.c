/* pagelog: per-tab console and network logs (see pagelog-priv.h for the
 * contract, the formats and the bounds).
 *
 * Layout: a table of sessions (the guard's, each mapped to a tab and
 * marked watched or not), a table of tabs, and per tab two rings of
 * entries (console, network) of DG_PAGELOG_ENTRIES_MAX slots, allocated
 * at a tab's first entry of that kind. A console entry is its finished
 * line; a network entry its URL (cut) and a small record that the later
 * events of the request (found by requestId, newest first) complete. Each
 * entry's cost (its strings and records) counts against
 * DG_PAGELOG_BYTES_MAX; past it the fullest ring loses its oldest entry.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/worker/cdp-priv.h"
#include "desktop/worker/pagelog-priv.h"

#define ID_MAX 64 /* bytes of a sessionId, targetId, requestId (DG_CDP_ID_MAX) */

enum state { R_PENDING, R_DONE, R_REDIRECTED, R_FAILED, R_BLOCKED };

/* A network request (one hop of it). */
struct request {
	char rid[ID_MAX + 1];
	char method[DG_PAGELOG_WORD_MAX + 1];
	char mime[DG_PAGELOG_WORD_MAX + 1];
	char error[DG_PAGELOG_WORD_MAX + 1]; /* R_FAILED: the browser's net::ERR_... */
	enum state state;
	int status;                          /* HTTP status; 0: no response yet */
	double t0, t1;                       /* browser monotonic seconds; t1 once over */
};

struct entry {
	char *text;           /* console: the line; network: the URL as shown */
	struct request *req;  /* network only */
	size_t cost;
};

struct ring {
	struct entry *e;      /* DG_PAGELOG_ENTRIES_MAX slots, or NULL before the first */
	int head, n;          /* oldest slot, how many */
	uint64_t dropped;     /* since the last read */
	size_t bytes;
};

struct tab {
	bool used;
	char id[ID_MAX + 1];
	struct ring ring[2];  /* by enum dg_pagelog_kind */
};

struct session {
	bool used, watched;
	/* The console's object group: a release in flight, and console
	 * objects wrapped since it was sent (see hold()). */
	bool releasing, dirty;
	unsigned gen;         /* bumped at each use of the slot */
	char id[ID_MAX + 1];
	char target[ID_MAX + 1];
	int tab;              /* index in tabs */
};

struct dg_pagelog {
	struct dg_cdp *cdp;   /* for the releases; NULL: none */
	unsigned next_gen;
	struct session sessions[DG_PAGELOG_SESSIONS_MAX];
	struct tab tabs[DG_PAGELOG_TABS_MAX];
	size_t bytes;
	struct dg_pagelog_stats st;
};

/* ---- small helpers ---- */

/* A string from the browser usable as an id: 1..ID_MAX printable ASCII. */
static const char *id_of(const json_t *v)
{
	const char *s = json_string_value(v);
	size_t n = s ? json_string_length(v) : 0;
	if (n == 0 || n > ID_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return NULL;
	return s;
}

/* A short word from the browser (level, method, MIME type, error text)
 * copied into out (DG_PAGELOG_WORD_MAX + 1 bytes): printable ASCII of at
 * most DG_PAGELOG_WORD_MAX bytes, else fallback. */
static void word(const json_t *v, const char *fallback, char *out)
{
	const char *s = json_string_value(v);
	size_t n = s ? json_string_length(v) : 0;
	bool ok = n > 0 && n <= DG_PAGELOG_WORD_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)s[i] > 0x20 && (unsigned char)s[i] < 0x7f;
	snprintf(out, DG_PAGELOG_WORD_MAX + 1, "%s", ok ? s : fallback);
}

/* A finite number from the browser, or NAN. */
static double number(const json_t *v)
{
	return json_is_number(v) && isfinite(json_number_value(v)) ? json_number_value(v) : NAN;
}

/* ---- bounded text ---- */

/* Text built up to cap bytes (cap <= TEXT_CAP); what does not fit is
 * counted in want (the bytes it would have taken), never kept. Control
 * characters are escaped as they go in, so an entry stays one line; a
 * character is kept whole or not at all (the input is UTF-8: jansson
 * checked it). */
#define TEXT_CAP (DG_PAGELOG_TEXT_MAX > DG_PAGELOG_URL_MAX ? DG_PAGELOG_TEXT_MAX : DG_PAGELOG_URL_MAX)
struct text {
	char buf[TEXT_CAP + 1];
	size_t len, cap;
	size_t want;          /* bytes of the whole text, kept or not */
	bool full;
};

static void text_init(struct text *t, size_t cap)
{
	t->len = t->want = 0;
	t->cap = cap;
	t->full = false;
	t->buf[0] = '\0';
}

/* The length of the UTF-8 character at s (n bytes left), or 0 when the
 * bytes there are not one (escaped then, byte by byte: jansson's strings
 * are valid UTF-8, this only keeps the output valid whatever comes in). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] < 0x80 ? 1 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2
		   : s[0] >= 0xe0 && s[0] < 0xf0 ? 3 : s[0] >= 0xf0 && s[0] < 0xf5 ? 4 : 0;
	if (len == 0 || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

static void text_put(struct text *t, const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		const unsigned char *c = (const unsigned char *)s + i;
		char esc[8];
		const char *piece = s + i;
		size_t len = utf8_len(c, n - i), adv = len;
		if (len == 0 || c[0] < 0x20 || c[0] == 0x7f) {
			piece = esc;
			adv = 1;
			len = (size_t)(c[0] == '\n' ? snprintf(esc, sizeof(esc), "\\n")
				       : c[0] == '\r' ? snprintf(esc, sizeof(esc), "\\r")
				       : c[0] == '\t' ? snprintf(esc, sizeof(esc), "\\t")
						   : snprintf(esc, sizeof(esc), "\\x%02x", c[0]));
		}
		t->want += len;
		if (!t->full && t->len + len <= t->cap) {
			memcpy(t->buf + t->len, piece, len);
			t->len += len;
			t->buf[t->len] = '\0';
		} else {
			t->full = true;
		}
		i += adv;
	}
}

static void text_puts(struct text *t, const char *s)
{
	text_put(t, s, strlen(s));
}

/* The cut marker, after the text when it was cut. */
static int cut_note(const struct text *t, char *out, size_t len)
{
	if (t->want <= t->len)
		return snprintf(out, len, "%s", "");
	return snprintf(out, len, "\xe2\x80\xa6[cut: %zu bytes in all]", t->want);
}

/* ---- rendering remote objects as the console shows them ---- */

static void put_value(struct text *t, json_t *o);

/* A one-level preview: {a: 1, b: "x"} or [1, 2], "…" when the browser
 * left properties out. */
static void put_preview(struct text *t, json_t *pv, bool array)
{
	json_t *props = json_object_get(pv, "properties");
	text_puts(t, array ? "[" : "{");
	size_t i;
	json_t *p;
	json_array_foreach(props, i, p) {
		if (i > 0)
			text_puts(t, ", ");
		const char *name = json_string_value(json_object_get(p, "name"));
		const char *type = json_string_value(json_object_get(p, "type"));
		const char *value = json_string_value(json_object_get(p, "value"));
		if (!array && name) {
			text_puts(t, name);
			text_puts(t, ": ");
		}
		if (type && strcmp(type, "accessor") == 0) {
			text_puts(t, "(...)");
		} else if (type && strcmp(type, "string") == 0 && value) {
			text_puts(t, "\"");
			text_puts(t, value);
			text_puts(t, "\"");
		} else {
			text_puts(t, value ? value : type ? type : "?");
		}
	}
	if (json_is_true(json_object_get(pv, "overflow")))
		text_puts(t, json_array_size(props) ? ", \xe2\x80\xa6" : "\xe2\x80\xa6");
	text_puts(t, array ? "]" : "}");
}

/* A Runtime.RemoteObject: a string as itself, a number or other primitive
 * as the browser writes it, a plain object or array as its preview,
 * anything else (nodes, errors, functions, maps...) by its description. */
static void put_value(struct text *t, json_t *o)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *subtype = json_string_value(json_object_get(o, "subtype"));
	json_t *value = json_object_get(o, "value");
	const char *unser = json_string_value(json_object_get(o, "unserializableValue"));
	const char *desc = json_string_value(json_object_get(o, "description"));
	json_t *pv = json_object_get(o, "preview");
	if (!type) {
		text_puts(t, "?");
	} else if (strcmp(type, "string") == 0 && json_is_string(value)) {
		text_put(t, json_string_value(value), json_string_length(value));
	} else if (strcmp(type, "undefined") == 0) {
		text_puts(t, "undefined");
	} else if (strcmp(type, "object") == 0 && subtype && strcmp(subtype, "null") == 0) {
		text_puts(t, "null");
	} else if (strcmp(type, "object") == 0 && json_is_object(pv) &&
		   (!subtype || strcmp(subtype, "array") == 0)) {
		put_preview(t, pv, subtype != NULL);
	} else if (unser) {
		text_puts(t, unser);
	} else if (desc) {
		text_puts(t, desc);
	} else if (value && !json_is_object(value) && !json_is_array(value)) {
		char *s = json_dumps(value, JSON_ENCODE_ANY);
		text_puts(t, s ? s : "?");
		free(s);
	} else {
		text_puts(t, type);
	}
}

/* The console's arguments: a first string argument is a format (%s %d %i
 * %f %o %O take the next argument, %c takes one and shows nothing, %%
 * is %); the arguments left follow, separated by spaces. */
static void put_args(struct text *t, json_t *args)
{
	size_t n = json_array_size(args), next = 0;
	json_t *first = json_array_get(args, 0);
	const char *first_type = json_string_value(json_object_get(first, "type"));
	if (json_is_string(json_object_get(first, "value")) && first_type &&
	    strcmp(first_type, "string") == 0) {
		json_t *fv = json_object_get(first, "value");
		const char *f = json_string_value(fv);
		size_t len = json_string_length(fv);
		next = 1;
		for (size_t i = 0; i < len;) {
			const char *pct = memchr(f + i, '%', len - i);
			size_t span = pct ? (size_t)(pct - (f + i)) : len - i;
			text_put(t, f + i, span);
			i += span;
			if (!pct)
				break;
			char spec = i + 1 < len ? f[i + 1] : '\0';
			if (spec == '%') {
				text_puts(t, "%");
			} else if (spec && strchr("sdifoOc", spec) && next < n) {
				json_t *a = json_array_get(args, next++);
				double v = number(json_object_get(a, "value"));
				if ((spec == 'd' || spec == 'i') && !isnan(v) && fabs(v) < 1e18) {
					char num[32];
					snprintf(num, sizeof(num), "%lld", (long long)v);
					text_puts(t, num);
				} else if (spec != 'c') {
					put_value(t, a);
				}
			} else {
				text_put(t, f + i, spec ? 2 : 1); /* not a specifier, or no argument */
			}
			i += spec ? 2 : 1;
		}
	}
	for (; next < n; next++) {
		if (t->want > 0)
			text_puts(t, " ");
		put_value(t, json_array_get(args, next));
	}
}

/* HH:MM:SS.mmm (UTC) of a browser timestamp in ms since the epoch. */
static void clock_text(double ms, char out[32])
{
	if (isnan(ms) || ms < 0 || ms > 1e15) {
		snprintf(out, 32, "--:--:--.---");
		return;
	}
	long long t = (long long)ms, s = t / 1000;
	snprintf(out, 32, "%02u:%02u:%02u.%03u", (unsigned)(s / 3600 % 24), (unsigned)(s / 60 % 60),
		 (unsigned)(s % 60), (unsigned)(t % 1000));
}

/* ---- tabs, sessions, rings ---- */

static int session_find(const struct dg_pagelog *l, const char *id)
{
	for (int i = 0; id && i < DG_PAGELOG_SESSIONS_MAX; i++)
		if (l->sessions[i].used && strcmp(l->sessions[i].id, id) == 0)
			return i;
	return -1;
}

static int tab_find(const struct dg_pagelog *l, const char *id)
{
	for (int i = 0; id && i < DG_PAGELOG_TABS_MAX; i++)
		if (l->tabs[i].used && strcmp(l->tabs[i].id, id) == 0)
			return i;
	return -1;
}

static struct entry *ring_at(struct ring *r, int k)
{
	return &r->e[(r->head + k) % DG_PAGELOG_ENTRIES_MAX];
}

static void entry_free(struct dg_pagelog *l, struct ring *r, struct entry *e)
{
	r->bytes -= e->cost;
	l->bytes -= e->cost;
	free(e->text);
	free(e->req);
	memset(e, 0, sizeof(*e));
}

static void drop_oldest(struct dg_pagelog *l, struct ring *r)
{
	entry_free(l, r, ring_at(r, 0));
	r->head = (r->head + 1) % DG_PAGELOG_ENTRIES_MAX;
	r->n--;
	r->dropped++;
	l->st.dropped++;
}

/* The total over its bound: the oldest entries of the fullest rings go. */
static void enforce_total(struct dg_pagelog *l)
{
	while (l->bytes > DG_PAGELOG_BYTES_MAX) {
		struct ring *big = NULL;
		for (int i = 0; i < DG_PAGELOG_TABS_MAX; i++)
			for (int k = 0; l->tabs[i].used && k < 2; k++)
				if (l->tabs[i].ring[k].n > 0 &&
				    (!big || l->tabs[i].ring[k].bytes > big->bytes))
					big = &l->tabs[i].ring[k];
		if (!big)
			return;
		drop_oldest(l, big);
	}
}

/* Appends an entry (text and req are taken; when either is missing, out
 * of memory, the entry is counted as dropped). */
static void ring_push(struct dg_pagelog *l, struct ring *r, char *text, struct request *req)
{
	if (!r->e)
		r->e = calloc(DG_PAGELOG_ENTRIES_MAX, sizeof(*r->e));
	if (!r->e || !text) {
		free(text);
		free(req);
		r->dropped++;
		l->st.dropped++;
		return;
	}
	if (r->n == DG_PAGELOG_ENTRIES_MAX)
		drop_oldest(l, r);
	struct entry *e = ring_at(r, r->n++);
	e->text = text;
	e->req = req;
	e->cost = sizeof(*e) + strlen(text) + 1 + (req ? sizeof(*req) : 0);
	r->bytes += e->cost;
	l->bytes += e->cost;
	l->st.entries++;
	enforce_total(l);
}

static void ring_clear(struct dg_pagelog *l, struct ring *r)
{
	for (int k = 0; r->e && k < r->n; k++)
		entry_free(l, r, ring_at(r, k));
	free(r->e);
	memset(r, 0, sizeof(*r));
}

static void tab_drop(struct dg_pagelog *l, int i)
{
	ring_clear(l, &l->tabs[i].ring[0]);
	ring_clear(l, &l->tabs[i].ring[1]);
	l->tabs[i].used = false;
	for (int s = 0; s < DG_PAGELOG_SESSIONS_MAX; s++)
		if (l->sessions[s].used && l->sessions[s].tab == i)
			l->sessions[s].used = false;
}

/* ---- the public API ---- */

struct dg_pagelog *dg_pagelog_new(struct dg_cdp *cdp)
{
	struct dg_pagelog *l = calloc(1, sizeof(struct dg_pagelog));
	if (l)
		l->cdp = cdp;
	return l;
}

void dg_pagelog_free(struct dg_pagelog *l)
{
	if (!l)
		return;
	for (int i = 0; i < DG_PAGELOG_TABS_MAX; i++)
		if (l->tabs[i].used)
			tab_drop(l, i);
	free(l);
}

void dg_pagelog_attached(struct dg_pagelog *l, const char *parent, const char *session,
			 const char *target_id, const char *type, dg_pagelog_send_fn send,
			 void *arg)
{
	if (!l || !session || !target_id || !type || !session[0] || !target_id[0] ||
	    strlen(session) > ID_MAX || strlen(target_id) > ID_MAX)
		return;
	bool page = strcmp(type, "page") == 0;
	if (!page && strcmp(type, "iframe") != 0 && strcmp(type, "worker") != 0)
		return; /* shared and service workers, the browser: no tab */
	if (session_find(l, session) >= 0)
		return; /* told twice */
	int tab = -1;
	if (page) {
		tab = tab_find(l, target_id);
		for (int i = 0; tab < 0 && i < DG_PAGELOG_TABS_MAX; i++) {
			if (!l->tabs[i].used) {
				tab = i;
				memset(&l->tabs[i], 0, sizeof(l->tabs[i]));
				l->tabs[i].used = true;
				snprintf(l->tabs[i].id, sizeof(l->tabs[i].id), "%s", target_id);
			}
		}
		if (tab < 0) {
			l->st.tabs_refused++;
			return;
		}
	} else {
		int p = session_find(l, parent);
		if (p < 0)
			return; /* a child of a session we do not know: no tab */
		tab = l->sessions[p].tab;
	}
	int s = -1;
	for (int i = 0; s < 0 && i < DG_PAGELOG_SESSIONS_MAX; i++)
		if (!l->sessions[i].used)
			s = i;
	if (s < 0) {
		l->st.sessions_refused++;
		return;
	}
	/* One watched session a target: a second (the DevTools client's own
	 * attach) would repeat every entry. */
	bool first = true;
	for (int i = 0; i < DG_PAGELOG_SESSIONS_MAX; i++)
		if (l->sessions[i].used && l->sessions[i].watched &&
		    strcmp(l->sessions[i].target, target_id) == 0)
			first = false;
	struct session *se = &l->sessions[s];
	*se = (struct session){.used = true, .watched = first, .tab = tab, .gen = ++l->next_gen};
	snprintf(se->id, sizeof(se->id), "%s", session);
	snprintf(se->target, sizeof(se->target), "%s", target_id);
	if (!se->watched || !send)
		return;
	send(arg, "Runtime.enable", NULL);
	/* No response bodies kept in the renderer for Network.getResponseBody
	 * (nobody asks; by default it keeps up to 100 MB of them). */
	send(arg, "Network.enable",
	     json_pack("{s:i, s:i}", "maxTotalBufferSize", 0, "maxResourceBufferSize", 0));
	send(arg, "Log.enable", NULL);
}

/* ---- the console's objects ---- */

/* With Runtime enabled, every object a console call or an exception
 * passes is wrapped for the session (object group "console") and kept
 * alive by the page for as long as the group lives: measured with
 * Chromium 156, 20,000 console.log calls of an 8 KB array held 81 MB of
 * the page's heap, 4.5 MB without the session. The log needs none of
 * them (it keeps text), so the group is released after the entries that
 * made objects: one release in flight a session, and one more after it
 * when more came meanwhile. */
struct release_ref {
	struct dg_pagelog *l;
	int session;
	unsigned gen;
};

static void release(struct dg_pagelog *l, int i);

static void release_done(void *arg, int status, json_t *result, const char *error_message)
{
	(void)result, (void)error_message;
	struct release_ref *ref = arg;
	if (status != -ECANCELED) { /* cancelled: the client is going, maybe the log too */
		struct session *se = &ref->l->sessions[ref->session];
		if (se->used && se->gen == ref->gen) {
			se->releasing = false;
			if (se->dirty)
				release(ref->l, ref->session);
		}
	}
	free(ref);
}

static void release(struct dg_pagelog *l, int i)
{
	struct session *se = &l->sessions[i];
	struct release_ref *ref = l->cdp ? malloc(sizeof(*ref)) : NULL;
	if (!ref)
		return;
	*ref = (struct release_ref){l, i, se->gen};
	json_t *p = json_pack("{s:s}", "objectGroup", "console");
	if (dg_cdp_send(l->cdp, "Runtime.releaseObjectGroup", p, se->id, release_done, ref, NULL)) {
		free(ref); /* the queue is full: the next entry tries again */
		se->dirty = true;
		return;
	}
	se->releasing = true;
	se->dirty = false;
}

/* An entry of session i passed values (a remote object, or an array of
 * them): when one is an object (has an objectId), the group is released. */
static void hold(struct dg_pagelog *l, int i, json_t *values)
{
	bool any = json_object_get(values, "objectId") != NULL;
	size_t k;
	json_t *v;
	json_array_foreach(values, k, v)
		any = any || json_object_get(v, "objectId");
	if (!any)
		return;
	if (l->sessions[i].releasing)
		l->sessions[i].dirty = true;
	else
		release(l, i);
}

/* ---- console ---- */

/* Where an entry comes from: a call frame's or exception details' URL
 * (into loc, when there is one) and 1-based line (0: unknown). */
struct where {
	struct text url;
	int line;
};

static void put_location(struct where *w, json_t *from)
{
	json_t *url = json_object_get(from, "url");
	double line = number(json_object_get(from, "lineNumber"));
	text_init(&w->url, DG_PAGELOG_URL_MAX);
	w->line = 0;
	if (!json_is_string(url) || json_string_length(url) == 0)
		return;
	text_put(&w->url, json_string_value(url), json_string_length(url));
	if (!isnan(line) && line >= 0 && line < 1e9)
		w->line = (int)line + 1; /* the browser counts from 0 */
}

/* [LEVEL] TIME MESSAGE[SUFFIX][ (URL[:LINE])] */
static void console_entry(struct dg_pagelog *l, int tab, const char *level, double ms,
			  const struct text *msg, const struct where *w, const char *suffix)
{
	char clock[32], cut[64], url_cut[64], line_no[16] = "";
	clock_text(ms, clock);
	cut_note(msg, cut, sizeof(cut));
	cut_note(&w->url, url_cut, sizeof(url_cut));
	if (w->line > 0)
		snprintf(line_no, sizeof(line_no), ":%d", w->line);
	char *line = NULL;
	int r;
	if (w->url.want > 0)
		r = asprintf(&line, "[%s] %s%s%s%s%s (%s%s%s)", level, clock, msg->want ? " " : "",
			     msg->buf, cut, suffix, w->url.buf, url_cut, line_no);
	else
		r = asprintf(&line, "[%s] %s%s%s%s%s", level, clock, msg->want ? " " : "", msg->buf,
			     cut, suffix);
	if (r < 0)
		line = NULL;
	ring_push(l, &l->tabs[tab].ring[DG_PAGELOG_CONSOLE], line, NULL);
}

static void on_console(struct dg_pagelog *l, int tab, json_t *params)
{
	json_t *args = json_object_get(params, "args");
	if (!json_is_array(args)) {
		l->st.refused++;
		return;
	}
	char level[DG_PAGELOG_WORD_MAX + 1];
	word(json_object_get(params, "type"), "log", level);
	struct text msg;
	struct where loc;
	text_init(&msg, DG_PAGELOG_TEXT_MAX);
	put_args(&msg, args);
	json_t *frames = json_object_get(json_object_get(params, "stackTrace"), "callFrames");
	put_location(&loc, json_array_get(frames, 0));
	console_entry(l, tab, level, number(json_object_get(params, "timestamp")), &msg, &loc, "");
}

static void on_exception(struct dg_pagelog *l, int tab, json_t *params)
{
	json_t *d = json_object_get(params, "exceptionDetails");
	if (!json_is_object(d)) {
		l->st.refused++;
		return;
	}
	struct text msg;
	struct where loc;
	text_init(&msg, DG_PAGELOG_TEXT_MAX);
	json_t *text = json_object_get(d, "text"), *exc = json_object_get(d, "exception");
	if (json_is_string(text))
		text_put(&msg, json_string_value(text), json_string_length(text));
	if (json_is_object(exc)) {
		if (msg.want > 0)
			text_puts(&msg, " ");
		put_value(&msg, exc);
	}
	json_t *frames = json_object_get(json_object_get(d, "stackTrace"), "callFrames");
	put_location(&loc, json_array_size(frames) ? json_array_get(frames, 0) : d);
	console_entry(l, tab, "exception", number(json_object_get(params, "timestamp")), &msg, &loc,
		      "");
}

static void on_log(struct dg_pagelog *l, int tab, json_t *params)
{
	json_t *e = json_object_get(params, "entry");
	json_t *text = json_object_get(e, "text");
	if (!json_is_string(text)) {
		l->st.refused++;
		return;
	}
	char level[DG_PAGELOG_WORD_MAX + 1];
	word(json_object_get(e, "level"), "info", level);
	struct text msg;
	struct where loc;
	text_init(&msg, DG_PAGELOG_TEXT_MAX);
	text_put(&msg, json_string_value(text), json_string_length(text));
	put_location(&loc, e);
	/* "Failed to load resource: net::ERR_BLOCKED_BY_CLIENT.Inspector" is
	 * the guard's refusal: say so in words. */
	bool blocked = strstr(json_string_value(text), "net::ERR_BLOCKED_BY_CLIENT") != NULL;
	console_entry(l, tab, level, number(json_object_get(e, "timestamp")), &msg, &loc,
		      blocked ? " (blocked by the session's policy)" : "");
}

/* ---- network ---- */

/* The newest request of the ring with this requestId still in flight. */
static struct request *request_find(struct ring *r, const char *rid)
{
	for (int k = r->n - 1; k >= 0; k--) {
		struct request *q = ring_at(r, k)->req;
		if (q && q->state == R_PENDING && strcmp(q->rid, rid) == 0)
			return q;
	}
	return NULL;
}

static void response_of(struct request *q, json_t *resp)
{
	double status = number(json_object_get(resp, "status"));
	if (!isnan(status) && status >= 0 && status < 1000)
		q->status = (int)status;
	word(json_object_get(resp, "mimeType"), "-", q->mime);
}

static void on_network(struct dg_pagelog *l, int tab, const char *method, json_t *params)
{
	struct ring *r = &l->tabs[tab].ring[DG_PAGELOG_NETWORK];
	const char *rid = id_of(json_object_get(params, "requestId"));
	double ts = number(json_object_get(params, "timestamp"));
	if (!rid) {
		l->st.refused++;
		return;
	}
	if (strcmp(method, "Network.requestWillBeSent") == 0) {
		json_t *req = json_object_get(params, "request");
		json_t *url = json_object_get(req, "url");
		if (!json_is_string(url)) {
			l->st.refused++;
			return;
		}
		/* A redirect: the hop before ends with the redirect's response. */
		json_t *redirect = json_object_get(params, "redirectResponse");
		struct request *prev = json_is_object(redirect) ? request_find(r, rid) : NULL;
		if (prev) {
			response_of(prev, redirect);
			prev->state = R_REDIRECTED;
			prev->t1 = ts;
		}
		struct request *q = calloc(1, sizeof(*q));
		struct text u;
		text_init(&u, DG_PAGELOG_URL_MAX);
		text_put(&u, json_string_value(url), json_string_length(url));
		char cut[64], *shown = NULL;
		cut_note(&u, cut, sizeof(cut));
		if (asprintf(&shown, "%s%s", u.buf, cut) < 0)
			shown = NULL;
		if (q) {
			snprintf(q->rid, sizeof(q->rid), "%s", rid);
			word(json_object_get(req, "method"), "?", q->method);
			snprintf(q->mime, sizeof(q->mime), "-");
			q->t0 = ts;
			q->t1 = NAN;
		}
		if (!q) {
			free(shown);
			shown = NULL;
		}
		ring_push(l, r, shown, q);
		return;
	}
	struct request *q = request_find(r, rid);
	if (!q)
		return; /* dropped, or from before the attach */
	if (strcmp(method, "Network.responseReceived") == 0) {
		response_of(q, json_object_get(params, "response"));
	} else if (strcmp(method, "Network.loadingFinished") == 0) {
		q->state = R_DONE;
		q->t1 = ts;
	} else if (strcmp(method, "Network.loadingFailed") == 0) {
		const char *reason = json_string_value(json_object_get(params, "blockedReason"));
		const char *etext = json_string_value(json_object_get(params, "errorText"));
		/* The guard fails a refused request with BlockedByClient at the
		 * browser's Fetch domain: the page session reports it as blocked
		 * by the "inspector". */
		bool blocked = (reason && strcmp(reason, "inspector") == 0) ||
			       (etext && strncmp(etext, "net::ERR_BLOCKED_BY_CLIENT", 26) == 0);
		q->state = blocked ? R_BLOCKED : R_FAILED;
		word(json_object_get(params, "errorText"), "unknown error", q->error);
		q->t1 = ts;
	}
}

void dg_pagelog_event(struct dg_pagelog *l, const char *method, const char *session,
		      json_t *params)
{
	if (!l || !method)
		return;
	if (strcmp(method, "Target.targetDestroyed") == 0) {
		int t = tab_find(l, id_of(json_object_get(params, "targetId")));
		if (t >= 0)
			tab_drop(l, t);
		return;
	}
	if (strcmp(method, "Target.detachedFromTarget") == 0) {
		int s = session_find(l, id_of(json_object_get(params, "sessionId")));
		if (s >= 0)
			l->sessions[s].used = false;
		return;
	}
	if (!session || (strncmp(method, "Runtime.", 8) != 0 && strncmp(method, "Network.", 8) != 0 &&
			 strncmp(method, "Log.", 4) != 0))
		return;
	int s = session_find(l, session);
	if (s < 0 || !l->sessions[s].watched)
		return;
	int tab = l->sessions[s].tab;
	if (strcmp(method, "Runtime.consoleAPICalled") == 0) {
		on_console(l, tab, params);
		hold(l, s, json_object_get(params, "args"));
	} else if (strcmp(method, "Runtime.exceptionThrown") == 0) {
		on_exception(l, tab, params);
		hold(l, s, json_object_get(json_object_get(params, "exceptionDetails"), "exception"));
	}
	if (strcmp(method, "Log.entryAdded") == 0)
		on_log(l, tab, params);
	else if (strcmp(method, "Network.requestWillBeSent") == 0 ||
		 strcmp(method, "Network.responseReceived") == 0 ||
		 strcmp(method, "Network.loadingFinished") == 0 ||
		 strcmp(method, "Network.loadingFailed") == 0)
		on_network(l, tab, method, params);
}

/* ---- reading ---- */

/* One network line (without its newline) into a malloc'd string. */
static char *network_line(const struct entry *e)
{
	const struct request *q = e->req;
	char status[16], time[32];
	const char *note = "";
	char nbuf[DG_PAGELOG_WORD_MAX + 8];
	if (q->state == R_BLOCKED) {
		snprintf(status, sizeof(status), "blocked");
		note = " (blocked by the session's policy)";
	} else if (q->state == R_FAILED) {
		snprintf(status, sizeof(status), "failed");
		snprintf(nbuf, sizeof(nbuf), " (%s)", q->error);
		note = nbuf;
	} else if (q->status > 0) {
		snprintf(status, sizeof(status), "%d", q->status);
		if (q->state == R_REDIRECTED)
			note = " (redirected)";
	} else {
		snprintf(status, sizeof(status), "-");
	}
	double ms = (q->t1 - q->t0) * 1000;
	if (q->state == R_PENDING)
		snprintf(time, sizeof(time), "pending");
	else if (isnan(ms) || ms < 0 || ms > 1e9)
		snprintf(time, sizeof(time), "? ms");
	else
		snprintf(time, sizeof(time), "%.0f ms", ms);
	char *line = NULL;
	if (asprintf(&line, "%s %s %s %s %s%s", q->method, status, q->mime, time, e->text, note) < 0)
		return NULL;
	return line;
}

int dg_pagelog_read(struct dg_pagelog *l, const char *tab, enum dg_pagelog_kind kind,
		    char **text, struct dg_err *err)
{
	*text = NULL;
	if (!l || !tab || !tab[0] || (kind != DG_PAGELOG_CONSOLE && kind != DG_PAGELOG_NETWORK))
		return dg_err_set(err, -EINVAL, "reading the page's log: no page is attached");
	bool console = kind == DG_PAGELOG_CONSOLE;
	int t = tab_find(l, tab);
	struct ring *r = t >= 0 ? &l->tabs[t].ring[kind] : NULL;
	size_t cap = DG_PAGELOG_ANSWER_MAX + 256, len = 0;
	char *out = malloc(cap);
	if (!out)
		return dg_err_set(err, -ENOMEM, "reading the page's log: out of memory");
	out[0] = '\0';
	if (r && r->dropped > 0)
		len += (size_t)snprintf(out, cap,
					"[%llu earlier %s dropped unread: a tab's log keeps at most "
					"%d, all tabs' at most %u bytes]",
					(unsigned long long)r->dropped,
					r->dropped == 1 ? "entry was" : "entries were",
					DG_PAGELOG_ENTRIES_MAX, DG_PAGELOG_BYTES_MAX);
	int shown = 0, kept = 0, left = 0, n = r ? r->n : 0;
	/* Entries answered go; those not (past the answer's bound, requests in
	 * flight) are moved up in order. */
	for (int k = 0; k < n; k++) {
		struct entry *e = ring_at(r, k);
		char *line = console ? NULL : network_line(e);
		const char *s = console ? e->text : line;
		bool fits = s && len + 1 + strlen(s) <= DG_PAGELOG_ANSWER_MAX && left == 0;
		if (fits) {
			len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "\n" : "", s);
			shown++;
		} else {
			left++;
		}
		free(line);
		bool stays = !fits || (e->req && e->req->state == R_PENDING);
		if (stays) {
			struct entry moved = *e;
			memset(e, 0, sizeof(*e));
			*ring_at(r, kept++) = moved;
		} else {
			entry_free(l, r, e);
		}
	}
	if (r) {
		r->n = kept;
		r->dropped = 0;
	}
	if (left > 0)
		len += (size_t)snprintf(out + len, cap - len,
					"\n[%d more %s not shown: an answer holds at most %d bytes; "
					"read again for the rest]",
					left, left == 1 ? "entry" : "entries", DG_PAGELOG_ANSWER_MAX);
	if (len == 0 && shown == 0)
		snprintf(out, cap, "%s", console ? "no console output since the last read"
						 : "no network requests since the last read");
	*text = out;
	return 0;
}

void dg_pagelog_stats(const struct dg_pagelog *l, struct dg_pagelog_stats *s)
{
	*s = l->st;
	s->bytes = l->bytes;
	s->tabs = s->sessions = s->watched = 0;
	for (int i = 0; i < DG_PAGELOG_TABS_MAX; i++)
		s->tabs += l->tabs[i].used;
	for (int i = 0; i < DG_PAGELOG_SESSIONS_MAX; i++) {
		s->sessions += l->sessions[i].used;
		s->watched += l->sessions[i].used && l->sessions[i].watched;
	}
}
