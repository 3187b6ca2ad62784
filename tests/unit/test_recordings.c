/* Recordings (issue #6): the writer and the format, verify, tampering of
 * every kind caught at the right sequence number, torn lines (truncated
 * files and a writer killed with SIGKILL), orphan sealing, redaction, keys,
 * every limit at its boundary, hostile recordings, and the verify and key
 * commands. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "dg_test.h"
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
	snprintf(base, sizeof(base), "/tmp/dgrec-XXXXXX");
	cr_assert_not_null(mkdtemp(base));
	snprintf(root, sizeof(root), "%s/rec", base);
	snprintf(state, sizeof(state), "%s/state", base);
	cr_assert_eq(mkdir(root, 0750), 0);
	cr_assert_eq(mkdir(state, 0700), 0);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_rec_key_load_or_create(state, &key, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
	dg_rec_key_free(key);
	key = NULL;
	nftw(base, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(recordings, .init = setup, .fini = teardown);

/* ---- helpers ------------------------------------------------------------------ */

static const char policy_text[] = "{\"version\": 1}";

static struct dg_rec_meta meta(const char *id)
{
	return (struct dg_rec_meta){ .id = id, .profile = "browser", .width = 1280, .height = 800,
				     .token_name = "ci-agent", .policy_text = policy_text,
				     .policy_len = strlen(policy_text) };
}

static const struct dg_rec_opts opts_none = { .fsync = DG_REC_FSYNC_NONE };

/* A PNG signature and n bytes of payload seeded by seed: distinct frames. */
static uint8_t *fake_png(unsigned seed, size_t n, size_t *len)
{
	uint8_t *p = malloc(8 + n);
	memcpy(p, "\x89PNG\r\n\x1a\n", 8);
	for (size_t i = 0; i < n; i++)
		p[8 + i] = (uint8_t)(seed * 31 + i * 7);
	*len = 8 + n;
	return p;
}

static void put(struct dg_rec *r, json_t *ev)
{
	int rc = dg_rec_event(r, ev, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	json_decref(ev);
}

static void frame(struct dg_rec *r, unsigned seed, char hex[65])
{
	size_t len;
	uint8_t *png = fake_png(seed, 100, &len);
	cr_assert_eq(dg_rec_frame(r, png, len, hex, &err), 0, "%s", err.msg);
	free(png);
}

static char dirbuf[256];
static const char *dir_of(const char *id)
{
	snprintf(dirbuf, sizeof(dirbuf), "%s/%s", root, id);
	return dirbuf;
}

/* A typical session: created, ready, two actions with frames (one frame
 * repeated), a browser decision, an approval, ended; sealed when seal. 7
 * events, plus the seal. */
static void sample(const char *id, bool seal)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta(id);
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	char f1[65], f2[65];
	frame(r, 1, f1);
	frame(r, 2, f2);
	put(r, json_pack("{s:s, s:s}", "type", "lifecycle", "state", "created"));
	put(r, json_pack("{s:s, s:s, s:s}", "type", "lifecycle", "state", "ready", "frame", f1));
	put(r, json_pack("{s:s, s:{s:s,s:s,s:{s:s,s:[ii]}}, s:{s:s,s:i,s:i,s:s,s:i,s:[]}, s:s, s:s,"
			 " s:s, s:n, s:n, s:[ii], s:[ii], s:s, s:s, s:{s:b}, s:i}",
			 "type", "action", "input", "type", "tool_use", "name", "computer", "input",
			 "action", "left_click", "coordinate", 640, 400, "action", "type", "click", "x",
			 640, "y", 400, "button", "left", "count", 1, "modifiers", "verdict", "allow",
			 "rule", "default", "reason", "the policy has no rules", "url", "title",
			 "screen", 1280, 800, "pointer", 640, 400, "frame_before", f1, "frame_after",
			 f2, "result", "ok", 1, "duration_ms", 42));
	put(r, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "type", "decision", "layer",
			 "browser", "url", "https://example.com/x.js", "resource_type", "Script",
			 "verdict", "allow", "rule", "default", "reason", "no rules"));
	put(r, json_pack("{s:s, s:{s:s,s:s}, s:{s:s,s:s}, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
			 "type", "action", "input", "type", "key", "keys", "ctrl+Return", "action",
			 "type", "key", "keys", "Control_L+Return", "verdict", "ask", "rule",
			 "keys.ask[0] ctrl+Return", "reason", "needs a human", "url",
			 "https://example.com/", "frame_before", f2, "frame_after", f2, "error",
			 "awaiting approval"));
	put(r, json_pack("{s:s, s:i, s:b, s:s}", "type", "approval", "action_seq", 5, "approved", 1,
			 "by", "alice"));
	put(r, json_pack("{s:s, s:s, s:s}", "type", "lifecycle", "state", "ended", "reason",
			 "deleted by its owner"));
	if (seal)
		cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	dg_rec_close(r);
}

static struct dg_rec_verify_result vres;

static enum dg_rec_status verify(const char *id, const struct dg_rec_key *k)
{
	int rc = dg_rec_verify(dir_of(id), k, &vres, &err);
	cr_assert_eq(rc, 0, "%s", err.msg);
	return vres.status;
}

/* The lines of a file (malloc'd copies). */
struct lines {
	char *l[64];
	int n;
};

static void read_lines(const char *path, struct lines *ls)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	ls->n = 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) >= 0) {
		cr_assert_lt(ls->n, 64);
		ls->l[ls->n++] = strndup(line, (size_t)n);
	}
	free(line);
	fclose(f);
}

static void write_lines(const char *path, char *const *l, int n)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < n; i++)
		fputs(l[i], f);
	fclose(f);
}

static void free_lines(struct lines *ls)
{
	for (int i = 0; i < ls->n; i++)
		free(ls->l[i]);
	ls->n = 0;
}

