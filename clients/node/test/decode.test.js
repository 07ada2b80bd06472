'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const idcar = require('..');
const { startServer, cliDecode } = require('../testlib/server');

/** The repository's known answers for uuid7 (written by tests/vectors/uuid7.py, not by idcar's code). */
const UUID7_VECTORS = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'tests', 'vectors', 'uuid7.jsonl'), 'utf8')
  .split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What `idcar decode --json` prints for a uuid7 vector (issuer "other": no idcar fields). */
function uuid7Fields(v) {
  const f = { layout: 'uuid7', id: v.uuid, hex: v.hex, unix_ts_ms: v.unix_ts_ms, time: v.time, issuer: v.issuer };
  if (v.issuer === 'idcar') Object.assign(f, { counter: v.counter, cluster: v.cluster, slot: v.slot, random: v.random });
  return f;
}

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

  // parse is the inverse of text, in each layout's default form
  assert.equal(idcar.parse('lable64', '7e3c018045810093'), 0x7e3c018045810093n);
  assert.equal(idcar.parse('lable64', '7E3C018045810093'), 0x7e3c018045810093n);
  assert.equal(idcar.parse('ugd60', '34LWCJYACb'), 0x106b41fb960009bn);
  assert.equal(idcar.parse('si53', '1781678360139008'), 1781678360139008n);
  assert.deepEqual(idcar.parse('sno80', '6kvrqg243a22o22e'), Buffer.from('24bb9c38020a000b000c', 'hex'));
  assert.deepEqual(idcar.parse('muid128', '5D5EAC793E61F-1BFC71B112D-0000000B'), packed);
  assert.deepEqual(idcar.parse('muid128', '5d5eac793e61f-1bfc71b112d-0000000b'), packed);
  for (const [layout, bad] of [['lable64', '7e3c01804581009'], ['lable64', '7e3c01804581009g'], ['si53', '9007199254740992'],
    ['si53', '-1'], ['ugd60', '34LWCJYAC'], ['ugd60', '34LWCJYAC!'], ['sno80', '6KVRQG243A22O22E'],
    ['muid128', '5D5EAC793E61F1BFC71B112D0000000B'], ['lable64', '']]) {
    assert.throws(() => idcar.parse(layout, bad), idcar.LayoutError, `${layout} ${bad}`);
  }
  assert.throws(() => idcar.parse('lable64', '7e3c018045810093', 'ulid'), idcar.LayoutError); // not a form of lable64
  assert.throws(() => idcar.text('lable64', 1n, {}, 'uuid'), idcar.LayoutError);
  assert.throws(() => idcar.parse('nope', '1'), idcar.LayoutError);
  assert.equal(new idcar.Id('muid128', packed).uuid, null);
});

