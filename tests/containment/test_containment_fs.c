/* Containment, edge 2: the host filesystem. The jail sees /usr, /bin, /lib*,
 * /sbin and a curated /etc read-only, private tmpfs /tmp and home, a new
 * /proc and a minimal /dev; nothing else of the host. It cannot write what it
 * sees, make device nodes, remount, escape through a descriptor it inherited,
 * or fill more scratch space than the policy grants. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

Test(fs, read_root_jail) { jail_contained(NULL, ARGV("list-dir", "/root")); }
Test(fs, read_root_control) { control_leaked(NULL, ARGV("list-dir", "/root")); }

Test(fs, read_shadow_jail) { jail_contained(NULL, ARGV("read-file", "/etc/shadow")); }
Test(fs, read_shadow_control) { control_leaked(NULL, ARGV("read-file", "/etc/shadow")); }

/* The test's own temp dir: /tmp/dg-test-XXXXXX/secret on the host. */
Test(fs, read_test_tmp_jail)
{
	char *secret = dg_test_write_tmp("secret", "dg-secret-file\n");
	jail_contained(NULL, ARGV("read-file", secret));
	dg_test_rm_tmp(secret);
}

Test(fs, read_test_tmp_control)
{
	char *secret = dg_test_write_tmp("secret", "dg-secret-file\n");
	control_leaked(NULL, ARGV("read-file", secret));
	dg_test_rm_tmp(secret);
}

Test(fs, write_usr_jail) { jail_contained(NULL, ARGV("write-dir", "/usr")); }
Test(fs, write_usr_control) { control_leaked(NULL, ARGV("write-dir", "/usr")); }

Test(fs, write_etc_jail) { jail_contained(NULL, ARGV("write-dir", "/etc")); }
Test(fs, write_etc_control) { control_leaked(NULL, ARGV("write-dir", "/etc")); }

Test(fs, core_pattern_jail)
{
	jail_contained(NULL, ARGV("open-write", "/proc/sys/kernel/core_pattern"));
}
Test(fs, core_pattern_control)
{
	control_leaked(NULL, ARGV("open-write", "/proc/sys/kernel/core_pattern"));
}

/* A kernel without magic SysRq has no such file, on the host or in a jail:
 * then the jail's ENOENT is the kernel's (KERNEL, given the host control). */
Test(fs, sysrq_jail)
{
	jail_contained_or_kernel(NULL, NULL, ARGV("open-write", "/proc/sysrq-trigger"));
}
Test(fs, sysrq_control)
{
	/* A kernel built without CONFIG_MAGIC_SYSRQ has no such file (this CI
	 * kernel): the control then proves the same probe path on another
	 * root-writable procfs knob, opened for writing and never written. */
	struct stat st;
	const char *target = "/proc/sysrq-trigger";
	if (stat(target, &st) != 0) {
		target = "/proc/sys/vm/drop_caches";
		cr_log_info("host has no /proc/sysrq-trigger; control uses %s", target);
	}
	control_leaked(NULL, ARGV("open-write", target));
}

Test(fs, sys_write_jail) { jail_contained(NULL, ARGV("sys-write")); }
Test(fs, sys_write_control) { control_leaked(NULL, ARGV("sys-write")); }

Test(fs, mknod_jail) { jail_contained(NULL, ARGV("mknod", "/tmp")); }
Test(fs, mknod_control)
{
	char dir[] = "/tmp/dg-test-XXXXXX";
	cr_assert(mkdtemp(dir));
	control_leaked(NULL, ARGV("mknod", dir));
	rmdir(dir);
}

Test(fs, remount_jail) { jail_contained(NULL, ARGV("remount")); }
/* In `dg_probe ns`, a private mount namespace: the remount stays there. */
Test(fs, remount_control) { control_leaked("ns", ARGV("remount")); }

/* An O_DIRECTORY descriptor of the host's / without close-on-exec, handed to
 * deskgate as if its caller had leaked it. */
Test(fs, leaked_fd_jail)
{
	int fd = open("/", O_RDONLY | O_DIRECTORY);
	cr_assert(fd >= 3);
	jail_contained_env(NULL, NULL, fd, ARGV("leaked-fd"));
	close(fd);
}

Test(fs, leaked_fd_control)
{
	int fd = open("/", O_RDONLY | O_DIRECTORY);
	cr_assert(fd >= 3);
	control_leaked_env(NULL, NULL, fd, ARGV("leaked-fd"));
	close(fd);
}

/* scratch_mb 16 caps /tmp and home together: filling /tmp, then home, must
 * stop with ENOSPC (or EDQUOT/EFBIG) at 16 MiB (+1 MiB of tmpfs rounding). */
#define FILL_CAP "16"

Test(fs, disk_fill_jail, .timeout = 120)
{
	char *policy = dg_test_policy("{\"scratch_mb\": " FILL_CAP "}");
	jail_contained(policy, ARGV("fill", FILL_CAP, "/tmp", "/home/user"));
	dg_test_rm_tmp(policy);
}

Test(fs, disk_fill_control, .timeout = 120)
{
	char dir[] = "/tmp/dg-test-XXXXXX";
	cr_assert(mkdtemp(dir));
	control_leaked(NULL, ARGV("fill", FILL_CAP, dir));
	rmdir(dir);
}
