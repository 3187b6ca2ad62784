/* dg_export: what an event looks like on its screens. The event's text is
 * hostile: every string reaches cairo through dg_show_str (ASCII, control
 * bytes escaped, cut), every number is clamped to the screen. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "recordings/export-priv.h"

#define DG_EXPORT_COORD_MAX 1e6    /* coordinates are clamped to +-this */
#define DG_EXPORT_FONT_PX 15
#define DG_EXPORT_LINE_PX 20
#define DG_EXPORT_RING_PX 20       /* radius of the ring around a point */
#define DG_EXPORT_DOT_PX 9         /* radius of the dot on it */

void dg_export_textf(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, len, fmt, ap);
	va_end(ap);
}

static double num(const json_t *o, const char *k)
{
	double v = json_number_value(json_object_get(o, k));
	return isfinite(v) ? fmax(-DG_EXPORT_COORD_MAX, fmin(DG_EXPORT_COORD_MAX, v)) : 0;
}

static void shown(const json_t *v, char *out, size_t len)
{
	dg_show_str(json_is_string(v) ? json_string_value(v) : "", DG_EXPORT_SHOWN_MAX, false,
		    out, len);
}

/* "type "..."" or "type: N characters (redacted)". */
static void describe_text(const json_t *a, char *out, size_t len)
{
	const json_t *t = json_object_get(a, "text");
	if (json_is_object(t)) {
		dg_export_textf(out, len, "type: %lld characters (redacted)",
			 (long long)json_integer_value(json_object_get(t, "length")));
		return;
	}
	char s[DG_SHOW_BUF];
	dg_show_str(json_is_string(t) ? json_string_value(t) : "", DG_EXPORT_SHOWN_MAX, true, s,
		    sizeof(s));
	dg_export_textf(out, len, "type %s", s);
}

static void mark_path(const json_t *path, struct dg_export_overlay *ov)
{
	size_t n = json_array_size(path);
	size_t step = n > DG_EXPORT_PATH_MAX ? (n + DG_EXPORT_PATH_MAX - 1) / DG_EXPORT_PATH_MAX : 1;
	ov->n = 0;
	for (size_t i = 0; i < n && ov->n < DG_EXPORT_PATH_MAX; i += step) {
		const json_t *p = json_array_get(path, i);
		ov->pts[ov->n][0] = json_number_value(json_array_get(p, 0));
		ov->pts[ov->n][1] = json_number_value(json_array_get(p, 1));
		if (isfinite(ov->pts[ov->n][0]) && isfinite(ov->pts[ov->n][1]))
			ov->n++;
	}
	ov->mark = ov->n >= 2 ? DG_EXPORT_MARK_PATH : DG_EXPORT_MARK_NONE;
}

/* The mark and the "what" line of a canonical action. */
static void describe_action(const json_t *a, uint64_t seq, struct dg_export_overlay *ov)
{
	char type[DG_SHOW_BUF], d[DG_EXPORT_TEXT_MAX] = "";
	shown(json_object_get(a, "type"), type, sizeof(type));
	bool xy = json_is_number(json_object_get(a, "x")) && json_is_number(json_object_get(a, "y"));
	double x = num(a, "x"), y = num(a, "y");
	if (strcmp(type, "type") == 0) {
		describe_text(a, d, sizeof(d));
	} else if (strcmp(type, "key") == 0 || strcmp(type, "navigate") == 0) {
		char v[DG_SHOW_BUF];
		shown(json_object_get(a, type[0] == 'k' ? "keys" : "url"), v, sizeof(v));
		dg_export_textf(d, sizeof(d), "%s %s", type, v);
	} else if (strcmp(type, "drag") == 0) {
		mark_path(json_object_get(a, "path"), ov);
		dg_export_textf(d, sizeof(d), "drag, %d points", ov->n);
	} else if (strcmp(type, "scroll") == 0 && xy) {
		ov->mark = DG_EXPORT_MARK_SCROLL;
		ov->n = 2;
		ov->pts[1][0] = num(a, "dx");
		ov->pts[1][1] = num(a, "dy");
		dg_export_textf(d, sizeof(d), "scroll at (%.0f, %.0f) by (%.0f, %.0f)", x, y, ov->pts[1][0],
			 ov->pts[1][1]);
	} else if (xy) {
		ov->mark = DG_EXPORT_MARK_POINT;
		ov->n = 1;
		long long count = json_integer_value(json_object_get(a, "count"));
		dg_export_textf(d, sizeof(d), "%s%s at (%.0f, %.0f)",
			 count == 2 ? "double " : count == 3 ? "triple " : "", type, x, y);
	} else {
		dg_export_textf(d, sizeof(d), "%s", type);
	}
	if (ov->mark != DG_EXPORT_MARK_PATH) {
		ov->pts[0][0] = x;
		ov->pts[0][1] = y;
	}
	dg_export_textf(ov->what, sizeof(ov->what), "#%llu %s", (unsigned long long)seq, d);
}

