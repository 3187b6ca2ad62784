/* Replay (issue #6): a session recorded with the writer under a permissive
 * policy, replayed under a strict one, shows exactly the verdicts that
 * change (actions, browser requests, egress); approved asks stay asks;
 * budgets are recomputed from the recorded decision times; redacted text is
 * decided on its length; events that cannot be re-decided are skipped with
 * a reason; and the `deskgate replay` command's output and exit status. */
#include <criterion/criterion.h>

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "dg_test.h"
#include "recordings-priv.h"

static char base[64], root[128], strict_path[128], permissive_path[128];
static struct dg_err err;

/* The README's full example policy. */
static const char strict_text[] =
	"{\"version\": 1, \"default\": \"deny\","
	" \"actions\": {\"allow\": [\"screenshot\", \"move\", \"click\", \"drag\", \"scroll\", \"type\","
	" \"key\", \"navigate\", \"back\", \"forward\", \"reload\", \"wait\", \"zoom\", \"cursor_position\","
	" \"mouse_down\", \"mouse_up\"], \"ask\": [\"exec\"], \"deny\": []},"
	" \"urls\": {\"allow\": [\"https://example.com/**\", \"https://*.wikipedia.org/**\"],"
	" \"deny\": [\"https://*.wikipedia.org/wiki/Special:*\"], \"ask\": []},"
	" \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"url\": \"**\","
	" \"actions\": [\"click\", \"type\"], \"verdict\": \"deny\", \"reason\": \"window controls are off limits\"}],"
	" \"keys\": {\"deny\": [\"ctrl+alt+*\", \"super+*\"], \"ask\": [\"ctrl+Return\"]},"
	" \"text\": {\"max_length\": 4000, \"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]},"
	" \"egress\": {\"allow\": [\"example.com:443\", \"*.wikipedia.org:443\"]},"
	" \"budgets\": {\"actions_per_minute\": 300, \"max_actions\": 10000, \"max_exec\": 100}}";
static const char permissive_text[] = "{\"version\": 1}";

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/dgrep-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/rec", base);
	mkdir(root, 0750);
	snprintf(strict_path, sizeof(strict_path), "%s/strict.json", base);
	snprintf(permissive_path, sizeof(permissive_path), "%s/permissive.json", base);
	write_file(strict_path, strict_text);
	write_file(permissive_path, permissive_text);
	memset(&err, 0, sizeof(err));
}

