'use strict';
// The package as `npm pack` makes it: what the tarball holds, and what a user gets after
// `npm install <tarball>` in an empty project — require() from CommonJS, import from an ES
// module, the README's examples, and the TypeScript declarations (tsc --noEmit --strict with
// moduleResolution node16, nodenext and bundler, CommonJS and ES consumers), all against a real
// idcar server. TypeScript comes from this directory's devDependencies: run `npm ci` first.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { startServer, tempDir, cliDecode } = require('../testlib/server');

const ROOT = path.resolve(__dirname, '..');
const FIXTURES = path.join(ROOT, 'testlib', 'pack');

/** Exactly what the tarball holds: the code, its types, the examples, the README. */
const PACKED = [
  'README.md',
  'examples/args.js',
  'examples/bench.js',
  'examples/fetch.js',
  'index.d.mts',
  'index.d.ts',
  'index.js',
  'index.mjs',
  'layouts.js',
  'package.json',
];

/** The environment without npm's (a test run by `npm test` must not steer the npm it runs). */
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

/** Runs a command (bounded); returns its stdout, or fails the test with its output. */
function run(cmd, args, { cwd, env = cleanEnv(), timeout = 120000 } = {}) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout, maxBuffer: 16 << 20 });
  const what = `${path.basename(cmd)} ${args.join(' ')} (in ${cwd})`;
  if (r.error) throw new Error(`${what}: ${r.error.message}`);
  assert.equal(r.status, 0, `${what} exited with ${r.status} ${r.signal || ''}\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** npm: the one running `npm test` when there is one, else npm from PATH. */
function npm(args, opts) {
  const cli = process.env.npm_execpath;
  if (cli && /npm-cli\.c?js$/.test(cli)) return run(process.execPath, [cli, ...args], opts);
  return run('npm', args, opts);
}

function tscPath() {
  try {
    return require.resolve('typescript/bin/tsc', { paths: [ROOT] });
  } catch {
    throw new Error(`TypeScript is not installed: run \`npm ci\` in ${ROOT} (it installs the pinned devDependencies)`);
  }
}

/** The fenced ```js blocks of README.md, in order. */
function readmeJsBlocks() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

