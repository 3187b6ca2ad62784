/* `deskgate audit`: see cli/cli.h for the contract.
 *
 * The session is started in-process by the local-session helper
 * (cli/cli-session.c), as `shot`, `desktop` and `test --live` start theirs:
 * an egress proxy, the desktop with its egress listener handed to the
 * proxy, its worker; plus the other session (a bare desktop).
 *
 * How the probe gets into the jail. The jail sees no host file but the
 * read-only system directories, so the probe binary (deskgate-probe, built
 * beside deskgate) is copied into a memfd, sealed against writes, growth and
 * shrinking, handed to dg_jail_enter as descriptor 3 and executed as
 * "/proc/self/fd/3". That path resolves in the jail's own /proc to the
 * memfd itself, which lives on the kernel's internal shm mount (so the
 * noexec of the jail's /proc does not apply); execve is in the jail's
 * seccomp allowlist; and the probe closes the descriptor before probing
 * (probe.c, close_own_image), so it is not mistaken for a leaked one.
 * Nothing is written to a filesystem the jail could see, and the seals keep
 * one probe run from changing what the next run executes. The memfd is
 * close-on-exec here, so no other child of the audit inherits it.
 *
 * Each probe runs as an exec action would: joined to the jail's namespaces,
 * cgroup, user, rlimits and seccomp filter, with the proxy variables the
 * spawner gives exec'd programs. Its verdict line (CONTAINED/LEAKED/ERROR/
 * KERNEL, cli/probe.c) becomes the finding. Some probes have a
 * control run in the other session, where they must see what they look for
 * (its X server, its processes, its files): a probe that could not see a
 * leak there proves nothing here, and its finding becomes an error. The
 * probes whose calls depend on the kernel (kexec, x32, int 0x80, ...) have
 * a control run on the host instead (dg_audit_probe_kernel), whose results the jail's
 * run compares its own with: a call that ended in the jail exactly as the
 * host's kernel ends it, refused, is reported as contained by the kernel,
 * never as leaked, nor as deskgate's containment.
 */

#include "cli/cli-audit-priv.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* Ends the findings that run (ms < 0: their time is up to now) and, with
 * --progress, says so. Findings run one after the other (or a few
 * together, from one run), so they end when the next begins or the report
 * is made. */
void dg_audit_finish_open(struct audit *au)
{
	long long now = dg_now_ms() - au->t0_ms;
	for (int i = 0; i < au->n; i++) {
		struct finding *f = &au->f[i];
		if (f->ms >= 0)
			continue;
		if (f->with_next && i == au->n - 1) {
			f->with_next = false; /* it ends with the one added now */
			continue;
		}
		f->ms = now - f->start_ms;
		if (au->progress)
			fprintf(stderr, "deskgate audit: %7.1f s  %-36s %s (%.1f s)\n",
				(double)now / 1000.0, f->id, dg_audit_outcome_name(f->outcome),
				(double)f->ms / 1000.0);
	}
}

/* A new finding, or NULL past DG_AUDIT_FINDINGS_MAX (a bug: the battery is
 * fixed and smaller). */
struct finding *dg_audit_add(struct audit *au, const char *edge, const char *id, const char *tried,
			     const char *sink)
{
	if (au->n >= DG_AUDIT_FINDINGS_MAX) {
		fprintf(stderr, "deskgate audit: more than %d findings; %s dropped\n",
			DG_AUDIT_FINDINGS_MAX, id);
		return NULL;
	}
	dg_audit_finish_open(au);
	struct finding *f = &au->f[au->n++];
	memset(f, 0, sizeof(*f));
	f->start_ms = dg_now_ms() - au->t0_ms;
	f->ms = -1;
	f->edge = edge;
	fmt(f->id, sizeof(f->id), "%s.%s", edge, id);
	fmt(f->tried, sizeof(f->tried), "%s", tried);
	fmt(f->sink, sizeof(f->sink), "%s", sink);
	f->outcome = OUT_ERROR;
	return f;
}

/* ---- setup and teardown ---------------------------------------------------- */

