/* The spawner's messages (desktop/proto/proto.h): the fixed-layout typed
 * requests and replies of its channel and the exec result stream, encoded
 * and decoded with the same rules. Used by both ends: the spawner (root)
 * decodes the gateway's requests with it, so it parses no JSON and touches
 * no allocator: every message is read in place, bounded by its type's cap.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "desktop/proto/proto.h"

_Static_assert(sizeof(struct dg_limits) == DG_SPAWN_LIMITS_SIZE,
	       "struct dg_limits is sent field by field: update DG_SPAWN_LIMITS_SIZE");

size_t dg_spawn_max(uint32_t type)
{
	switch (type) {
	case DG_SPAWN_CREATE: return DG_SPAWN_CREATE_MAX;
	case DG_SPAWN_DESTROY: return DG_SPAWN_DESTROY_MAX;
	case DG_SPAWN_STARTED: return DG_SPAWN_STARTED_MAX;
	case DG_SPAWN_POOL: return DG_SPAWN_POOL_MAX;
	case DG_SPAWN_EGRESS: return DG_SPAWN_EGRESS_MAX;
	case DG_SPAWN_EXEC: return DG_SPAWN_EXEC_MAX;
	case DG_SPAWN_CREATED: return DG_SPAWN_CREATED_MAX;
	case DG_SPAWN_OK: return DG_SPAWN_OK_MAX;
	case DG_SPAWN_CHANNEL: return DG_SPAWN_CHANNEL_MAX;
	case DG_SPAWN_ERROR: return DG_SPAWN_ERROR_MAX;
	case DG_SPAWN_ENDED: return DG_SPAWN_ENDED_MAX;
	case DG_SPAWN_UPLOAD_CHECK: return DG_SPAWN_UPLOAD_CHECK_MAX;
	case DG_SPAWN_UPLOAD_CHECKED: return DG_SPAWN_UPLOAD_CHECKED_MAX;
	default: return 0;
	}
}

int dg_spawn_fds(enum dg_spawn_type type)
{
	return type == DG_SPAWN_CREATED ? 3 : type == DG_SPAWN_CHANNEL ? 1 : 0;
}

static const char *type_name(uint32_t type)
{
	switch (type) {
	case DG_SPAWN_CREATE: return "create";
	case DG_SPAWN_DESTROY: return "destroy";
	case DG_SPAWN_STARTED: return "started";
	case DG_SPAWN_POOL: return "pool";
	case DG_SPAWN_EGRESS: return "egress";
	case DG_SPAWN_EXEC: return "exec";
	case DG_SPAWN_CREATED: return "created";
	case DG_SPAWN_OK: return "ok";
	case DG_SPAWN_CHANNEL: return "channel";
	case DG_SPAWN_ERROR: return "error";
	case DG_SPAWN_ENDED: return "ended";
	case DG_SPAWN_UPLOAD_CHECK: return "upload check";
	case DG_SPAWN_UPLOAD_CHECKED: return "upload checked";
	default: return "unknown";
	}
}

/* ---- the checks both directions share ------------------------------------ */

static bool is_request(uint32_t type)
{
	return type >= DG_SPAWN_CREATE && type <= DG_SPAWN_REQUEST_LAST;
}

/* A string field: n bytes (at most max, no NUL). */
static int check_text(const char *what, const char *s, size_t n, size_t max, struct dg_err *err)
{
	if (n > max)
		return dg_err_set(err, -EINVAL, "%s: %zu bytes, at most %zu", what, n, max);
	if (memchr(s, '\0', n))
		return dg_err_set(err, -EINVAL, "%s: holds a NUL byte", what);
	return 0;
}

static int check_session(const char *what, const char *id, struct dg_err *err)
{
	if (!dg_session_id_valid(id))
		return dg_err_set(err, -EINVAL, "%s: the session id is not [a-z0-9-]{1,%d}", what,
				  DG_SESSION_ID_MAX);
	return 0;
}

