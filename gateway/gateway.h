/* gateway: the network-facing process of `deskgate serve`: HTTP and
 * WebSocket for agents and viewers, authentication, sessions and their
 * decisions and approvals, the links to the spawner, the workers, the egress
 * proxy (all through desktop/proto/proto.h) and the recordings.
 *
 * It includes no process folder's header and links none of the code that
 * runs as root: what `serve` does as root before it drops its privileges
 * (cleaning stale jails, fixing the egress proxy's options, forking the
 * spawner) is handed to it by cli/ (struct dg_serve_root).
 */
#ifndef DG_GATEWAY_H
#define DG_GATEWAY_H

#include <stdbool.h>

#include "base/base.h"
#include "desktop/proto/proto.h"
#include "policy/policy.h"

#define DG_EXIT_USAGE 2
#define DG_EXIT_FAILED 125

/* ---- `deskgate serve` (server.c) ----------------------------------------
 *
 * Its options are parsed by cli/ (cli/cli-serve.c), which calls
 * dg_gateway_serve with them. */

/* What `deskgate serve` was given on its command line; flags override the
 * configuration file. Strings are borrowed (argv). */
struct dg_serve_opts {
	const char *config, *listen, *policy, *recordings, *state_dir;
	bool verbose, new_tokens;
	const char *const *resolve; /* --test-resolve: at most DG_EGRESS_OVERRIDES_MAX */
	int n_resolve;
};

/* The root-only steps of the start, before the gateway drops its
 * privileges, given by the caller that links them (cli/: desktop/spawner and
 * desktop/egress): dg_instance_ids_claim, dg_jail_cleanup_stale,
 * dg_egress_configure and dg_spawner_start. */
struct dg_serve_root {
	int (*instance_ids_claim)(struct dg_err *err);
	int (*cleanup_stale)(struct dg_err *err);
	int (*egress_configure)(const struct dg_egress_opts *o, struct dg_err *err);
	int (*spawner_start)(struct dg_spawner *sp, bool verbose, struct dg_err *err);
};

/* Runs the gateway until SIGINT/SIGTERM: returns the exit status (0 stopped,
 * DG_EXIT_USAGE a bad configuration or policy, DG_EXIT_FAILED when it could
 * not start or lost its spawner), or -EINVAL for a usage error found after
 * parsing (options that exclude each other), with its message in usage: the
 * caller reports it with the command's usage line. */
int dg_gateway_serve(const struct dg_serve_opts *o, const struct dg_serve_root *root,
		     struct dg_err *usage);

/* ---- for the command-line tools (cli/) ----------------------------------- */

/* The text a recording keeps for the built-in default policy. */
#define DG_GW_BUILTIN_POLICY_TEXT "{\"version\": 1}"

/* Reads a policy file (path NULL or "": the built-in default) and keeps its
 * text (malloc'd), as the gateway does for a session (recording-link.c). */
int dg_gw_policy_load(const char *path, struct dg_policy *p, char **text, size_t *len,
		      struct dg_err *err);

/* ======================================================================== *
 * Configuration and authentication (gateway/config.c, gateway/auth.c)
 *
 * Conventions are the project's (base/base.h): functions return 0 or a
 * negative errno; on error a message naming the file and the key is written
 * to a struct dg_err. Loading is strict: an unknown key or a bad value is an
 * error, never ignored, so a typo cannot silently weaken the gateway.
 * ======================================================================== */

#include <stddef.h>
#include <stdint.h>

