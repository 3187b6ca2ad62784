/* `deskgate verify`, `export`, `replay`, `test` and `key`: the recordings module on
 * the command line, with exactly the code the gateway uses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli-priv.h"
#include "gateway/gateway.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

static const char *const profiles[] = { "xterm", "browser", NULL };

/* The key to check a seal with: the public key at key_path, or the one in
 * state_dir, or none (NULL) when neither is given. A key that does not
 * load is reported naming cmd. */
static int load_key(const char *cmd, const char *key_path, const char *state_dir,
		    struct dg_rec_key **key)
{
	struct dg_err err = { { 0 } };
	int rc = dg_cli_load_key(key_path, state_dir, key, &err);
	if (rc)
		fprintf(stderr, "deskgate %s: %s\n", cmd, err.msg);
	return rc;
}

/* --key and --state-dir, the seal's key, of verify and export (fields key
 * and state_dir of T). */
#define DG_REC_KEY_OPTS(T)                                                                \
	DG_OPT_VALUE_(T, key, "--key", "PUBKEY.pem", 0,                                   \
		      "the public key to check the seal with (from deskgate key)"),       \
	DG_OPT_VALUE_(T, state_dir, "--state-dir", "DIR", 0,                              \
		      "or the key in DIR/recording-key.pem (the gateway's state directory)")

/* ---- verify ---------------------------------------------------------------- */

int dg_cli_load_key(const char *key_path, const char *state_dir, struct dg_rec_key **key,
		    struct dg_err *err)
{
	*key = NULL;
	if (key_path)
		return dg_rec_key_load_public(key_path, key, err);
	if (state_dir)
		return dg_rec_key_load(state_dir, key, err);
	return 0;
}

struct verify_args {
	const char *key, *state_dir, *dir;
	bool json;
};

