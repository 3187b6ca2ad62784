/* recordings: what a session did, on disk, tamper-evident (issue #6).
 *
 * One directory per session under the recordings root; its name is the
 * session id ([a-z0-9-], 1..DG_REC_ID_MAX bytes):
 *
 *   session.json        who, when, what policy (written once, before any event)
 *   events.jsonl        one event a line, hash-chained, sealed by a signature
 *   frames/<sha256>.png each distinct screen once, named by its SHA-256
 *
 * ---- session.json ------------------------------------------------------------
 *
 * One JSON object: "format" ("deskgate-recording/1"), "id", "start" (UTC,
 * "2025-05-01T12:34:56.789Z"), "start_ms" (the same, ms since the epoch),
 * "profile", "width", "height" (the desktop's size), "token_name" (the name
 * of the agent token that created the session, never the token; null when
 * unknown), "policy_sha256" (SHA-256 of "policy"), "policy" (the policy
 * file's text, as a string; the built-in default's text when no file was
 * given), "redact_text" (bool) and, when true, "redaction_salt" (32 hex
 * digits, see Redaction). The hash chain starts from SHA-256 of the file's
 * bytes, so changing session.json breaks the chain at seq 1.
 *
 * ---- events.jsonl ------------------------------------------------------------
 *
 * Every line is one JSON object written by one write() with O_APPEND; a line
 * is complete when it ends with '\n' (the writer writes '\n' last). Fields
 * the writer adds to every event:
 *   "seq"      1, 2, 3, ... without gaps
 *   "wall"     UTC wall-clock time, "2025-05-01T12:34:56.789Z"
 *   "mono_ms"  CLOCK_MONOTONIC in ms (dg_now_ms, base/base.h)
 *   "prev"     the previous event's "hash" (seq 1: SHA-256 of session.json)
 *   "hash"     SHA-256 over the 32 bytes of prev and the event's canonical
 *              bytes (below)
 * The caller's fields follow the event's "type" (see "Event types").
 *
 * Canonical bytes and the line format. The writer dumps the event without
 * "hash" (and "sig") compactly with sorted keys (jansson JSON_COMPACT |
 * JSON_SORT_KEYS): those bytes C, "{...}", are what is hashed. The line is
 * C with its final '}' replaced by `,"hash":"<64 hex>"}` (the seal:
 * `,"hash":"<64 hex>","sig":"<base64>"}`), then '\n'. A verifier hashes the
 * bytes as written (it never re-encodes), so the hash does not depend on
 * how a JSON library prints numbers.
 *
 * The seal: the last event, {"type":"seal","complete":B,"key_id":K,
 * "alg":"ed25519",...,"hash":H,"sig":S}: S is the Ed25519 signature
 * (base64, 64 bytes) of the bytes DG_REC_SEAL_DOMAIN followed by the 32
 * bytes of H, so it covers the whole chain and session.json. K is the hex
 * SHA-256 of the raw 32-byte public key. "complete" is true when the
 * gateway ended the session (dg_rec_seal) and false when a later gateway
 * sealed a recording its dead predecessor left (dg_rec_seal_orphan: the
 * events up to the seal are intact, the session's end was not recorded).
 * Nothing may follow the seal.
 *
 * ---- Event types (the caller's fields) -------------------------------------
 *
 * "type" is [a-z_], 1..DG_REC_TYPE_MAX bytes, not "seal". Frame references
 * ("frame", "frame_before", "frame_after") are null or the 64 lowercase hex
 * digits of a frame already stored by dg_rec_frame in this recording. The
 * writer checks only these and the reserved names; the rest is the caller's
 * contract (what the gateway writes, what replay and the player read):
 *   "action"     one canonical action the agent asked for, decided and run
 *                (or refused): "input" (the agent's raw message), "action"
 *                (canonical object, dg_action_to_json form; null when it
 *                did not parse), "verdict", "rule", "reason" (the policy's
 *                decision), "url", "title" (the page when it was decided;
 *                null when unknown), "screen" [w, h] and "pointer" [x, y]
 *                (the decision's context), "frame_before", "frame_after",
 *                "result" (the worker's result) or "error", "duration_ms"
 *                (from the decision to the result). Written when the action
 *                has finished, so its decision time is mono_ms - duration_ms.
 *   "decision"   a decision of another layer: "layer" "browser" with "url",
 *                "resource_type", "verdict", "rule", "reason"; or "egress"
 *                with "host", "port", "verdict".
 *   "approval"   a human's answer to an "ask": "action_seq", "approved",
 *                "by" (the token's name), "reason".
 *   "egress"     a connection through the egress proxy: "host", "port",
 *                "ip", "verdict", "bytes_up", "bytes_down".
 *   "lifecycle"  "state": "created" | "ready" | "ended" (with "reason") |
 *                "orphaned" (written by dg_rec_seal_orphan, with "last_seq",
 *                "torn_bytes", "torn_sha256").
 *   "error"      "error" (message), "where".
 *
 * ---- Redaction ---------------------------------------------------------------
 *
 * With redact_text, the typed text of "action" events is not stored: in
 * "action" when its "type" is "type", and in "input" in every object whose
 * "type" or "action" is "type" (canonical, OpenAI and Anthropic forms;
 * batches included), the "text" string becomes {"redacted":true,
 * "length":N (code points),"bytes":B,"sha256":H} where H is SHA-256 of the
 * session's redaction_salt (16 bytes) and the text: whoever holds the
 * recording can test a guess, no one can compare texts across recordings.
 * NOT redacted: key actions (chords), exec argv and stdin, URLs and titles,
 * reasons and errors (the policy and the parser do not quote typed text),
 * results, and the frames: the screen shows what was typed wherever the
 * page echoes it. Replay decides a redacted text as "x" repeated N times
 * (text.max_length holds, text.deny cannot be re-checked) and says so.
 *
 * ---- Crash safety ---------------------------------------------------------
 *
 * A line is on disk complete or not at all as far as a killed process is
 * concerned (the page cache survives it); a torn last line (no '\n': a
 * write interrupted by SIGKILL, or a power loss) is reported and ignored.
 * fsync (fdatasync) after every event, at most every interval ms, or never
 * (the OS decides) guards against power loss; the seal is always synced.
 * Frames are written to a temporary file and renamed, so a frame file is
 * complete or absent; the gateway stores a frame before the event that
 * names it. The writer holds an exclusive flock on events.jsonl while the
 * recording is open: a lock nobody holds means the writer is dead.
 *
 * ---- Hostile input -----------------------------------------------------------
 *
 * Readers (verify, replay, orphan sealing, retention) treat every file as
 * hostile: files are opened with O_NOFOLLOW and must be regular files,
 * lines, files, events and frames are bounded (DG_REC_*_MAX), frame names
 * are built only from validated hex, and every failure is an error naming
 * the file or the sequence number, never a crash.
 *
 * Error convention (base/base.h): 0 or a negative errno, the message in
 * the caller's struct dg_err. The writer is single-threaded: one struct
 * dg_rec belongs to one thread at a time.
 */
