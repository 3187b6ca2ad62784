/* The recording tools on the command line (issue #6): verify, replay, test
 * and key. Each parses its own flags strictly and returns the exit status.
 * (Declared here until the lead moves them into gateway/gateway.h.) */
#ifndef DG_CLI_RECORD_H
#define DG_CLI_RECORD_H

#include "gateway/opt.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

/* Their options and help (gateway/opt.h). */
extern const struct dg_opt_cmd dg_verify_cmd, dg_replay_cmd, dg_test_cmd, dg_key_cmd;

/* deskgate verify [--key PUBKEY.pem | --state-dir DIR] [--json] RECORDING_DIR
 * 0: sealed (normally, or after a crash by the next gateway) and every
 * check holds; 1: anything else (the first bad seq and what is wrong, or
 * "not sealed", or no key to check the seal with); 2: usage, or the key
 * does not load. */
int dg_cmd_verify(int argc, char **argv);

/* deskgate replay --policy FILE [--json] RECORDING_DIR
 * 0: no verdict changes; 1: some did; 2: usage, the policy does not load,
 * or the recording cannot be read (a broken chain names its seq). */
int dg_cmd_replay(int argc, char **argv);

/* deskgate test --policy FILE [--live [--profile P] [--test-resolve R]] SCRIPT.jsonl
 * 0: every step passed; 1: a step failed; 2: usage, the policy or script
 * does not load, or --live without a live runner. */
int dg_cmd_test(int argc, char **argv);

/* deskgate key --state-dir DIR [--create]
 * Prints the recording key's public half (PEM) on stdout and its id on
 * stderr. --create makes the key when there is none (as the gateway does at
 * its first start; run it as the user the gateway runs as). 0, 1 (no key,
 * or it does not load), 2 usage. */
int dg_cmd_key(int argc, char **argv);

/* The runner of `deskgate test --live` (gateway/cli-live.c): a fresh
 * desktop of profile (default browser) in its jail, its worker, and an
 * egress proxy serving it, all under policy p: each step is decided as the
 * gateway decides (and not performed unless allowed: an ask cannot be
 * approved here), the browser's requests are decided by p's urls, and the
 * page's URL and title after the step are reported. resolve: one test-only
 * NAME:PORT=IP:PORT for the proxy (see `deskgate serve --test-resolve`), or
 * NULL. Needs root. live_close ends everything. */
int dg_cli_live_open(const struct dg_policy *p, const char *profile, const char *resolve,
		     struct dg_rec_live *live, struct dg_err *err);
void dg_cli_live_close(struct dg_rec_live *live);

#endif
