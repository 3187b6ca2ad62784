/* proto: the spawner's typed messages (desktop/proto/proto.h, spawner-msg.c)
 * at the boundaries of their caps, and the spawner itself facing a
 * malformed request.
 *
 * Every field is checked on both sides of its bound: one in, one out; a
 * datagram that decodes re-encodes to the same bytes; one that does not is
 * refused with a message (and, sent to a real spawner, ends it).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "actions/actions.h"
#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "dg_test.h"

static uint8_t buf[DG_SEQ_MAX];

static struct dg_limits limits_default(void)
{
	return (struct dg_limits){
		.memory_mb = DG_LIMIT_DEFAULT_MEMORY_MB,
		.pids = DG_LIMIT_DEFAULT_PIDS,
		.cpus = DG_LIMIT_DEFAULT_CPUS,
		.exec_seconds = DG_LIMIT_DEFAULT_EXEC_SECONDS,
		.session_seconds = DG_LIMIT_DEFAULT_SESSION_SECONDS,
		.output_bytes = DG_LIMIT_DEFAULT_OUTPUT_BYTES,
		.scratch_mb = DG_LIMIT_DEFAULT_SCRATCH_MB,
	};
}

static struct dg_spawn_msg create_msg(void)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_CREATE, .req = 1};
	snprintf(m.session, sizeof(m.session), "s-1");
	m.u.create.profile = DG_PROFILE_BROWSER;
	m.u.create.width = DG_DESKTOP_WIDTH_DEFAULT;
	m.u.create.height = DG_DESKTOP_HEIGHT_DEFAULT;
	m.u.create.strict = true;
	m.u.create.limits = limits_default();
	return m;
}

/* Encodes m (must succeed), decodes the bytes, re-encodes the result:
 * the same bytes. Returns the length; *out gets the decoded message. */
static size_t round_trip(const struct dg_spawn_msg *m, struct dg_spawn_msg *out)
{
	struct dg_err err = {{0}};
	size_t len = 0, len2 = 0;
	cr_assert_eq(dg_spawn_encode(m, buf, sizeof(buf), &len, &err), 0, "encode: %s", err.msg);
	cr_assert_leq(len, dg_spawn_max(m->type));
	cr_assert_eq(dg_spawn_decode(buf, len, dg_spawn_fds(m->type), out, &err), 0, "decode: %s",
		     err.msg);
	static uint8_t again[DG_SEQ_MAX];
	cr_assert_eq(dg_spawn_encode(out, again, sizeof(again), &len2, &err), 0, "%s", err.msg);
	cr_assert_eq(len2, len);
	cr_assert_eq(memcmp(buf, again, len), 0);
	cr_assert_eq(out->type, m->type);
	cr_assert_eq(out->req, m->req);
	cr_assert_str_eq(out->session, m->session);
	return len;
}

static int encode_rc(const struct dg_spawn_msg *m)
{
	struct dg_err err = {{0}};
	size_t len;
	int r = dg_spawn_encode(m, buf, sizeof(buf), &len, &err);
	if (r)
		cr_assert(err.msg[0], "an error without a message");
	return r;
}

/* Encodes a valid m, lets poke change its bytes, and decodes: the result. */
static int decode_rc(const uint8_t *p, size_t len, int nfds)
{
	struct dg_spawn_msg m;
	struct dg_err err = {{0}};
	int r = dg_spawn_decode(p, len, nfds, &m, &err);
	if (r)
		cr_assert(err.msg[0], "an error without a message");
	return r;
}

Test(proto, every_type_round_trips)
{
	struct dg_spawn_msg m = create_msg(), out;
	round_trip(&m, &out);
	cr_assert_eq(memcmp(&out.u.create, &m.u.create, sizeof(m.u.create)), 0);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_DESTROY, .req = 2};
	snprintf(m.session, sizeof(m.session), "abc");
	round_trip(&m, &out);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_STARTED, .req = 6};
	snprintf(m.session, sizeof(m.session), "abc");
	round_trip(&m, &out);
	cr_assert_str_eq(out.session, "abc");
	m.session[0] = '\0';
	cr_assert_eq(encode_rc(&m), -EINVAL, "a STARTED that names no session");

	m = (struct dg_spawn_msg){.type = DG_SPAWN_POOL, .req = 3};
	m.u.pool.xterm = 2;
	m.u.pool.browser = 1;
	m.u.pool.limits = limits_default();
	round_trip(&m, &out);
	cr_assert_eq(out.u.pool.xterm, 2);
	cr_assert_eq(out.u.pool.browser, 1);
	cr_assert_eq(memcmp(&out.u.pool.limits, &m.u.pool.limits, sizeof(struct dg_limits)), 0);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_EGRESS, .req = 4};
	cr_assert_eq(round_trip(&m, &out), DG_SPAWN_HEADER);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_EXEC, .req = 5};
	snprintf(m.session, sizeof(m.session), "x");
	const char *argv[] = {"/bin/sh", "-c", "", "echo hi", NULL};
	for (int i = 0; argv[i]; i++)
		m.u.exec.argv[i] = argv[i];
	m.u.exec.argc = 4;
	m.u.exec.stdin_data = "a\0b";
	m.u.exec.stdin_len = 3;
	m.u.exec.timeout_ms = 1500;
	round_trip(&m, &out);
	cr_assert_eq(out.u.exec.argc, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_str_eq(out.u.exec.argv[i], argv[i]);
	cr_assert_null(out.u.exec.argv[4]);
	cr_assert_eq(out.u.exec.stdin_len, 3);
	cr_assert_eq(memcmp(out.u.exec.stdin_data, "a\0b", 4), 0); /* and its NUL */
	cr_assert_eq(out.u.exec.timeout_ms, 1500);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_CREATED, .req = 1};
	snprintf(m.session, sizeof(m.session), "s-1");
	m.u.created.slot = DG_JAIL_SLOTS - 1;
	m.u.created.start_ms = 1234;
	m.u.created.warm = true;
	round_trip(&m, &out);
	cr_assert_eq(out.u.created.slot, DG_JAIL_SLOTS - 1);
	cr_assert_eq(out.u.created.start_ms, 1234);
	cr_assert(out.u.created.warm);

	m = (struct dg_spawn_msg){.type = DG_SPAWN_OK, .req = 2};
	round_trip(&m, &out);
	m = (struct dg_spawn_msg){.type = DG_SPAWN_CHANNEL, .req = 4, .u.channel.pid = 77};
	round_trip(&m, &out);
	cr_assert_eq(out.u.channel.pid, 77);
	m = (struct dg_spawn_msg){.type = DG_SPAWN_ERROR, .req = 5};
	snprintf(m.u.text, sizeof(m.u.text), "exec: no such session");
	round_trip(&m, &out);
	cr_assert_str_eq(out.u.text, "exec: no such session");
	m = (struct dg_spawn_msg){.type = DG_SPAWN_ENDED, .req = 0};
	snprintf(m.session, sizeof(m.session), "s-1");
	snprintf(m.u.text, sizeof(m.u.text), "the desktop's worker ended");
	round_trip(&m, &out);
	cr_assert_str_eq(out.u.text, "the desktop's worker ended");
}

