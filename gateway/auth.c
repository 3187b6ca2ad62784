/* gateway: who may connect, and what they may do.
 *
 * Known tokens are kept as SHA-256 hashes only: from the configuration, from
 * the environment, or generated on the first start and remembered (as
 * hashes) in STATE_DIR/tokens.json. A presented token is hashed and compared
 * with every hash in constant time. Hashing first also makes the comparison
 * independent of the presented length, and a memory dump of the gateway
 * yields no usable secret.
 *
 * STATE_DIR/tokens.json, written by the first start and read by later ones:
 *   {"version": 1, "tokens": [{"name": "generated-agent", "role": "agent",
 *                              "token_sha256": "<hex>"}, ...]}
 * Its entries have the form of the configuration's "tokens" (so they can be
 * copied there). It is trusted only when it is a regular file (not a
 * symlink) owned by the effective uid with no group or other permission: a
 * file someone else can write could add an admin token, and one they can
 * read tells them who exists.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/gateway-priv.h"

#define TOKENS_FILE_VERSION 1

extern char **environ;

/* ---- random tokens ------------------------------------------------------- */

static int fill_random(unsigned char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = getrandom(buf + got, len - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		got += (size_t)n;
	}
	return 0;
}

/* base64url without padding (RFC 4648 §5): every character is an RFC 7230
 * token character, so the result also travels in a WebSocket subprotocol. */
