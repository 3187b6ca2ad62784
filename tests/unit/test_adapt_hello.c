/* The agent's hello (actions/adapt-hello.c): which events it asks for,
 * each limit at its boundary, and what is refused, naming the field. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "actions/actions.h"

static struct dg_adapted ad;
static struct dg_err err;

static void cleanup(void)
{
	dg_adapted_free(&ad);
}

TestSuite(hello, .fini = cleanup);

static const struct dg_adapt_scale sc = {1280, 800, 0, 0, NULL};

static int parse(const char *m)
{
	dg_adapted_free(&ad);
	memset(&err, 0, sizeof(err));
	return dg_adapt_parse(m, strlen(m), &sc, 0, 0, &ad, &err);
}

Test(hello, events_asked_for)
{
	cr_assert_eq(parse("{\"type\":\"hello\",\"events\":[\"page\",\"guard\",\"decision\"]}"), 0,
		     "%s", err.msg);
	cr_assert_eq(ad.wire, DG_WIRE_HELLO);
	cr_assert_eq(ad.n, 0, "a hello is no action");
	cr_assert_eq(ad.events, DG_AGENT_EVENT_PAGE | DG_AGENT_EVENT_GUARD | DG_AGENT_EVENT_DECISION);
	cr_assert_str_eq(dg_wire_name(ad.wire), "hello");
	cr_assert_eq(parse("{\"type\":\"hello\",\"events\":[\"decision\"]}"), 0);
	cr_assert_eq(ad.events, DG_AGENT_EVENT_DECISION);
}

Test(hello, none_asked_for)
{
	const char *none[] = {"{\"type\":\"hello\"}", "{\"type\":\"hello\",\"events\":null}",
			      "{\"type\":\"hello\",\"events\":[]}"};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
		cr_assert_eq(parse(none[i]), 0, "%s: %s", none[i], err.msg);
		cr_assert_eq(ad.wire, DG_WIRE_HELLO);
		cr_assert_eq(ad.events, 0u, "%s", none[i]);
	}
}

Test(hello, names)
{
	cr_assert_str_eq(dg_agent_event_name(DG_AGENT_EVENT_PAGE), "page");
	cr_assert_str_eq(dg_agent_event_name(DG_AGENT_EVENT_GUARD), "guard");
	cr_assert_str_eq(dg_agent_event_name(DG_AGENT_EVENT_DECISION), "decision");
	cr_assert_null(dg_agent_event_name(0));
	cr_assert_null(dg_agent_event_name(1u << DG_AGENT_EVENT_KINDS));
	cr_assert_null(dg_agent_event_name(DG_AGENT_EVENT_PAGE | DG_AGENT_EVENT_GUARD));
	cr_assert_eq(dg_agent_event_bit("page"), DG_AGENT_EVENT_PAGE);
	cr_assert_eq(dg_agent_event_bit("decision"), DG_AGENT_EVENT_DECISION);
	cr_assert_eq(dg_agent_event_bit("error"), 0u);
	cr_assert_eq(dg_agent_event_bit(NULL), 0u);
}

/* DG_AGENT_EVENTS_MAX entries pass (only if each is named once, so at the
 * limit the duplicate is what is refused); one more is too many. */
Test(hello, events_max)
{
	char m[1024] = "{\"type\":\"hello\",\"events\":[";
	for (int i = 0; i < DG_AGENT_EVENTS_MAX; i++)
		strcat(m, i ? ",\"page\"" : "\"page\"");
	strcat(m, "]}");
	cr_assert_eq(parse(m), -EINVAL);
	cr_assert(strstr(err.msg, "hello.events[1]: \"page\" named twice"), "%s", err.msg);
	char more[1024] = "{\"type\":\"hello\",\"events\":[";
	for (int i = 0; i <= DG_AGENT_EVENTS_MAX; i++)
		strcat(more, i ? ",\"page\"" : "\"page\"");
	strcat(more, "]}");
	cr_assert_eq(parse(more), -E2BIG);
	cr_assert(strstr(err.msg, "hello.events: 9 entries, at most 8"), "%s", err.msg);
}

Test(hello, refused)
{
	struct {
		const char *msg, *want;
	} bad[] = {
		{"{\"type\":\"hello\",\"events\":[\"pages\"]}", "hello.events[0]: unknown event \"pages\""},
		{"{\"type\":\"hello\",\"events\":[\"page\",\"frames\"]}", "hello.events[1]: unknown event"},
		{"{\"type\":\"hello\",\"events\":[1]}", "hello.events[0]"},
		{"{\"type\":\"hello\",\"events\":[\"pa\\u0000ge\"]}", "hello.events[0]: unknown event"},
		{"{\"type\":\"hello\",\"events\":\"page\"}", "hello.events: not a list"},
		{"{\"type\":\"hello\",\"events\":{}}", "hello.events: not a list"},
		{"{\"type\":\"hello\",\"watch\":true}", "hello: unknown field \"watch\""},
		{"{\"type\":\"hello\",\"events\":[],\"id\":\"x\"}", "unknown field \"id\""},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_lt(parse(bad[i].msg), 0, "%s was taken", bad[i].msg);
		cr_assert(strstr(err.msg, bad[i].want), "%s: %s (want %s)", bad[i].msg, err.msg,
			  bad[i].want);
		cr_assert_eq(ad.n, 0);
	}
}
