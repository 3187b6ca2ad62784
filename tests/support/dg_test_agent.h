/* Reading an agent's socket in a criterion test (header-only: it asserts,
 * and tests/support/dg_test.c does not use criterion). Include it after
 * dg_test.h. */
#ifndef DG_TEST_AGENT_H
#define DG_TEST_AGENT_H

#include <stdbool.h>

#include <criterion/criterion.h>
#include <jansson.h>

/* The next text message on ws as JSON (a new reference; binary frames
 * before it are dropped). Fails the test when none comes within timeout_s,
 * the connection closed or it is not JSON; and, with events false, when it
 * is an event or a decision: an agent that asked for none gets answers
 * only (docs/api.md, "WebSockets"). */
static inline json_t *dg_test_agent_recv(struct dg_ws *ws, double timeout_s, bool events)
{
	double end = dg_test_now() + timeout_s;
	for (;;) {
		struct dg_ws_msg m;
		double left = end - dg_test_now();
		int r = dg_ws_recv(ws, left > 0 ? left : 0, &m);
		cr_assert_eq(r, 1, "%s", r == 0 ? "no message in time" : "the connection closed");
		if (m.binary) {
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		cr_assert(j, "not JSON: %.200s", (const char *)m.data);
		dg_ws_msg_free(&m);
		if (!events)
			DG_TEST_NO_STRAY_EVENT(j);
		return j;
	}
}

#endif
