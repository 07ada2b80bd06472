'use strict';
// The Node.js client of idcar: one pipelined connection over the Unix socket, describe on
// connect, timeouts on every request, retries with backoff, optional prefetch.
// Wire protocol: docs/protocol.md; the contract shared by all clients: clients/SPEC.md.

const fs = require('node:fs');
const net = require('node:net');
const nodePath = require('node:path');
const { performance } = require('node:perf_hooks');
const layouts = require('./layouts');

const MAGIC = 0xd1;
const DEFAULT_SOCKET = '/tmp/idcar.sock';
/** Largest count sent in one request (servers accept at least 1,000; larger asks are split). */
const CHUNK = 1000;
/** Largest describe answer or error reason accepted. */
const MAX_TEXT = 64 * 1024;
const DESCRIBE_FRAME = Buffer.from([MAGIC, 2, 0, 0]);
const RETRY_FIRST_MS = 10;
const RETRY_MAX_MS = 200;
/** Connect failures retried until the deadline (the server may be restarting). */
const RETRY_CODES = new Set(['ENOENT', 'ECONNREFUSED', 'EAGAIN', 'ECONNRESET', 'EPIPE', 'EOF']);

const ERRNO_TEXT = {
  ENOENT: 'no such file or directory',
  ECONNREFUSED: 'connection refused',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ECONNRESET: 'connection reset by peer',
  EPIPE: 'broken pipe',
  EAGAIN: 'resource temporarily unavailable',
  ENOTSOCK: 'not a socket',
  ENOTDIR: 'not a directory',
};

// ---- errors -------------------------------------------------------------------------------

/** Anything that went wrong talking to idcar. */
class IdcarError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = this.constructor.name;
  }
}

/** The socket cannot be reached (missing, refused, permission denied) or the connection was lost. */
class ConnectError extends IdcarError {
  constructor(socketPath, code, detail, lost) {
    super(lost
      ? `connection to idcar at ${socketPath} lost: ${code}${detail ? ` (${detail})` : ''}`
      : `cannot connect to idcar at ${socketPath}: ${code}${detail ? ` (${detail})` : ''}`);
    this.socketPath = socketPath;
    this.code = code;
    this.lost = Boolean(lost);
  }
}

/** The server cannot issue IDs now (status 2: no lease, mark reached, timed out). */
class UnavailableError extends IdcarError {
  constructor(reason) {
    super(`idcar unavailable: ${reason}`);
    this.reason = reason;
  }
}

/** The server refused the request (status 1); retrying will not help. */
class BadRequestError extends IdcarError {
  constructor(reason) {
    super(`idcar refused the request: ${reason}`);
    this.reason = reason;
  }
}

/** The server's answer is not the idcar binary protocol; the connection was dropped. */
class ProtocolError extends IdcarError {}

/** No answer within the timeout; the connection was dropped. */
class TimeoutError extends IdcarError {}

/** The client was closed. */
class ClosedError extends IdcarError {
  constructor() {
    super('the idcar client is closed');
  }
}

function socketPath(socket) {
  return socket || process.env.IDCAR_SOCKET || DEFAULT_SOCKET;
}

function getIdsFrame(count) {
  const b = Buffer.allocUnsafe(8);
  b[0] = MAGIC; b[1] = 1; b[2] = 0; b[3] = 4;
  b.writeUInt32BE(count, 4);
  return b;
}
const ONE_FRAME = getIdsFrame(1);

/**
 * A ConnectError saying so if `err` failed to find a socket whose directory does not exist (or
 * is not a directory): never retried, the server does not create directories.
 */
function missingDirectory(err, socket) {
  if (!(err instanceof ConnectError) || err.lost || !['ENOENT', 'ENOTDIR'].includes(err.code)) return null;
  const dir = nodePath.dirname(socket);
  let what = 'does not exist';
  try {
    if (fs.statSync(dir).isDirectory()) return null;
    what = 'is not a directory';
  } catch (e) {
    if (e.code !== 'ENOENT' && e.code !== 'ENOTDIR') return null;
  }
  return new ConnectError(socket, err.code, `directory ${dir} ${what}`);
}

function retryable(err) {
  return err instanceof UnavailableError || (err instanceof ConnectError && RETRY_CODES.has(err.code));
}

// ---- one connection -----------------------------------------------------------------------

