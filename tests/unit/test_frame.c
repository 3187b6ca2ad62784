/* PNG screenshots from BGRX framebuffers: exact round trips through libpng's
 * decoder (every filter and strategy), crop, area resampling, the content
 * hash, limits at their boundaries, hostile geometry, and buffer reuse; the
 * striped encoder's stream (checked chunk by chunk and with zlib's own
 * decoder) and its stripe cache. */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "frame-priv.h"

#define FRAMES_DIR DG_SOURCE_DIR "/tests/data/frames"

static struct dg_err err;

/* A BGRX frame owned by the test; X bytes and row padding hold garbage so a
 * leak of either into the image shows. */
struct tframe {
	struct dg_frame f;
	uint8_t *buf;
};

static uint32_t rng_state = 12345;
static uint32_t rnd(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 8;
}

static void tframe_alloc(struct tframe *t, int w, int h, size_t pad)
{
	t->f.w = w;
	t->f.h = h;
	t->f.stride = (size_t)w * 4 + pad;
	t->buf = malloc(t->f.stride * (size_t)h);
	cr_assert(t->buf);
	for (size_t i = 0; i < t->f.stride * (size_t)h; i++)
		t->buf[i] = (uint8_t)rnd();
	t->f.pixels = t->buf;
}

static uint8_t *px(struct tframe *t, int x, int y)
{
	return t->buf + (size_t)y * t->f.stride + (size_t)x * 4;
}

static void set_rgb(struct tframe *t, int x, int y, int r, int g, int b)
{
	uint8_t *p = px(t, x, y);
	p[0] = (uint8_t)b;
	p[1] = (uint8_t)g;
	p[2] = (uint8_t)r;
}

/* Loads an RGB PNG from tests/data/frames as a BGRX frame. */
static void tframe_load(struct tframe *t, const char *name, size_t pad)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", FRAMES_DIR, name);
	png_image img;
	memset(&img, 0, sizeof(img));
	img.version = PNG_IMAGE_VERSION;
	cr_assert(png_image_begin_read_from_file(&img, path), "%s: %s", path, img.message);
	img.format = PNG_FORMAT_RGB;
	uint8_t *rgb = malloc(PNG_IMAGE_SIZE(img));
	cr_assert(png_image_finish_read(&img, NULL, rgb, 0, NULL), "%s", img.message);
	tframe_alloc(t, (int)img.width, (int)img.height, pad);
	for (int y = 0; y < t->f.h; y++)
		for (int x = 0; x < t->f.w; x++) {
			const uint8_t *s = rgb + ((size_t)y * (size_t)t->f.w + (size_t)x) * 3;
			set_rgb(t, x, y, s[0], s[1], s[2]);
		}
	free(rgb);
}

static void tframe_free(struct tframe *t)
{
	free(t->buf);
	t->buf = NULL;
}

/* Decodes PNG bytes to RGB; checks the size. Caller frees. */
static uint8_t *decode(const struct dg_png *p, int w, int h)
{
	png_image img;
	memset(&img, 0, sizeof(img));
	img.version = PNG_IMAGE_VERSION;
	cr_assert(png_image_begin_read_from_memory(&img, p->data, p->len), "decode: %s",
		  img.message);
	cr_assert_eq(img.width, (png_uint_32)w);
	cr_assert_eq(img.height, (png_uint_32)h);
	cr_assert_eq(img.format & PNG_FORMAT_FLAG_ALPHA, 0u, "the PNG has an alpha channel");
	img.format = PNG_FORMAT_RGB;
	uint8_t *rgb = malloc(PNG_IMAGE_SIZE(img));
	cr_assert(png_image_finish_read(&img, NULL, rgb, 0, NULL), "decode: %s", img.message);
	return rgb;
}

/* Asserts that rgb (w x h, tightly packed) equals the region of t. */
static void assert_same(struct tframe *t, const int r[4], const uint8_t *rgb)
{
	for (int y = 0; y < r[3]; y++)
		for (int x = 0; x < r[2]; x++) {
			const uint8_t *s = px(t, r[0] + x, r[1] + y);
			const uint8_t *d = rgb + ((size_t)y * (size_t)r[2] + (size_t)x) * 3;
			if (d[0] != s[2] || d[1] != s[1] || d[2] != s[0])
				cr_assert_fail("pixel %d,%d of region %d,%d %dx%d: got %d,%d,%d want "
					 "%d,%d,%d",
					 x, y, r[0], r[1], r[2], r[3], d[0], d[1], d[2], s[2], s[1],
					 s[0]);
		}
}

/* Encodes the region (NULL: all) unscaled with opts and checks the round trip. */
static void roundtrip(struct tframe *t, const int *region, const struct dg_png_opts *o,
		      struct dg_png *p)
{
	int all[4] = {0, 0, t->f.w, t->f.h};
	const int *r = region ? region : all;
	int rc = dg_png_encode_opts(&t->f, region, r[2], r[3], o, p, &err);
	cr_assert_eq(rc, 0, "rc %d: %s", rc, err.msg);
	uint8_t *rgb = decode(p, r[2], r[3]);
	assert_same(t, r, rgb);
	free(rgb);
}

static const struct dg_png_opts all_opts[] = {
	{1, DG_PNG_STRATEGY_DEFAULT, DG_PNG_FILTER_NONE, DG_PNG_MAX_BYTES},
	{1, DG_PNG_STRATEGY_DEFAULT, DG_PNG_FILTER_SUB, DG_PNG_MAX_BYTES},
	{1, DG_PNG_STRATEGY_RLE, DG_PNG_FILTER_UP, DG_PNG_MAX_BYTES},
	{1, DG_PNG_STRATEGY_RLE, DG_PNG_FILTER_ROWS, DG_PNG_MAX_BYTES},
	{1, DG_PNG_STRATEGY_DEFAULT, DG_PNG_FILTER_ROWS, DG_PNG_MAX_BYTES},
	{0, DG_PNG_STRATEGY_DEFAULT, DG_PNG_FILTER_ROWS, DG_PNG_MAX_BYTES},
	{6, DG_PNG_STRATEGY_LIBPNG, DG_PNG_FILTER_ADAPTIVE, DG_PNG_MAX_BYTES},
};
#define N_OPTS (sizeof(all_opts) / sizeof(all_opts[0]))

static const char *const frames[] = {"page.png", "mixed.png", "term.png"};

Test(frame, desktop_frames_round_trip_exactly_with_every_setting)
{
	struct dg_png p = DG_PNG_INIT;
	for (size_t i = 0; i < 3; i++) {
		struct tframe t;
		tframe_load(&t, frames[i], 0);
		cr_assert_eq(t.f.w, 1280);
		cr_assert_eq(t.f.h, 800);
		roundtrip(&t, NULL, NULL, &p);
		for (size_t k = 0; k < N_OPTS; k++)
			roundtrip(&t, NULL, &all_opts[k], &p);
		tframe_free(&t);
	}
	dg_png_free(&p);
}

Test(frame, channel_order_is_bgrx_in_rgb_out)
{
	uint8_t pix[8] = {1, 2, 3, 4, 0x10, 0x20, 0x30, 0x40}; /* B G R X, B G R X */
	struct dg_frame f = {pix, 2, 1, 8};
	struct dg_png p = DG_PNG_INIT;
	cr_assert_eq(dg_png_encode(&f, NULL, 2, 1, &p, &err), 0, "%s", err.msg);
	uint8_t *rgb = decode(&p, 2, 1);
	uint8_t want[6] = {3, 2, 1, 0x30, 0x20, 0x10};
	cr_assert_arr_eq(rgb, want, 6);
	free(rgb);
	dg_png_free(&p);
}

Test(frame, odd_sizes_padded_strides_and_one_pixel)
{
	static const int ws[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 33, 101};
	static const int hs[] = {1, 2, 3, 17};
	struct dg_png p = DG_PNG_INIT;
	for (size_t a = 0; a < sizeof(ws) / sizeof(ws[0]); a++)
		for (size_t b = 0; b < sizeof(hs) / sizeof(hs[0]); b++)
			for (size_t pad = 0; pad <= 12; pad += 4) {
				struct tframe t;
				tframe_alloc(&t, ws[a], hs[b], pad + (pad ? 1 : 0));
				/* Repeat some rows so "up" and zero rows are used too. */
				for (int y = 2; y < t.f.h; y += 3)
					memcpy(px(&t, 0, y), px(&t, 0, y - 1), (size_t)t.f.w * 4);
				for (size_t k = 0; k < N_OPTS; k++)
					roundtrip(&t, NULL, &all_opts[k], &p);
				tframe_free(&t);
			}
	dg_png_free(&p);
}

