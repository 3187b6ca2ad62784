/* worker: one unprivileged process per desktop that turns the desktop
 * into screenshots and actions into input. It parses the hostile desktop's
 * bytes (RFB from Xvnc, DevTools JSON from Chromium) so that its owner never
 * does. Single-threaded: one poll loop over the control socket, the RFB
 * socket and the DevTools pipes (worker.c), with the RFB input (input.c:
 * actions as pointer and key events), the DevTools client
 * (cdp.c: the pipe, cdp-page.c: the page state), the browser guard
 * (guard.c), typing the page acknowledges (ack.c), each tab's console and
 * network logs (pagelog.c), the javascript action (script.c) and the PNG encoder
 * (frame.c: checks, scaling, hash; frame-png.c: libpng; frame-stripes.c:
 * the striped, cached encoder).
 *
 * It is started by dg_worker_start (fork + exec of `deskgate worker`), with
 * the descriptors and the messages of desktop/proto/proto.h
 * (DG_WORKER_FD_*, DG_MSG_*); its owner's side is there too.
 */
#ifndef DG_WORKER_H
#define DG_WORKER_H

#include "base/base.h"

/* Settling: after an action, the screen is settled once no framebuffer
 * update arrived for QUIET ms (counted from the later of the action's end and
 * the last update), or MAX ms passed. */
#define DG_SETTLE_QUIET_MS 30
#define DG_SETTLE_MAX_MS 3000
/* ... after a move in an X desktop that only the pointer's redraw follows
 * (see run_action() in worker.c), counted from Xvnc's answer to a request
 * sent after the move: Xvnc sends its updates at most DG_DESKTOP_XVNC_FPS
 * (1000) times a second, so the pointer's redraw leaves it within a few ms. */
#define DG_SETTLE_POINTER_QUIET_MS 10
/* ... and once the pointer's redraw at its new place came: the rest of
 * that update (the pointer's old place, sent in the same update) has then
 * been read too; the margin is for a host slow to schedule the worker. */
#define DG_SETTLE_POINTER_DRAWN_MS 3
/* Xvnc draws the pointer into the framebuffer: a changed rectangle inside
 * this many pixels around the pointer's old or new place may be only the
 * pointer (its image measured 15x21 at the hot spot's -2, -2), and does
 * not count as the page painting (see the gate in advance()). */
#define DG_WORKER_POINTER_BOX 32
/* After the first frame, how long the worker waits for the profile's
 * windows to appear before it says READY anyway. */
#define DG_WORKER_CONTENT_MS 5000
/* ... and, once an xterm desktop's window is shown, how long the screen
 * must then stay quiet before READY (a browser's: DG_SETTLE_QUIET_MS, its
 * page paints in many steps). xterm maps its window maximized with the
 * shell's prompt already drawn, in one burst of updates 2-6 ms long: in
 * 40 cold starts traced (20 on a quiet host, 20 beside four busy loops on
 * two cores) no update followed that burst. Waiting the general 30 ms was
 * a fifth of the cold start; this keeps a margin over a burst split across
 * RFB messages on a loaded host. */
#define DG_WORKER_XTERM_SHOWN_QUIET_MS 10
/* The colour of Xvnc's root window (black without -retro: 0x000000 in the
 * 24 bits of a pixel), which no profile's window paints over most of the
 * screen (xterm's background is white, Chromium's toolbar light): a first
 * frame mostly of another colour already shows the profile's window. */
#define DG_WORKER_ROOT_PIXEL 0x000000u
/* The first full frame must arrive within this after connecting. */
#define DG_WORKER_FIRST_FRAME_MS 10000
/* The browser must answer DevTools and guard its first page within this
 * after the first frame: Chromium's start under a loaded host (two cores,
 * other desktops starting) took over 10 s. The gateway's create timeout
 * (DG_CREATE_TIMEOUT_S) bounds the whole start above it. */
