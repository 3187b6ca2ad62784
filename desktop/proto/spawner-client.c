/* The gateway's side of the spawner's channel (desktop/proto/proto.h):
 * typed requests out (spawner-msg.c encodes them), replies and events back,
 * and the exec result as the exec action's JSON. The spawner itself is
 * desktop/spawner/spawner.c, which also forks it (dg_spawner_start).
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "desktop/proto/proto.h"

/* Numbers m, encodes and sends it: its number or a negative errno. */
static int send_msg(struct dg_spawner *sp, struct dg_spawn_msg *m, struct dg_err *err)
{
	if (sp->next_req >= INT32_MAX)
		return dg_err_set(err, -EOVERFLOW, "spawner: out of request numbers");
	m->req = sp->next_req + 1;
	uint8_t *buf = malloc(DG_SEQ_MAX);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "spawner: out of memory");
	size_t len;
	struct dg_err why = {{0}};
	int r = dg_spawn_encode(m, buf, DG_SEQ_MAX, &len, &why);
	if (r) {
		free(buf);
		return dg_err_set(err, r, "spawner: %s", why.msg);
	}
	r = dg_seq_send(sp->fd, (const char *)buf, len, NULL, 0);
	free(buf);
	if (r)
		return dg_err_set(err, r, "spawner: sending a request: %s", strerror(-r));
	sp->next_req++;
	return (int)m->req;
}

/* The session id into m, or -EINVAL. */
static int set_session(struct dg_spawn_msg *m, const char *session, struct dg_err *err)
{
	if (!session || !dg_session_id_valid(session))
		return dg_err_set(err, -EINVAL, "spawner: not a session id");
	snprintf(m->session, sizeof(m->session), "%s", session);
	return 0;
}

int dg_spawner_create(struct dg_spawner *sp, const char *session, enum dg_profile profile,
		      int width, int height, const struct dg_limits *limits, bool strict,
		      struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_CREATE};
	if (set_session(&m, session, err) != 0)
		return -EINVAL;
	if (width < 0 || height < 0)
		return dg_err_set(err, -EINVAL, "spawner: create: size %dx%d", width, height);
	m.u.create.profile = profile;
	m.u.create.width = (uint32_t)width;
	m.u.create.height = (uint32_t)height;
	m.u.create.strict = strict;
	m.u.create.limits = *limits;
	return send_msg(sp, &m, err);
}

int dg_spawner_destroy(struct dg_spawner *sp, const char *session, struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_DESTROY};
	if (set_session(&m, session, err) != 0)
		return -EINVAL;
	return send_msg(sp, &m, err);
}

int dg_spawner_started(struct dg_spawner *sp, const char *session, struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_STARTED};
	if (set_session(&m, session, err) != 0)
		return -EINVAL;
	return send_msg(sp, &m, err);
}

int dg_spawner_pool(struct dg_spawner *sp, int xterm, int browser, const struct dg_limits *limits,
		    bool strict, struct dg_err *err)
{
	if (xterm < 0 || browser < 0)
		return dg_err_set(err, -EINVAL, "spawner: pool: xterm and browser must be 0..%d",
				  DG_SPAWNER_POOL_MAX);
	struct dg_spawn_msg m = {.type = DG_SPAWN_POOL};
	m.u.pool.xterm = (uint32_t)xterm;
	m.u.pool.browser = (uint32_t)browser;
	m.u.pool.strict = strict;
	m.u.pool.limits = *limits;
	return send_msg(sp, &m, err);
}

int dg_spawner_egress(struct dg_spawner *sp, struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_EGRESS};
	return send_msg(sp, &m, err);
}