Test(proto, session_ids_at_their_bounds)
{
	struct dg_spawn_msg m = create_msg(), out;
	memset(m.session, 'a', DG_SESSION_ID_MAX);
	m.session[DG_SESSION_ID_MAX] = '\0';
	round_trip(&m, &out);
	m.session[0] = '\0';
	cr_assert_eq(encode_rc(&m), -EINVAL, "an empty id");
	snprintf(m.session, sizeof(m.session), "A");
	cr_assert_eq(encode_rc(&m), -EINVAL, "an upper-case id");
	snprintf(m.session, sizeof(m.session), "a/b");
	cr_assert_eq(encode_rc(&m), -EINVAL, "a slash");

	/* 65 bytes cannot be held by the struct: build the datagram by hand. */
	snprintf(m.session, sizeof(m.session), "a");
	size_t len;
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	uint8_t big[DG_SPAWN_CREATE_MAX + 64];
	uint32_t n = DG_SESSION_ID_MAX + 1;
	memcpy(big, buf, 8);
	memcpy(big + 8, &n, 4);
	memset(big + 12, 'a', n);
	big[12 + n] = '\0';
	memcpy(big + 12 + n + 1, buf + 8 + 4 + 2, len - 14);
	cr_assert_eq(decode_rc(big, 12 + n + 1 + len - 14, 0), -EPROTO, "a 65-byte id");
}

Test(proto, desktop_sizes_and_profiles_at_their_bounds)
{
	struct dg_spawn_msg m = create_msg(), out;
	uint32_t w[] = {DG_DESKTOP_WIDTH_MIN, DG_DESKTOP_WIDTH_MAX};
	uint32_t h[] = {DG_DESKTOP_HEIGHT_MIN, DG_DESKTOP_HEIGHT_MAX};
	for (int i = 0; i < 2; i++) {
		m.u.create.width = w[i];
		m.u.create.height = h[i];
		round_trip(&m, &out);
		cr_assert_eq(out.u.create.width, w[i]);
		cr_assert_eq(out.u.create.height, h[i]);
	}
	m = create_msg();
	m.u.create.width = DG_DESKTOP_WIDTH_MIN - 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m.u.create.width = DG_DESKTOP_WIDTH_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m = create_msg();
	m.u.create.height = DG_DESKTOP_HEIGHT_MIN - 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m.u.create.height = DG_DESKTOP_HEIGHT_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m = create_msg();
	m.u.create.profile = DG_PROFILE_XTERM;
	round_trip(&m, &out);
	m.u.create.profile = (enum dg_profile)2;
	cr_assert_eq(encode_rc(&m), -EINVAL, "profile 2");

	/* A boolean is 0 or 1 on the wire. */
	m = create_msg();
	size_t len;
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	size_t strict_at = 8 + 4 + strlen(m.session) + 1 + 12;
	cr_assert_eq(buf[strict_at], 1);
	buf[strict_at] = 2;
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "strict 2");
}

