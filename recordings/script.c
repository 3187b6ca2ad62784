/* recordings: scripted policy tests (`deskgate test`).
 *
 * A script is hostile input too (it may come from a pull request): lines are
 * read into a bounded buffer (a longer line is a failed step, its rest
 * skipped), steps are counted, every field is checked, and nothing a line
 * holds can crash the runner or stop the steps after it. Offline, the
 * session is simulated as `deskgate check` does (cli/cli-check.c), with
 * declared state on top: "url", "size", "pointer", "time_ms". */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recordings/recordings-priv.h"

#define SLOTS 60 /* one-second slots of the gateway's minute window */
#define DEFAULT_W 1280
#define DEFAULT_H 800

struct sim {
	char url[DG_ACTION_URL_MAX + 1];
	bool has_url;
	int w, h, px, py;
	long long time_ms;
	long long stamp[SLOTS];
	uint64_t count[SLOTS];
	uint64_t total, exec;
};

static const char *const step_keys[] = { "action", "expect", "rule", "url", "size", "pointer",
					 "time_ms", "name", "expect_url", "expect_title", NULL };

/* Reads one line into buf (at most max bytes kept). Returns its length, or
 * -1 at the end, or -2 when the line was longer than max (its rest read
 * and dropped). NUL bytes are kept (and refused by the JSON parser). */
static long read_line(FILE *f, char *buf, size_t max, bool *ioerr)
{
	size_t n = 0;
	bool over = false;
	int c;
	while ((c = getc(f)) != EOF && c != '\n') {
		if (n < max)
			buf[n++] = (char)c;
		else
			over = true;
	}
	if (c == EOF && ferror(f))
		*ioerr = true;
	if (c == EOF && n == 0 && !over)
		return -1;
	if (over)
		return -2;
	if (n && buf[n - 1] == '\r')
		n--;
	return (long)n;
}

static void follow_pointer(const struct dg_action *a, int *px, int *py)
{
	switch (a->type) {
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_SCROLL:
		*px = a->x;
		*py = a->y;
		break;
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
		if (a->has_xy) {
			*px = a->x;
			*py = a->y;
		}
		break;
	case DG_ACTION_DRAG:
		*px = a->path[a->n_path - 1][0];
		*py = a->path[a->n_path - 1][1];
		break;
	default:
		break;
	}
}

static bool pair(const json_t *a, int lo, int hi0, int hi1, int *x, int *y)
{
	if (!json_is_array(a) || json_array_size(a) != 2 || !json_is_integer(json_array_get(a, 0)) ||
	    !json_is_integer(json_array_get(a, 1)))
		return false;
	json_int_t vx = json_integer_value(json_array_get(a, 0));
	json_int_t vy = json_integer_value(json_array_get(a, 1));
	if (vx < lo || vx > hi0 || vy < lo || vy > hi1)
		return false;
	*x = (int)vx;
	*y = (int)vy;
	return true;
}

/* The rule matches when equal, or when the decision's rule continues the
 * expected one with a space (a pattern follows the rule's index). */
static bool rule_matches(const char *want, const char *got)
{
	size_t n = strlen(want);
	return strncmp(want, got, n) == 0 && (got[n] == '\0' || got[n] == ' ');
}

struct step_out {
	FILE *out;
	unsigned step, line;
	char label[DG_SHOW_BUF + 4];
};

