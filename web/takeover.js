/* Live view: taking control (docs/web.md#taking-control).
 *
 * For a token that may (an operator or an admin: GET .../takeover says
 * may_take_control), a "Take control" button; once the gateway gave
 * control (POST .../takeover) and the operator's channel is open
 * (/v1/sessions/{id}/operate), clicks, wheel turns and keys on the screen
 * become canonical actions, decided by the session's policy like the
 * agent's: a refusal is shown with its rule. "Hand back" (DELETE), closing
 * the page or the gateway's timeouts return control to the agent.
 *
 * Kept apart from live.js, which gives it where the screen is shown
 * (target(): the element, its natural size the screen's pixels), so the
 * screen's element may change without touching this. The page never reads
 * the operator's clipboard: a paste is not forwarded (docs/policy.md#clipboard).
 */
'use strict';

const DGTakeover = (() => {
  const { el, clear, $ } = DG;

  // Browser key names to the gateway's (X keysyms and xdotool's aliases).
  const KEYS = {
    Enter: 'Return', Backspace: 'BackSpace', Tab: 'Tab', Escape: 'Escape', Delete: 'Delete',
    ArrowLeft: 'Left', ArrowRight: 'Right', ArrowUp: 'Up', ArrowDown: 'Down', Home: 'Home',
    End: 'End', PageUp: 'Page_Up', PageDown: 'Page_Down', Insert: 'Insert', ' ': 'space',
  };
  for (let i = 1; i <= 12; i++) KEYS[`F${i}`] = `F${i}`;

  // A keydown as an action, or null for what is not sent (a lone modifier,
  // a paste: the operator's clipboard stays theirs).
  function keyAction(e) {
    if (['Shift', 'Control', 'Alt', 'Meta', 'AltGraph', 'CapsLock'].includes(e.key)) return null;
    const mods = [e.ctrlKey && 'ctrl', e.altKey && 'alt', e.metaKey && 'super'].filter(Boolean);
    if (!mods.length && e.key.length === 1) return { type: 'type', text: e.key };
    let name = KEYS[e.key] || (e.key.length === 1 ? e.key.toLowerCase() : null);
    if (!name) return null;
    if (mods.length && ['v', 'V'].includes(e.key) && (e.ctrlKey || e.metaKey)) return null;
    if (e.shiftKey && mods.length) mods.push('shift');
    return { type: 'key', keys: [...mods, name].join('+') };
  }

  // opts: {id, toolbar: where the button goes, target(): the element
  // showing the screen (an <img> or <canvas>: its natural size is the
  // screen's), status: where refusals are shown}.
  function mount(opts) {
    const btn = el('button', { type: 'button', class: 'btn btn-small', id: 'takeover-btn', hidden: true }, 'Take control');
    const note = el('span', { class: 'muted', id: 'takeover-note' });
    opts.toolbar.prepend(btn, note);
    let ws = null, inControl = false, busy = false;
    const base = `/v1/sessions/${encodeURIComponent(opts.id)}/takeover`;

    function say(text, cls) {
      const s = opts.status;
      clear(s).append(text);
      s.className = `banner ${cls || 'banner-info'}`;
      s.hidden = !text;
    }

    function render(state) {
      document.body.dataset.control = inControl ? '1' : '';
      btn.textContent = inControl ? 'Hand back' : 'Take control';
      btn.disabled = busy || (!inControl && !!(state && state.takeover));
      note.textContent = !inControl && state && state.takeover ? `${state.takeover.operator} has control` : '';
    }

    async function refresh() {
      if (inControl || busy) return;
      try {
        const st = await DG.getJSON(base);
        btn.hidden = !st.may_take_control;
        render(st);
      } catch { /* the live view says when the session is gone */ }
    }

    // Screen pixels of a mouse event on the target.
    function point(e) {
      const t = opts.target();
      const r = t.getBoundingClientRect();
      const w = t.naturalWidth || t.width, h = t.naturalHeight || t.height;
      const x = Math.floor((e.clientX - r.left) * w / r.width), y = Math.floor((e.clientY - r.top) * h / r.height);
      return x >= 0 && y >= 0 && x < w && y < h ? { x, y } : null;
    }

    function send(action) {
      if (!inControl || !ws || ws.readyState !== WebSocket.OPEN) return;
      ws.send(JSON.stringify(action));
    }

    function onClick(e) {
      if (!inControl) return;
      e.preventDefault();
      const p = point(e);
      if (p) send({ type: 'click', x: p.x, y: p.y, button: e.button === 2 ? 'right' : 'left' });
    }
    function onWheel(e) {
      if (!inControl) return;
      e.preventDefault();
      const p = point(e);
      if (p) send({ type: 'scroll', x: p.x, y: p.y, dx: 0, dy: e.deltaY > 0 ? 3 : -3 });
    }
    function onKey(e) {
      if (!inControl || e.target.closest('input, textarea, select')) return;
      const a = keyAction(e);
      if (!a) return;
      e.preventDefault();
      send(a);
    }
    function onPaste(e) {
      if (!inControl) return;
      e.preventDefault();
      say('Paste is not forwarded: the clipboard stays off (type the text instead).', 'banner-warn');
    }

    function lose(why) {
      inControl = false;
      if (ws) { ws.onclose = null; try { ws.close(); } catch { /* closed */ } }
      ws = null;
      if (why) say(`Control returned to the agent: ${why}.`, 'banner-info');
      render(null);
      refresh();
    }

    async function take() {
      busy = true;
      render(null);
      try {
        await DG.api(base, { method: 'POST' });
        const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
        ws = new WebSocket(`${proto}//${location.host}/v1/sessions/${encodeURIComponent(opts.id)}/operate`,
          ['deskgate.v1', 'bearer.' + DG.token()]);
        await new Promise((resolve, reject) => { ws.onopen = resolve; ws.onerror = () => reject(new Error('the operator channel did not open')); });
        inControl = true;
        say('You have control: clicks and keys on the screen go to the desktop, through the session\'s policy.', 'banner-info');
        ws.onmessage = (m) => {
          if (typeof m.data !== 'string') return;
          let j;
          try { j = JSON.parse(m.data); } catch { return; }
          if (j.type === 'result' && !j.ok) {
            say(j.verdict && j.verdict !== 'allow' ? `Refused by ${j.rule}: ${j.reason}` : `Failed: ${j.error}`, 'banner-danger');
            document.body.dataset.refusals = String((+document.body.dataset.refusals || 0) + 1);
          } else if (j.type === 'error') {
            say(`Not sent: ${j.error.message}`, 'banner-danger');
          } else if (j.type === 'takeover' && j.state === 'ended') {
            lose(j.reason);
          }
        };
        ws.onclose = () => lose('the operator channel closed');
      } catch (e) {
        say(`Could not take control: ${e.message}`, 'banner-danger');
        if (ws) { ws.onclose = null; ws.close(); ws = null; }
      } finally {
        busy = false;
        render(null);
      }
    }

    async function handBack() {
      busy = true;
      try {
        await DG.api(base, { method: 'DELETE' });
      } catch { /* already ended: the channel says why */ }
      busy = false;
      lose('you handed it back');
    }

    btn.addEventListener('click', () => (inControl ? handBack() : take()));
    const screen = opts.screen;
    screen.addEventListener('click', onClick);
    screen.addEventListener('contextmenu', (e) => { if (inControl) { e.preventDefault(); onClick(e); } });
    screen.addEventListener('wheel', onWheel, { passive: false });
    document.addEventListener('keydown', onKey);
    document.addEventListener('paste', onPaste);
    refresh();
    DG.every(3000, () => { if (!document.hidden) refresh(); });
  }

  return { mount, keyAction };
})();
