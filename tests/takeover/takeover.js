'use strict';
// A human's takeover (docs/api.md#takeover) against a real gateway and a
// real browser session: an operator takes control, the agent's next
// actions are answered "paused by an operator" on its WebSocket (canonical,
// Anthropic, OpenAI and browser toolset shapes, the last two field by
// field as docs/agents.md gives them) and over MCP, and a CDP client's
// commands are refused (one the worker had cached too); the operator types
// into a loopback page through the policy (a click in a denied region,
// denied text and a denied key chord refused for the human too, naming the
// rule); the recording has the human's actions (actor human:olive), the
// agent's (actor agent) and the takeover's start and end, and replays;
// handing back lets the agent work again; closing the operator's channel
// and the idle and whole timeouts return control. Hostile: a viewer and an
// agent cannot take control (403), a second operator gets 409 naming who
// holds it, an unknown session 404, oversize, binary and garbage operator
// messages are refused and the channel stays usable. The live page's Take
// control button in Debian's Chromium (a paste there sends nothing: the
// clipboard stays off).
//
//   node takeover.js DESKGATE_BINARY WORK_DIR

const http = require('node:http');
const path = require('node:path');
const { spawn } = require('node:child_process');
const WebSocket = require('ws');
const { Gateway, Agent, Inbox, TOKENS, sleep, waitFor } = require('../web/lib/gateway.js');

const bin = process.argv[2];
const { say, expect, check, finish } = require('../support/checks.js').checks('takeover');

// The page: a wide text field near the top of the viewport, and a button
// filling its lower part (in the policy's denied region on the screen).
const PAGE = `<!doctype html><html><head><title>form</title><style>
body{margin:0;font:16px sans-serif}
#q{position:absolute;left:0;top:100px;width:100%;height:200px;font-size:40px}
#buy{position:absolute;left:0;top:420px;width:100%;height:400px}
</style></head><body>
<textarea id=q aria-label="Name" oninput="document.title='q='+this.value"></textarea>
<button id=buy onclick="document.title='bought'">Buy now</button>
</body></html>`;

function site() {
  const log = [];
  const srv = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    res.writeHead(req.url === '/' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(req.url === '/' ? PAGE : 'not found');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ srv, log, port: srv.address().port })));
}

// Runs a command: {status, stdout, stderr}.
function run(cmd, args) {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    p.stdout.on('data', (d) => { stdout += d; });
    p.stderr.on('data', (d) => { stderr += d; });
    p.on('exit', (code, sig) => resolve({ status: code === null ? `signal ${sig}` : code, stdout, stderr }));
  });
}

// The operator's channel: canonical actions in, results out.
class Operator extends Inbox {
  static async open(gw, id, token) {
    const o = new Operator(`session ${id}: the operator`);
    const url = gw.base.replace('http:', 'ws:') + `/v1/sessions/${id}/operate`;
    o.ws = new WebSocket(url, ['deskgate.v1', `bearer.${token}`], { maxPayload: 64 * 1024 * 1024 });
    o.ws.on('message', (d, binary) => {
      if (binary) return;
      o.queue.push(JSON.parse(d.toString()));
      o.pump();
    });
    o.ws.on('close', (code, reason) => { o.closed = { code, reason: reason.toString() }; o.pump(); });
    await new Promise((res, rej) => { o.ws.once('open', res); o.ws.once('error', rej); });
    o.hello = await o.next((m) => m.type === 'hello');
    return o;
  }

  // Sends a message (an object or raw text/Buffer); the next result or error.
  send(m) {
    this.ws.send(typeof m === 'string' || Buffer.isBuffer(m) ? m : JSON.stringify(m));
    return this.next((x) => x.type === 'result' || x.type === 'error');
  }

  close() { try { this.ws.close(); } catch { /* closed */ } }
}

