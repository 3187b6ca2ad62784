/* fuzz_url: the strict URL checker, dg_url_parse (policy/policy.h).
 *
 * Input: one URL (any bytes; NUL-terminated copy, so a NUL inside ends it
 * as it would for a C string from JSON). Checked for every accepted URL:
 *  - the fields describe the text: it is exactly
 *      scheme "://" host [":" port] path ["?" query] ["#" fragment]
 *    with host lowercase, the port the scheme's default when not given,
 *    path and query pointing into the input;
 *  - the host is a dotted quad that inet_ntop writes the same way, a
 *    bracketed address inet_pton reads, or a name of [a-z0-9.-] that is
 *    no IPv4 address;
 *  - the host passes dg_egress_host_check, the proxy's check of the same
 *    rules for CONNECT targets, with the same IP-ness;
 * and for every input: dg_url_parse_ws accepts what dg_url_parse accepts,
 * with the same fields, and beyond that only ws:// and wss:// URLs (checked
 * the same way, without a fragment); dg_policy_decide_url under a policy
 * with "urls" rules denies with rule "urls.canonical" exactly when
 * dg_url_parse_ws refuses. */
#include <arpa/inet.h>
#include <errno.h>

#include "egress-priv.h"
#include "fuzz_common.h"
#include "policy/policy.h"

static struct dg_policy policy;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	static const char text[] =
		"{\"version\":1,\"default\":\"deny\","
		"\"actions\":{\"allow\":[\"navigate\"]},"
		"\"urls\":{\"allow\":[\"https://example.com/**\",\"https://*.wikipedia.org/**\"],"
		"\"deny\":[\"https://*.wikipedia.org/wiki/Special:*\"],"
		"\"ask\":[\"https://example.com/admin/**\"]}}";
	struct dg_err err = {{0}};
	if (dg_policy_parse(text, sizeof(text) - 1, "fuzz_url", &policy, &err) != 0) {
		fprintf(stderr, "fuzz_url: the built-in policy does not load: %s\n", err.msg);
		abort();
	}
	return 0;
}

