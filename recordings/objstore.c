/* recordings: a small S3 client on libcurl (recordings.h, "object storage").
 *
 * Contract: every input from outside is bounded before use (the config,
 * keys, the bytes of every answer); signing is libcurl's (CURLOPT_AWS_SIGV4),
 * never ours; the secret key goes to libcurl only (CURLOPT_PASSWORD) and is
 * never formatted into a message; a 5xx or a failed connection is tried
 * again a bounded number of times, a 4xx never. Blocking: callers run it
 * in a process of its own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "recordings/recordings-priv.h"

#define S3_URL_BUF (DG_REC_S3_URL_MAX + DG_REC_S3_BUCKET_MAX + 3 * DG_REC_S3_KEY_MAX \
		    + 3 * DG_REC_S3_TOKEN_MAX + 128)
#define S3_SIGV4_BUF (DG_REC_S3_FIELD_MAX + 32)

/* One request: what it is (for messages), where its body goes, and what
 * came back. */
struct s3_req {
	const struct dg_rec_s3 *s;
	const char *op;          /* "PUT", "GET", "HEAD", "DELETE", "LIST" */
	const char *key;         /* object key or list prefix, for messages */
	char url[S3_URL_BUF];
	CURL *h;
	int in_fd;               /* PUT: the file read (-1: none) */
	int64_t in_size;
	int out_fd;              /* GET: the file written (-1: none) */
	char *mem;               /* LIST body, or an error answer's start */
	size_t mem_len, mem_max;
	bool mem_whole;          /* the 2xx body must fit in mem (LIST) */
	int64_t max, got;        /* bound of a 2xx body, bytes of it so far */
	int64_t mtime;           /* HEAD: Last-Modified, seconds since the epoch (-1: none) */
	bool over;               /* the body went past its bound */
	int write_errno;         /* writing out_fd failed */
	int retry_rc;            /* the error of a try worth another */
	long status;
};

/* ---- checks ------------------------------------------------------------------ */

static bool printable(const char *s, size_t max, size_t *len)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (n >= max || (unsigned char)s[n] < 0x21 || (unsigned char)s[n] > 0x7e)
			return false;
	*len = n;
	return n > 0;
}

static bool only_chars(const char *s, const char *extra)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return false;
	return true;
}

static int check_endpoint(const char *e, struct dg_err *err)
{
	size_t n;
	if (!e || !printable(e, DG_REC_S3_URL_MAX, &n))
		return dg_err_set(err, -EINVAL, "object store: endpoint: not 1..%d bytes of printable ASCII",
				  DG_REC_S3_URL_MAX);
	char shown[DG_SHOW_BUF];
	dg_show_str(e, DG_SHOW_MAX, true, shown, sizeof(shown));
	const char *rest = strncmp(e, "http://", 7) == 0 ? e + 7 : strncmp(e, "https://", 8) == 0 ? e + 8 : NULL;
	if (!rest)
		return dg_err_set(err, -EINVAL, "object store: endpoint %s: not an http:// or https:// URL", shown);
	/* No userinfo (credentials belong in the config, never in a URL that
	 * may be printed), no query or fragment, a host. */
	if (strpbrk(e, "@?#\\") || rest[0] == '\0' || rest[0] == '/')
		return dg_err_set(err, -EINVAL,
				  "object store: endpoint %s: want scheme://host[:port][/path], without '@', '?', '#'",
				  shown);
	return 0;
}