// The status and JSON of a WebSocket handshake that should be refused.
function refusedUpgrade(gw, id, tail, token) {
  return new Promise((resolve) => {
    const url = gw.base.replace('http:', 'ws:') + `/v1/sessions/${id}/${tail}`;
    const ws = new WebSocket(url, ['deskgate.v1', `bearer.${token}`]);
    ws.on('unexpected-response', (req, res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    ws.on('open', () => { ws.close(); resolve({ status: 101, body: '' }); });
    ws.on('error', () => { /* the unexpected-response says it */ });
  });
}

const takeover = (gw, id, token, method = 'POST') => gw.http(method, `/v1/sessions/${id}/takeover`, token);

// The reason every paused answer gives while olive has control (docs/api.md#takeover).
const PAUSED = 'paused by an operator: olive has control of the desktop';

// Whether o is an object with exactly these keys (a shape documented field
// by field: an extra one is as wrong as a missing one).
const sameKeys = (o, keys) => !!o && typeof o === 'object' && !Array.isArray(o) &&
  JSON.stringify(Object.keys(o).sort()) === JSON.stringify([...keys].sort());

async function mainFlow(gw, shop, evil, policyFile) {
  const agent = await Agent.create(gw, { profile: 'browser' });
  const id = agent.id;
  const url = `http://shop.test:${shop.port}/`;
  let r = await agent.act({ type: 'navigate', url });
  expect('the agent navigates before the takeover', r.ok === true && r.verdict === 'allow', JSON.stringify(r));

  // Who may not.
  const v = await takeover(gw, id, TOKENS.viewer);
  expect('a viewer cannot take control (403)', v.status === 403 && v.json.error.code === 'forbidden', `${v.status} ${v.text}`);
  const a = await takeover(gw, id, TOKENS.agent);
  expect('the agent cannot take control (403)', a.status === 403, `${a.status} ${a.text}`);
  const u = await takeover(gw, 'f'.repeat(32), TOKENS.olive);
  expect('an unknown session is 404', u.status === 404 && u.json.error.code === 'not_found', `${u.status} ${u.text}`);
  const early = await refusedUpgrade(gw, id, 'operate', TOKENS.olive);
  expect('the operator channel needs control first (409)', early.status === 409 && /take control first/.test(early.body), `${early.status} ${early.body}`);

  // A CDP client, whose Target.getTargets the worker then allows from its
  // verdict cache (the second time: recorded "cached").
  const cdpUrl = gw.base.replace('http:', 'ws:') + `/v1/sessions/${id}/cdp`;
  const cdp = new WebSocket(cdpUrl, { headers: { Authorization: `Bearer ${TOKENS.agent}` } });
  await new Promise((res, rej) => { cdp.once('open', res); cdp.once('error', rej); });
  const cdpWait = new Map();
  cdp.on('message', (d) => { const m = JSON.parse(d.toString()); if (cdpWait.has(m.id)) cdpWait.get(m.id)(m); });
  const cdpSend = (cid, method) => {
    const p = new Promise((res) => cdpWait.set(cid, res));
    cdp.send(JSON.stringify({ id: cid, method }));
    return Promise.race([p, sleep(15000).then(() => ({ timeout: true }))]);
  };
  const c1 = await cdpSend(1, 'Target.getTargets'), c2 = await cdpSend(2, 'Target.getTargets');
  expect('a CDP command runs before the takeover', c1.result && c2.result, JSON.stringify([c1, c2]).slice(0, 300));
  const cachedBefore = (await gw.events(id)).filter((e) => e.type === 'cdp' && e.method === 'Target.getTargets' && e.cached);
  expect('... the second from the worker\'s verdict cache', cachedBefore.length === 1, cachedBefore.length);

  // Olive takes control.
  const t = await takeover(gw, id, TOKENS.olive);
  expect('an operator takes control (200)', t.status === 200 && t.json.takeover.operator === 'olive' &&
    t.json.takeover.expires_in_s === 300 && /\/operate$/.test(t.json.operate_url), `${t.status} ${t.text}`);
  const again = await takeover(gw, id, TOKENS.olive);
  expect('asking again keeps it', again.status === 200 && again.json.takeover.operator === 'olive', again.text);
  const second = await takeover(gw, id, TOKENS.oscar);
  expect('a second operator gets 409 naming who holds it', second.status === 409 && /olive has control/.test(second.json.error.message), `${second.status} ${second.text}`);
  const notHis = await takeover(gw, id, TOKENS.oscar, 'DELETE');
  expect('another operator cannot hand it back (403)', notHis.status === 403, `${notHis.status} ${notHis.text}`);
  const sj = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
  expect('the session says who has control', sj.takeover && sj.takeover.operator === 'olive', JSON.stringify(sj.takeover));

  // The agent is paused, in each shape.
  r = await agent.act({ type: 'screenshot' });
  expect('the agent\'s canonical action is answered paused', r.ok === false && r.rule === 'takeover' &&
    r.reason === PAUSED, JSON.stringify(r));
  agent.send({ type: 'tool_use', id: 'toolu_1', name: 'computer', input: { action: 'left_click', coordinate: [640, 200] } });
  const tr = await agent.next((x) => x.type === 'tool_result');
  const text = JSON.stringify(tr.content);
  expect('the agent\'s Anthropic tool_use is answered paused', tr.tool_use_id === 'toolu_1' && tr.is_error === true &&
    /paused by an operator/.test(text), JSON.stringify(tr).slice(0, 400));
  // OpenAI (docs/agents.md#openai-computer-use): exactly the
  // computer_call_output item (its call_id, the safety checks acknowledged,
  // the screen as it is) and the user message saying the refusal and the
  // page's address, nothing else.
  const safety = [{ id: 'cs_1', code: 'malicious_instructions', message: 'a check the agent passes on' }];
  agent.send({ type: 'computer_call', id: 'cu_1', call_id: 'call_1', status: 'completed', pending_safety_checks: safety,
    action: { type: 'click', x: 640, y: 200, button: 'left' } });
  const oa = await agent.next((x) => Array.isArray(x) || x.type === 'error');
  const [item, msg] = Array.isArray(oa) ? oa : [];
  const png = item && item.output && /^data:image\/png;base64,(.+)$/.exec(item.output.image_url || '');
  expect('the agent\'s OpenAI computer_call is answered paused: its computer_call_output, then the refusal and URL as a user message',
    Array.isArray(oa) && oa.length === 2 &&
    sameKeys(item, ['type', 'call_id', 'acknowledged_safety_checks', 'output']) && item.type === 'computer_call_output' &&
    item.call_id === 'call_1' && JSON.stringify(item.acknowledged_safety_checks) === JSON.stringify(safety) &&
    sameKeys(item.output, ['type', 'image_url']) && item.output.type === 'computer_screenshot' &&
    !!png && Buffer.from(png[1], 'base64').subarray(0, 8).equals(Buffer.from('\x89PNG\r\n\x1a\n', 'latin1')) &&
    JSON.stringify(msg) === JSON.stringify({ type: 'message', role: 'user', content: [{ type: 'input_text',
      text: `deskgate refused click: ${PAUSED} (rule takeover)\ncurrent_url: ${url}` }] }),
  JSON.stringify(oa, (k, v) => (k === 'image_url' ? `${String(v).slice(0, 40)}...` : v)).slice(0, 600));
  // Anthropic's browser toolset: the member's tool_result, with the tabs.
  agent.send({ type: 'tool_use', id: 'toolu_b1', name: 'left_click', toolset_name: 'browser',
    input: { target: { type: 'coordinate', x: 640, y: 200 } } });
  const br = await agent.next((x) => x.type === 'tool_result' || x.type === 'error');
  const tabs = br.content && br.content[1] && br.content[1].tabs;
  expect('the agent\'s browser toolset call is answered paused: the refusal, then browser_state',
    sameKeys(br, ['type', 'tool_use_id', 'is_error', 'toolset_name', 'content']) && br.type === 'tool_result' &&
    br.tool_use_id === 'toolu_b1' && br.is_error === true && br.toolset_name === 'browser' && br.content.length === 2 &&
    JSON.stringify(br.content[0]) === JSON.stringify({ type: 'text', text: `deskgate refused left_click: ${PAUSED} (rule takeover)` }) &&
    sameKeys(br.content[1], ['type', 'tabs']) && br.content[1].type === 'browser_state' && Array.isArray(tabs) &&
    tabs.length === 1 && tabs[0].active === true && tabs[0].url === url && tabs[0].title === 'form',
  JSON.stringify(br).slice(0, 600));

  // A CDP client is refused too, the cached command included.
  const cm = await cdpSend(3, 'Target.getTargets');
  expect('a CDP command (cached before) is refused with "deskgate: ... paused by an operator"', cm.error && cm.error.code === -32000 &&
    /^deskgate: denied by takeover: paused by an operator/.test(cm.error.message), JSON.stringify(cm));

  // The operator's channel.
  const op = await Operator.open(gw, id, TOKENS.olive);
  expect('the operator\'s channel opens with the session\'s hello', op.hello.id === id && op.hello.takeover.connected === true, JSON.stringify(op.hello.takeover));
  const dup = await refusedUpgrade(gw, id, 'operate', TOKENS.olive);
  expect('a second operator channel is 409', dup.status === 409, `${dup.status} ${dup.body}`);
  const osc = await refusedUpgrade(gw, id, 'operate', TOKENS.oscar);
  expect('another operator\'s channel is 409 naming who holds it', osc.status === 409 && /olive/.test(osc.body), `${osc.status} ${osc.body}`);
  const vw = await refusedUpgrade(gw, id, 'operate', TOKENS.viewer);
  expect('a viewer\'s operator channel is 403', vw.status === 403, `${vw.status} ${vw.body}`);

  // The screen: the text field is in the top part of the viewport, the
  // button in the lower part; find the viewport's top on the screen.
  r = await op.send({ type: 'click', x: 640, y: 330 });
  expect('the operator clicks into the text field', r.ok === true && r.verdict === 'allow', JSON.stringify(r));
  r = await op.send({ type: 'type', text: 'hello' });
  expect('the operator types through the policy', r.ok === true && r.verdict === 'allow', JSON.stringify(r));
  const title = await waitFor('the page\'s title to say the typed text', async () => {
    const s = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
    return s.title === 'q=hello' && s.title;
  }, 10000).catch((e) => e.message);
  expect('the page got the operator\'s text', title === 'q=hello', title);
  r = await op.send({ type: 'type', text: ' secret-42' });
  expect('denied text is refused for the human, naming the rule', r.ok === false && r.verdict === 'deny' && /^text\.deny/.test(r.rule), JSON.stringify(r));
  r = await op.send({ type: 'click', x: 640, y: 700 });
  expect('a click in a denied region is refused for the human, naming the rule', r.ok === false && r.verdict === 'deny' &&
    r.rule === 'regions[no-buy]', JSON.stringify(r));
  let s = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
  expect('... and not performed', s.title === 'q=hello', s.title);
  r = await op.send({ type: 'navigate', url: `http://evil.test:${evil.port}/` });
  expect('a denied URL is refused for the human', r.ok === false && /^urls\./.test(r.rule), JSON.stringify(r));
  // A person's keys go through the keys rules too (shift added does not
  // dodge a chord's rule, docs/policy.md): ctrl+w would close the tab.
  r = await op.send({ type: 'key', keys: 'ctrl+shift+w' });
  expect('a denied key chord is refused for the human, naming the rule', r.ok === false && r.verdict === 'deny' &&
    r.rule === 'keys.deny[0] ctrl+w' && r.reason === 'the key chord is denied', JSON.stringify(r));
  s = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
  expect('... and not performed: the tab is still there', s.title === 'q=hello' && s.url === url, `${s.title} ${s.url}`);

  // Hostile operator messages; the channel stays usable.
  r = await op.send('not json');
  expect('garbage is bad_request', r.type === 'error' && r.error.code === 'bad_request', JSON.stringify(r));
  r = await op.send({ type: 'exec', argv: ['id'] });
  expect('exec is not an operator\'s action', r.type === 'error' && r.error.code === 'bad_request' && /not exec/.test(r.error.message), JSON.stringify(r));
  r = await op.send({ type: 'tool_use', id: 'toolu_9', name: 'computer', input: { action: 'screenshot' } });
  expect('an Anthropic block is not an operator\'s message', r.type === 'error' && /canonical/.test(r.error.message), JSON.stringify(r));
  r = await op.send({ type: 'type', text: 'x'.repeat(64 * 1024) });
  expect('a message over 64 KiB is too_large', r.type === 'error' && r.error.code === 'too_large' && /65536/.test(r.error.message), JSON.stringify(r));
  r = await op.send(JSON.stringify({ type: 'wait', ms: 1 }).padEnd(64 * 1024, ' '));
  expect('a message of exactly 64 KiB is taken', r.type === 'result' && r.ok === true, JSON.stringify(r));
  r = await op.send(Buffer.from([1, 2, 3]));
  expect('a binary message is refused', r.type === 'error' && r.error.code === 'binary', JSON.stringify(r));
  r = await op.send({ type: 'screenshot' });
  expect('the channel stays usable', r.type === 'result' && r.ok === true, JSON.stringify(r));

  // Hand back.
  const back = await takeover(gw, id, TOKENS.olive, 'DELETE');
  expect('the operator hands back (200)', back.status === 200 && back.json.takeover === null, `${back.status} ${back.text}`);
  const endMsg = await op.next((m) => m.type === 'takeover').catch((e) => ({ error: e.message }));
  expect('the operator\'s channel is told and closed', endMsg.state === 'ended' && endMsg.reason === 'released', JSON.stringify(endMsg));
  const none = await takeover(gw, id, TOKENS.olive, 'DELETE');
  expect('handing back twice is 404', none.status === 404, `${none.status} ${none.text}`);
  // Not the operator's spot: a click there within the double-click time
  // of the operator's (this test can get there in under 500 ms) is a
  // double click, which selects "hello", and the "!" below replaced it.
  r = await agent.act({ type: 'click', x: 760, y: 330 });
  expect('the agent works again', r.ok === true && r.verdict === 'allow', JSON.stringify(r));
  const c4 = await cdpSend(4, 'Target.getTargets');
  expect('... and its CDP client', !!c4.result, JSON.stringify(c4).slice(0, 300));
  cdp.close();
  r = await agent.act({ type: 'type', text: '!' });
  s = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
  expect('... on the same page', r.ok === true && s.title === 'q=hello!', `${JSON.stringify(r)} ${s.title}`);

  // Disconnecting hands back too; an admin may take control.
  expect('an admin takes control', (await takeover(gw, id, TOKENS.admin)).status === 200);
  const op2 = await Operator.open(gw, id, TOKENS.admin);
  op2.close();
  const gone = await waitFor('control to return after the channel closed', async () => {
    const g = await gw.api('GET', `/v1/sessions/${id}/takeover`, TOKENS.viewer);
    return g.takeover === null && g;
  }, 10000).catch((e) => e.message);
  expect('closing the operator\'s channel returns control', gone && gone.takeover === null, JSON.stringify(gone));
  r = await agent.act({ type: 'screenshot' });
  expect('the agent works after the disconnect', r.ok === true, JSON.stringify(r));

  // The recording.
  const ev = await gw.events(id);
  const acts = ev.filter((e) => e.type === 'action');
  const human = acts.filter((e) => e.actor === 'human:olive');
  expect('the human\'s actions are recorded with actor human:olive', human.length === 8 &&
    human.some((e) => e.action.type === 'type' && e.verdict === 'allow') &&
    human.some((e) => e.rule === 'regions[no-buy]'), human.map((e) => `${e.action.type}:${e.verdict}`).join(' '));
  const keys = human.filter((e) => e.action.type === 'key');
  expect('the human\'s refused key chord is recorded as theirs, with its rule', keys.length === 1 &&
    keys[0].input.keys === 'ctrl+shift+w' && keys[0].verdict === 'deny' && keys[0].rule === 'keys.deny[0] ctrl+w',
  JSON.stringify(keys));
  expect('the agent\'s actions are recorded with actor agent', acts.filter((e) => e.actor === 'agent').length >= 6 &&
    acts.every((e) => e.actor === 'agent' || /^human:/.test(e.actor)), acts.map((e) => e.actor).join(' '));
  const paused = acts.filter((e) => e.rule === 'takeover');
  expect('the paused agent actions are recorded as refused by the takeover', paused.length === 4 && paused.every((e) => e.actor === 'agent' && e.verdict === 'deny'), paused.length);
  const tk = ev.filter((e) => e.type === 'takeover').map((e) => `${e.state}:${e.by}:${e.reason}`);
  expect('the takeover\'s start and end are recorded with who and why',
    JSON.stringify(tk) === JSON.stringify(['started:olive:asked', 'ended:olive:released', 'started:env-admin:asked', 'ended:env-admin:disconnected']), JSON.stringify(tk));
  const cdpPaused = ev.filter((e) => e.type === 'cdp' && e.rule === 'takeover');
  expect('the refused CDP command is recorded', cdpPaused.length === 1 && cdpPaused[0].method === 'Target.getTargets', cdpPaused.length);
  await agent.end();

  // Replay under the same policy: nothing changes; paused ones are skipped.
  // (Not spawnSync: a blocked event loop misses the gateway closing an idle
  // keep-alive connection, and the next fetch would reuse it and fail.)
  const rp = await run(bin, ['replay', '--policy', policyFile, '--json', path.join(gw.recordings, id)]);
  let lines = [];
  try { lines = rp.stdout.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l)); } catch { /* below */ }
  const sum = lines.length ? lines[lines.length - 1].summary : null;
  expect('replay runs on the recording', rp.status === 0 && sum, `${rp.status} ${rp.stderr} ${String(rp.stdout).slice(0, 300)}`);
  if (sum) {
    const skipped = lines.filter((d) => /takeover/.test(d.skipped || ''));
    expect('replay: no decision changed', sum.changed === 0, JSON.stringify(lines.filter((d) => d.new)).slice(0, 600));
    expect('replay: the paused ones are skipped as the takeover\'s', skipped.length === 5, JSON.stringify(lines).slice(0, 600));
  }
}

