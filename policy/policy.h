/* policy: the operator's policy file, compiled once and consulted per action.
 *
 * Today the file carries only its "limits" section (resource bounds of a
 * jail); later sections (actions, urls, regions, keys, ...) extend the same
 * file. Loading is strict: an unknown key or a bad value is an error whose
 * message names the key, so a typo never silently weakens containment.
 *
 * Errors follow the project's convention (base/base.h).
 */
#ifndef DG_POLICY_H
#define DG_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/base.h"

/* Bounds on a policy file; the bounds of its "limits" (struct dg_limits,
 * DG_LIMIT_*) are in base/base.h, shared with the spawner. */
#define DG_POLICY_FILE_MAX (1024 * 1024) /* bytes of a policy file */
#define DG_POLICY_VERSION 1
/* Bounds of the "cdp" section (policy/cdp.c): patterns per list (cdp.allow,
 * cdp.deny), and bytes of a domain or method name, in a pattern or in a
 * method decided (so a method is at most 2 * DG_POLICY_CDP_NAME_MAX + 1
 * bytes). CDP's longest names are about half of that. */
#define DG_POLICY_CDP_RULES_MAX 64
#define DG_POLICY_CDP_NAME_MAX 64

/* The rule sections, compiled (policy/policy-priv.h); NULL when the policy
 * has none (the built-in default, or a file of only "version" and
 * "limits"): such a policy allows every action, as before rules existed,
 * except javascript and file_upload, which only a policy naming them in
 * actions.allow or actions.ask lets run (policy/rules.c, "actions"). */
struct dg_rules;

/* The "cdp" section, compiled (policy/policy-priv.h); NULL when the policy
 * has none: then CDP methods get the built-in default alone
 * (dg_policy_decide_cdp). Not a rule section: a file of only "version" and
 * "cdp" has no rules (p->rules stays NULL) and needs no "default". */
struct dg_policy_cdp;

/* Copying a struct dg_policy by value shares its rules and cdp without a
 * reference:
 * use dg_policy_copy for a copy that outlives the original, and
 * dg_policy_free when done with one that came from parse, load or copy. */
struct dg_policy {
	int version;
	struct dg_limits limits;
	struct dg_rules *rules;
	struct dg_policy_cdp *cdp;
	bool redact_text;   /* "recording": {"redact_text": true}: typed text is
			       recorded as its length and a salted hash only */
};

/* Fills p with the built-in default policy. */
void dg_policy_default(struct dg_policy *p);

/* Parses a policy from JSON text of len bytes. `origin` names the source in
 * error messages (a path, or "<builtin>"). Returns 0 or -EINVAL, -E2BIG. */
int dg_policy_parse(const char *text, size_t len, const char *origin, struct dg_policy *p,
		    struct dg_err *err);

/* Reads and parses the policy file at path (at most DG_POLICY_FILE_MAX bytes).
 * Returns 0 or a negative errno (-ENOENT, -EINVAL, -E2BIG, ...). */
int dg_policy_load(const char *path, struct dg_policy *p, struct dg_err *err);

/* The same, and on success *text gets the file's bytes as parsed (malloc'd,
 * NUL-terminated, *text_len bytes) for whoever must keep them (the
 * recordings). */
int dg_policy_load_text(const char *path, struct dg_policy *p, char **text, size_t *text_len,
			struct dg_err *err);

/* Note for both: on success *p is overwritten without releasing what it
 * held; call dg_policy_free first when it holds a loaded policy. */

/* dst becomes a copy of src holding its own references to src's rules and
 * cdp. */
void dg_policy_copy(struct dg_policy *dst, const struct dg_policy *src);

/* Drops p's references to its rules and cdp (each freed with its last one)
 * and sets p->rules and p->cdp to NULL; limits stay. Safe on a default or
 * already freed policy. */
void dg_policy_free(struct dg_policy *p);

