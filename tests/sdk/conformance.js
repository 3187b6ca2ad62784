'use strict';
// The SDK conformance suite (ctest: sdk/conformance; tests/sdk/run.sh).
//
// The action variants come from the installed SDKs' type definitions
// (package-lock.json pins them): every member of the Anthropic computer
// toolset (BetaComputerToolUseBlock: its name and its input type's fields)
// and every OpenAI ComputerAction variant (its fields, each value of an
// enum field). Each variant is sent verbatim over the agent WebSocket to a
// real xterm and a real browser session of a gateway this test starts:
// Anthropic ones as the toolset's member block and as the computer tool's
// block ({name: "computer", input: {action, ...}}), OpenAI ones as a
// computer_call. Every answer must come (in turn), be ok unless the variant
// is one deskgate cannot perform there (then a clear error, listed in
// REFUSED), and carry a PNG screenshot; in the browser a test page logs the
// input events it receives and each input variant must have reached it.
// Last, every request and every answer is written into a .ts file typed
// with the SDKs' own types (BetaToolUseBlock, BetaComputerToolUseBlock,
// BetaToolResultBlockParam; ResponseComputerToolCall,
// ResponseInputItem.ComputerCallOutput and Message) and `tsc --noEmit
// --strict` must find no error. Base64 image data is checked here (a PNG
// of the display's size) and shortened in the .ts file (a string either
// way) to keep it small.
//
//   node conformance.js DESKGATE_BINARY WORK_DIR

const fs = require('node:fs');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const { Gateway, waitFor } = require('../web/lib/gateway.js');
const { Socket, pngSize, forTs } = require('./socket.js');

const bin = process.argv[2];
const work = process.argv[3];
if (!bin || !work) {
  console.error('usage: node conformance.js DESKGATE_BINARY WORK_DIR');
  process.exit(2);
}
const here = __dirname;
const modules = path.join(here, 'node_modules');
const DISPLAY = { width: 1024, height: 640 };
const DESKTOP = { width: 1280, height: 800 };
const t0 = Date.now();
const say = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${s}`);

// ---- the SDKs' types -------------------------------------------------------

function read(rel) {
  return fs.readFileSync(path.join(modules, rel), 'utf8');
}

function stripComments(s) {
  return s.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
}

// Fields of an interface body: [{name, optional, type}].
function fields(body) {
  const out = [];
  for (const line of stripComments(body).split('\n')) {
    const m = /^\s*(\w+)(\??):\s*(.+?);\s*$/.exec(line);
    if (m) out.push({ name: m[1], optional: m[2] === '?', type: m[3] });
  }
  return out;
}

function stringLiterals(type) {
  return [...type.matchAll(/'([^']*)'/g)].map((m) => m[1]);
}

// The Anthropic computer toolset's members: [{name, fields}], from
// BetaComputerToolUseBlock's union and each block's input type; and the
// newest single computer tool type, for the record.
function anthropicMembers() {
  const src = read('@anthropic-ai/sdk/resources/beta/messages/messages.d.ts');
  const iface = (name) => {
    const m = new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`).exec(src);
    if (!m) throw new Error(`@anthropic-ai/sdk: interface ${name} not found`);
    return fields(m[1]);
  };
  const alias = (name) => {
    const m = new RegExp(`export type ${name} = ([^;]+);`).exec(src);
    return m ? m[1] : null;
  };
  const union = alias('BetaComputerToolUseBlock');
  if (!union) throw new Error('@anthropic-ai/sdk: BetaComputerToolUseBlock not found');
  const members = [];
  for (const block of union.split('|').map((s) => s.trim())) {
    const f = iface(block);
    const name = stringLiterals(f.find((x) => x.name === 'name').type)[0];
    const inputType = f.find((x) => x.name === 'input').type;
    const inFields = iface(inputType).map((x) => {
      const a = alias(x.type);
      return { ...x, values: a ? stringLiterals(a) : stringLiterals(x.type) };
    });
    members.push({ name, fields: inFields, block });
  }
  const tools = [...src.matchAll(/type: '(computer_\d{8})'/g)].map((m) => m[1]).sort();
  return { members, newestTool: tools[tools.length - 1] };
}

