/* gateway: loading and checking the gateway's configuration file.
 *
 * Same discipline as the policy loader (policy/policy.c): the file is read
 * whole (bounded by DG_CONFIG_FILE_MAX, regular files only), parsed strictly
 * by jansson and walked key by key. Every refusal names the origin and the
 * key; untrusted text shown in a message is escaped; secrets (tokens and
 * their hashes) are never shown. On any error the caller's struct dg_config
 * is left untouched.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "desktop/proto/proto.h"
#include "gateway/gateway-priv.h"
#include "recordings/recordings.h"

/* ---- shared helpers ----------------------------------------------------- */

int dg_jfail(const struct dg_jctx *c, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return dg_err_set(c->err, -EINVAL, "%s %s: %s", c->what, c->origin, msg);
}

int dg_json_decode(const struct dg_jctx *c, const char *text, size_t len, size_t max,
		   json_t **root)
{
	*root = NULL;
	if (len > max)
		return dg_err_set(c->err, -E2BIG, "%s %s: %zu bytes is more than the limit of %zu",
				  c->what, c->origin, len, max);
	if (len == 0)
		return dg_jfail(c, "the file is empty; it must hold a JSON object");

	/* JSON_REJECT_DUPLICATES: otherwise the last of two equal keys silently
	 * wins. Deliberately absent: JSON_DISABLE_EOF_CHECK (trailing data is an
	 * error), JSON_DECODE_ANY (a scalar is never a configuration),
	 * JSON_ALLOW_NUL (no value needs NUL; paths could be cut by one). */
	json_error_t jerr;
	json_t *r = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!r) {
		/* jansson quotes the text near the error ("near '\"abc...'"); in a
		 * file holding tokens that excerpt may be part of a secret, so the
		 * message keeps line, column and reason only. */
		char *near = strstr(jerr.text, " near '");
		if (near)
			*near = '\0';
		char why[DG_SHOW_LEN(JSON_ERROR_TEXT_LENGTH)];
		dg_show_str(jerr.text, JSON_ERROR_TEXT_LENGTH, false, why, sizeof(why));
		return dg_jfail(c, "invalid JSON at line %d, column %d: %s", jerr.line, jerr.column,
				why);
	}
	if (!json_is_object(r)) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(r, val, sizeof(val));
		json_decref(r);
		return dg_jfail(c, "the top level is %s; it must be an object", val);
	}
	*root = r;
	return 0;
}

void dg_sha256(const void *data, size_t len, unsigned char out[DG_SHA256_LEN])
{
	unsigned int n = 0;
	/* EVP_Digest with a built-in digest only fails on allocation failure;
	 * a zeroed hash then matches no token of the SHA-256 of anything (the
	 * preimage of all zeros is unknown), so failing closed needs no code. */
	if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != DG_SHA256_LEN)
		memset(out, 0, DG_SHA256_LEN);
}

bool dg_token_chars_ok(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x21 || ch > 0x7e)
			return false;
	}
	return true;
}

bool dg_token_name_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char ch = s[n];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
		if (!ok || n >= DG_TOKEN_NAME_MAX)
			return false;
	}
	return n > 0;
}

enum dg_role dg_role_from_name(const char *s)
{
	if (strcmp(s, "agent") == 0)
		return DG_ROLE_AGENT;
	if (strcmp(s, "viewer") == 0)
		return DG_ROLE_VIEWER;
	if (strcmp(s, "admin") == 0)
		return DG_ROLE_ADMIN;
	if (strcmp(s, "operator") == 0)
		return DG_ROLE_OPERATOR;
	return DG_ROLE_NONE;
}

const char *dg_role_name(enum dg_role role)
{
	switch (role) {
	case DG_ROLE_AGENT:
		return "agent";
	case DG_ROLE_VIEWER:
		return "viewer";
	case DG_ROLE_ADMIN:
		return "admin";
	case DG_ROLE_OPERATOR:
		return "operator";
	case DG_ROLE_NONE:
		break;
	}
	return "none";
}

/* ---- value checks --------------------------------------------------------- */

/* An unknown key "<prefix><key>", escaped. */
static int unknown_key(const struct dg_jctx *c, const char *prefix, const char *key,
		       const char *where)
{
	char k[DG_SHOW_LEN(DG_SHOW_KEY_MAX)];
	dg_show_str(key, DG_SHOW_KEY_MAX, true, k, sizeof(k));
	return dg_jfail(c, "unknown key \"%s%s\"%s", prefix, k, where);
}

/* A JSON value's kind only, for places where the value may be a secret. */
static const char *kind_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	case JSON_NULL:
		break;
	}
	return "null";
}

static int not_a(const struct dg_jctx *c, const char *key, const json_t *v, const char *kind)
{
	char val[DG_SHOW_VALUE_MAX];
	dg_show_value(v, val, sizeof(val));
	return dg_jfail(c, "%s: %s is not %s", key, val, kind);
}

/* Checks a path string and copies it into out (DG_CONFIG_PATH_MAX bytes).
 * Control bytes are refused: they would garble every message naming the
 * path and no real file needs them. */
