'use strict';
// examples/fetch.js as a user runs it: IDs of a real server, its flags, and its one-line errors.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { startServer, tempDir, cliDecode } = require('../testlib/server');

const FETCH = path.join(__dirname, '..', 'examples', 'fetch.js');

/** Runs the fetch example (bounded); {code, out, err, ms}. */
function fetch(args, env = {}) {
  const started = Date.now();
  const r = spawnSync(process.execPath, [FETCH, ...args], {
    encoding: 'utf8', timeout: 30000, env: { ...process.env, ...env },
  });
  if (r.error) throw r.error;
  return { code: r.status, out: r.stdout, err: r.stderr, ms: Date.now() - started };
}

/** A failure: exit status 1, one line `error: ...` on stderr, nothing on stdout. */
function assertOneLineError(r, what) {
  assert.equal(r.code, 1, `${what}: ${r.out} ${r.err}`);
  assert.equal(r.out, '', what);
  assert.match(r.err, /^error: [^\n]+\n$/, what);
}

test('fetch prints uuid7 IDs in their canonical text, with any retry deadline', { timeout: 60000 }, async () => {
  const server = await startServer('uuid7');
  try {
    const seen = new Set();
    for (const extra of [[], ['--retry-deadline', '0'], ['--retry-deadline=2.5'], ['--prefetch', '10', '--retry-deadline', '1']]) {
      const r = fetch(['--socket', server.socket, '--count', '5', ...extra]);
      assert.equal(r.code, 0, `${extra}: ${r.err}`);
      const lines = r.out.trimEnd().split('\n');
      assert.equal(lines.length, 5, r.out);
      for (const line of lines) {
        assert.match(line, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
        assert.equal(cliDecode('uuid7', 'uuid', line).issuer, 'idcar');
        assert.ok(!seen.has(line), `${line} twice`);
        seen.add(line);
      }
    }
  } finally {
    await server.destroy();
  }
});

test('fetch --retry-deadline: a missing socket is retried that long, then one error line', { timeout: 30000 }, () => {
  const dir = tempDir();
  const missing = path.join(dir, 'missing.sock');
  try {
    const slow = fetch(['--socket', missing, '--retry-deadline', '1.2']);
    assertOneLineError(slow, '--retry-deadline 1.2');
    assert.match(slow.err, /missing\.sock/);
    assert.ok(slow.ms >= 1200, `gave up after ${slow.ms} ms`);
    const now = fetch(['--socket', missing, '--retry-deadline', '0']);
    assertOneLineError(now, '--retry-deadline 0');
    assert.ok(now.ms < slow.ms - 500, `no retry took ${now.ms} ms, 1.2 s of retries ${slow.ms} ms`);
    // bad values: refused before connecting
    for (const bad of [['--retry-deadline', 'soon'], ['--retry-deadline', '-1'], ['--retry-deadline', '1e3'],
      ['--retry-deadline', ''], ['--retry-deadline'], ['--retry-deadline', '9'.repeat(400)]]) {
      const r = fetch(['--socket', missing, ...bad]);
      assertOneLineError(r, bad.join(' '));
      assert.match(r.err, /--retry-deadline/, bad.join(' '));
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
