/* recordings: replay, re-deciding a recording under another policy.
 *
 * The recording is read as hostile input with its chain checked (reader.c);
 * each "action" event is re-decided with the context it recorded. A field
 * of the wrong shape makes that event "skipped" with the reason, never the
 * replay fail. See dg_rec_replay in recordings.h for the budget rule. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

#define BUDGET_SLOTS 60 /* one-second slots of the gateway's minute window */

struct rctx {
	const struct dg_policy *p;
	int (*fn)(void *arg, const struct dg_rec_redecision *d);
	void *arg;
	struct dg_rec_replay_summary *sum;
	int width, height;                 /* session.json's */
	long long stamp[BUDGET_SLOTS];
	uint64_t count[BUDGET_SLOTS];
	uint64_t total, exec;
};

static int verdict_of(const char *s)
{
	if (!s)
		return -1;
	for (int v = DG_VERDICT_ALLOW; v <= DG_VERDICT_DENY; v++)
		if (strcmp(s, dg_verdict_name((enum dg_verdict)v)) == 0)
			return v;
	return -1;
}

static bool int_pair(const json_t *a, int lo, int hi0, int hi1, int *x, int *y)
{
	if (!json_is_array(a) || json_array_size(a) != 2)
		return false;
	json_t *jx = json_array_get(a, 0), *jy = json_array_get(a, 1);
	if (!json_is_integer(jx) || !json_is_integer(jy))
		return false;
	json_int_t vx = json_integer_value(jx), vy = json_integer_value(jy);
	if (vx < lo || vx > hi0 || vy < lo || vy > hi1)
		return false;
	*x = (int)vx;
	*y = (int)vy;
	return true;
}

static int emit(struct rctx *c, struct dg_rec_redecision *d)
{
	if (d->skipped)
		c->sum->skipped++;
	else if (d->changed)
		c->sum->changed++;
	if (d->redacted)
		c->sum->redacted++;
	return c->fn && c->fn(c->arg, d) ? -ECANCELED : 0;
}

/* A redacted text {"redacted":true,"length":N,...} becomes N "x"s, so
 * text.max_length still decides; text.deny cannot. Returns a new reference
 * to the action to decide (itself when not redacted), or NULL. */
static json_t *unredact(const json_t *action, bool *redacted)
{
	/* A type action's text, or a form_input's string value. */
	const char *key = json_object_get(action, "value") ? "value" : "text";
	json_t *t = json_object_get(action, key);
	*redacted = false;
	if (!json_is_object(t) || !json_is_true(json_object_get(t, "redacted")))
		return json_incref((json_t *)action);
	json_t *len = json_object_get(t, "length");
	if (!json_is_integer(len) || json_integer_value(len) < 0 ||
	    json_integer_value(len) > DG_ACTION_TEXT_MAX)
		return NULL;
	size_t n = (size_t)json_integer_value(len);
	char *x = malloc(n + 1);
	json_t *c = json_copy((json_t *)action);
	if (!x || !c) {
		free(x);
		json_decref(c);
		return NULL;
	}
	memset(x, 'x', n);
	x[n] = '\0';
	json_object_set_new(c, key, json_stringn(x, n));
	free(x);
	*redacted = true;
	return c;
}

