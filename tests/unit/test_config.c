/* Gateway configuration: defaults, the example file, bounds of every limit,
 * the strictness that keeps a typo from weakening the gateway, listen and
 * URL forms, TLS files, tokens (never shown in messages), and file handling.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "dg_test.h"
#include "gateway/gateway.h"

#define ORIGIN "/test/config.json"
#define PREFIX "config " ORIGIN ": "

/* A token of exactly DG_TOKEN_MIN characters and one of one more. */
#define TOK24 "abcdefghijklmnopqrstuvwx"
#define TOK25 "abcdefghijklmnopqrstuvwxy"

static struct dg_config cfg;
static struct dg_err err;

static int parse_text(const char *text, size_t len)
{
	memset(&err, 0, sizeof(err));
	dg_config_free(&cfg);
	dg_config_default(&cfg);
	return dg_config_parse(text, len, ORIGIN, &cfg, &err);
}

static int parsef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int parsef(const char *fmt, ...)
{
	char *text = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	cr_assert(n >= 0);
	int rc = parse_text(text, (size_t)n);
	free(text);
	return rc;
}

/* {"tokens": [<entry>]} */
static int parse_token(const char *entry)
{
	return parsef("{\"tokens\": [%s]}", entry);
}

#define assert_msg_has(s)                                                                  \
	cr_assert(strstr(err.msg, (s)) != NULL, "message \"%s\" lacks \"%s\"", err.msg, (s))
#define assert_msg_lacks(s)                                                                \
	cr_assert(strstr(err.msg, (s)) == NULL, "message \"%s\" shows \"%s\"", err.msg, (s))

#define assert_refused(rc)                                                                 \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, -EINVAL, "rc %d, message \"%s\"", rc_, err.msg);        \
		cr_assert(strncmp(err.msg, PREFIX, strlen(PREFIX)) == 0,                   \
			  "message \"%s\" does not start with the origin", err.msg);      \
	} while (0)

#define assert_ok(rc)                                                                      \
	do {                                                                               \
		int rc_ = (rc);                                                            \
		cr_assert_eq(rc_, 0, "rc %d, message \"%s\"", rc_, err.msg);              \
	} while (0)

static void fini(void)
{
	dg_config_free(&cfg);
}
TestSuite(config, .fini = fini);

static void assert_default_limits(const struct dg_gw_limits *l)
{
	cr_assert_eq(l->max_sessions, DG_GW_MAX_SESSIONS_DEFAULT);
	cr_assert_eq(l->max_message_bytes, DG_GW_MAX_MESSAGE_BYTES_DEFAULT);
	cr_assert_eq(l->max_pending_actions, DG_GW_MAX_PENDING_ACTIONS_DEFAULT);
	cr_assert_eq(l->idle_seconds, DG_GW_IDLE_SECONDS_DEFAULT);
	cr_assert_eq(l->approval_seconds, DG_GW_APPROVAL_SECONDS_DEFAULT);
	cr_assert_eq(l->takeover_seconds, DG_GW_TAKEOVER_SECONDS_DEFAULT);
	cr_assert_eq(l->takeover_idle_seconds, DG_GW_TAKEOVER_IDLE_SECONDS_DEFAULT);
	cr_assert_eq(l->session_seconds, DG_GW_SESSION_SECONDS_DEFAULT);
	cr_assert_eq(l->disconnect_grace_seconds, DG_GW_DISCONNECT_GRACE_SECONDS_DEFAULT);
	cr_assert_eq(l->max_observers, DG_GW_MAX_OBSERVERS_DEFAULT);
	cr_assert_eq(l->handshake_seconds, DG_GW_HANDSHAKE_SECONDS_DEFAULT);
	cr_assert_eq(l->actions_per_second, DG_GW_ACTIONS_PER_SECOND_DEFAULT);
}

static void assert_defaults(const struct dg_config *c)
{
	cr_assert_str_eq(c->listen, "127.0.0.1:8470");
	cr_assert_str_eq(c->listen_addr, "127.0.0.1");
	cr_assert_eq(c->listen_family, AF_INET);
	cr_assert_eq(c->listen_port, 8470);
	cr_assert_str_eq(c->public_url, "");
	cr_assert_str_eq(c->tls_cert, "");
	cr_assert_str_eq(c->tls_key, "");
	cr_assert_str_eq(c->policy, "");
	cr_assert_str_eq(c->recordings, "/var/lib/deskgate/recordings");
	cr_assert_str_eq(c->state_dir, "/var/lib/deskgate");
	cr_assert_null(c->tokens);
	cr_assert_eq(c->n_tokens, 0);
	cr_assert_null(c->policies);
	cr_assert_eq(c->n_policies, 0);
	assert_default_limits(&c->limits);
}

