/* recordings: internals shared by the module's files and its tests. */
#ifndef DG_RECORDINGS_PRIV_H
#define DG_RECORDINGS_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "recordings/recordings.h"

#define DG_REC_SHA_LEN 32
#define DG_REC_SIG_LEN 64                   /* an Ed25519 signature */
#define DG_REC_SIG_B64_LEN 88               /* its base64 */
#define DG_REC_SALT_LEN 16                  /* redaction salt */
#define DG_REC_WALL_BUF 64                  /* "2025-05-01T12:34:56.789Z" and NUL, with room for any int year */
#define DG_REC_READ_CHUNK (64 * 1024)       /* bytes per read() of events.jsonl */
#define DG_REC_BUF_KEEP (256 * 1024)        /* a writer keeps a line buffer up to this */
#define DG_REC_RM_DEPTH_MAX 4               /* directory depth retention removes */
#define DG_REC_DELETING_PREFIX ".deleting-" /* a recording being removed */
/* Room kept at the end of a recording for what closes it (an "orphaned"
 * event and the seal), so a full recording can still be sealed: ordinary
 * events stop DG_REC_RESERVE_EVENTS events and DG_REC_RESERVE_BYTES bytes
 * before DG_REC_EVENTS_MAX and DG_REC_EVENTS_FILE_MAX. */
#define DG_REC_RESERVE_EVENTS 2
#define DG_REC_RESERVE_BYTES 4096
#define DG_REC_SESSION_FILE "session.json"
#define DG_REC_EVENTS_FILE "events.jsonl"
#define DG_REC_FRAMES_DIR "frames"
/* The fixed tails of a line (see recordings.h): `,"hash":"<64>"}` and
 * `,"hash":"<64>","sig":"<88>"}`. */
#define DG_REC_TAIL_LEN (9 + DG_REC_HEX_LEN + 2)
#define DG_REC_SEAL_TAIL_LEN (9 + DG_REC_HEX_LEN + 1 + 8 + DG_REC_SIG_B64_LEN + 2)
/* JSON flags of the canonical bytes. */
#define DG_REC_DUMP_FLAGS (JSON_COMPACT | JSON_SORT_KEYS)
/* JSON flags for reading events: NUL is allowed in strings (exec stdin may
 * hold it), duplicate keys are not. */
#define DG_REC_LOAD_FLAGS (JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL)

/* The bounds a reader or writer applies: the DG_REC_*_MAX values
 * (dg_rec_limits_default); tests lower them to check the boundaries of the
 * ones too costly to reach (a million events). */
struct dg_rec_limits {
	size_t line_max;
	uint64_t events_max;
	int64_t events_file_max;
	size_t session_max;
	size_t frame_max;
	uint64_t frames_max;
	size_t dir_entries_max;
};
extern const struct dg_rec_limits dg_rec_limits_default;

/* The same as the public functions, with explicit limits. */
int dg_rec_open_lim(const char *root, const struct dg_rec_meta *meta, const struct dg_rec_opts *o,
		    const struct dg_rec_limits *lim, struct dg_rec **r, struct dg_err *err);
int dg_rec_verify_lim(const char *dir, const struct dg_rec_key *key, const struct dg_rec_limits *lim,
		      struct dg_rec_verify_result *res, struct dg_err *err);
int dg_rec_retention_lim(const char *root, const struct dg_rec_retention_opts *o,
			 const struct dg_rec_limits *lim, struct dg_rec_retention_result *res,
			 struct dg_err *err);

/* ---- util.c ------------------------------------------------------------------ */

/* SHA-256 of len bytes (the one-shot EVP call; aborts never: a failure of a
 * built-in digest is an allocation failure and gives -ENOMEM). */
int dg_rec_sha256(const void *data, size_t len, uint8_t out[DG_REC_SHA_LEN]);
/* 64 lowercase hex digits into 32 bytes; -EINVAL otherwise. */
int dg_rec_unhex(const char *hex, uint8_t out[DG_REC_SHA_LEN]);
void dg_rec_wall_str(int64_t ms, char out[DG_REC_WALL_BUF]);

/* Reads name under dirfd whole: O_NOFOLLOW, a regular file of at most max
 * bytes. *buf is malloc'd and NUL-terminated. Messages name `what`. */
int dg_rec_read_at(int dirfd, const char *name, size_t max, const char *what, char **buf, size_t *len,
		   struct dg_err *err);
/* The same from an open descriptor (its current offset, fstat's size). */
int dg_rec_read_fd(int fd, size_t max, const char *what, char **buf, size_t *len, struct dg_err *err);
/* Writes data to name under dirfd atomically: a temporary file (mode),
 * fdatasync when sync, rename; the directory synced when sync. */
int dg_rec_write_at(int dirfd, const char *name, const void *data, size_t len, int mode, bool sync,
		    struct dg_err *err);
/* Opens name under dirfd read-only, O_NOFOLLOW, and checks it is a regular
 * file; *size gets its size. */
int dg_rec_open_reg(int dirfd, const char *name, int flags, const char *what, int *fd, int64_t *size,
		    struct dg_err *err);

/* Removes name under dirfd and everything below it, to DG_REC_RM_DEPTH_MAX
 * levels and lim->dir_entries_max entries a directory, without following
 * symlinks. 0 or a negative errno (the first failure; it goes on past it). */
int dg_rec_rm_tree(int dirfd, const char *name, int depth, const struct dg_rec_limits *lim);

/* Counts code points of valid UTF-8 (jansson strings are). */
size_t dg_rec_utf8_len(const char *s, size_t len);

/* ---- key.c --------------------------------------------------------------------- */