/* ---- The configuration file --------------------------------------------
 *
 * `deskgate serve --config FILE` reads one JSON object (at most
 * DG_CONFIG_FILE_MAX bytes, a regular file). Every key is optional; a key not
 * listed here is an error. Duplicate keys are errors. Paths in the file must
 * be absolute (a relative path would depend on the directory the server was
 * started from). Command-line flags override the file.
 *
 *   {
 *     "listen": "127.0.0.1:8470",
 *         Address and port the server binds: IPv4 as "A.B.C.D:PORT", IPv6 as
 *         "[ADDR]:PORT". No host names, no zone ids, port 1-65535 without
 *         leading zeros. Default 127.0.0.1:8470. Flag: --listen.
 *     "public_url": "https://deskgate.example.com",
 *         Base of the URLs the server hands to clients (session WebSocket
 *         URLs), when it sits behind a proxy or a DNS name: http:// or
 *         https://, a host, an optional port and path, no user, query or
 *         fragment; one trailing '/' is dropped. WebSocket URLs use ws:// or
 *         wss:// accordingly. Default: http://LISTEN, or https://LISTEN with
 *         tls.
 *     "tls": {"cert": "/etc/deskgate/cert.pem", "key": "/etc/deskgate/key.pem"},
 *         PEM certificate (chain) and private key: both or neither; each must
 *         be a readable regular file when the configuration is loaded. With
 *         tls the server speaks only HTTPS/WSS.
 *     "tokens": [
 *       {"name": "ci-agent", "role": "agent", "token": "<at least 24 characters>"},
 *       {"name": "alice", "role": "viewer", "token_sha256": "<64 hex digits>"}
 *     ],
 *         Who may connect (at most DG_TOKENS_MAX entries). name: unique,
 *         1-64 of [A-Za-z0-9._-]; it owns the sessions created with the
 *         token. role: "agent" (create sessions, act on its own), "viewer"
 *         (watch sessions, read recordings, approve actions), "operator"
 *         (a viewer who may also take control of a session: takeover.c)
 *         or "admin" (everything). Exactly one of token (the secret itself:
 *         DG_TOKEN_MIN to DG_TOKEN_MAX printable ASCII characters, no
 *         spaces; to be sent in the WebSocket subprotocol it must also avoid
 *         the HTTP separators ()<>@,;:\"/[]?={}; a base64url string
 *         such as `openssl rand -base64 32 | tr +/ -_ | tr -d =` fits
 *         everywhere) or token_sha256 (its SHA-256 in hex, e.g. from
 *         `printf %s "$TOKEN" | sha256sum`, so the file holds no secret).
 *         Only the hash is kept in memory either way. The same token under
 *         two names is an error.
 *         Tokens also come from the environment: DESKGATE_AGENT_TOKEN,
 *         DESKGATE_VIEWER_TOKEN, DESKGATE_ADMIN_TOKEN, DESKGATE_OPERATOR_TOKEN
 *         (names env-agent, env-viewer, env-admin, env-operator). With no
 *         token in the file nor in the environment, the first start
 *         generates one token per role but operator, prints
 *         them once, and keeps their hashes in STATE_DIR/tokens.json (mode
 *         0600; delete it to generate new tokens).
 *     "policy": "/etc/deskgate/policy.json",
 *         The policy of sessions that do not ask for a named one. Default:
 *         the built-in default policy. Flag: --policy.
 *     "policies": {"strict": "/etc/deskgate/strict.json"},
 *         Named policies a session may ask for at creation (at most
 *         DG_POLICIES_MAX; names 1-32 of [a-z0-9_-]; "default" is reserved
 *         for the policy above).
 *     "recordings": "/var/lib/deskgate/recordings",
 *         Directory of session recordings. Flag: --recordings.
 *     "state_dir": "/var/lib/deskgate",
 *         The gateway's own state (generated tokens, the recording key, the
 *         last audit of each policy). Flag: --state-dir.
 *     "instance": "gw-1",
 *         This gateway's name on the host (see dg_instance in
 *         desktop/proto/proto.h: 1-32 of [a-z0-9-]): its jails' cgroups and slot
 *         locks carry it, so gateways beside each other keep apart, and its
 *         session ids begin with it, so a balancer routes by them. Default:
 *         DESKGATE_INSTANCE from the environment, else the host name.
 *     "capacity": {"agent_check": "127.0.0.1:8471", "drain": false},
 *         For a balancer in front of several gateways (docs/scale-out.md):
 *         agent_check, where HAProxy's agent-check reads this host's free
 *         capacity (a line, then close; default: off); drain, no new session
 *         here (503) while the live ones go on (default false).
 *     "limits": {
 *       "max_sessions": 20,            sessions at once, all agents together
 *       "max_message_bytes": 1048576,  largest WebSocket message or HTTP body accepted
 *       "max_pending_actions": 4,      actions queued on one session before refusals
 *       "idle_seconds": 600,           a session with no action for this long ends
 *       "session_seconds": 3600,       a session's lifetime (the policy's
 *                                      limits.session_seconds also applies;
 *                                      the shorter wins)
 *       "disconnect_grace_seconds": 30,  after the agent's WebSocket closes, the
 *                                      session waits this long for a reconnect
 *                                      (0: ends at once)
 *       "max_observers": 8,            watchers of one session (0: none)
 *       "handshake_seconds": 10,       a connection must finish its HTTP request
 *                                      or WebSocket upgrade within this time
 *       "actions_per_second": 50,      per session; above it actions are refused
 *       "approval_seconds": 120,       an action the policy asks about waits this
 *                                      long for a viewer's or admin's approval;
 *                                      then it is refused
 *       "takeover_seconds": 300,       an operator holds a session's control at
 *                                      most this long, then it returns to the agent
 *       "takeover_idle_seconds": 60,   ... or after this long without an operator
 *                                      action
 *       "recording_fsync_ms": 1000,    recordings reach the disk at most this
 *                                      long after an event (0: after every event)
 *       "retention_days": 30,          recordings older than this are deleted,
 *       "retention_mb": 10240,         then the oldest until all fit (0: no limit;
 *                                      a live session's recording is never deleted)
 *       "warm_xterm": 0,               desktops of each profile kept started ahead
 *       "warm_browser": 0              (the warm pool): a session of the default
 *                                      size and policy takes one in milliseconds
 *     }
 *   }
 *
 * Every limit has a default, a minimum and a maximum below; a value outside
 * [MIN, MAX], or not an integer, is refused naming the key.
 */
