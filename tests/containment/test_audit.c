/* `deskgate audit` (cli/cli-audit.c): the probe battery run from inside
 * a live session.
 *
 *  - Under the built-in default policy and under the README's full example
 *    policy, the audit must find nothing leaked (exit 0), cover all five
 *    edges, answer in the documented JSON shape (also written to
 *    STATE_DIR/audit/<policy sha256>.json) and leave nothing behind. Under
 *    the example policy, what its egress allows is reported as allowed.
 *  - It can fail: given a probe that reports a leak everywhere (--probe, a
 *    product option), it says leaked and exits 1; and the probes it added
 *    to cli/probe.c report LEAKED when run on the host (the controls), where
 *    what they look for is there, and CONTAINED where it is not.
 *  - What the host's kernel refuses by itself (int 0x80 without IA32
 *    emulation, /proc/sysrq-trigger without magic SysRq...) is reported as
 *    contained by the kernel, named in the report, and never as leaked; the
 *    tests measure the host control themselves and expect accordingly, so
 *    they hold on kernels with and without those calls. A probe's claim
 *    that the kernel refused a call counts only where the audit's own host
 *    control showed the kernel refusing one.
 *  - Usage errors exit 2, an audit that cannot start exits 125.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

/* One audit run may take this long: about 50 s with the browser on a quiet
 * 2-core VM, several times that on a loaded one (its bait runs try again,
 * DG_AUDIT_BAIT_TRIES_MS bounds them). */
#define AUDIT_TIMEOUT 270.0

/* The README's full example policy ("Policy: one file, enforced at three
 * layers"), verbatim. */
static const char example_policy[] =
	"{\n"
	"  \"version\": 1,\n"
	"  \"default\": \"deny\",\n"
	"  \"actions\": {\"allow\": [\"screenshot\", \"move\", \"click\", \"drag\", \"scroll\", "
	"\"type\", \"key\", \"navigate\", \"back\", \"forward\", \"reload\", \"wait\", \"zoom\", "
	"\"cursor_position\"], \"ask\": [\"exec\"], \"deny\": []},\n"
	"  \"urls\": {\"allow\": [\"https://example.com/**\", \"https://*.wikipedia.org/**\"], "
	"\"deny\": [\"https://*.wikipedia.org/wiki/Special:*\"], \"ask\": []},\n"
	"  \"regions\": [{\"name\": \"top-bar\", \"rect\": [0, 0, 1280, 40], \"url\": \"**\", "
	"\"actions\": [\"click\", \"type\"], \"verdict\": \"deny\", \"reason\": \"window controls "
	"are off limits\"}],\n"
	"  \"keys\": {\"deny\": [\"ctrl+alt+*\", \"super+*\"], \"ask\": [\"ctrl+Return\"]},\n"
	"  \"text\": {\"max_length\": 4000, \"deny\": [\"BEGIN [A-Z ]*PRIVATE KEY\"]},\n"
	"  \"egress\": {\"allow\": [\"example.com:443\", \"*.wikipedia.org:443\"]},\n"
	"  \"budgets\": {\"actions_per_minute\": 300, \"max_actions\": 10000, \"max_exec\": 100},\n"
	"  \"limits\": {\"memory_mb\": 2048, \"pids\": 512, \"cpus\": 1.0, \"session_seconds\": "
	"3600, \"exec_seconds\": 60, \"output_bytes\": 1048576, \"scratch_mb\": 512}\n"
	"}\n";

/* The text the gateway (and so the audit) hashes for the built-in default. */
#define BUILTIN_POLICY_TEXT "{\"version\": 1}"

static const char *const edges[] = {"egress", "filesystem", "credentials", "isolation",
				    "resources"};
#define N_OUTCOMES 6
static const char *const outcomes[N_OUTCOMES] = {"contained", "allowed", "leaked", "not-checked",
						 "error", "contained-by-kernel"};

static void sha256_hex(const char *text, size_t len, char out[65])
{
	unsigned char h[SHA256_DIGEST_LENGTH];
	SHA256((const unsigned char *)text, len, h);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* What the audit's jails left behind. Other deskgate users share the
 * machine (their live jails hold their slot locks), so only what nobody
 * owns counts (dg_test_leftovers_stale), and only what is new since the
 * run began. */
static char stale_before[16384];

static void assert_no_stale(const char *after)
{
	char now[16384], fresh[16384];
	int n = 0;
	/* Teardown is synchronous, but give a dying process a moment. */
	for (int tries = 0; tries < 20; tries++) {
		dg_test_leftovers_stale(now, sizeof(now));
		n = 0;
		fresh[0] = '\0';
		for (char *item = strtok(now, ";"); item; item = strtok(NULL, ";")) {
			while (*item == ' ')
				item++;
			if (!*item || strstr(stale_before, item))
				continue;
			n++;
			size_t l = strlen(fresh);
			snprintf(fresh + l, sizeof(fresh) - l, "%s; ", item);
		}
		if (n == 0)
			return;
		usleep(100000);
	}
	cr_assert_eq(n, 0, "%d leftover(s) nobody owns after %s: %s", n, after, fresh);
}

/* Runs `DG_BIN audit --progress ARGS...`. An audit that overran says on
 * the test's stderr how far it got (its progress lines), so a slow or stuck
 * probe on a CI host is named in the log. */
static void audit_run(const char *const *args, struct dg_run *r)
{
	const char *argv[32];
	size_t n = 0;
	argv[n++] = DG_BIN;
	argv[n++] = "audit";
	argv[n++] = "--progress";
	for (size_t i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	dg_test_leftovers_stale(stale_before, sizeof(stale_before));
	cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, AUDIT_TIMEOUT, -1, r), 0);
	show_run("audit", r);
	if (r->timed_out) {
		fprintf(stderr, "the audit did not finish in %.0f s; its stderr so far:\n%s\n",
			AUDIT_TIMEOUT, r->err);
		dg_run_free(r);
		cr_assert_fail("the audit did not finish in %.0f s", AUDIT_TIMEOUT);
	}
}

