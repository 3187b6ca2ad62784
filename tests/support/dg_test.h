/* Helpers shared by deskgate's tests: run a program and capture what it
 * printed, write temporary files, find leftovers. No shell is involved. */
#ifndef DG_TEST_H
#define DG_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define DG_TEST_OUT_MAX (4u * 1024 * 1024)

struct dg_run {
	int status;          /* wait status */
	int exit_code;       /* WEXITSTATUS, or 128+signal */
	char *out;           /* NUL-terminated, malloc'd; at most DG_TEST_OUT_MAX kept */
	size_t out_len;
	char *err;
	size_t err_len;
	double seconds;      /* wall time */
	int timed_out;       /* killed by the test's own deadline */
};

/* Runs argv with envp (NULL: inherit) and stdin from the given bytes (NULL:
 * /dev/null), kills it after timeout_s. extra_fd, when >= 0, is left open
 * (not close-on-exec) in the child to model a leaked descriptor. */
int dg_test_run(const char *const *argv, const char *const *envp, const char *stdin_data,
		size_t stdin_len, double timeout_s, int extra_fd, struct dg_run *r);
void dg_run_free(struct dg_run *r);

/* `deskgate exec [--policy POLICY] -- argv...` with the test's binary. */
int dg_test_exec(const char *policy_path, const char *const *argv, struct dg_run *r);

/* Writes text to a fresh file under a fresh temp dir; returns a malloc'd path. */
char *dg_test_write_tmp(const char *name, const char *text);

/* Writes a policy file with the given limits JSON object text. */
char *dg_test_policy(const char *limits_json);

/* This test program's deskgate instance ("test-<pid>"): set in
 * DESKGATE_INSTANCE (and for the jails it starts itself) before main, so
 * that every deskgate it runs is of it. */
const char *dg_test_instance(void);

/* Counts what this run's deskgate instance left behind: jail cgroups (under
 * deskgate/<instance>/), processes of jail uids and of worker uids that are
 * of the instance (their cgroup, their --instance argument, or their slot
 * lock says so). Another gateway's or test run's live jails on the same
 * host are not counted. Returns a count and writes a description to what. */
int dg_test_leftovers(char *what, size_t what_len);

/* The jail cgroups of slot in this run's instance that exist (v1
 * controllers or the v2 group): how many, and their paths in what. */
int dg_test_slot_cgroups(uint32_t slot, char *what, size_t what_len);

/* Monotonic seconds. */
double dg_test_now(void);

/* ---- Containment probe battery (cli/probe.c) ---- */

/* The shell line that carries the probe into a jail: the jail cannot see the
 * build directory, so the probe's bytes arrive on stdin, are written to the
 * jail's /tmp (exec allowed there) and run with the remaining arguments. */
#define DG_TEST_PROBE_SH "cat > /tmp/p && chmod 700 /tmp/p && exec /tmp/p \"$@\""

/* The probe binary's bytes, read once (aborts when unreadable). */
const char *dg_test_probe_bytes(size_t *len);

/* Fills argv (room for cap entries, NULL-terminated) with
 * `DG_BIN exec [--policy P] -- /bin/sh -c DG_TEST_PROBE_SH sh PROBE_ARGV...`.
 * Returns argv. */
const char **dg_test_probe_jail_argv(const char *policy_path, const char *const *probe_argv,
				     const char **argv, size_t cap);

/* Runs the probe in a jail (its bytes on stdin). envp: deskgate's
 * environment (NULL: inherit); extra_fd: leaked into deskgate (-1: none). */
int dg_test_probe_jail(const char *policy_path, const char *const *envp, int extra_fd,
		       double timeout_s, const char *const *probe_argv, struct dg_run *r);

/* Runs `DG_PROBE PROBE_ARGV...` on the host: the control. */
int dg_test_probe_host(const char *const *envp, int extra_fd, double timeout_s,
		       const char *const *probe_argv, struct dg_run *r);

/* Finds the probe's final line (CONTAINED/LEAKED/ERROR/KERNEL ...) in text
 * and copies it into line. Returns 0 CONTAINED, 1 LEAKED, 2 ERROR, 3 KERNEL
 * (contained by the kernel itself: cli/probe.c), -1 none. */
int dg_test_verdict(const char *text, char *line, size_t len);

/* A program started in the background, for tests that act while it runs
 * (e.g. time the host while a jail holds a fork bomb). */
