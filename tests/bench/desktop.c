/* bench desktop: what a deskgate desktop costs in time and memory, each figure
 * against a baseline measured in the same run (issue 3's benchmarks; its rows
 * feed issue 8's table).
 *
 *  1. Cold start to first frame, per profile: dg_desktop_start() to the
 *     worker's READY (the profile's window is on screen), and to the first
 *     screenshot received. Baseline: Xvnc started by hand under
 *     `unshare --user --map-root-user --mount --pid --net --ipc --uts --fork`
 *     until its RFB greeting can be read from its -rfbunixpath socket: the
 *     bare X server.
 *  2. Click to settled screenshot on a static page (browser profile), from
 *     sending the action to the PNG received. Baseline: Xvfb of the same
 *     size with Chromium on the same page, `xdotool mousemove X Y click 1`
 *     then `scrot -p FILE`, each a subprocess, as the popular Docker demos
 *     do. Also: a screenshot alone, against `scrot -p` alone.
 *  3. PNG encode of 1280x800 frames of real desktop content
 *     (tests/data/frames) by dg_png_encode, the worker's encoder, each encode
 *     a whole changed screen; against libpng's defaults (level 6, adaptive).
 *     Also a re-encode after a pointer-sized change (what it reuses).
 *  4. PSS per idle desktop, per profile: every process of the jail (host uid
 *     DG_JAIL_ID_BASE + slot) and its worker (DG_WORKER_ID_BASE + slot).
 *     Baselines: the bare Xvnc of row 1, and the Xvfb + Chromium of row 2.
 *
 * Shared VMs drift in speed by 1.5x within minutes, so the runs of a figure
 * and of its baseline are interleaved, never run as two blocks.
 *
 * Runs as root (jails, cgroups). Needs Xvnc, xterm, matchbox-window-manager,
 * chromium, Xvfb, xdotool, scrot and unshare. Children never see a shell:
 * fork + execve with argv arrays.
 *
 * Environment: DG_BENCH_N (xterm starts, default 10; browser starts N/2,
 * clicks 4N, encodes 2N+1 per frame); DG_BENCH_JSON=FILE also writes the
 * table as JSON; DG_BENCH_VERBOSE=1 keeps the children's stderr;
 * DG_BENCH_DUMP=DIR saves the first screenshot of every cold start there;
 * DG_BENCH_POLICY=FILE gives the desktops that policy (default: built-in);
 * DG_BENCH_ONLY=cold_xterm runs only row 1's xterm starts;
 * DG_BENCH_ROWS=4 (or 1,3 ...) runs only those rows; DG_BENCH_IDLE_MS: how
 * long row 4's desktops idle before their PSS is read (default 2000).
 * Exit status: 0 when everything ran, whether targets were met or not; 2,
 * with the reason on stderr, when something could not run. Every process,
 * temp dir and X display it started is removed on every path.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <libgen.h>
#include <linux/close_range.h>
#include <png.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame-priv.h"
#include "cgroup-priv.h"
#include "desktop/spawner/spawner.h"
#include "policy/policy.h"
#include "desktop/worker/worker.h"

#define W 1280
#define H 800
#define ACT_TIMEOUT_MS 30000
#define START_TIMEOUT_MS 15000

#define UNSHARE "/usr/bin/unshare"
#define XVNC "/usr/bin/Xvnc"
#define XVFB "/usr/bin/Xvfb"
#define XDOTOOL "/usr/bin/xdotool"
#define SCROT "/usr/bin/scrot"
#define CHROMIUM "/usr/lib/chromium/chromium"

/* Targets (issue 3). */
#define T_XTERM_START_MS 150.0
#define T_BROWSER_START_MS 1000.0
#define T_CLICK_MS 30.0
#define T_CLICK_SPEEDUP 5.0
#define T_PNG_MS 10.0
#define T_XTERM_PSS_MIB 40.0

/* The static page of rows 1 (browser) and 2: a flat colour that is easy to
 * find in a screenshot, a little text at the top left, nothing that moves. */
#define PAGE_R 0x3a
#define PAGE_G 0x7c
#define PAGE_B 0xa5
static const char page_url[] =
	"data:text/html,<!doctype html><html><head><title>bench</title><style>"
	"html,body{margin:0;height:100%;background:%233a7ca5;color:white;font:16px sans-serif}"
	"</style></head><body><h1>deskgate bench</h1><p>A static page.</p></body></html>";
/* Blank spots of the page (below the browser's toolbar in both setups);
 * clicks alternate between them so the pointer, drawn into the screenshot,
 * changes the frame each time and every frame is encoded anew. */
static const int click_pts[2][2] = {{900, 500}, {1000, 600}};

static bool verbose;
/* The desktops' policy: built-in defaults, or DG_BENCH_POLICY's file. */
static struct dg_policy bench_policy;

/* ---- time and statistics ------------------------------------------------- */

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void sleep_ms(double ms)
{
	time_t sec = (time_t)(ms / 1000);
	struct timespec ts = {sec, (long)((ms - (double)sec * 1000) * 1e6)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of v (n values), on a sorted copy. */
static double pct(const double *v, int n, double p)
{
	if (n <= 0)
		return -1;
	double *c = malloc((size_t)n * sizeof(*c));
	if (!c)
		return -1;
	memcpy(c, v, (size_t)n * sizeof(*c));
	qsort(c, (size_t)n, sizeof(*c), cmp_double);
	double r;
	if (p == 0.5 && n % 2 == 0)
		r = (c[n / 2 - 1] + c[n / 2]) / 2;
	else
		r = c[(int)(p * (n - 1) + 0.5)];
	free(c);
	return r;
}

static double med(const double *v, int n)
{
	return pct(v, n, 0.5);
}

/* ---- clean-up registry ---------------------------------------------------- */

struct desk {
	struct dg_policy policy;
	struct dg_desktop d;
	struct dg_worker w;
	bool desktop_up, worker_up;
};

enum bg_kind { BG_XVNC_UNSHARE, BG_XVFB, BG_CHROMIUM };

/* A baseline process started by the bench (its own process group). */
struct bg {
	enum bg_kind kind;
	pid_t pid;        /* what we forked: unshare, Xvfb or Chromium */
	int display;      /* X servers: the display they hold; else -1 */
};

#define MAX_LIVE 16
static struct desk *live_desks[MAX_LIVE];
static struct bg *live_bg[MAX_LIVE];
static char *live_dirs[MAX_LIVE];

static void reg(void **arr, void *p)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (!arr[i]) {
			arr[i] = p;
			return;
		}
}

static void unreg(void **arr, void *p)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (arr[i] == p)
			arr[i] = NULL;
}

static void desk_end(struct desk *k);
static void bg_stop(struct bg *b);
static void dir_remove(char *dir);

static void cleanup_all(void)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_desks[i])
			desk_end(live_desks[i]);
	/* Browsers before the X servers they draw on. */
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_bg[i] && live_bg[i]->kind == BG_CHROMIUM)
			bg_stop(live_bg[i]);
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_bg[i])
			bg_stop(live_bg[i]);
	for (int i = 0; i < MAX_LIVE; i++)
		if (live_dirs[i])
			dir_remove(live_dirs[i]);
}

__attribute__((noreturn, format(printf, 1, 2))) static void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "bench desktop: could not run: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	cleanup_all();
	exit(2);
}

/* Not async-signal-safe, but the process ends right after: better than
 * leaving X servers and jails behind. */