/* Copies the probe into a sealed memfd (see the top of this file). */
static int load_probe(struct audit *au, struct dg_err *err)
{
	char self[PATH_MAX];
	char path[PATH_MAX];
	if (au->probe_path) {
		fmt(path, sizeof(path), "%s", au->probe_path);
	} else {
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (k <= 0)
			return dg_err_set(err, -errno, "cannot read /proc/self/exe: %s",
					  strerror(errno));
		self[k] = '\0';
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = '\0';
		fmt(path, sizeof(path), "%s/%s", self, DG_AUDIT_PROBE_NAME);
	}
	if (!realpath(path, au->probe_real))
		fmt(au->probe_real, sizeof(au->probe_real), "%s", path);
	char *buf;
	size_t len;
	struct stat st;
	int r = dg_read_file("probe", path, DG_AUDIT_PROBE_MAX, false, &buf, &len, &st, err);
	if (r) {
		if (r == -ENOENT)
			return dg_err_set(err, r, "no probe at %s: build the deskgate-probe target "
					  "(it is built beside deskgate), or give --probe PATH", path);
		return r;
	}
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(buf, len, h);
	dg_hex_encode(h, DG_SHA256_LEN, au->probe_hex);
	int fd = memfd_create(DG_AUDIT_PROBE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (fd < 0 && errno == EINVAL) /* a kernel before MFD_EXEC (6.3) */
		fd = memfd_create(DG_AUDIT_PROBE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int e = errno;
		free(buf);
		return dg_err_set(err, -e, "memfd_create: %s%s", strerror(e),
				  e == EACCES ? " (vm.memfd_noexec forbids executable memfds)" : "");
	}
	size_t off = 0;
	while (off < len) {
		ssize_t k = write(fd, buf + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			int e = errno;
			free(buf);
			close(fd);
			return dg_err_set(err, -e, "writing the probe into a memfd: %s", strerror(e));
		}
		off += (size_t)k;
	}
	free(buf);
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
		int e = errno;
		close(fd);
		return dg_err_set(err, -e, "sealing the probe's memfd: %s", strerror(e));
	}
	au->probe_fd = fd;
	return 0;
}

/* What the host offers for the jail to find: a loopback listener, an
 * abstract socket, a world-readable file, a canary in our environment. */
static int host_bait(struct audit *au, struct dg_err *err)
{
	unsigned char rnd[4];
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return dg_err_set(err, -EIO, "getrandom: %s", strerror(errno));
	dg_hex_encode(rnd, sizeof(rnd), au->tag);
	au->tcp_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(in);
	if (au->tcp_fd < 0 || bind(au->tcp_fd, (struct sockaddr *)&in, l) != 0 ||
	    listen(au->tcp_fd, 8) != 0 || getsockname(au->tcp_fd, (struct sockaddr *)&in, &l) != 0)
		return dg_err_set(err, -errno, "a listener on 127.0.0.1: %s", strerror(errno));
	au->tcp_port = ntohs(in.sin_port);
	fmt(au->abs_name, sizeof(au->abs_name), "deskgate-audit-%s", au->tag);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	memcpy(un.sun_path + 1, au->abs_name, strlen(au->abs_name));
	au->abs_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (au->abs_fd < 0 ||
	    bind(au->abs_fd, (struct sockaddr *)&un,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(au->abs_name))) !=
		    0 ||
	    listen(au->abs_fd, 8) != 0)
		return dg_err_set(err, -errno, "an abstract socket: %s", strerror(errno));
	fmt(au->tmp_dir, sizeof(au->tmp_dir), "/tmp/deskgate-audit-XXXXXX");
	if (!mkdtemp(au->tmp_dir)) {
		au->tmp_dir[0] = '\0';
		return dg_err_set(err, -errno, "mkdtemp in /tmp: %s", strerror(errno));
	}
	chmod(au->tmp_dir, 0755);
	fmt(au->tmp_file, sizeof(au->tmp_file), "%s/marker", au->tmp_dir);
	int fd = open(au->tmp_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return dg_err_set(err, -errno, "%s: %s", au->tmp_file, strerror(errno));
	static const char text[] = "deskgate audit marker: the jail must not see this file\n";
	ssize_t w = write(fd, text, sizeof(text) - 1);
	close(fd);
	if (w != (ssize_t)sizeof(text) - 1)
		return dg_err_set(err, -EIO, "%s: short write", au->tmp_file);
	fmt(au->canary, sizeof(au->canary), "deskgate-audit-canary-%s", au->tag);
	if (setenv("DESKGATE_AUDIT_CANARY", au->canary, 1) != 0)
		return dg_err_set(err, -errno, "setenv: %s", strerror(errno));
	return 0;
}