/* ---- Decisions (policy/decide.c) -------------------------------------------
 *
 * Ordered by restriction: when several checks have an opinion, the largest
 * verdict wins (deny > ask > allow), and among equal verdicts the first
 * check in the order urls, regions, keys, text, javascript, budgets,
 * actions (the most specific first) names the rule. The semantics of each
 * section are documented in policy/rules.c. */
enum dg_verdict {
	DG_VERDICT_ALLOW = 0,
	DG_VERDICT_ASK = 1,
	DG_VERDICT_DENY = 2,
};

/* "allow", "ask", "deny"; NULL outside the enum. */
const char *dg_verdict_name(enum dg_verdict v);

struct dg_action;

/* What the caller knows about the session when it decides an action. The
 * counts are of actions already performed, not including the one decided:
 * the caller counts what it ran (a sliding one-minute window for
 * actions_last_minute). */
struct dg_decide_ctx {
	const char *url;              /* the page the worker reports, or NULL */
	int screen_w, screen_h;
	int pointer_x, pointer_y;     /* where the pointer is (mouse_down/up without
					 x, y; type, key, hold_key) */
	uint64_t actions_last_minute;
	uint64_t actions_total;
	uint64_t exec_total;
	uint64_t cdp_last_minute;     /* CDP clients' commands allowed (the cdp budgets) */
	uint64_t cdp_total;
};

#define DG_DECISION_RULE_MAX 320
#define DG_DECISION_REASON_MAX 512
struct dg_decision {
	enum dg_verdict verdict;
	char rule[DG_DECISION_RULE_MAX];     /* stable name: "actions.ask[0]", "default", ... */
	char reason[DG_DECISION_REASON_MAX]; /* for humans */
};

/* Decides the canonical action a (from dg_action_parse). Never allocates.
 * Returns 0, or -EINVAL for a caller bug (NULL argument, a type outside
 * the enum, an unresolved action: dg_action_unresolved, whose point the
 * caller must find before asking), in which case d says deny with rule
 * "internal". */
int dg_policy_decide(const struct dg_policy *p, const struct dg_action *a,
		     const struct dg_decide_ctx *ctx, struct dg_decision *d);

/* Decides one URL against the "urls" section alone (the browser's requests,
 * WebSocket handshakes included): refused by dg_url_parse_ws -> deny, rule
 * "urls.canonical"; otherwise deny/ask/allow lists, then default. A
 * WebSocket URL is decided as the http(s) URL of its handshake, which is
 * what its server reads: "ws://h/p?q" exactly as "http://h/p?q", "wss://"
 * as "https://"; "urls" patterns name only http:// and https:// (a ws://
 * pattern is refused at load), so an allowed "http://h/" + "**" allows
 * ws://h/chat and a denied "https://h/private/" + "**" stops
 * wss://h/private/feed. */
int dg_policy_decide_url(const struct dg_policy *p, const char *url, struct dg_decision *d);

/* Decides a WebSocket of which only the origin is known: wss:// seen by the
 * egress proxy, whose handshake is encrypted. secure: wss (decided as
 * https); host as dg_url_parse gives it. The verdict is the one every URL
 * of that origin gets, when the "urls" section gives them all the same one:
 * an every-path pattern (the path "/" + "**", or the pattern "**") in the
 * most restrictive list that has any pattern for the origin decides (rule:
 * that pattern), or no pattern names the origin (rule "default"). When a
 * pattern for some paths only could change the verdict (every path of
 * https://h allowed, "https://h/a/" + "*" denied), the URL cannot be decided
 * without its path: deny, rule "urls.websocket_path". A policy without rules allows. Never allocates.
 * Returns 0 or -EINVAL for a NULL argument (d says deny, rule "internal"). */
int dg_policy_decide_ws_origin(const struct dg_policy *p, bool secure, const char *host,
			       uint16_t port, struct dg_decision *d);