static void on_signal(int sig)
{
	cleanup_all();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void dir_remove(char *dir)
{
	unreg((void **)live_dirs, dir);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

static char *dir_make(void)
{
	char *d = strdup("/tmp/dg-bench-XXXXXX");
	if (!d || !mkdtemp(d))
		fatal("mkdtemp: %s", strerror(errno));
	reg((void **)live_dirs, d);
	return d;
}

/* ---- subprocesses --------------------------------------------------------- */

/* fork + execve in its own process group, stdin/stdout (and stderr unless
 * verbose) on /dev/null, every descriptor but keep_fd closed; dies with us. */
static pid_t spawn(const char *const argv[], const char *const envp[], int keep_fd)
{
	pid_t pid = fork();
	if (pid < 0)
		fatal("fork: %s", strerror(errno));
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		if (!verbose)
			dup2(null, 2);
		syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC);
		if (keep_fd >= 0)
			fcntl(keep_fd, F_SETFD, 0);
		signal(SIGPIPE, SIG_DFL);
		execve(argv[0], (char *const *)argv, (char *const *)envp);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

/* Waits for pid to exit, at most timeout_ms. Returns its wait status, or
 * -1 on timeout (it is still running). */
static int wait_exit(pid_t pid, int timeout_ms)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int st = 0;
	if (pfd >= 0) {
		struct pollfd p = {pfd, POLLIN, 0};
		int r;
		while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
			;
		close(pfd);
		if (r == 0)
			return -1;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		return st;
	}
	double end = now_ms() + timeout_ms;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid || (r < 0 && errno == ECHILD))
			return st;
		if (now_ms() > end)
			return -1;
		sleep_ms(1);
	}
}

/* Runs a short command to completion (bounded); fatal unless it exits 0. */
static void run_ok(const char *const argv[], const char *const envp[], int timeout_ms)
{
	pid_t pid = spawn(argv, envp, -1);
	int st = wait_exit(pid, timeout_ms);
	if (st == -1) {
		kill(-pid, SIGKILL);
		kill(pid, SIGKILL);
		wait_exit(pid, 5000);
		fatal("%s did not finish within %d ms", argv[0], timeout_ms);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fatal("%s %s failed (wait status 0x%x)", argv[0], argv[1] ? argv[1] : "", st);
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* A display number no X server on the host holds (by lock file or socket).
 * The X server's own lock file settles a race with another starter. */
static int free_display(void)
{
	static int next = 180;
	for (int tries = 0; tries < 2000; tries++) {
		int n = next++;
		if (next > 4000)
			next = 180;
		char lock[64], sock[64];
		snprintf(lock, sizeof(lock), "/tmp/.X%d-lock", n);
		snprintf(sock, sizeof(sock), "/tmp/.X11-unix/X%d", n);
		if (!exists(lock) && !exists(sock))
			return n;
	}
	fatal("no free X display number");
}

/* Removes what a killed X server of ours left (a clean exit removes it). */
static void display_files_remove(int n)
{
	char path[64];
	snprintf(path, sizeof(path), "/tmp/.X%d-lock", n);
	unlink(path);
	snprintf(path, sizeof(path), "/tmp/.X11-unix/X%d", n);
	unlink(path);
}

/* The pid of unshare's forked child (the namespace's init), or -1. */
static pid_t child_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int c = -1;
	if (fscanf(f, "%d", &c) != 1)
		c = -1;
	fclose(f);
	return c;
}

static void bg_stop(struct bg *b)
{
	if (b->pid <= 0)
		return;
	unreg((void **)live_bg, b);
	switch (b->kind) {
	case BG_XVNC_UNSHARE: {
		/* Xvnc is PID 1 of its pid namespace and in its own process group:
		 * SIGTERM it directly (it removes its lock and socket), and unshare
		 * exits with it. unshare --kill-child covers the rest. */
		pid_t x = child_of(b->pid);
		if (x > 0)
			kill(x, SIGTERM);
		if (wait_exit(b->pid, 3000) == -1) {
			if (x > 0)
				kill(x, SIGKILL);
			kill(b->pid, SIGKILL);
			wait_exit(b->pid, 5000);
			display_files_remove(b->display);
		}
		break;
	}
	case BG_XVFB:
		kill(b->pid, SIGTERM);
		if (wait_exit(b->pid, 3000) == -1) {
			kill(-b->pid, SIGKILL);
			wait_exit(b->pid, 5000);
			display_files_remove(b->display);
		}
		break;
	case BG_CHROMIUM:
		/* Its helpers (zygote, renderers, GPU and utility processes) share
		 * its process group. */
		kill(-b->pid, SIGKILL);
		wait_exit(b->pid, 5000);
		break;
	}
	b->pid = -1;
}

/* Reads the -displayfd line: the X server is ready. */
static int read_displayfd(int fd, int timeout_ms)
{
	char buf[32];
	size_t len = 0;
	double end = now_ms() + timeout_ms;
	while (len < sizeof(buf) - 1) {
		int left = (int)(end - now_ms());
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, left) <= 0)
			continue;
		ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			return -EPIPE;
		len += (size_t)n;
		if (memchr(buf, '\n', len))
			return 0;
	}
	return -EPROTO;
}

/* ---- baseline: a bare Xvnc under unshare, until its RFB greeting ---------- */

/* Starts Xvnc by hand in fresh namespaces and returns the ms from fork to
 * the 12-byte RFB version string read from its unix socket. With keep, the
 * server is left running in *b (for row 4); else it is stopped. */
