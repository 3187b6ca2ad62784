/* deskgate web: what every page shares.
 *
 * - The viewer's token lives in sessionStorage (this tab only, gone when the
 *   tab closes) and goes to the gateway in the Authorization header, or as
 *   the WebSocket subprotocol "bearer.<token>": never in a URL.
 * - Everything shown comes from the API and is inserted as text (el(),
 *   textContent), never as HTML.
 * - The pages only read, except the approval buttons and taking control
 *   (takeover.js, an operator's): nothing here sends anything to a session.
 */
'use strict';

const DG = (() => {
  const TOKEN_KEY = 'deskgate.token';

  /* ---- DOM helpers ------------------------------------------------------ */

  // el('a', {href: '/', class: 'x'}, 'text', child): attributes set with
  // setAttribute (except on*: never), children appended as text or nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) throw new Error('el: no inline handlers');
      if (k === 'class') e.className = v;
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else if (v === true) e.setAttribute(k, '');
      else e.setAttribute(k, String(v));
    }
    append(e, children);
    return e;
  }

  function append(parent, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      parent.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return parent;
  }

  const SVG_NS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined) continue;
      e.setAttribute(k, String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
    return node;
  }

  const $ = (sel, root = document) => root.querySelector(sel);

  /* ---- the token -------------------------------------------------------- */

  function token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  }
  function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
  function clearToken() { try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* none */ } }

  /* ---- the API ---------------------------------------------------------- */

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // fetch() with the token; throws ApiError on any non-2xx status (401
  // also signs out: the token is no longer valid).
  async function api(path, opts = {}) {
    const headers = Object.assign({}, opts.headers || {});
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    let body = opts.body;
    if (body !== undefined && typeof body !== 'string') {
      body = JSON.stringify(body);
      headers['Content-Type'] = 'application/json';
    }
    const res = await fetch(path, {
      method: opts.method || 'GET', headers, body, cache: 'no-store',
      credentials: 'omit', referrerPolicy: 'no-referrer',
    });
    if (!res.ok) {
      let code = 'http_' + res.status, message = res.statusText || 'request failed';
      try {
        const j = await res.json();
        if (j && j.error) { code = j.error.code || code; message = j.error.message || message; }
      } catch { /* not JSON */ }
      if (res.status === 401 && !opts.noSignOut) signedOut('Your token was refused; sign in again.');
      throw new ApiError(res.status, code, message);
    }
    return res;
  }
  const getJSON = async (path) => (await api(path)).json();

  // The events of a recording, parsed; a torn last line (no newline: the
  // writer died mid-line) is reported by the verifier, skipped here.
  async function events(id) {
    const text = await (await api(`/v1/recordings/${encodeURIComponent(id)}/events`)).text();
    const out = [];
    const lines = text.split('\n');
    if (!text.endsWith('\n')) lines.pop();
    for (const line of lines) {
      if (!line.trim()) continue;
      try { out.push(JSON.parse(line)); } catch { /* a broken line: verify reports it */ }
    }
    return out;
  }

  // Frames are fetched with the token and shown through blob: URLs, kept
  // for the life of the page (a recording names each frame once).
  const frameCache = new Map();
  function frameURL(recording, hash) {
    if (!hash || !/^[0-9a-f]{64}$/.test(hash)) return Promise.resolve(null);
    const key = recording + '/' + hash;
    if (!frameCache.has(key)) {
      const p = api(`/v1/recordings/${encodeURIComponent(recording)}/frames/${hash}.png`)
        .then((r) => r.blob())
        .then((b) => URL.createObjectURL(b))
        .catch((e) => { frameCache.delete(key); throw e; });
      frameCache.set(key, p);
    }
    return frameCache.get(key);
  }

  /* ---- formatting ------------------------------------------------------- */

  const pad = (n, w = 2) => String(n).padStart(w, '0');
  function fmtTime(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtClock(ms) {
    const d = new Date(ms);
    return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }
  function fmtDuration(ms) {
    if (ms === null || ms === undefined || Number.isNaN(ms) || ms < 0) return '—';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = Math.round(ms / 1000);
    if (s < 60) return `${s} s`;
    const m = Math.floor(s / 60);
    if (m < 60) return `${m} min ${pad(s % 60)} s`;
    return `${Math.floor(m / 60)} h ${pad(m % 60)} min`;
  }
  function fmtAgo(ms) {
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 10) return 'just now';
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    return `${Math.floor(s / 86400)} d ago`;
  }
  function fmtBytes(n) {
    if (n >= 1 << 30 && n % (1 << 30) === 0) return `${n / (1 << 30)} GiB`;
    if (n >= 1 << 20) return `${+(n / (1 << 20)).toFixed(1)} MiB`;
    if (n >= 1024) return `${+(n / 1024).toFixed(1)} KiB`;
    return `${n} bytes`;
  }
  const shortId = (id) => (id && id.length > 12 ? id.slice(0, 8) + '…' : id || '');
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many || one + 's'}`;

  /* ---- actions ---------------------------------------------------------- */

  const KEY_NAMES = {
    Control_L: 'ctrl', Control_R: 'ctrl', Shift_L: 'shift', Shift_R: 'shift', Alt_L: 'alt',
    Alt_R: 'alt', Super_L: 'super', Super_R: 'super', Meta_L: 'meta', Meta_R: 'meta',
    Return: 'Enter', BackSpace: 'Backspace', Escape: 'Esc', Page_Down: 'PageDown',
    Page_Up: 'PageUp',
  };
  // "Control_L+Alt_L+Delete ctrl+a" -> [["ctrl","alt","Delete"],["ctrl","a"]]
  function chords(keys) {
    return String(keys || '').split(/\s+/).filter(Boolean)
      .map((c) => c.split('+').map((k) => KEY_NAMES[k] || k));
  }

  // Typed text as shown: the text, or its length when redacted.
  function typedText(text) {
    if (text && typeof text === 'object') {
      if (text.redacted) return { redacted: true, length: text.length, label: `${plural(text.length, 'character')} (redacted)` };
      if (text.omitted) return { redacted: true, length: null, label: `${fmtBytes(text.bytes)} (omitted)` };
    }
    const s = typeof text === 'string' ? text : '';
    return { redacted: false, length: [...s].length, text: s, label: `“${s.length > 80 ? s.slice(0, 79) + '…' : s}”` };
  }

  // Text that came from a page or an agent (an element's role or name, a tab's
  // title), for one line of display: control characters and line breaks
  // become spaces, bidirectional controls (which could make it read
  // backwards) are shown as U+FFFD, and it is cut after max characters.
  // Display only: it is always inserted as text, never as HTML.
  function oneLine(s, max = 80) {
    const t = String(s === null || s === undefined ? '' : s)
      .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, ' ')
      .replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, '\ufffd')
      .replace(/\s+/g, ' ').trim();
    const cps = [...t];
    return cps.length > max ? cps.slice(0, max - 1).join('') + '…' : t;
  }

  // An element an action was aimed at, as the recording has it ("element":
  // {ref, role, name, box, point}): `button “Add to cart”`, or just the
  // role or the name when one is missing; '' when it has neither.
  function elementName(e, max = 60) {
    if (!e || typeof e !== 'object') return '';
    const role = oneLine(e.role, 30), name = oneLine(e.name, max);
    return [role, name ? `“${name}”` : ''].filter(Boolean).join(' ');
  }
  // The element's reference, or null when it has none that reads as one.
  const elementRef = (e) => (e && typeof e === 'object' && typeof e.ref === 'string' && e.ref ? oneLine(e.ref, 24) : null);
  // [x, y, w, h] with four finite numbers and no negative size, or null.
  function elementBox(e) {
    const b = e && typeof e === 'object' ? e.box : null;
    return Array.isArray(b) && b.length === 4 && b.every((v) => typeof v === 'number' && Number.isFinite(v)) && b[2] >= 0 && b[3] >= 0 ? b : null;
  }
  // [x, y] with two finite numbers, or null.
  function elementPoint(e) {
    const p = e && typeof e === 'object' ? e.point : null;
    return Array.isArray(p) && p.length === 2 && p.every((v) => typeof v === 'number' && Number.isFinite(v)) ? p : null;
  }

  // A browser tab's id as shown in a line: whole when short, else its first
  // four characters and an ellipsis (the step's details show it whole).
  function tabId(t) {
    const s = oneLine(t, 64);
    return [...s].length > 8 ? [...s].slice(0, 4).join('') + '…' : s;
  }

  // A form value as shown: a string like typed text (quoted, or its length
  // when redacted), a number or a boolean as itself.
  function valueText(v) {
    if (typeof v === 'number' || typeof v === 'boolean') return String(v);
    if (v && typeof v === 'object') return typedText(v).label;
    return typedText(typeof v === 'string' ? oneLine(v, 200) : '').label;
  }

  const BUTTONS = { left: '', middle: 'middle ', right: 'right ', back: 'back ', forward: 'forward ' };
  // A one-line human description of a canonical action. element: what the
  // recording says the action was aimed at (optional), named beside its
  // reference: `click ref_7 (button “Add to cart”) at (640, 300)`.
  function describe(a, element) {
    if (!a || typeof a !== 'object') return 'unknown action';
    const mods = Array.isArray(a.modifiers) && a.modifiers.length ? a.modifiers.join('+') + '+' : '';
    const at = (x, y) => `at (${x}, ${y})`;
    const hasXY = a.x !== undefined && a.y !== undefined;
    // The element a ref names: "ref_7 (textbox “Email”)".
    const target = () => {
      const ref = typeof a.ref === 'string' && a.ref ? oneLine(a.ref, 24) : elementRef(element);
      const e = element && (!elementRef(element) || elementRef(element) === ref) ? elementName(element) : '';
      if (!ref) return e || 'an element';
      return e ? `${ref} (${e})` : ref;
    };
    switch (a.type) {
      case 'click': {
        const n = a.count === 2 ? 'double ' : a.count === 3 ? 'triple ' : '';
        const on = !a.ref && element ? ` on ${target()}` : ''; // aimed by its point, the element under it
        return `${mods}${n}${BUTTONS[a.button || 'left'] || ''}click ${a.ref ? target() + ' ' : ''}${at(a.x, a.y)}${on}`;
      }
      case 'move': return a.ref ? `move the pointer to ${target()}` + (hasXY ? ` ${at(a.x, a.y)}` : '')
        : `move the pointer to (${a.x}, ${a.y})` + (element ? ` over ${target()}` : '');
      case 'drag': {
        const p = Array.isArray(a.path) ? a.path : [];
        const s = p[0] || [], e = p[p.length - 1] || [];
        return `drag from (${s[0]}, ${s[1]}) to (${e[0]}, ${e[1]})` + (p.length > 2 ? ` through ${p.length - 2} more points` : '');
      }
      case 'mouse_down': return `press the ${a.button || 'left'} button` + (a.x !== undefined ? ' ' + at(a.x, a.y) : '');
      case 'mouse_up': return `release the ${a.button || 'left'} button` + (a.x !== undefined ? ' ' + at(a.x, a.y) : '');
      case 'scroll': {
        const parts = [];
        if (a.dy) parts.push(`${Math.abs(a.dy)} ${a.dy > 0 ? 'down' : 'up'}`);
        if (a.dx) parts.push(`${Math.abs(a.dx)} ${a.dx > 0 ? 'right' : 'left'}`);
        return `scroll ${parts.join(', ') || '0'} ${at(a.x, a.y)}`;
      }
      case 'type': return `type ${typedText(a.text).label}`;
      case 'key': return `press ${chords(a.keys).map((c) => c.join('+')).join(', then ')}`;
      case 'hold_key': return `hold ${chords(a.keys).map((c) => c.join('+')).join(' ')} for ${a.ms} ms`;
      case 'navigate': return `go to ${a.url}`;
      case 'back': return 'go back';
      case 'forward': return 'go forward';
      case 'reload': return 'reload the page';
      case 'screenshot': return Array.isArray(a.region) ? `take a screenshot of (${a.region.join(', ')})` : 'take a screenshot';
      case 'cursor_position': return 'ask where the pointer is';
      case 'zoom': return `zoom into (${(a.region || []).join(', ')})`;
      case 'wait': return `wait ${a.ms} ms`;
      case 'exec': return `run ${(Array.isArray(a.argv) ? a.argv : []).map(shellWord).join(' ')}`;
      case 'read_page': return a.ref ? `read the accessibility tree of ${target()}` : `read the page's accessibility tree (${oneLine(a.filter || 'visible', 20)} elements)`;
      case 'get_page_text': return "read the page's text";
      case 'find': return `find ${typedText(typeof a.query === 'string' ? oneLine(a.query, 200) : a.query).label} on the page`;
      case 'list_tabs': return 'list the open tabs';
      case 'new_tab': return 'open a new tab';
      case 'switch_tab': return `switch to tab ${tabId(a.tab)}`;
      case 'close_tab': return `close tab ${tabId(a.tab)}`;
      case 'read_console': return 'read the console';
      case 'read_network': return 'read the network requests';
      case 'scroll_to': return `scroll ${target()} into view`;
      case 'form_input': return `set ${target()} to ${valueText(a.value)}`;
      case 'file_upload': {
        const n = Array.isArray(a.paths) ? a.paths.length : 0;
        return `upload ${plural(n, 'file')} into ${target()}`;
      }
      case 'javascript': {
        const c = a.code;
        const n = typeof c === 'string' ? [...c].length : c && typeof c === 'object' && typeof c.length === 'number' ? c.length : null;
        return n === null ? 'run JavaScript' : `run JavaScript (${plural(n, 'character')})`;
      }
      default: return oneLine(a.type || 'unknown action', 40);
    }
  }
  function shellWord(w) {
    const s = String(w);
    return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
  }

  /* ---- verdicts and verify results ------------------------------------- */

  const VERDICT_LABEL = { allow: 'Allowed', deny: 'Denied', ask: 'Asked' };
  function badge(verdict, text) {
    const v = ['allow', 'deny', 'ask'].includes(verdict) ? verdict : 'other';
    return el('span', { class: `badge badge-${v}` }, text || VERDICT_LABEL[verdict] || String(verdict || '?'));
  }

  // What a recording's verify result means, for people: level ok | warn |
  // danger | info, a short label and a sentence.
  function verifyInfo(v) {
    const s = (v && v.status) || 'unknown';
    const msg = (v && v.message) || '';
    switch (s) {
      case 'sealed': return { level: 'ok', label: 'Sealed', title: 'Sealed and verified', text: 'Every event and frame checks out and the gateway signed the end of the session.', detail: msg };
      case 'sealed-after-crash': return { level: 'warn', label: 'Sealed after crash', title: 'Sealed after a crash', text: `The gateway stopped during this session. Events up to seq ${v.last_seq} are intact and signed; what happened after that was not recorded.`, detail: msg };
      case 'unsealed': return { level: 'danger', label: 'Unsealed', title: 'Not sealed: this recording may be incomplete', text: `The chain is intact up to seq ${v.last_seq}, but nothing vouches for the end: the file may have been cut short. Do not rely on it as a complete record.`, detail: msg };
      case 'unchecked': return { level: 'warn', label: 'Unchecked', title: 'Signature not checked', text: 'The events hold together but the seal was not checked against a key.', detail: msg };
      case 'bad': return { level: 'danger', label: 'Broken', title: 'Broken recording: it was changed or damaged', text: `Verification fails at seq ${v.bad_seq}. Events from there on cannot be trusted.`, detail: msg };
      case 'live': return { level: 'info', label: 'Live', title: 'The session is still running', text: 'Its recording is sealed when the session ends.', detail: '' };
      case 'unreadable': return { level: 'danger', label: 'Unreadable', title: 'The recording cannot be read', text: msg, detail: '' };
      default: return { level: 'warn', label: s, title: `Verify status: ${s}`, text: msg, detail: '' };
    }
  }
  function verifyBadge(v) {
    const i = verifyInfo(v);
    return el('span', { class: `badge badge-${i.level}`, title: i.detail || i.text }, i.label);
  }

  /* ---- steps of a recording -------------------------------------------- */

  // Groups a recording's events into steps, in recording order: one per
  // action event (kind 'action', type its action's type), with the
  // approval events and the browser/egress decisions and page changes that
  // came before it (since the previous action); and one per command a CDP
  // client sent (a cdp event: kind and type 'cdp', action the canonical
  // action it amounted to or {}), with `after`, the cdp_frame showing the
  // screen it left (cdpFrameAfter), or null. Also returns the session's
  // lifecycle facts, and cdpClients: the token name each CDP client
  // connected with, by client number.
  // An action's actor as people read it: "NAME (operator)" for a human's,
  // null for the agent's (the usual case, not repeated on every line).
  function actorLabel(actor) {
    return typeof actor === 'string' && actor.startsWith('human:') ? `${oneLine(actor.slice(6), 64)} (operator)` : null;
  }

  function buildSteps(evs) {
    const steps = [];
    let pending = { approvals: [], decisions: [], pages: [] };
    let waiting = []; // CDP steps whose frame has not come yet
    const info = {
      created: null, ready: null, ended: null, seal: null, first: evs[0] || null, last: evs[evs.length - 1] || null,
      cdpClients: new Map(), takeovers: [],
    };
    for (const e of evs) {
      if (e.type === 'action') {
        const approval = pending.approvals.find((x) => x.state === 'pending') || null;
        const outcome = pending.approvals.find((x) => x.state !== 'pending') || null;
        const action = e.action || {};
        // Who acted: "agent", or "human:NAME" for an operator holding
        // control (recordings before takeovers say nothing: the agent).
        const actor = typeof e.actor === 'string' ? e.actor : 'agent';
        steps.push({
          n: steps.length + 1, kind: 'action', type: action.type, ev: e, action, verdict: e.verdict,
          asked: !!approval, approval, outcome, decisions: pending.decisions, pages: pending.pages,
          actor, human: actor.startsWith('human:') ? actor.slice(6) : null,
        });
        pending = { approvals: [], decisions: [], pages: [] };
      } else if (e.type === 'cdp') {
        const s = {
          n: steps.length + 1, kind: 'cdp', type: 'cdp', ev: e, action: e.action && typeof e.action === 'object' ? e.action : {},
          verdict: e.verdict, asked: false, approval: null, outcome: null, decisions: [], pages: [], after: null,
        };
        steps.push(s);
        if (e.verdict === 'allow' && Number.isInteger(e.req)) waiting.push(s);
      } else if (e.type === 'cdp_frame') {
        waiting = cdpFrameAfter(waiting, e);
      } else if (e.type === 'cdp_client') {
        if (e.state === 'open') info.cdpClients.set(e.client, e.by);
      } else if (e.type === 'approval') {
        pending.approvals.push(e);
      } else if (e.type === 'decision') {
        pending.decisions.push(e);
      } else if (e.type === 'page') {
        pending.pages.push(e);
      } else if (e.type === 'takeover') {
        info.takeovers.push(e);
      } else if (e.type === 'lifecycle') {
        info[e.state] = e;
      } else if (e.type === 'seal') {
        info.seal = e;
      }
    }
    info.trailing = pending;
    return { steps, info };
  }

  // Gives frame event f (a cdp_frame: the screen once CDP commands
  // first_req..last_req had run) to the waiting CDP steps it covers, and
  // returns those still waiting: the commands after last_req. A command
  // below first_req is dropped without one: the first frame past it does
  // not show what it did. Refused commands never wait: they reached no
  // browser. The frame of a client attaching (null, null) covers none.
  function cdpFrameAfter(waiting, f) {
    if (!Number.isInteger(f.first_req) || !Number.isInteger(f.last_req)) return waiting;
    for (const s of waiting) if (s.ev.req >= f.first_req && s.ev.req <= f.last_req) s.after = f;
    return waiting.filter((s) => s.ev.req > f.last_req);
  }

  // Counts of a recording's actions: {actions, allow, deny, ask} by
  // recorded verdict (an approved action stays "ask", a refused approval is
  // "deny"), and asked: how many waited for a human.
  function countVerdicts(evs) {
    const c = { actions: 0, allow: 0, deny: 0, ask: 0, asked: 0 };
    for (const e of evs) {
      if (e.type === 'approval' && e.state === 'pending') c.asked++;
      if (e.type !== 'action') continue;
      c.actions++;
      if (c[e.verdict] !== undefined) c[e.verdict]++;
    }
    return c;
  }

  /* ---- the overlay: what an action did, drawn over its screen ----------- */

  const COLORS = { allow: '#1f6feb', deny: '#d1242f', ask: '#b06000' };

  // Draws action a over a screen of size [w, h] into the <svg> node
  // (viewBox w x h, stretched over the frame image, which has the screen's
  // proportions): the click point, the drag path, the scroll direction,
  // the typed text (or its length when redacted) or key chord at the
  // pointer, and for other actions a banner. Marks and labels are sized in
  // CSS pixels of the svg as laid out now, so they stay readable however
  // small the frame is shown. pointer: where the pointer was ([x, y]).
  // tag: the corner label (default: from the verdict; null: none).
  // element: the element the action was aimed at ({ref, role, name, box,
  // point}, box and point in screen pixels), drawn as its box labelled with
  // its role and name; pass it only for the screen it was picked on (the
  // one before the action): on a later one the page may have moved.
  // Returns the svg.
  function drawOverlay(node, a, screen, verdict, pointer, tag, element) {
    clear(node);
    const [w, h] = Array.isArray(screen) && screen[0] > 0 ? screen : [1280, 800];
    node.setAttribute('viewBox', `0 0 ${w} ${h}`);
    node.setAttribute('preserveAspectRatio', 'none');
    if (!a || !a.type) return node;
    const color = COLORS[verdict] || COLORS.allow;
    const shown = node.getBoundingClientRect().width;
    const u = w / (shown > 0 ? shown : 640); // one CSS pixel, in screen pixels
    const g = svg('g', { class: 'overlay', 'data-action': a.type, 'data-verdict': verdict || '' });
    node.append(g);
    const clamp = (v, lo, hi) => Math.min(Math.max(v, lo), Math.max(lo, hi));

    // A text tag: its box fits the text as rendered.
    const label = (x, y, text, anchor = 'start') => {
      const fs = 13 * u, padX = 6 * u, padY = 4 * u;
      const t = svg('text', { 'font-size': fs, fill: '#fff', class: 'ov-label', 'dominant-baseline': 'central' }, text);
      const box = svg('rect', { rx: 3 * u, fill: color, opacity: 0.95 });
      const tag = svg('g', { class: 'ov-tag' }, box, t);
      g.append(tag);
      let tw = 0;
      try { tw = t.getComputedTextLength(); } catch { tw = 0; }
      if (!tw) tw = text.length * fs * 0.6;
      const bw = tw + 2 * padX, bh = fs + 2 * padY;
      const bx = clamp(anchor === 'middle' ? x - bw / 2 : anchor === 'end' ? x - bw : x, 2 * u, w - bw - 2 * u);
      const by = clamp(y - bh / 2, 2 * u, h - bh - 2 * u);
      for (const [k, v] of Object.entries({ x: bx, y: by, width: bw, height: bh })) box.setAttribute(k, v);
      t.setAttribute('x', bx + padX);
      t.setAttribute('y', by + bh / 2);
      return tag;
    };
    // A tag beside a point, on whichever side has room.
    const tagNear = (x, y, text) => (x < w * 0.7 ? label(x + 20 * u, y - 18 * u, text, 'start') : label(x - 20 * u, y - 18 * u, text, 'end'));
    const ring = (x, y, r, extra = {}) => svg('circle', Object.assign({ cx: x, cy: y, r, fill: 'none', stroke: color, 'stroke-width': 3 * u }, extra));
    const dot = (x, y, r = 3.5 * u) => svg('circle', { cx: x, cy: y, r, fill: color, stroke: '#fff', 'stroke-width': 1.5 * u });
    const arrowHead = (x1, y1, x2, y2, size = 12 * u) => {
      const ang = Math.atan2(y2 - y1, x2 - x1);
      const p = (d, sgn) => `${x2 - size * Math.cos(ang + sgn * d)},${y2 - size * Math.sin(ang + sgn * d)}`;
      return svg('polygon', { points: `${x2},${y2} ${p(0.45, 1)} ${p(0.45, -1)}`, fill: color });
    };
    const banner = (text) => label(w / 2, 24 * u, text.length > 100 ? text.slice(0, 99) + '…' : text, 'middle');
    const hasXY = typeof a.x === 'number' && typeof a.y === 'number';
    const px = Array.isArray(pointer) ? pointer[0] : null, py = Array.isArray(pointer) ? pointer[1] : null;
    const ePoint = elementPoint(element);

    // The element's box, under the marks, its label below it (above when
    // there is no room): the action's own tag goes above right of its point.
    const eBox = elementBox(element);
    if (eBox) {
      const [bx, by, bw, bh] = eBox;
      g.append(svg('rect', {
        class: 'ov-element', 'data-ref': elementRef(element), x: bx, y: by, width: bw, height: bh,
        fill: color, 'fill-opacity': 0.1, stroke: color, 'stroke-width': 2.5 * u,
      }));
      const text = elementName(element) || elementRef(element) || 'element';
      const lh = 21 * u; // a label's height (13 px text, 4 px padding each side)
      const below = by + bh + 4 * u + lh <= h;
      label(bx, below ? by + bh + 4 * u + lh / 2 : by - 4 * u - lh / 2, text, 'start').classList.add('ov-element-tag');
    }
    // A click-like mark at (x, y), with a tag beside it.
    const target = (x, y, text) => {
      g.append(svg('circle', { cx: x, cy: y, r: 15 * u, fill: color, opacity: 0.16 }), ring(x, y, 15 * u, { class: 'ov-target' }), dot(x, y));
      tagNear(x, y, text.length > 70 ? text.slice(0, 69) + '…' : text);
    };

    switch (a.type) {
      case 'click': case 'mouse_down': case 'mouse_up': case 'move': {
        const x = hasXY ? a.x : ePoint ? ePoint[0] : px, y = hasXY ? a.y : ePoint ? ePoint[1] : py;
        if (x === null || x === undefined) { banner(describe(a)); break; }
        if (a.type === 'move') {
          if (px !== null && (px !== x || py !== y)) {
            g.append(svg('line', { x1: px, y1: py, x2: x, y2: y, stroke: color, 'stroke-width': 2.5 * u, 'stroke-dasharray': `${6 * u} ${4 * u}` }), arrowHead(px, py, x, y));
          }
          g.append(svg('path', { class: 'ov-target', d: `M${x - 10 * u},${y}H${x + 10 * u}M${x},${y - 10 * u}V${y + 10 * u}`, stroke: color, 'stroke-width': 2.5 * u }));
        } else {
          g.append(svg('circle', { cx: x, cy: y, r: 15 * u, fill: color, opacity: 0.16 }), ring(x, y, 15 * u, { class: 'ov-target' }));
          if (a.count > 1) g.append(ring(x, y, 21 * u));
          if (a.count > 2) g.append(ring(x, y, 27 * u));
          g.append(dot(x, y));
        }
        const what = a.type === 'click' ? describe(Object.assign({}, a, { ref: undefined })).replace(/ at \(.*\)$/, '') : a.type.replace('_', ' ');
        tagNear(x, y, `${what} (${x}, ${y})`);
        break;
      }
      case 'drag': {
        const pts = (Array.isArray(a.path) ? a.path : []).filter((p) => Array.isArray(p));
        if (pts.length < 2) break;
        g.append(svg('polyline', { class: 'ov-path', points: pts.map((p) => p.join(',')).join(' '), fill: 'none', stroke: color, 'stroke-width': 3 * u, 'stroke-linejoin': 'round', 'stroke-linecap': 'round' }));
        const [a1, a2] = [pts[pts.length - 2], pts[pts.length - 1]];
        g.append(arrowHead(a1[0], a1[1], a2[0], a2[1], 14 * u));
        g.append(ring(pts[0][0], pts[0][1], 7 * u), dot(pts[0][0], pts[0][1], 3 * u));
        tagNear(pts[0][0], pts[0][1], `drag (${pts.length} points)`);
        break;
      }
      case 'scroll': {
        const x = a.x, y = a.y;
        g.append(ring(x, y, 13 * u, { class: 'ov-target' }), dot(x, y));
        const len = 40 * u;
        const dirs = [];
        if (a.dy) dirs.push([0, Math.sign(a.dy)]);
        if (a.dx) dirs.push([Math.sign(a.dx), 0]);
        for (const [dx, dy] of dirs) {
          const x1 = x + dx * 18 * u, y1 = y + dy * 18 * u, x2 = x + dx * (18 * u + len), y2 = y + dy * (18 * u + len);
          g.append(svg('line', { class: 'ov-scroll', x1, y1, x2, y2, stroke: color, 'stroke-width': 4 * u, 'stroke-linecap': 'round' }), arrowHead(x1, y1, x2, y2, 14 * u));
        }
        tagNear(x, y, describe(a).replace(/ at \(.*\)$/, ''));
        break;
      }
      case 'type': case 'key': case 'hold_key': {
        const text = a.type === 'type' ? `typed ${typedText(a.text).label}` : describe(a).replace(/^press /, 'keys ').replace(/^hold /, 'held ');
        const shortText = text.length > 70 ? text.slice(0, 69) + '…' : text;
        if (px !== null && px !== undefined) {
          g.append(svg('path', { d: `M${px},${py}l0,${16 * u}l${4.5 * u},${-4.5 * u}l${6.5 * u},0z`, fill: color, stroke: '#fff', 'stroke-width': 1.2 * u }));
          label(px + 14 * u, py + 24 * u, shortText);
        } else {
          banner(shortText);
        }
        break;
      }
      case 'scroll_to': case 'form_input': case 'file_upload': {
        const p = hasXY ? [a.x, a.y] : ePoint;
        const what = a.type === 'scroll_to' ? 'scroll into view'
          : a.type === 'form_input' ? `set to ${valueText(a.value)}`
            : `upload ${plural(Array.isArray(a.paths) ? a.paths.length : 0, 'file')}`;
        if (p) target(p[0], p[1], what);
        else banner(describe(a, element));
        break;
      }
      case 'zoom': case 'screenshot': {
        const r = Array.isArray(a.region) ? a.region : null;
        if (r) g.append(svg('rect', { class: 'ov-region', x: r[0], y: r[1], width: r[2] - r[0], height: r[3] - r[1], fill: color, 'fill-opacity': 0.12, stroke: color, 'stroke-width': 3 * u, 'stroke-dasharray': `${8 * u} ${5 * u}` }));
        banner(describe(a));
        break;
      }
      default:
        banner(describe(a));
    }
    if (tag === undefined) tag = verdict === 'deny' ? 'DENIED: not performed' : verdict === 'ask' ? 'ASKED A HUMAN' : null;
    if (tag) label(w - 8 * u, h - 16 * u, tag, 'end');
    return node;
  }

  /* ---- page frame: header, sign-in, start ------------------------------ */

  const NAV = [
    ['sessions', '/', 'Sessions'],
    ['approvals', 'approvals.html', 'Approvals'],
    ['blast', 'blast.html', 'Blast radius'],
  ];

  let started = false;
  let pageInit = null;

  function header() {
    const page = document.body.dataset.page;
    const nav = el('nav', { class: 'nav', 'aria-label': 'Main' },
      NAV.map(([id, href, text]) => el('a', { href, 'aria-current': id === page || (page === 'live' || page === 'player') && id === 'sessions' ? 'page' : null },
        text, id === 'approvals' ? el('span', { class: 'count', id: 'nav-approvals', hidden: true }) : null)));
    const out = el('button', { type: 'button', class: 'btn btn-ghost', id: 'signout', hidden: true }, 'Sign out');
    out.addEventListener('click', () => { clearToken(); location.reload(); });
    const bar = el('header', { class: 'topbar' },
      el('a', { class: 'brand', href: '/' }, el('span', { class: 'brand-mark', 'aria-hidden': 'true' }), 'deskgate'),
      nav, el('div', { class: 'topbar-right' }, el('span', { class: 'who', id: 'who' }), out));
    document.body.prepend(bar);
  }

  function signinView(message) {
    let box = $('#signin');
    if (!box) {
      const input = el('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'token-help', placeholder: 'viewer or admin token' });
      const form = el('form', { class: 'signin-form', id: 'signin-form' },
        el('label', { for: 'token' }, 'Token'),
        input,
        el('p', { class: 'help', id: 'token-help' }, 'Kept in this tab only (sessionStorage) and sent in a header, never in a URL.'),
        el('p', { class: 'error', id: 'signin-error', role: 'alert' }),
        el('button', { type: 'submit', class: 'btn btn-primary' }, 'Sign in'));
      form.addEventListener('submit', (ev) => { ev.preventDefault(); signIn(input.value.trim()); });
      box = el('main', { id: 'signin', class: 'signin' },
        el('section', { class: 'card signin-card', 'aria-labelledby': 'signin-title' },
          el('h1', { id: 'signin-title' }, 'Sign in to deskgate'),
          el('p', { class: 'muted' }, 'Watch sessions, replay recordings and answer approvals with a viewer token.'),
          form));
      document.body.append(box);
    }
    box.hidden = false;
    const app = $('#app');
    if (app) app.hidden = true;
    $('#signin-error').textContent = message || '';
    $('#signout').hidden = true;
    $('#who').textContent = '';
    $('#token').focus();
  }

  // A token is tried on an endpoint only viewers and admins may read.
  async function signIn(t) {
    const errBox = $('#signin-error');
    if (!t) { errBox.textContent = 'Enter a token.'; return; }
    const res = await fetch('/v1/approvals', { headers: { Authorization: 'Bearer ' + t }, cache: 'no-store', credentials: 'omit' })
      .catch(() => null);
    if (!res) { errBox.textContent = 'The gateway cannot be reached.'; return; }
    if (res.status === 401) { errBox.textContent = 'This token is not valid.'; return; }
    if (res.status === 403) { errBox.textContent = 'This is an agent token. The viewer needs a viewer or admin token.'; return; }
    if (!res.ok) { errBox.textContent = `The gateway answered ${res.status}.`; return; }
    setToken(t);
    $('#token').value = '';
    if (started) { location.reload(); return; } // signed out by a 401 earlier
    $('#signin').hidden = true;
    enter();
  }

  function signedOut(message) {
    clearToken();
    stopTimers();
    signinView(message);
  }

  const timers = new Set();
  // setInterval that stops when the viewer signs out.
  function every(ms, fn) {
    const id = setInterval(fn, ms);
    timers.add(id);
    return id;
  }
  function stopTimers() {
    for (const id of timers) clearInterval(id);
    timers.clear();
  }

  // Approvals waiting, in the navigation bar of every page.
  function setApprovalCount(n) {
    const c = $('#nav-approvals');
    c.textContent = String(n);
    c.hidden = n === 0;
    c.setAttribute('aria-label', `${n} waiting`);
  }
  async function refreshApprovalCount() {
    try {
      const j = await getJSON('/v1/approvals');
      setApprovalCount((j.approvals || []).length);
    } catch { /* shown by the page */ }
  }

  function enter() {
    $('#signout').hidden = false;
    $('#who').textContent = 'Signed in';
    const app = $('#app');
    app.hidden = false;
    refreshApprovalCount();
    every(3000, refreshApprovalCount);
    if (pageInit && !started) {
      started = true;
      Promise.resolve(pageInit()).catch((e) => showError(e));
    }
  }

  // A failure the page could not handle: shown at the top of the page.
  function showError(e) {
    if (e instanceof ApiError && e.status === 401) return;
    const app = $('#app');
    let box = $('#page-error');
    if (!box) {
      box = el('div', { id: 'page-error', class: 'banner banner-danger', role: 'alert' });
      app.prepend(box);
    }
    clear(box).append(el('strong', {}, 'Something went wrong. '), e && e.message ? e.message : String(e));
  }

  // Each page calls DG.start(init): init runs once the viewer is signed in.
  function start(init) {
    pageInit = init;
    header();
    if (token()) enter();
    else signinView('');
  }

  function param(name) {
    return new URLSearchParams(location.search).get(name);
  }

  return {
    el, svg, clear, append, $, api, getJSON, events, frameURL, ApiError, token, actorLabel,
    fmtTime, fmtClock, fmtDuration, fmtAgo, fmtBytes, shortId, plural,
    describe, typedText, chords, oneLine, elementName, elementRef, elementBox, tabId, valueText, badge, verifyInfo, verifyBadge, buildSteps, countVerdicts,
    drawOverlay, start, every, showError, param, refreshApprovalCount, setApprovalCount, COLORS,
  };
})();
