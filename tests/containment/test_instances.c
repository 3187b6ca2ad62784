/* Instances: several deskgates on one host (a user's gateway beside CI,
 * two gateways, test runs side by side) keep their jails apart. Each jail's
 * cgroups live under deskgate/<instance>/, its slot lock names the
 * instance, its worker carries it; what one instance counts as its own
 * (leftover checks, stale cleanup's victims while alive) is never another's.
 *
 * Two real gateways under instances of their own (not this test program's
 * instance), each with a live xterm session, while this program runs jails
 * of its own instance beside them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"
#include "dg_test.h"

#define T_CREATE 90.0
#define T_ACT 60.0

struct gw {
	struct dg_server srv;
	char instance[DG_INSTANCE_MAX + 1];
	char session[64];
	uint32_t slot;
};

/* Every gateway a test started, stopped by the suite's fini even when an
 * assertion ended the test early (dg_test_serve_stop of a stopped one
 * only removes its temp dir). */
static struct gw *started[4];
static int n_started;

static void fini(void)
{
	for (int i = 0; i < n_started; i++)
		if (started[i]->srv.pid > 0)
			dg_test_serve_stop(&started[i]->srv, 30, false);
	n_started = 0;
}

TestSuite(instances, .fini = fini);

/* A gateway of instance "<this run's>-<suffix>". */
static void gw_start(struct gw *g, const char *suffix)
{
	snprintf(g->instance, sizeof(g->instance), "%s-%s", dg_test_instance(), suffix);
	char extra[128], err[2048];
	snprintf(extra, sizeof(extra), "\"instance\": \"%s\"", g->instance);
	cr_assert_eq(dg_test_serve_start(&g->srv, extra, 30, err, sizeof(err)), 0, "%s", err);
	if (n_started < 4)
		started[n_started++] = g;
	char *log = dg_test_serve_log(&g->srv);
	char want[128];
	snprintf(want, sizeof(want), "(instance %s,", g->instance);
	cr_assert(strstr(log, want), "the start line names the instance:\n%s", log);
	free(log);
}

/* Creates an xterm session and finds its slot (the one jail under g). */
static void gw_session(struct gw *g)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(g->srv.port, "POST", "/v1/sessions", DG_TEST_AGENT_TOKEN,
				  "{\"profile\":\"xterm\"}", T_CREATE, &r),
		     0);
	cr_assert_eq(r.status, 201, "create: %d %s", r.status, r.body);
	json_t *j = json_loads(r.body, 0, NULL);
	cr_assert(j);
	snprintf(g->session, sizeof(g->session), "%s",
		 json_string_value(json_object_get(j, "id")));
	json_decref(j);
	dg_http_free(&r);
	uint32_t slots[8];
	cr_assert_eq(dg_test_slots_under(g->srv.pid, slots, 8), 1, "one jail under the gateway");
	g->slot = slots[0];
}

/* An exec action on the session over its WebSocket succeeds. */
static void gw_act(struct gw *g)
{
	char path[128], err[256];
	snprintf(path, sizeof(path), "/v1/sessions/%s/ws", g->session);
	int status;
	struct dg_ws *ws = dg_ws_connect(g->srv.port, path, DG_TEST_AGENT_TOKEN, NULL, 30, &status,
					 err, sizeof(err));
	cr_assert(ws, "connect %s: %d %s", path, status, err);
	cr_assert_eq(dg_ws_send_text(ws, "{\"type\":\"exec\",\"argv\":[\"true\"]}"), 0);
	bool ok = false;
	for (int i = 0; i < 4 && !ok; i++) {
		struct dg_ws_msg m;
		cr_assert_eq(dg_ws_recv(ws, T_ACT, &m), 1, "no answer from %s", g->instance);
		json_t *j = json_loadb((const char *)m.data, m.len, 0, NULL);
		const char *type = json_string_value(json_object_get(j, "type"));
		if (type && strcmp(type, "result") == 0) {
			cr_assert(json_is_true(json_object_get(j, "ok")), "exec: %.300s", m.data);
			ok = true;
		}
		json_decref(j);
		dg_ws_msg_free(&m);
	}
	cr_assert(ok, "no result from %s", g->instance);
	dg_ws_close(ws);
}

