/* The egress proxy's HTTP: parsing a client's request head, rewriting an
 * absolute-form head for the origin, and the proxy's own error answers.
 * The grammar and its reasons are in egress-priv.h
 * (dg_egress_parse_request).
 *
 * Contract: no allocation, no I/O; every input byte is hostile, so each
 * function reads only within the length it is given and quotes what it
 * shows in messages through dg_show_bytes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "desktop/egress/egress-priv.h"

static int bad(struct dg_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct dg_err *err, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(err, -EINVAL, "%s", msg);
}

int dg_egress_port_parse(const char *s, size_t n, uint16_t *port)
{
	if (n < 1 || n > 5 || s[0] == '0')
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return -EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int dg_egress_host_check(const char *s, size_t n, char *host, bool *is_ip, struct dg_err *err)
{
	if (n == 0)
		return bad(err, "empty host");
	if (n > DG_URL_HOST_MAX + 2) /* brackets of an IPv6 host */
		return bad(err, "host of %zu bytes is longer than %d", n, DG_URL_HOST_MAX);
	/* Bytes dg_url_parse would read as the end of the host (or userinfo)
	 * rather than refuse: say what they are here. */
	for (size_t i = 0; i < n; i++) {
		if (strchr("/?#@\\", s[i]) || s[i] == '\0') {
			char b[DG_SHOW_BUF];
			dg_show_bytes(s + i, 1, 1, false, b, sizeof(b));
			return bad(err, "host has '%s'", b);
		}
	}
	char url[DG_URL_HOST_MAX + 16];
	snprintf(url, sizeof(url), "http://%.*s/", (int)n, s);
	struct dg_url u;
	struct dg_err e = {{0}};
	if (dg_url_parse(url, &u, &e) != 0) {
		/* dg_url_parse's messages start "url: "; the host is what failed. */
		const char *m = strncmp(e.msg, "url: ", 5) == 0 ? e.msg + 5 : e.msg;
		return bad(err, "%s", m);
	}
	if (u.port_given || strlen(u.host) != n || memcmp(u.host, s, n) != 0)
		return bad(err, "host is not in canonical form");
	memcpy(host, s, n);
	host[n] = '\0';
	*is_ip = u.host_is_ip;
	return 0;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static void show(const char *s, size_t n, char *out, size_t len)
{
	dg_show_bytes(s, n, DG_SHOW_MAX, true, out, len);
}

/* CONNECT's authority-form target. */
static int parse_authority(const char *t, size_t n, struct dg_egress_req *r, struct dg_err *err)
{
	char shown[DG_SHOW_BUF];
	show(t, n, shown, sizeof(shown));
	const char *colon;
	if (n && t[0] == '[') {
		const char *rb = memchr(t, ']', n);
		if (!rb)
			return bad(err, "CONNECT target \"%s\": IPv6 host without ']'", shown);
		colon = rb + 1 < t + n && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memrchr(t, ':', n);
	}
	if (!colon)
		return bad(err, "CONNECT target \"%s\" must be host:port with an explicit port",
			   shown);
	size_t hl = (size_t)(colon - t);
	if (dg_egress_port_parse(colon + 1, n - hl - 1, &r->port) != 0)
		return bad(err, "CONNECT target \"%s\": the port must be 1-65535 in decimal "
			   "without leading zeros", shown);
	struct dg_err e = {{0}};
	if (dg_egress_host_check(t, hl, r->host, &r->host_is_ip, &e) != 0)
		return bad(err, "CONNECT target \"%s\": %s", shown, e.msg);
	return 0;
}

/* Absolute-form target of any other method. */
static int parse_absolute(const char *buf, size_t t_off, size_t n, struct dg_egress_req *r,
			  struct dg_err *err)
{
	const char *t = buf + t_off;
	char shown[DG_SHOW_BUF];
	show(t, n, shown, sizeof(shown));
	if (t[0] == '/')
		return bad(err, "origin-form request target \"%s\": this is a proxy; send the "
			   "absolute http:// URL (or CONNECT for https)", shown);
	if (n == 1 && t[0] == '*')
		return bad(err, "asterisk-form request target is not supported");
	if (n > DG_URL_MAX)
		return bad(err, "request target of %zu bytes is longer than %d", n, DG_URL_MAX);
	if (memchr(t, '#', n))
		return bad(err, "request target \"%s\" has a fragment ('#')", shown);
	char url[DG_URL_MAX + 1];
	memcpy(url, t, n);
	url[n] = '\0';
	struct dg_url u;
	struct dg_err e = {{0}};
	if (dg_url_parse(url, &u, &e) != 0)
		return bad(err, "request target \"%s\": %s", shown, e.msg);
	if (u.https)
		return bad(err, "request target \"%s\" is https:// in plain HTTP: HTTPS must use "
			   "CONNECT", shown);
	memcpy(r->host, u.host, sizeof(r->host));
	r->host_is_ip = u.host_is_ip;
	r->port = u.port;
	r->path_off = t_off + (size_t)(u.path - url);
	r->path_len = n - (size_t)(u.path - url);
	return 0;
}