#define DG_CONFIG_FILE_MAX (256 * 1024) /* bytes of a configuration file */
#define DG_CONFIG_PATH_MAX 4096         /* bytes of a path, NUL included (PATH_MAX) */
#define DG_CONFIG_INSTANCE_MAX 32       /* = DG_INSTANCE_MAX (desktop/proto/proto.h) */
#define DG_LISTEN_MAX 64                /* bytes of "[ADDR]:PORT", NUL included */
#define DG_PUBLIC_URL_MAX 512           /* bytes of public_url, NUL included */
#define DG_TOKENS_MAX 256               /* entries of "tokens" */
#define DG_TOKEN_NAME_MAX 64            /* characters of a token's name */
#define DG_TOKEN_MIN 24                 /* characters of a token in clear */
#define DG_TOKEN_MAX 256                /* characters of a token, also when presented */
#define DG_POLICIES_MAX 64              /* entries of "policies" */
#define DG_POLICY_NAME_MAX 32           /* characters of a policy's name */

#define DG_CONFIG_DEFAULT_LISTEN "127.0.0.1:8470"
#define DG_CONFIG_DEFAULT_RECORDINGS "/var/lib/deskgate/recordings"
#define DG_CONFIG_DEFAULT_STATE_DIR "/var/lib/deskgate"