#ifndef DG_RECORDINGS_H
#define DG_RECORDINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "actions/actions.h"
#include "policy/policy.h"

/* ---- limits (each accepted at its value, refused one past it) ---------- */

#define DG_REC_ID_MAX 80                     /* bytes of a session id */
#define DG_REC_TYPE_MAX 32                   /* bytes of an event type */
#define DG_REC_NAME_MAX 128                  /* bytes of a profile or token name */
#define DG_REC_LINE_MAX (4 * 1024 * 1024)    /* bytes of one events line, '\n' excluded */
#define DG_REC_EVENTS_MAX 1000000            /* events of one recording, seal included */
#define DG_REC_EVENTS_FILE_MAX (1024ll * 1024 * 1024) /* bytes of events.jsonl */
#define DG_REC_SESSION_MAX (4 * 1024 * 1024) /* bytes of session.json (policy text: at
						most DG_POLICY_FILE_MAX) */
#define DG_REC_FRAME_MAX (32 * 1024 * 1024)  /* bytes of one frame (DG_ADAPT_PNG_MAX) */
#define DG_REC_FRAMES_MAX 200000             /* distinct frames of one recording */
#define DG_REC_DIR_ENTRIES_MAX 500000        /* entries read from one directory (the
						root, or a recording's frames/) */
#define DG_REC_FSYNC_INTERVAL_MIN_MS 1
#define DG_REC_FSYNC_INTERVAL_MAX_MS 60000
#define DG_REC_KEY_FILE_MAX 4096             /* bytes of a PEM key file */

#define DG_REC_KEY_FILE "recording-key.pem"  /* in the state dir, mode 0600 */
#define DG_REC_FORMAT "deskgate-recording/1"
#define DG_REC_SEAL_DOMAIN "deskgate-recording-seal-v1"
#define DG_REC_HEX_LEN 64                    /* hex digits of a SHA-256 */

/* ---- keys ---------------------------------------------------------------- */

/* An Ed25519 key: private (seals and verifies) or public only (verifies). */
struct dg_rec_key;

/* Loads STATE_DIR/DG_REC_KEY_FILE, or creates it (mode 0600, exclusively:
 * two processes racing both end up with the one that was linked first).
 * A key file that is not a regular file, is readable or writable by group
 * or others, or is not an Ed25519 private key is an error (never replaced).
 * Returns 0 or a negative errno. */
int dg_rec_key_load_or_create(const char *state_dir, struct dg_rec_key **k, struct dg_err *err);

/* Loads STATE_DIR/DG_REC_KEY_FILE without creating it (-ENOENT when absent). */
int dg_rec_key_load(const char *state_dir, struct dg_rec_key **k, struct dg_err *err);

/* Loads a public key (PEM "PUBLIC KEY", as dg_rec_key_public_pem writes). */
int dg_rec_key_load_public(const char *path, struct dg_rec_key **k, struct dg_err *err);

/* The public half as PEM (malloc'd, NUL-terminated). */
int dg_rec_key_public_pem(const struct dg_rec_key *k, char **pem, struct dg_err *err);

