/* policy: the "cdp" section, which Chrome DevTools Protocol methods a client
 * of a session's CDP endpoint may send (docs/cdp.md), and the built-in
 * default for the methods it does not name.
 *
 * "cdp": {allow?: [PATTERN...], deny?: [PATTERN...]}, no other key. A
 *   PATTERN is "Domain.method", "Domain.*" (every method of Domain) or "*"
 *   (every method); Domain and method are 1..DG_POLICY_CDP_NAME_MAX bytes
 *   of [A-Za-z0-9_], Domain starting with an upper-case letter, as CDP's
 *   domains do. At most DG_POLICY_CDP_RULES_MAX patterns a list, none twice
 *   in one list. Deny beats allow; a method neither list names gets the
 *   built-in default (below), never the policy's "default", which was
 *   written for actions and URLs: a policy that says "default": "allow" for
 *   convenience must not open Tracing or Extensions to every CDP client.
 *   The methods of always_denied are denied whatever cdp.allow says (only
 *   cdp.deny can name them first, which denies them too): they end the
 *   session's browser or go around the firewall, so no policy lets a client
 *   send them. The decision order is in policy.h (dg_policy_decide_cdp).
 *
 * Not a rule section: it never makes p->rules (a file of only "version"
 * and "cdp" has no rules and needs no "default"). Its data is a struct
 * dg_policy_cdp, shared by reference between copies of the policy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy-priv.h"

#define fail dg_policy_fail

/* The longest method dg_policy_decide_cdp reads: "Domain.method". */
#define CDP_METHOD_LEN_MAX (2 * DG_POLICY_CDP_NAME_MAX + 1)

static const char *const list_names[2] = { "allow", "deny" };

/* ---- the built-in default ---------------------------------------------------- */

/* Every method of these domains is allowed by default: what Playwright,
 * Puppeteer and playwright-mcp use to drive a page. Their methods that act
 * are decided again by their parameters (docs/cdp.md). */
static const char *const safe_domains[] = {
	"Page", "Runtime", "DOM", "DOMSnapshot", "CSS", "Accessibility", "Input", "Network",
	"Fetch", "Emulation", "Target", "Log", "Console", "Overlay", "Performance", "Debugger",
	"Profiler", "HeapProfiler", "IO", "Animation", "LayerTree", "Inspector", "Schema",
	"Security", "Audits",
};

/* The Browser methods allowed by default; the domain's others act on the
 * whole browser. setDownloadBehavior's behavior is decided by the caller
 * (refused unless deny or default). */
static const char *const browser_allowed[] = {
	"getVersion", "getWindowForTarget", "getWindowBounds", "setWindowBounds",
	"setDownloadBehavior",
};

