/* Scripted policy tests (issue #6, `deskgate test`): every example script in
 * tests/scripts/ passes under its policy (CI runs them here); the runner's
 * rules (state carried between steps, rule matching, schema errors, bad
 * lines as failed steps), its bounds at their boundaries, and the
 * command's exit status. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dg_test.h"
#include "cli/cli.h"
#include "recordings/recordings.h"

#define SCRIPTS DG_SOURCE_DIR "/tests/scripts"

static int run(const char *const *argv, struct dg_run *r)
{
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 60, -1, r), 0);
	return r->exit_code;
}

Test(script, every_example_script_passes_under_its_policy)
{
	DIR *d = opendir(SCRIPTS);
	cr_assert_not_null(d);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len < 7 || strcmp(de->d_name + len - 6, ".jsonl") != 0)
			continue;
		char script[512], policy[512];
		snprintf(script, sizeof(script), "%s/%s", SCRIPTS, de->d_name);
		snprintf(policy, sizeof(policy), "%s/%.*s.json", SCRIPTS, (int)(len - 6), de->d_name);
		cr_assert_eq(access(policy, R_OK), 0, "%s has no policy %s", script, policy);
		const char *argv[] = { DG_BIN, "test", "--policy", policy, script, NULL };
		struct dg_run r;
		cr_assert_eq(run(argv, &r), 0, "%s:\n%s%s", de->d_name, r.out, r.err);
		cr_assert(strstr(r.out, " passed, 0 failed\n"), "%s", r.out);
		cr_assert_null(strstr(r.out, "FAIL"), "%s", r.out);
		dg_run_free(&r);
		n++;
	}
	closedir(d);
	cr_assert_geq(n, 5, "only %d example scripts", n);
}

/* Runs script text against policy text in-process; out gets the report. */
static struct dg_rec_test_summary sum;
static char out[1 << 20];

static int script(const char *policy, const char *text, size_t len)
{
	struct dg_policy p;
	struct dg_err err = { { 0 } };
	cr_assert_eq(dg_policy_parse(policy, strlen(policy), "test", &p, &err), 0, "%s", err.msg);
	FILE *in = fmemopen((void *)text, len, "r");
	FILE *o = fmemopen(out, sizeof(out) - 1, "w");
	memset(out, 0, sizeof(out));
	int rc = dg_rec_test_script(&p, in, NULL, o, &sum, &err);
	fclose(in);
	fclose(o);
	dg_policy_free(&p);
	return rc;
}

static int scripts(const char *policy, const char *text)
{
	return script(policy, text, strlen(text));
}

static const char nav_policy[] =
	"{\"version\":1,\"default\":\"deny\",\"actions\":{\"allow\":[\"navigate\",\"click\",\"type\"]},"
	"\"urls\":{\"allow\":[\"https://example.com/**\"]},"
	"\"regions\":[{\"name\":\"site-only\",\"rect\":[0,0,100,100],\"url\":\"https://example.com/**\","
	"\"verdict\":\"deny\"}]}";

Test(script, state_carries_over_between_steps)
{
	/* The URL-scoped region decides where the URL is example.com or
	 * unknown. An allowed navigate sets the URL; a denied one does not; an
	 * explicit url replaces it; null makes it unknown again. */
	cr_assert_eq(scripts(nav_policy,
			     "{\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"deny\",\"rule\":\"regions[site-only]\"}\n"
			     "{\"url\":\"https://other.org/\",\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"allow\"}\n"
			     "{\"action\":{\"type\":\"navigate\",\"url\":\"https://example.com/\"},\"expect\":\"allow\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"deny\",\"rule\":\"regions[site-only]\"}\n"
			     "{\"action\":{\"type\":\"navigate\",\"url\":\"https://other.org/x\"},\"expect\":\"deny\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"deny\"}\n"
			     "{\"url\":\"https://x.org/\",\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"allow\"}\n"
			     "{\"url\":null,\"action\":{\"type\":\"click\",\"x\":5,\"y\":5},\"expect\":\"deny\"}\n"
			     "# a comment, and a blank line\n"
			     "\n"
			     "   \t\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"name\":\"typed where the pointer is\",\"action\":{\"type\":\"type\",\"text\":\"a\"},\"expect\":\"allow\"}\n"
			     "{\"pointer\":[1,1],\"action\":{\"type\":\"type\",\"text\":\"a\"},\"expect\":\"deny\"}\n"),
		     0);
	cr_assert_eq(sum.failed, 0, "%s", out);
	cr_assert_eq(sum.passed, 11, "%s", out);
	cr_assert(strstr(out, "ok   step 10 (line 13) typed where the pointer is: type: allow by actions.allow[2]"),
		  "%s", out);
	cr_assert(strstr(out, "11 passed, 0 failed\n"), "%s", out);
}

