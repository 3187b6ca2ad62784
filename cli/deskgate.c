/* deskgate: the one binary. Each subcommand parses its flags with the one
 * table-driven parser (cli/opt.h), strictly: an unknown flag or a
 * missing argument is a usage error (exit 2), never a guess; the same
 * tables give `deskgate help` and `deskgate CMD --help`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "desktop/worker/worker.h"
#include "gateway/gateway.h"
#include "policy/policy.h"


#ifndef DG_VERSION
#define DG_VERSION "unknown"
#endif
#ifndef DG_GIT_COMMIT
#define DG_GIT_COMMIT ""
#endif

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

struct exec_args {
	const char *policy;
	char **cmd;
	int n_cmd;
};

static const struct dg_opt exec_opts[] = {
	DG_OPT_VALUE_(struct exec_args, policy, "--policy", "FILE", 0,
		      "the policy whose limits apply (default: the built-in policy)"),
	DG_OPT_END,
};

static const struct dg_opt_cmd exec_cmd = {
	.name = "exec",
	.summary = "Run CMD in a fresh jail under the policy's limits; stdin is passed through, "
		   "stdout and stderr are relayed (each cut at limits.output_bytes).",
	.details = "CMD without a slash is looked up in the jail's PATH, never through a shell.\n"
		   "exit status: CMD's own (128+N when signal N killed it); 124 when the wall\n"
		   "clock (limits.exec_seconds) ended it; 137 when a limit killed it; 125 when\n"
		   "deskgate itself failed; 126/127 when CMD cannot be run / was not found;\n"
		   "2 on a usage error. Needs root.\n",
	.doc = "docs/jail.md",
	.pos = DG_POS_REST,
	.pos_name = "CMD [ARGS...]",
	.pos_what = "command",
	.pos_offset = offsetof(struct exec_args, cmd),
	.pos_count_offset = offsetof(struct exec_args, n_cmd),
	.opts = exec_opts,
};

static int cmd_exec(int argc, char **argv)
{
	struct exec_args a = {0};
	int rc = dg_opt_handle(&exec_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct dg_policy policy;
	if (load_policy("exec", a.policy, &policy) != 0)
		return DG_EXIT_USAGE;
	if (require_root("exec") != 0)
		return DG_EXIT_FAILED;
	struct dg_err err = {{0}};
	if (dg_jail_cleanup_stale(&err) < 0)
		fprintf(stderr, "deskgate exec: cleaning up stale jails: %s\n", err.msg);
	int status = dg_exec_run(&policy.limits, (const char *const *)a.cmd, 0, 1, 2);
	dg_policy_free(&policy);
	return status;
}

/* Every command; spec NULL: internal (not listed, no --help of ours). */
struct command {
	const char *name;
	const struct dg_opt_cmd *spec;
	int (*run)(int argc, char **argv);
};

static int cmd_worker(int argc, char **argv)
{
	return dg_worker_main(argc, argv);
}

static const struct command commands[] = {
	{"exec", &exec_cmd, cmd_exec},
	{"serve", &dg_serve_cmd, dg_cmd_serve},
	{"check", &dg_check_cmd, dg_cmd_check},
	{"shot", &dg_shot_cmd, dg_cmd_shot},
	{"desktop", &dg_desktop_cmd, dg_cmd_desktop},
	{"verify", &dg_verify_cmd, dg_cmd_verify},
	{"export", &dg_export_cmd, dg_cmd_export},
	{"replay", &dg_replay_cmd, dg_cmd_replay},
	{"test", &dg_test_cmd, dg_cmd_test},
	{"audit", &dg_audit_cmd, dg_cmd_audit},
	{"key", &dg_key_cmd, dg_cmd_key},
	{"recordings", &dg_recordings_cmd, dg_cmd_recordings},
	{"mcp", &dg_mcp_cmd, dg_cmd_mcp},
	{"vnc", &dg_vnc_cmd, dg_cmd_vnc},
	{"worker", NULL, cmd_worker}, /* started by the gateway, not by people */
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static void print_overview(FILE *out)
{
	fputs("usage: deskgate COMMAND [OPTIONS] [ARGS]\n"
	      "       deskgate help [COMMAND]\n"
	      "       deskgate --version\n"
	      "\n"
	      "deskgate runs each agent session's desktop in a disposable jail, decides every\n"
	      "action under a policy, and records everything.\n"
	      "\n"
	      "commands:\n", out);
	for (size_t i = 0; i < N_COMMANDS; i++) {
		const struct dg_opt_cmd *c = commands[i].spec;
		if (!c)
			continue;
		dg_opt_print_synopsis(c, 2, out);
		dg_opt_print_summary(c, 6, out);
	}
	fputs("  deskgate help [COMMAND]\n"
	      "      this text, or COMMAND's help (the same as deskgate COMMAND --help)\n"
	      "  deskgate --version\n"
	      "      the version and the git commit it was built from\n"
	      "\n"
	      "Every command takes -h/--help. Documentation: README.md and docs/.\n", out);
}

static void print_version(void)
{
	if (DG_GIT_COMMIT[0])
		printf("deskgate %s (git %s)\n", DG_VERSION, DG_GIT_COMMIT);
	else
		printf("deskgate %s\n", DG_VERSION);
}

/* deskgate help [COMMAND] */
static int cmd_help(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "deskgate help: one command at most\n");
		return DG_EXIT_USAGE;
	}
	if (argc == 2) {
		const struct command *c = find_command(argv[1]);
		if (!c || !c->spec) {
			fprintf(stderr, "deskgate help: unknown command \"%s\" (deskgate help lists "
					"them)\n", argv[1]);
			return DG_EXIT_USAGE;
		}
		dg_opt_print_help(c->spec, stdout);
	} else {
		print_overview(stdout);
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		print_overview(stderr);
		return DG_EXIT_USAGE;
	}
	/* Before any jail: which instance this process is (DESKGATE_INSTANCE
	 * or the host name; serve's configuration may name another). */
	struct dg_err ierr = {{0}};
	if (dg_instance_init(&ierr) != 0) {
		fprintf(stderr, "deskgate: %s: %s\n", DG_INSTANCE_ENV, ierr.msg);
		return DG_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
		return cmd_help(argc - 1, argv + 1);
	if (strcmp(name, "--version") == 0) {
		if (argc > 2) {
			fprintf(stderr, "deskgate --version: takes no arguments\n");
			return DG_EXIT_USAGE;
		}
		print_version();
		return fflush(stdout) == 0 ? 0 : 1;
	}
	const struct command *c = find_command(name);
	if (c)
		return c->run(argc - 1, argv + 1);
	fprintf(stderr, "deskgate: unknown command \"%s\" (deskgate help lists them)\n", name);
	return DG_EXIT_USAGE;
}