Test(frame, per_row_filter_really_uses_up)
{
	/* Noise rows, each repeated 16 times. With Z_RLE (which sees only runs)
	 * the repeats cost nothing only when they are written with "up"; a
	 * per-row choice that silently fell back to "none" (libpng drops "up"
	 * when it was not in the mask as the first row started) would make the
	 * PNG as big as unfiltered noise. */
	struct tframe t;
	tframe_alloc(&t, 256, 128, 0);
	for (int y = 0; y < t.f.h; y++)
		if (y % 16)
			memcpy(px(&t, 0, y), px(&t, 0, y - 1), (size_t)t.f.w * 4);
	struct dg_png p = DG_PNG_INIT;
	struct dg_png_opts o = {1, DG_PNG_STRATEGY_RLE, DG_PNG_FILTER_NONE, DG_PNG_MAX_BYTES};
	roundtrip(&t, NULL, &o, &p);
	size_t none = p.len;
	o.filter = DG_PNG_FILTER_ROWS;
	roundtrip(&t, NULL, &o, &p);
	cr_assert_lt(p.len * 8, none, "rows %zu bytes, none %zu bytes", p.len, none);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, region_crop_is_exact)
{
	struct tframe t;
	tframe_load(&t, "mixed.png", 20);
	struct dg_png p = DG_PNG_INIT;
	const int regions[][4] = {
		{0, 0, 1280, 800},  {0, 0, 1, 1},       {1279, 799, 1, 1}, {600, 300, 333, 211},
		{1, 1, 1279, 799},  {1000, 0, 280, 800}, {0, 799, 1280, 1}, {641, 97, 3, 500},
	};
	for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++)
		roundtrip(&t, regions[i], NULL, &p);
	tframe_free(&t);
	dg_png_free(&p);
}

/* Resamples t's region to ow x oh with dg_frame_scale; caller frees. */
static uint8_t *scale(struct tframe *t, const int *region, int ow, int oh)
{
	uint8_t *rgb = malloc((size_t)ow * (size_t)oh * 3);
	int rc = dg_frame_scale(&t->f, region, ow, oh, rgb, (size_t)ow * 3, &err);
	cr_assert_eq(rc, 0, "rc %d: %s", rc, err.msg);
	return rgb;
}

Test(frame, downscale_averages_by_area)
{
	/* 3 -> 2: output 0 covers source 0 and half of 1: (2a + b) / 3. */
	struct tframe t;
	tframe_alloc(&t, 3, 1, 0);
	set_rgb(&t, 0, 0, 0, 255, 10);
	set_rgb(&t, 1, 0, 30, 0, 20);
	set_rgb(&t, 2, 0, 90, 255, 200);
	uint8_t *rgb = scale(&t, NULL, 2, 1);
	/* (2*0+30)/3=10, (2*255+0)/3=170, (20+20)/3=13.3->13;
	 * (30+180)/3=70, (0+510)/3=170, (20+400)/3=140 */
	uint8_t want[6] = {10, 170, 13, 70, 170, 140};
	cr_assert_arr_eq(rgb, want, 6, "got %d %d %d %d %d %d", rgb[0], rgb[1], rgb[2], rgb[3],
			 rgb[4], rgb[5]);
	free(rgb);
	tframe_free(&t);

	/* 2x2 blocks -> 1 pixel each: plain averages, rounded half up. */
	tframe_alloc(&t, 4, 2, 8);
	int vals[2][4] = {{0, 1, 100, 200}, {0, 0, 51, 50}};
	for (int y = 0; y < 2; y++)
		for (int x = 0; x < 4; x++)
			set_rgb(&t, x, y, vals[y][x], 255 - vals[y][x], 7);
	rgb = scale(&t, NULL, 2, 1);
	/* (0+1+0+0)/4 = 0.25 -> 0; (100+200+51+50)/4 = 100.25 -> 100 */
	cr_assert_eq(rgb[0], 0);
	cr_assert_eq(rgb[1], 255);
	cr_assert_eq(rgb[2], 7);
	cr_assert_eq(rgb[3], 100);
	cr_assert_eq(rgb[4], 155); /* (155+55+204+205)/4 = 154.75 -> 155 */
	cr_assert_eq(rgb[5], 7);
	free(rgb);
	tframe_free(&t);
}

Test(frame, downscale_1280x800_to_1024x640_keeps_aligned_blocks)
{
	/* 5x5 blocks of one colour each shrink to exact 4x4 blocks. */
	struct tframe t;
	tframe_alloc(&t, 1280, 800, 0);
	for (int y = 0; y < 800; y++)
		for (int x = 0; x < 1280; x++) {
			int bx = x / 5, by = y / 5;
			set_rgb(&t, x, y, (bx * 7) & 255, (by * 13) & 255, (bx ^ by) & 255);
		}
	uint8_t *rgb = scale(&t, NULL, 1024, 640);
	for (int y = 0; y < 640; y++)
		for (int x = 0; x < 1024; x++) {
			int bx = x / 4, by = y / 4;
			const uint8_t *d = rgb + ((size_t)y * 1024 + (size_t)x) * 3;
			if (d[0] != ((bx * 7) & 255) || d[1] != ((by * 13) & 255) ||
			    d[2] != ((bx ^ by) & 255))
				cr_assert_fail("pixel %d,%d: %d,%d,%d", x, y, d[0], d[1], d[2]);
		}
	free(rgb);

	/* The encoder streams the same pixels as dg_frame_scale. */
	struct dg_png p = DG_PNG_INIT;
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1024, 640, &p, &err), 0, "%s", err.msg);
	uint8_t *dec = decode(&p, 1024, 640);
	rgb = scale(&t, NULL, 1024, 640);
	cr_assert_arr_eq(dec, rgb, (size_t)1024 * 640 * 3);
	free(dec);
	free(rgb);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, scaled_real_frame_matches_dg_frame_scale)
{
	struct tframe t;
	tframe_load(&t, "page.png", 4);
	struct dg_png p = DG_PNG_INIT;
	const int sizes[][6] = {
		/* region x, y, w, h, output w, h */
		{0, 0, 1280, 800, 1024, 640}, {0, 0, 1280, 800, 1366, 768}, {0, 0, 1280, 800, 1, 1},
		{100, 50, 200, 100, 800, 400}, {7, 9, 333, 77, 500, 51},    {1279, 0, 1, 800, 3, 7},
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const int *s = sizes[i];
		int rc = dg_png_encode(&t.f, s, s[4], s[5], &p, &err);
		cr_assert_eq(rc, 0, "rc %d: %s", rc, err.msg);
		uint8_t *dec = decode(&p, s[4], s[5]);
		uint8_t *rgb = scale(&t, s, s[4], s[5]);
		cr_assert_arr_eq(dec, rgb, (size_t)s[4] * (size_t)s[5] * 3, "size %zu", i);
		free(dec);
		free(rgb);
	}
	dg_png_free(&p);
	tframe_free(&t);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* Length of the overlap of output pixel o and source pixel s along an axis
 * of S source and O output pixels, in units where the axis is S * O / g
 * long: the definition in frame-priv.h, computed the slow way. */
static uint64_t overlap(uint64_t S, uint64_t O, uint64_t o, uint64_t s)
{
	uint64_t g = gcd64(S, O), sp = S / g, op = O / g;
	uint64_t lo = o * sp > s * op ? o * sp : s * op;
	uint64_t hi = (o + 1) * sp < (s + 1) * op ? (o + 1) * sp : (s + 1) * op;
	return hi > lo ? hi - lo : 0;
}

/* Channel ch (0 R, 1 G, 2 B) of output pixel ox, oy when the region r of t
 * is resampled to ow x oh, by the definition: every source pixel weighted
 * by its overlap, divided by the total weight, rounded half up. */
static int ref_pixel(struct tframe *t, const int r[4], int ow, int oh, int ox, int oy, int ch)
{
	uint64_t sw = (uint64_t)r[2], sh = (uint64_t)r[3];
	uint64_t div = (sw / gcd64(sw, (uint64_t)ow)) * (sh / gcd64(sh, (uint64_t)oh));
	uint64_t sum = 0;
	for (int y = 0; y < r[3]; y++) {
		uint64_t wy = overlap(sh, (uint64_t)oh, (uint64_t)oy, (uint64_t)y);
		for (int x = 0; wy && x < r[2]; x++) {
			uint64_t wx = overlap(sw, (uint64_t)ow, (uint64_t)ox, (uint64_t)x);
			sum += wx * wy * px(t, r[0] + x, r[1] + y)[2 - ch];
		}
	}
	return (int)((sum + div / 2) / div);
}

Test(frame, resampling_matches_a_brute_force_reference)
{
	/* Every pairing of these source and output lengths on x, a spread on y:
	 * shrinking, enlarging, equal, coprime, and 1. */
	static const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 11, 13, 29};
	const size_t ns = sizeof(sizes) / sizeof(sizes[0]);
	struct tframe t;
	tframe_alloc(&t, 29, 29, 8);
	uint8_t *rgb = malloc(29 * 29 * 3);
	for (size_t a = 0; a < ns; a++)
		for (size_t b = 0; b < ns; b++)
			for (size_t c = 0; c < ns; c += 3)
				for (size_t d = 0; d < ns; d += 2) {
					int sw = sizes[a], ow = sizes[b], sh = sizes[c], oh = sizes[d];
					/* Right-aligned, to reach the region's last column. */
					int r[4] = {29 - sw, 29 - sh, sw, sh};
					int rc = dg_frame_scale(&t.f, r, ow, oh, rgb, (size_t)ow * 3, &err);
					cr_assert_eq(rc, 0, "%s", err.msg);
					for (int oy = 0; oy < oh; oy++)
						for (int ox = 0; ox < ow; ox++)
							for (int ch = 0; ch < 3; ch++) {
								size_t i = ((size_t)oy * (size_t)ow + (size_t)ox) * 3;
								int got = rgb[i + (size_t)ch];
								int want = ref_pixel(&t, r, ow, oh, ox, oy, ch);
								if (got != want)
									cr_assert_fail("%dx%d -> %dx%d: pixel %d,%d "
										       "channel %d: %d, want %d",
										       sw, sh, ow, oh, ox, oy, ch, got,
										       want);
							}
				}
	free(rgb);
	tframe_free(&t);
}

