/* Live view: the session's screen as it changes (the observer WebSocket)
 * and what the agent did, with the policy's verdicts (the session's
 * recording, which is written as the session goes).
 *
 * Read-only on its own: this page never sends anything on the observer
 * socket (the gateway drops whatever an observer sends anyway). Taking
 * control, for an operator's token, is takeover.js's: its own channel. */
'use strict';

(() => {
  const { el, clear, $ } = DG;
  const id = DG.param('id') || '';
  let session = null;       // the hello message
  let ws = null;
  let ended = false;
  let frameURL = null;
  let lastSeq = 0;
  let shownKeys = new Set();
  let lastAction = null;
  let refreshing = false, refreshAgain = false, refreshTimer = null;

  function setState(cls, text) {
    const s = $('#state');
    s.className = `state-pill ${cls}`;
    s.textContent = text;
    document.body.dataset.state = cls;
  }

  function meta() {
    if (!session) return;
    const m = clear($('#meta'));
    const item = (k, v) => el('span', {}, `${k} `, el('b', {}, v));
    m.append(item('profile', session.profile), item('agent', session.agent), item('policy', session.policy),
      item('size', `${session.size[0]}×${session.size[1]}`));
    if (session.title || session.url) {
      m.append(el('span', { title: session.url || '' }, 'page ', el('b', { id: 'page-title' }, session.title || session.url)));
    }
  }

  function showFrame(blob) {
    const url = URL.createObjectURL(blob);
    const img = $('#frame');
    const old = frameURL;
    frameURL = url;
    img.onload = () => {
      if (old) URL.revokeObjectURL(old);
      img.hidden = false;
      $('#noframe').hidden = true;
      document.body.dataset.frames = String((+document.body.dataset.frames || 0) + 1);
      $('#frame-info').textContent = `${img.naturalWidth}×${img.naturalHeight} · updated ${DG.fmtClock(Date.now())}`;
    };
    img.src = url;
  }

  // The last action, or the one waiting for a human: with the element it is
  // aimed at only while it waits (the screen shown is then the one it was
  // picked on; after an action the page may have moved).
  function drawLast() {
    const svgNode = $('#overlay');
    if (!lastAction || !session) { DG.clear(svgNode); return; }
    DG.drawOverlay(svgNode, lastAction.action, lastAction.screen || session.size, lastAction.verdict, lastAction.pointer,
      lastAction.waiting ? 'WAITING FOR APPROVAL' : undefined, lastAction.waiting ? lastAction.element : null);
  }

  // The activity log, rebuilt from the recording's events (newest first).
  function entries(evs) {
    const out = [];
    const answered = new Set(evs.filter((e) => e.type === 'approval' && e.state !== 'pending').map((e) => e.id));
    for (const e of evs) {
      const t = Date.parse(e.wall);
      if (e.type === 'action') {
        let why = null;
        if (e.verdict !== 'allow') why = `${e.rule}: ${e.reason}`;
        if (e.approved_by) why = `approved by ${e.approved_by} (${e.rule})`;
        if (e.error) why = (why ? why + ' · ' : '') + `failed: ${e.error}`;
        const who = DG.actorLabel(e.actor);
        out.push({ key: `a${e.seq}`, t, verdict: e.verdict, label: e.approved_by ? 'Approved' : null, desc: (who ? `${who}: ` : '') + DG.describe(e.action, e.element), why, kind: 'action' });
      } else if (e.type === 'approval' && e.state === 'pending' && !answered.has(e.id)) {
        out.push({ key: `p${e.seq}`, t, verdict: 'ask', desc: `waiting for approval: ${DG.describe(e.action, e.element)}`, why: `${e.rule}: ${e.reason}`, kind: 'pending' });
      } else if (e.type === 'decision' && e.verdict !== 'allow') {
        const what = e.layer === 'egress' ? e.target || e.host : e.layer === 'browser' ? e.url : `${e.kind || 'download'} ${e.url || ''}`;
        const layer = { egress: 'network', browser: 'page request', 'browser-guard': 'browser' }[e.layer] || e.layer;
        out.push({ key: `d${e.seq}`, t, verdict: 'deny', desc: `blocked ${what}`, why: `${layer} · ${e.rule}`, kind: 'decision' });
      } else if (e.type === 'takeover') {
        out.push({ key: `t${e.seq}`, t, verdict: null, desc: e.state === 'started' ? `${e.by} took control` : `${e.by} handed control back (${e.reason})`, why: null, kind: 'takeover' });
      } else if (e.type === 'lifecycle' && (e.state === 'ready' || e.state === 'ended')) {
        out.push({ key: `l${e.seq}`, t, verdict: null, desc: e.state === 'ready' ? 'desktop ready' : `session ended: ${e.reason}`, why: null, kind: 'lifecycle' });
      }
    }
    return out.reverse();
  }

  function renderLog(evs) {
    const list = entries(evs);
    const log = clear($('#log'));
    $('#log-empty').hidden = list.length > 0;
    for (const it of list) {
      const li = el('li', { class: `${it.kind === 'pending' ? 'pending-row' : ''} ${shownKeys.size && !shownKeys.has(it.key) ? 'fresh' : ''}`.trim(), dataset: { kind: it.kind, verdict: it.verdict || '' } },
        el('span', { class: 't' }, DG.fmtClock(it.t)),
        el('div', { class: 'what' }, el('span', { class: 'desc' }, it.desc), it.verdict ? DG.badge(it.verdict, it.label) : null),
        it.why ? el('div', { class: 'why' }, it.why) : null,
        it.kind === 'pending' ? el('div', { class: 'why' }, el('a', { href: 'approvals.html' }, 'Review in Approvals →')) : null);
      log.append(li);
    }
    shownKeys = new Set(list.map((x) => x.key));
    if (!shownKeys.size) shownKeys.add('-');
  }

  // Reads the recording (debounced; one read at a time).
  async function refreshEvents() {
    if (refreshing) { refreshAgain = true; return; }
    refreshing = true;
    try {
      const evs = await DG.events(id);
      const last = evs[evs.length - 1];
      if (last && last.seq !== lastSeq) {
        lastSeq = last.seq;
        renderLog(evs);
        // The overlay shows the last action, or the one waiting for a human.
        let a = null;
        const answered = new Set(evs.filter((e) => e.type === 'approval' && e.state !== 'pending').map((e) => e.id));
        for (const e of evs) {
          if (e.type === 'action') a = e;
          else if (e.type === 'approval' && e.state === 'pending' && !answered.has(e.id)) a = { seq: e.seq, action: e.action, element: e.element, verdict: 'ask', waiting: true, pointer: a ? a.pointer : null, screen: a ? a.screen : null };
        }
        if (a && (!lastAction || a.seq !== lastAction.seq)) { lastAction = a; drawLast(); }
        // The page the session is on: the last one an event names.
        let page = null;
        for (const e of evs) {
          if (e.type === 'action' && e.url_after !== undefined) page = { url: e.url_after, title: e.title_after };
          else if ((e.type === 'page' || (e.type === 'lifecycle' && e.state === 'ready')) && e.url) page = { url: e.url, title: e.title };
        }
        if (page && session && (page.url !== session.url || page.title !== session.title)) {
          session.url = page.url;
          session.title = page.title;
          meta();
        }
        const c = DG.countVerdicts(evs);
        document.body.dataset.actions = String(c.actions);
        $('#log-title').textContent = `Activity · ${DG.plural(c.actions, 'action')}, ${c.deny} denied, ${c.asked} asked`;
      }
    } catch (e) {
      if (!(e instanceof DG.ApiError && e.status === 404)) DG.showError(e);
    } finally {
      refreshing = false;
      if (refreshAgain) { refreshAgain = false; soon(); }
    }
  }
  function soon() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refreshEvents, 150);
  }

  function showEnded(reason) {
    ended = true;
    if (window.DGLiveVNC) window.DGLiveVNC.stop();
    setState('ended', 'Ended');
    const b = $('#ended-banner');
    clear(b).append(el('div', {},
      el('strong', {}, 'This session has ended.'),
      el('p', {}, reason ? `Reason: ${reason}. ` : '', 'Its recording is sealed: ',
        el('a', { href: `player.html?id=${encodeURIComponent(id)}` }, 'replay it step by step'), '.')));
    b.hidden = false;
    $('#rec-link').textContent = 'Replay';
    soon();
  }

  function connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    // The token travels as a subprotocol: browsers cannot set headers on
    // WebSockets, and it must never be in the URL.
    try {
      ws = new WebSocket(`${proto}//${location.host}/v1/sessions/${encodeURIComponent(id)}/watch`,
        ['deskgate.v1', 'bearer.' + DG.token()]);
    } catch (e) {
      // A token with characters a subprotocol cannot carry.
      setState('', 'Cannot connect');
      DG.showError(new Error(`The live view cannot open its socket with this token: ${e.message}`));
      return;
    }
    ws.binaryType = 'blob';
    ws.onopen = () => setState('live', 'Live');
    ws.onmessage = (m) => {
      if (m.data instanceof Blob) { showFrame(new Blob([m.data], { type: 'image/png' })); return; }
      let j;
      try { j = JSON.parse(m.data); } catch { return; }
      switch (j.type) {
        case 'hello':
          session = j;
          meta();
          drawLast();
          break;
        case 'event':
          if (session && (j.url || j.title)) {
            if (j.url) session.url = j.url;
            if (j.title) session.title = j.title;
            meta();
          }
          soon();
          break;
        case 'ended':
          showEnded(j.reason);
          break;
        default: // action, approval, decision: the recording has the details
          soon();
      }
    };
    ws.onclose = async () => {
      if (ended) return;
      // Gone for good, or a hiccup? The session list says.
      try {
        await DG.getJSON(`/v1/sessions/${encodeURIComponent(id)}`);
        setState('', 'Reconnecting');
        setTimeout(connect, 1500);
      } catch (e) {
        if (e instanceof DG.ApiError && e.status === 404) showEnded(null);
        else setState('', 'Disconnected');
      }
    };
  }

  DG.start(async () => {
    if (!/^[a-z0-9-]{1,80}$/.test(id)) {
      DG.showError(new Error('No session given: open the live view from the Sessions page.'));
      return;
    }
    $('#sid').textContent = id;
    $('#rec-link').href = `player.html?id=${encodeURIComponent(id)}`;
    document.title = `Live ${DG.shortId(id)} · deskgate`;
    connect();
    window.DGLiveSession = id; // for live-vnc.js, if it loads later
    if (window.DGLiveVNC) window.DGLiveVNC.start(id);
    DGTakeover.mount({ id, toolbar: $('.toolbar'), screen: $('#screen'), target: () => $('#frame'), status: $('#takeover-status') });
    refreshEvents();
    // Refused actions reach observers only through the recording: poll it.
    DG.every(1500, () => { if (!document.hidden) refreshEvents(); });
    document.body.dataset.ready = '1';
  });
})();
