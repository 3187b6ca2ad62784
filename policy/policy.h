/* policy: the operator's policy file, compiled once and consulted per action.
 *
 * Today the file carries only its "limits" section (resource bounds of a
 * jail); later sections (actions, urls, regions, keys, ...) extend the same
 * file. Loading is strict: an unknown key or a bad value is an error whose
 * message names the key, so a typo never silently weakens containment.
 *
 * Error convention (whole project): functions return 0 or a negative
 * errno-style code; on error a human message is written to the caller's
 * buffer (struct dg_err) saying what failed and on what.
 */
#ifndef DG_POLICY_H
#define DG_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* A fixed-size error message buffer, filled by the function that failed. */
#define DG_ERR_MAX 512
struct dg_err {
	char msg[DG_ERR_MAX];
};

/* Formats msg into err (when err is not NULL) and returns code, which must be
 * a negative errno value, so callers can write `return dg_err_set(...)`. */
int dg_err_set(struct dg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Quoting untrusted text into messages (policy/show.c): control bytes and
 * non-ASCII as \xNN, with quoted also '"' and '\\' escaped, cut after max
 * bytes with "...". out gets at most out_len - 1 characters. */
#define DG_SHOW_MAX 64
#define DG_SHOW_BUF (DG_SHOW_MAX * 4 + 4)
#define DG_SHOW_VALUE_BUF (DG_SHOW_BUF + 8)
void dg_show_bytes(const char *in, size_t len, size_t max, bool quoted, char *out, size_t out_len);
void dg_show_str(const char *in, size_t max, bool quoted, char *out, size_t out_len);
/* Describes a JSON value: scalars as written (strings quoted, escaped and
 * cut), containers by kind ("an object"). */
void dg_show_value(const json_t *v, char *out, size_t out_len);

/* Bounds on what a policy may ask for. A value outside [MIN, MAX] is refused
 * at load time with the key's name. */
#define DG_POLICY_FILE_MAX (1024 * 1024) /* bytes of a policy file */
#define DG_POLICY_VERSION 1

#define DG_LIMIT_MEMORY_MB_MIN 16
#define DG_LIMIT_MEMORY_MB_MAX (1024 * 1024)
#define DG_LIMIT_PIDS_MIN 8
#define DG_LIMIT_PIDS_MAX 65536
#define DG_LIMIT_CPUS_MIN 0.01
#define DG_LIMIT_CPUS_MAX 1024.0
#define DG_LIMIT_SECONDS_MIN 1
#define DG_LIMIT_SECONDS_MAX (7 * 24 * 3600)
#define DG_LIMIT_OUTPUT_BYTES_MIN 1
#define DG_LIMIT_OUTPUT_BYTES_MAX (1024ull * 1024 * 1024)
#define DG_LIMIT_SCRATCH_MB_MIN 1
#define DG_LIMIT_SCRATCH_MB_MAX (1024 * 1024 - 1) /* must stay below memory_mb */

/* Built-in defaults, used when no policy file is given. */
#define DG_LIMIT_DEFAULT_MEMORY_MB 512
#define DG_LIMIT_DEFAULT_PIDS 128
#define DG_LIMIT_DEFAULT_CPUS 1.0
#define DG_LIMIT_DEFAULT_EXEC_SECONDS 30
#define DG_LIMIT_DEFAULT_SESSION_SECONDS 3600
#define DG_LIMIT_DEFAULT_OUTPUT_BYTES (1024 * 1024)
#define DG_LIMIT_DEFAULT_SCRATCH_MB 256

/* Resource bounds of one jail. scratch_mb caps the jail's writable space
 * (/tmp and home share it) and must stay below memory_mb, because tmpfs pages
 * are charged to the jail's memory cgroup and cannot be reclaimed without
 * swap. */
struct dg_limits {
	uint64_t memory_mb;
	uint32_t pids;
	double cpus;
	uint32_t exec_seconds;
	uint32_t session_seconds;
	uint64_t output_bytes;
	uint64_t scratch_mb;
};

struct dg_policy {
	int version;
	struct dg_limits limits;
};

/* Fills p with the built-in default policy. */
void dg_policy_default(struct dg_policy *p);

/* Parses a policy from JSON text of len bytes. `origin` names the source in
 * error messages (a path, or "<builtin>"). Returns 0 or -EINVAL, -E2BIG. */
int dg_policy_parse(const char *text, size_t len, const char *origin, struct dg_policy *p,
		    struct dg_err *err);

/* Reads and parses the policy file at path (at most DG_POLICY_FILE_MAX bytes).
 * Returns 0 or a negative errno (-ENOENT, -EINVAL, -E2BIG, ...). */
int dg_policy_load(const char *path, struct dg_policy *p, struct dg_err *err);

/* ---- URLs (policy/url.c) -------------------------------------------------
 *
 * Only strictly canonical http and https URLs are accepted: lowercase scheme;
 * host as lowercase letter-digit-hyphen labels, a dotted-quad IPv4 address or
 * a bracketed compressed IPv6 address; no userinfo; no backslash, whitespace
 * or control characters; no percent sign or non-ASCII in the host; no
 * trailing dot; a last label that looks numeric must be a valid dotted quad;
 * a decimal port without leading zeros, at most 65535. Everything else is
 * refused with a reason. The rule: never accept what a browser (the WHATWG
 * parser) would read differently. */
#define DG_URL_MAX 8192
#define DG_URL_HOST_MAX 253

struct dg_url {
	bool https;
	char host[DG_URL_HOST_MAX + 1]; /* as written: lowercase; IPv6 with brackets */
	bool host_is_ip;
	uint16_t port;                  /* explicit, or 80/443 from the scheme */
	bool port_given;
	const char *path;               /* into the caller's string: "/..." (at least "/") */
	size_t path_len;                /* up to (not including) '?' or '#' */
	const char *query;              /* after '?', or NULL */
	size_t query_len;
};

/* Parses url (NUL-terminated, at most DG_URL_MAX bytes). Returns 0 or
 * -EINVAL with the reason in err. u's pointers point into url. */
int dg_url_parse(const char *url, struct dg_url *u, struct dg_err *err);

#endif
