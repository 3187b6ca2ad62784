// bench read_page: deskgate's read_page (filter "all") on a page of 2,000
// elements, against Playwright's ariaSnapshot of the same page in the same
// run (issue 17: within 150 ms on this machine). Not a test: it prints
// numbers.
//
//   node tests/bench/read_page.js build/deskgate [ROUNDS]
//
// deskgate: one `deskgate desktop` script (navigate, then ROUNDS readings);
// each reading's time is the worker's total_ms (action in to result out,
// the DevTools round trips included). Playwright: playwright-core (from
// tests/web/node_modules, installed by `.ci/bench`) drives Debian's
// Chromium headless on the same HTML; each reading is
// `locator('body').ariaSnapshot()` timed around the call. The two run
// A-B-A (deskgate, Playwright, deskgate) so that a machine drifting in
// speed shows in the two deskgate runs.
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const bin = process.argv[2];
const rounds = Number(process.argv[3] || 20);
if (!bin) {
	console.error('usage: node tests/bench/read_page.js DESKGATE_BINARY [ROUNDS]');
	process.exit(2);
}
const { chromium } = require(path.join(__dirname, '..', 'web', 'node_modules', 'playwright-core'));

// 2,000 elements, as pages are built: 250 rows of eight, each a few
// wrapping divs and spans (not listed) around a link, a button, a text
// field and text (listed): about 1,000 lines, under read_page's cap.
const build = "const m = document.getElementById('m'); for (let i = 0; i < 250; i++) { " +
	"const d = document.createElement('div'); d.innerHTML = `<div><span>Row ${i}</span>` + " +
	"`<a href='/item/${i}'>Item ${i}</a></div><div><button>Buy ${i}</button>` + " +
	"`<input aria-label='Qty ${i}'></div><span>note</span>`; m.appendChild(d); }";
const html = `<!doctype html><title>Bench</title><div id=m></div><script>${build}</script>`;

const median = (xs) => {
	const s = [...xs].sort((a, b) => a - b);
	return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function deskgate() {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-bench-read-'));
	try {
		const lines = [JSON.stringify({ type: 'navigate', url: 'data:text/html,' + encodeURIComponent(html) })];
		for (let i = 0; i < rounds; i++)
			lines.push(JSON.stringify({ type: 'read_page', filter: 'all', depth: 100 }));
		fs.writeFileSync(path.join(dir, 's.jsonl'), lines.join('\n') + '\n');
		execFileSync(bin, ['desktop', '--profile', 'browser', '--script', path.join(dir, 's.jsonl'),
			'--out', path.join(dir, 'out')], { stdio: ['ignore', 'ignore', 'inherit'] });
		const results = fs.readFileSync(path.join(dir, 'out', 'results.jsonl'), 'utf8').trim()
			.split('\n').map((l) => JSON.parse(l).result).slice(1);
		for (const r of results)
			if (!r.ok)
				throw new Error('read_page failed: ' + r.error);
		return { ms: results.slice(1).map((r) => r.total_ms), first: results[0].total_ms,
			lines: results[0].text.split('\n').length, chars: results[0].text.length };
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
}

async function playwright() {
	const browser = await chromium.launch({ executablePath: process.env.DG_CHROMIUM || '/usr/bin/chromium',
		args: ['--no-sandbox'] });
	try {
		const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
		await page.setContent(html);
		const ms = [];
		let snap = '';
		for (let i = 0; i < rounds; i++) {
			const t0 = process.hrtime.bigint();
			snap = await page.locator('body').ariaSnapshot();
			ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
		}
		return { ms: ms.slice(1), first: ms[0], lines: snap.split('\n').length, chars: snap.length };
	} finally {
		await browser.close();
	}
}

(async () => {
	const a = deskgate();
	const b = await playwright();
	const c = deskgate();
	const dg = median([...a.ms, ...c.ms]);
	const pw = median(b.ms);
	const row = (name, r, med) => console.log(`${name.padEnd(34)} ${med.toFixed(1).padStart(8)} ms  ` +
		`(first ${Number(r.first).toFixed(1)} ms; ${r.lines} lines, ${r.chars} characters)`);
	console.log(`read_page on 2,000 elements, median of ${rounds - 1} readings after the first`);
	row('deskgate read_page (run 1)', a, median(a.ms));
	row('Playwright ariaSnapshot (baseline)', b, pw);
	row('deskgate read_page (run 2)', c, median(c.ms));
	console.log(`ratio deskgate / Playwright: ${(dg / pw).toFixed(2)}; goal: under 150 ms: ` +
		(dg < 150 ? 'met' : 'NOT met'));
})().catch((e) => {
	console.error('bench read_page:', e.message);
	process.exit(1);
});
