/* `deskgate audit`: see cli/cli.h for the contract.
 *
 * The session is started in-process as `deskgate test --live` starts one
 * (cli/cli-live.c): an egress proxy, the desktop with its egress
 * listener handed to the proxy, its worker; plus the other session.
 *
 * How the probe gets into the jail. The jail sees no host file but the
 * read-only system directories, so the probe binary (deskgate-probe, built
 * beside deskgate) is copied into a memfd, sealed against writes, growth and
 * shrinking, handed to dg_jail_enter as descriptor 3 and executed as
 * "/proc/self/fd/3". That path resolves in the jail's own /proc to the
 * memfd itself, which lives on the kernel's internal shm mount (so the
 * noexec of the jail's /proc does not apply); execve is in the jail's
 * seccomp allowlist; and the probe closes the descriptor before probing
 * (probe.c, close_own_image), so it is not mistaken for a leaked one.
 * Nothing is written to a filesystem the jail could see, and the seals keep
 * one probe run from changing what the next run executes. The memfd is
 * close-on-exec here, so no other child of the audit inherits it.
 *
 * Each probe runs as an exec action would: joined to the jail's namespaces,
 * cgroup, user, rlimits and seccomp filter, with the proxy variables the
 * spawner gives exec'd programs. Its verdict line (CONTAINED/LEAKED/ERROR/
 * KERNEL, cli/probe.c) becomes the finding. Some probes have a
 * control run in the other session, where they must see what they look for
 * (its X server, its processes, its files): a probe that could not see a
 * leak there proves nothing here, and its finding becomes an error. The
 * probes whose calls depend on the kernel (kexec, x32, int 0x80, ...) have
 * a control run on the host instead (probe_kernel), whose results the jail's
 * run compares its own with: a call that ended in the jail exactly as the
 * host's kernel ends it, refused, is reported as contained by the kernel,
 * never as leaked, nor as deskgate's containment.
 */
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

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

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
/* The controls' places (probe_judged): the other session, or the audited
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

/* What exec'd programs get (the spawner's exec action gives the same). */
static const char *const probe_env[] = {
	"http_proxy=" DG_JAIL_EGRESS_URL, "HTTP_PROXY=" DG_JAIL_EGRESS_URL,
	"https_proxy=" DG_JAIL_EGRESS_URL, "HTTPS_PROXY=" DG_JAIL_EGRESS_URL, NULL};
/* Names the env probe accepts besides the jail's allowlist: the proxy
 * variables above, and DISPLAY, which the desktop gives its programs. */
#define DG_AUDIT_ENV_ALLOW "http_proxy,HTTP_PROXY,https_proxy,HTTPS_PROXY,DISPLAY"
/* Bytes of the host's variable names handed to the env probe. */
#define DG_AUDIT_ENV_NAMES_MAX (32 * 1024)

/* OUT_KERNEL: contained by the kernel, not by deskgate: the host's kernel
 * refuses the call itself (its host control shows it), so the jail's answer
 * says nothing about deskgate's (see probe_kernel). */
enum outcome { OUT_CONTAINED, OUT_ALLOWED, OUT_LEAKED, OUT_UNCHECKED, OUT_ERROR, OUT_KERNEL };
#define N_OUTCOMES 6
static const char *const outcome_names[N_OUTCOMES] = {
	"contained", "allowed", "leaked", "not-checked", "error", "contained-by-kernel"};

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
};

struct audit {
	/* options */
	const char *policy_path, *probe_path, *state_dir, *recordings;
	bool json, state_dir_given;
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
	/* the sessions */
	struct dg_egress egress;
	struct dg_desktop a, b;
	struct dg_worker worker;
	bool egress_up, a_up, b_up, worker_up;
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
	char started[32];
};

/* snprintf that may truncate: evidence and labels only. */
static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* A new finding, or NULL past DG_AUDIT_FINDINGS_MAX (a bug: the battery is
 * fixed and smaller). */
static struct finding *add(struct audit *au, const char *edge, const char *id, const char *tried,
			   const char *sink)
{
	if (au->n >= DG_AUDIT_FINDINGS_MAX) {
		fprintf(stderr, "deskgate audit: more than %d findings; %s dropped\n",
			DG_AUDIT_FINDINGS_MAX, id);
		return NULL;
	}
	struct finding *f = &au->f[au->n++];
	memset(f, 0, sizeof(*f));
	f->edge = edge;
	fmt(f->id, sizeof(f->id), "%s.%s", edge, id);
	fmt(f->tried, sizeof(f->tried), "%s", tried);
	fmt(f->sink, sizeof(f->sink), "%s", sink);
	f->outcome = OUT_ERROR;
	return f;
}

/* ---- keeping the session alive while probes run --------------------------- */

/* Answers the worker's held browser requests under the policy (as the
 * gateway does) and drops its events and the proxy's: nothing must back up
 * while the probes run. A channel that breaks is stopped and reported. */
static void pump(struct audit *au)
{
	struct dg_err err = {{0}};
	while (au->worker_up) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r = dg_worker_recv(&au->worker, &type, &data, &len, &err);
		if (r == 1 && type == DG_MSG_REQUEST) {
			struct dg_decision d;
			r = dg_worker_answer_request(au->worker.ctl, &au->policy, data, len, &d, NULL,
						     &err);
			if (r == 0)
				continue;
		}
		if (r == 1)
			continue;
		if (r < 0) {
			fprintf(stderr, "deskgate audit: the worker's channel broke: %s\n", err.msg);
			dg_worker_stop(&au->worker);
			au->worker_up = false;
		}
		break;
	}
	while (au->egress_up) {
		json_t *ev = NULL;
		int r = dg_egress_recv(&au->egress, &ev, &err);
		json_decref(ev);
		if (r == 1)
			continue;
		if (r < 0) {
			fprintf(stderr, "deskgate audit: the egress proxy's channel broke: %s\n",
				err.msg);
			dg_egress_stop(&au->egress);
			au->egress_up = false;
		}
		break;
	}
}

/* ---- running one probe ----------------------------------------------------- */

struct run {
	int exit_code;       /* 128 + signal when killed; -1 when it never ran */
	bool timed_out;
	int verdict;         /* 0 CONTAINED, 1 LEAKED, 2 ERROR, 3 KERNEL, -1 no verdict line */
	char line[DG_AUDIT_EVIDENCE_MAX]; /* the verdict line's evidence */
	char out[DG_AUDIT_OUT_MAX + 1], err[DG_AUDIT_OUT_MAX + 1];
	size_t out_len, err_len;
};

/* Reads what is there into buf (at most DG_AUDIT_OUT_MAX kept, the rest
 * drained); closes *fd at EOF. */
static void drain(int *fd, char *buf, size_t *len)
{
	char tmp[16384];
	ssize_t k = read(*fd, tmp, sizeof(tmp));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	size_t n = (size_t)k;
	if (*len + n > DG_AUDIT_OUT_MAX)
		n = DG_AUDIT_OUT_MAX - *len;
	memcpy(buf + *len, tmp, n);
	*len += n;
	buf[*len] = '\0';
}

/* The probe's verdict words, by verdict number (struct run). */
static const char *const verdict_words[] = {"CONTAINED", "LEAKED", "ERROR", "KERNEL"};

/* The last verdict line of text: 0 CONTAINED, 1 LEAKED, 2 ERROR, 3 KERNEL,
 * -1 none; its evidence copied into line. */
static int find_verdict(const char *text, char *line, size_t len)
{
	static const char *const words[] = {"CONTAINED ", "LEAKED ", "ERROR ", "KERNEL "};
	int v = -1;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		for (int i = 0; i < 4; i++) {
			size_t wl = strlen(words[i]);
			if (strncmp(p, words[i], wl) == 0) {
				size_t l = strcspn(p + wl, "\n");
				fmt(line, len, "%.*s", (int)l, p + wl);
				v = i;
			}
		}
	}
	return v;
}

/* The probe's argv (DG_AUDIT_PROBE_EXE, then args) in argv (room for
 * DG_AUDIT_ARGS_MAX + 2), and its two output pipes. Returns 0, or a
 * negative errno (err says why; nothing is left open). */
static int run_prepare(const char *const *args, const char **argv, int out[2], int errp[2],
		       struct dg_err *err)
{
	size_t n = 0;
	argv[n++] = DG_AUDIT_PROBE_EXE;
	for (size_t i = 0; args[i]; i++) {
		if (n > DG_AUDIT_ARGS_MAX)
			return dg_err_set(err, -E2BIG, "more than %d probe arguments",
					  DG_AUDIT_ARGS_MAX);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC) != 0)
		return dg_err_set(err, -errno, "pipe: %s", strerror(errno));
	if (pipe2(errp, O_CLOEXEC) != 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return dg_err_set(err, -e, "pipe: %s", strerror(e));
	}
	return 0;
}

/* Reads the outputs fo and fe of the probe run by process sup into r until
 * both end and sup is reaped, keeping the session alive meanwhile (pump);
 * at the deadline (timeout_ms) sends SIGTERM to kill_target (a pid, or a
 * process group as -pgid), SIGKILL DG_AUDIT_KILL_GRACE_MS later. Closes fo
 * and fe; fills the exit code and the verdict. */
