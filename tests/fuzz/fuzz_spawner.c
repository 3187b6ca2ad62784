/* fuzz_spawner: the spawner's typed channel (desktop/proto/proto.h,
 * spawner-msg.c): what the gateway (the less trusted peer) may send the
 * root process, what the spawner answers, and the exec result stream.
 *
 * Input: one selector byte (its value modulo 5), then
 *   0  one datagram and a descriptor count (the next byte % 4): the bytes
 *      go to dg_spawn_decode, the spawner's decoder. Decoded: encoding the
 *      result gives back exactly the input bytes (a canonical round trip),
 *      every field is within its cap (session ids, profile, sizes, limits,
 *      argv and stdin, upload paths and verdicts, request numbers), a
 *      request carries no descriptor.
 *      Refused: -EPROTO with a message.
 *   1  a valid message built from the bytes (type, request number, fields
 *      taken in order, strings cut at their caps), then mutated: the next
 *      bytes are (offset, xor) pairs applied to its encoding. The unmutated
 *      one must encode and decode to itself; every mutation decodes to a
 *      canonical message or is refused, as in 0.
 *   2  an exec result stream: dg_exec_result_decode; decoded, its header
 *      re-encodes to the input's first DG_EXEC_RESULT_HEADER bytes, its
 *      parts lie within the input, and dg_exec_result_json describes it.
 *   3  one datagram with descriptors (of /dev/null, the next byte % 5) sent
 *      on a real SOCK_SEQPACKET socketpair to dg_spawner_recv (the gateway
 *      reading the spawner): a reply is handed over with exactly its
 *      type's descriptors, anything else is refused with all of them
 *      closed.
 *   4  the spawner's dispatcher itself (dg_spawner_serve, desktop/spawner/
 *      spawner-priv.h) with its privileged effects replaced by recording
 *      stubs (no jail, desktop, worker, proxy or exec runner is started;
 *      the parameter makes every Nth start fail): a sequence of raw
 *      datagrams and valid requests (see dispatch below). Checked: every
 *      valid request gets exactly one reply, which decodes and answers it;
 *      a malformed datagram is refused with nothing sent and ends the
 *      connection; no more sessions than DG_SPAWNER_SESSIONS_MAX; an exec
 *      or an upload check only in a live session; when the connection
 *      ends, no desktop or worker is left.
 *
 * Checked: no crash, no leak, no descriptor left open, the round trips. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "fuzz_common.h"
#include "spawner-priv.h"

static uint8_t enc[DG_SEQ_MAX];
static int devnull = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		abort();
	return 0;
}

static bool has_session(enum dg_spawn_type t)
{
	return t == DG_SPAWN_CREATE || t == DG_SPAWN_DESTROY || t == DG_SPAWN_EXEC ||
	       t == DG_SPAWN_CREATED || t == DG_SPAWN_ENDED || t == DG_SPAWN_UPLOAD_CHECK ||
	       t == DG_SPAWN_UPLOAD_CHECKED || t == DG_SPAWN_STARTED;
}

/* What a decoded message must satisfy, and its canonical round trip. */
static void check_decoded(const struct dg_spawn_msg *m, const uint8_t *data, size_t size,
			  int nfds)
{
	DG_FUZZ_CHECK(size <= dg_spawn_max(m->type), "%zu bytes over the cap of type %u", size,
		      (unsigned)m->type);
	DG_FUZZ_CHECK(nfds == dg_spawn_fds(m->type), "type %u with %d descriptors",
		      (unsigned)m->type, nfds);
	bool request = m->type <= DG_SPAWN_REQUEST_LAST;
	DG_FUZZ_CHECK(request ? m->req > 0 : (m->type == DG_SPAWN_ENDED) == (m->req == 0),
		      "type %u numbered %u", (unsigned)m->type, (unsigned)m->req);
	if (has_session(m->type))
		DG_FUZZ_CHECK(dg_session_id_valid(m->session), "a session id that is not one");
	struct dg_err err = {{0}};
	if (m->type == DG_SPAWN_CREATE) {
		DG_FUZZ_CHECK(m->u.create.profile <= DG_PROFILE_BROWSER, "profile %u",
			      (unsigned)m->u.create.profile);
		DG_FUZZ_CHECK(m->u.create.width >= DG_DESKTOP_WIDTH_MIN &&
				      m->u.create.width <= DG_DESKTOP_WIDTH_MAX &&
				      m->u.create.height >= DG_DESKTOP_HEIGHT_MIN &&
				      m->u.create.height <= DG_DESKTOP_HEIGHT_MAX,
			      "size %ux%u", (unsigned)m->u.create.width, (unsigned)m->u.create.height);
		DG_FUZZ_CHECK(dg_limits_check(&m->u.create.limits, &err) == 0, "%s", err.msg);
	} else if (m->type == DG_SPAWN_POOL) {
		DG_FUZZ_CHECK(m->u.pool.xterm <= DG_SPAWNER_POOL_MAX &&
				      m->u.pool.browser <= DG_SPAWNER_POOL_MAX,
			      "pool %u/%u", (unsigned)m->u.pool.xterm, (unsigned)m->u.pool.browser);
		DG_FUZZ_CHECK(dg_limits_check(&m->u.pool.limits, &err) == 0, "%s", err.msg);
	} else if (m->type == DG_SPAWN_EXEC) {
		DG_FUZZ_CHECK(m->u.exec.argc >= 1 && m->u.exec.argc <= DG_EXEC_ARGV_MAX, "argc %u",
			      (unsigned)m->u.exec.argc);
		DG_FUZZ_CHECK(m->u.exec.argv[m->u.exec.argc] == NULL, "argv not NULL-terminated");
		DG_FUZZ_CHECK(m->u.exec.argv[0][0] != '\0', "an empty argv[0]");
		for (uint32_t i = 0; i < m->u.exec.argc; i++) {
			const char *a = m->u.exec.argv[i];
			DG_FUZZ_CHECK(a >= (const char *)data && a < (const char *)data + size,
				      "argv[%u] outside the datagram", (unsigned)i);
			DG_FUZZ_CHECK(strlen(a) <= DG_EXEC_ARG_MAX, "argv[%u] too long", (unsigned)i);
		}
		DG_FUZZ_CHECK(m->u.exec.stdin_len <= DG_EXEC_STDIN_MAX &&
				      m->u.exec.stdin_data[m->u.exec.stdin_len] == '\0',
			      "stdin of %u bytes", (unsigned)m->u.exec.stdin_len);
		DG_FUZZ_CHECK(m->u.exec.timeout_ms >= 0 &&
				      m->u.exec.timeout_ms <= DG_EXEC_TIMEOUT_MS_MAX,
			      "timeout %lld", (long long)m->u.exec.timeout_ms);
	} else if (m->type == DG_SPAWN_UPLOAD_CHECK) {
		DG_FUZZ_CHECK(m->u.upload_check.n >= 1 && m->u.upload_check.n <= DG_UPLOAD_PATHS_MAX,
			      "%u paths", (unsigned)m->u.upload_check.n);
		for (uint32_t i = 0; i < m->u.upload_check.n; i++) {
			const char *p = m->u.upload_check.paths[i];
			DG_FUZZ_CHECK(p >= (const char *)data && p < (const char *)data + size,
				      "paths[%u] outside the datagram", (unsigned)i);
			DG_FUZZ_CHECK(dg_upload_path_valid(p, strlen(p)), "paths[%u] is no upload path",
				      (unsigned)i);
		}
	} else if (m->type == DG_SPAWN_UPLOAD_CHECKED) {
		DG_FUZZ_CHECK(m->u.upload_checked.n >= 1 &&
				      m->u.upload_checked.n <= DG_UPLOAD_PATHS_MAX,
			      "%u files", (unsigned)m->u.upload_checked.n);
		for (uint32_t i = 0; i < m->u.upload_checked.n; i++) {
			const struct dg_upload_file *f = &m->u.upload_checked.files[i];
			DG_FUZZ_CHECK(f->verdict < DG_UPLOAD_VERDICT_COUNT && f->at <= DG_UPLOAD_PATH_MAX,
				      "files[%u]: verdict %u at %u", (unsigned)i, (unsigned)f->verdict,
				      (unsigned)f->at);
			DG_FUZZ_CHECK(f->verdict == DG_UPLOAD_OK ? f->size <= DG_UPLOAD_FILE_MAX
								 : f->verdict != DG_UPLOAD_TOO_LARGE ||
									   f->size > DG_UPLOAD_FILE_MAX,
				      "files[%u]: verdict %u, %llu bytes", (unsigned)i,
				      (unsigned)f->verdict, (unsigned long long)f->size);
			char why[DG_ERR_MAX];
			dg_upload_reason(f, "/tmp/a", why, sizeof(why));
			DG_FUZZ_CHECK(why[0], "no reason for verdict %u", (unsigned)f->verdict);
		}
	} else if (m->type == DG_SPAWN_ERROR || m->type == DG_SPAWN_ENDED) {
		DG_FUZZ_CHECK(strlen(m->u.text) <= DG_SPAWN_TEXT_MAX, "a text too long");
	} else if (m->type == DG_SPAWN_CHANNEL) {
		DG_FUZZ_CHECK(m->u.channel.pid > 0, "pid %d", (int)m->u.channel.pid);
	}
	size_t len = 0;
	int r = dg_spawn_encode(m, enc, sizeof(enc), &len, &err);
	DG_FUZZ_CHECK(r == 0, "a decoded message does not encode: %s", err.msg);
	DG_FUZZ_CHECK(len == size && memcmp(enc, data, size) == 0,
		      "not canonical: %zu bytes re-encode to %zu others", size, len);
}

