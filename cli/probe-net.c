/* deskgate-probe, network: connect, dns, raw and packet sockets, socket families,
 * abstract unix sockets. */

#include "cli/probe-priv.h"

/* ------------------------------------------------------------ network */

/* Lists the network interfaces this process sees, from /proc/self/net/dev
 * (the process's own network namespace). Returns the number of interfaces
 * other than lo, or -1 when the list cannot be read. */
static int non_lo_interfaces(char *names, size_t len)
{
	names[0] = '\0';
	FILE *f = fopen("/proc/self/net/dev", "re");
	int count = 0;
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f)) {
			char *colon = strchr(line, ':');
			if (!colon)
				continue;
			*colon = '\0';
			char *name = line;
			while (*name == ' ')
				name++;
			if (strcmp(name, "lo") == 0)
				continue;
			count++;
			size_t l = strlen(names);
			fmt(names + l, len - l, "%s%s", l ? "," : "", name);
		}
		fclose(f);
		return count;
	}
	/* No /proc/self/net: ask the kernel directly (netlink route). */
	struct if_nameindex *ifs = if_nameindex();
	if (!ifs)
		return -1;
	for (struct if_nameindex *i = ifs; i->if_index; i++) {
		if (strcmp(i->if_name, "lo") == 0)
			continue;
		count++;
		size_t l = strlen(names);
		fmt(names + l, len - l, "%s%s", l ? "," : "", i->if_name);
	}
	if_freenameindex(ifs);
	return count;
}

int parse_addr(const char *host, int port, union addr *a, socklen_t *len)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, host, &a->in.sin_addr) == 1) {
		a->in.sin_family = AF_INET;
		a->in.sin_port = htons((uint16_t)port);
		*len = sizeof(a->in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) == 1) {
		a->in6.sin6_family = AF_INET6;
		a->in6.sin6_port = htons((uint16_t)port);
		*len = sizeof(a->in6);
		return 0;
	}
	return -1;
}

static bool is_loopback(const union addr *a)
{
	if (a->sa.sa_family == AF_INET)
		return (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
}

/* The egress guard: packets to a non-loopback address may be sent only when
 * this network namespace has no interface but lo, so they can only reach
 * addresses assigned to lo. Returns true when sending is safe; otherwise
 * records why as evidence (an interface other than lo IS the leak). */
bool may_send_to(const union addr *a)
{
	if (is_loopback(a))
		return true;
	char names[512];
	int n = non_lo_interfaces(names, sizeof(names));
	if (n == 0)
		return true;
	if (n < 0)
		note("cannot list network interfaces; not sending");
	else
		note("network namespace has interfaces besides lo (%s); refused to send", names);
	return false;
}

/* connect ADDR PORT: TCP connect with a 1.5 s bound. Contained when the
 * connect fails at once (no route, refused); a connection, or no answer
 * (a SYN went out on some route), is a leak. */
int p_connect(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: connect ADDR PORT");
	int port = (int)parse_long(argv[1], 1, 65535, "port");
	union addr a;
	socklen_t alen;
	if (parse_addr(argv[0], port, &a, &alen) < 0)
		return error_out("bad address %s", argv[0]);
	if (!may_send_to(&a))
		return finish(true);
	int s = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		note("socket: %s", en(errno));
		return finish(false);
	}
	int r = connect(s, &a.sa, alen);
	int err = r == 0 ? 0 : errno;
	if (r < 0 && err == EINPROGRESS) {
		struct pollfd p = {s, POLLOUT, 0};
		int n = poll(&p, 1, 1500);
		if (n == 0) {
			note("connect %s:%d: no answer in 1.5 s (the SYN had a route out)", argv[0],
			     port);
			close(s);
			return finish(true);
		}
		socklen_t l = sizeof(err);
		getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l);
	}
	if (err) {
		note("connect %s:%d: %s", argv[0], port, en(err));
		close(s);
		return finish(false);
	}
	char banner[64] = "";
	struct pollfd p = {s, POLLIN, 0};
	if (poll(&p, 1, 500) > 0) {
		ssize_t k = recv(s, banner, sizeof(banner) - 1, 0);
		banner[k > 0 ? k : 0] = '\0';
		for (char *c = banner; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '.';
	}
	note("connected to %s:%d (banner '%s')", argv[0], port, banner);
	close(s);
	return finish(true);
}

