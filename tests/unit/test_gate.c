/* The gate's waits (desktop/worker/gate.c): how long the page is given to
 * see pointer input, and how long a "changed" answer's repaint is awaited,
 * each at its base on a quiet host, grown with the delays measured on a
 * loaded one, and never past its maximum; the recent peak those delays
 * feed, falling back after a spike. The waits themselves against a real
 * browser are web/settle's. */
#include <criterion/criterion.h>

#include "gate-priv.h"

Test(gate, wait_is_its_base_on_a_quiet_host)
{
	cr_assert_eq(dg_gate_wait_ms(0, false), DG_GATE_WAIT_MS);
	cr_assert_eq(dg_gate_wait_ms(0, true), DG_GATE_FIRST_WAIT_MS);
	/* Answers within a factor of the base leave it as it is. */
	cr_assert_eq(dg_gate_wait_ms(DG_GATE_WAIT_MS / DG_GATE_LAG_FACTOR, false), DG_GATE_WAIT_MS);
	cr_assert_eq(dg_gate_wait_ms(DG_GATE_FIRST_WAIT_MS / DG_GATE_LAG_FACTOR, true),
		     DG_GATE_FIRST_WAIT_MS);
}

Test(gate, wait_grows_with_lag_up_to_its_maximum)
{
	int lag = DG_GATE_WAIT_MS / DG_GATE_LAG_FACTOR + 1;
	cr_assert_eq(dg_gate_wait_ms(lag, false), lag * DG_GATE_LAG_FACTOR);
	int edge = DG_GATE_WAIT_MAX_MS / DG_GATE_LAG_FACTOR;
	cr_assert_eq(dg_gate_wait_ms(edge, false), edge * DG_GATE_LAG_FACTOR);
	cr_assert_eq(dg_gate_wait_ms(edge + 1, false), DG_GATE_WAIT_MAX_MS);
	cr_assert_eq(dg_gate_wait_ms(edge + 1, true), DG_GATE_WAIT_MAX_MS);
	cr_assert_eq(dg_gate_wait_ms(1000000, true), DG_GATE_WAIT_MAX_MS);
	cr_assert_leq(DG_GATE_FIRST_WAIT_MS, DG_GATE_WAIT_MAX_MS);
}

Test(gate, change_wait_grows_with_the_slower_of_answer_and_repaint)
{
	cr_assert_eq(dg_gate_change_wait_ms(0, 0), DG_GATE_CHANGE_WAIT_MS);
	cr_assert_eq(dg_gate_change_wait_ms(-5, 0), DG_GATE_CHANGE_WAIT_MS);
	int base_lag = DG_GATE_CHANGE_WAIT_MS / DG_GATE_LAG_FACTOR;
	cr_assert_eq(dg_gate_change_wait_ms(base_lag, base_lag), DG_GATE_CHANGE_WAIT_MS);
	cr_assert_eq(dg_gate_change_wait_ms(base_lag + 10, 0),
		     (base_lag + 10) * DG_GATE_LAG_FACTOR);
	cr_assert_eq(dg_gate_change_wait_ms(0, base_lag + 20),
		     (base_lag + 20) * DG_GATE_LAG_FACTOR);
	cr_assert_eq(dg_gate_change_wait_ms(base_lag + 10, base_lag + 20),
		     (base_lag + 20) * DG_GATE_LAG_FACTOR);
	int edge = DG_GATE_CHANGE_WAIT_MAX_MS / DG_GATE_LAG_FACTOR;
	cr_assert_eq(dg_gate_change_wait_ms(edge, 0), edge * DG_GATE_LAG_FACTOR);
	cr_assert_eq(dg_gate_change_wait_ms(edge + 1, 0), DG_GATE_CHANGE_WAIT_MAX_MS);
	cr_assert_eq(dg_gate_change_wait_ms(0, edge + 1), DG_GATE_CHANGE_WAIT_MAX_MS);
	cr_assert_eq(dg_gate_change_wait_ms(1LL << 40, 0), DG_GATE_CHANGE_WAIT_MAX_MS);
}

Test(gate, lag_peak_rises_at_once_and_falls_by_quarters)
{
	cr_assert_eq(dg_gate_lag_fold(0, 0), 0);
	cr_assert_eq(dg_gate_lag_fold(0, 180), 180);
	/* A spike is remembered, then falls a quarter an answer. */
	int peak = dg_gate_lag_fold(0, 200);
	peak = dg_gate_lag_fold(peak, 5);
	cr_assert_eq(peak, 150);
	peak = dg_gate_lag_fold(peak, 5);
	cr_assert_eq(peak, 113);
	peak = dg_gate_lag_fold(peak, 120);
	cr_assert_eq(peak, 120);
	for (int i = 0; i < 30; i++)
		peak = dg_gate_lag_fold(peak, 5);
	cr_assert_eq(peak, 5, "back to the host's own delay after a spike: %d", peak);
	/* Hostile or broken clocks: a negative sample counts as none, a huge
	 * one as the longest wait it can feed. */
	cr_assert_eq(dg_gate_lag_fold(0, -100), 0);
	cr_assert_eq(dg_gate_lag_fold(0, 1LL << 40), DG_GATE_CHANGE_WAIT_MAX_MS);
}

Test(gate, first_quiet_is_its_base_or_the_answer_time)
{
	cr_assert_eq(dg_gate_first_quiet_ms(-3), DG_GATE_FIRST_QUIET_MS);
	cr_assert_eq(dg_gate_first_quiet_ms(0), DG_GATE_FIRST_QUIET_MS);
	cr_assert_eq(dg_gate_first_quiet_ms(DG_GATE_FIRST_QUIET_MS - 1), DG_GATE_FIRST_QUIET_MS);
	cr_assert_eq(dg_gate_first_quiet_ms(DG_GATE_FIRST_QUIET_MS + 1), DG_GATE_FIRST_QUIET_MS + 1);
	cr_assert_eq(dg_gate_first_quiet_ms(DG_GATE_FIRST_QUIET_MAX_MS), DG_GATE_FIRST_QUIET_MAX_MS);
	cr_assert_eq(dg_gate_first_quiet_ms(DG_GATE_FIRST_QUIET_MAX_MS + 1), DG_GATE_FIRST_QUIET_MAX_MS);
	cr_assert_eq(dg_gate_first_quiet_ms(1LL << 40), DG_GATE_FIRST_QUIET_MAX_MS);
	/* Every first period is at least the others'. */
	cr_assert_geq(DG_GATE_FIRST_QUIET_MS, DG_GATE_QUIET_MS);
}

Test(gate, first_is_the_documents_first_input_or_first_press)
{
	uint64_t presses = 0;
	struct dg_gate g = {.presses = &presses, .count = 0};
	cr_assert(dg_gate_first(&g), "no pointer event seen: the viewport is unknown");
	g.view[2] = 1280;
	g.view[3] = 700;
	cr_assert_not(dg_gate_first(&g), "a move after the first, no press");
	presses = 1;
	cr_assert(dg_gate_first(&g), "the document's first press");
	g.count = 1;
	g.presses_at = 1;
	presses = 3;
	cr_assert_not(dg_gate_first(&g), "a press after the first");
	g.count = -1;
	cr_assert_not(dg_gate_first(&g), "the count unknown: the gate does not wait at all");
}
