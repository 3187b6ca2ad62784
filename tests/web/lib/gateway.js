'use strict';
// A `deskgate serve` of its own for the web tests: a temporary directory
// with the config, policies, state and recordings; fixed test tokens; HTTP
// helpers; and an agent client speaking the canonical WebSocket API.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const WebSocket = require('ws');

// Every token is at least 24 characters (the gateway refuses shorter ones).
const TOKENS = {
  agent: 'web-test-agent-token-0123456789abcdef',   // env-agent
  viewer: 'web-test-viewer-token-0123456789abcdef', // env-viewer
  admin: 'web-test-admin-token-0123456789abcdef',   // env-admin
  alice: 'web-test-alice-viewer-token-0123456789',  // config token "alice", a viewer
  olive: 'web-test-olive-operator-token-012345678', // config token "olive", an operator
  oscar: 'web-test-oscar-operator-token-012345678', // config token "oscar", an operator
};

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// Polls fn until it returns a truthy value (returned) or timeoutMs passes
// (throws with what, and the last value or error).
async function waitFor(what, fn, timeoutMs = 15000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${detail})`);
    }
    await sleep(everyMs);
  }
}

class Gateway {
  // bin: the deskgate binary. policies: {name: policyObject}; "default" is
  // the gateway's policy, the others are named policies sessions may ask for.
  // resolve: ["NAME:PORT=IP:PORT", ...] for --test-resolve.
  constructor(bin, { policies, resolve = [], limits = {} }) {
    this.bin = bin;
    this.policies = policies;
    this.resolve = resolve;
    this.limits = limits;
    this.proc = null;
    this.dir = null;
    this.log = '';
  }

  async start(timeoutMs = 30000) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-web-'));
    // The gateway drops to its own uid and must reach state/ and rec/.
    fs.chmodSync(this.dir, 0o755);
    const named = {};
    for (const [name, pol] of Object.entries(this.policies)) {
      const file = path.join(this.dir, `policy-${name}.json`);
      fs.writeFileSync(file, JSON.stringify(pol, null, 2) + '\n', { mode: 0o644 });
      if (name !== 'default') named[name] = file;
    }
    this.port = await freePort();
    this.base = `http://127.0.0.1:${this.port}`;
    this.recordings = path.join(this.dir, 'rec');
    const config = {
      listen: `127.0.0.1:${this.port}`,
      state_dir: path.join(this.dir, 'state'),
      recordings: this.recordings,
      tokens: [{ name: 'alice', role: 'viewer', token: TOKENS.alice },
        { name: 'olive', role: 'operator', token: TOKENS.olive },
        { name: 'oscar', role: 'operator', token: TOKENS.oscar }],
      limits: this.limits,
    };
    if (this.policies.default) config.policy = path.join(this.dir, 'policy-default.json');
    if (Object.keys(named).length) config.policies = named;
    this.config = path.join(this.dir, 'config.json');
    fs.writeFileSync(this.config, JSON.stringify(config, null, 2) + '\n', { mode: 0o644 });

    const env = {};
    for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('DESKGATE_')) env[k] = v;
    env.DESKGATE_AGENT_TOKEN = TOKENS.agent;
    env.DESKGATE_VIEWER_TOKEN = TOKENS.viewer;
    env.DESKGATE_ADMIN_TOKEN = TOKENS.admin;
    const args = ['serve', '--config', this.config];
    for (const r of this.resolve) args.push('--test-resolve', r);
    this.proc = spawn(this.bin, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, sig) => resolve({ code, sig })));
    this.proc.stdout.on('data', (d) => { this.log += d; });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    let gone = null;
    this.exited.then((x) => { gone = x; });
    await waitFor('deskgate serve to start', () => {
      if (gone) throw new Error(`deskgate serve exited (${JSON.stringify(gone)}):\n${this.log}`);
      return this.log.includes('serving on');
    }, timeoutMs, 50);
  }

  // Stops the server (SIGTERM, then SIGKILL) and removes its directory
  // unless keep. Idempotent.
  async stop({ keep = false } = {}) {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 15000);
      await this.exited;
      clearTimeout(t);
    }
    this.proc = null;
    if (this.dir && !keep) fs.rmSync(this.dir, { recursive: true, force: true });
    if (!keep) this.dir = null;
  }

  // Synchronous last resort for process exit handlers.
  killNow() {
    if (this.proc && this.proc.exitCode === null) {
      try { this.proc.kill('SIGKILL'); } catch { /* gone */ }
    }
    if (this.dir) fs.rmSync(this.dir, { recursive: true, force: true });
  }

  // Runs `deskgate audit` of one of the gateway's policies with the
  // gateway's state directory (where the gateway finds the result):
  // resolves to {code, report (the JSON), stderr}.
  audit(policyName, profile = 'xterm', timeoutMs = 120000) {
    const file = path.join(this.dir, `policy-${policyName}.json`);
    const args = ['audit', '--policy', file, '--profile', profile, '--state-dir', path.join(this.dir, 'state'),
      '--recordings', this.recordings, '--json'];
    return new Promise((resolve) => {
      const p = spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '', err = '';
      p.stdout.on('data', (d) => { out += d; });
      p.stderr.on('data', (d) => { err += d; });
      const t = setTimeout(() => p.kill('SIGKILL'), timeoutMs);
      p.on('exit', (code, sig) => {
        clearTimeout(t);
        let report = null;
        try { report = JSON.parse(out); } catch { /* none */ }
        resolve({ code: code === null ? `signal ${sig}` : code, report, stderr: err });
      });
    });
  }

  // One HTTP request: {status, headers, text, json}.
  async http(method, p, token, body) {
    const headers = {};
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(this.base + p, {
      method,
      headers,
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, text, json };
  }

  // Like http, but the status must be `want`; returns the JSON body.
  async api(method, p, token, body, want = 200) {
    const r = await this.http(method, p, token, body);
    if (r.status !== want) {
      throw new Error(`${method} ${p}: status ${r.status}, expected ${want}: ${r.text.slice(0, 500)}`);
    }
    return r.json;
  }

  // The recording's events (parsed).
  async events(id, token = TOKENS.viewer) {
    const r = await this.http('GET', `/v1/recordings/${id}/events`, token);
    if (r.status !== 200) throw new Error(`events of ${id}: ${r.status} ${r.text}`);
    return r.text.split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
  }
}