static void check_fields(const char *url, const struct dg_url *u)
{
	size_t len = strlen(url);
	const char *scheme = u->ws ? (u->https ? "wss://" : "ws://") : u->https ? "https://" : "http://";
	size_t k = strlen(scheme);
	DG_FUZZ_CHECK(strncmp(url, scheme, k) == 0, "scheme: %s", url);
	size_t hl = strlen(u->host);
	DG_FUZZ_CHECK(hl > 0 && hl <= DG_URL_HOST_MAX + 2, "host length %zu: %s", hl, url);
	for (size_t i = 0; i < hl; i++)
		DG_FUZZ_CHECK(!(u->host[i] >= 'A' && u->host[i] <= 'Z'), "host not lowercase: %s", url);
	DG_FUZZ_CHECK(strncmp(url + k, u->host, hl) == 0, "host %s not as written: %s", u->host, url);
	k += hl;
	if (u->port_given) {
		char port[16];
		int n = snprintf(port, sizeof(port), ":%u", (unsigned)u->port);
		DG_FUZZ_CHECK(strncmp(url + k, port, (size_t)n) == 0, "port %u not as written: %s",
			      (unsigned)u->port, url);
		DG_FUZZ_CHECK(u->port != 0 && u->port != (u->https ? 443 : 80),
			      "port %u accepted: %s", (unsigned)u->port, url);
		k += (size_t)n;
	} else {
		DG_FUZZ_CHECK(u->port == (u->https ? 443 : 80), "default port %u: %s",
			      (unsigned)u->port, url);
	}
	DG_FUZZ_CHECK(u->path == url + k, "path does not follow the authority: %s", url);
	DG_FUZZ_CHECK(u->path_len >= 1 && u->path[0] == '/', "path: %s", url);
	DG_FUZZ_CHECK(k + u->path_len <= len, "path past the end: %s", url);
	DG_FUZZ_CHECK(memchr(u->path, '?', u->path_len) == NULL &&
		      memchr(u->path, '#', u->path_len) == NULL, "path holds ? or #: %s", url);
	k += u->path_len;
	if (u->query) {
		DG_FUZZ_CHECK(url[k] == '?' && u->query == url + k + 1, "query: %s", url);
		DG_FUZZ_CHECK(k + 1 + u->query_len <= len, "query past the end: %s", url);
		DG_FUZZ_CHECK(memchr(u->query, '#', u->query_len) == NULL, "query holds #: %s", url);
		k += 1 + u->query_len;
	}
	DG_FUZZ_CHECK(url[k] == '\0' || (url[k] == '#' && !u->ws), "unexplained bytes after the path: %s",
		      url);

	/* The host's form, against libc's address parsers as an oracle. */
	if (u->host_is_ip && u->host[0] == '[') {
		DG_FUZZ_CHECK(hl > 2 && u->host[hl - 1] == ']', "IPv6 brackets: %s", url);
		char a6[64];
		unsigned char bin[16];
		DG_FUZZ_CHECK(hl - 2 < sizeof(a6), "IPv6 host of %zu bytes: %s", hl, url);
		memcpy(a6, u->host + 1, hl - 2);
		a6[hl - 2] = '\0';
		DG_FUZZ_CHECK(inet_pton(AF_INET6, a6, bin) == 1, "not an IPv6 address: %s", url);
	} else if (u->host_is_ip) {
		unsigned char bin[4];
		char back[INET_ADDRSTRLEN];
		DG_FUZZ_CHECK(inet_pton(AF_INET, u->host, bin) == 1 &&
			      inet_ntop(AF_INET, bin, back, sizeof(back)) &&
			      strcmp(back, u->host) == 0, "not a canonical dotted quad: %s", url);
	} else {
		for (size_t i = 0; i < hl; i++)
			DG_FUZZ_CHECK((u->host[i] >= 'a' && u->host[i] <= 'z') ||
				      (u->host[i] >= '0' && u->host[i] <= '9') || u->host[i] == '-' ||
				      u->host[i] == '.', "host byte 0x%02x: %s", (unsigned char)u->host[i],
				      url);
		unsigned char bin[16];
		DG_FUZZ_CHECK(inet_pton(AF_INET, u->host, bin) != 1, "an IPv4 address as a name: %s",
			      url);
	}

	char host[DG_URL_HOST_MAX + 1];
	bool is_ip = false;
	struct dg_err err = {{0}};
	int r = dg_egress_host_check(u->host, hl, host, &is_ip, &err);
	DG_FUZZ_CHECK(r == 0, "the proxy refuses the host of an accepted URL: %s: %s", err.msg, url);
	DG_FUZZ_CHECK(is_ip == u->host_is_ip, "host_is_ip differs: %s", url);
	DG_FUZZ_CHECK(strcmp(host, u->host) == 0, "host copied differently: %s", url);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > DG_URL_MAX + 16)
		return 0; /* refused by length before anything is read */
	char *url = dg_fuzz_cstr(data, size);
	struct dg_url u;
	struct dg_err err = {{0}};
	int r = dg_url_parse(url, &u, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL, "dg_url_parse: %d", r);
	if (r == 0)
		check_fields(url, &u);
	else
		DG_FUZZ_CHECK(err.msg[0] != '\0' && strchr(err.msg, '\n') == NULL,
			      "refused without a one-line message: %s", err.msg);
	struct dg_url w;
	int rw = dg_url_parse_ws(url, &w, &err);
	DG_FUZZ_CHECK(rw == 0 || rw == -EINVAL, "dg_url_parse_ws: %d", rw);
	if (r == 0)
		DG_FUZZ_CHECK(rw == 0 && !w.ws && w.https == u.https && w.port == u.port &&
			      strcmp(w.host, u.host) == 0 && w.path == u.path &&
			      w.path_len == u.path_len && w.query == u.query,
			      "dg_url_parse_ws reads an http(s) URL differently: %s", url);
	if (rw == 0 && r != 0)
		DG_FUZZ_CHECK(w.ws, "dg_url_parse_ws accepts an http(s) URL dg_url_parse refuses: %s",
			      url);
	if (rw == 0 && w.ws)
		check_fields(url, &w);

	struct dg_decision d;
	int k = dg_policy_decide_url(&policy, url, &d);
	DG_FUZZ_CHECK(k == 0, "dg_policy_decide_url: %d", k);
	bool canonical_rule = strcmp(d.rule, "urls.canonical") == 0;
	DG_FUZZ_CHECK(canonical_rule == (rw != 0), "dg_url_parse_ws says %d, the policy rule is %s: %s",
		      rw, d.rule, url);
	if (rw != 0)
		DG_FUZZ_CHECK(d.verdict == DG_VERDICT_DENY, "a refused URL is not denied: %s", url);
	free(url);
	return 0;
}
