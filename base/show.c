/* Quoting untrusted text into messages: one way for the whole project, so a
 * hostile key, value or name can neither forge a log line nor grow a message
 * without bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/base.h"

void dg_show_bytes(const char *in, size_t len, size_t max, bool quoted, char *out, size_t out_len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;
	if (!out || out_len == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; s && i < len; i++) {
		char piece[8];
		if (i == max)
			snprintf(piece, sizeof(piece), "...");
		else if (s[i] < 0x20 || s[i] >= 0x7f)
			snprintf(piece, sizeof(piece), "\\x%02x", s[i]);
		else if (quoted && (s[i] == '"' || s[i] == '\\'))
			snprintf(piece, sizeof(piece), "\\%c", s[i]);
		else
			snprintf(piece, sizeof(piece), "%c", s[i]);
		size_t n = strlen(piece);
		if (o + n >= out_len)
			break;
		memcpy(out + o, piece, n + 1);
		o += n;
		if (i == max)
			break;
	}
}

void dg_show_str(const char *in, size_t max, bool quoted, char *out, size_t out_len)
{
	/* Never reads past max + 1 bytes: the text may be long. */
	size_t n = in ? strnlen(in, max + 1) : 0;
	dg_show_bytes(in, n, max, quoted, out, out_len);
}

/* The fewest digits that read back as d, always with a point or an
 * exponent, so "1.0 is not an integer" does not read as "1 is not". */
static void show_real(double d, char *out, size_t out_len)
{
	if (!isfinite(d)) {
		snprintf(out, out_len, "%s", isnan(d) ? "NaN" : d < 0 ? "-Infinity" : "Infinity");
		return;
	}
	if (d == trunc(d) && fabs(d) < 1e15) {
		snprintf(out, out_len, "%.1f", d);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, out_len, "%.*g", prec, d);
		if (strtod(out, NULL) == d)
			break;
	}
	if (!strpbrk(out, ".e"))
		strncat(out, ".0", out_len - strlen(out) - 1);
}

void dg_show_value(const json_t *v, char *out, size_t out_len)
{
	char esc[DG_SHOW_BUF];
	if (!out || out_len == 0)
		return;
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT:
		snprintf(out, out_len, "an object");
		break;
	case JSON_ARRAY:
		snprintf(out, out_len, "an array");
		break;
	case JSON_STRING:
		dg_show_bytes(json_string_value(v), json_string_length(v), DG_SHOW_MAX, true, esc,
			      sizeof(esc));
		snprintf(out, out_len, "\"%s\"", esc);
		break;
	case JSON_INTEGER:
		snprintf(out, out_len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		show_real(json_real_value(v), out, out_len);
		break;
	case JSON_TRUE:
		snprintf(out, out_len, "true");
		break;
	case JSON_FALSE:
		snprintf(out, out_len, "false");
		break;
	case JSON_NULL:
		snprintf(out, out_len, "null");
		break;
	}
}
