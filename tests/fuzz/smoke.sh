#!/usr/bin/env bash
# A short fuzzing run from the seed corpus: fails on any crash, leak, hang
# (over 5 s on one input) or sanitizer report.
set -euo pipefail
fuzzer=$1; seeds=$2
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$seeds" "$work/corpus"
cd "$work"
"$fuzzer" -max_total_time="${TLM_FUZZ_SECONDS:-30}" -timeout=5 -rss_limit_mb=2048 \
          -max_len=4096 -print_final_stats=1 corpus 2>&1 | tail -25
