/* Code run by exec shares the jail, not the desktop: it cannot drive the X
 * server (xdotool, the path socket, the abstract socket), reach the
 * browser's profile and singleton socket, or signal and inspect the
 * desktop's processes — unless the policy says limits.exec_desktop, which
 * the same test shows opening exactly those doors. And the jail's PID 1
 * names nothing of the host (its command line was the gateway's `serve`
 * invocation, or `deskgate exec --policy PATH`).
 *
 * Real gateways, real browser and xterm desktops, the exec action over the
 * agent WebSocket.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dg_test.h"

#define T_CREATE 90.0
#define T_ACT 60.0

/* Inside the jail: each door tried, one "name: ok|refused (why)" line each.
 * Python is the host's /usr, bound read-only into every jail. */
static const char probe_py[] =
	"import os, socket, glob, signal\n"
	"def t(name, f):\n"
	"    try:\n"
	"        f(); print(name + ': ok')\n"
	"    except Exception as e:\n"
	"        print(name + ': refused (' + type(e).__name__ + ': ' + str(e) + ')')\n"
	"def conn(addr):\n"
	"    s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(addr); s.close()\n"
	"def pid_of(name):\n"
	"    for p in os.listdir('/proc'):\n"
	"        if p.isdigit():\n"
	"            try:\n"
	"                if open('/proc/%s/comm' % p).read().strip() == name: return int(p)\n"
	"            except OSError: pass\n"
	"    raise LookupError(name + ' not found')\n"
	"t('x-path', lambda: conn('/tmp/.X11-unix/X0'))\n"
	"t('x-abstract', lambda: conn('\\0/tmp/.X11-unix/X0'))\n"
	"t('browser-profile', lambda: os.listdir(os.path.expanduser('~/.chromium')))\n"
	"def singleton():\n"
	"    dirs = glob.glob('/tmp/org.chromium.*') + glob.glob('/tmp/.org.chromium.*')\n"
	"    if not dirs: raise LookupError('no singleton directory in /tmp')\n"
	"    conn(dirs[0] + '/SingletonSocket')\n"
	"t('browser-singleton', singleton)\n"
	"t('signal-xvnc', lambda: os.kill(pid_of('Xvnc'), 0))\n"
	"t('browser-cache', lambda: os.listdir(os.path.expanduser('~/.cache/chromium')))\n"
	"t('fd-xvnc', lambda: os.readlink('/proc/%d/fd/0' % pid_of('Xvnc')))\n"
	"t('environ-xvnc', lambda: open('/proc/%d/environ' % pid_of('Xvnc')).read())\n"
	"print('init: ' + open('/proc/1/cmdline', 'rb').read().rstrip(b'\\0').decode('ascii', 'replace'))\n";

struct gw {
	struct dg_server srv;
	char session[64];
	struct dg_ws *ws;
};

/* The gateway of the running test, stopped by the suite's fini even when
 * an assertion ended the test early. */
static struct gw *running;

static void fini(void)
{
	if (running && running->srv.pid > 0)
		dg_test_serve_stop(&running->srv, 30, false);
	running = NULL;
}

TestSuite(exec_desktop, .fini = fini);

static char *policy_file(bool exec_desktop)
{
	char text[256];
	snprintf(text, sizeof(text), "{\"version\": 1, \"limits\": {\"exec_desktop\": %s}}\n",
		 exec_desktop ? "true" : "false");
	return dg_test_write_tmp("policy.json", text);
}

