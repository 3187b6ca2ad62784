// For the node benchmarks: a gateway of their own (tests/web/lib/gateway.js,
// as root) with one browser session, whose desktop reaches the loopback
// site on `port` as bench.test:PORT through its egress proxy (a data: URL
// is no URL a policy lets a desktop open), and the session's agent
// WebSocket.
'use strict';
const path = require('path');
const modules = path.join(__dirname, '..', 'web', 'node_modules');
const WebSocket = require(path.join(modules, 'ws'));
const { Gateway, TOKENS } = require(path.join(__dirname, '..', 'web', 'lib', 'gateway.js'));

// Resolves with { act, close }: act(action) sends one canonical action and
// resolves with { result, png } once its answer came (png: the frame that
// follows a result with "frame", else null); one action at a time. close()
// ends the WebSocket and the gateway.
async function openBrowserSession(bin, port, width, height) {
	const gw = new Gateway(bin, {
		policies: { default: { version: 1, default: 'allow', egress: { allow: [`bench.test:${port}`] } } },
		resolve: [`bench.test:${port}=127.0.0.1:${port}`],
	});
	process.on('exit', () => gw.killNow());
	await gw.start();
	try {
		const s = await gw.api('POST', '/v1/sessions', TOKENS.agent, { profile: 'browser', size: { width, height } }, 201);
		const ws = new WebSocket(`${gw.base.replace('http', 'ws')}/v1/sessions/${s.id}/ws`,
			['deskgate.v1', `bearer.${s.session_token}`], { maxPayload: 64 << 20 });
		let waiting = null, result = null;
		ws.on('message', (data, binary) => {
			if (!binary) {
				const m = JSON.parse(data.toString());
				if (m.type === 'result') {
					result = m;
					if (!m.frame && waiting)
						waiting({ result: m, png: null });
				}
				return;
			}
			if (waiting)
				waiting({ result, png: data });
		});
		await new Promise((res, rej) => { ws.once('open', res); ws.once('error', rej); });
		return {
			act: (a) => new Promise((res) => { waiting = res; ws.send(JSON.stringify(a)); }),
			close: async () => { ws.close(); await gw.stop(); },
		};
	} catch (e) {
		await gw.stop();
		throw e;
	}
}

module.exports = { openBrowserSession };
