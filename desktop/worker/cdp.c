/* cdp: Chrome DevTools Protocol client over the pipe transport, the pipe
 * side (the page state is cdp-page.c; cdp-int-priv.h says what each holds).
 * See cdp-priv.h for the contract; this file keeps to it with:
 *  - an input side that splits the byte stream on NUL into a buffer that
 *    never grows past DG_CDP_MSG_MAX (an oversized message switches to a
 *    discarding state until its NUL), and parses each message with jansson
 *    (JSON_REJECT_DUPLICATES) after a scan that bounds its value count;
 *  - a fixed table of pending commands (id, session, kind, callback);
 *  - an output queue of at most DG_CDP_OUT_MAX bytes.
 * Nothing here blocks: both descriptors are O_NONBLOCK and every read or
 * write stops at EAGAIN.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "desktop/worker/cdp-int-priv.h"

/* ---- small helpers ---- */

void dg_cdp_set_last_error(struct dg_cdp *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

void dg_cdp_refuse(struct dg_cdp *c, const char *fmt, ...)
{
	c->stats.errors++;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

void dg_cdp_show(const char *in, char *out)
{
	const size_t cap = DG_CDP_ERRTEXT_MAX + 1;
	size_t o = 0;
	const unsigned char *s = (const unsigned char *)(in ? in : "");
	for (size_t i = 0; s[i]; i++) {
		if (o + 8 >= cap) {
			/* Cut before the last multibyte character, which may be
			 * incomplete, so the text stays UTF-8. */
			while (o > 0 && ((unsigned char)out[o - 1] & 0xc0) == 0x80)
				o--;
			if (o > 0 && (unsigned char)out[o - 1] >= 0xc0)
				o--;
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (s[i] < 0x20 || s[i] == 0x7f)
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", s[i]);
		else
			out[o++] = (char)s[i];
	}
	out[o] = '\0';
}

bool dg_cdp_valid_id(const json_t *v)
{
	if (!json_is_string(v))
		return false;
	size_t n = json_string_length(v);
	if (n == 0 || n > DG_CDP_ID_MAX)
		return false;
	const unsigned char *s = (const unsigned char *)json_string_value(v);
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f)
			return false;
	return true;
}

/* write() without SIGPIPE: in a process that ignores it (the worker), a
 * plain write; otherwise the signal is blocked around the call and, when
 * the call raised it, consumed before the mask is restored (unless one was
 * already pending, which belongs to someone else). Three system calls
 * more a command: measured on the CDP endpoint's round trip. */
static ssize_t write_nosigpipe(const struct dg_cdp *c, int fd, const void *buf, size_t len)
{
	if (c->sigpipe_ignored)
		return write(fd, buf, len);
	sigset_t pipe_set, old, pend;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigemptyset(&pend);
	sigpending(&pend);
	bool was_pending = sigismember(&pend, SIGPIPE) == 1;
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t n = write(fd, buf, len);
	int e = errno;
	if (n < 0 && e == EPIPE && !was_pending) {
		const struct timespec zero = {0, 0};
		while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
			;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return n;
}

/* ---- pending commands ---- */

static struct pending *pending_find(struct dg_cdp *c, int64_t id)
{
	for (int i = 0; i < DG_CDP_PENDING_MAX; i++)
		if (c->pending[i].id == id)
			return &c->pending[i];
	return NULL;
}

/* Removes the slot, then runs its completion (which may reuse the slot). */
static void complete(struct dg_cdp *c, struct pending *slot, int status, json_t *result,
		     const char *msg)
{
	struct pending p = *slot;
	memset(slot, 0, sizeof(*slot));
	c->n_pending--;
	dg_cdp_finish(c, p, status, result, msg);
}

static bool internal(enum kind k)
{
	return k == K_DISCOVER || k == K_ATTACH || k == K_PAGE_ENABLE || k == K_INFO;
}

/* Commands an owner's deadline (dg_cdp_fail_all) leaves alone: the
 * client's own, and the raw ones, whose waits are not the action's. */
static bool not_the_owners(enum kind k)
{
	return internal(k) || k == K_RAW;
}

int dg_cdp_fail_pending(struct dg_cdp *c, int64_t max_id, uint64_t page_gen, bool with_internal,
			int status, const char *msg)
{
	int n = 0;
	for (int i = 0; i < DG_CDP_PENDING_MAX; i++) {
		struct pending *p = &c->pending[i];
		if (p->id == 0 || p->id > max_id || (page_gen && p->page_gen != page_gen) ||
		    (!with_internal && not_the_owners(p->kind)))
			continue;
		complete(c, p, status, NULL, msg);
		n++;
	}
	return n;
}

void dg_cdp_call_start_done(struct dg_cdp *c, int status, const char *msg)
{
	dg_cdp_done_fn fn = c->start_done;
	c->start_done = NULL;
	if (fn)
		fn(c->start_arg, status, NULL, msg);
}

/* The pipe is gone: everything pending fails, nothing more is read. */
static int close_all(struct dg_cdp *c, struct dg_err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int close_all(struct dg_cdp *c, struct dg_err *err, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!c->closed) {
		c->closed = true;
		c->ready = false;
		c->frame_loading = false;
		c->nav_inflight = 0;
		c->info_inflight = c->info_again = c->load_refresh = false;
		dg_close_fd(&c->in_fd);
		dg_close_fd(&c->out_fd);
		free(c->msg);
		c->msg = NULL;
		c->msg_len = c->msg_cap = 0;
		c->out_off = c->out_len = 0;
		dg_cdp_fail_pending(c, INT64_MAX, 0, true, -EPIPE, msg);
		dg_cdp_call_start_done(c, -EPIPE, msg);
	}
	return dg_err_set(err, -EPIPE, "%s", msg);
}

/* ---- output ---- */

/* Writes queued bytes until the pipe is full. Returns 0 or -errno of the
 * failed write (EAGAIN is not a failure). */
static int flush_out(struct dg_cdp *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = write_nosigpipe(c, c->out_fd, c->out + c->out_off, c->out_len - c->out_off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		c->out_off += (size_t)n;
		c->stats.bytes_out += (uint64_t)n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/* Appends len bytes and a NUL to the queue, which must have room. */
static int queue_append(struct dg_cdp *c, const char *s, size_t len)
{
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	if (c->out_len + len + 1 > c->out_cap && c->out_off > 0) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + len + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		while (cap < c->out_len + len + 1)
			cap *= 2;
		if (cap > DG_CDP_OUT_MAX)
			cap = DG_CDP_OUT_MAX;
		char *p = realloc(c->out, cap);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, s, len);
	c->out[c->out_len + len] = '\0';
	c->out_len += len + 1;
	return 0;
}

int dg_cdp_send_cmd(struct dg_cdp *c, enum kind kind, const char *method, json_t *params,
		    const char *session_id, uint64_t page_gen, const char *target,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	int r;
	char *text = NULL;
	json_t *msg = NULL;
	if (c->closed) {
		r = dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
		goto out;
	}
	if (!method || !*method || strlen(method) > METHOD_MAX ||
	    (params && !json_is_object(params)) ||
	    (session_id && (!*session_id || strlen(session_id) > DG_CDP_ID_MAX))) {
		r = dg_err_set(err, -EINVAL, "cdp: bad command arguments");
		goto out;
	}
	if (c->n_pending >= DG_CDP_PENDING_MAX) {
		r = dg_err_set(err, -EBUSY, "cdp: %d commands already await replies",
			       DG_CDP_PENDING_MAX);
		goto out;
	}
	int64_t id = c->next_id;
	msg = json_pack("{sIss}", "id", (json_int_t)id, "method", method);
	if (!msg) {
		r = dg_err_set(err, -ENOMEM, "cdp: out of memory");
		goto out;
	}
	if (json_object_set_new(msg, "params", params ? params : json_object()) != 0 ||
	    (session_id && json_object_set_new(msg, "sessionId", json_string(session_id)) != 0)) {
		params = NULL;
		r = dg_err_set(err, -EINVAL, "cdp: %s: cannot build the command", method);
		goto out;
	}
	params = NULL;
	/* Compact and UTF-8: at most DG_CDP_OUT_MAX bytes, checked below. */
	text = json_dumps(msg, JSON_COMPACT);
	if (!text) {
		r = dg_err_set(err, -EINVAL, "cdp: %s: parameters are not valid JSON text", method);
		goto out;
	}
	size_t len = strlen(text);
	if (len + 1 > DG_CDP_OUT_MAX) {
		r = dg_err_set(err, -EMSGSIZE, "cdp: %s: %zu bytes is more than %u", method, len,
			       DG_CDP_OUT_MAX);
		goto out;
	}
	if (c->out_len - c->out_off + len + 1 > DG_CDP_OUT_MAX) {
		r = dg_err_set(err, -ENOBUFS, "cdp: %s: the write queue is full (%zu bytes)", method,
			       c->out_len - c->out_off);
		goto out;
	}
	struct pending *slot = pending_find(c, 0);
	if ((r = queue_append(c, text, len)) != 0) {
		r = dg_err_set(err, r, "cdp: out of memory");
		goto out;
	}
	c->next_id++;
	*slot = (struct pending){.id = id, .kind = kind, .page_gen = page_gen, .done = done,
				 .arg = arg};
	if (session_id)
		snprintf(slot->session, sizeof(slot->session), "%s", session_id);
	if (target)
		snprintf(slot->target, sizeof(slot->target), "%s", target);
	c->n_pending++;
	/* Write now when the pipe takes it: one poll round less. A failure other
	 * than EAGAIN stays for dg_cdp_handle_out, whose POLLERR/EPIPE closes
	 * the client, so no callback runs inside this call. */
	flush_out(c);
	r = 0;
out:
	json_decref(params);
	json_decref(msg);
	free(text);
	return r;
}

/* ---- input ---- */

/* Counts JSON values (opening brackets and commas outside strings, an
 * overestimate of what jansson will allocate per message divided by about
 * two) and stops early past the bound. */
size_t dg_cdp_nodes(const char *s, size_t n, size_t stop)
{
	size_t count = 0;
	bool in_str = false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (in_str) {
			if (ch == '\\')
				i++;
			else if (ch == '"')
				in_str = false;
		} else if (ch == '"') {
			in_str = true;
		} else if (ch == ',' || ch == '[' || ch == '{') {
			if (++count > stop)
				return count;
		}
	}
	return count;
}

static int hex4(const char *s)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char ch = s[i];
		int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
			: ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

/* Chromium writes a page's lone UTF-16 surrogates as \uD800-style escapes,
 * which no strict JSON parser takes (jansson refuses the whole message):
 * a page could make any reply or event carrying its strings vanish, and
 * the command waiting for that reply wait until its owner's bound. So each
 * escape of a lone surrogate becomes \uFFFD, in place (same length), before
 * parsing. Backslashes occur only inside strings in valid JSON, so escapes
 * are read in sequence from any backslash; invalid JSON stays invalid. */
static void mend_surrogates(char *s, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++) {
		if (s[i] != '\\')
			continue;
		if (s[i + 1] != 'u' || i + 6 > n) {
			i++; /* a two-character escape: skip its second character */
			continue;
		}
		int v = hex4(s + i + 2);
		bool high = v >= 0xd800 && v < 0xdc00, low = v >= 0xdc00 && v < 0xe000;
		if (high && i + 12 <= n && s[i + 6] == '\\' && s[i + 7] == 'u' &&
		    hex4(s + i + 8) >= 0xdc00 && hex4(s + i + 8) < 0xe000) {
			i += 11; /* a pair: one character */
			continue;
		}
		if (high || low)
			memcpy(s + i + 2, "fffd", 4);
		i += 5;
	}
}

static void on_reply(struct dg_cdp *c, json_t *msg, json_int_t id, const char *session)
{
	struct pending *p = id > 0 ? pending_find(c, id) : NULL;
	/* A command on a session the browser does not know (any more) is
	 * answered by the browser itself, without a sessionId: -32001 "Session
	 * with given id not found." (Chromium 156). Only the browser sends
	 * messages without one (a page's always carry its session), so such an
	 * error completes a raw command, whose owner passes it on. */
	bool gone = p && p->kind == K_RAW && p->session[0] && !session &&
		    json_is_object(json_object_get(msg, "error"));
	if (!p || (!gone && strcmp(p->session, session ? session : "") != 0)) {
		/* Not ours, already done, or answered on another session than the
		 * command's: a browser cannot complete a command of another page. */
		c->stats.unknown_ids++;
		return;
	}
	c->stats.replies++;
	if (p->kind == K_RAW) { /* the owner reads the reply, error or not */
		complete(c, p, 0, msg, NULL);
		return;
	}
	json_t *error = json_object_get(msg, "error"), *result = json_object_get(msg, "result");
	char text[DG_CDP_ERRTEXT_MAX + 1];
	if (error) {
		json_t *m = json_object_get(error, "message");
		dg_cdp_show(json_is_string(m) ? json_string_value(m) : "error without a message",
			    text);
		if (!json_is_object(error))
			c->stats.errors++;
		complete(c, p, -EREMOTEIO, NULL, text);
	} else if (!json_is_object(result)) {
		dg_cdp_refuse(c, "reply %lld without a result object", (long long)id);
		complete(c, p, -EPROTO, NULL, "malformed reply: no result object");
	} else {
		complete(c, p, 0, result, NULL);
	}
}

static void on_event(struct dg_cdp *c, const char *method, const char *session, json_t *params)
{
	if (!dg_cdp_on_browser_event(c, method, session, params))
		return;
	c->stats.events++;
	if (c->on_event)
		c->on_event(c->event_arg, method, session, params);
}

/* The id a reply starts with, {"id":N, (Chromium writes every reply's id
 * first), or 0. */
static int64_t leading_id(const char *s, size_t n)
{
	static const char pre[] = "{\"id\":";
	size_t k = sizeof(pre) - 1, i = k;
	int64_t id = 0;
	if (n <= k || memcmp(s, pre, k) != 0)
		return 0;
	for (; i < n && i < k + 15 && s[i] >= '0' && s[i] <= '9'; i++)
		id = id * 10 + (s[i] - '0');
	return i > k && i < n && s[i] == ',' ? id : 0;
}

/* A message that cannot be read (too long, too many values, not JSON):
 * when it is a reply whose command can be told from its first bytes,
 * that command ends with status and why (its caller, a CDP client's
 * command among them, would otherwise wait for ever). */
static void unreadable(struct dg_cdp *c, const char *s, size_t n, int status, const char *why)
{
	int64_t id = leading_id(s, n);
	struct pending *p = id > 0 ? pending_find(c, id) : NULL;
	char text[sizeof(c->last_error)];
	snprintf(text, sizeof(text), "%s", why); /* the callback may refuse in turn */
	if (p)
		complete(c, p, status, NULL, text);
}

/* One complete message (without its NUL), mended in place. */
static void process(struct dg_cdp *c, char *s, size_t n)
{
	c->stats.messages++;
	mend_surrogates(s, n);
	if (dg_cdp_nodes(s, n, DG_CDP_NODES_MAX) > DG_CDP_NODES_MAX) {
		dg_cdp_refuse(c, "message of %zu bytes with more than %d JSON values", n,
			      DG_CDP_NODES_MAX);
		unreadable(c, s, n, -E2BIG, c->last_error);
		return;
	}
	json_error_t je;
	json_t *msg = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
	if (!msg) {
		char what[DG_CDP_ERRTEXT_MAX + 1];
		dg_cdp_show(je.text, what);
		dg_cdp_refuse(c, "malformed JSON at byte %d: %s", je.position, what);
		unreadable(c, s, n, -EPROTO, c->last_error);
		return;
	}
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	json_t *sid = json_object_get(msg, "sessionId"), *params = json_object_get(msg, "params");
	if (!json_is_object(msg)) {
		dg_cdp_refuse(c, "message is not an object");
	} else if (sid && !dg_cdp_valid_id(sid)) {
		dg_cdp_refuse(c, "sessionId is not a short printable string");
	} else if (id) {
		if (!json_is_integer(id))
			dg_cdp_refuse(c, "reply id is not an integer");
		else
			on_reply(c, msg, json_integer_value(id), sid ? json_string_value(sid) : NULL);
	} else if (!json_is_string(method) || json_string_length(method) == 0 ||
		   json_string_length(method) > METHOD_MAX) {
		dg_cdp_refuse(c, "message has neither an integer id nor a method");
	} else if (params && !json_is_object(params)) {
		dg_cdp_refuse(c, "event params is not an object");
	} else {
		json_t *p = params ? json_incref(params) : json_object();
		if (p)
			on_event(c, json_string_value(method), sid ? json_string_value(sid) : NULL, p);
		json_decref(p);
	}
	json_decref(msg);
}

/* Splits n bytes of the stream on NUL into messages (mended in place). */
static void feed(struct dg_cdp *c, char *p, size_t n)
{
	while (n > 0) {
		char *nul = memchr(p, '\0', n);
		size_t seg = nul ? (size_t)(nul - p) : n;
		if (!c->discarding && c->msg_len + seg > DG_CDP_MSG_MAX) {
			c->discarding = true;
			c->stats.oversized++;
			c->stats.messages++;
			dg_cdp_refuse(c, "message longer than %u bytes discarded", DG_CDP_MSG_MAX);
			unreadable(c, c->msg_len ? c->msg : p, c->msg_len ? c->msg_len : seg, -EMSGSIZE,
				   c->last_error);
			free(c->msg);
			c->msg = NULL;
			c->msg_len = c->msg_cap = 0;
		}
		if (c->discarding) {
			/* skip */
		} else if (nul && c->msg_len == 0) {
			process(c, p, seg); /* whole message in this chunk: no copy */
		} else if (seg > 0 || nul) {
			if (c->msg_len + seg > c->msg_cap) {
				size_t cap = c->msg_cap ? c->msg_cap : READ_CHUNK;
				while (cap < c->msg_len + seg)
					cap *= 2;
				if (cap > DG_CDP_MSG_MAX)
					cap = DG_CDP_MSG_MAX;
				char *b = realloc(c->msg, cap);
				if (!b) { /* drop this message rather than the session */
					c->discarding = true;
					dg_cdp_refuse(c, "out of memory for a message of %zu bytes",
						      c->msg_len + seg);
					free(c->msg);
					c->msg = NULL;
					c->msg_len = c->msg_cap = 0;
					goto next;
				}
				c->msg = b;
				c->msg_cap = cap;
			}
			memcpy(c->msg + c->msg_len, p, seg);
			c->msg_len += seg;
			if (nul) {
				process(c, c->msg, c->msg_len);
				c->msg_len = 0;
				if (c->msg_cap > MSG_KEEP) {
					free(c->msg);
					c->msg = NULL;
					c->msg_cap = 0;
				}
			}
		}
	next:
		if (!nul)
			return;
		c->discarding = false;
		p = nul + 1;
		n -= seg + 1;
	}
}

/* ---- public API ---- */

struct dg_cdp *dg_cdp_new(int out_fd, int in_fd)
{
	struct dg_cdp *c = calloc(1, sizeof(*c));
	char *rbuf = malloc(READ_CHUNK);
	if (!c || !rbuf || out_fd < 0 || in_fd < 0 ||
	    fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK) != 0 ||
	    fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK) != 0) {
		free(c);
		free(rbuf);
		dg_close_fd(&out_fd);
		dg_close_fd(&in_fd);
		return NULL;
	}
	c->out_fd = out_fd;
	c->in_fd = in_fd;
	c->rbuf = rbuf;
	struct sigaction sa;
	c->sigpipe_ignored = sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
	c->next_id = 1;
	c->cur = -1;
	c->page_gen = 1;
	return c;
}