test('uuid7 known answers (tests/vectors/uuid7.jsonl): text forms, decode, refusals', () => {
  const K = { idcar: 0, other: 0, late: 0, error: 0 };
  for (const v of UUID7_VECTORS) {
    if (v.error) {
      K.error++;
      assert.throws(() => idcar.parse('uuid7', v.text), idcar.LayoutError, `${v.text} (${v.note})`);
      const digits = v.text.replace(/-/g, '');
      if (/^[0-9a-f]{32}$/.test(digits)) { // 16 bytes that are no UUIDv7: decode refuses them too
        assert.equal(v.error, 'unrecognised', v.note);
        assert.throws(() => idcar.parse('uuid7', digits, 'hex'), /not a UUIDv7/, v.note);
        assert.throws(() => idcar.decode('uuid7', Buffer.from(digits, 'hex')), /not a UUIDv7/, v.note);
        assert.throws(() => idcar.decode('uuid7', Buffer.from(digits, 'hex')), idcar.LayoutError, v.note);
      }
      continue;
    }
    const bytes = Buffer.from(v.hex, 'hex');
    // parse: every form, either case, with and without naming the form
    for (const [form, t] of [['uuid', v.uuid], ['hex', v.hex], ['ulid', v.ulid]]) {
      if (t === undefined) continue;
      for (const cased of [t, t.toUpperCase(), t.toLowerCase()]) {
        assert.deepEqual(idcar.parse('uuid7', cased), bytes, `${cased}`);
        assert.deepEqual(idcar.parse('uuid7', cased, form), bytes, `${cased} as ${form}`);
      }
    }
    // text forms: canonical lower-case uuid by default, hex, ulid
    assert.equal(idcar.text('uuid7', bytes), v.uuid);
    assert.match(v.uuid, UUID_TEXT);
    assert.equal(idcar.text('uuid7', bytes, {}, 'uuid'), v.uuid);
    assert.equal(idcar.text('uuid7', bytes, {}, 'hex'), v.hex);
    if (v.ulid !== undefined) assert.equal(idcar.text('uuid7', bytes, {}, 'ulid'), v.ulid);
    assert.equal(idcar.text('uuid7', BigInt('0x' + v.hex)), v.uuid);
    assert.deepEqual(idcar.toBytes('uuid7', bytes), bytes);
    const id = new idcar.Id('uuid7', bytes);
    assert.equal(id.uuid, v.uuid);
    assert.equal(String(id), v.uuid);
    assert.equal(JSON.stringify({ id }), JSON.stringify({ id: v.uuid }));
    assert.deepEqual(id.value, bytes);
    // decode: the keys and values of `idcar decode --json`; a time after year 9999 is refused
    if (v.time === null) {
      K.late++;
      assert.throws(() => idcar.decode('uuid7', bytes), idcar.LayoutError, v.note);
      assert.throws(() => id.decode(), /after 9999-12-31T23:59:59.999Z/, v.note);
      continue;
    }
    K[v.issuer]++;
    assert.deepEqual(idcar.decode('uuid7', bytes), uuid7Fields(v), `${v.uuid} (${v.note})`);
    assert.deepEqual(id.decode(), uuid7Fields(v));
  }
  assert.deepEqual(K, { idcar: 9, other: 1, late: 1, error: 7 }, 'the vectors file as tests/vectors/uuid7.py writes it');

  // the SPEC's examples
  const typical = idcar.decode('uuid7', idcar.parse('uuid7', '01a20180-3c7e-74b5-a873-0009a1b2c3ac'));
  assert.deepEqual([typical.unix_ts_ms, typical.counter, typical.cluster, typical.slot, typical.random, typical.issuer],
    [1795321511038, 1234567, 3, 9, 10597059, 'idcar']);
  assert.deepEqual(idcar.decode('uuid7', idcar.parse('uuid7', '017f22e2-79b0-7cc3-98c4-dc0c0c07398f')), {
    layout: 'uuid7', id: '017f22e2-79b0-7cc3-98c4-dc0c0c07398f', hex: '017f22e279b07cc398c4dc0c0c07398f',
    unix_ts_ms: 1645557742000, time: '2022-02-22T19:22:22.000Z', issuer: 'other',
  });

  // what is no uuid7 text or ID
  for (const bad of ['', ' 01a20180-3c7e-74b5-a873-0009a1b2c3ac', '{01a20180-3c7e-74b5-a873-0009a1b2c3ac}',
    '01a20180-3c7e74b5-a873-0009a1b2c3ac-', '01a201803c7e74b5a8730009a1b2c3a', '0IM80R0F3YEJTTGWR016GV5GXC',
    '0LM80R0F3YEJTTGWR016GV5GXC', '0OM80R0F3YEJTTGWR016GV5GXC', '0UM80R0F3YEJTTGWR016GV5GXC', '01M80R0F3YEJTTGWR016GV5GX\u017f']) {
    assert.throws(() => idcar.parse('uuid7', bad), idcar.LayoutError, JSON.stringify(bad));
  }
  assert.throws(() => idcar.parse('uuid7', '01M80R0F3YEJTTGWR016GV5GXC', 'uuid'), idcar.LayoutError); // a ulid is not the uuid form
  assert.throws(() => idcar.parse('uuid7', '01a201803c7e74b5a8730009a1b2c3ac', 'ulid'), idcar.LayoutError);
  assert.throws(() => idcar.text('uuid7', Buffer.alloc(16), {}, 'muid'), idcar.LayoutError);
  assert.throws(() => idcar.decode('uuid7', Buffer.alloc(15)), idcar.LayoutError);
  assert.throws(() => idcar.decode('uuid7', Buffer.alloc(16)), /version 0, not 7/);
});

test('uuid7 known answers decode as `idcar decode --json` does', { timeout: 60000 }, () => {
  for (const v of UUID7_VECTORS) {
    const t = v.error ? v.text : v.uuid;
    let cli;
    try {
      cli = cliDecode('uuid7', 'uuid', t);
    } catch {
      cli = null; // idcar refuses it (exit status 2)
    }
    let ours;
    try {
      ours = idcar.decode('uuid7', idcar.parse('uuid7', t));
    } catch (err) {
      assert.ok(err instanceof idcar.LayoutError, String(err));
      ours = null;
    }
    assert.deepEqual(ours, cli, `${t} (${v.note})`);
  }
});

const LAYOUTS = [
  ['lable64', [], []],
  ['ugd60', [], []],
  ['si53', ['--mid-bits', '3'], ['--mid-bits', '3']],
  ['sno80', [], []],
  ['muid128', [], []],
  ['uuid7', [], []],
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
        assert.deepEqual(client.parse(text), id, `parse of ${text}`);
        if (layout === 'uuid7') {
          assert.match(text, UUID_TEXT);
          assert.equal(client.id(id).uuid, text);
          assert.equal(want.issuer, 'idcar');
          for (const form of ['hex', 'ulid']) {
            const other = client.text(id, form);
            assert.deepEqual(cliDecode(layout, form, other, decodeFlags), want, `${form} form ${other}`);
            assert.deepEqual(client.parse(other), id);
            assert.deepEqual(client.parse(other, form), id);
          }
        } else {
          assert.equal(client.id(id).uuid, null);
        }
      }
      if (layout === 'uuid7') assert.deepEqual(d.params, { 'cluster-id': '0' });
    } finally {
      client.close();
      await server.destroy();
    }
  });
}
