/* Retention (issue #6): the oldest recordings go first, by age and by total
 * size, each at its boundary; an active session is never deleted (the
 * caller's word or a writer's lock); unsealed recordings of dead sessions
 * count as sealed; with an object store, a recording whose upload is not
 * confirmed is never deleted, by age or by size, and the result says how
 * many and how large; what is not a recording is left alone; an
 * interrupted deletion is finished; the entry bound. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recordings-priv.h"

static char base[64], root[128], state[128];
static struct dg_err err;
static struct dg_rec_key *key;

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/dgret-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/rec", base);
	snprintf(state, sizeof(state), "%s/state", base);
	mkdir(root, 0750);
	mkdir(state, 0700);
	cr_assert_eq(dg_rec_key_load_or_create(state, &key, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
	dg_rec_key_free(key);
	nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(retention, .init = setup, .fini = teardown);

#define NOW 1700000000

/* A recording that ended `age` seconds before NOW, with a frame; sealed or
 * not. Returns its size as retention counts it. */
static uint64_t make(const char *id, int64_t age, bool seal, struct dg_rec **keep_open)
{
	struct dg_rec *r;
	struct dg_rec_meta m = { .id = id, .profile = "xterm", .width = 640, .height = 480,
				 .policy_text = "{}", .policy_len = 2 };
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	uint8_t png[1000];
	memcpy(png, "\x89PNG\r\n\x1a\n", 8);
	memset(png + 8, id[0], sizeof(png) - 8);
	char hex[65];
	cr_assert_eq(dg_rec_frame(r, png, sizeof(png), hex, &err), 0);
	json_t *e = json_pack("{s:s, s:s, s:s}", "type", "lifecycle", "state", "ready", "frame", hex);
	cr_assert_eq(dg_rec_event(r, e, &err), 0);
	json_decref(e);
	if (seal)
		cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	if (keep_open)
		*keep_open = r;
	else
		dg_rec_close(r);
	char p[300];
	snprintf(p, sizeof(p), "%s/%s/events.jsonl", root, id);
	struct timespec ts[2] = { { .tv_sec = NOW - age }, { .tv_sec = NOW - age } };
	cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
	struct stat st;
	uint64_t total = 0;
	const char *files[] = { "events.jsonl", "session.json" };
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/%s/%s", root, id, files[i]);
		stat(p, &st);
		total += (uint64_t)st.st_size;
	}
	return total + sizeof(png);
}

static bool exists(const char *id)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/%s", root, id);
	return access(p, F_OK) == 0;
}

static const char *active_id;
static bool is_active(const char *id, void *arg)
{
	(void)arg;
	return active_id && strcmp(id, active_id) == 0;
}

static int reports;
static void report(const char *id, int rc, const char *msg, void *arg)
{
	(void)id;
	(void)rc;
	(void)msg;
	(void)arg;
	reports++;
}

static struct dg_rec_retention_result res;
static bool keep_unuploaded;

static void retain(int64_t max_age, uint64_t max_bytes)
{
	struct dg_rec_retention_opts o = { .max_age_s = max_age, .max_total_bytes = max_bytes,
					   .now_s = NOW, .keep_unuploaded = keep_unuploaded,
					   .pass = { .is_active = is_active, .report = report } };
	cr_assert_eq(dg_rec_retention(root, &o, &res, &err), 0, "%s", err.msg);
}

Test(retention, by_age_at_its_boundary)
{
	make("a-old", 1001, true, NULL);
	make("b-edge", 1000, true, NULL);
	make("c-new", 10, true, NULL);
	retain(1000, 0);
	cr_assert_eq(res.recordings, 3);
	cr_assert_eq(res.deleted, 1);
	cr_assert_not(exists("a-old"));
	cr_assert(exists("b-edge"), "exactly max_age old is kept");
	cr_assert(exists("c-new"));
	retain(999, 0);
	cr_assert_not(exists("b-edge"));
	cr_assert(exists("c-new"));
	cr_assert_eq(reports, 2);
}

