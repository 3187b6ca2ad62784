/* `deskgate export` (recordings/export*.c): a real recording made with the
 * writer, exported as WebM and MP4 by the binary, checked with ffprobe (the
 * codec, the frame count and the duration the events imply) and with one
 * frame decoded by ffmpeg (the click's overlay where the click was); then
 * hostile recordings. ffprobe and ffmpeg are spawned without a shell
 * (dg_test_run). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <png.h>
#include <zlib.h>

#include "dg_test.h"
#include "recordings-priv.h"
#include "recordings/recordings.h"

#define W 320
#define H 240
#define CLICK_X 160
#define CLICK_Y 120
#define DRAG_Y 70
#define RUN_S 120.0

static char base[64], root[96], state[96];
static struct dg_rec_key *key;
static struct dg_err err;

static void setup(void)
{
	strcpy(base, "/tmp/dgexport-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	cr_assert(snprintf(root, sizeof(root), "%s/rec", base) > 0 && mkdir(root, 0750) == 0);
	cr_assert(snprintf(state, sizeof(state), "%s/state", base) > 0 && mkdir(state, 0700) == 0);
	cr_assert_eq(dg_rec_key_load_or_create(state, &key, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
	dg_rec_key_free(key);
	key = NULL;
	if (!getenv("DG_TEST_KEEP")) /* to look at the videos */
		dg_test_rm_tree(base);
}

TestSuite(export, .init = setup, .fini = teardown, .timeout = 300);

/* ---- making recordings -------------------------------------------------------- */

/* A W x H PNG of one colour. */
static void *solid_png(uint8_t r, uint8_t g, uint8_t b, size_t *len)
{
	uint8_t *rgb = malloc(W * H * 3);
	cr_assert_not_null(rgb);
	for (size_t i = 0; i < W * H; i++) {
		rgb[i * 3] = r;
		rgb[i * 3 + 1] = g;
		rgb[i * 3 + 2] = b;
	}
	png_image pi = { .version = PNG_IMAGE_VERSION, .width = W, .height = H,
			 .format = PNG_FORMAT_RGB };
	png_alloc_size_t n = 0;
	cr_assert(png_image_write_to_memory(&pi, NULL, &n, 0, rgb, 0, NULL));
	void *png = malloc(n);
	cr_assert(png_image_write_to_memory(&pi, png, &n, 0, rgb, 0, NULL));
	free(rgb);
	*len = n;
	return png;
}

/* A PNG whose header claims 100000 x 100000 pixels (valid CRC, no data). */
static void *huge_png(size_t *len)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	uint8_t *p = calloc(1, 64);
	memcpy(p, sig, 8);
	uint8_t ihdr[17] = { 'I', 'H', 'D', 'R', 0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0, 8, 2, 0, 0, 0 };
	p[11] = 13;
	memcpy(p + 12, ihdr, 17);
	uint32_t crc = (uint32_t)crc32(0, ihdr, 17);
	uint8_t c[4] = { crc >> 24, crc >> 16, crc >> 8, crc };
	memcpy(p + 29, c, 4);
	static const uint8_t iend[12] = { 0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xae, 0x42, 0x60, 0x82 };
	memcpy(p + 33, iend, 12);
	*len = 45;
	return p;
}