Test(script, failures_are_reported_and_the_rest_runs)
{
	cr_assert_eq(scripts(nav_policy,
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"deny\"}\n" /* wrong */
			     "not json at all\n"
			     "[1,2]\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\",\"colour\":1}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"maybe\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500}}\n"
			     "{\"action\":\"click\",\"expect\":\"allow\"}\n"
			     "{\"action\":{\"type\":\"clik\",\"x\":500,\"y\":500},\"expect\":\"deny\"}\n"
			     "{\"action\":{\"type\":\"clik\",\"x\":500,\"y\":500},\"expect\":\"deny\",\"rule\":\"schema\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\",\"rule\":\"default\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\",\"rule\":\"actions.allow\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\",\"rule\":\"actions.allow[1]\"}\n"
			     "{\"size\":[0,5],\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"pointer\":[5000,5],\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"url\":5,\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"time_ms\":-1,\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\",\"expect\":\"deny\"}\n"
			     "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"),
		     0);
	cr_assert_eq(sum.passed, 3, "%s", out);
	cr_assert_eq(sum.failed, 15, "%s", out);
	const char *want[] = {
		"FAIL step 1 (line 1): click: expected deny, got allow by actions.allow[1]",
		"FAIL step 2 (line 2): not a JSON object",
		"FAIL step 3 (line 3): not a JSON object: not an object",
		"FAIL step 4 (line 4): unknown field \"colour\"",
		"FAIL step 5 (line 5): \"expect\" must be",
		"FAIL step 6 (line 6): \"expect\" must be",
		"FAIL step 7 (line 7): \"action\" must be a canonical action object",
		"FAIL step 8 (line 8): clik: the action does not parse: action.type: unknown action",
		"ok   step 9 (line 9): clik: deny by schema",
		"FAIL step 10 (line 10): click: allow as expected, but by rule actions.allow[1], not default",
		"FAIL step 11 (line 11): click: allow as expected, but by rule actions.allow[1], not actions.allow",
		"ok   step 12 (line 12): click: allow by actions.allow[1]",
		"FAIL step 13 (line 13): \"size\" must be [W, H]",
		"FAIL step 14 (line 14): \"pointer\" must be [X, Y] on the screen",
		"FAIL step 15 (line 15): \"url\" must be a string",
		"FAIL step 16 (line 16): \"time_ms\" must be an integer",
		"FAIL step 17 (line 17): not a JSON object",
		"ok   step 18 (line 18): click: allow by actions.allow[1]",
		"3 passed, 15 failed\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(strstr(out, want[i]), "missing \"%s\" in:\n%s", want[i], out);
}

/* Offline there is no browser to find an element's point: a step with a
 * ref and no x, y fails with the reason (whatever it expects), and the
 * rest runs; with x, y given it is decided at them. */