static int replay_action(struct rctx *c, const struct dg_rec_ev *ev)
{
	const json_t *o = ev->obj;
	struct dg_rec_redecision d = { .seq = ev->seq, .kind = "action" };
	const json_t *action = json_object_get(o, "action");
	d.action = json_is_object(action) ? action : NULL;
	d.old_verdict = json_string_value(json_object_get(o, "verdict"));
	d.old_rule = json_string_value(json_object_get(o, "rule"));
	if (!d.old_rule)
		d.old_rule = "";
	if (!json_is_object(action)) {
		d.skipped = "the action did not parse when it was recorded";
		return emit(c, &d);
	}
	if (verdict_of(d.old_verdict) < 0) {
		d.skipped = "no recorded verdict";
		return emit(c, &d);
	}
	if (strcmp(d.old_rule, "takeover") == 0) {
		/* The gateway's, not the policy's: the agent waited for a human
		 * who had taken control (docs/recordings.md#takeovers). */
		d.skipped = "paused by an operator's takeover: the policy did not decide it";
		return emit(c, &d);
	}
	int w = c->width, h = c->height, px, py;
	json_t *screen = json_object_get(o, "screen");
	if (screen && !int_pair(screen, 1, DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, &w, &h)) {
		d.skipped = "\"screen\" is not [w, h]";
		return emit(c, &d);
	}
	px = w / 2;
	py = h / 2;
	json_t *ptr = json_object_get(o, "pointer");
	if (ptr && !json_is_null(ptr) && !int_pair(ptr, 0, w - 1, h - 1, &px, &py)) {
		d.skipped = "\"pointer\" is not [x, y] on the screen";
		return emit(c, &d);
	}
	json_t *jurl = json_object_get(o, "url");
	if (jurl && !json_is_null(jurl) &&
	    (!json_is_string(jurl) || json_string_length(jurl) > DG_ACTION_URL_MAX ||
	     strlen(json_string_value(jurl)) != json_string_length(jurl))) {
		d.skipped = "\"url\" is not a URL string";
		return emit(c, &d);
	}
	json_t *mono = json_object_get(o, "mono_ms"), *dur = json_object_get(o, "duration_ms");
	long long t_ms = (long long)json_integer_value(mono);
	if (json_is_integer(dur) && json_integer_value(dur) >= 0 && json_integer_value(dur) <= t_ms)
		t_ms -= (long long)json_integer_value(dur);
	if (t_ms < 0)
		t_ms = 0;
	long long now_s = t_ms / 1000;

	json_t *use = unredact(action, &d.redacted);
	if (!use) {
		d.skipped = "the redacted text has no valid length";
		return emit(c, &d);
	}
	struct dg_action a;
	struct dg_err perr = { { 0 } };
	int prc = dg_action_parse_obj(use, w, h, &a, &perr);
	json_decref(use);
	if (prc != 0) {
		d.skipped = perr.msg[0] ? perr.msg : "the recorded action does not parse";
		return emit(c, &d);
	}
	if (dg_action_unresolved(&a)) {
		/* Its element's point was never found (the gateway resolves
		 * before it decides), and the page is gone: there is nothing to
		 * decide it at. */
		dg_action_free(&a);
		d.skipped = "the action has a ref without x, y: its element's point on the screen "
			    "was never resolved";
		return emit(c, &d);
	}
	struct dg_decide_ctx ctx = {
		.url = json_string_value(jurl),
		.screen_w = w,
		.screen_h = h,
		.pointer_x = px,
		.pointer_y = py,
		.actions_total = c->total,
		.exec_total = c->exec,
	};
	for (int i = 0; i < BUDGET_SLOTS; i++)
		if (c->count[i] && now_s - c->stamp[i] < BUDGET_SLOTS)
			ctx.actions_last_minute += c->count[i];
	dg_policy_decide(c->p, &a, &ctx, &d.now);
	if (d.now.verdict == DG_VERDICT_ALLOW) {
		int slot = (int)(now_s % BUDGET_SLOTS);
		if (c->stamp[slot] != now_s || !c->count[slot]) {
			c->stamp[slot] = now_s;
			c->count[slot] = 0;
		}
		c->count[slot]++;
		c->total++;
		if (a.type == DG_ACTION_EXEC)
			c->exec++;
	}
	dg_action_free(&a);
	d.changed = strcmp(d.old_verdict, dg_verdict_name(d.now.verdict)) != 0;
	c->sum->actions++;
	return emit(c, &d);
}

