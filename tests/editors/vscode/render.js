// Renders a .tlm file to a standalone HTML page with editors/vscode's
// grammar, coloured like VS Code's Dark+ theme; docs/editors-example.png is
// a screenshot of it (tests/editors/picture.sh).
//   node render.js FILE.tlm > page.html
'use strict';
const fs = require('fs');
const { loadGrammar } = require('./textmate');

// Scope prefix -> colour, the most specific (longest) prefix wins.
const theme = {
  'comment': '#6A9955',
  'string': '#CE9178',
  'constant.character.escape': '#D7BA7D',
  'constant.numeric': '#B5CEA8',
  'constant.language': '#569CD6',
  'storage.type': '#569CD6',
  'keyword.control': '#C586C0',
  'keyword.operator': '#D4D4D4',
  'entity.name.type': '#4EC9B0',
  'entity.other.inherited-class': '#4EC9B0',
  'entity.name.namespace': '#4EC9B0',
  'entity.name.function': '#DCDCAA',
  'support.function': '#DCDCAA',
  'support.constant': '#4FC1FF',
  'support.type.property-name': '#9CDCFE',
  'entity.name.variable': '#9CDCFE',
  'variable': '#9CDCFE',
  'variable.language': '#569CD6',
};

function colour(scopes) {
  let best = '';
  for (const scope of scopes) {
    for (const prefix of Object.keys(theme)) {
      if ((scope === prefix || scope.startsWith(prefix + '.')) && prefix.length >= best.length) best = prefix;
    }
  }
  return best && theme[best];
}

const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

(async () => {
  const file = process.argv[2];
  const grammar = await loadGrammar();
  const lines = fs.readFileSync(file, 'utf8').replace(/\n$/, '').split('\n');
  const body = grammar.lines(lines).map((tokens) => tokens.map((t) => {
    const c = colour(t.scopes);
    return c ? `<span style="color:${c}">${esc(t.text)}</span>` : esc(t.text);
  }).join('')).join('\n');
  process.stdout.write(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>${esc(file)}</title>
<style>
body { margin: 0; background: #1e1e1e; }
pre { margin: 0; padding: 16px 20px; color: #d4d4d4; background: #1e1e1e;
      font: 14px/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; display: inline-block; }
</style></head>
<body><pre>${body}</pre></body></html>
`);
})().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
