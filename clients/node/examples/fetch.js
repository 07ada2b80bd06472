#!/usr/bin/env node
'use strict';
// Prints IDs from idcar, one per line, in the server's default text form.
//
//   node clients/node/examples/fetch.js --socket /tmp/idcar.sock --count 5 [--prefetch 100]
//     [--retry-deadline 5]
//
// --socket falls back to IDCAR_SOCKET, then /tmp/idcar.sock. --retry-deadline: how many
// seconds (a decimal number, default 5; 0 = no retry) an unavailable server or a missing socket
// is retried. On failure: one line `error: <reason>` on stderr, exit code 1.

const { Client } = require('..');
const { parseArgs } = require('./args');

async function main() {
  const a = parseArgs(process.argv.slice(2), {
    socket: 'string', count: 'number', prefetch: 'number', 'retry-deadline': 'number',
  });
  const count = a.count === undefined ? 1 : a.count;
  const prefetch = a.prefetch || 0;
  const retryDeadline = a['retry-deadline'] === undefined ? 5 : a['retry-deadline'];
  if (!Number.isInteger(count) || count < 1) throw new Error('--count must be a whole number of at least 1');
  if (!Number.isInteger(prefetch)) throw new Error('--prefetch must be a whole number');
  if (!Number.isFinite(retryDeadline)) throw new Error('--retry-deadline must be a number of seconds');
  const client = new Client({ socket: a.socket, prefetch, retryDeadlineMs: retryDeadline * 1000 });
  try {
    const lines = [];
    if (prefetch > 0) {
      for (let i = 0; i < count; i++) lines.push(client.text(await client.nextId()));
    } else {
      for (const id of await client.ids(count)) lines.push(client.text(id));
    }
    process.stdout.write(lines.join('\n') + '\n');
  } finally {
    client.close();
  }
}

main().catch((err) => {
  process.stderr.write(`error: ${String(err && err.message ? err.message : err).split('\n')[0]}\n`);
  process.exitCode = 1;
});