static int check_exec(const struct dg_spawn_msg *m, struct dg_err *err)
{
	if (m->u.exec.argc < 1 || m->u.exec.argc > DG_EXEC_ARGV_MAX)
		return dg_err_set(err, -EINVAL, "exec: argv must be 1 to %d strings",
				  DG_EXEC_ARGV_MAX);
	for (uint32_t i = 0; i < m->u.exec.argc; i++) {
		const char *a = m->u.exec.argv[i];
		if (!a || strnlen(a, DG_EXEC_ARG_MAX + 1) > DG_EXEC_ARG_MAX || (i == 0 && !a[0]))
			return dg_err_set(err, -EINVAL, "exec: argv[%u] is not a usable string "
					  "(1 to %d bytes for argv[0], at most %d for the others)",
					  (unsigned)i, DG_EXEC_ARG_MAX, DG_EXEC_ARG_MAX);
	}
	if (m->u.exec.stdin_len > DG_EXEC_STDIN_MAX)
		return dg_err_set(err, -EINVAL, "exec: stdin must be at most %d bytes",
				  DG_EXEC_STDIN_MAX);
	if (m->u.exec.stdin_len && !m->u.exec.stdin_data)
		return dg_err_set(err, -EINVAL, "exec: stdin has a length but no bytes");
	if (m->u.exec.timeout_ms < 0 || m->u.exec.timeout_ms > DG_EXEC_TIMEOUT_MS_MAX)
		return dg_err_set(err, -EINVAL, "exec: timeout_ms must be 0 to %lld",
				  (long long)DG_EXEC_TIMEOUT_MS_MAX);
	return 0;
}

bool dg_upload_path_valid(const char *path, size_t len)
{
	if (!path || len < 2 || len > DG_UPLOAD_PATH_MAX || path[0] != '/' || path[len - 1] == '/')
		return false;
	for (size_t i = 0; i < len;) {
		/* path[i] is a slash; the component after it runs to j: neither
		 * empty, "." nor "..", no control character (NUL included). */
		size_t j = i + 1;
		for (; j < len && path[j] != '/'; j++) {
			unsigned char c = (unsigned char)path[j];
			if (c < 0x20 || c == 0x7f)
				return false;
		}
		size_t n = j - i - 1;
		if (n == 0 || (n == 1 && path[i + 1] == '.') ||
		    (n == 2 && path[i + 1] == '.' && path[i + 2] == '.'))
			return false;
		i = j;
	}
	return true;
}

static int check_upload_check(const struct dg_spawn_msg *m, struct dg_err *err)
{
	uint32_t n = m->u.upload_check.n;
	if (n < 1 || n > DG_UPLOAD_PATHS_MAX)
		return dg_err_set(err, -EINVAL, "upload check: 1 to %d paths, not %u",
				  DG_UPLOAD_PATHS_MAX, (unsigned)n);
	for (uint32_t i = 0; i < n; i++) {
		const char *p = m->u.upload_check.paths[i];
		if (!p || !dg_upload_path_valid(p, strnlen(p, DG_UPLOAD_PATH_MAX + 1)))
			return dg_err_set(err, -EINVAL, "upload check: paths[%u] is not an absolute, "
					  "canonical path of at most %d bytes without control "
					  "characters", (unsigned)i, DG_UPLOAD_PATH_MAX);
	}
	return 0;
}

static bool upload_file_valid(const struct dg_upload_file *f)
{
	if (f->at > DG_UPLOAD_PATH_MAX || f->at == 1)
		return false;
	bool sized = f->verdict == DG_UPLOAD_OK || f->verdict == DG_UPLOAD_TOO_LARGE;
	if (!sized && f->size != 0)
		return false;
	if (f->verdict != DG_UPLOAD_NOT_REGULAR && f->verdict != DG_UPLOAD_ERROR && f->detail != 0)
		return false;
	switch (f->verdict) {
	case DG_UPLOAD_OK:
		return f->at == 0 && f->size <= DG_UPLOAD_FILE_MAX;
	case DG_UPLOAD_TOO_LARGE:
		return f->at == 0 && f->size > DG_UPLOAD_FILE_MAX;
	case DG_UPLOAD_NOT_REGULAR:
		return f->at == 0 && (f->detail == S_IFDIR || f->detail == S_IFCHR ||
				      f->detail == S_IFBLK || f->detail == S_IFIFO ||
				      f->detail == S_IFSOCK);
	case DG_UPLOAD_OUTSIDE_SCRATCH:
		return f->at == 0;
	case DG_UPLOAD_MISSING:
	case DG_UPLOAD_SYMLINK:
	case DG_UPLOAD_BROWSER_FILES:
		return f->at >= 2;
	case DG_UPLOAD_UNREADABLE:
		return true;
	case DG_UPLOAD_ERROR:
		return f->detail >= 1 && f->detail <= DG_UPLOAD_ERRNO_MAX;
	default:
		return false;
	}
}

