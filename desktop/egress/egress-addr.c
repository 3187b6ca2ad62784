/* The egress proxy's address rules: which addresses it may connect to, and
 * the test-only resolver overrides (declared in egress-priv.h).
 *
 * Contract: pure functions of their arguments, no allocation, callable from
 * any process (the proxy, tests, fuzzers). The rule is an allowlist in
 * spirit: an IPv4 address is refused when it falls in a special-purpose
 * range (IANA's registry, every entry that is not globally reachable or
 * that names a local network); an IPv6 address must be global unicast
 * (2000::/3) outside its special-purpose ranges, or one of the forms that
 * embed an IPv4 address, which is then checked as IPv4, because a NAT64,
 * 6to4 or Teredo path leads to that IPv4 address.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "desktop/egress/egress-priv.h"

struct range4 {
	uint32_t net;
	int bits;
	const char *text;
	const char *what;
};

/* Order matters only where ranges nest: the broadcast address before 240/4,
 * so it is named as what it is. */
static const struct range4 ranges4[] = {
	{0x00000000u, 8, "0.0.0.0/8", "this network"},
	{0x0a000000u, 8, "10.0.0.0/8", "private"},
	{0x64400000u, 10, "100.64.0.0/10", "shared address space (CGNAT)"},
	{0x7f000000u, 8, "127.0.0.0/8", "loopback"},
	{0xa9fe0000u, 16, "169.254.0.0/16", "link-local"},
	{0xac100000u, 12, "172.16.0.0/12", "private"},
	{0xc0000000u, 24, "192.0.0.0/24", "IETF protocol assignments"},
	{0xc0000200u, 24, "192.0.2.0/24", "documentation (TEST-NET-1)"},
	{0xc0586300u, 24, "192.88.99.0/24", "6to4 relay anycast"},
	{0xc0a80000u, 16, "192.168.0.0/16", "private"},
	{0xc6120000u, 15, "198.18.0.0/15", "benchmarking"},
	{0xc6336400u, 24, "198.51.100.0/24", "documentation (TEST-NET-2)"},
	{0xcb007100u, 24, "203.0.113.0/24", "documentation (TEST-NET-3)"},
	{0xe0000000u, 4, "224.0.0.0/4", "multicast"},
	{0xffffffffu, 32, "255.255.255.255/32", "broadcast"},
	{0xf0000000u, 4, "240.0.0.0/4", "reserved"},
};

/* The range v4 (host byte order) falls in, or NULL when it is public. */
static const struct range4 *refused4(uint32_t v4)
{
	for (size_t i = 0; i < sizeof(ranges4) / sizeof(ranges4[0]); i++) {
		uint32_t mask = ranges4[i].bits == 0 ? 0 : ~0u << (32 - ranges4[i].bits);
		if ((v4 & mask) == ranges4[i].net)
			return &ranges4[i];
	}
	return NULL;
}

struct range6 {
	uint8_t net[16];
	int bits;
	const char *text;
	const char *what;
	int embed; /* how an IPv4 address is embedded (enum below); 0: refused outright */
};

enum {
	EMBED_NONE = 0,
	EMBED_LAST32,   /* the last 32 bits: mapped, NAT64 */
	EMBED_6TO4,     /* bits 16..47 */
	EMBED_TEREDO,   /* server: bits 32..63; client: the last 32 bits inverted */
};

/* Checked in order: the first match decides. Exact addresses before the
 * prefixes that contain them. */