static void store(struct dg_rec *r, void *png, size_t len, char hex[DG_REC_HEX_LEN + 1])
{
	cr_assert_eq(dg_rec_frame(r, png, len, hex, &err), 0, "%s", err.msg);
	free(png);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static void action(struct dg_rec *r, json_t *a, const char *verdict, const char *before,
		   const char *after)
{
	json_t *ev = json_pack("{s:s, s:o, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "action",
			       "action", a, "verdict", verdict, "rule", "actions.allow", "reason",
			       "the test", "url", "https://example.com/", "frame_before", before,
			       "frame_after", after);
	cr_assert_not_null(ev);
	cr_assert_eq(dg_rec_event(r, ev, &err), 0, "%s", err.msg);
	json_decref(ev);
}

enum hostile { NORMAL, HUGE_FRAME };

/* Records id: a click (allow), a typed text, a denied key chord, a denied
 * drag, with pauses of 300, 3500 (over the bound), 200 and 100 ms; with HUGE_FRAME the key
 * chord's after frame is the 100000 x 100000 PNG. Returns its directory. */
static char *record(const char *id, enum hostile h, bool seal)
{
	static const char policy[] = "{\"version\": 1}";
	struct dg_rec_meta m = { .id = id, .profile = "xterm", .width = W, .height = H,
				 .policy_text = policy, .policy_len = strlen(policy) };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	struct dg_rec *r;
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	char f[4][DG_REC_HEX_LEN + 1];
	size_t len;
	void *png;
	png = solid_png(0, 0, 200, &len);
	store(r, png, len, f[0]);
	png = solid_png(40, 40, 40, &len);
	store(r, png, len, f[1]);
	png = solid_png(200, 200, 200, &len);
	store(r, png, len, f[2]);
	png = h == HUGE_FRAME ? huge_png(&len) : solid_png(90, 0, 90, &len);
	store(r, png, len, f[3]);
	json_t *ev = json_pack("{s:s, s:s}", "type", "lifecycle", "state", "ready");
	cr_assert_eq(dg_rec_event(r, ev, &err), 0, "%s", err.msg);
	json_decref(ev);
	action(r, json_pack("{s:s, s:i, s:i, s:s, s:i}", "type", "click", "x", CLICK_X, "y", CLICK_Y,
			    "button", "left", "count", 1), "allow", f[0], f[1]);
	sleep_ms(300);
	action(r, json_pack("{s:s, s:s}", "type", "type", "text", "ls\n"), "allow", f[1], f[2]);
	sleep_ms(3500);
	action(r, json_pack("{s:s, s:s}", "type", "key", "keys", "ctrl+alt+Delete"), "deny", f[2],
	       f[3]);
	sleep_ms(200);
	action(r, json_pack("{s:s, s:[[i,i],[i,i],[i,i]], s:s}", "type", "drag", "path", 40, DRAG_Y,
			    160, DRAG_Y, 280, DRAG_Y, "button", "left"), "deny", f[0], f[0]);
	sleep_ms(100);
	ev = json_pack("{s:s, s:s}", "type", "lifecycle", "state", "ended");
	cr_assert_eq(dg_rec_event(r, ev, &err), 0, "%s", err.msg);
	json_decref(ev);
	if (seal)
		cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	char *dir = strdup(dg_rec_dir(r));
	dg_rec_close(r);
	return dir;
}

/* The video's length the events imply (docs/recordings.md, "Export as
 * video"): per action DG_REC_EXPORT_BEFORE_MS, then its time to the next
 * (bounded by DG_REC_EXPORT_GAP_MAX_MS, none when negative), the last one
 * DG_REC_EXPORT_TAIL_MS. With upto >= 0: when action number upto (from 0)
 * starts instead. */
static long long timeline_ms(const char *dir, int upto)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[65536];
	long long total = 0, prev = -1;
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert_not_null(j);
		if (strcmp(json_string_value(json_object_get(j, "type")), "action") == 0) {
			long long t = json_integer_value(json_object_get(j, "mono_ms"));
			if (prev >= 0) {
				long long gap = t - prev;
				total += gap < 0 ? 0 : gap > DG_REC_EXPORT_GAP_MAX_MS ? DG_REC_EXPORT_GAP_MAX_MS
											 : gap;
			}
			if (upto-- == 0) {
				json_decref(j);
				fclose(f);
				return total;
			}
			total += DG_REC_EXPORT_BEFORE_MS;
			prev = t;
		}
		json_decref(j);
	}
	fclose(f);
	return total + DG_REC_EXPORT_TAIL_MS;
}

static long long expected_ms(const char *dir)
{
	return timeline_ms(dir, -1);
}

/* ---- running the tools ---------------------------------------------------------- */

struct probe {
	char codec[32];
	long frames;
	double duration;
	int w, h;
};


static void export_(const char *dir, const char *format, const char *out, struct dg_run *run);
static void ffprobe(const char *file, struct probe *p);
static long long expected_ms(const char *dir);

/* Exports dir to BASE/name (format from its extension), expecting exit 0
 * and the frame count the events imply; run keeps what it printed. */
