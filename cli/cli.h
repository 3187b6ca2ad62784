/* cli: every subcommand of the one binary, deskgate (deskgate.c: main,
 * exec, worker, help), each parsing its flags with the one table-driven
 * parser (cli/opt.h, declared through this header): an unknown flag or a
 * missing argument is a usage error (exit DG_EXIT_USAGE), never a guess;
 * the same tables give `deskgate help` and `deskgate CMD --help`. Each
 * dg_cmd_* gets argv[0] = the command's name and returns the exit status.
 *
 * Commands that start jails in-process as root (exec, shot, desktop, audit,
 * test --live) use desktop/spawner/spawner.h (shot, desktop, audit and test
 * --live through one local session, cli-session.c); `deskgate worker` runs
 * desktop/worker/worker.h; `deskgate serve` runs the gateway
 * (gateway/gateway.h). The probe battery `deskgate audit` runs in a jail is
 * its own static program, deskgate-probe (probe.c and probe-*.c).
 */
#ifndef DG_CLI_H
#define DG_CLI_H

#include <stdio.h>

#include "cli/opt.h"
#include "gateway/gateway.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

/* Script files of `deskgate desktop`: bounds on what is read. */
#define DG_SCRIPT_LINE_MAX (64 * 1024)
#define DG_SCRIPT_LINES_MAX 100000
/* How long one action may take end to end before the tool gives up. */
#define DG_CLI_ACTION_TIMEOUT_MS 90000

/* ---- shot, desktop (cli-desktop.c), serve (cli-serve.c) ----------------- */

int dg_cmd_shot(int argc, char **argv);
int dg_cmd_desktop(int argc, char **argv);
int dg_cmd_serve(int argc, char **argv);

/* Their options and help (cli/opt.h). */
extern const struct dg_opt_cmd dg_shot_cmd, dg_desktop_cmd, dg_serve_cmd;

/* ---- check (cli-check.c) --------------------------------------------------
 *
 * `deskgate check`: decides canonical actions offline against a policy. */

/* Its options and help (cli/opt.h). */
extern const struct dg_opt_cmd dg_check_cmd;

/* deskgate check --policy FILE [--url CURRENT_URL] [--size WxH]
 * argv[0] is "check". Returns the exit status: 0 once stdin is read (bad
 * lines included), 1 when the policy does not load, DG_EXIT_USAGE (2) for
 * bad arguments. */
int dg_cmd_check(int argc, char **argv);

/* The loop of dg_cmd_check, for tests: reads canonical actions as JSON
 * lines from in (at most DG_ACTION_JSON_MAX bytes a line; blank lines are
 * skipped) and writes one line per action to out:
 *   {"verdict":"deny","rule":"keys.deny[1] super+*","reason":"..."}
 * or {"error":"..."} for a line that is not a valid action (the rest
 * continue). The session is simulated so rules that depend on it can be
 * checked: the pointer starts at the screen's centre and follows the
 * actions that move it; an allowed navigate makes its URL the current one;
 * every allowed action counts towards the budgets, all within one minute
 * (no time passes in a check). url may be NULL. Returns 0 or -EIO when
 * reading or writing fails. */
int dg_check_stream(const struct dg_policy *p, const char *url, int screen_w, int screen_h,
		    FILE *in, FILE *out);

/* ---- audit (cli-audit.c) --------------------------------------------------
 *
 * `deskgate audit`: the containment probe battery, run from inside a live
 * session under a policy.
 *
 * deskgate audit [--policy FILE] [--profile xterm|browser] [--json]
 *                [--state-dir DIR] [--recordings DIR] [--probe PATH]
 *
 * Starts what `deskgate serve` would start for one session of the policy
 * (the built-in default without --policy): an egress proxy, a desktop of the
 * profile (default browser) with the policy's limits, strict when the policy
 * has rules, its egress listener handed to the proxy, and its worker; plus a
 * second, xterm desktop, "the other session", to probe isolation against.
 * Then runs `deskgate-probe` (found beside the deskgate binary unless --probe
 * names it) inside the first desktop's jail, the way an exec action runs,
 * one probe at a time, each with a deadline, and prints one finding per
 * probe:
 *
 *   EDGE         OUTCOME    what was tried — evidence
 *
 * edge: egress, filesystem, credentials, isolation, resources; outcome:
 * contained, allowed (ran as the policy allows), leaked, not-checked (this
 * machine cannot exercise it; the reason is the evidence), error (the probe
 * could not run) or contained-by-kernel (this host's kernel refuses the call
 * itself, with or without deskgate: int 0x80 on a kernel without IA32
 * emulation, kexec on one built without it...; the probe's host control,
 * run first on the host as root with no filter, shows that refusal, and the
 * call in the jail ended the same way; the control's line is the finding's
 * control). Then "N probes: N contained, [N contained by the kernel, ]N ran
 * as allowed, N leaked" and, when the kernel refused any, a line naming
 * them. --json prints one object instead (docs/audit.md lists its fields:
 * its summary counts contained_by_kernel, and kernel_refused lists those
 * findings' ids).
 *
 * The host controls run the probe (the same sealed memfd) on the host as
 * root, outside any jail: --probe names a program the audit trusts.
 *
 * With a state directory (--state-dir, else /var/lib/deskgate when it
 * exists) the JSON result is also written to
 * STATE_DIR/audit/<policy sha256>.json: the SHA-256, in lowercase hex, of
 * the policy file's bytes (of DG_GW_BUILTIN_POLICY_TEXT for the built-in
 * default), as in a recording's policy_sha256. The directory is created
 * 0750 and the file 0640, both owned by STATE_DIR's owner (the gateway's
 * uid); the file is replaced atomically (write, fsync, rename).
 *
 * Exit status: 0 nothing leaked and every probe ran (contained by the kernel
 * counts as not leaked); 1 something leaked;
 * 2 usage (unknown flag, bad profile, a policy that does not load);
 * 125 the audit could not run or not every probe could (the message or the
 * error findings say why). Needs root (it starts jails). argv[0] is "audit".
 */

