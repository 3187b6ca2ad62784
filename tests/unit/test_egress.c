/* Egress proxy, the pure parts: which addresses the proxy may connect to
 * (every range edge, and IPv4 embedded in IPv6), the request-head parser
 * (happy and hostile heads, the size limit at its exact boundary), the
 * absolute-form rewrite, error answers, resolver overrides, and
 * dg_policy_decide_egress. The running proxy is tested in
 * test_egress_proxy.c.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "egress-priv.h"

/* ---- addresses ------------------------------------------------------------- */

static int check_text(const char *text, char *why, size_t n)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	if (strchr(text, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		s6->sin6_family = AF_INET6;
		cr_assert_eq(inet_pton(AF_INET6, text, &s6->sin6_addr), 1, "bad test address %s", text);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		s4->sin_family = AF_INET;
		cr_assert_eq(inet_pton(AF_INET, text, &s4->sin_addr), 1, "bad test address %s", text);
	}
	return dg_egress_addr_check((struct sockaddr *)&ss, why, n);
}

struct addr_case {
	const char *addr;
	const char *range; /* NULL: public; else a substring the reason must hold */
};

static void run_cases(const struct addr_case *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char why[256] = "untouched";
		int r = check_text(cases[i].addr, why, sizeof(why));
		if (!cases[i].range) {
			cr_expect_eq(r, 0, "%s should be public, got %d (%s)", cases[i].addr, r, why);
			cr_expect_str_empty(why, "%s: why should be empty, is %s", cases[i].addr, why);
		} else {
			cr_expect_eq(r, -EACCES, "%s should be refused, got %d", cases[i].addr, r);
			cr_expect(strstr(why, cases[i].range) != NULL, "%s: reason \"%s\" lacks \"%s\"",
				  cases[i].addr, why, cases[i].range);
		}
	}
}