/** A FIFO of pending requests without O(n) shifts. */
class Queue {
  constructor() { this.items = []; this.head = 0; }
  get length() { return this.items.length - this.head; }
  push(x) { this.items.push(x); }
  peek() { return this.items[this.head]; }
  shift() {
    const x = this.items[this.head];
    this.items[this.head++] = undefined;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return x;
  }
  drain() { const all = this.items.slice(this.head); this.items = []; this.head = 0; return all; }
}

/**
 * One socket: requests are written at once (pipelined) and their answers matched in order
 * against a FIFO of pending requests. Any error that desynchronises the stream (protocol
 * error, timeout, lost connection) fails every pending request and kills the connection.
 */
class Connection {
  constructor(path, timeoutMs, onDead) {
    this.path = path;
    this.timeoutMs = timeoutMs;
    this.onDead = onDead;
    this.dead = null; // the error that killed it
    this.connected = false;
    this.info = null; // describe answer
    this.width = 0;
    this.pending = new Queue();
    this.buf = null; // unparsed bytes
    this.timer = null;
    this.timerAt = 0;
    this.socket = net.createConnection({ path });
    this.socket.on('connect', () => { this.connected = true; });
    this.socket.on('data', (chunk) => this._data(chunk));
    this.socket.on('error', (err) => this._error(err));
    this.socket.on('close', () => this._fail(this._lost('EOF', 'the server closed the connection')));
    this.socket.on('end', () => this._fail(this._lost('EOF', 'the server closed the connection')));
  }

  _lost(code, detail) {
    return new ConnectError(this.path, code, detail, this.connected);
  }

  _error(err) {
    const code = err.code || 'EIO';
    this._fail(new ConnectError(this.path, code, ERRNO_TEXT[code] || err.message, this.connected));
  }

  /** Sends a request; resolves with the payload's IDs (or the describe object). */
  request(kind, count) {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise((resolve, reject) => {
      const p = { kind, count, resolve, reject, deadline: performance.now() + this.timeoutMs };
      if (this.pending.length === 0) {
        this.socket.ref();
        this._arm(p.deadline);
      }
      this.pending.push(p);
      this.socket.write(kind === 'describe' ? DESCRIBE_FRAME : count === 1 ? ONE_FRAME : getIdsFrame(count));
    });
  }

