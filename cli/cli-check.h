/* `deskgate check`: decides canonical actions offline against a policy.
 * (Declared here until the lead moves it into gateway/gateway.h.) */
#ifndef DG_CLI_CHECK_H
#define DG_CLI_CHECK_H

#include <stdio.h>

#include "gateway/opt.h"
#include "policy/policy.h"

/* Its options and help (gateway/opt.h). */
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

#endif
