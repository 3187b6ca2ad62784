/* `deskgate mcp`: the stdio bridge of docs/mcp.md, for MCP hosts that only
 * spawn stdio servers. Each line of stdin (one JSON-RPC message, the MCP
 * stdio transport) becomes one POST to the gateway's /mcp (the streamable
 * HTTP transport), and each message of its answer (a JSON body, or the
 * events of an SSE stream as they arrive) one line of stdout.
 *
 * Requests overlap: every POST is a transfer of one curl multi handle,
 * polled together with stdin and a signalfd, so a ping or a
 * notifications/cancelled goes out while a tools/call streams. No threads.
 * stdout carries protocol messages only, each whole and on one line;
 * everything else goes to stderr, prefixed "deskgate mcp: ". */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/base.h"
#include "cli/cli.h"

#define DG_MCP_BRIDGE_LINE_MAX (4u << 20)   /* bytes of one stdin line, its newline aside */
#define DG_MCP_BRIDGE_EVENT_MAX (32u << 20) /* bytes of one SSE event's data, or of a whole
					       answer that is not a stream */
#define DG_MCP_BRIDGE_SSE_LINE_MAX (DG_MCP_BRIDGE_EVENT_MAX + 64) /* one SSE line: "data: " and
								     an event's data */
#define DG_MCP_BRIDGE_INFLIGHT_MAX 32       /* POSTs at once; stdin waits past it */
#define DG_MCP_BRIDGE_ERROR_TEXT_MAX 512    /* bytes of the gateway's text quoted in an error */
#define DG_MCP_BRIDGE_SESSION_ID_MAX 256    /* bytes of an Mcp-Session-Id */
#define DG_MCP_BRIDGE_VERSION_MAX 32        /* bytes of a protocolVersion */
#define DG_MCP_BRIDGE_DIM_MAX 16384         /* --size and --display, each way */
#define DG_MCP_BRIDGE_CONNECT_MS 10000      /* connecting to the gateway */
#define DG_MCP_BRIDGE_DRAIN_MS 5000         /* requests in flight when stdin ends or a signal
					       comes */
#define DG_MCP_BRIDGE_DELETE_MS 5000        /* the DELETE that ends the MCP session */
#define DG_MCP_BRIDGE_READ_CHUNK (64 * 1024)     /* one read of stdin */
#define DG_MCP_BRIDGE_CURL_BUFFER (256 * 1024)   /* curl's receive buffer */
#define DG_MCP_BRIDGE_POLL_MS 1000          /* the longest wait between checks of the clock */

#define DG_MCP_BRIDGE_EXIT_FAILED 1  /* the bridge could not run */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("deskgate mcp: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- growing buffers --------------------------------------------------- */

struct buf {
	char *p;
	size_t len, cap;
};

/* Room for n more bytes, the buffer never growing past max: -E2BIG past it,
 * -ENOMEM. */
