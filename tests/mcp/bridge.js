'use strict';
// `deskgate mcp`, the stdio bridge (ctest: mcp/bridge; tests/support/node-suite.sh
// DESKGATE_BINARY WORK_DIR bridge), between the MCP SDK's own client
// (Client + StdioClientTransport, which spawns the bridge) and the SDK's own
// server (McpServer + StreamableHTTPServerTransport, stateful, on loopback),
// so both ends are code nobody here wrote.
//
// The server wants `Authorization: Bearer <token>` (401 otherwise), records
// every initialize's params, the headers each method came with and every
// DELETE, and has tools that stream progress before their result (SSE; the
// result waits until the client has the first notification),
// answer a 3 MiB image, and meet (two calls answer only once both are in).
// Checked: the flags' capabilities.experimental.deskgate reaches the server
// (and does not replace the host's own); Mcp-Session-Id and
// MCP-Protocol-Version go with later requests; progress before the result;
// the image intact (over SSE and over a JSON body); requests overlapping
// (a ping and a second call while the first is in); a wrong token fails
// with an error naming 401; closing the client ends the MCP session
// (DELETE) and the bridge exits 0 on its own; a garbage, a non-object and an
// oversized line on stdin each get a JSON-RPC error and the bridge goes on;
// a session the server ended (404) gets the request an error, and the host
// can initialize again; a gateway that is not there gets it an error too.
// Every bridge must exit 0 (under ASan, a leak fails it).
//
//   node bridge.js DESKGATE_BINARY WORK_DIR

const crypto = require('node:crypto');
const http = require('node:http');
const net = require('node:net');
const { spawn } = require('node:child_process');
const { McpServer } = require('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = require('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const bin = process.argv[2];
if (!bin || !process.argv[3]) {
  console.error('usage: node bridge.js DESKGATE_BINARY WORK_DIR');
  process.exit(2);
}
const t0 = Date.now();
const say = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${s}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const TOKEN = crypto.randomBytes(16).toString('hex');
const LINE_MAX = 4 * 1024 * 1024; // DG_MCP_BRIDGE_LINE_MAX
const BIG = crypto.randomBytes(3 * 1024 * 1024 * 3 / 4).toString('base64'); // 3 MiB of base64

function check(cond, what) {
  if (!cond) throw new Error(what);
}

// How far the client's onprogress got: seen(n) says it had notification n,
// reached(n) resolves once it has.
function progressSeen() {
  let count = 0;
  const waiters = [];
  return {
    seen(n) {
      count = Math.max(count, n);
      for (const w of waiters.splice(0)) if (count >= w.n) w.resolve(); else waiters.push(w);
    },
    reached(n) {
      return count >= n ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }));
    },
  };
}

function within(ms, what, promise) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

// The bridge's environment: the token, and the sanitizers' options (the SDK
// passes only a few variables of its own).
function bridgeEnv(extra) {
  const env = { PATH: process.env.PATH || '/usr/bin:/bin', ...extra };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) if (process.env[k]) env[k] = process.env[k];
  return env;
}

// ---- the server ---------------------------------------------------------------------

function mcpServer(state) {
  const server = new McpServer({ name: 'bridge-test-server', version: '1.0.0' });
  // Goes on past each notification only once the client has it (the test's
  // onprogress says so): a bridge that held the stream back until its end
  // would leave the call hanging. (The SDK's client also drops a progress
  // notification that comes in the same read as the result: it handles
  // notifications a microtask late.)
  server.registerTool('progress', { description: 'three progress notifications, then the result' }, async (extra) => {
    const token = extra._meta && extra._meta.progressToken;
    if (token === undefined) throw new Error('no progressToken in _meta');
    for (let i = 1; i <= 3; i++) {
      await extra.sendNotification({ method: 'notifications/progress',
        params: { progressToken: token, progress: i, total: 3, message: `step ${i}` } });
      await within(5000, `progress notification ${i} reaching the client`, state.progress.reached(i));
    }
    return { content: [{ type: 'text', text: 'progress done' }] };
  });
  server.registerTool('image', { description: 'a 3 MiB base64 image' }, async () => ({
    content: [{ type: 'image', data: BIG, mimeType: 'image/png' }, { type: 'text', text: 'image done' }],
  }));
  server.registerTool('meet', { description: 'answers once two calls are in' }, async () => {
    await new Promise((resolve) => {
      state.meeting.push(resolve);
      if (state.meeting.length >= 2) state.meeting.splice(0).forEach((r) => r());
    });
    return { content: [{ type: 'text', text: 'met' }] };
  });
  return server;
}