EVP_PKEY *dg_rec_key_pkey(const struct dg_rec_key *k);
bool dg_rec_key_has_private(const struct dg_rec_key *k);
/* Signs DG_REC_SEAL_DOMAIN || hash. */
int dg_rec_key_sign(const struct dg_rec_key *k, const uint8_t hash[DG_REC_SHA_LEN],
		    uint8_t sig[DG_REC_SIG_LEN], struct dg_err *err);
/* 1 when the signature holds, 0 when not, negative on error. */
int dg_rec_key_check(const struct dg_rec_key *k, const uint8_t hash[DG_REC_SHA_LEN],
		     const uint8_t sig[DG_REC_SIG_LEN]);

/* ---- writer.c ------------------------------------------------------------------- */

/* A writer appending to an existing recording whose chain ends at seq with
 * hash (for dg_rec_seal_orphan): dirfd and fd (events.jsonl, O_APPEND,
 * locked) are taken over. */
int dg_rec_resume(int dirfd, int fd, const char *dir, uint64_t seq, const uint8_t hash[DG_REC_SHA_LEN],
		  int64_t size, struct dg_rec **r, struct dg_err *err);
/* Appends a writer-made event e (taken over; orphan sealing): no checks
 * of the caller's rules, the same path to disk. */
int dg_rec_event_internal(struct dg_rec *r, json_t *e, struct dg_err *err);
/* The seal with "complete" as given. */
int dg_rec_seal_as(struct dg_rec *r, const struct dg_rec_key *k, bool complete, struct dg_err *err);

/* ---- reader.c -------------------------------------------------------------------- */

/* One complete line of events.jsonl that passed the chain checks. */
struct dg_rec_ev {
	uint64_t seq;
	const json_t *obj;   /* the parsed event (borrowed) */
	const char *type;
	int64_t offset;      /* of the line in the file */
	size_t len;          /* of the line, '\n' excluded */
};

struct dg_rec_scan {
	/* in */
	const struct dg_rec_limits *lim;
	int dirfd;
	int fd;                       /* events.jsonl, read from its start */
	/* Called for every event that passed; a negative return stops the scan
	 * with bad_seq = ev->seq (err filled by the callback). */
	int (*on_event)(struct dg_rec_scan *s, const struct dg_rec_ev *ev, struct dg_err *err);
	void *arg;
	/* out */
	json_t *session;              /* session.json (dg_rec_scan_free drops it) */
	uint8_t session_hash[DG_REC_SHA_LEN];
	uint64_t last_seq;            /* the last event that passed */
	uint8_t last_hash[DG_REC_SHA_LEN];
	int64_t good_end;             /* offset after its line */
	uint64_t torn_bytes;
	uint8_t torn_sha[DG_REC_SHA_LEN];
	bool sealed, complete;
	uint8_t sig[DG_REC_SIG_LEN];  /* of the seal */
	char key_id[DG_REC_HEX_LEN + 1];
	uint64_t bad_seq;             /* when -EBADMSG: the first bad event (0: session.json) */
};

/* Reads and checks session.json into s->session and s->session_hash.
 * -EBADMSG (bad_seq 0) when it is not a valid one. */
int dg_rec_scan_session(struct dg_rec_scan *s, struct dg_err *err);
/* Reads events.jsonl (s->fd) from its start, checking every line's form,
 * seq, prev and hash, and that nothing follows a seal; calls on_event.
 * Returns 0 (a torn last line is recorded, not an error), -EBADMSG (bad_seq
 * and err say where and what), or another negative errno (reading). */
int dg_rec_scan_events(struct dg_rec_scan *s, struct dg_err *err);
void dg_rec_scan_free(struct dg_rec_scan *s);

/* Quick look at a recording's state without reading it all: whether its
 * last complete line is a seal. 1 sealed, 0 not, negative on error. */
int dg_rec_quick_sealed(int dirfd, const struct dg_rec_limits *lim);

/* ---- objstore.c, objstore-list.c, upload.c ---------------------------------------- */

/* What one ListObjectsV2 answer said beyond its keys. */
struct dg_rec_s3_page {
	bool truncated;                          /* <IsTruncated>true</IsTruncated> */
	char token[DG_REC_S3_TOKEN_MAX + 1];     /* <NextContinuationToken>, when truncated */
	size_t keys;                             /* keys passed to fn */
	bool stopped;                            /* fn returned non-zero (its own message) */
};

/* Scans one ListObjectsV2 answer (xml: len bytes, not NUL-terminated, at
 * most DG_REC_S3_LIST_XML_MAX): its root must be a ListBucketResult; each
 * <Key> (the five XML entities and &#N; / &#xN; of printable ASCII decoded)
 * must be dg_rec_s3_key_valid and start with prefix, and is passed to fn
 * (a non-zero return stops and is returned); more than keys_max keys,
 * an unterminated element, an <IsTruncated> other than true/false, or a
 * truncated answer without a valid token (printable, at most
 * DG_REC_S3_TOKEN_MAX bytes) is -EBADMSG. Messages say what in the
 * answer is wrong, never quoting more than DG_SHOW_MAX bytes of it. */
int dg_rec_s3_list_parse(const char *xml, size_t len, const char *prefix, size_t keys_max,
			 int (*fn)(void *arg, const char *key), void *arg, struct dg_rec_s3_page *pg,
			 struct dg_err *err);

/* dg_rec_fetch's bounds (DG_REC_FETCH_*_MAX); tests lower them. */
struct dg_rec_fetch_limits {
	uint64_t files_max;
	int64_t bytes_max;
};
extern const struct dg_rec_fetch_limits dg_rec_fetch_limits_default;
int dg_rec_fetch_lim(const struct dg_rec_s3 *s, const char *id, const char *dest_root,
		     const struct dg_rec_fetch_limits *lim, struct dg_err *err);

#endif