static const struct dg_opt verify_opts[] = {
	DG_REC_KEY_OPTS(struct verify_args),
	DG_OPT_SWITCH_(struct verify_args, json, "--json", "print one JSON object instead of a line"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_verify_cmd = {
	.name = "verify",
	.summary = "Check a recording's hash chain, frames and seal; exit 0 only when all hold.",
	.details = "Prints \"DIR: STATUS: message\"; STATUS is sealed, sealed-after-crash,\n"
		   "unsealed, unchecked (no key given) or bad.\n"
		   "exit status: 0 sealed (normally or after a crash) and every check holds;\n"
		   "1 anything else; 2 on a usage error or a key that does not load.\n",
	.doc = "docs/recordings.md",
	.pos = DG_POS_ONE,
	.pos_name = "RECORDING_DIR",
	.pos_what = "recording directory",
	.pos_offset = offsetof(struct verify_args, dir),
	.opts = verify_opts,
};

int dg_cmd_verify(int argc, char **argv)
{
	struct verify_args a = { 0 };
	int rc = dg_opt_handle(&dg_verify_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (a.key && a.state_dir)
		return dg_opt_usage_error(&dg_verify_cmd, "--key and --state-dir are alternatives");
	const char *dir = a.dir;
	bool json = a.json;
	struct dg_err err = { { 0 } };
	struct dg_rec_key *key = NULL;
	if (load_key("verify", a.key, a.state_dir, &key) != 0)
		return DG_EXIT_USAGE;
	struct dg_rec_verify_result res;
	rc = dg_rec_verify(dir, key, &res, &err);
	dg_rec_key_free(key);
	if (rc) {
		fprintf(stderr, "deskgate verify: %s\n", err.msg);
		return 1;
	}
	bool ok = res.status == DG_REC_SEALED || res.status == DG_REC_SEALED_CRASH;
	if (json) {
		json_t *j = json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:s}", "dir", dir,
				      "status", dg_rec_status_name(res.status), "ok", ok, "last_seq",
				      (json_int_t)res.last_seq, "bad_seq", (json_int_t)res.bad_seq,
				      "events", (json_int_t)res.events, "frames",
				      (json_int_t)res.frames, "torn_bytes", (json_int_t)res.torn_bytes,
				      "key_id", res.key_id);
		if (j) {
			json_object_set_new(j, "message", json_string(res.msg));
			json_dumpf(j, stdout, JSON_COMPACT);
			fputc('\n', stdout);
			json_decref(j);
		}
	} else {
		printf("%s: %s: %s\n", dir, dg_rec_status_name(res.status), res.msg);
	}
	return fflush(stdout) == 0 && ok ? 0 : 1;
}

/* ---- export ------------------------------------------------------------------ */

static const char *const export_formats[] = { "webm", "mp4", NULL };

struct export_args {
	const char *format, *out, *key, *state_dir, *dir;
};

static const struct dg_opt export_opts[] = {
	DG_OPT_CHOICE_(struct export_args, format, "--format", "webm|mp4", export_formats,
		       DG_OPT_REQUIRED, "the container: WebM (VP8) or MP4 (H.264)"),
	DG_OPT_VALUE_(struct export_args, out, "-o", "FILE", DG_OPT_REQUIRED,
		      "the video to write (replaced when complete)"),
	DG_REC_KEY_OPTS(struct export_args),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_export_cmd = {
	.name = "export",
	.summary = "Render a recording as a video: its screens at their recorded times, each "
		   "action and its verdict drawn on them.",
	.details = "Verifies the recording first and prints verify's line; a recording that is\n"
		   "not verified is still rendered, with \"unverified: <reason>\" on every frame.\n"
		   "exit status: 0 the video was written; 1 it could not be; 2 on a usage error\n"
		   "or a key that does not load.\n",
	.doc = "docs/recordings.md",
	.pos = DG_POS_ONE,
	.pos_name = "RECORDING_DIR",
	.pos_what = "recording directory",
	.pos_offset = offsetof(struct export_args, dir),
	.opts = export_opts,
};

static void print_export(const char *out, const char *format, const struct dg_rec_export_result *r)
{
	printf("%s: %s (%s), %dx%d, %llu frames at %d fps, %lld.%01lld s, %llu screens", out, format,
	       r->codec, r->width, r->height, (unsigned long long)r->frames, DG_REC_EXPORT_FPS,
	       (long long)(r->duration_ms / 1000), (long long)(r->duration_ms % 1000 / 100),
	       (unsigned long long)r->screens);
	if (r->frames_bad)
		printf(", %llu frames missing or refused (a note on the screen)",
		       (unsigned long long)r->frames_bad);
	if (r->out_of_order)
		printf(", %llu events out of time order (shown without a pause)",
		       (unsigned long long)r->out_of_order);
	if (r->truncated)
		printf(", cut at %d s", DG_REC_EXPORT_DURATION_MAX_S);
	if (!r->verified)
		printf(", marked unverified");
	putchar('\n');
}

int dg_cmd_export(int argc, char **argv)
{
	struct export_args a = { 0 };
	int rc = dg_opt_handle(&dg_export_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (a.key && a.state_dir)
		return dg_opt_usage_error(&dg_export_cmd, "--key and --state-dir are alternatives");
	struct dg_rec_key *key = NULL;
	if (load_key("export", a.key, a.state_dir, &key) != 0)
		return DG_EXIT_USAGE;
	enum dg_rec_export_format f = strcmp(a.format, "mp4") == 0 ? DG_REC_EXPORT_MP4
								    : DG_REC_EXPORT_WEBM;
	struct dg_err err = { { 0 } };
	struct dg_rec_export_result res;
	rc = dg_rec_export(a.dir, key, f, a.out, &res, &err);
	dg_rec_key_free(key);
	dg_rec_export_teardown();
	if (res.verify.msg[0])
		printf("%s: %s: %s\n", a.dir, dg_rec_status_name(res.verify.status), res.verify.msg);
	if (rc) {
		fflush(stdout);
		fprintf(stderr, "deskgate export: %s\n", err.msg);
		return 1;
	}
	print_export(a.out, a.format, &res);
	return fflush(stdout) == 0 ? 0 : 1;
}

/* ---- replay ------------------------------------------------------------------ */

struct replay_out {
	bool json;
	int io;
};

static int on_redecision(void *arg, const struct dg_rec_redecision *d)
{
	struct replay_out *ro = arg;
	if (!d->skipped && !d->changed)
		return 0;
	char *action = d->action ? json_dumps(d->action, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (ro->json) {
		json_t *j = json_pack("{s:I, s:s}", "seq", (json_int_t)d->seq, "kind", d->kind);
		if (j && d->action)
			json_object_set(j, "action", (json_t *)d->action);
		if (j && d->subject)
			json_object_set_new(j, "subject", json_string(d->subject));
		if (j && d->skipped) {
			json_object_set_new(j, "skipped", json_string(d->skipped));
		} else if (j) {
			json_object_set_new(j, "old", json_string(d->old_verdict));
			json_object_set_new(j, "old_rule", json_string(d->old_rule));
			json_object_set_new(j, "new", json_string(dg_verdict_name(d->now.verdict)));
			json_object_set_new(j, "rule", json_string(d->now.rule));
			json_object_set_new(j, "reason", json_string(d->now.reason));
			json_object_set_new(j, "redacted", json_boolean(d->redacted));
		}
		if (!j || json_dumpf(j, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF)
			ro->io = -EIO;
		json_decref(j);
	} else {
		char what[DG_SHOW_BUF + 32], rule[DG_SHOW_BUF], reason[DG_SHOW_BUF];
		const char *subj = action ? action : d->subject ? d->subject : "";
		char shown[DG_SHOW_BUF];
		dg_show_str(subj, 120, false, shown, sizeof(shown));
		snprintf(what, sizeof(what), "%s%s%s", d->kind, shown[0] ? " " : "", shown);
		if (d->skipped) {
			char why[DG_SHOW_BUF];
			dg_show_str(d->skipped, 160, false, why, sizeof(why));
			printf("seq %llu %s: not re-decided: %s\n", (unsigned long long)d->seq, what, why);
		} else {
			dg_show_str(d->now.rule, DG_SHOW_MAX, false, rule, sizeof(rule));
			dg_show_str(d->now.reason, DG_SHOW_MAX, false, reason, sizeof(reason));
			printf("seq %llu %s: %s -> %s (rule %s: %s)%s\n", (unsigned long long)d->seq, what,
			       d->old_verdict, dg_verdict_name(d->now.verdict), rule, reason,
			       d->redacted ? " [text redacted: decided on its length only]" : "");
		}
	}
	free(action);
	return 0;
}

struct replay_args {
	const char *policy, *dir;
	bool json;
};

static const struct dg_opt replay_opts[] = {
	DG_OPT_VALUE_(struct replay_args, policy, "--policy", "FILE", DG_OPT_REQUIRED,
		      "the policy to re-decide the recorded actions under"),
	DG_OPT_SWITCH_(struct replay_args, json, "--json",
		       "one JSON object per change and a final {\"summary\": ...}"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_replay_cmd = {
	.name = "replay",
	.summary = "Re-decide a recording's actions and requests under FILE; print the verdicts "
		   "that change.",
	.details = "exit status: 0 nothing changed; 1 something did; 2 on a usage error, a policy\n"
		   "that does not load or a recording that cannot be read.\n",
	.doc = "docs/recordings.md",
	.pos = DG_POS_ONE,
	.pos_name = "RECORDING_DIR",
	.pos_what = "recording directory",
	.pos_offset = offsetof(struct replay_args, dir),
	.opts = replay_opts,
};

int dg_cmd_replay(int argc, char **argv)
{
	struct replay_args a = { 0 };
	int rc = dg_opt_handle(&dg_replay_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	const char *policy_path = a.policy, *dir = a.dir;
	bool json = a.json;
	struct dg_err err = { { 0 } };
	struct dg_policy p;
	if (dg_policy_load(policy_path, &p, &err) != 0) {
		fprintf(stderr, "deskgate replay: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	struct replay_out ro = { .json = json };
	struct dg_rec_replay_summary sum;
	rc = dg_rec_replay(dir, &p, on_redecision, &ro, &sum, &err);
	dg_policy_free(&p);
	if (rc) {
		fprintf(stderr, "deskgate replay: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	if (json) {
		json_t *j = json_pack("{s:{s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I}}", "summary", "actions",
				      (json_int_t)sum.actions, "decisions", (json_int_t)sum.decisions,
				      "changed", (json_int_t)sum.changed, "skipped",
				      (json_int_t)sum.skipped, "redacted", (json_int_t)sum.redacted,
				      "last_seq", (json_int_t)sum.last_seq, "sealed", sum.sealed,
				      "torn_bytes", (json_int_t)sum.torn_bytes);
		if (!j || json_dumpf(j, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF)
			ro.io = -EIO;
		json_decref(j);
	} else {
		printf("%llu actions and %llu decisions re-decided: %llu changed, %llu not re-decided%s\n",
		       (unsigned long long)sum.actions, (unsigned long long)sum.decisions,
		       (unsigned long long)sum.changed, (unsigned long long)sum.skipped,
		       sum.sealed ? "" : " (the recording is not sealed: read up to its last complete event)");
	}
	if (ro.io || fflush(stdout) != 0) {
		fprintf(stderr, "deskgate replay: writing stdout failed\n");
		return DG_EXIT_USAGE;
	}
	return sum.changed ? 1 : 0;
}

/* ---- test ---------------------------------------------------------------------- */

struct test_args {
	const char *policy, *profile, *resolve, *script;
	bool live;
};

static const struct dg_opt test_opts[] = {
	DG_OPT_VALUE_(struct test_args, policy, "--policy", "FILE", DG_OPT_REQUIRED,
		      "the policy under test"),
	DG_OPT_SWITCH_(struct test_args, live, "--live",
		       "run the steps on a real jailed desktop (needs root)"),
	DG_OPT_CHOICE_(struct test_args, profile, "--profile", "xterm|browser", profiles, 0,
		       "with --live: the desktop's profile (default browser)"),
	DG_OPT_VALUE_(struct test_args, resolve, "--test-resolve", "NAME:PORT=IP:PORT",
		      DG_OPT_TESTS_ONLY,
		      "with --live: the egress proxy maps NAME:PORT to IP:PORT unresolved and "
		      "unchecked"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_test_cmd = {
	.name = "test",
	.summary = "Run a policy test script: JSON lines, each an action with its expected verdict.",
	.details = "Prints ok or FAIL per step, then \"N passed, N failed\".\n"
		   "exit status: 0 every step passed; 1 a step failed; 2 on a usage error or a\n"
		   "policy or script that does not load.\n",
	.doc = "docs/policy.md",
	.pos = DG_POS_ONE,
	.pos_name = "SCRIPT.jsonl",
	.pos_what = "script",
	.pos_offset = offsetof(struct test_args, script),
	.opts = test_opts,
};

int dg_cmd_test(int argc, char **argv)
{
	struct test_args a = { 0 };
	int rc = dg_opt_handle(&dg_test_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	if ((a.profile || a.resolve) && !a.live)
		return dg_opt_usage_error(&dg_test_cmd, "--profile and --test-resolve need --live");
	const char *policy_path = a.policy, *script = a.script, *profile = a.profile,
		   *resolve = a.resolve;
	bool live_flag = a.live;
	struct dg_err err = { { 0 } };
	struct dg_policy p;
	if (dg_policy_load(policy_path, &p, &err) != 0) {
		fprintf(stderr, "deskgate test: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
	FILE *f = fopen(script, "re");
	if (!f) {
		fprintf(stderr, "deskgate test: %s: %s\n", script, strerror(errno));
		dg_policy_free(&p);
		return DG_EXIT_USAGE;
	}
	struct dg_rec_live live = { 0 };
	if (live_flag && dg_cli_live_open(&p, profile, resolve, &live, &err) != 0) {
		fprintf(stderr, "deskgate test: %s\n", err.msg);
		fclose(f);
		dg_policy_free(&p);
		return DG_EXIT_USAGE;
	}
	struct dg_rec_test_summary sum;
	rc = dg_rec_test_script(&p, f, live_flag ? &live : NULL, stdout, &sum, &err);
	if (live_flag)
		dg_cli_live_close(&live);
	fclose(f);
	dg_policy_free(&p);
	if (rc) {
		fprintf(stderr, "deskgate test: %s: %s\n", script, err.msg);
		return DG_EXIT_USAGE;
	}
	return sum.failed ? 1 : 0;
}

/* ---- key ------------------------------------------------------------------------ */

struct key_args {
	const char *state_dir;
	bool create;
};

static const struct dg_opt key_opts[] = {
	DG_OPT_VALUE_(struct key_args, state_dir, "--state-dir", "DIR", DG_OPT_REQUIRED,
		      "the gateway's state directory, which holds recording-key.pem"),
	DG_OPT_SWITCH_(struct key_args, create, "--create",
		       "make the key when there is none (as the gateway's first start does)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_key_cmd = {
	.name = "key",
	.summary = "Print the public key that verifies recordings' seals (PEM on stdout, its id "
		   "on stderr).",
	.details = "exit status: 0 printed; 1 no key, or it does not load; 2 on a usage error.\n",
	.doc = "docs/recordings.md",
	.opts = key_opts,
};

int dg_cmd_key(int argc, char **argv)
{
	struct key_args a = { 0 };
	int rc = dg_opt_handle(&dg_key_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	const char *state_dir = a.state_dir;
	bool create = a.create;
	struct dg_err err = { { 0 } };
	struct dg_rec_key *k = NULL;
	rc = create ? dg_rec_key_load_or_create(state_dir, &k, &err)
		    : dg_rec_key_load(state_dir, &k, &err);
	if (rc) {
		fprintf(stderr, "deskgate key: %s%s\n", err.msg,
			rc == -ENOENT ? " (the gateway makes it at its first start; or pass --create)"
				      : "");
		return 1;
	}
	char *pem = NULL;
	rc = dg_rec_key_public_pem(k, &pem, &err);
	char id[DG_REC_HEX_LEN + 1];
	dg_rec_key_id(k, id);
	dg_rec_key_free(k);
	if (rc) {
		fprintf(stderr, "deskgate key: %s\n", err.msg);
		return 1;
	}
	fputs(pem, stdout);
	free(pem);
	fprintf(stderr, "key id %s\n", id);
	return fflush(stdout) == 0 ? 0 : 1;
}
