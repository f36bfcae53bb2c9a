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

# The scripts of scripts/: --help is the header, an unknown option one line
# and exit 2, before any install, build or deletion (setup.sh --help once
# built the tree; bundle_mpi.sh --help went to rm)
for s in setup test demo sanitize_all race_check fuzz_long shard_memory gpu_prepare bundle_mpi crash_campaign; do
  expect 0 "" "scripts/$s.sh --help" -- bash "$root/scripts/$s.sh" --help
  check "  scripts/$s.sh --help prints its header" -- bash -c "bash '$root/scripts/$s.sh' --help | grep -q '[a-z]'"
done
for s in setup demo race_check fuzz_long shard_memory gpu_prepare bundle_mpi crash_campaign; do
  expect 2 "unknown" "scripts/$s.sh --bogus" -- bash "$root/scripts/$s.sh" --bogus
done
# a folder of other files is never replaced by a bundle
mkdir -p "$tmp/keep" "$tmp/keep2"
echo precious > "$tmp/keep/notes.txt"
echo precious > "$tmp/keep2/notes.txt"
expect 1 "not an earlier bundle" "bundle_mpi.sh onto a folder of other files" -- bash "$root/scripts/bundle_mpi.sh" "$tmp/keep"
expect 1 "not an earlier bundle" "gpu_prepare.sh onto a folder of other files" -- \
  bash "$root/scripts/gpu_prepare.sh" --no-build "$build" "$tmp/keep2"
# ... a folder with an env.sh of its own is not a bundle either (the bundle's
# mark is .bundle_mpi, written as the folder is made)
mkdir -p "$tmp/envonly" && echo 'export X=1' > "$tmp/envonly/env.sh"
expect 1 "not an earlier bundle" "bundle_mpi.sh onto a folder with an env.sh of its own" -- \
  bash "$root/scripts/bundle_mpi.sh" "$tmp/envonly"
# an option out of place, or a word for an option, is refused, not taken
# for "build everything"
expect 2 "comes first" "gpu_prepare.sh BUILD BUNDLE --no-build" -- bash "$root/scripts/gpu_prepare.sh" "$build" "$tmp/gb" --no-build
expect 2 "takes only --no-build" "setup.sh nobuild" -- bash "$root/scripts/setup.sh" nobuild
expect 2 "at most BUILD_DIR" "race_check.sh A B" -- bash "$root/scripts/race_check.sh" a b
check "  both kept" -- bash -c "[ \"\$(cat '$tmp/keep/notes.txt' '$tmp/keep2/notes.txt')\" = \"precious
precious\" ]"
expect 1 "no $tmp/none/compiler/tlmc" "shard_memory.sh without a build: nothing made" -- \
  bash "$root/scripts/shard_memory.sh" "$tmp/none"
check "  nothing made" -- test ! -e "$tmp/none"
for a in "--kills abc" "--kills 0" "--seed 40000" "--seed x" "--kills" "--seed 099999" "--kills 99999999999999999999"; do
  # shellcheck disable=SC2086
  expect 2 "crash_campaign.sh: --" "crash_campaign.sh $a" -- bash "$root/scripts/crash_campaign.sh" $a
done
# train_bench.sh: -h is help, not a BUILD_DIR; its help is its own usage
expect 0 "usage: bench/train_bench.sh" "train_bench.sh -h" -- "$b/train_bench.sh" -h
if [ -x "$bin/decode_bench" ]; then
  expect 2 "longer than the model's context" "decode_bench --length past the context" -- \
    "$bin/decode_bench" "$build/tests/model/tiny.so" --length 100000
fi

# train_bench.py needs PyTorch only where it runs the peer, checked before tlm's timed runs
# (python -S: the same python without its site-packages, so without torch)
expect 1 "PyTorch is missing" "train_bench.py in a python without torch" -- "$py" -S "$b/train_bench.py" "$tmp/none" "$tmp/none.so"
expect 1 "none is missing or not executable" "train_bench.py without dump_model" -- "$py" "$b/train_bench.py" "$tmp/none" "$tmp/none.so"