  /** One timer at a time, for the oldest pending request (later ones have later deadlines). */
  _arm(at) {
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this._tick(), Math.max(1, Math.ceil(at - performance.now())));
    this.timer.unref();
  }

  _tick() {
    this.timer = null;
    const head = this.pending.peek();
    if (!head) return;
    if (performance.now() >= head.deadline - 0.5) {
      this._fail(new TimeoutError(`idcar at ${this.path}: no answer within ${this.timeoutMs} ms`));
    } else {
      this._arm(head.deadline);
    }
  }

  _data(chunk) {
    if (this.dead) return;
    // The timeout counts from the last progress, not from when a request was queued: many
    // pipelined asks of a slow layout are answered steadily, one after the other.
    const head = this.pending.peek();
    if (head) head.deadline = performance.now() + this.timeoutMs;
    let b = this.buf ? Buffer.concat([this.buf, chunk]) : chunk;
    let off = 0;
    try {
      while (b.length - off >= 8) {
        const p = this.pending.peek();
        if (!p) throw new ProtocolError(`idcar at ${this.path} sent data nobody asked for`);
        if (b[off] !== MAGIC) throw new ProtocolError(`bad magic byte 0x${b[off].toString(16).padStart(2, '0')} in a response from ${this.path}`);
        const status = b[off + 1];
        const width = b[off + 2];
        const len = b.readUInt32BE(off + 4);
        if (status > 2) throw new ProtocolError(`unknown status ${status} in a response from ${this.path}`);
        if (status !== 0 || p.kind === 'describe') {
          if (len > MAX_TEXT) throw new ProtocolError(`response of ${len} bytes from ${this.path}`);
        } else {
          if (this.width && width !== this.width) throw new ProtocolError(`response width ${width}, the server described ${this.width}`);
          if (width === 0 || len !== p.count * width) throw new ProtocolError(`asked ${this.path} for ${p.count} IDs, the response holds ${len} bytes of width ${width}`);
        }
        if (b.length - off - 8 < len) break;
        const payload = b.subarray(off + 8, off + 8 + len);
        off += 8 + len;
        const req = this.pending.shift();
        try {
          this._answer(req, status, width, payload);
        } catch (err) {
          req.reject(err);
          throw err;
        }
      }
    } catch (err) {
      this.buf = null;
      this._fail(err);
      return;
    }
    this.buf = off < b.length ? Buffer.from(b.subarray(off)) : null;
    const next = this.pending.peek();
    if (next) next.deadline = Math.max(next.deadline, performance.now() + this.timeoutMs);
    if (this.pending.length === 0) {
      if (this.timer) { clearTimeout(this.timer); this.timer = null; }
      this.socket.unref();
    } else if (!this.timer) {
      this._arm(this.pending.peek().deadline);
    }
  }

  _answer(p, status, width, payload) {
    if (status === 1) return p.reject(new BadRequestError(payload.toString('utf8').trim()));
    if (status === 2) return p.reject(new UnavailableError(payload.toString('utf8').trim()));
    if (p.kind === 'describe') {
      let info;
      try {
        info = JSON.parse(payload.toString('utf8'));
      } catch (err) {
        throw new ProtocolError(`bad describe answer from ${this.path}: ${err.message}`);
      }
      if (!info || typeof info.layout !== 'string' || !layouts.WIDTHS[info.layout] ||
          layouts.WIDTHS[info.layout] !== Number(info.width) || (width && width !== Number(info.width))) {
        throw new ProtocolError(`bad describe answer from ${this.path}: ${payload.toString('utf8').slice(0, 200)}`);
      }
      this.info = {
        layout: info.layout,
        width: Number(info.width),
        form: info.form || layouts.FORMS[info.layout],
        params: Object.assign({}, info.params === undefined ? layouts.PARAMS[info.layout] : info.params),
      };
      this.width = this.info.width;
      return p.resolve(this.info);
    }
    if (width === 8) {
      if (p.count === 1) return p.resolve(payload.readBigUInt64BE(0));
      const out = new Array(p.count);
      for (let i = 0; i < p.count; i++) out[i] = payload.readBigUInt64BE(i * 8);
      return p.resolve(out);
    }
    const copy = Buffer.from(payload); // do not pin the socket's read buffer
    if (p.count === 1) return p.resolve(copy);
    const out = new Array(p.count);
    for (let i = 0; i < p.count; i++) out[i] = copy.subarray(i * width, (i + 1) * width);
    return p.resolve(out);
  }

  _fail(err) {
    if (this.dead) return;
    this.dead = err;
    if (this.timer) { clearTimeout(this.timer); this.timer = null; }
    this.socket.destroy();
    this.buf = null;
    const all = this.pending.drain();
    for (const p of all) p.reject(err);
    this.onDead(this);
  }

  close() {
    this._fail(new ClosedError());
  }
}

// ---- the client ---------------------------------------------------------------------------

/**
 * A promise-based idcar client, safe for any number of concurrent calls (requests are
 * pipelined on one connection; answers come back in order).
 */
class Client {
  constructor(options = {}) {
    if (typeof options === 'string') options = { socket: options };
    const {
      socket, timeoutMs = 5000, retryDeadlineMs = 5000, prefetch = 0, lowWater, maxAgeMs = 1000,
    } = options;
    for (const [k, v] of Object.entries({ timeoutMs, retryDeadlineMs, prefetch, maxAgeMs })) {
      if (typeof v !== 'number' || !(v >= 0)) throw new RangeError(`${k} must be a number >= 0`);
    }
    if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be above 0');
    this.socketPath = socketPath(socket);
    this.timeoutMs = timeoutMs;
    this.retryDeadlineMs = retryDeadlineMs;
    this.prefetch = Math.floor(prefetch);
    this.lowWater = lowWater === undefined ? Math.floor(this.prefetch / 4) : lowWater;
    if (typeof this.lowWater !== 'number' || !(this.lowWater >= 0) || (this.prefetch && this.lowWater >= this.prefetch)) {
      throw new RangeError('lowWater must be >= 0 and below prefetch');
    }
    this.maxAgeMs = maxAgeMs;
    this._conn = null;
    this._connecting = null;
    this._connectingConn = null;
    this._info = null;
    this._closed = false;
    this._sleeps = new Set();
    // prefetch: batches of {ids, pos, at}; at = when the batch was asked for
    this._batches = new Queue();
    this._buffered = 0;
    this._refill = null; // promise of the refill in flight
  }

