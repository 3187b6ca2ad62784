/* The upload check: a file_upload may hand the browser only a file of the
 * session's scratch space, looked at in the desktop's view of the jail
 * without following any symbolic link (desktop/spawner/upload.c).
 *
 * A real spawner (forked by this test, as `deskgate serve` forks it), a
 * real browser desktop in a real jail, files and links made by exec in
 * that jail (which does not see the browser's profile, but can point a
 * link at it), and the spawner's verdicts on their paths. Everything the
 * test starts is of its own instance: the leftovers counted at the end are
 * its own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "desktop/spawner/spawner.h"
#include "dg_test.h"

#define SESSION "upload-1"
#define CREATE_MS 90000
#define ANSWER_MS 30000

static struct dg_spawner sp = {.pid = -1, .fd = -1};
static struct dg_worker w = {.pid = -1, .pidfd = -1, .ctl = -1};
static int egress_fd = -1;

static void fini(void)
{
	dg_worker_stop(&w); /* its channel: the worker itself is the spawner's */
	if (egress_fd >= 0)
		close(egress_fd);
	egress_fd = -1;
	if (sp.fd >= 0 || sp.pid > 0)
		dg_spawner_stop(&sp);
}

TestSuite(upload_check, .fini = fini);

static struct dg_limits limits(void)
{
	return (struct dg_limits){
		.memory_mb = DG_LIMIT_DEFAULT_MEMORY_MB,
		.pids = DG_LIMIT_DEFAULT_PIDS,
		.cpus = DG_LIMIT_DEFAULT_CPUS,
		.exec_seconds = DG_LIMIT_DEFAULT_EXEC_SECONDS,
		.session_seconds = DG_LIMIT_DEFAULT_SESSION_SECONDS,
		.output_bytes = DG_LIMIT_DEFAULT_OUTPUT_BYTES,
		.scratch_mb = DG_LIMIT_DEFAULT_SCRATCH_MB,
	};
}

/* The spawner's answer to request req (bounded); fds closed unless kept. */
static void wait_reply(int req, struct dg_spawn_msg *m, int *fds, int *nfds, int timeout_ms)
{
	long long deadline = dg_now_ms() + timeout_ms;
	for (;;) {
		struct dg_err err = {{0}};
		int r = dg_spawner_recv(&sp, m, fds, nfds, &err);
		cr_assert_geq(r, 0, "the spawner: %s", err.msg);
		if (r == 1) {
			cr_assert_neq(m->type, DG_SPAWN_ENDED, "the session ended: %s", m->u.text);
			if ((int)m->req == req)
				return;
			for (int i = 0; i < *nfds; i++)
				close(fds[i]);
			continue;
		}
		long long left = deadline - dg_now_ms();
		cr_assert_gt(left, 0, "no answer to request %d within %d ms", req, timeout_ms);
		struct pollfd p = {sp.fd, POLLIN, 0};
		poll(&p, 1, (int)left);
	}
}

/* Starts the spawner and a browser desktop in it, ready. */
static void start(void)
{
	struct dg_err err = {{0}};
	dg_worker_set_binary(DG_BIN);
	cr_assert_eq(dg_spawner_start(&sp, false, &err), 0, "%s", err.msg);
	fcntl(sp.fd, F_SETFL, O_NONBLOCK);
	struct dg_limits lim = limits();
	int req = dg_spawner_create(&sp, SESSION, DG_PROFILE_BROWSER, DG_DESKTOP_WIDTH_DEFAULT,
				    DG_DESKTOP_HEIGHT_DEFAULT, &lim, false, &err);
	cr_assert_gt(req, 0, "%s", err.msg);
	struct dg_spawn_msg m;
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	wait_reply(req, &m, fds, &nfds, CREATE_MS);
	cr_assert_eq(m.type, DG_SPAWN_CREATED, "create: %s", m.type == DG_SPAWN_ERROR ? m.u.text : "?");
	cr_assert_eq(nfds, 3);
	egress_fd = fds[1];
	close(fds[2]); /* the live view's channel: not used here */
	w.ctl = fds[0];
	fcntl(w.ctl, F_SETFL, O_NONBLOCK);
	w.rd = calloc(1, sizeof(*w.rd));
	cr_assert(w.rd);
	cr_assert_eq(dg_worker_wait_ready(&w, DG_WORKER_READY_MS, &err), 0, "ready: %s", err.msg);
}

