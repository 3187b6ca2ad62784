/* Benchmark of policy decisions (issue #5: at most 2 us per action).
 *
 * Decides a realistic mix of canonical actions (clicks inside and outside
 * the top-bar region, moves, scrolls, drags, typed text, key chords,
 * navigations to allowed and denied URLs, screenshots, waits, exec) against
 * the full example policy, with a current URL so URL-scoped checks
 * run. Prints decisions per second and ns per decision, and as a reference
 * measured in the same run, the cost of dg_action_parse of the same actions
 * (what the gateway already pays per action), and their ratio.
 *
 *   bench/policy [ROUNDS]     (default 20000 rounds of the mix)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actions/actions.h"
#include "policy/policy.h"

static const char policy_text[] =
	"{\"version\": 1, \"default\": \"deny\","
	" \"actions\": {\"allow\": [\"screenshot\", \"move\", \"click\", \"drag\", \"scroll\", \"type\","
	" \"key\", \"navigate\", \"back\", \"forward\", \"reload\", \"wait\", \"zoom\", \"cursor_position\"],"
	" \"ask\": [\"exec\"], \"deny\": []},"
	" \"urls\": {\"allow\": [\"https://example.com/**\", \"https://*.wikipedia.org/**\"],"
	" \"deny\": [\"https://*.wikipedia.org/wiki/Special:*\"], \"ask\": []},"
	" \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"url\": \"**\","
	" \"actions\": [\"click\", \"type\"], \"verdict\": \"deny\", \"reason\": \"window controls are off limits\"}],"
	" \"keys\": {\"deny\": [\"ctrl+alt+*\", \"super+*\"], \"ask\": [\"ctrl+Return\"]},"
	" \"text\": {\"max_length\": 4000, \"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]},"
	" \"egress\": {\"allow\": [\"example.com:443\", \"*.wikipedia.org:443\"]},"
	" \"budgets\": {\"actions_per_minute\": 300, \"max_actions\": 10000, \"max_exec\": 100},"
	" \"limits\": {\"memory_mb\": 2048, \"pids\": 512, \"cpus\": 1.0, \"session_seconds\": 3600,"
	" \"exec_seconds\": 60, \"output_bytes\": 1048576, \"scratch_mb\": 512}}";

/* The mix: roughly what a browsing agent sends. */
static const char *const mix[] = {
	"{\"type\":\"screenshot\"}",
	"{\"type\":\"click\",\"x\":640,\"y\":400}",
	"{\"type\":\"click\",\"x\":12,\"y\":20}",
	"{\"type\":\"move\",\"x\":300,\"y\":500}",
	"{\"type\":\"scroll\",\"x\":640,\"y\":400,\"dy\":3}",
	"{\"type\":\"drag\",\"path\":[[100,100],[200,200],[300,300]]}",
	"{\"type\":\"type\",\"text\":\"deskgate policy benchmark: a short search query\"}",
	"{\"type\":\"type\",\"text\":\"-----BEGIN RSA PRIVATE KEY-----\"}",
	"{\"type\":\"key\",\"keys\":\"ctrl+l\"}",
	"{\"type\":\"key\",\"keys\":\"Return\"}",
	"{\"type\":\"key\",\"keys\":\"ctrl+alt+Delete\"}",
	"{\"type\":\"navigate\",\"url\":\"https://en.wikipedia.org/wiki/Main_Page\"}",
	"{\"type\":\"navigate\",\"url\":\"https://en.wikipedia.org/wiki/Special:Random\"}",
	"{\"type\":\"navigate\",\"url\":\"https://example.com/a/b/c?q=1\"}",
	"{\"type\":\"navigate\",\"url\":\"javascript:alert(1)\"}",
	"{\"type\":\"wait\",\"ms\":500}",
	"{\"type\":\"exec\",\"argv\":[\"ls\",\"-l\"]}",
	"{\"type\":\"cursor_position\"}",
};
#define N_MIX (sizeof(mix) / sizeof(mix[0]))

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 20000;
	if (rounds < 1)
		rounds = 1;
	struct dg_policy p;
	struct dg_err err = { { 0 } };
	if (dg_policy_parse(policy_text, strlen(policy_text), "<bench>", &p, &err) != 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	struct dg_action acts[N_MIX];
	for (size_t i = 0; i < N_MIX; i++) {
		if (dg_action_parse(mix[i], strlen(mix[i]), 1280, 800, &acts[i], &err) != 0) {
			fprintf(stderr, "%s: %s\n", mix[i], err.msg);
			return 1;
		}
	}
	struct dg_decide_ctx ctx = { .url = "https://en.wikipedia.org/wiki/Deskgate",
				     .screen_w = 1280, .screen_h = 800, .pointer_x = 640,
				     .pointer_y = 400, .actions_last_minute = 42,
				     .actions_total = 1234, .exec_total = 3 };
	struct dg_decision d;
	unsigned verdicts[3] = { 0, 0, 0 };

	/* Warm up, then decide. */
	for (size_t i = 0; i < N_MIX; i++)
		dg_policy_decide(&p, &acts[i], &ctx, &d);
	double t0 = now_ns();
	for (long r = 0; r < rounds; r++)
		for (size_t i = 0; i < N_MIX; i++) {
			dg_policy_decide(&p, &acts[i], &ctx, &d);
			verdicts[d.verdict]++;
		}
	double t1 = now_ns();
	double n_dec = (double)rounds * N_MIX;
	double ns_dec = (t1 - t0) / n_dec;

	/* Per kind, the slowest matters for the bound. */
	double worst = 0;
	size_t worst_i = 0;
	for (size_t i = 0; i < N_MIX; i++) {
		long k = rounds / 10 + 1;
		double a = now_ns();
		for (long r = 0; r < k; r++)
			dg_policy_decide(&p, &acts[i], &ctx, &d);
		double ns = (now_ns() - a) / (double)k;
		if (ns > worst) {
			worst = ns;
			worst_i = i;
		}
	}

	/* The reference: parsing the same actions. */
	long prounds = rounds / 4 + 1;
	double t2 = now_ns();
	for (long r = 0; r < prounds; r++)
		for (size_t i = 0; i < N_MIX; i++) {
			struct dg_action a;
			dg_action_parse(mix[i], strlen(mix[i]), 1280, 800, &a, &err);
			dg_action_free(&a);
		}
	double t3 = now_ns();
	double ns_parse = (t3 - t2) / ((double)prounds * N_MIX);

	printf("policy decisions: %.0f decisions/s, %.0f ns per decision (mix of %zu actions, "
	       "%ld rounds; allow %u, ask %u, deny %u)\n",
	       1e9 / ns_dec, ns_dec, N_MIX, rounds, verdicts[0], verdicts[1], verdicts[2]);
	printf("slowest action of the mix: %.0f ns: %s\n", worst, mix[worst_i]);
	printf("reference, dg_action_parse of the same actions: %.0f ns per action; "
	       "decision/parse = %.2f\n", ns_parse, ns_dec / ns_parse);
	printf("target: <= 2000 ns per decision: %s\n", worst <= 2000 ? "met" : "NOT met");
	for (size_t i = 0; i < N_MIX; i++)
		dg_action_free(&acts[i]);
	dg_policy_free(&p);
	return 0;
}