Test(config, defaults)
{
	struct dg_config *c = malloc(sizeof(*c));
	memset(c, 0xa5, sizeof(*c));
	dg_config_default(c);
	assert_defaults(c);
	char url[128];
	cr_assert_eq(dg_config_base_url(c, false, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "http://127.0.0.1:8470");
	cr_assert_eq(dg_config_base_url(c, true, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "ws://127.0.0.1:8470");
	cr_assert_eq(dg_config_base_url(c, true, url, 10), -ENAMETOOLONG);
	cr_assert_str_eq(url, "");
	cr_assert_str_eq(dg_config_policy_path(c, "default"), "");
	cr_assert_str_eq(dg_config_policy_path(c, NULL), "");
	cr_assert_null(dg_config_policy_path(c, "strict"));
	dg_config_free(c);
	dg_config_free(c); /* twice is harmless */
	free(c);
}

Test(config, empty_object_gives_defaults)
{
	assert_ok(parsef("{}"));
	assert_defaults(&cfg);
	assert_ok(parsef("{\"limits\": {}, \"tokens\": [], \"policies\": {}}"));
	assert_defaults(&cfg);
}

Test(config, example_file_loads)
{
	const char *path = DG_SOURCE_DIR "/tests/data/config-example.json";
	memset(&err, 0, sizeof(err));
	assert_ok(dg_config_load(path, &cfg, &err));
	cr_assert_str_eq(cfg.listen, "127.0.0.1:8470");
	cr_assert_str_eq(cfg.public_url, "https://deskgate.example.com");
	cr_assert_eq(cfg.n_tokens, 3);
	cr_assert_str_eq(cfg.tokens[0].name, "ci-agent");
	cr_assert_eq(cfg.tokens[0].role, DG_ROLE_AGENT);
	cr_assert_str_eq(cfg.tokens[1].name, "alice");
	cr_assert_eq(cfg.tokens[1].role, DG_ROLE_VIEWER);
	cr_assert_str_eq(cfg.tokens[2].name, "ops");
	cr_assert_eq(cfg.tokens[2].role, DG_ROLE_ADMIN);
	cr_assert_str_eq(cfg.policy, "/etc/deskgate/policy.json");
	cr_assert_eq(cfg.n_policies, 1);
	cr_assert_str_eq(dg_config_policy_path(&cfg, "strict"), "/etc/deskgate/strict.json");
	cr_assert_str_eq(dg_config_policy_path(&cfg, "default"), "/etc/deskgate/policy.json");
	cr_assert_null(dg_config_policy_path(&cfg, "lax"));
	cr_assert_str_eq(cfg.recordings, "/var/lib/deskgate/recordings");
	cr_assert_str_eq(cfg.state_dir, "/var/lib/deskgate");
	/* The example spells out every limit at its default. */
	assert_default_limits(&cfg.limits);
	char url[128];
	cr_assert_eq(dg_config_base_url(&cfg, true, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "wss://deskgate.example.com");
}

/* ---- limits ---------------------------------------------------------------- */

struct bound {
	const char *key;
	size_t offset;
	long long def, min, max;
};
#define B(name, NAME)                                                                        \
	{ #name, offsetof(struct dg_gw_limits, name), DG_GW_##NAME##_DEFAULT, DG_GW_##NAME##_MIN, \
	  DG_GW_##NAME##_MAX }
static const struct bound bounds[] = {
	B(max_sessions, MAX_SESSIONS),
	B(max_message_bytes, MAX_MESSAGE_BYTES),
	B(max_pending_actions, MAX_PENDING_ACTIONS),
	B(idle_seconds, IDLE_SECONDS),
	B(approval_seconds, APPROVAL_SECONDS),
	B(takeover_seconds, TAKEOVER_SECONDS),
	B(takeover_idle_seconds, TAKEOVER_IDLE_SECONDS),
	B(recording_fsync_ms, RECORDING_FSYNC_MS),
	B(retention_days, RETENTION_DAYS),
	B(retention_mb, RETENTION_MB),
	B(warm_xterm, WARM_XTERM),
	B(warm_browser, WARM_BROWSER),
	B(session_seconds, SESSION_SECONDS),
	B(disconnect_grace_seconds, DISCONNECT_GRACE_SECONDS),
	B(max_observers, MAX_OBSERVERS),
	B(handshake_seconds, HANDSHAKE_SECONDS),
	B(actions_per_second, ACTIONS_PER_SECOND),
};
#define N_BOUNDS (sizeof(bounds) / sizeof(bounds[0]))
_Static_assert(sizeof(struct dg_gw_limits) == N_BOUNDS * sizeof(uint32_t),
	       "the test covers every limit");

static uint32_t limit_at(const struct dg_config *c, const struct bound *b)
{
	uint32_t u;
	memcpy(&u, (const char *)&c->limits + b->offset, sizeof(u));
	return u;
}

Test(config, limit_defaults_within_bounds)
{
	for (size_t i = 0; i < N_BOUNDS; i++) {
		cr_assert(bounds[i].min <= bounds[i].def && bounds[i].def <= bounds[i].max, "%s",
			  bounds[i].key);
		cr_assert(bounds[i].max <= UINT32_MAX, "%s", bounds[i].key);
	}
}

Test(config, limits_at_bounds_accepted)
{
	for (size_t i = 0; i < N_BOUNDS; i++) {
		const struct bound *b = &bounds[i];
		long long vals[] = { b->min, b->max };
		for (size_t j = 0; j < 2; j++) {
			assert_ok(parsef("{\"limits\": {\"%s\": %lld}}", b->key, vals[j]));
			cr_assert_eq(limit_at(&cfg, b), (uint32_t)vals[j], "%s", b->key);
			/* The others keep their defaults. */
			for (size_t k = 0; k < N_BOUNDS; k++)
				if (k != i)
					cr_assert_eq(limit_at(&cfg, &bounds[k]), (uint32_t)bounds[k].def);
		}
	}
}

Test(config, limits_outside_bounds_refused)
{
	for (size_t i = 0; i < N_BOUNDS; i++) {
		const struct bound *b = &bounds[i];
		long long vals[] = { b->min - 1, b->max + 1, -1, 4294967296LL };
		for (size_t j = 0; j < 4; j++) {
			assert_refused(parsef("{\"limits\": {\"%s\": %lld}}", b->key, vals[j]));
			char want[160];
			snprintf(want, sizeof(want), PREFIX "limits.%s: %lld is out of range [%lld, %lld]",
				 b->key, vals[j], b->min, b->max);
			cr_assert_str_eq(err.msg, want);
			assert_defaults(&cfg); /* a refused file is not partly applied */
		}
	}
}

Test(config, exact_message_format)
{
	assert_refused(parsef("{\"limits\": {\"max_sessions\": 0}}"));
	cr_assert_str_eq(err.msg, PREFIX "limits.max_sessions: 0 is out of range [1, 1000]");
}

Test(config, limits_wrong_types_refused)
{
	const char *bad[] = { "\"20\"", "20.0", "2e1", "true", "null", "[20]", "{}" };
	const char *shown[] = { "\"20\"", "20.0", "20.0", "true", "null", "an array", "an object" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"limits\": {\"max_sessions\": %s}}", bad[i]));
		assert_msg_has("limits.max_sessions: ");
		assert_msg_has(shown[i]);
		assert_msg_has("is not an integer; allowed: an integer in [1, 1000]");
	}
	assert_refused(parsef("{\"limits\": [1]}"));
	assert_msg_has("limits: an array is not an object");
}

/* ---- strictness --------------------------------------------------------------- */

Test(config, unknown_keys_refused)
{
	assert_refused(parsef("{\"lisen\": \"127.0.0.1:1\"}"));
	cr_assert_str_eq(err.msg, PREFIX "unknown key \"lisen\" at top level");
	assert_refused(parsef("{\"limits\": {\"max_session\": 3}}"));
	cr_assert_str_eq(err.msg, PREFIX "unknown key \"limits.max_session\"");
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token\": \"" TOK24
				   "\", \"roles\": \"admin\"}"));
	cr_assert_str_eq(err.msg, PREFIX "unknown key \"tokens[0].roles\"");
	assert_refused(parsef("{\"tls\": {\"cert\": \"/a\", \"key\": \"/b\", \"ca\": \"/c\"}}"));
	assert_msg_has("unknown key \"tls.ca\"");
	/* Keys are case-sensitive. */
	assert_refused(parsef("{\"Listen\": \"127.0.0.1:1\"}"));
	assert_msg_has("unknown key \"Listen\"");
}