  // -- connection ---------------------------------------------------------------------------

  _connect() {
    if (!this._connecting) {
      const conn = new Connection(this.socketPath, this.timeoutMs, (c) => {
        if (this._conn === c) this._conn = null;
      });
      this._connectingConn = conn;
      this._connecting = conn.request('describe', 0).then((info) => {
        this._connecting = null;
        this._connectingConn = null;
        if (this._closed) {
          conn.close();
          throw new ClosedError();
        }
        this._info = info;
        this._conn = conn;
        return conn;
      }, (err) => {
        this._connecting = null;
        this._connectingConn = null;
        if (err instanceof BadRequestError) {
          err = new ProtocolError(`idcar at ${this.socketPath} refused describe (a server too old for this client?): ${err.reason}`);
        }
        conn._fail(err);
        throw err;
      });
    }
    return this._connecting;
  }

  _attempt(kind, count) {
    const c = this._conn;
    if (c && !c.dead) return c.request(kind, count);
    return this._connect().then((conn) => (kind === 'describe' ? conn.info : conn.request(kind, count)));
  }

  _sleep(ms) {
    return new Promise((resolve, reject) => {
      const s = { reject };
      s.timer = setTimeout(() => { this._sleeps.delete(s); resolve(); }, ms);
      this._sleeps.add(s);
    });
  }

  /** One request, connecting and retrying as the contract says. */
  async _call(kind, count) {
    let deadline = -1;
    let delay = RETRY_FIRST_MS;
    let freeRetry = true;
    for (;;) {
      if (this._closed) throw new ClosedError();
      try {
        return await this._attempt(kind, count);
      } catch (err) {
        if (this._closed) throw new ClosedError();
        if (!retryable(err)) throw err;
        const noDir = missingDirectory(err, this.socketPath);
        if (noDir) throw noDir;
        // A connection that died under a request (server restart): one immediate retry.
        if (err instanceof ConnectError && err.lost && freeRetry) {
          freeRetry = false;
          continue;
        }
        const now = performance.now();
        if (deadline < 0) deadline = now + this.retryDeadlineMs;
        if (now >= deadline) throw err;
        await this._sleep(Math.min(delay, deadline - now));
        delay = Math.min(delay * 2, RETRY_MAX_MS);
      }
    }
  }

  /** Fetches n IDs in requests of at most 1,000, pipelined. */
  _fetch(n) {
    if (n <= CHUNK) return this._call('ids', n).then((r) => (n === 1 ? [r] : r));
    const parts = [];
    for (let left = n; left > 0; left -= CHUNK) parts.push(this._call('ids', Math.min(CHUNK, left)));
    return Promise.all(parts).then((all) => [].concat(...all));
  }

  // -- prefetch -----------------------------------------------------------------------------

  /** One buffered ID, or undefined; IDs older than maxAgeMs are dropped. Synchronous. */
  _take() {
    const now = performance.now();
    while (this._batches.length) {
      const b = this._batches.peek();
      if (now - b.at > this.maxAgeMs) {
        this._buffered -= b.ids.length - b.pos;
        this._batches.shift();
        continue;
      }
      const id = b.ids[b.pos];
      b.ids[b.pos++] = undefined;
      this._buffered--;
      if (b.pos === b.ids.length) this._batches.shift();
      return id;
    }
    return undefined;
  }

  _maybeRefill() {
    if (this._refill || this._closed || this._buffered > this.lowWater) return;
    const want = this.prefetch - this._buffered;
    if (want <= 0) return;
    const parts = [];
    for (let left = want; left > 0; left -= CHUNK) {
      const count = Math.min(CHUNK, left);
      const at = performance.now();
      // A single attempt (plus the reconnect after a restart): a caller that finds the buffer
      // empty once it is over fetches itself, with the retry deadline, and sees the error.
      parts.push(this._once(count).then((ids) => {
        if (this._closed) return;
        if (count === 1) ids = [ids];
        this._batches.push({ ids, pos: 0, at });
        this._buffered += ids.length;
      }));
    }
    this._refill = Promise.all(parts).then(() => {}, () => {}).then(() => { this._refill = null; });
  }

  async _once(count) {
    try {
      return await this._attempt('ids', count);
    } catch (err) {
      if (err instanceof ConnectError && err.lost && !this._closed) return this._attempt('ids', count);
      throw err;
    }
  }

