/* Gateway authentication: token checks (right, wrong, prefix, empty), tokens
 * from the environment, generation on the first start and the tokens file's
 * protection, Bearer and subprotocol parsing, session tokens, and the
 * permission matrix. Timing cannot be tested here; auth.c compares every
 * hash with CRYPTO_memcmp and selects the match without a branch.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dg_test.h"
#include "gateway/gateway.h"

#define AGENT_TOK "agent-token-0123456789abcdef"
#define AGENT2_TOK "agent-token-0123456789abcdeX" /* same length, last byte differs */
#define VIEWER_TOK "viewer-token-0123456789abcdef"
#define ADMIN_TOK "admin-token-0123456789abcdef!"

static struct dg_config cfg;
static struct dg_auth auth;
static struct dg_auth_generated gen;
static struct dg_err err;
static char tmpdir[64];      /* per test, removed by fini */
static char state_dir[128];  /* tmpdir/state: does not exist at first */
static const char *const no_env[] = { NULL };

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path);
}

static void init(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/dg-auth-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
	snprintf(state_dir, sizeof(state_dir), "%s/state", tmpdir);
	dg_config_default(&cfg);
	/* Never the real /var/lib/deskgate. */
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", state_dir);
}

static void fini(void)
{
	dg_auth_free(&auth);
	dg_config_free(&cfg);
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
TestSuite(auth, .init = init, .fini = fini);

/* Parses a configuration text over the defaults, keeping the temp state dir. */
static void config(const char *text)
{
	memset(&err, 0, sizeof(err));
	dg_config_free(&cfg);
	cr_assert_eq(dg_config_parse(text, strlen(text), "/test/config.json", &cfg, &err), 0, "%s",
		     err.msg);
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", state_dir);
}

static int auth_init(const char *const *envp)
{
	dg_auth_free(&auth);
	memset(&err, 0, sizeof(err));
	return dg_auth_init(&auth, &cfg, envp, &gen, &err);
}

#define assert_msg_has(s)                                                                  \
	cr_assert(strstr(err.msg, (s)) != NULL, "message \"%s\" lacks \"%s\"", err.msg, (s))
#define assert_msg_lacks(s)                                                                \
	cr_assert(strstr(err.msg, (s)) == NULL, "message \"%s\" shows \"%s\"", err.msg, (s))

static const char three_tokens[] =
	"{\"tokens\": [{\"name\": \"ci-agent\", \"role\": \"agent\", \"token\": \"" AGENT_TOK "\"},"
	" {\"name\": \"alice\", \"role\": \"viewer\", \"token\": \"" VIEWER_TOK "\"},"
	" {\"name\": \"ops\", \"role\": \"admin\", \"token\": \"" ADMIN_TOK "\"}]}";

/* Checks s authenticates as role/name. */
static void assert_who(const char *s, enum dg_role role, const char *name)
{
	struct dg_principal who;
	memset(&who, 0x5a, sizeof(who));
	int rc = dg_auth_check(&auth, s, strlen(s), &who);
	cr_assert_eq(rc, 0, "token \"%s\" refused", s);
	cr_assert_eq(who.role, role, "token \"%s\": role %d", s, who.role);
	cr_assert_str_eq(who.name, name);
}

static void assert_nobody(const char *s, size_t len)
{
	struct dg_principal who;
	memset(&who, 0x5a, sizeof(who));
	cr_assert_eq(dg_auth_check(&auth, s, len, &who), -EACCES, "token \"%.*s\" accepted",
		     (int)len, s ? s : "");
	cr_assert_eq(who.role, DG_ROLE_NONE);
	cr_assert_str_eq(who.name, "");
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

Test(auth, check_right_wrong_prefix_empty)
{
	config(three_tokens);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 3);
	cr_assert_eq(gen.n, 0);
	cr_assert(!exists(state_dir), "configured tokens must not touch the state dir");

	assert_who(AGENT_TOK, DG_ROLE_AGENT, "ci-agent");
	assert_who(VIEWER_TOK, DG_ROLE_VIEWER, "alice");
	assert_who(ADMIN_TOK, DG_ROLE_ADMIN, "ops");

	assert_nobody(AGENT2_TOK, strlen(AGENT2_TOK));           /* same length, wrong */
	assert_nobody(AGENT_TOK, strlen(AGENT_TOK) - 1);         /* prefix */
	assert_nobody(AGENT_TOK, 1);
	assert_nobody(AGENT_TOK "x", strlen(AGENT_TOK) + 1);     /* extension */
	assert_nobody("", 0);
	assert_nobody(NULL, 0);
	assert_nobody("Agent-token-0123456789abcdef", 28);       /* case matters */
	char big[DG_TOKEN_MAX + 2];
	memset(big, 'a', sizeof(big));
	assert_nobody(big, sizeof(big));

	/* The length is authoritative, not a NUL: bytes after it are ignored. */
	struct dg_principal who;
	cr_assert_eq(dg_auth_check(&auth, AGENT_TOK "garbage", strlen(AGENT_TOK), &who), 0);
	cr_assert_eq(who.role, DG_ROLE_AGENT);
	cr_assert_eq(dg_auth_check(&auth, AGENT_TOK, strlen(AGENT_TOK), NULL), 0);
	cr_assert_eq(dg_auth_check(NULL, AGENT_TOK, strlen(AGENT_TOK), &who), -EACCES);

	/* Sources are recorded. */
	for (size_t i = 0; i < auth.n; i++)
		cr_assert_eq(auth.entries[i].source, DG_TOKEN_FROM_CONFIG);
}

Test(auth, hashed_config_token_checks)
{
	/* sha256("agent-token-0123456789abcdef"), as `printf %s ... | sha256sum` prints. */
	char hex[65];
	{
		config("{\"tokens\": [{\"name\": \"x\", \"role\": \"agent\", \"token\": \"" AGENT_TOK
		       "\"}]}");
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", cfg.tokens[0].sha256[i]);
	}
	char text[256];
	snprintf(text, sizeof(text),
		 "{\"tokens\": [{\"name\": \"hashed\", \"role\": \"viewer\", \"token_sha256\": "
		 "\"%s\"}]}",
		 hex);
	config(text);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	assert_who(AGENT_TOK, DG_ROLE_VIEWER, "hashed");
	assert_nobody(hex, 64); /* the hash itself is not a token */
}

/* ---- environment ------------------------------------------------------------ */

Test(auth, env_tokens)
{
	const char *env[] = { "PATH=/bin", "DESKGATE_AGENT_TOKEN=" AGENT_TOK,
			      "DESKGATE_VIEWER_TOKEN=" VIEWER_TOK, "DESKGATE_ADMIN_TOKEN=" ADMIN_TOK,
			      NULL };
	cr_assert_eq(auth_init(env), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 3);
	cr_assert_eq(gen.n, 0);
	cr_assert(!exists(state_dir), "env tokens must not generate any");
	assert_who(AGENT_TOK, DG_ROLE_AGENT, "env-agent");
	assert_who(VIEWER_TOK, DG_ROLE_VIEWER, "env-viewer");
	assert_who(ADMIN_TOK, DG_ROLE_ADMIN, "env-admin");
	for (size_t i = 0; i < auth.n; i++)
		cr_assert_eq(auth.entries[i].source, DG_TOKEN_FROM_ENV);

	/* One variable alone is enough; the others stay unset. */
	const char *one[] = { "DESKGATE_VIEWER_TOKEN=" VIEWER_TOK, NULL };
	cr_assert_eq(auth_init(one), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 1);
	assert_nobody(AGENT_TOK, strlen(AGENT_TOK));

	/* Env adds to the config. */
	config("{\"tokens\": [{\"name\": \"ops\", \"role\": \"admin\", \"token\": \"" ADMIN_TOK
	       "\"}]}");
	const char *agent_only[] = { "DESKGATE_AGENT_TOKEN=" AGENT_TOK, NULL };
	cr_assert_eq(auth_init(agent_only), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 2);
	assert_who(AGENT_TOK, DG_ROLE_AGENT, "env-agent");
	assert_who(ADMIN_TOK, DG_ROLE_ADMIN, "ops");
}

Test(auth, env_process_environment)
{
	/* envp NULL reads the process environment (criterion runs each test in
	 * its own process, so setenv stays here). */
	unsetenv(DG_ENV_VIEWER_TOKEN);
	unsetenv(DG_ENV_ADMIN_TOKEN);
	setenv(DG_ENV_AGENT_TOKEN, AGENT_TOK, 1);
	cr_assert_eq(auth_init(NULL), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 1);
	assert_who(AGENT_TOK, DG_ROLE_AGENT, "env-agent");
}

Test(auth, env_tokens_refused)
{
	const char *shortv[] = { "DESKGATE_AGENT_TOKEN=SECRETSECRETSECRETSECRE", NULL }; /* 23 */
	cr_assert_eq(auth_init(shortv), -EINVAL);
	cr_assert_str_eq(err.msg,
			 "environment DESKGATE_AGENT_TOKEN: 23 characters is outside [24, 256]");
	cr_assert_eq(auth.n, 0);
	cr_assert_null(auth.entries);

	const char *empty[] = { "DESKGATE_ADMIN_TOKEN=", NULL };
	cr_assert_eq(auth_init(empty), -EINVAL);
	assert_msg_has("DESKGATE_ADMIN_TOKEN: 0 characters");
	assert_msg_has("set but empty");
	cr_assert(!exists(state_dir), "an empty variable must not fall back to generation");

	const char *space[] = { "DESKGATE_VIEWER_TOKEN=SECRETSECRET SECRETSECRETSECRET", NULL };
	cr_assert_eq(auth_init(space), -EINVAL);
	assert_msg_has("DESKGATE_VIEWER_TOKEN: only printable ASCII without spaces");
	assert_msg_lacks("SECRET");

	char longv[300] = "DESKGATE_AGENT_TOKEN=";
	memset(longv + strlen(longv), 'x', 257);
	const char *too_long[] = { longv, NULL };
	cr_assert_eq(auth_init(too_long), -EINVAL);
	assert_msg_has("257 characters");

	/* A name already used in the config, and a token already used. */
	config("{\"tokens\": [{\"name\": \"env-agent\", \"role\": \"agent\", \"token\": \"" ADMIN_TOK
	       "\"}]}");
	const char *agent[] = { "DESKGATE_AGENT_TOKEN=" AGENT_TOK, NULL };
	cr_assert_eq(auth_init(agent), -EINVAL);
	cr_assert_str_eq(err.msg, "environment DESKGATE_AGENT_TOKEN: the name \"env-agent\" is "
				  "already used by the config's token \"env-agent\"");
	config("{\"tokens\": [{\"name\": \"ops\", \"role\": \"admin\", \"token\": \"" AGENT_TOK
	       "\"}]}");
	cr_assert_eq(auth_init(agent), -EINVAL);
	cr_assert_str_eq(err.msg, "environment DESKGATE_AGENT_TOKEN: the same token as the "
				  "config's token \"ops\"");
	const char *twice[] = { "DESKGATE_AGENT_TOKEN=" VIEWER_TOK,
				"DESKGATE_VIEWER_TOKEN=" VIEWER_TOK, NULL };
	config("{}");
	cr_assert_eq(auth_init(twice), -EINVAL);
	cr_assert_str_eq(err.msg, "environment DESKGATE_VIEWER_TOKEN: the same token as "
				  "DESKGATE_AGENT_TOKEN");
}

/* ---- generation and the tokens file ----------------------------------------------- */

static char *tokens_path(void)
{
	static char p[192];
	snprintf(p, sizeof(p), "%s/" DG_TOKENS_FILE, state_dir);
	return p;
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "%s", path);
	static char buf[8192];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static bool base64url_only(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
			return false;
	return true;
}

/* Entries of a directory, "." and ".." excluded. */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

Test(auth, first_start_generates_then_loads)
{
	/* An umask that would leave the file 0400 and the dir 0500: modes are
	 * set explicitly, not left to the umask. */
	umask(0277);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	umask(022);
	cr_assert_eq(gen.n, 3);
	const enum dg_role roles[] = { DG_ROLE_AGENT, DG_ROLE_VIEWER, DG_ROLE_ADMIN };
	const char *names[] = { "generated-agent", "generated-viewer", "generated-admin" };
	char saved[3][DG_TOKEN_GEN_LEN + 1];
	for (size_t i = 0; i < 3; i++) {
		cr_assert_eq(gen.t[i].role, roles[i]);
		cr_assert_str_eq(gen.t[i].name, names[i]);
		cr_assert_eq(strlen(gen.t[i].token), DG_TOKEN_GEN_LEN);
		cr_assert(base64url_only(gen.t[i].token), "%s", gen.t[i].token);
		memcpy(saved[i], gen.t[i].token, sizeof(saved[i]));
		assert_who(saved[i], roles[i], names[i]);
		cr_assert_eq(auth.entries[i].source, DG_TOKEN_GENERATED);
	}
	cr_assert_str_neq(saved[0], saved[1]);
	cr_assert_str_neq(saved[1], saved[2]);

	struct stat st;
	cr_assert_eq(stat(state_dir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0700, "dir mode %o", st.st_mode & 07777);
	cr_assert_eq(lstat(tokens_path(), &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600, "file mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());

	/* The file holds hashes, never the tokens; no temporary file remains. */
	char *text = strdup(read_text(tokens_path()));
	for (size_t i = 0; i < 3; i++)
		cr_assert_null(strstr(text, saved[i]), "token in clear in the file");
	cr_assert_not_null(strstr(text, "\"token_sha256\""));
	cr_assert_eq(count_entries(state_dir), 1);

	/* Printed once: later starts return none, and the tokens still work. */
	dg_auth_generated_wipe(&gen);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(gen.n, 0);
	cr_assert_eq(auth.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_who(saved[i], roles[i], names[i]);
		cr_assert_eq(auth.entries[i].source, DG_TOKEN_FROM_STATE);
	}
	assert_nobody("x", 1);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(gen.n, 0);
	cr_assert_str_eq(read_text(tokens_path()), text, "a later start rewrote the file");

	/* Configured tokens take over; the file is then ignored, not deleted. */
	config(three_tokens);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(auth.n, 3);
	assert_nobody(saved[0], strlen(saved[0]));
	cr_assert(exists(tokens_path()));
	free(text);
}

Test(auth, existing_state_dir_kept_as_is)
{
	cr_assert_eq(mkdir(state_dir, 0750), 0);
	cr_assert_eq(chmod(state_dir, 0750), 0);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(gen.n, 3);
	struct stat st;
	cr_assert_eq(stat(state_dir, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0750);
	cr_assert_eq(stat(tokens_path(), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600);
}

Test(auth, state_dir_problems)
{
	/* Only the last component is created. */
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s/missing/state", tmpdir);
	cr_assert_eq(auth_init(no_env), -ENOENT);
	assert_msg_has("state_dir ");
	assert_msg_has("/missing/state: cannot create it: No such file or directory");
	cr_assert_eq(gen.n, 0);
	cr_assert_eq(auth.n, 0);

	/* A file where the directory should be. */
	char *f = dg_test_write_tmp("file", "x");
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s", f);
	cr_assert_eq(auth_init(no_env), -ENOTDIR);
	assert_msg_has("not a directory");
	dg_test_rm_tmp(f);
}

/* Generates a tokens file in state_dir, returns the agent token. */
static void generate_once(char *agent_token)
{
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(gen.n, 3);
	memcpy(agent_token, gen.t[0].token, DG_TOKEN_GEN_LEN + 1);
	dg_auth_generated_wipe(&gen);
}

Test(auth, tokens_file_group_or_world_access_refused)
{
	char tok[DG_TOKEN_GEN_LEN + 1];
	generate_once(tok);
	const mode_t bad[] = { 0644, 0640, 0604, 0620, 0602, 0601, 0610, 0660, 0666 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(chmod(tokens_path(), bad[i]), 0);
		cr_assert_eq(auth_init(no_env), -EPERM, "mode %o accepted", bad[i]);
		char want[32];
		snprintf(want, sizeof(want), "mode %04o", bad[i]);
		assert_msg_has(want);
		assert_msg_has(tokens_path());
		assert_msg_has("gives group or others access; refused (chmod 600 it, or delete it "
			       "to generate new tokens)");
		cr_assert_eq(gen.n, 0, "a refused file must not be replaced by new tokens");
		cr_assert_eq(auth.n, 0);
	}
	/* Owner-only modes are fine, 0400 included. */
	cr_assert_eq(chmod(tokens_path(), 0400), 0);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	assert_who(tok, DG_ROLE_AGENT, "generated-agent");
}

Test(auth, tokens_file_of_another_owner_refused)
{
	if (geteuid() != 0)
		cr_skip_test("chown to another uid needs root");
	char tok[DG_TOKEN_GEN_LEN + 1];
	generate_once(tok);
	cr_assert_eq(chown(tokens_path(), 65534, 65534), 0);
	cr_assert_eq(auth_init(no_env), -EPERM);
	assert_msg_has("owned by uid 65534, not by this process (uid 0)");
	cr_assert_eq(gen.n, 0);
}

Test(auth, tokens_file_symlink_and_fifo_refused)
{
	char tok[DG_TOKEN_GEN_LEN + 1];
	generate_once(tok);
	char real[256];
	snprintf(real, sizeof(real), "%s/real.json", tmpdir);
	cr_assert_eq(rename(tokens_path(), real), 0);
	cr_assert_eq(symlink(real, tokens_path()), 0);
	cr_assert_eq(auth_init(no_env), -ELOOP);
	assert_msg_has("is a symbolic link; refused");
	cr_assert_eq(gen.n, 0);

	cr_assert_eq(unlink(tokens_path()), 0);
	cr_assert_eq(mkfifo(tokens_path(), 0600), 0);
	cr_assert_eq(auth_init(no_env), -EINVAL);
	assert_msg_has("not a regular file");
}

/* Writes text as the tokens file with mode 0600. */
static void write_tokens_file(const char *text)
{
	mkdir(state_dir, 0700);
	int fd = open(tokens_path(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(auth, tokens_file_content_checked)
{
	const char *bad[] = {
		"", "[]", "{", "{\"tokens\": []}",
		"{\"version\": 2, \"tokens\": []}",
		"{\"version\": 1}",
		"{\"version\": 1, \"tokens\": []}",
		"{\"version\": 1, \"tokens\": [], \"extra\": 1}",
		"{\"version\": 1, \"tokens\": [{\"name\": \"a\", \"role\": \"boss\", "
		"\"token_sha256\": \"00\"}]}",
	};
	const char *says[] = { "empty", "the top level is an array", "invalid JSON",
			       "version: missing or not 1", "version: missing or not 1",
			       "missing required key \"tokens\"", "no tokens; delete the file",
			       "unknown key \"extra\" at top level", "tokens[0].role: \"boss\"" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_tokens_file(bad[i]);
		cr_assert_eq(auth_init(no_env), -EINVAL, "%s accepted", bad[i]);
		char prefix[256];
		snprintf(prefix, sizeof(prefix), "tokens %s: ", tokens_path());
		cr_assert(strncmp(err.msg, prefix, strlen(prefix)) == 0, "%s", err.msg);
		assert_msg_has(says[i]);
		cr_assert_eq(gen.n, 0);
	}
	/* A hand-written file in the config's format works (clear tokens too). */
	write_tokens_file("{\"version\": 1, \"tokens\": [{\"name\": \"me\", \"role\": \"admin\", "
			  "\"token\": \"" ADMIN_TOK "\"}]}");
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	assert_who(ADMIN_TOK, DG_ROLE_ADMIN, "me");
}

Test(auth, generated_tokens_required_out_param)
{
	dg_auth_free(&auth);
	cr_assert_eq(dg_auth_init(&auth, &cfg, no_env, NULL, &err), -EINVAL);
	cr_assert(!exists(state_dir));
}

/* ---- Bearer ------------------------------------------------------------------------------ */

Test(auth, bearer_parsing)
{
	struct {
		const char *in, *tok;
	} good[] = {
		{ "Bearer " AGENT_TOK, AGENT_TOK },
		{ "bearer " AGENT_TOK, AGENT_TOK },
		{ "BEARER " AGENT_TOK, AGENT_TOK },
		{ "bEaReR x", "x" },
		{ "Bearer   " AGENT_TOK, AGENT_TOK }, /* RFC 7235: 1*SP */
		{ "Bearer a.b~c+/d=", "a.b~c+/d=" },
		{ "Bearer !#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *t = (const char *)1;
		size_t len = 99;
		cr_assert_eq(dg_auth_bearer(good[i].in, &t, &len), 0, "\"%s\" refused", good[i].in);
		cr_assert_eq(len, strlen(good[i].tok));
		cr_assert(strncmp(t, good[i].tok, len) == 0);
	}
	struct {
		const char *in;
		int rc;
	} bad[] = {
		{ NULL, -ENOENT },
		{ "", -ENOENT },
		{ "Bearer", -EINVAL },
		{ "Bearer ", -EINVAL },
		{ "Bearer    ", -EINVAL },
		{ "Bearer\t" AGENT_TOK, -EINVAL },
		{ "Bearer" AGENT_TOK, -EINVAL },
		{ " Bearer " AGENT_TOK, -EINVAL },
		{ "Bearer " AGENT_TOK " ", -EINVAL },
		{ "Bearer " AGENT_TOK "\t", -EINVAL },
		{ "Bearer " AGENT_TOK " x", -EINVAL },
		{ "Bearer " AGENT_TOK "\r\nX-Evil: 1", -EINVAL },
		{ "Bearer " AGENT_TOK ", Basic abc", -EINVAL },
		{ "Bearer tok\xc3\xa9", -EINVAL },
		{ "Bearer tok\x7f", -EINVAL },
		{ "Basic dXNlcjpwYXNz", -EINVAL },
		{ "Bearerx " AGENT_TOK, -EINVAL },
		{ "Token " AGENT_TOK, -EINVAL },
		{ AGENT_TOK, -EINVAL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *t = (const char *)1;
		size_t len = 99;
		int rc = dg_auth_bearer(bad[i].in, &t, &len);
		cr_assert_eq(rc, bad[i].rc, "\"%s\": rc %d", bad[i].in ? bad[i].in : "(null)", rc);
		cr_assert_null(t);
		cr_assert_eq(len, 0);
	}

	/* Length bound: DG_TOKEN_MAX is fine, one more is too long, however
	 * long the header goes on. */
	char h[8 + DG_TOKEN_MAX + 4096];
	memcpy(h, "Bearer ", 7);
	memset(h + 7, 'a', DG_TOKEN_MAX);
	h[7 + DG_TOKEN_MAX] = '\0';
	const char *t;
	size_t len;
	cr_assert_eq(dg_auth_bearer(h, &t, &len), 0);
	cr_assert_eq(len, DG_TOKEN_MAX);
	h[7 + DG_TOKEN_MAX] = 'a';
	h[8 + DG_TOKEN_MAX] = '\0';
	cr_assert_eq(dg_auth_bearer(h, &t, &len), -E2BIG);
	memset(h + 7, 'a', sizeof(h) - 8);
	h[sizeof(h) - 1] = '\0';
	cr_assert_eq(dg_auth_bearer(h, &t, &len), -E2BIG);
}

Test(auth, bearer_then_check)
{
	config(three_tokens);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	const char *t;
	size_t len;
	cr_assert_eq(dg_auth_bearer("bearer " VIEWER_TOK, &t, &len), 0);
	struct dg_principal who;
	cr_assert_eq(dg_auth_check(&auth, t, len, &who), 0);
	cr_assert_eq(who.role, DG_ROLE_VIEWER);
}

/* ---- subprotocol -------------------------------------------------------------------------- */

Test(auth, subprotocol_parsing)
{
	struct {
		const char *in, *tok;
	} good[] = {
		{ "deskgate.v1, bearer." AGENT_TOK, AGENT_TOK },
		{ "deskgate.v1,bearer." AGENT_TOK, AGENT_TOK },
		{ "bearer." AGENT_TOK ", deskgate.v1", AGENT_TOK },
		{ "  deskgate.v1 \t,\t bearer.abc  ", "abc" },
		{ "deskgate.v1, bearer.A-Z_a-z.0~9!#$%&'*+^`|", "A-Z_a-z.0~9!#$%&'*+^`|" },
		{ "binary, bearer." AGENT_TOK, AGENT_TOK },   /* the live view (noVNC) */
		{ "bearer.abc, binary", "abc" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *t = (const char *)1;
		size_t len = 99;
		int rc = dg_auth_subprotocol(good[i].in, &t, &len);
		cr_assert_eq(rc, 0, "\"%s\": rc %d", good[i].in, rc);
		cr_assert_eq(len, strlen(good[i].tok), "\"%s\"", good[i].in);
		cr_assert(strncmp(t, good[i].tok, len) == 0);
	}
	struct {
		const char *in;
		int rc;
	} bad[] = {
		{ NULL, -ENOENT },
		{ "", -ENOENT },
		{ "  ", -ENOENT },
		{ "deskgate.v1", -ENOENT },            /* credentials from a header */
		{ " deskgate.v1 ", -ENOENT },
		{ "bearer." AGENT_TOK, -EINVAL },      /* nothing the server may select */
		{ "deskgate.v1, bearer.", -EINVAL },
		{ "deskgate.v1, bearer " AGENT_TOK, -EINVAL },
		{ "deskgate.v1, Bearer." AGENT_TOK, -EINVAL },
		{ "deskgate.v1, bearer.a, bearer.b", -EINVAL },
		{ "deskgate.v1, deskgate.v1, bearer.a", -EINVAL },
		{ "binary, deskgate.v1, bearer.a", -EINVAL },  /* which one would be served? */
		{ "binary, binary, bearer.a", -EINVAL },
		{ "base64, bearer.a", -EINVAL },
		{ "binary", -ENOENT },
		{ "deskgate.v1, chat, bearer.a", -EINVAL },
		{ "deskgate.v2, bearer.a", -EINVAL },
		{ "DESKGATE.V1, bearer.a", -EINVAL },
		{ "deskgate.v1,, bearer.a", -EINVAL },
		{ "deskgate.v1, bearer.a,", -EINVAL },
		{ ",deskgate.v1, bearer.a", -EINVAL },
		{ "deskgate.v1; bearer.a", -EINVAL },
		{ "deskgate.v1, bearer.a/b", -EINVAL },  /* '/' is not a token character */
		{ "deskgate.v1, bearer.a=", -EINVAL },
		{ "deskgate.v1, bearer.a\"b", -EINVAL },
		{ "deskgate.v1, bearer.a\xc3\xa9", -EINVAL },
		{ "deskgate.v1, bearer.a\r\n", -EINVAL },
		{ "deskgate.v1\0, bearer.a", -ENOENT },  /* a NUL ends the value */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *t = (const char *)1;
		size_t len = 99;
		int rc = dg_auth_subprotocol(bad[i].in, &t, &len);
		cr_assert_eq(rc, bad[i].rc, "\"%s\": rc %d", bad[i].in ? bad[i].in : "(null)", rc);
		cr_assert_null(t);
		cr_assert_eq(len, 0);
	}

	char v[64 + DG_TOKEN_MAX];
	int n = snprintf(v, sizeof(v), "deskgate.v1, bearer.");
	memset(v + n, 'a', DG_TOKEN_MAX);
	v[n + DG_TOKEN_MAX] = '\0';
	const char *t;
	size_t len;
	cr_assert_eq(dg_auth_subprotocol(v, &t, &len), 0);
	cr_assert_eq(len, DG_TOKEN_MAX);
	v[n + DG_TOKEN_MAX] = 'a';
	v[n + DG_TOKEN_MAX + 1] = '\0';
	cr_assert_eq(dg_auth_subprotocol(v, &t, &len), -E2BIG);
	cr_assert_null(t);
}

Test(auth, generated_tokens_travel_in_the_subprotocol)
{
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	cr_assert_eq(gen.n, 3);
	for (size_t i = 0; i < 3; i++) {
		char v[128];
		snprintf(v, sizeof(v), DG_WS_PROTOCOL ", " DG_WS_BEARER_PREFIX "%s", gen.t[i].token);
		const char *t;
		size_t len;
		cr_assert_eq(dg_auth_subprotocol(v, &t, &len), 0, "%s", v);
		struct dg_principal who;
		cr_assert_eq(dg_auth_check(&auth, t, len, &who), 0);
		cr_assert_eq(who.role, gen.t[i].role);
	}
}

/* ---- session tokens -------------------------------------------------------------------------- */

Test(auth, session_tokens)
{
	char a[DG_TOKEN_GEN_LEN + 1], b[DG_TOKEN_GEN_LEN + 1];
	struct dg_session_token sa, sb;
	cr_assert_eq(dg_session_token_new(a, &sa, &err), 0);
	cr_assert_eq(dg_session_token_new(b, &sb, &err), 0);
	cr_assert_eq(strlen(a), DG_TOKEN_GEN_LEN);
	cr_assert(base64url_only(a));
	cr_assert_str_neq(a, b);

	cr_assert(dg_session_token_check(&sa, a, strlen(a)));
	cr_assert(dg_session_token_check(&sb, b, strlen(b)));
	cr_assert_not(dg_session_token_check(&sa, b, strlen(b)));
	cr_assert_not(dg_session_token_check(&sb, a, strlen(a)));
	char wrong[DG_TOKEN_GEN_LEN + 1];
	memcpy(wrong, a, sizeof(wrong));
	wrong[DG_TOKEN_GEN_LEN - 1] = wrong[DG_TOKEN_GEN_LEN - 1] == 'A' ? 'B' : 'A';
	cr_assert_not(dg_session_token_check(&sa, wrong, strlen(wrong)));
	cr_assert_not(dg_session_token_check(&sa, a, strlen(a) - 1));
	cr_assert_not(dg_session_token_check(&sa, a, 0));
	cr_assert_not(dg_session_token_check(&sa, NULL, 0));
	cr_assert_not(dg_session_token_check(NULL, a, strlen(a)));

	/* Session tokens are not gateway tokens. */
	config(three_tokens);
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	assert_nobody(a, strlen(a));
}

/* ---- permissions -------------------------------------------------------------------------------- */

Test(auth, permission_matrix)
{
	struct dg_principal agent = { .role = DG_ROLE_AGENT, .name = "ci-agent" };
	struct dg_principal other = { .role = DG_ROLE_AGENT, .name = "other-agent" };
	struct dg_principal viewer = { .role = DG_ROLE_VIEWER, .name = "alice" };
	struct dg_principal admin = { .role = DG_ROLE_ADMIN, .name = "ops" };
	struct dg_principal oper = { .role = DG_ROLE_OPERATOR, .name = "ci-agent" };
	struct dg_principal nobody = { .role = DG_ROLE_NONE, .name = "" };
	struct dg_principal unnamed = { .role = DG_ROLE_AGENT, .name = "" };

	const enum dg_permission perms[] = { DG_PERM_CREATE_SESSION, DG_PERM_ACT, DG_PERM_WATCH,
					     DG_PERM_READ_RECORDINGS, DG_PERM_APPROVE,
					     DG_PERM_ADMIN, DG_PERM_TAKEOVER };
	/* Expected with the session owned by "ci-agent": an operator named
	 * like the owner still does not act as its agent. */
	const struct {
		const struct dg_principal *p;
		bool may[7];
	} rows[] = {
		{ &agent, { true, true, false, false, false, false, false } },
		{ &other, { true, false, false, false, false, false, false } },
		{ &viewer, { false, false, true, true, true, false, false } },
		{ &oper, { false, false, true, true, true, false, true } },
		{ &admin, { true, true, true, true, true, true, true } },
		{ &nobody, { false, false, false, false, false, false, false } },
	};
	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++)
		for (size_t j = 0; j < 7; j++)
			cr_assert_eq(dg_auth_may(rows[r].p, perms[j], "ci-agent"), rows[r].may[j],
				     "%s \"%s\" perm %d", dg_role_name(rows[r].p->role),
				     rows[r].p->name, (int)perms[j]);

	/* Ownership: exact name only; no owner matches no agent; admin any. */
	cr_assert_not(dg_auth_may(&agent, DG_PERM_ACT, NULL));
	cr_assert_not(dg_auth_may(&agent, DG_PERM_ACT, "ci-agent2"));
	cr_assert_not(dg_auth_may(&agent, DG_PERM_ACT, "ci-agen"));
	cr_assert_not(dg_auth_may(&agent, DG_PERM_ACT, "CI-AGENT"));
	cr_assert_not(dg_auth_may(&agent, DG_PERM_ACT, ""));
	cr_assert_not(dg_auth_may(&unnamed, DG_PERM_ACT, ""));
	cr_assert(dg_auth_may(&admin, DG_PERM_ACT, NULL));
	cr_assert(dg_auth_may(&admin, DG_PERM_ACT, "anyone"));
	cr_assert_not(dg_auth_may(&viewer, DG_PERM_ACT, "alice"));
	cr_assert_not(dg_auth_may(NULL, DG_PERM_WATCH, NULL));
	cr_assert_not(dg_auth_may(&admin, (enum dg_permission)99, NULL));
	cr_assert_not(dg_auth_may(&viewer, (enum dg_permission)99, NULL));

	cr_assert_str_eq(dg_role_name(DG_ROLE_AGENT), "agent");
	cr_assert_str_eq(dg_role_name(DG_ROLE_VIEWER), "viewer");
	cr_assert_str_eq(dg_role_name(DG_ROLE_ADMIN), "admin");
	cr_assert_str_eq(dg_role_name(DG_ROLE_NONE), "none");
}

Test(auth, checked_principal_owns_by_name)
{
	config("{\"tokens\": [{\"name\": \"a1\", \"role\": \"agent\", \"token\": \"" AGENT_TOK "\"},"
	       " {\"name\": \"a2\", \"role\": \"agent\", \"token\": \"" AGENT2_TOK "\"}]}");
	cr_assert_eq(auth_init(no_env), 0, "%s", err.msg);
	struct dg_principal w1, w2;
	cr_assert_eq(dg_auth_check(&auth, AGENT_TOK, strlen(AGENT_TOK), &w1), 0);
	cr_assert_eq(dg_auth_check(&auth, AGENT2_TOK, strlen(AGENT2_TOK), &w2), 0);
	cr_assert_str_eq(w1.name, "a1");
	cr_assert_str_eq(w2.name, "a2");
	cr_assert(dg_auth_may(&w1, DG_PERM_ACT, w1.name));
	cr_assert_not(dg_auth_may(&w1, DG_PERM_ACT, w2.name));
	cr_assert_not(dg_auth_may(&w2, DG_PERM_ACT, w1.name));
}