static void describe_verdict(const json_t *ev, struct dg_export_overlay *ov)
{
	const json_t *v = json_object_get(ev, "verdict");
	if (!json_is_string(v))
		return;
	char verdict[DG_SHOW_BUF], rule[DG_SHOW_BUF], reason[DG_SHOW_BUF];
	shown(v, verdict, sizeof(verdict));
	shown(json_object_get(ev, "rule"), rule, sizeof(rule));
	shown(json_object_get(ev, "reason"), reason, sizeof(reason));
	dg_export_textf(ov->verdict_name, sizeof(ov->verdict_name), "%s", verdict);
	dg_export_textf(ov->verdict, sizeof(ov->verdict), "%s%s%s%s%s%s", verdict, rule[0] ? ": " : "",
		 rule, reason[0] ? " (" : "", reason, reason[0] ? ")" : "");
}

void dg_export_overlay_of(const json_t *ev, uint64_t seq, struct dg_export_overlay *ov)
{
	memset(ov, 0, sizeof(*ov));
	const char *type = json_string_value(json_object_get(ev, "type"));
	if (type && strcmp(type, "action") == 0 && json_is_object(json_object_get(ev, "action"))) {
		describe_action(json_object_get(ev, "action"), seq, ov);
	} else if (type && strcmp(type, "cdp") == 0) {
		char m[DG_SHOW_BUF];
		shown(json_object_get(ev, "method"), m, sizeof(m));
		dg_export_textf(ov->what, sizeof(ov->what), "#%llu CDP %s", (unsigned long long)seq, m);
	} else {
		dg_export_textf(ov->what, sizeof(ov->what), "#%llu %s", (unsigned long long)seq,
			 type && strcmp(type, "cdp_frame") == 0 ? "the screen after a CDP command"
								  : "an action that did not parse");
	}
	describe_verdict(ev, ov);
	char url[DG_SHOW_BUF];
	shown(json_object_get(ev, "url"), url, sizeof(url));
	if (url[0])
		dg_export_textf(ov->url, sizeof(ov->url), "%s", url);
}

/* allow green, deny red, ask amber, anything else grey. */
static void verdict_rgb(const char *v, double rgb[3])
{
	static const struct { const char *name; double rgb[3]; } colours[] = {
		{ "allow", { 0.0, 0.85, 0.0 } },
		{ "deny", { 0.9, 0.1, 0.1 } },
		{ "ask", { 1.0, 0.7, 0.0 } },
	};
	for (size_t i = 0; i < sizeof(colours) / sizeof(colours[0]); i++) {
		if (strcmp(v, colours[i].name) == 0) {
			memcpy(rgb, colours[i].rgb, sizeof(colours[i].rgb));
			return;
		}
	}
	rgb[0] = rgb[1] = rgb[2] = 0.7;
}

static void draw_mark(cairo_t *cr, const struct dg_export_overlay *ov)
{
	double rgb[3];
	verdict_rgb(ov->verdict_name, rgb);
	cairo_set_source_rgb(cr, rgb[0], rgb[1], rgb[2]);
	cairo_set_line_width(cr, 4);
	double x = ov->pts[0][0], y = ov->pts[0][1];
	if (ov->mark == DG_EXPORT_MARK_PATH) {
		cairo_move_to(cr, x, y);
		for (int i = 1; i < ov->n; i++)
			cairo_line_to(cr, ov->pts[i][0], ov->pts[i][1]);
		cairo_stroke(cr);
		x = ov->pts[ov->n - 1][0];
		y = ov->pts[ov->n - 1][1];
	} else if (ov->mark == DG_EXPORT_MARK_SCROLL) {
		double dx = ov->pts[1][0], dy = ov->pts[1][1], len = hypot(dx, dy);
		if (len > 0) {
			double ux = dx / len, uy = dy / len, ex = x + ux * 60, ey = y + uy * 60;
			cairo_move_to(cr, x, y);
			cairo_line_to(cr, ex, ey);
			cairo_move_to(cr, ex - ux * 14 - uy * 10, ey - uy * 14 + ux * 10);
			cairo_line_to(cr, ex, ey);
			cairo_line_to(cr, ex - ux * 14 + uy * 10, ey - uy * 14 - ux * 10);
			cairo_stroke(cr);
		}
	}
	cairo_new_path(cr);
	cairo_arc(cr, x, y, DG_EXPORT_RING_PX, 0, 2 * M_PI);
	cairo_stroke(cr);
	cairo_arc(cr, x, y, DG_EXPORT_DOT_PX, 0, 2 * M_PI);
	cairo_fill(cr);
}

