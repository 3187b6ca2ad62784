/* dg_probe: the containment probe battery (issue #2, "What it must show").
 *
 * usage: dg_probe NAME [--host-result KEY=TOKEN]... [ARGS...]
 *                                     run one probe (--host-result: see
 *                                     "Kernel refusals" below)
 *        dg_probe ns [--net] -- NAME [ARGS...] | -- /ABS/PATH [ARGS...]
 *                                     the control harness (root, host only)
 *
 * Contract of every probe: it ends with exactly one line
 *     CONTAINED <evidence>   exit 0
 *     LEAKED <evidence>      exit 1
 *     ERROR <what>           exit 2 (the probe could not run, or could not
 *                            tell: see "Kernel refusals" below)
 *     KERNEL <evidence>      exit 3 (contained by the kernel: the kernel
 *                            itself refuses the call, with or without
 *                            deskgate, so this run cannot show what deskgate
 *                            would have done; see below)
 * on stdout (the `flood` probe writes it on stderr, because stdout is the
 * stream it floods). Evidence is what was seen: errno names, values, counts;
 * never the contents of a secret.
 *
 * Kernel refusals. Some calls end the same way on the host as in a jail,
 * whatever deskgate does, on some kernels: `int 0x80` on a kernel without
 * IA32 emulation raises SIGSEGV before any seccomp filter sees it; kexec,
 * modules, x32, bpf... answer ENOSYS on a kernel built without them;
 * /proc/sysrq-trigger does not exist without magic SysRq; a sysctl can make
 * a call EPERM even for root. The probes whose calls depend on the kernel
 * like that judge each call with judge_call (socket-families, raw-socket,
 * packet-socket, open-write, remount, mount-tmpfs, keyctl, ptrace, unshare,
 * bpf, perf, userfaultfd, io-uring, open-by-handle, kexec, modules, x32,
 * int80) and tell the kernel's refusal from containment with a control
 * that ran on the host:
 *  - each such call prints "RESULT KEY=TOKEN" before the verdict line: KEY
 *    names the call ([A-Za-z0-9_./-], the same on the host and in a jail),
 *    TOKEN how it ended ("ok", an errno name such as ENOSYS, or a signal
 *    such as SIGSEGV);
 *  - run as root with capabilities and no seccomp filter (the CONTROL on the
 *    host), a call that was refused is the kernel's own refusal: KERNEL,
 *    with the reason ("int 0x80 getpid on the host: killed by SIGSEGV: this
 *    kernel has no IA32 emulation"); a call that got through is LEAKED;
 *  - anywhere else (a jail) the caller passes the control's RESULT lines
 *    back as options before the probe's arguments: `NAME --host-result
 *    KEY=TOKEN ... ARGS`. A call that got through is LEAKED; one that was
 *    refused and ended exactly as on the host is KERNEL ("..., as on the
 *    host without deskgate: ..."); one that got the jail's answer (the
 *    filter's EPERM or SIGSYS; any refusal for files and permission-checked
 *    sockets) is CONTAINED, also where the host's kernel would have refused
 *    it another way; any other end is LEAKED (an errno: the call passed the
 *    filter), or ERROR when it died by another signal (the probe cannot
 *    tell the kernel's refusal from anything else without a matching host
 *    result).
 * The probe's verdict is the worst of its calls: LEAKED, then ERROR, then
 * KERNEL, then CONTAINED. At most DG_PROBE_HOST_MAX (32) --host-result
 * options, KEY below DG_PROBE_KEY_MAX (64) bytes, TOKEN below
 * DG_PROBE_TOKEN_MAX (24).
 *
 * The same binary is the probe inside a jail and the CONTROL outside it: run
 * on the host as root, each probe must report LEAKED, which proves it can
 * tell a leak from containment (or KERNEL: the kernel refuses the call to
 * root too, see above). So every probe is written to be harmless on the
 * host:
 *  - files that must not be written are opened O_WRONLY and never written;
 *    files a probe creates get unique names and are removed at once;
 *  - mounts and remounts happen only when the probe is unprivileged (inside a
 *    jail) or in a mount namespace other than its parent's (the `ns`
 *    harness); a remount only changes per-mount flags (MS_BIND), never a
 *    superblock's;
 *  - kernel-facing calls use arguments that make them fail after the
 *    permission check (kexec with invalid flags, init_module with an empty
 *    image) or create objects that are closed at once (bpf, perf, uffd);
 *  - packets are sent only to loopback, or to non-loopback addresses when the
 *    network namespace has no interface but lo (a jail, or the `ns --net`
 *    harness that put those addresses on lo itself); otherwise the probe
 *    refuses to send and reports the visible interfaces as the leak;
 *  - calls that may be killed with SIGSYS (x32, int 0x80, TIOCSTI, ...) run
 *    in a forked child: death by SIGSYS means the filter caught them.
 *
 * A syscall that the jail's seccomp filter must deny counts as CONTAINED only
 * when it fails with EPERM (or dies with SIGSYS); any other outcome means the
 * call reached the kernel (ENOSYS included: the filter let it through to a
 * kernel that lacks it), and is reported as LEAKED with the errno, unless
 * the host control ended the same way (KERNEL, above). Where the kernel's
 * own permission checks are the boundary (files, mounts' ro flags, raw and
 * packet sockets, routes), any failure to get the resource counts as
 * contained, with its errno as evidence.
 *
 * The probe is static and must work in an empty jail root: no NSS, no locale,
 * no dynamic loading.
 *
 * It is also a product binary: the build installs it beside deskgate as
 * `deskgate-probe`, and `deskgate audit` (cli/cli-audit.c) runs it in a
 * live session's jail from a memfd, comparing what it sees with facts only
 * the host knows (the probes after p_hello take those as arguments).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef AF_KEY
#define AF_KEY 15
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

extern char **environ;

/* ---------------------------------------------------------------- output */

static char ev[16384];  /* evidence, "; "-separated */
static int verdict_fd = 1;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	size_t l = strlen(ev);
	if (l + 8 >= sizeof(ev))
		return;
	if (l > 0) {
		memcpy(ev + l, "; ", 3);
		l += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ev + l, sizeof(ev) - l, fmt, ap);
	va_end(ap);
}

/* Prints the final line, WORD and the evidence, and returns code. */
static int verdict(const char *word, int code)
{
	for (char *p = ev; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	dprintf(verdict_fd, "%s %s\n", word, ev[0] ? ev : "-");
	return code;
}

/* Prints the final line and returns the exit code. */
static int finish(bool leaked)
{
	return leaked ? verdict("LEAKED", 1) : verdict("CONTAINED", 0);
}

static int error_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int error_out(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(verdict_fd, "ERROR %s\n", buf);
	return 2;
}

static const char *en(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* Records the outcome of a call the jail must deny with EPERM. Returns true
 * when it was denied (contained). */
static bool denied(const char *what, long ret, int err)
{
	if (ret < 0 && err == EPERM) {
		note("%s: EPERM", what);
		return true;
	}
	if (ret < 0)
		note("%s reached the kernel: %s", what, en(err));
	else
		note("%s succeeded (%ld)", what, ret);
	return false;
}

/* snprintf that may truncate (paths, lists): the result is evidence only. */
static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* Whether s is 1..max-1 bytes, all of them in set (or alphanumeric). */
static bool charset_ok(const char *s, size_t n, size_t max, const char *set)
{
	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr(set, s[i]))
			return false;
	return true;
}

/* ---------------------------------------------- judging a call (kernel) */

/* The judging of calls whose end may depend on the kernel (see "Kernel
 * refusals" at the top of this file). */
#define DG_PROBE_HOST_MAX 32  /* --host-result options per run */
#define DG_PROBE_KEY_MAX 64   /* bytes of a KEY, its NUL included */
#define DG_PROBE_TOKEN_MAX 24 /* bytes of a TOKEN, its NUL included */

/* How a call is judged. */
enum call_kind {
	/* A system call the filter answers with EPERM; EPERM and ENOSYS are
	 * refusals, any other errno passed the permission check (the probes
	 * give arguments that fail after it). */
	CALL_SYSCALL,
	/* A foreign ABI, made in a child: the filter kills it (SIGSYS); any
	 * signal, EPERM and ENOSYS are refusals. */
	CALL_ABI,
	/* A socket family the filter refuses with EPERM; EAFNOSUPPORT,
	 * EPROTONOSUPPORT and ESOCKTNOSUPPORT mean the kernel lacks it. */
	CALL_FAMILY,
	/* The kernel's permission checks are the boundary (files, raw
	 * sockets): every failure is a refusal, and counts as contained. */
	CALL_PERM,
};

struct call {
	enum call_kind kind;
	const char *key;   /* its RESULT key, the same on the host and in a jail */
	const char *what;  /* for the evidence */
	const char *lacks; /* what a kernel that refuses it lacks ("IA32 emulation"), or NULL */
};

/* How a call ended: killed by a signal (made in a child), or returned. */
struct call_end {
	int sig; /* 0: it returned ret, with err when ret < 0 */
	long ret;
	int err;
};

/* Ordered from best to worst: a probe's verdict is its worst call's. */
enum call_verdict { V_CONTAINED, V_KERNEL, V_UNDECIDED, V_LEAKED };
static enum call_verdict calls_worst = V_CONTAINED;

/* The host control's results (--host-result KEY=TOKEN), set by main. */
static struct {
	char key[DG_PROBE_KEY_MAX];
	char token[DG_PROBE_TOKEN_MAX];
} host_results[DG_PROBE_HOST_MAX];
static int n_host_results;

static const char *host_result(const char *key)
{
	for (int i = 0; i < n_host_results; i++)
		if (strcmp(host_results[i].key, key) == 0)
			return host_results[i].token;
	return NULL;
}

/* Whether this process is the host control: root, with capabilities, and
 * no seccomp filter (/proc/self/status), so that nothing but the kernel
 * stands between it and a call. Read once. */
static bool is_host_control(void)
{
	static int cached = -1;
	if (cached >= 0)
		return cached;
	cached = 0;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	char line[256];
	int seccomp = -1;
	unsigned long long cap = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Seccomp: %d", &seccomp) == 1)
			continue;
		sscanf(line, "CapEff: %llx", &cap);
	}
	fclose(f);
	cached = geteuid() == 0 && seccomp == 0 && cap != 0;
	return cached;
}

/* TOKEN of a call's end: "ok", the errno's name (E<n> when unnamed) or the
 * signal's (SIG<name>). */
static void end_token(const struct call_end *c, char *buf, size_t len)
{
	const char *n = c->sig ? sigabbrev_np(c->sig) : c->ret >= 0 ? "ok" : strerrorname_np(c->err);
	if (c->sig && n)
		fmt(buf, len, "SIG%s", n);
	else if (c->sig)
		fmt(buf, len, "SIG%d", c->sig);
	else if (n)
		fmt(buf, len, "%s", n);
	else
		fmt(buf, len, "E%d", c->err);
}

/* Whether the call was refused (did not get what it asked for). */
static bool end_refused(enum call_kind kind, const struct call_end *c)
{
	if (c->sig)
		return true;
	if (c->ret >= 0)
		return false;
	if (kind == CALL_PERM)
		return true;
	if (kind == CALL_FAMILY)
		return c->err == EPERM || c->err == EAFNOSUPPORT || c->err == EPROTONOSUPPORT ||
		       c->err == ESOCKTNOSUPPORT;
	return c->err == EPERM || c->err == ENOSYS;
}

/* Whether it is the answer the jail gives: the filter's EPERM or SIGSYS,
 * or any refusal where the kernel's permission checks are the boundary. */
static bool end_is_jails(enum call_kind kind, const struct call_end *c)
{
	if (c->sig)
		return c->sig == SIGSYS;
	return c->ret < 0 && (c->err == EPERM || kind == CALL_PERM);
}

/* Why a refusal seen with no filter is the kernel's own, for the evidence. */
static void kernel_reason(const struct call *k, const struct call_end *c, char *buf, size_t len)
{
	if (c->sig)
		fmt(buf, len, "%s%s", k->lacks ? "this kernel has no " : "the kernel refuses it before "
			 "any system call", k->lacks ? k->lacks : "");
	else if (c->err == ENOSYS || c->err == EAFNOSUPPORT || c->err == EPROTONOSUPPORT ||
		 c->err == ESOCKTNOSUPPORT)
		fmt(buf, len, "this kernel has no %s", k->lacks ? k->lacks : "such call");
	else if (k->kind == CALL_PERM && c->err == ENOENT)
		fmt(buf, len, "%s%s", k->lacks ? "this kernel has no " : "the host has no such file",
		    k->lacks ? k->lacks : "");
	else if (k->kind == CALL_PERM)
		fmt(buf, len, "the host refuses it to root as well");
	else
		fmt(buf, len, "the kernel refuses it even to root with no filter (a sysctl, "
		    "lockdown or a security module)");
}

/* How it ended, in words: "EPERM", "killed by SIGSEGV", "succeeded (5)". */
static void end_words(const struct call_end *c, const char *token, char *buf, size_t len)
{
	if (c->sig)
		fmt(buf, len, "killed by %s", token);
	else if (c->ret >= 0)
		fmt(buf, len, "succeeded (%ld)", c->ret);
	else
		fmt(buf, len, "%s", token);
}

/* Judges one call (see "Kernel refusals" at the top): prints its RESULT
 * line, notes its evidence and folds its verdict into calls_worst. */