async function startServer() {
  const state = { inits: [], headers: {}, deletes: [], sessions: new Map(), meeting: [], unauthorized: 0,
    progress: progressSeen() };
  async function handle(req, res) {
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      state.unauthorized++;
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'unauthorized', message: 'a valid bearer token is required' } }));
      return;
    }
    const url = new URL(req.url, 'http://127.0.0.1');
    const sid = req.headers['mcp-session-id'];
    let body;
    if (req.method === 'POST') {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (body.method) {
        state.headers[body.method] = { session: sid, version: req.headers['mcp-protocol-version'],
          type: req.headers['content-type'], accept: req.headers.accept };
      }
      if (body.method === 'initialize') state.inits.push(body.params);
    }
    if (req.method === 'DELETE') state.deletes.push(sid);
    let transport = sid ? state.sessions.get(sid) : undefined;
    if (sid && !transport) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }));
      return;
    }
    if (!transport) {
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        enableJsonResponse: url.searchParams.has('json'),
        onsessioninitialized: (id) => state.sessions.set(id, t),
      });
      t.onclose = () => { if (t.sessionId) state.sessions.delete(t.sessionId); };
      await mcpServer(state).connect(t);
      transport = t;
    }
    await transport.handleRequest(req, res, body);
  }
  const srv = http.createServer((req, res) => {
    handle(req, res).catch((err) => {
      console.error(`server: ${req.method} ${req.url}: ${err.stack || err}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { srv, state, base: `http://127.0.0.1:${srv.address().port}` };
}

// ---- the bridge under the SDK's stdio client ------------------------------------------

// The SDK's transport, keeping the bridge's process to see how it exits.
class BridgeTransport extends StdioClientTransport {
  async start() {
    await super.start();
    this.child = this._process; // SDK 1.32.2 (pinned): the spawned ChildProcess
    check(this.child && typeof this.child.once === 'function',
      'StdioClientTransport has no _process: the SDK changed; find another way to the bridge\'s exit status');
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
  }
}

function sdkBridge(url, env, args = []) {
  const transport = new BridgeTransport({ command: bin, args: ['mcp', '--url', url, '--verbose', ...args],
    env: bridgeEnv(env), stderr: 'pipe' });
  const log = [];
  transport.stderr.on('data', (d) => log.push(d.toString()));
  const client = new Client({ name: 'bridge-test', version: '1.0.0' });
  return { transport, client, log };
}

async function expectExit0(b, what) {
  const e = await within(10000, `${what}: the bridge's exit`, b.exited);
  if (e.code !== 0 || e.signal) throw new Error(`${what}: the bridge exited ${e.code} (signal ${e.signal})`);
  return e;
}

async function sdkSuite(gw) {
  const b = sdkBridge(`${gw.base}/mcp`, { DESKGATE_TOKEN: TOKEN }, ['--profile', 'xterm']);
  try {
    await within(10000, 'initialize', b.client.connect(b.transport));
    const init = gw.state.inits[gw.state.inits.length - 1];
    const dg = init && init.capabilities && init.capabilities.experimental && init.capabilities.experimental.deskgate;
    check(dg && dg.profile === 'xterm' && Object.keys(dg).length === 1,
      `the server saw capabilities.experimental.deskgate ${JSON.stringify(dg)}, not {"profile":"xterm"}`);
    say('initialize: the server saw experimental.deskgate {"profile":"xterm"}');

    const tools = await within(10000, 'tools/list', b.client.listTools());
    const names = tools.tools.map((t) => t.name).sort().join(',');
    check(names === 'image,meet,progress', `tools/list: ${names}`);
    const h = gw.state.headers['tools/list'];
    check(h.session && gw.state.sessions.has(h.session), `tools/list came with Mcp-Session-Id ${h.session}`);
    check(h.version === init.protocolVersion, `tools/list came with MCP-Protocol-Version ${h.version}, not ${init.protocolVersion}`);
    check(/application\/json/.test(h.accept) && /text\/event-stream/.test(h.accept) && h.type === 'application/json',
      `tools/list came with Accept ${h.accept}, Content-Type ${h.type}`);
    check(gw.state.headers.initialize.session === undefined, 'initialize came with an Mcp-Session-Id');
    say(`tools/list: ${names}; Mcp-Session-Id and MCP-Protocol-Version ${h.version} sent`);

    const order = [];
    const r = await within(10000, 'tools/call progress', b.client.callTool({ name: 'progress', arguments: {} }, undefined,
      { onprogress: (p) => { order.push(`progress ${p.progress}/${p.total}`); gw.state.progress.seen(p.progress); } }));
    order.push('result');
    check(order.join(', ') === 'progress 1/3, progress 2/3, progress 3/3, result', `progress and result came as: ${order.join(', ')}`);
    check(!r.isError && r.content[0].text === 'progress done', `progress answered ${JSON.stringify(r)}`);
    say(`tools/call progress: ${order.join(', ')} (each as it came)`);

    const img = await within(20000, 'tools/call image', b.client.callTool({ name: 'image', arguments: {} }));
    check(img.content[0].type === 'image' && img.content[0].data === BIG && img.content[1].text === 'image done',
      `the image came back changed (${img.content[0].data ? img.content[0].data.length : 0} bytes of base64, sent ${BIG.length})`);
    say(`tools/call image: ${BIG.length} bytes of base64 intact`);

    const first = b.client.callTool({ name: 'meet', arguments: {} });
    await sleep(100);
    await within(5000, 'a ping while a call is in flight', b.client.ping());
    const second = b.client.callTool({ name: 'meet', arguments: {} });
    const met = await within(10000, 'two meet calls in flight at once', Promise.all([first, second]));
    check(met.every((m) => m.content[0].text === 'met'), `meet answered ${JSON.stringify(met)}`);
    say('overlap: a ping and a second call went through while the first was in flight; both answered');

    const session = h.session;
    const closing = Date.now();
    await b.client.close();
    const e = await expectExit0(b.transport, 'closing the client');
    check(e.at - closing < 1900, `the bridge took ${e.at - closing} ms to exit after stdin ended (the SDK sends SIGTERM at 2 s)`);
    check(gw.state.deletes.includes(session), `no DELETE for session ${session} (DELETEs: ${JSON.stringify(gw.state.deletes)})`);
    check(!gw.state.sessions.has(session), 'the session is still open on the server');
    say(`close: DELETE arrived, the bridge exited 0 in ${e.at - closing} ms`);
  } catch (err) {
    err.message += `\n--- the bridge's stderr:\n${b.log.join('')}`;
    throw err;
  }
}

async function wrongToken(gw) {
  const b = sdkBridge(`${gw.base}/mcp`, { DESKGATE_TOKEN: 'not-the-token' });
  const before = gw.state.unauthorized;
  let failed = null;
  try {
    await within(10000, 'initialize with a wrong token', b.client.connect(b.transport));
  } catch (err) {
    failed = err;
  }
  check(failed && /401/.test(failed.message), `a wrong token: ${failed ? failed.message : 'initialize succeeded'}`);
  check(gw.state.unauthorized > before, 'the server saw no unauthorized request');
  await b.client.close();
  await expectExit0(b.transport, 'after a wrong token');
  check(/401/.test(b.log.join('')), `the bridge's stderr does not name the 401:\n${b.log.join('')}`);
  say(`wrong token: "${failed.message.split('\n')[0]}"`);
}

// ---- the bridge spawned directly: raw lines on stdin -----------------------------------

class RawBridge {
  constructor(url, env, args = []) {
    this.child = spawn(bin, ['mcp', '--url', url, '--verbose', ...args], { env: bridgeEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
    this.err = '';
    this.lines = [];
    this.waiter = null;
    let pending = '';
    this.child.stdout.on('data', (d) => {
      pending += d.toString('utf8');
      let i;
      while ((i = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        let msg;
        try {
          msg = JSON.parse(line);
        } catch (e) {
          msg = { notJson: line.slice(0, 200) };
        }
        this.lines.push(msg);
      }
      this.pump();
    });
    this.child.stderr.on('data', (d) => { this.err += d.toString(); });
    this.exited = new Promise((resolve) => this.child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
    this.child.stdin.on('error', () => {});
  }

  pump() {
    if (this.waiter && this.lines.length) {
      const w = this.waiter;
      this.waiter = null;
      w(this.lines.shift());
    }
  }

  write(text) { this.child.stdin.write(text); }
  send(msg) { this.write(JSON.stringify(msg) + '\n'); }

  // The next line of stdout, which must be a JSON object.
  async next(what) {
    const msg = await within(10000, what, new Promise((resolve) => { this.waiter = resolve; this.pump(); }));
    check(!msg.notJson, `${what}: stdout had a line that is not JSON: ${msg.notJson}`);
    return msg;
  }

  async request(id, method, params, what) {
    this.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    const msg = await this.next(what);
    check(msg.id === id, `${what}: answered ${JSON.stringify(msg).slice(0, 300)}`);
    return msg;
  }
}

function initParams(extra) {
  return { protocolVersion: '2025-11-25', capabilities: { ...extra }, clientInfo: { name: 'raw', version: '1' } };
}

function expectError(msg, code, pattern, what) {
  check(msg.jsonrpc === '2.0' && msg.error && msg.error.code === code && pattern.test(msg.error.message),
    `${what}: expected a JSON-RPC error ${code} matching ${pattern}, got ${JSON.stringify(msg).slice(0, 300)}`);
}

async function rawSuite(gw) {
  // JSON answers (not SSE) from this URL; the token from the second variable.
  const b = new RawBridge(`${gw.base}/mcp?json=1`, { DESKGATE_AGENT_TOKEN: TOKEN },
    ['--profile', 'xterm', '--size', '1280x800']);
  try {
    const init = await b.request(1, 'initialize', initParams({ experimental: { deskgate: { profile: 'browser' } } }), 'initialize');
    check(init.result && init.result.protocolVersion === '2025-11-25', `initialize: ${JSON.stringify(init)}`);
    const dg = gw.state.inits[gw.state.inits.length - 1].capabilities.experimental.deskgate;
    check(JSON.stringify(dg) === '{"profile":"browser"}', `the host's own deskgate capability became ${JSON.stringify(dg)}`);
    b.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    say('raw: initialize (a JSON body); the host\'s own experimental.deskgate kept as it was');

    b.write('\n   \r\nnot json at all\n');
    expectError(await b.next('a line that is not JSON'), -32700, /line 5 of stdin is not JSON/, 'a line that is not JSON');
    b.write('[1,2,3]\n');
    const arr = await b.next('a line that is an array');
    expectError(arr, -32600, /not one JSON-RPC message/, 'a line that is an array');
    check(arr.id === null, 'the error for an array has an id');
    b.write('{"jsonrpc":"2.0","id":99,"method":"ping","params":{"pad":"' + 'x'.repeat(LINE_MAX) + '"}}\n');
    const big = await b.next('an oversized line');
    expectError(big, -32700, /passed 4194304 bytes/, 'an oversized line');
    check(big.id === null, 'the error for an oversized line has an id');
    await b.request(2, 'ping', null, 'a ping after the bad lines');
    say('raw: a garbage, an array and a 4 MiB line each got a JSON-RPC error; the next ping was answered');

    const img = await b.request(3, 'tools/call', { name: 'image', arguments: {} }, 'tools/call image (a JSON body)');
    check(img.result.content[0].data === BIG, 'the image came back changed through a JSON body');
    say(`raw: tools/call image: ${BIG.length} bytes of base64 intact in a JSON body`);

    const sid = gw.state.headers.ping.session;
    check(sid && gw.state.sessions.has(sid), `ping came with Mcp-Session-Id ${sid}`);
    await gw.state.sessions.get(sid).close(); // the server ends the session
    const gone = await b.request(4, 'ping', null, 'a ping to an ended session');
    expectError(gone, -32000, /HTTP 404: Session not found/, 'a ping to an ended session');
    check(/the MCP session ended/.test(b.err), `the bridge's stderr does not say the session ended:\n${b.err}`);
    const again = await b.request(5, 'initialize', initParams({}), 'initialize again');
    check(again.result, `initialize again: ${JSON.stringify(again)}`);
    const dg2 = gw.state.inits[gw.state.inits.length - 1].capabilities.experimental.deskgate;
    check(JSON.stringify(dg2) === '{"profile":"xterm","size":{"width":1280,"height":800}}',
      `the flags filled in experimental.deskgate as ${JSON.stringify(dg2)}`);
    b.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    await b.request(6, 'ping', null, 'a ping in the new session');
    const sid2 = gw.state.headers.ping.session;
    check(sid2 && sid2 !== sid && gw.state.sessions.has(sid2), `the ping after initializing again came with ${sid2}`);
    say('raw: a 404 (session ended) got the request an error; initializing again opened a new session');

    const closing = Date.now();
    b.child.stdin.end();
    const e = await within(10000, 'the bridge\'s exit', b.exited);
    check(e.code === 0 && !e.signal, `the bridge exited ${e.code} (signal ${e.signal}) after stdin ended`);
    check(gw.state.deletes.includes(sid2) && !gw.state.deletes.includes(sid), `DELETEs: ${JSON.stringify(gw.state.deletes)}`);
    check(b.lines.length === 0, `stdout had more: ${JSON.stringify(b.lines).slice(0, 300)}`);
    say(`raw: stdin ended: DELETE of the new session, exit 0 in ${e.at - closing} ms`);
  } catch (err) {
    b.child.kill('SIGKILL');
    err.message += `\n--- the bridge's stderr:\n${b.err}`;
    throw err;
  }
}

// A port nothing listens on.
async function deadPort() {
  const s = net.createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = s.address().port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

async function noGateway() {
  const url = `http://127.0.0.1:${await deadPort()}/mcp`;
  const b = new RawBridge(url, { DESKGATE_TOKEN: TOKEN });
  try {
    const msg = await b.request(1, 'initialize', initParams({}), 'initialize with no gateway');
    expectError(msg, -32000, new RegExp(`POST ${url.replace(/[.?]/g, '\\$&')}: .*(refused|connect)`, 'i'), 'no gateway');
    b.child.stdin.end();
    const e = await within(10000, 'the bridge\'s exit', b.exited);
    check(e.code === 0 && !e.signal, `the bridge exited ${e.code} (signal ${e.signal})`);
    say(`no gateway: "${msg.error.message}"`);
  } catch (err) {
    b.child.kill('SIGKILL');
    err.message += `\n--- the bridge's stderr:\n${b.err}`;
    throw err;
  }
}

async function noToken() {
  const b = new RawBridge('http://127.0.0.1:1/mcp', {});
  b.child.stdin.end();
  const e = await within(10000, 'the bridge\'s exit without a token', b.exited);
  check(e.code === 2 && /no token/.test(b.err), `without a token the bridge exited ${e.code}: ${b.err}`);
  say('no token: exit 2');
}

async function main() {
  const gw = await startServer();
  say(`server on ${gw.base}`);
  try {
    await sdkSuite(gw);
    await wrongToken(gw);
    await rawSuite(gw);
    await noGateway();
    await noToken();
  } finally {
    gw.srv.closeAllConnections();
    gw.srv.close();
  }
  say('mcp/bridge: all checks passed');
}

const overall = setTimeout(() => {
  console.error('mcp/bridge: FAILED: the suite did not finish within 90 s');
  process.exit(1);
}, 90000);
overall.unref();

main().then(() => process.exit(0), (err) => {
  console.error(`mcp/bridge: FAILED: ${err.stack || err}`);
  process.exit(1);
});