/* Mean of all pixels of t, rounded half up, per R, G, B. */
static void mean(struct tframe *t, uint8_t want[3])
{
	uint64_t sum[3] = {0, 0, 0}, n = (uint64_t)t->f.w * (uint64_t)t->f.h;
	for (int y = 0; y < t->f.h; y++)
		for (int x = 0; x < t->f.w; x++)
			for (int c = 0; c < 3; c++)
				sum[c] += px(t, x, y)[2 - c];
	for (int c = 0; c < 3; c++)
		want[c] = (uint8_t)((sum[c] + n / 2) / n);
}

Test(frame, means_at_both_sides_of_the_32_bit_sum_limit)
{
	/* One output pixel of a w x h frame divides by w * h: 2896^2 is just
	 * below 2^23 (32-bit sums), 4099 * 2049 just above (64-bit sums), and
	 * at 4500 * 4000 the sums of a white frame no longer fit 32 bits. */
	static const int dims[][2] = {{2896, 2896}, {4099, 2049}, {4500, 4000}};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		struct tframe t;
		tframe_alloc(&t, dims[i][0], dims[i][1], 0);
		uint8_t want[3], got[3];
		mean(&t, want);
		cr_assert_eq(dg_frame_scale(&t.f, NULL, 1, 1, got, 3, &err), 0, "%s", err.msg);
		cr_assert_arr_eq(got, want, 3, "%dx%d: %d,%d,%d want %d,%d,%d", dims[i][0],
				 dims[i][1], got[0], got[1], got[2], want[0], want[1], want[2]);
		/* All white stays 255 (the largest sums). */
		for (int y = 0; y < t.f.h; y++)
			memset(px(&t, 0, y), 0xff, (size_t)t.f.w * 4);
		cr_assert_eq(dg_frame_scale(&t.f, NULL, 1, 1, got, 3, &err), 0, "%s", err.msg);
		cr_assert(got[0] == 255 && got[1] == 255 && got[2] == 255);
		tframe_free(&t);
	}
}

Test(frame, whole_frame_to_one_pixel_is_the_mean)
{
	struct tframe t;
	tframe_alloc(&t, 3, 3, 0);
	for (int y = 0; y < 3; y++)
		for (int x = 0; x < 3; x++)
			set_rgb(&t, x, y, y * 3 + x, 100, (x == 1 && y == 1) ? 255 : 0);
	uint8_t *rgb = scale(&t, NULL, 1, 1);
	cr_assert_eq(rgb[0], 4);  /* 36 / 9 */
	cr_assert_eq(rgb[1], 100);
	cr_assert_eq(rgb[2], 28); /* 255 / 9 = 28.3 */
	free(rgb);
	tframe_free(&t);
}

Test(frame, upscale_integer_zoom_replicates_pixels)
{
	struct tframe t;
	tframe_alloc(&t, 5, 4, 4);
	int region[4] = {1, 1, 3, 2};
	uint8_t *rgb = scale(&t, region, 9, 8); /* 3x and 4x */
	for (int y = 0; y < 8; y++)
		for (int x = 0; x < 9; x++) {
			const uint8_t *s = px(&t, 1 + x / 3, 1 + y / 4);
			const uint8_t *d = rgb + ((size_t)y * 9 + (size_t)x) * 3;
			cr_assert(d[0] == s[2] && d[1] == s[1] && d[2] == s[0], "pixel %d,%d", x,
				  y);
		}
	free(rgb);
	tframe_free(&t);
}

Test(frame, upscale_blends_only_at_block_edges)
{
	/* 2 -> 3: output 1 straddles both source pixels equally. */
	struct tframe t;
	tframe_alloc(&t, 2, 1, 0);
	set_rgb(&t, 0, 0, 0, 10, 255);
	set_rgb(&t, 1, 0, 1, 20, 0);
	uint8_t *rgb = scale(&t, NULL, 3, 1);
	uint8_t want[9] = {0, 10, 255, 1, 15, 128, 1, 20, 0}; /* 0.5 and 127.5 round up */
	cr_assert_arr_eq(rgb, want, 9);
	free(rgb);
	tframe_free(&t);
}

Test(frame, hash_follows_visible_pixels_only)
{
	struct tframe t;
	tframe_alloc(&t, 7, 5, 12); /* odd width: the last pixel is a half word */
	uint64_t h0 = dg_frame_hash(&t.f);
	cr_assert_neq(h0, 0);
	cr_assert_eq(dg_frame_hash(&t.f), h0, "not stable");

	/* X bytes and padding are not part of the picture. */
	for (int y = 0; y < 5; y++) {
		for (int x = 0; x < 7; x++)
			px(&t, x, y)[3] ^= 0xff;
		memset(px(&t, 7, y), 0x5a, 12);
	}
	cr_assert_eq(dg_frame_hash(&t.f), h0, "X bytes or padding changed the hash");

	/* Any single channel of any pixel, one unit, changes it. */
	for (int y = 0; y < 5; y++)
		for (int x = 0; x < 7; x++)
			for (int c = 0; c < 3; c++) {
				px(&t, x, y)[c] ^= 1;
				cr_assert_neq(dg_frame_hash(&t.f), h0, "pixel %d,%d byte %d", x,
					      y, c);
				px(&t, x, y)[c] ^= 1;
			}
	cr_assert_eq(dg_frame_hash(&t.f), h0);

	/* Swapping two pixels (same multiset of words) changes it. */
	uint8_t tmp[4];
	memcpy(tmp, px(&t, 0, 0), 4);
	memcpy(px(&t, 0, 0), px(&t, 2, 0), 4);
	memcpy(px(&t, 2, 0), tmp, 4);
	cr_assert_neq(dg_frame_hash(&t.f), h0);
	tframe_free(&t);

	/* The same bytes as 2x1 and 1x2 are different frames. */
	uint8_t pix[8] = {1, 2, 3, 0, 4, 5, 6, 0};
	struct dg_frame a = {pix, 2, 1, 8}, b = {pix, 1, 2, 4};
	cr_assert_neq(dg_frame_hash(&a), dg_frame_hash(&b));

	/* Refused frames hash to 0. */
	struct dg_frame bad = {pix, 0, 1, 8};
	cr_assert_eq(dg_frame_hash(&bad), 0);
	cr_assert_eq(dg_frame_hash(NULL), 0);
}