# gpu_peer.py: counts of at least 1, a known device, its settings file, --seq within the model's context
for a in "--steps 0" "--steps -1" "--batch 0" "--seq 0" "--seq x" "--device tpu" "--device cuda:x" "--foo"; do
  # shellcheck disable=SC2086
  expect 2 "gpu_peer.py: " "gpu_peer $a" -- "$py" "$b/gpu_peer.py" "$tmp/none.json" $a
done
expect 1 "No such file" "gpu_peer without its settings file" -- "$py" "$b/gpu_peer.py" "$tmp/none.json" --device cpu
expect 1 "not the JSON line" "gpu_peer of a file that is not settings" -- "$py" "$b/gpu_peer.py" "$b/gpu_peer.py" --device cpu
printf '%s\n' '{"batch": 1, "seq": 16, "model": {"name": "t", "vocab": 64, "context": 16, "d_model": 32, "layers": 1, "heads": 2, "head_dim": 16, "mlp": "swiglu", "tie_embeddings": false, "norm_eps": 1e-05, "rope_base": 10000, "widths": [64]}, "train": {"lr": 0.003, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08, "weight_decay": 0.1, "grad_clip": 1}}' > "$tmp/peer.json"
expect 2 "longer than the model's context (16)" "gpu_peer --seq 17" -- "$py" "$b/gpu_peer.py" "$tmp/peer.json" --device cpu --steps 1 --batch 1 --seq 17
expect 1 "PyTorch is missing" "gpu_peer in a python without torch" -- "$py" -S "$b/gpu_peer.py" "$tmp/peer.json" --device cpu --seq 8
if "$py" -c 'import sys, torch; sys.exit(torch.cuda.is_available())' 2> /dev/null; then
  expect 1 "gpu_peer: --device cuda, but" "gpu_peer --device cuda, torch without CUDA" -- "$py" "$b/gpu_peer.py" "$tmp/peer.json" --device cuda --seq 8
fi

# attention_sass.py: its arguments checked before it compiles anything
expect 2 "attention_sass.py: --arch takes" "attention_sass --arch sm90" -- "$py" "$b/attention_sass.py" --arch sm90
expect 2 "unrecognized arguments" "attention_sass --foo" -- "$py" "$b/attention_sass.py" --foo
expect 1 "attention_sass.py: " "attention_sass --versus a revision git lacks" -- "$py" "$b/attention_sass.py" --versus no-such-revision

# scripts/gen_shard.py: the header's ranges, a missing folder, a folder for OUT
for a in "--eot -5" "--eot 256" "--vocab 0" "--vocab 2147483648" "--tokens -1" "--doc 0"; do
  # shellcheck disable=SC2086
  expect 2 "gen_shard.py: argument ${a%% *}" "gen_shard $a" -- "$py" "$root/scripts/gen_shard.py" "$tmp/x.bin" --tokens 10 $a
done
expect 1 "gen_shard.py: .*no folder" "gen_shard into a missing folder" -- "$py" "$root/scripts/gen_shard.py" "$tmp/none/x.bin" --tokens 10
mkdir -p "$tmp/dir"
expect 1 "is a folder" "gen_shard onto a folder" -- "$py" "$root/scripts/gen_shard.py" "$tmp/dir" --tokens 10

# scripts/make_downstream.py: its inputs checked before DIR is made
expect 1 "make_downstream.py: .*No such file" "make_downstream --root of no repository" -- "$py" "$root/scripts/make_downstream.py" --root "$tmp/none" --out "$tmp/sets"
check "  and no DIR made" -- test ! -e "$tmp/sets"
expect 2 "unrecognized arguments" "make_downstream --foo" -- "$py" "$root/scripts/make_downstream.py" --foo
: > "$tmp/file"
expect 1 "make_downstream.py: cannot write" "make_downstream --out a file" -- "$py" "$root/scripts/make_downstream.py" --root "$root" --out "$tmp/file"
exit $fail