/* The findings whose outcome is not in ok (a comma-separated list), for a
 * failure message. */
static void others(json_t *findings, const char *ok, char *buf, size_t len)
{
	buf[0] = '\0';
	size_t i;
	json_t *f;
	json_array_foreach(findings, i, f)
	{
		const char *o = json_string_value(json_object_get(f, "outcome"));
		if (o && strstr(ok, o))
			continue;
		size_t l = strlen(buf);
		snprintf(buf + l, len - l, "\n  %s %s: %s", json_string_value(json_object_get(f, "id")),
			 o ? o : "?", json_string_value(json_object_get(f, "evidence")));
	}
}

/* Checks the JSON report's shape and its consistency with the exit code;
 * returns the parsed report. */
static json_t *check_shape(const char *text, int exit_code, const char *policy_sha,
			   const char *profile)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	cr_assert(j, "the report is not JSON: %s (line %d)", je.text, je.line);
	json_t *pol = json_object_get(j, "policy");
	cr_assert(json_is_object(pol), "no policy object");
	cr_assert(json_is_string(json_object_get(pol, "name")), "policy.name");
	cr_assert_str_eq(json_string_value(json_object_get(pol, "sha256")), policy_sha,
			 "policy.sha256 is not the hash of the policy's text");
	cr_assert_str_eq(json_string_value(json_object_get(j, "profile")), profile);
	cr_assert(json_is_string(json_object_get(j, "started")));
	json_int_t duration = json_integer_value(json_object_get(j, "duration_ms"));
	json_int_t setup = json_integer_value(json_object_get(j, "setup_ms"));
	cr_assert(json_is_integer(json_object_get(j, "duration_ms")) && duration > 0);
	cr_assert(json_is_integer(json_object_get(j, "setup_ms")) && setup > 0 && setup < duration,
		  "setup_ms %lld of duration_ms %lld", (long long)setup, (long long)duration);
	json_int_t findings_ms = 0;
	json_t *probe = json_object_get(j, "deskgate_probe");
	cr_assert(json_is_string(json_object_get(probe, "sha256")), "deskgate_probe.sha256");
	json_t *findings = json_object_get(j, "findings");
	cr_assert(json_is_array(findings) && json_array_size(findings) >= 40,
		  "want at least 40 findings, got %zu", json_array_size(findings));
	int per_outcome[N_OUTCOMES] = {0}, per_edge[5] = {0};
	json_t *kernel = json_object_get(j, "kernel_refused");
	cr_assert(json_is_array(kernel), "no kernel_refused list");
	size_t kernel_seen = 0;
	size_t i;
	json_t *f;
	json_array_foreach(findings, i, f)
	{
		static const char *const keys[] = {"id", "edge", "probe", "source", "sink", "tried",
						   "outcome", "evidence"};
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			cr_assert(json_is_string(json_object_get(f, keys[k])) &&
					  json_string_length(json_object_get(f, keys[k])) > 0,
				  "finding %zu: %s missing or empty", i, keys[k]);
		const char *edge = json_string_value(json_object_get(f, "edge"));
		const char *out = json_string_value(json_object_get(f, "outcome"));
		int e = -1, o = -1;
		for (int k = 0; k < 5; k++)
			if (!strcmp(edge, edges[k]))
				e = k;
		for (int k = 0; k < N_OUTCOMES; k++)
			if (!strcmp(out, outcomes[k]))
				o = k;
		cr_assert(e >= 0, "finding %zu: unknown edge %s", i, edge);
		cr_assert(o >= 0, "finding %zu: unknown outcome %s", i, out);
		per_edge[e]++;
		per_outcome[o]++;
		/* Its time: one after the other, so together within the whole. */
		json_t *ms = json_object_get(f, "ms");
		cr_assert(json_is_integer(ms) && json_integer_value(ms) >= 0, "finding %zu: ms", i);
		if (strcmp(json_string_value(json_object_get(f, "id")), "egress.browser-websocket"))
			findings_ms += json_integer_value(ms); /* it runs with browser-omnibox */
		if (o == 5) {
			/* Named in kernel_refused, in order, with the host's control. */
			json_t *named = json_array_get(kernel, kernel_seen++);
			cr_assert(json_is_string(named) &&
					  !strcmp(json_string_value(named),
						  json_string_value(json_object_get(f, "id"))),
				  "finding %zu (%s) is not next in kernel_refused", i,
				  json_string_value(json_object_get(f, "id")));
			const char *ctl = json_string_value(json_object_get(f, "control"));
			cr_assert(ctl && strstr(ctl, "on the host"), "finding %zu: contained by the "
				  "kernel without the host control: %s", i, ctl ? ctl : "(none)");
		}
	}
	cr_assert_eq(json_array_size(kernel), kernel_seen, "kernel_refused names %zu, the "
		     "findings %zu", json_array_size(kernel), kernel_seen);
	cr_assert(setup + findings_ms <= duration, "setup %lld ms and findings %lld ms in %lld ms",
		  (long long)setup, (long long)findings_ms, (long long)duration);
	for (int k = 0; k < 5; k++)
		cr_assert_gt(per_edge[k], 0, "no finding for the %s edge", edges[k]);
	json_t *sum = json_object_get(j, "summary");
	cr_assert_eq(json_integer_value(json_object_get(sum, "probes")),
		     (json_int_t)json_array_size(findings));
	static const char *const sum_keys[N_OUTCOMES] = {"contained", "allowed", "leaked",
							 "not_checked", "errors",
							 "contained_by_kernel"};
	for (int k = 0; k < N_OUTCOMES; k++)
		cr_assert_eq(json_integer_value(json_object_get(sum, sum_keys[k])), per_outcome[k],
			     "summary.%s", sum_keys[k]);
	cr_assert_eq(json_integer_value(json_object_get(j, "exit")), exit_code);
	cr_assert_eq(exit_code, per_outcome[2] ? 1 : per_outcome[4] ? 125 : 0,
		     "exit %d does not follow from the outcomes", exit_code);
	return j;
}