/* Denied whatever cdp.allow says, each with why. */
static const struct {
	const char *domain, *method, *reason;
} always_denied[] = {
	{ "Browser", "close", "Browser.close ends the session's browser" },
	{ "Browser", "crash", "Browser.crash ends the session's browser" },
	{ "Browser", "crashGpuProcess",
	  "Browser.crashGpuProcess crashes the GPU process every page of the session shares" },
	{ "Page", "crash", "Page.crash crashes the renderer of a page the guard watches too" },
	{ "Target", "exposeDevToolsProtocol",
	  "Target.exposeDevToolsProtocol gives a page a CDP connection the firewall never sees" },
	{ "Target", "sendMessageToTarget",
	  "Target.sendMessageToTarget carries a command inside its parameters, which the "
	  "firewall would not decide (only flattened sessions are served)" },
	{ "Target", "setRemoteLocations",
	  "Target.setRemoteLocations makes the browser reach DevTools endpoints of other hosts, "
	  "around the firewall" },
	{ "Security", "setIgnoreCertificateErrors",
	  "Security.setIgnoreCertificateErrors makes the browser accept any certificate, so a "
	  "page's origin proves nothing" },
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Whether s[0..n) is the NUL-terminated name. */
static bool is(const char *s, size_t n, const char *name)
{
	return strlen(name) == n && memcmp(s, name, n) == 0;
}

static bool in_list(const char *s, size_t n, const char *const *list, size_t count)
{
	for (size_t i = 0; i < count; i++)
		if (is(s, n, list[i]))
			return true;
	return false;
}

/* ---- names -------------------------------------------------------------------- */

/* Whether s[0..n) is a domain (domain true) or method name: 1 to
 * DG_POLICY_CDP_NAME_MAX bytes of [A-Za-z0-9_], a domain starting with an
 * upper-case letter. If not, why says so. Reads at most n bytes. */
static bool name_ok(const char *s, size_t n, bool domain, char *why, size_t why_len)
{
	const char *what = domain ? "domain" : "method";
	if (n == 0) {
		snprintf(why, why_len, "the %s is empty", what);
		return false;
	}
	if (n > DG_POLICY_CDP_NAME_MAX) {
		snprintf(why, why_len, "the %s is longer than %d bytes", what,
			 DG_POLICY_CDP_NAME_MAX);
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
		    ch == '_')
			continue;
		if (ch == '*')
			snprintf(why, why_len, "'*' stands alone, for every method (\"*\"), or for a "
				 "whole method (\"Domain.*\")");
		else if (ch == '.')
			snprintf(why, why_len, "more than one '.'");
		else
			snprintf(why, why_len, "the %s holds a byte other than A-Z, a-z, 0-9 and '_'",
				 what);
		return false;
	}
	if (domain && !(s[0] >= 'A' && s[0] <= 'Z')) {
		snprintf(why, why_len, "the domain does not start with an upper-case letter, as "
			 "CDP's do");
		return false;
	}
	return true;
}

/* The first '.' of s[0..len), or NULL (then why says so). */
static const char *split(const char *s, size_t len, char *why, size_t why_len)
{
	const char *dot = memchr(s, '.', len);
	if (!dot)
		snprintf(why, why_len, "no '.' between the domain and the method");
	return dot;
}

/* ---- parsing ------------------------------------------------------------------ */

/* Parses the pattern s into pat; why gets the fault. */
static bool pattern_ok(const char *s, struct dg_cdppat *pat, char *why, size_t why_len)
{
	memset(pat, 0, sizeof(*pat));
	if (strcmp(s, "*") == 0)
		return true;
	size_t len = strlen(s);
	const char *dot = split(s, len, why, why_len);
	if (!dot)
		return false;
	size_t dn = (size_t)(dot - s), mn = len - dn - 1;
	if (!name_ok(s, dn, true, why, why_len))
		return false;
	memcpy(pat->domain, s, dn);
	if (is(dot + 1, mn, "*"))
		return true;
	if (!name_ok(dot + 1, mn, false, why, why_len))
		return false;
	memcpy(pat->method, dot + 1, mn);
	return true;
}

static int parse_list(struct pctx *c, int which, const json_t *v, struct dg_policy_cdp *r)
{
	char where[32];
	snprintf(where, sizeof(where), "cdp.%s", list_names[which]);
	if (!json_is_array(v))
		return dg_rules_not_a(c, where, v, "an array of patterns");
	if (json_array_size(v) > DG_POLICY_CDP_RULES_MAX)
		return fail(c, "%s: %zu patterns is more than the limit of %d", where,
			    json_array_size(v), DG_POLICY_CDP_RULES_MAX);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e) {
		char at[sizeof(where) + 24];
		snprintf(at, sizeof(at), "%s[%zu]", where, i);
		if (!json_is_string(e))
			return dg_rules_not_a(c, at, e,
					      "a pattern: \"Domain.method\", \"Domain.*\" or \"*\"");
		const char *s = json_string_value(e);
		char shown[DG_SHOW_BUF], why[128];
		dg_show_str(s, DG_SHOW_MAX, true, shown, sizeof(shown));
		if (strlen(s) != json_string_length(e))
			return fail(c, "%s: \"%s\": a pattern holds no NUL", at, shown);
		struct dg_cdppat *pat = &r->pats[which][i];
		if (!pattern_ok(s, pat, why, sizeof(why)))
			return fail(c, "%s: \"%s\": %s; a pattern is \"Domain.method\", "
				    "\"Domain.*\" or \"*\"", at, shown, why);
		for (size_t j = 0; j < i; j++) {
			const struct dg_cdppat *o = &r->pats[which][j];
			if (strcmp(o->domain, pat->domain) == 0 && strcmp(o->method, pat->method) == 0)
				return fail(c, "%s: \"%s\" is also %s[%zu]", at, shown, where, j);
		}
		r->n[which]++;
	}
	return 0;
}

