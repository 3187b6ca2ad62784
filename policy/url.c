/* policy: the strict URL checker (dg_url_parse, declared in policy.h).
 *
 * Everything an agent sends is hostile, and the policy, the browser and the
 * egress proxy must read a URL the same way. So this checker does not parse
 * URLs in general: it accepts only text that is already in the form the
 * WHATWG URL parser (which Chromium and Node follow) would serialize it to,
 * restricted further to a small, plain subset. For every accepted input:
 *
 *   new URL(input).href     == input
 *   new URL(input).hostname == u.host   (IPv6 with its brackets)
 *   new URL(input).port     == the explicit port, or "" when none was given
 *
 * tests/unit/test_url.c proves this on the web-platform-tests URL suite and
 * tests/unit/test_url_node.c on generated inputs against Node's new URL().
 * Where the browser would rewrite something (a default port, a dot segment,
 * an escape it adds, a host it maps) the input is refused rather than
 * normalized: the caller then never holds a URL that means two things.
 *
 * Accepted grammar (ASCII only, no byte <= 0x20, no DEL, no backslash):
 *   url      = ("http" | "https") "://" host [":" port] path ["?" query]
 *              ["#" fragment]
 *   host     = domain | ipv4 | "[" ipv6 "]"
 *   domain   = label *("." label), labels of [a-z0-9-], 1..63 bytes, not
 *              starting or ending with "-"; a label starting with "xn--"
 *              must be punycode that libidn2 decodes and encodes back to
 *              exactly the same label (IDNA2008, non-transitional, as
 *              WHATWG's UTS #46 processing); the
 *              last label does not look numeric (else it must be an ipv4);
 *              at most DG_URL_HOST_MAX bytes; no trailing dot
 *   ipv4     = four decimal parts 0..255 without leading zeros
 *   ipv6     = the WHATWG serialization of an address (lowercase hex, no
 *              leading zeros, the first longest run of 2+ zero groups
 *              compressed, no embedded dotted quad)
 *   port     = 1..65535, decimal, no leading zero, not the scheme's default
 *   path     = "/" *(pchar | "/"), no "." or ".." segment (also spelled
 *              with %2e)
 *   query    = *(pchar | "/" | "?") without "'" (WHATWG escapes it there)
 *   fragment = *(pchar | "/" | "?")
 *   pchar    = ALPHA | DIGIT | "-._~!$&'()*+,;=:@" | "%" HEXDIG HEXDIG
 *
 * dg_url_parse_ws also accepts "ws" and "wss" (WHATWG special schemes
 * with the same rules and the same default ports 80 and 443 as http and
 * https), without a fragment, which a WebSocket URL cannot have (the
 * WebSocket constructor throws on one).
 *
 * Refused on purpose, although a browser would load them unchanged:
 * punycode labels that do not round-trip through libidn2 (IDNA2008 is
 * stricter than UTS #46 for some symbols), port 0, empty labels,
 * characters outside RFC 3986's pchar such as []^|{}` and a lone '%'.
 * When unsure, refuse.
 */
#include <arpa/inet.h>
#include <idn2.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

/* Records "url: <message>" and returns -EINVAL. */
static int refuse(struct dg_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct dg_err *err, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(err, -EINVAL, "url: %s", msg);
}

/* Writes c for a message: printable ASCII as 'c', anything else as 0xNN, so
 * a hostile byte cannot forge or garble a log line. */
static const char *show_char(unsigned char c, char out[8])
{
	if (c > 0x20 && c < 0x7f && c != '\'')
		snprintf(out, 8, "'%c'", c);
	else
		snprintf(out, 8, "0x%02x", c);
	return out;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* RFC 3986 pchar minus '%' (escapes are checked by the caller): the
 * characters no WHATWG percent-encode set contains, so a browser leaves
 * them as they are in path, query and fragment alike. */
static bool is_pchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c))
		return true;
	return c != '\0' && strchr("-._~!$&'()*+,;=:@", c) != NULL;
}

/* ---- hosts --------------------------------------------------------------- */

/* Whether [s, s+n) is one canonical decimal IPv4 part: 0..255, no leading
 * zero. */
static bool ipv4_part(const char *s, size_t n)
{
	if (n < 1 || n > 3 || (n > 1 && s[0] == '0'))
		return false;
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	return v <= 255;
}

/* Whether [s, s+n) is a canonical dotted quad: exactly what WHATWG
 * serializes an IPv4 host to. */
static bool ipv4_canonical(const char *s, size_t n)
{
	size_t start = 0;
	int parts = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		if (++parts > 4 || !ipv4_part(s + start, i - start))
			return false;
		start = i + 1;
	}
	return parts == 4;
}

