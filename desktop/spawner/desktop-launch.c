/* Starting a desktop: Xvnc and the profile's programs in one jail.
 *
 * Xvnc runs in inetd mode: its RFB client is a socketpair end given as its
 * stdin/stdout, so it listens on no TCP or unix RFB port and no directory is
 * shared between host and jail. X clients reach it through display :0, whose
 * sockets exist only in the jail's /tmp and network namespace. Chromium's
 * DevTools endpoint is a pair of pipes (--remote-debugging-pipe), never a
 * port.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "desktop/spawner/spawner.h"

#define XVNC "/usr/bin/Xvnc"
#define WINDOW_MANAGER "/usr/bin/matchbox-window-manager"
#define XTERM "/usr/bin/xterm"
/* The real binary, not Debian's /usr/bin/chromium wrapper script, which
 * sources /etc/chromium.d (API keys, extra flags) through a shell. */
#define CHROMIUM "/usr/lib/chromium/chromium"
/* Where Chromium's component updater asks for updates: a scheme its network
 * loaders refuse, so an update check ends in the browser. */
#define CHROMIUM_NO_UPDATE_URL "file:///dev/null"

/* The egress listener as Chromium's proxy rules name it. */
#define EGRESS_HOSTPORT DG_JAIL_EGRESS_ADDR ":3128"
_Static_assert(DG_JAIL_EGRESS_PORT == 3128, "EGRESS_HOSTPORT names the listener's port");

#define ARGV_MAX 64
#define ARG_MAX_LEN (DG_DESKTOP_URL_MAX + 64)

/* Argument vectors with their own storage, so the spec handed to the jail
 * points at memory that outlives the call. */
struct argv_buf {
	const char *argv[ARGV_MAX + 1];
	char store[8][ARG_MAX_LEN];
	int n, n_store;
};

static void arg(struct argv_buf *b, const char *a)
{
	if (b->n < ARGV_MAX)
		b->argv[b->n++] = a;
	b->argv[b->n] = NULL;
}

static void argf(struct argv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void argf(struct argv_buf *b, const char *fmt, ...)
{
	if (b->n_store >= 8)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->store[b->n_store], ARG_MAX_LEN, fmt, ap);
	va_end(ap);
	arg(b, b->store[b->n_store++]);
}

/* Xvnc: no TCP (X or RFB), no clipboard towards the client, no resizing by
 * the client, the RFB connection on stdin (inetd). */
static void xvnc_argv(struct argv_buf *b, const struct dg_desktop_spec *s)
{
	arg(b, XVNC);
	arg(b, DG_DESKTOP_DISPLAY);
	arg(b, "-inetd");
	/* The jail's readiness descriptor: Xvnc writes the display number there
	 * once it accepts X clients (see dg_jail_spec.wait_ready). */
	arg(b, "-displayfd");
	argf(b, "%d", DG_JAIL_READY_FD);
	arg(b, "-geometry");
	argf(b, "%dx%d", s->width, s->height);
	arg(b, "-depth");
	arg(b, "24");
	arg(b, "-SecurityTypes=None");
	arg(b, "-nolisten");
	arg(b, "tcp");
	/* No abstract socket: X clients use the path socket in /tmp/.X11-unix,
	 * which programs run by exec cannot see (jail-enter.c). */
	arg(b, "-nolisten");
	arg(b, "local");
	arg(b, "-NeverShared=0");
	arg(b, "-AlwaysShared=1");
	arg(b, "-AcceptSetDesktopSize=0");
	arg(b, "-SendCutText=0");
	arg(b, "-AcceptCutText=0");
	arg(b, "-SendPrimary=0");
	arg(b, "-desktop=deskgate");
	/* Xvnc sends a client at most FrameRate updates a second (60 by
	 * default): the parts of one repaint then reached the worker 16-17 ms
	 * apart, and settling's quiet period had to outlast each gap; see
	 * DG_DESKTOP_XVNC_FPS for why more than 240. */
	argf(b, "-FrameRate=%d", DG_DESKTOP_XVNC_FPS);
	/* No GLX: nothing in a desktop renders with OpenGL (Chromium runs with
	 * --disable-gpu), and without it Xvnc does not load Mesa: 15 MB PSS
	 * instead of 67 MB for a lone server. */
	arg(b, "-extension");
	arg(b, "GLX");
	/* inetd mode sends stderr to /dev/null unless a log target says so. */
	arg(b, s->log_to_stderr ? "-Log=*:stderr:30" : "-Log=*:stderr:0");
}

