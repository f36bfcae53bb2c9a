#!/usr/bin/env bash
# Tapered against uniform for each architecture (not a test): compiles the
# tiny example of each and its uniform twin, trains each STEPS steps on the
# bundled Austen with the same seed and data, and prints training tokens/s
# and the final validation loss on Persuasion.
#   bench/arch_compare.sh [BUILD_DIR] [STEPS] [JOBS]
set -eu
build=${1:-build}; steps=${2:-150}; jobs=${3:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
models=()
for arch in "" _gated _titans _hope; do
  for twin in "" _uniform; do
    name=tiny$arch$twin
    "$build/compiler/tlmc" "$root/examples/tiny$arch.tlm" --model "$name" -o "$out/$name.so"
    models+=("$name")
  done
done
train() {
  "$build/runtime/tlm-run" train "$out/$1.so" --steps "$steps" --warmup 20 --eval-every "$steps" \
    --eval-batches 40 --log-every 10 --threads 1 --seed 1 --ckpt "$out/$1.ckpt" --log "$out/$1.jsonl" \
    > "$out/$1.out" 2>&1
}
running=0
for m in "${models[@]}"; do
  train "$m" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
done
wait
printf '%-22s %10s %12s %10s\n' model params tokens/s "val loss"
for m in "${models[@]}"; do
  /usr/bin/python3 - "$out/$m.jsonl" "$m" "$("$build/compiler/tlmc" "$root/examples/${m%_uniform}.tlm" --model "$m" \
      | sed -n 's/.*, \([0-9,]*\) params.*/\1/p')" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r]
val = [r["val_loss"] for r in rows if "val_loss" in r]
print("%-22s %10s %12.0f %10.4f" % (sys.argv[2], sys.argv[3], sorted(tps)[len(tps) // 2], val[-1]))
PY
done
