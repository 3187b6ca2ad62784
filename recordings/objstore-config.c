/* recordings: the object store's configuration file (recordings.h,
 * dg_rec_s3_load), one format for `deskgate recordings --store` and the
 * gateway's "object_store" block.
 *
 * Contract: the file holds a secret, so it is read bounded, without
 * following a symlink, and refused when group or others may read it; its
 * bytes are wiped once parsed; unknown members are refused (a typo must
 * not silently fall back to a default). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recordings/recordings-priv.h"

int dg_rec_s3_load(const char *path, struct dg_rec_s3 *s, json_t **doc, struct dg_err *err)
{
	char *buf = NULL;
	size_t len;
	struct stat st;
	*doc = NULL;
	memset(s, 0, sizeof(*s));
	int rc = dg_read_file("store file", path, DG_REC_S3_STORE_FILE_MAX, true, &buf, &len, &st, err);
	if (rc)
		return rc;
	if (st.st_mode & 077) {
		memset(buf, 0, len);
		free(buf);
		return dg_err_set(err, -EPERM, "store file %s: group or others may read it (it holds a "
					       "secret: chmod 600)", path);
	}
	json_error_t je;
	*doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	memset(buf, 0, len);
	free(buf);
	if (!*doc || !json_is_object(*doc))
		return dg_err_set(err, -EINVAL, "store file %s: not a JSON object (line %d)", path,
				  *doc ? 1 : je.line);
	const char *names[] = { "endpoint", "region", "bucket", "access_key", "secret_key" };
	const char **fields[] = { &s->endpoint, &s->region, &s->bucket, &s->access_key, &s->secret_key };
	const char *k;
	json_t *v;
	json_object_foreach(*doc, k, v) {
		size_t i = 0;
		while (i < 5 && strcmp(k, names[i]) != 0)
			i++;
		if (i < 5 && json_is_string(v))
			*fields[i] = json_string_value(v);
		else if (strcmp(k, "timeout_ms") == 0 && json_is_integer(v) && json_integer_value(v) > 0 &&
			 json_integer_value(v) <= 3600000)
			s->timeout_ms = (unsigned)json_integer_value(v);
		else
			return dg_err_set(err, -EINVAL,
					  "store file %s: member \"%.64s\": want endpoint, region, bucket, "
					  "access_key, secret_key (strings), timeout_ms (1..3600000)",
					  path, k);
	}
	/* The credentials may come from the environment instead; copied into
	 * *doc, so they outlive an unsetenv. */
	const char *envs[] = { DG_REC_S3_ENV_ACCESS_KEY, DG_REC_S3_ENV_SECRET_KEY };
	for (int i = 0; i < 2; i++) {
		const char *e = getenv(envs[i]);
		if (*fields[3 + i] || !e)
			continue;
		json_t *str = json_string(e);
		if (!str || json_object_set_new(*doc, names[3 + i], str))
			return dg_err_set(err, -ENOMEM, "store file %s: out of memory", path);
		*fields[3 + i] = json_string_value(json_object_get(*doc, names[3 + i]));
	}
	if (!s->access_key || !s->secret_key)
		return dg_err_set(err, -EINVAL, "store file %s: no %s: give it in the file or in %s", path,
				  s->access_key ? "secret_key" : "access_key",
				  s->access_key ? DG_REC_S3_ENV_SECRET_KEY : DG_REC_S3_ENV_ACCESS_KEY);
	rc = dg_rec_s3_check(s, err);
	if (rc) {
		/* Name the file: the check's message names only the field. */
		char m[DG_ERR_MAX];
		snprintf(m, sizeof(m), "%s", err->msg);
		dg_err_set(err, rc, "store file %s: %s", path, m);
	}
	return rc;
}