static int path_check(const char *s, bool absolute, char *why, size_t why_len)
{
	size_t n = strlen(s);
	if (n == 0) {
		snprintf(why, why_len, "an empty path");
		return -EINVAL;
	}
	if (n >= DG_CONFIG_PATH_MAX) {
		snprintf(why, why_len, "a path of %zu bytes is longer than the limit of %d", n,
			 DG_CONFIG_PATH_MAX - 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f) {
			snprintf(why, why_len, "control byte 0x%02x in a path", ch);
			return -EINVAL;
		}
	}
	if (absolute && s[0] != '/') {
		snprintf(why, why_len,
			 "not an absolute path (paths in the file must not depend on the "
			 "directory the server starts in)");
		return -EINVAL;
	}
	return 0;
}

static int parse_path(const struct dg_jctx *c, const char *key, const json_t *v, char *out)
{
	if (!json_is_string(v))
		return not_a(c, key, v, "a string (an absolute path)");
	const char *s = json_string_value(v);
	char why[160];
	if (path_check(s, true, why, sizeof(why))) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(v, val, sizeof(val));
		return dg_jfail(c, "%s: %s is %s", key, val, why);
	}
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/* Opens path for reading and checks it is a regular file, so a missing or
 * unreadable certificate is reported at load, naming the key, rather than
 * by the TLS library when the first client connects. */
static int readable_file(const struct dg_jctx *c, const char *key, const char *path)
{
	char p[DG_SHOW_LEN(256)];
	dg_show_str(path, 256, true, p, sizeof(p));
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return dg_jfail(c, "%s: \"%s\": %s", key, p, strerror(errno));
	struct stat st;
	int rc = fstat(fd, &st);
	int e = errno;
	close(fd);
	if (rc < 0)
		return dg_jfail(c, "%s: \"%s\": fstat: %s", key, p, strerror(e));
	if (!S_ISREG(st.st_mode))
		return dg_jfail(c, "%s: \"%s\" is not a regular file", key, p);
	return 0;
}

/* ---- listen ---------------------------------------------------------------- */

struct listen_addr {
	char listen[DG_LISTEN_MAX];
	char addr[DG_LISTEN_MAX];
	int family;
	uint16_t port;
};

/* "A.B.C.D:PORT" or "[IPv6]:PORT", numeric only: a host name would be
 * resolved at bind time, to an address nobody reviewed. The port is 1-65535
 * in plain decimal ("08470" is refused: it reads as octal to some tools). */
static int parse_listen(const char *s, struct listen_addr *o, char *why, size_t why_len)
{
	memset(o, 0, sizeof(*o));
	size_t n = strnlen(s, DG_LISTEN_MAX);
	if (n >= DG_LISTEN_MAX) {
		snprintf(why, why_len, "longer than %d bytes", DG_LISTEN_MAX - 1);
		return -EINVAL;
	}
	char addr[DG_LISTEN_MAX];
	const char *port;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':') {
			snprintf(why, why_len, "expected [IPv6]:PORT");
			return -EINVAL;
		}
		memcpy(addr, s + 1, (size_t)(rb - s - 1));
		addr[rb - s - 1] = '\0';
		port = rb + 2;
		struct in6_addr a6;
		if (inet_pton(AF_INET6, addr, &a6) != 1) {
			snprintf(why, why_len, "not an IPv6 address between the brackets");
			return -EINVAL;
		}
		o->family = AF_INET6;
		inet_ntop(AF_INET6, &a6, o->addr, sizeof(o->addr));
	} else {
		const char *colon = strrchr(s, ':');
		if (!colon) {
			snprintf(why, why_len,
				 "expected ADDR:PORT (an IPv4 address, or an IPv6 one in brackets, "
				 "and a port)");
			return -EINVAL;
		}
		memcpy(addr, s, (size_t)(colon - s));
		addr[colon - s] = '\0';
		port = colon + 1;
		if (strchr(addr, ':')) {
			snprintf(why, why_len, "an IPv6 address must be in brackets: [ADDR]:PORT");
			return -EINVAL;
		}
		struct in_addr a4;
		if (inet_pton(AF_INET, addr, &a4) != 1) {
			snprintf(why, why_len,
				 "not a numeric IPv4 address (host names are not accepted)");
			return -EINVAL;
		}
		o->family = AF_INET;
		inet_ntop(AF_INET, &a4, o->addr, sizeof(o->addr));
	}

	size_t pl = strlen(port);
	unsigned long p = 0;
	bool digits = pl > 0 && pl <= 5;
	for (size_t i = 0; digits && i < pl; i++) {
		if (port[i] < '0' || port[i] > '9')
			digits = false;
		else
			p = p * 10 + (unsigned long)(port[i] - '0');
	}
	if (!digits || (pl > 1 && port[0] == '0')) {
		snprintf(why, why_len, "the port must be a decimal number 1-65535 without leading zeros");
		return -EINVAL;
	}
	if (p < 1 || p > 65535) {
		snprintf(why, why_len, "port %lu is out of range [1, 65535]", p);
		return -EINVAL;
	}
	o->port = (uint16_t)p;
	snprintf(o->listen, sizeof(o->listen), o->family == AF_INET6 ? "[%s]:%u" : "%s:%u",
		 o->addr, (unsigned)o->port);
	return 0;
}

