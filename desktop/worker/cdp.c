/* cdp: Chrome DevTools Protocol client over the pipe transport. See
 * cdp-priv.h for the contract; this file keeps to it with:
 *  - an input side that splits the byte stream on NUL into a buffer that
 *    never grows past DG_CDP_MSG_MAX (an oversized message switches to a
 *    discarding state until its NUL), and parses each message with jansson
 *    (JSON_REJECT_DUPLICATES) after a scan that bounds its value count;
 *  - a fixed table of pending commands (id, session, kind, callback);
 *  - a fixed table of page targets (id, URL, title, creation order);
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

#include "desktop/worker/cdp-priv.h"

#define READ_CHUNK (64u * 1024)
/* A message buffer grown past this is released after its message, so one
 * large reply does not pin megabytes for the session's life. */
#define MSG_KEEP (256u * 1024)
#define METHOD_MAX 128
#define LAST_ERROR_MAX 256

enum kind {
	K_USER,         /* dg_cdp_send: result handed over as is */
	K_NAVIGATE,     /* Page.navigate: errorText is a failure */
	K_RELOAD,       /* Page.reload */
	K_HIST_BACK,    /* Page.getNavigationHistory for back */
	K_HIST_FORWARD, /* ... for forward */
	K_HIST_GO,      /* Page.navigateToHistoryEntry */
	K_EVALUATE,     /* Runtime.evaluate: the RemoteObject, or the exception */
	K_DISCOVER,     /* Target.setDiscoverTargets (start) */
	K_ATTACH,       /* Target.attachToTarget for `target` */
	K_PAGE_ENABLE,  /* Page.enable on a fresh page session */
	K_INFO,         /* Target.getTargetInfo for the current page, by the client */
	K_REFRESH,      /* the same, asked for by the owner (dg_cdp_refresh) */
};

struct pending {
	int64_t id;                      /* 0: free slot */
	enum kind kind;
	char session[DG_CDP_ID_MAX + 1]; /* the session it was sent on; "" browser */
	uint64_t page_gen;               /* page session generation; 0: not page-bound */
	char target[DG_CDP_ID_MAX + 1];  /* K_ATTACH: the target */
	dg_cdp_done_fn done;
	void *arg;
};

struct target {
	bool used;
	bool attach_failed;              /* never try it again */
	char id[DG_CDP_ID_MAX + 1];
	char *url;                       /* "" when refused */
	char *title;
	uint64_t seq;                    /* creation order */
};

struct dg_cdp {
	int out_fd, in_fd;
	bool closed;

	/* input */
	char *rbuf;                      /* READ_CHUNK bytes */
	char *msg;                       /* a message split across reads */
	size_t msg_len, msg_cap;
	bool discarding;                 /* inside an oversized message */

	/* output */
	char *out;
	size_t out_off, out_len, out_cap;

	/* commands */
	int64_t next_id;
	struct pending pending[DG_CDP_PENDING_MAX];
	int n_pending;

	/* targets and the current page */
	struct target targets[DG_CDP_TARGETS_MAX];
	int n_targets;
	uint64_t target_seq;
	int cur;                          /* index in targets, -1: none */
	char prefer[DG_CDP_ID_MAX + 1];   /* dg_cdp_switch: attach this one next; "" */
	char session[DG_CDP_ID_MAX + 1];  /* its flattened session; "" */
	char main_frame[DG_CDP_ID_MAX + 1];
	uint64_t page_gen;                /* bumped for every new page session */
	bool started, attaching, ready;
	bool frame_loading;
	int nav_inflight;                 /* navigation commands awaiting replies */
	/* Title refreshes (Target.getTargetInfo): Chromium reports a title set
	 * after the commit (<title> parsed, document.title) in no event, so the
	 * client asks after loads and page commands. At most one in flight;
	 * triggers meanwhile ask once more after it. */
	bool info_inflight, info_again;
	bool load_refresh;                /* a load waits for its refresh: still loading */
	uint64_t changes, loads;

	dg_cdp_done_fn start_done;
	void *start_arg;
	dg_cdp_event_fn on_event;
	void *event_arg;

	struct dg_cdp_stats stats;
	char last_error[LAST_ERROR_MAX];
};

/* ---- small helpers ---- */

