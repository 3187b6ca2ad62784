/* policy: the rule sections of the policy file, compiled once at load.
 *
 * Semantics (what README and tests/unit/test_policy_rules.c state):
 *
 * "default": "allow" | "ask" | "deny". Required as soon as any rule section
 *   is given: it is what an action or URL gets when no rule of "actions" or
 *   "urls" names it, so leaving it implicit would hide the most important
 *   choice of the file. A policy with no rule section at all (the built-in
 *   default, a file of only "limits") has no rules and allows every action
 *   but javascript and file_upload (see "actions").
 *
 * Within a section deny beats ask beats allow; across sections the most
 * restrictive verdict wins (policy.h, "Decisions").
 *
 * "actions": {allow, ask, deny}: lists of canonical action type names.
 *   A type no list names (or every type, when the section is absent) gets
 *   the default, except javascript and file_upload: they run only when
 *   actions.allow or actions.ask names them. Otherwise they are denied
 *   (rules "builtin.javascript", "builtin.file_upload") whatever "default"
 *   says, and by a policy without rules too. They are the two actions that
 *   go around every other rule of the action layer: a script run in the
 *   page can do whatever the page can (fill in and submit forms, click,
 *   read what the page shows and send it wherever the page's requests may
 *   go) with no position for regions, no chord for keys and no typed text
 *   for text; a file handed to a page goes wherever the page sends it. So
 *   an operator who wrote "default": "allow" for convenience has not
 *   allowed them: they must be named.
 * "urls": {allow, ask, deny}: URL patterns, for navigate (and the browser's
 *   requests, dg_policy_decide_url). A URL dg_url_parse refuses is denied;
 *   one no pattern matches gets the default. A WebSocket URL (ws://, wss://:
 *   the browser's requests only) is decided as the http(s) URL of its
 *   handshake, ws as http and wss as https, with the same host, port, path
 *   and query; patterns are written http:// and https:// only, and a
 *   ws:// or wss:// pattern is refused with that explanation.
 *   Pattern: "**" alone matches every URL; otherwise
 *   scheme://host[:port]/path with scheme http or https; host exact, or
 *   "*." and a suffix: one or more whole labels before the suffix
 *   ("*.wikipedia.org" matches en.wikipedia.org and a.b.wikipedia.org, not
 *   wikipedia.org, evilwikipedia.org or wikipedia.org.evil.com); the port
 *   defaults to the scheme's (a URL's port must equal it); the path is a
 *   glob where '*' matches within one segment (never '/') and '**' across
 *   segments; the path of the URL is matched after decoding escapes (see
 *   dg_path_decode), its query and fragment are not matched, so a pattern
 *   holds no '?' or '#'. Hosts must be canonical as dg_url_parse wants
 *   them (lowercase ASCII); an internationalized host (non-ASCII) is
 *   converted to punycode with libidn2 at load (idn_convert): a host
 *   pattern "*.bücher.de" matches shop.xn--bcher-kva.de.
 * "regions": [{name, rect, url?, actions?, verdict, reason?}]: a screen
 *   rectangle rect [x, y, w, h] (x <= px < x + w, y <= py < y + h), in
 *   which the listed action types (default: every type with a position) get
 *   verdict ("deny" or "ask": a region never loosens other rules), while
 *   the current URL matches url (default "**", which also applies when no
 *   URL is known). A URL-scoped region also applies when the current URL is
 *   unknown or refused by dg_url_parse: unknown is not "elsewhere".
 *   Position of an action: its x, y (click, move, scroll, mouse_down/up
 *   with x, y; scroll_to, form_input, file_upload, and click and move by
 *   ref, whose x, y the caller resolves from the element before deciding:
 *   the element's point on the screen); every point of a drag's path; the
 *   pointer for mouse_down/up without x, y and for type, key and hold_key
 *   (keyboard input goes to what was last clicked, normally under the
 *   pointer). An unresolved action (dg_action_unresolved: a ref without
 *   x, y) is never decided: denied, rule "internal" (fail closed).
 * "keys": {deny, ask, allow?}: chord patterns for key and hold_key, one
 *   chord each, keys joined by '+': modifier names (ctrl, shift, alt, super,
 *   meta, or any name of a modifier keysym) match the modifier on either
 *   side (Control_L or Control_R); other names are X key names as
 *   dg_keysym_from_name reads them; a final "*" matches zero or more further
 *   keys ("super+*" matches super+l and Super alone; "ctrl+alt+*" matches
 *   ctrl+alt+Delete and ctrl+alt+t, not ctrl+t). Without "*" a chord
 *   matches when it holds the pattern's keys and nothing else but further
 *   modifiers ("ctrl+Return" matches ctrl+shift+Return: a deny or ask rule
 *   is not bypassed by adding Shift). Each chord of a key action is
 *   decided; the most restrictive wins. When "allow" is given (even
 *   empty), a chord no pattern matches gets the default; otherwise key
 *   rules only restrict.
 * "text": {max_length?, deny?}: for the text of type actions and the
 *   string value of form_input (a number or a boolean value is not text):
 *   more than max_length characters (code points) is denied; so is a text
 *   any deny regex matches (POSIX extended, unanchored, case-sensitive).
 *   Patterns whose compiling or matching could explode are refused at load
 *   (regex_tame): back-references, a quantifier right after another
 *   ("a++"), a quantified group that holds a quantifier ("(a+)*"), and
 *   bounds {m,n} above DG_RULES_REGEX_REPEAT_MAX; glibc compiles
 *   "((a{255}){255}){255}" into gigabytes. At most DG_RULES_REGEX_MAX
 *   patterns of at most DG_RULES_REGEX_LEN_MAX bytes.
 * "javascript": {allow?, ask?, deny?}: regexes over a javascript action's
 *   code, tamed and bounded as text.deny's. deny and ask patterns match
 *   anywhere in the code (unanchored); allow patterns must match the WHOLE
 *   code (compiled as ^(...)$), so the regex document\.title (in JSON
 *   "document\\.title") allows the code "document.title" and not
 *   "document.title; fetch(...)". A deny match denies
 *   ("javascript.deny[i]"); when "allow" is given (even empty), code no
 *   allow pattern matches whole is denied ("javascript.allow"); an ask
 *   match asks ("javascript.ask[i]"); an allow match allows
 *   ("javascript.allow[i]"). Without "allow", code no pattern matches is
 *   left to the other rules. Either way "actions" must also allow or ask
 *   for the type (above): this section only narrows what it lets run.
 * "egress": {allow: ["host:port", "*.suffix:port"]}: the egress proxy's
 *   allowlist (dg_policy_egress_allows); not consulted per action.
 * "budgets": {actions_per_minute?, max_actions?, max_exec?,
 *   cdp_commands_per_minute?, max_cdp_commands?}: an action (a CDP client's
 *   command, for the last two: dg_policy_decide_cdp_command) is denied when
 *   the caller's count (struct dg_decide_ctx) has reached the budget: with
 *   actions_per_minute 300, the 301st action within a minute.
 *
 * "cdp" (CDP methods, policy/cdp.c) and "recording" are not rule sections:
 * they never make p->rules, so they need no "default".
 */