/* The key's id: hex SHA-256 of the raw public key (what seals name). */
void dg_rec_key_id(const struct dg_rec_key *k, char id[DG_REC_HEX_LEN + 1]);

void dg_rec_key_free(struct dg_rec_key *k);

/* ---- writing --------------------------------------------------------------- */

struct dg_rec;

enum dg_rec_fsync {
	DG_REC_FSYNC_EVERY,    /* fdatasync after every event and frame */
	DG_REC_FSYNC_INTERVAL, /* at an event when interval_ms passed since the
				  last sync, and at dg_rec_flush */
	DG_REC_FSYNC_NONE,     /* only the seal */
};

struct dg_rec_opts {
	enum dg_rec_fsync fsync;
	unsigned fsync_interval_ms;  /* DG_REC_FSYNC_INTERVAL: MIN..MAX */
	bool redact_text;            /* see "Redaction" */
};

struct dg_rec_meta {
	const char *id;               /* the session id: the directory's name */
	const char *profile;          /* "browser", "xterm" */
	int width, height;            /* 1..DG_ACTION_SCREEN_MAX */
	const char *token_name;       /* or NULL */
	const char *policy_text;      /* UTF-8 JSON text of the policy */
	size_t policy_len;            /* at most DG_POLICY_FILE_MAX */
	int64_t start_ms;             /* wall clock, ms since the epoch; 0: now */
};

/* Creates ROOT/ID (mode 0750; an existing directory is an error: ids are
 * never reused), its frames/ and session.json, and opens events.jsonl for
 * appending (the flock held until dg_rec_close). root must exist. */
int dg_rec_open(const char *root, const struct dg_rec_meta *meta, const struct dg_rec_opts *o,
		struct dg_rec **r, struct dg_err *err);

/* Stores a PNG (1..DG_REC_FRAME_MAX bytes, PNG signature checked) as
 * frames/<sha256>.png unless that file exists; hash_hex gets its name's
 * 64 hex digits. Cost: one SHA-256 of the PNG and, for a new screen, one
 * file write (plus fsync with DG_REC_FSYNC_EVERY). */
int dg_rec_frame(struct dg_rec *r, const uint8_t *png, size_t len, char hash_hex[DG_REC_HEX_LEN + 1],
		 struct dg_err *err);

/* Appends one event. ev is borrowed, not changed: an object with "type" and
 * the caller's fields (no "seq", "wall", "mono_ms", "prev", "hash", "sig").
 * The writer adds its fields, applies redaction, and, when the line would
 * exceed DG_REC_LINE_MAX, replaces the largest of the caller's fields by
 * {"omitted":true,"bytes":N,"sha256":H} (of its canonical dump) until it
 * fits. Returns 0, -EINVAL (a caller bug: bad type, reserved field, bad
 * frame reference), -EPIPE (sealed or broken), -EFBIG (DG_REC_EVENTS_MAX or
 * DG_REC_EVENTS_FILE_MAX reached: end the session), -ENOSPC/-EIO (the disk:
 * the line is rolled back, so the file still ends with a complete line),
 * -ENOMEM. Cost: one JSON dump, one SHA-256, one write(), and the sync the
 * options ask for. */
int dg_rec_event(struct dg_rec *r, const json_t *ev, struct dg_err *err);

/* With DG_REC_FSYNC_INTERVAL: syncs when an event was written since the
 * last sync (the gateway calls it from a timer every interval). Otherwise 0. */
int dg_rec_flush(struct dg_rec *r, struct dg_err *err);

/* Appends the seal ("complete": true), signed with k (a private key), and
 * syncs. No event may follow; dg_rec_close still frees r. */
int dg_rec_seal(struct dg_rec *r, const struct dg_rec_key *k, struct dg_err *err);

/* Closes and frees, sealed or not (not sealed: as a crash leaves it). */
void dg_rec_close(struct dg_rec *r);

/* Events written so far (the last seq) and the directory's path. */
uint64_t dg_rec_seq(const struct dg_rec *r);
const char *dg_rec_dir(const struct dg_rec *r);

/* Whether id is a valid session id ([a-z0-9-], 1..DG_REC_ID_MAX bytes). */
bool dg_rec_id_valid(const char *id);

/* Whether s is 64 lowercase hex digits (a frame name). */
bool dg_rec_hash_valid(const char *s);

/* Opens ROOT/ID/frames/HASH.png for reading (for serving frames): id and
 * hash are validated, no symlink is followed, the file must be a regular
 * file of at most DG_REC_FRAME_MAX bytes. *fd gets the descriptor, *size
 * its size. */
int dg_rec_frame_open(const char *root, const char *id, const char *hash, int *fd, size_t *size,
		      struct dg_err *err);

/* ---- verifying ---------------------------------------------------------------- */