int dg_spawner_exec(struct dg_spawner *sp, const char *session, const char *const *argv,
		    size_t argc, const char *stdin_data, size_t stdin_len, long long timeout_ms,
		    struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_EXEC};
	if (set_session(&m, session, err) != 0)
		return -EINVAL;
	if (argc < 1 || argc > DG_EXEC_ARGV_MAX)
		return dg_err_set(err, -EINVAL, "spawner: exec: argv must be 1 to %d strings",
				  DG_EXEC_ARGV_MAX);
	if (stdin_len > DG_EXEC_STDIN_MAX)
		return dg_err_set(err, -EINVAL, "spawner: exec: stdin must be at most %d bytes",
				  DG_EXEC_STDIN_MAX);
	m.u.exec.argc = (uint32_t)argc;
	for (size_t i = 0; i < argc; i++)
		m.u.exec.argv[i] = argv[i];
	m.u.exec.stdin_data = stdin_data;
	m.u.exec.stdin_len = (uint32_t)stdin_len;
	m.u.exec.timeout_ms = timeout_ms;
	return send_msg(sp, &m, err);
}

int dg_spawner_upload_check(struct dg_spawner *sp, const char *session, const char *const *paths,
			    size_t n, struct dg_err *err)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_UPLOAD_CHECK};
	if (set_session(&m, session, err) != 0)
		return -EINVAL;
	if (!paths || n < 1 || n > DG_UPLOAD_PATHS_MAX)
		return dg_err_set(err, -EINVAL, "spawner: upload check: 1 to %d paths, not %zu",
				  DG_UPLOAD_PATHS_MAX, n);
	for (size_t i = 0; i < n; i++) {
		if (!paths[i] ||
		    !dg_upload_path_valid(paths[i], strnlen(paths[i], DG_UPLOAD_PATH_MAX + 1)))
			return dg_err_set(err, -EINVAL, "spawner: upload check: paths[%zu] is not an "
					  "absolute, canonical path of at most %d bytes without "
					  "control characters", i, DG_UPLOAD_PATH_MAX);
		m.u.upload_check.paths[i] = paths[i];
	}
	m.u.upload_check.n = (uint32_t)n;
	return send_msg(sp, &m, err);
}

static const char *file_kind(uint32_t type)
{
	switch (type) {
	case S_IFDIR: return "a directory";
	case S_IFIFO: return "a FIFO";
	case S_IFSOCK: return "a socket";
	case S_IFCHR: return "a character device";
	case S_IFBLK: return "a block device";
	default: return "something else";
	}
}

void dg_upload_reason(const struct dg_upload_file *f, const char *path, char *buf, size_t len)
{
	if (!len)
		return;
	/* The component at fault: the first `at` bytes of the path asked. */
	size_t plen = path ? strlen(path) : 0;
	int at = (int)(f->at < plen ? f->at : plen);
	const char *p = path ? path : "";
	switch (f->verdict) {
	case DG_UPLOAD_OK:
		snprintf(buf, len, "ok (%llu bytes)", (unsigned long long)f->size);
		break;
	case DG_UPLOAD_MISSING:
		snprintf(buf, len, "no such file or directory: %.*s", at, p);
		break;
	case DG_UPLOAD_SYMLINK:
		snprintf(buf, len, "a symbolic link at %.*s (an upload follows none)", at, p);
		break;
	case DG_UPLOAD_NOT_REGULAR:
		snprintf(buf, len, "not a regular file (%s)", file_kind(f->detail));
		break;
	case DG_UPLOAD_OUTSIDE_SCRATCH:
		snprintf(buf, len, "outside the session's scratch space (/tmp, /home/user, /dev/shm)");
		break;
	case DG_UPLOAD_BROWSER_FILES:
		snprintf(buf, len, "the browser's own files (%.*s)", at, p);
		break;
	case DG_UPLOAD_TOO_LARGE:
		snprintf(buf, len, "too large: %llu bytes, at most %llu", (unsigned long long)f->size,
			 (unsigned long long)DG_UPLOAD_FILE_MAX);
		break;
	case DG_UPLOAD_UNREADABLE:
		if (at)
			snprintf(buf, len, "not readable by the session's user (%.*s may not be "
				 "searched)", at, p);
		else
			snprintf(buf, len, "not readable by the session's user");
		break;
	case DG_UPLOAD_ERROR:
		snprintf(buf, len, "%s%s%.*s", strerror((int)f->detail), at ? ": " : "", at, p);
		break;
	default:
		snprintf(buf, len, "unknown verdict %u", (unsigned)f->verdict);
		break;
	}
}