static char *events_path(const char *id)
{
	static char p[300];
	snprintf(p, sizeof(p), "%s/%s/events.jsonl", root, id);
	return p;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc((size_t)n + 1);
	cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
	b[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return b;
}

/* Builds a line as the writer does (for forgeries and hostile recordings):
 * obj (without hash) dumped canonically, hashed after prev, the tail
 * appended; signed with k when a seal. Updates prev. malloc'd. */
static char *craft(json_t *obj, uint8_t prev[32], const struct dg_rec_key *k)
{
	char *c = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	size_t n = strlen(c);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned hl;
	uint8_t h[32];
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	EVP_DigestUpdate(md, prev, 32);
	EVP_DigestUpdate(md, c, n);
	EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	char hex[65];
	dg_hex_encode(h, 32, hex);
	char *line = malloc(n + 300);
	memcpy(line, c, n - 1);
	size_t len = n - 1 + (size_t)sprintf(line + n - 1, ",\"hash\":\"%s\"", hex);
	if (k) {
		uint8_t sig[64];
		unsigned char b64[89];
		cr_assert_eq(dg_rec_key_sign(k, h, sig, &err), 0);
		EVP_EncodeBlock(b64, sig, 64);
		len += (size_t)sprintf(line + len, ",\"sig\":\"%s\"", b64);
	}
	strcpy(line + len, "}\n");
	memcpy(prev, h, 32);
	free(c);
	return line;
}

/* The hash the chain starts from. */
static void session_hash(const char *id, uint8_t h[32])
{
	char p[300];
	snprintf(p, sizeof(p), "%s/%s/session.json", root, id);
	size_t len;
	char *s = slurp(p, &len);
	dg_rec_sha256(s, len, h);
	free(s);
}

/* A line re-crafted from line with field changed to v (hash kept as it
 * was: an edit by someone who does not recompute the chain). */
static char *edit_field(const char *line, const char *field, json_t *v)
{
	json_t *o = json_loads(line, JSON_ALLOW_NUL, NULL);
	cr_assert_not_null(o);
	const char *hash = json_string_value(json_object_get(o, "hash"));
	const char *sig = json_string_value(json_object_get(o, "sig"));
	char tail[256];
	if (sig)
		snprintf(tail, sizeof(tail), ",\"hash\":\"%s\",\"sig\":\"%s\"}\n", hash, sig);
	else
		snprintf(tail, sizeof(tail), ",\"hash\":\"%s\"}\n", hash);
	json_object_del(o, "hash");
	json_object_del(o, "sig");
	json_object_set_new(o, field, v);
	char *c = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	size_t n = strlen(c);
	char *out = malloc(n + strlen(tail) + 1);
	memcpy(out, c, n - 1);
	strcpy(out + n - 1, tail);
	free(c);
	return out;
}

/* ---- the format ------------------------------------------------------------ */

Test(recordings, roundtrip_sealed_and_format)
{
	sample("s1", true);
	cr_assert_eq(verify("s1", key), DG_REC_SEALED, "%s", vres.msg);
	cr_assert_eq(vres.events, 8);
	cr_assert_eq(vres.last_seq, 8);
	cr_assert_eq(vres.frames, 2);
	cr_assert_str_eq(vres.id, "s1");
	char kid[65];
	dg_rec_key_id(key, kid);
	cr_assert_str_eq(vres.key_id, kid);
	/* Without a key: everything but the signature holds. */
	cr_assert_eq(verify("s1", NULL), DG_REC_UNCHECKED, "%s", vres.msg);

	/* Every line: canonical bytes (sorted keys, compact) and the tail; the
	 * hash is recomputed here from the spec, independently of reader.c. */
	struct lines ls;
	read_lines(events_path("s1"), &ls);
	cr_assert_eq(ls.n, 8);
	uint8_t prev[32];
	session_hash("s1", prev);
	for (int i = 0; i < ls.n; i++) {
		json_t *o = json_loads(ls.l[i], JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, NULL);
		cr_assert_not_null(o);
		cr_assert_eq(json_integer_value(json_object_get(o, "seq")), i + 1);
		char ph[65];
		dg_hex_encode(prev, 32, ph);
		cr_assert_str_eq(json_string_value(json_object_get(o, "prev")), ph);
		cr_assert(json_is_integer(json_object_get(o, "mono_ms")));
		const char *wall = json_string_value(json_object_get(o, "wall"));
		cr_assert(wall && strlen(wall) == 24 && wall[23] == 'Z', "%s", wall);
		const char *type = json_string_value(json_object_get(o, "type"));
		cr_assert_eq(strcmp(type, "seal") == 0, i == 7);
		dg_rec_unhex(json_string_value(json_object_get(o, "hash")), prev);
		json_decref(o);
	}
	/* Recompute every hash from the bytes: the canonical form of the
	 * object without hash and sig is what the line holds before its tail. */
	session_hash("s1", prev);
	for (int i = 0; i < ls.n; i++) {
		json_t *o = json_loads(ls.l[i], JSON_ALLOW_NUL, NULL);
		json_object_del(o, "hash");
		bool seal = json_object_get(o, "sig") != NULL;
		json_object_del(o, "sig");
		char *line = craft(o, prev, NULL);
		if (!seal)
			cr_assert_str_eq(line, ls.l[i], "line %d is not the canonical form", i + 1);
		else
			cr_assert_eq(strncmp(line, ls.l[i], strlen(line) - 2), 0);
		free(line);
		json_decref(o);
	}
	free_lines(&ls);

	/* session.json holds what the issue lists, never a token. */
	char p[300];
	snprintf(p, sizeof(p), "%s/s1/session.json", root);
	char *s = slurp(p, NULL);
	json_t *j = json_loads(s, 0, NULL);
	free(s);
	cr_assert_str_eq(json_string_value(json_object_get(j, "format")), DG_REC_FORMAT);
	cr_assert_str_eq(json_string_value(json_object_get(j, "profile")), "browser");
	cr_assert_eq(json_integer_value(json_object_get(j, "width")), 1280);
	cr_assert_str_eq(json_string_value(json_object_get(j, "token_name")), "ci-agent");
	cr_assert_str_eq(json_string_value(json_object_get(j, "policy")), policy_text);
	uint8_t ph[32];
	char phex[65];
	dg_rec_sha256(policy_text, strlen(policy_text), ph);
	dg_hex_encode(ph, 32, phex);
	cr_assert_str_eq(json_string_value(json_object_get(j, "policy_sha256")), phex);
	json_decref(j);

	/* Frames: content-addressed, stored once, mode 0640. */
	struct stat st;
	char f[300];
	size_t len;
	uint8_t *png = fake_png(1, 100, &len);
	uint8_t h[32];
	char hx[65];
	dg_rec_sha256(png, len, h);
	dg_hex_encode(h, 32, hx);
	free(png);
	snprintf(f, sizeof(f), "%s/s1/frames/%s.png", root, hx);
	cr_assert_eq(stat(f, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0640);
	cr_assert_eq((size_t)st.st_size, len);
}

Test(recordings, writer_refuses_caller_bugs)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta("bugs");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	static const char *const reserved[] = { "seq", "wall", "mono_ms", "prev", "hash", "sig" };
	for (size_t i = 0; i < 6; i++) {
		json_t *e = json_pack("{s:s, s:i}", "type", "error", reserved[i], 1);
		cr_assert_eq(dg_rec_event(r, e, &err), -EINVAL, "%s", reserved[i]);
		cr_assert(strstr(err.msg, reserved[i]));
		json_decref(e);
	}
	const char *types[] = { "seal", "", "Action", "a-b", "x y" };
	for (size_t i = 0; i < 5; i++) {
		json_t *e = json_pack("{s:s}", "type", types[i]);
		cr_assert_eq(dg_rec_event(r, e, &err), -EINVAL, "type \"%s\"", types[i]);
		json_decref(e);
	}
	/* DG_REC_TYPE_MAX at its boundary. */
	char t[DG_REC_TYPE_MAX + 2];
	memset(t, 'a', sizeof(t));
	t[DG_REC_TYPE_MAX] = '\0';
	json_t *e = json_pack("{s:s}", "type", t);
	cr_assert_eq(dg_rec_event(r, e, &err), 0, "%s", err.msg);
	json_decref(e);
	t[DG_REC_TYPE_MAX] = 'a';
	t[DG_REC_TYPE_MAX + 1] = '\0';
	e = json_pack("{s:s}", "type", t);
	cr_assert_eq(dg_rec_event(r, e, &err), -EINVAL);
	json_decref(e);
	/* Frame references: a hash, stored first. */
	const char *bad[] = { "../../etc/passwd", "ABCDEF", "0000000000000000000000000000000000000000000000000000000000000000" };
	for (size_t i = 0; i < 3; i++) {
		e = json_pack("{s:s, s:s}", "type", "action", "frame_after", bad[i]);
		cr_assert_eq(dg_rec_event(r, e, &err), -EINVAL, "%s", bad[i]);
		json_decref(e);
	}
	e = json_pack("[]");
	cr_assert_eq(dg_rec_event(r, e, &err), -EINVAL);
	json_decref(e);
	/* The caller's object is borrowed, not changed. */
	e = json_pack("{s:s, s:s}", "type", "error", "error", "x");
	cr_assert_eq(dg_rec_event(r, e, &err), 0);
	cr_assert_eq(json_object_size(e), 2);
	json_decref(e);
	/* A frame must be a PNG. */
	char hex[65];
	cr_assert_eq(dg_rec_frame(r, (const uint8_t *)"GIF89a..", 8, hex, &err), -EINVAL);
	cr_assert_eq(dg_rec_seq(r), 2);
	cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	/* Sealed: nothing follows. */
	e = json_pack("{s:s}", "type", "error");
	cr_assert_eq(dg_rec_event(r, e, &err), -EPIPE);
	json_decref(e);
	cr_assert_eq(dg_rec_seal(r, key, &err), -EPIPE);
	dg_rec_close(r);
	cr_assert_eq(verify("bugs", key), DG_REC_SEALED, "%s", vres.msg);
	/* Ids are never reused. */
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EEXIST);
}

Test(recordings, open_checks_metadata_at_boundaries)
{
	struct dg_rec *r;
	char id[DG_REC_ID_MAX + 2];
	memset(id, 'a', sizeof(id));
	id[DG_REC_ID_MAX] = '\0';
	struct dg_rec_meta m = meta(id);
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	id[DG_REC_ID_MAX] = 'a';
	id[DG_REC_ID_MAX + 1] = '\0';
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL);
	const char *bad_ids[] = { "", "..", "a/b", "A", "a_b", "a.b" };
	for (size_t i = 0; i < 6; i++) {
		m = meta(bad_ids[i]);
		cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL, "%s", bad_ids[i]);
		cr_assert_not(dg_rec_id_valid(bad_ids[i]));
	}
	cr_assert(dg_rec_id_valid("0-a-9"));
	/* Names: DG_REC_NAME_MAX. */
	char name[DG_REC_NAME_MAX + 2];
	memset(name, 'n', sizeof(name));
	name[DG_REC_NAME_MAX] = '\0';
	m = meta("names-ok");
	m.profile = name;
	m.token_name = name;
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	name[DG_REC_NAME_MAX] = 'n';
	name[DG_REC_NAME_MAX + 1] = '\0';
	m = meta("names-bad");
	m.token_name = name;
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL);
	m = meta("names-bad");
	m.profile = name;
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL);
	/* Screen: 1..DG_ACTION_SCREEN_MAX. */
	int sizes[][3] = { { 1, 1, 0 }, { DG_ACTION_SCREEN_MAX, DG_ACTION_SCREEN_MAX, 0 },
			   { 0, 800, -EINVAL }, { DG_ACTION_SCREEN_MAX + 1, 800, -EINVAL } };
	for (int i = 0; i < 4; i++) {
		char sid[24]; /* "size-" and any int */
		snprintf(sid, sizeof(sid), "size-%d", i);
		m = meta(sid);
		m.width = sizes[i][0];
		m.height = sizes[i][1];
		cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), sizes[i][2], "%d", i);
		if (!sizes[i][2])
			dg_rec_close(r);
	}
	/* Policy text: DG_POLICY_FILE_MAX bytes, UTF-8. */
	char *big = malloc(DG_POLICY_FILE_MAX + 1);
	memset(big, ' ', DG_POLICY_FILE_MAX + 1);
	m = meta("policy-max");
	m.policy_text = big;
	m.policy_len = DG_POLICY_FILE_MAX;
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	m = meta("policy-over");
	m.policy_text = big;
	m.policy_len = DG_POLICY_FILE_MAX + 1;
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL);
	free(big);
	m = meta("policy-latin1");
	m.policy_text = "{\"a\":\"\xe9\"}";
	m.policy_len = strlen(m.policy_text);
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), -EINVAL);
	/* A failed open leaves nothing behind. */
	cr_assert_eq(access(dir_of("policy-latin1"), F_OK), -1);
	/* fsync interval: DG_REC_FSYNC_INTERVAL_MIN_MS..MAX_MS. */
	unsigned ivs[][2] = { { DG_REC_FSYNC_INTERVAL_MIN_MS - 1, 1 }, { DG_REC_FSYNC_INTERVAL_MIN_MS, 0 },
			      { DG_REC_FSYNC_INTERVAL_MAX_MS, 0 }, { DG_REC_FSYNC_INTERVAL_MAX_MS + 1, 1 } };
	for (int i = 0; i < 4; i++) {
		char sid[16];
		snprintf(sid, sizeof(sid), "iv-%d", i);
		m = meta(sid);
		struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_INTERVAL, .fsync_interval_ms = ivs[i][0] };
		int rc = dg_rec_open(root, &m, &o, &r, &err);
		cr_assert_eq(rc, ivs[i][1] ? -EINVAL : 0, "%u", ivs[i][0]);
		if (!rc)
			dg_rec_close(r);
	}
	/* The root must exist. */
	m = meta("x");
	cr_assert_eq(dg_rec_open("/nonexistent/dir", &m, &opts_none, &r, &err), -ENOENT);
}

