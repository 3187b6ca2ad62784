/* `deskgate audit`, running the probes: keeping the sessions alive meanwhile,
 * one probe in a jail or on the host, its finding with its control, and the
 * host facts handed to the probes (see cli-audit.c). */

#include "cli/cli-audit-priv.h"

/* What exec'd programs get (the spawner's exec action gives the same). */
static const char *const probe_env[] = {
	"http_proxy=" DG_JAIL_EGRESS_URL, "HTTP_PROXY=" DG_JAIL_EGRESS_URL,
	"https_proxy=" DG_JAIL_EGRESS_URL, "HTTPS_PROXY=" DG_JAIL_EGRESS_URL, NULL};
/* ---- keeping the session alive while probes run --------------------------- */

/* Answers the worker's held browser requests under the policy (as the
 * gateway does) and drops its events and the proxy's: nothing must back up
 * while the probes run. A channel that breaks is stopped and reported. */
static void pump(struct audit *au)
{
	struct dg_err err = {{0}};
	while (au->local.worker_up) {
		uint32_t type;
		const uint8_t *data;
		size_t len;
		int r = dg_worker_recv(&au->local.worker, &type, &data, &len, &err);
		if (r == 1 && type == DG_MSG_REQUEST) {
			struct dg_decision d;
			r = dg_worker_answer_request(au->local.worker.ctl, &au->policy, data, len, &d, NULL,
						     &err);
			if (r == 0)
				continue;
		}
		if (r == 1)
			continue;
		if (r < 0) {
			fprintf(stderr, "deskgate audit: the worker's channel broke: %s\n", err.msg);
			dg_worker_stop(&au->local.worker);
			au->local.worker_up = false;
		}
		break;
	}
	while (au->local.egress_up) {
		json_t *ev = NULL;
		int r = dg_egress_recv(&au->local.egress, &ev, &err);
		json_decref(ev);
		if (r == 1)
			continue;
		if (r < 0) {
			fprintf(stderr, "deskgate audit: the egress proxy's channel broke: %s\n",
				err.msg);
			dg_egress_stop(&au->local.egress);
			au->local.egress_up = false;
		}
		break;
	}
}

/* ---- running one probe ----------------------------------------------------- */

/* Reads what is there into buf (at most DG_AUDIT_OUT_MAX kept, the rest
 * drained); closes *fd at EOF. */
static void drain(int *fd, char *buf, size_t *len)
{
	char tmp[16384];
	ssize_t k = read(*fd, tmp, sizeof(tmp));
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (k <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	size_t n = (size_t)k;
	if (*len + n > DG_AUDIT_OUT_MAX)
		n = DG_AUDIT_OUT_MAX - *len;
	memcpy(buf + *len, tmp, n);
	*len += n;
	buf[*len] = '\0';
}

/* The probe's verdict words, by verdict number (struct run). */
static const char *const verdict_words[] = {"CONTAINED", "LEAKED", "ERROR", "KERNEL"};

/* The last verdict line of text: 0 CONTAINED, 1 LEAKED, 2 ERROR, 3 KERNEL,
 * -1 none; its evidence copied into line. */
static int find_verdict(const char *text, char *line, size_t len)
{
	static const char *const words[] = {"CONTAINED ", "LEAKED ", "ERROR ", "KERNEL "};
	int v = -1;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		for (int i = 0; i < 4; i++) {
			size_t wl = strlen(words[i]);
			if (strncmp(p, words[i], wl) == 0) {
				size_t l = strcspn(p + wl, "\n");
				fmt(line, len, "%.*s", (int)l, p + wl);
				v = i;
			}
		}
	}
	return v;
}

/* The probe's argv (DG_AUDIT_PROBE_EXE, then args) in argv (room for
 * DG_AUDIT_ARGS_MAX + 2), and its two output pipes. Returns 0, or a
 * negative errno (err says why; nothing is left open). */
static int run_prepare(const char *const *args, const char **argv, int out[2], int errp[2],
		       struct dg_err *err)
{
	size_t n = 0;
	argv[n++] = DG_AUDIT_PROBE_EXE;
	for (size_t i = 0; args[i]; i++) {
		if (n > DG_AUDIT_ARGS_MAX)
			return dg_err_set(err, -E2BIG, "more than %d probe arguments",
					  DG_AUDIT_ARGS_MAX);
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC) != 0)
		return dg_err_set(err, -errno, "pipe: %s", strerror(errno));
	if (pipe2(errp, O_CLOEXEC) != 0) {
		int e = errno;
		close(out[0]);
		close(out[1]);
		return dg_err_set(err, -e, "pipe: %s", strerror(e));
	}
	return 0;
}