enum dg_rec_status {
	DG_REC_SEALED,       /* chain, frames and seal hold; the session ended */
	DG_REC_SEALED_CRASH, /* the same, sealed by dg_rec_seal_orphan: the events
				up to the seal are intact, the end was not recorded */
	DG_REC_UNCHECKED,    /* chain and frames hold and a seal is there, but no
				key was given to check its signature */
	DG_REC_UNSEALED,     /* chain and frames hold up to last_seq; no seal */
	DG_REC_BAD,          /* something does not hold: bad_seq, msg */
};

/* "sealed", "sealed-after-crash", "unchecked", "unsealed", "bad". */
const char *dg_rec_status_name(enum dg_rec_status s);

struct dg_rec_verify_result {
	enum dg_rec_status status;
	uint64_t last_seq;        /* the last event that verified (0: none) */
	uint64_t bad_seq;         /* DG_REC_BAD: the first bad event (0: session.json
				     or the files themselves) */
	uint64_t events;          /* complete lines read */
	uint64_t frames;          /* distinct frames checked */
	uint64_t torn_bytes;      /* bytes of a torn last line, ignored (0: none) */
	char key_id[DG_REC_HEX_LEN + 1]; /* the seal's key id ("" without a seal) */
	char id[DG_REC_ID_MAX + 1];      /* session.json's id */
	char msg[DG_ERR_MAX];     /* one line for humans, whatever the status */
};

/* Verifies the recording in dir: session.json, every event's seq, prev and
 * hash, every referenced frame (present, a regular file, hashing to its
 * name; unreferenced files are ignored), and the seal (its signature when
 * key is given, public or private). Returns 0 when it could look (res
 * tells what holds), or a negative errno when it could not (dir missing,
 * out of memory; err says why). */
int dg_rec_verify(const char *dir, const struct dg_rec_key *key, struct dg_rec_verify_result *res,
		  struct dg_err *err);

/* ---- recordings a dead gateway left ------------------------------------------- */

struct dg_rec_orphan_result {
	bool already_sealed;      /* nothing done */
	uint64_t last_seq;        /* the last intact event before the orphan events */
	uint64_t torn_bytes;      /* a torn last line cut off (its length and hash
				     are in the "orphaned" event) */
};

/* Seals a recording no live writer holds: checks the chain (not the frames:
 * that can be slow, verify does it), cuts a torn last line, appends
 * {"type":"lifecycle","state":"orphaned",...} and a seal with "complete":
 * false, signed with k. Verify then says "sealed after a crash". Returns 0,
 * -EBUSY (a live writer holds it), -EBADMSG (the chain is broken: never
 * sealed, verify names the bad event), or another negative errno. A
 * recording without events.jsonl (a crash inside dg_rec_open) gets one. */
int dg_rec_seal_orphan(const char *dir, const struct dg_rec_key *k, struct dg_rec_orphan_result *res,
		       struct dg_err *err);

/* Callbacks for passes over the whole root. */
struct dg_rec_pass {
	/* Whether session id is live in this gateway (never touched when true;
	 * a recording whose flock is held counts as live too). NULL: none. */
	bool (*is_active)(const char *id, void *arg);
	/* Told about each recording acted on or failed (rc 0 or negative). */
	void (*report)(const char *id, int rc, const char *msg, void *arg);
	void *arg;
};

/* dg_rec_seal_orphan on every unsealed, inactive recording under root (the
 * gateway calls it once at start, before it opens new recordings). *sealed
 * and *failed (each may be NULL) count them. Returns 0 unless root cannot
 * be read. */
int dg_rec_seal_orphans(const char *root, const struct dg_rec_key *k, const struct dg_rec_pass *pass,
			unsigned *sealed, unsigned *failed, struct dg_err *err);

/* ---- retention ------------------------------------------------------------------- */

struct dg_rec_retention_opts {
	int64_t max_age_s;         /* delete recordings that ended longer ago (0: no limit) */
	uint64_t max_total_bytes;  /* then the oldest until the total fits (0: no limit) */
	int64_t now_s;             /* wall clock (0: now) */
	/* An object store is configured: a recording without its upload marker
	 * (ROOT/ID/uploaded, a regular file: dg_rec_upload confirmed the
	 * bucket's copy) is the only copy and is never deleted. */
	bool keep_unuploaded;
	struct dg_rec_pass pass;
};

struct dg_rec_retention_result {
	unsigned recordings;       /* recordings found */
	unsigned deleted;
	unsigned active;           /* kept because active */
	unsigned held;             /* due for deletion, kept: not yet uploaded (keep_unuploaded) */
	unsigned failed;           /* could not be deleted (reported) */
	uint64_t bytes_before, bytes_after;
	uint64_t bytes_held;       /* the held recordings' bytes */
	bool over_budget;          /* what may not be deleted (active, held) alone exceeds
				      max_total_bytes */
};