static void base64url(const unsigned char *in, size_t len, char *out)
{
	static const char tbl[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0, i = 0;
	for (; i + 3 <= len; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
		out[o++] = tbl[v >> 18 & 63];
		out[o++] = tbl[v >> 12 & 63];
		out[o++] = tbl[v >> 6 & 63];
		out[o++] = tbl[v & 63];
	}
	if (len - i == 1) {
		unsigned v = (unsigned)in[i] << 16;
		out[o++] = tbl[v >> 18 & 63];
		out[o++] = tbl[v >> 12 & 63];
	} else if (len - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;
		out[o++] = tbl[v >> 18 & 63];
		out[o++] = tbl[v >> 12 & 63];
		out[o++] = tbl[v >> 6 & 63];
	}
	out[o] = '\0';
}
_Static_assert((DG_TOKEN_GEN_BYTES * 4 + 2) / 3 == DG_TOKEN_GEN_LEN,
	       "DG_TOKEN_GEN_LEN is the unpadded base64 length of DG_TOKEN_GEN_BYTES");
_Static_assert(DG_TOKEN_GEN_LEN >= DG_TOKEN_MIN, "generated tokens pass our own minimum");

/* A fresh token in clear (out: DG_TOKEN_GEN_LEN + 1 bytes) and its hash. */
static int new_token(char *out, unsigned char sha[DG_SHA256_LEN])
{
	unsigned char raw[DG_TOKEN_GEN_BYTES];
	int rc = fill_random(raw, sizeof(raw));
	if (rc) {
		out[0] = '\0';
		memset(sha, 0, DG_SHA256_LEN);
		return rc;
	}
	base64url(raw, sizeof(raw), out);
	OPENSSL_cleanse(raw, sizeof(raw));
	dg_sha256(out, DG_TOKEN_GEN_LEN, sha);
	return 0;
}

int dg_session_token_new(char out[DG_TOKEN_GEN_LEN + 1], struct dg_session_token *st,
			 struct dg_err *err)
{
	int rc = new_token(out, st->sha256);
	if (rc)
		return dg_err_set(err, rc, "session token: getrandom: %s", strerror(-rc));
	return 0;
}

bool dg_session_token_check(const struct dg_session_token *st, const char *presented,
			    size_t len)
{
	if (!st || !presented || len == 0 || len > DG_TOKEN_MAX)
		return false;
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(presented, len, h);
	return CRYPTO_memcmp(h, st->sha256, DG_SHA256_LEN) == 0;
}

/* ---- building the table ------------------------------------------------- */

static const struct {
	enum dg_role role;
	const char *var;
	const char *env_name;
	const char *gen_name;
} role_sources[] = {
	{ DG_ROLE_AGENT, DG_ENV_AGENT_TOKEN, "env-agent", "generated-agent" },
	{ DG_ROLE_VIEWER, DG_ENV_VIEWER_TOKEN, "env-viewer", "generated-viewer" },
	{ DG_ROLE_ADMIN, DG_ENV_ADMIN_TOKEN, "env-admin", "generated-admin" },
	/* Taking control of a desktop is given deliberately, never by a
	 * first start: no generated operator token. */
	{ DG_ROLE_OPERATOR, DG_ENV_OPERATOR_TOKEN, "env-operator", NULL },
};
#define N_ROLES (sizeof(role_sources) / sizeof(role_sources[0]))
#define N_GENERATED 3 /* the first entries of role_sources: struct dg_auth_generated */
_Static_assert(N_GENERATED <= N_ROLES, "generated roles");

/* Describes where entry e came from, for messages. */
static void describe(const struct dg_auth_entry *e, char *out, size_t len)
{
	switch (e->source) {
	case DG_TOKEN_FROM_CONFIG:
		snprintf(out, len, "the config's token \"%s\"", e->t.name);
		break;
	case DG_TOKEN_FROM_ENV:
		for (size_t i = 0; i < N_ROLES; i++)
			if (e->t.role == role_sources[i].role)
				snprintf(out, len, "%s", role_sources[i].var);
		break;
	default:
		snprintf(out, len, "token \"%s\"", e->t.name);
		break;
	}
}

/* Appends an entry after checking its name and its token are new: a name
 * owns sessions, and one secret under two names would make the owner
 * ambiguous. `what` names the newcomer in messages. */
static int add_entry(struct dg_auth *a, size_t cap, const struct dg_config_token *t,
		     enum dg_token_source src, const char *what, struct dg_err *err)
{
	for (size_t i = 0; i < a->n; i++) {
		char other[96];
		describe(&a->entries[i], other, sizeof(other));
		if (strcmp(a->entries[i].t.name, t->name) == 0)
			return dg_err_set(err, -EINVAL, "%s: the name \"%s\" is already used by %s",
					  what, t->name, other);
		if (CRYPTO_memcmp(a->entries[i].t.sha256, t->sha256, DG_SHA256_LEN) == 0)
			return dg_err_set(err, -EINVAL, "%s: the same token as %s", what, other);
	}
	if (a->n >= cap)
		return dg_err_set(err, -E2BIG, "%s: more than %zu tokens", what, cap);
	a->entries[a->n].t = *t;
	a->entries[a->n].source = src;
	a->n++;
	return 0;
}

/* The value of NAME in envp (first occurrence, as getenv), or NULL. */
static const char *env_get(const char *const *envp, const char *name)
{
	size_t nl = strlen(name);
	for (size_t i = 0; envp && envp[i]; i++)
		if (strncmp(envp[i], name, nl) == 0 && envp[i][nl] == '=')
			return envp[i] + nl + 1;
	return NULL;
}

/* DESKGATE_*_TOKEN. A variable that is set must be valid: an empty one is
 * refused too, since `VAR=${UNSET}` in a container file should stop the
 * server rather than let it fall back to generated tokens. Messages give
 * lengths, never the value. */
static int add_env_tokens(struct dg_auth *a, size_t cap, const char *const *envp,
			  struct dg_err *err)
{
	for (size_t i = 0; i < N_ROLES; i++) {
		const char *v = env_get(envp, role_sources[i].var);
		if (!v)
			continue;
		size_t len = strlen(v);
		if (len < DG_TOKEN_MIN || len > DG_TOKEN_MAX)
			return dg_err_set(err, -EINVAL,
					  "environment %s: %zu characters is outside [%d, %d]%s",
					  role_sources[i].var, len, DG_TOKEN_MIN, DG_TOKEN_MAX,
					  len == 0 ? " (set but empty: unset it or give a token)"
						   : "");
		if (!dg_token_chars_ok(v, len))
			return dg_err_set(err, -EINVAL,
					  "environment %s: only printable ASCII without spaces is "
					  "allowed in a token",
					  role_sources[i].var);
		struct dg_config_token t = { .role = role_sources[i].role };
		snprintf(t.name, sizeof(t.name), "%s", role_sources[i].env_name);
		dg_sha256(v, len, t.sha256);
		char what[64];
		snprintf(what, sizeof(what), "environment %s", role_sources[i].var);
		int rc = add_entry(a, cap, &t, DG_TOKEN_FROM_ENV, what, err);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- STATE_DIR/tokens.json ------------------------------------------------ */

/* Reads the tokens file. Returns -ENOENT (no message needed) when it does
 * not exist, so the caller generates one. */
static int load_tokens_file(const char *path, struct dg_auth *a, size_t cap,
			    struct dg_err *err)
{
	char *buf;
	size_t len;
	struct stat st;
	struct dg_err quiet;
	int rc = dg_read_file("tokens", path, DG_TOKENS_FILE_MAX, true, &buf, &len, &st, &quiet);
	if (rc == -ENOENT)
		return rc;
	if (rc)
		return dg_err_set(err, rc, "%s", quiet.msg);
	if (st.st_uid != geteuid()) {
		free(buf);
		return dg_err_set(err, -EPERM,
				  "tokens %s: owned by uid %u, not by this process (uid %u); "
				  "refused, since whoever owns it can add tokens",
				  path, (unsigned)st.st_uid, (unsigned)geteuid());
	}
	if (st.st_mode & 077) {
		free(buf);
		return dg_err_set(err, -EPERM,
				  "tokens %s: mode %04o gives group or others access; refused "
				  "(chmod 600 it, or delete it to generate new tokens)",
				  path, (unsigned)(st.st_mode & 07777));
	}

	struct dg_jctx c = { .what = "tokens", .origin = path, .err = err };
	json_t *root;
	rc = dg_json_decode(&c, buf, len, DG_TOKENS_FILE_MAX, &root);
	free(buf);
	if (rc)
		return rc;
	json_t *version = json_object_get(root, "version");
	json_t *tokens = json_object_get(root, "tokens");
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v) {
		if (strcmp(key, "version") != 0 && strcmp(key, "tokens") != 0) {
			char k[DG_SHOW_LEN(DG_SHOW_KEY_MAX)];
			dg_show_str(key, DG_SHOW_KEY_MAX, true, k, sizeof(k));
			json_decref(root);
			return dg_jfail(&c, "unknown key \"%s\" at top level", k);
		}
	}
	if (!json_is_integer(version) || json_integer_value(version) != TOKENS_FILE_VERSION) {
		json_decref(root);
		return dg_jfail(&c, "version: missing or not %d", TOKENS_FILE_VERSION);
	}
	if (!tokens) {
		json_decref(root);
		return dg_jfail(&c, "missing required key \"tokens\"");
	}
	struct dg_config_token *t;
	size_t n;
	rc = dg_parse_tokens(&c, tokens, "tokens", &t, &n);
	json_decref(root);
	if (rc)
		return rc;
	if (n == 0)
		rc = dg_jfail(&c, "no tokens; delete the file to generate new ones");
	for (size_t i = 0; i < n && rc == 0; i++) {
		char what[DG_CONFIG_PATH_MAX + 64];
		snprintf(what, sizeof(what), "tokens %s: tokens[%zu]", path, i);
		rc = add_entry(a, cap, &t[i], DG_TOKEN_FROM_STATE, what, err);
	}
	OPENSSL_cleanse(t, n * sizeof(*t));
	free(t);
	return rc;
}

static int write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(fd, s, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Creates STATE_DIR (only its last component: a missing parent is more
 * likely a typo than a wish) with mode 0700, or accepts an existing
 * directory as it is. */
static int ensure_state_dir(const char *dir, struct dg_err *err)
{
	if (mkdir(dir, 0700) == 0) {
		/* The umask may have taken bits away (even the owner's write);
		 * the directory is ours and exactly 0700. */
		if (chmod(dir, 0700) < 0) {
			int e = errno;
			return dg_err_set(err, -e, "state_dir %s: chmod: %s", dir, strerror(e));
		}
		return 0;
	}
	int e = errno;
	struct stat st;
	if (e == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
		return 0;
	if (e == EEXIST)
		return dg_err_set(err, -ENOTDIR, "state_dir %s: not a directory", dir);
	return dg_err_set(err, -e, "state_dir %s: cannot create it: %s", dir, strerror(e));
}

/* Writes the hashes of fresh tokens to path atomically: a temporary file in
 * the same directory (mode 0600 whatever the umask), fsync, then link() to
 * the final name, which never replaces an existing file. Two servers
 * starting at once thus cannot overwrite each other's tokens: the loser sees
 * -EEXIST and loads the winner's file. The directory is fsynced so the new
 * name survives a crash. */
static int store_tokens_file(const char *dir, const char *path,
			     const struct dg_config_token *t, size_t n, struct dg_err *err)
{
	char tmp[DG_CONFIG_PATH_MAX + 32];
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.XXXXXX", dir, DG_TOKENS_FILE) >= (int)sizeof(tmp))
		return dg_err_set(err, -ENAMETOOLONG, "state_dir %s: path too long", dir);
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return dg_err_set(err, -e, "state_dir %s: creating a temporary file: %s", dir,
				  strerror(e));
	}
	/* Three entries of about 150 bytes each. */
	char text[1024];
	size_t o = (size_t)snprintf(text, sizeof(text), "{\"version\": %d, \"tokens\": [\n",
				    TOKENS_FILE_VERSION);
	for (size_t i = 0; i < n && o < sizeof(text); i++) {
		char hex[2 * DG_SHA256_LEN + 1];
		for (size_t j = 0; j < DG_SHA256_LEN; j++)
			snprintf(hex + 2 * j, 3, "%02x", t[i].sha256[j]);
		o += (size_t)snprintf(text + o, sizeof(text) - o,
				      "  {\"name\": \"%s\", \"role\": \"%s\", \"token_sha256\": "
				      "\"%s\"}%s\n",
				      t[i].name, dg_role_name(t[i].role), hex, i + 1 < n ? "," : "");
	}
	if (o < sizeof(text))
		o += (size_t)snprintf(text + o, sizeof(text) - o, "]}\n");

	int rc = 0;
	const char *step = "";
	if (o >= sizeof(text)) {
		rc = -EOVERFLOW;
		step = "formatting";
	} else if (fchmod(fd, 0600) < 0) {
		rc = -errno;
		step = "fchmod";
	} else if ((rc = write_all(fd, text, o)) != 0) {
		step = "write";
	} else if (fsync(fd) < 0) {
		rc = -errno;
		step = "fsync";
	}
	if (close(fd) < 0 && rc == 0) {
		rc = -errno;
		step = "close";
	}
	if (rc == 0 && link(tmp, path) < 0) {
		rc = -errno;
		step = "link";
	}
	unlink(tmp);
	if (rc == -EEXIST)
		return rc;
	if (rc)
		return dg_err_set(err, rc, "tokens %s: %s: %s", path, step, strerror(-rc));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

/* First start: one token per role but operator, stored, returned in clear. */
static int generate(const char *dir, const char *path, struct dg_auth *a, size_t cap,
		    struct dg_auth_generated *gen, struct dg_err *err)
{
	int rc = ensure_state_dir(dir, err);
	if (rc)
		return rc;
	struct dg_config_token t[N_GENERATED];
	memset(t, 0, sizeof(t));
	for (size_t i = 0; i < N_GENERATED && rc == 0; i++) {
		struct dg_generated_token *g = &gen->t[i];
		g->role = t[i].role = role_sources[i].role;
		snprintf(g->name, sizeof(g->name), "%s", role_sources[i].gen_name);
		snprintf(t[i].name, sizeof(t[i].name), "%s", role_sources[i].gen_name);
		rc = new_token(g->token, t[i].sha256);
		if (rc)
			rc = dg_err_set(err, rc, "generating tokens: getrandom: %s", strerror(-rc));
	}
	if (rc == 0)
		rc = store_tokens_file(dir, path, t, N_GENERATED, err);
	for (size_t i = 0; i < N_GENERATED && rc == 0; i++)
		rc = add_entry(a, cap, &t[i], DG_TOKEN_GENERATED, "generated token", err);
	if (rc) {
		dg_auth_generated_wipe(gen);
		return rc;
	}
	gen->n = N_GENERATED;
	return 0;
}

int dg_auth_init(struct dg_auth *a, const struct dg_config *cfg, const char *const *envp,
		 struct dg_auth_generated *gen, struct dg_err *err)
{
	a->entries = NULL;
	a->n = 0;
	if (!gen)
		return dg_err_set(err, -EINVAL, "auth: no place for generated tokens");
	memset(gen, 0, sizeof(*gen));
	if (!envp)
		envp = (const char *const *)environ;

	/* Room for every source at once; the state file adds at most
	 * DG_TOKENS_MAX and is read only when the others gave nothing. */
	size_t cap = cfg->n_tokens + N_ROLES + DG_TOKENS_MAX;
	a->entries = calloc(cap, sizeof(*a->entries));
	if (!a->entries)
		return dg_err_set(err, -ENOMEM, "auth: %s", strerror(ENOMEM));

	int rc = 0;
	for (size_t i = 0; i < cfg->n_tokens && rc == 0; i++) {
		char what[64];
		snprintf(what, sizeof(what), "config tokens[%zu]", i);
		rc = add_entry(a, cap, &cfg->tokens[i], DG_TOKEN_FROM_CONFIG, what, err);
	}
	if (rc == 0)
		rc = add_env_tokens(a, cap, envp, err);

	if (rc == 0 && a->n == 0) {
		char path[DG_CONFIG_PATH_MAX + sizeof(DG_TOKENS_FILE) + 1];
		if (snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, DG_TOKENS_FILE) >=
		    (int)sizeof(path))
			rc = dg_err_set(err, -ENAMETOOLONG, "state_dir %s: path too long",
					cfg->state_dir);
		/* Two rounds at most: a concurrent start may create the file
		 * between our failed load and our link; then we load theirs. */
		for (int round = 0; rc == 0 && round < 2; round++) {
			rc = load_tokens_file(path, a, cap, err);
			if (rc == -ENOTDIR)
				rc = dg_err_set(err, rc, "state_dir %s: not a directory",
						cfg->state_dir);
			if (rc != -ENOENT)
				break;
			rc = generate(cfg->state_dir, path, a, cap, gen, err);
			if (rc != -EEXIST)
				break;
			if (round == 0)
				rc = 0;
		}
		/* Only a file that kept appearing and vanishing ends here. */
		if (rc == -EEXIST)
			rc = dg_err_set(err, rc, "tokens %s: appeared and vanished while starting",
					path);
	}
	if (rc)
		dg_auth_free(a);
	return rc;
}

void dg_auth_free(struct dg_auth *a)
{
	if (!a)
		return;
	if (a->entries)
		OPENSSL_cleanse(a->entries, a->n * sizeof(*a->entries));
	free(a->entries);
	a->entries = NULL;
	a->n = 0;
}

void dg_auth_generated_wipe(struct dg_auth_generated *gen)
{
	if (gen)
		OPENSSL_cleanse(gen, sizeof(*gen));
}

/* ---- checking -------------------------------------------------------------- */

int dg_auth_check(const struct dg_auth *a, const char *presented, size_t len,
		  struct dg_principal *who)
{
	struct dg_principal none = { .role = DG_ROLE_NONE };
	if (who)
		*who = none;
	/* Length and emptiness are properties of what the caller sent, so an
	 * early refusal reveals nothing about the known tokens. */
	if (!a || !presented || len == 0 || len > DG_TOKEN_MAX)
		return -EACCES;
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(presented, len, h);

	/* Every entry is compared, and the match is selected with masks rather
	 * than a branch, so time depends on the number of tokens only. */
	size_t idx = 0;
	size_t found = 0;
	for (size_t i = 0; i < a->n; i++) {
		size_t eq = (size_t)(CRYPTO_memcmp(h, a->entries[i].t.sha256, DG_SHA256_LEN) == 0);
		size_t mask = (size_t)0 - eq;
		idx = (idx & ~mask) | (i & mask);
		found |= eq;
	}
	OPENSSL_cleanse(h, sizeof(h));
	if (!found)
		return -EACCES;
	if (who) {
		who->role = a->entries[idx].t.role;
		memcpy(who->name, a->entries[idx].t.name, sizeof(who->name));
	}
	return 0;
}

int dg_auth_bearer(const char *v, const char **token, size_t *len)
{
	*token = NULL;
	*len = 0;
	if (!v || !*v)
		return -ENOENT;
	/* RFC 7235: the scheme is case-insensitive and followed by 1*SP. */
	if (strncasecmp(v, "Bearer", 6) != 0 || v[6] != ' ')
		return -EINVAL;
	const char *p = v + 7;
	while (*p == ' ')
		p++;
	const char *start = p;
	size_t n = 0;
	while (p[n] > 0x20 && p[n] < 0x7f) {
		if (++n > DG_TOKEN_MAX)
			return -E2BIG; /* stop scanning: the header can be long */
	}
	if (n == 0 || p[n] != '\0')
		return -EINVAL;
	*token = start;
	*len = n;
	return 0;
}

/* RFC 7230 tchar. */
static bool tchar(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch));
}

int dg_auth_subprotocol(const char *value, const char **token, size_t *len)
{
	*token = NULL;
	*len = 0;
	if (!value)
		return -ENOENT;
	const char *p = value;
	bool v1 = false, bearer = false, any = false;
	const char *tok = NULL;
	size_t tlen = 0;
	const size_t plen = strlen(DG_WS_BEARER_PREFIX);
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		const char *start = p;
		while (tchar(*p))
			p++;
		size_t elen = (size_t)(p - start);
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ',' && *p != '\0')
			return -EINVAL; /* a space inside an entry, or a non-token byte */
		if (elen == 0) {
			if (!any && *p == '\0')
				return -ENOENT; /* an empty or all-blank header */
			return -EINVAL;        /* an empty entry: "a,,b" or a trailing comma */
		}
		any = true;
		if ((elen == strlen(DG_WS_PROTOCOL) && strncmp(start, DG_WS_PROTOCOL, elen) == 0) ||
		    (elen == strlen(DG_WS_RFB_PROTOCOL) &&
		     strncmp(start, DG_WS_RFB_PROTOCOL, elen) == 0)) {
			if (v1)
				return -EINVAL;
			v1 = true;
		} else if (elen > plen && strncmp(start, DG_WS_BEARER_PREFIX, plen) == 0) {
			if (bearer)
				return -EINVAL;
			bearer = true;
			tok = start + plen;
			tlen = elen - plen;
			if (tlen > DG_TOKEN_MAX)
				return -E2BIG;
		} else {
			return -EINVAL; /* unknown, or "bearer." with no token */
		}
		if (*p == '\0')
			break;
		p++;
	}
	/* The server must select a protocol the client offered: one of ours,
	 * and only one (the endpoint decides which it serves). */
	if (!v1)
		return -EINVAL;
	if (!bearer)
		return -ENOENT;
	*token = tok;
	*len = tlen;
	return 0;
}

