'use strict';
// The blast radius tried live (POST /v1/blast, the "Try it" section of
// blast.html): a real gateway (`deskgate serve`, as root) whose default
// policy lets exec run for 3 s, a loopback HTTP sink the jail may reach
// only through the egress proxy under a test-only name, and Debian's
// Chromium headless driven by playwright-core.
//
//   node blast.test.js DESKGATE_BINARY
//
// The page, under the default policy: write ran, the other four
// contained, and the sink got nothing; under a draft that allows the
// sink's host (and puts a fake secret in the environment): the post ran,
// the sink got it, and neither it nor any attempt saw the secret; the
// gateway's policies list as before, the draft nowhere in them; the draft
// reverted: contained again, the sink got nothing more. The API's
// hostile cases, first: no token 401, an agent token 403, unknown keys,
// oversize and out-of-range fields 400 naming the field, a second run of
// one token and the per-minute limit 429 with Retry-After (on a second
// gateway, whose window is seen to reopen at the end). Exit 0 when all passed,
// 1 when one failed (its page saved as /tmp/dg-blast-failed.png), 2 when
// something needed is missing. The page's screenshot: blast-try.png in the
// screenshots directory of web.test.js.

const assert = require('node:assert/strict');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { Gateway, TOKENS, freePort, waitFor } = require('./lib/gateway');

const CHROMIUM = process.env.DG_CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.DG_WEB_SCREENSHOTS ||
  path.join(path.dirname(path.resolve(process.argv[2] || '.')), 'tests', 'web', 'screenshots');
const SECRET = 'FAKE-blast-secret-7f3a9c';
const PER_MINUTE = 4; // DG_BLAST_PER_MINUTE (gateway/blast.c)
const say = (s) => process.stdout.write(s + '\n');

// A loopback HTTP server that records every request it gets.
async function startSink() {
  const got = [];
  const port = await freePort();
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => { body += d; });
    req.on('end', () => {
      got.push({ method: req.method, url: req.url, body });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('recorded\n');
    });
  });
  await new Promise((r) => srv.listen(port, '127.0.0.1', r));
  return { srv, port, got };
}

