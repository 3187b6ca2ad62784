/* The egress proxy's sessions (egress-proxy-priv.h): the gateway's control
 * messages ({"op":"add"} with a session's listener and its rules,
 * {"op":"remove"}; desktop/proto/proto.h has the channel) and the session
 * slots they fill and free. A malformed message is answered with an
 * "egress_error" event and ignored; a failed add closes the descriptors it
 * carried. Calls egress-conn.c and egress-events.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "desktop/egress/egress-proxy-priv.h"

static struct session *find_session(const char *id)
{
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX; i++)
		if (G.sessions[i].used && strcmp(G.sessions[i].id, id) == 0)
			return &G.sessions[i];
	return NULL;
}


void dg_egress_session_remove(struct session *s)
{
	s->removing = true;
	if (s->lfd >= 0)
		close(s->lfd);
	s->lfd = -1;
	int closed = 0;
	while (s->head) {
		dg_egress_conn_close(s->head, "the session was removed");
		closed++;
	}
	for (struct lookup *l = G.lookups; l; l = l->next)
		if (l->s == s)
			l->s = NULL;
	char id[sizeof(s->id)];
	snprintf(id, sizeof(id), "%s", s->id);
	if (s->own_pol)
		dg_policy_free(&s->pol);
	memset(s, 0, sizeof(*s));
	s->lfd = -1;
	dg_egress_emit_session(id, "remove", NULL, closed);
}

static int check_listener(int fd, char *why, size_t n)
{
	int v = 0, type = 0, dom = 0;
	socklen_t l = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) != 0 || !v) {
		snprintf(why, n, "the descriptor is not a listening socket");
		return -1;
	}
	l = sizeof(type);
	getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l);
	l = sizeof(dom);
	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l);
	if (type != SOCK_STREAM || (dom != AF_INET && dom != AF_INET6)) {
		snprintf(why, n, "the descriptor is not a TCP socket");
		return -1;
	}
	return 0;
}

/* Compiles the "egress" list an add carried, and its "urls" section (for
 * the WebSockets of the SOCKS front; absent: every WebSocket gets "deny"),
 * into a policy of those sections alone (the policy loader checks every
 * pattern again: they came over the channel). */
static int session_rules(const json_t *list, const json_t *urls, struct dg_policy *p, char *why,
			 size_t n)
{
	json_t *u = json_is_object(urls) ? json_deep_copy(urls) : json_object();
	const char *dflt = json_string_value(json_object_get(u, "default"));
	json_t *doc = json_pack("{s:i, s:s, s:{s:O}}", "version", DG_POLICY_VERSION, "default",
				dflt ? dflt : "deny", "egress", "allow", list);
	json_object_del(u, "default");
	if (doc && json_object_size(u) > 0)
		json_object_set(doc, "urls", u);
	json_decref(u);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	struct dg_err err = {{0}};
	int r = text ? dg_policy_parse(text, strlen(text), "session egress", p, &err) : -ENOMEM;
	free(text);
	if (r)
		snprintf(why, n, "bad egress list: %.120s", text ? err.msg : "out of memory");
	return r;
}