Test(config, unknown_key_is_escaped)
{
	assert_refused(parsef("{\"a\\u001b[2J\\\"\\u00e9\": 1}"));
	cr_assert_null(strchr(err.msg, '\x1b'));
	assert_msg_has("unknown key \"a\\x1b[2J\\\"\\xc3\\xa9\" at top level");
	char *longkey = malloc(5001);
	memset(longkey, 'k', 5000);
	longkey[5000] = '\0';
	assert_refused(parsef("{\"%s\": 1}", longkey));
	assert_msg_has("kkk...\" at top level");
	cr_assert_lt(strlen(err.msg), 400);
	free(longkey);
}

Test(config, duplicate_json_keys_refused)
{
	assert_refused(parsef("{\"listen\": \"127.0.0.1:1\", \"listen\": \"127.0.0.1:2\"}"));
	assert_msg_has("duplicate");
	assert_refused(parsef("{\"limits\": {\"max_sessions\": 1, \"max_sessions\": 2}}"));
	assert_msg_has("duplicate");
	assert_refused(parse_token("{\"name\": \"a\", \"name\": \"b\", \"role\": \"agent\", "
				   "\"token\": \"" TOK24 "\"}"));
	assert_msg_has("duplicate");
}

Test(config, invalid_json_and_trailing_data_refused)
{
	const char *bad[] = { "{\"listen\": }", "{", "{} x", "{}{}", "[]", "1", "\"x\"", " \n",
			      "{\"limits\": {\"max_sessions\": 010}}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("%s", bad[i]));
		cr_assert(strstr(err.msg, "invalid JSON") || strstr(err.msg, "the top level is"),
			  "%s: %s", bad[i], err.msg);
	}
	assert_refused(parsef("[{}]"));
	assert_msg_has("the top level is an array; it must be an object");
	assert_refused(parse_text("", 0));
	assert_msg_has("empty");
	const char nul[] = "{}\0{\"listen\": \"0.0.0.0:1\"}";
	assert_refused(parse_text(nul, sizeof(nul) - 1));
}

Test(config, invalid_json_never_quotes_a_token)
{
	/* A raw control byte inside a token makes the file invalid JSON;
	 * jansson's excerpt of the text near the error would show the token. */
	assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", "
			      "\"token\": \"SECRETSECRET\x01SECRETSECRETSECRET\"}]}"));
	assert_msg_has("invalid JSON at line 1");
	assert_msg_lacks("SECRET");
}

/* ---- tokens ------------------------------------------------------------------------ */

static void sha256_hex(const char *s, char out[65])
{
	unsigned char h[32];
	SHA256((const unsigned char *)s, strlen(s), h);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

Test(config, tokens_hashed_and_roles_parsed)
{
	char hex[65];
	sha256_hex("viewer-token-0123456789abcdef", hex);
	assert_ok(parsef("{\"tokens\": [{\"name\": \"ci-agent\", \"role\": \"agent\", \"token\": "
			 "\"" TOK24 "\"}, {\"name\": \"alice.B_1-x\", \"role\": \"viewer\", "
			 "\"token_sha256\": \"%s\"}, {\"name\": \"root\", \"role\": \"admin\", "
			 "\"token\": \"%s\"}]}",
			 hex, "admin-token-!#$%&'()*+,-./:;<=>?@[\\\\]^_`{|}~"));
	cr_assert_eq(cfg.n_tokens, 3);
	unsigned char h[32];
	SHA256((const unsigned char *)TOK24, 24, h);
	cr_assert_str_eq(cfg.tokens[0].name, "ci-agent");
	cr_assert_eq(cfg.tokens[0].role, DG_ROLE_AGENT);
	cr_assert_arr_eq(cfg.tokens[0].sha256, h, 32);
	SHA256((const unsigned char *)"viewer-token-0123456789abcdef", 29, h);
	cr_assert_eq(cfg.tokens[1].role, DG_ROLE_VIEWER);
	cr_assert_arr_eq(cfg.tokens[1].sha256, h, 32);
	const char *adm = "admin-token-!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
	SHA256((const unsigned char *)adm, strlen(adm), h);
	cr_assert_eq(cfg.tokens[2].role, DG_ROLE_ADMIN);
	cr_assert_arr_eq(cfg.tokens[2].sha256, h, 32);

	/* Upper-case hex is the same hash. */
	for (char *p = hex; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	assert_ok(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"viewer\", "
			 "\"token_sha256\": \"%s\"}]}",
			 hex));
	SHA256((const unsigned char *)"viewer-token-0123456789abcdef", 29, h);
	cr_assert_arr_eq(cfg.tokens[0].sha256, h, 32);
}

Test(config, duplicate_token_names_refused)
{
	assert_refused(parsef("{\"tokens\": [{\"name\": \"ci\", \"role\": \"agent\", \"token\": "
			      "\"" TOK24 "\"}, {\"name\": \"ci\", \"role\": \"viewer\", \"token\": "
			      "\"" TOK25 "\"}]}"));
	cr_assert_str_eq(err.msg, PREFIX "tokens[1].name: \"ci\" is already the name of tokens[0]");
	assert_defaults(&cfg);
}

Test(config, same_token_under_two_names_refused)
{
	char hex[65];
	sha256_hex(TOK24, hex);
	assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", \"token\": "
			      "\"" TOK24 "\"}, {\"name\": \"b\", \"role\": \"admin\", "
			      "\"token_sha256\": \"%s\"}]}",
			      hex));
	assert_msg_has("tokens[1]: the same token as tokens[0] (\"a\")");
	assert_msg_lacks(TOK24);
	assert_msg_lacks(hex);
}

Test(config, bad_roles_refused)
{
	const char *bad[] = { "\"Agent\"", "\"root\"", "\"\"", "\"agent \"", "1", "null",
			      "[\"agent\"]" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": %s, \"token\": "
				      "\"" TOK24 "\"}]}",
				      bad[i]));
		assert_msg_has("tokens[0].role: ");
		assert_msg_has("is not a role; allowed: \"agent\", \"viewer\", \"operator\", \"admin\"");
	}
	assert_refused(parse_token("{\"name\": \"a\", \"token\": \"" TOK24 "\"}"));
	assert_msg_has("tokens[0]: missing required key \"role\"");
}

