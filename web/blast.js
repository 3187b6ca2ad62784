/* Blast radius: for one policy, what containment means in plain terms:
 * the network (the egress allowlist), files, credentials and limits, what
 * the agent may do, and the findings of the last `deskgate audit` of that
 * policy when the gateway has one (the policy entry's "audit" member);
 * and "Try it": the five classic attempts run live in a fresh jail under
 * the policy or a draft of it (POST /v1/blast), each shown as text only.
 *
 * The fixed facts are those of the jail every session runs in (README, "The
 * jail"); the rest is read from the policy itself (GET /v1/policies). */
'use strict';

(() => {
  const { el, clear, $ } = DG;
  let policies = [];

  // The built-in values of "limits" (README, "The policy file (limits)").
  const LIMITS = [
    ['memory_mb', 512, 'Memory', (v) => `${v} MiB, no swap`],
    ['pids', 512, 'Processes and threads', (v) => String(v)],
    ['cpus', 1.0, 'CPU', (v) => `${v} ${v === 1 ? 'core' : 'cores'}`],
    ['exec_seconds', 30, 'One command (exec)', (v) => DG.fmtDuration(v * 1000)],
    ['session_seconds', 3600, 'A session', (v) => DG.fmtDuration(v * 1000)],
    ['output_bytes', 1048576, 'Command output relayed', (v) => DG.fmtBytes(v)],
    ['scratch_mb', 256, 'Scratch space (/tmp, home)', (v) => `${v} MiB`],
  ];
  const RULE_SECTIONS = ['actions', 'urls', 'regions', 'keys', 'text', 'egress', 'budgets'];

  const pills = (items, cls) => el('ul', { class: `pill-list ${cls || ''}` }, items.map((x) => el('li', {}, x)));
  const facts = (items) => el('ul', { class: 'facts' }, items.filter(Boolean).map((x) => el('li', {}, x)));

  function edge(id, title, level, label, summary, ...body) {
    return el('section', { class: 'card', id: `edge-${id}`, 'aria-labelledby': `edge-${id}-title` },
      el('div', { class: 'edge-head' }, el('h2', { id: `edge-${id}-title` }, title), el('span', { class: `badge badge-${level}` }, label)),
      el('p', { class: 'edge-summary' }, summary), ...body);
  }

  function hostWords(h) {
    const [host, port] = h.split(/:(?=\d+$)/);
    return host.startsWith('*.') ? `any subdomain of ${host.slice(2)}, port ${port}` : `${host}, port ${port}`;
  }

  function network(p) {
    const allow = (p.egress && p.egress.allow) || [];
    const urls = p.urls || null;
    const out = allow.length
      ? edge('network', 'Network', 'warn', `${allow.length} ${allow.length === 1 ? 'host' : 'hosts'} reachable`,
        `Only ${allow.length === 1 ? 'this destination is' : 'these destinations are'} reachable, through the egress proxy:`,
        pills(allow, 'allow'), el('p', { class: 'small muted' }, allow.map(hostWords).join('; ')))
      : edge('network', 'Network', 'ok', 'no way out', 'Nothing outside the jail is reachable: the egress proxy refuses every host.');
    const pages = [];
    if (urls) {
      if (urls.allow && urls.allow.length) pages.push(el('div', {}, el('h3', {}, 'Pages the browser may load'), pills(urls.allow, 'allow')));
      if (urls.ask && urls.ask.length) pages.push(el('div', {}, el('h3', {}, 'Pages that need a human'), pills(urls.ask, 'ask')));
      if (urls.deny && urls.deny.length) pages.push(el('div', {}, el('h3', {}, 'Pages always refused'), pills(urls.deny, 'deny')));
    }
    out.append(...pages, facts([
      'The jail has no network interface but loopback; its only way out is the policy proxy.',
      'Nothing inside resolves names: the proxy resolves each name once and connects to exactly the address it checked.',
      'Loopback, private, link-local (169.254.0.0/16: cloud metadata), CGNAT, multicast and reserved addresses are always refused, IPv4 and IPv6, whatever the allowlist says.',
      'No UDP path: QUIC and non-proxied WebRTC are off.',
      'At most 64 connections and 1 GiB per session.',
      urls ? `URLs no rule names get the default: ${p.default || 'allow'}.` : hasRules(p) ? `No URL rules: every page gets the default, ${p.default}.` : null,
    ]));
    return out;
  }

  function files(p) {
    const scratch = (p.limits && p.limits.scratch_mb) || 256;
    return edge('files', 'Files', 'ok', 'no host files',
      'The session sees none of the host\'s files and keeps nothing after it ends.',
      facts([
        'The root is a fresh, empty file system; /usr, /bin, /sbin and /lib are the host\'s system directories, read-only.',
        `Writable: /tmp, the home directory and /dev/shm, together at most ${scratch} MiB, in memory, gone when the session ends.`,
        '/etc holds generated files only (no host users, secrets or network configuration).',
        'No /sys; /proc shows the jail\'s own processes only.',
        'Downloads are refused and file choosers intercepted in the browser.',
      ]));
  }

  function credentials(p) {
    const text = p.text || {};
    const redact = p.recording && p.recording.redact_text;
    return edge('credentials', 'Credentials', 'ok', 'none passed in',
      'No credentials, tokens or host environment reach the session.',
      facts([
        'The environment is rebuilt from a short allowlist (PATH, HOME, USER, LANG, TERM, TZ...): no host variables, keys or tokens.',
        'No host home directory, SSH keys, cloud credentials or keyrings: none of the host\'s files are there.',
        'The gateway\'s own tokens never enter the jail; a session token opens only its own session.',
        text.deny && text.deny.length ? `Typing text matching ${text.deny.map((x) => `/${x}/`).join(', ')} is refused.` : null,
        text.max_length ? `Typed text is at most ${text.max_length} characters per action.` : null,
        redact ? 'Recordings keep typed text as its length and a salted hash only.' : 'Recordings keep typed text as typed (recording.redact_text is off); screenshots show what pages displayed.',
      ]));
  }

  function isolation() {
    return edge('isolation', 'Isolation', 'ok', 'own namespaces',
      'Each session is a jail of its own: it cannot see or touch the host or another session.',
      facts([
        'Own user, mount, pid, network, ipc, uts and cgroup namespaces; its user maps to a host uid of its own that owns no host file.',
        'No capabilities, no_new_privs, and a default-deny system call filter (no ptrace, mount, BPF, namespaces, keyrings, io_uring...).',
        'Other sessions\' processes, X servers and files are out of sight; so is the browser\'s DevTools pipe.',
        'Typing into the terminal of another program (TIOCSTI) is refused.',
      ]));
  }

  function limits(p) {
    const l = p.limits || {};
    const b = p.budgets || {};
    const rows = LIMITS.map(([k, def, label, fmt]) => el('tr', { dataset: { limit: k } }, el('td', {}, label, k in l ? null : el('span', { class: 'muted small' }, ' (default)')), el('td', {}, fmt(k in l ? l[k] : def))));
    if (b.actions_per_minute) rows.push(el('tr', {}, el('td', {}, 'Actions per minute'), el('td', {}, String(b.actions_per_minute))));
    if (b.max_actions) rows.push(el('tr', {}, el('td', {}, 'Actions per session'), el('td', {}, String(b.max_actions))));
    if (b.max_exec) rows.push(el('tr', {}, el('td', {}, 'Commands per session'), el('td', {}, String(b.max_exec))));
    return edge('limits', 'Limits', 'ok', 'bounded',
      'Every session and command runs under hard limits; reaching one ends it, not the host.',
      el('table', { class: 'limits' }, el('tbody', {}, rows)));
  }

  function hasRules(p) {
    return RULE_SECTIONS.some((k) => k in p);
  }

  function actions(p) {
    const a = p.actions || {};
    const body = [];
    if (!hasRules(p)) {
      return edge('actions', 'What the agent may do', 'warn', 'no rules', 'This policy has no rules: every action and URL is allowed (the jail still contains it).');
    }
    if (a.allow && a.allow.length) body.push(el('h3', {}, 'Allowed'), pills(a.allow, 'allow'));
    if (a.ask && a.ask.length) body.push(el('h3', {}, 'Ask a human first'), pills(a.ask, 'ask'));
    if (a.deny && a.deny.length) body.push(el('h3', {}, 'Refused'), pills(a.deny, 'deny'));
    const regions = p.regions || [];
    if (regions.length) {
      body.push(el('h3', {}, 'Screen regions'), facts(regions.map((r) =>
        `${r.name}: ${r.verdict === 'deny' ? 'refused' : 'asks'} for ${(r.actions || ['pointer actions']).join(', ')} in [${r.rect.join(', ')}]` +
        `${r.url && r.url !== '**' ? ` on ${r.url}` : ''}${r.reason ? ` (${r.reason})` : ''}`)));
    }
    const k = p.keys || {};
    if ((k.deny && k.deny.length) || (k.ask && k.ask.length)) {
      body.push(el('h3', {}, 'Keys'));
      if (k.deny && k.deny.length) body.push(pills(k.deny, 'deny'));
      if (k.ask && k.ask.length) body.push(pills(k.ask, 'ask'));
    }
    return edge('actions', 'What the agent may do', 'info', `default: ${p.default}`,
      `Anything no rule names is ${{ allow: 'allowed', deny: 'refused', ask: 'asked about' }[p.default] || p.default}.`, ...body);
  }

  // `deskgate audit` (README): findings {id, edge, tried, outcome,
  // evidence, control?...}, summary {probes, contained, contained_by_kernel,
  // allowed, leaked, not_checked, errors}, kernel_refused [ids].
  // Outcome -> badge level. "contained-by-kernel": the host's kernel refuses
  // the call itself, with or without deskgate (its host control shows it), so
  // the audit saw the kernel's answer, not deskgate's: not a leak, and not
  // deskgate's containment either; its own, non-red state.
  const OUTCOME = { contained: 'ok', allowed: 'info', leaked: 'danger', 'not-checked': 'other', error: 'warn', 'contained-by-kernel': 'kernel' };
  const OUTCOME_LABEL = { 'contained-by-kernel': 'contained by the kernel' };
  const EDGES = [
    ['egress', 'Network (egress)', 'network'],
    ['filesystem', 'Files', 'files'],
    ['credentials', 'Credentials', 'credentials'],
    ['isolation', 'Isolation', 'isolation'],
    ['resources', 'Resources and limits', 'limits'],
  ];

  function tally(findings) {
    const t = { probes: findings.length, contained: 0, contained_by_kernel: 0, allowed: 0, leaked: 0, not_checked: 0, errors: 0 };
    for (const f of findings) {
      if (f.outcome === 'contained') t.contained++;
      else if (f.outcome === 'contained-by-kernel') t.contained_by_kernel++;
      else if (f.outcome === 'allowed') t.allowed++;
      else if (f.outcome === 'leaked') t.leaked++;
      else if (f.outcome === 'not-checked') t.not_checked++;
      else t.errors++;
    }
    return t;
  }
  function tallyText(t) {
    return [`${t.contained} contained`,
      t.contained_by_kernel ? `${t.contained_by_kernel} contained by the kernel` : null,
      t.allowed ? `${t.allowed} allowed by the policy` : null,
      `${t.leaked} leaked`, t.not_checked ? `${t.not_checked} not checked here` : null,
      t.errors ? `${t.errors} could not run` : null].filter(Boolean).join(', ');
  }
  function tallyBadge(t) {
    const level = t.leaked ? 'danger' : t.errors ? 'warn' : 'ok';
    const label = t.leaked ? `${t.leaked} leaked` : t.errors ? `${t.errors} could not run` : 'nothing leaked';
    return { level, label };
  }
  const findingsOf = (a) => (Array.isArray(a) ? a : (a && a.findings) || []);

  // One line at the bottom of an edge's card: what the last audit found there.
  function auditLine(entry, edgeName) {
    const mine = findingsOf(entry.audit).filter((f) => f.edge === edgeName);
    if (!mine.length) return null;
    const t = tally(mine);
    const b = tallyBadge(t);
    return el('p', { class: 'audit-line', dataset: { edge: edgeName } }, el('span', { class: `badge badge-${b.level}` }, b.label),
      ` Last audit: ${DG.plural(t.probes, 'probe')}: ${tallyText(t)}.`);
  }

  function audit(entry) {
    const a = entry.audit;
    if (!a) {
      return edge('audit', 'Last audit', 'other', 'not run', 'No audit run yet for this policy.',
        el('p', { class: 'muted small' }, 'deskgate audit --policy FILE runs the containment probes from inside a fresh session under the policy (network, files, credentials, isolation, resources); the gateway shows its last result here.'));
    }
    const findings = findingsOf(a);
    const t = tally(findings);
    const b = tallyBadge(t);
    const when = !Array.isArray(a) && (a.started || a.time);
    const how = [when ? `run ${when.replace('T', ' ').replace('Z', ' UTC')}` : null,
      a.profile ? `from inside ${/^[aeiox]/i.test(a.profile) ? 'an' : 'a'} ${a.profile} session` : null,
      a.duration_ms ? `in ${DG.fmtDuration(a.duration_ms)}` : null].filter(Boolean).join(' ');
    const groups = [];
    const known = new Set(EDGES.map((e) => e[0]));
    const edges = [...EDGES, ...[...new Set(findings.map((f) => f.edge))].filter((e) => !known.has(e)).map((e) => [e, e])];
    for (const [name, title] of edges) {
      const mine = findings.filter((f) => f.edge === name);
      if (!mine.length) continue;
      const et = tally(mine);
      const eb = tallyBadge(et);
      // f.control says where the control ran: "in the other session: ..." or
      // "on the host, as root with no filter: ..." (kernel-dependent probes).
      const rows = mine.map((f) => el('tr', { dataset: { outcome: f.outcome, id: f.id || '' } },
        el('td', {}, el('span', { class: `badge badge-${OUTCOME[f.outcome] || 'other'}` }, OUTCOME_LABEL[f.outcome] || f.outcome)),
        el('td', {}, f.tried || f.probe, f.id ? el('div', { class: 'sub mono' }, f.id) : null),
        el('td', { class: 'small evidence' }, f.evidence, f.control ? el('div', { class: 'muted control' }, `control ${f.control}`) : null)));
      groups.push(el('details', { class: 'audit-edge', open: et.leaked || et.errors ? true : null, dataset: { edge: name } },
        el('summary', {}, el('span', { class: `badge badge-${eb.level}` }, eb.label), ` ${title}: ${DG.plural(et.probes, 'probe')}, ${tallyText(et)}`),
        el('div', { class: 'table-wrap' }, el('table', { class: 'table audit-table' },
          el('thead', {}, el('tr', {}, ['Outcome', 'What was tried', 'Evidence'].map((h) => el('th', { scope: 'col' }, h)))),
          el('tbody', {}, rows)))));
    }
    const byKernel = findings.filter((f) => f.outcome === 'contained-by-kernel');
    const kernelNote = byKernel.length ? el('div', { class: 'kernel-note', id: 'audit-kernel' },
      el('span', { class: 'badge badge-kernel' }, 'contained by the kernel'),
      el('p', {}, `${DG.plural(byKernel.length, 'probe')}: this host's kernel refuses ${byKernel.length === 1 ? 'that call' : 'those calls'} itself, with or without deskgate, so the audit saw the kernel's answer, not deskgate's. Not a leak; on a kernel that runs ${byKernel.length === 1 ? 'it' : 'them'}, deskgate's own containment is what holds.`),
      el('ul', { class: 'facts' }, byKernel.map((f) => el('li', { dataset: { id: f.id || '' } },
        el('span', { class: 'mono' }, f.id || f.probe || '?'), `: ${f.tried || f.probe || ''}`,
        el('div', { class: 'small evidence mono' }, f.evidence),
        f.control ? el('div', { class: 'small muted mono' }, `control ${f.control}`) : null)))) : null;
    return edge('audit', 'Last audit', b.level, b.label,
      `${DG.plural(t.probes, 'probe')}${how ? ` ${how}` : ''}: ${tallyText(t)}.`,
      kernelNote, el('div', { id: 'audit-findings' }, groups));
  }

  function show(name) {
    const entry = policies.find((x) => x.name === name) || policies[0];
    if (!entry) return;
    $('#policy').value = entry.name;
    history.replaceState(null, '', `?policy=${encodeURIComponent(entry.name)}`);
    document.body.dataset.policy = entry.name;
    const errBox = $('#policy-error');
    const grid = clear($('#edges'));
    if (!entry.policy) {
      clear(errBox).append(el('div', {}, el('strong', {}, 'This policy does not load.'), el('p', {}, entry.error || 'unknown error')));
      errBox.hidden = false;
      $('#summary').textContent = '';
      return;
    }
    errBox.hidden = true;
    const p = entry.policy;
    const allow = (p.egress && p.egress.allow) || [];
    $('#summary').textContent = `A session under “${entry.name}” ` +
      (allow.length ? `can reach ${allow.join(', ')} through the egress proxy and nothing else on the network` : 'can reach nothing on the network') +
      '; it sees no host files and holds no credentials.';
    const wide = (n) => { n.classList.add('wide'); return n; };
    const cards = { network: network(p), files: files(p), credentials: credentials(p), isolation: isolation(), limits: limits(p) };
    for (const [edgeName, , card] of EDGES) {
      const line = auditLine(entry, edgeName);
      if (line) cards[card].append(line);
    }
    grid.append(cards.network, cards.files, cards.credentials, cards.isolation, cards.limits, actions(p), wide(audit(entry)));
  }

  /* ---- Try it: the five attempts, live (POST /v1/blast) ------------------ */

  // Verdict -> what the badge says. "ran": the policy let it; "contained":
  // the jail or a bound stopped it; "leaked": it reached what it tried;
  // "error": the run could not tell.
  const VERDICT_LABEL = { ran: 'ran', contained: 'contained', leaked: 'leaked', error: 'could not tell' };

  // The draft as the request carries it: only the knobs the viewer set;
  // null when none is (the policy as it is).
  function draftOf() {
    const d = {};
    const eg = $('#try-egress').value;
    if (eg === 'off') d.egress = false;
    if (eg === 'host') d.egress_hosts = [$('#try-host').value.trim()];
    const num = (sel) => ($(sel).value.trim() === '' ? null : Number($(sel).value));
    const scratch = num('#try-scratch'), wall = num('#try-wall');
    if (scratch !== null) d.scratch_mb = scratch;
    if (wall !== null) d.wall_seconds = wall;
    const secret = $('#try-secret').value;
    if (secret !== '') d.secret = secret;
    return Object.keys(d).length ? d : null;
  }

  function revertDraft() {
    $('#try-egress').value = 'policy';
    $('#try-host').value = '';
    $('#try-host-label').hidden = true;
    for (const sel of ['#try-scratch', '#try-wall', '#try-secret']) $(sel).value = '';
    $('#try-status').textContent = 'Draft reverted: the next run uses the policy as it is.';
  }

  function showRun(j) {
    const rows = (j.attempts || []).map((a) => el('tr', { dataset: { attempt: a.id, verdict: a.verdict } },
      el('td', {}, el('span', { class: `badge badge-${VERDICT_LABEL[a.verdict] ? a.verdict : 'error'}` }, VERDICT_LABEL[a.verdict] || a.verdict)),
      el('td', {}, a.title, el('div', { class: 'sub small muted' },
        a.timed_out ? 'ended by the wall clock' : a.exit_code !== undefined ? `exit ${a.exit_code}` : null,
        a.duration_ms !== undefined ? `, ${DG.fmtDuration(a.duration_ms)}` : null)),
      el('td', { class: 'evidence' }, a.evidence,
        (a.stdout || a.stderr) ? el('details', {}, el('summary', { class: 'small' }, 'What it printed'),
          a.stdout ? el('pre', { class: 'out' }, a.stdout) : null,
          a.stderr ? el('pre', { class: 'err' }, a.stderr) : null) : null),
      el('td', { class: 'rule' }, a.rule)));
    const table = $('#try-results');
    clear(table.tBodies[0]).append(...rows);
    table.hidden = !rows.length;
    const n = (v) => (j.attempts || []).filter((a) => a.verdict === v).length;
    const leaked = n('leaked');
    const badge = $('#try-badge');
    badge.className = `badge badge-${leaked ? 'danger' : n('error') ? 'warn' : 'ok'}`;
    badge.textContent = leaked ? `${leaked} leaked` : n('error') ? `${n('error')} could not tell` : 'nothing leaked';
    const l = j.limits || {};
    const d = j.draft;
    const draftWords = d ? [d.egress === false ? 'egress off' : null,
      d.egress_hosts ? `egress to ${d.egress_hosts.join(', ')}` : null,
      d.scratch_mb ? `scratch ${d.scratch_mb} MiB` : null, d.wall_seconds ? `wall clock ${d.wall_seconds} s` : null,
      d.secret ? `a fake secret of ${d.secret.length} characters in ${d.secret.variable}` : null].filter(Boolean).join(', ') : '';
    const note = $('#try-note');
    note.textContent = `Under “${j.policy}”${d ? ` with a draft (${draftWords})` : ''}: ${n('ran')} ran, ${n('contained')} contained, ${leaked} leaked` +
      ` in ${DG.fmtDuration(j.duration_ms || 0)}; the post went to ${j.egress_target}; scratch ${l.scratch_mb} MiB, wall clock ${l.wall_seconds} s, ` +
      `${l.cpus} CPU. The attempts run as exec actions do, whatever the policy's action rules say about exec.` +
      (j.error ? ` The run stopped early: ${j.error}` : '');
    note.hidden = false;
    document.body.dataset.tryRun = String(Number(document.body.dataset.tryRun || 0) + 1);
  }

  async function run(ev) {
    ev.preventDefault();
    const btn = $('#try-run');
    const errBox = $('#try-error');
    errBox.hidden = true;
    btn.disabled = true;
    const draft = draftOf();
    const body = { policy: $('#policy').value };
    if (draft) body.draft = draft;
    $('#try-status').textContent = `Running in a fresh jail${draft ? ' under the draft' : ''}…`;
    document.body.dataset.tryBusy = '1';
    try {
      const j = await (await DG.api('/v1/blast', { method: 'POST', body })).json();
      showRun(j);
      $('#try-status').textContent = '';
    } catch (e) {
      clear(errBox).append(el('strong', {}, e.status === 429 ? 'Not now' : 'The run was refused'), el('p', {}, e.message));
      errBox.hidden = false;
      $('#try-status').textContent = '';
    } finally {
      btn.disabled = false;
      delete document.body.dataset.tryBusy;
    }
  }

  function setupTry() {
    $('#try-egress').addEventListener('change', () => { $('#try-host-label').hidden = $('#try-egress').value !== 'host'; });
    $('#try-form').addEventListener('submit', run);
    $('#try-revert').addEventListener('click', revertDraft);
  }

  DG.start(async () => {
    setupTry();
    const j = await DG.getJSON('/v1/policies');
    policies = j.policies || [];
    const sel = clear($('#policy'));
    for (const p of policies) sel.append(el('option', { value: p.name }, p.name + (p.policy ? '' : ' (does not load)')));
    sel.addEventListener('change', () => show(sel.value));
    if (!policies.length) {
      $('#summary').textContent = 'The gateway lists no policy.';
    } else {
      show(DG.param('policy') || policies[0].name);
    }
    document.body.dataset.ready = '1';
  });
})();
