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
#include "desktop/desktop.h"
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
	struct dg_desktop desktop;
	struct dg_worker worker;
	bool started;
};

static int fail(const char *cmd, const char *what)
{
	fprintf(stderr, "deskgate %s: %s\n", cmd, what);
	return DG_EXIT_FAILED;
}

/* Parses the options shared by both tools; returns 1 when argv[*i] was one
 * of them, 0 when not, or -1 after printing a usage error. */
static int common_opt(struct session_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i];
	bool has_value = *i + 1 < argc;
	if (strcmp(a, "--profile") == 0 || strcmp(a, "--size") == 0 || strcmp(a, "--policy") == 0) {
		if (!has_value) {
			fprintf(stderr, "deskgate %s: %s needs a value\n", o->cmd, a);
			return -1;
		}
		const char *v = argv[++*i];
		struct dg_err err = {{0}};
		if (strcmp(a, "--profile") == 0 && dg_profile_parse(v, &o->profile) != 0) {
			fprintf(stderr, "deskgate %s: unknown profile \"%s\" (xterm or browser)\n", o->cmd, v);
			return -1;
		}
		if (strcmp(a, "--size") == 0 && dg_desktop_parse_size(v, &o->width, &o->height, &err)) {
			fprintf(stderr, "deskgate %s: %s\n", o->cmd, err.msg);
			return -1;
		}
		if (strcmp(a, "--policy") == 0)
			o->policy_path = v;
		return 1;
	}
	if (strcmp(a, "--verbose") == 0) {
		o->verbose = true;
		return 1;
	}
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
	struct dg_desktop_spec spec = {.profile = o->profile, .width = o->width, .height = o->height,
				       .limits = &s->policy.limits, .log_to_stderr = o->verbose,
				       .strict = s->policy.rules != NULL};
	if (dg_desktop_start(&spec, &s->desktop, &err) != 0) {
		fprintf(stderr, "deskgate %s: starting the %s desktop: %s\n", o->cmd,
			dg_profile_name(o->profile), err.msg);
		return DG_EXIT_FAILED;
	}
	s->started = true;
	int r = dg_worker_start(&s->desktop, &s->worker, &err);
	s->worker.policy = &s->policy;
	if (r != 0 || dg_worker_wait_ready(&s->worker, DG_WORKER_READY_MS, &err) != 0) {
		fprintf(stderr, "deskgate %s: starting the worker: %s\n", o->cmd, err.msg);
		return DG_EXIT_FAILED;
	}
	return 0;
}

static void session_end(struct session *s)
{
	if (s->started) {
		dg_worker_stop(&s->worker);
		dg_desktop_destroy(&s->desktop);
		s->started = false;
	}
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
	return dg_worker_act(&s->worker, json, 0, 0, DG_CLI_ACTION_TIMEOUT_MS, result, png, png_len,
			     NULL, NULL, err);
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

int dg_cmd_shot(int argc, char **argv)
{
	struct session_opts o = {.cmd = "shot", .profile = DG_PROFILE_XTERM,
				 .width = DG_DESKTOP_WIDTH_DEFAULT, .height = DG_DESKTOP_HEIGHT_DEFAULT};
	const char *out = NULL, *url = NULL;
	for (int i = 1; i < argc; i++) {
		int c = common_opt(&o, argc, argv, &i);
		if (c < 0)
			return DG_EXIT_USAGE;
		if (c > 0)
			continue;
		if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--url") == 0) && i + 1 < argc) {
			if (argv[i][1] == 'o')
				out = argv[++i];
			else
				url = argv[++i];
			continue;
		}
		fprintf(stderr, "deskgate shot: unknown or incomplete option %s\n"
				"usage: deskgate shot [--profile xterm|browser] [--url URL] [--size WxH] "
				"[--policy FILE] -o FILE.png\n", argv[i]);
		return DG_EXIT_USAGE;
	}
	if (!out) {
		fprintf(stderr, "deskgate shot: -o FILE.png is required\n");
		return DG_EXIT_USAGE;
	}
	if (url && o.profile != DG_PROFILE_BROWSER) {
		fprintf(stderr, "deskgate shot: --url needs --profile browser\n");
		return DG_EXIT_USAGE;
	}
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

int dg_cmd_desktop(int argc, char **argv)
{
	struct session_opts o = {.cmd = "desktop", .profile = DG_PROFILE_XTERM,
				 .width = DG_DESKTOP_WIDTH_DEFAULT, .height = DG_DESKTOP_HEIGHT_DEFAULT};
	const char *script = NULL, *dir = NULL;
	for (int i = 1; i < argc; i++) {
		int c = common_opt(&o, argc, argv, &i);
		if (c < 0)
			return DG_EXIT_USAGE;
		if (c > 0)
			continue;
		if ((strcmp(argv[i], "--script") == 0 || strcmp(argv[i], "--out") == 0) && i + 1 < argc) {
			if (argv[i][2] == 's')
				script = argv[++i];
			else
				dir = argv[++i];
			continue;
		}
		fprintf(stderr, "deskgate desktop: unknown or incomplete option %s\n"
				"usage: deskgate desktop [--profile xterm|browser] [--size WxH] "
				"[--policy FILE] --script FILE.jsonl --out DIR\n", argv[i]);
		return DG_EXIT_USAGE;
	}
	if (!script || !dir) {
		fprintf(stderr, "deskgate desktop: --script FILE.jsonl and --out DIR are required\n");
		return DG_EXIT_USAGE;
	}
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