static json_t *finding(json_t *report, const char *id)
{
	size_t i;
	json_t *f;
	json_array_foreach(json_object_get(report, "findings"), i, f)
	{
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	}
	return NULL;
}

static const char *outcome_of(json_t *report, const char *id)
{
	json_t *f = finding(report, id);
	cr_assert(f, "no finding %s", id);
	return json_string_value(json_object_get(f, "outcome"));
}

/* The TOKEN of the host control's RESULT line for key (cli/probe.c, "Kernel
 * refusals"), measured here with the tests' own probe (the same source as
 * deskgate-probe): "ok" where the host's kernel runs the call, an errno or
 * a signal where it refuses it. */
static void host_token(const char *const *argv, const char *key, char *token, size_t len)
{
	struct host_results hr;
	char line[8192];
	control_run(NULL, NULL, -1, argv, true, line, sizeof(line), &hr);
	token[0] = '\0';
	size_t kl = strlen(key);
	for (int i = 0; i < hr.n; i++)
		if (!strncmp(hr.kv[i], key, kl) && hr.kv[i][kl] == '=')
			snprintf(token, len, "%s", hr.kv[i] + kl + 1);
	cr_assert(token[0], "the host control of %s printed no RESULT %s=", argv[0], key);
}

/* The findings of probes whose calls depend on the kernel, against what the
 * host's kernel does (measured here): never leaked, and contained by the
 * kernel exactly where the kernel refuses the call before deskgate could. */
static void expect_kernel_aware(json_t *rep)
{
	char tok[64];
	json_t *f = finding(rep, "isolation.int80");
	cr_assert(f, "no isolation.int80");
	const char *out = json_string_value(json_object_get(f, "outcome"));
	const char *ev = json_string_value(json_object_get(f, "evidence"));
	const char *ctl = json_string_value(json_object_get(f, "control"));
	cr_expect(ctl && strstr(ctl, "on the host, as root with no filter: "),
		  "isolation.int80 has no host control: %s", ctl ? ctl : "(none)");
	host_token(ARGV("int80"), "int80", tok, sizeof(tok));
	if (!strncmp(tok, "SIG", 3)) {
		/* No IA32 emulation: the kernel kills it before any filter. */
		cr_expect_str_eq(out, "contained-by-kernel", "host int80=%s; %s", tok, ev);
		cr_expect(strstr(ev, "as on the host without deskgate"), "%s", ev);
		cr_expect(ctl && strstr(ctl, "KERNEL int 0x80 getpid on the host: killed by"), "%s",
			  ctl ? ctl : "(none)");
	} else {
		/* The host runs i386 calls: the filter must kill it. */
		cr_expect_str_eq(out, "contained", "host int80=%s; %s", tok, ev);
	}
	/* A kernel without x32, kexec or modules answers ENOSYS; the filter
	 * answers first (SIGSYS, EPERM): contained, by deskgate, either way. */
	static const struct {
		const char *id, *probe, *key;
	} filtered[] = {{"isolation.x32", "x32", "x32"},
			{"isolation.kexec", "kexec", "kexec_load"},
			{"isolation.modules", "modules", "init_module"}};
	for (size_t i = 0; i < sizeof(filtered) / sizeof(filtered[0]); i++) {
		f = finding(rep, filtered[i].id);
		cr_assert(f, "no %s", filtered[i].id);
		host_token(ARGV(filtered[i].probe), filtered[i].key, tok, sizeof(tok));
		ctl = json_string_value(json_object_get(f, "control"));
		cr_expect(ctl && strstr(ctl, "on the host"), "%s has no host control", filtered[i].id);
		if (!strcmp(tok, "EPERM") || !strcmp(tok, "SIGSYS")) {
			cr_log_info("%s: the host refuses it as the filter would (%s)", filtered[i].id,
				    tok);
			continue;
		}
		cr_expect_str_eq(json_string_value(json_object_get(f, "outcome")), "contained",
				 "%s (host %s=%s): %s", filtered[i].id, filtered[i].key, tok,
				 json_string_value(json_object_get(f, "evidence")));
	}
}

/* The audit must contain everything: exit 0, nothing leaked or failed
 * (what the host's kernel refuses by itself is not a leak). */
