#!/usr/bin/env bash
# Runs every libFuzzer target for long (1 M executions each by default) and
# prints a table of executions, speed and findings.
#
#   scripts/fuzz_long.sh [BUILD_DIR] [NAME...]
#
#   BUILD_DIR          a build configured with clang available and TLM_FUZZ=ON
#                      (default build-fuzz; configured here when missing)
#   NAME...            only these fuzzers (see BUILD_DIR/tests/fuzz/fuzzers.txt)
#   TLM_FUZZ_RUNS      executions per fuzzer (default 1000000)
#   TLM_FUZZ_MAX_SECONDS  at most this long per fuzzer (default 3600)
#   TLM_FUZZ_TIMEOUT   seconds one input may take (default 25: generous, so a
#                      loaded machine does not report slow inputs as hangs;
#                      the ctest smoke runs allow 5)
#   TLM_FUZZ_NICE      the fuzzers' nice level (default 10: they yield to
#                      other work on a shared machine, and get the rest)
#   TLM_FUZZ_WORK      where the growing corpora and findings stay between
#                      runs (default BUILD_DIR/fuzz-long/NAME)
#
# A fuzzer stops at its first finding (crash, leak, timeout, out of
# memory over 2 GB, failed check): the table names the file that reproduces
# it (run the fuzzer on that file to see the report). Exit status 1 when
# any fuzzer found something.
set -uo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" -- "$@"
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
shift || true
runs=${TLM_FUZZ_RUNS:-1000000}
max_seconds=${TLM_FUZZ_MAX_SECONDS:-3600}
timeout=${TLM_FUZZ_TIMEOUT:-25}
niceness=${TLM_FUZZ_NICE:-10}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTLM_FUZZ=ON -DTLM_SKIP_DIRS=editors >/dev/null
fi
list="$build/tests/fuzz/fuzzers.txt"
if [ ! -s "$list" ]; then
  echo "fuzz_long: no fuzzers in $build (clang missing or TLM_FUZZ=OFF?)" >&2
  exit 2
fi
targets=()
while IFS='|' read -r name _; do
  if [ $# -eq 0 ] || [[ " $* " == *" $name "* ]]; then targets+=("fuzz_${name}_target"); fi
done <"$list"
cmake --build "$build" -j2 --target "${targets[@]}" >/dev/null || exit 2

table=$(mktemp); trap 'rm -f "$table"' EXIT
found=0
while IFS='|' read -r name seeds env flags; do
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  work=${TLM_FUZZ_WORK:-$build/fuzz-long}/$name
  mkdir -p "$work/corpus" "$work/findings"
  cp -n "$seeds"/* "$work/corpus/" 2>/dev/null || true
  log=$work/log.txt
  echo "fuzz_long: $name ($runs runs, at most ${max_seconds}s; log $log)" >&2
  start=$(date +%s)
  # shellcheck disable=SC2086  # env and flags are lists
  env $env nice -n "$niceness" "$PWD/$build/tests/fuzz/fuzz_$name" -runs="$runs" -max_total_time="$max_seconds" \
      -timeout="$timeout" -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1 $flags \
      -artifact_prefix="$work/findings/" "$work/corpus" >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$((${execs:-0} / (secs > 0 ? secs : 1)))
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  new=$(find "$work/findings" -type f -newermt "@$start" 2>/dev/null | head -1)
  result=none
  if [ "$rc" != 0 ] || [ -n "$new" ]; then
    result=${new:-"exit status $rc (see $log)"}
    found=1
  fi
  printf '%-12s %10s %6ss %8s %6s %6s  %s\n' "$name" "${execs:-?}" "$secs" "${speed:-?}" "${cov:-?}" \
    "$(find "$work/corpus" -type f | wc -l)" "$result" >>"$table"
done <"$list"
printf '%-12s %10s %7s %8s %6s %6s  %s\n' fuzzer executions time exec/s cov corpus finding
cat "$table"
exit "$found"