Test(recordings, fsync_modes)
{
	struct dg_rec_opts modes[] = { { .fsync = DG_REC_FSYNC_EVERY },
				       { .fsync = DG_REC_FSYNC_INTERVAL, .fsync_interval_ms = 5 },
				       { .fsync = DG_REC_FSYNC_NONE } };
	for (int i = 0; i < 3; i++) {
		char id[24]; /* "mode-" and any int */
		snprintf(id, sizeof(id), "mode-%d", i);
		struct dg_rec *r;
		struct dg_rec_meta m = meta(id);
		cr_assert_eq(dg_rec_open(root, &m, &modes[i], &r, &err), 0, "%s", err.msg);
		char f[65];
		frame(r, 9, f);
		for (int k = 0; k < 20; k++) {
			put(r, json_pack("{s:s, s:i, s:s}", "type", "error", "n", k, "frame", f));
			if (k == 10)
				usleep(6000);
			cr_assert_eq(dg_rec_flush(r, &err), 0);
		}
		cr_assert_eq(dg_rec_seal(r, key, &err), 0);
		cr_assert_str_eq(dg_rec_dir(r), dir_of(id));
		dg_rec_close(r);
		cr_assert_eq(verify(id, key), DG_REC_SEALED, "%s", vres.msg);
	}
}

/* ---- tampering ------------------------------------------------------------------ */

/* Verifies s1 after writing the given lines into its events.jsonl. */
static void expect_bad(char *const *l, int n, uint64_t seq, const char *what)
{
	write_lines(events_path("s1"), l, n);
	enum dg_rec_status st = verify("s1", key);
	cr_assert_eq(st, DG_REC_BAD, "%s: %s: %s", what, dg_rec_status_name(st), vres.msg);
	cr_assert_eq(vres.bad_seq, seq, "%s: bad at %llu, not %llu: %s", what,
		     (unsigned long long)vres.bad_seq, (unsigned long long)seq, vres.msg);
}

Test(recordings, any_field_of_any_event_changed_is_caught_there)
{
	sample("s1", true);
	struct lines ls;
	read_lines(events_path("s1"), &ls);
	int checked = 0;
	for (int i = 0; i < ls.n; i++) {
		json_t *o = json_loads(ls.l[i], JSON_ALLOW_NUL, NULL);
		const char *k;
		json_t *v;
		json_object_foreach(o, k, v) {
			if (strcmp(k, "hash") == 0 || strcmp(k, "sig") == 0)
				continue;
			/* Another value of the same kind (or a string for others). */
			json_t *nv = json_is_integer(v) ? json_integer(json_integer_value(v) + 1)
				     : json_is_string(v) ? json_sprintf("%sx", json_string_value(v))
				     : json_is_true(v)   ? json_false()
				     : json_is_false(v)  ? json_true()
							 : json_string("changed");
			char *saved = ls.l[i];
			ls.l[i] = edit_field(saved, k, nv);
			expect_bad(ls.l, ls.n, (uint64_t)i + 1, k);
			free(ls.l[i]);
			ls.l[i] = saved;
			checked++;
		}
		/* A field added, one removed. */
		char *saved = ls.l[i];
		ls.l[i] = edit_field(saved, "extra", json_string("x"));
		expect_bad(ls.l, ls.n, (uint64_t)i + 1, "added field");
		free(ls.l[i]);
		ls.l[i] = saved;
		json_decref(o);
	}
	cr_assert_gt(checked, 60);
	/* A single byte changed inside a string, hash untouched. */
	char *saved = ls.l[2];
	ls.l[2] = strdup(saved);
	char *p = strstr(ls.l[2], "left_click");
	p[0] = 'r';
	expect_bad(ls.l, ls.n, 3, "byte");
	free(ls.l[2]);
	ls.l[2] = saved;
	/* Whitespace added (same JSON, other bytes). */
	saved = ls.l[3];
	ls.l[3] = malloc(strlen(saved) + 2);
	ls.l[3][0] = '{';
	ls.l[3][1] = ' ';
	strcpy(ls.l[3] + 2, saved + 1);
	expect_bad(ls.l, ls.n, 4, "whitespace");
	free(ls.l[3]);
	ls.l[3] = saved;
	/* Restored: verifies again. */
	write_lines(events_path("s1"), ls.l, ls.n);
	cr_assert_eq(verify("s1", key), DG_REC_SEALED, "%s", vres.msg);
	free_lines(&ls);
}

Test(recordings, deleted_inserted_reordered_lines_are_caught)
{
	sample("s1", true);
	struct lines ls;
	read_lines(events_path("s1"), &ls);
	char *l[80];
	/* Deleting line k (not the seal) fails at k. */
	for (int k = 0; k < ls.n - 1; k++) {
		int n = 0;
		for (int i = 0; i < ls.n; i++)
			if (i != k)
				l[n++] = ls.l[i];
		expect_bad(l, n, (uint64_t)k + 1, "deleted");
		cr_assert(strstr(vres.msg, k ? "deleted" : "deleted"), "%s", vres.msg);
	}
	/* Deleting the seal is a truncation: chain intact, not sealed. */
	write_lines(events_path("s1"), ls.l, ls.n - 1);
	cr_assert_eq(verify("s1", key), DG_REC_UNSEALED, "%s", vres.msg);
	cr_assert_eq(vres.last_seq, 7);
	cr_assert(strstr(vres.msg, "not sealed"), "%s", vres.msg);
	/* Inserting a copy of line k after it fails at k + 1. */
	for (int k = 0; k < ls.n; k++) {
		int n = 0;
		for (int i = 0; i < ls.n; i++) {
			l[n++] = ls.l[i];
			if (i == k)
				l[n++] = ls.l[i];
		}
		expect_bad(l, n, (uint64_t)k + 2, "inserted copy");
	}
	/* Inserting a well-formed forged event (right seq and prev, its own
	 * hash) before line k: the next line's seq and prev no longer fit. */
	uint8_t prev[32];
	session_hash("s1", prev);
	json_t *fo = json_pack("{s:s, s:i, s:s, s:i, s:s}", "type", "error", "seq", 1, "wall",
			       "2020-01-01T00:00:00.000Z", "mono_ms", 1, "prev", "");
	char ph[65];
	dg_hex_encode(prev, 32, ph);
	json_object_set_new(fo, "prev", json_string(ph));
	char *forged = craft(fo, prev, NULL);
	json_decref(fo);
	l[0] = forged;
	for (int i = 0; i < ls.n; i++)
		l[i + 1] = ls.l[i];
	expect_bad(l, ls.n + 1, 2, "forged first event");
	free(forged);
	/* Swapping lines k and k + 1 fails at k. */
	for (int k = 0; k + 1 < ls.n; k++) {
		for (int i = 0; i < ls.n; i++)
			l[i] = ls.l[i];
		l[k] = ls.l[k + 1];
		l[k + 1] = ls.l[k];
		expect_bad(l, ls.n, (uint64_t)k + 1, "swapped");
	}
	/* A line from another recording (same id, same key) does not fit. */
	write_lines(events_path("s1"), ls.l, ls.n);
	free_lines(&ls);
}

Test(recordings, frames_edited_swapped_or_missing_are_caught)
{
	sample("s1", true);
	char f1[65], f2[65], p1[300], p2[300], tmp[300];
	size_t len;
	uint8_t h[32];
	uint8_t *png = fake_png(1, 100, &len);
	dg_rec_sha256(png, len, h);
	dg_hex_encode(h, 32, f1);
	free(png);
	png = fake_png(2, 100, &len);
	dg_rec_sha256(png, len, h);
	dg_hex_encode(h, 32, f2);
	free(png);
	snprintf(p1, sizeof(p1), "%s/s1/frames/%s.png", root, f1);
	snprintf(p2, sizeof(p2), "%s/s1/frames/%s.png", root, f2);
	snprintf(tmp, sizeof(tmp), "%s/s1/frames/tmp", root);
	/* f1 is first named by seq 2 (lifecycle ready), f2 by seq 3. */
	cr_assert_eq(rename(p1, tmp), 0);
	cr_assert_eq(rename(p2, p1), 0);
	cr_assert_eq(rename(tmp, p2), 0);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 2, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "does not hash to its name"), "%s", vres.msg);
	/* Swap back, then edit one byte of f2. */
	cr_assert_eq(rename(p1, tmp), 0);
	cr_assert_eq(rename(p2, p1), 0);
	cr_assert_eq(rename(tmp, p2), 0);
	cr_assert_eq(verify("s1", key), DG_REC_SEALED, "%s", vres.msg);
	FILE *f = fopen(p2, "r+");
	fseek(f, 50, SEEK_SET);
	fputc('!', f);
	fclose(f);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 3, "%s", vres.msg);
	/* Missing. */
	cr_assert_eq(unlink(p2), 0);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 3, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "missing"), "%s", vres.msg);
	/* A symlink to a file with the right bytes is still refused. */
	char real[300];
	snprintf(real, sizeof(real), "%s/real.png", base);
	png = fake_png(2, 100, &len);
	f = fopen(real, "w");
	fwrite(png, 1, len, f);
	fclose(f);
	free(png);
	cr_assert_eq(symlink(real, p2), 0);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 3, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "symbolic link"), "%s", vres.msg);
	/* Unreferenced junk in frames/ is fine. */
	unlink(p2);
	rename(real, p2);
	snprintf(tmp, sizeof(tmp), "%s/s1/frames/junk.txt", root);
	f = fopen(tmp, "w");
	fputs("junk", f);
	fclose(f);
	cr_assert_eq(verify("s1", key), DG_REC_SEALED, "%s", vres.msg);
	/* A symlinked frames/ directory is refused. */
	char fr[300], moved[300];
	snprintf(fr, sizeof(fr), "%s/s1/frames", root);
	snprintf(moved, sizeof(moved), "%s/frames-elsewhere", base);
	cr_assert_eq(rename(fr, moved), 0);
	cr_assert_eq(symlink(moved, fr), 0);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 2, "%s", vres.msg);
}

