/* policy: loading and checking the operator's policy file.
 *
 * The file is read whole (bounded by DG_POLICY_FILE_MAX), parsed strictly by
 * jansson, then walked section by section. Every refusal names the origin
 * and the key so an operator can fix a typo instead of running with a weaker
 * policy than intended. On any error the caller's struct dg_policy is left
 * untouched: a half-applied policy is never observable.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "policy/policy.h"
#include "policy/policy-priv.h"

/* Records "policy <origin>: <message>" and returns -EINVAL: every content
 * error is the operator's to fix, so they share one code. */
int dg_policy_fail(struct pctx *c, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, -EINVAL, "policy %s: %s", c->origin, msg);
}
#define fail dg_policy_fail

/* Formats d with the fewest significant digits that read back as d, so a
 * message shows "0.01" rather than "0.010000000000000000208". */
static void show_real(double d, char *out, size_t out_len)
{
	if (!isfinite(d)) {
		snprintf(out, out_len, "%s", isnan(d) ? "NaN" : d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, out_len, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			return;
	}
}


/* ---- limits ------------------------------------------------------------ */

/* One key of "limits". Integer keys are stored by the width of their field;
 * "cpus" alone is fractional. The bounds come from policy.h so the header is
 * the single statement of what a policy may ask for. */
struct limit_field {
	const char *key;
	size_t offset;
	size_t size;
	bool real;
	bool boolean;   /* a JSON true/false, stored as a uint32_t 1/0 */
	long long imin, imax;
	double rmin, rmax;
};

#define LIMIT_INT(name, lo, hi)                                                            \
	{ #name, offsetof(struct dg_limits, name), sizeof(((struct dg_limits *)0)->name),   \
	  false, false, (lo), (hi), 0, 0 }
#define LIMIT_REAL(name, lo, hi)                                                           \
	{ #name, offsetof(struct dg_limits, name), sizeof(((struct dg_limits *)0)->name),   \
	  true, false, 0, 0, (lo), (hi) }
#define LIMIT_BOOL(name)                                                                   \
	{ #name, offsetof(struct dg_limits, name), sizeof(((struct dg_limits *)0)->name),   \
	  false, true, 0, 1, 0, 0 }

static const struct limit_field limit_fields[] = {
	LIMIT_INT(memory_mb, DG_LIMIT_MEMORY_MB_MIN, DG_LIMIT_MEMORY_MB_MAX),
	LIMIT_INT(pids, DG_LIMIT_PIDS_MIN, DG_LIMIT_PIDS_MAX),
	LIMIT_REAL(cpus, DG_LIMIT_CPUS_MIN, DG_LIMIT_CPUS_MAX),
	LIMIT_INT(exec_seconds, DG_LIMIT_SECONDS_MIN, DG_LIMIT_SECONDS_MAX),
	LIMIT_INT(session_seconds, DG_LIMIT_SECONDS_MIN, DG_LIMIT_SECONDS_MAX),
	LIMIT_INT(output_bytes, DG_LIMIT_OUTPUT_BYTES_MIN, (long long)DG_LIMIT_OUTPUT_BYTES_MAX),
	LIMIT_INT(scratch_mb, DG_LIMIT_SCRATCH_MB_MIN, DG_LIMIT_SCRATCH_MB_MAX),
	LIMIT_BOOL(exec_desktop),
};
#define N_LIMIT_FIELDS (sizeof(limit_fields) / sizeof(limit_fields[0]))

/* parse_limit stores integers by field width; a field of another width
 * would be written wrongly, so refuse to build instead. */
#define LIMIT_WIDTH(name) sizeof(((struct dg_limits *)0)->name)
#define ASSERT_INT_WIDTH(name)                                                             \
	_Static_assert(LIMIT_WIDTH(name) == 4 || LIMIT_WIDTH(name) == 8, #name " width")
ASSERT_INT_WIDTH(memory_mb);
ASSERT_INT_WIDTH(pids);
ASSERT_INT_WIDTH(exec_seconds);
ASSERT_INT_WIDTH(session_seconds);
ASSERT_INT_WIDTH(output_bytes);
ASSERT_INT_WIDTH(scratch_mb);
_Static_assert(LIMIT_WIDTH(cpus) == sizeof(double), "cpus is the one real-valued limit");
_Static_assert(LIMIT_WIDTH(exec_desktop) == sizeof(uint32_t), "booleans are stored as uint32_t");

/* Index of key in limit_fields, or N_LIMIT_FIELDS when it is not a limit. */
static size_t limit_index(const char *key)
{
	size_t i = 0;
	while (i < N_LIMIT_FIELDS && strcmp(limit_fields[i].key, key) != 0)
		i++;
	return i;
}

/* Checks one value against its field and stores it. Integer fields take only
 * JSON integers: 128.0 or 1e2 is refused rather than rounded, because a
 * policy that needs rounding was probably not written as intended. */
static int parse_limit(struct pctx *c, const struct limit_field *f, const json_t *v,
		       struct dg_limits *l)
{
	char val[DG_SHOW_VALUE_BUF], lo[32], hi[32];
	dg_show_value(v, val, sizeof(val));
	char *dst = (char *)l + f->offset;

	if (f->real) {
		show_real(f->rmin, lo, sizeof(lo));
		show_real(f->rmax, hi, sizeof(hi));
		if (!json_is_number(v))
			return fail(c, "limits.%s: %s is not a number; allowed: a number in [%s, %s]",
				    f->key, val, lo, hi);
		double d = json_number_value(v);
		/* jansson never yields NaN or an infinity today; isfinite keeps the
		 * range check from depending on that. */
		if (!isfinite(d) || d < f->rmin || d > f->rmax)
			return fail(c, "limits.%s: %s is out of range [%s, %s]", f->key, val, lo,
				    hi);
		memcpy(dst, &d, sizeof(d));
		return 0;
	}

	if (f->boolean) {
		if (!json_is_boolean(v))
			return fail(c, "limits.%s: %s is not a boolean; allowed: true or false", f->key,
				    val);
		uint32_t b = json_is_true(v) ? 1 : 0;
		memcpy(dst, &b, sizeof(b));
		return 0;
	}
	if (!json_is_integer(v))
		return fail(c, "limits.%s: %s is not an integer; allowed: an integer in [%lld, %lld]",
			    f->key, val, f->imin, f->imax);
	json_int_t n = json_integer_value(v);
	if (n < f->imin || n > f->imax)
		return fail(c, "limits.%s: %s is out of range [%lld, %lld]", f->key, val, f->imin,
			    f->imax);
	if (f->size == sizeof(uint32_t)) {
		uint32_t u = (uint32_t)n;
		memcpy(dst, &u, sizeof(u));
	} else {
		uint64_t u = (uint64_t)n;
		memcpy(dst, &u, sizeof(u));
	}
	return 0;
}

/* "limits": every key optional; an absent key keeps its built-in default.
 * The cross-check runs on the effective values, defaults included, since a
 * file that lowers only memory_mb can still leave scratch_mb too large. */
static int parse_limits(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	if (!json_is_object(v)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return fail(c, "limits: %s is not an object", val);
	}
	bool given[N_LIMIT_FIELDS] = { false };
	const char *key;
	json_t *item;
	json_object_foreach((json_t *)v, key, item) {
		size_t i = limit_index(key);
		if (i == N_LIMIT_FIELDS) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			return fail(c, "unknown key \"limits.%s\"", k);
		}
		int rc = parse_limit(c, &limit_fields[i], item, &p->limits);
		if (rc)
			return rc;
		given[i] = true;
	}

	const struct dg_limits *l = &p->limits;
	if (l->scratch_mb >= l->memory_mb) {
		/* Saying which side is a default spares the operator hunting for a
		 * key the file does not contain. */
		bool scratch_given = given[limit_index("scratch_mb")];
		bool memory_given = given[limit_index("memory_mb")];
		return fail(c,
			    "limits.scratch_mb (%llu%s) must be less than limits.memory_mb (%llu%s): "
			    "the jail's tmpfs pages are charged to its memory cgroup",
			    (unsigned long long)l->scratch_mb, scratch_given ? "" : ", default",
			    (unsigned long long)l->memory_mb, memory_given ? "" : ", default");
	}
	return 0;
}

/* ---- top level --------------------------------------------------------- */

/* "recording": {"redact_text": BOOL}: what the session's recording keeps
 * (see recordings/recordings.h, "Redaction"). Not a rule: a file with only
 * this section still has no rules. */
static int parse_recording(struct pctx *c, const json_t *v, struct dg_policy *p)
{
	char val[DG_SHOW_VALUE_BUF];
	if (!json_is_object(v)) {
		dg_show_value(v, val, sizeof(val));
		return fail(c, "recording: %s is not an object", val);
	}
	const char *key;
	json_t *item;
	json_object_foreach((json_t *)v, key, item) {
		if (strcmp(key, "redact_text") != 0) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			return fail(c, "recording: unknown key \"%s\" (known: redact_text)", k);
		}
		if (!json_is_boolean(item)) {
			dg_show_value(item, val, sizeof(val));
			return fail(c, "recording.redact_text: %s is not true or false", val);
		}
		p->redact_text = json_is_true(item);
	}
	return 0;
}

