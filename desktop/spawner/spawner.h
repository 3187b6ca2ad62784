/* desktop: the jail (namespaces, mounts, cgroups, seccomp) and what runs in it.
 *
 * One mechanism serves both code execution (`deskgate exec`, the `exec`
 * action) and, later, the desktop itself. Only a privileged process (today the
 * `deskgate exec` process itself, later the spawner) may call dg_jail_start:
 * it creates cgroups and writes uid maps.
 */
#ifndef DG_DESKTOP_H
#define DG_DESKTOP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "policy/policy.h"

/* Host uids/gids given to jails: slot N maps the jail's user to
 * DG_JAIL_ID_BASE + N on the host. The range is far above ordinary and
 * subordinate (/etc/subuid) ranges, so the ids own no files on the host. */
#define DG_JAIL_ID_BASE 0x60000000u
#define DG_JAIL_SLOTS 65536u

/* The user the jailed program runs as, seen from inside. */
#define DG_JAIL_INNER_UID 1000u
#define DG_JAIL_INNER_GID 1000u
#define DG_JAIL_HOME "/home/user"
#define DG_JAIL_HOSTNAME "deskgate"
/* The jail's PID 1 as seen from inside (/proc/1/cmdline and comm): nothing
 * of the host's command line. */
#define DG_JAIL_INIT_NAME "deskgate-init"

/* The instance: the name of one deskgate (a gateway, an exec, a test run) on
 * this host. Slots (and so uids) are shared by every instance on a host
 * through the slot locks; the instance says whose a jail is: its cgroups
 * live under deskgate/<instance>/, its slot lock names it, its worker
 * carries it (argv), so that instances beside each other (a user's gateway,
 * CI, a second gateway) never take each other's jails for their own.
 * Grammar: [a-z0-9][a-z0-9-]*, at most DG_INSTANCE_MAX bytes, not starting
 * with "jail-". */
#define DG_INSTANCE_MAX 32
#define DG_INSTANCE_ENV "DESKGATE_INSTANCE"
#define DG_INSTANCE_FALLBACK "deskgate"

bool dg_instance_valid(const char *id);

/* Sets this process's instance; -EINVAL (err says why) for a bad name.
 * Call before the first jail starts. */
int dg_instance_set(const char *id, struct dg_err *err);

/* Chooses the instance from the environment: DESKGATE_INSTANCE when set
 * (-EINVAL when it is not a valid name), else the host name made valid
 * (lowercase, other bytes as '-', cut at DG_INSTANCE_MAX), else
 * DG_INSTANCE_FALLBACK. Programs call it once at start. */
int dg_instance_init(struct dg_err *err);

/* This process's instance (dg_instance_init's choice when nothing set it). */
const char *dg_instance(void);

/* Where jail slot locks live; overridable for tests with DESKGATE_RUN_DIR.
 * A held lock file's content is "<instance>\n" of its holder (after the
 * holder has released it: of its last holder). */
#define DG_RUN_DIR_DEFAULT "/run/deskgate"

/* Second-line rlimits inside the jail. */
#define DG_JAIL_NOFILE 4096
/* Extra descriptors a caller may hand into a jail (as fds 3, 4, ...). */
#define DG_JAIL_PASS_FDS_MAX 8
/* Extra environment entries a caller may add (NAME=value each). */
#define DG_JAIL_ENV_MAX 16
#define DG_JAIL_ENV_ENTRY_MAX 1024
/* Where progs[0] finds its readiness descriptor (see dg_jail_spec): high
 * enough that programs which shuffle their low descriptors (Xvnc in inetd
 * mode moves its socket to fd 3) leave it alone. */
#define DG_JAIL_READY_FD (3 + DG_JAIL_PASS_FDS_MAX + 4)
/* Programs one jail may start (an X server and its clients). */
#define DG_JAIL_PROGS_MAX 4
/* How long init waits for the first program to say it is ready. */
#define DG_JAIL_READY_TIMEOUT_MS 10000