// OpenAI's ComputerAction variants: [{type, fields}].
function openaiActions() {
  const src = stripComments(read('openai/resources/responses/responses.d.ts'));
  const start = src.indexOf('export declare namespace ComputerAction {');
  if (start < 0) throw new Error('openai: namespace ComputerAction not found');
  const lines = src.slice(start).split('\n');
  const out = [];
  let depth = 0, cur = null;
  for (const line of lines) {
    const opens = (line.match(/\{/g) || []).length, closes = (line.match(/\}/g) || []).length;
    if (depth === 1 && /^\s*interface (\w+) \{/.test(line)) cur = { iface: /interface (\w+)/.exec(line)[1], fields: [] };
    else if (depth === 2 && cur) {
      const f = fields(line);
      if (f.length) cur.fields.push({ ...f[0], values: stringLiterals(f[0].type) });
    }
    depth += opens - closes;
    if (depth === 1 && cur) {
      cur.type = cur.fields.find((x) => x.name === 'type').values[0];
      out.push(cur);
      cur = null;
    }
    if (depth === 0) break;
  }
  if (out.length < 5) throw new Error(`openai: only ${out.length} ComputerAction variants parsed`);
  return out;
}

// ---- values for the fields --------------------------------------------------
//
// Model coordinates on the 1024x640 display; a field the table does not know
// fails the test: a new SDK field must be thought about, not skipped.

const POINTER_MODS = 'shift';
function anthropicValue(member, field, variant) {
  const v = {
    coordinate: variant === 'real' ? [512.5, 320.4] : [512, 320],
    start_coordinate: [400, 250],
    region: variant === 'real' ? [0, 0, 512.5, 320] : [0, 0, 512, 320],
    scroll_amount: variant === 'real' ? 1.5 : 2,
    duration: member === 'wait' ? 0.2 : 0.3,
    repeat: 2,
  };
  if (field === 'text') {
    if (member === 'type') return 'hi';
    if (member === 'key') return 'ctrl+a';
    if (member === 'hold_key') return 'shift';
    return POINTER_MODS;
  }
  if (field in v) return v[field];
  throw new Error(`no value for ${member}.${field}: teach tests/sdk/conformance.js this field of the SDK`);
}

// Variants of one member: required fields only, every field, every optional
// field null, non-integer numbers, each value of an enum field.
function anthropicVariants(m) {
  const out = [];
  const build = (variant, pick, enumField, enumValue) => {
    const input = {};
    for (const f of m.fields) {
      if (!pick(f)) continue;
      if (f.values.length) input[f.name] = f.name === enumField ? enumValue : f.values[0];
      else input[f.name] = variant === 'null' && f.optional ? null : anthropicValue(m.name, f.name, variant);
    }
    return { label: `${m.name}/${variant}${enumField ? `=${enumValue}` : ''}`, input };
  };
  out.push(build('required', (f) => !f.optional));
  if (m.fields.some((f) => f.optional)) {
    out.push(build('all', () => true));
    out.push(build('null', () => true));
  }
  if (m.fields.some((f) => /number/.test(f.type) && ['coordinate', 'region', 'scroll_amount'].includes(f.name))) out.push(build('real', () => true));
  for (const f of m.fields) for (const val of f.values.slice(1)) out.push(build('required', (g) => !g.optional || g === f, f.name, val));
  return out;
}

function openaiValue(type, field, variant) {
  const real = variant === 'real';
  switch (field) {
    case 'x': return real ? 640.5 : 640;
    case 'y': return real ? 400.4 : 400;
    case 'keys': return type === 'keypress' ? ['CTRL', 'A'] : ['SHIFT'];
    case 'text': return 'hi';
    case 'scroll_x': return 0;
    case 'scroll_y': return real ? 200.5 : 200;
    case 'path': return [{ x: 300, y: 250 }, { x: real ? 500.5 : 500, y: 300 }];
    default: throw new Error(`no value for openai ${type}.${field}: teach tests/sdk/conformance.js this field of the SDK`);
  }
}

function openaiVariants(a) {
  const out = [];
  const build = (variant, pick, enumField, enumValue) => {
    const action = { type: a.type };
    for (const f of a.fields) {
      if (f.name === 'type' || !pick(f)) continue;
      if (f.values.length) action[f.name] = f.name === enumField ? enumValue : f.values[0];
      else if (variant === 'null' && /\| null/.test(f.type)) action[f.name] = null;
      else action[f.name] = openaiValue(a.type, f.name, variant);
    }
    return { label: `${a.type}/${variant}${enumField ? `=${enumValue}` : ''}`, action };
  };
  out.push(build('required', (f) => !f.optional));
  if (a.fields.some((f) => f.optional || /\| null/.test(f.type))) {
    out.push(build('all', () => true));
    out.push(build('null', () => true));
  }
  if (a.fields.some((f) => ['x', 'scroll_y', 'path'].includes(f.name))) out.push(build('real', () => true));
  for (const f of a.fields) {
    if (f.name === 'type') continue;
    for (const val of f.values.slice(1)) out.push(build('required', (g) => !g.optional, f.name, val));
  }
  return out;
}

// ---- what each variant does to the test page --------------------------------

// The input events a variant must cause on the page (any one of them), or
// null for variants with no input (screenshot, wait, zoom, cursor).
function anthropicEffect(member) {
  return {
    key: ['keydown'], hold_key: ['keydown'], type: ['input'], mouse_move: ['mousemove'],
    left_mouse_down: ['mousedown'], left_mouse_up: ['mouseup'], left_click: ['click'],
    left_click_drag: ['mouseup'], right_click: ['contextmenu'], middle_click: ['auxclick'],
    double_click: ['dblclick'], triple_click: ['click'], scroll: ['wheel'],
  }[member] || null;
}
function openaiEffect(action) {
  if (action.type === 'click') return { left: ['click'], right: ['contextmenu'], wheel: ['auxclick'] }[action.button] || null;
  return { double_click: ['dblclick'], drag: ['mouseup'], keypress: ['keydown'], move: ['mousemove'], scroll: ['wheel'], type: ['input'] }[action.type] || null;
}

// Variants deskgate cannot perform in a profile, and the error they must get.
const REFUSED = [
  { profile: 'xterm', wire: 'openai', test: (a) => a.type === 'click' && (a.button === 'back' || a.button === 'forward'), error: /browser/ },
];

// The page: every input event logged; the title shows the count and the
// last 16 events' types, so the test reads what arrived since an action.
const PAGE = 'data:text/html,' + encodeURIComponent(`<!doctype html><html><head><title>log:0:</title>
<style>html,body{margin:0;height:100%;background:#eee}textarea{position:absolute;left:0;top:0;width:1280px;height:800px;border:0;background:#eef}</style>
</head><body><textarea id=t></textarea><script>
var log=[];
function note(e){log.push(e.type);document.title='log:'+log.length+':'+log.slice(-16).join(',')}
['mousedown','mouseup','click','dblclick','auxclick','contextmenu','wheel','keydown','keyup','input','mousemove'].forEach(function(t){document.addEventListener(t,note,true)});
document.addEventListener('contextmenu',function(e){e.preventDefault()});
document.addEventListener('dragstart',function(e){e.preventDefault()});
document.addEventListener('wheel',function(e){e.preventDefault()},{passive:false});
document.getElementById('t').focus();
</script></body></html>`).replace(/'/g, '%27');

// ---- checks --------------------------------------------------------------------

const failures = [];
function fail(label, msg) {
  failures.push(`${label}: ${msg}`);
  say(`FAIL ${label}: ${msg}`);
}

// The PNG of an answer must be the display's size (a zoom: inside it).
function checkImage(label, b64, zoom) {
  const size = b64 ? pngSize(b64) : null;
  if (!size) return fail(label, 'no PNG screenshot in the answer');
  const ok = zoom ? size[0] <= DISPLAY.width && size[1] <= DISPLAY.height && (size[0] === DISPLAY.width || size[1] === DISPLAY.height)
    : size[0] === DISPLAY.width && size[1] === DISPLAY.height;
  if (!ok) fail(label, `screenshot ${size.join('x')}, the display is ${DISPLAY.width}x${DISPLAY.height}`);
}

function logOf(title) {
  const m = /^log:(\d+):(.*)$/.exec(title);
  return m ? { n: Number(m[1]), last: m[2] ? m[2].split(',') : [] } : null;
}

// Waits (bounded) until the page logged one of `want` after `before`.
async function checkEffect(sock, label, before, want) {
  let got = null;
  try {
    await waitFor(`${want.join('|')} on the page`, async () => {
      got = logOf(await sock.title());
      if (!got || got.n <= before.n) return false;
      const fresh = got.last.slice(-Math.min(got.n - before.n, 16));
      return want.some((w) => fresh.includes(w));
    }, 5000, 50);
  } catch (e) {
    fail(label, `accepted, but the page never saw ${want.join(' or ')} (log ${JSON.stringify(got)})`);
  }
}

// ---- the run -------------------------------------------------------------------

async function runSession(gw, profile, variants, ts) {
  const sock = await Socket.open(gw, { profile, display: DISPLAY });
  say(`${profile}: session ${sock.id}`);
  const browser = profile === 'browser';
  const toPage = async () => {
    await sock.act({ type: 'navigate', url: PAGE });
    await waitFor('the test page', async () => (await sock.title()).startsWith('log:'), 15000, 50);
  };
  if (browser) {
    await toPage();
    // A click into the page gives it the keyboard (see the report on the
    // first keys after a navigation).
    await sock.act({ type: 'click', x: 100, y: 100 });
  }
  let n = 0;
  for (const v of variants) {
    const label = `${profile} ${v.wire} ${v.label}`;
    // The pointer somewhere else first, so that a move to the variant's
    // point is a move, and a click there is not counted with the last one
    // (mid-page: at the screen's top edge the fullscreen browser shows its
    // own bar, which takes the pointer's events).
    if (browser) await sock.act({ type: 'move', x: 200 + (n % 2) * 40, y: 600 });
    // A double or triple click right after another at the same point would
    // count on from it (click count 3, 4: no dblclick): past the X
    // double-click time first.
    const multi = ['double_click', 'triple_click'].includes(v.member || (v.action && v.action.type));
    if (browser && multi) await sock.act({ type: 'wait', ms: 600 });
    const before = browser ? logOf(await sock.title()) : null;
    const id = `${v.wire === 'openai' ? 'call' : 'toolu'}_${profile}_${n++}`;
    let msg;
    if (v.wire === 'anthropic-toolset') {
      msg = { type: 'tool_use', id, name: v.member, toolset_name: 'computer', input: v.input, caller: { type: 'direct' } };
      ts.push(`export const q${ts.length}: Anthropic.Beta.BetaComputerToolUseBlock = ${JSON.stringify(msg)};`);
    } else if (v.wire === 'anthropic') {
      msg = { type: 'tool_use', id, name: 'computer', input: { action: v.member, ...v.input }, caller: { type: 'direct' } };
      ts.push(`export const q${ts.length}: Anthropic.Beta.BetaToolUseBlock = ${JSON.stringify(msg)};`);
    } else {
      msg = { type: 'computer_call', id: `cu_${profile}_${n}`, call_id: id, status: 'completed', pending_safety_checks: [], action: v.action };
      ts.push(`export const q${ts.length}: OpenAI.Responses.ResponseComputerToolCall = ${JSON.stringify(msg)};`);
    }
    let ans;
    try {
      ans = await sock.send(msg, 60000);
    } catch (e) {
      fail(label, e.message);
      continue;
    }
    const refusal = REFUSED.find((r) => r.profile === profile && r.wire === (v.wire === 'openai' ? 'openai' : 'anthropic') && r.test(v.action || v.input));
    let ok, texts;
    if (v.wire === 'openai') {
      if (!Array.isArray(ans) || !ans.length || ans[0].type !== 'computer_call_output') { fail(label, `not an item array: ${JSON.stringify(ans).slice(0, 300)}`); continue; }
      if (ans[0].call_id !== id) fail(label, `call_id ${ans[0].call_id}, sent ${id}`);
      texts = ans.slice(1).flatMap((m) => m.content.map((c) => c.text));
      ok = !texts.some((t) => /^deskgate (refused|failed|rejected)/m.test(t));
      checkImage(label, (ans[0].output.image_url || '').replace(/^data:image\/png;base64,/, ''), false);
      const history = v.action.type === 'click' && ['back', 'forward'].includes(v.action.button);
      const urlLine = history ? /^current_url: \S/m : /^current_url: data:text\/html/m;
      if (browser && !texts.some((t) => urlLine.test(t))) fail(label, `no current_url line in ${JSON.stringify(texts)}`);
      ts.push(`export const a${ts.length}: [OpenAI.Responses.ResponseInputItem.ComputerCallOutput, ...OpenAI.Responses.ResponseInputItem.Message[]] = ${JSON.stringify(forTs(ans))};`);
    } else {
      if (ans.type !== 'tool_result') { fail(label, `not a tool_result: ${JSON.stringify(ans).slice(0, 300)}`); continue; }
      if (ans.tool_use_id !== id) fail(label, `tool_use_id ${ans.tool_use_id}, sent ${id}`);
      if ((ans.toolset_name === 'computer') !== (v.wire === 'anthropic-toolset')) fail(label, `toolset_name ${ans.toolset_name}`);
      ok = ans.is_error === false;
      texts = ans.content.filter((c) => c.type === 'text').map((c) => c.text);
      const img = ans.content.find((c) => c.type === 'image');
      // cursor_position answers with its text alone (the SDK's result kind
      // "point"); every other action with the screenshot after it.
      if (v.member !== 'cursor_position') checkImage(label, img && img.source.data, v.member === 'zoom');
      if (v.member === 'cursor_position' && !texts.some((t) => /^X=\d+,Y=\d+$/.test(t))) fail(label, `no X=..,Y=.. in ${JSON.stringify(texts)}`);
      ts.push(`export const a${ts.length}: Anthropic.Beta.BetaToolResultBlockParam = ${JSON.stringify(forTs(ans))};`);
    }
    if (refusal) {
      if (ok) fail(label, 'answered ok, but deskgate cannot perform it here: it must be refused');
      else if (!texts.some((t) => refusal.error.test(t))) fail(label, `refused without the reason: ${JSON.stringify(texts)}`);
      continue;
    }
    if (!ok) { fail(label, `refused: ${JSON.stringify(texts)}`); continue; }
    if (browser) {
      const want = v.wire === 'openai' ? openaiEffect(v.action) : anthropicEffect(v.member);
      if (want) await checkEffect(sock, label, before, want);
      // History moves: back leaves the page (to the one before it), forward
      // comes back to it (they run last, in that order).
      if (v.wire === 'openai' && v.action.type === 'click' && v.action.button === 'back') {
        try {
          await waitFor('the page before', async () => !(await sock.title()).startsWith('log:'), 5000, 50);
        } catch (e) { fail(label, 'accepted, but the page is still there'); }
      }
      if (v.wire === 'openai' && v.action.type === 'click' && v.action.button === 'forward') {
        try {
          await waitFor('the page again', async () => (await sock.title()).startsWith('log:'), 5000, 50);
        } catch (e) { fail(label, 'accepted, but the test page did not come back'); }
      }
    }
  }
  if (sock.outOfTurn) fail(profile, `${sock.outOfTurn} event(s) arrived on the agent socket ahead of an answer`);
  await sock.end();
}

async function main() {
  const { members, newestTool } = anthropicMembers();
  const oa = openaiActions();
  const variants = [];
  // One envelope after the other, members in the SDK's order (a mouse
  // down is followed by its up).
  for (const wire of ['anthropic-toolset', 'anthropic'])
    for (const m of members) for (const v of anthropicVariants(m)) variants.push({ wire, member: m.name, ...v });
  // OpenAI's back and forward buttons last: they leave the test page.
  const ov = oa.flatMap(openaiVariants).map((v) => ({ wire: 'openai', ...v }));
  const hist = (v) => v.action.type === 'click' && ['back', 'forward'].includes(v.action.button);
  variants.push(...ov.filter((v) => !hist(v)), ...ov.filter(hist));
  say(`${members.length} Anthropic toolset members (newest computer tool type ${newestTool}), ${oa.length} OpenAI actions: ${variants.length} variants a session`);

  fs.mkdirSync(work, { recursive: true });
  const gw = new Gateway(bin, { policies: {} });
  process.on('exit', () => gw.killNow());
  await gw.start();
  const ts = [];
  try {
    for (const profile of ['xterm', 'browser']) await runSession(gw, profile, variants, ts);
  } catch (e) {
    fail('run', e.stack || String(e));
  }
  if (failures.length) console.error(`the gateway's log (last 3000 bytes):\n${gw.log.slice(-3000)}`);
  await gw.stop();

  // Type-check every request and answer against the SDKs' own types.
  const file = path.join(work, 'answers.ts');
  fs.writeFileSync(file, "import Anthropic from '@anthropic-ai/sdk';\nimport OpenAI from 'openai';\n" + ts.join('\n') + '\n');
  const link = path.join(work, 'node_modules');
  if (!fs.existsSync(link)) fs.symlinkSync(modules, link);
  fs.writeFileSync(path.join(work, 'tsconfig.json'), JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', skipLibCheck: true, types: [] },
    files: ['answers.ts'],
  }, null, 2));
  const tsc = spawnSync(path.join(modules, '.bin', 'tsc'), ['-p', path.join(work, 'tsconfig.json'), '--noEmit', '--strict', '--pretty', 'false'], { encoding: 'utf8' });
  const errors = (tsc.stdout + tsc.stderr).split('\n').filter((l) => /error TS\d+/.test(l));
  say(`tsc: ${ts.length} declarations in ${file}, ${errors.length} type errors (exit ${tsc.status})`);
  for (const e of errors.slice(0, 40)) fail('tsc', e);
  if (tsc.status !== 0 && !errors.length) fail('tsc', `exit ${tsc.status}: ${tsc.stdout}${tsc.stderr}${tsc.error || ''}`);

  if (failures.length) {
    console.error(`\nsdk conformance: ${failures.length} failure(s):\n  ${failures.join('\n  ')}`);
    process.exit(1);
  }
  say(`sdk conformance: ${variants.length * 2} variants answered as the SDKs type them, zero type errors`);
}

main().catch((e) => { console.error(`sdk conformance: ${e.stack || e}`); process.exit(1); });
