/* fuzz_recording: recordings read back as hostile files (recordings/):
 * dg_rec_verify, dg_rec_replay and dg_rec_seal_orphan on a recording
 * directory whose session.json and events.jsonl come from the input.
 *
 * Input: one mode byte, then the files.
 *   bit 0  session.json is the input's (the bytes up to the first NUL;
 *          events.jsonl is what follows it); clear: a valid built-in
 *          session.json, and events.jsonl is all the rest
 *   bit 1  repair the hash chain before writing: in every complete line,
 *          "prev":"<64 hex>" gets the previous hash and the writer's tail
 *          (,"hash":"<64 hex>"} or the seal's) gets the line's true hash,
 *          and with bit 2 a seal's key_id and signature are made with the
 *          process's key; so mutations reach what lies past the chain
 *          checks (event fields, frames, seals, replay's re-decisions)
 *   bit 2  verify with the key (signatures checked)
 *   bit 3  also seal it as an orphan (dg_rec_seal_orphan), then verify
 *          it again: a recording that verified as intact and unsealed
 *          must now verify as sealed after a crash
 *   bits 4-5  the policy replay decides under: the built-in default, or
 *          navigation.json, budgets.json or text.json of tests/scripts
 *   bit 6  the replay callback stops at the second re-decision
 *   bit 7  the built-in session.json redacts typed text
 * No events.jsonl is written when its part is empty (a crash inside
 * dg_rec_open leaves that).
 *
 * With DG_FUZZ_TRACE set in the environment, each step's result is printed
 * (to check what a seed reaches).
 *
 * The directory (a fresh mkdtemp per process, under $TMPDIR, else
 * /dev/shm) keeps a frames/ folder the events may name: one good frame,
 * one whose content does not hash to its name, one symbolic link and one
 * directory (names below, and in the seed corpus). session.json and
 * events.jsonl are written and removed for each input; the whole directory
 * is removed at exit. No descriptor may stay open after an input
 * (dg_fuzz_fd_end). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "fuzz_common.h"
#include "recordings-priv.h"

/* Frame contents; the harness names each file by SHA-256 of its key. */
static const char frame_good[] = "\x89PNG\r\n\x1a\n deskgate fuzz frame";
static const char frame_bad_key[] = "fuzz frame that was swapped";
static const char frame_link_key[] = "fuzz frame that is a symlink";
static const char frame_dir_key[] = "fuzz frame that is a directory";

static char root[PATH_MAX], dir[PATH_MAX];
static int dirfd_rec = -1;
static struct dg_rec_key *key;
static char key_id[DG_REC_HEX_LEN + 1];
#define N_POLICIES 4
static struct dg_policy policies[N_POLICIES];
static char *session_plain, *session_redact;
static bool trace; /* DG_FUZZ_TRACE: say what each input did, for writing seeds */

static void die(const char *what)
{
	fprintf(stderr, "fuzz_recording: %s\n", what);
	abort();
}

static void hex_of(const void *p, size_t n, char out[DG_REC_HEX_LEN + 1])
{
	uint8_t h[DG_REC_SHA_LEN];
	if (dg_rec_sha256(p, n, h) != 0)
		die("sha256 failed");
	dg_hex_encode(h, sizeof(h), out);
}

static void write_file(int at, const char *name, const void *p, size_t n)
{
	int fd = openat(at, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die(name);
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			die("write failed");
		c += w;
		n -= (size_t)w;
	}
	close(fd);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void cleanup(void)
{
	if (dirfd_rec >= 0)
		close(dirfd_rec);
	dirfd_rec = -1;
	if (root[0])
		nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
	for (int i = 0; i < N_POLICIES; i++)
		dg_policy_free(&policies[i]);
	dg_rec_key_free(key);
	key = NULL;
	free(session_plain);
	free(session_redact);
	session_plain = session_redact = NULL;
}

static char *session_json(bool redact)
{
	static const char policy_text[] = "{\"version\":1}";
	char ph[DG_REC_HEX_LEN + 1];
	hex_of(policy_text, sizeof(policy_text) - 1, ph);
	json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:i, s:i, s:s, s:s, s:s, s:b}", "format",
			      DG_REC_FORMAT, "id", "fuzz-session-1", "start", "2025-05-01T12:34:56.789Z",
			      "start_ms", (json_int_t)1746102896789, "profile", "browser", "width", 1280,
			      "height", 800, "token_name", "agent", "policy_sha256", ph, "policy",
			      policy_text, "redact_text", redact);
	if (!j)
		die("out of memory");
	if (redact)
		json_object_set_new(j, "redaction_salt", json_string("00112233445566778899aabbccddeeff"));
	char *s = json_dumps(j, DG_REC_DUMP_FLAGS);
	json_decref(j);
	if (!s)
		die("out of memory");
	return s;
}

