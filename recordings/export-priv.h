/* dg_export internals: the encoder (export-enc.c), the overlay
 * (export-draw.c) and the driver (export.c). Only the dg_export library
 * includes this. */
#ifndef DG_EXPORT_PRIV_H
#define DG_EXPORT_PRIV_H

#include <stdbool.h>
#include <stdint.h>

#include <cairo.h>
#include <jansson.h>

#include "recordings/recordings.h"

#define DG_EXPORT_TEXT_MAX 200     /* bytes of one caption line */
#define DG_EXPORT_SHOWN_MAX 80     /* characters of a quoted value in a caption */
#define DG_EXPORT_PATH_MAX 64      /* points of a drag path drawn (longer: sampled) */
#define DG_EXPORT_IO_BUF (64 * 1024)

/* snprintf whose cut is intended (captions and notes are cut to their line). */
__attribute__((format(printf, 3, 4)))
void dg_export_textf(char *out, size_t len, const char *fmt, ...);

/* ---- the encoder ------------------------------------------------------------ */

struct dg_export_enc;

/* Opens an encoder writing fmt to fd (seekable, owned by the caller) at
 * w x h (even) and DG_REC_EXPORT_FPS; path is for messages. */
int dg_export_enc_open(enum dg_rec_export_format fmt, int fd, const char *path, int w, int h,
		       struct dg_export_enc **e, struct dg_err *err);
/* The encoder's name ("libvpx", ...). */
const char *dg_export_enc_codec(const struct dg_export_enc *e);
/* Converts one picture (cairo ARGB32, w x h, stride bytes a row) and
 * sends it count times (count frames of video). */
int dg_export_enc_put(struct dg_export_enc *e, const uint8_t *argb, int stride, uint64_t count,
		      struct dg_err *err);
/* Drains the encoder and writes the container's trailer. */
int dg_export_enc_finish(struct dg_export_enc *e, struct dg_err *err);
void dg_export_enc_free(struct dg_export_enc *e);

/* ---- the overlay --------------------------------------------------------------- */

enum dg_export_mark { DG_EXPORT_MARK_NONE, DG_EXPORT_MARK_POINT, DG_EXPORT_MARK_PATH,
		      DG_EXPORT_MARK_SCROLL };

/* What is drawn over one event's screens, in screen coordinates. */
struct dg_export_overlay {
	enum dg_export_mark mark;
	int n;                               /* points used */
	double pts[DG_EXPORT_PATH_MAX][2];   /* POINT: 1; PATH: n; SCROLL: the point
					        and (dx, dy) */
	char what[DG_EXPORT_TEXT_MAX];       /* "#12 click (300, 20)" */
	char verdict[DG_EXPORT_TEXT_MAX];    /* "allow: rule (reason)", "" none */
	char url[DG_EXPORT_TEXT_MAX];        /* the page, "" none */
	char verdict_name[8];                /* "allow", "deny", "ask", "" */
};

/* Fills ov from an event ("action", "cdp" or "cdp_frame"). */
void dg_export_overlay_of(const json_t *ev, uint64_t seq, struct dg_export_overlay *ov);

/* One picture: frame (NULL: none, note says why) scaled into the canvas,
 * the overlay (the mark only when mark is true), the banner at the top
 * (bad: red, unverified) and the caption at the bottom. sw, sh: the
 * screen size the overlay's coordinates are in. */
struct dg_export_picture {
	cairo_surface_t *frame;
	const char *note;
	const struct dg_export_overlay *ov;
	bool mark;
	const char *banner;
	bool banner_bad;
	int sw, sh;
};
void dg_export_draw(cairo_t *cr, int w, int h, const struct dg_export_picture *p);

#endif