/* Applies retention under root. A recording's age is that of its last
 * write (events.jsonl's mtime); its size is the sum of its files' sizes
 * (st_size). The oldest go first (ties: by id); an active recording is
 * never deleted, nor, with keep_unuploaded, one not yet confirmed in the
 * bucket (counted in held: the caller says so, since it can keep the
 * directory over max_total_bytes); an unsealed one of a dead session counts
 * as sealed (the gateway seals orphans at start: what is left unsealed has
 * a broken chain and still ages out, unless keep_unuploaded holds it). Deleting renames ROOT/ID to ROOT/.deleting-ID first,
 * so a half-deleted recording is never seen as one; leftovers of an
 * interrupted pass are removed at the next. Entries that are not session
 * ids are ignored. Cost: a stat of every file of every recording. */
int dg_rec_retention(const char *root, const struct dg_rec_retention_opts *o,
		     struct dg_rec_retention_result *res, struct dg_err *err);

/* Removes ROOT/ID (a valid id) as retention does: renamed to
 * ROOT/.deleting-ID first, so a half-removed recording is never seen as
 * one (the next retention pass finishes it). -ENOENT when absent. */
int dg_rec_remove(const char *root, const char *id, struct dg_err *err);

/* ---- replay: re-deciding a recording under another policy --------------------- */

struct dg_rec_redecision {
	uint64_t seq;
	const char *kind;          /* "action", "browser" (a browser request's URL),
				      "egress" (host:port), "cdp" (a CDP client's command:
				      subject is its method) */
	const json_t *action;      /* kind "action": the canonical action */
	const char *subject;       /* kind "browser": the URL; "egress": "host:port" */
	const char *old_verdict;   /* as recorded */
	const char *old_rule;      /* as recorded, or "" */
	struct dg_decision now;    /* under the new policy */
	bool changed;              /* verdict differs */
	bool redacted;             /* decided on a placeholder text */
	const char *skipped;       /* not re-decided, and why (then now is unset) */
};

struct dg_rec_replay_summary {
	uint64_t actions, decisions; /* re-decided */
	uint64_t changed, skipped, redacted;
	uint64_t last_seq;
	bool sealed;
	uint64_t torn_bytes;
};

/* Re-decides every "action" event of the recording in dir under p, with
 * the recorded context: "url", "screen", "pointer" as recorded, and the
 * budgets recomputed from the recorded decision times (mono_ms -
 * duration_ms): actions_last_minute counts earlier actions within the same
 * 60 one-second slots the gateway uses, and only actions the NEW policy
 * allows count (a replay asks what would have happened had p been in
 * force). "decision" events of layer "browser" are re-decided with
 * dg_policy_decide_url and "egress" ones with dg_policy_decide_egress;
 * "cdp" events (a CDP client's commands) with dg_policy_decide_cdp_command
 * (skipped when their script was not recorded whole). fn
 * gets every re-decision (changed or not, or skipped) in order; a non-zero
 * return stops. The chain is checked while reading (not the frames, not the
 * seal): a broken chain is -EBADMSG naming the seq, a torn last line is
 * ignored. */
int dg_rec_replay(const char *dir, const struct dg_policy *p,
		  int (*fn)(void *arg, const struct dg_rec_redecision *d), void *arg,
		  struct dg_rec_replay_summary *sum, struct dg_err *err);

/* ---- scripted policy tests (`deskgate test`) -------------------------------- */

#define DG_REC_SCRIPT_LINE_MAX (DG_POLICY_FILE_MAX / 8)  /* bytes of one script line */
#define DG_REC_SCRIPT_STEPS_MAX 100000                 /* steps of one script */
#define DG_REC_TITLE_MAX 1024                          /* bytes of a page title */

/* What a live runner reports for one step (the lead's gateway-backed
 * desktop: the full stack decides and runs the action). */
struct dg_rec_live_result {
	enum dg_verdict verdict;
	char rule[DG_DECISION_RULE_MAX];
	char reason[DG_DECISION_REASON_MAX];
	bool has_url, has_title;           /* after the action */
	char url[DG_ACTION_URL_MAX + 1];
	char title[DG_REC_TITLE_MAX + 1];
};

struct dg_rec_live {
	/* Runs one step: step is the script line's object (its "action" is
	 * canonical; "url", "size", "pointer" are the script's declared state,
	 * the runner may use them to set the desktop up). Returns 0 (res
	 * filled) or a negative errno (the step fails with err's message). */
	int (*step)(void *arg, const json_t *step, struct dg_rec_live_result *res,
		    struct dg_err *err);
	void *arg;
};

struct dg_rec_test_summary {
	unsigned passed, failed;
};

/* Runs a script (JSON lines; blank lines and lines starting with '#' are
 * skipped) against p, writing one line per step and a final
 * "N passed, N failed" line to out. Each step is an object:
 *   "action"  a canonical action (required)
 *   "expect"  "allow" | "deny" | "ask" (required)
 *   "rule"    the rule that must decide: equal to the decision's rule, or
 *             its prefix up to a space ("keys.deny[0]" matches
 *             "keys.deny[0] ctrl+alt+*")
 *   "url"     the current URL (string, or null: unknown); when absent, the
 *             previous step's, or the target of the last allowed navigate
 *   "size"    [W, H] the screen (carries over; default 1280x800)
 *   "pointer" [X, Y] where the pointer is (otherwise: the centre, then
 *             wherever allowed pointer actions left it)
 *   "time_ms" simulated monotonic time of the step (non-decreasing;
 *             default: the previous step's) for actions_per_minute
 *   "name"    a label printed with the step
 *   "expect_url", "expect_title"  checked in live mode only
 * Offline (live NULL) each step is decided with dg_policy_decide; every
 * allowed action counts towards the budgets. A line that does not parse or
 * breaks these rules is a failed step naming the line and the field.
 * Returns 0 when the script was read (the summary tells), or a negative
 * errno when reading or writing failed. */
