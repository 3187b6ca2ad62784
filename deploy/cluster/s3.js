// The local cluster's object store (deploy/cluster/up): s3rver, from
// tests/s3's pinned packages (NODE_PATH), on 127.0.0.1:PORT over DIR, with
// BUCKET made. Runs until SIGTERM or SIGINT.
//
//   node s3.js PORT DIR BUCKET
'use strict';
const S3rver = require('s3rver');

async function main() {
  const [port, directory, bucket] = process.argv.slice(2);
  if (!/^[0-9]{1,5}$/.test(port || '') || !directory || !/^[a-z0-9][a-z0-9.-]{2,62}$/.test(bucket || '')) {
    console.error('usage: node s3.js PORT DIR BUCKET');
    process.exit(2);
  }
  const server = new S3rver({
    address: '127.0.0.1', port: Number(port), directory, silent: true, vhostBuckets: false,
    configureBuckets: [{ name: bucket }],
  });
  await server.run();
  console.log(`s3rver: http://127.0.0.1:${port}, bucket ${bucket}, data in ${directory}`);
  const stop = async () => { await server.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((e) => { console.error('s3rver:', e); process.exit(1); });
