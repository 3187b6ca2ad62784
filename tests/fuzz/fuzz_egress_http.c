/* fuzz_egress_http: the egress proxy's request-head parser and rewriter
 * (desktop/egress/egress-priv.h), fed what a jailed client sends to the proxy.
 *
 * Input: the bytes the proxy has read from a connection (a request head,
 * possibly followed by body or tunnel bytes, possibly incomplete).
 * Checked, besides the sanitizers:
 *  - results are those documented (0, -EAGAIN, -E2BIG, -EINVAL);
 *  - for a parsed head: offsets lie inside it; every strict prefix of the
 *    head is -EAGAIN (the proxy parses again as bytes arrive, and must not
 *    refuse or accept a head early); the head alone parses the same;
 *  - absolute-form: the rewrite fits r->head_len + DG_EGRESS_REWRITE_EXTRA,
 *    is refused (-E2BIG) one byte short, starts with METHOD SP path, ends
 *    with "Connection: close" and an empty line, and passes no Proxy-*,
 *    Connection or Keep-Alive header on;
 *  - the parsed host:port is decided by a policy's egress allowlist, and
 *    the error answer the proxy would send for the refusal fits its
 *    buffer and keeps the reason on one line;
 *  - the same bytes as what follows a SOCKS5 answer (the SOCKS front): as a
 *    WebSocket handshake to a.test:8080, whose every strict prefix is
 *    -EAGAIN, whose target makes a ws:// URL dg_url_parse_ws accepts; and
 *    as a SOCKS5 greeting and request, read only within their lengths. */
#include <errno.h>
#include <strings.h>

#include "egress-priv.h"
#include "fuzz_common.h"
#include "policy/policy.h"

static struct dg_policy policy;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static const char text[] = "{\"version\":1,\"default\":\"deny\",\"egress\":{\"allow\":["
				   "\"example.com:443\",\"*.example.org:80\",\"a.test:8080\","
				   "\"93.184.216.34:443\"]}}";
	struct dg_err err = {{0}};
	if (dg_policy_parse(text, sizeof(text) - 1, "fuzz_egress_http", &policy, &err) != 0) {
		fprintf(stderr, "fuzz_egress_http: the built-in policy does not load: %s\n", err.msg);
		abort();
	}
	return 0;
}

static bool same_req(const struct dg_egress_req *a, const struct dg_egress_req *b)
{
	return a->connect == b->connect && strcmp(a->method, b->method) == 0 &&
	       strcmp(a->host, b->host) == 0 && a->host_is_ip == b->host_is_ip &&
	       a->port == b->port && a->minor == b->minor && a->head_len == b->head_len &&
	       a->path_off == b->path_off && a->path_len == b->path_len &&
	       a->headers_off == b->headers_off;
}

