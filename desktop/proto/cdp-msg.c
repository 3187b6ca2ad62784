/* The CDP endpoint's messages between a session's owner and its worker
 * (proto.h, "the CDP endpoint's messages"). The worker is the less trusted
 * end: everything it sends is checked here, once, and handed on typed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "desktop/proto/proto.h"

int dg_cdp_client_of(const uint8_t *data, size_t len, uint32_t *client, const uint8_t **rest,
		     size_t *rest_len)
{
	if (len < DG_CDP_CLIENT_HDR)
		return -EPROTO;
	memcpy(client, data, DG_CDP_CLIENT_HDR);
	*rest = data + DG_CDP_CLIENT_HDR;
	*rest_len = len - DG_CDP_CLIENT_HDR;
	return 0;
}

int dg_cdp_client_send(int fd, uint32_t type, uint32_t client, const void *data, size_t len)
{
	return dg_ipc_send_prefixed(fd, type, &client, sizeof(client), data, len);
}

bool dg_cdp_method_ok(const char *m)
{
	size_t n = strlen(m), dots = 0;
	if (n < 3 || n > DG_CDP_METHOD_MAX || m[0] == '.' || m[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = m[i];
		if (c == '.')
			dots++;
		else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			   c == '_'))
			return false;
	}
	return dots == 1;
}

/* The header before a DECIDE's or NOTE's command: req, client, the
 * session's length. */
#define DECIDE_HDR (8 + 4 + 1)

int dg_cdp_decide_send(int fd, uint32_t type, uint64_t req, uint32_t client, const char *session,
		       const char *cmd, size_t cmd_len)
{
	size_t n = strlen(session);
	if (n > DG_CDP_SESSION_MAX || (type != DG_MSG_CDP_DECIDE && type != DG_MSG_CDP_NOTE))
		return -EINVAL;
	uint8_t hdr[DECIDE_HDR + DG_CDP_SESSION_MAX];
	memcpy(hdr, &req, 8);
	memcpy(hdr + 8, &client, 4);
	hdr[12] = (uint8_t)n;
	memcpy(hdr + DECIDE_HDR, session, n);
	return dg_ipc_send_prefixed(fd, type, hdr, DECIDE_HDR + n, cmd, cmd_len);
}

int dg_cdp_decide_decode(const uint8_t *data, size_t len, struct dg_cdp_decide *d,
			 struct dg_err *err)
{
	memset(d, 0, sizeof(*d));
	if (len < DECIDE_HDR || len < DECIDE_HDR + (size_t)data[12] ||
	    data[12] > DG_CDP_SESSION_MAX)
		return dg_err_set(err, -EPROTO, "worker: malformed CDP decide message (header)");
	size_t sn = data[12];
	memcpy(&d->req, data, 8);
	memcpy(&d->client, data + 8, 4);
	memcpy(d->session_buf, data + DECIDE_HDR, sn);
	d->session_buf[sn] = 0;
	for (size_t i = 0; i < sn; i++)
		if (d->session_buf[i] <= 0x20 || d->session_buf[i] >= 0x7f)
			d->req = 0;
	const uint8_t *cmd = data + DECIDE_HDR + sn;
	size_t cmd_len = len - DECIDE_HDR - sn;
	json_t *m = json_loadb((const char *)cmd, cmd_len, JSON_REJECT_DUPLICATES, NULL);
	static const char *const keys[] = {"method", "action", "code", "url", "params"};
	const char *key;
	json_t *v;
	bool known = json_is_object(m);
	json_object_foreach(m, key, v)
	{
		bool k = false;
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
			k = k || strcmp(key, keys[i]) == 0;
		known = known && k;
	}
	json_t *method = json_object_get(m, "method");
	json_t *action = json_object_get(m, "action"), *code = json_object_get(m, "code");
	json_t *url = json_object_get(m, "url"), *params = json_object_get(m, "params");
	if (!known || d->req == 0 || !json_is_string(method) ||
	    !dg_cdp_method_ok(json_string_value(method)) || (action && !json_is_object(action)) ||
	    (code && !json_is_string(code)) || (code && json_string_length(code) > DG_CDP_CODE_MAX) ||
	    (url && !json_is_string(url)) || (params && !json_is_object(params))) {
		json_decref(m);
		memset(d, 0, sizeof(*d));
		return dg_err_set(err, -EPROTO, "worker: malformed CDP decide message");
	}
	d->method = json_string_value(method);
	d->session = d->session_buf;
	d->action = action;
	d->code = code ? json_string_value(code) : NULL;
	d->code_len = code ? json_string_length(code) : 0;
	d->url = url ? json_string_value(url) : NULL;
	d->params = params;
	d->msg = m;
	return 0;
}