  /**
   * n IDs from the buffer, in the order the server issued them: a caller that finds it empty
   * waits for the refill in flight, or, with none, fetches what it lacks itself while no
   * refill may start (a fetch past a refill in flight would hand out newer IDs first).
   */
  async _takeOrdered(n) {
    const out = [];
    const end = performance.now() + this.timeoutMs + this.retryDeadlineMs + 1000;
    for (;;) {
      while (out.length < n) {
        const id = this._take();
        if (id === undefined) break;
        out.push(id);
      }
      if (out.length === n) {
        this._maybeRefill();
        return out;
      }
      if (this._closed) throw new ClosedError();
      if (!this._refill) {
        const direct = this._fetch(n - out.length);
        this._refill = direct.then(() => {}, () => {}).then(() => {
          this._refill = null;
          this._maybeRefill();
        });
        for (const id of await direct) out.push(id);
        return out;
      }
      const left = end - performance.now();
      if (left <= 0) throw new IdcarError(`no IDs from the prefetch refill of ${this.socketPath} in time`);
      let timer;
      const late = new Promise((resolve) => { timer = setTimeout(resolve, left); });
      try {
        await Promise.race([this._refill, late]);
      } finally {
        clearTimeout(timer);
      }
    }
  }

  // -- API ----------------------------------------------------------------------------------

  /** One ID: a bigint (lable64, ugd60, si53) or a Buffer (sno80, muid128, uuid7). */
  nextId() {
    if (this._closed) return Promise.reject(new ClosedError());
    if (this.prefetch > 0) return this._takeOrdered(1).then((got) => got[0]);
    return this._call('ids', 1);
  }

  /** n IDs (n >= 1), in requests of at most 1,000 (from the prefetch buffer first, when on). */
  async ids(n) {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError('n must be a positive integer');
    if (this._closed) throw new ClosedError();
    if (this.prefetch <= 0) return this._fetch(n);
    return this._takeOrdered(n);
  }

  /** The server's {layout, width, form, params} (connects if needed). */
  async describe() {
    if (this._closed) throw new ClosedError();
    if (this._info && this._conn && !this._conn.dead) return this._info;
    return this._call('describe', 0);
  }

  /** The last describe answer, or null before the first connection. */
  get info() {
    return this._info;
  }

  _layout() {
    if (!this._info) throw new IdcarError('the layout is not known yet: await describe() (or any call) first');
    return this._info;
  }

  /**
   * The ID in the server's default text form, or in `form` (uuid7: `uuid`, `hex`, `ulid`)
   * (synchronous; after a first call).
   */
  text(id, form) {
    const d = this._layout();
    return layouts.text(d.layout, id, d.params, form);
  }

  /** The ID a text form of the server's layout writes: the inverse of text() (after a first call). */
  parse(text, form) {
    const d = this._layout();
    return layouts.parse(d.layout, text, form);
  }

  /** The ID's fields, as `idcar decode --json` prints them (synchronous; after a first call). */
  decode(id) {
    const d = this._layout();
    return layouts.decode(d.layout, id, d.params);
  }

  /** The ID as an Id object (raw bytes, text form, fields). */
  id(id) {
    const d = this._layout();
    return new layouts.Id(d.layout, id, d.params);
  }

  /** Closes the connection, fails pending calls with ClosedError, drops the prefetch buffer. */
  close() {
    if (this._closed) return;
    this._closed = true;
    this._batches = new Queue();
    this._buffered = 0;
    for (const s of this._sleeps) {
      clearTimeout(s.timer);
      s.reject(new ClosedError());
    }
    this._sleeps.clear();
    const c = this._conn;
    this._conn = null;
    if (c) c.close();
    if (this._connectingConn) this._connectingConn.close();
  }
}

if (Symbol.dispose) Client.prototype[Symbol.dispose] = Client.prototype.close;

module.exports = {
  Client,
  IdcarError,
  ConnectError,
  UnavailableError,
  BadRequestError,
  ProtocolError,
  TimeoutError,
  ClosedError,
  LayoutError: layouts.LayoutError,
  Id: layouts.Id,
  text: layouts.text,
  parse: layouts.parse,
  decode: layouts.decode,
  toBytes: layouts.toBytes,
  WIDTHS: layouts.WIDTHS,
  DEFAULT_SOCKET,
  CHUNK,
};