int dg_spawner_recv(struct dg_spawner *sp, struct dg_spawn_msg *m, int *fds, int *nfds,
		    struct dg_err *err)
{
	char *buf = malloc(DG_SEQ_MAX + 1);
	if (!buf)
		return dg_err_set(err, -ENOMEM, "spawner: out of memory");
	size_t len;
	*nfds = 0;
	int r = dg_seq_recv(sp->fd, buf, DG_SEQ_MAX + 1, &len, fds, nfds, err);
	if (r == 1 && dg_spawn_decode((const uint8_t *)buf, len, *nfds, m, err) != 0) {
		r = -EPROTO;
		/* A request is no reply: the gateway's own messages never come back. */
	} else if (r == 1 && m->type < DG_SPAWN_CREATED) {
		r = dg_err_set(err, -EPROTO, "spawner: a request where a reply was due");
	}
	if (r < 0) {
		for (int i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
	}
	free(buf);
	return r;
}

/* Output as a JSON string: invalid UTF-8 becomes U+FFFD. */
static json_t *text_json(const char *p, size_t n)
{
	json_t *j = json_stringn(p, n);
	if (j)
		return j;
	char *out = malloc(n * 3 + 1);
	size_t o = 0;
	for (size_t i = 0; out && i < n;) {
		size_t l = 1;
		unsigned char c = (unsigned char)p[i];
		if (c >= 0xc2 && c <= 0xf4)
			l = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		json_t *t = i + l <= n && l > 1 ? json_stringn(p + i, l) : NULL;
		if (c < 0x80 && c != 0) {
			out[o++] = (char)c;
		} else if (t) {
			memcpy(out + o, p + i, l);
			o += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			l = 1;
		}
		json_decref(t);
		i += l;
	}
	j = out ? json_stringn(out, o) : json_string("");
	free(out);
	return j;
}

json_t *dg_exec_result_json(const struct dg_exec_result *r)
{
	/* The error text, like the output, may hold what the program named
	 * (a path): bytes, not necessarily UTF-8. */
	if (!r->ok)
		return json_pack("{s:b, s:i, s:o}", "ok", 0, "exit_code", (int)r->exit_code, "error",
				 text_json(r->error, strlen(r->error)));
	return json_pack("{s:b, s:i, s:o, s:o, s:b, s:b, s:b, s:I}", "ok", 1, "exit_code",
			 (int)r->exit_code, "stdout", text_json(r->out, r->out_len), "stderr",
			 text_json(r->errout, r->errout_len), "stdout_truncated",
			 (r->flags & DG_EXEC_RESULT_STDOUT_TRUNCATED) != 0, "stderr_truncated",
			 (r->flags & DG_EXEC_RESULT_STDERR_TRUNCATED) != 0, "timed_out",
			 (r->flags & DG_EXEC_RESULT_TIMED_OUT) != 0, "duration_ms",
			 (json_int_t)r->duration_ms);
}

void dg_spawner_stop(struct dg_spawner *sp)
{
	if (sp->fd >= 0)
		close(sp->fd);
	sp->fd = -1;
	if (sp->pid > 0) {
		/* Closing the channel makes it end every session and exit. */
		int st;
		for (int i = 0; i < 500; i++) {
			if (waitpid(sp->pid, &st, WNOHANG) == sp->pid) {
				sp->pid = -1;
				return;
			}
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, NULL);
		}
		kill(sp->pid, SIGKILL);
		waitpid(sp->pid, &st, 0);
		sp->pid = -1;
	}
}