/* A probe that cannot even say hello means the delivery itself fails:
 * nothing after it would mean anything. */
static int check_delivery(struct audit *au, struct dg_err *err)
{
	struct run *hello = malloc(sizeof(*hello));
	if (!hello)
		return dg_err_set(err, -ENOMEM, "out of memory");
	struct dg_err he = {{0}};
	int r = dg_audit_run_probe(au, &au->local.desktop, ARGS("hello"), DG_AUDIT_PROBE_MS, hello,
				   &he);
	if (r != 0)
		dg_err_set(err, r, "the probe %s did not run in the jail: %s", au->probe_real, he.msg);
	else if (strncmp(hello->out, "HELLO ", 6) != 0)
		r = dg_err_set(err, -EIO, "the probe %s did not run in the jail (exit %d): %.300s",
			       au->probe_real, hello->exit_code, hello->err);
	free(hello);
	return r;
}

/* Starts the proxy, the audited desktop and its worker, and the other
 * session with its markers. */
static int start_sessions(struct audit *au, struct dg_err *err)
{
	struct dg_cli_session_spec spec = {.policy = &au->policy, .profile = au->profile,
					   .egress = true, .id = DG_AUDIT_SESSION};
	int r = dg_cli_session_open(&spec, &au->local, err);
	if (r)
		return r;
	fmt(au->a_source, sizeof(au->a_source), "the audited %s session (slot %u): a program in "
	    "its jail, run as exec actions are", dg_profile_name(au->profile),
	    au->local.desktop.jail.slot);
	if ((r = check_delivery(au, err)))
		return r;
	struct dg_desktop_spec other = {.profile = DG_PROFILE_XTERM,
					.width = DG_AUDIT_OTHER_W,
					.height = DG_AUDIT_OTHER_H,
					.limits = &au->policy.limits};
	if ((r = dg_desktop_start(&other, &au->b, err)))
		return r;
	au->b_up = true;
	fmt(au->b_source, sizeof(au->b_source), "the other session (xterm, slot %u)",
	    au->b.jail.slot);
	/* Its markers: a process and a file the audited session must not see. */
	char marker[96], secs[16];
	fmt(marker, sizeof(marker), "/tmp/deskgate-audit-%s", au->tag);
	fmt(secs, sizeof(secs), "%d", DG_AUDIT_MARKER_S);
	struct run *run = malloc(sizeof(*run));
	if (!run)
		return dg_err_set(err, -ENOMEM, "out of memory");
	r = dg_audit_run_probe(au, &au->b, ARGS("mark", marker), DG_AUDIT_PROBE_MS, run, err);
	if (r == 0 && run->exit_code != 0)
		r = dg_err_set(err, -EIO, "marking the other session: %s", run->line);
	if (r == 0)
		r = dg_audit_run_probe(au, &au->b, ARGS("daemon", au->tag, secs, "close"),
				       DG_AUDIT_PROBE_MS, run, err);
	if (r == 0 && run->verdict != 1)
		r = dg_err_set(err, -EIO, "starting the other session's marker process: %s",
			       run->line[0] ? run->line : "no report");
	free(run);
	return r;
}

static void stop_all(struct audit *au)
{
	dg_cli_session_close(&au->local);
	if (au->b_up)
		dg_desktop_destroy(&au->b);
	au->b_up = false;
	if (au->probe_fd >= 0)
		close(au->probe_fd);
	if (au->tcp_fd >= 0)
		close(au->tcp_fd);
	if (au->abs_fd >= 0)
		close(au->abs_fd);
	au->probe_fd = au->tcp_fd = au->abs_fd = -1;
	if (au->tmp_file[0])
		unlink(au->tmp_file);
	if (au->tmp_dir[0])
		rmdir(au->tmp_dir);
	au->tmp_file[0] = au->tmp_dir[0] = '\0';
}