/* One program started by the jail's init. */
struct dg_jail_prog {
	const char *const *argv;          /* argv[0]: a path inside the jail, or a name
					   * looked up in the jail's PATH */
	int stdin_fd, stdout_fd, stderr_fd; /* become 0, 1, 2 in the jail; -1: /dev/null */
	const int *pass_fds;              /* become 3, 4, ... in the jail */
	int n_pass_fds;
	const char *const *env_extra;     /* NAME=value, added to the allowlist env */
	const char *cwd;                  /* inside the jail; NULL: home */
};

/* A file generated in the jail's /etc (path relative to it, [a-z0-9._-/]
 * only, missing directories created): fixed text chosen by the caller,
 * never the host's, e.g. Chromium's managed policy. */
#define DG_JAIL_FILES_MAX 4
#define DG_JAIL_FILE_PATH_MAX 128
#define DG_JAIL_FILE_TEXT_MAX (64 * 1024)
struct dg_jail_file {
	const char *path;
	const char *text;
};

/* The egress listener: with spec->egress, the starter creates a TCP socket
 * listening on DG_JAIL_EGRESS_ADDR:DG_JAIL_EGRESS_PORT inside the jail's
 * network namespace before any program runs, and keeps it (j->egress_fd) for
 * the egress proxy to serve. It is the only way out of the jail. */
#define DG_JAIL_EGRESS_ADDR "127.0.0.1"
#define DG_JAIL_EGRESS_PORT 3128
#define DG_JAIL_EGRESS_URL "http://127.0.0.1:3128"
#define DG_JAIL_EGRESS_BACKLOG 128

/* progs[0] is the main program: the jail ends when it exits, with its
 * status. With wait_ready, progs[0] gets one more descriptor, number
 * DG_JAIL_READY_FD, and progs[1..] start only once it wrote a line there:
 * the X server's `-displayfd N` readiness report. */
struct dg_jail_spec {
	const struct dg_limits *limits;
	const struct dg_jail_prog *progs;
	int n_progs;
	bool wait_ready;
	const struct dg_jail_file *etc_files;
	int n_etc_files;
	bool egress;
};

/* A running jail. Owned by the process that started it: only that process
 * may wait for, kill or destroy it. */
struct dg_jail {
	pid_t pid;          /* the jail's init, in the caller's pid namespace */
	int pidfd;          /* pidfd of init; readable when it exits */
	uint32_t slot;      /* host uid/gid = DG_JAIL_ID_BASE + slot */
	int lock_fd;        /* flock held on the slot for the jail's life */
	int life_fd;        /* write end of a pipe init watches: closed = parent gone */
	int egress_fd;      /* with spec->egress: the listener in the jail's network
			     * namespace (owned; hand it to the proxy); else -1 */
	void *cgroup;       /* struct dg_cgroup *, owned */
	bool reaped;
	int status;         /* wait status of init once reaped */
	int start_exit;     /* when dg_jail_start failed inside the jail: the exit
			     * code to report (125 setup, 126 not executable,
			     * 127 not found); 0 otherwise */
};

/* What ended a jail, for the one-line reasons `exec` prints. */
struct dg_jail_verdict {
	bool oom_killed;     /* the memory cgroup killed something */
	bool pids_capped;    /* a fork failed at the pids limit */
	bool timed_out;      /* the wall-clock limit ended it (set by the caller) */
};

/* Starts the spec's programs in a fresh jail. Returns once every program was
 * executed (or failed to be): 0 and j filled, or a negative errno with err
 * naming what failed (mount, cgroup, exec path, readiness, ...). */
int dg_jail_start(const struct dg_jail_spec *spec, struct dg_jail *j, struct dg_err *err);

/* Kills every process of the jail (init first, then the cgroup). Idempotent. */
int dg_jail_kill(struct dg_jail *j);

/* Reaps init if it has exited; returns 1 when reaped, 0 when still running. */
int dg_jail_try_reap(struct dg_jail *j);

/* Reads what the cgroup saw (OOM kills, pids cap hits). */
int dg_jail_verdict(const struct dg_jail *j, struct dg_jail_verdict *v);

