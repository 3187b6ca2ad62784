/* fuzz_cdp: the worker's DevTools client (desktop/worker/cdp-priv.h) and the
 * browser layer of the policy it feeds (desktop/worker/guard-priv.h), driven by
 * hostile bytes on Chromium's side of --remote-debugging-pipe.
 *
 * Per input, as the worker sets them up: a client over two pipes,
 * dg_cdp_start, a guard (dg_guard_new, dg_guard_start) receiving every
 * event through dg_cdp_set_event_handler. The input is split on NUL bytes;
 * each segment is
 *   a browser message   written with its NUL to the client's read pipe,
 *                       then dg_cdp_handle_in until the pipe is empty
 *   "!raw BYTES"        BYTES written without a NUL (a message split
 *                       across reads; the next segment continues it)
 *   "!pad N C"          N bytes C (a space when not given), no NUL: long
 *                       strings (N at most 64 KiB)
 *   "!repeat N MESSAGE" MESSAGE N times, "%d" in it numbered: tables full
 *   "!navigate URL", "!back", "!forward", "!reload", "!eval EXPR",
 *   "!refresh", "!send METHOD PARAMS"  the owner's commands (so the
 *                       browser's replies to them are fuzzed too; ids are
 *                       deterministic: 1 is Target.setDiscoverTargets,
 *                       2 to 4 the guard's start)
 *   "!probe"            the guard's tab probe (dg_guard_probe_tabs): its
 *                       answer must come exactly once, with a page the
 *                       guard knows or NULL
 *   "!switch ID"        dg_cdp_switch to target ID
 *   "!fail"             dg_cdp_fail_all (a deadline passed)
 *   "!verdict JSON"     the owner's DG_MSG_VERDICT to dg_guard_verdict
 *   "!allow", "!deny"   a verdict for every request the guard asked about
 *   "!close"            the browser closes its pipe
 *   "!stall", "!resume" the browser stops / starts again reading what the
 *                       client writes (both pipes hold 4 KiB, so the
 *                       client's write queue fills)
 * What the client writes is read and dropped after every step, unless
 * stalled (with DG_FUZZ_TRACE set in the environment it is printed, to
 * write seeds).
 *
 * Checked: no crash, leak or descriptor left open; every command whose
 * sending call returned 0 is completed exactly once, never inside the
 * sending call, with a message exactly when it failed; the accessors stay within their documented
 * bounds (URL, title); the guard's messages to the owner are JSON objects
 * and its requests carry increasing "req" numbers. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cdp-priv.h"
#include "guard-priv.h"
#include "desktop/proto/proto.h"
#include "fuzz_common.h"

static bool trace;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	trace = getenv("DG_FUZZ_TRACE") != NULL;
	return 0;
}

#define QUEUE_MAX 2048
/* Bounds of "!pad" and "!repeat": strings past DG_CDP_URL_MAX and
 * DG_CDP_TITLE_MAX, more targets and commands than the client's and the
 * guard's tables hold (several repeats reach DG_GUARD_PAUSED_MAX). Not
 * messages past DG_CDP_MSG_MAX (8 MiB): inputs that large would take most
 * of the fuzzer's time; tests/unit/test_cdp.c covers that bound. */
#define PAD_MAX (64 * 1024)
#define REPEAT_MAX 300

struct state {
	struct dg_cdp *c;
	struct dg_guard *g;
	int cmd_rd, ev_wr;
	long outstanding;       /* commands sent with a callback, not completed */
	bool in_send;           /* inside a sending call */
	bool freeing;           /* inside dg_cdp_free */
	int start_calls;
	uint64_t queue[QUEUE_MAX]; /* requests the guard asked about */
	int n_queue;
	uint64_t last_req;
	bool stalled;           /* "!stall": the browser does not read its commands */
	bool probing;           /* "!probe": the guard's answer is due */
};