Test(recordings, forged_seals_are_caught_at_the_seal)
{
	sample("s1", true);
	struct lines ls;
	read_lines(events_path("s1"), &ls);
	/* 1. Rewrite the chain after changing event 3, re-using the original
	 * seal's fields: every hash fits, the signature does not. */
	uint8_t prev[32];
	session_hash("s1", prev);
	char *l[16];
	for (int i = 0; i < ls.n; i++) {
		json_t *o = json_loads(ls.l[i], JSON_ALLOW_NUL, NULL);
		const char *sig = json_string_value(json_object_get(o, "sig"));
		char *keep_sig = sig ? strdup(sig) : NULL;
		json_object_del(o, "hash");
		json_object_del(o, "sig");
		char ph[65];
		dg_hex_encode(prev, 32, ph);
		json_object_set_new(o, "prev", json_string(ph));
		if (i == 2)
			json_object_set_new(o, "verdict", json_string("deny"));
		l[i] = craft(o, prev, NULL);
		if (keep_sig) { /* put the old signature back */
			char *t = l[i];
			size_t n = strlen(t);
			l[i] = malloc(n + 200);
			memcpy(l[i], t, n - 2);
			sprintf(l[i] + n - 2, ",\"sig\":\"%s\"}\n", keep_sig);
			free(t);
			free(keep_sig);
		}
		json_decref(o);
	}
	expect_bad(l, ls.n, 8, "rewritten chain");
	cr_assert(strstr(vres.msg, "signature"), "%s", vres.msg);
	cr_assert_eq(vres.last_seq, 7);
	/* 2. The same, sealed with the forger's own key: not the key given. */
	struct dg_rec_key *other;
	char st2[200];
	snprintf(st2, sizeof(st2), "%s/state2", base);
	mkdir(st2, 0700);
	cr_assert_eq(dg_rec_key_load_or_create(st2, &other, &err), 0);
	char oid[65];
	dg_rec_key_id(other, oid);
	session_hash("s1", prev);
	for (int i = 0; i < ls.n; i++) {
		free(l[i]);
		json_t *o = json_loads(ls.l[i], JSON_ALLOW_NUL, NULL);
		bool seal = json_object_get(o, "sig") != NULL;
		json_object_del(o, "hash");
		json_object_del(o, "sig");
		char ph[65];
		dg_hex_encode(prev, 32, ph);
		json_object_set_new(o, "prev", json_string(ph));
		if (seal)
			json_object_set_new(o, "key_id", json_string(oid));
		l[i] = craft(o, prev, seal ? other : NULL);
		json_decref(o);
	}
	expect_bad(l, ls.n, 8, "other key");
	cr_assert(strstr(vres.msg, "not by the key given"), "%s", vres.msg);
	/* ... and it does verify under the forger's key, which is why verify
	 * takes the operator's public key, never the recording's word. */
	write_lines(events_path("s1"), l, ls.n);
	cr_assert_eq(verify("s1", other), DG_REC_SEALED, "%s", vres.msg);
	dg_rec_key_free(other);
	/* 3. A signature with one bit flipped. */
	for (int i = 0; i < ls.n; i++)
		free(l[i]);
	for (int i = 0; i < ls.n; i++)
		l[i] = strdup(ls.l[i]);
	char *sig = strstr(l[7], ",\"sig\":\"") + 8;
	sig[10] = sig[10] == 'A' ? 'B' : 'A';
	expect_bad(l, ls.n, 8, "flipped signature");
	/* 4. "complete": false -> true would need the key (a field change). */
	for (int i = 0; i < ls.n; i++)
		free(l[i]);
	free_lines(&ls);
}

Test(recordings, session_json_changed_breaks_the_chain_at_seq_1)
{
	sample("s1", true);
	char p[300];
	snprintf(p, sizeof(p), "%s/s1/session.json", root);
	char *s = slurp(p, NULL);
	char *t = strstr(s, "ci-agent");
	t[0] = 'x';
	FILE *f = fopen(p, "w");
	fputs(s, f);
	fclose(f);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 1, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "session.json"), "%s", vres.msg);
	/* The policy changed without its hash: refused as session.json. */
	t[0] = 'c';
	t = strstr(s, "\"version");
	t[1] = 'V';
	f = fopen(p, "w");
	fputs(s, f);
	fclose(f);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 0, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "policy_sha256"), "%s", vres.msg);
	free(s);
	/* Missing. */
	unlink(p);
	cr_assert_eq(verify("s1", key), DG_REC_BAD);
	cr_assert(strstr(vres.msg, "session.json"), "%s", vres.msg);
}

/* ---- crashes ---------------------------------------------------------------------- */

Test(recordings, torn_last_line_is_reported_and_ignored_then_orphan_sealed)
{
	sample("s1", false);
	size_t len;
	char *all = slurp(events_path("s1"), &len);
	/* Cut the last line (seq 7) in the middle. */
	char *last = all + len - 2;
	while (last[-1] != '\n')
		last--;
	size_t cut = (size_t)(last - all) + 40;
	cr_assert_eq(truncate(events_path("s1"), (off_t)cut), 0);
	cr_assert_eq(verify("s1", key), DG_REC_UNSEALED, "%s", vres.msg);
	cr_assert_eq(vres.last_seq, 6);
	cr_assert_eq(vres.torn_bytes, 40);
	cr_assert(strstr(vres.msg, "torn"), "%s", vres.msg);
	/* Replay reads it too. */
	struct dg_policy p;
	dg_policy_default(&p);
	struct dg_rec_replay_summary sum;
	cr_assert_eq(dg_rec_replay(dir_of("s1"), &p, NULL, NULL, &sum, &err), 0, "%s", err.msg);
	cr_assert_eq(sum.last_seq, 6);
	cr_assert_eq(sum.torn_bytes, 40);
	/* The next gateway seals it: the torn bytes are cut and described. */
	struct dg_rec_orphan_result o;
	cr_assert_eq(dg_rec_seal_orphan(dir_of("s1"), key, &o, &err), 0, "%s", err.msg);
	cr_assert_not(o.already_sealed);
	cr_assert_eq(o.last_seq, 6);
	cr_assert_eq(o.torn_bytes, 40);
	cr_assert_eq(verify("s1", key), DG_REC_SEALED_CRASH, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "sealed after a crash: events up to seq 6 intact"), "%s", vres.msg);
	cr_assert_eq(vres.last_seq, 8);
	struct lines ls;
	read_lines(events_path("s1"), &ls);
	json_t *orph = json_loads(ls.l[6], 0, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(orph, "state")), "orphaned");
	cr_assert_eq(json_integer_value(json_object_get(orph, "torn_bytes")), 40);
	uint8_t th[32];
	char thx[65];
	dg_rec_sha256(last, 40, th);
	dg_hex_encode(th, 32, thx);
	cr_assert_str_eq(json_string_value(json_object_get(orph, "torn_sha256")), thx);
	json_decref(orph);
	free_lines(&ls);
	free(all);
	/* Idempotent. */
	cr_assert_eq(dg_rec_seal_orphan(dir_of("s1"), key, &o, &err), 0);
	cr_assert(o.already_sealed);
	/* The CLI: exit 0 for a crash seal, with the message. */
	char kp[300];
	snprintf(kp, sizeof(kp), "%s", state);
	const char *argv[] = { DG_BIN, "verify", "--state-dir", kp, dir_of("s1"), NULL };
	struct dg_run run;
	dg_test_run(argv, NULL, NULL, 0, 30, -1, &run);
	cr_assert_eq(run.exit_code, 0, "%s%s", run.out, run.err);
	cr_assert(strstr(run.out, "sealed-after-crash"), "%s", run.out);
	dg_run_free(&run);
}