static bool exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* The memory group of the jail in slot of instance (v1 or v2 layout). */
static bool jail_group_exists(const char *instance, uint32_t slot)
{
	const char *roots[] = {"/sys/fs/cgroup/memory", "/sys/fs/cgroup"};
	for (int i = 0; i < 2; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/deskgate/%s/jail-%u", roots[i], instance,
			 (unsigned)slot);
		if (exists(path))
			return true;
	}
	return false;
}

static void slot_label(uint32_t slot, char *out, size_t len)
{
	const char *d = getenv("DESKGATE_RUN_DIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/slots/%u.lock", d && d[0] == '/' ? d : DG_RUN_DIR_DEFAULT,
		 (unsigned)slot);
	FILE *f = fopen(path, "re");
	out[0] = '\0';
	if (f) {
		if (!fgets(out, (int)len, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\n")] = '\0';
}

Test(instances, two_gateways_and_a_test_run_side_by_side, .timeout = 300)
{
	struct gw a, b;
	char what[4096];
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "before: %s", what);
	gw_start(&a, "a");
	gw_start(&b, "b");
	gw_session(&a);
	gw_session(&b);
	cr_assert_neq(a.slot, b.slot, "slots (and so uids) are unique on the host");
	cr_assert(jail_group_exists(a.instance, a.slot), "a's jail under deskgate/%s", a.instance);
	cr_assert(jail_group_exists(b.instance, b.slot), "b's jail under deskgate/%s", b.instance);
	char label[64];
	slot_label(a.slot, label, sizeof(label));
	cr_assert_str_eq(label, a.instance, "a's slot lock names its instance");
	slot_label(b.slot, label, sizeof(label));
	cr_assert_str_eq(label, b.instance);

	/* This run's own instance owns none of their jails... */
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "counted another instance's: %s",
		     what);
	/* ...and runs its own beside them, leaving nothing. */
	struct dg_run r;
	cr_assert_eq(dg_test_exec(NULL, (const char *const[]){"/bin/true", NULL}, &r), 0);
	cr_assert_eq(r.status, 0, "exec beside two gateways: %s", r.err);
	dg_run_free(&r);
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "after exec: %s", what);

	/* A gateway's stale cleanup at start leaves the others' live jails. */
	struct gw c;
	gw_start(&c, "c");
	gw_act(&a);
	gw_act(&b);
	cr_assert_eq(dg_test_serve_stop(&c.srv, 30, false), 0);

	/* One gateway ends; the other's session goes on. */
	cr_assert_eq(dg_test_serve_stop(&a.srv, 30, false), 0);
	double end = dg_test_now() + 10;
	while (jail_group_exists(a.instance, a.slot) && dg_test_now() < end)
		usleep(20000);
	cr_assert(!jail_group_exists(a.instance, a.slot), "a's jail group left");
	char inst_dir[512];
	snprintf(inst_dir, sizeof(inst_dir), "/sys/fs/cgroup/memory/deskgate/%s", a.instance);
	cr_assert(!exists(inst_dir), "a's instance group goes with its last jail");
	gw_act(&b);
	cr_assert_eq(dg_test_serve_stop(&b.srv, 30, false), 0);
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "at the end: %s", what);
}

/* A gateway killed with SIGKILL leaves its jails' groups (its jails die
 * with it); the next deskgate to start, of any instance, removes them, and
 * never a live one.
 *
 * Other tests start deskgates all the time, and each start cleans: the
 * test keeps the dead jail's slot lock held (a share of the spawner's own
 * lock, taken before the kill) until it has checked that the group outlived
 * its jail and that a start leaves a held slot's group alone. */