static void teardown(void)
{
	nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(replay, .init = setup, .fini = teardown);

static char dirbuf[256];
static const char *dir_of(const char *id)
{
	snprintf(dirbuf, sizeof(dirbuf), "%s/%s", root, id);
	return dirbuf;
}

/* What the gateway does per action: parse, decide under the session's
 * policy with its context, run, record. pointer/url are the context the
 * decision saw; the test tracks them as the gateway would. */
struct session {
	struct dg_rec *r;
	struct dg_policy p;
	char url[512];
	int px, py;
};

static void open_session(struct session *s, const char *id, const char *policy_text, bool redact)
{
	struct dg_rec_meta m = { .id = id, .profile = "browser", .width = 1280, .height = 800,
				 .token_name = "agent", .policy_text = policy_text,
				 .policy_len = strlen(policy_text) };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE, .redact_text = redact };
	cr_assert_eq(dg_rec_open(root, &m, &o, &s->r, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_policy_parse(policy_text, strlen(policy_text), "test", &s->p, &err), 0, "%s",
		     err.msg);
	s->url[0] = '\0';
	s->px = 640;
	s->py = 400;
	json_t *e = json_pack("{s:s, s:s}", "type", "lifecycle", "state", "created");
	cr_assert_eq(dg_rec_event(s->r, e, &err), 0);
	json_decref(e);
}

static void close_session(struct session *s)
{
	dg_rec_close(s->r);
	dg_policy_free(&s->p);
}

/* Records one canonical action (text), decided under the session's
 * policy; returns the verdict. */
static enum dg_verdict act(struct session *s, const char *text)
{
	struct dg_action a;
	cr_assert_eq(dg_action_parse(text, strlen(text), 1280, 800, &a, &err), 0, "%s: %s", text,
		     err.msg);
	struct dg_decide_ctx ctx = { .url = s->url[0] ? s->url : NULL, .screen_w = 1280,
				     .screen_h = 800, .pointer_x = s->px, .pointer_y = s->py };
	struct dg_decision d;
	dg_policy_decide(&s->p, &a, &ctx, &d);
	json_t *input = json_loads(text, 0, NULL);
	json_t *e = json_pack("{s:s, s:o, s:o, s:s, s:s, s:s, s:o, s:n, s:[ii], s:[ii], s:{s:b}, s:i}",
			      "type", "action", "input", input, "action", dg_action_to_json(&a),
			      "verdict", dg_verdict_name(d.verdict), "rule", d.rule, "reason", d.reason,
			      "url", s->url[0] ? json_string(s->url) : json_null(), "title",
			      "screen", 1280, 800, "pointer", s->px, s->py, "result", "ok",
			      d.verdict == DG_VERDICT_ALLOW, "duration_ms", 5);
	cr_assert_eq(dg_rec_event(s->r, e, &err), 0, "%s", err.msg);
	json_decref(e);
	if (d.verdict == DG_VERDICT_ALLOW) {
		if (a.type == DG_ACTION_NAVIGATE)
			snprintf(s->url, sizeof(s->url), "%s", a.url);
		if (a.type == DG_ACTION_CLICK) {
			s->px = a.x;
			s->py = a.y;
		}
	}
	dg_action_free(&a);
	return d.verdict;
}

static void event(struct session *s, json_t *e)
{
	cr_assert_eq(dg_rec_event(s->r, e, &err), 0, "%s", err.msg);
	json_decref(e);
}

/* The permissive session of the issue: navigate, click, type and key
 * actions (and a browser request and an egress decision). */
static void permissive_session(const char *id)
{
	struct session s;
	open_session(&s, id, permissive_text, false);
	const char *actions[] = {
		"{\"type\":\"navigate\",\"url\":\"https://example.com/\"}",             /* 2 */
		"{\"type\":\"click\",\"x\":10,\"y\":10}",                               /* 3 */
		"{\"type\":\"click\",\"x\":640,\"y\":400}",                             /* 4 */
		"{\"type\":\"type\",\"text\":\"hello\"}",                               /* 5 */
		"{\"type\":\"type\",\"text\":\"-----BEGIN RSA PRIVATE KEY-----\"}",    /* 6 */
		"{\"type\":\"key\",\"keys\":\"ctrl+alt+Delete\"}",                      /* 7 */
		"{\"type\":\"key\",\"keys\":\"ctrl+Return\"}",                          /* 8 */
		"{\"type\":\"navigate\",\"url\":\"https://evil.example.net/\"}",        /* 9 */
		"{\"type\":\"navigate\",\"url\":\"https://en.wikipedia.org/wiki/Special:Random\"}", /* 10 */
		"{\"type\":\"exec\",\"argv\":[\"ls\"]}",                                /* 11 */
		"{\"type\":\"screenshot\"}",                                            /* 12 */
	};
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		cr_assert_eq(act(&s, actions[i]), DG_VERDICT_ALLOW, "%s", actions[i]);
	event(&s, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "type", "decision", "layer", "browser",
			    "url", "https://evil.example.net/x.js", "resource_type", "Script", "verdict",
			    "allow", "rule", "default")); /* 13 */
	event(&s, json_pack("{s:s, s:s, s:s, s:i, s:s, s:s}", "type", "decision", "layer", "egress",
			    "host", "example.com", "port", 443, "verdict", "deny", "rule",
			    "egress.default")); /* 14 */
	/* 15: an action the schema refused (no canonical action). */
	event(&s, json_pack("{s:s, s:{s:s}, s:n, s:s, s:s}", "type", "action", "input", "type",
			    "clik", "action", "verdict", "deny", "rule", "schema"));
	event(&s, json_pack("{s:s, s:s, s:s}", "type", "lifecycle", "state", "ended", "reason", "done"));
	close_session(&s);
}

struct change {
	uint64_t seq;
	const char *kind, *old, *now, *rule;
};

