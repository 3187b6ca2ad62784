/* CJK text on the desktops (issue #13): typed or shown CJK used to come out
 * as empty boxes ("tofu"), the desktop having no font with those glyphs.
 * A real gateway starts a browser and an xterm desktop; each shows 中, 文 and
 * a codepoint no font has (U+E000, private use) as the tofu reference, and
 * the test reads the screenshot's pixels: the two characters must each be
 * drawn, differ from each other and differ from the tofu. With no CJK font
 * all three are the same box (or nothing). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_test.h"
#include "dg_test_agent.h"

#define T_ACT 60
/* Two glyphs are "different" when at least this share of the pixels inked
 * in either is inked in only one (identical boxes: 0; 中 against 文 or a
 * box: 0.5 and more at these sizes). */
#define GLYPHS_DIFFER 0.25
/* A glyph is "drawn" when at least this share of its area is inked. */
#define GLYPH_INK_MIN 0.02

static struct dg_server srv;

static void setup(void)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_start(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
}

TestSuite(desktop_fonts, .init = setup, .fini = teardown, .timeout = 300);

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

/* The agent's next answer (frames before it dropped). */
static json_t *recv_json(struct dg_ws *ws, double timeout_s)
{
	return dg_test_agent_recv(ws, timeout_s, false);
}

static struct dg_ws *open_session(const char *profile)
{
	char body[64];
	snprintf(body, sizeof(body), "{\"profile\":\"%s\"}", profile);
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN, body, 90, &r), 0);
	cr_assert_eq(r.status, 201, "%s", r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	dg_http_free(&r);
	char path[128], proto[300], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", str(j, "id"));
	snprintf(proto, sizeof(proto), "deskgate.v1, bearer.%s", str(j, "session_token"));
	json_decref(j);
	int status;
	struct dg_ws *ws = dg_ws_connect(srv.port, path, NULL, proto, 30, &status, err, sizeof(err));
	cr_assert(ws, "connect: %d %s", status, err);
	json_decref(recv_json(ws, 10)); /* hello */
	return ws;
}

static void act(struct dg_ws *ws, const char *action)
{
	cr_assert_eq(dg_ws_send_text(ws, action), 0);
	json_t *r = recv_json(ws, T_ACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "%s: %s", action, json_dumps(r, 0));
	json_decref(r);
}

/* ---- pixels ---------------------------------------------------------------------- */

struct img {
	unsigned char *rgb;
	int w, h;
	unsigned char *png; /* as received, for a look when a check fails */
	size_t png_len;
};

struct rect {
	int x, y, w, h;
};

/* A screenshot action: its result, then the PNG as a binary message. */
static void screenshot(struct dg_ws *ws, struct img *im)
{
	cr_assert_eq(dg_ws_send_text(ws, "{\"type\":\"screenshot\"}"), 0);
	json_t *r = recv_json(ws, T_ACT);
	cr_assert(json_is_true(json_object_get(r, "ok")), "screenshot: %s", json_dumps(r, 0));
	json_decref(r);
	struct dg_ws_msg m;
	cr_assert_eq(dg_ws_recv(ws, T_ACT, &m), 1, "no frame after the screenshot's result");
	cr_assert(m.binary, "the screenshot's frame is not binary");
	im->rgb = dg_test_png_rgb(m.data, m.len, &im->w, &im->h);
	cr_assert(im->rgb, "the screenshot is no PNG");
	im->png = m.data;
	im->png_len = m.len;
}

static void img_free(struct img *im)
{
	free(im->rgb);
	free(im->png);
}

/* Keeps the screenshot in a file whose name the failure message gives (in
 * a directory of its own: the server's is removed at the end). */
static const char *keep(const struct img *im, const char *name)
{
	static char path[128];
	char dir[] = "/tmp/dg-fonts-XXXXXX";
	if (!mkdtemp(dir))
		return "(not kept: mkdtemp failed)";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(im->png, 1, im->png_len, f);
		fclose(f);
	}
	return path;
}

