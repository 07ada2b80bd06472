// The ES module entry point: the very objects of the CommonJS module (index.js), so that
// `import` and `require` share one client implementation, its classes and `instanceof` checks.
// Named, because Node cannot detect every name of index.js's `module.exports = {...}` by itself.
// test/pack.test.js checks that these names are exactly those of index.js.
import idcar from './index.js';

export const {
  Client,
  IdcarError,
  ConnectError,
  UnavailableError,
  BadRequestError,
  ProtocolError,
  TimeoutError,
  ClosedError,
  LayoutError,
  Id,
  text,
  parse,
  decode,
  toBytes,
  WIDTHS,
  DEFAULT_SOCKET,
  CHUNK,
} = idcar;

export default idcar;
