/* spawner: everything of deskgate that runs as root. The jail (namespaces,
 * mounts, cgroups, seccomp), the desktops started in jails, `deskgate exec`,
 * and the spawner process of `deskgate serve`, which does all of it for the
 * gateway (spawner.c).
 *
 * One mechanism serves both code execution (`deskgate exec`, the `exec`
 * action) and the desktop itself. Only a privileged process (the spawner,
 * or a command-line tool running as root: exec, desktop, audit) may call
 * dg_jail_start: it creates cgroups and writes uid maps. The spawner's
 * requests, its client side and the names it shares with the other
 * processes are in desktop/proto/proto.h.
 */
#ifndef DG_SPAWNER_H
#define DG_SPAWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "desktop/proto/proto.h"

/* The user the jailed program runs as, seen from inside. */
#define DG_JAIL_INNER_UID 1000u
#define DG_JAIL_INNER_GID 1000u
#define DG_JAIL_HOME "/home/user"
#define DG_JAIL_HOSTNAME "deskgate"
/* The jail's PID 1 as seen from inside (/proc/1/cmdline and comm): nothing
 * of the host's command line. */
#define DG_JAIL_INIT_NAME "deskgate-init"

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
/* With dg_jail_spec.ready_socket: how often init tries the socket while
 * it waits (a failed connect costs microseconds). */
#define DG_JAIL_READY_SOCKET_POLL_MS 1

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
	/* With wait_ready: a unix socket progs[0] listens on (an absolute path
	 * in the jail, a fixed string of the caller's), or NULL. progs[1..]
	 * then start as soon as a connection to it succeeds, when that comes
	 * before the ready line: a server listens before it has finished
	 * starting (Xvnc compiles its keymap after), and its clients' own
	 * start overlaps the rest of its start, their connections waiting in
	 * its backlog. dg_jail_start still returns only after the ready line. */
	const char *ready_socket;
	const struct dg_jail_file *etc_files;
	int n_etc_files;
	bool egress;
	/* The CPU quota of limits is not written at the start: the jail's
	 * programs start on every core, sharing them by weight like any other
	 * group, until its owner calls dg_jail_cap_cpu. For a desktop, whose
	 * start runs nothing of an agent's (see dg_desktop_cap_cpu). The
	 * memory and pids limits hold from the first instruction either way. */
	bool cpu_after_start;
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

/* Writes the CPU quota of lim (the spec's limits) into j's cgroup: the end
 * of a start with cpu_after_start. 0 or a negative errno with err. */
int dg_jail_cap_cpu(const struct dg_jail *j, const struct dg_limits *lim, struct dg_err *err);

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

/* Claims this process's instance's uid pair (dg_instance_gateway_uid and
 * the egress uid after it) for as long as the process and its children
 * live: a shared flock on <run dir>/ids/<gateway uid>.lock, whose content
 * names the instance. Instances of the same name share the claim; another
 * instance whose name hashes to the same pair is refused with -EADDRINUSE,
 * naming both (rename one). Call as root, before the gateway drops to the
 * uid. The lock's descriptor stays open, close-on-exec, never returned. */
int dg_instance_ids_claim(struct dg_err *err);

/* ---- Desktops: a jail running Xvnc and the profile's programs ---- */

/* Every desktop is display :0 of its own jail: X sockets, abstract ones
 * included, are private to the jail's mount and network namespaces. */
#define DG_DESKTOP_DISPLAY ":0"
#define DG_DESKTOP_URL_MAX 8192
/* Updates a second Xvnc sends the worker at most (its -FrameRate). Xvnc
 * sends on the ticks of a clock at this rate (the first half a tick after
 * a quiet spell), so the rate bounds how soon a repaint reaches the
 * worker: traced after the pointer gate's "still" answer, a repaint the
 * page's listener cannot see came 3-9 ms later at 240 (p99 12 ms, once 17
 * with four busy loops beside it), 1-5 ms later at 1000 (p99 and most 7
 * ms beside the loops); an animated page or a flooded xterm cost the same
 * CPU at either (docs/benchmarks.md, "Xvnc's update clock"). */
#define DG_DESKTOP_XVNC_FPS 1000

/* What of a desktop programs run by exec never see (unless the policy's
 * limits.exec_desktop): the X server's socket directory, the browser's
 * profile (its user data dir) and cache, and the browser's own
 * directories in /tmp and /dev/shm (its singleton socket). See
 * desktop/spawner/jail-enter.c. The same list is what an upload may never
 * read (dg_desktop_hidden_prefix, dg_desktop_upload_check). */
#define DG_DESKTOP_X11_DIR "/tmp/.X11-unix"
/* ... and display :0's path socket there, which Xvnc listens on. */
#define DG_DESKTOP_X11_SOCKET DG_DESKTOP_X11_DIR "/X0"
#define DG_DESKTOP_BROWSER_DIR DG_JAIL_HOME "/.chromium"
#define DG_DESKTOP_BROWSER_CACHE_DIR DG_JAIL_HOME "/.cache/chromium"
/* Chromium's temporary directories (its singleton socket lives in one):
 * this prefix, or a dot and this prefix. */