static void load_policy(int i, const char *name)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/tests/scripts/%s", DG_SOURCE_DIR, name);
	struct dg_err err = {{0}};
	if (dg_policy_load(path, &policies[i], &err) != 0) {
		fprintf(stderr, "fuzz_recording: %s\n", err.msg);
		abort();
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("DG_FUZZ_TRACE") != NULL;
	/* $TMPDIR, else tmpfs when there is one: the files are rewritten for
	 * every input and orphan sealing syncs them. */
	const char *tmp = getenv("TMPDIR");
	if (!tmp || !*tmp)
		tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(root, sizeof(root), "%s/dg-fuzz-rec-XXXXXX", tmp);
	if (!mkdtemp(root))
		die("mkdtemp failed");
	atexit(cleanup);
	char state[PATH_MAX + 16], frames[PATH_MAX + 32];
	snprintf(state, sizeof(state), "%s/state", root);
	snprintf(dir, sizeof(dir), "%s/rec", root);
	snprintf(frames, sizeof(frames), "%s/frames", dir);
	if (mkdir(state, 0700) || mkdir(dir, 0700) || mkdir(frames, 0700))
		die("mkdir failed");
	struct dg_err err = {{0}};
	if (dg_rec_key_load_or_create(state, &key, &err) != 0)
		die(err.msg);
	dg_rec_key_id(key, key_id);

	int ffd = open(frames, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ffd < 0)
		die("frames/");
	char hex[DG_REC_HEX_LEN + 1], name[DG_REC_HEX_LEN + 8];
	hex_of(frame_good, sizeof(frame_good) - 1, hex);
	snprintf(name, sizeof(name), "%s.png", hex);
	write_file(ffd, name, frame_good, sizeof(frame_good) - 1);
	hex_of(frame_bad_key, sizeof(frame_bad_key) - 1, hex);
	snprintf(name, sizeof(name), "%s.png", hex);
	write_file(ffd, name, frame_good, sizeof(frame_good) - 1);
	hex_of(frame_link_key, sizeof(frame_link_key) - 1, hex);
	snprintf(name, sizeof(name), "%s.png", hex);
	if (symlinkat("/etc/hostname", ffd, name) != 0)
		die("symlink failed");
	hex_of(frame_dir_key, sizeof(frame_dir_key) - 1, hex);
	snprintf(name, sizeof(name), "%s.png", hex);
	if (mkdirat(ffd, name, 0700) != 0)
		die("mkdir failed");
	close(ffd);

	dirfd_rec = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd_rec < 0)
		die("the recording directory");
	dg_policy_default(&policies[0]);
	load_policy(1, "navigation.json");
	load_policy(2, "budgets.json");
	load_policy(3, "text.json");
	session_plain = session_json(false);
	session_redact = session_json(true);
	return 0;
}

/* Overwrites the 64 characters after the first `marker` in line[0..len)
 * with hex, when 64 characters and a quote follow it there. */
static void patch_after(char *line, size_t len, const char *marker, const char *hex)
{
	size_t ml = strlen(marker);
	for (size_t i = 0; i + ml + DG_REC_HEX_LEN < len; i++) {
		if (memcmp(line + i, marker, ml) == 0) {
			if (line[i + ml + DG_REC_HEX_LEN] == '"')
				memcpy(line + i + ml, hex, DG_REC_HEX_LEN);
			return;
		}
	}
}

