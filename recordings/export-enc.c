/* dg_export: the video encoder. libavcodec encodes (VP8/VP9 through libvpx,
 * H.264 through libx264, or the native MPEG-4 part 2), libavformat muxes
 * (WebM, MP4), libswscale converts cairo's ARGB32 to YUV 4:2:0. The output
 * goes through an AVIOContext of our own over the caller's descriptor, so
 * no path is ever parsed as an FFmpeg URL ("http:", "pipe:", ...). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include "recordings/export-priv.h"

struct dg_export_enc {
	AVFormatContext *fmt;
	AVCodecContext *cc;
	AVStream *st;
	AVFrame *yuv;
	AVPacket *pkt;
	struct SwsContext *sws;
	int fd;
	int w, h;
	int64_t pts;
	int io_err;          /* the first write error (negative errno) */
	const char *path;
	const char *codec;
};

/* FFmpeg's error text for rc, with what failed and the file. */
static int av_fail(struct dg_export_enc *e, int rc, const char *what, struct dg_err *err)
{
	char buf[AV_ERROR_MAX_STRING_SIZE] = "";
	if (e->io_err)
		rc = AVERROR(-e->io_err);
	av_strerror(rc, buf, sizeof(buf));
	int code = rc < 0 && rc > -4096 ? rc : -EIO;
	return dg_err_set(err, code, "%s: %s: %s", e->path, what, buf);
}

#if LIBAVFORMAT_VERSION_MAJOR >= 61
static int io_write(void *opaque, const uint8_t *buf, int len)
#else
static int io_write(void *opaque, uint8_t *buf, int len)
#endif
{
	struct dg_export_enc *e = opaque;
	for (int off = 0; off < len;) {
		ssize_t n = write(e->fd, buf + off, (size_t)(len - off));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!e->io_err)
				e->io_err = n < 0 ? -errno : -EIO;
			return AVERROR(EIO);
		}
		off += (int)n;
	}
	return len;
}

static int64_t io_seek(void *opaque, int64_t offset, int whence)
{
	struct dg_export_enc *e = opaque;
	if (whence & AVSEEK_SIZE) {
		struct stat st;
		return fstat(e->fd, &st) == 0 ? st.st_size : AVERROR(errno);
	}
	off_t r = lseek(e->fd, offset, whence & ~AVSEEK_FORCE);
	return r < 0 ? AVERROR(errno) : r;
}

/* The first encoder of names that this libavcodec has. */
static const AVCodec *find_encoder(const char *const *names, const char **name)
{
	for (int i = 0; names[i]; i++) {
		const AVCodec *c = avcodec_find_encoder_by_name(names[i]);
		if (c) {
			*name = names[i];
			return c;
		}
	}
	return NULL;
}

/* Encoder settings: fast enough for a long recording on 2 cores, screen
 * text still legible; a key frame every 10 s for seeking. */
static void set_quality(AVCodecContext *cc, const char *name)
{
	cc->gop_size = DG_REC_EXPORT_FPS * 10;
	if (strncmp(name, "libvpx", 6) == 0) {
		cc->bit_rate = 2000000;
		av_opt_set(cc->priv_data, "deadline", "realtime", 0);
		av_opt_set(cc->priv_data, "cpu-used", "8", 0);
		av_opt_set(cc->priv_data, "crf", "10", 0);
	} else if (strcmp(name, "libx264") == 0) {
		av_opt_set(cc->priv_data, "preset", "veryfast", 0);
		av_opt_set(cc->priv_data, "crf", "20", 0);
	} else {
		cc->flags |= AV_CODEC_FLAG_QSCALE;
		cc->global_quality = FF_QP2LAMBDA * 3;
	}
}

static int open_codec(struct dg_export_enc *e, enum dg_rec_export_format f, struct dg_err *err)
{
	static const char *const webm[] = { "libvpx", "libvpx-vp9", NULL };
	static const char *const mp4[] = { "libx264", "mpeg4", NULL };
	const AVCodec *c = find_encoder(f == DG_REC_EXPORT_WEBM ? webm : mp4, &e->codec);
	if (!c)
		return dg_err_set(err, -ENOSYS, "%s: this libavcodec has no %s encoder", e->path,
				  f == DG_REC_EXPORT_WEBM ? "VP8 or VP9" : "H.264 or MPEG-4");
	e->cc = avcodec_alloc_context3(c);
	if (!e->cc)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", e->path);
	e->cc->width = e->w;
	e->cc->height = e->h;
	e->cc->pix_fmt = AV_PIX_FMT_YUV420P;
	e->cc->time_base = (AVRational){ 1, DG_REC_EXPORT_FPS };
	e->cc->framerate = (AVRational){ DG_REC_EXPORT_FPS, 1 };
	e->cc->thread_count = 2;
	if (e->fmt->oformat->flags & AVFMT_GLOBALHEADER)
		e->cc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
	set_quality(e->cc, e->codec);
	int rc = avcodec_open2(e->cc, c, NULL);
	if (rc < 0)
		return av_fail(e, rc, "opening the encoder", err);
	e->st = avformat_new_stream(e->fmt, NULL);
	if (!e->st)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", e->path);
	e->st->time_base = e->cc->time_base;
	e->st->avg_frame_rate = e->cc->framerate;
	rc = avcodec_parameters_from_context(e->st->codecpar, e->cc);
	return rc < 0 ? av_fail(e, rc, "stream parameters", err) : 0;
}