static double xvnc_bare(struct bg *b, bool keep)
{
	char *dir = dir_make();
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *sock = sa.sun_path, dpy[16], dfd_s[16];
	if (snprintf(sock, sizeof(sa.sun_path), "%s/rfb", dir) >= (int)sizeof(sa.sun_path))
		fatal("socket path too long");
	int dfd[2];
	if (pipe2(dfd, O_CLOEXEC))
		fatal("pipe: %s", strerror(errno));
	int display = free_display();
	snprintf(dpy, sizeof(dpy), ":%d", display);
	snprintf(dfd_s, sizeof(dfd_s), "%d", dfd[1]);
	const char *const argv[] = {UNSHARE, "--user", "--map-root-user", "--mount", "--pid", "--net",
				    "--ipc", "--uts", "--fork", "--kill-child", XVNC, dpy,
				    "-displayfd", dfd_s, "-rfbunixpath", sock, "-rfbport", "-1",
				    "-SecurityTypes", "None", "-geometry", "1280x800", "-depth", "24",
				    "-nolisten", "tcp", NULL};
	const char *const envp[] = {"PATH=/usr/bin:/bin", NULL};
	double t0 = now_ms();
	*b = (struct bg){BG_XVNC_UNSHARE, spawn(argv, envp, dfd[1]), display};
	reg((void **)live_bg, b);
	close(dfd[1]);
	int fd = -1;
	double end = t0 + START_TIMEOUT_MS;
	while (fd < 0) {
		if (now_ms() > end)
			fatal("bare Xvnc: no RFB socket after %d ms", START_TIMEOUT_MS);
		int st;
		if (waitpid(b->pid, &st, WNOHANG) == b->pid) {
			b->pid = -1;
			unreg((void **)live_bg, b);
			fatal("bare Xvnc under unshare exited early (status 0x%x; display :%d)", st,
			      display);
		}
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			fatal("socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(fd);
			fd = -1;
			sleep_ms(0.5);
		}
	}
	char greet[12];
	size_t got = 0;
	while (got < sizeof(greet)) {
		int left = (int)(end - now_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			fatal("bare Xvnc: no RFB greeting");
		ssize_t n = read(fd, greet + got, sizeof(greet) - got);
		if (n <= 0)
			fatal("bare Xvnc: connection closed before the greeting");
		got += (size_t)n;
	}
	double t = now_ms() - t0;
	close(fd);
	if (memcmp(greet, "RFB 003.", 8) != 0)
		fatal("bare Xvnc: unexpected greeting \"%.12s\"", greet);
	/* Make sure the server reported readiness too before anyone stops it. */
	read_displayfd(dfd[0], 5000);
	close(dfd[0]);
	if (!keep) {
		bg_stop(b);
		dir_remove(dir);
	}
	return t;
}

/* ---- baseline: Xvfb + Chromium, xdotool + scrot ----------------------------- */

struct xvfb_setup {
	struct bg xvfb, chrome;
	char *dir;
	char display_env[32], home_env[300], shot[300];
	const char *envp[4];
};

static void xvfb_setup_start(struct xvfb_setup *s)
{
	s->dir = dir_make();
	int dfd[2];
	if (pipe2(dfd, O_CLOEXEC))
		fatal("pipe: %s", strerror(errno));
	int display = free_display();
	char dpy[16], dfd_s[16];
	snprintf(dpy, sizeof(dpy), ":%d", display);
	snprintf(dfd_s, sizeof(dfd_s), "%d", dfd[1]);
	const char *const xargv[] = {XVFB, dpy, "-displayfd", dfd_s, "-screen", "0", "1280x800x24",
				     "-nolisten", "tcp", NULL};
	snprintf(s->display_env, sizeof(s->display_env), "DISPLAY=:%d", display);
	snprintf(s->home_env, sizeof(s->home_env), "HOME=%s", s->dir);
	snprintf(s->shot, sizeof(s->shot), "%s/shot.png", s->dir);
	s->envp[0] = "PATH=/usr/bin:/bin";
	s->envp[1] = s->display_env;
	s->envp[2] = s->home_env;
	s->envp[3] = NULL;
	s->xvfb = (struct bg){BG_XVFB, spawn(xargv, s->envp, dfd[1]), display};
	reg((void **)live_bg, &s->xvfb);
	close(dfd[1]);
	int r = read_displayfd(dfd[0], START_TIMEOUT_MS);
	close(dfd[0]);
	if (r)
		fatal("Xvfb %s did not become ready (%s)", dpy, strerror(-r));
	/* Chromium as the demos run it, minus the network: the same page. */
	char udd[320], size[32];
	snprintf(udd, sizeof(udd), "--user-data-dir=%s/chromium", s->dir);
	snprintf(size, sizeof(size), "--window-size=%d,%d", W, H);
	const char *const cargv[] = {CHROMIUM, "--no-sandbox", "--test-type", udd,
				     "--no-first-run", "--no-default-browser-check", "--noerrdialogs",
				     "--disable-gpu", "--ozone-platform=x11", "--window-position=0,0",
				     size, "--password-store=basic", "--disable-background-networking",
				     "--disable-component-update", "--disable-sync",
				     "--proxy-server=http://127.0.0.1:9",
				     "--host-resolver-rules=MAP * ~NOTFOUND", "--log-level=3",
				     page_url, NULL};
	s->chrome = (struct bg){BG_CHROMIUM, spawn(cargv, s->envp, -1), -1};
	reg((void **)live_bg, &s->chrome);
}

static void xvfb_setup_stop(struct xvfb_setup *s)
{
	bg_stop(&s->chrome);
	bg_stop(&s->xvfb);
	if (s->dir)
		dir_remove(s->dir);
	s->dir = NULL;
}

/* One baseline action: xdotool click then scrot, each timed; returns total. */
static double xdo_click_scrot(struct xvfb_setup *s, int x, int y, double *t_xdo, double *t_scrot)
{
	char xs[16], ys[16];
	snprintf(xs, sizeof(xs), "%d", x);
	snprintf(ys, sizeof(ys), "%d", y);
	const char *const xdo[] = {XDOTOOL, "mousemove", xs, ys, "click", "1", NULL};
	const char *const scrot[] = {SCROT, "-p", s->shot, NULL};
	unlink(s->shot); /* scrot never overwrites: it would pick another name */
	double t0 = now_ms();
	run_ok(xdo, s->envp, 20000);
	double t1 = now_ms();
	run_ok(scrot, s->envp, 20000);
	double t2 = now_ms();
	if (!exists(s->shot))
		fatal("scrot wrote no %s", s->shot);
	*t_xdo = t1 - t0;
	*t_scrot = t2 - t1;
	return t2 - t0;
}

static double scrot_only(struct xvfb_setup *s)
{
	const char *const scrot[] = {SCROT, "-p", s->shot, NULL};
	unlink(s->shot);
	double t0 = now_ms();
	run_ok(scrot, s->envp, 20000);
	return now_ms() - t0;
}

/* ---- screenshots ------------------------------------------------------------- */

struct image {
	int w, h;
	unsigned char *rgb;
};

static int decode(const uint8_t *data, size_t len, const char *path, struct image *img)
{
	png_image pi;
	memset(&pi, 0, sizeof(pi));
	pi.version = PNG_IMAGE_VERSION;
	if (!(path ? png_image_begin_read_from_file(&pi, path)
		   : png_image_begin_read_from_memory(&pi, data, len)))
		return -1;
	pi.format = PNG_FORMAT_RGB;
	img->w = (int)pi.width;
	img->h = (int)pi.height;
	img->rgb = malloc(PNG_IMAGE_SIZE(pi));
	if (!img->rgb || !png_image_finish_read(&pi, NULL, img->rgb, 0, NULL)) {
		png_image_free(&pi);
		free(img->rgb);
		img->rgb = NULL;
		return -1;
	}
	return 0;
}

/* Share of the pixels that are the page's colour (within a small margin). */
static double page_share(const struct image *img)
{
	long n = 0, hit = 0;
	for (long i = 0; i < (long)img->w * img->h; i += 3, n++) {
		const unsigned char *p = img->rgb + 3 * i;
		if (abs(p[0] - PAGE_R) <= 8 && abs(p[1] - PAGE_G) <= 8 && abs(p[2] - PAGE_B) <= 8)
			hit++;
	}
	return n ? (double)hit / (double)n : 0;
}

/* Whether a screen shows anything but one flat colour. */
static bool has_content(const struct image *img)
{
	const unsigned char *q = img->rgb;
	for (long i = 0; i < (long)img->w * img->h; i += 5) {
		const unsigned char *p = img->rgb + 3 * i;
		if (p[0] != q[0] || p[1] != q[1] || p[2] != q[2])
			return true;
	}
	return false;
}

static double png_page_share(const uint8_t *png, size_t len, const char *path)
{
	struct image img;
	if (decode(png, len, path, &img))
		return -1;
	double s = page_share(&img);
	free(img.rgb);
	return s;
}

/* ---- deskgate desktops ------------------------------------------------------ */

static void desk_end(struct desk *k)
{
	unreg((void **)live_desks, k);
	if (k->worker_up)
		dg_worker_stop(&k->w);
	if (k->desktop_up)
		dg_desktop_destroy(&k->d);
	k->worker_up = k->desktop_up = false;
}

/* Starts a desktop and its worker up to READY. Returns ms to READY; *launch
 * (if not NULL) gets the ms dg_desktop_start took. */
static double desk_start(struct desk *k, enum dg_profile p, const char *url, double *launch)
{
	struct dg_err err = {{0}};
	memset(k, 0, sizeof(*k));
	k->policy = bench_policy;
	struct dg_desktop_spec spec = {.profile = p, .width = W, .height = H,
				       .limits = &k->policy.limits, .start_url = url,
				       .log_to_stderr = verbose, .cpu_after_start = true};
	reg((void **)live_desks, k);
	double t0 = now_ms();
	if (dg_desktop_start(&spec, &k->d, &err))
		fatal("%s desktop: %s", dg_profile_name(p), err.msg);
	k->desktop_up = true;
	if (launch)
		*launch = now_ms() - t0;
	if (dg_worker_start(&k->d.io, &k->w, &err))
		fatal("%s worker: %s", dg_profile_name(p), err.msg);
	k->worker_up = true;
	if (dg_worker_wait_ready(&k->w, DG_WORKER_READY_MS, &err))
		fatal("%s worker not ready: %s", dg_profile_name(p), err.msg);
	double ready = now_ms() - t0;
	/* What the spawner does once the gateway saw READY: the start ran on
	 * every core, the desktop runs within its policy's cpus. */
	if (dg_desktop_cap_cpu(&k->d, &k->policy.limits, &err))
		fatal("%s desktop: %s", dg_profile_name(p), err.msg);
	return ready;
}

/* One action through the worker; returns its parsed result (caller decrefs)
 * and the PNG when the action shows the screen. */
static json_t *desk_act(struct desk *k, const char *action, uint8_t **png, size_t *len)
{
	struct dg_err err = {{0}};
	char *result = NULL;
	uint8_t *p = NULL;
	size_t n = 0;
	if (dg_worker_act(&k->w, action, 0, 0, ACT_TIMEOUT_MS, &result, &p, &n, NULL, NULL, &err))
		fatal("action %s: %s", action, err.msg);
	json_t *res = json_loads(result, 0, NULL);
	if (!res)
		fatal("action %s: result is not JSON: %s", action, result);
	free(result);
	if (!json_is_true(json_object_get(res, "ok")))
		fatal("action %s failed: %s", action,
		      json_string_value(json_object_get(res, "error")));
	if (png) {
		if (!p)
			fatal("action %s: no screenshot", action);
		*png = p;
		*len = n;
	} else {
		free(p);
	}
	return res;
}

static double jnum(json_t *res, const char *key)
{
	return json_number_value(json_object_get(res, key));
}

/* ---- the table ---------------------------------------------------------------- */

struct row {
	char id[48];
	char label[64];
	const char *unit;
	int n;
	double med, p90;
	char base_label[64];
	int base_n;
	double base_med, base_p90; /* base_n 0: no baseline */
	double target;             /* <= target (median); < 0: none */
	double min_speedup;        /* baseline/measured >= this; 0: none */
	char note[320];
};
/* Lines printed below the table. */
static char after[4096];

__attribute__((format(printf, 1, 2))) static void after_add(const char *fmt, ...)
{
	size_t len = strlen(after);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(after + len, sizeof(after) - len, fmt, ap);
	va_end(ap);
	len = strlen(after);
	if (len + 1 < sizeof(after))
		after[len] = '\n', after[len + 1] = '\0';
}

#define MAX_ROWS 24
static struct row rows[MAX_ROWS];
static int n_rows;

static struct row *row_add(const char *id, const char *label, const char *unit, const double *v,
			   int n)
{
	if (n_rows >= MAX_ROWS)
		fatal("too many rows");
	struct row *r = &rows[n_rows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(r->label, sizeof(r->label), "%s", label);
	r->unit = unit;
	r->n = n;
	r->med = med(v, n);
	r->p90 = pct(v, n, 0.9);
	r->target = -1;
	return r;
}

static void row_base(struct row *r, const char *label, const double *v, int n)
{
	snprintf(r->base_label, sizeof(r->base_label), "%s", label);
	r->base_n = n;
	r->base_med = med(v, n);
	r->base_p90 = pct(v, n, 0.9);
}

/* 1 pass, 0 miss, -1 no target. */
static int row_verdict(const struct row *r)
{
	if (r->target < 0 && r->min_speedup <= 0)
		return -1;
	bool ok = true;
	if (r->target >= 0 && r->med > r->target)
		ok = false;
	if (r->min_speedup > 0 && (r->base_n == 0 || r->base_med / r->med < r->min_speedup))
		ok = false;
	return ok;
}

/* Rows in their issue's order (1..4), keeping the order within a row. */
static void sort_rows(void)
{
	for (int i = 1; i < n_rows; i++)
		for (int j = i; j > 0 && rows[j - 1].label[0] > rows[j].label[0]; j--) {
			struct row t = rows[j];
			rows[j] = rows[j - 1];
			rows[j - 1] = t;
		}
}

static void print_table(void)
{
	sort_rows();
	printf("\n%-40s %3s %9s %9s     | %-32s %9s | %-20s | %-22s | %s\n", "row", "n", "median",
	       "p90", "baseline (same run)", "median", "ratio meas/base", "target", "result");
	for (int i = 0; i < 150; i++)
		putchar('-');
	putchar('\n');
	for (int i = 0; i < n_rows; i++) {
		const struct row *r = &rows[i];
		char base[64] = "-", ratio[64] = "-", target[64] = "-";
		if (r->base_n) {
			snprintf(base, sizeof(base), "%9.1f", r->base_med);
			double q = r->med / r->base_med;
			if (q < 1 && strcmp(r->unit, "ms") == 0)
				snprintf(ratio, sizeof(ratio), "%.2f (%.1fx faster)", q, 1 / q);
			else
				snprintf(ratio, sizeof(ratio), "%.2f", q);
		}
		if (r->target >= 0 && r->min_speedup > 0)
			snprintf(target, sizeof(target), "<= %g %s, >= %gx faster", r->target, r->unit,
				 r->min_speedup);
		else if (r->target >= 0)
			snprintf(target, sizeof(target), "<= %g %s", r->target, r->unit);
		int v = row_verdict(r);
		printf("%-40s %3d %9.1f %9.1f %-3s | %-32s %9s | %-20s | %-22s | %s\n", r->label, r->n,
		       r->med, r->p90, r->unit, r->base_n ? r->base_label : "-", base, ratio, target,
		       v < 0 ? "-" : v ? "PASS" : "MISS");
		if (r->note[0])
			printf("    %s\n", r->note);
	}
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void write_json(const char *path, double elapsed_s, json_t *extra)
{
	FILE *out = fopen(path, "w");
	if (!out)
		fatal("%s: %s", path, strerror(errno));
	fprintf(out, "{\"bench\": \"desktop\", \"elapsed_s\": %.1f, \"rows\": [", elapsed_s);
	for (int i = 0; i < n_rows; i++) {
		const struct row *r = &rows[i];
		fprintf(out, "%s\n {\"id\": ", i ? "," : "");
		json_str(out, r->id);
		fprintf(out, ", \"label\": ");
		json_str(out, r->label);
		fprintf(out, ", \"unit\": \"%s\", \"n\": %d, \"median\": %.3f, \"p90\": %.3f", r->unit,
			r->n, r->med, r->p90);
		if (r->base_n) {
			fprintf(out, ", \"baseline\": {\"label\": ");
			json_str(out, r->base_label);
			fprintf(out, ", \"n\": %d, \"median\": %.3f, \"p90\": %.3f}, \"ratio\": %.4f",
				r->base_n, r->base_med, r->base_p90, r->med / r->base_med);
		} else {
			fprintf(out, ", \"baseline\": null, \"ratio\": null");
		}
		if (r->target >= 0)
			fprintf(out, ", \"target\": %.3f", r->target);
		else
			fprintf(out, ", \"target\": null");
		if (r->min_speedup > 0)
			fprintf(out, ", \"min_speedup\": %.1f", r->min_speedup);
		int v = row_verdict(r);
		fprintf(out, ", \"pass\": %s", v < 0 ? "null" : v ? "true" : "false");
		if (r->note[0]) {
			fprintf(out, ", \"note\": ");
			json_str(out, r->note);
		}
		fprintf(out, "}");
	}
	char *x = json_dumps(extra, JSON_COMPACT | JSON_REAL_PRECISION(6));
	fprintf(out, "\n], \"details\": %s}\n", x ? x : "null");
	free(x);
	if (fclose(out))
		fatal("%s: %s", path, strerror(errno));
}

/* ---- row 3: PNG encode -------------------------------------------------------- */

/* Loads an RGB PNG as a BGRX frame, as Xvnc leaves it (see bench/png.c). */
static uint8_t *load_frame(const char *path, struct dg_frame *f)
{
	struct image img;
	if (decode(NULL, 0, path, &img))
		fatal("cannot read the frame %s", path);
	size_t n = (size_t)img.w * (size_t)img.h;
	uint8_t *buf = calloc(n, 4);
	if (!buf)
		fatal("out of memory");
	for (size_t i = 0; i < n; i++) {
		buf[i * 4] = img.rgb[i * 3 + 2];
		buf[i * 4 + 1] = img.rgb[i * 3 + 1];
		buf[i * 4 + 2] = img.rgb[i * 3];
	}
	free(img.rgb);
	*f = (struct dg_frame){buf, img.w, img.h, (size_t)img.w * 4};
	return buf;
}

/* One timed encode: with o, libpng's encoder at those settings; with NULL,
 * dg_png_encode, the worker's own encoder (whatever caching it does). */
static double encode_ms(const struct dg_frame *f, const struct dg_png_opts *o, struct dg_png *p)
{
	struct dg_err err = {{0}};
	double t0 = now_ms();
	int r = o ? dg_png_encode_opts(f, NULL, f->w, f->h, o, p, &err)
		  : dg_png_encode(f, NULL, f->w, f->h, p, &err);
	if (r)
		fatal("PNG encode: %s", err.msg);
	return now_ms() - t0;
}

/* A copy of f's pixels changed in one pixel of every row (a whole new
 * screen to any encoder that reuses unchanged rows or stripes), or, with
 * block > 0, in a block x block square at the centre (a pointer moving). */
static uint8_t *changed_copy(const struct dg_frame *f, int block, struct dg_frame *out)
{
	size_t bytes = (size_t)f->h * f->stride;
	uint8_t *buf = malloc(bytes);
	if (!buf)
		fatal("out of memory");
	memcpy(buf, f->pixels, bytes);
	if (block > 0) {
		for (int y = f->h / 2; y < f->h / 2 + block && y < f->h; y++)
			for (int x = f->w / 2; x < f->w / 2 + block && x < f->w; x++)
				buf[(size_t)y * f->stride + (size_t)x * 4] ^= 0xff;
	} else {
		for (int y = 0; y < f->h; y++)
			buf[(size_t)y * f->stride + (size_t)(y % f->w) * 4] ^= 1;
	}
	*out = *f;
	out->pixels = buf;
	return buf;
}

static void bench_png(int n, json_t *details)
{
	char here[1024];
	snprintf(here, sizeof(here), "%s", __FILE__);
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/../data/frames", dirname(here));
	static const char *const names[] = {"mixed.png", "page.png", "term.png"};
	static const char *const what[] = {"page + xterm", "web page", "terminal"};
	const struct dg_png_opts base = DG_PNG_OPTS_LIBPNG;
	struct dg_png p = DG_PNG_INIT, pb = DG_PNG_INIT;
	double *a = calloc((size_t)n, sizeof(double)), *b = calloc((size_t)n, sizeof(double));
	json_t *sizes = json_object();
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[1300];
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		struct dg_frame f, f2;
		uint8_t *buf = load_frame(path, &f);
		uint8_t *buf2 = changed_copy(&f, 0, &f2);
		/* Alternating f and f2, every encode is of a changed screen:
		 * what a full repaint costs, whatever the encoder reuses. */
		encode_ms(&f, &base, &pb);
		size_t base_bytes = pb.len;
		encode_ms(&f2, NULL, &p);
		encode_ms(&f, NULL, &p);
		size_t def_bytes = p.len;
		for (int r = 0; r < n; r++) {
			a[r] = encode_ms(r % 2 ? &f : &f2, NULL, &p);
			b[r] = encode_ms(&f, &base, &pb);
		}
		char id[48], label[64];
		snprintf(id, sizeof(id), "png_encode_%.*s", (int)(strlen(names[i]) - 4), names[i]);
		snprintf(label, sizeof(label), "3 PNG encode %dx%d %s", f.w, f.h, what[i]);
		struct row *row = row_add(id, label, "ms", a, n);
		row_base(row, "libpng default (L6, adaptive)", b, n);
		row->target = T_PNG_MS;
		snprintf(row->note, sizeof(row->note),
			 "%s, dg_png_encode of a whole changed screen: %.0f KB (baseline %.0f KB)",
			 names[i], (double)def_bytes / 1024, (double)base_bytes / 1024);
		json_object_set_new(sizes, names[i],
				    json_pack("{s:I, s:I}", "bytes", (json_int_t)def_bytes,
					      "baseline_bytes", (json_int_t)base_bytes));
		if (i == 0) {
			/* The same screen with a pointer-sized change between shots. */
			free(buf2);
			buf2 = changed_copy(&f, 16, &f2);
			encode_ms(&f2, NULL, &p);
			for (int r = 0; r < n; r++) {
				a[r] = encode_ms(r % 2 ? &f : &f2, NULL, &p);
				b[r] = encode_ms(&f, &base, &pb);
			}
			row = row_add("png_reencode_small_change", "3 PNG re-encode, 16x16 px changed",
				      "ms", a, n);
			row_base(row, "libpng default (L6, adaptive)", b, n);
			snprintf(row->note, sizeof(row->note),
				 "%s alternating with a copy changed in a 16x16 square: what "
				 "dg_png_encode reuses between shots of one screen",
				 names[i]);
		}
		free(buf);
		free(buf2);
	}
	json_object_set_new(details, "png_bytes", sizes);
	dg_png_free(&p);
	dg_png_free(&pb);
	free(a);
	free(b);
}

/* ---- row 1: cold start ----------------------------------------------------------- */

static void dump_png(const char *dir, const char *name, int i, const uint8_t *png, size_t len)
{
	if (!dir || !*dir)
		return;
	char path[512];
	snprintf(path, sizeof(path), "%s/%s-%d.png", dir, name, i);
	FILE *f = fopen(path, "we");
	if (f) {
		fwrite(png, 1, len, f);
		fclose(f);
	}
}

static void bench_start(enum dg_profile prof, int n, json_t *details)
{
	const char *name = dg_profile_name(prof);
	const char *url = prof == DG_PROFILE_BROWSER ? page_url : NULL;
	const char *dump = getenv("DG_BENCH_DUMP");
	double *ready = calloc((size_t)n, sizeof(double)), *frame = calloc((size_t)n, sizeof(double));
	double *down = calloc((size_t)n, sizeof(double)), *base = calloc((size_t)n, sizeof(double));
	double *launch = calloc((size_t)n, sizeof(double)), *shots = calloc((size_t)n, sizeof(double));
	double *first = calloc((size_t)n, sizeof(double));
	int first_ok = 0;
	struct bg x;
	for (int i = -1; i < n; i++) { /* run -1 warms caches, unrecorded */
		double t_base = 0;
		if (i % 2 == 0)
			t_base = xvnc_bare(&x, false);
		struct desk k;
		double t_launch;
		double t0 = now_ms();
		double t_ready = desk_start(&k, prof, url, &t_launch);
		/* Then screenshots until one shows the profile's content (the
		 * page's colour; for xterm anything but a flat screen): the first
		 * frame the agent could act on. */
		double t_frame = -1, t_first = 0;
		int n_shots = 0;
		while (t_frame < 0) {
			uint8_t *png = NULL;
			size_t len = 0;
			json_decref(desk_act(&k, "{\"type\":\"screenshot\"}", &png, &len));
			double t = now_ms() - t0;
			struct image img;
			if (decode(png, len, NULL, &img))
				fatal("%s: a screenshot is not a PNG", name);
			bool ok = prof == DG_PROFILE_BROWSER ? page_share(&img) > 0.3 : has_content(&img);
			free(img.rgb);
			if (n_shots++ == 0) {
				t_first = t;
				first_ok += ok && i >= 0;
				dump_png(dump, name, i, png, len);
			}
			free(png);
			if (ok)
				t_frame = t;
			else if (t > START_TIMEOUT_MS)
				fatal("%s desktop: no screenshot showed its content within %d ms", name,
				      START_TIMEOUT_MS);
			else
				sleep_ms(5);
		}
		double t1 = now_ms();
		desk_end(&k);
		double t_down = now_ms() - t1;
		if (i % 2 != 0)
			t_base = xvnc_bare(&x, false);
		if (i < 0)
			continue;
		ready[i] = t_ready;
		frame[i] = t_frame;
		down[i] = t_down;
		base[i] = t_base;
		launch[i] = t_launch;
		shots[i] = n_shots;
		first[i] = t_first;
	}
	char id[48], label[64];
	const char *bl = "Xvnc by hand (unshare) -> RFB";
	double target = prof == DG_PROFILE_BROWSER ? T_BROWSER_START_MS : T_XTERM_START_MS;
	snprintf(id, sizeof(id), "cold_start_%s_ready", name);
	snprintf(label, sizeof(label), "1 %s cold start -> READY", name);
	struct row *r = row_add(id, label, "ms", ready, n);
	row_base(r, bl, base, n);
	/* The browser's READY may come before the page is painted (the next
	 * row says how often): its target is on the next row. */
	if (prof == DG_PROFILE_XTERM)
		r->target = target;
	snprintf(r->note, sizeof(r->note),
		 "dg_desktop_start (jail, Xvnc -displayfd ready, %s spawned) %.1f ms, then worker: "
		 "RFB first frame, %s, window drawn + %d ms quiet: %.1f ms",
		 prof == DG_PROFILE_BROWSER ? "wm + Chromium" : "wm + xterm", med(launch, n),
		 prof == DG_PROFILE_BROWSER ? "DevTools answering" : "no DevTools",
		 prof == DG_PROFILE_BROWSER ? DG_SETTLE_QUIET_MS : DG_WORKER_XTERM_SHOWN_QUIET_MS,
		 med(ready, n) - med(launch, n));
	snprintf(id, sizeof(id), "cold_start_%s_first_frame", name);
	snprintf(label, sizeof(label), "1 %s cold start -> 1st frame %s", name,
		 prof == DG_PROFILE_BROWSER ? "w/ page" : "w/ xterm");
	r = row_add(id, label, "ms", frame, n);
	row_base(r, bl, base, n);
	r->target = target;
	snprintf(r->note, sizeof(r->note),
		 "first screenshot (at %.1f ms) already showed it in %d/%d runs, else polled (median "
		 "%.0f screenshots); teardown median %.1f ms%s",
		 med(first, n), first_ok, n, med(shots, n), med(down, n),
		 prof == DG_PROFILE_BROWSER ? "; field notes: Chromium alone ~0.8 s to first paint" : "");
	json_t *d = json_pack("{s:i, s:i, s:f, s:f, s:f, s:f}", "runs", n,
			      "first_screenshot_shows_content", first_ok, "first_screenshot_ms_median",
			      med(first, n), "desktop_start_ms_median", med(launch, n),
			      "screenshots_polled_median", med(shots, n), "teardown_ms_median",
			      med(down, n));
	json_object_set_new(details, id, d);
	free(ready), free(frame), free(down), free(base), free(launch), free(shots), free(first);
}

/* ---- row 2: click to settled screenshot -------------------------------------------- */

static void bench_click(int n, json_t *details, struct xvfb_setup *xs)
{
	/* The baseline's Chromium paints while the desktop starts. */
	xvfb_setup_start(xs);
	struct desk k;
	desk_start(&k, DG_PROFILE_BROWSER, NULL, NULL);
	json_t *nav = json_pack("{s:s, s:s}", "type", "navigate", "url", page_url);
	char *nav_s = json_dumps(nav, JSON_COMPACT);
	json_decref(nav);
	json_decref(desk_act(&k, nav_s, NULL, NULL));
	free(nav_s);
	/* Both screens must show the page before timing starts. */
	double end = now_ms() + 20000;
	for (;;) {
		uint8_t *png;
		size_t len;
		json_decref(desk_act(&k, "{\"type\":\"screenshot\"}", &png, &len));
		double s = png_page_share(png, len, NULL);
		free(png);
		if (s > 0.3)
			break;
		if (now_ms() > end)
			fatal("the browser desktop never showed the page");
		sleep_ms(100);
	}
	for (;;) {
		scrot_only(xs);
		if (png_page_share(NULL, 0, xs->shot) > 0.3)
			break;
		if (now_ms() > end)
			fatal("Chromium in Xvfb never showed the page");
		sleep_ms(200);
	}
	double *dg = calloc((size_t)n, sizeof(double)), *bl = calloc((size_t)n, sizeof(double));
	double *settle = calloc((size_t)n, sizeof(double)), *enc = calloc((size_t)n, sizeof(double));
	double *wtotal = calloc((size_t)n, sizeof(double)), *rest = calloc((size_t)n, sizeof(double));
	double *txdo = calloc((size_t)n, sizeof(double)), *tscrot = calloc((size_t)n, sizeof(double));
	double *bytes = calloc((size_t)n, sizeof(double)), *sbytes = calloc((size_t)n, sizeof(double));
	const int warm = 3;
	for (int i = -warm; i < n; i++) {
		const int *pt = click_pts[(i + warm) % 2];
		char act[96];
		snprintf(act, sizeof(act), "{\"type\":\"click\",\"x\":%d,\"y\":%d}", pt[0], pt[1]);
		double a = 0, b = 0, x1 = 0, x2 = 0;
		if (i % 2 == 0)
			b = xdo_click_scrot(xs, pt[0], pt[1], &x1, &x2);
		uint8_t *png;
		size_t len;
		double t0 = now_ms();
		json_t *res = desk_act(&k, act, &png, &len);
		a = now_ms() - t0;
		free(png);
		if (i % 2 != 0)
			b = xdo_click_scrot(xs, pt[0], pt[1], &x1, &x2);
		if (i >= 0) {
			struct stat st;
			dg[i] = a;
			bl[i] = b;
			txdo[i] = x1;
			tscrot[i] = x2;
			settle[i] = jnum(res, "settle_ms");
			enc[i] = jnum(res, "encode_ms");
			wtotal[i] = jnum(res, "total_ms");
			rest[i] = a - wtotal[i] - enc[i];
			bytes[i] = (double)len;
			sbytes[i] = stat(xs->shot, &st) == 0 ? (double)st.st_size : 0;
		}
		json_decref(res);
	}
	struct row *r = row_add("click_to_settled_screenshot", "2 click -> settled PNG (browser)", "ms",
				dg, n);
	row_base(r, "Xvfb+Chromium: xdotool + scrot", bl, n);
	r->target = T_CLICK_MS;
	r->min_speedup = T_CLICK_SPEEDUP;
	snprintf(r->note, sizeof(r->note),
		 "worker: settle %.0f ms (injection to settled, of which %d ms quiet period), then "
		 "encode %.1f ms; owner's wait beyond settle+encode %.1f ms; baseline: xdotool %.1f + "
		 "scrot %.1f ms",
		 med(settle, n), DG_SETTLE_QUIET_MS, med(enc, n), med(rest, n),
		 med(txdo, n), med(tscrot, n));
	json_object_set_new(
		details, "click",
		json_pack("{s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:s}", "runs", n,
			  "settle_ms_median", med(settle, n), "settle_ms_p90", pct(settle, n, 0.9),
			  "encode_ms_median", med(enc, n), "worker_total_ms_median", med(wtotal, n),
			  "owner_rest_ms_median", med(rest, n), "settle_quiet_ms", DG_SETTLE_QUIET_MS,
			  "baseline_xdotool_ms_median", med(txdo, n), "baseline_scrot_ms_median",
			  med(tscrot, n), "png_bytes_median", med(bytes, n), "scrot_bytes_median",
			  med(sbytes, n), "baseline_screen", "Xvfb 1280x800x24 + Chromium, same page"));

	/* A screenshot with no action: the settle rule's floor. */
	int m = n / 2 > 5 ? n / 2 : 5;
	for (int i = 0; i < m; i++) {
		double b = 0;
		if (i % 2 == 0)
			b = scrot_only(xs);
		uint8_t *png;
		size_t len;
		double t0 = now_ms();
		json_t *res = desk_act(&k, "{\"type\":\"screenshot\"}", &png, &len);
		dg[i] = now_ms() - t0;
		free(png);
		settle[i] = jnum(res, "settle_ms");
		enc[i] = jnum(res, "encode_ms");
		json_decref(res);
		if (i % 2 != 0)
			b = scrot_only(xs);
		bl[i] = b;
	}
	r = row_add("screenshot_only", "2 screenshot, screen unchanged", "ms", dg, m);
	row_base(r, "Xvfb+Chromium: scrot -p", bl, m);
	snprintf(r->note, sizeof(r->note),
		 "worker: settle %.0f ms, encode %.1f ms (0 = unchanged screen, last PNG reused)",
		 med(settle, m), med(enc, m));
	desk_end(&k);
	free(dg), free(bl), free(settle), free(enc), free(wtotal), free(rest), free(txdo),
		free(tscrot), free(bytes), free(sbytes);
}

/* ---- row 4: PSS per idle desktop -------------------------------------------------- */

/* Pss of pid in kB, and its anonymous part (what sharing cannot spread). */
static long pss_kb(pid_t pid, long *anon_kb)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	*anon_kb = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	long kb = 0, v;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Pss: %ld kB", &v) == 1)
			kb = v;
		else if (sscanf(line, "Pss_Anon: %ld kB", &v) == 1)
			*anon_kb = v;
	}
	fclose(f);
	return kb;
}