static void expect_clean(const struct dg_run *r, json_t *report)
{
	char bad[8192];
	others(json_object_get(report, "findings"), "contained,allowed,not-checked,"
	       "contained-by-kernel", bad, sizeof(bad));
	cr_expect_eq(r->exit_code, 0, "audit exit %d; findings not contained:%s", r->exit_code,
		     bad);
	cr_expect_eq(json_integer_value(json_object_get(json_object_get(report, "summary"),
							"leaked")),
		     0, "leaked:%s", bad);
}

/* Reads a whole file (tests only: small files). */
static char *slurp(const char *path, struct stat *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	fstat(fd, st);
	char *buf = calloc(1, (size_t)st->st_size + 1);
	ssize_t k = buf ? read(fd, buf, (size_t)st->st_size) : -1;
	close(fd);
	if (k != st->st_size) {
		free(buf);
		return NULL;
	}
	return buf;
}

Test(audit, default_policy_contains_everything, .timeout = 330)
{
	char state[] = "/tmp/dg-test-XXXXXX";
	cr_assert(mkdtemp(state));
	struct dg_run r;
	audit_run(ARGV("--json", "--state-dir", state), &r);
	char sha[65];
	sha256_hex(BUILTIN_POLICY_TEXT, strlen(BUILTIN_POLICY_TEXT), sha);
	json_t *rep = check_shape(r.out, r.exit_code, sha, "browser");
	expect_clean(&r, rep);
	expect_kernel_aware(rep);
	/* The default policy lets nothing through the proxy. */
	cr_expect_str_eq(outcome_of(rep, "egress.proxy-denied-connect"), "contained");
	cr_expect(strstr(json_string_value(json_object_get(
				 finding(rep, "egress.proxy-denied-connect"), "evidence")),
			 "answered 403"),
		  "the proxy's refusal is the evidence");
	/* The other session's controls ran and saw their targets. */
	static const char *const controlled[] = {"isolation.other-session-x11",
						 "isolation.other-session-processes",
						 "isolation.other-session-files"};
	for (size_t i = 0; i < 3; i++)
		cr_expect(json_is_string(json_object_get(finding(rep, controlled[i]), "control")),
			  "%s has no control", controlled[i]);
	cr_expect(finding(rep, "isolation.devtools-pipe"), "the browser's DevTools pipe is probed");
	/* The same report, in the state dir, named by the policy's hash. */
	char path[256];
	snprintf(path, sizeof(path), "%s/audit/%s.json", state, sha);
	struct stat st, dst;
	char *saved = slurp(path, &st);
	cr_assert(saved, "no %s", path);
	cr_expect_eq(st.st_mode & 0777, 0640, "mode %o", st.st_mode & 0777);
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/audit", state);
	cr_assert_eq(stat(dir, &dst), 0);
	cr_expect_eq(dst.st_mode & 0777, 0750, "dir mode %o", dst.st_mode & 0777);
	json_t *sj = json_loads(saved, 0, NULL);
	cr_expect(json_equal(sj, rep), "the saved report differs from the printed one");
	json_decref(sj);
	free(saved);
	unlink(path);
	rmdir(dir);
	rmdir(state);
	json_decref(rep);
	dg_run_free(&r);
	assert_no_stale("audit");
}

Test(audit, example_policy_contains_everything, .timeout = 330)
{
	char *policy = dg_test_write_tmp("policy.json", example_policy);
	char state[] = "/tmp/dg-test-XXXXXX";
	cr_assert(mkdtemp(state));
	struct dg_run r;
	audit_run(ARGV("--json", "--policy", policy, "--state-dir", state), &r);
	char sha[65];
	sha256_hex(example_policy, strlen(example_policy), sha);
	json_t *rep = check_shape(r.out, r.exit_code, sha, "browser");
	expect_clean(&r, rep);
	expect_kernel_aware(rep);
	/* Its egress allows example.com:443 and *.wikipedia.org:443: both are
	 * reported as allowed; what it does not allow is refused. */
	cr_expect_str_eq(outcome_of(rep, "egress.proxy-allowed-0"), "allowed");
	cr_expect_str_eq(outcome_of(rep, "egress.proxy-allowed-1"), "allowed");
	cr_expect(strstr(json_string_value(json_object_get(finding(rep, "egress.proxy-allowed-0"),
							  "tried")),
			 "example.com:443"));
	cr_expect_str_eq(outcome_of(rep, "egress.proxy-denied-connect"), "contained");
	cr_expect_str_eq(outcome_of(rep, "egress.proxy-metadata"), "contained");
	/* Its limits are the ones probed. */
	cr_expect(strstr(json_string_value(json_object_get(finding(rep, "resources.scratch"),
							  "tried")),
			 "512 MiB"));
	char path[256];
	snprintf(path, sizeof(path), "%s/audit/%s.json", state, sha);
	cr_expect_eq(access(path, R_OK), 0, "no %s", path);
	unlink(path);
	snprintf(path, sizeof(path), "%s/audit", state);
	rmdir(path);
	rmdir(state);
	json_decref(rep);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_stale("audit");
}

/* The text report: one line per finding, EDGE OUTCOME what — evidence, and
 * the summary line; where the host's kernel refuses int 0x80 itself, the
 * summary counts it as contained by the kernel and a line names it. */