Test(recordings, orphan_sealing_rules)
{
	/* A live writer holds it: -EBUSY, in this process as in another. */
	struct dg_rec *r;
	struct dg_rec_meta m = meta("live");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0);
	put(r, json_pack("{s:s, s:s}", "type", "lifecycle", "state", "created"));
	struct dg_rec_orphan_result o;
	cr_assert_eq(dg_rec_seal_orphan(dir_of("live"), key, &o, &err), -EBUSY, "%s", err.msg);
	/* seal_orphans skips it too, and active ones, and sealed ones. */
	sample("dead", false);
	sample("done", true);
	sample("active", false);
	unsigned sealed = 9, failed = 9;
	struct dg_rec_pass pass = { .is_active = NULL };
	cr_assert_eq(dg_rec_seal_orphans(root, key, &pass, &sealed, &failed, &err), 0);
	cr_assert_eq(sealed, 2); /* dead and active: no callback */
	cr_assert_eq(failed, 0);
	cr_assert_eq(verify("dead", key), DG_REC_SEALED_CRASH, "%s", vres.msg);
	cr_assert_eq(verify("done", key), DG_REC_SEALED, "%s", vres.msg);
	dg_rec_close(r);
	cr_assert_eq(dg_rec_seal_orphan(dir_of("live"), key, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(o.last_seq, 1);
	cr_assert_eq(verify("live", key), DG_REC_SEALED_CRASH, "%s", vres.msg);
	/* A broken chain is never signed. */
	sample("broken", false);
	struct lines ls;
	char ep[300];
	snprintf(ep, sizeof(ep), "%s", events_path("broken"));
	read_lines(ep, &ls);
	char *t = ls.l[2];
	ls.l[2] = ls.l[3];
	ls.l[3] = t;
	write_lines(ep, ls.l, ls.n);
	free_lines(&ls);
	cr_assert_eq(dg_rec_seal_orphan(dir_of("broken"), key, &o, &err), -EBADMSG);
	cr_assert(strstr(err.msg, "seq 3"), "%s", err.msg);
	cr_assert_eq(verify("broken", key), DG_REC_BAD);
	/* A crash inside dg_rec_open (session.json, no events.jsonl). */
	sample("early", false);
	unlink(events_path("early"));
	cr_assert_eq(verify("early", key), DG_REC_UNSEALED, "%s", vres.msg);
	cr_assert_eq(dg_rec_seal_orphan(dir_of("early"), key, &o, &err), 0, "%s", err.msg);
	cr_assert_eq(verify("early", key), DG_REC_SEALED_CRASH, "%s", vres.msg);
	/* Sealing needs the private key. */
	char *pem;
	cr_assert_eq(dg_rec_key_public_pem(key, &pem, &err), 0);
	char pp[300];
	snprintf(pp, sizeof(pp), "%s/pub.pem", base);
	FILE *f = fopen(pp, "w");
	fputs(pem, f);
	fclose(f);
	free(pem);
	struct dg_rec_key *pub;
	cr_assert_eq(dg_rec_key_load_public(pp, &pub, &err), 0, "%s", err.msg);
	sample("nopriv", false);
	cr_assert_eq(dg_rec_seal_orphan(dir_of("nopriv"), pub, &o, &err), -EINVAL);
	dg_rec_key_free(pub);
}

/* The child: writes events with big results in a loop until killed. */
static void writer_child(const char *rootdir, const char *state_dir)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta("killed");
	struct dg_err e;
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE };
	if (dg_rec_open(rootdir, &m, &o, &r, &e) != 0)
		_exit(3);
	(void)state_dir;
	size_t big = 3 * 1024 * 1024; /* a write of many pages: SIGKILL can land inside it */
	char *pad = malloc(big + 1);
	memset(pad, 'p', big);
	pad[big] = '\0';
	char hex[65];
	size_t len;
	uint8_t *png = fake_png(5, 1000, &len);
	if (dg_rec_frame(r, png, len, hex, &e) != 0)
		_exit(4);
	for (unsigned i = 0;; i++) {
		pad[i % big] = (char)('a' + i % 26);
		json_t *ev = json_pack("{s:s, s:i, s:s, s:s}", "type", "action", "i", (int)i, "result",
				       i % 3 == 0 ? pad : "small", "frame_after", hex);
		if (dg_rec_event(r, ev, &e) != 0)
			_exit(5);
		json_decref(ev);
	}
}

Test(recordings, writer_killed_with_sigkill_verifies_up_to_its_last_complete_event, .timeout = 120)
{
	int torn_seen = 0;
	for (int round = 0; round < 6; round++) {
		char rd[200];
		snprintf(rd, sizeof(rd), "%s/k%d", base, round);
		mkdir(rd, 0750);
		pid_t pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0)
			writer_child(rd, state);
		/* Let it write for a while (a different moment each round). */
		char ep[300];
		snprintf(ep, sizeof(ep), "%s/killed/events.jsonl", rd);
		struct stat st;
		double t0 = dg_test_now();
		off_t want = (off_t)(10 + round * 4) * 1024 * 1024;
		while (dg_test_now() - t0 < 30 && (stat(ep, &st) != 0 || st.st_size < want))
			usleep(1000 + round * 377);
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		cr_assert(WIFSIGNALED(status), "the writer exited on its own: %d", status);
		char dir[300];
		snprintf(dir, sizeof(dir), "%s/killed", rd);
		cr_assert_eq(dg_rec_verify(dir, key, &vres, &err), 0, "%s", err.msg);
		cr_assert_eq(vres.status, DG_REC_UNSEALED, "round %d: %s", round, vres.msg);
		cr_assert_gt(vres.last_seq, 2);
		if (vres.torn_bytes)
			torn_seen++;
		struct dg_rec_orphan_result o;
		cr_assert_eq(dg_rec_seal_orphan(dir, key, &o, &err), 0, "%s", err.msg);
		cr_assert_eq(o.last_seq, vres.last_seq);
		uint64_t before = vres.last_seq;
		cr_assert_eq(dg_rec_verify(dir, key, &vres, &err), 0);
		cr_assert_eq(vres.status, DG_REC_SEALED_CRASH, "%s", vres.msg);
		cr_assert_eq(vres.last_seq, before + 2);
	}
	/* Not asserted (the kernel decides where SIGKILL lands), but shown. */
	cr_log_info("torn last lines seen in %d of 6 kills", torn_seen);
}

/* ---- redaction --------------------------------------------------------------------- */

Test(recordings, redaction_stores_length_and_salted_hash_only)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta("red");
	struct dg_rec_opts o = { .fsync = DG_REC_FSYNC_NONE, .redact_text = true };
	cr_assert_eq(dg_rec_open(root, &m, &o, &r, &err), 0, "%s", err.msg);
	const char *secret = "hunter2-\xc3\xa9t\xc3\xa9"; /* 11 code points, 13 bytes */
	/* Canonical input. */
	put(r, json_pack("{s:s, s:{s:s,s:s}, s:{s:s,s:s}, s:s}", "type", "action", "input", "type",
			 "type", "text", secret, "action", "type", "type", "text", secret, "verdict",
			 "allow"));
	/* Anthropic (block and input alone), OpenAI batch with two texts. */
	put(r, json_pack("{s:s, s:{s:s,s:s,s:s,s:{s:s,s:s}}, s:{s:s,s:s}, s:s}", "type", "action",
			 "input", "type", "tool_use", "id", "toolu_1", "name", "computer", "input",
			 "action", "type", "text", secret, "action", "type", "type", "text", secret,
			 "verdict", "allow"));
	put(r, json_pack("{s:s, s:{s:s,s:s,s:[{s:s,s:s},{s:s,s:i,s:i},{s:s,s:s}]}, s:{s:s,s:i,s:i},"
			 " s:s}", "type", "action", "input", "type", "computer_call", "call_id", "c1",
			 "actions", "type", "type", "text", secret, "type", "click", "x", 1, "y", 2,
			 "type", "type", "text", "second secret", "action", "type", "click", "x", 1,
			 "y", 2, "verdict", "allow"));
	/* Toolset members (the computer toolset's type, the browser toolset's
	 * type and form_input) and a canonical form_input, whose result text
	 * echoes the value. */
	put(r, json_pack("{s:s, s:{s:s,s:s,s:s,s:s,s:{s:s}}, s:{s:s,s:s}, s:s}", "type", "action",
			 "input", "type", "tool_use", "id", "toolu_2", "name", "type", "toolset_name",
			 "computer", "input", "text", "toolset secret", "action", "type", "type", "text",
			 "toolset secret", "verdict", "allow"));
	put(r, json_pack("{s:s, s:{s:s,s:s,s:s,s:s,s:{s:s,s:{s:s,s:s}}}, s:{s:s,s:s,s:s,s:i,s:i},"
			 " s:{s:s}, s:s}", "type", "action", "input", "type", "tool_use", "id", "toolu_3",
			 "name", "form_input", "toolset_name", "browser", "input", "value", "form secret",
			 "target", "type", "ref", "ref", "ref_7", "action", "type", "form_input", "ref",
			 "ref_7", "value", "form secret", "x", 1, "y", 2, "result", "text",
			 "ref_7 (textbox) is set to \"form secret\"", "verdict", "allow"));
	/* Not redacted: key chords, numbers and booleans of form_input, other
	 * event types. */
	put(r, json_pack("{s:s, s:{s:s,s:s}, s:{s:s,s:s}, s:s}", "type", "action", "input", "action",
			 "key", "text", "ctrl+a", "action", "type", "key", "keys", "Control_L+a",
			 "verdict", "allow"));
	put(r, json_pack("{s:s, s:{s:s,s:s,s:b,s:i,s:i}, s:s}", "type", "action", "action", "type",
			 "form_input", "ref", "ref_8", "value", 1, "x", 1, "y", 2, "verdict", "allow"));
	put(r, json_pack("{s:s, s:s}", "type", "error", "error", "kept as is"));
	cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	dg_rec_close(r);
	cr_assert_eq(verify("red", key), DG_REC_SEALED, "%s", vres.msg);
	size_t len;
	char *all = slurp(events_path("red"), &len);
	cr_assert_null(strstr(all, "hunter2"), "the secret is on disk");
	cr_assert_null(strstr(all, "second secret"));
	cr_assert_null(strstr(all, "toolset secret"), "a toolset member's text is on disk");
	cr_assert_null(strstr(all, "form secret"), "a form value is on disk");
	cr_assert(strstr(all, "\"value\":true"), "a boolean form value was redacted");
	cr_assert(strstr(all, "ctrl+a"));
	cr_assert(strstr(all, "kept as is"));
	free(all);
	/* The stub: length (code points), bytes, SHA-256 of salt || text. */
	char p[300];
	snprintf(p, sizeof(p), "%s/red/session.json", root);
	char *s = slurp(p, NULL);
	json_t *sj = json_loads(s, 0, NULL);
	free(s);
	cr_assert(json_is_true(json_object_get(sj, "redact_text")));
	const char *salt_hex = json_string_value(json_object_get(sj, "redaction_salt"));
	cr_assert_eq(strlen(salt_hex), 32);
	uint8_t buf[64];
	for (int i = 0; i < 16; i++)
		sscanf(salt_hex + 2 * i, "%2hhx", &buf[i]);
	memcpy(buf + 16, secret, strlen(secret));
	uint8_t h[32];
	char hx[65];
	dg_rec_sha256(buf, 16 + strlen(secret), h);
	dg_hex_encode(h, 32, hx);
	json_decref(sj);
	struct lines ls;
	read_lines(events_path("red"), &ls);
	json_t *e1 = json_loads(ls.l[0], 0, NULL);
	json_t *stub = json_object_get(json_object_get(e1, "action"), "text");
	cr_assert(json_is_true(json_object_get(stub, "redacted")));
	cr_assert_eq(json_integer_value(json_object_get(stub, "length")), 11);
	cr_assert_eq(json_integer_value(json_object_get(stub, "bytes")), 13);
	cr_assert_str_eq(json_string_value(json_object_get(stub, "sha256")), hx);
	json_t *istub = json_object_get(json_object_get(e1, "input"), "text");
	cr_assert(json_equal(stub, istub));
	json_decref(e1);
	json_t *e3 = json_loads(ls.l[2], 0, NULL);
	json_t *acts = json_object_get(json_object_get(e3, "input"), "actions");
	cr_assert(json_is_object(json_object_get(json_array_get(acts, 0), "text")));
	cr_assert(json_is_object(json_object_get(json_array_get(acts, 2), "text")));
	json_decref(e3);
	free_lines(&ls);
	/* Without the option nothing is redacted. */
	sample("plain", true);
}

