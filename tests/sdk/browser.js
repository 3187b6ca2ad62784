'use strict';
// The browser toolset suite (ctest: sdk/browser; tests/sdk/run.sh browser).
//
// Every member of Anthropic's browser_toolset_20260801 (the members come
// from the installed SDK's BetaBrowserToolUseBlock union: a member the
// suite does not exercise fails it) is sent verbatim, as a tool_use block
// with toolset_name "browser", to a real browser session of a gateway this
// test starts, against pages a loopback server of its own serves. Each
// answer must be its call's and say what the member did; its effect is
// checked in the page (the pages log their events into their title, which
// every answer's browser_state carries). The policy cases: a navigation
// denied through navigate and through a new tab, javascript_exec refused
// by default and allowed by a rule, file_upload of /etc/passwd refused, a
// ref click inside a denied region refused, a member disabled by the
// toolset's configs; and the denied site's server must see no request at
// all. Last, every request and answer is written into a .ts file typed
// with the SDK's own types (BetaBrowserToolUseBlock members,
// BetaToolResultBlockParam with its browser_state) and `tsc --noEmit
// --strict` must find no error.
//
//   node browser.js DESKGATE_BINARY WORK_DIR

const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Gateway } = require('../web/lib/gateway.js');
const { Socket, pngSize, forTs } = require('./socket.js');

