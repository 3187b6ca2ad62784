/* Starting, stopping and cleaning up jails (the privileged side).
 *
 * A jail is claimed by a slot: an flock on <run dir>/slots/<N>.lock held for
 * the jail's life. The slot gives the jail its host uid/gid and its cgroup
 * name, so a second deskgate process can never pick the same ones, and a
 * slot whose lock is free but whose cgroup exists was left by a dead owner.
 * Lock files are never unlinked, which keeps the claim free of races.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/cgroup-priv.h"
#include "desktop/spawner/jail-priv.h"
#include "desktop/spawner/seccomp-priv.h"

/* Namespaces created at clone; the cgroup namespace is entered by init once
 * it is in its cgroup, so that the group is its root. */
#define DG_JAIL_CLONE_FLAGS \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)

/* ---- slots ---- */

const char *dg_jail_run_dir(void)
{
	const char *d = getenv("DESKGATE_RUN_DIR");
	return d && d[0] == '/' ? d : DG_RUN_DIR_DEFAULT;
}

static int ensure_dir(const char *path, struct dg_err *err)
{
	if (mkdir(path, 0700) != 0 && errno != EEXIST)
		return dg_err_set(err, -errno, "jail: mkdir %s: %s", path, strerror(errno));
	return 0;
}

int dg_jail_run_subdir(const char *name, char *out, size_t n, struct dg_err *err)
{
	int r;
	if ((r = ensure_dir(dg_jail_run_dir(), err)))
		return r;
	if ((size_t)snprintf(out, n, "%s/%s", dg_jail_run_dir(), name) >= n)
		return dg_err_set(err, -ENAMETOOLONG, "jail: run dir path too long");
	return ensure_dir(out, err);
}

/* Tries to take slot; returns the locked fd, -EWOULDBLOCK if taken. */
static int slot_try(const char *dir, uint32_t slot, struct dg_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%u.lock", dir, slot);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return dg_err_set(err, -errno, "jail: open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			return -EWOULDBLOCK;
		return dg_err_set(err, -e, "jail: flock %s: %s", path, strerror(e));
	}
	return fd;
}

/* Names the holder's instance in a slot lock just taken. */
static int slot_label(int fd, uint32_t slot, struct dg_err *err)
{
	char line[DG_INSTANCE_MAX + 2];
	int n = snprintf(line, sizeof(line), "%s\n", dg_instance());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n)
		return dg_err_set(err, -errno, "jail: labelling slot lock %u: %s", slot,
				  strerror(errno));
	return 0;
}

static int slot_claim(uint32_t *slot, struct dg_err *err)
{
	char dir[PATH_MAX];
	int r = dg_jail_run_subdir("slots", dir, sizeof(dir), err);
	if (r)
		return r;
	for (uint32_t s = 0; s < DG_JAIL_SLOTS; s++) {
		int fd = slot_try(dir, s, err);
		if (fd >= 0) {
			int r = slot_label(fd, s, err);
			if (r < 0) {
				close(fd);
				return r;
			}
			*slot = s;
			return fd;
		}
		if (fd != -EWOULDBLOCK)
			return fd;
	}
	return dg_err_set(err, -EAGAIN, "jail: all %u slots are in use", DG_JAIL_SLOTS);
}

static struct dg_cgroup_sys cgroup_sys;
static int cgroup_sys_state; /* 0 unknown, 1 found, <0 error */

static int cgroup_system(const struct dg_cgroup_sys **out, struct dg_err *err)
{
	if (cgroup_sys_state == 0) {
		const char *root = getenv("DESKGATE_CGROUP_ROOT");
		cgroup_sys_state = dg_cgroup_detect(root && root[0] == '/' ? root : DG_CGROUP_ROOT_DEFAULT,
						    &cgroup_sys, err);
		if (cgroup_sys_state == 0)
			cgroup_sys_state = 1;
		else
			return cgroup_sys_state;
	}
	if (cgroup_sys_state < 0)
		return dg_err_set(err, cgroup_sys_state, "jail: no usable cgroup hierarchy");
	*out = &cgroup_sys;
	return 0;
}

