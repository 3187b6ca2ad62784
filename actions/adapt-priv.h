/* adapt internals: the base64 encoder the answers use, exposed for its
 * tests. Not part of the folder's interface. */
#ifndef DG_ADAPT_PRIV_H
#define DG_ADAPT_PRIV_H

#include <stddef.h>
#include <stdint.h>

/* Length of the standard (RFC 4648 section 4, padded, no line breaks)
 * base64 encoding of n bytes, without the terminating NUL; (size_t)-1 when
 * it would not fit a size_t. */
size_t dg_base64_len(size_t n);

/* Writes the encoding of in[0..n) and a NUL into out, which must hold
 * dg_base64_len(n) + 1 bytes. */
void dg_base64_encode(const uint8_t *in, size_t n, char *out);

#endif