Test(frame, hash_of_real_frames_differs_and_repeats)
{
	uint64_t h[3];
	for (size_t i = 0; i < 3; i++) {
		struct tframe t;
		tframe_load(&t, frames[i], 0);
		h[i] = dg_frame_hash(&t.f);
		cr_assert_eq(dg_frame_hash(&t.f), h[i]);
		/* The same picture with another stride and other X bytes. */
		struct tframe u;
		tframe_load(&u, frames[i], 64);
		cr_assert_eq(dg_frame_hash(&u.f), h[i]);
		px(&u, 640, 400)[1] ^= 0x80;
		cr_assert_neq(dg_frame_hash(&u.f), h[i]);
		tframe_free(&u);
		tframe_free(&t);
	}
	cr_assert(h[0] != h[1] && h[1] != h[2] && h[0] != h[2]);
}

#define assert_einval(rc, needle)                                                          \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, -EINVAL, "rc %d, message \"%s\"", rc_, err.msg);        \
		cr_assert(strstr(err.msg, (needle)) != NULL, "message \"%s\" lacks \"%s\"", \
			  err.msg, (needle));                                              \
	} while (0)

Test(frame, size_limits_at_the_boundary)
{
	struct dg_png p = DG_PNG_INIT;
	size_t n = (size_t)(DG_FRAME_MAX_DIM + 1) * 4;
	uint8_t *pix = calloc(1, n);
	struct dg_frame f = {pix, DG_FRAME_MAX_DIM, 1, n};
	cr_assert_eq(dg_png_encode(&f, NULL, DG_FRAME_MAX_DIM, 1, &p, &err), 0, "%s", err.msg);
	f.w = DG_FRAME_MAX_DIM + 1;
	assert_einval(dg_png_encode(&f, NULL, 1, 1, &p, &err), "width 8193");
	cr_assert_eq(p.len, 0);

	struct dg_frame col = {pix, 1, DG_FRAME_MAX_DIM, 4};
	cr_assert_eq(dg_png_encode(&col, NULL, 1, DG_FRAME_MAX_DIM, &p, &err), 0, "%s",
		     err.msg);
	col.h = DG_FRAME_MAX_DIM + 1;
	assert_einval(dg_png_encode(&col, NULL, 1, 1, &p, &err), "height 8193");

	/* Output size: up to the same maximum, then refused. */
	struct dg_frame one = {pix, 1, 1, 4};
	cr_assert_eq(dg_png_encode(&one, NULL, DG_FRAME_MAX_DIM, 2, &p, &err), 0, "%s",
		     err.msg);
	assert_einval(dg_png_encode(&one, NULL, DG_FRAME_MAX_DIM + 1, 2, &p, &err),
		      "output size 8193x2");
	assert_einval(dg_png_encode(&one, NULL, 2, DG_FRAME_MAX_DIM + 1, &p, &err),
		      "output size 2x8193");
	free(pix);
	dg_png_free(&p);
}

Test(frame, output_byte_limit_at_the_boundary)
{
	struct tframe t;
	tframe_load(&t, "term.png", 0);
	struct dg_png p = DG_PNG_INIT;
	struct dg_png_opts o = DG_PNG_OPTS_DEFAULT;
	cr_assert_eq(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), 0, "%s", err.msg);
	size_t exact = p.len;

	o.max_bytes = exact;
	cr_assert_eq(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p.len, exact);

	/* One byte less: libpng's error path (longjmp) runs; under ASan this
	 * also checks that it leaks nothing. */
	o.max_bytes = exact - 1;
	memset(&err, 0, sizeof(err));
	int rc = dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err);
	cr_assert_eq(rc, -E2BIG, "rc %d: %s", rc, err.msg);
	cr_assert(strstr(err.msg, "exceeds") != NULL, "%s", err.msg);
	cr_assert_eq(p.len, 0);

	/* Tiny limits fail in the header, not just the data. */
	o.max_bytes = 1;
	cr_assert_eq(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), -E2BIG);

	/* The buffer is still usable afterwards. */
	cr_assert_eq(dg_png_encode_opts(&t.f, NULL, 1280, 800, NULL, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p.len, exact);

	/* The limit itself is bounded. */
	o.max_bytes = DG_PNG_MAX_BYTES;
	cr_assert_eq(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), 0, "%s", err.msg);
	o.max_bytes = (size_t)DG_PNG_MAX_BYTES + 1;
	assert_einval(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), "max_bytes");
	o.max_bytes = 0;
	assert_einval(dg_png_encode_opts(&t.f, NULL, 1280, 800, &o, &p, &err), "max_bytes");
	tframe_free(&t);
	dg_png_free(&p);
}

Test(frame, bad_settings_refused)
{
	uint8_t pix[4] = {0};
	struct dg_frame f = {pix, 1, 1, 4};
	struct dg_png p = DG_PNG_INIT;
	struct dg_png_opts o = DG_PNG_OPTS_DEFAULT;
	o.level = 10;
	assert_einval(dg_png_encode_opts(&f, NULL, 1, 1, &o, &p, &err), "level 10");
	o.level = -1;
	assert_einval(dg_png_encode_opts(&f, NULL, 1, 1, &o, &p, &err), "level -1");
	o = DG_PNG_OPTS_DEFAULT;
	o.filter = (enum dg_png_filter)99;
	assert_einval(dg_png_encode_opts(&f, NULL, 1, 1, &o, &p, &err), "filter");
	o = DG_PNG_OPTS_DEFAULT;
	o.strategy = (enum dg_png_strategy)-1;
	assert_einval(dg_png_encode_opts(&f, NULL, 1, 1, &o, &p, &err), "strategy");
	dg_png_free(&p);
}