void dg_cdp_free(struct dg_cdp *c)
{
	if (!c)
		return;
	c->closed = true; /* completions below must not send anything */
	dg_cdp_fail_pending(c, INT64_MAX, 0, true, -ECANCELED, "the DevTools client was freed");
	dg_cdp_call_start_done(c, -ECANCELED, "the DevTools client was freed");
	dg_close_fd(&c->in_fd);
	dg_close_fd(&c->out_fd);
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++)
		dg_cdp_target_clear(&c->targets[i]);
	free(c->rbuf);
	free(c->msg);
	free(c->out);
	free(c);
}

void dg_cdp_set_event_handler(struct dg_cdp *c, dg_cdp_event_fn fn, void *arg)
{
	c->on_event = fn;
	c->event_arg = arg;
}

int dg_cdp_start(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	if (c->started)
		return dg_err_set(err, -EALREADY, "cdp: already started");
	int r = dg_cdp_send_cmd(c, K_DISCOVER, "Target.setDiscoverTargets",
				json_pack("{sb}", "discover", 1), NULL, 0, NULL, NULL, NULL, err);
	if (r == 0) {
		c->started = true;
		c->start_done = done;
		c->start_arg = arg;
	}
	return r;
}

void dg_cdp_pollfds(const struct dg_cdp *c, struct pollfd pfd[2])
{
	pfd[0] = (struct pollfd){.fd = c->closed ? -1 : c->in_fd, .events = POLLIN};
	pfd[1] = (struct pollfd){.fd = c->closed ? -1 : c->out_fd,
				 .events = c->out_len > c->out_off ? POLLOUT : 0};
}