#include <errno.h>
#include <idn2.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy-priv.h"

/* Key names and action type names come from actions/ (policy and actions
 * link each other: CMakeLists.txt). */

#define fail dg_policy_fail
#define not_a dg_rules_not_a
#define known_keys dg_rules_known_keys

static const char *const verdict_names[3] = { "allow", "ask", "deny" };

static int oom(struct pctx *c)
{
	return dg_err_set(c->err, -ENOMEM, "policy %s: out of memory", c->origin);
}

/* The rules of p, created (with every budget off and no action named) on
 * first use. */
static struct dg_rules *rules_of(struct dg_policy *p)
{
	if (p->rules)
		return p->rules;
	struct dg_rules *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	atomic_init(&r->refs, 1);
	r->deflt = DG_VERDICT_DENY;
	for (int i = 0; i < DG_ACTION_N_TYPES; i++)
		r->act_verdict[i] = -1;
	r->apm = r->max_actions = r->max_exec = r->cdp_pm = r->max_cdp = -1;
	p->rules = r;
	return r;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

int dg_rules_not_a(struct pctx *c, const char *where, const json_t *v, const char *what)
{
	char val[DG_SHOW_VALUE_BUF];
	dg_show_value(v, val, sizeof(val));
	return fail(c, "%s: %s is not %s", where, val, what);
}

int dg_rules_known_keys(struct pctx *c, const char *section, const json_t *v,
			const char *const *allowed)
{
	const char *key;
	json_t *item;
	json_object_foreach((json_t *)v, key, item) {
		size_t i = 0;
		while (allowed[i] && strcmp(allowed[i], key) != 0)
			i++;
		if (!allowed[i]) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			return fail(c, "unknown key \"%s.%s\"", section, k);
		}
	}
	return 0;
}

/* Checks that v is an array of at most DG_RULES_LIST_MAX strings of
 * 1..max_len bytes without NUL. */
static int string_list(struct pctx *c, const char *where, const json_t *v, size_t max_len)
{
	if (!json_is_array(v))
		return not_a(c, where, v, "an array of strings");
	if (json_array_size(v) > DG_RULES_LIST_MAX)
		return fail(c, "%s: %zu entries is more than the limit of %d", where,
			    json_array_size(v), DG_RULES_LIST_MAX);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		if (!json_is_string(e))
			return not_a(c, where, e, "a string");
		size_t n = json_string_length(e);
		if (n == 0 || n > max_len || strlen(json_string_value(e)) != n)
			return fail(c, "%s[%zu]: a string of 1 to %zu bytes without NUL is needed",
				    where, i, max_len);
	}
	return 0;
}

static int verdict_from(const char *s)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(s, verdict_names[i]) == 0)
			return i;
	return -1;
}

/* ---- default ------------------------------------------------------------ */

int dg_rules_parse_default(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	int vd = json_is_string(v) ? verdict_from(json_string_value(v)) : -1;
	if (vd < 0)
		return not_a(c, "default", v, "one of \"allow\", \"ask\", \"deny\"");
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	r->deflt = (enum dg_verdict)vd;
	return 0;
}

/* ---- actions ------------------------------------------------------------ */

static const char *const list_keys[] = { "allow", "ask", "deny", NULL };