static void apply_listen(struct dg_config *cfg, const struct listen_addr *l)
{
	memcpy(cfg->listen, l->listen, sizeof(cfg->listen));
	memcpy(cfg->listen_addr, l->addr, sizeof(cfg->listen_addr));
	cfg->listen_family = l->family;
	cfg->listen_port = l->port;
}

static int sec_listen(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_string(v))
		return not_a(c, "listen", v, "a string (ADDR:PORT)");
	struct listen_addr l;
	char why[160];
	if (parse_listen(json_string_value(v), &l, why, sizeof(why))) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(v, val, sizeof(val));
		return dg_jfail(c, "listen: %s: %s", val, why);
	}
	apply_listen(cfg, &l);
	return 0;
}

/* ---- public_url -------------------------------------------------------------- */

/* http(s)://HOST[:PORT][/PATH]. The server appends "/v1/..." to it, so a
 * query, fragment or user part would produce broken or misleading URLs. */
static int check_public_url(const char *s, char *out, char *why, size_t why_len)
{
	size_t n = strlen(s);
	if (n >= DG_PUBLIC_URL_MAX) {
		snprintf(why, why_len, "longer than %d bytes", DG_PUBLIC_URL_MAX - 1);
		return -EINVAL;
	}
	const char *rest;
	if (strncmp(s, "http://", 7) == 0)
		rest = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		rest = s + 8;
	else {
		snprintf(why, why_len, "must start with http:// or https://");
		return -EINVAL;
	}

	const char *path = strchr(rest, '/');
	size_t alen = path ? (size_t)(path - rest) : strlen(rest);
	char auth[DG_PUBLIC_URL_MAX];
	memcpy(auth, rest, alen);
	auth[alen] = '\0';
	if (alen == 0) {
		snprintf(why, why_len, "no host");
		return -EINVAL;
	}
	const char *port = NULL;
	if (auth[0] == '[') {
		char *rb = strchr(auth, ']');
		if (!rb || (rb[1] != '\0' && rb[1] != ':')) {
			snprintf(why, why_len, "bad [IPv6] host");
			return -EINVAL;
		}
		*rb = '\0';
		struct in6_addr a6;
		if (inet_pton(AF_INET6, auth + 1, &a6) != 1) {
			snprintf(why, why_len, "bad [IPv6] host");
			return -EINVAL;
		}
		if (rb[1] == ':')
			port = rb + 2;
	} else {
		char *colon = strchr(auth, ':');
		if (colon) {
			*colon = '\0';
			port = colon + 1;
		}
		if (auth[0] == '\0') {
			snprintf(why, why_len, "no host");
			return -EINVAL;
		}
		for (const char *p = auth; *p; p++) {
			bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				  (*p >= '0' && *p <= '9') || *p == '.' || *p == '-';
			if (!ok) {
				snprintf(why, why_len,
					 "the host may only hold letters, digits, '.' and '-' "
					 "(no user part, query or fragment)");
				return -EINVAL;
			}
		}
	}
	if (port) {
		size_t pl = strlen(port);
		unsigned long pv = 0;
		bool ok = pl > 0 && pl <= 5 && port[0] != '0';
		for (size_t i = 0; ok && i < pl; i++) {
			if (port[i] < '0' || port[i] > '9')
				ok = false;
			else
				pv = pv * 10 + (unsigned long)(port[i] - '0');
		}
		if (!ok || pv < 1 || pv > 65535) {
			snprintf(why, why_len, "the port must be 1-65535");
			return -EINVAL;
		}
	}
	if (path) {
		for (const char *p = path; *p; p++) {
			bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				  (*p >= '0' && *p <= '9') || strchr("-._~!$&'()*+,;=:/%", *p);
			if (*p == '%' && !(dg_hex_value(p[1]) >= 0 && dg_hex_value(p[2]) >= 0))
				ok = false;
			if (!ok) {
				snprintf(why, why_len,
					 "the path may hold only URL path characters (no query, "
					 "fragment, spaces or non-ASCII)");
				return -EINVAL;
			}
		}
	}
	memcpy(out, s, n + 1);
	if (n > 0 && out[n - 1] == '/' && path)
		out[--n] = '\0';
	if (n > 0 && out[n - 1] == '/') {
		snprintf(why, why_len, "ends with \"//\"");
		return -EINVAL;
	}
	return 0;
}

static int sec_public_url(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_string(v))
		return not_a(c, "public_url", v, "a string (http:// or https:// URL)");
	char why[160], out[DG_PUBLIC_URL_MAX];
	if (check_public_url(json_string_value(v), out, why, sizeof(why))) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(v, val, sizeof(val));
		return dg_jfail(c, "public_url: %s: %s", val, why);
	}
	memcpy(cfg->public_url, out, sizeof(out));
	return 0;
}

/* ---- tls ----------------------------------------------------------------------- */