static void export_ok(const char *dir, const char *name, struct dg_run *run)
{
	char out[256];
	snprintf(out, sizeof(out), "%s/%s", base, name);
	export_(dir, strrchr(name, '.') + 1, out, run);
	cr_assert_eq(run->exit_code, 0, "export: %s%s", run->out, run->err);
	struct probe p;
	ffprobe(out, &p);
	long frames = (long)((expected_ms(dir) * DG_REC_EXPORT_FPS + 500) / 1000);
	cr_assert_eq(p.frames, frames, "%ld frames, expected %ld", p.frames, frames);
}

static void export_(const char *dir, const char *format, const char *out, struct dg_run *run)
{
	char keyarg[128];
	snprintf(keyarg, sizeof(keyarg), "%s", state);
	const char *argv[] = { DG_BIN, "export", "--format", format, "--state-dir", keyarg, dir,
			       "-o", out, NULL };
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, RUN_S, -1, run), 0);
}

/* ffprobe's view of the video: codec, decoded frame count, duration. */
static void ffprobe(const char *file, struct probe *p)
{
	const char *argv[] = { "/usr/bin/ffprobe", "-v", "error", "-select_streams", "v:0",
			       "-count_frames", "-show_entries",
			       "stream=codec_name,width,height,nb_read_frames:format=duration",
			       "-of", "default=noprint_wrappers=1", file, NULL };
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, RUN_S, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "ffprobe: %s", r.err);
	memset(p, 0, sizeof(*p));
	for (char *l = strtok(r.out, "\n"); l; l = strtok(NULL, "\n")) {
		sscanf(l, "codec_name=%31s", p->codec);
		sscanf(l, "nb_read_frames=%ld", &p->frames);
		sscanf(l, "duration=%lf", &p->duration);
		sscanf(l, "width=%d", &p->w);
		sscanf(l, "height=%d", &p->h);
	}
	dg_run_free(&r);
}

/* The video's picture at t seconds, as RGB (W x H). */
static unsigned char *frame_at(const char *file, double t)
{
	char ts[32], png[256];
	snprintf(ts, sizeof(ts), "%.3f", t);
	snprintf(png, sizeof(png), "%s/frame.png", base);
	const char *argv[] = { "/usr/bin/ffmpeg", "-v", "error", "-nostdin", "-y", "-i", file,
			       "-ss", ts, "-frames:v", "1", png, NULL };
	struct dg_run r;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, RUN_S, -1, &r), 0);
	cr_assert_eq(r.exit_code, 0, "ffmpeg: %s", r.err);
	dg_run_free(&r);
	FILE *f = fopen(png, "rb");
	cr_assert_not_null(f);
	static unsigned char buf[4 * 1024 * 1024];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	int w, h;
	unsigned char *rgb = dg_test_png_rgb(buf, n, &w, &h);
	cr_assert_not_null(rgb);
	cr_assert_eq(w, W);
	cr_assert_eq(h, H);
	return rgb;
}

static const unsigned char *px(const unsigned char *rgb, int x, int y)
{
	return rgb + ((size_t)y * W + x) * 3;
}

/* ---- the tests ------------------------------------------------------------------------ */

