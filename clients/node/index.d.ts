/// <reference types="node" />
// Types of idcar-client (index.js; index.d.mts re-exports them for index.mjs).
// test/pack.test.js type-checks a use of every entry point against these declarations and
// compares the names they declare with what the module exports at run time.

/**
 * An ID as the server sends it: a bigint for lable64, ugd60, si53; 10 or 16 bytes for sno80,
 * muid128, uuid7 (JavaScript has no UUID type: a uuid7 ID's canonical text is its text form,
 * `text(id)`, or `Id.uuid`).
 */
export type IdValue = bigint | Buffer;

/**
 * What the functions that read an ID accept: an `IdValue`, a safe integer (`number`), any
 * `Uint8Array` of the layout's width, or an `Id`.
 */
export type IdLike = IdValue | number | Uint8Array | Id;

export type Layout = 'lable64' | 'ugd60' | 'si53' | 'sno80' | 'muid128' | 'uuid7';

/**
 * A text form: each layout's default (lable64 hex, ugd60 b64, si53 dec, sno80 b32, muid128
 * muid, uuid7 uuid); uuid7 also has hex (32 digits) and ulid (26 Crockford base32 characters).
 */
export type TextForm = 'hex' | 'b64' | 'dec' | 'b32' | 'muid' | 'uuid' | 'ulid';

/** What a server told about itself (the describe request). */
export interface Description {
  layout: Layout;
  /** bytes per ID: 8, 10 or 16 */
  width: number;
  /** default text form: hex, b64, dec, b32, muid, uuid */
  form: string;
  /** every parameter that shapes the IDs, e.g. {"mid-bits": "5"}; values as text */
  params: Record<string, string>;
}

/**
 * The fields of an ID, as `idcar decode --json` prints them: integers as numbers (a bigint
 * only beyond Number.MAX_SAFE_INTEGER), the rest strings. Every layout has `layout`, `id` (the
 * text form; a number for si53) and `time` (RFC 3339); the other keys depend on the layout.
 */
export interface Fields {
  layout: Layout;
  id: string | number;
  time: string;
  [field: string]: string | number | bigint;
}

export interface ClientOptions {
  /** socket path; default: IDCAR_SOCKET, else /tmp/idcar.sock */
  socket?: string;
  /** per-request (and connect) timeout, default 5000 */
  timeoutMs?: number;
  /** how long status 2 and connect failures are retried, default 5000; 0 = no retry */
  retryDeadlineMs?: number;
  /** prefetch buffer size, default 0 (off) */
  prefetch?: number;
  /** refill when the buffer holds this many or fewer, default prefetch / 4 */
  lowWater?: number;
  /** buffered IDs older than this are dropped, default 1000 */
  maxAgeMs?: number;
}

/** A promise-based client, safe for any number of concurrent calls (one pipelined connection). */
export class Client {
  /** options, or the socket path; throws RangeError on a bad option */
  constructor(options?: ClientOptions | string);
  /** the socket path in use (the option, else IDCAR_SOCKET, else /tmp/idcar.sock) */
  readonly socketPath: string;
  readonly timeoutMs: number;
  readonly retryDeadlineMs: number;
  /** prefetch buffer size (0: off) */
  readonly prefetch: number;
  readonly lowWater: number;
  readonly maxAgeMs: number;
  /** the last describe answer, or null before the first connection */
  readonly info: Description | null;
  /** one ID */
  nextId(): Promise<IdValue>;
  /** n IDs, n a positive integer (asks above 1,000 are split into several requests) */
  ids(n: number): Promise<IdValue[]>;
  /** the server's layout, width, default text form and parameters */
  describe(): Promise<Description>;
  /** the ID in the server's default text form, or in `form` (after any successful call) */
  text(id: IdLike, form?: TextForm): string;
  /**
   * the ID a text form of the server's layout writes (the inverse of text; uuid7 without `form`
   * takes uuid, hex or ulid); throws LayoutError (after any successful call)
   */
  parse(text: string, form?: TextForm): IdValue;
  /** the ID's fields, as `idcar decode --json` prints them (after any successful call) */
  decode(id: IdLike): Fields;
  /** the ID as an Id object (after any successful call) */
  id(id: IdLike): Id;
  /** closes the connection, fails pending calls with ClosedError, drops the prefetch buffer */
  close(): void;
  /** the same as close(), for `using` (Node 18.18 and later) */
  [Symbol.dispose](): void;
}

/** An ID with its layout: raw bytes, text form, fields. */
export class Id {
  /** throws LayoutError when `id` is not an ID of `layout` */
  constructor(layout: Layout, id: IdLike, params?: Record<string, string>);
  readonly layout: Layout;
  readonly params: Record<string, string>;
  /** a bigint for lable64, ugd60, si53; a Buffer for sno80, muid128, uuid7 */
  readonly value: IdValue;
  /** the binary form, as on the wire */
  readonly bytes: Buffer;
  /** uuid7: the canonical UUID text (8-4-4-4-12 lower-case hex digits); null for the other layouts */
  readonly uuid: string | null;
  /** the default text form */
  toString(): string;
  /** the default text form */
  toJSON(): string;
  decode(): Fields;
  /** an Id of the same layout and bytes */
  equals(other: unknown): boolean;
}

/** Anything that went wrong talking to idcar. */
export class IdcarError extends Error {
  constructor(message?: string, options?: { cause?: unknown });
}
/** the socket is missing, refuses, denies permission, or the connection was lost */
export class ConnectError extends IdcarError {
  constructor(socketPath: string, code: string, detail?: string, lost?: boolean);
  readonly socketPath: string;
  /** ENOENT, ECONNREFUSED, EACCES, ECONNRESET, EPIPE, EOF, ... */
  readonly code: string;
  /** true when an established connection was lost */
  readonly lost: boolean;
}
/** status 2: no lease, mark reached, timed out (retried until the retry deadline) */
export class UnavailableError extends IdcarError {
  constructor(reason: string);
  readonly reason: string;
}
/** status 1: never retried */
export class BadRequestError extends IdcarError {
  constructor(reason: string);
  readonly reason: string;
}
/** an answer that is not the idcar binary protocol */
export class ProtocolError extends IdcarError {}
/** no answer within timeoutMs */
export class TimeoutError extends IdcarError {}
/** the client was closed */
export class ClosedError extends IdcarError {
  constructor();
}
/** an ID that is not valid in its layout (or an unknown layout) */
export class LayoutError extends Error {
  constructor(message?: string);
}

/** an ID of `layout` in the layout's default text form, or in `form` */
export function text(layout: Layout, id: IdLike, params?: Record<string, string>, form?: TextForm): string;
/**
 * the ID a text form of `layout` writes (the inverse of text): the default form, or `form`;
 * uuid7 without `form` takes uuid (either case), hex or ulid; throws LayoutError
 */
export function parse(layout: Layout, text: string, form?: TextForm): IdValue;
/** the fields of an ID of `layout` (si53: pass the describe params for base-clock and mid-bits) */
export function decode(layout: Layout, id: IdLike, params?: Record<string, string>): Fields;
/** the binary form of an ID of `layout` */
export function toBytes(layout: Layout, id: IdLike): Buffer;

/** bytes per ID of each layout */
export const WIDTHS: Readonly<Record<Layout, number>>;
/** '/tmp/idcar.sock', the server's default */
export const DEFAULT_SOCKET: string;
/** largest count sent in one request (1000) */
export const CHUNK: number;
