/* `deskgate serve` on the command line: its options (the table `deskgate
 * serve --help` prints), then the gateway (gateway/server.c), given the
 * root-only steps of its start from the folders that run as root.
 */
#include <errno.h>
#include <stdbool.h>

#include "cli/cli.h"
#include "desktop/egress/egress.h"
#include "desktop/spawner/spawner.h"
#include "gateway/gateway.h"

struct serve_args {
	const char *config, *listen, *policy, *recordings, *state_dir;
	bool verbose, new_tokens;
	const char *resolve[DG_EGRESS_OVERRIDES_MAX];
	int n_resolve;
};

static const struct dg_opt serve_opts[] = {
	DG_OPT_VALUE_(struct serve_args, config, "--config", "FILE", 0,
		      "the configuration file (default: built-in defaults)"),
	DG_OPT_VALUE_(struct serve_args, listen, "--listen", "ADDR:PORT", 0,
		      "where to listen, overriding \"listen\" (default 127.0.0.1:8470)"),
	DG_OPT_VALUE_(struct serve_args, policy, "--policy", "FILE", 0,
		      "the default policy, overriding \"policy\" (default: the built-in policy)"),
	DG_OPT_VALUE_(struct serve_args, recordings, "--recordings", "DIR", 0,
		      "where recordings go, overriding \"recordings\" "
		      "(default /var/lib/deskgate/recordings)"),
	DG_OPT_VALUE_(struct serve_args, state_dir, "--state-dir", "DIR", 0,
		      "the gateway's state (generated tokens, the recording key, audits), "
		      "overriding \"state_dir\" (default /var/lib/deskgate)"),
	DG_OPT_SWITCH_(struct serve_args, new_tokens, "--new-tokens",
		       "forget the generated tokens (STATE_DIR/tokens.json) and print new ones"),
	DG_OPT_SWITCH_(struct serve_args, verbose, "--verbose",
		       "log libwebsockets warnings, the egress proxy's events and the desktops' "
		       "own output (Xvnc, Chromium) to stderr"),
	DG_OPT_LIST_(struct serve_args, resolve, n_resolve, "--test-resolve", "NAME:PORT=IP:PORT",
		     DG_OPT_TESTS_ONLY,
		     "the egress proxy maps NAME:PORT to IP:PORT without resolving it and without "
		     "the address checks (the egress rules still apply)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_serve_cmd = {
	.name = "serve",
	.summary = "The gateway: the HTTP and WebSocket API for agents and viewers, and the web "
		   "pages.",
	.details = "Starts as root (its spawner makes namespaces, cgroups and uid maps); the\n"
		   "network-facing gateway then drops every privilege. Flags override the\n"
		   "configuration file. On a start with no token in the configuration or the\n"
		   "environment (DESKGATE_AGENT_TOKEN, DESKGATE_VIEWER_TOKEN, DESKGATE_ADMIN_TOKEN,\n"
		   "DESKGATE_OPERATOR_TOKEN) and no STATE_DIR/tokens.json, it generates an agent,\n"
		   "a viewer and an admin token and prints them once.\n"
		   "exit status: 0 stopped by SIGINT/SIGTERM; 2 on a usage error or a bad\n"
		   "configuration or policy; 125 when it could not start or lost its spawner.\n",
	.doc = "docs/configuration.md",
	.opts = serve_opts,
};

int dg_cmd_serve(int argc, char **argv)
{
	struct serve_args a = {0};
	int rc = dg_opt_handle(&dg_serve_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	const struct dg_serve_opts o = {
		.config = a.config,
		.listen = a.listen,
		.policy = a.policy,
		.recordings = a.recordings,
		.state_dir = a.state_dir,
		.verbose = a.verbose,
		.new_tokens = a.new_tokens,
		.resolve = a.resolve,
		.n_resolve = a.n_resolve,
	};
	static const struct dg_serve_root root = {
		.instance_ids_claim = dg_instance_ids_claim,
		.cleanup_stale = dg_jail_cleanup_stale,
		.egress_configure = dg_egress_configure,
		.spawner_start = dg_spawner_start,
	};
	struct dg_err usage = {{0}};
	rc = dg_gateway_serve(&o, &root, &usage);
	if (rc < 0)
		return dg_opt_usage_error(&dg_serve_cmd, "%s", usage.msg);
	return rc;
}
