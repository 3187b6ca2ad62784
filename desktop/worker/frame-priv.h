/* frame: PNG screenshots from a borrowed framebuffer, with region crop and
 * scaling, and a content hash to skip re-encoding an unchanged screen.
 *
 * These declarations are public to the rest of deskgate; they live in a
 * -priv header only until they are merged into actions/actions.h (one public
 * header per folder).
 *
 * Pixel format contract: the worker asks libvncclient for 32 bits per pixel,
 * little-endian, red shift 16, green shift 8, blue shift 0, so each pixel is
 * the bytes B, G, R, X in memory. The X byte is never read into an image or
 * the hash: a server may leave anything there.
 *
 * Everything here is allocation-light: one struct dg_png per worker is reused
 * for every screenshot, so steady-state encoding does not allocate. (The
 * libpng path, used for zooms and comparisons, still has libpng and zlib
 * allocate their per-image state, a few hundred KB, freed before returning;
 * the striped path keeps its deflate state.) A struct dg_png is used by one
 * thread at a time; it runs single-threaded unless dg_png_start_helper gave
 * it a helper thread.
 */
#ifndef DG_WORKER_FRAME_PRIV_H
#define DG_WORKER_FRAME_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Largest accepted width or height, of a frame and of an output image. */
#define DG_FRAME_MAX_DIM 8192
/* Largest PNG produced. It bounds the worker's memory: an 8192x8192 frame of
 * noise would be about 200 MB of PNG and is refused with -E2BIG instead. */
#define DG_PNG_MAX_BYTES (64u * 1024 * 1024)

/* A framebuffer, borrowed: pixels stays owned by the caller (libvncclient) and
 * must hold h rows of stride bytes, the last one at least w * 4 bytes. */
struct dg_frame {
	const uint8_t *pixels;
	int w, h;
	size_t stride; /* bytes from one row to the next, >= w * 4 */
};

/* Output buffer, reused across calls: capacity only grows, so encoding
 * frames of one size settles into zero reallocations. Zero-initialise it
 * (DG_PNG_INIT), release it with dg_png_free. After a failed encode len is 0
 * and the memory stays owned by the struct.
 *
 * It also carries the stripe cache of dg_png_encode_stripes (in scratch):
 * keep one struct per stream of screenshots so each encode can reuse what
 * the previous one compressed. */
struct dg_png_scratch;
struct dg_png {
	uint8_t *data;
	size_t len, cap;
	struct dg_png_scratch *scratch; /* private: rows, resampling, stripe cache */
	/* What the last encode did with the stripe cache: stripes compressed
	 * and stripes copied from the cache. Both 0 after a failed encode and
	 * after one that did not use the cache (a region smaller than the
	 * frame, or dg_png_encode_opts). */
	unsigned stripes_compressed, stripes_reused;
};
#define DG_PNG_INIT {0}

/* Region of a frame: x, y of the top-left pixel, then width and height, all
 * in frame pixels. Index names for a region[4] array. */
enum { DG_REGION_X, DG_REGION_Y, DG_REGION_W, DG_REGION_H };

/* PNG row filter choice. */
enum dg_png_filter {
	DG_PNG_FILTER_NONE,
	DG_PNG_FILTER_SUB,
	DG_PNG_FILTER_UP,
	/* Per row: "up" when that leaves fewer changed 8-byte words than "sub"
	 * (a row equal to the one above becomes all zeros), else "sub". Costs
	 * one cheap pass over each row, unlike libpng's adaptive choice. */
	DG_PNG_FILTER_ROWS,
	/* libpng's own per-row choice among all five filters (its default). */
	DG_PNG_FILTER_ADAPTIVE,
};

enum dg_png_strategy {
	DG_PNG_STRATEGY_LIBPNG,  /* whatever libpng picks (its default) */
	DG_PNG_STRATEGY_DEFAULT, /* zlib Z_DEFAULT_STRATEGY */
	DG_PNG_STRATEGY_RLE,     /* zlib Z_RLE: only distance-1 matches (runs) */
};

/* Encoder settings; dg_png_encode uses DG_PNG_OPTS_DEFAULT. The others exist
 * so the benchmark can compare settings in one run and tests can lower
 * max_bytes to reach the size limit cheaply. */
struct dg_png_opts {
	int level; /* zlib level, 0..9 */
	enum dg_png_strategy strategy;
	enum dg_png_filter filter;
	size_t max_bytes; /* 1..DG_PNG_MAX_BYTES */
};

