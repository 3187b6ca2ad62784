/* policy internals: the compiled rule sections (policy/rules.c builds them,
 * policy/decide.c reads them). Nothing here is API; the gateway sees only
 * struct dg_policy and the functions of policy.h.
 *
 * A struct dg_rules is immutable once loaded and shared by every copy of a
 * struct dg_policy (dg_policy_copy takes a reference, dg_policy_free drops
 * one), so a decision never allocates and never locks.
 */
#ifndef DG_POLICY_PRIV_H
#define DG_POLICY_PRIV_H

#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "actions/actions.h"
#include "policy/policy.h"

/* What one parse carries around: where the text came from (for messages)
 * and where the first error goes (policy.c). */
struct pctx {
	const char *origin;
	struct dg_err *err;
};

/* Records "policy <origin>: <message>" and returns -EINVAL (policy.c). */
int dg_policy_fail(struct pctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Bounds of rule sections: each list, pattern and name is bounded so a
 * policy's size and a decision's cost stay bounded. */
#define DG_RULES_LIST_MAX 256     /* entries of one list (urls.allow, keys.deny, ...) */
#define DG_RULES_PATTERN_MAX 1024 /* bytes of one URL, key or egress pattern */
#define DG_RULES_REGIONS_MAX 64
#define DG_RULES_NAME_MAX 64      /* bytes of a region name */
#define DG_RULES_REASON_MAX 256   /* bytes of a region reason */
#define DG_RULES_REGEX_MAX 32     /* patterns of one regex list: text.deny,
				     javascript.allow, .ask, .deny */
#define DG_RULES_REGEX_REPEAT_MAX 16 /* largest bound of {m,n} in a regex pattern */
#define DG_RULES_REGEX_LEN_MAX 256 /* bytes of one regex pattern, as written
				      (an allow pattern is compiled as ^(...)$) */
#define DG_RULES_BUDGET_MAX 1000000000LL

/* A URL pattern (see policy.h, "URL patterns"). */
struct dg_urlpat {
	bool any;               /* "**": every URL, and also "no URL" for regions */
	bool https;
	bool host_wild;         /* "*.suffix": one or more whole labels, then suffix */
	char host[DG_URL_HOST_MAX + 1]; /* exact host, or the suffix after "*." */
	size_t host_len;
	uint16_t port;          /* explicit or the scheme's default */
	char *path;             /* glob: '*' within a segment, '**' across; starts '/' */
	size_t path_len;
	char *rule;             /* "urls.deny[0] https://..." */
};

/* A key chord pattern: the chord matches when it holds every modifier class
 * of mods (either side), every key of keys, and nothing else except further
 * modifiers, or anything at all when wild ("*": zero or more other keys). */
struct dg_keypat {
	unsigned mods;          /* DG_MOD_* classes */
	uint32_t keys[DG_CHORD_MAX];
	int n_keys;
	bool wild;
	char *rule;             /* "keys.deny[1] super+*" */
};

struct dg_region {
	char name[DG_RULES_NAME_MAX + 1];
	int x, y, w, h;          /* inside: x <= px < x + w, y <= py < y + h */
	struct dg_urlpat url;
	uint32_t types;          /* bit per enum dg_action_type */
	enum dg_verdict verdict; /* DG_VERDICT_DENY or DG_VERDICT_ASK */
	char *reason;
	char *rule;              /* "regions[top-bar]" */
};

struct dg_egress {
	bool host_wild;
	char host[DG_URL_HOST_MAX + 1];
	size_t host_len;
	uint16_t port;
};

struct dg_textre {
	regex_t re;
	char *rule;              /* "text.deny[0]", "javascript.allow[2]" */
};

/* Index 0, 1, 2 of the per-verdict lists is enum dg_verdict. */
struct dg_rules {
	atomic_int refs;
	enum dg_verdict deflt;

	bool has_actions;
	/* Per action type: the most restrictive list naming it, or -1. */
	signed char act_verdict[DG_ACTION_N_TYPES];
	char *act_rule[DG_ACTION_N_TYPES];

	struct dg_urlpat *urls[3];
	int n_urls[3];

	struct dg_region *regions;
	int n_regions;
	bool regions_need_url;   /* some region is scoped by a pattern other than "**" */

	struct dg_keypat *keys[3];
	int n_keys[3];
	bool keys_allowlist;     /* "keys.allow" given: unmatched chords get default */

	bool has_max_length;
	size_t max_length;       /* code points */
	struct dg_textre *text_deny;
	int n_text_deny;

	/* "javascript": regexes over javascript.code, per verdict (allow
	 * patterns compiled anchored, ^(...)$: they match the whole code). */
	struct dg_textre *js[3];
	int n_js[3];
	bool js_allowlist;       /* "javascript.allow" given: unmatched code is denied */

	struct dg_egress *egress;
	int n_egress;

	long long apm, max_actions, max_exec; /* -1: no budget */
	long long cdp_pm, max_cdp;            /* CDP commands: -1 no budget */
};

/* The "cdp" section (cdp.c): two pattern lists, immutable once loaded and
 * shared by reference like struct dg_rules. A pattern is "Domain.method"
 * (domain and method set), "Domain.*" (method empty) or "*" (both empty). */
enum { DG_CDP_ALLOW = 0, DG_CDP_DENY = 1 };

struct dg_cdppat {
	char domain[DG_POLICY_CDP_NAME_MAX + 1];
	char method[DG_POLICY_CDP_NAME_MAX + 1];
};

struct dg_policy_cdp {
	atomic_int refs;
	struct dg_cdppat pats[2][DG_POLICY_CDP_RULES_MAX]; /* [DG_CDP_ALLOW], [DG_CDP_DENY] */
	int n[2];
};

/* "cdp": fills p->cdp (cdp.c). */
int dg_policy_parse_cdp(struct pctx *c, const json_t *v, struct dg_policy *p);

/* Frees a struct dg_policy_cdp whose last reference is gone (cdp.c). */
void dg_policy_cdp_destroy(struct dg_policy_cdp *r);

/* Helpers of the section parsers (rules.c): "WHERE: VALUE is not WHAT",
 * and the refusal of any key of object v not in allowed (NULL-terminated),
 * named "SECTION.KEY". Both return -EINVAL (dg_policy_fail). */
int dg_rules_not_a(struct pctx *c, const char *where, const json_t *v, const char *what);
int dg_rules_known_keys(struct pctx *c, const char *section, const json_t *v,
			const char *const *allowed);

/* Section parsers of the rule sections (rules.c); each fills p->rules,
 * creating it on first use. */
int dg_rules_parse_default(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_actions(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_urls(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_regions(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_keys(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_text(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_javascript(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_egress(struct pctx *c, const json_t *v, struct dg_policy *p);
int dg_rules_parse_budgets(struct pctx *c, const json_t *v, struct dg_policy *p);

/* Checks across sections once all are parsed ("default" is required when a
 * rule section is given). */
int dg_rules_finish(struct pctx *c, struct dg_policy *p, bool default_given);

/* Frees a struct dg_rules whose last reference is gone. */
void dg_rules_destroy(struct dg_rules *r);

/* Does the parsed URL u, whose path (percent-decoded by dg_path_decode) is
 * path, path_len, match the pattern? (decide.c) */
bool dg_urlpat_match(const struct dg_urlpat *pat, const struct dg_url *u, const char *path,
		     size_t path_len);

/* Decodes the %XX escapes of path into out (at least DG_URL_MAX + 1 bytes)
 * except those of '/', '%', '?' and '#', which would change how the path
 * splits: so "/wiki/Special%3AFoo" matches "/wiki/Special:*" as the server
 * reads it. Returns the decoded length. (decide.c) */
size_t dg_path_decode(const char *path, size_t len, char *out);

/* The DG_MOD_* class of a modifier keysym (Control_L or Control_R ->
 * DG_MOD_CTRL, ...), or 0 for any other keysym. (decide.c) */
unsigned dg_keysym_mod_class(uint32_t keysym);

/* Does host (lowercase, as dg_url_parse gives it) match an exact or
 * "*."-suffix host pattern? (decide.c) */
bool dg_host_match(bool wild, const char *pat, size_t pat_len, const char *host, size_t host_len);

#endif
