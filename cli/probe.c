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
 * the host knows (the probes of cli/probe-audit.c take those as arguments).
 *
 * Files (one static program, DG_PROBE_SOURCES in CMakeLists.txt; their shared
 * declarations in cli/probe-priv.h):
 *   probe.c            the output, the judging of calls, forked children,
 *                      the probe table and main
 *   probe-net.c        network: connect, dns, raw/packet sockets, families
 *   probe-fs.c         files, mounts, descriptors, disk; environment, secrets
 *   probe-isolation.c  capabilities, ptrace, namespaces, kernel interfaces
 *   probe-resources.c  processes, memory, CPU, output, daemons, liveness
 *   probe-audit.c      the probes of `deskgate audit` (host facts compared)
 *   probe-ns.c         the control harness (`dg_probe ns`)
 */

#include "cli/probe-priv.h"

/* ---------------------------------------------------------------- output */

char evidence[16384]; /* "; "-separated */
int verdict_fd = 1;

void note(const char *fmt, ...)
{
	size_t l = strlen(evidence);
	if (l + 8 >= sizeof(evidence))
		return;
	if (l > 0) {
		memcpy(evidence + l, "; ", 3);
		l += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(evidence + l, sizeof(evidence) - l, fmt, ap);
	va_end(ap);
}

/* Prints the final line, WORD and the evidence, and returns code. */
static int verdict(const char *word, int code)
{
	for (char *p = evidence; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	dprintf(verdict_fd, "%s %s\n", word, evidence[0] ? evidence : "-");
	return code;
}

/* Prints the final line and returns the exit code. */
int finish(bool leaked)
{
	return leaked ? verdict("LEAKED", 1) : verdict("CONTAINED", 0);
}

int error_out(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(verdict_fd, "ERROR %s\n", buf);
	return 2;
}

const char *en(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

/* Records the outcome of a call the jail must deny with EPERM. Returns true
 * when it was denied (contained). */
bool denied(const char *what, long ret, int err)
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
void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* Whether s is 1..max-1 bytes, all of them in set (or alphanumeric). */
bool charset_ok(const char *s, size_t n, size_t max, const char *set)
{
	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr(set, s[i]))
			return false;
	return true;
}

/* ---------------------------------------------- judging a call (kernel) */

enum call_verdict calls_worst = V_CONTAINED;

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
bool is_host_control(void)
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
enum call_verdict judge_call(const struct call *k, const struct call_end *c)
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
enum call_verdict judge_ret(enum call_kind kind, const char *key, const char *what,
			    const char *lacks, long ret, int err)
{
	struct call k = {kind, key, what, lacks};
	struct call_end c = {0, ret, ret < 0 ? err : 0};
	return judge_call(&k, &c);
}

/* The verdict of a probe whose calls were all judged by judge_call. */
int finish_calls(void)
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

double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long parse_long(const char *s, long lo, long hi, const char *what)
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
void unique_name(char *buf, size_t len, const char *prefix)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, len, "%s%d-%lx", prefix, (int)getpid(), (unsigned long)ts.tv_nsec);
}

/* ------------------------------------------------------- forked children */

/* Runs fn in a forked child, bounded by timeout_s. Returns 1 and fills res
 * when the child reported; 0 when it died first (status tells how). */
int run_child(child_fn fn, void *arg, int timeout_s, struct child_result *res, int *status)
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
void describe_status(char *buf, size_t len, int status)
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
int child_end(child_fn fn, void *arg, const char *what, struct call_end *c)
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
void judge_child(enum call_kind kind, const char *key, const char *what, const char *lacks,
		 child_fn fn, void *arg)
{
	struct call k = {kind, key, what, lacks};
	struct call_end c;
	if (child_end(fn, arg, what, &c) == 0)
		judge_call(&k, &c);
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
	{"nice", p_nice},
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
