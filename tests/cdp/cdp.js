'use strict';
// deskgate's CDP endpoint (docs/cdp.md) driven by clients nobody here
// wrote: Playwright's connectOverCDP, Puppeteer's connect, and
// playwright-mcp (--cdp-endpoint, --cdp-header) through the MCP SDK
// client; then a hostile raw client. Allowed work must succeed, denied
// work must be refused naming the rule, and the denied loopback site must
// see no request at all.
//
//   node cdp.js DESKGATE_BINARY WORK_DIR

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const WebSocket = require('ws');
const { chromium } = require('playwright-core');
const puppeteer = require('puppeteer-core');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { Gateway, TOKENS, waitFor } = require('../web/lib/gateway.js');

const bin = process.argv[2];
const work = process.argv[3] || '/tmp';
const here = __dirname;
const AUTH = { Authorization: `Bearer ${TOKENS.agent}` };

const { say, fail, expect, check, finish } = require('../support/checks.js').checks('cdp');
async function rejects(p) {
  try { await p; return null; } catch (e) { return e; }
}

const SHOP = `<!doctype html><html><head><title>shop</title><style>
body{margin:0;font:16px sans-serif} #buy{position:absolute;left:20px;top:300px;width:160px;height:40px}
</style></head><body><h1>Desk lamps</h1>
<input id=q aria-label="Search products" oninput="document.title='q='+this.value">
<button id=go onclick="document.title='went'">Go</button>
<button id=buy onclick="document.title='bought'">Buy now</button>
<input type=file id=file aria-label="Attachment">
</body></html>`;

function site(name) {
  const log = [];
  const srv = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    const ok = req.url === '/' || req.url === '/two';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(req.url === '/' ? SHOP : req.url === '/two' ? '<!doctype html><title>two</title>two' : 'not found');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ name, srv, log, port: srv.address().port })));
}

// A raw CDP client over the session's endpoint.
class Raw {
  static async open(url, headers = AUTH) {
    const r = new Raw();
    r.ws = new WebSocket(url, { headers, maxPayload: 256 * 1024 * 1024 });
    r.next = 1;
    r.waiting = new Map();
    r.events = [];
    r.closed = null;
    r.ws.on('message', (d) => {
      const m = JSON.parse(d.toString());
      if (m.id !== undefined && r.waiting.has(m.id)) {
        r.waiting.get(m.id)(m);
        r.waiting.delete(m.id);
      } else if (m.method) {
        r.events.push(m);
      }
    });
    r.ws.on('close', (code, reason) => {
      r.closed = { code, reason: reason.toString() };
      for (const f of r.waiting.values()) f({ closed: r.closed });
      r.waiting.clear();
    });
    await new Promise((res, rej) => { r.ws.once('open', res); r.ws.once('error', rej); });
    return r;
  }

