/* recordings: reading ListObjectsV2 answers (recordings-priv.h).
 *
 * Not an XML parser: the answer is bounded (DG_REC_S3_LIST_XML_MAX) and
 * only three elements matter (<Key>, <IsTruncated>,
 * <NextContinuationToken>), so this scans for them by their exact tags,
 * decodes the few entities printable keys can need, and validates every
 * value it takes. A store that lies can only name keys that pass the
 * same checks as ours (dg_rec_s3_key_valid, under the prefix asked for). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "recordings/recordings-priv.h"

/* The value of the next <tag>...</tag> at or after *pos: 1 found (*pos moves
 * past it), 0 none, -EBADMSG an opening tag without its end. */
static int next_elem(const char *x, size_t len, size_t *pos, const char *tag, const char **val,
		     size_t *vlen)
{
	char open[48], close[48];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	size_t ol = strlen(open), cl = strlen(close);
	const char *a = *pos < len ? memmem(x + *pos, len - *pos, open, ol) : NULL;
	if (!a)
		return 0;
	a += ol;
	const char *b = memmem(a, len - (size_t)(a - x), close, cl);
	if (!b)
		return -EBADMSG;
	*val = a;
	*vlen = (size_t)(b - a);
	*pos = (size_t)(b - x) + cl;
	return 1;
}

/* One entity at s (after '&', n bytes left) into *c: the five named ones
 * and numeric references to printable ASCII. Returns its length after '&'
 * up to ';' included, or 0 when it is none of those. */
static size_t entity(const char *s, size_t n, char *c)
{
	static const struct {
		const char *name;
		char c;
	} named[] = { { "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' }, { "quot;", '"' }, { "apos;", '\'' } };
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		size_t l = strlen(named[i].name);
		if (n >= l && memcmp(s, named[i].name, l) == 0) {
			*c = named[i].c;
			return l;
		}
	}
	if (n < 3 || s[0] != '#')
		return 0;
	bool hex = s[1] == 'x';
	unsigned v = 0;
	size_t i = hex ? 2 : 1;
	for (size_t digits = 0; i < n && s[i] != ';'; i++, digits++) {
		int d = hex ? dg_hex_value(s[i]) : (s[i] >= '0' && s[i] <= '9' ? s[i] - '0' : -1);
		if (d < 0 || digits >= 6)
			return 0;
		v = v * (hex ? 16 : 10) + (unsigned)d;
	}
	if (i >= n || i == (hex ? 2u : 1u) || v < 0x21 || v > 0x7e)
		return 0;
	*c = (char)v;
	return i + 1;
}

/* Decodes a text value into out (cap bytes with its NUL). -EBADMSG when
 * it does not fit, has a bad entity, or has a byte outside 0x21..0x7e. */
static int decode(const char *v, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		if (c == '&') {
			size_t l = entity(v + i + 1, n - i - 1, &c);
			if (!l)
				return -EBADMSG;
			i += l;
		} else if ((unsigned char)c < 0x21 || (unsigned char)c > 0x7e || c == '<') {
			return -EBADMSG;
		}
		if (o + 1 >= cap)
			return -EBADMSG;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}

static int bad(struct dg_err *err, const char *what, const char *v, size_t n)
{
	char shown[DG_SHOW_BUF];
	dg_show_bytes(v, n, DG_SHOW_MAX, true, shown, sizeof(shown));
	return dg_err_set(err, -EBADMSG, "the listing's %s %s", what, shown);
}

static int scan_keys(const char *xml, size_t len, const char *prefix, size_t keys_max,
		     int (*fn)(void *arg, const char *key), void *arg, struct dg_rec_s3_page *pg,
		     struct dg_err *err)
{
	size_t pos = 0, pl = strlen(prefix), vl;
	const char *v;
	char key[DG_REC_S3_KEY_MAX + 1];
	int rc;
	while ((rc = next_elem(xml, len, &pos, "Key", &v, &vl)) == 1) {
		if (decode(v, vl, key, sizeof(key)) || !dg_rec_s3_key_valid(key))
			return bad(err, "key is not a valid key:", v, vl);
		if (strncmp(key, prefix, pl) != 0)
			return bad(err, "key is not under the prefix asked for:", v, vl);
		if (pg->keys >= keys_max)
			return dg_err_set(err, -EBADMSG, "the listing has more than %zu keys", keys_max);
		pg->keys++;
		if ((rc = fn(arg, key))) {
			pg->stopped = true;
			return rc;
		}
	}
	if (rc < 0)
		return dg_err_set(err, rc, "the listing has a <Key> without its </Key>");
	return 0;
}

static int scan_truncated(const char *xml, size_t len, struct dg_rec_s3_page *pg, struct dg_err *err)
{
	size_t pos = 0, vl;
	const char *v;
	int rc = next_elem(xml, len, &pos, "IsTruncated", &v, &vl);
	if (rc < 0)
		return dg_err_set(err, rc, "the listing has an <IsTruncated> without its end");
	if (rc == 0 || (vl == 5 && memcmp(v, "false", 5) == 0))
		return 0;
	if (!(vl == 4 && memcmp(v, "true", 4) == 0))
		return bad(err, "IsTruncated is neither true nor false:", v, vl);
	pg->truncated = true;
	pos = 0;
	rc = next_elem(xml, len, &pos, "NextContinuationToken", &v, &vl);
	if (rc <= 0)
		return dg_err_set(err, -EBADMSG, "the listing is truncated without a NextContinuationToken");
	if (decode(v, vl, pg->token, sizeof(pg->token)) || !pg->token[0])
		return bad(err, "NextContinuationToken is not 1..1024 bytes of printable ASCII:", v, vl);
	return 0;
}

int dg_rec_s3_list_parse(const char *xml, size_t len, const char *prefix, size_t keys_max,
			 int (*fn)(void *arg, const char *key), void *arg, struct dg_rec_s3_page *pg,
			 struct dg_err *err)
{
	*pg = (struct dg_rec_s3_page){ 0 };
	if (len > DG_REC_S3_LIST_XML_MAX)
		return dg_err_set(err, -EBADMSG, "the listing is longer than %d bytes", DG_REC_S3_LIST_XML_MAX);
	if (!memmem(xml, len, "<ListBucketResult", 17))
		return dg_err_set(err, -EBADMSG, "the answer is not a ListBucketResult");
	int rc = scan_truncated(xml, len, pg, err);
	return rc ? rc : scan_keys(xml, len, prefix, keys_max, fn, arg, pg, err);
}