static int check_upload_checked(const struct dg_spawn_msg *m, struct dg_err *err)
{
	const struct dg_upload_check *c = &m->u.upload_checked;
	if (c->n < 1 || c->n > DG_UPLOAD_PATHS_MAX)
		return dg_err_set(err, -EINVAL, "upload checked: 1 to %d files, not %u",
				  DG_UPLOAD_PATHS_MAX, (unsigned)c->n);
	for (uint32_t i = 0; i < c->n; i++) {
		const struct dg_upload_file *f = &c->files[i];
		if (!upload_file_valid(f))
			return dg_err_set(err, -EINVAL, "upload checked: files[%u] (verdict %u, at "
					  "%u, detail %u, size %llu) breaks the rules",
					  (unsigned)i, (unsigned)f->verdict, (unsigned)f->at,
					  (unsigned)f->detail, (unsigned long long)f->size);
	}
	return 0;
}

/* Every rule of m's type (but the strings' NULs, which only decoding can
 * see, and sizes, which encoding checks). */
static int check(const struct dg_spawn_msg *m, struct dg_err *err)
{
	if (!dg_spawn_max(m->type))
		return dg_err_set(err, -EINVAL, "unknown message type %u", (unsigned)m->type);
	if (is_request(m->type) ? m->req == 0 : (m->type == DG_SPAWN_ENDED) != (m->req == 0))
		return dg_err_set(err, -EINVAL, "%s: request number %u", type_name(m->type),
				  (unsigned)m->req);
	const char *what = type_name(m->type);
	switch (m->type) {
	case DG_SPAWN_CREATE:
		if (m->u.create.profile != DG_PROFILE_XTERM && m->u.create.profile != DG_PROFILE_BROWSER)
			return dg_err_set(err, -EINVAL, "create: unknown profile %u",
					  (unsigned)m->u.create.profile);
		if (m->u.create.width < DG_DESKTOP_WIDTH_MIN || m->u.create.width > DG_DESKTOP_WIDTH_MAX ||
		    m->u.create.height < DG_DESKTOP_HEIGHT_MIN ||
		    m->u.create.height > DG_DESKTOP_HEIGHT_MAX)
			return dg_err_set(err, -EINVAL, "create: size %ux%u is not within %dx%d to "
					  "%dx%d", (unsigned)m->u.create.width,
					  (unsigned)m->u.create.height, DG_DESKTOP_WIDTH_MIN,
					  DG_DESKTOP_HEIGHT_MIN, DG_DESKTOP_WIDTH_MAX,
					  DG_DESKTOP_HEIGHT_MAX);
		if (dg_limits_check(&m->u.create.limits, err) != 0)
			return -EINVAL;
		return check_session(what, m->session, err);
	case DG_SPAWN_DESTROY:
	case DG_SPAWN_STARTED:
	case DG_SPAWN_CREATED:
		if (m->type == DG_SPAWN_CREATED &&
		    (m->u.created.slot >= DG_JAIL_SLOTS || m->u.created.start_ms < 0))
			return dg_err_set(err, -EINVAL, "created: slot %u, start_ms %lld",
					  (unsigned)m->u.created.slot,
					  (long long)m->u.created.start_ms);
		return check_session(what, m->session, err);
	case DG_SPAWN_POOL:
		if (m->u.pool.xterm > DG_SPAWNER_POOL_MAX || m->u.pool.browser > DG_SPAWNER_POOL_MAX)
			return dg_err_set(err, -EINVAL, "pool: xterm and browser must be 0..%d",
					  DG_SPAWNER_POOL_MAX);
		return dg_limits_check(&m->u.pool.limits, err) != 0 ? -EINVAL : 0;
	case DG_SPAWN_EXEC:
		if (check_session(what, m->session, err) != 0)
			return -EINVAL;
		return check_exec(m, err);
	case DG_SPAWN_UPLOAD_CHECK:
		if (check_session(what, m->session, err) != 0)
			return -EINVAL;
		return check_upload_check(m, err);
	case DG_SPAWN_UPLOAD_CHECKED:
		if (check_session(what, m->session, err) != 0)
			return -EINVAL;
		return check_upload_checked(m, err);
	case DG_SPAWN_CHANNEL:
		if (m->u.channel.pid <= 0)
			return dg_err_set(err, -EINVAL, "channel: pid %d", (int)m->u.channel.pid);
		return 0;
	case DG_SPAWN_ENDED:
		if (check_session(what, m->session, err) != 0)
			return -EINVAL;
		/* fall through */
	case DG_SPAWN_ERROR:
		return check_text(what, m->u.text, strnlen(m->u.text, sizeof(m->u.text)),
				  DG_SPAWN_TEXT_MAX, err);
	default:
		return 0;
	}
}

