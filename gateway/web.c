/* Serving the embedded web pages (web-priv.h). */
#include <stdlib.h>
#include <string.h>

#include "gateway/server-priv.h"
#include "gateway/web-priv.h"

const struct dg_web_file *dg_web_find(const char *path)
{
	if (!path || path[0] != '/')
		return NULL;
	const char *name = path + 1;
	if (!path[1])
		name = "index.html";
	else if (strcmp(path, DG_WEB_FAVICON_PATH) == 0)
		name = DG_WEB_FAVICON;
	for (size_t i = 0; i < dg_web_n_files; i++) {
		if (strcmp(dg_web_files[i].name, name) == 0)
			return &dg_web_files[i];
	}
	return NULL;
}

/* Adds "name: value" to the header block being built at *p. 0 or -1. */
static int header(struct lws *wsi, const char *name, const char *value, unsigned char **p,
		  unsigned char *end)
{
	return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
					   (const unsigned char *)value, (int)strlen(value), p, end)
		       ? -1
		       : 0;
}

int dg_web_reply(struct conn *c, const struct dg_web_file *f)
{
	struct lws *wsi = c->wsi;
	unsigned char hdr[LWS_PRE + 2048], *start = hdr + LWS_PRE, *p = start,
						 *end = hdr + sizeof(hdr) - 1;
	if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, f->content_type, f->len, &p, end) ||
	    header(wsi, "content-security-policy:", DG_WEB_CSP, &p, end) ||
	    header(wsi, "x-content-type-options:", "nosniff", &p, end) ||
	    header(wsi, "x-frame-options:", "DENY", &p, end) ||
	    header(wsi, "referrer-policy:", "no-referrer", &p, end) ||
	    header(wsi, "cross-origin-opener-policy:", "same-origin", &p, end) ||
	    header(wsi, "cache-control:", "no-cache", &p, end) ||
	    lws_finalize_write_http_header(wsi, start, &p, end))
		return -1;
	if (f->len) {
		/* lws_write needs LWS_PRE bytes of headroom before the data. */
		unsigned char *buf = malloc(LWS_PRE + f->len);
		if (!buf)
			return -1;
		memcpy(buf + LWS_PRE, f->data, f->len);
		int n = lws_write(wsi, buf + LWS_PRE, f->len, LWS_WRITE_HTTP_FINAL);
		free(buf);
		if (n < 0)
			return -1;
	}
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}
