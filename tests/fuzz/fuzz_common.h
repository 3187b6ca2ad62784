/* Helpers shared by the libFuzzer harnesses of tests/fuzz.
 *
 * Every harness defines LLVMFuzzerTestOneInput and feeds the bytes to the
 * project's real parsers (linked from the module libraries, never copied).
 * Harnesses must leave nothing behind between inputs: memory is checked by
 * LeakSanitizer at exit, descriptors by dg_fuzz_fd_check below.
 *
 * DG_FUZZ_CHECK states an invariant the code's header documents (a round
 * trip, a bound); a violation aborts, which libFuzzer reports as a crash
 * and saves as a reproducer like any sanitizer finding. */
#ifndef DG_FUZZ_COMMON_H
#define DG_FUZZ_COMMON_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DG_FUZZ_CHECK(cond, ...)                                                          \
	do {                                                                              \
		if (!(cond)) {                                                            \
			fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, \
				#cond);                                                   \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
			abort();                                                          \
		}                                                                         \
	} while (0)

/* A NUL-terminated heap copy of data[0..size), so ASan sees a read past
 * the terminator. Aborts when out of memory (a harness failure). */
static inline char *dg_fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

/* An exact-size heap copy (no terminator): a parser that reads one byte
 * past len trips ASan even when the caller's buffer was larger. */
static inline char *dg_fuzz_dup(const uint8_t *data, size_t size)
{
	char *s = malloc(size ? size : 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	return s;
}

/* Open descriptors of this process (/proc/self/fd, the directory's own
 * descriptor not counted). */
static inline int dg_fuzz_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

/* Descriptor leaks: dg_fuzz_fd_begin at the start of an input,
 * dg_fuzz_fd_end at its end aborts when more are open than at the start.
 * Counted around each input rather than against a baseline, because
 * libFuzzer itself keeps descriptors between inputs (its pipes to the
 * symbolizer it starts to print new functions). A count costs one small
 * directory read. */
static inline int dg_fuzz_fd_begin(void)
{
	return dg_fuzz_fd_count();
}

static inline void dg_fuzz_fd_end(int before)
{
	int now = dg_fuzz_fd_count();
	DG_FUZZ_CHECK(now <= before, "descriptor leak: %d open after the input, %d before", now,
		      before);
}

#endif
