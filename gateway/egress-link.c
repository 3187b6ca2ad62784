/* The gateway's side of the egress proxy: each session's listener (created
 * by the spawner in the jail's network namespace) is handed to the proxy,
 * withdrawn when the session ends, and the proxy's events are routed to the
 * session they name.
 *
 * Supervision. The proxy is the spawner's child: the gateway runs
 * unprivileged and cannot start a process under another uid, so it asks the
 * spawner ({"op":"egress"}), at start-up and whenever the proxy's channel
 * closes, and is handed the new proxy's channel. The gateway keeps its own
 * duplicate of every session's listener for the session's life: a listening
 * socket nobody accepts on queues the jail's connections in its backlog
 * (DG_JAIL_EGRESS_BACKLOG), and the next proxy is handed every live session
 * again, each with its own egress list and its connection numbers continued
 * (dg_egress_add_after), so the desktops reach their allowed hosts again.
 *
 * What a death costs: the connections the dead proxy had open fail with it
 * (their clients see a reset or an early end). Each one that was decided is
 * recorded as closed with that reason (an "egress_closed" event with null
 * byte counts: the counts died with the proxy), and every session it served
 * gets an "egress_proxy" event {"state":"died"}, then {"state":"restarted"}
 * once a new proxy has its listener. During the gap new sessions are created
 * as usual: their listener waits with the others and is handed over when the
 * new proxy is up.
 *
 * Back-off: the restart is asked for DG_GW_EGRESS_BACKOFF_MS after a death,
 * doubled for each earlier death within DG_GW_EGRESS_WINDOW_MS (at most
 * DG_GW_EGRESS_BACKOFF_MAX_MS). At the DG_GW_EGRESS_DEATHS_MAX-th death
 * within the window (a start that failed counts as one) the gateway stops
 * restarting it: every session ends saying so and new sessions are refused
 * (503) until deskgate is restarted; the gateway stays up for viewers and
 * recordings.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/server-priv.h"

/* ---- per session ------------------------------------------------------------- */

/* An "egress_proxy" event for s's recording and observers (fields stolen:
 * an object with more members, or NULL). */
static void note_proxy(struct gw_session *s, const char *state, json_t *fields)
{
	json_t *ev = fields ? fields : json_object();
	if (!ev)
		return;
	json_object_set_new(ev, "type", json_string("egress_proxy"));
	json_object_set_new(ev, "state", json_string(state));
	dg_gw_note_decision(s, ev);
}

static void open_add(struct gw_session *s, uint64_t n)
{
	for (int i = 0; i < s->n_egress_open; i++)
		if (s->egress_open[i] == n)
			return;
	if (s->n_egress_open == DG_GW_EGRESS_OPEN_MAX)
		s->egress_untracked++;
	else
		s->egress_open[s->n_egress_open++] = n;
}

static void open_remove(struct gw_session *s, uint64_t n)
{
	for (int i = 0; i < s->n_egress_open; i++) {
		if (s->egress_open[i] == n) {
			s->egress_open[i] = s->egress_open[--s->n_egress_open];
			return;
		}
	}
	if (s->egress_untracked)
		s->egress_untracked--;
}

/* The proxy that served s died: its decided connections are recorded as
 * cut, then the death itself (restart_ms: when a new proxy is asked for,
 * -1: never). */
static void cut(struct gw_session *s, const char *why, long long restart_ms)
{
	char error[DG_ERR_MAX + 160];
	snprintf(error, sizeof(error),
		 "the egress proxy died (%s) before it reported this connection's end: the "
		 "connection failed with it", why);
	int n = s->n_egress_open;
	for (int i = 0; i < n; i++) {
		json_t *ev = json_pack("{s:s, s:I, s:n, s:n, s:n, s:s}", "type", "egress_closed",
				       "conn", (json_int_t)s->egress_open[i], "bytes_up", "bytes_down",
				       "duration_ms", "error", error);
		if (ev)
			dg_gw_note_decision(s, ev);
	}
	json_t *f = json_pack("{s:s, s:i, s:I, s:s}", "error", why, "connections_cut", n,
			      "connections_untracked", (json_int_t)s->egress_untracked, "in_flight",
			      "every connection the proxy had open for the session failed");
	if (f)
		json_object_set_new(f, "restart_in_ms",
				    restart_ms >= 0 ? json_integer(restart_ms) : json_null());
	note_proxy(s, "died", f);
	s->n_egress_open = 0;
	s->egress_untracked = 0;
	s->egress_added = false;
}