static const struct change expected[] = {
	{ 3, "action", "allow", "deny", "regions[top-bar]" },
	{ 6, "action", "allow", "deny", "text.deny[0]" },
	{ 7, "action", "allow", "deny", "keys.deny[0] ctrl+alt+*" },
	{ 8, "action", "allow", "ask", "keys.ask[0] ctrl+Return" },
	{ 9, "action", "allow", "deny", "default" },
	{ 10, "action", "allow", "deny", "urls.deny[0] https://*.wikipedia.org/wiki/Special:*" },
	{ 11, "action", "allow", "ask", "actions.ask[0]" },
	{ 13, "browser", "allow", "deny", "default" },
	{ 14, "egress", "deny", "allow", "egress.allow[0]" },
};
#define N_EXPECTED (sizeof(expected) / sizeof(expected[0]))

struct seen {
	struct change c[64];
	char rules[64][DG_DECISION_RULE_MAX];
	char kinds[64][16], olds[64][8];
	int n, all, skipped;
	uint64_t skipped_seq;
};

static int collect(void *arg, const struct dg_rec_redecision *d)
{
	struct seen *s = arg;
	s->all++;
	if (d->skipped) {
		s->skipped++;
		s->skipped_seq = d->seq;
		return 0;
	}
	if (!d->changed)
		return 0;
	cr_assert_lt(s->n, 64);
	/* The event's strings live only as long as the callback: copy them. */
	snprintf(s->rules[s->n], sizeof(s->rules[0]), "%s", d->now.rule);
	snprintf(s->kinds[s->n], sizeof(s->kinds[0]), "%s", d->kind);
	snprintf(s->olds[s->n], sizeof(s->olds[0]), "%s", d->old_verdict);
	s->c[s->n] = (struct change){ d->seq, s->kinds[s->n], s->olds[s->n],
				      dg_verdict_name(d->now.verdict), s->rules[s->n] };
	s->n++;
	return 0;
}

Test(replay, permissive_session_under_strict_policy_shows_exactly_the_changes)
{
	permissive_session("perm");
	struct dg_policy strict;
	cr_assert_eq(dg_policy_load(strict_path, &strict, &err), 0, "%s", err.msg);
	struct seen s = { .n = 0 };
	struct dg_rec_replay_summary sum;
	cr_assert_eq(dg_rec_replay(dir_of("perm"), &strict, collect, &s, &sum, &err), 0, "%s", err.msg);
	cr_assert_eq((size_t)s.n, N_EXPECTED, "%d changes", s.n);
	for (size_t i = 0; i < N_EXPECTED; i++) {
		cr_assert_eq(s.c[i].seq, expected[i].seq, "change %zu: seq %llu", i,
			     (unsigned long long)s.c[i].seq);
		cr_assert_str_eq(s.c[i].kind, expected[i].kind, "seq %llu", (unsigned long long)s.c[i].seq);
		cr_assert_str_eq(s.c[i].old, expected[i].old, "seq %llu", (unsigned long long)s.c[i].seq);
		cr_assert_str_eq(s.c[i].now, expected[i].now, "seq %llu", (unsigned long long)s.c[i].seq);
		cr_assert_str_eq(s.c[i].rule, expected[i].rule, "seq %llu", (unsigned long long)s.c[i].seq);
	}
	cr_assert_eq(sum.actions, 11);
	cr_assert_eq(sum.decisions, 2);
	cr_assert_eq(sum.changed, N_EXPECTED);
	cr_assert_eq(sum.skipped, 1);
	cr_assert_eq(s.skipped_seq, 15);
	cr_assert_eq(sum.last_seq, 16);
	cr_assert_not(sum.sealed);
	/* Under the policy it was recorded with: nothing changes. */
	struct dg_policy perm;
	cr_assert_eq(dg_policy_load(permissive_path, &perm, &err), 0);
	memset(&s, 0, sizeof(s));
	cr_assert_eq(dg_rec_replay(dir_of("perm"), &perm, collect, &s, &sum, &err), 0);
	cr_assert_eq(s.n, 0);
	cr_assert_eq(sum.changed, 0);
	dg_policy_free(&perm);
	dg_policy_free(&strict);
}