/* One limit field set to v on a valid create: encode's result. */
#define LIMIT_RC(field, v)                                                                         \
	({                                                                                         \
		struct dg_spawn_msg lm = create_msg();                                             \
		lm.u.create.limits.field = (v);                                                    \
		if (lm.u.create.limits.scratch_mb >= lm.u.create.limits.memory_mb &&              \
		    strcmp(#field, "scratch_mb") != 0)                                             \
			lm.u.create.limits.scratch_mb = lm.u.create.limits.memory_mb - 1;          \
		encode_rc(&lm);                                                                    \
	})

Test(proto, limits_at_the_policy_bounds)
{
	cr_assert_eq(LIMIT_RC(memory_mb, DG_LIMIT_MEMORY_MB_MIN), 0);
	cr_assert_eq(LIMIT_RC(memory_mb, DG_LIMIT_MEMORY_MB_MIN - 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(memory_mb, DG_LIMIT_MEMORY_MB_MAX), 0);
	cr_assert_eq(LIMIT_RC(memory_mb, DG_LIMIT_MEMORY_MB_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(pids, DG_LIMIT_PIDS_MIN), 0);
	cr_assert_eq(LIMIT_RC(pids, DG_LIMIT_PIDS_MIN - 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(pids, DG_LIMIT_PIDS_MAX), 0);
	cr_assert_eq(LIMIT_RC(pids, DG_LIMIT_PIDS_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(cpus, DG_LIMIT_CPUS_MIN), 0);
	cr_assert_eq(LIMIT_RC(cpus, DG_LIMIT_CPUS_MIN / 2), -EINVAL);
	cr_assert_eq(LIMIT_RC(cpus, DG_LIMIT_CPUS_MAX), 0);
	cr_assert_eq(LIMIT_RC(cpus, DG_LIMIT_CPUS_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(cpus, NAN), -EINVAL);
	cr_assert_eq(LIMIT_RC(exec_seconds, DG_LIMIT_SECONDS_MIN), 0);
	cr_assert_eq(LIMIT_RC(exec_seconds, DG_LIMIT_SECONDS_MIN - 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(exec_seconds, DG_LIMIT_SECONDS_MAX), 0);
	cr_assert_eq(LIMIT_RC(exec_seconds, DG_LIMIT_SECONDS_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(session_seconds, DG_LIMIT_SECONDS_MAX), 0);
	cr_assert_eq(LIMIT_RC(session_seconds, DG_LIMIT_SECONDS_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(session_seconds, 0), -EINVAL);
	cr_assert_eq(LIMIT_RC(output_bytes, DG_LIMIT_OUTPUT_BYTES_MIN), 0);
	cr_assert_eq(LIMIT_RC(output_bytes, DG_LIMIT_OUTPUT_BYTES_MIN - 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(output_bytes, DG_LIMIT_OUTPUT_BYTES_MAX), 0);
	cr_assert_eq(LIMIT_RC(output_bytes, DG_LIMIT_OUTPUT_BYTES_MAX + 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(scratch_mb, DG_LIMIT_SCRATCH_MB_MIN), 0);
	cr_assert_eq(LIMIT_RC(scratch_mb, DG_LIMIT_SCRATCH_MB_MIN - 1), -EINVAL);
	cr_assert_eq(LIMIT_RC(scratch_mb, DG_LIMIT_DEFAULT_MEMORY_MB - 1), 0);
	cr_assert_eq(LIMIT_RC(scratch_mb, DG_LIMIT_DEFAULT_MEMORY_MB), -EINVAL, "scratch = memory");
	cr_assert_eq(LIMIT_RC(exec_desktop, 1), 0);
	cr_assert_eq(LIMIT_RC(exec_desktop, 2), -EINVAL);

	/* The same bounds on the pool's limits, and dg_limits_check says which. */
	struct dg_spawn_msg m = {.type = DG_SPAWN_POOL, .req = 1};
	m.u.pool.limits = limits_default();
	m.u.pool.limits.pids = DG_LIMIT_PIDS_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	struct dg_err err = {{0}};
	cr_assert_eq(dg_limits_check(&m.u.pool.limits, &err), -EINVAL);
	cr_assert(strstr(err.msg, "limits.pids"), "%s", err.msg);
	struct dg_limits ok = limits_default();
	cr_assert_eq(dg_limits_check(&ok, NULL), 0);
}

Test(proto, pool_sizes_at_their_bound)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_POOL, .req = 1}, out;
	m.u.pool.limits = limits_default();
	m.u.pool.xterm = DG_SPAWNER_POOL_MAX;
	m.u.pool.browser = DG_SPAWNER_POOL_MAX;
	round_trip(&m, &out);
	m.u.pool.xterm = DG_SPAWNER_POOL_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m.u.pool.xterm = 0;
	m.u.pool.browser = DG_SPAWNER_POOL_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
}

static char args[DG_EXEC_ARGV_MAX + 1][DG_EXEC_ARG_MAX + 2];

static struct dg_spawn_msg exec_msg(uint32_t argc, size_t arg_len)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_EXEC, .req = 9};
	snprintf(m.session, sizeof(m.session), "s");
	for (uint32_t i = 0; i < argc && i <= DG_EXEC_ARGV_MAX; i++) {
		memset(args[i], 'a', arg_len);
		args[i][arg_len] = '\0';
		m.u.exec.argv[i] = args[i];
	}
	m.u.exec.argc = argc;
	return m;
}

static char upaths[DG_UPLOAD_PATHS_MAX + 1][DG_UPLOAD_PATH_MAX + 2];

/* An upload check of n paths of len bytes each ("/aaa...", slashes every
 * 200 bytes, so that components stay within NAME_MAX). */
static struct dg_spawn_msg upload_check_msg(uint32_t n, size_t len)
{
	struct dg_spawn_msg m = {.type = DG_SPAWN_UPLOAD_CHECK, .req = 11};
	snprintf(m.session, sizeof(m.session), "s-up");
	for (uint32_t i = 0; i < n && i <= DG_UPLOAD_PATHS_MAX; i++) {
		memset(upaths[i], 'a', len);
		for (size_t k = 0; k < len; k += 200)
			upaths[i][k] = '/';
		upaths[i][len] = '\0';
		if (i < DG_UPLOAD_PATHS_MAX)
			m.u.upload_check.paths[i] = upaths[i];
	}
	m.u.upload_check.n = n;
	return m;
}

/* An answer of n files, one of each verdict in turn (valid). */
static struct dg_spawn_msg upload_checked_msg(uint32_t n)
{
	static const struct dg_upload_file each[] = {
		{DG_UPLOAD_OK, 0, 0, 5},
		{DG_UPLOAD_MISSING, 9, 0, 0},
		{DG_UPLOAD_SYMLINK, 6, 0, 0},
		{DG_UPLOAD_NOT_REGULAR, 0, S_IFDIR, 0},
		{DG_UPLOAD_OUTSIDE_SCRATCH, 0, 0, 0},
		{DG_UPLOAD_BROWSER_FILES, 20, 0, 0},
		{DG_UPLOAD_TOO_LARGE, 0, 0, DG_UPLOAD_FILE_MAX + 1},
		{DG_UPLOAD_UNREADABLE, 0, 0, 0},
		{DG_UPLOAD_UNREADABLE, 11, 0, 0},
		{DG_UPLOAD_ERROR, 10, ENOTDIR, 0},
	};
	struct dg_spawn_msg m = {.type = DG_SPAWN_UPLOAD_CHECKED, .req = 11};
	snprintf(m.session, sizeof(m.session), "s-up");
	m.u.upload_checked.n = n;
	for (uint32_t i = 0; i < n && i < DG_UPLOAD_PATHS_MAX; i++)
		m.u.upload_checked.files[i] = each[i % (sizeof(each) / sizeof(each[0]))];
	return m;
}

Test(proto, exec_argv_stdin_and_timeout_at_their_caps)
{
	struct dg_spawn_msg m = exec_msg(DG_EXEC_ARGV_MAX, 1), out;
	round_trip(&m, &out);
	cr_assert_eq(out.u.exec.argc, DG_EXEC_ARGV_MAX);
	m = exec_msg(DG_EXEC_ARGV_MAX + 1, 1);
	cr_assert_eq(encode_rc(&m), -EINVAL, "257 strings");
	m = exec_msg(0, 1);
	cr_assert_eq(encode_rc(&m), -EINVAL, "no argv");
	m = exec_msg(1, 0);
	cr_assert_eq(encode_rc(&m), -EINVAL, "argv[0] empty");
	m = exec_msg(2, 0);
	m.u.exec.argv[0] = "x";
	round_trip(&m, &out); /* later arguments may be empty */
	m = exec_msg(1, DG_EXEC_ARG_MAX);
	round_trip(&m, &out);
	cr_assert_eq(strlen(out.u.exec.argv[0]), DG_EXEC_ARG_MAX);
	m = exec_msg(1, DG_EXEC_ARG_MAX + 1);
	cr_assert_eq(encode_rc(&m), -EINVAL, "an argument of 4097 bytes");

	static char in[DG_EXEC_STDIN_MAX + 1];
	memset(in, 0, sizeof(in));
	m = exec_msg(1, 1);
	m.u.exec.stdin_data = in;
	m.u.exec.stdin_len = DG_EXEC_STDIN_MAX;
	round_trip(&m, &out);
	cr_assert_eq(out.u.exec.stdin_len, DG_EXEC_STDIN_MAX);
	m.u.exec.stdin_len = DG_EXEC_STDIN_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL, "stdin of 32769 bytes");

	m = exec_msg(1, 1);
	m.u.exec.timeout_ms = DG_EXEC_TIMEOUT_MS_MAX;
	round_trip(&m, &out);
	m.u.exec.timeout_ms = DG_EXEC_TIMEOUT_MS_MAX + 1;
	cr_assert_eq(encode_rc(&m), -EINVAL);
	m.u.exec.timeout_ms = -1;
	cr_assert_eq(encode_rc(&m), -EINVAL);

	/* The whole message is one datagram: 16 arguments of 4096 bytes are
	 * over DG_SPAWN_EXEC_MAX (64 KiB), 15 fit. */
	m = exec_msg(15, DG_EXEC_ARG_MAX);
	round_trip(&m, &out);
	m = exec_msg(16, DG_EXEC_ARG_MAX);
	cr_assert_eq(encode_rc(&m), -E2BIG);
}

Test(proto, every_cut_and_every_extra_byte_is_refused)
{
	struct dg_spawn_msg msgs[6] = {create_msg(), exec_msg(3, 5)};
	msgs[2] = (struct dg_spawn_msg){.type = DG_SPAWN_ENDED};
	snprintf(msgs[2].session, sizeof(msgs[2].session), "s");
	snprintf(msgs[2].u.text, sizeof(msgs[2].u.text), "why");
	msgs[3] = (struct dg_spawn_msg){.type = DG_SPAWN_CREATED, .req = 3};
	snprintf(msgs[3].session, sizeof(msgs[3].session), "s");
	msgs[4] = upload_check_msg(3, 7);
	msgs[5] = upload_checked_msg(3);
	for (int k = 0; k < 6; k++) {
		size_t len;
		cr_assert_eq(dg_spawn_encode(&msgs[k], buf, sizeof(buf), &len, NULL), 0);
		int nfds = dg_spawn_fds(msgs[k].type);
		cr_assert_eq(decode_rc(buf, len, nfds), 0);
		for (size_t cut = 0; cut < len; cut++)
			cr_assert_eq(decode_rc(buf, cut, nfds), -EPROTO, "type %d cut at %zu", k, cut);
		buf[len] = 0;
		cr_assert_eq(decode_rc(buf, len + 1, nfds), -EPROTO, "one byte more");
		cr_assert_eq(decode_rc(buf, len, nfds + 1), -EPROTO, "one descriptor more");
		if (nfds)
			cr_assert_eq(decode_rc(buf, len, nfds - 1), -EPROTO, "one descriptor less");
	}
}

Test(proto, headers_and_strings_that_are_not_canonical_are_refused)
{
	uint32_t h[2] = {99, 1};
	cr_assert_eq(decode_rc((uint8_t *)h, 8, 0), -EPROTO, "unknown type");
	h[0] = 0;
	cr_assert_eq(decode_rc((uint8_t *)h, 8, 0), -EPROTO, "type 0");
	h[0] = DG_SPAWN_EGRESS;
	cr_assert_eq(decode_rc((uint8_t *)h, 8, 0), 0);
	h[1] = 0;
	cr_assert_eq(decode_rc((uint8_t *)h, 8, 0), -EPROTO, "a request numbered 0");
	h[0] = DG_SPAWN_OK;
	cr_assert_eq(decode_rc((uint8_t *)h, 8, 0), -EPROTO, "a reply numbered 0");

	struct dg_spawn_msg m = {.type = DG_SPAWN_ENDED};
	snprintf(m.session, sizeof(m.session), "s");
	m.req = 7;
	cr_assert_eq(encode_rc(&m), -EINVAL, "an event with a request number");

	/* DESTROY "ab": header, u32 2, 'a' 'b' NUL. */
	m = (struct dg_spawn_msg){.type = DG_SPAWN_DESTROY, .req = 1};
	snprintf(m.session, sizeof(m.session), "ab");
	size_t len;
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	cr_assert_eq(len, 8 + 4 + 3);
	buf[14] = 'x';
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "no NUL after the string");
	buf[14] = 0;
	buf[13] = 0;
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "a NUL inside the string");
	buf[13] = 'b';
	uint32_t huge = 0xffffffffu;
	memcpy(buf + 8, &huge, 4);
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "a length past the datagram");

	/* An error text of DG_SPAWN_TEXT_MAX bytes fits; the datagram at the
	 * type's cap decodes, one byte over it does not. */
	m = (struct dg_spawn_msg){.type = DG_SPAWN_ERROR, .req = 1};
	memset(m.u.text, 'e', DG_SPAWN_TEXT_MAX);
	struct dg_spawn_msg out;
	cr_assert_eq(round_trip(&m, &out), DG_SPAWN_ERROR_MAX);
	cr_assert_eq(strlen(out.u.text), DG_SPAWN_TEXT_MAX);
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	uint32_t over = DG_SPAWN_TEXT_MAX + 1;
	memcpy(buf + 8, &over, 4);
	buf[len - 1] = 'e';
	buf[len] = 0;
	cr_assert_eq(decode_rc(buf, len + 1, 0), -EPROTO, "a 512-byte message");
}

Test(proto, exec_results_round_trip_and_lie_about_nothing)
{
	struct dg_exec_result r = {.ok = true, .exit_code = 124,
				   .flags = DG_EXEC_RESULT_TIMED_OUT | DG_EXEC_RESULT_STDERR_TRUNCATED,
				   .duration_ms = 42, .out = "hello\n", .out_len = 6,
				   .errout = "\xff\xfe", .errout_len = 2};
	uint8_t stream[DG_EXEC_RESULT_HEADER + 8];
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), 0);
	memcpy(stream + DG_EXEC_RESULT_HEADER, "hello\n\xff\xfe", 8);
	struct dg_exec_result d;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_exec_result_decode(stream, sizeof(stream), &d, &err), 0, "%s", err.msg);
	cr_assert(d.ok);
	cr_assert_eq(d.exit_code, 124);
	cr_assert_eq(d.flags, r.flags);
	cr_assert_eq(d.duration_ms, 42);
	cr_assert_eq(d.out_len, 6);
	cr_assert_eq(memcmp(d.out, "hello\n", 6), 0);
	cr_assert_eq(d.errout_len, 2);
	json_t *j = dg_exec_result_json(&d);
	char *text = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(text, "{\"ok\":true,\"exit_code\":124,\"stdout\":\"hello\\n\",\"stderr\":"
			       "\"\xef\xbf\xbd\xef\xbf\xbd\",\"stdout_truncated\":false,"
			       "\"stderr_truncated\":true,\"timed_out\":true,\"duration_ms\":42}");
	free(text);
	json_decref(j);
	for (size_t cut = 0; cut < sizeof(stream); cut++)
		cr_assert_eq(dg_exec_result_decode(stream, cut, &d, NULL), -EPROTO, "cut at %zu", cut);

	/* Not ok: an error text, no output. */
	struct dg_exec_result bad = {.ok = false, .exit_code = 127};
	snprintf(bad.error, sizeof(bad.error), "no such program");
	uint8_t s2[DG_EXEC_RESULT_HEADER + 15];
	cr_assert_eq(dg_exec_result_header(&bad, s2, NULL), 0);
	memcpy(s2 + DG_EXEC_RESULT_HEADER, "no such program", 15);
	cr_assert_eq(dg_exec_result_decode(s2, sizeof(s2), &d, NULL), 0);
	cr_assert_str_eq(d.error, "no such program");
	j = dg_exec_result_json(&d);
	text = json_dumps(j, JSON_COMPACT);
	cr_assert_str_eq(text, "{\"ok\":false,\"exit_code\":127,\"error\":\"no such program\"}");
	free(text);
	json_decref(j);

	/* An error text that is not UTF-8 (a path it names) still makes a
	 * JSON result (found by fuzz_spawner: json_pack refused it). */
	snprintf(bad.error, sizeof(bad.error), "no such \xe0\x8f");
	uint8_t s3[DG_EXEC_RESULT_HEADER + 10];
	cr_assert_eq(dg_exec_result_header(&bad, s3, NULL), 0);
	memcpy(s3 + DG_EXEC_RESULT_HEADER, "no such \xe0\x8f", 10);
	cr_assert_eq(dg_exec_result_decode(s3, sizeof(s3), &d, NULL), 0);
	j = dg_exec_result_json(&d);
	cr_assert(j, "no JSON for an error text that is not UTF-8");
	cr_assert_str_eq(json_string_value(json_object_get(j, "error")),
			 "no such \xef\xbf\xbd\xef\xbf\xbd");
	json_decref(j);

	bad.out = "x";
	bad.out_len = 1;
	cr_assert_eq(dg_exec_result_header(&bad, s2, NULL), -EINVAL, "output without ok");
	r.exit_code = 256;
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), -EINVAL, "exit code 256");
	r.exit_code = 255;
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), 0);
	r.flags = 8;
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), -EINVAL, "an unknown flag");
	r.flags = 0;
	r.duration_ms = -1;
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), -EINVAL, "a negative duration");
	/* A header whose lengths say more than the stream holds. */
	r.duration_ms = 0;
	r.out_len = 7;
	cr_assert_eq(dg_exec_result_header(&r, stream, NULL), 0);
	cr_assert_eq(dg_exec_result_decode(stream, sizeof(stream), &d, NULL), -EPROTO);
}