int dg_cdp_handle(struct dg_cdp *c, const struct pollfd pfd[2], struct dg_err *err)
{
	if (c->closed)
		return dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
	if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
		int r = dg_cdp_handle_in(c, err);
		if (r)
			return r;
	}
	if (pfd[1].revents & (POLLERR | POLLHUP | POLLNVAL))
		return close_all(c, err, "cdp: the pipe to the browser closed");
	if (pfd[1].revents & POLLOUT)
		return dg_cdp_handle_out(c, err);
	return 0;
}

int dg_cdp_handle_in(struct dg_cdp *c, struct dg_err *err)
{
	if (c->closed)
		return dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
	size_t total = 0;
	while (total < DG_CDP_READ_BUDGET) {
		ssize_t n = read(c->in_fd, c->rbuf, READ_CHUNK);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return close_all(c, err, "cdp: reading the DevTools pipe: %s", strerror(errno));
		}
		if (n == 0) {
			if (c->msg_len > 0 || c->discarding)
				return close_all(c, err,
						 "cdp: the DevTools pipe closed in the middle of a "
						 "message (%zu bytes dropped)",
						 c->msg_len);
			return close_all(c, err, "cdp: the DevTools pipe closed (the browser is gone)");
		}
		total += (size_t)n;
		c->stats.bytes_in += (uint64_t)n;
		feed(c, c->rbuf, (size_t)n);
	}
	return 0;
}

