/* Containment, edge 1: network egress. The jail's network namespace has only
 * lo, so nothing outside it is reachable: not "the internet", not the cloud
 * metadata service, not the host's own loopback servers or abstract unix
 * sockets, not a resolver; and no raw or packet socket can be made.
 *
 * Controls that need an outside address run in `dg_probe ns --net`, a
 * throwaway network namespace whose lo carries those addresses with servers
 * on them: no packet ever goes anywhere but that namespace or the host's lo. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

/* The name every DNS probe asks for: never in any hosts file. */
#define DNS_NAME "deskgate-probe.example.com"

/* getaddrinfo as a real dynamically linked program does it (glibc's NSS,
 * the jail's own /etc). Refuses to resolve when the network namespace has an
 * interface besides lo, so a broken jail never sends a query off the host. */
static const char *const gai_py =
	"import socket, sys\n"
	"names = [l.split(':')[0].strip() for l in open('/proc/self/net/dev').readlines()[2:]]\n"
	"others = [n for n in names if n != 'lo']\n"
	"if others:\n"
	"    print('LEAKED interfaces besides lo (%s): refused to resolve' % ','.join(others))\n"
	"    sys.exit(1)\n"
	"try:\n"
	"    r = socket.getaddrinfo(sys.argv[1], 80, proto=socket.IPPROTO_TCP)\n"
	"    print('LEAKED getaddrinfo(%s) = %s' % (sys.argv[1], r[0][4][0]))\n"
	"    sys.exit(1)\n"
	"except socket.gaierror as e:\n"
	"    print('CONTAINED getaddrinfo(%s): %s' % (sys.argv[1], e))\n";

Test(network, outside_v4_jail) { jail_contained(NULL, ARGV("connect", OUTSIDE_V4, "80")); }
Test(network, outside_v4_control) { control_leaked("ns-net", ARGV("connect", OUTSIDE_V4, "80")); }

Test(network, metadata_jail) { jail_contained(NULL, ARGV("connect", METADATA_V4, "80")); }
Test(network, metadata_control) { control_leaked("ns-net", ARGV("connect", METADATA_V4, "80")); }

Test(network, ipv6_jail) { jail_contained(NULL, ARGV("connect", OUTSIDE_V6, "80")); }
Test(network, ipv6_control) { control_leaked("ns-net", ARGV("connect", OUTSIDE_V6, "80")); }

/* A TCP listener on the host's 127.0.0.1 (the kernel completes connections
 * from its backlog, so nothing needs to accept). */
static int host_listener(int *port)
{
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	cr_assert(s >= 0 && bind(s, (struct sockaddr *)&a, l) == 0 && listen(s, 8) == 0);
	cr_assert(getsockname(s, (struct sockaddr *)&a, &l) == 0);
	*port = ntohs(a.sin_port);
	return s;
}

Test(network, host_loopback_jail)
{
	int port;
	int s = host_listener(&port);
	char p[16];
	snprintf(p, sizeof(p), "%d", port);
	jail_contained(NULL, ARGV("connect", "127.0.0.1", p));
	close(s);
}

Test(network, host_loopback_control)
{
	int port;
	int s = host_listener(&port);
	char p[16];
	snprintf(p, sizeof(p), "%d", port);
	control_leaked(NULL, ARGV("connect", "127.0.0.1", p));
	close(s);
}

Test(network, dns_jail) { jail_contained(NULL, ARGV("dns", DNS_NAME)); }
Test(network, dns_control) { control_leaked("ns-net", ARGV("dns", DNS_NAME)); }

Test(network, getaddrinfo_jail)
{
	struct dg_run r;
	jail_run(NULL, ARGV("/usr/bin/python3", "-c", gai_py, DNS_NAME), PROBE_TIMEOUT, &r);
	char line[2048];
	int v = dg_test_verdict(r.out, line, sizeof(line));
	cr_expect_eq(v, 0, "want CONTAINED, got: %s (exit %d, stderr %.*s)", line, r.exit_code,
		     SHOW, r.err);
	cr_expect_eq(r.exit_code, 0);
	dg_run_free(&r);
	assert_no_leftovers("getaddrinfo");
}

Test(network, getaddrinfo_control)
{
	control_leaked("ns-net", ARGV("/usr/bin/python3", "-c", gai_py, DNS_NAME));
}

Test(network, raw_socket_jail) { jail_contained(NULL, ARGV("raw-socket")); }
Test(network, raw_socket_control) { control_leaked("ns-net", ARGV("raw-socket")); }

Test(network, packet_socket_jail) { jail_contained(NULL, ARGV("packet-socket")); }
Test(network, packet_socket_control) { control_leaked("ns-net", ARGV("packet-socket")); }

Test(network, socket_families_jail) { jail_contained(NULL, ARGV("socket-families")); }
Test(network, socket_families_control) { control_leaked("ns-net", ARGV("socket-families")); }

/* A listener on the host's abstract unix socket "@dg-test-<tag>". */
static int abstract_listener(char *name, size_t len)
{
	snprintf(name, len, "dg-test-%s", test_tag());
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	memcpy(un.sun_path + 1, name, strlen(name));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(s >= 0);
	cr_assert(bind(s, (struct sockaddr *)&un,
		       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name))) == 0);
	cr_assert(listen(s, 8) == 0);
	return s;
}

/* The test's own abstract socket is the one that proves the point (the
 * control reaches it); @/tmp/.X11-unix/X0 is what an X server would offer. */
Test(network, abstract_unix_jail)
{
	char name[64];
	int s = abstract_listener(name, sizeof(name));
	jail_contained(NULL, ARGV("unix-abstract", name, "/tmp/.X11-unix/X0"));
	close(s);
}

Test(network, abstract_unix_control)
{
	char name[64];
	int s = abstract_listener(name, sizeof(name));
	control_leaked(NULL, ARGV("unix-abstract", name, "/tmp/.X11-unix/X0"));
	close(s);
}
