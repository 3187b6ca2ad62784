// tests/s3: the object storage client of recordings/ (recordings/objstore.c,
// recordings/upload.c) against a real S3 server: s3rver, pinned in
// package-lock.json, started here on 127.0.0.1 at a port the kernel picks,
// over a fresh temporary directory, so that runs side by side never meet.
// Then the criterion program given as the first argument (test_objstore)
// runs with DG_TEST_S3_URL and DG_TEST_S3_BUCKET; its exit code is ours.
//
//   node s3.js TEST_BINARY WORK_DIR        (tests/support/node-suite.sh)
//
// The test may take the store down and bring it back (tests/s3/
// test_gateway_bucket.c: uploads retried while it is away): SIGUSR1 stops
// the server, SIGUSR2 starts it again on the same port over the same
// directory (the objects stay). DG_TEST_S3_PID is this process's pid.
//
// s3rver's credentials are its built-in account: access key S3RVER, secret
// S3RVER. Note (read in node_modules/s3rver/lib/middleware/authentication.js):
// s3rver 3.7.1 checks a SigV4 request's access key id and its
// x-amz-content-sha256 header, but does not compute the signature
// ("Signature version 4 calculation is unimplemented"): a wrong access key
// is refused (403 InvalidAccessKeyId), a wrong secret is not.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const S3rver = require('s3rver');

const BUCKET = 'deskgate-test';

async function main() {
  const [bin, work] = process.argv.slice(2);
  if (!bin || !work) {
    console.error('usage: node s3.js TEST_BINARY WORK_DIR');
    process.exit(2);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dg-s3rver-'));
  const make = (port, buckets) => new S3rver({
    address: '127.0.0.1',
    port,
    directory: dir,
    silent: true,
    vhostBuckets: false,
    configureBuckets: buckets,
  });
  let server = make(0, [{ name: BUCKET }]);
  const addr = await server.run();
  const url = `http://127.0.0.1:${addr.port}`;
  // Stop and start are queued one after the other, never overlapping.
  let chain = Promise.resolve();
  process.on('SIGUSR1', () => {
    chain = chain.then(async () => {
      if (server) {
        await server.close();
        server = null;
        console.log('s3 suite: s3rver stopped (SIGUSR1)');
      }
    });
  });
  process.on('SIGUSR2', () => {
    chain = chain.then(async () => {
      if (!server) {
        server = make(addr.port, []);
        await server.run();
        console.log('s3 suite: s3rver started again (SIGUSR2)');
      }
    });
  });
  console.log(`s3 suite: s3rver at ${url}, bucket ${BUCKET}, data in ${dir}`);
  const code = await new Promise((resolve) => {
    const child = spawn(bin, ['--jobs', '1'], {
      stdio: 'inherit',
      cwd: work,
      env: { ...process.env, DG_TEST_S3_URL: url, DG_TEST_S3_BUCKET: BUCKET,
             DG_TEST_S3_PID: String(process.pid) },
    });
    // The whole suite's deadline (ctest's is longer): a hung client must
    // not keep the server up for ever.
    const deadline = Number(process.env.DG_S3_SUITE_DEADLINE_S || 240) * 1000;
    const timer = setTimeout(() => child.kill('SIGKILL'), deadline);
    child.on('exit', (c, sig) => {
      clearTimeout(timer);
      resolve(c === null ? 128 + (os.constants.signals[sig] || 0) : c);
    });
  });
  await chain;
  if (server) await server.close();
  fs.rmSync(dir, { recursive: true, force: true });
  process.exit(code);
}

main().catch((e) => {
  console.error('s3 suite:', e);
  process.exit(1);
});
