'use strict';
// Text forms and fields of every idcar layout, exactly as `idcar decode --json` prints them.
// Pure functions of an ID (a bigint for the 8-byte layouts, a Buffer for sno80 and muid128)
// and, for si53, the server's parameters. No I/O.

const UGD60_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const SNO80_ALPHABET = '23456789abcdefghijklmnopqrstuvwx';
const UGD60_EPOCH_S = 1519862400;
const SNO80_EPOCH_MS = 1262304000000;
const SI53_DEFAULT_BASE_CLOCK = 1577836800000;
const SI53_DEFAULT_MID_BITS = 5;

/** Bytes per ID of each layout. */
const WIDTHS = Object.freeze({ lable64: 8, ugd60: 8, si53: 8, sno80: 10, muid128: 16 });
/** Default text form of each layout (the `form` of describe). */
const FORMS = Object.freeze({ lable64: 'hex', ugd60: 'b64', si53: 'dec', sno80: 'b32', muid128: 'muid' });

/** An ID that is not a valid ID of its layout (or an unknown layout). */
class LayoutError extends Error {
  constructor(message) {
    super(message);
    this.name = 'LayoutError';
  }
}

function rev32(x) {
  x >>>= 0;
  x = ((x >>> 1) & 0x55555555) | ((x & 0x55555555) << 1);
  x = ((x >>> 2) & 0x33333333) | ((x & 0x33333333) << 2);
  x = ((x >>> 4) & 0x0f0f0f0f) | ((x & 0x0f0f0f0f) << 4);
  x = ((x >>> 8) & 0x00ff00ff) | ((x & 0x00ff00ff) << 8);
  return ((x >>> 16) | (x << 16)) >>> 0;
}

/** A JSON-like integer: a number when it is safe, else a bigint. */
function num(v) {
  if (typeof v === 'bigint') return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  return v;
}

/** RFC 3339 UTC with 3 (milliseconds) or 6 (microseconds) fractional digits, as idcar writes it. */
function rfc3339(unixUs, digits) {
  const us = BigInt(unixUs);
  const ms = us / 1000n;
  const iso = new Date(Number(ms)).toISOString(); // 2026-11-22T04:25:11.038Z
  if (digits === 3) return iso;
  const micros = String(Number(us % 1000n)).padStart(3, '0');
  return iso.slice(0, -1) + micros + 'Z';
}

function layoutWidth(layout) {
  const w = WIDTHS[layout];
  if (w === undefined) throw new LayoutError(`unknown layout ${JSON.stringify(layout)}`);
  return w;
}

/** The ID's value as an unsigned bigint (of 8, 10 or 16 bytes). */
function value(layout, id) {
  const width = layoutWidth(layout);
  if (typeof id === 'bigint' || typeof id === 'number') {
    if (typeof id === 'number' && !Number.isSafeInteger(id)) throw new LayoutError(`${id} is not a safe integer: pass a bigint`);
    const v = BigInt(id);
    if (v < 0n || v >= 1n << BigInt(8 * width)) throw new LayoutError(`${id} is out of range for ${layout}`);
    return v;
  }
  if (id instanceof Uint8Array) {
    if (id.length !== width) throw new LayoutError(`${layout} IDs are ${width} bytes, got ${id.length}`);
    return BigInt('0x' + Buffer.from(id.buffer, id.byteOffset, id.length).toString('hex'));
  }
  if (id && typeof id === 'object' && 'value' in id) return value(layout, id.value); // an Id
  throw new LayoutError(`an ID is a bigint or a Buffer, got ${typeof id}`);
}

/** The ID's binary form (as on the wire): `width` bytes, big-endian. */
function toBytes(layout, id) {
  const width = layoutWidth(layout);
  if (id instanceof Uint8Array && !(id instanceof Buffer)) id = Buffer.from(id.buffer, id.byteOffset, id.length);
  if (id instanceof Buffer) {
    if (id.length !== width) throw new LayoutError(`${layout} IDs are ${width} bytes, got ${id.length}`);
    return Buffer.from(id);
  }
  return Buffer.from(value(layout, id).toString(16).padStart(2 * width, '0'), 'hex');
}

function hex(v, digits) {
  return v.toString(16).padStart(digits, '0');
}

function ugd60Display(s) {
  const ts = Number(s >> 28n);
  const v = (BigInt(rev32(ts)) << 28n) | (s & 0xfffffffn);
  let out = '';
  for (let i = 0; i < 10; i++) out += UGD60_ALPHABET[Number((v >> BigInt(54 - 6 * i)) & 63n)];
  return out;
}

function sno80B32(v) {
  let out = '';
  for (let i = 0; i < 16; i++) out += SNO80_ALPHABET[Number((v >> BigInt(75 - 5 * i)) & 31n)];
  return out;
}

function muidText(v) {
  const h = hex(v, 32).toUpperCase();
  return `${h.slice(0, 13)}-${h.slice(13, 24)}-${h.slice(24)}`;
}