static int buf_reserve(struct buf *b, size_t n, size_t max)
{
	if (n > max || b->len > max - n)
		return -E2BIG;
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : DG_MCP_BRIDGE_READ_CHUNK;
	while (cap < b->len + n)
		cap *= 2;
	if (cap > max)
		cap = max;
	char *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int buf_append(struct buf *b, const char *p, size_t n, size_t max)
{
	int r = n ? buf_reserve(b, n, max) : 0;
	if (r || n == 0)
		return r;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* Drops the first n bytes. */
static void buf_shift(struct buf *b, size_t n)
{
	if (n == 0)
		return;
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static void buf_free(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
			return false;
	return true;
}

/* ---- the bridge ---------------------------------------------------------- */

struct xfer;

struct bridge {
	const char *url;
	char *auth;                 /* "Authorization: Bearer <token>", wiped when freed */
	json_t *deskgate;           /* the flags' capabilities.experimental.deskgate, or NULL */
	bool verbose;
	CURLM *multi;
	struct xfer *xfers;         /* the POSTs in flight */
	int inflight;
	/* The MCP session: its id from the initialize answer's headers ("" while
	 * none), counted so that a 404 forgets only the session it was about,
	 * and the protocol revision of the initialize result. */
	char session[DG_MCP_BRIDGE_SESSION_ID_MAX + 1];
	unsigned long session_gen;
	char version[DG_MCP_BRIDGE_VERSION_MAX + 1];
	/* stdin: what is read and not yet sent; scanned bytes hold no newline. */
	struct buf in;
	size_t in_scanned;
	unsigned long in_line;      /* lines read, for messages */
	bool in_skipping;           /* dropping the rest of a line that was too long */
	bool in_eof;                /* stdin ended (or a signal came): nothing more is read */
	bool out_gone;              /* writing stdout failed: the host is gone */
};

enum body_kind { BODY_UNSEEN = 0, BODY_PLAIN, BODY_SSE };

/* One POST in flight: a host message and the gateway's answer to it. */
struct xfer {
	struct bridge *b;
	struct xfer *next;
	CURL *easy;
	bool added;                 /* to b->multi */
	struct curl_slist *headers;
	char *body;                 /* what is posted (CURLOPT_POSTFIELDS borrows it) */
	size_t body_len;
	json_t *id;                 /* a request's id; NULL for a notification or a response */
	char method[DG_SHOW_BUF];   /* the method, shown; "a response" for a host's answer */
	bool initialize;
	bool cancelled;             /* the host sent notifications/cancelled for it */
	unsigned long session_gen;  /* the session whose id it carried; 0: none */
	long long started_ms;
	enum body_kind kind;
	struct buf answer;          /* BODY_PLAIN: the body; BODY_SSE: the unfinished line */
	size_t scanned;             /* BODY_SSE: bytes of answer searched for a line end */
	bool after_cr;              /* BODY_SSE: the last line ended with CR (a LF next is its) */
	struct buf data;            /* BODY_SSE: the event's data so far */
	bool has_data;
	bool too_big;               /* an event or the body passed DG_MCP_BRIDGE_EVENT_MAX */
	bool answered;              /* a response with its id went to stdout */
	int messages;               /* messages written to stdout */
	char errbuf[CURL_ERROR_SIZE];
};

/* Writes one message and its newline to stdout in one piece: the host reads
 * a message a line, and two never interleave (the bridge is one thread).
 * text is JSON without a raw newline. After a failure (the host closed its
 * end) nothing more is written. */
static void put_message(struct bridge *b, const char *text, size_t n)
{
	static char nl[] = "\n";
	struct iovec iov[2] = {{(void *)text, n}, {nl, 1}};
	int i = 0;
	while (!b->out_gone && i < 2) {
		ssize_t w = writev(STDOUT_FILENO, iov + i, 2 - i);
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pfd = {.fd = STDOUT_FILENO, .events = POLLOUT};
			poll(&pfd, 1, -1);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			say("writing stdout: %s: the host is gone", strerror(errno));
			b->out_gone = true;
			return;
		}
		size_t k = (size_t)w;
		for (; i < 2 && k >= iov[i].iov_len; i++)
			k -= iov[i].iov_len;
		if (i < 2) {
			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
		}
	}
}

/* Writes a JSON-RPC error for id (NULL: null) to stdout. */
static void put_error(struct bridge *b, json_t *id, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void put_error(struct bridge *b, json_t *id, int code, const char *fmt, ...)
{
	char msg[DG_ERR_MAX + DG_MCP_BRIDGE_ERROR_TEXT_MAX * 4];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *text = json_string(msg);
	json_t *m = json_pack("{s:s, s:O?, s:{s:i, s:o}}", "jsonrpc", "2.0", "id", id, "error",
			      "code", code, "message",
			      text ? text : json_string("deskgate mcp: (unprintable)"));
	char *s = m ? json_dumps(m, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	if (s)
		put_message(b, s, strlen(s));
	else
		say("out of memory for an error to the host: %s", msg);
	free(s);
	json_decref(m);
}

/* A header value the bridge repeats: 1..max visible ASCII bytes. */
static bool token_ok(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e)
			return false;
	return true;
}

/* ---- HTTP ------------------------------------------------------------------ */

/* Frees a header list, its strings wiped first (one holds the token). */
static void free_headers(struct curl_slist *h)
{
	for (struct curl_slist *l = h; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(h);
}

static int add_header(struct curl_slist **h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int add_header(struct curl_slist **h, const char *fmt, ...)
{
	char line[DG_MCP_BRIDGE_SESSION_ID_MAX + 64];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	struct curl_slist *l = curl_slist_append(*h, line);
	if (!l)
		return -ENOMEM;
	*h = l;
	return 0;
}

/* The headers of a request: the token always; with post, what a POST of a
 * JSON-RPC message says it sends and takes; with session, the MCP session's
 * id and protocol revision, when known. */
static int headers_for(const struct bridge *b, bool post, bool session, struct curl_slist **out)
{
	struct curl_slist *h = curl_slist_append(NULL, b->auth);
	int r = h ? 0 : -ENOMEM;
	if (!r && post)
		r = add_header(&h, "Content-Type: application/json");
	if (!r && post)
		r = add_header(&h, "Accept: application/json, text/event-stream");
	if (!r && post) /* no 100-continue round trip before a large body */
		r = add_header(&h, "Expect:");
	if (!r && session && b->session[0])
		r = add_header(&h, "Mcp-Session-Id: %s", b->session);
	if (!r && session && b->version[0])
		r = add_header(&h, "MCP-Protocol-Version: %s", b->version);
	if (r) {
		free_headers(h);
		return r;
	}
	*out = h;
	return 0;
}

/* An easy handle to the gateway's URL with the bridge's settings: http and
 * https only, no redirect followed, the headers given. */
static CURL *easy_for(const struct bridge *b, struct curl_slist *headers, char *errbuf)
{
	CURL *e = curl_easy_init();
	if (!e)
		return NULL;
	if (curl_easy_setopt(e, CURLOPT_URL, b->url) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			     (long)DG_MCP_BRIDGE_CONNECT_MS) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)DG_MCP_BRIDGE_CURL_BUFFER) != CURLE_OK) {
		curl_easy_cleanup(e);
		return NULL;
	}
	return e;
}

/* ---- the gateway's answers ----------------------------------------------- */

/* Whether m answers x's request. */
static bool answers(const struct xfer *x, json_t *m)
{
	return x->id && !json_object_get(m, "method") &&
	       (json_object_get(m, "result") || json_object_get(m, "error")) &&
	       json_equal(json_object_get(m, "id"), x->id);
}

/* The protocol revision of an initialize result, for MCP-Protocol-Version. */
static void take_version(struct bridge *b, json_t *m)
{
	json_t *result = json_object_get(m, "result");
	const char *v = json_string_value(json_object_get(result, "protocolVersion"));
	b->version[0] = '\0';
	if (v && token_ok(v, DG_MCP_BRIDGE_VERSION_MAX)) {
		snprintf(b->version, sizeof(b->version), "%s", v);
	} else if (result) {
		char shown[DG_SHOW_BUF];
		dg_show_str(v ? v : "(none)", DG_SHOW_MAX, true, shown, sizeof(shown));
		say("the initialize result's protocolVersion %s is not one: requests go without "
		    "MCP-Protocol-Version", shown);
	}
}

/* Writes one message of the gateway's answer to x to stdout. text[0..n) is
 * rewritten in place: its line ends (whitespace between JSON tokens: a
 * string holds none raw) become spaces. What is not a JSON object is
 * dropped, with a message. */
static void forward(struct xfer *x, char *text, size_t n)
{
	json_error_t e;
	json_t *m = json_loadb(text, n, 0, &e);
	if (!json_is_object(m)) {
		char why[DG_SHOW_BUF];
		dg_show_str(m ? "an array" : e.text, DG_SHOW_MAX, false, why, sizeof(why));
		say("%s: the gateway sent a message that is not a JSON object (%s): dropped",
		    x->method, why);
		json_decref(m);
		return;
	}
	if (answers(x, m)) {
		x->answered = true;
		if (x->initialize)
			take_version(x->b, m);
	}
	json_decref(m);
	for (size_t i = 0; i < n; i++)
		if (text[i] == '\n' || text[i] == '\r')
			text[i] = ' ';
	put_message(x->b, text, n);
	x->messages++;
}

/* The MCP session id of a successful initialize answer (none: the gateway
 * keeps no session), read as soon as its headers are in, before any of its
 * messages reaches the host and the host sends the next request. */
static void take_session(struct xfer *x)
{
	struct bridge *b = x->b;
	struct curl_header *h = NULL;
	b->session[0] = b->version[0] = '\0';
	b->session_gen++;
	if (curl_easy_header(x->easy, "Mcp-Session-Id", 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return;
	if (!token_ok(h->value, DG_MCP_BRIDGE_SESSION_ID_MAX)) {
		char shown[DG_SHOW_BUF];
		dg_show_str(h->value, DG_SHOW_MAX, true, shown, sizeof(shown));
		say("the gateway's Mcp-Session-Id %s is not one (1..%d visible ASCII bytes): "
		    "requests go without it", shown, DG_MCP_BRIDGE_SESSION_ID_MAX);
		return;
	}
	snprintf(b->session, sizeof(b->session), "%s", h->value);
}

/* What the answer's body is, once its headers are in: only a successful
 * text/event-stream is read as a stream. */
static enum body_kind classify(struct xfer *x)
{
	long status = 0;
	char *type = NULL;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &type);
	bool ok = status >= 200 && status < 300;
	if (ok && x->initialize)
		take_session(x);
	bool sse = ok && type && strncasecmp(type, "text/event-stream", 17) == 0;
	return sse ? BODY_SSE : BODY_PLAIN;
}

/* The end of an SSE event: its data, when there is any, is one message. */
static void sse_dispatch(struct xfer *x)
{
	if (!x->has_data)
		return;
	x->has_data = false;
	size_t n = x->data.len;
	x->data.len = 0;
	if (!blank(x->data.p, n)) /* a priming event has empty data */
		forward(x, x->data.p, n);
}

/* One line of an SSE stream (its end removed). Only data counts: event, id,
 * retry and comments are read past. */
static int sse_line(struct xfer *x, const char *line, size_t n)
{
	if (n == 0) {
		sse_dispatch(x);
		return 0;
	}
	const char *colon = memchr(line, ':', n);
	size_t name = colon ? (size_t)(colon - line) : n;
	if (name != 4 || memcmp(line, "data", 4) != 0)
		return 0;
	const char *v = colon ? colon + 1 : line + n;
	if (v < line + n && *v == ' ')
		v++;
	int r = 0;
	if (x->has_data)
		r = buf_append(&x->data, "\n", 1, DG_MCP_BRIDGE_EVENT_MAX);
	x->has_data = true;
	return r ? r : buf_append(&x->data, v, (size_t)(line + n - v), DG_MCP_BRIDGE_EVENT_MAX);
}

/* Feeds bytes of an SSE stream; every complete event goes out as it ends.
 * Lines end with CRLF, LF or CR. */
static int sse_feed(struct xfer *x, const char *p, size_t n)
{
	int r = buf_append(&x->answer, p, n, DG_MCP_BRIDGE_SSE_LINE_MAX);
	size_t start = 0;
	for (size_t i = x->scanned; !r && i < x->answer.len; i++) {
		char c = x->answer.p[i];
		if (x->after_cr) {
			x->after_cr = false;
			if (c == '\n') {
				start = i + 1;
				continue;
			}
		}
		if (c != '\n' && c != '\r')
			continue;
		x->after_cr = c == '\r';
		r = sse_line(x, x->answer.p + start, i - start);
		start = i + 1;
	}
	if (r)
		return r;
	buf_shift(&x->answer, start);
	x->scanned = x->answer.len;
	return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = size * n;
	if (x->kind == BODY_UNSEEN)
		x->kind = classify(x);
	int r = x->kind == BODY_SSE ? sse_feed(x, p, len)
				    : buf_append(&x->answer, p, len, DG_MCP_BRIDGE_EVENT_MAX);
	if (r == -E2BIG)
		x->too_big = true;
	return r ? 0 : len; /* 0 ends the transfer: CURLE_WRITE_ERROR */
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* The gateway's own words on a failed request, for the host: the message of
 * a JSON error body ({"error": {"message"}}, JSON-RPC's or the gateway's),
 * else the body's text, cut and escaped. */
static void error_text(const struct xfer *x, char *out, size_t out_len)
{
	json_t *m = json_loadb(x->answer.p ? x->answer.p : "", x->answer.len, 0, NULL);
	json_t *err = json_object_get(m, "error");
	const char *text = json_string_value(json_object_get(err, "message"));
	if (!text)
		text = json_string_value(err);
	if (text)
		dg_show_str(text, DG_MCP_BRIDGE_ERROR_TEXT_MAX, false, out, out_len);
	else if (!blank(x->answer.p, x->answer.len))
		dg_show_bytes(x->answer.p, x->answer.len, DG_MCP_BRIDGE_ERROR_TEXT_MAX, false, out,
			      out_len);
	else
		snprintf(out, out_len, "(no body)");
	json_decref(m);
}

/* A non-2xx answer whose body answers the request itself is passed on. */
static void forward_error_body(struct xfer *x)
{
	json_t *m = json_loadb(x->answer.p ? x->answer.p : "", x->answer.len, 0, NULL);
	bool ours = json_is_object(m) && answers(x, m);
	json_decref(m);
	if (ours)
		forward(x, x->answer.p, x->answer.len);
}

static void xfer_free(struct xfer *x)
{
	if (x->easy) {
		if (x->added)
			curl_multi_remove_handle(x->b->multi, x->easy);
		curl_easy_cleanup(x->easy);
	}
	free_headers(x->headers);
	free(x->body);
	json_decref(x->id);
	buf_free(&x->answer);
	buf_free(&x->data);
	free(x);
}

/* Unlinks x from the transfers in flight and frees it. */
static void xfer_end(struct bridge *b, struct xfer *x)
{
	for (struct xfer **p = &b->xfers; *p; p = &(*p)->next) {
		if (*p == x) {
			*p = x->next;
			b->inflight--;
			break;
		}
	}
	xfer_free(x);
}

/* A transfer is over: what is left of its answer goes out; a request the
 * gateway did not answer gets a JSON-RPC error (but for a 202, which answers
 * nothing, and a request the host cancelled); a 404 to a request that
 * carried the session's id ends the session. */
static void xfer_done(struct bridge *b, struct xfer *x, CURLcode cc)
{
	long status = 0;
	char *type = NULL;
	curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &type);
	if (x->kind == BODY_UNSEEN && cc == CURLE_OK)
		x->kind = classify(x);
	bool ok = cc == CURLE_OK && status >= 200 && status < 300;
	if (ok && x->kind == BODY_SSE) {
		/* A stream cut without its last blank line still counts. */
		if (x->answer.len)
			sse_line(x, x->answer.p, x->answer.len);
		sse_dispatch(x);
	} else if (ok && !blank(x->answer.p, x->answer.len)) {
		forward(x, x->answer.p, x->answer.len);
	} else if (cc == CURLE_OK && !ok && x->id) {
		forward_error_body(x);
	}

	char text[DG_MCP_BRIDGE_ERROR_TEXT_MAX * 4 + 8] = "";
	if (cc == CURLE_OK && !ok)
		error_text(x, text, sizeof(text));
	if (cc == CURLE_OK && status == 404 && x->session_gen && x->session_gen == b->session_gen) {
		say("the MCP session ended (HTTP 404 to %s: %s); the host may initialize again",
		    x->method, text);
		b->session[0] = b->version[0] = '\0';
		b->session_gen++;
	}

	char why[sizeof(text) + 256] = "";
	if (cc != CURLE_OK && x->too_big)
		snprintf(why, sizeof(why), "the gateway's answer to %s passed %u bytes", x->method,
			 DG_MCP_BRIDGE_EVENT_MAX);
	else if (cc != CURLE_OK)
		snprintf(why, sizeof(why), "POST %s: %s", b->url,
			 x->errbuf[0] ? x->errbuf : curl_easy_strerror(cc));
	else if (!ok)
		snprintf(why, sizeof(why), "POST %s: HTTP %ld: %s", b->url, status, text);
	else if (x->id && !x->answered && status != 202)
		snprintf(why, sizeof(why), "the gateway's answer to %s (HTTP %ld) ended without "
			 "its response", x->method, status);

	char id[DG_SHOW_VALUE_BUF] = "";
	if (x->id)
		dg_show_value(x->id, id, sizeof(id));
	bool said = why[0] && !x->answered;
	if (said) {
		say("%s%s%s: %s", x->method, x->id ? " " : "", id, why);
		if (x->id && !x->cancelled)
			put_error(b, x->id, -32000, "deskgate mcp: %s", why);
	} else if (x->id && !x->answered && !x->cancelled) {
		say("%s %s: the gateway answered 202 Accepted to a request: no response",
		    x->method, id);
	}
	if (b->verbose && !said)
		say("%s%s%s: HTTP %ld%s%s, %d message%s, %lld ms", x->method, x->id ? " " : "", id,
		    status, type ? " " : "", type ? type : "", x->messages,
		    x->messages == 1 ? "" : "s", dg_now_ms() - x->started_ms);
	xfer_end(b, x);
}

/* ---- the host's messages ------------------------------------------------- */

/* obj[key] as an object, created empty when absent; NULL when it is
 * something else (what the host sent stays). */
static json_t *child_object(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	if (v)
		return json_is_object(v) ? v : NULL;
	v = json_object();
	if (!v || json_object_set_new(obj, key, v) != 0)
		return NULL;
	return v;
}

/* Fills capabilities.experimental.deskgate of an initialize request from the
 * flags when the host named none; true when it did. */
static bool fill_initialize(json_t *deskgate, json_t *msg)
{
	json_t *params = json_object_get(msg, "params");
	if (!json_is_object(params))
		return false;
	json_t *caps = child_object(params, "capabilities");
	json_t *exp = caps ? child_object(caps, "experimental") : NULL;
	if (!exp || json_object_get(exp, "deskgate"))
		return false;
	return json_object_set(exp, "deskgate", deskgate) == 0;
}

/* Marks the request a notifications/cancelled names: the gateway may end its
 * answer without a response, which the host no longer waits for. */
static void note_cancel(struct bridge *b, json_t *msg)
{
	json_t *id = json_object_get(json_object_get(msg, "params"), "requestId");
	for (struct xfer *x = b->xfers; id && x; x = x->next)
		if (x->id && json_equal(x->id, id))
			x->cancelled = true;
}

/* Starts the POST of one host message: msg, parsed from its line
 * text[0..n). */
static int post(struct bridge *b, json_t *msg, const char *text, size_t n)
{
	struct xfer *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->b = b;
	x->started_ms = dg_now_ms();
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *id = json_object_get(msg, "id");
	if (method) {
		dg_show_str(method, DG_SHOW_MAX, false, x->method, sizeof(x->method));
		x->id = json_incref(id);
		x->initialize = id && strcmp(method, "initialize") == 0;
		if (!id && strcmp(method, "notifications/cancelled") == 0)
			note_cancel(b, msg);
	} else {
		snprintf(x->method, sizeof(x->method), "a response");
	}
	if (x->initialize && b->deskgate && fill_initialize(b->deskgate, msg)) {
		x->body = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
		x->body_len = x->body ? strlen(x->body) : 0;
	} else if ((x->body = malloc(n))) {
		memcpy(x->body, text, n);
		x->body_len = n;
	}
	/* initialize opens a session: it carries none. */
	x->session_gen = !x->initialize && b->session[0] ? b->session_gen : 0;
	int r = x->body ? headers_for(b, true, !x->initialize, &x->headers) : -ENOMEM;
	if (!r && !(x->easy = easy_for(b, x->headers, x->errbuf)))
		r = -ENOMEM;
	if (!r && (curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body) != CURLE_OK ||
		   curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE,
				    (curl_off_t)x->body_len) != CURLE_OK ||
		   curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
		   curl_easy_setopt(x->easy, CURLOPT_WRITEDATA, x) != CURLE_OK ||
		   curl_easy_setopt(x->easy, CURLOPT_PRIVATE, x) != CURLE_OK))
		r = -ENOMEM;
	if (!r && curl_multi_add_handle(b->multi, x->easy) != CURLM_OK)
		r = -ENOMEM;
	if (r) {
		xfer_free(x);
		return r;
	}
	x->added = true;
	x->next = b->xfers;
	b->xfers = x;
	b->inflight++;
	return 0;
}

/* One line of stdin, its line end removed: a message to post, or an error
 * for the host. */
static void take_line(struct bridge *b, const char *line, size_t n)
{
	unsigned long no = ++b->in_line;
	if (n > DG_MCP_BRIDGE_LINE_MAX) {
		say("line %lu of stdin passed %u bytes: dropped", no, DG_MCP_BRIDGE_LINE_MAX);
		put_error(b, NULL, -32700, "Parse error: deskgate mcp: line %lu of stdin passed %u "
			  "bytes: dropped", no, DG_MCP_BRIDGE_LINE_MAX);
		return;
	}
	if (blank(line, n))
		return;
	json_error_t e;
	json_t *m = json_loadb(line, n, JSON_DECODE_ANY, &e);
	if (!m) {
		char why[DG_SHOW_BUF];
		dg_show_str(e.text, DG_SHOW_MAX, false, why, sizeof(why));
		say("line %lu of stdin is not JSON (%s at byte %d)", no, why, e.position);
		put_error(b, NULL, -32700, "Parse error: deskgate mcp: line %lu of stdin is not "
			  "JSON (%s at byte %d)", no, why, e.position);
		return;
	}
	if (!json_is_object(m)) {
		say("line %lu of stdin is not a JSON object", no);
		put_error(b, NULL, -32600, "Invalid Request: deskgate mcp: line %lu of stdin is "
			  "not one JSON-RPC message, an object", no);
		json_decref(m);
		return;
	}
	int r = post(b, m, line, n);
	if (r) {
		json_t *id = json_object_get(m, "method") ? json_object_get(m, "id") : NULL;
		say("line %lu of stdin: %s", no, strerror(-r));
		if (id)
			put_error(b, id, -32000, "deskgate mcp: %s", strerror(-r));
	}
	json_decref(m);
}

/* Posts the complete lines of stdin read so far while fewer than
 * DG_MCP_BRIDGE_INFLIGHT_MAX are in flight (after EOF, the last line needs
 * no newline); the rest of a line that passes DG_MCP_BRIDGE_LINE_MAX is
 * dropped. */
static void take_lines(struct bridge *b)
{
	struct buf *in = &b->in;
	size_t start = 0;
	while (b->inflight < DG_MCP_BRIDGE_INFLIGHT_MAX) {
		char *nl = in->len > b->in_scanned
				   ? memchr(in->p + b->in_scanned, '\n', in->len - b->in_scanned)
				   : NULL;
		size_t end = nl ? (size_t)(nl - in->p) : in->len;
		if (!nl && !(b->in_eof && in->len > start)) {
			b->in_scanned = in->len;
			break;
		}
		if (b->in_skipping) {
			b->in_skipping = false;
		} else {
			size_t n = end - start;
			if (n && in->p[start + n - 1] == '\r')
				n--;
			take_line(b, in->p + start, n);
		}
		start = b->in_scanned = nl ? end + 1 : end;
	}
	buf_shift(in, start);
	b->in_scanned -= start;
	if (b->in_scanned < in->len)
		return; /* complete lines wait for room */
	if (b->in_skipping) {
		in->len = b->in_scanned = 0;
	} else if (in->len > DG_MCP_BRIDGE_LINE_MAX) {
		take_line(b, in->p, in->len); /* answers that it is too long */
		b->in_skipping = true;
		in->len = b->in_scanned = 0;
	}
}

/* One read of stdin, when poll said it would not block. */
static void read_stdin(struct bridge *b)
{
	int r = buf_reserve(&b->in, DG_MCP_BRIDGE_READ_CHUNK,
			    DG_MCP_BRIDGE_LINE_MAX + DG_MCP_BRIDGE_READ_CHUNK);
	if (r) {
		say("reading stdin: %s", strerror(-r));
		b->in_eof = true;
		return;
	}
	ssize_t n = read(STDIN_FILENO, b->in.p + b->in.len, DG_MCP_BRIDGE_READ_CHUNK);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n < 0)
		say("reading stdin: %s", strerror(errno));
	if (n <= 0)
		b->in_eof = true;
	else
		b->in.len += (size_t)n;
}