static void op_add(const char *id, const json_t *egress, const json_t *urls,
		   const json_t *before, int *fds, int nfds)
{
	char why[160];
	struct session *s = NULL;
	struct dg_policy pol;
	bool own_pol = false;
	if (egress) {
		if (!json_is_array(egress) || (urls && !json_is_object(urls)) ||
		    session_rules(egress, urls, &pol, why, sizeof(why)) != 0) {
			if (!json_is_array(egress))
				snprintf(why, sizeof(why), "egress must be a list of host:port");
			goto fail;
		}
		own_pol = true;
	}
	if (before && (!json_is_integer(before) || json_integer_value(before) < 0 ||
		       (uint64_t)json_integer_value(before) > DG_EGRESS_CONN_NUMBER_MAX)) {
		snprintf(why, sizeof(why), "conns_before must be an integer 0..%llu",
			 (unsigned long long)DG_EGRESS_CONN_NUMBER_MAX);
		goto fail;
	}
	if (nfds != 1) {
		snprintf(why, sizeof(why), "add needs exactly one descriptor, got %d", nfds);
		goto fail;
	}
	if (find_session(id)) {
		snprintf(why, sizeof(why), "the session is already served");
		goto fail;
	}
	if (check_listener(fds[0], why, sizeof(why)) != 0)
		goto fail;
	for (int i = 0; i < DG_EGRESS_SESSIONS_MAX && !s; i++)
		if (!G.sessions[i].used)
			s = &G.sessions[i];
	if (!s) {
		snprintf(why, sizeof(why), "all %d session slots are in use", DG_EGRESS_SESSIONS_MAX);
		goto fail;
	}
	/* The description is shared with the spawner's copy, which is closed
	 * after the hand-over: non-blocking, so an accept whose connection
	 * went away meanwhile cannot stall the loop. */
	int fl = fcntl(fds[0], F_GETFL);
	fcntl(fds[0], F_SETFL, fl | O_NONBLOCK);
	memset(s, 0, sizeof(*s));
	s->used = true;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->pol = pol;
	s->own_pol = own_pol;
	own_pol = false;
	s->next_conn = before ? (uint64_t)json_integer_value(before) : 0;
	s->lep.kind = EP_LISTEN;
	s->lfd = fds[0];
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->lep};
	if (epoll_ctl(G.ep, EPOLL_CTL_ADD, s->lfd, &e) != 0) {
		snprintf(why, sizeof(why), "epoll: %s", strerror(errno));
		if (s->own_pol)
			dg_policy_free(&s->pol);
		memset(s, 0, sizeof(*s));
		s->lfd = -1;
		goto fail;
	}
	dg_egress_emit_session(id, "add", NULL, -1);
	return;
fail:
	if (own_pol)
		dg_policy_free(&pol);
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	dg_egress_log("add %s: %s", id, why);
	dg_egress_emit_session(id, "add", why, -1);
}

static void handle_ctl(const char *buf, size_t len, int *fds, int nfds)
{
	json_t *m = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	const char *op = json_string_value(json_object_get(m, "op"));
	const char *id = json_string_value(json_object_get(m, "session"));
	if (!op || !id || !dg_session_id_valid(id)) {
		dg_egress_ctl_error("not {\"op\":..., \"session\":ID} with a valid session id");
	} else if (strcmp(op, "add") == 0) {
		op_add(id, json_object_get(m, "egress"), json_object_get(m, "urls"),
		       json_object_get(m, "conns_before"), fds, nfds);
		nfds = 0;
	} else if (strcmp(op, "remove") == 0) {
		struct session *s = find_session(id);
		if (s)
			dg_egress_session_remove(s);
		else
			dg_egress_emit_session(id, "remove", "no such session", -1);
	} else {
		dg_egress_ctl_error("unknown op");
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	json_decref(m);
}

int dg_egress_on_ctl(uint32_t ev, int *status)
{
	if (ev & EPOLLOUT)
		dg_egress_flush_events();
	if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	for (int i = 0; i < DG_EGRESS_CTL_BURST; i++) {
		int fds[DG_SEQ_FDS_MAX], nfds = 0;
		size_t len;
		struct dg_err err = {{0}};
		int r = dg_seq_recv(G.ctl, G.rbuf, DG_SEQ_MAX + 1, &len, fds, &nfds, &err);
		if (r == 0)
			return 0;
		if (r == -EPIPE || r == -ECONNRESET) {
			*status = 0; /* the gateway closed the channel: done */
			return 1;
		}
		if (r == -EPROTO) {
			dg_egress_ctl_error("%s", err.msg);
			continue;
		}
		if (r < 0) {
			dg_egress_log("control channel: %s", err.msg);
			*status = 1;
			return 1;
		}
		handle_ctl(G.rbuf, len, fds, nfds);
	}
	return 0;
}