  send(method, params, sessionId, timeoutMs = 15000) {
    const id = this.next++;
    const msg = { id, method };
    if (params) msg.params = params;
    if (sessionId) msg.sessionId = sessionId;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${method}: no answer in ${timeoutMs} ms`)), timeoutMs);
      this.waiting.set(id, (m) => { clearTimeout(t); resolve(m); });
      this.ws.send(JSON.stringify(msg));
    });
  }

  close() { try { this.ws.close(); } catch { /* closed */ } }
}

async function playwright(gw, id, shop, evil) {
  const browser = await chromium.connectOverCDP(`${gw.base}/v1/sessions/${id}`, { headers: AUTH, timeout: 30000 });
  const context = browser.contexts()[0];
  const page = context.pages()[0] || await context.newPage();
  await page.goto(`http://shop.test:${shop.port}/`);
  expect('playwright: goto an allowed site', await page.title() === 'shop', await page.title());
  await page.click('#go');
  expect('playwright: click', await page.title() === 'went', await page.title());
  await page.fill('#q', 'lamp');
  expect('playwright: fill', await page.title() === 'q=lamp', await page.title());
  expect('playwright: evaluate', await page.evaluate(() => 6 * 7) === 42);
  const png = await page.screenshot();
  expect('playwright: screenshot', png.length > 1000 && png.toString('latin1', 1, 4) === 'PNG', png.length);
  const two = await context.newPage();
  await two.goto(`http://shop.test:${shop.port}/two`);
  expect('playwright: a second page', await two.title() === 'two', await two.title());
  const e = await rejects(two.goto(`http://evil.test:${evil.port}/`));
  expect('playwright: goto a denied site is refused naming the rule', e && /deskgate: denied by urls\.deny/.test(e.message), e && e.message);
  await page.focus('#q');
  const f = await rejects(page.keyboard.insertText('secret-4711'));
  expect('playwright: typing denied text is refused', f && /text\.deny/.test(f.message), f && f.message);
  expect('playwright: ... and not typed', await page.title() === 'q=lamp', await page.title());
  await two.close();
  await browser.close(); // disconnects: the session's browser lives on
}

async function puppeteerClient(gw, session, shop) {
  const browser = await puppeteer.connect({ browserWSEndpoint: session.cdp_url, headers: AUTH, protocolTimeout: 30000 });
  const pages = await browser.pages();
  const page = pages[0] || await browser.newPage();
  await page.goto(`http://shop.test:${shop.port}/`);
  expect('puppeteer: goto and title', await page.title() === 'shop', await page.title());
  await page.click('#go');
  expect('puppeteer: click', await page.title() === 'went', await page.title());
  await browser.disconnect();
}

async function playwrightMcp(gw, id, shop, evil) {
  const cli = path.join(here, 'node_modules', '@playwright', 'mcp', 'cli.js');
  // playwright-mcp writes its output (.playwright-mcp/) where it runs.
  fs.mkdirSync(work, { recursive: true });
  const transport = new StdioClientTransport({
    cwd: work,
    command: process.execPath,
    args: [cli, '--cdp-endpoint', `${gw.base}/v1/sessions/${id}`, '--cdp-header', `Authorization: Bearer ${TOKENS.agent}`],
    env: { PATH: process.env.PATH, HOME: process.env.HOME || '/tmp' },
    stderr: 'pipe',
  });
  const client = new Client({ name: 'deskgate-cdp-test', version: '1.0.0' });
  await client.connect(transport);
  const text = (r) => (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  let r = await client.callTool({ name: 'browser_navigate', arguments: { url: `http://shop.test:${shop.port}/` } });
  expect('playwright-mcp: browser_navigate allowed', !r.isError && /shop/.test(text(r)), text(r).slice(0, 400));
  r = await client.callTool({ name: 'browser_snapshot', arguments: {} });
  const m = /button "Go" \[ref=([a-z0-9]+)\]/.exec(text(r));
  expect('playwright-mcp: browser_snapshot', !r.isError && m, text(r).slice(0, 600));
  if (m) {
    r = await client.callTool({ name: 'browser_click', arguments: { element: 'Go button', target: m[1] } });
    expect('playwright-mcp: browser_click', !r.isError, text(r).slice(0, 400));
  }
  r = await client.callTool({ name: 'browser_navigate', arguments: { url: `http://evil.test:${evil.port}/` } });
  expect('playwright-mcp: browser_navigate denied, naming the rule', r.isError && /urls\.deny/.test(text(r)), text(r).slice(0, 400));
  await client.close();
}

async function hostile(gw, session, shop, evil) {
  const raw = await Raw.open(session.cdp_url);
  const err = (m) => (m.error ? `${m.error.code} ${m.error.message}` : JSON.stringify(m).slice(0, 300));
  const { result: { targetInfos } } = await raw.send('Target.getTargets');
  const pageInfo = targetInfos.find((t) => t.type === 'page');
  const { result: { sessionId: s1 } } = await raw.send('Target.attachToTarget', { targetId: pageInfo.targetId, flatten: true });
  expect('raw: attach to the page', typeof s1 === 'string');
  for (const url of [`http://evil.test:${evil.port}/`, 'file:///etc/passwd', 'chrome://settings']) {
    const m = await raw.send('Page.navigate', { url }, s1);
    expect(`raw: Page.navigate ${url} refused`, m.error && /deskgate: denied/.test(m.error.message), err(m));
  }
  let m = await raw.send('Target.createTarget', { url: `http://evil.test:${evil.port}/` });
  expect('raw: Target.createTarget to a denied URL refused', m.error && /deskgate: denied/.test(m.error.message), err(m));
  m = await raw.send('Runtime.evaluate', { expression: `fetch("http://evil.test:${evil.port}/x").then(()=>1,()=>0)`, awaitPromise: true }, s1);
  expect('raw: fetch() to a denied site does not get out', m.result && m.result.result.value === 0, err(m));
  m = await raw.send('Runtime.evaluate', { expression: `location = "http://evil.test:${evil.port}/y"; 1` }, s1);
  // Answered as done (Playwright sends it at connect and cannot go on
  // without it) but not applied: recorded as refused, below.
  // The client's own Fetch may see and continue requests, but not send one
  // elsewhere than the guard allowed.
  m = await raw.send('Fetch.enable', { patterns: [{ urlPattern: '*two*' }] }, s1);
  expect('raw: Fetch.enable on its own session', m.result, err(m));
  const before = raw.events.length;
  await raw.send('Page.navigate', { url: `http://shop.test:${shop.port}/` }, s1);
  await raw.send('Runtime.evaluate', { expression: `fetch("http://shop.test:${shop.port}/two").then(()=>1,()=>0); 1` }, s1);
  const paused = await waitFor('Fetch.requestPaused on the client\'s session', () =>
    raw.events.slice(before).find((e) => e.method === 'Fetch.requestPaused' && e.sessionId === s1), 10000);
  m = await raw.send('Fetch.continueRequest', { requestId: paused.params.requestId, url: `http://evil.test:${evil.port}/stolen` }, s1);
  expect('raw: Fetch.continueRequest to a denied URL refused', m.error && /urls\.deny/.test(m.error.message), err(m));
  m = await raw.send('Fetch.continueRequest', { requestId: paused.params.requestId }, s1);
  expect('raw: Fetch.continueRequest unchanged goes on', m.result, err(m));
  await raw.send('Fetch.disable', {}, s1);
  m = await raw.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: '/tmp' });
  expect('raw: setDownloadBehavior allow answered without an error', m.result && !m.error, err(m));
  m = await raw.send('DOM.setFileInputFiles', { files: ['/etc/passwd'], backendNodeId: 1 }, s1);
  expect('raw: setFileInputFiles refused', m.error && /deskgate: denied/.test(m.error.message), err(m));
  m = await raw.send('Input.dispatchMouseEvent', { type: 'mousePressed', x: 60, y: 320, button: 'left', clickCount: 1 }, s1);
  expect('raw: a click inside a denied region refused', m.error && /regions\[buy-zone\]/.test(m.error.message), err(m));
  m = await raw.send('Input.insertText', { text: 'secret-4711' }, s1);
  expect('raw: typing denied text refused', m.error && /text\.deny/.test(m.error.message), err(m));
  m = await raw.send('Target.detachFromTarget', { sessionId: 'F'.repeat(32) });
  expect('raw: detaching a session it does not own', !!m.error, err(m));
  m = await raw.send('Runtime.evaluate', { expression: '1' }, '0123456789ABCDEF0123456789ABCDEF');
  expect('raw: a command on a session it does not own', m.error && m.error.code === -32001, err(m));
  m = await raw.send('Browser.close');
  expect('raw: Browser.close refused', m.error && /deskgate: denied/.test(m.error.message), err(m));
  m = await raw.send('Tracing.start');
  expect('raw: Tracing refused', m.error && /deskgate: denied/.test(m.error.message), err(m));
  m = await raw.send('Nonsense.method');
  expect('raw: an unknown method is refused', !!m.error, err(m));
  // A flood of 10,000 commands in one second, every one a script of its
  // own (none allowed from the verdict cache): each answered or refused
  // (at most 64 in flight), none lost.
  const N = 10000, t0 = Date.now();
  const flood = [];
  for (let b = 0; b < 100; b++) {
    for (let i = 0; i < N / 100; i++) flood.push(raw.send('Runtime.evaluate', { expression: `${b * 100 + i}` }, s1, 60000));
    const due = t0 + (b + 1) * 10 - Date.now();
    if (due > 0) await new Promise((r) => setTimeout(r, due));
  }
  const sentMs = Date.now() - t0;
  const answers = await Promise.all(flood);
  const ok = answers.filter((a) => a.result).length, refused = answers.filter((a) => a.error).length;
  const busy = answers.filter((a) => a.error && /too many commands in flight/.test(a.error.message)).length;
  expect(`raw: ${N} commands sent in ${sentMs} ms, all answered in ${Date.now() - t0} ms (${ok} ok, ${refused} refused, ${busy} of them busy)`,
    ok + refused === N && ok > 0 && busy === refused && sentMs < 1500);
  // Garbage closes this client only.
  const bad = await Raw.open(session.cdp_url);
  bad.ws.send('{"id": "x", "method": 3}');
  await waitFor('the malformed client closed', () => bad.closed, 5000);
  expect('raw: a malformed message closes that client', bad.closed && bad.closed.code === 1007, JSON.stringify(bad.closed));
  const big = await Raw.open(session.cdp_url);
  big.ws.send('x'.repeat(64 * 1024 * 1024));
  await waitFor('the oversized client closed', () => big.closed, 20000);
  // Its close frame (1009) can be overtaken by the reset of a connection
  // closed while the client still sends; the recording says why anyway.
  const closedForSize = async () => (await gw.events(session.id)).some((e) => e.type === 'cdp_client' && e.state === 'closed' && e.reason === 'message too large');
  expect('raw: a 64 MiB message closes that client (1009, or a reset after it with the reason recorded)',
    big.closed && (big.closed.code === 1009 || (big.closed.code === 1006 && await closedForSize())) && await closedForSize(), JSON.stringify(big.closed));
  m = await raw.send('Runtime.evaluate', { expression: '40+2' }, s1);
  expect('raw: the first client still works', m.result && m.result.result.value === 42, err(m));
  raw.close();
}

