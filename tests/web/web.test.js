'use strict';
// Browser tests of deskgate's web pages: a real gateway (`deskgate serve`,
// as root), real recorded sessions driven by a test agent over the
// canonical WebSocket API, and Debian's Chromium driven headless by
// playwright-core.
//
//   node web.test.js DESKGATE_BINARY
//
// Exit 0 when every check passed, 1 when one failed (each failure says what
// and saves a screenshot of the page under test), 2 when something needed
// is missing. Page screenshots go to tests/web/screenshots/ in the build
// directory that holds DESKGATE_BINARY (build-asan/tests/web/screenshots/
// under .ci/test), or to $DG_WEB_SCREENSHOTS: never into the source tree.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const WebSocket = require('ws');
const { PNG } = require('pngjs');
const { Gateway, Agent, TOKENS, sleep, waitFor } = require('./lib/gateway');
const { startSite } = require('./lib/site');
const { writeRecording } = require('./lib/recording');

const CHROMIUM = process.env.DG_CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.DG_WEB_SCREENSHOTS ||
  path.join(path.dirname(path.resolve(process.argv[2] || '.')), 'tests', 'web', 'screenshots');
const VIEWPORT = { width: 1440, height: 900 };

/* ---- a tiny sequential runner ------------------------------------------- */

const checks = [];
const check = (name, fn, timeoutMs = 60000) => checks.push({ name, fn, timeoutMs });
let failures = 0;
let current = null; // the page a failing check is looking at
const t0 = Date.now();
const say = (s) => process.stdout.write(s + '\n');

