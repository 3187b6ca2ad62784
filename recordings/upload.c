/* recordings: a recording to object storage and back (recordings.h,
 * dg_rec_upload, dg_rec_fetch).
 *
 * Contract: only sealed recordings leave; a recording counts as uploaded
 * (ROOT/ID/uploaded) only once a copy fetched back from the bucket
 * verifies like the local one; a fetch takes only the recording's own
 * layout, bounded in files and bytes, and appears whole or not at all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "recordings/recordings-priv.h"

const struct dg_rec_fetch_limits dg_rec_fetch_limits_default = {
	.files_max = DG_REC_FETCH_FILES_MAX,
	.bytes_max = DG_REC_FETCH_BYTES_MAX,
};

#define FRAME_NAME_LEN (DG_REC_HEX_LEN + 4) /* "<64 hex>.png" */
#define PREFIX_BUF (sizeof(DG_REC_S3_PREFIX) + DG_REC_ID_MAX + 2)

/* Whether name is "<64 lowercase hex>.png". */
static bool frame_name(const char *name)
{
	char hex[DG_REC_HEX_LEN + 1];
	if (strlen(name) != FRAME_NAME_LEN || strcmp(name + DG_REC_HEX_LEN, ".png") != 0)
		return false;
	memcpy(hex, name, DG_REC_HEX_LEN);
	hex[DG_REC_HEX_LEN] = '\0';
	return dg_rec_hash_valid(hex);
}

/* recordings/<id>/ */
static void rec_prefix(const char *id, char out[PREFIX_BUF])
{
	snprintf(out, PREFIX_BUF, "%s%s/", DG_REC_S3_PREFIX, id);
}

static int check_id(const char *op, const char *id, struct dg_err *err)
{
	if (dg_rec_id_valid(id))
		return 0;
	char shown[DG_SHOW_BUF];
	dg_show_str(id ? id : "", DG_SHOW_MAX, true, shown, sizeof(shown));
	return dg_err_set(err, -EINVAL, "%s: %s is not a session id", op, shown);
}

/* a/b into out (PATH_MAX bytes): 0, or -ENAMETOOLONG. */
static int path_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", a, b);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

/* ---- fetch ------------------------------------------------------------------------- */

struct fetch {
	const struct dg_rec_s3 *s;
	const struct dg_rec_fetch_limits *lim;
	const char *id;
	size_t plen;              /* of the prefix */
	char **names;             /* relative names, as listed */
	size_t n, cap;
	bool session, events;
	struct dg_err *err;
};

static int fetch_add(void *arg, const char *key)
{
	struct fetch *f = arg;
	const char *name = key + f->plen;
	bool frame = strncmp(name, DG_REC_FRAMES_DIR "/", sizeof(DG_REC_FRAMES_DIR)) == 0 &&
		     frame_name(name + sizeof(DG_REC_FRAMES_DIR));
	bool session = strcmp(name, DG_REC_SESSION_FILE) == 0, events = strcmp(name, DG_REC_EVENTS_FILE) == 0;
	if (!frame && !session && !events)
		return dg_err_set(f->err, -EBADMSG,
				  "fetch s3://%s/%s: not a file of a recording (session.json, events.jsonl, "
				  "frames/<sha256>.png)",
				  f->s->bucket, key);
	if (f->n >= f->lim->files_max)
		return dg_err_set(f->err, -EFBIG, "fetch s3://%s/%s%s/: more than %llu files", f->s->bucket,
				  DG_REC_S3_PREFIX, f->id, (unsigned long long)f->lim->files_max);
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 64;
		char **p = realloc(f->names, cap * sizeof(*p));
		if (!p)
			return dg_err_set(f->err, -ENOMEM, "fetch %s: out of memory", f->id);
		f->names = p;
		f->cap = cap;
	}
	if (!(f->names[f->n] = strdup(name)))
		return dg_err_set(f->err, -ENOMEM, "fetch %s: out of memory", f->id);
	f->n++;
	f->session |= session;
	f->events |= events;
	return 0;
}

