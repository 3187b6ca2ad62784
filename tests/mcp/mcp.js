'use strict';
// deskgate's MCP front door (/mcp, docs/mcp.md) driven by clients nobody
// here wrote: the official MCP TypeScript SDK client over streamable HTTP
// and, through `deskgate mcp`, over stdio; the MCP inspector's CLI; and
// the approvals page in Chromium (playwright-core) approving a call the
// policy asks about while the SDK client waits.
//
//   node mcp.js DESKGATE_BINARY WORK_DIR
//
// Two loopback sites: shop.test (allowed) and evil.test (denied by the
// policy's urls; its server must see no request at all). Every check runs;
// the exit status is 1 when any failed.

const { spawn } = require('node:child_process');
const http = require('node:http');
const path = require('node:path');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { chromium } = require('playwright-core');
const { Gateway, TOKENS, waitFor } = require('../web/lib/gateway.js');

const bin = process.argv[2];
const CHROMIUM = process.env.DG_CHROMIUM || '/usr/bin/chromium';
const here = __dirname;

const { say, fail, expect, check, finish } = require('../support/checks.js').checks('mcp');

// ---- the sites ------------------------------------------------------------------

const SHOP = `<!doctype html><html><head><title>shop</title><style>
body{margin:0;font:16px sans-serif} #buy{position:absolute;left:20px;top:120px;width:160px;height:40px}
</style></head><body><h1>Desk lamps</h1>
<input id=q aria-label="Search products">
<button id=buy onclick="document.title='bought'">Buy now</button>
</body></html>`;

function site(name) {
  const log = [];
  const srv = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    res.writeHead(req.url === '/' ? 200 : 404, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(req.url === '/' ? SHOP : 'not found');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ name, srv, log, port: srv.address().port })));
}

// ---- helpers ----------------------------------------------------------------------

