/* recordings: reading a recording back, as hostile input.
 *
 * One pass over events.jsonl with a bounded buffer (a line longer than
 * line_max is an error, never an allocation), each complete line parsed and
 * checked in this order, so the message names the most likely cause:
 *   1. it is one JSON object (no duplicate keys)     "not a JSON object"
 *   2. its seq is the next one                       deleted, inserted, moved
 *   3. its prev is the hash of the event before      an earlier event changed
 *   4. it ends with the writer's tail                "not as the writer writes"
 *   5. its hash is SHA-256(prev || canonical bytes)  this event changed
 *   6. its own fields (type, wall, mono_ms; the seal's) are well formed
 * A last line without '\n' is torn (a write the writer did not finish):
 * recorded, not an error, unless it follows the seal. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

void dg_rec_scan_free(struct dg_rec_scan *s)
{
	json_decref(s->session);
	s->session = NULL;
}

/* Fails the scan at seq (0: session.json or the file as a whole). */
static int bad(struct dg_rec_scan *s, uint64_t seq, struct dg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad(struct dg_rec_scan *s, uint64_t seq, struct dg_err *err, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->bad_seq = seq;
	if (seq)
		return dg_err_set(err, -EBADMSG, "seq %llu: %s", (unsigned long long)seq, msg);
	return dg_err_set(err, -EBADMSG, "%s", msg);
}

int dg_rec_scan_session(struct dg_rec_scan *s, struct dg_err *err)
{
	char *text;
	size_t len;
	struct dg_err e2 = { { 0 } };
	int rc = dg_rec_read_at(s->dirfd, DG_REC_SESSION_FILE, s->lim->session_max,
				DG_REC_SESSION_FILE, &text, &len, &e2);
	if (rc == -ENOMEM)
		return dg_err_set(err, rc, "%s", e2.msg);
	if (rc)
		return bad(s, 0, err, "%s", e2.msg);
	if (dg_rec_sha256(text, len, s->session_hash) != 0) {
		free(text);
		return dg_err_set(err, -ENOMEM, "session.json: out of memory");
	}
	json_error_t je;
	json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	free(text);
	if (!json_is_object(j)) {
		char why[DG_SHOW_BUF];
		dg_show_str(j ? "not an object" : je.text, DG_SHOW_MAX, false, why, sizeof(why));
		json_decref(j);
		return bad(s, 0, err, "session.json: not a JSON object (%s)", why);
	}
	const char *fmt = json_string_value(json_object_get(j, "format"));
	const char *id = json_string_value(json_object_get(j, "id"));
	json_t *pol = json_object_get(j, "policy");
	const char *ph = json_string_value(json_object_get(j, "policy_sha256"));
	json_t *w = json_object_get(j, "width"), *h = json_object_get(j, "height");
	json_t *tok = json_object_get(j, "token_name");
	json_t *red = json_object_get(j, "redact_text");
	const char *why = NULL;
	if (!fmt || strcmp(fmt, DG_REC_FORMAT) != 0)
		why = "\"format\" is not \"" DG_REC_FORMAT "\"";
	else if (!dg_rec_id_valid(id))
		why = "\"id\" is not a session id";
	else if (!json_is_string(json_object_get(j, "start")) ||
		 !json_is_integer(json_object_get(j, "start_ms")))
		why = "\"start\" or \"start_ms\" is missing";
	else if (!json_is_string(json_object_get(j, "profile")))
		why = "\"profile\" is not a string";
	else if (!json_is_integer(w) || !json_is_integer(h) || json_integer_value(w) < 1 ||
		 json_integer_value(w) > DG_ACTION_SCREEN_MAX || json_integer_value(h) < 1 ||
		 json_integer_value(h) > DG_ACTION_SCREEN_MAX)
		why = "\"width\" or \"height\" is not a screen size";
	else if (!tok || !(json_is_string(tok) || json_is_null(tok)))
		why = "\"token_name\" is neither a string nor null";
	else if (!json_is_boolean(red))
		why = "\"redact_text\" is not a boolean";
	else if (json_is_true(red) &&
		 (!json_is_string(json_object_get(j, "redaction_salt")) ||
		  json_string_length(json_object_get(j, "redaction_salt")) != 2 * DG_REC_SALT_LEN))
		why = "\"redaction_salt\" is missing";
	else if (!json_is_string(pol) || !dg_rec_hash_valid(ph))
		why = "\"policy\" or \"policy_sha256\" is missing";
	if (why) {
		json_decref(j);
		return bad(s, 0, err, "session.json: %s", why);
	}
	uint8_t want[DG_REC_SHA_LEN], got[DG_REC_SHA_LEN];
	dg_rec_unhex(ph, want);
	if (dg_rec_sha256(json_string_value(pol), json_string_length(pol), got) != 0) {
		json_decref(j);
		return dg_err_set(err, -ENOMEM, "session.json: out of memory");
	}
	if (memcmp(want, got, sizeof(got)) != 0) {
		json_decref(j);
		return bad(s, 0, err, "session.json: \"policy_sha256\" is not the policy's hash");
	}
	s->session = j;
	return 0;
}

/* The prefix of a tail, and the tail a line of this event must end with. */
static size_t expect_tail(const char *hash, const char *sig, char *out, size_t len)
{
	int n = sig ? snprintf(out, len, ",\"hash\":\"%s\",\"sig\":\"%s\"}", hash, sig)
		    : snprintf(out, len, ",\"hash\":\"%s\"}", hash);
	return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

/* A string field without NUL inside (strings may hold NUL: compare them
 * as C strings only when they have none), or NULL. */
static const char *exact(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	const char *s = json_string_value(v);
	return s && strlen(s) == json_string_length(v) ? s : NULL;
}

static bool type_ok(const char *t)
{
	size_t n = 0;
	for (; t[n]; n++)
		if (n >= DG_REC_TYPE_MAX || !((t[n] >= 'a' && t[n] <= 'z') || t[n] == '_'))
			return false;
	return n > 0;
}

static int check_line(struct dg_rec_scan *s, const char *line, size_t len, int64_t off,
		      struct dg_err *err)
{
	uint64_t seq = s->last_seq + 1;
	if (s->sealed)
		return bad(s, seq, err, "a line follows the seal");
	if (seq > s->lim->events_max)
		return bad(s, seq, err, "more than %llu events", (unsigned long long)s->lim->events_max);
	json_error_t je;
	json_t *j = json_loadb(line, len, DG_REC_LOAD_FLAGS, &je);
	if (!json_is_object(j)) {
		char why[DG_SHOW_BUF];
		dg_show_str(j ? "not an object" : je.text, DG_SHOW_MAX, false, why, sizeof(why));
		json_decref(j);
		return bad(s, seq, err, "not a JSON object (%s)", why);
	}
	int rc = 0;
	json_t *jseq = json_object_get(j, "seq");
	const char *type = exact(j, "type");
	const char *prev = exact(j, "prev");
	const char *hash = exact(j, "hash");
	const char *sig = exact(j, "sig");
	char hex[DG_REC_HEX_LEN + 1];
	dg_hex_encode(s->last_hash, DG_REC_SHA_LEN, hex);
	if (!json_is_integer(jseq)) {
		rc = bad(s, seq, err, "the line has no integer \"seq\"");
		goto out;
	}
	if (json_integer_value(jseq) < 0 || (uint64_t)json_integer_value(jseq) != seq) {
		rc = bad(s, seq, err, "the line has seq %lld (an event was deleted, inserted or moved)",
			 (long long)json_integer_value(jseq));
		goto out;
	}
	if (!prev || strcmp(prev, hex) != 0) {
		rc = bad(s, seq, err, seq == 1 ? "prev is not session.json's hash (session.json was "
						  "changed or replaced)"
						: "prev is not the hash of seq %llu (an event was changed, "
						  "deleted or inserted before this one)",
			 (unsigned long long)(seq - 1));
		goto out;
	}
	bool seal = type && strcmp(type, "seal") == 0;
	if (!dg_rec_hash_valid(hash) || (seal && (!sig || strlen(sig) != DG_REC_SIG_B64_LEN)) ||
	    (!seal && sig)) {
		rc = bad(s, seq, err, "no valid \"hash\"%s", seal ? " and \"sig\"" : "");
		goto out;
	}
	char tail[DG_REC_SEAL_TAIL_LEN + 1];
	size_t tl = expect_tail(hash, seal ? sig : NULL, tail, sizeof(tail));
	if (!tl || len <= tl || memcmp(line + len - tl, tail, tl) != 0) {
		rc = bad(s, seq, err, "the line does not end as the writer ends it (hash%s last)",
			 seal ? " and sig" : "");
		goto out;
	}
	uint8_t h[DG_REC_SHA_LEN];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned hl = 0;
	int ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) &&
		 EVP_DigestUpdate(md, s->last_hash, DG_REC_SHA_LEN) &&
		 EVP_DigestUpdate(md, line, len - tl) && EVP_DigestUpdate(md, "}", 1) &&
		 EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	if (!ok) {
		rc = dg_err_set(err, -ENOMEM, "seq %llu: out of memory", (unsigned long long)seq);
		goto out;
	}
	dg_hex_encode(h, sizeof(h), hex);
	if (strcmp(hex, hash) != 0) {
		rc = bad(s, seq, err, "hash does not match the event's bytes (the event was changed)");
		goto out;
	}
	/* The chain holds: the bytes are the writer's. What follows only
	 * guards against a writer bug or a forged chain. */
	if (!type || !type_ok(type)) {
		rc = bad(s, seq, err, "\"type\" is not [a-z_], 1..%d bytes", DG_REC_TYPE_MAX);
		goto out;
	}
	if (!json_is_string(json_object_get(j, "wall")) ||
	    !json_is_integer(json_object_get(j, "mono_ms"))) {
		rc = bad(s, seq, err, "\"wall\" or \"mono_ms\" is missing");
		goto out;
	}
	if (seal) {
		const char *kid = exact(j, "key_id");
		const char *alg = exact(j, "alg");
		json_t *complete = json_object_get(j, "complete");
		unsigned char raw[DG_REC_SIG_B64_LEN];
		int n = EVP_DecodeBlock(raw, (const unsigned char *)sig, DG_REC_SIG_B64_LEN);
		if (!dg_rec_hash_valid(kid) || !alg || strcmp(alg, "ed25519") != 0 ||
		    !json_is_boolean(complete) || n != DG_REC_SIG_LEN + 2 ||
		    strcmp(sig + DG_REC_SIG_B64_LEN - 2, "==") != 0) {
			rc = bad(s, seq, err, "the seal's key_id, alg, complete or sig is malformed");
			goto out;
		}
		memcpy(s->sig, raw, DG_REC_SIG_LEN);
		snprintf(s->key_id, sizeof(s->key_id), "%s", kid);
		s->complete = json_is_true(complete);
	}
	if (s->on_event) {
		struct dg_rec_ev ev = { .seq = seq, .obj = j, .type = type, .offset = off, .len = len };
		rc = s->on_event(s, &ev, err);
		if (rc) {
			if (rc == -EBADMSG)
				s->bad_seq = seq;
			goto out;
		}
	}
	s->sealed = seal;
	s->last_seq = seq;
	memcpy(s->last_hash, h, DG_REC_SHA_LEN);
	s->good_end = off + (int64_t)len + 1;
out:
	json_decref(j);
	return rc;
}

int dg_rec_scan_events(struct dg_rec_scan *s, struct dg_err *err)
{
	struct stat st;
	if (fstat(s->fd, &st) != 0)
		return dg_err_set(err, -errno, "events.jsonl: %s", strerror(errno));
	if (st.st_size > s->lim->events_file_max)
		return bad(s, 0, err, "events.jsonl: %lld bytes is more than the limit of %lld",
			   (long long)st.st_size, (long long)s->lim->events_file_max);
	memcpy(s->last_hash, s->session_hash, DG_REC_SHA_LEN);
	s->last_seq = 0;
	s->good_end = 0;
	s->sealed = false;
	/* The buffer holds at most one line and its '\n' plus one read. */
	size_t cap = DG_REC_READ_CHUNK, max_cap = s->lim->line_max + 1 + DG_REC_READ_CHUNK;
	char *buf = malloc(cap);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "events.jsonl: out of memory");
	size_t start = 0, end = 0, scan = 0;
	int64_t base = 0; /* file offset of buf[0] */
	bool eof = false;
	int rc = 0;
	while (rc == 0) {
		char *nl = scan < end ? memchr(buf + scan, '\n', end - scan) : NULL;
		if (nl) {
			size_t len = (size_t)(nl - (buf + start));
			if (len > s->lim->line_max) {
				rc = bad(s, s->last_seq + 1, err, "the line is longer than %zu bytes",
					 s->lim->line_max);
				break;
			}
			rc = check_line(s, buf + start, len, base + (int64_t)start, err);
			start = scan = (size_t)(nl - buf) + 1;
			continue;
		}
		scan = end;
		if (end - start > s->lim->line_max) {
			rc = bad(s, s->last_seq + 1, err, "the line is longer than %zu bytes",
				 s->lim->line_max);
			break;
		}
		if (eof)
			break;
		if (start > 0) { /* keep only the unfinished line */
			memmove(buf, buf + start, end - start);
			base += (int64_t)start;
			end -= start;
			scan -= start;
			start = 0;
		}
		if (cap - end < DG_REC_READ_CHUNK / 2 && cap < max_cap) {
			size_t ncap = cap * 2 > max_cap ? max_cap : cap * 2;
			char *nb = realloc(buf, ncap);
			if (!nb) {
				rc = dg_err_set(err, -ENOMEM, "events.jsonl: out of memory");
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t n = read(s->fd, buf + end, cap - end);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = dg_err_set(err, -errno, "events.jsonl: %s", strerror(errno));
			break;
		}
		if (n == 0)
			eof = true;
		end += (size_t)n;
		if (base + (int64_t)end > s->lim->events_file_max) {
			rc = bad(s, 0, err, "events.jsonl: grew past the limit of %lld bytes while read",
				 (long long)s->lim->events_file_max);
			break;
		}
	}
	if (rc == 0 && end > start) {
		s->torn_bytes = end - start;
		if (dg_rec_sha256(buf + start, end - start, s->torn_sha) != 0)
			rc = dg_err_set(err, -ENOMEM, "events.jsonl: out of memory");
		else if (s->sealed)
			rc = bad(s, s->last_seq + 1, err, "%llu bytes follow the seal",
				 (unsigned long long)s->torn_bytes);
	}
	free(buf);
	return rc;
}

int dg_rec_quick_sealed(int dirfd, const struct dg_rec_limits *lim)
{
	(void)lim;
	int fd;
	int64_t size;
	struct dg_err e = { { 0 } };
	int rc = dg_rec_open_reg(dirfd, DG_REC_EVENTS_FILE, O_RDONLY, DG_REC_EVENTS_FILE, &fd, &size, &e);
	if (rc)
		return rc;
	/* A seal line is a few hundred bytes; 4 KiB from the end holds it. */
	char buf[4096 + 1];
	int64_t from = size > 4096 ? size - 4096 : 0;
	ssize_t n = pread(fd, buf, (size_t)(size - from), from);
	close(fd);
	if (n < 0)
		return -errno;
	if (n == 0 || buf[n - 1] != '\n')
		return 0;
	buf[n - 1] = '\0';
	char *line = strrchr(buf, '\n');
	line = line ? line + 1 : buf;
	/* Only a seal ends with the seal's tail (the writer puts "hash" last
	 * everywhere else). */
	size_t len = strlen(line);
	return len > DG_REC_SEAL_TAIL_LEN && strstr(line, "\"type\":\"seal\"") &&
	       memcmp(line + len - DG_REC_SEAL_TAIL_LEN, ",\"hash\":\"", 9) == 0 &&
	       memcmp(line + len - DG_REC_SEAL_TAIL_LEN + 9 + DG_REC_HEX_LEN, "\",\"sig\":\"", 9) == 0;
}