/* Runs sh -c script in the session's jail by exec; asserts it exited 0. */
static void exec_sh(const char *script)
{
	struct dg_err err = {{0}};
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	int req = dg_spawner_exec(&sp, SESSION, argv, 3, NULL, 0, 20000, &err);
	cr_assert_gt(req, 0, "%s", err.msg);
	struct dg_spawn_msg m;
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	wait_reply(req, &m, fds, &nfds, ANSWER_MS);
	cr_assert_eq(m.type, DG_SPAWN_CHANNEL, "exec: %s", m.type == DG_SPAWN_ERROR ? m.u.text : "?");
	static uint8_t buf[1 << 20];
	size_t len = 0;
	ssize_t k;
	while ((k = read(fds[0], buf + len, sizeof(buf) - len)) > 0)
		len += (size_t)k;
	close(fds[0]);
	struct dg_exec_result r;
	cr_assert_eq(dg_exec_result_decode(buf, len, &r, &err), 0, "%s", err.msg);
	cr_assert(r.ok && r.exit_code == 0, "exec %s: exit %d: %s %.*s", script, (int)r.exit_code,
		  r.error, (int)r.errout_len, r.errout);
}

/* Checks paths (n of them) in the session's desktop: the answer. */
static void check(const char *const *paths, size_t n, struct dg_upload_check *out)
{
	struct dg_err err = {{0}};
	int req = dg_spawner_upload_check(&sp, SESSION, paths, n, &err);
	cr_assert_gt(req, 0, "%s", err.msg);
	struct dg_spawn_msg m;
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	wait_reply(req, &m, fds, &nfds, ANSWER_MS);
	cr_assert_eq(m.type, DG_SPAWN_UPLOAD_CHECKED, "upload check: %s",
		     m.type == DG_SPAWN_ERROR ? m.u.text : "another reply");
	cr_assert_eq(nfds, 0);
	cr_assert_str_eq(m.session, SESSION);
	cr_assert_eq(m.u.upload_checked.n, n);
	*out = m.u.upload_checked;
	for (size_t i = 0; i < n; i++) {
		char why[DG_ERR_MAX];
		dg_upload_reason(&out->files[i], paths[i], why, sizeof(why));
		cr_log_info("%s: %s", paths[i], why);
	}
}

/* files[i] has verdict v, at prefix "at" of its path (NULL: at 0). */
static void expect(const struct dg_upload_check *c, const char *const *paths, size_t i,
		   enum dg_upload_verdict v, const char *at)
{
	const struct dg_upload_file *f = &c->files[i];
	char why[DG_ERR_MAX];
	dg_upload_reason(f, paths[i], why, sizeof(why));
	cr_assert_eq(f->verdict, v, "%s: verdict %u, not %u (%s)", paths[i], (unsigned)f->verdict,
		     (unsigned)v, why);
	size_t want = at ? strlen(at) : 0;
	cr_assert_eq(f->at, want, "%s: at %u, not %zu (%s)", paths[i], (unsigned)f->at, want, why);
	if (at)
		cr_assert_eq(strncmp(paths[i], at, want), 0);
}

/* The jail's init (the spawner's child named deskgate-init): the desktop's
 * view of the jail is /proc/PID/root. */
static pid_t jail_init(void)
{
	pid_t kids[64];
	int n = dg_test_children(sp.pid, kids, 64);
	for (int i = 0; i < n; i++) {
		char path[64], comm[64] = "";
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)kids[i]);
		FILE *f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && strncmp(comm, DG_JAIL_INIT_NAME, 13) == 0) {
			fclose(f);
			return kids[i];
		}
		if (f)
			fclose(f);
	}
	return -1;
}

#define LOCAL_STATE DG_DESKTOP_BROWSER_DIR "/Local State"