/* Real uid and process group of pid; -1 when it is gone. */
static int proc_ids(pid_t pid, uid_t *uid, pid_t *pgrp)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int found = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Uid: %u", uid) == 1) {
			found = 1;
			break;
		}
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(line, 1, sizeof(line) - 1, f);
	fclose(f);
	line[n] = '\0';
	char *e = strrchr(line, ')');
	char state;
	int ppid, pg;
	if (!found || !e || sscanf(e + 1, " %c %d %d", &state, &ppid, &pg) != 3)
		return -1;
	*pgrp = pg;
	return 0;
}

struct mem {
	double pss_kb, anon_kb;
	int procs;
};

/* PSS by program name, summed over the desktops of one profile; Chromium's
 * processes by their --type (and a utility's --utility-sub-type, its last
 * dotted part), which is what its switches add or remove. */
#define MAX_COMMS 24
#define COMM_NAME_MAX 64
struct by_comm {
	char name[COMM_NAME_MAX];
	double kb;
	int procs;
};
static struct by_comm comms[2][MAX_COMMS];

/* The value of switch sw ("--type=") in a command line, up to the next
 * space, into out; false when absent. Chromium rewrites its children's
 * command lines into one space-separated string. */
static bool switch_value(const char *cmd, const char *sw, char *out, size_t size)
{
	const char *v = strstr(cmd, sw);
	if (!v)
		return false;
	v += strlen(sw);
	size_t n = strcspn(v, " ");
	snprintf(out, size, "%.*s", (int)n, v);
	return true;
}

