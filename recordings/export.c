/* dg_export: a recording as a video (`deskgate export`).
 *
 * Why a library of its own (dg_export, CMakeLists.txt): it links
 * libavformat, libavcodec, libswscale and cairo, dozens of shared objects
 * nothing else needs. dg_recordings is linked by the gateway and by every
 * test; dg_export only by the cli. It is declared in recordings.h (the
 * folder's one door) and may use recordings-priv.h (the chain reader and
 * the bounded file reads), being of the folder.
 *
 * The flow: dg_rec_verify (its status on the first frames, and on every
 * frame when it is not verified), session.json for the size, then one pass
 * over events.jsonl with the chain-checking reader; each screen event is
 * held until the next one gives its duration, then drawn (export-draw.c)
 * and encoded (export-enc.c) as many frames as the time it covers. Memory
 * is one event, two decoded frames and the canvas, whatever the length. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fontconfig/fontconfig.h>
#include <png.h>

#include "recordings/export-priv.h"
#include "recordings/recordings-priv.h"

#define DG_EXPORT_CACHE 2            /* decoded frames kept (before and after) */
#define DG_EXPORT_BANNER_FRAMES (2 * DG_REC_EXPORT_FPS) /* a verified status shows this long */
#define DG_EXPORT_HASH_BAD "-"       /* a frame reference that is not a frame hash */

/* One screen event, held until the next one's time is known. */
struct shot {
	uint64_t seq;
	int64_t t_ms;
	bool before_moment;                   /* action, cdp: the before frame with the mark */
	char before[DG_REC_HEX_LEN + 1];      /* "" none */
	char after[DG_REC_HEX_LEN + 1];
	struct dg_export_overlay ov;
};

struct cached {
	char hash[DG_REC_HEX_LEN + 1];
	cairo_surface_t *s;                   /* NULL: refused, note says why */
	char note[DG_EXPORT_TEXT_MAX];
};

struct ectx {
	const char *dir;
	int frames_fd;                        /* frames/, or -1 */
	struct dg_export_enc *enc;
	cairo_surface_t *canvas;
	cairo_t *cr;
	int w, h, sw, sh;                     /* video, screen */
	struct cached cache[DG_EXPORT_CACHE];
	int cache_next;
	char last[DG_REC_HEX_LEN + 1];        /* the last frame shown */
	struct shot pending;
	bool has_pending;
	int64_t cum_ms;
	char banner[DG_EXPORT_TEXT_MAX];
	struct dg_rec_export_result *res;
};

/* ---- frames -------------------------------------------------------------- */

/* Decodes a PNG (len bytes) into a cairo surface, refusing sizes over the
 * bounds before anything the size asks for is allocated. 0 with *s set, or
 * a positive "refused" with note filled, or -ENOMEM. */
static int decode_png(const uint8_t *png, size_t len, cairo_surface_t **s, char *note, size_t nlen)
{
	png_image pi = { .version = PNG_IMAGE_VERSION };
	if (!png_image_begin_read_from_memory(&pi, png, len)) {
		snprintf(note, nlen, "not a PNG (%s)", pi.message);
		return 1;
	}
	if (pi.width > DG_REC_EXPORT_FRAME_DIM_MAX || pi.height > DG_REC_EXPORT_FRAME_DIM_MAX ||
	    (long long)pi.width * pi.height > DG_REC_EXPORT_FRAME_PIXELS_MAX) {
		snprintf(note, nlen, "%ux%u pixels: over the limit of %dx%d and %lld pixels",
			 pi.width, pi.height, DG_REC_EXPORT_FRAME_DIM_MAX,
			 DG_REC_EXPORT_FRAME_DIM_MAX, DG_REC_EXPORT_FRAME_PIXELS_MAX);
		png_image_free(&pi);
		return 1;
	}
	/* cairo's ARGB32 is a native-endian 32-bit word: B, G, R, A in memory
	 * on little-endian machines. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	pi.format = PNG_FORMAT_BGRA;
#else
	pi.format = PNG_FORMAT_ARGB;
#endif
	*s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)pi.width, (int)pi.height);
	if (cairo_surface_status(*s) != CAIRO_STATUS_SUCCESS) {
		cairo_surface_destroy(*s);
		*s = NULL;
		png_image_free(&pi);
		return -ENOMEM;
	}
	uint8_t *data = cairo_image_surface_get_data(*s);
	int stride = cairo_image_surface_get_stride(*s);
	if (!png_image_finish_read(&pi, NULL, data, stride, NULL)) {
		snprintf(note, nlen, "a broken PNG (%s)", pi.message);
		png_image_free(&pi);
		cairo_surface_destroy(*s);
		*s = NULL;
		return 1;
	}
	/* Screens are opaque; a frame with alpha is shown as if it were. */
	for (unsigned y = 0; y < pi.height; y++)
		for (unsigned x = 0; x < pi.width; x++)
			data[(size_t)y * stride + x * 4 + (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 3 : 0)] = 0xff;
	cairo_surface_mark_dirty(*s);
	return 0;
}