int dg_rec_s3_check(const struct dg_rec_s3 *s, struct dg_err *err)
{
	int rc = check_endpoint(s->endpoint, err);
	if (rc)
		return rc;
	size_t n;
	if (!s->region || !printable(s->region, DG_REC_S3_FIELD_MAX, &n) || !only_chars(s->region, "-"))
		return dg_err_set(err, -EINVAL, "object store: region: not 1..%d bytes of [a-z0-9-]",
				  DG_REC_S3_FIELD_MAX);
	if (!s->bucket || !printable(s->bucket, DG_REC_S3_BUCKET_MAX, &n) || n < DG_REC_S3_BUCKET_MIN ||
	    !only_chars(s->bucket, ".-"))
		return dg_err_set(err, -EINVAL, "object store: bucket: not %d..%d bytes of [a-z0-9.-]",
				  DG_REC_S3_BUCKET_MIN, DG_REC_S3_BUCKET_MAX);
	if (!s->access_key || !printable(s->access_key, DG_REC_S3_FIELD_MAX, &n) || strchr(s->access_key, ':'))
		return dg_err_set(err, -EINVAL,
				  "object store: access key: not 1..%d bytes of printable ASCII without ':'",
				  DG_REC_S3_FIELD_MAX);
	/* Never quoted: the secret is checked, not shown. */
	if (!s->secret_key || !printable(s->secret_key, DG_REC_S3_FIELD_MAX, &n))
		return dg_err_set(err, -EINVAL, "object store: secret key: not 1..%d bytes of printable ASCII",
				  DG_REC_S3_FIELD_MAX);
	return 0;
}

bool dg_rec_s3_key_valid(const char *key)
{
	size_t n;
	if (!key || !printable(key, DG_REC_S3_KEY_MAX, &n) || key[0] == '/')
		return false;
	/* Every segment between '/' must be non-empty and not "." or "..": a
	 * key is used to build local names by whoever lists it. */
	const char *seg = key;
	for (const char *p = key;; p++) {
		if (*p == '/' || *p == '\0') {
			size_t l = (size_t)(p - seg);
			if (l == 0 || (l == 1 && seg[0] == '.') || (l == 2 && seg[0] == '.' && seg[1] == '.'))
				return false;
			if (*p == '\0')
				return true;
			seg = p + 1;
		}
	}
}

/* A key as a message shows it: validated keys are printable, but a key
 * refused for its form may not be. */
static void show_key(const char *key, char out[DG_SHOW_BUF])
{
	dg_show_str(key ? key : "", DG_SHOW_MAX, true, out, DG_SHOW_BUF);
}

/* ---- URLs -------------------------------------------------------------------- */

/* Appends s percent-encoded (everything but RFC 3986's unreserved, and '/'
 * when keep_slash) to out at *at. 0, or -ENAMETOOLONG. */
static int url_append(char *out, size_t cap, size_t *at, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			     c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
		if (*at + (plain ? 1 : 3) >= cap)
			return -ENAMETOOLONG;
		if (plain) {
			out[(*at)++] = (char)c;
		} else {
			out[(*at)++] = '%';
			out[(*at)++] = hex[c >> 4];
			out[(*at)++] = hex[c & 15];
		}
	}
	out[*at] = '\0';
	return 0;
}

/* <endpoint>/<bucket>[/<key>] into q->url. */
static int url_object(struct s3_req *q, const char *key)
{
	const char *e = q->s->endpoint;
	size_t el = strlen(e);
	while (el && e[el - 1] == '/')
		el--;
	int n = snprintf(q->url, sizeof(q->url), "%.*s/%s", (int)el, e, q->s->bucket);
	if (n < 0 || (size_t)n >= sizeof(q->url))
		return -ENAMETOOLONG;
	size_t at = (size_t)n;
	if (!key)
		return 0;
	q->url[at++] = '/';
	return url_append(q->url, sizeof(q->url), &at, key, true);
}

/* ListObjectsV2's query: parameters in sorted order and encoded, as SigV4's
 * canonical query string wants them (libcurl 7.x signs the query as
 * written). */
static int url_list(struct s3_req *q, const char *prefix, const char *token)
{
	int rc = url_object(q, NULL);
	if (rc)
		return rc;
	size_t at = strlen(q->url);
	const char *parts[] = { "?", token ? "continuation-token=" : NULL, token, token ? "&" : NULL,
				"list-type=2&prefix=", prefix };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (!parts[i])
			continue;
		bool raw = i == 0 || i == 1 || i == 3 || i == 4;
		if (raw) {
			size_t l = strlen(parts[i]);
			if (at + l >= sizeof(q->url))
				return -ENAMETOOLONG;
			memcpy(q->url + at, parts[i], l + 1);
			at += l;
		} else if ((rc = url_append(q->url, sizeof(q->url), &at, parts[i], false))) {
			return rc;
		}
	}
	return 0;
}