Test(replay, approved_asks_stay_asks)
{
	struct session s;
	open_session(&s, "asked", strict_text, false);
	cr_assert_eq(act(&s, "{\"type\":\"key\",\"keys\":\"ctrl+Return\"}"), DG_VERDICT_ASK);
	event(&s, json_pack("{s:s, s:i, s:b, s:s}", "type", "approval", "action_seq", 2, "approved", 1,
			    "by", "alice"));
	close_session(&s);
	struct dg_policy strict, perm;
	cr_assert_eq(dg_policy_load(strict_path, &strict, &err), 0);
	cr_assert_eq(dg_policy_load(permissive_path, &perm, &err), 0);
	struct seen seen = { .n = 0 };
	struct dg_rec_replay_summary sum;
	cr_assert_eq(dg_rec_replay(dir_of("asked"), &strict, collect, &seen, &sum, &err), 0);
	cr_assert_eq(seen.n, 0);
	memset(&seen, 0, sizeof(seen));
	cr_assert_eq(dg_rec_replay(dir_of("asked"), &perm, collect, &seen, &sum, &err), 0);
	cr_assert_eq(seen.n, 1);
	cr_assert_str_eq(seen.c[0].old, "ask");
	cr_assert_str_eq(seen.c[0].now, "allow");
	dg_policy_free(&strict);
	dg_policy_free(&perm);
}

/* ---- crafted recordings: chosen times ------------------------------------------- */

static char *craft(json_t *obj, uint8_t prev[32])
{
	char *c = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	size_t n = strlen(c);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned hl;
	uint8_t h[32];
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	EVP_DigestUpdate(md, prev, 32);
	EVP_DigestUpdate(md, c, n);
	EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	char hex[65];
	dg_hex_encode(h, 32, hex);
	char *line = malloc(n + 100);
	memcpy(line, c, n - 1);
	sprintf(line + n - 1, ",\"hash\":\"%s\"}\n", hex);
	memcpy(prev, h, 32);
	free(c);
	return line;
}

/* An action event at mono_ms (duration_ms when >= 0), recorded allowed. */
static json_t *timed(const char *action, long long mono, int duration)
{
	json_t *a = json_loads(action, 0, NULL);
	json_t *e = json_pack("{s:s, s:o, s:s, s:s, s:[ii], s:[ii], s:I}", "type", "action", "action",
			      a, "verdict", "allow", "rule", "default", "screen", 1280, 800,
			      "pointer", 640, 400, "mono_ms", (json_int_t)mono);
	if (duration >= 0)
		json_object_set_new(e, "duration_ms", json_integer(duration));
	return e;
}

static void crafted(const char *id, json_t **evs, int n)
{
	struct dg_rec *r;
	struct dg_rec_meta m = { .id = id, .profile = "xterm", .width = 1280, .height = 800,
				 .policy_text = permissive_text, .policy_len = strlen(permissive_text) };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	char p[300];
	snprintf(p, sizeof(p), "%s/%s/session.json", root, id);
	FILE *f = fopen(p, "r");
	char buf[8192];
	size_t len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	uint8_t prev[32];
	dg_rec_sha256(buf, len, prev);
	snprintf(p, sizeof(p), "%s/%s/events.jsonl", root, id);
	f = fopen(p, "w");
	for (int i = 0; i < n; i++) {
		char ph[65];
		dg_hex_encode(prev, 32, ph);
		json_object_set_new(evs[i], "seq", json_integer(i + 1));
		json_object_set_new(evs[i], "wall", json_string("2025-01-01T00:00:00.000Z"));
		json_object_set_new(evs[i], "prev", json_string(ph));
		char *line = craft(evs[i], prev);
		fputs(line, f);
		free(line);
		json_decref(evs[i]);
	}
	fclose(f);
}

static void replay_policy(const char *id, const char *policy, struct seen *s,
			  struct dg_rec_replay_summary *sum)
{
	struct dg_policy p;
	cr_assert_eq(dg_policy_parse(policy, strlen(policy), "test", &p, &err), 0, "%s", err.msg);
	memset(s, 0, sizeof(*s));
	int rc = dg_rec_replay(dir_of(id), &p, collect, s, sum, &err);
	dg_policy_free(&p);
	cr_assert_eq(rc, 0, "%s", err.msg);
}