/* Reads and decodes frames/HASH.png through the bounded, no-symlink reader.
 * 0 (the entry filled: a surface, or none and a note) or -ENOMEM. */
static int load_frame(struct ectx *c, const char *hash, struct cached *e, struct dg_err *err)
{
	snprintf(e->hash, sizeof(e->hash), "%s", hash);
	e->s = NULL;
	e->note[0] = 0;
	char shortname[16];
	snprintf(shortname, sizeof(shortname), "%.12s", hash);
	if (!dg_rec_hash_valid(hash)) {
		snprintf(e->note, sizeof(e->note), "a frame reference that is not a frame hash");
		return 0;
	}
	char name[DG_REC_HEX_LEN + 8];
	snprintf(name, sizeof(name), "%s.png", hash);
	char *buf = NULL;
	size_t len = 0;
	struct dg_err e2 = { { 0 } };
	int rc = c->frames_fd < 0 ? -ENOENT
		 : dg_rec_read_at(c->frames_fd, name, DG_REC_FRAME_MAX, "frame", &buf, &len, &e2);
	if (rc == -ENOMEM)
		return dg_err_set(err, rc, "%s: frames/%s: out of memory", c->dir, name);
	if (rc) {
		dg_export_textf(e->note, sizeof(e->note), "frame %s... not shown: %s", shortname,
			 rc == -ENOENT ? "missing" : e2.msg);
		return 0;
	}
	char why[DG_EXPORT_TEXT_MAX] = "";
	rc = decode_png((const uint8_t *)buf, len, &e->s, why, sizeof(why));
	free(buf);
	if (rc < 0)
		return dg_err_set(err, rc, "%s: frames/%s: out of memory", c->dir, name);
	if (rc > 0)
		dg_export_textf(e->note, sizeof(e->note), "frame %s... not shown: %s", shortname, why);
	return 0;
}

/* The decoded frame of hash, from the cache or read now. */
static int get_frame(struct ectx *c, const char *hash, struct cached **out, struct dg_err *err)
{
	for (int i = 0; i < DG_EXPORT_CACHE; i++) {
		if (strcmp(c->cache[i].hash, hash) == 0) {
			*out = &c->cache[i];
			return 0;
		}
	}
	struct cached *e = &c->cache[c->cache_next];
	c->cache_next = (c->cache_next + 1) % DG_EXPORT_CACHE;
	cairo_surface_destroy(e->s);
	int rc = load_frame(c, hash, e, err);
	if (rc == 0 && !e->s)
		c->res->frames_bad++;
	*out = e;
	return rc;
}

/* ---- the timeline ------------------------------------------------------------- */