Test(config, bad_names_refused)
{
	char n64[65], n65[66];
	memset(n64, 'n', 64);
	n64[64] = '\0';
	memset(n65, 'n', 65);
	n65[65] = '\0';
	assert_ok(parsef("{\"tokens\": [{\"name\": \"%s\", \"role\": \"agent\", \"token\": "
			 "\"" TOK24 "\"}]}",
			 n64));
	cr_assert_str_eq(cfg.tokens[0].name, n64);
	const char *bad[] = { "\"\"", "\"a b\"", "\"a/b\"", "\"\\u00e9\"", "\"a\\nb\"", "1", "null" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"tokens\": [{\"name\": %s, \"role\": \"agent\", \"token\": "
				      "\"" TOK24 "\"}]}",
				      bad[i]));
		assert_msg_has("tokens[0].name: ");
		assert_msg_has("is not a name; allowed: 1 to 64 of [A-Za-z0-9._-]");
	}
	assert_refused(parsef("{\"tokens\": [{\"name\": \"%s\", \"role\": \"agent\", \"token\": "
			      "\"" TOK24 "\"}]}",
			      n65));
	assert_msg_has("is not a name");
	assert_refused(parse_token("{\"role\": \"agent\", \"token\": \"" TOK24 "\"}"));
	assert_msg_has("tokens[0]: missing required key \"name\"");
}

Test(config, token_length_bounds)
{
	assert_ok(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token\": \"" TOK24 "\"}"));
	char t256[257], t257[258];
	memset(t256, 'T', 256);
	t256[256] = '\0';
	memset(t257, 'T', 257);
	t257[257] = '\0';
	assert_ok(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", \"token\": \"%s\"}]}",
			 t256));
	assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", \"token\": "
			      "\"%s\"}]}",
			      t257));
	cr_assert_str_eq(err.msg, PREFIX "tokens[0].token: 257 characters is outside [24, 256]");

	/* One short: refused, and the message never shows the secret. */
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token\": "
				   "\"SHORTSECRETabcdefghijkl\"}"));
	cr_assert_str_eq(err.msg, PREFIX "tokens[0].token: 23 characters is outside [24, 256]");
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token\": \"\"}"));
	assert_msg_has("0 characters");
}

Test(config, token_characters)
{
	const char *bad[] = { "SECRETSECRET SECRETSECRETSECRET", "SECRETSECRET\\tSECRETSECRETSECRET",
			      "SECRETSECRET\\u00e9SECRETSECRETSECRET",
			      "SECRETSECRET\\u007fSECRETSECRETSECRET" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", "
				      "\"token\": \"%s\"}]}",
				      bad[i]));
		assert_msg_has("tokens[0].token: only printable ASCII without spaces is allowed");
		assert_msg_lacks("SECRET");
	}
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token\": 123456}"));
	assert_msg_has("tokens[0].token: a number is not a string");
}

Test(config, token_and_hash_both_or_neither_refused)
{
	char hex[65];
	sha256_hex(TOK24, hex);
	assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", \"token\": "
			      "\"" TOK24 "\", \"token_sha256\": \"%s\"}]}",
			      hex));
	cr_assert_str_eq(err.msg,
			 PREFIX "tokens[0]: both \"token\" and \"token_sha256\" are given; give one");
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\"}"));
	cr_assert_str_eq(err.msg, PREFIX "tokens[0]: missing \"token\" or \"token_sha256\"");
}

Test(config, bad_hex_refused)
{
	char hex[65];
	sha256_hex(TOK24, hex);
	char bad[6][80];
	snprintf(bad[0], sizeof(bad[0]), "\"%.63s\"", hex);    /* 63 digits */
	snprintf(bad[1], sizeof(bad[1]), "\"%s0\"", hex);      /* 65 */
	snprintf(bad[2], sizeof(bad[2]), "\"g%.63s\"", hex);   /* not hex */
	snprintf(bad[3], sizeof(bad[3]), "\" %.63s\"", hex);   /* a space */
	snprintf(bad[4], sizeof(bad[4]), "\"0x%.62s\"", hex);  /* a prefix */
	snprintf(bad[5], sizeof(bad[5]), "\"\"");
	for (size_t i = 0; i < 6; i++) {
		assert_refused(parsef("{\"tokens\": [{\"name\": \"a\", \"role\": \"agent\", "
				      "\"token_sha256\": %s}]}",
				      bad[i]));
		assert_msg_has("tokens[0].token_sha256: not 64 hexadecimal digits");
		assert_msg_lacks(hex + 8); /* never echoed: it may be a pasted secret */
	}
	assert_refused(parse_token("{\"name\": \"a\", \"role\": \"agent\", \"token_sha256\": 5}"));
	assert_msg_has("not 64 hexadecimal digits");
}

Test(config, token_entries_must_be_objects_and_value_hidden)
{
	assert_refused(parsef("{\"tokens\": [\"SECRETSECRETSECRETSECRET\"]}"));
	cr_assert_str_eq(err.msg, PREFIX "tokens[0]: a string is not an object ({\"name\", "
					 "\"role\", \"token\" or \"token_sha256\"})");
	assert_refused(parsef("{\"tokens\": \"SECRETSECRETSECRETSECRET\"}"));
	cr_assert_str_eq(err.msg, PREFIX "tokens: a string is not an array");
	assert_refused(parsef("{\"tokens\": {\"name\": \"a\"}}"));
	assert_msg_has("tokens: an object is not an array");
}

Test(config, too_many_tokens_refused)
{
	size_t cap = 128 * (DG_TOKENS_MAX + 2);
	char *text = malloc(cap);
	for (int count = DG_TOKENS_MAX; count <= DG_TOKENS_MAX + 1; count++) {
		size_t o = (size_t)snprintf(text, cap, "{\"tokens\": [");
		for (int i = 0; i < count; i++)
			o += (size_t)snprintf(text + o, cap - o,
					      "%s{\"name\":\"t%d\",\"role\":\"agent\",\"token\":"
					      "\"token-number-%020d\"}",
					      i ? "," : "", i, i);
		o += (size_t)snprintf(text + o, cap - o, "]}");
		cr_assert_lt(o, cap);
		int rc = parse_text(text, o);
		if (count == DG_TOKENS_MAX) {
			assert_ok(rc);
			cr_assert_eq(cfg.n_tokens, DG_TOKENS_MAX);
		} else {
			assert_refused(rc);
			cr_assert_str_eq(err.msg, PREFIX "tokens: 257 entries is more than the "
							 "limit of 256");
		}
	}
	free(text);
}

/* ---- listen ------------------------------------------------------------------------- */