static int sec_tls(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_object(v))
		return not_a(c, "tls", v, "an object ({\"cert\": PATH, \"key\": PATH})");
	const char *key;
	json_t *item;
	json_object_foreach(v, key, item) {
		int rc;
		if (strcmp(key, "cert") == 0)
			rc = parse_path(c, "tls.cert", item, cfg->tls_cert);
		else if (strcmp(key, "key") == 0)
			rc = parse_path(c, "tls.key", item, cfg->tls_key);
		else
			rc = unknown_key(c, "tls.", key, "");
		if (rc)
			return rc;
	}
	/* Both or neither: a certificate without its key (or the reverse) is a
	 * half-done setup, and serving plain HTTP instead would be a surprise. */
	if (!cfg->tls_cert[0] && !cfg->tls_key[0])
		return dg_jfail(c, "tls: an empty object; give \"cert\" and \"key\", or leave "
				   "\"tls\" out for plain HTTP");
	if (!cfg->tls_key[0])
		return dg_jfail(c, "tls: \"cert\" is given without \"key\"; give both or neither");
	if (!cfg->tls_cert[0])
		return dg_jfail(c, "tls: \"key\" is given without \"cert\"; give both or neither");
	int rc = readable_file(c, "tls.cert", cfg->tls_cert);
	if (rc == 0)
		rc = readable_file(c, "tls.key", cfg->tls_key);
	return rc;
}

/* ---- tokens --------------------------------------------------------------------- */

/* Wipes a JSON string's bytes in place: the parser's copy of a secret would
 * otherwise stay in freed heap memory. jansson owns the buffer; it is freed
 * right after, and its length is left as it was. */
static void wipe_json_string(json_t *v)
{
	if (json_is_string(v))
		OPENSSL_cleanse((void *)json_string_value(v), json_string_length(v));
}

/* One entry of "tokens". Messages never show token or token_sha256 values:
 * either may be a secret (a clear token pasted into the hash field). */
static int parse_token(const struct dg_jctx *c, json_t *obj, const char *at,
		       struct dg_config_token *t)
{
	memset(t, 0, sizeof(*t));
	/* Only the kind is shown: a bare string here is likely a token. */
	if (!json_is_object(obj))
		return dg_jfail(c, "%s: %s is not an object ({\"name\", \"role\", \"token\" or "
				   "\"token_sha256\"})",
				at, kind_of(obj));
	json_t *name = NULL, *role = NULL, *clear = NULL, *hash = NULL;
	const char *key;
	json_t *item;
	json_object_foreach(obj, key, item) {
		if (strcmp(key, "name") == 0)
			name = item;
		else if (strcmp(key, "role") == 0)
			role = item;
		else if (strcmp(key, "token") == 0)
			clear = item;
		else if (strcmp(key, "token_sha256") == 0)
			hash = item;
		else {
			char prefix[96];
			snprintf(prefix, sizeof(prefix), "%s.", at);
			return unknown_key(c, prefix, key, "");
		}
	}

	if (!name)
		return dg_jfail(c, "%s: missing required key \"name\"", at);
	if (!json_is_string(name) || !dg_token_name_ok(json_string_value(name))) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(name, val, sizeof(val));
		return dg_jfail(c, "%s.name: %s is not a name; allowed: 1 to %d of [A-Za-z0-9._-]",
				at, val, DG_TOKEN_NAME_MAX);
	}
	snprintf(t->name, sizeof(t->name), "%s", json_string_value(name));

	if (!role)
		return dg_jfail(c, "%s: missing required key \"role\"", at);
	t->role = json_is_string(role) ? dg_role_from_name(json_string_value(role)) : DG_ROLE_NONE;
	if (t->role == DG_ROLE_NONE) {
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(role, val, sizeof(val));
		return dg_jfail(c, "%s.role: %s is not a role; allowed: \"agent\", \"viewer\", "
				"\"operator\", \"admin\"",
				at, val);
	}

	if (clear && hash)
		return dg_jfail(c, "%s: both \"token\" and \"token_sha256\" are given; give one", at);
	if (!clear && !hash)
		return dg_jfail(c, "%s: missing \"token\" or \"token_sha256\"", at);
	if (clear) {
		if (!json_is_string(clear))
			return dg_jfail(c, "%s.token: %s is not a string", at, kind_of(clear));
		size_t len = json_string_length(clear);
		const char *s = json_string_value(clear);
		if (len < DG_TOKEN_MIN || len > DG_TOKEN_MAX)
			return dg_jfail(c, "%s.token: %zu characters is outside [%d, %d]", at, len,
					DG_TOKEN_MIN, DG_TOKEN_MAX);
		if (!dg_token_chars_ok(s, len))
			return dg_jfail(c, "%s.token: only printable ASCII without spaces is allowed",
					at);
		dg_sha256(s, len, t->sha256);
		return 0;
	}
	const char *h = json_is_string(hash) ? json_string_value(hash) : NULL;
	bool ok = h && json_string_length(hash) == 2 * DG_SHA256_LEN &&
		  dg_hex_decode(h, DG_SHA256_LEN, t->sha256) == 0;
	if (!ok) {
		memset(t->sha256, 0, sizeof(t->sha256));
		return dg_jfail(c,
				"%s.token_sha256: not %d hexadecimal digits (the SHA-256 of the "
				"token, e.g. from `printf %%s \"$TOKEN\" | sha256sum`)",
				at, 2 * DG_SHA256_LEN);
	}
	return 0;
}

