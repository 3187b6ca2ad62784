/* The live view's gateway half (docs/vnc.md): each viewer's WebSocket
 * (GET /v1/sessions/{id}/vnc, subprotocol "binary") is relayed as bytes to
 * one end of a socketpair whose other end the worker's RFB server
 * (libvncserver, view-only) serves; RFB is never parsed here.
 *
 * Flow control: what the viewer sends waits in a buffer of at most
 * DG_GW_VNC_IN_MAX (its WebSocket is not read meanwhile); what the worker
 * sends is read at once, always, and queued on the WebSocket, so a viewer
 * that reads slowly never holds up the worker: past DG_GW_VNC_BACKLOG_MAX
 * queued it is dropped. Each viewer's coming and going is recorded.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/server-priv.h"

/* Closes c's WebSocket with why (and, once gone, its socket to the worker). */
static void viewer_close(struct conn *c, enum lws_close_status code, const char *why)
{
	if (!c->wsi || c->closing)
		return;
	c->closing = true;
	snprintf(c->close_why, sizeof(c->close_why), "%s", why);
	lws_close_reason(c->wsi, code, (unsigned char *)why, strnlen(why, 120));
	lws_callback_on_writable(c->wsi);
}

/* Lets go of c's socket to the worker (lws closes it). */
static void raw_release(struct conn *c)
{
	if (!c->vnc_raw)
		return;
	struct raw_tag *t = lws_get_opaque_user_data(c->vnc_raw);
	if (t)
		t->c = NULL;
	dg_gw_raw_untag(t);
	lws_set_timeout(c->vnc_raw, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
	c->vnc_raw = NULL;
}

void dg_gw_vnc_attach(struct gw_session *s, struct conn *c)
{
	c->vnc_viewer = ++s->vnc_next;
	c->next_vnc = s->vnc;
	s->vnc = c;
	s->n_vnc++;
	dg_gw_note(s, json_pack("{s:s, s:s, s:I, s:s}", "type", "vnc_viewer", "state", "open",
				"viewer", (json_int_t)c->vnc_viewer, "by", c->who.name));
	int sp[2] = {-1, -1};
	struct dg_err err = {{0}};
	if (s->view_fd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0 ||
	    dg_worker_view_add(s->view_fd, sp[1], &err) != 0) {
		if (sp[0] >= 0) {
			close(sp[0]);
			close(sp[1]);
		}
		viewer_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, "the session's worker is gone");
		return;
	}
	close(sp[1]);
	fcntl(sp[0], F_SETFL, O_NONBLOCK);
	struct raw_tag *t = dg_gw_raw_tag(s, RAW_VNC);
	if (t)
		t->c = c;
	c->vnc_raw = t ? dg_gw_adopt(s->gw, sp[0], t) : NULL;
	if (!c->vnc_raw) {
		free(t);
		close(sp[0]);
		viewer_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, "cannot relay the live view");
	}
}

/* Writes what c's viewer sent to the worker, as much as its socket takes;
 * the viewer is read again once the buffer drained. -1 when the worker's
 * end is gone. */
