/* `deskgate vnc`: a standard VNC viewer on this machine watches a session's
 * live view (docs/vnc.md). A TCP listener on a local address; each viewer
 * that connects gets its own WebSocket to the gateway's
 * /v1/sessions/{id}/vnc (subprotocol "binary", the token in an
 * Authorization header: never in the URL or on the command line), and the
 * bytes are relayed both ways unparsed (the RFB server is the session's
 * worker: view-only, whatever the viewer sends).
 *
 * Bounds: at most DG_VNC_BRIDGE_VIEWERS viewers at once (more are closed at
 * once); at most DG_VNC_BRIDGE_BUF bytes wait in either direction before
 * the side that sends stops being read (back-pressure both ways).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli-priv.h"
#include "gateway/gateway.h"

#define DG_VNC_BRIDGE_VIEWERS 8
#define DG_VNC_BRIDGE_BUF (1024 * 1024)
#define DG_VNC_BRIDGE_CHUNK (64 * 1024)
#define DG_VNC_BRIDGE_URL_MAX 512

struct viewer {
	struct viewer *next;
	struct vnc *v;
	int fd;                     /* the viewer's TCP connection */
	struct lws *tcp, *ws;       /* its raw wsi (once the WebSocket is up); its WebSocket */
	unsigned char *to_ws;       /* LWS_PRE + bytes from the viewer for the gateway */
	size_t to_ws_len;
	unsigned char *to_tcp;      /* bytes from the gateway for the viewer */
	size_t to_tcp_len;
	bool tcp_paused, ws_paused, gone;
};