static int write_map(pid_t pid, const char *file, unsigned inner, unsigned outer, struct dg_err *err)
{
	char path[64], line[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int n = snprintf(line, sizeof(line), "%u %u 1\n", inner, outer);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return dg_err_set(err, -errno, "jail: open %s: %s", path, strerror(errno));
	ssize_t k = write(fd, line, (size_t)n);
	int e = errno;
	close(fd);
	if (k != n)
		return dg_err_set(err, k < 0 ? -e : -EIO, "jail: write %s: %s", path,
				  strerror(k < 0 ? e : EIO));
	return 0;
}

/* Reads the child's report: 0 when the pipe closed without one (the command
 * was executed), else the child's negative errno with its message. */
static int read_report(int fd, struct dg_jail_report *rep)
{
	ssize_t k;
	do
		k = read(fd, rep, sizeof(*rep));
	while (k < 0 && errno == EINTR);
	if (k == 0)
		return 0;
	if (k != (ssize_t)sizeof(*rep)) {
		rep->err = EIO;
		rep->exit_code = DG_JAIL_EXIT_SETUP;
		snprintf(rep->msg, sizeof(rep->msg), "jail: init ended before starting the command");
	}
	rep->msg[sizeof(rep->msg) - 1] = '\0';
	return -(rep->err ? rep->err : EIO);
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		p[i] = -1;
	}
}

/* Clones init into the jail's cgroup: on v2 the kernel creates it there
 * (CLONE_INTO_CGROUP); on v1 init moves itself first thing after "go"
 * (dg_cgroup_entry_join). Either way no migration by the parent, whose
 * RCU grace period used to be on every start (cgroup-priv.h). */
static int clone_init(struct dg_jail *j, struct dg_jail_child *child, struct dg_err *err)
{
	int r = dg_cgroup_entry_open(j->cgroup, &child->cg_entry, err);
	if (r)
		return r;
	child->cgroup = j->cgroup;
	pid_t p = dg_cgroup_clone(&child->cg_entry, DG_JAIL_CLONE_FLAGS, err);
	if (p == 0)
		dg_jail_init_main(child);
	dg_cgroup_entry_close(&child->cg_entry);
	if (p < 0)
		return p;
	j->pid = p;
	return 0;
}

/* Creates the egress listener inside the network namespace of pid: enters
 * it, brings lo up (init does too, later; either order works), binds, and
 * returns to our own namespace. The socket stays in the namespace it was
 * created in, so the proxy serves jail connections from the host side.
 * Returns the listening descriptor or a negative errno. The caller is
 * single-threaded while this runs (setns changes the calling thread only). */
static int egress_listen(pid_t pid, struct dg_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0)
		return dg_err_set(err, -errno, "jail: open /proc/self/ns/net: %s", strerror(errno));
	int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		int e = errno;
		close(self);
		return dg_err_set(err, -e, "jail: open %s: %s", path, strerror(e));
	}
	int fd = -1, r = 0;
	if (setns(ns, CLONE_NEWNET) != 0) {
		r = dg_err_set(err, -errno, "jail: entering %s: %s", path, strerror(errno));
		goto out;
	}
	int ifd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ifd < 0 || ioctl(ifd, SIOCGIFFLAGS, &ifr) != 0 ||
	    (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(ifd, SIOCSIFFLAGS, &ifr) != 0)) {
		r = dg_err_set(err, -errno, "jail: bringing up lo in %s: %s", path, strerror(errno));
	} else {
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(DG_JAIL_EGRESS_PORT)};
		inet_pton(AF_INET, DG_JAIL_EGRESS_ADDR, &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    listen(fd, DG_JAIL_EGRESS_BACKLOG) != 0)
			r = dg_err_set(err, -errno, "jail: egress listener on %s:%d in %s: %s",
				       DG_JAIL_EGRESS_ADDR, DG_JAIL_EGRESS_PORT, path, strerror(errno));
	}
	if (ifd >= 0)
		close(ifd);
	if (setns(self, CLONE_NEWNET) != 0) {
		/* Staying in the jail's namespace would be worse than dying. */
		fprintf(stderr, "deskgate: cannot return to the host network namespace: %s\n",
			strerror(errno));
		abort();
	}
