/* gateway internals shared by config.c and auth.c: strict JSON helpers
 * and token handling. Not part of the public API. */
#ifndef DG_GATEWAY_PRIV_H
#define DG_GATEWAY_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include <jansson.h>

#include "gateway/gateway.h"

/* One parse: what is being read ("config", "tokens"), from where, and where
 * the first error goes. Messages read "<what> <origin>: <message>". */
struct dg_jctx {
	const char *what;
	const char *origin;
	struct dg_err *err;
};

/* Records "<what> <origin>: <message>" and returns -EINVAL. */
int dg_jfail(const struct dg_jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Untrusted text in messages goes through dg_show_str / dg_show_value
 * (base/show.c). A buffer of DG_SHOW_LEN(max) bytes holds max bytes shown.
 * Never show a value that may be a secret. */
#define DG_SHOW_LEN(max) ((max) * 4 + 4)
#define DG_SHOW_KEY_MAX DG_SHOW_MAX
#define DG_SHOW_VALUE_MAX DG_SHOW_VALUE_BUF

/* Decodes text strictly (duplicate keys refused, no trailing data, no NUL,
 * a non-empty object at the top). Returns 0 with *root set, or -EINVAL,
 * -E2BIG (len > max) with a message. */
int dg_json_decode(const struct dg_jctx *c, const char *text, size_t len, size_t max,
		   json_t **root);

/* Whether s[0..len) is a usable token in clear: printable ASCII (0x21-0x7e),
 * no spaces. Length is checked by the caller. */
bool dg_token_chars_ok(const char *s, size_t len);

/* Whether s is a valid token name: 1 to DG_TOKEN_NAME_MAX of [A-Za-z0-9._-]. */
bool dg_token_name_ok(const char *s);

/* Parses a "tokens" array (key names it in messages) into a malloc'd array of
 * hashed tokens. Clear secrets are wiped from the JSON tree once hashed.
 * Checks names unique and tokens distinct within the array. */
int dg_parse_tokens(const struct dg_jctx *c, json_t *arr, const char *key,
		    struct dg_config_token **out, size_t *n_out);

/* Role from its name, DG_ROLE_NONE when unknown. */
enum dg_role dg_role_from_name(const char *s);

#endif