/* Kills what is left, removes the cgroup, releases the slot. Idempotent;
 * leaves no process, mount or cgroup behind. */
int dg_jail_destroy(struct dg_jail *j);

/* Runs prog inside the running jail j: its cgroup, namespaces, user, limits
 * and seccomp filter (the exec action, beside the desktop). Returns 0 and the
 * pid of a supervisor that exits with the program's status (SIGTERM to it
 * kills the program's process group), or a negative errno: -ENOENT / -EACCES
 * when the program cannot be found / executed, with err saying so. Only the
 * jail's owner may call it. */
int dg_jail_enter(const struct dg_jail *j, const struct dg_jail_prog *prog,
		  const struct dg_limits *lim, pid_t *pid, struct dg_err *err);

/* Removes jails whose owner died (its slot lock is free): kills their
 * processes and removes their cgroups. Run at every start. Returns how many
 * were removed, or a negative errno. */
int dg_jail_cleanup_stale(struct dg_err *err);

/* ---- Desktops: a jail running Xvnc and the profile's programs ---- */

enum dg_profile { DG_PROFILE_XTERM = 0, DG_PROFILE_BROWSER = 1 };

#define DG_DESKTOP_WIDTH_DEFAULT 1280
#define DG_DESKTOP_HEIGHT_DEFAULT 800
#define DG_DESKTOP_WIDTH_MIN 320
#define DG_DESKTOP_HEIGHT_MIN 200
#define DG_DESKTOP_WIDTH_MAX 3840
#define DG_DESKTOP_HEIGHT_MAX 2160
/* Every desktop is display :0 of its own jail: X sockets, abstract ones
 * included, are private to the jail's mount and network namespaces. */
#define DG_DESKTOP_DISPLAY ":0"
#define DG_DESKTOP_URL_MAX 8192

/* What of a desktop programs run by exec never see (unless the policy's
 * limits.exec_desktop): the X server's socket directory, the browser's
 * profile (its user data dir) and cache, and the browser's own
 * directories in /tmp and /dev/shm (its singleton socket). See
 * desktop/jail-enter.c. */
#define DG_DESKTOP_X11_DIR "/tmp/.X11-unix"
#define DG_DESKTOP_BROWSER_DIR DG_JAIL_HOME "/.chromium"
#define DG_DESKTOP_BROWSER_CACHE_DIR DG_JAIL_HOME "/.cache/chromium"
/* Chromium's temporary directories (its singleton socket lives in one):
 * this prefix, or a dot and this prefix. */
#define DG_DESKTOP_BROWSER_TMP_PREFIX "org.chromium."
/* Most directories of one kind hidden (a jail that made more is refused
 * exec rather than half hidden). */
#define DG_JAIL_HIDE_MAX 64

struct dg_desktop_spec {
	enum dg_profile profile;
	int width, height;
	const struct dg_limits *limits;
	const char *start_url;   /* browser: first page; NULL: about:blank */
	/* browser: Chromium's managed policy refuses every navigation to a
	 * scheme other than http and https (data:, file:, javascript:, blob:,
	 * chrome:, external protocols), every download and every file dialog.
	 * The gateway sets it whenever the session's policy has rules; without
	 * it (a rules-less policy: everything allowed) data: pages work. */
	bool strict;
	/* Create the egress listener (dg_jail_spec.egress): set by the spawner,
	 * whose gateway runs the proxy. Without it the jail has no listener at
	 * all and every connection is refused at once. */
	bool egress;
	bool log_to_stderr;      /* the desktop's programs log to our stderr */
};

/* A running desktop. The descriptors are the host's ends of the channels;
 * they belong to whoever drives the desktop (the worker), which is why they
 * are not close-on-exec-safe to share: hand them over, then close them. */
struct dg_desktop {
	struct dg_jail jail;
	enum dg_profile profile;
	int width, height;
	int rfb_fd;        /* RFB stream to Xvnc (inetd mode) */
	int cdp_out_fd;    /* browser: DevTools commands to Chromium (its fd 3) */
	int cdp_in_fd;     /* browser: DevTools replies and events (its fd 4) */
};

