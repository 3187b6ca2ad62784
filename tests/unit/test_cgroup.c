/* cgroup: detection, what is written where, and real limits on this host.
 *
 * Fake trees (plain directories under /tmp) check detection and the exact
 * values written for v2 and v1. The "real" tests use the host hierarchy at
 * /sys/fs/cgroup (v1 or v2, whichever detect picks) with slots from
 * REAL_SLOT_BASE up, which no jail of the product uses in practice, and are
 * skipped when not root or when no usable hierarchy exists. They hold the
 * slot's lock as a jail's owner does, so that a `deskgate` starting meanwhile
 * does not take their groups for stale ones and remove them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup-priv.h"
#include "dg_test.h"

#define REAL_SLOT_BASE 65000u
/* Children made to sit in a group end by themselves after this long, so a
 * failed test leaves no process (nor a slot lock) behind for long. */
#define SLEEPER_LIFETIME_S 60
/* How long a test waits for its slot lock (another run may hold it). */
#define SLOT_LOCK_WAIT_S 20

/* ---- helpers ---- */

/* out (PATH_MAX bytes) = dir/name. */
static void pjoin(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
	cr_assert(n > 0 && n < PATH_MAX, "path too long: %s/%s", dir, name);
}

static char *fake_root(void)
{
	char *dir = strdup("/tmp/dg-cgroup-test-XXXXXX");
	cr_assert(dir && mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	return dir;
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[PATH_MAX];
	pjoin(path, dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	size_t len = strlen(text);
	cr_assert_eq(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static void make_dir(const char *dir, const char *name)
{
	char path[PATH_MAX];
	pjoin(path, dir, name);
	cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* Content of dir/name without its trailing newline, in a static buffer. */
static const char *slurp(const char *dir, const char *name)
{
	static char buf[8192];
	char path[PATH_MAX];
	pjoin(path, dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	cr_assert(n >= 0, "read %s: %s", path, strerror(errno));
	close(fd);
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return buf;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void rm_tree(char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static char *fake_v2(const char *controllers)
{
	char *root = fake_root();
	put(root, "cgroup.controllers", controllers);
	put(root, "cgroup.subtree_control", "");
	return root;
}

static char *fake_v1(void)
{
	char *root = fake_root();
	static const char *const names[] = {"memory", "pids", "cpu"};
	for (int i = 0; i < 3; i++) {
		char dir[PATH_MAX];
		pjoin(dir, root, names[i]);
		make_dir(root, names[i]);
		put(dir, "cgroup.procs", "");
	}
	return root;
}

static struct dg_limits limits(uint64_t memory_mb, uint32_t pids, double cpus)
{
	struct dg_limits l = {.memory_mb = memory_mb, .pids = pids, .cpus = cpus};
	return l;
}

/* Creates slot under a fresh fake v2 tree and returns cpu.max. */
static const char *v2_cpu_max(double cpus)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(64, 16, cpus);
	cr_assert_eq(dg_cgroup_create(&sys, 1, &l, &cg, &err), 0, "%s", err.msg);
	const char *v = slurp(cg.v2, "cpu.max");
	rm_tree(root);
	return v;
}

/* In a forked child: drops inherited descriptors (slot locks, criterion's
 * pipes) and waits to be killed, at most SLEEPER_LIFETIME_S. */
_Noreturn static void become_sleeper(void)
{
	close_range(3, ~0u, 0);
	alarm(SLEEPER_LIFETIME_S);
	for (;;)
		pause();
}

static pid_t fork_sleeper(void)
{
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0)
		become_sleeper();
	return pid;
}

/* Moves pid into every hierarchy of cg, as a parent migrating its child
 * (the jail no longer does: its init joins by itself, dg_cgroup_entry_*):
 * where the tests put the processes they watch, and the baseline the
 * entry's timing is printed beside. 0 or a negative errno with err. */
static int place(const struct dg_cgroup *cg, pid_t pid, struct dg_err *err)
{
	const char *dirs[3] = {cg->v2, NULL, NULL};
	if (cg->version == DG_CGROUP_V1) {
		dirs[0] = cg->memory;
		dirs[1] = cg->pids;
		dirs[2] = cg->cpu;
	}
	for (int i = 0; i < 3 && dirs[i]; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/cgroup.procs", dirs[i]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		int ok = fd >= 0 && dprintf(fd, "%d", (int)pid) > 0;
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (!ok)
			return dg_err_set(err, -e, "placing %d in %s: %s", (int)pid, path, strerror(e));
	}
	return 0;
}

static void assert_killed(pid_t pid)
{
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
}

/* ---- detection (fake trees) ---- */

Test(cgroup_detect, v2_when_controllers_listed)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v2("cpuset cpu io memory pids\n");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	cr_assert_eq(sys.version, DG_CGROUP_V2);
	cr_assert_str_eq(sys.v2_root, root);
	rm_tree(root);
}

Test(cgroup_detect, v2_preferred_over_v1)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v1();
	put(root, "cgroup.controllers", "memory pids cpu");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	cr_assert_eq(sys.version, DG_CGROUP_V2);
	rm_tree(root);
}

Test(cgroup_detect, v1_when_three_controllers)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v1();
	char want[PATH_MAX];
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	cr_assert_eq(sys.version, DG_CGROUP_V1);
	pjoin(want, root, "pids");
	cr_assert_str_eq(sys.v1_pids, want);
	pjoin(want, root, "cpu");
	cr_assert_str_eq(sys.v1_cpu, want);
	rm_tree(root);
}

Test(cgroup_detect, v2_without_pids_and_no_v1_names_pids)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v2("cpuset cpu io memory");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), -ENOENT);
	cr_assert(strstr(err.msg, "controller(s) pids missing from cgroup.controllers"), "%s",
		  err.msg);
	cr_assert(strstr(err.msg, root), "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_detect, cpuset_is_not_cpu)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v2("cpuset memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), -ENOENT);
	cr_assert(strstr(err.msg, "controller(s) cpu missing"), "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_detect, v1_missing_pids_names_pids)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v1();
	char procs[PATH_MAX];
	pjoin(procs, root, "pids/cgroup.procs");
	cr_assert_eq(unlink(procs), 0);
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), -ENOENT);
	cr_assert(strstr(err.msg, "v1: controller(s) pids missing"), "%s", err.msg);
	cr_assert(strstr(err.msg, "no cgroup.controllers"), "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_detect, empty_dir_names_all)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_root();
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), -ENOENT);
	cr_assert(strstr(err.msg, "memory pids cpu missing"), "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_detect, root_too_long)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	static char root[PATH_MAX + 1];
	memset(root, 'a', PATH_MAX);
	root[0] = '/';
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), -ENAMETOOLONG);
}