/* Whether a label makes WHATWG treat the host as an IPv4 address ("ends in
 * a number"): all decimal digits, or "0x" followed by hex digits (none
 * included). Such a host either parses as IPv4 (and is then serialized as a
 * dotted quad, maybe unlike its input) or is refused by the browser. */
static bool label_numeric(const char *s, size_t n)
{
	size_t i = 0;
	if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (i = 2; i < n && dg_hex_value(s[i]) >= 0; i++)
			;
		return i == n;
	}
	for (; i < n && is_digit(s[i]); i++)
		;
	return n > 0 && i == n;
}

/* Serializes a 16-byte IPv6 address as the WHATWG URL standard does:
 * lowercase hex pieces without leading zeros, the first longest run of two
 * or more zero pieces replaced by "::", never a dotted quad. (inet_ntop
 * differs: it writes ::ffff:1.2.3.4 for mapped addresses.) */
static void ipv6_serialize(const unsigned char a[16], char out[64])
{
	unsigned piece[8];
	for (int i = 0; i < 8; i++)
		piece[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
	int best = -1, best_len = 1;
	for (int i = 0; i < 8;) {
		if (piece[i] != 0) {
			i++;
			continue;
		}
		int j = i;
		while (j < 8 && piece[j] == 0)
			j++;
		if (j - i > best_len) {
			best = i;
			best_len = j - i;
		}
		i = j;
	}
	size_t o = 0;
	out[0] = '\0';
	for (int i = 0; i < 8; i++) {
		if (i == best) {
			o += (size_t)snprintf(out + o, 64 - o, i == 0 ? "::" : ":");
			i += best_len - 1;
			continue;
		}
		o += (size_t)snprintf(out + o, 64 - o, "%x%s", piece[i], i == 7 ? "" : ":");
	}
}

/* Checks the text between the brackets of an IPv6 host. */
static int check_ipv6(const char *s, size_t n, struct dg_err *err)
{
	char text[64], canon[64];
	unsigned char addr[16];
	if (n < 2 || n > 39)
		return refuse(err, "IPv6 host of %zu characters is not an address", n);
	for (size_t i = 0; i < n; i++) {
		char b[8];
		if (!(is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'f') || s[i] == ':'))
			return refuse(err, "IPv6 host has %s; allowed: 0-9 a-f ':' in compressed "
				      "form (no zone, no dotted quad, no uppercase)",
				      show_char((unsigned char)s[i], b));
	}
	memcpy(text, s, n);
	text[n] = '\0';
	if (inet_pton(AF_INET6, text, addr) != 1)
		return refuse(err, "IPv6 host [%s] is not an address", text);
	ipv6_serialize(addr, canon);
	if (strcmp(canon, text) != 0)
		return refuse(err, "IPv6 host [%s] is not in canonical form; write [%s]", text,
			      canon);
	return 0;
}

/* Checks a host that is not bracketed: a domain or a dotted quad. Sets
 * *is_ip for the latter. */

/* A punycode label is accepted when it is what libidn2 makes of its own
 * decoding: invalid punycode, a decoding that IDNA2008 refuses, or one that
 * maps to another label (uppercase, a deviation character) is refused. */
static bool punycode_ok(const char *l, size_t len)
{
	char label[64];
	memcpy(label, l, len);
	label[len] = '\0';
	char *u = NULL, *a = NULL;
	bool ok = idn2_to_unicode_8z8z(label, &u, 0) == IDN2_OK &&
		  idn2_lookup_u8((const uint8_t *)u, (uint8_t **)&a, IDN2_NONTRANSITIONAL) == IDN2_OK &&
		  strcmp(a, label) == 0;
	idn2_free(u);
	idn2_free(a);
	return ok;
}

static int check_name(const char *s, size_t n, bool *is_ip, struct dg_err *err)
{
	*is_ip = false;
	if (n == 0)
		return refuse(err, "empty host");
	for (size_t i = 0; i < n; i++) {
		char c = s[i], b[8];
		if ((c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '.')
			continue;
		if (c >= 'A' && c <= 'Z')
			return refuse(err, "host has uppercase %s; hosts must be lowercase",
				      show_char((unsigned char)c, b));
		if (c == '%')
			return refuse(err, "host has a percent sign");
		return refuse(err, "host has %s; allowed: a-z 0-9 '-' '.'",
			      show_char((unsigned char)c, b));
	}
	if (s[n - 1] == '.')
		return refuse(err, "host ends with a dot");
	if (n > DG_URL_HOST_MAX)
		return refuse(err, "host of %zu bytes is longer than %d", n, DG_URL_HOST_MAX);

	/* The last label decides whether the browser reads an address. */
	size_t last = n;
	while (last > 0 && s[last - 1] != '.')
		last--;
	if (label_numeric(s + last, n - last)) {
		if (!ipv4_canonical(s, n))
			return refuse(err, "host ends in a number but is not a dotted quad of "
				      "four decimal parts 0-255 without leading zeros");
		*is_ip = true;
		return 0;
	}

	size_t start = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.')
			continue;
		size_t len = i - start;
		const char *l = s + start;
		if (len == 0)
			return refuse(err, "host has an empty label at offset %zu", start);
		if (len > 63)
			return refuse(err, "host label at offset %zu is %zu bytes, more than 63",
				      start, len);
		if (l[0] == '-' || l[len - 1] == '-')
			return refuse(err, "host label at offset %zu starts or ends with '-'",
				      start);
		if (len >= 4 && memcmp(l, "xn--", 4) == 0 && !punycode_ok(l, len))
			return refuse(err, "host label at offset %zu is punycode (\"xn--\") that "
				      "does not decode and encode back to itself", start);
		start = i + 1;
	}
	return 0;
}

