// Checks editors/vscode's extension manifest, language configuration and
// snippets: files exist and agree, regular expressions compile and do what
// they are for, dev dependencies are pinned, and every snippet expands to
// code that is indented by the project's rule and starts a declaration.
'use strict';
const fs = require('fs');
const path = require('path');
const { ext, loadGrammar } = require('./textmate');
const { expand } = require('./snippet');

const failures = [];
const check = (ok, msg) => { if (!ok) failures.push(msg); };
const json = (rel) => JSON.parse(fs.readFileSync(path.join(ext, rel), 'utf8'));

function manifest() {
  const pkg = json('package.json');
  const c = pkg.contributes || {};
  const lang = (c.languages || []).find((l) => l.id === 'tlm');
  check(lang && lang.extensions.includes('.tlm'), 'package.json: no language tlm for .tlm');
  const grammar = (c.grammars || []).find((g) => g.language === 'tlm');
  const snippets = (c.snippets || []).find((s) => s.language === 'tlm');
  for (const [what, rel] of [['configuration', lang && lang.configuration],
    ['grammar', grammar && grammar.path], ['snippets', snippets && snippets.path]]) {
    check(rel && fs.existsSync(path.join(ext, rel)), `package.json: ${what} file ${rel} missing`);
  }
  if (grammar) {
    check(json(grammar.path).scopeName === grammar.scopeName,
      `package.json: scopeName ${grammar.scopeName} differs from the grammar's`);
  }
  for (const [name, version] of Object.entries(pkg.devDependencies || {})) {
    check(/^\d+\.\d+\.\d+$/.test(version), `package.json: ${name}@${version} is not pinned to one version`);
  }
  check((pkg.devDependencies || {})['vscode-tmgrammar-test'], 'package.json: vscode-tmgrammar-test not in devDependencies');
  const lock = json('package-lock.json');
  for (const name of Object.keys(pkg.devDependencies || {})) {
    const entry = lock.packages[`node_modules/${name}`];
    check(entry && entry.version === pkg.devDependencies[name], `package-lock.json: ${name} not locked at ${pkg.devDependencies[name]}`);
  }
}

function configuration() {
  const conf = json('language-configuration.json');
  check(conf.comments.lineComment === '//', 'lineComment is not //');
  check(JSON.stringify(conf.comments.blockComment) === '["/*","*/"]', 'blockComment is not /* */');
  const pairs = (list) => list.map((p) => (Array.isArray(p) ? p.join('') : p.open + p.close));
  for (const [open, close] of conf.brackets) {
    check(pairs(conf.autoClosingPairs).includes(open + close), `autoClosingPairs lacks ${open}${close}`);
    check(pairs(conf.surroundingPairs).includes(open + close), `surroundingPairs lacks ${open}${close}`);
  }
  check(pairs(conf.autoClosingPairs).includes('""'), 'autoClosingPairs lacks ""');

  const re = (s) => new RegExp(s);
  const rules = conf.indentationRules;
  const cases = [
    ['increaseIndentPattern', true, ['model tiny {', 'model hope : tiny {   // comment',
      '    d_ff = cosine(', '    cms = [', '    optimizer = adamw(lr = 3e-3,', 'train { /* c */']],
    ['increaseIndentPattern', false, ['model tiny_uniform : tiny { d_ff = 688; }',
      '    d_ff = cosine(1, 2);', '    cms = [1, 4];', '// model tiny {', '}', '    );']],
    ['decreaseIndentPattern', true, ['}', '    );', '];', '    }  // end']],
    ['decreaseIndentPattern', false, ['    vocab = 256;', 'model m {', '// }']],
    ['indentNextLinePattern', true, ['schedule thirds(e, m, s) =', '    d_ff = 688 *',
      '    quantum =   // why', 'l < L / 3 ? e :', '    x = a &&']],
    ['indentNextLinePattern', false, ['    vocab = 256;', ' */', 'model m {', '// d_ff =',
      '    d_ff = 688 * f(x)']],
  ];
  for (const [rule, want, lines] of cases) {
    for (const line of lines) {
      check(re(rules[rule]).test(line) === want, `${rule} ${want ? 'misses' : 'matches'} \`${line}\``);
    }
  }
  for (const rule of conf.onEnterRules) {
    re(rule.beforeText);
    if (rule.afterText) re(rule.afterText);
  }
  check(re(conf.folding.markers.start).test('// region settings') &&
    re(conf.folding.markers.end).test('  // endregion'), 'folding markers');
  const word = new RegExp(conf.wordPattern, 'g');
  for (const w of ['d_model', '1_000', '3e-4', '2.5e+3', 'hope_attention']) {
    check((`x ${w} ;`.match(word) || []).includes(w), `wordPattern does not take \`${w}\` as one word`);
  }
}

async function snippets(grammar) {
  const file = 'snippets/tlm.json';
  for (const [title, s] of Object.entries(json(file))) {
    check(s.prefix && s.body && s.description, `${file}: "${title}" needs prefix, body and description`);
    const lines = expand(s.body).split('\n');
    check(!/\$/.test(lines.join('\n')), `${file}: "${title}" leaves a $ after expansion`);
    let depth = 0;
    lines.forEach((line, i) => {
      const closes = /^\s*[)\]}]/.test(line) ? 1 : 0;
      const want = ' '.repeat(4 * (depth - closes));
      if (line.trim()) check(line.startsWith(want) && line[want.length] !== ' ', `${file}: "${title}" line ${i + 1} is not indented ${want.length}: \`${line}\``);
      depth += (line.match(/[({[]/g) || []).length - (line.match(/[)\]}]/g) || []).length;
    });
    check(depth === 0, `${file}: "${title}" has unbalanced brackets`);
    const tokens = grammar.lines(lines);
    const first = tokens[0][0].scopes;
    check(first.some((sc) => /^storage\.type\.\w+\.tlm$/.test(sc)), `${file}: "${title}" does not start with a declaration keyword`);
    for (const t of tokens.flat()) {
      check(!t.scopes.some((sc) => sc.startsWith('invalid')), `${file}: "${title}" has invalid \`${t.text}\``);
    }
  }
}

async function main() {
  manifest();
  configuration();
  await snippets(await loadGrammar());
  if (failures.length) {
    console.error(failures.join('\n') + `\nvscode manifest: ${failures.length} failure(s)`);
    process.exit(1);
  }
  console.log('vscode manifest: ok');
}

main().catch((e) => { console.error(e.stack || String(e)); process.exit(1); });