static void check_video(const char *dir, const char *format, const char *codec)
{
	char out[256];
	snprintf(out, sizeof(out), "%s/incident.%s", base, format);
	struct dg_run run;
	double t0 = dg_test_now();
	export_(dir, format, out, &run);
	double took = dg_test_now() - t0;
	cr_assert_eq(run.exit_code, 0, "export: %s%s", run.out, run.err);
	cr_assert(strstr(run.out, ": sealed: "), "%s", run.out);
	cr_assert_not(strstr(run.out, "unverified"), "%s", run.out);
	long long ms = expected_ms(dir);
	long frames = (long)((ms * DG_REC_EXPORT_FPS + 500) / 1000);
	struct probe p;
	ffprobe(out, &p);
	cr_log_info("%s: %s %dx%d %ld frames %.3f s (expected %lld ms, %ld frames), export %.2f s",
		    format, p.codec, p.w, p.h, p.frames, p.duration, ms, frames, took);
	cr_assert_str_eq(p.codec, codec);
	cr_assert_eq(p.w, W);
	cr_assert_eq(p.h, H);
	cr_assert_eq(p.frames, frames, "%ld frames, expected %ld", p.frames, frames);
	cr_assert(fabs(p.duration - ms / 1000.0) <= 1.0 / DG_REC_EXPORT_FPS + 1e-6,
		  "%.3f s, expected %.3f", p.duration, ms / 1000.0);
	/* The click's before moment: the allow colour on the click point, the
	 * blue screen beside it; then the after frame (grey) without a mark. */
	unsigned char *rgb = frame_at(out, 0.3);
	const unsigned char *c = px(rgb, CLICK_X, CLICK_Y), *bg = px(rgb, CLICK_X - 60, CLICK_Y);
	cr_assert(c[1] > 150 && c[0] < 90 && c[2] < 90, "click point %d,%d,%d", c[0], c[1], c[2]);
	cr_assert(bg[2] > 150 && bg[0] < 60 && bg[1] < 60, "beside %d,%d,%d", bg[0], bg[1], bg[2]);
	free(rgb);
	rgb = frame_at(out, 0.75);
	c = px(rgb, CLICK_X, CLICK_Y);
	cr_assert(abs(c[0] - 40) < 20 && abs(c[1] - 40) < 20 && abs(c[2] - 40) < 20,
		  "after the click %d,%d,%d", c[0], c[1], c[2]);
	free(rgb);
	/* The denied drag's path, red, on its blue before frame. */
	rgb = frame_at(out, timeline_ms(dir, 3) / 1000.0 + 0.3);
	c = px(rgb, 100, DRAG_Y);
	cr_assert(c[0] > 150 && c[1] < 90 && c[2] < 90, "drag path %d,%d,%d", c[0], c[1], c[2]);
	c = px(rgb, 100, DRAG_Y + 20);
	cr_assert(c[2] > 150 && c[0] < 60, "beside the path %d,%d,%d", c[0], c[1], c[2]);
	free(rgb);
	dg_run_free(&run);
}

Test(export, webm_and_mp4)
{
	char *dir = record("s1", NORMAL, true);
	check_video(dir, "webm", "vp8");
	check_video(dir, "mp4", "h264");
	free(dir);
}

/* A frame whose header claims 100000 x 100000 pixels: a note on the
 * screen, no allocation of its size, the rest of the video as usual. */
Test(export, huge_frame_refused)
{
	char *dir = record("s2", HUGE_FRAME, true);
	struct dg_run run;
	export_ok(dir, "huge.webm", &run);
	cr_assert(strstr(run.out, "1 frames missing or refused"), "%s", run.out);
	dg_run_free(&run);
	free(dir);
}

/* A frame deleted after the seal: verify says bad, the video is still
 * made, with the red "unverified" band on its first frame. */
Test(export, missing_frame_unverified)
{
	char *dir = record("s3", NORMAL, true);
	char path[512];
	/* the first action's after frame: the dark grey one */
	size_t len;
	void *png = solid_png(40, 40, 40, &len);
	uint8_t h[DG_REC_SHA_LEN];
	cr_assert_eq(dg_rec_sha256(png, len, h), 0);
	free(png);
	char hex[DG_REC_HEX_LEN + 1];
	for (int i = 0; i < DG_REC_SHA_LEN; i++)
		sprintf(hex + 2 * i, "%02x", h[i]);
	snprintf(path, sizeof(path), "%s/frames/%s.png", dir, hex);
	cr_assert_eq(unlink(path), 0, "%s", path);
	struct dg_run run;
	export_ok(dir, "missing.webm", &run);
	cr_assert(strstr(run.out, ": bad: "), "%s", run.out);
	cr_assert(strstr(run.out, "marked unverified"), "%s", run.out);
	cr_assert(strstr(run.out, "frames missing or refused"), "%s", run.out);
	snprintf(path, sizeof(path), "%s/missing.webm", base);
	unsigned char *rgb = frame_at(path, 0.0);
	const unsigned char *c = px(rgb, 2, 2);
	cr_assert(c[0] > 100 && c[1] < 60 && c[2] < 60, "banner %d,%d,%d", c[0], c[1], c[2]);
	free(rgb);
	dg_run_free(&run);
	free(dir);
}