struct vnc {
	struct lws_context *ctx;
	struct lws_vhost *vh;
	int listen_fd;
	struct lws *listener;
	const char *session;
	char addr[256], path[DG_VNC_BRIDGE_URL_MAX];
	int port;
	bool tls;
	char auth[DG_TOKEN_MAX + 16];
	struct viewer *viewers;
	int n;
	bool stop;
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "deskgate vnc: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

static void viewer_end(struct viewer *w, const char *why)
{
	if (w->gone)
		return;
	w->gone = true;
	say("viewer %d: %s", w->fd, why);
	if (w->tcp) {
		lws_set_opaque_user_data(w->tcp, NULL);
		lws_set_timeout(w->tcp, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		w->tcp = NULL;
		w->fd = -1; /* lws closes it */
	} else if (w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	if (w->ws) {
		lws_set_opaque_user_data(w->ws, NULL);
		lws_set_timeout(w->ws, PENDING_TIMEOUT_KILLED_BY_PARENT, LWS_TO_KILL_ASYNC);
		w->ws = NULL;
	}
	struct vnc *v = w->v;
	for (struct viewer **p = &v->viewers; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			break;
		}
	}
	v->n--;
	free(w->to_ws);
	free(w->to_tcp);
	free(w);
}

/* Writes what the gateway sent to the viewer, as much as its socket takes. */
static int flush_tcp(struct viewer *w)
{
	size_t off = 0;
	while (off < w->to_tcp_len) {
		ssize_t n = send(w->fd, w->to_tcp + off, w->to_tcp_len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EINTR)
			continue;
		else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		else
			return -1;
	}
	memmove(w->to_tcp, w->to_tcp + off, w->to_tcp_len - off);
	w->to_tcp_len -= off;
	if (w->to_tcp_len && w->tcp)
		lws_callback_on_writable(w->tcp);
	if (w->ws_paused && w->to_tcp_len < DG_VNC_BRIDGE_BUF / 2 && w->ws) {
		w->ws_paused = false;
		lws_rx_flow_control(w->ws, 1);
	}
	return 0;
}

static void connect_ws(struct vnc *v, struct viewer *w)
{
	struct lws_client_connect_info ci;
	memset(&ci, 0, sizeof(ci));
	ci.context = v->ctx;
	ci.vhost = v->vh;
	ci.address = v->addr;
	ci.port = v->port;
	ci.path = v->path;
	ci.host = v->addr;
	ci.origin = v->addr;
	ci.protocol = DG_WS_RFB_PROTOCOL;
	ci.local_protocol_name = "dg-vnc-ws";
	ci.ssl_connection = v->tls ? LCCSCF_USE_SSL : 0;
	ci.opaque_user_data = w;
	ci.pwsi = &w->ws;
	if (!lws_client_connect_via_info(&ci))
		viewer_end(w, "cannot connect to the gateway");
}

static void accept_viewer(struct vnc *v)
{
	int fd = accept4(v->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (v->n >= DG_VNC_BRIDGE_VIEWERS) {
		say("refusing a viewer: %d are connected already", v->n);
		close(fd);
		return;
	}
	struct viewer *w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		return;
	}
	w->v = v;
	w->fd = fd;
	w->next = v->viewers;
	v->viewers = w;
	v->n++;
	say("viewer %d connected; opening the session's live view", fd);
	connect_ws(v, w);
}

/* The viewer's TCP connection and the listener (raw descriptors). */
static int raw_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
			size_t len)
{
	struct viewer *w = lws_get_opaque_user_data(wsi);
	struct vnc *v = lws_context_user(lws_get_context(wsi));
	switch (reason) {
	case LWS_CALLBACK_RAW_RX_FILE:
		if (wsi == v->listener) {
			accept_viewer(v);
			return 0;
		}
		if (!w)
			return -1;
		if (!w->to_ws && !(w->to_ws = malloc(LWS_PRE + DG_VNC_BRIDGE_BUF)))
			return -1;
		{
			size_t room = DG_VNC_BRIDGE_BUF - w->to_ws_len;
			ssize_t n = room ? recv(w->fd, w->to_ws + LWS_PRE + w->to_ws_len,
						room < DG_VNC_BRIDGE_CHUNK ? room : DG_VNC_BRIDGE_CHUNK,
						MSG_DONTWAIT)
					 : 0;
			if (n == 0 && room) {
				viewer_end(w, "the viewer closed its connection");
				return 0;
			}
			if (n < 0)
				return errno == EAGAIN || errno == EINTR ? 0 : (viewer_end(w, "read error"), 0);
			w->to_ws_len += (size_t)n;
		}
		if (w->to_ws_len >= DG_VNC_BRIDGE_BUF && !w->tcp_paused) {
			w->tcp_paused = true;
			lws_rx_flow_control(wsi, 0);
		}
		if (w->ws && w->to_ws_len)
			lws_callback_on_writable(w->ws);
		return 0;
	case LWS_CALLBACK_RAW_WRITEABLE_FILE:
		if (w && flush_tcp(w) != 0)
			viewer_end(w, "the viewer's connection broke");
		return 0;
	case LWS_CALLBACK_RAW_CLOSE_FILE:
		if (w) {
			w->tcp = NULL;
			w->fd = -1;
			viewer_end(w, "the viewer's connection closed");
		}
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

/* The WebSocket to the gateway. */
static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
		       size_t len)
{
	struct viewer *w = lws_get_opaque_user_data(wsi);
	struct vnc *v = lws_context_user(lws_get_context(wsi));
	switch (reason) {
	case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
		unsigned char **p = in, *end = *p + len;
		if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION,
						 (unsigned char *)v->auth, (int)strlen(v->auth), p, end))
			return -1;
		return 0;
	}
	case LWS_CALLBACK_CLIENT_ESTABLISHED: {
		if (!w)
			return -1;
		lws_sock_file_fd_type u;
		u.filefd = w->fd;
		w->tcp = lws_adopt_descriptor_vhost(v->vh, LWS_ADOPT_RAW_FILE_DESC, u, "dg-vnc-tcp", NULL);
		if (!w->tcp) {
			viewer_end(w, "cannot relay its connection");
			return 0;
		}
		lws_set_opaque_user_data(w->tcp, w);
		say("viewer %d: watching session %s", w->fd, v->session);
		return 0;
	}
	case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
		if (w) {
			w->ws = NULL;
			char why[300];
			snprintf(why, sizeof(why), "the gateway refused the live view: %s",
				 in ? (const char *)in : "no reason given");
			viewer_end(w, why);
		}
		return 0;
	case LWS_CALLBACK_CLIENT_RECEIVE:
		if (!w)
			return -1;
		if (w->to_tcp_len + len > 2 * DG_VNC_BRIDGE_BUF) {
			viewer_end(w, "the viewer does not read what the gateway sends");
			return 0;
		}
		if (!w->to_tcp && !(w->to_tcp = malloc(2 * DG_VNC_BRIDGE_BUF)))
			return -1;
		memcpy(w->to_tcp + w->to_tcp_len, in, len);
		w->to_tcp_len += len;
		if (w->to_tcp_len >= DG_VNC_BRIDGE_BUF && !w->ws_paused) {
			w->ws_paused = true;
			lws_rx_flow_control(wsi, 0);
		}
		if (flush_tcp(w) != 0)
			viewer_end(w, "the viewer's connection broke");
		return 0;
	case LWS_CALLBACK_CLIENT_WRITEABLE:
		if (!w)
			return -1;
		if (w->to_ws_len) {
			size_t n = w->to_ws_len;
			if (lws_write(wsi, w->to_ws + LWS_PRE, n, LWS_WRITE_BINARY) < (int)n)
				return -1;
			w->to_ws_len = 0;
			if (w->tcp_paused && w->tcp) {
				w->tcp_paused = false;
				lws_rx_flow_control(w->tcp, 1);
			}
		}
		return 0;
	case LWS_CALLBACK_CLIENT_CLOSED:
		if (w) {
			w->ws = NULL;
			viewer_end(w, "the gateway closed the live view");
		}
		return 0;
	default:
		return lws_callback_http_dummy(wsi, reason, user, in, len);
	}
}