/* Chosen with tests/bench/png.c on captured desktop frames: zlib level 1
 * with no filter was the fastest setting and also the smallest of the fast
 * ones on every frame. Deflate's own matches already find what "up" would
 * (at 1280 wide the row above is 3841 bytes back, well inside the 32 KB
 * window) and what
 * "sub" would (flat colour repeats at distance 3), so filters only add work
 * and literals; Z_RLE finds neither and emits far more literals, and coding
 * literals is what costs most. */
#define DG_PNG_OPTS_DEFAULT                                                                \
	((struct dg_png_opts){1, DG_PNG_STRATEGY_DEFAULT, DG_PNG_FILTER_NONE, DG_PNG_MAX_BYTES})
/* What libpng does when told nothing: the benchmark's baseline. */
#define DG_PNG_OPTS_LIBPNG                                                                 \
	((struct dg_png_opts){6, DG_PNG_STRATEGY_LIBPNG, DG_PNG_FILTER_ADAPTIVE,            \
			      DG_PNG_MAX_BYTES})

/* Checks that f describes a usable frame: pixels set, 1 <= w, h <=
 * DG_FRAME_MAX_DIM, stride >= w * 4, and the byte span of all rows fits in
 * size_t. Returns 0 or -EINVAL with a message naming the field. */
int dg_frame_check(const struct dg_frame *f, struct dg_err *err);

/* Output rows per stripe of dg_png_encode_stripes' default: the unit of
 * caching. Chosen with tests/bench/png.c among 16, 32, 50, 64 and 100 rows
 * on 1280x800 desktop frames: re-encoding after a typed line or a changed
 * band costs about the rows of the stripes it touches, and 16 was 10-30%
 * faster there than 32 (and more so than taller stripes), as fast when all
 * changed, for PNGs 2-3% bigger than at 32 (each stripe starts with an empty
 * deflate window; about 9% over one stream). */
#define DG_PNG_STRIPE_ROWS 16

/* Settings of dg_png_encode_stripes: stripe height, zlib level, and the
 * output limit (tests lower it to reach the limit cheaply). */
struct dg_png_stripe_opts {
	int rows;         /* 1..DG_FRAME_MAX_DIM */
	int level;        /* zlib level, 0..9 */
	size_t max_bytes; /* 1..DG_PNG_MAX_BYTES */
};
#define DG_PNG_STRIPE_OPTS_DEFAULT                                                         \
	((struct dg_png_stripe_opts){DG_PNG_STRIPE_ROWS, 1, DG_PNG_MAX_BYTES})

/* The size a zoom of a w x h region is shown at: the largest size inside
 * max_w x max_h (the model's display) with the region's aspect, the free
 * side rounded to the nearest pixel, each side 1..max. A region of the
 * display's aspect fills it (a quarter of a 1280x800 screen shown as
 * 1024x640 is 1024x640), as Anthropic's tool scales the crop up. Sizes
 * below 1 give max_w x max_h (at least 1x1). */
void dg_frame_fit(int w, int h, int max_w, int max_h, int *out_w, int *out_h);

/* Encodes the region of f (NULL: the whole frame) as an 8-bit RGB PNG of
 * out_w x out_h pixels into out (out->data, out->len). When out_w x out_h is
 * the region's size the pixels are copied exactly; otherwise the region is
 * resampled by area coverage: each output pixel is the exact average of the
 * source area it covers (a box filter when shrinking; when enlarging, whole
 * source pixels become blocks, blended only where a block edge falls inside
 * an output pixel, so text stays sharp and integer zooms are exact pixel
 * replication).
 * Returns 0, -EINVAL (bad frame, region or size; the message names it),
 * -E2BIG (the PNG would exceed DG_PNG_MAX_BYTES), -ENOMEM, or -EIO (libpng
 * or zlib failed; the message is in err).
 * It is dg_png_encode_stripes with its default settings: encoding the whole
 * screen again into the same out recompresses only the stripes that
 * changed. */
int dg_png_encode(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		  struct dg_png *out, struct dg_err *err);

