/* policy: deciding one canonical action against the compiled rules.
 *
 * Contract: no allocation, no locks, no I/O: a decision reads the immutable
 * struct dg_rules and the caller's context, so any thread may decide with a
 * shared policy. The cost is bounded by the policy's bounds (list sizes,
 * DG_RULES_*) and the action's (DG_ACTION_*). Semantics: policy/rules.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy-priv.h"

const char *dg_verdict_name(enum dg_verdict v)
{
	switch (v) {
	case DG_VERDICT_ALLOW:
		return "allow";
	case DG_VERDICT_ASK:
		return "ask";
	case DG_VERDICT_DENY:
		return "deny";
	}
	return NULL;
}

/* X keysyms of the modifiers, left and right, in DG_MOD_* order. */
static const uint32_t mod_keysyms[DG_MOD_COUNT][2] = {
	{ 0xffe3, 0xffe4 }, /* Control_L, Control_R */
	{ 0xffe1, 0xffe2 }, /* Shift_L, Shift_R */
	{ 0xffe9, 0xffea }, /* Alt_L, Alt_R */
	{ 0xffeb, 0xffec }, /* Super_L, Super_R */
	{ 0xffe7, 0xffe8 }, /* Meta_L, Meta_R */
};

unsigned dg_keysym_mod_class(uint32_t keysym)
{
	for (int i = 0; i < DG_MOD_COUNT; i++)
		if (keysym == mod_keysyms[i][0] || keysym == mod_keysyms[i][1])
			return 1u << i;
	return 0;
}

/* ---- URLs ------------------------------------------------------------------ */

bool dg_host_match(bool wild, const char *pat, size_t pat_len, const char *host, size_t host_len)
{
	if (!wild)
		return host_len == pat_len && memcmp(host, pat, pat_len) == 0;
	/* At least one whole label, then a dot, then the suffix. */
	return host_len >= pat_len + 2 && host[host_len - pat_len - 1] == '.' &&
	       memcmp(host + host_len - pat_len, pat, pat_len) == 0;
}

size_t dg_path_decode(const char *path, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (path[i] == '%' && i + 2 < len) {
			int hi = dg_hex_value(path[i + 1]), lo = dg_hex_value(path[i + 2]);
			char ch = (char)(hi << 4 | lo);
			if (hi >= 0 && lo >= 0 && ch != '/' && ch != '%' && ch != '?' && ch != '#' &&
			    ch != '\0') {
				out[o++] = ch;
				i += 2;
				continue;
			}
		}
		out[o++] = path[i];
	}
	return o;
}

/* Glob match of s against p: '*' matches any run of bytes without '/',
 * "**" any run at all. Iterative, remembering the last '*' and the last
 * "**" to resume from: O(len(p) * len(s)) at worst, never exponential. */