void dg_gw_egress_attach(struct gw_session *s)
{
	if (s->egress_fd < 0 || s->egress_added)
		return;
	struct gw *gw = s->gw;
	if (!gw->egress_wsi)
		return; /* between two proxies: the next one is handed it */
	struct dg_err err = {{0}};
	int r = dg_egress_add_after(&gw->egress, s->id, s->egress_fd, &s->policy,
				    s->egress_conn_max, &err);
	if (r == -EPIPE || r == -ECONNRESET)
		return; /* the proxy is going: its channel's close follows, then the next one */
	if (r != 0) {
		/* The desktop would have no way out at all, which is safe, but the
		 * agent would see every page fail without a reason. */
		lwsl_err("deskgate: session %s: handing its listener to the egress proxy: %s\n", s->id,
			 err.msg);
		dg_gw_session_end(s, "the egress proxy did not take the session's listener");
		return;
	}
	s->egress_added = true;
}

void dg_gw_egress_event(struct gw *gw, json_t *ev)
{
	const char *id = json_string_value(json_object_get(ev, "session"));
	const char *kind = json_string_value(json_object_get(ev, "event"));
	struct gw_session *s = id ? dg_gw_session_find(gw, id) : NULL;
	if (!s || !kind)
		return;
	json_int_t conn = json_integer_value(json_object_get(ev, "conn"));
	if (conn > 0) {
		if ((uint64_t)conn > s->egress_conn_max)
			s->egress_conn_max = (uint64_t)conn;
		if (strcmp(kind, "egress") == 0)
			open_add(s, (uint64_t)conn);
		else if (strcmp(kind, "egress_closed") == 0)
			open_remove(s, (uint64_t)conn);
	}
	json_t *out = json_deep_copy(ev);
	json_object_del(out, "event");
	json_object_del(out, "session");
	if (strcmp(kind, "egress") == 0) {
		const char *verdict = json_string_value(json_object_get(ev, "verdict"));
		bool allowed = verdict && strcmp(verdict, "allow") == 0;
		gw->m.egress[allowed ? 0 : 1]++;
		json_object_set_new(out, "type", json_string("decision"));
		json_object_set_new(out, "layer", json_string("egress"));
		/* host and port apart, as replay re-decides them. */
		const char *target = json_string_value(json_object_get(ev, "target"));
		const char *colon = target ? strrchr(target, ':') : NULL;
		if (colon && colon > target) {
			json_object_set_new(out, "host", json_stringn(target, (size_t)(colon - target)));
			json_object_set_new(out, "port", json_integer(strtol(colon + 1, NULL, 10)));
		}
	} else if (strcmp(kind, "decision") == 0) {
		/* A WebSocket decided by its URL at the proxy's SOCKS front: a
		 * browser request like those the guard holds. */
		const char *verdict = json_string_value(json_object_get(ev, "verdict"));
		bool allowed = verdict && strcmp(verdict, "allow") == 0;
		gw->m.requests[allowed ? 0 : 1]++;
		s->n_requests++;
		if (!allowed)
			s->n_requests_blocked++;
		json_object_set_new(out, "type", json_string("decision"));
	} else {
		json_object_set_new(out, "type", json_string(kind));
	}
	dg_gw_note_decision(s, out);
}

/* ---- the proxy itself ------------------------------------------------------- */

/* Takes the spawner's answer to an egress start: the channel, non-blocking,
 * into gw->egress. Closes what it does not take. */
static int take(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds, int nfds,
		struct dg_err *err)
{
	if (msg->type != DG_SPAWN_CHANNEL || nfds != 1) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		const char *why = msg->type == DG_SPAWN_ERROR ? msg->u.text : NULL;
		return dg_err_set(err, -EIO, "the spawner could not start the egress proxy: %s",
				  why ? why : "no channel in its answer");
	}
	fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
	gw->egress.fd = fds[0];
	gw->egress.pid = -1; /* the spawner's child: the spawner reaps it */
	gw->egress_pid = (pid_t)msg->u.channel.pid;
	return 0;
}

int dg_gw_egress_start(struct gw *gw, struct dg_err *err)
{
	gw->egress.fd = -1;
	gw->egress.pid = -1;
	gw->egress_pid = -1;
	int req = dg_spawner_egress(&gw->spawner, err);
	if (req < 0)
		return req;
	long long deadline = dg_now_ms() + DG_GW_EGRESS_START_WAIT_MS;
	for (;;) {
		struct dg_spawn_msg msg;
		int fds[DG_SEQ_FDS_MAX], nfds = 0;
		int r = dg_spawner_recv(&gw->spawner, &msg, fds, &nfds, err);
		if (r < 0)
			return r;
		if (r == 1) {
			/* Nothing else was asked yet: anything else is dropped. */
			bool ours = (int)msg.req == req;
			r = ours ? take(gw, &msg, fds, nfds, err) : 0;
			if (!ours)
				for (int i = 0; i < nfds; i++)
					close(fds[i]);
			if (ours)
				return r;
			continue;
		}
		long long left = deadline - dg_now_ms();
		if (left <= 0)
			return dg_err_set(err, -ETIMEDOUT, "the spawner did not start the egress proxy "
					  "within %d ms", DG_GW_EGRESS_START_WAIT_MS);
		struct pollfd p = {gw->spawner.fd, POLLIN, 0};
		poll(&p, 1, (int)left);
	}
}

