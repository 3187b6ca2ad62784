/* The gateway's connections: each WebSocket's outgoing queue (observers get
 * the latest frame only), deferred HTTP replies, the descriptors adopted into
 * the event loop (spawner, egress proxy, workers, exec results) and their
 * tags, and the session table's lookup. The bottom of the gateway: it calls
 * no other gateway file.
 */
#include <errno.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/server-priv.h"

static struct outmsg *outmsg_new(bool binary, const void *data, size_t len)
{
	struct outmsg *m = malloc(sizeof(*m) + LWS_PRE + len);
	if (!m)
		return NULL;
	m->next = NULL;
	m->binary = binary;
	m->len = len;
	memcpy(m->data + LWS_PRE, data, len);
	return m;
}

void dg_gw_ws_send(struct conn *c, bool binary, const void *data, size_t len)
{
	if (!c || !c->wsi)
		return;
	if (c->queued + len > DG_WS_QUEUE_MAX) {
		/* A client that does not read is cut off rather than buffered. */
		lws_set_timeout(c->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		return;
	}
	struct outmsg *m = outmsg_new(binary, data, len);
	if (!m)
		return;
	if (c->tail)
		c->tail->next = m;
	else
		c->head = m;
	c->tail = m;
	c->queued += len;
	lws_callback_on_writable(c->wsi);
}

void dg_gw_ws_send_json(struct conn *c, json_t *obj)
{
	if (c && c->sink) {
		c->sink(c, 0, obj);
		return;
	}
	char *s = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (s)
		dg_gw_ws_send(c, false, s, strlen(s));
	free(s);
}

void dg_gw_ws_send_frame(struct conn *c, const void *png, size_t len)
{
	if (!c || !c->wsi)
		return;
	/* Observers get the latest frame only: one that was not sent yet is
	 * replaced, so a slow observer never holds up anything. */
	struct outmsg *m = outmsg_new(true, png, len);
	if (!m)
		return;
	free(c->frame);
	c->frame = m;
	lws_callback_on_writable(c->wsi);
}

void dg_gw_error_json(struct conn *c, const char *code, const char *fmt, ...)
{
	char msg[DG_ERR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dg_gw_ws_send_json(c, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code", code,
					"message", msg));
}

void dg_gw_conn_free_queue(struct conn *c)
{
	for (struct outmsg *m = c->head, *n; m; m = n) {
		n = m->next;
		free(m);
	}
	c->head = c->tail = NULL;
	c->queued = 0;
	free(c->frame);
	c->frame = NULL;
	free(c->rx);
	c->rx = NULL;
	c->rx_len = 0;
}

int dg_gw_ws_writable(struct conn *c)
{
	struct outmsg *m = c->head;
	bool frame = false;
	if (!m && c->frame) {
		m = c->frame;
		frame = true;
	}
	if (!m)
		return c->closing ? -1 : 0;
	int n = lws_write(c->wsi, m->data + LWS_PRE, m->len, m->binary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT);
	if (n < (int)m->len)
		return -1;
	if (frame) {
		c->frame = NULL;
	} else {
		c->head = m->next;
		if (!c->head)
			c->tail = NULL;
		c->queued -= m->len;
	}
	free(m);
	if (c->head || c->frame)
		lws_callback_on_writable(c->wsi);
	else if (c->closing)
		return -1;
	return 0;
}

int dg_gw_write_http_head(struct lws *wsi, int status, const char *type, unsigned long long len,
			  const char *const *extra)
{
	unsigned char hdr[LWS_PRE + 1024], *start = hdr + LWS_PRE, *p = start,
						 *end = hdr + sizeof(hdr) - 1;
	if (lws_add_http_common_headers(wsi, (unsigned)status, type, (lws_filepos_t)len, &p, end) ||
	    lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
					(const unsigned char *)"no-store", 8, &p, end))
		return -1;
	for (int i = 0; extra && extra[i]; i += 2)
		if (lws_add_http_header_by_name(wsi, (const unsigned char *)extra[i],
						(const unsigned char *)extra[i + 1],
						(int)strlen(extra[i + 1]), &p, end))
			return -1;
	return lws_finalize_write_http_header(wsi, start, &p, end) ? -1 : 0;
}