Test(audit, text_report_xterm, .timeout = 300)
{
	struct dg_run r;
	audit_run(ARGV("--profile", "xterm"), &r);
	cr_expect_eq(r.exit_code, 0, "audit exit %d", r.exit_code);
	char tok[64];
	host_token(ARGV("int80"), "int80", tok, sizeof(tok));
	const char *named = strstr(r.out, "\ncontained by the kernel, not by deskgate");
	if (!strncmp(tok, "SIG", 3)) {
		cr_expect(strstr(r.out, " contained by the kernel, "), "no count in the summary");
		cr_expect(named && strstr(named, "isolation.int80"),
			  "the report does not name isolation.int80 as refused by the kernel");
		cr_expect(strstr(r.out, "\nisolation    contained-by-kernel  a system call through "
				 "int 0x80"), "no contained-by-kernel line for int 0x80");
	} else {
		cr_expect(!named || !strstr(named, "isolation.int80"),
			  "int 0x80 runs on this host, yet the report says the kernel refused it");
	}
	int lines = 0;
	for (const char *p = r.out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		for (int k = 0; k < 5; k++)
			if (!strncmp(p, edges[k], strlen(edges[k])))
				lines++;
	}
	cr_expect_geq(lines, 40, "%d finding lines", lines);
	cr_expect(strstr(r.out, " probes: ") && strstr(r.out, " contained, ") &&
			  strstr(r.out, " ran as allowed, ") && strstr(r.out, " leaked"),
		  "no summary line");
	cr_expect(strstr(r.out, "\u2014 "), "no evidence separator");
	dg_run_free(&r);
	assert_no_stale("audit");
}

/* A probe that reports a leak for everything: the audit must say leaked and
 * exit 1. (It is a shell script: the kernel runs it from the memfd through
 * /bin/sh like the real probe, and it answers the setup steps as the real
 * probe does.) */
static const char fake_probe[] =
	"#!/bin/sh\n"
	"case \"$1\" in\n"
	"hello) echo \"HELLO uid=$(id -u)\" ;;\n"
	"mark) : > \"$2\" && echo \"MARKED $2\" ;;\n"
	"*) echo \"LEAKED fake probe: $1 reached its sink\"; exit 1 ;;\n"
	"esac\n";

Test(audit, a_leak_is_reported, .timeout = 300)
{
	char *probe = dg_test_write_tmp("fake-probe", fake_probe);
	char state[] = "/tmp/dg-test-XXXXXX";
	cr_assert(mkdtemp(state));
	struct dg_run r;
	audit_run(ARGV("--json", "--profile", "xterm", "--probe", probe, "--state-dir", state),
		  &r);
	char sha[65];
	sha256_hex(BUILTIN_POLICY_TEXT, strlen(BUILTIN_POLICY_TEXT), sha);
	json_t *rep = check_shape(r.out, r.exit_code, sha, "xterm");
	cr_expect_eq(r.exit_code, 1, "want exit 1 on a leak, got %d", r.exit_code);
	cr_expect_str_eq(outcome_of(rep, "egress.direct-outside-v4"), "leaked");
	cr_expect_str_eq(outcome_of(rep, "filesystem.shadow"), "leaked");
	json_int_t leaked =
		json_integer_value(json_object_get(json_object_get(rep, "summary"), "leaked"));
	cr_expect_gt(leaked, 40);
	char said[96];
	snprintf(said, sizeof(said), "deskgate audit: %lld probe(s) leaked\n", (long long)leaked);
	cr_expect(strstr(r.err, said), "stderr does not say \"%s\": %s", said, r.err);
	/* Even a leaking audit records itself for the web UI. */
	char path[256];
	snprintf(path, sizeof(path), "%s/audit/%s.json", state, sha);
	cr_expect_eq(access(path, R_OK), 0, "no %s", path);
	unlink(path);
	snprintf(path, sizeof(path), "%s/audit", state);
	rmdir(path);
	rmdir(state);
	json_decref(rep);
	dg_run_free(&r);
	dg_test_rm_tmp(probe);
	assert_no_stale("audit");
}

/* A probe that claims the kernel refused everything (KERNEL in the jail):
 * the claim counts only for the probes the audit runs a host control for,
 * and only when that control showed the kernel refusing a call (a RESULT
 * other than "ok"). Its host side (no seccomp filter: /proc/self/status)
 * answers as HOST_RESULT says. */
static char *kernel_claim_probe(const char *host_result)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "#!/bin/sh\n"
		 "case \"$1\" in\n"
		 "hello) echo \"HELLO uid=$(id -u)\" ;;\n"
		 "mark) : > \"$2\" && echo \"MARKED $2\" ;;\n"
		 "daemon) echo \"LEAKED fake daemon\"; exit 1 ;;\n"
		 "*) s=\n"
		 "   while read -r k v; do [ \"$k\" = Seccomp: ] && s=$v; done < /proc/self/status\n"
		 "   if [ \"$s\" = 0 ]; then\n"
		 "     echo \"RESULT fake=%s\"; echo \"LEAKED fake probe on the host: $1\"; exit 1\n"
		 "   fi\n"
		 "   echo \"KERNEL fake probe: the kernel refused $1\"; exit 3 ;;\n"
		 "esac\n",
		 host_result);
	return dg_test_write_tmp("fake-probe", text);
}