/* Builds a DNS query for name, type A. Returns its length. */
static size_t dns_query(uint8_t *q, size_t cap, const char *name, uint16_t id)
{
	size_t n = 0;
	q[n++] = (uint8_t)(id >> 8);
	q[n++] = (uint8_t)id;
	q[n++] = 0x01; /* RD */
	q[n++] = 0x00;
	q[n++] = 0; q[n++] = 1; /* QDCOUNT */
	for (int i = 0; i < 6; i++)
		q[n++] = 0;
	const char *p = name;
	while (*p && n + 70 < cap) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (l == 0 || l > 63)
			break;
		q[n++] = (uint8_t)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
		if (!dot)
			break;
	}
	q[n++] = 0;
	q[n++] = 0; q[n++] = 1; /* A */
	q[n++] = 0; q[n++] = 1; /* IN */
	return n;
}

/* dns NAME: does what the libc resolver does for a lookup (the nameservers
 * of /etc/resolv.conf, 127.0.0.1 when there are none; a UDP query to port
 * 53 of each). Leaked when any server answers, or when a query could be sent
 * to a non-loopback server (a lookup exfiltrates the name even unanswered). */
int p_dns(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: dns NAME");
	char servers[8][64];
	int ns = 0;
	FILE *f = fopen("/etc/resolv.conf", "re");
	if (f) {
		char line[256];
		while (fgets(line, sizeof(line), f) && ns < 8) {
			char addr[64];
			if (sscanf(line, " nameserver %63s", addr) == 1)
				snprintf(servers[ns++], sizeof(servers[0]), "%s", addr);
		}
		fclose(f);
		note("resolv.conf lists %d nameserver(s)", ns);
	} else {
		note("no /etc/resolv.conf (%s)", en(errno));
	}
	if (ns == 0)
		snprintf(servers[ns++], sizeof(servers[0]), "127.0.0.1");
	bool leaked = false;
	for (int i = 0; i < ns; i++) {
		union addr a;
		socklen_t alen;
		if (parse_addr(servers[i], 53, &a, &alen) < 0) {
			note("nameserver %s unparsable", servers[i]);
			continue;
		}
		if (!may_send_to(&a)) {
			leaked = true;
			continue;
		}
		int s = socket(a.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s < 0) {
			note("%s: socket %s", servers[i], en(errno));
			continue;
		}
		if (connect(s, &a.sa, alen) < 0) {
			note("%s: connect %s", servers[i], en(errno));
			close(s);
			continue;
		}
		uint8_t q[512], resp[1500];
		uint16_t id = (uint16_t)(getpid() ^ i ^ 0x5a5a);
		size_t ql = dns_query(q, sizeof(q), argv[0], id);
		if (send(s, q, ql, 0) < 0) {
			note("%s: send %s", servers[i], en(errno));
			close(s);
			continue;
		}
		if (!is_loopback(&a)) {
			note("%s: query sent to a non-loopback server", servers[i]);
			leaked = true;
		}
		struct pollfd p = {s, POLLIN, 0};
		int n = poll(&p, 1, 1500);
		if (n <= 0) {
			note("%s: no answer in 1.5 s", servers[i]);
		} else {
			ssize_t k = recv(s, resp, sizeof(resp), 0);
			if (k < 0) {
				note("%s: %s", servers[i], en(errno));
			} else if (k >= 12 && resp[0] == q[0] && resp[1] == q[1]) {
				note("%s answered: rcode %d, %d answer(s)", servers[i], resp[3] & 15,
				     (resp[6] << 8) | resp[7]);
				leaked = true;
			} else {
				note("%s sent %zd unexpected bytes", servers[i], k);
				leaked = true;
			}
		}
		close(s);
	}
	return finish(leaked);
}