/* Reads the outputs fo and fe of the probe run by process sup into r until
 * both end and sup is reaped, keeping the session alive meanwhile (pump);
 * at the deadline (timeout_ms) sends SIGTERM to kill_target (a pid, or a
 * process group as -pgid), SIGKILL DG_AUDIT_KILL_GRACE_MS later. Closes fo
 * and fe; fills the exit code and the verdict. */
static void run_collect(struct audit *au, pid_t sup, pid_t kill_target, int fo, int fe,
			int timeout_ms, struct run *r)
{
	long long deadline = dg_now_ms() + timeout_ms;
	bool termed = false, reaped = false;
	int status = 0;
	while (!reaped || fo >= 0 || fe >= 0) {
		long long now = dg_now_ms();
		if (now >= deadline && !termed) {
			r->timed_out = termed = true;
			kill(kill_target, SIGTERM);
		}
		if (termed && now >= deadline + DG_AUDIT_KILL_GRACE_MS) {
			if (!reaped)
				kill(kill_target, SIGKILL);
			/* A descendant that left the group may hold the pipes. */
			if (fo >= 0)
				close(fo);
			if (fe >= 0)
				close(fe);
			fo = fe = -1;
		}
		if (!reaped && waitpid(sup, &status, WNOHANG) == sup)
			reaped = true;
		if (reaped && fo < 0 && fe < 0)
			break;
		struct pollfd p[4] = {{fo, POLLIN, 0},
				      {fe, POLLIN, 0},
				      {au->local.worker_up ? au->local.worker.ctl : -1, POLLIN, 0},
				      {au->local.egress_up ? au->local.egress.fd : -1, POLLIN, 0}};
		long long left = (termed ? deadline + DG_AUDIT_KILL_GRACE_MS : deadline) - now;
		int wait = reaped ? (int)(left > 0 ? left : 0) : 50; /* reaping is polled */
		if (poll(p, 4, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
			break;
		if (fo >= 0 && p[0].revents)
			drain(&fo, r->out, &r->out_len);
		if (fe >= 0 && p[1].revents)
			drain(&fe, r->err, &r->err_len);
		if (p[2].revents || p[3].revents)
			pump(au);
	}
	if (fo >= 0)
		close(fo);
	if (fe >= 0)
		close(fe);
	if (!reaped) {
		kill(kill_target, SIGKILL);
		waitpid(sup, &status, 0);
	}
	r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	r->verdict = find_verdict(r->out, r->line, sizeof(r->line));
	if (r->verdict < 0)
		r->verdict = find_verdict(r->err, r->line, sizeof(r->line));
}

/* Runs the probe with args inside desktop d's jail, as an exec action runs,
 * bounded by timeout_ms. Returns 0 with r filled (whatever the probe said),
 * or a negative errno when it could not be started (err says why). */
/* Runs the probe with args in d's jail as the exec action runs programs,
 * under the policy's limits; with open_desktop, with limits.exec_desktop
 * true whatever the policy says (the controls that must see a desktop). */
static int run_probe_as(struct audit *au, struct dg_desktop *d, const char *const *args,
			int timeout_ms, bool open_desktop, struct run *r, struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	r->verdict = -1;
	const char *argv[DG_AUDIT_ARGS_MAX + 2];
	int out[2], errp[2];
	int rc = run_prepare(args, argv, out, errp, err);
	if (rc)
		return rc;
	int pass[1] = {au->probe_fd};
	struct dg_jail_prog prog = {.argv = argv, .stdin_fd = -1, .stdout_fd = out[1],
				    .stderr_fd = errp[1], .pass_fds = pass, .n_pass_fds = 1,
				    .env_extra = probe_env};
	pid_t sup;
	struct dg_limits lim = au->policy.limits;
	if (open_desktop)
		lim.exec_desktop = 1;
	rc = dg_jail_enter(&d->jail, &prog, &lim, &sup, err);
	close(out[1]);
	close(errp[1]);
	if (rc) {
		close(out[0]);
		close(errp[0]);
		return rc;
	}
	/* SIGTERM to the supervisor kills the probe's process group. */
	run_collect(au, sup, sup, out[0], errp[0], timeout_ms, r);
	return 0;
}

int dg_audit_run_probe(struct audit *au, struct dg_desktop *d, const char *const *args,
		       int timeout_ms, struct run *r, struct dg_err *err)
{
	return run_probe_as(au, d, args, timeout_ms, false, r, err);
}

/* Where a control runs: the other session, or the audited one with its
 * desktop opened to exec (DG_AUDIT_CONTROL_SELF). Either way the desktop is
 * open to the control: a control must see what it looks for (its own X
 * server, its own marker process), which exec does not by default. */
static struct dg_desktop *control_desktop(struct audit *au, const char *control, bool *up)
{
	bool self = strcmp(control, DG_AUDIT_CONTROL_SELF) == 0;
	*up = self ? au->local.desktop_up : au->b_up;
	return self ? &au->local.desktop : &au->b;
}

/* Runs the probe with args on the host, as root, in no jail and under no
 * filter: the host control of a probe whose calls depend on the kernel
 * (dg_audit_probe_kernel), which shows what this kernel alone answers. It is the
 * audit's own probe (the sealed memfd, as descriptor 3 executed as
 * DG_AUDIT_PROBE_EXE, as in the jail), with stdin /dev/null, no environment,
 * no other descriptor, in a process group of its own (killed whole at the
 * deadline, timeout_ms). Returns 0 with r filled, or a negative errno. */
static int run_host(struct audit *au, const char *const *args, int timeout_ms, struct run *r,
		    struct dg_err *err)
{
	memset(r, 0, sizeof(*r));
	r->exit_code = -1;
	r->verdict = -1;
	const char *argv[DG_AUDIT_ARGS_MAX + 2];
	int out[2], errp[2];
	int rc = run_prepare(args, argv, out, errp, err);
	if (rc)
		return rc;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		static char *const envp[] = {NULL};
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (setpgid(0, 0) != 0 || null < 0 || dup2(null, 0) != 0 || dup2(out[1], 1) != 1 ||
		    dup2(errp[1], 2) != 2 ||
		    (au->probe_fd == 3 ? fcntl(3, F_SETFD, 0) : dup2(au->probe_fd, 3)) < 0 ||
		    syscall(SYS_close_range, 4, ~0u, 0) != 0)
			_exit(126);
		execve(DG_AUDIT_PROBE_EXE, (char *const *)argv, envp);
		_exit(127);
	}
	int e = errno;
	if (pid > 0)
		setpgid(pid, pid); /* also here: the deadline's kill must find the group */
	close(out[1]);
	close(errp[1]);
	if (pid < 0) {
		close(out[0]);
		close(errp[0]);
		return dg_err_set(err, -e, "fork: %s", strerror(e));
	}
	run_collect(au, pid, -pid, out[0], errp[0], timeout_ms, r);
	return 0;
}

/* Joins a probe's arguments into its command line, for the report. */
void dg_audit_command_line(const char *const *args, char *buf, size_t len)
{
	fmt(buf, len, "%s", DG_AUDIT_PROBE_NAME);
	for (size_t i = 0; args[i]; i++) {
		size_t l = strlen(buf);
		fmt(buf + l, len - l, " %s", args[i]);
	}
}

/* What a run that gave no usable verdict shows: the deadline, the exit and
 * the tail of its stderr. */
void dg_audit_describe_failure(const struct run *r, char *buf, size_t len)
{
	const char *tail = r->err;
	if (r->err_len > 300)
		tail = r->err + r->err_len - 300;
	if (r->verdict == 2)
		fmt(buf, len, "the probe could not run: %s", r->line);
	else if (r->verdict == 3)
		fmt(buf, len, "the probe says the kernel refused it, but no host control backs that "
		    "for this probe: %s", r->line);
	else if (r->timed_out)
		fmt(buf, len, "no verdict before the deadline (killed); stderr: %s",
		    tail[0] ? tail : "-");
	else
		fmt(buf, len, "no verdict line (exit %d); stderr: %s", r->exit_code,
		    tail[0] ? tail : "-");
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
}

/* ---- findings from probes -------------------------------------------------- */

/* Runs one probe in the audited session and records its finding. With
 * control non-NULL, the same arguments run in the other session first, where
 * the probe must report LEAKED (it sees its own X server, processes, files);
 * otherwise the probe cannot tell and the finding is an error. judge, when
 * not NULL, has the last word (see judge_fn). Returns the finding (NULL past
 * the cap). */
struct finding *dg_audit_probe_judged(struct audit *au, const char *edge, const char *id,
				      const char *tried, const char *sink, enum expect expect,
				      const char *control, int timeout_ms, const char *const *args,
				      judge_fn judge)
{
	struct finding *f = dg_audit_add(au, edge, id, tried, sink);
	if (!f)
		return NULL;
	dg_audit_command_line(args, f->probe, sizeof(f->probe));
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	if (!r) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		return f;
	}
	struct dg_err err = {{0}};
	if (control) {
		bool up;
		struct dg_desktop *cd = control_desktop(au, control, &up);
		if (!up || run_probe_as(au, cd, args, timeout_ms, true, r, &err) != 0) {
			fmt(f->evidence, sizeof(f->evidence), "the control in %s could not run: %s",
			    control, up ? err.msg : "it is not running");
			free(r);
			return f;
		}
		if (r->verdict != 1) {
			char why[DG_AUDIT_EVIDENCE_MAX];
			if (r->verdict == 0)
				fmt(why, sizeof(why), "it reported CONTAINED: %s", r->line);
			else
				dg_audit_describe_failure(r, why, sizeof(why));
			fmt(f->evidence, sizeof(f->evidence),
			    "the control in %s must see what it looks for, and did not, so the "
			    "probe proves nothing here (%s)",
			    control, why);
			free(r);
			return f;
		}
		fmt(f->control, sizeof(f->control), "in %s: %s", control, r->line);
	}
	if (!au->local.desktop_up ||
	    dg_audit_run_probe(au, &au->local.desktop, args, timeout_ms, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it in the session: %s",
		    au->local.desktop_up ? err.msg : "the session is not running");
		free(r);
		return f;
	}
	if (r->verdict == 0 || r->verdict == 1) {
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
		f->outcome = expect == EXPECT_ALLOWED ? OUT_ALLOWED
			     : r->verdict == 0      ? OUT_CONTAINED
						    : OUT_LEAKED;
		if (judge)
			judge(f, r);
	} else if (expect == EXPECT_ALLOWED && r->verdict == 2) {
		/* Allowed by the policy, whatever the answer: no answer in time
		 * (the proxy still resolving a name this machine cannot) is what
		 * "allowed" looks like here. */
		f->outcome = OUT_ALLOWED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else {
		dg_audit_describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
	return f;
}

struct finding *dg_audit_probe(struct audit *au, const char *edge, const char *id,
			       const char *tried, const char *sink, enum expect expect,
			       const char *control, int timeout_ms, const char *const *args)
{
	return dg_audit_probe_judged(au, edge, id, tried, sink, expect, control, timeout_ms, args,
				     NULL);
}

/* A host control's RESULT lines, as --host-result arguments for the jail's
 * run of the same probe. */
struct host_results {
	char kv[DG_AUDIT_HOST_RESULTS_MAX][DG_AUDIT_HOST_RESULT_LEN];
	int n;
};

static void host_results_of(const char *out, struct host_results *h)
{
	h->n = 0;
	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, "RESULT ", 7) != 0 || h->n >= DG_AUDIT_HOST_RESULTS_MAX)
			continue;
		size_t l = strcspn(p + 7, " \t\n");
		if (l > 0 && l < DG_AUDIT_HOST_RESULT_LEN)
			fmt(h->kv[h->n++], DG_AUDIT_HOST_RESULT_LEN, "%.*s", (int)l, p + 7);
	}
}

