/* recordings: retention in the bucket (recordings.h, dg_rec_s3_retention).
 *
 * Contract: only recordings/<id>/ keys of valid session ids are looked at
 * (the listing's keys are validated by dg_rec_s3_list); a recording is
 * aged by its events.jsonl, which is deleted first so that a half-deleted
 * recording is never listed as one; every other key under it follows. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recordings/recordings-priv.h"

#define PREFIX_LEN (sizeof(DG_REC_S3_PREFIX) - 1)

struct ids {
	char (*id)[DG_REC_ID_MAX + 1];
	size_t n, cap;
};

/* The id of a key recordings/<id>/..., or false. */
static bool key_id(const char *key, char id[DG_REC_ID_MAX + 1])
{
	if (strncmp(key, DG_REC_S3_PREFIX, PREFIX_LEN) != 0)
		return false;
	const char *p = key + PREFIX_LEN, *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : 0;
	if (n == 0 || n > DG_REC_ID_MAX)
		return false;
	memcpy(id, p, n);
	id[n] = '\0';
	return dg_rec_id_valid(id);
}

/* Keys come in order: an id's keys are together. */
static int on_key(void *arg, const char *key)
{
	struct ids *l = arg;
	char id[DG_REC_ID_MAX + 1];
	if (!key_id(key, id) || (l->n && strcmp(l->id[l->n - 1], id) == 0))
		return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		void *nl = realloc(l->id, cap * sizeof(*l->id));
		if (!nl)
			return -ENOMEM;
		l->id = nl;
		l->cap = cap;
	}
	memcpy(l->id[l->n++], id, sizeof(id));
	return 0;
}

struct keys {
	char **k;
	size_t n, cap;
};

static int on_any_key(void *arg, const char *key)
{
	struct keys *l = arg;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		char **nk = realloc(l->k, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		l->k = nk;
		l->cap = cap;
	}
	if (!(l->k[l->n] = strdup(key)))
		return -ENOMEM;
	l->n++;
	return 0;
}

/* Deletes recordings/ID/: events.jsonl, then every other key under it. */
static int delete_rec(const struct dg_rec_s3 *s, const char *id, struct dg_err *err)
{
	char prefix[PREFIX_LEN + DG_REC_ID_MAX + 2], key[sizeof(prefix) + sizeof(DG_REC_EVENTS_FILE)];
	snprintf(prefix, sizeof(prefix), "%s%s/", DG_REC_S3_PREFIX, id);
	snprintf(key, sizeof(key), "%s%s", prefix, DG_REC_EVENTS_FILE);
	int rc = dg_rec_s3_delete(s, key, err);
	struct keys l = {0};
	if (!rc)
		rc = dg_rec_s3_list(s, prefix, on_any_key, &l, err);
	if (rc == -ENOMEM)
		dg_err_set(err, rc, "retention in bucket %s: %s: out of memory", s->bucket, id);
	for (size_t i = 0; i < l.n; i++) {
		if (!rc)
			rc = dg_rec_s3_delete(s, l.k[i], err);
		free(l.k[i]);
	}
	free(l.k);
	return rc;
}

int dg_rec_s3_retention(const struct dg_rec_s3 *s, int64_t max_age_s, int64_t now_s,
			const struct dg_rec_pass *pass, unsigned *recordings, unsigned *deleted,
			unsigned *failed, struct dg_err *err)
{
	unsigned seen = 0, del = 0, bad = 0;
	if (max_age_s <= 0)
		return dg_err_set(err, -EINVAL, "retention in bucket %s: no age limit", s->bucket);
	if (!now_s)
		now_s = (int64_t)time(NULL);
	struct ids l = {0};
	int rc = dg_rec_s3_list(s, DG_REC_S3_PREFIX, on_key, &l, err);
	if (rc == -ENOMEM)
		dg_err_set(err, rc, "retention in bucket %s: out of memory", s->bucket);
	/* A listing that failed part way (past its key bound, a bad page):
	 * the recordings seen before are acted on; still an error. */
	if (rc == -ENOMEM) {
		free(l.id);
		return rc;
	}
	for (size_t i = 0; i < l.n; i++) {
		char key[PREFIX_LEN + DG_REC_ID_MAX + sizeof(DG_REC_EVENTS_FILE) + 2];
		snprintf(key, sizeof(key), "%s%s/%s", DG_REC_S3_PREFIX, l.id[i], DG_REC_EVENTS_FILE);
		bool exists = false;
		int64_t mtime = -1;
		struct dg_err e = {{0}};
		int r = dg_rec_s3_stat(s, key, &exists, NULL, &mtime, &e);
		if (!r && !exists)
			continue;
		seen++;
		if (!r && (mtime < 0 || now_s - mtime <= max_age_s))
			continue;
		char msg[DG_ERR_MAX + 64];
		if (!r && !(r = delete_rec(s, l.id[i], &e))) {
			del++;
			snprintf(msg, sizeof(msg), "deleted from bucket %s (older than %lld s)", s->bucket,
				 (long long)max_age_s);
		} else {
			bad++;
			snprintf(msg, sizeof(msg), "retention in bucket %s: %s", s->bucket, e.msg);
		}
		if (pass && pass->report)
			pass->report(l.id[i], r, msg, pass->arg);
	}
	free(l.id);
	if (recordings)
		*recordings = seen;
	if (deleted)
		*deleted = del;
	if (failed)
		*failed = bad;
	return rc;
}