/* The origin-form target of a WebSocket handshake read in a SOCKS tunnel
 * (dg_egress_parse_ws_handshake): r->host and r->port are the tunnel's. */
static int parse_origin_form(size_t t_off, size_t n, const char *buf, struct dg_egress_req *r,
			     struct dg_err *err)
{
	const char *t = buf + t_off;
	char shown[DG_SHOW_BUF];
	show(t, n, shown, sizeof(shown));
	if (t[0] != '/')
		return bad(err, "WebSocket handshake target \"%s\" is not a path", shown);
	char url[DG_URL_MAX + 1];
	int k = snprintf(url, sizeof(url), "ws://%s", r->host);
	if (r->port != 80)
		k += snprintf(url + k, sizeof(url) - (size_t)k, ":%u", r->port);
	if ((size_t)k + n > DG_URL_MAX)
		return bad(err, "WebSocket URL of %zu bytes is longer than %d", (size_t)k + n,
			   DG_URL_MAX);
	memcpy(url + k, t, n);
	url[(size_t)k + n] = '\0';
	struct dg_url u;
	struct dg_err e = {{0}};
	if (dg_url_parse_ws(url, &u, &e) != 0)
		return bad(err, "WebSocket handshake target \"%s\": %s", shown, e.msg);
	r->path_off = t_off;
	r->path_len = n;
	return 0;
}

static int parse_request_line(const char *buf, size_t n, struct dg_egress_req *r, bool tunneled,
			      struct dg_err *err)
{
	const char *line = buf;
	size_t m = 0;
	while (m < n && line[m] >= 'A' && line[m] <= 'Z')
		m++;
	if (m == 0)
		return bad(err, "the request line does not start with a method (A-Z)");
	if (m > DG_EGRESS_METHOD_MAX)
		return bad(err, "method longer than %d bytes", DG_EGRESS_METHOD_MAX);
	if (m == n || line[m] != ' ') {
		char b[DG_SHOW_BUF];
		show(line + m, 1, b, sizeof(b));
		return bad(err, "method followed by \"%s\" instead of one space", b);
	}
	memcpy(r->method, line, m);
	r->method[m] = '\0';
	size_t t0 = m + 1, t1 = t0;
	while (t1 < n && line[t1] != ' ')
		t1++;
	if (t1 == t0)
		return bad(err, "empty request target (or more than one space)");
	if (t1 == n)
		return bad(err, "no HTTP version after the request target (HTTP/0.9 is not "
			   "supported)");
	const char *v = line + t1 + 1;
	size_t vn = n - t1 - 1;
	if (vn == 8 && memcmp(v, "HTTP/1.1", 8) == 0) {
		r->minor = 1;
	} else if (vn == 8 && memcmp(v, "HTTP/1.0", 8) == 0) {
		r->minor = 0;
	} else {
		char b[DG_SHOW_BUF];
		show(v, vn, b, sizeof(b));
		return bad(err, "HTTP version \"%s\": only HTTP/1.1 and HTTP/1.0 are served", b);
	}
	if (tunneled) {
		if (strcmp(r->method, "GET") != 0 || r->minor != 1)
			return bad(err, "a WebSocket handshake is GET ... HTTP/1.1, not %s ... HTTP/1.%d",
				   r->method, r->minor);
		return parse_origin_form(t0, t1 - t0, buf, r, err);
	}
	r->connect = strcmp(r->method, "CONNECT") == 0;
	if (r->connect)
		return parse_authority(line + t0, t1 - t0, r, err);
	return parse_absolute(buf, t0, t1 - t0, r, err);
}

/* The value of a header line without the optional whitespace around it. */
static void trim_ows(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t')) {
		(*v)++;
		(*n)--;
	}
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

