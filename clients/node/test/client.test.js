'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const idcar = require('..');
const { startServer, sleep } = require('../testlib/server');

const key = (id) => (Buffer.isBuffer(id) ? id.toString('hex') : id);

/** `workers` concurrent callers, each taking `perWorker` IDs with nextId() (and some ids(n)). */
async function takeConcurrently(client, workers, perWorker) {
  const all = [];
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    let taken = 0;
    while (taken < perWorker) {
      if (taken % 50 === 0 && w % 2 === 1) {
        const batch = await client.ids(Math.min(37, perWorker - taken));
        all.push(...batch);
        taken += batch.length;
      } else {
        all.push(await client.nextId());
        taken++;
      }
    }
  }));
  return all;
}

for (const layout of ['lable64', 'sno80', 'uuid7']) {
  test(`unique across 8 concurrent callers, with and without prefetch (${layout})`, { timeout: 60000 }, async () => {
    const server = await startServer(layout);
    try {
      for (const prefetch of [0, 200]) {
        const client = new idcar.Client({ socket: server.socket, prefetch });
        try {
          const got = await takeConcurrently(client, 8, 300);
          assert.equal(got.length, 2400);
          assert.equal(new Set(got.map(key)).size, got.length, `duplicates with prefetch ${prefetch}`);
          // big asks are split into requests of at most 1,000
          const big = await client.ids(2500);
          assert.equal(big.length, 2500);
          assert.equal(new Set([...got, ...big].map(key)).size, 4900);
        } finally {
          client.close();
        }
      }
    } finally {
      await server.destroy();
    }
  });
}

test('prefetched IDs older than maxAgeMs are dropped, never handed out', { timeout: 30000 }, async () => {
  const server = await startServer('lable64');
  const client = new idcar.Client({ socket: server.socket, prefetch: 100, maxAgeMs: 100 });
  try {
    const first = client.decode(await client.nextId()).timestamp_ms;
    await sleep(20); // the background refill lands
    assert.ok(client._buffered > 0, 'the buffer was refilled');
    await sleep(300);
    const before = Date.now();
    const next = client.decode(await client.nextId()).timestamp_ms;
    assert.ok(next >= before - 5, `a stale ID was handed out (${next} < ${before})`);
    assert.ok(next > first + 250);
  } finally {
    client.close();
    await server.destroy();
  }
  assert.equal(client._buffered, 0);
  await assert.rejects(client.nextId(), idcar.ClosedError);
});

test('server restart mid-stream: same client object, all IDs unique', { timeout: 60000 }, async () => {
  const server = await startServer('lable64');
  for (const prefetch of [0, 50]) {
    const client = new idcar.Client({ socket: server.socket, retryDeadlineMs: 15000, prefetch });
    try {
      const got = [];
      let stop = false;
      const workers = Array.from({ length: 4 }, async () => {
        while (!stop) got.push(await client.nextId());
      });
      const failed = Promise.all(workers).then(() => null, (err) => err);
      await sleep(150);
      const beforeStop = got.length;
      const oldConn = client._conn;
      await server.stop(); // SIGTERM, wait for the exit
      await sleep(100);
      await server.start(); // same socket, same state file
      const afterStart = got.length;
      const end = Date.now() + 10000;
      while (got.length < afterStart + 500 && Date.now() < end) await sleep(10);
      stop = true;
      assert.equal(await failed, null);
      assert.ok(beforeStop > 0, 'IDs before the restart');
      assert.ok(got.length >= afterStart + 500, 'IDs after the restart');
      assert.ok(oldConn && oldConn.dead && client._conn !== oldConn, 'reconnected');
      assert.equal(new Set(got).size, got.length, 'duplicates across the restart');
    } finally {
      client.close();
    }
  }
  await server.destroy();
});

test('close() fails pending calls and leaves nothing running', { timeout: 30000 }, async () => {
  const server = await startServer('lable64');
  try {
    const client = new idcar.Client({ socket: server.socket, prefetch: 1000 });
    await client.nextId();
    const pending = client.ids(5000);
    client.close();
    await assert.rejects(pending, idcar.ClosedError);
    await assert.rejects(client.describe(), idcar.ClosedError);
  } finally {
    await server.destroy();
  }
});

test('pipelined asks of a slow layout time out on progress, not from when they were queued', { timeout: 30000 }, async () => {
  // ugd60 issues 1,024 IDs a second: four asks of 1,000 sent at once take about 4 s in all,
  // each answered within about a second of the one before — under a 1.5 s timeout.
  const server = await startServer('ugd60');
  const client = new idcar.Client({ socket: server.socket, timeoutMs: 1500 });
  try {
    const parts = await Promise.all([1, 2, 3, 4].map(() => client.ids(1000)));
    const all = [].concat(...parts);
    assert.equal(all.length, 4000);
    assert.equal(new Set(all.map(key)).size, 4000);
  } finally {
    client.close();
    await server.destroy();
  }
});
