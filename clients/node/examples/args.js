'use strict';
// Flag parsing shared by the examples: `--name value` or `--name=value`.

function parseArgs(argv, spec) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m || !(m[1] in spec)) throw new Error(`unknown argument ${JSON.stringify(a)} (flags: ${Object.keys(spec).map((k) => `--${k}`).join(', ')})`);
    let v = m[2];
    if (v === undefined) {
      if (i + 1 >= argv.length) throw new Error(`--${m[1]} needs a value`);
      v = argv[++i];
    }
    if (spec[m[1]] === 'number') {
      if (!/^\d+(\.\d+)?$/.test(v)) throw new Error(`--${m[1]} must be a number, got ${JSON.stringify(v)}`);
      v = Number(v);
    }
    out[m[1]] = v;
  }
  return out;
}

module.exports = { parseArgs };