static int replay_decision(struct rctx *c, const struct dg_rec_ev *ev)
{
	const json_t *o = ev->obj;
	const char *layer = json_string_value(json_object_get(o, "layer"));
	struct dg_rec_redecision d = { .seq = ev->seq };
	d.old_verdict = json_string_value(json_object_get(o, "verdict"));
	d.old_rule = json_string_value(json_object_get(o, "rule"));
	if (!d.old_rule)
		d.old_rule = "";
	char subject[DG_URL_HOST_MAX + 16];
	if (layer && strcmp(layer, "browser") == 0) {
		d.kind = "browser";
		json_t *u = json_object_get(o, "url");
		d.subject = json_string_value(u);
		if (!d.subject || json_string_length(u) > DG_URL_MAX ||
		    strlen(d.subject) != json_string_length(u))
			d.skipped = "\"url\" is not a URL string";
		else if (verdict_of(d.old_verdict) < 0)
			d.skipped = "no recorded verdict";
		else
			dg_policy_decide_url(c->p, d.subject, &d.now);
	} else if (layer && strcmp(layer, "egress") == 0) {
		d.kind = "egress";
		const char *host = json_string_value(json_object_get(o, "host"));
		json_t *port = json_object_get(o, "port");
		d.subject = "";
		if (!host || strlen(host) > DG_URL_HOST_MAX || !json_is_integer(port) ||
		    json_integer_value(port) < 1 || json_integer_value(port) > 65535) {
			d.skipped = "\"host\" or \"port\" is not valid";
		} else if (verdict_of(d.old_verdict) < 0) {
			d.skipped = "no recorded verdict";
		} else {
			snprintf(subject, sizeof(subject), "%s:%d", host, (int)json_integer_value(port));
			d.subject = subject;
			dg_policy_decide_egress(c->p, host, (uint16_t)json_integer_value(port), &d.now);
		}
	} else {
		return 0; /* a layer this version does not know: nothing to re-decide */
	}
	if (!d.skipped) {
		d.changed = strcmp(d.old_verdict, dg_verdict_name(d.now.verdict)) != 0;
		c->sum->decisions++;
	}
	return emit(c, &d);
}

/* A CDP client's command ("cdp" event, docs/cdp.md), re-decided whole:
 * its method, what it amounted to (the action, the URL, a download
 * behavior, a proxy, files) and its script when the recording kept all of
 * it (params.code_head as long as params.code_bytes; a longer script is
 * not recorded, and the command is skipped). */
