/* frame: BGRX framebuffer -> RGB PNG, with crop, area resampling and a
 * content hash. See frame-priv.h for the contracts.
 *
 * The encoder streams: one output row at a time is produced (converted or
 * resampled) into a small reusable buffer and handed to libpng, so no copy of
 * the frame is ever made. libpng writes through png_set_write_fn into the
 * caller's growable buffer.
 */
#include "desktop/worker/frame-priv.h"

#include <errno.h>
#include <png.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* libpng's zlib output chunk: one IDAT chunk per this many bytes. Bigger than
 * libpng's 8 KB default so a screenshot makes tens of write callbacks and
 * chunks, not hundreds. */
#define PNG_ZBUF_BYTES (128u * 1024)
/* First capacity of an empty output buffer; it then doubles as needed. */
#define PNG_FIRST_CAP (256u * 1024)

/* ---- little helpers ---- */

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
static int grow(void **p, size_t *cap, size_t need)
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

/* ---- validation ---- */

int dg_frame_check(const struct dg_frame *f, struct dg_err *err)
{
	if (!f)
		return dg_err_set(err, -EINVAL, "frame: no frame");
	if (f->w < 1 || f->w > DG_FRAME_MAX_DIM)
		return dg_err_set(err, -EINVAL, "frame: width %d is outside 1..%d", f->w,
				  DG_FRAME_MAX_DIM);
	if (f->h < 1 || f->h > DG_FRAME_MAX_DIM)
		return dg_err_set(err, -EINVAL, "frame: height %d is outside 1..%d", f->h,
				  DG_FRAME_MAX_DIM);
	if (!f->pixels)
		return dg_err_set(err, -EINVAL, "frame: no pixels");
	size_t row = (size_t)f->w * 4;
	if (f->stride < row)
		return dg_err_set(err, -EINVAL, "frame: stride %zu is below width * 4 (%zu)",
				  f->stride, row);
	/* The rows span (h - 1) * stride + w * 4 bytes; a stride so large that
	 * this overflows cannot describe real memory. */
	if ((size_t)(f->h - 1) > (SIZE_MAX - row) / f->stride)
		return dg_err_set(err, -EINVAL, "frame: stride %zu times height %d overflows",
				  f->stride, f->h);
	return 0;
}

/* Checks region (NULL: whole frame) and output size; writes the region as
 * x, y, w, h into r. */
static int check_geometry(const struct dg_frame *f, const int region[4], int out_w, int out_h,
			  int r[4], struct dg_err *err)
{
	int rc = dg_frame_check(f, err);
	if (rc)
		return rc;
	if (region) {
		int x = region[DG_REGION_X], y = region[DG_REGION_Y];
		int w = region[DG_REGION_W], h = region[DG_REGION_H];
		if (x < 0 || y < 0 || w < 1 || h < 1 || x >= f->w || y >= f->h || w > f->w - x ||
		    h > f->h - y)
			return dg_err_set(err, -EINVAL,
					  "frame: region x %d y %d w %d h %d is not inside the "
					  "%dx%d frame",
					  x, y, w, h, f->w, f->h);
		memcpy(r, region, 4 * sizeof(int));
	} else {
		r[0] = 0;
		r[1] = 0;
		r[2] = f->w;
		r[3] = f->h;
	}
	if (out_w < 1 || out_w > DG_FRAME_MAX_DIM || out_h < 1 || out_h > DG_FRAME_MAX_DIM)
		return dg_err_set(err, -EINVAL, "frame: output size %dx%d is outside 1..%d", out_w,
				  out_h, DG_FRAME_MAX_DIM);
	return 0;
}

/* ---- area-coverage resampling ----
 *
 * Along one axis, S source pixels map onto O output pixels. With g =
 * gcd(S, O), S' = S / g and O' = O / g, measure positions in units where a
 * source pixel is O' long and an output pixel S' long (both S * O' = O * S'
 * in total). Output pixel o covers [o*S', (o+1)*S'); each source pixel it
 * overlaps gets the overlap length as an integer weight, and the weights of
 * one output pixel sum to S'. A pixel's value is the weighted sum over both
 * axes divided by S'x * S'y, rounded to nearest: exact integer arithmetic, so
 * averages of known patterns are predictable to the unit.
 */
struct axis {
	int n_out;
	int taps;         /* T: the most source pixels one output pixel covers */
	uint32_t unit;    /* S': sum of the weights of one output pixel */
	int32_t *first;   /* [n_out] first source index; first + T <= S */
	uint32_t *w;      /* [n_out * T] weights, zero-padded to T */
};

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
	struct stripe_cache *cache; /* the striped encoder's, see below */
};