/* The bound of one file of the layout. */
static int64_t file_max(const char *name)
{
	if (strcmp(name, DG_REC_SESSION_FILE) == 0)
		return DG_REC_SESSION_MAX;
	if (strcmp(name, DG_REC_EVENTS_FILE) == 0)
		return DG_REC_EVENTS_FILE_MAX;
	return DG_REC_FRAME_MAX;
}

/* Gets every listed file into dir, within the total bound. */
static int fetch_files(struct fetch *f, const char *dir)
{
	char prefix[PREFIX_BUF], key[DG_REC_S3_KEY_MAX + 1], path[PATH_MAX];
	rec_prefix(f->id, prefix);
	int64_t left = f->lim->bytes_max;
	for (size_t i = 0; i < f->n; i++) {
		snprintf(key, sizeof(key), "%s%s", prefix, f->names[i]);
		if (path_join(path, dir, f->names[i]))
			return dg_err_set(f->err, -ENAMETOOLONG, "fetch %s: %s: path too long", f->id, dir);
		int64_t one = file_max(f->names[i]), got = 0;
		bool total_bound = left < one;
		int rc = dg_rec_s3_get(f->s, key, path, total_bound ? left : one, &got, f->err);
		if (rc == -EFBIG && total_bound)
			return dg_err_set(f->err, -EFBIG, "fetch s3://%s/%s: the recording is over %lld bytes",
					  f->s->bucket, prefix, (long long)f->lim->bytes_max);
		if (rc)
			return rc;
		left -= got;
	}
	return 0;
}

static void fetch_free(struct fetch *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->names[i]);
	free(f->names);
}

/* Lists recordings/<id>/ into f, checking the layout is whole. */
static int fetch_list(struct fetch *f)
{
	char prefix[PREFIX_BUF];
	rec_prefix(f->id, prefix);
	f->plen = strlen(prefix);
	int rc = dg_rec_s3_list(f->s, prefix, fetch_add, f, f->err);
	if (rc)
		return rc;
	if (f->n == 0)
		return dg_err_set(f->err, -ENOENT, "fetch: no recording %s in bucket %s (nothing under %s)",
				  f->id, f->s->bucket, prefix);
	if (!f->session || !f->events)
		return dg_err_set(f->err, -EBADMSG, "fetch s3://%s/%s: no %s: not a whole recording",
				  f->s->bucket, prefix, f->session ? DG_REC_EVENTS_FILE : DG_REC_SESSION_FILE);
	return 0;
}

int dg_rec_fetch_lim(const struct dg_rec_s3 *s, const char *id, const char *dest_root,
		     const struct dg_rec_fetch_limits *lim, struct dg_err *err)
{
	int rc = check_id("fetch", id, err);
	if (rc || (rc = dg_rec_s3_check(s, err)))
		return rc;
	char tmp[PATH_MAX], sub[PATH_MAX], dest[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s/.s3fetch-%s-XXXXXX", dest_root, id) >= (int)sizeof(tmp) ||
	    snprintf(dest, sizeof(dest), "%s/%s", dest_root, id) >= (int)sizeof(dest))
		return dg_err_set(err, -ENAMETOOLONG, "fetch %s: %s: path too long", id, dest_root);
	struct stat st;
	if (lstat(dest, &st) == 0)
		return dg_err_set(err, -EEXIST, "fetch %s: %s exists", id, dest);
	struct fetch f = { .s = s, .lim = lim, .id = id, .err = err };
	rc = fetch_list(&f);
	if (rc) {
		fetch_free(&f);
		return rc;
	}
	if (!mkdtemp(tmp)) {
		fetch_free(&f);
		return dg_err_set(err, -errno, "fetch %s: creating a directory in %s: %s", id, dest_root,
				  strerror(errno));
	}
	if (path_join(sub, tmp, DG_REC_FRAMES_DIR) || chmod(tmp, 0750) != 0 || mkdir(sub, 0750) != 0)
		rc = dg_err_set(err, -errno, "fetch %s: %s: %s", id, tmp, strerror(errno));
	if (!rc)
		rc = fetch_files(&f, tmp);
	if (!rc && renameat2(AT_FDCWD, tmp, AT_FDCWD, dest, RENAME_NOREPLACE) != 0)
		rc = dg_err_set(err, -errno, "fetch %s: renaming into %s: %s", id, dest, strerror(errno));
	if (rc)
		dg_rec_rm_tree(AT_FDCWD, tmp, 0, &dg_rec_limits_default);
	fetch_free(&f);
	return rc;
}