Test(frame, hostile_geometry_refused)
{
	uint8_t pix[64] = {0};
	struct dg_png p = DG_PNG_INIT;
	struct dg_frame f;
#define FRAME(px_, w_, h_, s_) (f = (struct dg_frame){(px_), (w_), (h_), (s_)}, &f)
	assert_einval(dg_png_encode(NULL, NULL, 1, 1, &p, &err), "no frame");
	assert_einval(dg_png_encode(FRAME(NULL, 1, 1, 4), NULL, 1, 1, &p, &err), "no pixels");
	assert_einval(dg_png_encode(FRAME(pix, 0, 1, 4), NULL, 1, 1, &p, &err), "width 0");
	assert_einval(dg_png_encode(FRAME(pix, 1, 0, 4), NULL, 1, 1, &p, &err), "height 0");
	assert_einval(dg_png_encode(FRAME(pix, -4, 1, 4), NULL, 1, 1, &p, &err), "width -4");
	assert_einval(dg_png_encode(FRAME(pix, 1, INT_MIN, 4), NULL, 1, 1, &p, &err),
		      "height -2147483648");
	assert_einval(dg_png_encode(FRAME(pix, INT_MAX, 1, SIZE_MAX), NULL, 1, 1, &p, &err),
		      "width 2147483647");
	assert_einval(dg_png_encode(FRAME(pix, 4, 2, 15), NULL, 4, 2, &p, &err),
		      "stride 15 is below width * 4 (16)");
	/* A stride whose span over the rows overflows size_t. */
	assert_einval(dg_png_encode(FRAME(pix, 2, 3, SIZE_MAX / 2), NULL, 2, 3, &p, &err),
		      "overflows");
	assert_einval(dg_png_encode(FRAME(pix, 2, 8192, SIZE_MAX / 8000), NULL, 2, 3, &p, &err),
		      "overflows");

	/* Regions: negative, empty, past an edge, and sums that overflow int. */
	f = (struct dg_frame){pix, 4, 4, 16};
	const int bad[][4] = {
		{-1, 0, 1, 1}, {0, -1, 1, 1},      {0, 0, 0, 1},       {0, 0, 1, 0},
		{0, 0, -1, 1}, {4, 0, 1, 1},       {0, 4, 1, 1},       {3, 0, 2, 1},
		{0, 3, 1, 2},  {1, 0, INT_MAX, 1}, {0, 1, 1, INT_MAX}, {INT_MAX, 0, 1, 1},
		{INT_MIN, 0, INT_MAX, 1},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_einval(dg_png_encode(&f, bad[i], 1, 1, &p, &err), "is not inside the 4x4");
	const int edge[4] = {3, 3, 1, 1};
	cr_assert_eq(dg_png_encode(&f, edge, 1, 1, &p, &err), 0, "%s", err.msg);

	/* Output sizes. */
	assert_einval(dg_png_encode(&f, NULL, 0, 4, &p, &err), "output size 0x4");
	assert_einval(dg_png_encode(&f, NULL, 4, -1, &p, &err), "output size 4x-1");
	assert_einval(dg_png_encode(&f, NULL, INT_MIN, 4, &p, &err), "output size");
	assert_einval(dg_png_encode(&f, NULL, 4, 4, NULL, &err), "no output buffer");

	uint8_t rgb[48];
	assert_einval(dg_frame_scale(&f, NULL, 4, 4, rgb, 11, &err), "output stride 11");
	assert_einval(dg_frame_scale(&f, NULL, 4, 4, NULL, 12, &err), "output stride");
	/* Errors without an error buffer are still reported. */
	cr_assert_eq(dg_png_encode(FRAME(pix, 0, 0, 0), NULL, 1, 1, &p, NULL), -EINVAL);
	cr_assert_eq(p.len, 0);
#undef FRAME
	dg_png_free(&p);
}

Test(frame, buffer_is_reused_without_reallocation)
{
	struct tframe t;
	tframe_load(&t, "page.png", 0);
	struct dg_png p = DG_PNG_INIT;
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	uint8_t *data = p.data;
	size_t cap = p.cap, len = p.len;
	struct dg_png_scratch *scratch = p.scratch;
	cr_assert(cap >= len);

	/* The same frame again: same bytes, same buffer, same capacity. */
	uint8_t *copy = malloc(len);
	memcpy(copy, p.data, len);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p.data, data);
	cr_assert_eq(p.cap, cap);
	cr_assert_eq(p.scratch, scratch);
	cr_assert_eq(p.len, len);
	cr_assert_arr_eq(p.data, copy, len, "encoding is not deterministic");
	free(copy);

	/* Smaller work fits in what is there. */
	const int region[4] = {100, 100, 400, 300};
	cr_assert_eq(dg_png_encode(&t.f, region, 400, 300, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1024, 640, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	cr_assert_eq(p.data, data);
	cr_assert_eq(p.cap, cap);

	dg_png_free(&p);
	cr_assert_null(p.data);
	cr_assert_eq(p.cap, 0);
	cr_assert_null(p.scratch);
	dg_png_free(&p); /* twice is harmless */
	tframe_free(&t);
}

/* ---- the striped encoder and its stripe cache ---- */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* t's pixels as tightly packed RGB; caller frees. */
static uint8_t *frame_rgb(struct tframe *t)
{
	uint8_t *rgb = malloc((size_t)t->f.w * (size_t)t->f.h * 3);
	cr_assert(rgb);
	for (int y = 0; y < t->f.h; y++)
		for (int x = 0; x < t->f.w; x++) {
			uint8_t *d = rgb + ((size_t)y * (size_t)t->f.w + (size_t)x) * 3;
			d[0] = px(t, x, y)[2];
			d[1] = px(t, x, y)[1];
			d[2] = px(t, x, y)[0];
		}
	return rgb;
}

/* Checks the PNG without libpng: the signature; every chunk's CRC (zlib's
 * crc32 over type and data); IHDR; only IHDR, IDAT and IEND, IEND last; and
 * IDAT data that zlib's uncompress2 inflates entirely, Adler-32 included,
 * to exactly h rows of filter byte 0 and the w x h RGB pixels want. */
static void check_stream(const struct dg_png *p, int w, int h, const uint8_t *want)
{
	static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
	cr_assert(p->len > 8 && memcmp(p->data, sig, 8) == 0, "no PNG signature");
	size_t pos = 8, zlen = 0;
	uint8_t *z = malloc(p->len);
	bool ihdr = false, iend = false;
	while (pos < p->len) {
		cr_assert(!iend, "data after IEND");
		cr_assert(p->len - pos >= 12, "truncated chunk at %zu", pos);
		uint32_t len = be32(p->data + pos);
		cr_assert(len <= p->len - pos - 12, "chunk at %zu overruns", pos);
		const uint8_t *type = p->data + pos + 4, *data = type + 4;
		cr_assert_eq((uint32_t)crc32(0, type, len + 4), be32(data + len),
			     "bad CRC of the %.4s chunk at %zu", (const char *)type, pos);
		if (memcmp(type, "IHDR", 4) == 0) {
			cr_assert(!ihdr && pos == 8 && len == 13, "IHDR misplaced");
			cr_assert_eq(be32(data), (uint32_t)w);
			cr_assert_eq(be32(data + 4), (uint32_t)h);
			const uint8_t rest[5] = {8, 2, 0, 0, 0};
			cr_assert_arr_eq(data + 8, rest, 5, "IHDR depth, colour type, methods");
			ihdr = true;
		} else if (memcmp(type, "IDAT", 4) == 0) {
			cr_assert(ihdr);
			memcpy(z + zlen, data, len);
			zlen += len;
		} else if (memcmp(type, "IEND", 4) == 0) {
			cr_assert_eq(len, 0u);
			iend = true;
		} else {
			cr_assert_fail("unexpected chunk %.4s", (const char *)type);
		}
		pos += 12 + len;
	}
	cr_assert(ihdr && iend, "IHDR or IEND missing");
	size_t row = 1 + (size_t)w * 3;
	uLongf n = (uLongf)(row * (size_t)h + 1); /* one spare byte shows a long stream */
	uLong used = (uLong)zlen;
	uint8_t *raw = malloc(n);
	int zr = uncompress2(raw, &n, z, &used);
	cr_assert_eq(zr, Z_OK, "uncompress2: %d", zr);
	cr_assert_eq(used, (uLong)zlen, "%lu bytes after the zlib stream", (unsigned long)(zlen - used));
	cr_assert_eq(n, (uLongf)(row * (size_t)h), "inflated %lu bytes", (unsigned long)n);
	for (int y = 0; y < h; y++) {
		const uint8_t *r = raw + (size_t)y * row;
		cr_assert_eq(r[0], 0, "row %d filter %d", y, r[0]);
		if (memcmp(r + 1, want + (size_t)y * (size_t)w * 3, (size_t)w * 3) != 0)
			cr_assert_fail("row %d differs", y);
	}
	free(raw);
	free(z);
}

/* Encodes all of t to ow x oh into p with o (NULL: defaults) and checks the
 * result both ways: check_stream and libpng's decoder. */
static void striped(struct tframe *t, int ow, int oh, const struct dg_png_stripe_opts *o,
		    struct dg_png *p)
{
	int rc = dg_png_encode_stripes(&t->f, NULL, ow, oh, o, p, &err);
	cr_assert_eq(rc, 0, "rc %d: %s", rc, err.msg);
	uint8_t *want = ow == t->f.w && oh == t->f.h ? frame_rgb(t) : scale(t, NULL, ow, oh);
	check_stream(p, ow, oh, want);
	uint8_t *dec = decode(p, ow, oh);
	cr_assert_arr_eq(dec, want, (size_t)ow * (size_t)oh * 3, "libpng decodes other pixels");
	free(dec);
	free(want);
}

/* Asserts that a cold encode (fresh buffer, empty cache) of t gives p's
 * bytes exactly. */
static void assert_as_cold(struct tframe *t, int ow, int oh, const struct dg_png_stripe_opts *o,
			   const struct dg_png *p)
{
	struct dg_png q = DG_PNG_INIT;
	int rc = dg_png_encode_stripes(&t->f, NULL, ow, oh, o, &q, &err);
	cr_assert_eq(rc, 0, "rc %d: %s", rc, err.msg);
	cr_assert_eq(q.stripes_reused, 0u);
	cr_assert_eq(q.len, p->len, "warm %zu bytes, cold %zu", p->len, q.len);
	cr_assert_arr_eq(q.data, p->data, q.len, "warm and cold encodes differ");
	dg_png_free(&q);
}

static unsigned n_stripes(int h, int rows)
{
	return (unsigned)((h + rows - 1) / rows);
}

#define assert_stats(p, comp, reused)                                                      \
	do {                                                                               \
		cr_assert_eq((p)->stripes_compressed, (unsigned)(comp),                    \
			     "compressed %u, want %u", (p)->stripes_compressed,            \
			     (unsigned)(comp));                                            \
		cr_assert_eq((p)->stripes_reused, (unsigned)(reused), "reused %u, want %u", \
			     (p)->stripes_reused, (unsigned)(reused));                     \
	} while (0)

Test(frame, striped_encode_of_real_frames_is_one_valid_stream)
{
	static const int rows[] = {1, 7, 32, 50, 64, 799, 800, 8192};
	struct dg_png p = DG_PNG_INIT;
	for (size_t i = 0; i < 3; i++) {
		struct tframe t;
		tframe_load(&t, frames[i], i * 4);
		for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
			struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
			o.rows = rows[k];
			striped(&t, 1280, 800, &o, &p);
			unsigned n = n_stripes(800, rows[k] < 800 ? rows[k] : 800);
			assert_stats(&p, n, 0);
		}
		/* The default, through dg_png_encode, is the same encoder. */
		striped(&t, 1280, 800, NULL, &p);
		size_t len = p.len;
		cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
		cr_assert_eq(p.len, len);
		assert_stats(&p, 0, n_stripes(800, DG_PNG_STRIPE_ROWS));
		tframe_free(&t);
	}
	/* Every level, stored blocks (0) included; the header's check bits
	 * must hold for each (zlib refuses the stream otherwise). */
	struct tframe t;
	tframe_load(&t, "mixed.png", 0);
	for (int level = 0; level <= 9; level++) {
		struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
		o.level = level;
		striped(&t, 1280, 800, &o, &p);
	}
	tframe_free(&t);
	dg_png_free(&p);
}

Test(frame, striped_encode_of_odd_sizes_and_strides)
{
	static const int ws[] = {1, 2, 3, 5, 8, 33, 101};
	static const int hs[] = {1, 2, 3, 17, 65};
	static const int rows[] = {1, 2, 3, 32};
	struct dg_png p = DG_PNG_INIT;
	for (size_t a = 0; a < sizeof(ws) / sizeof(ws[0]); a++)
		for (size_t b = 0; b < sizeof(hs) / sizeof(hs[0]); b++) {
			struct tframe t;
			tframe_alloc(&t, ws[a], hs[b], (a + b) % 3 * 5);
			for (int y = 2; y < t.f.h; y += 3)
				memcpy(px(&t, 0, y), px(&t, 0, y - 1), (size_t)t.f.w * 4);
			for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
				struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
				o.rows = rows[k];
				striped(&t, ws[a], hs[b], &o, &p);
				/* Scaled both ways, too. */
				striped(&t, ws[a] * 2 + 1, hs[b] + 3, &o, &p);
				striped(&t, (ws[a] + 1) / 2, (hs[b] + 2) / 3, &o, &p);
			}
			tframe_free(&t);
		}
	dg_png_free(&p);
}