static void on_restart(lws_sorted_usec_list_t *sul)
{
	struct gw *gw = (struct gw *)((char *)sul - offsetof(struct gw, sul_egress));
	if (gw->stopping || gw->egress_dead || gw->egress_req || gw->egress_wsi)
		return;
	struct dg_err err = {{0}};
	int req = dg_spawner_egress(&gw->spawner, &err);
	if (req < 0) {
		/* The spawner's channel is broken: the gateway is about to stop. */
		fprintf(stderr, "deskgate: egress: asking the spawner for a new proxy: %s\n", err.msg);
		return;
	}
	gw->egress_req = req;
}

/* Deaths within the window, this one (at now) included. */
static int note_death(struct gw *gw, long long now)
{
	int keep = gw->n_egress_deaths < DG_GW_EGRESS_DEATHS_MAX ? gw->n_egress_deaths
								  : DG_GW_EGRESS_DEATHS_MAX - 1;
	memmove(gw->egress_deaths + 1, gw->egress_deaths, sizeof(long long) * (size_t)keep);
	gw->egress_deaths[0] = now;
	gw->n_egress_deaths = keep + 1;
	int k = 0;
	while (k < gw->n_egress_deaths && now - gw->egress_deaths[k] < DG_GW_EGRESS_WINDOW_MS)
		k++;
	return k;
}

void dg_gw_egress_lost(struct gw *gw, const char *why)
{
	if (gw->stopping || gw->egress_dead)
		return; /* stopping: the proxy ends with the gateway */
	int pid = (int)gw->egress_pid;
	gw->egress_pid = -1;
	int k = note_death(gw, dg_now_ms());
	bool give_up = k >= DG_GW_EGRESS_DEATHS_MAX;
	long long delay = DG_GW_EGRESS_BACKOFF_MS;
	for (int i = 1; i < k && delay < DG_GW_EGRESS_BACKOFF_MAX_MS; i++)
		delay *= 2;
	if (delay > DG_GW_EGRESS_BACKOFF_MAX_MS)
		delay = DG_GW_EGRESS_BACKOFF_MAX_MS;
	int served = 0;
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (s->used && s->egress_added) {
			cut(s, why, give_up ? -1 : delay);
			served++;
		}
	}
	if (give_up) {
		gw->egress_dead = true;
		fprintf(stderr, "deskgate: egress: the proxy (pid %d) died (%s), %d times within %d s: "
				"not restarting it; every session ends and new sessions are refused "
				"until deskgate restarts\n", pid, why, k, DG_GW_EGRESS_WINDOW_MS / 1000);
		char reason[160];
		snprintf(reason, sizeof(reason), "the egress proxy died %d times within %d s: "
			 "deskgate stopped restarting it", k, DG_GW_EGRESS_WINDOW_MS / 1000);
		for (int i = 0; i < gw->n_sessions; i++)
			if (gw->sessions[i].used)
				dg_gw_session_end(&gw->sessions[i], reason);
		return;
	}
	fprintf(stderr, "deskgate: egress: the proxy (pid %d) died (%s): the connections it had open "
			"failed; %d sessions keep running; restarting it in %lld ms (death %d of %d "
			"within %d s)\n", pid, why, served, delay, k, DG_GW_EGRESS_DEATHS_MAX,
		DG_GW_EGRESS_WINDOW_MS / 1000);
	lws_sul_schedule(gw->ctx, 0, &gw->sul_egress, on_restart, (lws_usec_t)delay * LWS_US_PER_MS);
}

bool dg_gw_egress_spawner_message(struct gw *gw, const struct dg_spawn_msg *msg, const int *fds,
				  int nfds)
{
	if (!gw->egress_req || (int)msg->req != gw->egress_req)
		return false;
	gw->egress_req = 0;
	struct dg_err err = {{0}};
	if (gw->stopping || gw->egress_dead) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return true;
	}
	if (take(gw, msg, fds, nfds, &err) != 0) {
		dg_gw_egress_lost(gw, err.msg);
		return true;
	}
	gw->egress_wsi = dg_gw_egress_adopt(gw, gw->egress.fd);
	if (!gw->egress_wsi) {
		close(gw->egress.fd);
		gw->egress.fd = -1;
		dg_gw_egress_lost(gw, "the gateway cannot watch the new proxy's channel");
		return true;
	}
	gw->m.egress_restarts++;
	int handed = 0;
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		if (!s->used || s->egress_fd < 0 || s->egress_added)
			continue;
		dg_gw_egress_attach(s);
		if (s->used && s->egress_added) {
			handed++;
			note_proxy(s, "restarted", json_pack("{s:i}", "pid", (int)gw->egress_pid));
		}
	}
	fprintf(stderr, "deskgate: egress: restarted the proxy (pid %d, restart %lu); handed it the "
			"listeners of %d sessions\n", (int)gw->egress_pid, gw->m.egress_restarts, handed);
	return true;
}
