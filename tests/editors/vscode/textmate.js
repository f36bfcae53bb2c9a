// Loads editors/vscode's grammar with the npm packages installed next to it
// (editors/vscode/node_modules, by scripts/setup.sh), for the tests here.
'use strict';
const fs = require('fs');
const path = require('path');

const ext = path.resolve(__dirname, '../../../editors/vscode');
const mods = path.join(ext, 'node_modules');

function need(name) {
  try {
    return require(path.join(mods, name));
  } catch (e) {
    console.error(`${path.join(mods, name)} is missing (${e.code || e.message}): ` +
      'run scripts/setup.sh, or: cd editors/vscode && npm ci');
    process.exit(1);
  }
}

async function loadGrammar() {
  const tm = need('vscode-textmate');
  const onig = need('vscode-oniguruma');
  await onig.loadWASM(fs.readFileSync(path.join(mods, 'vscode-oniguruma/release/onig.wasm')).buffer);
  const file = path.join(ext, 'syntaxes/tlm.tmLanguage.json');
  const registry = new tm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (p) => new onig.OnigScanner(p),
      createOnigString: (s) => new onig.OnigString(s),
    }),
    loadGrammar: async (scope) =>
      scope === 'source.tlm' ? tm.parseRawGrammar(fs.readFileSync(file, 'utf8'), file) : null,
  });
  const grammar = await registry.loadGrammar('source.tlm');
  // Tokens of each line: [{text, start, end, scopes}].
  grammar.lines = (lines) => {
    let stack = tm.INITIAL;
    return lines.map((line) => {
      const r = grammar.tokenizeLine(line, stack);
      stack = r.ruleStack;
      return r.tokens.map((t) => ({
        text: line.slice(t.startIndex, t.endIndex), start: t.startIndex, end: t.endIndex, scopes: t.scopes,
      }));
    });
  };
  return grammar;
}

module.exports = { ext, loadGrammar };
