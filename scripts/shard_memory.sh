#!/usr/bin/env bash
# Trains examples/tiny.tlm (batch 4 x 256) for a few steps on a generated
# 1 GiB token shard (512M ids of 2 bytes) and checks that the peak resident
# memory stays under a bound (default 300 MB) and within 16 MB of the same
# run on the bundled text (4 MB, read into memory): shards are memory-mapped
# and only the pages the windows touch are read. Prints both speeds. Outside ctest (generating and checking 1 GiB takes a
# while); ctest's run.shards_memory is the 64 MB version.
#
#   scripts/shard_memory.sh [BUILD_DIR] [WORK_DIR]     (BOUND_MB=300 STEPS=5)
set -eu
. "$(dirname "$0")/script_args.sh"
script_args "$0" -- "$@"
[ $# -le 2 ] || { echo "shard_memory.sh: takes at most BUILD_DIR and WORK_DIR (see shard_memory.sh --help)" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
work=${2:-$build/shard_memory}
for tool in compiler/tlmc runtime/tlm-run; do # before anything is made
  [ -x "$build/$tool" ] || { echo "shard_memory.sh: no $build/$tool (build first, or give BUILD_DIR)" >&2; exit 1; }
done
bound_mb=${BOUND_MB:-300}
steps=${STEPS:-5}
mkdir -p "$work"
"$build/compiler/tlmc" "$root/examples/tiny.tlm" -o "$work/tiny.so"
shard=$work/corpus-1g.bin
t0=$(date +%s.%N)
[ -f "$shard" ] || python3 "$root/scripts/gen_shard.py" "$shard" --tokens $((512 * 1024 * 1024)) --eot 0
t1=$(date +%s.%N)
echo "shard: $(stat -c %s "$shard") bytes (generated in $(echo "$t1 - $t0" | bc) s)"
flags=(--threads 2 --batch 4 --steps "$steps" --eval-every 0 --log-every 1 --overwrite)
/usr/bin/time -f "maxrss_kb %M wall_s %e" -o "$work/shard.time" \
  "$build/runtime/tlm-run" train "$work/tiny.so" "${flags[@]}" --data "$shard" --ckpt "$work/ckpt-shard" \
  --log "$work/shard.jsonl" > "$work/shard.out"
/usr/bin/time -f "maxrss_kb %M wall_s %e" -o "$work/text.time" \
  "$build/runtime/tlm-run" train "$work/tiny.so" "${flags[@]}" --ckpt "$work/ckpt-text" \
  --log "$work/text.jsonl" > "$work/text.out"
speed() { python3 -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '\"tokens_per_s\"' in l][1:]   # step 1 warms up
print('%.0f' % (sum(x['tokens_per_s'] for x in r) / len(r)))" "$1"; }
read -r _ rss _ wall < "$work/shard.time"
read -r _ trss _ twall < "$work/text.time"
echo "1 GiB shard: peak RSS $((rss / 1024)) MB, $wall s in all, $(speed "$work/shard.jsonl") tokens/s (steps 2..$steps)"
echo "bundled text (Austen, 4 MB in memory): peak RSS $((trss / 1024)) MB, $twall s, $(speed "$work/text.jsonl") tokens/s"
if [ $((rss / 1024)) -ge "$bound_mb" ]; then
  echo "FAIL: peak RSS $((rss / 1024)) MB is not under $bound_mb MB"; exit 1
fi
if [ $((rss - trss)) -ge 16384 ]; then
  echo "FAIL: peak RSS $((rss / 1024)) MB on the shard, $((trss / 1024)) MB on text: more than 16 MB apart"; exit 1
fi
echo "ok: under $bound_mb MB, and within 16 MB of the run on text"