Test(config, listen_forms)
{
	struct {
		const char *in, *canon, *addr;
		int family;
		unsigned port;
	} good[] = {
		{ "127.0.0.1:8470", "127.0.0.1:8470", "127.0.0.1", AF_INET, 8470 },
		{ "[::1]:8470", "[::1]:8470", "::1", AF_INET6, 8470 },
		{ "0.0.0.0:1", "0.0.0.0:1", "0.0.0.0", AF_INET, 1 },
		{ "255.255.255.255:65535", "255.255.255.255:65535", "255.255.255.255", AF_INET,
		  65535 },
		{ "[::]:80", "[::]:80", "::", AF_INET6, 80 },
		{ "[0:0:0:0:0:0:0:1]:80", "[::1]:80", "::1", AF_INET6, 80 },
		{ "[FE80::A]:443", "[fe80::a]:443", "fe80::a", AF_INET6, 443 },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_ok(parsef("{\"listen\": \"%s\"}", good[i].in));
		cr_assert_str_eq(cfg.listen, good[i].canon);
		cr_assert_str_eq(cfg.listen_addr, good[i].addr);
		cr_assert_eq(cfg.listen_family, good[i].family);
		cr_assert_eq(cfg.listen_port, good[i].port);

		struct dg_config c;
		dg_config_default(&c);
		memset(&err, 0, sizeof(err));
		cr_assert_eq(dg_config_set_listen(&c, good[i].in, &err), 0, "%s", err.msg);
		cr_assert_str_eq(c.listen, good[i].canon);
	}

	const char *bad[] = { "localhost", ":80", "1.2.3.4:0", "1.2.3.4:65536", "1.2.3.4:08470",
			      "localhost:8470", "1.2.3.4", "1.2.3.4:", "1.2.3.4:+80", "1.2.3.4:-1",
			      "1.2.3.4:80 ", " 1.2.3.4:80", "1.2.3:80", "01.2.3.4:80", "1.2.3.256:80",
			      "::1:80", "[::1]", "[::1]80", "[::1]:", "[fe80::1%eth0]:80", "[1.2.3.4]:80",
			      "1.2.3.4:123456", "1.2.3.4:0x50", "[::1]:80:80", "", "[]:80",
			      "1.2.3.4:80\\n" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"listen\": \"%s\"}", bad[i]));
		assert_msg_has("listen: \"");
		cr_assert_str_eq(cfg.listen, "127.0.0.1:8470");

		struct dg_config c;
		dg_config_default(&c);
		memset(&err, 0, sizeof(err));
		cr_assert_eq(dg_config_set_listen(&c, bad[i], &err), -EINVAL, "%s accepted", bad[i]);
		assert_msg_has("--listen: \"");
		cr_assert_str_eq(c.listen, "127.0.0.1:8470", "a refused --listen changed the config");
	}

	assert_refused(parsef("{\"listen\": \"1.2.3.4:0\"}"));
	cr_assert_str_eq(err.msg, PREFIX "listen: \"1.2.3.4:0\": port 0 is out of range [1, 65535]");
	assert_refused(parsef("{\"listen\": \"localhost:8470\"}"));
	assert_msg_has("host names are not accepted");
	assert_refused(parsef("{\"listen\": \"::1:8470\"}"));
	assert_msg_has("must be in brackets");
	assert_refused(parsef("{\"listen\": 8470}"));
	assert_msg_has("listen: 8470 is not a string");

	char *longv = malloc(200);
	memset(longv, '1', 199);
	longv[199] = '\0';
	assert_refused(parsef("{\"listen\": \"%s\"}", longv));
	assert_msg_has("longer than");
	free(longv);

	struct dg_config c;
	dg_config_default(&c);
	cr_assert_eq(dg_config_set_listen(&c, NULL, &err), -EINVAL);
	cr_assert_eq(dg_config_set_listen(&c, "[::1]:9", &err), 0);
	char url[64];
	cr_assert_eq(dg_config_base_url(&c, false, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "http://[::1]:9");
}

/* ---- public_url ------------------------------------------------------------------------- */

Test(config, public_url_forms)
{
	struct {
		const char *in, *stored, *ws;
	} good[] = {
		{ "https://deskgate.example.com", "https://deskgate.example.com",
		  "wss://deskgate.example.com" },
		{ "https://deskgate.example.com/", "https://deskgate.example.com",
		  "wss://deskgate.example.com" },
		{ "http://10.0.0.5:8080/deskgate/", "http://10.0.0.5:8080/deskgate",
		  "ws://10.0.0.5:8080/deskgate" },
		{ "http://[::1]:8470", "http://[::1]:8470", "ws://[::1]:8470" },
		{ "https://a-b.example/x%2Fy/z", "https://a-b.example/x%2Fy/z",
		  "wss://a-b.example/x%2Fy/z" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_ok(parsef("{\"public_url\": \"%s\"}", good[i].in));
		cr_assert_str_eq(cfg.public_url, good[i].stored);
		char url[128];
		cr_assert_eq(dg_config_base_url(&cfg, false, url, sizeof(url)), 0);
		cr_assert_str_eq(url, good[i].stored);
		cr_assert_eq(dg_config_base_url(&cfg, true, url, sizeof(url)), 0);
		cr_assert_str_eq(url, good[i].ws);
	}
	const char *bad[] = { "deskgate.example.com", "ftp://x", "HTTPS://x", "https://",
			      "https:///x", "https://user@x", "https://x?a=1", "https://x/#f",
			      "https://x:0", "https://x:65536", "https://x:", "https://x y",
			      "https://x/a b", "https://x//", "https://[::1", "https://[zz]:80",
			      "https://x/%zz", "https://x/\\u00e9", "ws://x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"public_url\": \"%s\"}", bad[i]));
		assert_msg_has("public_url: ");
	}
	assert_refused(parsef("{\"public_url\": null}"));
	assert_msg_has("public_url: null is not a string");
}

/* ---- tls ----------------------------------------------------------------------------------- */

/* A fresh temp dir with cert.pem and key.pem (contents need not be real
 * PEM: the loader checks presence and readability; the TLS library parses). */
static char *tls_dir(void)
{
	char *cert = dg_test_write_tmp("cert.pem", "-----BEGIN CERTIFICATE-----\n");
	char *dir = strdup(cert);
	char *slash = strrchr(dir, '/');
	*slash = '\0';
	char key[512];
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	FILE *f = fopen(key, "w");
	cr_assert_not_null(f);
	fputs("-----BEGIN PRIVATE KEY-----\n", f);
	fclose(f);
	free(cert);
	return dir;
}

static void rm_tls_dir(char *dir)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/cert.pem", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/key.pem", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/sub", dir);
	rmdir(p);
	rmdir(dir);
	free(dir);
}