/* ---- the command ---------------------------------------------------------------- */

static const char *const audit_profiles[] = {"xterm", "browser", NULL};

struct audit_args {
	const char *policy, *profile, *state_dir, *recordings, *probe;
	bool json, progress;
};

static const struct dg_opt audit_opts[] = {
	DG_OPT_VALUE_(struct audit_args, policy, "--policy", "FILE", 0,
		      "the policy to audit (default: the built-in policy)"),
	DG_OPT_CHOICE_(struct audit_args, profile, "--profile", "xterm|browser", audit_profiles, 0,
		       "the audited session's profile (default browser)"),
	DG_OPT_SWITCH_(struct audit_args, json, "--json", "print one JSON object instead of lines"),
	DG_OPT_SWITCH_(struct audit_args, progress, "--progress",
		       "say on stderr what runs as it ends, with the time it took"),
	DG_OPT_VALUE_(struct audit_args, state_dir, "--state-dir", "DIR", 0,
		      "the gateway's state directory: probed, and where the result is kept "
		      "(default /var/lib/deskgate when it exists)"),
	DG_OPT_VALUE_(struct audit_args, recordings, "--recordings", "DIR", 0,
		      "the recordings directory to probe (default STATE_DIR/recordings when it "
		      "exists)"),
	DG_OPT_VALUE_(struct audit_args, probe, "--probe", "PATH", 0,
		      "the probe binary to run in the jail (default: deskgate-probe beside "
		      "deskgate)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_audit_cmd = {
	.name = "audit",
	.summary = "Run the containment probes inside a fresh session under the policy; one "
		   "finding per probe.",
	.details = "exit status: 0 nothing leaked and every probe ran; 1 something leaked;\n"
		   "2 on a usage error or a policy that does not load; 125 when the audit or a\n"
		   "probe could not run. Needs root.\n",
	.doc = "docs/audit.md",
	.opts = audit_opts,
};

/* Returns -1 to go on, else the exit status. */
static int parse_args(struct audit *au, int argc, char **argv)
{
	struct audit_args a = {0};
	int rc = dg_opt_handle(&dg_audit_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	au->json = a.json;
	au->progress = a.progress;
	au->policy_path = a.policy;
	au->state_dir = a.state_dir;
	au->state_dir_given = a.state_dir != NULL;
	au->recordings = a.recordings;
	au->probe_path = a.probe;
	au->profile = DG_PROFILE_BROWSER;
	if (a.profile && dg_profile_parse(a.profile, &au->profile) != 0)
		return dg_opt_usage_error(&dg_audit_cmd, "--profile must be xterm or browser, not \"%s\"",
					  a.profile);
	return -1;
}

/* The default state dir when it exists, and the recordings under it. */
static void default_dirs(struct audit *au)
{
	struct stat st;
	if (!au->state_dir && stat(DG_AUDIT_STATE_DEFAULT, &st) == 0 && S_ISDIR(st.st_mode))
		au->state_dir = DG_AUDIT_STATE_DEFAULT;
	static char rec[PATH_MAX];
	if (!au->recordings && au->state_dir) {
		fmt(rec, sizeof(rec), "%s/recordings", au->state_dir);
		if (stat(rec, &st) == 0 && S_ISDIR(st.st_mode))
			au->recordings = rec;
	}
}

int dg_cmd_audit(int argc, char **argv)
{
	struct audit *au = calloc(1, sizeof(*au));
	if (!au) {
		fprintf(stderr, "deskgate audit: out of memory\n");
		return DG_EXIT_FAILED;
	}
	au->probe_fd = au->tcp_fd = au->abs_fd = -1;
	au->t0_ms = dg_now_ms();
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(au->started, sizeof(au->started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	int code = parse_args(au, argc, argv);
	if (code >= 0) {
		free(au);
		return code;
	}
	struct dg_err err = {{0}};
	if (dg_gw_policy_load(au->policy_path, &au->policy, &au->policy_text, &au->policy_len,
			      &err) != 0) {
		fprintf(stderr, "deskgate audit: %s\n", err.msg);
		free(au);
		return DG_EXIT_USAGE;
	}
	au->policy_loaded = true;
	unsigned char h[DG_SHA256_LEN];
	dg_sha256(au->policy_text, au->policy_len, h);
	dg_hex_encode(h, DG_SHA256_LEN, au->policy_hex);
	default_dirs(au);
	au->f = calloc(DG_AUDIT_FINDINGS_MAX, sizeof(*au->f));
	if (!au->f) {
		dg_err_set(&err, -ENOMEM, "out of memory");
		goto failed;
	}
	if (geteuid() != 0) {
		dg_err_set(&err, -EPERM, "must run as root: it starts a session's jails, its proxy "
			   "and its worker, as the gateway's spawner does");
		goto failed;
	}
	struct dg_err e2 = {{0}};
	if (dg_jail_cleanup_stale(&e2) < 0)
		fprintf(stderr, "deskgate audit: cleaning up stale jails: %s\n", e2.msg);
	if (load_probe(au, &err) || host_bait(au, &err) || start_sessions(au, &err))
		goto failed;
	au->setup_ms = dg_now_ms() - au->t0_ms;
	if (au->progress)
		fprintf(stderr, "deskgate audit: %7.1f s  the audited and the other session started\n",
			(double)au->setup_ms / 1000.0);
	dg_audit_egress_edge(au);
	dg_audit_filesystem_edge(au);
	dg_audit_credentials_edge(au);
	dg_audit_isolation_edge(au);
	if (au->profile == DG_PROFILE_BROWSER)
		dg_audit_browser_edge(au);
	dg_audit_resources_edge(au);
	dg_audit_finish_open(au);
	stop_all(au);

	struct tally t = dg_audit_tally(au);
	code = t.n[OUT_LEAKED] ? 1 : t.n[OUT_ERROR] ? DG_EXIT_FAILED : 0;
	json_t *rep = dg_audit_report_json(au, code);
	char *text = rep ? json_dumps(rep, JSON_INDENT(2) | JSON_ENSURE_ASCII) : NULL;
	json_decref(rep);
	if (au->json && text)
		printf("%s\n", text);
	else
		dg_audit_report_text(au, stdout);
	fflush(stdout);
	if (!text) {
		fprintf(stderr, "deskgate audit: out of memory for the report\n");
	} else if (au->state_dir) {
		struct dg_err we = {{0}};
		size_t l = strlen(text);
		if (l > DG_AUDIT_STATE_FILE_MAX)
			fprintf(stderr, "deskgate audit: report too large for the state dir\n");
		else if (dg_audit_write_state(au, text, &we) != 0)
			fprintf(stderr, "deskgate audit: %s%s\n", we.msg,
				au->state_dir_given ? "" : " (default state dir; --state-dir DIR "
							   "chooses another)");
	}
	free(text);
	if (t.n[OUT_KERNEL] && au->json) {
		char ids[DG_AUDIT_FINDINGS_MAX * 64];
		dg_audit_kernel_ids(au, ids, sizeof(ids));
		fprintf(stderr, "deskgate audit: %d probe(s) contained by the kernel, not by "
			"deskgate: %s\n", t.n[OUT_KERNEL], ids);
	}
	if (t.n[OUT_LEAKED])
		fprintf(stderr, "deskgate audit: %d probe(s) leaked\n", t.n[OUT_LEAKED]);
	else if (t.n[OUT_ERROR])
		fprintf(stderr, "deskgate audit: %d probe(s) could not run: the audit is "
			"incomplete\n", t.n[OUT_ERROR]);
	goto out;
failed:
	fprintf(stderr, "deskgate audit: cannot run the audit: %s\n", err.msg);
	stop_all(au);
	code = DG_EXIT_FAILED;
out:
	if (au->policy_loaded)
		dg_policy_free(&au->policy);
	free(au->policy_text);
	free(au->f);
	free(au);
	return code;
}
