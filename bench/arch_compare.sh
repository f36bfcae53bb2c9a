#!/usr/bin/env bash
# Tapered against uniform for each architecture (not a test): compiles the
# tiny example of each and its uniform twin, trains each STEPS steps on the
# bundled Austen with the same seed and data, and prints training tokens/s
# and the final validation loss on Persuasion.
#   bench/arch_compare.sh [BUILD_DIR] [STEPS] [JOBS]   (default the repository's build/, 150 steps, 2 trainings at a time)
set -eu
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "arch_compare: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 3 ] || { echo "arch_compare: at most 3 arguments: [BUILD_DIR] [STEPS] [JOBS]" >&2; exit 2; }
build=${1:-$(cd "$(dirname "$0")/.." && pwd)/build}; steps=${2:-150}; jobs=${3:-2}
# a JOBS of abc once made every test `-ge` fail, so all 8 trainings ran at once
for n in "$steps" "$jobs"; do
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || { echo "arch_compare: STEPS and JOBS must be whole numbers of at least 1" >&2; exit 2; }
done
for f in "$build/compiler/tlmc" "$build/runtime/tlm-run"; do
  [ -x "$f" ] || { echo "arch_compare: $f is missing; build first (cmake --build $build)" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
# The trainings run in the background (train execs tlm-run, so jobs -p
# names them): stop them with the script and let them finish their
# checkpoints before the folder goes (timeout's SIGTERM left them running,
# then writing into the removed folder).
out=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$out"' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM
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
  exec "$build/runtime/tlm-run" train "$out/$1.so" --steps "$steps" --warmup 20 --eval-every "$steps" \
    --eval-batches 40 --log-every 10 --threads 1 --seed 1 --ckpt "$out/$1.ckpt" --log "$out/$1.jsonl" \
    > "$out/$1.out" 2>&1
}
running=0
for m in "${models[@]}"; do
  train "$m" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait
# A failed training has no validation loss: say why (its output is in the
# temporary folder) rather than end the table in a traceback. `wait -n ||
# true` above lets the others finish first.
failed=0
for m in "${models[@]}"; do
  grep -qs '"val_loss"' "$out/$m.jsonl" ||
    { echo "arch_compare: training $m failed:" >&2; tail -3 "$out/$m.out" >&2; failed=1; }
done
[ "$failed" = 0 ] || exit 1
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