/* ---- creation (fake trees) ---- */

Test(cgroup_create, v2_writes_exact_values)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpuset cpu io memory pids\n");
	char want[PATH_MAX];
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(64, 32, 0.5);
	cr_assert_eq(dg_cgroup_create(&sys, 3, &l, &cg, &err), 0, "%s", err.msg);
	snprintf(want, sizeof(want), "%s/deskgate/%s/jail-3", root, dg_instance());
	cr_assert_str_eq(cg.v2, want);
	cr_assert_str_eq(slurp(cg.v2, "memory.max"), "67108864");
	cr_assert_str_eq(slurp(cg.v2, "memory.swap.max"), "0");
	cr_assert_str_eq(slurp(cg.v2, "pids.max"), "32");
	cr_assert_str_eq(slurp(cg.v2, "cpu.max"), "50000 100000");
	cr_assert_str_eq(slurp(root, "cgroup.subtree_control"), "+memory +pids +cpu");
	pjoin(want, root, "deskgate");
	cr_assert_str_eq(slurp(want, "cgroup.subtree_control"), "+memory +pids +cpu");
	snprintf(want, sizeof(want), "%s/deskgate/%s", root, dg_instance());
	cr_assert_str_eq(slurp(want, "cgroup.subtree_control"), "+memory +pids +cpu");
	rm_tree(root);
}

Test(cgroup_create, v2_controllers_already_enabled_not_rewritten)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	put(root, "cgroup.subtree_control", "cpu io memory pids\n");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(64, 32, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 4, &l, &cg, &err), 0, "%s", err.msg);
	cr_assert_str_eq(slurp(root, "cgroup.subtree_control"), "cpu io memory pids");
	rm_tree(root);
}

Test(cgroup_create, cpu_quota_rounding_and_minimum)
{
	cr_assert_str_eq(v2_cpu_max(1.5), "150000 100000");
	cr_assert_str_eq(v2_cpu_max(2.0), "200000 100000");
	cr_assert_str_eq(v2_cpu_max(DG_LIMIT_CPUS_MIN), "1000 100000");
	cr_assert_str_eq(v2_cpu_max(0.001), "1000 100000");
	cr_assert_str_eq(v2_cpu_max(DG_LIMIT_CPUS_MAX), "102400000 100000");
}

Test(cgroup_create, v1_writes_exact_values)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v1();
	char want[PATH_MAX];
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(256, 64, 0.25);
	cr_assert_eq(dg_cgroup_create(&sys, 12, &l, &cg, &err), 0, "%s", err.msg);
	cr_assert_eq(cg.version, DG_CGROUP_V1);
	snprintf(want, sizeof(want), "%s/memory/deskgate/%s/jail-12", root, dg_instance());
	cr_assert_str_eq(cg.memory, want);
	cr_assert_str_eq(slurp(cg.memory, "memory.limit_in_bytes"), "268435456");
	cr_assert_str_eq(slurp(cg.memory, "memory.memsw.limit_in_bytes"), "268435456");
	cr_assert_str_eq(slurp(cg.pids, "pids.max"), "64");
	cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_period_us"), "100000");
	cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_quota_us"), "25000");
	pjoin(want, cg.memory, "memory.oom_control");
	cr_assert(!exists(want), "memory.oom_control must not be written");
	rm_tree(root);
}

Test(cgroup_create, invalid_limits_refused)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits bad[] = {limits(0, 8, 1), limits(64, 0, 1), limits(64, 8, 0),
				  limits(64, 8, -1), limits(64, 8, NAN), limits(64, 8, INFINITY),
				  limits(UINT64_MAX, 8, 1)};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(dg_cgroup_create(&sys, 1, &bad[i], &cg, &err), -EINVAL, "case %zu", i);
	struct dg_limits ok = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, DG_JAIL_SLOTS, &ok, &cg, &err), -EINVAL);
	char dir[PATH_MAX];
	pjoin(dir, root, "deskgate/jail-1");
	cr_assert(!exists(dir), "nothing is created for refused limits");
	rm_tree(root);
}

Test(cgroup_create, failed_write_names_file)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	char path[PATH_MAX];
	pjoin(path, root, "cgroup.subtree_control");
	cr_assert_eq(unlink(path), 0);
	cr_assert_eq(mkdir(path, 0755), 0);
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 1, &l, &cg, &err), -EISDIR);
	cr_assert(strstr(err.msg, path) && strstr(err.msg, strerror(EISDIR)), "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_create, v1_failure_removes_what_was_created)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v1();
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	char pids_parent[PATH_MAX], mem_jail[PATH_MAX];
	pjoin(pids_parent, root, "pids");
	put(pids_parent, "deskgate", "not a directory");
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 2, &l, &cg, &err), -ENOTDIR);
	cr_assert(strstr(err.msg, "pids/deskgate"), "%s", err.msg);
	snprintf(mem_jail, sizeof(mem_jail), "%s/memory/deskgate/%s/jail-2", root, dg_instance());
	cr_assert(!exists(mem_jail), "memory group left behind");
	rm_tree(root);
}

Test(cgroup_create, stale_empty_group_replaced)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	char inst[PATH_MAX];
	snprintf(inst, sizeof(inst), "deskgate/%s", dg_instance());
	make_dir(root, "deskgate");
	make_dir(root, inst);
	snprintf(inst, sizeof(inst), "deskgate/%s/jail-9", dg_instance());
	make_dir(root, inst);
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 9, &l, &cg, &err), 0, "%s", err.msg);
	cr_assert_str_eq(slurp(cg.v2, "pids.max"), "8");
	rm_tree(root);
}

Test(cgroup_create, path_too_long)
{
	static struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	sys.version = DG_CGROUP_V2;
	memset(sys.v2_root, 'a', PATH_MAX - 12);
	sys.v2_root[0] = '/';
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 65535, &l, &cg, &err), -ENAMETOOLONG);
	cr_assert(strstr(err.msg, "too long"), "%s", err.msg);
	dg_cgroup_paths(&sys, 65535, &cg);
	cr_assert_str_eq(cg.v2, "");
}