int dg_gw_write_http_extra(struct lws *wsi, int status, const char *type, const char *const *extra,
			   const char *body, size_t len)
{
	if (dg_gw_write_http_head(wsi, status, type, len, extra) != 0)
		return -1;
	if (len) {
		unsigned char *buf = malloc(LWS_PRE + len);
		if (!buf)
			return -1;
		memcpy(buf + LWS_PRE, body, len);
		int n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL);
		free(buf);
		if (n < 0)
			return -1;
	}
	return lws_http_transaction_completed(wsi) ? -1 : 0;
}

int dg_gw_write_http_wsi(struct lws *wsi, int status, const char *type, const char *body, size_t len)
{
	return dg_gw_write_http_extra(wsi, status, type, NULL, body, len);
}

int dg_gw_write_http(struct conn *c, int status, const char *type, const void *body, size_t len)
{
	return dg_gw_write_http_wsi(c->wsi, status, type, body, len);
}

void dg_gw_sink_conn(struct conn *c, enum conn_kind kind, const struct dg_principal *who,
		     void (*sink)(struct conn *c, int status, json_t *msg), void *ctx)
{
	c->kind = kind;
	c->who = *who;
	c->authed = true;
	c->sink = sink;
	c->sink_ctx = ctx;
}

void dg_gw_http_reply(struct conn *c, int status, json_t *body)
{
	if (c && c->sink) {
		c->sink(c, status, body);
		return;
	}
	if (!c || !c->wsi) {
		json_decref(body);
		return;
	}
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	free(c->reply);
	c->reply = s;
	c->reply_len = s ? strlen(s) : 0;
	c->reply_status = status;
	c->waiting = false;
	lws_callback_on_writable(c->wsi);
}

struct lws *dg_gw_adopt(struct gw *gw, int fd, void *opaque)
{
	lws_sock_file_fd_type u;
	u.filefd = fd;
	struct lws *w = lws_adopt_descriptor_vhost(gw->vh, LWS_ADOPT_RAW_FILE_DESC, u, "dg-raw", NULL);
	if (w)
		lws_set_opaque_user_data(w, opaque);
	return w;
}

static struct raw_tag spawner_tag = {RAW_SPAWNER, NULL, NULL};
static struct raw_tag egress_tag = {RAW_EGRESS, NULL, NULL};

struct lws *dg_gw_spawner_adopt(struct gw *gw, int fd)
{
	return dg_gw_adopt(gw, fd, &spawner_tag);
}

struct lws *dg_gw_egress_adopt(struct gw *gw, int fd)
{
	gw->egress_why[0] = '\0';
	return dg_gw_adopt(gw, fd, &egress_tag);
}

void dg_gw_raw_untag(void *tag)
{
	struct raw_tag *t = tag;
	if (t && t->kind != RAW_SPAWNER && t->kind != RAW_EGRESS)
		t->s = NULL;
}

void *dg_gw_raw_tag(struct gw_session *s, int kind)
{
	struct raw_tag *t = calloc(1, sizeof(*t));
	if (t) {
		t->kind = (enum raw_kind)kind;
		t->s = s;
	}
	return t;
}

struct gw_session *dg_gw_session_find(struct gw *gw, const char *id)
{
	for (int i = 0; i < gw->n_sessions; i++) {
		if (gw->sessions[i].used && strcmp(gw->sessions[i].id, id) == 0)
			return &gw->sessions[i];
	}
	return NULL;
}

void dg_gw_agent_event(struct gw_session *s, unsigned kind, json_t *ev)
{
	if (s->agent && (s->agent->events & kind))
		dg_gw_ws_send_json(s->agent, ev);
	else
		json_decref(ev);
}

void dg_gw_broadcast(struct gw_session *s, json_t *ev)
{
	for (struct conn *o = s->observers; o; o = o->next_observer)
		dg_gw_ws_send_json(o, json_incref(ev));
	json_decref(ev);
}

int dg_gw_new_id(char *out, size_t outlen)
{
	unsigned char rnd[DG_SESSION_ID_RANDOM_HEX / 2];
	char hex[DG_SESSION_ID_RANDOM_HEX + 1];
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		return -EIO;
	dg_hex_encode(rnd, sizeof(rnd), hex);
	int n = snprintf(out, outlen, "%s-%s", dg_instance(), hex);
	return n < 0 || (size_t)n >= outlen ? -ENOSPC : 0;
}