/* Top-level sections other than "version". A later section adds one row
 * here; a section absent from the file leaves what dg_policy_default set.
 * Parsers may assume the version has already been checked. */
struct section {
	const char *key;
	int (*parse)(struct pctx *c, const json_t *v, struct dg_policy *p);
};

static const struct section sections[] = {
	{ "limits", parse_limits },
	{ "default", dg_rules_parse_default },
	{ "actions", dg_rules_parse_actions },
	{ "urls", dg_rules_parse_urls },
	{ "regions", dg_rules_parse_regions },
	{ "keys", dg_rules_parse_keys },
	{ "text", dg_rules_parse_text },
	{ "javascript", dg_rules_parse_javascript },
	{ "egress", dg_rules_parse_egress },
	{ "budgets", dg_rules_parse_budgets },
	{ "cdp", dg_policy_parse_cdp },
	{ "recording", parse_recording },
};
#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

/* "version" is checked before anything else, so a file written for another
 * format is refused for its version rather than for whichever of its keys
 * this build happens not to know. */
static int parse_version(struct pctx *c, const json_t *root, struct dg_policy *p)
{
	const json_t *v = json_object_get(root, "version");
	if (!v)
		return fail(c, "missing required key \"version\" (this build reads version %d)",
			    DG_POLICY_VERSION);
	if (!json_is_integer(v) || json_integer_value(v) != DG_POLICY_VERSION) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return fail(c, "version: %s is not supported; allowed: the integer %d", val,
			    DG_POLICY_VERSION);
	}
	p->version = DG_POLICY_VERSION;
	return 0;
}