/* Chromium flags, each for a reason:
 *  --no-sandbox             the jail is the sandbox; its seccomp filter refuses
 *                           the nested user namespaces Chromium's own needs
 *  --test-type              hides the "unsupported flag --no-sandbox" bar that
 *                           would shift every page down
 *  --remote-debugging-pipe  DevTools over fds 3 and 4, never a TCP port
 *  --user-data-dir          a fresh profile in the jail's tmpfs home
 *  --proxy-server (http, https; socks for WebSockets), --proxy-bypass-list=<-loopback>
 *                           every request, loopback included, goes to the
 *                           egress proxy's listener in the jail's namespace
 *  --host-resolver-rules    Chromium itself resolves no name (the proxy's
 *                           address excepted: the rules apply to IP literals too)
 *  --disable-quic, --webrtc-ip-handling-policy, --force-webrtc-ip-handling-policy
 *                           no UDP paths around the proxy
 *  --disable-background-networking, --disable-component-update, --disable-sync,
 *  --disable-domain-reliability, --no-pings, --disable-breakpad
 *                           no traffic of its own (updates, sync, reports,
 *                           hyperlink auditing pings)
 *  --component-updater=url-source=...
 *                           components registered on demand (the on-device
 *                           model manifest asks update.googleapis.com even
 *                           with --disable-component-update and the
 *                           ComponentUpdatesEnabled policy) check a URL no
 *                           network loader serves: the check fails inside
 *                           Chromium (ERR_UNKNOWN_URL_SCHEME), no connection
 *  --disable-features=...   NetworkTimeServiceQuerying: no clients2.google.com
 *                           time queries; MediaRouter: no mDNS/SSDP discovery;
 *                           Translate, OptimizationHints, AutofillServerCommunication:
 *                           no translation, hints or form-type fetches (each a
 *                           feature Chromium 156 has: an unknown name is ignored)
 *  the managed policy       the same sources again, and those with no flag
 *                           (see chromium_policy_base)
 *  --no-first-run, --no-default-browser-check, --noerrdialogs,
 *  --disable-session-crashed-bubble, --password-store=basic
 *                           no dialogs or keyring prompts in the agent's way
 *  --disable-gpu            there is no GPU in the jail
 *  --in-process-gpu, --enable-features=NetworkServiceInProcess2,
 *  --disable-features=SpareRendererForSitePerProcess, --no-unsandboxed-zygote
 *                           memory: the display compositor (software, no GPU)
 *                           and the network service run in the browser
 *                           process, no idle renderer is kept started for
 *                           the next navigation, and one zygote instead of
 *                           two (with --no-sandbox the second, for unsandboxed
 *                           utilities, isolates nothing); 4 processes fewer,
 *                           37 MiB of anonymous memory fewer per idle
 *                           desktop (each process Chromium starts without a
 *                           zygote has its own 11 MiB copy of the binary's
 *                           relocated data). Measured with bench/desktop
 *                           row 4, in docs/benchmarks.md with those dropped.
 *  --disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup
 *                           memory: the omnibox's suggestions drawn by the
 *                           browser's own views, not by a WebUI page kept
 *                           loaded in a renderer of its own from the start
 *                           (chrome://omnibox-popup.top-chrome, and its AI
 *                           mode page): one renderer fewer, 41 MiB of
 *                           anonymous memory fewer per idle browser (both
 *                           flags needed: with either alone, the other's
 *                           page keeps that renderer). Typing a URL and
 *                           Enter open it as before.
 *  --window-position, --window-size
 *                           the window fills the screen without a window manager
 */
