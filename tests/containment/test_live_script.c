/* `deskgate test --live`: a script run on a real browser desktop under a
 * policy, with a loopback site reached through the egress proxy. The
 * verdicts, the page's URL and title after each step are checked, and a
 * wrong expectation fails the run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_test.h"

static struct dg_site site;

static void handle(struct dg_site *s, int fd, const char *path)
{
	(void)s;
	if (strcmp(path, "/") == 0)
		dg_site_reply(fd, "200 OK", "text/html", "", "<!doctype html><title>live home</title>home");
	else if (strcmp(path, "/buttons") == 0)
		dg_site_reply(fd, "200 OK", "text/html", "",
			      "<!doctype html><title>buttons</title><body style=margin:0>"
			      "<button onclick=\"document.title='clicked'\">Go</button>"
			      "<button style=\"position:absolute;left:20px;top:600px\" "
			      "onclick=\"document.title='bought'\">Buy</button>");
	else if (strcmp(path, "/second") == 0)
		dg_site_reply(fd, "200 OK", "text/html", "", "<!doctype html><title>second</title>2");
	else
		dg_site_reply(fd, "404 Not Found", "text/plain", "", "no");
}

static char *policy_path, *script_ok, *script_bad, *script_refs;

static void setup(void)
{
	dg_site_start(&site, handle);
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"version\": 1, \"default\": \"deny\",\n"
		 " \"actions\": {\"allow\": [\"navigate\", \"screenshot\", \"click\", \"wait\", \"read_page\"], \"ask\": [\"exec\"]},\n"
		 " \"urls\": {\"allow\": [\"http://localhost:%d/**\"]},\n"
		 " \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"verdict\": \"deny\"},\n"
		 "   {\"name\": \"shop\", \"rect\": [0, 600, 1280, 200], \"verdict\": \"deny\"}],\n"
		 " \"egress\": {\"allow\": [\"localhost:%d\"]}}\n", site.port, site.port);
	policy_path = dg_test_write_tmp("live-policy.json", text);
	snprintf(text, sizeof(text),
		 "{\"name\": \"home\", \"action\": {\"type\": \"navigate\", \"url\": \"http://localhost:%d/\"}, \"expect\": \"allow\", \"expect_title\": \"live home\", \"expect_url\": \"http://localhost:%d/\"}\n"
		 "{\"name\": \"second\", \"action\": {\"type\": \"navigate\", \"url\": \"http://localhost:%d/second\"}, \"expect\": \"allow\", \"rule\": \"urls.allow[0]\", \"expect_title\": \"second\"}\n"
		 "{\"name\": \"elsewhere\", \"action\": {\"type\": \"navigate\", \"url\": \"https://example.com/\"}, \"expect\": \"deny\", \"rule\": \"default\", \"expect_title\": \"second\"}\n"
		 "{\"name\": \"top bar\", \"action\": {\"type\": \"click\", \"x\": 10, \"y\": 5}, \"expect\": \"deny\", \"rule\": \"regions[top-bar]\"}\n"
		 "{\"name\": \"page\", \"action\": {\"type\": \"click\", \"x\": 600, \"y\": 400}, \"expect\": \"allow\"}\n"
		 "{\"name\": \"exec\", \"action\": {\"type\": \"exec\", \"argv\": [\"true\"]}, \"expect\": \"ask\"}\n",
		 site.port, site.port, site.port);
	script_ok = dg_test_write_tmp("live-ok.jsonl", text);
	snprintf(text, sizeof(text),
		 "{\"action\": {\"type\": \"navigate\", \"url\": \"http://localhost:%d/\"}, \"expect\": \"allow\", \"expect_title\": \"not this\"}\n",
		 site.port);
	script_bad = dg_test_write_tmp("live-bad.jsonl", text);
	/* Clicks on element references: resolved live to the element's point
	 * (the Buy button sits inside the "shop" region once the browser's
	 * bars are above the page), and a reference the page never gave. */
	snprintf(text, sizeof(text),
		 "{\"name\": \"buttons\", \"action\": {\"type\": \"navigate\", \"url\": \"http://localhost:%d/buttons\"}, \"expect\": \"allow\"}\n"
		 "{\"name\": \"read\", \"action\": {\"type\": \"read_page\"}, \"expect\": \"allow\"}\n"
		 "{\"name\": \"go\", \"action\": {\"type\": \"click\", \"ref\": \"ref_1\"}, \"expect\": \"allow\", \"expect_title\": \"clicked\"}\n"
		 "{\"name\": \"buy\", \"action\": {\"type\": \"click\", \"ref\": \"ref_2\"}, \"expect\": \"deny\", \"rule\": \"regions[shop]\", \"expect_title\": \"clicked\"}\n"
		 "{\"name\": \"unknown\", \"action\": {\"type\": \"click\", \"ref\": \"ref_9\"}, \"expect\": \"allow\"}\n",
		 site.port);
	script_refs = dg_test_write_tmp("live-refs.jsonl", text);
}

