/* recordings: the writer (one per session, in the gateway's event loop).
 *
 * Contract: each event is one complete line written by one write() with
 * O_APPEND, or nothing (a short write is rolled back with ftruncate), so a
 * process killed at any point leaves a file that ends with a complete event
 * or a torn line the readers ignore. The cost of an event is one JSON dump
 * into a reused buffer, one SHA-256 and one write() (plus the sync the
 * options ask for); nothing is read back. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "recordings/recordings-priv.h"

struct dg_rec {
	char *dir;                     /* ROOT/ID, for messages */
	int dirfd, framesfd, fd;       /* framesfd -1: no frames (orphan sealing) */
	uint64_t seq;                  /* the last event written */
	uint8_t hash[DG_REC_SHA_LEN];  /* its hash (seq 0: session.json's) */
	int64_t size;                  /* bytes of events.jsonl */
	uint64_t frames;               /* frames stored by this writer */
	struct dg_rec_opts o;
	struct dg_rec_limits lim;
	int64_t last_sync_ms;
	bool dirty;                    /* written since the last sync */
	bool sealed, broken;
	uint8_t salt[DG_REC_SALT_LEN];
	char *buf;                     /* the line being built, reused */
	size_t cap;
};

/* Fields only the writer sets. */
static const char *const reserved[] = { "seq", "wall", "mono_ms", "prev", "hash", "sig", NULL };
/* Fields that name frames. */
static const char *const frame_fields[] = { "frame", "frame_before", "frame_after", NULL };

uint64_t dg_rec_seq(const struct dg_rec *r)
{
	return r->seq;
}

const char *dg_rec_dir(const struct dg_rec *r)
{
	return r->dir;
}

static bool type_valid(const char *t)
{
	size_t n = 0;
	for (; t[n]; n++)
		if (n >= DG_REC_TYPE_MAX || !((t[n] >= 'a' && t[n] <= 'z') || t[n] == '_'))
			return false;
	return n > 0;
}

/* ---- opening ------------------------------------------------------------- */

static void free_rec(struct dg_rec *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd); /* releases the flock */
	if (r->framesfd >= 0)
		close(r->framesfd);
	if (r->dirfd >= 0)
		close(r->dirfd);
	free(r->buf);
	free(r->dir);
	free(r);
}

static struct dg_rec *new_rec(const char *dir)
{
	struct dg_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->dirfd = r->framesfd = r->fd = -1;
	r->dir = strdup(dir);
	if (!r->dir) {
		free(r);
		return NULL;
	}
	r->lim = dg_rec_limits_default;
	r->last_sync_ms = dg_now_ms();
	return r;
}

static int check_meta(const struct dg_rec_meta *m, const struct dg_rec_opts *o, struct dg_err *err)
{
	if (!m || !o)
		return dg_err_set(err, -EINVAL, "recording: no metadata or options");
	if (!dg_rec_id_valid(m->id))
		return dg_err_set(err, -EINVAL,
				  "recording: session id must be 1..%d bytes of [a-z0-9-]", DG_REC_ID_MAX);
	if (!m->profile || !m->profile[0] || strlen(m->profile) > DG_REC_NAME_MAX)
		return dg_err_set(err, -EINVAL, "recording %s: profile must be 1..%d bytes", m->id,
				  DG_REC_NAME_MAX);
	if (m->token_name && strlen(m->token_name) > DG_REC_NAME_MAX)
		return dg_err_set(err, -EINVAL, "recording %s: token name longer than %d bytes", m->id,
				  DG_REC_NAME_MAX);
	if (m->width < 1 || m->width > DG_ACTION_SCREEN_MAX || m->height < 1 ||
	    m->height > DG_ACTION_SCREEN_MAX)
		return dg_err_set(err, -EINVAL, "recording %s: screen %dx%d outside 1..%d", m->id,
				  m->width, m->height, DG_ACTION_SCREEN_MAX);
	if (!m->policy_text || m->policy_len > DG_POLICY_FILE_MAX)
		return dg_err_set(err, -EINVAL, "recording %s: policy text missing or over %d bytes",
				  m->id, DG_POLICY_FILE_MAX);
	if (o->fsync != DG_REC_FSYNC_EVERY && o->fsync != DG_REC_FSYNC_INTERVAL &&
	    o->fsync != DG_REC_FSYNC_NONE)
		return dg_err_set(err, -EINVAL, "recording %s: unknown fsync mode %d", m->id, (int)o->fsync);
	if (o->fsync == DG_REC_FSYNC_INTERVAL &&
	    (o->fsync_interval_ms < DG_REC_FSYNC_INTERVAL_MIN_MS ||
	     o->fsync_interval_ms > DG_REC_FSYNC_INTERVAL_MAX_MS))
		return dg_err_set(err, -EINVAL, "recording %s: fsync interval %u ms outside %d..%d", m->id,
				  o->fsync_interval_ms, DG_REC_FSYNC_INTERVAL_MIN_MS,
				  DG_REC_FSYNC_INTERVAL_MAX_MS);
	return 0;
}