int dg_rec_test_script(const struct dg_policy *p, FILE *script, const struct dg_rec_live *live,
		       FILE *out, struct dg_rec_test_summary *sum, struct dg_err *err);

/* ---- export as video (`deskgate export`; the dg_export library) ------------
 *
 * Declared here, defined in the separate library dg_export (recordings/
 * export*.c), which links libavformat, libavcodec, libswscale and cairo:
 * only the cli links it, so the gateway and the tests of everything else
 * do not carry the codecs. Every bound of a video is one of these: */
#define DG_REC_EXPORT_FPS 10                  /* output frames per second */
#define DG_REC_EXPORT_BEFORE_MS 600           /* the frame before an action, with its
						 overlay, before the frame after */
#define DG_REC_EXPORT_GAP_MAX_MS 3000         /* a longer pause between two screens is
						 shown this long */
#define DG_REC_EXPORT_TAIL_MS 1000            /* the last screen */
#define DG_REC_EXPORT_SIZE_MAX 3840           /* output width or height; a larger screen
						 is scaled down to fit */
#define DG_REC_EXPORT_FRAME_DIM_MAX DG_ACTION_SCREEN_MAX /* a frame PNG's width or height */
#define DG_REC_EXPORT_FRAME_PIXELS_MAX (32ll * 1024 * 1024) /* a frame PNG's pixels
						 (128 MiB decoded) */
#define DG_REC_EXPORT_DURATION_MAX_S (4 * 3600) /* the video stops there */
#define DG_REC_EXPORT_FRAMES_MAX (DG_REC_EXPORT_DURATION_MAX_S * DG_REC_EXPORT_FPS)

enum dg_rec_export_format {
	DG_REC_EXPORT_WEBM, /* VP8 (libvpx; VP9 when VP8 is missing) in WebM */
	DG_REC_EXPORT_MP4,  /* H.264 (libx264; MPEG-4 part 2 when missing) in MP4 */
};

struct dg_rec_export_result {
	struct dg_rec_verify_result verify; /* what dg_rec_verify said first */
	bool verified;             /* sealed or sealed-after-crash */
	const char *codec;         /* the encoder used ("libvpx", "libx264", ...) */
	int width, height;         /* of the video */
	uint64_t screens;          /* events shown (action, cdp, cdp_frame) */
	uint64_t frames;           /* video frames written */
	int64_t duration_ms;       /* frames / DG_REC_EXPORT_FPS */
	uint64_t frames_bad;       /* frame PNGs missing or refused (shown as a note) */
	uint64_t out_of_order;     /* events whose mono_ms went backwards (no pause) */
	uint64_t last_seq;         /* the last event read (a broken chain ends there) */
	bool truncated;            /* stopped at DG_REC_EXPORT_FRAMES_MAX */
};

/* Renders the recording in dir as a video at out_path: verifies it first
 * (dg_rec_verify with key, which may be NULL), then shows each screen event
 * ("action": frame_before with the action's overlay for
 * DG_REC_EXPORT_BEFORE_MS, then frame_after; "cdp": frame_before; "cdp_frame":
 * frame) from its mono_ms until the next one's, pauses over
 * DG_REC_EXPORT_GAP_MAX_MS shortened to it, the last for
 * DG_REC_EXPORT_TAIL_MS, at DG_REC_EXPORT_FPS. A recording that is not
 * verified is still rendered (up to a broken event) with "unverified:
 * <reason>" on every frame. A missing or refused frame is a note on the
 * screen, never an allocation its header asks for. The video is written
 * to a temporary file beside out_path and renamed over it when complete.
 * Returns 0 or a negative errno with err naming the file and the step. */
int dg_rec_export(const char *dir, const struct dg_rec_key *key, enum dg_rec_export_format fmt,
		  const char *out_path, struct dg_rec_export_result *res, struct dg_err *err);

/* Frees what cairo and fontconfig keep for the life of the process (font
 * caches), so a leak checker sees only real leaks: call it once at exit,
 * when no other thread draws. A later dg_rec_export starts them again. */