/* Runs one probe whose calls depend on the host's kernel (probe.c,
 * "Kernel refusals": kexec, modules, x32, int 0x80, bpf, socket families,
 * procfs knobs...): first on the host (run_host: the control, where the
 * kernel alone answers each call, as root with no filter), then in the
 * audited session with the control's RESULT lines as --host-result
 * arguments. The control's verdict line becomes the finding's control. The
 * finding is contained-by-kernel only when the jail's probe says KERNEL
 * (a call ended exactly as the host's kernel ended it, refused) and the
 * host control showed the kernel refusing a call (a RESULT other than
 * "ok"); a KERNEL the control does not back is an error. A control that
 * could not run leaves the jail's probe without host results: it then says
 * CONTAINED or LEAKED where it can tell, ERROR where it cannot. */
struct finding *dg_audit_probe_kernel(struct audit *au, const char *edge, const char *id,
				      const char *tried, const char *sink, const char *const *args)
{
	struct finding *f = dg_audit_add(au, edge, id, tried, sink);
	if (!f)
		return NULL;
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	struct host_results *h = calloc(1, sizeof(*h));
	if (!r || !h) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		free(r);
		free(h);
		return f;
	}
	struct dg_err err = {{0}};
	int host_refused = 0; /* calls the host's kernel refused */
	if (run_host(au, args, DG_AUDIT_PROBE_MS, r, &err) != 0) {
		fmt(f->control, sizeof(f->control), "on the host: could not run: %s", err.msg);
	} else if (r->verdict < 0 || r->verdict == 2) {
		char why[DG_AUDIT_EVIDENCE_MAX];
		dg_audit_describe_failure(r, why, sizeof(why));
		fmt(f->control, sizeof(f->control), "on the host: %s", why);
	} else {
		host_results_of(r->out, h);
		for (int i = 0; i < h->n; i++)
			host_refused += strcmp(strrchr(h->kv[i], '=') ? strrchr(h->kv[i], '=') : "=ok",
					       "=ok") != 0;
		fmt(f->control, sizeof(f->control), "on the host, as root with no filter: %s %s",
		    verdict_words[r->verdict], r->line);
	}
	const char *jargs[DG_AUDIT_ARGS_MAX + 1];
	size_t n = 0;
	jargs[n++] = args[0];
	for (int i = 0; i < h->n && n + 2 < DG_AUDIT_ARGS_MAX; i++) {
		jargs[n++] = "--host-result";
		jargs[n++] = h->kv[i];
	}
	for (size_t i = 1; args[i] && n < DG_AUDIT_ARGS_MAX; i++)
		jargs[n++] = args[i];
	jargs[n] = NULL;
	dg_audit_command_line(jargs, f->probe, sizeof(f->probe));
	if (!au->local.desktop_up ||
	    dg_audit_run_probe(au, &au->local.desktop, jargs, DG_AUDIT_PROBE_MS, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it in the session: %s",
		    au->local.desktop_up ? err.msg : "the session is not running");
	} else if (r->verdict == 0 || r->verdict == 1) {
		f->outcome = r->verdict == 0 ? OUT_CONTAINED : OUT_LEAKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->verdict == 3 && host_refused > 0) {
		f->outcome = OUT_KERNEL;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->verdict == 3) {
		fmt(f->evidence, sizeof(f->evidence), "the probe says the kernel refused it (%s), but "
		    "the host control did not show the kernel refusing it (%s)", r->line,
		    f->control);
	} else {
		dg_audit_describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
	free(h);
	return f;
}