/* session.json's text (see recordings.h), malloc'd. */
static char *session_text(const struct dg_rec_meta *m, const struct dg_rec *r, size_t *len,
			  struct dg_err *err)
{
	uint8_t ph[DG_REC_SHA_LEN];
	char phex[DG_REC_HEX_LEN + 1], start[DG_REC_WALL_BUF];
	int64_t start_ms = m->start_ms ? m->start_ms : dg_wall_ms();
	if (dg_rec_sha256(m->policy_text, m->policy_len, ph) != 0) {
		dg_err_set(err, -ENOMEM, "recording %s: out of memory", m->id);
		return NULL;
	}
	dg_hex_encode(ph, sizeof(ph), phex);
	dg_rec_wall_str(start_ms, start);
	json_t *policy = json_stringn(m->policy_text, m->policy_len);
	json_t *prof = json_string(m->profile);
	json_t *tok = m->token_name ? json_string(m->token_name) : json_null();
	if (!policy || !prof || !tok) {
		json_decref(policy);
		json_decref(prof);
		json_decref(tok);
		dg_err_set(err, -EINVAL, "recording %s: the policy text, profile or token name is "
				 "not UTF-8", m->id);
		return NULL;
	}
	json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:o, s:i, s:i, s:o, s:s, s:o, s:b}", "format",
			      DG_REC_FORMAT, "id", m->id, "start", start, "start_ms",
			      (json_int_t)start_ms, "profile", prof, "width", m->width, "height",
			      m->height, "token_name", tok, "policy_sha256", phex, "policy", policy,
			      "redact_text", r->o.redact_text);
	if (j && r->o.redact_text) {
		char salt[2 * DG_REC_SALT_LEN + 1];
		dg_hex_encode(r->salt, sizeof(r->salt), salt);
		json_object_set_new(j, "redaction_salt", json_string(salt));
	}
	char *text = j ? json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!text) {
		dg_err_set(err, -ENOMEM, "recording %s: out of memory", m->id);
		return NULL;
	}
	size_t n = strlen(text);
	char *t = realloc(text, n + 2);
	if (!t) {
		free(text);
		dg_err_set(err, -ENOMEM, "recording %s: out of memory", m->id);
		return NULL;
	}
	t[n] = '\n';
	t[n + 1] = '\0';
	*len = n + 1;
	return t;
}

