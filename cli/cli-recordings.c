/* `deskgate recordings upload|fetch`: recordings in object storage
 * (recordings.h, dg_rec_upload and dg_rec_fetch) on the command line.
 *
 * The store's config, its secret key included, comes from a JSON file
 * (--store FILE), never from argv (other users see a command line): the
 * file is read bounded, without following a symlink, and refused when
 * group or others may read it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "cli/cli-priv.h"
#include "recordings/recordings.h"

struct recordings_args {
	const char *store, *root, *key, *state_dir;
	char **pos;
	int n_pos;
};

static const struct dg_opt recordings_opts[] = {
	DG_OPT_VALUE_(struct recordings_args, store, "--store", "FILE", DG_OPT_REQUIRED,
		      "the bucket: a JSON file with endpoint, region, bucket, access_key, "
		      "secret_key (mode 0600)"),
	DG_OPT_VALUE_(struct recordings_args, root, "--root", "DIR", DG_OPT_REQUIRED,
		      "upload: the recordings directory ID is in; fetch: where ID is made"),
	DG_OPT_VALUE_(struct recordings_args, key, "--key", "PUBKEY.pem", 0,
		      "upload: the public key the seal must verify with"),
	DG_OPT_VALUE_(struct recordings_args, state_dir, "--state-dir", "DIR", 0,
		      "upload: or the key in DIR/recording-key.pem"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_recordings_cmd = {
	.name = "recordings",
	.summary = "Upload a sealed recording to an S3-compatible bucket, or fetch one from it.",
	.details = "upload ID: sends ROOT/ID to recordings/ID/ in the bucket, fetches it back,\n"
		   "verifies it, then writes ROOT/ID/uploaded. fetch ID: downloads\n"
		   "recordings/ID/ into ROOT/ID (which must not exist).\n"
		   "exit status: 0 done; 1 failed (the message says on what); 2 on a usage\n"
		   "error, a --store file that does not load, or a key that does not load.\n",
	.doc = "docs/recordings.md",
	.pos = DG_POS_REST,
	.pos_name = "upload|fetch ID",
	.pos_what = "action",
	.pos_offset = offsetof(struct recordings_args, pos),
	.pos_count_offset = offsetof(struct recordings_args, n_pos),
	.opts = recordings_opts,
};

int dg_cmd_recordings(int argc, char **argv)
{
	struct recordings_args a = { 0 };
	int rc = dg_opt_handle(&dg_recordings_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (a.n_pos != 2 || (strcmp(a.pos[0], "upload") != 0 && strcmp(a.pos[0], "fetch") != 0))
		return dg_opt_usage_error(&dg_recordings_cmd, "want upload ID or fetch ID");
	bool upload = strcmp(a.pos[0], "upload") == 0;
	if (upload == !(a.key || a.state_dir) || (a.key && a.state_dir))
		return dg_opt_usage_error(&dg_recordings_cmd, upload ? "upload: one of --key, --state-dir"
								     : "fetch takes no key");
	struct dg_err err = { { 0 } };
	struct dg_rec_s3 s = { 0 };
	json_t *doc = NULL;
	struct dg_rec_key *key = NULL;
	rc = dg_rec_s3_load(a.store, &s, &doc, &err);
	if (!rc && upload)
		rc = dg_cli_load_key(a.key, a.state_dir, &key, &err);
	if (rc) {
		fprintf(stderr, "deskgate recordings: %s\n", err.msg);
		json_decref(doc);
		return DG_EXIT_USAGE;
	}
	rc = upload ? dg_rec_upload(&s, a.root, a.pos[1], key, &err) : dg_rec_fetch(&s, a.pos[1], a.root, &err);
	if (rc)
		fprintf(stderr, "deskgate recordings %s: %s\n", a.pos[0], err.msg);
	else if (upload)
		printf("uploaded %s to s3://%s/%s%s/\n", a.pos[1], s.bucket, DG_REC_S3_PREFIX, a.pos[1]);
	else
		printf("fetched %s into %s/%s\n", a.pos[1], a.root, a.pos[1]);
	dg_rec_key_free(key);
	json_decref(doc);
	return rc ? 1 : fflush(stdout) == 0 ? 0 : 1;
}