/* Decides one CDP command's method, "Domain.method" (docs/cdp.md), against
 * the "cdp" section alone; its parameters are decided elsewhere, as
 * actions and URLs. Never ask: allow or deny.
 *   1. method not 1..DG_POLICY_CDP_NAME_MAX bytes of [A-Za-z0-9_], the
 *      domain starting with an upper-case letter, a '.', 1..
 *      DG_POLICY_CDP_NAME_MAX bytes of [A-Za-z0-9_] -> deny, rule
 *      "cdp.malformed" (the caller refuses a method whose JSON string holds
 *      a NUL: only the bytes before the first NUL are seen here);
 *   2. a pattern of cdp.deny matches -> deny, rule "cdp.deny[i]" (the first);
 *   3. one of the methods that end the session's browser or go around the
 *      firewall (Browser.close, Browser.crash, Browser.crashGpuProcess,
 *      Page.crash, Target.exposeDevToolsProtocol, Target.sendMessageToTarget,
 *      Target.setRemoteLocations, Security.setIgnoreCertificateErrors) ->
 *      deny, rule "builtin.cdp", whatever cdp.allow says;
 *   4. a pattern of cdp.allow matches -> allow, rule "cdp.allow[i]";
 *   5. the built-in default, rule "builtin.cdp": allow for the domains a
 *      browser-use client needs and five Browser methods (the list is in
 *      policy/cdp.c and docs/cdp.md), deny for every other method.
 * The policy's "default" plays no part: it was written for actions and
 * URLs, and a "default": "allow" must not open Tracing or Extensions.
 * Patterns match case-sensitively, as Chromium reads method names. Never
 * allocates. Returns 0, or -EINVAL for a NULL argument (then d, when not
 * NULL, says deny with rule "internal"). */
int dg_policy_decide_cdp(const struct dg_policy *p, const char *method, struct dg_decision *d);

/* One CDP client's command, as the worker's firewall read it: its method
 * and what it amounts to. Borrowed; NULL/false where it amounts to none. */
struct dg_cdp_command {
	const char *method;
	const struct dg_action *action;  /* the canonical action (parsed, resolved) */
	const char *code;                /* the script it runs (no bound: CDP's scripts
					  * are far larger than a javascript action's) */
	size_t code_len;
	const char *url;                 /* a URL a request of the page goes to */
	const char *download_behavior;   /* a set*DownloadBehavior's behavior */
	bool proxy;                      /* a browser context with a proxy of its own */
	bool files;                      /* it hands files to the page (the caller checks
					  * them in the jail when it is allowed) */
};
#define DG_POLICY_RULE_DOWNLOADS "builtin.downloads"

/* Decides a whole CDP command (the gateway live, replay later): the method
 * (dg_policy_decide_cdp), the CDP budgets (ctx's cdp counts against
 * budgets.cdp_commands_per_minute and max_cdp_commands), then a download
 * behavior other than "deny" or
 * "default" (refused, rule DG_POLICY_RULE_DOWNLOADS: the guard refuses
 * every download), a proxy (refused, builtin.cdp), the action, the script
 * (as a javascript action), files (as file_upload), the URL; ask counts as
 * deny, a CDP client cannot wait for a human. ctx as dg_policy_decide's.
 * Returns as dg_policy_decide. */
int dg_policy_decide_cdp_command(const struct dg_policy *p, const struct dg_cdp_command *cmd,
				 const struct dg_decide_ctx *ctx, struct dg_decision *d);

/* Whether dg_policy_decide_cdp_command decides cmd from cmd alone, the
 * same every time in any context: no canonical action (regions, the
 * pointer, the page and the action budgets come in), no download behavior,
 * proxy or files (checked in the jail), no CDP budget, and a script only
 * where no action budget applies. The
 * worker may then apply an allow again to the same command without asking
 * (docs/cdp.md, "The verdict cache"). */