/* ---- paths, events, enumeration, destroy (fake trees) ---- */

Test(cgroup_fake, paths_for_both_versions)
{
	struct dg_cgroup_sys sys = {.version = DG_CGROUP_V1};
	struct dg_cgroup cg;
	strcpy(sys.v1_memory, "/r/memory");
	strcpy(sys.v1_pids, "/r/pids");
	strcpy(sys.v1_cpu, "/r/cpu,cpuacct");
	dg_cgroup_paths_of(&sys, "gw-1", 65535, &cg);
	cr_assert_eq(cg.version, DG_CGROUP_V1);
	cr_assert_str_eq(cg.memory, "/r/memory/deskgate/gw-1/jail-65535");
	cr_assert_str_eq(cg.pids, "/r/pids/deskgate/gw-1/jail-65535");
	cr_assert_str_eq(cg.cpu, "/r/cpu,cpuacct/deskgate/gw-1/jail-65535");
	sys.version = DG_CGROUP_V2;
	strcpy(sys.v2_root, "/sys/fs/cgroup");
	dg_cgroup_paths_of(&sys, "gw-1", 0, &cg);
	cr_assert_str_eq(cg.v2, "/sys/fs/cgroup/deskgate/gw-1/jail-0");
	dg_cgroup_paths_of(&sys, "", 7, &cg);
	cr_assert_str_eq(cg.v2, "/sys/fs/cgroup/deskgate/jail-7", "the flat layout before instances");
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "/sys/fs/cgroup/deskgate/%s/jail-0", dg_instance());
	dg_cgroup_paths(&sys, 0, &cg);
	cr_assert_str_eq(cg.v2, want, "this process's instance");
}

Test(cgroup_fake, destroy_removes_dir_and_is_idempotent)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 5, &l, &cg, &err), 0, "%s", err.msg);
	/* A plain directory keeps the files written into it; cgroupfs does not. */
	cr_assert_eq(dg_cgroup_destroy(&cg, &err), -ENOTEMPTY);
	cr_assert(strstr(err.msg, cg.v2), "%s", err.msg);
	static const char *const files[] = {"memory.max", "memory.swap.max", "pids.max", "cpu.max"};
	for (int i = 0; i < 4; i++) {
		char path[PATH_MAX];
		pjoin(path, cg.v2, files[i]);
		cr_assert_eq(unlink(path), 0, "%s", path);
	}
	cr_assert_eq(dg_cgroup_destroy(&cg, &err), 0, "%s", err.msg);
	cr_assert(!exists(cg.v2));
	cr_assert_eq(dg_cgroup_destroy(&cg, &err), 0, "%s", err.msg);
	rm_tree(root);
}

Test(cgroup_fake, events_v2_exact_keys)
{
	struct dg_cgroup cg = {.version = DG_CGROUP_V2};
	struct dg_cgroup_events ev;
	struct dg_err err = {""};
	char *root = fake_root();
	strcpy(cg.v2, root);
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_eq(ev.oom_kills, 0);
	cr_assert_eq(ev.pids_max_hits, 0);
	put(root, "memory.events", "low 0\nhigh 0\nmax 9\noom 7\noom_kill 3\noom_group_kill 5\n");
	put(root, "pids.events", "max.imposed 11\nmax 4\n");
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_eq(ev.oom_kills, 3);
	cr_assert_eq(ev.pids_max_hits, 4);
	rm_tree(root);
}

Test(cgroup_fake, events_v1_from_oom_control)
{
	struct dg_cgroup cg = {.version = DG_CGROUP_V1};
	struct dg_cgroup_events ev;
	struct dg_err err = {""};
	char *root = fake_root();
	strcpy(cg.memory, root);
	strcpy(cg.pids, root);
	strcpy(cg.cpu, root);
	put(root, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
	put(root, "pids.events", "max 17\n");
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_eq(ev.oom_kills, 2);
	cr_assert_eq(ev.pids_max_hits, 17);
	rm_tree(root);
}

struct slots {
	uint32_t seen[16];
	char instance[16][DG_INSTANCE_MAX + 1];
	int n;
	int stop_after;
};

static int collect(const char *instance, uint32_t slot, void *arg)
{
	struct slots *s = arg;
	if (s->n < 16) {
		snprintf(s->instance[s->n], sizeof(s->instance[0]), "%s", instance);
		s->seen[s->n++] = slot;
	}
	return s->stop_after && s->n >= s->stop_after ? 99 : 0;
}

static bool seen(const struct slots *s, uint32_t slot)
{
	for (int i = 0; i < s->n; i++)
		if (s->seen[i] == slot)
			return true;
	return false;
}

Test(cgroup_fake, foreach_only_exact_jail_names)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct slots s = {.n = 0};
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &s), 0, "no deskgate group: no jails");
	cr_assert_eq(s.n, 0);
	static const char *const dirs[] = {"deskgate",          "deskgate/jail-0",
					   "deskgate/jail-42",  "deskgate/jail-65535",
					   "deskgate/jail-65536", "deskgate/jail-007",
					   "deskgate/jail-",    "deskgate/jail-1x",
					   "deskgate/jail--1",  "deskgate/jail-+5",
					   "deskgate/xjail-3",  "deskgate/other"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		make_dir(root, dirs[i]);
	put(root, "deskgate/jail-6", "a file, not a group");
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &s), 0);
	cr_assert_eq(s.n, 3, "saw %d", s.n);
	cr_assert(seen(&s, 0) && seen(&s, 42) && seen(&s, 65535));
	struct slots stop = {.stop_after = 1};
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &stop), 99);
	cr_assert_eq(stop.n, 1);
	rm_tree(root);
}

/* Jails of every instance are visited, each with its instance; directories
 * that are not instance names are not walked into. */
Test(cgroup_fake, foreach_every_instance)
{
	struct dg_cgroup_sys sys;
	struct dg_err err = {""};
	char *root = fake_v2("cpu memory pids");
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	static const char *const dirs[] = {"deskgate", "deskgate/jail-1", "deskgate/gw-a",
					   "deskgate/gw-a/jail-2", "deskgate/gw-b",
					   "deskgate/gw-b/jail-3", "deskgate/gw-b/jail-x",
					   "deskgate/Upper", "deskgate/Upper/jail-4",
					   "deskgate/-x", "deskgate/-x/jail-5"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		make_dir(root, dirs[i]);
	struct slots s = {.n = 0};
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &s), 0);
	cr_assert_eq(s.n, 3, "saw %d", s.n);
	for (int i = 0; i < s.n; i++) {
		const char *want = s.seen[i] == 1 ? "" : s.seen[i] == 2 ? "gw-a" : "gw-b";
		cr_assert(s.seen[i] >= 1 && s.seen[i] <= 3, "slot %u", s.seen[i]);
		cr_assert_str_eq(s.instance[i], want, "slot %u", s.seen[i]);
	}
	rm_tree(root);
}