static void run_collect(struct audit *au, pid_t sup, pid_t kill_target, int fo, int fe,
			int timeout_ms, struct run *r)
{
	long long deadline = dg_now_ms() + timeout_ms;
	bool termed = false, reaped = false;
	int status = 0;
	while (!reaped || fo >= 0 || fe >= 0) {
		long long now = dg_now_ms();
		if (now >= deadline && !termed) {
			r->timed_out = termed = true;
			kill(kill_target, SIGTERM);
		}
		if (termed && now >= deadline + DG_AUDIT_KILL_GRACE_MS) {
			if (!reaped)
				kill(kill_target, SIGKILL);
			/* A descendant that left the group may hold the pipes. */
			if (fo >= 0)
				close(fo);
			if (fe >= 0)
				close(fe);
			fo = fe = -1;
		}
		if (!reaped && waitpid(sup, &status, WNOHANG) == sup)
			reaped = true;
		if (reaped && fo < 0 && fe < 0)
			break;
		struct pollfd p[4] = {{fo, POLLIN, 0},
				      {fe, POLLIN, 0},
				      {au->worker_up ? au->worker.ctl : -1, POLLIN, 0},
				      {au->egress_up ? au->egress.fd : -1, POLLIN, 0}};
		long long left = (termed ? deadline + DG_AUDIT_KILL_GRACE_MS : deadline) - now;
		int wait = reaped ? (int)(left > 0 ? left : 0) : 50; /* reaping is polled */
		if (poll(p, 4, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
			break;
		if (fo >= 0 && p[0].revents)
			drain(&fo, r->out, &r->out_len);
		if (fe >= 0 && p[1].revents)
			drain(&fe, r->err, &r->err_len);
		if (p[2].revents || p[3].revents)
			pump(au);
	}
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	if (!reaped) {
		kill(kill_target, SIGKILL);
		waitpid(sup, &status, 0);
	}
	r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	r->verdict = find_verdict(r->out, r->line, sizeof(r->line));
	if (r->verdict < 0)
		r->verdict = find_verdict(r->err, r->line, sizeof(r->line));
}

/* Runs the probe with args inside desktop d's jail, as an exec action runs,
 * bounded by timeout_ms. Returns 0 with r filled (whatever the probe said),
 * or a negative errno when it could not be started (err says why). */
/* Runs the probe with args in d's jail as the exec action runs programs,
 * under the policy's limits; with open_desktop, with limits.exec_desktop
 * true whatever the policy says (the controls that must see a desktop). */
static int run_probe_as(struct audit *au, struct dg_desktop *d, const char *const *args,
			int timeout_ms, bool open_desktop, struct run *r, struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	r->verdict = -1;
	const char *argv[DG_AUDIT_ARGS_MAX + 2];
	int out[2], errp[2];
	int rc = run_prepare(args, argv, out, errp, err);
	if (rc)
		return rc;
	int pass[1] = {au->probe_fd};
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = -1, .stdout_fd = out[1],
				    .stderr_fd = errp[1], .pass_fds = pass, .n_pass_fds = 1,
				    .env_extra = probe_env};
	pid_t sup;
	struct dg_limits lim = au->policy.limits;
	if (open_desktop)
		lim.exec_desktop = 1;
	rc = dg_jail_enter(&d->jail, &prog, &lim, &sup, err);
	close(out[1]);
	close(errp[1]);
	if (rc) {
		close(out[0]);
		close(errp[0]);
		return rc;
	}
	/* SIGTERM to the supervisor kills the probe's process group. */
	run_collect(au, sup, sup, out[0], errp[0], timeout_ms, r);
	return 0;
}

static int run_probe(struct audit *au, struct dg_desktop *d, const char *const *args,
		     int timeout_ms, struct run *r, struct dg_err *err)
{
	return run_probe_as(au, d, args, timeout_ms, false, r, err);
}

/* Where a control runs: the other session, or the audited one with its
 * desktop opened to exec (DG_AUDIT_CONTROL_SELF). Either way the desktop is
 * open to the control: a control must see what it looks for (its own X
 * server, its own marker process), which exec does not by default. */
static struct dg_desktop *control_desktop(struct audit *au, const char *control, bool *up)
{
	bool self = strcmp(control, DG_AUDIT_CONTROL_SELF) == 0;
	*up = self ? au->a_up : au->b_up;
	return self ? &au->a : &au->b;
}

/* Runs the probe with args on the host, as root, in no jail and under no
 * filter: the host control of a probe whose calls depend on the kernel
 * (probe_kernel), which shows what this kernel alone answers. It is the
 * audit's own probe (the sealed memfd, as descriptor 3 executed as
 * DG_AUDIT_PROBE_EXE, as in the jail), with stdin /dev/null, no environment,
 * no other descriptor, in a process group of its own (killed whole at the
 * deadline, timeout_ms). Returns 0 with r filled, or a negative errno. */
static int run_host(struct audit *au, const char *const *args, int timeout_ms, struct run *r,
		    struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	r->verdict = -1;
	const char *argv[DG_AUDIT_ARGS_MAX + 2];
	int out[2], errp[2];
	int rc = run_prepare(args, argv, out, errp, err);
	if (rc)
		return rc;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		static char *const envp[] = {NULL};
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (setpgid(0, 0) != 0 || null < 0 || dup2(null, 0) != 0 || dup2(out[1], 1) != 1 ||
		    dup2(errp[1], 2) != 2 ||
		    (au->probe_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(au->probe_fd, 3)) < 0 ||
		    syscall(SYS_close_range, 4, ~0u, 0) != 0)
			_exit(126);
		execve(DG_AUDIT_PROBE_EXE, (char *const *)argv, envp);
		_exit(127);
	}
	int e = errno;
	if (pid > 0)
		setpgid(pid, pid); /* also here: the deadline's kill must find the group */
	close(out[1]);
	close(errp[1]);
	if (pid < 0) {
		close(out[0]);
		close(errp[0]);
		return dg_err_set(err, -e, "fork: %s", strerror(e));
	}
	run_collect(au, pid, -pid, out[0], errp[0], timeout_ms, r);
	return 0;
}


/* Joins a probe's arguments into its command line, for the report. */
static void command_line(const char *const *args, char *buf, size_t len)
{
	fmt(buf, len, "%s", DG_AUDIT_PROBE_NAME);
	for (size_t i = 0; args[i]; i++) {
		size_t l = strlen(buf);
		fmt(buf + l, len - l, " %s", args[i]);
	}
}

/* What a run that gave no usable verdict shows: the deadline, the exit and
 * the tail of its stderr. */
static void describe_failure(const struct run *r, char *buf, size_t len)
{
	const char *tail = r->err;
	if (r->err_len > 300)
		tail = r->err + r->err_len - 300;
	if (r->verdict == 2)
		fmt(buf, len, "the probe could not run: %s", r->line);
	else if (r->verdict == 3)
		fmt(buf, len, "the probe says the kernel refused it, but no host control backs that "
		    "for this probe: %s", r->line);
	else if (r->timed_out)
		fmt(buf, len, "no verdict before the deadline (killed); stderr: %s",
		    tail[0] ? tail : "-");
	else
		fmt(buf, len, "no verdict line (exit %d); stderr: %s", r->exit_code,
		    tail[0] ? tail : "-");
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
}

/* ---- findings from probes -------------------------------------------------- */

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

enum expect {
	EXPECT_CONTAINED, /* the policy and the jail must stop it */
	EXPECT_ALLOWED,   /* the policy allows it: reported as allowed, evidence as seen */
};

/* Judges what only the host can: called with a probe's run when it gave a
 * verdict, may change the finding's outcome and evidence. */
typedef void (*judge_fn)(struct finding *f, const struct run *r);

/* Runs one probe in the audited session and records its finding. With
 * control non-NULL, the same arguments run in the other session first, where
 * the probe must report LEAKED (it sees its own X server, processes, files);
 * otherwise the probe cannot tell and the finding is an error. judge, when
 * not NULL, has the last word (see judge_fn). Returns the finding (NULL past
 * the cap). */
static struct finding *probe_judged(struct audit *au, const char *edge, const char *id,
				    const char *tried, const char *sink, enum expect expect,
				    const char *control, int timeout_ms, const char *const *args,
				    judge_fn judge)
{
	struct finding *f = add(au, edge, id, tried, sink);
	if (!f)
		return NULL;
	command_line(args, f->probe, sizeof(f->probe));
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	if (!r) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		return f;
	}
	struct dg_err err = {{0}};
	if (control) {
		bool up;
		struct dg_desktop *cd = control_desktop(au, control, &up);
		if (!up || run_probe_as(au, cd, args, timeout_ms, true, r, &err) != 0) {
			fmt(f->evidence, sizeof(f->evidence), "the control in %s could not run: %s",
			    control, up ? err.msg : "it is not running");
			free(r);
			return f;
		}
		if (r->verdict != 1) {
			char why[DG_AUDIT_EVIDENCE_MAX];
			if (r->verdict == 0)
				fmt(why, sizeof(why), "it reported CONTAINED: %s", r->line);
			else
				describe_failure(r, why, sizeof(why));
			fmt(f->evidence, sizeof(f->evidence),
			    "the control in %s must see what it looks for, and did not, so the "
			    "probe proves nothing here (%s)",
			    control, why);
			free(r);
			return f;
		}
		fmt(f->control, sizeof(f->control), "in %s: %s", control, r->line);
	}
	if (!au->a_up || run_probe(au, &au->a, args, timeout_ms, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it in the session: %s",
		    au->a_up ? err.msg : "the session is not running");
		free(r);
		return f;
	}
	if (r->verdict == 0 || r->verdict == 1) {
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
		f->outcome = expect == EXPECT_ALLOWED ? OUT_ALLOWED
			     : r->verdict == 0      ? OUT_CONTAINED
						    : OUT_LEAKED;
		if (judge)
			judge(f, r);
	} else if (expect == EXPECT_ALLOWED && r->verdict == 2) {
		/* Allowed by the policy, whatever the answer: no answer in time
		 * (the proxy still resolving a name this machine cannot) is what
		 * "allowed" looks like here. */
		f->outcome = OUT_ALLOWED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else {
		describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
	return f;
}

static struct finding *probe(struct audit *au, const char *edge, const char *id,
			     const char *tried, const char *sink, enum expect expect,
			     const char *control, int timeout_ms, const char *const *args)
{
	return probe_judged(au, edge, id, tried, sink, expect, control, timeout_ms, args, NULL);
}

/* A host control's RESULT lines, as --host-result arguments for the jail's
 * run of the same probe. */
struct host_results {
	char kv[DG_AUDIT_HOST_RESULTS_MAX][DG_AUDIT_HOST_RESULT_LEN];
	int n;
};

static void host_results_of(const char *out, struct host_results *h)
{
	h->n = 0;
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, "RESULT ", 7) != 0 || h->n >= DG_AUDIT_HOST_RESULTS_MAX)
			continue;
		size_t l = strcspn(p + 7, " \t\n");
		if (l > 0 && l < DG_AUDIT_HOST_RESULT_LEN)
			fmt(h->kv[h->n++], DG_AUDIT_HOST_RESULT_LEN, "%.*s", (int)l, p + 7);
	}
}

/* Runs one probe whose calls depend on the host's kernel (probe.c,
 * "Kernel refusals": kexec, modules, x32, int 0x80, bpf, socket families,
 * procfs knobs...): first on the host (run_host: the control, where the
 * kernel alone answers each call, as root with no filter), then in the
 * audited session with the control's RESULT lines as --host-result
 * arguments. The control's verdict line becomes the finding's control. The
 * finding is contained-by-kernel only when the jail's probe says KERNEL
 * (a call ended exactly as the host's kernel ended it, refused) and the
 * host control showed the kernel refusing a call (a RESULT other than
 * "ok"); a KERNEL the control does not back is an error. A control that
 * could not run leaves the jail's probe without host results: it then says
 * CONTAINED or LEAKED where it can tell, ERROR where it cannot. */
