/* `deskgate audit`, the battery: each edge's probes (egress, filesystem,
 * credentials, browser, isolation, resources) and what they are compared with (see cli-audit.c). */

#include "cli/cli-audit-priv.h"

/* FNV-1a, 64 bits, as probe.c computes it: values are compared here, on
 * the host; the host's values never enter the jail, not even hashed. */
static uint64_t fnv1a64(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The env probe prints "HOSTVAR <hash> <where> <name>" for each variable in
 * the session named like one of ours: a leak when it also holds our value.
 * A name alone is no leak (Chromium sets DBUS_SESSION_BUS_ADDRESS for its
 * crash handler, which the host may have too). */
static void judge_env(struct finding *f, const struct run *r)
{
	int same = 0, other = 0;
	char leaks[1024] = "";
	for (const char *p = r->out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		unsigned long long h;
		char where[256], name[256];
		if (sscanf(p, "HOSTVAR %llx %255s %255[^\n]", &h, where, name) != 3)
			continue;
		const char *v = getenv(name);
		if (v && fnv1a64(v, strlen(v)) == h) {
			size_t l = strlen(leaks);
			if (same++ < 6)
				fmt(leaks + l, sizeof(leaks) - l, "%s%s in %s", l ? ", " : "", name,
				    where);
		} else {
			other++;
		}
	}
	size_t l = strlen(f->evidence);
	if (same) {
		f->outcome = OUT_LEAKED;
		fmt(f->evidence + l, sizeof(f->evidence) - l, "; %d variable(s) with the host's name "
		    "and value: %s%s", same, leaks, same > 6 ? ", ..." : "");
	} else if (other) {
		fmt(f->evidence + l, sizeof(f->evidence) - l, "; %d variable(s) named like the "
		    "host's hold values of their own (set inside the session)", other);
	}
}

/* ---- the battery ------------------------------------------------------------ */

void dg_audit_egress_edge(struct audit *au)
{
	char port[16], sink[256], tried[256], target[300];
	fmt(port, sizeof(port), "%d", au->tcp_port);
	dg_audit_probe(au, "egress", "direct-outside-v4",
		       "TCP straight to " DG_AUDIT_OUTSIDE_V4 ":80, an outside address (TEST-NET-1)",
		       DG_AUDIT_OUTSIDE_V4 ":80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("connect", DG_AUDIT_OUTSIDE_V4, "80"));
	dg_audit_probe(au, "egress", "direct-outside-v6",
		       "TCP straight to [" DG_AUDIT_OUTSIDE_V6 "]:80, an outside IPv6 address",
		       "[" DG_AUDIT_OUTSIDE_V6 "]:80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("connect", DG_AUDIT_OUTSIDE_V6, "80"));
	dg_audit_probe(au, "egress", "direct-metadata",
		       "TCP straight to the cloud metadata service, " DG_AUDIT_METADATA ":80",
		       DG_AUDIT_METADATA ":80", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("connect", DG_AUDIT_METADATA, "80"));
	fmt(tried, sizeof(tried), "TCP to a service on the host's loopback, 127.0.0.1:%d (a "
	    "listener the audit opened)", au->tcp_port);
	fmt(sink, sizeof(sink), "127.0.0.1:%d on the host", au->tcp_port);
	dg_audit_probe(au, "egress", "direct-host-loopback", tried, sink, EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS, ARGS("connect", "127.0.0.1", port));
	dg_audit_probe(au, "egress", "dns",
		       "a DNS query for " DG_AUDIT_DNS_NAME ", as the libc resolver sends it",
		       "the nameservers of the jail's resolv.conf (127.0.0.1:53 without one)",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("dns", DG_AUDIT_DNS_NAME));
	/* The kernel may lack a family: each has a host control. */
	dg_audit_probe_kernel(au, "egress", "raw-socket",
			      "raw IP sockets (ICMP, IPPROTO_RAW, ICMPv6)", "the network layer",
			      ARGS("raw-socket"));
	dg_audit_probe_kernel(au, "egress", "packet-socket", "AF_PACKET sockets", "the link layer",
			      ARGS("packet-socket"));
	dg_audit_probe_kernel(au, "egress", "socket-families",
			      "sockets of other families (vsock, alg, "
			      "key, netlink uevent/audit/diag)",
			      "the kernel's other socket families", ARGS("socket-families"));

	/* Through the proxy: what the policy does not allow must get a 403.
	 * The proxy's own answer is the evidence, with its rule. */
	struct dg_decision d;
	dg_policy_decide_egress(&au->policy, DG_AUDIT_DENIED_HOST, 443, &d);
	fmt(tried, sizeof(tried), "CONNECT %s:443 through the egress proxy (the policy says %s, "
	    "%s)", DG_AUDIT_DENIED_HOST, dg_verdict_name(d.verdict), d.rule);
	dg_audit_probe(au, "egress", "proxy-denied-connect", tried,
		       DG_AUDIT_DENIED_HOST ":443 via the egress proxy at " DG_JAIL_EGRESS_URL,
		       d.verdict == DG_VERDICT_ALLOW ? EXPECT_ALLOWED : EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS,
		       ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", DG_AUDIT_DENIED_HOST ":443"));
	dg_policy_decide_egress(&au->policy, DG_AUDIT_DENIED_HOST, 80, &d);
	fmt(tried, sizeof(tried), "GET http://%s/ through the egress proxy (the policy says %s, "
	    "%s)", DG_AUDIT_DENIED_HOST, dg_verdict_name(d.verdict), d.rule);
	dg_audit_probe(au, "egress", "proxy-denied-http", tried,
		       "http://" DG_AUDIT_DENIED_HOST "/ via the egress proxy",
		       d.verdict == DG_VERDICT_ALLOW ? EXPECT_ALLOWED : EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS,
		       ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "GET", DG_AUDIT_DENIED_HOST));
	/* Addresses that are never public: refused whatever the allowlist says
	 * (the proxy's address check), so always expected contained. */
	dg_audit_probe(au, "egress", "proxy-metadata", "CONNECT " DG_AUDIT_METADATA ":80 (metadata) "
		       "through the egress proxy", DG_AUDIT_METADATA ":80 via the egress proxy",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", DG_AUDIT_METADATA ":80"));
	fmt(target, sizeof(target), "127.0.0.1:%d", au->tcp_port);
	fmt(tried, sizeof(tried), "CONNECT %s (the host's loopback service) through the egress "
	    "proxy", target);
	fmt(sink, sizeof(sink), "%s on the host, via the egress proxy", target);
	dg_audit_probe(au, "egress", "proxy-host-loopback", tried, sink, EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS,
		       ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", target));

	/* What the policy allows: tried once per pattern (a "*." pattern with
	 * "www."), reported as allowed with the proxy's answer. No internet is
	 * needed: an answer that the name did not resolve, or none yet, is
	 * still the proxy letting the request through. */
	json_t *allow = dg_policy_egress_json(&au->policy);
	size_t i;
	json_t *v;
	int tried_n = 0;
	json_array_foreach(allow, i, v)
	{
		if (tried_n >= DG_AUDIT_ALLOWED_MAX)
			break;
		const char *pat = json_string_value(v);
		const char *colon = pat ? strrchr(pat, ':') : NULL;
		if (!colon)
			continue;
		bool wild = strncmp(pat, "*.", 2) == 0;
		fmt(target, sizeof(target), "%s%.*s", wild ? "www." : "",
		    (int)(colon - pat - (wild ? 2 : 0)), pat + (wild ? 2 : 0));
		long p = strtol(colon + 1, NULL, 10);
		dg_policy_decide_egress(&au->policy, target, (uint16_t)p, &d);
		if (d.verdict != DG_VERDICT_ALLOW)
			continue;
		size_t tl = strlen(target);
		fmt(target + tl, sizeof(target) - tl, ":%ld", p);
		char id[64], wait[16];
		fmt(id, sizeof(id), "proxy-allowed-%d", tried_n);
		fmt(tried, sizeof(tried), "CONNECT %s through the egress proxy (the policy allows "
		    "it: %s, %s)", target, d.rule, pat);
		fmt(sink, sizeof(sink), "%s via the egress proxy", target);
		fmt(wait, sizeof(wait), "%d", DG_AUDIT_ALLOWED_WAIT_MS);
		dg_audit_probe(au, "egress", id, tried, sink, EXPECT_ALLOWED, NULL,
			       DG_AUDIT_ALLOWED_WAIT_MS + DG_AUDIT_PROBE_MS,
			       ARGS("proxy", DG_JAIL_EGRESS_ADDR, "3128", "CONNECT", target, wait));
		tried_n++;
	}
	json_decref(allow);
}

void dg_audit_filesystem_edge(struct audit *au)
{
	struct pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	char tried[1400], sink[1200];
	/* Host homes: /root, /home and what /home holds. */
	dg_audit_pairs_add(p, "/root");
	dg_audit_pairs_add(p, "/home");
	DIR *dir = opendir("/home");
	struct dirent *e;
	int homes = 0;
	while (dir && (e = readdir(dir)) && homes < DG_AUDIT_HOME_MAX) {
		if (e->d_name[0] == '.')
			continue;
		char path[PATH_MAX];
		fmt(path, sizeof(path), "/home/%s", e->d_name);
		dg_audit_pairs_add(p, path);
		homes++;
	}
	if (dir)
		closedir(dir);
	fmt(tried, sizeof(tried), "the host's home directories (%s), found by device and inode",
	    p->list);
	fmt(sink, sizeof(sink), "the host's %s", p->list);
	dg_audit_probe(au, "filesystem", "host-homes", tried, sink, EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS, p->args);
	dg_audit_probe(au, "filesystem", "shadow", "reading /etc/shadow", "/etc/shadow",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("read-file", "/etc/shadow"));

	/* A world-readable host file in a fresh directory: only the mount
	 * namespace can keep it out of sight. */
	memset(p, 0, sizeof(*p));
	dg_audit_pairs_add(p, au->tmp_file);
	fmt(tried, sizeof(tried), "the host's world-readable %s (made by the audit), by device "
	    "and inode", au->tmp_file);
	dg_audit_probe(au, "filesystem", "host-tmp", tried, au->tmp_file, EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS, p->args);
	fmt(tried, sizeof(tried), "reading the host's %s by its path", au->tmp_file);
	dg_audit_probe(au, "filesystem", "host-tmp-read", tried, au->tmp_file, EXPECT_CONTAINED,
		       NULL, DG_AUDIT_PROBE_MS, ARGS("read-file", au->tmp_file));

	/* The gateway's own directories, when this machine has them. */
	memset(p, 0, sizeof(*p));
	if (au->state_dir)
		dg_audit_pairs_add(p, au->state_dir);
	if (au->recordings)
		dg_audit_pairs_add(p, au->recordings);
	if (p->n > 0) {
		fmt(tried, sizeof(tried), "the gateway's state and recordings directories (%s), by "
		    "device and inode", p->list);
		dg_audit_probe(au, "filesystem", "gateway-dirs", tried, p->list, EXPECT_CONTAINED,
			       NULL, DG_AUDIT_PROBE_MS, p->args);
	}
	dg_audit_probe(au, "filesystem", "proc-1-root",
		       "listing /proc/1/root (PID 1's root directory)", "/proc/1/root",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("list-dir", "/proc/1/root"));
	dg_audit_probe(au, "filesystem", "sys",
		       "listing /sys and opening its attributes for writing", "/sys",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("sys-write"));
	/* A kernel without magic SysRq has no /proc/sysrq-trigger at all: the
	 * host control tells that from the jail hiding it. */
	dg_audit_probe_kernel(au, "filesystem", "proc-knobs", "opening /proc/sys/kernel/core_pattern and "
			      "/proc/sysrq-trigger for writing (never written)",
			      "/proc/sys/kernel/core_pattern, /proc/sysrq-trigger",
			      ARGS("open-write", "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger"));
	static const char *const sysdirs[] = {"/usr", "/etc", "/"};
	for (size_t i = 0; i < sizeof(sysdirs) / sizeof(sysdirs[0]); i++) {
		char id[32];
		fmt(id, sizeof(id), "write-%s", i == 2 ? "root" : sysdirs[i] + 1);
		fmt(tried, sizeof(tried), "creating a file in %s", sysdirs[i]);
		dg_audit_probe(au, "filesystem", id, tried, sysdirs[i], EXPECT_CONTAINED, NULL,
			       DG_AUDIT_PROBE_MS, ARGS("write-dir", sysdirs[i]));
	}
	/* Device nodes: making one, and the host's sensitive ones by identity. */
	dg_audit_probe(au, "filesystem", "mknod",
		       "making a device node (c 1 3) in the writable /tmp", "device nodes",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("mknod", "/tmp"));
	memset(p, 0, sizeof(*p));
	static const char *const devs[] = {"/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg"};
	for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
		dg_audit_pairs_add(p, devs[i]);
	dir = opendir("/dev");
	int blocks = 0;
	while (dir && (e = readdir(dir)) && blocks < DG_AUDIT_BLOCKDEV_MAX) {
		char path[PATH_MAX];
		struct stat st;
		fmt(path, sizeof(path), "/dev/%s", e->d_name);
		if (lstat(path, &st) == 0 && S_ISBLK(st.st_mode)) {
			dg_audit_pairs_add(p, path);
			blocks++;
		}
	}
	if (dir)
		closedir(dir);
	if (p->n > 0) {
		fmt(tried, sizeof(tried), "the host's device nodes (%s), by device and inode",
		    p->list);
		dg_audit_probe(au, "filesystem", "host-devices", tried, p->list, EXPECT_CONTAINED,
			       NULL, DG_AUDIT_PROBE_MS, p->args);
	}
	dg_audit_probe(au, "filesystem", "remount", "remounting / and /usr read-write",
		       "the jail's mounts", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("remount"));
	dg_audit_probe(au, "filesystem", "mount", "mounting a tmpfs on /tmp", "the mount table",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("mount-tmpfs", "/tmp"));
	dg_audit_probe(au, "filesystem", "leaked-fd",
		       "a descriptor inherited from the host (3 and up)", "descriptors",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("leaked-fd"));
	free(p);
}

/* The names of our own environment, comma-separated, for `env --host`: a
 * name the host has must not show inside. Names with a comma (none in
 * practice) are left out; the list is bounded by len. */
static void host_env_names(char *out, size_t len)
{
	extern char **environ;
	out[0] = '\0';
	for (char **e = environ; *e; e++) {
		size_t kl = strcspn(*e, "="), l = strlen(out);
		if (kl == 0 || memchr(*e, ',', kl) || l + kl + 2 > len)
			continue;
		fmt(out + l, len - l, "%s%.*s", l ? "," : "", (int)kl, *e);
	}
}

void dg_audit_credentials_edge(struct audit *au)
{
	char *names = malloc(DG_AUDIT_ENV_NAMES_MAX);
	if (names) {
		host_env_names(names, DG_AUDIT_ENV_NAMES_MAX);
		dg_audit_probe_judged(au, "credentials", "environment", "the environment of every process "
				      "in the session (its own and /proc/*/environ): the host's variables "
				      "and a canary value the audit put into its own environment",
				      "the host's environment", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
				      ARGS("env", "--allow", DG_AUDIT_ENV_ALLOW, "--host", names, au->canary),
				      judge_env);
		free(names);
	}
	char min[32];
	fmt(min, sizeof(min), "%u", DG_JAIL_ID_BASE);
	dg_audit_probe(au, "credentials", "ids", "its uid, gid, groups and their maps to host ids",
		       "host root and the host's users", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("ids", min));
	dg_audit_probe(au, "credentials", "privileges",
		       "its capabilities, no_new_privs and seccomp mode (/proc/self/status)",
		       "capabilities", EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("status"));
	dg_audit_probe_kernel(au, "credentials", "keyrings",
			      "the kernel's session and user keyrings (keyctl)",
			      "kernel keyrings", ARGS("keyctl"));
	dg_audit_probe(au, "credentials", "cred-files",
		       "credential files (~/.ssh, ~/.aws, ... of every "
		       "home it sees, container secrets, SSH host keys)", "credential files",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("cred-files"));
	struct pairs *p = calloc(1, sizeof(*p));
	if (!p)
		return;
	if (au->state_dir) {
		char path[PATH_MAX];
		fmt(path, sizeof(path), "%s/tokens.json", au->state_dir);
		dg_audit_pairs_add(p, path);
		fmt(path, sizeof(path), "%s/recording-key.pem", au->state_dir);
		dg_audit_pairs_add(p, path);
	}
	if (p->n > 0) {
		char tried[1200];
		fmt(tried, sizeof(tried), "the gateway's token file and recording key (%s), by "
		    "device and inode", p->list);
		dg_audit_probe(au, "credentials", "gateway-secrets", tried, p->list,
			       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, p->args);
	}
	free(p);
}

/* The browser's paths around the urls rules (cli-audit-browser.c): run
 * twice, once with the bait's /secret/ paths denied (the probe) and once
 * allowed (the control, which must see them arrive). */
void dg_audit_browser_edge(struct audit *au)
{
	struct finding *ws = dg_audit_add(au, "egress", "browser-websocket",
					  "WebSockets from a page and from its worker to a path the urls rules "
					  "deny (ws://" DG_AUDIT_BAIT_HOST ":PORT/secret/...), the host and port "
					  "allowed by egress",
					  "a denied URL, around the browser's request guard");
	if (ws)
		ws->with_next = true; /* both come from the same bait runs */
	struct finding *om = dg_audit_add(au, "egress", "browser-omnibox",
					  "a denied URL typed into the omnibox and opened in a new tab with "
					  "alt+Enter (driven through the worker)",
					  "a denied URL, through a tab the browser opens itself");
	if (!ws || !om)
		return;
	const char *src = "a fresh browser desktop under the audit's bait policy (the site "
			  "allowed, its /secret/ paths denied), driven through its worker";
	fmt(ws->source, sizeof(ws->source), "%s", src);
	fmt(om->source, sizeof(om->source), "%s", src);
	fmt(ws->probe, sizeof(ws->probe), "bait page: new WebSocket(/ok/page, /secret/page) and "
	    "a worker doing the same");
	fmt(om->probe, sizeof(om->probe), "key ctrl+l; type http://" DG_AUDIT_BAIT_HOST
	    ":PORT/secret/omnibox.html; key alt+Return");
	struct dg_audit_bait_seen *c = malloc(sizeof(*c)), *p = malloc(sizeof(*p));
	struct dg_err err = {{0}};
	if (!c || !p || dg_audit_browser_paths(&au->policy.limits, false, au->progress, c, &err) != 0) {
		fmt(ws->evidence, sizeof(ws->evidence), "the control could not run: %s",
		    c && p ? err.msg : "out of memory");
		fmt(om->evidence, sizeof(om->evidence), "%s", ws->evidence);
		goto out;
	}
	fmt(ws->control, sizeof(ws->control), "under the same policy without the deny: "
	    "/secret/page %s, /secret/worker %s (the bait saw: %.400s)",
	    c->secret_page ? "arrived" : "did not arrive",
	    c->secret_worker ? "arrived" : "did not arrive", c->log);
	fmt(om->control, sizeof(om->control), "under the same policy without the deny: the typed "
	    "URL %s", c->secret_omnibox ? "arrived" : "did not arrive");
	bool ws_control = c->secret_page && c->secret_worker;
	if (dg_audit_browser_paths(&au->policy.limits, true, au->progress, p, &err) != 0) {
		fmt(ws->evidence, sizeof(ws->evidence), "could not run: %s", err.msg);
		fmt(om->evidence, sizeof(om->evidence), "%s", ws->evidence);
		goto out;
	}
	if (!ws_control)
		fmt(ws->evidence, sizeof(ws->evidence), "the control must see the denied WebSockets "
		    "arrive, and did not, so the probe proves nothing here");
	else if (!p->ok_page || !p->ok_worker)
		fmt(ws->evidence, sizeof(ws->evidence), "the page or its worker did not run (the "
		    "allowed WebSockets did not arrive: %.400s)", p->log);
	else {
		ws->outcome = p->secret_page || p->secret_worker ? OUT_LEAKED : OUT_CONTAINED;
		fmt(ws->evidence, sizeof(ws->evidence), "allowed /ok/ WebSockets arrived; /secret/page "
		    "%s, /secret/worker %s (the bait saw: %.400s)",
		    p->secret_page ? "ARRIVED" : "never arrived",
		    p->secret_worker ? "ARRIVED" : "never arrived", p->log);
	}
	if (!c->secret_omnibox)
		fmt(om->evidence, sizeof(om->evidence), "the control must see the typed URL arrive, "
		    "and did not, so the probe proves nothing here");
	else if (!p->ok_omnibox && !p->secret_omnibox)
		fmt(om->evidence, sizeof(om->evidence), "an allowed URL opened the same way did not "
		    "arrive either: the keys did not open a tab here (%.400s)", p->log);
	else {
		om->outcome = p->secret_omnibox ? OUT_LEAKED : OUT_CONTAINED;
		fmt(om->evidence, sizeof(om->evidence), "the typed URL %s; an allowed one opened "
		    "the same way %s",
		    p->secret_omnibox ? "ARRIVED at the bait" : "never arrived at the bait",
		    p->ok_omnibox ? "arrived" : "did not");
	}
	if (p->runs > 1) {
		char more[96];
		snprintf(more, sizeof(more), " (%d fresh browsers: a run that did not show every "
			 "allowed request is done again)", p->runs);
		strncat(ws->evidence, more, sizeof(ws->evidence) - strlen(ws->evidence) - 1);
		strncat(om->evidence, more, sizeof(om->evidence) - strlen(om->evidence) - 1);
	}
out:
	free(c);
	free(p);
}

void dg_audit_isolation_edge(struct audit *au)
{
	char store[2 * DG_AUDIT_NS_TYPES][64], tried[512];
	const char *args[2 * DG_AUDIT_NS_TYPES + 2];
	if (au->b_up && dg_audit_ns_args(au->b.jail.pid, store, args) > 0) {
		dg_audit_probe(au, "isolation", "namespaces",
			       "its user, mount, net, ipc, uts, pid and "
			       "cgroup namespaces, against the host's and the other session's",
			       "the host's and the other session's namespaces", EXPECT_CONTAINED,
			       NULL, DG_AUDIT_PROBE_MS, args);
	} else {
		struct finding *f = dg_audit_add(au, "isolation", "namespaces", "its namespaces",
						 "the host's and the other session's namespaces");
		if (f)
			fmt(f->evidence, sizeof(f->evidence),
			    "could not read the other session's namespaces");
	}
	char pid[16], pids[16];
	fmt(pid, sizeof(pid), "%d", (int)getpid());
	fmt(pids, sizeof(pids), "%u", au->policy.limits.pids);
	fmt(tried, sizeof(tried), "the host's processes in /proc (the audit itself is pid %s, "
	    "deskgate)", pid);
	dg_audit_probe(au, "isolation", "host-processes", tried, "the host's processes",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
		       ARGS("procs", pids, pid, "deskgate"));
	fmt(tried, sizeof(tried), "the other session's processes, to signal or trace them: its "
	    "marker process dgd-%s", au->tag);
	dg_audit_probe(au, "isolation", "other-session-processes", tried,
		       "the other session's processes", EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER,
		       DG_AUDIT_PROBE_MS, ARGS("alive", au->tag));
	char size[32];
	fmt(size, sizeof(size), "%dx%d", DG_AUDIT_OTHER_W, DG_AUDIT_OTHER_H);
	fmt(tried, sizeof(tried), "the other session's X server (its screen is %s): X "
	    "connections to displays :0..:9, abstract and file sockets", size);
	dg_audit_probe(au, "isolation", "other-session-x11", tried, "the other session's X server",
		       EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER, DG_AUDIT_PROBE_MS,
		       ARGS("x11", size));
	char marker[96];
	fmt(marker, sizeof(marker), "/tmp/deskgate-audit-%s", au->tag);
	fmt(tried, sizeof(tried), "reading the other session's file %s", marker);
	dg_audit_probe(au, "isolation", "other-session-files", tried, "the other session's files",
		       EXPECT_CONTAINED, DG_AUDIT_CONTROL_OTHER, DG_AUDIT_PROBE_MS,
		       ARGS("read-file", marker));
	dg_audit_probe(au, "isolation", "exec-desktop", "its own desktop from a program run by exec: the X "
		       "server's path and abstract sockets, a signal to Xvnc, the browser's singleton socket "
		       "and profile (xdotool's doors)",
		       "the session's desktop, around the action rules",
		       au->policy.limits.exec_desktop ? EXPECT_ALLOWED : EXPECT_CONTAINED,
		       DG_AUDIT_CONTROL_SELF, DG_AUDIT_PROBE_MS, ARGS("desktop"));
	fmt(tried, sizeof(tried), "connecting to the host's abstract unix socket @%s (a listener "
	    "the audit opened)", au->abs_name);
	dg_audit_probe(au, "isolation", "host-abstract-socket", tried,
		       "the host's abstract unix sockets", EXPECT_CONTAINED, NULL,
		       DG_AUDIT_PROBE_MS, ARGS("unix-abstract", au->abs_name));
	if (au->profile == DG_PROFILE_BROWSER)
		dg_audit_probe(au, "isolation", "devtools-pipe", "a descriptor of Chromium's DevTools pipe "
			       "(its fds 3 and 4, the worker's channel): /proc/PID/fd, pidfd_getfd, ptrace",
			       "the browser's DevTools pipe to the worker", EXPECT_CONTAINED, NULL,
			       DG_AUDIT_PROBE_MS, ARGS("devtools"));
	dg_audit_probe(au, "isolation", "proc-mem", "opening the memory of the session's other processes "
		       "(/proc/PID/mem, read-write; never read or written)",
		       au->profile == DG_PROFILE_BROWSER ? "the memory of the session's Xvnc and Chromium"
							 : "the memory of the session's Xvnc and xterm",
		       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS, ARGS("proc-mem"));
	/* kernel: the call's fate depends on the kernel's build or settings
	 * (a kernel without IA32 emulation, x32, kexec, modules, BPF...), so a
	 * host control runs first (dg_audit_probe_kernel). Not for ptrace and
	 * process-vm-readv, whose controls would reach into the audit itself,
	 * nor TIOCSTI, which a root host control may always do. */
	static const struct {
		const char *id, *tried, *sink;
		bool kernel;
	} calls[] = {
		{"ptrace", "ptrace: TRACEME, attaching to its own child and to another process",
		 "other processes", false},
		{"process-vm-readv", "reading another process's memory with process_vm_readv",
		 "other processes", false},
		{"unshare", "new user, net or mount namespaces (unshare, clone, clone3)",
		 "namespaces", true},
		{"bpf", "loading a BPF program", "the kernel's BPF", true},
		{"perf", "perf_event_open", "the kernel's perf events", true},
		{"userfaultfd", "userfaultfd", "the kernel's userfaultfd", true},
		{"io-uring", "io_uring_setup", "the kernel's io_uring", true},
		{"open-by-handle", "open_by_handle_at (the \"shocker\" escape)",
		 "files outside the mount tree", true},
		{"kexec", "kexec_load and kexec_file_load", "the running kernel", true},
		{"modules", "init_module and finit_module", "kernel modules", true},
		{"x32", "a system call through the x32 ABI", "the seccomp filter", true},
		{"int80", "a system call through int 0x80 (the i386 ABI)", "the seccomp filter", true},
		{"tiocsti", "TIOCSTI and TIOCLINUX on its own terminal", "terminal input injection",
		 false},
	};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		if (calls[i].kernel)
			dg_audit_probe_kernel(au, "isolation", calls[i].id, calls[i].tried,
					      calls[i].sink, ARGS(calls[i].id));
		else
			dg_audit_probe(au, "isolation", calls[i].id, calls[i].tried, calls[i].sink,
				       EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS,
				       ARGS(calls[i].id));
	}
}

/* Reads a memfd's whole content (bounded) into buf as text. */
static size_t memfd_text(int fd, char *buf, size_t len)
{
	off_t size = lseek(fd, 0, SEEK_END);
	ssize_t k = pread(fd, buf, len - 1, 0);
	buf[k > 0 ? k : 0] = '\0';
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	for (size_t l = strlen(buf); l > 0 && buf[l - 1] == ' '; l--)
		buf[l - 1] = '\0';
	return size > 0 ? (size_t)size : 0;
}

/* The output cap and the wall clock are held by the relay that runs a
 * command (`deskgate exec`, dg_exec_run), not by the jail: they are seen
 * there, in a fresh jail under the policy's limits. */
static void exec_relay_checks(struct audit *au)
{
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = memfd_create("audit-out", MFD_CLOEXEC), err = memfd_create("audit-err",
									    MFD_CLOEXEC);
	char tried[160];
	fmt(tried, sizeof(tried), "writing without end to stdout (/usr/bin/yes) past the output "
	    "cap of %llu bytes (limits.output_bytes)",
	    (unsigned long long)au->policy.limits.output_bytes);
	struct finding *f = dg_audit_add(au, "resources", "output-cap", tried,
					 "the relay of stdout (limits.output_bytes)");
	if (!f)
		goto out;
	fmt(f->probe, sizeof(f->probe), "deskgate exec engine: /usr/bin/yes");
	fmt(f->source, sizeof(f->source), "a fresh jail under the policy's limits, run as "
	    "`deskgate exec` runs one");
	if (devnull < 0 || out < 0 || err < 0) {
		fmt(f->evidence, sizeof(f->evidence), "cannot make descriptors: %s",
		    strerror(errno));
		goto out;
	}
	long long t0 = dg_now_ms();
	int st = dg_exec_run(&au->policy.limits, ARGS("/usr/bin/yes"), devnull, out, err);
	long long ms = dg_now_ms() - t0;
	char msg[512];
	size_t relayed = memfd_text(out, msg, 2); /* only the size matters */
	memfd_text(err, msg, sizeof(msg));
	bool ok = relayed <= au->policy.limits.output_bytes && st != 124 && st != 125;
	f->outcome = ok ? OUT_CONTAINED : st == 125 ? OUT_ERROR : OUT_LEAKED;
	fmt(f->evidence, sizeof(f->evidence), "%zu byte(s) relayed of a writer that never stops "
	    "(cap %llu); it ended after %lld ms with status %d%s; the relay said: %s", relayed,
	    (unsigned long long)au->policy.limits.output_bytes, ms, st,
	    st == 141 ? " (SIGPIPE: its pipe was closed at the cap)" : "", msg[0] ? msg : "-");

	struct dg_limits lim = au->policy.limits;
	unsigned policy_s = lim.exec_seconds;
	if (lim.exec_seconds > DG_AUDIT_WALL_S)
		lim.exec_seconds = DG_AUDIT_WALL_S;
	fmt(tried, sizeof(tried), "sleeping past the exec wall clock (/bin/sleep 1000, "
	    "limits.exec_seconds %u)", lim.exec_seconds);
	f = dg_audit_add(au, "resources", "wall-clock", tried, "limits.exec_seconds");
	if (!f)
		goto out;
	fmt(f->probe, sizeof(f->probe), "deskgate exec engine: /bin/sleep 1000");
	fmt(f->source, sizeof(f->source), "a fresh jail under the policy's limits, exec_seconds "
	    "%u%s", lim.exec_seconds, policy_s != lim.exec_seconds ? " for this check" : "");
	if (ftruncate(err, 0) != 0 || lseek(err, 0, SEEK_SET) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "ftruncate: %s", strerror(errno));
		goto out;
	}
	t0 = dg_now_ms();
	st = dg_exec_run(&lim, ARGS("/bin/sleep", "1000"), devnull, out, err);
	ms = dg_now_ms() - t0;
	memfd_text(err, msg, sizeof(msg));
	ok = st == 124 && ms < (long long)lim.exec_seconds * 1000 + 2000;
	f->outcome = ok ? OUT_CONTAINED : st == 125 ? OUT_ERROR : OUT_LEAKED;
	fmt(f->evidence, sizeof(f->evidence), "a sleeper of 1000 s ended after %lld ms with "
	    "status %d (124: the wall clock) under exec_seconds %u%s; the relay said: %s", ms, st,
	    lim.exec_seconds, policy_s != lim.exec_seconds
		? " (the policy's is longer; lowered so the audit stays short: the same code holds it)"
		: "", msg[0] ? msg : "-");
out:
	if (devnull >= 0)
		close(devnull);
	if (out >= 0)
		close(out);
	if (err >= 0)
		close(err);
}

/* MemAvailable of the host in MiB, or 0 when unknown. */
static unsigned long long host_mem_available_mb(void)
{
	FILE *fp = fopen("/proc/meminfo", "re");
	if (!fp)
		return 0;
	char line[256];
	unsigned long long kb = 0;
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(fp);
	return kb / 1024;
}

/* Whether mb MiB may be pushed into the jail (see DG_AUDIT_PUSH_MAX_MB);
 * when not, records the finding as not checked, saying why. */
static bool pushable(struct audit *au, const char *id, const char *tried, const char *sink,
		     unsigned long long mb, unsigned long long avail)
{
	const char *why = NULL;
	char buf[256];
	if (avail == 0 || mb + DG_AUDIT_HOST_MARGIN_MB > avail) {
		fmt(buf, sizeof(buf), "the host has %llu MiB available: pushing %llu MiB would test "
		    "the host, not the jail", avail, mb);
		why = buf;
	} else if (mb > DG_AUDIT_PUSH_MAX_MB) {
		fmt(buf, sizeof(buf), "%llu MiB is more than the audit pushes (%d MiB), to stay short",
		    mb, DG_AUDIT_PUSH_MAX_MB);
		why = buf;
	}
	if (!why)
		return true;
	struct finding *f = dg_audit_add(au, "resources", id, tried, sink);
	if (f) {
		f->outcome = OUT_UNCHECKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", why);
	}
	return false;
}

void dg_audit_resources_edge(struct audit *au)
{
	const struct dg_limits *lim = &au->policy.limits;
	char a1[32], a2[32], a3[32], sink[256], tried[256];
	/* CPU: more spinners than the quota has cores, on a machine with more
	 * cores than the quota; contained when their total stays halfway below
	 * what they would get unthrottled. */
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int procs = (int)lim->cpus + 1; /* more than the quota's cores */
	if (procs > cores)
		procs = (int)cores;
	fmt(sink, sizeof(sink), "the CPU quota (limits.cpus %.2f)", lim->cpus);
	fmt(tried, sizeof(tried), "spinning past the CPU quota of %.2f core(s)", lim->cpus);
	if (cores > 0 && (double)procs > lim->cpus) {
		double max = (lim->cpus + procs) / 2;
		fmt(a1, sizeof(a1), "%d", DG_AUDIT_CPU_MS);
		fmt(a2, sizeof(a2), "%.3f", max);
		fmt(a3, sizeof(a3), "%d", procs);
		fmt(tried, sizeof(tried), "%d processes spinning for %d ms against the CPU quota of "
		    "%.2f core(s)", procs, DG_AUDIT_CPU_MS, lim->cpus);
		dg_audit_probe(au, "resources", "cpu", tried, sink, EXPECT_CONTAINED, NULL,
			       DG_AUDIT_PROBE_MS + DG_AUDIT_CPU_MS, ARGS("cpuspin", a1, a2, a3));
	} else {
		struct finding *f = dg_audit_add(au, "resources", "cpu", tried, sink);
		if (f) {
			f->outcome = OUT_UNCHECKED;
			fmt(f->evidence, sizeof(f->evidence), "this machine has %ld core(s), not more "
			    "than the quota of %.2f: nothing here can use more than the quota allows",
			    cores, lim->cpus);
		}
	}
	exec_relay_checks(au);
	/* Scratch space: /tmp and the home share one capped tmpfs. */
	unsigned long long avail = host_mem_available_mb();
	fmt(a1, sizeof(a1), "%llu", (unsigned long long)lim->scratch_mb);
	fmt(sink, sizeof(sink), "the scratch tmpfs of /tmp and the home (limits.scratch_mb %llu)",
	    (unsigned long long)lim->scratch_mb);
	fmt(tried, sizeof(tried), "filling /tmp, then the home directory, past the scratch cap "
	    "of %llu MiB", (unsigned long long)lim->scratch_mb);
	if (pushable(au, "scratch", tried, sink, lim->scratch_mb, avail))
		dg_audit_probe(au, "resources", "scratch", tried, sink, EXPECT_CONTAINED, NULL,
			       DG_AUDIT_FILL_MS, ARGS("fill", a1, "/tmp", DG_JAIL_HOME));
	/* Processes: fork until it fails (the session's own processes and
	 * threads count too, so it fails below the cap). */
	struct dg_jail_verdict v0 = {0}, v1 = {0};
	fmt(sink, sizeof(sink), "the pids cgroup (limits.pids %u)", lim->pids);
	fmt(tried, sizeof(tried), "forking until fork fails (limits.pids %u; the session's own "
	    "processes and threads count too)", lim->pids);
	if (lim->pids <= DG_AUDIT_FORK_MAX) {
		fmt(a1, sizeof(a1), "%u", lim->pids);
		dg_jail_verdict(&au->local.desktop.jail, &v0);
		struct finding *f = dg_audit_probe(au, "resources", "pids", tried, sink,
						   EXPECT_CONTAINED, NULL, DG_AUDIT_PROBE_MS * 3,
						   ARGS("forkbomb", a1, "0"));
		dg_jail_verdict(&au->local.desktop.jail, &v1);
		if (f && f->outcome != OUT_ERROR) {
			size_t l = strlen(f->evidence);
			fmt(f->evidence + l, sizeof(f->evidence) - l, "; %s",
			    v1.pids_capped && !v0.pids_capped
				    ? "the pids cgroup counted forks refused at pids.max"
				    : "refused by RLIMIT_NPROC, set to the same cap and checked "
				      "before the pids cgroup");
		}
	} else {
		struct finding *f = dg_audit_add(au, "resources", "pids", tried, sink);
		if (f) {
			f->outcome = OUT_UNCHECKED;
			fmt(f->evidence, sizeof(f->evidence), "the cap of %u is above the %d children "
			    "the probe forks at most", lim->pids, DG_AUDIT_FORK_MAX);
		}
	}
	/* Memory, last: the OOM killer may take a process of the desktop
	 * rather than the hog. */
	unsigned long long want = lim->memory_mb + DG_AUDIT_MEM_EXTRA_MB;
	fmt(sink, sizeof(sink), "the memory cgroup (limits.memory_mb %llu, no swap)",
	    (unsigned long long)lim->memory_mb);
	fmt(tried, sizeof(tried), "allocating and touching %llu MiB, past the memory limit of "
	    "%llu MiB", want, (unsigned long long)lim->memory_mb);
	if (!pushable(au, "memory", tried, sink, want, avail))
		return;
	fmt(a1, sizeof(a1), "%llu", want);
	struct finding *f = dg_audit_add(au, "resources", "memory", tried, sink);
	if (!f)
		return;
	const char *const *args = ARGS("memhog", a1);
	dg_audit_command_line(args, f->probe, sizeof(f->probe));
	fmt(f->source, sizeof(f->source), "%s", au->a_source);
	struct run *r = malloc(sizeof(*r));
	struct dg_err err = {{0}};
	if (!r) {
		fmt(f->evidence, sizeof(f->evidence), "out of memory");
		return;
	}
	dg_jail_verdict(&au->local.desktop.jail, &v0);
	if (!au->local.desktop_up ||
	    dg_audit_run_probe(au, &au->local.desktop, args, DG_AUDIT_MEM_MS, r, &err) != 0) {
		fmt(f->evidence, sizeof(f->evidence), "could not run it: %s", err.msg);
		free(r);
		return;
	}
	dg_jail_verdict(&au->local.desktop.jail, &v1);
	/* How far it got: its last progress line. */
	long touched = 0;
	for (const char *p = r->out; (p = strstr(p, "touched ")); p += 8)
		touched = strtol(p + 8, NULL, 10);
	if (r->verdict == 1) {
		f->outcome = OUT_LEAKED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else if (r->exit_code == 128 + SIGKILL && v1.oom_killed) {
		f->outcome = OUT_CONTAINED;
		fmt(f->evidence, sizeof(f->evidence), "killed (SIGKILL) by the memory cgroup's OOM "
		    "killer after touching about %ld MiB of %llu", touched, want);
	} else if (r->verdict == 0) {
		f->outcome = OUT_CONTAINED;
		fmt(f->evidence, sizeof(f->evidence), "%s", r->line);
	} else {
		dg_audit_describe_failure(r, f->evidence, sizeof(f->evidence));
	}
	free(r);
}