int dg_rec_fetch(const struct dg_rec_s3 *s, const char *id, const char *dest_root, struct dg_err *err)
{
	return dg_rec_fetch_lim(s, id, dest_root, &dg_rec_fetch_limits_default, err);
}

/* ---- upload ------------------------------------------------------------------------ */

/* PUTs dir/name as prefix+name; a frame the bucket holds at its size is
 * not sent again (its name is its hash). */
static int put_one(const struct dg_rec_s3 *s, const char *dir, const char *prefix, const char *name,
		   bool frame, struct dg_err *err)
{
	char key[DG_REC_S3_KEY_MAX + 1], path[PATH_MAX];
	snprintf(key, sizeof(key), "%s%s", prefix, name);
	if (path_join(path, dir, name))
		return dg_err_set(err, -ENAMETOOLONG, "upload: %s: path too long", dir);
	if (frame) {
		struct stat st;
		bool exists = false;
		int64_t size = -1;
		if (lstat(path, &st) != 0)
			return dg_err_set(err, -errno, "upload: %s: %s", path, strerror(errno));
		int rc = dg_rec_s3_head(s, key, &exists, &size, err);
		if (rc)
			return rc;
		if (exists && size == (int64_t)st.st_size)
			return 0;
	}
	return dg_rec_s3_put(s, key, path, err);
}

/* Every frames/<sha256>.png of dir, bounded like a fetch will be. */
static int put_frames(const struct dg_rec_s3 *s, const char *dir, const char *prefix, struct dg_err *err)
{
	char fdir[PATH_MAX], name[sizeof(DG_REC_FRAMES_DIR) + FRAME_NAME_LEN + 1];
	if (path_join(fdir, dir, DG_REC_FRAMES_DIR))
		return dg_err_set(err, -ENAMETOOLONG, "upload: %s: path too long", dir);
	int fd = open(fdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return dg_err_set(err, -errno, "upload: %s: %s", fdir, strerror(errno));
	}
	int rc = 0;
	size_t n = 0;
	struct dirent *de;
	while (!rc && (de = readdir(d))) {
		if (!frame_name(de->d_name))
			continue; /* temporaries and strangers stay home */
		if (++n > DG_REC_FETCH_FILES_MAX - 2) {
			rc = dg_err_set(err, -EFBIG, "upload: %s: more than %d frames", fdir,
					DG_REC_FETCH_FILES_MAX - 2);
			break;
		}
		memcpy(name, DG_REC_FRAMES_DIR "/", sizeof(DG_REC_FRAMES_DIR));
		memcpy(name + sizeof(DG_REC_FRAMES_DIR), de->d_name, FRAME_NAME_LEN + 1);
		rc = put_one(s, dir, prefix, name, true, err);
	}
	closedir(d);
	return rc;
}

/* Whether a recording verifies as sealed with key; res gets what held. */
static int verify_sealed(const char *what, const char *dir, const struct dg_rec_key *key,
			 struct dg_rec_verify_result *res, struct dg_err *err)
{
	int rc = dg_rec_verify(dir, key, res, err);
	if (rc)
		return rc;
	if (res->status != DG_REC_SEALED && res->status != DG_REC_SEALED_CRASH)
		return dg_err_set(err, -EBADMSG, "%s %s is not sealed: %s: %s", what, dir,
				  dg_rec_status_name(res->status), res->msg);
	return 0;
}

