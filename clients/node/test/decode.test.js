'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const idcar = require('..');
const { startServer, cliDecode } = require('../testlib/server');

test('known answers decode without a server', () => {
  const l = idcar.decode('lable64', 0x7e3c018045810093n);
  assert.deepEqual(l, {
    layout: 'lable64', id: '7e3c018045810093', timestamp_ms: 1795321511038, sequence: 1, generator: 9,
    cluster: 3, time: '2026-11-22T04:25:11.038Z',
  });
  assert.equal(idcar.text('lable64', 0x7e3c018045810093n), '7e3c018045810093');

  const packed = Buffer.from('5d5eac793e61f1bfc71b112d0000000b', 'hex');
  const m = idcar.decode('muid128', packed);
  assert.deepEqual(m, {
    layout: 'muid128', id: '5D5EAC793E61F-1BFC71B112D-0000000B', packed_hex: '5d5eac793e61f1bfc71b112d0000000b',
    timestamp: 1642579230975519, medallion: 1923190821165, offset: 11, time: '2022-01-19T08:00:30.975519Z',
  });
  assert.equal(idcar.text('muid128', packed), '5D5EAC793E61F-1BFC71B112D-0000000B');
  // a negative offset (signed 32 bits)
  assert.equal(idcar.decode('muid128', Buffer.from('5d5eac793e61f1bfc71b112dfffffffb', 'hex')).offset, -5);

  // the other layouts, as `idcar decode --json` prints the reference vectors
  assert.deepEqual(idcar.decode('ugd60', 0x106b41fb960009bn), {
    layout: 'ugd60', id: '34LWCJYACb', storage_hex: '106b41fb960009b', timestamp_s: 275464699, worker: 300,
    seq: 0, random: 155, time: '2026-11-22T05:58:19.000Z',
  });
  assert.deepEqual(idcar.decode('sno80', Buffer.from('24bb9c38020a000b000c', 'hex')), {
    layout: 'sno80', id: '6kvrqg243a22o22e', bytes_hex: '24bb9c38020a000b000c', units: 78883200001, tick: 0,
    meta: 10, partition: 11, partition_bytes_hex: '000b', sequence: 12, unix_ms: 1577836800004,
    time: '2020-01-01T00:00:00.004Z',
  });
  assert.deepEqual(idcar.decode('si53', 1781678360139008n, { 'base-clock': '1577836800000', 'mid-bits': '5' }), {
    layout: 'si53', id: 1781678360139008, MAB: 217490034196, MID: 21, UIN: 0, base_clock: 1577836800000,
    timestamp_ms: 1795326834196, time: '2026-11-22T05:53:54.196Z',
  });

  // the Id object
  const id = new idcar.Id('muid128', packed);
  assert.equal(String(id), '5D5EAC793E61F-1BFC71B112D-0000000B');
  assert.deepEqual(id.bytes, packed);
  assert.equal(id.decode().medallion, 1923190821165);
  assert.equal(new idcar.Id('lable64', 0x7e3c018045810093n).bytes.toString('hex'), '7e3c018045810093');

  // invalid IDs are errors
  assert.throws(() => idcar.decode('lable64', 0x7e3c018045810493n), idcar.LayoutError); // reserved bit
  assert.throws(() => idcar.decode('si53', 1n << 53n), idcar.LayoutError);
  assert.throws(() => idcar.decode('sno80', Buffer.alloc(9)), idcar.LayoutError);
  assert.throws(() => idcar.text('nope', 1n), idcar.LayoutError);
});

const LAYOUTS = [
  ['lable64', [], []],
  ['ugd60', [], []],
  ['si53', ['--mid-bits', '3'], ['--mid-bits', '3']],
  ['sno80', [], []],
  ['muid128', [], []],
];

for (const [layout, serverFlags, decodeFlags] of LAYOUTS) {
  test(`decode matches idcar decode --json: ${layout}`, { timeout: 60000 }, async () => {
    const server = await startServer(layout, serverFlags);
    const client = new idcar.Client({ socket: server.socket });
    try {
      const d = await client.describe();
      assert.equal(d.layout, layout);
      assert.equal(d.width, idcar.WIDTHS[layout]);
      if (layout === 'si53') assert.equal(d.params['mid-bits'], '3');
      const got = [await client.nextId(), ...(await client.ids(4))];
      for (const id of got) {
        if (d.width === 8) assert.equal(typeof id, 'bigint');
        else assert.ok(Buffer.isBuffer(id) && id.length === d.width);
        const text = client.text(id);
        const want = cliDecode(layout, d.form, text, decodeFlags);
        assert.deepEqual(client.decode(id), want, `decode of ${text}`);
        assert.equal(want.id, layout === 'si53' ? Number(text) : text);
        assert.equal(String(client.id(id)), text);
      }
    } finally {
      client.close();
      await server.destroy();
    }
  });
}
