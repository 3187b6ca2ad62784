/* Keys as the agent means them (issue 16, point 1): a chord with Shift
 * types the shifted character ("shift+a" is "A", "shift+1" is "!"), typed
 * capitals and symbols go through Shift, and no action leaves a lock key
 * (Caps Lock, Num Lock) or a modifier changed on the X server.
 *
 * Real gateways, real browser and xterm desktops, the agent WebSocket. What
 * arrived is read where it arrived: in the browser, a page that logs every
 * keydown (its modifiers, and Caps Lock from getModifierState) into its
 * title; in xterm, what `cat` wrote to a file from the terminal. The X
 * server's lock and modifier state is read after every key action by a
 * tiny X client run by exec (the policy's limits.exec_desktop lets exec
 * reach the desktop): python3's ctypes calling libX11's XQueryPointer, whose
 * mask holds the modifiers in effect, locked ones included (LockMask for
 * Caps Lock, Mod2Mask for Num Lock on the default keymap).
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
/* Polls of the page's title (or the xterm's file) before giving up, and
 * the pause between them: a bound on a condition, not a sleep. */
#define POLLS 80
#define POLL_US 50000

/* X modifier masks (X.h). */
#define SHIFT_MASK 1u
#define LOCK_MASK 2u
#define CONTROL_MASK 4u
#define MOD1_MASK 8u
#define MOD2_MASK 16u
#define MOD4_MASK 64u

/* The X client: prints the pointer's modifier mask, a decimal number. */
static const char mask_py[] =
	"import ctypes as c\n"
	"x = c.CDLL('libX11.so.6')\n"
	"x.XOpenDisplay.restype = c.c_void_p\n"
	"x.XOpenDisplay.argtypes = [c.c_char_p]\n"
	"x.XDefaultRootWindow.restype = c.c_ulong\n"
	"x.XDefaultRootWindow.argtypes = [c.c_void_p]\n"
	"d = x.XOpenDisplay(b':0')\n"
	"assert d, 'cannot open the display :0'\n"
	"w = c.c_ulong(); i = c.c_int(); m = c.c_uint()\n"
	"x.XQueryPointer.argtypes = [c.c_void_p, c.c_ulong] + [c.c_void_p] * 7\n"
	"assert x.XQueryPointer(d, x.XDefaultRootWindow(d), c.byref(w), c.byref(w), c.byref(i),\n"
	"                       c.byref(i), c.byref(i), c.byref(i), c.byref(m))\n"
	"print(m.value)\n";

/* The test page: a textarea over the whole page; every keydown is logged
 * as its modifiers (C- ctrl, S- shift, A- alt, M- meta), its key and
 * "!CAPS" when Caps Lock was on; a keyup with Caps Lock on is logged as
 * "up!CAPS". The title is "log:" the entries "|" the textarea's text.
 * Escape clears both (keeping "was!CAPS" when Caps Lock was on). */
static const char page[] =
	"data:text/html,<!doctype html><title>ready</title>"
	"<textarea id=t autofocus style='position:fixed;left:0;top:0;width:100%;height:100%;"
	"margin:0;border:0'></textarea><script>"
	"var L=[],t=document.getElementById('t');"
	"function M(e){return(e.ctrlKey?'C-':'')+(e.shiftKey?'S-':'')+(e.altKey?'A-':'')+"
	"(e.metaKey?'M-':'')}"
	"function C(e){return e.getModifierState('CapsLock')?'!CAPS':''}"
	"function T(){document.title='log:'+L.join(' ')+'|'+t.value}"
	"addEventListener('keydown',e=>{if(e.key=='Escape'){L=C(e)?['was!CAPS']:[];t.value='';"
	"T();return}L.push(M(e)+e.key+C(e));T()},true);"
	"addEventListener('keyup',e=>{if(C(e)){L.push('up!CAPS');T()}},true);"
	"t.addEventListener('input',T);"
	"</script>";

struct gw {
	struct dg_server srv;
	char session[64];
	struct dg_ws *ws;
	unsigned base_mask; /* the X server's modifier mask before any key */
};

static struct gw *running;

static void fini(void)
{
	if (running && running->srv.pid > 0)
		dg_test_serve_stop(&running->srv, 30, false);
	running = NULL;
}

TestSuite(keys, .fini = fini);