Test(frame, one_changed_pixel_recompresses_only_its_stripe)
{
	struct tframe t;
	tframe_load(&t, "page.png", 8);
	struct dg_png p = DG_PNG_INIT;
	const unsigned n = n_stripes(800, DG_PNG_STRIPE_ROWS);
	striped(&t, 1280, 800, NULL, &p);
	assert_stats(&p, n, 0);
	/* First and last rows of stripes, the last stripe, and columns at
	 * both edges. */
	static const int at[][2] = {{0, 0}, {1279, 31}, {640, 32}, {3, 400}, {1279, 799}, {0, 767}};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		px(&t, at[i][0], at[i][1])[i % 3] ^= 0x01;
		striped(&t, 1280, 800, NULL, &p);
		assert_stats(&p, 1, n - 1);
		assert_as_cold(&t, 1280, 800, NULL, &p);
	}
	/* X bytes and row padding are not part of the picture: nothing to
	 * recompress, and the same bytes. */
	uint8_t *before = malloc(p.len);
	size_t len = p.len;
	memcpy(before, p.data, len);
	for (int y = 0; y < 800; y += 3) {
		px(&t, y, y)[3] ^= 0xff;
		memset(px(&t, 1280, y), y & 0xff, 8);
	}
	striped(&t, 1280, 800, NULL, &p);
	assert_stats(&p, 0, n);
	cr_assert_eq(p.len, len);
	cr_assert_arr_eq(p.data, before, len);
	free(before);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, unchanged_frame_reuses_every_stripe_byte_for_byte)
{
	struct tframe t;
	tframe_load(&t, "mixed.png", 0);
	struct dg_png p = DG_PNG_INIT;
	const unsigned n = n_stripes(800, DG_PNG_STRIPE_ROWS);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, n, 0);
	size_t len = p.len;
	uint8_t *first = malloc(len), *data = p.data;
	memcpy(first, p.data, len);
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
		assert_stats(&p, 0, n);
		cr_assert_eq(p.len, len);
		cr_assert_eq(p.data, data, "the buffer moved");
		cr_assert_arr_eq(p.data, first, len, "not the same PNG");
	}
	/* The same picture at another address, with another stride and other
	 * X bytes, is the same screen. */
	struct tframe u;
	tframe_load(&u, "mixed.png", 36);
	cr_assert_eq(dg_png_encode(&u.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, 0, n);
	cr_assert_arr_eq(p.data, first, len);
	free(first);
	dg_png_free(&p);
	tframe_free(&u);
	tframe_free(&t);
}

