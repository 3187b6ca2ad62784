/* The gateway's side of a session's desktop: the worker's channel (READY,
 * results, frames, events, the browser's held requests), the exec result
 * channel, and the spawner's messages about sessions (created, ended, exec
 * started, upload paths checked: to dg_gw_upload_checked). Above the
 * sessions' lifecycle and the runner: what the desktop says ends a step
 * (dg_gw_step_done) or the session (dg_gw_session_end).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/server-priv.h"

static void worker_event(struct gw_session *s, json_t *ev)
{
	const char *kind = json_string_value(json_object_get(ev, "event"));
	if (kind && strcmp(kind, "page") == 0)
		dg_gw_set_page(s, ev);
	if (kind && (strcmp(kind, "guard") == 0 || strcmp(kind, "page") == 0)) {
		/* What the browser did on its own: a page change, or a download or
		 * file chooser the guard refused. */
		json_t *rec = json_deep_copy(ev);
		json_object_del(rec, "event");
		if (strcmp(kind, "guard") == 0) {
			/* Not a URL decision (downloads and file choosers are always
			 * refused): a layer of its own, which replay leaves alone. */
			json_object_set_new(rec, "type", json_string("decision"));
			json_object_set_new(rec, "layer", json_string("browser-guard"));
		} else {
			json_object_set_new(rec, "type", json_string("page"));
		}
		dg_gw_rec_event(s, rec);
		json_decref(rec);
	}
	json_t *out = json_deep_copy(ev);
	json_object_set_new(out, "type", json_string("event"));
	/* The agent gets page and guard events only when its hello asked
	 * (one rule for its socket: the next message after an action is the
	 * answer); observers get every one. */
	unsigned bit = dg_agent_event_bit(kind);
	if (bit == DG_AGENT_EVENT_PAGE || bit == DG_AGENT_EVENT_GUARD)
		dg_gw_agent_event(s, bit, json_incref(out));
	dg_gw_broadcast(s, out);
	if (kind && strcmp(kind, "error") == 0) {
		const char *m = json_string_value(json_object_get(ev, "message"));
		json_t *er = json_pack("{s:s, s:s, s:s}", "type", "error", "source", "worker", "message",
				       m ? m : "unknown error");
		dg_gw_rec_event(s, er);
		json_decref(er);
		char why[DG_ERR_MAX];
		snprintf(why, sizeof(why), "the desktop failed: %s", m ? m : "unknown error");
		dg_gw_session_end(s, why); /* answers the action in progress */
	}
}

static void on_gone(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s = (struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_gone));
	if (s->used)
		dg_gw_session_end(s, "the desktop's worker ended");
}

/* The worker's channel closed: the session ends, with the spawner's reason
 * (what in the desktop died) when it comes within DG_GW_GONE_WAIT_MS. */
static void worker_gone(struct gw_session *s)
{
	if (!s->used || s->gone)
		return;
	s->gone = true;
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_gone, on_gone, DG_GW_GONE_WAIT_MS * 1000);
}

/* A request the browser holds (the browser layer of #5): decided in
 * decide.c, answered at once, and shown to observers; a malformed one ends
 * the session. */
static int browser_request(struct gw_session *s, int fd)
{
	struct dg_err err = {{0}};
	if (dg_gw_decide_request(s, fd, s->rd.buf, s->rd.len, &err) != 0) {
		dg_gw_session_end(s, err.msg);
		return -1;
	}
	return 0;
}

