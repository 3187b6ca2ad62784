// bench gate_quiet: clicks through a browser session's agent WebSocket on
// a static page (the worker's pointer gate answers "still": only
// DG_GATE_QUIET_MS after the page's answer), on a page whose click
// repaints a whole canvas in a shadow root (the listener looks for no
// canvas there, so it answers "still" too, and only DG_GATE_QUIET_MS
// stands between the answer and a stale screenshot: this measures that
// period) and on the same canvas in the page's document (a shown canvas
// makes the gate settle the old way: two frames, then the full quiet
// period); counts the canvas screenshots that do not show the click's
// colour. Not a test: it prints numbers.
//
//   node tests/bench/gate_quiet.js build/deskgate [ROUNDS] [PATTERN]
//
// PATTERN: "alternate" (default: two spots, back to back, as
// peer_click.js), "idle" (one spot, 0.6 s between clicks: an agent's
// pace, and no double click) or "first" (ROUNDS fresh canvas documents,
// each loaded, left a second, moved over and clicked once: a document's
// first click, drawn later than the ones after it; only the canvas).
// Needs root and tests/web/node_modules.
'use strict';
const http = require('http');
const path = require('path');
const modules = path.join(__dirname, '..', 'web', 'node_modules');
const { PNG } = require(path.join(modules, 'pngjs'));
const { openBrowserSession } = require(path.join(__dirname, 'browser_session.js'));

const bin = process.argv[2];
const rounds = Number(process.argv[3] || 100);
const idle = process.argv[4] === 'idle';
const first = process.argv[4] === 'first';
if (!bin) {
	console.error('usage: node tests/bench/gate_quiet.js DESKGATE_BINARY [ROUNDS] [alternate|idle|first]');
	process.exit(2);
}
const W = 1280, H = 800;
const RED = [200, 0, 0], BLUE = [0, 0, 200];
const rgb = (c) => `rgb(${c.join(',')})`;
// A page whose every mousedown paints its whole canvas the other colour:
// `body` holds the canvas, `setup` binds it to c.
const canvasPage = (body, setup) => '<!doctype html><style>html,body{margin:0;height:100%;overflow:hidden}</style>' +
	`${body}<script>${setup}let n=0;c.fillStyle="${rgb(RED)}";c.fillRect(0,0,${W},${H});` +
	`addEventListener("mousedown",()=>{n++;c.fillStyle=n%2?"${rgb(BLUE)}":"${rgb(RED)}";c.fillRect(0,0,${W},${H});});</script>`;
const PAGES = {
	'/static': '<!doctype html><style>html,body{margin:0;height:100%;background:#3a7ca5}</style><h1>static</h1>',
	'/shadow': canvasPage('<div id=h></div>', 'const r=document.getElementById("h").attachShadow({mode:"open"});' +
		`r.innerHTML="<canvas width=${W} height=${H}></canvas>";const c=r.firstChild.getContext("2d");`),
	'/canvas': canvasPage(`<canvas id=c width=${W} height=${H}></canvas>`,
		'const c=document.getElementById("c").getContext("2d");'),
};
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

(async () => {
	const srv = http.createServer((q, r) => {
		const page = PAGES[q.url.split('?')[0]];
		r.writeHead(page ? 200 : 404, { 'content-type': 'text/html' });
		r.end(page || '');
	});
	await new Promise((r) => srv.listen(0, '127.0.0.1', r));
	const port = srv.address().port;
	const { act, close } = await openBrowserSession(bin, port, W, H);
	// Whether a canvas screenshot shows `want`, in the page and away from
	// the pointer.
	const shows = (png, want) => {
		const img = PNG.sync.read(png);
		const o = (600 * img.width + 100) * 4;
		return Math.abs(img.data[o] - want[0]) <= 8 && Math.abs(img.data[o + 2] - want[2]) <= 8;
	};
	try {
		if (first) {
			const lat = [];
			let stale = 0;
			for (let i = 0; i < rounds; i++) {
				await act({ type: 'navigate', url: `http://bench.test:${port}/canvas?${i}` });
				await act({ type: 'wait', ms: 1000 });
				await act({ type: 'move', x: 640, y: 130 });
				const t = process.hrtime.bigint();
				const { result: r, png } = await act({ type: 'click', x: 300, y: 440 });
				lat.push(Number(process.hrtime.bigint() - t) / 1e6);
				if (!r || !r.ok || !png)
					throw new Error('click failed: ' + JSON.stringify(r));
				if (!shows(png, BLUE))
					stale++;
			}
			console.log(`gate_quiet: ${rounds} fresh canvas documents, first click p50 ${pct(lat, 0.5).toFixed(1)} ms` +
				`  p90 ${pct(lat, 0.9).toFixed(1)} ms  stale screenshots ${stale} of ${rounds}`);
			return;
		}
		console.log(`gate_quiet: ${rounds} clicks a page, ${idle ? 'one spot, 0.6 s apart' : 'two spots, back to back'}`);
		for (const pg of ['/static', '/shadow', '/canvas']) {
			await act({ type: 'navigate', url: `http://bench.test:${port}${pg}` });
			await sleep(1000);
			const lat = [];
			let stale = 0, presses = 0;
			for (let i = 0; i < rounds + 3; i++) {
				const x = idle ? 500 : 400 + (i % 2) * 300, y = 500;
				const t = process.hrtime.bigint();
				const { result: r, png } = await act({ type: 'click', x, y });
				const ms = Number(process.hrtime.bigint() - t) / 1e6;
				if (!r || !r.ok || !png)
					throw new Error('click failed: ' + JSON.stringify(r));
				presses++;
				if (i >= 3) { // the first inputs on a page settle the slow way
					lat.push(ms);
					if (pg !== '/static' && !shows(png, presses % 2 ? BLUE : RED))
						stale++;
				}
				await sleep(idle ? 600 : 30);
			}
			console.log(`  ${pg.slice(1).padEnd(7)} click p50 ${pct(lat, 0.5).toFixed(1)} ms  p90 ${pct(lat, 0.9).toFixed(1)} ms` +
				(pg !== '/static' ? `  stale screenshots ${stale} of ${lat.length}` : ''));
		}
	} finally {
		await close();
		srv.close();
	}
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