int dg_policy_parse_cdp(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	static const char *const keys[] = { "allow", "deny", NULL };
	if (!json_is_object(v))
		return dg_rules_not_a(c, "cdp", v, "an object");
	int rc = dg_rules_known_keys(c, "cdp", v, keys);
	if (rc)
		return rc;
	/* The parse rejects duplicate keys, so "cdp" comes once: p->cdp is NULL
	 * here. It is set before the lists are read, so that a refused policy
	 * frees it (dg_policy_parse, dg_policy_free). */
	struct dg_policy_cdp *r = calloc(1, sizeof(*r));
	if (!r)
		return dg_err_set(c->err, -ENOMEM, "policy %s: out of memory", c->origin);
	atomic_init(&r->refs, 1);
	p->cdp = r;
	for (int which = DG_CDP_ALLOW; which <= DG_CDP_DENY; which++) {
		const json_t *list = json_object_get(v, list_names[which]);
		if (list && (rc = parse_list(c, which, list, r)) != 0)
			return rc;
	}
	return 0;
}

void dg_policy_cdp_destroy(struct dg_policy_cdp *r)
{
	free(r);
}

/* ---- deciding ----------------------------------------------------------------- */

static int decided(struct dg_decision *d, enum dg_verdict v, const char *rule, const char *reason)
{
	d->verdict = v;
	snprintf(d->rule, sizeof(d->rule), "%s", rule);
	snprintf(d->reason, sizeof(d->reason), "%s", reason);
	return 0;
}

static bool pat_match(const struct dg_cdppat *pat, const char *dom, size_t dn, const char *meth,
		      size_t mn)
{
	return (!pat->domain[0] || is(dom, dn, pat->domain)) &&
	       (!pat->method[0] || is(meth, mn, pat->method));
}

/* The first pattern of list `which` that matches, or -1. */
static int first_match(const struct dg_policy_cdp *r, int which, const char *dom, size_t dn,
		       const char *meth, size_t mn)
{
	for (int i = 0; r && i < r->n[which]; i++)
		if (pat_match(&r->pats[which][i], dom, dn, meth, mn))
			return i;
	return -1;
}

/* Decides by pattern i of list `which`. */
static int by_pattern(struct dg_decision *d, const struct dg_policy_cdp *r, int which, int i)
{
	const struct dg_cdppat *pat = &r->pats[which][i];
	d->verdict = which == DG_CDP_DENY ? DG_VERDICT_DENY : DG_VERDICT_ALLOW;
	snprintf(d->rule, sizeof(d->rule), "cdp.%s[%d]", list_names[which], i);
	snprintf(d->reason, sizeof(d->reason), "the method matches the %s pattern \"%s%s%s\"",
		 which == DG_CDP_DENY ? "denied" : "allowed", pat->domain[0] ? pat->domain : "*",
		 pat->domain[0] ? "." : "",
		 !pat->domain[0] ? "" : pat->method[0] ? pat->method : "*");
	return 0;
}

