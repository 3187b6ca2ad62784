/* Internals the frame files share (desktop/worker/: frame.c, frame-png.c,
 * frame-stripes.c); frame-priv.h is the contract the rest of the worker and
 * the tests see. Nothing here checks its arguments: the callers have
 * (dg_frame_check_geometry).
 *
 *   frame.c          checks, crop and area-coverage scaling, BGRX -> RGB
 *                    rows, the content hash
 *   frame-png.c      the one-stream encoder through libpng (zooms, options)
 *   frame-stripes.c  the striped encoder: per-stripe cache, helper thread,
 *                    and dg_png_free
 */
#ifndef DG_WORKER_FRAME_INT_PRIV_H
#define DG_WORKER_FRAME_INT_PRIV_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/worker/frame-priv.h"

/* First capacity of an empty output buffer; it then doubles as needed. */
#define PNG_FIRST_CAP (256u * 1024)

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline uint32_t load32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap32(v);
#endif
	return v;
}

/* Grows *p to hold at least need bytes (never shrinks). 0 or -ENOMEM. */
static inline int dg_frame_grow(void **p, size_t *cap, size_t need)
{
	if (*cap >= need)
		return 0;
	void *n = realloc(*p, need);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = need;
	return 0;
}

/* One axis of an area-coverage resampling (frame.c explains the weights). */
struct axis {
	int n_out;
	int taps;         /* T: the most source pixels one output pixel covers */
	uint32_t unit;    /* S': sum of the weights of one output pixel */
	int32_t *first;   /* [n_out] first source index; first + T <= S */
	uint32_t *w;      /* [n_out * T] weights, zero-padded to T */
};

/* What a struct dg_png reuses from one encode to the next (dg_png_free
 * frees it): the libpng path's rows, the resampling tables and rows, and
 * the striped encoder's cache. */
struct stripe_cache;
struct dg_png_scratch {
	uint8_t *rows; /* two output rows: current and previous */
	size_t rows_cap;
	/* resampling, sized for the largest use so far */
	void *axbuf[2];
	size_t axcap[2];
	uint32_t *hrow[2]; /* horizontally resampled source rows, keyed by hkey */
	size_t hcap[2];
	int hkey[2];
	uint64_t *acc;
	size_t acc_cap;
	struct stripe_cache *cache; /* the striped encoder's (frame-stripes.c) */
};

/* Scaling of one region to out_w x out_h: the tables (in s->axbuf) and the
 * rows it works in (s->hrow, s->acc). A copy with another s shares the
 * tables and uses that scratch's rows (the striped encoder's threads). */
struct resampler {
	const struct dg_frame *f;
	int rx, ry;         /* region origin */
	int out_w, out_h;
	struct axis ax, ay;
	struct dg_png_scratch *s;
	uint64_t div_d;     /* unit_x * unit_y: the weight of one output pixel */
	uint64_t div_m;     /* multiplier for exact division by div_d (frame.c) */
	bool narrow;        /* div_d <= DIV_NARROW_MAX: 32-bit sums suffice */
};

/* Checks region (NULL: whole frame) and output size; writes the region as
 * x, y, w, h into r. Returns 0 or -EINVAL with err. */
int dg_frame_check_geometry(const struct dg_frame *f, const int region[4], int out_w, int out_h,
			    int r[4], struct dg_err *err);

/* Builds rs for region r of f to out_w x out_h, its tables and rows in s.
 * 0 or -ENOMEM. */
int dg_frame_resampler_init(struct resampler *rs, const struct dg_frame *f, const int r[4],
			    int out_w, int out_h, struct dg_png_scratch *s);

/* Produces output row oy as R, G, B bytes. Rows must be asked in order for
 * the two-row cache to hit (each source row is then resampled once). */
void dg_frame_resample_row(struct resampler *rs, int oy, uint8_t *out);

/* Region row y (relative) of BGRX pixels to w RGB pixels. */
void dg_frame_convert_row(const struct dg_frame *f, const int r[4], int y, uint8_t *out);

/* Hash of rows y0 <= y < y1 of a checked frame: dg_frame_hash over those
 * rows, with their count in place of the frame's height. */
uint64_t dg_frame_hash_rows(const struct dg_frame *f, int y0, int y1);

#endif