static int open_io(struct dg_export_enc *e, struct dg_err *err)
{
	uint8_t *buf = av_malloc(DG_EXPORT_IO_BUF);
	if (buf)
		e->fmt->pb = avio_alloc_context(buf, DG_EXPORT_IO_BUF, 1, e, NULL, io_write, io_seek);
	if (!e->fmt->pb) {
		av_free(buf);
		return dg_err_set(err, -ENOMEM, "%s: out of memory", e->path);
	}
	e->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
	return 0;
}

static int open_frames(struct dg_export_enc *e, struct dg_err *err)
{
	e->yuv = av_frame_alloc();
	e->pkt = av_packet_alloc();
	if (!e->yuv || !e->pkt)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", e->path);
	e->yuv->format = AV_PIX_FMT_YUV420P;
	e->yuv->width = e->w;
	e->yuv->height = e->h;
	int rc = av_frame_get_buffer(e->yuv, 0);
	if (rc < 0)
		return av_fail(e, rc, "a frame buffer", err);
	e->sws = sws_getContext(e->w, e->h, AV_PIX_FMT_RGB32, e->w, e->h, AV_PIX_FMT_YUV420P,
				SWS_BILINEAR, NULL, NULL, NULL);
	if (!e->sws)
		return dg_err_set(err, -ENOMEM, "%s: no RGB to YUV converter", e->path);
	return 0;
}

int dg_export_enc_open(enum dg_rec_export_format f, int fd, const char *path, int w, int h,
		       struct dg_export_enc **out, struct dg_err *err)
{
	/* FFmpeg's info lines (encoder banners, statistics) are not ours to
	 * print; its errors reach the caller through err anyway. */
	av_log_set_level(AV_LOG_ERROR);
	struct dg_export_enc *e = calloc(1, sizeof(*e));
	if (!e)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", path);
	*e = (struct dg_export_enc){ .fd = fd, .w = w, .h = h, .path = path };
	int rc = avformat_alloc_output_context2(&e->fmt, NULL,
						f == DG_REC_EXPORT_WEBM ? "webm" : "mp4", NULL);
	if (rc < 0)
		rc = av_fail(e, rc, "the container", err);
	if (rc >= 0)
		rc = open_io(e, err);
	if (rc >= 0)
		rc = open_codec(e, f, err);
	if (rc >= 0)
		rc = open_frames(e, err);
	if (rc >= 0 && (rc = avformat_write_header(e->fmt, NULL)) < 0)
		rc = av_fail(e, rc, "writing the header", err);
	if (rc < 0) {
		dg_export_enc_free(e);
		return rc;
	}
	*out = e;
	return 0;
}

const char *dg_export_enc_codec(const struct dg_export_enc *e)
{
	return e->codec;
}

/* Writes every packet the encoder has ready. */
static int drain(struct dg_export_enc *e, struct dg_err *err)
{
	for (;;) {
		int rc = avcodec_receive_packet(e->cc, e->pkt);
		if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF)
			return 0;
		if (rc < 0)
			return av_fail(e, rc, "encoding", err);
		av_packet_rescale_ts(e->pkt, e->cc->time_base, e->st->time_base);
		e->pkt->stream_index = e->st->index;
		rc = av_interleaved_write_frame(e->fmt, e->pkt);
		if (rc < 0)
			return av_fail(e, rc, "writing", err);
	}
}

int dg_export_enc_put(struct dg_export_enc *e, const uint8_t *argb, int stride, uint64_t count,
		      struct dg_err *err)
{
	if (!count)
		return 0;
	/* The encoder may still hold a reference to the last picture. */
	int rc = av_frame_make_writable(e->yuv);
	if (rc < 0)
		return av_fail(e, rc, "a frame buffer", err);
	const uint8_t *src[1] = { argb };
	int src_stride[1] = { stride };
	sws_scale(e->sws, src, src_stride, 0, e->h, e->yuv->data, e->yuv->linesize);
	for (uint64_t i = 0; i < count; i++) {
		e->yuv->pts = e->pts++;
		rc = avcodec_send_frame(e->cc, e->yuv);
		if (rc < 0)
			return av_fail(e, rc, "encoding", err);
		if ((rc = drain(e, err)) < 0)
			return rc;
	}
	return 0;
}

int dg_export_enc_finish(struct dg_export_enc *e, struct dg_err *err)
{
	int rc = avcodec_send_frame(e->cc, NULL);
	if (rc < 0)
		return av_fail(e, rc, "ending the stream", err);
	if ((rc = drain(e, err)) < 0)
		return rc;
	rc = av_write_trailer(e->fmt);
	if (rc < 0)
		return av_fail(e, rc, "writing the trailer", err);
	avio_flush(e->fmt->pb);
	if (e->io_err)
		return av_fail(e, AVERROR(EIO), "writing", err);
	return 0;
}

void dg_export_enc_free(struct dg_export_enc *e)
{
	if (!e)
		return;
	sws_freeContext(e->sws);
	av_packet_free(&e->pkt);
	av_frame_free(&e->yuv);
	avcodec_free_context(&e->cc);
	if (e->fmt && e->fmt->pb) {
		av_freep(&e->fmt->pb->buffer);
		avio_context_free(&e->fmt->pb);
	}
	avformat_free_context(e->fmt);
	free(e);
}
