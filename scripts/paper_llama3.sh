#!/usr/bin/env bash
# A paper preset trained with the Llama 3 vocabulary, end to end on the CPU:
# tokenize Austen with Llama 3's tokenizer.model into shards (128,256-token
# ids), compile examples/paper/transformer_440m.tlm (vocab 128,256, tied
# embeddings), train it for a few steps at a short context, evaluate bits per
# byte on Persuasion's shard and sample through the tokenizer. Not a ctest
# test: one step of the 440M model takes a minute or more on two cores and
# about 7.5 GB of memory. Prints the losses and the peak resident memory.
#
# usage: scripts/paper_llama3.sh [TOKENIZER.model] [BUILD_DIR]
#   TOKENIZER.model: Llama 3's (default: the copy ctest's tokenizer.extract
#   writes from llama3-tokenizer-js, BUILD_DIR/tests/tokenizer/ref/llama3).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build}
tok=${1:-$build/tests/tokenizer/ref/llama3/tokenizer.model}
tlm=$build/runtime/tlm-run tlmc=$build/compiler/tlmc
[ -x "$tlm" ] && [ -x "$tlmc" ] || { echo "paper_llama3: build first ($build)" >&2; exit 1; }
[ -f "$tok" ] || { echo "paper_llama3: $tok is missing (run ctest --test-dir $build -R tokenizer.extract)" >&2; exit 1; }
export TLM_STDLIB=$root/stdlib
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
steps=${STEPS:-3}

"$tlm" tokenize --tokenizer "$tok" "$root/data/austen/emma.txt" "$root/data/austen/pride_and_prejudice.txt" \
  -o "$tmp/train.bin"
"$tlm" tokenize --tokenizer "$tok" "$root/data/austen/persuasion.txt" -o "$tmp/val.bin"
"$tlmc" "$root/examples/paper/transformer_440m.tlm" --model transformer_440m -o "$tmp/t440.so"
"$tlm" info "$tmp/t440.so" | head -3
/usr/bin/time -f "peak resident memory: %M kB, wall %e s" \
  "$tlm" train "$tmp/t440.so" --data "$tmp/train.bin" --val "$tmp/val.bin" --context 128 --batch 2 \
  --steps "$steps" --warmup 0 --eval-every 0 --eval-batches 1 --log-every 1 --ckpt "$tmp/c" --log "$tmp/log.jsonl"
/usr/bin/python3 - "$tmp/log.jsonl" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
loss = [r["loss"] for r in rows if "loss" in r and "val_loss" not in r]
val = [r["val_loss"] for r in rows if "val_loss" in r]
print(f"ln(128256) = {math.log(128256):.4f}; training loss {loss[0]:.4f} -> {loss[-1]:.4f}; "
      f"validation loss {val[0]:.4f} -> {val[-1]:.4f}")
assert val[-1] < val[0], "the validation loss did not fall"
PY
"$tlm" eval "$tmp/t440.so" --ckpt "$tmp/c" --data "$tmp/val.bin" --context 128 --batch 2 --max-tokens 1024
"$tlm" sample "$tmp/t440.so" --ckpt "$tmp/c" --tokenizer "$tok" --prompt "It was" --length 8 --temperature 0