static enum call_verdict judge_call(const struct call *k, const struct call_end *c)
{
	char token[DG_PROBE_TOKEN_MAX], words[64], why[160];
	end_token(c, token, sizeof(token));
	end_words(c, token, words, sizeof(words));
	dprintf(verdict_fd, "RESULT %s=%s\n", k->key, token);
	const char *host = host_result(k->key);
	enum call_verdict v;
	if (!end_refused(k->kind, c)) {
		if (c->ret >= 0)
			note("%s %s", k->what, words);
		else
			note("%s reached the kernel: %s", k->what, token);
		v = V_LEAKED;
	} else if (is_host_control()) {
		kernel_reason(k, c, why, sizeof(why));
		note("%s on the host: %s: %s", k->what, words, why);
		v = V_KERNEL;
	} else if (host && strcmp(host, token) == 0) {
		kernel_reason(k, c, why, sizeof(why));
		note("%s: %s, as on the host without deskgate: %s%s", k->what, words, why,
		     c->sig ? " (no filter saw the call)"
		     : end_is_jails(k->kind, c) && k->kind != CALL_PERM
			     ? "; whether the filter refuses it too cannot be seen here"
		     : k->kind != CALL_PERM ? " (the filter let it through)" : "");
		v = V_KERNEL;
	} else if (end_is_jails(k->kind, c)) {
		if (host)
			note("%s: %s (on the host: %s)", k->what, words, host);
		else
			note("%s: %s", k->what, words);
		v = V_CONTAINED;
	} else if (!c->sig) {
		note("%s reached the kernel: %s%s%s%s", k->what, token, host ? " (on the host: " : "",
		     host ? host : "", host ? ")" : "");
		v = V_LEAKED;
	} else {
		if (host)
			note("%s: %s, not by the filter (SIGSYS), and not as on the host (%s)", k->what,
			     words, host);
		else
			note("%s: %s, not by the filter (SIGSYS); without the host control's result "
			     "(--host-result %s=...) the kernel's refusal cannot be told from anything "
			     "else", k->what, words, k->key);
		v = V_UNDECIDED;
	}
	if (v > calls_worst)
		calls_worst = v;
	return v;
}

/* judge_call for a system call made in this process: ret, and err. */
static enum call_verdict judge_ret(enum call_kind kind, const char *key, const char *what,
				   const char *lacks, long ret, int err)
{
	struct call k = {kind, key, what, lacks};
	struct call_end c = {0, ret, ret < 0 ? err : 0};
	return judge_call(&k, &c);
}

/* The verdict of a probe whose calls were all judged by judge_call. */
static int finish_calls(void)
{
	switch (calls_worst) {
	case V_LEAKED:
		return verdict("LEAKED", 1);
	case V_UNDECIDED:
		return verdict("ERROR", 2);
	case V_KERNEL:
		return verdict("KERNEL", 3);
	default:
		return verdict("CONTAINED", 0);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long parse_long(const char *s, long lo, long hi, const char *what)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi) {
		error_out("bad %s '%s' (want %ld..%ld)", what, s, lo, hi);
		exit(2);
	}
	return v;
}

/* A name no other run uses: pid plus clock nanoseconds. */
static void unique_name(char *buf, size_t len, const char *prefix)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, "%s%d-%lx", prefix, (int)getpid(), (unsigned long)ts.tv_nsec);
}

/* ------------------------------------------------------- forked children */

/* What a probe child reports back through a pipe. */
struct child_result {
	long ret;
	int err;
	char msg[256];
};

typedef void (*child_fn)(struct child_result *res, void *arg);

/* Runs fn in a forked child, bounded by timeout_s. Returns 1 and fills res
 * when the child reported; 0 when it died first (status tells how). */
static int run_child(child_fn fn, void *arg, int timeout_s, struct child_result *res,
		     int *status)
{
	int p[2];
	memset(res, 0, sizeof(*res));
	*status = 0;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		alarm((unsigned)timeout_s);
		struct child_result r = {0};
		fn(&r, arg);
		if (write(p[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(p[1]);
	ssize_t n = read(p[0], res, sizeof(*res));
	close(p[0]);
	waitpid(pid, status, 0);
	return n == (ssize_t)sizeof(*res);
}

/* Describes how a child ended, for evidence. */
static void describe_status(char *buf, size_t len, int status)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by %s", sigabbrev_np(WTERMSIG(status))
							  ? sigabbrev_np(WTERMSIG(status))
							  : "?");
	else
		snprintf(buf, len, "exited %d without a report", WEXITSTATUS(status));
}

/* How the call a child made ended (run_child, 5 s): its report, or the
 * signal that killed it. Returns 0, or -1 when that is not known (no fork,
 * a child that exited without a report or ran out of time: then the
 * evidence says so and the probe's verdict is ERROR at best). */
static int child_end(child_fn fn, void *arg, const char *what, struct call_end *c)
{
	struct child_result res;
	int st = 0;
	int n = run_child(fn, arg, 5, &res, &st);
	memset(c, 0, sizeof(*c));
	if (n == 1) {
		c->ret = res.ret;
		c->err = res.ret < 0 ? res.err : 0;
		return 0;
	}
	if (n == 0 && WIFSIGNALED(st) && WTERMSIG(st) != SIGALRM) {
		c->sig = WTERMSIG(st);
		return 0;
	}
	char how[64];
	if (n < 0)
		fmt(how, sizeof(how), "could not start: %s", en(errno));
	else if (WIFSIGNALED(st))
		fmt(how, sizeof(how), "did not finish in 5 s");
	else
		describe_status(how, sizeof(how), st);
	note("%s: child %s", what, how);
	if (calls_worst < V_UNDECIDED)
		calls_worst = V_UNDECIDED;
	return -1;
}

/* judge_call for a call made by fn in a child. */
static void judge_child(enum call_kind kind, const char *key, const char *what, const char *lacks,
			child_fn fn, void *arg)
{
	struct call k = {kind, key, what, lacks};
	struct call_end c;
	if (child_end(fn, arg, what, &c) == 0)
		judge_call(&k, &c);
}

/* ------------------------------------------------------------ network */

/* Lists the network interfaces this process sees, from /proc/self/net/dev
 * (the process's own network namespace). Returns the number of interfaces
 * other than lo, or -1 when the list cannot be read. */
static int non_lo_interfaces(char *names, size_t len)
{
	names[0] = '\0';
	FILE *f = fopen("/proc/self/net/dev", "re");
	int count = 0;
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			char *name = line;
			while (*name == ' ')
				name++;
			if (strcmp(name, "lo") == 0)
				continue;
			count++;
			size_t l = strlen(names);
			fmt(names + l, len - l, "%s%s", l ? "," : "", name);
		}
		fclose(f);
		return count;
	}
	/* No /proc/self/net: ask the kernel directly (netlink route). */
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs)
		return -1;
	for (struct if_nameindex *i = ifs; i->if_index; i++) {
		if (strcmp(i->if_name, "lo") == 0)
			continue;
		count++;
		size_t l = strlen(names);
		fmt(names + l, len - l, "%s%s", l ? "," : "", i->if_name);
	}
	if_freenameindex(ifs);
	return count;
}

union addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

static int parse_addr(const char *host, int port, union addr *a, socklen_t *len)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, host, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		a->in.sin_port = htons((uint16_t)port);
		*len = sizeof(a->in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_port = htons((uint16_t)port);
		*len = sizeof(a->in6);
		return 0;
	}
	return -1;
}

static bool is_loopback(const union addr *a)
{
	if (a->sa.sa_family == AF_INET)
		return (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
}

/* The egress guard: packets to a non-loopback address may be sent only when
 * this network namespace has no interface but lo, so they can only reach
 * addresses assigned to lo. Returns true when sending is safe; otherwise
 * records why as evidence (an interface other than lo IS the leak). */
static bool may_send_to(const union addr *a)
{
	if (is_loopback(a))
		return true;
	char names[512];
	int n = non_lo_interfaces(names, sizeof(names));
	if (n == 0)
		return true;
	if (n < 0)
		note("cannot list network interfaces; not sending");
	else
		note("network namespace has interfaces besides lo (%s); refused to send", names);
	return false;
}

/* connect ADDR PORT: TCP connect with a 1.5 s bound. Contained when the
 * connect fails at once (no route, refused); a connection, or no answer
 * (a SYN went out on some route), is a leak. */
static int p_connect(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: connect ADDR PORT");
	int port = (int)parse_long(argv[1], 1, 65535, "port");
	union addr a;
	socklen_t alen;
	if (parse_addr(argv[0], port, &a, &alen) < 0)
		return error_out("bad address %s", argv[0]);
	if (!may_send_to(&a))
		return finish(true);
	int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		note("socket: %s", en(errno));
		return finish(false);
	}
	int r = connect(s, &a.sa, alen);
	int err = r == 0 ? 0 : errno;
	if (r < 0 && err == EINPROGRESS) {
		struct pollfd p = {s, POLLOUT, 0};
		int n = poll(&p, 1, 1500);
		if (n == 0) {
			note("connect %s:%d: no answer in 1.5 s (the SYN had a route out)", argv[0],
			     port);
			close(s);
			return finish(true);
		}
		socklen_t l = sizeof(err);
		getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
	}
	if (err) {
		note("connect %s:%d: %s", argv[0], port, en(err));
		close(s);
		return finish(false);
	}
	char banner[64] = "";
	struct pollfd p = {s, POLLIN, 0};
	if (poll(&p, 1, 500) > 0) {
		ssize_t k = recv(s, banner, sizeof(banner) - 1, 0);
		banner[k > 0 ? k : 0] = '\0';
		for (char *c = banner; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '.';
	}
	note("connected to %s:%d (banner '%s')", argv[0], port, banner);
	close(s);
	return finish(true);
}

/* Builds a DNS query for name, type A. Returns its length. */
static size_t dns_query(uint8_t *q, size_t cap, const char *name, uint16_t id)
{
	size_t n = 0;
	q[n++] = (uint8_t)(id >> 8);
	q[n++] = (uint8_t)id;
	q[n++] = 0x01; /* RD */
	q[n++] = 0x00;
	q[n++] = 0; q[n++] = 1; /* QDCOUNT */
	for (int i = 0; i < 6; i++)
		q[n++] = 0;
	const char *p = name;
	while (*p && n + 70 < cap) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63)
			break;
		q[n++] = (uint8_t)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
		if (!dot)
			break;
	}
	q[n++] = 0;
	q[n++] = 0; q[n++] = 1; /* A */
	q[n++] = 0; q[n++] = 1; /* IN */
	return n;
}

/* dns NAME: does what the libc resolver does for a lookup (the nameservers
 * of /etc/resolv.conf, 127.0.0.1 when there are none; a UDP query to port
 * 53 of each). Leaked when any server answers, or when a query could be sent
 * to a non-loopback server (a lookup exfiltrates the name even unanswered). */
static int p_dns(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: dns NAME");
	char servers[8][64];
	int ns = 0;
	FILE *f = fopen("/etc/resolv.conf", "re");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f) && ns < 8) {
			char addr[64];
			if (sscanf(line, " nameserver %63s", addr) == 1)
				snprintf(servers[ns++], sizeof(servers[0]), "%s", addr);
		}
		fclose(f);
		note("resolv.conf lists %d nameserver(s)", ns);
	} else {
		note("no /etc/resolv.conf (%s)", en(errno));
	}
	if (ns == 0)
		snprintf(servers[ns++], sizeof(servers[0]), "127.0.0.1");
	bool leaked = false;
	for (int i = 0; i < ns; i++) {
		union addr a;
		socklen_t alen;
		if (parse_addr(servers[i], 53, &a, &alen) < 0) {
			note("nameserver %s unparsable", servers[i]);
			continue;
		}
		if (!may_send_to(&a)) {
			leaked = true;
			continue;
		}
		int s = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s < 0) {
			note("%s: socket %s", servers[i], en(errno));
			continue;
		}
		if (connect(s, &a.sa, alen) < 0) {
			note("%s: connect %s", servers[i], en(errno));
			close(s);
			continue;
		}
		uint8_t q[512], resp[1500];
		uint16_t id = (uint16_t)(getpid() ^ i ^ 0x5a5a);
		size_t ql = dns_query(q, sizeof(q), argv[0], id);
		if (send(s, q, ql, 0) < 0) {
			note("%s: send %s", servers[i], en(errno));
			close(s);
			continue;
		}
		if (!is_loopback(&a)) {
			note("%s: query sent to a non-loopback server", servers[i]);
			leaked = true;
		}
		struct pollfd p = {s, POLLIN, 0};
		int n = poll(&p, 1, 1500);
		if (n <= 0) {
			note("%s: no answer in 1.5 s", servers[i]);
		} else {
			ssize_t k = recv(s, resp, sizeof(resp), 0);
			if (k < 0) {
				note("%s: %s", servers[i], en(errno));
			} else if (k >= 12 && resp[0] == q[0] && resp[1] == q[1]) {
				note("%s answered: rcode %d, %d answer(s)", servers[i], resp[3] & 15,
				     (resp[6] << 8) | resp[7]);
				leaked = true;
			} else {
				note("%s sent %zd unexpected bytes", servers[i], k);
				leaked = true;
			}
		}
		close(s);
	}
	return finish(leaked);
}

/* Tries socket(family, type, proto) (a socket made is closed at once) and
 * judges it: kind CALL_PERM (any failure is the kernel's permission check)
 * or CALL_FAMILY (only the filter's EPERM contains it). key: its RESULT
 * key; lacks: what a kernel without the family lacks. */
static void try_socket(enum call_kind kind, const char *key, const char *what,
		       const char *lacks, int family, int type, int proto)
{
	errno = 0;
	int s = socket(family, type | SOCK_CLOEXEC, proto);
	int e = errno;
	if (s >= 0)
		close(s);
	judge_ret(kind, key, what, lacks, s, e);
}

/* raw-socket: no raw IP socket can be made (nothing is sent on one). */
static int p_raw_socket(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_PERM, "raw_icmp", "AF_INET SOCK_RAW ICMP", NULL, AF_INET, SOCK_RAW,
		   IPPROTO_ICMP);
	try_socket(CALL_PERM, "raw_ip", "AF_INET SOCK_RAW IPPROTO_RAW", NULL, AF_INET, SOCK_RAW,
		   IPPROTO_RAW);
	try_socket(CALL_PERM, "raw_icmpv6", "AF_INET6 SOCK_RAW ICMPV6", "IPv6", AF_INET6,
		   SOCK_RAW, IPPROTO_ICMPV6);
	return finish_calls();
}

