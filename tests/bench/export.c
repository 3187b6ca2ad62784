/* Benchmark of `deskgate export` (recordings/export*.c): seconds of wall
 * time per minute of video, for WebM and MP4.
 *
 * Records ACTIONS click actions at 1280x800 without pauses (each is 0.6 s
 * of video: 100 actions make one minute), their frames 20 distinct
 * screens of coloured panels and stripes (busier than a desktop, so the
 * encoder has work), sealed; then runs the binary (DG_BIN) once per
 * format and prints the wall and CPU time per minute of video.
 *
 *   bench/export [ACTIONS] [DIR]   (default 100 actions, under /tmp)
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <png.h>

#include "recordings/recordings.h"

#define BW 1280
#define BH 800
#define SCREENS 20

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

/* Screen i: panels and stripes whose colours and places depend on i. */
static void *screen_png(int i, size_t *len)
{
	uint8_t *rgb = malloc((size_t)BW * BH * 3);
	if (!rgb)
		return NULL;
	for (int y = 0; y < BH; y++) {
		for (int x = 0; x < BW; x++) {
			uint8_t *p = rgb + ((size_t)y * BW + x) * 3;
			bool panel = ((x / (80 + i * 7)) + (y / (60 + i * 5))) % 3 == 0;
			bool stripe = (y % 16) < 2 && x > 100 + i * 10 && x < 900;
			p[0] = stripe ? 20 : panel ? (uint8_t)(40 * i) : 235;
			p[1] = stripe ? 20 : panel ? (uint8_t)(255 - 9 * i) : 235;
			p[2] = stripe ? 20 : panel ? (uint8_t)(90 + 5 * i) : 240;
		}
	}
	png_image pi = { .version = PNG_IMAGE_VERSION, .width = BW, .height = BH,
			 .format = PNG_FORMAT_RGB };
	png_alloc_size_t n = 0;
	void *png = NULL;
	if (png_image_write_to_memory(&pi, NULL, &n, 0, rgb, 0, NULL) && (png = malloc(n)) &&
	    !png_image_write_to_memory(&pi, png, &n, 0, rgb, 0, NULL)) {
		free(png);
		png = NULL;
	}
	free(rgb);
	*len = n;
	return png;
}

static int record(const char *root, int actions, struct dg_rec_key *k)
{
	static const char policy[] = "{\"version\": 1}";
	struct dg_rec_meta m = { .id = "bench", .profile = "browser", .width = BW, .height = BH,
				 .policy_text = policy, .policy_len = strlen(policy) };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	struct dg_err err = { { 0 } };
	struct dg_rec *r;
	if (dg_rec_open(root, &m, &o, &r, &err) != 0)
		goto fail;
	char h[SCREENS][DG_REC_HEX_LEN + 1];
	for (int i = 0; i < SCREENS; i++) {
		size_t len;
		void *png = screen_png(i, &len);
		int rc = png ? dg_rec_frame(r, png, len, h[i], &err) : -ENOMEM;
		free(png);
		if (rc)
			goto fail;
	}
	for (int i = 0; i < actions; i++) {
		json_t *ev = json_pack("{s:s, s:{s:s, s:i, s:i, s:s, s:i}, s:s, s:s, s:s, s:s, s:s}",
				       "type", "action", "action", "type", "click", "x", 100 + i * 7 % 1000,
				       "y", 100 + i * 13 % 600, "button", "left", "count", 1, "verdict",
				       i % 5 ? "allow" : "deny", "rule", "actions.allow", "url",
				       "https://example.com/", "frame_before", h[i % SCREENS],
				       "frame_after", h[(i + 1) % SCREENS]);
		int rc = ev ? dg_rec_event(r, ev, &err) : -ENOMEM;
		json_decref(ev);
		if (rc)
			goto fail;
	}
	if (dg_rec_seal(r, k, &err) != 0)
		goto fail;
	dg_rec_close(r);
	return 0;
fail:
	fprintf(stderr, "bench/export: recording: %s\n", err.msg);
	return 1;
}

/* Runs `deskgate export` (no shell); its wall time, or a negative; *cpu
 * gets its user and system CPU time (steadier on a busy machine). */
static double run_export(const char *dir, const char *format, const char *out, double *cpu)
{
	double t0 = now_s();
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(DG_BIN, DG_BIN, "export", "--format", format, dir, "-o", out, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	struct rusage ru;
	if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	*cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	int actions = argc > 1 ? atoi(argv[1]) : 100;
	char base[256];
	snprintf(base, sizeof(base), "%s/dg-bench-export-XXXXXX", argc > 2 ? argv[2] : "/tmp");
	if (actions < 1 || !mkdtemp(base)) {
		fprintf(stderr, "usage: bench/export [ACTIONS] [DIR]\n");
		return 2;
	}
	char root[300], state[300], dir[320], out[320];
	snprintf(root, sizeof(root), "%s/rec", base);
	snprintf(state, sizeof(state), "%s/state", base);
	snprintf(dir, sizeof(dir), "%s/bench", root);
	mkdir(root, 0750);
	mkdir(state, 0700);
	struct dg_err err = { { 0 } };
	struct dg_rec_key *k = NULL;
	int rc = dg_rec_key_load_or_create(state, &k, &err) || record(root, actions, k);
	dg_rec_key_free(k);
	double video_min = (actions * DG_REC_EXPORT_BEFORE_MS + DG_REC_EXPORT_TAIL_MS) / 60000.0;
	static const char *const formats[] = { "webm", "mp4" };
	for (int i = 0; rc == 0 && i < 2; i++) {
		snprintf(out, sizeof(out), "%s/out.%s", base, formats[i]);
		double cpu = 0, s = run_export(dir, formats[i], out, &cpu);
		if (s < 0) {
			fprintf(stderr, "bench/export: deskgate export --format %s failed\n", formats[i]);
			rc = 1;
			break;
		}
		printf("export %s: %d actions, %dx%d, %.2f min of video in %.2f s (%.2f s CPU): "
		       "%.2f s per minute (%.2f s CPU)\n", formats[i], actions, BW, BH, video_min, s,
		       cpu, s / video_min, cpu / video_min);
	}
	nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