/* Its options and help (cli/opt.h). */
extern const struct dg_opt_cmd dg_audit_cmd;

int dg_cmd_audit(int argc, char **argv);

/* ---- mcp (cli-mcp.c) -----------------------------------------------------
 *
 * `deskgate mcp --url URL [--profile P] [--size WxH] [--display WxH]
 * [--policy NAME] [--verbose]`: the stdio bridge to the gateway's /mcp
 * (docs/mcp.md). Relays newline-delimited JSON-RPC from stdin to the
 * gateway (MCP streamable HTTP, requests overlapping) and every message of
 * its answers, SSE events as they arrive, to stdout, one a line; the token
 * comes from DESKGATE_TOKEN or DESKGATE_AGENT_TOKEN. When stdin ends it
 * waits (bounded) for the requests in flight and ends the MCP session
 * (DELETE). 0 after stdin ended, 1 when it could not run, 2 usage or no
 * token. argv[0] is "mcp". */

/* Its options and help (cli/opt.h). */
extern const struct dg_opt_cmd dg_mcp_cmd;

int dg_cmd_mcp(int argc, char **argv);

/* `deskgate vnc --session ID --listen IP:PORT [--url URL]` (cli-vnc.c,
 * docs/vnc.md): a local TCP listener for standard VNC viewers, each relayed
 * to the session's live view (GET /v1/sessions/ID/vnc) with the viewer
 * token from the environment. Runs until SIGINT or SIGTERM. */
extern const struct dg_opt_cmd dg_vnc_cmd;
int dg_cmd_vnc(int argc, char **argv);

/* ---- the recording tools: verify, export, replay, test, key (cli-record.c) -------
 *
 * Issue #6. Each parses its own flags strictly and returns the exit status. */

/* Their options and help (cli/opt.h). */
extern const struct dg_opt_cmd dg_verify_cmd, dg_export_cmd, dg_replay_cmd, dg_test_cmd,
	dg_key_cmd;

/* deskgate verify [--key PUBKEY.pem | --state-dir DIR] [--json] RECORDING_DIR
 * 0: sealed (normally, or after a crash by the next gateway) and every
 * check holds; 1: anything else (the first bad seq and what is wrong, or
 * "not sealed", or no key to check the seal with); 2: usage, or the key
 * does not load. */
int dg_cmd_verify(int argc, char **argv);

/* deskgate export --format webm|mp4 -o FILE [--key PUBKEY.pem | --state-dir DIR]
 * RECORDING_DIR: the recording as a video (dg_rec_export). Prints verify's
 * line, then what was written. 0: written (verified or not: the line and
 * the video say which); 1: not written; 2: usage, or the key does not load. */
int dg_cmd_export(int argc, char **argv);

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

/* The key a recording is checked with: the public key at key_path, or the
 * gateway's in state_dir (whichever is not NULL), or none (*key NULL, 0). */
int dg_cli_load_key(const char *key_path, const char *state_dir, struct dg_rec_key **key,
		    struct dg_err *err);

/* ---- recordings in object storage (cli-recordings.c) --------------------- */

extern const struct dg_opt_cmd dg_recordings_cmd;

/* deskgate recordings --store FILE --root DIR [--key PUBKEY.pem | --state-dir DIR]
 *                     upload|fetch ID
 * upload: dg_rec_upload of ROOT/ID (a key required); fetch: dg_rec_fetch
 * into ROOT/ID. 0 done, 1 failed, 2 usage, or the store file or key does
 * not load. */
int dg_cmd_recordings(int argc, char **argv);

#endif
