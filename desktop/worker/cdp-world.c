/* cdp-world: ticketed commands on the current page and its isolated
 * worlds, for the worker's helpers that talk to the page in steps (ack.c,
 * tree.c; see "Ticketed page commands" in cdp-priv.h). */
#include <errno.h>
#include <stdlib.h>

#include "desktop/worker/cdp-priv.h"

struct ticket {
	void *owner;
	uint64_t gen;
};

bool dg_cdp_page_send(struct dg_cdp *c, const char *method, json_t *params, dg_cdp_done_fn fn,
		      void *owner, uint64_t gen)
{
	const char *sid = dg_cdp_session_id(c);
	struct ticket *t = malloc(sizeof(*t));
	if (!t || !sid[0] || !dg_cdp_ready(c)) {
		free(t);
		json_decref(params);
		return false;
	}
	*t = (struct ticket){owner, gen};
	struct dg_err err = {{0}};
	if (dg_cdp_send(c, method, params, sid, fn, t, &err) != 0) {
		free(t);
		return false;
	}
	return true;
}

void *dg_cdp_claim(void *arg, int status, uint64_t *gen)
{
	struct ticket *t = arg;
	void *owner = status == -ECANCELED ? NULL : t->owner;
	*gen = t->gen;
	free(t);
	return owner;
}

bool dg_cdp_world_create(struct dg_cdp *c, const char *name, dg_cdp_done_fn fn, void *owner,
			 uint64_t gen)
{
	json_t *p = json_pack("{s:s, s:s, s:b}", "frameId", dg_cdp_target_id(c), "worldName", name,
			      "grantUniveralAccess", 0);
	return p && dg_cdp_page_send(c, "Page.createIsolatedWorld", p, fn, owner, gen);
}

int dg_cdp_world_id(int status, const json_t *result)
{
	json_t *id = json_object_get(result, "executionContextId");
	if (status != 0 || !json_is_integer(id) || json_integer_value(id) <= 0 ||
	    json_integer_value(id) > INT32_MAX)
		return 0;
	return (int)json_integer_value(id);
}
