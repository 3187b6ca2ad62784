/* fuzz_policy: the operator's policy file (policy/policy.h) and the
 * decisions of a policy that loaded.
 *
 * Input: the policy's JSON text, optionally followed by a NUL byte and
 * probe lines ('\n'-separated) that are decided under it:
 *   {...}         a canonical action (dg_action_parse, 1280x800), decided
 *                 with dg_policy_decide; the context's URL is the last URL
 *                 probe, the counters grow with each probe; an unresolved
 *                 one (a ref without x, y) must be refused: -EINVAL, deny,
 *                 rule "internal"
 *   http... / anything with "://"   a URL for dg_policy_decide_url
 *   host:port     dg_policy_decide_egress and dg_policy_egress_allows
 * Without probes a fixed set is decided, so every mutation of the policy
 * is exercised by some decisions. Checked: parse results, that every
 * decision names a verdict and a rule, that a copy decides the same way,
 * that the egress allowlist dumps, and no leak through copy and free. */
#include <errno.h>

#include "actions/actions.h"
#include "fuzz_common.h"
#include "policy/policy.h"

static const char *const default_probes[] = {
	"{\"type\":\"click\",\"x\":10,\"y\":20}",
	"{\"type\":\"click\",\"x\":1279,\"y\":799,\"button\":\"right\",\"modifiers\":[\"ctrl\"]}",
	"{\"type\":\"type\",\"text\":\"hello world\"}",
	"{\"type\":\"type\",\"text\":\"rm -rf / password=hunter2\"}",
	"{\"type\":\"key\",\"keys\":\"ctrl+alt+Delete\"}",
	"{\"type\":\"key\",\"keys\":\"ctrl+l Return\"}",
	"{\"type\":\"navigate\",\"url\":\"https://example.com/a/b?q=1\"}",
	"{\"type\":\"navigate\",\"url\":\"http://10.0.0.1:8080/admin\"}",
	"{\"type\":\"drag\",\"path\":[[0,0],[100,100],[200,50]]}",
	"{\"type\":\"scroll\",\"x\":500,\"y\":400,\"dy\":5}",
	"{\"type\":\"mouse_down\"}",
	"{\"type\":\"exec\",\"argv\":[\"python3\",\"-c\",\"print(1)\"]}",
	"{\"type\":\"zoom\",\"region\":[0,0,640,400]}",
	"{\"type\":\"wait\",\"ms\":100}",
	"{\"type\":\"javascript\",\"code\":\"document.title\"}",
	"{\"type\":\"javascript\",\"code\":\"document.title;\\nfetch('/x')\"}",
	"{\"type\":\"form_input\",\"ref\":\"ref_2\",\"x\":30,\"y\":30,\"value\":\"hunter2\"}",
	"{\"type\":\"form_input\",\"ref\":\"ref_2\",\"x\":30,\"y\":30,\"value\":12.5}",
	"{\"type\":\"file_upload\",\"ref\":\"ref_3\",\"x\":5,\"y\":5,\"paths\":[\"/tmp/a\"]}",
	"{\"type\":\"scroll_to\",\"ref\":\"ref_4\",\"x\":640,\"y\":20}",
	"{\"type\":\"click\",\"ref\":\"ref_5\"}",
	"https://example.com/",
	"https://en.wikipedia.org/wiki/Special:Random",
	"http://[2001:db8::1]:8080/x",
	"https://xn--bcher-kva.example/",
	"example.com:443",
	"api.example.com:443",
	"[::1]:80",
	"10.1.2.3:22",
	NULL,
};

static void check_decision(const struct dg_decision *d, const char *what)
{
	DG_FUZZ_CHECK(dg_verdict_name(d->verdict) != NULL, "%s: verdict %d", what, (int)d->verdict);
	DG_FUZZ_CHECK(memchr(d->rule, '\0', sizeof(d->rule)) && d->rule[0],
		      "%s: empty or unterminated rule", what);
	DG_FUZZ_CHECK(memchr(d->reason, '\0', sizeof(d->reason)) != NULL,
		      "%s: unterminated reason", what);
}

static bool same_decision(const struct dg_decision *a, const struct dg_decision *b)
{
	return a->verdict == b->verdict && strcmp(a->rule, b->rule) == 0;
}

struct probe_state {
	char url[DG_ACTION_URL_MAX + 1];
	bool has_url;
	uint64_t n;
};