/* ---- encoding ------------------------------------------------------------- */

struct out {
	uint8_t *p;
	size_t cap, len;
	bool over;
};

static void put(struct out *o, const void *v, size_t n)
{
	if (o->over || n > o->cap - o->len) {
		o->over = true;
		return;
	}
	if (n)
		memcpy(o->p + o->len, v, n);
	o->len += n;
}

static void put_u32(struct out *o, uint32_t v) { put(o, &v, 4); }
static void put_i64(struct out *o, int64_t v) { put(o, &v, 8); }

static void put_str(struct out *o, const char *s, size_t n)
{
	put_u32(o, (uint32_t)n);
	put(o, s, n);
	put(o, "", 1);
}

static void put_limits(struct out *o, const struct dg_limits *l)
{
	put(o, &l->memory_mb, 8);
	put_u32(o, l->pids);
	put_u32(o, l->exec_desktop);
	put(o, &l->cpus, 8);
	put_u32(o, l->exec_seconds);
	put_u32(o, l->session_seconds);
	put(o, &l->output_bytes, 8);
	put(o, &l->scratch_mb, 8);
}

int dg_spawn_encode(const struct dg_spawn_msg *m, uint8_t *buf, size_t cap, size_t *len,
		    struct dg_err *err)
{
	int r = check(m, err);
	if (r)
		return r;
	size_t max = dg_spawn_max(m->type);
	struct out o = {buf, cap < max ? cap : max, 0, false};
	put_u32(&o, m->type);
	put_u32(&o, m->req);
	switch (m->type) {
	case DG_SPAWN_CREATE:
		put_str(&o, m->session, strlen(m->session));
		put_u32(&o, (uint32_t)m->u.create.profile);
		put_u32(&o, m->u.create.width);
		put_u32(&o, m->u.create.height);
		put_u32(&o, m->u.create.strict);
		put_limits(&o, &m->u.create.limits);
		break;
	case DG_SPAWN_DESTROY:
	case DG_SPAWN_STARTED:
		put_str(&o, m->session, strlen(m->session));
		break;
	case DG_SPAWN_POOL:
		put_u32(&o, m->u.pool.xterm);
		put_u32(&o, m->u.pool.browser);
		put_u32(&o, m->u.pool.strict);
		put_limits(&o, &m->u.pool.limits);
		break;
	case DG_SPAWN_EXEC:
		put_str(&o, m->session, strlen(m->session));
		put_u32(&o, m->u.exec.argc);
		put_i64(&o, m->u.exec.timeout_ms);
		for (uint32_t i = 0; i < m->u.exec.argc; i++)
			put_str(&o, m->u.exec.argv[i], strlen(m->u.exec.argv[i]));
		put_str(&o, m->u.exec.stdin_len ? m->u.exec.stdin_data : "", m->u.exec.stdin_len);
		break;
	case DG_SPAWN_UPLOAD_CHECK:
		put_str(&o, m->session, strlen(m->session));
		put_u32(&o, m->u.upload_check.n);
		for (uint32_t i = 0; i < m->u.upload_check.n; i++)
			put_str(&o, m->u.upload_check.paths[i], strlen(m->u.upload_check.paths[i]));
		break;
	case DG_SPAWN_UPLOAD_CHECKED:
		put_str(&o, m->session, strlen(m->session));
		put_u32(&o, m->u.upload_checked.n);
		for (uint32_t i = 0; i < m->u.upload_checked.n; i++) {
			const struct dg_upload_file *f = &m->u.upload_checked.files[i];
			put_u32(&o, (uint32_t)f->verdict);
			put_u32(&o, f->at);
			put_u32(&o, f->detail);
			put(&o, &f->size, 8);
		}
		break;
	case DG_SPAWN_CREATED:
		put_str(&o, m->session, strlen(m->session));
		put_u32(&o, m->u.created.slot);
		put_i64(&o, m->u.created.start_ms);
		put_u32(&o, m->u.created.warm);
		break;
	case DG_SPAWN_CHANNEL:
		put_u32(&o, (uint32_t)m->u.channel.pid);
		break;
	case DG_SPAWN_ENDED:
		put_str(&o, m->session, strlen(m->session));
		/* fall through */
	case DG_SPAWN_ERROR:
		put_str(&o, m->u.text, strlen(m->u.text));
		break;
	default:
		break;
	}
	if (o.over)
		return dg_err_set(err, -E2BIG, "%s: the message is over its %zu bytes",
				  type_name(m->type), max);
	*len = o.len;
	return 0;
}