struct dg_proc {
	pid_t pid;
	int in, out, err;        /* our ends; -1 once closed */
	const char *stdin_data;  /* borrowed: must outlive the run */
	size_t stdin_len, stdin_off;
	double start;
	struct dg_run r;         /* output so far */
};

/* Starts argv like dg_test_run does, without waiting. */
int dg_test_start(const char *const *argv, const char *const *envp, const char *stdin_data,
		  size_t stdin_len, int extra_fd, struct dg_proc *p);

/* Relays I/O until needle shows in stdout (returns 1), both outputs close or
 * timeout_s passes (returns 0). */
int dg_test_pump(struct dg_proc *p, const char *needle, double timeout_s);

/* Relays I/O to the end (killing the program after timeout_s), reaps it and
 * moves the result into r (free with dg_run_free). */
int dg_test_finish(struct dg_proc *p, double timeout_s, struct dg_run *r);

/* Removes a file made by dg_test_write_tmp/dg_test_policy and its temp
 * directory; frees path. */
void dg_test_rm_tmp(char *path);
/* Removes the tree at path (no symlink followed); ignores what fails. */
void dg_test_rm_tree(const char *path);


/* ---- The gateway: `deskgate serve` and clients for it ----
 *
 * A server started by the test with its own config, state and recordings
 * under a temp dir, on a free port, with the DESKGATE_*_TOKEN variables
 * below; its output goes to a log file (a pipe nobody drains could block
 * it). An HTTP client over a raw socket and a WebSocket client written
 * with the libwebsockets client API, both blocking with timeouts. */

#include <stdbool.h>
#include <stdint.h>

#define DG_TEST_AGENT_TOKEN "agent-token-0123456789abcdefghij"
#define DG_TEST_VIEWER_TOKEN "viewer-token-0123456789abcdefghi"
#define DG_TEST_ADMIN_TOKEN "admin-token-0123456789abcdefghijk"

struct dg_server {
	pid_t pid;           /* the gateway (the spawner is its child) */
	int port;
	char dir[64];        /* temp dir: config.json, serve.log, state/, rec/ */
	char config[128];
	char log[128];
	double start_s;      /* dg_test_now() when it was serving */
};

/* A TCP port nobody listens on now (bound to port 0 and released). */
int dg_test_free_port(void);

/* Writes a config {"listen": 127.0.0.1:PORT, "state_dir", "recordings",
 * EXTRA} (extra: more members of the object, "" for none) and starts
 * `DG_BIN serve --config FILE` with the three test tokens in its
 * environment; waits (at most timeout_s) until it says "serving on". Tries
 * another port when the chosen one is taken meanwhile. Returns 0 or -1
 * with a message (and the log's tail) in err. */
int dg_test_serve_start(struct dg_server *s, const char *extra_config, double timeout_s,
			char *err, size_t errlen);

/* Starts the server again in s's directory (its state and recordings kept),
 * e.g. after the test killed it. */
int dg_test_serve_restart(struct dg_server *s, const char *extra_config, double timeout_s,
			  char *err, size_t errlen);

/* The same with more arguments for `deskgate serve` (NULL-terminated). */
int dg_test_serve_start_args(struct dg_server *s, const char *extra_config,
			     const char *const *args, double timeout_s, char *err, size_t errlen);

/* The browser tests' gateway: its config's extra and the names of two
 * loopback sites resolved by the egress proxy (--test-resolve):
 * localhost:allowed_port and denied.test:denied_port, both to 127.0.0.1. */
int dg_test_serve_two_sites(struct dg_server *s, const char *extra_config, int allowed_port,
			    int denied_port, double timeout_s, char *err, size_t errlen);

/* SIGTERM, then waits at most timeout_s (then SIGKILL). Returns the wait
 * status (-1 when it had to be killed). Removes the temp dir unless keep. */
int dg_test_serve_stop(struct dg_server *s, double timeout_s, bool keep);

/* The server's log so far (malloc'd, NUL-terminated). */
char *dg_test_serve_log(const struct dg_server *s);

/* The instance a running server says it is ("serving on ... (instance X,"
 * in its log) and that instance's gateway uid (dg_instance_uid_of; its
 * egress proxy's is the next). A server started without "instance" in
 * its config is the host name's: serve_env passes no DESKGATE_* variable
 * but the tokens. Fails the test when the log has no such line. */
