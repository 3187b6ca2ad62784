/* fuzz_s3_list: ListObjectsV2 answers from a hostile object store
 * (recordings/objstore-list.c, dg_rec_s3_list_parse).
 *
 * Input: one mode byte, then the answer's bytes (an exact-size copy, so a
 * read one past its end is caught).
 *   bits 0-1  the keys allowed: 1, 2, 16 or DG_REC_S3_LIST_KEYS_MAX
 *   bit 2     prefix "" instead of "p/"
 *   bit 3     the callback stops at the second key
 * Invariants (recordings-priv.h): every key passed is dg_rec_s3_key_valid
 * and starts with the prefix; no more keys than allowed; the result is 0,
 * -EBADMSG, or the callback's; a truncated answer that parsed has a
 * token of 1..DG_REC_S3_TOKEN_MAX printable bytes. */
#include <errno.h>

#include "fuzz_common.h"
#include "recordings-priv.h"

struct seen {
	const char *prefix;
	size_t n;
	bool stop;
};

static int on_key(void *arg, const char *key)
{
	struct seen *s = arg;
	DG_FUZZ_CHECK(dg_rec_s3_key_valid(key), "an invalid key was passed");
	DG_FUZZ_CHECK(strncmp(key, s->prefix, strlen(s->prefix)) == 0, "a key outside the prefix");
	s->n++;
	return s->stop && s->n == 2 ? -ECANCELED : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size - 1 > DG_REC_S3_LIST_XML_MAX)
		return 0;
	static const size_t maxes[] = { 1, 2, 16, DG_REC_S3_LIST_KEYS_MAX };
	uint8_t mode = data[0];
	struct seen s = { .prefix = mode & 4 ? "" : "p/", .stop = mode & 8 };
	size_t len = size - 1, keys_max = maxes[mode & 3];
	char *xml = malloc(len ? len : 1);
	if (!xml)
		abort();
	memcpy(xml, data + 1, len);
	struct dg_rec_s3_page pg;
	struct dg_err err;
	int rc = dg_rec_s3_list_parse(xml, len, s.prefix, keys_max, on_key, &s, &pg, &err);
	free(xml);
	DG_FUZZ_CHECK(rc == 0 || rc == -EBADMSG || rc == -ECANCELED, "rc %d", rc);
	DG_FUZZ_CHECK(s.n <= keys_max && pg.keys == s.n, "%zu keys of %zu", s.n, keys_max);
	if (rc == 0 && pg.truncated)
		DG_FUZZ_CHECK(pg.token[0] && strlen(pg.token) <= DG_REC_S3_TOKEN_MAX, "a bad token");
	return 0;
}
