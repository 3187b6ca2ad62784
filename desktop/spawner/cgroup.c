/* cgroup: resource limits for one jail, on cgroup v2 or v1 (see cgroup-priv.h).
 *
 * Files that hold settings are opened with O_CREAT. On cgroupfs that changes
 * nothing (an existing file is opened, a missing one is refused), and it lets
 * the same code fill a plain directory tree, which is how the tests check what
 * is written. Control files (cgroup.procs, cgroup.kill) are never created.
 */
#include "desktop/spawner/cgroup-priv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Longest waits between looks at a group that is emptying: short first,
 * since a killed process is usually gone within a fraction of a millisecond.
 * The wait ends early when the process being watched exits. */
#define WAIT_FIRST_US 200
#define WAIT_MAX_US 10000

/* Buffer for the small files (controller lists, event counters). */
#define SMALL_FILE_MAX 4096

#define CONTROLLERS_ENABLE "+memory +pids +cpu"

static const char *const needed_controllers[] = {"memory", "pids", "cpu"};
#define N_CONTROLLERS (sizeof(needed_controllers) / sizeof(needed_controllers[0]))

/* ---- paths and files ---- */

/* out (PATH_MAX bytes) = dir/name; -ENAMETOOLONG when it does not fit. */
static int join(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, name);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int too_long(struct dg_err *err, const char *dir, const char *name)
{
	return dg_err_set(err, -ENAMETOOLONG, "cgroup path too long: %s/%s", dir, name);
}

static int fail_errno(struct dg_err *err, int e, const char *what, const char *path)
{
	return dg_err_set(err, -e, "%s %s: %s", what, path, strerror(e));
}

/* Reads at most cap - 1 bytes of path into buf and NUL-terminates it.
 * Returns the length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	while (len + 1 < cap) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

/* True when word is one of the whitespace-separated words of list. */
static bool has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t\n");
		size_t l = strcspn(p, " \t\n");
		if (l == wl && memcmp(p, word, wl) == 0)
			return true;
		p += l;
	}
	return false;
}

enum write_kind {
	W_CONTROL,  /* must exist; never created */
	W_SETTING,  /* must exist on cgroupfs; created in a plain tree */
	W_OPTIONAL, /* like W_SETTING, but absence is not an error */
};

/* After open(O_CREAT) failed with e: true when the file is simply not there
 * (cgroupfs refuses to create with EACCES). */
static bool is_absent(const char *path, int e)
{
	if (e == ENOENT)
		return true;
	return e == EACCES && access(path, F_OK) < 0 && errno == ENOENT;
}

/* Writes value to dir/name in one write(2), as cgroup files require.
 * Returns 0, 1 when a W_OPTIONAL file does not exist, or -errno with err
 * naming the file. */
static int write_file(const char *dir, const char *name, const char *value, enum write_kind kind,
		      struct dg_err *err)
{
	char path[PATH_MAX];
	if (join(path, dir, name))
		return too_long(err, dir, name);
	int fd = open(path, O_WRONLY | O_CLOEXEC | (kind == W_CONTROL ? 0 : O_CREAT), 0644);
	if (fd < 0) {
		int e = errno;
		if (is_absent(path, e)) {
			if (kind == W_OPTIONAL)
				return 1;
			e = ENOENT;
		}
		return fail_errno(err, e, "opening", path);
	}
	size_t len = strlen(value);
	ssize_t n;
	do
		n = write(fd, value, len);
	while (n < 0 && errno == EINTR);
	int e = n < 0 ? errno : (size_t)n != len ? EIO : 0;
	close(fd);
	if (e)
		return dg_err_set(err, -e, "writing \"%s\" to %s: %s", value, path, strerror(e));
	return 0;
}

/* ---- waiting ---- */

struct backoff {
	uint64_t deadline_us;
	uint64_t step_us;
	pid_t exited; /* last pid whose pidfd said it exited */
};

static void backoff_start(struct backoff *b, unsigned timeout_ms)
{
	b->deadline_us = (uint64_t)dg_now_us() + (uint64_t)timeout_ms * 1000u;
	b->step_us = WAIT_FIRST_US;
	b->exited = 0;
}

/* Waits for the next, longer step, or until pid (when > 0) exits, whichever
 * comes first. A pid seen to exit is not watched again (a zombie that stays
 * listed would make every wait return at once): then the step is slept. False
 * (without waiting) once the deadline has passed. */