#define DG_DESKTOP_BROWSER_TMP_PREFIX "org.chromium."
/* Most directories of one kind hidden (a jail that made more is refused
 * exec rather than half hidden). */
#define DG_JAIL_HIDE_MAX 64

/* The list itself, in one place (jail-enter.c), NULL-terminated: the
 * directories hidden whole, and the directories whose entries named
 * DG_DESKTOP_BROWSER_TMP_PREFIX* or .DG_DESKTOP_BROWSER_TMP_PREFIX* are the
 * browser's. */
extern const char *const dg_desktop_hidden_dirs[];
extern const char *const dg_desktop_browser_tmp_parents[];

/* Whether the absolute, canonical path names one of the desktop's own
 * files above, from its bytes alone: the length of the prefix of path
 * that is a hidden directory, or that ends with a component named
 * [.]org.chromium.* anywhere below a browser_tmp_parent (stricter than
 * the hiding, which sees only the entries at the top); 0 when none. */
size_t dg_desktop_hidden_prefix(const char *path);

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
	/* The start runs without the CPU quota of limits, on every core: the
	 * caller writes it with dg_desktop_cap_cpu once the worker said READY
	 * (dg_jail_spec.cpu_after_start). False: capped from the start. */
	bool cpu_after_start;
};

/* A running desktop. The descriptors in io are the host's ends of the
 * channels; they belong to whoever drives the desktop (the worker), which is
 * why they are not close-on-exec-safe to share: hand them over
 * (dg_worker_start(&d->io, ...)), then close them. */
struct dg_desktop {
	struct dg_jail jail;
	struct dg_desktop_io io;   /* profile, size, slot and the channels */
};

/* Starts a desktop: a jail whose main program is Xvnc, then the profile's
 * programs once the X server is ready. Returns 0 or a negative errno. */
int dg_desktop_start(const struct dg_desktop_spec *spec, struct dg_desktop *d, struct dg_err *err);

/* Ends the desktop's start: its jail gets the CPU quota of lim (the
 * spec's limits). A desktop starts on every core of the host (its cgroup
 * has no quota yet, dg_desktop_spec.cpu_after_start): a Chromium start took
 * 1.4 s to its page within one core and 0.94-1.06 s on two, measured on
 * the 2-core VM. Nothing an agent sent runs before the worker's READY; the
 * page of a start URL does, for at most DG_SPAWNER_START_CPU_MS. The
 * spawner calls it once the gateway saw READY (DG_SPAWN_STARTED), when it
 * hands a warm desktop over, and at that bound, whichever comes first; the
 * command-line sessions (cli/cli-session.c) once their worker is ready.
 * Only for a desktop started with dg_desktop_spec.cpu_after_start. */
int dg_desktop_cap_cpu(struct dg_desktop *d, const struct dg_limits *lim, struct dg_err *err);

/* Ends the desktop and everything in its jail; closes what is still open. */
void dg_desktop_destroy(struct dg_desktop *d);

/* The spawner's upload check (upload.c; the verdicts are in
 * desktop/proto/proto.h): the n paths (each dg_upload_path_valid, 1..
 * DG_UPLOAD_PATHS_MAX) looked at in the desktop's view of jail j, its
 * init's root, never following a symbolic link, into out (a verdict per
 * path). Returns 0, or a negative errno with err when j's root could not be
 * looked at at all (the jail ended). Only the jail's owner may call it. */
int dg_desktop_upload_check(const struct dg_jail *j, const char *const *paths, uint32_t n,
			    struct dg_upload_check *out, struct dg_err *err);

/* ---- The spawner: the privileged half of `deskgate serve` (spawner.c) ---- */

/* Its requests, their limits and the gateway's side of its channel
 * (dg_spawner_request, ...) are in desktop/proto/proto.h. */
#define DG_EXEC_KILL_GRACE_MS 1000    /* after the wall clock: SIGTERM, then SIGKILL */

/* Forks the spawner, which keeps the caller's privileges; call it before
 * dropping them. The spawner dies with the caller. */
int dg_spawner_start(struct dg_spawner *sp, bool verbose, struct dg_err *err);

/* `deskgate exec`: runs argv in a jail under the limits, relays stdin, stdout
 * and stderr (each output cut at limits->output_bytes), and returns the exit
 * status to report: the command's own, 124 on the wall-clock limit, 137 when a
 * limit killed it. Every limit hit is named in one line on stderr_fd. */
int dg_exec_run(const struct dg_limits *limits, const char *const *argv, int stdin_fd,
		int stdout_fd, int stderr_fd);

#endif
