/* frame: the one-stream PNG encoder through libpng (dg_png_encode_opts: zooms,
 * comparisons, every option). See frame-priv.h for the contract.
 *
 * The encoder streams: one output row at a time is produced (converted or
 * resampled, frame.c) into a small reusable buffer and handed to libpng, so
 * no copy of the frame is ever made. libpng writes through png_set_write_fn
 * into the caller's growable buffer.
 */
#include "desktop/worker/frame-int-priv.h"

#include <png.h>
#include <setjmp.h>
#include <zlib.h>

/* libpng's zlib output chunk: one IDAT chunk per this many bytes. Bigger than
 * libpng's 8 KB default so a screenshot makes tens of write callbacks and
 * chunks, not hundreds. */
#define PNG_ZBUF_BYTES (128u * 1024)

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
			dg_frame_resample_row(&j->rs, y, cur);
		else
			dg_frame_convert_row(j->f, j->r, y, cur);
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
	rc = dg_frame_check_geometry(f, region, out_w, out_h, j.r, err);
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
	if (dg_frame_grow((void **)&s->rows, &s->rows_cap, 2 * row))
		return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
	j.row[0] = s->rows;
	j.row[1] = s->rows + row;
	if (j.scale && dg_frame_resampler_init(&j.rs, f, j.r, out_w, out_h, s))
		return dg_err_set(err, -ENOMEM, "png: out of memory for resampling tables");
	struct png_ctx ctx = {.out = out, .max_bytes = o->max_bytes, .code = 0, .err = err};
	return do_encode(&j, &ctx);
}
