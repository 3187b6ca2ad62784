/* cdp-fw: Chromium's events (contract: cdp-fw-priv.h, "Sessions"): each
 * goes to the client whose session it is on, or is left to the worker
 * (the guard's, the page logs'); the sessions announced on a client's
 * session become its own, those detached are forgotten.
 */
#include <string.h>

#include "desktop/worker/cdp-fw-int-priv.h"

/* Forgets session and every session announced on it, at any depth. */
static void forget(struct client *cl, const char *session)
{
	char gone[DG_CDP_ID_MAX + 1];
	snprintf(gone, sizeof(gone), "%s", session);
	for (int i = 0; i < DG_CDPFW_SESSIONS_MAX; i++) {
		struct owned *o = &cl->sessions[i];
		if (o->id[0] && strcmp(o->id, gone) == 0) {
			memset(o, 0, sizeof(*o));
			cl->n_sessions--;
		}
	}
	for (int i = 0; i < DG_CDPFW_SESSIONS_MAX; i++) {
		struct owned *o = &cl->sessions[i];
		if (o->id[0] && strcmp(o->parent, gone) == 0) {
			char child[DG_CDP_ID_MAX + 1];
			snprintf(child, sizeof(child), "%s", o->id);
			forget(cl, child);
		}
	}
}

/* Target.attachedToTarget on the client's session parent: the new session
 * is the client's, or withheld (detached at once). Returns whether the
 * event goes on to the client. */
static bool on_attached(struct dg_cdpfw *fw, struct client *cl, const char *parent,
			json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	json_t *type = json_object_get(json_object_get(params, "targetInfo"), "type");
	if (!dg_cdp_valid_id(sid))
		return false; /* nothing the client could use */
	const char *id = json_string_value(sid);
	if (dg_cdpfw_owns(cl, id))
		return true;
	bool ui = json_is_string(type) && strcmp(json_string_value(type), "browser_ui") == 0;
	struct owned *slot = NULL;
	for (int i = 0; i < DG_CDPFW_SESSIONS_MAX && !slot && !ui; i++)
		if (!cl->sessions[i].id[0])
			slot = &cl->sessions[i];
	if (!slot) {
		fw->st.sessions_withheld++;
		dg_cdp_send(fw->cdp, "Target.detachFromTarget", json_pack("{s:s}", "sessionId", id),
			    parent, NULL, NULL, NULL);
		return false;
	}
	snprintf(slot->id, sizeof(slot->id), "%s", id);
	snprintf(slot->parent, sizeof(slot->parent), "%s", parent);
	cl->n_sessions++;
	return true;
}

/* A root event: the announcement of a client's browser session (Chromium
 * sends Target.attachedToTarget, type "browser", before its reply), or of
 * its end. */
static bool on_root_event(struct dg_cdpfw *fw, const char *method, json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	if (!dg_cdp_valid_id(sid))
		return false;
	if (strcmp(method, "Target.attachedToTarget") == 0) {
		json_t *type = json_object_get(json_object_get(params, "targetInfo"), "type");
		/* Only attachToBrowserTarget makes a "browser" session, and only the
		 * firewall sends it. */
		return fw->n_attaching > 0 && json_is_string(type) &&
		       strcmp(json_string_value(type), "browser") == 0;
	}
	if (strcmp(method, "Target.detachedFromTarget") != 0)
		return false;
	for (int c = 0; c < DG_CDPFW_CLIENTS_MAX; c++) {
		struct client *cl = &fw->clients[c];
		if (!cl->browser[0] || strcmp(cl->browser, json_string_value(sid)) != 0)
			continue;
		if (cl->closing) { /* the detach the firewall asked for: over */
			memset(cl, 0, sizeof(*cl));
		} else if (cl->used) {
			cl->browser[0] = '\0'; /* gone: nothing to detach */
			dg_cdpfw_drop(fw, cl, "the browser ended the client's session");
		}
		return true;
	}
	return false;
}

bool dg_cdpfw_event(struct dg_cdpfw *fw, const char *method, const char *session, json_t *params)
{
	if (!fw || !fw->cdp)
		return false;
	if (!session)
		return on_root_event(fw, method, params);
	struct client *cl = NULL;
	for (int c = 0; c < DG_CDPFW_CLIENTS_MAX && !cl; c++)
		if ((fw->clients[c].used || fw->clients[c].closing) &&
		    dg_cdpfw_owns(&fw->clients[c], session))
			cl = &fw->clients[c];
	if (!cl)
		return false;
	if (cl->closing)
		return true; /* a closed client's, on its way before the detach */
	if (strcmp(method, "Target.attachedToTarget") == 0 && !on_attached(fw, cl, session, params))
		return true;
	if (strcmp(method, "Target.detachedFromTarget") == 0) {
		json_t *sid = json_object_get(params, "sessionId");
		if (dg_cdp_valid_id(sid) && strcmp(json_string_value(sid), cl->browser) != 0)
			forget(cl, json_string_value(sid));
	}
	json_t *j = json_pack("{s:s, s:O}", "method", method, "params", params);
	if (j && strcmp(session, cl->browser) != 0)
		json_object_set_new(j, "sessionId", json_string(session));
	fw->st.events++;
	dg_cdpfw_to_client(fw, cl, j);
	return true;
}