static bool backoff_wait(struct backoff *b, pid_t pid)
{
	uint64_t now = (uint64_t)dg_now_us();
	if (now >= b->deadline_us)
		return false;
	uint64_t us = b->step_us < b->deadline_us - now ? b->step_us : b->deadline_us - now;
	struct timespec ts = {.tv_sec = (time_t)(us / 1000000u), .tv_nsec = (long)(us % 1000000u) * 1000};
	b->step_us = b->step_us * 2 < WAIT_MAX_US ? b->step_us * 2 : WAIT_MAX_US;
	bool watch = pid > 0 && pid != b->exited;
	int fd = watch ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	if (fd >= 0) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (ppoll(&p, 1, &ts, NULL) > 0)
			b->exited = pid;
		close(fd);
	} else if (watch && errno == ESRCH) {
		b->exited = pid;
	} else {
		nanosleep(&ts, NULL);
	}
	return true;
}

/* ---- killing and removing one group directory ---- */

/* Counts the processes listed in dir/cgroup.procs, sending each SIGKILL when
 * send is set; *last is the last one listed. At most DG_CGROUP_READ_MAX bytes
 * are looked at; callers loop until the count is 0, so a longer list is
 * finished on a later pass. A missing group counts as empty. Returns the
 * count or -errno. */
static int scan_procs(const char *dir, bool send, pid_t *last, struct dg_err *err)
{
	char path[PATH_MAX], buf[SMALL_FILE_MAX];
	if (join(path, dir, "cgroup.procs"))
		return too_long(err, dir, "cgroup.procs");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : fail_errno(err, errno, "opening", path);
	int count = 0, r = 0;
	long pid = 0;
	size_t total = 0;
	pid_t self = getpid();
	while (r == 0 && total < DG_CGROUP_READ_MAX) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = fail_errno(err, errno, "reading", path);
		if (n <= 0)
			break;
		total += (size_t)n;
		for (ssize_t i = 0; i < n && r == 0; i++) {
			char c = buf[i];
			if (c >= '0' && c <= '9') {
				pid = pid > INT32_MAX / 10 ? INT32_MAX : pid * 10 + (c - '0');
				continue;
			}
			if (c != '\n' || pid <= 0 || pid >= INT32_MAX) {
				pid = 0;
				continue;
			}
			count++;
			*last = (pid_t)pid;
			if (pid == self)
				r = dg_err_set(err, -EDEADLK, "%s lists the caller itself (pid %ld)", path, pid);
			else if (send && kill((pid_t)pid, SIGKILL) < 0 && errno != ESRCH)
				r = fail_errno(err, errno, "killing a process of", path);
			pid = 0;
		}
	}
	close(fd);
	return r < 0 ? r : count;
}

/* Kills everything in the group at dir and waits, bounded by
 * DG_CGROUP_KILL_TIMEOUT_MS, until cgroup.procs is empty. On v2 cgroup.kill is
 * used when the kernel has it (it also catches processes forking meanwhile);
 * otherwise each listed pid gets SIGKILL, pass after pass. An empty or missing
 * group returns at once. */
static int kill_dir(const char *dir, bool v2, struct dg_err *err)
{
	if (!dir[0])
		return 0;
	bool send = !v2, tried_kill_file = !v2;
	pid_t last = 0;
	struct backoff b;
	backoff_start(&b, DG_CGROUP_KILL_TIMEOUT_MS);
	for (;;) {
		int n = scan_procs(dir, send, &last, err);
		if (n <= 0)
			return n;
		if (!tried_kill_file) {
			tried_kill_file = true;
			send = write_file(dir, "cgroup.kill", "1", W_CONTROL, NULL) != 0;
			continue;
		}
		if (!backoff_wait(&b, last))
			return dg_err_set(err, -ETIMEDOUT, "%d processes still in %s after %d ms", n,
					  dir, DG_CGROUP_KILL_TIMEOUT_MS);
	}
}

/* Removes the (emptied) group at dir. A missing one is fine; EBUSY, which the
 * kernel may report while the last processes finish exiting, is retried for
 * DG_CGROUP_RMDIR_TIMEOUT_MS. */
static int remove_dir(const char *dir, struct dg_err *err)
{
	if (!dir[0])
		return 0;
	struct backoff b;
	backoff_start(&b, DG_CGROUP_RMDIR_TIMEOUT_MS);
	for (;;) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		int e = errno;
		if (e != EBUSY || !backoff_wait(&b, 0))
			return fail_errno(err, e, "removing", dir);
	}
}