/* Whether a Host value names the request's host, with or without its port. */
static bool host_matches(const struct dg_egress_req *r, const char *v, size_t n)
{
	size_t hl = strlen(r->host);
	if (n < hl || strncasecmp(v, r->host, hl) != 0)
		return false;
	if (n == hl)
		return true;
	char p[8];
	int pl = snprintf(p, sizeof(p), ":%u", r->port);
	return n == hl + (size_t)pl && memcmp(v + hl, p, (size_t)pl) == 0;
}

/* Whether a header value, a comma-separated list of tokens, holds want
 * (case-insensitively) as one of them. */
static bool has_token(const char *v, size_t n, const char *want)
{
	size_t wl = strlen(want);
	for (size_t i = 0; i <= n;) {
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		const char *t = v + i;
		size_t tl = j - i;
		trim_ows(&t, &tl);
		if (tl == wl && strncasecmp(t, want, wl) == 0)
			return true;
		i = j + 1;
	}
	return false;
}

static int parse_header(const char *line, size_t n, const struct dg_egress_req *r, int *hosts,
			int *upgrades, struct dg_err *err)
{
	if (line[0] == ' ' || line[0] == '\t')
		return bad(err, "obs-fold (a header line starting with whitespace) is not allowed");
	size_t c = 0;
	while (c < n && is_tchar((unsigned char)line[c]))
		c++;
	if (!memchr(line, ':', n)) {
		char l[DG_SHOW_BUF];
		show(line, n, l, sizeof(l));
		return bad(err, "header line \"%s\" has no ':'", l);
	}
	if (line[c] != ':') {
		char b[DG_SHOW_BUF], name[DG_SHOW_BUF];
		show(line + c, 1, b, sizeof(b));
		show(line, c, name, sizeof(name));
		if (line[c] == ' ' || line[c] == '\t')
			return bad(err, "header \"%s\": whitespace between the name and ':'", name);
		return bad(err, "header line has \"%s\" where a name character or ':' belongs "
			   "(after \"%s\")", b, name);
	}
	if (c == 0)
		return bad(err, "header line with an empty name");
	const char *v = line + c + 1;
	size_t vn = n - c - 1;
	for (size_t i = 0; i < vn; i++) {
		unsigned char ch = (unsigned char)v[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
			char name[DG_SHOW_BUF];
			show(line, c, name, sizeof(name));
			return bad(err, "header \"%s\": control byte 0x%02x in its value", name, ch);
		}
	}
	if (c == 4 && strncasecmp(line, "host", 4) == 0) {
		if (++*hosts > 1)
			return bad(err, "more than one Host header");
		trim_ows(&v, &vn);
		if (!host_matches(r, v, vn)) {
			char b[DG_SHOW_BUF];
			show(v, vn, b, sizeof(b));
			return bad(err, "Host header \"%s\" does not name the target %s:%u", b,
				   r->host, r->port);
		}
	}
	if (upgrades && c == 7 && strncasecmp(line, "upgrade", 7) == 0) {
		trim_ows(&v, &vn);
		if (++*upgrades > 1 || !has_token(v, vn, "websocket")) {
			char b[DG_SHOW_BUF];
			show(v, vn, b, sizeof(b));
			return bad(err, "Upgrade header \"%s\": a WebSocket handshake has one, "
				   "\"websocket\"", b);
		}
	}
	return 0;
}

/* The head of a proxy request (tunneled false) or of a WebSocket handshake
 * in a SOCKS tunnel (tunneled: out's host and port are set already). */
static int parse_head(const char *buf, size_t len, struct dg_egress_req *out, bool tunneled,
		      struct dg_err *err)
{
	int upgrades = 0;
	size_t lim = len < DG_EGRESS_HEAD_MAX ? len : DG_EGRESS_HEAD_MAX;
	size_t pos = 0;
	int hosts = 0;
	for (int line_no = 0;; line_no++) {
		size_t e = pos;
		/* Forbidden bytes are refused as soon as they are seen, so a
		 * hostile client learns at once, not after the timeout. */
		while (e < lim && buf[e] != '\n') {
			if (buf[e] == '\0')
				return bad(err, "NUL byte at offset %zu of the request head", e);
			if (buf[e] == '\r' && e + 1 < lim && buf[e + 1] != '\n')
				return bad(err, "bare CR at offset %zu of the request head", e);
			e++;
		}
		if (e == lim) {
			if (len >= DG_EGRESS_HEAD_MAX)
				return dg_err_set(err, -E2BIG, "the request head is longer than %d bytes",
						  DG_EGRESS_HEAD_MAX);
			return -EAGAIN;
		}
		if (e == pos || buf[e - 1] != '\r')
			return bad(err, "bare LF at offset %zu: lines must end with CRLF", e);
		size_t n = e - 1 - pos;
		const char *line = buf + pos;
		if (line_no == 0) {
			if (n == 0)
				return bad(err, "empty request line");
			int rc = parse_request_line(buf, n, out, tunneled, err);
			if (rc)
				return rc;
			out->headers_off = e + 1;
		} else if (n == 0) {
			out->head_len = e + 1;
			break;
		} else {
			int rc = parse_header(line, n, out, &hosts, tunneled ? &upgrades : NULL, err);
			if (rc)
				return rc;
		}
		pos = e + 1;
	}
	if (!out->connect && out->minor == 1 && hosts == 0)
		return bad(err, "HTTP/1.1 request without a Host header");
	if (tunneled && upgrades == 0)
		return bad(err, "no \"Upgrade: websocket\" header: the SOCKS front carries "
			   "WebSocket handshakes only");
	return 0;
}