static bool inked(const struct img *im, int x, int y)
{
	if (x < 0 || y < 0 || x >= im->w || y >= im->h)
		return false;
	const unsigned char *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
	return p[0] + p[1] + p[2] < 3 * 128;
}

static double ink(const struct img *im, struct rect r)
{
	long n = 0;
	for (int y = r.y; y < r.y + r.h; y++)
		for (int x = r.x; x < r.x + r.w; x++)
			n += inked(im, x, y);
	return (double)n / ((double)r.w * r.h);
}

/* Share of the pixels inked in a or b (same size, compared point for point)
 * that are inked in only one. 0 when neither has ink. */
static double differ(const struct img *im, struct rect a, struct rect b)
{
	long either = 0, one = 0;
	for (int dy = 0; dy < a.h; dy++) {
		for (int dx = 0; dx < a.w; dx++) {
			bool ia = inked(im, a.x + dx, a.y + dy), ib = inked(im, b.x + dx, b.y + dy);
			either += ia || ib;
			one += ia != ib;
		}
	}
	return either ? (double)one / (double)either : 0;
}

/* 中, 文 and the tofu reference: each drawn, and no two alike. */
static void check_glyphs(const struct img *im, const struct rect g[3], const char *name)
{
	static const char *const what[] = {"中", "文", "U+E000 (tofu)"};
	double k[3] = {ink(im, g[0]), ink(im, g[1]), ink(im, g[2])};
	double d01 = differ(im, g[0], g[1]), d02 = differ(im, g[0], g[2]),
	       d12 = differ(im, g[1], g[2]);
	fprintf(stderr, "desktop_fonts: %s: ink %.3f %.3f %.3f; 中/文 %.2f, 中/tofu %.2f, 文/tofu %.2f\n",
		name, k[0], k[1], k[2], d01, d02, d12);
	for (int i = 0; i < 2; i++)
		cr_assert_geq(k[i], GLYPH_INK_MIN, "%s: %s is not drawn (ink %.3f; screenshot %s)", name,
			      what[i], k[i], keep(im, name));
	cr_assert_geq(d01, GLYPHS_DIFFER, "%s: 中 and 文 look alike (%.2f): boxes? (screenshot %s)",
		      name, d01, keep(im, name));
	cr_assert_geq(d02, GLYPHS_DIFFER, "%s: 中 looks like the tofu box (%.2f; screenshot %s)", name,
		      d02, keep(im, name));
	cr_assert_geq(d12, GLYPHS_DIFFER, "%s: 文 looks like the tofu box (%.2f; screenshot %s)", name,
		      d12, keep(im, name));
}

/* ---- the browser ----------------------------------------------------------------- */

/* The page: a magenta marker at the viewport's corner (the screen position
 * of the page is wherever Chromium's toolbar ends), then three boxes of
 * BOX px at known offsets from it, one character each. */
#define BOX 240
#define BOX_TOP 20
static const int box_left[3] = {20, 300, 580};
static const char page[] =
	"<!doctype html><meta charset=utf-8><style>"
	"body{margin:0;background:#fff}"
	"i{position:absolute;left:0;top:0;width:8px;height:8px;background:#f0f}"
	"b{position:absolute;top:20px;width:240px;height:240px;overflow:hidden;"
	"font:normal 180px/240px sans-serif;text-align:center;color:#000}"
	"</style><i></i><b style=left:20px>中</b><b style=left:300px>文</b>"
	"<b style=left:580px>&#xE000;</b>";

/* data:text/html;charset=utf-8, with every byte but letters and digits
 * percent-encoded (the policy takes canonical URLs only). */
static char *data_url(const char *html)
{
	static const char head[] = "data:text/html;charset=utf-8,";
	size_t n = strlen(html);
	char *u = malloc(sizeof(head) + 3 * n);
	cr_assert(u);
	char *p = u + sprintf(u, "%s", head);
	for (const unsigned char *c = (const unsigned char *)html; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))
			*p++ = (char)*c;
		else
			p += sprintf(p, "%%%02X", *c);
	}
	*p = '\0';
	return u;
}