uint32_t dg_test_serve_uid(const struct dg_server *s);

/* Children of pid (from /proc/PID/task/PID/children when present, else a
 * scan of /proc). Returns how many were written (at most max). */
int dg_test_children(pid_t pid, pid_t *out, int max);

/* The jail slots of processes descending from root (jail and worker uids).
 * Returns how many distinct slots were written (at most max). */
int dg_test_slots_under(pid_t root, uint32_t *slots, int max);

/* A descriptor sharing the open file of slot's lock (<run dir>/slots/N.lock)
 * with the child of root that holds it, the spawner (pidfd_getfd): the flock stays
 * held while the caller keeps it, even once every process of root is gone,
 * so no deskgate's stale cleanup can take that slot's groups before the
 * caller closes it. Returns the descriptor (the caller's to close),
 * -ENOENT when no child of root holds the lock, or the negative errno
 * of pidfd_open/pidfd_getfd when the kernel refused them (-ENOSYS before
 * Linux 5.6, -EPERM under Yama's ptrace_scope 3). */
int dg_test_slot_lock_share(pid_t root, uint32_t slot);

/* The processes of jail slots descending from root, as (pid, slot) pairs:
 * taken before a session is created, they tell its slot afterwards even
 * when a session that just ended had the same slot and is still going. */
#define DG_TEST_PROCS_MAX 8192
struct dg_test_procs {
	int n;
	pid_t pid[DG_TEST_PROCS_MAX];
	uint32_t slot[DG_TEST_PROCS_MAX];
};
void dg_test_procs_under(pid_t root, struct dg_test_procs *out);

/* The slot of a process under root that was not in before, polled up to
 * timeout_s; 0 and *slot set, or -1 when none appeared (the message says
 * what was seen). */
int dg_test_new_slot(pid_t root, const struct dg_test_procs *before, double timeout_s,
		     uint32_t *slot, char *err, size_t errlen);

/* Like dg_test_leftovers, for one jail slot only: processes of its jail or
 * worker uid, its cgroups. When the slot's lock is held by a process that
 * is neither ours nor a descendant of it (ours <= 0: by anyone), another
 * jail took the slot after ours and nothing of it is counted. */
int dg_test_leftovers_slot(uint32_t slot, pid_t ours, char *what, size_t what_len);

/* Like dg_test_leftovers, only what no live jail owns: processes and
 * cgroups whose slot lock is free (a jail takes its slot's lock before it
 * creates anything and releases it after everything is gone), so that the
 * run's own jails still alive are not counted. */
int dg_test_leftovers_stale(char *what, size_t what_len);

/* The pid of a process with this comm (as in /proc/PID/comm) and real uid,
 * or -1. */
pid_t dg_test_find_process(const char *comm, uid_t uid);

/* A "Key: value" line of /proc/PID/status, value copied (trimmed) into out.
 * Returns 0 or -1. */
int dg_test_proc_status(pid_t pid, const char *key, char *out, size_t len);

/* An HTTP response. */
struct dg_http {
	int status;          /* 0 when no status line came */
	char *head;          /* status line and headers, NUL-terminated */
	char *body;          /* NUL-terminated */
	size_t body_len;
};

/* A blocking TCP connection to 127.0.0.1:port (close-on-exec), or -1. */
int dg_test_tcp_connect(int port);

/* Sends req (len bytes) on a fresh connection and reads one response (up
 * to Content-Length, or to the end of the connection). Returns 0, or -1 on
 * a connection error or timeout (r->status then 0). */
int dg_test_http_raw(int port, const char *req, size_t len, double timeout_s, struct dg_http *r);

/* METHOD PATH with "Authorization: Bearer TOKEN" (token NULL: none) and
 * body (NULL: none) as application/json. */
int dg_test_http(int port, const char *method, const char *path, const char *token,
		 const char *body, double timeout_s, struct dg_http *r);
void dg_http_free(struct dg_http *r);

/* A WebSocket client connection (libwebsockets client API). All
 * connections of a process share one client context; each keeps the
 * messages it received in order until read. */
struct dg_ws;
struct dg_ws_msg {
	bool binary;
	unsigned char *data; /* NUL-terminated */
	size_t len;
};

/* Connects to ws://127.0.0.1:PORT/PATH. bearer: sent as "Authorization:
 * Bearer BEARER" (NULL: no header); subprotocols: the Sec-WebSocket-Protocol
 * list as given (NULL: none). Returns the connection, or NULL with the
 * handshake's HTTP status in *status (0 when none came) and why in err. */