/* ---- limits ---------------------------------------------------------------------- */

Test(recordings, defaults_are_the_named_limits)
{
	cr_assert_eq(dg_rec_limits_default.line_max, DG_REC_LINE_MAX);
	cr_assert_eq(dg_rec_limits_default.events_max, DG_REC_EVENTS_MAX);
	cr_assert_eq(dg_rec_limits_default.events_file_max, DG_REC_EVENTS_FILE_MAX);
	cr_assert_eq(dg_rec_limits_default.session_max, DG_REC_SESSION_MAX);
	cr_assert_eq(dg_rec_limits_default.frame_max, DG_REC_FRAME_MAX);
	cr_assert_eq(dg_rec_limits_default.frames_max, DG_REC_FRAMES_MAX);
	cr_assert_eq(dg_rec_limits_default.dir_entries_max, DG_REC_DIR_ENTRIES_MAX);
}

/* Writes an unsealed recording by hand: session.json from the writer (a
 * fresh recording closed at once), then the given crafted lines. */
static void crafted(const char *id, json_t **events, int n)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta(id);
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	uint8_t prev[32];
	session_hash(id, prev);
	FILE *f = fopen(events_path(id), "w");
	for (int i = 0; i < n; i++) {
		json_t *o = events[i];
		char ph[65];
		dg_hex_encode(prev, 32, ph);
		if (!json_object_get(o, "seq"))
			json_object_set_new(o, "seq", json_integer(i + 1));
		json_object_set_new(o, "wall", json_string("2025-01-01T00:00:00.000Z"));
		json_object_set_new(o, "mono_ms", json_integer(1000 + i));
		json_object_set_new(o, "prev", json_string(ph));
		char *line = craft(o, prev, NULL);
		fputs(line, f);
		free(line);
		json_decref(o);
	}
	fclose(f);
}

Test(recordings, line_max_at_its_boundary)
{
	/* Reader: a line of exactly DG_REC_LINE_MAX bytes ('\n' excluded) is
	 * read, one more byte is refused. */
	for (int over = 0; over <= 1; over++) {
		char id[16];
		snprintf(id, sizeof(id), "line-%d", over);
		json_t *probe = json_pack("{s:s, s:s, s:i, s:s, s:i, s:s}", "type", "error", "pad", "",
					  "seq", 1, "wall", "2025-01-01T00:00:00.000Z", "mono_ms",
					  1000, "prev", "0000000000000000000000000000000000000000000000000000000000000000");
		char *d = json_dumps(probe, JSON_COMPACT | JSON_SORT_KEYS);
		size_t fixed = strlen(d) - 1 + DG_REC_TAIL_LEN; /* line without pad */
		free(d);
		json_decref(probe);
		size_t padn = DG_REC_LINE_MAX - fixed + (size_t)over;
		char *pad = malloc(padn + 1);
		memset(pad, 'x', padn);
		pad[padn] = '\0';
		json_t *ev[1] = { json_pack("{s:s, s:s}", "type", "error", "pad", pad) };
		free(pad);
		crafted(id, ev, 1);
		struct stat st;
		stat(events_path(id), &st);
		cr_assert_eq((size_t)st.st_size, (size_t)DG_REC_LINE_MAX + 1 + (size_t)over);
		enum dg_rec_status s = verify(id, key);
		if (!over) {
			cr_assert_eq(s, DG_REC_UNSEALED, "%s", vres.msg);
			cr_assert_eq(vres.last_seq, 1);
		} else {
			cr_assert_eq(s, DG_REC_BAD);
			cr_assert_eq(vres.bad_seq, 1);
			cr_assert(strstr(vres.msg, "longer than"), "%s", vres.msg);
		}
	}
	/* A huge line without '\n' is refused, not read (nor taken as torn). */
	struct dg_rec *r;
	struct dg_rec_meta m = meta("huge");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0);
	put(r, json_pack("{s:s}", "type", "error"));
	dg_rec_close(r);
	FILE *f = fopen(events_path("huge"), "a");
	for (int i = 0; i < 10 * 1024; i++)
		fputs("{\"x\":\"................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "........................................................................"
		      "...............................................................\"}", f);
	fclose(f);
	cr_assert_eq(verify("huge", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 2);
	cr_assert(strstr(vres.msg, "longer than"), "%s", vres.msg);
	/* Writer: an event over the limit gets its largest field omitted (with
	 * its size and hash), and still verifies. */
	m = meta("omit");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0);
	size_t n = DG_REC_LINE_MAX + 100;
	char *big = malloc(n + 1);
	memset(big, 'o', n);
	big[n] = '\0';
	json_t *ev = json_pack("{s:s, s:s, s:{s:s}}", "type", "action", "verdict", "allow", "result",
			       "stdout", big);
	cr_assert_eq(dg_rec_event(r, ev, &err), 0, "%s", err.msg);
	json_decref(ev);
	free(big);
	cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	dg_rec_close(r);
	cr_assert_eq(verify("omit", key), DG_REC_SEALED, "%s", vres.msg);
	struct lines ls;
	read_lines(events_path("omit"), &ls);
	json_t *o = json_loads(ls.l[0], 0, NULL);
	json_t *stub = json_object_get(o, "result");
	cr_assert(json_is_true(json_object_get(stub, "omitted")));
	cr_assert_eq(json_integer_value(json_object_get(stub, "bytes")), (json_int_t)n + 13);
	cr_assert_str_eq(json_string_value(json_object_get(o, "verdict")), "allow");
	json_decref(o);
	free_lines(&ls);
	/* An event of many small fields that cannot shrink: -E2BIG. */
	struct dg_rec_limits lim = dg_rec_limits_default;
	lim.line_max = 4096;
	m = meta("nofit");
	cr_assert_eq(dg_rec_open_lim(root, &m, &opts_none, &lim, &r, &err), 0);
	ev = json_pack("{s:s}", "type", "error");
	for (int i = 0; i < 100; i++) {
		char k[16];
		snprintf(k, sizeof(k), "f%03d", i);
		json_object_set_new(ev, k, json_string("0123456789012345678901234567890123456789"));
	}
	cr_assert_eq(dg_rec_event(r, ev, &err), -E2BIG, "%s", err.msg);
	json_decref(ev);
	cr_assert_eq(dg_rec_seq(r), 0);
	dg_rec_close(r);
}