Test(replay, budgets_are_recomputed_from_recorded_decision_times)
{
	const char *click = "{\"type\":\"click\",\"x\":640,\"y\":400}";
	json_t *evs[] = {
		timed(click, 10000, 0),  /* 1: slot 10 */
		timed(click, 10400, 0),  /* 2 */
		timed(click, 10900, 0),  /* 3 */
		timed(click, 10950, 0),  /* 4: the 4th in a minute */
		timed(click, 70500, 1000), /* 5: decided at 69.5 s: within 60 slots of 10 s */
		timed(click, 71000, 0),  /* 6: 71 - 10 >= 60: a new minute */
		timed(click, 71500, -1), /* 7: no duration: decided at mono_ms */
	};
	crafted("budget", evs, 7);
	struct seen s;
	struct dg_rec_replay_summary sum;
	replay_policy("budget", "{\"version\":1,\"default\":\"allow\",\"budgets\":{\"actions_per_minute\":3}}",
		      &s, &sum);
	cr_assert_eq(s.n, 2, "%d changes", s.n);
	cr_assert_eq(s.c[0].seq, 4);
	cr_assert_str_eq(s.c[0].rule, "budgets.actions_per_minute");
	cr_assert_eq(s.c[1].seq, 5);
	/* Denied actions do not count; totals and execs. */
	json_t *evs2[] = {
		timed(click, 1000, 0),
		timed("{\"type\":\"type\",\"text\":\"x\"}", 2000, 0), /* denied by the new policy */
		timed(click, 3000, 0),
		timed(click, 4000, 0),                               /* the 3rd allowed: over 2 */
		timed("{\"type\":\"exec\",\"argv\":[\"ls\"]}", 5000, 0),
	};
	crafted("totals", evs2, 5);
	replay_policy("totals", "{\"version\":1,\"default\":\"allow\",\"actions\":{\"deny\":[\"type\"]},"
		      "\"budgets\":{\"max_actions\":2}}", &s, &sum);
	cr_assert_eq(s.n, 3, "%d changes", s.n);
	cr_assert_eq(s.c[0].seq, 2);
	cr_assert_eq(s.c[1].seq, 4);
	cr_assert_str_eq(s.c[1].rule, "budgets.max_actions");
	cr_assert_eq(s.c[2].seq, 5);
	json_t *evs3[] = {
		timed("{\"type\":\"exec\",\"argv\":[\"ls\"]}", 1000, 0),
		timed("{\"type\":\"exec\",\"argv\":[\"ls\"]}", 2000, 0),
	};
	crafted("execs", evs3, 2);
	replay_policy("execs", "{\"version\":1,\"default\":\"allow\",\"budgets\":{\"max_exec\":1}}", &s, &sum);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.c[0].seq, 2);
	cr_assert_str_eq(s.c[0].rule, "budgets.max_exec");
}

Test(replay, malformed_action_events_are_skipped_not_fatal)
{
	json_t *evs[] = {
		json_pack("{s:s, s:s, s:i}", "type", "action", "action", "not an object", "verdict", 1),
		json_pack("{s:s, s:{s:s}, s:i}", "type", "action", "action", "type", "screenshot", "verdict", 7),
		json_pack("{s:s, s:{s:s}, s:s, s:[i]}", "type", "action", "action", "type", "screenshot",
			  "verdict", "allow", "screen", 5),
		json_pack("{s:s, s:{s:s}, s:s, s:[ii]}", "type", "action", "action", "type", "screenshot",
			  "verdict", "allow", "pointer", 5000, 5),
		json_pack("{s:s, s:{s:s,s:i,s:i}, s:s}", "type", "action", "action", "type", "click", "x",
			  5000, "y", 1, "verdict", "allow"),
		json_pack("{s:s, s:{s:s}, s:s, s:i}", "type", "action", "action", "type", "screenshot",
			  "verdict", "allow", "url", 5),
		json_pack("{s:s, s:s, s:i, s:s}", "type", "decision", "layer", "browser", "url", 3, "verdict",
			  "allow"),
		json_pack("{s:s, s:s, s:s, s:i, s:s}", "type", "decision", "layer", "egress", "host", "h",
			  "port", 70000, "verdict", "allow"),
		json_pack("{s:s, s:s}", "type", "decision", "layer", "future"),
		json_pack("{s:s, s:{s:s}, s:s}", "type", "action", "action", "type", "screenshot", "verdict",
			  "allow"),
	};
	for (int i = 0; i < 10; i++)
		json_object_set_new(evs[i], "mono_ms", json_integer(1000 + i));
	crafted("odd", evs, 10);
	struct seen s;
	struct dg_rec_replay_summary sum;
	replay_policy("odd", "{\"version\":1}", &s, &sum);
	cr_assert_eq(sum.skipped, 8, "%llu", (unsigned long long)sum.skipped);
	cr_assert_eq(sum.actions, 1);
	cr_assert_eq(s.n, 0);
}

