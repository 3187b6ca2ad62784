/* Containment, edge 4: isolation strength. Inside the jail there are no
 * capabilities (bounding set included), no_new_privs is set and a seccomp
 * filter is loaded; the calls that open the kernel's large attack surfaces or
 * reach other processes are refused (EPERM) or kill the caller (SIGSYS, for
 * foreign ABIs); and the host's processes are invisible.
 *
 * The controls run the same probes on the host as root, where each call must
 * reach the kernel. Where the kernel's build or configuration decides the
 * call's fate (kexec, modules, x32 and int 0x80 on kernels without them,
 * bpf, perf, userfaultfd, io_uring, ... and sysctls that refuse them to
 * root), the control may instead show the kernel refusing it on the host
 * (KERNEL, with the reason), and the jail run, given the control's results,
 * must then be CONTAINED or KERNEL "as on the host": never LEAKED, never a
 * quiet pass (containment.h, jail_contained_or_kernel). */
#include <fcntl.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

Test(isolation, status_jail) { jail_contained(NULL, ARGV("status")); }
Test(isolation, status_control) { control_leaked(NULL, ARGV("status")); }

Test(isolation, ptrace_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("ptrace")); }
Test(isolation, ptrace_control) { control_leaked_or_kernel(NULL, ARGV("ptrace")); }

Test(isolation, process_vm_readv_jail) { jail_contained(NULL, ARGV("process-vm-readv")); }
Test(isolation, process_vm_readv_control) { control_leaked(NULL, ARGV("process-vm-readv")); }

Test(isolation, unshare_clone_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("unshare")); }
Test(isolation, unshare_clone_control) { control_leaked_or_kernel(NULL, ARGV("unshare")); }

Test(isolation, mount_tmpfs_jail)
{
	jail_contained_or_kernel(NULL, "ns", ARGV("mount-tmpfs", "/tmp"));
}
Test(isolation, mount_tmpfs_control)
{
	control_leaked_or_kernel("ns", ARGV("mount-tmpfs", "/tmp"));
}

Test(isolation, bpf_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("bpf")); }
Test(isolation, bpf_control) { control_leaked_or_kernel(NULL, ARGV("bpf")); }

Test(isolation, perf_event_open_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("perf")); }
Test(isolation, perf_event_open_control) { control_leaked_or_kernel(NULL, ARGV("perf")); }

Test(isolation, userfaultfd_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("userfaultfd")); }
Test(isolation, userfaultfd_control) { control_leaked_or_kernel(NULL, ARGV("userfaultfd")); }

Test(isolation, io_uring_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("io-uring")); }
Test(isolation, io_uring_control) { control_leaked_or_kernel(NULL, ARGV("io-uring")); }

Test(isolation, open_by_handle_at_jail)
{
	jail_contained_or_kernel(NULL, NULL, ARGV("open-by-handle"));
}
Test(isolation, open_by_handle_at_control) { control_leaked_or_kernel(NULL, ARGV("open-by-handle")); }

Test(isolation, kexec_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("kexec")); }
Test(isolation, kexec_control) { control_leaked_or_kernel(NULL, ARGV("kexec")); }

Test(isolation, modules_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("modules")); }
Test(isolation, modules_control) { control_leaked_or_kernel(NULL, ARGV("modules")); }

Test(isolation, x32_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("x32")); }
Test(isolation, x32_control) { control_leaked_or_kernel(NULL, ARGV("x32")); }

Test(isolation, int80_jail) { jail_contained_or_kernel(NULL, NULL, ARGV("int80")); }
Test(isolation, int80_control) { control_leaked_or_kernel(NULL, ARGV("int80")); }

Test(isolation, tiocsti_jail) { jail_contained(NULL, ARGV("tiocsti")); }
Test(isolation, tiocsti_control) { control_leaked(NULL, ARGV("tiocsti")); }

/* The test passes its own pid and name: the runner must not be visible, and
 * at most a handful of processes (the jail's own) may be. */
static void own_pid_comm(char *pid, size_t plen, char *comm, size_t clen)
{
	snprintf(pid, plen, "%d", (int)getpid());
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0);
	ssize_t k = read(fd, comm, clen - 1);
	close(fd);
	comm[k > 0 ? k : 0] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
}

Test(isolation, host_procs_jail)
{
	char pid[16], comm[64];
	own_pid_comm(pid, sizeof(pid), comm, sizeof(comm));
	jail_contained(NULL, ARGV("procs", "5", pid, comm));
}

Test(isolation, host_procs_control)
{
	char pid[16], comm[64];
	own_pid_comm(pid, sizeof(pid), comm, sizeof(comm));
	control_leaked(NULL, ARGV("procs", "5", pid, comm));
}