static const struct lws_protocols protocols[] = {
	{"dg-vnc-ws", ws_callback, 0, DG_VNC_BRIDGE_CHUNK, 0, NULL, 0},
	{"dg-vnc-tcp", raw_callback, 0, 0, 0, NULL, 0},
	{NULL, NULL, 0, 0, 0, NULL, 0},
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

struct vnc_args {
	const char *session, *listen, *url;
};

static const struct dg_opt vnc_opts[] = {
	DG_OPT_VALUE_(struct vnc_args, session, "--session", "ID", DG_OPT_REQUIRED,
		      "the session to watch"),
	DG_OPT_VALUE_(struct vnc_args, listen, "--listen", "IP:PORT", DG_OPT_REQUIRED,
		      "where VNC viewers connect, e.g. 127.0.0.1:5901"),
	DG_OPT_VALUE_(struct vnc_args, url, "--url", "URL", 0,
		      "the gateway, http(s)://HOST:PORT (default: $DESKGATE_URL)"),
	DG_OPT_END,
};

const struct dg_opt_cmd dg_vnc_cmd = {
	.name = "vnc",
	.summary = "Let a VNC viewer on this machine watch a session's live desktop: a local "
		   "TCP listener relayed to the gateway's /v1/sessions/ID/vnc; the token comes "
		   "from DESKGATE_TOKEN or DESKGATE_VIEWER_TOKEN.",
	.details = "The view is view-only: what the viewer types or clicks is dropped.\n"
		   "Runs until SIGINT or SIGTERM.\n"
		   "exit status: 0 after a signal; 1 when it cannot listen;\n"
		   "2 on a usage error or without a token.\n",
	.doc = "docs/vnc.md",
	.opts = vnc_opts,
};

/* "IPv4:PORT" into sa; -EINVAL otherwise. */
static int parse_listen(const char *text, struct sockaddr_in *sa)
{
	const char *colon = strrchr(text, ':');
	char ip[INET_ADDRSTRLEN];
	if (!colon || (size_t)(colon - text) >= sizeof(ip))
		return -EINVAL;
	memcpy(ip, text, (size_t)(colon - text));
	ip[colon - text] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (*end || colon[1] == '\0' || port < 1 || port > 65535 || inet_pton(AF_INET, ip, &sa->sin_addr) != 1)
		return -EINVAL;
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

/* The gateway's URL into v (address, port, TLS, the live view's path). */
static int parse_url(const char *url, struct vnc *v)
{
	char buf[DG_VNC_BRIDGE_URL_MAX];
	if (snprintf(buf, sizeof(buf), "%s", url) >= (int)sizeof(buf))
		return -EINVAL;
	const char *prot, *ads, *path;
	int port;
	if (lws_parse_uri(buf, &prot, &ads, &port, &path) || !ads[0] ||
	    (strcmp(prot, "http") && strcmp(prot, "https")))
		return -EINVAL;
	v->tls = strcmp(prot, "https") == 0;
	snprintf(v->addr, sizeof(v->addr), "%s", ads);
	v->port = port;
	snprintf(v->path, sizeof(v->path), "/v1/sessions/%s/vnc", v->session);
	return 0;
}

static const char *viewer_token(void)
{
	const char *name = "DESKGATE_TOKEN", *t = getenv(name);
	if (!t || !*t)
		t = getenv(name = DG_ENV_VIEWER_TOKEN);
	if (!t || !*t) {
		say("no token: set DESKGATE_TOKEN (or %s) to a viewer's token; it is never taken "
		    "from the command line", DG_ENV_VIEWER_TOKEN);
		return NULL;
	}
	for (const char *p = t; *p; p++) {
		if (*p < 0x21 || *p > 0x7e || p - t >= DG_TOKEN_MAX) {
			say("%s is not a token (1..%d visible ASCII bytes)", name, DG_TOKEN_MAX);
			return NULL;
		}
	}
	return t;
}

int dg_cmd_vnc(int argc, char **argv)
{
	struct vnc_args a = {0};
	int rc = dg_opt_handle(&dg_vnc_cmd, argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct vnc v = {.listen_fd = -1, .session = a.session};
	struct sockaddr_in sa;
	const char *url = a.url ? a.url : getenv("DESKGATE_URL");
	if (!dg_session_id_valid(a.session))
		return dg_opt_usage_error(&dg_vnc_cmd, "--session: not a session id ([a-z0-9-], "
					  "at most %d)", DG_SESSION_ID_MAX);
	if (parse_listen(a.listen, &sa) != 0)
		return dg_opt_usage_error(&dg_vnc_cmd, "--listen: expected IPv4:PORT, e.g. "
					  "127.0.0.1:5901");
	if (!url)
		return dg_opt_usage_error(&dg_vnc_cmd, "no gateway: give --url or set DESKGATE_URL");
	if (parse_url(url, &v) != 0)
		return dg_opt_usage_error(&dg_vnc_cmd, "--url: expected http(s)://HOST:PORT");
	const char *token = viewer_token();
	if (!token)
		return DG_OPT_EXIT_USAGE;
	snprintf(v.auth, sizeof(v.auth), "Bearer %s", token);
	v.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int one = 1;
	if (v.listen_fd < 0 || setsockopt(v.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(v.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(v.listen_fd, 8)) {
		say("cannot listen on %s: %s", a.listen, strerror(errno));
		if (v.listen_fd >= 0)
			close(v.listen_fd);
		return 1;
	}
	lws_set_log_level(LLL_ERR, NULL);
	struct lws_context_creation_info ci;
	memset(&ci, 0, sizeof(ci));
	ci.port = CONTEXT_PORT_NO_LISTEN;
	ci.protocols = protocols;
	ci.user = &v;
	ci.options = LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
	ci.gid = (gid_t)-1;
	ci.uid = (uid_t)-1;
	v.ctx = lws_create_context(&ci);
	v.vh = v.ctx ? lws_create_vhost(v.ctx, &ci) : NULL;
	lws_sock_file_fd_type u;
	u.filefd = v.listen_fd;
	v.listener = v.vh ? lws_adopt_descriptor_vhost(v.vh, LWS_ADOPT_RAW_FILE_DESC, u, "dg-vnc-tcp",
						       NULL)
			  : NULL;
	if (!v.listener) {
		say("cannot start the event loop");
		if (v.ctx)
			lws_context_destroy(v.ctx);
		close(v.listen_fd);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	/* On stdout, for whoever started it: viewers may connect now. */
	printf("listening on %s for VNC viewers of session %s\n", a.listen, a.session);
	fflush(stdout);
	while (!interrupted)
		lws_service(v.ctx, 200);
	while (v.viewers)
		viewer_end(v.viewers, "stopping");
	lws_context_destroy(v.ctx);
	say("stopped");
	return 0;
}