#define DG_WORKER_DEVTOOLS_MS 30000
/* A blocked read of one RFB message gives up after this (libvncclient). */
#define DG_WORKER_RFB_READ_TIMEOUT_S 5
/* Pause between the clicks of a double or triple click: well inside every
 * toolkit's double-click interval, long enough that the presses get
 * distinct server timestamps. */
#define DG_WORKER_CLICK_GAP_MS 15
/* Longest wait for Xvnc to answer the sync request between clicks. */
#define DG_WORKER_SYNC_MAX_MS 200
/* Keysyms outside the keymap primed before their first use in the browser
 * (see prime() in input.c), and the pause that lets the browser follow. */
#define DG_WORKER_PRIMED_MAX 256
#define DG_WORKER_PRIME_PAUSE_MS 40
#define DG_KEYSYM_CONTROL_L 0xffe3
#define DG_KEYSYM_SHIFT_L 0xffe1
/* After a page load, how long settling waits for the first screen update
 * (the paint of the new page) before it accepts an unchanged screen. */
#define DG_WORKER_PAINT_WAIT_MS 500
/* Longest wait for the browser's answer on the page's URL and title. */
#define DG_WORKER_REFRESH_MAX_MS 2000
/* Longest wait for the page's two animation frames after keyboard input
 * (see barrier() in worker.c) before settling anyway. */
#define DG_WORKER_BARRIER_MAX_MS 500
/* After keyboard input in the browser, the quiet period settling waits for
 * (instead of DG_SETTLE_QUIET_MS): the renderer paints typed text in bursts
 * whose gaps under load exceed 30 ms ("hi openai" answered as "hi open"). */
#define DG_WORKER_KEYS_QUIET_MS 120
/* Which tab is in front (the browser announces no activation): with more
 * than one page the worker asks the pages (dg_guard_probe_tabs) after
 * every action, before its result, and while idle every TAB_PROBE ms, and
 * TAB_SOON ms after a page target appeared, went or changed; a change
 * moves the current page (dg_cdp_switch) and is reported as a "page"
 * event. */
/* While CDP clients send commands, the screen they leave is recorded
 * (DG_MSG_CDP_FRAME) once it changed and stayed quiet for the settle
 * period, at most once per this many ms (a page that animates under a
 * stream of commands costs 4 encodes a second, not 60). */
#define DG_WORKER_CDP_FRAME_MS 250
/* Between actions the worker re-encodes a screen that changed and then
 * stayed quiet for the settle period, at most once per this many ms, so a
 * screenshot of a screen that changed while nobody acted (a warm desktop's
 * browser painting after its READY, a page updating on its own) finds its
 * PNG made: a warm browser desktop's first screenshot encoded 3-29 ms of
 * PNG on the loaded 2-core VM without it. A page that changes every
 * second costs one stripe-cache encode a second (only its changed
 * stripes); one that animates is never quiet and costs nothing. */
#define DG_WORKER_IDLE_PNG_MS 1000
#define DG_WORKER_TAB_PROBE_MS 500
#define DG_WORKER_TAB_SOON_MS 100
/* Bytes of the open tabs' URLs and titles a browser result lists (its
 * "tabs"): 64 tabs of the longest URL and title would be 590 KiB, with a
 * page's text beside them near the channel's 1 MiB; past it a tab is
 * listed by id only. */
#define DG_WORKER_TABS_TEXT_MAX (128 * 1024)
/* Longest wait for a tab to come to the front (new_tab, switch_tab, a
 * resolve's tab), to close, or for the browser to open one. */
#define DG_WORKER_TAB_MAX_MS 5000
/* Longest navigation the worker waits for before settling anyway. */
#define DG_WORKER_NAV_MAX_MS 15000

/* `deskgate worker --profile P --size WxH`: never returns. */
int dg_worker_main(int argc, char **argv);

/* The worker's own seccomp filter (worker-seccomp.c), installed by
 * dg_worker_main once its descriptors are open: allowlist of I/O on
 * existing descriptors, memory, time and exit; no open, no socket, no exec,
 * no fork. Sets no_new_privs. Returns 0 or a negative errno with err. */
int dg_seccomp_install_worker(struct dg_err *err);

#endif
