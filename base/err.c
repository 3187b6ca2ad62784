#include <stdarg.h>
#include <stdio.h>

#include "base/base.h"

int dg_err_set(struct dg_err *err, int code, const char *fmt, ...)
{
	if (err) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		va_end(ap);
	}
	return code;
}
