/* Internals of the jail: what the cloned child needs to build its world.
 *
 * The child (the jail's init) is a clone of the privileged caller, so it gets
 * this struct by copy of the address space: no pointer in it may refer to
 * memory the caller frees before the child has started the command.
 */
#ifndef DG_JAIL_PRIV_H
#define DG_JAIL_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include "desktop/spawner/cgroup-priv.h"
#include "desktop/spawner/spawner.h"

/* Where the new root is assembled inside the jail's private mount namespace
 * before pivot_root; mounting over it there changes nothing on the host. */
#define DG_JAIL_STAGE "/tmp"
/* Size of the read-only root tmpfs (directories and symlinks only). */
#define DG_JAIL_ROOT_SIZE "size=1m,nr_inodes=1024"
#define DG_JAIL_ETC_SIZE "size=1m,nr_inodes=512"
#define DG_JAIL_DEV_SIZE "size=64k,nr_inodes=64"
/* Inodes of the scratch tmpfs per MiB of scratch_mb. */
#define DG_JAIL_SCRATCH_INODES_PER_MB 256

/* Exit codes of init when setup fails before the command runs. */
#define DG_JAIL_EXIT_SETUP 125
#define DG_JAIL_EXIT_NOEXEC 126
#define DG_JAIL_EXIT_NOTFOUND 127

/* Environment built for the jail: at most DG_JAIL_ENV_BASE fixed entries
 * plus DG_JAIL_ENV_MAX from the caller. */
#define DG_JAIL_ENV_BASE 12
#define DG_JAIL_ENV_SLOTS (DG_JAIL_ENV_BASE + DG_JAIL_ENV_MAX + 1)
#define DG_JAIL_ENV_COPY_MAX 64 /* length of LANG/TERM/TZ copied from the host */

struct dg_jail_env {
	char *vars[DG_JAIL_ENV_SLOTS];
	char storage[DG_JAIL_ENV_SLOTS][DG_JAIL_ENV_ENTRY_MAX];
	int n;
};

/* Everything init needs, prepared by the caller before clone. */
struct dg_jail_child {
	const struct dg_jail_spec *spec;
	/* Init's own copies of the programs' argv and cwd (spec points at
	 * them): init overwrites its copy of the host process's command line
	 * and environment (jail-init.c), where a caller's strings may live
	 * (`deskgate exec`'s argv). One malloc'd block, freed by the caller. */
	struct dg_jail_spec spec_copy;
	struct dg_jail_prog progs[DG_JAIL_PROGS_MAX];
	char *arena;
	struct dg_jail_env env[DG_JAIL_PROGS_MAX];
	/* How init gets into the jail's cgroup (cgroup-priv.h): the group's
	 * descriptors, opened by the parent, and its paths (the parent's
	 * struct, copied with the address space) for error messages. */
	struct dg_cgroup_entry cg_entry;
	const struct dg_cgroup *cgroup;
	int go_fd;      /* read end: a byte once the uid/gid maps are written; EOF = abort */
	int report_fd;  /* write end, close-on-exec: an error record, or EOF at exec */
	int parent_fds[2]; /* the parent's ends of both pipes, closed by the child
			    * first so that the parent's death reads as EOF */
	int ready_fd;   /* in init: write end handed to progs[0] when wait_ready */
};

/* The record a child writes on report_fd when it cannot start the command. */
struct dg_jail_report {
	int err;          /* positive errno */
	int exit_code;    /* DG_JAIL_EXIT_* */
	char msg[DG_ERR_MAX];
};

/* The host's run directory: DESKGATE_RUN_DIR when it is absolute, else
 * DG_RUN_DIR_DEFAULT. Slot locks and instance id locks live under it. */
const char *dg_jail_run_dir(void);

/* <run dir>/name, made (mode 0700) with the run dir when missing, into out:
 * 0, or a negative errno with err. */
int dg_jail_run_subdir(const char *name, char *out, size_t n, struct dg_err *err);

/* Builds the allowlisted environment plus prog->env_extra. Returns 0 or
 * -EINVAL naming a bad extra entry. */
int dg_jail_env_build(const struct dg_jail_prog *prog, struct dg_jail_env *env,
		      struct dg_err *err);

/* Inside the jail's new namespaces: builds the root filesystem and pivots
 * into it. Returns 0 or a negative errno with err naming the mount. */
int dg_jail_mount_root(const struct dg_jail_spec *spec, struct dg_err *err);

/* Pieces of init shared with dg_jail_enter (jail-enter.c). */
int dg_jail_become_user(struct dg_err *err);
int dg_jail_set_rlimits(const struct dg_limits *lim, struct dg_err *err);
void dg_jail_scrub_environ(void);
/* In a child: becomes program i of c->spec (new session, descriptors,
 * cwd, exec). On failure writes a report to c->report_fd and exits. */
__attribute__((noreturn)) void dg_jail_run_prog(struct dg_jail_child *c, int i);

/* Runs as PID 1 of the jail: never returns. */
__attribute__((noreturn)) void dg_jail_init_main(struct dg_jail_child *c);

#endif