bool dg_policy_cdp_cacheable(const struct dg_policy *p, const struct dg_cdp_command *cmd);

/* The "urls" section and the default as the JSON a policy file would hold,
 * {"default": V, "allow": [...], "ask": [...], "deny": [...]}, patterns as
 * compiled (internationalized hosts in punycode), in their order, so that a
 * policy parsed from it decides every URL the same way and names the same
 * rules; for handing to the egress proxy. NULL for a policy without rules,
 * or when out of memory. */
json_t *dg_policy_urls_json(const struct dg_policy *p);

/* Whether a decision of dg_policy_decide can depend on the page's URL
 * beyond "any page" (a region scoped by a URL pattern): then the desktop
 * checks, before it performs an input action, that the page is still the
 * one it was decided at. */
bool dg_policy_uses_page_url(const struct dg_policy *p);

/* Whether the "egress" section allows host:port (host lowercase, as
 * dg_url_parse gives it). A policy without rules allows none. */
bool dg_policy_egress_allows(const struct dg_policy *p, const char *host, uint16_t port);

/* Decides host:port (host lowercase, IPv6 in brackets, as dg_url_parse
 * gives it) for the egress proxy: allow with rule "egress.allow[i]" (the
 * first pattern that matches), else deny with rule "egress.default". The
 * "egress" section is an allowlist whatever the policy's "default" says, and
 * a policy without rules (the built-in default, a file of only "limits")
 * lets nothing through the proxy: a desktop reaches nothing until the
 * operator names hosts. Never allocates. Returns 0, or -EINVAL for a NULL
 * argument (then d, when not NULL, says deny with rule "internal"). */
int dg_policy_decide_egress(const struct dg_policy *p, const char *host, uint16_t port,
			    struct dg_decision *d);

/* The "egress" allowlist as a JSON array of "host:port" / "*.suffix:port"
 * strings (canonical ASCII), for handing to the egress proxy; an empty
 * array for a policy without rules. NULL when out of memory. */
json_t *dg_policy_egress_json(const struct dg_policy *p);

/* ---- URLs (policy/url.c) -------------------------------------------------
 *
 * Only strictly canonical http and https URLs are accepted: lowercase scheme;
 * host as lowercase letter-digit-hyphen labels, a dotted-quad IPv4 address or
 * a bracketed compressed IPv6 address; no userinfo; no backslash, whitespace
 * or control characters; no percent sign or non-ASCII in the host; no
 * trailing dot; a last label that looks numeric must be a valid dotted quad;
 * a decimal port without leading zeros, at most 65535. Everything else is
 * refused with a reason. The rule: never accept what a browser (the WHATWG
 * parser) would read differently. */
#define DG_URL_MAX 8192
#define DG_URL_HOST_MAX 253

struct dg_url {
	bool https;                     /* https or wss */
	bool ws;                        /* ws or wss (dg_url_parse_ws only) */
	char host[DG_URL_HOST_MAX + 1]; /* as written: lowercase; IPv6 with brackets */
	bool host_is_ip;
	uint16_t port;                  /* explicit, or 80/443 from the scheme */
	bool port_given;
	const char *path;               /* into the caller's string: "/..." (at least "/") */
	size_t path_len;                /* up to (not including) '?' or '#' */
	const char *query;              /* after '?', or NULL */
	size_t query_len;
};

/* Parses url (NUL-terminated, at most DG_URL_MAX bytes). Returns 0 or
 * -EINVAL with the reason in err. u's pointers point into url. */
int dg_url_parse(const char *url, struct dg_url *u, struct dg_err *err);

/* The same, and also WebSocket URLs: "ws://" and "wss://" under exactly the
 * rules of "http://" and "https://" (the same canonical form, default ports
 * 80 and 443), without a fragment. u->ws says which; u->https is set for
 * https and wss. */
int dg_url_parse_ws(const char *url, struct dg_url *u, struct dg_err *err);

#endif