#define DG_GW_MAX_SESSIONS_DEFAULT 20
#define DG_GW_MAX_SESSIONS_MIN 1
#define DG_GW_MAX_SESSIONS_MAX 1000
#define DG_GW_MAX_MESSAGE_BYTES_DEFAULT (1024 * 1024)
#define DG_GW_MAX_MESSAGE_BYTES_MIN 4096             /* the largest action must fit */
#define DG_GW_MAX_MESSAGE_BYTES_MAX (64 * 1024 * 1024)
#define DG_GW_MAX_PENDING_ACTIONS_DEFAULT 4
#define DG_GW_MAX_PENDING_ACTIONS_MIN 1
#define DG_GW_MAX_PENDING_ACTIONS_MAX 64
#define DG_GW_IDLE_SECONDS_DEFAULT 600
#define DG_GW_IDLE_SECONDS_MIN 1
#define DG_GW_IDLE_SECONDS_MAX (7 * 24 * 3600)
#define DG_GW_SESSION_SECONDS_DEFAULT 3600
#define DG_GW_SESSION_SECONDS_MIN 1
#define DG_GW_SESSION_SECONDS_MAX (7 * 24 * 3600)
#define DG_GW_DISCONNECT_GRACE_SECONDS_DEFAULT 30
#define DG_GW_DISCONNECT_GRACE_SECONDS_MIN 0
#define DG_GW_DISCONNECT_GRACE_SECONDS_MAX 3600
#define DG_GW_MAX_OBSERVERS_DEFAULT 8
#define DG_GW_MAX_OBSERVERS_MIN 0
#define DG_GW_MAX_OBSERVERS_MAX 256
#define DG_GW_HANDSHAKE_SECONDS_DEFAULT 10
#define DG_GW_HANDSHAKE_SECONDS_MIN 1
#define DG_GW_HANDSHAKE_SECONDS_MAX 300
#define DG_GW_APPROVAL_SECONDS_DEFAULT 120
#define DG_GW_APPROVAL_SECONDS_MIN 1
#define DG_GW_APPROVAL_SECONDS_MAX (24 * 3600)
#define DG_GW_TAKEOVER_SECONDS_DEFAULT 300
#define DG_GW_TAKEOVER_SECONDS_MIN 1
#define DG_GW_TAKEOVER_SECONDS_MAX (24 * 3600)
#define DG_GW_TAKEOVER_IDLE_SECONDS_DEFAULT 60
#define DG_GW_TAKEOVER_IDLE_SECONDS_MIN 1
#define DG_GW_TAKEOVER_IDLE_SECONDS_MAX (24 * 3600)
#define DG_GW_RECORDING_FSYNC_MS_DEFAULT 1000
#define DG_GW_RECORDING_FSYNC_MS_MIN 0
#define DG_GW_RECORDING_FSYNC_MS_MAX 60000
#define DG_GW_RETENTION_DAYS_DEFAULT 30
#define DG_GW_RETENTION_DAYS_MIN 0
#define DG_GW_RETENTION_DAYS_MAX 36500
#define DG_GW_RETENTION_MB_DEFAULT 10240
#define DG_GW_RETENTION_MB_MIN 0
#define DG_GW_RETENTION_MB_MAX (1024u * 1024 * 1024)
#define DG_GW_WARM_XTERM_DEFAULT 0
#define DG_GW_WARM_XTERM_MIN 0
#define DG_GW_WARM_XTERM_MAX 64      /* DG_SPAWNER_POOL_MAX */
#define DG_GW_WARM_BROWSER_DEFAULT 0
#define DG_GW_WARM_BROWSER_MIN 0
#define DG_GW_WARM_BROWSER_MAX 64
#define DG_GW_ACTIONS_PER_SECOND_DEFAULT 50
#define DG_GW_ACTIONS_PER_SECOND_MIN 1
#define DG_GW_ACTIONS_PER_SECOND_MAX 100000

/* The gateway's own limits ("limits" of the configuration file). */
struct dg_gw_limits {
	uint32_t max_sessions;
	uint32_t max_message_bytes;
	uint32_t max_pending_actions;
	uint32_t idle_seconds;
	uint32_t session_seconds;
	uint32_t disconnect_grace_seconds;
	uint32_t max_observers;
	uint32_t handshake_seconds;
	uint32_t actions_per_second;
	uint32_t approval_seconds;
	uint32_t takeover_seconds;
	uint32_t takeover_idle_seconds;
	uint32_t recording_fsync_ms;
	uint32_t retention_days;
	uint32_t retention_mb;
	uint32_t warm_xterm;
	uint32_t warm_browser;
};

enum dg_role {
	DG_ROLE_NONE = 0, /* not authenticated */
	DG_ROLE_AGENT,
	DG_ROLE_VIEWER,
	DG_ROLE_ADMIN,
	DG_ROLE_OPERATOR, /* a viewer who may also take control of a session (takeover.c) */
};

#define DG_SHA256_LEN 32

/* A token as the configuration keeps it: its hash, never the secret. */
struct dg_config_token {
	char name[DG_TOKEN_NAME_MAX + 1];
	enum dg_role role;
	unsigned char sha256[DG_SHA256_LEN];
};

