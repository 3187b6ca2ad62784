// The oracle of tests/unit/test_url_node.c: Node's WHATWG URL parser.
//
// Usage: node url_oracle.js FILE
// FILE holds one input per line, hex-encoded (so tabs, newlines, NULs and
// any other byte survive the trip), decoded as UTF-8 as a browser would
// read the agent's JSON text. For each line, in order, prints one JSON line:
//   {"ok": true, "href": ..., "hostname": ..., "port": ..., "pathname": ...,
//    "search": ...}   or   {"ok": false}
'use strict';
const fs = require('fs');

const file = process.argv[2];
if (!file) {
  process.stderr.write('usage: node url_oracle.js FILE\n');
  process.exit(2);
}
const lines = fs.readFileSync(file, 'latin1').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const out = [];
for (const hex of lines) {
  const input = Buffer.from(hex, 'hex').toString('utf8');
  let r;
  try {
    const u = new URL(input);
    r = { ok: true, href: u.href, hostname: u.hostname, port: u.port, pathname: u.pathname,
          search: u.search };
  } catch (e) {
    r = { ok: false };
  }
  out.push(JSON.stringify(r));
}
process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
