'use strict';
// A small loopback web site the test agent browses (the jail reaches it only
// through the egress proxy and --test-resolve): pages with titles, a form,
// and enough height to scroll.

const http = require('node:http');

function page(title, body) {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title>
<style>
 body { font: 16px/1.5 sans-serif; margin: 0; background: #f6f7f9; color: #1d2430; }
 header { background: #23395d; color: #fff; padding: 14px 24px; font-size: 20px; }
 main { padding: 16px 24px; }
 table { border-collapse: collapse; background: #fff; width: 640px; }
 td, th { border: 1px solid #ccd3dd; padding: 6px 10px; text-align: left; }
 input { font-size: 16px; padding: 6px; width: 300px; }
 button { font-size: 16px; padding: 6px 14px; }
 .tall { height: 900px; }
</style></head><body>${body}</body></html>`;
}

const ORDERS = [
  ['1041', 'Blue mug', '2', '$18.00'],
  ['1042', 'Notebook, squared', '5', '$22.50'],
  ['1043', 'Desk lamp', '1', '$39.90'],
  ['1044', 'USB-C cable', '3', '$15.00'],
  ['1045', 'Stapler', '1', '$12.40'],
  ['1046', 'Sticky notes, yellow', '12', '$9.60'],
  ['1047', 'Monitor arm', '1', '$89.00'],
  ['1048', 'Whiteboard markers', '4', '$11.80'],
  ['1049', 'Paper, A4 (500)', '10', '$54.90'],
  ['1050', 'Desk organiser', '2', '$31.00'],
  ['1051', 'Headset', '1', '$64.50'],
  ['1052', 'Webcam cover', '6', '$7.20'],
  ['1053', 'Laptop stand', '1', '$42.00'],
  ['1054', 'Cable ties (100)', '2', '$6.40'],
  ['1055', 'Ergonomic mouse', '1', '$38.90'],
  ['1056', 'Keyboard wrist rest', '1', '$19.90'],
];

function handler(req, res) {
  const url = new URL(req.url, 'http://x');
  let html;
  if (url.pathname === '/') {
    const rows = ORDERS.map((o) => `<tr><td><a href="/orders/${o[0]}">#${o[0]}</a></td><td>${o[1]}</td><td>${o[2]}</td><td>${o[3]}</td></tr>`).join('');
    html = page('Acme shop: orders', `<header>Acme shop &mdash; orders</header><main>
<form action="/search" method="get"><input name="q" id="q" placeholder="Search orders" autofocus> <button>Search</button></form>
<h2>Recent orders</h2><table><tr><th>Order</th><th>Item</th><th>Qty</th><th>Total</th></tr>${rows}</table>
<div class="tall"></div><p>End of page</p></main>`);
  } else if (url.pathname.startsWith('/orders/')) {
    const id = url.pathname.slice(8).replace(/[^0-9]/g, '');
    html = page(`Order #${id}`, `<header>Acme shop &mdash; order #${id}</header><main><p>Order #${id} shipped.</p><p><a href="/">Back to orders</a></p></main>`);
  } else if (url.pathname === '/search') {
    const q = (url.searchParams.get('q') || '').replace(/[<>&"]/g, '');
    html = page(`Search: ${q}`, `<header>Acme shop &mdash; search</header><main><p>No orders match &ldquo;${q}&rdquo;.</p></main>`);
  } else {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found');
    return;
  }
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(html);
}

// Starts the site on 127.0.0.1 (port 0: any); resolves to the server.
function startSite(port = 0) {
  return new Promise((resolve, reject) => {
    const srv = http.createServer(handler);
    srv.on('error', reject);
    srv.listen(port, '127.0.0.1', () => resolve(srv));
  });
}

module.exports = { startSite };