const bin = process.argv[2];
const work = process.argv[3];
if (!bin || !work) {
  console.error('usage: node browser.js DESKGATE_BINARY WORK_DIR');
  process.exit(2);
}
const modules = path.join(__dirname, 'node_modules');
const t0 = Date.now();
const say = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${s}`);

// ---- the SDK's members ---------------------------------------------------------

function sdkMembers() {
  const src = fs.readFileSync(path.join(modules, '@anthropic-ai/sdk/resources/beta/messages/messages.d.ts'), 'utf8');
  const m = /export declare const BETA_BROWSER_MEMBER_NAME_VALUES: readonly \[([^\]]*)\]/.exec(src);
  if (!m) throw new Error('@anthropic-ai/sdk: BETA_BROWSER_MEMBER_NAME_VALUES not found');
  const names = [...m[1].matchAll(/"([^"]+)"/g)].map((x) => x[1]);
  const blocks = {};
  const union = /export type BetaBrowserToolUseBlock = ([^;]+);/.exec(src);
  if (!union) throw new Error('@anthropic-ai/sdk: BetaBrowserToolUseBlock not found');
  for (const b of union[1].split('|').map((s) => s.trim())) {
    const body = new RegExp(`export interface ${b} \\{([\\s\\S]*?)\\n\\}`).exec(src);
    const name = body && /name: '([^']+)'/.exec(body[1]);
    if (name) blocks[name[1]] = b;
  }
  return { names, blocks };
}

// ---- the sites ------------------------------------------------------------------

// shop.test: the pages. evil.test: denied by the policy; its server must
// never see a request.
const SHOP = `<!doctype html><html><head><title>shop</title><style>
body{margin:0;font:16px sans-serif} #buy{position:absolute;left:20px;top:250px;width:120px;height:40px}
#drag{position:absolute;left:400px;top:150px;width:300px;height:60px;background:#eef}
#spacer{height:2500px}
</style></head><body>
<article><h1>Desk lamps</h1><p>A lamp for every desk.</p></article>
<div><input id=q type=search aria-label="Search products" placeholder="Search">
<button id=go>Go</button>
<select id=size aria-label="Size"><option value=s>Small</option><option value=m>Medium</option></select>
<label><input type=checkbox id=agree> Agree to terms</label>
<input type=file id=file aria-label="Attachment">
<a id=two href="/two.html" target="_blank">Open two</a></div>
<button id=buy>Buy now</button>
<div id=drag aria-label="Drag area" role=region>drag here</div>
<div id=spacer></div>
<button id=far>Far button</button>
<script>
var log = [];
function note(s) { log.push(s); document.title = 'log:' + log.length + ':' + log.slice(-12).join(','); }
['click','dblclick','auxclick','contextmenu','mousedown','mouseup','wheel','keydown'].forEach(function (t) {
  document.addEventListener(t, function (e) { note(t + (e.shiftKey ? '+shift' : '') + (e.target.id ? '@' + e.target.id : '')); }, true);
});
document.getElementById('go').addEventListener('mouseover', function () { note('hover@go'); });
document.getElementById('q').addEventListener('input', function (e) { note('input@q=' + e.target.value); });
document.getElementById('size').addEventListener('change', function (e) { note('change@size=' + e.target.value); });
document.getElementById('agree').addEventListener('change', function (e) { note('change@agree=' + e.target.checked); });
document.getElementById('file').addEventListener('change', function (e) {
  var f = e.target.files[0]; note('change@file=' + (f ? f.name + '/' + f.size : 'none'));
});
document.addEventListener('contextmenu', function (e) { e.preventDefault(); });
console.log('shop ready', 42);
window.addEventListener('scroll', function () { if (scrollY > 1000) note('scrolled'); }, { once: true });
document.addEventListener('wheel', function (e) { e.preventDefault(); }, { passive: false });
</script></body></html>`;
const TWO = '<!doctype html><title>two</title><p>second page</p>';
const BIG = '<!doctype html><title>big</title><body>' +
  Array.from({ length: 4000 }, (_, i) => `<button>button number ${i} with a long enough name</button>`).join('') + '</body>';

function site(name) {
  const log = [];
  const srv = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    const pages = { '/': SHOP, '/index.html': SHOP, '/two.html': TWO, '/big.html': BIG };
    const body = pages[req.url.split('?')[0]];
    res.writeHead(body ? 200 : 404, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    res.end(body || 'not found');
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({ name, srv, log, port: srv.address().port })));
}

// ---- checks ------------------------------------------------------------------------

const failures = [];
function fail(label, msg) {
  failures.push(`${label}: ${msg}`);
  say(`FAIL ${label}: ${msg}`);
}

// ---- the agent ----------------------------------------------------------------------

// A browser session speaking the toolset; every call and answer is kept
// (ts) for tsc, and every member sent counted (covered).
class Browser extends Socket {
  constructor(gw, s, ts, covered) {
    super(gw, s);
    this.ts = ts;
    this.covered = covered;
    this.n = 0;
  }

  // One member call: the tool_result, checked for its shape; text is the
  // answer's text blocks joined, state its browser_state, image its PNG.
  async call(name, input, { ok = true, label = name } = {}) {
    const id = `toolu_browser_${this.id.slice(0, 6)}_${this.n++}`;
    const block = { type: 'tool_use', id, name, toolset_name: 'browser', input, caller: { type: 'direct' } };
    this.covered.add(name);
    this.ts.push({ kind: 'q', name, v: block });
    const r = await this.send(block, 60000);
    this.ts.push({ kind: 'a', v: forTs(r) });
    const text = (r.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    const state = (r.content || []).find((c) => c.type === 'browser_state');
    const image = (r.content || []).find((c) => c.type === 'image');
    if (r.type !== 'tool_result' || r.tool_use_id !== id || r.toolset_name !== 'browser')
      fail(label, `not this call's browser tool_result: ${JSON.stringify(r).slice(0, 300)}`);
    if (ok !== null && (r.is_error === true) === ok) fail(label, `is_error ${r.is_error}, expected ${!ok}: ${text.slice(0, 400)}`);
    if (!state) fail(label, 'no browser_state block');
    else {
      const active = state.tabs.filter((t) => t.active);
      if (state.tabs.length && active.length !== 1) fail(label, `${active.length} active tabs in browser_state`);
      if (state.state_changes && !state.state_changes.length) fail(label, 'state_changes is an empty list');
    }
    return { r, text, state, image, active: state && state.tabs.find((t) => t.active) };
  }

  // The canonical exec, for files the upload takes.
  exec(argv) {
    return this.act({ type: 'exec', argv });
  }
}