/* Mode 0: the decoder on one datagram (an exact-size copy: a read past its
 * end trips ASan). */
static void decode_one(const uint8_t *data, size_t size, int nfds)
{
	if (size > DG_SEQ_MAX)
		return;
	uint8_t *copy = (uint8_t *)dg_fuzz_dup(data, size);
	struct dg_spawn_msg m;
	struct dg_err err = {{0}};
	int r = dg_spawn_decode(copy, size, nfds, &m, &err);
	if (r == 0)
		check_decoded(&m, copy, size, nfds);
	else
		DG_FUZZ_CHECK(r == -EPROTO && err.msg[0], "refused with %d and no message", r);
	free(copy);
}

/* A reader of the input's bytes, zero once they run out. */
struct src {
	const uint8_t *p;
	size_t n;
};

static uint32_t take(struct src *s, size_t k)
{
	uint32_t v = 0;
	for (size_t i = 0; i < k; i++) {
		v = v << 8 | (s->n ? *s->p : 0);
		if (s->n) {
			s->p++;
			s->n--;
		}
	}
	return v;
}

/* A string of [a-z0-9-] of at most max bytes, into out. */
static void take_id(struct src *s, char *out, size_t max)
{
	size_t n = 1 + take(s, 1) % max;
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789-";
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[take(s, 1) % (sizeof(alphabet) - 1)];
	out[n] = '\0';
}