/* An element action recorded before its point was found (a ref without
 * x, y) cannot be decided again: skipped with the reason. Resolved, it is
 * decided at its x, y. */
static char skip_reason[256];
static int keep_skip(void *arg, const struct dg_rec_redecision *d)
{
	if (d->skipped)
		snprintf(skip_reason, sizeof(skip_reason), "%s", d->skipped);
	return collect(arg, d);
}

Test(replay, unresolved_element_actions_are_skipped)
{
	json_t *evs[] = {
		json_pack("{s:s, s:{s:s,s:s}, s:s}", "type", "action", "action", "type", "click", "ref",
			  "ref_4", "verdict", "deny"),
		json_pack("{s:s, s:{s:s,s:s,s:i,s:i}, s:s}", "type", "action", "action", "type", "click",
			  "ref", "ref_4", "x", 5, "y", 5, "verdict", "allow"),
	};
	for (int i = 0; i < 2; i++)
		json_object_set_new(evs[i], "mono_ms", json_integer(1000 + i));
	crafted("refs", evs, 2);
	struct dg_policy p;
	cr_assert_eq(dg_policy_parse(strict_text, strlen(strict_text), "test", &p, &err), 0, "%s",
		     err.msg);
	struct seen s;
	memset(&s, 0, sizeof(s));
	struct dg_rec_replay_summary sum;
	skip_reason[0] = '\0';
	cr_assert_eq(dg_rec_replay(dir_of("refs"), &p, keep_skip, &s, &sum, &err), 0, "%s", err.msg);
	dg_policy_free(&p);
	cr_assert_eq(sum.skipped, 1);
	cr_assert_eq(s.skipped_seq, 1);
	cr_assert(strstr(skip_reason, "a ref without x, y"), "%s", skip_reason);
	cr_assert_eq(sum.actions, 1);
	cr_assert_eq(s.n, 1);
	cr_assert_eq(s.c[0].seq, 2);
	cr_assert_str_eq(s.c[0].rule, "regions[top-bar]");
}

Test(replay, redacted_text_is_decided_on_its_length)
{
	struct session s;
	open_session(&s, "red", permissive_text, true);
	act(&s, "{\"type\":\"type\",\"text\":\"-----BEGIN RSA PRIVATE KEY----- and more text to be long\"}");
	act(&s, "{\"type\":\"type\",\"text\":\"short\"}");
	close_session(&s);
	struct seen seen;
	struct dg_rec_replay_summary sum;
	replay_policy("red", "{\"version\":1,\"default\":\"allow\",\"text\":{\"max_length\":10}}", &seen, &sum);
	cr_assert_eq(seen.n, 1);
	cr_assert_eq(seen.c[0].seq, 2);
	cr_assert_str_eq(seen.c[0].rule, "text.max_length");
	cr_assert_eq(sum.redacted, 2);
	/* A deny pattern cannot be re-checked on a redacted text. */
	replay_policy("red", "{\"version\":1,\"default\":\"allow\",\"text\":{\"deny\":[\"BEGIN\"]}}", &seen, &sum);
	cr_assert_eq(seen.n, 0);
}

static int stop_after_3(void *arg, const struct dg_rec_redecision *d)
{
	(void)d;
	return ++*(int *)arg == 3;
}

