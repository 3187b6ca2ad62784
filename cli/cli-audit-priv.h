/* Internals of `deskgate audit` (cli/cli-audit*.c; see cli/cli.h for the
 * command's contract and cli/cli-audit.c for how it works): its limits, the
 * audit's state, its findings and probe runs. Included by those files only.
 *
 *   cli-audit.c         the command: options, setup and teardown of the
 *                       sessions, the probe's memfd, the host's bait
 *   cli-audit-run.c     running one probe (in a jail, its control in the other
 *                       session or on the host) into a finding
 *   cli-audit-edges.c   the battery, one function per edge
 *   cli-audit-report.c  the text and JSON reports, the state file
 *   cli-audit-browser.c the browser's paths around the urls rules
 */
#ifndef DG_CLI_AUDIT_PRIV_H
#define DG_CLI_AUDIT_PRIV_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli-priv.h"
#include "desktop/egress/egress.h"
#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "gateway/gateway.h"

/* ---- limits and fixed choices ------------------------------------------- */

#define DG_AUDIT_PROBE_NAME "deskgate-probe"
#define DG_AUDIT_PROBE_MAX (64u * 1024 * 1024) /* bytes of the probe binary */
/* The memfd is the first of the descriptors handed to the jail, which
 * become 3, 4, ... there (dg_jail_prog.pass_fds). */
#define DG_AUDIT_PROBE_EXE "/proc/self/fd/3"
#define DG_AUDIT_OUT_MAX (64 * 1024)           /* bytes kept of each output of one probe */
#define DG_AUDIT_PROBE_MS 10000                /* deadline of one probe */
#define DG_AUDIT_KILL_GRACE_MS 1000            /* past it: SIGTERM, then after this SIGKILL */
#define DG_AUDIT_ARGS_MAX 48                   /* arguments of one probe */
#define DG_AUDIT_EVIDENCE_MAX 4096             /* bytes of evidence kept per finding */
#define DG_AUDIT_FINDINGS_MAX 128
#define DG_AUDIT_SESSION "audit"               /* the session id the proxy knows */
/* The controls' places (dg_audit_probe_judged): the other session, or the audited
 * one with limits.exec_desktop true. */
#define DG_AUDIT_CONTROL_OTHER "the other session"
#define DG_AUDIT_CONTROL_SELF "the audited session with limits.exec_desktop true"
/* The other session's screen: never the audited one's (the x11 probe tells
 * the two X servers apart by size), which is always the default size. */
#define DG_AUDIT_OTHER_W 1024
#define DG_AUDIT_OTHER_H 768
#if DG_AUDIT_OTHER_W == DG_DESKTOP_WIDTH_DEFAULT && DG_AUDIT_OTHER_H == DG_DESKTOP_HEIGHT_DEFAULT
#error "the other session must differ in size from the audited one"
#endif
/* The other session's marker daemon lives this long (or until it ends). */
#define DG_AUDIT_MARKER_S 600
/* Stand-ins for the outside (never routed: TEST-NET-1, the IPv6 documentation
 * prefix, the cloud metadata address) and names nothing may resolve. */
#define DG_AUDIT_OUTSIDE_V4 "192.0.2.1"
#define DG_AUDIT_OUTSIDE_V6 "2001:db8::1"
#define DG_AUDIT_METADATA "169.254.169.254"
#define DG_AUDIT_DNS_NAME "deskgate-audit.example.com"
#define DG_AUDIT_DENIED_HOST "deskgate-audit.invalid"
/* Patterns of the policy's egress allowlist tried through the proxy, and how
 * long each waits for its answer (the proxy may still be resolving: a name
 * it is allowed to look up need not exist on a machine without internet). */
#define DG_AUDIT_ALLOWED_MAX 8
#define DG_AUDIT_ALLOWED_WAIT_MS 3000
#define DG_AUDIT_HOME_MAX 16                   /* host /home entries compared */
#define DG_AUDIT_BLOCKDEV_MAX 4                /* host block devices compared */
/* The wall clock is seen ending a sleeper with exec_seconds lowered to this
 * (the policy's own may be an hour); the output cap is the policy's. */
