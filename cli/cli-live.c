/* `deskgate test --live`: scripted steps on a real desktop. See
 * cli/cli-priv.h for the contract. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "actions/actions.h"
#include "cli/cli-priv.h"
#include "gateway/gateway.h"

/* Longest a step's action may take, settling included. */
#define DG_LIVE_STEP_MS 30000
#define DG_LIVE_SESSION_ID "live-test"

struct live {
	const struct dg_policy *p;
	struct dg_cli_session local;
	char *url, *title;    /* the page the worker last reported */
	int px, py;           /* the pointer */
	uint64_t actions, execs;
	long long minute_ms[512]; /* times of recent allowed actions, for actions_per_minute */
	int n_minute;
};

static uint64_t last_minute(struct live *l)
{
	long long t = dg_now_ms();
	int k = 0;
	for (int i = 0; i < l->n_minute; i++)
		if (t - l->minute_ms[i] < 60000)
			l->minute_ms[k++] = l->minute_ms[i];
	l->n_minute = k;
	return (uint64_t)k;
}

static void drain_egress(struct live *l)
{
	json_t *ev;
	struct dg_err err = {{0}};
	while (l->local.egress_up && dg_egress_recv(&l->local.egress, &ev, &err) == 1)
		json_decref(ev);
}

static void keep(char *dst, size_t n, json_t *v, bool *has)
{
	if (json_is_string(v)) {
		snprintf(dst, n, "%s", json_string_value(v));
		*has = true;
	}
}

/* Performs a setup action (not a scripted step: never decided, never
 * counted) and follows the pointer and page it reports. */
static int setup_act(struct live *l, json_t *action, struct dg_err *err)
{
	char *text = json_dumps(action, JSON_COMPACT);
	json_decref(action);
	char *result = NULL;
	uint8_t *png = NULL;
	size_t png_len = 0;
	int r = text ? dg_worker_act(&l->local.worker, text, 0, 0, DG_LIVE_STEP_MS, &result, &png,
				     &png_len, NULL, NULL, err)
		     : dg_err_set(err, -ENOMEM, "out of memory");
	free(text);
	free(png);
	drain_egress(l);
	json_t *j = r == 0 ? json_loads(result, 0, NULL) : NULL;
	free(result);
	json_t *cur = json_object_get(j, "cursor");
	if (json_is_array(cur)) {
		l->px = (int)json_integer_value(json_array_get(cur, 0));
		l->py = (int)json_integer_value(json_array_get(cur, 1));
	}
	json_t *u = json_object_get(j, "url"), *t = json_object_get(j, "title");
	if (json_is_string(t)) {
		free(l->title);
		l->title = strdup(json_string_value(t));
	}
	(void)u; /* the declared URL, not the reported one, is what the step means */
	json_decref(j);
	return r;
}

/* The state a step declares (checked by the script runner: "pointer" on
 * the screen, "url" a string or null), made true on the desktop before
 * the step's action, so that a script means the same offline and live:
 * the pointer is moved there; the browser navigates to the URL (whatever
 * loads, an error page included) and the step is decided at the declared
 * URL, as offline; null means an unknown URL. */
static int apply_declared(struct live *l, const json_t *stepj, struct dg_err *err)
{
	json_t *ptr = json_object_get(stepj, "pointer");
	if (json_is_array(ptr)) {
		int x = (int)json_integer_value(json_array_get(ptr, 0));
		int y = (int)json_integer_value(json_array_get(ptr, 1));
		const struct dg_desktop_io *io = &l->local.desktop.io;
		if (x >= io->width || y >= io->height)
			return dg_err_set(err, -EINVAL, "pointer [%d, %d] is off the live desktop (%dx%d)", x,
					  y, io->width, io->height);
		int r = setup_act(l, json_pack("{s:s, s:i, s:i}", "type", "move", "x", x, "y", y), err);
		if (r)
			return r;
		l->px = x;
		l->py = y;
	}
	json_t *url = json_object_get(stepj, "url");
	if (json_is_null(url)) {
		free(l->url);
		l->url = NULL;
	} else if (json_is_string(url)) {
		if (l->local.desktop.io.profile == DG_PROFILE_BROWSER) {
			int r = setup_act(l, json_pack("{s:s, s:O}", "type", "navigate", "url", url), err);
			if (r)
				return r;
		}
		free(l->url);
		l->url = strdup(json_string_value(url));
	}
	return 0;
}