struct dg_config_policy {
	char name[DG_POLICY_NAME_MAX + 1];
	char path[DG_CONFIG_PATH_MAX];
};

/* The effective configuration. Strings are always NUL-terminated; an empty
 * string means "not set" where a field is optional (public_url, tls_cert,
 * tls_key, policy). tokens and policies are owned (dg_config_free). */
/* "object_store": recordings uploaded to an S3-compatible bucket once
 * sealed, and served from it when not on this host (docs/recordings.md). */
#define DG_CONFIG_CACHE_MB_DEFAULT 1024  /* object_store.cache_mb */
#define DG_CONFIG_CACHE_MB_MIN 1
#define DG_CONFIG_CACHE_MB_MAX (1024 * 1024)
struct dg_config_store {
	char store[DG_CONFIG_PATH_MAX];   /* the store file (recordings.h, dg_rec_s3_load);
					     "": no object store */
	bool keep_local;                  /* keep the local copy once the upload is confirmed */
	uint32_t cache_mb;                /* bound of STATE_DIR/bucket-cache */
};

struct dg_config {
	char listen[DG_LISTEN_MAX];       /* canonical "A.B.C.D:PORT" or "[ADDR]:PORT" */
	char listen_addr[DG_LISTEN_MAX];  /* canonical address without brackets */
	int listen_family;                /* AF_INET or AF_INET6 */
	uint16_t listen_port;
	char public_url[DG_PUBLIC_URL_MAX];
	char tls_cert[DG_CONFIG_PATH_MAX];
	char tls_key[DG_CONFIG_PATH_MAX];
	char policy[DG_CONFIG_PATH_MAX];
	char recordings[DG_CONFIG_PATH_MAX];
	char state_dir[DG_CONFIG_PATH_MAX];
	char instance[DG_CONFIG_INSTANCE_MAX + 1]; /* "": not set */
	char agent_check[DG_LISTEN_MAX];  /* capacity.agent_check, canonical; "": off */
	char agent_check_addr[DG_LISTEN_MAX];
	int agent_check_family;
	uint16_t agent_check_port;
	bool drain;                       /* capacity.drain: no new session here */
	struct dg_gw_limits limits;
	struct dg_config_store object_store;
	struct dg_config_token *tokens;
	size_t n_tokens;
	struct dg_config_policy *policies;
	size_t n_policies;
};

/* Fills cfg with the built-in defaults (no file). Never fails; cfg's previous
 * contents are overwritten, not freed. */
void dg_config_default(struct dg_config *cfg);

/* Parses a configuration from JSON text of len bytes over the defaults.
 * origin names the source in messages ("config ORIGIN: KEY: ..."). cfg is an
 * output: on success it is overwritten (its previous contents are not
 * freed; dg_config_free a loaded config before reusing it); on error it is
 * left untouched. tls files are checked for readability here. Token secrets
 * are hashed and the clear text wiped from the parser's memory.
 * Returns 0 or -EINVAL, -E2BIG, -ENOMEM. */
int dg_config_parse(const char *text, size_t len, const char *origin, struct dg_config *cfg,
		    struct dg_err *err);

/* Reads (at most DG_CONFIG_FILE_MAX bytes of a regular file) and parses the
 * configuration file at path, as dg_config_parse. */
int dg_config_load(const char *path, struct dg_config *cfg, struct dg_err *err);

/* Frees what a loaded configuration owns and resets those fields; safe on a
 * defaulted or already freed config. */
void dg_config_free(struct dg_config *cfg);

/* Setters for command-line overrides: validate like the file does and leave
 * cfg unchanged on error (-EINVAL, message "--listen: ..."). Paths from the
 * command line may be relative (to the current directory). */
int dg_config_set_listen(struct dg_config *cfg, const char *addr_port, struct dg_err *err);
int dg_config_set_policy(struct dg_config *cfg, const char *path, struct dg_err *err);
int dg_config_set_recordings(struct dg_config *cfg, const char *path, struct dg_err *err);
int dg_config_set_state_dir(struct dg_config *cfg, const char *path, struct dg_err *err);

