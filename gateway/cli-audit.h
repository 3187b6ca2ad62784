/* `deskgate audit`: the containment probe battery, run from inside a live
 * session under a policy. (Declared here until the lead moves it into
 * gateway/gateway.h.)
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
#ifndef DG_CLI_AUDIT_H
#define DG_CLI_AUDIT_H

#include "gateway/opt.h"

/* Its options and help (gateway/opt.h). */
extern const struct dg_opt_cmd dg_audit_cmd;

int dg_cmd_audit(int argc, char **argv);

/* ---- the browser's paths around the urls rules (cli-audit-browser.c) ---- */

#include <stdbool.h>

#include "policy/policy.h"

/* The bait site's name, resolved to its 127.0.0.1 port for the probe's own
 * egress proxy only (a test-only override, as --test-resolve). */
#define DG_AUDIT_BAIT_HOST "bait.deskgate-audit.test"
#define DG_AUDIT_BAIT_LOG_MAX 8192   /* bytes of request lines kept */
#define DG_AUDIT_BAIT_CONNS 32       /* connections the bait serves at once */
#define DG_AUDIT_BAIT_HEAD_MAX 4096  /* bytes of a request head it reads */
#define DG_AUDIT_BAIT_HEAD_MS 5000   /* for a connection to send its head */
#define DG_AUDIT_BAIT_WAIT_MS 15000  /* for a request the page or the omnibox makes (it
				      * returns as soon as it arrived: long only for a
				      * slow machine or one that never arrives) */
#define DG_AUDIT_BAIT_POLL_MS "250"  /* one wait step while the bait is watched */
#define DG_AUDIT_BAIT_AFTER_MS 1000  /* for a denied request once its allowed twin,
				      * made at the same moment, has arrived */
#define DG_AUDIT_PAGE_TRIES 3           /* loads of the bait page, until both allowed
					 * WebSockets arrived */
#define DG_AUDIT_OMNIBOX_PAUSE_MS "1000" /* between the omnibox's keys (a wait action) */
#define DG_AUDIT_OMNIBOX_TRIES 3        /* the denied-then-allowed sequence, until the
					 * allowed URL shows the keys opened a tab */

/* What the bait site received. */
struct dg_audit_bait_seen {
	bool ok_page, ok_worker;          /* the allowed WebSockets: the page ran */
	bool secret_page, secret_worker;  /* the denied ones */
	bool secret_omnibox;              /* the denied URL typed, opened by alt+Enter */
	bool ok_omnibox;                  /* an allowed one the same way: the keys worked */
	char log[DG_AUDIT_BAIT_LOG_MAX];  /* its request lines, ';'-separated */
};

/* Starts the bait site and a fresh browser desktop (egress proxy, jail,
 * worker; lim's memory, pids, cpus and scratch) under a policy that allows
 * the site and, with deny, denies its /secret/ paths; opens the bait page
 * (WebSockets from the page and a worker), then types a /secret/ URL into
 * the omnibox and presses alt+Enter, then the same with an allowed URL;
 * tears everything down. Returns 0 with
 * seen filled, or a negative errno (err says what could not run). Root
 * only (it starts a jail). */
int dg_audit_browser_paths(const struct dg_limits *lim, bool deny, struct dg_audit_bait_seen *seen,
			   struct dg_err *err);

#endif
