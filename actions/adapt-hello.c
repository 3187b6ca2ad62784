/* adapt: the agent's hello, {"type": "hello", "events": ["page", ...]}.
 * Not an action: it says which messages the agent's socket may carry
 * besides the answers (see enum dg_agent_event in actions.h). Strict like
 * every other wire message: only "type" and "events", each event named
 * once at most, at most DG_AGENT_EVENTS_MAX entries; "events" absent, null
 * or [] asks for none. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "actions/actions.h"
#include "actions/adapt-priv.h"
#include "actions/actions-priv.h"

static const char *const event_names[DG_AGENT_EVENT_KINDS] = {"page", "guard", "decision"};

const char *dg_agent_event_name(unsigned bit)
{
	for (int i = 0; i < DG_AGENT_EVENT_KINDS; i++)
		if (bit == 1u << i)
			return event_names[i];
	return NULL;
}

unsigned dg_agent_event_bit(const char *name)
{
	for (int i = 0; name && i < DG_AGENT_EVENT_KINDS; i++)
		if (strcmp(name, event_names[i]) == 0)
			return 1u << i;
	return 0;
}

int dg_adapt_hello(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a)
{
	char esc[DG_SHOW_BUF];
	snprintf(c->prefix, sizeof(c->prefix), "hello");
	const char *key;
	const json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		if (strcmp(key, "type") != 0 && strcmp(key, "events") != 0) {
			dg_show(key, strlen(key), esc, sizeof(esc));
			return dg_adapt_fail(c, -EINVAL, "", "unknown field \"%s\" (allowed: type, "
					     "events)", esc);
		}
	}
	a->events = 0;
	const json_t *events = json_object_get(obj, "events");
	if (!events || json_is_null(events))
		return 0;
	if (!json_is_array(events))
		return dg_adapt_fail(c, -EINVAL, ".events", "not a list of event names");
	if (json_array_size(events) > DG_AGENT_EVENTS_MAX)
		return dg_adapt_fail(c, -E2BIG, ".events", "%zu entries, at most %d",
				     json_array_size(events), DG_AGENT_EVENTS_MAX);
	size_t i;
	json_array_foreach(events, i, v)
	{
		char where[32];
		snprintf(where, sizeof(where), ".events[%zu]", i);
		const char *s;
		size_t len;
		int rc = dg_adapt_string(c, where, v, &s, &len);
		if (rc < 0)
			return rc;
		unsigned bit = 0;
		for (int k = 0; k < DG_AGENT_EVENT_KINDS; k++)
			if (dg_adapt_str_is(v, event_names[k]))
				bit = 1u << k;
		dg_show(s, len, esc, sizeof(esc));
		if (!bit)
			return dg_adapt_fail(c, -EINVAL, where, "unknown event \"%s\" (page, guard, "
					     "decision)", esc);
		if (a->events & bit)
			return dg_adapt_fail(c, -EINVAL, where, "\"%s\" named twice", esc);
		a->events |= bit;
	}
	return 0;
}