static int step(void *arg, const json_t *stepj, struct dg_rec_live_result *res, struct dg_err *err)
{
	struct live *l = arg;
	json_t *action = json_object_get(stepj, "action");
	int dr = apply_declared(l, stepj, err);
	if (dr)
		return dr;
	const struct dg_desktop_io *io = &l->local.desktop.io;
	struct dg_action a;
	if (dg_action_parse_obj(action, io->width, io->height, &a, err) != 0)
		return -EINVAL;
	/* An action on an element is decided at its point, found as the
	 * gateway finds it (scrolled into view; a click or move must reach
	 * the element itself), and performed there. */
	json_t *resolved = NULL;
	if (dg_action_unresolved(&a)) {
		int x = 0, y = 0;
		bool hit = a.type == DG_ACTION_CLICK || a.type == DG_ACTION_MOVE;
		int r = dg_worker_resolve(&l->local.worker, a.ref, hit, DG_LIVE_STEP_MS, &x, &y, err);
		drain_egress(l);
		if (r) {
			dg_action_free(&a);
			return r;
		}
		a.x = x;
		a.y = y;
		a.has_xy = true;
		resolved = dg_action_to_json(&a);
		if (!resolved) {
			dg_action_free(&a);
			return dg_err_set(err, -ENOMEM, "out of memory");
		}
		action = resolved;
	}
	struct dg_decide_ctx ctx = {
		.url = l->url && l->url[0] ? l->url : NULL,
		.screen_w = io->width,
		.screen_h = io->height,
		.pointer_x = l->px,
		.pointer_y = l->py,
		.actions_last_minute = last_minute(l),
		.actions_total = l->actions,
		.exec_total = l->execs,
	};
	struct dg_decision d;
	dg_policy_decide(l->p, &a, &ctx, &d);
	bool is_exec = a.type == DG_ACTION_EXEC;
	dg_action_free(&a);
	res->verdict = d.verdict;
	snprintf(res->rule, sizeof(res->rule), "%s", d.rule);
	snprintf(res->reason, sizeof(res->reason), "%s", d.reason);
	if (d.verdict != DG_VERDICT_ALLOW || is_exec) {
		/* Not performed (as the gateway would not; exec is decided only:
		 * it runs in the gateway's sessions): the page stays as it was. */
		if (l->url) {
			snprintf(res->url, sizeof(res->url), "%s", l->url);
			res->has_url = true;
		}
		if (l->title) {
			snprintf(res->title, sizeof(res->title), "%s", l->title);
			res->has_title = true;
		}
		json_decref(resolved);
		return 0;
	}
	l->actions++;
	if (l->n_minute < (int)(sizeof(l->minute_ms) / sizeof(l->minute_ms[0])))
		l->minute_ms[l->n_minute++] = dg_now_ms();
	char *text = json_dumps(action, JSON_COMPACT);
	json_decref(resolved);
	char *result = NULL;
	uint8_t *png = NULL;
	size_t png_len = 0;
	int r = text ? dg_worker_act(&l->local.worker, text, 0, 0, DG_LIVE_STEP_MS, &result, &png,
				     &png_len, NULL, NULL, err)
		     : dg_err_set(err, -ENOMEM, "out of memory");
	free(text);
	free(png);
	drain_egress(l);
	if (r)
		return r;
	json_t *j = json_loads(result, 0, NULL);
	free(result);
	keep(res->url, sizeof(res->url), json_object_get(j, "url"), &res->has_url);
	keep(res->title, sizeof(res->title), json_object_get(j, "title"), &res->has_title);
	if (res->has_url) {
		free(l->url);
		l->url = strdup(res->url);
	}
	if (res->has_title) {
		free(l->title);
		l->title = strdup(res->title);
	}
	json_t *cur = json_object_get(j, "cursor");
	if (json_is_array(cur)) {
		l->px = (int)json_integer_value(json_array_get(cur, 0));
		l->py = (int)json_integer_value(json_array_get(cur, 1));
	}
	json_decref(j);
	return 0;
}

static void live_free(struct live *l)
{
	dg_cli_session_close(&l->local);
	free(l->url);
	free(l->title);
	free(l);
}

int dg_cli_live_open(const struct dg_policy *p, const char *profile, const char *resolve,
		     struct dg_rec_live *live, struct dg_err *err)
{
	enum dg_profile prof = DG_PROFILE_BROWSER;
	if (profile && dg_profile_parse(profile, &prof) != 0)
		return dg_err_set(err, -EINVAL, "--profile must be xterm or browser");
	if (geteuid() != 0)
		return dg_err_set(err, -EPERM, "--live must run as root: it starts a desktop in a jail");
	struct live *l = calloc(1, sizeof(*l));
	if (!l)
		return dg_err_set(err, -ENOMEM, "out of memory");
	l->p = p;
	struct dg_err e2 = {{0}};
	if (dg_jail_cleanup_stale(&e2) < 0)
		fprintf(stderr, "deskgate test: cleaning up stale jails: %s\n", e2.msg);
	const char *res[1] = {resolve};
	struct dg_egress_opts eo = {.resolve = res, .n_resolve = resolve ? 1 : 0};
	struct dg_cli_session_spec spec = {.policy = p, .profile = prof, .egress = true,
					   .egress_opts = &eo, .id = DG_LIVE_SESSION_ID};
	int r = dg_cli_session_open(&spec, &l->local, err);
	if (r) {
		live_free(l);
		return r;
	}
	json_t *ready = json_loads(l->local.worker.ready, 0, NULL);
	json_t *u = json_object_get(ready, "url"), *t = json_object_get(ready, "title");
	l->url = json_is_string(u) ? strdup(json_string_value(u)) : NULL;
	l->title = json_is_string(t) ? strdup(json_string_value(t)) : NULL;
	json_decref(ready);
	l->px = l->local.desktop.io.width / 2;
	l->py = l->local.desktop.io.height / 2;
	live->step = step;
	live->arg = l;
	return 0;
}

void dg_cli_live_close(struct dg_rec_live *live)
{
	if (live->arg)
		live_free(live->arg);
	live->arg = NULL;
}