// The live page's Take control (web/takeover.js) in Debian's Chromium: an
// operator takes control, clicks and types on the screen through the
// policy (a refusal shown with its rule), pastes (not forwarded), and hands
// back; a viewer gets no button.
async function livePage(gw, shop) {
  const { chromium } = require('playwright-core');
  // Seen once in three runs on a loaded machine: node's fetch reused a
  // keep-alive connection the gateway had just closed as idle ("fetch
  // failed", a socket error, no answer): asked once more, then.
  const agent = await Agent.create(gw, { profile: 'browser' }).catch((e) => {
    if (!(e instanceof TypeError) || !e.cause || !/UND_ERR_SOCKET|ECONNRESET/.test(e.cause.code || '')) throw e;
    say(`the session's creation is asked again after a socket error: ${e.cause.code}`);
    return Agent.create(gw, { profile: 'browser' });
  });
  const id = agent.id;
  let r = await agent.act({ type: 'navigate', url: `http://shop.test:${shop.port}/` });
  expect('live: the agent opens the form', r.ok === true, JSON.stringify(r));
  const browser = await chromium.launch({ executablePath: process.env.DG_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'], headless: true });
  try {
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, baseURL: gw.base });
    const page = await ctx.newPage();
    const signIn = async (p, token) => {
      await p.goto(`/live.html?id=${id}`);
      await p.fill('#token', token);
      await p.click('#signin-form button[type=submit]');
      await p.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
    };
    const viewerPage = await (await browser.newContext({ baseURL: gw.base })).newPage();
    await signIn(viewerPage, TOKENS.viewer);
    await sleep(1000);
    expect('live: a viewer gets no Take control button', await viewerPage.locator('#takeover-btn').isHidden());

    await signIn(page, TOKENS.olive);
    await page.waitForSelector('#takeover-btn:not([hidden])', { timeout: 10000 });
    await page.waitForSelector('#frame:not([hidden])', { timeout: 15000 });
    await page.click('#takeover-btn');
    await page.waitForSelector('body[data-control="1"]', { timeout: 10000 });
    expect('live: the button now hands back', (await page.locator('#takeover-btn').innerText()) === 'Hand back');
    r = await agent.act({ type: 'screenshot' });
    expect('live: the agent is paused while the page has control', r.rule === 'takeover', JSON.stringify(r));

    // Screen pixels to page coordinates through the shown frame, measured
    // at each click: the noVNC card and the banners load and change size
    // while the test runs, and a box read once can go stale.
    const at = async (x, y) => {
      await page.locator('#frame').scrollIntoViewIfNeeded();
      const box = await page.locator('#frame').boundingBox();
      const nat = await page.locator('#frame').evaluate((img) => [img.naturalWidth, img.naturalHeight]);
      return [box.x + (x + 0.5) * box.width / nat[0], box.y + (y + 0.5) * box.height / nat[1]];
    };
    await page.mouse.click(...await at(640, 330));
    await sleep(700);
    await page.keyboard.type('web', { delay: 150 });
    const title = await waitFor('the page\'s title to show the operator\'s typing', async () => {
      const st = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
      return st.title === 'q=web' && st.title;
    }, 15000).catch((e) => e.message);
    expect('live: clicks and keys on the screen reach the page through the policy', title === 'q=web', title);
    // The clipboard stays off (docs/policy.md#clipboard): a paste, and the
    // ctrl+v that would make one, send nothing on the operator's channel;
    // the page says so. Every message the page sends on it is watched (the
    // live desktop's noVNC asks for screen updates on its own socket).
    await page.evaluate(() => {
      const send = WebSocket.prototype.send;
      window.dgSent = [];
      WebSocket.prototype.send = function (d) {
        if (/\/operate$/.test(this.url)) window.dgSent.push(String(d));
        return send.call(this, d);
      };
    });
    const humanBefore = (await gw.events(id)).filter((e) => e.type === 'action' && e.actor === 'human:olive').length;
    await page.evaluate(() => {
      const dt = new DataTransfer();
      dt.setData('text/plain', 'pasted from the operator\'s clipboard');
      document.body.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    });
    await page.keyboard.press('Control+V');
    const pasteNote = await page.waitForFunction(() => /Paste is not forwarded/.test(document.querySelector('#takeover-status').textContent),
      null, { timeout: 5000 }).then(() => true, (e) => e.message);
    await sleep(1000);
    const sent = await page.evaluate(() => window.dgSent);
    const st = await gw.api('GET', `/v1/sessions/${id}`, TOKENS.viewer);
    const humanAfter = (await gw.events(id)).filter((e) => e.type === 'action' && e.actor === 'human:olive').length;
    expect('live: a paste and ctrl+v send nothing, and the page says the paste is not forwarded', pasteNote === true &&
      sent.length === 0 && humanAfter === humanBefore && st.title === 'q=web',
    `note: ${pasteNote}; sent: ${JSON.stringify(sent)}; operator's actions ${humanBefore} -> ${humanAfter}; title ${st.title}`);
    await page.mouse.click(...await at(640, 700));
    const refused = await page.waitForFunction(() => +document.body.dataset.refusals > 0 &&
        /Refused by regions\[no-buy\]/.test(document.querySelector('#takeover-status').textContent), null, { timeout: 15000 })
      .then(() => true, async (e) => {
        const banner = await page.locator('#takeover-status').textContent().catch(() => '?');
        const last = (await gw.events(id)).filter((ev) => ev.type === 'action' && ev.actor === 'human:olive').pop();
        return `${e.message}; the banner says "${banner}"; the operator's last recorded action: ${JSON.stringify(last)}`;
      });
    expect('live: a click in the denied region is refused, the rule shown', refused === true, refused);
    await page.click('#takeover-btn');
    await page.waitForSelector('body:not([data-control="1"])', { timeout: 10000 });
    r = await agent.act({ type: 'screenshot' });
    expect('live: after Hand back the agent works again', r.ok === true, JSON.stringify(r));
    const human = (await gw.events(id)).filter((e) => e.type === 'action' && e.actor === 'human:olive');
    expect('live: the page\'s actions are recorded as the operator\'s', human.length === 5 &&
      human.filter((e) => e.action.type === 'type').length === 3, human.map((e) => e.action.type).join(' '));
    // The player shows them as the human's.
    await page.goto(`/player.html?id=${id}`);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
    await page.waitForSelector('#steps li', { timeout: 15000 });
    const marked = await page.locator('#steps li[data-actor="human:olive"]').count();
    const agents = await page.locator('#steps li[data-actor="agent"]').count();
    expect('player: the operator\'s steps are marked as theirs', marked === 5 && agents >= 3, `${marked} human, ${agents} agent`);
    await page.locator('#steps li[data-actor="human:olive"] button').first().click();
    const by = await page.locator('#step-actor').innerText().catch((e) => e.message);
    expect('player: a human step says who', /olive, an operator/.test(by), by);
    await page.locator('#steps li[data-actor="agent"] button').first().click();
    const byAgent = await page.locator('#step-actor').innerText().catch((e) => e.message);
    expect('player: an agent step says the agent', byAgent === 'the agent', byAgent);
  } finally {
    await browser.close();
    await agent.end();
  }
}