/* packet-socket: no AF_PACKET socket can be made (closed at once if one is). */
static int p_packet_socket(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_PERM, "packet_raw", "AF_PACKET SOCK_RAW", "AF_PACKET", AF_PACKET,
		   SOCK_RAW, htons(ETH_P_ALL));
	try_socket(CALL_PERM, "packet_dgram", "AF_PACKET SOCK_DGRAM", "AF_PACKET", AF_PACKET,
		   SOCK_DGRAM, htons(ETH_P_ALL));
	return finish_calls();
}

/* socket-families: families outside unix/inet/inet6/netlink-route are
 * refused by the filter (EPERM), whether or not the kernel has them. */
static int p_socket_families(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_FAMILY, "af_vsock", "AF_VSOCK", "AF_VSOCK", AF_VSOCK, SOCK_STREAM, 0);
	try_socket(CALL_FAMILY, "af_alg", "AF_ALG", "AF_ALG", AF_ALG, SOCK_SEQPACKET, 0);
	try_socket(CALL_FAMILY, "af_key", "AF_KEY", "AF_KEY", AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */);
	try_socket(CALL_FAMILY, "netlink_uevent", "NETLINK_KOBJECT_UEVENT", "NETLINK_KOBJECT_UEVENT",
		   AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT);
	try_socket(CALL_FAMILY, "netlink_audit", "NETLINK_AUDIT", "NETLINK_AUDIT", AF_NETLINK,
		   SOCK_RAW, NETLINK_AUDIT);
	try_socket(CALL_FAMILY, "netlink_sock_diag", "NETLINK_SOCK_DIAG", "NETLINK_SOCK_DIAG",
		   AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG);
	return finish_calls();
}

/* unix-abstract NAME...: connects to each abstract unix socket "@NAME".
 * Abstract sockets belong to a network namespace: from a jail none of the
 * host's may be reachable. */
static int p_unix_abstract(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: unix-abstract NAME...");
	bool leaked = false;
	for (int i = 0; i < argc; i++) {
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		size_t l = strlen(argv[i]);
		if (l + 1 > sizeof(un.sun_path))
			return error_out("name too long: %s", argv[i]);
		memcpy(un.sun_path + 1, argv[i], l);
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return error_out("socket: %s", en(errno));
		if (connect(s, (struct sockaddr *)&un,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l)) == 0) {
			note("@%s: connected", argv[i]);
			leaked = true;
		} else {
			note("@%s: %s", argv[i], en(errno));
		}
		close(s);
	}
	return finish(leaked);
}

/* --------------------------------------------------------- filesystem */

/* list-dir PATH: leaked when PATH can be listed and shows any entry. */
static int p_list_dir(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: list-dir PATH");
	DIR *d = opendir(argv[0]);
	if (!d) {
		note("opendir %s: %s", argv[0], en(errno));
		return finish(false);
	}
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	note("%s lists %d entr%s", argv[0], n, n == 1 ? "y" : "ies");
	return finish(n > 0);
}

/* read-file PATH: leaked when PATH opens for reading (bytes are counted,
 * never shown). */
static int p_read_file(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: read-file PATH");
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		note("open %s: %s", argv[0], en(errno));
		return finish(false);
	}
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	note("read %zd byte(s) of %s", n, argv[0]);
	return finish(true);
}

/* write-dir DIR: leaked when a new file can be created in DIR (it gets a
 * unique name and is removed at once). */
static int p_write_dir(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: write-dir DIR");
	char name[128], path[4200];
	unique_name(name, sizeof(name), ".dg-probe-");
	snprintf(path, sizeof(path), "%s/%s", argv[0], name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		note("create %s: %s", path, en(errno));
		return finish(false);
	}
	close(fd);
	unlink(path);
	note("created (and removed) %s", path);
	return finish(true);
}

/* Kernel files that exist only when the kernel was built with something,
 * for the evidence of an ENOENT on the host. */
static const char *const kernel_files[][2] = {
	{"/proc/sysrq-trigger", "magic SysRq (/proc/sysrq-trigger)"},
};

/* open-write PATH...: leaked when any PATH opens for writing. Nothing is
 * ever written: opening /proc/sysrq-trigger or core_pattern is harmless.
 * Each open is judged (CALL_PERM, key: the path), so a file the host's
 * kernel does not have either is contained by the kernel, not by the
 * jail. */
static int p_open_write(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: open-write PATH...");
	for (int i = 0; i < argc; i++) {
		const char *lacks = NULL;
		for (size_t k = 0; k < sizeof(kernel_files) / sizeof(kernel_files[0]); k++)
			if (strcmp(argv[i], kernel_files[k][0]) == 0)
				lacks = kernel_files[k][1];
		/* The key is the path, or its position when the path is no key. */
		char key[DG_PROBE_KEY_MAX], what[4200];
		if (charset_ok(argv[i], strlen(argv[i]), sizeof(key), "_./-"))
			fmt(key, sizeof(key), "%s", argv[i]);
		else
			fmt(key, sizeof(key), "path%d", i);
		fmt(what, sizeof(what), "open %s for writing", argv[i]);
		errno = 0;
		int fd = open(argv[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
		int e = errno;
		if (fd >= 0)
			close(fd);
		judge_ret(CALL_PERM, key, what, lacks, fd, e);
	}
	if (calls_worst == V_LEAKED)
		note("(nothing written)");
	return finish_calls();
}

/* sys-write: no /sys attribute opens for writing (none is written). */
static int p_sys_write(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const char *const files[] = {
		"/sys/kernel/mm/transparent_hugepage/enabled",
		"/sys/kernel/mm/ksm/run",
		"/sys/power/state",
		"/sys/class/net/lo/mtu",
		"/sys/kernel/profiling",
		"/sys/kernel/uevent_helper",
		"/sys/module/printk/parameters/time",
		"/sys/fs/cgroup/pids/cgroup.procs",
		"/sys/fs/cgroup/cgroup.procs",
	};
	DIR *d = opendir("/sys");
	if (d) {
		int n = 0;
		struct dirent *e;
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		note("/sys lists %d entries", n);
	} else {
		note("/sys: %s", en(errno));
	}
	bool leaked = false;
	int missing = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		int fd = open(files[i], O_WRONLY | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			close(fd);
			note("%s opened for writing (not written)", files[i]);
			leaked = true;
		} else if (errno == ENOENT) {
			missing++;
		} else {
			note("%s: %s", files[i], en(errno));
		}
	}
	note("%d candidate file(s) absent", missing);
	return finish(leaked);
}

/* mknod DIR: leaked when a character device node (1,3: /dev/null) can be
 * made in DIR (removed at once). */
static int p_mknod(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mknod DIR");
	char name[128], path[4200];
	unique_name(name, sizeof(name), ".dg-node-");
	snprintf(path, sizeof(path), "%s/%s", argv[0], name);
	if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) < 0) {
		note("mknod %s c 1 3: %s", path, en(errno));
		return finish(false);
	}
	unlink(path);
	note("made (and removed) char device %s", path);
	return finish(true);
}

/* Mounting is only ever tried where it cannot touch the host: as an
 * unprivileged user (a jail), or in a mount namespace other than the
 * parent's (the `ns` harness unshares and execs the probe, so the probe's
 * parent, the test, is still in the host's namespace). Returns true when
 * safe; refuses when either namespace cannot be read. */
static bool mount_is_safe(void)
{
	if (geteuid() != 0)
		return true;
	char self[64] = "", parent[64] = "", path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)getppid());
	ssize_t a = readlink("/proc/self/ns/mnt", self, sizeof(self) - 1);
	ssize_t b = readlink(path, parent, sizeof(parent) - 1);
	return a > 0 && b > 0 && strcmp(self, parent) != 0;
}

/* remount: makes "/" and "/usr" read-write (and suid, dev, exec) through a
 * per-mount remount (MS_REMOUNT|MS_BIND with no flags). Leaked when either
 * succeeds. */
static int p_remount(int argc, char **argv)
{
	(void)argc, (void)argv;
	if (!mount_is_safe())
		return error_out("root in its parent's mount namespace: run under `dg_probe ns`");
	static const char *const targets[][2] = {{"/", "remount_root"}, {"/usr", "remount_usr"}};
	for (int i = 0; i < 2; i++) {
		char what[64];
		snprintf(what, sizeof(what), "remount %s rw", targets[i][0]);
		errno = 0;
		long r = mount(NULL, targets[i][0], NULL, MS_REMOUNT | MS_BIND, NULL);
		int e = errno;
		if (r != 0 && e == EINVAL)
			/* Not a mount point here (e.g. /usr on the host's root):
			 * says nothing either way. */
			note("%s: EINVAL (not a mount point)", what);
		else
			judge_ret(CALL_SYSCALL, targets[i][1], what, NULL, r, e);
	}
	return finish_calls();
}

/* mount-tmpfs DIR: mounts a tmpfs on a fresh directory under DIR (then
 * unmounts it and removes the directory). Leaked when the mount succeeds. */
