/* `deskgate audit`, the report: the text and JSON reports and the state file (see cli-audit.c). */

#include "cli/cli-audit-priv.h"

static const char *const outcome_names[N_OUTCOMES] = {
	"contained", "allowed", "leaked", "not-checked", "error", "contained-by-kernel"};

const char *dg_audit_outcome_name(enum outcome o)
{
	return o < N_OUTCOMES ? outcome_names[o] : "?";
}
/* ---- the report ---------------------------------------------------------------- */

struct tally dg_audit_tally(const struct audit *au)
{
	struct tally t = {{0}};
	for (int i = 0; i < au->n; i++)
		t.n[au->f[i].outcome]++;
	return t;
}

json_t *dg_audit_report_json(const struct audit *au, int code)
{
	struct tally t = dg_audit_tally(au);
	json_t *findings = json_array(), *kernel = json_array();
	for (int i = 0; i < au->n; i++) {
		if (au->f[i].outcome == OUT_KERNEL)
			json_array_append_new(kernel, json_string(au->f[i].id));
		const struct finding *f = &au->f[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "id", f->id, "edge",
				      f->edge, "probe", f->probe, "source", f->source, "sink", f->sink,
				      "tried", f->tried, "outcome", outcome_names[f->outcome],
				      "evidence", f->evidence);
		if (o && f->control[0])
			json_object_set_new(o, "control", json_string(f->control));
		if (o)
			json_object_set_new(o, "ms", json_integer(f->ms));
		json_array_append_new(findings, o);
	}
	json_t *policy = json_pack("{s:s, s:s, s:s?}", "name",
				   au->policy_path ? au->policy_path : "built-in default", "sha256",
				   au->policy_hex, "path", au->policy_path);
	return json_pack("{s:i, s:o, s:s, s:s, s:I, s:I, s:{s:s, s:s}, s:o, s:{s:i, s:i, s:i, s:i, "
			 "s:i, s:i, s:i}, s:o, s:i}",
			 "format", 1, "policy", policy, "profile", dg_profile_name(au->profile),
			 "started", au->started, "duration_ms", (json_int_t)(dg_now_ms() - au->t0_ms),
			 "setup_ms", (json_int_t)au->setup_ms,
			 "deskgate_probe", "path", au->probe_real, "sha256", au->probe_hex,
			 "findings", findings, "summary", "probes", au->n, "contained",
			 t.n[OUT_CONTAINED], "contained_by_kernel", t.n[OUT_KERNEL], "allowed",
			 t.n[OUT_ALLOWED], "leaked", t.n[OUT_LEAKED], "not_checked",
			 t.n[OUT_UNCHECKED], "errors", t.n[OUT_ERROR], "kernel_refused", kernel, "exit",
			 code);
}

/* The ids of the findings the kernel itself refused, ", "-separated. */
void dg_audit_kernel_ids(const struct audit *au, char *buf, size_t len)
{
	buf[0] = '\0';
	for (int i = 0; i < au->n; i++) {
		size_t l = strlen(buf);
		if (au->f[i].outcome == OUT_KERNEL)
			fmt(buf + l, len - l, "%s%s", l ? ", " : "", au->f[i].id);
	}
}

void dg_audit_report_text(const struct audit *au, FILE *out)
{
	fprintf(out, "deskgate audit: policy %s (sha256 %.16s...), profile %s, probe %s\n",
		au->policy_path ? au->policy_path : "built-in default", au->policy_hex,
		dg_profile_name(au->profile), au->probe_real);
	for (int i = 0; i < au->n; i++) {
		const struct finding *f = &au->f[i];
		fprintf(out, "%-11s  %-19s  %s \u2014 %s\n", f->edge, outcome_names[f->outcome],
			f->tried, f->evidence);
		if (f->control[0])
			fprintf(out, "%-11s  %-19s    control %s\n", "", "", f->control);
	}
	struct tally t = dg_audit_tally(au);
	fprintf(out, "%d probes: %d contained, ", au->n, t.n[OUT_CONTAINED]);
	if (t.n[OUT_KERNEL])
		fprintf(out, "%d contained by the kernel, ", t.n[OUT_KERNEL]);
	fprintf(out, "%d ran as allowed, %d leaked", t.n[OUT_ALLOWED], t.n[OUT_LEAKED]);
	if (t.n[OUT_UNCHECKED])
		fprintf(out, ", %d not checked", t.n[OUT_UNCHECKED]);
	if (t.n[OUT_ERROR])
		fprintf(out, ", %d could not run", t.n[OUT_ERROR]);
	fprintf(out, "\n");
	if (t.n[OUT_KERNEL]) {
		char ids[DG_AUDIT_FINDINGS_MAX * 64];
		dg_audit_kernel_ids(au, ids, sizeof(ids));
		fprintf(out, "contained by the kernel, not by deskgate (this host's kernel refuses "
			"them itself, with or without a jail, so this audit cannot show what "
			"deskgate would do): %s\n", ids);
	}
}

/* Writes the report to STATE_DIR/audit/<policy sha256>.json (see
 * cli.h), owned by STATE_DIR's owner. The gateway's user owns that
 * directory and is less trusted than root: everything below STATE_DIR is
 * reached through descriptors, never by following a name it could have
 * swapped for a symlink (the audit directory is opened O_NOFOLLOW, changed
 * with fchown/fchmod, the file created O_EXCL|O_NOFOLLOW and renamed within
 * the same directory descriptor). */
int dg_audit_write_state(const struct audit *au, const char *text, struct dg_err *err)
{
	int sfd = open(au->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return dg_err_set(err, -errno, "state dir %s: %s", au->state_dir, strerror(errno));
	struct stat sd;
	int dfd = -1, fd = -1, r = 0;
	char tmp[128], final[128];
	if (fstat(sfd, &sd) != 0) {
		r = dg_err_set(err, -errno, "state dir %s: %s", au->state_dir, strerror(errno));
		goto out;
	}
	if (mkdirat(sfd, "audit", 0750) != 0 && errno != EEXIST) {
		r = dg_err_set(err, -errno, "mkdir %s/audit: %s", au->state_dir, strerror(errno));
		goto out;
	}
	dfd = openat(sfd, "audit", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchown(dfd, sd.st_uid, sd.st_gid) != 0 || fchmod(dfd, 0750) != 0) {
		r = dg_err_set(err, -errno, "%s/audit: %s", au->state_dir, strerror(errno));
		goto out;
	}
	fmt(final, sizeof(final), "%s.json", au->policy_hex);
	fmt(tmp, sizeof(tmp), ".%s.json.%d", au->policy_hex, (int)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0) {
		r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp, strerror(errno));
		goto out;
	}
	size_t len = strlen(text), off = 0;
	while (off < len && r == 0) {
		ssize_t k = write(fd, text + off, len - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp,
				       strerror(errno));
		else
			off += (size_t)k;
	}
	if (r == 0 && (fchown(fd, sd.st_uid, sd.st_gid) != 0 || fchmod(fd, 0640) != 0 ||
		       fsync(fd) != 0))
		r = dg_err_set(err, -errno, "%s/audit/%s: %s", au->state_dir, tmp, strerror(errno));
	if (r == 0 && renameat(dfd, tmp, dfd, final) != 0)
		r = dg_err_set(err, -errno, "rename to %s/audit/%s: %s", au->state_dir, final,
			       strerror(errno));
	if (r)
		unlinkat(dfd, tmp, 0);
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	close(sfd);
	return r;
}
