/* frame: the striped PNG encoder with its per-stripe cache and its optional
 * helper thread (dg_png_encode_stripes, dg_png_start_helper), and
 * dg_png_free. See frame-priv.h for the contract.
 */
#include "desktop/worker/frame-int-priv.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <zlib.h>

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
	if (dg_frame_grow((void **)&w->filt, &w->filt_cap, filt_bytes))
		return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
	if (scale_w) {
		struct dg_png_scratch *s = &w->rows;
		size_t n = (size_t)scale_w * 3;
		for (int i = 0; i < 2; i++) {
			if (dg_frame_grow((void **)&s->hrow[i], &s->hcap[i], n * sizeof(uint32_t)))
				return dg_err_set(err, -ENOMEM, "png: out of memory for rows");
			s->hkey[i] = -1; /* the pixels may have changed since */
		}
		if (dg_frame_grow((void **)&s->acc, &s->acc_cap, n * sizeof(uint64_t)))
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
		r->hash = dg_frame_hash_rows(f, s0, s1);
		size_t len;
		if (j->c->valid && st->hash == r->hash) {
			r->who = -1;
			len = st->len;
		} else {
			uint8_t *row = w->filt;
			for (int y = y0; y < y1; y++, row += j->row_bytes) {
				row[0] = 0; /* filter type: none */
				if (j->rs)
					dg_frame_resample_row(&rs, y, row + 1);
				else
					dg_frame_convert_row(f, whole, y, row + 1);
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
		if (dg_frame_grow((void **)&c->st, &c->st_cap, (size_t)n * sizeof(struct stripe)))
			return dg_err_set(err, -ENOMEM, "png: out of memory for the stripe table");
		memcpy(c->key, key, sizeof(c->key));
	}
	if (dg_frame_grow((void **)&c->res, &c->res_cap, (size_t)n * sizeof(struct stripe_new)))
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
	if (scale && dg_frame_resampler_init(&rs, f, whole, out_w, out_h, s))
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
	c->valid = dg_frame_grow((void **)&c->store, &c->store_cap, total) == 0;
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
	rc = dg_frame_check_geometry(f, region, out_w, out_h, r, err);
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