/* ---- decoding ------------------------------------------------------------- */

struct in {
	const uint8_t *p;
	size_t len, off;
	const char *bad; /* the first field that did not decode */
};

static bool get(struct in *i, void *v, size_t n, const char *what)
{
	if (i->bad)
		return false;
	if (n > i->len - i->off) {
		i->bad = what;
		return false;
	}
	memcpy(v, i->p + i->off, n);
	i->off += n;
	return true;
}

static uint32_t get_u32(struct in *i, const char *what)
{
	uint32_t v = 0;
	get(i, &v, 4, what);
	return v;
}

static int64_t get_i64(struct in *i, const char *what)
{
	int64_t v = 0;
	get(i, &v, 8, what);
	return v;
}

static bool get_bool(struct in *i, const char *what)
{
	uint32_t v = get_u32(i, what);
	if (v > 1 && !i->bad)
		i->bad = what;
	return v == 1;
}

/* A string in place: its n bytes hold no NUL (unless nul_ok) and its NUL
 * follows. */
static const char *get_bytes(struct in *i, size_t max, uint32_t *n, bool nul_ok, const char *what)
{
	uint32_t k = get_u32(i, what);
	if (i->bad)
		return NULL;
	if (k > max || k >= i->len - i->off || i->p[i->off + k] != '\0' ||
	    (!nul_ok && memchr(i->p + i->off, '\0', k))) {
		i->bad = what;
		return NULL;
	}
	const char *s = (const char *)i->p + i->off;
	i->off += (size_t)k + 1;
	if (n)
		*n = k;
	return s;
}

static const char *get_str(struct in *i, size_t max, uint32_t *n, const char *what)
{
	return get_bytes(i, max, n, false, what);
}

static void get_copy(struct in *i, char *dst, size_t max, const char *what)
{
	uint32_t n;
	const char *s = get_str(i, max, &n, what);
	dst[0] = '\0';
	if (s)
		memcpy(dst, s, (size_t)n + 1);
}

static void get_limits(struct in *i, struct dg_limits *l)
{
	get(i, &l->memory_mb, 8, "limits");
	l->pids = get_u32(i, "limits");
	l->exec_desktop = get_u32(i, "limits");
	get(i, &l->cpus, 8, "limits");
	l->exec_seconds = get_u32(i, "limits");
	l->session_seconds = get_u32(i, "limits");
	get(i, &l->output_bytes, 8, "limits");
	get(i, &l->scratch_mb, 8, "limits");
}