static int p_mount_tmpfs(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mount-tmpfs DIR");
	if (!mount_is_safe())
		return error_out("root in its parent's mount namespace: run under `dg_probe ns`");
	char path[4200];
	snprintf(path, sizeof(path), "%s/dg-mnt-XXXXXX", argv[0]);
	if (!mkdtemp(path))
		return error_out("mkdtemp %s: %s", path, en(errno));
	errno = 0;
	long r = mount("dg-probe", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k");
	int e = errno;
	if (r == 0)
		umount2(path, MNT_DETACH);
	rmdir(path);
	judge_ret(CALL_SYSCALL, "mount_tmpfs", "mount tmpfs", "tmpfs", r, e);
	return finish_calls();
}

/* leaked-fd: every descriptor above 2 is a leak; a directory one is tried as
 * a way out (openat(fd, "etc/shadow")). Every descriptor number the
 * RLIMIT_NOFILE allows is checked (at most 65536). */
static int p_leaked_fd(int argc, char **argv)
{
	(void)argc, (void)argv;
	bool leaked = false;
	struct rlimit rl;
	int top = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		top = rl.rlim_cur > 65536 ? 65536 : (int)rl.rlim_cur;
	else if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		top = 65536;
	for (int fd = 3; fd < top; fd++) {
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		leaked = true;
		char link[64], target[256] = "?";
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		target[n > 0 ? n : 1] = '\0';
		struct stat st;
		bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
		note("fd %d open (%s%s)", fd, target, dir ? ", a directory" : "");
		if (dir) {
			int s = openat(fd, "etc/shadow", O_RDONLY | O_CLOEXEC);
			if (s >= 0) {
				char buf[64];
				ssize_t k = read(s, buf, sizeof(buf));
				note("openat(%d, etc/shadow) read %zd byte(s)", fd, k);
				close(s);
			} else {
				note("openat(%d, etc/shadow): %s", fd, en(errno));
			}
		}
	}
	if (!leaked)
		note("no descriptor in 3..%d is open", top - 1);
	return finish(leaked);
}

/* fill CAP_MB DIR...: writes into each DIR in turn until a write fails; the
 * total is bounded at 2*CAP_MB+2 MiB so a control run stays small. Contained
 * when every DIR stopped with ENOSPC, EDQUOT or EFBIG and the total stayed at
 * or below CAP_MB + 1 MiB (tmpfs rounding). Files are removed at the end. */
static int p_fill(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: fill CAP_MB DIR...");
	long cap = parse_long(argv[0], 1, 1 << 20, "cap");
	const uint64_t mib = 1 << 20;
	uint64_t limit = (uint64_t)(2 * cap + 2) * mib, total = 0;
	signal(SIGXFSZ, SIG_IGN); /* RLIMIT_FSIZE then shows as EFBIG */
	static char chunk[256 * 1024];
	memset(chunk, 'f', sizeof(chunk));
	char paths[8][4200];
	int nfiles = 0;
	bool all_stopped = true;
	for (int i = 1; i < argc && nfiles < 8; i++) {
		char name[128];
		unique_name(name, sizeof(name), ".dg-fill-");
		snprintf(paths[nfiles], sizeof(paths[0]), "%s/%s", argv[i], name);
		int fd = open(paths[nfiles], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			note("create in %s: %s", argv[i], en(errno));
			continue;
		}
		nfiles++;
		uint64_t here = 0;
		int err = 0;
		while (total < limit) {
			ssize_t k = write(fd, chunk, sizeof(chunk));
			if (k < 0) {
				err = errno;
				break;
			}
			if (k == 0) {
				err = ENOSPC;
				break;
			}
			here += (uint64_t)k;
			total += (uint64_t)k;
		}
		if (err == 0 && fsync(fd) < 0)
			err = errno;
		close(fd);
		if (err)
			note("%s: stopped after %.2f MiB: %s", argv[i], (double)here / mib, en(err));
		else
			note("%s: wrote %.2f MiB without error", argv[i], (double)here / mib);
		if (err != ENOSPC && err != EDQUOT && err != EFBIG)
			all_stopped = false;
	}
	for (int i = 0; i < nfiles; i++)
		unlink(paths[i]);
	if (nfiles == 0)
		return error_out("no directory was writable: %s", ev);
	note("total %.2f MiB, cap %ld MiB", (double)total / mib, cap);
	return finish(!all_stopped || total > (uint64_t)cap * mib + mib);
}

/* -------------------------------------------------------- credentials */

/* Names a jail's environment may hold: deskgate's allowlist, plus PWD, which
 * the /bin/sh that delivers the probe into the jail exports itself, plus the
 * names given with `env --allow` (a desktop's programs get DISPLAY, exec'd
 * programs the proxy variables: chosen by deskgate, never the host's). */
#define ENV_EXTRA_MAX 16
static const char *env_extra[ENV_EXTRA_MAX];
static int n_env_extra;
/* `env --host NAMES`: the names of the host's own environment. With them, a
 * name outside the allowlist is not judged here: a desktop's programs set
 * variables of their own (Chromium gives its crash handler
 * DBUS_SESSION_BUS_ADDRESS, and rewrites its environ block with its command
 * line), which may share a name with the host's. Each entry with a host
 * name is printed instead, as "HOSTVAR <fnv1a64 of its value> <where>
 * <name>", for the caller to compare with the host's value (which never
 * enters the jail, not even as a hash); other foreign names are counted.
 * Without --host, any name outside the allowlist leaks. The markers (secret
 * values the caller planted) leak either way. */
#define ENV_HOST_MAX 1024
static const char *env_host[ENV_HOST_MAX];
static int n_env_host;
static int env_inside;    /* names outside the allowlist that are not the host's */
static int env_hostnamed; /* entries named like one of the host's, printed as HOSTVAR */

/* FNV-1a, 64 bits: only for comparing values on the host side. */
static uint64_t fnv1a64(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static bool env_is_host_name(const char *entry, size_t l)
{
	for (int i = 0; i < n_env_host; i++)
		if (strlen(env_host[i]) == l && strncmp(entry, env_host[i], l) == 0)
			return true;
	return false;
}

/* Splits a comma-separated list (modified in place) into out. */
static int split_names(char *list, const char **out, int max)
{
	int n = 0;
	for (char *save = NULL, *t = strtok_r(list, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return n;
}

static bool env_allowed(const char *entry)
{
	static const char *const allow[] = {"PATH", "HOME", "USER",  "LOGNAME", "SHELL",
					    "LANG", "TERM", "TZ",    "TMPDIR",  "PWD"};
	size_t l = strcspn(entry, "=");
	for (size_t i = 0; i < sizeof(allow) / sizeof(allow[0]); i++)
		if (strlen(allow[i]) == l && strncmp(entry, allow[i], l) == 0)
			return true;
	for (int i = 0; i < n_env_extra; i++)
		if (strlen(env_extra[i]) == l && strncmp(entry, env_extra[i], l) == 0)
			return true;
	return false;
}

/* Checks one environment block (NUL-separated entries). Returns true when it
 * shows a name outside the allowlist (with --host: one of the host's) or
 * any marker; notes the first few names (never values). */
static bool env_block_leaks(const char *where, const char *block, size_t len, int nmark,
			    char **marks, bool quiet)
{
	int bad = 0, marked = 0;
	char names[256] = "";
	size_t off = 0;
	while (off < len) {
		const char *e = block + off;
		size_t l = strnlen(e, len - off);
		size_t kl0 = strcspn(e, "=");
		if (l > 0 && !env_allowed(e) && n_env_host > 0 && !env_is_host_name(e, kl0)) {
			env_inside++;
		} else if (l > 0 && !env_allowed(e) && n_env_host > 0) {
			const char *val = kl0 < l ? e + kl0 + 1 : e + l;
			printf("HOSTVAR %016llx %s %.*s\n",
			       (unsigned long long)fnv1a64(val, (size_t)(e + l - val)), where,
			       (int)kl0, e);
			env_hostnamed++;
		} else if (l > 0 && !env_allowed(e)) {
			size_t nl = strlen(names), kl = strcspn(e, "=");
			if (bad++ < 6 && nl + kl + 2 < sizeof(names))
				fmt(names + nl, sizeof(names) - nl, "%s%.*s", nl ? "," : "", (int)kl,
				    e);
		}
		for (int m = 0; m < nmark; m++)
			if (marks[m][0] && memmem(e, l, marks[m], strlen(marks[m])))
				marked++;
		off += l + 1;
	}
	if (marked)
		note("%s holds %d entr%s with a secret marker", where, marked,
		     marked == 1 ? "y" : "ies");
	if (bad && !quiet)
		note("%s has %d name(s) outside the allowlist: %s%s", where, bad, names,
		     bad > 6 ? ",..." : "");
	return bad > 0 || marked > 0;
}

/* env [--allow NAME,...] [--host NAME,...] [MARKER...]: the process
 * environment and every readable /proc/PID/environ (PID 1 included) hold
 * only allowlisted names (with --host: see env_host) and none of the secret
 * values (markers) the caller put into deskgate's environment. */
static int p_env(int argc, char **argv)
{
	bool leaked = false;
	while (argc >= 2 && (!strcmp(argv[0], "--allow") || !strcmp(argv[0], "--host"))) {
		char *list = strdup(argv[1]);
		if (!list)
			return error_out("out of memory");
		if (!strcmp(argv[0], "--allow"))
			n_env_extra += split_names(list, env_extra + n_env_extra,
						   ENV_EXTRA_MAX - n_env_extra);
		else
			n_env_host += split_names(list, env_host + n_env_host,
						  ENV_HOST_MAX - n_env_host);
		argc -= 2;
		argv += 2;
	}
	char *block = malloc(1 << 20);
	if (!block)
		return error_out("out of memory");
	size_t len = 0;
	for (char **e = environ; *e; e++) {
		size_t l = strlen(*e);
		if (len + l + 1 > (1 << 20))
			break;
		memcpy(block + len, *e, l + 1);
		len += l + 1;
	}
	leaked |= env_block_leaks("environ", block, len, argc, argv, false);
	int leaking = 0; /* /proc sources with names outside the allowlist */
	DIR *d = opendir("/proc");
	int readable = 0, unreadable = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]) && strcmp(de->d_name, "self"))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			unreadable++;
			continue;
		}
		len = 0;
		ssize_t k = 0;
		while (len < (1 << 20) && (k = read(fd, block + len, (1 << 20) - len)) > 0)
			len += (size_t)k;
		close(fd);
		if (k < 0 && len == 0) {
			unreadable++;
			continue;
		}
		readable++;
		bool l = env_block_leaks(path, block, len, argc, argv, leaking >= 3);
		leaking += l;
		leaked |= l;
	}
	if (d)
		closedir(d);
	note("%d /proc/*/environ readable (%d showing %s), %d not", readable, leaking,
	     n_env_host ? "a marker" : "names outside the allowlist", unreadable);
	if (n_env_host)
		note("%d of the host's name(s) looked for: %d entr%s named like one (HOSTVAR, for "
		     "the caller to compare), %d other name(s) set inside the session",
		     n_env_host, env_hostnamed, env_hostnamed == 1 ? "y" : "ies", env_inside);
	free(block);
	return finish(leaked);
}

/* cred-files: no credential file or directory is readable: in $HOME, in
 * /root, in each /home/USER, and the container secret paths. */
static int p_cred_files(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const char *const rel[] = {".ssh",         ".aws",           ".config/gcloud",
					  ".docker/config.json", ".kube/config", ".netrc",
					  ".git-credentials", ".gnupg",   ".azure"};
	static const char *const abs[] = {"/run/secrets", "/var/run/secrets",
					  "/var/run/secrets/kubernetes.io/serviceaccount/token",
					  "/etc/ssh/ssh_host_ed25519_key",
					  "/etc/ssh/ssh_host_rsa_key"};
	char homes[34][512];
	int nh = 0;
	const char *home = getenv("HOME");
	if (home && *home)
		snprintf(homes[nh++], sizeof(homes[0]), "%s", home);
	if (!home || strcmp(home, "/root"))
		snprintf(homes[nh++], sizeof(homes[0]), "/root");
	DIR *d = opendir("/home");
	struct dirent *e;
	while (d && (e = readdir(d)) && nh < 34) {
		if (e->d_name[0] == '.')
			continue;
		fmt(homes[nh], sizeof(homes[0]), "/home/%s", e->d_name);
		if (!home || strcmp(home, homes[nh]))
			nh++;
	}
	if (d)
		closedir(d);
	bool leaked = false;
	int checked = 0;
	for (int h = 0; h < nh; h++)
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			char p[1100];
			fmt(p, sizeof(p), "%s/%s", homes[h], rel[i]);
			checked++;
			int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			if (fd >= 0) {
				close(fd);
				note("%s readable", p);
				leaked = true;
			} else if (errno != ENOENT && errno != ENOTDIR) {
				note("%s: %s", p, en(errno));
			}
		}
	for (size_t i = 0; i < sizeof(abs) / sizeof(abs[0]); i++) {
		checked++;
		int fd = open(abs[i], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
		if (fd >= 0) {
			close(fd);
			note("%s readable", abs[i]);
			leaked = true;
		} else if (errno != ENOENT && errno != ENOTDIR) {
			note("%s: %s", abs[i], en(errno));
		}
	}
	note("%d path(s) checked in %d home(s) and the secret mounts", checked, nh);
	return finish(leaked);
}

/* keyctl: the session and user keyrings cannot be reached. */
static int p_keyctl(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
	judge_ret(CALL_SYSCALL, "keyctl_session", "keyctl(GET_KEYRING_ID, session)", "keyrings", r,
		  errno);
	errno = 0;
	r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0);
	judge_ret(CALL_SYSCALL, "keyctl_user", "keyctl(GET_KEYRING_ID, user)", "keyrings", r, errno);
	return finish_calls();
}

/* ---------------------------------------------------------- isolation */

/* status: /proc/self/status shows every capability set empty, NoNewPrivs 1
 * and Seccomp 2 (filter mode). */
static int p_status(int argc, char **argv)
{
	(void)argc, (void)argv;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return error_out("/proc/self/status: %s", en(errno));
	char line[256];
	bool leaked = false;
	int seen = 0;
	while (fgets(line, sizeof(line), f)) {
		char key[64], val[128];
		if (sscanf(line, "%63[^:]:%*[ \t]%127s", key, val) != 2)
			continue;
		bool cap = strncmp(key, "Cap", 3) == 0;
		if (cap || !strcmp(key, "NoNewPrivs") || !strcmp(key, "Seccomp")) {
			seen++;
			bool bad = cap ? strtoull(val, NULL, 16) != 0
				       : !strcmp(key, "NoNewPrivs") ? strcmp(val, "1") != 0
								    : strcmp(val, "2") != 0;
			note("%s %s%s", key, val, bad ? " (!)" : "");
			leaked |= bad;
		}
	}
	fclose(f);
	if (seen < 7)
		return error_out("only %d of the 7 fields found: %s", seen, ev);
	return finish(leaked);
}

static void c_traceme(struct child_result *res, void *arg)
{
	(void)arg;
	errno = 0;
	res->ret = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
	res->err = errno;
}

/* Attaches to pid, waits for the stop and detaches with no signal, so the
 * target only sees a brief stop. Returns ptrace's result. */
static long attach_detach(pid_t pid, int *err)
{
	errno = 0;
	long r = ptrace(PTRACE_ATTACH, pid, NULL, NULL);
	*err = errno;
	if (r == 0) {
		int st;
		waitpid(pid, &st, __WALL);
		ptrace(PTRACE_DETACH, pid, NULL, NULL);
	}
	return r;
}

/* A process to reach into when the parent is outside the pid namespace (a
 * program run beside a desktop by dg_jail_enter: its supervisor is not in
 * the jail): the first other visible process of our own uid, which the
 * kernel alone would let us trace (a desktop's Xvnc); 0 when none. */
static pid_t other_process(void)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	pid_t found = 0, self = getpid();
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		pid_t p = (pid_t)atoi(e->d_name);
		struct stat st;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s", e->d_name);
		if (p > 1 && p != self && stat(path, &st) == 0 && st.st_uid == getuid())
			found = p;
	}
	closedir(d);
	return found;
}

/* ptrace: PTRACE_TRACEME in a child, PTRACE_ATTACH to an own child (allowed
 * by the kernel alone: only the filter stops it) and to the parent (or,
 * when the parent is outside the pid namespace, to another process of the
 * same uid). An attach that succeeds stops the target only for a moment. */
static int p_ptrace(int argc, char **argv)
{
	(void)argc, (void)argv;
	int st, err;
	judge_child(CALL_SYSCALL, "ptrace_traceme", "PTRACE_TRACEME", NULL, c_traceme, NULL);
	pid_t kid = fork();
	if (kid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	if (kid > 0) {
		long r = attach_detach(kid, &err);
		judge_ret(CALL_SYSCALL, "ptrace_attach_child", "PTRACE_ATTACH own child", NULL, r,
			  err);
		kill(kid, SIGKILL);
		waitpid(kid, &st, 0);
	}
	pid_t pp = getppid();
	if (pp > 0) {
		char what[64];
		snprintf(what, sizeof(what), "PTRACE_ATTACH parent %d", (int)pp);
		long r = attach_detach(pp, &err);
		judge_ret(CALL_SYSCALL, "ptrace_attach_parent", what, NULL, r, err);
	} else {
		note("parent outside the pid namespace (ppid 0)");
		pid_t other = other_process();
		if (other > 0) {
			char what[64];
			snprintf(what, sizeof(what), "PTRACE_ATTACH pid %d (same uid)", (int)other);
			long r = attach_detach(other, &err);
			judge_ret(CALL_SYSCALL, "ptrace_attach_other", what, NULL, r, err);
		}
	}
	return finish_calls();
}

/* process-vm-readv: reads the parent's memory (the address comes from its
 * maps when readable; EFAULT still means the permission check passed). When
 * the parent is outside the pid namespace, another process of the same uid
 * is the target. */
static int p_process_vm_readv(int argc, char **argv)
{
	(void)argc, (void)argv;
	pid_t pp = getppid();
	if (pp <= 0) {
		pp = other_process();
		note("parent outside the pid namespace (ppid 0): %s", pp > 0 ? "another process of "
		     "the same uid is the target" : "no other process of the same uid either");
		if (pp <= 0)
			return finish(false);
	}
	unsigned long addr = 0x10000;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pp);
	FILE *f = fopen(path, "re");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			unsigned long lo, hi;
			char perms[8];
			if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[0] == 'r') {
				addr = lo;
				break;
			}
		}
		fclose(f);
		note("maps of %d readable", (int)pp);
	} else {
		note("maps of %d: %s", (int)pp, en(errno));
	}
	char buf[16];
	struct iovec local = {buf, sizeof(buf)}, remote = {(void *)addr, sizeof(buf)};
	errno = 0;
	long r = process_vm_readv(pp, &local, 1, &remote, 1, 0);
	int e = errno;
	if (r > 0) {
		note("read %ld byte(s) of process %d at %#lx", r, (int)pp, addr);
		return finish(true);
	}
	if (e == EPERM || e == ESRCH) {
		note("process_vm_readv(%d): %s", (int)pp, en(e));
		return finish(false);
	}
	note("process_vm_readv(%d) passed the permission check: %s", (int)pp, en(e));
	return finish(true);
}

