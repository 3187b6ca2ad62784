/* text: UTF-8 decoding and text as keysyms.
 *
 * Text is typed as one keysym per code point, never through a shell or a
 * tool that interprets it. The decoder is deliberately strict (RFC 3629):
 * an overlong or surrogate encoding could otherwise smuggle a character
 * (e.g. a NUL or a newline) past a check that looked at the bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"

size_t dg_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp, const char **why)
{
	unsigned char b = s[0];
	size_t need;
	uint32_t c, min;

	if (b < 0x80) {
		*cp = b;
		return 1;
	}
	if (b < 0xc0) {
		*why = "stray continuation byte";
		return 0;
	}
	if (b < 0xe0) {
		need = 2, c = b & 0x1f, min = 0x80;
	} else if (b < 0xf0) {
		need = 3, c = b & 0x0f, min = 0x800;
	} else if (b < 0xf8) {
		need = 4, c = b & 0x07, min = 0x10000;
	} else {
		*why = "invalid lead byte";
		return 0;
	}
	if (len < need) {
		*why = "truncated sequence";
		return 0;
	}
	for (size_t i = 1; i < need; i++) {
		if ((s[i] & 0xc0) != 0x80) {
			*why = "truncated sequence";
			return 0;
		}
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min) {
		*why = "overlong encoding";
		return 0;
	}
	if (c >= 0xd800 && c <= 0xdfff) {
		*why = "surrogate";
		return 0;
	}
	if (c > 0x10ffff) {
		*why = "above U+10FFFF";
		return 0;
	}
	*cp = c;
	return need;
}

int dg_keysym_from_codepoint(uint32_t cp, uint32_t *keysym)
{
	if (cp == '\n' || cp == '\r') {
		*keysym = 0xff0d; /* Return */
		return 0;
	}
	if (cp == '\t') {
		*keysym = 0xff09; /* Tab */
		return 0;
	}
	if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0))
		return -EINVAL;
	if (cp >= 0xd800 && cp <= 0xdfff)
		return -EINVAL;
	if (cp > 0x10ffff)
		return -EINVAL;
	/* Latin-1 keysyms have the code point's value; everything else uses
	 * the Unicode keysym range, which Xvnc maps onto spare keycodes, so no
	 * legacy keysym (e.g. EuroSign 0x20ac) is needed. */
	*keysym = cp < 0x100 ? cp : 0x01000000u + cp;
	return 0;
}

int dg_text_to_keysyms(const char *utf8, size_t len, uint32_t *out, size_t max, size_t *n,
		       struct dg_err *err)
{
	const unsigned char *s = (const unsigned char *)utf8;
	size_t count = 0;
	*n = 0;
	for (size_t i = 0; i < len;) {
		uint32_t cp, ks;
		const char *why = NULL;
		size_t l = dg_utf8_decode(s + i, len - i, &cp, &why);
		if (l == 0)
			return dg_err_set(err, -EINVAL, "invalid UTF-8 at byte %zu (%s)", i, why);
		if (dg_keysym_from_codepoint(cp, &ks) < 0)
			return dg_err_set(err, -EINVAL,
					  "control character U+%04X at byte %zu cannot be typed "
					  "(only \\n, \\r and \\t can; use a key action)",
					  (unsigned)cp, i);
		/* "\r\n" is one line break, so text with either convention types
		 * the same. */
		bool crlf = cp == '\r' && i + 1 < len && s[i + 1] == '\n';
		i += crlf ? 2 : l;
		if (out) {
			if (count == max)
				return dg_err_set(err, -ENOBUFS,
						  "text needs more than %zu keysyms", max);
			out[count] = ks;
		}
		count++;
	}
	*n = count;
	return 0;
}
