'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const idcar = require('..');
const { startServer, tempDir, sleep } = require('../testlib/server');

const DESCRIBE = Buffer.from('{"form":"hex","layout":"lable64","params":{"cluster-id":"0"},"width":8}');

function frame(status, width, payload) {
  const h = Buffer.from([0xd1, status, width, 0, 0, 0, 0, 0]);
  h.writeUInt32BE(payload.length, 4);
  return Buffer.concat([h, payload]);
}

/**
 * A fake idcar on a Unix socket: `answer(request, socket)` is called for each request frame
 * ({op, count}) and returns the bytes to send (or null for silence).
 */
async function fakeServer(answer) {
  const dir = tempDir();
  const socketPath = path.join(dir, 'fake.sock');
  const conns = new Set();
  const server = net.createServer((s) => {
    conns.add(s);
    s.on('close', () => conns.delete(s));
    s.on('error', () => {});
    let buf = Buffer.alloc(0);
    s.on('data', (c) => {
      buf = Buffer.concat([buf, c]);
      while (buf.length >= 4) {
        const op = buf[1];
        const need = 4 + buf.readUInt16BE(2);
        if (buf.length < need) break;
        const req = { op, count: need >= 8 ? buf.readUInt32BE(4) : 0 };
        buf = buf.subarray(need);
        const out = answer(req, s);
        if (out) s.write(out);
      }
    });
  });
  await new Promise((r) => server.listen(socketPath, r));
  return {
    socketPath,
    conns,
    async close() {
      for (const s of conns) s.destroy();
      await new Promise((r) => server.close(r));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

test('unavailable (status 2) is retried until the deadline, then UnavailableError with the reason',
  { timeout: 60000 }, async () => {
    const server = await startServer('lable64', ['--zk', '127.0.0.1:1', '--zk-session-timeout', '2s']);
    const client = new idcar.Client({ socket: server.socket, retryDeadlineMs: 1000 });
    try {
      const t0 = Date.now();
      await assert.rejects(client.nextId(), (err) => {
        assert.ok(err instanceof idcar.UnavailableError, `${err}`);
        assert.match(err.message, /no lease is held/);
        assert.match(err.reason, /no lease is held/);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took >= 1000 && took < 10000, `took ${took} ms`);
    } finally {
      client.close();
      await server.destroy();
    }
  });

test('a missing socket is a ConnectError naming the path, quickly', { timeout: 10000 }, async () => {
  const dir = tempDir();
  const missing = path.join(dir, 'missing.sock');
  try {
    for (const retryDeadlineMs of [0, 300]) {
      const client = new idcar.Client({ socket: missing, retryDeadlineMs });
      const t0 = Date.now();
      await assert.rejects(client.nextId(), (err) => {
        assert.ok(err instanceof idcar.ConnectError, `${err}`);
        assert.ok(err.message.includes(missing), err.message);
        assert.equal(err.code, 'ENOENT');
        assert.match(err.message, /ENOENT/);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took >= retryDeadlineMs && took < retryDeadlineMs + 1000, `took ${took} ms`);
      client.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a socket in a missing directory fails at once, saying so', { timeout: 10000 }, async () => {
  const dir = tempDir();
  const missing = path.join(dir, 'nodir', 'idcar.sock');
  try {
    for (const prefetch of [0, 10]) {
      const client = new idcar.Client({ socket: missing, retryDeadlineMs: 5000, prefetch });
      const t0 = Date.now();
      await assert.rejects(client.nextId(), (err) => {
        assert.ok(err instanceof idcar.ConnectError, `${err}`);
        assert.ok(err.message.includes(`directory ${path.dirname(missing)} does not exist`), err.message);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took < 1000, `retried a directory that cannot appear: ${took} ms`);
      client.close();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('prefetched IDs are handed out in issue order, also when the buffer runs dry', { timeout: 30000 }, async () => {
  // Issues 1, 2, 3, ... and answers 30 ms late: a refill is in flight whenever the buffer empties.
  let next = 1n;
  const server = await fakeServer((req, s) => {
    if (req.op === 2) return frame(0, 8, DESCRIBE);
    const ids = Buffer.alloc(8 * req.count);
    for (let i = 0; i < req.count; i++) ids.writeBigUInt64BE(next++, 8 * i);
    setTimeout(() => s.write(frame(0, 8, ids)), 30);
    return null;
  });
  const client = new idcar.Client({ socket: server.socketPath, prefetch: 20 });
  try {
    const one = [];
    for (let i = 0; i < 100; i++) one.push(await client.nextId());
    assert.deepEqual(one, [...one].sort((a, b) => (a < b ? -1 : 1)), 'one caller saw IDs out of issue order');
    const batches = [];
    for (let i = 0; i < 10; i++) batches.push(...await client.ids(7));
    assert.ok(batches.every((id, i) => i === 0 || batches[i - 1] < id), 'ids(n) out of issue order');
    assert.ok(batches[0] > one[one.length - 1]);
    const callers = await Promise.all([0, 1, 2, 3].map(async () => {
      const mine = [];
      for (let i = 0; i < 50; i++) mine.push(await client.nextId());
      return mine;
    }));
    for (const mine of callers) {
      assert.ok(mine.every((id, i) => i === 0 || mine[i - 1] < id), 'a caller saw IDs out of issue order');
    }
    assert.equal(new Set(callers.flat()).size, 200);
  } finally {
    client.close();
    await server.close();
  }
});

test('the socket path comes from IDCAR_SOCKET, then /tmp/idcar.sock', () => {
  const saved = process.env.IDCAR_SOCKET;
  try {
    process.env.IDCAR_SOCKET = '/some/where.sock';
    assert.equal(new idcar.Client().socketPath, '/some/where.sock');
    assert.equal(new idcar.Client({ socket: '/x.sock' }).socketPath, '/x.sock');
    delete process.env.IDCAR_SOCKET;
    assert.equal(new idcar.Client().socketPath, '/tmp/idcar.sock');
  } finally {
    if (saved === undefined) delete process.env.IDCAR_SOCKET;
    else process.env.IDCAR_SOCKET = saved;
  }
});

test('garbage answers are a ProtocolError, not a hang', { timeout: 20000 }, async () => {
  const cases = {
    'not the protocol at all': () => Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n'),
    'unknown status': (req) => (req.op === 2 ? frame(0, 8, DESCRIBE) : frame(7, 8, Buffer.alloc(8))),
    'a width that is not the described one': (req) => (req.op === 2 ? frame(0, 8, DESCRIBE) : frame(0, 10, Buffer.alloc(10 * req.count))),
    'a length that does not fit the count': (req) => (req.op === 2 ? frame(0, 8, DESCRIBE) : frame(0, 8, Buffer.alloc(12))),
    'a describe answer that is not JSON': () => frame(0, 8, Buffer.from('{nope')),
    'a describe of an unknown layout': () => frame(0, 8, Buffer.from('{"layout":"x","width":8}')),
  };
  for (const [name, answer] of Object.entries(cases)) {
    const fake = await fakeServer(answer);
    const client = new idcar.Client({ socket: fake.socketPath, timeoutMs: 5000, retryDeadlineMs: 2000 });
    try {
      const t0 = Date.now();
      await assert.rejects(client.nextId(), idcar.ProtocolError, name);
      assert.ok(Date.now() - t0 < 2000, `${name}: took ${Date.now() - t0} ms`);
      await sleep(20);
      assert.equal(fake.conns.size, 0, `${name}: the connection is dropped`);
    } finally {
      client.close();
      await fake.close();
    }
  }
});

test('a server that stops answering is a TimeoutError, not a hang', { timeout: 20000 }, async () => {
  let silent = false;
  const fake = await fakeServer((req) => {
    if (req.op === 2) return frame(0, 8, DESCRIBE);
    return silent ? null : frame(0, 8, Buffer.alloc(8 * req.count, 1));
  });
  const client = new idcar.Client({ socket: fake.socketPath, timeoutMs: 300 });
  try {
    assert.equal(await client.nextId(), 0x0101010101010101n);
    silent = true;
    const t0 = Date.now();
    const calls = [client.nextId(), client.ids(3), client.nextId()];
    for (const c of calls) await assert.rejects(c, idcar.TimeoutError);
    const took = Date.now() - t0;
    assert.ok(took >= 250 && took < 2000, `took ${took} ms`);
    silent = false;
    assert.equal(await client.nextId(), 0x0101010101010101n, 'a new connection after the timeout');
  } finally {
    client.close();
    await fake.close();
  }
});

test('status 1 is a BadRequestError at once; status 2 from a fake carries its reason', { timeout: 20000 }, async () => {
  const fake = await fakeServer((req) => {
    if (req.op === 2) return frame(0, 8, DESCRIBE);
    if (req.count === 7) return frame(1, 0, Buffer.from('count 7 is unlucky'));
    return frame(2, 0, Buffer.from('mark reached'));
  });
  const client = new idcar.Client({ socket: fake.socketPath, retryDeadlineMs: 200 });
  try {
    const t0 = Date.now();
    await assert.rejects(client.ids(7), (err) => err instanceof idcar.BadRequestError && /unlucky/.test(err.message));
    assert.ok(Date.now() - t0 < 150, 'bad requests are not retried');
    await assert.rejects(client.nextId(), (err) => err instanceof idcar.UnavailableError && err.reason === 'mark reached');
    assert.ok(Date.now() - t0 >= 200);
  } finally {
    client.close();
    await fake.close();
  }
});

test('pipelined answers arriving in fragments are never mis-assigned', { timeout: 30000 }, async () => {
  let next = 1n;
  const fake = await fakeServer((req, s) => {
    if (req.op === 2) return frame(0, 8, DESCRIBE);
    const payload = Buffer.alloc(8 * req.count);
    for (let i = 0; i < req.count; i++) payload.writeBigUInt64BE(next++, 8 * i);
    const out = frame(0, 8, payload);
    // write the answer in odd pieces: the client must reassemble them in order
    let off = 0;
    while (off < out.length) {
      const n = 1 + ((off * 7 + req.count) % 13);
      s.write(out.subarray(off, off + n));
      off += n;
    }
    return null;
  });
  const client = new idcar.Client({ socket: fake.socketPath });
  try {
    const asks = Array.from({ length: 300 }, (_, i) => 1 + ((i * 37) % 23));
    const results = await Promise.all(asks.map((n) => (n === 1 ? client.nextId().then((x) => [x]) : client.ids(n))));
    const all = [];
    results.forEach((r, i) => {
      assert.equal(r.length, asks[i]);
      for (let j = 1; j < r.length; j++) assert.equal(r[j], r[j - 1] + 1n, 'one answer holds consecutive IDs');
      all.push(...r);
    });
    assert.equal(new Set(all).size, all.length);
    assert.equal(all.length, Number(next - 1n));
  } finally {
    client.close();
    await fake.close();
  }
});
