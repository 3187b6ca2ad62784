/* Approvals: every action waiting for a human, with the screen when the
 * policy asked, the exact action, the rule that asked and the time left;
 * Approve or Deny answers it (POST /v1/approvals/{id}) and the gateway
 * records who did. */
'use strict';

(() => {
  const { el, clear, $ } = DG;
  const cards = new Map();     // approval id -> {node, a, deadline, total}
  const sizes = new Map();     // session id -> [w, h]
  const frames = new Map();    // approval id -> blob URL

  async function sessionSizes() {
    try {
      const j = await DG.getJSON('/v1/sessions');
      for (const s of j.sessions || []) sizes.set(s.id, s.size);
    } catch { /* the overlay falls back to the frame's size */ }
  }

  function timeLeft(c) {
    const ms = Math.max(0, c.deadline - Date.now());
    const box = $('.time-left', c.node);
    if (!box) return;
    $('.time-text', box).textContent = ms > 0 ? `${Math.ceil(ms / 1000)} s left before it is refused` : 'expired: the action is refused';
    $('.bar span', box).style.width = `${Math.min(100, (ms / c.total) * 100)}%`;
    box.classList.toggle('urgent', ms < 15000);
  }

  async function decide(c, decision) {
    const buttons = c.node.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    const status = $('.decision-status', c.node);
    status.textContent = decision === 'approve' ? 'Approving…' : 'Denying…';
    try {
      const r = await (await DG.api(`/v1/approvals/${c.a.id}`, { method: 'POST', body: { decision } })).json();
      const verb = r.decision === 'approved' ? 'Approved' : 'Denied';
      status.className = `decision-status decision-note ${decision}`;
      status.textContent = `${verb} by ${r.by}. The agent's action ${decision === 'approve' ? 'runs now' : 'is refused'}.`;
      c.node.classList.add(`decided-${decision}`);
      c.decided = true;
      const tb = $('#done');
      tb.prepend(el('tr', { dataset: { id: c.a.id } },
        el('td', {}, DG.fmtClock(Date.now())),
        el('td', {}, DG.badge(decision === 'approve' ? 'allow' : 'deny', verb)),
        el('td', {}, r.by),
        el('td', {}, DG.describe(c.a.action, c.a.element)),
        el('td', {}, el('a', { class: 'mono', href: `player.html?id=${encodeURIComponent(c.a.session)}` }, DG.shortId(c.a.session)))));
      $('#done-card').hidden = false;
      DG.refreshApprovalCount();
    } catch (e) {
      status.className = 'decision-status decision-note deny';
      status.textContent = e.status === 404 ? 'Too late: it was answered elsewhere or expired.' : `Failed: ${e.message}`;
    }
  }

  // The element the action is aimed at: role, name, reference.
  function elementCell(x) {
    const name = DG.elementName(x, 200), ref = DG.elementRef(x);
    return el('dd', { class: 'element' }, name ? el('b', {}, name) : el('span', { class: 'muted' }, 'no role or name'),
      ref ? [' · ', el('span', { class: 'mono' }, ref)] : null);
  }

  function card(a) {
    const size = sizes.get(a.session);
    const element = a.element && typeof a.element === 'object' ? a.element : null;
    const wants = DG.describe(a.action, element);
    const img = el('img', { alt: `The screen of session ${a.session} when the policy asked`, hidden: true });
    const overlay = DG.svg('svg', { class: 'overlay-layer', 'aria-hidden': 'true' });
    const ph = el('div', { class: 'placeholder' }, a.frame ? 'Loading the screen…' : 'No screen was captured.');
    const screen = el('div', { class: 'screen' }, img, overlay, ph);
    const approve = el('button', { type: 'button', class: 'btn btn-approve', 'data-decision': 'approve' }, 'Approve');
    const deny = el('button', { type: 'button', class: 'btn btn-deny', 'data-decision': 'deny' }, 'Deny');
    const node = el('section', { class: 'card approval', dataset: { id: a.id, session: a.session }, 'aria-label': `Approval for ${wants}` },
      el('div', {}, el('div', { class: 'screen-caption' }, el('strong', {}, 'Screen when it asked'), el('span', {}, a.title || a.url || '')), screen),
      el('div', {},
        el('div', { class: 'muted small' }, 'Agent ', el('b', {}, a.agent), ' in session ',
          el('a', { class: 'mono', href: `live.html?id=${encodeURIComponent(a.session)}` }, DG.shortId(a.session)), ' wants to'),
        el('p', { class: 'wants' }, wants),
        el('div', { class: 'muted small' }, 'Exact action (canonical JSON, what approval is bound to)'),
        el('pre', { class: 'exact' }, JSON.stringify(a.action, null, 2)),
        el('dl', { class: 'kv' },
          element ? [el('dt', {}, 'Element'), elementCell(element)] : null,
          el('dt', {}, 'Rule'), el('dd', { class: 'mono rule' }, a.rule),
          el('dt', {}, 'Reason'), el('dd', {}, a.reason),
          el('dt', {}, 'Page'), el('dd', {}, a.url ? [a.title && a.title !== a.url ? el('b', {}, a.title) : null, a.title && a.title !== a.url ? ' · ' : null, el('span', { class: 'mono' }, a.url)]
            : el('span', { class: 'muted' }, 'no browser page')),
          el('dt', {}, 'Asked at'), el('dd', {}, DG.fmtClock(Date.now() - a.age_ms))),
        el('div', { class: 'time-left' }, el('span', { class: 'time-text small' }), el('div', { class: 'bar' }, el('span', {}))),
        el('div', { class: 'buttons' }, approve, deny, el('span', { class: 'decision-status', role: 'status' }))));
    const c = { node, a, deadline: Date.now() + a.expires_in_ms, total: a.age_ms + a.expires_in_ms };
    approve.addEventListener('click', () => decide(c, 'approve'));
    deny.addEventListener('click', () => decide(c, 'deny'));
    if (a.frame) {
      const p = frames.has(a.id) ? Promise.resolve(frames.get(a.id))
        : DG.api(`/v1/approvals/${a.id}/frame`).then((r) => r.blob()).then((b) => { const u = URL.createObjectURL(b); frames.set(a.id, u); return u; });
      p.then((url) => {
        img.onload = () => {
          img.hidden = false;
          ph.hidden = true;
          DG.drawOverlay(overlay, a.action, size || [img.naturalWidth, img.naturalHeight], 'ask', null, 'WAITING FOR YOUR DECISION', element);
          node.dataset.frameLoaded = '1';
        };
        img.src = url;
      }).catch(() => { ph.textContent = 'The screen is no longer available.'; });
    } else {
      DG.drawOverlay(overlay, a.action, size || [1280, 800], 'ask', null, 'WAITING FOR YOUR DECISION', element);
    }
    timeLeft(c);
    return c;
  }

  async function refresh() {
    const j = await DG.getJSON('/v1/approvals');
    const list = j.approvals || [];
    if (list.some((a) => !sizes.has(a.session))) await sessionSizes();
    const box = $('#pending');
    const ids = new Set(list.map((a) => a.id));
    // Answered or expired elsewhere: gone (a card decided here stays a
    // moment so its outcome can be read).
    for (const [k, c] of cards) {
      if (!ids.has(k) && (!c.decided || Date.now() - (c.goneAt || (c.goneAt = Date.now())) > 2500)) {
        c.node.remove();
        cards.delete(k);
        const u = frames.get(k);
        if (u) { URL.revokeObjectURL(u); frames.delete(k); }
      }
    }
    for (const a of list) {
      const c = cards.get(a.id);
      if (c) { c.deadline = Date.now() + a.expires_in_ms; continue; }
      const n = card(a);
      cards.set(a.id, n);
      box.append(n.node);
    }
    let empty = $('#none');
    if (!cards.size) {
      if (!empty) box.append(el('div', { class: 'card empty', id: 'none' }, 'Nothing is waiting for approval. New requests appear here by themselves.'));
    } else if (empty) {
      empty.remove();
    }
    $('#updated').textContent = `${list.length} waiting · updated ${DG.fmtClock(Date.now())}`;
    DG.setApprovalCount(list.length);
  }

  DG.start(async () => {
    await sessionSizes();
    await refresh();
    document.body.dataset.ready = '1';
    DG.every(1500, () => refresh().catch((e) => DG.showError(e)));
    DG.every(250, () => { for (const c of cards.values()) if (!c.decided) timeLeft(c); });
  });
})();
