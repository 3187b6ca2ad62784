/* cgroup: resource limits for one jail, on cgroup v2 or v1.
 *
 * v2 is used when the unified hierarchy at the root has the memory, pids and
 * cpu controllers available; otherwise the v1 controllers memory, pids and
 * cpu are used, each in its own hierarchy. All jails live under a "deskgate"
 * group in each hierarchy, in a group per instance (dg_instance()), as
 * "deskgate/<instance>/jail-<slot>": slots are unique on the host, the
 * instance says whose the jail is.
 *
 * Only the privileged process that creates jails may call these. Paths are
 * bounded by PATH_MAX; every write is checked and its failure names the file.
 */
#ifndef DG_CGROUP_PRIV_H
#define DG_CGROUP_PRIV_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "desktop/spawner/spawner.h"

#define DG_CGROUP_ROOT_DEFAULT "/sys/fs/cgroup"
#define DG_CGROUP_GROUP "deskgate"
#define DG_CGROUP_PREFIX "jail-"
/* CFS period used to express `cpus` as a quota. */
#define DG_CGROUP_CPU_PERIOD_US 100000
/* How long dg_cgroup_kill waits for a group to empty before giving up. */
#define DG_CGROUP_KILL_TIMEOUT_MS 5000
/* Smallest CFS quota the kernel accepts; smaller `cpus` are raised to it. */
#define DG_CGROUP_CPU_QUOTA_MIN_US 1000
/* How long removing an emptied group is retried while the kernel says EBUSY. */
#define DG_CGROUP_RMDIR_TIMEOUT_MS 1000
/* Attempts at creating a jail group whose instance group another jail's end
 * removed meanwhile (see make_jail_dir). */
#define DG_CGROUP_PARENT_RETRIES 3
/* Most bytes read from any one cgroup file (cgroup.procs of a full group). */
#define DG_CGROUP_READ_MAX (64 * 1024)

enum dg_cgroup_version { DG_CGROUP_V1 = 1, DG_CGROUP_V2 = 2 };

/* Which hierarchies to use; found once by dg_cgroup_detect. */
struct dg_cgroup_sys {
	enum dg_cgroup_version version;
	char v2_root[PATH_MAX];     /* v2: the unified mount */
	char v1_memory[PATH_MAX];   /* v1: each controller's mount */
	char v1_pids[PATH_MAX];
	char v1_cpu[PATH_MAX];
};

/* One jail's group(s). */
struct dg_cgroup {
	enum dg_cgroup_version version;
	char v2[PATH_MAX];          /* v2: <root>/deskgate/<instance>/jail-N */
	char memory[PATH_MAX];      /* v1: one directory per controller */
	char pids[PATH_MAX];
	char cpu[PATH_MAX];
};

/* Finds usable hierarchies under root (normally DG_CGROUP_ROOT_DEFAULT; tests
 * pass a fake tree). Prefers v2 when it has memory, pids and cpu. Returns 0,
 * or -ENOENT when neither a complete v2 nor the three v1 controllers exist. */
int dg_cgroup_detect(const char *root, struct dg_cgroup_sys *sys, struct dg_err *err);

/* Creates the group(s) for a jail named DG_CGROUP_PREFIX<slot> in this
 * instance's group (created when missing) and writes the
 * limits: memory (swap off), pids, cpu quota. A group of the same name left by
 * a dead owner is killed and removed first. */
int dg_cgroup_create(const struct dg_cgroup_sys *sys, uint32_t slot, const struct dg_limits *lim,
		     struct dg_cgroup *cg, struct dg_err *err);

/* Writes the group's CPU quota alone: lim's cpus (the value create wrote),
 * or none at all when lim is NULL (v2 cpu.max "max", v1 cfs_quota_us -1).
 * The group must exist: its file is not created. Used for a desktop's start
 * (dg_jail_spec.cpu_after_start). */
int dg_cgroup_set_cpu(const struct dg_cgroup *cg, const struct dg_limits *lim, struct dg_err *err);

