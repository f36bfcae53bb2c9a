// Checks that editors/vscode covers every name of `tlmc --print-keywords`
// (the file given as argument): each name, in a snippet of code where it
// occurs, must be one token with its class's scope. Also checks that the
// choices offered by the snippets are names tlmc knows.
//   node keywords.js KEYWORDS_FILE
'use strict';
const fs = require('fs');
const path = require('path');
const { ext, loadGrammar } = require('./textmate');

// Each class is checked in a snippet: [lines, line, column] of NAME.
const snippets = {
  keyword: [['NAME x'], 0, 0],
  setting: [['model m {', '    NAME = 1;', '}'], 1, 4],
  train_setting: [['train {', '    NAME = 1;', '}'], 1, 4],
  study_setting: [['study s {', '    NAME = 1;', '}'], 1, 4],
  value: [['model m {', '    d_ff = NAME;', '}'], 1, 11],
  call: [['model m {', '    d_ff = NAME(1);', '}'], 1, 11],
};
const scopes = {
  keyword: /^(?:keyword\.(?:control|other)|storage\.type)(?:\.[\w-]+)*\.tlm$/,
  setting: /^support\.type\.property-name\.setting\.tlm$/,
  train_setting: /^support\.type\.property-name\.train\.tlm$/,
  study_setting: /^support\.type\.property-name\.study\.tlm$/,
  mixer: /^support\.constant\.mixer\.tlm$/,
  mlp: /^support\.constant\.mlp\.tlm$/,
  value: /^constant\.language(?:\.[\w-]+)*\.tlm$/,
  function: /^support\.function\.constructor\.tlm$/,
  builtin: /^support\.function\.builtin\.tlm$/,
  constant: /^support\.constant\.math\.tlm$/,
  variable: /^variable\.language\.layer\.tlm$/,
  schedule: /^support\.function\.schedule\.tlm$/,
};
const kinds = {
  keyword: ['keyword'], setting: ['setting'], train_setting: ['train_setting'], study_setting: ['study_setting'],
  schedule: ['value', 'call'], function: ['call'], builtin: ['call'],
};
// Where expression lists overlap, the first class here wins (cosine is a
// schedule before it is a function, sigmoid before it is a builtin).
const precedence = ['schedule', 'builtin', 'function', 'constant', 'value', 'mixer', 'mlp', 'variable'];

async function main() {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node keywords.js KEYWORDS_FILE');
  const classes = new Map();
  const failures = [];
  for (const line of fs.readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const m = /^([A-Za-z_]\w*) ([A-Za-z_]\w*)$/.exec(line);
    if (!m) { failures.push(`${file}: bad line: ${line}`); continue; }
    if (!classes.has(m[1])) classes.set(m[1], []);
    classes.get(m[1]).push(m[2]);
  }

  const grammar = await loadGrammar();
  for (const [cls, names] of classes) {
    if (!scopes[cls]) {
      failures.push(`class ${cls} is new: teach editors/vscode/syntaxes/tlm.tmLanguage.json and tests/editors/vscode/keywords.js about it`);
      continue;
    }
    for (const name of names) {
      const want = precedence.includes(cls)
        ? precedence.find((c) => (classes.get(c) || []).includes(name)) : cls;
      for (const kind of kinds[cls] || ['value']) {
        const [lines, ln, col] = snippets[kind];
        const text = lines.map((l) => l.replace('NAME', name));
        const tok = grammar.lines(text)[ln].find((t) => t.start <= col && col < t.end);
        const inner = tok.scopes[tok.scopes.length - 1];
        if (tok.text !== name || !scopes[want].test(inner)) {
          failures.push(`${cls} ${name}: the grammar gives \`${tok.text}\` ${inner} in \`${text[ln]}\`, want ${scopes[want]}`);
        }
      }
    }
  }

  // Snippet choices (${1|a,b|}) must be names tlmc knows.
  const known = new Set([...classes.values()].flat());
  const snippetFile = path.join(ext, 'snippets/tlm.json');
  for (const [title, s] of Object.entries(JSON.parse(fs.readFileSync(snippetFile, 'utf8')))) {
    for (const m of [].concat(s.body).join('\n').matchAll(/\$\{\d+\|([^|]*)\|\}/g)) {
      for (const choice of m[1].split(',')) {
        if (!known.has(choice)) failures.push(`${snippetFile}: snippet "${title}" offers ${choice}, which tlmc does not know`);
      }
    }
  }

  if (failures.length) {
    console.error(failures.join('\n') + `\nvscode keywords: ${failures.length} failure(s)`);
    process.exit(1);
  }
  console.log(`vscode keywords: ok (${[...classes.values()].flat().length} names)`);
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