#define DG_AUDIT_WALL_S 2
#define DG_AUDIT_FORK_MAX 4096                 /* the forkbomb probe's bound on its cap */
#define DG_AUDIT_MEM_EXTRA_MB 64               /* the memory hog asks for the limit plus this */
/* Memory and scratch are pushed past their limits only when the host has
 * that much free plus this margin (otherwise it would test the host, not
 * the jail), and only up to DG_AUDIT_PUSH_MAX_MB (about a second per GiB:
 * the audit stays short). */
#define DG_AUDIT_HOST_MARGIN_MB 256
#define DG_AUDIT_PUSH_MAX_MB 8192
#define DG_AUDIT_MEM_MS 60000
#define DG_AUDIT_FILL_MS 60000
#define DG_AUDIT_CPU_MS 1000
#define DG_AUDIT_STATE_DEFAULT "/var/lib/deskgate"
/* RESULT lines of a host control handed to the jail's run (the most any
 * probe prints is 7: unshare), and the bytes of one KEY=TOKEN. */
#define DG_AUDIT_HOST_RESULTS_MAX 16
#define DG_AUDIT_HOST_RESULT_LEN 128
#define DG_AUDIT_STATE_FILE_MAX (8u * 1024 * 1024)
/* Names the env probe accepts besides the jail's allowlist: the proxy
 * variables exec'd programs get (probe_env, cli-audit-run.c), and DISPLAY, which the desktop gives its programs. */
#define DG_AUDIT_ENV_ALLOW "http_proxy,HTTP_PROXY,https_proxy,HTTPS_PROXY,DISPLAY"
/* Bytes of the host's variable names handed to the env probe. */
#define DG_AUDIT_ENV_NAMES_MAX (32 * 1024)

/* OUT_KERNEL: contained by the kernel, not by deskgate: the host's kernel
 * refuses the call itself (its host control shows it), so the jail's answer
 * says nothing about deskgate's (see dg_audit_probe_kernel). */
enum outcome { OUT_CONTAINED, OUT_ALLOWED, OUT_LEAKED, OUT_UNCHECKED, OUT_ERROR, OUT_KERNEL };
#define N_OUTCOMES 6

struct finding {
	const char *edge;
	char id[64];
	char probe[512];    /* the probe's command line, or what the host did */
	char source[160];
	char sink[512];
	char tried[512];
	enum outcome outcome;
	char evidence[DG_AUDIT_EVIDENCE_MAX];
	/* the control's evidence, when there was one: "in the other session:
	 * ..." or "on the host, as root with no filter: ..." */
	char control[DG_AUDIT_EVIDENCE_MAX];
	long long start_ms; /* when it began, from the audit's start */
	bool with_next;     /* runs on with the next finding (one run, two findings) */
	long long ms;       /* how long it took; -1 while it runs */
};

struct audit {
	/* options */
	const char *policy_path, *probe_path, *state_dir, *recordings;
	bool json, state_dir_given;
	bool progress; /* each phase and finding to stderr as it ends */
	enum dg_profile profile;
	/* the policy */
	struct dg_policy policy;
	bool policy_loaded;
	char *policy_text;
	size_t policy_len;
	char policy_hex[2 * DG_SHA256_LEN + 1];
	/* the probe */
	char probe_real[PATH_MAX];
	char probe_hex[2 * DG_SHA256_LEN + 1];
	int probe_fd;
	/* the sessions: the audited one (its proxy, desktop and worker; pump
	 * stops a part whose channel broke and clears its flag) and the other
	 * (a bare desktop) */
	struct dg_cli_session local;
	struct dg_desktop b;
	bool b_up;
	char a_source[160], b_source[160];
	/* what the host offers the jail to find */
	char tag[16];           /* random hex, names the markers */
	int tcp_fd, tcp_port;   /* a listener on the host's 127.0.0.1 */
	int abs_fd;             /* a listener on the host's abstract socket @deskgate-audit-TAG */
	char abs_name[64];
	char tmp_dir[64], tmp_file[96]; /* a world-readable file in a fresh host directory */
	char canary[80];        /* a value put into our environment: none may see it */
	/* results */
	struct finding *f;
	int n;
	long long t0_ms;
	long long setup_ms; /* the sessions' start, before the first finding */
	char started[32];
};

/* The namespace types the ns-ids probe compares (user, mnt, net, ipc, uts,
 * pid, cgroup). */