int dg_rec_open_lim(const char *root, const struct dg_rec_meta *m, const struct dg_rec_opts *o,
		    const struct dg_rec_limits *lim, struct dg_rec **out, struct dg_err *err)
{
	int rc = check_meta(m, o, err);
	if (rc)
		return rc;
	char dir[4096];
	if (snprintf(dir, sizeof(dir), "%s/%s", root, m->id) >= (int)sizeof(dir))
		return dg_err_set(err, -ENAMETOOLONG, "recording %s/%s: path too long", root, m->id);
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	if (mkdirat(rootfd, m->id, 0750) != 0) {
		rc = dg_err_set(err, -errno, "recording %s: %s", dir,
				errno == EEXIST ? "already exists (session ids are never reused)"
						: strerror(errno));
		close(rootfd);
		return rc;
	}
	struct dg_rec *r = new_rec(dir);
	char *text = NULL;
	size_t len = 0;
	if (!r) {
		rc = dg_err_set(err, -ENOMEM, "recording %s: out of memory", dir);
		goto fail;
	}
	r->o = *o;
	r->lim = *lim;
	if (o->redact_text && RAND_bytes(r->salt, sizeof(r->salt)) != 1) {
		rc = dg_err_set(err, -EIO, "recording %s: no random bytes for the redaction salt", dir);
		goto fail;
	}
	r->dirfd = openat(rootfd, m->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (r->dirfd < 0 || mkdirat(r->dirfd, DG_REC_FRAMES_DIR, 0750) != 0 ||
	    (r->framesfd = openat(r->dirfd, DG_REC_FRAMES_DIR,
				  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = dg_err_set(err, -errno, "recording %s: %s", dir, strerror(errno));
		goto fail;
	}
	text = session_text(m, r, &len, err);
	if (!text) {
		rc = -EINVAL;
		goto fail;
	}
	if (len > r->lim.session_max) {
		rc = dg_err_set(err, -EFBIG, "recording %s: session.json would be %zu bytes, more than "
				"the limit of %zu", dir, len, r->lim.session_max);
		goto fail;
	}
	bool sync = o->fsync != DG_REC_FSYNC_NONE;
	rc = dg_rec_write_at(r->dirfd, DG_REC_SESSION_FILE, text, len, 0640, sync, err);
	if (rc)
		goto fail;
	if (dg_rec_sha256(text, len, r->hash) != 0) {
		rc = dg_err_set(err, -ENOMEM, "recording %s: out of memory", dir);
		goto fail;
	}
	r->fd = openat(r->dirfd, DG_REC_EVENTS_FILE,
		       O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (r->fd < 0 || flock(r->fd, LOCK_EX | LOCK_NB) != 0) {
		rc = dg_err_set(err, -errno, "recording %s: events.jsonl: %s", dir, strerror(errno));
		goto fail;
	}
	if (sync && fsync(r->dirfd) != 0) {
		rc = dg_err_set(err, -errno, "recording %s: %s", dir, strerror(errno));
		goto fail;
	}
	free(text);
	close(rootfd);
	*out = r;
	return 0;
fail:
	/* Leave nothing half-made behind: a directory without session.json
	 * would look like a crashed recording. */
	if (r && r->dirfd >= 0) {
		unlinkat(r->dirfd, DG_REC_EVENTS_FILE, 0);
		unlinkat(r->dirfd, DG_REC_SESSION_FILE, 0);
		unlinkat(r->dirfd, DG_REC_FRAMES_DIR, AT_REMOVEDIR);
	}
	free_rec(r);
	unlinkat(rootfd, m->id, AT_REMOVEDIR);
	close(rootfd);
	free(text);
	return rc;
}

int dg_rec_open(const char *root, const struct dg_rec_meta *meta, const struct dg_rec_opts *o,
		struct dg_rec **r, struct dg_err *err)
{
	return dg_rec_open_lim(root, meta, o, &dg_rec_limits_default, r, err);
}

int dg_rec_resume(int dirfd, int fd, const char *dir, uint64_t seq, const uint8_t hash[DG_REC_SHA_LEN],
		  int64_t size, struct dg_rec **out, struct dg_err *err)
{
	struct dg_rec *r = new_rec(dir);
	if (!r)
		return dg_err_set(err, -ENOMEM, "recording %s: out of memory", dir);
	r->dirfd = dirfd;
	r->fd = fd;
	r->seq = seq;
	memcpy(r->hash, hash, DG_REC_SHA_LEN);
	r->size = size;
	r->o.fsync = DG_REC_FSYNC_EVERY;
	*out = r;
	return 0;
}

void dg_rec_close(struct dg_rec *r)
{
	free_rec(r);
}

/* ---- frames ---------------------------------------------------------------- */

int dg_rec_frame(struct dg_rec *r, const uint8_t *png, size_t len, char hash_hex[DG_REC_HEX_LEN + 1],
		 struct dg_err *err)
{
	static const uint8_t sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	if (r->framesfd < 0 || r->sealed)
		return dg_err_set(err, -EPIPE, "recording %s: closed to frames", r->dir);
	if (!png || len < sizeof(sig) || memcmp(png, sig, sizeof(sig)) != 0)
		return dg_err_set(err, -EINVAL, "recording %s: a frame must be a PNG", r->dir);
	if (len > r->lim.frame_max)
		return dg_err_set(err, -EFBIG, "recording %s: a frame of %zu bytes is more than the "
				  "limit of %zu", r->dir, len, r->lim.frame_max);
	uint8_t h[DG_REC_SHA_LEN];
	if (dg_rec_sha256(png, len, h) != 0)
		return dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
	dg_hex_encode(h, sizeof(h), hash_hex);
	char name[DG_REC_HEX_LEN + 8];
	snprintf(name, sizeof(name), "%s.png", hash_hex);
	struct stat st;
	if (fstatat(r->framesfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		return 0; /* the same screen again: content-addressed, stored once */
	if (r->frames >= r->lim.frames_max)
		return dg_err_set(err, -EFBIG, "recording %s: more than %llu distinct frames", r->dir,
				  (unsigned long long)r->lim.frames_max);
	int rc = dg_rec_write_at(r->framesfd, name, png, len, 0640, r->o.fsync == DG_REC_FSYNC_EVERY,
				 err);
	if (rc)
		return rc;
	r->frames++;
	return 0;
}

/* ---- events ------------------------------------------------------------------ */

/* Which field of object o holds text entered into the desktop, to redact:
 * "text" of a type action (canonical, or a computer tool input whose
 * "action" is "type"), "value" of a form_input when it is a string; or,
 * for a toolset member's block ({"name": "type" | "form_input", "input":
 * {...}}), its input's field (*in set to the input). NULL when none. */
static const char *typed_field(const json_t *o, json_t **in)
{
	const char *t = json_string_value(json_object_get(o, "type"));
	const char *a = json_string_value(json_object_get(o, "action"));
	const char *n = json_string_value(json_object_get(o, "name"));
	json_t *input = json_object_get(o, "input");
	*in = (json_t *)o;
	if (((t && strcmp(t, "type") == 0) || (a && strcmp(a, "type") == 0)) &&
	    json_is_string(json_object_get(o, "text")))
		return "text";
	if (t && strcmp(t, "form_input") == 0 && json_is_string(json_object_get(o, "value")))
		return "value";
	if (n && json_is_object(input) && json_object_get(o, "toolset_name")) {
		*in = input;
		if (strcmp(n, "type") == 0 && json_is_string(json_object_get(input, "text")))
			return "text";
		if (strcmp(n, "form_input") == 0 && json_is_string(json_object_get(input, "value")))
			return "value";
	}
	return NULL;
}

static bool has_typing(const json_t *v)
{
	if (json_is_object(v)) {
		json_t *in;
		if (typed_field(v, &in))
			return true;
		const char *k;
		json_t *x;
		json_object_foreach((json_t *)v, k, x)
			if (has_typing(x))
				return true;
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x)
			if (has_typing(x))
				return true;
	}
	return false;
}

/* The text of in[key] becomes {"redacted": true, "length", "bytes",
 * "sha256"}: its length (replay decides text.max_length on it) and a
 * salted hash (a known text can be checked, none can be read). */
static int redact_string(const struct dg_rec *r, json_t *in, const char *key)
{
	json_t *t = json_object_get(in, key);
	const char *s = json_string_value(t);
	size_t n = json_string_length(t);
	uint8_t h[DG_REC_SHA_LEN];
	char hex[DG_REC_HEX_LEN + 1];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned hl = 0;
	int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
		 EVP_DigestUpdate(md, r->salt, sizeof(r->salt)) && EVP_DigestUpdate(md, s, n) &&
		 EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	if (!ok)
		return -ENOMEM;
	dg_hex_encode(h, sizeof(h), hex);
	json_t *stub = json_pack("{s:b, s:I, s:I, s:s}", "redacted", 1, "length",
				 (json_int_t)dg_rec_utf8_len(s, n), "bytes", (json_int_t)n, "sha256", hex);
	if (!stub || json_object_set_new(in, key, stub) != 0)
		return -ENOMEM;
	return 0;
}

static int redact_in_place(const struct dg_rec *r, json_t *v)
{
	if (json_is_object(v)) {
		json_t *in;
		const char *key = typed_field(v, &in);
		if (key) {
			int rc = redact_string(r, in, key);
			if (rc)
				return rc;
		}
		const char *k;
		json_t *x;
		json_object_foreach(v, k, x) {
			int rc = redact_in_place(r, x);
			if (rc)
				return rc;
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) {
			int rc = redact_in_place(r, x);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* A form_input's result says the value it set ("... is set to \"...\""):
 * with its value redacted, that text goes too (the element and the
 * outcome stay in the rest of the event). */
static int redact_echo(json_t *e)
{
	const json_t *a = json_object_get(e, "action");
	json_t *res = json_object_get(e, "result");
	const char *t = json_string_value(json_object_get(a, "type"));
	if (!t || strcmp(t, "form_input") != 0 ||
	    !json_is_string(json_object_get(res, "text")))
		return 0;
	json_t *c = json_copy(res);
	if (!c || json_object_set_new(c, "text", json_string("[redacted: the value set]")) != 0 ||
	    json_object_set_new(e, "result", c) != 0)
		return -ENOMEM;
	return 0;
}

/* Replaces e[key] (when it holds typed text) by a redacted deep copy. */
static int redact_field(const struct dg_rec *r, json_t *e, const char *key)
{
	json_t *v = json_object_get(e, key);
	if (!v || !has_typing(v))
		return 0;
	json_t *c = json_deep_copy(v);
	if (!c || redact_in_place(r, c) != 0 || json_object_set_new(e, key, c) != 0)
		return -ENOMEM; /* set_new drops c on failure */
	return 0;
}

/* Dumps e canonically into r->buf, leaving room for the longest tail and
 * '\n'. Returns the dump's length or 0 when out of memory. */
static size_t dump(struct dg_rec *r, const json_t *e)
{
	const size_t extra = DG_REC_SEAL_TAIL_LEN + 1;
	for (;;) {
		size_t room = r->cap > extra ? r->cap - extra : 0;
		size_t n = json_dumpb(e, r->buf, room, DG_REC_DUMP_FLAGS);
		if (n == 0) /* an object dumps at least "{}" */
			return 0;
		if (n <= room)
			return n;
		size_t cap = r->cap ? r->cap : 4096;
		while (cap < n + extra)
			cap *= 2;
		char *b = realloc(r->buf, cap);
		if (!b)
			return 0;
		r->buf = b;
		r->cap = cap;
	}
}

/* Replaces the largest of the caller's fields by an "omitted" stub (see
 * dg_rec_event). Returns 0, -E2BIG when nothing is left to omit, -ENOMEM. */
static int omit_largest(json_t *e)
{
	const char *key, *best = NULL;
	json_t *v;
	size_t best_n = 0;
	json_object_foreach(e, key, v) {
		bool skip = strcmp(key, "type") == 0;
		for (int i = 0; reserved[i] && !skip; i++)
			skip = strcmp(key, reserved[i]) == 0;
		if (skip || json_object_get(v, "omitted"))
			continue;
		size_t n = json_dumpb(v, NULL, 0, DG_REC_DUMP_FLAGS | JSON_ENCODE_ANY);
		if (n > best_n) {
			best_n = n;
			best = key;
		}
	}
	if (!best || best_n < 128) /* a stub is about 110 bytes: nothing gained */
		return -E2BIG;
	char *text = malloc(best_n + 1);
	if (!text)
		return -ENOMEM;
	json_dumpb(json_object_get(e, best), text, best_n, DG_REC_DUMP_FLAGS | JSON_ENCODE_ANY);
	uint8_t h[DG_REC_SHA_LEN];
	char hex[DG_REC_HEX_LEN + 1];
	int rc = dg_rec_sha256(text, best_n, h);
	free(text);
	if (rc)
		return rc;
	dg_hex_encode(h, sizeof(h), hex);
	json_t *stub = json_pack("{s:b, s:I, s:s}", "omitted", 1, "bytes", (json_int_t)best_n,
				 "sha256", hex);
	char *k = strdup(best); /* best points into the key being replaced */
	if (!stub || !k) {
		json_decref(stub);
		free(k);
		return -ENOMEM;
	}
	rc = json_object_set_new(e, k, stub) == 0 ? 0 : -ENOMEM;
	free(k);
	return rc;
}

/* Syncs the events file's data. */
static int sync_now(struct dg_rec *r, struct dg_err *err)
{
	if (fdatasync(r->fd) != 0)
		return dg_err_set(err, -errno, "recording %s: fdatasync: %s", r->dir, strerror(errno));
	r->dirty = false;
	r->last_sync_ms = dg_now_ms();
	return 0;
}

/* Writes e (owned, complete but for seq/wall/mono_ms/prev/hash) as the next
 * event; with k, as the seal, signed. */
static int append(struct dg_rec *r, json_t *e, const struct dg_rec_key *k, struct dg_err *err)
{
	int rc;
	bool seal = k != NULL;
	uint64_t seq = r->seq + 1;
	uint64_t reserve_ev = seal ? 0 : (r->framesfd < 0 ? 1 : DG_REC_RESERVE_EVENTS);
	if (seq + reserve_ev > r->lim.events_max) {
		rc = dg_err_set(err, -EFBIG, "recording %s: full (%llu events): seal it", r->dir,
				(unsigned long long)r->lim.events_max);
		goto out;
	}
	char prev[DG_REC_HEX_LEN + 1], wall[DG_REC_WALL_BUF];
	dg_hex_encode(r->hash, DG_REC_SHA_LEN, prev);
	dg_rec_wall_str(dg_wall_ms(), wall);
	if (json_object_set_new(e, "seq", json_integer((json_int_t)seq)) ||
	    json_object_set_new(e, "wall", json_string(wall)) ||
	    json_object_set_new(e, "mono_ms", json_integer((json_int_t)dg_now_ms())) ||
	    json_object_set_new(e, "prev", json_string(prev))) {
		rc = dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
		goto out;
	}
	size_t tail = seal ? DG_REC_SEAL_TAIL_LEN : DG_REC_TAIL_LEN;
	size_t n;
	for (;;) {
		n = dump(r, e);
		if (!n) {
			rc = dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
			goto out;
		}
		if (n - 1 + tail <= r->lim.line_max)
			break;
		rc = omit_largest(e);
		if (rc) {
			rc = dg_err_set(err, rc, "recording %s: seq %llu: the event does not fit in %zu "
					"bytes", r->dir, (unsigned long long)seq, r->lim.line_max);
			goto out;
		}
	}
	/* The canonical bytes are buf[0..n); the line replaces its '}' by the
	 * tail. */
	uint8_t h[DG_REC_SHA_LEN];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned hl = 0;
	int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
		 EVP_DigestUpdate(md, r->hash, DG_REC_SHA_LEN) && EVP_DigestUpdate(md, r->buf, n) &&
		 EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	if (!ok) {
		rc = dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
		goto out;
	}
	char hex[DG_REC_HEX_LEN + 1];
	dg_hex_encode(h, sizeof(h), hex);
	size_t len = n - 1;
	len += (size_t)sprintf(r->buf + len, ",\"hash\":\"%s\"", hex);
	if (seal) {
		uint8_t sig[DG_REC_SIG_LEN];
		unsigned char b64[DG_REC_SIG_B64_LEN + 1];
		rc = dg_rec_key_sign(k, h, sig, err);
		if (rc)
			goto out;
		EVP_EncodeBlock(b64, sig, DG_REC_SIG_LEN);
		len += (size_t)sprintf(r->buf + len, ",\"sig\":\"%s\"", (char *)b64);
	}
	r->buf[len++] = '}';
	r->buf[len++] = '\n';
	int64_t reserve_b = seal ? 0 : r->framesfd < 0 ? DG_REC_RESERVE_BYTES / 2 : DG_REC_RESERVE_BYTES;
	if (r->size + (int64_t)len + reserve_b > r->lim.events_file_max) {
		rc = dg_err_set(err, -EFBIG, "recording %s: full (%lld bytes): seal it", r->dir,
				(long long)r->lim.events_file_max);
		goto out;
	}
	ssize_t w;
	do
		w = write(r->fd, r->buf, len);
	while (w < 0 && errno == EINTR); /* nothing was written: try again */
	if (w != (ssize_t)len) {
		int e = w < 0 ? errno : ENOSPC;
		/* A partial line would glue itself to the next event: cut it. */
		if (w > 0 && ftruncate(r->fd, r->size) != 0)
			r->broken = true;
		rc = dg_err_set(err, -e, "recording %s: seq %llu: writing: %s%s", r->dir,
				(unsigned long long)seq, strerror(e),
				r->broken ? " (and the partial line could not be cut: recording stopped)"
					  : "");
		goto out;
	}
	r->seq = seq;
	memcpy(r->hash, h, DG_REC_SHA_LEN);
	r->size += (int64_t)len;
	if (r->cap > DG_REC_BUF_KEEP) { /* a rare big event: do not hold its buffer */
		free(r->buf);
		r->buf = NULL;
		r->cap = 0;
	}
	r->dirty = true;
	rc = 0;
	if (seal || r->o.fsync == DG_REC_FSYNC_EVERY ||
	    (r->o.fsync == DG_REC_FSYNC_INTERVAL &&
	     dg_now_ms() - r->last_sync_ms >= (int64_t)r->o.fsync_interval_ms))
		rc = sync_now(r, err);
out:
	json_decref(e);
	return rc;
}

int dg_rec_event(struct dg_rec *r, const json_t *ev, struct dg_err *err)
{
	if (r->sealed || r->broken)
		return dg_err_set(err, -EPIPE, "recording %s: %s", r->dir,
				  r->sealed ? "already sealed" : "stopped after a failed write");
	if (!json_is_object(ev))
		return dg_err_set(err, -EINVAL, "recording %s: an event must be an object", r->dir);
	const char *type = json_string_value(json_object_get(ev, "type"));
	if (!type || !type_valid(type) || strcmp(type, "seal") == 0)
		return dg_err_set(err, -EINVAL, "recording %s: event type must be [a-z_], 1..%d bytes, "
				  "not \"seal\"", r->dir, DG_REC_TYPE_MAX);
	for (int i = 0; reserved[i]; i++)
		if (json_object_get(ev, reserved[i]))
			return dg_err_set(err, -EINVAL, "recording %s: \"%s\" is set by the writer",
					  r->dir, reserved[i]);
	for (int i = 0; frame_fields[i]; i++) {
		json_t *f = json_object_get(ev, frame_fields[i]);
		if (!f || json_is_null(f))
			continue;
		const char *hex = json_string_value(f);
		char name[DG_REC_HEX_LEN + 8];
		struct stat st;
		if (!dg_rec_hash_valid(hex))
			return dg_err_set(err, -EINVAL, "recording %s: %s is not a frame hash", r->dir,
					  frame_fields[i]);
		snprintf(name, sizeof(name), "%s.png", hex);
		if (r->framesfd < 0 || fstatat(r->framesfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			return dg_err_set(err, -EINVAL, "recording %s: %s %s was not stored (store "
					  "frames before the events that name them)", r->dir,
					  frame_fields[i], hex);
	}
	json_t *e = json_copy((json_t *)ev); /* shallow: the caller's values are shared, not changed */
	if (!e)
		return dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
	/* An agent's action, or a CDP client's command that types (its
	 * "action" says what it amounts to). */
	if (r->o.redact_text && (strcmp(type, "action") == 0 || strcmp(type, "cdp") == 0) &&
	    (redact_field(r, e, "input") != 0 || redact_field(r, e, "action") != 0 ||
	     redact_echo(e) != 0)) {
		json_decref(e);
		return dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
	}
	return append(r, e, NULL, err);
}

int dg_rec_flush(struct dg_rec *r, struct dg_err *err)
{
	if (r->o.fsync != DG_REC_FSYNC_INTERVAL || !r->dirty || r->fd < 0)
		return 0;
	return sync_now(r, err);
}

int dg_rec_seal_as(struct dg_rec *r, const struct dg_rec_key *k, bool complete, struct dg_err *err)
{
	if (r->sealed || r->broken)
		return dg_err_set(err, -EPIPE, "recording %s: %s", r->dir,
				  r->sealed ? "already sealed" : "stopped after a failed write");
	if (!dg_rec_key_has_private(k))
		return dg_err_set(err, -EINVAL, "recording %s: sealing needs the private key", r->dir);
	char id[DG_REC_HEX_LEN + 1];
	dg_rec_key_id(k, id);
	json_t *e = json_pack("{s:s, s:b, s:s, s:s}", "type", "seal", "complete", complete, "alg",
			      "ed25519", "key_id", id);
	if (!e)
		return dg_err_set(err, -ENOMEM, "recording %s: out of memory", r->dir);
	int rc = append(r, e, k, err);
	if (rc == 0)
		r->sealed = true;
	return rc;
}

int dg_rec_seal(struct dg_rec *r, const struct dg_rec_key *k, struct dg_err *err)
{
	return dg_rec_seal_as(r, k, true, err);
}

int dg_rec_event_internal(struct dg_rec *r, json_t *e, struct dg_err *err)
{
	return append(r, e, NULL, err);
}

int dg_rec_frame_open(const char *root, const char *id, const char *hash, int *fd, size_t *size,
		      struct dg_err *err)
{
	if (!dg_rec_id_valid(id))
		return dg_err_set(err, -EINVAL, "not a session id");
	if (!dg_rec_hash_valid(hash))
		return dg_err_set(err, -EINVAL, "not a frame hash");
	char rel[DG_REC_ID_MAX + sizeof(DG_REC_FRAMES_DIR) + DG_REC_HEX_LEN + 8];
	snprintf(rel, sizeof(rel), "%s/%s/%s.png", id, DG_REC_FRAMES_DIR, hash);
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_err_set(err, -errno, "recordings root %s: %s", root, strerror(errno));
	/* The id and frames/ components must not be symlinks either. */
	int d = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int f = d < 0 ? -1 : openat(d, DG_REC_FRAMES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(rootfd);
	if (d >= 0)
		close(d);
	if (f < 0)
		return dg_err_set(err, -e, "%s: %s", rel, strerror(e));
	char name[DG_REC_HEX_LEN + 8];
	snprintf(name, sizeof(name), "%s.png", hash);
	int64_t sz;
	int rc = dg_rec_open_reg(f, name, O_RDONLY, rel, fd, &sz, err);
	close(f);
	if (rc)
		return rc;
	if (sz > (int64_t)DG_REC_FRAME_MAX) {
		close(*fd);
		*fd = -1;
		return dg_err_set(err, -EFBIG, "%s: larger than %d bytes", rel, DG_REC_FRAME_MAX);
	}
	*size = (size_t)sz;
	return 0;
}