/* ---- host facts handed to the probes --------------------------------------- */

/* "MAJ:MIN:INO" of path on the host, or "" when it does not exist. */
static bool file_id(const char *path, char *out, size_t len)
{
	struct stat st;
	out[0] = '\0';
	if (lstat(path, &st) != 0)
		return false;
	fmt(out, len, "%u:%u:%llu", major(st.st_dev), minor(st.st_dev),
	    (unsigned long long)st.st_ino);
	return true;
}

void dg_audit_pairs_add(struct pairs *p, const char *path)
{
	if (p->n >= DG_AUDIT_ARGS_MAX / 2 - 1)
		return;
	if (!file_id(path, p->ids[p->n], sizeof(p->ids[0])))
		return;
	fmt(p->paths[p->n], sizeof(p->paths[0]), "%s", path);
	p->args[0] = "same-file";
	p->args[1 + 2 * p->n] = p->paths[p->n];
	p->args[2 + 2 * p->n] = p->ids[p->n];
	p->args[3 + 2 * p->n] = NULL;
	size_t l = strlen(p->list);
	fmt(p->list + l, sizeof(p->list) - l, "%s%s", l ? ", " : "", path);
	p->n++;
}

/* The host's namespaces (ours) and the other session's, as ns-ids
 * arguments "WHO:TYPE:INO". */
static const char *const ns_types[] = {"user", "mnt", "net", "ipc", "uts", "pid", "cgroup"};
_Static_assert(sizeof(ns_types) / sizeof(ns_types[0]) == DG_AUDIT_NS_TYPES,
	       "DG_AUDIT_NS_TYPES counts ns_types");

int dg_audit_ns_args(pid_t other, char store[][64], const char **args)
{
	int n = 0;
	args[n] = "ns-ids";
	for (int who = 0; who < 2; who++) {
		for (size_t i = 0; i < DG_AUDIT_NS_TYPES; i++) {
			char path[64];
			struct stat st;
			if (who == 0)
				fmt(path, sizeof(path), "/proc/self/ns/%s", ns_types[i]);
			else
				fmt(path, sizeof(path), "/proc/%d/ns/%s", (int)other, ns_types[i]);
			if (stat(path, &st) != 0)
				return -errno;
			fmt(store[n], 64, "%s:%s:%llu", who == 0 ? "host" : "other-session",
			    ns_types[i], (unsigned long long)st.st_ino);
			args[1 + n] = store[n];
			n++;
		}
	}
	args[1 + n] = NULL;
	return n;
}