Test(frame, geometry_or_settings_change_rebuilds_the_cache)
{
	struct tframe t;
	tframe_load(&t, "term.png", 4);
	struct dg_png p = DG_PNG_INIT;
	const int R = DG_PNG_STRIPE_ROWS;
	striped(&t, 1280, 800, NULL, &p);
	assert_stats(&p, n_stripes(800, R), 0);
	/* Another output size: all stripes anew, then cached at that size. */
	striped(&t, 1024, 640, NULL, &p);
	assert_stats(&p, n_stripes(640, R), 0);
	striped(&t, 1024, 640, NULL, &p);
	assert_stats(&p, 0, n_stripes(640, R));
	/* The cache holds one geometry: back to full size rebuilds. */
	striped(&t, 1280, 800, NULL, &p);
	assert_stats(&p, n_stripes(800, R), 0);
	/* Other stripe height, other level. */
	struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
	o.rows = 64;
	striped(&t, 1280, 800, &o, &p);
	assert_stats(&p, n_stripes(800, 64), 0);
	o.level = 6;
	striped(&t, 1280, 800, &o, &p);
	assert_stats(&p, n_stripes(800, 64), 0);
	striped(&t, 1280, 800, &o, &p);
	assert_stats(&p, 0, n_stripes(800, 64));
	/* Another frame size over the same memory: one row less, then one
	 * column less. */
	t.f.h = 799;
	striped(&t, 1280, 799, &o, &p);
	assert_stats(&p, n_stripes(799, 64), 0);
	t.f.w = 1279;
	striped(&t, 1279, 799, &o, &p);
	assert_stats(&p, n_stripes(799, 64), 0);
	striped(&t, 1279, 799, &o, &p);
	assert_stats(&p, 0, n_stripes(799, 64));
	assert_as_cold(&t, 1279, 799, &o, &p);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, scaled_stripes_follow_their_source_rows)
{
	/* 1280x800 -> 1024x640: an output stripe of R rows is made from the
	 * 5R/4 source rows under it and a tap or two past its ends; a changed
	 * source row is in one or two stripes' spans, never more, and the
	 * result is exact. Rows 39..41 and 399, 400 sit at stripe edges for
	 * R = 16 and 32. */
	struct tframe t;
	tframe_load(&t, "page.png", 0);
	struct dg_png p = DG_PNG_INIT;
	const unsigned n = n_stripes(640, DG_PNG_STRIPE_ROWS);
	striped(&t, 1024, 640, NULL, &p);
	assert_stats(&p, n, 0);
	static const int rows[] = {0, 39, 40, 41, 399, 400, 760, 799};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		px(&t, (int)i * 150, rows[i])[1] ^= 0x40;
		striped(&t, 1024, 640, NULL, &p);
		cr_assert(p.stripes_compressed >= 1 && p.stripes_compressed <= 2,
			  "row %d: %u stripes recompressed", rows[i], p.stripes_compressed);
		cr_assert_eq(p.stripes_compressed + p.stripes_reused, n);
		assert_as_cold(&t, 1024, 640, NULL, &p);
	}
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, zoom_between_screenshots_keeps_the_cache)
{
	struct tframe t;
	tframe_load(&t, "mixed.png", 0);
	struct dg_png p = DG_PNG_INIT, q = DG_PNG_INIT;
	const unsigned n = n_stripes(800, DG_PNG_STRIPE_ROWS);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	size_t len = p.len;
	uint8_t *first = malloc(len);
	memcpy(first, p.data, len);

	/* A zoom is one stream, the same as the libpng encoder's default. */
	const int zoom[4] = {100, 120, 400, 300};
	cr_assert_eq(dg_png_encode(&t.f, zoom, 400, 300, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, 0, 0);
	cr_assert_eq(dg_png_encode_opts(&t.f, zoom, 400, 300, NULL, &q, &err), 0, "%s", err.msg);
	cr_assert_eq(p.len, q.len);
	cr_assert_arr_eq(p.data, q.data, q.len);
	uint8_t *dec = decode(&p, 400, 300);
	assert_same(&t, zoom, dec);
	free(dec);
	const int enlarge[4] = {10, 10, 50, 40};
	cr_assert_eq(dg_png_encode(&t.f, enlarge, 200, 160, &p, &err), 0, "%s", err.msg);

	/* The screen afterwards: every stripe from the cache. */
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, 0, n);
	cr_assert_eq(p.len, len);
	cr_assert_arr_eq(p.data, first, len);
	/* A region that is the whole frame is the screen. */
	const int all[4] = {0, 0, 1280, 800};
	cr_assert_eq(dg_png_encode(&t.f, all, 1280, 800, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, 0, n);
	cr_assert_arr_eq(p.data, first, len);
	free(first);
	dg_png_free(&q);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, random_edits_keep_warm_and_cold_encodes_identical)
{
	/* Flat rectangles over noise, edited at random: after every edit the
	 * stripes recompressed are exactly those whose rows it touched. */
	const int W = 333, H = 250, R = 16;
	struct tframe t;
	tframe_alloc(&t, W, H, 12);
	for (int k = 0; k < 30; k++) {
		int x0 = (int)(rnd() % W), y0 = (int)(rnd() % H);
		int w = 1 + (int)(rnd() % (unsigned)(W - x0)), h = 1 + (int)(rnd() % 40);
		uint32_t c = rnd();
		for (int y = y0; y < y0 + h && y < H; y++)
			for (int x = x0; x < x0 + w; x++)
				set_rgb(&t, x, y, c & 255, (c >> 8) & 255, (c >> 16) & 255);
	}
	struct dg_png p = DG_PNG_INIT;
	struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
	o.rows = R;
	const unsigned n = n_stripes(H, R);
	striped(&t, W, H, &o, &p);
	for (int it = 0; it < 40; it++) {
		int x0 = (int)(rnd() % W), y0 = (int)(rnd() % H);
		int w = 1 + (int)(rnd() % (unsigned)(W - x0));
		int h = 1 + (int)(rnd() % (unsigned)(it % 4 == 0 ? H - y0 : (H - y0 < 20 ? H - y0 : 20)));
		uint8_t v = (uint8_t)(1 + rnd() % 255); /* non-zero: every pixel changes */
		for (int y = y0; y < y0 + h; y++)
			for (int x = x0; x < x0 + w; x++)
				px(&t, x, y)[it % 3] ^= v;
		unsigned touched = (unsigned)((y0 + h - 1) / R - y0 / R + 1);
		striped(&t, W, H, &o, &p);
		assert_stats(&p, touched, n - touched);
		assert_as_cold(&t, W, H, &o, &p);
	}
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, striped_byte_limit_at_the_boundary)
{
	struct tframe t;
	tframe_load(&t, "term.png", 0);
	struct dg_png p = DG_PNG_INIT;
	const unsigned n = n_stripes(800, DG_PNG_STRIPE_ROWS);
	struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &p, &err), 0, "%s", err.msg);
	size_t exact = p.len;

	/* Exactly the size: accepted, cold and warm. */
	struct dg_png q = DG_PNG_INIT;
	o.max_bytes = exact;
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), 0, "%s", err.msg);
	cr_assert_eq(q.len, exact);
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), 0, "%s", err.msg);
	assert_stats(&q, 0, n);

	/* One byte less: refused warm (copying from the cache) and cold
	 * (compressing); the failure drops the cache. */
	o.max_bytes = exact - 1;
	memset(&err, 0, sizeof(err));
	int rc = dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err);
	cr_assert_eq(rc, -E2BIG, "rc %d: %s", rc, err.msg);
	cr_assert(strstr(err.msg, "exceeds") != NULL, "%s", err.msg);
	cr_assert_eq(q.len, 0);
	assert_stats(&q, 0, 0);
	struct dg_png cold = DG_PNG_INIT;
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &cold, &err), -E2BIG);
	cr_assert_eq(cold.len, 0);
	dg_png_free(&cold);
	o.max_bytes = exact;
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), 0, "%s", err.msg);
	assert_stats(&q, n, 0);
	cr_assert_eq(q.len, exact);
	cr_assert_arr_eq(q.data, p.data, exact);

	/* Limits below the fixed parts, and at them for one pixel. */
	static const size_t tiny[] = {1, 64, 65};
	for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++) {
		o.max_bytes = tiny[i];
		cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), -E2BIG);
	}
	uint8_t pix[4] = {1, 2, 3, 4};
	struct dg_frame one = {pix, 1, 1, 4};
	o.max_bytes = DG_PNG_MAX_BYTES;
	cr_assert_eq(dg_png_encode_stripes(&one, NULL, 1, 1, &o, &q, &err), 0, "%s", err.msg);
	size_t one_len = q.len;
	o.max_bytes = one_len;
	cr_assert_eq(dg_png_encode_stripes(&one, NULL, 1, 1, &o, &q, &err), 0, "%s", err.msg);
	o.max_bytes = one_len - 1;
	cr_assert_eq(dg_png_encode_stripes(&one, NULL, 1, 1, &o, &q, &err), -E2BIG);

	/* Settings out of range. */
	o = DG_PNG_STRIPE_OPTS_DEFAULT;
	o.rows = 0;
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), "stripe rows 0");
	o.rows = DG_FRAME_MAX_DIM + 1;
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err),
		      "stripe rows 8193");
	o = DG_PNG_STRIPE_OPTS_DEFAULT;
	o.level = 10;
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), "level 10");
	o = DG_PNG_STRIPE_OPTS_DEFAULT;
	o.max_bytes = 0;
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), "max_bytes");
	o.max_bytes = (size_t)DG_PNG_MAX_BYTES + 1;
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &q, &err), "max_bytes");
	dg_png_free(&q);
	dg_png_free(&p);
	tframe_free(&t);
}

Test(frame, hostile_geometry_refused_by_the_striped_encoder_keeps_the_cache)
{
	struct tframe t;
	tframe_load(&t, "page.png", 0);
	struct dg_png p = DG_PNG_INIT;
	const unsigned n = n_stripes(800, DG_PNG_STRIPE_ROWS);
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	size_t len = p.len;
	uint8_t *first = malloc(len);
	memcpy(first, p.data, len);

	struct dg_frame f = t.f;
	f.stride = 1279 * 4;
	assert_einval(dg_png_encode_stripes(&f, NULL, 1280, 800, NULL, &p, &err),
		      "stride 5116 is below width * 4 (5120)");
	cr_assert_eq(p.len, 0);
	assert_stats(&p, 0, 0);
	f = t.f;
	f.h = INT_MAX;
	assert_einval(dg_png_encode_stripes(&f, NULL, 1280, 800, NULL, &p, &err), "height");
	f = t.f;
	f.stride = SIZE_MAX / 4;
	assert_einval(dg_png_encode_stripes(&f, NULL, 1280, 800, NULL, &p, &err), "overflows");
	f.stride = t.f.stride;
	f.pixels = NULL;
	assert_einval(dg_png_encode_stripes(&f, NULL, 1280, 800, NULL, &p, &err), "no pixels");
	const int outside[4] = {1, 0, 1280, 800};
	assert_einval(dg_png_encode_stripes(&t.f, outside, 1280, 800, NULL, &p, &err),
		      "is not inside the 1280x800");
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 0, 800, NULL, &p, &err),
		      "output size 0x800");
	assert_einval(dg_png_encode_stripes(&t.f, NULL, 1280, 800, NULL, NULL, &err),
		      "no output buffer");
	cr_assert_eq(dg_png_encode_stripes(NULL, NULL, 1280, 800, NULL, &p, NULL), -EINVAL);

	/* Nothing was touched: the screen comes from the cache. */
	cr_assert_eq(dg_png_encode(&t.f, NULL, 1280, 800, &p, &err), 0, "%s", err.msg);
	assert_stats(&p, 0, n);
	cr_assert_eq(p.len, len);
	cr_assert_arr_eq(p.data, first, len);
	free(first);
	dg_png_free(&p);
	tframe_free(&t);
}