struct ns_call {
	const char *what;
	const char *key;
	int kind; /* 0 unshare, 1 clone, 2 clone3 */
	unsigned long flags;
};

/* The fields of struct clone_args up to exit_signal (CLONE_ARGS_SIZE_VER0 is
 * 64 bytes: all eight u64 fields). */
struct dg_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static void c_ns_call(struct child_result *res, void *arg)
{
	const struct ns_call *c = arg;
	errno = 0;
	if (c->kind == 0) {
		res->ret = unshare((int)c->flags);
	} else if (c->kind == 1) {
		long r = syscall(SYS_clone, c->flags | SIGCHLD, 0, 0, 0, 0);
		if (r == 0)
			_exit(0);
		res->ret = r;
	} else {
		struct dg_clone_args ca = {.flags = c->flags, .exit_signal = SIGCHLD};
		long r = syscall(SYS_clone3, &ca, sizeof(ca));
		if (r == 0)
			_exit(0);
		res->ret = r;
	}
	res->err = errno;
	if (res->ret > 0 && c->kind) {
		int st;
		waitpid((pid_t)res->ret, &st, __WALL);
	}
}

/* unshare: unshare and clone (raw, and clone3) with new user, net or mount
 * namespaces are refused. Each call runs in its own child. clone3 may also
 * answer ENOSYS (the jail makes libc fall back to clone, whose flags the
 * filter can read). */
static int p_unshare(int argc, char **argv)
{
	(void)argc, (void)argv;
	static const struct ns_call calls[] = {
		{"unshare(CLONE_NEWUSER)", "unshare_newuser", 0, CLONE_NEWUSER},
		{"unshare(CLONE_NEWNET)", "unshare_newnet", 0, CLONE_NEWNET},
		{"unshare(CLONE_NEWNS)", "unshare_newns", 0, CLONE_NEWNS},
		{"clone(CLONE_NEWUSER)", "clone_newuser", 1, CLONE_NEWUSER},
		{"clone(CLONE_NEWUSER|CLONE_NEWNET)", "clone_newuser_newnet", 1,
		 CLONE_NEWUSER | CLONE_NEWNET},
		{"clone(CLONE_NEWNET)", "clone_newnet", 1, CLONE_NEWNET},
		{"clone3(CLONE_NEWUSER)", "clone3_newuser", 2, CLONE_NEWUSER},
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		struct call k = {CALL_SYSCALL, calls[i].key, calls[i].what, NULL};
		struct call_end c;
		if (child_end(c_ns_call, (void *)&calls[i], calls[i].what, &c) < 0)
			continue;
		if (calls[i].kind == 2 && !c.sig && c.ret < 0 && c.err == ENOSYS &&
		    !is_host_control()) {
			/* The filter's own answer to clone3 (its flags are out
			 * of its reach): libc falls back to clone. */
			note("%s: ENOSYS", calls[i].what);
			continue;
		}
		judge_call(&k, &c);
	}
	return finish_calls();
}

/* bpf: loading a trivial socket filter program (r0 = 0; exit) is refused;
 * a program that loads is closed at once. */
static int p_bpf(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct bpf_insn insns[2] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	union bpf_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
	attr.insn_cnt = 2;
	attr.insns = (uint64_t)(uintptr_t)insns;
	attr.license = (uint64_t)(uintptr_t) "GPL";
	errno = 0;
	long r = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof(attr));
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "bpf_prog_load", "bpf(BPF_PROG_LOAD socket filter)", "bpf()", r, e);
	return finish_calls();
}

/* perf: a software counter on the probe itself is refused (the kernel alone
 * allows it to unprivileged users at perf_event_paranoid <= 2). */
static int p_perf(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof(a);
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	errno = 0;
	long r = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "perf_event_open", "perf_event_open(sw task clock, self)",
		  "perf events", r, e);
	return finish_calls();
}

/* userfaultfd: refused, also with UFFD_USER_MODE_ONLY (which the kernel
 * alone grants to unprivileged users). */
static int p_userfaultfd(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "userfaultfd", "userfaultfd(0)", "userfaultfd", r, e);
	errno = 0;
	r = syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "userfaultfd_user_mode", "userfaultfd(USER_MODE_ONLY)",
		  "userfaultfd", r, e);
	return finish_calls();
}

/* io-uring: io_uring_setup is refused (a ring that is made is closed). */
static int p_io_uring(int argc, char **argv)
{
	(void)argc, (void)argv;
	char params[120]; /* struct io_uring_params, zeroed */
	memset(params, 0, sizeof(params));
	errno = 0;
	long r = syscall(SYS_io_uring_setup, 4, params);
	int e = errno;
	if (r >= 0)
		close((int)r);
	judge_ret(CALL_SYSCALL, "io_uring_setup", "io_uring_setup(4)", "io_uring", r, e);
	return finish_calls();
}

/* open-by-handle: open_by_handle_at is refused (a handle from
 * name_to_handle_at when that works, else a made-up one; any answer but EPERM
 * means the call reached the kernel). */
static int p_open_by_handle(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct {
		struct file_handle h;
		unsigned char bytes[MAX_HANDLE_SZ];
	} fh;
	memset(&fh, 0, sizeof(fh));
	fh.h.handle_bytes = MAX_HANDLE_SZ;
	int mount_id;
	errno = 0;
	if (name_to_handle_at(AT_FDCWD, "/etc", &fh.h, &mount_id, 0) < 0) {
		note("name_to_handle_at(/etc): %s", en(errno));
		fh.h.handle_bytes = 8;
		fh.h.handle_type = 1;
	}
	int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	errno = 0;
	long r = syscall(SYS_open_by_handle_at, root, &fh.h, O_RDONLY | O_CLOEXEC);
	int e = errno;
	if (r >= 0)
		close((int)r);
	if (root >= 0)
		close(root);
	judge_ret(CALL_SYSCALL, "open_by_handle_at", "open_by_handle_at", "file handles", r, e);
	return finish_calls();
}

/* kexec: kexec_load and kexec_file_load with invalid flags: past the
 * permission check the kernel answers EINVAL, so nothing is ever loaded. */
static int p_kexec(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL);
	judge_ret(CALL_SYSCALL, "kexec_load", "kexec_load(bad flags)", "kexec", r, errno);
	errno = 0;
	r = syscall(SYS_kexec_file_load, -1, -1, 0UL, NULL, 0xdead0000UL);
	judge_ret(CALL_SYSCALL, "kexec_file_load", "kexec_file_load(bad flags)", "kexec_file_load",
		  r, errno);
	return finish_calls();
}

/* modules: init_module with an empty image (ENOEXEC past the permission
 * check) and finit_module on fd -1 (EBADF) load nothing. */
static int p_modules(int argc, char **argv)
{
	(void)argc, (void)argv;
	errno = 0;
	long r = syscall(SYS_init_module, NULL, 0UL, "");
	judge_ret(CALL_SYSCALL, "init_module", "init_module(empty)", "loadable modules", r, errno);
	errno = 0;
	r = syscall(SYS_finit_module, -1, "", 0);
	judge_ret(CALL_SYSCALL, "finit_module", "finit_module(-1)", "loadable modules", r, errno);
	return finish_calls();
}

static void c_x32(struct child_result *res, void *arg)
{
	(void)arg;
	errno = 0;
	res->ret = syscall(0x40000000L | SYS_getpid);
	res->err = errno;
}

static void c_int80(struct child_result *res, void *arg)
{
	(void)arg;
	long ax = 20; /* i386 getpid */
	__asm__ volatile("int $0x80" : "+a"(ax) : : "r8", "r9", "r10", "r11", "memory");
	res->ret = ax < 0 && ax > -4096 ? -1 : ax;
	res->err = ax < 0 && ax > -4096 ? (int)-ax : 0;
}

/* x32: getpid through the x32 ABI (nr | 0x40000000) is killed (SIGSYS). The
 * filter sees the number on any x86-64 kernel; one built without the x32
 * ABI answers ENOSYS without a filter (the host control: KERNEL). */
static int p_x32(int argc, char **argv)
{
	(void)argc, (void)argv;
	judge_child(CALL_ABI, "x32", "x32 getpid", "x32 ABI", c_x32, NULL);
	return finish_calls();
}

/* int80: getpid through int 0x80 (the i386 ABI) is killed (SIGSYS). A kernel
 * without IA32 emulation raises SIGSEGV instead, before any filter sees the
 * call: on the host and in a jail alike (KERNEL, given the host control). */
static int p_int80(int argc, char **argv)
{
	(void)argc, (void)argv;
	judge_child(CALL_ABI, "int80", "int 0x80 getpid", "IA32 emulation", c_int80, NULL);
	return finish_calls();
}

/* The TIOCSTI child: a new session whose controlling terminal is a fresh
 * pty, so the kernel alone would allow TIOCSTI on it; then the ioctls. The
 * injected byte goes to this private pty only. */
static void c_tiocsti(struct child_result *res, void *arg)
{
	(void)arg;
	setsid();
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR /dev/ptmx: %s", en(errno));
		return;
	}
	char name[128];
	if (ptsname_r(m, name, sizeof(name)) != 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR ptsname: %s", en(errno));
		return;
	}
	int s = open(name, O_RDWR | O_CLOEXEC);
	if (s < 0) {
		res->ret = -2;
		snprintf(res->msg, sizeof(res->msg), "ERROR open %s: %s", name, en(errno));
		return;
	}
	ioctl(s, TIOCSCTTY, 0);
	static const struct {
		const char *what;
		unsigned long req;
	} calls[] = {
		{"TIOCSTI 0x5412", 0x5412UL},
		{"TIOCSTI 0x100005412", 0x100005412UL},
		{"TIOCLINUX 0x541c", 0x541CUL},
		{"TIOCLINUX 0x10000541c", 0x10000541CUL},
	};
	res->ret = 0;
	size_t off = 0;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		char c = i < 2 ? '#' : 12; /* TIOCLINUX 12: read the shift state */
		errno = 0;
		long r = syscall(SYS_ioctl, s, calls[i].req, &c);
		int e = errno;
		if (!(r < 0 && e == EPERM))
			res->ret = 1;
		off += (size_t)snprintf(res->msg + off, sizeof(res->msg) - off, "%s%s: %s",
					i ? "; " : "", calls[i].what,
					r < 0 ? en(e) : "succeeded");
		if (off >= sizeof(res->msg))
			break;
	}
}

/* tiocsti: TIOCSTI (and TIOCLINUX) are refused on the probe's own
 * controlling pty, also when the request has high bits set (the kernel
 * truncates the request to 32 bits; the filter must compare all 64). */
static int p_tiocsti(int argc, char **argv)
{
	(void)argc, (void)argv;
	struct child_result res;
	int st;
	if (run_child(c_tiocsti, NULL, 5, &res, &st) != 1) {
		char how[64];
		describe_status(how, sizeof(how), st);
		note("tiocsti child %s", how);
		return finish(!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS));
	}
	if (res.ret == -2)
		return error_out("%s", res.msg + 6);
	note("%s", res.msg);
	return finish(res.ret != 0);
}

/* procs MAX PID [COMM]: at most MAX processes are visible, and PID (the test
 * runner on the host) is not one of them (when COMM is given, a process
 * with that pid counts only if its comm matches). */