int dg_parse_tokens(const struct dg_jctx *c, json_t *arr, const char *key,
		    struct dg_config_token **out, size_t *n_out)
{
	*out = NULL;
	*n_out = 0;
	if (!json_is_array(arr))
		return dg_jfail(c, "%s: %s is not an array", key, kind_of(arr));
	size_t n = json_array_size(arr);
	if (n > DG_TOKENS_MAX)
		return dg_jfail(c, "%s: %zu entries is more than the limit of %d", key, n,
				DG_TOKENS_MAX);
	struct dg_config_token *t = n ? calloc(n, sizeof(*t)) : NULL;
	if (n && !t)
		return dg_err_set(c->err, -ENOMEM, "%s %s: %s", c->what, c->origin, strerror(ENOMEM));
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char at[64];
		snprintf(at, sizeof(at), "%s[%zu]", key, i);
		json_t *entry = json_array_get(arr, i);
		rc = parse_token(c, entry, at, &t[i]);
		for (size_t j = 0; j < i && rc == 0; j++) {
			if (strcmp(t[j].name, t[i].name) == 0)
				rc = dg_jfail(c, "%s.name: \"%s\" is already the name of %s[%zu]", at,
					      t[i].name, key, j);
			else if (CRYPTO_memcmp(t[j].sha256, t[i].sha256, DG_SHA256_LEN) == 0)
				/* Two names for one secret: which one would own the
				 * sessions it creates? */
				rc = dg_jfail(c, "%s: the same token as %s[%zu] (\"%s\")", at, key, j,
					      t[j].name);
		}
	}
	/* Wipe every clear token, whether parsed, refused or never reached. */
	for (size_t i = 0; i < n; i++) {
		json_t *entry = json_array_get(arr, i);
		if (json_is_object(entry))
			wipe_json_string(json_object_get(entry, "token"));
	}
	if (rc) {
		OPENSSL_cleanse(t, n * sizeof(*t));
		free(t);
		return rc;
	}
	*out = t;
	*n_out = n;
	return 0;
}

static int sec_tokens(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	return dg_parse_tokens(c, v, "tokens", &cfg->tokens, &cfg->n_tokens);
}

/* ---- policies ---------------------------------------------------------------- */

static bool policy_name_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char ch = s[n];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
			  ch == '-';
		if (!ok || n >= DG_POLICY_NAME_MAX)
			return false;
	}
	return n > 0;
}

static int sec_policy(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	return parse_path(c, "policy", v, cfg->policy);
}

static int sec_policies(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_object(v))
		return not_a(c, "policies", v, "an object (NAME: PATH)");
	size_t n = json_object_size(v);
	if (n > DG_POLICIES_MAX)
		return dg_jfail(c, "policies: %zu entries is more than the limit of %d", n,
				DG_POLICIES_MAX);
	struct dg_config_policy *p = n ? calloc(n, sizeof(*p)) : NULL;
	if (n && !p)
		return dg_err_set(c->err, -ENOMEM, "%s %s: %s", c->what, c->origin, strerror(ENOMEM));
	size_t i = 0;
	const char *name;
	json_t *item;
	json_object_foreach(v, name, item) {
		char k[DG_SHOW_LEN(DG_SHOW_KEY_MAX)];
		dg_show_str(name, DG_SHOW_KEY_MAX, true, k, sizeof(k));
		int rc = 0;
		if (!policy_name_ok(name))
			rc = dg_jfail(c, "policies: \"%s\" is not a policy name; allowed: 1 to %d of "
					 "[a-z0-9_-]",
				      k, DG_POLICY_NAME_MAX);
		else if (strcmp(name, "default") == 0)
			rc = dg_jfail(c, "policies: \"default\" is reserved for the top-level "
					 "\"policy\"");
		if (rc == 0) {
			char at[DG_POLICY_NAME_MAX + 16];
			snprintf(at, sizeof(at), "policies.%s", name);
			rc = parse_path(c, at, item, p[i].path);
		}
		if (rc) {
			free(p);
			return rc;
		}
		snprintf(p[i].name, sizeof(p[i].name), "%s", name);
		i++;
	}
	cfg->policies = p;
	cfg->n_policies = n;
	return 0;
}

static int sec_recordings(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	return parse_path(c, "recordings", v, cfg->recordings);
}

static int sec_state_dir(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	return parse_path(c, "state_dir", v, cfg->state_dir);
}

static int sec_instance(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	_Static_assert(DG_CONFIG_INSTANCE_MAX == DG_INSTANCE_MAX, "one instance length");
	if (!json_is_string(v))
		return not_a(c, "instance", v, "a string (1-32 of [a-z0-9-])");
	if (!dg_instance_valid(json_string_value(v))) {
		char val[DG_SHOW_VALUE_BUF];
		dg_show_value(v, val, sizeof(val));
		return dg_jfail(c, "instance: %s is not a valid name: 1 to %d of [a-z0-9-], starting "
				   "with a letter or digit, not with \"jail-\"", val, DG_INSTANCE_MAX);
	}
	snprintf(cfg->instance, sizeof(cfg->instance), "%s", json_string_value(v));
	return 0;
}

/* ---- object storage ------------------------------------------------------------ */