Test(audit, a_kernel_claim_needs_the_host_control, .timeout = 300)
{
	static const char *const host_results[] = {"ok", "ENOSYS"};
	for (int k = 0; k < 2; k++) {
		char *probe = kernel_claim_probe(host_results[k]);
		struct dg_run r;
		audit_run(ARGV("--json", "--profile", "xterm", "--probe", probe), &r);
		char sha[65];
		sha256_hex(BUILTIN_POLICY_TEXT, strlen(BUILTIN_POLICY_TEXT), sha);
		json_t *rep = check_shape(r.out, r.exit_code, sha, "xterm");
		cr_expect_eq(r.exit_code, 125, "host %s: exit %d", host_results[k], r.exit_code);
		/* No host control: the claim is an error. */
		json_t *f = finding(rep, "egress.direct-outside-v4");
		cr_assert(f);
		cr_expect_str_eq(json_string_value(json_object_get(f, "outcome")), "error");
		cr_expect(strstr(json_string_value(json_object_get(f, "evidence")),
				 "no host control backs"), "%s",
			  json_string_value(json_object_get(f, "evidence")));
		/* A host control: the claim holds only where it saw a refusal. */
		static const char *const kernel_ids[] = {"isolation.int80", "isolation.kexec",
							 "egress.socket-families",
							 "filesystem.proc-knobs", "credentials.keyrings"};
		for (size_t i = 0; i < sizeof(kernel_ids) / sizeof(kernel_ids[0]); i++) {
			f = finding(rep, kernel_ids[i]);
			cr_assert(f, "no %s", kernel_ids[i]);
			const char *out = json_string_value(json_object_get(f, "outcome"));
			const char *ev = json_string_value(json_object_get(f, "evidence"));
			cr_expect(strstr(json_string_value(json_object_get(f, "control")),
					 "on the host, as root with no filter: LEAKED fake probe on the "
					 "host"), "%s: %s", kernel_ids[i],
				  json_string_value(json_object_get(f, "control")));
			cr_expect(strstr(json_string_value(json_object_get(f, "probe")),
					 k ? "--host-result fake=ENOSYS" : "--host-result fake=ok"),
				  "%s: %s", kernel_ids[i],
				  json_string_value(json_object_get(f, "probe")));
			if (k == 0) {
				cr_expect_str_eq(out, "error", "%s: %s", kernel_ids[i], ev);
				cr_expect(strstr(ev, "the host control did not show the kernel refusing"),
					  "%s: %s", kernel_ids[i], ev);
			} else {
				cr_expect_str_eq(out, "contained-by-kernel", "%s: %s", kernel_ids[i], ev);
			}
		}
		json_t *sum = json_object_get(rep, "summary");
		if (k == 0)
			cr_expect_eq(json_integer_value(json_object_get(sum, "contained_by_kernel")), 0);
		else
			cr_expect_geq(json_integer_value(json_object_get(sum, "contained_by_kernel")), 5);
		json_decref(rep);
		dg_run_free(&r);
		dg_test_rm_tmp(probe);
		assert_no_stale("audit");
	}
}

/* The audit's own bounds: at most DG_AUDIT_ALLOWED_MAX (8) allowed patterns
 * are tried through the proxy (a policy with 9 gets 8 findings), and memory
 * and scratch are pushed past their limits only up to DG_AUDIT_PUSH_MAX_MB
 * (8192 MiB): one MiB more is reported as not checked, saying why. */
Test(audit, audit_bounds, .timeout = 300)
{
	char *policy = dg_test_write_tmp(
		"policy.json",
		"{\"version\": 1, \"default\": \"allow\", \"egress\": {\"allow\": [\"a0.example:443\", "
		"\"a1.example:443\", \"a2.example:443\", \"a3.example:443\", \"a4.example:443\", "
		"\"a5.example:443\", \"a6.example:443\", \"a7.example:443\", \"*.a8.example:443\"]}, "
		"\"limits\": {\"memory_mb\": 8300, \"scratch_mb\": 8193}}");
	struct dg_run r;
	audit_run(ARGV("--json", "--profile", "xterm", "--policy", policy), &r);
	json_t *j = json_loads(r.out, 0, NULL);
	cr_assert(j, "not JSON: %.300s", r.out);
	int allowed = 0;
	size_t i;
	json_t *f;
	json_array_foreach(json_object_get(j, "findings"), i, f)
	{
		const char *id = json_string_value(json_object_get(f, "id"));
		if (!strncmp(id, "egress.proxy-allowed-", 21)) {
			allowed++;
			cr_expect_str_eq(json_string_value(json_object_get(f, "outcome")), "allowed",
					 "%s", id);
		}
	}
	cr_expect_eq(allowed, 8, "%d patterns tried through the proxy", allowed);
	cr_expect(finding(j, "egress.proxy-allowed-7") && !finding(j, "egress.proxy-allowed-8"));
	cr_expect_str_eq(outcome_of(j, "resources.scratch"), "not-checked");
	cr_expect_str_eq(outcome_of(j, "resources.memory"), "not-checked");
	const char *why = json_string_value(json_object_get(finding(j, "resources.scratch"),
							     "evidence"));
	cr_expect(strstr(why, "8193 MiB"), "%s", why);
	json_decref(j);
	dg_run_free(&r);
	dg_test_rm_tmp(policy);
	assert_no_stale("audit");
}

/* The probe binary is read whole, at most 64 MiB (DG_AUDIT_PROBE_MAX): one
 * byte more is refused before any session starts; exactly that much is
 * accepted (and, being no program, fails to run: another message). */
