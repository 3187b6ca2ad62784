// bench peer_click: click -> the screenshot after it, through deskgate's
// agent WebSocket, against what a browser-use user would pick instead of a
// gateway: Playwright driving a local headless Chromium directly,
// `page.mouse.click` then `page.screenshot()` (issue 22's "peers in the
// table"). Not a test: it prints numbers.
//
//   node tests/bench/peer_click.js build/deskgate [ROUNDS]
//
// Both show the same static page at the same size (1280x800), both run at
// once and take turns round by round (which goes first alternating), so a
// machine drifting in speed moves both alike. deskgate: a browser session's
// agent sends a canonical `click`; timed from the send to the PNG after its
// result (the answer comes once the page has drawn two frames and the
// screen settled: docs/agents.md, "When the answer comes"). Playwright:
// the click and the screenshot awaited one after the other, as its users
// write them. Needs root (deskgate serve) and tests/web/node_modules
// (playwright-core, ws; `npm ci` there).
'use strict';
const http = require('http');
const os = require('os');
const path = require('path');

const bin = process.argv[2];
const rounds = Number(process.argv[3] || 60);
if (!bin) {
	console.error('usage: node tests/bench/peer_click.js DESKGATE_BINARY [ROUNDS]');
	process.exit(2);
}
const modules = path.join(__dirname, '..', 'web', 'node_modules');
const { chromium } = require(path.join(modules, 'playwright-core'));
const { openBrowserSession } = require(path.join(__dirname, 'browser_session.js'));

const W = 1280, H = 800;
// A flat page that changes nothing when clicked: the click's cost alone.
const html = '<!doctype html><title>bench</title><style>html,body{margin:0;height:100%;' +
	'background:#3a7ca5;color:white;font:16px sans-serif}</style><h1>deskgate bench</h1>';
// Two blank spots inside the page in both setups (deskgate's page starts
// below the browser's toolbar); clicks alternate between them.
const spots = [[400, 500], [700, 550]];

// The page, served on loopback to both (deskgate's jail reaches it as
// bench.test through its egress proxy; a data: URL is no URL a policy
// lets a desktop open).
function site() {
	const srv = http.createServer((req, res) => {
		res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
		res.end(html);
	});
	return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

const pct = (xs, p) => {
	const s = [...xs].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

async function viaPlaywright(port) {
	const browser = await chromium.launch({ executablePath: process.env.DG_CHROMIUM || '/usr/bin/chromium',
		headless: true, args: ['--no-sandbox'] });
	const page = await browser.newPage({ viewport: { width: W, height: H } });
	await page.goto(`http://127.0.0.1:${port}/`);
	let i = 0;
	return {
		async once() {
			const [x, y] = spots[i++ % 2];
			const t = process.hrtime.bigint();
			await page.mouse.click(x, y);
			const png = await page.screenshot();
			const ms = Number(process.hrtime.bigint() - t) / 1e6;
			if (png.length < 100)
				throw new Error('playwright: no screenshot');
			return ms;
		},
		close: () => browser.close(),
	};
}

async function viaDeskgate(port) {
	const { act, close } = await openBrowserSession(bin, port, W, H);
	try {
		const { result: nav } = await act({ type: 'navigate', url: `http://bench.test:${port}/` });
		if (!nav || !nav.ok)
			throw new Error('deskgate: navigate failed: ' + JSON.stringify(nav));
	} catch (e) {
		await close();
		throw e;
	}
	let i = 0;
	return {
		async once() {
			const [x, y] = spots[i++ % 2];
			const t = process.hrtime.bigint();
			const { result: r } = await act({ type: 'click', x, y });
			const ms = Number(process.hrtime.bigint() - t) / 1e6;
			if (!r || !r.ok || !r.frame)
				throw new Error('deskgate: click failed: ' + JSON.stringify(r));
			return ms;
		},
		close,
	};
}

(async () => {
	const srv = await site();
	const port = srv.address().port;
	const a = await viaPlaywright(port);
	let b;
	try {
		b = await viaDeskgate(port);
	} catch (e) {
		await a.close();
		throw e;
	}
	const pw = [], dg = [];
	try {
		for (let i = 0; i < 5; i++) { // warm both
			await a.once();
			await b.once();
		}
		for (let i = 0; i < rounds; i++) {
			if (i % 2) {
				pw.push(await a.once());
				dg.push(await b.once());
			} else {
				dg.push(await b.once());
				pw.push(await a.once());
			}
		}
	} finally {
		await b.close();
		await a.close();
		srv.close();
	}
	const row = (xs) => `p50 ${pct(xs, 0.5).toFixed(1)} ms  p90 ${pct(xs, 0.9).toFixed(1)} ms`;
	console.log(`click -> screenshot after it, ${rounds} rounds each, taking turns (load ${os.loadavg()[0].toFixed(2)}):`);
	console.log(`  Playwright, local headless Chromium (mouse.click + screenshot):  ${row(pw)}`);
	console.log(`  deskgate, agent WebSocket (click, settled screenshot):           ${row(dg)}`);
	console.log(`  deskgate is ${(pct(pw, 0.5) / pct(dg, 0.5)).toFixed(2)}x as fast at p50 (issue 22's target: 4x)`);
	// For the table (tests/bench/table.py), when asked.
	if (process.env.DG_BENCH_JSON)
		require('fs').writeFileSync(process.env.DG_BENCH_JSON, JSON.stringify({ rounds, load: os.loadavg()[0],
			playwright_p50_ms: pct(pw, 0.5), deskgate_p50_ms: pct(dg, 0.5) }));
})().catch((e) => {
	console.error(e.stack || String(e));
	process.exit(1);
});