/* ---- libcurl callbacks ------------------------------------------------------------ */

static bool status_ok(long st)
{
	return st >= 200 && st < 300;
}

/* Keeps up to mem_max bytes; a 2xx body that must be whole fails past it. */
static size_t keep_mem(struct s3_req *q, const char *p, size_t n)
{
	size_t room = q->mem_max - q->mem_len;
	if (n > room && q->mem_whole && status_ok(q->status)) {
		q->over = true;
		return 0;
	}
	size_t take = n < room ? n : room;
	memcpy(q->mem + q->mem_len, p, take);
	q->mem_len += take;
	return n;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *q = arg;
	size_t n = size * nmemb;
	curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
	if (!status_ok(q->status) || q->out_fd < 0)
		return keep_mem(q, p, n);
	if ((int64_t)n > q->max - q->got) {
		q->over = true;
		return 0;
	}
	for (size_t done = 0; done < n;) {
		ssize_t w = write(q->out_fd, p + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			q->write_errno = w < 0 ? errno : EIO;
			return 0;
		}
		done += (size_t)w;
	}
	q->got += (int64_t)n;
	return n;
}

static size_t on_read(char *p, size_t size, size_t nmemb, void *arg)
{
	struct s3_req *q = arg;
	for (;;) {
		ssize_t r = read(q->in_fd, p, size * nmemb);
		if (r >= 0)
			return (size_t)r;
		if (errno != EINTR)
			return CURL_READFUNC_ABORT;
	}
}

/* ---- one request, with retries ---------------------------------------------------- */

/* The failures worth another try: the store or the way to it, not us. */
static bool transient(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

/* "<Code>" of an S3 error answer, shown safely, or "". */
static void s3_code(const struct s3_req *q, char out[DG_SHOW_BUF + 3])
{
	out[0] = '\0';
	const char *a = q->mem_len ? memmem(q->mem, q->mem_len, "<Code>", 6) : NULL;
	if (!a)
		return;
	a += 6;
	const char *b = memmem(a, q->mem_len - (size_t)(a - q->mem), "</Code>", 7);
	if (!b)
		return;
	char shown[DG_SHOW_BUF];
	dg_show_bytes(a, (size_t)(b - a), DG_SHOW_MAX, false, shown, sizeof(shown));
	snprintf(out, DG_SHOW_BUF + 3, " (%s)", shown);
}

static int set_common(struct s3_req *q, struct curl_slist *hdrs, char *errbuf, char *sigv4)
{
	const struct dg_rec_s3 *s = q->s;
	snprintf(sigv4, S3_SIGV4_BUF, "aws:amz:%s:s3", s->region);
	CURLcode c = CURLE_OK;
#define SET(opt, val) \
	do { \
		if (c == CURLE_OK) \
			c = curl_easy_setopt(q->h, opt, val); \
	} while (0)
	SET(CURLOPT_URL, q->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_AWS_SIGV4, sigv4);
	SET(CURLOPT_USERNAME, s->access_key);
	SET(CURLOPT_PASSWORD, s->secret_key);
	SET(CURLOPT_HTTPHEADER, hdrs);
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_TIMEOUT_MS, (long)(s->timeout_ms ? s->timeout_ms : DG_REC_S3_TIMEOUT_MS_DEFAULT));
	SET(CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(s->connect_timeout_ms ? s->connect_timeout_ms : DG_REC_S3_CONNECT_TIMEOUT_MS_DEFAULT));
	/* A stalled transfer ends long before the whole timeout. */
	SET(CURLOPT_LOW_SPEED_LIMIT, (long)DG_REC_S3_STALL_BYTES_PER_S);
	SET(CURLOPT_LOW_SPEED_TIME, (long)DG_REC_S3_STALL_S);
	SET(CURLOPT_WRITEFUNCTION, on_body);
	SET(CURLOPT_WRITEDATA, q);
	if (strcmp(q->op, "PUT") == 0) {
		SET(CURLOPT_UPLOAD, 1L);
		SET(CURLOPT_READFUNCTION, on_read);
		SET(CURLOPT_READDATA, q);
		SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->in_size);
	} else if (strcmp(q->op, "HEAD") == 0) {
		SET(CURLOPT_NOBODY, 1L);
		SET(CURLOPT_FILETIME, 1L);
	} else if (strcmp(q->op, "DELETE") == 0) {
		SET(CURLOPT_CUSTOMREQUEST, "DELETE");
	}
	/* No CURLOPT_MAXFILESIZE: it would cut an error answer's body too;
	 * on_body counts what a 2xx brings instead. */