/* Encodes t with and without a helper thread and asserts the same bytes
 * and the same stripe counts. */
static void same_with_helper(struct tframe *t, int ow, int oh,
			     const struct dg_png_stripe_opts *o, struct dg_png *with,
			     struct dg_png *without)
{
	striped(t, ow, oh, o, with);
	cr_assert_eq(dg_png_encode_stripes(&t->f, NULL, ow, oh, o, without, &err), 0, "%s",
		     err.msg);
	cr_assert_eq(with->len, without->len, "%zu bytes with the helper, %zu without",
		     with->len, without->len);
	cr_assert_arr_eq(with->data, without->data, with->len, "the helper changed the bytes");
	assert_stats(with, without->stripes_compressed, without->stripes_reused);
}

Test(frame, helper_thread_encodes_the_same_bytes)
{
	struct dg_png p = DG_PNG_INIT, q = DG_PNG_INIT;
	cr_assert_eq(dg_png_start_helper(&p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_png_start_helper(&p, &err), 0, "a second start is harmless");
	struct dg_png_stripe_opts one_row = DG_PNG_STRIPE_OPTS_DEFAULT;
	one_row.rows = 1; /* 800 stripes: the most contention on the counter */
	for (size_t i = 0; i < 3; i++) {
		struct tframe t;
		tframe_load(&t, frames[i], 4);
		same_with_helper(&t, 1280, 800, NULL, &p, &q);
		same_with_helper(&t, 1280, 800, NULL, &p, &q); /* all from the cache */
		assert_stats(&p, 0, n_stripes(800, DG_PNG_STRIPE_ROWS));
		same_with_helper(&t, 1024, 640, NULL, &p, &q);
		same_with_helper(&t, 1366, 768, NULL, &p, &q);
		same_with_helper(&t, 1280, 800, &one_row, &p, &q);
		/* Edits of every size, in both caches at once. */
		same_with_helper(&t, 1280, 800, NULL, &p, &q);
		for (int it = 0; it < 12; it++) {
			int x0 = (int)(rnd() % 1280), y0 = (int)(rnd() % 800);
			int w = 1 + (int)(rnd() % (unsigned)(1280 - x0));
			int h = 1 + (int)(rnd() % (unsigned)(800 - y0));
			for (int y = y0; y < y0 + h; y++)
				for (int x = x0; x < x0 + w; x++)
					px(&t, x, y)[0] ^= 0x10;
			same_with_helper(&t, 1280, 800, NULL, &p, &q);
			cr_assert(p.stripes_compressed >= 1);
			assert_as_cold(&t, 1280, 800, NULL, &p);
		}
		tframe_free(&t);
	}
	/* Small and odd images: one stripe (the helper sits out) and a few. */
	static const int dims[][2] = {{1, 1}, {3, 2}, {101, 33}, {7, 65}};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		struct tframe t;
		tframe_alloc(&t, dims[i][0], dims[i][1], 3);
		struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
		o.rows = 4;
		same_with_helper(&t, dims[i][0], dims[i][1], &o, &p, &q);
		same_with_helper(&t, dims[i][0] * 3, dims[i][1] * 2, &o, &p, &q);
		tframe_free(&t);
	}
	dg_png_free(&p);
	dg_png_free(&q);
}

Test(frame, helper_thread_limits_failures_and_restart)
{
	struct tframe t;
	tframe_load(&t, "page.png", 0);
	struct dg_png p = DG_PNG_INIT;
	assert_einval(dg_png_start_helper(NULL, &err), "no output buffer");
	cr_assert_eq(dg_png_start_helper(&p, &err), 0, "%s", err.msg);
	struct dg_png_stripe_opts o = DG_PNG_STRIPE_OPTS_DEFAULT;
	striped(&t, 1280, 800, &o, &p);
	size_t exact = p.len;
	o.max_bytes = exact - 1;
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &p, &err), -E2BIG);
	cr_assert_eq(p.len, 0);
	cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800, &o, &p, &err), -E2BIG);
	o.max_bytes = exact;
	striped(&t, 1280, 800, &o, &p);
	cr_assert_eq(p.len, exact);
	assert_stats(&p, n_stripes(800, DG_PNG_STRIPE_ROWS), 0);
	/* Limits that stop the job early, with both threads busy. */
	for (size_t lim = 70; lim < exact; lim = lim * 3 + 1)
		cr_assert_eq(dg_png_encode_stripes(&t.f, NULL, 1280, 800,
						   &(struct dg_png_stripe_opts){8, 1, lim}, &p, &err),
			     -E2BIG, "limit %zu", lim);
	/* A zoom does not involve the helper; the cache survives it. */
	const int zoom[4] = {10, 20, 300, 200};
	cr_assert_eq(dg_png_encode(&t.f, zoom, 300, 200, &p, &err), 0, "%s", err.msg);
	striped(&t, 1280, 800, NULL, &p);
	/* Freed with its helper, then reused: a new helper, same bytes. */
	uint8_t *first = malloc(p.len);
	size_t len = p.len;
	memcpy(first, p.data, len);
	dg_png_free(&p);
	cr_assert_eq(dg_png_start_helper(&p, &err), 0, "%s", err.msg);
	striped(&t, 1280, 800, NULL, &p);
	cr_assert_eq(p.len, len);
	cr_assert_arr_eq(p.data, first, len);
	free(first);
	dg_png_free(&p);
	tframe_free(&t);
}

/* The size a zoom is shown at: the region's aspect inside the display. */
Test(frame, fit_keeps_the_aspect_inside_the_display)
{
	int w = 0, h = 0;
	/* A quarter of a 1280x800 desktop shown to the model as 1024x640. */
	dg_frame_fit(640, 400, 1024, 640, &w, &h);
	cr_assert(w == 1024 && h == 640, "%dx%d", w, h);
	/* Without a display: the desktop's size. */
	dg_frame_fit(640, 400, 1280, 800, &w, &h);
	cr_assert(w == 1280 && h == 800, "%dx%d", w, h);
	dg_frame_fit(200, 100, 1024, 768, &w, &h);
	cr_assert(w == 1024 && h == 512, "%dx%d", w, h);
	dg_frame_fit(100, 200, 1024, 640, &w, &h);
	cr_assert(w == 320 && h == 640, "%dx%d", w, h);
	/* Rounded to the nearest: 3x1 in 1000x1000 -> 1000x333.33 -> 333. */
	dg_frame_fit(3, 1, 1000, 1000, &w, &h);
	cr_assert(w == 1000 && h == 333, "%dx%d", w, h);
	/* A sliver keeps at least one pixel; the largest sizes do not overflow. */
	dg_frame_fit(8192, 1, 1024, 640, &w, &h);
	cr_assert(w == 1024 && h == 1, "%dx%d", w, h);
	dg_frame_fit(DG_FRAME_MAX_DIM, DG_FRAME_MAX_DIM - 1, DG_FRAME_MAX_DIM, DG_FRAME_MAX_DIM, &w,
		     &h);
	cr_assert(w == DG_FRAME_MAX_DIM && h == DG_FRAME_MAX_DIM - 1, "%dx%d", w, h);
	/* Shrinking too: a region larger than the display. */
	dg_frame_fit(1280, 800, 640, 640, &w, &h);
	cr_assert(w == 640 && h == 400, "%dx%d", w, h);
	/* Nonsense sizes give the display. */
	dg_frame_fit(0, 10, 1024, 640, &w, &h);
	cr_assert(w == 1024 && h == 640, "%dx%d", w, h);
}