out:
	close(ns);
	close(self);
	if (r) {
		if (fd >= 0)
			close(fd);
		return r;
	}
	return fd;
}

/* Everything between clone and "go": uid/gid maps and the egress listener
 * (before any program can try to connect). */
static int prepare_child(struct dg_jail *j, const struct dg_jail_spec *spec, struct dg_err *err)
{
	uint32_t host_id = DG_JAIL_ID_BASE + j->slot;
	int r;
	if ((r = write_map(j->pid, "uid_map", DG_JAIL_INNER_UID, host_id, err)) ||
	    (r = write_map(j->pid, "gid_map", DG_JAIL_INNER_GID, host_id, err)))
		return r;
	if (spec->egress) {
		if ((r = egress_listen(j->pid, err)) < 0)
			return r;
		j->egress_fd = r;
	}
	return 0;
}

static int create_cgroup(struct dg_jail *j, const struct dg_limits *lim, struct dg_err *err)
{
	const struct dg_cgroup_sys *sys;
	int r = cgroup_system(&sys, err);
	if (r)
		return r;
	struct dg_cgroup *cg = calloc(1, sizeof(*cg));
	if (!cg)
		return dg_err_set(err, -ENOMEM, "jail: out of memory");
	if ((r = dg_cgroup_create(sys, j->slot, lim, cg, err))) {
		free(cg);
		return r;
	}
	j->cgroup = cg;
	return 0;
}

int dg_jail_cap_cpu(const struct dg_jail *j, const struct dg_limits *lim, struct dg_err *err)
{
	if (!j->cgroup)
		return dg_err_set(err, -ENOENT, "jail: slot %u has no cgroup", (unsigned)j->slot);
	return dg_cgroup_set_cpu(j->cgroup, lim, err);
}

static void jail_reset(struct dg_jail *j)
{
	memset(j, 0, sizeof(*j));
	j->pid = -1;
	j->pidfd = -1;
	j->lock_fd = -1;
	j->life_fd = -1;
	j->egress_fd = -1;
}

/* child->spec = a copy of spec whose programs' argv and cwd live in one
 * block of child's (see dg_jail_child.arena). -ENOMEM or 0. */
static int copy_progs(struct dg_jail_child *child, const struct dg_jail_spec *spec)
{
	size_t need = 0;
	for (int i = 0; i < spec->n_progs; i++) {
		const struct dg_jail_prog *p = &spec->progs[i];
		for (int k = 0; p->argv[k]; k++)
			need += sizeof(char *) + strlen(p->argv[k]) + 1;
		need += sizeof(char *) + (p->cwd ? strlen(p->cwd) + 1 : 0);
	}
	child->arena = malloc(need ? need : 1);
	if (!child->arena)
		return -ENOMEM;
	char *at = child->arena;
	/* The pointer arrays first (aligned: malloc's block starts aligned and
	 * they are packed before any string), then the strings. */
	char **ptrs = (char **)(void *)at;
	size_t n_ptrs = 0;
	for (int i = 0; i < spec->n_progs; i++) {
		for (int k = 0; spec->progs[i].argv[k]; k++)
			n_ptrs++;
		n_ptrs++;
	}
	char *strs = at + n_ptrs * sizeof(char *);
	child->spec_copy = *spec;
	child->spec_copy.progs = child->progs;
	for (int i = 0; i < spec->n_progs; i++) {
		const struct dg_jail_prog *p = &spec->progs[i];
		child->progs[i] = *p;
		child->progs[i].argv = (const char *const *)ptrs;
		for (int k = 0; p->argv[k]; k++) {
			size_t l = strlen(p->argv[k]) + 1;
			memcpy(strs, p->argv[k], l);
			*ptrs++ = strs;
			strs += l;
		}
		*ptrs++ = NULL;
		if (p->cwd) {
			size_t l = strlen(p->cwd) + 1;
			memcpy(strs, p->cwd, l);
			child->progs[i].cwd = strs;
			strs += l;
		}
	}
	child->spec = &child->spec_copy;
	return 0;
}

