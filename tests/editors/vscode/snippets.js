// Checks that every snippet of editors/vscode expands to code tlmc accepts:
// each snippet, with its defaults and then with each option of each choice
// (mixer = titans, mlp = gelu, ...), after a fixed preamble, must pass
// `tlmc --check` with no diagnostic at all.
//   node snippets.js TLMC
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { spawnSync } = require('child_process');
const { ext } = require('./textmate');
const { expand, choices } = require('./snippet');

// What a snippet may rely on: the standard schedules (the model snippet's
// d_ff calls cosine) and a model to inherit from (modelfrom's `parent`).
const preamble = [
  'use std.schedules;',
  'model parent { vocab = 256; context = 64; d_model = 64; layers = 2; heads = 2; d_ff = 128; }',
  '',
].join('\n');

const tlmc = process.argv[2];
if (!tlmc) {
  console.error('usage: node snippets.js TLMC');
  process.exit(2);
}
const file = path.join(ext, 'snippets/tlm.json');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tlm-snippets-'));
const failures = [];
let checked = 0;
try {
  for (const [title, s] of Object.entries(JSON.parse(fs.readFileSync(file, 'utf8')))) {
    const variants = [{}];
    for (const [n, options] of choices(s.body)) for (const o of options.slice(1)) variants.push({ [n]: o });
    for (const choose of variants) {
      const src = path.join(dir, 'snippet.tlm');
      const text = preamble + expand(s.body, choose) + '\n';
      fs.writeFileSync(src, text);
      const r = spawnSync(tlmc, ['--check', '--color=never', src], { encoding: 'utf8' });
      const out = (r.stdout || '') + (r.stderr || '') + (r.error ? String(r.error) : '');
      if (r.status !== 0 || out.trim()) {
        failures.push(`${file}: snippet "${title}" ${JSON.stringify(choose)} expands to code tlmc --check refuses ` +
          `(status ${r.status}):\n${text}${out}`);
      }
      checked++;
    }
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
if (failures.length) {
  console.error(failures.join('\n') + `\nvscode snippets: ${failures.length} failure(s)`);
  process.exit(1);
}
console.log(`vscode snippets: ok (${checked} expansions)`);
