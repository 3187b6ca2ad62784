/* Recording player: every action of a recorded session, and every command
 * its CDP clients sent, one step at a time: the screen before and after
 * with what the action did drawn over it, the policy's verdict, rule and
 * reason, the page it happened on, and whether the recording as a whole
 * verifies. */
'use strict';

(() => {
  const { el, clear, $ } = DG;
  const id = DG.param('id') || '';
  const VERDICTS = ['allow', 'deny', 'ask'];
  // Past this many CDP commands (Playwright sends about 50 when it
  // connects) the list starts with them hidden, when there are actions to
  // show instead: their chip brings them back.
  const CDP_LISTED_MAX = 500;
  // Past this many steps shown the timeline marks only the denied and
  // asked ones, at most one per TICK_SLOTS-th of its width.
  const TICKS_ALL_MAX = 300, TICK_SLOTS = 200;

  let rec = null;        // GET /v1/recordings/{id}
  let steps = [];
  let info = null;
  let shown = [];        // the steps the filters let through
  let cur = null;        // the current step
  let playing = false, playTimer = null;
  const fVerdicts = new Set(VERDICTS);
  let fTypes = new Set();
  let renderSeq = 0;
  let items = new Map(); // the list's <li> by step number
  let lit = null;        // the one marked current

  const flagged = (s) => s.verdict === 'deny' || s.verdict === 'ask' || s.asked;
  const untrusted = (s) => rec && rec.verify && rec.verify.status === 'bad' && rec.verify.bad_seq > 0 && s.ev.seq >= rec.verify.bad_seq;

  /* ---- the header: verify result and the session ---- */

  function verifyBanner() {
    const i = DG.verifyInfo(rec.verify);
    const b = $('#verify-banner');
    b.className = `banner banner-${i.level}`;
    b.dataset.status = (rec.verify && rec.verify.status) || 'unknown';
    const icon = { ok: '✓', warn: '!', danger: '⚠', info: 'i' }[i.level] || '!';
    clear(b).append(el('span', { class: 'banner-icon', 'aria-hidden': 'true' }, icon),
      el('div', {}, el('strong', {}, i.title), el('p', {}, i.text), i.detail ? el('div', { class: 'detail' }, i.detail) : null));
    b.hidden = false;
  }

  function meta() {
    const acts = steps.filter((s) => s.kind === 'action'), cdp = steps.filter((s) => s.kind === 'cdp');
    const c = { actions: acts.length, deny: acts.filter((s) => s.verdict === 'deny').length, ask: acts.filter((s) => s.asked).length };
    const first = info.first, last = info.last;
    const m = clear($('#meta'));
    const item = (k, v, title) => el('span', { title: title || null }, `${k} `, el('b', {}, v));
    m.append(item('profile', rec.profile || '—'), item('agent', rec.token_name || '—'));
    if (info.created && info.created.policy) m.append(item('policy', info.created.policy, rec.policy_sha256));
    m.append(item('started', DG.fmtTime(rec.start_ms)),
      item('duration', first && last ? DG.fmtDuration(last.mono_ms - first.mono_ms) : '—'),
      item('actions', `${c.actions} (${c.deny} denied, ${c.ask} asked)`));
    if (cdp.length) {
      const cached = cdp.filter((s) => s.ev.cached).length;
      m.append(item('CDP commands', `${cdp.length} (${cdp.filter((s) => s.verdict === 'deny').length} denied${cached ? `, ${cached} from the verdict cache` : ''})`));
    }
    m.append(item('typed text', rec.redact_text ? 'redacted' : 'recorded'));
    if (info.ended) m.append(item('ended', info.ended.reason));
  }

  /* ---- filters and the step list ---- */

  function chip(group, value, label, count, checked, title) {
    const input = el('input', { type: 'checkbox', value, checked, 'data-filter': group });
    input.addEventListener('change', () => {
      const set = group === 'verdict' ? fVerdicts : fTypes;
      if (input.checked) set.add(value); else set.delete(value);
      applyFilters();
    });
    return el('label', { class: 'chip', title: title || null }, input, label, el('span', { class: 'n' }, String(count)));
  }

  // The chips: verdicts, then the actions' types and one for all CDP
  // commands (type 'cdp'), left unchecked when there are too many of them
  // to list beside the actions, unless `first`, the step asked for in
  // the URL, is one.
  function buildFilters(first) {
    const vBox = clear($('#f-verdicts'));
    for (const v of VERDICTS) {
      vBox.append(chip('verdict', v, { allow: 'Allowed', deny: 'Denied', ask: 'Asked' }[v], steps.filter((s) => s.verdict === v).length, true));
    }
    const types = [...new Set(steps.filter((s) => s.kind === 'action').map((s) => s.type))].sort();
    fTypes = new Set(types);
    const tBox = clear($('#f-types'));
    for (const t of types) tBox.append(chip('type', t, t, steps.filter((s) => s.type === t).length, true));
    const nCdp = steps.filter((s) => s.kind === 'cdp').length;
    if (!nCdp) return;
    const many = nCdp > CDP_LISTED_MAX && types.length > 0;
    const on = !many || (first && first.kind === 'cdp');
    if (on) fTypes.add('cdp');
    tBox.append(chip('type', 'cdp', 'CDP commands', nCdp, on, many ? `More than ${CDP_LISTED_MAX} CDP commands: not listed at first` : null));
  }

  // A step in one line, for the list and its title.
  function describeStep(s) {
    return s.kind === 'cdp' ? describeCdp(s.ev) : DG.describe(s.action, s.ev.element);
  }
  // A CDP command: its method, then the URL it went to, or else the action
  // it amounted to or the script it ran. Method, URL and parameters come
  // from the client.
  function describeCdp(e) {
    const p = e.params && typeof e.params === 'object' ? e.params : {};
    const url = typeof e.url === 'string' ? e.url : typeof p.url === 'string' ? p.url : '';
    let what = '';
    if (url) what = ` ${DG.oneLine(url, 200)}`;
    else if (e.action && typeof e.action === 'object' && e.action.type) what = `: ${DG.describe(e.action)}`;
    else if (Number.isInteger(e.code_bytes)) what = `: run JavaScript (${DG.plural(e.code_bytes, 'byte')})`;
    return `CDP ${DG.oneLine(e.method || '?', 80)}${what}`;
  }

  // The timeline's marks, [step, left %]: one per step shown, or when there
  // are too many to tell apart, the denied and asked ones, one per slot.
  function tickMarks() {
    const at = (i) => (shown.length > 1 ? (i / (shown.length - 1)) * 100 : 0);
    if (shown.length <= TICKS_ALL_MAX) return shown.map((s, i) => [s, at(i)]);
    const slots = new Map();
    shown.forEach((s, i) => {
      const slot = Math.round((at(i) / 100) * TICK_SLOTS);
      if (flagged(s) && !slots.has(slot)) slots.set(slot, [s, at(i)]);
    });
    return [...slots.values()];
  }

  function applyFilters() {
    shown = steps.filter((s) => fVerdicts.has(s.verdict) && fTypes.has(s.type));
    $('#shown').textContent = shown.length === steps.length ? `${steps.length} in all` : `${shown.length} of ${DG.plural(steps.length, 'step')} shown`;
    const list = clear($('#steps'));
    items = new Map();
    lit = null;
    for (const s of shown) {
      const desc = describeStep(s);
      const who = s.human ? DG.actorLabel(s.actor) : null;
      const b = el('button', { type: 'button', 'aria-label': `Step ${s.n}: ${who ? who + ': ' : ''}${desc}, ${s.verdict}` },
        el('span', { class: 'no' }, String(s.n)), who ? el('span', { class: 'badge badge-info actor' }, who) : null,
        el('span', { class: 'desc' }, desc), DG.badge(s.verdict, s.verdict === 'ask' && s.ev.approved_by ? 'Approved' : null));
      b.addEventListener('click', () => { stop(); go(s); });
      const li = el('li', { dataset: { n: s.n, verdict: s.verdict, type: s.type, actor: s.actor || '' }, class: untrusted(s) ? 'untrusted' : null }, b);
      items.set(s.n, li);
      list.append(li);
    }
    const sc = $('#scrubber');
    sc.min = 1;
    sc.max = Math.max(1, shown.length);
    sc.disabled = shown.length === 0;
    const ticks = clear($('#ticks'));
    for (const [s, left] of tickMarks()) {
      const t = el('span', { class: `tick ${s.verdict}`, title: `Step ${s.n}: ${s.verdict}` });
      t.style.left = `${left}%`;
      ticks.append(t);
    }
    if (!shown.length) { renderEmpty(); return; }
    if (!cur || !shown.includes(cur)) go(shown.find((s) => cur && s.n > cur.n) || shown[shown.length - 1]);
    else go(cur);
  }

  /* ---- navigation ---- */

  function go(s) {
    if (!s) return;
    cur = s;
    render();
  }
  const idx = () => shown.indexOf(cur);
  function step(delta) {
    if (!shown.length) return false;
    const i = idx();
    let j;
    if (i < 0) j = delta > 0 ? shown.findIndex((s) => s.n > cur.n) : shown.map((s) => s.n < cur.n).lastIndexOf(true);
    else j = i + delta;
    if (j < 0 || j >= shown.length) return false;
    go(shown[j]);
    return true;
  }
  function flag(delta) {
    const n = cur ? cur.n : 0;
    const cands = shown.filter(flagged);
    const s = delta > 0 ? cands.find((x) => x.n > n) : cands.reverse().find((x) => x.n < n);
    if (s) go(s);
    else note(delta > 0 ? 'No denied or asked action after this one.' : 'No denied or asked action before this one.');
  }
  function note(text) {
    const p = $('#position');
    p.dataset.note = text;
    p.textContent = text;
    setTimeout(() => { if (p.dataset.note === text) { delete p.dataset.note; position(); } }, 2000);
  }

  function stop() {
    playing = false;
    clearTimeout(playTimer);
    $('#play').textContent = 'Play';
    $('#play').setAttribute('aria-pressed', 'false');
  }
  function play() {
    if (!shown.length) return;
    if (idx() === shown.length - 1) go(shown[0]);
    playing = true;
    $('#play').textContent = 'Pause';
    $('#play').setAttribute('aria-pressed', 'true');
    const tick = () => {
      if (!playing) return;
      if (!step(1)) { stop(); return; }
      playTimer = setTimeout(tick, 1200 / +$('#speed').value);
    };
    playTimer = setTimeout(tick, 1200 / +$('#speed').value);
  }

  /* ---- one step ---- */

  function position() {
    const p = $('#position');
    if (p.dataset.note) return;
    clear(p);
    if (!cur) return;
    p.append('Step ', el('b', {}, String(cur.n)), ` of ${steps.length}`,
      shown.length !== steps.length ? ` · ${idx() + 1} of ${shown.length} shown` : '');
  }

  async function showFrame(which, hash, s, placeholder) {
    const img = $(`#img-${which}`), ph = $(`#ph-${which}`), ov = $(`#ov-${which}`);
    const mine = renderSeq;
    if (!hash) {
      img.hidden = true;
      ov.style.display = 'none';
      clear(ph).append(el('div', {}, el('strong', {}, placeholder[0]), placeholder[1]));
      ph.hidden = false;
      $(`#${which}-info`).textContent = '';
      return;
    }
    let url;
    try { url = await DG.frameURL(id, hash); } catch (e) { url = null; }
    if (mine !== renderSeq) return; // another step was shown meanwhile
    if (!url) {
      img.hidden = true;
      ov.style.display = 'none';
      clear(ph).append(el('div', {}, el('strong', {}, 'Frame missing'), `frames/${hash.slice(0, 12)}… cannot be read.`));
      ph.hidden = false;
      return;
    }
    img.src = url;
    img.hidden = false;
    ph.hidden = true;
    ov.style.display = '';
    // The element's box only over the screen it was picked on.
    // CDP events name no screen: the frames are the session's desktop.
    const screen = s.kind === 'cdp' ? [rec.width, rec.height] : s.ev.screen;
    DG.drawOverlay(ov, s.action, screen, s.verdict, s.ev.pointer, undefined, which === 'before' ? s.ev.element : null);
    $(`#${which}-info`).textContent = hash.slice(0, 10);
    $(`#${which}-info`).title = `frame ${hash}`;
  }

  function pageCell(url, title) {
    if (!url && !title) return el('span', { class: 'muted' }, 'unknown (no browser page)');
    if (title === url) title = null;
    return el('span', {}, title ? el('b', {}, title) : null, title && url ? ' · ' : null, url ? el('span', { class: 'mono' }, url) : null);
  }

  // The element an action was aimed at: role, name, reference, and where
  // its box and point were on the screen (pixels of the desktop).
  function elementCell(x) {
    const name = DG.elementName(x, 200), ref = DG.elementRef(x), b = DG.elementBox(x);
    const p = Array.isArray(x.point) && x.point.length === 2 ? x.point : null;
    const r = Math.round;
    return el('span', { id: 'step-element' },
      name ? el('b', {}, name) : el('span', { class: 'muted' }, 'no role or name'),
      ref ? [' · ', el('span', { class: 'mono' }, ref)] : null,
      b ? ` · box at (${r(b[0])}, ${r(b[1])}), ${r(b[2])}×${r(b[3])}` : null,
      p && p.every(Number.isFinite) ? ` · aimed at (${r(p[0])}, ${r(p[1])})` : null);
  }

  // Which tool of the agent's toolset it was: the member's name as the agent
  // sent it, and the toolset.
  function toolCell(member, toolset) {
    const m = member !== undefined && member !== null ? DG.oneLine(member, 64) : '';
    const t = toolset !== undefined && toolset !== null ? DG.oneLine(toolset, 64) : '';
    return el('span', { id: 'step-tool' }, m ? el('span', { class: 'mono' }, m) : null, m && t ? ' from the ' : t ? 'the ' : null, t ? `${t} toolset` : null);
  }

  // A tab as shown: its title and URL, its id, the active one marked.
  function tabLine(t) {
    const title = t && t.title ? DG.oneLine(t.title, 120) : '', url = t && t.url ? DG.oneLine(t.url, 200) : '';
    return [
      title ? el('b', {}, title) : el('span', { class: 'muted' }, 'untitled'),
      url ? [' · ', el('span', { class: 'mono' }, url)] : null,
      t && t.tab_id !== undefined ? [' · ', el('span', { class: 'mono muted' }, DG.oneLine(t.tab_id, 64))] : null,
    ];
  }
  function tabsCell(tabs) {
    return el('ul', { class: 'events-list tab-list', id: 'step-tabs' }, tabs.filter((t) => t && typeof t === 'object').map((t) => el('li', { dataset: { active: t.active === true ? '1' : '0', tab: DG.oneLine(t.tab_id, 64) } },
      t.active === true ? el('span', { class: 'badge badge-info' }, 'active') : null, el('span', {}, tabLine(t)))));
  }
  // What the action did to the tabs, grouped: [[row label, list], ...].
  const CHANGE_LABEL = { tab_opened: 'Tabs opened', tab_closed: 'Tabs closed' };
  // A tab the action changed: as the tabs after it show it, or, for one it
  // closed, as the last step before that listed it.
  function findTab(id, tabs, n) {
    const inList = (l) => (Array.isArray(l) ? l.find((x) => x && typeof x === 'object' && x.tab_id === id) : null);
    let t = inList(tabs);
    for (let i = n - 2; !t && i >= 0; i--) t = inList(steps[i].ev.browser_state && steps[i].ev.browser_state.tabs);
    return t || null;
  }
  function tabChanges(changes, tabs, n) {
    if (!Array.isArray(changes)) return [];
    const groups = new Map();
    for (const c of changes) {
      if (!c || typeof c !== 'object') continue;
      const k = CHANGE_LABEL[c.type] || 'Tab changes';
      if (!groups.has(k)) groups.set(k, []);
      const t = c.tab_id !== undefined ? findTab(c.tab_id, tabs, n) : null;
      groups.get(k).push(el('li', { dataset: { change: DG.oneLine(c.type, 32), tab: DG.oneLine(c.tab_id, 64) } },
        el('span', {}, CHANGE_LABEL[c.type] ? null : `${DG.oneLine(c.type, 32).replace(/_/g, ' ')}: `,
          t ? tabLine(t) : el('span', { class: 'mono' }, DG.oneLine(c.tab_id, 64)))));
    }
    return [...groups].map(([k, items]) => [k, el('ul', { class: 'events-list tab-changes', dataset: { kind: k } }, items)]);
  }

  // The step's box, cleared, with what every step opens with: its number,
  // title and verdict badge (badge: the badge's text, null: the verdict's),
  // a warning when the recording cannot vouch for it, the rule and reason.
  // Returns the box and a row(label, value) adding to its facts (the <dl>,
  // appended here).
  function opening(s, badge, ...extra) {
    const e = s.ev;
    const box = clear($('#step'));
    box.append(el('div', { class: 'step-head' },
      el('span', { class: 'step-no' }, `Step ${s.n}`),
      el('h2', { id: 'step-title' }, describeStep(s)),
      DG.badge(s.verdict, badge), extra));
    if (untrusted(s)) {
      box.append(el('div', { class: 'banner banner-danger' }, el('div', {}, el('strong', {}, 'Untrusted step'),
        el('p', {}, `The recording fails verification at seq ${rec.verify.bad_seq}; this step (seq ${e.seq}) cannot be trusted.`))));
    }
    box.append(el('p', { class: `reason ${s.verdict}`, id: 'step-reason' }, el('b', {}, e.rule || '—'), ' — ', e.reason || ''));
    const kv = el('dl', { class: 'kv' });
    box.append(kv);
    return [box, (k, v) => kv.append(el('dt', {}, k), el('dd', {}, v))];
  }

  function whenCell(e) {
    const t0 = info.first ? info.first.mono_ms : e.mono_ms;
    return `${DG.fmtTime(Date.parse(e.wall))} (${DG.fmtDuration(e.mono_ms - t0)} into the session)`;
  }

  // The JavaScript an action ran, when the recording kept it.
  function codeBlock(a) {
    if (!a || a.type !== 'javascript' || typeof a.code !== 'string') return null;
    return [el('h3', {}, 'JavaScript run in the page'), el('pre', { class: 'mono', id: 'step-code' }, a.code)];
  }

  function details(s) {
    if (s.kind === 'cdp') { cdpDetails(s); return; }
    const e = s.ev;
    const [box, row] = opening(s, s.asked && s.verdict === 'ask' ? 'Asked · approved' : s.asked && s.verdict === 'deny' ? 'Asked · denied' : null);
    row('By', el('span', { id: 'step-actor' }, s.human ? `${DG.oneLine(s.human, 64)}, an operator holding control` : 'the agent'));
    row('Page', pageCell(e.url, e.title));
    if (e.url_after !== undefined && (e.url_after !== e.url || e.title_after !== e.title)) row('Page after', pageCell(e.url_after, e.title_after));
    if (e.element && typeof e.element === 'object') row('Element', elementCell(e.element));
    row('When', whenCell(e));
    row('Took', e.duration_ms !== undefined ? DG.fmtDuration(e.duration_ms) : '—');
    if (s.asked) {
      const o = s.outcome;
      const waited = o ? DG.fmtDuration(o.mono_ms - s.approval.mono_ms) : null;
      row('Approval', o ? (o.state === 'approved' ? `approved by ${o.by} after ${waited}` : o.state === 'denied' ? `denied by ${o.by} after ${waited}` : `expired: ${o.reason || ''}`)
        : 'asked');
    } else if (e.approved_by) {
      row('Approval', `approved by ${e.approved_by}`);
    }
    if (e.action && e.action.type === 'type') {
      const tt = DG.typedText(e.action.text);
      row('Typed', tt.redacted ? `${tt.label}: the recording keeps only its length and a salted hash (the screenshots still show what the screen showed)` : tt.label);
    }
    if (e.action && e.action.type === 'form_input') {
      const v = e.action.value;
      row('Value', typeof v === 'string' ? el('span', { class: 'mono', id: 'step-value' }, `“${v}”`) : DG.valueText(v));
    }
    if (e.action && e.action.type === 'file_upload' && Array.isArray(e.action.paths)) {
      row('Files', el('ul', { class: 'events-list', id: 'step-files' }, e.action.paths.map((f) => el('li', { class: 'mono' }, String(f)))));
    }
    if (e.error) row('Error', el('span', { class: 'count-deny' }, e.error));
    else if (e.result) row('Result', e.result.ok === false ? 'failed' : `done${e.result.settle_ms !== undefined ? `, screen settled in ${Math.round(e.result.settle_ms)} ms${typeof e.result.settled === 'string' ? ` (${e.result.settled})` : ''}` : ''}`);
    else if (s.verdict !== 'allow') row('Result', 'not performed');
    if (e.wire) row('Agent spoke', e.wire);
    if (e.member !== undefined || e.toolset !== undefined) row('Tool', toolCell(e.member, e.toolset));
    const bs = e.browser_state;
    if (bs && typeof bs === 'object') {
      if (Array.isArray(bs.tabs)) row('Tabs after', tabsCell(bs.tabs));
      for (const [k, list] of tabChanges(bs.state_changes, bs.tabs, s.n)) row(k, list);
    }
    DG.append(box, [codeBlock(e.action)]);

    const ex = e.result && e.result.exec;
    if (ex) {
      box.append(el('h3', {}, `Command output (exit ${ex.exit_code}${ex.timed_out ? ', timed out' : ''})`),
        el('pre', { class: 'mono' }, [ex.stdout, ex.stderr].filter(Boolean).join('\n') || '(no output)'));
    }
    const others = [...s.decisions, ...s.pages];
    if (others.length) {
      const blocked = s.decisions.filter((d) => d.verdict !== 'allow').length;
      const list = el('ul', { class: 'events-list' }, others.sort((a, b) => a.seq - b.seq).map((d) => el('li', {},
        d.type === 'page' ? el('span', { class: 'badge badge-other' }, 'page') : DG.badge(d.verdict),
        el('span', { class: 'mono' }, d.type === 'page' ? `${d.title || ''} ${d.url || ''}` : `${d.layer}: ${d.layer === 'egress' ? d.target : d.url || d.kind || ''} (${d.rule})`))));
      box.append(el('details', { open: blocked ? true : null }, el('summary', {}, `${DG.plural(others.length, 'browser/network event')} before this step${blocked ? `, ${blocked} blocked` : ''}`), list));
    }
    box.append(el('details', {}, el('summary', {}, 'Canonical action and raw input'),
      el('pre', { class: 'mono' }, JSON.stringify(e.action, null, 2)),
      e.input !== undefined ? el('pre', { class: 'mono' }, JSON.stringify(e.input, null, 2)) : null));
  }

  // A CDP command: who sent it, on which of its sessions, what it amounted
  // to, whether the verdict cache allowed it, the screen it left.
  function cdpDetails(s) {
    const e = s.ev;
    const [box, row] = opening(s, null, e.cached ? el('span', { class: 'badge badge-info', id: 'step-cached' }, 'from the verdict cache') : null);
    const by = info.cdpClients.get(e.client);
    row('Sent by', el('span', { id: 'step-client' }, `CDP client ${DG.oneLine(e.client, 20)}`, by ? [' · ', el('b', {}, DG.oneLine(by, 64))] : null));
    row('Method', el('span', { class: 'mono', id: 'step-method' }, DG.oneLine(e.method, 80)));
    row('Session', typeof e.session === 'string' && e.session ? el('span', { class: 'mono' }, DG.oneLine(e.session, 64))
      : el('span', { class: 'muted' }, "the client's browser-level session"));
    row('Command', `number ${DG.oneLine(e.req, 20)} of the session's CDP commands`);
    if (typeof e.url === 'string') row('URL', el('span', { class: 'mono' }, DG.oneLine(e.url, 400)));
    if (Number.isInteger(e.code_bytes)) row('Script', `${DG.plural(e.code_bytes, 'byte')} of JavaScript`);
    row('When', whenCell(e));
    if (Number.isInteger(e.during_action)) row('During', `the agent's action ${e.during_action}`);
    if (e.cached) row('Decided', 'allowed from the verdict cache: the worker applied an allow the gateway had let it keep, and the gateway decided it again for the recording');
    if (s.verdict !== 'allow') row('Result', 'not performed: the command never reached the browser');
    else if (s.after) row('Screen after', `as commands ${s.after.first_req} to ${s.after.last_req} left it`);
    DG.append(box, [codeBlock(s.action)]);
    box.append(el('details', {}, el('summary', {}, 'Parameters and canonical action'),
      el('pre', { class: 'mono', id: 'step-params' }, e.params !== undefined ? JSON.stringify(e.params, null, 2) : '(no parameters recorded)'),
      e.action !== undefined ? el('pre', { class: 'mono' }, JSON.stringify(e.action, null, 2)) : null));
  }

  // Keeps the current step visible in its list, without scrolling the page.
  function scrollList(li) {
    const list = $('#steps');
    const top = li.offsetTop, bottom = top + li.offsetHeight;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (bottom > list.scrollTop + list.clientHeight) list.scrollTop = bottom - list.clientHeight;
  }

  function render() {
    const s = cur;
    const seq = ++renderSeq;
    document.body.dataset.step = String(s.n);
    // Set once this step's frames are in place (showFrame fetches them
    // first): until then the images and their hashes are the last step's.
    document.body.dataset.framesShown = '';
    document.body.dataset.verdict = s.verdict;
    document.body.dataset.type = s.type;
    position();
    const i = idx();
    $('#scrubber').value = String(i >= 0 ? i + 1 : 1);
    markCurrent(items.get(s.n));
    const [before, after] = framesOf(s);
    const what = s.kind === 'cdp' ? 'command' : 'action';
    const refused = s.verdict !== 'allow' && !after;
    Promise.all([
      showFrame('before', before, s, ['No screen yet', `The session had not shown a screen before this ${what}.`]),
      showFrame('after', after, s, refused
        ? ['Not performed', `The policy refused this ${what} (${s.ev.rule}): the screen did not change.`]
        : s.kind === 'cdp' ? ['No screenshot', 'No screen was recorded after the commands this one came with.']
          : ['No screenshot', 'The action ended without a new screen.']),
    ]).then(() => { if (seq === renderSeq) document.body.dataset.framesShown = String(s.n); });
    details(s);
    history.replaceState(null, '', `#step=${s.n}`);
    // Load the next steps' frames ahead of time.
    for (const n of shown.slice(i + 1, i + 3)) {
      for (const h of framesOf(n)) if (h) DG.frameURL(id, h).catch(() => {});
    }
  }

  // Marks li (undefined: none, the step is filtered out) as the current
  // step's and keeps it in view.
  function markCurrent(li) {
    if (lit && lit !== li) {
      lit.classList.remove('current');
      lit.firstChild.removeAttribute('aria-current');
    }
    lit = li || null;
    if (!lit) return;
    lit.classList.add('current');
    lit.firstChild.setAttribute('aria-current', 'step');
    scrollList(lit);
  }

  // A step's frames, [before, after] (hashes or null): a CDP command's
  // after is the frame of the commands it ran among (buildSteps).
  function framesOf(s) {
    if (s.kind === 'cdp') return [s.ev.frame_before || null, s.after ? s.after.frame : null];
    return [s.ev.frame_before, s.ev.frame_after];
  }

  function renderEmpty() {
    cur = null;
    clear($('#position')).append('No step matches the filters');
    for (const w of ['before', 'after']) {
      $(`#img-${w}`).hidden = true;
      $(`#ov-${w}`).style.display = 'none';
      clear($(`#ph-${w}`)).append(el('div', {}, el('strong', {}, 'Nothing to show'), 'Change the filters to see steps.'));
      $(`#ph-${w}`).hidden = false;
    }
    clear($('#step')).append(el('p', { class: 'empty' }, 'No step matches the filters.'));
    document.body.dataset.step = '';
  }

  /* ---- keyboard ---- */

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    const tag = t && t.tagName;
    if (tag === 'SELECT' || tag === 'TEXTAREA' || (tag === 'INPUT' && t.type !== 'range' && t.type !== 'checkbox')) return;
    if (tag === 'INPUT' && t.type === 'range' && ev.key.startsWith('Arrow')) return; // the slider moves itself
    if ((tag === 'BUTTON' || tag === 'SUMMARY' || tag === 'A') && (ev.key === ' ' || ev.key === 'Enter')) return;
    let done = true;
    switch (ev.key) {
      case 'ArrowRight': case 'l': stop(); step(1); break;
      case 'ArrowLeft': case 'h': stop(); step(-1); break;
      case ' ': case 'k': if (playing) stop(); else play(); break;
      case 'n': stop(); flag(1); break;
      case 'N': case 'p': stop(); flag(-1); break;
      case 'Home': stop(); go(shown[0]); break;
      case 'End': stop(); go(shown[shown.length - 1]); break;
      default: done = false;
    }
    if (done) ev.preventDefault();
  }

  /* ---- the recording as a video (GET .../video.webm|mp4) ---- */

  // The gateway renders the video while the request waits (seconds to
  // minutes); the token goes in the header, so the file comes as a blob
  // saved through a download link, never as a URL with the token in it.
  async function downloadVideo(fmt) {
    const buttons = [$('#video-webm'), $('#video-mp4')];
    const status = $('#video-status');
    buttons.forEach((b) => { b.disabled = true; });
    status.dataset.state = 'rendering';
    status.textContent = `rendering the ${fmt === 'mp4' ? 'MP4' : 'WebM'} video…`;
    try {
      const res = await DG.api(`/v1/recordings/${encodeURIComponent(id)}/video.${fmt}`);
      const blob = await res.blob();
      const url = URL.createObjectURL(blob);
      const a = el('a', { href: url, download: `deskgate-${id}.${fmt}`, hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      status.dataset.state = 'done';
      status.textContent = `Video saved (${DG.fmtBytes(blob.size)}).`;
    } catch (e) {
      status.dataset.state = 'error';
      status.textContent = `The video could not be made: ${e && e.message ? e.message : String(e)}`;
    } finally {
      buttons.forEach((b) => { b.disabled = !!(rec && rec.live); });
    }
  }

  DG.start(async () => {
    if (!/^[a-z0-9-]{1,80}$/.test(id)) {
      DG.showError(new Error('No recording given: open one from the Sessions page.'));
      return;
    }
    $('#rid').textContent = id;
    document.title = `Recording ${DG.shortId(id)} · deskgate`;
    try {
      rec = await DG.getJSON(`/v1/recordings/${encodeURIComponent(id)}`);
    } catch (e) {
      if (e instanceof DG.ApiError && e.status === 404) throw new Error(`There is no recording ${id}.`);
      throw e;
    }
    verifyBanner();
    const evs = await DG.events(id);
    ({ steps, info } = DG.buildSteps(evs));
    meta();
    $('#policy-text').textContent = rec.policy || '';
    if (rec.live) {
      const l = $('#live-link');
      l.href = `live.html?id=${encodeURIComponent(id)}`;
      l.hidden = false;
    }
    for (const b of [$('#video-webm'), $('#video-mp4')]) {
      b.disabled = !!rec.live;
      if (rec.live) b.title = 'The session is still recording: its video can be made once it ends';
      b.addEventListener('click', () => downloadVideo(b.dataset.format));
    }
    $('#prev').addEventListener('click', () => { stop(); step(-1); });
    $('#next').addEventListener('click', () => { stop(); step(1); });
    $('#prev-flag').addEventListener('click', () => { stop(); flag(-1); });
    $('#next-flag').addEventListener('click', () => { stop(); flag(1); });
    $('#play').addEventListener('click', () => (playing ? stop() : play()));
    $('#scrubber').addEventListener('input', (ev) => { stop(); go(shown[+ev.target.value - 1]); });
    document.addEventListener('keydown', onKey);
    const m = /^#step=(\d+)$/.exec(location.hash);
    cur = (m && steps[+m[1] - 1]) || steps[0] || null;
    buildFilters(cur);
    if (!steps.length) {
      renderEmpty();
      clear($('#step')).append(el('p', { class: 'empty' }, 'This recording has no actions and no CDP commands.'));
    } else {
      applyFilters();
    }
    document.body.dataset.ready = '1';
  });
})();