static void teardown(void)
{
	dg_site_stop(&site);
	dg_test_rm_tmp(policy_path);
	dg_test_rm_tmp(script_ok);
	dg_test_rm_tmp(script_bad);
	dg_test_rm_tmp(script_refs);
}

TestSuite(live_script, .init = setup, .fini = teardown, .timeout = 240);

static void run(const char *script, struct dg_run *r)
{
	char resolve[96];
	snprintf(resolve, sizeof(resolve), "localhost:%d=127.0.0.1:%d", site.port, site.port);
	const char *argv[] = {DG_BIN, "test", "--live", "--test-resolve", resolve, "--policy",
			      policy_path, script, NULL};
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 180, -1, r), 0);
}

Test(live_script, steps_pass_on_a_real_desktop)
{
	struct dg_run r;
	run(script_ok, &r);
	cr_assert_eq(r.exit_code, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r.exit_code, r.out, r.err);
	cr_assert(strstr(r.out, "6 passed, 0 failed"), "%s", r.out);
	cr_assert(dg_site_saw(&site, "GET /second "), "the page was not loaded through the proxy");
	dg_run_free(&r);
}

Test(live_script, element_references_are_resolved_live)
{
	struct dg_run r;
	run(script_refs, &r);
	cr_assert_eq(r.exit_code, 1, "exit %d\n%s\n%s", r.exit_code, r.out, r.err);
	cr_assert(strstr(r.out, "4 passed, 1 failed"), "%s", r.out);
	cr_assert(strstr(r.out, "ref_9 is unknown or stale"), "%s", r.out);
	dg_run_free(&r);
}

Test(live_script, a_wrong_title_fails_the_run)
{
	struct dg_run r;
	run(script_bad, &r);
	cr_assert_eq(r.exit_code, 1, "exit %d\n%s\n%s", r.exit_code, r.out, r.err);
	cr_assert(strstr(r.out, "0 passed, 1 failed"), "%s", r.out);
	cr_assert(strstr(r.out, "not this"), "%s", r.out);
	dg_run_free(&r);
}

/* The shipped region script declares "pointer" and "url" for some steps:
 * live, the pointer is moved and the page opened there first, so the
 * script means the same as offline (it passed offline and failed 2 of 14
 * steps live). */
Test(live_script, declared_pointer_and_url_mean_the_same_live)
{
	const char *policy = DG_SOURCE_DIR "/tests/scripts/regions.json";
	const char *script = DG_SOURCE_DIR "/tests/scripts/regions.jsonl";
	struct dg_run off, live;
	cr_assert_eq(dg_test_run((const char *const[]){DG_BIN, "test", "--policy", policy, script,
						       NULL},
				 NULL, NULL, 0, 60, -1, &off),
		     0);
	cr_assert_eq(off.exit_code, 0, "offline:\n%s%s", off.out, off.err);
	cr_assert(strstr(off.out, "14 passed, 0 failed"), "offline:\n%s", off.out);
	cr_assert_eq(dg_test_run((const char *const[]){DG_BIN, "test", "--live", "--policy", policy,
						       script, NULL},
				 NULL, NULL, 0, 180, -1, &live),
		     0);
	cr_assert_eq(live.exit_code, 0, "live:\n%s%s", live.out, live.err);
	cr_assert_str_eq(live.out, off.out, "the same verdicts, rules and lines live as offline");
	dg_run_free(&off);
	dg_run_free(&live);
}
