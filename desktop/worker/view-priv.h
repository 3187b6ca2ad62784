/* The live view (docs/vnc.md): the worker's framebuffer re-served as RFB by
 * libvncserver to the viewers its owner hands it on DG_WORKER_FD_VIEW
 * (desktop/proto/proto.h), inside the worker's one poll loop.
 *
 * Contract: viewers are view-only. Their pointer, key and clipboard
 * messages are parsed by libvncserver and dropped (viewOnly, and hooks that
 * do nothing): the server holds no handle on the desktop's RFB client, so
 * nothing a viewer sends can reach Xvnc. The server shares the worker's
 * framebuffer (read-only: it draws no cursor into it; Xvnc draws the
 * pointer). What a viewer can cost the worker is bounded: at most
 * DG_VIEWERS_MAX of them; a message libvncserver reads in pieces waits at
 * most DG_VIEW_READ_WAIT_MS for the rest, then the viewer is dropped; a
 * clipboard message over libvncserver's 1 MiB drops it too. Writes never
 * wait on a viewer: the owner drains each viewer's socket (proto.h).
 */
#ifndef DG_VIEW_PRIV_H
#define DG_VIEW_PRIV_H

#include <poll.h>
#include <stdbool.h>

#include "base/base.h"

/* How long libvncserver may wait for the rest of a viewer's message. The
 * owner relays whole WebSocket messages, so a legitimate message arrives
 * at once; this is what a hostile viewer can stall the worker by, once. */
#define DG_VIEW_READ_WAIT_MS 100

struct dg_view;

/* Serves fb (width x height, 32 bits per pixel, BGRX in memory: the
 * worker's libvncclient framebuffer, which must stay allocated) to viewers
 * handed over on chan. Call before the seccomp filter (libvncserver's
 * set-up reads the host name). NULL (err says why) on failure. */
struct dg_view *dg_view_new(int chan, char *fb, int width, int height, struct dg_err *err);

/* The desktop changed in the rectangle x, y, w, h. */
void dg_view_damage(struct dg_view *v, int x, int y, int w, int h);

/* The descriptors to poll: the channel and each viewer, into p (room for
 * 1 + DG_VIEWERS_MAX). Returns how many. */
int dg_view_pollfds(const struct dg_view *v, struct pollfd *p);

/* Serves: takes new viewers (p, n: what dg_view_pollfds gave, after poll;
 * NULL, 0 when called only to send damage), reads what viewers sent, sends
 * the updates they asked for. Cheap when nothing is due. */
void dg_view_service(struct dg_view *v, const struct pollfd *p, int n);

/* Whether dg_view_service has anything to do without a descriptor being
 * ready: damage to send to a viewer. */
bool dg_view_due(const struct dg_view *v);

/* Viewers connected now. */
int dg_view_count(const struct dg_view *v);

#endif