struct dg_ws *dg_ws_connect(int port, const char *path, const char *bearer,
			    const char *subprotocols, double timeout_s, int *status, char *err,
			    size_t errlen);

/* Sends one message and waits until it is written to the socket. Returns 0
 * or -1 (connection closed). */
int dg_ws_send(struct dg_ws *ws, bool binary, const void *data, size_t len);
int dg_ws_send_text(struct dg_ws *ws, const char *text);

/* Waits at most timeout_s for the next message. Returns 1 (m filled; free
 * with dg_ws_msg_free), 0 (timeout) or -1 (closed, nothing left). */
int dg_ws_recv(struct dg_ws *ws, double timeout_s, struct dg_ws_msg *m);
void dg_ws_msg_free(struct dg_ws_msg *m);

/* Services every connection for ms milliseconds (receiving into queues). */
void dg_ws_service(int ms);

/* Stops (false) or resumes (true) reading this connection's socket: a
 * client that does not read. */
void dg_ws_read_enable(struct dg_ws *ws, bool enable);

/* Whether the connection is closed (by either side); its close code if any. */
bool dg_ws_closed(const struct dg_ws *ws);
int dg_ws_close_code(const struct dg_ws *ws);

/* Messages received and not read yet. */
int dg_ws_pending(const struct dg_ws *ws);

/* Closes (normal closure) and frees. NULL is harmless. */
void dg_ws_close(struct dg_ws *ws);

/* Decodes standard base64 (padding optional; no other characters). Returns
 * a malloc'd buffer and its length in *len, or NULL. */
unsigned char *dg_test_base64_decode(const char *in, size_t *len);

/* Checks png (len bytes) decodes fully; writes its size. Returns 0 or -1. */
int dg_test_png_size(const unsigned char *png, size_t len, int *w, int *h);

/* Decodes png (len bytes) to 8-bit RGB, rows top to bottom, 3 bytes a
 * pixel (malloc'd; free it), and writes its size. NULL when it does not
 * decode. */
unsigned char *dg_test_png_rgb(const unsigned char *png, size_t len, int *w, int *h);

#endif

/* ---- A loopback HTTP site for policy tests ----
 *
 * One thread accepting on 127.0.0.1:port (ephemeral), one request per
 * connection: it logs the request line, then handle() answers (with
 * dg_site_reply). Reached from jails only through the egress proxy and a
 * --test-resolve mapping. */
#include <pthread.h>

#define DG_SITE_LOG_MAX 256
struct dg_site;
typedef void (*dg_site_handler)(struct dg_site *s, int fd, const char *path);
struct dg_site {
	int fd, port;
	pthread_t th;
	pthread_mutex_t mu;
	char *log[DG_SITE_LOG_MAX]; /* request lines seen */
	int n;
	int other_port;             /* free for the handler (e.g. another site's port) */
	volatile bool stop;
	dg_site_handler handle;
};
void dg_site_start(struct dg_site *s, dg_site_handler handle);
void dg_site_stop(struct dg_site *s);
bool dg_site_saw(struct dg_site *s, const char *needle);
int dg_site_count(struct dg_site *s);
void dg_site_reply(int fd, const char *status, const char *type, const char *extra_headers,
		   const char *body);

/* ---- Soak and fault helpers (issue #9: tests/containment/test_soak.c,
 * test_faults.c) ---- */
#ifndef DG_TEST_SOAK_FAULTS_H
#define DG_TEST_SOAK_FAULTS_H
#include <sys/types.h>

/* A memory figure of pid in KiB: a /proc/PID/status key when it starts
 * with "Vm" ("VmRSS", "VmHWM"), else a /proc/PID/smaps_rollup one ("Rss",
 * "Pss", "Private_Dirty"). -1 when unreadable. */
long dg_test_proc_mem_kb(pid_t pid, const char *key);

/* Open descriptors of pid (entries of /proc/PID/fd), -1 when unreadable.
 * When what is not NULL, their targets are written there ("3 -> socket:[..]; "). */
int dg_test_proc_fds(pid_t pid, char *what, size_t what_len);