static int p_procs(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: procs MAX PID [COMM]");
	long max = parse_long(argv[0], 1, 1 << 22, "max");
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += isdigit((unsigned char)e->d_name[0]) != 0;
	closedir(d);
	note("%d process(es) visible (max %ld)", n, max);
	bool leaked = n > max;
	char path[64], comm[64] = "";
	snprintf(path, sizeof(path), "/proc/%s/comm", argv[1]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t k = read(fd, comm, sizeof(comm) - 1);
		close(fd);
		comm[k > 0 ? k : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		if (argc < 3 || strcmp(comm, argv[2]) == 0) {
			note("pid %s visible (%s)", argv[1], comm);
			leaked = true;
		} else {
			note("pid %s exists but is '%s', not the runner", argv[1], comm);
		}
	} else {
		note("pid %s: %s", argv[1], en(errno));
	}
	return finish(leaked);
}

/* ---------------------------------------------------------- resources */

/* forkbomb CAP HOLD_MS: forks children that wait, until fork fails or 2*CAP
 * children exist; prints "HOLDING <n>" and holds them HOLD_MS (the test
 * checks that the host stays responsive meanwhile), then kills them.
 * Contained when fork failed before CAP children. */
static int p_forkbomb(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: forkbomb CAP HOLD_MS");
	long cap = parse_long(argv[0], 1, 4096, "cap");
	long hold = parse_long(argv[1], 0, 60000, "hold");
	long max = 2 * cap;
	pid_t *kids = calloc((size_t)max, sizeof(pid_t));
	if (!kids)
		return error_out("out of memory");
	long n = 0;
	int err = 0;
	pid_t self = getpid();
	fflush(NULL);
	while (n < max) {
		pid_t p = fork();
		if (p < 0) {
			err = errno;
			break;
		}
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(0);
			for (;;)
				pause();
		}
		kids[n++] = p;
	}
	printf("HOLDING %ld\n", n);
	fflush(stdout);
	struct timespec ts = {hold / 1000, (hold % 1000) * 1000000};
	nanosleep(&ts, NULL);
	for (long i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (long i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	if (err)
		note("fork failed after %ld children: %s (cap %ld)", n, en(err), cap);
	else
		note("forked %ld children without a failure (cap %ld)", n, cap);
	return finish(!err || n >= cap);
}

/* memhog MB: allocates and touches MB MiB, printing progress every 16 MiB.
 * Inside a jail with a lower memory limit it is OOM-killed (the test checks
 * the exit and the reason); leaked when all of it was touched. */
static int p_memhog(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: memhog MB");
	long mb = parse_long(argv[0], 1, 1 << 16, "MB");
	for (long i = 0; i < mb; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED) {
			note("allocation failed after %ld MiB: %s", i, en(errno));
			return finish(false);
		}
		memset(p, (int)(i & 0xff) | 1, 1 << 20);
		if ((i + 1) % 16 == 0) {
			printf("touched %ld MiB\n", i + 1);
			fflush(stdout);
		}
	}
	note("allocated and touched %ld MiB", mb);
	return finish(true);
}

/* Where spinning work goes, so the compiler keeps it. */
static volatile unsigned long spin_sink;

/* Spins until t0 + ms of wall time; returns the wall time spun. */
static double spin_until(double t0, long ms)
{
	double t1;
	do {
		for (int i = 0; i < 100000; i++)
			spin_sink += (unsigned long)i;
		t1 = now_s();
	} while (t1 - t0 < (double)ms / 1000.0);
	return t1 - t0;
}

#define CPUSPIN_PROCS_MAX 64

/* cpuspin MS MAX_RATIO [PROCS]: spins MS milliseconds of wall time in PROCS
 * processes at once (default 1: this one); the ratio of their CPU time to
 * the wall time shows the CPU limit. Contained when <= MAX_RATIO. One
 * spinner can never use more than one core, so a quota of N cores is only
 * seen to hold with more than N spinners on a machine with more than N. */
static int p_cpuspin(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: cpuspin MS MAX_RATIO [PROCS]");
	long ms = parse_long(argv[0], 1, 600000, "MS");
	double max = strtod(argv[1], NULL);
	long procs = argc > 2 ? parse_long(argv[2], 1, CPUSPIN_PROCS_MAX, "PROCS") : 1;
	double t0 = now_s(), wall;
	double cpu;
	if (procs == 1) {
		struct timespec c0, c1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		wall = spin_until(t0, ms);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	} else {
		pid_t kids[CPUSPIN_PROCS_MAX];
		long n = 0;
		pid_t self = getpid();
		fflush(NULL);
		for (; n < procs; n++) {
			kids[n] = fork();
			if (kids[n] < 0)
				break;
			if (kids[n] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != self)
					_exit(0);
				spin_until(t0, ms);
				_exit(0);
			}
		}
		for (long i = 0; i < n; i++)
			waitpid(kids[i], NULL, 0);
		wall = now_s() - t0;
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		if (n < procs)
			note("only %ld of %ld spinners started", n, procs);
	}
	double ratio = cpu / wall;
	note("%ld spinner(s): cpu %.3f s over %.3f s wall: ratio %.2f (max %.2f)", procs, cpu, wall,
	     ratio, max);
	return finish(ratio > max);
}

/* flood BYTES: writes BYTES to stdout; the verdict goes to stderr. Contained
 * when a write failed (the relay closed the pipe at its cap) before all of
 * it was written. */
static int p_flood(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: flood BYTES");
	verdict_fd = 2;
	long total = parse_long(argv[0], 1, 1L << 34, "bytes");
	signal(SIGPIPE, SIG_IGN);
	static char chunk[65536];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (i % 64 == 63) ? '\n' : 'y';
	long done = 0;
	while (done < total) {
		size_t want = (size_t)(total - done) < sizeof(chunk) ? (size_t)(total - done)
								     : sizeof(chunk);
		ssize_t k = write(1, chunk, want);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			note("write failed after %ld byte(s): %s", done, en(errno));
			return finish(false);
		}
		done += k;
	}
	note("wrote all %ld byte(s)", done);
	return finish(true);
}

/* daemon TAG SECS keep|close: double-forks a setsid daemon named "dgd-TAG"
 * (its comm) that sleeps SECS seconds, then exits at once. With "keep" the
 * daemon holds stdout and stderr open (what a hostile one would do); with
 * "close" it points them at /dev/null. From inside, a daemon that outlives
 * its parent has always escaped it: the final line is LEAKED with its pid.
 * Whether it outlived the jail is for `alive TAG`, run on the host after. */
