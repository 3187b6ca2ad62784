/* A fake browser at the other end of the DevTools pipe, for the unit tests
 * of the worker's DevTools client and what rides on it (test_cdp.c,
 * test_pagelog.c). The test plays Chromium: it reads the commands the
 * client writes (its fd 3) and writes replies and events (its fd 4), each
 * a JSON text ended by NUL. Header-only: include it after criterion and
 * cdp-priv.h (the test's private folder desktop/worker). */
#ifndef DG_FAKE_CDP_H
#define DG_FAKE_CDP_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct dg_fake_cdp {
	struct dg_cdp *c;
	int cmd_rd;      /* we read what the client writes (Chromium's fd 3) */
	int ev_wr;       /* we write replies and events (Chromium's fd 4) */
	char *buf;       /* commands read, not yet consumed */
	size_t len, cap;
};

static inline void dg_fake_cdp_open(struct dg_fake_cdp *f)
{
	int cmd[2], ev[2];
	cr_assert_eq(pipe2(cmd, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(ev, O_CLOEXEC), 0);
	memset(f, 0, sizeof(*f));
	f->cmd_rd = cmd[0];
	f->ev_wr = ev[1];
	fcntl(f->cmd_rd, F_SETFL, O_NONBLOCK);
	f->c = dg_cdp_new(cmd[1], ev[0]);
	cr_assert(f->c);
}

static inline void dg_fake_cdp_close(struct dg_fake_cdp *f)
{
	dg_cdp_free(f->c);
	f->c = NULL;
	if (f->cmd_rd >= 0)
		close(f->cmd_rd);
	if (f->ev_wr >= 0)
		close(f->ev_wr);
	free(f->buf);
	f->buf = NULL;
}

/* Lets the client read everything written so far. */
static inline void dg_fake_cdp_pump(struct dg_fake_cdp *f)
{
	struct dg_err err = {{0}};
	int r = dg_cdp_handle_in(f->c, &err);
	cr_assert_eq(r, 0, "handle_in: %d %s", r, err.msg);
}

/* Writes bytes as the browser, blocking (small messages only). */
static inline void dg_fake_cdp_put(struct dg_fake_cdp *f, const void *p, size_t n)
{
	const char *s = p;
	while (n > 0) {
		ssize_t w = write(f->ev_wr, s, n);
		cr_assert_gt(w, 0);
		s += w;
		n -= (size_t)w;
	}
}

/* One message (its NUL added, under 60000 bytes), then the client reads it. */
static inline void dg_fake_cdp_sendf(struct dg_fake_cdp *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline void dg_fake_cdp_sendf(struct dg_fake_cdp *f, const char *fmt, ...)
{
	char *text;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&text, fmt, ap);
	va_end(ap);
	cr_assert_geq(n, 0);
	/* Nobody reads while this writes: a message must fit the pipe. */
	cr_assert_lt(n, 60000, "the pipe would fill");
	dg_fake_cdp_put(f, text, (size_t)n + 1);
	free(text);
	dg_fake_cdp_pump(f);
}

/* The next command the client wrote, or NULL when none is waiting. */
static inline json_t *dg_fake_cdp_next(struct dg_fake_cdp *f)
{
	for (;;) {
		char *nul = f->len ? memchr(f->buf, '\0', f->len) : NULL;
		if (nul) {
			size_t n = (size_t)(nul - f->buf);
			json_error_t je;
			json_t *j = json_loadb(f->buf, n, JSON_REJECT_DUPLICATES, &je);
			cr_assert(j, "client wrote bad JSON: %s", je.text);
			memmove(f->buf, nul + 1, f->len - n - 1);
			f->len -= n + 1;
			return j;
		}
		if (f->cap - f->len < 65536) {
			f->cap = f->cap ? f->cap * 2 : 65536 * 2;
			f->buf = realloc(f->buf, f->cap);
			cr_assert(f->buf);
		}
		ssize_t r = read(f->cmd_rd, f->buf + f->len, f->cap - f->len);
		if (r <= 0)
			return NULL;
		f->len += (size_t)r;
	}
}

/* The next command, which must be method, and, unless session is NULL, on
 * that session ("": the browser's); returns its id (*out: the command,
 * when out is not NULL). */
static inline json_int_t dg_fake_cdp_expect(struct dg_fake_cdp *f, const char *method,
					    const char *session, json_t **out)
{
	json_t *j = dg_fake_cdp_next(f);
	cr_assert(j, "expected %s, the client wrote nothing", method);
	const char *m = json_string_value(json_object_get(j, "method"));
	cr_assert(m && strcmp(m, method) == 0, "expected %s, got %s", method, m ? m : "?");
	if (session) {
		const char *sid = json_string_value(json_object_get(j, "sessionId"));
		cr_assert_str_eq(sid ? sid : "", session, "%s on %s", method, sid ? sid : "the browser");
	}
	json_int_t id = json_integer_value(json_object_get(j, "id"));
	cr_assert_gt(id, 0);
	if (out)
		*out = j;
	else
		json_decref(j);
	return id;
}

/* No command is waiting. */
static inline void dg_fake_cdp_none(struct dg_fake_cdp *f)
{
	json_t *j = dg_fake_cdp_next(f);
	char *s = j ? json_dumps(j, 0) : NULL;
	cr_assert_null(j, "unexpected command %s", s);
}

#endif