static struct dg_limits take_limits(struct src *s)
{
	struct dg_limits l = {
		.memory_mb = DG_LIMIT_MEMORY_MB_MIN + take(s, 2) % 4096,
		.pids = DG_LIMIT_PIDS_MIN + take(s, 2) % (DG_LIMIT_PIDS_MAX - DG_LIMIT_PIDS_MIN + 1),
		.cpus = DG_LIMIT_CPUS_MIN + (double)(take(s, 2) % 1000) / 10.0,
		.exec_seconds = DG_LIMIT_SECONDS_MIN + take(s, 3) % DG_LIMIT_SECONDS_MAX,
		.session_seconds = DG_LIMIT_SECONDS_MIN + take(s, 3) % DG_LIMIT_SECONDS_MAX,
		.output_bytes = DG_LIMIT_OUTPUT_BYTES_MIN + take(s, 3),
		.exec_desktop = take(s, 1) & 1,
	};
	l.scratch_mb = DG_LIMIT_SCRATCH_MB_MIN + take(s, 2) % (l.memory_mb - 1);
	return l;
}

static char strings[DG_EXEC_ARGV_MAX][64];
static char stdin_buf[DG_EXEC_STDIN_MAX + 1];
static char upload_paths[DG_UPLOAD_PATHS_MAX][DG_UPLOAD_PATH_MAX + 1];

