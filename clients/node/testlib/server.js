'use strict';
// Test helper (kept out of test/ so that `node --test test/` does not run it as a test file):
// starts a real idcar server from $IDCAR_BIN in a fresh temporary directory.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const live = new Set();
process.on('exit', () => {
  for (const p of live) try { p.kill('SIGKILL'); } catch { /* gone */ }
});

/**
 * The server binary: $IDCAR_BIN, else the newer of the repository's target/debug/idcar and
 * target/release/idcar; throws (so the test fails, never skips) when there is none.
 */
function idcarBin() {
  let bin = process.env.IDCAR_BIN;
  if (!bin) {
    const repo = path.join(__dirname, '..', '..', '..');
    const built = ['debug', 'release']
      .map((p) => path.join(repo, 'target', p, 'idcar'))
      .filter((b) => fs.existsSync(b))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs);
    if (built.length === 0) {
      throw new Error('no idcar server to test against: build it (cargo build --bin idcar) or set IDCAR_BIN to the idcar binary');
    }
    bin = built[0];
  }
  if (!fs.existsSync(bin)) throw new Error(`IDCAR_BIN=${bin} does not exist`);
  return bin;
}

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'idcar-node-'));
}

/** true when a describe request on `socket` gets a status-0 answer within 500 ms. */
function describes(socket) {
  return new Promise((resolve) => {
    const s = net.createConnection({ path: socket });
    let buf = Buffer.alloc(0);
    const done = (ok) => { clearTimeout(t); s.destroy(); resolve(ok); };
    const t = setTimeout(() => done(false), 500);
    s.on('error', () => done(false));
    s.on('connect', () => s.write(Buffer.from([0xd1, 2, 0, 0])));
    s.on('data', (c) => {
      buf = Buffer.concat([buf, c]);
      if (buf.length >= 8 && buf.length >= 8 + buf.readUInt32BE(4)) done(buf[0] === 0xd1 && buf[1] === 0);
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A server: `await server.start()` (also after stop(), on the same socket and state file),
 * `await server.stop()` (SIGTERM, SIGKILL after 5 s), `await server.destroy()` (stop, remove
 * the directory).
 */
class Server {
  constructor(layout = 'lable64', extra = []) {
    this.bin = idcarBin();
    this.layout = layout;
    this.extra = extra;
    this.dir = tempDir();
    this.socket = path.join(this.dir, 's.sock');
    this.stateFile = path.join(this.dir, 'state');
    this.proc = null;
    this.log = '';
  }

  async start() {
    const args = ['serve', '--socket', this.socket, '--state-file', this.stateFile, '--admin-addr', 'none',
      '--log', 'warn', '--layout', this.layout, ...this.extra];
    const proc = spawn(this.bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.proc = proc;
    live.add(proc);
    proc.stderr.on('data', (d) => { this.log = (this.log + d).slice(-8000); });
    let exited = null;
    proc.on('exit', (code, sig) => { exited = sig || code; live.delete(proc); });
    const end = Date.now() + 10000;
    while (Date.now() < end) {
      if (exited !== null) throw new Error(`idcar exited (${exited}) at start:\n${this.log}`);
      if (await describes(this.socket)) return this;
      await sleep(20);
    }
    await this.stop();
    throw new Error(`idcar did not answer describe within 10 s:\n${this.log}`);
  }

  async stop() {
    const proc = this.proc;
    this.proc = null;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(t);
  }

  async destroy() {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Starts a server of `layout` with extra flags; resolves once it answers describe. */
async function startServer(layout = 'lable64', extra = []) {
  const s = new Server(layout, extra);
  try {
    return await s.start();
  } catch (err) {
    await s.destroy();
    throw err;
  }
}

/** `idcar decode --layout L --format F [extra] --json -- <text>`, parsed (`--` since a ugd60 ID may start with `-`). */
function cliDecode(layout, form, textId, extra = []) {
  const out = execFileSync(idcarBin(), ['decode', '--layout', layout, '--format', form, ...extra, '--json', '--', textId], {
    encoding: 'utf8', timeout: 10000, env: { ...process.env, IDCAR_LOG: 'error' },
  });
  return JSON.parse(out);
}

module.exports = { idcarBin, tempDir, startServer, Server, cliDecode, sleep };
