'use strict';
// Text forms and fields of every idcar layout, exactly as `idcar decode --json` prints them.
// Pure functions of an ID (a bigint for the 8-byte layouts, a Buffer for sno80, muid128 and
// uuid7) and, for si53, the server's parameters. No I/O.

const UGD60_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const SNO80_ALPHABET = '23456789abcdefghijklmnopqrstuvwx';
/** Crockford's base32 (uuid7's ulid form). */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const UGD60_EPOCH_S = 1519862400;
const SNO80_EPOCH_MS = 1262304000000;
const SI53_DEFAULT_BASE_CLOCK = 1577836800000;
const SI53_DEFAULT_MID_BITS = 5;
/** uuid7's check-byte multiplier. */
const UUID7_K = 0x9e3779b97f4a7c15n;
/** The last millisecond RFC 3339 writes (9999-12-31T23:59:59.999Z): uuid7 decodes no later one. */
const UUID7_LAST_MS = 253402300799999n;
const M64 = (1n << 64n) - 1n;

/** Bytes per ID of each layout. */
const WIDTHS = Object.freeze({ lable64: 8, ugd60: 8, si53: 8, sno80: 10, muid128: 16, uuid7: 16 });
/** Default text form of each layout (the `form` of describe). */
const FORMS = Object.freeze({ lable64: 'hex', ugd60: 'b64', si53: 'dec', sno80: 'b32', muid128: 'muid', uuid7: 'uuid' });
/** The text forms `text` writes and `parse` reads for each layout: the default first. */
const TEXT_FORMS = Object.freeze({
  lable64: Object.freeze(['hex']),
  ugd60: Object.freeze(['b64']),
  si53: Object.freeze(['dec']),
  sno80: Object.freeze(['b32']),
  muid128: Object.freeze(['muid']),
  uuid7: Object.freeze(['uuid', 'hex', 'ulid']),
});
/** The parameters a server of each layout describes when started with default flags. */
const PARAMS = Object.freeze({
  lable64: Object.freeze({ 'cluster-id': '0' }),
  ugd60: Object.freeze({}),
  si53: Object.freeze({ 'base-clock': String(SI53_DEFAULT_BASE_CLOCK), 'mid-bits': String(SI53_DEFAULT_MID_BITS) }),
  sno80: Object.freeze({ 'sequence-max': '65535', 'sequence-min': '0' }),
  muid128: Object.freeze({ 'medallion-base': '0x10000000000' }),
  uuid7: Object.freeze({ 'cluster-id': '0' }),
});

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