/* ---- path, query, fragment ------------------------------------------------ */

/* Whether the segment [s, s+n) is "." or ".." possibly spelled with "%2e":
 * the browser removes such segments, so the text would change. */
static bool dot_segment(const char *s, size_t n)
{
	int dots = 0;
	for (size_t i = 0; i < n; dots++) {
		if (s[i] == '.')
			i++;
		else if (i + 2 < n && s[i] == '%' && s[i + 1] == '2' &&
			 (s[i + 2] == 'e' || s[i + 2] == 'E'))
			i += 3;
		else
			return false;
	}
	return dots == 1 || dots == 2;
}

/* Checks [s, s+n) as one component: pchar, '/', '?' and %XX escapes
 * ('?' cannot occur in a path: it starts the query). With query set, "'" is
 * refused too: WHATWG escapes it in the query of http(s) URLs. what names
 * the component in messages; base is the offset of s in the URL. */
static int check_chars(const char *s, size_t n, const char *what, bool query, size_t base,
		       struct dg_err *err)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i], b[8];
		if (c == '%') {
			if (!(i + 2 < n && dg_hex_value(s[i + 1]) >= 0 && dg_hex_value(s[i + 2]) >= 0))
				return refuse(err, "%s: '%%' at offset %zu is not followed by two "
					      "hex digits", what, base + i);
			i += 2;
			continue;
		}
		if (c == '/' || c == '?')
			continue;
		if (query && c == '\'')
			return refuse(err, "query has %s at offset %zu, which a browser escapes",
				      show_char((unsigned char)c, b), base + i);
		if (!is_pchar(c))
			return refuse(err, "%s has %s at offset %zu; allowed: letters, digits, "
				      "-._~!$&'()*+,;=:@/? and %%XX escapes",
				      what, show_char((unsigned char)c, b), base + i);
	}
	return 0;
}

/* ---- the URL -------------------------------------------------------------- */

