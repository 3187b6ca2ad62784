/* The live view: libvncserver over the worker's framebuffer (contract:
 * view-priv.h; the channel: desktop/proto/proto.h). */
#include <errno.h>
#include <fcntl.h>
#include <rfb/rfb.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "desktop/proto/proto.h"
#include "desktop/worker/view-priv.h"

struct dg_view {
	rfbScreenInfoPtr screen;
	int chan;       /* the view channel; -1 once the owner closed it */
	int n;          /* viewers connected */
	bool dirty;     /* damage not yet offered to the viewers */
};

/* libvncserver logs through process-wide hooks: each viewer's connection
 * (its address, TCP_NODELAY on a Unix socket) would fill the desktop's log.
 * What happened to a viewer the owner sees as its socket closing. */
static void quiet(const char *fmt, ...)
{
	(void)fmt;
}

/* A viewer's input goes nowhere (viewOnly already drops it before these). */
static void drop_key(rfbBool down, rfbKeySym key, rfbClientPtr cl)
{
	(void)down;
	(void)key;
	(void)cl;
}

static void drop_pointer(int mask, int x, int y, rfbClientPtr cl)
{
	(void)mask;
	(void)x;
	(void)y;
	(void)cl;
}

static void drop_cut_text(char *text, int len, rfbClientPtr cl)
{
	(void)text;
	(void)len;
	(void)cl;
}

/* Before each update: no JPEG in tight encoding, whatever quality level the
 * viewer asked for. The live view stays exact (it is compared with the
 * agent's screenshots), and a page needs no data: images to show it. */
static void lossless(rfbClientPtr cl)
{
	cl->tightQualityLevel = -1;
	cl->turboQualityLevel = -1;
}

static void viewer_gone(rfbClientPtr cl)
{
	struct dg_view *v = cl->screen->screenData;
	v->n--;
}

struct dg_view *dg_view_new(int chan, char *fb, int width, int height, struct dg_err *err)
{
	rfbLog = quiet;
	rfbErr = quiet;
	struct dg_view *v = calloc(1, sizeof(*v));
	int argc = 0;
	rfbScreenInfoPtr s = v ? rfbGetScreen(&argc, NULL, width, height, 8, 3, 4) : NULL;
	if (!s) {
		free(v);
		dg_err_set(err, -ENOMEM, "live view: out of memory");
		return NULL;
	}
	v->screen = s;
	v->chan = chan;
	s->screenData = v;
	s->desktopName = "deskgate";
	/* BGRX in memory, as libvncclient fills it for the worker. */
	s->serverFormat.redShift = 16;
	s->serverFormat.greenShift = 8;
	s->serverFormat.blueShift = 0;
	s->frameBuffer = fb;
	/* No listener of any kind: viewers come only from the owner. */
	s->autoPort = FALSE;
	s->port = 0;
	s->ipv6port = 0;
	s->httpPort = 0;
	s->httpDir = NULL;
	s->inetdSock = RFB_INVALID_SOCKET;
	/* Nothing drawn into the shared framebuffer (Xvnc draws the pointer). */
	s->cursor = NULL;
	s->alwaysShared = TRUE;
	s->deferUpdateTime = 0;
	s->maxClientWait = DG_VIEW_READ_WAIT_MS;
	s->kbdAddEvent = drop_key;
	s->ptrAddEvent = drop_pointer;
	s->setXCutText = drop_cut_text;
	s->permitFileTransfer = FALSE;
	s->displayHook = lossless;
	rfbInitServer(s);
	return v;
}

/* Takes the viewers waiting on the channel; past DG_VIEWERS_MAX they are
 * closed unserved. */
static void take_viewers(struct dg_view *v)
{
	static char buf[DG_SEQ_MAX + 1];
	for (;;) {
		int fds[DG_SEQ_FDS_MAX], nfds = 0;
		size_t len = 0;
		struct dg_err err = {{0}};
		int r = dg_seq_recv(v->chan, buf, sizeof(buf), &len, fds, &nfds, &err);
		if (r == 0)
			return;
		if (r < 0) {
			/* The owner closed the channel (or broke it): no more
			 * viewers; those connected keep their view. */
			close(v->chan);
			v->chan = -1;
			return;
		}
		bool ok = nfds == 1 && len == strlen(DG_VIEW_MSG) && memcmp(buf, DG_VIEW_MSG, len) == 0;
		for (int i = 0; i < nfds; i++) {
			if (!ok || v->n >= DG_VIEWERS_MAX) {
				close(fds[i]);
				continue;
			}
			/* rfbNewClient closes the socket itself when it fails. */
			rfbClientPtr cl = rfbNewClient(v->screen, fds[i]);
			if (!cl)
				continue;
			cl->viewOnly = TRUE;
			cl->clientGoneHook = viewer_gone;
			v->n++;
		}
	}
}

void dg_view_damage(struct dg_view *v, int x, int y, int w, int h)
{
	if (!v || v->n == 0 || w <= 0 || h <= 0)
		return;
	rfbMarkRectAsModified(v->screen, x, y, x + w, y + h);
	v->dirty = true;
}

int dg_view_pollfds(const struct dg_view *v, struct pollfd *p)
{
	int n = 0;
	p[n++] = (struct pollfd){v->chan, POLLIN, 0};
	rfbClientIteratorPtr it = rfbGetClientIterator(v->screen);
	for (rfbClientPtr cl; (cl = rfbClientIteratorNext(it)) && n < 1 + DG_VIEWERS_MAX;)
		if (cl->sock != RFB_INVALID_SOCKET)
			p[n++] = (struct pollfd){cl->sock, POLLIN, 0};
	rfbReleaseClientIterator(it);
	return n;
}

void dg_view_service(struct dg_view *v, const struct pollfd *p, int n)
{
	if (n > 0 && v->chan >= 0 && p[0].fd == v->chan && p[0].revents)
		take_viewers(v);
	/* Reads one message of each viewer with one waiting, sends the
	 * updates they asked for, and reaps the viewers that left. */
	if (v->n > 0)
		rfbProcessEvents(v->screen, 0);
	v->dirty = false;
}

bool dg_view_due(const struct dg_view *v)
{
	return v && v->dirty && v->n > 0;
}

int dg_view_count(const struct dg_view *v)
{
	return v ? v->n : 0;
}
