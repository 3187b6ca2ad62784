/* recordings: the Ed25519 key that seals recordings.
 *
 * The private key lives in STATE_DIR/recording-key.pem (PKCS#8 PEM, mode
 * 0600, never encrypted: the gateway must start unattended). Whoever can
 * read it can forge seals, so a file others may read or write is refused
 * rather than used. The public half is exported as a "PUBLIC KEY" PEM for
 * verifiers (`deskgate key`). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "recordings/recordings-priv.h"

struct dg_rec_key {
	EVP_PKEY *pkey;
	bool priv;
	char id[DG_REC_HEX_LEN + 1];
};

EVP_PKEY *dg_rec_key_pkey(const struct dg_rec_key *k)
{
	return k->pkey;
}

bool dg_rec_key_has_private(const struct dg_rec_key *k)
{
	return k && k->priv;
}

void dg_rec_key_id(const struct dg_rec_key *k, char id[DG_REC_HEX_LEN + 1])
{
	memcpy(id, k->id, sizeof(k->id));
}

void dg_rec_key_free(struct dg_rec_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

/* Never prompt for a passphrase (OpenSSL's default callback reads the
 * terminal): an encrypted key is simply not loadable. */
static int no_password(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

/* Wraps pkey (taken over) after checking it is Ed25519. */
static int wrap(EVP_PKEY *pkey, bool priv, const char *what, struct dg_rec_key **out,
		struct dg_err *err)
{
	if (!pkey)
		return dg_err_set(err, -EINVAL, "%s: not a PEM %s key", what,
				  priv ? "private" : "public");
	if (EVP_PKEY_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		return dg_err_set(err, -EINVAL, "%s: not an Ed25519 key", what);
	}
	uint8_t raw[32];
	size_t n = sizeof(raw);
	if (EVP_PKEY_get_raw_public_key(pkey, raw, &n) != 1 || n != sizeof(raw)) {
		EVP_PKEY_free(pkey);
		return dg_err_set(err, -EINVAL, "%s: cannot read its public key", what);
	}
	struct dg_rec_key *k = calloc(1, sizeof(*k));
	if (!k) {
		EVP_PKEY_free(pkey);
		return dg_err_set(err, -ENOMEM, "%s: out of memory", what);
	}
	uint8_t h[DG_REC_SHA_LEN];
	if (dg_rec_sha256(raw, sizeof(raw), h) != 0) {
		EVP_PKEY_free(pkey);
		free(k);
		return dg_err_set(err, -ENOMEM, "%s: out of memory", what);
	}
	dg_hex_encode(h, sizeof(h), k->id);
	k->pkey = pkey;
	k->priv = priv;
	*out = k;
	return 0;
}

/* Reads a key file (at most DG_REC_KEY_FILE_MAX bytes, no symlink, a
 * regular file; a private one must not be open to group or others), the
 * mode checked on the descriptor that is read. */
static int read_key_file(int dirfd, const char *name, const char *path, bool priv, char **buf,
			 size_t *len, struct dg_err *err)
{
	int fd;
	int rc = dg_rec_open_reg(dirfd, name, O_RDONLY, path, &fd, NULL, err);
	if (rc)
		return rc;
	struct stat st;
	if (fstat(fd, &st) != 0)
		rc = dg_err_set(err, -errno, "%s: %s", path, strerror(errno));
	else if (priv && (st.st_mode & 077))
		rc = dg_err_set(err, -EPERM,
				"%s: mode %04o lets group or others read or write the private key; "
				"it must be 0600 (chmod 600, or move it away to have a new one made)",
				path, (unsigned)(st.st_mode & 07777));
	else
		rc = dg_rec_read_fd(fd, DG_REC_KEY_FILE_MAX, path, buf, len, err);
	close(fd);
	return rc;
}

static int parse_private(char *pem, size_t len, const char *path, struct dg_rec_key **k,
			 struct dg_err *err)
{
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio)
		return dg_err_set(err, -ENOMEM, "%s: out of memory", path);
	EVP_PKEY *pkey = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
	BIO_free(bio);
	ERR_clear_error(); /* a refused file leaves OpenSSL's error queue as it was */
	return wrap(pkey, true, path, k, err);
}

static int key_path(const char *state_dir, char *path, size_t len, struct dg_err *err)
{
	int n = snprintf(path, len, "%s/%s", state_dir, DG_REC_KEY_FILE);
	if (n < 0 || (size_t)n >= len)
		return dg_err_set(err, -ENAMETOOLONG, "state dir %s: path too long", state_dir);
	return 0;
}

static int load_at(int dirfd, const char *path, struct dg_rec_key **k, struct dg_err *err)
{
	char *pem;
	size_t len;
	int rc = read_key_file(dirfd, DG_REC_KEY_FILE, path, true, &pem, &len, err);
	if (rc)
		return rc;
	rc = parse_private(pem, len, path, k, err);
	OPENSSL_cleanse(pem, len);
	free(pem);
	return rc;
}

int dg_rec_key_load(const char *state_dir, struct dg_rec_key **k, struct dg_err *err)
{
	char path[4096];
	int rc = key_path(state_dir, path, sizeof(path), err);
	if (rc)
		return rc;
	int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "state dir %s: %s", state_dir, strerror(errno));
	rc = load_at(dirfd, path, k, err);
	close(dirfd);
	return rc;
}

/* Creates the key file: generated, written to a private temporary file,
 * synced, then hard-linked to its name (which fails when another process
 * got there first: then its key is the key). */