/* The instance's group goes with its last jail, and stays while another
 * jail of the instance is there. */
Test(cgroup_fake, destroy_removes_empty_instance_group)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup a, b;
	struct dg_err err = {""};
	char *root = fake_v1();
	cr_assert_eq(dg_cgroup_detect(root, &sys, &err), 0, "%s", err.msg);
	struct dg_limits l = limits(64, 8, 1);
	cr_assert_eq(dg_cgroup_create(&sys, 1, &l, &a, &err), 0, "%s", err.msg);
	cr_assert_eq(dg_cgroup_create(&sys, 2, &l, &b, &err), 0, "%s", err.msg);
	/* The plain tree's setting files would keep the groups from going. */
	const char *files[] = {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "pids.max",
			       "cpu.cfs_period_us", "cpu.cfs_quota_us"};
	const struct dg_cgroup *both[] = {&a, &b};
	for (int j = 0; j < 2; j++) {
		const char *dirs[] = {both[j]->memory, both[j]->memory, both[j]->pids, both[j]->cpu,
				      both[j]->cpu};
		for (int i = 0; i < 5; i++) {
			char f[PATH_MAX];
			pjoin(f, dirs[i], files[i]);
			unlink(f);
		}
	}
	char inst[PATH_MAX];
	snprintf(inst, sizeof(inst), "%s/memory/deskgate/%s", root, dg_instance());
	cr_assert_eq(dg_cgroup_destroy(&a, &err), 0, "%s", err.msg);
	cr_assert(exists(inst), "another jail of the instance is there");
	cr_assert_eq(dg_cgroup_destroy(&b, &err), 0, "%s", err.msg);
	cr_assert(!exists(inst), "%s left behind", inst);
	snprintf(inst, sizeof(inst), "%s/memory/deskgate", root);
	cr_assert(exists(inst), "the deskgate group itself stays");
	rm_tree(root);
}