static uint32_t gcd_u32(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Builds the tables for S -> O in the memory block *buf. Every output pixel
 * gets the same number of taps T (zero weights pad the short ones), so the
 * inner loops have a constant trip count instead of alternating ones (2, 3,
 * 2, 3... for 5:4) that branch prediction misses. */
static int axis_build(struct axis *ax, void **buf, size_t *cap, int S, int O)
{
	uint32_t g = gcd_u32((uint32_t)S, (uint32_t)O);
	uint64_t sp = (uint32_t)S / g, op = (uint32_t)O / g;
	/* An interval of sp units starting anywhere meets at most
	 * ceil(sp / op) + 1 source pixels of op units, and never more than S. */
	uint64_t t = (sp + op - 1) / op + 1;
	int T = t > (uint64_t)S ? S : (int)t;
	size_t need = (size_t)O * sizeof(int32_t) + (size_t)O * (size_t)T * sizeof(uint32_t);
	if (grow(buf, cap, need))
		return -ENOMEM;
	ax->n_out = O;
	ax->taps = T;
	ax->unit = (uint32_t)sp;
	ax->first = (int32_t *)*buf;
	ax->w = (uint32_t *)(ax->first + O);
	memset(ax->w, 0, (size_t)O * (size_t)T * sizeof(uint32_t));
	for (int o = 0; o < O; o++) {
		uint64_t lo = (uint64_t)o * sp, hi = lo + sp;
		uint64_t s0 = lo / op, s1 = (hi - 1) / op;
		/* Near the right edge, start earlier so that T taps stay inside
		 * the region; the extra leading taps weigh 0. */
		uint64_t f = s0 + (uint64_t)T > (uint64_t)S ? (uint64_t)(S - T) : s0;
		ax->first[o] = (int32_t)f;
		uint32_t *w = ax->w + (size_t)o * (size_t)T;
		for (uint64_t s = s0; s <= s1; s++) {
			uint64_t a = s * op > lo ? s * op : lo;
			uint64_t b = (s + 1) * op < hi ? (s + 1) * op : hi;
			w[s - f] = (uint32_t)(b - a);
		}
	}
	return 0;
}

struct resampler {
	const struct dg_frame *f;
	int rx, ry;         /* region origin */
	int out_w, out_h;
	struct axis ax, ay;
	struct dg_png_scratch *s;
	uint64_t div_d;     /* unit_x * unit_y: the weight of one output pixel */
	uint64_t div_m;     /* multiplier for exact division by div_d, see below */
	bool narrow;        /* div_d <= DIV_NARROW_MAX: 32-bit sums suffice */
};

/* Exact division without a divide instruction: q = n * m >> k with
 * m = ceil(2^k / d) is floor(n / d) whenever n * (m * d - 2^k) < 2^k, and
 * m * d - 2^k < d. Numerators are below 256 d (255 d plus rounding).
 * Narrow (d <= 2^23, all common scale ratios): 32-bit sums, k = 55, so
 * 256 d^2 <= 2^54 keeps it exact and n * m < 2^63 + 256 d fits 64 bits.
 * Wide (d up to 2^26, 8192^2): 64-bit sums, k = 64 with a 128-bit product;
 * 256 d^2 <= 2^60 keeps it exact. */
#define DIV_NARROW_MAX (1u << 23)
#define DIV_NARROW_SHIFT 55

/* Horizontal pass of region row sy (relative) into dst: out_w * 3 sums in
 * R, G, B order, each at most unit_x * 255. */
static void hpass(const struct resampler *rs, int sy, uint32_t *dst)
{
	const uint8_t *src = rs->f->pixels + (size_t)(rs->ry + sy) * rs->f->stride +
			     (size_t)rs->rx * 4;
	const struct axis *ax = &rs->ax;
	const int T = ax->taps;
	const uint32_t *w = ax->w;
	for (int o = 0; o < ax->n_out; o++, w += T) {
		const uint8_t *p = src + (size_t)ax->first[o] * 4;
		uint32_t r = 0, g = 0, b = 0;
		for (int t = 0; t < T; t++, p += 4) {
			b += w[t] * p[0];
			g += w[t] * p[1];
			r += w[t] * p[2];
		}
		dst[3 * o] = r;
		dst[3 * o + 1] = g;
		dst[3 * o + 2] = b;
	}
}

static int resampler_init(struct resampler *rs, const struct dg_frame *f, const int r[4],
			  int out_w, int out_h, struct dg_png_scratch *s)
{
	memset(rs, 0, sizeof(*rs));
	rs->f = f;
	rs->rx = r[0];
	rs->ry = r[1];
	rs->out_w = out_w;
	rs->out_h = out_h;
	rs->s = s;
	if (axis_build(&rs->ax, &s->axbuf[0], &s->axcap[0], r[2], out_w) ||
	    axis_build(&rs->ay, &s->axbuf[1], &s->axcap[1], r[3], out_h))
		return -ENOMEM;
	size_t n = (size_t)out_w * 3;
	for (int i = 0; i < 2; i++) {
		if (grow((void **)&s->hrow[i], &s->hcap[i], n * sizeof(uint32_t)))
			return -ENOMEM;
		s->hkey[i] = -1;
	}
	if (grow((void **)&s->acc, &s->acc_cap, n * sizeof(uint64_t)))
		return -ENOMEM;
	rs->div_d = (uint64_t)rs->ax.unit * rs->ay.unit;
	rs->narrow = rs->div_d <= DIV_NARROW_MAX;
	if (rs->narrow)
		rs->div_m = ((1ull << DIV_NARROW_SHIFT) + rs->div_d - 1) / rs->div_d;
	else
		rs->div_m = (uint64_t)(((unsigned __int128)1 << 64) / rs->div_d) + 1;
	return 0;
}

/* Adds w times the horizontal sums h into acc (the first tap sets it). */
static void vtap32(uint32_t *acc, const uint32_t *h, uint32_t w, size_t n, bool first)
{
	if (first)
		for (size_t i = 0; i < n; i++)
			acc[i] = w * h[i];
	else
		for (size_t i = 0; i < n; i++)
			acc[i] += w * h[i];
}

static void vtap64(uint64_t *acc, const uint32_t *h, uint64_t w, size_t n, bool first)
{
	if (first)
		for (size_t i = 0; i < n; i++)
			acc[i] = w * h[i];
	else
		for (size_t i = 0; i < n; i++)
			acc[i] += w * h[i];
}

/* Produces output row oy as R, G, B bytes. Rows must be asked in order for
 * the two-row cache to hit (each source row is then resampled once). */
static void resample_row(struct resampler *rs, int oy, uint8_t *out)
{
	struct dg_png_scratch *s = rs->s;
	const struct axis *ay = &rs->ay;
	size_t n = (size_t)rs->out_w * 3;
	const uint32_t *wy = ay->w + (size_t)oy * (size_t)ay->taps;
	bool first = true;
	for (int t = 0; t < ay->taps; t++) {
		if (!wy[t]) /* padding: that source row is not needed */
			continue;
		int sy = ay->first[oy] + t;
		int slot = sy & 1;
		if (s->hkey[slot] != sy) {
			hpass(rs, sy, s->hrow[slot]);
			s->hkey[slot] = sy;
		}
		if (rs->narrow)
			vtap32((uint32_t *)s->acc, s->hrow[slot], wy[t], n, first);
		else
			vtap64(s->acc, s->hrow[slot], wy[t], n, first);
		first = false;
	}
	uint64_t half = rs->div_d / 2, m = rs->div_m;
	if (rs->narrow) {
		const uint32_t *acc = (const uint32_t *)s->acc;
		for (size_t i = 0; i < n; i++)
			out[i] = (uint8_t)(((acc[i] + half) * m) >> DIV_NARROW_SHIFT);
	} else {
		const uint64_t *acc = s->acc;
		for (size_t i = 0; i < n; i++)
			out[i] = (uint8_t)(((unsigned __int128)(acc[i] + half) * m) >> 64);
	}
}

/* Region row y (relative) of BGRX pixels to w RGB pixels. */
static void convert_row(const struct dg_frame *f, const int r[4], int y, uint8_t *out)
{
	const uint8_t *s = f->pixels + (size_t)(r[1] + y) * f->stride + (size_t)r[0] * 4;
	int w = r[2], i = 0;
	/* Four pixels per step: four 32-bit loads, three 32-bit stores. */
	for (; i + 4 <= w; i += 4, s += 16, out += 12) {
		uint32_t p0 = load32(s), p1 = load32(s + 4), p2 = load32(s + 8),
			 p3 = load32(s + 12);
		/* pN = 0xXXRRGGBB; bytes out: R0 G0 B0 R1 | G1 B1 R2 G2 | B2 R3 G3 B3 */
		uint32_t a = ((p0 >> 16) & 0xff) | (p0 & 0xff00) | ((p0 & 0xff) << 16) |
			     (((p1 >> 16) & 0xff) << 24);
		uint32_t b = ((p1 >> 8) & 0xff) | ((p1 & 0xff) << 8) | (p2 & 0xff0000) |
			     ((p2 & 0xff00) << 16);
		uint32_t c = (p2 & 0xff) | ((p3 >> 8) & 0xff00) | ((p3 & 0xff00) << 8) |
			     ((p3 & 0xff) << 24);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		a = __builtin_bswap32(a);
		b = __builtin_bswap32(b);
		c = __builtin_bswap32(c);
#endif
		memcpy(out, &a, 4);
		memcpy(out + 4, &b, 4);
		memcpy(out + 8, &c, 4);
	}
	for (; i < w; i++, s += 4, out += 3) {
		out[0] = s[2];
		out[1] = s[1];
		out[2] = s[0];
	}
}

int dg_frame_scale(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		   uint8_t *rgb, size_t rgb_stride, struct dg_err *err)
{
	int r[4];
	int rc = check_geometry(f, region, out_w, out_h, r, err);
	if (rc)
		return rc;
	if (!rgb || rgb_stride < (size_t)out_w * 3)
		return dg_err_set(err, -EINVAL, "frame: output stride %zu is below width * 3",
				  rgb_stride);
	struct dg_png_scratch s;
	memset(&s, 0, sizeof(s));
	struct resampler rs;
	rc = resampler_init(&rs, f, r, out_w, out_h, &s);
	if (rc == 0) {
		for (int y = 0; y < out_h; y++)
			resample_row(&rs, y, rgb + (size_t)y * rgb_stride);
	} else {
		dg_err_set(err, rc, "frame: out of memory for resampling tables");
	}
	free(s.axbuf[0]);
	free(s.axbuf[1]);
	free(s.hrow[0]);
	free(s.hrow[1]);
	free(s.acc);
	return rc;
}

/* ---- hash ----
 *
 * xxHash64's round and avalanche over the rows' 8-byte words, four
 * independent lanes for instruction-level parallelism (about 0.2 ns a word).
 * Every row restarts at lane 0; with w and h mixed in at the end, a word's
 * lane and position in its lane depend only on where it is in the frame.
 * The striped encoder hashes each stripe's rows with the same function.
 */
#define H_P1 0x9E3779B185EBCA87ull
#define H_P2 0xC2B2AE3D27D4EB4Full
#define H_P3 0x165667B19E3779F9ull
#define H_P4 0x85EBCA77C2B2AE63ull
#define H_P5 0x27D4EB2F165667C5ull
/* Keeps B, G, R of the two pixels in a little-endian word, drops both X. */
#define H_MASK 0x00FFFFFF00FFFFFFull

static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t h_round(uint64_t acc, uint64_t v)
{
	acc += v * H_P2;
	acc = rotl64(acc, 31);
	return acc * H_P1;
}

static inline uint64_t h_merge(uint64_t h, uint64_t v)
{
	h ^= h_round(0, v);
	return h * H_P1 + H_P4;
}

/* Hash of rows y0 <= y < y1 of a checked frame: dg_frame_hash over those
 * rows, with their count in place of the frame's height. */
static uint64_t hash_rows(const struct dg_frame *f, int y0, int y1)
{
	uint64_t v1 = H_P1 + H_P2, v2 = H_P2, v3 = 0, v4 = (uint64_t)0 - H_P1;
	size_t words = (size_t)f->w / 2;
	for (int y = y0; y < y1; y++) {
		const uint8_t *p = f->pixels + (size_t)y * f->stride;
		size_t i = 0;
		for (; i + 4 <= words; i += 4, p += 32) {
			v1 = h_round(v1, load64(p) & H_MASK);
			v2 = h_round(v2, load64(p + 8) & H_MASK);
			v3 = h_round(v3, load64(p + 16) & H_MASK);
			v4 = h_round(v4, load64(p + 24) & H_MASK);
		}
		/* At most three words and a half-word (odd width) remain. */
		uint64_t *lane[4] = {&v1, &v2, &v3, &v4};
		int l = 0;
		for (; i < words; i++, p += 8, l++)
			*lane[l] = h_round(*lane[l], load64(p) & H_MASK);
		if (f->w & 1)
			*lane[l] = h_round(*lane[l], (uint64_t)load32(p) & 0x00FFFFFFu);
	}
	uint64_t h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
	h = h_merge(h, v1);
	h = h_merge(h, v2);
	h = h_merge(h, v3);
	h = h_merge(h, v4);
	h ^= ((uint64_t)(uint32_t)f->w << 32 | (uint32_t)(y1 - y0)) * H_P3;
	h = rotl64(h, 27) * H_P1 + H_P4;
	h ^= h >> 33;
	h *= H_P2;
	h ^= h >> 29;
	h *= H_P3;
	h ^= h >> 32;
	return h;
}

uint64_t dg_frame_hash(const struct dg_frame *f)
{
	if (dg_frame_check(f, NULL))
		return 0;
	return hash_rows(f, 0, f->h);
}

/* ---- per-row filter choice ---- */

/* Picks "up" or "sub" for an RGB row of n bytes from the count of 8-byte
 * words each filter would leave non-zero (approximately: a word is counted
 * when it differs from the word above, or from the word one pixel to the
 * left). Zero runs are what both zlib strategies compress best. */
static int pick_filter(const uint8_t *cur, const uint8_t *prev, size_t n)
{
	unsigned up = 0, sub = 0;
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		up += load64(cur + i) != load64(prev + i);
	if (up == 0)
		return PNG_FILTER_UP;
	for (i = 8; i + 8 <= n; i += 8)
		sub += load64(cur + i) != load64(cur + i - 3);
	return up <= sub ? PNG_FILTER_UP : PNG_FILTER_SUB;
}

/* ---- PNG writing ---- */

struct png_ctx {
	struct dg_png *out;
	size_t max_bytes;
	int code; /* error code reported after a longjmp */
	struct dg_err *err;
};

static void on_png_error(png_structp png, png_const_charp msg)
{
	struct png_ctx *c = png_get_error_ptr(png);
	if (c->code == 0) {
		c->code = strstr(msg, "memory") ? -ENOMEM : -EIO;
		dg_err_set(c->err, c->code, "png: %s", msg);
	}
	png_longjmp(png, 1);
}

/* No libpng warning concerns what this encoder relies on (it writes no
 * ancillary chunks; a filter libpng cannot apply falls back to a valid one,
 * which the tests would see as size, not as a wrong image). Dropping them
 * keeps libpng off the worker's stderr. */
static void on_png_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

static void on_png_write(png_structp png, png_bytep data, png_size_t len)
{
	struct png_ctx *c = png_get_io_ptr(png);
	struct dg_png *o = c->out;
	if (len > c->max_bytes - o->len) {
		c->code = -E2BIG;
		dg_err_set(c->err, -E2BIG, "png: the image exceeds %zu bytes", c->max_bytes);
		png_error(png, "output limit");
	}
	if (o->len + len > o->cap) {
		size_t cap = o->cap ? o->cap : PNG_FIRST_CAP;
		while (cap < o->len + len)
			cap = cap > c->max_bytes / 2 ? c->max_bytes : cap * 2;
		void *n = realloc(o->data, cap);
		if (!n) {
			c->code = -ENOMEM;
			dg_err_set(c->err, -ENOMEM, "png: out of memory growing to %zu bytes",
				   cap);
			png_error(png, "out of memory");
		}
		o->data = n;
		o->cap = cap;
	}
	memcpy(o->data + o->len, data, len);
	o->len += len;
}

static void on_png_flush(png_structp png)
{
	(void)png;
}

static int check_opts(const struct dg_png_opts *o, struct dg_err *err)
{
	if (o->level < 0 || o->level > 9)
		return dg_err_set(err, -EINVAL, "png: level %d is outside 0..9", o->level);
	if ((unsigned)o->strategy > DG_PNG_STRATEGY_RLE)
		return dg_err_set(err, -EINVAL, "png: unknown strategy %d", (int)o->strategy);
	if ((unsigned)o->filter > DG_PNG_FILTER_ADAPTIVE)
		return dg_err_set(err, -EINVAL, "png: unknown filter %d", (int)o->filter);
	if (o->max_bytes < 1 || o->max_bytes > DG_PNG_MAX_BYTES)
		return dg_err_set(err, -EINVAL, "png: max_bytes %zu is outside 1..%u",
				  o->max_bytes, DG_PNG_MAX_BYTES);
	return 0;
}

/* Everything the row loop needs, prepared (and allocated) before libpng
 * starts, so the loop itself cannot fail except inside libpng. */
struct encode_job {
	const struct dg_frame *f;
	int r[4];
	int out_w, out_h;
	bool scale;
	struct resampler rs;
	uint8_t *row[2];
	const struct dg_png_opts *o;
};

static void write_rows(png_structp png, struct encode_job *j)
{
	size_t n = (size_t)j->out_w * 3;
	uint8_t *cur = j->row[0], *prev = NULL;
	for (int y = 0; y < j->out_h; y++) {
		if (j->scale)
			resample_row(&j->rs, y, cur);
		else
			convert_row(j->f, j->r, y, cur);
		/* Row 0 keeps the SUB|UP mask set before png_write_info: libpng
		 * allocates its previous-row buffer when the first row starts,
		 * and only if "up" is in the mask then; narrowing the mask
		 * before that would turn every later "up" into "none". */
		if (j->o->filter == DG_PNG_FILTER_ROWS && prev)
			png_set_filter(png, PNG_FILTER_TYPE_BASE, pick_filter(cur, prev, n));
		png_write_row(png, cur);
		prev = cur;
		cur = cur == j->row[0] ? j->row[1] : j->row[0];
	}
}

/* ctx lives in the caller's frame: its fields change between setjmp and
 * longjmp, which would leave a local of this function indeterminate. */
static int do_encode(struct encode_job *j, struct png_ctx *ctx)
{
	struct dg_png *out = ctx->out;
	png_structp png =
		png_create_write_struct(PNG_LIBPNG_VER_STRING, ctx, on_png_error, on_png_warning);
	if (!png)
		return dg_err_set(ctx->err, -ENOMEM, "png: cannot create the write struct");
	png_infop info = png_create_info_struct(png);
	if (!info) {
		png_destroy_write_struct(&png, NULL);
		return dg_err_set(ctx->err, -ENOMEM, "png: cannot create the info struct");
	}
	/* png, info and out are not modified after this point, so they are
	 * valid after a longjmp. */
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		out->len = 0;
		return ctx->code ? ctx->code
				 : dg_err_set(ctx->err, -EIO, "png: encoding failed");
	}
	png_set_write_fn(png, ctx, on_png_write, on_png_flush);
	png_set_IHDR(png, info, (png_uint_32)j->out_w, (png_uint_32)j->out_h, 8,
		     PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE,
		     PNG_FILTER_TYPE_BASE);
	const struct dg_png_opts *o = j->o;
	png_set_compression_level(png, o->level);
	if (o->strategy == DG_PNG_STRATEGY_DEFAULT)
		png_set_compression_strategy(png, Z_DEFAULT_STRATEGY);
	else if (o->strategy == DG_PNG_STRATEGY_RLE)
		png_set_compression_strategy(png, Z_RLE);
	switch (o->filter) {
	case DG_PNG_FILTER_NONE:
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_NONE);
		break;
	case DG_PNG_FILTER_SUB:
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
		break;
	case DG_PNG_FILTER_UP:
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
		break;
	case DG_PNG_FILTER_ROWS:
		/* Announce both so libpng allocates the previous-row buffer "up"
		 * needs; each row then narrows the choice to one filter. */
		png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB | PNG_FILTER_UP);
		break;
	case DG_PNG_FILTER_ADAPTIVE:
		break;
	}
	png_set_compression_buffer_size(png, PNG_ZBUF_BYTES);
	out->len = 0;
	png_write_info(png, info);
	write_rows(png, j);
	png_write_end(png, info);
	png_destroy_write_struct(&png, &info);
	return 0;
}