/* The base URL handed to clients, without trailing '/': public_url if set,
 * else http(s)://LISTEN. With websocket set, the scheme is ws:// or wss://.
 * Returns 0 or -ENAMETOOLONG when out (len bytes) is too small. */
int dg_config_base_url(const struct dg_config *cfg, bool websocket, char *out, size_t len);

/* The path of the named policy, "" for "default" (the top-level policy, which
 * may itself be "" = built-in), or NULL when no such name is configured. */
const char *dg_config_policy_path(const struct dg_config *cfg, const char *name);

/* ---- Authentication ----------------------------------------------------
 *
 * Tokens are known by their SHA-256 only. A presented token is hashed and
 * compared with every known hash in constant time (CRYPTO_memcmp, no early
 * exit), so timing tells neither whether nor which token matched.
 */
#define DG_TOKEN_GEN_BYTES 32 /* random bytes of a generated token */
#define DG_TOKEN_GEN_LEN 43   /* its base64url form, no padding */
#define DG_TOKENS_FILE "tokens.json"
#define DG_TOKENS_FILE_MAX (64 * 1024)
#define DG_ENV_AGENT_TOKEN "DESKGATE_AGENT_TOKEN"
#define DG_ENV_VIEWER_TOKEN "DESKGATE_VIEWER_TOKEN"
#define DG_ENV_ADMIN_TOKEN "DESKGATE_ADMIN_TOKEN"
#define DG_ENV_OPERATOR_TOKEN "DESKGATE_OPERATOR_TOKEN" /* never generated */

/* WebSocket authentication by subprotocol, for clients (browsers) that cannot
 * set headers: the client offers
 *     Sec-WebSocket-Protocol: deskgate.v1, bearer.<token>
 * and the server selects DG_WS_PROTOCOL alone; the bearer entry is never
 * echoed. */
#define DG_WS_PROTOCOL "deskgate.v1"
#define DG_WS_BEARER_PREFIX "bearer."
/* The live view (GET /v1/sessions/{id}/vnc) speaks binary RFB under the
 * subprotocol noVNC and websockify ask for; it takes the place of
 * DG_WS_PROTOCOL in the list above. */
#define DG_WS_RFB_PROTOCOL "binary"

/* Who is calling: the role and the token's name (the owner of the sessions
 * it creates). role DG_ROLE_NONE and name "" when not authenticated. */
struct dg_principal {
	enum dg_role role;
	char name[DG_TOKEN_NAME_MAX + 1];
};

/* Where a known token came from. */
enum dg_token_source {
	DG_TOKEN_FROM_CONFIG = 1,
	DG_TOKEN_FROM_ENV,
	DG_TOKEN_FROM_STATE, /* STATE_DIR/tokens.json, generated by an earlier start */
	DG_TOKEN_GENERATED,  /* generated by this dg_auth_init */
};

struct dg_auth_entry {
	struct dg_config_token t;
	enum dg_token_source source;
};

/* The known tokens. Read-only once built; owned (dg_auth_free). */
struct dg_auth {
	struct dg_auth_entry *entries;
	size_t n;
};

/* Tokens generated on the first start, in clear, for the caller to print
 * once. Wipe with dg_auth_generated_wipe as soon as they are printed. */
struct dg_generated_token {
	enum dg_role role;
	char name[DG_TOKEN_NAME_MAX + 1];
	char token[DG_TOKEN_GEN_LEN + 1];
};
struct dg_auth_generated {
	size_t n; /* 0, or 3 (agent, viewer, admin) */
	struct dg_generated_token t[3];
};

/* Builds the known tokens: cfg->tokens, then the DESKGATE_*_TOKEN variables
 * of envp (NULL: the process environment). A variable that is set must hold
 * a valid token (empty is an error: an unset variable in a container file
 * must not silently fall back to generated tokens). When neither gives any
 * token, STATE_DIR/tokens.json is loaded if it exists (refused unless a
 * regular file owned by the effective uid with no group/other permission
 * bits), else one token per role is generated, its hash stored there
 * atomically (dir created 0700 if missing, file 0600) and the clear tokens
 * returned in *gen (gen->n is 0 otherwise). gen must not be NULL.
 * Names must be unique across all sources, and so must tokens.
 * Returns 0 or a negative errno with a message. */