/* An upload path from the bytes: 1 to 4 components of 1 to 12 bytes (no
 * control character, none "." or ".."), or one of the browser's own. */
static void take_upload_path(struct src *s, char *out)
{
	static const char *const known[] = {"/tmp/a", "/home/user/.chromium/Local State",
					    "/tmp/.X11-unix/X0", "/dev/shm/.org.chromium.x"};
	uint32_t how = take(s, 1);
	if (how < 4 * 4) {
		snprintf(out, DG_UPLOAD_PATH_MAX + 1, "%s", known[how % 4]);
		return;
	}
	static const char alphabet[] = "abcz09._- ~\xc3\xa9";
	size_t n = 0, parts = 1 + take(s, 1) % 4;
	for (size_t p = 0; p < parts; p++) {
		size_t len = 1 + take(s, 1) % 12, start = n + 1;
		out[n++] = '/';
		for (size_t k = 0; k < len; k++)
			out[n++] = alphabet[take(s, 1) % (sizeof(alphabet) - 1)];
		if ((n - start == 1 && out[start] == '.') ||
		    (n - start == 2 && out[start] == '.' && out[start + 1] == '.'))
			out[n++] = 'a';
	}
	out[n] = '\0';
}

/* A valid answer for one path, of any verdict, from the bytes. */
static struct dg_upload_file take_upload_file(struct src *s)
{
	static const uint32_t kinds[] = {S_IFDIR, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK};
	struct dg_upload_file f = {.verdict = (enum dg_upload_verdict)(take(s, 1) %
								       DG_UPLOAD_VERDICT_COUNT)};
	switch (f.verdict) {
	case DG_UPLOAD_OK: f.size = take(s, 4) % (DG_UPLOAD_FILE_MAX + 1); break;
	case DG_UPLOAD_TOO_LARGE: f.size = DG_UPLOAD_FILE_MAX + 1 + take(s, 4); break;
	case DG_UPLOAD_NOT_REGULAR: f.detail = kinds[take(s, 1) % 5]; break;
	case DG_UPLOAD_MISSING:
	case DG_UPLOAD_SYMLINK:
	case DG_UPLOAD_BROWSER_FILES: f.at = 2 + take(s, 2) % (DG_UPLOAD_PATH_MAX - 1); break;
	case DG_UPLOAD_UNREADABLE: f.at = take(s, 1) ? 2 + take(s, 2) % (DG_UPLOAD_PATH_MAX - 1) : 0;
		break;
	case DG_UPLOAD_ERROR:
		f.at = take(s, 2) % (DG_UPLOAD_PATH_MAX + 1);
		if (f.at == 1)
			f.at = 0;
		f.detail = 1 + take(s, 2) % DG_UPLOAD_ERRNO_MAX;
		break;
	default: break;
	}
	return f;
}

/* A valid message from the bytes: of any type (n_types 13), or (n_types 7)
 * a request; session ids of at most id_max bytes. */