Test(audit, probe_size_limit, .timeout = 300)
{
	char *big = dg_test_write_tmp("probe", "");
	int fd = open(big, O_WRONLY | O_CLOEXEC);
	cr_assert(fd >= 0 && ftruncate(fd, 64 * 1024 * 1024 + 1) == 0);
	struct dg_run r;
	audit_run(ARGV("--profile", "xterm", "--probe", big), &r);
	cr_expect_eq(r.exit_code, 125);
	cr_expect(strstr(r.err, "more than the limit"), "%s", r.err);
	dg_run_free(&r);
	cr_assert(ftruncate(fd, 64 * 1024 * 1024) == 0);
	close(fd);
	audit_run(ARGV("--profile", "xterm", "--probe", big), &r);
	cr_expect_eq(r.exit_code, 125);
	cr_expect(!strstr(r.err, "more than the limit") && strstr(r.err, "did not run"), "%s",
		  r.err);
	dg_run_free(&r);
	dg_test_rm_tmp(big);
	assert_no_stale("audit");
}

Test(audit, usage_errors)
{
	struct dg_run r;
	static const char *const bad[][3] = {
		{"--bogus", NULL, NULL},
		{"--profile", "nope", NULL},
		{"--policy", NULL, NULL},
		{"--policy", "/nonexistent/policy.json", NULL},
		{"extra-argument", NULL, NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[8];
		size_t n = 0;
		argv[n++] = DG_BIN;
		argv[n++] = "audit";
		for (size_t k = 0; k < 3 && bad[i][k]; k++)
			argv[n++] = bad[i][k];
		argv[n] = NULL;
		cr_assert_eq(dg_test_run(argv, NULL, NULL, 0, 30, -1, &r), 0);
		cr_expect_eq(r.exit_code, 2, "%s: exit %d (%s)", argv[2], r.exit_code, r.err);
		cr_expect(strstr(r.err, "deskgate audit"), "%s: %s", argv[2], r.err);
		dg_run_free(&r);
	}
}

Test(audit, cannot_run_without_its_probe, .timeout = 120)
{
	struct dg_run r;
	audit_run(ARGV("--probe", "/nonexistent/deskgate-probe"), &r);
	cr_expect_eq(r.exit_code, 125, "exit %d", r.exit_code);
	cr_expect(strstr(r.err, "/nonexistent/deskgate-probe"), "%s", r.err);
	dg_run_free(&r);
	assert_no_stale("audit");
}

/* ---- the controls of the probes the audit added --------------------------
 *
 * Each runs on the host (as root, DG_PROBE is the same source as
 * deskgate-probe), where what the probe looks for is there: LEAKED. Some
 * also show the probe says CONTAINED where it is not. */

static int host_verdict(const char *const *argv, char *line, size_t len)
{
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(NULL, -1, PROBE_TIMEOUT, argv, &r), 0);
	show_run(argv[0], &r);
	int v = dg_test_verdict(r.out, line, len);
	dg_run_free(&r);
	return v;
}

Test(audit_controls, same_file)
{
	struct stat st;
	cr_assert_eq(lstat("/etc/passwd", &st), 0);
	char id[64], line[4096];
	snprintf(id, sizeof(id), "%u:%u:%llu", major(st.st_dev), minor(st.st_dev),
		 (unsigned long long)st.st_ino);
	control_leaked(NULL, ARGV("same-file", "/etc/passwd", id));
	/* Another file's identity: the probe tells them apart. */
	snprintf(id, sizeof(id), "%u:%u:%llu", major(st.st_dev), minor(st.st_dev),
		 (unsigned long long)st.st_ino + 1);
	cr_expect_eq(host_verdict(ARGV("same-file", "/etc/passwd", id), line, sizeof(line)), 0,
		     "%s", line);
}

Test(audit_controls, ids) { control_leaked(NULL, ARGV("ids", "0x60000000")); }

Test(audit_controls, ns_ids)
{
	struct stat st;
	cr_assert_eq(stat("/proc/self/ns/net", &st), 0);
	char arg[64];
	snprintf(arg, sizeof(arg), "host:net:%llu", (unsigned long long)st.st_ino);
	control_leaked(NULL, ARGV("ns-ids", arg));
}

Test(audit_controls, proc_mem) { control_leaked(NULL, ARGV("proc-mem")); }