/* The store file is loaded and checked now (as the gateway starts, still
 * root: the file is root's, mode 0600), so a bad one stops the start with
 * its own message; the gateway loads it again to use it. */
static int sec_object_store(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_object(v))
		return not_a(c, "object_store", v, "an object (store, keep_local, cache_mb)");
	struct dg_config_store o = { .cache_mb = DG_CONFIG_CACHE_MB_DEFAULT };
	const char *key;
	json_t *item;
	json_object_foreach(v, key, item) {
		if (strcmp(key, "store") == 0) {
			int rc = parse_path(c, "object_store.store", item, o.store);
			if (rc)
				return rc;
		} else if (strcmp(key, "keep_local") == 0) {
			if (!json_is_boolean(item))
				return not_a(c, "object_store.keep_local", item, "true or false");
			o.keep_local = json_is_true(item);
		} else if (strcmp(key, "cache_mb") == 0) {
			char val[DG_SHOW_VALUE_MAX];
			dg_show_value(item, val, sizeof(val));
			if (!json_is_integer(item) || json_integer_value(item) < DG_CONFIG_CACHE_MB_MIN ||
			    json_integer_value(item) > DG_CONFIG_CACHE_MB_MAX)
				return dg_jfail(c, "object_store.cache_mb: %s: want an integer in "
						   "[%d, %d]", val, DG_CONFIG_CACHE_MB_MIN,
						DG_CONFIG_CACHE_MB_MAX);
			o.cache_mb = (uint32_t)json_integer_value(item);
		} else {
			return unknown_key(c, "object_store.", key, "");
		}
	}
	if (!o.store[0])
		return dg_jfail(c, "object_store: \"store\" is required: the path of a store file "
				   "(endpoint, region, bucket, access_key, secret_key; mode 0600)");
	struct dg_rec_s3 s3;
	json_t *doc = NULL;
	struct dg_err e = {{0}};
	int rc = dg_rec_s3_load(o.store, &s3, &doc, &e);
	json_decref(doc);
	if (rc)
		return dg_err_set(c->err, rc == -ENOMEM ? rc : -EINVAL, "%s %s: object_store.store: %s",
				  c->what, c->origin, e.msg);
	cfg->object_store = o;
	return 0;
}

/* ---- capacity ------------------------------------------------------------------ */

/* "capacity": {"agent_check": "ADDR:PORT", "drain": false}: what a balancer
 * in front of several gateways learns about this one (docs/scale-out.md). */