Test(proto, upload_paths_at_their_bounds)
{
	/* The channel's bounds are the file_upload action's. */
	cr_assert_eq(DG_UPLOAD_PATHS_MAX, DG_ACTION_PATHS_MAX);
	cr_assert_eq(DG_UPLOAD_PATH_MAX, DG_ACTION_FILE_PATH_MAX);

	struct dg_spawn_msg m = upload_check_msg(1, 2), out;
	round_trip(&m, &out);
	cr_assert_eq(out.u.upload_check.n, 1);
	cr_assert_str_eq(out.u.upload_check.paths[0], "/a");
	m = upload_check_msg(DG_UPLOAD_PATHS_MAX, DG_UPLOAD_PATH_MAX);
	memset(m.session, 's', DG_SESSION_ID_MAX);
	m.session[DG_SESSION_ID_MAX] = '\0';
	cr_assert_eq(strlen(m.session), DG_SESSION_ID_MAX);
	cr_assert_eq(round_trip(&m, &out), DG_SPAWN_UPLOAD_CHECK_MAX, "the largest at its cap");
	for (int i = 0; i < DG_UPLOAD_PATHS_MAX; i++)
		cr_assert_str_eq(out.u.upload_check.paths[i], upaths[i]);
	m = upload_check_msg(DG_UPLOAD_PATHS_MAX + 1, 2);
	cr_assert_eq(encode_rc(&m), -EINVAL, "17 paths");
	m = upload_check_msg(0, 2);
	cr_assert_eq(encode_rc(&m), -EINVAL, "no path");
	m = upload_check_msg(1, DG_UPLOAD_PATH_MAX + 1);
	cr_assert_eq(encode_rc(&m), -EINVAL, "a path of 1025 bytes");

	/* Only absolute, canonical paths without control characters. */
	static const char *const bad[] = {
		"", "/", "a", "a/b", "/a/", "/a//b", "//a", "/.", "/..", "/a/.", "/a/./b", "/a/../b",
		"/a/..", "/a\nb", "/a\x7f", "/a\x01b", "/a\tb",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_not(dg_upload_path_valid(bad[i], strlen(bad[i])), "%s", bad[i]);
		m = upload_check_msg(1, 2);
		m.u.upload_check.paths[0] = bad[i];
		cr_assert_eq(encode_rc(&m), -EINVAL, "%s", bad[i]);
	}
	static const char *const good[] = {"/a", "/tmp/a.txt", "/a/..b", "/a/b..", "/.a", "/a/...",
					   "/home/user/r\xc3\xa9sum\xc3\xa9.pdf", "/tmp/a b"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(dg_upload_path_valid(good[i], strlen(good[i])), "%s", good[i]);
	cr_assert_not(dg_upload_path_valid("/a\0b", 4), "a NUL inside");
	cr_assert_not(dg_upload_path_valid(NULL, 0));

	/* Hand-built datagrams: a count out of 1..16, a path that is not
	 * canonical, one over its bytes. */
	m = upload_check_msg(1, 4);
	size_t len;
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	size_t count_at = 8 + 4 + strlen(m.session) + 1;
	uint32_t v = 0;
	memcpy(buf + count_at, &v, 4);
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "count 0");
	v = 2;
	memcpy(buf + count_at, &v, 4);
	cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "count 2 with one path");
	v = 1;
	memcpy(buf + count_at, &v, 4);
	cr_assert_eq(decode_rc(buf, len, 0), 0);
	size_t path_at = count_at + 4 + 4; /* "/aaa" */
	static const char *const pokes[] = {"/a/.", "/../", "/./a", "/aa/", "//aa", "/a\033a",
					    "aaaa", "/a\0a"};
	for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
		memcpy(buf + path_at, pokes[i], 4);
		cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "path %zu", i);
	}
	memcpy(buf + path_at, "/a.b", 4);
	cr_assert_eq(decode_rc(buf, len, 0), 0);
	m = upload_check_msg(1, DG_UPLOAD_PATH_MAX);
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	uint32_t over = DG_UPLOAD_PATH_MAX + 1;
	memcpy(buf + count_at, &(uint32_t){1}, 4);
	memcpy(buf + count_at + 4, &over, 4);
	buf[len - 1] = 'a';
	buf[len] = '\0';
	cr_assert_eq(decode_rc(buf, len + 1, 0), -EPROTO, "a path of 1025 bytes");
}