Test(config, tls_both_or_neither)
{
	char *dir = tls_dir();
	assert_ok(parsef("{\"tls\": {\"cert\": \"%s/cert.pem\", \"key\": \"%s/key.pem\"}}", dir,
			 dir));
	char want[512];
	snprintf(want, sizeof(want), "%s/cert.pem", dir);
	cr_assert_str_eq(cfg.tls_cert, want);
	snprintf(want, sizeof(want), "%s/key.pem", dir);
	cr_assert_str_eq(cfg.tls_key, want);
	char url[128];
	cr_assert_eq(dg_config_base_url(&cfg, false, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "https://127.0.0.1:8470");
	cr_assert_eq(dg_config_base_url(&cfg, true, url, sizeof(url)), 0);
	cr_assert_str_eq(url, "wss://127.0.0.1:8470");

	assert_refused(parsef("{\"tls\": {\"cert\": \"%s/cert.pem\"}}", dir));
	cr_assert_str_eq(err.msg,
			 PREFIX "tls: \"cert\" is given without \"key\"; give both or neither");
	assert_refused(parsef("{\"tls\": {\"key\": \"%s/key.pem\"}}", dir));
	cr_assert_str_eq(err.msg,
			 PREFIX "tls: \"key\" is given without \"cert\"; give both or neither");
	assert_refused(parsef("{\"tls\": {}}"));
	assert_msg_has("tls: an empty object");
	assert_refused(parsef("{\"tls\": \"%s/cert.pem\"}", dir));
	assert_msg_has("is not an object");
	assert_refused(parsef("{\"tls\": {\"cert\": \"cert.pem\", \"key\": \"key.pem\"}}"));
	assert_msg_has("tls.cert: \"cert.pem\" is not an absolute path");
	rm_tls_dir(dir);
}

/* Drops the capabilities that let root read any file, so the permission
 * bits of a test file matter even when the tests run as root. Criterion
 * runs each test in its own process, so the drop ends with the test. */
static void drop_dac_override(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	cr_assert_eq(syscall(SYS_capget, &hdr, d), 0);
	d[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
	cr_assert_eq(syscall(SYS_capset, &hdr, d), 0);
}

Test(config, tls_files_must_be_readable_regular_files)
{
	char *dir = tls_dir();
	assert_refused(parsef("{\"tls\": {\"cert\": \"%s/missing.pem\", \"key\": \"%s/key.pem\"}}",
			      dir, dir));
	assert_msg_has("tls.cert: \"");
	assert_msg_has("missing.pem\": No such file or directory");

	assert_refused(parsef("{\"tls\": {\"cert\": \"%s/cert.pem\", \"key\": \"%s\"}}", dir, dir));
	assert_msg_has("tls.key: \"");
	assert_msg_has("is not a regular file");

	char key[512];
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	drop_dac_override();
	cr_assert_eq(chmod(key, 0), 0);
	assert_refused(parsef("{\"tls\": {\"cert\": \"%s/cert.pem\", \"key\": \"%s\"}}", dir, key));
	assert_msg_has("tls.key: \"");
	assert_msg_has("key.pem\": Permission denied");
	cr_assert_str_eq(cfg.tls_cert, "", "a refused file was partly applied");
	rm_tls_dir(dir);
}

/* ---- instance ------------------------------------------------------------------------------ */

Test(config, instance)
{
	assert_ok(parsef("{}"));
	cr_assert_str_eq(cfg.instance, "", "not set: the environment or the host name decides");
	assert_ok(parsef("{\"instance\": \"gw-1\"}"));
	cr_assert_str_eq(cfg.instance, "gw-1");
	char name[DG_CONFIG_INSTANCE_MAX + 2];
	memset(name, 'a', sizeof(name));
	name[DG_CONFIG_INSTANCE_MAX] = '\0';
	assert_ok(parsef("{\"instance\": \"%s\"}", name));
	cr_assert_str_eq(cfg.instance, name);
	name[DG_CONFIG_INSTANCE_MAX] = 'a';
	name[DG_CONFIG_INSTANCE_MAX + 1] = '\0';
	assert_refused(parsef("{\"instance\": \"%s\"}", name));
	assert_msg_has("instance: ");
	assert_msg_has("is not a valid name");
	static const char *const bad[] = {"", "GW", "-a", "jail-1", "a_b", "a\\u001bb"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"instance\": \"%s\"}", bad[i]));
		assert_msg_has("is not a valid name");
		cr_assert_null(strchr(err.msg, '\x1b'));
	}
	assert_refused(parsef("{\"instance\": 7}"));
	assert_msg_has("is not a string");
}

/* ---- capacity ------------------------------------------------------------------------------ */

Test(config, capacity)
{
	assert_ok(parsef("{}"));
	cr_assert_str_eq(cfg.agent_check, "", "off by default");
	cr_assert(!cfg.drain);
	assert_ok(parsef("{\"capacity\": {\"agent_check\": \"127.0.0.1:8471\", \"drain\": true}}"));
	cr_assert_str_eq(cfg.agent_check, "127.0.0.1:8471");
	cr_assert_str_eq(cfg.agent_check_addr, "127.0.0.1");
	cr_assert_eq(cfg.agent_check_port, 8471);
	cr_assert_eq(cfg.agent_check_family, AF_INET);
	cr_assert(cfg.drain);
	assert_ok(parsef("{\"capacity\": {\"agent_check\": \"[::1]:1\"}}"));
	cr_assert_str_eq(cfg.agent_check, "[::1]:1");
	cr_assert_eq(cfg.agent_check_family, AF_INET6);
	assert_ok(parsef("{\"capacity\": {}}"));
	static const char *const bad[] = {"\"localhost:8471\"", "\"127.0.0.1:0\"",
					  "\"127.0.0.1:65536\"", "\"127.0.0.1\"", "8471"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"capacity\": {\"agent_check\": %s}}", bad[i]));
		assert_msg_has("capacity.agent_check");
	}
	assert_refused(parsef("{\"capacity\": {\"drain\": \"yes\"}}"));
	assert_msg_has("capacity.drain");
	assert_refused(parsef("{\"capacity\": {\"drian\": true}}"));
	assert_msg_has("unknown key \"capacity.drian\"");
	assert_refused(parsef("{\"capacity\": []}"));
	assert_msg_has("capacity");
}

/* ---- paths and policies ------------------------------------------------------------------- */