Test(cgroup_fake, instance_names_at_their_edges)
{
	char name[DG_INSTANCE_MAX + 2];
	memset(name, 'a', DG_INSTANCE_MAX);
	name[DG_INSTANCE_MAX] = '\0';
	cr_assert(dg_instance_valid(name), "%d bytes", DG_INSTANCE_MAX);
	name[DG_INSTANCE_MAX] = 'a';
	name[DG_INSTANCE_MAX + 1] = '\0';
	cr_assert(!dg_instance_valid(name), "%d bytes", DG_INSTANCE_MAX + 1);
	static const char *const good[] = {"a", "0", "gw-1", "test-12345", "a--b", "a-"};
	static const char *const bad[] = {"", "-a", "A", "gw_1", "gw.1", "gw/1", "jail-1",
					  "jail-", "a b", "é"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_assert(dg_instance_valid(good[i]), "%s", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert(!dg_instance_valid(bad[i]), "%s", bad[i]);
	cr_assert(!dg_instance_valid(NULL));
	struct dg_err err = {""};
	cr_assert_eq(dg_instance_set("Bad", &err), -EINVAL);
	cr_assert(strstr(err.msg, "Bad") && strstr(err.msg, "[a-z0-9-]"), "%s", err.msg);
	cr_assert_str_eq(dg_instance(), dg_test_instance(), "a refused name changes nothing");
}

Test(cgroup_fake, kill_empty_or_missing_group_is_immediate)
{
	struct dg_cgroup cg = {.version = DG_CGROUP_V2};
	struct dg_err err = {""};
	char *root = fake_root();
	pjoin(cg.v2, root, "nonexistent");
	cr_assert_eq(dg_cgroup_kill(&cg, &err), 0, "%s", err.msg);
	strcpy(cg.v2, root);
	put(root, "cgroup.procs", "");
	/* Best of three batches of 100; under the first wait step (200 us) each. */
	double best = 1;
	for (int batch = 0; batch < 3; batch++) {
		double t0 = dg_test_now();
		for (int i = 0; i < 100; i++)
			cr_assert_eq(dg_cgroup_kill(&cg, &err), 0, "%s", err.msg);
		double took = dg_test_now() - t0;
		best = took < best ? took : best;
	}
	cr_assert_lt(best, 0.015, "100 kills of an empty group took %.1f ms", best * 1e3);
	rm_tree(root);
}

Test(cgroup_fake, kill_refuses_the_caller)
{
	struct dg_cgroup cg = {.version = DG_CGROUP_V2};
	struct dg_err err = {""};
	char *root = fake_root();
	char text[32];
	strcpy(cg.v2, root);
	snprintf(text, sizeof(text), "%d\n", (int)getpid());
	put(root, "cgroup.procs", text);
	cr_assert_eq(dg_cgroup_kill(&cg, &err), -EDEADLK);
	cr_assert(strstr(err.msg, "caller"), "%s", err.msg);
	rm_tree(root);
}

/* Without cgroup.kill the v2 path falls back to SIGKILL per pid; the fake
 * cgroup.procs never empties, so the bounded wait ends in -ETIMEDOUT. */
Test(cgroup_fake, kill_fallback_signals_and_times_out, .timeout = 30)
{
	struct dg_cgroup cg = {.version = DG_CGROUP_V2};
	struct dg_err err = {""};
	char *root = fake_root();
	char text[32];
	strcpy(cg.v2, root);
	pid_t child = fork_sleeper();
	snprintf(text, sizeof(text), "%d\n", (int)child);
	put(root, "cgroup.procs", text);
	double t0 = dg_test_now();
	cr_assert_eq(dg_cgroup_kill(&cg, &err), -ETIMEDOUT);
	double took = dg_test_now() - t0;
	cr_assert(took >= DG_CGROUP_KILL_TIMEOUT_MS / 1000.0 - 0.01 &&
			  took < DG_CGROUP_KILL_TIMEOUT_MS / 1000.0 + 1.0,
		  "took %.3f s", took);
	cr_assert(strstr(err.msg, "still in") && strstr(err.msg, root), "%s", err.msg);
	assert_killed(child);
	rm_tree(root);
}

/* ---- the host's hierarchy ---- */

static void real_sys(struct dg_cgroup_sys *sys)
{
	struct dg_err err = {""};
	if (geteuid() != 0)
		cr_skip_test("needs root");
	if (dg_cgroup_detect(DG_CGROUP_ROOT_DEFAULT, sys, &err) != 0)
		cr_skip_test("no usable cgroup hierarchy: %s", err.msg);
}

/* Takes the slot lock the way desktop/spawner/jail.c does (<run dir>/slots/N.lock,
 * flock), waiting at most SLOT_LOCK_WAIT_S; held until the test process
 * exits. */
static void hold_slot(uint32_t slot)
{
	static uint32_t held[16];
	static int n_held;
	for (int i = 0; i < n_held; i++)
		if (held[i] == slot)
			return;
	const char *run = getenv("DESKGATE_RUN_DIR");
	char dir[PATH_MAX], path[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s", run && run[0] == '/' ? run : DG_RUN_DIR_DEFAULT);
	cr_assert(mkdir(dir, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/slots", dir);
	cr_assert(mkdir(path, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/slots/%u.lock", dir, (unsigned)slot);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	double give_up = dg_test_now() + SLOT_LOCK_WAIT_S;
	while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		cr_assert_eq(errno, EWOULDBLOCK, "flock %s: %s", path, strerror(errno));
		cr_assert_lt(dg_test_now(), give_up, "%s is held by another process", path);
		usleep(10000);
	}
	if (n_held < 16)
		held[n_held++] = slot;
}

static void real_create(const struct dg_cgroup_sys *sys, uint32_t slot, struct dg_limits l,
			struct dg_cgroup *cg)
{
	struct dg_err err = {""};
	hold_slot(slot);
	cr_assert_eq(dg_cgroup_create(sys, slot, &l, cg, &err), 0, "%s", err.msg);
}

static void real_destroy(const struct dg_cgroup *cg)
{
	struct dg_err err = {""};
	cr_assert_eq(dg_cgroup_destroy(cg, &err), 0, "%s", err.msg);
	const char *dirs[] = {cg->v2, cg->memory, cg->pids, cg->cpu};
	for (int i = 0; i < 4; i++)
		cr_assert(!dirs[i][0] || !exists(dirs[i]), "%s still exists", dirs[i]);
}

/* True when /proc/pid/cgroup puts pid in the jail for controller (v1) or in
 * the unified group (v2, controller NULL). */
static bool in_group(pid_t pid, const char *controller, uint32_t slot)
{
	char path[64], want[128], line[512];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	snprintf(want, sizeof(want), ":%s:/deskgate/%s/jail-%u\n", controller ? controller : "",
		 dg_instance(), (unsigned)slot);
	FILE *f = fopen(path, "re");
	cr_assert(f, "%s: %s", path, strerror(errno));
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		found = colon && strcmp(colon, want) == 0;
	}
	fclose(f);
	return found;
}

/* A child that waits for one byte on the returned fd, then runs fn. */
static pid_t fork_gated(void (*fn)(void), int *gate)
{
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(3);
		close_range(3, ~0u, 0);
		alarm(SLEEPER_LIFETIME_S);
		fn();
		_exit(0);
	}
	close(p[0]);
	*gate = p[1];
	return pid;
}

static void open_gate(int gate)
{
	cr_assert_eq(write(gate, "x", 1), 1);
	close(gate);
}

static void memory_hog(void)
{
	size_t len = (size_t)512 << 20;
	volatile char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		_exit(4);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	_exit(5);
}

static void fork_until_refused(void)
{
	for (int i = 0; i < 64; i++) {
		pid_t c = fork();
		if (c == 0)
			become_sleeper();
		if (c < 0)
			_exit(errno == EAGAIN ? 0 : 6);
	}
	_exit(7);
}

Test(cgroup_real, lifecycle, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_cgroup_events ev;
	struct dg_err err = {""};
	uint32_t slot = REAL_SLOT_BASE;
	real_sys(&sys);
	real_create(&sys, slot, limits(64, 16, 0.5), &cg);
	if (cg.version == DG_CGROUP_V1) {
		cr_assert_str_eq(slurp(cg.memory, "memory.limit_in_bytes"), "67108864");
		if (exists("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"))
			cr_assert_str_eq(slurp(cg.memory, "memory.memsw.limit_in_bytes"), "67108864");
		cr_assert_str_eq(slurp(cg.pids, "pids.max"), "16");
		cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_period_us"), "100000");
		cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_quota_us"), "50000");
		cr_assert(strstr(slurp(cg.memory, "memory.oom_control"), "oom_kill_disable 0"));
	} else {
		cr_assert_str_eq(slurp(cg.v2, "memory.max"), "67108864");
		cr_assert_str_eq(slurp(cg.v2, "pids.max"), "16");
		cr_assert_str_eq(slurp(cg.v2, "cpu.max"), "50000 100000");
	}
	pid_t child = fork_sleeper();
	cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
	if (cg.version == DG_CGROUP_V1) {
		cr_assert(in_group(child, "memory", slot));
		cr_assert(in_group(child, "pids", slot));
	} else {
		cr_assert(in_group(child, NULL, slot));
	}
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_eq(ev.oom_kills, 0);
	cr_assert_eq(ev.pids_max_hits, 0);
	cr_assert_eq(dg_cgroup_kill(&cg, &err), 0, "%s", err.msg);
	assert_killed(child);
	cr_assert_str_eq(slurp(cg.version == DG_CGROUP_V1 ? cg.pids : cg.v2, "cgroup.procs"), "");
	real_destroy(&cg);
	cr_assert_eq(dg_cgroup_destroy(&cg, &err), 0, "second destroy: %s", err.msg);
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "gone group: %s", err.msg);
	cr_assert_eq(ev.oom_kills, 0);
}

Test(cgroup_real, destroy_kills_what_is_inside, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	real_sys(&sys);
	real_create(&sys, REAL_SLOT_BASE + 1, limits(64, 16, 1), &cg);
	pid_t child = fork_sleeper();
	cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
	real_destroy(&cg);
	assert_killed(child);
}

Test(cgroup_real, oom_killed_and_counted, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_cgroup_events ev;
	struct dg_err err = {""};
	int gate, status;
	real_sys(&sys);
	real_create(&sys, REAL_SLOT_BASE + 2, limits(32, 16, 1), &cg);
	pid_t child = fork_gated(memory_hog, &gate);
	cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
	open_gate(gate);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "hog status %#x", status);
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_geq(ev.oom_kills, 1);
	real_destroy(&cg);
}

Test(cgroup_real, pids_max_refuses_fork_and_is_counted, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_cgroup_events ev;
	struct dg_err err = {""};
	int gate, status;
	real_sys(&sys);
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	real_create(&sys, REAL_SLOT_BASE + 3, limits(64, 8, 1), &cg);
	pid_t child = fork_gated(fork_until_refused, &gate);
	cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
	open_gate(gate);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forker status %#x", status);
	cr_assert_eq(dg_cgroup_read_events(&cg, &ev, &err), 0, "%s", err.msg);
	cr_assert_geq(ev.pids_max_hits, 1);
	cr_assert_eq(dg_cgroup_kill(&cg, &err), 0, "%s", err.msg);
	int reaped = 0;
	while (waitpid(-1, &status, 0) > 0) {
		cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
		reaped++;
	}
	cr_assert_eq(reaped, 7, "pids.max 8 allows the forker and 7 children, reaped %d", reaped);
	real_destroy(&cg);
}

Test(cgroup_real, minimum_cpus_quota, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	real_sys(&sys);
	real_create(&sys, REAL_SLOT_BASE + 4, limits(64, 8, DG_LIMIT_CPUS_MIN / 4), &cg);
	if (cg.version == DG_CGROUP_V1)
		cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_quota_us"), "1000");
	else
		cr_assert_str_eq(slurp(cg.v2, "cpu.max"), "1000 100000");
	real_destroy(&cg);
	real_create(&sys, REAL_SLOT_BASE + 4, limits(64, 8, DG_LIMIT_CPUS_MIN), &cg);
	if (cg.version == DG_CGROUP_V1)
		cr_assert_str_eq(slurp(cg.cpu, "cpu.cfs_quota_us"), "1000");
	real_destroy(&cg);
}

/* A group left by a dead owner: creating the slot again kills what is in it
 * and starts from an empty group. */
Test(cgroup_real, stale_group_replaced, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	real_sys(&sys);
	real_create(&sys, REAL_SLOT_BASE + 5, limits(64, 16, 1), &cg);
	pid_t child = fork_sleeper();
	cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
	real_create(&sys, REAL_SLOT_BASE + 5, limits(128, 32, 1), &cg);
	assert_killed(child);
	const char *dir = cg.version == DG_CGROUP_V1 ? cg.pids : cg.v2;
	cr_assert_str_eq(slurp(dir, "cgroup.procs"), "");
	cr_assert_str_eq(slurp(dir, "pids.max"), "32");
	real_destroy(&cg);
}

Test(cgroup_real, refused_value_named_and_cleaned_up, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	real_sys(&sys);
	hold_slot(REAL_SLOT_BASE + 6);
	struct dg_limits l = limits(64, 50 * 1000 * 1000, 1); /* above PID_MAX_LIMIT */
	cr_assert_eq(dg_cgroup_create(&sys, REAL_SLOT_BASE + 6, &l, &cg, &err), -EINVAL);
	cr_assert(strstr(err.msg, "pids.max") && strstr(err.msg, strerror(EINVAL)), "%s", err.msg);
	const char *dirs[] = {cg.v2, cg.memory, cg.pids, cg.cpu};
	for (int i = 0; i < 4; i++)
		cr_assert(!dirs[i][0] || !exists(dirs[i]), "%s left behind", dirs[i]);
}

Test(cgroup_real, foreach_lists_created_slots, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup a, b;
	real_sys(&sys);
	real_create(&sys, REAL_SLOT_BASE + 7, limits(64, 8, 1), &a);
	real_create(&sys, REAL_SLOT_BASE + 8, limits(64, 8, 1), &b);
	struct slots s = {.n = 0};
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &s), 0);
	cr_assert(seen(&s, REAL_SLOT_BASE + 7) && seen(&s, REAL_SLOT_BASE + 8));
	real_destroy(&a);
	real_destroy(&b);
	struct slots after = {.n = 0};
	cr_assert_eq(dg_cgroup_foreach_jail(&sys, collect, &after), 0);
	cr_assert(!seen(&after, REAL_SLOT_BASE + 7) && !seen(&after, REAL_SLOT_BASE + 8));
}