static const struct range6 ranges6[] = {
	{{0}, 128, "::/128", "unspecified", EMBED_NONE},
	{{[15] = 1}, 128, "::1/128", "loopback", EMBED_NONE},
	{{[10] = 0xff, [11] = 0xff}, 96, "::ffff:0:0/96", "IPv4-mapped", EMBED_LAST32},
	{{0}, 96, "::/96", "IPv4-compatible (deprecated)", EMBED_NONE},
	{{0, 0x64, 0xff, 0x9b}, 96, "64:ff9b::/96", "NAT64", EMBED_LAST32},
	/* Operators carve NAT64 prefixes out of the local-use /48; the /96 form
	 * (IPv4 in the last 32 bits) is the one checked. RFC 6052's shorter
	 * forms put the address elsewhere, and checking every place at once
	 * would refuse nearly every address (the other places hold prefix or
	 * zero bits). */
	{{0, 0x64, 0xff, 0x9b, 0, 1}, 48, "64:ff9b:1::/48", "local-use NAT64", EMBED_LAST32},
	{{0x01, 0x00}, 64, "100::/64", "discard-only", EMBED_NONE},
	{{0x20, 0x01, 0, 0}, 32, "2001::/32", "Teredo", EMBED_TEREDO},
	{{0x20, 0x01, 0, 0x02, 0, 0}, 48, "2001:2::/48", "benchmarking", EMBED_NONE},
	{{0x20, 0x01, 0, 0x10}, 28, "2001:10::/28", "ORCHID", EMBED_NONE},
	{{0x20, 0x01, 0, 0x20}, 28, "2001:20::/28", "ORCHIDv2", EMBED_NONE},
	{{0x20, 0x01, 0x0d, 0xb8}, 32, "2001:db8::/32", "documentation", EMBED_NONE},
	{{0x20, 0x02}, 16, "2002::/16", "6to4", EMBED_6TO4},
	{{0x3f, 0xff, 0x00}, 20, "3fff::/20", "documentation", EMBED_NONE},
	{{0xfc}, 7, "fc00::/7", "unique local", EMBED_NONE},
	{{0xfe, 0x80}, 10, "fe80::/10", "link-local", EMBED_NONE},
	{{0xfe, 0xc0}, 10, "fec0::/10", "site-local (deprecated)", EMBED_NONE},
	{{0xff}, 8, "ff00::/8", "multicast", EMBED_NONE},
};

static bool in_prefix6(const uint8_t a[16], const uint8_t net[16], int bits)
{
	int full = bits / 8, rest = bits % 8;
	if (memcmp(a, net, (size_t)full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (net[full] & mask);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void text4(uint32_t v4, char out[INET_ADDRSTRLEN])
{
	struct in_addr in = {htonl(v4)};
	inet_ntop(AF_INET, &in, out, INET_ADDRSTRLEN);
}

/* Checks one embedded IPv4 address; on refusal writes why and returns
 * -EACCES. */
static int check_embedded(const char *a6, const struct range6 *r, const char *role, uint32_t v4,
			  char *why, size_t why_len)
{
	const struct range4 *bad = refused4(v4);
	if (!bad)
		return 0;
	char t4[INET_ADDRSTRLEN];
	text4(v4, t4);
	snprintf(why, why_len, "%s embeds %s%s (%s, %s), which is in %s (%s)", a6, role, t4,
		 r->text, r->what, bad->text, bad->what);
	return -EACCES;
}

static int check6(const uint8_t a[16], char *why, size_t why_len)
{
	char t6[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, a, t6, sizeof(t6));
	for (size_t i = 0; i < sizeof(ranges6) / sizeof(ranges6[0]); i++) {
		const struct range6 *r = &ranges6[i];
		if (!in_prefix6(a, r->net, r->bits))
			continue;
		int rc = 0;
		switch (r->embed) {
		case EMBED_NONE:
			snprintf(why, why_len, "%s is in %s (%s)", t6, r->text, r->what);
			return -EACCES;
		case EMBED_LAST32:
			return check_embedded(t6, r, "", be32(a + 12), why, why_len);
		case EMBED_6TO4:
			return check_embedded(t6, r, "", be32(a + 2), why, why_len);
		case EMBED_TEREDO:
			rc = check_embedded(t6, r, "server ", be32(a + 4), why, why_len);
			if (rc == 0)
				rc = check_embedded(t6, r, "client ", ~be32(a + 12), why, why_len);
			return rc;
		}
	}
	if ((a[0] & 0xe0) != 0x20) {
		snprintf(why, why_len, "%s is outside 2000::/3 (not global unicast)", t6);
		return -EACCES;
	}
	return 0;
}

int dg_egress_addr_check(const struct sockaddr *sa, char *why, size_t why_len)
{
	char scratch[8];
	if (!why || why_len == 0) {
		why = scratch;
		why_len = sizeof(scratch);
	}
	why[0] = '\0';
	if (!sa) {
		snprintf(why, why_len, "no address");
		return -EACCES;
	}
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		uint32_t v4 = ntohl(s4->sin_addr.s_addr);
		const struct range4 *bad = refused4(v4);
		if (!bad)
			return 0;
		char t4[INET_ADDRSTRLEN];
		text4(v4, t4);
		snprintf(why, why_len, "%s is in %s (%s)", t4, bad->text, bad->what);
		return -EACCES;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		return check6(s6->sin6_addr.s6_addr, why, why_len);
	}
	snprintf(why, why_len, "address family %d is not IPv4 or IPv6", sa->sa_family);
	return -EACCES;
}

void dg_egress_addr_format(const struct sockaddr *sa, char *out, size_t len)
{
	char t[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, t, sizeof(t));
		snprintf(out, len, "%s:%u", t, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, t, sizeof(t));
		snprintf(out, len, "[%s]:%u", t, ntohs(s6->sin6_port));
	} else {
		snprintf(out, len, "(family %d)", sa->sa_family);
	}
}

int dg_egress_literal_addr(const char *host, uint16_t port, struct sockaddr_storage *sa,
			   socklen_t *len)
{
	memset(sa, 0, sizeof(*sa));
	size_t n = strlen(host);
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		char t[INET6_ADDRSTRLEN];
		if (n - 2 >= sizeof(t))
			return -EINVAL;
		memcpy(t, host + 1, n - 2);
		t[n - 2] = '\0';
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)sa;
		if (inet_pton(AF_INET6, t, &s6->sin6_addr) != 1)
			return -EINVAL;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		*len = sizeof(*s6);
		return 0;
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)sa;
	if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
		return -EINVAL;
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	*len = sizeof(*s4);
	return 0;
}

