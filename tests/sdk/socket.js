'use strict';
// The agent's side of a session for the SDK suites (conformance.js,
// browser.js): a session's WebSocket whose messages are taken in turn, and
// the checks both make of what comes back.

const { TOKENS, waitFor } = require('../web/lib/gateway.js');
const WebSocket = require('ws');

class Socket {
  // A new session (body as POST /v1/sessions takes it) and its socket,
  // its hello read; extra goes to the constructor of a subclass.
  static async open(gw, body, ...extra) {
    const s = await gw.api('POST', '/v1/sessions', TOKENS.agent, body, 201);
    const k = new this(gw, s, ...extra);
    await new Promise((resolve, reject) => { k.ws.once('open', resolve); k.ws.once('error', reject); });
    const hello = await k.text(20000);
    if (hello.type !== 'hello') throw new Error(`first message is not hello: ${JSON.stringify(hello)}`);
    return k;
  }

  constructor(gw, s) {
    this.gw = gw;
    this.id = s.id;
    this.queue = [];
    this.waiter = null;
    this.outOfTurn = 0;
    const url = gw.base.replace('http:', 'ws:') + `/v1/sessions/${s.id}/ws`;
    this.ws = new WebSocket(url, ['deskgate.v1', `bearer.${s.session_token}`], { maxPayload: 64 * 1024 * 1024 });
    this.ws.on('message', (data, binary) => { this.queue.push({ data, binary }); this.pump(); });
    this.ws.on('close', () => { this.closed = true; this.pump(); });
  }

  pump() {
    if (!this.waiter) return;
    if (this.queue.length) {
      const w = this.waiter;
      this.waiter = null;
      clearTimeout(w.timer);
      w.resolve(this.queue.shift());
    } else if (this.closed) {
      const w = this.waiter;
      this.waiter = null;
      w.reject(new Error(`session ${this.id}: socket closed`));
    }
  }

  next(timeoutMs) {
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject, timer: setTimeout(() => { this.waiter = null; reject(new Error(`session ${this.id}: no message within ${timeoutMs} ms`)); }, timeoutMs) };
      this.pump();
    });
  }

  // The next text message: the answer (the agent asked for no events, so
  // an event or decision here is counted as out of turn, and fails the
  // suite, docs/api.md "WebSockets").
  async text(timeoutMs = 30000) {
    for (;;) {
      const m = await this.next(timeoutMs);
      if (m.binary) throw new Error(`session ${this.id}: a binary message where text was due`);
      const j = JSON.parse(m.data.toString());
      if (j.type === 'event' || j.type === 'decision') { this.outOfTurn++; continue; }
      return j;
    }
  }

  async send(obj, timeoutMs) {
    this.ws.send(JSON.stringify(obj));
    return this.text(timeoutMs);
  }

  // A canonical action: its result and, when announced, its PNG.
  async act(obj) {
    const r = await this.send(obj);
    if (r.frame) {
      const m = await this.next(30000);
      if (!m.binary) throw new Error('no PNG after a result');
    }
    if (r.type !== 'result' || !r.ok) throw new Error(`${JSON.stringify(obj)}: ${JSON.stringify(r).slice(0, 400)}`);
    return r;
  }

  async title() {
    return (await this.act({ type: 'cursor_position' })).title || '';
  }

  async end() {
    try { this.ws.close(); } catch { /* closed */ }
    await this.gw.api('DELETE', `/v1/sessions/${this.id}`, TOKENS.agent);
  }
}

function pngSize(b64) {
  const b = Buffer.from(b64, 'base64');
  if (b.length < 24 || b.toString('latin1', 1, 4) !== 'PNG' || b.toString('latin1', 12, 16) !== 'IHDR') return null;
  return [b.readUInt32BE(16), b.readUInt32BE(20)];
}

// A shortened copy for the .ts file: every base64 image string cut.
function forTs(v) {
  return JSON.parse(JSON.stringify(v, (k, x) => {
    if (typeof x === 'string' && x.length > 200 && (k === 'data' || k === 'image_url')) return x.slice(0, 64);
    return x;
  }));
}

module.exports = { Socket, pngSize, forTs, waitFor };