static int replay_cdp(struct rctx *c, const struct dg_rec_ev *ev)
{
	const json_t *o = ev->obj;
	const json_t *params = json_object_get(o, "params");
	struct dg_rec_redecision d = { .seq = ev->seq, .kind = "cdp" };
	json_t *jm = json_object_get(o, "method");
	d.subject = json_string_value(jm);
	d.old_verdict = json_string_value(json_object_get(o, "verdict"));
	d.old_rule = json_string_value(json_object_get(o, "rule"));
	if (!d.old_rule)
		d.old_rule = "";
	const json_t *action = json_object_get(o, "action");
	json_t *jurl = json_object_get(o, "url");
	const json_t *head = json_object_get(params, "code_head");
	const json_t *bytes = json_object_get(params, "code_bytes");
	if (!d.subject || json_string_length(jm) > 128 || strlen(d.subject) != json_string_length(jm))
		d.skipped = "\"method\" is not a method name";
	else if (verdict_of(d.old_verdict) < 0)
		d.skipped = "no recorded verdict";
	else if (strcmp(d.old_rule, "takeover") == 0)
		d.skipped = "paused by an operator's takeover: the policy did not decide it";
	else if (action && !json_is_object(action))
		d.skipped = "\"action\" is not an action";
	else if (jurl && (!json_is_string(jurl) || json_string_length(jurl) > DG_ACTION_URL_MAX ||
			  strlen(json_string_value(jurl)) != json_string_length(jurl)))
		d.skipped = "\"url\" is not a URL string";
	else if (bytes && (!json_is_integer(bytes) || !json_is_string(head) ||
			   (json_int_t)json_string_length(head) != json_integer_value(bytes)))
		d.skipped = "its script was not recorded whole (only its first bytes are kept)";
	if (d.skipped)
		return emit(c, &d);
	struct dg_action a;
	bool has_action = false;
	if (action) {
		json_t *use = unredact(action, &d.redacted);
		struct dg_err perr = { { 0 } };
		int prc = use ? dg_action_parse_obj(use, c->width, c->height, &a, &perr) : -EINVAL;
		json_decref(use);
		if (prc != 0) {
			d.skipped = !use ? "the redacted text has no valid length"
			    : perr.msg[0] ? perr.msg : "the recorded action does not parse";
			return emit(c, &d);
		}
		has_action = true;
	}
	const json_t *behavior = json_object_get(params, "behavior");
	struct dg_cdp_command cmd = {
		.method = d.subject,
		.action = has_action ? &a : NULL,
		.code = bytes ? json_string_value(head) : NULL,
		.code_len = bytes ? json_string_length(head) : 0,
		.url = json_string_value(jurl),
		.download_behavior = strstr(d.subject, ".setDownloadBehavior")
			? (json_is_string(behavior) ? json_string_value(behavior) : "") : NULL,
		.proxy = json_is_true(json_object_get(params, "proxyServer")),
		.files = json_object_get(params, "files") != NULL,
	};
	struct dg_decide_ctx ctx = {
		.screen_w = c->width,
		.screen_h = c->height,
		.pointer_x = c->width / 2,
		.pointer_y = c->height / 2,
		.actions_total = c->total,
		.exec_total = c->exec,
	};
	dg_policy_decide_cdp_command(c->p, &cmd, &ctx, &d.now);
	if (has_action)
		dg_action_free(&a);
	d.changed = strcmp(d.old_verdict, dg_verdict_name(d.now.verdict)) != 0;
	c->sum->decisions++;
	return emit(c, &d);
}

static int on_event(struct dg_rec_scan *s, const struct dg_rec_ev *ev, struct dg_err *err)
{
	(void)err;
	struct rctx *c = s->arg;
	if (strcmp(ev->type, "action") == 0)
		return replay_action(c, ev);
	if (strcmp(ev->type, "decision") == 0)
		return replay_decision(c, ev);
	if (strcmp(ev->type, "cdp") == 0)
		return replay_cdp(c, ev);
	return 0;
}

int dg_rec_replay(const char *dir, const struct dg_policy *p,
		  int (*fn)(void *arg, const struct dg_rec_redecision *d), void *arg,
		  struct dg_rec_replay_summary *sum, struct dg_err *err)
{
	memset(sum, 0, sizeof(*sum));
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "%s: %s", dir, strerror(errno));
	struct rctx c = { .p = p, .fn = fn, .arg = arg, .sum = sum };
	struct dg_rec_scan s = { .lim = &dg_rec_limits_default, .dirfd = dirfd, .fd = -1,
				 .on_event = on_event, .arg = &c };
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_scan_session(&s, &e2);
	if (rc == 0) {
		c.width = (int)json_integer_value(json_object_get(s.session, "width"));
		c.height = (int)json_integer_value(json_object_get(s.session, "height"));
		rc = dg_rec_open_reg(dirfd, DG_REC_EVENTS_FILE, O_RDONLY, DG_REC_EVENTS_FILE, &s.fd,
				     NULL, &e2);
		if (rc == 0) {
			rc = dg_rec_scan_events(&s, &e2);
			close(s.fd);
		} else if (rc == -ENOENT) {
			rc = 0; /* no event yet */
		}
	}
	sum->last_seq = s.last_seq;
	sum->sealed = s.sealed;
	sum->torn_bytes = s.torn_bytes;
	dg_rec_scan_free(&s);
	close(dirfd);
	if (rc == -ECANCELED)
		return 0;
	if (rc)
		return dg_err_set(err, rc, "%s: %s%s", dir, e2.msg,
				  rc == -EBADMSG ? " (deskgate verify tells more)" : "");
	return 0;
}