Test(upload_check, in_the_desktops_view_following_no_link, .timeout = 300)
{
	start();
	/* The browser's file the links point at exists in the desktop's view
	 * (a check that followed links would find a regular file of the
	 * scratch tmpfs there). */
	pid_t init = jail_init();
	cr_assert_gt(init, 0, "no jail init under the spawner");
	char target[128];
	snprintf(target, sizeof(target), "/proc/%d/root%s", (int)init, LOCAL_STATE);
	struct stat st;
	bool there = false;
	for (int i = 0; i < 300 && !(there = stat(target, &st) == 0 && S_ISREG(st.st_mode)); i++)
		usleep(100000);
	cr_assert(there, "Chromium wrote no %s within 30 s", LOCAL_STATE);

	/* What exec makes, in its own view (the profile hidden from it). */
	exec_sh("set -e\n"
		"printf hello > /tmp/a.txt\n"
		"head -c 3000 /dev/zero > /home/user/b.bin\n"
		"printf shm > /dev/shm/c.txt\n"
		"test ! -e '" LOCAL_STATE "'\n" /* exec does not see it */
		"ln -s '" LOCAL_STATE "' /tmp/x\n"
		"mkdir /tmp/d && printf f > /tmp/d/f && ln -s /tmp/d /tmp/dl\n"
		"mkfifo /tmp/fifo\n"
		"truncate -s 67108864 /tmp/edge\n"
		"truncate -s 67108865 /tmp/big\n"
		"printf s > /tmp/secret && chmod 000 /tmp/secret\n"
		"mkdir /tmp/locked && printf l > /tmp/locked/f && chmod 000 /tmp/locked\n"
		"mkdir /tmp/org.chromium.fake && printf o > /tmp/org.chromium.fake/f\n"
		"printf m > /dev/shm/.org.chromium.Chromium.fake\n");

	const char *const a[] = {
		"/tmp/a.txt",       /* 0 */
		"/home/user/b.bin", /* 1 */
		"/dev/shm/c.txt",   /* 2 */
		"/etc/passwd",      /* 3 */
		"/tmp/x",           /* 4: -> the profile's Local State */
		"/tmp/dl/f",        /* 5: a linked directory */
		LOCAL_STATE,        /* 6 */
		"/tmp/d",           /* 7 */
		"/tmp/nope",        /* 8 */
		"/tmp/fifo",        /* 9 */
		"/tmp/nodir/f",     /* 10 */
		"/var/tmp/a.txt",   /* 11: /var/tmp -> ../tmp */
		"/tmp/a.txt/x",     /* 12 */
		"/dev/null",        /* 13 */
		"/tmp/d/f",         /* 14 */
		"/tmp/.X11-unix/X0", /* 15 */
	};
	struct dg_upload_check c;
	check(a, 16, &c);
	expect(&c, a, 0, DG_UPLOAD_OK, NULL);
	cr_assert_eq(c.files[0].size, 5);
	expect(&c, a, 1, DG_UPLOAD_OK, NULL);
	cr_assert_eq(c.files[1].size, 3000);
	expect(&c, a, 2, DG_UPLOAD_OK, NULL);
	cr_assert_eq(c.files[2].size, 3);
	expect(&c, a, 3, DG_UPLOAD_OUTSIDE_SCRATCH, NULL);
	expect(&c, a, 4, DG_UPLOAD_SYMLINK, "/tmp/x");
	expect(&c, a, 5, DG_UPLOAD_SYMLINK, "/tmp/dl");
	expect(&c, a, 6, DG_UPLOAD_BROWSER_FILES, DG_DESKTOP_BROWSER_DIR);
	expect(&c, a, 7, DG_UPLOAD_NOT_REGULAR, NULL);
	cr_assert_eq(c.files[7].detail, S_IFDIR);
	expect(&c, a, 8, DG_UPLOAD_MISSING, "/tmp/nope");
	expect(&c, a, 9, DG_UPLOAD_NOT_REGULAR, NULL);
	cr_assert_eq(c.files[9].detail, S_IFIFO);
	expect(&c, a, 10, DG_UPLOAD_MISSING, "/tmp/nodir");
	expect(&c, a, 11, DG_UPLOAD_SYMLINK, "/var/tmp");
	expect(&c, a, 12, DG_UPLOAD_ERROR, "/tmp/a.txt");
	cr_assert_eq(c.files[12].detail, ENOTDIR);
	expect(&c, a, 13, DG_UPLOAD_OUTSIDE_SCRATCH, NULL);
	expect(&c, a, 14, DG_UPLOAD_OK, NULL);
	expect(&c, a, 15, DG_UPLOAD_BROWSER_FILES, DG_DESKTOP_X11_DIR);

	/* The size bound, at it and past it; the jail user's permissions. */
	const char *const b[] = {
		"/tmp/edge", "/tmp/big", "/tmp/secret", "/tmp/locked/f",
		"/tmp/org.chromium.fake/f", "/dev/shm/.org.chromium.Chromium.fake",
		DG_DESKTOP_BROWSER_CACHE_DIR "/x",
	};
	check(b, 7, &c);
	expect(&c, b, 0, DG_UPLOAD_OK, NULL);
	cr_assert_eq(c.files[0].size, DG_UPLOAD_FILE_MAX);
	expect(&c, b, 1, DG_UPLOAD_TOO_LARGE, NULL);
	cr_assert_eq(c.files[1].size, DG_UPLOAD_FILE_MAX + 1);
	expect(&c, b, 2, DG_UPLOAD_UNREADABLE, NULL);
	expect(&c, b, 3, DG_UPLOAD_UNREADABLE, "/tmp/locked");
	expect(&c, b, 4, DG_UPLOAD_BROWSER_FILES, "/tmp/org.chromium.fake");
	expect(&c, b, 5, DG_UPLOAD_BROWSER_FILES, "/dev/shm/.org.chromium.Chromium.fake");
	expect(&c, b, 6, DG_UPLOAD_BROWSER_FILES, DG_DESKTOP_BROWSER_CACHE_DIR);

	/* A reason names what refused it. */
	char why[DG_ERR_MAX];
	check(a + 4, 1, &c);
	dg_upload_reason(&c.files[0], a[4], why, sizeof(why));
	cr_assert(strstr(why, "a symbolic link at /tmp/x"), "%s", why);

	/* A path of DG_UPLOAD_PATH_MAX bytes is asked (and missing); one byte
	 * more, or one path too many, is refused by the stub. */
	static char longest[DG_UPLOAD_PATH_MAX + 2];
	memset(longest, 'a', DG_UPLOAD_PATH_MAX + 1);
	for (size_t i = 0; i < DG_UPLOAD_PATH_MAX; i += 200)
		longest[i] = '/';
	longest[DG_UPLOAD_PATH_MAX] = '\0';
	const char *const l[] = {longest};
	check(l, 1, &c);
	char first[201];
	memcpy(first, longest, 200); /* the first component, "/" and 199 bytes */
	first[200] = '\0';
	expect(&c, l, 0, DG_UPLOAD_MISSING, first);
	longest[DG_UPLOAD_PATH_MAX] = 'a';
	struct dg_err err = {{0}};
	cr_assert_eq(dg_spawner_upload_check(&sp, SESSION, l, 1, &err), -EINVAL, "1025 bytes");
	const char *many[DG_UPLOAD_PATHS_MAX + 1];
	for (int i = 0; i <= DG_UPLOAD_PATHS_MAX; i++)
		many[i] = "/tmp/a.txt";
	cr_assert_eq(dg_spawner_upload_check(&sp, SESSION, many, DG_UPLOAD_PATHS_MAX + 1, &err),
		     -EINVAL, "17 paths");
	check(many, DG_UPLOAD_PATHS_MAX, &c);
	for (int i = 0; i < DG_UPLOAD_PATHS_MAX; i++)
		expect(&c, many, (size_t)i, DG_UPLOAD_OK, NULL);
	const char *const odd[] = {"tmp/a.txt", "/tmp/../etc/passwd", "/tmp/./a.txt", "/tmp/",
				   "/tmp//a.txt", "/tmp/a\nb", ""};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		cr_assert_eq(dg_spawner_upload_check(&sp, SESSION, odd + i, 1, &err), -EINVAL,
			     "%s", odd[i]);

	/* Another session's name: an error, not a verdict. */
	int req = dg_spawner_upload_check(&sp, "nobody", a, 1, &err);
	cr_assert_gt(req, 0, "%s", err.msg);
	struct dg_spawn_msg m;
	int fds[DG_SEQ_FDS_MAX], nfds = 0;
	wait_reply(req, &m, fds, &nfds, ANSWER_MS);
	cr_assert_eq(m.type, DG_SPAWN_ERROR);
	cr_assert_str_eq(m.u.text, "upload check: no such session");

	/* The session ends; nothing of this run is left behind. */
	req = dg_spawner_destroy(&sp, SESSION, &err);
	cr_assert_gt(req, 0, "%s", err.msg);
	wait_reply(req, &m, fds, &nfds, ANSWER_MS);
	cr_assert_eq(m.type, DG_SPAWN_OK, "destroy: %s", m.type == DG_SPAWN_ERROR ? m.u.text : "?");
	fini();
	char what[4096];
	int n = 0;
	for (int i = 0; i < 200 && (n = dg_test_leftovers(what, sizeof(what))) != 0; i++)
		usleep(10000);
	cr_assert_eq(n, 0, "left behind: %s", what);
}