int dg_jail_start(const struct dg_jail_spec *spec, struct dg_jail *j, struct dg_err *err)
{
	jail_reset(j);
	if (spec->n_progs < 1 || spec->n_progs > DG_JAIL_PROGS_MAX)
		return dg_err_set(err, -EINVAL, "jail: %d programs (1 to %d)", spec->n_progs,
				  DG_JAIL_PROGS_MAX);
	for (int i = 0; i < spec->n_progs; i++) {
		const struct dg_jail_prog *p = &spec->progs[i];
		if (!p->argv || !p->argv[0] || !p->argv[0][0])
			return dg_err_set(err, -EINVAL, "jail: program %d: no command given", i);
		if (p->n_pass_fds < 0 || p->n_pass_fds > DG_JAIL_PASS_FDS_MAX)
			return dg_err_set(err, -EINVAL, "jail: %d descriptors to pass (at most %d)",
					  p->n_pass_fds, DG_JAIL_PASS_FDS_MAX);
	}
	if (spec->n_etc_files < 0 || spec->n_etc_files > DG_JAIL_FILES_MAX)
		return dg_err_set(err, -EINVAL, "jail: %d files for /etc (at most %d)",
				  spec->n_etc_files, DG_JAIL_FILES_MAX);
	for (int i = 0; i < spec->n_etc_files; i++) {
		const struct dg_jail_file *f = &spec->etc_files[i];
		size_t n = f->path ? strlen(f->path) : 0;
		bool ok = n > 0 && n <= DG_JAIL_FILE_PATH_MAX && f->path[0] != '/' &&
			  f->text && strlen(f->text) <= DG_JAIL_FILE_TEXT_MAX &&
			  !strstr(f->path, "..") && !strstr(f->path, "//") && f->path[n - 1] != '/';
		for (size_t k = 0; ok && k < n; k++)
			ok = strchr("abcdefghijklmnopqrstuvwxyz0123456789._-/", f->path[k]) != NULL;
		if (!ok)
			return dg_err_set(err, -EINVAL, "jail: bad /etc file %d (a relative path of "
					  "[a-z0-9._-/], text at most %d bytes)", i, DG_JAIL_FILE_TEXT_MAX);
	}
	/* Large (the environment storage): kept off the stack. */
	struct dg_jail_child *child = calloc(1, sizeof(*child));
	if (child && copy_progs(child, spec) != 0) {
		free(child);
		child = NULL;
	}
	if (!child)
		return dg_err_set(err, -ENOMEM, "jail: out of memory");
	int go[2] = {-1, -1}, rep[2] = {-1, -1};
	int r = 0;
	for (int i = 0; i < spec->n_progs && !r; i++)
		r = dg_jail_env_build(&spec->progs[i], &child->env[i], err);
	if (r)
		goto out;
	if (pipe2(go, O_CLOEXEC) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
		r = dg_err_set(err, -errno, "jail: pipe: %s", strerror(errno));
		goto out;
	}
	child->go_fd = go[0];
	child->report_fd = rep[1];
	child->parent_fds[0] = go[1];
	child->parent_fds[1] = rep[0];
	if ((r = slot_claim(&j->slot, err)) < 0)
		goto out;
	j->lock_fd = r;
	/* The filter is compiled once per process, so each init only loads it. */
	if ((r = dg_seccomp_prepare(err)) || (r = create_cgroup(j, spec->limits, err)) ||
	    (spec->cpu_after_start && (r = dg_cgroup_set_cpu(j->cgroup, NULL, err))) ||
	    (r = clone_init(j, child, err)))
		goto fail;
	j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
	if (j->pidfd < 0) {
		r = dg_err_set(err, -errno, "jail: pidfd_open: %s", strerror(errno));
		goto fail;
	}
	close(go[0]);
	close(rep[1]);
	go[0] = rep[1] = -1;
	if ((r = prepare_child(j, spec, err)))
		goto fail;
	if (write(go[1], "g", 1) != 1) {
		r = dg_err_set(err, -errno, "jail: starting init: %s", strerror(errno));
		goto fail;
	}
	/* Held until destroy: init reads its hang-up as the parent's death. */
	j->life_fd = go[1];
	go[1] = -1;
	struct dg_jail_report report;
	if ((r = read_report(rep[0], &report))) {
		dg_err_set(err, r, "%s", report.msg);
		j->start_exit = report.exit_code;
		goto fail;
	}
	r = 0;
	goto out;
fail:
	dg_jail_destroy(j);
out:
	close_pair(go);
	close_pair(rep);
	if (child)
		free(child->arena);
	free(child);
	return r;
}