/* Shows frame hash ("" the last one shown) with ov for ms more of video. */
static int show(struct ectx *c, const char *hash, const struct dg_export_overlay *ov, bool mark,
		int64_t ms, struct dg_err *err)
{
	c->cum_ms += ms;
	uint64_t target = (uint64_t)((c->cum_ms * DG_REC_EXPORT_FPS + 500) / 1000);
	if (target > DG_REC_EXPORT_FRAMES_MAX) {
		target = DG_REC_EXPORT_FRAMES_MAX;
		c->res->truncated = true;
	}
	if (hash[0])
		snprintf(c->last, sizeof(c->last), "%s", hash);
	if (target <= c->res->frames)
		return 0;
	struct cached *f = NULL;
	int rc = c->last[0] ? get_frame(c, c->last, &f, err) : 0;
	if (rc)
		return rc;
	bool verified = c->res->verified;
	struct dg_export_picture p = {
		.frame = f ? f->s : NULL,
		.note = f ? f->note : "no screen recorded yet",
		.ov = ov,
		.mark = mark,
		.banner = !verified || c->res->frames < DG_EXPORT_BANNER_FRAMES ? c->banner : NULL,
		.banner_bad = !verified,
		.sw = c->sw,
		.sh = c->sh,
	};
	dg_export_draw(c->cr, c->w, c->h, &p);
	cairo_surface_flush(c->canvas);
	rc = dg_export_enc_put(c->enc, cairo_image_surface_get_data(c->canvas),
			       cairo_image_surface_get_stride(c->canvas), target - c->res->frames, err);
	if (rc)
		return rc;
	c->res->frames = target;
	return 0;
}

/* Shows a held event for gap ms (its time to the next one's), the pause
 * bounded, a negative one (mono_ms went backwards: a hand-edited or merged
 * log) counted and shown as none. */
static int emit(struct ectx *c, const struct shot *s, int64_t gap, struct dg_err *err)
{
	if (gap < 0) {
		c->res->out_of_order++;
		gap = 0;
	}
	if (gap > DG_REC_EXPORT_GAP_MAX_MS)
		gap = DG_REC_EXPORT_GAP_MAX_MS;
	int rc = 0;
	/* No frame before and none shown yet (a session's first action): the
	 * mark goes on the frame after rather than on an empty screen. */
	const char *before = s->before[0] || c->last[0] ? s->before : s->after;
	if (s->before_moment)
		rc = show(c, before, &s->ov, true, DG_REC_EXPORT_BEFORE_MS, err);
	const char *after = s->after[0] ? s->after : s->before;
	if (rc == 0)
		rc = show(c, after, &s->ov, !s->before_moment, gap, err);
	c->res->screens++;
	return rc;
}

/* A frame reference: "" for none (null or absent), the hash, or
 * DG_EXPORT_HASH_BAD for anything else. */
static void frame_ref(const json_t *ev, const char *key, char out[DG_REC_HEX_LEN + 1])
{
	const json_t *v = json_object_get(ev, key);
	const char *s = json_string_value(v);
	snprintf(out, DG_REC_HEX_LEN + 1, "%s",
		 !v || json_is_null(v) ? "" : s && dg_rec_hash_valid(s) ? s : DG_EXPORT_HASH_BAD);
}

static int on_event(struct dg_rec_scan *scan, const struct dg_rec_ev *ev, struct dg_err *err)
{
	struct ectx *c = scan->arg;
	bool action = strcmp(ev->type, "action") == 0, cdp = strcmp(ev->type, "cdp") == 0;
	c->res->last_seq = ev->seq;
	if (!action && !cdp && strcmp(ev->type, "cdp_frame") != 0)
		return 0;
	struct shot s = { .seq = ev->seq, .before_moment = action || cdp };
	const json_t *t = json_object_get(ev->obj, "mono_ms");
	s.t_ms = json_is_integer(t) ? json_integer_value(t) : c->pending.t_ms;
	frame_ref(ev->obj, action || cdp ? "frame_before" : "frame", s.before);
	frame_ref(ev->obj, action ? "frame_after" : "-", s.after);
	dg_export_overlay_of(ev->obj, ev->seq, &s.ov);
	int rc = 0;
	if (c->has_pending)
		rc = emit(c, &c->pending, s.t_ms - c->pending.t_ms, err);
	c->pending = s;
	c->has_pending = true;
	if (rc == 0 && c->res->truncated)
		rc = -ECANCELED;
	return rc;
}