Test(config, paths)
{
	assert_ok(parsef("{\"recordings\": \"/srv/rec\", \"state_dir\": \"/srv/state\", "
			 "\"policy\": \"/etc/p.json\"}"));
	cr_assert_str_eq(cfg.recordings, "/srv/rec");
	cr_assert_str_eq(cfg.state_dir, "/srv/state");
	cr_assert_str_eq(cfg.policy, "/etc/p.json");

	const char *keys[] = { "recordings", "state_dir", "policy" };
	for (size_t i = 0; i < 3; i++) {
		assert_refused(parsef("{\"%s\": \"rel/dir\"}", keys[i]));
		assert_msg_has("is not an absolute path");
		assert_refused(parsef("{\"%s\": \"\"}", keys[i]));
		assert_msg_has("is an empty path");
		assert_refused(parsef("{\"%s\": \"/a\\u001bb\"}", keys[i]));
		assert_msg_has("control byte 0x1b");
		cr_assert_null(strchr(err.msg, '\x1b'));
		assert_refused(parsef("{\"%s\": 1}", keys[i]));
		assert_msg_has("is not a string (an absolute path)");
	}
	char *longp = malloc(DG_CONFIG_PATH_MAX + 1);
	longp[0] = '/';
	memset(longp + 1, 'p', DG_CONFIG_PATH_MAX - 1);
	longp[DG_CONFIG_PATH_MAX] = '\0';
	assert_refused(parsef("{\"recordings\": \"%s\"}", longp));
	assert_msg_has("longer than the limit of 4095");
	longp[DG_CONFIG_PATH_MAX - 1] = '\0';
	assert_ok(parsef("{\"recordings\": \"%s\"}", longp));
	cr_assert_eq(strlen(cfg.recordings), DG_CONFIG_PATH_MAX - 1);
	free(longp);
}

Test(config, command_line_setters)
{
	struct dg_config c;
	dg_config_default(&c);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_config_set_policy(&c, "policy.json", &err), 0);
	cr_assert_str_eq(c.policy, "policy.json");
	cr_assert_eq(dg_config_set_recordings(&c, "/tmp/rec", &err), 0);
	cr_assert_str_eq(c.recordings, "/tmp/rec");
	cr_assert_eq(dg_config_set_recordings(&c, "", &err), -EINVAL);
	cr_assert_str_eq(err.msg, "--recordings: \"\" is an empty path");
	cr_assert_eq(dg_config_set_policy(&c, "a\nb", &err), -EINVAL);
	assert_msg_has("--policy: \"a\\x0ab\" is control byte 0x0a in a path");
	cr_assert_eq(dg_config_set_policy(&c, NULL, &err), -EINVAL);
	cr_assert_str_eq(c.policy, "policy.json");
	cr_assert_str_eq(c.recordings, "/tmp/rec");
}

Test(config, named_policies)
{
	assert_ok(parsef("{\"policies\": {\"strict\": \"/p/strict.json\", \"a_b-1\": \"/p/a.json\"}}"));
	cr_assert_eq(cfg.n_policies, 2);
	cr_assert_str_eq(dg_config_policy_path(&cfg, "strict"), "/p/strict.json");
	cr_assert_str_eq(dg_config_policy_path(&cfg, "a_b-1"), "/p/a.json");
	cr_assert_null(dg_config_policy_path(&cfg, "Strict"));

	const char *bad[] = { "Strict", "a b", "", "a.b", "\\u00e9",
			      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 33 */ };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_refused(parsef("{\"policies\": {\"%s\": \"/p.json\"}}", bad[i]));
		assert_msg_has("is not a policy name; allowed: 1 to 32 of [a-z0-9_-]");
	}
	assert_ok(parsef("{\"policies\": {\"%s\": \"/p.json\"}}", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
	assert_refused(parsef("{\"policies\": {\"default\": \"/p.json\"}}"));
	assert_msg_has("\"default\" is reserved");
	assert_refused(parsef("{\"policies\": {\"strict\": \"strict.json\"}}"));
	assert_msg_has("policies.strict: \"strict.json\" is not an absolute path");
	assert_refused(parsef("{\"policies\": [\"/p.json\"]}"));
	assert_msg_has("policies: an array is not an object");

	size_t cap = 32 * (DG_POLICIES_MAX + 2);
	char *text = malloc(cap);
	for (int count = DG_POLICIES_MAX; count <= DG_POLICIES_MAX + 1; count++) {
		size_t o = (size_t)snprintf(text, cap, "{\"policies\": {");
		for (int i = 0; i < count; i++)
			o += (size_t)snprintf(text + o, cap - o, "%s\"p%d\": \"/p%d\"", i ? "," : "",
					      i, i);
		o += (size_t)snprintf(text + o, cap - o, "}}");
		int rc = parse_text(text, o);
		if (count == DG_POLICIES_MAX)
			assert_ok(rc);
		else
			assert_refused(rc);
	}
	assert_msg_has("policies: 65 entries is more than the limit of 64");
	free(text);
}

/* ---- files ---------------------------------------------------------------------------------- */

Test(config, file_handling)
{
	struct dg_config c;
	dg_config_default(&c);
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_config_load("/nonexistent/deskgate.json", &c, &err), -ENOENT);
	cr_assert_str_eq(err.msg, "config /nonexistent/deskgate.json: No such file or directory");
	cr_assert_eq(dg_config_load("/tmp", &c, &err), -EISDIR);
	cr_assert_eq(dg_config_load("/dev/null", &c, &err), -EINVAL);
	assert_msg_has("not a regular file");

	char *path = dg_test_write_tmp("config.json", "{\"listen\": \"0.0.0.0:9\"}\n");
	cr_assert_eq(dg_config_load(path, &c, &err), 0, "%s", err.msg);
	cr_assert_str_eq(c.listen, "0.0.0.0:9");
	dg_config_free(&c);
	dg_test_rm_tmp(path);

	/* A FIFO is refused without blocking. */
	char dir[] = "/tmp/dg-test-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	char fifo[64];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(dg_config_load(fifo, &c, &err), -EINVAL);
	assert_msg_has("not a regular file");
	unlink(fifo);
	rmdir(dir);

	path = dg_test_write_tmp("empty.json", "");
	cr_assert_eq(dg_config_load(path, &c, &err), -EINVAL);
	assert_msg_has(path);
	assert_msg_has("empty");
	dg_test_rm_tmp(path);
}

Test(config, size_bound)
{
	/* Exactly the limit loads (whitespace is JSON); one byte more does not. */
	char *text = malloc(DG_CONFIG_FILE_MAX + 2);
	memset(text, ' ', DG_CONFIG_FILE_MAX + 1);
	memcpy(text, "{}", 2);
	text[DG_CONFIG_FILE_MAX] = '\0';
	char *path = dg_test_write_tmp("big.json", text);
	memset(&err, 0, sizeof(err));
	assert_ok(dg_config_load(path, &cfg, &err));
	dg_test_rm_tmp(path);
	text[DG_CONFIG_FILE_MAX] = ' ';
	text[DG_CONFIG_FILE_MAX + 1] = '\0';
	path = dg_test_write_tmp("big.json", text);
	cr_assert_eq(dg_config_load(path, &cfg, &err), -E2BIG);
	assert_msg_has("more than the limit of 262144");
	dg_test_rm_tmp(path);
	cr_assert_eq(parse_text(text, DG_CONFIG_FILE_MAX + 1), -E2BIG);
	free(text);
}

