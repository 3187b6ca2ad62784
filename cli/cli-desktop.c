/* `deskgate shot` and `deskgate desktop`: a desktop driven from the command
 * line, through the same desktop, worker and action code the gateway uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actions/actions.h"
#include "cli/cli-priv.h"
#include "desktop/spawner/spawner.h"
#include "gateway/gateway.h"
#include "policy/policy.h"

struct session_opts {
	const char *cmd;
	enum dg_profile profile;
	int width, height;
	const char *policy_path;
	bool verbose;
};

struct session {
	struct dg_policy policy;
	struct dg_cli_session local; /* zeroed until started, closed by session_end */
};

static int fail(const char *cmd, const char *what)
{
	fprintf(stderr, "deskgate %s: %s\n", cmd, what);
	return DG_EXIT_FAILED;
}

static const char *const profiles[] = {"xterm", "browser", NULL};

/* The options both tools take; T has profile, size, policy and verbose. */
#define SESSION_OPTS(T)                                                                        \
	DG_OPT_CHOICE_(T, profile, "--profile", "xterm|browser", profiles, 0,                  \
		       "the desktop's profile (default xterm)"),                               \
	DG_OPT_VALUE_(T, size, "--size", "WxH", 0, "the screen size (default 1280x800)"),      \
	DG_OPT_VALUE_(T, policy, "--policy", "FILE",  0,                                       \
		      "the policy the desktop runs under: its limits, strictness and the "     \
		      "browser's requests (default: the built-in policy)"),                    \
	DG_OPT_SWITCH_(T, verbose, "--verbose", "show the desktop's own logs (Xvnc, Chromium) on stderr")

/* Fills o from the parsed shared options; a usage error when --size is bad. */
static int session_opts_set(const struct dg_opt_cmd *cmd, const char *profile, const char *size,
			    const char *policy, bool verbose, struct session_opts *o)
{
	struct dg_err err = {{0}};
	o->cmd = cmd->name;
	o->profile = DG_PROFILE_XTERM;
	o->width = DG_DESKTOP_WIDTH_DEFAULT;
	o->height = DG_DESKTOP_HEIGHT_DEFAULT;
	o->policy_path = policy;
	o->verbose = verbose;
	if (profile && dg_profile_parse(profile, &o->profile) != 0)
		return dg_opt_usage_error(cmd, "unknown profile \"%s\" (xterm or browser)", profile);
	if (size && dg_desktop_parse_size(size, &o->width, &o->height, &err))
		return dg_opt_usage_error(cmd, "%s", err.msg);
	return 0;
}

static int session_start(const struct session_opts *o, struct session *s)
{
	struct dg_err err = {{0}};
	memset(s, 0, sizeof(*s));
	if (o->policy_path) {
		if (dg_policy_load(o->policy_path, &s->policy, &err) != 0) {
			fprintf(stderr, "deskgate %s: %s\n", o->cmd, err.msg);
			return DG_EXIT_USAGE;
		}
	} else {
		dg_policy_default(&s->policy);
	}
	if (geteuid() != 0)
		return fail(o->cmd, "must run as root: it creates namespaces, cgroups and uid maps");
	if (dg_jail_cleanup_stale(&err) < 0)
		fprintf(stderr, "deskgate %s: cleaning up stale jails: %s\n", o->cmd, err.msg);
	struct dg_cli_session_spec spec = {.policy = &s->policy, .profile = o->profile,
					   .width = o->width, .height = o->height,
					   .log_to_stderr = o->verbose};
	if (dg_cli_session_open(&spec, &s->local, &err) != 0)
		return fail(o->cmd, err.msg);
	return 0;
}

static void session_end(struct session *s)
{
	dg_cli_session_close(&s->local);
	dg_policy_free(&s->policy);
}

/* Writes data to path through a temporary file and rename, so a reader never
 * sees half a file. */
static int write_file(const char *path, const void *data, size_t len)
{
	char tmp[PATH_MAX];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	const char *p = data;
	size_t left = len;
	while (left > 0) {
		ssize_t k = write(fd, p, left);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = errno;
			close(fd);
			unlink(tmp);
			return -e;
		}
		p += k;
		left -= (size_t)k;
	}
	if (close(fd) != 0 || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		return -e;
	}
	return 0;
}

/* Runs one canonical action; result and png are malloc'd. */
static int act(struct session *s, const char *json, char **result, uint8_t **png, size_t *png_len,
	       struct dg_err *err)
{
	return dg_worker_act(&s->local.worker, json, 0, 0, DG_CLI_ACTION_TIMEOUT_MS, result, png,
			     png_len, NULL, NULL, err);
}

