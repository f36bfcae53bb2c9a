#!/usr/bin/env bash
# Data-parallel training throughput on this machine (docs/scaling.md): the
# tokens/s of examples/tiny.tlm (batch 8 x 256 tokens, AdamW) trained by
#   one process, 1 thread | one process, 2 threads | mpirun -np 2, 1 thread each
# and, for the two ranks, the share of rank 0's step spent communicating
# (sending and broadcasting gradient buckets) and waiting on the other rank,
# and the share of its gradient buckets it passed on during the backward,
# before the last gradients were final (from --profile). Not a test: the
# numbers depend on what else runs.
#
# usage: bench/dist_bench.sh [BUILD_DIR] [STEPS]   (default the repository's build/, 30 steps; at least 6)
set -euo pipefail
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "dist_bench: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 2 ] || { echo "dist_bench: at most 2 arguments: [BUILD_DIR] [STEPS]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
steps=${2:-30}
# measure() times the steps after the first 5 (the warm-up): at least 6
[[ $steps =~ ^[0-9]+$ ]] && [ "$steps" -ge 6 ] || { echo "dist_bench: STEPS must be a whole number of at least 6" >&2; exit 2; }
py=${TLM_PYTHON:-/usr/bin/python3}
tlmc=$build/compiler/tlmc run=$build/runtime/tlm-run
for f in "$tlmc" "$run"; do
  [ -x "$f" ] || { echo "dist_bench: $f is missing; build first (cmake --build $build)" >&2; exit 1; }
done
command -v mpirun >/dev/null || { echo "dist_bench: no mpirun (apt-get install openmpi-bin)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TLM_STDLIB=$root/stdlib "$tlmc" "$root/examples/tiny.tlm" -o "$tmp/tiny.so"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
common=(train "$tmp/tiny.so" --batch 8 --steps "$steps" --log-every 1 --eval-every 0 --ckpt-every 0 --overwrite)

# tokens/s over the logged steps after the first 5 (the warm-up), from the
# log's elapsed seconds; with a profile record, its communication and wait.
measure() {
  "$py" - "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in recs if "loss" in r]
prof = next((r["profile"] for r in recs if "profile" in r), None)
a, b = steps[4], steps[-1]
tokens = (b["step"] - a["step"]) * 8 * 256
line = f"{tokens / (b['elapsed'] - a['elapsed']):10.0f}"
if prof and prof.get("ranks"):
    t = prof["step_seconds"]
    line += f"  {100 * prof['comm_seconds'] / t:12.1f}%  {100 * prof['wait_seconds'] / t:6.1f}%"
    if "buckets" in prof:  # a tlm-run before the chain started in the backward has none
        line += f"  {prof['early_buckets']:>8} of {prof['buckets']}"
print(line)
PY
}

printf '%-32s %10s  %13s  %7s  %s\n' "run (tiny, 8 x 256 tokens)" "tokens/s" "communication" "wait" \
  "buckets during the backward"
"$run" "${common[@]}" --threads 1 --ckpt "$tmp/a" --log "$tmp/a.jsonl" >/dev/null
printf '%-32s %s\n' "1 process, 1 thread" "$(measure "$tmp/a.jsonl")"
"$run" "${common[@]}" --threads 2 --ckpt "$tmp/b" --log "$tmp/b.jsonl" >/dev/null
printf '%-32s %s\n' "1 process, 2 threads" "$(measure "$tmp/b.jsonl")"
mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 \
  "$run" "${common[@]}" --threads 1 --ckpt "$tmp/c" --log "$tmp/c.jsonl" --profile >/dev/null
printf '%-32s %s\n' "2 ranks, 1 thread each" "$(measure "$tmp/c.jsonl")"
