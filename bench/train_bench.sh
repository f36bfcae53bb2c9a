#!/usr/bin/env bash
# Training tokens/s of examples/tiny.tlm: tlm (compiled model, generated MLP
# kernels, tlm_trainer_step) beside PyTorch training the same model, at 1
# and 2 threads, batch 8 x 256 tokens, AdamW, float32. Not a test.
#
# usage: bench/train_bench.sh [BUILD_DIR] [train_bench.py options]
#   BUILD_DIR defaults to ./build; it must have been built (tlmc and
#   tests/model/dump_model). Options, e.g. --threads 1,2 --steps 5 --repeat 2.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[ $# -gt 0 ] && shift
py=${TLM_PYTHON:-/usr/bin/python3}
tlmc=$build/compiler/tlmc
dump=$build/tests/model/dump_model
for f in "$tlmc" "$dump"; do
  [ -x "$f" ] || { echo "train_bench: $f is missing; build first (cmake --build $build)" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TLM_STDLIB=$root/stdlib "$tlmc" "$root/examples/tiny.tlm" -o "$tmp/tiny.so"
"$py" "$root/bench/train_bench.py" "$dump" "$tmp/tiny.so" "$@"