// Messages received on a WebSocket, waited for by what they match: the
// subclass pushes each to this.queue and calls pump(), sets this.closed
// when the socket closes; this.label names it in errors.
class Inbox {
  constructor(label) {
    this.label = label;
    this.queue = [];
    this.waiters = [];
  }

  pump() {
    for (let i = 0; i < this.waiters.length; i++) {
      const w = this.waiters[i];
      const k = this.queue.findIndex(w.pred);
      if (k >= 0) {
        const [m] = this.queue.splice(k, 1);
        this.waiters.splice(i--, 1);
        clearTimeout(w.timer);
        w.resolve(m);
      } else if (this.closed) {
        this.waiters.splice(i--, 1);
        clearTimeout(w.timer);
        w.reject(new Error(`${this.label}: the socket closed`));
      }
    }
  }

  // The next message matching pred (messages that match no waiter wait).
  next(pred, timeoutMs = 20000) {
    return new Promise((resolve, reject) => {
      const w = { pred, resolve, reject };
      w.timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`${this.label}: no matching message within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(w);
      this.pump();
    });
  }
}

// An agent: creates a session and speaks canonical actions on its WebSocket.
class Agent extends Inbox {
  static async create(gw, body, token = TOKENS.agent) {
    const s = await gw.api('POST', '/v1/sessions', token, body, 201);
    const a = new Agent(gw, s);
    await a.connect();
    return a;
  }

  constructor(gw, session) {
    super(`session ${session.id}: the agent`);
    this.gw = gw;
    this.session = session;
    this.id = session.id;
  }

  connect() {
    const url = this.gw.base.replace('http:', 'ws:') + `/v1/sessions/${this.id}/ws`;
    this.ws = new WebSocket(url, ['deskgate.v1', `bearer.${this.session.session_token}`], {
      maxPayload: 64 * 1024 * 1024,
    });
    // A result with "frame" is followed by its PNG, in order on the
    // socket: the PNG is attached to its result (r.png), so a caller never
    // takes the frame of an earlier action for its own (one that arrives
    // after the next action was sent).
    this.awaitingFrame = [];
    this.ws.on('message', (data, binary) => {
      if (binary) {
        const r = this.awaitingFrame.shift();
        if (r) r.png = data;
        return;
      }
      const msg = JSON.parse(data.toString());
      if (msg.type === 'result' && msg.frame) this.awaitingFrame.push(msg);
      this.queue.push(msg);
      this.pump();
    });
    this.ws.on('close', () => { this.closed = true; this.pump(); });
    return new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
    }).then(() => this.next((m) => m.type === 'hello', 10000));
  }

  send(action) {
    this.ws.send(JSON.stringify(action));
  }

  // Sends one canonical action and waits for its result (an "ask" waits
  // until someone decides; use sendAsk for those).
  async act(action, timeoutMs = 20000) {
    this.send(action);
    const m = await this.next((x) => x.type === 'result' || x.type === 'error', timeoutMs);
    if (m.type === 'error') throw new Error(`${JSON.stringify(action)}: ${JSON.stringify(m.error)}`);
    return m;
  }

  // act(), then the result's PNG (r.png, a Buffer) when it has a frame.
  async actFrame(action, timeoutMs = 20000) {
    const r = await this.act(action, timeoutMs);
    if (r.frame) await waitFor(`the screenshot of ${JSON.stringify(action)}`, () => r.png, 10000, 5);
    return r;
  }

  // Sends an action the policy asks about: resolves with the pending
  // message; the result comes later (this.next(result)).
  async sendAsk(action) {
    this.send(action);
    return this.next((x) => x.type === 'pending' || x.type === 'result', 10000);
  }

  // The screen now, as the agent sees it: a screenshot's PNG (a Buffer).
  async screenshot() {
    const r = await this.actFrame({ type: 'screenshot' });
    if (!r.ok || !r.frame) throw new Error(`session ${this.id}: no screenshot: ${JSON.stringify(r)}`);
    return r.png;
  }

  result(timeoutMs = 20000) {
    return this.next((x) => x.type === 'result', timeoutMs);
  }

  async end() {
    try { this.ws.close(); } catch { /* closed */ }
    await this.gw.api('DELETE', `/v1/sessions/${this.id}`, TOKENS.agent);
  }
}

module.exports = { Gateway, Agent, Inbox, TOKENS, freePort, sleep, waitFor };
