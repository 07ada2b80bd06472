'use strict';
// Run by test/pack.test.js in an empty project where the packed tarball is installed: the
// CommonJS entry point against a real server (IDCAR_SOCKET). Prints one ID's text form.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const idcar = require('idcar-client');
const { Client } = require('idcar-client');

(async () => {
  // the installed copy, not the source tree
  const where = fs.realpathSync(require.resolve('idcar-client'));
  assert.equal(where, fs.realpathSync('node_modules/idcar-client/index.js'));
  assert.ok(where.startsWith(fs.realpathSync(process.cwd())), where);
  assert.equal(require('idcar-client/package.json').name, 'idcar-client');

  const client = new Client();
  assert.equal(client.socketPath, process.env.IDCAR_SOCKET);
  const id = await client.nextId();
  assert.equal(typeof id, 'bigint');
  assert.equal((await client.describe()).layout, 'lable64');
  const text = client.text(id);
  assert.equal(client.decode(id).id, text);
  assert.equal(String(client.id(id)), text);
  assert.equal(idcar.text('lable64', id), text);
  client.close();
  await assert.rejects(client.nextId(), idcar.ClosedError);
  console.log(text);
})().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