int dg_rules_parse_actions(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_object(v))
		return not_a(c, "actions", v, "an object");
	int rc = known_keys(c, "actions", v, list_keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	r->has_actions = true;
	for (int vd = 0; vd < 3; vd++) {
		const json_t *list = json_object_get(v, verdict_names[vd]);
		if (!list)
			continue;
		char where[32];
		snprintf(where, sizeof(where), "actions.%s", verdict_names[vd]);
		rc = string_list(c, where, list, 64);
		if (rc)
			return rc;
		size_t i;
		json_t *e;
		json_array_foreach(list, i, e) {
			int t = dg_action_type_from_name(json_string_value(e));
			if (t < 0 || t >= DG_ACTION_N_TYPES) {
				char val[DG_SHOW_VALUE_BUF];
				dg_show_value(e, val, sizeof(val));
				return fail(c, "%s[%zu]: unknown action %s", where, i, val);
			}
			/* The most restrictive list wins; within it, the first entry. */
			if (r->act_verdict[t] >= vd)
				continue;
			char *rule = xasprintf("%s[%zu]", where, i);
			if (!rule)
				return oom(c);
			free(r->act_rule[t]);
			r->act_rule[t] = rule;
			r->act_verdict[t] = (signed char)vd;
		}
	}
	return 0;
}

/* ---- hosts and URL patterns ---------------------------------------------- */

/* Checks a pattern's host (without "*.") by what dg_url_parse makes of
 * "http://HOST/": it must be accepted and read back unchanged, so a
 * pattern can only name hosts a URL can have. */
static int check_host(struct pctx *c, const char *where, const char *pattern, const char *host,
		      size_t len, bool wild)
{
	char pat[DG_SHOW_BUF];
	dg_show_str(pattern, DG_SHOW_MAX, true, pat, sizeof(pat));
	if (len == 0 || len > DG_URL_HOST_MAX)
		return fail(c, "%s: \"%s\": the host is empty or too long", where, pat);
	if (memchr(host, '*', len))
		return fail(c, "%s: \"%s\": '*' may only begin a host, as \"*.\"", where, pat);
	char url[DG_URL_HOST_MAX + 16];
	snprintf(url, sizeof(url), "http://%.*s/", (int)len, host);
	struct dg_url u;
	struct dg_err e = { { 0 } };
	if (dg_url_parse(url, &u, &e) != 0)
		return fail(c, "%s: \"%s\": bad host: %s", where, pat, e.msg);
	if (strlen(u.host) != len || memcmp(u.host, host, len) != 0)
		return fail(c, "%s: \"%s\": the host is not in canonical form", where, pat);
	if (wild && u.host_is_ip)
		return fail(c, "%s: \"%s\": \"*.\" needs a domain name after it", where, pat);
	return 0;
}

/* Parses "[*.]host" and the optional or required ":port" from s[0..len). */
static int parse_hostport(struct pctx *c, const char *where, const char *pattern, const char *s,
			  size_t len, bool port_required, bool *wild, char *host, size_t *host_len,
			  uint16_t *port, bool *port_given)
{
	char pat[DG_SHOW_BUF];
	dg_show_str(pattern, DG_SHOW_MAX, true, pat, sizeof(pat));
	const char *colon = NULL;
	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return fail(c, "%s: \"%s\": '[' without ']'", where, pat);
		if ((size_t)(close + 1 - s) < len) {
			if (close[1] != ':')
				return fail(c, "%s: \"%s\": ']' must end the host", where, pat);
			colon = close + 1;
		}
	} else {
		colon = memrchr(s, ':', len);
	}
	size_t hlen = colon ? (size_t)(colon - s) : len;
	*port_given = colon != NULL;
	if (colon) {
		const char *d = colon + 1;
		size_t dn = len - hlen - 1;
		unsigned long n = 0;
		bool ok = dn >= 1 && dn <= 5 && d[0] != '0';
		for (size_t i = 0; ok && i < dn; i++) {
			ok = d[i] >= '0' && d[i] <= '9';
			n = n * 10 + (unsigned long)(d[i] - '0');
		}
		if (!ok || n < 1 || n > 65535)
			return fail(c, "%s: \"%s\": the port must be a decimal 1..65535 without "
				    "leading zeros", where, pat);
		*port = (uint16_t)n;
	} else if (port_required) {
		return fail(c, "%s: \"%s\": host:port is needed", where, pat);
	}
	*wild = hlen >= 2 && s[0] == '*' && s[1] == '.';
	const char *h = *wild ? s + 2 : s;
	size_t hl = *wild ? hlen - 2 : hlen;
	int rc = check_host(c, where, pattern, h, hl, *wild);
	if (rc)
		return rc;
	memcpy(host, h, hl);
	host[hl] = '\0';
	*host_len = hl;
	return 0;
}

/* Internationalized names: a pattern whose host holds non-ASCII bytes gets
 * that host converted to its ASCII (punycode) form with libidn2, IDNA2008
 * non-transitional after NFC, the way WHATWG's URL parser reads it, so the
 * policy names the host the browser and the proxy will see. url_form: the
 * host follows "://" and ends at '/' or ':'; otherwise it ends at the last
 * ':' (egress "host:port"). A leading "*." is kept. out gets the pattern
 * (converted or not); returns 0 or fails naming the place. */
