#!/usr/bin/env bash
# Golden test: runs tlmc on one .tlm file and compares what it prints (stdout
# and stderr, in order) and its exit status with FILE.expected.
#   golden.sh TLMC FILE.tlm [tlmc options...]
# With UPDATE=1 the expected file is rewritten instead (review the diff!).
set -u
tlmc=$1; input=$2; shift 2
dir=$(dirname "$input"); base=$(basename "$input")
expected="${EXPECTED_DIR:-$dir}/${base%.tlm}.expected"
# Options may also come from a first line `// tlmc: OPTIONS` in the input.
opts=$(sed -n '1s|^// tlmc: ||p' "$input")
actual=$(cd "$dir" && timeout 20 "$tlmc" --color=never "$@" $opts "$base" 2>&1; echo "exit: $?")
# The standard library's location differs between machines.
if [ -n "${TLM_STDLIB:-}" ]; then actual=${actual//"$TLM_STDLIB"/<stdlib>}; fi
# So does the input's folder (in messages that give a resolved path).
actual=${actual//"$(cd "$dir" && pwd -P)"/<dir>}
if [ "${UPDATE:-}" = 1 ]; then
  printf '%s\n' "$actual" > "$expected"
  exit 0
fi
if [ ! -f "$expected" ]; then
  echo "missing $expected; run with UPDATE=1 to create it"; exit 1
fi
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "FAIL: $input (expected output differs; UPDATE=1 rewrites it)"
  exit 1
fi
