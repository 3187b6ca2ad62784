/* Internals shared by the files of cli/: the local session (cli-session.c),
 * the browser-path probes of `deskgate audit` (cli-audit-browser.c) and the
 * live runner of `deskgate test --live` (cli-live.c). */
#ifndef DG_CLI_PRIV_H
#define DG_CLI_PRIV_H

#include <stdbool.h>

#include "cli/cli.h"
#include "desktop/egress/egress.h"
#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "recordings/recordings.h"

/* ---- a local session (cli-session.c) ------------------------------------ */

/* What `shot`, `desktop`, `test --live` and `audit` run in-process, with no
 * gateway and no spawner: a desktop of a profile and size in its jail, under
 * a policy's limits and strictness, driven by its worker (whose browser
 * requests the policy's urls decide); with egress, an egress proxy under
 * the same policy, with the desktop's egress listener handed to it (without,
 * the jail has no listener: every connection is refused at once). */
struct dg_cli_session_spec {
	const struct dg_policy *policy; /* borrowed: must outlive the session */
	enum dg_profile profile;
	int width, height;              /* 0: DG_DESKTOP_WIDTH/HEIGHT_DEFAULT */
	bool egress;                    /* start the proxy */
	/* The proxy's options (its test-only resolve overrides, as
	 * `deskgate serve --test-resolve`), or NULL: the defaults. */
	const struct dg_egress_opts *egress_opts;
	const char *id;                 /* the session id the proxy knows (egress: required) */
	bool log_to_stderr;             /* the desktop's own logs (Xvnc, Chromium) on stderr */
};

/* A running local session; its parts belong to it until it is closed. */
struct dg_cli_session {
	struct dg_egress egress;
	struct dg_desktop desktop;
	struct dg_worker worker;
	bool egress_up, desktop_up, worker_up;
};

/* Brings s up to ready: the proxy (with egress), the desktop, the listener
 * handed over, the worker started and ready (its ready message in
 * s->worker.ready, s->worker.policy set to spec->policy). Returns 0, or a
 * negative errno with err saying which part failed ("starting the browser
 * desktop: ..."); then whatever had started is torn down already. Root only
 * (the caller checks, with its own message, and cleans up stale jails
 * first). */
int dg_cli_session_open(const struct dg_cli_session_spec *spec, struct dg_cli_session *s,
			struct dg_err *err);
/* Tears down what is up (worker, desktop, proxy, in that order); safe to
 * call twice, and on a session whose open failed. */
void dg_cli_session_close(struct dg_cli_session *s);

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
#define DG_AUDIT_BAIT_TRIES_MS 45000    /* no new try (page or omnibox) starts past this,
					 * from the browser's start: bounds one bait run */
#define DG_AUDIT_BAIT_RUNS 2            /* fresh browsers, until one showed the page, its
					 * worker and an omnibox tab */

/* What the bait site received. */
struct dg_audit_bait_seen {
	bool ok_page, ok_worker;          /* the allowed WebSockets: the page ran */
	bool secret_page, secret_worker;  /* the denied ones */
	bool secret_omnibox;              /* the denied URL typed, opened by alt+Enter */
	bool ok_omnibox;                  /* an allowed one the same way: the keys worked */
	int runs;                         /* fresh browsers it took (DG_AUDIT_BAIT_RUNS at most) */
	char log[DG_AUDIT_BAIT_LOG_MAX];  /* its request lines, ';'-separated */
};

/* Starts the bait site and a fresh browser desktop (egress proxy, jail,
 * worker; lim's memory, pids, cpus and scratch) under a policy that allows
 * the site and, with deny, denies its /secret/ paths; opens the bait page
 * (WebSockets from the page and a worker), then types a /secret/ URL into
 * the omnibox and presses alt+Enter, then the same with an allowed URL;
 * tears everything down. Each try starts only within DG_AUDIT_BAIT_TRIES_MS
 * of the browser's start; a run that did not show all three allowed
 * requests is done again in a fresh browser (DG_AUDIT_BAIT_RUNS in all).
 * With progress, says each step on stderr as it ends (with the time it
 * took). Returns 0 with
 * seen filled, or a negative errno (err says what could not run). Root
 * only (it starts a jail). */
int dg_audit_browser_paths(const struct dg_limits *lim, bool deny, bool progress,
			   struct dg_audit_bait_seen *seen, struct dg_err *err);

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