Test(script, unresolved_element_actions_fail_offline)
{
	cr_assert_eq(scripts(nav_policy,
			     "{\"action\":{\"type\":\"click\",\"ref\":\"ref_5\"},\"expect\":\"deny\"}\n"
			     "{\"action\":{\"type\":\"click\",\"ref\":\"ref_5\"},\"expect\":\"deny\",\"rule\":\"schema\"}\n"
			     "{\"action\":{\"type\":\"click\",\"ref\":\"ref_5\",\"x\":5,\"y\":5},\"expect\":\"deny\",\"rule\":\"regions[site-only]\"}\n"
			     "{\"action\":{\"type\":\"click\",\"ref\":\"ref_5\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n"
			     "{\"action\":{\"type\":\"type\",\"text\":\"a\"},\"expect\":\"allow\"}\n"),
		     0);
	cr_assert_eq(sum.passed, 3, "%s", out);
	cr_assert_eq(sum.failed, 2, "%s", out);
	cr_assert(strstr(out, "FAIL step 1 (line 1): click: ref_5 has no x, y: an element's point on the "
			      "screen is found on a live desktop only; give its x, y to decide it offline"),
		  "%s", out);
	cr_assert(strstr(out, "FAIL step 2 (line 2): click: ref_5 has no x, y"), "%s", out);
	cr_assert(strstr(out, "ok   step 3 (line 3): click: deny by regions[site-only]"), "%s", out);
	cr_assert(strstr(out, "ok   step 5 (line 5): type: allow by actions.allow[2]"), "%s", out);
}

Test(script, line_max_at_its_boundary)
{
	/* A step padded with spaces to exactly DG_REC_SCRIPT_LINE_MAX bytes
	 * runs; one byte more is a failed step, and the next line still runs. */
	const char *step = "{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"";
	size_t total = 2 * (DG_REC_SCRIPT_LINE_MAX + 2) + 200;
	char *text = malloc(total);
	size_t n = 0;
	for (int over = 0; over <= 1; over++) {
		size_t pad = DG_REC_SCRIPT_LINE_MAX - strlen(step) - 1 + (size_t)over;
		n += (size_t)sprintf(text + n, "%s", step);
		memset(text + n, ' ', pad);
		n += pad;
		text[n++] = '}';
		text[n++] = '\n';
	}
	n += (size_t)sprintf(text + n, "%s}", step); /* the last line without '\n' */
	cr_assert_eq(script(nav_policy, text, n), 0);
	free(text);
	cr_assert_eq(sum.passed, 2, "%s", out);
	cr_assert_eq(sum.failed, 1, "%s", out);
	cr_assert(strstr(out, "FAIL step 2 (line 2): the line is longer than 131072 bytes"), "%s", out);
}

Test(script, steps_max_at_its_boundary, .timeout = 120)
{
	const char *step = "{\"action\":{\"type\":\"wait\",\"ms\":0},\"expect\":\"allow\"}\n";
	size_t sl = strlen(step);
	for (int over = 0; over <= 1; over++) {
		size_t steps = DG_REC_SCRIPT_STEPS_MAX + (size_t)over;
		char *text = malloc(steps * sl + 1);
		for (size_t i = 0; i < steps; i++)
			memcpy(text + i * sl, step, sl);
		char *big = malloc(16 << 20);
		struct dg_policy p;
		struct dg_err err = { { 0 } };
		dg_policy_default(&p);
		FILE *in = fmemopen(text, steps * sl, "r");
		FILE *o = fmemopen(big, 16 << 20, "w");
		cr_assert_eq(dg_rec_test_script(&p, in, NULL, o, &sum, &err), 0, "%s", err.msg);
		fclose(in);
		fclose(o);
		cr_assert_eq(sum.passed, DG_REC_SCRIPT_STEPS_MAX);
		cr_assert_eq(sum.failed, (unsigned)over);
		if (over)
			cr_assert(strstr(big, "more than 100000 steps"));
		free(big);
		free(text);
	}
}

