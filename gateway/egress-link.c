/* The gateway's side of the egress proxy: each session's listener (created
 * by the spawner in the jail's network namespace) is handed to the proxy,
 * withdrawn when the session ends, and the proxy's events are routed to the
 * session they name. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/server-priv.h"

void dg_gw_egress_attach(struct gw_session *s)
{
	if (s->egress_fd < 0)
		return;
	struct dg_err err = {{0}};
	int r = dg_egress_add(&s->gw->egress, s->id, s->egress_fd, &s->policy, &err);
	close(s->egress_fd);
	s->egress_fd = -1;
	if (r != 0) {
		/* The desktop would have no way out at all, which is safe, but the
		 * agent would see every page fail without a reason. */
		lwsl_err("deskgate: session %s: handing its listener to the egress proxy: %s\n", s->id,
			 err.msg);
		dg_gw_session_end(s, "the egress proxy did not take the session's listener");
	}
	s->egress_added = r == 0;
}

void dg_gw_egress_detach(struct gw_session *s)
{
	if (s->egress_fd >= 0) {
		close(s->egress_fd);
		s->egress_fd = -1;
	}
	if (!s->egress_added)
		return;
	s->egress_added = false;
	struct dg_err err = {{0}};
	if (s->gw->egress_wsi && dg_egress_remove(&s->gw->egress, s->id, &err) != 0)
		lwsl_err("deskgate: session %s: withdrawing its listener: %s\n", s->id, err.msg);
}

void dg_gw_egress_event(struct gw *gw, json_t *ev)
{
	const char *id = json_string_value(json_object_get(ev, "session"));
	const char *kind = json_string_value(json_object_get(ev, "event"));
	struct gw_session *s = id ? dg_gw_session_find(gw, id) : NULL;
	if (!s || !kind)
		return;
	json_t *out = json_deep_copy(ev);
	json_object_del(out, "event");
	json_object_del(out, "session");
	if (strcmp(kind, "egress") == 0) {
		const char *verdict = json_string_value(json_object_get(ev, "verdict"));
		bool allowed = verdict && strcmp(verdict, "allow") == 0;
		gw->m.egress[allowed ? 0 : 1]++;
		json_object_set_new(out, "type", json_string("decision"));
		json_object_set_new(out, "layer", json_string("egress"));
		/* host and port apart, as replay re-decides them. */
		const char *target = json_string_value(json_object_get(ev, "target"));
		const char *colon = target ? strrchr(target, ':') : NULL;
		if (colon && colon > target) {
			json_object_set_new(out, "host", json_stringn(target, (size_t)(colon - target)));
			json_object_set_new(out, "port", json_integer(strtol(colon + 1, NULL, 10)));
		}
	} else if (strcmp(kind, "decision") == 0) {
		/* A WebSocket decided by its URL at the proxy's SOCKS front: a
		 * browser request like those the guard holds. */
		const char *verdict = json_string_value(json_object_get(ev, "verdict"));
		bool allowed = verdict && strcmp(verdict, "allow") == 0;
		gw->m.requests[allowed ? 0 : 1]++;
		s->n_requests++;
		if (!allowed)
			s->n_requests_blocked++;
		json_object_set_new(out, "type", json_string("decision"));
	} else {
		json_object_set_new(out, "type", json_string(kind));
	}
	dg_gw_session_decision(s, out);
}