Test(proto, upload_verdicts_at_their_bounds)
{
	struct dg_spawn_msg m = upload_checked_msg(10), out;
	round_trip(&m, &out);
	cr_assert_eq(memcmp(&out.u.upload_checked, &m.u.upload_checked, sizeof(m.u.upload_checked)),
		     0);
	m = upload_checked_msg(DG_UPLOAD_PATHS_MAX);
	memset(m.session, 's', DG_SESSION_ID_MAX);
	m.session[DG_SESSION_ID_MAX] = '\0';
	cr_assert_eq(round_trip(&m, &out), DG_SPAWN_UPLOAD_CHECKED_MAX, "the largest at its cap");
	m = upload_checked_msg(DG_UPLOAD_PATHS_MAX + 1);
	cr_assert_eq(encode_rc(&m), -EINVAL, "17 files");
	m = upload_checked_msg(0);
	cr_assert_eq(encode_rc(&m), -EINVAL, "no file");

	/* Each rule, one in and one out. */
	struct {
		struct dg_upload_file f;
		bool ok;
	} cases[] = {
		{{DG_UPLOAD_OK, 0, 0, 0}, true},
		{{DG_UPLOAD_OK, 0, 0, DG_UPLOAD_FILE_MAX}, true},
		{{DG_UPLOAD_OK, 0, 0, DG_UPLOAD_FILE_MAX + 1}, false},
		{{DG_UPLOAD_OK, 2, 0, 1}, false},
		{{DG_UPLOAD_OK, 0, 1, 1}, false},
		{{DG_UPLOAD_TOO_LARGE, 0, 0, DG_UPLOAD_FILE_MAX + 1}, true},
		{{DG_UPLOAD_TOO_LARGE, 0, 0, UINT64_MAX}, true},
		{{DG_UPLOAD_TOO_LARGE, 0, 0, DG_UPLOAD_FILE_MAX}, false},
		{{DG_UPLOAD_MISSING, 2, 0, 0}, true},
		{{DG_UPLOAD_MISSING, DG_UPLOAD_PATH_MAX, 0, 0}, true},
		{{DG_UPLOAD_MISSING, DG_UPLOAD_PATH_MAX + 1, 0, 0}, false},
		{{DG_UPLOAD_MISSING, 1, 0, 0}, false},
		{{DG_UPLOAD_MISSING, 0, 0, 0}, false},
		{{DG_UPLOAD_MISSING, 2, 0, 1}, false},
		{{DG_UPLOAD_SYMLINK, 2, 0, 0}, true},
		{{DG_UPLOAD_SYMLINK, 0, 0, 0}, false},
		{{DG_UPLOAD_SYMLINK, 2, ELOOP, 0}, false},
		{{DG_UPLOAD_BROWSER_FILES, 20, 0, 0}, true},
		{{DG_UPLOAD_BROWSER_FILES, 0, 0, 0}, false},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFDIR, 0}, true},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFIFO, 0}, true},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFSOCK, 0}, true},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFCHR, 0}, true},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFBLK, 0}, true},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFREG, 0}, false},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFLNK, 0}, false},
		{{DG_UPLOAD_NOT_REGULAR, 0, 0, 0}, false},
		{{DG_UPLOAD_NOT_REGULAR, 4, S_IFDIR, 0}, false},
		{{DG_UPLOAD_OUTSIDE_SCRATCH, 0, 0, 0}, true},
		{{DG_UPLOAD_OUTSIDE_SCRATCH, 2, 0, 0}, false},
		{{DG_UPLOAD_UNREADABLE, 0, 0, 0}, true},
		{{DG_UPLOAD_UNREADABLE, 5, 0, 0}, true},
		{{DG_UPLOAD_UNREADABLE, 5, 0, 5}, false},
		{{DG_UPLOAD_ERROR, 0, 1, 0}, true},
		{{DG_UPLOAD_ERROR, 7, DG_UPLOAD_ERRNO_MAX, 0}, true},
		{{DG_UPLOAD_ERROR, 7, DG_UPLOAD_ERRNO_MAX + 1, 0}, false},
		{{DG_UPLOAD_ERROR, 7, 0, 0}, false},
		{{DG_UPLOAD_VERDICT_COUNT, 0, 0, 0}, false},
		{{(enum dg_upload_verdict)0xffffffffu, 0, 0, 0}, false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		m = upload_checked_msg(2);
		m.u.upload_checked.files[1] = cases[i].f;
		cr_assert_eq(encode_rc(&m), cases[i].ok ? 0 : -EINVAL, "case %zu", i);
		if (cases[i].ok) {
			round_trip(&m, &out);
			cr_assert_eq(memcmp(&out.u.upload_checked.files[1], &cases[i].f,
					    sizeof(cases[i].f)), 0, "case %zu", i);
			continue;
		}
		/* The same bytes built by hand: the decoder refuses them too. */
		struct dg_spawn_msg v = upload_checked_msg(2);
		size_t len;
		cr_assert_eq(dg_spawn_encode(&v, buf, sizeof(buf), &len, NULL), 0);
		uint8_t *e = buf + len - DG_SPAWN_UPLOAD_ENTRY_SIZE;
		uint32_t verdict = (uint32_t)cases[i].f.verdict;
		memcpy(e, &verdict, 4);
		memcpy(e + 4, &cases[i].f.at, 4);
		memcpy(e + 8, &cases[i].f.detail, 4);
		memcpy(e + 12, &cases[i].f.size, 8);
		cr_assert_eq(decode_rc(buf, len, 0), -EPROTO, "case %zu", i);
	}

	/* The answer names its session and carries no descriptor. */
	m = upload_checked_msg(1);
	m.session[0] = '\0';
	cr_assert_eq(encode_rc(&m), -EINVAL, "no session");
	m = upload_checked_msg(1);
	size_t len;
	cr_assert_eq(dg_spawn_encode(&m, buf, sizeof(buf), &len, NULL), 0);
	cr_assert_eq(decode_rc(buf, len, 1), -EPROTO, "a descriptor");
	m.req = 0;
	cr_assert_eq(encode_rc(&m), -EINVAL, "a reply numbered 0");
}