static bool magenta(const struct img *im, int x, int y)
{
	const unsigned char *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
	return p[0] > 230 && p[1] < 30 && p[2] > 230;
}

Test(desktop_fonts, browser_draws_cjk)
{
	struct dg_ws *ws = open_session("browser");
	char *url = data_url(page);
	char *action = NULL;
	cr_assert(asprintf(&action, "{\"type\":\"navigate\",\"url\":\"%s\"}", url) > 0);
	act(ws, action);
	free(action);
	free(url);
	act(ws, "{\"type\":\"wait\",\"ms\":500}");
	struct img im;
	screenshot(ws, &im);
	int ox = -1, oy = -1;
	for (int y = 0; y < im.h && ox < 0; y++)
		for (int x = 0; x < im.w / 4 && ox < 0; x++)
			if (magenta(&im, x, y))
				ox = x, oy = y;
	cr_assert_geq(ox, 0, "no page marker on the screen (screenshot %s)", keep(&im, "browser.png"));
	cr_assert_leq(oy + BOX_TOP + BOX, im.h, "the page starts too low: %d", oy);
	struct rect g[3];
	for (int i = 0; i < 3; i++)
		g[i] = (struct rect){ox + box_left[i], oy + BOX_TOP, BOX, BOX};
	check_glyphs(&im, g, "browser.png");
	img_free(&im);
	dg_ws_close(ws);
}

/* ---- xterm ----------------------------------------------------------------------- */

/* The glyphs are found by their cells, not by their ink (a missing glyph
 * may be a blank cell): the first line is a bar of BAR_CELLS reverse-video
 * spaces, whose box gives the cell size and the origin, and the second
 * line holds 中 at column 0, 文 at column 10 and U+E000 at column 20 (each
 * given two cells). */
#define BAR_CELLS 10
static const int glyph_col[3] = {0, 10, 20};

Test(desktop_fonts, xterm_draws_cjk)
{
	struct dg_ws *ws = open_session("xterm");
	/* As octal escapes, so the shell line typed stays ASCII; an empty line
	 * before the next prompt. */
	act(ws, "{\"type\":\"type\",\"text\":\"printf '\\\\033[H\\\\033[2J\\\\033[7m          "
		"\\\\033[0m\\\\n\\\\344\\\\270\\\\255        \\\\346\\\\226\\\\207        "
		"\\\\356\\\\200\\\\200\\\\n\\\\n'\\n\"}");
	act(ws, "{\"type\":\"wait\",\"ms\":500}");
	struct img im;
	screenshot(ws, &im);
	/* The bar: its top-left is the first inked pixel; its width and
	 * height run while the pixels stay inked. */
	int x0 = -1, y0 = -1;
	for (int y = 0; y < im.h / 4 && x0 < 0; y++)
		for (int x = 0; x < im.w / 4 && x0 < 0; x++)
			if (inked(&im, x, y))
				x0 = x, y0 = y;
	cr_assert_geq(x0, 0, "no reverse-video bar on the screen (screenshot %s)", keep(&im, "xterm.png"));
	int bw = 0, bh = 0;
	while (inked(&im, x0 + bw, y0 + 1))
		bw++;
	while (inked(&im, x0 + 1, y0 + bh))
		bh++;
	int cw = bw / BAR_CELLS, ch = bh;
	cr_assert(bw % BAR_CELLS == 0 && cw >= 4 && ch >= 8 && ch < 80,
		  "the bar is %dx%d px: not %d cells (screenshot %s)", bw, bh, BAR_CELLS,
		  keep(&im, "xterm.png"));
	struct rect g[3];
	for (int i = 0; i < 3; i++)
		g[i] = (struct rect){x0 + glyph_col[i] * cw, y0 + ch, 2 * cw, ch};
	check_glyphs(&im, g, "xterm.png");
	img_free(&im);
	dg_ws_close(ws);
}