static int destroy_dir(const char *dir, bool v2, struct dg_err *err)
{
	int r = kill_dir(dir, v2, err);
	return r < 0 ? r : remove_dir(dir, err);
}

/* Creates dir; one that exists already is fine (shared parents). */
static int make_dir(const char *dir, struct dg_err *err)
{
	if (mkdir(dir, 0755) == 0 || errno == EEXIST)
		return 0;
	return fail_errno(err, errno, "creating", dir);
}

/* Creates a new, empty group at dir. A group of that name left by a dead owner
 * is killed and removed first. */
static int make_fresh(const char *dir, bool v2, struct dg_err *err)
{
	if (mkdir(dir, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return fail_errno(err, errno, "creating", dir);
	int r = destroy_dir(dir, v2, err);
	if (r < 0)
		return r;
	if (mkdir(dir, 0755) == 0)
		return 0;
	return fail_errno(err, errno, "creating", dir);
}

/* ---- detection ---- */

/* Empty when root is a usable v2 hierarchy; else why not, in why. */
static void check_v2(const char *root, char *why, size_t why_len)
{
	char path[PATH_MAX], list[SMALL_FILE_MAX], missing[64] = "";
	struct statfs sf;
	bool mounted = statfs(root, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
	why[0] = '\0';
	if (join(path, root, "cgroup.controllers")) {
		snprintf(why, why_len, "path too long");
		return;
	}
	ssize_t n = read_small(path, list, sizeof(list));
	if (n < 0) {
		snprintf(why, why_len, "%s cgroup.controllers (%s)",
			 mounted ? "cannot read" : "not a cgroup2 mount and no", strerror((int)-n));
		return;
	}
	for (size_t i = 0; i < N_CONTROLLERS; i++) {
		if (!has_word(list, needed_controllers[i])) {
			strcat(missing, " ");
			strcat(missing, needed_controllers[i]);
		}
	}
	if (missing[0])
		snprintf(why, why_len, "controller(s)%s missing from cgroup.controllers", missing);
}

/* Fills sys->v1_* when root has the v1 memory, pids and cpu hierarchies;
 * else says which are missing in why. */
static void check_v1(const char *root, struct dg_cgroup_sys *sys, char *why, size_t why_len)
{
	char *dirs[N_CONTROLLERS] = {sys->v1_memory, sys->v1_pids, sys->v1_cpu};
	char procs[PATH_MAX], missing[64] = "";
	bool long_path = false;
	for (size_t i = 0; i < N_CONTROLLERS; i++) {
		if (join(dirs[i], root, needed_controllers[i]) || join(procs, dirs[i], "cgroup.procs")) {
			long_path = true;
			continue;
		}
		if (access(procs, F_OK) < 0) {
			strcat(missing, " ");
			strcat(missing, needed_controllers[i]);
		}
	}
	why[0] = '\0';
	if (long_path)
		snprintf(why, why_len, "path too long");
	else if (missing[0])
		snprintf(why, why_len, "controller(s)%s missing (no <controller>/cgroup.procs)",
			 missing);
}

int dg_cgroup_detect(const char *root, struct dg_cgroup_sys *sys, struct dg_err *err)
{
	char why2[DG_ERR_MAX], why1[DG_ERR_MAX];
	if (!root)
		root = DG_CGROUP_ROOT_DEFAULT;
	memset(sys, 0, sizeof(*sys));
	if (strlen(root) >= sizeof(sys->v2_root))
		return dg_err_set(err, -ENAMETOOLONG, "cgroup root %.64s... is too long", root);
	check_v2(root, why2, sizeof(why2));
	if (!why2[0]) {
		sys->version = DG_CGROUP_V2;
		strcpy(sys->v2_root, root);
		return 0;
	}
	check_v1(root, sys, why1, sizeof(why1));
	if (!why1[0]) {
		sys->version = DG_CGROUP_V1;
		return 0;
	}
	memset(sys, 0, sizeof(*sys));
	return dg_err_set(err, -ENOENT, "no usable cgroup hierarchy under %s: v2: %s; v1: %s", root,
			  why2, why1);
}

/* ---- creation ---- */

/* The limits as the text written to the cgroup files. */
struct limit_text {
	char memory[24];   /* bytes */
	char pids[16];
	char quota[24];    /* microseconds per period */
	char period[16];
	char cpu_max[48];  /* v2 cpu.max: "<quota> <period>" */
};

static int format_limits(const struct dg_limits *lim, struct limit_text *t, struct dg_err *err)
{
	if (!lim || lim->memory_mb == 0 || lim->memory_mb > (UINT64_MAX >> 20))
		return dg_err_set(err, -EINVAL, "cgroup: memory limit out of range");
	if (lim->pids == 0)
		return dg_err_set(err, -EINVAL, "cgroup: pids limit must be at least 1");
	if (!isfinite(lim->cpus) || lim->cpus <= 0 || lim->cpus > DG_LIMIT_CPUS_MAX)
		return dg_err_set(err, -EINVAL, "cgroup: cpus must be in (0, %g]", DG_LIMIT_CPUS_MAX);
	double q = lim->cpus * DG_CGROUP_CPU_PERIOD_US + 0.5;
	uint64_t quota = q < DG_CGROUP_CPU_QUOTA_MIN_US ? DG_CGROUP_CPU_QUOTA_MIN_US : (uint64_t)q;
	snprintf(t->memory, sizeof(t->memory), "%" PRIu64, lim->memory_mb << 20);
	snprintf(t->pids, sizeof(t->pids), "%" PRIu32, lim->pids);
	snprintf(t->quota, sizeof(t->quota), "%" PRIu64, quota);
	snprintf(t->period, sizeof(t->period), "%d", DG_CGROUP_CPU_PERIOD_US);
	snprintf(t->cpu_max, sizeof(t->cpu_max), "%s %s", t->quota, t->period);
	return 0;
}

/* Lets the children of dir use memory, pids and cpu. Controllers already
 * enabled are not written again. */
static int enable_controllers(const char *dir, struct dg_err *err)
{
	char path[PATH_MAX], list[SMALL_FILE_MAX];
	if (join(path, dir, "cgroup.subtree_control"))
		return too_long(err, dir, "cgroup.subtree_control");
	bool all = read_small(path, list, sizeof(list)) >= 0;
	for (size_t i = 0; all && i < N_CONTROLLERS; i++)
		all = has_word(list, needed_controllers[i]);
	if (all)
		return 0;
	return write_file(dir, "cgroup.subtree_control", CONTROLLERS_ENABLE, W_SETTING, err);
}

static int write_v2_limits(const char *dir, const struct limit_text *t, struct dg_err *err)
{
	int r = write_file(dir, "memory.max", t->memory, W_SETTING, err);
	if (r == 0)
		r = write_file(dir, "memory.swap.max", "0", W_OPTIONAL, err);
	if (r >= 0)
		r = write_file(dir, "pids.max", t->pids, W_SETTING, err);
	if (r == 0)
		r = write_file(dir, "cpu.max", t->cpu_max, W_SETTING, err);
	return r < 0 ? r : 0;
}

static void remove_instance_dir(const char *jail_dir);

/* The jail group's parent: <root>/deskgate/<instance>. */
static int instance_dir(char *out, const char *root, struct dg_err *err)
{
	int n = snprintf(out, PATH_MAX, "%s/" DG_CGROUP_GROUP "/%s", root, dg_instance());
	if (n < 0 || n >= PATH_MAX)
		return too_long(err, root, DG_CGROUP_GROUP);
	return 0;
}

/* Creates <root>/deskgate and <root>/deskgate/<instance>, enabling the
 * controllers for their children on v2. */
static int make_parents(const char *root, bool v2, struct dg_err *err)
{
	char group[PATH_MAX], inst[PATH_MAX];
	if (join(group, root, DG_CGROUP_GROUP))
		return too_long(err, root, DG_CGROUP_GROUP);
	int r = instance_dir(inst, root, err);
	if (r == 0 && v2)
		r = enable_controllers(root, err);
	if (r == 0)
		r = make_dir(group, err);
	if (r == 0 && v2)
		r = enable_controllers(group, err);
	if (r == 0)
		r = make_dir(inst, err);
	if (r == 0 && v2)
		r = enable_controllers(inst, err);
	return r;
}

/* make_fresh below freshly made parents. Another jail of this instance
 * that ends meanwhile may remove the (then empty) instance group between
 * the two steps (remove_instance_dir): that is retried. */
static int make_jail_dir(const char *root, const char *dir, bool v2, struct dg_err *err)
{
	int r = -ENOENT;
	for (int i = 0; i < DG_CGROUP_PARENT_RETRIES && r == -ENOENT; i++) {
		r = make_parents(root, v2, err);
		if (r == 0)
			r = make_fresh(dir, v2, err);
	}
	return r;
}

static int create_v2(const struct dg_cgroup_sys *sys, const struct dg_cgroup *cg,
		     const struct limit_text *t, struct dg_err *err)
{
	int r = make_jail_dir(sys->v2_root, cg->v2, true, err);
	if (r < 0)
		return r;
	r = write_v2_limits(cg->v2, t, err);
	if (r < 0 && destroy_dir(cg->v2, true, NULL) == 0)
		remove_instance_dir(cg->v2);
	return r;
}

/* Memory without swap: memsw equal to the limit where the kernel accounts
 * swap, else swappiness 0. The OOM killer stays enabled (memory.oom_control is
 * left alone), so a hog is killed rather than the group frozen. */
static int write_v1_memory(const char *dir, const struct limit_text *t, struct dg_err *err)
{
	int r = write_file(dir, "memory.limit_in_bytes", t->memory, W_SETTING, err);
	if (r == 0)
		r = write_file(dir, "memory.memsw.limit_in_bytes", t->memory, W_OPTIONAL, err);
	if (r == 1)
		r = write_file(dir, "memory.swappiness", "0", W_OPTIONAL, err);
	return r < 0 ? r : 0;
}

static int write_v1_limits(const struct dg_cgroup *cg, const struct limit_text *t,
			   struct dg_err *err)
{
	int r = write_v1_memory(cg->memory, t, err);
	if (r == 0)
		r = write_file(cg->pids, "pids.max", t->pids, W_SETTING, err);
	if (r == 0)
		r = write_file(cg->cpu, "cpu.cfs_period_us", t->period, W_SETTING, err);
	if (r == 0)
		r = write_file(cg->cpu, "cpu.cfs_quota_us", t->quota, W_SETTING, err);
	return r;
}

/* Removes the v1 groups, memory last: stale cleanup finds jails by their
 * memory group, so it must outlive the others. First error wins. */
static int destroy_v1(const struct dg_cgroup *cg, struct dg_err *err)
{
	const char *dirs[] = {cg->cpu, cg->pids, cg->memory};
	int first = 0;
	for (size_t i = 0; i < 3; i++) {
		int r = destroy_dir(dirs[i], false, first ? NULL : err);
		if (r < 0 && first == 0)
			first = r;
	}
	return first;
}

static int create_v1(const struct dg_cgroup_sys *sys, const struct dg_cgroup *cg,
		     const struct limit_text *t, struct dg_err *err)
{
	const char *roots[N_CONTROLLERS] = {sys->v1_memory, sys->v1_pids, sys->v1_cpu};
	const char *dirs[N_CONTROLLERS] = {cg->memory, cg->pids, cg->cpu};
	int r = 0;
	for (size_t i = 0; r == 0 && i < N_CONTROLLERS; i++)
		r = make_jail_dir(roots[i], dirs[i], false, err);
	if (r == 0)
		r = write_v1_limits(cg, t, err);
	if (r < 0 && destroy_v1(cg, NULL) == 0) {
		for (size_t i = 0; i < N_CONTROLLERS; i++)
			remove_instance_dir(dirs[i]);
	}
	return r;
}

/* out = root/deskgate/<instance>/jail-<slot> (root/deskgate/jail-<slot> for
 * the empty instance: the layout before instances, still cleaned up), or ""
 * when that does not fit. */
static void jail_path(char *out, const char *root, const char *instance, uint32_t slot)
{
	int n = snprintf(out, PATH_MAX, "%s/" DG_CGROUP_GROUP "%s%s/" DG_CGROUP_PREFIX "%" PRIu32,
			 root, instance[0] ? "/" : "", instance, slot);
	if (n < 0 || n >= PATH_MAX)
		out[0] = '\0';
}

void dg_cgroup_paths_of(const struct dg_cgroup_sys *sys, const char *instance, uint32_t slot,
			struct dg_cgroup *cg)
{
	cg->version = sys->version;
	cg->v2[0] = cg->memory[0] = cg->pids[0] = cg->cpu[0] = '\0';
	if (sys->version == DG_CGROUP_V2) {
		jail_path(cg->v2, sys->v2_root, instance, slot);
	} else if (sys->version == DG_CGROUP_V1) {
		jail_path(cg->memory, sys->v1_memory, instance, slot);
		jail_path(cg->pids, sys->v1_pids, instance, slot);
		jail_path(cg->cpu, sys->v1_cpu, instance, slot);
	}
}

void dg_cgroup_paths(const struct dg_cgroup_sys *sys, uint32_t slot, struct dg_cgroup *cg)
{
	dg_cgroup_paths_of(sys, dg_instance(), slot, cg);
}

int dg_cgroup_create(const struct dg_cgroup_sys *sys, uint32_t slot, const struct dg_limits *lim,
		     struct dg_cgroup *cg, struct dg_err *err)
{
	struct limit_text t;
	if (slot >= DG_JAIL_SLOTS)
		return dg_err_set(err, -EINVAL, "cgroup: slot %" PRIu32 " out of range", slot);
	int r = format_limits(lim, &t, err);
	if (r < 0)
		return r;
	dg_cgroup_paths(sys, slot, cg);
	if (sys->version == DG_CGROUP_V2) {
		if (!cg->v2[0])
			return dg_err_set(err, -ENAMETOOLONG, "cgroup path too long under %s",
					  sys->v2_root);
		return create_v2(sys, cg, &t, err);
	}
	if (sys->version != DG_CGROUP_V1)
		return dg_err_set(err, -EINVAL, "cgroup: hierarchy not detected");
	if (!cg->memory[0] || !cg->pids[0] || !cg->cpu[0])
		return dg_err_set(err, -ENAMETOOLONG, "cgroup v1 path too long for slot %" PRIu32,
				  slot);
	return create_v1(sys, cg, &t, err);
}

int dg_cgroup_set_cpu(const struct dg_cgroup *cg, const struct dg_limits *lim, struct dg_err *err)
{
	struct limit_text t;
	if (lim) {
		int r = format_limits(lim, &t, err);
		if (r < 0)
			return r;
	} else {
		snprintf(t.quota, sizeof(t.quota), "-1");
		snprintf(t.cpu_max, sizeof(t.cpu_max), "max %d", DG_CGROUP_CPU_PERIOD_US);
	}
	int r;
	if (cg->version == DG_CGROUP_V2)
		r = write_file(cg->v2, "cpu.max", t.cpu_max, W_CONTROL, err);
	else if (cg->version == DG_CGROUP_V1)
		r = write_file(cg->cpu, "cpu.cfs_quota_us", t.quota, W_CONTROL, err);
	else
		r = dg_err_set(err, -EINVAL, "cgroup: hierarchy not detected");
	return r < 0 ? r : 0;
}

/* ---- life of a group ---- */

/* The v1 directories in the order the entry holds their tasks files. */
static void v1_dirs(const struct dg_cgroup *cg, const char *dirs[DG_CGROUP_ENTRY_FDS])
{
	dirs[0] = cg->memory;
	dirs[1] = cg->pids;
	dirs[2] = cg->cpu;
}

static int open_control(const char *dir, const char *name, int flags, struct dg_err *err)
{
	char path[PATH_MAX];
	if (join(path, dir, name))
		return too_long(err, dir, name);
	int fd = open(path, flags | O_CLOEXEC);
	return fd >= 0 ? fd : fail_errno(err, errno, "opening", path);
}

void dg_cgroup_entry_reset(struct dg_cgroup_entry *e)
{
	e->version = 0;
	e->placed = false;
	for (int i = 0; i < DG_CGROUP_ENTRY_FDS; i++)
		e->fd[i] = -1;
}

int dg_cgroup_entry_open(const struct dg_cgroup *cg, struct dg_cgroup_entry *e,
			 struct dg_err *err)
{
	dg_cgroup_entry_reset(e);
	e->version = cg->version;
	int r = 0;
	if (cg->version == DG_CGROUP_V2) {
		e->fd[0] = r = open_control(cg->v2, ".", O_RDONLY | O_DIRECTORY, err);
		if (r >= 0)
			e->fd[1] = r = open_control(cg->v2, "cgroup.procs", O_WRONLY, err);
	} else if (cg->version == DG_CGROUP_V1) {
		const char *dirs[DG_CGROUP_ENTRY_FDS];
		v1_dirs(cg, dirs);
		for (int i = 0; i < DG_CGROUP_ENTRY_FDS && r >= 0; i++)
			e->fd[i] = r = open_control(dirs[i], "tasks", O_WRONLY, err);
	} else {
		r = dg_err_set(err, -EINVAL, "cgroup: not created");
	}
	if (r < 0) {
		dg_cgroup_entry_close(e);
		return r;
	}
	return 0;
}

void dg_cgroup_entry_close(struct dg_cgroup_entry *e)
{
	for (int i = 0; i < DG_CGROUP_ENTRY_FDS; i++)
		dg_close_fd(&e->fd[i]);
}

pid_t dg_cgroup_clone(struct dg_cgroup_entry *e, uint64_t flags, struct dg_err *err)
{
	long p = -1;
	errno = ENOSYS;
	if (e->version == DG_CGROUP_V2) {
		struct clone_args a;
		memset(&a, 0, sizeof(a));
		a.flags = flags | CLONE_INTO_CGROUP;
		a.exit_signal = SIGCHLD;
		a.cgroup = (uint64_t)e->fd[0];
		p = syscall(SYS_clone3, &a, sizeof(a));
		if (p == 0)
			e->placed = true;
	}
	if (p < 0 && errno == ENOSYS)
		p = syscall(SYS_clone, (unsigned long)flags | SIGCHLD, NULL, NULL, NULL, 0);
	if (p < 0)
		return dg_err_set(err, -errno, "cgroup: clone%s: %s",
				  e->version == DG_CGROUP_V2 ? "3 into the group" : "",
				  strerror(errno));
	return (pid_t)p;
}

int dg_cgroup_entry_join(const struct dg_cgroup *cg, struct dg_cgroup_entry *e,
			 struct dg_err *err)
{
	const char *dirs[DG_CGROUP_ENTRY_FDS] = {cg->v2, NULL, NULL};
	const char *name = "cgroup.procs";
	int n = e->placed ? 0 : 1, r = 0;
	if (e->version == DG_CGROUP_V1) {
		v1_dirs(cg, dirs);
		name = "tasks";
		n = DG_CGROUP_ENTRY_FDS;
	}
	for (int i = 0; i < n && r == 0; i++) {
		int fd = e->fd[e->version == DG_CGROUP_V2 ? 1 : i];
		ssize_t k;
		do
			k = write(fd, "0", 1);
		while (k < 0 && errno == EINTR);
		if (k != 1)
			r = dg_err_set(err, k < 0 ? -errno : -EIO, "cgroup: joining %s/%s: %s",
				       dirs[i], name, strerror(k < 0 ? errno : EIO));
	}
	dg_cgroup_entry_close(e);
	return r;
}

int dg_cgroup_kill(const struct dg_cgroup *cg, struct dg_err *err)
{
	if (cg->version == DG_CGROUP_V2)
		return kill_dir(cg->v2, true, err);
	if (cg->version != DG_CGROUP_V1)
		return dg_err_set(err, -EINVAL, "cgroup: not created");
	int r = kill_dir(cg->memory, false, err);
	if (r == 0)
		r = kill_dir(cg->pids, false, err);
	if (r == 0)
		r = kill_dir(cg->cpu, false, err);
	return r;
}

/* The instance group above a jail group that was just removed, when it is
 * empty: instances come and go (every test run is one), their groups should
 * not pile up. Any failure (another jail of the instance still there: EBUSY
 * on cgroupfs, ENOTEMPTY in a plain tree) leaves it, which is harmless. */
static void remove_instance_dir(const char *jail_dir)
{
	char parent[PATH_MAX];
	const char *slash = strrchr(jail_dir, '/');
	if (!jail_dir[0] || !slash || (size_t)(slash - jail_dir) >= sizeof(parent))
		return;
	memcpy(parent, jail_dir, (size_t)(slash - jail_dir));
	parent[slash - jail_dir] = '\0';
	const char *base = strrchr(parent, '/');
	if (base && strcmp(base + 1, DG_CGROUP_GROUP) != 0)
		(void)rmdir(parent);
}

int dg_cgroup_destroy(const struct dg_cgroup *cg, struct dg_err *err)
{
	int r;
	if (cg->version == DG_CGROUP_V2) {
		if ((r = destroy_dir(cg->v2, true, err)) == 0)
			remove_instance_dir(cg->v2);
		return r;
	}
	if (cg->version != DG_CGROUP_V1)
		return dg_err_set(err, -EINVAL, "cgroup: not created");
	r = dg_cgroup_kill(cg, err);
	if (r == 0)
		r = destroy_v1(cg, err);
	if (r == 0) {
		remove_instance_dir(cg->cpu);
		remove_instance_dir(cg->pids);
		remove_instance_dir(cg->memory);
	}
	return r;
}

/* ---- events ---- */

/* *value = the number after "<key> " at the start of a line of dir/name.
 * A missing file or line leaves 0. */
static int read_counter(const char *dir, const char *name, const char *key, uint64_t *value,
			struct dg_err *err)
{
	char path[PATH_MAX], buf[SMALL_FILE_MAX];
	*value = 0;
	if (join(path, dir, name))
		return too_long(err, dir, name);
	ssize_t n = read_small(path, buf, sizeof(buf));
	if (n == -ENOENT)
		return 0;
	if (n < 0)
		return fail_errno(err, (int)-n, "reading", path);
	size_t kl = strlen(key);
	for (const char *line = buf; *line;) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			*value = strtoull(line + kl + 1, NULL, 10);
			break;
		}
		line += strcspn(line, "\n");
		line += *line == '\n';
	}
	return 0;
}

int dg_cgroup_read_events(const struct dg_cgroup *cg, struct dg_cgroup_events *ev,
			  struct dg_err *err)
{
	ev->oom_kills = ev->pids_max_hits = 0;
	bool v2 = cg->version == DG_CGROUP_V2;
	if (!v2 && cg->version != DG_CGROUP_V1)
		return dg_err_set(err, -EINVAL, "cgroup: not created");
	int r = read_counter(v2 ? cg->v2 : cg->memory, v2 ? "memory.events" : "memory.oom_control",
			     "oom_kill", &ev->oom_kills, err);
	if (r == 0)
		r = read_counter(v2 ? cg->v2 : cg->pids, "pids.events", "max", &ev->pids_max_hits,
				 err);
	return r;
}

/* ---- enumeration ---- */

/* True when name is exactly DG_CGROUP_PREFIX followed by a slot number as
 * dg_cgroup_paths writes it (decimal, no sign, no leading zero) below
 * DG_JAIL_SLOTS. */
static bool parse_jail_name(const char *name, uint32_t *slot)
{
	size_t pl = strlen(DG_CGROUP_PREFIX);
	if (strncmp(name, DG_CGROUP_PREFIX, pl) != 0)
		return false;
	const char *p = name + pl;
	if (!*p || (p[0] == '0' && p[1]))
		return false;
	uint64_t v = 0;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v >= DG_JAIL_SLOTS)
			return false;
	}
	*slot = (uint32_t)v;
	return true;
}