static void probe(const struct dg_policy *p, const struct dg_policy *copy, const char *line,
		  size_t len, struct probe_state *st)
{
	struct dg_decision d, d2;
	st->n++;
	if (len > 0 && line[0] == '{') {
		struct dg_action a;
		struct dg_err err = {{0}};
		if (dg_action_parse(line, len, 1280, 800, &a, &err) != 0)
			return;
		struct dg_decide_ctx ctx = {
			.url = st->has_url ? st->url : NULL,
			.screen_w = 1280,
			.screen_h = 800,
			.pointer_x = (int)(st->n * 37 % 1280),
			.pointer_y = (int)(st->n * 53 % 800),
			.actions_last_minute = st->n * 3,
			.actions_total = st->n * 11,
			.exec_total = st->n,
		};
		int r = dg_policy_decide(p, &a, &ctx, &d);
		if (dg_action_unresolved(&a))
			DG_FUZZ_CHECK(r == -EINVAL && d.verdict == DG_VERDICT_DENY &&
					      strcmp(d.rule, "internal") == 0,
				      "an unresolved action: %d, %s by %s", r,
				      dg_verdict_name(d.verdict), d.rule);
		else
			DG_FUZZ_CHECK(r == 0, "dg_policy_decide: %d", r);
		check_decision(&d, "action");
		int r2 = dg_policy_decide(copy, &a, &ctx, &d2);
		DG_FUZZ_CHECK(r2 == r && same_decision(&d, &d2), "a copy decides differently");
		dg_action_free(&a);
		return;
	}
	char *s = malloc(len + 1);
	DG_FUZZ_CHECK(s, "out of memory");
	memcpy(s, line, len);
	s[len] = '\0';
	if (strstr(s, "://")) {
		int r = dg_policy_decide_url(p, s, &d);
		DG_FUZZ_CHECK(r == 0, "dg_policy_decide_url: %d", r);
		check_decision(&d, "url");
		r = dg_policy_decide_url(copy, s, &d2);
		DG_FUZZ_CHECK(r == 0 && same_decision(&d, &d2), "a copy decides a URL differently");
		if (len <= DG_ACTION_URL_MAX) {
			memcpy(st->url, s, len + 1);
			st->has_url = true;
		}
	} else {
		/* host:port, split at the last colon (IPv6 hosts keep theirs). */
		char *colon = strrchr(s, ':');
		unsigned long port = 0;
		if (colon) {
			*colon = '\0';
			port = strtoul(colon + 1, NULL, 10);
		}
		uint16_t p16 = (uint16_t)port;
		int r = dg_policy_decide_egress(p, s, p16, &d);
		DG_FUZZ_CHECK(r == 0, "dg_policy_decide_egress: %d", r);
		check_decision(&d, "egress");
		bool allows = dg_policy_egress_allows(p, s, p16);
		DG_FUZZ_CHECK(allows == (d.verdict == DG_VERDICT_ALLOW),
			      "egress_allows %d but decide_egress says %s (%s:%u)", allows,
			      dg_verdict_name(d.verdict), s, p16);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t text_len = nul ? (size_t)(nul - data) : size;
	char *text = dg_fuzz_dup(data, text_len);

	struct dg_policy p;
	struct dg_err err = {{0}};
	int r = dg_policy_parse(text, text_len, "fuzz.json", &p, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG || r == -ENOMEM,
		      "dg_policy_parse: %d", r);
	free(text);
	if (r != 0) {
		DG_FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
		return 0;
	}

	struct dg_policy copy;
	dg_policy_copy(&copy, &p);
	json_t *egress = dg_policy_egress_json(&p);
	DG_FUZZ_CHECK(json_is_array(egress), "dg_policy_egress_json is not an array");
	json_decref(egress);

	struct probe_state *st = calloc(1, sizeof(*st));
	DG_FUZZ_CHECK(st, "out of memory");
	if (nul) {
		const char *s = (const char *)nul + 1, *end = (const char *)data + size;
		while (s < end) {
			const char *nl = memchr(s, '\n', (size_t)(end - s));
			size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
			/* An exact-size copy of the line, for ASan. */
			char *line = dg_fuzz_dup((const uint8_t *)s, n);
			probe(&p, &copy, line, n, st);
			free(line);
			s += n + 1;
		}
	} else {
		for (int i = 0; default_probes[i]; i++)
			probe(&p, &copy, default_probes[i], strlen(default_probes[i]), st);
	}
	free(st);

	/* The copy outlives the original. */
	dg_policy_free(&p);
	struct dg_decision d;
	dg_policy_decide_url(&copy, "https://example.com/", &d);
	check_decision(&d, "url after free");
	dg_policy_free(&copy);
	dg_policy_free(&copy); /* documented as safe */
	return 0;
}
