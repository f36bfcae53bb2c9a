#!/usr/bin/env bash
# Compile-time benchmark (not a test): a 24-layer model whose 24 layers all
# have different widths, compiled with tlmc --time, best of N runs.
#   bench/compile_time.sh [TLMC] [RUNS]   (default the repository's build/compiler/tlmc, 5 runs)
set -eu
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "compile_time: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 2 ] || { echo "compile_time: at most 2 arguments: [TLMC] [RUNS]" >&2; exit 2; }
tlmc=${1:-$(cd "$(dirname "$0")/.." && pwd)/build/compiler/tlmc}; runs=${2:-5}
# RUNS of 0 or abc once ran no timing and printed "best:  ms"
case $runs in '' | *[!0-9]*) runs=0 ;; esac
[ "$runs" -ge 1 ] || { echo "compile_time: RUNS must be a whole number of at least 1" >&2; exit 2; }
[ -x "$tlmc" ] || { echo "compile_time: $tlmc is missing; build first (cmake --build build)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/wide24.tlm" <<'TLM'
use std.schedules;
model wide24 {
    vocab = 32000; context = 2048; d_model = 1024; layers = 24; heads = 16;
    d_ff = 2816 * cosine(1.5, 0.5);
    quantum = 8;
    budget = uniform(2816);
}
TLM
distinct=$("$tlmc" "$tmp/wide24.tlm" | sed -n 's/.*(\([0-9]*\) distinct).*/\1/p')
echo "model: 24 layers, d_model 1024, $distinct distinct widths (SwiGLU kernels: $((3 * distinct)) entry points)"
best=
for i in $(seq "$runs"); do
  start=$(date +%s%N)
  "$tlmc" "$tmp/wide24.tlm" -o "$tmp/wide24.so"
  end=$(date +%s%N)
  ms=$(( (end - start) / 1000000 ))
  echo "run $i: ${ms} ms"
  if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
done
echo "best: ${best} ms for the whole tlmc -o (parse, check, IR, LLVM, link)"
"$tlmc" --time "$tmp/wide24.tlm" -o "$tmp/wide24.so"
