/* The probe battery's own declarations (deskgate-probe and the tests'
 * dg_probe, one static program built from cli/probe*.c; see cli/probe.c for
 * the probes' contract). Included by those files only: the program links no
 * library, so these names are the program's own, never a library's.
 */
#ifndef DG_CLI_PROBE_PRIV_H
#define DG_CLI_PROBE_PRIV_H

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

/* ---- the judging of calls whose end may depend on the kernel (see
 * "Kernel refusals" in cli/probe.c) ---- */
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

/* ---- output and judging (probe.c) ---- */

extern char evidence[16384]; /* the verdict line's evidence, "; "-separated */
extern int verdict_fd;        /* where RESULT and verdict lines go (1; flood: 2) */
extern enum call_verdict calls_worst; /* the worst call judged so far */

void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int finish(bool leaked);
int error_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *en(int e);
bool denied(const char *what, long ret, int err);
void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
bool charset_ok(const char *s, size_t n, size_t max, const char *set);
bool is_host_control(void);
enum call_verdict judge_call(const struct call *k, const struct call_end *c);
enum call_verdict judge_ret(enum call_kind kind, const char *key, const char *what,
			    const char *lacks, long ret, int err);
int finish_calls(void);
double now_s(void);
long parse_long(const char *s, long lo, long hi, const char *what);
void unique_name(char *buf, size_t len, const char *prefix);

/* ---- forked children (probe.c) ---- */

/* What a probe child reports back through a pipe. */
struct child_result {
	long ret;
	int err;
	char msg[256];
};

typedef void (*child_fn)(struct child_result *res, void *arg);

int run_child(child_fn fn, void *arg, int timeout_s, struct child_result *res, int *status);
void describe_status(char *buf, size_t len, int status);
int child_end(child_fn fn, void *arg, const char *what, struct call_end *c);
void judge_child(enum call_kind kind, const char *key, const char *what, const char *lacks,
		 child_fn fn, void *arg);

/* ---- network helpers (probe-net.c) ---- */

union addr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

int parse_addr(const char *host, int port, union addr *a, socklen_t *len);
bool may_send_to(const union addr *a);

/* ---- other processes (probe-isolation.c) ---- */

long attach_detach(pid_t pid, int *err);

/* ---- the probes: NAME ARGS..., each ending with one verdict line ---- */

/* probe-net.c */
int p_connect(int argc, char **argv);
int p_dns(int argc, char **argv);
int p_raw_socket(int argc, char **argv);
int p_packet_socket(int argc, char **argv);
int p_socket_families(int argc, char **argv);
int p_unix_abstract(int argc, char **argv);

/* probe-fs.c */
int p_list_dir(int argc, char **argv);
int p_read_file(int argc, char **argv);
int p_write_dir(int argc, char **argv);
int p_open_write(int argc, char **argv);
int p_sys_write(int argc, char **argv);
int p_mknod(int argc, char **argv);
int p_remount(int argc, char **argv);
int p_mount_tmpfs(int argc, char **argv);
int p_leaked_fd(int argc, char **argv);
int p_fill(int argc, char **argv);
int p_env(int argc, char **argv);
int p_cred_files(int argc, char **argv);
int p_keyctl(int argc, char **argv);

/* probe-isolation.c */
int p_status(int argc, char **argv);
int p_ptrace(int argc, char **argv);
int p_process_vm_readv(int argc, char **argv);
int p_unshare(int argc, char **argv);
int p_bpf(int argc, char **argv);
int p_perf(int argc, char **argv);
int p_userfaultfd(int argc, char **argv);
int p_io_uring(int argc, char **argv);
int p_open_by_handle(int argc, char **argv);
int p_kexec(int argc, char **argv);
int p_modules(int argc, char **argv);
int p_x32(int argc, char **argv);
int p_int80(int argc, char **argv);
int p_tiocsti(int argc, char **argv);
int p_procs(int argc, char **argv);

/* probe-resources.c */
int p_forkbomb(int argc, char **argv);
int p_memhog(int argc, char **argv);
int p_cpuspin(int argc, char **argv);
int p_flood(int argc, char **argv);
int p_daemon(int argc, char **argv);
int p_alive(int argc, char **argv);
int p_hello(int argc, char **argv);
int p_nice(int argc, char **argv);

/* probe-audit.c */
int p_same_file(int argc, char **argv);
int p_ids(int argc, char **argv);
int p_ns_ids(int argc, char **argv);
int p_x11(int argc, char **argv);
int p_desktop(int argc, char **argv);
int p_devtools(int argc, char **argv);
int p_proc_mem(int argc, char **argv);
int p_proxy(int argc, char **argv);
int p_mark(int argc, char **argv);

/* probe-ns.c */
int ns_main(int argc, char **argv);

#endif