/* "renderer", "utility:NetworkService", ... from a Chromium command line:
 * its --type, and a utility's --utility-sub-type (the last dotted part);
 * "browser" when it has no --type. */
static void chromium_kind(const char *cmd, char *out, size_t size)
{
	char type[20], sub[32];
	if (!switch_value(cmd, "--type=", type, sizeof(type))) {
		snprintf(out, size, "browser");
		return;
	}
	if (!switch_value(cmd, "--utility-sub-type=", sub, sizeof(sub))) {
		snprintf(out, size, "%s", type);
		return;
	}
	const char *dot = strrchr(sub, '.');
	snprintf(out, size, "%s:%s", type, dot && dot[1] ? dot + 1 : sub);
}

static void comm_add(int profile, pid_t pid, double kb)
{
	char path[64], name[COMM_NAME_MAX] = "?";
	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	FILE *f = fopen(path, "re");
	if (f) {
		if (fgets(name, 16, f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
	}
	if (strcmp(name, "chromium") == 0) {
		static char cmd[16384];
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		if ((f = fopen(path, "re"))) {
			size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
			fclose(f);
			for (size_t i = 0; i < n; i++)
				cmd[i] = cmd[i] ? cmd[i] : ' ';
			cmd[n] = '\0';
			char kind[COMM_NAME_MAX - 10];
			chromium_kind(cmd, kind, sizeof(kind));
			snprintf(name, sizeof(name), "chromium %s", kind);
		}
	}
	for (int i = 0; i < MAX_COMMS; i++) {
		struct by_comm *c = &comms[profile][i];
		if (!c->name[0])
			snprintf(c->name, sizeof(c->name), "%s", name);
		if (strcmp(c->name, name) == 0) {
			c->kb += kb;
			c->procs++;
			return;
		}
	}
}

static int cmp_comm(const void *a, const void *b)
{
	const struct by_comm *x = a, *y = b;
	return (x->kb < y->kb) - (x->kb > y->kb);
}

/* "Xvnc 25.1, xterm 9.8, ..." (MiB per desktop), largest first. */
static void comm_summary(int profile, int n_desks, char *out, size_t size, json_t *j)
{
	struct by_comm *c = comms[profile];
	qsort(c, MAX_COMMS, sizeof(*c), cmp_comm);
	size_t len = 0;
	out[0] = '\0';
	for (int i = 0; i < MAX_COMMS && c[i].name[0] && len < size; i++) {
		double mib = c[i].kb / 1024 / n_desks;
		double per = (double)c[i].procs / n_desks;
		len += (size_t)snprintf(out + len, size - len, "%s%s %.1f", i ? ", " : "", c[i].name,
					mib);
		if (per != 1.0 && len < size)
			len += (size_t)snprintf(out + len, size - len, " (%.1f processes)", per);
		json_object_set_new(j, c[i].name, json_real(mib));
	}
}

/* One pass over /proc: PSS of each desktop (jail uid and worker uid of its
 * slot) and of each baseline process group / pid. */
static void scan_pss(struct desk **desks, int nd, struct mem *dm, const pid_t *pgrps,
		     const pid_t *pids, int nb, struct mem *bm)
{
	memset(dm, 0, sizeof(*dm) * (size_t)nd);
	memset(bm, 0, sizeof(*bm) * (size_t)nb);
	DIR *d = opendir("/proc");
	if (!d)
		fatal("/proc: %s", strerror(errno));
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		uid_t uid;
		pid_t pg;
		if (proc_ids((pid_t)pid, &uid, &pg))
			continue;
		for (int i = 0; i < nd; i++) {
			uint32_t slot = desks[i]->d.jail.slot;
			if (uid == DG_JAIL_ID_BASE + slot || uid == DG_WORKER_ID_BASE + slot) {
				long anon;
				double kb = (double)pss_kb((pid_t)pid, &anon);
				dm[i].pss_kb += kb;
				dm[i].anon_kb += (double)anon;
				dm[i].procs++;
				comm_add(desks[i]->d.io.profile == DG_PROFILE_BROWSER, (pid_t)pid, kb);
			}
		}
		for (int i = 0; i < nb; i++) {
			if ((pgrps[i] > 0 && pg == pgrps[i]) || (pids[i] > 0 && pid == pids[i])) {
				long anon;
				bm[i].pss_kb += (double)pss_kb((pid_t)pid, &anon);
				bm[i].anon_kb += (double)anon;
				bm[i].procs++;
			}
		}
	}
	closedir(d);
}

/* The memory cgroup's charge of a desktop's jail, in bytes; -1 if unknown. */
static double cgroup_charge(const struct desk *k)
{
	const struct dg_cgroup *cg = k->d.jail.cgroup;
	if (!cg)
		return -1;
	char path[PATH_MAX + 32];
	if (cg->version == DG_CGROUP_V2)
		snprintf(path, sizeof(path), "%s/memory.current", cg->v2);
	else
		snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", cg->memory);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	unsigned long long v = 0;
	int ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	return ok ? (double)v : -1;
}

static void bench_pss(int n_xterm, int n_browser, int idle_ms, struct xvfb_setup *xs,
		      json_t *details)
{
	int nd = n_xterm + n_browser;
	struct desk *desks = calloc((size_t)nd, sizeof(*desks));
	struct desk **dp = calloc((size_t)nd, sizeof(*dp));
	for (int i = 0; i < nd; i++) {
		dp[i] = &desks[i];
		desk_start(&desks[i], i < n_xterm ? DG_PROFILE_XTERM : DG_PROFILE_BROWSER,
			   i < n_xterm ? NULL : page_url, NULL);
	}
	struct bg bare;
	xvnc_bare(&bare, true);
	sleep_ms(idle_ms);
	pid_t bare_x = child_of(bare.pid);
	/* Baselines: [0] the bare Xvnc and its unshare; [1] Xvfb; [2] Chromium's group */
	const pid_t pgrps[3] = {bare.pid, -1, xs->chrome.pid};
	const pid_t pids[3] = {bare_x, xs->xvfb.pid, -1};
	struct mem *dm = calloc((size_t)nd, sizeof(*dm)), bm[3];
	scan_pss(dp, nd, dm, pgrps, pids, 3, bm);
	double *xt = calloc((size_t)nd, sizeof(double)), *br = calloc((size_t)nd, sizeof(double));
	double cg_x = 0, cg_b = 0, anon_x = 0, anon_b = 0;
	int cg_nx = 0, cg_nb = 0, procs_x = 0, procs_b = 0;
	for (int i = 0; i < nd; i++) {
		double c = cgroup_charge(&desks[i]);
		if (i < n_xterm) {
			xt[i] = dm[i].pss_kb / 1024;
			procs_x += dm[i].procs;
			anon_x += dm[i].anon_kb / 1024 / n_xterm;
			if (c >= 0)
				cg_x += c, cg_nx++;
		} else {
			br[i - n_xterm] = dm[i].pss_kb / 1024;
			procs_b += dm[i].procs;
			anon_b += dm[i].anon_kb / 1024 / n_browser;
			if (c >= 0)
				cg_b += c, cg_nb++;
		}
	}
	double bare_mib = bm[0].pss_kb / 1024, demo_mib = (bm[1].pss_kb + bm[2].pss_kb) / 1024;
	double mean_x = 0, mean_b = 0;
	for (int i = 0; i < n_xterm; i++)
		mean_x += xt[i] / n_xterm;
	for (int i = 0; i < n_browser; i++)
		mean_b += br[i] / n_browser;
	struct row *r = row_add("pss_idle_xterm", "4 PSS per idle xterm desktop", "MiB", xt, n_xterm);
	row_base(r, "bare Xvnc (unshare), 1 instance", &bare_mib, 1);
	r->target = T_XTERM_PSS_MIB;
	snprintf(r->note, sizeof(r->note),
		 "mean %.1f MiB over %d desktops, %.1f processes each (worker included), of which "
		 "anonymous %.1f MiB; memory cgroup charge %.1f MiB mean (jail only)",
		 mean_x, n_xterm, (double)procs_x / n_xterm, anon_x,
		 cg_nx ? cg_x / cg_nx / 1048576 : -1.0);
	r = row_add("pss_idle_browser", "4 PSS per idle browser desktop", "MiB", br, n_browser);
	row_base(r, "Xvfb + Chromium (the demo setup)", &demo_mib, 1);
	snprintf(r->note, sizeof(r->note),
		 "mean %.1f MiB over %d desktops, %.1f processes each, anonymous %.1f MiB; memory "
		 "cgroup charge %.1f MiB mean; baseline: %d processes",
		 mean_b, n_browser, (double)procs_b / n_browser, anon_b,
		 cg_nb ? cg_b / cg_nb / 1048576 : -1.0, bm[1].procs + bm[2].procs);
	char by_x[600], by_b[1200];
	json_t *jx = json_object(), *jb = json_object();
	comm_summary(0, n_xterm, by_x, sizeof(by_x), jx);
	comm_summary(1, n_browser, by_b, sizeof(by_b), jb);
	after_add("PSS per xterm desktop by program (MiB): %s", by_x);
	after_add("PSS per browser desktop by program (MiB): %s", by_b);
	json_object_set_new(details, "pss_by_program_xterm", jx);
	json_object_set_new(details, "pss_by_program_browser", jb);
	json_object_set_new(details, "pss",
			    json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
				      "xterm_mean_mib", mean_x, "browser_mean_mib", mean_b,
				      "xterm_anon_mib", anon_x, "browser_anon_mib", anon_b,
				      "bare_xvnc_anon_mib", bm[0].anon_kb / 1024, "xterm_cgroup_mib",
				      cg_nx ? cg_x / cg_nx / 1048576 : -1.0, "browser_cgroup_mib",
				      cg_nb ? cg_b / cg_nb / 1048576 : -1.0, "bare_xvnc_mib", bare_mib,
				      "xvfb_chromium_mib", demo_mib, "xvfb_mib", bm[1].pss_kb / 1024));
	bg_stop(&bare);
	for (int i = 0; i < nd; i++)
		desk_end(&desks[i]);
	free(desks), free(dp), free(dm), free(xt), free(br);
}