async function main() {
  const bin = process.argv[2];
  if (!bin || !fs.existsSync(bin)) { say(`usage: node blast.test.js DESKGATE_BINARY (got ${bin})`); process.exit(2); }
  if (!fs.existsSync(CHROMIUM)) { say(`FAIL: ${CHROMIUM} is missing: apt-get install chromium`); process.exit(2); }
  const { chromium } = require('playwright-core');
  const sink = await startSink();
  const host = `blast-sink.test:${sink.port}`;
  const gw = new Gateway(bin, {
    policies: { default: { version: 1, limits: { exec_seconds: 3 } } },
    resolve: [`${host}=127.0.0.1:${sink.port}`],
  });
  // The per-minute limit is tried on a second gateway of its own, so that
  // the page's runs on the first need not wait out its window (about 55 s);
  // the window's reopening after Retry-After is checked on it at the end.
  const limitGw = new Gateway(bin, { policies: { default: { version: 1, limits: { exec_seconds: 3 } } } });
  let browser = null, page = null, failed = false;
  const pageErrors = [];
  const t0 = Date.now();
  const step = async (name, fn) => {
    const s = Date.now();
    await fn();
    say(`ok   ${name} (${Date.now() - s} ms)`);
  };
  try {
    await Promise.all([gw.start(), limitGw.start()]);
    say(`gateway on ${gw.base} (${gw.dir}), sink ${host}; the limit's gateway on ${limitGw.base}`);

    await step('the API refuses hostile requests, naming the field', async () => {
      assert.equal((await gw.http('POST', '/v1/blast', null, {})).status, 401);
      assert.equal((await gw.http('POST', '/v1/blast', TOKENS.agent, {})).status, 403);
      assert.equal((await gw.http('GET', '/v1/blast', TOKENS.viewer)).status, 405);
      const cases = [
        [{ x: 1 }, 'body', /unknown field "x"/],
        ['[1]', 'body', /JSON object/],
        [{ policy: 'nope' }, 'policy', /policies/],
        [{ draft: 'x' }, 'draft', /object/],
        [{ draft: { egress_hosts: [host], y: 2 } }, 'draft', /unknown field "y"/],
        [{ draft: { scratch_mb: 0 } }, 'draft.scratch_mb', /from 1 to 4096/],
        [{ draft: { scratch_mb: 4097 } }, 'draft.scratch_mb', /from 1 to 4096/],
        [{ draft: { scratch_mb: 600 } }, 'draft.scratch_mb', /memory_mb/],
        [{ draft: { scratch_mb: 1.5 } }, 'draft.scratch_mb', /integer/],
        [{ draft: { wall_seconds: 0 } }, 'draft.wall_seconds', /from 1 to 10/],
        [{ draft: { wall_seconds: 11 } }, 'draft.wall_seconds', /from 1 to 10/],
        [{ draft: { wall_seconds: '3' } }, 'draft.wall_seconds', /integer/],
        [{ draft: { secret: 'x'.repeat(65) } }, 'draft.secret', /1 to 64/],
        [{ draft: { secret: '' } }, 'draft.secret', /1 to 64/],
        [{ draft: { secret: 'two words' } }, 'draft.secret', /no spaces/],
        [{ draft: { egress_hosts: [host, 'b.test:80'] } }, 'draft.egress_hosts', /at most 1/],
        [{ draft: { egress_hosts: ['*.evil.test:443'] } }, 'draft.egress_hosts', /no wildcard/],
        [{ draft: { egress_hosts: ['Evil.test:80'] } }, 'draft.egress_hosts', /lowercase/],
        [{ draft: { egress_hosts: ['a.test:65536'] } }, 'draft.egress_hosts', /65535/],
        [{ draft: { egress_hosts: [`${'a'.repeat(254)}:80`] } }, 'draft.egress_hosts', /253 bytes/],
        [{ draft: { egress_hosts: [`${'a'.repeat(64)}.test:80`] } }, 'draft.egress_hosts', /labels of at most 63/],
        [{ draft: { egress_hosts: ['a..test:80'] } }, 'draft.egress_hosts', /host:port/],
        [{ draft: { egress: true } }, 'draft.egress', /only be false/],
        [{ draft: { egress: false, egress_hosts: [host] } }, 'draft.egress_hosts', /contradict/],
        [JSON.stringify({ draft: { secret: 'y'.repeat(3000) } }), 'body', /over 2048 bytes/],
        // Every knob at its upper bound passes its own check; the policy
        // they make does not (scratch_mb must stay below memory_mb, 512).
        [{ policy: 'default', draft: { egress_hosts: [`${['a', 'b', 'c'].map((x) => x.repeat(63)).join('.')}.${'d'.repeat(61)}:65535`], scratch_mb: 4096, wall_seconds: 10, secret: '~'.repeat(64) } },
          'draft.scratch_mb', /limits\.scratch_mb \(4096\) must be less than limits\.memory_mb/],
      ];
      for (const [body, field, msg] of cases) {
        const r = await gw.http('POST', '/v1/blast', TOKENS.viewer, body);
        const what = `${JSON.stringify(body).slice(0, 80)} -> ${r.status} ${r.text.slice(0, 300)}`;
        assert.equal(r.status, 400, what);
        assert.equal(r.json.error.field, field, what);
        assert.match(r.json.error.message, msg, what);
      }
      assert.equal(sink.got.length, 0, 'a refused request ran something');
    });

    let roomAt = 0; // when the limit's gateway has room for a run again (ms)
    await step('at most 4 runs a minute per gateway, one at a time per token: 429 with Retry-After', async () => {
      // A fresh gateway: no run started yet. Two tokens run side by side;
      // the 5th start within the minute is refused, whichever token asks.
      const gw = limitGw;
      const quick = { draft: { wall_seconds: 1, egress: false } };
      for (let round = 0; round < PER_MINUTE / 2; round++) {
        const a = gw.http('POST', '/v1/blast', TOKENS.alice, quick);
        const b = gw.http('POST', '/v1/blast', TOKENS.admin, quick);
        if (round === 0) {
          await waitFor('two runs to start', async () => (await gw.http('GET', '/v1/sessions', TOKENS.viewer)).json.sessions.length === 2, 15000, 50);
          const again = await gw.http('POST', '/v1/blast', TOKENS.alice, {});
          assert.equal(again.status, 429, again.text);
          assert.equal(again.headers.get('retry-after'), '5');
          assert.match(again.json.error.message, /a blast run of alice is going on: one at a time per token/);
        }
        for (const r of await Promise.all([a, b])) assert.equal(r.status, 200, r.text);
      }
      const limited = await gw.http('POST', '/v1/blast', TOKENS.viewer, quick);
      assert.equal(limited.status, 429, limited.text);
      const retry = Number(limited.headers.get('retry-after'));
      assert.ok(retry >= 1 && retry <= 60, `Retry-After ${retry}`);
      assert.equal(limited.json.error.retry_after_s, retry);
      assert.match(limited.json.error.message, /4 blast runs started in the last minute/);
      assert.equal(sink.got.length, 0, 'egress off, and something reached the sink');
      roomAt = Date.now() + retry * 1000 + 500;
    });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, baseURL: gw.base, colorScheme: 'light' });
    page = await ctx.newPage();
    page.on('pageerror', (e) => pageErrors.push(e.message));
    page.on('console', (m) => { if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) pageErrors.push(m.text()); });
    page.on('dialog', (d) => { pageErrors.push(`a ${d.type()} dialog opened`); d.dismiss().catch(() => {}); });
    await page.goto('/blast.html');
    await page.fill('#token', TOKENS.viewer);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('body[data-ready="1"]', { timeout: 15000 });

    // The policies the gateway lists (GET /v1/policies): each one's name,
    // text and hash (not its audit: the page's runs are no audit), and the
    // whole answer's text. A draft must never become one of them.
    const policies = async () => {
      const r = await gw.http('GET', '/v1/policies', TOKENS.viewer);
      assert.equal(r.status, 200, r.text);
      return { text: r.text, entries: r.json.policies.map((p) => ({ name: p.name, sha256: p.sha256, policy: p.policy })) };
    };
    const policiesBefore = await policies();
    assert.deepEqual(policiesBefore.entries.map((p) => p.name), ['default']);

    // Runs the attempts from the page; resolves to {id: row} once shown.
    let runs = 0;
    const runPage = async () => {
      await page.click('#try-run');
      runs++;
      await page.waitForSelector(`body[data-try-run="${runs}"]`, { timeout: 90000 });
      const rows = await page.$$eval('#try-results tbody tr', (trs) => trs.map((tr) => ({
        id: tr.dataset.attempt, verdict: tr.dataset.verdict, badge: tr.querySelector('.badge').textContent,
        evidence: tr.querySelector('td.evidence').innerText, rule: tr.querySelector('td.rule').textContent,
      })));
      return Object.fromEntries(rows.map((r) => [r.id, r]));
    };
    const verdicts = (rows) => ['write', 'passwd', 'egress', 'loop', 'rm'].map((id) => rows[id] && rows[id].verdict);

    await step('under the default policy: write ran, the other four contained; the sink got nothing', async () => {
      const rows = await runPage();
      assert.deepEqual(verdicts(rows), ['ran', 'contained', 'contained', 'contained', 'contained'], JSON.stringify(rows, null, 1));
      assert.equal(rows.write.badge, 'ran');
      assert.equal(rows.passwd.badge, 'contained');
      assert.match(rows.write.rule, /limits\.scratch_mb/);
      assert.match(rows.passwd.evidence, /none of the host's \d+ lines/);
      assert.match(rows.egress.rule, /^egress\.default$/);
      assert.match(rows.egress.evidence, /refused POST http:\/\/example\.com:80/);
      assert.match(rows.loop.rule, /limits\.exec_seconds/);
      assert.match(rows.loop.evidence, /wall clock after 3\.\d s/);
      assert.match(rows.rm.evidence, /still ran a program/);
      assert.equal(await page.textContent('#try-badge'), 'nothing leaked');
      assert.equal(sink.got.length, 0, `the sink got ${JSON.stringify(sink.got)}`);
      fs.mkdirSync(SHOTS, { recursive: true });
      await page.screenshot({ path: path.join(SHOTS, 'blast-try.png'), fullPage: true });
    });

    await step('a draft allowing the sink\'s host: the post ran and the sink has it, without the fake secret', async () => {
      await page.selectOption('#try-egress', 'host');
      await page.fill('#try-host', host);
      await page.fill('#try-wall', '2');
      await page.fill('#try-secret', SECRET);
      const rows = await runPage();
      assert.deepEqual(verdicts(rows), ['ran', 'contained', 'ran', 'contained', 'contained'], JSON.stringify(rows, null, 1));
      assert.match(rows.egress.rule, /^egress\.allow\[0\]$/);
      assert.match(rows.egress.evidence, /let POST http:\/\/blast-sink\.test/);
      assert.match(rows.egress.evidence, /the fake secret \(DESKGATE_BLAST_SECRET_\d, 24 bytes\) is not among them/);
      assert.match(rows.loop.evidence, /after 2\.\d s/);
      assert.equal(sink.got.length, 1, `the sink got ${sink.got.length} requests`);
      const post = sink.got[0];
      assert.equal(post.method, 'POST');
      assert.equal(post.url, '/blast');
      assert.match(post.body, /^PATH=\/usr\/local\/bin:\/usr\/bin:\/bin$/m);
      assert.ok(!post.body.includes(SECRET) && !post.body.includes('DESKGATE_BLAST_SECRET'), `the post carried the secret: ${post.body}`);
      assert.ok(!(await page.content()).includes(SECRET.slice(5)), 'the page shows the secret in its results');
      assert.match(await page.innerText('#try-note'), /with a draft \(egress to blast-sink\.test:\d+, wall clock 2 s, a fake secret of 24 characters/);
    });

    await step('drafts are never saved as policies: GET /v1/policies lists what it did before, the draft nowhere', async () => {
      const listed = await policies();
      assert.deepEqual(listed.entries, policiesBefore.entries);
      for (const what of [host, 'blast-sink', SECRET, 'DESKGATE_BLAST_SECRET']) {
        assert.ok(!listed.text.includes(what), `GET /v1/policies holds the draft's ${what}: ${listed.text.slice(0, 600)}`);
      }
    });

    await step('the draft reverted: the post is contained again and the sink gets nothing more', async () => {
      await page.click('#try-revert');
      assert.equal(await page.inputValue('#try-egress'), 'policy');
      const rows = await runPage();
      assert.deepEqual(verdicts(rows), ['ran', 'contained', 'contained', 'contained', 'contained'], JSON.stringify(rows, null, 1));
      assert.equal(sink.got.length, 1, `the sink got ${sink.got.length} requests`);
    });

    await step('once Retry-After has passed, the limit\'s gateway starts a run again', async () => {
      await new Promise((r) => setTimeout(r, Math.max(0, roomAt - Date.now())));
      const again = await limitGw.http('POST', '/v1/blast', TOKENS.viewer, { draft: { wall_seconds: 1, egress: false } });
      assert.equal(again.status, 200, again.text);
    });

    await step('no page error or CSP violation; no blast session is left', async () => {
      assert.deepEqual(pageErrors, []);
      for (const g of [gw, limitGw]) {
        const live = (await g.http('GET', '/v1/sessions', TOKENS.viewer)).json.sessions;
        assert.deepEqual(live, []);
      }
      assert.equal(sink.got.length, 1, `the sink got ${sink.got.length} requests`);
    });
  } catch (e) {
    failed = true;
    say(`FAIL ${e && e.stack || e}`);
    if (page) await page.screenshot({ path: '/tmp/dg-blast-failed.png' }).then(() => say('     page at failure: /tmp/dg-blast-failed.png'), () => {});
    say(`gateway log (last 2000 bytes):\n${gw.log.slice(-2000)}`);
    say(`the limit's gateway log (last 1000 bytes):\n${limitGw.log.slice(-1000)}`);
  } finally {
    if (browser) await browser.close().catch(() => {});
    sink.srv.close();
    await gw.stop().catch(() => {});
    await limitGw.stop().catch(() => {});
  }
  say(`${failed ? 'FAILED' : 'passed'} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { say(`FAIL setup: ${e && e.stack || e}`); process.exit(1); });
