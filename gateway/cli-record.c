/* `deskgate verify`, `replay`, `test` and `key`: the recordings module on
 * the command line, with exactly the code the gateway uses. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gateway/cli-record.h"
#include "gateway/gateway.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

static const char verify_usage[] =
	"usage: deskgate verify [--key PUBKEY.pem | --state-dir DIR] [--json] RECORDING_DIR\n";
static const char replay_usage[] = "usage: deskgate replay --policy FILE [--json] RECORDING_DIR\n";
static const char test_usage[] =
	"usage: deskgate test --policy FILE [--live [--profile xterm|browser]\n"
	"                     [--test-resolve NAME:PORT=IP:PORT]] SCRIPT.jsonl\n";
static const char key_usage[] = "usage: deskgate key --state-dir DIR [--create]\n";

static int usage(const char *cmd, const char *text, const char *fmt, const char *arg)
{
	fprintf(stderr, "deskgate %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", text);
	return DG_EXIT_USAGE;
}

/* Flags: each a name with a value (value != NULL) or a switch (flag !=
 * NULL); the one positional argument goes to *pos. */
struct opt {
	const char *name;
	const char **value;
	bool *flag;
};

static int parse_args(const char *cmd, const char *text, int argc, char **argv, const struct opt *opts,
		      const char **pos)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct opt *o = NULL;
		for (int j = 0; opts[j].name; j++)
			if (strcmp(a, opts[j].name) == 0)
				o = &opts[j];
		if (o && o->flag) {
			*o->flag = true;
			continue;
		}
		if (o) {
			if (i + 1 >= argc)
				return usage(cmd, text, "%s needs a value", a);
			if (*o->value)
				return usage(cmd, text, "%s given twice", a);
			*o->value = argv[++i];
			continue;
		}
		if (a[0] == '-' && a[1])
			return usage(cmd, text, "unknown option \"%s\"", a);
		if (*pos)
			return usage(cmd, text, "unexpected argument \"%s\"", a);
		*pos = a;
	}
	return 0;
}

/* ---- verify ---------------------------------------------------------------- */

int dg_cmd_verify(int argc, char **argv)
{
	const char *key_path = NULL, *state_dir = NULL, *dir = NULL;
	bool json = false;
	const struct opt opts[] = { { "--key", &key_path, NULL },
				    { "--state-dir", &state_dir, NULL },
				    { "--json", NULL, &json },
				    { NULL, NULL, NULL } };
	int rc = parse_args("verify", verify_usage, argc, argv, opts, &dir);
	if (rc)
		return rc;
	if (!dir)
		return usage("verify", verify_usage, "%s", "no recording directory given");
	if (key_path && state_dir)
		return usage("verify", verify_usage, "%s", "--key and --state-dir are alternatives");
	struct dg_err err = { { 0 } };
	struct dg_rec_key *key = NULL;
	if (key_path)
		rc = dg_rec_key_load_public(key_path, &key, &err);
	else if (state_dir)
		rc = dg_rec_key_load(state_dir, &key, &err);
	if (rc) {
		fprintf(stderr, "deskgate verify: %s\n", err.msg);
		return DG_EXIT_USAGE;
	}
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

int dg_cmd_replay(int argc, char **argv)
{
	const char *policy_path = NULL, *dir = NULL;
	bool json = false;
	const struct opt opts[] = { { "--policy", &policy_path, NULL },
				    { "--json", NULL, &json },
				    { NULL, NULL, NULL } };
	int rc = parse_args("replay", replay_usage, argc, argv, opts, &dir);
	if (rc)
		return rc;
	if (!policy_path)
		return usage("replay", replay_usage, "%s is required", "--policy");
	if (!dir)
		return usage("replay", replay_usage, "%s", "no recording directory given");
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

int dg_cmd_test(int argc, char **argv)
{
	const char *policy_path = NULL, *script = NULL, *profile = NULL, *resolve = NULL;
	bool live_flag = false;
	const struct opt opts[] = { { "--policy", &policy_path, NULL },
				    { "--live", NULL, &live_flag },
				    { "--profile", &profile, NULL },
				    { "--test-resolve", &resolve, NULL },
				    { NULL, NULL, NULL } };
	int rc = parse_args("test", test_usage, argc, argv, opts, &script);
	if (rc)
		return rc;
	if (!policy_path)
		return usage("test", test_usage, "%s is required", "--policy");
	if (!script)
		return usage("test", test_usage, "%s", "no script given");
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
	if ((profile || resolve) && !live_flag) {
		fclose(f);
		dg_policy_free(&p);
		return usage("test", test_usage, "%s", "--profile and --test-resolve need --live");
	}
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

int dg_cmd_key(int argc, char **argv)
{
	const char *state_dir = NULL, *pos = NULL;
	bool create = false;
	const struct opt opts[] = { { "--state-dir", &state_dir, NULL },
				    { "--create", NULL, &create },
				    { NULL, NULL, NULL } };
	int rc = parse_args("key", key_usage, argc, argv, opts, &pos);
	if (rc)
		return rc;
	if (pos)
		return usage("key", key_usage, "unexpected argument \"%s\"", pos);
	if (!state_dir)
		return usage("key", key_usage, "%s is required", "--state-dir");
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