void dg_rec_export_teardown(void);
/* ---- object storage: an S3 client, recordings upload and fetch (issue #20) ----
 *
 * A small client for S3-compatible stores (objstore.c) on libcurl's easy
 * API: it blocks, so run it in a process (or thread) of its own, never in
 * the gateway's event loop. Requests are signed by libcurl
 * (CURLOPT_AWS_SIGV4 "aws:amz:<region>:s3", with x-amz-content-sha256
 * UNSIGNED-PAYLOAD so a file streams from disk); URLs are path-style,
 * <endpoint>/<bucket>/<key>. Redirects are not followed; only http and
 * https are spoken. Every status other than 2xx is an error naming the
 * operation, the bucket, the key, the status and S3's <Code> when the body
 * has one. 5xx answers and connection failures are tried again, up to
 * DG_REC_S3_ATTEMPTS in all, after DG_REC_S3_RETRY_DELAY_MS, then twice
 * that, and so on; 4xx answers never are. The secret key never appears in
 * a message.
 *
 * Layout under the bucket: recordings/<id>/session.json,
 * recordings/<id>/events.jsonl (the seal is its last line) and
 * recordings/<id>/frames/<sha256>.png. */

#define DG_REC_S3_URL_MAX 512                 /* bytes of the endpoint URL */
#define DG_REC_S3_FIELD_MAX 128               /* bytes of region, access key, secret key */
#define DG_REC_S3_BUCKET_MIN 3                /* bytes of a bucket name ([a-z0-9.-]) */
#define DG_REC_S3_BUCKET_MAX 63
#define DG_REC_S3_KEY_MAX 1024                /* bytes of an object key */
#define DG_REC_S3_LIST_XML_MAX (1024 * 1024)  /* bytes of one ListObjectsV2 answer */
#define DG_REC_S3_TOKEN_MAX 1024              /* bytes of a continuation token */
#define DG_REC_S3_LIST_KEYS_MAX (DG_REC_FRAMES_MAX + 16) /* keys one listing returns */
#define DG_REC_S3_ERR_BODY_MAX (64 * 1024)    /* bytes of an error answer read for <Code> */
#define DG_REC_S3_ATTEMPTS 4                  /* tries of one request (5xx, connection) */
#define DG_REC_S3_RETRY_DELAY_MS 200          /* before the 2nd try; doubled each time */
#define DG_REC_S3_TIMEOUT_MS_DEFAULT (15 * 60 * 1000) /* one request, whole (0 in the
						config): events.jsonl may be 1 GiB */
#define DG_REC_S3_CONNECT_TIMEOUT_MS_DEFAULT 10000
#define DG_REC_S3_STALL_BYTES_PER_S 1024      /* slower than this for DG_REC_S3_STALL_S */
#define DG_REC_S3_STALL_S 30                  /* seconds: the try is given up (and retried) */
/* dg_rec_fetch: what one recording may bring in. */
#define DG_REC_FETCH_FILES_MAX (DG_REC_FRAMES_MAX + 2) /* files (frames, session, events) */
#define DG_REC_FETCH_BYTES_MAX (8ll * 1024 * 1024 * 1024) /* bytes, all files */
#define DG_REC_S3_PREFIX "recordings/"        /* recordings/<id>/ under the bucket */
#define DG_REC_UPLOADED_FILE "uploaded"       /* ROOT/ID/uploaded: the upload was confirmed */
#define DG_REC_S3_STORE_FILE_MAX (16 * 1024)  /* bytes of a store file (dg_rec_s3_load) */
#define DG_REC_S3_ENV_ACCESS_KEY "DESKGATE_S3_ACCESS_KEY" /* the credentials a store file */
#define DG_REC_S3_ENV_SECRET_KEY "DESKGATE_S3_SECRET_KEY" /* leaves out */

/* Where and as whom. Strings are borrowed; all are required but the
 * timeouts (0: the defaults). endpoint: "http://host:port" or "https://...",
 * printable ASCII without userinfo, query or fragment, at most
 * DG_REC_S3_URL_MAX bytes (a trailing '/' is ignored). */
struct dg_rec_s3 {
	const char *endpoint;
	const char *region;          /* [a-z0-9-] */
	const char *bucket;          /* [a-z0-9.-], DG_REC_S3_BUCKET_MIN..MAX bytes */
	const char *access_key;      /* printable ASCII, no ':' */
	const char *secret_key;      /* printable ASCII; never printed */
	unsigned timeout_ms;         /* one request, whole: 0 default */
	unsigned connect_timeout_ms; /* 0: default */
};

/* 0 when every field of s is as above, else -EINVAL naming the field (never
 * quoting the secret). Every operation checks it first. */
int dg_rec_s3_check(const struct dg_rec_s3 *s, struct dg_err *err);

/* Loads a store file: one JSON object with endpoint, region, bucket,
 * access_key, secret_key (strings) and optionally timeout_ms (1..3600000);
 * nothing else. access_key and secret_key may be left out of the file and
 * given in DG_REC_S3_ENV_ACCESS_KEY and DG_REC_S3_ENV_SECRET_KEY instead
 * (the file's win). The file must be a regular file (no symlink) of at most
 * DG_REC_S3_STORE_FILE_MAX bytes that group and others cannot read (-EPERM).
 * s's strings point into *doc (json_decref it when done, also on error).
 * Then dg_rec_s3_check. Messages name the file, never the secret. */
int dg_rec_s3_load(const char *path, struct dg_rec_s3 *s, json_t **doc, struct dg_err *err);

