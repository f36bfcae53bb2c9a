#!/usr/bin/env bash
# The main job: set up and build, then compile the tiny tapered model, train
# it for a few minutes on five Jane Austen novels, evaluate it on the sixth
# (Persuasion, held out) and on the King James Bible (a different kind of
# text), and sample from it. Everything it writes goes to build/demo/.
#   STEPS=600 bash scripts/demo.sh     train longer (default 200 steps: 2-4 minutes on 2 cores)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" -- "$@"
[ $# = 0 ] || { echo "demo.sh: takes no arguments (STEPS=N sets the steps; see demo.sh --help)" >&2; exit 2; }
cd "$(dirname "$0")/.."
bash scripts/setup.sh
tlmc=build/compiler/tlmc
run=build/runtime/tlm-run
out=build/demo
steps=${STEPS:-200}
# Idle OpenMP threads sleep rather than spin: much faster on a shared
# machine, about the same on an idle one (docs/runtime.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$out"

echo
echo "== tlmc --report examples/tiny.tlm: the tapered model's MLP widths, then its uniform baseline (tiny_uniform)"
"$tlmc" --report examples/tiny.tlm
"$tlmc" examples/tiny.tlm -o "$out/tiny.so"
echo "(compiled the file's first model, tiny, into $out/tiny.so)"

echo
echo "== tlm-run train: $steps steps on data/austen (5 novels), validating on Persuasion"
start=$SECONDS
"$run" train "$out/tiny.so" --steps "$steps" --warmup 20 --eval-every 50 --eval-batches 10 --log-every 25 \
  --ckpt "$out/checkpoint" --log "$out/train.jsonl" --overwrite
echo "(training took $((SECONDS - start)) s; the log is $out/train.jsonl)"

echo
echo "== tlm-run eval: held-out Austen vs. the King James Bible (first 64 Ki bytes of each)"
"$run" eval "$out/tiny.so" --ckpt "$out/checkpoint" --data data/austen/persuasion.txt --data data/kjv/kjv.txt \
  --max-tokens 65536

echo
echo "== tlm-run sample"
"$run" sample "$out/tiny.so" --ckpt "$out/checkpoint" --prompt "It is a truth universally acknowledged" \
  --length 300 --temperature 0.8 --seed 1

echo
echo "== done: $out holds the model (tiny.so), its checkpoint (checkpoint/checkpoint.safetensors) and the training log (train.jsonl)"