static int p_daemon(int argc, char **argv)
{
	if (argc < 3)
		return error_out("usage: daemon TAG SECS keep|close");
	long secs = parse_long(argv[1], 1, 3600, "secs");
	bool keep = strcmp(argv[2], "keep") == 0;
	char comm[16];
	snprintf(comm, sizeof(comm), "dgd-%s", argv[0]);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return error_out("pipe: %s", en(errno));
	fflush(NULL);
	pid_t c = fork();
	if (c < 0)
		return error_out("fork: %s", en(errno));
	if (c == 0) {
		setsid();
		pid_t g = fork();
		if (g != 0)
			_exit(g < 0);
		prctl(PR_SET_NAME, comm);
		if (!keep) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		pid_t me = getpid();
		if (write(p[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
			_exit(1);
		close(p[1]);
		close(p[0]);
		struct timespec ts = {secs, 0};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[1]);
	pid_t d = 0;
	ssize_t k = read(p[0], &d, sizeof(d));
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	if (k != (ssize_t)sizeof(d))
		return error_out("daemon did not start");
	note("daemon %s pid %d running after its parent exited", comm, (int)d);
	return finish(true);
}

/* alive TAG: (run on the host) leaked when any process named "dgd-TAG" is
 * alive; lists their host pids. */
static int p_alive(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: alive TAG");
	char want[16];
	snprintf(want, sizeof(want), "dgd-%s", argv[0]);
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	bool leaked = false;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char path[300], comm[64] = "", state = '?';
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		/* pid (comm) state ... ; comm has no ')' here */
		if (fscanf(f, "%*d (%63[^)]) %c", comm, &state) == 2 && strcmp(comm, want) == 0 &&
		    state != 'Z' && state != 'X') {
			note("pid %s (%s) alive, state %c", e->d_name, comm, state);
			leaked = true;
		}
		fclose(f);
	}
	closedir(d);
	if (!leaked)
		note("no process named %s", want);
	return finish(leaked);
}

/* hello: a static binary runs; prints who it runs as. Not a containment
 * probe: exit 0. */
static int p_hello(int argc, char **argv)
{
	(void)argc, (void)argv;
	printf("HELLO uid=%u gid=%u pid=%d\n", (unsigned)getuid(), (unsigned)getgid(),
	       (int)getpid());
	return 0;
}

/* ------------------------------------------------ probes of `deskgate audit`
 *
 * These compare what the jail sees with facts only the host knows (file
 * identities, namespace inodes, the other desktop's screen size), passed as
 * arguments by `deskgate audit` (cli/cli-audit.c). Each is harmless on
 * the host too, where it must report LEAKED (the control).
 */

/* same-file PATH MAJ:MIN:INO [PATH MAJ:MIN:INO ...]: leaked when PATH, seen
 * from here, is the very file the host has there: the same device and inode
 * (a bind mount of it shows the same pair; a file of the jail's own tmpfs
 * with the same name does not). Nothing is read but its metadata. */
static int p_same_file(int argc, char **argv)
{
	if (argc < 2 || argc % 2)
		return error_out("usage: same-file PATH MAJ:MIN:INO [PATH MAJ:MIN:INO ...]");
	bool leaked = false;
	for (int i = 0; i + 1 < argc; i += 2) {
		unsigned maj, min;
		unsigned long long ino;
		char tail;
		if (sscanf(argv[i + 1], "%u:%u:%llu%c", &maj, &min, &ino, &tail) != 3)
			return error_out("bad file identity '%s' (want MAJ:MIN:INO)", argv[i + 1]);
		struct stat st;
		if (lstat(argv[i], &st) != 0) {
			note("%s: %s", argv[i], en(errno));
			continue;
		}
		if (major(st.st_dev) == maj && minor(st.st_dev) == min && st.st_ino == ino) {
			int fd = open(argv[i], O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
			note("%s is the host's file (dev %u:%u ino %llu)%s%s", argv[i], maj, min, ino,
			     fd >= 0 ? ", readable" : ", open: ", fd >= 0 ? "" : en(errno));
			if (fd >= 0)
				close(fd);
			leaked = true;
		} else {
			note("%s exists but is not the host's (dev %u:%u ino %llu here)", argv[i],
			     major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
		}
	}
	return finish(leaked);
}

/* ids MIN_OUTSIDE: who the probe is. Leaked when a user or group id map
 * (/proc/self/uid_map, gid_map) maps any id to an outside id below
 * MIN_OUTSIDE (the range deskgate keeps for jails: host root and every
 * ordinary user are below it) or maps more than one id, or when the probe
 * holds a supplementary group other than its own gid. On the host (the
 * initial namespace maps everything, 0 to 0) it leaks. */
static int p_ids(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: ids MIN_OUTSIDE_ID");
	char *end;
	errno = 0;
	unsigned long long min = strtoull(argv[0], &end, 0);
	if (errno || *end || end == argv[0])
		return error_out("bad id '%s'", argv[0]);
	bool leaked = false;
	note("uid %u gid %u", (unsigned)getuid(), (unsigned)getgid());
	static const char *const maps[] = {"/proc/self/uid_map", "/proc/self/gid_map"};
	for (int m = 0; m < 2; m++) {
		FILE *f = fopen(maps[m], "re");
		if (!f)
			return error_out("%s: %s", maps[m], en(errno));
		unsigned long long in, out, count;
		int lines = 0;
		while (fscanf(f, "%llu %llu %llu", &in, &out, &count) == 3) {
			lines++;
			bool bad = out < min || count != 1;
			note("%s: %llu -> host %llu (%#llx) x%llu%s", maps[m] + 11, in, out, out, count,
			     bad ? " (!)" : "");
			leaked |= bad;
		}
		fclose(f);
		if (lines != 1) {
			note("%s has %d line(s)", maps[m] + 11, lines);
			leaked |= lines != 1;
		}
	}
	gid_t groups[64];
	int n = getgroups(64, groups);
	if (n < 0)
		return error_out("getgroups: %s", en(errno));
	for (int i = 0; i < n; i++)
		if (groups[i] != getgid()) {
			note("supplementary group %u", (unsigned)groups[i]);
			leaked = true;
		}
	note("%d supplementary group(s)", n);
	return finish(leaked);
}

/* ns-ids WHO:TYPE:INO ...: leaked when this process's namespace of TYPE
 * (user, mnt, net, ipc, uts, pid, cgroup) is WHO's (the host's, another
 * session's): the same nsfs inode. */
static int p_ns_ids(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: ns-ids WHO:TYPE:INO ...");
	bool leaked = false;
	for (int i = 0; i < argc; i++) {
		char who[64], type[16];
		unsigned long long ino;
		if (sscanf(argv[i], "%63[^:]:%15[a-z]:%llu", who, type, &ino) != 3)
			return error_out("bad namespace id '%s' (want WHO:TYPE:INO)", argv[i]);
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/ns/%s", type);
		struct stat st;
		if (stat(path, &st) != 0)
			return error_out("%s: %s", path, en(errno));
		if (st.st_ino == ino) {
			note("%s namespace is %s's (%llu)", type, who, ino);
			leaked = true;
		} else {
			note("%s %llu (%s's %llu)", type, (unsigned long long)st.st_ino, who, ino);
		}
	}
	return finish(leaked);
}

/* Reads exactly len bytes within the deadline (ms since now_s() at t0). */
static int read_full(int s, void *buf, size_t len, double deadline)
{
	size_t got = 0;
	while (got < len) {
		int left = (int)((deadline - now_s()) * 1000);
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {s, POLLIN, 0};
		int n = poll(&p, 1, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ETIMEDOUT;
		ssize_t k = recv(s, (char *)buf + got, len - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
		got += (size_t)k;
	}
	return 0;
}

/* Bytes of an X connection setup reply read at most. */
#define X11_REPLY_MAX (64 * 1024)
#define X11_DISPLAYS 10
#define X11_WAIT_S 2.0

/* Opens X connection setup (no authorization) on a connected socket and
 * reads the size of the server's first screen. Returns 0 (w, h, vendor
 * set), or a negative errno / -EPROTO with why. */
static int x11_setup(int s, int *w, int *h, char *vendor, size_t vlen, char *why, size_t wlen)
{
	static const uint8_t req[12] = {'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	if (send(s, req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		return -errno;
	double deadline = now_s() + X11_WAIT_S;
	uint8_t head[8];
	int r = read_full(s, head, sizeof(head), deadline);
	if (r)
		return r;
	size_t extra = (size_t)(head[6] | head[7] << 8) * 4;
	if (extra > X11_REPLY_MAX)
		return -EPROTO;
	uint8_t *d = malloc(extra + 8);
	if (!d)
		return -ENOMEM;
	memcpy(d, head, 8);
	if ((r = read_full(s, d + 8, extra, deadline))) {
		free(d);
		return r;
	}
	if (head[0] != 1) {
		/* Failed (0) or Authenticate (2): the reason follows the header. */
		size_t rl = head[0] == 0 ? head[1] : extra;
		fmt(why, wlen, "setup refused: %.*s", (int)(rl < extra ? rl : extra), d + 8);
		for (char *c = why; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '.';
		free(d);
		return -EACCES;
	}
	size_t total = extra + 8;
	if (total < 40) {
		free(d);
		return -EPROTO;
	}
	size_t vl = (size_t)(d[24] | d[25] << 8), nformats = d[29];
	size_t screen = 40 + ((vl + 3) & ~(size_t)3) + 8 * nformats;
	if (d[28] < 1 || screen + 24 > total) {
		free(d);
		return -EPROTO;
	}
	fmt(vendor, vlen, "%.*s", (int)(vl < 64 ? vl : 64), d + 40);
	for (char *c = vendor; *c; c++)
		if (!isprint((unsigned char)*c))
			*c = '.';
	*w = d[screen + 20] | d[screen + 21] << 8;
	*h = d[screen + 22] | d[screen + 23] << 8;
	free(d);
	return 0;
}

/* x11 WxH: connects, without authorization, to every X server this process
 * can name: displays :0 to :9, each by its abstract socket
 * (@/tmp/.X11-unix/XN) and by its file (/tmp/.X11-unix/XN), and reads the
 * size of each server's first screen. Leaked when one of them has size WxH:
 * the other desktop's (deskgate gives the two different sizes). A server of
 * another size (the jail's own) is noted, not a leak. */
static int p_x11(int argc, char **argv)
{
	int ow, oh;
	char tail;
	if (argc < 1 || sscanf(argv[0], "%dx%d%c", &ow, &oh, &tail) != 2)
		return error_out("usage: x11 WxH (the other desktop's screen size)");
	bool leaked = false;
	int reached = 0;
	for (int n = 0; n < X11_DISPLAYS; n++) {
		for (int abstract = 1; abstract >= 0; abstract--) {
			struct sockaddr_un un = {.sun_family = AF_UNIX};
			char name[64];
			snprintf(name, sizeof(name), "/tmp/.X11-unix/X%d", n);
			size_t l = strlen(name);
			memcpy(un.sun_path + abstract, name, l);
			socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + abstract + l);
			int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (s < 0)
				return error_out("socket: %s", en(errno));
			if (connect(s, (struct sockaddr *)&un, alen) != 0) {
				if (n == 0)
					note("%s%s: %s", abstract ? "@" : "", name, en(errno));
				close(s);
				continue;
			}
			int w = 0, h = 0;
			char vendor[80] = "", why[256] = "";
			int r = x11_setup(s, &w, &h, vendor, sizeof(vendor), why, sizeof(why));
			close(s);
			reached++;
			if (r == 0) {
				bool other = w == ow && h == oh;
				note("%s%s: X server '%s', screen %dx%d%s", abstract ? "@" : "", name,
				     vendor, w, h, other ? " (the other desktop's)" : "");
				leaked |= other;
			} else {
				/* Connected, but no screen size: a server of unknown
				 * identity answered, which counts as reaching it. */
				note("%s%s: connected; %s", abstract ? "@" : "", name,
				     why[0] ? why : en(-r));
				leaked = true;
			}
		}
	}
	note("%d X socket(s) of displays :0..:%d answered", reached, X11_DISPLAYS - 1);
	return finish(leaked);
}

/* The pid of a process of this jail named comm (first found), or -1. */
static pid_t find_comm(const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = -1;
	while (d && found < 0 && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		char path[64], name[64] = "";
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, name, sizeof(name) - 1);
		close(fd);
		if (k > 0 && name[k - 1] == '\n')
			name[k - 1] = '\0';
		if (strcmp(name, comm) == 0)
			found = (pid_t)atoi(e->d_name);
	}
	if (d)
		closedir(d);
	return found;
}

/* Connects to a unix socket (abstract when the name starts with '@');
 * 0 or the errno. */
static int unix_connect(const char *name)
{
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	bool abstract = name[0] == '@';
	size_t l = strlen(name);
	if (l >= sizeof(un.sun_path))
		return ENAMETOOLONG;
	memcpy(un.sun_path + (abstract ? 1 : 0), name + (abstract ? 1 : 0), l - (abstract ? 1 : 0));
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return errno;
	int r = connect(s, (struct sockaddr *)&un, alen) == 0 ? 0 : errno;
	close(s);
	return r;
}

/* desktop: (run as exec actions are, in a session's jail) every door to the
 * session's own desktop: its X server's path socket /tmp/.X11-unix/X0 and
 * abstract socket, a signal (0) to its Xvnc, and in a browser session the
 * browser's singleton socket and profile. Leaked when any opens: exec could
 * then drive the desktop around the action rules (unless the policy's
 * limits.exec_desktop allows it, which the audit's control uses). */
static int p_desktop(int argc, char **argv)
{
	(void)argc, (void)argv;
	bool leaked = false;
	const char *const xs[] = {"/tmp/.X11-unix/X0", "@/tmp/.X11-unix/X0"};
	for (size_t i = 0; i < 2; i++) {
		int e = unix_connect(xs[i]);
		note("connect %s: %s", xs[i], e ? en(e) : "connected");
		leaked |= e == 0;
	}
	pid_t x = find_comm("Xvnc");
	if (x > 0) {
		errno = 0;
		int r = kill(x, 0);
		note("signal 0 to Xvnc (pid %d): %s", (int)x, r == 0 ? "delivered" : en(errno));
		leaked |= r == 0;
	} else {
		note("no Xvnc seen in /proc");
	}
	DIR *d = opendir("/tmp");
	struct dirent *e;
	int sockets = 0;
	while (d && (e = readdir(d))) {
		const char *n = e->d_name + (e->d_name[0] == '.');
		if (strncmp(n, "org.chromium.", 13) != 0)
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/tmp/%.200s/SingletonSocket", e->d_name);
		int r = unix_connect(path);
		sockets++;
		note("connect %s: %s", path, r ? en(r) : "connected");
		leaked |= r == 0;
	}
	if (d)
		closedir(d);
	if (!sockets)
		note("no browser singleton directory in /tmp");
	const char *home = getenv("HOME");
	char prof[512];
	snprintf(prof, sizeof(prof), "%s/.chromium", home ? home : "/home/user");
	DIR *pd = opendir(prof);
	if (pd) {
		note("%s: listed", prof);
		leaked = true;
		closedir(pd);
	} else {
		note("%s: %s", prof, en(errno));
	}
	return finish(leaked);
}

/* Reads /proc/PID/cmdline (NULs made spaces) into buf. */
static void read_cmdline(const char *pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%.40s/cmdline", pid);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, len - 1);
	close(fd);
	if (k < 0)
		k = 0;
	for (ssize_t i = 0; i < k; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[k] = '\0';
}

static void read_comm(const char *pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t k = read(fd, buf, len - 1);
	close(fd);
	buf[k > 0 ? k : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* devtools: Chromium's DevTools pipe (its fds 3 and 4, whose other ends the
 * worker holds) from another process of the jail. Finds the browser process
 * (comm "chromium", --remote-debugging-pipe, no --type=) and tries to get a
 * descriptor of either pipe: by opening /proc/PID/fd/3 for writing and
 * /proc/PID/fd/4 for reading (nothing is written or read), by
 * pidfd_getfd, and by PTRACE_ATTACH. Leaked when any yields one. No browser
 * running: an error (nothing to check). */
static int p_devtools(int argc, char **argv)
{
	(void)argc, (void)argv;
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	char pid[32] = "";
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char comm[64], cmd[8192];
		read_comm(e->d_name, comm, sizeof(comm));
		if (strcmp(comm, "chromium") != 0)
			continue;
		read_cmdline(e->d_name, cmd, sizeof(cmd));
		if (strstr(cmd, "--remote-debugging-pipe") && !strstr(cmd, "--type=")) {
			fmt(pid, sizeof(pid), "%s", e->d_name);
			break;
		}
	}
	closedir(d);
	if (!pid[0])
		return error_out("no Chromium browser process is visible");
	note("browser process %s", pid);
	bool leaked = false;
	static const struct {
		int fd, flags;
		const char *what;
	} ends[] = {{3, O_WRONLY, "command pipe (fd 3) for writing"},
		    {4, O_RDONLY, "reply pipe (fd 4) for reading"}};
	for (int i = 0; i < 2; i++) {
		char path[64], target[128] = "?";
		snprintf(path, sizeof(path), "/proc/%s/fd/%d", pid, ends[i].fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		int fd = open(path, ends[i].flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			note("opened its %s (%s)", ends[i].what, n > 0 ? target : "?");
			close(fd);
			leaked = true;
		} else {
			note("open %s (%s): %s", path, n > 0 ? target : "link unreadable", en(errno));
		}
	}
	long pfd = syscall(SYS_pidfd_open, atoi(pid), 0);
	if (pfd >= 0) {
		for (int i = 0; i < 2; i++) {
			errno = 0;
			long r = syscall(SYS_pidfd_getfd, (int)pfd, ends[i].fd, 0);
			int err = errno;
			char what[64];
			snprintf(what, sizeof(what), "pidfd_getfd(fd %d)", ends[i].fd);
			if (r >= 0)
				close((int)r);
			leaked |= !denied(what, r, err);
		}
		close((int)pfd);
	} else {
		note("pidfd_open: %s", en(errno));
	}
	int err;
	long r = attach_detach(atoi(pid), &err);
	leaked |= !denied("PTRACE_ATTACH", r, err);
	return finish(leaked);
}

/* proc-mem: for every other process this one can see (not itself), opens
 * /proc/PID/mem for reading and writing, never reading or writing it.
 * The jail refuses ptrace and process_vm_readv/writev ("reach into other
 * processes"); /proc/PID/mem is the same reach through a file. Leaked when
 * any opens, naming which. */
static int p_proc_mem(int argc, char **argv)
{
	(void)argc, (void)argv;
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	int self = getpid(), opened = 0, refused = 0, seen = 0;
	char names[512] = "", errs[256] = "";
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]) || atoi(e->d_name) == self)
			continue;
		seen++;
		char path[300], comm[64];
		snprintf(path, sizeof(path), "/proc/%s/mem", e->d_name);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			read_comm(e->d_name, comm, sizeof(comm));
			size_t l = strlen(names);
			if (opened++ < 8)
				fmt(names + l, sizeof(names) - l, "%s%s(%s)", l ? "," : "", e->d_name,
				    comm);
		} else {
			refused++;
			if (!strstr(errs, en(errno))) {
				size_t l = strlen(errs);
				fmt(errs + l, sizeof(errs) - l, "%s%s", l ? "," : "", en(errno));
			}
		}
	}
	closedir(d);
	if (opened)
		note("/proc/PID/mem opened read-write for %d of %d other process(es): %s%s", opened,
		     seen, names, opened > 8 ? ",..." : "");
	note("%d refused (%s)", refused, errs[0] ? errs : "-");
	return finish(opened > 0);
}

/* Bytes of a proxy's answer read at most, and the default wait for it. */
#define PROXY_HEAD_MAX 4096
#define PROXY_WAIT_MS 5000

/* proxy ADDR PORT CONNECT|GET TARGET [WAIT_MS]: asks the HTTP proxy at
 * ADDR:PORT for TARGET (host:port): `CONNECT TARGET`, or `GET http://TARGET/`
 * in absolute form. For a target the proxy must refuse: contained when it
 * answers 403 (a policy or address rule); leaked when it lets the request
 * through: a 2xx (tunnel or origin reached), or a 502/504 whose
 * X-Deskgate-Rule is egress.resolve or egress.connect (it looked the name up
 * or connected). Anything else (no proxy, no answer in WAIT_MS, 400) is an
 * error. The evidence names the status, the rule and the proxy's reason. */
static int p_proxy(int argc, char **argv)
{
	if (argc < 4)
		return error_out("usage: proxy ADDR PORT CONNECT|GET HOST:PORT [WAIT_MS]");
	int port = (int)parse_long(argv[1], 1, 65535, "port");
	bool connect_m = strcmp(argv[2], "CONNECT") == 0;
	if (!connect_m && strcmp(argv[2], "GET"))
		return error_out("method must be CONNECT or GET");
	long wait = argc > 4 ? parse_long(argv[4], 1, 60000, "WAIT_MS") : PROXY_WAIT_MS;
	union addr a;
	socklen_t alen;
	if (parse_addr(argv[0], port, &a, &alen) < 0)
		return error_out("bad address %s", argv[0]);
	if (!may_send_to(&a))
		return finish(true);
	int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return error_out("socket: %s", en(errno));
	if (connect(s, &a.sa, alen) != 0) {
		int e = errno;
		close(s);
		return error_out("no proxy at %s:%d: %s", argv[0], port, en(e));
	}
	char req[1024];
	int n = connect_m ? snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
				     argv[3], argv[3])
			  : snprintf(req, sizeof(req),
				     "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
				     argv[3], argv[3]);
	if (n <= 0 || (size_t)n >= sizeof(req) || send(s, req, (size_t)n, MSG_NOSIGNAL) != n) {
		close(s);
		return error_out("sending the request failed");
	}
	/* Read until the head and the body's first line are in, or the proxy
	 * closes, or the wait ends. */
	char resp[PROXY_HEAD_MAX + 1];
	size_t got = 0;
	double deadline = now_s() + (double)wait / 1000.0;
	while (got < PROXY_HEAD_MAX) {
		int left = (int)((deadline - now_s()) * 1000);
		struct pollfd p = {s, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t k = recv(s, resp + got, PROXY_HEAD_MAX - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
		resp[got] = '\0';
		char *body = strstr(resp, "\r\n\r\n");
		if (body && strchr(body + 4, '\n'))
			break;
		if (body && strncmp(resp, "HTTP/1.1 200", 12) == 0)
			break; /* a tunnel: nothing more comes until we speak */
	}
	close(s);
	resp[got] = '\0';
	int status = 0;
	if (got == 0 || sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		return error_out("%s %s: no answer from the proxy in %ld ms", argv[2], argv[3],
				 wait);
	char rule[128] = "-", reason[256] = "";
	char *h = strcasestr(resp, "\r\nX-Deskgate-Rule:");
	if (h)
		sscanf(h + 18, " %127[^\r\n]", rule);
	char *body = strstr(resp, "\r\n\r\n");
	if (body)
		sscanf(body + 4, "%255[^\r\n]", reason);
	for (char *c = reason; *c; c++)
		if (!isprint((unsigned char)*c))
			*c = '.';
	note("%s %s: proxy answered %d, rule %s%s%s", argv[2], argv[3], status, rule,
	     reason[0] ? ": " : "", reason);
	if (status == 403)
		return finish(false);
	if ((status >= 200 && status < 300) ||
	    ((status == 502 || status == 504) &&
	     (!strcmp(rule, "egress.resolve") || !strcmp(rule, "egress.connect"))))
		return finish(true);
	return error_out("%s", ev);
}

/* mark PATH: creates PATH (a new, empty file) and leaves it: the other
 * session's marker that the probe in the audited session must not see.
 * Not a containment probe: exit 0 with "MARKED", 2 on failure. */
static int p_mark(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: mark PATH");
	int fd = open(argv[0], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return error_out("create %s: %s", argv[0], en(errno));
	close(fd);
	printf("MARKED %s\n", argv[0]);
	return 0;
}

/* ------------------------------------------------------ control harness */

static int run_argv(char *const *argv)
{
	pid_t p = fork();
	if (p < 0)
		return -1;
	if (p == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	waitpid(p, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The stand-in "outside" that `ns --net` puts on lo. */
static const char *const ns_addrs[][2] = {
	{"-4", "169.254.169.254/32"}, /* cloud metadata */
	{"-4", "192.0.2.1/32"},       /* TEST-NET-1: "the internet" */
	{"-6", "2001:db8::1/128"},    /* documentation prefix: IPv6 outside */
};

static int listen_on(int fam, const char *host, int port, int type)
{
	union addr a;
	socklen_t len;
	if (parse_addr(host, port, &a, &len) < 0)
		return -1;
	int s = socket(fam, type | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* A fresh address may not be bindable for a moment: retry up to 2 s. */
	int r;
	for (int i = 0; (r = bind(s, &a.sa, len)) < 0 && errno == EADDRNOTAVAIL && i < 200; i++)
		usleep(10000);
	if (r < 0 || (type == SOCK_STREAM && listen(s, 16) < 0)) {
		close(s);
		return -1;
	}
	return s;
}

/* Answers every DNS query with one A record, 192.0.2.1. */
static void dns_answer(int s)
{
	uint8_t q[512];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(s, q, sizeof(q) - 16, 0, (struct sockaddr *)&from, &fl);
	if (n < 12)
		return;
	q[2] |= 0x80; /* QR */
	q[3] = 0x80;  /* RA, rcode 0 */
	q[6] = 0;
	q[7] = 1; /* ANCOUNT */
	q[8] = q[9] = q[10] = q[11] = 0;
	/* Keep the question only (drop EDNS and the like). */
	size_t off = 12;
	while (off < (size_t)n && q[off])
		off += q[off] + 1u;
	off += 5;
	if (off > (size_t)n)
		return;
	static const uint8_t ans[] = {0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1};
	memcpy(q + off, ans, sizeof(ans));
	sendto(s, q, off + sizeof(ans), 0, (struct sockaddr *)&from, fl);
}

/* The servers of `ns --net`: TCP :80 on each outside address (a banner, then
 * close) and DNS on 127.0.0.1:53. Dies with its parent (the probe). */
static void ns_serve(int ready)
{
	struct pollfd p[8];
	int n = 0;
	p[n++].fd = listen_on(AF_INET, "169.254.169.254", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET, "192.0.2.1", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET6, "2001:db8::1", 80, SOCK_STREAM);
	p[n++].fd = listen_on(AF_INET, "127.0.0.1", 53, SOCK_DGRAM);
	for (int i = 0; i < n; i++) {
		if (p[i].fd < 0)
			_exit(1);
		p[i].events = POLLIN;
	}
	char ok = 1;
	if (write(ready, &ok, 1) != 1)
		_exit(1);
	close(ready);
	double end = now_s() + 120;
	while (now_s() < end) {
		if (poll(p, (nfds_t)n, 1000) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			if (i == n - 1) {
				dns_answer(p[i].fd);
				continue;
			}
			int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				static const char banner[] = "dg-ns-server\n";
				if (write(c, banner, sizeof(banner) - 1) < 0) {
				}
				close(c);
			}
		}
	}
	_exit(0);
}

/* Bind-mounts a file holding text over target (in the private namespace). */
static int ns_bind_text(const char *dir, const char *name, const char *text, const char *target)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t w = write(fd, text, strlen(text));
	close(fd);
	int r = w == (ssize_t)strlen(text) ? mount(path, target, NULL, MS_BIND, NULL) : -1;
	unlink(path); /* the bind mount keeps the file alive */
	return r;
}

/* ns [--net] -- NAME ARGS | -- /PATH ARGS: the CONTROL harness (root, on the
 * host). Enters a new mount namespace with / made private (so mounts and
 * remounts stay there) and, with --net, a new network namespace where lo is
 * up and carries 169.254.169.254, 192.0.2.1 and 2001:db8::1, with a TCP
 * server on port 80 of each and a DNS responder on 127.0.0.1:53 that
 * /etc/resolv.conf points to. Then runs the probe (or PATH) there. Traffic
 * never leaves that namespace. */
static int ns_main(int argc, char **argv)
{
	bool net = false;
	int i = 0;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--net"))
			net = true;
		else
			return error_out("ns: unknown option %s", argv[i]);
	}
	if (i + 1 >= argc)
		return error_out("usage: ns [--net] -- NAME ARGS | -- /PATH ARGS");
	char **rest = argv + i + 1;
	int nrest = argc - i - 1;
	if (geteuid() != 0)
		return error_out("ns: the control harness needs root");
	if (unshare(CLONE_NEWNS | (net ? CLONE_NEWNET : 0)) < 0)
		return error_out("ns: unshare: %s", en(errno));
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return error_out("ns: make / private: %s", en(errno));
	if (net) {
		const char *ip = access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip"
			       : access("/sbin/ip", X_OK) == 0   ? "/sbin/ip"
								 : "/bin/ip";
		char *up[] = {(char *)ip, "link", "set", "lo", "up", NULL};
		if (run_argv(up) != 0)
			return error_out("ns: %s link set lo up failed", ip);
		for (size_t k = 0; k < sizeof(ns_addrs) / sizeof(ns_addrs[0]); k++) {
			/* nodad: an IPv6 address is usable at once, not "tentative" */
			char *add[] = {(char *)ip,	       (char *)ns_addrs[k][0], "addr", "add",
				       (char *)ns_addrs[k][1], "dev",		       "lo",
				       k == 2 ? "nodad" : NULL,  NULL};
			if (run_argv(add) != 0)
				return error_out("ns: %s addr add %s dev lo failed", ip,
						 ns_addrs[k][1]);
		}
		char dir[] = "/tmp/dg-ns-XXXXXX";
		if (!mkdtemp(dir))
			return error_out("ns: mkdtemp: %s", en(errno));
		int r1 = ns_bind_text(dir, "resolv.conf", "nameserver 127.0.0.1\n",
				      "/etc/resolv.conf");
		int e1 = errno;
		int r2 = ns_bind_text(dir, "nsswitch.conf", "hosts: files dns\n",
				      "/etc/nsswitch.conf");
		int e2 = errno;
		rmdir(dir);
		if (r1 < 0 || r2 < 0)
			return error_out("ns: bind resolv.conf/nsswitch.conf: %s",
					 en(r1 < 0 ? e1 : e2));
		int rp[2];
		if (pipe2(rp, O_CLOEXEC) < 0)
			return error_out("ns: pipe: %s", en(errno));
		pid_t parent = getpid();
		fflush(NULL);
		pid_t s = fork();
		if (s < 0)
			return error_out("ns: fork: %s", en(errno));
		if (s == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			close(rp[0]);
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			ns_serve(rp[1]);
		}
		close(rp[1]);
		char ok = 0;
		if (read(rp[0], &ok, 1) != 1)
			return error_out("ns: the servers did not start");
		close(rp[0]);
	}
	char *args[nrest + 2];
	const char *path;
	int k = 0;
	if (rest[0][0] == '/') {
		path = rest[0];
	} else {
		path = "/proc/self/exe";
		args[k++] = "dg_probe";
	}
	for (int j = 0; j < nrest; j++)
		args[k++] = rest[j];
	args[k] = NULL;
	execv(path, args);
	return error_out("ns: exec %s: %s", path, en(errno));
}

/* --------------------------------------------------------------- main */

static const struct probe {
	const char *name;
	int (*fn)(int argc, char **argv);
} probes[] = {
	{"connect", p_connect},
	{"dns", p_dns},
	{"raw-socket", p_raw_socket},
	{"packet-socket", p_packet_socket},
	{"socket-families", p_socket_families},
	{"unix-abstract", p_unix_abstract},
	{"list-dir", p_list_dir},
	{"read-file", p_read_file},
	{"write-dir", p_write_dir},
	{"open-write", p_open_write},
	{"sys-write", p_sys_write},
	{"mknod", p_mknod},
	{"remount", p_remount},
	{"mount-tmpfs", p_mount_tmpfs},
	{"leaked-fd", p_leaked_fd},
	{"fill", p_fill},
	{"env", p_env},
	{"cred-files", p_cred_files},
	{"keyctl", p_keyctl},
	{"status", p_status},
	{"ptrace", p_ptrace},
	{"process-vm-readv", p_process_vm_readv},
	{"unshare", p_unshare},
	{"bpf", p_bpf},
	{"perf", p_perf},
	{"userfaultfd", p_userfaultfd},
	{"io-uring", p_io_uring},
	{"open-by-handle", p_open_by_handle},
	{"kexec", p_kexec},
	{"modules", p_modules},
	{"x32", p_x32},
	{"int80", p_int80},
	{"tiocsti", p_tiocsti},
	{"procs", p_procs},
	{"forkbomb", p_forkbomb},
	{"memhog", p_memhog},
	{"cpuspin", p_cpuspin},
	{"flood", p_flood},
	{"daemon", p_daemon},
	{"alive", p_alive},
	{"hello", p_hello},
	{"same-file", p_same_file},
	{"ids", p_ids},
	{"ns-ids", p_ns_ids},
	{"x11", p_x11},
	{"desktop", p_desktop},
	{"devtools", p_devtools},
	{"proc-mem", p_proc_mem},
	{"proxy", p_proxy},
	{"mark", p_mark},
	{"ns", ns_main},
};

/* `deskgate audit` runs the probe from a memfd handed in as a descriptor,
 * argv[0] "/proc/self/fd/N" (the jail cannot see the host's copy). That
 * descriptor is the probe's own image, not something the jail leaked: it is
 * closed first, so `leaked-fd` judges only what the jail handed over. It is
 * closed only when it is the very file running (same device and inode as
 * /proc/self/exe). */
static void close_own_image(const char *argv0)
{
	static const char prefix[] = "/proc/self/fd/";
	if (strncmp(argv0, prefix, sizeof(prefix) - 1) != 0)
		return;
	char *end;
	long fd = strtol(argv0 + sizeof(prefix) - 1, &end, 10);
	if (*end || fd < 3 || fd > INT32_MAX)
		return;
	struct stat a, b;
	if (fstat((int)fd, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
	    a.st_ino == b.st_ino)
		close((int)fd);
}


/* Takes the --host-result KEY=TOKEN options at the start of argv (the host
 * control's RESULT lines, see "Kernel refusals"). Returns how many
 * arguments they were, or -1 after printing an ERROR line. */
static int take_host_results(int argc, char **argv)
{
	int i = 0;
	while (i < argc && strcmp(argv[i], "--host-result") == 0) {
		if (i + 1 >= argc)
			return error_out("--host-result needs KEY=TOKEN"), -1;
		const char *kv = argv[i + 1], *eq = strrchr(kv, '=');
		if (n_host_results >= DG_PROBE_HOST_MAX)
			return error_out("more than %d --host-result options", DG_PROBE_HOST_MAX), -1;
		if (!eq || !charset_ok(kv, (size_t)(eq - kv), DG_PROBE_KEY_MAX, "_./-") ||
		    !charset_ok(eq + 1, strlen(eq + 1), DG_PROBE_TOKEN_MAX, ""))
			return error_out("bad --host-result '%.100s' (want KEY=TOKEN: KEY of "
					 "[A-Za-z0-9_./-], below %d bytes; TOKEN alphanumeric, below "
					 "%d)", kv, DG_PROBE_KEY_MAX, DG_PROBE_TOKEN_MAX), -1;
		fmt(host_results[n_host_results].key, DG_PROBE_KEY_MAX, "%.*s", (int)(eq - kv), kv);
		fmt(host_results[n_host_results].token, DG_PROBE_TOKEN_MAX, "%s", eq + 1);
		n_host_results++;
		i += 2;
	}
	return i;
}

int main(int argc, char **argv)
{
	if (argc > 0)
		close_own_image(argv[0]);
	if (argc < 2)
		return error_out("usage: dg_probe NAME [--host-result KEY=TOKEN]... [ARGS...]");
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		if (strcmp(argv[1], probes[i].name) != 0)
			continue;
		int used = probes[i].fn == ns_main ? 0 : take_host_results(argc - 2, argv + 2);
		if (used < 0)
			return 2;
		return probes[i].fn(argc - 2 - used, argv + 2 + used);
	}
	return error_out("unknown probe %s", argv[1]);
}