static void build_msg(struct src *src, struct dg_spawn_msg *mp, size_t n_types, size_t id_max)
{
	static const enum dg_spawn_type types[] = {
		DG_SPAWN_CREATE, DG_SPAWN_DESTROY, DG_SPAWN_POOL, DG_SPAWN_EGRESS, DG_SPAWN_EXEC,
		DG_SPAWN_UPLOAD_CHECK, DG_SPAWN_STARTED, DG_SPAWN_CREATED, DG_SPAWN_OK, DG_SPAWN_CHANNEL,
		DG_SPAWN_ERROR, DG_SPAWN_ENDED, DG_SPAWN_UPLOAD_CHECKED};
#define s (*src)
#define m (*mp)
	memset(&m, 0, sizeof(m));
	m.type = types[take(&s, 1) % n_types];
	m.req = m.type == DG_SPAWN_ENDED ? 0 : 1 + take(&s, 2);
	if (has_session(m.type))
		take_id(&s, m.session, id_max);
	switch (m.type) {
	case DG_SPAWN_CREATE:
		m.u.create.profile = (enum dg_profile)(take(&s, 1) & 1);
		m.u.create.width = DG_DESKTOP_WIDTH_MIN +
				   take(&s, 2) % (DG_DESKTOP_WIDTH_MAX - DG_DESKTOP_WIDTH_MIN + 1);
		m.u.create.height = DG_DESKTOP_HEIGHT_MIN +
				    take(&s, 2) % (DG_DESKTOP_HEIGHT_MAX - DG_DESKTOP_HEIGHT_MIN + 1);
		m.u.create.strict = take(&s, 1) & 1;
		m.u.create.limits = take_limits(&s);
		break;
	case DG_SPAWN_POOL:
		m.u.pool.xterm = take(&s, 1) % (DG_SPAWNER_POOL_MAX + 1);
		m.u.pool.browser = take(&s, 1) % (DG_SPAWNER_POOL_MAX + 1);
		m.u.pool.strict = take(&s, 1) & 1;
		m.u.pool.limits = take_limits(&s);
		break;
	case DG_SPAWN_EXEC: {
		m.u.exec.argc = 1 + take(&s, 1) % 16;
		for (uint32_t i = 0; i < m.u.exec.argc; i++) {
			size_t n = (i == 0) + take(&s, 1) % 32;
			for (size_t k = 0; k < n; k++)
				strings[i][k] = (char)(1 + take(&s, 1) % 255);
			strings[i][n] = '\0';
			m.u.exec.argv[i] = strings[i];
		}
		m.u.exec.stdin_len = take(&s, 1) % 64;
		for (uint32_t k = 0; k < m.u.exec.stdin_len; k++)
			stdin_buf[k] = (char)take(&s, 1);
		stdin_buf[m.u.exec.stdin_len] = '\0';
		m.u.exec.stdin_data = stdin_buf;
		m.u.exec.timeout_ms = take(&s, 3);
		break;
	}
	case DG_SPAWN_UPLOAD_CHECK:
		m.u.upload_check.n = 1 + take(&s, 1) % DG_UPLOAD_PATHS_MAX;
		for (uint32_t i = 0; i < m.u.upload_check.n; i++) {
			take_upload_path(&s, upload_paths[i]);
			m.u.upload_check.paths[i] = upload_paths[i];
		}
		break;
	case DG_SPAWN_UPLOAD_CHECKED:
		m.u.upload_checked.n = 1 + take(&s, 1) % DG_UPLOAD_PATHS_MAX;
		for (uint32_t i = 0; i < m.u.upload_checked.n; i++)
			m.u.upload_checked.files[i] = take_upload_file(&s);
		break;
	case DG_SPAWN_CREATED:
		m.u.created.slot = take(&s, 2);
		m.u.created.start_ms = take(&s, 3);
		m.u.created.warm = take(&s, 1) & 1;
		break;
	case DG_SPAWN_CHANNEL:
		m.u.channel.pid = 1 + (int32_t)(take(&s, 3) & 0x3fffff);
		break;
	case DG_SPAWN_ERROR:
	case DG_SPAWN_ENDED: {
		size_t n = take(&s, 2) % (DG_SPAWN_TEXT_MAX + 1);
		for (size_t k = 0; k < n; k++)
			m.u.text[k] = (char)(1 + take(&s, 1) % 255);
		m.u.text[n] = '\0';
		break;
	}
	default:
		break;
	}
#undef s
#undef m
}

/* Mode 1: a valid message from the bytes, then mutations of its encoding. */
static void build_and_mutate(const uint8_t *data, size_t size)
{
	struct src s = {data, size};
	struct dg_spawn_msg m;
	build_msg(&s, &m, 13, DG_SESSION_ID_MAX);
	size_t len = 0;
	struct dg_err err = {{0}};
	int r = dg_spawn_encode(&m, enc, sizeof(enc), &len, &err);
	DG_FUZZ_CHECK(r == 0, "a valid message of type %u does not encode: %s", (unsigned)m.type,
		      err.msg);
	static uint8_t msg[DG_SEQ_MAX];
	memcpy(msg, enc, len);
	struct dg_spawn_msg d;
	r = dg_spawn_decode(msg, len, dg_spawn_fds(m.type), &d, &err);
	DG_FUZZ_CHECK(r == 0, "a valid message of type %u does not decode: %s", (unsigned)m.type,
		      err.msg);
	check_decoded(&d, msg, len, dg_spawn_fds(m.type));
	DG_FUZZ_CHECK(strcmp(d.session, m.session) == 0, "the session changed");
	while (s.n >= 3) {
		size_t at = take(&s, 2) % len;
		uint8_t x = (uint8_t)take(&s, 1);
		msg[at] ^= x ? x : 1;
	}
	decode_one(msg, len, dg_spawn_fds(m.type));
}