Test(proto, upload_reasons_name_what_refused)
{
	static const struct {
		struct dg_upload_file f;
		const char *path, *want;
	} cases[] = {
		{{DG_UPLOAD_OK, 0, 0, 5}, "/tmp/a", "ok (5 bytes)"},
		{{DG_UPLOAD_MISSING, 9, 0, 0}, "/tmp/nope/a", "no such file or directory: /tmp/nope"},
		{{DG_UPLOAD_SYMLINK, 6, 0, 0}, "/tmp/x", "a symbolic link at /tmp/x"},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFIFO, 0}, "/tmp/f", "not a regular file (a FIFO)"},
		{{DG_UPLOAD_NOT_REGULAR, 0, S_IFDIR, 0}, "/tmp/d", "not a regular file (a directory)"},
		{{DG_UPLOAD_OUTSIDE_SCRATCH, 0, 0, 0}, "/etc/passwd", "outside the session's scratch space"},
		{{DG_UPLOAD_BROWSER_FILES, 20, 0, 0}, "/home/user/.chromium/Local State",
		 "the browser's own files (/home/user/.chromium)"},
		{{DG_UPLOAD_TOO_LARGE, 0, 0, DG_UPLOAD_FILE_MAX + 1}, "/tmp/big", "too large: 67108865 bytes"},
		{{DG_UPLOAD_UNREADABLE, 0, 0, 0}, "/tmp/s", "not readable by the session's user"},
		{{DG_UPLOAD_UNREADABLE, 7, 0, 0}, "/tmp/lo/f", "(/tmp/lo may not be searched)"},
		{{DG_UPLOAD_ERROR, 6, ENOTDIR, 0}, "/tmp/a/x", "Not a directory: /tmp/a"},
		/* An `at` past the path is cut at its end, never read past it. */
		{{DG_UPLOAD_SYMLINK, 900, 0, 0}, "/tmp/x", "a symbolic link at /tmp/x "},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[DG_ERR_MAX];
		dg_upload_reason(&cases[i].f, cases[i].path, why, sizeof(why));
		cr_assert(strstr(why, cases[i].want), "%zu: %s", i, why);
	}
	char tiny[4];
	dg_upload_reason(&cases[1].f, cases[1].path, tiny, sizeof(tiny));
	cr_assert_eq(strlen(tiny), 3);
}