int dg_png_encode_opts(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		       const struct dg_png_opts *opts, struct dg_png *out, struct dg_err *err)
{
	if (!out)
		return dg_err_set(err, -EINVAL, "png: no output buffer");
	out->len = 0;
	out->stripes_compressed = 0;
	out->stripes_reused = 0;
	struct dg_png_opts defaults = DG_PNG_OPTS_DEFAULT;
	const struct dg_png_opts *o = opts ? opts : &defaults;
	int rc = check_opts(o, err);
	if (rc)
		return rc;
	struct encode_job j;
	memset(&j, 0, sizeof(j));
	rc = check_geometry(f, region, out_w, out_h, j.r, err);
	if (rc)
		return rc;
	j.f = f;
	j.o = o;
	j.out_w = out_w;
	j.out_h = out_h;
	j.scale = out_w != j.r[2] || out_h != j.r[3];

	if (!out->scratch) {
		out->scratch = calloc(1, sizeof(*out->scratch));
		if (!out->scratch)
			return dg_err_set(err, -ENOMEM, "png: out of memory");
	}
	struct dg_png_scratch *s = out->scratch;
	size_t row = (size_t)out_w * 3;
	if (grow((void **)&s->rows, &s->rows_cap, 2 * row))
		return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
	j.row[0] = s->rows;
	j.row[1] = s->rows + row;
	if (j.scale && resampler_init(&j.rs, f, j.r, out_w, out_h, s))
		return dg_err_set(err, -ENOMEM, "png: out of memory for resampling tables");
	struct png_ctx ctx = {.out = out, .max_bytes = o->max_bytes, .code = 0, .err = err};
	return do_encode(&j, &ctx);
}