/* Mode 2: an exec result stream. */
static void exec_result(const uint8_t *data, size_t size)
{
	uint8_t *copy = (uint8_t *)dg_fuzz_dup(data, size);
	struct dg_exec_result r;
	struct dg_err err = {{0}};
	int rc = dg_exec_result_decode(copy, size, &r, &err);
	if (rc == 0) {
		uint8_t hdr[DG_EXEC_RESULT_HEADER];
		DG_FUZZ_CHECK(dg_exec_result_header(&r, hdr, &err) == 0, "%s", err.msg);
		DG_FUZZ_CHECK(memcmp(hdr, copy, sizeof(hdr)) == 0, "the header is not canonical");
		DG_FUZZ_CHECK(r.out == (const char *)copy + DG_EXEC_RESULT_HEADER &&
				      r.errout == r.out + r.out_len &&
				      DG_EXEC_RESULT_HEADER + r.out_len + r.errout_len +
						      strlen(r.error) ==
					      size,
			      "the parts do not tile the stream");
		json_t *j = dg_exec_result_json(&r);
		DG_FUZZ_CHECK(j && json_is_object(j) &&
				      json_is_true(json_object_get(j, "ok")) == r.ok &&
				      json_integer_value(json_object_get(j, "exit_code")) == r.exit_code,
			      "the JSON result does not say what the stream did");
		json_decref(j);
	} else {
		DG_FUZZ_CHECK(rc == -EPROTO && err.msg[0], "refused with %d and no message", rc);
	}
	free(copy);
}

/* Mode 3: the gateway's reader over a real socketpair. */
static void recv_one(const uint8_t *data, size_t size, int nfds)
{
	if (size > DG_SEQ_MAX)
		size = DG_SEQ_MAX;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	int fds[DG_SEQ_FDS_MAX] = {devnull, devnull, devnull, devnull};
	if (dg_seq_send(sv[1], (const char *)data, size, fds, nfds) != 0) {
		close(sv[0]);
		close(sv[1]);
		return;
	}
	struct dg_spawner sp = {.pid = -1, .fd = sv[0]};
	struct dg_spawn_msg m;
	int got[DG_SEQ_FDS_MAX], ngot = -1;
	struct dg_err err = {{0}};
	int r = dg_spawner_recv(&sp, &m, got, &ngot, &err);
	if (r == 1) {
		DG_FUZZ_CHECK(m.type >= DG_SPAWN_CREATED, "a request handed over as a reply");
		DG_FUZZ_CHECK(ngot == dg_spawn_fds(m.type), "type %u with %d descriptors",
			      (unsigned)m.type, ngot);
		for (int i = 0; i < ngot; i++)
			close(got[i]);
	} else {
		if (r < 0)
			DG_FUZZ_CHECK(err.msg[0], "result %d without a message", r);
		DG_FUZZ_CHECK(ngot <= 0, "%d descriptors handed over with %d", ngot, r);
	}
	close(sv[0]);
	close(sv[1]);
}

/* ---- mode 4: the spawner's dispatcher with recording stubs ---------------- */

static int live_desktops, live_workers, replies, fail_every, starts;
static uint32_t current_req;

static int stub_send(int fd, const char *data, size_t len, const int *fds, int nfds)
{
	(void)fd;
	(void)fds;
	struct dg_spawn_msg m;
	struct dg_err err = {{0}};
	DG_FUZZ_CHECK(dg_spawn_decode((const uint8_t *)data, len, nfds, &m, &err) == 0,
		      "the spawner sent what does not decode: %s", err.msg);
	DG_FUZZ_CHECK(m.type >= DG_SPAWN_CREATED, "the spawner sent a request");
	DG_FUZZ_CHECK(m.type == DG_SPAWN_ENDED || m.req == current_req,
		      "a reply to %u while serving %u", (unsigned)m.req, (unsigned)current_req);
	/* ENDED is no answer: a session whose CPU quota could not be written
	 * ends while a request is served (spawner.c, cap_cpu). */
	replies += m.type != DG_SPAWN_ENDED;
	return 0;
}