bool dg_auth_may(const struct dg_principal *p, enum dg_permission perm, const char *owner_name)
{
	if (!p)
		return false;
	switch (p->role) {
	case DG_ROLE_ADMIN:
		switch (perm) {
		case DG_PERM_CREATE_SESSION:
		case DG_PERM_ACT:
		case DG_PERM_WATCH:
		case DG_PERM_READ_RECORDINGS:
		case DG_PERM_APPROVE:
		case DG_PERM_ADMIN:
		case DG_PERM_TAKEOVER:
			return true;
		}
		return false;
	case DG_ROLE_AGENT:
		if (perm == DG_PERM_CREATE_SESSION)
			return true;
		/* Ownership by name: one agent's token never reaches another
		 * agent's session. An unnamed principal owns nothing. */
		if (perm == DG_PERM_ACT)
			return owner_name && p->name[0] && strcmp(owner_name, p->name) == 0;
		return false;
	case DG_ROLE_OPERATOR:
		/* A viewer who may also take the wheel; acting on a session
		 * otherwise (creating, ending, its agent's channels) stays the
		 * agent's. */
		if (perm == DG_PERM_TAKEOVER)
			return true;
		/* fall through */
	case DG_ROLE_VIEWER:
		return perm == DG_PERM_WATCH || perm == DG_PERM_READ_RECORDINGS ||
		       perm == DG_PERM_APPROVE;
	case DG_ROLE_NONE:
		break;
	}
	return false;
}