/* Fetches the recording back under root and checks it verifies as the
 * local one did. */
static int confirm(const struct dg_rec_s3 *s, const char *root, const char *id,
		   const struct dg_rec_key *key, const struct dg_rec_verify_result *local, struct dg_err *err)
{
	char tmp[PATH_MAX], copy[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.s3check-%s-XXXXXX", root, id);
	if (!mkdtemp(tmp))
		return dg_err_set(err, -errno, "upload %s: creating a directory in %s: %s", id, root,
				  strerror(errno));
	int rc = dg_rec_fetch(s, id, tmp, err);
	struct dg_rec_verify_result back;
	if (!rc && path_join(copy, tmp, id))
		rc = dg_err_set(err, -ENAMETOOLONG, "upload %s: %s: path too long", id, tmp);
	if (!rc)
		rc = verify_sealed("upload: the copy fetched back from the bucket", copy, key, &back, err);
	if (!rc && (back.status != local->status || back.last_seq != local->last_seq ||
		    strcmp(back.key_id, local->key_id) != 0 || strcmp(back.id, id) != 0))
		rc = dg_err_set(err, -EBADMSG,
				"upload %s: the copy in bucket %s is not the recording: %s up to seq %llu, "
				"here %s up to seq %llu",
				id, s->bucket, dg_rec_status_name(back.status), (unsigned long long)back.last_seq,
				dg_rec_status_name(local->status), (unsigned long long)local->last_seq);
	dg_rec_rm_tree(AT_FDCWD, tmp, 0, &dg_rec_limits_default);
	return rc;
}

static int write_marker(const struct dg_rec_s3 *s, const char *dir, const char *id, struct dg_err *err)
{
	char wall[DG_REC_WALL_BUF], text[DG_REC_WALL_BUF + DG_REC_S3_BUCKET_MAX + PREFIX_BUF + 32];
	char prefix[PREFIX_BUF];
	dg_rec_wall_str(dg_wall_ms(), wall);
	rec_prefix(id, prefix);
	int n = snprintf(text, sizeof(text), "%s s3://%s/%s\n", wall, s->bucket, prefix);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return dg_err_set(err, -errno, "upload: %s: %s", dir, strerror(errno));
	int rc = dg_rec_write_at(dfd, DG_REC_UPLOADED_FILE, text, (size_t)n, 0640, true, err);
	close(dfd);
	return rc;
}

int dg_rec_upload(const struct dg_rec_s3 *s, const char *root, const char *id,
		  const struct dg_rec_key *key, struct dg_err *err)
{
	int rc = check_id("upload", id, err);
	if (rc || (rc = dg_rec_s3_check(s, err)))
		return rc;
	char dir[PATH_MAX], prefix[PREFIX_BUF];
	if (snprintf(dir, sizeof(dir), "%s/%s", root, id) >= (int)sizeof(dir))
		return dg_err_set(err, -ENAMETOOLONG, "upload %s: %s: path too long", id, root);
	rec_prefix(id, prefix);
	struct dg_rec_verify_result local;
	if ((rc = verify_sealed("upload: recording", dir, key, &local, err)))
		return rc;
	/* The events last: a listing that shows the seal shows a whole
	 * recording. */
	if ((rc = put_frames(s, dir, prefix, err)) ||
	    (rc = put_one(s, dir, prefix, DG_REC_SESSION_FILE, false, err)) ||
	    (rc = put_one(s, dir, prefix, DG_REC_EVENTS_FILE, false, err)) ||
	    (rc = confirm(s, root, id, key, &local, err)))
		return rc;
	return write_marker(s, dir, id, err);
}