/* ---- striped encoding with a per-stripe cache ----
 *
 * The image's zlib stream is cut into stripes of o->rows output rows. Each
 * stripe is raw deflate from a freshly reset state, so it refers to nothing
 * before it, ended with Z_SYNC_FLUSH, which closes its last block and pads
 * to a byte boundary (an empty stored block). Stripes compressed at
 * different times, or by different threads, therefore concatenate into one
 * valid deflate stream (pigz's method). The IDAT data is the 2-byte zlib
 * header, the stripes in order, a final empty fixed-Huffman block (bytes
 * 03 00, BFINAL set) and the Adler-32 of all filtered rows, combined from
 * the stripes' own with adler32_combine. One IDAT chunk holds it all; its
 * CRC is combined the same way from per-stripe CRCs with crc32_combine, so
 * neither check value needs another pass over bytes not recompressed.
 *
 * The cache remembers, per stripe, a hash of the source rows it was made
 * from, and its compressed bytes, Adler-32 and CRC. The bytes of all stripes
 * live back to back in one block, a copy of the last image's IDAT data: the
 * cache never holds more than one compressed image. An encode with the same
 * geometry hashes each stripe's source rows and compresses only the stripes
 * whose hash changed. Deflate is deterministic, so the result is
 * byte-identical to a cold encode of the same pixels, whichever thread
 * compressed what.
 *
 * An encode runs in two steps. The job: stripes are claimed one at a time
 * (an atomic counter) by the calling thread and, once dg_png_start_helper
 * has started it, a helper thread; the claimer hashes the stripe and, when
 * it changed, compresses it into its own buffer. Then the caller alone
 * assembles the PNG in stripe order from the cache and those buffers, and
 * updates the cache.
 *
 * Layout of the output, by offset: 0 signature, 8 IHDR, 33 IDAT length, 37
 * "IDAT", 41 zlib header, 43 first stripe (STRIPE_HEAD); after the last
 * stripe, STRIPE_TAIL bytes: 03 00, Adler-32, the IDAT CRC, IEND.
 */