int dg_gw_worker_readable(struct gw_session *s)
{
	if (!s)
		return -1;
	int fd = lws_get_socket_fd(s->worker);
	dg_ipc_read_begin(&s->rd); /* read until 0, below */
	for (;;) {
		struct dg_err err = {{0}};
		int r = dg_ipc_read(fd, &s->rd, &err);
		if (r == 0)
			return 0;
		if (r < 0) {
			/* The worker broke the protocol or went away: its session ends,
			 * nothing else does. */
			if (r == -EPIPE) {
				/* Usually the desktop died and the spawner, which knows
				 * what died, is about to say so: wait for it (bounded). */
				worker_gone(s);
				return -1;
			}
			dg_gw_session_end(s, "the desktop's worker broke the protocol");
			return -1;
		}
		if (s->rd.type == DG_MSG_CDP_OUT || s->rd.type == DG_MSG_CDP_DROP ||
		    s->rd.type == DG_MSG_CDP_DECIDE || s->rd.type == DG_MSG_CDP_NOTE ||
		    s->rd.type == DG_MSG_CDP_FRAME) {
			/* The CDP endpoint's: relayed or decided by cdp-link.c. */
			if (dg_gw_cdp_from_worker(s, s->rd.type, s->rd.buf, s->rd.len, &err) != 0) {
				dg_gw_session_end(s, err.msg);
				return -1;
			}
			if (!s->used)
				return -1;
			continue;
		}
		json_t *j = NULL;
		/* A REQUEST is decoded once, by decide.c (typed); a FRAME is a PNG. */
		if (s->rd.type != DG_MSG_FRAME && s->rd.type != DG_MSG_REQUEST) {
			j = json_loadb((const char *)s->rd.buf, s->rd.len, 0, NULL);
			if (!json_is_object(j)) {
				json_decref(j);
				dg_gw_session_end(s, "the desktop's worker sent a malformed message");
				return -1;
			}
		}
		switch (s->rd.type) {
		case DG_MSG_READY:
			if (s->state == S_STARTING) {
				dg_gw_set_page(s, j);
				dg_gw_session_ready(s);
			}
			json_decref(j);
			break;
		case DG_MSG_RESULT:
			if (json_object_get(j, "frame")) {
				json_decref(s->pending_result);
				s->pending_result = j;
			} else {
				dg_gw_step_done(s, j);
			}
			break;
		case DG_MSG_FRAME: {
			unsigned char *png = malloc(s->rd.len ? s->rd.len : 1);
			if (!png)
				return -1;
			memcpy(png, s->rd.buf, s->rd.len);
			if (json_object_get(s->pending_result, "region") && s->cur) {
				/* A zoom or a region's screenshot shows part of the
				 * screen: it answers the agent but is not the session's
				 * current screen. */
				free(s->cur->zoom_png);
				s->cur->zoom_png = png;
				s->cur->zoom_len = s->rd.len;
				dg_gw_rec_frame(s, png, s->rd.len, s->cur->zoom_frame);
			} else {
				dg_gw_set_screen(s, png, s->rd.len);
			}
			json_t *res = s->pending_result;
			s->pending_result = NULL;
			if (res)
				dg_gw_step_done(s, res);
			break;
		}
		case DG_MSG_EVENT:
			worker_event(s, j);
			json_decref(j);
			break;
		case DG_MSG_REQUEST:
			json_decref(j);
			if (browser_request(s, fd) != 0)
				return -1;
			break;
		default:
			json_decref(j);
			dg_gw_session_end(s, "the desktop's worker sent an unknown message");
			return -1;
		}
		if (!s->used)
			return -1;
	}
}

int dg_gw_set_screen(struct gw_session *s, unsigned char *png, size_t len)
{
	free(s->png);
	s->png = png;
	s->png_len = len;
	int r = dg_gw_rec_frame(s, png, len, s->frame_hash);
	for (struct conn *o = s->observers; o; o = o->next_observer)
		dg_gw_ws_send_frame(o, s->png, s->png_len);
	return r;
}

void dg_gw_worker_closed(struct gw_session *s)
{
	if (s && s->used) {
		s->worker = NULL;
		worker_gone(s);
	}
}

int dg_gw_exec_readable(struct gw_session *s)
{
	if (!s)
		return -1;
	int fd = lws_get_socket_fd(s->exec_wsi);
	char buf[16384];
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EAGAIN)
			return 0;
		if (k <= 0)
			return -1; /* end of the result: handled in dg_gw_exec_closed */
		if (s->exec_len + (size_t)k > DG_EXEC_RESULT_MAX)
			return -1;
		char *nb = realloc(s->exec_buf, s->exec_len + (size_t)k + 1);
		if (!nb)
			return -1;
		memcpy(nb + s->exec_len, buf, (size_t)k);
		s->exec_buf = nb;
		s->exec_len += (size_t)k;
		s->exec_buf[s->exec_len] = '\0';
	}
}

