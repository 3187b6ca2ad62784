/* Hex (base.h). */
#include <errno.h>

#include "base/base.h"

void dg_hex_encode(const void *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	const unsigned char *b = in;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

int dg_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int dg_hex_decode(const char *in, size_t n, void *out)
{
	unsigned char *b = out;
	for (size_t i = 0; i < n; i++) {
		int hi = dg_hex_value(in[2 * i]);
		int lo = hi < 0 ? -1 : dg_hex_value(in[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		b[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}