/* Shows text (ASCII: every caption went through dg_show_str), cut with
 * "..." to max_w pixels. */
static void show_fitted(cairo_t *cr, const char *text, double max_w)
{
	char buf[DG_EXPORT_TEXT_MAX + 4];
	dg_export_textf(buf, sizeof(buf), "%s", text);
	size_t n = strlen(buf);
	cairo_text_extents_t ex;
	cairo_text_extents(cr, buf, &ex);
	while (ex.x_advance > max_w && n > 0) {
		n = n * 9 / 10;
		memcpy(buf + n, "...", 4);
		cairo_text_extents(cr, buf, &ex);
	}
	cairo_show_text(cr, buf);
}

/* A translucent band of lines at y (from the top, or from the bottom when
 * bottom); colours[i] NULL: white. */
static void draw_band(cairo_t *cr, int w, int h, bool bottom, const char *const *lines,
		      const double *const *colours, int n, const double *bg)
{
	int used = 0;
	for (int i = 0; i < n; i++)
		used += lines[i][0] != 0;
	if (!used)
		return;
	double band = used * DG_EXPORT_LINE_PX + 8, top = bottom ? h - band : 0;
	cairo_set_source_rgba(cr, bg[0], bg[1], bg[2], 0.75);
	cairo_rectangle(cr, 0, top, w, band);
	cairo_fill(cr);
	double y = top + 4 + DG_EXPORT_FONT_PX;
	for (int i = 0; i < n; i++) {
		if (!lines[i][0])
			continue;
		const double *c = colours[i];
		cairo_set_source_rgb(cr, c ? c[0] : 1, c ? c[1] : 1, c ? c[2] : 1);
		cairo_move_to(cr, 8, y);
		show_fitted(cr, lines[i], w - 16);
		y += DG_EXPORT_LINE_PX;
	}
}

static void draw_frame(cairo_t *cr, int w, int h, const struct dg_export_picture *p)
{
	cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
	cairo_paint(cr);
	if (p->frame) {
		int fw = cairo_image_surface_get_width(p->frame);
		int fh = cairo_image_surface_get_height(p->frame);
		cairo_save(cr);
		cairo_scale(cr, (double)w / fw, (double)h / fh);
		cairo_set_source_surface(cr, p->frame, 0, 0);
		cairo_paint(cr);
		cairo_restore(cr);
	} else if (p->note) {
		cairo_set_source_rgb(cr, 1, 1, 1);
		cairo_move_to(cr, 16, h / 2.0);
		show_fitted(cr, p->note, w - 32);
	}
}

void dg_export_draw(cairo_t *cr, int w, int h, const struct dg_export_picture *p)
{
	cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
	cairo_set_font_size(cr, DG_EXPORT_FONT_PX);
	draw_frame(cr, w, h, p);
	static const double black[3] = { 0, 0, 0 }, red[3] = { 0.6, 0, 0 }, green[3] = { 0, 0.4, 0 };
	const char *top[1] = { p->banner ? p->banner : "" };
	const double *top_c[1] = { NULL };
	draw_band(cr, w, h, false, top, top_c, 1, p->banner_bad ? red : green);
	const struct dg_export_overlay *ov = p->ov;
	if (!ov)
		return;
	double rgb[3];
	verdict_rgb(ov->verdict_name, rgb);
	const char *bottom[3] = { ov->what, ov->verdict, ov->url };
	const double *bottom_c[3] = { NULL, rgb, NULL };
	draw_band(cr, w, h, true, bottom, bottom_c, 3, black);
	/* The mark last: a click on the top or bottom edge stays visible. */
	if (p->mark && ov->mark != DG_EXPORT_MARK_NONE) {
		cairo_save(cr);
		cairo_scale(cr, (double)w / p->sw, (double)h / p->sh);
		draw_mark(cr, ov);
		cairo_restore(cr);
	}
}
