/* frame: BGRX framebuffer checks, region crop, area-coverage scaling, the
 * conversion of rows to RGB, and the content hash. See frame-priv.h for the
 * contracts; the PNG encoders built on these rows are frame-png.c (libpng,
 * one stream) and frame-stripes.c (striped, cached).
 */
#include "desktop/worker/frame-int-priv.h"

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

void dg_frame_fit(int w, int h, int max_w, int max_h, int *out_w, int *out_h)
{
	/* w/h against max_w/max_h in 64 bits: whichever side binds is filled,
	 * the other rounded to the nearest (halves up). */
	if (w < 1 || h < 1 || max_w < 1 || max_h < 1) {
		*out_w = max_w > 0 ? max_w : 1;
		*out_h = max_h > 0 ? max_h : 1;
		return;
	}
	long long ow = max_w, oh = max_h;
	if ((long long)w * max_h <= (long long)h * max_w)
		ow = (2LL * w * max_h + h) / (2LL * h);
	else
		oh = (2LL * h * max_w + w) / (2LL * w);
	*out_w = (int)(ow < 1 ? 1 : ow > max_w ? max_w : ow);
	*out_h = (int)(oh < 1 ? 1 : oh > max_h ? max_h : oh);
}

int dg_frame_check_geometry(const struct dg_frame *f, const int region[4], int out_w, int out_h,
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
	if (dg_frame_grow(buf, cap, need))
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

int dg_frame_resampler_init(struct resampler *rs, const struct dg_frame *f, const int r[4],
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
		if (dg_frame_grow((void **)&s->hrow[i], &s->hcap[i], n * sizeof(uint32_t)))
			return -ENOMEM;
		s->hkey[i] = -1;
	}
	if (dg_frame_grow((void **)&s->acc, &s->acc_cap, n * sizeof(uint64_t)))
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

void dg_frame_resample_row(struct resampler *rs, int oy, uint8_t *out)
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

void dg_frame_convert_row(const struct dg_frame *f, const int r[4], int y, uint8_t *out)
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
	int rc = dg_frame_check_geometry(f, region, out_w, out_h, r, err);
	if (rc)
		return rc;
	if (!rgb || rgb_stride < (size_t)out_w * 3)
		return dg_err_set(err, -EINVAL, "frame: output stride %zu is below width * 3",
				  rgb_stride);
	struct dg_png_scratch s;
	memset(&s, 0, sizeof(s));
	struct resampler rs;
	rc = dg_frame_resampler_init(&rs, f, r, out_w, out_h, &s);
	if (rc == 0) {
		for (int y = 0; y < out_h; y++)
			dg_frame_resample_row(&rs, y, rgb + (size_t)y * rgb_stride);
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

uint64_t dg_frame_hash_rows(const struct dg_frame *f, int y0, int y1)
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
	return dg_frame_hash_rows(f, 0, f->h);
}