// The page's log (its title) from an answer's active tab.
function logOf(res) {
  const m = res && res.active && /^log:(\d+):(.*)$/.exec(res.active.title);
  return m ? m[2].split(',') : [];
}

function expect(label, cond, msg) {
  if (!cond) fail(label, msg);
}

// Whether the page's log shows what an action did: its answer's tab
// title first; a page's title reaches the browser a little after the
// page's handler ran, so under load it is looked at again after short
// waits (a wait member each), up to 2 s.
async function sees(b, x, label, pred) {
  let log = logOf(x);
  for (let i = 0; i < 8 && !pred(log); i++) log = logOf(await b.call('wait', { duration: 0.25 }, { label: `${label} (waiting)` }));
  if (!pred(log)) fail(label, `the page saw ${log}`);
}

// The ref of the first line of a read_page or find answer whose text
// matches re.
function refOf(text, re) {
  for (const line of text.split('\n')) if (re.test(line)) {
    const m = /\[(ref_\d+)\]/.exec(line);
    if (m) return m[1];
  }
  return null;
}

// ---- the runs ----------------------------------------------------------------------------

async function shopping(gw, shop, evil, ts, covered) {
  const S = `http://shop.test:${shop.port}`;
  const b = await Browser.open(gw, { profile: 'browser', tools: [{ type: 'browser_toolset_20260801', configs: { middle_click: { enabled: false } } }] }, ts, covered);
  say(`session ${b.id} (policy default, middle_click disabled)`);
  let x = await b.call('navigate', { url: `${S}/index.html` });
  expect('navigate', x.active && x.active.url === `${S}/index.html` && /^shop|^log/.test(x.active.title), `tab ${JSON.stringify(x.active)}`);
  const home = x.active.tab_id;

  x = await b.call('read_page', { filter: 'interactive' });
  const q = refOf(x.text, /searchbox "Search products"/), go = refOf(x.text, /button "Go"/);
  const size = refOf(x.text, /combobox "Size"/), agree = refOf(x.text, /checkbox "Agree to terms"/);
  const two = refOf(x.text, /link "Open two"/), buy = refOf(x.text, /button "Buy now"/);
  const file = refOf(x.text, /"Attachment"/);
  expect('read_page', q && go && size && agree && two && buy && file, `refs missing in:\n${x.text}`);
  expect('read_page', !/Far button/.test(x.text), 'an element out of view is listed without filter all');
  x = await b.call('read_page', { filter: 'all', depth: 3 }, { label: 'read_page all' });
  expect('read_page all', /Far button/.test(x.text), 'filter all misses the element out of view');
  x = await b.call('read_page', { ref: size, filter: 'all' }, { label: 'read_page ref' });
  expect('read_page ref', /option "Medium"/.test(x.text) && !/Go/.test(x.text), `the subtree of ${size}: ${x.text}`);
  x = await b.call('get_page_text', {});
  expect('get_page_text', /A lamp for every desk/.test(x.text) && !/Buy now/.test(x.text), `the article's text: ${x.text}`);
  x = await b.call('find', { query: 'search field' });
  expect('find', x.text.split('\n')[0].includes(q), `find ranks ${q} first: ${x.text}`);

  x = await b.call('screenshot', {});
  const sz = x.image && pngSize(x.image.source.data);
  expect('screenshot', sz && sz[0] === 1280 && sz[1] > 600 && sz[1] < 800, `the viewport's PNG, got ${sz}`);
  x = await b.call('zoom', { region: [0, 0, 320, 200] });
  expect('zoom', x.image && pngSize(x.image.source.data), 'no PNG');
  await b.call('zoom', { region: [0, 0, 1281, 10] }, { ok: false, label: 'zoom off the viewport' });

  x = await b.call('left_click', { target: { type: 'ref', ref: go } });
  await sees(b, x, 'left_click ref', (log) => log.includes('click@go'));
  expect('left_click ref', /ref_\d+ \(button "Go"\)/.test(x.text), `the answer names the element: ${x.text}`);
  x = await b.call('left_click', { target: { type: 'ref', ref: go }, modifiers: 'shift' }, { label: 'left_click shift' });
  await sees(b, x, 'left_click shift', (log) => log.includes('click+shift@go'));
  x = await b.call('right_click', { target: { type: 'ref', ref: go } });
  await sees(b, x, 'right_click', (log) => log.includes('contextmenu@go'));
  await b.call('middle_click', { target: { type: 'ref', ref: go } }, { ok: false, label: 'middle_click disabled' });
  await b.call('wait', { duration: 0.6 });
  x = await b.call('double_click', { target: { type: 'ref', ref: go } });
  await sees(b, x, 'double_click', (log) => log.includes('dblclick@go'));
  await b.call('wait', { duration: 0.6 });
  x = await b.call('triple_click', { target: { type: 'ref', ref: go } });
  await sees(b, x, 'triple_click', (log) => log.filter((e) => e === 'click@go').length >= 3);
  x = await b.call('hover', { target: { type: 'ref', ref: go } });
  x = await b.call('mouse_move', { target: { type: 'coordinate', x: 600, y: 400 } });
  x = await b.call('hover', { target: { type: 'ref', ref: go } }, { label: 'hover again' });
  await sees(b, x, 'hover', (log) => log.includes('hover@go'));
  x = await b.call('left_click', { target: { type: 'coordinate', x: 450, y: 180 } }, { label: 'left_click coordinate' });
  await sees(b, x, 'left_click coordinate', (log) => log.includes('click@drag'));
  await b.call('left_mouse_down', { target: { type: 'coordinate', x: 420, y: 170 } });
  x = await b.call('left_mouse_up', { target: { type: 'coordinate', x: 430, y: 175 } });
  await sees(b, x, 'left_mouse_down/up', (log) => log.includes('mousedown@drag') && log.includes('mouseup@drag'));
  x = await b.call('left_click_drag', { from: { type: 'coordinate', x: 410, y: 170 }, target: { type: 'coordinate', x: 650, y: 190 } });
  await sees(b, x, 'left_click_drag', (log) => log.includes('mouseup@drag'));
  x = await b.call('scroll', { scroll_direction: 'down', target: { type: 'coordinate', x: 600, y: 400 }, scroll_amount: 2 });
  await sees(b, x, 'scroll', (log) => log.some((e) => e.startsWith('wheel')));
  await b.call('scroll', { scroll_direction: 'up', target: { type: 'coordinate', x: 600, y: 400 }, scroll_amount: 11 }, { ok: false, label: 'scroll_amount 11' });
  await b.call('left_click', { target: { type: 'coordinate', x: 5000, y: 10 } }, { ok: false, label: 'left_click outside the viewport' });

  x = await b.call('left_click', { target: { type: 'ref', ref: q } }, { label: 'left_click search' });
  x = await b.call('type', { text: 'lamp' });
  await sees(b, x, 'type', (log) => log.some((e) => e === 'input@q=lamp'));
  x = await b.call('key', { text: 'BackSpace', repeat: 2 });
  await sees(b, x, 'key repeat', (log) => log.some((e) => e === 'input@q=la'));
  x = await b.call('hold_key', { text: 'shift', duration: 0.2 });
  await sees(b, x, 'hold_key', (log) => log.some((e) => e.startsWith('keydown')));
  x = await b.call('form_input', { target: { type: 'ref', ref: q }, value: 'desk lamp' });
  await sees(b, x, 'form_input text', (log) => log.includes('input@q=desk lamp'));
  x = await b.call('form_input', { target: { type: 'ref', ref: size }, value: 'Medium' }, { label: 'form_input select' });
  await sees(b, x, 'form_input select', (log) => log.includes('change@size=m'));
  x = await b.call('form_input', { target: { type: 'ref', ref: agree }, value: true }, { label: 'form_input checkbox' });
  await sees(b, x, 'form_input checkbox', (log) => log.includes('change@agree=true'));
  await b.call('form_input', { target: { type: 'ref', ref: agree }, value: 'yes' }, { ok: false, label: 'form_input checkbox text' });

  const far = refOf((await b.call('find', { query: 'far button' }, { label: 'find far' })).text, /Far button/);
  x = await b.call('scroll_to', { target: { type: 'ref', ref: far } });
  await sees(b, x, 'scroll_to', (log) => log.includes('scrolled'));

  // The policy: a ref click inside the denied region; file uploads, which
  // the default policy does not allow; javascript, ditto.
  x = await b.call('scroll_to', { target: { type: 'ref', ref: buy } }, { label: 'scroll_to buy' });
  x = await b.call('left_click', { target: { type: 'ref', ref: buy } }, { ok: false, label: 'left_click in a denied region' });
  expect('left_click in a denied region', /regions\[buy-zone\]/.test(x.text) && !logOf(x).includes('click@buy'), `${x.text} / ${logOf(x)}`);
  x = await b.call('javascript_exec', { text: 'document.title' }, { ok: false, label: 'javascript_exec by default' });
  expect('javascript_exec by default', /refused/.test(x.text), x.text);
  x = await b.call('file_upload', { target: { type: 'ref', ref: file }, paths: ['/etc/passwd'] }, { ok: false, label: 'file_upload /etc/passwd' });

  // References are the document's: stale after a navigation.
  x = await b.call('navigate', { url: `${S}/two.html` }, { label: 'navigate two' });
  x = await b.call('left_click', { target: { type: 'ref', ref: go } }, { ok: false, label: 'stale ref' });
  expect('stale ref', /stale/.test(x.text), x.text);
  x = await b.call('navigate', { url: 'back' }, { label: 'navigate back' });
  expect('navigate back', x.active && x.active.url === `${S}/index.html`, JSON.stringify(x.active));
  x = await b.call('navigate', { url: 'forward' }, { label: 'navigate forward' });
  expect('navigate forward', x.active && x.active.url === `${S}/two.html`, JSON.stringify(x.active));
  x = await b.call('navigate', { url: 'reload' }, { label: 'navigate reload' });

  // Denied: navigate, a new tab's navigate; the evil site sees nothing.
  x = await b.call('navigate', { url: `http://evil.test:${evil.port}/index.html` }, { ok: false, label: 'navigate denied' });
  expect('navigate denied', /urls\.deny/.test(x.text), x.text);
  x = await b.call('new_tab', {});
  const opened = x.state && (x.state.state_changes || []).find((c) => c.type === 'tab_opened');
  expect('new_tab', opened && x.active && x.active.tab_id === opened.tab_id, JSON.stringify(x.state));
  x = await b.call('navigate', { url: `http://evil.test:${evil.port}/two.html`, tab_id: opened && opened.tab_id }, { ok: false, label: 'new tab navigate denied' });
  x = await b.call('list_tabs', {});
  expect('list_tabs', x.text.includes(home) && opened && x.text.includes(opened.tab_id), x.text);
  x = await b.call('switch_tab', { tab_id: home });
  expect('switch_tab', x.active && x.active.tab_id === home, JSON.stringify(x.state));
  x = await b.call('close_tab', { tab_id: opened ? opened.tab_id : 'none' });
  expect('close_tab', x.state && !x.state.tabs.some((t) => opened && t.tab_id === opened.tab_id), JSON.stringify(x.state));
  await b.call('switch_tab', { tab_id: 'NOSUCHTAB' }, { ok: false, label: 'unknown tab' });
  await b.call('read_page', { tab_id: 'NOSUCHTAB' }, { ok: false, label: 'unknown tab_id' });

  // A link that opens a tab: tab_opened in the answer of the click.
  x = await b.call('navigate', { url: `${S}/index.html`, tab_id: home }, { label: 'navigate home' });
  const link = refOf((await b.call('find', { query: 'open two link' }, { label: 'find link' })).text, /Open two/);
  x = await b.call('left_click', { target: { type: 'ref', ref: link } }, { label: 'left_click a target=_blank link' });
  await b.call('wait', { duration: 1 }, { label: 'wait for the tab' });
  x = await b.call('list_tabs', {}, { label: 'list_tabs after the link' });
  expect('target=_blank', x.state && x.state.tabs.some((t) => t.url === `${S}/two.html`), JSON.stringify(x.state));

  // A tree over the cap: a clear error, and the session goes on.
  await b.call('navigate', { url: `${S}/big.html` }, { label: 'navigate big' });
  x = await b.call('read_page', { filter: 'all' }, { ok: false, label: 'read_page over the cap' });
  expect('read_page over the cap', /50000 characters/.test(x.text), x.text);
  x = await b.call('read_page', { filter: 'interactive' }, { label: 'read_page after the cap' });
  expect('read_page after the cap', /button "button number 0/.test(x.text), x.text.slice(0, 200));
  if (b.outOfTurn) fail('socket', `${b.outOfTurn} event(s) arrived on the agent socket ahead of an answer`);
  await b.end();

  // The recording keeps the member, the element it was aimed at (role,
  // name, box, point) and the tabs after it.
  const events = await gw.events(b.id);
  const click = events.find((e) => e.type === 'action' && e.member === 'left_click' && e.element &&
    e.element.name === 'Go');
  expect('recording', click && click.toolset === 'browser' && click.element.role === 'button' &&
    click.element.box.length === 4 && click.action.ref === click.element.ref &&
    click.action.x === click.element.point[0] && click.browser_state && click.browser_state.tabs.length >= 1,
    `no left_click event with its element: ${JSON.stringify(click || events.filter((e) => e.type === 'action').slice(0, 2)).slice(0, 600)}`);
  const refused = events.find((e) => e.type === 'action' && e.verdict === 'deny' && e.rule === 'regions[buy-zone]');
  expect('recording', refused && refused.element && refused.element.name === 'Buy now', 'the refused click on Buy now is not recorded with its element');
}

async function scripting(gw, shop, ts, covered) {
  const S = `http://shop.test:${shop.port}`;
  const b = await Browser.open(gw, { profile: 'browser', policy: 'tools', tools: [{ type: 'browser_toolset_20260801' }] }, ts, covered);
  say(`session ${b.id} (policy tools: javascript and file_upload allowed)`);
  await b.call('navigate', { url: `${S}/index.html` });
  let x = await b.call('javascript_exec', { text: 'document.querySelectorAll("button").length' });
  expect('javascript_exec', /^3$/m.test(x.text), x.text);
  await b.call('javascript_exec', { text: 'fetch("/x")' }, { ok: false, label: 'javascript_exec denied by javascript.deny' });
  x = await b.call('middle_click', { target: { type: 'coordinate', x: 450, y: 180 } });
  await sees(b, x, 'middle_click', (log) => log.some((e) => e.startsWith('auxclick')));
  x = await b.call('read_console', {});
  expect('read_console', /\[log\].*shop ready 42/.test(x.text), x.text);
  x = await b.call('read_console', {}, { label: 'read_console again' });
  expect('read_console again', /no console output since the last read/.test(x.text), x.text);
  x = await b.call('read_network', {});
  expect('read_network', /index\.html/.test(x.text), x.text);
  const file = refOf((await b.call('find', { query: 'attachment' }, { label: 'find file' })).text, /Attachment/);
  await b.exec(['sh', '-c', 'printf hello > /tmp/upload.txt']);
  x = await b.call('file_upload', { target: { type: 'ref', ref: file }, paths: ['/tmp/upload.txt'] });
  await sees(b, x, 'file_upload', (log) => log.includes('change@file=upload.txt/5'));
  await b.call('file_upload', { target: { type: 'ref', ref: file }, paths: ['/etc/passwd'] }, { ok: false, label: 'file_upload outside the scratch' });
  await b.call('file_upload', { target: { type: 'ref', ref: file }, document_ids: ['doc_1'] }, { ok: false, label: 'file_upload document_ids' });
  if (b.outOfTurn) fail('socket', `${b.outOfTurn} event(s) arrived on the agent socket ahead of an answer`);
  await b.end();
}

async function main() {
  const { names, blocks } = sdkMembers();
  say(`${names.length} browser toolset members in the SDK`);
  const shop = await site('shop.test'), evil = await site('evil.test');
  const base = {
    version: 1, default: 'allow',
    urls: { allow: [`http://shop.test:${shop.port}/**`, 'about:blank'.startsWith('about') ? `http://shop.test:${shop.port}/**` : ''], deny: [`http://evil.test:${evil.port}/**`] },
    regions: [{ name: 'buy-zone', rect: [0, 300, 1280, 100], actions: ['click'], verdict: 'deny', reason: 'buying is off limits' }],
    egress: { allow: [`shop.test:${shop.port}`, `evil.test:${evil.port}`] },
  };
  const tools = JSON.parse(JSON.stringify(base));
  tools.actions = { allow: ['javascript', 'file_upload'] };
  tools.javascript = { deny: ['fetch\\('] };
  const gw = new Gateway(bin, {
    policies: { default: base, tools },
    resolve: [`shop.test:${shop.port}=127.0.0.1:${shop.port}`, `evil.test:${evil.port}=127.0.0.1:${evil.port}`],
  });
  process.on('exit', () => gw.killNow());
  await gw.start();
  const ts = [], covered = new Set();
  try {
    await shopping(gw, shop, evil, ts, covered);
    await scripting(gw, shop, ts, covered);
  } catch (e) {
    fail('run', e.stack || String(e));
  }
  if (failures.length) console.error(`the gateway's log (last 3000 bytes):\n${gw.log.slice(-3000)}`);
  await gw.stop();
  shop.srv.close();
  evil.srv.close();
  if (evil.log.length) fail('denied site', `evil.test saw ${evil.log.length} request(s): ${evil.log.slice(0, 5).join(', ')}`);
  for (const n of names) if (!covered.has(n)) fail('coverage', `the SDK's member ${n} is not exercised`);

  const file = path.join(work, 'browser.ts');
  const lines = ts.map((d, i) => d.kind === 'q'
    ? `export const q${i}: Anthropic.Beta.${blocks[d.name] || 'BetaBrowserToolUseBlock'} = ${JSON.stringify(d.v)};`
    : `export const a${i}: Anthropic.Beta.BetaToolResultBlockParam = ${JSON.stringify(d.v)};`);
  fs.mkdirSync(work, { recursive: true });
  fs.writeFileSync(file, "import Anthropic from '@anthropic-ai/sdk';\n" + lines.join('\n') + '\n');
  const link = path.join(work, 'node_modules');
  if (!fs.existsSync(link)) fs.symlinkSync(modules, link);
  fs.writeFileSync(path.join(work, 'tsconfig.browser.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', skipLibCheck: true, types: [] },
    files: ['browser.ts'],
  }, null, 2));
  const tsc = spawnSync(path.join(modules, '.bin', 'tsc'), ['-p', path.join(work, 'tsconfig.browser.json'), '--noEmit', '--strict', '--pretty', 'false'], { encoding: 'utf8' });
  const errors = (tsc.stdout + tsc.stderr).split('\n').filter((l) => /error TS\d+/.test(l));
  say(`tsc: ${ts.length} declarations in ${file}, ${errors.length} type errors (exit ${tsc.status})`);
  for (const e of errors.slice(0, 40)) fail('tsc', e);
  if (tsc.status !== 0 && !errors.length) fail('tsc', `exit ${tsc.status}: ${tsc.stdout}${tsc.stderr}${tsc.error || ''}`);
  if (failures.length) {
    console.error(`\nbrowser toolset: ${failures.length} failure(s):\n  ${failures.join('\n  ')}`);
    process.exit(1);
  }
  say(`browser toolset: ${covered.size} members, ${ts.length / 2} calls answered as the SDK types them, zero type errors`);
}

main().catch((e) => { console.error(`browser toolset: ${e.stack || e}`); process.exit(1); });