int dg_jail_kill(struct dg_jail *j)
{
	if (j->pidfd >= 0 && !j->reaped)
		syscall(SYS_pidfd_send_signal, j->pidfd, SIGKILL, NULL, 0);
	if (j->cgroup) {
		struct dg_err err;
		return dg_cgroup_kill(j->cgroup, &err);
	}
	return 0;
}

int dg_jail_try_reap(struct dg_jail *j)
{
	if (j->reaped)
		return 1;
	if (j->pid <= 0)
		return 1;
	pid_t p = waitpid(j->pid, &j->status, WNOHANG);
	if (p == j->pid) {
		j->reaped = true;
		return 1;
	}
	if (p < 0 && errno == ECHILD) {
		j->reaped = true;
		return 1;
	}
	return 0;
}

int dg_jail_verdict(const struct dg_jail *j, struct dg_jail_verdict *v)
{
	memset(v, 0, sizeof(*v));
	if (!j->cgroup)
		return 0;
	struct dg_cgroup_events ev;
	struct dg_err err;
	int r = dg_cgroup_read_events(j->cgroup, &ev, &err);
	if (r)
		return r;
	v->oom_killed = ev.oom_kills > 0;
	v->pids_capped = ev.pids_max_hits > 0;
	return 0;
}

int dg_jail_destroy(struct dg_jail *j)
{
	int r = 0;
	dg_jail_kill(j);
	if (j->pid > 0 && !j->reaped) {
		while (waitpid(j->pid, &j->status, 0) < 0 && errno == EINTR)
			;
		j->reaped = true;
	}
	if (j->cgroup) {
		struct dg_err err;
		r = dg_cgroup_destroy(j->cgroup, &err);
		free(j->cgroup);
		j->cgroup = NULL;
	}
	if (j->pidfd >= 0)
		close(j->pidfd);
	if (j->lock_fd >= 0)
		close(j->lock_fd);
	if (j->life_fd >= 0)
		close(j->life_fd);
	if (j->egress_fd >= 0)
		close(j->egress_fd);
	j->pidfd = j->lock_fd = j->life_fd = j->egress_fd = -1;
	return r;
}

struct stale_ctx {
	const struct dg_cgroup_sys *sys;
	char dir[PATH_MAX];
	int removed;
	int first_error;
	struct dg_err *err;
};

/* A jail group whose slot lock is free was left by a dead owner, of
 * whichever instance: it is removed. One whose slot is held is alive (or is
 * a dead owner's while another jail holds the slot: it goes once that one
 * ends). */
static int clean_slot(const char *instance, uint32_t slot, void *arg)
{
	struct stale_ctx *ctx = arg;
	int fd = slot_try(ctx->dir, slot, ctx->err);
	if (fd < 0)
		return 0; /* alive, or unreadable: not ours to touch */
	struct dg_cgroup cg;
	dg_cgroup_paths_of(ctx->sys, instance, slot, &cg);
	int r = dg_cgroup_destroy(&cg, ctx->err);
	if (r && !ctx->first_error)
		ctx->first_error = r;
	if (!r)
		ctx->removed++;
	close(fd);
	return 0;
}

int dg_jail_cleanup_stale(struct dg_err *err)
{
	struct stale_ctx ctx = {.err = err};
	int r;
	if ((r = cgroup_system(&ctx.sys, err)) || (r = dg_jail_run_subdir("slots", ctx.dir, sizeof(ctx.dir), err)))
		return r;
	if ((r = dg_cgroup_foreach_jail(ctx.sys, clean_slot, &ctx)))
		return r;
	return ctx.first_error ? ctx.first_error : ctx.removed;
}