async function runChecks() {
  for (const c of checks) {
    const start = Date.now();
    let timer;
    try {
      await Promise.race([
        c.fn(),
        new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${c.timeoutMs} ms`)), c.timeoutMs); }),
      ]);
      say(`ok   ${c.name} (${Date.now() - start} ms)`);
    } catch (e) {
      failures++;
      say(`FAIL ${c.name} (${Date.now() - start} ms)\n     ${String(e && e.stack || e).split('\n').join('\n     ')}`);
      if (current) {
        const file = path.join(os.tmpdir(), `dg-web-failed-${checks.indexOf(c) + 1}.png`);
        await current.screenshot({ path: file }).then(() => say(`     page at failure: ${file}`), () => {});
      }
    } finally {
      clearTimeout(timer);
    }
  }
}

/* ---- the world under test ------------------------------------------------ */

const bin = process.argv[2];
let gw = null, site = null, browser = null;
let cleaned = false;
function cleanupNow() {
  if (cleaned) return;
  cleaned = true;
  if (gw) gw.killNow();
}
process.on('exit', cleanupNow);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => { say(`interrupted (${sig})`); cleanupNow(); process.exit(1); });
}

function policies(host) {
  const main = {
    version: 1,
    default: 'deny',
    actions: {
      allow: ['screenshot', 'move', 'click', 'drag', 'scroll', 'type', 'key', 'navigate', 'back', 'forward', 'reload', 'wait', 'zoom', 'cursor_position'],
      ask: ['exec'],
      deny: [],
    },
    urls: { allow: [`http://${host}/**`], deny: [`http://${host}/admin/**`] },
    regions: [{ name: 'browser-chrome', rect: [0, 0, 1280, 88], actions: ['click', 'drag', 'scroll'], verdict: 'deny', reason: "the browser's tabs and address bar are off limits" }],
    keys: { deny: ['ctrl+alt+*', 'super+*'], ask: ['ctrl+Return'] },
    text: { max_length: 2000, deny: ['BEGIN [A-Z ]*PRIVATE KEY'] },
    egress: { allow: [host] },
    budgets: { actions_per_minute: 600, max_actions: 1000, max_exec: 20 },
    limits: { memory_mb: 2048, pids: 512, cpus: 1, session_seconds: 900, exec_seconds: 20, output_bytes: 65536, scratch_mb: 256 },
  };
  return {
    default: main,
    redacted: { ...main, recording: { redact_text: true } },
    locked: { version: 1, default: 'deny', actions: { allow: ['screenshot', 'click', 'type', 'key', 'scroll', 'wait'], ask: [], deny: ['exec'] }, limits: { memory_mb: 1024, session_seconds: 600 } },
    asking: { version: 1, default: 'deny', actions: { allow: ['screenshot', 'wait'], ask: ['click'], deny: [] }, limits: { memory_mb: 1024, session_seconds: 600 } },
    // For CDP clients: their scripts are javascript actions (docs/cdp.md).
    cdp: { ...main, actions: { ...main.actions, allow: [...main.actions.allow, 'javascript'] } },
  };
}

// The recorded session's script: each step's action, the verdict it must
// get and, for steps after which a page must have loaded, its title (the
// test fails right there if the page is not there yet). The two exec
// actions are asked about and answered in the Approvals page.
function scriptA(host) {
  const steps = [
    { name: 'open', a: { type: 'navigate', url: `http://${host}/` }, v: 'allow', title: 'Acme shop: orders' },
    { name: 'focus', a: { type: 'click', x: 180, y: 178 }, v: 'allow' },
    { name: 'typeSearch', a: { type: 'type', text: 'desk lamp' }, v: 'allow' },
    { name: 'addressBar', a: { type: 'click', x: 640, y: 62 }, v: 'deny' },
    { name: 'enter', a: { type: 'key', keys: 'Return' }, v: 'allow' },
    { name: 'waitSearch', a: { type: 'wait', ms: 1000 }, v: 'allow', title: 'Search: desk lamp' },
    { name: 'back1', a: { type: 'back' }, v: 'allow', title: 'Acme shop: orders' },
    { name: 'link', a: { type: 'click', x: 57, y: 400 }, v: 'allow' },
    { name: 'waitOrder', a: { type: 'wait', ms: 1000 }, v: 'allow', title: 'Order #1043' },
    { name: 'back2', a: { type: 'back' }, v: 'allow', title: 'Acme shop: orders' },
    { name: 'scroll', a: { type: 'scroll', x: 640, y: 500, dx: 0, dy: 3 }, v: 'allow' },
    { name: 'drag', a: { type: 'drag', path: [[40, 300], [400, 320], [620, 340]] }, v: 'allow' },
    { name: 'chord', a: { type: 'key', keys: 'ctrl+alt+Delete' }, v: 'deny' },
    { name: 'admin', a: { type: 'navigate', url: `http://${host}/admin/users` }, v: 'deny' },
    { name: 'execOk', a: { type: 'exec', argv: ['echo', 'hello from the jail'] }, v: 'ask' },  // approved in the page
    { name: 'execNo', a: { type: 'exec', argv: ['cat', '/etc/shadow'] }, v: 'deny' },          // denied in the page
    { name: 'secret', a: { type: 'type', text: '-----BEGIN RSA PRIVATE KEY-----' }, v: 'deny' },
  ];
  const S = {};
  steps.forEach((x, i) => { x.n = i + 1; S[x.name] = x.n; });
  return { steps, S };
}

// Runs steps [from, to) of the script on agent a, checking each verdict and
// page title.
async function runSteps(a, steps, from, to) {
  for (const st of steps.slice(from, to)) {
    const r = await a.act(st.a);
    assert.equal(r.verdict, st.v, `step ${st.n} ${JSON.stringify(st.a)}: ${JSON.stringify(r)}`);
    if (st.title) assert.equal(r.title, st.title, `step ${st.n} ${JSON.stringify(st.a)}: the page is not loaded: ${JSON.stringify(r)}`);
  }
}

/* ---- page helpers --------------------------------------------------------- */

const pageErrors = [];
let requestURLs = [];

async function newPage(ctx, label) {
  const page = await ctx.newPage();
  page.on('pageerror', (e) => pageErrors.push(`${label}: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) pageErrors.push(`${label}: ${m.text()}`);
  });
  page.on('websocket', (ws) => requestURLs.push(ws.url()));
  // No page may ever open a dialog (hostile text run as script would).
  page.on('dialog', (d) => { pageErrors.push(`${label}: a ${d.type()} dialog opened: ${d.message()}`); d.dismiss().catch(() => {}); });
  return page;
}

async function signIn(page, token) {
  await page.fill('#token', token);
  await page.click('#signin-form button[type=submit]');
  await page.waitForSelector('#app:not([hidden])', { timeout: 10000 });
  await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });
}

async function shot(page, name, opts = {}) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), ...opts });
}

const text = (page, sel) => page.locator(sel).innerText();

// The centre of the overlay's target mark, in screen coordinates (the
// recording's 1280x800), measured from where the browser drew it over the
// frame image.
async function overlayPoint(page, which, sel = '.ov-target') {
  return page.evaluate(([which, sel]) => {
    const img = document.querySelector(`#img-${which}`);
    const mark = document.querySelector(`#ov-${which} ${sel}`);
    if (!img || img.hidden || !img.naturalWidth || !mark) return null;
    const ib = img.getBoundingClientRect(), mb = mark.getBoundingClientRect();
    return {
      x: (mb.left + mb.width / 2 - ib.left) / ib.width * 1280,
      y: (mb.top + mb.height / 2 - ib.top) / ib.height * 800,
      natural: [img.naturalWidth, img.naturalHeight],
    };
  }, [which, sel]);
}

function near(p, x, y, what, tol = 4) {
  assert.ok(p, `${what}: no overlay mark drawn over a loaded frame`);
  assert.ok(Math.abs(p.x - x) <= tol && Math.abs(p.y - y) <= tol,
    `${what}: overlay drawn at (${p.x.toFixed(1)}, ${p.y.toFixed(1)}), the action was at (${x}, ${y})`);
}

// The element box drawn over a frame (the player's #ov-before, or the svg
// given): its rect's attributes, its stroke, where the browser drew it
// relative to the image (CSS pixels) and the image's scale (CSS pixels per
// screen pixel), and the label's text and box.
async function elementBoxShown(page, svgSel, imgSel, screen = [1280, 800]) {
  return page.evaluate(([svgSel, imgSel, screen]) => {
    const img = document.querySelector(imgSel);
    const r = document.querySelector(`${svgSel} rect.ov-element`);
    if (!img || img.hidden || !img.naturalWidth || !r) return null;
    const ib = img.getBoundingClientRect(), rb = r.getBoundingClientRect();
    const tag = document.querySelector(`${svgSel} .ov-element-tag`);
    const text = tag && tag.querySelector('text');
    const tb = tag ? tag.getBoundingClientRect() : null;
    return {
      attrs: ['x', 'y', 'width', 'height'].map((k) => +r.getAttribute(k)),
      ref: r.getAttribute('data-ref'),
      stroke: r.getAttribute('stroke'),
      shown: [rb.left - ib.left, rb.top - ib.top, rb.width, rb.height],
      scale: [ib.width / screen[0], ib.height / screen[1]],
      label: text ? text.textContent : null,
      labelChildren: text ? text.childElementCount : null,
      labelBox: tb ? [tb.left - ib.left, tb.top - ib.top, tb.width, tb.height] : null,
    };
  }, [svgSel, imgSel, screen]);
}

// The element box is drawn at the recorded box, scaled to the frame as shown.
function boxAt(got, box, what) {
  assert.ok(got, `${what}: no element box drawn over a loaded frame`);
  assert.deepEqual(got.attrs, box, `${what}: the rect's x, y, width, height are not the recorded box`);
  const want = [box[0] * got.scale[0], box[1] * got.scale[1], box[2] * got.scale[0], box[3] * got.scale[1]];
  assert.ok(got.shown.every((v, i) => Math.abs(v - want[i]) <= 1.5),
    `${what}: drawn at ${got.shown.map((v) => v.toFixed(1))} (CSS px from the frame's corner), the box scaled is ${want.map((v) => v.toFixed(1))}`);
}

// Waits until the player's overlay over the screen before shows an action
// of this type (the step's frames are drawn once they are fetched).
async function overlayOf(page, type) {
  await page.waitForSelector(`#ov-before g.overlay[data-action="${type}"]`, { timeout: 5000 });
}

async function playerStep(page) {
  return +(await page.getAttribute('body', 'data-step'));
}

async function waitStep(page, n) {
  await page.waitForSelector(`body[data-step="${n}"]`, { timeout: 5000 });
  // This step's frames are in place (before, the images and their hashes
  // can still be the last step's: a CDP command's after-frame was read as
  // the step before's), and both (when the step has them) have loaded.
  await page.waitForSelector(`body[data-frames-shown="${n}"]`, { timeout: 5000 });
  await page.waitForFunction(() => ['before', 'after'].every((w) => {
    const img = document.querySelector(`#img-${w}`);
    return img.hidden || (img.complete && img.naturalWidth > 0);
  }), null, { timeout: 5000 });
}

// A raw CDP client of a session's endpoint (docs/cdp.md) with the agent's
// token: send(method, params, sessionId) resolves with the answer.
async function cdpClient(url) {
  const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${TOKENS.agent}` } });
  await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
  const waiting = new Map();
  let next = 1;
  ws.on('message', (d) => {
    const m = JSON.parse(d.toString());
    if (waiting.has(m.id)) { waiting.get(m.id)(m); waiting.delete(m.id); }
  });
  const send = (method, params, sessionId) => new Promise((resolve) => {
    const id = next++;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params, sessionId }));
  });
  return { send, close: () => ws.close() };
}

// The cdp_frame after CDP command ev (a cdp event of evs) that shows the
// screen it left (docs/recordings.md), or undefined.
function cdpFrameOf(evs, ev) {
  return evs.find((f) => f.type === 'cdp_frame' && f.seq > ev.seq && Number.isInteger(f.last_req) && f.last_req >= ev.req && f.first_req <= ev.req);
}

/* ---- the checks ----------------------------------------------------------- */

async function main() {
  if (!bin || !fs.existsSync(bin)) { say(`usage: node web.test.js DESKGATE_BINARY (got ${bin})`); process.exit(2); }
  if (!fs.existsSync(CHROMIUM)) { say(`FAIL: ${CHROMIUM} is missing: apt-get install chromium`); process.exit(2); }
  let chromium;
  try {
    ({ chromium } = require('playwright-core'));
  } catch (e) {
    say(`FAIL: playwright-core is not installed (npm ci in ${__dirname}): ${e.message}`);
    process.exit(2);
  }

  site = await startSite();
  const host = `shop.test:${site.address().port}`;
  gw = new Gateway(bin, {
    policies: policies(host),
    resolve: [`${host}=127.0.0.1:${site.address().port}`],
    limits: { approval_seconds: 90 },
  });
  await gw.start();
  say(`gateway on ${gw.base} (${gw.dir}), site ${host}`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
  say(`chromium ${browser.version()}`);
  const ctxOpts = { viewport: VIEWPORT, deviceScaleFactor: 1, baseURL: gw.base, colorScheme: 'light' };

  const { steps: script, S } = scriptA(host);
  const N = script.length;
  const flaggedSteps = script.filter((x) => x.v !== 'allow').map((x) => x.n);
  const clickSteps = script.filter((x) => x.a.type === 'click').map((x) => x.n);
  let A = null;          // the recorded (and watched) browser session
  let R = null;          // a short xterm session with redacted text
  let viewerCtx = null, P1 = null, P2 = null;

  check('pages are served from the binary with security headers; nothing else is', async () => {
    for (const p of ['/', '/index.html', '/live.html', '/player.html', '/approvals.html', '/blast.html', '/style.css', '/common.js', '/player.js']) {
      const r = await gw.http('GET', p);
      assert.equal(r.status, 200, `GET ${p}`);
      const csp = r.headers.get('content-security-policy') || '';
      assert.match(csp, /default-src 'self'/, `${p}: CSP`);
      assert.match(csp, /img-src 'self' blob:/, `${p}: CSP img-src`);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, `${p}: CSP allows inline code`);
      assert.equal(r.headers.get('x-content-type-options'), 'nosniff', p);
      assert.equal(r.headers.get('x-frame-options'), 'DENY', p);
      assert.equal(r.headers.get('referrer-policy'), 'no-referrer', p);
    }
    assert.match((await gw.http('GET', '/')).headers.get('content-type'), /^text\/html/);
    assert.match((await gw.http('GET', '/style.css')).headers.get('content-type'), /^text\/css/);
    assert.match((await gw.http('GET', '/common.js')).headers.get('content-type'), /^text\/javascript/);
    // No inline script anywhere: every <script> has a src.
    for (const p of ['/', '/live.html', '/player.html', '/approvals.html', '/blast.html']) {
      const html = (await gw.http('GET', p)).text;
      assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/i, `${p} has an inline script`);
      assert.doesNotMatch(html, /\son[a-z]+=/i, `${p} has an inline handler`);
    }
    // Only the embedded names: anything else is the API, which wants a token.
    for (const p of ['/nope.html', '/web/index.html', '/../CMakeLists.txt', '/%2e%2e/README.md', '/embed.cmake', '/index.html/']) {
      const r = await gw.http('GET', p);
      assert.notEqual(r.status, 200, `GET ${p} answered 200`);
      assert.doesNotMatch(r.text, /<html/i, `GET ${p} served a page`);
    }
    assert.equal((await gw.http('POST', '/', undefined, '{}')).status, 401, 'POST / is not a page');
  });

  check('a page without a token gets nothing', async () => {
    const ctx = await browser.newContext(ctxOpts);
    const page = await newPage(ctx, 'no-token');
    current = page;
    const api = [];
    page.on('response', (r) => { if (new URL(r.url()).pathname.startsWith('/v1/')) api.push(`${r.status()} ${r.url()}`); });
    for (const p of ['/', '/live.html?id=0123abcd', '/player.html?id=0123abcd', '/approvals.html', '/blast.html']) {
      await page.goto(p);
      await page.waitForSelector('#signin-form', { state: 'visible' });
      assert.equal(await page.isHidden('#app'), true, `${p}: the page's content shows without a token`);
      assert.equal(await page.locator('#app *:visible').count(), 0, `${p}: the page shows content without a token`);
    }
    assert.deepEqual(api.filter((x) => x.startsWith('2')), [], 'the API answered a page without a token');
    // The API itself: nothing without a token, from the page's origin.
    const statuses = await page.evaluate(async () => {
      const out = [];
      for (const p of ['/v1/sessions', '/v1/recordings', '/v1/approvals', '/v1/policies', '/metrics']) out.push((await fetch(p)).status);
      const ws = await new Promise((res) => {
        const s = new WebSocket(`ws://${location.host}/v1/sessions/x/watch`, ['deskgate.v1']);
        s.onopen = () => res('open');
        s.onclose = () => res('closed');
      });
      return [...out, ws];
    });
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 'closed']);
    await page.goto('/');
    await page.waitForSelector('#signin-form');
    await shot(page, 'signin');
    await ctx.close();
  });

  check('sign-in refuses a wrong token and an agent token, keeps a viewer token in sessionStorage', async () => {
    viewerCtx = await browser.newContext(ctxOpts);
    viewerCtx.on('request', (r) => requestURLs.push(r.url()));
    P1 = await newPage(viewerCtx, 'viewer');
    current = P1;
    await P1.goto('/');
    await P1.fill('#token', 'not-a-token-not-a-token-not-a-token');
    await P1.click('#signin-form button[type=submit]');
    await P1.waitForFunction(() => /not valid/.test(document.querySelector('#signin-error').textContent));
    await P1.fill('#token', TOKENS.agent);
    await P1.click('#signin-form button[type=submit]');
    await P1.waitForFunction(() => /agent token/.test(document.querySelector('#signin-error').textContent));
    assert.equal(await P1.isHidden('#app'), true);
    await signIn(P1, TOKENS.viewer);
    assert.equal(await P1.evaluate(() => sessionStorage.getItem('deskgate.token')), TOKENS.viewer);
    assert.equal(await P1.evaluate(() => localStorage.length + document.cookie.length), 0, 'the token leaked into localStorage or cookies');
  });

  check('the sessions page shows a live session; Watch live opens its live view', async () => {
    A = await Agent.create(gw, { profile: 'browser' });
    await P1.goto('/');
    await P1.waitForSelector(`#live-table tr[data-id="${A.id}"]`, { timeout: 10000 });
    const row = P1.locator(`#live-table tr[data-id="${A.id}"]`);
    const cells = await row.locator('td').allInnerTexts();
    assert.equal(cells[1], 'browser');
    assert.equal(cells[2], 'env-agent');
    assert.equal(cells[3], 'default');
    assert.match(cells[8], /live/i);
    await row.locator('a', { hasText: 'Watch live' }).click();
    await P1.waitForURL(/live\.html\?id=/);
    await P1.waitForSelector('body[data-ready="1"]');
    await P1.waitForSelector('body[data-state="live"]', { timeout: 10000 });
    // No screen before the agent's first action: the page says it waits.
    await P1.waitForSelector('#noframe:visible');
  }, 60000);

  check('the live view updates while the test agent acts, with verdicts', async () => {
    current = P1;
    const frames0 = +(await P1.getAttribute('body', 'data-frames')) || 0;
    await runSteps(A, script, 0, S.typeSearch);
    // New frames arrived over the observer socket and the log has the steps.
    await P1.waitForFunction((n) => +document.body.dataset.frames > n, frames0, { timeout: 10000 });
    await P1.waitForFunction(() => [...document.querySelectorAll('#log li[data-kind=action] .desc')].some((e) => e.textContent === 'type “desk lamp”'), null, { timeout: 10000 });
    await P1.waitForFunction(() => /Acme shop/.test(document.querySelector('#meta').textContent), null, { timeout: 10000 });
    await runSteps(A, script, S.typeSearch, S.admin);
    // Refused actions reach the page too, with their verdict.
    await P1.waitForFunction((n) => document.querySelectorAll('#log li[data-kind=action]').length === n, S.admin, { timeout: 10000 });
    const denied = await P1.locator('#log li[data-kind=action][data-verdict=deny] .desc').allInnerTexts();
    assert.deepEqual(denied.sort(), ['click at (640, 62)', `go to http://${host}/admin/users`, 'press ctrl+alt+Delete'].sort());
    const why = await P1.locator('#log li[data-verdict=deny] .why').allInnerTexts();
    assert.ok(why.some((w) => w.includes('regions[browser-chrome]')), `no rule shown: ${why}`);
    // The live overlay shows the last action.
    assert.equal(await P1.getAttribute('#overlay g.overlay', 'data-action'), 'navigate');
  }, 90000);

  check('the live view is read-only: clicks, keys and observer messages do not reach the session', async () => {
    current = P1;
    const before = (await gw.api('GET', `/v1/sessions/${A.id}`, TOKENS.viewer)).actions;
    const evBefore = (await gw.events(A.id)).filter((e) => e.type === 'action').length;
    const box = await P1.locator('#screen').boundingBox();
    await P1.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await P1.mouse.dblclick(box.x + 100, box.y + 100);
    await P1.mouse.wheel(0, 300);
    await P1.keyboard.type('rm -rf / # typed into the live view');
    await P1.keyboard.press('Enter');
    await P1.keyboard.press('Control+L');
    // Even a script in the page speaking on an observer socket is ignored.
    const sent = await P1.evaluate(async (id) => {
      const t = sessionStorage.getItem('deskgate.token');
      const ws = new WebSocket(`ws://${location.host}/v1/sessions/${id}/watch`, ['deskgate.v1', 'bearer.' + t]);
      await new Promise((res, rej) => { ws.onopen = res; ws.onerror = rej; });
      ws.send(JSON.stringify({ type: 'click', x: 200, y: 300 }));
      ws.send(JSON.stringify({ type: 'type', text: 'observer was here' }));
      ws.send(JSON.stringify({ type: 'tool_use', id: 'toolu_x', name: 'computer', input: { action: 'key', text: 'Return' } }));
      await new Promise((r) => setTimeout(r, 800));
      ws.close();
      return true;
    }, A.id);
    assert.ok(sent);
    await sleep(700);
    const after = (await gw.api('GET', `/v1/sessions/${A.id}`, TOKENS.viewer)).actions;
    const evAfter = (await gw.events(A.id)).filter((e) => e.type === 'action').length;
    assert.equal(after, before, 'the session performed an action the viewer page sent');
    assert.equal(evAfter, evBefore, 'the recording has an action the viewer page sent');
  });

  check('the live desktop (noVNC) shows what the agent sees and takes no input', async () => {
    current = P1;
    // A session of its own: what this check does must not show in A's recording.
    const V = await Agent.create(gw, { profile: 'xterm' });
    await V.act({ type: 'type', text: 'echo seen in the live desktop\n' });
    await P1.goto(`/live.html?id=${V.id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    await P1.waitForSelector('body[data-vnc="connected"]', { timeout: 15000 });
    // The noVNC canvas against one of the agent's screenshots, pixel by
    // pixel: the mean difference per channel, and how many pixels differ
    // by more than 8 in a channel (a few typed characters move a thousand
    // pixels but not the mean over a whole screen).
    const compare = (png) => P1.evaluate(async (b64) => {
      const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
      const img = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
      const live = document.querySelector('#vnc canvas');
      if (!live || live.width !== img.width || live.height !== img.height) return { size: live ? [live.width, live.height] : null };
      const c = document.createElement('canvas');
      c.width = img.width; c.height = img.height;
      const x = c.getContext('2d');
      x.drawImage(img, 0, 0);
      const a = x.getImageData(0, 0, c.width, c.height).data;
      const b = live.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let sum = 0, changed = 0;
      for (let i = 0; i < a.length; i += 4) {
        const d = [0, 1, 2].map((k) => Math.abs(a[i + k] - b[i + k]));
        sum += d[0] + d[1] + d[2];
        if (Math.max(...d) > 8) changed++;
      }
      return { size: [c.width, c.height], diff: sum / (a.length / 4 * 3), changed };
    }, png.toString('base64'));
    // The desktop before any of the viewer's input: an xterm, idle after
    // the echo (no blinking cursor, no clock), so nothing on it moves by
    // itself, and what the checks below see is the desktop as it was.
    let before = null;
    const got = await waitFor('the live desktop to match the agent\'s screenshot', async () => {
      before = await V.screenshot();
      const r = await compare(before);
      return r.diff !== undefined && r.changed === 0 ? r : null;
    }, 20000, 300);
    assert.deepEqual(got.size, [1280, 800]);
    say(`    the live desktop vs the agent's screenshot: mean difference ${got.diff.toFixed(2)} per channel`);
    await shot(P1, 'live-desktop');
    // Clicks and keys in the live desktop reach nothing: no action, no
    // recorded action, the terminal as it was BEFORE them (against a fresh
    // screenshot only, typed text that reached the desktop would be on
    // both sides).
    const actions = (await gw.api('GET', `/v1/sessions/${V.id}`, TOKENS.viewer)).actions;
    const evBefore = (await gw.events(V.id)).filter((e) => e.type === 'action').length;
    // In view first: a click outside the page's viewport reaches no element
    // at all, and the check would prove nothing.
    await P1.locator('#vnc canvas').scrollIntoViewIfNeeded();
    const box = await P1.locator('#vnc canvas').boundingBox();
    const hit = await P1.evaluate(([x, y]) => { const e = document.elementFromPoint(x, y); return e ? e.matches('#vnc canvas') : false; },
      [box.x + box.width / 2, box.y + box.height / 2]);
    assert.ok(hit, 'the clicks would not land on the live desktop\'s canvas');
    await P1.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
    await P1.mouse.click(box.x + 20, box.y + 20, { button: 'middle' });
    await P1.keyboard.type('typed into the live desktop');
    await P1.keyboard.press('Enter');
    await P1.mouse.wheel(0, 400);
    await sleep(1500);
    assert.equal((await gw.api('GET', `/v1/sessions/${V.id}`, TOKENS.viewer)).actions, actions,
      'the session performed an action the live desktop sent');
    assert.equal((await gw.events(V.id)).filter((e) => e.type === 'action').length, evBefore,
      'the recording has an action the live desktop sent');
    const shown = await compare(before);
    assert.ok(shown.changed === 0, `the live desktop changed under its own input: ${shown.changed} pixels differ from before it (mean difference ${shown.diff})`);
    const [was, now] = [before, await V.screenshot()].map((png) => PNG.sync.read(png).data);
    let moved = 0;
    for (let i = 0; i < was.length; i += 4) if (was[i] !== now[i] || was[i + 1] !== now[i + 1] || was[i + 2] !== now[i + 2]) moved++;
    assert.ok(was.length === now.length && moved === 0, `the desktop changed under the live desktop's input: the agent's screenshot has ${moved} pixels other than before it`);
    // Its viewer is in the recording.
    const viewers = (await gw.events(V.id)).filter((e) => e.type === 'vnc_viewer' && e.state === 'open');
    assert.ok(viewers.some((e) => e.by === 'env-viewer'), `no live viewer recorded: ${JSON.stringify(viewers)}`);
    await V.end();
    await P1.goto(`/live.html?id=${A.id}`);
    await P1.waitForSelector('body[data-state="live"]', { timeout: 10000 });
  }, 90000);

  check('a viewer token cannot create a session or send an action', async () => {
    current = P1;
    const r = await P1.evaluate(async (id) => {
      const t = sessionStorage.getItem('deskgate.token');
      const h = { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' };
      const create = (await fetch('/v1/sessions', { method: 'POST', headers: h, body: '{"profile":"xterm"}' })).status;
      const del = (await fetch(`/v1/sessions/${id}`, { method: 'DELETE', headers: h })).status;
      const agent = await new Promise((res) => {
        const ws = new WebSocket(`ws://${location.host}/v1/sessions/${id}/ws`, ['deskgate.v1', 'bearer.' + t]);
        ws.onopen = () => { ws.send(JSON.stringify({ type: 'click', x: 10, y: 10 })); res('open'); };
        ws.onclose = () => res('refused');
      });
      return { create, del, agent };
    }, A.id);
    assert.equal(r.create, 403, 'POST /v1/sessions with a viewer token');
    assert.equal(r.del, 403, 'DELETE /v1/sessions/{id} with a viewer token');
    assert.equal(r.agent, 'refused', "a viewer token opened the session's agent socket");
    const s = await gw.api('GET', '/v1/sessions', TOKENS.viewer);
    assert.equal(s.sessions.length, 1, 'a session was created with a viewer token');
    assert.equal(s.sessions[0].id, A.id);
  });

  check('approving in the Approvals page unblocks the waiting action, recorded with who approved', async () => {
    P2 = await newPage(viewerCtx, 'approvals');
    current = P2;
    await P2.goto('/approvals.html');
    await signIn(P2, TOKENS.alice);
    await P2.waitForSelector('#none');
    const pending = await A.sendAsk(script[S.execOk - 1].a);
    assert.equal(pending.type, 'pending', JSON.stringify(pending));
    const card = P2.locator(`.approval[data-id="${pending.approval}"]`);
    await card.waitFor({ timeout: 5000 });
    await P2.waitForSelector(`.approval[data-id="${pending.approval}"][data-frame-loaded="1"]`, { timeout: 5000 });
    assert.equal(await card.locator('.wants').innerText(), "run echo 'hello from the jail'");
    assert.equal(await card.locator('.rule').innerText(), 'actions.ask[0]');
    assert.deepEqual(JSON.parse(await card.locator('pre.exact').innerText()), { type: 'exec', argv: ['echo', 'hello from the jail'], stdin: '' });
    assert.match(await card.locator('.time-text').innerText(), /^\d+ s left/);
    assert.match(await card.locator('.kv').innerText(), /Acme shop: orders/);
    // The live view shows the action waiting.
    await P1.waitForSelector('#log li[data-kind=pending]', { timeout: 5000 });
    await P1.waitForSelector('#overlay g.overlay[data-action=exec][data-verdict=ask]', { timeout: 5000 });
    await P1.bringToFront();
    await shot(P1, 'live');
    await P2.bringToFront();
    await shot(P2, 'approvals');
    // The agent is still waiting.
    let answered = false;
    const result = A.result(15000).then((r) => { answered = true; return r; });
    await sleep(300);
    assert.equal(answered, false, 'the action ran before anyone approved it');
    await card.locator('button[data-decision=approve]').click();
    const r = await result;
    assert.equal(r.ok, true, JSON.stringify(r));
    assert.equal(r.approved_by, 'alice');
    assert.equal(r.exec.stdout, 'hello from the jail\n');
    await P2.waitForFunction((id) => /Approved by alice/.test(document.querySelector(`.approval[data-id="${id}"] .decision-status`).textContent), pending.approval);
    const ev = (await gw.events(A.id)).filter((e) => e.type === 'approval' && e.id === pending.approval);
    assert.deepEqual(ev.map((e) => [e.state, e.by]), [['pending', undefined], ['approved', 'alice']]);
  });

  check('denying in the Approvals page refuses the waiting action', async () => {
    current = P2;
    const pending = await A.sendAsk(script[S.execNo - 1].a);
    assert.equal(pending.type, 'pending');
    const card = P2.locator(`.approval[data-id="${pending.approval}"]`);
    await card.waitFor({ timeout: 5000 });
    assert.equal(await card.locator('.wants').innerText(), 'run cat /etc/shadow');
    await card.locator('button[data-decision=deny]').click();
    const r = await A.result(15000);
    assert.equal(r.ok, false);
    assert.equal(r.verdict, 'deny');
    assert.equal(r.rule, 'approval');
    assert.equal(r.reason, 'denied by alice');
    await P2.waitForFunction((id) => /Denied by alice/.test(document.querySelector(`.approval[data-id="${id}"] .decision-status`).textContent), pending.approval);
    assert.equal(await P2.locator('#done tr').count(), 2);
    // Answered cards leave the queue.
    await P2.waitForSelector('#none', { timeout: 10000 });
    const last = await A.act(script[S.secret - 1].a);
    assert.equal(last.verdict, 'deny');
    await P2.close();
    P2 = null;
  }, 60000);

  check('the live view sees the session end; the sessions page lists its sealed recording', async () => {
    current = P1;
    await P1.waitForFunction((n) => document.querySelectorAll('#log li[data-kind=action]').length === n, N, { timeout: 10000 });
    await A.end();
    await P1.waitForSelector('body[data-state="ended"]', { timeout: 10000 });
    assert.match(await text(P1, '#ended-banner'), /ended/);
    await waitFor('the recording to be sealed', async () => (await gw.api('GET', `/v1/recordings/${A.id}`, TOKENS.viewer)).verify.status === 'sealed');
    // A second, short session (xterm, typed text redacted) runs while the
    // list is shown: live and recorded side by side.
    R = await Agent.create(gw, { profile: 'xterm', policy: 'redacted' });
    for (const a of [{ type: 'click', x: 400, y: 300 }, { type: 'type', text: 'echo my secret words' }, { type: 'key', keys: 'Return' }, { type: 'click', x: 600, y: 20 }]) await R.act(a);
    await P1.goto('/');
    await P1.waitForSelector(`#ended-table tr[data-id="${A.id}"]`);
    await P1.waitForSelector(`#live-table tr[data-id="${R.id}"]`);
    const cells = await P1.locator(`#ended-table tr[data-id="${A.id}"] td`).allInnerTexts();
    assert.equal(cells[1], 'browser');
    assert.equal(cells[2], 'env-agent');
    assert.equal(cells[3], 'default');
    assert.equal(cells[6], String(N), 'actions');
    assert.match(cells[7], /^5 · 2 asked$/, 'denied');
    assert.match(cells[8], /sealed/i);
    const live = await P1.locator(`#live-table tr[data-id="${R.id}"] td`).allInnerTexts();
    assert.equal(live[1], 'xterm');
    assert.equal(live[3], 'redacted');
    assert.match(live[7], /^1/);
    await shot(P1, 'sessions');
    await R.end();
  }, 60000);

  check('the player loads the recording: verify result, steps, frames', async () => {
    current = P1;
    await P1.goto(`/player.html?id=${A.id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.getAttribute('#verify-banner', 'data-status'), 'sealed');
    assert.match(await text(P1, '#verify-banner'), /Sealed and verified/);
    assert.equal(await P1.locator('#steps li').count(), N);
    await waitStep(P1, 1);
    assert.equal(await text(P1, '#step-title'), `go to http://${host}/`);
    assert.match(await text(P1, '#meta'), new RegExp(`${N} \\(5 denied, 2 asked\\)`));
    const verdicts = await P1.locator('#steps li').evaluateAll((l) => l.map((x) => x.dataset.verdict));
    assert.deepEqual(verdicts, script.map((x) => x.v));
  });

  check('the player downloads the recording as a WebM video', async () => {
    current = P1;
    assert.equal(await text(P1, '#video-mp4'), 'Download video (MP4)');
    const [dl] = await Promise.all([P1.waitForEvent('download', { timeout: 120000 }), P1.click('#video-webm')]);
    assert.equal(dl.suggestedFilename(), `deskgate-${A.id}.webm`);
    const video = fs.readFileSync(await dl.path());
    assert.ok(video.length > 1000, `${video.length} bytes`);
    assert.equal(video.subarray(0, 4).toString('hex'), '1a45dfa3', 'not a WebM (EBML) file');
    await P1.waitForSelector('#video-status[data-state="done"]');
    assert.match(await text(P1, '#video-status'), /Video saved/);
  }, 150000);

  check('the player steps forward and back with the keyboard and draws each action where it happened', async () => {
    current = P1;
    await P1.locator('body').click({ position: { x: 5, y: 300 } });
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 2);
    assert.equal(await text(P1, '#step-title'), 'click at (180, 178)');
    near(await overlayPoint(P1, 'before'), 180, 178, 'click, before');
    near(await overlayPoint(P1, 'after'), 180, 178, 'click, after');
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 3);
    assert.match(await P1.locator('#ov-before .ov-tag text').first().textContent(), /typed “desk lamp”/);
    await P1.keyboard.press('ArrowLeft');
    await waitStep(P1, 2);
    await P1.keyboard.press('ArrowRight');
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 4);
    // A refused click: drawn where it was aimed, the after frame not taken.
    assert.equal(await P1.getAttribute('body', 'data-verdict'), 'deny');
    near(await overlayPoint(P1, 'before'), 640, 62, 'denied click');
    assert.match(await text(P1, '#ph-after'), /Not performed/);
    assert.match(await text(P1, '#step-reason'), /regions\[browser-chrome\]/);
    assert.match(await text(P1, '#step'), new RegExp(`Acme shop: orders · http://${host.replace('.', '\\.')}/`));
    await P1.keyboard.press('ArrowRight');
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, S.waitSearch);
    // The page it happened on, or the one it led to (the search page was
    // loading: whether the wait was decided on it depends on timing).
    assert.match(await text(P1, '#step'), /Search: desk lamp · http:\/\/shop\.test:\d+\/search\?q=desk\+lamp/);
    // The scroll: its mark and an arrow pointing down.
    await P1.keyboard.press('End');
    await waitStep(P1, N);
    await P1.keyboard.press('Home');
    await waitStep(P1, 1);
    await P1.locator(`#steps li[data-n="${S.scroll}"] button`).click();
    await waitStep(P1, S.scroll);
    near(await overlayPoint(P1, 'before'), 640, 500, 'scroll');
    const arrow = await P1.locator('#ov-before line.ov-scroll').evaluate((l) => [+l.getAttribute('y1'), +l.getAttribute('y2'), +l.getAttribute('x1'), +l.getAttribute('x2')]);
    assert.ok(arrow[1] > arrow[0] && arrow[2] === arrow[3], `the scroll arrow does not point down: ${arrow}`);
    // The drag: its path as recorded, drawn over the frame.
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, S.drag);
    assert.equal(await P1.getAttribute('#ov-before .ov-path', 'points'), '40,300 400,320 620,340');
    const box = await P1.evaluate(() => {
      const ib = document.querySelector('#img-before').getBoundingClientRect();
      const pb = document.querySelector('#ov-before .ov-path').getBoundingClientRect();
      return [(pb.left - ib.left) / ib.width * 1280, (pb.right - ib.left) / ib.width * 1280];
    });
    assert.ok(Math.abs(box[0] - 38) < 6 && Math.abs(box[1] - 622) < 6, `drag path drawn from x=${box[0]} to x=${box[1]}`);
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, S.chord);
    assert.match(await P1.locator('#ov-before .ov-tag text').first().textContent(), /keys ctrl\+alt\+Delete/);
    // URL and title of the steps on the order page.
    await P1.locator(`#steps li[data-n="${S.waitOrder}"] button`).click();
    await waitStep(P1, S.waitOrder);
    assert.match(await text(P1, '#step'), /Order #1043 · http:\/\/shop\.test:\d+\/orders\/1043/);
    await P1.locator(`#steps li[data-n="${S.link}"] button`).click();
    await waitStep(P1, S.link);
    near(await overlayPoint(P1, 'before'), 57, 400, 'click on a link');
    await shot(P1, 'player', { fullPage: true });
  });

  check('the player jumps to the next denied or asked action, and plays', async () => {
    current = P1;
    await P1.keyboard.press('Home');
    await waitStep(P1, 1);
    const seen = [];
    for (let i = 0; i < 6; i++) {
      await P1.keyboard.press('n');
      await P1.waitForFunction((prev) => document.body.dataset.step !== String(prev), seen[seen.length - 1] || 1);
      seen.push(await playerStep(P1));
    }
    assert.deepEqual(seen, flaggedSteps);
    await P1.keyboard.press('N');
    await waitStep(P1, S.execNo);
    assert.match(await text(P1, '#step'), /denied by alice/);
    await P1.keyboard.press('N');
    await waitStep(P1, S.execOk);
    assert.match(await text(P1, '#step'), /approved by alice/);
    assert.match(await text(P1, '#step'), /hello from the jail/);
    // Play at 4x, then pause.
    await P1.keyboard.press('Home');
    await P1.selectOption('#speed', '4');
    await P1.click('#play');
    await P1.waitForFunction(() => +document.body.dataset.step >= 3, null, { timeout: 5000 });
    await P1.click('#play');
    const at = await playerStep(P1);
    await sleep(700);
    assert.equal(await playerStep(P1), at, 'pause did not stop playback');
    await P1.selectOption('#speed', '1');
  });

  check('the player filters by verdict and action type', async () => {
    current = P1;
    await P1.uncheck('input[data-filter=verdict][value=allow]');
    let rows = await P1.locator('#steps li').evaluateAll((l) => l.map((x) => [+x.dataset.n, x.dataset.verdict]));
    assert.deepEqual(rows, script.filter((x) => x.v !== 'allow').map((x) => [x.n, x.v]));
    assert.match(await text(P1, '#shown'), new RegExp(`6 of ${N} steps shown`));
    assert.notEqual(await P1.getAttribute('body', 'data-verdict'), 'allow');
    // Stepping stays within the filter.
    await P1.keyboard.press('Home');
    await waitStep(P1, flaggedSteps[0]);
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, flaggedSteps[1]);
    assert.equal(await P1.getAttribute('#scrubber', 'max'), '6');
    await P1.uncheck('input[data-filter=verdict][value=deny]');
    rows = await P1.locator('#steps li').evaluateAll((l) => l.map((x) => +x.dataset.n));
    assert.deepEqual(rows, [S.execOk]);
    await P1.check('input[data-filter=verdict][value=deny]');
    await P1.check('input[data-filter=verdict][value=allow]');
    // By action type: clicks only.
    const others = ['back', 'drag', 'exec', 'key', 'navigate', 'scroll', 'type', 'wait'];
    for (const t of others) await P1.uncheck(`input[data-filter=type][value=${t}]`);
    rows = await P1.locator('#steps li').evaluateAll((l) => l.map((x) => [+x.dataset.n, x.dataset.type]));
    assert.deepEqual(rows, clickSteps.map((n) => [n, 'click']));
    // The scrubber moves through what is shown.
    await P1.locator('#scrubber').fill('3');
    await waitStep(P1, clickSteps[2]);
    for (const t of others) await P1.check(`input[data-filter=type][value=${t}]`);
    assert.equal(await P1.locator('#steps li').count(), N);
  });

  check('the player shows redacted text as its length; warns about unsealed and broken recordings', async () => {
    current = P1;
    await waitFor('the xterm recording to be sealed', async () => (await gw.api('GET', `/v1/recordings/${R.id}`, TOKENS.viewer)).verify.status === 'sealed');
    await P1.goto(`/player.html?id=${R.id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    await P1.locator('#steps li[data-n="2"] button').click();
    await waitStep(P1, 2);
    assert.equal(await text(P1, '#step-title'), 'type 20 characters (redacted)');
    assert.match(await P1.locator('#ov-before .ov-tag text').first().textContent(), /typed 20 characters \(redacted\)/);
    assert.doesNotMatch(await P1.content(), /secret words/);
    // Cut off the seal: the recording may be incomplete.
    const evFile = path.join(gw.recordings, R.id, 'events.jsonl');
    const lines = fs.readFileSync(evFile, 'utf8').split('\n').filter(Boolean);
    assert.equal(JSON.parse(lines[lines.length - 1]).type, 'seal');
    fs.writeFileSync(evFile, lines.slice(0, -1).join('\n') + '\n');
    await P1.reload();
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.getAttribute('#verify-banner', 'data-status'), 'unsealed');
    assert.match(await text(P1, '#verify-banner'), /Not sealed: this recording may be incomplete/);
    assert.match(await P1.getAttribute('#verify-banner', 'class'), /banner-danger/);
    // Change what was typed: the chain breaks at that event.
    const k = lines.findIndex((l) => JSON.parse(l).type === 'action' && JSON.parse(l).action.type === 'type');
    const seq = JSON.parse(lines[k]).seq;
    lines[k] = lines[k].replace('"length":20', '"length":21');
    fs.writeFileSync(evFile, lines.join('\n') + '\n');
    await P1.reload();
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.getAttribute('#verify-banner', 'data-status'), 'bad');
    assert.match(await text(P1, '#verify-banner'), new RegExp(`Broken recording[\\s\\S]*seq ${seq}`));
    await P1.locator('#steps li[data-n="2"] button').click();
    await waitStep(P1, 2);
    assert.match(await text(P1, '#step'), /Untrusted step/);
    assert.equal(await P1.locator('#steps li.untrusted').count(), 3);
    await shot(P1, 'player-broken');
    // The sessions page flags it too.
    await P1.goto('/');
    await P1.waitForSelector(`#ended-table tr[data-id="${R.id}"]`);
    assert.match(await P1.locator(`#ended-table tr[data-id="${R.id}"] td`).nth(8).innerText(), /broken/i);
  });

  // A recording with what the gateway records for browser-use agents acting
  // on elements (docs/recordings.md): "element", "member" and "toolset",
  // "browser_state". Written here, hash-chained and sealed with the
  // gateway's key, on real frames of the recorded session A.
  const HOSTILE = '<img src=x onerror=alert(1)>';
  const TAB1 = '1A2B3C4D5E6F7A8B', TAB2 = '9F8E7D6C5B4A3921';
  const elementSteps = () => {
    const shop = `http://${host}/`;
    const tab1 = { tab_id: TAB1, title: 'Acme shop: orders', url: shop, active: true };
    const tab2 = { tab_id: TAB2, title: 'New Tab', url: 'about:blank', active: true };
    const off = (t) => ({ ...t, active: false });
    const steps = [
      { a: { type: 'click', ref: 'ref_7', x: 700, y: 300, button: 'left', count: 1, modifiers: [] }, v: 'allow', member: 'left_click',
        element: { ref: 'ref_7', role: 'button', name: 'Add to cart', box: [640, 280, 120, 40], point: [700, 300] }, tabs: [tab1],
        d: 'click ref_7 (button “Add to cart”) at (700, 300)' },
      { a: { type: 'form_input', ref: 'ref_12', value: 'a@b.c', x: 350, y: 168 }, v: 'allow', member: 'form_input',
        element: { ref: 'ref_12', role: 'textbox', name: 'Email', box: [200, 150, 300, 36], point: [350, 168] }, tabs: [tab1],
        d: 'set ref_12 (textbox “Email”) to “a@b.c”' },
      { a: { type: 'file_upload', ref: 'ref_3', paths: ['/home/agent/a.pdf', '/home/agent/b.pdf'], x: 200, y: 525 }, v: 'deny', member: 'file_upload',
        element: { ref: 'ref_3', role: 'button', name: HOSTILE, box: [100, 500, 200, 50], point: [200, 525] },
        d: `upload 2 files into ref_3 (button “${HOSTILE}”)` },
      { a: { type: 'javascript', code: 'document.querySelector("#q").value.length;' }, v: 'deny', member: 'javascript_tool',
        d: 'run JavaScript (42 characters)' },
      { a: { type: 'new_tab' }, v: 'allow', member: 'tabs_create', tabs: [off(tab1), tab2], changes: [{ type: 'tab_opened', tab_id: TAB2 }],
        d: 'open a new tab' },
      { a: { type: 'switch_tab', tab: TAB1 }, v: 'allow', tabs: [tab1, off(tab2)], d: 'switch to tab 1A2B…' },
      { a: { type: 'close_tab', tab: TAB2 }, v: 'allow', tabs: [tab1], changes: [{ type: 'tab_closed', tab_id: TAB2 }], d: 'close tab 9F8E…' },
      { a: { type: 'read_console' }, v: 'allow', member: 'read_console_messages', d: 'read the console' },
      { a: { type: 'read_network' }, v: 'allow', member: 'read_network_requests', d: 'read the network requests' },
      { a: { type: 'list_tabs' }, v: 'allow', member: 'tabs_context', tabs: [tab1], d: 'list the open tabs' },
      { a: { type: 'scroll_to', ref: 'ref_20', x: 950, y: 772 }, v: 'allow', member: 'scroll_to',
        element: { ref: 'ref_20', role: 'link', name: 'Next page', box: [900, 760, 100, 24], point: [950, 772] },
        d: 'scroll ref_20 (link “Next page”) into view' },
      { a: { type: 'screenshot', region: [0, 88, 1280, 800] }, v: 'allow', member: 'screenshot', d: 'take a screenshot of (0, 88, 1280, 800)' },
      { a: { type: 'move', ref: 'ref_4', x: 60, y: 120, modifiers: [] }, v: 'allow', member: 'hover',
        element: { ref: 'ref_4', role: 'menuitem', name: 'Settings', box: [20, 105, 80, 30], point: [60, 120] },
        d: 'move the pointer to ref_4 (menuitem “Settings”) at (60, 120)' },
    ];
    steps.forEach((x, i) => { x.n = i + 1; });
    return steps;
  };
  let E = null; // {id, steps}

  check('the player shows the element an action was aimed at, the tool and the tabs; element names are text', async () => {
    current = P1;
    const evA = await gw.events(A.id);
    const src = evA.find((e) => e.type === 'action' && e.action.type === 'click' && e.action.x === 57);
    assert.ok(src && src.frame_before && src.frame_after, 'no frames to borrow from session A');
    const framesDir = path.join(gw.recordings, A.id, 'frames');
    const steps = elementSteps();
    const id = 'web-test-elements';
    const start = Date.now() - 60000;
    const shop = `http://${host}/`;
    const events = [
      { type: 'lifecycle', state: 'created', profile: 'browser', size: [1280, 800], display: ':99', agent: 'env-agent', policy: 'default' },
      { type: 'lifecycle', state: 'ready', start_ms: 900, url: shop, title: 'Acme shop: orders' },
      ...steps.map((x) => {
        const ev = {
          type: 'action', index: 0, action: x.a, verdict: x.v, rule: x.v === 'allow' ? 'actions.allow[0]' : 'default',
          reason: x.v === 'allow' ? 'allowed by the test' : 'refused by the test', url: shop, title: 'Acme shop: orders',
          screen: [1280, 800], pointer: [640, 400], frame_before: src.frame_before, frame_after: x.v === 'allow' ? src.frame_after : null,
          duration_ms: 120,
        };
        if (x.v === 'allow') Object.assign(ev, { result: { ok: true }, url_after: shop, title_after: 'Acme shop: orders' });
        if (x.member) Object.assign(ev, { member: x.member, toolset: 'browser' });
        if (x.element) ev.element = x.element;
        if (x.tabs) ev.browser_state = { tabs: x.tabs, state_changes: x.changes || [] };
        return ev;
      }),
      { type: 'lifecycle', state: 'ended', reason: 'deleted', actions: steps.length, refused: 2, errors: 0, requests: 0, requests_blocked: 0 },
    ];
    const owner = fs.statSync(path.join(gw.recordings, A.id));
    writeRecording({
      dir: gw.recordings, id, events, keyFile: path.join(gw.dir, 'state', 'recording-key.pem'), owner: { uid: owner.uid, gid: owner.gid },
      session: { start: new Date(start).toISOString(), start_ms: start, profile: 'browser', width: 1280, height: 800, token_name: 'env-agent', policy: '{"version":1}\n' },
      frames: { [src.frame_before]: path.join(framesDir, `${src.frame_before}.png`), [src.frame_after]: path.join(framesDir, `${src.frame_after}.png`) },
    });
    E = { id, steps };
    await P1.goto(`/player.html?id=${id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.getAttribute('#verify-banner', 'data-status'), 'sealed', `the test's recording does not verify: ${await text(P1, '#verify-banner')}`);
    // Every new action type in plain words.
    assert.deepEqual(await P1.locator('#steps li .desc').allTextContents(), steps.map((x) => x.d));

    // A click on an element: its box where it was on the screen before, in
    // the verdict's colour, labelled; the click drawn at its point.
    await P1.locator('#steps li[data-n="1"] button').click();
    await waitStep(P1, 1);
    await overlayOf(P1, steps[0].a.type);
    assert.equal(await text(P1, '#step-title'), steps[0].d);
    let got = await elementBoxShown(P1, '#ov-before', '#img-before');
    boxAt(got, [640, 280, 120, 40], 'click on ref_7');
    assert.equal(got.stroke, '#1f6feb', 'an allowed action is drawn in blue');
    assert.equal(got.ref, 'ref_7');
    assert.equal(got.label, 'button “Add to cart”');
    assert.ok(got.labelBox[1] >= got.shown[1] + got.shown[3], 'the label is not below the box');
    near(await overlayPoint(P1, 'before'), 700, 300, 'click on ref_7');
    assert.equal(await P1.locator('#ov-after rect.ov-element').count(), 0, 'the element box is drawn over the screen after the action');
    assert.equal(await text(P1, '#step-tool'), 'left_click from the browser toolset');
    assert.equal(await text(P1, '#step-element'), 'button “Add to cart” · ref_7 · box at (640, 280), 120×40 · aimed at (700, 300)');
    assert.deepEqual(await P1.locator('#step-tabs li').evaluateAll((l) => l.map((x) => [x.dataset.tab, x.dataset.active])), [[TAB1, '1']]);
    assert.match(await P1.locator('#step-tabs li[data-active="1"]').textContent(), new RegExp(`^activeAcme shop: orders · http://${host.replace('.', '\\.')}/ · ${TAB1}$`));

    // A form set to a value.
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 2);
    await overlayOf(P1, steps[1].a.type);
    boxAt(await elementBoxShown(P1, '#ov-before', '#img-before'), [200, 150, 300, 36], 'form_input on ref_12');
    near(await overlayPoint(P1, 'before'), 350, 168, 'form_input on ref_12');
    assert.equal(await text(P1, '#step-value'), '“a@b.c”');

    // A refused upload into an element a hostile page named with markup:
    // drawn in red, the name shown as text, nothing of it run or inserted.
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 3);
    await overlayOf(P1, steps[2].a.type);
    got = await elementBoxShown(P1, '#ov-before', '#img-before');
    boxAt(got, [100, 500, 200, 50], 'file_upload on ref_3');
    assert.equal(got.stroke, '#d1242f', 'a denied action is drawn in red');
    assert.equal(got.label, `button “${HOSTILE}”`);
    assert.equal(got.labelChildren, 0, 'the label has child elements: the name was parsed as markup');
    assert.equal(await P1.locator('#step-title').textContent(), steps[2].d);
    assert.match(await P1.locator('#step-element').textContent(), new RegExp(`^button “${HOSTILE.replace(/[()]/g, '\\$&')}” · ref_3`));
    assert.deepEqual(await P1.locator('#step-files li').allTextContents(), ['/home/agent/a.pdf', '/home/agent/b.pdf']);
    const dom = await P1.evaluate(() => ({
      imgs: [...document.querySelectorAll('img')].map((i) => i.id),
      handlers: document.querySelectorAll('[onerror], [onload], [onclick]').length,
      bad: document.querySelectorAll('img[src="x"], svg img, .desc *, #step-title *').length,
    }));
    assert.deepEqual(dom, { imgs: ['img-before', 'img-after'], handlers: 0, bad: 0 });

    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 4);
    await overlayOf(P1, steps[3].a.type);
    assert.equal(await text(P1, '#step-code'), steps[3].a.code);
    assert.equal(await P1.locator('#ov-before rect.ov-element').count(), 0, 'a box drawn for an action on no element');
    assert.equal(await text(P1, '#step-tool'), 'javascript_tool from the browser toolset');

    // A new tab: the tabs after it, the new one active, and which opened.
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 5);
    await overlayOf(P1, steps[4].a.type);
    assert.deepEqual(await P1.locator('#step-tabs li').evaluateAll((l) => l.map((x) => [x.dataset.tab, x.dataset.active])), [[TAB1, '0'], [TAB2, '1']]);
    assert.deepEqual(await P1.locator('.tab-changes[data-kind="Tabs opened"] li').evaluateAll((l) => l.map((x) => [x.dataset.change, x.dataset.tab])), [['tab_opened', TAB2]]);
    assert.match(await text(P1, '#step'), new RegExp(`Tabs opened\\s+New Tab · about:blank · ${TAB2}`));
    assert.match(await P1.locator('#ov-before .ov-tag text').first().textContent(), /open a new tab/);
    await P1.keyboard.press('ArrowRight');
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 7);
    await overlayOf(P1, steps[6].a.type);
    assert.match(await text(P1, '#step'), new RegExp(`Tabs closed\\s+New Tab · about:blank · ${TAB2}`));
    assert.match(await P1.locator('#ov-before .ov-tag text').first().textContent(), /close tab 9F8E…/);

    // An element at the bottom of the screen: its label above the box.
    await P1.locator('#steps li[data-n="11"] button').click();
    await waitStep(P1, 11);
    await overlayOf(P1, steps[10].a.type);
    got = await elementBoxShown(P1, '#ov-before', '#img-before');
    boxAt(got, [900, 760, 100, 24], 'scroll_to ref_20');
    assert.ok(got.labelBox[1] + got.labelBox[3] <= got.shown[1] + 0.5, 'the label of an element at the bottom is not above its box');
    // A screenshot of a region: the region drawn.
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 12);
    await overlayOf(P1, steps[11].a.type);
    assert.deepEqual(await P1.locator('#ov-before rect.ov-region').evaluate((r) => ['x', 'y', 'width', 'height'].map((k) => +r.getAttribute(k))), [0, 88, 1280, 712]);
    await P1.keyboard.press('ArrowRight');
    await waitStep(P1, 13);
    await overlayOf(P1, steps[12].a.type);
    boxAt(await elementBoxShown(P1, '#ov-before', '#img-before'), [20, 105, 80, 30], 'move to ref_4');
    near(await overlayPoint(P1, 'before'), 60, 120, 'move to ref_4');
    // The filters know the new types.
    const types = await P1.locator('input[data-filter=type]').evaluateAll((l) => l.map((x) => x.value));
    assert.deepEqual(types, [...new Set(steps.map((x) => x.a.type))].sort());
    await P1.locator('#steps li[data-n="1"] button').click();
    await waitStep(P1, 1);
    await overlayOf(P1, steps[0].a.type);
    await shot(P1, 'player-elements', { fullPage: true });
  });

  // A browser session an agent acted in, and a raw CDP client drove
  // through the session's endpoint between its actions.
  let C = null; // {id, evs}

  check('the player lists the commands CDP clients sent, with their verdicts and the frames before and after', async () => {
    current = P1;
    const ag = await Agent.create(gw, { profile: 'browser', policy: 'cdp' });
    const cdp = await cdpClient((await gw.api('GET', `/v1/sessions/${ag.id}/json/version`, TOKENS.agent)).webSocketDebuggerUrl);
    // The frame of the commands up to `method`'s last one is recorded.
    const framed = (method) => waitFor(`the frame after ${method}`, async () => {
      const evs = await gw.events(ag.id);
      const ev = evs.filter((e) => e.type === 'cdp' && e.method === method).pop();
      return ev && cdpFrameOf(evs, ev);
    }, 15000, 200);
    let sessionId;
    try {
      assert.equal((await ag.act({ type: 'screenshot' })).verdict, 'allow');
      const { result: { targetInfos } } = await cdp.send('Target.getTargets');
      assert.ok((await cdp.send('Target.getTargets')).result, 'Target.getTargets again'); // from the worker's verdict cache
      const page = targetInfos.find((t) => t.type === 'page');
      ({ result: { sessionId } } = await cdp.send('Target.attachToTarget', { targetId: page.targetId, flatten: true }));
      let m = await cdp.send('Page.navigate', { url: `http://${host}/` }, sessionId);
      assert.ok(m.result && !m.result.errorText, `Page.navigate: ${JSON.stringify(m)}`);
      await framed('Page.navigate');
      // Page.navigate answers once the new document is committed, maybe
      // before its body is parsed (a loaded host): the script waits for it.
      m = await cdp.send('Runtime.evaluate', {
        expression: 'new Promise((r) => { const go = () => { document.body.style.background = "#d1242f"; ' +
          'r(document.title = "changed by CDP"); }; document.body ? go() : addEventListener("DOMContentLoaded", go); })',
        awaitPromise: true,
      }, sessionId);
      assert.equal(m.result && m.result.result.value, 'changed by CDP', `Runtime.evaluate: ${JSON.stringify(m)}`);
      await framed('Runtime.evaluate');
      m = await cdp.send('Browser.close');
      assert.match(m.error && m.error.message, /deskgate: denied/, `Browser.close: ${JSON.stringify(m)}`);
      m = await cdp.send('Page.navigate', { url: `http://${host}/admin/<svg/onload=alert(1)>` }, sessionId);
      assert.match(m.error && m.error.message, /urls\.canonical/, `Page.navigate to markup: ${JSON.stringify(m)}`);
      assert.equal((await ag.act({ type: 'wait', ms: 100 })).verdict, 'allow');
    } finally {
      cdp.close();
      await ag.end();
    }
    await waitFor('the CDP recording to be sealed', async () => (await gw.api('GET', `/v1/recordings/${ag.id}`, TOKENS.viewer)).verify.status === 'sealed');
    const evs = await gw.events(ag.id);
    C = { id: ag.id, evs };
    const stepEvs = evs.filter((e) => e.type === 'action' || e.type === 'cdp');
    const cmds = stepEvs.filter((e) => e.type === 'cdp');
    const stepOf = (pred) => stepEvs.findIndex((e) => e.type === 'cdp' && pred(e)) + 1;
    const cached = cmds.filter((e) => e.cached);
    assert.ok(cached.length > 0, 'no command was allowed from the verdict cache');

    await P1.goto(`/player.html?id=${ag.id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    // Every command a step, in recording order among the actions.
    const rows = await P1.locator('#steps li').evaluateAll((l) => l.map((x) => [x.dataset.type, x.dataset.verdict, x.querySelector('.desc').textContent]));
    assert.deepEqual(rows.map((r) => r.slice(0, 2)), stepEvs.map((e) => [e.type === 'cdp' ? 'cdp' : e.action.type, e.verdict]));
    assert.equal(rows[0][0], 'screenshot');
    assert.equal(rows[rows.length - 1][0], 'wait');
    const has = (d, v) => assert.ok(rows.some((r) => r[2] === d && r[1] === v), `no ${v} step "${d}" in ${JSON.stringify(rows.map((r) => r[2]))}`);
    has('CDP Target.getTargets', 'allow');
    has(`CDP Page.navigate http://${host}/`, 'allow');
    has('CDP Browser.close', 'deny');
    assert.ok(rows.some((r) => /^CDP Runtime\.evaluate: run JavaScript/.test(r[2])), `no Runtime.evaluate step in ${JSON.stringify(rows.map((r) => r[2]))}`);
    const denied = cmds.filter((e) => e.verdict === 'deny').length;
    assert.match(await text(P1, '#meta'), /actions 2 \(0 denied, 0 asked\)/);
    assert.match(await text(P1, '#meta'), new RegExp(`CDP commands ${cmds.length} \\(${denied} denied, ${cached.length} from the verdict cache\\)`));

    // The script that changed the page: the screens before and after it.
    const evalEv = cmds.find((e) => e.method === 'Runtime.evaluate');
    const after = cdpFrameOf(evs, evalEv);
    assert.ok(evalEv.frame_before && after, `no frames around Runtime.evaluate: ${JSON.stringify(evalEv)}`);
    let n = stepOf((e) => e === evalEv);
    await P1.locator(`#steps li[data-n="${n}"] button`).click();
    await waitStep(P1, n);
    assert.equal(await P1.getAttribute('body', 'data-type'), 'cdp');
    assert.match(await text(P1, '#step-title'), /^CDP Runtime\.evaluate: run JavaScript/);
    const imgs = await P1.evaluate(() => ['before', 'after'].map((w) => {
      const i = document.querySelector(`#img-${w}`);
      return i.hidden ? 0 : i.naturalWidth;
    }));
    assert.ok(imgs[0] > 0 && imgs[1] > 0, `the frames before and after are not shown: ${imgs}`);
    assert.equal(await text(P1, '#before-info'), evalEv.frame_before.slice(0, 10));
    assert.equal(await text(P1, '#after-info'), after.frame.slice(0, 10));
    assert.match(await text(P1, '#step'), new RegExp(`Sent by\\s+CDP client ${evalEv.client} · env-agent`));

    // A refused command: its rule, nothing after it.
    n = stepOf((e) => e.method === 'Browser.close');
    await P1.locator(`#steps li[data-n="${n}"] button`).click();
    await waitStep(P1, n);
    assert.equal(await text(P1, '#step-title'), 'CDP Browser.close');
    assert.match(await text(P1, '#step-reason'), /^builtin\.cdp — /);
    assert.match(await text(P1, '#ph-after'), /Not performed/);
    assert.equal(await P1.getAttribute('body', 'data-verdict'), 'deny');

    // One from the verdict cache says so.
    n = stepOf((e) => e === cached[0]);
    await P1.locator(`#steps li[data-n="${n}"] button`).click();
    await waitStep(P1, n);
    assert.equal(await P1.locator('#step-cached').textContent(), 'from the verdict cache');
    assert.match(await text(P1, '#step'), /allowed from the verdict cache/);

    // A URL with markup in it is text.
    const bad = cmds.find((e) => e.method === 'Page.navigate' && e.verdict === 'deny');
    n = stepOf((e) => e === bad);
    await P1.locator(`#steps li[data-n="${n}"] button`).click();
    await waitStep(P1, n);
    assert.match(await text(P1, '#step-reason'), /^urls\.canonical/);
    assert.equal(await text(P1, '#step-title'), `CDP Page.navigate ${bad.url || bad.params.url}`);
    assert.match(await text(P1, '#step-title'), /<svg\/onload=alert\(1\)>$/);
    assert.equal(await P1.evaluate(() => document.querySelectorAll('[onload], [onerror], svg svg, .desc *, #step-title *, #step-params *').length), 0);
    await shot(P1, 'player-cdp', { fullPage: true });

    // The filters: CDP commands hidden and shown; the verdict filter
    // applies to them.
    await P1.uncheck('input[data-filter=type][value=cdp]');
    assert.deepEqual(await P1.locator('#steps li').evaluateAll((l) => l.map((x) => x.dataset.type)), ['screenshot', 'wait']);
    await P1.check('input[data-filter=type][value=cdp]');
    await P1.uncheck('input[data-filter=verdict][value=allow]');
    assert.equal(await P1.locator('#steps li[data-type=cdp]').count(), denied);
    await P1.check('input[data-filter=verdict][value=allow]');
    assert.equal(await P1.locator('#steps li').count(), stepEvs.length);
  }, 120000);

  check('the player lists thousands of CDP commands only when asked, and marks only the flagged ones on the timeline', async () => {
    current = P1;
    assert.ok(C, 'no CDP recording to borrow frames from');
    const frame = C.evs.find((e) => e.type === 'cdp_frame').frame;
    const id = 'web-test-many-cdp';
    const act = (type) => ({
      type: 'action', index: 0, action: { type }, verdict: 'allow', rule: 'actions.allow[0]', reason: 'allowed by the test',
      screen: [1280, 800], pointer: [0, 0], frame_before: frame, frame_after: frame, result: { ok: true }, duration_ms: 5,
    });
    const cmd = (req) => ({
      type: 'cdp', client: 1, req, method: req % 100 ? 'Runtime.getProperties' : 'Browser.close', session: '',
      verdict: req % 100 ? 'allow' : 'deny', rule: 'builtin.cdp', reason: 'decided by the test',
      frame_before: frame, during_action: null,
    });
    const K = 1200;
    const events = [
      { type: 'lifecycle', state: 'created', profile: 'browser', size: [1280, 800], display: ':99', agent: 'env-agent', policy: 'default' },
      act('screenshot'),
      { type: 'cdp_client', state: 'open', client: 1, by: 'env-agent' },
      ...Array.from({ length: K }, (_, i) => cmd(i + 1)),
      { type: 'cdp_frame', frame, first_req: 1, last_req: K },
      { type: 'cdp_client', state: 'closed', client: 1 },
      act('wait'),
      { type: 'lifecycle', state: 'ended', reason: 'deleted', actions: 2, refused: 0, errors: 0, requests: 0, requests_blocked: 0 },
    ];
    const owner = fs.statSync(path.join(gw.recordings, C.id));
    writeRecording({
      dir: gw.recordings, id, events, keyFile: path.join(gw.dir, 'state', 'recording-key.pem'), owner: { uid: owner.uid, gid: owner.gid },
      session: { start: new Date().toISOString(), start_ms: Date.now(), profile: 'browser', width: 1280, height: 800, token_name: 'env-agent' },
      frames: { [frame]: path.join(gw.recordings, C.id, 'frames', `${frame}.png`) },
    });
    await P1.goto(`/player.html?id=${id}`);
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.isChecked('input[data-filter=type][value=cdp]'), false, 'the CDP commands are listed at first');
    assert.equal(await text(P1, '#shown'), `2 of ${K + 2} steps shown`);
    assert.deepEqual(await P1.locator('#steps li').evaluateAll((l) => l.map((x) => x.dataset.type)), ['screenshot', 'wait']);
    await P1.check('input[data-filter=type][value=cdp]');
    assert.equal(await P1.locator('#steps li').count(), K + 2);
    // The timeline: the 12 refused commands, not 1202 marks.
    assert.deepEqual(await P1.locator('#ticks .tick').evaluateAll((l) => [...new Set(l.map((x) => x.className))].concat(l.length)), ['tick deny', K / 100]);
    // A link to a command opens with them listed.
    await P1.goto('about:blank');
    await P1.goto(`/player.html?id=${id}#step=500`);
    await P1.waitForSelector('body[data-ready="1"]');
    await waitStep(P1, 500);
    assert.equal(await P1.isChecked('input[data-filter=type][value=cdp]'), true);
    assert.equal(await text(P1, '#step-title'), 'CDP Runtime.getProperties');
  }, 60000);

  check('the Approvals page shows the element a waiting action is aimed at', async () => {
    // A real action waiting for a human; the element the gateway adds to
    // it is added here (the test's own, with a hostile name).
    const X = await Agent.create(gw, { profile: 'xterm', policy: 'asking' });
    const P3 = await newPage(viewerCtx, 'approvals-element');
    current = P3;
    const element = { ref: 'ref_5', role: 'link', name: `${HOSTILE}Delete account`, box: [300, 200, 160, 30], point: [380, 215] };
    await P3.route('**/v1/approvals', async (route) => {
      const res = await route.fetch();
      const j = await res.json();
      for (const a of j.approvals || []) if (a.session === X.id) a.element = element;
      await route.fulfill({ response: res, json: j });
    });
    try {
      const size = (await gw.api('GET', `/v1/sessions/${X.id}`, TOKENS.viewer)).size;
      assert.equal((await X.act({ type: 'screenshot' })).verdict, 'allow');
      await P3.goto('/approvals.html');
      await signIn(P3, TOKENS.alice);
      const pending = await X.sendAsk({ type: 'click', x: 380, y: 215 });
      assert.equal(pending.type, 'pending', JSON.stringify(pending));
      const sel = `.approval[data-id="${pending.approval}"]`;
      await P3.waitForSelector(`${sel}[data-frame-loaded="1"]`, { timeout: 10000 });
      const card = P3.locator(sel);
      assert.equal(await card.locator('.wants').textContent(), `click at (380, 215) on ref_5 (link “${HOSTILE}Delete account”)`);
      assert.equal(await card.locator('dd.element').textContent(), `link “${HOSTILE}Delete account” · ref_5`);
      const got = await elementBoxShown(P3, `${sel} svg.overlay-layer`, `${sel} img`, size);
      boxAt(got, element.box, 'the waiting click');
      assert.equal(got.stroke, '#b06000', 'a waiting action is drawn in the colour of asked ones');
      assert.equal(got.label, `link “${HOSTILE}Delete account”`);
      assert.equal(got.labelChildren, 0);
      assert.equal(await P3.evaluate(() => document.querySelectorAll('[onerror], img[src="x"], svg img, .wants *').length), 0);
      await P3.bringToFront();
      await shot(P3, 'approvals-element');
      await card.locator('button[data-decision=deny]').click();
      const r = await X.result(15000);
      assert.equal(r.verdict, 'deny');
    } finally {
      await P3.close();
      await X.end();
    }
  }, 90000);

  check('the blast radius page explains a policy, with the last deskgate audit when there is one', async () => {
    current = P1;
    await P1.goto('/blast.html');
    await P1.waitForSelector('body[data-ready="1"]');
    assert.equal(await P1.inputValue('#policy'), 'default');
    assert.match(await text(P1, '#edge-audit'), /No audit run yet/);
    // A real audit of the default policy (xterm: the shorter one).
    const t = Date.now();
    const au = await gw.audit('default', 'xterm');
    assert.ok(au.report && Array.isArray(au.report.findings) && au.report.findings.length > 10,
      `deskgate audit gave no report (exit ${au.code}): ${au.stderr.slice(-1500)}`);
    say(`     (deskgate audit: exit ${au.code}, ${au.report.findings.length} probes in ${Date.now() - t} ms)`);
    await P1.reload();
    await P1.waitForSelector('body[data-ready="1"]');
    assert.deepEqual(await P1.locator('#edge-network .pill-list.allow li').first().innerText(), host);
    assert.match(await text(P1, '#edge-network'), /1 host reachable/i);
    assert.match(await text(P1, '#edge-network'), /169\.254\.0\.0\/16/);
    assert.match(await text(P1, '#edge-files'), /256 MiB/);
    assert.match(await text(P1, '#edge-credentials'), /BEGIN \[A-Z \]\*PRIVATE KEY/);
    assert.match(await text(P1, '#edge-limits'), /2048 MiB/);
    assert.match(await text(P1, '#edge-actions'), /exec/);
    const sum = au.report.summary;
    assert.match(await text(P1, '#edge-audit'), new RegExp(`${sum.probes} probes run .* from inside an xterm session`));
    assert.match(await text(P1, '#edge-audit'), new RegExp(`${sum.contained} contained`));
    assert.equal(await P1.locator('#audit-findings tbody tr').count(), au.report.findings.length);
    for (const e of ['egress', 'filesystem', 'credentials', 'isolation', 'resources']) {
      const n = au.report.findings.filter((f) => f.edge === e).length;
      assert.match(await P1.locator(`.audit-line[data-edge=${e}]`).innerText(), new RegExp(`Last audit: ${n} probes`), e);
    }
    const allowed = await P1.locator('#audit-findings tr[data-outcome=allowed] td:nth-child(2)').allTextContents();
    assert.ok(allowed.some((x) => x.includes(host)), `the allowed egress host is not among the findings: ${allowed}`);
    // What this host's kernel refuses by itself (int 0x80 without IA32
    // emulation, /proc/sysrq-trigger without magic SysRq...) is shown as
    // contained by the kernel, with its evidence, never as a leak: as many as
    // the real audit found here (none on a kernel that has them all).
    const byKernel = au.report.findings.filter((f) => f.outcome === 'contained-by-kernel');
    say(`     (contained by this host's kernel: ${byKernel.map((f) => f.id).join(', ') || 'none'})`);
    assert.deepEqual(au.report.kernel_refused, byKernel.map((f) => f.id));
    assert.equal(await P1.locator('#audit-findings tr[data-outcome="contained-by-kernel"]').count(), byKernel.length);
    assert.equal(await P1.locator('#audit-kernel li').count(), byKernel.length);
    for (const f of byKernel) {
      const row = P1.locator(`#audit-findings tr[data-outcome="contained-by-kernel"][data-id="${f.id}"]`);
      assert.equal(await row.locator('.badge').textContent(), 'contained by the kernel', f.id);
      assert.match(await row.locator('.badge').getAttribute('class'), /\bbadge-kernel\b/, f.id);
      assert.ok((await row.locator('td.evidence').textContent()).includes(f.evidence), f.id);
      assert.ok((await P1.locator(`#audit-kernel li[data-id="${f.id}"]`).textContent()).includes(f.control), f.id);
    }
    if (byKernel.length) assert.match(await text(P1, '#edge-audit'), new RegExp(`${byKernel.length} contained by the kernel`));
    for (const f of au.report.findings.filter((x) => x.outcome === 'error')) say(`     (audit error: ${f.id}: ${String(f.evidence).slice(0, 300)})`);
    if (sum.leaked === 0) assert.doesNotMatch(await text(P1, '#edge-audit .edge-head'), /\d+ leaked/i);
    await shot(P1, 'blast', { fullPage: true });
    await P1.selectOption('#policy', 'locked');
    await P1.waitForSelector('body[data-policy="locked"]');
    assert.match(await text(P1, '#edge-network'), /no way out/i);
    assert.match(await text(P1, '#edge-limits'), /1024 MiB/);
    assert.match(await text(P1, '#edge-audit'), /No audit run yet/);
    // A leak is shown as one, and a call the kernel refused as contained by
    // the kernel, apart from it and not red: an audit of "locked" that found
    // one of each (served by the test in place of the gateway's answer), on
    // any kernel.
    const leak = { id: 'filesystem.host-tmp', edge: 'filesystem', tried: 'reading a file in the host\'s /tmp', outcome: 'leaked', evidence: 'read 12 bytes: test finding' };
    const kern = {
      id: 'isolation.test-kernel', edge: 'isolation', tried: 'a call the test says this kernel refuses', outcome: 'contained-by-kernel',
      evidence: 'test call: killed by SIGSEGV, as on the host without deskgate: this kernel has no test feature (no filter saw the call)',
      control: 'on the host, as root with no filter: KERNEL test call on the host: killed by SIGSEGV: this kernel has no test feature',
    };
    const rest = au.report.findings.filter((f) => f.edge !== 'isolation' || f.outcome !== 'leaked');
    await P1.route('**/v1/policies', async (route) => {
      const res = await route.fetch();
      const j = await res.json();
      j.policies.find((p) => p.name === 'locked').audit = { ...au.report, findings: [...rest, leak, kern] };
      await route.fulfill({ response: res, json: j });
    });
    await P1.goto('/blast.html?policy=locked');
    await P1.waitForSelector('body[data-policy="locked"]');
    const leaks = rest.filter((f) => f.outcome === 'leaked').length + 1;
    assert.match(await text(P1, '#edge-audit .edge-head'), new RegExp(`${leaks} leaked`, 'i'));
    assert.equal(await P1.locator('#audit-findings details[data-edge=filesystem][open] tr[data-outcome=leaked]').count(),
      rest.filter((f) => f.edge === 'filesystem' && f.outcome === 'leaked').length + 1);
    assert.match(await P1.locator('.audit-line[data-edge=filesystem]').innerText(), /[1-9]\d* leaked/i);
    const krow = P1.locator('#audit-findings tr[data-id="isolation.test-kernel"]');
    assert.equal(await krow.getAttribute('data-outcome'), 'contained-by-kernel');
    assert.equal(await krow.locator('.badge').textContent(), 'contained by the kernel');
    const colour = (loc) => loc.evaluate((e) => getComputedStyle(e).backgroundColor + ' ' + getComputedStyle(e).color);
    const lrow = P1.locator('#audit-findings tr[data-outcome=leaked][data-id="filesystem.host-tmp"]');
    assert.notEqual(await colour(krow.locator('.badge')), await colour(lrow.locator('.badge')), 'contained by the kernel is shown like a leak');
    assert.notEqual(await colour(krow.locator('.badge')), await colour(P1.locator('#audit-findings tr[data-outcome=contained] .badge').first()),
      'contained by the kernel is shown like contained');
    assert.ok((await krow.locator('td.evidence').textContent()).includes(kern.evidence));
    assert.ok((await krow.locator('td.evidence').textContent()).includes(`control ${kern.control}`));
    assert.ok((await P1.locator('#audit-kernel li[data-id="isolation.test-kernel"]').textContent()).includes(kern.evidence));
    // Its edge did not leak: its line says so, and counts it apart.
    const iso = P1.locator('.audit-line[data-edge=isolation]');
    assert.match(await iso.innerText(), /contained by the kernel/i);
    assert.match(await iso.locator('.badge').getAttribute('class'), /\bbadge-ok\b/);
    await P1.unroute('**/v1/policies');
  }, 150000);

  check('no token ever appeared in a URL; no page error or CSP violation', async () => {
    const secrets = Object.values(TOKENS);
    const leaked = requestURLs.filter((u) => secrets.some((t) => u.includes(t)));
    assert.deepEqual(leaked, []);
    assert.ok(requestURLs.length > 20, `only ${requestURLs.length} requests seen`);
    assert.deepEqual(pageErrors, []);
  });

  await runChecks();
}

main()
  .catch((e) => { failures++; say(`FAIL setup: ${e && e.stack || e}`); if (gw) say(`gateway log:\n${gw.log.slice(-3000)}`); })
  .finally(async () => {
    if (browser) await browser.close().catch(() => {});
    if (site) site.close();
    if (gw) {
      if (failures) say(`gateway log (last 2000 bytes):\n${gw.log.slice(-2000)}`);
      await gw.stop().catch(() => {});
    }
    cleanupNow();
    say(`${failures ? 'FAILED' : 'passed'}: ${checks.length - failures} of ${checks.length} checks in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    process.exit(failures ? 1 : 0);
  });