int dg_egress_parse_request(const char *buf, size_t len, struct dg_egress_req *out,
			    struct dg_err *err)
{
	memset(out, 0, sizeof(*out));
	return parse_head(buf, len, out, false, err);
}

int dg_egress_parse_ws_handshake(const char *buf, size_t len, const char *host, uint16_t port,
				 struct dg_egress_req *out, struct dg_err *err)
{
	memset(out, 0, sizeof(*out));
	if (strlen(host) > DG_URL_HOST_MAX)
		return bad(err, "host longer than %d bytes", DG_URL_HOST_MAX);
	snprintf(out->host, sizeof(out->host), "%s", host);
	out->port = port;
	return parse_head(buf, len, out, true, err);
}

/* ---- SOCKS5 (RFC 1928), the browser's WebSockets ------------------------ */

int dg_egress_socks_greeting(const char *buf, size_t len, size_t *used, struct dg_err *err)
{
	const unsigned char *b = (const unsigned char *)buf;
	if (len < 1)
		return -EAGAIN;
	if (b[0] != DG_EGRESS_SOCKS_VERSION)
		return bad(err, "SOCKS version %u: only SOCKS5 is served", b[0]);
	if (len < 2)
		return -EAGAIN;
	if (b[1] == 0)
		return bad(err, "SOCKS5 greeting offers no method");
	if (len < 2 + (size_t)b[1])
		return -EAGAIN;
	*used = 2 + (size_t)b[1];
	if (!memchr(b + 2, 0x00, b[1]))
		return dg_err_set(err, -EACCES, "SOCKS5 greeting without \"no authentication\": "
				  "the proxy asks for no credentials");
	return 0;
}

int dg_egress_socks_request(const char *buf, size_t len, struct dg_egress_req *out, size_t *used,
			    uint8_t *reply, struct dg_err *err)
{
	const unsigned char *b = (const unsigned char *)buf;
	memset(out, 0, sizeof(*out));
	*reply = DG_EGRESS_SOCKS_FAILURE;
	if (len < 4)
		return len > 0 && b[0] != DG_EGRESS_SOCKS_VERSION ?
			       bad(err, "SOCKS request of version %u", b[0]) : -EAGAIN;
	if (b[0] != DG_EGRESS_SOCKS_VERSION)
		return bad(err, "SOCKS request of version %u", b[0]);
	if (b[1] != 0x01) {
		*reply = DG_EGRESS_SOCKS_COMMAND;
		return bad(err, "SOCKS5 command %u: only CONNECT (1) is served", b[1]);
	}
	if (b[2] != 0)
		return bad(err, "SOCKS5 request with a non-zero reserved byte");
	size_t alen;
	if (b[3] == 0x01) {
		alen = 4;
	} else if (b[3] == 0x03) {
		if (len < 5)
			return -EAGAIN;
		alen = 1 + (size_t)b[4];
		if (b[4] == 0)
			return bad(err, "SOCKS5 request with an empty host name");
	} else {
		*reply = DG_EGRESS_SOCKS_ADDRESS;
		return bad(err, "SOCKS5 address type %u: only a host name (3) or an IPv4 address "
			   "(1) is served", b[3]);
	}
	if (len < 4 + alen + 2)
		return -EAGAIN;
	struct dg_err e = {{0}};
	if (b[3] == 0x01) {
		char ip[16];
		int k = snprintf(ip, sizeof(ip), "%u.%u.%u.%u", b[4], b[5], b[6], b[7]);
		if (dg_egress_host_check(ip, (size_t)k, out->host, &out->host_is_ip, &e) != 0)
			return bad(err, "SOCKS5 address %s: %s", ip, e.msg);
	} else if (dg_egress_host_check((const char *)b + 5, b[4], out->host, &out->host_is_ip, &e) != 0) {
		return bad(err, "SOCKS5 host: %s", e.msg);
	}
	out->port = (uint16_t)(b[4 + alen] << 8 | b[4 + alen + 1]);
	if (out->port == 0)
		return bad(err, "SOCKS5 request for port 0");
	snprintf(out->method, sizeof(out->method), "SOCKS5");
	*used = 4 + alen + 2;
	*reply = DG_EGRESS_SOCKS_OK;
	return 0;
}