/* true when the worker's result says ok. */
static bool result_ok(const char *result, char *why, size_t why_len)
{
	json_t *r = json_loads(result, 0, NULL);
	bool ok = json_is_true(json_object_get(r, "ok"));
	const char *e = json_string_value(json_object_get(r, "error"));
	snprintf(why, why_len, "%s", e ? e : "unknown error");
	json_decref(r);
	return ok;
}

struct shot_args {
	const char *profile, *size, *policy, *url, *out;
	bool verbose;
};

static const struct dg_opt shot_opts[] = {
	SESSION_OPTS(struct shot_args),
	DG_OPT_VALUE_(struct shot_args, url, "--url", "URL", 0,
		      "with --profile browser: the page to open first"),
	DG_OPT_VALUE_(struct shot_args, out, "-o", "FILE.png", DG_OPT_REQUIRED,
		      "where to write the screenshot"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_shot_cmd = {
	.name = "shot",
	.summary = "Start a desktop, take one settled screenshot, tear everything down.",
	.details = "exit status: 0 written; 2 on a usage error; 125 when the desktop or the\n"
		   "screenshot failed. Needs root.\n",
	.doc = "docs/jail.md",
	.opts = shot_opts,
};

int dg_cmd_shot(int argc, char **argv)
{
	struct shot_args a = {0};
	int rc0 = dg_opt_handle(&dg_shot_cmd, argc, argv, &a);
	if (rc0 >= 0)
		return rc0;
	struct session_opts o;
	rc0 = session_opts_set(&dg_shot_cmd, a.profile, a.size, a.policy, a.verbose, &o);
	if (rc0)
		return rc0;
	const char *out = a.out, *url = a.url;
	if (url && o.profile != DG_PROFILE_BROWSER)
		return dg_opt_usage_error(&dg_shot_cmd, "--url needs --profile browser");
	struct dg_err err = {{0}};
	if (url) {
		/* Checked as an action before any desktop starts. */
		json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", url);
		struct dg_action a;
		char *text = json_dumps(nav, JSON_COMPACT);
		int r = dg_action_parse(text, strlen(text), o.width, o.height, &a, &err);
		dg_action_free(&a);
		free(text);
		json_decref(nav);
		if (r) {
			fprintf(stderr, "deskgate shot: %s\n", err.msg);
			return DG_EXIT_USAGE;
		}
	}
	struct session s;
	int rc = session_start(&o, &s);
	if (rc) {
		session_end(&s);
		return rc;
	}
	char *result = NULL, why[DG_ERR_MAX];
	uint8_t *png = NULL;
	size_t png_len = 0;
	if (url) {
		json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", url);
		char *text = json_dumps(nav, JSON_COMPACT);
		json_decref(nav);
		rc = act(&s, text, &result, &png, &png_len, &err);
		free(text);
		if (rc == 0 && !result_ok(result, why, sizeof(why))) {
			fprintf(stderr, "deskgate shot: navigate: %s\n", why);
			rc = -EIO;
		}
		free(result);
		free(png);
		result = NULL;
		png = NULL;
	}
	if (rc == 0)
		rc = act(&s, "{\"type\":\"screenshot\"}", &result, &png, &png_len, &err);
	if (rc == 0 && !result_ok(result, why, sizeof(why))) {
		fprintf(stderr, "deskgate shot: %s\n", why);
		rc = -EIO;
	} else if (rc) {
		fprintf(stderr, "deskgate shot: %s\n", err.msg);
	}
	if (rc == 0 && png) {
		int w = write_file(out, png, png_len);
		if (w) {
			fprintf(stderr, "deskgate shot: writing %s: %s\n", out, strerror(-w));
			rc = w;
		}
	}
	free(result);
	free(png);
	session_end(&s);
	return rc ? DG_EXIT_FAILED : 0;
}

/* Appends one line of JSON to results (stolen). */
static int append_line(FILE *f, json_t *obj)
{
	char *s = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (!s)
		return -ENOMEM;
	int r = fprintf(f, "%s\n", s) < 0 || fflush(f) != 0 ? -EIO : 0;
	free(s);
	return r;
}

/* One script line: parsed and checked here, run by the worker. */
static int run_line(struct session *s, const struct session_opts *o, const char *line, size_t len,
		    long lineno, const char *dir, FILE *results)
{
	struct dg_err err = {{0}};
	struct dg_action a;
	json_t *out = json_pack("{s:i}", "line", (int)lineno);
	if (dg_action_parse(line, len, o->width, o->height, &a, &err) != 0) {
		json_object_set_new(out, "ok", json_false());
		json_object_set_new(out, "error", json_string(err.msg));
		return append_line(results, out);
	}
	json_t *canon = dg_action_to_json(&a);
	json_object_set(out, "action", canon);
	if (a.type == DG_ACTION_EXEC) {
		dg_action_free(&a);
		json_decref(canon);
		json_object_set_new(out, "ok", json_false());
		json_object_set_new(out, "error",
				    json_string("exec runs beside a desktop only in a gateway session; "
						"use deskgate exec for a command on its own"));
		return append_line(results, out);
	}
	dg_action_free(&a);
	char *text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(canon);
	char *result = NULL;
	uint8_t *png = NULL;
	size_t png_len = 0;
	int r = act(s, text, &result, &png, &png_len, &err);
	free(text);
	if (r) {
		json_decref(out);
		fprintf(stderr, "deskgate desktop: line %ld: %s\n", lineno, err.msg);
		return r;
	}
	json_t *res = json_loads(result, 0, NULL);
	free(result);
	json_object_set_new(out, "ok", json_boolean(json_is_true(json_object_get(res, "ok"))));
	json_object_set_new(out, "result", res ? res : json_null());
	if (png) {
		char name[32], path[PATH_MAX];
		snprintf(name, sizeof(name), "%06ld.png", lineno);
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		r = write_file(path, png, png_len);
		free(png);
		if (r) {
			json_decref(out);
			fprintf(stderr, "deskgate desktop: writing %s: %s\n", path, strerror(-r));
			return r;
		}
		json_object_set_new(out, "screenshot", json_string(name));
	}
	return append_line(results, out);
}

struct desktop_args {
	const char *profile, *size, *policy, *script, *out;
	bool verbose;
};

static const struct dg_opt desktop_opts[] = {
	SESSION_OPTS(struct desktop_args),
	DG_OPT_VALUE_(struct desktop_args, script, "--script", "FILE.jsonl", DG_OPT_REQUIRED,
		      "canonical actions, one JSON object a line (# comments and blank lines "
		      "skipped)"),
	DG_OPT_VALUE_(struct desktop_args, out, "--out", "DIR", DG_OPT_REQUIRED,
		      "where results.jsonl and one screenshot per action go (created)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_desktop_cmd = {
	.name = "desktop",
	.summary = "Run canonical actions on a fresh desktop; write DIR/results.jsonl and a "
		   "screenshot per action.",
	.details = "A line that does not parse gets an error line and the script goes on.\n"
		   "exit status: 0 the script ran; 2 on a usage error or an unreadable script;\n"
		   "125 when the desktop failed. Needs root.\n",
	.doc = "docs/jail.md",
	.opts = desktop_opts,
};

int dg_cmd_desktop(int argc, char **argv)
{
	struct desktop_args a = {0};
	int rc0 = dg_opt_handle(&dg_desktop_cmd, argc, argv, &a);
	if (rc0 >= 0)
		return rc0;
	struct session_opts o;
	rc0 = session_opts_set(&dg_desktop_cmd, a.profile, a.size, a.policy, a.verbose, &o);
	if (rc0)
		return rc0;
	const char *script = a.script, *dir = a.out;
	FILE *in = fopen(script, "re");
	if (!in) {
		fprintf(stderr, "deskgate desktop: %s: %s\n", script, strerror(errno));
		return DG_EXIT_USAGE;
	}
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "deskgate desktop: %s: %s\n", dir, strerror(errno));
		fclose(in);
		return DG_EXIT_USAGE;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/results.jsonl", dir);
	FILE *results = fopen(path, "we");
	if (!results) {
		fprintf(stderr, "deskgate desktop: %s: %s\n", path, strerror(errno));
		fclose(in);
		return DG_EXIT_USAGE;
	}
	struct session s;
	int rc = session_start(&o, &s);
	char *line = malloc(DG_SCRIPT_LINE_MAX + 2);
	long lineno = 0;
	while (rc == 0 && line && fgets(line, DG_SCRIPT_LINE_MAX + 2, in)) {
		lineno++;
		size_t len = strlen(line);
		if (len > DG_SCRIPT_LINE_MAX) {
			fprintf(stderr, "deskgate desktop: %s:%ld: line longer than %d bytes\n", script,
				lineno, DG_SCRIPT_LINE_MAX);
			rc = DG_EXIT_USAGE;
			break;
		}
		if (lineno > DG_SCRIPT_LINES_MAX) {
			fprintf(stderr, "deskgate desktop: %s: more than %d lines\n", script,
				DG_SCRIPT_LINES_MAX);
			rc = DG_EXIT_USAGE;
			break;
		}
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0 || line[0] == '#')
			continue;
		if (run_line(&s, &o, line, len, lineno, dir, results) != 0) {
			rc = DG_EXIT_FAILED;
			break;
		}
	}
	free(line);
	session_end(&s);
	fclose(in);
	fclose(results);
	return rc;
}