/* ---- the run ---------------------------------------------------------------------- */

/* The video's size: the screen's, scaled down to DG_REC_EXPORT_SIZE_MAX,
 * even (4:2:0 needs it). */
static int video_size(struct ectx *c, const json_t *session, struct dg_err *err)
{
	json_int_t w = json_integer_value(json_object_get(session, "width"));
	json_int_t h = json_integer_value(json_object_get(session, "height"));
	if (w < 1 || h < 1 || w > DG_ACTION_SCREEN_MAX || h > DG_ACTION_SCREEN_MAX)
		return dg_err_set(err, -EBADMSG, "%s: session.json: no screen size", c->dir);
	c->sw = (int)w;
	c->sh = (int)h;
	double k = 1;
	if (w > DG_REC_EXPORT_SIZE_MAX || h > DG_REC_EXPORT_SIZE_MAX)
		k = (double)DG_REC_EXPORT_SIZE_MAX / (double)(w > h ? w : h);
	c->w = ((int)(w * k) + 1) & ~1;
	c->h = ((int)(h * k) + 1) & ~1;
	if (c->w > DG_REC_EXPORT_SIZE_MAX)
		c->w -= 2;
	if (c->h > DG_REC_EXPORT_SIZE_MAX)
		c->h -= 2;
	if (c->w < 2)
		c->w = 2; /* a 16384x1 screen scaled down */
	if (c->h < 2)
		c->h = 2;
	c->res->width = c->w;
	c->res->height = c->h;
	return 0;
}

static void set_banner(struct ectx *c)
{
	const struct dg_rec_verify_result *v = &c->res->verify;
	c->res->verified = v->status == DG_REC_SEALED || v->status == DG_REC_SEALED_CRASH;
	/* The message may quote a path given on the command line: bytes that
	 * are not ASCII would put cairo's text in an error state. */
	char msg[DG_EXPORT_TEXT_MAX * 4 + 4];
	dg_show_str(v->msg, DG_EXPORT_TEXT_MAX, false, msg, sizeof(msg));
	dg_export_textf(c->banner, sizeof(c->banner), "%s%s: %s",
			c->res->verified ? "" : "unverified: ", dg_rec_status_name(v->status), msg);
}

static int open_canvas(struct ectx *c, struct dg_err *err)
{
	c->canvas = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, c->w, c->h);
	c->cr = cairo_create(c->canvas);
	if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS)
		return dg_err_set(err, -ENOMEM, "%s: a %dx%d canvas: out of memory", c->dir, c->w,
				  c->h);
	return 0;
}

/* Reads every event through the chain checker and shows the screen ones.
 * A chain that breaks ends the video there (the banner says why). */
static int render_events(struct ectx *c, struct dg_rec_scan *scan, struct dg_err *err)
{
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_open_reg(scan->dirfd, DG_REC_EVENTS_FILE, O_RDONLY, DG_REC_EVENTS_FILE,
				 &scan->fd, NULL, &e2);
	if (rc == 0) {
		rc = dg_rec_scan_events(scan, &e2);
		close(scan->fd);
		scan->fd = -1;
		if (rc == -EBADMSG || rc == -ECANCELED)
			rc = 0;
	} else if (rc == -ENOENT) {
		rc = 0;
	}
	if (rc)
		return err->msg[0] ? rc : dg_err_set(err, rc, "%s: %s", c->dir, e2.msg);
	if (c->has_pending && !c->res->truncated)
		return emit(c, &c->pending, DG_REC_EXPORT_TAIL_MS, err);
	if (!c->has_pending) {
		struct dg_export_overlay ov = { .what = "no screen events in this recording" };
		return show(c, "", &ov, false, DG_REC_EXPORT_TAIL_MS, err);
	}
	return 0;
}