static int idn_convert(struct pctx *c, const char *where, const char *s, bool url_form, char *out,
		       size_t cap)
{
	bool ascii = true;
	for (const unsigned char *q = (const unsigned char *)s; *q; q++)
		ascii = ascii && *q < 0x80;
	if (ascii || strlen(s) >= cap) {
		snprintf(out, cap, "%s", s);
		return 0;
	}
	char pat[DG_SHOW_BUF];
	dg_show_str(s, DG_SHOW_MAX, true, pat, sizeof(pat));
	const char *h = s, *end;
	if (url_form) {
		const char *sep = strstr(s, "://");
		h = sep ? sep + 3 : s;
		end = h + strcspn(h, "/:");
	} else {
		end = strrchr(s, ':');
		if (!end)
			end = s + strlen(s);
	}
	if (end - h >= 2 && h[0] == '*' && h[1] == '.')
		h += 2;
	char host[DG_RULES_PATTERN_MAX + 1];
	snprintf(host, sizeof(host), "%.*s", (int)(end - h), h);
	char *a = NULL;
	int rc = idn2_lookup_u8((const uint8_t *)host, (uint8_t **)&a,
				IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
	if (rc != IDN2_OK) {
		idn2_free(a);
		return fail(c, "%s: \"%s\": the internationalized host cannot be converted to "
			    "ASCII: %s", where, pat, idn2_strerror(rc));
	}
	int n = snprintf(out, cap, "%.*s%s%s", (int)(h - s), s, a, end);
	idn2_free(a);
	if (n < 0 || (size_t)n >= cap)
		return fail(c, "%s: \"%s\": longer than %d bytes once converted", where, pat,
			    DG_RULES_PATTERN_MAX);
	return 0;
}

/* Parses one URL pattern (see the top of this file). */
static int parse_urlpat(struct pctx *c, const char *where, const char *s0, struct dg_urlpat *out)
{
	char conv[DG_RULES_PATTERN_MAX + 1];
	int crc = idn_convert(c, where, s0, true, conv, sizeof(conv));
	if (crc)
		return crc;
	const char *s = conv;
	char pat[DG_SHOW_BUF];
	dg_show_str(s, DG_SHOW_MAX, true, pat, sizeof(pat));
	for (const unsigned char *q = (const unsigned char *)s; *q; q++)
		if (*q <= 0x20 || *q >= 0x7f || *q == '\\')
			return fail(c, "%s: \"%s\": byte 0x%02x is not allowed in a URL pattern",
				    where, pat, *q);
	if (strcmp(s, "**") == 0) {
		out->any = true;
		out->rule = xasprintf("%s %s", where, s);
		return out->rule ? 0 : oom(c);
	}
	const char *rest;
	if (strncmp(s, "https://", 8) == 0) {
		out->https = true;
		rest = s + 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		rest = s + 7;
	} else if (strncmp(s, "ws://", 5) == 0 || strncmp(s, "wss://", 6) == 0) {
		return fail(c, "%s: \"%s\": write WebSocket URLs as http:// or https://: a ws:// "
			    "or wss:// URL is decided as the http(s) URL of its handshake", where,
			    pat);
	} else {
		return fail(c, "%s: \"%s\": a URL pattern is \"**\" or begins with http:// or "
			    "https://", where, pat);
	}
	const char *slash = strchr(rest, '/');
	if (!slash)
		return fail(c, "%s: \"%s\": the path is missing (\"/**\" matches every path)",
			    where, pat);
	bool port_given;
	out->port = out->https ? 443 : 80;
	int rc = parse_hostport(c, where, s, rest, (size_t)(slash - rest), false, &out->host_wild,
				out->host, &out->host_len, &out->port, &port_given);
	if (rc)
		return rc;
	if (strpbrk(slash, "?#"))
		return fail(c, "%s: \"%s\": patterns match the path only (no '?' or '#')", where,
			    pat);
	if (strstr(slash, "***"))
		return fail(c, "%s: \"%s\": \"***\" is not a wildcard (use '*' or \"**\")", where,
			    pat);
	/* The path must be one a canonical URL can have once its wildcards are
	 * filled in: "/a/../b" or "/a b" could never match, and a pattern that
	 * can never match is a mistake. */
	size_t plen = strlen(slash);
	char probe[DG_RULES_PATTERN_MAX + 16];
	int pn = snprintf(probe, sizeof(probe), "http://a%s", slash);
	for (int i = 0; i < pn; i++)
		if (probe[i] == '*')
			probe[i] = 'x';
	struct dg_url u;
	struct dg_err e = { { 0 } };
	if (dg_url_parse(probe, &u, &e) != 0)
		return fail(c, "%s: \"%s\": bad path: %s", where, pat, e.msg);
	out->path = malloc(plen + 1);
	if (!out->path)
		return oom(c);
	out->path_len = dg_path_decode(slash, plen, out->path);
	out->path[out->path_len] = '\0';
	out->rule = xasprintf("%s %s", where, s);
	return out->rule ? 0 : oom(c);
}

static void urlpat_free(struct dg_urlpat *u)
{
	free(u->path);
	free(u->rule);
}

int dg_rules_parse_urls(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_object(v))
		return not_a(c, "urls", v, "an object");
	int rc = known_keys(c, "urls", v, list_keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	for (int vd = 0; vd < 3; vd++) {
		const json_t *list = json_object_get(v, verdict_names[vd]);
		if (!list)
			continue;
		char where[48];
		snprintf(where, sizeof(where), "urls.%s", verdict_names[vd]);
		rc = string_list(c, where, list, DG_RULES_PATTERN_MAX);
		if (rc)
			return rc;
		size_t n = json_array_size(list);
		r->urls[vd] = calloc(n ? n : 1, sizeof(struct dg_urlpat));
		if (!r->urls[vd])
			return oom(c);
		for (size_t i = 0; i < n; i++) {
			snprintf(where, sizeof(where), "urls.%s[%zu]", verdict_names[vd], i);
			r->n_urls[vd]++; /* counted first: destroy frees a half-built entry */
			rc = parse_urlpat(c, where, json_string_value(json_array_get(list, i)),
					  &r->urls[vd][i]);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- regions ------------------------------------------------------------- */

/* Action types that have a position on the screen (see the top). */
static const uint32_t located_types =
	1u << DG_ACTION_CLICK | 1u << DG_ACTION_MOVE | 1u << DG_ACTION_DRAG |
	1u << DG_ACTION_MOUSE_DOWN | 1u << DG_ACTION_MOUSE_UP | 1u << DG_ACTION_SCROLL |
	1u << DG_ACTION_TYPE | 1u << DG_ACTION_KEY | 1u << DG_ACTION_HOLD_KEY |
	1u << DG_ACTION_SCROLL_TO | 1u << DG_ACTION_FORM_INPUT | 1u << DG_ACTION_FILE_UPLOAD;
_Static_assert(DG_ACTION_N_TYPES <= 32, "a region's action set is a 32-bit mask");

static int parse_rect(struct pctx *c, const char *where, const json_t *v, struct dg_region *g)
{
	if (!json_is_array(v) || json_array_size(v) != 4)
		return not_a(c, where, v, "[x, y, width, height]");
	long long n[4];
	for (int i = 0; i < 4; i++) {
		const json_t *e = json_array_get(v, (size_t)i);
		if (!json_is_integer(e))
			return not_a(c, where, e, "an integer (rect is [x, y, width, height])");
		n[i] = json_integer_value(e);
	}
	const long long M = DG_ACTION_SCREEN_MAX;
	if (n[0] < 0 || n[1] < 0 || n[0] >= M || n[1] >= M)
		return fail(c, "%s: x and y must be in [0, %lld)", where, M);
	if (n[2] < 1 || n[3] < 1 || n[0] + n[2] > M || n[1] + n[3] > M)
		return fail(c, "%s: width and height must be at least 1 and the rectangle within "
			    "%lldx%lld", where, M, M);
	g->x = (int)n[0];
	g->y = (int)n[1];
	g->w = (int)n[2];
	g->h = (int)n[3];
	return 0;
}

static int parse_region(struct pctx *c, size_t idx, const json_t *v, struct dg_rules *r,
			struct dg_region *g)
{
	static const char *const keys[] = { "name", "rect", "url", "actions", "verdict", "reason",
					    NULL };
	char where[64], sect[32];
	snprintf(sect, sizeof(sect), "regions[%zu]", idx);
	if (!json_is_object(v))
		return not_a(c, sect, v, "an object");
	int rc = known_keys(c, sect, v, keys);
	if (rc)
		return rc;

	const json_t *name = json_object_get(v, "name");
	snprintf(where, sizeof(where), "%s.name", sect);
	if (!name)
		return fail(c, "%s: missing", where);
	const char *ns = json_string_value(name);
	size_t nl = ns ? json_string_length(name) : 0;
	bool ok = ns && nl >= 1 && nl <= DG_RULES_NAME_MAX;
	for (size_t i = 0; ok && i < nl; i++)
		ok = (ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= 'A' && ns[i] <= 'Z') ||
		     (ns[i] >= '0' && ns[i] <= '9') || ns[i] == '-' || ns[i] == '_' || ns[i] == '.';
	if (!ok)
		return not_a(c, where, name, "a name of 1 to 64 letters, digits, '-', '_', '.'");
	for (int i = 0; i < r->n_regions - 1; i++)
		if (strcmp(r->regions[i].name, ns) == 0)
			return fail(c, "%s: \"%s\" is also the name of regions[%d]", where, ns, i);
	memcpy(g->name, ns, nl + 1);

	const json_t *rect = json_object_get(v, "rect");
	snprintf(where, sizeof(where), "%s.rect", sect);
	if (!rect)
		return fail(c, "%s: missing", where);
	rc = parse_rect(c, where, rect, g);
	if (rc)
		return rc;

	const json_t *url = json_object_get(v, "url");
	snprintf(where, sizeof(where), "%s.url", sect);
	if (url && !json_is_string(url))
		return not_a(c, where, url, "a URL pattern");
	if (url && (json_string_length(url) > DG_RULES_PATTERN_MAX ||
		    strlen(json_string_value(url)) != json_string_length(url)))
		return fail(c, "%s: at most %d bytes without NUL", where, DG_RULES_PATTERN_MAX);
	rc = parse_urlpat(c, where, url ? json_string_value(url) : "**", &g->url);
	if (rc)
		return rc;
	if (!g->url.any)
		r->regions_need_url = true;

	const json_t *acts = json_object_get(v, "actions");
	snprintf(where, sizeof(where), "%s.actions", sect);
	if (acts) {
		rc = string_list(c, where, acts, 64);
		if (rc)
			return rc;
		size_t i;
		json_t *e;
		json_array_foreach(acts, i, e) {
			int t = dg_action_type_from_name(json_string_value(e));
			if (t < 0 || t >= DG_ACTION_N_TYPES)
				return not_a(c, where, e, "an action type");
			if (!(located_types & 1u << t))
				return fail(c, "%s[%zu]: \"%s\" has no position on the screen", where,
					    i, json_string_value(e));
			g->types |= 1u << t;
		}
	} else {
		g->types = located_types;
	}

	const json_t *vd = json_object_get(v, "verdict");
	snprintf(where, sizeof(where), "%s.verdict", sect);
	int n = vd && json_is_string(vd) ? verdict_from(json_string_value(vd)) : -1;
	if (n != DG_VERDICT_DENY && n != DG_VERDICT_ASK)
		return not_a(c, where, vd ? vd : json_null(),
			     "\"deny\" or \"ask\" (a region never loosens other rules)");
	g->verdict = (enum dg_verdict)n;

	const json_t *reason = json_object_get(v, "reason");
	snprintf(where, sizeof(where), "%s.reason", sect);
	if (reason && (!json_is_string(reason) || json_string_length(reason) > DG_RULES_REASON_MAX ||
		       strlen(json_string_value(reason)) != json_string_length(reason)))
		return not_a(c, where, reason, "a string of at most 256 bytes");
	g->reason = reason ? strdup(json_string_value(reason))
			   : xasprintf("inside the region \"%s\"", g->name);
	g->rule = xasprintf("regions[%s]", g->name);
	return g->reason && g->rule ? 0 : oom(c);
}

int dg_rules_parse_regions(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_array(v))
		return not_a(c, "regions", v, "an array of regions");
	if (json_array_size(v) > DG_RULES_REGIONS_MAX)
		return fail(c, "regions: %zu regions is more than the limit of %d",
			    json_array_size(v), DG_RULES_REGIONS_MAX);
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	size_t n = json_array_size(v);
	r->regions = calloc(n ? n : 1, sizeof(*r->regions));
	if (!r->regions)
		return oom(c);
	for (size_t i = 0; i < n; i++) {
		r->n_regions++;
		int rc = parse_region(c, i, json_array_get(v, i), r, &r->regions[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- keys ---------------------------------------------------------------- */

static int parse_keypat(struct pctx *c, const char *where, const char *s, struct dg_keypat *k)
{
	char pat[DG_SHOW_BUF];
	dg_show_str(s, DG_SHOW_MAX, true, pat, sizeof(pat));
	const char *part = s;
	for (;;) {
		const char *plus = strchr(part, '+');
		size_t n = plus ? (size_t)(plus - part) : strlen(part);
		if (n == 0 || n > DG_KEY_NAME_MAX)
			return fail(c, "%s: \"%s\": empty or overlong key name", where, pat);
		char name[DG_KEY_NAME_MAX + 1];
		memcpy(name, part, n);
		name[n] = '\0';
		if (strcmp(name, "*") == 0) {
			if (plus)
				return fail(c, "%s: \"%s\": '*' must be the last key", where, pat);
			k->wild = true;
			break;
		}
		uint32_t ks;
		if (dg_keysym_from_name(name, &ks) != 0) {
			char nm[DG_SHOW_BUF];
			dg_show_str(name, DG_SHOW_MAX, true, nm, sizeof(nm));
			return fail(c, "%s: \"%s\": unknown key \"%s\"", where, pat, nm);
		}
		unsigned m = dg_keysym_mod_class(ks);
		bool dup = (k->mods & m) != 0;
		for (int i = 0; !m && i < k->n_keys; i++)
			dup = dup || k->keys[i] == ks;
		if (dup)
			return fail(c, "%s: \"%s\": a key is named twice", where, pat);
		if (m) {
			k->mods |= m;
		} else {
			if (k->n_keys == DG_CHORD_MAX)
				return fail(c, "%s: \"%s\": more than %d keys", where, pat, DG_CHORD_MAX);
			k->keys[k->n_keys++] = ks;
		}
		if (!plus)
			break;
		part = plus + 1;
	}
	k->rule = xasprintf("%s %s", where, s);
	return k->rule ? 0 : oom(c);
}

int dg_rules_parse_keys(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_object(v))
		return not_a(c, "keys", v, "an object");
	int rc = known_keys(c, "keys", v, list_keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	r->keys_allowlist = json_object_get(v, "allow") != NULL;
	for (int vd = 0; vd < 3; vd++) {
		const json_t *list = json_object_get(v, verdict_names[vd]);
		if (!list)
			continue;
		char where[48];
		snprintf(where, sizeof(where), "keys.%s", verdict_names[vd]);
		rc = string_list(c, where, list, DG_RULES_PATTERN_MAX);
		if (rc)
			return rc;
		size_t n = json_array_size(list);
		r->keys[vd] = calloc(n ? n : 1, sizeof(struct dg_keypat));
		if (!r->keys[vd])
			return oom(c);
		for (size_t i = 0; i < n; i++) {
			snprintf(where, sizeof(where), "keys.%s[%zu]", verdict_names[vd], i);
			r->n_keys[vd]++;
			rc = parse_keypat(c, where, json_string_value(json_array_get(list, i)),
					  &r->keys[vd][i]);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- text ---------------------------------------------------------------- */

/* Whether an ERE is safe to compile and match (see the top of this file).
 * A syntax error is left to regcomp, which names it. */
#define TAME_DEPTH_MAX 32
static bool regex_tame(const char *re, char *why, size_t n)
{
	bool inner[TAME_DEPTH_MAX + 1] = { false }; /* a group at this depth holds a quantifier */
	int depth = 0;
	enum { NONE, ATOM, GROUP_Q, QUANT } prev = NONE;
	for (const char *q = re; *q; q++) {
		char ch = *q;
		if (ch == '\\') {
			if (q[1] >= '1' && q[1] <= '9') {
				snprintf(why, n, "back-references are not allowed");
				return false;
			}
			if (q[1])
				q++;
			prev = ATOM;
		} else if (ch == '[') {
			const char *e = q + 1;
			if (*e == '^')
				e++;
			if (*e == ']')
				e++;
			while (*e && *e != ']')
				e++;
			if (!*e)
				return true; /* regcomp says why */
			q = e;
			prev = ATOM;
		} else if (ch == '(') {
			if (depth == TAME_DEPTH_MAX) {
				snprintf(why, n, "groups nested more than %d deep", TAME_DEPTH_MAX);
				return false;
			}
			inner[++depth] = false;
			prev = NONE;
		} else if (ch == ')') {
			bool had = depth > 0 && inner[depth];
			if (depth > 0)
				depth--;
			if (had)
				inner[depth] = true;
			prev = had ? GROUP_Q : ATOM;
		} else if (ch == '*' || ch == '+' || ch == '?' || ch == '{') {
			if (ch == '{') {
				unsigned long a = 0, b = 0;
				const char *e = q + 1;
				while (*e >= '0' && *e <= '9' && a <= DG_RULES_REGEX_REPEAT_MAX)
					a = a * 10 + (unsigned long)(*e++ - '0');
				if (*e == ',') {
					e++;
					while (*e >= '0' && *e <= '9' && b <= DG_RULES_REGEX_REPEAT_MAX)
						b = b * 10 + (unsigned long)(*e++ - '0');
				}
				if (a > DG_RULES_REGEX_REPEAT_MAX || b > DG_RULES_REGEX_REPEAT_MAX) {
					snprintf(why, n, "a bound above {%d} (it multiplies the matcher's size)",
						 DG_RULES_REGEX_REPEAT_MAX);
					return false;
				}
				while (*e && *e != '}')
					e++;
				if (!*e)
					return true; /* regcomp says why */
				q = e;
			}
			if (prev == QUANT) {
				snprintf(why, n, "a quantifier right after another (as in \"a++\")");
				return false;
			}
			if (prev == GROUP_Q) {
				snprintf(why, n, "a quantified group that holds a quantifier (as in \"(a+)*\")");
				return false;
			}
			inner[depth] = true;
			prev = QUANT;
		} else {
			prev = ch == '|' ? NONE : ATOM;
		}
	}
	return true;
}

/* Compiles the regex list v of the section `where` ("text.deny",
 * "javascript.allow", ...) into *out; *n counts the compiled entries
 * (dg_rules_destroy regfrees exactly those). Each pattern must be tame
 * (regex_tame). anchored: the pattern must match the whole subject, so it
 * is compiled as ^(PATTERN)$; PATTERN is compiled alone first, so its
 * parentheses are known to balance and the wrapping cannot be split: the
 * invalid "a)|(b" would otherwise become "^(a)|(b)$", which matches any
 * subject that starts with "a". No REG_NEWLINE: '^' and '$' match only at
 * the ends of the whole subject, and '.' matches a line break too. */
static int regex_list(struct pctx *c, const char *where, const json_t *v, bool anchored,
		      struct dg_textre **out, int *n_out)
{
	int rc = string_list(c, where, v, DG_RULES_REGEX_LEN_MAX);
	if (rc)
		return rc;
	size_t n = json_array_size(v);
	if (n > DG_RULES_REGEX_MAX)
		return fail(c, "%s: %zu patterns is more than the limit of %d", where, n,
			    DG_RULES_REGEX_MAX);
	*out = calloc(n ? n : 1, sizeof(**out));
	if (!*out)
		return oom(c);
	for (size_t i = 0; i < n; i++) {
		const char *re = json_string_value(json_array_get(v, i));
		char why[160];
		if (!regex_tame(re, why, sizeof(why)))
			return fail(c, "%s[%zu]: %s", where, i, why);
		struct dg_textre *t = &(*out)[i];
		int e = regcomp(&t->re, re, REG_EXTENDED | REG_NOSUB);
		if (e == 0 && anchored) {
			char whole[DG_RULES_REGEX_LEN_MAX + sizeof("^()$")];
			snprintf(whole, sizeof(whole), "^(%s)$", re);
			regfree(&t->re);
			e = regcomp(&t->re, whole, REG_EXTENDED | REG_NOSUB);
		}
		if (e != 0) {
			regerror(e, &t->re, why, sizeof(why));
			return fail(c, "%s[%zu]: bad regular expression: %s", where, i, why);
		}
		t->rule = xasprintf("%s[%zu]", where, i);
		if (!t->rule) {
			regfree(&t->re);
			return oom(c);
		}
		(*n_out)++; /* only compiled entries are counted: destroy regfrees them */
	}
	return 0;
}

int dg_rules_parse_text(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	static const char *const keys[] = { "max_length", "deny", NULL };
	if (!json_is_object(v))
		return not_a(c, "text", v, "an object");
	int rc = known_keys(c, "text", v, keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	const json_t *ml = json_object_get(v, "max_length");
	if (ml) {
		if (!json_is_integer(ml) || json_integer_value(ml) < 0 ||
		    json_integer_value(ml) > DG_ACTION_TEXT_MAX)
			return not_a(c, "text.max_length", ml, "an integer in [0, 16384]");
		r->has_max_length = true;
		r->max_length = (size_t)json_integer_value(ml);
	}
	const json_t *deny = json_object_get(v, "deny");
	if (!deny)
		return 0;
	return regex_list(c, "text.deny", deny, false, &r->text_deny, &r->n_text_deny);
}

/* ---- javascript ---------------------------------------------------------- */

int dg_rules_parse_javascript(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_object(v))
		return not_a(c, "javascript", v, "an object");
	int rc = known_keys(c, "javascript", v, list_keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	r->js_allowlist = json_object_get(v, "allow") != NULL;
	for (int vd = 0; vd < 3; vd++) {
		const json_t *list = json_object_get(v, verdict_names[vd]);
		if (!list)
			continue;
		char where[32];
		snprintf(where, sizeof(where), "javascript.%s", verdict_names[vd]);
		rc = regex_list(c, where, list, vd == DG_VERDICT_ALLOW, &r->js[vd], &r->n_js[vd]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- egress -------------------------------------------------------------- */

int dg_rules_parse_egress(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	static const char *const keys[] = { "allow", NULL };
	if (!json_is_object(v))
		return not_a(c, "egress", v, "an object");
	int rc = known_keys(c, "egress", v, keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	const json_t *list = json_object_get(v, "allow");
	if (!list)
		return 0;
	rc = string_list(c, "egress.allow", list, DG_URL_HOST_MAX + 8);
	if (rc)
		return rc;
	size_t n = json_array_size(list);
	r->egress = calloc(n ? n : 1, sizeof(*r->egress));
	if (!r->egress)
		return oom(c);
	for (size_t i = 0; i < n; i++) {
		char where[48];
		snprintf(where, sizeof(where), "egress.allow[%zu]", i);
		char s[DG_RULES_PATTERN_MAX + 1];
		rc = idn_convert(c, where, json_string_value(json_array_get(list, i)), false, s,
				 sizeof(s));
		if (rc)
			return rc;
		struct dg_egress *g = &r->egress[i];
		bool given;
		rc = parse_hostport(c, where, s, s, strlen(s), true, &g->host_wild, g->host,
				    &g->host_len, &g->port, &given);
		if (rc)
			return rc;
		r->n_egress++;
	}
	return 0;
}

/* ---- budgets ------------------------------------------------------------- */

int dg_rules_parse_budgets(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	static const char *const keys[] = { "actions_per_minute", "max_actions", "max_exec",
					    "cdp_commands_per_minute", "max_cdp_commands", NULL };
	if (!json_is_object(v))
		return not_a(c, "budgets", v, "an object");
	int rc = known_keys(c, "budgets", v, keys);
	if (rc)
		return rc;
	struct dg_rules *r = rules_of(p);
	if (!r)
		return oom(c);
	long long *dst[] = { &r->apm, &r->max_actions, &r->max_exec, &r->cdp_pm, &r->max_cdp };
	for (int i = 0; i < 5; i++) {
		const json_t *e = json_object_get(v, keys[i]);
		if (!e)
			continue;
		if (!json_is_integer(e) || json_integer_value(e) < 0 ||
		    json_integer_value(e) > DG_RULES_BUDGET_MAX) {
			char where[48];
			snprintf(where, sizeof(where), "budgets.%s", keys[i]);
			return not_a(c, where, e, "an integer in [0, 1000000000]");
		}
		*dst[i] = json_integer_value(e);
	}
	return 0;
}

/* ---- the whole ----------------------------------------------------------- */

int dg_rules_finish(struct pctx *c, struct dg_policy *p, bool default_given)
{
	if (p->rules && !default_given)
		return fail(c, "missing key \"default\" (\"allow\", \"ask\" or \"deny\"): a policy "
			    "with rules must say what no rule allows");
	return 0;
}

void dg_rules_destroy(struct dg_rules *r)
{
	if (!r)
		return;
	for (int i = 0; i < DG_ACTION_N_TYPES; i++)
		free(r->act_rule[i]);
	for (int vd = 0; vd < 3; vd++) {
		for (int i = 0; i < r->n_urls[vd]; i++)
			urlpat_free(&r->urls[vd][i]);
		free(r->urls[vd]);
		for (int i = 0; i < r->n_keys[vd]; i++)
			free(r->keys[vd][i].rule);
		free(r->keys[vd]);
	}
	for (int i = 0; i < r->n_regions; i++) {
		urlpat_free(&r->regions[i].url);
		free(r->regions[i].reason);
		free(r->regions[i].rule);
	}
	free(r->regions);
	for (int i = 0; i < r->n_text_deny; i++) {
		regfree(&r->text_deny[i].re);
		free(r->text_deny[i].rule);
	}
	free(r->text_deny);
	for (int vd = 0; vd < 3; vd++) {
		for (int i = 0; i < r->n_js[vd]; i++) {
			regfree(&r->js[vd][i].re);
			free(r->js[vd][i].rule);
		}
		free(r->js[vd]);
	}
	free(r->egress);
	free(r);
}
