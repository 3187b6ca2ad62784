/* actions internals shared by action.c, keysym.c and text.c. Not part of the
 * folder's interface: other folders include actions/actions.h only. */
#ifndef DG_ACTIONS_PRIV_H
#define DG_ACTIONS_PRIV_H

#include <stddef.h>
#include <stdint.h>

/* One name of the generated keysym table (keysym-table.h, made by
 * keysym-table.cmake). The table is sorted by name in strcmp order; order is
 * the definition's position in the headers, so among the names of one
 * value the smallest order is the preferred name. */
struct dg_keysym_entry {
	const char *name;
	uint32_t value;
	uint16_t order;
};

/* Decodes the UTF-8 sequence at s (len > 0 bytes available). Returns its
 * length (1..4) and sets *cp, or 0 when the bytes are not valid UTF-8 and
 * sets *why to the reason ("overlong encoding", "surrogate", ...). Strict
 * RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF. */
size_t dg_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp, const char **why);

/* Copies up to len untrusted bytes into out for an error message: control
 * bytes, DEL and non-ASCII as \xNN, '"' and '\\' escaped; after
 * DG_SHOW_MAX input bytes the copy ends with "...". out is always
 * NUL-terminated; DG_SHOW_BUF bytes always hold the whole result. */
static inline void dg_show(const char *s, size_t len, char *out, size_t out_len)
{
	dg_show_bytes(s, len, DG_SHOW_MAX, true, out, out_len);
}

#endif