static bool tail_at(const char *line, size_t len, bool seal)
{
	size_t tl = seal ? DG_REC_SEAL_TAIL_LEN : DG_REC_TAIL_LEN;
	if (len <= tl)
		return false;
	const char *t = line + len - tl;
	if (memcmp(t, ",\"hash\":\"", 9) != 0)
		return false;
	if (!seal)
		return memcmp(t + 9 + DG_REC_HEX_LEN, "\"}", 2) == 0;
	return memcmp(t + 9 + DG_REC_HEX_LEN, "\",\"sig\":\"", 9) == 0 &&
	       memcmp(t + tl - 2, "\"}", 2) == 0;
}

/* Repairs the chain of ev[0..n) in place (see bit 1 above). */
static void repair(char *ev, size_t n, const char *session, size_t session_len, bool sign)
{
	uint8_t last[DG_REC_SHA_LEN];
	if (dg_rec_sha256(session, session_len, last) != 0)
		die("sha256 failed");
	char *line = ev, *end = ev + n;
	while (line < end) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		if (!nl)
			break; /* a torn last line stays as it is */
		size_t len = (size_t)(nl - line);
		char hex[DG_REC_HEX_LEN + 1];
		dg_hex_encode(last, sizeof(last), hex);
		patch_after(line, len, "\"prev\":\"", hex);
		bool seal = tail_at(line, len, true);
		if (seal && sign)
			patch_after(line, len, "\"key_id\":\"", key_id);
		if (seal || tail_at(line, len, false)) {
			size_t tl = seal ? DG_REC_SEAL_TAIL_LEN : DG_REC_TAIL_LEN;
			EVP_MD_CTX *md = EVP_MD_CTX_new();
			uint8_t h[DG_REC_SHA_LEN];
			unsigned hl = 0;
			if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ||
			    !EVP_DigestUpdate(md, last, sizeof(last)) ||
			    !EVP_DigestUpdate(md, line, len - tl) || !EVP_DigestUpdate(md, "}", 1) ||
			    !EVP_DigestFinal_ex(md, h, &hl))
				die("sha256 failed");
			EVP_MD_CTX_free(md);
			dg_hex_encode(h, sizeof(h), hex);
			memcpy(line + len - tl + 9, hex, DG_REC_HEX_LEN);
			if (seal && sign) {
				uint8_t sig[DG_REC_SIG_LEN];
				unsigned char b64[DG_REC_SIG_B64_LEN + 1];
				struct dg_err err = {{0}};
				if (dg_rec_key_sign(key, h, sig, &err) != 0)
					die(err.msg);
				EVP_EncodeBlock(b64, sig, DG_REC_SIG_LEN);
				memcpy(line + len - 2 - DG_REC_SIG_B64_LEN, b64, DG_REC_SIG_B64_LEN);
			}
			memcpy(last, h, sizeof(last));
		}
		line = nl + 1;
	}
}

struct replay_ctx {
	int seen;
	int stop_at;
};

static int on_redecision(void *arg, const struct dg_rec_redecision *d)
{
	struct replay_ctx *c = arg;
	DG_FUZZ_CHECK(d->seq > 0, "seq 0");
	DG_FUZZ_CHECK(d->kind != NULL, "no kind");
	DG_FUZZ_CHECK(d->old_rule != NULL, "old_rule NULL");
	if (!d->skipped) {
		DG_FUZZ_CHECK(d->old_verdict != NULL, "re-decided without an old verdict");
		DG_FUZZ_CHECK(dg_verdict_name(d->now.verdict) != NULL, "verdict %d",
			      (int)d->now.verdict);
		if (strcmp(d->kind, "action") == 0)
			DG_FUZZ_CHECK(json_is_object(d->action), "an action re-decided without it");
		else
			DG_FUZZ_CHECK(d->subject != NULL, "no subject");
	}
	return ++c->seen == c->stop_at;
}