/* A temporary file beside path, renamed over it when the video is whole. */
static int open_tmp(const char *path, char **tmp, int *fd, struct dg_err *err)
{
	if (asprintf(tmp, "%s.tmp-XXXXXX", path) < 0) {
		*tmp = NULL;
		return dg_err_set(err, -ENOMEM, "%s: out of memory", path);
	}
	*fd = mkostemp(*tmp, O_CLOEXEC);
	if (*fd < 0) {
		int e = errno;
		free(*tmp);
		*tmp = NULL;
		return dg_err_set(err, -e, "%s: cannot create a file there: %s", path, strerror(e));
	}
	fchmod(*fd, 0644);
	return 0;
}

static int encode(struct ectx *c, enum dg_rec_export_format fmt, struct dg_rec_scan *scan,
		  const char *out_path, struct dg_err *err)
{
	char *tmp = NULL;
	int fd = -1;
	int rc = open_tmp(out_path, &tmp, &fd, err);
	if (rc == 0)
		rc = dg_export_enc_open(fmt, fd, out_path, c->w, c->h, &c->enc, err);
	if (rc == 0) {
		c->res->codec = dg_export_enc_codec(c->enc);
		rc = render_events(c, scan, err);
	}
	if (rc == 0)
		rc = dg_export_enc_finish(c->enc, err);
	if (rc == 0 && fsync(fd) != 0)
		rc = dg_err_set(err, -errno, "%s: %s", out_path, strerror(errno));
	if (rc == 0 && rename(tmp, out_path) != 0)
		rc = dg_err_set(err, -errno, "%s: renaming %s over it: %s", out_path, tmp,
				strerror(errno));
	if (rc && tmp)
		unlink(tmp);
	if (fd >= 0)
		close(fd);
	free(tmp);
	return rc;
}

static void ectx_free(struct ectx *c)
{
	dg_export_enc_free(c->enc);
	for (int i = 0; i < DG_EXPORT_CACHE; i++)
		cairo_surface_destroy(c->cache[i].s);
	if (c->cr)
		cairo_destroy(c->cr);
	if (c->canvas)
		cairo_surface_destroy(c->canvas);
	if (c->frames_fd >= 0)
		close(c->frames_fd);
}

int dg_rec_export(const char *dir, const struct dg_rec_key *key, enum dg_rec_export_format fmt,
		  const char *out_path, struct dg_rec_export_result *res, struct dg_err *err)
{
	memset(res, 0, sizeof(*res));
	int rc = dg_rec_verify(dir, key, &res->verify, err);
	if (rc)
		return rc;
	struct ectx c = { .dir = dir, .frames_fd = -1, .res = res };
	set_banner(&c);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "%s: %s", dir, strerror(errno));
	c.frames_fd = openat(dirfd, DG_REC_FRAMES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dg_rec_scan scan = { .lim = &dg_rec_limits_default, .dirfd = dirfd, .fd = -1,
				    .on_event = on_event, .arg = &c };
	struct dg_err e2 = { { 0 } };
	rc = dg_rec_scan_session(&scan, &e2);
	if (rc)
		rc = dg_err_set(err, rc, "%s: %s", dir, e2.msg);
	if (rc == 0)
		rc = video_size(&c, scan.session, err);
	if (rc == 0)
		rc = open_canvas(&c, err);
	if (rc == 0)
		rc = encode(&c, fmt, &scan, out_path, err);
	res->duration_ms = (int64_t)(res->frames * 1000 / DG_REC_EXPORT_FPS);
	dg_rec_scan_free(&scan);
	close(dirfd);
	ectx_free(&c);
	return rc;
}

void dg_rec_export_teardown(void)
{
	cairo_debug_reset_static_data();
	FcFini();
}