static int create_at(int dirfd, const char *path, struct dg_rec_key **k, struct dg_err *err)
{
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	if (!pkey)
		return dg_err_set(err, -ENOMEM, "%s: generating an Ed25519 key failed", path);
	BIO *bio = BIO_new(BIO_s_mem());
	if (!bio || PEM_write_bio_PrivateKey(bio, pkey, NULL, NULL, 0, NULL, NULL) != 1) {
		BIO_free(bio);
		EVP_PKEY_free(pkey);
		return dg_err_set(err, -ENOMEM, "%s: encoding the key failed", path);
	}
	char *data;
	long len = BIO_get_mem_data(bio, &data);
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".%s.tmp-%ld", DG_REC_KEY_FILE, (long)getpid());
	unlinkat(dirfd, tmp, 0); /* a leftover of a crashed start of this pid */
	int rc = 0;
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = dg_err_set(err, -errno, "%s: creating: %s", path, strerror(errno));
	} else {
		/* The umask cannot widen 0600, but make the mode exact anyway. */
		errno = 0;
		if (fchmod(fd, 0600) != 0 || write(fd, data, (size_t)len) != len || fsync(fd) != 0) {
			int e = errno ? errno : EIO;
			rc = dg_err_set(err, -e, "%s: writing: %s", path, strerror(e));
		}
		if (close(fd) != 0 && !rc)
			rc = dg_err_set(err, -errno, "%s: writing: %s", path, strerror(errno));
		if (!rc && linkat(dirfd, tmp, dirfd, DG_REC_KEY_FILE, 0) != 0)
			rc = errno == EEXIST ? 1 : dg_err_set(err, -errno, "%s: %s", path, strerror(errno));
		unlinkat(dirfd, tmp, 0);
		if (rc == 0)
			fsync(dirfd);
	}
	OPENSSL_cleanse(data, (size_t)len);
	BIO_free(bio);
	if (rc == 1) { /* lost the race: use the winner's */
		EVP_PKEY_free(pkey);
		return load_at(dirfd, path, k, err);
	}
	if (rc) {
		EVP_PKEY_free(pkey);
		return rc;
	}
	return wrap(pkey, true, path, k, err);
}

int dg_rec_key_load_or_create(const char *state_dir, struct dg_rec_key **k, struct dg_err *err)
{
	char path[4096];
	int rc = key_path(state_dir, path, sizeof(path), err);
	if (rc)
		return rc;
	int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return dg_err_set(err, -errno, "state dir %s: %s", state_dir, strerror(errno));
	rc = load_at(dirfd, path, k, err);
	if (rc == -ENOENT)
		rc = create_at(dirfd, path, k, err);
	close(dirfd);
	return rc;
}

int dg_rec_key_load_public(const char *path, struct dg_rec_key **k, struct dg_err *err)
{
	char *pem;
	size_t len;
	int rc = read_key_file(AT_FDCWD, path, path, false, &pem, &len, err);
	if (rc)
		return rc;
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	if (!bio) {
		free(pem);
		return dg_err_set(err, -ENOMEM, "%s: out of memory", path);
	}
	EVP_PKEY *pkey = PEM_read_bio_PUBKEY(bio, NULL, no_password, NULL);
	BIO_free(bio);
	ERR_clear_error();
	free(pem);
	return wrap(pkey, false, path, k, err);
}

int dg_rec_key_public_pem(const struct dg_rec_key *k, char **pem, struct dg_err *err)
{
	BIO *bio = BIO_new(BIO_s_mem());
	if (!bio || PEM_write_bio_PUBKEY(bio, k->pkey) != 1) {
		BIO_free(bio);
		return dg_err_set(err, -ENOMEM, "encoding the public key failed");
	}
	char *data;
	long len = BIO_get_mem_data(bio, &data);
	char *out = malloc((size_t)len + 1);
	if (!out) {
		BIO_free(bio);
		return dg_err_set(err, -ENOMEM, "out of memory");
	}
	memcpy(out, data, (size_t)len);
	out[len] = '\0';
	BIO_free(bio);
	*pem = out;
	return 0;
}

/* The signed message: the domain string, then the hash. A fixed domain
 * keeps a seal signature from meaning anything else the key might sign. */
static void seal_message(const uint8_t hash[DG_REC_SHA_LEN], uint8_t *msg, size_t *len)
{
	size_t d = strlen(DG_REC_SEAL_DOMAIN);
	memcpy(msg, DG_REC_SEAL_DOMAIN, d);
	memcpy(msg + d, hash, DG_REC_SHA_LEN);
	*len = d + DG_REC_SHA_LEN;
}

int dg_rec_key_sign(const struct dg_rec_key *k, const uint8_t hash[DG_REC_SHA_LEN],
		    uint8_t sig[DG_REC_SIG_LEN], struct dg_err *err)
{
	if (!k || !k->priv)
		return dg_err_set(err, -EINVAL, "sealing needs the private key");
	uint8_t msg[64];
	size_t len;
	seal_message(hash, msg, &len);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t n = DG_REC_SIG_LEN;
	int ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
		 EVP_DigestSign(ctx, sig, &n, msg, len) == 1 && n == DG_REC_SIG_LEN;
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : dg_err_set(err, -ENOMEM, "signing the seal failed");
}

int dg_rec_key_check(const struct dg_rec_key *k, const uint8_t hash[DG_REC_SHA_LEN],
		     const uint8_t sig[DG_REC_SIG_LEN])
{
	uint8_t msg[64];
	size_t len;
	seal_message(hash, msg, &len);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	int rc = -ENOMEM;
	if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1)
		rc = EVP_DigestVerify(ctx, sig, DG_REC_SIG_LEN, msg, len) == 1 ? 1 : 0;
	EVP_MD_CTX_free(ctx);
	return rc;
}
