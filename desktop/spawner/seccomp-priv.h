/* seccomp and capabilities: the last steps before a jailed program runs.
 *
 * Called by the jail's init, inside the namespaces, after the mounts are
 * done and before the command is executed; both are inherited by everything
 * the command starts.
 */
#ifndef DG_SECCOMP_PRIV_H
#define DG_SECCOMP_PRIV_H

#include <seccomp.h>
#include <stdint.h>

#include "base/base.h"

/* Drops every capability: bounding set, ambient, inheritable, permitted and
 * effective; locks securebits so none can come back through uid 0. On success
 * err->msg is empty, or holds a note worth logging when the securebits could
 * not be set for want of CAP_SETPCAP (the bounding set was already empty). */
int dg_caps_drop_all(struct dg_err *err);

/* Sets no_new_privs and loads the jail filter (libseccomp): an allowlist with
 * default deny (EPERM), foreign architectures (i386, x32) killed, argument
 * filters for clone/unshare namespace flags (clone3 answers ENOSYS so libc
 * falls back to clone), ioctl TIOCSTI/TIOCLINUX (the request compared so that
 * high bits cannot smuggle it past), socket families (only unix, inet, inet6
 * and netlink route), mknod of devices. */
int dg_seccomp_install(struct dg_err *err);

/* Builds the filter program without installing it, once per process (about
 * 2 ms; thread-safe). A process forked after it returned that calls
 * dg_seccomp_install then only loads it (about 0.2 ms): call it in the
 * parent before starting jails. Optional: install builds the program itself
 * when it was not prepared. */
int dg_seccomp_prepare(struct dg_err *err);

#endif