static void done(void *arg, int status, json_t *result, const char *error_message)
{
	struct state *s = arg;
	DG_FUZZ_CHECK(!s->in_send, "a completion ran inside the sending call");
	DG_FUZZ_CHECK(s->outstanding > 0, "a completion for no command");
	s->outstanding--;
	if (status == 0) {
		DG_FUZZ_CHECK(error_message == NULL, "success with a message: %s", error_message);
	} else {
		DG_FUZZ_CHECK(status == -EREMOTEIO || status == -ENOENT || status == -EPROTO ||
			      status == -ECONNRESET || status == -EPIPE || status == -ECANCELED ||
			      status == -ETIMEDOUT,
			      "completion status %d", status);
		DG_FUZZ_CHECK(error_message != NULL, "failure %d without a message", status);
		DG_FUZZ_CHECK(strlen(error_message) <= 4 * DG_CDP_ERRTEXT_MAX + 64,
			      "an error text of %zu bytes", strlen(error_message));
		if (status == -ECANCELED && s->freeing)
			return; /* must not touch the client */
	}
	(void)result;
}

static void probed(void *arg, const char *front)
{
	struct state *s = arg;
	DG_FUZZ_CHECK(s->probing, "a tab probe answered twice, or unasked");
	s->probing = false;
	DG_FUZZ_CHECK(!front || (front[0] && strlen(front) <= DG_CDP_ID_MAX),
		      "the tab in front is not a target id");
}

static void start_done(void *arg, int status, json_t *result, const char *error_message)
{
	struct state *s = arg;
	(void)result;
	(void)error_message;
	s->start_calls++;
	DG_FUZZ_CHECK(s->start_calls == 1, "the start callback ran %d times", s->start_calls);
	DG_FUZZ_CHECK(!s->in_send, "the start callback ran inside a sending call");
	(void)status;
}

static int emit(void *arg, uint32_t type, const char *text)
{
	struct state *s = arg;
	DG_FUZZ_CHECK(type == DG_MSG_REQUEST || type == DG_MSG_EVENT, "guard message type %u", type);
	json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	DG_FUZZ_CHECK(json_is_object(j), "the guard sent no JSON object: %s", text);
	DG_FUZZ_CHECK(strlen(text) <= DG_IPC_JSON_MAX, "a guard message of %zu bytes",
		      strlen(text));
	if (type == DG_MSG_REQUEST) {
		json_t *req = json_object_get(j, "req");
		json_t *url = json_object_get(j, "url");
		DG_FUZZ_CHECK(json_is_integer(req) && json_is_string(url), "request: %s", text);
		uint64_t n = (uint64_t)json_integer_value(req);
		DG_FUZZ_CHECK(n > s->last_req, "request number %llu after %llu",
			      (unsigned long long)n, (unsigned long long)s->last_req);
		DG_FUZZ_CHECK(json_string_length(url) <= DG_GUARD_URL_MAX, "request URL of %zu bytes",
			      json_string_length(url));
		s->last_req = n;
		if (s->n_queue < QUEUE_MAX)
			s->queue[s->n_queue++] = n;
	}
	json_decref(j);
	return 0;
}

static void on_event(void *arg, const char *method, const char *session, json_t *params)
{
	struct state *s = arg;
	DG_FUZZ_CHECK(method != NULL && json_is_object(params), "event without method or params");
	dg_guard_event(s->g, method, session, params);
}

/* Reads and drops what the client wrote (printed when tracing). */
static void drain_commands(struct state *s)
{
	char buf[8192];
	ssize_t n;
	if (s->stalled)
		return;
	while ((n = read(s->cmd_rd, buf, sizeof(buf))) > 0) {
		if (!trace)
			continue;
		for (ssize_t i = 0; i < n; i++)
			fputc(buf[i] ? buf[i] : '\n', stderr);
	}
}