int dg_spawn_decode(const uint8_t *buf, size_t len, int nfds, struct dg_spawn_msg *m,
		    struct dg_err *err)
{
	memset(m, 0, sizeof(*m));
	struct in in = {buf, len, 0, NULL};
	uint32_t type = get_u32(&in, "header");
	m->req = get_u32(&in, "header");
	size_t max = dg_spawn_max(type);
	if (in.bad)
		return dg_err_set(err, -EPROTO, "spawner channel: a datagram of %zu bytes, shorter "
				  "than a header", len);
	if (!max)
		return dg_err_set(err, -EPROTO, "spawner channel: unknown message type %u",
				  (unsigned)type);
	m->type = (enum dg_spawn_type)type;
	const char *what = type_name(type);
	if (len > max)
		return dg_err_set(err, -EPROTO, "spawner channel: %s: %zu bytes, over its %zu", what,
				  len, max);
	if (nfds != dg_spawn_fds(m->type))
		return dg_err_set(err, -EPROTO, "spawner channel: %s: %d descriptors, not %d", what,
				  nfds, dg_spawn_fds(m->type));
	switch (m->type) {
	case DG_SPAWN_CREATE:
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		m->u.create.profile = (enum dg_profile)get_u32(&in, "profile");
		m->u.create.width = get_u32(&in, "width");
		m->u.create.height = get_u32(&in, "height");
		m->u.create.strict = get_bool(&in, "strict");
		get_limits(&in, &m->u.create.limits);
		break;
	case DG_SPAWN_DESTROY:
	case DG_SPAWN_STARTED:
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		break;
	case DG_SPAWN_POOL:
		m->u.pool.xterm = get_u32(&in, "xterm");
		m->u.pool.browser = get_u32(&in, "browser");
		m->u.pool.strict = get_bool(&in, "strict");
		get_limits(&in, &m->u.pool.limits);
		break;
	case DG_SPAWN_EXEC: {
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		uint32_t argc = get_u32(&in, "argc");
		m->u.exec.timeout_ms = get_i64(&in, "timeout_ms");
		if (!in.bad && (argc < 1 || argc > DG_EXEC_ARGV_MAX))
			in.bad = "argc";
		for (uint32_t k = 0; k < argc && !in.bad; k++)
			m->u.exec.argv[k] = get_str(&in, DG_EXEC_ARG_MAX, NULL, "argv");
		m->u.exec.argc = in.bad ? 0 : argc;
		m->u.exec.argv[m->u.exec.argc] = NULL;
		m->u.exec.stdin_data = get_bytes(&in, DG_EXEC_STDIN_MAX, &m->u.exec.stdin_len, true,
					       "stdin");
		break;
	}
	case DG_SPAWN_UPLOAD_CHECK: {
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		uint32_t n = get_u32(&in, "count");
		if (!in.bad && (n < 1 || n > DG_UPLOAD_PATHS_MAX))
			in.bad = "count";
		for (uint32_t k = 0; k < n && !in.bad; k++)
			m->u.upload_check.paths[k] = get_str(&in, DG_UPLOAD_PATH_MAX, NULL, "paths");
		m->u.upload_check.n = in.bad ? 0 : n;
		break;
	}
	case DG_SPAWN_UPLOAD_CHECKED: {
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		uint32_t n = get_u32(&in, "count");
		if (!in.bad && (n < 1 || n > DG_UPLOAD_PATHS_MAX))
			in.bad = "count";
		for (uint32_t k = 0; k < n && !in.bad; k++) {
			struct dg_upload_file *f = &m->u.upload_checked.files[k];
			f->verdict = (enum dg_upload_verdict)get_u32(&in, "files");
			f->at = get_u32(&in, "files");
			f->detail = get_u32(&in, "files");
			get(&in, &f->size, 8, "files");
		}
		m->u.upload_checked.n = in.bad ? 0 : n;
		break;
	}
	case DG_SPAWN_CREATED:
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		m->u.created.slot = get_u32(&in, "slot");
		m->u.created.start_ms = get_i64(&in, "start_ms");
		m->u.created.warm = get_bool(&in, "warm");
		break;
	case DG_SPAWN_CHANNEL:
		m->u.channel.pid = (int32_t)get_u32(&in, "pid");
		break;
	case DG_SPAWN_ENDED:
		get_copy(&in, m->session, DG_SESSION_ID_MAX, "session");
		/* fall through */
	case DG_SPAWN_ERROR:
		get_copy(&in, m->u.text, DG_SPAWN_TEXT_MAX, type == DG_SPAWN_ERROR ? "message"
										   : "reason");
		break;
	default:
		break;
	}
	if (in.bad)
		return dg_err_set(err, -EPROTO, "spawner channel: %s: its %s does not decode", what,
				  in.bad);
	if (in.off != len)
		return dg_err_set(err, -EPROTO, "spawner channel: %s: %zu bytes after its fields",
				  what, len - in.off);
	struct dg_err why = {{0}};
	if (check(m, &why) != 0)
		return dg_err_set(err, -EPROTO, "spawner channel: %s", why.msg);
	return 0;
}