void dg_gw_exec_closed(struct gw_session *s)
{
	if (!s || !s->used)
		return;
	s->exec_wsi = NULL;
	struct dg_exec_result er;
	json_t *res = s->exec_buf && dg_exec_result_decode((const uint8_t *)s->exec_buf, s->exec_len,
							   &er, NULL) == 0
			      ? dg_exec_result_json(&er)
			      : NULL;
	free(s->exec_buf);
	s->exec_buf = NULL;
	s->exec_len = 0;
	if (s->blast_exec)
		return s->blast_exec(s, res, res ? NULL : "no result from the jail");
	if (!s->cur)
		return json_decref(res);
	if (!json_is_object(res)) {
		json_decref(res);
		return dg_gw_step_failed(s, "exec: no result from the jail");
	}
	bool ok = json_is_true(json_object_get(res, "ok"));
	json_t *wrap = json_pack("{s:b, s:s, s:o}", "ok", ok, "action", "exec", "exec", res);
	if (!ok)
		json_object_set(wrap, "error", json_object_get(res, "error"));
	/* The answer carries the screen after the command, like every action. */
	json_decref(s->cur->last_result);
	s->cur->last_result = NULL;
	if (!ok) {
		dg_gw_step_done(s, wrap);
		return;
	}
	s->cur->last_result = wrap;
	static const char shot[] = "{\"type\":\"screenshot\"}";
	int e = dg_gw_send_to_worker(s, shot, sizeof(shot) - 1);
	if (e)
		dg_gw_step_failed(s, "the desktop's worker is gone");
	else
		s->exec_req = -1; /* the worker's RESULT/FRAME completes the step */
}

void dg_gw_spawner_message(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds, int nfds)
{
	bool ended = msg->type == DG_SPAWN_ENDED;
	int req = (int)msg->req;
	struct gw_session *s = NULL;
	for (int i = 0; i < gw->n_sessions && !s; i++) {
		struct gw_session *x = &gw->sessions[i];
		if (!x->used)
			continue;
		if ((ended && strcmp(x->id, msg->session) == 0) ||
		    (req && (x->create_req == req || x->exec_req == req || x->upload_req == req ||
			     x->cdp_upload_req == req)))
			s = x;
	}
	if (!s) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return;
	}
	if (ended) {
		/* The action in progress is answered by dg_gw_session_end. */
		dg_gw_session_end(s, msg->u.text[0] ? msg->u.text : "the desktop ended");
		return;
	}
	const char *error = msg->type == DG_SPAWN_ERROR ? msg->u.text : NULL;
	if (req == s->cdp_upload_req) {
		s->cdp_upload_req = 0;
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (msg->type == DG_SPAWN_UPLOAD_CHECKED && strcmp(msg->session, s->id) == 0)
			dg_gw_cdp_upload_checked(s, &msg->u.upload_checked, NULL);
		else
			dg_gw_cdp_upload_checked(s, NULL, error ? error : "the spawner answered no check");
		return;
	}
	if (req == s->upload_req) {
		s->upload_req = 0;
		for (int i = 0; i < nfds; i++)
			close(fds[i]); /* neither answer carries any */
		if (msg->type == DG_SPAWN_UPLOAD_CHECKED && strcmp(msg->session, s->id) == 0)
			dg_gw_upload_checked(s, &msg->u.upload_checked, NULL);
		else
			dg_gw_upload_checked(s, NULL, error ? error : "the spawner answered no check");
		return;
	}
	if (req == s->create_req) {
		s->create_req = 0;
		if (msg->type != DG_SPAWN_CREATED || nfds != 3) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			dg_gw_session_end(s, error ? error : "the spawner could not start the desktop");
			return;
		}
		s->egress_fd = fds[1];
		s->view_fd = fds[2];
		s->warm = msg->u.created.warm;
		dg_gw_egress_attach(s);
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		s->worker = dg_gw_adopt(gw, fds[0], dg_gw_raw_tag(s, 2));
		if (!s->worker) {
			close(fds[0]);
			dg_gw_session_end(s, "cannot watch the worker's channel");
		}
		return;
	}
	if (req == s->exec_req) {
		s->exec_req = 0;
		if (msg->type != DG_SPAWN_CHANNEL || nfds != 1) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			if (s->blast_exec)
				s->blast_exec(s, NULL, error ? error : "the spawner refused it");
			else if (s->cur)
				dg_gw_step_failed(s, "exec: %s", error ? error : "the spawner refused it");
			return;
		}
		fcntl(fds[0], F_SETFL, O_NONBLOCK);
		s->exec_wsi = dg_gw_adopt(gw, fds[0], dg_gw_raw_tag(s, 3));
		if (!s->exec_wsi) {
			close(fds[0]);
			if (s->blast_exec)
				s->blast_exec(s, NULL, "cannot watch the result channel");
			else if (s->cur)
				dg_gw_step_failed(s, "exec: cannot watch the result channel");
		}
		return;
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}