static void check_state(struct state *s)
{
	const char *url = dg_cdp_url(s->c), *title = dg_cdp_title(s->c);
	DG_FUZZ_CHECK(url && title, "NULL url or title");
	DG_FUZZ_CHECK(strlen(url) <= DG_CDP_URL_MAX, "a URL of %zu bytes", strlen(url));
	DG_FUZZ_CHECK(strlen(title) <= DG_CDP_TITLE_MAX, "a title of %zu bytes", strlen(title));
	for (const char *p = url; *p; p++)
		DG_FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f, "a control byte in the URL");
	for (const char *p = title; *p; p++)
		DG_FUZZ_CHECK((unsigned char)*p >= 0x20 && *p != 0x7f, "a control byte in the title");
	DG_FUZZ_CHECK(strlen(dg_cdp_session_id(s->c)) <= DG_CDP_ID_MAX, "a long session id");
	DG_FUZZ_CHECK(strlen(dg_cdp_target_id(s->c)) <= DG_CDP_ID_MAX, "a long target id");
	DG_FUZZ_CHECK(dg_cdp_n_targets(s->c) >= 0 && dg_cdp_n_targets(s->c) <= DG_CDP_TARGETS_MAX,
		      "%d targets", dg_cdp_n_targets(s->c));
	DG_FUZZ_CHECK(dg_cdp_n_pending(s->c) >= 0 && dg_cdp_n_pending(s->c) <= DG_CDP_PENDING_MAX,
		      "%d pending", dg_cdp_n_pending(s->c));
	DG_FUZZ_CHECK(dg_cdp_queued(s->c) <= DG_CDP_OUT_MAX, "%zu bytes queued", dg_cdp_queued(s->c));
	DG_FUZZ_CHECK(dg_guard_n_paused(s->g) >= 0 && dg_guard_n_paused(s->g) <= DG_GUARD_PAUSED_MAX,
		      "%d paused", dg_guard_n_paused(s->g));
}

/* Lets the client read until the pipe is empty (or it closed), then
 * flushes and drops what it wrote. */
static void pump(struct state *s)
{
	struct dg_err err = {{0}};
	while (!dg_cdp_closed(s->c)) {
		int r = dg_cdp_handle_in(s->c, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPIPE, "handle_in: %d", r);
		if (r != 0)
			break;
		/* One call reads at most DG_CDP_READ_BUDGET: go on while more waits. */
		struct pollfd pfd[2];
		dg_cdp_pollfds(s->c, pfd);
		if (pfd[0].fd < 0 || poll(pfd, 1, 0) <= 0)
			break;
	}
	drain_commands(s);
	if (!dg_cdp_closed(s->c)) {
		int r = dg_cdp_handle_out(s->c, &err);
		DG_FUZZ_CHECK(r == 0 || r == -EPIPE, "handle_out: %d", r);
		drain_commands(s);
	}
}

/* Writes as the browser; lets the client read whenever the pipe is full
 * (the caller pumps after the last write). */
static void browser_write(struct state *s, const char *p, size_t n)
{
	while (n > 0 && s->ev_wr >= 0 && !dg_cdp_closed(s->c)) {
		ssize_t w = write(s->ev_wr, p, n);
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return;
		pump(s);
	}
}

static void sent(struct state *s, int r, const struct dg_err *err)
{
	s->in_send = false;
	if (trace && r != 0)
		fprintf(stderr, "owner command: %d %s\n", r, err->msg);
	DG_FUZZ_CHECK(r <= 0, "a sending call returned %d", r);
	if (r == 0)
		s->outstanding++;
}

static void verdicts(struct state *s, bool allow)
{
	for (int i = 0; i < s->n_queue; i++) {
		char msg[64];
		int n = snprintf(msg, sizeof(msg), "{\"req\":%llu,\"allow\":%s}",
				 (unsigned long long)s->queue[i], allow ? "true" : "false");
		struct dg_err err = {{0}};
		int r = dg_guard_verdict(s->g, msg, (size_t)n, &err);
		DG_FUZZ_CHECK(r == 0, "a well-formed verdict refused: %s", err.msg);
	}
	s->n_queue = 0;
}

