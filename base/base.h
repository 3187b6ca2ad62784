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