// An MCP client's tool call (raw JSON-RPC on /mcp, docs/mcp.md) while an
// operator has control of its desktop: a tool result with isError and the
// paused reason; after the hand back the call works.
async function mcpPaused(gw) {
  let sid = null;
  const rpc = async (id, method, params) => {
    const headers = { authorization: `Bearer ${TOKENS.agent}`, 'content-type': 'application/json', accept: 'application/json' };
    if (sid) Object.assign(headers, { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' });
    const res = await fetch(`${gw.base}/mcp`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method, params }) });
    sid = sid || res.headers.get('mcp-session-id');
    return id === undefined ? null : res.json();
  };
  const before = new Set((await gw.api('GET', '/v1/sessions', TOKENS.agent)).sessions.map((x) => x.id));
  await rpc(1, 'initialize', { protocolVersion: '2025-11-25', clientInfo: { name: 'takeover-test', version: '1' },
    capabilities: { experimental: { deskgate: { profile: 'xterm' } } } });
  await rpc(undefined, 'notifications/initialized');
  let r = await rpc(2, 'tools/call', { name: 'computer', arguments: { action: 'cursor_position' } });
  expect('mcp: a tool call works', r.result && !r.result.isError, JSON.stringify(r).slice(0, 300));
  const desk = (await gw.api('GET', '/v1/sessions', TOKENS.agent)).sessions.find((x) => !before.has(x.id));
  expect('mcp: its desktop is listed', !!desk);
  expect('mcp: an operator takes control of it', (await takeover(gw, desk.id, TOKENS.olive)).status === 200);
  r = await rpc(3, 'tools/call', { name: 'computer', arguments: { action: 'cursor_position' } });
  expect('mcp: a tool call is answered paused', r.result && r.result.isError === true &&
    /paused by an operator/.test(JSON.stringify(r.result.content)), JSON.stringify(r).slice(0, 400));
  expect('mcp: the operator hands back', (await takeover(gw, desk.id, TOKENS.olive, 'DELETE')).status === 200);
  r = await rpc(4, 'tools/call', { name: 'computer', arguments: { action: 'cursor_position' } });
  expect('mcp: the tool call works again', r.result && !r.result.isError, JSON.stringify(r).slice(0, 300));
  await fetch(`${gw.base}/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKENS.agent}`, 'mcp-session-id': sid } });
}