static void start(struct gw *g, const char *profile, const char *policy)
{
	char extra[512], err[2048];
	snprintf(extra, sizeof(extra), "\"policy\": \"%s\"", policy);
	cr_assert_eq(dg_test_serve_start(&g->srv, extra, 30, err, sizeof(err)), 0, "%s", err);
	running = g;
	char body[64];
	snprintf(body, sizeof(body), "{\"profile\":\"%s\"}", profile);
	struct dg_http r;
	cr_assert_eq(dg_test_http(g->srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, body,
				  T_CREATE, &r),
		     0);
	cr_assert_eq(r.status, 201, "create: %d %s", r.status, r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	snprintf(g->session, sizeof(g->session), "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	dg_http_free(&r);
	char path[128];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", g->session);
	int status;
	g->ws = dg_ws_connect(g->srv.port, path, DG_TEST_AGENT_TOKEN, NULL, 30, &status, err,
			      sizeof(err));
	cr_assert(g->ws, "connect: %d %s", status, err);
}

static void stop(struct gw *g)
{
	dg_ws_close(g->ws);
	int st = dg_test_serve_stop(&g->srv, 30, false);
	running = NULL;
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve status %d", st);
}

/* Runs argv (a JSON array) by exec; returns the exec's stdout (malloc'd)
 * and its exit code. */
static char *exec_in(struct gw *g, const char *argv_json, int *exit_code)
{
	char msg[8192];
	snprintf(msg, sizeof(msg), "{\"type\":\"exec\",\"argv\":%s,\"timeout_ms\":20000}", argv_json);
	cr_assert_eq(dg_ws_send_text(g->ws, msg), 0);
	for (;;) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(g->ws, T_ACT, &m), 1, "no answer to exec");
		if (m.binary) {
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		const char *type = json_string_value(json_object_get(j, "type"));
		if (!type || strcmp(type, "result") != 0) {
			json_decref(j);
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *ex = json_object_get(j, "exec");
		cr_assert(json_is_object(ex), "no exec result: %.500s", m.data);
		*exit_code = (int)json_integer_value(json_object_get(ex, "exit_code"));
		char *out = strdup(json_string_value(json_object_get(ex, "stdout")) ?: "");
		fprintf(stderr, "exec %s -> %d\n%s%s\n", argv_json, *exit_code, out,
			json_string_value(json_object_get(ex, "stderr")) ?: "");
		json_decref(j);
		dg_ws_msg_free(&m);
		return out;
	}
}

static char *probe(struct gw *g)
{
	json_t *argv = json_pack("[s, s, s]", "python3", "-c", probe_py);
	char *text = json_dumps(argv, JSON_COMPACT);
	json_decref(argv);
	int code;
	char *out = exec_in(g, text, &code);
	free(text);
	cr_assert_eq(code, 0, "the probe itself failed:\n%s", out);
	return out;
}

static void assert_line(const char *out, const char *name, bool ok)
{
	char want[64];
	snprintf(want, sizeof(want), "%s: %s", name, ok ? "ok" : "refused");
	cr_assert(strstr(out, want), "want \"%s\" in:\n%s", want, out);
}

static void assert_init_clean(const char *out)
{
	cr_assert(strstr(out, "init: deskgate-init\n"), "/proc/1/cmdline:\n%s", out);
}

Test(exec_desktop, a_browser_desktop_is_out_of_execs_reach, .timeout = 300)
{
	char *policy = policy_file(false);
	static struct gw g; /* static: the suite's fini reaches it after a failed assertion */
	start(&g, "browser", policy);
	char *out = probe(&g);
	assert_line(out, "x-path", false);
	assert_line(out, "x-abstract", false);
	assert_line(out, "browser-profile", false);
	assert_line(out, "browser-singleton", false);
	assert_line(out, "browser-cache", false);
	assert_line(out, "signal-xvnc", false);
	assert_line(out, "fd-xvnc", false);
	assert_line(out, "environ-xvnc", false);
	assert_init_clean(out);
	free(out);
	int code;
	out = exec_in(&g, "[\"env\",\"DISPLAY=:0\",\"xdotool\",\"type\",\"hello\"]", &code);
	cr_assert_neq(code, 0, "xdotool typed into the desktop from exec");
	free(out);
	/* The desktop itself goes on drawing the browser. */
	out = exec_in(&g, "[\"true\"]", &code);
	cr_assert_eq(code, 0);
	free(out);
	stop(&g);
	dg_test_rm_tmp(policy);
	char what[2048];
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "%s", what);
}

/* The explicit opt-in opens the desktop (and so shows the probe can tell). */
Test(exec_desktop, exec_desktop_true_opens_it, .timeout = 300)
{
	char *policy = policy_file(true);
	static struct gw g; /* static: the suite's fini reaches it after a failed assertion */
	start(&g, "browser", policy);
	char *out = probe(&g);
	assert_line(out, "x-path", true);
	assert_line(out, "browser-profile", true);
	assert_line(out, "browser-singleton", true);
	assert_line(out, "signal-xvnc", true);
	assert_line(out, "x-abstract", false); /* Xvnc does not listen there at all */
	assert_init_clean(out);
	free(out);
	int code;
	out = exec_in(&g, "[\"env\",\"DISPLAY=:0\",\"xdotool\",\"getmouselocation\"]", &code);
	cr_assert_eq(code, 0, "xdotool with exec_desktop: %s", out);
	free(out);
	stop(&g);
	dg_test_rm_tmp(policy);
}

Test(exec_desktop, xterm_desktop_too, .timeout = 300)
{
	char *policy = policy_file(false);
	static struct gw g; /* static: the suite's fini reaches it after a failed assertion */
	start(&g, "xterm", policy);
	char *out = probe(&g);
	assert_line(out, "x-path", false);
	assert_line(out, "x-abstract", false);
	assert_line(out, "signal-xvnc", false);
	assert_init_clean(out);
	free(out);
	stop(&g);
	dg_test_rm_tmp(policy);
}

/* `deskgate exec --policy PATH`: PID 1 of its jail was a copy of that
 * command line, policy path included. */
Test(exec_desktop, deskgate_exec_init_names_no_host_path, .timeout = 120)
{
	char *policy = policy_file(false);
	struct dg_run r;
	cr_assert_eq(dg_test_exec(policy,
				  (const char *const[]){"/bin/sh", "-c",
							"tr '\\0' ' ' < /proc/1/cmdline; echo; "
							"cat /proc/1/comm",
							NULL},
				  &r),
		     0);
	cr_assert_eq(r.exit_code, 0, "%s", r.err);
	cr_assert_null(strstr(r.out, "/"), "a path in /proc/1/cmdline: %s", r.out);
	cr_assert_null(strstr(r.out, "policy"), "%s", r.out);
	cr_assert(strncmp(r.out, "deskgate-init", 13) == 0, "%s", r.out);
	cr_assert(strstr(r.out, "\ndeskgate-init\n"), "comm: %s", r.out);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
}