/* Whether key is an acceptable object key: 1..DG_REC_S3_KEY_MAX bytes of
 * printable ASCII (0x21..0x7e), not starting with '/', no empty, "." or ".."
 * segment. Checked before any request; keys a listing returns too. */
bool dg_rec_s3_key_valid(const char *key);

/* PUTs the regular file at path (no symlink followed) as key, streamed from
 * disk. */
int dg_rec_s3_put(const struct dg_rec_s3 *s, const char *key, const char *path, struct dg_err *err);

/* GETs key into a new file at path (O_EXCL, mode 0640, no symlink): at most
 * max bytes, or -EFBIG (a longer answer is cut off and the file removed).
 * On any error the file is removed. *size (may be NULL) gets its length. */
int dg_rec_s3_get(const struct dg_rec_s3 *s, const char *key, const char *path, int64_t max,
		  int64_t *size, struct dg_err *err);

/* HEADs key: *exists, and *size when it does (both may be NULL but exists).
 * 404 is not an error here. */
int dg_rec_s3_head(const struct dg_rec_s3 *s, const char *key, bool *exists, int64_t *size,
		   struct dg_err *err);

/* dg_rec_s3_head, and *mtime_s (may be NULL): the object's Last-Modified
 * in seconds since the epoch, -1 when the answer has none. */
int dg_rec_s3_stat(const struct dg_rec_s3 *s, const char *key, bool *exists, int64_t *size,
		   int64_t *mtime_s, struct dg_err *err);

/* DELETEs key (S3 answers 204 whether or not it existed). */
int dg_rec_s3_delete(const struct dg_rec_s3 *s, const char *key, struct dg_err *err);

/* Lists the keys under prefix (ListObjectsV2, every page), calling fn with
 * each (a non-zero return stops and is returned). Each answer is at most
 * DG_REC_S3_LIST_XML_MAX bytes, at most DG_REC_S3_LIST_KEYS_MAX keys in
 * all; a key that is not dg_rec_s3_key_valid or not under prefix, or an
 * answer that is not a ListBucketResult, is -EBADMSG. prefix: "", or a
 * valid key, or one with a '/' after it. */
int dg_rec_s3_list(const struct dg_rec_s3 *s, const char *prefix,
		   int (*fn)(void *arg, const char *key), void *arg, struct dg_err *err);

/* Uploads the sealed recording ROOT/ID to recordings/ID/: it must verify as
 * sealed (or sealed after a crash) with key, else -EBADMSG saying its
 * status. Frames go first (one the bucket holds at the same size is not
 * sent again), then session.json, then events.jsonl (its seal) last, so a
 * listing that shows events.jsonl shows a whole recording. Then it is
 * confirmed: fetched back (dg_rec_fetch) into ROOT/.s3check-ID-XXXXXX and
 * verified with key, which must give the same status, last seq and key id;
 * only then is ROOT/ID/uploaded written (the wall time and the bucket), so
 * the caller may delete the local copy. Uploading again is harmless. */
int dg_rec_upload(const struct dg_rec_s3 *s, const char *root, const char *id,
		  const struct dg_rec_key *key, struct dg_err *err);

/* Retention in the bucket: every recording under recordings/ whose
 * events.jsonl was last modified more than max_age_s (> 0) seconds before
 * now_s (0: now) is deleted, events.jsonl first (a listing without it
 * shows no recording), then its other objects. A recording without
 * events.jsonl (an upload under way, or one that failed and is tried
 * again) is left alone. One pass lists at most DG_REC_S3_LIST_KEYS_MAX
 * keys (in key order): a listing that fails part way (past that bound, or
 * a bad page) still has the recordings seen before it acted on, and its
 * error is returned. pass.report is told
 * about each deletion (rc 0) or failure; *deleted and *failed (may be
 * NULL) count them, *recordings (may be NULL) the recordings seen.
 * Blocking, like every call here. */
int dg_rec_s3_retention(const struct dg_rec_s3 *s, int64_t max_age_s, int64_t now_s,
			const struct dg_rec_pass *pass, unsigned *recordings, unsigned *deleted,
			unsigned *failed, struct dg_err *err);

/* Downloads recordings/ID/ into DEST_ROOT/ID (which must not exist): every
 * name must be the recording's layout (session.json, events.jsonl,
 * frames/<64 hex>.png), else -EBADMSG naming the key; at most
 * DG_REC_FETCH_FILES_MAX files and DG_REC_FETCH_BYTES_MAX bytes in all
 * (-EFBIG), each file within its own limit (DG_REC_SESSION_MAX,
 * DG_REC_EVENTS_FILE_MAX, DG_REC_FRAME_MAX). Nothing in the bucket is
 * -ENOENT. Atomic: into DEST_ROOT/.s3fetch-ID-XXXXXX, renamed when whole
 * (removed on failure). It does not verify: the caller does
 * (dg_rec_verify), as dg_rec_upload does. */
int dg_rec_fetch(const struct dg_rec_s3 *s, const char *id, const char *dest_root, struct dg_err *err);

#endif