/* Splits "host:port" (host possibly "[v6]") at the port's colon. */
static int split_hostport(const char *s, size_t n, size_t *host_len, uint16_t *port)
{
	const char *colon;
	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);
		if (!rb || rb + 1 == s + n || rb[1] != ':')
			return -EINVAL;
		colon = rb + 1;
	} else {
		colon = memrchr(s, ':', n);
		if (!colon)
			return -EINVAL;
	}
	*host_len = (size_t)(colon - s);
	return dg_egress_port_parse(colon + 1, n - *host_len - 1, port);
}

int dg_egress_override_parse(const char *s, struct dg_egress_override *o, struct dg_err *err)
{
	memset(o, 0, sizeof(*o));
	char shown[DG_SHOW_BUF];
	dg_show_str(s ? s : "", DG_SHOW_MAX, true, shown, sizeof(shown));
	const char *eq = s ? strchr(s, '=') : NULL;
	if (!eq)
		return dg_err_set(err, -EINVAL, "egress: resolve override \"%s\": expected "
				  "NAME:PORT=IP:PORT", shown);
	size_t hl;
	if (split_hostport(s, (size_t)(eq - s), &hl, &o->port) != 0)
		return dg_err_set(err, -EINVAL, "egress: resolve override \"%s\": NAME:PORT must "
				  "end with a port 1-65535", shown);
	bool is_ip;
	struct dg_err e = {{0}};
	if (dg_egress_host_check(s, hl, o->host, &is_ip, &e) != 0)
		return dg_err_set(err, -EINVAL, "egress: resolve override \"%s\": %s", shown, e.msg);
	const char *r = eq + 1;
	size_t rl = strlen(r), ahl;
	uint16_t aport;
	char ahost[INET6_ADDRSTRLEN + 2];
	if (split_hostport(r, rl, &ahl, &aport) != 0 || ahl == 0 || ahl >= sizeof(ahost))
		return dg_err_set(err, -EINVAL, "egress: resolve override \"%s\": IP:PORT must "
				  "end with a port 1-65535", shown);
	memcpy(ahost, r, ahl);
	ahost[ahl] = '\0';
	if (dg_egress_literal_addr(ahost, aport, &o->addr, &o->addr_len) != 0)
		return dg_err_set(err, -EINVAL, "egress: resolve override \"%s\": not an IPv4 "
				  "or [IPv6] address", shown);
	return 0;
}