static void chromium_argv(struct argv_buf *b, const struct dg_desktop_spec *s)
{
	arg(b, CHROMIUM);
	arg(b, "--no-sandbox");
	arg(b, "--test-type");
	arg(b, "--remote-debugging-pipe");
	arg(b, "--user-data-dir=" DG_DESKTOP_BROWSER_DIR);
	/* WebSockets take the "socks" entry (Chromium uses it for ws:// and
	 * wss:// when the per-scheme rules name no proxy for them), everything
	 * else the HTTP proxy: the proxy tells a WebSocket by its first byte
	 * and decides its URL (desktop/egress/egress-priv.h, "SOCKS5"). */
	arg(b, "--proxy-server=http=" EGRESS_HOSTPORT ";https=" EGRESS_HOSTPORT
	       ";socks=socks5://" EGRESS_HOSTPORT);
	arg(b, "--proxy-bypass-list=<-loopback>");
	arg(b, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE " DG_JAIL_EGRESS_ADDR);
	arg(b, "--disable-quic");
	arg(b, "--webrtc-ip-handling-policy=disable_non_proxied_udp");
	arg(b, "--force-webrtc-ip-handling-policy");
	arg(b, "--disable-background-networking");
	arg(b, "--disable-component-update");
	arg(b, "--disable-sync");
	arg(b, "--disable-domain-reliability");
	arg(b, "--no-pings");
	arg(b, "--disable-breakpad");
	arg(b, "--component-updater=url-source=" CHROMIUM_NO_UPDATE_URL);
	arg(b, "--disable-features=NetworkTimeServiceQuerying,MediaRouter,Translate,OptimizationHints,"
	       "AutofillServerCommunication,SpareRendererForSitePerProcess,WebUIOmniboxPopup,"
	       "WebUIOmniboxAimPopup");
	arg(b, "--enable-features=NetworkServiceInProcess2");
	arg(b, "--no-first-run");
	arg(b, "--no-default-browser-check");
	arg(b, "--noerrdialogs");
	arg(b, "--disable-session-crashed-bubble");
	arg(b, "--password-store=basic");
	arg(b, "--disable-gpu");
	arg(b, "--in-process-gpu");
	arg(b, "--no-unsandboxed-zygote");
	arg(b, "--ozone-platform=x11");
	arg(b, "--window-position=0,0");
	argf(b, "--window-size=%d,%d", s->width, s->height);
	if (!s->log_to_stderr)
		arg(b, "--log-level=3");
	arg(b, s->start_url ? s->start_url : "about:blank");
}

/* Chromium's managed policy for every browser desktop: the browser's own
 * background traffic, stopped where it starts. Each entry cuts requests the
 * page never made (all measured against Chromium 156 in the jail, or named
 * in Chromium's policy list as fetching on their own) and leaves what a page
 * can do unchanged:
 *  ComponentUpdatesEnabled           component update checks (update.googleapis.com)
 *  BrowserNetworkTimeQueriesEnabled  time queries (clients2.google.com/time)
 *  SafeBrowsingProtectionLevel 0     Safe Browsing list updates and lookups
 *  MetricsReportingEnabled, UrlKeyedAnonymizedDataCollectionEnabled
 *                                    usage and crash reports, URL-keyed metrics
 *  DomainReliabilityAllowed          network error reports
 *  SpellcheckEnabled                 dictionary downloads on the first text field
 *  TranslateEnabled                  translation of a page in another language
 *  NetworkPredictionOptions 2        DNS prefetch and preconnects nobody asked for
 *  SearchSuggestEnabled              suggestions fetched while typing in the omnibox
 *  AlternateErrorPagesEnabled        navigation error suggestions and, with them,
 *                                    the captive-portal checks
 *  BrowserSignin 0, SyncDisabled     sign-in and sync
 *  GenAILocalFoundationalModelSettings 1
 *                                    no on-device model download
 *  EnableMediaRouter                 Cast discovery
 *  BackgroundModeEnabled             no browser (and its background pages) left
 *                                    running without a window */
static const char chromium_policy_base[] =
	"{\n"
	"  \"ComponentUpdatesEnabled\": false,\n"
	"  \"BrowserNetworkTimeQueriesEnabled\": false,\n"
	"  \"SafeBrowsingProtectionLevel\": 0,\n"
	"  \"MetricsReportingEnabled\": false,\n"
	"  \"UrlKeyedAnonymizedDataCollectionEnabled\": false,\n"
	"  \"DomainReliabilityAllowed\": false,\n"
	"  \"SpellcheckEnabled\": false,\n"
	"  \"TranslateEnabled\": false,\n"
	"  \"NetworkPredictionOptions\": 2,\n"
	"  \"SearchSuggestEnabled\": false,\n"
	"  \"AlternateErrorPagesEnabled\": false,\n"
	"  \"BrowserSignin\": 0,\n"
	"  \"SyncDisabled\": true,\n"
	"  \"GenAILocalFoundationalModelSettings\": 1,\n"
	"  \"EnableMediaRouter\": false,\n"
	"  \"BackgroundModeEnabled\": false\n"
	"}\n";

/* The managed policy strict desktops add (see dg_desktop_spec). The
 * browser enforces it in its own navigation code, beneath the page and
 * independent of the DevTools guard, so a missed CDP event cannot open a
 * file: or data: page. URLBlocklist "*" with an allowlist of exactly http
 * and https (about:blank for new tabs); javascript: needs its own entry.
 * DownloadRestrictions 3 blocks every download; AllowFileSelectionDialogs
 * false makes every <input type=file> and save dialog fail. Its keys are
 * not in chromium_policy_base: Chromium merges the files of the directory. */
static const char chromium_policy_strict[] =
	"{\n"
	"  \"URLBlocklist\": [\"*\", \"javascript://*\"],\n"
	"  \"URLAllowlist\": [\"http://*\", \"https://*\", \"about:blank\"],\n"
	"  \"DownloadRestrictions\": 3,\n"
	"  \"AllowFileSelectionDialogs\": false,\n"
	"  \"PromptForDownloadLocation\": false,\n"
	"  \"PrintingEnabled\": false,\n"
	"  \"PasswordManagerEnabled\": false,\n"
	"  \"AutofillAddressEnabled\": false,\n"
	"  \"AutofillCreditCardEnabled\": false,\n"
	"  \"ExternalProtocolDialogShowAlwaysOpenCheckbox\": false\n"
	"}\n";
static const struct dg_jail_file chromium_files[] = {
	{"chromium/policies/managed/deskgate-quiet.json", chromium_policy_base},
	{"chromium/policies/managed/deskgate.json", chromium_policy_strict},
};

/* The launch state: everything the jail spec points at. Heap-allocated
 * (the argument stores are large) and freed once the jail has started. */
struct launch {
	struct argv_buf xvnc, wm, app;
	struct dg_jail_prog progs[DG_JAIL_PROGS_MAX];
	int rfb[2];      /* [0] ours, [1] Xvnc's stdin/stdout */
	int cmd[2];      /* Chromium reads [0] as fd 3; we write [1] */
	int reply[2];    /* Chromium writes [1] as fd 4; we read [0] */
	int pass[2];
};

static const char *const display_env[] = {"DISPLAY=" DG_DESKTOP_DISPLAY, NULL};

int dg_desktop_start(const struct dg_desktop_spec *spec, struct dg_desktop *d, struct dg_err *err)
{
	memset(d, 0, sizeof(*d));
	d->io.rfb_fd = d->io.cdp_out_fd = d->io.cdp_in_fd = -1;
	d->jail.pid = -1;
	if (spec->width < DG_DESKTOP_WIDTH_MIN || spec->width > DG_DESKTOP_WIDTH_MAX ||
	    spec->height < DG_DESKTOP_HEIGHT_MIN || spec->height > DG_DESKTOP_HEIGHT_MAX)
		return dg_err_set(err, -ERANGE, "desktop: size %dx%d out of bounds", spec->width,
				  spec->height);
	if (spec->start_url && strlen(spec->start_url) > DG_DESKTOP_URL_MAX)
		return dg_err_set(err, -E2BIG, "desktop: start URL longer than %d bytes",
				  DG_DESKTOP_URL_MAX);
	struct launch *l = calloc(1, sizeof(*l));
	if (!l)
		return dg_err_set(err, -ENOMEM, "desktop: out of memory");
	l->rfb[0] = l->rfb[1] = l->cmd[0] = l->cmd[1] = l->reply[0] = l->reply[1] = -1;
	int r = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, l->rfb) != 0 ||
	    pipe2(l->cmd, O_CLOEXEC) != 0 || pipe2(l->reply, O_CLOEXEC) != 0) {
		r = dg_err_set(err, -errno, "desktop: socketpair/pipe: %s", strerror(errno));
		goto out;
	}
	int log = spec->log_to_stderr ? 2 : -1;
	xvnc_argv(&l->xvnc, spec);
	l->progs[0] = (struct dg_jail_prog){.argv = l->xvnc.argv, .stdin_fd = l->rfb[1],
					     .stdout_fd = l->rfb[1], .stderr_fd = log};
	int n = 1;
	if (spec->profile == DG_PROFILE_XTERM) {
		arg(&l->wm, WINDOW_MANAGER);
		arg(&l->wm, "-use_titlebar");
		arg(&l->wm, "no");
		arg(&l->app, XTERM);
		/* A scalable font at a size a model reads reliably in screenshots. */
		arg(&l->app, "-fa");
		arg(&l->app, "Monospace");
		arg(&l->app, "-fs");
		arg(&l->app, "12");
		/* No utmp record: the jail has no writable utmp, so the utempter
		 * helper xterm forks and execs before the shell only fails, on
		 * the start's critical path (12-22 ms on a loaded 2-core VM). */
		arg(&l->app, "-ut");
		l->progs[n++] = (struct dg_jail_prog){.argv = l->wm.argv, .stdin_fd = -1,
						       .stdout_fd = log, .stderr_fd = log,
						       .env_extra = display_env};
		l->progs[n++] = (struct dg_jail_prog){.argv = l->app.argv, .stdin_fd = -1,
						       .stdout_fd = log, .stderr_fd = log,
						       .env_extra = display_env};
	} else {
		arg(&l->wm, WINDOW_MANAGER);
		arg(&l->wm, "-use_titlebar");
		arg(&l->wm, "no");
		l->progs[n++] = (struct dg_jail_prog){.argv = l->wm.argv, .stdin_fd = -1,
						       .stdout_fd = log, .stderr_fd = log,
						       .env_extra = display_env};
		chromium_argv(&l->app, spec);
		l->pass[0] = l->cmd[0];
		l->pass[1] = l->reply[1];
		l->progs[n++] = (struct dg_jail_prog){.argv = l->app.argv, .stdin_fd = -1,
						       .stdout_fd = log, .stderr_fd = log,
						       .pass_fds = l->pass, .n_pass_fds = 2,
						       .env_extra = display_env};
	}
	struct dg_jail_spec js = {.limits = spec->limits, .progs = l->progs, .n_progs = n,
				  .wait_ready = true, .ready_socket = DG_DESKTOP_X11_SOCKET,
				  .egress = spec->egress,
				  .cpu_after_start = spec->cpu_after_start};
	if (spec->profile == DG_PROFILE_BROWSER) {
		js.etc_files = chromium_files;
		js.n_etc_files = spec->strict ? 2 : 1;
	}
	if ((r = dg_jail_start(&js, &d->jail, err)))
		goto out;
	d->io.profile = spec->profile;
	d->io.width = spec->width;
	d->io.height = spec->height;
	d->io.slot = d->jail.slot;
	d->io.rfb_fd = l->rfb[0];
	l->rfb[0] = -1;
	if (spec->profile == DG_PROFILE_BROWSER) {
		d->io.cdp_out_fd = l->cmd[1];
		d->io.cdp_in_fd = l->reply[0];
		l->cmd[1] = l->reply[0] = -1;
	}
out:
	for (int i = 0; i < 2; i++) {
		dg_close_fd(&l->rfb[i]);
		dg_close_fd(&l->cmd[i]);
		dg_close_fd(&l->reply[i]);
	}
	free(l);
	return r;
}

int dg_desktop_cap_cpu(struct dg_desktop *d, const struct dg_limits *lim, struct dg_err *err)
{
	return dg_jail_cap_cpu(&d->jail, lim, err);
}

void dg_desktop_destroy(struct dg_desktop *d)
{
	dg_close_fd(&d->io.rfb_fd);
	dg_close_fd(&d->io.cdp_out_fd);
	dg_close_fd(&d->io.cdp_in_fd);
	if (d->jail.pid > 0 || d->jail.cgroup)
		dg_jail_destroy(&d->jail);
}