Test(script, the_test_command)
{
	char dir[] = "/tmp/dgscript-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char pol[128], scr[128], bad[128];
	snprintf(pol, sizeof(pol), "%s/p.json", dir);
	snprintf(scr, sizeof(scr), "%s/s.jsonl", dir);
	snprintf(bad, sizeof(bad), "%s/bad.json", dir);
	FILE *f = fopen(pol, "w");
	fputs(nav_policy, f);
	fclose(f);
	f = fopen(bad, "w");
	fputs("{\"version\": 1, \"colour\": 1}", f);
	fclose(f);
	f = fopen(scr, "w");
	fputs("{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"allow\"}\n", f);
	fclose(f);
	struct dg_run r;
	const char *a1[] = { DG_BIN, "test", "--policy", pol, scr, NULL };
	cr_assert_eq(run(a1, &r), 0, "%s%s", r.out, r.err);
	cr_assert_str_eq(r.out, "ok   step 1 (line 1): click: allow by actions.allow[1]\n1 passed, 0 failed\n");
	dg_run_free(&r);
	f = fopen(scr, "a");
	fputs("{\"action\":{\"type\":\"click\",\"x\":500,\"y\":500},\"expect\":\"deny\"}\n", f);
	fclose(f);
	cr_assert_eq(run(a1, &r), 1);
	cr_assert(strstr(r.out, "1 passed, 1 failed"), "%s", r.out);
	dg_run_free(&r);
	/* --profile and --test-resolve belong to --live (which
	 * tests/containment/test_live_script.c runs). */
	const char *a2[] = { DG_BIN, "test", "--policy", pol, "--profile", "xterm", scr, NULL };
	cr_assert_eq(run(a2, &r), 2);
	cr_assert(strstr(r.err, "--live"), "%s", r.err);
	dg_run_free(&r);
	const char *u[][8] = {
		{ DG_BIN, "test", scr, NULL },
		{ DG_BIN, "test", "--policy", pol, NULL },
		{ DG_BIN, "test", "--policy", bad, scr, NULL },
		{ DG_BIN, "test", "--policy", pol, "/nonexistent.jsonl", NULL },
		{ DG_BIN, "test", "--policy", pol, scr, scr, NULL },
		{ DG_BIN, "test", "--policy", pol, "--policy", pol, scr, NULL },
		{ DG_BIN, "test", "--what", NULL },
	};
	for (size_t i = 0; i < sizeof(u) / sizeof(u[0]); i++) {
		cr_assert_eq(run(u[i], &r), 2, "case %zu: %s", i, r.err);
		dg_run_free(&r);
	}
	unlink(pol);
	unlink(scr);
	unlink(bad);
	rmdir(dir);
}

/* A live runner stands in for the gateway: it says what the full stack
 * decided and where the page is. */
static int fake_live(void *arg, const json_t *step, struct dg_rec_live_result *res, struct dg_err *err)
{
	int *calls = arg;
	(*calls)++;
	const char *type = json_string_value(json_object_get(json_object_get(step, "action"), "type"));
	if (strcmp(type, "wait") == 0)
		return dg_err_set(err, -EIO, "the desktop went away");
	res->verdict = DG_VERDICT_ALLOW;
	snprintf(res->rule, sizeof(res->rule), "default");
	res->has_url = true;
	snprintf(res->url, sizeof(res->url), "https://example.com/landed");
	res->has_title = true;
	snprintf(res->title, sizeof(res->title), "Example");
	return 0;
}

Test(script, live_mode_uses_the_runner_and_checks_url_and_title)
{
	int calls = 0;
	struct dg_rec_live live = { .step = fake_live, .arg = &calls };
	const char *text =
		"{\"action\":{\"type\":\"navigate\",\"url\":\"https://example.com/\"},\"expect\":\"allow\","
		"\"expect_url\":\"https://example.com/landed\",\"expect_title\":\"Example\"}\n"
		"{\"action\":{\"type\":\"navigate\",\"url\":\"https://example.com/\"},\"expect\":\"allow\","
		"\"expect_title\":\"Other\"}\n"
		"{\"action\":{\"type\":\"wait\",\"ms\":1},\"expect\":\"allow\"}\n";
	struct dg_policy p;
	struct dg_err err = { { 0 } };
	dg_policy_default(&p);
	FILE *in = fmemopen((void *)text, strlen(text), "r");
	FILE *o = fmemopen(out, sizeof(out) - 1, "w");
	memset(out, 0, sizeof(out));
	cr_assert_eq(dg_rec_test_script(&p, in, &live, o, &sum, &err), 0);
	fclose(in);
	fclose(o);
	cr_assert_eq(calls, 3);
	cr_assert_eq(sum.passed, 1, "%s", out);
	cr_assert_eq(sum.failed, 2, "%s", out);
	cr_assert(strstr(out, "expect_title \"Other\", got \"Example\""), "%s", out);
	cr_assert(strstr(out, "the live run failed: the desktop went away"), "%s", out);
}