#define DG_AUDIT_NS_TYPES 7

/* snprintf that may truncate: evidence and labels only (static: each file
 * of the audit has its own copy, no symbol leaves the library). */
static inline void fmt(char *buf, size_t len, const char *f, ...)
	__attribute__((format(printf, 3, 4)));
static inline void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* ---- running one probe (cli-audit-run.c) ---- */

/* How one probe run ended, and what it printed. */
struct run {
	int exit_code;       /* 128 + signal when killed; -1 when it never ran */
	bool timed_out;
	int verdict;         /* 0 CONTAINED, 1 LEAKED, 2 ERROR, 3 KERNEL, -1 no verdict line */
	char line[DG_AUDIT_EVIDENCE_MAX]; /* the verdict line's evidence */
	char out[DG_AUDIT_OUT_MAX + 1], err[DG_AUDIT_OUT_MAX + 1];
	size_t out_len, err_len;
};

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

enum expect {
	EXPECT_CONTAINED, /* the policy and the jail must stop it */
	EXPECT_ALLOWED,   /* the policy allows it: reported as allowed, evidence as seen */
};

/* Judges what only the host can: called with a probe's run when it gave a
 * verdict, may change the finding's outcome and evidence. */
typedef void (*judge_fn)(struct finding *f, const struct run *r);

/* Arguments of a same-file probe: pairs PATH ID for every path that exists
 * on the host. Strings live in store (room for cap pairs). */
struct pairs {
	const char *args[DG_AUDIT_ARGS_MAX + 1];
	char paths[DG_AUDIT_ARGS_MAX / 2][PATH_MAX];
	char ids[DG_AUDIT_ARGS_MAX / 2][64];
	int n;      /* pairs */
	char list[1024]; /* the paths, for the report */
};

/* ---- the report (cli-audit-report.c) ---- */

/* How many findings of each outcome. */
struct tally {
	int n[N_OUTCOMES];
};

/* ---- the findings (cli-audit.c) ---- */

/* A new finding that begins now (those before it end); NULL past the
 * cap. dg_audit_finish_open ends those still open (before the report). */
struct finding *dg_audit_add(struct audit *au, const char *edge, const char *id, const char *tried,
			     const char *sink);
void dg_audit_finish_open(struct audit *au);

/* ---- running probes (cli-audit-run.c) ---- */

int dg_audit_run_probe(struct audit *au, struct dg_desktop *d, const char *const *args,
		       int timeout_ms, struct run *r, struct dg_err *err);
void dg_audit_command_line(const char *const *args, char *buf, size_t len);
void dg_audit_describe_failure(const struct run *r, char *buf, size_t len);
struct finding *dg_audit_probe_judged(struct audit *au, const char *edge, const char *id,
				      const char *tried, const char *sink, enum expect expect,
				      const char *control, int timeout_ms, const char *const *args,
				      judge_fn judge);
struct finding *dg_audit_probe(struct audit *au, const char *edge, const char *id,
			       const char *tried, const char *sink, enum expect expect,
			       const char *control, int timeout_ms, const char *const *args);
struct finding *dg_audit_probe_kernel(struct audit *au, const char *edge, const char *id,
				      const char *tried, const char *sink, const char *const *args);
void dg_audit_pairs_add(struct pairs *p, const char *path);
int dg_audit_ns_args(pid_t other, char store[][64], const char **args);

/* ---- the edges (cli-audit-edges.c): each runs its probes into findings ---- */

void dg_audit_egress_edge(struct audit *au);
void dg_audit_filesystem_edge(struct audit *au);
void dg_audit_credentials_edge(struct audit *au);
void dg_audit_browser_edge(struct audit *au);
void dg_audit_isolation_edge(struct audit *au);
void dg_audit_resources_edge(struct audit *au);

/* ---- the report (cli-audit-report.c) ---- */

struct tally dg_audit_tally(const struct audit *au);
const char *dg_audit_outcome_name(enum outcome o);
json_t *dg_audit_report_json(const struct audit *au, int code);
void dg_audit_kernel_ids(const struct audit *au, char *buf, size_t len);
void dg_audit_report_text(const struct audit *au, FILE *out);
int dg_audit_write_state(const struct audit *au, const char *text, struct dg_err *err);

#endif