Test(replay, broken_or_missing_recordings_are_errors)
{
	permissive_session("perm");
	char p[300];
	snprintf(p, sizeof(p), "%s/perm/events.jsonl", root);
	FILE *f = fopen(p, "r+");
	fseek(f, 30, SEEK_SET);
	fputc('#', f);
	fclose(f);
	struct dg_policy pol;
	dg_policy_default(&pol);
	struct dg_rec_replay_summary sum;
	cr_assert_eq(dg_rec_replay(dir_of("perm"), &pol, NULL, NULL, &sum, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "seq 1"), "%s", err.msg);
	cr_assert_eq(dg_rec_replay("/nonexistent", &pol, NULL, NULL, &sum, &err), -ENOENT);
	/* Every re-decision reaches the callback; a non-zero return stops. */
	permissive_session("perm2");
	struct seen s = { .n = 0 };
	cr_assert_eq(dg_rec_replay(dir_of("perm2"), &pol, collect, &s, &sum, &err), 0);
	cr_assert_eq(s.all, 14);
	int calls = 0;
	cr_assert_eq(dg_rec_replay(dir_of("perm2"), &pol, stop_after_3, &calls, &sum, &err), 0);
	cr_assert_eq(calls, 3);
	cr_assert_eq(sum.actions, 3);
}

static int run(const char *const *argv, struct dg_run *r)
{
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 60, -1, r), 0);
	return r->exit_code;
}

Test(replay, the_replay_command)
{
	permissive_session("perm");
	char d[300];
	snprintf(d, sizeof(d), "%s/perm", root);
	struct dg_run r;
	const char *a1[] = { DG_BIN, "replay", "--policy", strict_path, d, NULL };
	cr_assert_eq(run(a1, &r), 1, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "seq 3 action {\"button\":\"left\",\"count\":1,\"modifiers\":[],"
			 "\"type\":\"click\",\"x\":10,\"y\":10}: allow -> deny (rule regions[top-bar]: "
			 "window controls are off limits)"), "%s", r.out);
	cr_assert(strstr(r.out, "seq 14 egress example.com:443: deny -> allow"), "%s", r.out);
	cr_assert(strstr(r.out, "seq 15 action: not re-decided: the action did not parse"), "%s", r.out);
	cr_assert(strstr(r.out, "11 actions and 2 decisions re-decided: 9 changed, 1 not re-decided"),
		  "%s", r.out);
	dg_run_free(&r);
	/* --json: one object per change, then the summary. */
	const char *a2[] = { DG_BIN, "replay", "--json", "--policy", strict_path, d, NULL };
	cr_assert_eq(run(a2, &r), 1);
	char *save, *line = strtok_r(r.out, "\n", &save);
	size_t i = 0;
	json_t *summary = NULL;
	for (; line; line = strtok_r(NULL, "\n", &save)) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert_not_null(j, "%s", line);
		if (json_object_get(j, "summary")) {
			summary = j;
			continue;
		}
		if (json_object_get(j, "skipped")) {
			json_decref(j);
			continue;
		}
		cr_assert_lt(i, N_EXPECTED);
		cr_assert_eq(json_integer_value(json_object_get(j, "seq")), (json_int_t)expected[i].seq);
		cr_assert_str_eq(json_string_value(json_object_get(j, "old")), expected[i].old);
		cr_assert_str_eq(json_string_value(json_object_get(j, "new")), expected[i].now);
		cr_assert_str_eq(json_string_value(json_object_get(j, "rule")), expected[i].rule);
		i++;
		json_decref(j);
	}
	cr_assert_eq(i, N_EXPECTED);
	cr_assert_not_null(summary);
	cr_assert_eq(json_integer_value(json_object_get(json_object_get(summary, "summary"), "changed")),
		     (json_int_t)N_EXPECTED);
	json_decref(summary);
	dg_run_free(&r);
	/* 0 when nothing changes. */
	const char *a3[] = { DG_BIN, "replay", "--policy", permissive_path, d, NULL };
	cr_assert_eq(run(a3, &r), 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "0 changed"), "%s", r.out);
	dg_run_free(&r);
	/* 2: usage, bad policy, unreadable recording. */
	const char *a4[] = { DG_BIN, "replay", d, NULL };
	cr_assert_eq(run(a4, &r), 2);
	dg_run_free(&r);
	const char *a5[] = { DG_BIN, "replay", "--policy", "/nonexistent.json", d, NULL };
	cr_assert_eq(run(a5, &r), 2);
	dg_run_free(&r);
	const char *a6[] = { DG_BIN, "replay", "--policy", strict_path, "/nonexistent", NULL };
	cr_assert_eq(run(a6, &r), 2);
	cr_assert(strstr(r.err, "/nonexistent"), "%s", r.err);
	dg_run_free(&r);
}