static struct finding *probe_kernel(struct audit *au, const char *edge, const char *id,
				    const char *tried, const char *sink, const char *const *args)
{
	struct finding *f = add(au, edge, id, tried, sink);
	if (!f)
		return NULL;
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	struct host_results *h = calloc(1, sizeof(*h));
	if (!r || !h) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		free(r);
		free(h);
		return f;
	}
	struct dg_err err = {{0}};
	int host_refused = 0; /* calls the host's kernel refused */
	if (run_host(au, args, DG_AUDIT_PROBE_MS, r, &err) != 0) {
		fmt(f->control, sizeof(f->control), "on the host: could not run: %s", err.msg);
	} else if (r->verdict < 0 || r->verdict == 2) {
		char why[DG_AUDIT_EVIDENCE_MAX];
		describe_failure(r, why, sizeof(why));
		fmt(f->control, sizeof(f->control), "on the host: %s", why);
	} else {
		host_results_of(r->out, h);
		for (int i = 0; i < h->n; i++)
			host_refused += strcmp(strrchr(h->kv[i], '=') ? strrchr(h->kv[i], '=') : "=ok",
					       "=ok") != 0;
		fmt(f->control, sizeof(f->control), "on the host, as root with no filter: %s %s",
		    verdict_words[r->verdict], r->line);
	}
	const char *jargs[DG_AUDIT_ARGS_MAX + 1];
	size_t n = 0;
	jargs[n++] = args[0];
	for (int i = 0; i < h->n && n + 2 < DG_AUDIT_ARGS_MAX; i++) {
		jargs[n++] = "--host-result";
		jargs[n++] = h->kv[i];
	}
	for (size_t i = 1; args[i] && n < DG_AUDIT_ARGS_MAX; i++)
		jargs[n++] = args[i];
	jargs[n] = NULL;
	command_line(jargs, f->probe, sizeof(f->probe));
	if (!au->a_up || run_probe(au, &au->a, jargs, DG_AUDIT_PROBE_MS, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it in the session: %s",
		    au->a_up ? err.msg : "the session is not running");
	} else if (r->verdict == 0 || r->verdict == 1) {
		f->outcome = r->verdict == 0 ? OUT_CONTAINED : OUT_LEAKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->verdict == 3 && host_refused > 0) {
		f->outcome = OUT_KERNEL;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->verdict == 3) {
		fmt(f->evidence, sizeof(f->evidence), "the probe says the kernel refused it (%s), but "
		    "the host control did not show the kernel refusing it (%s)", r->line,
		    f->control);
	} else {
		describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
	free(h);
	return f;
}

/* FNV-1a, 64 bits, as probe.c computes it: values are compared here, on
 * the host; the host's values never enter the jail, not even hashed. */