static char *policy_file(void)
{
	return dg_test_write_tmp("policy.json",
				 "{\"version\": 1, \"limits\": {\"exec_desktop\": true}}\n");
}

/* The next text message that answers an action: skips the hello, events
 * and screenshots (binary). */
static json_t *answer(struct gw *g)
{
	for (;;) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(g->ws, T_ACT, &m), 1, "no answer");
		if (m.binary) {
			dg_ws_msg_free(&m);
			continue;
		}
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		cr_assert(j, "not JSON: %.200s", m.data);
		dg_ws_msg_free(&m);
		const char *type = json_string_value(json_object_get(j, "type"));
		if (type && (strcmp(type, "event") == 0 || strcmp(type, "hello") == 0)) {
			json_decref(j);
			continue;
		}
		return j;
	}
}

/* A canonical action that must succeed; its result. */
static json_t *act(struct gw *g, const char *action)
{
	cr_assert_eq(dg_ws_send_text(g->ws, action), 0, "send: the connection closed");
	json_t *j = answer(g);
	cr_assert_str_eq(json_string_value(json_object_get(j, "type")) ?: "", "result", "%s",
			 action);
	cr_assert(json_is_true(json_object_get(j, "ok")), "%s failed: %s", action,
		  json_string_value(json_object_get(j, "error")));
	return j;
}

static void act0(struct gw *g, const char *action)
{
	json_decref(act(g, action));
}

/* OpenAI's keypress as the SDK sends it: a computer_call item; its answer
 * is the array of items for the next request. */
static void openai_keypress(struct gw *g, const char *keys_json)
{
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "{\"type\":\"computer_call\",\"id\":\"cu_1\",\"call_id\":\"call_1\","
		 "\"action\":{\"type\":\"keypress\",\"keys\":%s},\"pending_safety_checks\":[],"
		 "\"status\":\"completed\"}",
		 keys_json);
	cr_assert_eq(dg_ws_send_text(g->ws, msg), 0);
	json_t *j = answer(g);
	char *dump = json_dumps(j, JSON_COMPACT);
	cr_assert(json_is_array(j), "OpenAI answer: %.500s", dump);
	const char *type = json_string_value(json_object_get(json_array_get(j, 0), "type"));
	cr_assert_str_eq(type ?: "", "computer_call_output", "%.500s", dump);
	/* A refusal or failure would be said in a message item after the
	 * output; in the browser that message also carries the page's
	 * address, and then says nothing else. */
	if (json_array_size(j) > 1) {
		json_t *content = json_object_get(json_array_get(j, 1), "content");
		const char *text =
			json_string_value(json_object_get(json_array_get(content, 0), "text"));
		cr_assert(json_array_size(j) == 2 && text && strncmp(text, "current_url: ", 13) == 0 &&
				  !strchr(text, '\n'),
			  "keypress %s was not performed: %.500s", keys_json, dump);
	}
	free(dump);
	json_decref(j);
}

/* Runs argv (a JSON array) by exec; its stdout (malloc'd), exit code 0
 * required. */
static char *exec_ok(struct gw *g, const char *argv_json)
{
	char msg[8192];
	snprintf(msg, sizeof(msg), "{\"type\":\"exec\",\"argv\":%s,\"timeout_ms\":20000}",
		 argv_json);
	json_t *j = act(g, msg);
	json_t *ex = json_object_get(j, "exec");
	cr_assert(json_is_object(ex), "no exec result");
	int code = (int)json_integer_value(json_object_get(ex, "exit_code"));
	cr_assert_eq(code, 0, "exec %.200s: exit %d: %s", argv_json, code,
		     json_string_value(json_object_get(ex, "stderr")) ?: "");
	char *out = strdup(json_string_value(json_object_get(ex, "stdout")) ?: "");
	json_decref(j);
	return out;
}

static unsigned x_mask(struct gw *g)
{
	json_t *argv = json_pack("[s, s, s, s, s]", "env", "DISPLAY=:0", "python3", "-c", mask_py);
	char *text = json_dumps(argv, JSON_COMPACT);
	json_decref(argv);
	char *out = exec_ok(g, text);
	free(text);
	char *end;
	unsigned long v = strtoul(out, &end, 10);
	cr_assert(end != out && *end == '\n', "the X client printed \"%s\"", out);
	free(out);
	return (unsigned)v;
}

