#!/usr/bin/env bash
# Training tokens/s of examples/tiny.tlm (or --model FILE.tlm, e.g.
# bench/large.tlm): tlm (compiled model, generated MLP kernels,
# tlm_trainer_step) beside PyTorch training the same model at its better
# setting (train_bench.py), at 1 and 2 threads, batch 8 x 256 tokens, AdamW,
# float32. Not a test.
#
# usage: bench/train_bench.sh [BUILD_DIR] [--model FILE.tlm] [--avx2] [train_bench.py options]
#   BUILD_DIR (a first argument not starting with -) defaults to the
#   repository's build/; it must have been built (tlmc and
#   tests/model/dump_model). Options, e.g. --threads 1,2 --steps 5 --repeat 2
#   (bench/large.tlm: add --seq 512).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
# -h / --help anywhere: this script's usage, then train_bench.py's options
for a in "$@"; do
  case $a in
    -h | --help)
      . "$root/scripts/script_args.sh"
      script_help "$0"
      echo
      echo "train_bench.py's options (after BUILD_DIR and --model):"
      exec "${TLM_PYTHON:-/usr/bin/python3}" "$root/bench/train_bench.py" --check-args --help ;;
  esac
done
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
model=$root/examples/tiny.tlm
# --model may come anywhere among the options; the rest go to train_bench.py.
# --avx2: the AVX2-only machine's code paths on an AVX-512 one, for both:
# tlm's kernels for x86-64-v3, OpenBLAS's Haswell kernels, PyTorch's AVX2
# kernels (ATEN_CPU_CAPABILITY); train_bench.py sets the variables.
cpu=()
rest=()
while [ $# -gt 0 ]; do
  case $1 in
    --model)
      [ $# -ge 2 ] || { echo "train_bench: --model needs a FILE.tlm" >&2; exit 2; }
      model=$2; shift 2; continue ;;
    --model=*) model=${1#--model=}; shift; continue ;;
    --avx2) cpu=(--cpu x86-64-v3) ;;
  esac
  rest+=("$1"); shift
done
set -- "${rest[@]}"
py=${TLM_PYTHON:-/usr/bin/python3}
tlmc=$build/compiler/tlmc
dump=$build/tests/model/dump_model
for f in "$tlmc" "$dump"; do
  [ -x "$f" ] || { echo "train_bench: $f is missing; build first (cmake --build $build)" >&2; exit 1; }
done
"$py" "$root/bench/train_bench.py" --check-args "$@" || exit # a bad option: before the model compiles
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TLM_STDLIB=$root/stdlib "$tlmc" "${cpu[@]}" "$model" -o "$tmp/model.so"
"$py" "$root/bench/train_bench.py" "$dump" "$tmp/model.so" "$@"