// Control returns by itself: idle, then the whole takeover's time (a
// gateway of its own, with short limits, and an xterm session).
async function timeouts(bin) {
  const gw = new Gateway(bin, { policies: {}, limits: { takeover_seconds: 6, takeover_idle_seconds: 2 } });
  process.on('exit', () => gw.killNow());
  await gw.start();
  try {
    const agent = await Agent.create(gw, { profile: 'xterm' });
    const id = agent.id;
    let t0 = Date.now();
    expect('take control (idle test)', (await takeover(gw, id, TOKENS.olive)).status === 200);
    await waitFor('control to return when idle', async () => (await gw.api('GET', `/v1/sessions/${id}/takeover`, TOKENS.viewer)).takeover === null, 10000);
    const idleMs = Date.now() - t0;
    expect('control returns after takeover_idle_seconds without an operator action', idleMs >= 1900 && idleMs < 5000, idleMs);
    let r = await agent.act({ type: 'screenshot' });
    expect('the agent works after the idle timeout', r.ok === true, JSON.stringify(r));

    t0 = Date.now();
    expect('take control (whole-time test)', (await takeover(gw, id, TOKENS.olive)).status === 200);
    const op = await Operator.open(gw, id, TOKENS.olive);
    let end = null;
    op.next((m) => m.type === 'takeover', 15000).then((m) => { end = m; }, () => {});
    while (!end && Date.now() - t0 < 12000) {
      await op.send({ type: 'wait', ms: 200 }).catch(() => null);
      await sleep(500);
    }
    const wholeMs = Date.now() - t0;
    expect('an active operator keeps control until takeover_seconds, then loses it', end && end.reason === 'timeout' &&
      wholeMs >= 5500 && wholeMs < 9000, `${JSON.stringify(end)} after ${wholeMs} ms`);
    r = await agent.act({ type: 'screenshot' });
    expect('the agent works after the timeout', r.ok === true, JSON.stringify(r));
    await check('an MCP tool call is answered paused', () => mcpPaused(gw));
    const tk = (await gw.events(id)).filter((e) => e.type === 'takeover' && e.state === 'ended').map((e) => e.reason);
    expect('the recording says why each ended', JSON.stringify(tk) === JSON.stringify(['idle', 'timeout']), JSON.stringify(tk));
    await agent.end();
  } finally {
    if (gw.proc) await gw.stop();
  }
}