/* Budget: a jail's start and teardown take a few ms in all, so the cgroup
 * share must stay well inside it. The bound is loose for loaded machines;
 * the measured times are printed. */
Test(cgroup_real, create_attach_destroy_time, .timeout = 120)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_err err = {""};
	enum { ROUNDS = 50 };
	double create = 0, attach = 0, destroy = 0, empty_kill = 0;
	real_sys(&sys);
	for (int i = 0; i < ROUNDS; i++) {
		pid_t child = fork_sleeper();
		double t0 = dg_test_now();
		real_create(&sys, REAL_SLOT_BASE + 9, limits(64, 16, 1), &cg);
		double t1 = dg_test_now();
		cr_assert_eq(place(&cg, child, &err), 0, "%s", err.msg);
		double t2 = dg_test_now();
		cr_assert_eq(dg_cgroup_destroy(&cg, &err), 0, "%s", err.msg);
		double t3 = dg_test_now();
		assert_killed(child);
		create += t1 - t0, attach += t2 - t1, destroy += t3 - t2;
	}
	/* Best of a few batches, so one preemption does not decide. */
	real_create(&sys, REAL_SLOT_BASE + 9, limits(64, 16, 1), &cg);
	empty_kill = 1;
	for (int batch = 0; batch < 5; batch++) {
		double t0 = dg_test_now();
		for (int i = 0; i < ROUNDS; i++)
			cr_assert_eq(dg_cgroup_kill(&cg, &err), 0, "%s", err.msg);
		double took = dg_test_now() - t0;
		empty_kill = took < empty_kill ? took : empty_kill;
	}
	real_destroy(&cg);
	fprintf(stderr,
		"cgroup v%d per jail: create %.3f ms, attach %.3f ms, destroy (kill 1 process) "
		"%.3f ms, total %.3f ms; kill of an empty group %.1f us\n",
		(int)sys.version, create * 1e3 / ROUNDS, attach * 1e3 / ROUNDS,
		destroy * 1e3 / ROUNDS, (create + attach + destroy) * 1e3 / ROUNDS,
		empty_kill * 1e6 / ROUNDS);
	cr_assert_lt((create + attach + destroy) / ROUNDS, 0.050);
	/* Shorter than the first wait step (200 us): an empty group is not waited on. */
	cr_assert_lt(empty_kill / ROUNDS, 0.000150, "kill of an empty group: %.1f us",
		     empty_kill * 1e6 / ROUNDS);
}