void dg_cdp_decide_free(struct dg_cdp_decide *d)
{
	json_decref(d->msg);
	memset(d, 0, sizeof(*d));
}

/* The length of s cut to at most max bytes at a character's start. */
static size_t utf8_cut(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

int dg_cdp_verdict_send(int fd, const struct dg_cdp_verdict *v, struct dg_err *err)
{
	/* Cut so that the message fits DG_IPC_CDP_SMALL_MAX whatever it says. */
	json_t *j = json_pack("{s:I, s:b, s:b, s:s%, s:s%}", "req", (json_int_t)v->req, "allow",
			      v->allow, "cache", v->allow && v->cache, "rule", v->rule, utf8_cut(v->rule, 60), "reason", v->reason,
			      utf8_cut(v->reason, 400));
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!s)
		return dg_err_set(err, -ENOMEM, "CDP verdict: out of memory");
	int rc = dg_ipc_send(fd, DG_MSG_CDP_VERDICT, s, strlen(s));
	free(s);
	return rc ? dg_err_set(err, rc, "CDP verdict: %s", strerror(-rc)) : 0;
}

int dg_cdp_verdict_decode(const uint8_t *data, size_t len, struct dg_cdp_verdict *v,
			  struct dg_err *err)
{
	memset(v, 0, sizeof(*v));
	json_t *m = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *req = json_object_get(m, "req"), *allow = json_object_get(m, "allow");
	json_t *cache = json_object_get(m, "cache");
	json_t *rule = json_object_get(m, "rule"), *reason = json_object_get(m, "reason");
	if (!json_is_object(m) || json_object_size(m) != 5 || !json_is_integer(req) ||
	    json_integer_value(req) <= 0 || !json_is_boolean(allow) || !json_is_boolean(cache) || !json_is_string(rule) ||
	    !json_is_string(reason) || json_string_length(rule) >= sizeof(v->rule) ||
	    json_string_length(reason) >= sizeof(v->reason)) {
		json_decref(m);
		return dg_err_set(err, -EPROTO, "malformed CDP verdict message");
	}
	v->req = (uint64_t)json_integer_value(req);
	v->allow = json_is_true(allow);
	v->cache = v->allow && json_is_true(cache);
	snprintf(v->rule, sizeof(v->rule), "%s", json_string_value(rule));
	snprintf(v->reason, sizeof(v->reason), "%s", json_string_value(reason));
	json_decref(m);
	return 0;
}

int dg_cdp_frame_send(int fd, uint64_t first, uint64_t last, const void *png, size_t png_len)
{
	uint64_t hdr[2] = {first, last};
	return dg_ipc_send_prefixed(fd, DG_MSG_CDP_FRAME, hdr, sizeof(hdr), png, png_len);
}

int dg_cdp_frame_decode(const uint8_t *data, size_t len, uint64_t *first, uint64_t *last,
			const uint8_t **png, size_t *png_len)
{
	if (len <= DG_CDP_FRAME_HDR)
		return -EPROTO;
	memcpy(first, data, 8);
	memcpy(last, data + 8, 8);
	if (*first > *last || (*first == 0) != (*last == 0))
		return -EPROTO;
	*png = data + DG_CDP_FRAME_HDR;
	*png_len = len - DG_CDP_FRAME_HDR;
	return 0;
}