Test(instances, a_dead_instance_is_cleaned_by_another, .timeout = 300)
{
	struct gw a, b;
	gw_start(&a, "dead");
	gw_start(&b, "live");
	gw_session(&a);
	gw_session(&b);
	pid_t kids[8];
	int nk = dg_test_children(a.srv.pid, kids, 8);
	int lock = dg_test_slot_lock_share(a.srv.pid, a.slot);
	cr_assert(lock >= 0, "a share of slot %u's lock from the gateway's processes: %s", a.slot,
		  lock == -ENOENT ? "no child of the gateway holds it" : strerror(-lock));
	kill(a.srv.pid, SIGKILL);
	waitpid(a.srv.pid, NULL, 0);
	a.srv.pid = -1;
	for (int i = 0; i < nk; i++)
		kill(kids[i], SIGKILL); /* the spawner, had it not died with the gateway */
	/* The jail's init notices its owner gone and ends the jail. */
	double end = dg_test_now() + 20;
	char what[2048] = "";
	while (dg_test_now() < end) {
		bool live = false;
		char v[64];
		for (int i = 0; i < nk; i++)
			live |= dg_test_proc_status(kids[i], "State", v, sizeof(v)) == 0 && v[0] != 'Z';
		if (!live)
			break;
		usleep(50000);
	}
	cr_assert(jail_group_exists(a.instance, a.slot), "the dead jail's group outlives it");
	struct dg_run r;
	cr_assert_eq(dg_test_exec(NULL, (const char *const[]){"/bin/true", NULL}, &r), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	dg_run_free(&r);
	cr_assert(jail_group_exists(a.instance, a.slot), "a start removed a held slot's group");
	close(lock);
	cr_assert_eq(dg_test_exec(NULL, (const char *const[]){"/bin/true", NULL}, &r), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	dg_run_free(&r);
	end = dg_test_now() + 20;
	while (jail_group_exists(a.instance, a.slot) && dg_test_now() < end)
		usleep(50000);
	cr_assert(!jail_group_exists(a.instance, a.slot),
		  "another instance's start did not remove the dead instance's jail group");
	cr_assert(jail_group_exists(b.instance, b.slot), "a live instance's jail was removed");
	gw_act(&b);
	cr_assert_eq(dg_test_serve_stop(&b.srv, 30, false), 0);
	dg_test_serve_stop(&a.srv, 1, false); /* only its temp dir now */
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "%s", what);
}

/* The real uid of pid's /proc status line name ("Uid" or "Gid"). */
static unsigned status_id(pid_t pid, const char *name)
{
	char v[128];
	unsigned r = 0;
	cr_assert_eq(dg_test_proc_status(pid, name, v, sizeof(v)), 0, "%s of %d", name, (int)pid);
	cr_assert_eq(sscanf(v, "%u", &r), 1, "%s: %s", name, v);
	return r;
}

/* In a child that has become uid: the errno of opening dir, 0 when it
 * opened. */
static int open_as(uid_t uid, const char *dir)
{
	pid_t p = fork();
	cr_assert(p >= 0);
	if (p == 0) {
		if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
		    setresuid(uid, uid, uid) != 0)
			_exit(100);
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		_exit(fd >= 0 ? 0 : errno);
	}
	int st;
	cr_assert_eq(waitpid(p, &st, 0), p);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 100, "the child could not become %u",
		  (unsigned)uid);
	return WEXITSTATUS(st);
}

/* Each instance runs its gateway and its egress proxy on uids of its own
 * (its name's pair), so one gateway cannot read another's recordings; a
 * second instance whose name hashes to a running one's pair is refused. */