int dg_cdp_handle_out(struct dg_cdp *c, struct dg_err *err)
{
	if (c->closed)
		return dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
	int r = flush_out(c);
	if (r)
		return close_all(c, err, "cdp: writing the DevTools pipe: %s", strerror(-r));
	return 0;
}

int dg_cdp_send(struct dg_cdp *c, const char *method, json_t *params, const char *session_id,
		dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return dg_cdp_send_cmd(c, K_USER, method, params, session_id, 0, NULL, done, arg, err);
}

int dg_cdp_send_raw(struct dg_cdp *c, const char *method, json_t *params, const char *session_id,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return dg_cdp_send_cmd(c, K_RAW, method, params, session_id, 0, NULL, done, arg, err);
}

int dg_cdp_fail_all(struct dg_cdp *c, int status, const char *message)
{
	return dg_cdp_fail_pending(c, c->next_id - 1, 0, false, status,
				   message ? message : "cancelled");
}

bool dg_cdp_closed(const struct dg_cdp *c) { return c->closed; }

int dg_cdp_n_pending(const struct dg_cdp *c) { return c->n_pending; }
size_t dg_cdp_queued(const struct dg_cdp *c) { return c->out_len - c->out_off; }
void dg_cdp_stats(const struct dg_cdp *c, struct dg_cdp_stats *s) { *s = c->stats; }
const char *dg_cdp_last_error(const struct dg_cdp *c) { return c->last_error; }