/* Verifies the recording; returns its status. */
static enum dg_rec_status verify(const struct dg_rec_key *k)
{
	struct dg_rec_verify_result res;
	struct dg_err err = {{0}};
	int r = dg_rec_verify(dir, k, &res, &err);
	DG_FUZZ_CHECK(r == 0, "dg_rec_verify could not look: %d %s", r, err.msg);
	DG_FUZZ_CHECK(strcmp(dg_rec_status_name(res.status), "?") != 0, "status %d",
		      (int)res.status);
	DG_FUZZ_CHECK(memchr(res.msg, '\0', sizeof(res.msg)) && res.msg[0], "no message");
	DG_FUZZ_CHECK(res.last_seq <= res.events, "last_seq %llu of %llu events",
		      (unsigned long long)res.last_seq, (unsigned long long)res.events);
	if (res.status == DG_REC_SEALED || res.status == DG_REC_SEALED_CRASH)
		DG_FUZZ_CHECK(k != NULL, "sealed without a key");
	if (trace)
		fprintf(stderr, "verify (%s key): %s: %s\n", k ? "with" : "no",
			dg_rec_status_name(res.status), res.msg);
	if (res.status == DG_REC_BAD)
		DG_FUZZ_CHECK(res.bad_seq <= res.last_seq + 1, "bad_seq %llu after last_seq %llu",
			      (unsigned long long)res.bad_seq, (unsigned long long)res.last_seq);
	return res.status;
}

static void remove_files(void)
{
	unlinkat(dirfd_rec, DG_REC_SESSION_FILE, 0);
	unlinkat(dirfd_rec, DG_REC_EVENTS_FILE, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int fds_before = dg_fuzz_fd_begin();
	uint8_t mode = data[0];
	const char *rest = (const char *)data + 1;
	size_t rest_len = size - 1;
	const char *session;
	size_t session_len;
	const char *ev;
	size_t ev_len;
	if (mode & 1) {
		const char *nul = memchr(rest, '\0', rest_len);
		session = rest;
		session_len = nul ? (size_t)(nul - rest) : rest_len;
		ev = nul ? nul + 1 : rest + rest_len;
		ev_len = (size_t)(rest + rest_len - ev);
	} else {
		session = mode & 0x80 ? session_redact : session_plain;
		session_len = strlen(session);
		ev = rest;
		ev_len = rest_len;
	}
	char *events = dg_fuzz_dup((const uint8_t *)ev, ev_len);
	if (mode & 2)
		repair(events, ev_len, session, session_len, (mode & 4) != 0);

	write_file(dirfd_rec, DG_REC_SESSION_FILE, session, session_len);
	if (ev_len > 0)
		write_file(dirfd_rec, DG_REC_EVENTS_FILE, events, ev_len);
	free(events);

	enum dg_rec_status before = verify((mode & 4) ? key : NULL);

	struct replay_ctx rc = {.stop_at = (mode & 0x40) ? 2 : -1};
	struct dg_rec_replay_summary sum;
	struct dg_err err = {{0}};
	int r = dg_rec_replay(dir, &policies[(mode >> 4) & 3], on_redecision, &rc, &sum, &err);
	DG_FUZZ_CHECK(r <= 0 && (r == 0 || err.msg[0]), "dg_rec_replay: %d %s", r, err.msg);
	if (trace)
		fprintf(stderr, "replay: %d %s: %llu actions, %llu decisions, %llu changed, "
			"%llu skipped\n", r, err.msg, (unsigned long long)sum.actions,
			(unsigned long long)sum.decisions, (unsigned long long)sum.changed,
			(unsigned long long)sum.skipped);
	DG_FUZZ_CHECK(sum.actions + sum.decisions + sum.skipped <= (uint64_t)rc.seen,
		      "summary counts %llu+%llu+%llu, callback saw %d", (unsigned long long)sum.actions,
		      (unsigned long long)sum.decisions, (unsigned long long)sum.skipped, rc.seen);

	if (mode & 8) {
		struct dg_rec_orphan_result orr;
		r = dg_rec_seal_orphan(dir, key, &orr, &err);
		DG_FUZZ_CHECK(r <= 0 && (r == 0 || err.msg[0]), "dg_rec_seal_orphan: %d %s", r,
			      err.msg);
		if (trace)
			fprintf(stderr, "seal_orphan: %d %s\n", r, r ? err.msg : "");
		enum dg_rec_status after = verify(key);
		/* Chain and frames held and no seal: sealing must make it verify. */
		if (before == DG_REC_UNSEALED)
			DG_FUZZ_CHECK(r == 0 && after == DG_REC_SEALED_CRASH,
				      "an intact unsealed recording, sealed as an orphan (%d %s), "
				      "verifies as %s", r, err.msg, dg_rec_status_name(after));
	}
	remove_files();
	dg_fuzz_fd_end(fds_before);
	return 0;
}
