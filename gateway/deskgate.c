/* deskgate: the one binary. Each subcommand parses its own flags strictly:
 * an unknown flag or a missing argument is a usage error (exit 2), never a
 * guess. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "desktop/desktop.h"
#include "desktop/worker-priv.h"
#include "gateway/cli-audit.h"
#include "gateway/cli-check.h"
#include "gateway/cli-record.h"
#include "gateway/gateway.h"
#include "policy/policy.h"


static const char usage_text[] =
	"usage: deskgate COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  exec [--policy FILE] -- CMD [ARGS...]\n"
	"      run CMD in a fresh jail under the policy's limits; stdin is passed\n"
	"      through, stdout and stderr are relayed (each cut at limits.output_bytes).\n"
	"      Exit status: CMD's own; 124 when the wall clock (limits.exec_seconds)\n"
	"      ended it; 137 when a limit killed it; 125 when deskgate itself failed;\n"
	"      126/127 when CMD cannot be run / was not found; 2 on a usage error.\n"
	"  serve [--config FILE] [--listen ADDR:PORT] [--policy FILE] [--recordings DIR]\n"
	"      the gateway: HTTP and WebSocket API for agents and viewers (see README)\n"
	"  check --policy FILE [--url CURRENT_URL] [--size WxH] < actions.jsonl\n"
	"      decide canonical actions (one JSON object a line) under the policy:\n"
	"      one {\"verdict\", \"rule\", \"reason\"} line each\n"
	"  shot [--profile xterm|browser] [--url URL] [--size WxH] [--policy FILE] -o FILE.png\n"
	"      start a desktop, take one settled screenshot, tear everything down\n"
	"  desktop [--profile xterm|browser] [--size WxH] [--policy FILE] --script FILE.jsonl --out DIR\n"
	"      run canonical actions (one JSON object a line) on a fresh desktop; write\n"
	"      DIR/results.jsonl and a screenshot per action\n"
	"  verify [--key PUBKEY.pem | --state-dir DIR] [--json] RECORDING_DIR\n"
	"      check a recording's hash chain, frames and seal; exit 0 only when all hold\n"
	"  replay --policy FILE [--json] RECORDING_DIR\n"
	"      re-decide a recording's actions under FILE; print the verdicts that change\n"
	"  test --policy FILE [--live] SCRIPT.jsonl\n"
	"      run a policy test script (steps with expected verdicts); exit 1 on a failure\n"
	"  audit [--policy FILE] [--profile xterm|browser] [--json] [--state-dir DIR]\n"
	"      run the containment probes inside a fresh session under the policy;\n"
	"      one finding per probe; exit 1 when anything leaked\n"
	"  key --state-dir DIR [--create]\n"
	"      print the public key that verifies recordings' seals (PEM)\n"
	"  help\n"
	"      this text\n";

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
	fprintf(stderr, "deskgate %s: ", cmd);
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n\n%s", usage_text);
	return DG_EXIT_USAGE;
}

/* Loads --policy FILE, or the built-in default when path is NULL. */
static int load_policy(const char *cmd, const char *path, struct dg_policy *p)
{
	struct dg_err err = {{0}};
	if (!path) {
		dg_policy_default(p);
		return 0;
	}
	if (dg_policy_load(path, p, &err) != 0) {
		fprintf(stderr, "deskgate %s: %s\n", cmd, err.msg);
		return -1;
	}
	return 0;
}

static int require_root(const char *cmd)
{
	if (geteuid() == 0)
		return 0;
	fprintf(stderr, "deskgate %s: must run as root: it creates namespaces, cgroups and uid maps "
			"(the jailed command itself runs unprivileged)\n", cmd);
	return -1;
}

static int cmd_exec(int argc, char **argv)
{
	const char *policy_path = NULL;
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--policy") == 0) {
			if (i + 1 >= argc)
				return usage_error("exec", "%s needs a file", a);
			policy_path = argv[++i];
		} else if (strncmp(a, "--policy=", 9) == 0) {
			policy_path = a + 9;
		} else if (a[0] == '-') {
			return usage_error("exec", "unknown option %s", a);
		} else {
			break;
		}
	}
	if (i >= argc)
		return usage_error("exec", "%s", "no command given (deskgate exec [--policy FILE] -- CMD ...)");
	struct dg_policy policy;
	if (load_policy("exec", policy_path, &policy) != 0)
		return DG_EXIT_USAGE;
	if (require_root("exec") != 0)
		return DG_EXIT_FAILED;
	struct dg_err err = {{0}};
	if (dg_jail_cleanup_stale(&err) < 0)
		fprintf(stderr, "deskgate exec: cleaning up stale jails: %s\n", err.msg);
	int status = dg_exec_run(&policy.limits, (const char *const *)argv + i, 0, 1, 2);
	dg_policy_free(&policy);
	return status;
}

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
};

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(usage_text, stdout);
	return 0;
}

static int cmd_worker(int argc, char **argv)
{
	return dg_worker_main(argc, argv);
}

static const struct command commands[] = {
	{"exec", cmd_exec},
	{"serve", dg_cmd_serve},
	{"check", dg_cmd_check},
	{"shot", dg_cmd_shot},
	{"desktop", dg_cmd_desktop},
	{"verify", dg_cmd_verify},
	{"replay", dg_cmd_replay},
	{"test", dg_cmd_test},
	{"key", dg_cmd_key},
	{"audit", dg_cmd_audit},
	{"worker", cmd_worker},
	{"help", cmd_help},
	{"--help", cmd_help},
};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return DG_EXIT_USAGE;
	}
	/* Before any jail: which instance this process is (DESKGATE_INSTANCE
	 * or the host name; serve's configuration may name another). */
	struct dg_err ierr = {{0}};
	if (dg_instance_init(&ierr) != 0) {
		fprintf(stderr, "deskgate: %s: %s\n", DG_INSTANCE_ENV, ierr.msg);
		return DG_EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "deskgate: unknown command \"%s\"\n\n%s", argv[1], usage_text);
	return DG_EXIT_USAGE;
}