function textOf(r) {
  return (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function pngSize(b64) {
  const b = Buffer.from(b64, 'base64');
  if (b.length < 24 || b.toString('latin1', 1, 4) !== 'PNG') return null;
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

async function httpClient(gw, experimental, name = 'deskgate-mcp-test') {
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.base}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${TOKENS.agent}` } },
  });
  const client = new Client({ name, version: '1.2.3' }, { capabilities: experimental ? { experimental: { deskgate: experimental } } : {} });
  await client.connect(transport);
  return { client, transport };
}

// A raw POST to /mcp: {status, headers, json, text}.
async function rawPost(gw, body, { token = TOKENS.agent, sid, headers = {}, signal } = {}) {
  const h = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  if (sid) h['mcp-session-id'] = sid;
  const res = await fetch(`${gw.base}/mcp`, { method: 'POST', headers: h, body: typeof body === 'string' ? body : JSON.stringify(body), signal });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or empty */ }
  return { status: res.status, headers: res.headers, text, json };
}

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

async function sessionsOf(gw) {
  return (await gw.api('GET', '/v1/sessions', TOKENS.admin)).sessions;
}

// ---- the checks ----------------------------------------------------------------------

async function browserSession(gw, shop, evil, browser) {
  const { client, transport } = await httpClient(gw, { profile: 'browser', display: { width: 1024, height: 640 } });
  const sid = transport.sessionId;
  expect('initialize gives an Mcp-Session-Id', /^[a-z0-9][a-z0-9-]*-[0-9a-f]{32}$/.test(sid || ''), sid);
  expect('the negotiated protocol is the latest', client.getServerVersion().name === 'deskgate', JSON.stringify(client.getServerVersion()));

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  expect('tools/list: computer, exec and 28 browser tools', names.includes('computer') && names.includes('exec') &&
    names.filter((n) => n.startsWith('browser_')).length === 28, names.join(','));
  expect('every inputSchema is an exact object schema', tools.every((t) => t.inputSchema.type === 'object' &&
    t.inputSchema.additionalProperties === false), JSON.stringify(tools.find((t) => t.inputSchema.additionalProperties !== false)));
  expect('no desktop before the first call', (await sessionsOf(gw)).length === 0, JSON.stringify(await sessionsOf(gw)));

  let r = await client.callTool({ name: 'computer', arguments: { action: 'screenshot' } });
  const img = (r.content || []).find((c) => c.type === 'image');
  expect('computer screenshot: an image/png at the display size', img && img.mimeType === 'image/png' &&
    JSON.stringify(pngSize(img.data)) === '[1024,640]', JSON.stringify(img ? [img.mimeType, pngSize(img.data)] : r).slice(0, 300));
  const ss = await sessionsOf(gw);
  expect('the first call created one desktop, owned by the token', ss.length === 1 && ss[0].agent === 'env-agent', JSON.stringify(ss));
  const desk = ss[0] && ss[0].id;

  r = await client.callTool({ name: 'browser_navigate', arguments: { url: `http://shop.test:${shop.port}/` } });
  expect('browser_navigate to an allowed site', !r.isError && /browser_state/.test(textOf(r)) && /shop\.test/.test(textOf(r)), textOf(r));

  r = await client.callTool({ name: 'browser_navigate', arguments: { url: `http://evil.test:${evil.port}/` } });
  expect('browser_navigate to a denied site is refused naming the rule', r.isError === true && /urls\.deny/.test(textOf(r)), textOf(r));

  r = await client.callTool({ name: 'browser_snapshot', arguments: {} });
  const m = /button "Buy now"[^\n]*\[(ref_\d+)\]/.exec(textOf(r)) || /(ref_\d+)[^\n]*Buy now/.exec(textOf(r));
  expect('browser_snapshot names the button with a ref', !r.isError && m, textOf(r).slice(0, 600));
  if (m) {
    r = await client.callTool({ name: 'browser_click', arguments: { target: { type: 'ref', ref: m[1] } } });
    expect('browser_click on a ref', !r.isError && /bought/.test(textOf(r)), textOf(r));
  }
  r = await client.callTool({ name: 'computer', arguments: { action: 'left_click', coordinate: [100, 130] } });
  expect('computer left_click', !r.isError, textOf(r));
  r = await client.callTool({ name: 'computer', arguments: { action: 'type', text: 'my secret-4711' } });
  expect('typing denied text is refused naming the rule', r.isError === true && /text\.deny/.test(textOf(r)), textOf(r));
  r = await client.callTool({ name: 'computer', arguments: { action: 'left_click', coordinate: [99999, 1] } });
  expect('a bad argument is a tool error naming the field', r.isError === true && /coordinate/.test(textOf(r)), textOf(r));

  r = await client.callTool({ name: 'exec', arguments: { argv: ['sh', '-c', 'echo mine > /tmp/mine.txt; echo hello-from-exec'] } });
  expect('exec runs in the session\'s jail', !r.isError && /hello-from-exec/.test(textOf(r)), textOf(r));

  let threw = null;
  try { await client.callTool({ name: 'no_such_tool', arguments: {} }); } catch (e) { threw = e; }
  expect('an unknown tool is a JSON-RPC error -32602', threw && threw.code === -32602, threw && `${threw.code} ${threw.message}`);

  // The policy asks about ctrl+Return: the call waits, with progress,
  // until a viewer approves it in the approvals page.
  const page = await (await browser.newContext({ baseURL: gw.base })).newPage();
  await page.goto('/approvals.html');
  await page.fill('#token', TOKENS.alice);
  await page.click('#signin-form button[type=submit]');
  await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
  const progress = [];
  let answered = false;
  const asked = client.callTool({ name: 'computer', arguments: { action: 'key', text: 'ctrl+Return' } }, undefined, {
    onprogress: (p) => progress.push(p), timeout: 60000,
  }).then((x) => { answered = true; return x; });
  const card = page.locator('.approval');
  await card.first().waitFor({ timeout: 15000 });
  await waitFor('a progress notification naming the approval', () => progress.some((p) => /approv/.test(p.message || '')), 5000);
  expect('the call waits while the approval is pending', !answered);
  await card.first().locator('button[data-decision=approve]').click();
  r = await asked;
  expect('the approved call answers without error', !r.isError, textOf(r));
  expect('progress notifications came while it waited', progress.length >= 1 && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress),
    JSON.stringify(progress));
  await page.context().close();

  // Cancelling a call that waits for approval withdraws the approval.
  const ac = new AbortController();
  const cancelled = client.callTool({ name: 'computer', arguments: { action: 'key', text: 'ctrl+Return' } }, undefined, { signal: ac.signal })
    .then(() => 'answered', (e) => `rejected: ${e.message}`);
  await waitFor('the second approval', async () => (await gw.api('GET', '/v1/approvals', TOKENS.viewer)).approvals.length === 1, 10000);
  ac.abort('the test cancels it');
  expect('a cancelled call rejects on the client', /rejected/.test(await cancelled));
  await waitFor('the approval withdrawn', async () => (await gw.api('GET', '/v1/approvals', TOKENS.viewer)).approvals.length === 0, 10000);
  r = await client.callTool({ name: 'computer', arguments: { action: 'cursor_position' } });
  expect('the session goes on after a cancellation', !r.isError, textOf(r));

  return { client, transport, sid, desk };
}

async function xtermSession(gw) {
  const { client, transport } = await httpClient(gw, { profile: 'xterm' }, 'second-client');
  const { tools } = await client.listTools();
  expect('an xterm MCP session lists no browser tools', tools.every((t) => !t.name.startsWith('browser_')) && tools.length === 2,
    tools.map((t) => t.name).join(','));
  const r = await client.callTool({ name: 'exec', arguments: { argv: ['sh', '-c', 'cat /tmp/mine.txt 2>&1; echo exit=$?'] } });
  expect('a second MCP session cannot see the first one\'s desktop', !r.isError && /No such file/.test(textOf(r)), textOf(r));
  return { client, transport };
}

async function hostile(gw, sid) {
  let r = await rawPost(gw, INIT, { token: null });
  expect('no token: 401', r.status === 401, `${r.status} ${r.text}`);
  r = await rawPost(gw, INIT, { token: TOKENS.viewer });
  expect('a viewer token: 403', r.status === 403, `${r.status} ${r.text}`);
  r = await rawPost(gw, '{"jsonrpc": "2.0", "id": 1, "method": ', { sid });
  expect('malformed JSON: 400 with -32700', r.status === 400 && r.json && r.json.error.code === -32700, `${r.status} ${r.text}`);
  r = await rawPost(gw, [INIT], { sid });
  expect('a batch: 400 with -32600', r.status === 400 && r.json && r.json.error.code === -32600, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 2, method: 'tools/list' });
  expect('no Mcp-Session-Id after initialize: 400', r.status === 400, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { sid: '0'.repeat(32) });
  expect('an unknown session: 404', r.status === 404, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { sid, headers: { 'mcp-protocol-version': '1999-01-01' } });
  expect('an unsupported MCP-Protocol-Version: 400', r.status === 400, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 3, method: 'resources/list' }, { sid });
  expect('an unknown method: -32601', r.json && r.json.error && r.json.error.code === -32601, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '1.0', id: 4, method: 'ping' }, { sid });
  expect('not JSON-RPC 2.0: -32600', r.status === 400 && r.json && r.json.error.code === -32600, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 5, method: 'ping' }, { sid, headers: { origin: 'http://evil.example' } });
  expect('a foreign Origin: 403', r.status === 403, `${r.status} ${r.text}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 6, method: 'ping', params: { pad: 'x'.repeat(1100 * 1024) } }, { sid });
  expect('a body over limits.max_message_bytes: 413', r.status === 413, `${r.status} ${r.text.slice(0, 200)}`);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 7, method: 'ping' }, { sid });
  expect('the session answers after all that', r.status === 200 && r.json && r.json.result, `${r.status} ${r.text}`);
  const g = await fetch(`${gw.base}/mcp`, { headers: { authorization: `Bearer ${TOKENS.agent}`, accept: 'text/event-stream' } });
  expect('GET /mcp: 405', g.status === 405, g.status);
  r = await rawPost(gw, { ...INIT, params: { ...INIT.params, capabilities: { experimental: { deskgate: { profile: 'windows' } } } } });
  expect('bad session options are refused at initialize', r.json && r.json.error && r.json.error.code === -32602 && /profile/.test(r.json.error.message),
    `${r.status} ${r.text}`);
}

// A client that vanishes in the middle of a call: its session ends after
// the grace period, and nothing of it is left.
async function vanishing(gw) {
  let r = await rawPost(gw, { ...INIT, params: { ...INIT.params, capabilities: { experimental: { deskgate: { profile: 'xterm' } } } } });
  const sid = r.headers.get('mcp-session-id');
  expect('raw initialize', r.status === 200 && sid, `${r.status} ${r.text}`);
  const before = new Set((await sessionsOf(gw)).map((s) => s.id));
  const ac = new AbortController();
  const call = rawPost(gw, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'computer', arguments: { action: 'key', text: 'ctrl+Return' } } },
    { sid, signal: ac.signal }).catch((e) => e);
  await waitFor('the vanishing client\'s approval', async () => (await gw.api('GET', '/v1/approvals', TOKENS.viewer)).approvals.length === 1, 20000);
  const mine = (await sessionsOf(gw)).filter((s) => !before.has(s.id));
  expect('its desktop exists', mine.length === 1, JSON.stringify(mine));
  ac.abort();
  await call;
  await waitFor('its approval withdrawn', async () => (await gw.api('GET', '/v1/approvals', TOKENS.viewer)).approvals.length === 0, 5000);
  await waitFor('its desktop session ended after the grace period', async () =>
    !(await sessionsOf(gw)).some((s) => s.id === mine[0].id), 15000);
  r = await rawPost(gw, { jsonrpc: '2.0', id: 10, method: 'ping' }, { sid });
  expect('its MCP session is gone, saying why', r.status === 404 && /went away/.test(r.text), `${r.status} ${r.text}`);
  const ev = await gw.events(mine[0].id);
  const end = ev.find((e) => e.type === 'lifecycle' && e.state === 'ended');
  expect('its recording ended and says why', end && /went away/.test(end.reason), JSON.stringify(end));
}

async function stdioBridge(gw) {
  const transport = new StdioClientTransport({
    command: bin,
    args: ['mcp', '--url', `${gw.base}/mcp`, '--profile', 'xterm'],
    env: { PATH: process.env.PATH, DESKGATE_TOKEN: TOKENS.agent },
    stderr: 'pipe',
  });
  let stderr = '';
  const client = new Client({ name: 'stdio-client', version: '9.9' });
  await client.connect(transport);
  transport.stderr.on('data', (d) => { stderr += d; });
  const { tools } = await client.listTools();
  expect('stdio bridge: tools/list', tools.length === 2, tools.map((t) => t.name).join(','));
  const before = new Set((await sessionsOf(gw)).map((s) => s.id));
  const r = await client.callTool({ name: 'computer', arguments: { action: 'screenshot' } });
  expect('stdio bridge: a screenshot', (r.content || []).some((c) => c.type === 'image' && pngSize(c.data)), JSON.stringify(r).slice(0, 300));
  const mine = (await sessionsOf(gw)).filter((s) => !before.has(s.id));
  expect('stdio bridge: one desktop', mine.length === 1, JSON.stringify(mine));
  await client.close();
  await waitFor('the bridge\'s session ended when the host closed it', async () =>
    !(await sessionsOf(gw)).some((s) => mine[0] && s.id === mine[0].id), 15000).catch((e) => fail('stdio bridge end', `${e.message}\n${stderr}`));
}

function inspector(gw, args) {
  const pkg = path.join(here, 'node_modules', '@modelcontextprotocol', 'inspector-cli');
  return new Promise((resolve) => {
    // inspector-cli 1.0.3 looks for its package.json as "../package.json"
    // from the working directory (fs.existsSync) but imports it from its
    // own module: it starts only from its build directory.
    const p = spawn('node', [path.join(pkg, 'build', 'cli.js'), '--cli', `${gw.base}/mcp`, '--transport', 'http',
      '--header', `Authorization: Bearer ${TOKENS.agent}`, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'], cwd: path.join(pkg, 'build') });
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), 60000);
    p.on('exit', (code) => {
      clearTimeout(t);
      let json = null;
      try { json = JSON.parse(out); } catch { /* not JSON */ }
      resolve({ code, out, err, json });
    });
  });
}

async function inspectorCli(gw) {
  let r = await inspector(gw, ['--method', 'tools/list']);
  expect('inspector CLI: tools/list', r.code === 0 && r.json && r.json.tools.some((t) => t.name === 'computer'), `${r.code} ${r.out.slice(0, 300)} ${r.err.slice(0, 300)}`);
  r = await inspector(gw, ['--method', 'tools/call', '--tool-name', 'exec', '--tool-arg', 'argv=["echo","from-the-inspector"]']);
  expect('inspector CLI: tools/call exec', r.code === 0 && r.json && /from-the-inspector/.test(JSON.stringify(r.json.content)),
    `${r.code} ${r.out.slice(0, 300)} ${r.err.slice(0, 300)}`);
}

async function main() {
  if (!bin) throw new Error('usage: node mcp.js DESKGATE_BINARY WORK_DIR');
  const shop = await site('shop.test'), evil = await site('evil.test');
  const policy = {
    version: 1, default: 'allow',
    urls: { allow: [`http://shop.test:${shop.port}/**`], deny: [`http://evil.test:${evil.port}/**`] },
    text: { deny: ['secret-[0-9]+'] },
    keys: { ask: ['ctrl+Return'] },
    egress: { allow: [`shop.test:${shop.port}`, `evil.test:${evil.port}`] },
  };
  const gw = new Gateway(bin, {
    policies: { default: policy },
    resolve: [`shop.test:${shop.port}=127.0.0.1:${shop.port}`, `evil.test:${evil.port}=127.0.0.1:${evil.port}`],
    limits: { disconnect_grace_seconds: 3, approval_seconds: 60 },
  });
  process.on('exit', () => gw.killNow());
  await gw.start();
  say(`gateway on ${gw.base}`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  let one = null, two = null;
  await check('browser session', async () => { one = await browserSession(gw, shop, evil, browser); });
  await check('xterm session beside it', async () => { two = await xtermSession(gw); });
  await check('hostile requests', () => hostile(gw, one && one.sid));
  await check('the recording names the MCP client', async () => {
    const ev = await gw.events(one.desk);
    const created = ev.find((e) => e.type === 'lifecycle' && e.state === 'created');
    expect('the created event names the client and protocol', created && created.mcp && created.mcp.client.name === 'deskgate-mcp-test' &&
      created.mcp.client.version === '1.2.3' && created.mcp.protocol === '2025-11-25', JSON.stringify(created));
  });
  await check('DELETE ends the MCP session and its desktop', async () => {
    await one.transport.terminateSession();
    await one.client.close();
    await waitFor('the first desktop gone', async () => !(await sessionsOf(gw)).some((s) => s.id === one.desk), 10000);
    const r = await rawPost(gw, { jsonrpc: '2.0', id: 11, method: 'ping' }, { sid: one.sid });
    expect('after DELETE the session is 404', r.status === 404 && /DELETE/.test(r.text), `${r.status} ${r.text}`);
  });
  await check('two sessions: the second lives on', async () => {
    const r = await two.client.callTool({ name: 'computer', arguments: { action: 'cursor_position' } });
    expect('the second session still answers', !r.isError, textOf(r));
    await two.transport.terminateSession();
    await two.client.close();
  });
  await check('a vanishing client', () => vanishing(gw));
  await check('the stdio bridge', () => stdioBridge(gw));
  await check('nothing left behind', async () => {
    await waitFor('no desktop left', async () => (await sessionsOf(gw)).length === 0, 15000);
  });
  await check('the inspector CLI', async () => {
    await inspectorCli(gw);
    // The inspector does not end its MCP sessions (its desktops would
    // idle out): they are ended here.
    for (const s of await sessionsOf(gw)) await gw.api('DELETE', `/v1/sessions/${s.id}`, TOKENS.admin);
  });
  await browser.close();
  await finish(gw, shop, evil);
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