Test(retention, by_total_size_oldest_first_at_its_boundary)
{
	uint64_t s1 = make("r1", 400, true, NULL);
	uint64_t s2 = make("r2", 300, true, NULL);
	uint64_t s3 = make("r3", 200, true, NULL);
	uint64_t s4 = make("r4", 100, true, NULL);
	uint64_t total = s1 + s2 + s3 + s4;
	retain(0, total);
	cr_assert_eq(res.bytes_before, total);
	cr_assert_eq(res.deleted, 0, "exactly the budget: nothing goes");
	retain(0, total - 1);
	cr_assert_eq(res.deleted, 1);
	cr_assert_not(exists("r1"), "the oldest goes first");
	cr_assert(exists("r2"));
	cr_assert_eq(res.bytes_after, total - s1);
	retain(0, s4);
	cr_assert_not(exists("r2"));
	cr_assert_not(exists("r3"));
	cr_assert(exists("r4"));
	cr_assert_eq(res.bytes_after, s4);
	cr_assert_not(res.over_budget);
}

Test(retention, active_sessions_are_never_deleted)
{
	make("old-active", 5000, false, NULL);
	struct dg_rec *live;
	make("old-locked", 4000, false, &live); /* a writer holds it; no callback says so */
	make("old-dead", 3000, false, NULL);    /* unsealed, dead: counts as sealed */
	make("new", 10, true, NULL);
	active_id = "old-active";
	retain(100, 1);
	cr_assert(exists("old-active"));
	cr_assert(exists("old-locked"));
	cr_assert_not(exists("old-dead"));
	cr_assert_not(exists("new"));
	cr_assert_eq(res.active, 2);
	cr_assert(res.over_budget);
	/* Once the writer is gone, it ages out too. */
	dg_rec_close(live);
	retain(100, 0);
	cr_assert_not(exists("old-locked"));
	cr_assert(exists("old-active"));
}

Test(retention, leaves_what_is_not_a_recording_and_finishes_interrupted_deletes)
{
	make("rec", 5000, true, NULL);
	char p[300];
	snprintf(p, sizeof(p), "%s/UPPER", root);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/notes.txt", root);
	FILE *f = fopen(p, "w");
	fputs("x", f);
	fclose(f);
	/* A symlink named like a recording, pointing at a directory outside. */
	char outside[300];
	snprintf(outside, sizeof(outside), "%s/outside", base);
	mkdir(outside, 0700);
	snprintf(p, sizeof(p), "%s/outside/keep", base);
	f = fopen(p, "w");
	fclose(f);
	snprintf(p, sizeof(p), "%s/link", root);
	symlink(outside, p);
	/* A deletion a crash interrupted, with a symlink inside it. */
	snprintf(p, sizeof(p), "%s/.deleting-gone", root);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/.deleting-gone/frames", root);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/.deleting-gone/frames/evil", root);
	symlink(outside, p);
	retain(1, 0);
	cr_assert_eq(res.recordings, 1);
	cr_assert_not(exists("rec"));
	cr_assert(exists("UPPER"));
	cr_assert(exists("notes.txt"));
	cr_assert(exists("link"));
	cr_assert_not(exists(".deleting-gone"));
	snprintf(p, sizeof(p), "%s/outside/keep", base);
	cr_assert_eq(access(p, F_OK), 0, "a symlink was followed");
}

Test(retention, removal_depth_at_its_boundary)
{
	/* Interrupted deletions nested DG_REC_RM_DEPTH_MAX levels deep are
	 * removed; one level deeper is left (a recording has two levels). */
	for (int over = 0; over <= 1; over++) {
		char p[512];
		int n = snprintf(p, sizeof(p), "%s/.deleting-d%d", root, over);
		mkdir(p, 0700);
		for (int d = 1; d <= DG_REC_RM_DEPTH_MAX + over; d++) {
			n += snprintf(p + n, sizeof(p) - (size_t)n, "/%d", d);
			cr_assert_eq(mkdir(p, 0700), 0, "%s", p);
		}
	}
	retain(1, 0);
	cr_assert_not(exists(".deleting-d0"));
	cr_assert(exists(".deleting-d1"));
}