/* Like dg_test_find_process, but only a live process (not a zombie: a
 * killed process's children can linger as zombies until the host's init
 * reaps them, with their comm and uid), and with top, the outermost one:
 * whose parent has another comm (Chromium's browser process rather than one
 * of its zygotes or renderers). -1 when none. */
pid_t dg_test_find_live_process(const char *comm, uid_t uid, bool top);

/* The CPU quota of process pid's cgroup into out (v1 cpu.cfs_quota_us, v2
 * the first word of cpu.max): "-1" or "max" when it has none. 0 or a
 * negative errno (no such process, no cpu cgroup). */
int dg_test_cpu_quota(pid_t pid, char *out, size_t len);

/* A live process (not a zombie) with this comm and real uid that descends
 * from root (a child, grandchild, ...), or -1: e.g. the egress proxy of one
 * gateway among those running on the machine. */
pid_t dg_test_find_descendant(pid_t root, const char *comm, uid_t uid);

/* dg_test_leftovers_slot without zombies: processes that are dead but not
 * reaped yet (the host's init reaps the orphans of a killed spawner when it
 * gets to it) hold nothing but their pid. */
int dg_test_leftovers_slot_live(uint32_t slot, pid_t ours, char *what, size_t what_len);

/* The whole of a file (malloc'd, NUL-terminated; "" when unreadable). */
char *dg_test_read_file(const char *path);

/* Mounts of this process's mount namespace (/proc/self/mountinfo) that are
 * not in before (a copy of that file read earlier), compared without the
 * mount and parent ids. Returns how many and lists them in what. */
int dg_test_new_mounts(const char *before, char *what, size_t what_len);

/* 1 when json (a json_t * read from an agent's socket) is an event or a
 * decision, which an agent's socket carries only when its hello asked for
 * them; its text (cut to len) then goes into buf. 0 otherwise. */
int dg_test_stray_event(const void *json, char *buf, size_t len);

/* Fails the test when j, read from an agent's socket that asked for no
 * events, is not an answer (docs/agents.md: after an action, the next text
 * message is its answer). Needs criterion. */
#define DG_TEST_NO_STRAY_EVENT(j)                                                              \
	do {                                                                                   \
		char stray_[512];                                                              \
		cr_assert(!dg_test_stray_event((j), stray_, sizeof(stray_)),                   \
			  "the agent's socket carried a message that is no answer, without a " \
			  "hello asking for events: %s",                                       \
			  stray_);                                                             \
	} while (0)

#endif

/* ---- A raw RFB client over the live view's WebSocket (docs/vnc.md) ----
 *
 * Speaks RFB 3.8 with security None and the raw encoding in the server's
 * own pixel format (32 bits, BGRX in memory): enough to check what a
 * viewer sees and to send what a viewer may. The bytes of every binary
 * message form the stream. */
struct dg_rfb {
	struct dg_ws *ws;
	unsigned char *buf;
	size_t len, off;
	int w, h;
	unsigned char *fb;   /* w * h * 4 bytes, BGRX */
};

/* Connects to ws://127.0.0.1:PORT/PATH (subprotocol "binary", token as a
 * bearer header) and shakes hands. 0, or -1 with why in err. */
int dg_rfb_open(struct dg_rfb *r, int port, const char *path, const char *token,
		double timeout_s, char *err, size_t errlen);
/* A FramebufferUpdateRequest for the whole screen. 0 or -1 (closed). */
int dg_rfb_request(struct dg_rfb *r, bool incremental);
/* Reads one FramebufferUpdate into r->fb (bells and cut text skipped):
 * the pixels it covered; -1 when none came within timeout_s or the
 * connection closed; -2 (err says why) when the server broke RFB. */
long dg_rfb_update(struct dg_rfb *r, double timeout_s, char *err, size_t errlen);
/* The mean absolute difference per channel between r->fb and an RGB image
 * of the same size. */
double dg_rfb_diff(const struct dg_rfb *r, const unsigned char *rgb);
void dg_rfb_close(struct dg_rfb *r);
/* Big-endian fields, as RFB (and XWD) write them. */
uint32_t dg_be32(const unsigned char *p);
void dg_put16(unsigned char *p, unsigned v);
void dg_put32(unsigned char *p, uint32_t v);

/* utime + stime of pid (/proc/PID/stat), in ms; 0 when it cannot be read (gone). */
double dg_test_cpu_ms(pid_t pid);
/* qsort's comparison of doubles, ascending. */
int dg_test_cmp_double(const void *a, const void *b);