static int fail_line(struct step_out *so, struct dg_rec_test_summary *sum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_line(struct step_out *so, struct dg_rec_test_summary *sum, const char *fmt, ...)
{
	char msg[2 * DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sum->failed++;
	return fprintf(so->out, "FAIL step %u (line %u)%s: %s\n", so->step, so->line, so->label, msg) < 0
		       ? -EIO
		       : 0;
}

/* Checks the step's fields and applies its declared state to sim. Returns
 * NULL when fine, or a message (in why). */
static const char *declare(json_t *o, struct sim *sim, char *why, size_t len)
{
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		int i = 0;
		while (step_keys[i] && strcmp(step_keys[i], k) != 0)
			i++;
		if (!step_keys[i]) {
			char shown[DG_SHOW_BUF];
			dg_show_str(k, DG_SHOW_MAX, true, shown, sizeof(shown));
			snprintf(why, len, "unknown field \"%s\" (allowed: action, expect, rule, url, size, "
				 "pointer, time_ms, name, expect_url, expect_title)", shown);
			return why;
		}
	}
	const char *expect = json_string_value(json_object_get(o, "expect"));
	if (!expect || (strcmp(expect, "allow") && strcmp(expect, "deny") && strcmp(expect, "ask")))
		return "\"expect\" must be \"allow\", \"deny\" or \"ask\"";
	if (!json_is_object(json_object_get(o, "action")))
		return "\"action\" must be a canonical action object";
	static const char *const strings[] = { "rule", "name", "expect_url", "expect_title", NULL };
	for (int i = 0; strings[i]; i++) {
		json_t *s = json_object_get(o, strings[i]);
		if (s && (!json_is_string(s) || json_string_length(s) > DG_ACTION_URL_MAX)) {
			snprintf(why, len, "\"%s\" must be a string of at most %d bytes", strings[i],
				 DG_ACTION_URL_MAX);
			return why;
		}
	}
	json_t *size = json_object_get(o, "size");
	if (size && !pair(size, 1, DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, &sim->w, &sim->h)) {
		snprintf(why, len, "\"size\" must be [W, H], each 1..%d", DG_ACTION_SCREEN_MAX);
		return why;
	}
	if (size) { /* a new screen: the pointer starts at its centre */
		sim->px = sim->w / 2;
		sim->py = sim->h / 2;
	}
	json_t *ptr = json_object_get(o, "pointer");
	if (ptr && !pair(ptr, 0, sim->w - 1, sim->h - 1, &sim->px, &sim->py))
		return "\"pointer\" must be [X, Y] on the screen";
	json_t *url = json_object_get(o, "url");
	if (url && json_is_null(url)) {
		sim->has_url = false;
	} else if (url) {
		const char *u = json_string_value(url);
		if (!u || json_string_length(url) > DG_ACTION_URL_MAX || strlen(u) != json_string_length(url))
			return "\"url\" must be a string (at most 8192 bytes, no NUL) or null";
		snprintf(sim->url, sizeof(sim->url), "%s", u);
		sim->has_url = true;
	}
	json_t *t = json_object_get(o, "time_ms");
	if (t && (!json_is_integer(t) || json_integer_value(t) < sim->time_ms ||
		  json_integer_value(t) > (json_int_t)1 << 53)) {
		snprintf(why, len, "\"time_ms\" must be an integer, not below the previous step's (%lld)",
			 sim->time_ms);
		return why;
	}
	if (t)
		sim->time_ms = (long long)json_integer_value(t);
	return NULL;
}

static void count_allowed(struct sim *sim, const struct dg_action *a)
{
	long long now_s = sim->time_ms / 1000;
	int slot = (int)(now_s % SLOTS);
	if (sim->stamp[slot] != now_s || !sim->count[slot]) {
		sim->stamp[slot] = now_s;
		sim->count[slot] = 0;
	}
	sim->count[slot]++;
	sim->total++;
	if (a->type == DG_ACTION_EXEC)
		sim->exec++;
	if (a->type == DG_ACTION_NAVIGATE) {
		snprintf(sim->url, sizeof(sim->url), "%s", a->url);
		sim->has_url = true;
	}
	follow_pointer(a, &sim->px, &sim->py);
}

static int run_step(const struct dg_policy *p, json_t *o, struct sim *sim, const struct dg_rec_live *live,
		    struct step_out *so, struct dg_rec_test_summary *sum)
{
	char why[DG_ERR_MAX];
	const char *name = json_string_value(json_object_get(o, "name"));
	if (name) {
		char shown[DG_SHOW_BUF];
		dg_show_str(name, DG_SHOW_MAX, false, shown, sizeof(shown));
		snprintf(so->label, sizeof(so->label), " %s", shown);
	}
	/* The declared state takes effect only when the whole step is valid. */
	struct sim *next = malloc(sizeof(*next));
	if (!next)
		return -ENOMEM;
	*next = *sim;
	const char *bad = declare(o, next, why, sizeof(why));
	if (!bad)
		*sim = *next;
	free(next);
	if (bad)
		return fail_line(so, sum, "%s", bad);
	const char *expect = json_string_value(json_object_get(o, "expect"));
	const char *want_rule = json_string_value(json_object_get(o, "rule"));
	json_t *action = json_object_get(o, "action");
	const char *tname = json_string_value(json_object_get(action, "type"));
	char tshown[DG_SHOW_BUF];
	dg_show_str(tname ? tname : "?", 24, false, tshown, sizeof(tshown));

	struct dg_action a;
	struct dg_err perr = { { 0 } };
	struct dg_decision d;
	bool parsed = dg_action_parse_obj(action, sim->w, sim->h, &a, &perr) == 0;
	if (!parsed) {
		/* What the gateway does with it: refused by the schema. A script
		 * must say so ("rule": "schema") for that to pass, so a typo in
		 * an action never passes as an expected deny. */
		if (!(want_rule && strcmp(want_rule, "schema") == 0 && strcmp(expect, "deny") == 0))
			return fail_line(so, sum, "%s: the action does not parse: %s", tshown, perr.msg);
		sum->passed++;
		return fprintf(so->out, "ok   step %u (line %u)%s: %s: deny by schema\n", so->step,
			       so->line, so->label, tshown) < 0 ? -EIO : 0;
	}
	if (!live && dg_action_unresolved(&a)) {
		/* The gateway finds an element's point on the screen in the
		 * browser before it decides; offline there is no browser, and
		 * deciding without the point would skip the regions. */
		int ref = a.ref;
		dg_action_free(&a);
		return fail_line(so, sum, "%s: ref_%d has no x, y: an element's point on the screen is "
				 "found on a live desktop only; give its x, y to decide it offline",
				 tshown, ref);
	}
	struct dg_rec_live_result lr;
	memset(&lr, 0, sizeof(lr));
	if (live) {
		struct dg_err lerr = { { 0 } };
		int rc = live->step(live->arg, o, &lr, &lerr);
		if (rc) {
			dg_action_free(&a);
			return fail_line(so, sum, "%s: the live run failed: %s", tshown, lerr.msg);
		}
		d.verdict = lr.verdict;
		snprintf(d.rule, sizeof(d.rule), "%s", lr.rule);
		snprintf(d.reason, sizeof(d.reason), "%s", lr.reason);
	} else {
		struct dg_decide_ctx ctx = {
			.url = sim->has_url ? sim->url : NULL,
			.screen_w = sim->w,
			.screen_h = sim->h,
			.pointer_x = sim->px,
			.pointer_y = sim->py,
			.actions_total = sim->total,
			.exec_total = sim->exec,
		};
		long long now_s = sim->time_ms / 1000;
		for (int i = 0; i < SLOTS; i++)
			if (sim->count[i] && now_s - sim->stamp[i] < SLOTS)
				ctx.actions_last_minute += sim->count[i];
		dg_policy_decide(p, &a, &ctx, &d);
	}
	if (d.verdict == DG_VERDICT_ALLOW)
		count_allowed(sim, &a);
	dg_action_free(&a);
	const char *got = dg_verdict_name(d.verdict);
	char rule[DG_SHOW_BUF], reason[DG_SHOW_BUF];
	dg_show_str(d.rule, DG_SHOW_MAX, false, rule, sizeof(rule));
	dg_show_str(d.reason, DG_SHOW_MAX, false, reason, sizeof(reason));
	if (strcmp(got, expect) != 0)
		return fail_line(so, sum, "%s: expected %s, got %s by %s (%s)", tshown, expect, got, rule,
				 reason);
	if (want_rule && !rule_matches(want_rule, d.rule)) {
		char wr[DG_SHOW_BUF];
		dg_show_str(want_rule, DG_SHOW_MAX, false, wr, sizeof(wr));
		return fail_line(so, sum, "%s: %s as expected, but by rule %s, not %s", tshown, got, rule,
				 wr);
	}
	if (live) {
		static const char *const fields[2] = { "expect_url", "expect_title" };
		for (int i = 0; i < 2; i++) {
			const char *want = json_string_value(json_object_get(o, fields[i]));
			const char *have = i == 0 ? (lr.has_url ? lr.url : NULL)
						  : (lr.has_title ? lr.title : NULL);
			if (want && (!have || strcmp(want, have) != 0)) {
				char w1[DG_SHOW_BUF], h1[DG_SHOW_BUF];
				dg_show_str(want, DG_SHOW_MAX, true, w1, sizeof(w1));
				dg_show_str(have ? have : "(none)", DG_SHOW_MAX, true, h1, sizeof(h1));
				return fail_line(so, sum, "%s: %s \"%s\", got \"%s\"", tshown, fields[i],
						 w1, h1);
			}
		}
	}
	sum->passed++;
	return fprintf(so->out, "ok   step %u (line %u)%s: %s: %s by %s\n", so->step, so->line,
		       so->label, tshown, got, rule) < 0 ? -EIO : 0;
}

int dg_rec_test_script(const struct dg_policy *p, FILE *script, const struct dg_rec_live *live,
		       FILE *out, struct dg_rec_test_summary *sum, struct dg_err *err)
{
	memset(sum, 0, sizeof(*sum));
	struct sim sim = { .w = DEFAULT_W, .h = DEFAULT_H, .px = DEFAULT_W / 2, .py = DEFAULT_H / 2 };
	char *buf = malloc(DG_REC_SCRIPT_LINE_MAX + 1);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "test: out of memory");
	struct step_out so = { .out = out };
	bool ioerr = false;
	int rc = 0;
	long n;
	while (rc == 0 && (n = read_line(script, buf, DG_REC_SCRIPT_LINE_MAX, &ioerr)) != -1) {
		so.line++;
		so.label[0] = '\0';
		if (n >= 0) {
			size_t sp = 0;
			while (sp < (size_t)n && (buf[sp] == ' ' || buf[sp] == '\t'))
				sp++;
			if (sp == (size_t)n || buf[sp] == '#')
				continue;
		}
		so.step++;
		if (so.step > DG_REC_SCRIPT_STEPS_MAX) {
			so.step--;
			rc = fail_line(&so, sum, "more than %d steps: the rest is not read",
				       DG_REC_SCRIPT_STEPS_MAX);
			break;
		}
		if (n == -2) {
			rc = fail_line(&so, sum, "the line is longer than %d bytes", DG_REC_SCRIPT_LINE_MAX);
			continue;
		}
		json_error_t je;
		json_t *o = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &je);
		if (!json_is_object(o)) {
			char why[DG_SHOW_BUF];
			dg_show_str(o ? "not an object" : je.text, DG_SHOW_MAX, false, why, sizeof(why));
			json_decref(o);
			rc = fail_line(&so, sum, "not a JSON object: %s", why);
			continue;
		}
		rc = run_step(p, o, &sim, live, &so, sum);
		json_decref(o);
	}
	free(buf);
	if (rc == 0 && fprintf(out, "%u passed, %u failed\n", sum->passed, sum->failed) < 0)
		rc = -EIO;
	if (rc == 0 && (ioerr || fflush(out) != 0))
		rc = -EIO;
	if (rc)
		return dg_err_set(err, rc, "test: %s", rc == -ENOMEM ? "out of memory"
						       : ioerr	     ? "reading the script failed"
								     : "writing the results failed");
	return 0;
}