Test(egress_addr, ipv4_range_edges)
{
	static const struct addr_case cases[] = {
		{"0.0.0.0", "0.0.0.0/8 (this network)"},
		{"0.255.255.255", "0.0.0.0/8"},
		{"1.0.0.0", NULL},
		{"8.8.8.8", NULL},
		{"9.255.255.255", NULL},
		{"10.0.0.0", "10.0.0.0/8 (private)"},
		{"10.255.255.255", "10.0.0.0/8"},
		{"11.0.0.0", NULL},
		{"93.184.216.34", NULL},
		{"100.63.255.255", NULL},
		{"100.64.0.0", "100.64.0.0/10 (shared address space (CGNAT))"},
		{"100.127.255.255", "100.64.0.0/10"},
		{"100.128.0.0", NULL},
		{"126.255.255.255", NULL},
		{"127.0.0.0", "127.0.0.0/8 (loopback)"},
		{"127.0.0.1", "127.0.0.0/8"},
		{"127.255.255.255", "127.0.0.0/8"},
		{"128.0.0.0", NULL},
		{"169.253.255.255", NULL},
		{"169.254.0.0", "169.254.0.0/16 (link-local)"},
		{"169.254.169.254", "169.254.0.0/16"},
		{"169.254.255.255", "169.254.0.0/16"},
		{"169.255.0.0", NULL},
		{"172.15.255.255", NULL},
		{"172.16.0.0", "172.16.0.0/12 (private)"},
		{"172.31.255.255", "172.16.0.0/12"},
		{"172.32.0.0", NULL},
		{"191.255.255.255", NULL},
		{"192.0.0.0", "192.0.0.0/24 (IETF protocol assignments)"},
		{"192.0.0.255", "192.0.0.0/24"},
		{"192.0.1.0", NULL},
		{"192.0.1.255", NULL},
		{"192.0.2.0", "192.0.2.0/24 (documentation (TEST-NET-1))"},
		{"192.0.2.255", "192.0.2.0/24"},
		{"192.0.3.0", NULL},
		{"192.88.98.255", NULL},
		{"192.88.99.0", "192.88.99.0/24 (6to4 relay anycast)"},
		{"192.88.99.255", "192.88.99.0/24"},
		{"192.88.100.0", NULL},
		{"192.167.255.255", NULL},
		{"192.168.0.0", "192.168.0.0/16 (private)"},
		{"192.168.255.255", "192.168.0.0/16"},
		{"192.169.0.0", NULL},
		{"198.17.255.255", NULL},
		{"198.18.0.0", "198.18.0.0/15 (benchmarking)"},
		{"198.19.255.255", "198.18.0.0/15"},
		{"198.20.0.0", NULL},
		{"198.51.99.255", NULL},
		{"198.51.100.0", "198.51.100.0/24 (documentation (TEST-NET-2))"},
		{"198.51.100.255", "198.51.100.0/24"},
		{"198.51.101.0", NULL},
		{"203.0.112.255", NULL},
		{"203.0.113.0", "203.0.113.0/24 (documentation (TEST-NET-3))"},
		{"203.0.113.255", "203.0.113.0/24"},
		{"203.0.114.0", NULL},
		{"223.255.255.255", NULL},
		{"224.0.0.0", "224.0.0.0/4 (multicast)"},
		{"239.255.255.255", "224.0.0.0/4"},
		{"240.0.0.0", "240.0.0.0/4 (reserved)"},
		{"255.255.255.254", "240.0.0.0/4"},
		{"255.255.255.255", "255.255.255.255/32 (broadcast)"},
	};
	run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

Test(egress_addr, ipv6_ranges)
{
	static const struct addr_case cases[] = {
		{"::", "::/128 (unspecified)"},
		{"::1", "::1/128 (loopback)"},
		{"::2", "::/96 (IPv4-compatible"},
		{"::8.8.8.8", "::/96 (IPv4-compatible"},
		{"::1:0:0", "outside 2000::/3"},
		{"100::", "100::/64 (discard-only)"},
		{"100::ffff:ffff:ffff:ffff", "100::/64"},
		{"100:0:0:1::", "outside 2000::/3"},
		{"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "outside 2000::/3"},
		{"2000::", NULL},
		{"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", NULL},
		{"2001:db8::", "2001:db8::/32 (documentation)"},
		{"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db8::/32"},
		{"2001:db9::", NULL},
		{"2001:2::1", "2001:2::/48 (benchmarking)"},
		{"2001:2:0:ffff::", "2001:2::/48"},
		{"2001:2:1::", NULL},
		{"2001:10::1", "2001:10::/28 (ORCHID)"},
		{"2001:1f:ffff::", "2001:10::/28"},
		{"2001:20::1", "2001:20::/28 (ORCHIDv2)"},
		{"2606:4700:4700::1111", NULL},
		{"2a00:1450:4001:80b::200e", NULL},
		{"3ffe:ffff::", NULL},
		{"3fff::", "3fff::/20 (documentation)"},
		{"3fff:fff:ffff::", "3fff::/20"},
		{"3fff:1000::", NULL},
		{"4000::", "outside 2000::/3"},
		{"fbff:ffff::", "outside 2000::/3"},
		{"fc00::", "fc00::/7 (unique local)"},
		{"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fc00::/7"},
		{"fe00::", "outside 2000::/3"},
		{"fe7f:ffff::", "outside 2000::/3"},
		{"fe80::", "fe80::/10 (link-local)"},
		{"fe80::1", "fe80::/10"},
		{"febf:ffff::", "fe80::/10"},
		{"fec0::", "fec0::/10 (site-local"},
		{"feff:ffff::", "fec0::/10"},
		{"ff00::", "ff00::/8 (multicast)"},
		{"ff02::1", "ff00::/8"},
	};
	run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

Test(egress_addr, ipv6_embedding_ipv4)
{
	static const struct addr_case cases[] = {
		/* IPv4-mapped */
		{"::ffff:8.8.8.8", NULL},
		{"::ffff:10.0.0.1", "embeds 10.0.0.1 (::ffff:0:0/96, IPv4-mapped), which is in "
				    "10.0.0.0/8 (private)"},
		{"::ffff:127.0.0.1", "127.0.0.0/8"},
		{"::ffff:100.63.255.255", NULL},
		{"::ffff:100.64.0.0", "100.64.0.0/10"},
		{"::ffff:172.15.255.255", NULL},
		{"::ffff:172.16.0.0", "172.16.0.0/12"},
		{"::ffff:169.254.169.254", "169.254.0.0/16"},
		{"::ffff:0.0.0.0", "0.0.0.0/8"},
		{"::ffff:255.255.255.255", "broadcast"},
		/* NAT64, well-known prefix */
		{"64:ff9b::8.8.8.8", NULL},
		{"64:ff9b::10.0.0.1", "(64:ff9b::/96, NAT64), which is in 10.0.0.0/8"},
		{"64:ff9b::192.168.1.1", "192.168.0.0/16"},
		{"64:ff9b::127.0.0.1", "127.0.0.0/8"},
		{"64:ff9b::1:8.8.8.8", "outside 2000::/3"},
		/* NAT64, local-use prefix (the /96 form within it) */
		{"64:ff9b:1::8.8.8.8", NULL},
		{"64:ff9b:1::10.0.0.1", "(64:ff9b:1::/48, local-use NAT64), which is in 10.0.0.0/8"},
		{"64:ff9b:1:ffff:ffff:ffff:a9fe:a9fe", "169.254.0.0/16"},
		{"64:ff9b:2::8.8.8.8", "outside 2000::/3"},
		/* 6to4 */
		{"2002:808:808::1", NULL},
		{"2002:a00:1::", "embeds 10.0.0.1 (2002::/16, 6to4), which is in 10.0.0.0/8"},
		{"2002:7f00:1::", "127.0.0.0/8"},
		{"2002:c0a8:101:1::1", "192.168.0.0/16"},
		{"2002:6440::", "100.64.0.0/10"},
		{"2002:643f:ffff::", NULL},
		/* Teredo: server in bits 32..63, client inverted in the last 32 */
		{"2001:0:808:808::f7f7:fbfb", NULL}, /* server 8.8.8.8, client 8.8.4.4 */
		{"2001:0:a00:1::f7f7:fbfb", "embeds server 10.0.0.1 (2001::/32, Teredo)"},
		{"2001:0:808:808::f5ff:fffe", "embeds client 10.0.0.1 (2001::/32, Teredo)"},
		{"2001:0:808:808::80ff:fffe", "embeds client 127.0.0.1"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "client 192.0.2.45"}, /* RFC 4380's example */
		{"2001:0:808:808::", "client 255.255.255.255"},
	};
	run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

Test(egress_addr, other_family_and_null)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	char why[128];
	cr_assert_eq(dg_egress_addr_check((struct sockaddr *)&un, why, sizeof(why)), -EACCES);
	cr_assert(strstr(why, "not IPv4 or IPv6"), "%s", why);
	cr_assert_eq(dg_egress_addr_check(NULL, why, sizeof(why)), -EACCES);
	/* why may be NULL: the verdict stands. */
	cr_assert_eq(check_text("10.0.0.1", NULL, 0), -EACCES);
	cr_assert_eq(check_text("8.8.8.8", NULL, 0), 0);
	/* A small buffer cuts the reason, never overflows. */
	char tiny[8];
	cr_assert_eq(check_text("10.0.0.1", tiny, sizeof(tiny)), -EACCES);
	cr_assert_eq(strlen(tiny), 7);
}

Test(egress_addr, format_and_literals)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char out[64];
	cr_assert_eq(dg_egress_literal_addr("93.184.216.34", 443, &ss, &len), 0);
	cr_assert_eq(len, sizeof(struct sockaddr_in));
	dg_egress_addr_format((struct sockaddr *)&ss, out, sizeof(out));
	cr_assert_str_eq(out, "93.184.216.34:443");
	cr_assert_eq(dg_egress_literal_addr("[2606:4700::1]", 80, &ss, &len), 0);
	cr_assert_eq(len, sizeof(struct sockaddr_in6));
	dg_egress_addr_format((struct sockaddr *)&ss, out, sizeof(out));
	cr_assert_str_eq(out, "[2606:4700::1]:80");
	cr_assert_eq(dg_egress_literal_addr("example.com", 80, &ss, &len), -EINVAL);
	cr_assert_eq(dg_egress_literal_addr("[nope]", 80, &ss, &len), -EINVAL);
}

/* ---- resolver overrides ----------------------------------------------------------- */

Test(egress_override, parse)
{
	struct dg_egress_override o;
	struct dg_err err = {{0}};
	char out[64];
	cr_assert_eq(dg_egress_override_parse("allowed.test:80=127.0.0.1:8080", &o, &err), 0, "%s",
		     err.msg);
	cr_assert_str_eq(o.host, "allowed.test");
	cr_assert_eq(o.port, 80);
	dg_egress_addr_format((struct sockaddr *)&o.addr, out, sizeof(out));
	cr_assert_str_eq(out, "127.0.0.1:8080");
	cr_assert_eq(dg_egress_override_parse("v6.test:443=[::1]:65535", &o, &err), 0, "%s", err.msg);
	dg_egress_addr_format((struct sockaddr *)&o.addr, out, sizeof(out));
	cr_assert_str_eq(out, "[::1]:65535");

	static const char *const bad[] = {
		"allowed.test:80",              /* no '=' */
		"allowed.test=127.0.0.1:80",    /* no port on the name */
		"allowed.test:0=127.0.0.1:80",  /* port 0 */
		"allowed.test:080=127.0.0.1:80", /* leading zero */
		"Allowed.test:80=127.0.0.1:80", /* not canonical */
		"allowed.test:80=127.0.0.1",    /* no port on the address */
		"allowed.test:80=localhost:80", /* not an address */
		"allowed.test:80=127.0.0.1:65536",
		"allowed.test:80=[::1:80",
		"",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		cr_expect_eq(dg_egress_override_parse(bad[i], &o, &err), -EINVAL, "accepted %s",
			     bad[i]);
		cr_expect(strstr(err.msg, "resolve override") != NULL, "%s: %s", bad[i], err.msg);
	}
}

/* ---- request heads --------------------------------------------------------------- */

static struct dg_egress_req req;
static struct dg_err perr;

static int parse(const char *s)
{
	memset(&perr, 0, sizeof(perr));
	return dg_egress_parse_request(s, strlen(s), &req, &perr);
}

/* The head must be refused (-EINVAL) with reason holding what. */
static void refused(const char *head, const char *what)
{
	int r = parse(head);
	cr_expect_eq(r, -EINVAL, "accepted or wrong code %d for %s", r, head);
	cr_expect(strstr(perr.msg, what) != NULL, "reason \"%s\" lacks \"%s\" (head %s)", perr.msg,
		  what, head);
}

Test(egress_parse, connect_happy)
{
	const char *h = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n"
			"User-Agent: test\r\n\r\n";
	cr_assert_eq(parse(h), 0, "%s", perr.msg);
	cr_assert(req.connect);
	cr_assert_str_eq(req.method, "CONNECT");
	cr_assert_str_eq(req.host, "example.com");
	cr_assert_eq(req.port, 443);
	cr_assert_not(req.host_is_ip);
	cr_assert_eq(req.minor, 1);
	cr_assert_eq(req.head_len, strlen(h));

	/* Tunnel bytes may follow the head; head_len ends before them. */
	const char *t = "CONNECT a.test:1 HTTP/1.0\r\n\r\n\x16\x03\x01";
	cr_assert_eq(parse(t), 0, "%s", perr.msg);
	cr_assert_eq(req.head_len, strlen(t) - 3);
	cr_assert_eq(req.port, 1);
	cr_assert_eq(req.minor, 0);

	cr_assert_eq(parse("CONNECT 93.184.216.34:65535 HTTP/1.1\r\n\r\n"), 0, "%s", perr.msg);
	cr_assert(req.host_is_ip);
	cr_assert_eq(req.port, 65535);
	cr_assert_eq(parse("CONNECT [2606:4700::1]:443 HTTP/1.1\r\nHost: [2606:4700::1]:443\r\n\r\n"),
		     0, "%s", perr.msg);
	cr_assert_str_eq(req.host, "[2606:4700::1]");
	cr_assert(req.host_is_ip);
	/* Host without the port, and in another case, names the same host. */
	cr_assert_eq(parse("CONNECT example.com:443 HTTP/1.1\r\nHost: EXAMPLE.com\r\n\r\n"), 0, "%s",
		     perr.msg);
}

Test(egress_parse, absolute_happy_and_rewrite)
{
	const char *h = "GET http://example.com/a/b?q=1&r=%20 HTTP/1.1\r\n"
			"Host: example.com\r\n"
			"Proxy-Connection: keep-alive\r\n"
			"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
			"Connection: keep-alive\r\n"
			"Keep-Alive: timeout=5\r\n"
			"User-Agent: test \t\r\n"
			"X-Binary: caf\xc3\xa9\r\n"
			"\r\n"
			"BODY";
	cr_assert_eq(parse(h), 0, "%s", perr.msg);
	cr_assert_not(req.connect);
	cr_assert_str_eq(req.method, "GET");
	cr_assert_str_eq(req.host, "example.com");
	cr_assert_eq(req.port, 80);
	cr_assert_eq(req.head_len, strlen(h) - 4);
	cr_assert_eq(req.path_len, strlen("/a/b?q=1&r=%20"));
	cr_assert_eq(memcmp(h + req.path_off, "/a/b?q=1&r=%20", req.path_len), 0);
	char out[1024];
	int n = dg_egress_rewrite_head(h, &req, out, sizeof(out));
	cr_assert_gt(n, 0);
	out[n] = '\0';
	cr_assert_str_eq(out, "GET /a/b?q=1&r=%20 HTTP/1.1\r\n"
			      "Host: example.com\r\n"
			      "User-Agent: test \t\r\n"
			      "X-Binary: caf\xc3\xa9\r\n"
			      "Connection: close\r\n"
			      "\r\n");
	cr_assert_leq((size_t)n, req.head_len + DG_EGRESS_REWRITE_EXTRA);
	/* Too small a buffer is refused, not overrun. */
	cr_assert_eq(dg_egress_rewrite_head(h, &req, out, 40), -E2BIG);

	/* Explicit port, HTTP/1.0 without Host, no header at all. */
	const char *h2 = "POST http://a.test:8080/ HTTP/1.0\r\n\r\n";
	cr_assert_eq(parse(h2), 0, "%s", perr.msg);
	cr_assert_eq(req.port, 8080);
	cr_assert_eq(req.minor, 0);
	n = dg_egress_rewrite_head(h2, &req, out, sizeof(out));
	out[n] = '\0';
	cr_assert_str_eq(out, "POST / HTTP/1.0\r\nConnection: close\r\n\r\n");
	/* Host with the explicit port; an IPv4 literal host. */
	cr_assert_eq(parse("GET http://a.test:8080/x HTTP/1.1\r\nHost: a.test:8080\r\n\r\n"), 0,
		     "%s", perr.msg);
	cr_assert_eq(parse("GET http://1.2.3.4/ HTTP/1.1\r\nHost: 1.2.3.4\r\n\r\n"), 0, "%s",
		     perr.msg);
	cr_assert(req.host_is_ip);
	/* Longest method. */
	cr_assert_eq(parse("ABCDEFGHIJKLMNOP http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"), 0,
		     "%s", perr.msg);
	cr_assert_str_eq(req.method, "ABCDEFGHIJKLMNOP");
}

Test(egress_parse, incomplete_is_eagain)
{
	static const char *const parts[] = {
		"",
		"C",
		"CONNECT exa",
		"CONNECT example.com:443 HTTP/1.1",
		"CONNECT example.com:443 HTTP/1.1\r",
		"CONNECT example.com:443 HTTP/1.1\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n",
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r",
	};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		cr_expect_eq(parse(parts[i]), -EAGAIN, "part %zu: %s", i, perr.msg);
	/* A NUL or a bare CR is refused before the head is complete. */
	cr_assert_eq(dg_egress_parse_request("GET \0", 5, &req, &perr), -EINVAL);
	cr_assert(strstr(perr.msg, "NUL"), "%s", perr.msg);
	refused("GET\rX", "bare CR");
}

/* A head of exactly n bytes: an absolute-form GET with one padding header. */
static char *head_of(size_t n)
{
	const char *pre = "GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX-Pad: ";
	const char *post = "\r\n\r\n";
	size_t fixed = strlen(pre) + strlen(post);
	cr_assert_gt(n, fixed);
	char *h = malloc(n + 1);
	cr_assert(h);
	strcpy(h, pre);
	memset(h + strlen(pre), 'p', n - fixed);
	strcpy(h + n - strlen(post), post);
	cr_assert_eq(strlen(h), n);
	return h;
}

Test(egress_parse, head_size_boundary)
{
	char *h = head_of(DG_EGRESS_HEAD_MAX);
	cr_assert_eq(parse(h), 0, "%s", perr.msg);
	cr_assert_eq(req.head_len, DG_EGRESS_HEAD_MAX);
	/* The same with body bytes after it. */
	size_t hl = strlen(h);
	char *hb = malloc(hl + 100);
	memcpy(hb, h, hl);
	memset(hb + hl, 'b', 100);
	cr_assert_eq(dg_egress_parse_request(hb, hl + 100, &req, &perr), 0, "%s", perr.msg);
	cr_assert_eq(req.head_len, DG_EGRESS_HEAD_MAX);
	free(hb);
	free(h);

	h = head_of(DG_EGRESS_HEAD_MAX + 1);
	cr_assert_eq(parse(h), -E2BIG);
	cr_assert(strstr(perr.msg, "longer than 16384"), "%s", perr.msg);
	/* While fewer than the limit have arrived, it is only incomplete. */
	cr_assert_eq(dg_egress_parse_request(h, DG_EGRESS_HEAD_MAX - 1, &req, &perr), -EAGAIN);
	cr_assert_eq(dg_egress_parse_request(h, DG_EGRESS_HEAD_MAX, &req, &perr), -E2BIG);
	free(h);

	/* No line end at all. */
	char *flood = malloc(DG_EGRESS_HEAD_MAX * 2);
	memset(flood, 'A', DG_EGRESS_HEAD_MAX * 2);
	cr_assert_eq(dg_egress_parse_request(flood, DG_EGRESS_HEAD_MAX * 2, &req, &perr), -E2BIG);
	free(flood);
}

Test(egress_parse, connect_ports)
{
	refused("CONNECT a.test:0 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:65536 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:99999 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:123456 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:0443 HTTP/1.1\r\n\r\n", "leading zeros");
	refused("CONNECT a.test:00 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test: HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:+443 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:-1 HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test:44a HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test HTTP/1.1\r\n\r\n", "explicit port");
	refused("CONNECT [::1] HTTP/1.1\r\n\r\n", "explicit port");
	refused("CONNECT [::1 HTTP/1.1\r\n\r\n", "without ']'");
	refused("CONNECT a.test:443/x HTTP/1.1\r\n\r\n", "1-65535");
	cr_assert_eq(parse("CONNECT a.test:1 HTTP/1.1\r\n\r\n"), 0, "%s", perr.msg);
	cr_assert_eq(parse("CONNECT a.test:65535 HTTP/1.1\r\n\r\n"), 0, "%s", perr.msg);
	/* An absolute URL's port follows dg_url_parse. */
	refused("GET http://a.test:0/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "port");
	refused("GET http://a.test:65536/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "65535");
	refused("GET http://a.test:080/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "leading zeros");
	refused("GET http://a.test:80/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "default");
}

Test(egress_parse, hostile_targets)
{
	/* userinfo */
	refused("GET http://user:pw@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "userinfo");
	refused("CONNECT user@a.test:443 HTTP/1.1\r\n\r\n", "host has '@'");
	/* uppercase */
	refused("GET http://A.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "uppercase");
	refused("GET HTTP://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "scheme");
	refused("CONNECT A.TEST:443 HTTP/1.1\r\n\r\n", "uppercase");
	refused("get http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "method");
	refused("GET http://a.test/ http/1.1\r\nHost: a.test\r\n\r\n", "HTTP version");
	/* backslash */
	refused("GET http://a.test\\@b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "backslash");
	refused("CONNECT a.test\\b:443 HTTP/1.1\r\n\r\n", "host has '\\'");
	/* not canonical: what a browser would rewrite */
	refused("GET http://a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", "no path");
	refused("GET http://a.test/./x HTTP/1.1\r\nHost: a.test\r\n\r\n", "dot segment");
	refused("GET http://a.test/%2e%2e/x HTTP/1.1\r\nHost: a.test\r\n\r\n", "dot segment");
	refused("GET http://a.test/%zz HTTP/1.1\r\nHost: a.test\r\n\r\n", "hex digits");
	refused("GET http://a.test./ HTTP/1.1\r\nHost: a.test\r\n\r\n", "ends with a dot");
	refused("GET http://0x7f.1/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "dotted quad");
	refused("GET http://127.1/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "dotted quad");
	refused("GET http://[::FFFF:1.2.3.4]/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "IPv6 host");
	refused("CONNECT [0:0::1]:443 HTTP/1.1\r\n\r\n", "canonical form");
	refused("CONNECT 127.000.0.1:443 HTTP/1.1\r\n\r\n", "dotted quad");
	refused("GET http://a.test/#frag HTTP/1.1\r\nHost: a.test\r\n\r\n", "fragment");
	refused("GET http://a.test/a|b HTTP/1.1\r\nHost: a.test\r\n\r\n", "'|'");
	/* forms a proxy does not serve */
	refused("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "origin-form");
	refused("OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n", "asterisk-form");
	refused("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "HTTPS must use CONNECT");
	refused("GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "scheme");
	refused("CONNECT http://a.test/ HTTP/1.1\r\n\r\n", "1-65535");
	refused("CONNECT a.test/x:443 HTTP/1.1\r\n\r\n", "host has '/'");
	refused("CONNECT a.test?:443 HTTP/1.1\r\n\r\n", "host has '?'");
	refused("GET a.test:80 HTTP/1.1\r\nHost: a.test\r\n\r\n", "scheme");
	/* a target longer than a URL may be */
	size_t n = DG_URL_MAX + 10;
	char *big = malloc(n + 64);
	int k = snprintf(big, 64, "GET http://a.test/");
	memset(big + k, 'a', n);
	strcpy(big + k + n, " HTTP/1.1\r\nHost: a.test\r\n\r\n");
	refused(big, "longer than 8192");
	free(big);
}

Test(egress_parse, hostile_lines)
{
	/* missing or wrong version, spacing */
	refused("GET http://a.test/\r\nHost: a.test\r\n\r\n", "no HTTP version");
	refused("GET http://a.test/ HTTP/2.0\r\nHost: a.test\r\n\r\n", "HTTP version");
	refused("GET http://a.test/ HTTP/1.1 \r\nHost: a.test\r\n\r\n", "HTTP version");
	refused("GET http://a.test/ HTTP/1.10\r\nHost: a.test\r\n\r\n", "HTTP version");
	refused("GET  http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "empty request target");
	refused("GET\thttp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "instead of one space");
	refused(" GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "method");
	refused("\r\nGET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "empty request line");
	refused("ABCDEFGHIJKLMNOPQ http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
		"longer than 16");
	/* bare LF is refused, wherever it is (documented choice) */
	refused("GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", "bare LF");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\nX: y\r\n\r\n", "bare LF");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\n", "bare LF");
	/* bare CR, NUL, controls */
	refused("GET http://a.test/ HTTP/1.1\r\nX: a\rb\r\nHost: a.test\r\n\r\n", "bare CR");
	refused("GET http://a.test/ HTTP/1.1\r\r\n\r\n", "bare CR");
	const char nul[] = "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\nHost: a.test\r\n\r\n";
	cr_assert_eq(dg_egress_parse_request(nul, sizeof(nul) - 1, &req, &perr), -EINVAL);
	cr_assert(strstr(perr.msg, "NUL"), "%s", perr.msg);
	refused("GET http://a.test/ HTTP/1.1\r\nX: a\x01" "b\r\nHost: a.test\r\n\r\n",
		"control byte 0x01");
	refused("GET http://a.test/ HTTP/1.1\r\nX: a\x7f\r\nHost: a.test\r\n\r\n",
		"control byte 0x7f");
	/* obs-fold, header names */
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\r\n b\r\n\r\n", "obs-fold");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nX: a\r\n\tb\r\n\r\n", "obs-fold");
	refused("GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n", "whitespace between");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nNo colon here\r\n\r\n",
		"has no ':'");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nNocolon\r\n\r\n", "has no ':'");
	refused("GET http://a.test/ HTTP/1.1\r\n: empty\r\nHost: a.test\r\n\r\n", "empty name");
	refused("GET http://a.test/ HTTP/1.1\r\nX(y): z\r\nHost: a.test\r\n\r\n",
		"where a name character");
	/* Host must be there (HTTP/1.1), once, and name the target */
	refused("GET http://a.test/ HTTP/1.1\r\nX: y\r\n\r\n", "without a Host");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", "does not name the target");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test:81\r\n\r\n", "does not name");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test.evil\r\n\r\n", "does not name");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n",
		"more than one Host");
	refused("CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", "does not name");
	cr_assert_eq(parse("GET http://a.test/ HTTP/1.1\r\nhOsT:a.test:80 \r\n\r\n"), 0, "%s",
		     perr.msg);
	/* The reason quotes hostile bytes rather than carrying them. */
	refused("GET http://a.test/ HTTP/1.1\r\nHost: \x1b[31m\r\n\r\n", "control byte 0x1b");
	refused("GET http://a.test/ HTTP/1.1\r\nHost: \xff\xfe\r\n\r\n", "\\xff\\xfe");
}

Test(egress_http, error_response)
{
	char out[DG_EGRESS_RESPONSE_MAX];
	size_t n = dg_egress_error_response(403, "egress.default", "no pattern matches", out,
					    sizeof(out));
	cr_assert_gt(n, 0);
	cr_assert_eq(strlen(out), n);
	cr_assert(strncmp(out, "HTTP/1.1 403 Forbidden\r\n", 24) == 0, "%s", out);
	cr_assert(strstr(out, "\r\nX-Deskgate-Rule: egress.default\r\n"), "%s", out);
	cr_assert(strstr(out, "\r\nConnection: close\r\n"), "%s", out);
	const char *body = strstr(out, "\r\n\r\n") + 4;
	cr_assert_str_eq(body, "deskgate egress: no pattern matches\n");
	char cl[64];
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
	cr_assert(strstr(out, cl), "%s", out);

	/* A reason with line breaks stays one line; a long one is cut to
	 * DG_EGRESS_REASON_MAX, and the length still matches. */
	char reason[2000];
	memset(reason, 'r', sizeof(reason));
	reason[5] = '\r';
	reason[6] = '\n';
	reason[sizeof(reason) - 1] = '\0';
	n = dg_egress_error_response(400, NULL, reason, out, sizeof(out));
	cr_assert_gt(n, 0);
	cr_assert_null(strstr(out, "X-Deskgate-Rule"));
	body = strstr(out, "\r\n\r\n") + 4;
	cr_assert_eq(strlen(body), strlen("deskgate egress: ") + DG_EGRESS_REASON_MAX + 1);
	cr_assert_null(strchr(body, '\r'));
	cr_assert_eq(strchr(body, '\n'), body + strlen(body) - 1);
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
	cr_assert(strstr(out, cl), "%s", out);
	/* Does not fit: 0, nothing overrun. */
	cr_assert_eq(dg_egress_error_response(400, NULL, "x", out, 32), 0);
}

/* ---- the policy's egress decision ---------------------------------------------------- */

Test(egress_policy, decide)
{
	static const char text[] =
		"{\"version\": 1, \"default\": \"allow\", \"egress\": {\"allow\": "
		"[\"example.com:443\", \"*.wikipedia.org:443\", \"[2606:4700::1]:80\", "
		"\"93.184.216.34:8080\"]}}";
	struct dg_policy p;
	struct dg_err err = {{0}};
	struct dg_decision d;
	dg_policy_default(&p);
	cr_assert_eq(dg_policy_parse(text, strlen(text), "test", &p, &err), 0, "%s", err.msg);

	cr_assert_eq(dg_policy_decide_egress(&p, "example.com", 443, &d), 0);
	cr_assert_eq(d.verdict, DG_VERDICT_ALLOW);
	cr_assert_str_eq(d.rule, "egress.allow[0]");
	cr_assert_eq(dg_policy_decide_egress(&p, "en.wikipedia.org", 443, &d), 0);
	cr_assert_eq(d.verdict, DG_VERDICT_ALLOW);
	cr_assert_str_eq(d.rule, "egress.allow[1]");
	cr_assert_eq(dg_policy_decide_egress(&p, "[2606:4700::1]", 80, &d), 0);
	cr_assert_str_eq(d.rule, "egress.allow[2]");
	cr_assert_eq(dg_policy_decide_egress(&p, "93.184.216.34", 8080, &d), 0);
	cr_assert_str_eq(d.rule, "egress.allow[3]");

	/* Unmatched: deny whatever "default" says (it is "allow" here). */
	static const struct {
		const char *host;
		uint16_t port;
	} no[] = {
		{"example.com", 80},         {"example.com", 444},      {"wikipedia.org", 443},
		{"evilwikipedia.org", 443},  {"a.example.com", 443},    {"wikipedia.org.evil", 443},
		{"93.184.216.34", 443},      {"[2606:4700::2]", 80},
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		cr_assert_eq(dg_policy_decide_egress(&p, no[i].host, no[i].port, &d), 0);
		cr_expect_eq(d.verdict, DG_VERDICT_DENY, "%s:%u", no[i].host, no[i].port);
		cr_expect_str_eq(d.rule, "egress.default");
		cr_expect(strstr(d.reason, "egress.allow"), "%s", d.reason);
	}
	/* Agrees with dg_policy_egress_allows. */
	cr_assert(dg_policy_egress_allows(&p, "en.wikipedia.org", 443));
	cr_assert_not(dg_policy_egress_allows(&p, "example.com", 80));

	/* Bad calls. */
	cr_assert_eq(dg_policy_decide_egress(NULL, "example.com", 443, &d), -EINVAL);
	cr_assert_eq(d.verdict, DG_VERDICT_DENY);
	cr_assert_str_eq(d.rule, "internal");
	cr_assert_eq(dg_policy_decide_egress(&p, NULL, 443, &d), -EINVAL);
	cr_assert_eq(dg_policy_decide_egress(&p, "example.com", 443, NULL), -EINVAL);
	dg_policy_free(&p);

	/* A policy without rules lets nothing through the proxy. */
	dg_policy_default(&p);
	cr_assert_eq(dg_policy_decide_egress(&p, "example.com", 443, &d), 0);
	cr_assert_eq(d.verdict, DG_VERDICT_DENY);
	cr_assert_str_eq(d.rule, "egress.default");
	cr_assert(strstr(d.reason, "no rules"), "%s", d.reason);
	/* Nor does a policy with rules but no "egress" section. */
	static const char noeg[] = "{\"version\": 1, \"default\": \"allow\", \"actions\": "
				   "{\"allow\": [\"click\"]}}";
	cr_assert_eq(dg_policy_parse(noeg, strlen(noeg), "test", &p, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_policy_decide_egress(&p, "example.com", 443, &d), 0);
	cr_assert_eq(d.verdict, DG_VERDICT_DENY);
	cr_assert_str_eq(d.rule, "egress.default");
	dg_policy_free(&p);
}

/* ---- SOCKS5 and the WebSocket handshake (issue 14) ---------------------------- */

Test(egress_socks, greeting_and_request)
{
	size_t used = 0;
	struct dg_err e = {{0}};
	/* Every prefix of a valid greeting and request is incomplete, never an
	 * error, and nothing is read past the message. */
	const char g[] = "\x05\x02\x02\x00" "after";
	for (size_t n = 0; n < 4; n++)
		cr_assert_eq(dg_egress_socks_greeting(g, n, &used, &e), -EAGAIN, "prefix %zu", n);
	cr_assert_eq(dg_egress_socks_greeting(g, sizeof(g) - 1, &used, &e), 0, "%s", e.msg);
	cr_assert_eq(used, 4);
	cr_assert_eq(dg_egress_socks_greeting("\x05\x01\x02", 3, &used, &e), -EACCES);
	cr_assert_eq(dg_egress_socks_greeting("\x05\x00", 2, &used, &e), -EINVAL);
	cr_assert_eq(dg_egress_socks_greeting("\x04\x01\x00", 3, &used, &e), -EINVAL);
	cr_assert(strstr(e.msg, "SOCKS5"), "%s", e.msg);

	struct dg_egress_req r;
	uint8_t code;
	const char q[] = "\x05\x01\x00\x03\x0c" "allowed.test\x01\xbb" "GET";
	for (size_t n = 0; n < 19; n++)
		cr_assert_eq(dg_egress_socks_request(q, n, &r, &used, &code, &e), -EAGAIN,
			     "prefix %zu", n);
	cr_assert_eq(dg_egress_socks_request(q, sizeof(q) - 1, &r, &used, &code, &e), 0, "%s", e.msg);
	cr_assert_eq(used, 19);
	cr_assert_str_eq(r.host, "allowed.test");
	cr_assert_eq(r.port, 443);
	cr_assert(!r.host_is_ip);
	cr_assert_str_eq(r.method, "SOCKS5");
	cr_assert_eq(code, DG_EGRESS_SOCKS_OK);
	cr_assert_eq(dg_egress_socks_request("\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50", 10, &r, &used,
					     &code, &e), 0, "%s", e.msg);
	cr_assert_str_eq(r.host, "127.0.0.1");
	cr_assert(r.host_is_ip);
	cr_assert_eq(r.port, 80);
	/* A name of the most bytes a host may have, and one more. */
	char big[300] = {5, 1, 0, 3};
	char name[DG_URL_HOST_MAX + 2];
	for (int n = DG_URL_HOST_MAX; n <= DG_URL_HOST_MAX + 1; n++) {
		memset(name, 'a', sizeof(name));
		for (int i = 63; i < n; i += 64)
			name[i] = '.';
		name[n] = '\0';
		big[4] = (char)n;
		memcpy(big + 5, name, (size_t)n);
		big[5 + n] = 0;
		big[6 + n] = 80;
		int rc = dg_egress_socks_request(big, (size_t)n + 7, &r, &used, &code, &e);
		cr_assert_eq(rc, n == DG_URL_HOST_MAX ? 0 : -EINVAL, "%d bytes: %s", n, e.msg);
	}
	char reply[DG_EGRESS_SOCKS_REPLY_LEN];
	cr_assert_eq(dg_egress_socks_reply(DG_EGRESS_SOCKS_RULESET, reply), 10);
	cr_assert(memcmp(reply, "\x05\x02\x00\x01\x00\x00\x00\x00\x00\x00", 10) == 0);
}

Test(egress_socks, ws_handshake)
{
	struct dg_egress_req r;
	struct dg_err e = {{0}};
	const char ok[] = "GET /chat?x=1 HTTP/1.1\r\nHost: a.test:8080\r\nUpgrade: WebSocket\r\n"
			  "Connection: Upgrade\r\n\r\n\x81\x80";
	cr_assert_eq(dg_egress_parse_ws_handshake(ok, sizeof(ok) - 1, "a.test", 8080, &r, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(r.head_len, sizeof(ok) - 3);
	cr_assert_eq(r.path_len, 9);
	cr_assert(memcmp(ok + r.path_off, "/chat?x=1", 9) == 0);
	for (size_t n = 0; n < r.head_len; n++)
		cr_assert_eq(dg_egress_parse_ws_handshake(ok, n, "a.test", 8080, &r, &e), -EAGAIN,
			     "prefix %zu: %s", n, e.msg);
	const char *bad[][2] = {
		{"GET /x HTTP/1.0\r\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1"},
		{"GET /x HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", "without a Host"},
		{"GET /x HTTP/1.1\r\nHost: a.test:8080\r\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "more than one Host"},
		{"GET /x HTTP/1.1\r\nHost: a.test:8080\r\nUpgrade: websocket\r\nUpgrade: websocket\r\n\r\n", "Upgrade header"},
		{"GET /x#f HTTP/1.1\r\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "fragment"},
		{"GET /x%zz HTTP/1.1\r\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "hex digits"},
		{"GET * HTTP/1.1\r\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "not a path"},
		{"GET /x HTTP/1.1\r\nHost: b.test:8080\r\nUpgrade: websocket\r\n\r\n", "does not name"},
		{"GET /x HTTP/1.1\nHost: a.test:8080\r\nUpgrade: websocket\r\n\r\n", "bare LF"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&e, 0, sizeof(e));
		cr_assert_eq(dg_egress_parse_ws_handshake(bad[i][0], strlen(bad[i][0]), "a.test", 8080,
							  &r, &e), -EINVAL, "case %zu accepted", i);
		cr_assert(strstr(e.msg, bad[i][1]), "case %zu: \"%s\" lacks \"%s\"", i, e.msg, bad[i][1]);
	}
	/* The proxy's own parser still refuses origin-form. */
	cr_assert_eq(dg_egress_parse_request(ok, sizeof(ok) - 1, &r, &e), -EINVAL);
}