/* ---- the loop and the end -------------------------------------------------- */

/* Drops every transfer still in flight; the host gets an error for each
 * request. */
static void abandon(struct bridge *b)
{
	if (b->xfers)
		say("%d request%s still in flight: abandoned", b->inflight,
		    b->inflight == 1 ? "" : "s");
	while (b->xfers) {
		struct xfer *x = b->xfers;
		if (x->id && !x->answered && !x->cancelled)
			put_error(b, x->id, -32000, "deskgate mcp: %s: no answer from the gateway "
				  "before the bridge closed", x->method);
		xfer_end(b, x);
	}
}

/* Ends the MCP session on the gateway: DELETE with its id, bounded. */
static void end_session(struct bridge *b)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = NULL;
	CURL *e = NULL;
	long status = 0;
	CURLcode cc = CURLE_OUT_OF_MEMORY;
	if (headers_for(b, false, true, &h) == 0 && (e = easy_for(b, h, errbuf)) &&
	    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE") == CURLE_OK &&
	    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard) == CURLE_OK &&
	    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)DG_MCP_BRIDGE_DELETE_MS) == CURLE_OK)
		cc = curl_easy_perform(e);
	if (cc == CURLE_OK)
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK)
		say("ending the MCP session: DELETE %s: %s", b->url,
		    errbuf[0] ? errbuf : curl_easy_strerror(cc));
	else if (status < 200 || status >= 300)
		say("ending the MCP session: DELETE %s: HTTP %ld", b->url, status);
	else if (b->verbose)
		say("DELETE %s: HTTP %ld: the MCP session ended", b->url, status);
	curl_easy_cleanup(e);
	free_headers(h);
	b->session[0] = '\0';
}

