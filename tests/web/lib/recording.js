'use strict';
// Writes a recording the way the gateway's writer does (docs/recordings.md):
// session.json, events.jsonl hash-chained from session.json's hash, each
// line the event's canonical bytes (compact, sorted keys) with the closing
// brace replaced by ,"hash":"..."}, and a seal signed with the gateway's
// recording key. For the web tests: events the gateway under test does not
// write yet can be shown to the player in a recording that verifies.

const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const SEAL_DOMAIN = 'deskgate-recording-seal-v1';
const sha256 = (b) => crypto.createHash('sha256').update(b).digest();

// JSON with every object's keys sorted, compact (integers only: the tests
// write no fractions).
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).filter((k) => v[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// Writes DIR/ID: session is session.json's object (format and policy hash
// filled in), events the events without seq, prev, hash (wall and mono_ms
// filled in when missing), frames {hash: sourceFile} copied into frames/.
// keyFile: the gateway's recording-key.pem (PKCS#8 Ed25519). owner: {uid,
// gid} the files are given to (the gateway's own user reads them).
function writeRecording({ dir, id, session, events, frames = {}, keyFile, owner }) {
  const root = path.join(dir, id);
  fs.mkdirSync(path.join(root, 'frames'), { recursive: true, mode: 0o755 });
  for (const [hash, src] of Object.entries(frames)) fs.copyFileSync(src, path.join(root, 'frames', `${hash}.png`));
  const policy = session.policy || '{}\n';
  const sj = Buffer.from(JSON.stringify({
    format: 'deskgate-recording/1', id, redact_text: false, token_name: null, ...session,
    policy, policy_sha256: sha256(policy).toString('hex'),
  }, null, 2) + '\n');
  fs.writeFileSync(path.join(root, 'session.json'), sj, { mode: 0o644 });

  const key = crypto.createPrivateKey(fs.readFileSync(keyFile));
  const raw = crypto.createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(-32);
  let prev = sha256(sj);
  const t0 = Date.parse(session.start || new Date().toISOString());
  const lines = [];
  const all = [...events, { type: 'seal', complete: true, alg: 'ed25519', key_id: sha256(raw).toString('hex') }];
  all.forEach((e, i) => {
    const mono = e.mono_ms !== undefined ? e.mono_ms : 1000000 + i * 500;
    const ev = { wall: new Date(t0 + (mono - 1000000)).toISOString(), mono_ms: mono, ...e, seq: i + 1, prev: prev.toString('hex') };
    const bytes = canonical(ev);
    const hash = sha256(Buffer.concat([prev, Buffer.from(bytes)]));
    let tail = `,"hash":"${hash.toString('hex')}"`;
    if (e.type === 'seal') {
      const sig = crypto.sign(null, Buffer.concat([Buffer.from(SEAL_DOMAIN), hash]), key);
      tail += `,"sig":"${sig.toString('base64')}"`;
    }
    lines.push(bytes.slice(0, -1) + tail + '}\n');
    prev = hash;
  });
  fs.writeFileSync(path.join(root, 'events.jsonl'), lines.join(''), { mode: 0o644 });
  if (owner) {
    for (const f of [root, path.join(root, 'frames'), path.join(root, 'session.json'), path.join(root, 'events.jsonl'),
      ...Object.keys(frames).map((h) => path.join(root, 'frames', `${h}.png`))]) fs.chownSync(f, owner.uid, owner.gid);
  }
  return root;
}

module.exports = { writeRecording, canonical };