/* The built-in default for a well-formed method no pattern named. */
static int builtin(struct dg_decision *d, const char *dom, size_t dn, const char *meth, size_t mn)
{
	d->verdict = DG_VERDICT_DENY;
	snprintf(d->rule, sizeof(d->rule), "builtin.cdp");
	if (in_list(dom, dn, safe_domains, N_OF(safe_domains))) {
		d->verdict = DG_VERDICT_ALLOW;
		snprintf(d->reason, sizeof(d->reason), "the %.*s domain is one a browser-use client "
			 "needs (the built-in default)", (int)dn, dom);
	} else if (is(dom, dn, "Browser") && in_list(meth, mn, browser_allowed,
						   N_OF(browser_allowed))) {
		d->verdict = DG_VERDICT_ALLOW;
		snprintf(d->reason, sizeof(d->reason), "Browser.%.*s is one of the Browser methods a "
			 "browser-use client needs (the built-in default)", (int)mn, meth);
	} else if (is(dom, dn, "Browser")) {
		snprintf(d->reason, sizeof(d->reason), "Browser methods act on the whole browser, "
			 "the guard's part too: by default only Browser.getVersion, "
			 "getWindowForTarget, getWindowBounds, setWindowBounds and "
			 "setDownloadBehavior are allowed (cdp.allow can name others)");
	} else {
		snprintf(d->reason, sizeof(d->reason), "the %.*s domain is not needed to drive a "
			 "page: Tracing, SystemInfo, Extensions, Storage, ServiceWorker, Memory and "
			 "every other domain outside the built-in list are refused unless cdp.allow "
			 "names them", (int)dn, dom);
	}
	return 0;
}

int dg_policy_decide_cdp(const struct dg_policy *p, const char *method, struct dg_decision *d)
{
	if (!p || !method || !d) {
		if (d)
			decided(d, DG_VERDICT_DENY, "internal", "the decision was called wrongly");
		return -EINVAL;
	}
	/* Well-formed first: never reads more than CDP_METHOD_LEN_MAX + 1 bytes. */
	char why[128], reason[DG_DECISION_REASON_MAX];
	size_t len = strnlen(method, CDP_METHOD_LEN_MAX + 1);
	const char *dot = NULL;
	bool ok = false;
	if (len > CDP_METHOD_LEN_MAX)
		snprintf(why, sizeof(why), "longer than %d bytes (a domain and a method of at most "
			 "%d each)", CDP_METHOD_LEN_MAX, DG_POLICY_CDP_NAME_MAX);
	else if ((dot = split(method, len, why, sizeof(why))) != NULL)
		ok = name_ok(method, (size_t)(dot - method), true, why, sizeof(why)) &&
		     name_ok(dot + 1, len - (size_t)(dot - method) - 1, false, why, sizeof(why));
	if (!ok) {
		char shown[DG_SHOW_BUF];
		dg_show_str(method, DG_SHOW_MAX, true, shown, sizeof(shown));
		snprintf(reason, sizeof(reason), "\"%s\" is not a CDP method \"Domain.method\": %s",
			 shown, why);
		return decided(d, DG_VERDICT_DENY, "cdp.malformed", reason);
	}
	const char *dom = method, *meth = dot + 1;
	size_t dn = (size_t)(dot - method), mn = len - dn - 1;

	const struct dg_policy_cdp *r = p->cdp;
	int i = first_match(r, DG_CDP_DENY, dom, dn, meth, mn);
	if (i >= 0)
		return by_pattern(d, r, DG_CDP_DENY, i);
	for (size_t k = 0; k < N_OF(always_denied); k++)
		if (is(dom, dn, always_denied[k].domain) && is(meth, mn, always_denied[k].method))
			return decided(d, DG_VERDICT_DENY, "builtin.cdp", always_denied[k].reason);
	i = first_match(r, DG_CDP_ALLOW, dom, dn, meth, mn);
	if (i >= 0)
		return by_pattern(d, r, DG_CDP_ALLOW, i);
	return builtin(d, dom, dn, meth, mn);
}