function layoutForm(layout, form) {
  const forms = TEXT_FORMS[layout];
  if (forms === undefined) throw new LayoutError(`unknown layout ${JSON.stringify(layout)}`);
  if (form === undefined || form === null) return forms[0];
  if (!forms.includes(form)) {
    throw new LayoutError(`${layout} has no text form ${JSON.stringify(form)} (its forms: ${forms.join(', ')})`);
  }
  return form;
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

/** uuid7's canonical text: 32 lower-case hex digits in 8-4-4-4-12 groups. */
function uuidText(v) {
  const h = hex(v, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function ulidText(v) {
  let out = '';
  for (let i = 0; i < 26; i++) out += CROCKFORD[Number((v >> BigInt(125 - 5 * i)) & 31n)];
  return out;
}

/**
 * The ID in a text form of its layout (as `idcar` prints it): by default the layout's default
 * form; uuid7 also writes `hex` and `ulid`.
 */
function text(layout, id, params, form) { // eslint-disable-line no-unused-vars
  form = layoutForm(layout, form);
  if (layout === 'lable64' && typeof id === 'bigint' && id >= 0n && id < 1n << 64n) return hex(id, 16);
  if (layout === 'si53' && typeof id === 'bigint' && id >= 0n && id < 1n << 64n) return id.toString();
  const v = value(layout, id);
  switch (layout) {
    case 'lable64': return hex(v, 16);
    case 'si53': return v.toString();
    case 'ugd60': return ugd60Display(v);
    case 'sno80': return sno80B32(v);
    case 'muid128': return muidText(v);
    default: // uuid7
      if (form === 'hex') return hex(v, 32);
      if (form === 'ulid') return ulidText(v);
      return uuidText(v);
  }
}

/** The digits of `t` in `alphabet` (case-sensitive), as an unsigned bigint; null on a stranger. */
function digitsOf(t, alphabet, bits) {
  let v = 0n;
  for (const c of t) {
    const k = alphabet.indexOf(c);
    if (k < 0) return null;
    v = (v << BigInt(bits)) | BigInt(k);
  }
  return v;
}

/** Why `v` is no version-7 UUID of RFC 9562's variant, or null when it is one. */
function notUuid7(v) {
  const version = Number((v >> 76n) & 15n);
  if (version !== 7) return `version ${version}, not 7 (the 13th hex digit of a UUIDv7 is 7)`;
  const variant = Number((v >> 62n) & 3n);
  if (variant !== 2) return `variant bits ${variant.toString(2).padStart(2, '0')}, not 10 (the 17th hex digit of a UUIDv7 is 8, 9, a or b)`;
  return null;
}

function parseUuid7(t, form) {
  if (form === undefined) {
    if (t.includes('-')) form = 'uuid';
    else if (t.length === 32) form = 'hex';
    else if (t.length === 26) form = 'ulid';
    else throw new Error('expected 36 characters (8-4-4-4-12 hex digits), 32 hex digits or 26 Crockford base32 characters');
  }
  let v;
  if (form === 'uuid') {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(t)) throw new Error('not 8-4-4-4-12 hex digits');
    v = BigInt('0x' + t.replace(/-/g, ''));
  } else if (form === 'hex') {
    if (!/^[0-9a-f]{32}$/i.test(t)) throw new Error('not 32 hex digits');
    v = BigInt('0x' + t);
  } else {
    if (!/^[0-9a-z]{26}$/i.test(t)) throw new Error('not 26 Crockford base32 characters');
    v = digitsOf(t.toUpperCase(), CROCKFORD, 5);
    if (v === null) throw new Error('not Crockford base32 (0-9, A-Z without I, L, O, U)');
    if (v >> 128n) throw new Error('above 128 bits (the first of 26 characters is 0-7)');
  }
  const why = notUuid7(v);
  if (why) throw new Error(`not a UUIDv7: ${why}`);
  return Buffer.from(hex(v, 32), 'hex');
}

function parseText(layout, t, form) {
  switch (layout) {
    case 'lable64':
      if (!/^[0-9a-f]{16}$/i.test(t)) throw new Error('not 16 hex digits');
      return BigInt('0x' + t);
    case 'si53': {
      if (!/^[0-9]{1,16}$/.test(t)) throw new Error('not a decimal integer below 2^53');
      const v = BigInt(t);
      if (v >= 1n << 53n) throw new Error('not a decimal integer below 2^53');
      return v;
    }
    case 'ugd60': {
      const v = t.length === 10 ? digitsOf(t, UGD60_ALPHABET, 6) : null;
      if (v === null) throw new Error(`not 10 characters of ${UGD60_ALPHABET}`);
      return (BigInt(rev32(Number(v >> 28n))) << 28n) | (v & 0xfffffffn);
    }
    case 'sno80': {
      const v = t.length === 16 ? digitsOf(t, SNO80_ALPHABET, 5) : null;
      if (v === null) throw new Error(`not 16 characters of ${SNO80_ALPHABET}`);
      return Buffer.from(hex(v, 20), 'hex');
    }
    case 'muid128':
      if (!/^[0-9a-f]{13}-[0-9a-f]{11}-[0-9a-f]{8}$/i.test(t)) throw new Error('not 13-11-8 hex digits');
      return Buffer.from(t.replace(/-/g, ''), 'hex');
    default:
      return parseUuid7(t, form);
  }
}

/**
 * The ID a text form of `layout` writes (the inverse of `text`): a bigint for lable64, ugd60
 * and si53, a Buffer for sno80, muid128 and uuid7. Without `form`, the layout's default form;
 * uuid7 then takes any of its forms, told apart by their shape (upper or lower case).
 */
function parse(layout, t, form) {
  const explicit = form !== undefined && form !== null;
  form = layoutForm(layout, form);
  if (typeof t !== 'string') throw new LayoutError(`a text ID is a string, got ${typeof t}`);
  try {
    return parseText(layout, t, explicit || layout !== 'uuid7' ? form : undefined);
  } catch (err) {
    const shown = t.length > 64 ? `${JSON.stringify(t.slice(0, 64))}...` : JSON.stringify(t);
    throw new LayoutError(`${shown} is not a ${layout} ID${explicit || layout !== 'uuid7' ? ` in form ${form}` : ''}: ${err.message}`);
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
    case 'uuid7': {
      const why = notUuid7(v);
      if (why) throw new LayoutError(`${uuidText(v)} is not a UUIDv7: ${why}`);
      const ms = v >> 80n;
      if (ms > UUID7_LAST_MS) {
        throw new LayoutError(`uuid7 unix_ts_ms ${ms} is after 9999-12-31T23:59:59.999Z, the last time RFC 3339 writes`);
      }
      const hi = v >> 64n;
      const lo = v & M64;
      const check = BigInt.asUintN(64, (BigInt.asUintN(64, hi * UUID7_K) ^ (lo >> 8n)) * UUID7_K) >> 56n;
      const fields = {
        layout: 'uuid7',
        id: uuidText(v),
        hex: hex(v, 32),
        unix_ts_ms: Number(ms),
        time: rfc3339(ms * 1000n, 3),
        issuer: 'other',
      };
      if (check !== (lo & 255n)) return fields; // another generator's UUIDv7: no idcar fields
      fields.issuer = 'idcar';
      fields.counter = Number(((hi & 4095n) << 10n) | ((lo >> 52n) & 1023n));
      fields.cluster = Number((lo >> 48n) & 15n);
      fields.slot = Number((lo >> 32n) & 65535n);
      fields.random = Number((lo >> 8n) & 16777215n);
      return fields;
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
    /** bigint for lable64, ugd60, si53; Buffer for sno80, muid128, uuid7 */
    this.value = WIDTHS[layout] === 8 ? value(layout, id) : toBytes(layout, id);
  }

  /** The binary form, as on the wire. */
  get bytes() { return toBytes(this.layout, this.value); }

  /** uuid7: the canonical UUID text (8-4-4-4-12 lower-case hex digits); null for the other layouts. */
  get uuid() { return this.layout === 'uuid7' ? uuidText(value(this.layout, this.value)) : null; }

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
  WIDTHS, FORMS, TEXT_FORMS, PARAMS, LayoutError, Id, text, parse, decode, toBytes, rfc3339,
  UGD60_EPOCH_S, SNO80_EPOCH_MS, SI53_DEFAULT_BASE_CLOCK, SI53_DEFAULT_MID_BITS,
};
