#!/usr/bin/env bash
# The benchmarks of bench/ refuse bad arguments before doing any work: a
# usage error is one line and exit 2, a missing build one line and exit 1
# (no traceback, no crash, no run on a value atoi took for 0). A benchmark
# this build lacks (mlp_bench without OpenBLAS, tile_bench off x86) is
# skipped. decode_bench, which checks its own results, also runs one short
# pass.
#
#   bad_args.sh SOURCE_ROOT BUILD_DIR WORK_DIR
set -u
root=$1 build=$2
. "$root/tests/expect.sh"
start_case "$3"
b=$root/bench bin=$build/bench py=${TLM_PYTHON:-/usr/bin/python3}

# The shell scripts: an option where a folder goes, bad counts, a missing build.
for s in sample_bench arch_compare compile_time tokenizer_bench dist_bench; do
  expect 2 "unknown option" "$s -x" -- "$b/$s.sh" -x
  expect 0 "" "$s --help" -- "$b/$s.sh" --help
done
expect 2 "at least 2" "sample_bench LENGTH 1 (divided by LENGTH - 1)" -- "$b/sample_bench.sh" "$build" 1
expect 2 "at least 1" "sample_bench THREADS 0" -- "$b/sample_bench.sh" "$build" 20 0
expect 1 "missing" "sample_bench without a build" -- "$b/sample_bench.sh" "$tmp/none"
expect 2 "at least 1" "arch_compare JOBS abc" -- "$b/arch_compare.sh" "$build" 3 abc
expect 1 "missing" "arch_compare without a build" -- "$b/arch_compare.sh" "$tmp/none"
expect 2 "at least 1" "compile_time RUNS 0" -- "$b/compile_time.sh" "$build/compiler/tlmc" 0
expect 1 "missing" "compile_time without tlmc" -- "$b/compile_time.sh" "$tmp/none/tlmc"
expect 2 "at most" "tokenizer_bench, 2 arguments" -- "$b/tokenizer_bench.sh" "$build" extra
expect 2 "at least 6" "dist_bench STEPS 5" -- "$b/dist_bench.sh" "$build" 5
expect 2 "at most" "dist_bench, 3 arguments" -- "$b/dist_bench.sh" "$build" 6 extra
expect 2 "needs a FILE" "train_bench --model without a file" -- "$b/train_bench.sh" "$build" --model
expect 1 "missing" "train_bench without a build" -- "$b/train_bench.sh" "$tmp/none"
expect 2 "unrecognized arguments" "train_bench.py --foo" -- "$py" "$b/train_bench.py" dump model.so --foo
# train_bench.sh refuses a bad option before it compiles the model (a
# model that does not exist: compiled first, tlmc's exit 1 would come first)
for a in "--steps 0" "--foo"; do
  # shellcheck disable=SC2086
  expect 2 "train_bench.py: " "train_bench.sh $a" -- "$b/train_bench.sh" "$build" --model "$tmp/none.tlm" $a
done
expect 0 "" "train_bench.sh --help" -- "$b/train_bench.sh" "$build" --help

# train_bench.py checks its counts before it runs anything.
for a in "--threads abc" "--threads 1,0" "--steps 0" "--repeat 0" "--batch -1" "--seq x"; do
  # shellcheck disable=SC2086
  expect 2 "argument --" "train_bench.py $a" -- "$py" "$b/train_bench.py" dump model.so $a
done

# The C benchmarks: values atoi took for 0 or a number, widths padded with 0s;
# --help is their usage on stdout, exit 0.
for c in mlp_bench attention_bench tile_bench titans_bench; do
  if [ -x "$bin/$c" ]; then
    expect 0 "usage: $c" "$c --help" -- "$bin/$c" --help
    check "  on stdout" -- bash -c "'$bin/$c' --help 2> /dev/null | grep -q 'usage: $c'"
  fi
done
if [ -x "$bin/mlp_bench" ]; then
  for a in "--reps 0" "--reps abc" "--rows -5" "--d 0" "--threads 3" "--kind foo" "--clock foo" \
    "--widths 336x" "--widths 336,,416" "--widths 0" "--skip-codegen 7"; do
    # shellcheck disable=SC2086
    expect 2 "mlp_bench: --" "mlp_bench $a" -- "$bin/mlp_bench" $a
  done
  expect 2 "mlp_bench: unknown option --foo (" "mlp_bench --foo" -- "$bin/mlp_bench" --foo
  expect 2 "mlp_bench: --reps needs a value (" "mlp_bench --reps" -- "$bin/mlp_bench" --reps
  expect 2 "unknown CPU 'not-a-cpu'" "mlp_bench --cpu not-a-cpu" -- "$bin/mlp_bench" --cpu not-a-cpu
fi
if [ -x "$bin/attention_bench" ]; then
  for a in "0" "abc" "17x" "--batch 0" "--heads x" "--head-dim -1" "--reps 0" "--profile xyz"; do
    # shellcheck disable=SC2086
    expect 2 "attention_bench" "attention_bench $a" -- "$bin/attention_bench" $a
  done
fi
if [ -x "$bin/tile_bench" ]; then
  for a in "--panels abc" "--panels 1x" "--reps 0" "--reps"; do
    # shellcheck disable=SC2086
    expect 2 "tile_bench" "tile_bench $a" -- "$bin/tile_bench" $a
  done
fi
if [ -x "$bin/titans_bench" ]; then
  for a in "--reps 3x" "--threads 0" "--b440 abc" "--foo"; do
    # shellcheck disable=SC2086
    expect 2 "usage: titans_bench" "titans_bench $a" -- "$bin/titans_bench" $a
  done
fi
if [ -x "$bin/decode_bench" ]; then
  expect 0 "usage: decode_bench" "decode_bench --help" -- "$bin/decode_bench" --help
  for a in "--threads 0" "--reps abc" "--length 0" "--length 3x" "--foo" ""; do
    # shellcheck disable=SC2086
    expect 2 "decode_bench" "decode_bench $a" -- "$bin/decode_bench" $a
  done
  expect 1 "decode_bench: " "decode_bench of a missing model" -- "$bin/decode_bench" "$tmp/none.so"
  # the one benchmark that checks its results: a short pass on a test model
  # (tests/model's, built with the tests), the cached logits against the
  # recomputed ones
  expect 0 "worst .* of the bound" "decode_bench, 6 tokens" -- \
    "$bin/decode_bench" "$build/tests/model/tiny.so" --reps 1 --length 6 --threads 2
fi
exit $fail