static uint64_t fnv1a64(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The env probe prints "HOSTVAR <hash> <where> <name>" for each variable in
 * the session named like one of ours: a leak when it also holds our value.
 * A name alone is no leak (Chromium sets DBUS_SESSION_BUS_ADDRESS for its
 * crash handler, which the host may have too). */
static void judge_env(struct finding *f, const struct run *r)
{
	int same = 0, other = 0;
	char leaks[1024] = "";
	for (const char *p = r->out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long long h;
		char where[256], name[256];
		if (sscanf(p, "HOSTVAR %llx %255s %255[^\n]", &h, where, name) != 3)
			continue;
		const char *v = getenv(name);
		if (v && fnv1a64(v, strlen(v)) == h) {
			size_t l = strlen(leaks);
			if (same++ < 6)
				fmt(leaks + l, sizeof(leaks) - l, "%s%s in %s", l ? ", " : "", name,
				    where);
		} else {
			other++;
		}
	}
	size_t l = strlen(f->evidence);
	if (same) {
		f->outcome = OUT_LEAKED;
		fmt(f->evidence + l, sizeof(f->evidence) - l, "; %d variable(s) with the host's name "
		    "and value: %s%s", same, leaks, same > 6 ? ", ..." : "");
	} else if (other) {
		fmt(f->evidence + l, sizeof(f->evidence) - l, "; %d variable(s) named like the "
		    "host's hold values of their own (set inside the session)", other);
	}
}

/* ---- host facts handed to the probes --------------------------------------- */

/* "MAJ:MIN:INO" of path on the host, or "" when it does not exist. */
static bool file_id(const char *path, char *out, size_t len)
{
	struct stat st;
	out[0] = '\0';
	if (lstat(path, &st) != 0)
		return false;
	fmt(out, len, "%u:%u:%llu", major(st.st_dev), minor(st.st_dev),
	    (unsigned long long)st.st_ino);
	return true;
}

/* Arguments of a same-file probe: pairs PATH ID for every path that exists
 * on the host. Strings live in store (room for cap pairs). */
struct pairs {
	const char *args[DG_AUDIT_ARGS_MAX + 1];
	char paths[DG_AUDIT_ARGS_MAX / 2][PATH_MAX];
	char ids[DG_AUDIT_ARGS_MAX / 2][64];
	int n;      /* pairs */
	char list[1024]; /* the paths, for the report */
};

static void pairs_add(struct pairs *p, const char *path)
{
	if (p->n >= DG_AUDIT_ARGS_MAX / 2 - 1)
		return;
	if (!file_id(path, p->ids[p->n], sizeof(p->ids[0])))
		return;
	fmt(p->paths[p->n], sizeof(p->paths[0]), "%s", path);
	p->args[0] = "same-file";
	p->args[1 + 2 * p->n] = p->paths[p->n];
	p->args[2 + 2 * p->n] = p->ids[p->n];
	p->args[3 + 2 * p->n] = NULL;
	size_t l = strlen(p->list);
	fmt(p->list + l, sizeof(p->list) - l, "%s%s", l ? ", " : "", path);
	p->n++;
}

/* The host's namespaces (ours) and the other session's, as ns-ids
 * arguments "WHO:TYPE:INO". */
static const char *const ns_types[] = {"user", "mnt", "net", "ipc", "uts", "pid", "cgroup"};
#define N_NS_TYPES (sizeof(ns_types) / sizeof(ns_types[0]))

static int ns_args(pid_t other, char store[][64], const char **args)
{
	int n = 0;
	args[n] = "ns-ids";
	for (int who = 0; who < 2; who++) {
		for (size_t i = 0; i < N_NS_TYPES; i++) {
			char path[64];
			struct stat st;
			if (who == 0)
				fmt(path, sizeof(path), "/proc/self/ns/%s", ns_types[i]);
			else
				fmt(path, sizeof(path), "/proc/%d/ns/%s", (int)other, ns_types[i]);
			if (stat(path, &st) != 0)
				return -errno;
			fmt(store[n], 64, "%s:%s:%llu", who == 0 ? "host" : "other-session",
			    ns_types[i], (unsigned long long)st.st_ino);
			args[1 + n] = store[n];
			n++;
		}
	}
	args[1 + n] = NULL;
	return n;
}

/* ---- the battery ------------------------------------------------------------ */

static void egress_edge(struct audit *au)
{
	char port[16], sink[256], tried[256], target[300];
	fmt(port, sizeof(port), "%d", au->tcp_port);
	probe(au, "egress", "direct-outside-v4",
	      "TCP straight to " DG_AUDIT_OUTSIDE_V4 ":80, an outside address (TEST-NET-1)",
	      DG_AUDIT_OUTSIDE_V4 ":80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("connect", DG_AUDIT_OUTSIDE_V4, "80"));
	probe(au, "egress", "direct-outside-v6",
	      "TCP straight to [" DG_AUDIT_OUTSIDE_V6 "]:80, an outside IPv6 address",
	      "[" DG_AUDIT_OUTSIDE_V6 "]:80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("connect", DG_AUDIT_OUTSIDE_V6, "80"));
	probe(au, "egress", "direct-metadata",
	      "TCP straight to the cloud metadata service, " DG_AUDIT_METADATA ":80",
	      DG_AUDIT_METADATA ":80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("connect", DG_AUDIT_METADATA, "80"));
	fmt(tried, sizeof(tried), "TCP to a service on the host's loopback, 127.0.0.1:%d (a "
	    "listener the audit opened)", au->tcp_port);
	fmt(sink, sizeof(sink), "127.0.0.1:%d on the host", au->tcp_port);
	probe(au, "egress", "direct-host-loopback", tried, sink, EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS, ARGS("connect", "127.0.0.1", port));
	probe(au, "egress", "dns", "a DNS query for " DG_AUDIT_DNS_NAME ", as the libc resolver "
	      "sends it", "the nameservers of the jail's resolv.conf (127.0.0.1:53 without one)",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("dns", DG_AUDIT_DNS_NAME));
	/* The kernel may lack a family: each has a host control. */
	probe_kernel(au, "egress", "raw-socket", "raw IP sockets (ICMP, IPPROTO_RAW, ICMPv6)",
		     "the network layer", ARGS("raw-socket"));
	probe_kernel(au, "egress", "packet-socket", "AF_PACKET sockets", "the link layer",
		     ARGS("packet-socket"));
	probe_kernel(au, "egress", "socket-families", "sockets of other families (vsock, alg, "
		     "key, netlink uevent/audit/diag)", "the kernel's other socket families",
		     ARGS("socket-families"));

	/* Through the proxy: what the policy does not allow must get a 403.
	 * The proxy's own answer is the evidence, with its rule. */
	struct dg_decision d;
	dg_policy_decide_egress(&au->policy, DG_AUDIT_DENIED_HOST, 443, &d);
	fmt(tried, sizeof(tried), "CONNECT %s:443 through the egress proxy (the policy says %s, "
	    "%s)", DG_AUDIT_DENIED_HOST, dg_verdict_name(d.verdict), d.rule);
	probe(au, "egress", "proxy-denied-connect", tried,
	      DG_AUDIT_DENIED_HOST ":443 via the egress proxy at " DG_JAIL_EGRESS_URL,
	      d.verdict == DG_VERDICT_ALLOW ? EXPECT_ALLOWED : EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS,
	      ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", DG_AUDIT_DENIED_HOST ":443"));
	dg_policy_decide_egress(&au->policy, DG_AUDIT_DENIED_HOST, 80, &d);
	fmt(tried, sizeof(tried), "GET http://%s/ through the egress proxy (the policy says %s, "
	    "%s)", DG_AUDIT_DENIED_HOST, dg_verdict_name(d.verdict), d.rule);
	probe(au, "egress", "proxy-denied-http", tried,
	      "http://" DG_AUDIT_DENIED_HOST "/ via the egress proxy",
	      d.verdict == DG_VERDICT_ALLOW ? EXPECT_ALLOWED : EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS,
	      ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "GET", DG_AUDIT_DENIED_HOST));
	/* Addresses that are never public: refused whatever the allowlist says
	 * (the proxy's address check), so always expected contained. */
	probe(au, "egress", "proxy-metadata", "CONNECT " DG_AUDIT_METADATA ":80 (metadata) "
	      "through the egress proxy", DG_AUDIT_METADATA ":80 via the egress proxy",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", DG_AUDIT_METADATA ":80"));
	fmt(target, sizeof(target), "127.0.0.1:%d", au->tcp_port);
	fmt(tried, sizeof(tried), "CONNECT %s (the host's loopback service) through the egress "
	    "proxy", target);
	fmt(sink, sizeof(sink), "%s on the host, via the egress proxy", target);
	probe(au, "egress", "proxy-host-loopback", tried, sink, EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS, ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", target));

	/* What the policy allows: tried once per pattern (a "*." pattern with
	 * "www."), reported as allowed with the proxy's answer. No internet is
	 * needed: an answer that the name did not resolve, or none yet, is
	 * still the proxy letting the request through. */
	json_t *allow = dg_policy_egress_json(&au->policy);
	size_t i;
	json_t *v;
	int tried_n = 0;
	json_array_foreach(allow, i, v)
	{
		if (tried_n >= DG_AUDIT_ALLOWED_MAX)
			break;
		const char *pat = json_string_value(v);
		const char *colon = pat ? strrchr(pat, ':') : NULL;
		if (!colon)
			continue;
		bool wild = strncmp(pat, "*.", 2) == 0;
		fmt(target, sizeof(target), "%s%.*s", wild ? "www." : "",
		    (int)(colon - pat - (wild ? 2 : 0)), pat + (wild ? 2 : 0));
		long p = strtol(colon + 1, NULL, 10);
		dg_policy_decide_egress(&au->policy, target, (uint16_t)p, &d);
		if (d.verdict != DG_VERDICT_ALLOW)
			continue;
		size_t tl = strlen(target);
		fmt(target + tl, sizeof(target) - tl, ":%ld", p);
		char id[64], wait[16];
		fmt(id, sizeof(id), "proxy-allowed-%d", tried_n);
		fmt(tried, sizeof(tried), "CONNECT %s through the egress proxy (the policy allows "
		    "it: %s, %s)", target, d.rule, pat);
		fmt(sink, sizeof(sink), "%s via the egress proxy", target);
		fmt(wait, sizeof(wait), "%d", DG_AUDIT_ALLOWED_WAIT_MS);
		probe(au, "egress", id, tried, sink, EXPECT_ALLOWED, NULL,
		      DG_AUDIT_ALLOWED_WAIT_MS + DG_AUDIT_PROBE_MS,
		      ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", target, wait));
		tried_n++;
	}
	json_decref(allow);
}

static void filesystem_edge(struct audit *au)
{
	struct pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	char tried[1400], sink[1200];
	/* Host homes: /root, /home and what /home holds. */
	pairs_add(p, "/root");
	pairs_add(p, "/home");
	DIR *dir = opendir("/home");
	struct dirent *e;
	int homes = 0;
	while (dir && (e = readdir(dir)) && homes < DG_AUDIT_HOME_MAX) {
		if (e->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		fmt(path, sizeof(path), "/home/%s", e->d_name);
		pairs_add(p, path);
		homes++;
	}
	if (dir)
		closedir(dir);
	fmt(tried, sizeof(tried), "the host's home directories (%s), found by device and inode",
	    p->list);
	fmt(sink, sizeof(sink), "the host's %s", p->list);
	probe(au, "filesystem", "host-homes", tried, sink, EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS, p->args);
	probe(au, "filesystem", "shadow", "reading /etc/shadow", "/etc/shadow", EXPECT_CONTAINED,
	      NULL, DG_AUDIT_PROBE_MS, ARGS("read-file", "/etc/shadow"));

	/* A world-readable host file in a fresh directory: only the mount
	 * namespace can keep it out of sight. */
	memset(p, 0, sizeof(*p));
	pairs_add(p, au->tmp_file);
	fmt(tried, sizeof(tried), "the host's world-readable %s (made by the audit), by device "
	    "and inode", au->tmp_file);
	probe(au, "filesystem", "host-tmp", tried, au->tmp_file, EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS, p->args);
	fmt(tried, sizeof(tried), "reading the host's %s by its path", au->tmp_file);
	probe(au, "filesystem", "host-tmp-read", tried, au->tmp_file, EXPECT_CONTAINED, NULL,
	      DG_AUDIT_PROBE_MS, ARGS("read-file", au->tmp_file));

	/* The gateway's own directories, when this machine has them. */
	memset(p, 0, sizeof(*p));
	if (au->state_dir)
		pairs_add(p, au->state_dir);
	if (au->recordings)
		pairs_add(p, au->recordings);
	if (p->n > 0) {
		fmt(tried, sizeof(tried), "the gateway's state and recordings directories (%s), by "
		    "device and inode", p->list);
		probe(au, "filesystem", "gateway-dirs", tried, p->list, EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, p->args);
	}
	probe(au, "filesystem", "proc-1-root", "listing /proc/1/root (PID 1's root directory)",
	      "/proc/1/root", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("list-dir", "/proc/1/root"));
	probe(au, "filesystem", "sys", "listing /sys and opening its attributes for writing",
	      "/sys", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("sys-write"));
	/* A kernel without magic SysRq has no /proc/sysrq-trigger at all: the
	 * host control tells that from the jail hiding it. */
	probe_kernel(au, "filesystem", "proc-knobs", "opening /proc/sys/kernel/core_pattern and "
		     "/proc/sysrq-trigger for writing (never written)",
		     "/proc/sys/kernel/core_pattern, /proc/sysrq-trigger",
		     ARGS("open-write", "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"));
	static const char *const sysdirs[] = {"/usr", "/etc", "/"};
	for (size_t i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++) {
		char id[32];
		fmt(id, sizeof(id), "write-%s", i == 2 ? "root" : sysdirs[i] + 1);
		fmt(tried, sizeof(tried), "creating a file in %s", sysdirs[i]);
		probe(au, "filesystem", id, tried, sysdirs[i], EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, ARGS("write-dir", sysdirs[i]));
	}
	/* Device nodes: making one, and the host's sensitive ones by identity. */
	probe(au, "filesystem", "mknod", "making a device node (c 1 3) in the writable /tmp",
	      "device nodes", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("mknod", "/tmp"));
	memset(p, 0, sizeof(*p));
	static const char *const devs[] = {"/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg"};
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		pairs_add(p, devs[i]);
	dir = opendir("/dev");
	int blocks = 0;
	while (dir && (e = readdir(dir)) && blocks < DG_AUDIT_BLOCKDEV_MAX) {
		char path[PATH_MAX];
		struct stat st;
		fmt(path, sizeof(path), "/dev/%s", e->d_name);
		if (lstat(path, &st) == 0 && S_ISBLK(st.st_mode)) {
			pairs_add(p, path);
			blocks++;
		}
	}
	if (dir)
		closedir(dir);
	if (p->n > 0) {
		fmt(tried, sizeof(tried), "the host's device nodes (%s), by device and inode",
		    p->list);
		probe(au, "filesystem", "host-devices", tried, p->list, EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, p->args);
	}
	probe(au, "filesystem", "remount", "remounting / and /usr read-write", "the jail's mounts",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("remount"));
	probe(au, "filesystem", "mount", "mounting a tmpfs on /tmp", "the mount table",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("mount-tmpfs", "/tmp"));
	probe(au, "filesystem", "leaked-fd", "a descriptor inherited from the host (3 and up)",
	      "descriptors", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("leaked-fd"));
	free(p);
}

/* The names of our own environment, comma-separated, for `env --host`: a
 * name the host has must not show inside. Names with a comma (none in
 * practice) are left out; the list is bounded by len. */
static void host_env_names(char *out, size_t len)
{
	extern char **environ;
	out[0] = '\0';
	for (char **e = environ; *e; e++) {
		size_t kl = strcspn(*e, "="), l = strlen(out);
		if (kl == 0 || memchr(*e, ',', kl) || l + kl + 2 > len)
			continue;
		fmt(out + l, len - l, "%s%.*s", l ? "," : "", (int)kl, *e);
	}
}

static void credentials_edge(struct audit *au)
{
	char *names = malloc(DG_AUDIT_ENV_NAMES_MAX);
	if (names) {
		host_env_names(names, DG_AUDIT_ENV_NAMES_MAX);
		probe_judged(au, "credentials", "environment", "the environment of every process "
			     "in the session (its own and /proc/*/environ): the host's variables "
			     "and a canary value the audit put into its own environment",
			     "the host's environment", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
			     ARGS("env", "--allow", DG_AUDIT_ENV_ALLOW, "--host", names, au->canary),
			     judge_env);
		free(names);
	}
	char min[32];
	fmt(min, sizeof(min), "%u", DG_JAIL_ID_BASE);
	probe(au, "credentials", "ids", "its uid, gid, groups and their maps to host ids",
	      "host root and the host's users", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("ids", min));
	probe(au, "credentials", "privileges", "its capabilities, no_new_privs and seccomp mode "
	      "(/proc/self/status)", "capabilities", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
	      ARGS("status"));
	probe_kernel(au, "credentials", "keyrings", "the kernel's session and user keyrings "
		     "(keyctl)", "kernel keyrings", ARGS("keyctl"));
	probe(au, "credentials", "cred-files", "credential files (~/.ssh, ~/.aws, ... of every "
	      "home it sees, container secrets, SSH host keys)", "credential files",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("cred-files"));
	struct pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	if (au->state_dir) {
		char path[PATH_MAX];
		fmt(path, sizeof(path), "%s/tokens.json", au->state_dir);
		pairs_add(p, path);
		fmt(path, sizeof(path), "%s/recording-key.pem", au->state_dir);
		pairs_add(p, path);
	}
	if (p->n > 0) {
		char tried[1200];
		fmt(tried, sizeof(tried), "the gateway's token file and recording key (%s), by "
		    "device and inode", p->list);
		probe(au, "credentials", "gateway-secrets", tried, p->list, EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, p->args);
	}
	free(p);
}

/* The browser's paths around the urls rules (cli-audit-browser.c): run
 * twice, once with the bait's /secret/ paths denied (the probe) and once
 * allowed (the control, which must see them arrive). */
static void browser_edge(struct audit *au)
{
	struct finding *ws = add(au, "egress", "browser-websocket",
				 "WebSockets from a page and from its worker to a path the urls rules "
				 "deny (ws://" DG_AUDIT_BAIT_HOST ":PORT/secret/...), the host and port "
				 "allowed by egress",
				 "a denied URL, around the browser's request guard");
	struct finding *om = add(au, "egress", "browser-omnibox",
				 "a denied URL typed into the omnibox and opened in a new tab with "
				 "alt+Enter (driven through the worker)",
				 "a denied URL, through a tab the browser opens itself");
	if (!ws || !om)
		return;
	const char *src = "a fresh browser desktop under the audit's bait policy (the site "
			  "allowed, its /secret/ paths denied), driven through its worker";
	fmt(ws->source, sizeof(ws->source), "%s", src);
	fmt(om->source, sizeof(om->source), "%s", src);
	fmt(ws->probe, sizeof(ws->probe), "bait page: new WebSocket(/ok/page, /secret/page) and "
	    "a worker doing the same");
	fmt(om->probe, sizeof(om->probe), "key ctrl+l; type http://" DG_AUDIT_BAIT_HOST
	    ":PORT/secret/omnibox.html; key alt+Return");
	struct dg_audit_bait_seen *c = malloc(sizeof(*c)), *p = malloc(sizeof(*p));
	struct dg_err err = {{0}};
	if (!c || !p || dg_audit_browser_paths(&au->policy.limits, false, c, &err) != 0) {
		fmt(ws->evidence, sizeof(ws->evidence), "the control could not run: %s",
		    c && p ? err.msg : "out of memory");
		fmt(om->evidence, sizeof(om->evidence), "%s", ws->evidence);
		goto out;
	}
	fmt(ws->control, sizeof(ws->control), "under the same policy without the deny: "
	    "/secret/page %s, /secret/worker %s (the bait saw: %.400s)",
	    c->secret_page ? "arrived" : "did not arrive",
	    c->secret_worker ? "arrived" : "did not arrive", c->log);
	fmt(om->control, sizeof(om->control), "under the same policy without the deny: the typed "
	    "URL %s", c->secret_omnibox ? "arrived" : "did not arrive");
	bool ws_control = c->secret_page && c->secret_worker;
	if (dg_audit_browser_paths(&au->policy.limits, true, p, &err) != 0) {
		fmt(ws->evidence, sizeof(ws->evidence), "could not run: %s", err.msg);
		fmt(om->evidence, sizeof(om->evidence), "%s", ws->evidence);
		goto out;
	}
	if (!ws_control)
		fmt(ws->evidence, sizeof(ws->evidence), "the control must see the denied WebSockets "
		    "arrive, and did not, so the probe proves nothing here");
	else if (!p->ok_page || !p->ok_worker)
		fmt(ws->evidence, sizeof(ws->evidence), "the page or its worker did not run (the "
		    "allowed WebSockets did not arrive: %.400s)", p->log);
	else {
		ws->outcome = p->secret_page || p->secret_worker ? OUT_LEAKED : OUT_CONTAINED;
		fmt(ws->evidence, sizeof(ws->evidence), "allowed /ok/ WebSockets arrived; /secret/page "
		    "%s, /secret/worker %s (the bait saw: %.400s)",
		    p->secret_page ? "ARRIVED" : "never arrived",
		    p->secret_worker ? "ARRIVED" : "never arrived", p->log);
	}
	if (!c->secret_omnibox)
		fmt(om->evidence, sizeof(om->evidence), "the control must see the typed URL arrive, "
		    "and did not, so the probe proves nothing here");
	else if (!p->ok_omnibox && !p->secret_omnibox)
		fmt(om->evidence, sizeof(om->evidence), "an allowed URL opened the same way did not "
		    "arrive either: the keys did not open a tab here (%.400s)", p->log);
	else {
		om->outcome = p->secret_omnibox ? OUT_LEAKED : OUT_CONTAINED;
		fmt(om->evidence, sizeof(om->evidence), "the typed URL %s; an allowed one opened "
		    "the same way %s",
		    p->secret_omnibox ? "ARRIVED at the bait" : "never arrived at the bait",
		    p->ok_omnibox ? "arrived" : "did not");
	}
out:
	free(c);
	free(p);
}

static void isolation_edge(struct audit *au)
{
	char store[2 * N_NS_TYPES][64], tried[512];
	const char *args[2 * N_NS_TYPES + 2];
	if (au->b_up && ns_args(au->b.jail.pid, store, args) > 0) {
		probe(au, "isolation", "namespaces", "its user, mount, net, ipc, uts, pid and "
		      "cgroup namespaces, against the host's and the other session's",
		      "the host's and the other session's namespaces", EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, args);
	} else {
		struct finding *f = add(au, "isolation", "namespaces", "its namespaces",
					"the host's and the other session's namespaces");
		if (f)
			fmt(f->evidence, sizeof(f->evidence),
			    "could not read the other session's namespaces");
	}
	char pid[16], pids[16];
	fmt(pid, sizeof(pid), "%d", (int)getpid());
	fmt(pids, sizeof(pids), "%u", au->policy.limits.pids);
	fmt(tried, sizeof(tried), "the host's processes in /proc (the audit itself is pid %s, "
	    "deskgate)", pid);
	probe(au, "isolation", "host-processes", tried, "the host's processes", EXPECT_CONTAINED,
	      NULL, DG_AUDIT_PROBE_MS, ARGS("procs", pids, pid, "deskgate"));
	fmt(tried, sizeof(tried), "the other session's processes, to signal or trace them: its "
	    "marker process dgd-%s", au->tag);
	probe(au, "isolation", "other-session-processes", tried, "the other session's processes",
	      EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER, DG_AUDIT_PROBE_MS, ARGS("alive", au->tag));
	char size[32];
	fmt(size, sizeof(size), "%dx%d", DG_AUDIT_OTHER_W, DG_AUDIT_OTHER_H);
	fmt(tried, sizeof(tried), "the other session's X server (its screen is %s): X "
	    "connections to displays :0..:9, abstract and file sockets", size);
	probe(au, "isolation", "other-session-x11", tried, "the other session's X server",
	      EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER, DG_AUDIT_PROBE_MS, ARGS("x11", size));
	char marker[96];
	fmt(marker, sizeof(marker), "/tmp/deskgate-audit-%s", au->tag);
	fmt(tried, sizeof(tried), "reading the other session's file %s", marker);
	probe(au, "isolation", "other-session-files", tried, "the other session's files",
	      EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER, DG_AUDIT_PROBE_MS,
	      ARGS("read-file", marker));
	probe(au, "isolation", "exec-desktop", "its own desktop from a program run by exec: the X "
	      "server's path and abstract sockets, a signal to Xvnc, the browser's singleton socket "
	      "and profile (xdotool's doors)",
	      "the session's desktop, around the action rules",
	      au->policy.limits.exec_desktop ? EXPECT_ALLOWED : EXPECT_CONTAINED,
	      DG_AUDIT_CONTROL_SELF, DG_AUDIT_PROBE_MS, ARGS("desktop"));
	fmt(tried, sizeof(tried), "connecting to the host's abstract unix socket @%s (a listener "
	    "the audit opened)", au->abs_name);
	probe(au, "isolation", "host-abstract-socket", tried, "the host's abstract unix sockets",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("unix-abstract", au->abs_name));
	if (au->profile == DG_PROFILE_BROWSER)
		probe(au, "isolation", "devtools-pipe", "a descriptor of Chromium's DevTools pipe "
		      "(its fds 3 and 4, the worker's channel): /proc/PID/fd, pidfd_getfd, ptrace",
		      "the browser's DevTools pipe to the worker", EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS, ARGS("devtools"));
	probe(au, "isolation", "proc-mem", "opening the memory of the session's other processes "
	      "(/proc/PID/mem, read-write; never read or written)",
	      au->profile == DG_PROFILE_BROWSER ? "the memory of the session's Xvnc and Chromium"
						: "the memory of the session's Xvnc and xterm",
	      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("proc-mem"));
	/* kernel: the call's fate depends on the kernel's build or settings
	 * (a kernel without IA32 emulation, x32, kexec, modules, BPF...), so a
	 * host control runs first (probe_kernel). Not for ptrace and
	 * process-vm-readv, whose controls would reach into the audit itself,
	 * nor TIOCSTI, which a root host control may always do. */
	static const struct {
		const char *id, *tried, *sink;
		bool kernel;
	} calls[] = {
		{"ptrace", "ptrace: TRACEME, attaching to its own child and to another process",
		 "other processes", false},
		{"process-vm-readv", "reading another process's memory with process_vm_readv",
		 "other processes", false},
		{"unshare", "new user, net or mount namespaces (unshare, clone, clone3)",
		 "namespaces", true},
		{"bpf", "loading a BPF program", "the kernel's BPF", true},
		{"perf", "perf_event_open", "the kernel's perf events", true},
		{"userfaultfd", "userfaultfd", "the kernel's userfaultfd", true},
		{"io-uring", "io_uring_setup", "the kernel's io_uring", true},
		{"open-by-handle", "open_by_handle_at (the \"shocker\" escape)",
		 "files outside the mount tree", true},
		{"kexec", "kexec_load and kexec_file_load", "the running kernel", true},
		{"modules", "init_module and finit_module", "kernel modules", true},
		{"x32", "a system call through the x32 ABI", "the seccomp filter", true},
		{"int80", "a system call through int 0x80 (the i386 ABI)", "the seccomp filter", true},
		{"tiocsti", "TIOCSTI and TIOCLINUX on its own terminal", "terminal input injection",
		 false},
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		if (calls[i].kernel)
			probe_kernel(au, "isolation", calls[i].id, calls[i].tried, calls[i].sink,
				     ARGS(calls[i].id));
		else
			probe(au, "isolation", calls[i].id, calls[i].tried, calls[i].sink,
			      EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS(calls[i].id));
	}
}

/* Reads a memfd's whole content (bounded) into buf as text. */
static size_t memfd_text(int fd, char *buf, size_t len)
{
	off_t size = lseek(fd, 0, SEEK_END);
	ssize_t k = pread(fd, buf, len - 1, 0);
	buf[k > 0 ? k : 0] = '\0';
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	for (size_t l = strlen(buf); l > 0 && buf[l - 1] == ' '; l--)
		buf[l - 1] = '\0';
	return size > 0 ? (size_t)size : 0;
}

/* The output cap and the wall clock are held by the relay that runs a
 * command (`deskgate exec`, dg_exec_run), not by the jail: they are seen
 * there, in a fresh jail under the policy's limits. */
static void exec_relay_checks(struct audit *au)
{
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = memfd_create("audit-out", MFD_CLOEXEC), err = memfd_create("audit-err",
									    MFD_CLOEXEC);
	char tried[160];
	fmt(tried, sizeof(tried), "writing without end to stdout (/usr/bin/yes) past the output "
	    "cap of %llu bytes (limits.output_bytes)",
	    (unsigned long long)au->policy.limits.output_bytes);
	struct finding *f = add(au, "resources", "output-cap", tried,
				"the relay of stdout (limits.output_bytes)");
	if (!f)
		goto out;
	fmt(f->probe, sizeof(f->probe), "deskgate exec engine: /usr/bin/yes");
	fmt(f->source, sizeof(f->source), "a fresh jail under the policy's limits, run as "
	    "`deskgate exec` runs one");
	if (devnull < 0 || out < 0 || err < 0) {
		fmt(f->evidence, sizeof(f->evidence), "cannot make descriptors: %s",
		    strerror(errno));
		goto out;
	}
	long long t0 = dg_now_ms();
	int st = dg_exec_run(&au->policy.limits, ARGS("/usr/bin/yes"), devnull, out, err);
	long long ms = dg_now_ms() - t0;
	char msg[512];
	size_t relayed = memfd_text(out, msg, 2); /* only the size matters */
	memfd_text(err, msg, sizeof(msg));
	bool ok = relayed <= au->policy.limits.output_bytes && st != 124 && st != 125;
	f->outcome = ok ? OUT_CONTAINED : st == 125 ? OUT_ERROR : OUT_LEAKED;
	fmt(f->evidence, sizeof(f->evidence), "%zu byte(s) relayed of a writer that never stops "
	    "(cap %llu); it ended after %lld ms with status %d%s; the relay said: %s", relayed,
	    (unsigned long long)au->policy.limits.output_bytes, ms, st,
	    st == 141 ? " (SIGPIPE: its pipe was closed at the cap)" : "", msg[0] ? msg : "-");

	struct dg_limits lim = au->policy.limits;
	unsigned policy_s = lim.exec_seconds;
	if (lim.exec_seconds > DG_AUDIT_WALL_S)
		lim.exec_seconds = DG_AUDIT_WALL_S;
	fmt(tried, sizeof(tried), "sleeping past the exec wall clock (/bin/sleep 1000, "
	    "limits.exec_seconds %u)", lim.exec_seconds);
	f = add(au, "resources", "wall-clock", tried, "limits.exec_seconds");
	if (!f)
		goto out;
	fmt(f->probe, sizeof(f->probe), "deskgate exec engine: /bin/sleep 1000");
	fmt(f->source, sizeof(f->source), "a fresh jail under the policy's limits, exec_seconds "
	    "%u%s", lim.exec_seconds, policy_s != lim.exec_seconds ? " for this check" : "");
	if (ftruncate(err, 0) != 0 || lseek(err, 0, SEEK_SET) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "ftruncate: %s", strerror(errno));
		goto out;
	}
	t0 = dg_now_ms();
	st = dg_exec_run(&lim, ARGS("/bin/sleep", "1000"), devnull, out, err);
	ms = dg_now_ms() - t0;
	memfd_text(err, msg, sizeof(msg));
	ok = st == 124 && ms < (long long)lim.exec_seconds * 1000 + 2000;
	f->outcome = ok ? OUT_CONTAINED : st == 125 ? OUT_ERROR : OUT_LEAKED;
	fmt(f->evidence, sizeof(f->evidence), "a sleeper of 1000 s ended after %lld ms with "
	    "status %d (124: the wall clock) under exec_seconds %u%s; the relay said: %s", ms, st,
	    lim.exec_seconds, policy_s != lim.exec_seconds
		? " (the policy's is longer; lowered so the audit stays short: the same code holds it)"
		: "", msg[0] ? msg : "-");
out:
	if (devnull >= 0)
		close(devnull);
	if (out >= 0)
		close(out);
	if (err >= 0)
		close(err);
}

/* MemAvailable of the host in MiB, or 0 when unknown. */
static unsigned long long host_mem_available_mb(void)
{
	FILE *fp = fopen("/proc/meminfo", "re");
	if (!fp)
		return 0;
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(fp);
	return kb / 1024;
}

/* Whether mb MiB may be pushed into the jail (see DG_AUDIT_PUSH_MAX_MB);
 * when not, records the finding as not checked, saying why. */
static bool pushable(struct audit *au, const char *id, const char *tried, const char *sink,
		     unsigned long long mb, unsigned long long avail)
{
	const char *why = NULL;
	char buf[256];
	if (avail == 0 || mb + DG_AUDIT_HOST_MARGIN_MB > avail) {
		fmt(buf, sizeof(buf), "the host has %llu MiB available: pushing %llu MiB would test "
		    "the host, not the jail", avail, mb);
		why = buf;
	} else if (mb > DG_AUDIT_PUSH_MAX_MB) {
		fmt(buf, sizeof(buf), "%llu MiB is more than the audit pushes (%d MiB), to stay short",
		    mb, DG_AUDIT_PUSH_MAX_MB);
		why = buf;
	}
	if (!why)
		return true;
	struct finding *f = add(au, "resources", id, tried, sink);
	if (f) {
		f->outcome = OUT_UNCHECKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", why);
	}
	return false;
}

static void resources_edge(struct audit *au)
{
	const struct dg_limits *lim = &au->policy.limits;
	char a1[32], a2[32], a3[32], sink[256], tried[256];
	/* CPU: more spinners than the quota has cores, on a machine with more
	 * cores than the quota; contained when their total stays halfway below
	 * what they would get unthrottled. */
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int procs = (int)lim->cpus + 1; /* more than the quota's cores */
	if (procs > cores)
		procs = (int)cores;
	fmt(sink, sizeof(sink), "the CPU quota (limits.cpus %.2f)", lim->cpus);
	fmt(tried, sizeof(tried), "spinning past the CPU quota of %.2f core(s)", lim->cpus);
	if (cores > 0 && (double)procs > lim->cpus) {
		double max = (lim->cpus + procs) / 2;
		fmt(a1, sizeof(a1), "%d", DG_AUDIT_CPU_MS);
		fmt(a2, sizeof(a2), "%.3f", max);
		fmt(a3, sizeof(a3), "%d", procs);
		fmt(tried, sizeof(tried), "%d processes spinning for %d ms against the CPU quota of "
		    "%.2f core(s)", procs, DG_AUDIT_CPU_MS, lim->cpus);
		probe(au, "resources", "cpu", tried, sink, EXPECT_CONTAINED, NULL,
		      DG_AUDIT_PROBE_MS + DG_AUDIT_CPU_MS, ARGS("cpuspin", a1, a2, a3));
	} else {
		struct finding *f = add(au, "resources", "cpu", tried, sink);
		if (f) {
			f->outcome = OUT_UNCHECKED;
			fmt(f->evidence, sizeof(f->evidence), "this machine has %ld core(s), not more "
			    "than the quota of %.2f: nothing here can use more than the quota allows",
			    cores, lim->cpus);
		}
	}
	exec_relay_checks(au);
	/* Scratch space: /tmp and the home share one capped tmpfs. */
	unsigned long long avail = host_mem_available_mb();
	fmt(a1, sizeof(a1), "%llu", (unsigned long long)lim->scratch_mb);
	fmt(sink, sizeof(sink), "the scratch tmpfs of /tmp and the home (limits.scratch_mb %llu)",
	    (unsigned long long)lim->scratch_mb);
	fmt(tried, sizeof(tried), "filling /tmp, then the home directory, past the scratch cap "
	    "of %llu MiB", (unsigned long long)lim->scratch_mb);
	if (pushable(au, "scratch", tried, sink, lim->scratch_mb, avail))
		probe(au, "resources", "scratch", tried, sink, EXPECT_CONTAINED, NULL,
		      DG_AUDIT_FILL_MS, ARGS("fill", a1, "/tmp", DG_JAIL_HOME));
	/* Processes: fork until it fails (the session's own processes and
	 * threads count too, so it fails below the cap). */
	struct dg_jail_verdict v0 = {0}, v1 = {0};
	fmt(sink, sizeof(sink), "the pids cgroup (limits.pids %u)", lim->pids);
	fmt(tried, sizeof(tried), "forking until fork fails (limits.pids %u; the session's own "
	    "processes and threads count too)", lim->pids);
	if (lim->pids <= DG_AUDIT_FORK_MAX) {
		fmt(a1, sizeof(a1), "%u", lim->pids);
		dg_jail_verdict(&au->a.jail, &v0);
		struct finding *f = probe(au, "resources", "pids", tried, sink,
					  EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS * 3,
					  ARGS("forkbomb", a1, "0"));
		dg_jail_verdict(&au->a.jail, &v1);
		if (f && f->outcome != OUT_ERROR) {
			size_t l = strlen(f->evidence);
			fmt(f->evidence + l, sizeof(f->evidence) - l, "; %s",
			    v1.pids_capped && !v0.pids_capped
				    ? "the pids cgroup counted forks refused at pids.max"
				    : "refused by RLIMIT_NPROC, set to the same cap and checked "
				      "before the pids cgroup");
		}
	} else {
		struct finding *f = add(au, "resources", "pids", tried, sink);
		if (f) {
			f->outcome = OUT_UNCHECKED;
			fmt(f->evidence, sizeof(f->evidence), "the cap of %u is above the %d children "
			    "the probe forks at most", lim->pids, DG_AUDIT_FORK_MAX);
		}
	}
	/* Memory, last: the OOM killer may take a process of the desktop
	 * rather than the hog. */
	unsigned long long want = lim->memory_mb + DG_AUDIT_MEM_EXTRA_MB;
	fmt(sink, sizeof(sink), "the memory cgroup (limits.memory_mb %llu, no swap)",
	    (unsigned long long)lim->memory_mb);
	fmt(tried, sizeof(tried), "allocating and touching %llu MiB, past the memory limit of "
	    "%llu MiB", want, (unsigned long long)lim->memory_mb);
	if (!pushable(au, "memory", tried, sink, want, avail))
		return;
	fmt(a1, sizeof(a1), "%llu", want);
	struct finding *f = add(au, "resources", "memory", tried, sink);
	if (!f)
		return;
	const char *const *args = ARGS("memhog", a1);
	command_line(args, f->probe, sizeof(f->probe));
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	struct dg_err err = {{0}};
	if (!r) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		return;
	}
	dg_jail_verdict(&au->a.jail, &v0);
	if (!au->a_up || run_probe(au, &au->a, args, DG_AUDIT_MEM_MS, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it: %s", err.msg);
		free(r);
		return;
	}
	dg_jail_verdict(&au->a.jail, &v1);
	/* How far it got: its last progress line. */
	long touched = 0;
	for (const char *p = r->out; (p = strstr(p, "touched ")); p += 8)
		touched = strtol(p + 8, NULL, 10);
	if (r->verdict == 1) {
		f->outcome = OUT_LEAKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->exit_code == 128 + SIGKILL && v1.oom_killed) {
		f->outcome = OUT_CONTAINED;
		fmt(f->evidence, sizeof(f->evidence), "killed (SIGKILL) by the memory cgroup's OOM "
		    "killer after touching about %ld MiB of %llu", touched, want);
	} else if (r->verdict == 0) {
		f->outcome = OUT_CONTAINED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else {
		describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
}

/* ---- setup and teardown ---------------------------------------------------- */

/* Copies the probe into a sealed memfd (see the top of this file). */
static int load_probe(struct audit *au, struct dg_err *err)
{
	char self[PATH_MAX];
	char path[PATH_MAX];
	if (au->probe_path) {
		fmt(path, sizeof(path), "%s", au->probe_path);
	} else {
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (k <= 0)
			return dg_err_set(err, -errno, "cannot read /proc/self/exe: %s",
					  strerror(errno));
		self[k] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		fmt(path, sizeof(path), "%s/%s", self, DG_AUDIT_PROBE_NAME);
	}
	if (!realpath(path, au->probe_real))
		fmt(au->probe_real, sizeof(au->probe_real), "%s", path);
	char *buf;
	size_t len;
	struct stat st;
	int r = dg_read_file("probe", path, DG_AUDIT_PROBE_MAX, false, &buf, &len, &st, err);
	if (r) {
		if (r == -ENOENT)
			return dg_err_set(err, r, "no probe at %s: build the deskgate-probe target "
					  "(it is built beside deskgate), or give --probe PATH", path);
		return r;
	}
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(buf, len, h);
	dg_hex_encode(h, DG_SHA256_LEN, au->probe_hex);
	int fd = memfd_create(DG_AUDIT_PROBE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* a kernel before MFD_EXEC (6.3) */
		fd = memfd_create(DG_AUDIT_PROBE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int e = errno;
		free(buf);
		return dg_err_set(err, -e, "memfd_create: %s%s", strerror(e),
				  e == EACCES ? " (vm.memfd_noexec forbids executable memfds)" : "");
	}
	size_t off = 0;
	while (off < len) {
		ssize_t k = write(fd, buf + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = errno;
			free(buf);
			close(fd);
			return dg_err_set(err, -e, "writing the probe into a memfd: %s", strerror(e));
		}
		off += (size_t)k;
	}
	free(buf);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
		int e = errno;
		close(fd);
		return dg_err_set(err, -e, "sealing the probe's memfd: %s", strerror(e));
	}
	au->probe_fd = fd;
	return 0;
}

/* What the host offers for the jail to find: a loopback listener, an
 * abstract socket, a world-readable file, a canary in our environment. */
static int host_bait(struct audit *au, struct dg_err *err)
{
	unsigned char rnd[4];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return dg_err_set(err, -EIO, "getrandom: %s", strerror(errno));
	dg_hex_encode(rnd, sizeof(rnd), au->tag);
	au->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(in);
	if (au->tcp_fd < 0 || bind(au->tcp_fd, (struct sockaddr *)&in, l) != 0 ||
	    listen(au->tcp_fd, 8) != 0 || getsockname(au->tcp_fd, (struct sockaddr *)&in, &l) != 0)
		return dg_err_set(err, -errno, "a listener on 127.0.0.1: %s", strerror(errno));
	au->tcp_port = ntohs(in.sin_port);
	fmt(au->abs_name, sizeof(au->abs_name), "deskgate-audit-%s", au->tag);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	memcpy(un.sun_path + 1, au->abs_name, strlen(au->abs_name));
	au->abs_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (au->abs_fd < 0 ||
	    bind(au->abs_fd, (struct sockaddr *)&un,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(au->abs_name))) !=
		    0 ||
	    listen(au->abs_fd, 8) != 0)
		return dg_err_set(err, -errno, "an abstract socket: %s", strerror(errno));
	fmt(au->tmp_dir, sizeof(au->tmp_dir), "/tmp/deskgate-audit-XXXXXX");
	if (!mkdtemp(au->tmp_dir)) {
		au->tmp_dir[0] = '\0';
		return dg_err_set(err, -errno, "mkdtemp in /tmp: %s", strerror(errno));
	}
	chmod(au->tmp_dir, 0755);
	fmt(au->tmp_file, sizeof(au->tmp_file), "%s/marker", au->tmp_dir);
	int fd = open(au->tmp_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return dg_err_set(err, -errno, "%s: %s", au->tmp_file, strerror(errno));
	static const char text[] = "deskgate audit marker: the jail must not see this file\n";
	ssize_t w = write(fd, text, sizeof(text) - 1);
	close(fd);
	if (w != (ssize_t)sizeof(text) - 1)
		return dg_err_set(err, -EIO, "%s: short write", au->tmp_file);
	fmt(au->canary, sizeof(au->canary), "deskgate-audit-canary-%s", au->tag);
	if (setenv("DESKGATE_AUDIT_CANARY", au->canary, 1) != 0)
		return dg_err_set(err, -errno, "setenv: %s", strerror(errno));
	return 0;
}

/* A probe that cannot even say hello means the delivery itself fails:
 * nothing after it would mean anything. */
static int check_delivery(struct audit *au, struct dg_err *err)
{
	struct run *hello = malloc(sizeof(*hello));
	if (!hello)
		return dg_err_set(err, -ENOMEM, "out of memory");
	struct dg_err he = {{0}};
	int r = run_probe(au, &au->a, ARGS("hello"), DG_AUDIT_PROBE_MS, hello, &he);
	if (r != 0)
		dg_err_set(err, r, "the probe %s did not run in the jail: %s", au->probe_real, he.msg);
	else if (strncmp(hello->out, "HELLO ", 6) != 0)
		r = dg_err_set(err, -EIO, "the probe %s did not run in the jail (exit %d): %.300s",
			       au->probe_real, hello->exit_code, hello->err);
	free(hello);
	return r;
}

/* Starts the proxy, the audited desktop and its worker, and the other
 * session with its markers. */
static int start_sessions(struct audit *au, struct dg_err *err)
{
	int r = dg_egress_start(&au->egress, &au->policy, NULL, err);
	if (r)
		return r;
	au->egress_up = true;
	struct dg_desktop_spec spec = {.profile = au->profile,
				       .width = DG_DESKTOP_WIDTH_DEFAULT,
				       .height = DG_DESKTOP_HEIGHT_DEFAULT,
				       .limits = &au->policy.limits,
				       .strict = au->policy.rules != NULL,
				       .egress = true};
	if ((r = dg_desktop_start(&spec, &au->a, err)))
		return r;
	au->a_up = true;
	fmt(au->a_source, sizeof(au->a_source), "the audited %s session (slot %u): a program in "
	    "its jail, run as exec actions are", dg_profile_name(au->profile), au->a.jail.slot);
	r = dg_egress_add(&au->egress, DG_AUDIT_SESSION, au->a.jail.egress_fd, NULL, err);
	close(au->a.jail.egress_fd);
	au->a.jail.egress_fd = -1;
	if (r)
		return r;
	if ((r = dg_worker_start(&au->a.io, &au->worker, err)))
		return r;
	au->worker_up = true;
	au->worker.policy = &au->policy;
	if ((r = dg_worker_wait_ready(&au->worker, DG_WORKER_READY_MS, err)))
		return r;
	if ((r = check_delivery(au, err)))
		return r;
	struct dg_desktop_spec other = {.profile = DG_PROFILE_XTERM,
					.width = DG_AUDIT_OTHER_W,
					.height = DG_AUDIT_OTHER_H,
					.limits = &au->policy.limits};
	if ((r = dg_desktop_start(&other, &au->b, err)))
		return r;
	au->b_up = true;
	fmt(au->b_source, sizeof(au->b_source), "the other session (xterm, slot %u)",
	    au->b.jail.slot);
	/* Its markers: a process and a file the audited session must not see. */
	char marker[96], secs[16];
	fmt(marker, sizeof(marker), "/tmp/deskgate-audit-%s", au->tag);
	fmt(secs, sizeof(secs), "%d", DG_AUDIT_MARKER_S);
	struct run *run = malloc(sizeof(*run));
	if (!run)
		return dg_err_set(err, -ENOMEM, "out of memory");
	r = run_probe(au, &au->b, ARGS("mark", marker), DG_AUDIT_PROBE_MS, run, err);
	if (r == 0 && run->exit_code != 0)
		r = dg_err_set(err, -EIO, "marking the other session: %s", run->line);
	if (r == 0)
		r = run_probe(au, &au->b, ARGS("daemon", au->tag, secs, "close"), DG_AUDIT_PROBE_MS,
			      run, err);
	if (r == 0 && run->verdict != 1)
		r = dg_err_set(err, -EIO, "starting the other session's marker process: %s",
			       run->line[0] ? run->line : "no report");
	free(run);
	return r;
}

static void stop_all(struct audit *au)
{
	if (au->worker_up)
		dg_worker_stop(&au->worker);
	if (au->a_up)
		dg_desktop_destroy(&au->a);
	if (au->b_up)
		dg_desktop_destroy(&au->b);
	if (au->egress_up)
		dg_egress_stop(&au->egress);
	au->worker_up = au->a_up = au->b_up = au->egress_up = false;
	if (au->probe_fd >= 0)
		close(au->probe_fd);
	if (au->tcp_fd >= 0)
		close(au->tcp_fd);
	if (au->abs_fd >= 0)
		close(au->abs_fd);
	au->probe_fd = au->tcp_fd = au->abs_fd = -1;
	if (au->tmp_file[0])
		unlink(au->tmp_file);
	if (au->tmp_dir[0])
		rmdir(au->tmp_dir);
	au->tmp_file[0] = au->tmp_dir[0] = '\0';
}

/* ---- the report ---------------------------------------------------------------- */

struct tally {
	int n[N_OUTCOMES];
};

static struct tally count(const struct audit *au)
{
	struct tally t = {{0}};
	for (int i = 0; i < au->n; i++)
		t.n[au->f[i].outcome]++;
	return t;
}

static json_t *report_json(const struct audit *au, int code)
{
	struct tally t = count(au);
	json_t *findings = json_array(), *kernel = json_array();
	for (int i = 0; i < au->n; i++) {
		if (au->f[i].outcome == OUT_KERNEL)
			json_array_append_new(kernel, json_string(au->f[i].id));
		const struct finding *f = &au->f[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", f->id, "edge",
				      f->edge, "probe", f->probe, "source", f->source, "sink", f->sink,
				      "tried", f->tried, "outcome", outcome_names[f->outcome],
				      "evidence", f->evidence);
		if (o && f->control[0])
			json_object_set_new(o, "control", json_string(f->control));
		json_array_append_new(findings, o);
	}
	json_t *policy = json_pack("{s:s, s:s, s:s?}", "name",
				   au->policy_path ? au->policy_path : "built-in default", "sha256",
				   au->policy_hex, "path", au->policy_path);
	return json_pack("{s:i, s:o, s:s, s:s, s:I, s:{s:s, s:s}, s:o, s:{s:i, s:i, s:i, s:i, "
			 "s:i, s:i, s:i}, s:o, s:i}",
			 "format", 1, "policy", policy, "profile", dg_profile_name(au->profile),
			 "started", au->started, "duration_ms", (json_int_t)(dg_now_ms() - au->t0_ms),
			 "deskgate_probe", "path", au->probe_real, "sha256", au->probe_hex,
			 "findings", findings, "summary", "probes", au->n, "contained",
			 t.n[OUT_CONTAINED], "contained_by_kernel", t.n[OUT_KERNEL], "allowed",
			 t.n[OUT_ALLOWED], "leaked", t.n[OUT_LEAKED], "not_checked",
			 t.n[OUT_UNCHECKED], "errors", t.n[OUT_ERROR], "kernel_refused", kernel, "exit",
			 code);
}

/* The ids of the findings the kernel itself refused, ", "-separated. */
static void kernel_ids(const struct audit *au, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int i = 0; i < au->n; i++) {
		size_t l = strlen(buf);
		if (au->f[i].outcome == OUT_KERNEL)
			fmt(buf + l, len - l, "%s%s", l ? ", " : "", au->f[i].id);
	}
}

static void report_text(const struct audit *au, FILE *out)
{
	fprintf(out, "deskgate audit: policy %s (sha256 %.16s...), profile %s, probe %s\n",
		au->policy_path ? au->policy_path : "built-in default", au->policy_hex,
		dg_profile_name(au->profile), au->probe_real);
	for (int i = 0; i < au->n; i++) {
		const struct finding *f = &au->f[i];
		fprintf(out, "%-11s  %-19s  %s \u2014 %s\n", f->edge, outcome_names[f->outcome],
			f->tried, f->evidence);
		if (f->control[0])
			fprintf(out, "%-11s  %-19s    control %s\n", "", "", f->control);
	}
	struct tally t = count(au);
	fprintf(out, "%d probes: %d contained, ", au->n, t.n[OUT_CONTAINED]);
	if (t.n[OUT_KERNEL])
		fprintf(out, "%d contained by the kernel, ", t.n[OUT_KERNEL]);
	fprintf(out, "%d ran as allowed, %d leaked", t.n[OUT_ALLOWED], t.n[OUT_LEAKED]);
	if (t.n[OUT_UNCHECKED])
		fprintf(out, ", %d not checked", t.n[OUT_UNCHECKED]);
	if (t.n[OUT_ERROR])
		fprintf(out, ", %d could not run", t.n[OUT_ERROR]);
	fprintf(out, "\n");
	if (t.n[OUT_KERNEL]) {
		char ids[DG_AUDIT_FINDINGS_MAX * 64];
		kernel_ids(au, ids, sizeof(ids));
		fprintf(out, "contained by the kernel, not by deskgate (this host's kernel refuses "
			"them itself, with or without a jail, so this audit cannot show what "
			"deskgate would do): %s\n", ids);
	}
}

/* Writes the report to STATE_DIR/audit/<policy sha256>.json (see
 * cli.h), owned by STATE_DIR's owner. The gateway's user owns that
 * directory and is less trusted than root: everything below STATE_DIR is
 * reached through descriptors, never by following a name it could have
 * swapped for a symlink (the audit directory is opened O_NOFOLLOW, changed
 * with fchown/fchmod, the file created O_EXCL|O_NOFOLLOW and renamed within
 * the same directory descriptor). */
static int write_state(const struct audit *au, const char *text, struct dg_err *err)
{
	int sfd = open(au->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return dg_err_set(err, -errno, "state dir %s: %s", au->state_dir, strerror(errno));
	struct stat sd;
	int dfd = -1, fd = -1, r = 0;
	char tmp[128], final[128];
	if (fstat(sfd, &sd) != 0) {
		r = dg_err_set(err, -errno, "state dir %s: %s", au->state_dir, strerror(errno));
		goto out;
	}
	if (mkdirat(sfd, "audit", 0750) != 0 && errno != EEXIST) {
		r = dg_err_set(err, -errno, "mkdir %s/audit: %s", au->state_dir, strerror(errno));
		goto out;
	}
	dfd = openat(sfd, "audit", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchown(dfd, sd.st_uid, sd.st_gid) != 0 || fchmod(dfd, 0750) != 0) {
		r = dg_err_set(err, -errno, "%s/audit: %s", au->state_dir, strerror(errno));
		goto out;
	}
	fmt(final, sizeof(final), "%s.json", au->policy_hex);
	fmt(tmp, sizeof(tmp), ".%s.json.%d", au->policy_hex, (int)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0) {
		r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp, strerror(errno));
		goto out;
	}
	size_t len = strlen(text), off = 0;
	while (off < len && r == 0) {
		ssize_t k = write(fd, text + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp,
				       strerror(errno));
		else
			off += (size_t)k;
	}
	if (r == 0 && (fchown(fd, sd.st_uid, sd.st_gid) != 0 || fchmod(fd, 0640) != 0 ||
		       fsync(fd) != 0))
		r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp, strerror(errno));
	if (r == 0 && renameat(dfd, tmp, dfd, final) != 0)
		r = dg_err_set(err, -errno, "rename to %s/audit/%s: %s", au->state_dir, final,
			       strerror(errno));
	if (r)
		unlinkat(dfd, tmp, 0);
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	close(sfd);
	return r;
}

/* ---- the command ---------------------------------------------------------------- */

static const char *const audit_profiles[] = {"xterm", "browser", NULL};

struct audit_args {
	const char *policy, *profile, *state_dir, *recordings, *probe;
	bool json;
};

static const struct dg_opt audit_opts[] = {
	DG_OPT_VALUE_(struct audit_args, policy, "--policy", "FILE", 0,
		      "the policy to audit (default: the built-in policy)"),
	DG_OPT_CHOICE_(struct audit_args, profile, "--profile", "xterm|browser", audit_profiles, 0,
		       "the audited session's profile (default browser)"),
	DG_OPT_SWITCH_(struct audit_args, json, "--json", "print one JSON object instead of lines"),
	DG_OPT_VALUE_(struct audit_args, state_dir, "--state-dir", "DIR", 0,
		      "the gateway's state directory: probed, and where the result is kept "
		      "(default /var/lib/deskgate when it exists)"),
	DG_OPT_VALUE_(struct audit_args, recordings, "--recordings", "DIR", 0,
		      "the recordings directory to probe (default STATE_DIR/recordings when it "
		      "exists)"),
	DG_OPT_VALUE_(struct audit_args, probe, "--probe", "PATH", 0,
		      "the probe binary to run in the jail (default: deskgate-probe beside "
		      "deskgate)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_audit_cmd = {
	.name = "audit",
	.summary = "Run the containment probes inside a fresh session under the policy; one "
		   "finding per probe.",
	.details = "exit status: 0 nothing leaked and every probe ran; 1 something leaked;\n"
		   "2 on a usage error or a policy that does not load; 125 when the audit or a\n"
		   "probe could not run. Needs root.\n",
	.doc = "docs/audit.md",
	.opts = audit_opts,
};

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct audit *au, int argc, char **argv)
{
	struct audit_args a = {0};
	int rc = dg_opt_handle(&dg_audit_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	au->json = a.json;
	au->policy_path = a.policy;
	au->state_dir = a.state_dir;
	au->state_dir_given = a.state_dir != NULL;
	au->recordings = a.recordings;
	au->probe_path = a.probe;
	au->profile = DG_PROFILE_BROWSER;
	if (a.profile && dg_profile_parse(a.profile, &au->profile) != 0)
		return dg_opt_usage_error(&dg_audit_cmd, "--profile must be xterm or browser, not \"%s\"",
					  a.profile);
	return -1;
}

/* The default state dir when it exists, and the recordings under it. */
static void default_dirs(struct audit *au)
{
	struct stat st;
	if (!au->state_dir && stat(DG_AUDIT_STATE_DEFAULT, &st) == 0 && S_ISDIR(st.st_mode))
		au->state_dir = DG_AUDIT_STATE_DEFAULT;
	static char rec[PATH_MAX];
	if (!au->recordings && au->state_dir) {
		fmt(rec, sizeof(rec), "%s/recordings", au->state_dir);
		if (stat(rec, &st) == 0 && S_ISDIR(st.st_mode))
			au->recordings = rec;
	}
}

int dg_cmd_audit(int argc, char **argv)
{
	struct audit *au = calloc(1, sizeof(*au));
	if (!au) {
		fprintf(stderr, "deskgate audit: out of memory\n");
		return DG_EXIT_FAILED;
	}
	au->probe_fd = au->tcp_fd = au->abs_fd = -1;
	au->t0_ms = dg_now_ms();
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(au->started, sizeof(au->started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	int code = parse_args(au, argc, argv);
	if (code >= 0) {
		free(au);
		return code;
	}
	struct dg_err err = {{0}};
	if (dg_gw_policy_load(au->policy_path, &au->policy, &au->policy_text, &au->policy_len,
			      &err) != 0) {
		fprintf(stderr, "deskgate audit: %s\n", err.msg);
		free(au);
		return DG_EXIT_USAGE;
	}
	au->policy_loaded = true;
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(au->policy_text, au->policy_len, h);
	dg_hex_encode(h, DG_SHA256_LEN, au->policy_hex);
	default_dirs(au);
	au->f = calloc(DG_AUDIT_FINDINGS_MAX, sizeof(*au->f));
	if (!au->f) {
		dg_err_set(&err, -ENOMEM, "out of memory");
		goto failed;
	}
	if (geteuid() != 0) {
		dg_err_set(&err, -EPERM, "must run as root: it starts a session's jails, its proxy "
			   "and its worker, as the gateway's spawner does");
		goto failed;
	}
	struct dg_err e2 = {{0}};
	if (dg_jail_cleanup_stale(&e2) < 0)
		fprintf(stderr, "deskgate audit: cleaning up stale jails: %s\n", e2.msg);
	if (load_probe(au, &err) || host_bait(au, &err) || start_sessions(au, &err))
		goto failed;
	egress_edge(au);
	filesystem_edge(au);
	credentials_edge(au);
	isolation_edge(au);
	if (au->profile == DG_PROFILE_BROWSER)
		browser_edge(au);
	resources_edge(au);
	stop_all(au);

	struct tally t = count(au);
	code = t.n[OUT_LEAKED] ? 1 : t.n[OUT_ERROR] ? DG_EXIT_FAILED : 0;
	json_t *rep = report_json(au, code);
	char *text = rep ? json_dumps(rep, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
	json_decref(rep);
	if (au->json && text)
		printf("%s\n", text);
	else
		report_text(au, stdout);
	fflush(stdout);
	if (!text) {
		fprintf(stderr, "deskgate audit: out of memory for the report\n");
	} else if (au->state_dir) {
		struct dg_err we = {{0}};
		size_t l = strlen(text);
		if (l > DG_AUDIT_STATE_FILE_MAX)
			fprintf(stderr, "deskgate audit: report too large for the state dir\n");
		else if (write_state(au, text, &we) != 0)
			fprintf(stderr, "deskgate audit: %s%s\n", we.msg,
				au->state_dir_given ? "" : " (default state dir; --state-dir DIR "
							   "chooses another)");
	}
	free(text);
	if (t.n[OUT_KERNEL] && au->json) {
		char ids[DG_AUDIT_FINDINGS_MAX * 64];
		kernel_ids(au, ids, sizeof(ids));
		fprintf(stderr, "deskgate audit: %d probe(s) contained by the kernel, not by "
			"deskgate: %s\n", t.n[OUT_KERNEL], ids);
	}
	if (t.n[OUT_LEAKED])
		fprintf(stderr, "deskgate audit: %d probe(s) leaked\n", t.n[OUT_LEAKED]);
	else if (t.n[OUT_ERROR])
		fprintf(stderr, "deskgate audit: %d probe(s) could not run: the audit is "
			"incomplete\n", t.n[OUT_ERROR]);
	goto out;
failed:
	fprintf(stderr, "deskgate audit: cannot run the audit: %s\n", err.msg);
	stop_all(au);
	code = DG_EXIT_FAILED;
out:
	if (au->policy_loaded)
		dg_policy_free(&au->policy);
	free(au->policy_text);
	free(au->f);
	free(au);
	return code;
}
