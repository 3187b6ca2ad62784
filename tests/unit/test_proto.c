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
#include <sys/wait.h>
#include <unistd.h>

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
	struct dg_spawn_msg msgs[4] = {create_msg(), exec_msg(3, 5)};
	msgs[2] = (struct dg_spawn_msg){.type = DG_SPAWN_ENDED};
	snprintf(msgs[2].session, sizeof(msgs[2].session), "s");
	snprintf(msgs[2].u.text, sizeof(msgs[2].u.text), "why");
	msgs[3] = (struct dg_spawn_msg){.type = DG_SPAWN_CREATED, .req = 3};
	snprintf(msgs[3].session, sizeof(msgs[3].session), "s");
	for (int k = 0; k < 4; k++) {
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

	/* A CREATED with one descriptor instead of two. */
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