static int flush_in(struct conn *c)
{
	if (!c->vnc_raw)
		return -1;
	int fd = lws_get_socket_fd(c->vnc_raw);
	size_t off = 0;
	while (off < c->vnc_in_len) {
		ssize_t n = send(fd, c->vnc_in + off, c->vnc_in_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		return -1;
	}
	memmove(c->vnc_in, c->vnc_in + off, c->vnc_in_len - off);
	c->vnc_in_len -= off;
	if (c->vnc_in_len)
		lws_callback_on_writable(c->vnc_raw);
	if (c->vnc_paused && c->vnc_in_len < DG_GW_VNC_IN_MAX / 2 && c->wsi) {
		c->vnc_paused = false;
		lws_rx_flow_control(c->wsi, 1);
	}
	return 0;
}

void dg_gw_vnc_from_viewer(struct conn *c, const void *data, size_t len)
{
	if (c->closing || !c->vnc_raw)
		return;
	/* lws may hand over what it read before the pause took effect: at
	 * most one more read's worth past the bound. */
	if (c->vnc_in_len + len > 2 * DG_GW_VNC_IN_MAX) {
		c->s->gw->m.protocol_errors++;
		viewer_close(c, LWS_CLOSE_STATUS_POLICY_VIOLATION, "the viewer sent too much at once");
		return;
	}
	if (!c->vnc_in && !(c->vnc_in = malloc(2 * DG_GW_VNC_IN_MAX))) {
		viewer_close(c, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, "out of memory");
		return;
	}
	memcpy(c->vnc_in + c->vnc_in_len, data, len);
	c->vnc_in_len += len;
	if (c->vnc_in_len >= DG_GW_VNC_IN_MAX && !c->vnc_paused) {
		c->vnc_paused = true;
		lws_rx_flow_control(c->wsi, 0);
	}
	if (flush_in(c) != 0)
		viewer_close(c, LWS_CLOSE_STATUS_GOINGAWAY, "the live view closed");
}

int dg_gw_vnc_writable(struct raw_tag *t)
{
	if (!t->c)
		return -1;
	if (flush_in(t->c) != 0) {
		viewer_close(t->c, LWS_CLOSE_STATUS_GOINGAWAY, "the live view closed");
		return -1;
	}
	return 0;
}

int dg_gw_vnc_readable(struct raw_tag *t)
{
	struct conn *c = t->c;
	if (!c)
		return -1;
	int fd = lws_get_socket_fd(c->vnc_raw);
	static unsigned char buf[DG_GW_VNC_READ_CHUNK];
	/* A bounded number of reads per wake: other connections get their turn. */
	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			/* The worker closed it: over its limit of viewers, a viewer
			 * that broke RFB, or the desktop gone. */
			viewer_close(c, LWS_CLOSE_STATUS_GOINGAWAY, "the live view closed");
			return -1;
		}
		if (c->closing)
			continue; /* drained, not sent */
		if (c->queued + (size_t)n > DG_GW_VNC_BACKLOG_MAX) {
			c->s->gw->m.protocol_errors++;
			snprintf(c->close_why, sizeof(c->close_why), "the viewer reads too slowly");
			c->closing = true;
			/* Not queued behind what it does not read: cut off now. */
			lws_set_timeout(c->wsi, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
			continue;
		}
		dg_gw_ws_send(c, true, buf, (size_t)n);
	}
	return 0;
}

void dg_gw_vnc_raw_closed(struct raw_tag *t)
{
	if (t->c) {
		t->c->vnc_raw = NULL;
		viewer_close(t->c, LWS_CLOSE_STATUS_GOINGAWAY, "the live view closed");
	}
}

static void record_closed(struct gw_session *s, struct conn *c, const char *reason)
{
	dg_gw_note(s, json_pack("{s:s, s:s, s:I, s:s?}", "type", "vnc_viewer", "state", "closed",
				"viewer", (json_int_t)c->vnc_viewer, "reason",
				reason && reason[0] ? reason : NULL));
}

static void viewer_free(struct conn *c)
{
	raw_release(c);
	free(c->vnc_in);
	c->vnc_in = NULL;
	c->vnc_in_len = 0;
}

void dg_gw_vnc_detach(struct gw_session *s, struct conn *c)
{
	for (struct conn **p = &s->vnc; *p; p = &(*p)->next_vnc) {
		if (*p != c)
			continue;
		*p = c->next_vnc;
		s->n_vnc--;
		record_closed(s, c, c->close_why);
		break;
	}
	viewer_free(c);
}

void dg_gw_vnc_end(struct gw_session *s, const char *reason)
{
	for (struct conn *c = s->vnc, *n; c; c = n) {
		n = c->next_vnc;
		record_closed(s, c, reason);
		viewer_free(c);
		c->s = NULL;
		viewer_close(c, LWS_CLOSE_STATUS_GOINGAWAY, reason);
	}
	s->vnc = NULL;
	s->n_vnc = 0;
}