static int sec_capacity(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_object(v))
		return not_a(c, "capacity", v, "an object ({\"agent_check\": ADDR:PORT, \"drain\": BOOL})");
	const char *key;
	json_t *item;
	json_object_foreach(v, key, item) {
		if (strcmp(key, "agent_check") == 0) {
			if (!json_is_string(item))
				return not_a(c, "capacity.agent_check", item, "a string (ADDR:PORT)");
			struct listen_addr l;
			char why[160];
			if (parse_listen(json_string_value(item), &l, why, sizeof(why))) {
				char val[DG_SHOW_VALUE_MAX];
				dg_show_value(item, val, sizeof(val));
				return dg_jfail(c, "capacity.agent_check: %s: %s", val, why);
			}
			memcpy(cfg->agent_check, l.listen, sizeof(cfg->agent_check));
			memcpy(cfg->agent_check_addr, l.addr, sizeof(cfg->agent_check_addr));
			cfg->agent_check_family = l.family;
			cfg->agent_check_port = l.port;
		} else if (strcmp(key, "drain") == 0) {
			if (!json_is_boolean(item))
				return not_a(c, "capacity.drain", item, "true or false");
			cfg->drain = json_is_true(item);
		} else {
			int rc = unknown_key(c, "capacity.", key, "");
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- limits -------------------------------------------------------------------- */

/* The bounds come from gateway.h, the single statement of what may be set. */
struct limit_field {
	const char *key;
	size_t offset;
	long long min, max;
};

#define LIMIT(name, NAME)                                                                    \
	{ #name, offsetof(struct dg_gw_limits, name), DG_GW_##NAME##_MIN, DG_GW_##NAME##_MAX }

static const struct limit_field limit_fields[] = {
	LIMIT(max_sessions, MAX_SESSIONS),
	LIMIT(max_message_bytes, MAX_MESSAGE_BYTES),
	LIMIT(max_pending_actions, MAX_PENDING_ACTIONS),
	LIMIT(idle_seconds, IDLE_SECONDS),
	LIMIT(approval_seconds, APPROVAL_SECONDS),
	LIMIT(takeover_seconds, TAKEOVER_SECONDS),
	LIMIT(takeover_idle_seconds, TAKEOVER_IDLE_SECONDS),
	LIMIT(recording_fsync_ms, RECORDING_FSYNC_MS),
	LIMIT(retention_days, RETENTION_DAYS),
	LIMIT(retention_mb, RETENTION_MB),
	LIMIT(warm_xterm, WARM_XTERM),
	LIMIT(warm_browser, WARM_BROWSER),
	LIMIT(session_seconds, SESSION_SECONDS),
	LIMIT(disconnect_grace_seconds, DISCONNECT_GRACE_SECONDS),
	LIMIT(max_observers, MAX_OBSERVERS),
	LIMIT(handshake_seconds, HANDSHAKE_SECONDS),
	LIMIT(actions_per_second, ACTIONS_PER_SECOND),
};
#define N_LIMIT_FIELDS (sizeof(limit_fields) / sizeof(limit_fields[0]))
/* Every field is a uint32_t, stored below by offset; a new field of another
 * width, or one missing from the table, must not build. */
_Static_assert(sizeof(struct dg_gw_limits) == N_LIMIT_FIELDS * sizeof(uint32_t),
	       "every limit is a uint32_t listed in limit_fields");

static int sec_limits(const struct dg_jctx *c, json_t *v, struct dg_config *cfg)
{
	if (!json_is_object(v))
		return not_a(c, "limits", v, "an object");
	const char *key;
	json_t *item;
	json_object_foreach(v, key, item) {
		size_t i = 0;
		while (i < N_LIMIT_FIELDS && strcmp(limit_fields[i].key, key) != 0)
			i++;
		if (i == N_LIMIT_FIELDS)
			return unknown_key(c, "limits.", key, "");
		const struct limit_field *f = &limit_fields[i];
		char val[DG_SHOW_VALUE_MAX];
		dg_show_value(item, val, sizeof(val));
		/* Integers only: 20.0 or 2e1 is refused rather than rounded. */
		if (!json_is_integer(item))
			return dg_jfail(c, "limits.%s: %s is not an integer; allowed: an integer in "
					   "[%lld, %lld]",
					f->key, val, f->min, f->max);
		json_int_t n = json_integer_value(item);
		if (n < f->min || n > f->max)
			return dg_jfail(c, "limits.%s: %s is out of range [%lld, %lld]", f->key, val,
					f->min, f->max);
		uint32_t u = (uint32_t)n;
		memcpy((char *)&cfg->limits + f->offset, &u, sizeof(u));
	}
	return 0;
}

/* ---- top level ---------------------------------------------------------------- */

struct section {
	const char *key;
	int (*parse)(const struct dg_jctx *c, json_t *v, struct dg_config *cfg);
};

static const struct section sections[] = {
	{ "listen", sec_listen },         { "public_url", sec_public_url },
	{ "tls", sec_tls },               { "tokens", sec_tokens },
	{ "policy", sec_policy },         { "policies", sec_policies },
	{ "recordings", sec_recordings }, { "state_dir", sec_state_dir },
	{ "instance", sec_instance },     { "limits", sec_limits },
	{ "object_store", sec_object_store },
	{ "capacity", sec_capacity },
};
#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

void dg_config_default(struct dg_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	struct listen_addr l;
	char why[160];
	/* The default is a literal known to parse; checked by the tests. */
	if (parse_listen(DG_CONFIG_DEFAULT_LISTEN, &l, why, sizeof(why)) == 0)
		apply_listen(cfg, &l);
	snprintf(cfg->recordings, sizeof(cfg->recordings), "%s", DG_CONFIG_DEFAULT_RECORDINGS);
	snprintf(cfg->state_dir, sizeof(cfg->state_dir), "%s", DG_CONFIG_DEFAULT_STATE_DIR);
	cfg->object_store.cache_mb = DG_CONFIG_CACHE_MB_DEFAULT;
	cfg->limits = (struct dg_gw_limits){
		.max_sessions = DG_GW_MAX_SESSIONS_DEFAULT,
		.max_message_bytes = DG_GW_MAX_MESSAGE_BYTES_DEFAULT,
		.max_pending_actions = DG_GW_MAX_PENDING_ACTIONS_DEFAULT,
		.idle_seconds = DG_GW_IDLE_SECONDS_DEFAULT,
		.approval_seconds = DG_GW_APPROVAL_SECONDS_DEFAULT,
		.takeover_seconds = DG_GW_TAKEOVER_SECONDS_DEFAULT,
		.takeover_idle_seconds = DG_GW_TAKEOVER_IDLE_SECONDS_DEFAULT,
		.recording_fsync_ms = DG_GW_RECORDING_FSYNC_MS_DEFAULT,
		.retention_days = DG_GW_RETENTION_DAYS_DEFAULT,
		.retention_mb = DG_GW_RETENTION_MB_DEFAULT,
		.warm_xterm = DG_GW_WARM_XTERM_DEFAULT,
		.warm_browser = DG_GW_WARM_BROWSER_DEFAULT,
		.session_seconds = DG_GW_SESSION_SECONDS_DEFAULT,
		.disconnect_grace_seconds = DG_GW_DISCONNECT_GRACE_SECONDS_DEFAULT,
		.max_observers = DG_GW_MAX_OBSERVERS_DEFAULT,
		.handshake_seconds = DG_GW_HANDSHAKE_SECONDS_DEFAULT,
		.actions_per_second = DG_GW_ACTIONS_PER_SECOND_DEFAULT,
	};
}

void dg_config_free(struct dg_config *cfg)
{
	if (!cfg)
		return;
	if (cfg->tokens)
		OPENSSL_cleanse(cfg->tokens, cfg->n_tokens * sizeof(*cfg->tokens));
	free(cfg->tokens);
	free(cfg->policies);
	cfg->tokens = NULL;
	cfg->n_tokens = 0;
	cfg->policies = NULL;
	cfg->n_policies = 0;
}

int dg_config_parse(const char *text, size_t len, const char *origin, struct dg_config *cfg,
		    struct dg_err *err)
{
	struct dg_jctx c = { .what = "config", .origin = origin ? origin : "<unnamed>", .err = err };
	json_t *root;
	int rc = dg_json_decode(&c, text, len, DG_CONFIG_FILE_MAX, &root);
	if (rc)
		return rc;

	/* Built on the heap: struct dg_config holds several PATH_MAX buffers. */
	struct dg_config *next = malloc(sizeof(*next));
	if (!next) {
		json_decref(root);
		return dg_err_set(err, -ENOMEM, "config %s: %s", c.origin, strerror(ENOMEM));
	}
	dg_config_default(next);
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		size_t i = 0;
		while (i < N_SECTIONS && strcmp(sections[i].key, key) != 0)
			i++;
		rc = i == N_SECTIONS ? unknown_key(&c, "", key, " at top level")
				     : sections[i].parse(&c, v, next);
		if (rc)
			break;
	}
	/* A refused file may still hold clear tokens the tokens section did not
	 * reach; wipe whatever is there before the tree is freed. */
	json_t *tokens = json_object_get(root, "tokens");
	for (size_t i = 0; json_is_array(tokens) && i < json_array_size(tokens); i++) {
		json_t *entry = json_array_get(tokens, i);
		if (json_is_object(entry))
			wipe_json_string(json_object_get(entry, "token"));
	}
	json_decref(root);
	if (rc == 0)
		*cfg = *next;
	else
		dg_config_free(next);
	OPENSSL_cleanse(next, sizeof(*next));
	free(next);
	return rc;
}

int dg_config_load(const char *path, struct dg_config *cfg, struct dg_err *err)
{
	char *buf;
	size_t len;
	struct stat st;
	int rc = dg_read_file("config", path, DG_CONFIG_FILE_MAX, false, &buf, &len, &st, err);
	if (rc)
		return rc;
	rc = dg_config_parse(buf, len, path, cfg, err);
	OPENSSL_cleanse(buf, len);
	free(buf);
	return rc;
}

/* ---- command-line overrides ------------------------------------------------------ */

int dg_config_set_listen(struct dg_config *cfg, const char *addr_port, struct dg_err *err)
{
	struct listen_addr l;
	char why[160];
	char v[DG_SHOW_LEN(DG_SHOW_KEY_MAX)];
	dg_show_str(addr_port ? addr_port : "", DG_SHOW_KEY_MAX, true, v, sizeof(v));
	if (!addr_port || parse_listen(addr_port, &l, why, sizeof(why)))
		return dg_err_set(err, -EINVAL, "--listen: \"%s\": %s", v,
				  addr_port ? why : "missing");
	apply_listen(cfg, &l);
	return 0;
}

static int set_path(const char *flag, char *field, const char *path, struct dg_err *err)
{
	char why[160];
	if (!path)
		return dg_err_set(err, -EINVAL, "%s: missing path", flag);
	if (path_check(path, false, why, sizeof(why))) {
		char v[DG_SHOW_LEN(DG_SHOW_KEY_MAX)];
		dg_show_str(path, DG_SHOW_KEY_MAX, true, v, sizeof(v));
		return dg_err_set(err, -EINVAL, "%s: \"%s\" is %s", flag, v, why);
	}
	memcpy(field, path, strlen(path) + 1);
	return 0;
}

int dg_config_set_policy(struct dg_config *cfg, const char *path, struct dg_err *err)
{
	return set_path("--policy", cfg->policy, path, err);
}

int dg_config_set_recordings(struct dg_config *cfg, const char *path, struct dg_err *err)
{
	return set_path("--recordings", cfg->recordings, path, err);
}

int dg_config_set_state_dir(struct dg_config *cfg, const char *path, struct dg_err *err)
{
	return set_path("--state-dir", cfg->state_dir, path, err);
}

int dg_config_base_url(const struct dg_config *cfg, bool websocket, char *out, size_t len)
{
	int n;
	if (cfg->public_url[0]) {
		bool tls = strncmp(cfg->public_url, "https://", 8) == 0;
		const char *rest = cfg->public_url + (tls ? 8 : 7);
		const char *scheme = websocket ? (tls ? "wss" : "ws") : (tls ? "https" : "http");
		n = snprintf(out, len, "%s://%s", scheme, rest);
	} else {
		bool tls = cfg->tls_cert[0] != '\0';
		const char *scheme = websocket ? (tls ? "wss" : "ws") : (tls ? "https" : "http");
		n = snprintf(out, len, "%s://%s", scheme, cfg->listen);
	}
	if (n < 0 || (size_t)n >= len) {
		if (len)
			out[0] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

const char *dg_config_policy_path(const struct dg_config *cfg, const char *name)
{
	if (!name || strcmp(name, "default") == 0)
		return cfg->policy;
	for (size_t i = 0; i < cfg->n_policies; i++)
		if (strcmp(cfg->policies[i].name, name) == 0)
			return cfg->policies[i].path;
	return NULL;
}
