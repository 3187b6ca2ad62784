/* The gateway's decision module: every agent action (the action layer of
 * #5) and every request the browser holds (the browser layer) is decided
 * here, under the session's policy, on what was decoded once: the adapter's
 * parsed struct dg_action, and the worker's REQUEST decoded by
 * dg_worker_request_decode. The egress layer is decided in the proxy (a
 * process of its own by design); the browser layer's rule itself (ask
 * counts as deny) is dg_worker_decide_request, shared with the tools that
 * drive a worker without a gateway. Below the runner: it ends nothing and
 * answers nobody; callers act on the decision.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/server-priv.h"

void dg_gw_per_minute_add(struct gw_per_minute *pm)
{
	long long now_s = dg_now_ms() / 1000;
	int slot = (int)(now_s % 60);
	if (pm->stamp[slot] != now_s) {
		pm->stamp[slot] = now_s;
		pm->count[slot] = 0;
	}
	pm->count[slot]++;
}

uint64_t dg_gw_per_minute_sum(const struct gw_per_minute *pm)
{
	long long now_s = dg_now_ms() / 1000;
	uint64_t n = 0;
	for (int i = 0; i < 60; i++)
		if (now_s - pm->stamp[i] < 60)
			n += pm->count[i];
	return n;
}

/* Counts an action that will run, for the actions_per_minute budget. */
void dg_gw_count_action(struct gw_session *s)
{
	dg_gw_per_minute_add(&s->apm);
}

/* The state an action is decided in: the page, the screen, the pointer,
 * the budgets' counts. */
static void decide_ctx(struct gw_session *s, struct dg_decide_ctx *ctx)
{
	*ctx = (struct dg_decide_ctx){
		.url = s->url && s->url[0] ? s->url : NULL,
		.screen_w = s->width,
		.screen_h = s->height,
		.pointer_x = s->cursor_x,
		.pointer_y = s->cursor_y,
		.actions_last_minute = dg_gw_per_minute_sum(&s->apm),
		.actions_total = s->n_actions + s->n_cdp_actions,
		.exec_total = s->n_exec,
		.cdp_last_minute = dg_gw_per_minute_sum(&s->cdp_pm),
		.cdp_total = s->n_cdp_commands - s->n_cdp_refused,
	};
}

/* The policy decides every action before the desktop sees it (the action
 * layer of #5); r->decision says what and why. a is the adapter's parsed
 * action: validated for this desktop once, when the message came in. */
void dg_gw_decide_action(struct gw_session *s, struct request *r, const struct dg_action *a)
{
	struct dg_decide_ctx ctx;
	decide_ctx(s, &ctx);
	dg_policy_decide(&s->policy, a, &ctx, &r->decision);
	dg_gw_decide_state(s, r);
}

void dg_gw_decide_state(struct gw_session *s, struct request *r)
{
	free(r->b_url);
	free(r->b_title);
	r->b_url = s->url ? strdup(s->url) : NULL;
	r->b_title = s->title ? strdup(s->title) : NULL;
	snprintf(r->b_frame, sizeof(r->b_frame), "%s", s->frame_hash);
	r->b_px = s->cursor_x;
	r->b_py = s->cursor_y;
	r->t_step = dg_now_ms();
}

int dg_gw_decide_request(struct gw_session *s, int fd, const uint8_t *data, size_t len,
			 struct dg_err *err)
{
	struct dg_worker_request req;
	struct dg_decision d;
	int rc = dg_worker_request_decode(data, len, &req, err);
	if (rc)
		return rc;
	dg_worker_decide_request(&s->policy, req.url, &d);
	rc = dg_worker_send_verdict(fd, req.req, d.verdict == DG_VERDICT_ALLOW, err);
	if (rc) {
		dg_worker_request_free(&req);
		return rc;
	}
	s->n_requests++;
	s->gw->m.requests[d.verdict == DG_VERDICT_ALLOW ? 0 : 1]++;
	if (d.verdict != DG_VERDICT_ALLOW)
		s->n_requests_blocked++;
	json_t *m = req.msg;
	json_t *ev = json_pack("{s:s, s:s, s:O?, s:O?, s:O?, s:O?, s:s, s:s, s:s}", "type", "decision",
			       "layer", "browser", "url", json_object_get(m, "url"), "method",
			       json_object_get(m, "method"), "resource", json_object_get(m, "resource"),
			       "target", json_object_get(m, "target"), "verdict",
			       dg_verdict_name(d.verdict), "rule", d.rule, "reason", d.reason);
	dg_worker_request_free(&req);
	dg_gw_note_decision(s, ev);
	return 0;
}

void dg_gw_decide_cdp(struct gw_session *s, const struct dg_cdp_decide *q, struct dg_decision *d,
		      bool *cacheable)
{
	*cacheable = false;
	struct dg_decide_ctx ctx;
	decide_ctx(s, &ctx);
	struct dg_action a;
	struct dg_err err = {{0}};
	if (q->action && dg_action_parse_obj(q->action, s->width, s->height, &a, &err) != 0) {
		d->verdict = DG_VERDICT_DENY;
		snprintf(d->rule, sizeof(d->rule), "cdp.malformed");
		snprintf(d->reason, sizeof(d->reason), "%s", err.msg);
		return;
	}
	/* A download behavior the worker did not report is "" (none given):
	 * refused like any other than deny or default. */
	const char *behavior = json_string_value(json_object_get(q->params, "behavior"));
	struct dg_cdp_command cmd = {
		.method = q->method,
		.action = q->action ? &a : NULL,
		.code = q->code,
		.code_len = q->code_len,
		.url = q->url,
		.download_behavior = strstr(q->method, ".setDownloadBehavior")
			? (behavior ? behavior : "") : NULL,
		.proxy = strcmp(q->method, "Target.createBrowserContext") == 0 &&
			 json_is_true(json_object_get(q->params, "proxyServer")),
		.files = json_object_get(q->params, "files") != NULL,
	};
	dg_policy_decide_cdp_command(&s->policy, &cmd, &ctx, d);
	*cacheable = d->verdict == DG_VERDICT_ALLOW && dg_policy_cdp_cacheable(&s->policy, &cmd);
	if (q->action)
		dg_action_free(&a);
}