int dg_auth_init(struct dg_auth *a, const struct dg_config *cfg, const char *const *envp,
		 struct dg_auth_generated *gen, struct dg_err *err);
void dg_auth_free(struct dg_auth *a);
void dg_auth_generated_wipe(struct dg_auth_generated *gen);

/* Checks a presented token (len bytes, need not be NUL-terminated) against
 * every known token in constant time. Returns 0 and fills who on a match;
 * -EACCES (who->role DG_ROLE_NONE, name "") otherwise, including for an empty
 * or over-long token. */
int dg_auth_check(const struct dg_auth *a, const char *presented, size_t len,
		  struct dg_principal *who);

/* Parses an Authorization header value: "Bearer" (any case), one or more
 * spaces, a token of 1 to DG_TOKEN_MAX printable ASCII characters without
 * spaces, nothing after. On success *token points into header_value.
 * Returns 0, -ENOENT (NULL or empty: no credentials), -E2BIG (token too
 * long) or -EINVAL (anything else: another scheme, tabs, trailing data). */
int dg_auth_bearer(const char *header_value, const char **token, size_t *len);

/* Parses a Sec-WebSocket-Protocol value (a comma-separated list of RFC 7230
 * tokens, optional spaces/tabs around commas). Allowed entries: DG_WS_PROTOCOL
 * or DG_WS_RFB_PROTOCOL (exactly one of them, once) and at most one
 * "bearer.<token>" (token of 1 to
 * DG_TOKEN_MAX token characters). Any other entry, an empty entry or a
 * repeated one is refused: our clients send exactly this list, and a typo
 * ("Bearer.x", "bearer x") should fail loudly, not as a puzzling 401.
 * Returns 0 with *token and *len set (pointing into value); -ENOENT when
 * value is NULL or empty, or lists DG_WS_PROTOCOL without a bearer entry
 * (*token NULL: the credentials must come from a header); -E2BIG; -EINVAL. */
int dg_auth_subprotocol(const char *value, const char **token, size_t *len);

/* Per-session tokens: issued once at session creation, kept as a hash. */
struct dg_session_token {
	unsigned char sha256[DG_SHA256_LEN];
};
/* Generates a token (DG_TOKEN_GEN_BYTES from getrandom, base64url) into out
 * (DG_TOKEN_GEN_LEN + 1 bytes) and its hash into st. Returns 0 or -errno. */
int dg_session_token_new(char out[DG_TOKEN_GEN_LEN + 1], struct dg_session_token *st,
			 struct dg_err *err);
/* SHA-256 of len bytes (config.c). */
void dg_sha256(const void *data, size_t len, unsigned char out[DG_SHA256_LEN]);

/* Constant-time check of a presented session token. */
bool dg_session_token_check(const struct dg_session_token *st, const char *presented,
			    size_t len);

enum dg_permission {
	DG_PERM_CREATE_SESSION, /* POST /v1/sessions: agent, admin */
	DG_PERM_ACT,            /* act on, or delete, a session: its owner agent, admin */
	DG_PERM_WATCH,          /* observe a session: viewer, admin */
	DG_PERM_READ_RECORDINGS, /* viewer, admin */
	DG_PERM_APPROVE,        /* answer an "ask" decision: viewer, admin; never an agent,
				   which would approve its own actions */
	DG_PERM_ADMIN,          /* admin only */
	DG_PERM_TAKEOVER,       /* take control of a session from its agent: operator, admin */
};

/* Whether p may do perm. owner_name is the name of the session's owner, used
 * by DG_PERM_ACT (an agent only acts on sessions it owns; NULL matches no
 * agent). NULL p, DG_ROLE_NONE or an unknown perm: false. */
bool dg_auth_may(const struct dg_principal *p, enum dg_permission perm, const char *owner_name);

/* "agent", "viewer", "operator", "admin", or "none". */
const char *dg_role_name(enum dg_role role);

#endif
