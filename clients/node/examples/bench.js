#!/usr/bin/env node
'use strict';
// IDs per second through the Node client: sequential `await nextId()` calls, without and
// with prefetch 1000.
//
//   node clients/node/examples/bench.js --socket /tmp/idcar.sock --seconds 3

const { performance } = require('node:perf_hooks');
const { Client } = require('..');
const { parseArgs } = require('./args');

async function rate(client, seconds) {
  await client.nextId(); // connect and describe outside the measurement
  let n = 0;
  const start = performance.now();
  const end = start + seconds * 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 100; i++) await client.nextId();
    n += 100;
  }
  return n / ((performance.now() - start) / 1000);
}

async function main() {
  const a = parseArgs(process.argv.slice(2), { socket: 'string', seconds: 'number' });
  const seconds = a.seconds === undefined ? 3 : a.seconds;
  for (const [name, prefetch] of [['single', 0], ['prefetch', 1000]]) {
    const client = new Client({ socket: a.socket, prefetch });
    try {
      console.log(`${name} ${Math.round(await rate(client, seconds))}`);
    } finally {
      client.close();
    }
  }
}

main().catch((err) => {
  process.stderr.write(`error: ${String(err && err.message ? err.message : err).split('\n')[0]}\n`);
  process.exitCode = 1;
});