size_t dg_egress_socks_reply(uint8_t code, char out[DG_EGRESS_SOCKS_REPLY_LEN])
{
	/* VER REP RSV ATYP=IPv4 BND.ADDR=0.0.0.0 BND.PORT=0: the client learns
	 * nothing of the proxy's own address. */
	static const char tmpl[DG_EGRESS_SOCKS_REPLY_LEN] = {5, 0, 0, 1, 0, 0, 0, 0, 0, 0};
	memcpy(out, tmpl, sizeof(tmpl));
	out[1] = (char)code;
	return sizeof(tmpl);
}

/* Whether a header line's name is one the proxy does not pass on. */
static bool hop_by_hop(const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);
	size_t c = colon ? (size_t)(colon - line) : n;
	if (c >= 6 && strncasecmp(line, "proxy-", 6) == 0)
		return true;
	return (c == 10 && strncasecmp(line, "connection", 10) == 0) ||
	       (c == 10 && strncasecmp(line, "keep-alive", 10) == 0);
}

int dg_egress_rewrite_head(const char *buf, const struct dg_egress_req *r, char *out, size_t cap)
{
	size_t o = 0;
#define PUT(p, n)                                      \
	do {                                           \
		size_t n_ = (n);                       \
		if (o + n_ > cap)                      \
			return -E2BIG;                 \
		memcpy(out + o, (p), n_);              \
		o += n_;                               \
	} while (0)
	PUT(r->method, strlen(r->method));
	PUT(" ", 1);
	PUT(buf + r->path_off, r->path_len);
	PUT(r->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
	size_t end = r->head_len - 2; /* the final empty line */
	for (size_t pos = r->headers_off; pos < end;) {
		const char *nl = memchr(buf + pos, '\n', end - pos);
		size_t next = (size_t)(nl - buf) + 1;
		if (!hop_by_hop(buf + pos, next - pos))
			PUT(buf + pos, next - pos);
		pos = next;
	}
	PUT("Connection: close\r\n\r\n", DG_EGRESS_REWRITE_EXTRA + 2);
#undef PUT
	return (int)o;
}

static const char *status_text(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 429:
		return "Too Many Requests";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Error";
	}
}

size_t dg_egress_error_response(int status, const char *rule, const char *reason, char *out,
				size_t cap)
{
	/* The body is one line; reasons are built from checked or quoted text,
	 * but a CR or LF would still end the line early, so any is replaced. */
	char body[DG_EGRESS_REASON_MAX + 64];
	int bl = snprintf(body, sizeof(body), "deskgate egress: %.*s\n", DG_EGRESS_REASON_MAX,
			  reason ? reason : "refused");
	if (bl < 0)
		bl = 0;
	if ((size_t)bl >= sizeof(body))
		bl = (int)sizeof(body) - 1;
	for (int i = 0; i < bl - 1; i++)
		if (body[i] == '\r' || body[i] == '\n' || (unsigned char)body[i] < 0x20)
			body[i] = ' ';
	body[bl - 1] = '\n';
	char rule_line[DG_DECISION_RULE_MAX + 32] = "";
	if (rule)
		snprintf(rule_line, sizeof(rule_line), "X-Deskgate-Rule: %s\r\n", rule);
	int hl = snprintf(out, cap,
			  "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			  "Content-Length: %d\r\nConnection: close\r\n%s\r\n",
			  status, status_text(status), bl, rule_line);
	if (hl < 0 || (size_t)hl + (size_t)bl >= cap)
		return 0;
	memcpy(out + hl, body, (size_t)bl);
	out[hl + bl] = '\0';
	return (size_t)hl + (size_t)bl;
}