static bool stub_fails(void)
{
	return fail_every && ++starts % fail_every == 0;
}

static int stub_desktop_start(const struct dg_desktop_spec *spec, struct dg_desktop *d,
			      struct dg_err *err)
{
	memset(d, 0, sizeof(*d));
	d->jail.pid = -1;
	d->jail.egress_fd = -1;
	if (stub_fails())
		return dg_err_set(err, -EAGAIN, "stub: no desktop this time");
	d->jail.pid = 100000 + live_desktops;
	d->jail.slot = (uint32_t)live_desktops;
	d->jail.egress_fd = dup(devnull);
	d->io.profile = spec->profile;
	d->io.width = spec->width;
	d->io.height = spec->height;
	live_desktops++;
	return 0;
}

static void stub_desktop_destroy(struct dg_desktop *d)
{
	if (d->jail.pid > 0) {
		live_desktops--;
		DG_FUZZ_CHECK(live_desktops >= 0, "a desktop destroyed twice");
	}
	d->jail.pid = -1;
	if (d->jail.egress_fd >= 0)
		close(d->jail.egress_fd);
	d->jail.egress_fd = -1;
}

static int stub_worker_start(struct dg_desktop_io *io, struct dg_worker *w, struct dg_err *err)
{
	(void)io;
	memset(w, 0, sizeof(*w));
	w->pid = -1;
	w->ctl = w->view = -1;
	if (stub_fails())
		return dg_err_set(err, -EAGAIN, "stub: no worker this time");
	w->pid = 200000 + live_workers;
	w->ctl = dup(devnull);
	w->view = dup(devnull);
	live_workers++;
	return 0;
}

static void stub_worker_stop(struct dg_worker *w)
{
	if (w->pid > 0) {
		live_workers--;
		DG_FUZZ_CHECK(live_workers >= 0, "a worker stopped twice");
	}
	w->pid = -1;
	if (w->ctl >= 0)
		close(w->ctl);
	w->ctl = -1;
	if (w->view >= 0)
		close(w->view);
	w->view = -1;
}

static int stub_egress_spawn(pid_t previous, struct dg_egress *e, struct dg_err *err)
{
	(void)previous;
	if (stub_fails())
		return dg_err_set(err, -EAGAIN, "stub: no proxy this time");
	e->pid = 300000;
	e->fd = dup(devnull);
	return 0;
}

static int stub_exec_start(const struct dg_jail *jail, const struct dg_limits *limits,
			   const struct dg_spawn_msg *req, int channel_fd, pid_t *pid, int *fd,
			   struct dg_err *err)
{
	(void)channel_fd;
	DG_FUZZ_CHECK(jail->pid > 0, "an exec in a session without a desktop");
	DG_FUZZ_CHECK(dg_limits_check(limits, err) == 0, "an exec under bad limits: %s", err->msg);
	DG_FUZZ_CHECK(req->type == DG_SPAWN_EXEC && req->u.exec.argc >= 1, "not an exec");
	if (stub_fails())
		return dg_err_set(err, -EAGAIN, "stub: no runner this time");
	*pid = 400000;
	*fd = dup(devnull);
	return 0;
}

static int stub_desktop_cap_cpu(struct dg_desktop *d, const struct dg_limits *lim,
				struct dg_err *err)
{
	(void)d;
	(void)lim;
	if (stub_fails())
		return dg_err_set(err, -EIO, "stub: the quota could not be written");
	return 0;
}