static int parse(const char *url, struct dg_url *u, bool ws_too, struct dg_err *err)
{
	if (!url)
		return refuse(err, "no URL");
	size_t len = strnlen(url, DG_URL_MAX + 1);
	if (len > DG_URL_MAX)
		return refuse(err, "longer than %d bytes", DG_URL_MAX);
	if (len == 0)
		return refuse(err, "empty");

	/* Bytes no part may hold. Browsers strip tabs and newlines anywhere and
	 * spaces and controls at the ends, and read '\\' as '/': each makes the
	 * text mean something else than it shows. */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)url[i];
		char b[8];
		if (c <= 0x20 || c >= 0x7f)
			return refuse(err, "byte %s at offset %zu is whitespace, a control or "
				      "non-ASCII", show_char(c, b), i);
		if (c == '\\')
			return refuse(err, "backslash at offset %zu", i);
	}

	size_t p;
	if (strncmp(url, "https://", 8) == 0) {
		u->https = true;
		p = 8;
	} else if (strncmp(url, "http://", 7) == 0) {
		p = 7;
	} else if (ws_too && strncmp(url, "wss://", 6) == 0) {
		u->https = u->ws = true;
		p = 6;
	} else if (ws_too && strncmp(url, "ws://", 5) == 0) {
		u->ws = true;
		p = 5;
	} else {
		size_t colon = strcspn(url, ":/?#");
		if (url[colon] != ':')
			return refuse(err, "no scheme; only http:// and https:// are allowed");
		/* Named in the message only when it looks like a scheme, so a
		 * hostile prefix cannot put quotes or long text in a log line. */
		bool plain = colon > 0 && colon <= 16;
		for (size_t i = 0; plain && i < colon; i++)
			plain = (url[i] >= 'a' && url[i] <= 'z') || (url[i] >= 'A' && url[i] <= 'Z') ||
				is_digit(url[i]) || url[i] == '+' || url[i] == '-' || url[i] == '.';
		if (!plain)
			return refuse(err, "scheme is not http or https");
		if ((colon == 4 && strncmp(url, "http", 4) == 0) ||
		    (colon == 5 && strncmp(url, "https", 5) == 0))
			return refuse(err, "\"%.*s:\" must be followed by \"//\"", (int)colon, url);
		return refuse(err, "scheme \"%.*s\" is not allowed; only lowercase \"http://\" "
			      "and \"https://\" are", (int)colon, url);
	}

	/* The authority runs to the first '/', '?' or '#' (backslash is gone). */
	size_t a = p, e = p + strcspn(url + p, "/?#");
	if (memchr(url + a, '@', e - a))
		return refuse(err, "userinfo ('@' before the path) is not allowed");
	if (url[e] != '/')
		return refuse(err, "no path after the host; a canonical URL has at least \"/\"");

	size_t host_end; /* one past the host, i.e. at ':' or e */
	if (url[a] == '[') {
		const char *rb = memchr(url + a, ']', e - a);
		if (!rb)
			return refuse(err, "IPv6 host without ']'");
		host_end = (size_t)(rb - url) + 1;
		if (host_end != e && url[host_end] != ':')
			return refuse(err, "bytes after the IPv6 host's ']'");
		int rc = check_ipv6(url + a + 1, host_end - a - 2, err);
		if (rc)
			return rc;
		u->host_is_ip = true;
	} else {
		const char *colon = memchr(url + a, ':', e - a);
		host_end = colon ? (size_t)(colon - url) : e;
		int rc = check_name(url + a, host_end - a, &u->host_is_ip, err);
		if (rc)
			return rc;
	}
	if (host_end - a > DG_URL_HOST_MAX)
		return refuse(err, "host is longer than %d bytes", DG_URL_HOST_MAX);
	memcpy(u->host, url + a, host_end - a);
	u->host[host_end - a] = '\0';

	u->port = u->https ? 443 : 80;
	if (host_end < e) { /* url[host_end] == ':' */
		const char *d = url + host_end + 1;
		size_t n = e - host_end - 1;
		if (n == 0)
			return refuse(err, "empty port");
		if (n > 5 || d[0] == '0')
			return refuse(err, "port must be 1-65535 in decimal without leading zeros");
		unsigned v = 0;
		for (size_t i = 0; i < n; i++) {
			if (!is_digit(d[i]))
				return refuse(err, "port has a non-digit");
			v = v * 10 + (unsigned)(d[i] - '0');
		}
		if (v > 65535)
			return refuse(err, "port %u is more than 65535", v);
		if (v == u->port)
			return refuse(err, "port %u is the scheme's default, which a browser drops; "
				      "leave it out", v);
		u->port = (uint16_t)v;
		u->port_given = true;
	}

	/* Path: from e to '?', '#' or the end; every segment checked. */
	size_t q = e + strcspn(url + e, "?#");
	int rc = check_chars(url + e, q - e, "path", false, e, err);
	if (rc)
		return rc;
	for (size_t s = e + 1; s <= q;) {
		size_t t = s;
		while (t < q && url[t] != '/')
			t++;
		if (dot_segment(url + s, t - s))
			return refuse(err, "path has a dot segment at offset %zu, which a browser "
				      "removes", s);
		s = t + 1;
	}
	u->path = url + e;
	u->path_len = q - e;

	size_t f = q;
	if (url[q] == '?') {
		f = q + 1 + strcspn(url + q + 1, "#");
		rc = check_chars(url + q + 1, f - q - 1, "query", true, q + 1, err);
		if (rc)
			return rc;
		u->query = url + q + 1;
		u->query_len = f - q - 1;
	}
	if (url[f] == '#' && u->ws)
		return refuse(err, "a WebSocket URL has no fragment ('#' at offset %zu)", f);
	if (url[f] == '#') {
		rc = check_chars(url + f + 1, len - f - 1, "fragment", false, f + 1, err);
		if (rc)
			return rc;
	}
	return 0;
}

int dg_url_parse(const char *url, struct dg_url *u, struct dg_err *err)
{
	/* u is all zeros unless the whole URL is accepted: a caller that ignores
	 * the return value still finds no host to act on. */
	memset(u, 0, sizeof(*u));
	int rc = parse(url, u, false, err);
	if (rc)
		memset(u, 0, sizeof(*u));
	return rc;
}

int dg_url_parse_ws(const char *url, struct dg_url *u, struct dg_err *err)
{
	memset(u, 0, sizeof(*u));
	int rc = parse(url, u, true, err);
	if (rc)
		memset(u, 0, sizeof(*u));
	return rc;
}
