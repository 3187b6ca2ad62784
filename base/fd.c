/* Descriptors (base.h). */
#include <unistd.h>

#include "base/base.h"

void dg_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}