/* FNV-1a 64, as the probe and the audit compute it. */
static unsigned long long fnv1a64(const char *p)
{
	unsigned long long h = 0xcbf29ce484222325ull;
	for (; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The audit's env check: a planted value (marker) is a leak wherever it
 * shows; a variable named like one of the host's is printed with the hash
 * of its value (HOSTVAR) for the audit to compare with the host's value. */
Test(audit_controls, env_host_names)
{
	static const char *envp[] = {"PATH=/usr/bin:/bin", "DG_AUDIT_TEST_SECRET=dg-canary-x",
				     NULL};
	control_leaked_env(NULL, envp, -1,
			   ARGV("env", "--allow", "DISPLAY", "--host", "DG_AUDIT_TEST_SECRET",
				"dg-canary-x"));
	struct dg_run r;
	cr_assert_eq(dg_test_probe_host(envp, -1, PROBE_TIMEOUT,
					ARGV("env", "--host", "DG_AUDIT_TEST_SECRET,OTHER"), &r),
		     0);
	char want[128];
	snprintf(want, sizeof(want), "HOSTVAR %016llx environ DG_AUDIT_TEST_SECRET\n",
		 fnv1a64("dg-canary-x"));
	cr_expect(strstr(r.out, want), "no '%s' in:\n%.2000s", want, r.out);
	char line[4096];
	cr_expect_eq(dg_test_verdict(r.out, line, sizeof(line)), 0,
		     "without a marker the probe leaves names to the caller: %s", line);
	dg_run_free(&r);
}

/* A marker daemon on the host, then `alive` finds it. */
Test(audit_controls, alive)
{
	char tag[16];
	snprintf(tag, sizeof(tag), "t%x", (unsigned)getpid() & 0xffffff);
	char line[4096];
	cr_assert_eq(host_verdict(ARGV("daemon", tag, "5", "close"), line, sizeof(line)), 1, "%s",
		     line);
	control_leaked(NULL, ARGV("alive", tag));
}

/* Two spinners' CPU time is added up: above the threshold is a leak. The
 * threshold is low so the control holds on a machine busy with other tests
 * (the audit's own threshold sits halfway between the quota and the
 * spinners' count). */
Test(audit_controls, cpuspin_procs) { control_leaked(NULL, ARGV("cpuspin", "1000", "0.3", "2")); }

/* A one-shot stand-in proxy on the host's loopback: reads a request head
 * and answers with resp. Returns its port; the child exits after one
 * connection or 20 s. */
static int fake_proxy(const char *resp, pid_t *pid)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	cr_assert(s >= 0 && bind(s, (struct sockaddr *)&a, l) == 0 && listen(s, 4) == 0 &&
		  getsockname(s, (struct sockaddr *)&a, &l) == 0);
	*pid = fork();
	cr_assert(*pid >= 0);
	if (*pid == 0) {
		alarm(20);
		int c = accept(s, NULL, NULL);
		char buf[4096];
		size_t got = 0;
		while (c >= 0 && got < sizeof(buf) - 1) {
			ssize_t k = read(c, buf + got, sizeof(buf) - 1 - got);
			if (k <= 0)
				break;
			got += (size_t)k;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n"))
				break;
		}
		if (c >= 0 && write(c, resp, strlen(resp)) < 0)
			_exit(1);
		usleep(200000);
		_exit(0);
	}
	close(s);
	return ntohs(a.sin_port);
}

static int proxy_verdict(const char *resp, const char *method, char *line, size_t len)
{
	pid_t pid;
	char port[16];
	snprintf(port, sizeof(port), "%d", fake_proxy(resp, &pid));
	int v = host_verdict(ARGV("proxy", "127.0.0.1", port, method, "deskgate-audit.invalid:443",
				  "3000"),
			     line, len);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return v;
}

Test(audit_controls, proxy_answers)
{
	char line[4096];
	/* Through: a tunnel, or the proxy looking the name up. */
	cr_expect_eq(proxy_verdict("HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT", line,
				   sizeof(line)),
		     1, "%s", line);
	cr_expect_eq(proxy_verdict("HTTP/1.1 502 Bad Gateway\r\nX-Deskgate-Rule: egress.resolve\r\n"
				   "Content-Length: 10\r\n\r\nno lookup\n",
				   "GET", line, sizeof(line)),
		     1, "%s", line);
	/* Refused by a rule. */
	cr_expect_eq(proxy_verdict("HTTP/1.1 403 Forbidden\r\nX-Deskgate-Rule: egress.default\r\n"
				   "Content-Length: 9\r\n\r\nrefused.\n",
				   "CONNECT", line, sizeof(line)),
		     0, "%s", line);
	cr_expect(strstr(line, "rule egress.default"), "%s", line);
}

/* A stand-in X server on the host's abstract socket of a free display: it
 * answers the connection setup with one screen of 777x555. */
static void fake_x_reply(int c)
{
	uint8_t req[12];
	if (read(c, req, sizeof(req)) != (ssize_t)sizeof(req))
		return;
	static const char vendor[] = "dgtest!!"; /* 8 bytes: no padding */
	uint8_t r[8 + 32 + 8 + 8 + 40];
	memset(r, 0, sizeof(r));
	r[0] = 1;
	r[2] = 11;
	size_t extra = sizeof(r) - 8;
	r[6] = (uint8_t)(extra / 4);
	r[24] = 8;    /* vendor length */
	r[28] = 1;    /* screens */
	r[29] = 1;    /* formats */
	memcpy(r + 40, vendor, 8);
	size_t screen = 40 + 8 + 8;
	r[screen + 20] = 777 & 0xff;
	r[screen + 21] = 777 >> 8;
	r[screen + 22] = 555 & 0xff;
	r[screen + 23] = 555 >> 8;
	if (write(c, r, sizeof(r)) < 0)
		return;
}

Test(audit_controls, x11)
{
	int s = -1, display = -1;
	for (int n = 9; n >= 5 && s < 0; n--) {
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		char name[64];
		snprintf(name, sizeof(name), "/tmp/.X11-unix/X%d", n);
		memcpy(un.sun_path + 1, name, strlen(name));
		s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (bind(s, (struct sockaddr *)&un,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) != 0 ||
		    listen(s, 4) != 0) {
			close(s);
			s = -1;
		} else {
			display = n;
		}
	}
	cr_assert(s >= 0, "no free abstract X socket among displays :5..:9");
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		alarm(20);
		for (;;) {
			int c = accept(s, NULL, NULL);
			if (c < 0)
				_exit(0);
			fake_x_reply(c);
			close(c);
		}
	}
	close(s);
	char line[4096];
	int v = host_verdict(ARGV("x11", "777x555"), line, sizeof(line));
	cr_expect_eq(v, 1, "display :%d: %s", display, line);
	cr_expect(strstr(line, "screen 777x555"), "%s", line);
	/* Another size is somebody else's server: noted, not a leak. */
	v = host_verdict(ARGV("x11", "1x1"), line, sizeof(line));
	cr_expect_eq(v, 0, "%s", line);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}