/* Relays until stdin ends or SIGTERM/SIGINT comes, then waits for the
 * requests in flight (at most DG_MCP_BRIDGE_DRAIN_MS; a second signal stops
 * waiting) and ends the session. */
static int run(struct bridge *b)
{
	sigset_t sigs, old;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	if (sigprocmask(SIG_BLOCK, &sigs, &old) != 0) {
		int e = errno;
		say("blocking SIGTERM and SIGINT: %s", strerror(e));
		return -e;
	}
	int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		int e = errno;
		say("signalfd: %s", strerror(e));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return -e;
	}
	long long deadline = 0; /* closing: when to stop waiting */
	for (;;) {
		take_lines(b);
		int running = 0;
		curl_multi_perform(b->multi, &running);
		CURLMsg *m;
		int left;
		while ((m = curl_multi_info_read(b->multi, &left))) {
			char *x = NULL;
			if (m->msg != CURLMSG_DONE)
				continue;
			CURLcode cc = m->data.result;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &x);
			xfer_done(b, (struct xfer *)x, cc);
		}
		take_lines(b);
		long long now = dg_now_ms();
		bool pending = b->in_scanned < b->in.len; /* a complete line waits */
		if (!deadline && b->in_eof && !pending)
			deadline = now + DG_MCP_BRIDGE_DRAIN_MS;
		if (deadline && (!b->xfers || now >= deadline))
			break;
		struct curl_waitfd fds[2] = {{.fd = sfd, .events = CURL_WAIT_POLLIN}};
		unsigned nfds = 1;
		bool want_in = !b->in_eof && !pending && b->inflight < DG_MCP_BRIDGE_INFLIGHT_MAX;
		if (want_in)
			fds[nfds++] = (struct curl_waitfd){.fd = STDIN_FILENO,
							   .events = CURL_WAIT_POLLIN};
		long long wait = deadline ? deadline - now : DG_MCP_BRIDGE_POLL_MS;
		if (wait > DG_MCP_BRIDGE_POLL_MS)
			wait = DG_MCP_BRIDGE_POLL_MS;
		curl_multi_poll(b->multi, fds, nfds, (int)wait, NULL);
		if (fds[0].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				say("%s: %s", strsignal((int)si.ssi_signo),
				    deadline ? "not waiting any longer" : "closing");
				now = dg_now_ms();
				deadline = deadline ? now : now + DG_MCP_BRIDGE_DRAIN_MS;
			}
			b->in_eof = true;
		}
		if (want_in && fds[1].revents)
			read_stdin(b);
	}
	abandon(b);
	if (b->session[0])
		end_session(b);
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return 0;
}