#define STRIPE_HEAD 43
#define STRIPE_TAIL 22
#define IDAT_AT 33
/* Room over deflateBound (which counts a Z_FINISH stream) for the sync
 * flush's empty stored block: at most 3 + 7 bits and 4 bytes. */
#define STRIPE_SLACK 16

/* A cached stripe. */
struct stripe {
	uint64_t hash;   /* of the source rows the stripe was made from */
	size_t off, len; /* its compressed bytes: store[off .. off + len) */
	uint32_t adler;  /* Adler-32 of its filtered rows */
	uint32_t crc;    /* CRC-32 of its compressed bytes */
};

/* What the job found for stripe k, written only by the thread that claimed
 * it and read by the caller after the job. */
struct stripe_new {
	uint64_t hash;
	int who;         /* -1: unchanged, use the cache; else the worker index */
	size_t off, len; /* compressed bytes: that worker's buf[off .. off + len) */
	uint32_t adler, crc;
};

/* One compressing thread's own state. */
struct stripe_worker {
	z_stream z; /* raw deflate, reset for every stripe */
	bool z_ready;
	int z_level;
	uint8_t *filt; /* one stripe of filtered rows */
	size_t filt_cap;
	uint8_t *buf; /* the stripes it compressed in this encode, back to back */
	size_t buf_len, buf_cap;
	struct dg_png_scratch rows; /* its resampling rows: hrow, hkey, acc */
};

/* One encode's work. Read-only during the job except the atomics and the
 * res[k] of claimed stripes. */
struct stripe_job {
	const struct dg_frame *f;
	const struct resampler *rs; /* the tables when scaling, else NULL */
	const struct stripe_cache *c;
	struct stripe_new *res;
	int n, rows, out_h;
	size_t row_bytes;
	size_t room;          /* most IDAT stripe bytes the byte limit allows */
	atomic_int next;      /* next stripe to claim */
	atomic_size_t total;  /* stripe bytes of the stripes claimed so far */
	atomic_int rc;        /* first failure: -E2BIG, -ENOMEM or -EIO */
};

/* The optional second thread. It sleeps on cv between jobs. */
struct stripe_helper {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* job posted, job finished, or quit */
	struct stripe_job *job;  /* posted and not finished; NULL otherwise */
	bool running, quit;      /* running: it has taken job */
	struct stripe_worker w;
};

struct stripe_cache {
	bool valid;            /* st[] and store describe the last image of key */
	int key[6];            /* frame w, h, output w, h, stripe rows, level */
	struct stripe *st;
	size_t st_cap;         /* bytes */
	struct stripe_new *res;
	size_t res_cap;        /* bytes */
	uint8_t *store;        /* the last image's stripes, back to back */
	size_t store_cap;
	struct stripe_worker main;     /* the calling thread's */
	struct stripe_helper *helper;  /* NULL: single-threaded */
};