/** The ID in its layout's default text form (as `idcar` prints it). */
function text(layout, id, params) { // eslint-disable-line no-unused-vars
  if (layout === 'lable64' && typeof id === 'bigint' && id >= 0n && id < 1n << 64n) return hex(id, 16);
  if (layout === 'si53' && typeof id === 'bigint' && id >= 0n && id < 1n << 64n) return id.toString();
  const v = value(layout, id);
  switch (layout) {
    case 'lable64': return hex(v, 16);
    case 'si53': return v.toString();
    case 'ugd60': return ugd60Display(v);
    case 'sno80': return sno80B32(v);
    default: return muidText(v);
  }
}

function si53Params(params) {
  const p = params || {};
  const base = p['base-clock'] !== undefined ? Number(p['base-clock']) : SI53_DEFAULT_BASE_CLOCK;
  const midBits = p['mid-bits'] !== undefined ? Number(p['mid-bits']) : SI53_DEFAULT_MID_BITS;
  if (!Number.isSafeInteger(base) || !Number.isInteger(midBits) || midBits < 0 || midBits > 13) {
    throw new LayoutError(`bad si53 parameters ${JSON.stringify(p)}`);
  }
  return { base, midBits };
}

/** The ID's fields: the same keys and values as `idcar decode --json` (integers as numbers). */
function decode(layout, id, params) {
  const v = value(layout, id);
  switch (layout) {
    case 'lable64': {
      const reserved = Number((v >> 10n) & 63n);
      if (reserved) throw new LayoutError(`lable64 reserved bits are ${reserved}, not zero`);
      const hi = Number(v >> 32n);
      const lo = Number(v & 0xffffffffn) & ~0x3fffff;
      const ms = rev32(lo) * 2 ** 32 + rev32(hi); // < 2^42: a safe number
      return {
        layout: 'lable64',
        id: hex(v, 16),
        timestamp_ms: ms,
        sequence: Number((v >> 16n) & 63n),
        generator: Number((v >> 4n) & 63n),
        cluster: Number(v & 15n),
        time: rfc3339(BigInt(ms) * 1000n, 3),
      };
    }
    case 'ugd60': {
      if (v >= 1n << 60n) throw new LayoutError('ugd60 IDs have 60 bits');
      const ts = Number(v >> 28n);
      return {
        layout: 'ugd60',
        id: ugd60Display(v),
        storage_hex: hex(v, 15),
        timestamp_s: ts,
        worker: Number((v >> 19n) & 511n),
        seq: Number((v >> 9n) & 1023n),
        random: Number(v & 511n),
        time: rfc3339(BigInt(UGD60_EPOCH_S + ts) * 1000000n, 3),
      };
    }
    case 'si53': {
      if (v >= 1n << 53n) throw new LayoutError('si53 IDs are below 2^53');
      const { base, midBits } = si53Params(params);
      const uinBits = 13 - midBits;
      const n = Number(v);
      const mab = Math.floor(n / 8192);
      const low = n % 8192;
      const ms = base + mab;
      return {
        layout: 'si53',
        id: n,
        MAB: mab,
        MID: (low >>> uinBits) & ((1 << midBits) - 1),
        UIN: low & ((1 << uinBits) - 1),
        base_clock: base,
        timestamp_ms: num(BigInt(base) + BigInt(mab)),
        time: rfc3339(BigInt(ms) * 1000n, 3),
      };
    }
    case 'sno80': {
      const head = v >> 16n;
      const units = head >> 25n;
      const unixMs = BigInt(SNO80_EPOCH_MS) + units * 4n;
      const partition = Number(head & 65535n);
      return {
        layout: 'sno80',
        id: sno80B32(v),
        bytes_hex: hex(v, 20),
        units: num(units),
        tick: Number((head >> 24n) & 1n),
        meta: Number((head >> 16n) & 255n),
        partition,
        partition_bytes_hex: hex(partition, 4),
        sequence: Number(v & 65535n),
        unix_ms: num(unixMs),
        time: rfc3339(unixMs * 1000n, 3),
      };
    }
    default: { // muid128
      const ts = v >> 76n;
      return {
        layout: 'muid128',
        id: muidText(v),
        packed_hex: hex(v, 32),
        timestamp: num(ts),
        medallion: num((v >> 32n) & ((1n << 44n) - 1n)),
        offset: Number(BigInt.asIntN(32, v & 0xffffffffn)),
        time: rfc3339(ts, 6),
      };
    }
  }
}

/** An ID with its layout: raw bytes, text form, fields. */
class Id {
  constructor(layout, id, params) {
    layoutWidth(layout);
    this.layout = layout;
    this.params = params || {};
    /** bigint for lable64, ugd60, si53; Buffer for sno80, muid128 */
    this.value = WIDTHS[layout] === 8 ? value(layout, id) : toBytes(layout, id);
  }

  /** The binary form, as on the wire. */
  get bytes() { return toBytes(this.layout, this.value); }

  /** The default text form. */
  toString() { return text(this.layout, this.value, this.params); }

  toJSON() { return this.toString(); }

  /** The fields, as `idcar decode --json` prints them. */
  decode() { return decode(this.layout, this.value, this.params); }

  equals(other) {
    return other instanceof Id && other.layout === this.layout && this.bytes.equals(other.bytes);
  }
}

module.exports = {
  WIDTHS, FORMS, LayoutError, Id, text, decode, toBytes, rfc3339,
  UGD60_EPOCH_S, SNO80_EPOCH_MS, SI53_DEFAULT_BASE_CLOCK, SI53_DEFAULT_MID_BITS,
};