/* Tries socket(family, type, proto) (a socket made is closed at once) and
 * judges it: kind CALL_PERM (any failure is the kernel's permission check)
 * or CALL_FAMILY (only the filter's EPERM contains it). key: its RESULT
 * key; lacks: what a kernel without the family lacks. */
static void try_socket(enum call_kind kind, const char *key, const char *what,
		       const char *lacks, int family, int type, int proto)
{
	errno = 0;
	int s = socket(family, type | SOCK_CLOEXEC, proto);
	int e = errno;
	if (s >= 0)
		close(s);
	judge_ret(kind, key, what, lacks, s, e);
}

/* raw-socket: no raw IP socket can be made (nothing is sent on one). */
int p_raw_socket(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_PERM, "raw_icmp", "AF_INET SOCK_RAW ICMP", NULL, AF_INET, SOCK_RAW,
		   IPPROTO_ICMP);
	try_socket(CALL_PERM, "raw_ip", "AF_INET SOCK_RAW IPPROTO_RAW", NULL, AF_INET, SOCK_RAW,
		   IPPROTO_RAW);
	try_socket(CALL_PERM, "raw_icmpv6", "AF_INET6 SOCK_RAW ICMPV6", "IPv6", AF_INET6,
		   SOCK_RAW, IPPROTO_ICMPV6);
	return finish_calls();
}

/* packet-socket: no AF_PACKET socket can be made (closed at once if one is). */
int p_packet_socket(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_PERM, "packet_raw", "AF_PACKET SOCK_RAW", "AF_PACKET", AF_PACKET,
		   SOCK_RAW, htons(ETH_P_ALL));
	try_socket(CALL_PERM, "packet_dgram", "AF_PACKET SOCK_DGRAM", "AF_PACKET", AF_PACKET,
		   SOCK_DGRAM, htons(ETH_P_ALL));
	return finish_calls();
}

/* socket-families: families outside unix/inet/inet6/netlink-route are
 * refused by the filter (EPERM), whether or not the kernel has them. */
int p_socket_families(int argc, char **argv)
{
	(void)argc, (void)argv;
	try_socket(CALL_FAMILY, "af_vsock", "AF_VSOCK", "AF_VSOCK", AF_VSOCK, SOCK_STREAM, 0);
	try_socket(CALL_FAMILY, "af_alg", "AF_ALG", "AF_ALG", AF_ALG, SOCK_SEQPACKET, 0);
	try_socket(CALL_FAMILY, "af_key", "AF_KEY", "AF_KEY", AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */);
	try_socket(CALL_FAMILY, "netlink_uevent", "NETLINK_KOBJECT_UEVENT", "NETLINK_KOBJECT_UEVENT",
		   AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT);
	try_socket(CALL_FAMILY, "netlink_audit", "NETLINK_AUDIT", "NETLINK_AUDIT", AF_NETLINK,
		   SOCK_RAW, NETLINK_AUDIT);
	try_socket(CALL_FAMILY, "netlink_sock_diag", "NETLINK_SOCK_DIAG", "NETLINK_SOCK_DIAG",
		   AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG);
	return finish_calls();
}

/* unix-abstract NAME...: connects to each abstract unix socket "@NAME".
 * Abstract sockets belong to a network namespace: from a jail none of the
 * host's may be reachable. */
int p_unix_abstract(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: unix-abstract NAME...");
	bool leaked = false;
	for (int i = 0; i < argc; i++) {
		struct sockaddr_un un = {.sun_family = AF_UNIX};
		size_t l = strlen(argv[i]);
		if (l + 1 > sizeof(un.sun_path))
			return error_out("name too long: %s", argv[i]);
		memcpy(un.sun_path + 1, argv[i], l);
		int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (s < 0)
			return error_out("socket: %s", en(errno));
		if (connect(s, (struct sockaddr *)&un,
			    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + l)) == 0) {
			note("@%s: connected", argv[i]);
			leaked = true;
		} else {
			note("@%s: %s", argv[i], en(errno));
		}
		close(s);
	}
	return finish(leaked);
}
