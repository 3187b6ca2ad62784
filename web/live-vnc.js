/* The live desktop: the session's screen as it is now, continuously
 * (noVNC's RFB client over GET /v1/sessions/{id}/vnc, subprotocol
 * "binary", the token beside it as on the observer socket: never in the
 * URL), beside the agent's screenshots.
 *
 * View-only: noVNC sends no pointer, key or clipboard input (viewOnly), and
 * the worker's RFB server drops any a viewer sends anyway. It starts once
 * live.js started the page (the viewer signed in), whichever loaded first. */
import RFB from './novnc/core/rfb.js';

let rfb = null;
let stopped = false;

function setState(state, text) {
  document.body.dataset.vnc = state;
  document.getElementById('vnc-info').textContent = text;
}

function connect(id) {
  const target = document.getElementById('vnc');
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  try {
    rfb = new RFB(target, `${proto}//${location.host}/v1/sessions/${encodeURIComponent(id)}/vnc`,
      { shared: true, wsProtocols: ['binary', 'bearer.' + DG.token()] });
  } catch (e) {
    setState('failed', `cannot connect: ${e.message}`);
    return;
  }
  rfb.viewOnly = true;
  rfb.focusOnClick = false;
  rfb.scaleViewport = true;
  rfb.showDotCursor = false;
  // The worker's server sends no JPEG (exact pixels); cheap zlib levels.
  rfb.compressionLevel = 2;
  rfb.addEventListener('connect', () => setState('connected', `live · since ${DG.fmtClock(Date.now())}`));
  rfb.addEventListener('disconnect', () => {
    rfb = null;
    if (stopped) { setState('ended', 'ended'); return; }
    // The session may have ended (live.js shows it), or the gateway
    // restarted: try again while the session exists.
    setState('disconnected', 'reconnecting');
    setTimeout(async () => {
      try {
        await DG.getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
        if (!stopped) connect(id);
      } catch {
        setState('ended', 'ended');
      }
    }, 1500);
  });
}

let started = false;
window.DGLiveVNC = {
  start(id) {
    if (started) return;
    started = true;
    setState('connecting', 'connecting');
    connect(id);
  },
  stop() { stopped = true; if (rfb) rfb.disconnect(); },
};
// live.js may have started the page before this module loaded.
if (window.DGLiveSession) window.DGLiveVNC.start(window.DGLiveSession);