/* ---- entering a group at clone (dg_cgroup_clone, dg_cgroup_entry_join) ----
 *
 * Both versions are exercised on every host, whichever one deskgate uses
 * there: each test mounts a hierarchy of its own under /tmp, a cgroup2 one
 * (the unified hierarchy can be mounted again beside the host's) or a named
 * v1 one with no controller (name=...), so the v2 path runs on a v1 host and
 * the v1 path on a v2 host. No controller is needed to see where a process
 * was created or moved. The host's own hierarchy is covered by
 * cgroup_real.clone_join_in_jail_group. */

struct own_mount {
	char dir[256];        /* the mount point */
	char group[PATH_MAX]; /* a group in it */
	char rel[64];         /* the group's path as /proc/PID/cgroup shows it */
	char key[64];         /* its hierarchy field there: "" (v2) or name=... */
};

/* A dg_cgroup for the group of m: v2, or v1 with the three controllers'
 * directories all the one named hierarchy's group. */
static void own_cgroup(const struct own_mount *m, bool v2, struct dg_cgroup *cg)
{
	memset(cg, 0, sizeof(*cg));
	cg->version = v2 ? DG_CGROUP_V2 : DG_CGROUP_V1;
	snprintf(v2 ? cg->v2 : cg->memory, PATH_MAX, "%s", m->group);
	if (!v2) {
		snprintf(cg->pids, PATH_MAX, "%s", m->group);
		snprintf(cg->cpu, PATH_MAX, "%s", m->group);
	}
}

/* The mount is made in a mount namespace of the test's own process, so it
 * goes with that process even when an assertion ends the test early (the
 * group directory, if left, is an empty one named after the test's pid).
 * cg: the group as a dg_cgroup (own_cgroup). */
static void mount_own(struct own_mount *m, bool v2, struct dg_cgroup *cg)
{
	cr_assert_eq(geteuid(), 0, "mounting a cgroup hierarchy needs root");
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare(CLONE_NEWNS): %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0,
		     "making / private: %s", strerror(errno));
	char *dir = fake_root();
	snprintf(m->dir, sizeof(m->dir), "%s", dir);
	free(dir);
	char opts[64];
	snprintf(opts, sizeof(opts), "none,name=dgtest%d", (int)getpid());
	int r = v2 ? mount("none", m->dir, "cgroup2", 0, NULL)
		   : mount("cgroup", m->dir, "cgroup", 0, opts);
	cr_assert_eq(r, 0, "mount %s at %s: %s", v2 ? "cgroup2" : opts, m->dir, strerror(errno));
	snprintf(m->key, sizeof(m->key), "%s", v2 ? "" : opts + strlen("none,"));
	snprintf(m->rel, sizeof(m->rel), "/dg-entry-%d", (int)getpid());
	snprintf(m->group, sizeof(m->group), "%s%s", m->dir, m->rel);
	cr_assert(mkdir(m->group, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", m->group,
		  strerror(errno));
	own_cgroup(m, v2, cg);
}

static void unmount_own(struct own_mount *m)
{
	cr_assert(rmdir(m->group) == 0 || errno == ENOENT, "rmdir %s: %s", m->group,
		  strerror(errno));
	cr_assert_eq(umount2(m->dir, MNT_DETACH), 0, "umount %s: %s", m->dir, strerror(errno));
	rmdir(m->dir);
}

/* True when the caller is in m's group (its line of /proc/self/cgroup). */
static bool self_in(const struct own_mount *m)
{
	char want[256], line[512];
	snprintf(want, sizeof(want), ":%s:%s\n", m->key, m->rel);
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return false;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');
		found = colon && strcmp(colon, want) == 0;
	}
	fclose(f);
	return found;
}

/* Exit codes of the cloned child, each naming the step that went wrong. */
enum { CHILD_OK, CHILD_PLACED_WRONG, CHILD_JOIN_FAILED, CHILD_NOT_IN, CHILD_FDS_LEFT };

/* Clones into m's group with flags, as jail.c does; the child checks where
 * the kernel put it (in the group at once when want_placed), joins, checks
 * again and that the entry's descriptors are gone. Returns its exit code;
 * *msg gets the child's error message when the join failed. */
