#!/usr/bin/env bash
# Tokenizers on the bundled corpora (data/austen, data/kjv: 8.2 MB). Not a
# test.
#   - training an 8,192-token byte-level BPE vocabulary (tlm-run tokenizer
#     train), best of 3;
#   - encoding throughput of the GPT-2 and Llama 3 vocabularies: tlm-run
#     tokenizer encode (the whole process: loading the vocabulary, encoding,
#     printing the ids; and loading alone) beside the npm reference encoders
#     of tests/tokenizer (js-tiktoken for GPT-2, llama3-tokenizer-js; timed
#     in-process, encoding only), in the same run, all on one thread;
#   - tlm-run tokenize into a shard on 1 .. nproc threads (the same shard).
#
# usage: bench/tokenizer_bench.sh [BUILD_DIR]
#   BUILD_DIR defaults to the repository's build/, built, with tests/tokenizer's npm packages
#   installed (scripts/setup.sh) and ctest -R tokenizer.extract run once (it
#   writes BUILD_DIR/tests/tokenizer/ref).
set -euo pipefail
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "tokenizer_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "tokenizer_bench: one argument at most: [BUILD_DIR]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
tlm=$build/runtime/tlm-run
ref=$build/tests/tokenizer/ref
[ -x "$tlm" ] || { echo "tokenizer_bench: $tlm is missing; build first" >&2; exit 1; }
# the npm encoders run after the training: without them the run failed halfway
[ -d "$root/tests/tokenizer/node_modules/js-tiktoken" ] && command -v node >/dev/null ||
  { echo "tokenizer_bench: node or tests/tokenizer's npm packages are missing; run scripts/setup.sh" >&2; exit 1; }
[ -f "$ref/llama3/tokenizer.model" ] ||
  { echo "tokenizer_bench: $ref is missing; run ctest --test-dir $build -R tokenizer.extract" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$root"/data/austen/*.txt "$root"/data/kjv/kjv.txt >"$tmp/all.txt"
mb=$(awk -v n="$(wc -c <"$tmp/all.txt")" 'BEGIN { printf "%.2f", n / 1e6 }')

secs() { # best wall seconds of 3 runs of the command
  best=
  for _ in 1 2 3; do
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    e=$(date +%s.%N)
    best=$(awk -v b="$best" -v d="$(awk -v s="$s" -v e="$e" 'BEGIN { print e - s }')" \
      'BEGIN { if (b == "" || d < b) print d; else print b }')
  done
  echo "$best"
}

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
  "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|avx512f|bmi2)$' | tr '\n' ' ')"
echo "data: data/austen + data/kjv, $mb MB"
t=$(secs "$tlm" tokenizer train --vocab 8192 "$root/data/austen" "$root/data/kjv" -o "$tmp/tok.json")
echo "train --vocab 8192: $t s"
for family in gpt2 llama3; do
  if [ $family = gpt2 ]; then tok=$ref/gpt2; else tok=$ref/llama3/tokenizer.model; fi
  whole=$(secs "$tlm" tokenizer encode --tokenizer "$tok" "$tmp/all.txt")
  load=$(secs "$tlm" tokenizer info --tokenizer "$tok")
  npm=$(node --input-type=module -e "
    import fs from 'node:fs';
    import { createRequire } from 'node:module';
    const require = createRequire('$root/tests/tokenizer/package.json');
    const text = fs.readFileSync('$tmp/all.txt', 'utf8');
    let encode;
    if ('$family' === 'gpt2') {
      const { Tiktoken } = require('js-tiktoken/lite');
      const ranks = require('js-tiktoken/ranks/gpt2');
      const enc = new Tiktoken(ranks.default ?? ranks);
      encode = t => enc.encode(t, [], []);
    } else {
      const { default: l } = await import('$root/tests/tokenizer/node_modules/llama3-tokenizer-js/bundle/llama3-tokenizer-with-baked-data.js');
      encode = t => l.encode(t, { bos: false, eos: false, specialTokenRegex: /(?!)/g });
    }
    const t0 = performance.now();
    encode(text);
    console.log(((performance.now() - t0) / 1000).toFixed(3));")
  awk -v f=$family -v mb="$mb" -v w="$whole" -v l="$load" -v n="$npm" 'BEGIN {
    printf "%-7s tlm-run %6.2f MB/s whole process (%.3f s, of which loading %.3f s; %.1f MB/s without it)  npm %5.2f MB/s  ratio %.1fx\n",
      f, mb / w, w, l, mb / (w - l), mb / n, (mb / w) / (mb / n) }'
done

# tokenize (shards) on 1 .. nproc threads: the same shard, faster with cores.
# Loading the vocabulary is on one thread and is measured apart.
for family in gpt2 llama3; do
  if [ $family = gpt2 ]; then tok=$ref/gpt2; else tok=$ref/llama3/tokenizer.model; fi
  load=$(secs "$tlm" tokenizer info --tokenizer "$tok")
  one=
  for threads in $(seq 1 "$(nproc)"); do
    w=$(secs "$tlm" tokenize --tokenizer "$tok" --threads "$threads" "$tmp/all.txt" -o "$tmp/all.bin")
    [ -n "$one" ] || one=$w
    awk -v f=$family -v t="$threads" -v mb="$mb" -v w="$w" -v l="$load" -v o="$one" 'BEGIN {
      printf "%-7s tokenize --threads %d: %.3f s (%.1f MB/s without loading, %.3f s); %.2fx one thread\n",
        f, t, w, mb / (w - l), l, (o - l) / (w - l) }'
  done
done