static int stub_upload_check(const struct dg_jail *j, const char *const *paths, uint32_t n,
			     struct dg_upload_check *out, struct dg_err *err)
{
	DG_FUZZ_CHECK(j->pid > 0, "an upload check in a session without a desktop");
	DG_FUZZ_CHECK(n >= 1 && n <= DG_UPLOAD_PATHS_MAX, "%u paths", (unsigned)n);
	for (uint32_t i = 0; i < n; i++)
		DG_FUZZ_CHECK(dg_upload_path_valid(paths[i], strlen(paths[i])),
			      "paths[%u] is no upload path", (unsigned)i);
	memset(out, 0, sizeof(*out));
	if (stub_fails())
		return dg_err_set(err, -ESRCH, "stub: the jail ended");
	/* The verdicts the lexical part gives, the rest "outside". */
	out->n = n;
	for (uint32_t i = 0; i < n; i++) {
		size_t at = dg_desktop_hidden_prefix(paths[i]);
		out->files[i].verdict = at ? DG_UPLOAD_BROWSER_FILES : DG_UPLOAD_OUTSIDE_SCRATCH;
		out->files[i].at = (uint32_t)at;
	}
	return 0;
}

static const struct dg_spawner_fx stub_fx = {
	.send = stub_send,
	.desktop_start = stub_desktop_start,
	.desktop_destroy = stub_desktop_destroy,
	.worker_start = stub_worker_start,
	.worker_stop = stub_worker_stop,
	.egress_spawn = stub_egress_spawn,
	.exec_start = stub_exec_start,
	.upload_check = stub_upload_check,
	.desktop_cap_cpu = stub_desktop_cap_cpu,
};

/* Records: a kind byte; even: a raw datagram [len u16][len bytes]; odd: a
 * valid request built from the bytes (session ids of 1 or 2 bytes, so that
 * requests name each other's sessions). Each goes to dg_spawner_serve: a
 * valid request is answered exactly once, anything else is refused with
 * nothing sent and ends the connection (the input). At the end every
 * session is ended: no desktop or worker is left. */
static void dispatch(const uint8_t *data, size_t size, uint8_t param)
{
	live_desktops = live_workers = starts = 0;
	fail_every = param % 8;
	struct dg_spawner_state *st = dg_spawner_state_new(-1, false, &stub_fx);
	if (!st)
		abort();
	struct src s = {data, size};
	static uint8_t raw[DG_SEQ_MAX];
	for (int n = 0; s.n > 0 && n < 4 * DG_SPAWNER_SESSIONS_MAX; n++) {
		size_t len;
		if (take(&s, 1) & 1) {
			struct dg_spawn_msg m;
			build_msg(&s, &m, 7, 2);
			if (dg_spawn_encode(&m, raw, sizeof(raw), &len, NULL) != 0)
				continue;
		} else {
			len = take(&s, 2) % (DG_SEQ_MAX + 1);
			if (len > s.n)
				len = s.n;
			memcpy(raw, s.p, len);
			s.p += len;
			s.n -= len;
		}
		uint32_t type = 0, req = 0;
		if (len >= 8) {
			memcpy(&type, raw, 4);
			memcpy(&req, raw + 4, 4);
		}
		current_req = req;
		replies = 0;
		struct dg_err err = {{0}};
		int r = dg_spawner_serve(st, raw, len, 0, &err);
		if (r != 0) {
			DG_FUZZ_CHECK(r == -EPROTO && err.msg[0] && replies == 0,
				      "refused with %d, %d replies: %s", r, replies, err.msg);
			break;
		}
		DG_FUZZ_CHECK(replies == 1, "%d replies to one request of type %u", replies,
			      (unsigned)type);
		DG_FUZZ_CHECK(live_desktops <= DG_SPAWNER_SESSIONS_MAX &&
				      live_workers <= live_desktops,
			      "%d desktops, %d workers", live_desktops, live_workers);
	}
	dg_spawner_state_free(st);
	DG_FUZZ_CHECK(live_desktops == 0 && live_workers == 0,
		      "%d desktops and %d workers left after the connection ended", live_desktops,
		      live_workers);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int fd0 = dg_fuzz_fd_begin();
	uint8_t mode = data[0] % 5, param = data[1];
	data += 2;
	size -= 2;
	if (mode == 0)
		decode_one(data, size, param % 4);
	else if (mode == 1)
		build_and_mutate(data, size);
	else if (mode == 2)
		exec_result(data, size);
	else if (mode == 3)
		recv_one(data, size, param % 5);
	else
		dispatch(data, size, param);
	dg_fuzz_fd_end(fd0);
	return 0;
}