int dg_policy_decide_cdp_command(const struct dg_policy *p, const struct dg_cdp_command *cmd,
				 const struct dg_decide_ctx *ctx, struct dg_decision *d)
{
	if (!cmd || !ctx)
		return dg_policy_decide_cdp(p, NULL, d);
	int rc = dg_policy_decide_cdp(p, cmd->method, d);
	if (rc || d->verdict != DG_VERDICT_ALLOW)
		return rc;
	const struct dg_rules *r = p->rules;
	char reason[DG_DECISION_REASON_MAX];
	if (r && r->cdp_pm >= 0 && ctx->cdp_last_minute >= (uint64_t)r->cdp_pm) {
		snprintf(reason, sizeof(reason), "%llu CDP commands in the last minute; the budget "
			 "is %lld", (unsigned long long)ctx->cdp_last_minute, r->cdp_pm);
		return decided(d, DG_VERDICT_DENY, "budgets.cdp_commands_per_minute", reason);
	}
	if (r && r->max_cdp >= 0 && ctx->cdp_total >= (uint64_t)r->max_cdp) {
		snprintf(reason, sizeof(reason), "%llu CDP commands in this session; the budget is "
			 "%lld", (unsigned long long)ctx->cdp_total, r->max_cdp);
		return decided(d, DG_VERDICT_DENY, "budgets.max_cdp_commands", reason);
	}
	const char *b = cmd->download_behavior;
	if (b && strcmp(b, "deny") != 0 && strcmp(b, "default") != 0) {
		decided(d, DG_VERDICT_DENY, DG_POLICY_RULE_DOWNLOADS,
			"downloads stay refused: the guard denies every download (answered as done, "
			"not applied)");
		return 0;
	}
	if (cmd->proxy) {
		decided(d, DG_VERDICT_DENY, "builtin.cdp",
			"a browser context with a proxy of its own would go around the egress proxy");
		return 0;
	}
	if (cmd->action)
		rc = dg_policy_decide(p, cmd->action, ctx, d);
	/* A script of a CDP command may be far larger than a javascript
	 * action's (Playwright's injected script): decided as one, on its
	 * whole text. */
	struct dg_action a;
	if (!rc && d->verdict == DG_VERDICT_ALLOW && cmd->code) {
		memset(&a, 0, sizeof(a));
		a.type = DG_ACTION_JAVASCRIPT;
		a.code = (char *)cmd->code;
		a.code_len = cmd->code_len;
		rc = dg_policy_decide(p, &a, ctx, d);
	}
	if (!rc && d->verdict == DG_VERDICT_ALLOW && cmd->files) {
		memset(&a, 0, sizeof(a));
		a.type = DG_ACTION_FILE_UPLOAD;
		rc = dg_policy_decide(p, &a, ctx, d);
	}
	if (!rc && d->verdict == DG_VERDICT_ALLOW && cmd->url)
		rc = dg_policy_decide_url(p, cmd->url, d);
	if (!rc && d->verdict == DG_VERDICT_ASK) {
		snprintf(reason, sizeof(reason), "%.200s; a CDP client cannot wait for a human's "
			 "approval", d->reason);
		d->verdict = DG_VERDICT_DENY;
		snprintf(d->reason, sizeof(d->reason), "%s", reason);
	}
	return rc;
}

bool dg_policy_cdp_cacheable(const struct dg_policy *p, const struct dg_cdp_command *cmd)
{
	if (!p || !cmd || cmd->action || cmd->download_behavior || cmd->proxy || cmd->files)
		return false;
	const struct dg_rules *r = p->rules;
	if (!r)
		return true;
	if (r->cdp_pm >= 0 || r->max_cdp >= 0)
		return false;
	if (!cmd->code)
		return true;
	/* The script is decided as a javascript action, which the action
	 * budgets count; regions never apply to it (javascript has no
	 * position, and a region cannot name it: rules.c refuses that). */
	return r->apm < 0 && r->max_actions < 0;
}