void dg_policy_default(struct dg_policy *p)
{
	*p = (struct dg_policy){
		.version = DG_POLICY_VERSION,
		.limits = {
			.memory_mb = DG_LIMIT_DEFAULT_MEMORY_MB,
			.pids = DG_LIMIT_DEFAULT_PIDS,
			.cpus = DG_LIMIT_DEFAULT_CPUS,
			.exec_seconds = DG_LIMIT_DEFAULT_EXEC_SECONDS,
			.session_seconds = DG_LIMIT_DEFAULT_SESSION_SECONDS,
			.output_bytes = DG_LIMIT_DEFAULT_OUTPUT_BYTES,
			.scratch_mb = DG_LIMIT_DEFAULT_SCRATCH_MB,
		},
	};
}

static int parse_root(struct pctx *c, const json_t *root, struct dg_policy *p)
{
	if (!json_is_object(root)) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(root, val, sizeof(val));
		return fail(c, "the top level is %s; a policy is an object", val);
	}
	int rc = parse_version(c, root, p);
	if (rc)
		return rc;

	const char *key;
	json_t *v;
	json_object_foreach((json_t *)root, key, v) {
		if (strcmp(key, "version") == 0)
			continue;
		size_t i = 0;
		while (i < N_SECTIONS && strcmp(sections[i].key, key) != 0)
			i++;
		if (i == N_SECTIONS) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			return fail(c, "unknown key \"%s\" at top level", k);
		}
		rc = sections[i].parse(c, v, p);
		if (rc)
			return rc;
	}
	return dg_rules_finish(c, p, json_object_get(root, "default") != NULL);
}