#undef SET
	return c == CURLE_OK ? 0 : -EINVAL;
}

/* Back to the start of the body for another try. */
static int rewind_attempt(struct s3_req *q)
{
	q->mem_len = 0;
	q->got = 0;
	q->over = false;
	q->write_errno = 0;
	q->status = 0;
	if (q->in_fd >= 0 && lseek(q->in_fd, 0, SEEK_SET) != 0)
		return -errno;
	if (q->out_fd >= 0 && (ftruncate(q->out_fd, 0) != 0 || lseek(q->out_fd, 0, SEEK_SET) != 0))
		return -errno;
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* One try. 0 done (2xx), 1 worth another try (err says why), else a
 * negative errno. */
static int attempt(struct s3_req *q, const char *errbuf, int n, struct dg_err *err)
{
	char key[DG_SHOW_BUF];
	show_key(q->key, key);
	const char *b = q->s->bucket;
	int rc = rewind_attempt(q);
	if (rc)
		return dg_err_set(err, rc, "%s s3://%s/%s: rewinding the file: %s", q->op, b, key, strerror(-rc));
	CURLcode c = curl_easy_perform(q->h);
	curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
	if (q->over)
		return dg_err_set(err, -EFBIG, "%s s3://%s/%s: the answer is longer than %lld bytes", q->op, b,
				  key, (long long)(q->out_fd >= 0 ? q->max : (int64_t)q->mem_max));
	if (q->write_errno)
		return dg_err_set(err, -q->write_errno, "%s s3://%s/%s: writing the file: %s", q->op, b, key,
				  strerror(q->write_errno));
	if (c != CURLE_OK) {
		rc = dg_err_set(err, c == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO,
				"%s s3://%s/%s: %s (try %d of %d)", q->op, b, key,
				errbuf[0] ? errbuf : curl_easy_strerror(c), n, DG_REC_S3_ATTEMPTS);
		q->retry_rc = rc;
		return transient(c) ? 1 : rc;
	}
	if (status_ok(q->status)) {
		curl_off_t len = -1;
		curl_off_t t = -1;
		if (strcmp(q->op, "HEAD") == 0 &&
		    curl_easy_getinfo(q->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len) == CURLE_OK)
			q->got = len;
		if (strcmp(q->op, "HEAD") == 0 && curl_easy_getinfo(q->h, CURLINFO_FILETIME_T, &t) == CURLE_OK)
			q->mtime = t;
		return 0;
	}
	char code[DG_SHOW_BUF + 3];
	s3_code(q, code);
	int e = q->status == 404 ? -ENOENT : q->status == 401 || q->status == 403 ? -EACCES : -EIO;
	q->retry_rc = dg_err_set(err, e, "%s s3://%s/%s: HTTP %ld%s (try %d of %d)", q->op, b, key,
				 q->status, code, n, DG_REC_S3_ATTEMPTS);
	return q->status >= 500 ? 1 : e;
}

/* Runs q (its op, url and bodies set) up to DG_REC_S3_ATTEMPTS times. */
static int s3_perform(struct s3_req *q, struct dg_err *err)
{
	char errbuf[CURL_ERROR_SIZE] = "", sigv4[S3_SIGV4_BUF];
	char err_body[DG_REC_S3_ERR_BODY_MAX];
	if (!q->mem) {
		q->mem = err_body;
		q->mem_max = sizeof(err_body);
	}
	/* Only this header of ours: libcurl 7.x signs every header given
	 * here, even one given empty to remove it ("Expect:"), which then
	 * goes unsent and breaks the signature. */
	struct curl_slist *hdrs = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	q->h = hdrs ? curl_easy_init() : NULL;
	int rc = q->h ? set_common(q, hdrs, errbuf, sigv4) : -ENOMEM;
	if (rc) {
		dg_err_set(err, rc, "%s s3://%s: setting up libcurl failed", q->op, q->s->bucket);
	} else {
		long delay = DG_REC_S3_RETRY_DELAY_MS;
		for (int n = 1;; n++) {
			errbuf[0] = '\0';
			rc = attempt(q, errbuf, n, err);
			if (rc != 1)
				break;
			if (n == DG_REC_S3_ATTEMPTS) {
				rc = q->retry_rc; /* -EIO (5xx), -ETIMEDOUT, -EIO (connection) */
				break;
			}
			sleep_ms(delay);
			delay *= 2;
		}
	}
	if (q->h)
		curl_easy_cleanup(q->h);
	curl_slist_free_all(hdrs);
	if (q->mem == err_body)
		q->mem = NULL;
	return rc;
}

/* The config, then a key or prefix (valid: its check's verdict), before
 * any request. */
static int check_args(const struct dg_rec_s3 *s, const char *op, const char *what, bool valid,
		      const char *name, struct dg_err *err)
{
	int rc = dg_rec_s3_check(s, err);
	if (rc || valid)
		return rc;
	char k[DG_SHOW_BUF];
	show_key(name, k);
	return dg_err_set(err, -EINVAL,
			  "%s s3://%s/%s: not a valid %s (1..%d bytes of printable ASCII, no leading '/', "
			  "no empty, '.' or '..' segment)",
			  op, s->bucket, k, what, DG_REC_S3_KEY_MAX);
}

static int s3_begin(struct s3_req *q, const struct dg_rec_s3 *s, const char *op, const char *key,
		    struct dg_err *err)
{
	*q = (struct s3_req){ .s = s, .op = op, .key = key, .in_fd = -1, .out_fd = -1 };
	int rc = check_args(s, op, "key", dg_rec_s3_key_valid(key), key, err);
	if (rc)
		return rc;
	if (url_object(q, key))
		return dg_err_set(err, -ENAMETOOLONG, "%s s3://%s/%s: the URL is too long", op, s->bucket, key);
	return 0;
}

/* ---- operations ------------------------------------------------------------------- */

int dg_rec_s3_put(const struct dg_rec_s3 *s, const char *key, const char *path, struct dg_err *err)
{
	struct s3_req q;
	int rc = s3_begin(&q, s, "PUT", key, err);
	if (rc)
		return rc;
	rc = dg_rec_open_reg(AT_FDCWD, path, O_RDONLY, path, &q.in_fd, &q.in_size, err);
	if (rc)
		return rc;
	rc = s3_perform(&q, err);
	close(q.in_fd);
	return rc;
}

int dg_rec_s3_get(const struct dg_rec_s3 *s, const char *key, const char *path, int64_t max,
		  int64_t *size, struct dg_err *err)
{
	struct s3_req q;
	int rc = s3_begin(&q, s, "GET", key, err);
	if (rc)
		return rc;
	if (max < 0)
		return dg_err_set(err, -EINVAL, "GET s3://%s/%s: negative bound", s->bucket, key);
	q.max = max;
	q.out_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (q.out_fd < 0)
		return dg_err_set(err, -errno, "GET s3://%s/%s: creating %s: %s", s->bucket, key, path,
				  strerror(errno));
	rc = s3_perform(&q, err);
	if (close(q.out_fd) != 0 && !rc)
		rc = dg_err_set(err, -errno, "GET s3://%s/%s: writing %s: %s", s->bucket, key, path,
				strerror(errno));
	if (rc)
		unlink(path);
	else if (size)
		*size = q.got;
	return rc;
}

int dg_rec_s3_head(const struct dg_rec_s3 *s, const char *key, bool *exists, int64_t *size,
		   struct dg_err *err)
{
	return dg_rec_s3_stat(s, key, exists, size, NULL, err);
}

int dg_rec_s3_stat(const struct dg_rec_s3 *s, const char *key, bool *exists, int64_t *size,
		   int64_t *mtime_s, struct dg_err *err)
{
	struct s3_req q;
	*exists = false;
	int rc = s3_begin(&q, s, "HEAD", key, err);
	if (rc)
		return rc;
	q.mtime = -1;
	rc = s3_perform(&q, err);
	if (mtime_s)
		*mtime_s = q.mtime;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	*exists = true;
	if (size)
		*size = q.got; /* Content-Length as the try read it; -1 when absent */
	return 0;
}

int dg_rec_s3_delete(const struct dg_rec_s3 *s, const char *key, struct dg_err *err)
{
	struct s3_req q;
	int rc = s3_begin(&q, s, "DELETE", key, err);
	return rc ? rc : s3_perform(&q, err);
}

/* "", or a valid key, or one followed by '/'. */
static bool prefix_valid(const char *prefix)
{
	char k[DG_REC_S3_KEY_MAX + 1];
	size_t n = strnlen(prefix, sizeof(k));
	if (n == 0)
		return true;
	if (n == sizeof(k))
		return false;
	memcpy(k, prefix, n + 1);
	if (k[n - 1] == '/')
		k[n - 1] = '\0';
	return dg_rec_s3_key_valid(k);
}

/* One page of a listing into q->mem (malloc'd by the caller). */
static int list_page(const struct dg_rec_s3 *s, const char *prefix, const char *token, char *buf,
		     size_t *len, struct dg_err *err)
{
	struct s3_req q = { .s = s, .op = "LIST", .key = prefix, .in_fd = -1, .out_fd = -1, .mem = buf,
			    .mem_max = DG_REC_S3_LIST_XML_MAX, .mem_whole = true };
	if (url_list(&q, prefix, token))
		return dg_err_set(err, -ENAMETOOLONG, "LIST s3://%s/%s: the URL is too long", s->bucket, prefix);
	int rc = s3_perform(&q, err);
	*len = q.mem_len;
	return rc;
}

int dg_rec_s3_list(const struct dg_rec_s3 *s, const char *prefix,
		   int (*fn)(void *arg, const char *key), void *arg, struct dg_err *err)
{
	int rc = check_args(s, "LIST", "prefix", prefix_valid(prefix), prefix, err);
	if (rc)
		return rc;
	char *buf = malloc(DG_REC_S3_LIST_XML_MAX);
	struct dg_rec_s3_page *pg = malloc(sizeof(*pg));
	char *token = malloc(DG_REC_S3_TOKEN_MAX + 1);
	if (!buf || !pg || !token) {
		rc = dg_err_set(err, -ENOMEM, "LIST s3://%s/%s: out of memory", s->bucket, prefix);
		goto out;
	}
	/* Each truncated page must bring a key: with the key bound that ends
	 * any listing, however the store answers. */
	size_t left = DG_REC_S3_LIST_KEYS_MAX;
	for (bool more = true, first = true; more; first = false) {
		size_t len = 0;
		rc = list_page(s, prefix, first ? NULL : token, buf, &len, err);
		if (rc)
			break;
		struct dg_err perr;
		rc = dg_rec_s3_list_parse(buf, len, prefix, left, fn, arg, pg, &perr);
		if (rc) {
			if (!pg->stopped) /* fn said why itself */
				dg_err_set(err, rc, "LIST s3://%s/%s: %s", s->bucket, prefix, perr.msg);
			break;
		}
		if (pg->truncated && pg->keys == 0) {
			rc = dg_err_set(err, -EBADMSG, "LIST s3://%s/%s: a truncated page without keys",
					s->bucket, prefix);
			break;
		}
		left -= pg->keys;
		more = pg->truncated;
		memcpy(token, pg->token, sizeof(pg->token));
	}
out:
	free(buf);
	free(pg);
	free(token);
	return rc;
}
