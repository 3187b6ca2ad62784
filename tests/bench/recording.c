/* Benchmark of the recording writer (issue #6): what one event costs the
 * gateway's event loop, and how many bytes an action takes on disk.
 *
 * Writes a realistic action event (an Anthropic tool_use input, the
 * canonical action, the decision, URL, title, screen, pointer, frames,
 * result) N times with fsync per event, with fsync every 100 ms, and
 * without fsync; prints ns per event for each, and as a baseline measured
 * in the same run, the cost of dumping the same event with jansson alone
 * (what any JSON log would pay). Then bytes per action event, and the cost
 * of verifying the recording per event.
 *
 *   bench/recording [EVENTS] [DIR]   (default 20000 events, under /tmp)
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "recordings/recordings.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static json_t *action_event(const char *f1, const char *f2, int i)
{
	return json_pack("{s:s, s:{s:s,s:s,s:s,s:{s:s,s:[ii]}}, s:{s:s,s:i,s:i,s:s,s:i,s:[]},"
			 " s:s, s:s, s:s, s:s, s:s, s:[ii], s:[ii], s:s, s:s,"
			 " s:{s:b,s:[ii],s:s,s:s,s:i,s:i}, s:i}",
			 "type", "action", "input", "type", "tool_use", "id", "toolu_01A09q90qw90lq917835lq9",
			 "name", "computer", "input", "action", "left_click", "coordinate", 640 + i % 7, 400,
			 "action", "type", "click", "x", 640 + i % 7, "y", 400, "button", "left", "count", 1,
			 "modifiers", "verdict", "allow", "rule", "actions.allow[2]", "reason",
			 "the action type is allowed", "url", "https://en.wikipedia.org/wiki/Main_Page",
			 "title", "Wikipedia, the free encyclopedia", "screen", 1280, 800, "pointer", 640,
			 400, "frame_before", f1, "frame_after", f2, "result", "ok", 1, "cursor", 640, 400,
			 "url", "https://en.wikipedia.org/wiki/Main_Page", "title",
			 "Wikipedia, the free encyclopedia", "settle_ms", 31, "encode_ms", 2,
			 "duration_ms", 37);
}

struct run {
	const char *name;
	struct dg_rec_opts o;
	int events;
};

static int bench(const char *root, const char *id, const struct run *rn, const struct dg_rec_key *k,
		 double *ns, long long *bytes)
{
	struct dg_err err = { { 0 } };
	struct dg_rec *r;
	struct dg_rec_meta m = { .id = id, .profile = "browser", .width = 1280, .height = 800,
				 .token_name = "bench", .policy_text = "{\"version\": 1}",
				 .policy_len = 14 };
	if (dg_rec_open(root, &m, &rn->o, &r, &err) != 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		return -1;
	}
	uint8_t png[4096];
	memcpy(png, "\x89PNG\r\n\x1a\n", 8);
	char f1[65], f2[65];
	memset(png + 8, 1, sizeof(png) - 8);
	dg_rec_frame(r, png, sizeof(png), f1, &err);
	memset(png + 8, 2, sizeof(png) - 8);
	dg_rec_frame(r, png, sizeof(png), f2, &err);
	json_t **evs = malloc(sizeof(*evs) * (size_t)rn->events);
	for (int i = 0; i < rn->events; i++)
		evs[i] = action_event(f1, f2, i);
	double t0 = now_ns();
	for (int i = 0; i < rn->events; i++) {
		if (dg_rec_event(r, evs[i], &err) != 0) {
			fprintf(stderr, "bench: %s\n", err.msg);
			return -1;
		}
	}
	double t1 = now_ns();
	*ns = (t1 - t0) / rn->events;
	for (int i = 0; i < rn->events; i++)
		json_decref(evs[i]);
	free(evs);
	dg_rec_seal(r, k, &err);
	dg_rec_close(r);
	char p[512];
	snprintf(p, sizeof(p), "%s/%s/events.jsonl", root, id);
	struct stat st;
	stat(p, &st);
	*bytes = (long long)st.st_size / (rn->events + 1);
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 20000;
	if (n < 100)
		n = 100;
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/dgbench-rec-XXXXXX", argc > 2 ? argv[2] : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char state[300], root[300];
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(root, sizeof(root), "%s/rec", dir);
	mkdir(state, 0700);
	mkdir(root, 0750);
	struct dg_err err = { { 0 } };
	struct dg_rec_key *k;
	if (dg_rec_key_load_or_create(state, &k, &err) != 0) {
		fprintf(stderr, "bench: %s\n", err.msg);
		return 1;
	}
	/* Baseline: jansson dumping the same event (sorted keys). */
	json_t *ev = action_event("0000000000000000000000000000000000000000000000000000000000000000",
				  "1111111111111111111111111111111111111111111111111111111111111111", 0);
	char buf[8192];
	double t0 = now_ns();
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += json_dumpb(ev, buf, sizeof(buf), JSON_COMPACT | JSON_SORT_KEYS);
	double dump_ns = (now_ns() - t0) / n;
	json_decref(ev);

	int sync_n = n / 20 < 200 ? 200 : n / 20; /* fsync is slow: fewer events */
	struct run runs[] = {
		{ "fsync every event", { .fsync = DG_REC_FSYNC_EVERY }, sync_n },
		{ "fsync every 100 ms", { .fsync = DG_REC_FSYNC_INTERVAL, .fsync_interval_ms = 100 }, n },
		{ "no fsync", { .fsync = DG_REC_FSYNC_NONE }, n },
	};
	printf("recording writer, %s (%zu bytes of JSON per event dumped)\n", dir, total / (size_t)n);
	printf("  baseline: jansson dump of the same event   %8.0f ns/event\n", dump_ns);
	long long bytes = 0;
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		char id[16];
		snprintf(id, sizeof(id), "run-%zu", i);
		double ns;
		if (bench(root, id, &runs[i], k, &ns, &bytes) != 0)
			return 1;
		printf("  %-22s %6d events           %8.0f ns/event (%.1fx the dump alone)\n",
		       runs[i].name, runs[i].events, ns, ns / dump_ns);
	}
	printf("  bytes per action event on disk: %lld (frames stored once, not counted)\n", bytes);
	/* Verify: per event. */
	char d[400];
	snprintf(d, sizeof(d), "%s/run-2", root);
	struct dg_rec_verify_result res;
	t0 = now_ns();
	if (dg_rec_verify(d, k, &res, &err) != 0 || res.status != DG_REC_SEALED) {
		fprintf(stderr, "bench: verify: %s %s\n", err.msg, res.msg);
		return 1;
	}
	printf("  verify: %8.0f ns/event (%llu events)\n", (now_ns() - t0) / (double)res.events,
	       (unsigned long long)res.events);
	dg_rec_key_free(k);
	nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