/* Rewrites events.jsonl with seq's mono_ms set to mono and the chain
 * recomputed (the seal dropped: it would no longer verify). */
static void rechain(const char *dir, uint64_t seq, long long mono)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/events.jsonl", dir);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char *lines = NULL;
	size_t size = 0;
	FILE *o = open_memstream(&lines, &size);
	char line[65536], prev[DG_REC_HEX_LEN + 1] = "";
	while (fgets(line, sizeof(line), f)) {
		json_t *j = json_loads(line, 0, NULL);
		cr_assert_not_null(j);
		if (strcmp(json_string_value(json_object_get(j, "type")), "seal") == 0) {
			json_decref(j);
			break;
		}
		if (!prev[0])
			snprintf(prev, sizeof(prev), "%s", json_string_value(json_object_get(j, "prev")));
		json_object_del(j, "hash");
		json_object_set_new(j, "prev", json_string(prev));
		if ((uint64_t)json_integer_value(json_object_get(j, "seq")) == seq)
			json_object_set_new(j, "mono_ms", json_integer(mono));
		char *c = json_dumps(j, DG_REC_DUMP_FLAGS);
		uint8_t buf[DG_REC_SHA_LEN + 65536], h[DG_REC_SHA_LEN];
		cr_assert_eq(dg_rec_unhex(prev, buf), 0);
		size_t n = strlen(c);
		memcpy(buf + DG_REC_SHA_LEN, c, n);
		cr_assert_eq(dg_rec_sha256(buf, DG_REC_SHA_LEN + n, h), 0);
		for (int i = 0; i < DG_REC_SHA_LEN; i++)
			sprintf(prev + 2 * i, "%02x", h[i]);
		c[n - 1] = 0;
		fprintf(o, "%s,\"hash\":\"%s\"}\n", c, prev);
		free(c);
		json_decref(j);
	}
	fclose(f);
	fclose(o);
	f = fopen(path, "w");
	fwrite(lines, 1, size, f);
	fclose(f);
	free(lines);
}

/* mono_ms going backwards (seq 4, the last action, before the first): the
 * chain holds (recomputed), the pause is none and counted. */
Test(export, non_monotonic_time)
{
	char *dir = record("s4", NORMAL, false);
	rechain(dir, 4, 1);
	const char *argv[] = { DG_BIN, "verify", dir, NULL };
	struct dg_run v;
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, RUN_S, -1, &v), 0);
	cr_assert(strstr(v.out, ": unsealed: "), "%s%s", v.out, v.err);
	dg_run_free(&v);
	struct dg_run run;
	export_ok(dir, "time.mp4", &run);
	cr_assert(strstr(run.out, "1 events out of time order"), "%s", run.out);
	cr_assert(strstr(run.out, "marked unverified"), "%s", run.out);
	dg_run_free(&run);
	free(dir);
}

/* -o into a directory that does not exist, and a recording that is not
 * one: exit 1 and a message naming the file; nothing left behind. */
Test(export, bad_paths)
{
	char *dir = record("s5", NORMAL, true);
	char out[256];
	snprintf(out, sizeof(out), "%s/no/such/dir/x.webm", base);
	struct dg_run run;
	export_(dir, "webm", out, &run);
	cr_assert_eq(run.exit_code, 1, "%s%s", run.out, run.err);
	cr_assert(strstr(run.err, out) && strstr(run.err, "No such file or directory"), "%s",
		  run.err);
	dg_run_free(&run);
	snprintf(out, sizeof(out), "%s/x.webm", base);
	export_(base, "webm", out, &run);
	cr_assert_eq(run.exit_code, 1, "%s%s", run.out, run.err);
	cr_assert(strstr(run.err, "deskgate export: "), "%s", run.err);
	cr_assert_eq(access(out, F_OK), -1);
	dg_run_free(&run);
	const char *argv[] = { DG_BIN, "export", "--format", "avi", dir, "-o", out, NULL };
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, RUN_S, -1, &run), 0);
	cr_assert_eq(run.exit_code, 2, "%s%s", run.out, run.err);
	dg_run_free(&run);
	free(dir);
}