static int check_stripe_opts(const struct dg_png_stripe_opts *o, struct dg_err *err)
{
	if (o->rows < 1 || o->rows > DG_FRAME_MAX_DIM)
		return dg_err_set(err, -EINVAL, "png: stripe rows %d is outside 1..%d", o->rows,
				  DG_FRAME_MAX_DIM);
	if (o->level < 0 || o->level > 9)
		return dg_err_set(err, -EINVAL, "png: level %d is outside 0..9", o->level);
	if (o->max_bytes < 1 || o->max_bytes > DG_PNG_MAX_BYTES)
		return dg_err_set(err, -EINVAL, "png: max_bytes %zu is outside 1..%u",
				  o->max_bytes, DG_PNG_MAX_BYTES);
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Makes *p hold at least need bytes, doubling but not past max(need,
 * limit), so capacities stay within the byte limit (plus one stripe for a
 * worker's buffer). 0 or -ENOMEM. */
static int grow_doubling(uint8_t **p, size_t *cap, size_t need, size_t limit)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : PNG_FIRST_CAP;
	while (c < need)
		c = c > limit / 2 ? (need > limit ? need : limit) : c * 2;
	void *n = realloc(*p, c);
	if (!n)
		return -ENOMEM;
	*p = n;
	*cap = c;
	return 0;
}

/* The zlib header's second byte for a level, as deflate writes it (FLEVEL
 * is advisory; decoders ignore it), with the check bits. */
static uint8_t zlib_flg(int level)
{
	unsigned lf = level < 2 ? 0 : level < 6 ? 1 : level == 6 ? 2 : 3;
	unsigned flg = lf << 6;
	return (uint8_t)(flg + 31 - ((0x78u << 8) + flg) % 31);
}

/* Signature, IHDR, and the IDAT's type and zlib header; the IDAT length is
 * written once known. */
static void write_head(uint8_t *p, int w, int h, int level)
{
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	memcpy(p, sig, 8);
	put32(p + 8, 13);
	memcpy(p + 12, "IHDR", 4);
	put32(p + 16, (uint32_t)w);
	put32(p + 20, (uint32_t)h);
	p[24] = 8; /* bit depth */
	p[25] = 2; /* colour type: RGB */
	p[26] = 0; /* compression: deflate */
	p[27] = 0; /* filter method: adaptive (each row says which) */
	p[28] = 0; /* no interlace */
	put32(p + 29, (uint32_t)crc32(0, p + 12, 17));
	memcpy(p + IDAT_AT + 4, "IDAT", 4);
	p[IDAT_AT + 8] = 0x78; /* deflate, 32 KB window */
	p[IDAT_AT + 9] = zlib_flg(level);
}

/* Readies w for an encode: deflate state at level, a stripe of rows, and
 * resampling rows of out_w pixels when scaling. Called by the encoding
 * thread while the helper sleeps. */
static int worker_prepare(struct stripe_worker *w, int level, size_t filt_bytes, int scale_w,
			  struct dg_err *err)
{
	if (w->z_ready && w->z_level != level) {
		deflateEnd(&w->z);
		w->z_ready = false;
	}
	if (!w->z_ready) {
		memset(&w->z, 0, sizeof(w->z));
		/* Negative window bits: raw deflate, no header or trailer; the
		 * encoder writes one of each around all the stripes. Memory
		 * level 8 (zlib's default) measured faster than 9 here. */
		int zr = deflateInit2(&w->z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
		if (zr != Z_OK)
			return dg_err_set(err, zr == Z_MEM_ERROR ? -ENOMEM : -EIO,
					  "png: deflateInit2 failed (%d)", zr);
		w->z_ready = true;
		w->z_level = level;
	}
	if (grow((void **)&w->filt, &w->filt_cap, filt_bytes))
		return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
	if (scale_w) {
		struct dg_png_scratch *s = &w->rows;
		size_t n = (size_t)scale_w * 3;
		for (int i = 0; i < 2; i++) {
			if (grow((void **)&s->hrow[i], &s->hcap[i], n * sizeof(uint32_t)))
				return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
			s->hkey[i] = -1; /* the pixels may have changed since */
		}
		if (grow((void **)&s->acc, &s->acc_cap, n * sizeof(uint64_t)))
			return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
	}
	w->buf_len = 0;
	return 0;
}

static void worker_free(struct stripe_worker *w)
{
	if (w->z_ready)
		deflateEnd(&w->z);
	free(w->filt);
	free(w->buf);
	free(w->rows.hrow[0]);
	free(w->rows.hrow[1]);
	free(w->rows.acc);
	memset(w, 0, sizeof(*w));
}

/* Compresses w->filt[0 .. n) as one stripe appended to w->buf; *len gets
 * its size. limit bounds the buffer's growth (see grow_doubling). */
static int worker_compress(struct stripe_worker *w, size_t n, size_t limit, size_t *len)
{
	z_stream *z = &w->z;
	if (deflateReset(z) != Z_OK)
		return -EIO;
	size_t bound = deflateBound(z, (uLong)n) + STRIPE_SLACK;
	if (grow_doubling(&w->buf, &w->buf_cap, w->buf_len + bound, limit + bound))
		return -ENOMEM;
	z->next_in = w->filt;
	z->avail_in = (uInt)n;
	z->next_out = w->buf + w->buf_len;
	z->avail_out = (uInt)bound;
	int zr = deflate(z, Z_SYNC_FLUSH);
	/* With deflateBound's room one call always completes the flush; room
	 * left over is the proof that nothing is still pending. */
	if (zr != Z_OK || z->avail_in != 0 || z->avail_out == 0)
		return -EIO;
	*len = bound - z->avail_out;
	w->buf_len += *len;
	return 0;
}

static void job_fail(struct stripe_job *j, int rc)
{
	int none = 0;
	atomic_compare_exchange_strong(&j->rc, &none, rc);
}

/* Claims stripes until none is left or the job failed; worker index who. */
static void job_run(struct stripe_job *j, struct stripe_worker *w, int who)
{
	const struct dg_frame *f = j->f;
	const int whole[4] = {0, 0, f->w, f->h};
	struct resampler rs; /* the shared tables with this worker's rows */
	if (j->rs) {
		rs = *j->rs;
		rs.s = &w->rows;
	}
	while (atomic_load(&j->rc) == 0) {
		int k = atomic_fetch_add(&j->next, 1);
		if (k >= j->n)
			return;
		const int y0 = k * j->rows, y1 = y0 + j->rows < j->out_h ? y0 + j->rows : j->out_h;
		/* The source rows this stripe's pixels are made from: its own
		 * rows, or all the vertical taps of its rows when scaling. */
		int s0 = y0, s1 = y1;
		if (j->rs) {
			s0 = rs.ay.first[y0];
			s1 = rs.ay.first[y1 - 1] + rs.ay.taps;
		}
		struct stripe_new *r = &j->res[k];
		const struct stripe *st = &j->c->st[k];
		r->hash = hash_rows(f, s0, s1);
		size_t len;
		if (j->c->valid && st->hash == r->hash) {
			r->who = -1;
			len = st->len;
		} else {
			uint8_t *row = w->filt;
			for (int y = y0; y < y1; y++, row += j->row_bytes) {
				row[0] = 0; /* filter type: none */
				if (j->rs)
					resample_row(&rs, y, row + 1);
				else
					convert_row(f, whole, y, row + 1);
			}
			size_t n_filt = (size_t)(y1 - y0) * j->row_bytes;
			int rc = worker_compress(w, n_filt, j->room, &len);
			if (rc) {
				job_fail(j, rc);
				return;
			}
			r->who = who;
			r->off = w->buf_len - len;
			r->len = len;
			r->adler = (uint32_t)adler32(1, w->filt, (uInt)n_filt);
			r->crc = (uint32_t)crc32(0, w->buf + r->off, (uInt)len);
		}
		/* Bytes only add up, so the first stripe past the limit can
		 * stop everyone: the image cannot fit. */
		if (atomic_fetch_add(&j->total, len) + len > j->room) {
			job_fail(j, -E2BIG);
			return;
		}
	}
}

static void *helper_main(void *arg)
{
	struct stripe_helper *h = arg;
	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->quit && (!h->job || h->running))
			pthread_cond_wait(&h->cv, &h->mu);
		if (h->quit)
			break;
		struct stripe_job *j = h->job;
		h->running = true;
		pthread_mutex_unlock(&h->mu);
		job_run(j, &h->w, 1);
		pthread_mutex_lock(&h->mu);
		h->running = false;
		h->job = NULL;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

/* Runs j on the calling thread and, when there is more than one stripe,
 * on the helper too; returns when no thread is inside j any more. */
static void job_do(struct stripe_job *j, struct stripe_cache *c)
{
	struct stripe_helper *h = j->n > 1 ? c->helper : NULL;
	if (h) {
		pthread_mutex_lock(&h->mu);
		h->job = j;
		pthread_cond_broadcast(&h->cv);
		pthread_mutex_unlock(&h->mu);
	}
	job_run(j, &c->main, 0);
	if (h) {
		pthread_mutex_lock(&h->mu);
		if (!h->running)
			h->job = NULL; /* not taken yet, and no work left: withdraw */
		while (h->job)
			pthread_cond_wait(&h->cv, &h->mu);
		pthread_mutex_unlock(&h->mu);
	}
}

static int cache_setup(struct stripe_cache *c, const int key[6], int n, struct dg_err *err)
{
	if (!c->valid || memcmp(key, c->key, sizeof(c->key)) != 0) {
		c->valid = false;
		if (grow((void **)&c->st, &c->st_cap, (size_t)n * sizeof(struct stripe)))
			return dg_err_set(err, -ENOMEM, "png: out of memory for the stripe table");
		memcpy(c->key, key, sizeof(c->key));
	}
	if (grow((void **)&c->res, &c->res_cap, (size_t)n * sizeof(struct stripe_new)))
		return dg_err_set(err, -ENOMEM, "png: out of memory for the stripe table");
	return 0;
}

/* The cached encode of the whole frame f to out_w x out_h. On failure the
 * caller drops the cache: its entries may be half updated. */
static int encode_cached(const struct dg_frame *f, int out_w, int out_h,
			 const struct dg_png_stripe_opts *o, struct dg_png *out,
			 struct dg_err *err)
{
	struct dg_png_scratch *s = out->scratch;
	struct stripe_cache *c = s->cache;
	const size_t max = o->max_bytes;
	if (max < STRIPE_HEAD + STRIPE_TAIL)
		return dg_err_set(err, -E2BIG, "png: the image exceeds %zu bytes", max);
	const int whole[4] = {0, 0, f->w, f->h};
	const bool scale = out_w != f->w || out_h != f->h;
	struct resampler rs;
	if (scale && resampler_init(&rs, f, whole, out_w, out_h, s))
		return dg_err_set(err, -ENOMEM, "png: out of memory for resampling tables");
	const int rows = o->rows < out_h ? o->rows : out_h;
	const int n = (out_h + rows - 1) / rows;
	const size_t row_bytes = 1 + (size_t)out_w * 3;
	const int key[6] = {f->w, f->h, out_w, out_h, o->rows, o->level};
	int rc = cache_setup(c, key, n, err);
	if (!rc)
		rc = worker_prepare(&c->main, o->level, (size_t)rows * row_bytes,
				    scale ? out_w : 0, err);
	if (!rc && c->helper)
		rc = worker_prepare(&c->helper->w, o->level, (size_t)rows * row_bytes,
				    scale ? out_w : 0, err);
	if (rc)
		return rc;

	struct stripe_job j = {
		.f = f,
		.rs = scale ? &rs : NULL,
		.c = c,
		.res = c->res,
		.n = n,
		.rows = rows,
		.out_h = out_h,
		.row_bytes = row_bytes,
		.room = max - STRIPE_HEAD - STRIPE_TAIL,
	};
	atomic_init(&j.next, 0);
	atomic_init(&j.total, 0);
	atomic_init(&j.rc, 0);
	job_do(&j, c);
	rc = atomic_load(&j.rc);
	if (rc == -E2BIG)
		return dg_err_set(err, rc, "png: the image exceeds %zu bytes", max);
	if (rc == -ENOMEM)
		return dg_err_set(err, rc, "png: out of memory compressing a stripe");
	if (rc)
		return dg_err_set(err, rc, "png: deflate failed on a stripe");

	/* Assemble, in stripe order, on this thread only. */
	const size_t total = atomic_load(&j.total); /* <= room, checked by the job */
	if (grow_doubling(&out->data, &out->cap, STRIPE_HEAD + total + STRIPE_TAIL, max))
		return dg_err_set(err, -ENOMEM, "png: out of memory growing to %zu bytes",
				  STRIPE_HEAD + total + STRIPE_TAIL);
	write_head(out->data, out_w, out_h, o->level);
	uint32_t crc = (uint32_t)crc32(0, out->data + IDAT_AT + 4, 6); /* "IDAT", zlib header */
	uint32_t adler = (uint32_t)adler32(0, Z_NULL, 0);
	const uint8_t *buf[2] = {c->main.buf, c->helper ? c->helper->w.buf : NULL};
	size_t pos = STRIPE_HEAD;
	for (int k = 0; k < n; k++) {
		const struct stripe_new *r = &c->res[k];
		struct stripe *st = &c->st[k];
		if (r->who < 0) {
			memcpy(out->data + pos, c->store + st->off, st->len);
			out->stripes_reused++;
		} else {
			memcpy(out->data + pos, buf[r->who] + r->off, r->len);
			st->hash = r->hash;
			st->len = r->len;
			st->adler = r->adler;
			st->crc = r->crc;
			out->stripes_compressed++;
		}
		st->off = pos - STRIPE_HEAD;
		const int y0 = k * rows, y1 = y0 + rows < out_h ? y0 + rows : out_h;
		crc = (uint32_t)crc32_combine(crc, st->crc, (z_off_t)st->len);
		adler = (uint32_t)adler32_combine(adler, st->adler,
						  (z_off_t)((size_t)(y1 - y0) * row_bytes));
		pos += st->len;
	}
	uint8_t *t = out->data + pos;
	t[0] = 0x03; /* a final (BFINAL) fixed-Huffman block holding only end-of-block */
	t[1] = 0x00;
	put32(t + 2, adler);
	crc = (uint32_t)crc32(crc, t, 6);
	put32(t + 6, crc);
	static const uint8_t iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82};
	memcpy(t + 10, iend, sizeof(iend));
	/* IDAT data: zlib header, stripes, final block and Adler-32. */
	put32(out->data + IDAT_AT, (uint32_t)(2 + total + 6));
	out->len = pos + STRIPE_TAIL;

	/* Keep this image's stripes for the next encode (when all came from
	 * the cache, the store already holds them, in the same places).
	 * Without memory for that the PNG is still good; only the cache is
	 * lost. */
	if (out->stripes_compressed == 0)
		return 0;
	c->valid = grow((void **)&c->store, &c->store_cap, total) == 0;
	if (c->valid)
		memcpy(c->store, out->data + STRIPE_HEAD, total);
	return 0;
}

static int scratch_get(struct dg_png *out, struct dg_err *err)
{
	if (!out->scratch && !(out->scratch = calloc(1, sizeof(*out->scratch))))
		return dg_err_set(err, -ENOMEM, "png: out of memory");
	struct dg_png_scratch *s = out->scratch;
	if (!s->cache && !(s->cache = calloc(1, sizeof(*s->cache))))
		return dg_err_set(err, -ENOMEM, "png: out of memory");
	return 0;
}

int dg_png_encode_stripes(const struct dg_frame *f, const int region[4], int out_w, int out_h,
			  const struct dg_png_stripe_opts *opts, struct dg_png *out,
			  struct dg_err *err)
{
	if (!out)
		return dg_err_set(err, -EINVAL, "png: no output buffer");
	out->len = 0;
	out->stripes_compressed = 0;
	out->stripes_reused = 0;
	const struct dg_png_stripe_opts defaults = DG_PNG_STRIPE_OPTS_DEFAULT;
	const struct dg_png_stripe_opts *o = opts ? opts : &defaults;
	int rc = check_stripe_opts(o, err);
	if (rc)
		return rc;
	int r[4];
	rc = check_geometry(f, region, out_w, out_h, r, err);
	if (rc)
		return rc;
	if (r[0] != 0 || r[1] != 0 || r[2] != f->w || r[3] != f->h) {
		/* A zoom: its region differs from call to call, so caching it
		 * would only evict the full screen's stripes. One stream. */
		const struct dg_png_opts po = {o->level, DG_PNG_STRATEGY_DEFAULT,
					       DG_PNG_FILTER_NONE, o->max_bytes};
		return dg_png_encode_opts(f, region, out_w, out_h, &po, out, err);
	}
	if ((rc = scratch_get(out, err)))
		return rc;
	rc = encode_cached(f, out_w, out_h, o, out, err);
	if (rc) {
		out->scratch->cache->valid = false;
		out->len = 0;
		out->stripes_compressed = 0;
		out->stripes_reused = 0;
	}
	return rc;
}

int dg_png_encode(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		  struct dg_png *out, struct dg_err *err)
{
	return dg_png_encode_stripes(f, region, out_w, out_h, NULL, out, err);
}

int dg_png_start_helper(struct dg_png *out, struct dg_err *err)
{
	if (!out)
		return dg_err_set(err, -EINVAL, "png: no output buffer");
	int rc = scratch_get(out, err);
	if (rc)
		return rc;
	struct stripe_cache *c = out->scratch->cache;
	if (c->helper)
		return 0;
	struct stripe_helper *h = calloc(1, sizeof(*h));
	if (!h)
		return dg_err_set(err, -ENOMEM, "png: out of memory");
	if ((rc = pthread_mutex_init(&h->mu, NULL))) {
		free(h);
		return dg_err_set(err, -rc, "png: pthread_mutex_init: %s", strerror(rc));
	}
	if ((rc = pthread_cond_init(&h->cv, NULL))) {
		pthread_mutex_destroy(&h->mu);
		free(h);
		return dg_err_set(err, -rc, "png: pthread_cond_init: %s", strerror(rc));
	}
	/* The helper blocks every signal, so they keep reaching the thread
	 * that handles them; it inherits the mask set around its creation. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&h->th, NULL, helper_main, h);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&h->cv);
		pthread_mutex_destroy(&h->mu);
		free(h);
		return dg_err_set(err, -rc, "png: pthread_create: %s", strerror(rc));
	}
	c->helper = h;
	return 0;
}

static void helper_stop(struct stripe_helper *h)
{
	pthread_mutex_lock(&h->mu);
	h->quit = true;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->th, NULL);
	pthread_cond_destroy(&h->cv);
	pthread_mutex_destroy(&h->mu);
	worker_free(&h->w);
	free(h);
}

void dg_png_free(struct dg_png *out)
{
	if (!out)
		return;
	struct dg_png_scratch *s = out->scratch;
	if (s) {
		struct stripe_cache *c = s->cache;
		if (c) {
			if (c->helper)
				helper_stop(c->helper);
			worker_free(&c->main);
			free(c->st);
			free(c->res);
			free(c->store);
			free(c);
		}
		free(s->rows);
		free(s->axbuf[0]);
		free(s->axbuf[1]);
		free(s->hrow[0]);
		free(s->hrow[1]);
		free(s->acc);
		free(s);
	}
	free(out->data);
	memset(out, 0, sizeof(*out));
}
