/* base: what every folder of deskgate uses, and nothing else: the error
 * type, quoting untrusted text into messages, clocks, descriptors, hex and
 * bounded whole-file reads. It depends on libc alone (and links jansson for
 * dg_show_value, whose argument it names without including jansson.h), so
 * any library or process may include it and it includes no other folder.
 *
 * Error convention (whole project): functions return 0 or a negative
 * errno-style code; on error a human message is written to the caller's
 * buffer (struct dg_err) saying what failed and on what.
 */
#ifndef DG_BASE_H
#define DG_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---- errors (err.c) ---------------------------------------------------- */

/* A fixed-size error message buffer, filled by the function that failed. */
#define DG_ERR_MAX 512
struct dg_err {
	char msg[DG_ERR_MAX];
};

/* Formats msg into err (when err is not NULL) and returns code, which must be
 * a negative errno value, so callers can write `return dg_err_set(...)`. */
int dg_err_set(struct dg_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- resource limits of a jail (limits.c) ------------------------------ */

/* The policy's "limits" section (policy/policy.h loads it) as the spawner
 * and the jail get it: here, so that the root side needs no JSON parser.
 * Bounds on what a policy may ask for: a value outside [MIN, MAX] is
 * refused at load time with the key's name, and by the spawner's decoder
 * (dg_limits_check). */
#define DG_LIMIT_MEMORY_MB_MIN 16
#define DG_LIMIT_MEMORY_MB_MAX (1024 * 1024)
#define DG_LIMIT_PIDS_MIN 8
#define DG_LIMIT_PIDS_MAX 65536
#define DG_LIMIT_CPUS_MIN 0.01
#define DG_LIMIT_CPUS_MAX 1024.0
#define DG_LIMIT_SECONDS_MIN 1
#define DG_LIMIT_SECONDS_MAX (7 * 24 * 3600)
#define DG_LIMIT_OUTPUT_BYTES_MIN 1
#define DG_LIMIT_OUTPUT_BYTES_MAX (1024ull * 1024 * 1024)
#define DG_LIMIT_SCRATCH_MB_MIN 1
#define DG_LIMIT_SCRATCH_MB_MAX (1024 * 1024 - 1) /* must stay below memory_mb */

/* Built-in defaults, used when no policy file is given. */
#define DG_LIMIT_DEFAULT_MEMORY_MB 512
#define DG_LIMIT_DEFAULT_PIDS 512 /* tasks: Chromium alone runs 200+ threads */
#define DG_LIMIT_DEFAULT_CPUS 1.0
#define DG_LIMIT_DEFAULT_EXEC_SECONDS 30
#define DG_LIMIT_DEFAULT_SESSION_SECONDS 3600
#define DG_LIMIT_DEFAULT_OUTPUT_BYTES (1024 * 1024)
#define DG_LIMIT_DEFAULT_SCRATCH_MB 256

/* Resource bounds of one jail. scratch_mb caps the jail's writable space
 * (/tmp and home share it) and must stay below memory_mb, because tmpfs pages
 * are charged to the jail's memory cgroup and cannot be reclaimed without
 * swap. */
struct dg_limits {
	uint64_t memory_mb;
	uint32_t pids;
	/* "exec_desktop": true lets programs run by exec reach the session's
	 * desktop (its X server, the browser's sockets and processes): they
	 * may then drive it outside the action rules, unrecorded. Default
	 * false: exec shares the jail's files and network, not the desktop.
	 * (0 or 1; a uint32_t so the struct has no padding: it is compared
	 * with memcmp.) */
	uint32_t exec_desktop;
	double cpus;
	uint32_t exec_seconds;
	uint32_t session_seconds;
	uint64_t output_bytes;
	uint64_t scratch_mb;
};

/* 0 when every field of l is within its bounds (DG_LIMIT_*_MIN..MAX,
 * exec_desktop 0 or 1, cpus a number, scratch_mb below memory_mb), else
 * -EINVAL with err naming the first field out of bounds. */
int dg_limits_check(const struct dg_limits *l, struct dg_err *err);

/* ---- quoting untrusted text into messages (show.c) --------------------- */

/* Control bytes and non-ASCII as \xNN, with quoted also '"' and '\\'
 * escaped, cut after max bytes with "...". out gets at most out_len - 1
 * characters. */
#define DG_SHOW_MAX 64
#define DG_SHOW_BUF (DG_SHOW_MAX * 4 + 4)
#define DG_SHOW_VALUE_BUF (DG_SHOW_BUF + 8)
void dg_show_bytes(const char *in, size_t len, size_t max, bool quoted, char *out, size_t out_len);
void dg_show_str(const char *in, size_t max, bool quoted, char *out, size_t out_len);
/* Describes a JSON value (jansson's json_t): scalars as written (strings
 * quoted, escaped and cut), containers by kind ("an object"). */
struct json_t;
void dg_show_value(const struct json_t *v, char *out, size_t out_len);

/* ---- clocks (time.c) ----------------------------------------------------- */

/* CLOCK_MONOTONIC in ms, in us, and in ms with the fraction (for short
 * measurements); CLOCK_REALTIME in ms since the epoch. Async-signal-safe
 * (a forked child or a jail's init may call them). */
long long dg_now_ms(void);
long long dg_now_us(void);
double dg_now_ms_exact(void);
long long dg_wall_ms(void);

/* ---- descriptors (fd.c) ---------------------------------------------------- */

/* Closes *fd when it is open (>= 0) and sets it to -1: idempotent, and
 * usable as __attribute__((cleanup(dg_close_fd))). */
void dg_close_fd(int *fd);

/* ---- hex (hex.c) ----------------------------------------------------------- */

/* n bytes as 2n lowercase hex digits and a NUL into out (2n + 1 bytes). */
void dg_hex_encode(const void *in, size_t n, char *out);
/* The value of one hex digit (either case), or -1. */
int dg_hex_value(char c);
/* 2n hex digits (either case) at in into n bytes at out; -EINVAL at the
 * first byte that is not a digit (out may then be partly written). Reads
 * at most 2n bytes of in. */
int dg_hex_decode(const char *in, size_t n, void *out);

/* ---- bounded whole-file reads (file.c) ---------------------------------- */

/* Reads a whole regular file of at most max bytes into a malloc'd buffer
 * (NUL-terminated for convenience; *len excludes it). With nofollow a
 * symlink as the last component is refused. *st receives the fstat of the
 * descriptor read, so callers can check owner and mode without a race. A
 * FIFO or device is refused (opened O_NONBLOCK, so it cannot block), and so
 * is a file that grows past max while it is read. What was read is wiped
 * before it is freed on error (the file may hold secrets). Messages read
 * "<what> <path>: ...". Returns 0 or a negative errno (-E2BIG over max). */
int dg_read_file(const char *what, const char *path, size_t max, bool nofollow, char **buf,
		 size_t *len, struct stat *st, struct dg_err *err);

#endif
