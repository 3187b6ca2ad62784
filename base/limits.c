/* The bounds of a jail's resource limits (base/base.h), checked where
 * limits arrive without the policy loader: the spawner's decoder. */
#include <errno.h>

#include "base/base.h"

#define CHECK_RANGE(field, lo, hi)                                                             \
	do {                                                                                   \
		if (!(l->field >= (lo) && l->field <= (hi)))                                   \
			return dg_err_set(err, -EINVAL, "limits." #field " (%llu) must be "      \
					  "%llu to %llu", (unsigned long long)l->field,                \
					  (unsigned long long)(lo), (unsigned long long)(hi));         \
	} while (0)

int dg_limits_check(const struct dg_limits *l, struct dg_err *err)
{
	CHECK_RANGE(memory_mb, DG_LIMIT_MEMORY_MB_MIN, DG_LIMIT_MEMORY_MB_MAX);
	CHECK_RANGE(pids, DG_LIMIT_PIDS_MIN, DG_LIMIT_PIDS_MAX);
	/* Written so that NaN fails too. */
	if (!(l->cpus >= DG_LIMIT_CPUS_MIN && l->cpus <= DG_LIMIT_CPUS_MAX))
		return dg_err_set(err, -EINVAL, "limits.cpus (%g) must be %g to %g", l->cpus,
				  DG_LIMIT_CPUS_MIN, DG_LIMIT_CPUS_MAX);
	CHECK_RANGE(exec_seconds, DG_LIMIT_SECONDS_MIN, DG_LIMIT_SECONDS_MAX);
	CHECK_RANGE(session_seconds, DG_LIMIT_SECONDS_MIN, DG_LIMIT_SECONDS_MAX);
	CHECK_RANGE(output_bytes, DG_LIMIT_OUTPUT_BYTES_MIN, DG_LIMIT_OUTPUT_BYTES_MAX);
	CHECK_RANGE(scratch_mb, DG_LIMIT_SCRATCH_MB_MIN, DG_LIMIT_SCRATCH_MB_MAX);
	if (l->exec_desktop > 1)
		return dg_err_set(err, -EINVAL, "limits.exec_desktop (%u) must be 0 or 1",
				  (unsigned)l->exec_desktop);
	if (l->scratch_mb >= l->memory_mb)
		return dg_err_set(err, -EINVAL, "limits.scratch_mb (%llu) must be less than "
				  "limits.memory_mb (%llu)", (unsigned long long)l->scratch_mb,
				  (unsigned long long)l->memory_mb);
	return 0;
}
