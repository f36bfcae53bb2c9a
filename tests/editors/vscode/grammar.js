// Runs vscode-tmgrammar-test (from editors/vscode/node_modules) over the
// syntax test files given, or over every .tlm file next to this script.
//   node grammar.js [FILE...]
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { ext } = require('./textmate');

const tool = path.join(ext, 'node_modules/vscode-tmgrammar-test/dist/unit.js');
if (!fs.existsSync(tool)) {
  console.error(`${tool} is missing: run scripts/setup.sh, or: cd editors/vscode && npm ci`);
  process.exit(1);
}
let files = process.argv.slice(2);
if (!files.length) {
  files = fs.readdirSync(__dirname).filter((f) => f.endsWith('.tlm')).map((f) => path.join(__dirname, f));
}
const r = spawnSync(process.execPath,
  [tool, '--grammar', path.join(ext, 'syntaxes/tlm.tmLanguage.json'), ...files], { stdio: 'inherit' });
process.exit(r.status === null ? 1 : r.status);