/* ---- the exec result ------------------------------------------------------ */

static int check_result(const struct dg_exec_result *r, struct dg_err *err)
{
	if (r->exit_code < 0 || r->exit_code > 255)
		return dg_err_set(err, -EINVAL, "exec result: exit code %d", (int)r->exit_code);
	if (r->flags & ~(DG_EXEC_RESULT_STDOUT_TRUNCATED | DG_EXEC_RESULT_STDERR_TRUNCATED |
			 DG_EXEC_RESULT_TIMED_OUT))
		return dg_err_set(err, -EINVAL, "exec result: flags %#x", (unsigned)r->flags);
	if (r->duration_ms < 0)
		return dg_err_set(err, -EINVAL, "exec result: duration %lld ms",
				  (long long)r->duration_ms);
	size_t elen = strnlen(r->error, sizeof(r->error));
	if (elen > DG_SPAWN_TEXT_MAX)
		return dg_err_set(err, -EINVAL, "exec result: an error text over %d bytes",
				  DG_SPAWN_TEXT_MAX);
	if (r->ok ? elen != 0 : r->flags || r->out_len || r->errout_len)
		return dg_err_set(err, -EINVAL, "exec result: %s", r->ok ? "an error text with ok"
									: "output without ok");
	if ((r->out_len && !r->out) || (r->errout_len && !r->errout))
		return dg_err_set(err, -EINVAL, "exec result: output lengths without the output");
	return 0;
}

int dg_exec_result_header(const struct dg_exec_result *r, uint8_t hdr[DG_EXEC_RESULT_HEADER],
			  struct dg_err *err)
{
	int e = check_result(r, err);
	if (e)
		return e;
	struct out o = {hdr, DG_EXEC_RESULT_HEADER, 0, false};
	put_u32(&o, DG_EXEC_RESULT_MAGIC);
	put_u32(&o, r->ok);
	put_u32(&o, (uint32_t)r->exit_code);
	put_u32(&o, r->flags);
	put_i64(&o, r->duration_ms);
	put(&o, &r->out_len, 8);
	put(&o, &r->errout_len, 8);
	put_u32(&o, (uint32_t)strlen(r->error));
	return 0;
}

int dg_exec_result_decode(const uint8_t *buf, size_t len, struct dg_exec_result *r,
			  struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	struct in in = {buf, len, 0, NULL};
	uint32_t magic = get_u32(&in, "header");
	uint32_t ok = get_u32(&in, "header");
	r->exit_code = (int32_t)get_u32(&in, "header");
	r->flags = get_u32(&in, "header");
	r->duration_ms = get_i64(&in, "header");
	get(&in, &r->out_len, 8, "header");
	get(&in, &r->errout_len, 8, "header");
	uint32_t elen = get_u32(&in, "header");
	if (in.bad || magic != DG_EXEC_RESULT_MAGIC || ok > 1)
		return dg_err_set(err, -EPROTO, "exec result: %zu bytes without a valid header", len);
	r->ok = ok == 1;
	size_t rest = len - in.off;
	if (elen > DG_SPAWN_TEXT_MAX || r->out_len > rest || r->errout_len > rest - r->out_len ||
	    (uint64_t)elen != rest - r->out_len - r->errout_len)
		return dg_err_set(err, -EPROTO, "exec result: %zu bytes after the header do not "
				  "match its lengths", rest);
	r->out = (const char *)buf + in.off;
	r->errout = r->out + r->out_len;
	const char *etext = r->errout + r->errout_len;
	if (memchr(etext, '\0', elen))
		return dg_err_set(err, -EPROTO, "exec result: a NUL in its error text");
	memcpy(r->error, etext, elen);
	r->error[elen] = '\0';
	struct dg_err why = {{0}};
	if (check_result(r, &why) != 0)
		return dg_err_set(err, -EPROTO, "%s", why.msg);
	return 0;
}
