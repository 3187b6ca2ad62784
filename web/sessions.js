/* Sessions: the live sessions and the recorded ones, with what each did
 * (actions, denied, asked) and whether its recording verifies. */
'use strict';

(() => {
  const { el, clear, $ } = DG;
  const STATS_MAX = 50;     // recordings whose events are read for their counts
  const stats = new Map();  // id -> {key, counts, durationMs, policy}

  // Counts and duration of one recording, from its events. A sealed
  // recording never changes: its result is kept while its verify result is.
  async function statsFor(rec) {
    const v = rec.verify || {};
    const key = rec.live ? null : `${v.status}:${v.last_seq}:${v.events}`;
    const cached = stats.get(rec.id);
    if (cached && key && cached.key === key) return cached;
    const evs = await DG.events(rec.id);
    const created = evs.find((e) => e.type === 'lifecycle' && e.state === 'created');
    const first = evs[0], last = evs[evs.length - 1];
    const s = {
      key,
      counts: DG.countVerdicts(evs),
      durationMs: first && last ? last.mono_ms - first.mono_ms : null,
      policy: created ? created.policy : null,
    };
    stats.set(rec.id, s);
    return s;
  }

  const num = (n) => (n === null || n === undefined ? '—' : String(n));

  function deniedCell(c) {
    if (!c) return el('td', { class: 'num muted' }, '—');
    return el('td', { class: 'num' },
      c.deny ? el('span', { class: 'count-deny' }, String(c.deny)) : el('span', { class: 'muted' }, '0'),
      c.asked ? el('span', { class: 'count-ask', title: 'actions that waited for a human' }, ` · ${c.asked} asked`) : null);
  }

  function row(r) {
    const href = r.live ? `live.html?id=${encodeURIComponent(r.id)}` : `player.html?id=${encodeURIComponent(r.id)}`;
    const links = el('td', { class: 'row-actions' });
    if (r.live) links.append(el('a', { class: 'btn btn-small btn-primary', href }, 'Watch live'));
    if (r.recorded) {
      links.append(el('a', { class: 'btn btn-small', href: `player.html?id=${encodeURIComponent(r.id)}` }, r.live ? 'Replay so far' : 'Replay'));
    }
    return el('tr', { dataset: { id: r.id } },
      el('td', {}, el('a', { class: 'mono', href, title: r.id }, DG.shortId(r.id)),
        r.title ? el('div', { class: 'sub', title: r.url || '' }, r.title) : null),
      el('td', {}, r.profile || '—'),
      el('td', {}, r.agent || '—'),
      el('td', {}, r.policy || '—'),
      el('td', { title: r.start ? DG.fmtTime(r.start) : '' }, r.start ? DG.fmtTime(r.start) : '—',
        r.start ? el('div', { class: 'sub' }, DG.fmtAgo(r.start)) : null),
      el('td', { class: 'num' }, r.durationMs === null || r.durationMs === undefined ? '—' : r.durationMs < 1000 ? '< 1 s' : DG.fmtDuration(r.durationMs)),
      el('td', { class: 'num', dataset: { col: 'actions' } }, num(r.counts ? r.counts.actions : r.actions)),
      deniedCell(r.counts),
      el('td', {}, r.verify ? DG.verifyBadge(r.verify) : el('span', { class: 'muted' }, 'no recording')),
      links);
  }

  function table(rows, live) {
    if (!rows.length) {
      return el('p', { class: 'empty' }, live ? 'No session is running right now.' : 'No recorded sessions yet.');
    }
    const cols = ['Session', 'Profile', 'Agent', 'Policy', 'Started', 'Duration', 'Actions', 'Denied', 'Recording', ''];
    const widths = ['11%', '7%', '10%', '8%', '14%', '7%', '6%', '9%', '9%', '19%'];
    return el('table', { class: 'table table-fixed', id: live ? 'live-table' : 'ended-table' },
      el('colgroup', {}, widths.map((w) => { const c = el('col'); c.style.width = w; return c; })),
      el('thead', {}, el('tr', {}, cols.map((c, i) => el('th', { scope: 'col', class: i >= 5 && i <= 7 ? 'num' : null }, c)))),
      el('tbody', {}, rows.map(row)));
  }

  async function refresh() {
    const [sess, recs] = await Promise.all([DG.getJSON('/v1/sessions'), DG.getJSON('/v1/recordings')]);
    const recordings = (recs.recordings || []).slice().sort((a, b) => (b.start_ms || 0) - (a.start_ms || 0));
    const byId = new Map(recordings.map((r) => [r.id, r]));
    const live = (sess.sessions || []).map((s) => {
      const rec = byId.get(s.id);
      return {
        id: s.id, live: true, recorded: !!rec, profile: s.profile, agent: s.agent, policy: s.policy,
        start: rec ? rec.start_ms : Date.now() - s.age_s * 1000, durationMs: s.age_s * 1000,
        actions: s.actions, verify: rec ? rec.verify : null, url: s.url, title: s.title, rec,
      };
    });
    const liveIds = new Set(live.map((s) => s.id));
    const ended = recordings.filter((r) => !liveIds.has(r.id)).map((r) => ({
      id: r.id, live: false, recorded: true, profile: r.profile, agent: r.token_name,
      start: r.start_ms, verify: r.verify, rec: r,
    }));
    // Counts come from the events (the recording is written as it goes).
    const withStats = [...live.filter((s) => s.rec), ...ended.slice(0, STATS_MAX)];
    await Promise.all(withStats.map(async (r) => {
      try {
        const s = await statsFor(r.rec);
        r.counts = s.counts;
        if (!r.live) { r.durationMs = s.durationMs; r.policy = s.policy; }
      } catch { /* shown as unknown */ }
    }));
    clear($('#live-list')).append(table(live, true));
    clear($('#ended-list')).append(table(ended, false));
    $('#live-title').textContent = `Live now (${live.length})`;
    $('#ended-title').textContent = `Recorded (${ended.length})`;
    const broken = ended.filter((r) => r.verify && ['bad', 'unsealed', 'unreadable'].includes(r.verify.status)).length;
    $('#summary').textContent = `${DG.plural(live.length, 'live session')}, ${DG.plural(ended.length, 'recording')}` +
      (broken ? `; ${broken} not verifiable (see the Recording column)` : '');
    $('#updated').textContent = `Updated ${DG.fmtClock(Date.now())}`;
  }

  DG.start(async () => {
    await refresh();
    document.body.dataset.ready = '1';
    DG.every(4000, () => refresh().catch((e) => DG.showError(e)));
  });
})();