async function main() {
  if (!bin) throw new Error('usage: node cdp.js DESKGATE_BINARY WORK_DIR');
  const shop = await site('shop.test'), evil = await site('evil.test');
  const policy = {
    version: 1, default: 'allow',
    actions: { allow: ['javascript'] },
    urls: { allow: [`http://shop.test:${shop.port}/**`], deny: [`http://evil.test:${evil.port}/**`] },
    regions: [{ name: 'buy-zone', rect: [0, 350, 1280, 100], actions: ['click', 'mouse_down'], verdict: 'deny', reason: 'buying is off limits' }],
    text: { deny: ['secret-[0-9]+'] },
    recording: { redact_text: true },
    egress: { allow: [`shop.test:${shop.port}`, `evil.test:${evil.port}`] },
  };
  const gw = new Gateway(bin, {
    policies: { default: policy, budget: { version: 1, default: 'allow', budgets: { max_cdp_commands: 30 } } },
    resolve: [`shop.test:${shop.port}=127.0.0.1:${shop.port}`, `evil.test:${evil.port}=127.0.0.1:${evil.port}`],
  });
  process.on('exit', () => gw.killNow());
  await gw.start();
  say(`gateway on ${gw.base}`);
  const session = await gw.api('POST', '/v1/sessions', TOKENS.agent, { profile: 'browser' }, 201);
  session.cdp_url = (await gw.api('GET', `/v1/sessions/${session.id}/json/version/`, TOKENS.agent)).webSocketDebuggerUrl;
  expect('json/version names the session\'s CDP endpoint', session.cdp_url.endsWith(`/v1/sessions/${session.id}/cdp`), session.cdp_url);
  const byToken = await gw.http('GET', `/v1/sessions/${session.id}/json/version`, session.session_token);
  expect('json/version opens with the session token too', byToken.status === 200 && byToken.json.webSocketDebuggerUrl === session.cdp_url, `${byToken.status} ${byToken.text}`);
  const viewer = await gw.http('GET', `/v1/sessions/${session.id}/json/version`, TOKENS.viewer);
  expect('json/version: a viewer reads no such session', viewer.status === 404, viewer.status);
  await check('playwright', () => playwright(gw, session.id, shop, evil));
  await check('puppeteer', () => puppeteerClient(gw, session, shop));
  await check('playwright-mcp', () => playwrightMcp(gw, session.id, shop, evil));
  await check('hostile client', () => hostile(gw, session, shop, evil));
  await check('the recording lists the commands', async () => {
    const ev = (await gw.events(session.id)).filter((e) => e.type === 'cdp');
    expect('cdp events recorded with verdicts', ev.length > 20 && ev.some((e) => e.verdict === 'deny') && ev.some((e) => e.verdict === 'allow'), ev.length);
    const dl = ev.filter((e) => e.method === 'Browser.setDownloadBehavior' && e.params && e.params.behavior === 'allow');
    expect('a download behavior "allow" is recorded as refused', dl.length === 1 && dl[0].verdict === 'deny' && dl[0].rule === 'builtin.downloads', JSON.stringify(dl));
    const reqs = new Set(ev.map((e) => e.req));
    expect('every cdp event has a number of its own', ev.every((e) => Number.isInteger(e.req) && e.req > 0) && reqs.size === ev.length, ev.length - reqs.size);
    const cached = ev.filter((e) => e.cached);
    expect('commands allowed from the worker\'s verdict cache are recorded too', cached.length > 0 && cached.every((e) => e.verdict === 'allow'), cached.length);
    expect('cdp events name the frame before them', ev.some((e) => typeof e.frame_before === 'string' && /^[0-9a-f]{64}$/.test(e.frame_before)), JSON.stringify(ev[ev.length - 1]).slice(0, 200));
    const typed = ev.filter((e) => e.method === 'Input.insertText');
    expect('typed text is redacted in the recording (recording.redact_text)', typed.length > 0 && !JSON.stringify(typed).includes('secret-4711') && !JSON.stringify(typed).includes('lamp'), JSON.stringify(typed).slice(0, 300));
  });
  await check('metrics by method', async () => {
    const r = await gw.http('GET', '/metrics', TOKENS.viewer);
    const nav = /deskgate_cdp_commands_total\{method="Page\.navigate",verdict="allow"\} (\d+)/.exec(r.text);
    const closed = /deskgate_cdp_commands_total\{method="Browser\.close",verdict="deny"\} (\d+)/.exec(r.text);
    const cached = /deskgate_cdp_cached_total (\d+)/.exec(r.text);
    expect('/metrics counts CDP commands by method and verdict, and those allowed from the cache',
      r.status === 200 && nav && Number(nav[1]) > 0 && closed && Number(closed[1]) >= 1 && cached && Number(cached[1]) > 0,
      r.text.split('\n').filter((l) => l.startsWith('deskgate_cdp')).slice(0, 8).join(' | '));
  });
  await check('budgets count CDP commands', async () => {
    const three = await gw.api('POST', '/v1/sessions', TOKENS.agent, { profile: 'browser', policy: 'budget' }, 201);
    const url = (await gw.api('GET', `/v1/sessions/${three.id}/json/version`, TOKENS.agent)).webSocketDebuggerUrl;
    const raw = await Raw.open(url);
    const got = [];
    for (let i = 0; i < 40; i++) got.push(await raw.send('Target.getTargets'));
    const ok = got.filter((m) => m.result).length;
    const refusedAt = got.findIndex((m) => m.error);
    expect('budgets.max_cdp_commands 30: the 31st command is refused naming the budget',
      ok === 30 && refusedAt === 30 && got.slice(30).every((m) => m.error && /denied by budgets\.max_cdp_commands: 30 CDP commands in this session; the budget is 30/.test(m.error.message)),
      `${ok} ok, first refusal at ${refusedAt}: ${refusedAt >= 0 ? got[refusedAt].error.message : ''}`);
    raw.close();
    await gw.api('DELETE', `/v1/sessions/${three.id}`, TOKENS.agent);
  });
  await check('a second session beside it', async () => {
    const two = await gw.api('POST', '/v1/sessions', TOKENS.agent, { profile: 'browser' }, 201);
    const url = (await gw.api('GET', `/v1/sessions/${two.id}/json/version`, TOKENS.agent)).webSocketDebuggerUrl;
    const raw = await Raw.open(url);
    const { result: { targetInfos } } = await raw.send('Target.getTargets');
    const t = targetInfos.find((x) => x.type === 'page');
    const { result: { sessionId } } = await raw.send('Target.attachToTarget', { targetId: t.targetId, flatten: true });
    const m = await raw.send('Page.navigate', { url: `http://shop.test:${shop.port}/two` }, sessionId);
    expect('the second session navigates through its own endpoint', m.result && !m.result.errorText, JSON.stringify(m));
    raw.close();
    await gw.api('DELETE', `/v1/sessions/${two.id}`, TOKENS.agent);
  });
  await gw.api('DELETE', `/v1/sessions/${session.id}`, TOKENS.agent);
  await check('replay decides the commands again', async () => {
    // Under a policy that refuses Page.navigate, the navigations the
    // clients made change verdict.
    const strict = path.join(work, 'strict.json');
    fs.writeFileSync(strict, JSON.stringify({ version: 1, default: 'allow', actions: { allow: ['javascript'] }, cdp: { deny: ['Page.navigate'] } }));
    const r = require('node:child_process').spawnSync(bin, ['replay', '--policy', strict, '--json', path.join(gw.recordings, session.id)],
      { encoding: 'utf8', timeout: 60000 });
    const lines = r.stdout.trim().split('\n').filter((l) => l).map((l) => JSON.parse(l));
    const nav = lines.filter((l) => l.kind === 'cdp' && l.subject === 'Page.navigate' && !l.skipped);
    const typed = lines.filter((l) => l.kind === 'cdp' && l.subject === 'Input.insertText' && l.old === 'deny');
    expect('replay: allowed navigations now refused by cdp.deny, denied text now allowed', r.status === 1 &&
      nav.length > 0 && nav.every((l) => l.old === 'allow' && l.new === 'deny' && l.rule === 'cdp.deny[0]') &&
      typed.length > 0 && typed.every((l) => l.new === 'allow'),
    `${r.status} ${r.stdout.slice(0, 600)} ${r.stderr.slice(0, 300)}`);
  });
  await finish(gw, shop, evil);
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