Test(config, refused_load_leaves_config_untouched)
{
	assert_ok(parsef("{\"listen\": \"0.0.0.0:1\", \"tokens\": [{\"name\": \"a\", \"role\": "
			 "\"agent\", \"token\": \"" TOK24 "\"}]}"));
	struct dg_config before = cfg;
	memset(&err, 0, sizeof(err));
	const char *text = "{\"listen\": \"0.0.0.0:2\", \"tokens\": [], \"x\": 1}";
	cr_assert_eq(dg_config_parse(text, strlen(text), ORIGIN, &cfg, &err), -EINVAL, "%s",
		     err.msg);
	cr_assert_eq(memcmp(&before, &cfg, sizeof(cfg)), 0);
}

/* ---- object_store ------------------------------------------------------------ */

/* A store file with the given text and mode under a fresh temp dir. */
static char *store_file(const char *text, mode_t mode)
{
	char *p = dg_test_write_tmp("store.json", text);
	cr_assert_eq(chmod(p, mode), 0);
	return p;
}

#define STORE_OK "{\"endpoint\":\"http://127.0.0.1:9\",\"region\":\"us-east-1\",\"bucket\":\"b-1\"," \
		 "\"access_key\":\"AK\",\"secret_key\":\"s3cr3t-shown-never\"}"

Test(config, object_store_loaded_and_checked)
{
	char *ok = store_file(STORE_OK, 0600);
	cr_assert_eq(parsef("{\"object_store\": {\"store\": \"%s\", \"keep_local\": true, "
			    "\"cache_mb\": 1}}", ok), 0, "%s", err.msg);
	cr_assert_str_eq(cfg.object_store.store, ok);
	cr_assert(cfg.object_store.keep_local);
	cr_assert_eq(cfg.object_store.cache_mb, 1);
	dg_config_free(&cfg);
	/* The defaults: no store; keep_local false; the cache bound. */
	cr_assert_eq(parsef("{\"object_store\": {\"store\": \"%s\"}}", ok), 0, "%s", err.msg);
	cr_assert(!cfg.object_store.keep_local);
	cr_assert_eq(cfg.object_store.cache_mb, DG_CONFIG_CACHE_MB_DEFAULT);
	dg_config_free(&cfg);
	cr_assert_eq(parsef("{\"object_store\": {\"store\": \"%s\", \"cache_mb\": %d}}", ok,
			    DG_CONFIG_CACHE_MB_MAX), 0, "%s", err.msg);
	dg_config_free(&cfg);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\", \"cache_mb\": %d}}", ok,
			      DG_CONFIG_CACHE_MB_MAX + 1));
	assert_msg_has("object_store.cache_mb: ");
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\", \"cache_mb\": 0}}", ok));
	assert_msg_has("object_store.cache_mb: 0: want an integer in [1, ");
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\", \"keep_local\": 1}}", ok));
	assert_msg_has("object_store.keep_local");
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\", \"bucket\": \"x\"}}", ok));
	assert_msg_has("unknown key \"object_store.bucket\"");
	assert_refused(parsef("{\"object_store\": {\"keep_local\": true}}"));
	assert_msg_has("object_store: \"store\" is required");
	assert_refused(parsef("{\"object_store\": {\"store\": \"relative/store.json\"}}"));
	assert_msg_has("object_store.store: ");
	assert_refused(parsef("{\"object_store\": \"%s\"}", ok));
	assert_msg_has("object_store: ");

	/* The store file: readable by others, missing, a bad field, an
	 * unknown member; never the secret in a message. */
	char *open_mode = store_file(STORE_OK, 0644);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", open_mode));
	assert_msg_has("group or others may read it");
	assert_msg_has(open_mode);
	assert_refused(parsef("{\"object_store\": {\"store\": \"/nonexistent/store.json\"}}"));
	assert_msg_has("object_store.store: store file /nonexistent/store.json");
	char *bad_url = store_file("{\"endpoint\":\"http://AK:s3cr3t-shown-never@h\",\"region\":\"r\","
				   "\"bucket\":\"b-1\",\"access_key\":\"AK\",\"secret_key\":\"x\"}", 0600);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", bad_url));
	assert_msg_has("endpoint");
	char *extra = store_file("{\"endpoint\":\"http://h\",\"region\":\"r\",\"bucket\":\"b-1\","
				 "\"access_key\":\"AK\",\"secret_key\":\"s3cr3t-shown-never\","
				 "\"prefix\":\"x/\"}", 0600);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", extra));
	assert_msg_has("member \"prefix\"");
	cr_assert_null(strstr(err.msg, "s3cr3t-shown-never"));
	char *paths[] = {ok, open_mode, bad_url, extra};
	for (int i = 0; i < 4; i++)
		dg_test_rm_tmp(paths[i]);
}

Test(config, object_store_credentials_from_the_environment)
{
	char *nokeys = store_file("{\"endpoint\":\"http://127.0.0.1:9\",\"region\":\"us-east-1\","
				  "\"bucket\":\"b-1\"}", 0600);
	unsetenv("DESKGATE_S3_ACCESS_KEY");
	unsetenv("DESKGATE_S3_SECRET_KEY");
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", nokeys));
	assert_msg_has("no access_key: give it in the file or in DESKGATE_S3_ACCESS_KEY");
	setenv("DESKGATE_S3_ACCESS_KEY", "AK", 1);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", nokeys));
	assert_msg_has("no secret_key: give it in the file or in DESKGATE_S3_SECRET_KEY");
	setenv("DESKGATE_S3_SECRET_KEY", "s3cr3t-shown-never", 1);
	cr_assert_eq(parsef("{\"object_store\": {\"store\": \"%s\"}}", nokeys), 0, "%s", err.msg);
	dg_config_free(&cfg);
	/* Checked like the file's: a ':' in the access key is refused. */
	setenv("DESKGATE_S3_ACCESS_KEY", "A:K", 1);
	assert_refused(parsef("{\"object_store\": {\"store\": \"%s\"}}", nokeys));
	assert_msg_has("access key");
	cr_assert_null(strstr(err.msg, "s3cr3t-shown-never"));
	unsetenv("DESKGATE_S3_ACCESS_KEY");
	unsetenv("DESKGATE_S3_SECRET_KEY");
	dg_test_rm_tmp(nokeys);
}