/* The screenshot encoder: dg_png_encode's contract, with settings (opts
 * NULL: DG_PNG_STRIPE_OPTS_DEFAULT), made fast for a screen that changes
 * only in part between shots.
 *
 * The whole frame (region NULL, or one covering the frame), at any output
 * size, is encoded in horizontal stripes of opts->rows output rows, each
 * compressed on its own (zlib level opts->level, no row filter) so that it
 * can be reused: out keeps every stripe's compressed bytes and a 64-bit
 * hash of the source rows it came from (dg_frame_hash's function, and its
 * collision stance: a collision shows a stale stripe). The next encode into
 * the same out with the same frame size, output size and settings hashes
 * each stripe's source rows again and compresses only the stripes whose
 * hash changed; out->stripes_compressed and out->stripes_reused count
 * them. The PNG is byte-identical to the one a cold encode of the same
 * pixels makes, so an unchanged screen gives the previous PNG again, for
 * one pass of hashing and a copy. Any other geometry or setting rebuilds
 * the cache; a failed encode drops it.
 *
 * A region smaller than the frame (a zoom) is encoded as one stream by
 * dg_png_encode_opts, at opts->level without filter, leaving the cache
 * alone: alternating screenshots and zooms keeps the screen's stripes.
 *
 * Memory kept: the PNG in out->data; the cache: a copy of its compressed
 * stripes (never more than one image); scratch: the stripes compressed by
 * the last encode (at most one image), one stripe of rows, and one zlib
 * deflate state (about 270 KB). Returns as dg_png_encode, plus -EINVAL for
 * bad opts. */
int dg_png_encode_stripes(const struct dg_frame *f, const int region[4], int out_w, int out_h,
			  const struct dg_png_stripe_opts *opts, struct dg_png *out,
			  struct dg_err *err);

/* Starts a helper thread for out: from then on, encodes into out that have
 * more than one stripe split the stripes (hashing and compressing) between
 * the calling thread and the helper, which sleeps between encodes. The
 * output is byte-identical either way. Idempotent; dg_png_free stops and
 * joins the helper.
 *
 * It only pays when a core is idle. Measured on this 2-core machine
 * (tests/bench/png.c, "2 threads" rows), a 1280x800 frame that changed
 * everywhere encoded 1.5-1.9x faster while the other core was mostly free,
 * and no faster (0.9-1.1x) while other desktops kept it busy, which is the
 * normal state of a machine packed with sessions. So the worker does not
 * start it; it stays for measuring, and for hosts with cores to spare.
 *
 * Confinement: call it before a seccomp filter that forbids clone, and
 * install such a filter with TSYNC (libseccomp: SCMP_FLTATR_CTL_TSYNC, or
 * SECCOMP_FILTER_FLAG_TSYNC), or the helper would run unconfined: a filter
 * applies only to the thread that installs it and threads created later.
 * The helper blocks all signals, touches only out's memory and the frame
 * being encoded, and makes no system calls but futex, and brk or mmap,
 * munmap and mremap when its buffers grow. A forked child has no helper:
 * it must not encode into a struct dg_png that has one.
 *
 * Returns 0, -EINVAL (out NULL), -ENOMEM, or -EAGAIN etc. from
 * pthread_create. */
int dg_png_start_helper(struct dg_png *out, struct dg_err *err);

/* The libpng encoder, one zlib stream per image, with explicit settings
 * (opts NULL: DG_PNG_OPTS_DEFAULT) and no cache; for comparisons and
 * zooms. */
int dg_png_encode_opts(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		       const struct dg_png_opts *opts, struct dg_png *out, struct dg_err *err);

/* Resamples like dg_png_encode into rgb: out_h rows of out_w * 3 bytes (R, G,
 * B), rgb_stride bytes apart. For tests, the benchmark, and callers that want
 * pixels rather than a PNG. Allocates its small scratch per call. Returns 0,
 * -EINVAL or -ENOMEM. */
int dg_frame_scale(const struct dg_frame *f, const int region[4], int out_w, int out_h,
		   uint8_t *rgb, size_t rgb_stride, struct dg_err *err);

/* Releases out's memory and zeroes it; out may be reused afterwards. */
void dg_png_free(struct dg_png *out);

/* 64-bit hash of the visible pixels of f (B, G, R of every pixel, plus w and
 * h; not the X bytes, not the padding past w * 4). The worker compares it
 * with the hash of the frame it last zoomed into and, when equal, reuses
 * that PNG; dg_png_encode_stripes hashes each stripe's rows the same way.
 *
 * Collision stance: this is an optimisation whose failure mode is a stale
 * screenshot. Accidental collisions between two different screens are about
 * 2^-64 per comparison (a 64-bit xxHash-style mix with full avalanche).
 * Deliberate ones do not matter: the desktop that would have to craft the
 * colliding pixels already decides what the screen shows, and a collision
 * only lets it show the previous screen, which it could simply draw again.
 * It is not a content address: recordings name frames by a cryptographic
 * hash of the PNG bytes.
 *
 * Returns 0 for a frame that dg_frame_check refuses. */
uint64_t dg_frame_hash(const struct dg_frame *f);

#endif