/* "xterm" or "browser". Returns 0 or -EINVAL. */
int dg_profile_parse(const char *name, enum dg_profile *p);
const char *dg_profile_name(enum dg_profile p);

/* Parses "WxH" within the desktop bounds. */
int dg_desktop_parse_size(const char *text, int *w, int *h, struct dg_err *err);

/* Starts a desktop: a jail whose main program is Xvnc, then the profile's
 * programs once the X server is ready. Returns 0 or a negative errno. */
int dg_desktop_start(const struct dg_desktop_spec *spec, struct dg_desktop *d, struct dg_err *err);

/* Ends the desktop and everything in its jail; closes what is still open. */
void dg_desktop_destroy(struct dg_desktop *d);

/* ---- The worker: the desktop's unprivileged driver (see worker-priv.h) ---- */

/* Worker uids follow the jail uids: the worker of the jail in slot N runs as
 * DG_WORKER_ID_BASE + N, neither the owner's uid nor the jail's. */
#define DG_WORKER_ID_BASE (DG_JAIL_ID_BASE + DG_JAIL_SLOTS)
#define DG_WORKER_READY_MS 20000

struct dg_ipc_reader;

/* The owner's handle on a worker. Owned by the process that started it. */
struct dg_worker {
	pid_t pid;
	int pidfd;
	int ctl;                   /* socketpair end, non-blocking */
	struct dg_ipc_reader *rd;  /* owned */
	long long next_id;
	char *ready;               /* the READY message (JSON), once received */
	/* Decides the browser's requests in the blocking helpers below
	 * (dg_worker_wait_ready, dg_worker_act); NULL: the built-in default.
	 * Borrowed: must outlive the worker. Set it after dg_worker_start,
	 * which clears the struct. */
	const struct dg_policy *policy;
};

/* The deskgate binary that runs workers: /proc/self/exe unless a program
 * that is not deskgate itself (a test) names it. Call before starting. */
void dg_worker_set_binary(const char *path);

/* Forks and executes `deskgate worker` for desktop d as its own uid, handing
 * it the desktop's RFB and DevTools descriptors (closed in d afterwards).
 * Returns 0 or a negative errno. */
int dg_worker_start(struct dg_desktop *d, struct dg_worker *w, struct dg_err *err);

/* Waits (blocking, bounded) for the worker's READY message. */
int dg_worker_wait_ready(struct dg_worker *w, int timeout_ms, struct dg_err *err);

/* Sends one action message: {"id":N,"action":ACTION_JSON,"size":[w,h]}, size
 * omitted when out_w is 0. Returns the id (> 0) or a negative errno. */
long long dg_worker_send_action(struct dg_worker *w, const char *action_json, int out_w, int out_h,
				struct dg_err *err);

/* Receives one message if a whole one is ready: returns 1 (type, data, len
 * set; data valid until the next call), 0 when none is, or a negative errno
 * when the worker closed the channel or broke the protocol (then it must be
 * stopped). */
int dg_worker_recv(struct dg_worker *w, uint32_t *type, const uint8_t **data, size_t *len,
		   struct dg_err *err);

/* Blocking convenience for command-line tools: sends an action and waits up
 * to timeout_ms for its RESULT (malloc'd JSON) and FRAME (malloc'd PNG, NULL
 * when the action shows no screen). Events that arrive meanwhile are passed
 * to on_event when it is not NULL. */
int dg_worker_act(struct dg_worker *w, const char *action_json, int out_w, int out_h,
		  int timeout_ms, char **result, uint8_t **png, size_t *png_len,
		  void (*on_event)(void *arg, const char *json), void *arg, struct dg_err *err);

/* Decides a DG_MSG_REQUEST (a browser request the worker holds) under
 * policy (NULL: the built-in default) with dg_policy_decide_url, ask
 * counting as deny, and sends the verdict on ctl (the worker's channel).
 * d gets the decision; with
 * request non-NULL, *request gets the parsed message (caller frees).
 * Returns 0, -EPROTO for a malformed message, or a send error. */