Test(recordings, events_max_and_file_max_keep_room_for_the_seal)
{
	struct dg_rec_limits lim = dg_rec_limits_default;
	lim.events_max = 10;
	struct dg_rec *r;
	struct dg_rec_meta m = meta("emax");
	cr_assert_eq(dg_rec_open_lim(root, &m, &opts_none, &lim, &r, &err), 0);
	for (int i = 0; i < 8; i++)
		put(r, json_pack("{s:s}", "type", "error"));
	json_t *ev = json_pack("{s:s}", "type", "error");
	cr_assert_eq(dg_rec_event(r, ev, &err), -EFBIG);
	json_decref(ev);
	cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	struct dg_rec_verify_result res;
	cr_assert_eq(dg_rec_verify_lim(dir_of("emax"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	cr_assert_eq(res.last_seq, 9);
	/* Reader: events_max lines verify, one more is refused. */
	json_t *evs[11];
	for (int i = 0; i < 11; i++)
		evs[i] = json_pack("{s:s}", "type", "error");
	crafted("emax-read", evs, 11);
	lim.events_max = 11;
	cr_assert_eq(dg_rec_verify_lim(dir_of("emax-read"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_UNSEALED, "%s", res.msg);
	lim.events_max = 10;
	cr_assert_eq(dg_rec_verify_lim(dir_of("emax-read"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_BAD);
	cr_assert_eq(res.bad_seq, 11, "%s", res.msg);
	cr_assert(strstr(res.msg, "more than 10 events"), "%s", res.msg);
	/* The file's size. */
	lim = dg_rec_limits_default;
	lim.events_file_max = 16384;
	m = meta("fmax");
	cr_assert_eq(dg_rec_open_lim(root, &m, &opts_none, &lim, &r, &err), 0);
	int n = 0, rc;
	do {
		ev = json_pack("{s:s, s:s}", "type", "error", "error", "........................");
		rc = dg_rec_event(r, ev, &err);
		json_decref(ev);
		n++;
	} while (rc == 0 && n < 1000);
	cr_assert_eq(rc, -EFBIG, "%s", err.msg);
	cr_assert_eq(dg_rec_seal(r, key, &err), 0, "%s", err.msg);
	dg_rec_close(r);
	struct stat st;
	stat(events_path("fmax"), &st);
	cr_assert_leq(st.st_size, 16384);
	cr_assert_eq(dg_rec_verify_lim(dir_of("fmax"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	lim.events_file_max = st.st_size;
	cr_assert_eq(dg_rec_verify_lim(dir_of("fmax"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	lim.events_file_max = st.st_size - 1;
	cr_assert_eq(dg_rec_verify_lim(dir_of("fmax"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_BAD, "%s", res.msg);
	cr_assert(strstr(res.msg, "more than the limit"), "%s", res.msg);
}

Test(recordings, session_max_at_its_boundary)
{
	/* Reader, default limit: session.json of exactly DG_REC_SESSION_MAX
	 * bytes reads, one more is refused. */
	for (int over = 0; over <= 1; over++) {
		char id[16];
		snprintf(id, sizeof(id), "sess-%d", over);
		sample(id, false);
		char p[300];
		snprintf(p, sizeof(p), "%s/%s/session.json", root, id);
		char *s = slurp(p, NULL);
		json_t *j = json_loads(s, 0, NULL);
		free(s);
		char *c = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
		size_t fixed = strlen(c) + 1; /* the '\n' */
		free(c);
		size_t padn = DG_REC_SESSION_MAX - fixed + (size_t)over;
		char *pad = malloc(padn + 1);
		memset(pad, ' ', padn);
		pad[padn] = '\0';
		/* Whitespace at the end: valid JSON, the size wanted. */
		FILE *f = fopen(p, "w");
		c = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
		fputs(c, f);
		fputs(pad, f);
		fputc('\n', f);
		fclose(f);
		free(c);
		free(pad);
		json_decref(j);
		struct stat st;
		stat(p, &st);
		cr_assert_eq((size_t)st.st_size, (size_t)DG_REC_SESSION_MAX + (size_t)over);
		enum dg_rec_status stt = verify(id, key);
		/* session.json's bytes changed, so the chain breaks at seq 1 when
		 * it is read at all: that is the proof it was read. */
		cr_assert_eq(stt, DG_REC_BAD);
		if (!over) {
			cr_assert_eq(vres.bad_seq, 1, "%s", vres.msg);
		} else {
			cr_assert_eq(vres.bad_seq, 0, "%s", vres.msg);
			cr_assert(strstr(vres.msg, "more than the limit"), "%s", vres.msg);
		}
	}
	/* Writer: a lowered limit refuses to start. */
	struct dg_rec_limits lim = dg_rec_limits_default;
	lim.session_max = 200;
	struct dg_rec *r;
	struct dg_rec_meta m = meta("sess-w");
	cr_assert_eq(dg_rec_open_lim(root, &m, &opts_none, &lim, &r, &err), -EFBIG);
	cr_assert_eq(access(dir_of("sess-w"), F_OK), -1);
}

Test(recordings, frame_limits_at_their_boundaries)
{
	struct dg_rec *r;
	struct dg_rec_meta m = meta("fr");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0);
	size_t len;
	uint8_t *png = fake_png(1, DG_REC_FRAME_MAX - 8 + 1, &len);
	char hex[65];
	cr_assert_eq(dg_rec_frame(r, png, DG_REC_FRAME_MAX, hex, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_rec_frame(r, png, DG_REC_FRAME_MAX + 1, hex, &err), -EFBIG);
	free(png);
	dg_rec_close(r);
	/* frames_max distinct frames; the same one again is free. */
	struct dg_rec_limits lim = dg_rec_limits_default;
	lim.frames_max = 3;
	m = meta("frn");
	cr_assert_eq(dg_rec_open_lim(root, &m, &opts_none, &lim, &r, &err), 0);
	char h[4][65];
	for (int i = 0; i < 3; i++)
		frame(r, (unsigned)i, h[i]);
	frame(r, 0, h[3]);
	png = fake_png(7, 100, &len);
	cr_assert_eq(dg_rec_frame(r, png, len, hex, &err), -EFBIG);
	free(png);
	put(r, json_pack("{s:s, s:s, s:s}", "type", "action", "frame_before", h[0], "frame_after", h[1]));
	put(r, json_pack("{s:s, s:s}", "type", "action", "frame", h[2]));
	cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	dg_rec_close(r);
	struct dg_rec_verify_result res;
	cr_assert_eq(dg_rec_verify_lim(dir_of("frn"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	cr_assert_eq(res.frames, 3);
	lim.frames_max = 2;
	cr_assert_eq(dg_rec_verify_lim(dir_of("frn"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_BAD);
	cr_assert_eq(res.bad_seq, 2, "%s", res.msg);
	/* Reader: a frame file over frame_max is refused. */
	lim = dg_rec_limits_default;
	lim.frame_max = 108;
	cr_assert_eq(dg_rec_verify_lim(dir_of("frn"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_SEALED, "%s", res.msg);
	lim.frame_max = 107;
	cr_assert_eq(dg_rec_verify_lim(dir_of("frn"), key, &lim, &res, &err), 0);
	cr_assert_eq(res.status, DG_REC_BAD);
	cr_assert_eq(res.bad_seq, 1, "%s", res.msg);
	cr_assert(strstr(res.msg, "more than the limit"), "%s", res.msg);
	/* Serving frames: validated names, no symlinks. */
	int fd;
	size_t sz;
	cr_assert_eq(dg_rec_frame_open(root, "frn", h[0], &fd, &sz, &err), 0, "%s", err.msg);
	cr_assert_eq(sz, 108);
	close(fd);
	cr_assert_eq(dg_rec_frame_open(root, "frn", "../../etc/passwd", &fd, &sz, &err), -EINVAL);
	cr_assert_eq(dg_rec_frame_open(root, "../frn", h[0], &fd, &sz, &err), -EINVAL);
	cr_assert_eq(dg_rec_frame_open(root, "frn", "0000000000000000000000000000000000000000000000000000000000000000", &fd, &sz, &err), -ENOENT);
}

/* ---- hostile recordings --------------------------------------------------------- */

Test(recordings, hostile_recordings_give_clean_errors)
{
	/* Frame names that are paths. */
	const char *names[] = { "../../etc/passwd", "/etc/passwd",
				"ABCDEF0000000000000000000000000000000000000000000000000000000000",
				"00000000000000000000000000000000000000000000000000000000000000", };
	for (int i = 0; i < 4; i++) {
		char id[24]; /* "trav-" and any int */
		snprintf(id, sizeof(id), "trav-%d", i);
		json_t *ev[2] = { json_pack("{s:s}", "type", "error"),
				  json_pack("{s:s, s:s}", "type", "action", "frame_after", names[i]) };
		crafted(id, ev, 2);
		cr_assert_eq(verify(id, key), DG_REC_BAD, "%s", names[i]);
		cr_assert_eq(vres.bad_seq, 2, "%s", vres.msg);
		cr_assert(strstr(vres.msg, "not a frame hash"), "%s", vres.msg);
	}
	json_t *ev1[1] = { json_pack("{s:s, s:i}", "type", "action", "frame", 5) };
	crafted("trav-int", ev1, 1);
	cr_assert_eq(verify("trav-int", key), DG_REC_BAD);
	/* Not JSON, not an object, duplicate keys, deep nesting, binary. */
	const char *lines[] = { "not json\n", "[1,2,3]\n", "{\"type\":\"error\",\"type\":\"x\"}\n",
				"\x01\x02\xff\xfe\n", "\n" };
	for (int i = 0; i < 5; i++) {
		char id[24]; /* "junk-" and any int */
		snprintf(id, sizeof(id), "junk-%d", i);
		sample(id, false);
		FILE *f = fopen(events_path(id), "a");
		fputs(lines[i], f);
		fclose(f);
		cr_assert_eq(verify(id, key), DG_REC_BAD, "%d", i);
		cr_assert_eq(vres.bad_seq, 8, "%d: %s", i, vres.msg);
	}
	sample("deep", false);
	FILE *f = fopen(events_path("deep"), "a");
	for (int i = 0; i < 100000; i++)
		fputc('[', f);
	fputc('\n', f);
	fclose(f);
	cr_assert_eq(verify("deep", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 8, "%s", vres.msg);
	/* A line whose hash field is not at the end (a hand-written event). */
	sample("tail", false);
	f = fopen(events_path("tail"), "a");
	fputs("{\"hash\":\"00\",\"seq\":8}\n", f);
	fclose(f);
	cr_assert_eq(verify("tail", key), DG_REC_BAD);
	/* NUL inside strings is fine (exec stdin may hold it). */
	struct dg_rec *r;
	struct dg_rec_meta m = meta("nul");
	cr_assert_eq(dg_rec_open(root, &m, &opts_none, &r, &err), 0);
	put(r, json_pack("{s:s, s:s#}", "type", "action", "stdin", "a\0b", 3));
	cr_assert_eq(dg_rec_seal(r, key, &err), 0);
	dg_rec_close(r);
	cr_assert_eq(verify("nul", key), DG_REC_SEALED, "%s", vres.msg);
	/* Events after the seal, bytes after the seal. */
	sample("after", true);
	f = fopen(events_path("after"), "a");
	fputs("{\"type\":\"error\"}\n", f);
	fclose(f);
	cr_assert_eq(verify("after", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 9, "%s", vres.msg);
	cr_assert(strstr(vres.msg, "follows the seal"), "%s", vres.msg);
	sample("after2", true);
	f = fopen(events_path("after2"), "a");
	fputs("{\"type\":", f);
	fclose(f);
	cr_assert_eq(verify("after2", key), DG_REC_BAD);
	cr_assert(strstr(vres.msg, "follow the seal"), "%s", vres.msg);
	/* Files that are symlinks, directories or FIFOs. */
	sample("sym", true);
	char ep[300], moved[300];
	snprintf(ep, sizeof(ep), "%s", events_path("sym"));
	snprintf(moved, sizeof(moved), "%s/ev-elsewhere", base);
	rename(ep, moved);
	symlink(moved, ep);
	cr_assert_eq(verify("sym", key), DG_REC_BAD);
	cr_assert(strstr(vres.msg, "symbolic link"), "%s", vres.msg);
	sample("fifo", true);
	unlink(events_path("fifo"));
	mkfifo(events_path("fifo"), 0600);
	cr_assert_eq(verify("fifo", key), DG_REC_BAD);
	cr_assert(strstr(vres.msg, "not a regular file"), "%s", vres.msg);
	sample("sdir", true);
	char sp[300];
	snprintf(sp, sizeof(sp), "%s/sdir/session.json", root);
	unlink(sp);
	mkdir(sp, 0700);
	cr_assert_eq(verify("sdir", key), DG_REC_BAD);
	cr_assert_eq(vres.bad_seq, 0);
	/* Not a recording at all. */
	cr_assert_eq(dg_rec_verify("/nonexistent", key, &vres, &err), -ENOENT);
	cr_assert_eq(dg_rec_verify("/etc", key, &vres, &err), 0);
	cr_assert_eq(vres.status, DG_REC_BAD);
}

/* ---- keys ---------------------------------------------------------------------------- */

Test(recordings, keys)
{
	char kp[300];
	snprintf(kp, sizeof(kp), "%s/%s", state, DG_REC_KEY_FILE);
	struct stat st;
	cr_assert_eq(stat(kp, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0600);
	/* Loaded again: the same key. */
	struct dg_rec_key *k2;
	cr_assert_eq(dg_rec_key_load_or_create(state, &k2, &err), 0, "%s", err.msg);
	char a[65], b[65];
	dg_rec_key_id(key, a);
	dg_rec_key_id(k2, b);
	cr_assert_str_eq(a, b);
	dg_rec_key_free(k2);
	/* Public half: exported, loaded, verifies. */
	char *pem;
	cr_assert_eq(dg_rec_key_public_pem(key, &pem, &err), 0);
	cr_assert(strstr(pem, "-----BEGIN PUBLIC KEY-----"));
	cr_assert_null(strstr(pem, "PRIVATE"));
	char pp[300];
	snprintf(pp, sizeof(pp), "%s/pub.pem", base);
	FILE *f = fopen(pp, "w");
	fputs(pem, f);
	fclose(f);
	struct dg_rec_key *pub;
	cr_assert_eq(dg_rec_key_load_public(pp, &pub, &err), 0, "%s", err.msg);
	dg_rec_key_id(pub, b);
	cr_assert_str_eq(a, b);
	sample("k", true);
	cr_assert_eq(verify("k", pub), DG_REC_SEALED, "%s", vres.msg);
	dg_rec_key_free(pub);
	/* DG_REC_KEY_FILE_MAX: text before the PEM block is skipped by the PEM
	 * reader, so pad to exactly the limit, then one byte more. */
	for (int over = 0; over <= 1; over++) {
		size_t n = DG_REC_KEY_FILE_MAX - strlen(pem) + (size_t)over;
		f = fopen(pp, "w");
		for (size_t i = 0; i + 1 < n; i++)
			fputc('#', f);
		fputc('\n', f);
		fputs(pem, f);
		fclose(f);
		stat(pp, &st);
		cr_assert_eq((size_t)st.st_size, DG_REC_KEY_FILE_MAX + (size_t)over);
		int rc = dg_rec_key_load_public(pp, &pub, &err);
		if (!over) {
			cr_assert_eq(rc, 0, "%s", err.msg);
			dg_rec_key_free(pub);
		} else {
			cr_assert_eq(rc, -EFBIG, "%s", err.msg);
		}
	}
	free(pem);
	/* A private key as the public one, garbage, an EC key: refused. */
	cr_assert_neq(dg_rec_key_load_public(kp, &pub, &err), 0);
	f = fopen(pp, "w");
	fputs("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", f);
	fclose(f);
	cr_assert_eq(dg_rec_key_load_public(pp, &pub, &err), -EINVAL);
	EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	f = fopen(pp, "w");
	PEM_write_PUBKEY(f, ec);
	fclose(f);
	EVP_PKEY_free(ec);
	cr_assert_eq(dg_rec_key_load_public(pp, &pub, &err), -EINVAL);
	cr_assert(strstr(err.msg, "Ed25519"), "%s", err.msg);
	/* A private key others can read is refused, never replaced. */
	chmod(kp, 0640);
	cr_assert_eq(dg_rec_key_load_or_create(state, &k2, &err), -EPERM);
	cr_assert(strstr(err.msg, "0600"), "%s", err.msg);
	chmod(kp, 0600);
	/* A symlinked key file is refused. */
	char moved[300];
	snprintf(moved, sizeof(moved), "%s/key-elsewhere.pem", base);
	rename(kp, moved);
	symlink(moved, kp);
	cr_assert_eq(dg_rec_key_load(state, &k2, &err), -ELOOP);
	unlink(kp);
	/* Missing: load says so, load_or_create makes a new one. */
	cr_assert_eq(dg_rec_key_load(state, &k2, &err), -ENOENT);
	cr_assert_eq(dg_rec_key_load_or_create(state, &k2, &err), 0);
	dg_rec_key_id(k2, b);
	cr_assert_str_neq(a, b);
	dg_rec_key_free(k2);
	cr_assert_eq(dg_rec_key_load_or_create("/nonexistent", &k2, &err), -ENOENT);
}

/* ---- the commands ------------------------------------------------------------------------ */

static int run(const char *const *argv, struct dg_run *r)
{
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 60, -1, r), 0);
	return r->exit_code;
}

Test(recordings, verify_and_key_commands)
{
	sample("c1", true);
	sample("c2", false);
	char c1[300], c2[300];
	snprintf(c1, sizeof(c1), "%s/c1", root);
	snprintf(c2, sizeof(c2), "%s/c2", root);
	struct dg_run r;
	char pub[300];
	snprintf(pub, sizeof(pub), "%s/pub.pem", base);
	/* deskgate key prints the public PEM (stdout) and the id (stderr). */
	const char *k[] = { DG_BIN, "key", "--state-dir", state, NULL };
	cr_assert_eq(run(k, &r), 0, "%s", r.err);
	cr_assert(strstr(r.out, "-----BEGIN PUBLIC KEY-----"), "%s", r.out);
	char id[65];
	dg_rec_key_id(key, id);
	cr_assert(strstr(r.err, id), "%s", r.err);
	FILE *f = fopen(pub, "w");
	fputs(r.out, f);
	fclose(f);
	dg_run_free(&r);
	char empty[300];
	snprintf(empty, sizeof(empty), "%s/empty", base);
	mkdir(empty, 0700);
	const char *k2[] = { DG_BIN, "key", "--state-dir", empty, NULL };
	cr_assert_eq(run(k2, &r), 1);
	cr_assert(strstr(r.err, "--create"), "%s", r.err);
	dg_run_free(&r);
	const char *k3[] = { DG_BIN, "key", "--state-dir", empty, "--create", NULL };
	cr_assert_eq(run(k3, &r), 0, "%s", r.err);
	dg_run_free(&r);
	const char *k4[] = { DG_BIN, "key", NULL };
	cr_assert_eq(run(k4, &r), 2);
	dg_run_free(&r);

	/* verify: 0 sealed; with the public key file or the state dir. */
	const char *v1[] = { DG_BIN, "verify", "--key", pub, c1, NULL };
	cr_assert_eq(run(v1, &r), 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, ": sealed: verified: 8 events"), "%s", r.out);
	dg_run_free(&r);
	const char *v2[] = { DG_BIN, "verify", "--state-dir", state, "--json", c1, NULL };
	cr_assert_eq(run(v2, &r), 0, "%s%s", r.out, r.err);
	json_t *j = json_loads(r.out, 0, NULL);
	cr_assert_not_null(j, "%s", r.out);
	cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "sealed");
	cr_assert(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	dg_run_free(&r);
	/* 1 without a key (the seal is not checked). */
	const char *v3[] = { DG_BIN, "verify", c1, NULL };
	cr_assert_eq(run(v3, &r), 1);
	cr_assert(strstr(r.out, "no key given"), "%s", r.out);
	dg_run_free(&r);
	/* 1 unsealed, naming where the chain ends. */
	const char *v4[] = { DG_BIN, "verify", "--key", pub, c2, NULL };
	cr_assert_eq(run(v4, &r), 1);
	cr_assert(strstr(r.out, "unsealed: chain and frames intact up to seq 7"), "%s", r.out);
	cr_assert(strstr(r.out, "not sealed"), "%s", r.out);
	dg_run_free(&r);
	/* 1 tampered, naming the seq. */
	struct lines ls;
	read_lines(events_path("c1"), &ls);
	char *t = ls.l[3];
	ls.l[3] = ls.l[4];
	ls.l[4] = t;
	write_lines(events_path("c1"), ls.l, ls.n);
	free_lines(&ls);
	cr_assert_eq(run(v1, &r), 1);
	cr_assert(strstr(r.out, "bad: seq 4:"), "%s", r.out);
	dg_run_free(&r);
	/* 2 usage and unloadable keys. */
	const char *u1[] = { DG_BIN, "verify", NULL };
	cr_assert_eq(run(u1, &r), 2);
	dg_run_free(&r);
	const char *u2[] = { DG_BIN, "verify", "--key", pub, "--state-dir", state, c1, NULL };
	cr_assert_eq(run(u2, &r), 2);
	dg_run_free(&r);
	const char *u3[] = { DG_BIN, "verify", "--key", "/nonexistent.pem", c1, NULL };
	cr_assert_eq(run(u3, &r), 2);
	dg_run_free(&r);
	const char *u4[] = { DG_BIN, "verify", "--bogus", c1, NULL };
	cr_assert_eq(run(u4, &r), 2);
	dg_run_free(&r);
	const char *u5[] = { DG_BIN, "verify", "/nonexistent", NULL };
	cr_assert_eq(run(u5, &r), 1);
	dg_run_free(&r);
}
