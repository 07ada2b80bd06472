/// <reference types="node" />

/** An ID as the server sends it: a bigint for lable64, ugd60, si53; 10 or 16 bytes for sno80, muid128. */
export type IdValue = bigint | Buffer;

export type Layout = 'lable64' | 'ugd60' | 'si53' | 'sno80' | 'muid128';

/** What a server told about itself (the describe request). */
export interface Description {
  layout: Layout;
  /** bytes per ID: 8, 10 or 16 */
  width: number;
  /** default text form: hex, b64, dec, b32, muid */
  form: string;
  /** every parameter that shapes the IDs, e.g. {"mid-bits": "5"}; values as text */
  params: Record<string, string>;
}

/** The fields of an ID, as `idcar decode --json` prints them (integers as numbers). */
export type Fields = Record<string, string | number | bigint>;

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

export class Client {
  constructor(options?: ClientOptions | string);
  readonly socketPath: string;
  /** the last describe answer, or null before the first connection */
  readonly info: Description | null;
  /** one ID */
  nextId(): Promise<IdValue>;
  /** n IDs (asks above 1,000 are split into several requests) */
  ids(n: number): Promise<IdValue[]>;
  /** the server's layout, width, default text form and parameters */
  describe(): Promise<Description>;
  /** the ID in the server's default text form (after any successful call) */
  text(id: IdValue): string;
  /** the ID's fields, as `idcar decode --json` prints them (after any successful call) */
  decode(id: IdValue): Fields;
  /** the ID as an Id object (after any successful call) */
  id(id: IdValue): Id;
  /** closes the connection, fails pending calls with ClosedError, drops the prefetch buffer */
  close(): void;
}

export class Id {
  constructor(layout: Layout, id: IdValue | number, params?: Record<string, string>);
  readonly layout: Layout;
  readonly params: Record<string, string>;
  readonly value: IdValue;
  /** the binary form, as on the wire */
  readonly bytes: Buffer;
  toString(): string;
  toJSON(): string;
  decode(): Fields;
  equals(other: unknown): boolean;
}

export class IdcarError extends Error {}
/** the socket is missing, refuses, denies permission, or the connection was lost */
export class ConnectError extends IdcarError {
  readonly socketPath: string;
  /** ENOENT, ECONNREFUSED, EACCES, ECONNRESET, EPIPE, EOF, ... */
  readonly code: string;
  /** true when an established connection was lost */
  readonly lost: boolean;
}
/** status 2: no lease, mark reached, timed out (retried until the retry deadline) */
export class UnavailableError extends IdcarError {
  readonly reason: string;
}
/** status 1: never retried */
export class BadRequestError extends IdcarError {
  readonly reason: string;
}
/** an answer that is not the idcar binary protocol */
export class ProtocolError extends IdcarError {}
/** no answer within timeoutMs */
export class TimeoutError extends IdcarError {}
/** the client was closed */
export class ClosedError extends IdcarError {}
/** an ID that is not valid in its layout */
export class LayoutError extends Error {}

/** the default text form of an ID of `layout` */
export function text(layout: Layout, id: IdValue | number, params?: Record<string, string>): string;
/** the fields of an ID of `layout` (si53: pass the describe params for base-clock and mid-bits) */
export function decode(layout: Layout, id: IdValue | number, params?: Record<string, string>): Fields;
/** the binary form of an ID of `layout` */
export function toBytes(layout: Layout, id: IdValue | number): Buffer;

export const WIDTHS: Readonly<Record<Layout, number>>;
export const DEFAULT_SOCKET: string;
/** largest count sent in one request */
export const CHUNK: number;
