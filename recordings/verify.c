/* recordings: verifying a recording (`deskgate verify`).
 *
 * The chain (reader.c), then, in the same pass, every frame an event names:
 * the name must be 64 lowercase hex digits (so nothing like
 * "../../etc/passwd" ever becomes a path), the file a regular file (never
 * followed through a symlink) of at most frame_max bytes whose SHA-256 is
 * its name. Each distinct frame is hashed once. Then the seal: its key id
 * and its signature over the last hash. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

const char *dg_rec_status_name(enum dg_rec_status s)
{
	switch (s) {
	case DG_REC_SEALED:
		return "sealed";
	case DG_REC_SEALED_CRASH:
		return "sealed-after-crash";
	case DG_REC_UNCHECKED:
		return "unchecked";
	case DG_REC_UNSEALED:
		return "unsealed";
	case DG_REC_BAD:
		return "bad";
	}
	return "?";
}

/* The frames already checked: an open-addressing set of hashes. */
struct frame_set {
	uint8_t (*slot)[DG_REC_SHA_LEN];
	bool *used;
	size_t cap, n;
};

static void set_free(struct frame_set *fs)
{
	free(fs->slot);
	free(fs->used);
}

/* 1 when h is in the set, 0 when added, -ENOMEM. */
static int set_add(struct frame_set *fs, const uint8_t h[DG_REC_SHA_LEN], bool add)
{
	if (fs->cap) {
		size_t i;
		memcpy(&i, h, sizeof(i)); /* a SHA-256 is as good a hash as any */
		for (i &= fs->cap - 1; fs->used[i]; i = (i + 1) & (fs->cap - 1))
			if (memcmp(fs->slot[i], h, DG_REC_SHA_LEN) == 0)
				return 1;
		if (!add)
			return 0;
		if (2 * (fs->n + 1) <= fs->cap) {
			memcpy(fs->slot[i], h, DG_REC_SHA_LEN);
			fs->used[i] = true;
			fs->n++;
			return 0;
		}
	}
	if (!add)
		return 0;
	/* Grow to twice the size and re-insert. */
	struct frame_set g = { .cap = fs->cap ? 2 * fs->cap : 64 };
	g.slot = calloc(g.cap, sizeof(*g.slot));
	g.used = calloc(g.cap, sizeof(*g.used));
	if (!g.slot || !g.used) {
		set_free(&g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < fs->cap; i++)
		if (fs->used[i])
			set_add(&g, fs->slot[i], true);
	set_free(fs);
	*fs = g;
	return set_add(fs, h, true);
}

struct vctx {
	struct frame_set set;
	int framesfd;          /* -1 until a frame is needed; -2: frames/ unusable */
	char frames_err[DG_ERR_MAX];
	uint64_t orphan_last;  /* an "orphaned" event's last_seq */
	bool orphaned;
	struct dg_rec_verify_result *res;
};

static const char *const frame_fields[] = { "frame", "frame_before", "frame_after", NULL };

/* Checks one frame file: -EBADMSG with the reason in err. */
static int check_frame(struct dg_rec_scan *s, struct vctx *v, const char *field, const char *hex,
		       struct dg_err *err)
{
	char what[DG_REC_HEX_LEN + 32];
	snprintf(what, sizeof(what), "frames/%s.png", hex);
	if (v->framesfd == -1) {
		v->framesfd = openat(s->dirfd, DG_REC_FRAMES_DIR,
				     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (v->framesfd < 0) {
			snprintf(v->frames_err, sizeof(v->frames_err), "frames/: %s",
				 errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link?)"
								    : strerror(errno));
			v->framesfd = -2;
		}
	}
	if (v->framesfd == -2)
		return dg_err_set(err, -EBADMSG, "%s: %s", field, v->frames_err);
	char name[DG_REC_HEX_LEN + 8];
	snprintf(name, sizeof(name), "%s.png", hex);
	int fd;
	int64_t size;
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_open_reg(v->framesfd, name, O_RDONLY, what, &fd, &size, &e2);
	if (rc == -ENOENT)
		return dg_err_set(err, -EBADMSG, "%s: %s is missing", field, what);
	if (rc)
		return dg_err_set(err, rc == -ENOMEM ? rc : -EBADMSG, "%s: %s", field, e2.msg);
	if (size > (int64_t)s->lim->frame_max) {
		close(fd);
		return dg_err_set(err, -EBADMSG, "%s: %s is %lld bytes, more than the limit of %zu",
				  field, what, (long long)size, s->lim->frame_max);
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	char *buf = malloc(DG_REC_READ_CHUNK);
	int ok = md && buf && EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	int64_t total = 0;
	int ioerr = 0;
	while (ok) {
		ssize_t n = read(fd, buf, DG_REC_READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ioerr = errno;
			break;
		}
		if (n == 0)
			break;
		total += n;
		if (total > (int64_t)s->lim->frame_max) { /* it grew while read */
			ioerr = EFBIG;
			break;
		}
		ok = EVP_DigestUpdate(md, buf, (size_t)n);
	}
	uint8_t h[DG_REC_SHA_LEN];
	unsigned hl = 0;
	ok = ok && !ioerr && EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	free(buf);
	close(fd);
	if (ioerr)
		return dg_err_set(err, -EBADMSG, "%s: %s: %s", field, what, strerror(ioerr));
	if (!ok)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", what);
	char got[DG_REC_HEX_LEN + 1];
	dg_hex_encode(h, sizeof(h), got);
	if (strcmp(got, hex) != 0)
		return dg_err_set(err, -EBADMSG, "%s: %s does not hash to its name (the frame was "
				  "changed or swapped)", field, what);
	return 0;
}

static int on_event(struct dg_rec_scan *s, const struct dg_rec_ev *ev, struct dg_err *err)
{
	struct vctx *v = s->arg;
	v->res->events++;
	if (strcmp(ev->type, "lifecycle") == 0) {
		const char *st = json_string_value(json_object_get(ev->obj, "state"));
		json_t *ls = json_object_get(ev->obj, "last_seq");
		if (st && strcmp(st, "orphaned") == 0 && json_is_integer(ls)) {
			v->orphaned = true;
			v->orphan_last = (uint64_t)json_integer_value(ls);
		}
	}
	for (int i = 0; frame_fields[i]; i++) {
		json_t *f = json_object_get(ev->obj, frame_fields[i]);
		if (!f || json_is_null(f))
			continue;
		const char *hex = json_string_value(f);
		uint8_t h[DG_REC_SHA_LEN];
		if (!hex || strlen(hex) != json_string_length(f) || dg_rec_unhex(hex, h) != 0) {
			char shown[DG_SHOW_VALUE_BUF];
			dg_show_value(f, shown, sizeof(shown));
			return dg_err_set(err, -EBADMSG, "seq %llu: %s %s is not a frame hash",
					  (unsigned long long)ev->seq, frame_fields[i], shown);
		}
		if (set_add(&v->set, h, false) == 1)
			continue;
		if (v->set.n >= s->lim->frames_max)
			return dg_err_set(err, -EBADMSG, "seq %llu: more than %llu distinct frames",
					  (unsigned long long)ev->seq,
					  (unsigned long long)s->lim->frames_max);
		struct dg_err e2 = { { 0 } };
		int rc = check_frame(s, v, frame_fields[i], hex, &e2);
		if (rc)
			return dg_err_set(err, rc, "seq %llu: %s", (unsigned long long)ev->seq, e2.msg);
		if (set_add(&v->set, h, true) < 0)
			return dg_err_set(err, -ENOMEM, "out of memory");
		v->res->frames++;
	}
	return 0;
}

int dg_rec_verify_lim(const char *dir, const struct dg_rec_key *key, const struct dg_rec_limits *lim,
		      struct dg_rec_verify_result *res, struct dg_err *err)
{
	memset(res, 0, sizeof(*res));
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "%s: %s", dir, strerror(errno));
	struct vctx v = { .framesfd = -1, .res = res };
	struct dg_rec_scan s = { .lim = lim, .dirfd = dirfd, .fd = -1, .on_event = on_event, .arg = &v };
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_scan_session(&s, &e2);
	if (rc == 0) {
		snprintf(res->id, sizeof(res->id), "%s",
			 json_string_value(json_object_get(s.session, "id")));
		int64_t size;
		rc = dg_rec_open_reg(dirfd, DG_REC_EVENTS_FILE, O_RDONLY, DG_REC_EVENTS_FILE, &s.fd,
				     &size, &e2);
		if (rc == -ENOENT) {
			/* A crash inside dg_rec_open: no event yet. */
			rc = 0;
		} else if (rc == 0) {
			rc = dg_rec_scan_events(&s, &e2);
			close(s.fd);
		} else if (rc != -ENOMEM) {
			s.bad_seq = 0;
			rc = -EBADMSG;
		}
	}
	res->last_seq = s.last_seq;
	res->torn_bytes = s.torn_bytes;
	snprintf(res->key_id, sizeof(res->key_id), "%s", s.sealed ? s.key_id : "");
	if (v.framesfd >= 0)
		close(v.framesfd);
	set_free(&v.set);
	dg_rec_scan_free(&s);
	close(dirfd);
	if (rc && rc != -EBADMSG)
		return dg_err_set(err, rc, "%s: %s", dir, e2.msg);
	char torn[96] = "";
	if (res->torn_bytes)
		snprintf(torn, sizeof(torn), "; a torn last line of %llu bytes was ignored",
			 (unsigned long long)res->torn_bytes);
	if (rc == -EBADMSG) {
		res->status = DG_REC_BAD;
		res->bad_seq = s.bad_seq;
		if (s.bad_seq)
			snprintf(res->msg, sizeof(res->msg), "%.400s; intact up to seq %llu", e2.msg,
				 (unsigned long long)res->last_seq);
		else
			snprintf(res->msg, sizeof(res->msg), "%s", e2.msg);
		return 0;
	}
	char counts[128];
	snprintf(counts, sizeof(counts), "%llu events, %llu frames", (unsigned long long)res->events,
		 (unsigned long long)res->frames);
	if (!s.sealed) {
		res->status = DG_REC_UNSEALED;
		snprintf(res->msg, sizeof(res->msg), "chain and frames intact up to seq %llu (%s)%s; "
			 "not sealed", (unsigned long long)res->last_seq, counts, torn);
		return 0;
	}
	if (!key) {
		res->status = DG_REC_UNCHECKED;
		snprintf(res->msg, sizeof(res->msg), "chain and frames intact (%s), sealed by key %.16s..., "
			 "but the signature was not checked: no key given", counts, res->key_id);
		return 0;
	}
	char kid[DG_REC_HEX_LEN + 1];
	dg_rec_key_id(key, kid);
	if (strcmp(kid, res->key_id) != 0) {
		res->status = DG_REC_BAD;
		res->bad_seq = res->last_seq;
		snprintf(res->msg, sizeof(res->msg), "seq %llu: sealed by key %.16s..., not by the key "
			 "given (%.16s...)", (unsigned long long)res->last_seq, res->key_id, kid);
		res->last_seq--; /* the seal did not verify */
		return 0;
	}
	rc = dg_rec_key_check(key, s.last_hash, s.sig);
	if (rc < 0)
		return dg_err_set(err, rc, "%s: checking the signature: out of memory", dir);
	if (rc == 0) {
		res->status = DG_REC_BAD;
		res->bad_seq = res->last_seq;
		snprintf(res->msg, sizeof(res->msg), "seq %llu: the seal's signature does not verify "
			 "(the recording was rewritten, or the seal forged)",
			 (unsigned long long)res->last_seq);
		res->last_seq--;
		return 0;
	}
	if (s.complete) {
		res->status = DG_REC_SEALED;
		snprintf(res->msg, sizeof(res->msg), "verified: %s, sealed by key %.16s...", counts,
			 res->key_id);
	} else {
		res->status = DG_REC_SEALED_CRASH;
		snprintf(res->msg, sizeof(res->msg), "sealed after a crash: events up to seq %llu "
			 "intact, the session's end was not recorded (%s, sealed by key %.16s...)",
			 (unsigned long long)(v.orphaned ? v.orphan_last : res->last_seq), counts,
			 res->key_id);
	}
	return 0;
}

int dg_rec_verify(const char *dir, const struct dg_rec_key *key, struct dg_rec_verify_result *res,
		  struct dg_err *err)
{
	return dg_rec_verify_lim(dir, key, &dg_rec_limits_default, res, err);
}
