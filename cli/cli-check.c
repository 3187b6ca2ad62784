/* `deskgate check`: the policy evaluator on the command line, so operators
 * can test a policy file in CI against scripted actions with expected
 * verdicts, with exactly the code the gateway decides with. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "cli/cli.h"
#include "desktop/proto/proto.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

/* Writes obj as one compact line (keys in insertion order) and drops it. */
static int put_line(FILE *out, json_t *obj)
{
	int rc = -EIO;
	if (obj && json_dumpf(obj, out, JSON_COMPACT | JSON_PRESERVE_ORDER) == 0 &&
	    fputc('\n', out) != EOF)
		rc = 0;
	json_decref(obj);
	return rc;
}

/* A string for the output: our messages are ASCII (untrusted bytes are
 * escaped where they are quoted), but a non-UTF-8 string must not drop the
 * line. */
static json_t *str(const char *s)
{
	json_t *j = json_string(s);
	return j ? j : json_string("(unprintable)");
}

/* Where the pointer is after a (the pointer a later keyboard action or
 * mouse_down/up without x, y acts at). */
static void follow_pointer(const struct dg_action *a, int *px, int *py)
{
	switch (a->type) {
	case DG_ACTION_CLICK:
	case DG_ACTION_MOVE:
	case DG_ACTION_SCROLL:
		*px = a->x;
		*py = a->y;
		break;
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP:
		if (a->has_xy) {
			*px = a->x;
			*py = a->y;
		}
		break;
	case DG_ACTION_DRAG:
		*px = a->path[a->n_path - 1][0];
		*py = a->path[a->n_path - 1][1];
		break;
	default:
		break;
	}
}

int dg_check_stream(const struct dg_policy *p, const char *url, int screen_w, int screen_h,
		    FILE *in, FILE *out)
{
	char cur_url[DG_ACTION_URL_MAX + 1];
	struct dg_decide_ctx ctx = { .screen_w = screen_w, .screen_h = screen_h,
				     .pointer_x = screen_w / 2, .pointer_y = screen_h / 2 };
	if (url) {
		snprintf(cur_url, sizeof(cur_url), "%s", url);
		ctx.url = cur_url;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (rc == 0 && (n = getline(&line, &cap, in)) >= 0) {
		size_t len = (size_t)n;
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			len--;
		size_t sp = strspn(line, " \t");
		if (sp >= len)
			continue;
		struct dg_action a;
		struct dg_err err = { { 0 } };
		if (dg_action_parse(line, len, screen_w, screen_h, &a, &err) != 0) {
			rc = put_line(out, json_pack("{s:o}", "error", str(err.msg)));
			continue;
		}
		if (dg_action_unresolved(&a)) {
			/* The gateway finds the element's point in the browser
			 * before deciding; there is no browser here. */
			snprintf(err.msg, sizeof(err.msg),
				 "action: ref_%d has no x, y: an element's point on the screen is "
				 "found on a live desktop only; give its x, y to decide it here",
				 a.ref);
			dg_action_free(&a);
			rc = put_line(out, json_pack("{s:o}", "error", str(err.msg)));
			continue;
		}
		struct dg_decision d;
		dg_policy_decide(p, &a, &ctx, &d);
		rc = put_line(out, json_pack("{s:s, s:o, s:o}", "verdict", dg_verdict_name(d.verdict),
					     "rule", str(d.rule), "reason", str(d.reason)));
		if (d.verdict == DG_VERDICT_ALLOW) {
			ctx.actions_last_minute++;
			ctx.actions_total++;
			if (a.type == DG_ACTION_EXEC)
				ctx.exec_total++;
			if (a.type == DG_ACTION_NAVIGATE) {
				snprintf(cur_url, sizeof(cur_url), "%s", a.url);
				ctx.url = cur_url;
			}
			follow_pointer(&a, &ctx.pointer_x, &ctx.pointer_y);
		}
		dg_action_free(&a);
	}
	free(line);
	if (ferror(in) || fflush(out) != 0)
		rc = -EIO;
	return rc;
}

struct check_args {
	const char *policy, *url, *size;
};

static const struct dg_opt check_opts[] = {
	DG_OPT_VALUE_(struct check_args, policy, "--policy", "FILE", DG_OPT_REQUIRED,
		      "the policy to decide under"),
	DG_OPT_VALUE_(struct check_args, url, "--url", "CURRENT_URL", 0,
		      "the page the session starts on (default: unknown)"),
	DG_OPT_VALUE_(struct check_args, size, "--size", "WxH", 0,
		      "the screen size regions are checked against (default 1280x800)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_check_cmd = {
	.name = "check",
	.summary = "Decide canonical actions (one JSON object a line on stdin) under the policy; "
		   "print one {\"verdict\", \"rule\", \"reason\"} line each.",
	.details = "A line that is not a valid action gets {\"error\": ...} and the rest go on;\n"
		   "so does an action on an element (ref) without x, y: there is no browser\n"
		   "here to find the element's point, so give it.\n"
		   "exit status: 0 once stdin is read; 1 when the policy does not load;\n"
		   "2 on a usage error.\n",
	.doc = "docs/policy.md",
	.stdin_note = "< actions.jsonl",
	.opts = check_opts,
};

int dg_cmd_check(int argc, char **argv)
{
	struct check_args a = { 0 };
	int rc0 = dg_opt_handle(&dg_check_cmd, argc, argv, &a);
	if (rc0 >= 0)
		return rc0;
	const char *policy_path = a.policy, *url = a.url, *size = a.size;
	int w = DG_DESKTOP_WIDTH_DEFAULT, h = DG_DESKTOP_HEIGHT_DEFAULT;
	struct dg_err err = { { 0 } };
	if (size && dg_desktop_parse_size(size, &w, &h, &err) != 0)
		return dg_opt_usage_error(&dg_check_cmd, "--size: %s", err.msg);
	if (url && strlen(url) > DG_ACTION_URL_MAX)
		return dg_opt_usage_error(&dg_check_cmd, "--url is longer than %d bytes",
					  DG_ACTION_URL_MAX);
	struct dg_policy p;
	if (dg_policy_load(policy_path, &p, &err) != 0) {
		fprintf(stderr, "deskgate check: %s\n", err.msg);
		return 1;
	}
	int rc = dg_check_stream(&p, url, w, h, stdin, stdout);
	dg_policy_free(&p);
	if (rc) {
		fprintf(stderr, "deskgate check: reading stdin or writing stdout failed\n");
		return 1;
	}
	return 0;
}