static int clone_and_check(const struct own_mount *m, const struct dg_cgroup *cg, uint64_t flags,
			   bool want_placed, char *msg, size_t msg_len)
{
	struct dg_cgroup_entry e;
	struct dg_err err = {""};
	int p[2];
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(dg_cgroup_entry_open(cg, &e, &err), 0, "%s", err.msg);
	pid_t pid = dg_cgroup_clone(&e, flags, &err);
	cr_assert(pid >= 0, "%s", err.msg);
	if (pid == 0) {
		close(p[0]);
		int fds[DG_CGROUP_ENTRY_FDS];
		memcpy(fds, e.fd, sizeof(fds));
		if (e.placed != want_placed || self_in(m) != want_placed)
			_exit(CHILD_PLACED_WRONG);
		if (dg_cgroup_entry_join(cg, &e, &err) != 0) {
			ssize_t k = write(p[1], err.msg, strlen(err.msg));
			(void)k;
			_exit(CHILD_JOIN_FAILED);
		}
		if (!self_in(m))
			_exit(CHILD_NOT_IN);
		for (int i = 0; i < DG_CGROUP_ENTRY_FDS; i++)
			if (e.fd[i] != -1 || (fds[i] >= 0 && fcntl(fds[i], F_GETFD) != -1))
				_exit(CHILD_FDS_LEFT);
		_exit(CHILD_OK);
	}
	close(p[1]);
	dg_cgroup_entry_close(&e);
	for (int i = 0; i < DG_CGROUP_ENTRY_FDS; i++)
		cr_assert_eq(e.fd[i], -1);
	ssize_t k = read(p[0], msg, msg_len - 1);
	msg[k > 0 ? k : 0] = '\0';
	close(p[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "child status %#x", st);
	return WEXITSTATUS(st);
}

/* The jail's flags: a new user namespace (whose uid is not mapped yet) and
 * pid namespace; the move must work from there. */
#define ENTRY_FLAGS ((uint64_t)(CLONE_NEWUSER | CLONE_NEWPID))

/* A child cloned with the jail's flags into a group of a hierarchy of
 * version 2 (v2) or 1 ends up in it: placed by the kernel, or by its join. */
static void entry_case(bool v2)
{
	struct own_mount m;
	struct dg_cgroup cg;
	char msg[DG_ERR_MAX];
	mount_own(&m, v2, &cg);
	int code = clone_and_check(&m, &cg, ENTRY_FLAGS, v2, msg, sizeof(msg));
	cr_assert_eq(code, CHILD_OK, "child exit %d: %s", code, msg);
	unmount_own(&m);
}

Test(cgroup_entry, v2_kernel_creates_child_in_group, .timeout = 30)
{
	entry_case(true);
}

/* A caller whose clone3 is refused with ENOSYS (older kernels, container
 * seccomp profiles): plain clone, and the child joins through cgroup.procs. */
Test(cgroup_entry, v2_without_clone3_child_joins, .timeout = 30)
{
	struct own_mount m;
	struct dg_cgroup cg;
	mount_own(&m, true, &cg);
	pid_t tester = fork();
	cr_assert(tester >= 0);
	if (tester == 0) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
			_exit(100);
		char msg[DG_ERR_MAX];
		_exit(clone_and_check(&m, &cg, ENTRY_FLAGS, false, msg, sizeof(msg)));
	}
	int st;
	cr_assert_eq(waitpid(tester, &st, 0), tester);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == CHILD_OK, "tester status %#x", st);
	unmount_own(&m);
}

Test(cgroup_entry, v1_child_moves_itself, .timeout = 30)
{
	entry_case(false);
}

/* The group went away between open and join (a concurrent teardown): the
 * join fails, naming the file, and the child stays where it was. */
Test(cgroup_entry, v1_join_into_removed_group_named, .timeout = 30)
{
	struct own_mount m;
	struct dg_cgroup cg;
	struct dg_cgroup_entry e;
	struct dg_err err = {""};
	mount_own(&m, false, &cg);
	cr_assert_eq(dg_cgroup_entry_open(&cg, &e, &err), 0, "%s", err.msg);
	cr_assert_eq(rmdir(m.group), 0, "rmdir %s: %s", m.group, strerror(errno));
	int r = dg_cgroup_entry_join(&cg, &e, &err);
	cr_assert_lt(r, 0);
	cr_assert(strstr(err.msg, m.group) && strstr(err.msg, "/tasks"), "%s", err.msg);
	cr_assert(!self_in(&m));
	unmount_own(&m);
}

Test(cgroup_entry, open_missing_group_named, .timeout = 30)
{
	struct dg_cgroup cg;
	struct dg_cgroup_entry e;
	struct dg_err err = {""};
	char *root = fake_root();
	for (int v2 = 0; v2 < 2; v2++) {
		memset(&cg, 0, sizeof(cg));
		cg.version = v2 ? DG_CGROUP_V2 : DG_CGROUP_V1;
		snprintf(cg.v2, PATH_MAX, "%s/gone", root);
		snprintf(cg.memory, PATH_MAX, "%s/gone", root);
		snprintf(cg.pids, PATH_MAX, "%s/gone", root);
		snprintf(cg.cpu, PATH_MAX, "%s/gone", root);
		cr_assert_eq(dg_cgroup_entry_open(&cg, &e, &err), -ENOENT);
		cr_assert(strstr(err.msg, root) && strstr(err.msg, "/gone"), "%s", err.msg);
		for (int i = 0; i < DG_CGROUP_ENTRY_FDS; i++)
			cr_assert_eq(e.fd[i], -1);
	}
	rm_tree(root);
}

/* The host's hierarchy, as a jail starts: created with limits, the child
 * cloned with the jail's flags and in the group after its join. Prints the
 * child's join time beside the parent's migration (place()). */
Test(cgroup_real, clone_join_in_jail_group, .timeout = 60)
{
	struct dg_cgroup_sys sys;
	struct dg_cgroup cg;
	struct dg_cgroup_entry e;
	struct dg_err err = {""};
	uint32_t slot = REAL_SLOT_BASE + 10;
	real_sys(&sys);
	real_create(&sys, slot, limits(64, 16, 1), &cg);
	int gate[2], back[2];
	cr_assert_eq(pipe2(gate, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(back, O_CLOEXEC), 0);
	cr_assert_eq(dg_cgroup_entry_open(&cg, &e, &err), 0, "%s", err.msg);
	pid_t pid = dg_cgroup_clone(&e, ENTRY_FLAGS, &err);
	cr_assert(pid >= 0, "%s", err.msg);
	if (pid == 0) {
		double t0 = dg_test_now();
		int r = dg_cgroup_entry_join(&cg, &e, &err);
		double took = dg_test_now() - t0;
		ssize_t k = write(back[1], &took, sizeof(took));
		char c;
		k = read(gate[0], &c, 1);
		(void)k;
		_exit(r == 0 ? 0 : 1);
	}
	dg_cgroup_entry_close(&e);
	double took = 0;
	cr_assert_eq(read(back[0], &took, sizeof(took)), (ssize_t)sizeof(took));
	if (cg.version == DG_CGROUP_V1) {
		cr_assert(in_group(pid, "memory", slot));
		cr_assert(in_group(pid, "pids", slot));
		cr_assert(in_group(pid, "cpu", slot));
	} else {
		cr_assert(in_group(pid, NULL, slot));
	}
	cr_assert_eq(write(gate[1], "x", 1), 1);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
	pid_t other = fork_sleeper();
	double t0 = dg_test_now();
	cr_assert_eq(place(&cg, other, &err), 0, "%s", err.msg);
	double attach = dg_test_now() - t0;
	fprintf(stderr, "cgroup v%d: child's own join %.3f ms (%s), parent's migration %.3f ms\n",
		(int)cg.version, took * 1e3,
		cg.version == DG_CGROUP_V2 ? "created in the group by clone3" : "writes 0 to tasks",
		attach * 1e3);
	real_destroy(&cg);
	assert_killed(other);
	for (int i = 0; i < 2; i++) {
		close(gate[i]);
		close(back[i]);
	}
}