static void check_rewrite(const char *buf, const struct dg_egress_req *r)
{
	size_t cap = r->head_len + DG_EGRESS_REWRITE_EXTRA;
	char *out = malloc(cap);
	DG_FUZZ_CHECK(out, "out of memory");
	int n = dg_egress_rewrite_head(buf, r, out, cap);
	DG_FUZZ_CHECK(n > 0 && (size_t)n <= cap, "rewrite: %d for cap %zu", n, cap);
	size_t ml = strlen(r->method);
	DG_FUZZ_CHECK((size_t)n > ml + 1 + r->path_len && memcmp(out, r->method, ml) == 0 &&
		      out[ml] == ' ' && memcmp(out + ml + 1, buf + r->path_off, r->path_len) == 0,
		      "the rewritten request line is not METHOD SP path");
	static const char tail[] = "Connection: close\r\n\r\n";
	DG_FUZZ_CHECK((size_t)n >= sizeof(tail) - 1 &&
		      memcmp(out + n - (sizeof(tail) - 1), tail, sizeof(tail) - 1) == 0,
		      "the rewrite does not end with Connection: close");
	/* Header lines: after the request line, before the closing ones. */
	const char *p = memchr(out, '\n', (size_t)n);
	const char *end = out + n - (sizeof(tail) - 1);
	DG_FUZZ_CHECK(p != NULL, "no request line end");
	for (p++; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		DG_FUZZ_CHECK(nl != NULL, "a header line without its end");
		size_t len = (size_t)(nl - p) + 1;
		DG_FUZZ_CHECK(!(len >= 6 && strncasecmp(p, "proxy-", 6) == 0) &&
			      !(len >= 11 && strncasecmp(p, "connection:", 11) == 0) &&
			      !(len >= 11 && strncasecmp(p, "keep-alive:", 11) == 0),
			      "a hop-by-hop header is passed on: %.*s", (int)len, p);
		p = nl + 1;
	}
	if (n > 1) {
		int k = dg_egress_rewrite_head(buf, r, out, (size_t)n - 1);
		DG_FUZZ_CHECK(k == -E2BIG, "rewrite into %d bytes gives %d", n - 1, k);
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2 * DG_EGRESS_HEAD_MAX)
		return 0; /* the proxy reads at most its buffer */
	char *buf = dg_fuzz_dup(data, size);
	struct dg_egress_req r;
	struct dg_err err = {{0}};
	int rc = dg_egress_parse_request(buf, size, &r, &err);
	DG_FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -E2BIG || rc == -EINVAL,
		      "dg_egress_parse_request: %d", rc);
	if (rc == -E2BIG)
		DG_FUZZ_CHECK(size >= DG_EGRESS_HEAD_MAX, "-E2BIG for %zu bytes", size);
	if (rc == -EINVAL || rc == -E2BIG)
		DG_FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");

	char answer[DG_EGRESS_RESPONSE_MAX];
	if (rc == 0) {
		DG_FUZZ_CHECK(r.head_len >= 4 && r.head_len <= size && r.head_len <= DG_EGRESS_HEAD_MAX,
			      "head_len %zu of %zu", r.head_len, size);
		DG_FUZZ_CHECK(memcmp(buf + r.head_len - 4, "\r\n\r\n", 4) == 0,
			      "the head does not end with an empty line");
		DG_FUZZ_CHECK(r.headers_off <= r.head_len - 2, "headers_off %zu", r.headers_off);
		DG_FUZZ_CHECK(r.minor == 0 || r.minor == 1, "minor %d", r.minor);
		DG_FUZZ_CHECK(r.port != 0, "port 0");
		DG_FUZZ_CHECK(r.host[0] != '\0', "empty host");
		/* Every strict prefix is an incomplete head. Checked at 16 spread
		 * points and at every byte of the request line and the first
		 * header line (the first 256 bytes at most) and of the last 8,
		 * where the parser's state changes most: all prefixes would make
		 * an input quadratic. */
		struct dg_egress_req r2;
		size_t step = r.head_len / 16 ? r.head_len / 16 : 1;
		const char *second = memchr(buf + r.headers_off, '\n', r.head_len - r.headers_off);
		size_t dense = second ? (size_t)(second - buf) + 2 : r.head_len;
		if (dense > 256)
			dense = 256;
		for (size_t k = 0; k < r.head_len; k++) {
			if (k > dense && k + 8 < r.head_len && k % step)
				continue;
			int p = dg_egress_parse_request(buf, k, &r2, &err);
			DG_FUZZ_CHECK(p == -EAGAIN, "prefix of %zu bytes of a %zu-byte head: %d (%s)", k,
				      r.head_len, p, err.msg);
		}
		int p = dg_egress_parse_request(buf, r.head_len - 1, &r2, &err);
		DG_FUZZ_CHECK(p == -EAGAIN, "the head less one byte: %d (%s)", p, err.msg);
		p = dg_egress_parse_request(buf, r.head_len, &r2, &err);
		DG_FUZZ_CHECK(p == 0 && same_req(&r, &r2), "the head alone parses differently: %d", p);
		if (!r.connect) {
			DG_FUZZ_CHECK(r.path_off + r.path_len < r.headers_off,
				      "path past the request line");
			DG_FUZZ_CHECK(r.path_len >= 1 && buf[r.path_off] == '/', "path");
			check_rewrite(buf, &r);
		}
		struct dg_decision d;
		int k = dg_policy_decide_egress(&policy, r.host, r.port, &d);
		DG_FUZZ_CHECK(k == 0, "dg_policy_decide_egress: %d", k);
		if (d.verdict != DG_VERDICT_ALLOW) {
			size_t n = dg_egress_error_response(403, d.rule, d.reason, answer, sizeof(answer));
			DG_FUZZ_CHECK(n > 0 && n < sizeof(answer), "403 answer: %zu", n);
		}
	} else if (rc != -EAGAIN) {
		/* The 400 answer quotes the parser's reason, which quotes the
		 * client's bytes: its body must stay one line. */
		size_t n = dg_egress_error_response(400, "egress.request", err.msg, answer,
						    sizeof(answer));
		DG_FUZZ_CHECK(n > 0 && n < sizeof(answer), "400 answer: %zu", n);
		const char *body = strstr(answer, "\r\n\r\n");
		DG_FUZZ_CHECK(body != NULL, "an answer without a head");
		body += 4;
		const char *nl = strchr(body, '\n');
		DG_FUZZ_CHECK(nl && nl[1] == '\0' && !strchr(body, '\r'),
			      "the answer's body is not one line: %s", body);
	}

	/* The SOCKS front's parsers on the same bytes. */
	rc = dg_egress_parse_ws_handshake(buf, size, "a.test", 8080, &r, &err);
	DG_FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -E2BIG || rc == -EINVAL,
		      "dg_egress_parse_ws_handshake: %d", rc);
	if (rc == 0) {
		DG_FUZZ_CHECK(r.head_len >= 4 && r.head_len <= size, "ws head_len %zu", r.head_len);
		DG_FUZZ_CHECK(r.path_len >= 1 && buf[r.path_off] == '/' &&
			      r.path_off + r.path_len < r.headers_off, "ws target");
		char url[DG_URL_MAX + 32];
		int n = snprintf(url, sizeof(url), "ws://a.test:8080%.*s", (int)r.path_len,
				 buf + r.path_off);
		struct dg_url u;
		DG_FUZZ_CHECK(n > 0 && dg_url_parse_ws(url, &u, &err) == 0,
			      "an accepted handshake's URL is refused: %s", err.msg);
		struct dg_egress_req r2;
		size_t step = r.head_len / 16 ? r.head_len / 16 : 1;
		for (size_t k = 0; k < r.head_len; k += step) {
			int p = dg_egress_parse_ws_handshake(buf, k, "a.test", 8080, &r2, &err);
			DG_FUZZ_CHECK(p == -EAGAIN, "ws prefix of %zu bytes: %d", k, p);
		}
		int p = dg_egress_parse_ws_handshake(buf, r.head_len - 1, "a.test", 8080, &r2, &err);
		DG_FUZZ_CHECK(p == -EAGAIN, "the ws head less one byte: %d", p);
	}
	size_t used = 0;
	rc = dg_egress_socks_greeting(buf, size, &used, &err);
	DG_FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EACCES || rc == -EINVAL,
		      "dg_egress_socks_greeting: %d", rc);
	if (rc == 0 || rc == -EACCES)
		DG_FUZZ_CHECK(used >= 3 && used <= size, "greeting of %zu bytes of %zu", used, size);
	uint8_t code = 0;
	used = 0;
	rc = dg_egress_socks_request(buf, size, &r, &used, &code, &err);
	DG_FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EINVAL, "dg_egress_socks_request: %d", rc);
	if (rc == 0) {
		DG_FUZZ_CHECK(used >= 8 && used <= size && code == DG_EGRESS_SOCKS_OK && r.port != 0 &&
			      r.host[0], "socks request: used %zu, code %u", used, code);
		struct dg_egress_req r2;
		for (size_t k = 0; k < used; k++)
			DG_FUZZ_CHECK(dg_egress_socks_request(buf, k, &r2, &used, &code, &err) == -EAGAIN,
				      "socks prefix of %zu bytes is not incomplete", k);
	} else if (rc == -EINVAL) {
		DG_FUZZ_CHECK(code != DG_EGRESS_SOCKS_OK && err.msg[0], "a refusal with code 0");
	}

	/* The port parser on the first bytes, as CONNECT and overrides use it. */
	uint16_t port;
	if (dg_egress_port_parse(buf, size < 8 ? size : 8, &port) == 0)
		DG_FUZZ_CHECK(port != 0, "port 0 accepted");
	free(buf);
	return 0;
}