/* After a key action: Caps Lock and Num Lock as before the first key, and
 * no modifier left down. */
static void assert_x_state(struct gw *g, const char *after)
{
	unsigned m = x_mask(g);
	cr_assert_eq(m & LOCK_MASK, g->base_mask & LOCK_MASK, "after %s Caps Lock is %s (mask %#x)",
		     after, m & LOCK_MASK ? "on" : "off", m);
	cr_assert_eq(m & MOD2_MASK, g->base_mask & MOD2_MASK, "after %s Num Lock is %s (mask %#x)",
		     after, m & MOD2_MASK ? "on" : "off", m);
	unsigned held = SHIFT_MASK | CONTROL_MASK | MOD1_MASK | MOD4_MASK;
	cr_assert_eq(m & held, 0, "after %s modifiers are held (mask %#x)", after, m);
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
	g->base_mask = x_mask(g);
	cr_assert_eq(g->base_mask & LOCK_MASK, 0, "Caps Lock is on before any key (mask %#x)",
		     g->base_mask);
}

static void stop(struct gw *g, char *policy)
{
	dg_ws_close(g->ws);
	int st = dg_test_serve_stop(&g->srv, 30, false);
	running = NULL;
	cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve status %d", st);
	dg_test_rm_tmp(policy);
	char what[2048];
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "%s", what);
}

/* ---- the browser --------------------------------------------------------- */

/* Waits (bounded) until the page's title is want; returns the last title. */
static char *wait_title(struct gw *g, const char *want)
{
	char *last = NULL;
	for (int i = 0; i < POLLS; i++) {
		json_t *j = act(g, "{\"type\":\"cursor_position\"}");
		free(last);
		last = strdup(json_string_value(json_object_get(j, "title")) ?: "");
		json_decref(j);
		if (strcmp(last, want) == 0)
			break;
		usleep(POLL_US);
	}
	return last;
}

static void assert_title(struct gw *g, const char *want, const char *after)
{
	char *t = wait_title(g, want);
	cr_assert_str_eq(t, want, "after %s the page logged \"%s\", want \"%s\"", after, t, want);
	free(t);
}

/* Clears the page's log with Escape: its keydown also shows whether Caps
 * Lock was on at the next event after the previous action. */
static void clear_log(struct gw *g, const char *after)
{
	act0(g, "{\"type\":\"key\",\"keys\":\"Escape\"}");
	assert_title(g, "log:|", after);
}

/* One key action in the page: what the page logged, and the X state. */
static void page_key(struct gw *g, const char *keys, const char *want)
{
	char action[256];
	snprintf(action, sizeof(action), "{\"type\":\"key\",\"keys\":\"%s\"}", keys);
	act0(g, action);
	assert_title(g, want, keys);
	assert_x_state(g, keys);
	clear_log(g, keys);
}