async function main() {
  if (!bin) throw new Error('usage: node takeover.js DESKGATE_BINARY WORK_DIR');
  const shop = await site(), evil = await site();
  const policy = {
    version: 1, default: 'allow',
    urls: { allow: [`http://shop.test:${shop.port}/**`], deny: [`http://evil.test:${evil.port}/**`] },
    regions: [{ name: 'no-buy', rect: [0, 600, 1280, 200], actions: ['click', 'mouse_down'], verdict: 'deny', reason: 'buying is off limits' }],
    text: { deny: ['secret-[0-9]+'] },
    keys: { deny: ['ctrl+w'] },
    egress: { allow: [`shop.test:${shop.port}`] },
  };
  const gw = new Gateway(bin, {
    policies: { default: policy },
    resolve: [`shop.test:${shop.port}=127.0.0.1:${shop.port}`, `evil.test:${evil.port}=127.0.0.1:${evil.port}`],
  });
  process.on('exit', () => gw.killNow());
  await gw.start();
  say(`gateway on ${gw.base}`);
  await check('takeover of a browser session', () => mainFlow(gw, shop, evil, path.join(gw.dir, 'policy-default.json')));
  await check('the live page', () => livePage(gw, shop));
  await check('timeouts', () => timeouts(bin));
  await finish(gw, shop, evil);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