static void owner(struct state *s, const char *seg, size_t n)
{
	struct dg_err err = {{0}};
	/* The argument after the verb, NUL-terminated (seg is a copy). */
	const char *sp = memchr(seg, ' ', n);
	const char *arg = sp ? sp + 1 : seg + n;
	size_t vn = sp ? (size_t)(sp - seg) : n;
#define VERB(v) (vn == sizeof(v) - 1 && memcmp(seg, v, vn) == 0)
	if (VERB("!raw")) {
		browser_write(s, arg, (size_t)(seg + n - arg));
		pump(s);
		return;
	}
	if (VERB("!pad")) {
		/* "!pad N C": N bytes C (default a space), no NUL. */
		char *end;
		unsigned long count = strtoul(arg, &end, 10);
		char ch = *end == ' ' && end[1] ? end[1] : ' ';
		if (count > PAD_MAX)
			count = PAD_MAX;
		char buf[4096];
		memset(buf, ch, sizeof(buf));
		while (count > 0 && !dg_cdp_closed(s->c) && s->ev_wr >= 0) {
			size_t k = count < sizeof(buf) ? count : sizeof(buf);
			browser_write(s, buf, k);
			count -= k;
		}
		pump(s);
		return;
	}
	if (VERB("!repeat")) {
		/* "!repeat N MESSAGE": MESSAGE and its NUL N times, each "%d" in
		 * it replaced by the repetition's number. */
		char *end;
		unsigned long count = strtoul(arg, &end, 10);
		if (count > REPEAT_MAX)
			count = REPEAT_MAX;
		const char *m = *end == ' ' ? end + 1 : end;
		size_t ml = (size_t)(seg + n - m);
		char *out = malloc(ml * 4 + 16);
		DG_FUZZ_CHECK(out, "out of memory");
		for (unsigned long i = 0; i < count && !dg_cdp_closed(s->c) && s->ev_wr >= 0; i++) {
			size_t o = 0;
			for (size_t k = 0; k < ml; k++) {
				if (m[k] == '%' && k + 1 < ml && m[k + 1] == 'd') {
					o += (size_t)snprintf(out + o, 12, "%lu", i);
					k++;
				} else {
					out[o++] = m[k];
				}
			}
			out[o++] = '\0';
			browser_write(s, out, o);
		}
		free(out);
		pump(s);
		return;
	}
	if (VERB("!close")) {
		if (s->ev_wr >= 0)
			close(s->ev_wr);
		s->ev_wr = -1;
		if (!dg_cdp_closed(s->c)) {
			int r = dg_cdp_handle_in(s->c, &err);
			DG_FUZZ_CHECK(r == -EPIPE, "a closed pipe read as %d", r);
			DG_FUZZ_CHECK(dg_cdp_closed(s->c), "not closed after EOF");
		}
		return;
	}
	if (VERB("!stall") || VERB("!resume")) {
		s->stalled = VERB("!stall");
		pump(s);
		return;
	}
	if (VERB("!fail")) {
		int k = dg_cdp_fail_all(s->c, -ETIMEDOUT, "the owner's deadline passed");
		DG_FUZZ_CHECK(k >= 0, "fail_all: %d", k);
		pump(s);
		return;
	}
	if (VERB("!probe")) {
		if (!s->probing) {
			struct dg_err e = {{0}};
			s->probing = true;
			if (dg_guard_probe_tabs(s->g, probed, s, &e) != 0)
				s->probing = false;
		}
		pump(s);
		return;
	}
	if (VERB("!switch")) {
		int k = dg_cdp_switch(s->c, arg, &err);
		DG_FUZZ_CHECK(k == 0 || k == -ENOENT || k == -EPIPE, "switch: %d", k);
		pump(s);
		return;
	}
	if (VERB("!verdict")) {
		dg_guard_verdict(s->g, arg, (size_t)(seg + n - arg), &err);
		pump(s);
		return;
	}
	if (VERB("!allow") || VERB("!deny")) {
		verdicts(s, VERB("!allow"));
		pump(s);
		return;
	}
	s->in_send = true;
	if (VERB("!navigate")) {
		sent(s, dg_cdp_navigate(s->c, arg, done, s, &err), &err);
	} else if (VERB("!back")) {
		sent(s, dg_cdp_back(s->c, done, s, &err), &err);
	} else if (VERB("!forward")) {
		sent(s, dg_cdp_forward(s->c, done, s, &err), &err);
	} else if (VERB("!reload")) {
		sent(s, dg_cdp_reload(s->c, done, s, &err), &err);
	} else if (VERB("!eval")) {
		sent(s, dg_cdp_evaluate(s->c, arg, done, s, &err), &err);
	} else if (VERB("!refresh")) {
		sent(s, dg_cdp_refresh(s->c, done, s, &err), &err);
	} else if (VERB("!send")) {
		const char *sp2 = strchr(arg, ' ');
		char method[64];
		size_t ml = sp2 ? (size_t)(sp2 - arg) : strlen(arg);
		snprintf(method, sizeof(method), "%.*s", (int)(ml < 63 ? ml : 63), arg);
		json_t *params = sp2 ? json_loads(sp2 + 1, 0, NULL) : NULL;
		const char *session = dg_cdp_session_id(s->c);
		sent(s, dg_cdp_send(s->c, method, params, session[0] ? session : NULL, done, s, &err), &err);
	} else {
		s->in_send = false;
	}
#undef VERB
	pump(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fds_before = dg_fuzz_fd_begin();
	struct state *s = calloc(1, sizeof(*s));
	DG_FUZZ_CHECK(s, "out of memory");
	int cmd[2], ev[2];
	if (pipe2(cmd, O_CLOEXEC) || pipe2(ev, O_CLOEXEC))
		abort();
	s->cmd_rd = cmd[0];
	s->ev_wr = ev[1];
	fcntl(s->cmd_rd, F_SETFL, O_NONBLOCK);
	fcntl(s->ev_wr, F_SETFL, O_NONBLOCK);
	/* Small pipes: a stalled browser fills its command pipe within a few
	 * dozen commands (the client's write queue then grows), and long
	 * messages arrive in several reads. */
	fcntl(s->cmd_rd, F_SETPIPE_SZ, 4096);
	fcntl(s->ev_wr, F_SETPIPE_SZ, 4096);
	s->c = dg_cdp_new(cmd[1], ev[0]);
	DG_FUZZ_CHECK(s->c, "dg_cdp_new failed");
	s->g = dg_guard_new(s->c, emit, s);
	DG_FUZZ_CHECK(s->g, "dg_guard_new failed");
	dg_cdp_set_event_handler(s->c, on_event, s);
	struct dg_err err = {{0}};
	s->in_send = true;
	int r = dg_cdp_start(s->c, start_done, s, &err);
	s->in_send = false;
	DG_FUZZ_CHECK(r == 0, "dg_cdp_start: %s", err.msg);
	r = dg_guard_start(s->g, &err);
	DG_FUZZ_CHECK(r == 0, "dg_guard_start: %s", err.msg);
	drain_commands(s);

	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nul = memchr(p, '\0', (size_t)(end - p));
		size_t n = nul ? (size_t)(nul - p) : (size_t)(end - p);
		if (n > 0 && p[0] == '!') {
			char *seg = dg_fuzz_cstr((const uint8_t *)p, n);
			owner(s, seg, n);
			free(seg);
		} else {
			/* The message and its NUL; the last one may lack it. */
			browser_write(s, p, nul ? n + 1 : n);
			pump(s);
		}
		check_state(s);
		p += n + 1;
	}

	s->freeing = true;
	dg_cdp_free(s->c);
	DG_FUZZ_CHECK(s->outstanding == 0, "%ld commands never completed", s->outstanding);
	DG_FUZZ_CHECK(s->start_calls <= 1, "start completed %d times", s->start_calls);
	dg_guard_free(s->g);
	close(s->cmd_rd);
	if (s->ev_wr >= 0)
		close(s->ev_wr);
	free(s);
	dg_fuzz_fd_end(fds_before);
	return 0;
}