static void set_last_error(struct dg_cdp *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_last_error(struct dg_cdp *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

/* A refused message: counted, remembered for logs, otherwise ignored. */
static void refuse(struct dg_cdp *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refuse(struct dg_cdp *c, const char *fmt, ...)
{
	c->stats.errors++;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
}

/* Copies browser text into out (DG_CDP_ERRTEXT_MAX + 1 bytes) for a
 * callback or a log: printable ASCII and UTF-8 kept, control bytes escaped
 * as \xNN, cut (with "...") so that the result fits. */
static void show(const char *in, char *out)
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

/* A bounded identifier (targetId, sessionId) from the browser: a string of
 * 1..DG_CDP_ID_MAX printable ASCII bytes. */
static bool valid_id(const json_t *v)
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

/* write() without SIGPIPE: the signal is blocked around the call and, when
 * the call raised it, consumed before the mask is restored (unless one was
 * already pending, which belongs to someone else). */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t len)
{
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

static void finish(struct dg_cdp *c, struct pending p, int status, json_t *result, const char *msg);

/* Removes the slot, then runs its completion (which may reuse the slot). */
static void complete(struct dg_cdp *c, struct pending *slot, int status, json_t *result,
		     const char *msg)
{
	struct pending p = *slot;
	memset(slot, 0, sizeof(*slot));
	c->n_pending--;
	finish(c, p, status, result, msg);
}

static bool internal(enum kind k)
{
	return k == K_DISCOVER || k == K_ATTACH || k == K_PAGE_ENABLE || k == K_INFO;
}

/* Completes the pending commands with id <= max_id (those that existed when
 * the failure happened, not ones their callbacks sent since) that match
 * page_gen (0: all); the client's own (discovery, attach) only when
 * with_internal. */
static int fail_pending(struct dg_cdp *c, int64_t max_id, uint64_t page_gen, bool with_internal,
			int status, const char *msg)
{
	int n = 0;
	for (int i = 0; i < DG_CDP_PENDING_MAX; i++) {
		struct pending *p = &c->pending[i];
		if (p->id == 0 || p->id > max_id || (page_gen && p->page_gen != page_gen) ||
		    (!with_internal && internal(p->kind)))
			continue;
		complete(c, p, status, NULL, msg);
		n++;
	}
	return n;
}

static void call_start_done(struct dg_cdp *c, int status, const char *msg)
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
		fail_pending(c, INT64_MAX, 0, true, -EPIPE, msg);
		call_start_done(c, -EPIPE, msg);
	}
	return dg_err_set(err, -EPIPE, "%s", msg);
}

/* ---- output ---- */

/* Writes queued bytes until the pipe is full. Returns 0 or -errno of the
 * failed write (EAGAIN is not a failure). */
static int flush_out(struct dg_cdp *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = write_nosigpipe(c->out_fd, c->out + c->out_off, c->out_len - c->out_off);
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

/* The common part of every command. params is stolen. */
static int send_cmd(struct dg_cdp *c, enum kind kind, const char *method, json_t *params,
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

/* ---- targets and the current page ---- */

static void target_clear(struct target *t)
{
	free(t->url);
	free(t->title);
	memset(t, 0, sizeof(*t));
}

static int target_find(struct dg_cdp *c, const char *id)
{
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++)
		if (c->targets[i].used && strcmp(c->targets[i].id, id) == 0)
			return i;
	return -1;
}

/* The URL kept for a page: itself, or "" when longer than DG_CDP_URL_MAX or
 * holding control bytes (see cdp-priv.h: never cut). */
static char *keep_url(struct dg_cdp *c, const json_t *v)
{
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	bool ok = n <= DG_CDP_URL_MAX;
	for (size_t i = 0; ok && i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			ok = false;
	if (!ok) {
		set_last_error(c, "page URL refused (%zu bytes, or control bytes): reported as unknown",
			       n);
		return strdup("");
	}
	return strdup(s);
}

/* The title kept: cut to DG_CDP_TITLE_MAX bytes at a character boundary
 * (jansson has checked it is UTF-8), control bytes as spaces. */
static char *keep_title(const json_t *v)
{
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (n > DG_CDP_TITLE_MAX) {
		n = DG_CDP_TITLE_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	char *t = malloc(n + 1);
	if (!t)
		return NULL;
	for (size_t i = 0; i < n; i++)
		t[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? ' ' : s[i];
	t[n] = '\0';
	return t;
}

/* Picks and attaches the next current page when there is none (rule in
 * cdp-priv.h: the most recently created page target still tracked). */
static void maybe_attach(struct dg_cdp *c)
{
	if (c->closed || !c->started || c->cur >= 0 || c->attaching)
		return;
	int best = -1;
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++) {
		struct target *t = &c->targets[i];
		if (t->used && !t->attach_failed && (best < 0 || t->seq > c->targets[best].seq))
			best = i;
	}
	int want = c->prefer[0] ? target_find(c, c->prefer) : -1;
	c->prefer[0] = '\0';
	if (want >= 0 && !c->targets[want].attach_failed)
		best = want;
	if (best < 0)
		return;
	struct dg_err e;
	json_t *params = json_pack("{sssb}", "targetId", c->targets[best].id, "flatten", 1);
	int r = send_cmd(c, K_ATTACH, "Target.attachToTarget", params, NULL, 0,
			 c->targets[best].id, NULL, NULL, &e);
	if (r == 0)
		c->attaching = true;
	else /* retried at the next target event */
		set_last_error(c, "%s", e.msg);
}

/* Asks the browser for the current page's URL and title (see info_inflight).
 * for_load: the page's load is not over until the answer is in. */
static void request_info(struct dg_cdp *c, bool for_load)
{
	if (c->closed || c->cur < 0)
		return;
	c->load_refresh |= for_load;
	if (c->info_inflight) {
		c->info_again = true;
		return;
	}
	struct dg_err e;
	int r = send_cmd(c, K_INFO, "Target.getTargetInfo",
			 json_pack("{ss}", "targetId", c->targets[c->cur].id), NULL, c->page_gen, NULL,
			 NULL, NULL, &e);
	if (r == 0) {
		c->info_inflight = true;
	} else { /* never leave the page "loading" for a refresh that cannot run */
		c->load_refresh = false;
		set_last_error(c, "%s", e.msg);
	}
}

/* The current page's session is gone (its target destroyed, its session
 * detached): commands on it fail, and another page is picked. */
static void page_gone(struct dg_cdp *c, const char *why)
{
	uint64_t gen = c->page_gen;
	c->cur = -1;
	c->session[0] = c->main_frame[0] = '\0';
	c->ready = c->frame_loading = false;
	c->nav_inflight = 0;
	c->info_inflight = c->info_again = c->load_refresh = false;
	c->changes++;
	c->page_gen++; /* late replies of the old session no longer count */
	fail_pending(c, c->next_id - 1, gen, true, -ECONNRESET, why);
	maybe_attach(c);
}

/* Target.targetCreated / targetInfoChanged: params.targetInfo. */
static bool on_target_info(struct dg_cdp *c, json_t *params, bool created)
{
	json_t *info = json_object_get(params, "targetInfo");
	json_t *id = json_object_get(info, "targetId"), *type = json_object_get(info, "type");
	json_t *url = json_object_get(info, "url"), *title = json_object_get(info, "title");
	if (!json_is_object(info) || !valid_id(id) || !json_is_string(type) ||
	    !json_is_string(url) || !json_is_string(title)) {
		refuse(c, "targetInfo without targetId, type, url and title strings");
		return false;
	}
	if (strcmp(json_string_value(type), "page") != 0)
		return true; /* only pages are tracked: frames and workers cannot crowd them out */
	int i = target_find(c, json_string_value(id));
	if (i < 0) {
		if (!created)
			return true; /* a page we never saw (the table was full): stays untracked */
		for (i = 0; i < DG_CDP_TARGETS_MAX && c->targets[i].used; i++)
			;
		if (i == DG_CDP_TARGETS_MAX) {
			c->stats.targets_dropped++;
			set_last_error(c, "page target not tracked: %d already", DG_CDP_TARGETS_MAX);
			return true;
		}
		struct target *t = &c->targets[i];
		snprintf(t->id, sizeof(t->id), "%s", json_string_value(id));
		t->seq = ++c->target_seq;
		t->used = true;
		c->n_targets++;
	}
	struct target *t = &c->targets[i];
	char *u = keep_url(c, url), *ti = keep_title(title);
	if (!u || !ti) {
		free(u);
		free(ti);
		set_last_error(c, "out of memory");
		return true;
	}
	bool changed = !t->url || strcmp(t->url, u) != 0 || strcmp(t->title, ti) != 0;
	free(t->url);
	free(t->title);
	t->url = u;
	t->title = ti;
	if (changed && i == c->cur)
		c->changes++;
	maybe_attach(c);
	return true;
}

static bool on_target_destroyed(struct dg_cdp *c, json_t *params)
{
	json_t *id = json_object_get(params, "targetId");
	if (!valid_id(id)) {
		refuse(c, "Target.targetDestroyed without a targetId");
		return false;
	}
	int i = target_find(c, json_string_value(id));
	if (i < 0)
		return true;
	target_clear(&c->targets[i]);
	c->n_targets--;
	if (i == c->cur)
		page_gone(c, "the page was closed");
	else
		maybe_attach(c);
	return true;
}

static bool on_detached(struct dg_cdp *c, json_t *params)
{
	json_t *sid = json_object_get(params, "sessionId");
	if (!valid_id(sid)) {
		refuse(c, "Target.detachedFromTarget without a sessionId");
		return false;
	}
	if (c->cur >= 0 && strcmp(c->session, json_string_value(sid)) == 0)
		page_gone(c, "the page session was detached");
	return true;
}

/* Page.frameStartedLoading / frameStoppedLoading / frameNavigated /
 * navigatedWithinDocument on the current page's session. The end of a load
 * is the main frame's frameStoppedLoading, which Chromium sends right after
 * Page.loadEventFired (measured: 0.1-2 ms): ending it at loadEventFired as
 * well would open a window in which the page reads as loaded while its
 * title is not read yet. */
static bool on_page_event(struct dg_cdp *c, const char *method, json_t *params)
{
	if (strcmp(method, "Page.frameNavigated") == 0) {
		json_t *frame = json_object_get(params, "frame");
		json_t *id = json_object_get(frame, "id");
		if (!json_is_object(frame) || !valid_id(id)) {
			refuse(c, "Page.frameNavigated without frame.id");
			return false;
		}
		/* The main frame has no parent; its id is the target's in Chromium,
		 * but follow what the browser says. */
		if (!json_object_get(frame, "parentId"))
			snprintf(c->main_frame, sizeof(c->main_frame), "%s", json_string_value(id));
		return true;
	}
	bool start = strcmp(method, "Page.frameStartedLoading") == 0;
	bool stop = strcmp(method, "Page.frameStoppedLoading") == 0;
	bool within = strcmp(method, "Page.navigatedWithinDocument") == 0;
	if (!start && !stop && !within)
		return true;
	json_t *id = json_object_get(params, "frameId");
	if (!valid_id(id)) {
		refuse(c, "%s without a frameId", method);
		return false;
	}
	if (strcmp(json_string_value(id), c->main_frame) != 0)
		return true;
	if (within) { /* history.pushState, #fragment: a new URL, no load */
		request_info(c, false);
		return true;
	}
	c->frame_loading = start;
	if (stop) {
		c->loads++;
		request_info(c, true);
	}
	return true;
}

/* ---- completions ---- */

/* A page-bound navigation command ended: the in-flight count drops, but only
 * for the session that is still current (page_gone reset it for others). */
static void nav_done(struct dg_cdp *c, const struct pending *p)
{
	if (p->page_gen == c->page_gen && c->nav_inflight > 0)
		c->nav_inflight--;
}

static void call_done(const struct pending *p, int status, json_t *result, const char *msg)
{
	if (p->done)
		p->done(p->arg, status, result, status == 0 ? NULL : (msg ? msg : "error"));
}

/* Back/forward, second step: the entry before/after the current one. */
static void history_step(struct dg_cdp *c, const struct pending *p, json_t *result)
{
	bool back = p->kind == K_HIST_BACK;
	json_t *cur = json_object_get(result, "currentIndex");
	json_t *entries = json_object_get(result, "entries");
	if (!json_is_integer(cur) || !json_is_array(entries) || json_integer_value(cur) < 0 ||
	    (size_t)json_integer_value(cur) >= json_array_size(entries)) {
		c->stats.errors++;
		call_done(p, -EPROTO, NULL, "malformed navigation history");
		return;
	}
	json_int_t want = json_integer_value(cur) + (back ? -1 : 1);
	if (want < 0 || (size_t)want >= json_array_size(entries)) {
		call_done(p, -ENOENT, NULL, back ? "no previous page" : "no next page");
		return;
	}
	json_t *entry_id = json_object_get(json_array_get(entries, (size_t)want), "id");
	if (!json_is_integer(entry_id)) {
		c->stats.errors++;
		call_done(p, -EPROTO, NULL, "malformed navigation history entry");
		return;
	}
	if (p->page_gen != c->page_gen || !c->ready) {
		call_done(p, -ECONNRESET, NULL, "the page went away");
		return;
	}
	struct dg_err e;
	int r = send_cmd(c, K_HIST_GO, "Page.navigateToHistoryEntry",
			 json_pack("{sI}", "entryId", json_integer_value(entry_id)), c->session,
			 c->page_gen, NULL, p->done, p->arg, &e);
	if (r != 0)
		call_done(p, r, NULL, e.msg);
	else
		c->nav_inflight++;
}

static void attach_done(struct dg_cdp *c, const struct pending *p, int status, json_t *result)
{
	if (c->closed || status == -ECANCELED)
		return;
	c->attaching = false;
	int i = target_find(c, p->target);
	json_t *sid = json_object_get(result, "sessionId");
	if (status != 0 || !valid_id(sid)) {
		if (status == 0)
			refuse(c, "Target.attachToTarget reply without a sessionId");
		if (i >= 0)
			c->targets[i].attach_failed = true;
		maybe_attach(c);
		return;
	}
	if (i < 0) { /* destroyed meanwhile; its session detaches by itself */
		maybe_attach(c);
		return;
	}
	c->cur = i;
	c->page_gen++;
	snprintf(c->session, sizeof(c->session), "%s", json_string_value(sid));
	snprintf(c->main_frame, sizeof(c->main_frame), "%s", c->targets[i].id);
	c->ready = c->frame_loading = false;
	c->nav_inflight = 0;
	c->changes++;
	struct dg_err e;
	if (send_cmd(c, K_PAGE_ENABLE, "Page.enable", NULL, c->session, c->page_gen, NULL, NULL,
		     NULL, &e) != 0) {
		set_last_error(c, "%s", e.msg);
		c->targets[i].attach_failed = true;
		page_gone(c, e.msg);
	}
}

/* A reply to Target.getTargetInfo: the target's info, as in the events. */
static bool apply_info(struct dg_cdp *c, const struct pending *p, json_t *result)
{
	json_t *id = json_object_get(json_object_get(result, "targetInfo"), "targetId");
	if (!json_is_string(id) || c->cur < 0 ||
	    strcmp(json_string_value(id), c->targets[c->cur].id) != 0 || p->page_gen != c->page_gen) {
		refuse(c, "Target.getTargetInfo answered for another target");
		return false;
	}
	return on_target_info(c, result, false);
}

static void finish(struct dg_cdp *c, struct pending p, int status, json_t *result, const char *msg)
{
	char text[DG_CDP_ERRTEXT_MAX + 1];
	/* A script may have set the title; a navigation that failed may load
	 * nothing that would refresh it. Successful navigations refresh at their
	 * load (frameStoppedLoading), one round trip instead of two. */
	bool failed = status != 0 || json_is_string(json_object_get(result, "errorText"));
	if ((p.kind == K_EVALUATE ||
	     (failed && (p.kind == K_NAVIGATE || p.kind == K_RELOAD || p.kind == K_HIST_GO))) &&
	    p.page_gen == c->page_gen && !c->closed)
		request_info(c, false);
	switch (p.kind) {
	case K_USER:
		call_done(&p, status, result, msg);
		return;
	case K_NAVIGATE:
		nav_done(c, &p);
		if (status == 0) {
			json_t *et = json_object_get(result, "errorText");
			if (json_is_string(et) && json_string_length(et) > 0) {
				show(json_string_value(et), text);
				call_done(&p, -EREMOTEIO, result, text);
				return;
			}
		}
		call_done(&p, status, result, msg);
		return;
	case K_RELOAD:
	case K_HIST_GO:
		nav_done(c, &p);
		call_done(&p, status, result, msg);
		return;
	case K_HIST_BACK:
	case K_HIST_FORWARD:
		if (status != 0)
			call_done(&p, status, result, msg);
		else
			history_step(c, &p, result);
		return;
	case K_EVALUATE: {
		if (status != 0) {
			call_done(&p, status, result, msg);
			return;
		}
		json_t *exc = json_object_get(result, "exceptionDetails");
		if (exc) {
			json_t *d = json_object_get(json_object_get(exc, "exception"), "description");
			if (!json_is_string(d))
				d = json_object_get(exc, "text");
			show(json_is_string(d) ? json_string_value(d) : "exception", text);
			call_done(&p, -EREMOTEIO, result, text);
			return;
		}
		json_t *obj = json_object_get(result, "result");
		if (!json_is_object(obj)) {
			c->stats.errors++;
			call_done(&p, -EPROTO, NULL, "Runtime.evaluate reply without a result object");
			return;
		}
		call_done(&p, 0, obj, NULL);
		return;
	}
	case K_DISCOVER:
		if (status == 0)
			maybe_attach(c);
		else if (status != -EPIPE && status != -ECANCELED)
			call_start_done(c, status, msg);
		return;
	case K_ATTACH:
		attach_done(c, &p, status, result);
		return;
	case K_INFO:
		if (p.page_gen != c->page_gen || c->closed)
			return; /* page_gone/close_all reset the refresh state */
		c->info_inflight = false;
		if (status == 0)
			apply_info(c, &p, result);
		if (c->info_again) {
			c->info_again = false;
			request_info(c, false);
		} else {
			c->load_refresh = false;
		}
		return;
	case K_REFRESH:
		if (status == 0 && !apply_info(c, &p, result)) {
			call_done(&p, -EPROTO, NULL, "malformed Target.getTargetInfo reply");
			return;
		}
		call_done(&p, status, status == 0 ? json_object_get(result, "targetInfo") : NULL, msg);
		return;
	case K_PAGE_ENABLE:
		if (p.page_gen != c->page_gen || c->closed)
			return;
		if (status != 0) {
			set_last_error(c, "Page.enable failed: %s", msg ? msg : "");
			if (c->cur >= 0)
				c->targets[c->cur].attach_failed = true;
			page_gone(c, "Page.enable failed");
			return;
		}
		c->ready = true;
		request_info(c, false); /* the info at attach time may be old */
		call_start_done(c, 0, NULL);
		return;
	}
}

/* ---- input ---- */

/* Counts JSON values (opening brackets and commas outside strings, an
 * overestimate of what jansson will allocate per message divided by about
 * two) and stops early past the bound. */
static bool too_many_nodes(const char *s, size_t n)
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
			if (++count > DG_CDP_NODES_MAX)
				return true;
		}
	}
	return false;
}

static void on_reply(struct dg_cdp *c, json_t *msg, json_int_t id, const char *session)
{
	struct pending *p = id > 0 ? pending_find(c, id) : NULL;
	if (!p || strcmp(p->session, session ? session : "") != 0) {
		/* Not ours, already done, or answered on another session than the
		 * command's: a browser cannot complete a command of another page. */
		c->stats.unknown_ids++;
		return;
	}
	c->stats.replies++;
	json_t *error = json_object_get(msg, "error"), *result = json_object_get(msg, "result");
	char text[DG_CDP_ERRTEXT_MAX + 1];
	if (error) {
		json_t *m = json_object_get(error, "message");
		show(json_is_string(m) ? json_string_value(m) : "error without a message", text);
		if (!json_is_object(error))
			c->stats.errors++;
		complete(c, p, -EREMOTEIO, NULL, text);
	} else if (!json_is_object(result)) {
		refuse(c, "reply %lld without a result object", (long long)id);
		complete(c, p, -EPROTO, NULL, "malformed reply: no result object");
	} else {
		complete(c, p, 0, result, NULL);
	}
}

static void on_event(struct dg_cdp *c, const char *method, const char *session, json_t *params)
{
	bool ok = true;
	if (!session) {
		if (strcmp(method, "Target.targetCreated") == 0)
			ok = on_target_info(c, params, true);
		else if (strcmp(method, "Target.targetInfoChanged") == 0)
			ok = on_target_info(c, params, false);
		else if (strcmp(method, "Target.targetDestroyed") == 0)
			ok = on_target_destroyed(c, params);
		else if (strcmp(method, "Target.detachedFromTarget") == 0)
			ok = on_detached(c, params);
	} else if (c->cur >= 0 && strcmp(session, c->session) == 0 &&
		   strncmp(method, "Page.", 5) == 0) {
		ok = on_page_event(c, method, params);
	}
	if (!ok)
		return;
	c->stats.events++;
	if (c->on_event)
		c->on_event(c->event_arg, method, session, params);
}

/* One complete message (without its NUL). */
static void process(struct dg_cdp *c, const char *s, size_t n)
{
	c->stats.messages++;
	if (too_many_nodes(s, n)) {
		refuse(c, "message of %zu bytes with more than %d JSON values", n, DG_CDP_NODES_MAX);
		return;
	}
	json_error_t je;
	json_t *msg = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
	if (!msg) {
		char what[DG_CDP_ERRTEXT_MAX + 1];
		show(je.text, what);
		refuse(c, "malformed JSON at byte %d: %s", je.position, what);
		return;
	}
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	json_t *sid = json_object_get(msg, "sessionId"), *params = json_object_get(msg, "params");
	if (!json_is_object(msg)) {
		refuse(c, "message is not an object");
	} else if (sid && !valid_id(sid)) {
		refuse(c, "sessionId is not a short printable string");
	} else if (id) {
		if (!json_is_integer(id))
			refuse(c, "reply id is not an integer");
		else
			on_reply(c, msg, json_integer_value(id), sid ? json_string_value(sid) : NULL);
	} else if (!json_is_string(method) || json_string_length(method) == 0 ||
		   json_string_length(method) > METHOD_MAX) {
		refuse(c, "message has neither an integer id nor a method");
	} else if (params && !json_is_object(params)) {
		refuse(c, "event params is not an object");
	} else {
		json_t *p = params ? json_incref(params) : json_object();
		if (p)
			on_event(c, json_string_value(method), sid ? json_string_value(sid) : NULL, p);
		json_decref(p);
	}
	json_decref(msg);
}

/* Splits n bytes of the stream on NUL into messages. */
static void feed(struct dg_cdp *c, const char *p, size_t n)
{
	while (n > 0) {
		const char *nul = memchr(p, '\0', n);
		size_t seg = nul ? (size_t)(nul - p) : n;
		if (!c->discarding && c->msg_len + seg > DG_CDP_MSG_MAX) {
			c->discarding = true;
			c->stats.oversized++;
			c->stats.messages++;
			refuse(c, "message longer than %u bytes discarded", DG_CDP_MSG_MAX);
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
					refuse(c, "out of memory for a message of %zu bytes",
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
	fail_pending(c, INT64_MAX, 0, true, -ECANCELED, "the DevTools client was freed");
	call_start_done(c, -ECANCELED, "the DevTools client was freed");
	dg_close_fd(&c->in_fd);
	dg_close_fd(&c->out_fd);
	for (int i = 0; i < DG_CDP_TARGETS_MAX; i++)
		target_clear(&c->targets[i]);
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
	int r = send_cmd(c, K_DISCOVER, "Target.setDiscoverTargets",
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
	return send_cmd(c, K_USER, method, params, session_id, 0, NULL, done, arg, err);
}

/* Page commands: on the current session, bound to its generation so that
 * they fail with -ECONNRESET when the page goes away. */
static int page_cmd(struct dg_cdp *c, enum kind kind, const char *method, json_t *params,
		    dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	if (!c->ready && !c->closed) {
		json_decref(params);
		return dg_err_set(err, -EAGAIN, "cdp: no page attached yet");
	}
	int r = send_cmd(c, kind, method, params, c->closed ? NULL : c->session, c->page_gen, NULL,
			 done, arg, err);
	if (r == 0 && (kind == K_NAVIGATE || kind == K_RELOAD))
		c->nav_inflight++;
	return r;
}

int dg_cdp_navigate(struct dg_cdp *c, const char *url, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err)
{
	if (!url)
		return dg_err_set(err, -EINVAL, "cdp: navigate: no URL");
	if (strlen(url) > DG_CDP_URL_MAX)
		return dg_err_set(err, -E2BIG, "cdp: navigate: URL longer than %d bytes",
				  DG_CDP_URL_MAX);
	json_t *s = json_string(url);
	if (!s)
		return dg_err_set(err, -EINVAL, "cdp: navigate: URL is not UTF-8");
	json_t *params = json_object();
	if (!params || json_object_set_new(params, "url", s) != 0) {
		json_decref(params);
		return dg_err_set(err, -ENOMEM, "cdp: out of memory");
	}
	return page_cmd(c, K_NAVIGATE, "Page.navigate", params, done, arg, err);
}

int dg_cdp_back(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_HIST_BACK, "Page.getNavigationHistory", NULL, done, arg, err);
}

int dg_cdp_forward(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_HIST_FORWARD, "Page.getNavigationHistory", NULL, done, arg, err);
}

int dg_cdp_reload(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	return page_cmd(c, K_RELOAD, "Page.reload", NULL, done, arg, err);
}

int dg_cdp_evaluate(struct dg_cdp *c, const char *expression, dg_cdp_done_fn done, void *arg,
		    struct dg_err *err)
{
	if (!expression)
		return dg_err_set(err, -EINVAL, "cdp: evaluate: no expression");
	json_t *s = json_string(expression);
	if (!s)
		return dg_err_set(err, -EINVAL, "cdp: evaluate: expression is not UTF-8");
	json_t *params = json_pack("{sosb}", "expression", s, "returnByValue", 1);
	if (!params)
		return dg_err_set(err, -ENOMEM, "cdp: out of memory");
	return page_cmd(c, K_EVALUATE, "Runtime.evaluate", params, done, arg, err);
}

int dg_cdp_refresh(struct dg_cdp *c, dg_cdp_done_fn done, void *arg, struct dg_err *err)
{
	if (!c->ready && !c->closed)
		return dg_err_set(err, -EAGAIN, "cdp: no page attached yet");
	json_t *params = c->cur >= 0 ? json_pack("{ss}", "targetId", c->targets[c->cur].id) : NULL;
	return send_cmd(c, K_REFRESH, "Target.getTargetInfo", params, NULL, c->page_gen, NULL, done,
			arg, err);
}

int dg_cdp_switch(struct dg_cdp *c, const char *target_id, struct dg_err *err)
{
	if (c->closed)
		return dg_err_set(err, -EPIPE, "cdp: the DevTools pipe is closed");
	int i = target_id ? target_find(c, target_id) : -1;
	if (i < 0)
		return dg_err_set(err, -ENOENT, "cdp: switch: no such page target");
	if (i == c->cur || (c->attaching && c->prefer[0] && strcmp(c->prefer, target_id) == 0))
		return 0;
	if (c->targets[i].attach_failed)
		return dg_err_set(err, -ENOENT, "cdp: switch: that page could not be attached");
	snprintf(c->prefer, sizeof(c->prefer), "%s", target_id);
	if (c->cur < 0)
		return 0; /* the next attach (maybe_attach) takes it */
	/* Our session on the old page goes; its late events and replies no
	 * longer count (page_gone bumps the generation). */
	char old[DG_CDP_ID_MAX + 1];
	snprintf(old, sizeof(old), "%s", c->session);
	page_gone(c, "another tab became the active one");
	send_cmd(c, K_USER, "Target.detachFromTarget", json_pack("{ss}", "sessionId", old), NULL, 0,
		 NULL, NULL, NULL, NULL);
	return 0;
}

int dg_cdp_fail_all(struct dg_cdp *c, int status, const char *message)
{
	return fail_pending(c, c->next_id - 1, 0, false, status, message ? message : "cancelled");
}

bool dg_cdp_ready(const struct dg_cdp *c) { return c->ready; }
bool dg_cdp_closed(const struct dg_cdp *c) { return c->closed; }
bool dg_cdp_loading(const struct dg_cdp *c)
{
	return c->frame_loading || c->nav_inflight > 0 || c->load_refresh;
}

const char *dg_cdp_url(const struct dg_cdp *c)
{
	return c->cur >= 0 && c->targets[c->cur].url ? c->targets[c->cur].url : "";
}

const char *dg_cdp_title(const struct dg_cdp *c)
{
	return c->cur >= 0 && c->targets[c->cur].title ? c->targets[c->cur].title : "";
}

const char *dg_cdp_target_id(const struct dg_cdp *c)
{
	return c->cur >= 0 ? c->targets[c->cur].id : "";
}
const char *dg_cdp_session_id(const struct dg_cdp *c) { return c->session; }
uint64_t dg_cdp_changes(const struct dg_cdp *c) { return c->changes; }
uint64_t dg_cdp_loads(const struct dg_cdp *c) { return c->loads; }
int dg_cdp_n_targets(const struct dg_cdp *c) { return c->n_targets; }
int dg_cdp_n_pending(const struct dg_cdp *c) { return c->n_pending; }
size_t dg_cdp_queued(const struct dg_cdp *c) { return c->out_len - c->out_off; }
void dg_cdp_stats(const struct dg_cdp *c, struct dg_cdp_stats *s) { *s = c->stats; }
const char *dg_cdp_last_error(const struct dg_cdp *c) { return c->last_error; }