Test(retention, entry_bound)
{
	for (int i = 0; i < 4; i++) {
		char id[16]; /* "e" and any int */
		snprintf(id, sizeof(id), "e%d", i);
		make(id, 10, true, NULL);
	}
	struct dg_rec_limits lim = dg_rec_limits_default;
	struct dg_rec_retention_opts o = { .max_age_s = 1000, .now_s = NOW };
	lim.dir_entries_max = 6; /* ".", "..", 4 recordings */
	cr_assert_eq(dg_rec_retention_lim(root, &o, &lim, &res, &err), 0, "%s", err.msg);
	cr_assert_eq(res.recordings, 4);
	lim.dir_entries_max = 5;
	cr_assert_eq(dg_rec_retention_lim(root, &o, &lim, &res, &err), -E2BIG);
	cr_assert(strstr(err.msg, "more than 5 entries"), "%s", err.msg);
	cr_assert_eq(dg_rec_retention("/nonexistent", &o, &res, &err), -ENOENT);
}

/* ROOT/ID/uploaded as dg_rec_upload writes it (a regular file), or, with
 * as_dir, a directory of that name, which confirms nothing. */
static uint64_t mark_uploaded(const char *id, bool as_dir)
{
	char p[300];
	snprintf(p, sizeof(p), "%s/%s/%s", root, id, DG_REC_UPLOADED_FILE);
	if (as_dir) {
		cr_assert_eq(mkdir(p, 0700), 0, "%s", p);
		return 0;
	}
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f, "%s", p);
	fputs("1700000000 recordings/\n", f);
	fclose(f);
	/* Its mtime must not make the recording look new: retention ages by
	 * events.jsonl. */
	return strlen("1700000000 recordings/\n");
}

Test(retention, with_an_object_store_a_recording_not_yet_uploaded_is_never_deleted)
{
	uint64_t up = make("up-old", 5000, true, NULL) + mark_uploaded("up-old", false);
	uint64_t s1 = make("un-old", 4000, true, NULL);
	uint64_t s2 = make("fake-old", 3000, true, NULL) + mark_uploaded("fake-old", true);
	uint64_t s3 = make("un-new", 10, true, NULL);
	keep_unuploaded = true;
	retain(100, 1);
	cr_assert_eq(res.recordings, 4);
	cr_assert_not(exists("up-old"), "an uploaded recording ages out as before");
	cr_assert(exists("un-old"), "deleted by age before its upload was confirmed");
	cr_assert(exists("fake-old"), "a directory named uploaded confirms nothing");
	cr_assert(exists("un-new"), "deleted by size before its upload was confirmed");
	cr_assert_eq(res.deleted, 1);
	cr_assert_eq(res.held, 3, "each held recording counted once: %u", res.held);
	cr_assert_eq(res.bytes_held, s1 + s2 + s3);
	cr_assert_eq(res.bytes_before, up + s1 + s2 + s3);
	cr_assert_eq(res.bytes_after, s1 + s2 + s3);
	cr_assert(res.over_budget, "held recordings keep the directory over its bound: say so");
	/* Within the bound, nothing is held. */
	retain(0, s1 + s2 + s3);
	cr_assert_eq(res.held, 0);
	cr_assert_not(res.over_budget);
	/* Once its upload is confirmed, it goes like any other. */
	mark_uploaded("un-old", false);
	retain(100, 0);
	cr_assert_not(exists("un-old"));
	cr_assert_eq(res.held, 1, "fake-old, still unconfirmed");
	/* Without an object store (keep_unuploaded off) nothing waits for one. */
	keep_unuploaded = false;
	retain(100, 1);
	cr_assert_not(exists("fake-old"));
	cr_assert_not(exists("un-new"));
	cr_assert_eq(res.held, 0);
}