static bool glob_path(const char *p, size_t pn, const char *s, size_t sn)
{
	const size_t NONE = (size_t)-1;
	size_t pi = 0, si = 0;
	size_t star_p = NONE, star_s = 0;   /* after the last '*': pattern, text */
	size_t dstar_p = NONE, dstar_s = 0; /* after the last "**" */
	while (si < sn) {
		if (pi < pn && p[pi] == '*') {
			if (pi + 1 < pn && p[pi + 1] == '*') {
				dstar_p = pi + 2;
				dstar_s = si;
				star_p = NONE; /* re-found when the scan resumes past "**" */
				pi += 2;
			} else {
				star_p = pi + 1;
				star_s = si;
				pi++;
			}
			continue;
		}
		if (pi < pn && p[pi] == s[si]) {
			pi++;
			si++;
			continue;
		}
		if (star_p != NONE && s[star_s] != '/') {
			si = ++star_s; /* the '*' takes one more byte */
			pi = star_p;
			continue;
		}
		if (dstar_p != NONE) {
			si = ++dstar_s; /* the "**" takes one more byte */
			pi = dstar_p;
			star_p = NONE;
			continue;
		}
		return false;
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

bool dg_urlpat_match(const struct dg_urlpat *pat, const struct dg_url *u, const char *path,
		     size_t path_len)
{
	if (pat->any)
		return true;
	if (pat->https != u->https || pat->port != u->port)
		return false;
	if (!dg_host_match(pat->host_wild, pat->host, pat->host_len, u->host, strlen(u->host)))
		return false;
	return glob_path(pat->path, pat->path_len, path, path_len);
}

/* ---- the decision ------------------------------------------------------------ */

/* The check that decides so far: the largest verdict, the first one found
 * among equals. rule and reason point at the policy's strings or at the
 * caller's buffers, which outlive the decision. */
struct winner {
	int verdict; /* -1: no check has spoken */
	const char *rule;
	const char *reason;
};

static void consider(struct winner *w, enum dg_verdict v, const char *rule, const char *reason)
{
	if ((int)v > w->verdict) {
		w->verdict = (int)v;
		w->rule = rule;
		w->reason = reason;
	}
}

/* Copies s into dst (size n), cut, always terminated: cheaper than
 * snprintf on the hot path. */
static void copy_str(char *dst, size_t n, const char *s)
{
	size_t i = 0;
	for (; i + 1 < n && s[i]; i++)
		dst[i] = s[i];
	dst[i] = '\0';
}

static void finish(struct dg_decision *d, const struct winner *w)
{
	d->verdict = (enum dg_verdict)w->verdict;
	copy_str(d->rule, sizeof(d->rule), w->rule);
	copy_str(d->reason, sizeof(d->reason), w->reason);
}

static const char *const verdict_lists_reason[3] = {
	"the URL matches an allowed pattern",
	"the URL matches a pattern that needs approval",
	"the URL matches a denied pattern",
};

/* The "urls" check of one URL; urlbuf holds a refusal's reason. ws_too:
 * WebSocket URLs are accepted too (browser requests), and decided as the
 * http(s) URL of their handshake: dg_urlpat_match compares u.https, the
 * host, the port and the path, so "ws://h/p" meets the patterns of
 * "http://h/p" and "wss://h/p" those of "https://h/p". */
static void check_url(const struct dg_rules *r, const char *url, bool ws_too, struct winner *w,
		      struct dg_err *urlerr)
{
	struct dg_url u;
	if (!url || (ws_too ? dg_url_parse_ws(url, &u, urlerr) : dg_url_parse(url, &u, urlerr)) != 0) {
		if (!url)
			snprintf(urlerr->msg, sizeof(urlerr->msg), "no URL");
		consider(w, DG_VERDICT_DENY, "urls.canonical", urlerr->msg);
		return;
	}
	char path[DG_URL_MAX + 1];
	size_t plen = dg_path_decode(u.path, u.path_len, path);
	for (int vd = DG_VERDICT_DENY; vd >= DG_VERDICT_ALLOW; vd--) {
		for (int i = 0; i < r->n_urls[vd]; i++) {
			if (dg_urlpat_match(&r->urls[vd][i], &u, path, plen)) {
				consider(w, (enum dg_verdict)vd, r->urls[vd][i].rule,
					 verdict_lists_reason[vd]);
				return;
			}
		}
	}
	consider(w, r->deflt, "default", "no rule of \"urls\" matches the URL");
}

static bool in_rect(const struct dg_region *g, int x, int y)
{
	/* In long long: x + w cannot overflow for any int x. */
	return x >= g->x && y >= g->y && (long long)x < (long long)g->x + g->w &&
	       (long long)y < (long long)g->y + g->h;
}

static bool region_hit(const struct dg_region *g, const struct dg_action *a,
		       const struct dg_decide_ctx *ctx)
{
	switch (a->type) {
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_SCROLL:
	case DG_ACTION_SCROLL_TO:
	case DG_ACTION_FORM_INPUT:
	case DG_ACTION_FILE_UPLOAD:
		/* The element actions are resolved (x, y given) by now: an
		 * unresolved one never gets here (dg_policy_decide). */
		return in_rect(g, a->x, a->y);
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
		return a->has_xy ? in_rect(g, a->x, a->y) : in_rect(g, ctx->pointer_x, ctx->pointer_y);
	case DG_ACTION_DRAG:
		for (int i = 0; i < a->n_path; i++)
			if (in_rect(g, a->path[i][0], a->path[i][1]))
				return true;
		return false;
	case DG_ACTION_TYPE:
	case DG_ACTION_KEY:
	case DG_ACTION_HOLD_KEY:
		return in_rect(g, ctx->pointer_x, ctx->pointer_y);
	default:
		return false;
	}
}

static void check_regions(const struct dg_rules *r, const struct dg_action *a,
			  const struct dg_decide_ctx *ctx, struct winner *w)
{
	/* The current URL is parsed at most once, and only when a URL-scoped
	 * region is hit. cur: 0 not parsed yet, 1 parsed, -1 unknown/refused. */
	int cur = 0;
	struct dg_url u;
	char path[DG_URL_MAX + 1];
	size_t plen = 0;
	for (int i = 0; i < r->n_regions; i++) {
		const struct dg_region *g = &r->regions[i];
		if (!(g->types & 1u << a->type) || !region_hit(g, a, ctx))
			continue;
		if (!g->url.any) {
			if (cur == 0) {
				struct dg_err e;
				cur = ctx->url && dg_url_parse(ctx->url, &u, &e) == 0 ? 1 : -1;
				if (cur == 1)
					plen = dg_path_decode(u.path, u.path_len, path);
			}
			/* Unknown or refused URL: the region applies (fail closed). */
			if (cur == 1 && !dg_urlpat_match(&g->url, &u, path, plen))
				continue;
		}
		consider(w, g->verdict, g->rule, g->reason);
		if (g->verdict == DG_VERDICT_DENY)
			return;
	}
}

static bool keypat_match(const struct dg_keypat *k, unsigned mods, const uint32_t *keys, int n)
{
	if ((mods & k->mods) != k->mods)
		return false;
	for (int i = 0; i < k->n_keys; i++) {
		int j = 0;
		while (j < n && keys[j] != k->keys[i])
			j++;
		if (j == n)
			return false;
	}
	if (k->wild)
		return true;
	/* Every other key of the chord must be one of the pattern's: only
	 * modifiers may be added. */
	for (int j = 0; j < n; j++) {
		int i = 0;
		while (i < k->n_keys && k->keys[i] != keys[j])
			i++;
		if (i == k->n_keys)
			return false;
	}
	return true;
}

static const char *const keys_reason[3] = {
	"the key chord is allowed",
	"the key chord needs approval",
	"the key chord is denied",
};

static void check_keys(const struct dg_rules *r, const struct dg_action *a, struct winner *w)
{
	for (int c = 0; c < a->n_chords; c++) {
		const struct dg_chord *ch = &a->chords[c];
		unsigned mods = 0;
		uint32_t keys[DG_CHORD_MAX];
		int n = 0;
		for (int i = 0; i < ch->n && i < DG_CHORD_MAX; i++) {
			unsigned m = dg_keysym_mod_class(ch->keysyms[i]);
			if (m)
				mods |= m;
			else
				keys[n++] = ch->keysyms[i];
		}
		bool matched = false;
		for (int vd = DG_VERDICT_DENY; vd >= DG_VERDICT_ALLOW && !matched; vd--) {
			for (int i = 0; i < r->n_keys[vd]; i++) {
				if (keypat_match(&r->keys[vd][i], mods, keys, n)) {
					consider(w, (enum dg_verdict)vd, r->keys[vd][i].rule,
						 keys_reason[vd]);
					matched = true;
					break;
				}
			}
		}
		if (!matched && r->keys_allowlist)
			consider(w, r->deflt, "default", "no rule of \"keys\" matches the chord");
	}
}

/* The text rules, for the text of a type action or the string value of a
 * form_input (the caller checks which has text). */
static void check_text(const struct dg_rules *r, const struct dg_action *a, struct winner *w,
		       char *buf, size_t len)
{
	if (!a->text)
		return;
	bool value = a->type == DG_ACTION_FORM_INPUT;
	if (r->has_max_length) {
		size_t cps = 0;
		for (size_t i = 0; i < a->text_len; i++)
			cps += ((unsigned char)a->text[i] & 0xc0) != 0x80;
		if (cps > r->max_length) {
			snprintf(buf, len, "the %s has %zu characters; the limit is %zu",
				 value ? "form value" : "text", cps, r->max_length);
			consider(w, DG_VERDICT_DENY, "text.max_length", buf);
			return;
		}
	}
	for (int i = 0; i < r->n_text_deny; i++) {
		if (regexec(&r->text_deny[i].re, a->text, 0, NULL, 0) == 0) {
			consider(w, DG_VERDICT_DENY, r->text_deny[i].rule,
				 value ? "the form value matches a denied pattern"
				       : "the text matches a denied pattern");
			return;
		}
	}
}

/* The "javascript" section over a javascript action's code (rules.c). */
static void check_javascript(const struct dg_rules *r, const struct dg_action *a,
			     struct winner *w)
{
	if (!a->code)
		return;
	const struct dg_textre *deny = r->js[DG_VERDICT_DENY], *ask = r->js[DG_VERDICT_ASK],
			       *allow = r->js[DG_VERDICT_ALLOW];
	for (int i = 0; i < r->n_js[DG_VERDICT_DENY]; i++) {
		if (regexec(&deny[i].re, a->code, 0, NULL, 0) == 0) {
			consider(w, DG_VERDICT_DENY, deny[i].rule, "the code matches a denied pattern");
			return;
		}
	}
	int allowed = -1;
	for (int i = 0; i < r->n_js[DG_VERDICT_ALLOW] && allowed < 0; i++)
		if (regexec(&allow[i].re, a->code, 0, NULL, 0) == 0)
			allowed = i;
	if (r->js_allowlist && allowed < 0) {
		consider(w, DG_VERDICT_DENY, "javascript.allow",
			 "no pattern of \"javascript.allow\" matches the whole code");
		return;
	}
	for (int i = 0; i < r->n_js[DG_VERDICT_ASK]; i++) {
		if (regexec(&ask[i].re, a->code, 0, NULL, 0) == 0) {
			consider(w, DG_VERDICT_ASK, ask[i].rule,
				 "the code matches a pattern that needs approval");
			return;
		}
	}
	if (allowed >= 0)
		consider(w, DG_VERDICT_ALLOW, allow[allowed].rule,
			 "the whole code matches an allowed pattern");
}

static void check_budgets(const struct dg_rules *r, const struct dg_action *a,
			  const struct dg_decide_ctx *ctx, struct winner *w, char *buf,
			  size_t len)
{
	if (r->apm >= 0 && ctx->actions_last_minute >= (uint64_t)r->apm) {
		snprintf(buf, len, "%llu actions in the last minute; the budget is %lld",
			 (unsigned long long)ctx->actions_last_minute, r->apm);
		consider(w, DG_VERDICT_DENY, "budgets.actions_per_minute", buf);
	} else if (r->max_actions >= 0 && ctx->actions_total >= (uint64_t)r->max_actions) {
		snprintf(buf, len, "%llu actions in this session; the budget is %lld",
			 (unsigned long long)ctx->actions_total, r->max_actions);
		consider(w, DG_VERDICT_DENY, "budgets.max_actions", buf);
	} else if (a->type == DG_ACTION_EXEC && r->max_exec >= 0 &&
		   ctx->exec_total >= (uint64_t)r->max_exec) {
		snprintf(buf, len, "%llu exec actions in this session; the budget is %lld",
			 (unsigned long long)ctx->exec_total, r->max_exec);
		consider(w, DG_VERDICT_DENY, "budgets.max_exec", buf);
	}
}

static const char *const actions_reason[3] = {
	"the action type is allowed",
	"the action type needs approval",
	"the action type is denied",
};

static int internal_because(struct dg_decision *d, const char *reason)
{
	if (d) {
		struct winner w = { DG_VERDICT_DENY, "internal", reason };
		finish(d, &w);
	}
	return -EINVAL;
}

static int internal(struct dg_decision *d)
{
	return internal_because(d, "the decision was called wrongly");
}

/* The types no default allows: only actions.allow or actions.ask naming
 * them does (rules.c, "actions"). The rule and reason of their refusal, or
 * NULL for every other type. */
static const char *named_only_rule(enum dg_action_type t)
{
	return t == DG_ACTION_JAVASCRIPT    ? "builtin.javascript"
	       : t == DG_ACTION_FILE_UPLOAD ? "builtin.file_upload"
					    : NULL;
}

static const char *named_only_reason(enum dg_action_type t)
{
	return t == DG_ACTION_JAVASCRIPT
		       ? "javascript runs only when the policy names it in actions.allow or "
			 "actions.ask: script in the page goes around every other rule"
		       : "file_upload runs only when the policy names it in actions.allow or "
			 "actions.ask: a file handed to a page goes wherever the page sends it";
}

int dg_policy_decide(const struct dg_policy *p, const struct dg_action *a,
		     const struct dg_decide_ctx *ctx, struct dg_decision *d)
{
	if (!p || !a || !ctx || !d || (unsigned)a->type >= DG_ACTION_N_TYPES)
		return internal(d);
	/* An element action is decided at the element's point on the screen
	 * (regions): the caller resolves it first. Deciding it without the
	 * point would skip the regions, so it is refused (fail closed). */
	if (dg_action_unresolved(a))
		return internal_because(d, "the element's point on the screen is not known: an "
					   "action with a ref is decided once its x, y are resolved");
	const struct dg_rules *r = p->rules;
	struct winner w = { -1, NULL, NULL };
	struct dg_err urlerr;
	const char *named_only = named_only_rule(a->type);
	if (!r) {
		/* A policy without rules (the built-in default, a file of only
		 * "limits") allows every action but javascript and file_upload:
		 * what the desktop may reach is then bounded by the jail alone,
		 * whose browser has no way out but the egress proxy, which such a
		 * policy closes. A rule section brings the URL checker in. */
		if (named_only)
			w = (struct winner){ DG_VERDICT_DENY, named_only, named_only_reason(a->type) };
		else
			w = (struct winner){ DG_VERDICT_ALLOW, "default", "the policy has no rules" };
		finish(d, &w);
		return 0;
	}
	char buf[160], tbuf[160];

	if (a->type == DG_ACTION_NAVIGATE)
		check_url(r, a->url, false, &w, &urlerr);
	if (r->n_regions && w.verdict < DG_VERDICT_DENY)
		check_regions(r, a, ctx, &w);
	if ((a->type == DG_ACTION_KEY || a->type == DG_ACTION_HOLD_KEY) && w.verdict < DG_VERDICT_DENY)
		check_keys(r, a, &w);
	bool has_text = a->type == DG_ACTION_TYPE ||
			(a->type == DG_ACTION_FORM_INPUT && a->value_kind == DG_VALUE_STRING);
	if (has_text && w.verdict < DG_VERDICT_DENY)
		check_text(r, a, &w, tbuf, sizeof(tbuf));
	if (a->type == DG_ACTION_JAVASCRIPT && w.verdict < DG_VERDICT_DENY)
		check_javascript(r, a, &w);
	if (w.verdict < DG_VERDICT_DENY)
		check_budgets(r, a, ctx, &w, buf, sizeof(buf));
	if (r->has_actions && r->act_verdict[a->type] >= 0)
		consider(&w, (enum dg_verdict)r->act_verdict[a->type], r->act_rule[a->type],
			 actions_reason[(int)r->act_verdict[a->type]]);
	else if (named_only)
		consider(&w, DG_VERDICT_DENY, named_only, named_only_reason(a->type));
	else
		consider(&w, r->deflt, "default", "no rule of \"actions\" names this action type");
	finish(d, &w);
	return 0;
}

int dg_policy_decide_url(const struct dg_policy *p, const char *url, struct dg_decision *d)
{
	if (!p || !d)
		return internal(d);
	struct winner w = { -1, NULL, NULL };
	struct dg_err urlerr;
	if (!p->rules) {
		w = (struct winner){ DG_VERDICT_ALLOW, "default", "the policy has no rules" };
		finish(d, &w);
		return 0;
	}
	check_url(p->rules, url, true, &w, &urlerr);
	finish(d, &w);
	return 0;
}

/* Whether a URL pattern's path matches every path: "/" + "**" (or the
 * pattern "**"). Other globs that would (the same spelled differently)
 * count as path-specific, which only makes dg_policy_decide_ws_origin more
 * careful. */
static bool path_universal(const struct dg_urlpat *pat)
{
	return pat->any || (pat->path_len == 3 && memcmp(pat->path, "/**", 3) == 0);
}

static bool origin_match(const struct dg_urlpat *pat, bool https, const char *host, uint16_t port)
{
	if (pat->any)
		return true;
	return pat->https == https && pat->port == port &&
	       dg_host_match(pat->host_wild, pat->host, pat->host_len, host, strlen(host));
}

int dg_policy_decide_ws_origin(const struct dg_policy *p, bool secure, const char *host,
			       uint16_t port, struct dg_decision *d)
{
	if (!p || !host || !d)
		return internal(d);
	struct winner w = { -1, NULL, NULL };
	if (!p->rules) {
		w = (struct winner){ DG_VERDICT_ALLOW, "default", "the policy has no rules" };
		finish(d, &w);
		return 0;
	}
	const struct dg_rules *r = p->rules;
	/* From the most restrictive list down: a pattern for every path of the
	 * origin decides, unless a more restrictive list has a pattern for
	 * some paths only (then the verdict depends on the path). */
	bool specific_above = false;
	for (int vd = DG_VERDICT_DENY; vd >= DG_VERDICT_ALLOW; vd--) {
		bool specific_here = false;
		for (int i = 0; i < r->n_urls[vd]; i++) {
			const struct dg_urlpat *pat = &r->urls[vd][i];
			if (!origin_match(pat, secure, host, port))
				continue;
			if (path_universal(pat) && !specific_above) {
				consider(&w, (enum dg_verdict)vd, pat->rule,
					 "every path of the WebSocket's origin matches this pattern");
				finish(d, &w);
				return 0;
			}
			specific_here = true;
		}
		specific_above = specific_above || specific_here;
	}
	if (specific_above)
		consider(&w, DG_VERDICT_DENY, "urls.websocket_path",
			 "the policy decides this origin's URLs by path, and the path of an "
			 "encrypted WebSocket handshake cannot be seen");
	else
		consider(&w, r->deflt, "default", "no rule of \"urls\" matches the WebSocket's origin");
	finish(d, &w);
	return 0;
}

json_t *dg_policy_urls_json(const struct dg_policy *p)
{
	if (!p || !p->rules)
		return NULL;
	const struct dg_rules *r = p->rules;
	json_t *o = json_pack("{s:s}", "default", dg_verdict_name(r->deflt));
	for (int vd = DG_VERDICT_ALLOW; o && vd <= DG_VERDICT_DENY; vd++) {
		json_t *list = json_array();
		for (int i = 0; list && i < r->n_urls[vd]; i++) {
			/* The rule is "urls.<list>[i] <pattern as compiled>". */
			const char *sp = strchr(r->urls[vd][i].rule, ' ');
			if (!sp || json_array_append_new(list, json_string(sp + 1)) != 0) {
				json_decref(list);
				list = NULL;
			}
		}
		if (!list || json_object_set_new(o, dg_verdict_name((enum dg_verdict)vd), list) != 0) {
			json_decref(o);
			o = NULL;
		}
	}
	return o;
}

bool dg_policy_uses_page_url(const struct dg_policy *p)
{
	return p && p->rules && p->rules->regions_need_url;
}

bool dg_policy_egress_allows(const struct dg_policy *p, const char *host, uint16_t port)
{
	if (!p || !p->rules || !host)
		return false;
	size_t hl = strlen(host);
	for (int i = 0; i < p->rules->n_egress; i++) {
		const struct dg_egress *g = &p->rules->egress[i];
		if (g->port == port && dg_host_match(g->host_wild, g->host, g->host_len, host, hl))
			return true;
	}
	return false;
}

int dg_policy_decide_egress(const struct dg_policy *p, const char *host, uint16_t port,
			    struct dg_decision *d)
{
	if (!p || !host || !d)
		return internal(d);
	d->verdict = DG_VERDICT_DENY;
	copy_str(d->rule, sizeof(d->rule), "egress.default");
	if (!p->rules) {
		copy_str(d->reason, sizeof(d->reason),
			 "the policy has no rules: the egress proxy lets nothing through");
		return 0;
	}
	size_t hl = strlen(host);
	for (int i = 0; i < p->rules->n_egress; i++) {
		const struct dg_egress *g = &p->rules->egress[i];
		if (g->port == port && dg_host_match(g->host_wild, g->host, g->host_len, host, hl)) {
			d->verdict = DG_VERDICT_ALLOW;
			snprintf(d->rule, sizeof(d->rule), "egress.allow[%d]", i);
			copy_str(d->reason, sizeof(d->reason),
				 "the host and port match an allowed pattern");
			return 0;
		}
	}
	copy_str(d->reason, sizeof(d->reason),
		 "no pattern of \"egress.allow\" matches the host and port");
	return 0;
}

json_t *dg_policy_egress_json(const struct dg_policy *p)
{
	json_t *list = json_array();
	if (!list || !p || !p->rules)
		return list;
	for (int i = 0; i < p->rules->n_egress; i++) {
		const struct dg_egress *g = &p->rules->egress[i];
		char buf[DG_URL_HOST_MAX + 16];
		snprintf(buf, sizeof(buf), "%s%s:%u", g->host_wild ? "*." : "", g->host,
			 (unsigned)g->port);
		if (json_array_append_new(list, json_string(buf)) != 0) {
			json_decref(list);
			return NULL;
		}
	}
	return list;
}