Test(keys, browser_shifted_chords_and_text, .timeout = 300)
{
	char *policy = policy_file();
	static struct gw g; /* static: the suite's fini reaches it after a failed assertion */
	start(&g, "browser", policy);
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", page);
	char *text = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	act0(&g, text);
	free(text);
	char *t = wait_title(&g, "ready");
	cr_assert_str_eq(t, "ready");
	free(t);
	/* A navigate gives the page the focus: keys sent before any click
	 * reach it, not the start page's omnibox. */
	page_key(&g, "x", "log:x|x");
	act0(&g, "{\"type\":\"click\",\"x\":640,\"y\":500}");
	clear_log(&g, "the click");

	page_key(&g, "shift+a", "log:S-Shift S-A|A");
	page_key(&g, "shift+1", "log:S-Shift S-!|!");
	page_key(&g, "shift+slash", "log:S-Shift S-?|?");
	page_key(&g, "ctrl+shift+k", "log:C-Control C-S-Shift C-S-K|");
	/* Without Shift: as named, Shift added for a capital. */
	page_key(&g, "a", "log:a|a");
	page_key(&g, "A", "log:S-Shift S-A|A");

	/* hold_key presses and releases the same keys: nothing stays down. */
	act0(&g, "{\"type\":\"hold_key\",\"keys\":\"shift+a\",\"ms\":100}");
	assert_title(&g, "log:S-Shift S-A|A", "hold_key shift+a");
	assert_x_state(&g, "hold_key shift+a");
	clear_log(&g, "hold_key shift+a");

	/* OpenAI: ["SHIFT", "A"] is the chord Shift_L+a. */
	openai_keypress(&g, "[\"SHIFT\",\"A\"]");
	assert_title(&g, "log:S-Shift S-A|A", "keypress [SHIFT, A]");
	assert_x_state(&g, "keypress [SHIFT, A]");
	clear_log(&g, "keypress [SHIFT, A]");

	/* Capitals and symbols typed through Shift, lower case after them. */
	act0(&g, "{\"type\":\"type\",\"text\":\"Hello World!\"}");
	/* (document.title collapses the space key's entry " " into the
	 * separators around it.) */
	assert_title(&g, "log:S-Shift S-H e l l o S-Shift S-W o r l d S-Shift S-!|Hello World!",
		     "type Hello World!");
	assert_x_state(&g, "type Hello World!");
	clear_log(&g, "type Hello World!");
	act0(&g, "{\"type\":\"type\",\"text\":\"AB?c\"}");
	assert_title(&g, "log:S-Shift S-A S-B S-? c|AB?c", "type AB?c");
	assert_x_state(&g, "type AB?c");
	clear_log(&g, "type AB?c");
	/* Last: Shift+Tab (sent as ISO_Left_Tab with Shift held) moves the
	 * focus out of the page, where Escape no longer reaches it. */
	act0(&g, "{\"type\":\"key\",\"keys\":\"shift+Tab\"}");
	assert_title(&g, "log:S-Shift S-Tab|", "shift+Tab");
	assert_x_state(&g, "shift+Tab");
	stop(&g, policy);
}

/* ---- xterm --------------------------------------------------------------- */

/* Waits (bounded) until the file the terminal's cat writes holds want;
 * returns what it held last. */
static char *wait_file(struct gw *g, const char *path, const char *want)
{
	char argv[256], *last = NULL;
	snprintf(argv, sizeof(argv), "[\"sh\",\"-c\",\"cat %s 2>/dev/null; true\"]", path);
	for (int i = 0; i < POLLS; i++) {
		free(last);
		last = exec_ok(g, argv);
		if (strcmp(last, want) == 0)
			break;
		usleep(POLL_US);
	}
	return last;
}

static void term_key(struct gw *g, const char *keys)
{
	char action[256];
	snprintf(action, sizeof(action), "{\"type\":\"key\",\"keys\":\"%s\"}", keys);
	act0(g, action);
	assert_x_state(g, keys);
}

Test(keys, xterm_shifted_chords_and_text, .timeout = 300)
{
	char *policy = policy_file();
	static struct gw g; /* static: the suite's fini reaches it after a failed assertion */
	start(&g, "xterm", policy);
	/* The shell in the terminal copies the lines typed next into a file. */
	act0(&g, "{\"type\":\"type\",\"text\":\"cat > /tmp/keys.txt\\n\"}");
	assert_x_state(&g, "type cat");
	term_key(&g, "shift+a");
	term_key(&g, "shift+1");
	term_key(&g, "shift+slash");
	term_key(&g, "A");
	term_key(&g, "b");
	term_key(&g, "Return");
	openai_keypress(&g, "[\"SHIFT\",\"A\"]");
	assert_x_state(&g, "keypress [SHIFT, A]");
	term_key(&g, "Return");
	act0(&g, "{\"type\":\"type\",\"text\":\"Hello World!\\n\"}");
	assert_x_state(&g, "type Hello World!");
	/* A keypad key and a capital outside the US layout (mapped by Xvnc
	 * onto a spare keycode): no lock either. */
	term_key(&g, "KP_1");
	act0(&g, "{\"type\":\"type\",\"text\":\"\u00c9\u00e9\\n\"}");
	assert_x_state(&g, "type \u00c9\u00e9");
	term_key(&g, "ctrl+d");
	const char *want = "A!?Ab\nA\nHello World!\n1\xc3\x89\xc3\xa9\n";
	char *got = wait_file(&g, "/tmp/keys.txt", want);
	cr_assert_str_eq(got, want, "the terminal typed \"%s\", want \"%s\"", got, want);
	free(got);
	stop(&g, policy);
}