/* ---- main ------------------------------------------------------------------------- */

/* The rows DG_BENCH_ROWS names (bit r for row r); all when it is unset. */
static unsigned rows_wanted;

static bool want_row(int r)
{
	return !rows_wanted || (rows_wanted & (1u << r));
}

int main(void)
{
	double t_begin = now_ms();
	verbose = getenv("DG_BENCH_VERBOSE") && *getenv("DG_BENCH_VERBOSE") &&
		  strcmp(getenv("DG_BENCH_VERBOSE"), "0") != 0;
	int n = getenv("DG_BENCH_N") ? atoi(getenv("DG_BENCH_N")) : 10;
	const char *rows_env = getenv("DG_BENCH_ROWS");
	if (rows_env && *rows_env) {
		for (const char *c = rows_env; *c; c++) {
			if (*c >= '1' && *c <= '4')
				rows_wanted |= 1u << (*c - '0');
			else if (*c != ',') {
				fprintf(stderr, "bench desktop: DG_BENCH_ROWS: rows are 1 to 4, "
						"comma-separated\n");
				return 2;
			}
		}
	}
	int idle_ms = getenv("DG_BENCH_IDLE_MS") ? atoi(getenv("DG_BENCH_IDLE_MS")) : 2000;
	if (idle_ms < 0 || idle_ms > 600000) {
		fprintf(stderr, "bench desktop: DG_BENCH_IDLE_MS must be 0..600000\n");
		return 2;
	}
	if (n < 2 || n > 1000) {
		fprintf(stderr, "bench desktop: DG_BENCH_N must be 2..1000\n");
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bench desktop: could not run: needs root (jails and cgroups)\n");
		return 2;
	}
	static const char *const needed[] = {UNSHARE, XVNC, XVFB, XDOTOOL, SCROT, CHROMIUM,
					     "/usr/bin/xterm", "/usr/bin/matchbox-window-manager",
					     DG_BIN};
	for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); i++)
		if (access(needed[i], X_OK)) {
			fprintf(stderr, "bench desktop: could not run: %s: %s\n", needed[i],
				strerror(errno));
			return 2;
		}
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	dg_worker_set_binary(DG_BIN);
	dg_policy_default(&bench_policy);
	const char *policy = getenv("DG_BENCH_POLICY");
	if (policy && *policy) {
		struct dg_err err = {{0}};
		if (dg_policy_load(policy, &bench_policy, &err))
			fatal("DG_BENCH_POLICY: %s", err.msg);
	}
	json_t *details = json_object();
	json_object_set_new(details, "policy",
			    json_pack("{s:s, s:f, s:I}", "file", policy && *policy ? policy : "default",
				      "cpus", bench_policy.limits.cpus, "memory_mb",
				      (json_int_t)bench_policy.limits.memory_mb));

	printf("bench desktop: %dx%d, runs: xterm starts %d, browser starts %d, clicks %d, encodes %d;"
	       " desktops' policy: %s (cpus %.2f, memory %llu MiB)\n",
	       W, H, n, n / 2, 4 * n, 2 * n + 1, policy && *policy ? policy : "default",
	       bench_policy.limits.cpus, (unsigned long long)bench_policy.limits.memory_mb);
	/* DG_BENCH_ONLY=cold_xterm: row 1's xterm start alone (for profiling
	 * the start without the browser rows). */
	const char *only = getenv("DG_BENCH_ONLY");
	bool only_xterm = only && strcmp(only, "cold_xterm") == 0;
	if (only && *only && !only_xterm) {
		fprintf(stderr, "bench desktop: DG_BENCH_ONLY must be cold_xterm or empty\n");
		return 2;
	}
	if (!only_xterm && want_row(3)) {
		printf("row 3: PNG encode...\n");
		bench_png(2 * n + 1, details);
	}
	if (only_xterm || want_row(1)) {
		printf("row 1: cold start, xterm (%d runs, interleaved with bare Xvnc)...\n", n);
		bench_start(DG_PROFILE_XTERM, n, details);
		if (only_xterm)
			goto done;
		printf("row 1: cold start, browser (%d runs, interleaved with bare Xvnc)...\n", n / 2);
		bench_start(DG_PROFILE_BROWSER, n / 2, details);
	}
	struct xvfb_setup xs;
	memset(&xs, 0, sizeof(xs));
	if (want_row(2)) {
		printf("row 2: click to settled screenshot (%d runs, interleaved with xdotool + scrot)...\n",
		       4 * n);
		bench_click(4 * n, details, &xs);
	}
	if (want_row(4)) {
		printf("row 4: PSS of idle desktops (3 xterm, 2 browser, %d ms idle)...\n", idle_ms);
		bench_pss(3, 2, idle_ms, &xs, details);
	}
	xvfb_setup_stop(&xs);
done:;
	double elapsed = (now_ms() - t_begin) / 1000;
	print_table();
	printf("\n%s", after);
	printf("\nbench desktop took %.1f s. Ratios are measured/baseline medians of interleaved runs.\n",
	       elapsed);
	const char *json = getenv("DG_BENCH_JSON");
	if (json && *json)
		write_json(json, elapsed, details);
	json_decref(details);
	cleanup_all();
	return 0;
}
