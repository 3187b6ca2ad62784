/* `deskgate serve` fails fast on directories its dropped uid cannot use,
 * and a server-side failure is answered as one (500 "internal"), never as
 * the client's mistake.
 *
 * The gateway starts as root and drops to its instance's uid; recordings are
 * written by that uid. A recordings directory below a directory only root
 * may enter was accepted at start and failed the first session with
 * "500 bad_request".
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "dg_test.h"

#define GATEWAY_UID dg_instance_gateway_uid() /* the test's instance is the gateway's */

/* A temp dir the test owns: mode 0700, so only root may enter it. */
static char *private_dir(void)
{
	char *dir = strdup("/tmp/dg-private-XXXXXX");
	cr_assert(dir && mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	cr_assert_eq(chmod(dir, 0700), 0);
	return dir;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(path);
}

static void rm_dir(char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert(f, "%s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
}

/* Runs serve with a config naming recordings (and state_dir); it must exit
 * at once (not serve) with 125 and a message naming path and uid. */
static void assert_refused(const char *key, const char *dir, const char *path)
{
	char cfg[512], text[1024];
	snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
	int port = dg_test_free_port();
	snprintf(text, sizeof(text),
		 "{\"listen\": \"127.0.0.1:%d\", \"state_dir\": \"%s\", \"recordings\": \"%s\"}", port,
		 strcmp(key, "state_dir") == 0 ? path : "/tmp/dg-unused-state",
		 strcmp(key, "recordings") == 0 ? path : "/tmp/dg-unused-rec");
	write_file(cfg, text);
	struct dg_run r;
	const char *env[] = {"DESKGATE_AGENT_TOKEN=" DG_TEST_AGENT_TOKEN, "PATH=/usr/bin:/bin", NULL};
	cr_assert_eq(dg_test_run((const char *const[]){DG_BIN, "serve", "--config", cfg, NULL}, env,
				 NULL, 0, 30, -1, &r),
		     0);
	cr_assert_eq(r.exit_code, 125, "serve must refuse to start (exit 125, deskgate failed; got "
		     "%d): %s%s", r.exit_code, r.out, r.err);
	cr_assert_null(strstr(r.out, "serving on"), "it opened its port: %s", r.out);
	char want[600];
	snprintf(want, sizeof(want), "%s %s: the gateway, which drops to uid %u, cannot", key, path,
		 GATEWAY_UID);
	cr_assert(strstr(r.err, want), "want \"%s\" in: %s", want, r.err);
	cr_assert(strstr(r.err, "Permission denied"), "%s", r.err);
	dg_run_free(&r);
	/* It refused before opening the port: nothing listens there. */
	cr_assert_lt(dg_test_tcp_connect(port), 0, "port %d is open", port);
}

Test(serve_start, recordings_below_a_private_dir_refused, .timeout = 60)
{
	char *dir = private_dir();
	char rec[512];
	snprintf(rec, sizeof(rec), "%s/rec", dir);
	assert_refused("recordings", dir, rec);
	rm_dir(dir);
}

Test(serve_start, state_dir_below_a_private_dir_refused, .timeout = 60)
{
	char *dir = private_dir();
	char state[512];
	snprintf(state, sizeof(state), "%s/state", dir);
	assert_refused("state_dir", dir, state);
	rm_dir(dir);
}

/* A named policy the dropped gateway could not read at a session's
 * creation (it reads them there) is refused at start. */
Test(serve_start, unreadable_named_policy_refused, .timeout = 60)
{
	char *dir = private_dir();
	char pol[512], cfg[512], text[1200];
	snprintf(pol, sizeof(pol), "%s/strict.json", dir);
	write_file(pol, "{\"version\": 1, \"default\": \"deny\"}\n");
	snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
	int port = dg_test_free_port();
	snprintf(text, sizeof(text),
		 "{\"listen\": \"127.0.0.1:%d\", \"state_dir\": \"/tmp/dg-unused-state\", "
		 "\"recordings\": \"/tmp/dg-unused-rec\", \"policies\": {\"strict\": \"%s\"}}",
		 port, pol);
	write_file(cfg, text);
	struct dg_run r;
	const char *env[] = {"DESKGATE_AGENT_TOKEN=" DG_TEST_AGENT_TOKEN, "PATH=/usr/bin:/bin", NULL};
	cr_assert_eq(dg_test_run((const char *const[]){DG_BIN, "serve", "--config", cfg, NULL}, env,
				 NULL, 0, 30, -1, &r),
		     0);
	cr_assert_eq(r.exit_code, 125, "exit %d: %s%s", r.exit_code, r.out, r.err);
	char want[700];
	snprintf(want, sizeof(want), "policies.strict %s: the gateway, which drops to uid %u, "
		 "cannot read it", pol, GATEWAY_UID);
	cr_assert(strstr(r.err, want), "want \"%s\" in: %s", want, r.err);
	cr_assert_lt(dg_test_tcp_connect(port), 0, "port %d is open", port);
	dg_run_free(&r);
	rm_dir(dir);
}

static struct dg_server srv;

static void fini(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
}

TestSuite(serve_start, .fini = fini);

/* A failure of the gateway's own (its recordings directory taken away at
 * run time) is 500 with code "internal", and the gateway goes on. */
Test(serve_start, server_failure_is_internal, .timeout = 120)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_start(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
	char rec[256];
	snprintf(rec, sizeof(rec), "%s/rec", srv.dir);
	cr_assert_eq(chown(rec, 0, 0), 0, "%s: %s", rec, strerror(errno));
	cr_assert_eq(chmod(rec, 0755), 0);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"xterm\"}", 60, &r),
		     0);
	cr_assert_eq(r.status, 500, "%d %s", r.status, r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	cr_assert(j, "%s", r.body);
	const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
	if (!code)
		code = json_string_value(json_object_get(j, "code"));
	cr_assert_str_eq(code ? code : "", "internal", "%s", r.body);
	json_decref(j);
	dg_http_free(&r);
	/* A client mistake stays one. */
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"emacs\"}", 30, &r),
		     0);
	cr_assert_eq(r.status, 400, "%d %s", r.status, r.body);
	cr_assert(strstr(r.body, "bad_request"), "%s", r.body);
	dg_http_free(&r);
	cr_assert_eq(chown(rec, dg_test_serve_uid(&srv), dg_test_serve_uid(&srv)), 0);
	cr_assert_eq(dg_test_http(srv.port, "GET", "/healthz", NULL, NULL, 10, &r), 0);
	cr_assert_eq(r.status, 200, "the gateway went on: %d", r.status);
	dg_http_free(&r);
	int st = dg_test_serve_stop(&srv, 30, false);
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
	char what[2048];
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "%s", what);
}
