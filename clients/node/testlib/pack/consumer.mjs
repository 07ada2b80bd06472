// Run by test/pack.test.js in an empty project where the packed tarball is installed: the ES
// module entry point against a real server (IDCAR_SOCKET). Prints one ID's text form.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as ns from 'idcar-client';
import idcar, { Client, ClosedError, Id, decode, text } from 'idcar-client';

const require = createRequire(import.meta.url);
const cjs = require('idcar-client');

// Every name of the CommonJS module is a named export, and the very same object (one
// implementation: instanceof works across import and require).
assert.deepEqual(Object.keys(ns).sort(), [...Object.keys(cjs), 'default'].sort());
for (const k of Object.keys(cjs)) assert.equal(ns[k], cjs[k], k);
assert.equal(idcar, cjs);

const client = new Client();
assert.equal(client.socketPath, process.env.IDCAR_SOCKET);
const [id, ...more] = await client.ids(3);
assert.equal(more.length, 2);
assert.equal(typeof id, 'bigint');
const t = client.text(id);
assert.equal(text('lable64', id), t);
assert.equal(decode('lable64', id).id, t);
assert.ok(new Id('lable64', id).equals(client.id(id)));
client.close();
await assert.rejects(client.nextId(), (err) => err instanceof ClosedError && err instanceof cjs.ClosedError);
console.log(t);