/* Starting a process inside the group(s) without a migration by its
 * parent: a migration takes the kernel's global threadgroup lock for
 * writing, which waits for an RCU grace period (1-20 ms, more on a loaded
 * host), and was on every jail's start. The privileged parent opens the descriptors before cloning:
 *  v2: fd[0] the group's directory, for clone3(CLONE_INTO_CGROUP): the
 *      kernel creates the child in the group; fd[1] its cgroup.procs, used
 *      only when clone3 is refused with ENOSYS (a kernel before 5.7, or a
 *      seccomp filter of the caller's container).
 *  v1: fd[0..2] the tasks files of memory, pids and cpu: the child writes
 *      "0" to each itself. v1 moves one thread that is the caller without
 *      the global lock (only a whole thread group or another process needs
 *      it), and checks the opener's credentials, not the child's.
 * The descriptors are close-on-exec; the child closes its copies in
 * dg_cgroup_entry_join, the parent with dg_cgroup_entry_close. */
#define DG_CGROUP_ENTRY_FDS 3
struct dg_cgroup_entry {
	enum dg_cgroup_version version;
	int fd[DG_CGROUP_ENTRY_FDS];
	bool placed; /* in the child: the kernel created it in the group */
};

/* An entry holding no descriptor (closing it does nothing). */
void dg_cgroup_entry_reset(struct dg_cgroup_entry *e);
/* Opens e's descriptors for cg (a created group). */
int dg_cgroup_entry_open(const struct dg_cgroup *cg, struct dg_cgroup_entry *e,
			 struct dg_err *err);
void dg_cgroup_entry_close(struct dg_cgroup_entry *e);

/* A fork-like clone (no new stack) with flags (CLONE_NEW* namespaces and
 * the like; SIGCHLD is added) into e's group on v2, or in the caller's
 * groups on v1. Returns the child's pid in the parent, 0 in the child, or a
 * negative errno. The child must call dg_cgroup_entry_join, while it is
 * still single-threaded, before anything that the limits should cover. */
pid_t dg_cgroup_clone(struct dg_cgroup_entry *e, uint64_t flags, struct dg_err *err);

/* In the child of dg_cgroup_clone (or any single-threaded process that
 * inherited e): puts the caller into cg's group(s) unless the kernel already
 * did, then closes e's descriptors. */
int dg_cgroup_entry_join(const struct dg_cgroup *cg, struct dg_cgroup_entry *e,
			 struct dg_err *err);

/* Kills every process in the group(s) (cgroup.kill on v2, SIGKILL to each
 * listed pid until empty on v1) and waits, bounded, until they are empty. */
int dg_cgroup_kill(const struct dg_cgroup *cg, struct dg_err *err);

/* Kills, then removes the group directories (and the instance's group when
 * that was its last jail). Idempotent: missing groups are not an error. */
int dg_cgroup_destroy(const struct dg_cgroup *cg, struct dg_err *err);

/* What the group saw so far. */
struct dg_cgroup_events {
	uint64_t oom_kills;      /* processes killed by the memory limit */
	uint64_t pids_max_hits;  /* forks refused at pids.max */
};
int dg_cgroup_read_events(const struct dg_cgroup *cg, struct dg_cgroup_events *ev,
			  struct dg_err *err);

/* Fills cg with the paths of this instance's group for slot without touching
 * the system; dg_cgroup_paths_of for another instance's ("" for the flat
 * layout of deskgate before instances). */
void dg_cgroup_paths(const struct dg_cgroup_sys *sys, uint32_t slot, struct dg_cgroup *cg);
void dg_cgroup_paths_of(const struct dg_cgroup_sys *sys, const char *instance, uint32_t slot,
			struct dg_cgroup *cg);

/* Calls fn for each jail-<slot> group found under the deskgate group(s), of
 * every instance (used by stale cleanup: a dead owner's jails are anyone's to
 * remove). */
int dg_cgroup_foreach_jail(const struct dg_cgroup_sys *sys,
			   int (*fn)(const char *instance, uint32_t slot, void *arg), void *arg);

#endif
