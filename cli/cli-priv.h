/* Internals shared by the files of cli/: the browser-path probes of
 * `deskgate audit` (cli-audit-browser.c) and the live runner of `deskgate
 * test --live` (cli-live.c). */
#ifndef DG_CLI_PRIV_H
#define DG_CLI_PRIV_H

#include <stdbool.h>

#include "cli/cli.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

/* ---- the browser's paths around the urls rules (cli-audit-browser.c) ---- */

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

/* ---- the live runner (cli-live.c) ---------------------------------------- */

/* The runner of `deskgate test --live` (cli/cli-live.c): a fresh
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