test('npm pack, installed into an empty project: require, import, README, TypeScript', { timeout: 240000 }, async (t) => {
  const tsc = tscPath();
  const started = Date.now();
  const server = await startServer('lable64');
  const dir = tempDir();
  const issued = new Set();
  /** `line` is an ID this server issued now: lable64's text form, decoded by idcar, of this test's time. */
  const assertIssued = (line) => {
    assert.match(line, /^[0-9a-f]{16}$/, `not a lable64 ID: ${JSON.stringify(line)}`);
    const fields = cliDecode('lable64', 'hex', line); // exits 0 only for a valid ID
    assert.equal(fields.id, line);
    assert.ok(fields.timestamp_ms >= started - 1000 && fields.timestamp_ms <= Date.now() + 1000,
      `${line} was issued at ${fields.time}, not during this test`);
    assert.ok(!issued.has(line), `${line} handed out twice`);
    issued.add(line);
  };
  const proj = path.join(dir, 'project');
  /** Runs `node file args` in the project, IDCAR_SOCKET set to the server. */
  const node = (file, args = []) => run(process.execPath, [file, ...args],
    { cwd: proj, env: cleanEnv({ IDCAR_SOCKET: server.socket }), timeout: 30000 });
  try {
    const packDir = path.join(dir, 'pack');
    const cache = path.join(dir, 'npm-cache');
    fs.mkdirSync(packDir);
    fs.mkdirSync(proj);

    await t.test('npm pack --dry-run lists only what a user needs', () => {
      const [dry] = JSON.parse(npm(['pack', '--dry-run', '--json', '--cache', cache], { cwd: ROOT }));
      assert.equal(dry.name, 'idcar-client');
      assert.deepEqual(dry.files.map((f) => f.path).sort(), PACKED);
    });

    let tarball;
    await t.test('npm pack makes a tarball of exactly those files', () => {
      const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', packDir, '--cache', cache], { cwd: ROOT }));
      tarball = path.join(packDir, packed.filename);
      assert.ok(fs.existsSync(tarball), tarball);
      const listed = run('tar', ['-tzf', tarball], { cwd: packDir }).split('\n').filter(Boolean).sort();
      assert.deepEqual(listed, PACKED.map((f) => `package/${f}`));
    });

    await t.test('npm install <tarball> into an empty project (offline: no dependencies)', () => {
      fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
      npm(['install', '--offline', '--no-audit', '--no-fund', '--cache', cache, tarball], { cwd: proj });
      const installed = path.join(proj, 'node_modules', 'idcar-client');
      assert.ok(!fs.lstatSync(installed).isSymbolicLink(), 'a copy, not a link to the source tree');
      assert.deepEqual(fs.readdirSync(installed).sort(), ['README.md', 'examples', 'index.d.mts', 'index.d.ts',
        'index.js', 'index.mjs', 'layouts.js', 'package.json']);
      const pkg = JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8'));
      assert.equal(pkg.version, require('../package.json').version);
      assert.deepEqual(Object.keys(pkg.dependencies || {}), [], 'no run-time dependencies');
    });

    await t.test('require() from a CommonJS file gets an ID', () => {
      fs.copyFileSync(path.join(FIXTURES, 'consumer.cjs'), path.join(proj, 'consumer.cjs'));
      assertIssued(node('consumer.cjs').split('\n')[0]);
    });

    await t.test('import from an ES module gets an ID (every name, the same objects as require)', () => {
      fs.copyFileSync(path.join(FIXTURES, 'consumer.mjs'), path.join(proj, 'consumer.mjs'));
      assertIssued(node('consumer.mjs').split('\n')[0]);
    });

    await t.test("README's examples print an ID on their first line (ES module, then CommonJS)", () => {
      const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
      // the contract: title, a sentence or two, then at once the install line in a sh block
      assert.match(readme, /^# .+\n\n[^#`]+\n\n```sh\n[^`]*npm install [^`]*\n```\n/);
      const blocks = readmeJsBlocks();
      assert.ok(blocks.length >= 1, 'README.md has a ```js block');
      assert.doesNotMatch(blocks[0], /\brequire\(/, 'the first example is the ES module one');
      const cjs = blocks.find((b) => /\brequire\('idcar-client'\)/.test(b));
      assert.ok(cjs, 'README.md also shows the CommonJS form');
      fs.writeFileSync(path.join(proj, 'example.mjs'), blocks[0]);
      fs.writeFileSync(path.join(proj, 'example.cjs'), cjs);
      assertIssued(node('example.mjs').split('\n')[0]);
      assertIssued(node('example.cjs').split('\n')[0]);
    });

    await t.test('the installed fetch example prints IDs', () => {
      const lines = node(path.join('node_modules', 'idcar-client', 'examples', 'fetch.js'), ['--count', '3']).trimEnd().split('\n');
      assert.equal(lines.length, 3);
      lines.forEach(assertIssued);
    });

    // TypeScript: a consumer with @types/node (as any TypeScript project on Node has).
    const typesDir = path.join(proj, 'node_modules', '@types');
    fs.mkdirSync(typesDir, { recursive: true });
    fs.symlinkSync(path.join(ROOT, 'node_modules', '@types', 'node'), path.join(typesDir, 'node'), 'dir');
    const body = fs.readFileSync(path.join(FIXTURES, 'api-usage.ts.in'), 'utf8');
    const esmHeader = [
      "import * as idcar from 'idcar-client';",
      "import idcarDefault, { Client, decode, type IdValue } from 'idcar-client';",
      'export const viaDefault: typeof idcar.Client = idcarDefault.Client;',
      'export const named: [typeof idcar.Client, typeof idcar.decode] = [Client, decode];',
      'export type Named = IdValue;',
      '',
    ].join('\n');
    const cjsHeader = [
      "import idcar = require('idcar-client');",
      "import { Client, decode, type IdValue } from 'idcar-client';",
      'export const named: [typeof idcar.Client, typeof idcar.decode] = [Client, decode];',
      'export type Named = IdValue;',
      '',
    ].join('\n');
    fs.writeFileSync(path.join(proj, 'check-esm.mts'), esmHeader + body);
    fs.writeFileSync(path.join(proj, 'check-bundler.ts'), esmHeader + body);
    fs.writeFileSync(path.join(proj, 'check-cjs.cts'), cjsHeader + body);
    const configs = {
      node16: { compilerOptions: { module: 'node16', moduleResolution: 'node16' }, files: ['check-esm.mts', 'check-cjs.cts'] },
      nodenext: { compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext' }, files: ['check-esm.mts', 'check-cjs.cts'] },
      bundler: { compilerOptions: { module: 'preserve', moduleResolution: 'bundler', target: 'es2022' }, files: ['check-bundler.ts', 'check-cjs.cts'] },
    };
    const installedTypes = ['index.d.ts', 'index.d.mts'].map((f) => fs.realpathSync(path.join(proj, 'node_modules', 'idcar-client', f)));
    for (const [name, config] of Object.entries(configs)) {
      await t.test(`tsc --noEmit --strict, moduleResolution ${name}: CommonJS and ES consumers`, () => {
        fs.writeFileSync(path.join(proj, `tsconfig.${name}.json`), JSON.stringify(config, null, 2));
        // --skipLibCheck: not @types/node and TypeScript's lib three times over (most of the
        // time); the consumers are checked against our declarations all the same, and the
        // declarations themselves are checked in full below.
        const out = run(process.execPath, [tsc, '-p', `tsconfig.${name}.json`, '--noEmit', '--strict', '--skipLibCheck', '--listFiles'], { cwd: proj });
        const files = out.split('\n').map((f) => f.trim()).filter(Boolean).map((f) => fs.realpathSync(f));
        for (const f of installedTypes) assert.ok(files.includes(f), `tsc read the installed ${f}:\n${out}`);
      });
    }

    await t.test('index.d.ts and index.d.mts: no errors, and exactly the names the module exports at run time', () => {
      const ts = require(require.resolve('typescript', { paths: [ROOT] }));
      const installed = path.join(proj, 'node_modules', 'idcar-client');
      const runtime = require(installed);
      const program = ts.createProgram([path.join(proj, 'check-esm.mts')], {
        module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16, strict: true, noEmit: true,
        skipLibCheck: false,
      });
      const ours = ['index.d.ts', 'index.d.mts'].map((f) => program.getSourceFile(fs.realpathSync(path.join(installed, f))));
      const diagnostics = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics(),
        ...ours.flatMap((sf) => [...program.getSyntacticDiagnostics(sf), ...program.getSemanticDiagnostics(sf)])];
      assert.equal(ts.formatDiagnostics(diagnostics, {
        getCanonicalFileName: (f) => f, getCurrentDirectory: () => proj, getNewLine: () => '\n',
      }), '');
      const checker = program.getTypeChecker();
      const moduleOf = (file) => checker.getSymbolAtLocation(ours[file === 'index.d.ts' ? 0 : 1]);
      const cjsExports = checker.getExportsOfModule(moduleOf('index.d.ts'));
      const esmExports = checker.getExportsOfModule(moduleOf('index.d.mts'));
      const values = (syms) => syms.filter((s) => (s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s).flags & ts.SymbolFlags.Value)
        .map((s) => s.name).sort();
      assert.deepEqual(values(cjsExports), Object.keys(runtime).sort(), 'index.d.ts vs index.js');
      assert.deepEqual(values(esmExports), [...Object.keys(runtime), 'default'].sort(), 'index.d.mts vs index.mjs');

      // the layouts: the Layout type against WIDTHS
      const layoutType = checker.getDeclaredTypeOfSymbol(cjsExports.find((s) => s.name === 'Layout'));
      assert.deepEqual(layoutType.types.map((u) => u.value).sort(), Object.keys(runtime.WIDTHS).sort());

      // every class: its declared public members against an instance's (own, inherited, accessors, symbols)
      const ERROR_MEMBERS = new Set(['name', 'message', 'stack', 'cause']);
      const declaredMembers = (sym) => checker.getPropertiesOfType(checker.getDeclaredTypeOfSymbol(sym))
        .map((p) => p.name.replace(/^__@(\w+)@\d+$/, 'Symbol.$1')).filter((n) => !ERROR_MEMBERS.has(n)).sort();
      const runtimeMembers = (obj) => {
        const names = new Set();
        for (let o = obj; o && o !== Object.prototype && o !== Error.prototype; o = Object.getPrototypeOf(o)) {
          for (const k of Object.getOwnPropertyNames(o)) names.add(k);
          for (const s of Object.getOwnPropertySymbols(o)) {
            const known = Object.getOwnPropertyNames(Symbol).find((k) => Symbol[k] === s); // Symbol.dispose, ...
            names.add(known ? `Symbol.${known}` : String(s));
          }
        }
        return [...names].filter((n) => n !== 'constructor' && !n.startsWith('_') && !ERROR_MEMBERS.has(n)).sort();
      };
      const ARGS = {
        Client: [{ socket: path.join(dir, 'none.sock') }], Id: ['lable64', 1n], ConnectError: ['/s', 'ENOENT', 'detail', false],
      };
      const classes = cjsExports.filter((s) => s.flags & ts.SymbolFlags.Class);
      assert.deepEqual(classes.map((s) => s.name).sort(), Object.keys(runtime).filter((k) => /^[A-Z][a-z]/.test(k)).sort());
      for (const sym of classes) {
        const instance = new runtime[sym.name](...(ARGS[sym.name] || ['x']));
        assert.deepEqual(declaredMembers(sym), runtimeMembers(instance), `members of ${sym.name}`);
        if (sym.name === 'Client') instance.close();
      }
    });
  } finally {
    await server.destroy();
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
