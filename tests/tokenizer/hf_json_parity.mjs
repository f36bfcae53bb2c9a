// tokenizer.json parity: tlm-run tokenizer encode, reading a Hugging Face
// tokenizer.json itself, must give exactly the ids of @huggingface/tokenizers
// (tokenizers.js, pinned in package-lock.json), which reads the same file
// offline; and tokenizers.js must decode tlm's ids back to the text.
//
//   node hf_json_parity.mjs TLM_RUN WORKDIR TOKENIZER.json... -- CORPUS...
//
// Each tokenizer.json is checked on the hostile set (hostile_cases.mjs) and
// on each corpus (its first MAX_CORPUS bytes, cut at a line end). Special
// tokens stay plain text in both (tlm's default; tokenizers.js is given
// no added tokens to split on) and no BOS is added. Any difference fails,
// and so does a missing package.
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { Tokenizer } from '@huggingface/tokenizers';
import { hostile } from './hostile_cases.mjs';

const MAX_CORPUS = 600000;
const args = process.argv.slice(2);
const sep = args.indexOf('--');
const [tlm, work, ...tokFiles] = sep < 0 ? args : args.slice(0, sep);
const corpora = sep < 0 ? [] : args.slice(sep + 1);
if (!tlm || !work || tokFiles.length === 0) {
  console.error('usage: node hf_json_parity.mjs TLM_RUN WORKDIR TOKENIZER.json... -- CORPUS...');
  process.exit(2);
}
fs.mkdirSync(work, { recursive: true });
let failures = 0;
const fail = msg => {
  console.log(`FAIL ${msg}`);
  failures++;
};

// The cases: the hostile texts and the corpora's heads, as files for tlm.
const cases = Object.entries(hostile).map(([name, text]) => ({ name, text }));
for (const c of corpora) {
  let text = fs.readFileSync(c, 'utf8');
  if (text.length > MAX_CORPUS) text = text.slice(0, text.lastIndexOf('\n', MAX_CORPUS) + 1);
  cases.push({ name: path.basename(c), text });
}
const files = cases.map((c, i) => {
  const f = path.join(work, `case-${i}.txt`);
  fs.writeFileSync(f, c.text);
  return f;
});

for (const tokFile of tokFiles) {
  const json = JSON.parse(fs.readFileSync(tokFile, 'utf8'));
  // Special tokens are plain text in tlm's default mode: the reference
  // must not split them out either.
  const plain = { ...json, added_tokens: [] };
  const ref = new Tokenizer(plain, {});
  const r = spawnSync(tlm, ['tokenizer', 'encode', '--tokenizer', tokFile, ...files], { maxBuffer: 1 << 30 });
  if (r.status !== 0) {
    fail(`${tokFile}: tlm-run tokenizer encode: exit ${r.status}: ${r.stderr}`);
    continue;
  }
  const lines = r.stdout.toString('latin1').split('\n');
  let ok = 0;
  cases.forEach((c, i) => {
    const got = lines[i] ? lines[i].split(' ').map(Number) : [];
    const want = ref.encode(c.text, { add_special_tokens: false }).ids;
    if (got.length !== want.length || got.some((v, k) => v !== want[k])) {
      let k = 0;
      while (k < got.length && got[k] === want[k]) k++;
      fail(`${path.basename(tokFile)} ${c.name}: ids differ at ${k}: tlm ${got.slice(k, k + 5)} tokenizers.js ${want.slice(k, k + 5)}`);
      return;
    }
    const back = got.length === 0 ? '' : ref.decode(got, { skip_special_tokens: false, clean_up_tokenization_spaces: false });
    if (back !== c.text) fail(`${path.basename(tokFile)} ${c.name}: tokenizers.js decodes tlm's ids to other text`);
    else ok++;
  });
  console.log(`${path.basename(tokFile)}: ${ok}/${cases.length} cases identical`);
}
if (failures) {
  console.log(`hf_json_parity: ${failures} failure(s)`);
  process.exit(1);
}
console.log('hf_json_parity: all identical');