/* The browser's own files, from a path's bytes: one list, shared with what
 * hides them from exec (desktop/spawner/jail-enter.c). */
Test(proto, the_browsers_own_files_by_their_paths)
{
	static const struct {
		const char *path, *prefix; /* prefix NULL: not the browser's */
	} cases[] = {
		{"/home/user/.chromium", "/home/user/.chromium"},
		{"/home/user/.chromium/Local State", "/home/user/.chromium"},
		{"/home/user/.chromium/Default/Cookies", "/home/user/.chromium"},
		{"/home/user/.chromiumx", NULL},
		{"/home/user/.cache/chromium/a", "/home/user/.cache/chromium"},
		{"/home/user/.cache/chromiu", NULL},
		{"/home/user/.cache/x", NULL},
		{"/tmp/.X11-unix/X0", "/tmp/.X11-unix"},
		{"/tmp/.X11-unixy", NULL},
		{"/tmp/org.chromium.Chromium.abc/SingletonSocket", "/tmp/org.chromium.Chromium.abc"},
		{"/tmp/.org.chromium.Chromium.abc", "/tmp/.org.chromium.Chromium.abc"},
		{"/tmp/work/org.chromium.x/y", "/tmp/work/org.chromium.x"},
		{"/tmp/org.chromium.", "/tmp/org.chromium."},
		{"/tmp/org.chromium", NULL},
		{"/tmp/..org.chromium.x", NULL},
		{"/dev/shm/.org.chromium.Chromium.X", "/dev/shm/.org.chromium.Chromium.X"},
		{"/dev/shmx/org.chromium.a", NULL},
		{"/home/user/org.chromium.a", NULL},
		{"/tmp/a.txt", NULL},
		{"/tmpx/org.chromium.a", NULL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = dg_desktop_hidden_prefix(cases[i].path);
		size_t want = cases[i].prefix ? strlen(cases[i].prefix) : 0;
		cr_assert_eq(n, want, "%s: %zu, not %zu", cases[i].path, n, want);
	}
	/* The list holds what the jail hides. */
	bool x11 = false, profile = false, cache = false;
	for (int i = 0; dg_desktop_hidden_dirs[i]; i++) {
		x11 |= strcmp(dg_desktop_hidden_dirs[i], DG_DESKTOP_X11_DIR) == 0;
		profile |= strcmp(dg_desktop_hidden_dirs[i], DG_DESKTOP_BROWSER_DIR) == 0;
		cache |= strcmp(dg_desktop_hidden_dirs[i], DG_DESKTOP_BROWSER_CACHE_DIR) == 0;
	}
	cr_assert(x11 && profile && cache);
}

/* The gateway's stubs send exactly what they were given, and a reply that
 * does not decode is refused with its descriptors closed. */
Test(proto, the_stubs_over_a_socketpair)
{
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	struct dg_spawner sp = {.pid = -1, .fd = sv[0]};
	struct dg_limits lim = limits_default();
	struct dg_err err = {{0}};
	cr_assert_eq(dg_spawner_create(&sp, "s-9", DG_PROFILE_XTERM, 640, 480, &lim, false, &err), 1,
		     "%s", err.msg);
	const char *argv[] = {"true", NULL};
	cr_assert_eq(dg_spawner_exec(&sp, "s-9", argv, 1, NULL, 0, 0, &err), 2, "%s", err.msg);
	cr_assert_lt(dg_spawner_exec(&sp, "s-9", argv, 0, NULL, 0, 0, &err), 0);
	cr_assert_lt(dg_spawner_create(&sp, "S", DG_PROFILE_XTERM, 640, 480, &lim, false, &err), 0);
	cr_assert_eq(dg_spawner_destroy(&sp, "s-9", &err), 3, "refused requests take no number");
	const char *paths[DG_UPLOAD_PATHS_MAX + 1] = {"/tmp/a.txt", "/home/user/b"};
	cr_assert_eq(dg_spawner_upload_check(&sp, "s-9", paths, 2, &err), 4, "%s", err.msg);
	cr_assert_lt(dg_spawner_upload_check(&sp, "s-9", paths, 0, &err), 0);
	for (int i = 0; i <= DG_UPLOAD_PATHS_MAX; i++)
		paths[i] = "/tmp/a";
	cr_assert_eq(dg_spawner_upload_check(&sp, "s-9", paths, DG_UPLOAD_PATHS_MAX + 1, &err),
		     -EINVAL);
	cr_assert(strstr(err.msg, "1 to 16 paths"), "%s", err.msg);
	paths[3] = "/tmp/../etc/passwd";
	cr_assert_eq(dg_spawner_upload_check(&sp, "s-9", paths, 4, &err), -EINVAL);
	cr_assert(strstr(err.msg, "paths[3]"), "%s", err.msg);
	cr_assert_eq(dg_spawner_upload_check(&sp, "S", paths, 1, &err), -EINVAL, "a bad session");

	static char rbuf[DG_SEQ_MAX + 1];
	int fds[DG_SEQ_FDS_MAX], nfds;
	size_t len;
	struct dg_spawn_msg m;
	cr_assert_eq(dg_seq_recv(sv[1], rbuf, sizeof(rbuf), &len, fds, &nfds, &err), 1);
	cr_assert_eq(dg_spawn_decode((uint8_t *)rbuf, len, nfds, &m, &err), 0, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_CREATE);
	cr_assert_str_eq(m.session, "s-9");
	cr_assert_eq(m.u.create.width, 640);
	cr_assert_eq(memcmp(&m.u.create.limits, &lim, sizeof(lim)), 0);
	cr_assert_eq(dg_seq_recv(sv[1], rbuf, sizeof(rbuf), &len, fds, &nfds, &err), 1);
	cr_assert_eq(dg_spawn_decode((uint8_t *)rbuf, len, nfds, &m, &err), 0, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_EXEC);
	cr_assert_str_eq(m.u.exec.argv[0], "true");
	cr_assert_eq(dg_seq_recv(sv[1], rbuf, sizeof(rbuf), &len, fds, &nfds, &err), 1);
	cr_assert_eq(dg_seq_recv(sv[1], rbuf, sizeof(rbuf), &len, fds, &nfds, &err), 1);
	cr_assert_eq(dg_spawn_decode((uint8_t *)rbuf, len, nfds, &m, &err), 0, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_UPLOAD_CHECK);
	cr_assert_eq(m.req, 4);
	cr_assert_str_eq(m.session, "s-9");
	cr_assert_eq(m.u.upload_check.n, 2);
	cr_assert_str_eq(m.u.upload_check.paths[0], "/tmp/a.txt");
	cr_assert_str_eq(m.u.upload_check.paths[1], "/home/user/b");

	/* An answer reaches the gateway typed; the request itself does not. */
	struct dg_spawn_msg a = upload_checked_msg(2);
	a.req = 4;
	cr_assert_eq(dg_spawn_encode(&a, buf, sizeof(buf), &len, NULL), 0);
	cr_assert_eq(dg_seq_send(sv[1], (char *)buf, len, NULL, 0), 0);
	nfds = -1;
	cr_assert_eq(dg_spawner_recv(&sp, &m, fds, &nfds, &err), 1, "%s", err.msg);
	cr_assert_eq(nfds, 0);
	cr_assert_eq(m.type, DG_SPAWN_UPLOAD_CHECKED);
	cr_assert_eq(m.req, 4);
	cr_assert_eq(memcmp(&m.u.upload_checked, &a.u.upload_checked, sizeof(a.u.upload_checked)), 0);
	struct dg_spawn_msg uq = upload_check_msg(1, 3);
	cr_assert_eq(dg_spawn_encode(&uq, buf, sizeof(buf), &len, NULL), 0);
	cr_assert_eq(dg_seq_send(sv[1], (char *)buf, len, NULL, 0), 0);
	cr_assert_eq(dg_spawner_recv(&sp, &m, fds, &nfds, &err), -EPROTO, "a request as a reply");

	/* A CREATED with one descriptor instead of three. */
	struct dg_spawn_msg c = {.type = DG_SPAWN_CREATED, .req = 1};
	snprintf(c.session, sizeof(c.session), "s-9");
	cr_assert_eq(dg_spawn_encode(&c, buf, sizeof(buf), &len, NULL), 0);
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(dg_seq_send(sv[1], (char *)buf, len, &devnull, 1), 0);
	close(devnull);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	nfds = 0;
	memset(&err, 0, sizeof(err));
	cr_assert_eq(dg_spawner_recv(&sp, &m, fds, &nfds, &err), -EPROTO);
	cr_assert_eq(nfds, 0, "the descriptor is closed, not handed over");
	cr_assert(strstr(err.msg, "descriptors"), "%s", err.msg);
	/* A request where a reply is due. */
	struct dg_spawn_msg q = {.type = DG_SPAWN_EGRESS, .req = 1};
	cr_assert_eq(dg_spawn_encode(&q, buf, sizeof(buf), &len, NULL), 0);
	cr_assert_eq(dg_seq_send(sv[1], (char *)buf, len, NULL, 0), 0);
	cr_assert_eq(dg_spawner_recv(&sp, &m, fds, &nfds, &err), -EPROTO);
	close(sv[0]);
	close(sv[1]);
}

/* Waits (bounded) for the next message of a real spawner. */
static int spawner_wait(struct dg_spawner *sp, struct dg_spawn_msg *m, struct dg_err *err)
{
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	struct pollfd p = {sp->fd, POLLIN, 0};
	cr_assert_gt(poll(&p, 1, 10000), 0, "the spawner said nothing within 10 s");
	int r = dg_spawner_recv(sp, m, fds, &nfds, err);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return r;
}

/* A request the spawner can decode but not serve is answered with an
 * error; a datagram it cannot decode ends it (and so every session). */
Test(proto, a_real_spawner_refuses_then_ends_on_a_malformed_request)
{
	struct dg_spawner sp;
	struct dg_err err = {{0}};
	cr_assert_eq(dg_spawner_start(&sp, false, &err), 0, "%s", err.msg);
	cr_assert_gt(dg_spawner_destroy(&sp, "nobody", &err), 0, "%s", err.msg);
	struct dg_spawn_msg m;
	cr_assert_eq(spawner_wait(&sp, &m, &err), 1, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_ERROR);
	cr_assert_eq(m.req, 1);
	cr_assert_str_eq(m.u.text, "destroy: no such session");
	const char *argv[] = {"true", NULL};
	cr_assert_gt(dg_spawner_exec(&sp, "nobody", argv, 1, NULL, 0, 0, &err), 0, "%s", err.msg);
	cr_assert_eq(spawner_wait(&sp, &m, &err), 1, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_ERROR);
	cr_assert_str_eq(m.u.text, "exec: no such session");
	const char *paths[] = {"/tmp/a"};
	cr_assert_gt(dg_spawner_upload_check(&sp, "nobody", paths, 1, &err), 0, "%s", err.msg);
	cr_assert_eq(spawner_wait(&sp, &m, &err), 1, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_ERROR);
	cr_assert_str_eq(m.u.text, "upload check: no such session");
	struct dg_limits lim = limits_default();
	cr_assert_gt(dg_spawner_pool(&sp, 0, 0, &lim, false, &err), 0, "%s", err.msg);
	cr_assert_eq(spawner_wait(&sp, &m, &err), 1, "%s", err.msg);
	cr_assert_eq(m.type, DG_SPAWN_OK);

	/* A create whose width is one past the bound: built by hand, since the
	 * stub refuses to send it. */
	struct dg_spawn_msg c = create_msg();
	c.req = 9;
	size_t len;
	cr_assert_eq(dg_spawn_encode(&c, buf, sizeof(buf), &len, NULL), 0);
	uint32_t w = DG_DESKTOP_WIDTH_MAX + 1;
	memcpy(buf + 8 + 4 + strlen(c.session) + 1 + 4, &w, 4);
	cr_assert_eq(dg_seq_send(sp.fd, (char *)buf, len, NULL, 0), 0);
	cr_assert_eq(spawner_wait(&sp, &m, &err), -EPIPE, "the spawner answered: %d", m.type);
	int st = 0;
	cr_assert_eq(waitpid(sp.pid, &st, 0), sp.pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %#x", st);
	sp.pid = -1;
	dg_spawner_stop(&sp);
}