/* ---- the command ------------------------------------------------------------ */

struct mcp_args {
	const char *url, *profile, *size, *display, *policy;
	bool verbose;
};

static const char *const mcp_profiles[] = {"browser", "xterm", NULL};

static const struct dg_opt mcp_opts[] = {
	DG_OPT_VALUE_(struct mcp_args, url, "--url", "URL", DG_OPT_REQUIRED,
		      "the gateway's MCP endpoint, http(s)://HOST:PORT/mcp"),
	DG_OPT_CHOICE_(struct mcp_args, profile, "--profile", "browser|xterm", mcp_profiles, 0,
		       "the desktop's profile, when the host's initialize names none"),
	DG_OPT_VALUE_(struct mcp_args, size, "--size", "WxH", 0,
		      "the desktop's screen size, when the host's initialize names none"),
	DG_OPT_VALUE_(struct mcp_args, display, "--display", "WxH", 0,
		      "the model's screen size, when the host's initialize names none"),
	DG_OPT_VALUE_(struct mcp_args, policy, "--policy", "NAME", 0,
		      "the gateway's policy to run under, when the host's initialize names none"),
	DG_OPT_SWITCH_(struct mcp_args, verbose, "--verbose",
		       "log each request's method and HTTP status to stderr"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_mcp_cmd = {
	.name = "mcp",
	.summary = "Bridge an MCP host's stdio (one JSON-RPC message a line) to the gateway's "
		   "MCP endpoint (streamable HTTP); the token comes from DESKGATE_TOKEN or "
		   "DESKGATE_AGENT_TOKEN.",
	.details = "--profile, --size, --display and --policy fill in\n"
		   "capabilities.experimental.deskgate of the host's initialize where it has\n"
		   "none. When stdin ends (or on SIGTERM or SIGINT) the bridge waits up to 5 s\n"
		   "for the requests in flight, ends the MCP session (DELETE) and exits.\n"
		   "exit status: 0 after stdin ended; 1 when the bridge could not run;\n"
		   "2 on a usage error or without a token.\n",
	.doc = "docs/mcp.md",
	.stdin_note = "< messages.jsonl",
	.opts = mcp_opts,
};

/* One side of "WxH": digits, 1..DG_MCP_BRIDGE_DIM_MAX; *p moves past them. */
static int parse_dim(const char **p, int *v)
{
	const char *s = *p;
	long n = 0;
	for (; *s >= '0' && *s <= '9'; s++)
		if ((n = n * 10 + (*s - '0')) > DG_MCP_BRIDGE_DIM_MAX)
			return -ERANGE;
	if (s == *p || n < 1)
		return -EINVAL;
	*p = s;
	*v = (int)n;
	return 0;
}

/* {"width": W, "height": H} from "WxH", or NULL (a usage error printed). */
static json_t *parse_dims(const char *flag, const char *text)
{
	const char *p = text;
	int w = 0, h = 0;
	if (parse_dim(&p, &w) == 0 && *p++ == 'x' && parse_dim(&p, &h) == 0 && *p == '\0')
		return json_pack("{s:i, s:i}", "width", w, "height", h);
	char shown[DG_SHOW_BUF];
	dg_show_str(text, DG_SHOW_MAX, true, shown, sizeof(shown));
	dg_opt_usage_error(&dg_mcp_cmd, "%s \"%s\": expected WIDTHxHEIGHT, digits, each 1..%d",
			   flag, shown, DG_MCP_BRIDGE_DIM_MAX);
	return NULL;
}

/* capabilities.experimental.deskgate from the flags (NULL when none is
 * given); -EINVAL after a usage error. */
static int deskgate_caps(const struct mcp_args *a, json_t **out)
{
	json_t *size = NULL, *display = NULL, *policy = NULL;
	*out = NULL;
	if ((a->size && !(size = parse_dims("--size", a->size))) ||
	    (a->display && !(display = parse_dims("--display", a->display)))) {
		json_decref(size);
		return -EINVAL;
	}
	if (a->policy && !(policy = json_string(a->policy))) {
		json_decref(size);
		json_decref(display);
		dg_opt_usage_error(&dg_mcp_cmd, "--policy: not UTF-8");
		return -EINVAL;
	}
	/* o* leaves a NULL value out; the references are stolen, also on failure. */
	json_t *caps = json_pack("{s:s*, s:o*, s:o*, s:o*}", "profile", a->profile, "size", size,
				 "display", display, "policy", policy);
	if (!caps)
		return -ENOMEM;
	if (json_object_size(caps) == 0)
		json_decref(caps);
	else
		*out = caps;
	return 0;
}

/* 0 when url is an http:// or https:// URL curl takes, with a host. */
static int check_url(const char *url)
{
	CURLU *u = curl_url();
	char *scheme = NULL;
	int r = -ENOMEM;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK)
		r = strcasecmp(scheme, "http") && strcasecmp(scheme, "https") ? -EINVAL : 0;
	else if (u)
		r = -EINVAL;
	curl_free(scheme);
	curl_url_cleanup(u);
	return r;
}

/* The token from the environment; NULL (a message printed) when there is
 * none or it cannot go in a header. */
static const char *env_token(void)
{
	const char *name = "DESKGATE_TOKEN";
	const char *t = getenv(name);
	if (!t || !*t)
		t = getenv(name = "DESKGATE_AGENT_TOKEN");
	if (!t || !*t) {
		say("no token: set DESKGATE_TOKEN (or DESKGATE_AGENT_TOKEN) to an agent token; "
		    "it is never taken from the command line");
		return NULL;
	}
	if (!token_ok(t, DG_TOKEN_MAX)) {
		say("%s is not a token (1..%d visible ASCII bytes)", name, DG_TOKEN_MAX);
		return NULL;
	}
	return t;
}

int dg_cmd_mcp(int argc, char **argv)
{
	struct mcp_args a = {0};
	int rc = dg_opt_handle(&dg_mcp_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	int r = check_url(a.url);
	if (r == -EINVAL) {
		char shown[DG_SHOW_BUF];
		dg_show_str(a.url, DG_SHOW_MAX, true, shown, sizeof(shown));
		return dg_opt_usage_error(&dg_mcp_cmd, "--url \"%s\": expected an http:// or "
					  "https:// URL", shown);
	}
	struct bridge b = {.url = a.url, .verbose = a.verbose};
	if (r == 0 && (r = deskgate_caps(&a, &b.deskgate)) == -EINVAL)
		return DG_EXIT_USAGE;
	const char *token = env_token();
	if (!token) {
		json_decref(b.deskgate);
		return DG_EXIT_USAGE;
	}
	if (r == 0 && asprintf(&b.auth, "Authorization: Bearer %s", token) < 0) {
		b.auth = NULL;
		r = -ENOMEM;
	}
	if (r == 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		r = -ENOMEM;
	bool curl_up = r == 0;
	if (r == 0 && !(b.multi = curl_multi_init()))
		r = -ENOMEM;
	/* A host that goes away is seen as EPIPE on stdout, not as a signal. */
	if (r == 0)
		signal(SIGPIPE, SIG_IGN);
	if (r == 0)
		r = run(&b);
	else
		say("cannot start: %s", strerror(-r));
	while (b.xfers) {
		struct xfer *x = b.xfers;
		b.xfers = x->next;
		xfer_free(x);
	}
	if (b.multi)
		curl_multi_cleanup(b.multi);
	if (curl_up)
		curl_global_cleanup();
	if (b.auth) {
		explicit_bzero(b.auth, strlen(b.auth));
		free(b.auth);
	}
	json_decref(b.deskgate);
	buf_free(&b.in);
	return r == 0 ? 0 : DG_MCP_BRIDGE_EXIT_FAILED;
}