static bool is_subdir(DIR *d, const struct dirent *e)
{
	if (e->d_type != DT_UNKNOWN)
		return e->d_type == DT_DIR;
	struct stat st;
	return fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Calls fn for each jail group directly in dir (instance "" for the flat
 * layout, else dir is that instance's group). */
static int foreach_in(const char *dir, const char *instance,
		      int (*fn)(const char *instance, uint32_t slot, void *arg), void *arg)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		uint32_t slot;
		if (parse_jail_name(e->d_name, &slot) && is_subdir(d, e))
			r = fn(instance, slot, arg);
	}
	closedir(d);
	return r;
}

/* fn's first non-zero return stops the walk and is returned. A missing
 * deskgate group means no jails. Every instance's jails are visited, and
 * those of the flat layout deskgate/jail-N that came before instances. */
int dg_cgroup_foreach_jail(const struct dg_cgroup_sys *sys,
			   int (*fn)(const char *instance, uint32_t slot, void *arg), void *arg)
{
	char dir[PATH_MAX], sub[PATH_MAX];
	const char *root = sys->version == DG_CGROUP_V2 ? sys->v2_root : sys->v1_memory;
	if (sys->version != DG_CGROUP_V1 && sys->version != DG_CGROUP_V2)
		return -EINVAL;
	if (join(dir, root, DG_CGROUP_GROUP))
		return -ENAMETOOLONG;
	int r = foreach_in(dir, "", fn, arg);
	DIR *d = r == 0 ? opendir(dir) : NULL;
	if (!d)
		return r;
	struct dirent *e;
	while (r == 0 && (e = readdir(d))) {
		if (!dg_instance_valid(e->d_name) || !is_subdir(d, e) ||
		    strncmp(e->d_name, DG_CGROUP_PREFIX, strlen(DG_CGROUP_PREFIX)) == 0)
			continue;
		if (join(sub, dir, e->d_name) == 0)
			r = foreach_in(sub, e->d_name, fn, arg);
	}
	closedir(d);
	return r;
}
