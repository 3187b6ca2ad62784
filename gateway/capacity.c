/* What a balancer in front of several gateways learns about this one
 * (docs/scale-out.md): GET /v1/health (counts only, no token) and HAProxy's
 * agent-check, a TCP port that answers one line and closes.
 *
 * Free capacity is the free session slots (limits.max_sessions less the
 * live sessions); a draining host (capacity.drain) or one without a free
 * slot is full: the agent line then says "drain", so HAProxy places no new
 * session there, while the requests of its live sessions, routed by their
 * id, still reach it. Both answers are 200/"up" whenever the gateway runs:
 * "down" is for the balancer's own health check to find out.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/server-priv.h"

/* Bytes of /proc/meminfo read for MemAvailable (it is the third line). */
#define DG_GW_MEMINFO_MAX 4096

/* MemAvailable in MiB, or -1 when /proc/meminfo cannot say. */
static long long mem_available_mb(void)
{
	char buf[DG_GW_MEMINFO_MAX];
	int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	const char *p = strstr(buf, "MemAvailable:");
	long long kb;
	if (!p || sscanf(p, "MemAvailable: %lld kB", &kb) != 1)
		return -1;
	return kb / 1024;
}

void dg_gw_capacity(const struct gw *gw, struct gw_capacity *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < gw->n_sessions; i++)
		out->sessions += gw->sessions[i].used;
	out->max_sessions = gw->n_sessions;
	out->free_slots = gw->n_sessions - out->sessions;
	out->draining = gw->cfg.drain || gw->egress_dead || gw->stopping;
	out->full = out->draining || out->free_slots <= 0;
	out->mem_available_mb = mem_available_mb();
}

json_t *dg_gw_health_json(const struct gw *gw)
{
	struct gw_capacity c;
	dg_gw_capacity(gw, &c);
	json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:i, s:b, s:b}", "status",
			      c.full ? "full" : "ok", "host", dg_instance(), "sessions", c.sessions,
			      "max_sessions", c.max_sessions, "free_slots", c.free_slots, "full",
			      c.full, "draining", c.draining);
	json_object_set_new(j, "mem_available_mb",
			    c.mem_available_mb < 0 ? json_null() : json_integer(c.mem_available_mb));
	return j;
}

int dg_gw_agent_line(const struct gw *gw, char *out, size_t outlen)
{
	struct gw_capacity c;
	dg_gw_capacity(gw, &c);
	/* The weight is a percentage of the server's weight in haproxy.cfg:
	 * with that set in proportion to max_sessions, HAProxy's effective
	 * weights are in proportion to the free slots. At least 1% while a
	 * slot is free: 0% would read as a drain. */
	int pct = c.full ? 0 : (int)((100LL * c.free_slots + c.max_sessions - 1) / c.max_sessions);
	int n = c.full ? snprintf(out, outlen, "up drain 0%%\n")
		       : snprintf(out, outlen, "up ready %d%%\n", pct);
	return n < 0 || (size_t)n >= outlen ? -ENOSPC : n;
}

int dg_gw_agent_open(const struct gw *gw, struct dg_err *err)
{
	const struct dg_config *cfg = &gw->cfg;
	int fd = socket(cfg->agent_check_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dg_err_set(err, -errno, "capacity.agent_check %s: socket: %s", cfg->agent_check,
				  strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof(ss));
	if (cfg->agent_check_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(cfg->agent_check_port);
		inet_pton(AF_INET6, cfg->agent_check_addr, &a->sin6_addr);
		len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(cfg->agent_check_port);
		inet_pton(AF_INET, cfg->agent_check_addr, &a->sin_addr);
		len = sizeof(*a);
	}
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, DG_GW_AGENT_BACKLOG) != 0) {
		int e = errno;
		close(fd);
		return dg_err_set(err, -e, "cannot listen on %s (capacity.agent_check): %s",
				  cfg->agent_check, strerror(e));
	}
	return fd;
}

int dg_gw_agent_readable(const struct gw *gw, int lfd)
{
	/* Each accepted connection gets its line at once and is closed: the
	 * line is far below a fresh socket's send buffer, so the non-blocking
	 * send never waits, and nothing is read from the peer. */
	for (int i = 0; i < DG_GW_AGENT_BACKLOG; i++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED ||
					       errno == EINTR || errno == EMFILE || errno == ENFILE
				       ? 0
				       : -errno;
		char line[64];
		int n = dg_gw_agent_line(gw, line, sizeof(line));
		if (n > 0 && send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
			lwsl_warn("deskgate: agent-check: a short answer\n");
		close(fd);
	}
	return 0;
}