int dg_policy_parse(const char *text, size_t len, const char *origin, struct dg_policy *p,
		    struct dg_err *err)
{
	struct pctx c = { .origin = origin ? origin : "<unnamed>", .err = err };
	if (len > DG_POLICY_FILE_MAX)
		return dg_err_set(err, -E2BIG, "policy %s: %zu bytes is more than the limit of %d",
				  c.origin, len, DG_POLICY_FILE_MAX);
	if (len == 0)
		return fail(&c, "the file is empty; a policy needs at least {\"version\": %d}",
			    DG_POLICY_VERSION);

	/* Strict decoding: duplicate keys are refused (otherwise the last one
	 * silently wins, so a reviewer reading the first would be misled).
	 * Flags deliberately left out: JSON_DISABLE_EOF_CHECK (its absence is what
	 * makes trailing data after the object an error), JSON_DECODE_ANY (a
	 * scalar is never a policy), JSON_ALLOW_NUL (no key or value needs NUL),
	 * JSON_DECODE_INT_AS_REAL (integer limits must stay integers). */
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		char why[JSON_ERROR_TEXT_LENGTH * 4 + 4];
		dg_show_str(jerr.text, JSON_ERROR_TEXT_LENGTH, false, why, sizeof(why));
		return fail(&c, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
			    why);
	}

	struct dg_policy next;
	dg_policy_default(&next);
	int rc = parse_root(&c, root, &next);
	json_decref(root);
	if (rc == 0)
		*p = next;
	else
		dg_policy_free(&next);
	return rc;
}

void dg_policy_copy(struct dg_policy *dst, const struct dg_policy *src)
{
	*dst = *src;
	if (src->rules)
		atomic_fetch_add(&src->rules->refs, 1);
	if (src->cdp)
		atomic_fetch_add(&src->cdp->refs, 1);
}

void dg_policy_free(struct dg_policy *p)
{
	if (!p)
		return;
	if (p->rules && atomic_fetch_sub(&p->rules->refs, 1) == 1)
		dg_rules_destroy(p->rules);
	p->rules = NULL;
	if (p->cdp && atomic_fetch_sub(&p->cdp->refs, 1) == 1)
		dg_policy_cdp_destroy(p->cdp);
	p->cdp = NULL;
}

/* dg_read_file reads at most DG_POLICY_FILE_MAX + 1 bytes: one more than
 * allowed is enough to know the file is too large without trusting st_size,
 * which can change between fstat and read. Only regular files are accepted,
 * so a path naming a FIFO or device can neither block startup nor stream
 * forever. */
int dg_policy_load(const char *path, struct dg_policy *p, struct dg_err *err)
{
	return dg_policy_load_text(path, p, NULL, NULL, err);
}

int dg_policy_load_text(const char *path, struct dg_policy *p, char **text, size_t *text_len,
			struct dg_err *err)
{
	char *buf;
	size_t len;
	struct stat st;
	int rc = dg_read_file("policy", path, DG_POLICY_FILE_MAX, false, &buf, &len, &st, err);
	if (rc)
		return rc;
	rc = dg_policy_parse(buf, len, path, p, err);
	if (rc == 0 && text) {
		/* The very bytes that were parsed, NUL-terminated. */
		char *fit = realloc(buf, len + 1); /* kept per session: not the 1 MiB cap */
		*text = fit ? fit : buf;
		*text_len = len;
		return 0;
	}
	free(buf);
	return rc;
}