int dg_worker_answer_request(int ctl, const struct dg_policy *policy,
			     const uint8_t *data, size_t len, struct dg_decision *d, json_t **request,
			     struct dg_err *err);

/* Ends the worker (closing its channel, then SIGKILL) and reaps it. */
void dg_worker_stop(struct dg_worker *w);

/* ---- The spawner: the privileged half of `deskgate serve` (spawner.c) ---- */

#define DG_SESSION_ID_MAX 64          /* [a-z0-9-] */
#define DG_SPAWNER_SESSIONS_MAX 256   /* sessions one spawner serves at once */
#define DG_SPAWNER_POOL_MAX 64        /* warm desktops of one profile */
#define DG_EXEC_ARGV_MAX 256
#define DG_EXEC_ARG_MAX 4096
#define DG_EXEC_STDIN_MAX (32 * 1024)
#define DG_EXEC_KILL_GRACE_MS 1000    /* after the wall clock: SIGTERM, then SIGKILL */

bool dg_session_id_valid(const char *id);

struct dg_spawner {
	pid_t pid;
	int fd;               /* SOCK_SEQPACKET, to the spawner */
	long long next_req;
};

/* Forks the spawner, which keeps the caller's privileges; call it before
 * dropping them. The spawner dies with the caller. */
int dg_spawner_start(struct dg_spawner *sp, bool verbose, struct dg_err *err);

/* Sends a request (req is stolen; a "req" number is added and returned, > 0):
 *   {"op":"create","session":ID,"profile":P,"width":W,"height":H,"limits":{...},
 *    "strict":BOOL (optional, dg_desktop_spec.strict)}
 *      -> {"req":N,"ok":true,"session":ID,"slot":S,"start_ms":T} + two
 *         descriptors: the worker's channel (see dg_worker_*) and the egress
 *         listener in the jail's network namespace (for the egress proxy);
 *         or {"req":N,"ok":false,"error":...}
 *   {"op":"destroy","session":ID} -> {"req":N,"ok":true}
 *   {"op":"pool","xterm":N,"browser":N,"limits":{...},"strict":B} -> {"req":N,"ok":true}:
 *      keep N desktops of each profile started ahead (default size, these
 *      limits and strictness); a create that fits takes one ("warm":true in
 *      its reply) and another starts behind it; a desktop is never reused.
 *   {"op":"egress"} -> {"req":N,"ok":true,"pid":P} + one descriptor: the
 *      channel of a new egress proxy (desktop/egress-priv.h), started with
 *      the options dg_egress_configure fixed before the spawner was forked;
 *      one it started earlier is killed first. The spawner reaps it (and
 *      logs how it ended); the gateway's handle on it has pid -1.
 *   {"op":"exec","session":ID,"argv":[...],"stdin":"...","timeout_ms":T}
 *      -> {"req":N,"ok":true} + a stream socket that yields one JSON result
 *         {"ok","exit_code","stdout","stderr","stdout_truncated",
 *          "stderr_truncated","timed_out","duration_ms"} and closes.
 * Unrequested: {"event":"ended","session":ID,"reason":...}. */
int dg_spawner_request(struct dg_spawner *sp, json_t *req, struct dg_err *err);

/* Receives one message if one is waiting: 1 (msg and fds set; the caller
 * owns both), 0, or a negative errno (-EPIPE: the spawner is gone). */
int dg_spawner_recv(struct dg_spawner *sp, json_t **msg, int *fds, int *nfds, struct dg_err *err);

/* Closes the channel (the spawner then ends every session and exits) and
 * reaps it. */
void dg_spawner_stop(struct dg_spawner *sp);

/* `deskgate exec`: runs argv in a jail under the limits, relays stdin, stdout
 * and stderr (each output cut at limits->output_bytes), and returns the exit
 * status to report: the command's own, 124 on the wall-clock limit, 137 when a
 * limit killed it. Every limit hit is named in one line on stderr_fd. */
int dg_exec_run(const struct dg_limits *limits, const char *const *argv, int stdin_fd,
		int stdout_fd, int stderr_fd);

#endif