Test(instances, each_instance_has_uids_of_its_own, .timeout = 300)
{
	static struct gw a, b; /* static: the suite's fini stops them after a failure */
	gw_start(&a, "uid-a");
	gw_start(&b, "uid-b");
	uid_t ua = dg_instance_uid_of(a.instance), ub = dg_instance_uid_of(b.instance);
	cr_assert_neq(ua, ub, "the test's two names hash to one pair: rename one");
	cr_assert_eq(status_id(a.srv.pid, "Uid"), ua, "a's gateway runs as its instance's uid");
	cr_assert_eq(status_id(a.srv.pid, "Gid"), ua);
	cr_assert_eq(status_id(b.srv.pid, "Uid"), ub, "b's gateway runs as its instance's uid");
	cr_assert(dg_test_find_descendant(a.srv.pid, "deskgate-egress", ua + 1) > 0,
		  "a's egress proxy runs as a's egress uid %u", ua + 1);
	cr_assert(dg_test_find_descendant(b.srv.pid, "deskgate-egress", ub + 1) > 0,
		  "b's egress proxy runs as b's egress uid %u", ub + 1);
	gw_session(&a);
	char rec[160];
	snprintf(rec, sizeof(rec), "%s/rec/%s", a.srv.dir, a.session);
	cr_assert_eq(open_as(ua, rec), 0, "a's gateway uid reads a's recording %s", rec);
	cr_assert_eq(open_as(ub, rec), EACCES, "b's gateway uid must not read a's recording %s",
		     rec);

	/* A name of another instance on a's pair. */
	char clash[48] = "";
	for (int i = 0; i < 10 * (int)DG_INSTANCE_IDS && !clash[0]; i++) {
		char name[48]; /* at most 20 + 2 + 7 bytes: a valid instance */
		snprintf(name, sizeof(name), "%.20s-c%d", dg_test_instance(), i);
		if (dg_instance_uid_of(name) == ua)
			snprintf(clash, sizeof(clash), "%s", name);
	}
	cr_assert(clash[0], "no name found on a's pair");
	/* Registered, so that the suite's fini stops it should it start. */
	static struct gw cg;
	struct dg_server *cp = &cg.srv;
	cp->pid = -1;
	if (n_started < 4)
		started[n_started++] = &cg;
	char extra[128], err[4096];
	snprintf(extra, sizeof(extra), "\"instance\": \"%s\"", clash);
	cr_assert_neq(dg_test_serve_start(cp, extra, 30, err, sizeof(err)), 0,
		      "instance %s started on the uids instance %s holds", clash, a.instance);
	char want[160];
	snprintf(want, sizeof(want), "are held by instance %s", a.instance);
	cr_assert(strstr(err, want), "the refusal names the holder (%s): %s", want, err);
	dg_test_serve_stop(cp, 1, false);
	/* The holder gone, the pair is free for the other name. */
	cr_assert_eq(dg_test_serve_stop(&a.srv, 30, false), 0);
	cr_assert_eq(dg_test_serve_start(cp, extra, 30, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(status_id(cp->pid, "Uid"), ua);
	cr_assert_eq(dg_test_serve_stop(cp, 30, false), 0);
	cr_assert_eq(dg_test_serve_stop(&b.srv, 30, false), 0);
	char what[2048];
	cr_assert_eq(dg_test_leftovers(what, sizeof(what)), 0, "%s", what);
}

/* A gateway upgraded in place: what the one uid every gateway shared
 * before (0x5fffffff) owns in its recordings is given to the instance's
 * uid at start, symlinks included but never followed. */
Test(instances, the_former_shared_uid_gives_way, .timeout = 300)
{
	static struct gw a; /* static: the suite's fini stops it after a failure */
	gw_start(&a, "legacy");
	uid_t ua = dg_instance_uid_of(a.instance), old = DG_INSTANCE_LEGACY_GATEWAY_UID;
	cr_assert_eq(dg_test_serve_stop(&a.srv, 30, true), 0);
	char rec[160], dir[224], frames[256], png[288], link[288], bait[160];
	snprintf(rec, sizeof(rec), "%s/rec", a.srv.dir);
	snprintf(dir, sizeof(dir), "%s/old-1", rec);
	snprintf(frames, sizeof(frames), "%s/frames", dir);
	snprintf(png, sizeof(png), "%s/1.png", frames);
	snprintf(link, sizeof(link), "%s/bait", dir);
	snprintf(bait, sizeof(bait), "%s/root-file", a.srv.dir);
	cr_assert_eq(mkdir(dir, 0750), 0);
	cr_assert_eq(mkdir(frames, 0750), 0);
	FILE *f = fopen(png, "w");
	cr_assert(f);
	fclose(f);
	f = fopen(bait, "w");
	cr_assert(f);
	fclose(f);
	cr_assert_eq(symlink(bait, link), 0);
	const char *mine[] = {rec, dir, frames, png};
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(lchown(mine[i], old, old), 0, "%s", mine[i]);
	cr_assert_eq(lchown(link, old, old), 0);
	char extra[128], err[4096];
	snprintf(extra, sizeof(extra), "\"instance\": \"%s\"", a.instance);
	cr_assert_eq(dg_test_serve_restart(&a.srv, extra, 30, err, sizeof(err)), 0, "%s", err);
	struct stat st;
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(lstat(mine[i], &st), 0, "%s", mine[i]);
		cr_assert_eq(st.st_uid, ua, "%s is the instance's now (uid %u)", mine[i],
			     (unsigned)st.st_uid);
	}
	cr_assert_eq(lstat(link, &st), 0);
	cr_assert_eq(st.st_uid, ua, "the symlink itself is the instance's");
	cr_assert_eq(stat(bait, &st), 0);
	cr_assert_eq(st.st_uid, 0, "the symlink's target was followed: uid %u",
		     (unsigned)st.st_uid);
	char *log = dg_test_serve_log(&a.srv);
	cr_assert(strstr(log, "entries of the former gateway uid"), "the start says so:\n%s", log);
	free(log);
	cr_assert_eq(dg_test_serve_stop(&a.srv, 30, false), 0);
}
