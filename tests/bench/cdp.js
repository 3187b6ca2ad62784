// bench cdp: what deskgate's CDP endpoint adds to a command's round trip
// (issue 18: p50 at most 0.3 ms added), measured in one run against the
// same command on a Chromium launched directly with
// --remote-debugging-pipe (what Playwright does locally). Not a test: it
// prints numbers.
//
//   node tests/bench/cdp.js build/deskgate [ROUNDS]
//
// Both sides: attach to the page target (flatten), then ROUNDS sequential
// `Runtime.evaluate "1"` on its session, each timed from send to reply.
// deskgate's side goes client -> gateway -> worker (parsed, decided by the
// gateway's policy, recorded) -> Chromium and back. Needs root (deskgate
// serve) and tests/cdp/node_modules (ws; `npm ci` there).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const bin = process.argv[2];
const rounds = Number(process.argv[3] || 2000);
// Both browsers were just started (deskgate's with its desktop, recording
// and first page): their first seconds run slower and in bursts (p99 31 ms
// over the first 1,000 rounds, 4 ms over the next 5,000). The figure is the
// steady state: pairs are taken after WARM_MS and WARM_ROUNDS of turns.
const WARM_MS = 3000, WARM_ROUNDS = 300;
if (!bin) {
	console.error('usage: node tests/bench/cdp.js DESKGATE_BINARY [ROUNDS]');
	process.exit(2);
}
const modules = path.join(__dirname, '..', 'cdp', 'node_modules');
const WebSocket = require(path.join(modules, 'ws'));
const { Gateway, TOKENS } = require(path.join(__dirname, '..', 'web', 'lib', 'gateway.js'));

const pct = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

// A CDP connection over any transport: send(json string), onmessage.
function client(send) {
	let next = 1;
	const waiting = new Map();
	return {
		receive(text) {
			const m = JSON.parse(text);
			if (m.id !== undefined && waiting.has(m.id)) {
				waiting.get(m.id)(m);
				waiting.delete(m.id);
			}
		},
		call(method, params, sessionId) {
			const id = next++;
			return new Promise((resolve) => {
				waiting.set(id, resolve);
				send(JSON.stringify({ id, method, params, sessionId }));
			});
		},
	};
}

// Attaches to c's page target (flatten); returns one timed round trip.
async function prepare(c) {
	const { result } = await c.call('Target.getTargets');
	const page = result.targetInfos.find((t) => t.type === 'page');
	const { result: { sessionId } } = await c.call('Target.attachToTarget', { targetId: page.targetId, flatten: true });
	const once = async () => {
		const t = process.hrtime.bigint();
		const r = await c.call('Runtime.evaluate', { expression: '1' }, sessionId);
		const ms = Number(process.hrtime.bigint() - t) / 1e6;
		if (!r.result)
			throw new Error('Runtime.evaluate failed: ' + JSON.stringify(r));
		return ms;
	};
	for (let i = 0; i < 20; i++)
		await once();
	return once;
}

async function direct() {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-bench-cdp-'));
	const chrome = spawn(process.env.DG_CHROMIUM || '/usr/bin/chromium', ['--headless=new', '--no-sandbox',
		'--remote-debugging-pipe', `--user-data-dir=${dir}`, 'about:blank'],
	{ stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'], detached: true });
	let buf = '';
	const c = client((s) => chrome.stdio[3].write(s + '\0'));
	chrome.stdio[4].on('data', (d) => {
		buf += d.toString();
		let k;
		while ((k = buf.indexOf('\0')) >= 0) {
			c.receive(buf.slice(0, k));
			buf = buf.slice(k + 1);
		}
	});
	try {
		for (;;) { // the first page appears shortly after the start
			const { result } = await c.call('Target.getTargets');
			if (result.targetInfos.some((t) => t.type === 'page'))
				break;
			await new Promise((r) => setTimeout(r, 50));
		}
		return { once: await prepare(c), close };
	} catch (e) {
		await close();
		throw e;
	}
	async function close() {
		// Its own process group: its helpers go with it, and stop
		// writing the profile before it is removed.
		const gone = new Promise((r) => chrome.once('exit', r));
		try { process.kill(-chrome.pid, 'SIGKILL'); } catch (e) { /* gone already */ }
		await gone;
		fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
	}
}

async function through_deskgate() {
	const gw = new Gateway(bin, { policies: { default: { version: 1, default: 'allow', actions: { allow: ['javascript'] } } } });
	process.on('exit', () => gw.killNow());
	await gw.start();
	try {
		const s = await gw.api('POST', '/v1/sessions', TOKENS.agent, { profile: 'browser' }, 201);
		const ws = new WebSocket(`${gw.base.replace('http', 'ws')}/v1/sessions/${s.id}/cdp`,
			{ headers: { Authorization: `Bearer ${TOKENS.agent}` }, maxPayload: 64 << 20 });
		await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
		const c = client((t) => ws.send(t));
		ws.on('message', (d) => c.receive(d.toString()));
		return { once: await prepare(c), close: async () => { ws.close(); await gw.stop(); } };
	} catch (e) {
		await gw.stop();
		throw e;
	}
}

// Both sides run at once and take turns, one command each (which goes
// first alternating), so a machine drifting in speed moves both alike;
// the added time is the median of the pairs' differences.
(async () => {
	const a = await direct();
	let b;
	try {
		b = await through_deskgate();
	} catch (e) {
		await a.close();
		throw e;
	}
	const da = [], db = [], diff = [], warm = [];
	const turn = async (i) => {
		if (i % 2)
			return [await a.once(), await b.once()];
		const y = await b.once();
		return [await a.once(), y];
	};
	try {
		const t0 = Date.now();
		for (let i = 0; i < WARM_ROUNDS || Date.now() - t0 < WARM_MS; i++) {
			const [x, y] = await turn(i);
			warm.push(y - x);
		}
		for (let i = 0; i < rounds; i++) {
			const [x, y] = await turn(i);
			da.push(x);
			db.push(y);
			diff.push(y - x);
		}
	} finally {
		await b.close();
		await a.close();
	}
	console.log(`cdp round trip, Runtime.evaluate "1", ${rounds} rounds each after ${WARM_MS / 1000} s of warm-up, taking turns (load ${os.loadavg()[0].toFixed(2)}):`);
	const row = (xs) => [50, 90, 99].map((p) => `p${p} ${pct(xs, p / 100).toFixed(3)} ms`).join('  ') +
		`  over 5 ms: ${xs.filter((x) => x > 5).length}`;
	console.log(`  chromium pipe, direct:  ${row(da)}`);
	console.log(`  through deskgate:       ${row(db)}`);
	console.log(`  added by deskgate:      p50 ${pct(diff, 0.5).toFixed(3)} ms of the pairs (p50s: ${(pct(db, 0.5) - pct(da, 0.5)).toFixed(3)} ms; target 0.3 ms)`);
	if (process.env.DG_BENCH_JSON)
		fs.writeFileSync(process.env.DG_BENCH_JSON, JSON.stringify({ rounds, load: os.loadavg()[0],
			direct_p50_ms: pct(da, 0.5), deskgate_p50_ms: pct(db, 0.5), added_p50_ms: pct(diff, 0.5),
			warm_added_p50_ms: pct(warm, 0.5) }));
	console.log(`  in the warm-up:         p50 ${pct(warm, 0.5).toFixed(3)} ms added, p99 ${pct(warm, 0.99).toFixed(3)} ms, over ${warm.length} pairs (not counted above)`);
})().catch((e) => {
	console.error(e.stack || String(e));
	process.exit(1);
});
