/* A local session: the one bring-up and teardown of a desktop driven
 * in-process, for `shot`, `desktop`, `test --live` and `audit`. See
 * cli/cli-priv.h for the contract. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli-priv.h"

/* Sets err to "what: <err's own message>" (the part that failed first). */
static int failed(struct dg_err *err, int r, const char *what)
{
	char inner[DG_ERR_MAX];
	snprintf(inner, sizeof(inner), "%s", err ? err->msg : "");
	return dg_err_set(err, r, "%s: %s", what, inner);
}

/* Hands the desktop's egress listener to the proxy, which now owns its
 * copy: ours is closed whatever the answer, so no other child inherits it. */
static int hand_over_egress(struct dg_cli_session *s, const char *id, struct dg_err *err)
{
	int r = dg_egress_add(&s->egress, id, s->desktop.jail.egress_fd, NULL, err);
	close(s->desktop.jail.egress_fd);
	s->desktop.jail.egress_fd = -1;
	return r ? failed(err, r, "handing the desktop's egress listener to the proxy") : 0;
}

int dg_cli_session_open(const struct dg_cli_session_spec *spec, struct dg_cli_session *s,
			struct dg_err *err)
{
	memset(s, 0, sizeof(*s));
	const struct dg_policy *p = spec->policy;
	if (!p || (spec->egress && !spec->id))
		return dg_err_set(err, -EINVAL, "a local session needs a policy, and an id for its proxy");
	int r;
	if (spec->egress) {
		if ((r = dg_egress_start(&s->egress, p, spec->egress_opts, err)))
			return failed(err, r, "starting the egress proxy");
		s->egress_up = true;
	}
	struct dg_desktop_spec ds = {
		.profile = spec->profile,
		.width = spec->width ? spec->width : DG_DESKTOP_WIDTH_DEFAULT,
		.height = spec->height ? spec->height : DG_DESKTOP_HEIGHT_DEFAULT,
		.limits = &p->limits,
		.strict = p->rules != NULL,
		.egress = spec->egress,
		.log_to_stderr = spec->log_to_stderr,
		.cpu_after_start = true,
	};
	if ((r = dg_desktop_start(&ds, &s->desktop, err))) {
		char what[64];
		snprintf(what, sizeof(what), "starting the %s desktop", dg_profile_name(spec->profile));
		r = failed(err, r, what);
		goto fail;
	}
	s->desktop_up = true;
	if (spec->egress && (r = hand_over_egress(s, spec->id, err)))
		goto fail;
	if ((r = dg_worker_start(&s->desktop.io, &s->worker, err))) {
		r = failed(err, r, "starting the worker");
		goto fail;
	}
	s->worker_up = true;
	s->worker.policy = p;
	if ((r = dg_worker_wait_ready(&s->worker, DG_WORKER_READY_MS, err))) {
		r = failed(err, r, "starting the worker");
		goto fail;
	}
	/* The start is over: the policy's cpus from here on (as the spawner
	 * does once the gateway saw READY). */
	if ((r = dg_desktop_cap_cpu(&s->desktop, &p->limits, err))) {
		r = failed(err, r, "limiting the desktop's CPU");
		goto fail;
	}
	return 0;
fail:
	dg_cli_session_close(s);
	return r;
}

void dg_cli_session_close(struct dg_cli_session *s)
{
	if (s->worker_up)
		dg_worker_stop(&s->worker);
	if (s->desktop_up)
		dg_desktop_destroy(&s->desktop);
	if (s->egress_up)
		dg_egress_stop(&s->egress);
	s->worker_up = s->desktop_up = s->egress_up = false;
}
