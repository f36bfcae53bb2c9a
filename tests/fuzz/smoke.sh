#!/usr/bin/env bash
# A short fuzzing run from the seed corpus: fails on any crash, leak, hang
# (over 5 s on one input) or sanitizer report.
#   smoke.sh FUZZER SEED_DIR [libFuzzer flags...]
# Seconds: $TLM_FUZZ_SECONDS, else $TLM_FUZZ_DEFAULT_SECONDS (the test's own
# length, set in CMakeLists.txt), else 30.
set -euo pipefail
fuzzer=$1; seeds=$2; shift 2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$seeds" "$work/corpus"
cd "$work"
# Later flags win: the test's own (a larger -max_len, a dictionary) go last.
"$fuzzer" -max_total_time="${TLM_FUZZ_SECONDS:-${TLM_FUZZ_DEFAULT_SECONDS:-30}}" -timeout=5 -rss_limit_mb=2048 \
          -max_len=4096 -print_final_stats=1 "$@" corpus 2>&1 | tail -25
