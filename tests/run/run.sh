#!/usr/bin/env bash
# End-to-end tests of `tlm-run train`, `eval` and `sample` on the small
# models of tests/run/models.tlm. One case per ctest test:
#
#   run.sh CASE TLMC TLM_RUN SOURCE_ROOT WORK_DIR
#
# `compile` builds the models into WORK_DIR/models (a fixture for the
# others); `train_learns` trains WORK_DIR/trained (a fixture for the
# checkpoint, eval and sample cases). Training uses one thread: on a shared
# two-core machine a small model runs several times faster that way.
set -u
case_=$1 tlmc=$2 run=$3 root=$4 work=$5
py=${TLM_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
models=$work/models
trained=$work/trained
tmp=$work/$case_
rm -rf "$tmp"
mkdir -p "$tmp"
cd "$tmp" || exit 1   # so that a default checkpoints/ folder would land here
austen=$root/data/austen
fail=0

. "$here/../expect.sh"   # expect, check
ckpt() { "$py" "$here/ckpt.py" "$@"; }
# no_reference STATUS OUTPUT WHAT: a PyTorch check did not pass. Its 77
# ("cannot run here": no torch in $TLM_PYTHON) is a failure too: the case's
# main check did not run, and ctest must not read that as a pass.
no_reference() {
  if [ "$1" = 77 ]; then echo "FAIL: $3: not checked, the reference cannot run with TLM_PYTHON=$py (exit 77)"
  else echo "FAIL: $3 (exit $1)"; fi
  cat "$2"; fail=1
}

# Fast settings for runs whose learning does not matter.
quick=(--threads 1 --context 32 --batch 8 --eval-batches 2)

case $case_ in

compile)
  mkdir -p "$models"
  for m in small small_sgd small_hope small_tied other ascii small_gated small_titans; do
    expect 0 "" "tlmc --model $m" -- "$tlmc" "$here/models.tlm" --model "$m" -o "$models/$m.so"
  done
  expect 0 "" "tlmc -D width=160 (same names, other shapes)" -- \
    "$tlmc" -D width=160 "$here/models.tlm" -o "$models/small160.so"
  sed 's/^    heads   = 4;/    heads   = 8;/' "$here/models.tlm" > "$models/h8.tlm"
  check "small with 8 heads: its source" -- grep -q '^    heads   = 8;' "$models/h8.tlm"
  expect 0 "" "tlmc small with 8 heads (same names and shapes, another architecture)" -- \
    "$tlmc" "$models/h8.tlm" --model small -o "$models/small_h8.so"
  ;;

train_learns)
  # A few hundred steps on the five novels, validated on Persuasion (the
  # defaults), stdout not a terminal: plain lines every log_every steps.
  expect 0 "done: 300 steps" "train small, 300 steps on the bundled Austen" -- \
    "$run" train "$models/small.so" --ckpt "$trained" --log "$tmp/log.jsonl" --threads 1 --overwrite
  cp "$tmp/out" "$tmp/train.out"
  sed 's/^/    /' "$tmp/train.out"
  check "the validation loss falls below 0.85 x its start" -- ckpt learned "$tmp/log.jsonl" 0.85
  ckpt log_steps "$tmp/log.jsonl" > "$tmp/steps"
  check "logged steps 1, 50, ..., 300; validations 0, 100, 200, 300" -- \
    diff <(printf '1 50 100 150 200 250 300\n0 100 200 300\n') "$tmp/steps"
  check "plain progress lines, one per logged step" -- \
    test "$(grep -c '^step .*/300  loss' "$tmp/train.out")" = 7
  check "no carriage returns or escapes when stdout is not a terminal" -- \
    bash -c "! grep -q $'[\r\033]' '$tmp/train.out'"
  check "checkpoint layout: Llama names, AdamW state, run state, metadata" -- \
    ckpt layout "$trained/checkpoint.safetensors" adamw
  check "checkpoint step 300" -- test "$(ckpt meta "$trained/checkpoint.safetensors" step)" = 300
  check "no temporary files left" -- test "$(ls "$trained")" = checkpoint.safetensors
  ;;

mixers_learn)
  # Every architecture's training lowers the validation loss: gated
  # attention, titans and hope_attention (the Transformer is train_learns).
  for m in small_gated small_titans small_hope; do
    expect 0 "done: 150 steps" "train $m, 150 steps" -- \
      "$run" train "$models/$m.so" --steps 150 --eval-every 150 --eval-batches 8 --log-every 50 \
      --ckpt "$tmp/$m" --log "$tmp/$m.jsonl" --threads 1
    check "$m: the validation loss falls below 0.85 x its start" -- ckpt learned "$tmp/$m.jsonl" 0.85
  done
  ;;

gpu_no_driver)
  # Without a driver (this machine), --device cuda is one clear line and exit
  # 1 for every command, whatever else is wrong; where a driver exists the
  # GPU itself is checked (scripts/gpu_check.sh) and this case cannot run.
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then echo "a CUDA driver is installed: case skipped"; exit 77; fi
  unset TLM_TEST_DEVICE
  # (a build without the CUDA toolkit says that instead)
  nodriver='no CUDA driver (libcuda.so.1 not found)\|built without the CUDA toolkit'
  for cmd in train eval sample probe; do
    expect 1 "$nodriver" "$cmd --device cuda without a driver" -- \
      "$run" $cmd "$models/small.so" --device cuda --ckpt "$tmp/none"
  done
  expect 1 "$nodriver" "bench --device cuda without a driver" -- "$run" bench "$models/small.so" --device cuda
  expect 1 "$nodriver" "info --device cuda" -- "$run" info "$models/small.so" --device cuda
  # the device is opened before the report: the one line and nothing else
  # (it printed the whole model report on stdout first)
  check "info --device cuda without a driver prints nothing on stdout" -- test ! -s "$tmp/out"
  expect 1 "$nodriver" "--device cuda:1" -- "$run" train "$models/small.so" --device cuda:1 --ckpt "$tmp/none"
  for bad in tpu cuda: cuda:x gpu; do
    expect 2 "unknown device \`$bad\`\|--device $bad" "--device $bad" -- "$run" train "$models/small.so" --device $bad
  done
  ;;

gpu_emulated)
  # The GPU path on the emulated device (TLM_TEST_DEVICE=emulated: the same
  # CUDA source run on the CPU, docs/gpu.md): train, resume bit for bit,
  # checkpoints that cross between the device and the CPU, eval and sample.
  export TLM_TEST_DEVICE=emulated XDG_CACHE_HOME=$work/gpu-cache
  flags=(--threads 1 --context 16 --batch 4 --steps 6 --log-every 1 --eval-every 3 --eval-batches 1 --ckpt-every 2)
  # fp32 on the device, to compare with the CPU; bf16 (the default) below
  gpu=(--device cuda --precision fp32)
  for m in small small_gated small_titans small_hope; do
    expect 0 "done: 6 steps" "$m: 6 steps on the device" -- \
      "$run" train "$models/$m.so" "${flags[@]}" "${gpu[@]}" --ckpt "$tmp/$m.g" --log "$tmp/$m.g.jsonl"
    expect 0 "done: 6 steps" "$m: 6 steps on the CPU" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --ckpt "$tmp/$m.c" --log "$tmp/$m.c.jsonl"
    check "$m: device and CPU losses agree" -- ckpt close "$tmp/$m.g.jsonl" "$tmp/$m.c.jsonl" 1e-6
    # stopped and resumed on the device: bit for bit (hope's slow level is
    # mid-period at step 3)
    expect 0 "stopped at step 3 of 6" "$m: stopped at step 3 on the device" -- \
      "$run" train "$models/$m.so" "${flags[@]}" "${gpu[@]}" --ckpt "$tmp/$m.r" --log "$tmp/$m.r.jsonl" --stop-at 3
    expect 0 "done: 6 steps" "$m: resumed on the device" -- \
      "$run" train "$models/$m.so" "${gpu[@]}" --ckpt "$tmp/$m.r" --resume
    check "$m: resumed checkpoint bit-identical" -- ckpt same "$tmp/$m.g/checkpoint.safetensors" "$tmp/$m.r/checkpoint.safetensors"
    check "$m: resumed log identical" -- ckpt logs "$tmp/$m.g.jsonl" "$tmp/$m.r.jsonl"
    # crossing: device -> CPU and CPU -> device, from the fp32 weights
    expect 0 "stopped at step 3 of 6" "$m: 3 steps on the device" -- \
      "$run" train "$models/$m.so" "${flags[@]}" "${gpu[@]}" --ckpt "$tmp/$m.x" --log "$tmp/$m.x.jsonl" --stop-at 3
    expect 0 "written on cuda:0" "$m: resumed on the CPU, with a note" -- \
      "$run" train "$models/$m.so" --ckpt "$tmp/$m.x" --resume
    check "$m: device then CPU agrees with the CPU" -- ckpt close "$tmp/$m.x.jsonl" "$tmp/$m.c.jsonl" 1e-6
    expect 0 "stopped at step 3 of 6" "$m: 3 steps on the CPU" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --ckpt "$tmp/$m.y" --log "$tmp/$m.y.jsonl" --stop-at 3
    expect 0 "written on cpu" "$m: resumed on the device, with a note" -- \
      "$run" train "$models/$m.so" "${gpu[@]}" --ckpt "$tmp/$m.y" --resume
    check "$m: CPU then device agrees with the CPU" -- ckpt close "$tmp/$m.y.jsonl" "$tmp/$m.c.jsonl" 1e-6
  done
  expect 0 "from the cache (nothing compiled)" "a second run compiles nothing" -- \
    "$run" train "$models/small.so" "${flags[@]}" "${gpu[@]}" --ckpt "$tmp/small.g" --overwrite
  expect 0 "runtime .* kernels, cached" "info --device cuda: the runtime's kernels are cached" -- \
    "$run" info "$models/small.so" --device cuda
  expect 0 "model MLP (per width) .* 8 kernels, cached" "info --device cuda: the model's kernels are cached" -- \
    "$run" info "$models/small.so" --device cuda
  # A damaged entry: info reports it and changes nothing (it only looks);
  # the next run that loads the module says so, replaces it and goes on.
  mlp_entry=$(grep -A1 '^  model MLP' "$tmp/out" | tail -1 | tr -d ' ')
  truncate -s 20 "$mlp_entry"
  expect 0 "model MLP (per width) .* 8 kernels, cache entry damaged (shorter than its header): the next run compiles" \
    "info --device cuda: a damaged entry" -- "$run" info "$models/small.so" --device cuda
  check "info leaves the damaged entry as it was" -- test "$(stat -c %s "$mlp_entry")" = 20
  check "info prints no repair note" -- bash -c "! grep -q 'removed' '$tmp/err'"
  expect 0 "is unusable (shorter than its header); removed, compiling again" "train: the damaged entry replaced" -- \
    "$run" train "$models/small.so" "${gpu[@]}" --steps 1 --context 16 --batch 2 --eval-every 0 \
    --ckpt "$tmp/damaged" --overwrite
  expect 0 "model MLP (per width) .* 8 kernels, cached" "info --device cuda: cached again" -- \
    "$run" info "$models/small.so" --device cuda
  # which attention kernels and whether CUDA graphs run, and why not
  # (docs/gpu.md "Using it"): head size 16 here, 64 in examples/tiny
  expect 0 "in bf16 (the default): attention: scalar (head size 16; tensor cores: 64 or 128); CUDA graphs: on$" \
    "info --device cuda: scalar attention for head size 16, graphs on" -- "$run" info "$models/small.so" --device cuda
  "$tlmc" "$root/examples/tiny.tlm" -o "$tmp/tiny.so" > /dev/null
  expect 0 "in bf16 (the default): attention: tensor cores; CUDA graphs: on$" \
    "info --device cuda: tensor-core attention for head size 64" -- "$run" info "$tmp/tiny.so" --device cuda
  # gated attention too: its sigmoid gate reads attention's y in bf16
  "$tlmc" "$root/examples/tiny_gated.tlm" -o "$tmp/tiny_gated.so" > /dev/null
  expect 0 "in bf16 (the default): attention: tensor cores; CUDA graphs: on$" \
    "info --device cuda: tensor-core attention for gated attention, head size 64" -- \
    "$run" info "$tmp/tiny_gated.so" --device cuda
  expect 0 "attention: scalar (TLM_GPU_ATTENTION=scalar); CUDA graphs: off (TLM_CUDA_GRAPHS=0)$" \
    "info --device cuda: the two switches" -- \
    env TLM_GPU_ATTENTION=scalar TLM_CUDA_GRAPHS=0 "$run" info "$tmp/tiny.so" --device cuda
  expect 1 "^tlm-run info: TLM_GPU_ATTENTION=bogus: expected auto or scalar$" \
    "info --device cuda refuses the attention switch train refuses" -- \
    env TLM_GPU_ATTENTION=bogus "$run" info "$tmp/tiny.so" --device cuda
  check "info --device cuda with a bad switch prints no report" -- bash -c "[ ! -s '$tmp/out' ]"
  # a graphs switch that would change nothing is refused too, by info and train
  expect 1 "^tlm-run info: TLM_CUDA_GRAPHS=off: expected 0 (off) or 1 (on, the default)$" \
    "info --device cuda refuses TLM_CUDA_GRAPHS=off" -- env TLM_CUDA_GRAPHS=off "$run" info "$tmp/tiny.so" --device cuda
  expect 1 "TLM_CUDA_GRAPHS=off: expected 0 (off) or 1" "... and train does" -- env TLM_CUDA_GRAPHS=off \
    "$run" train "$models/small.so" "${gpu[@]}" --steps 1 --context 16 --batch 2 --ckpt "$tmp/graphs_off" --overwrite
  check "... before it made anything" -- test ! -e "$tmp/graphs_off/checkpoint.safetensors"
  expect 0 "CUDA graphs: on$" "TLM_CUDA_GRAPHS=1: on, as unset" -- env TLM_CUDA_GRAPHS=1 "$run" info "$tmp/tiny.so" --device cuda
  expect 0 "^attention: scalar (fp32); CUDA graphs: off (--profile)$" "train's banner: fp32 and --profile" -- \
    "$run" train "$models/small.so" "${gpu[@]}" --steps 1 --context 16 --batch 2 --eval-every 0 --profile \
    --ckpt "$tmp/banner" --overwrite
  expect 0 "^attention: scalar (head size 16; tensor cores: 64 or 128); CUDA graphs: off (TLM_CUDA_GRAPHS=0)$" \
    "train's banner: bf16 and TLM_CUDA_GRAPHS=0" -- env TLM_CUDA_GRAPHS=0 \
    "$run" train "$models/small.so" --device cuda --steps 1 --context 16 --batch 2 --eval-every 0 --ckpt "$tmp/banner" \
    --overwrite
  expect 0 "persuasion" "eval on the device" -- \
    "$run" eval "$models/small.so" "${gpu[@]}" --ckpt "$tmp/small.c" --context 16 --batch 4 --max-tokens 128
  check "... its banner says where it ran" -- grep -q "^model small, .*windows of 16 tokens, on cuda:0 .*, fp32$" "$tmp/out"
  grep persuasion "$tmp/out" > "$tmp/eval.gpu"
  expect 0 "persuasion" "eval on the CPU" -- \
    "$run" eval "$models/small.so" --ckpt "$tmp/small.c" --context 16 --batch 4 --max-tokens 128
  check "... its banner names no device" -- grep -q "^model small, .*windows of 16 tokens$" "$tmp/out"
  grep persuasion "$tmp/out" > "$tmp/eval.cpu"
  check "eval: the same loss on both (4 decimals)" -- cmp "$tmp/eval.gpu" "$tmp/eval.cpu"
  expect 0 "" "sample on the device" -- \
    "$run" sample "$models/small.so" "${gpu[@]}" --ckpt "$tmp/small.c" --length 24 --seed 5 --prompt "It is"
  cp "$tmp/out" "$tmp/sample.gpu"
  expect 0 "" "sample on the CPU" -- "$run" sample "$models/small.so" --ckpt "$tmp/small.c" --length 24 --seed 5 --prompt "It is"
  check "sample: the same text on both" -- cmp "$tmp/sample.gpu" "$tmp/out"
  expect 1 "step 2: the loss is NaN.*nan/checkpoint.safetensors (step 1), is intact" \
    "--lr 1e30 on the device stops on NaN, as on the CPU" -- \
    "$run" train "$models/small.so" "${flags[@]}" "${gpu[@]}" --lr 1e30 --ckpt "$tmp/nan" --ckpt-every 1
  # 68 GiB of activations: refused with the sizes before anything is
  # allocated (the emulated device's memory is the machine's)
  expect 1 "out of device memory: batch 131000 × 64 tokens needs 68.* GiB on cuda:0" \
    "a batch larger than the device's memory" -- \
    "$run" train "$models/small.so" "${gpu[@]}" --batch 131000 --context 64 --steps 1 --ckpt "$tmp/huge"
  expect 0 "rho" "probe on the device" -- \
    "$run" probe "$models/small.so" "${gpu[@]}" --ckpt "$tmp/small.c" --context 16 --batch 4 --windows 8
  check "... its banner says where it ran" -- grep -q "window.* of 16 tokens, on cuda:0 .*, fp32$" "$tmp/out"
  # bf16, the device's default: bf16 GEMM operands and GEMM-input
  # activations (q, k, v among them), fp32 everything else, for the four
  # mixers. Its losses stay within 1e-3 relative of the fp32 CPU run's (a
  # quarter of bf16's unit roundoff 2^-8; docs/gpu.md, "Precision": measured
  # up to 2.7e-5 here), a resume in bf16 is bit for bit,
  # and a resume in fp32 continues with a note.
  for m in small small_gated small_hope small_titans; do
    expect 0 "cuda:0 .*, bf16" "$m: 6 steps in bf16 (the device's default)" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --device cuda --ckpt "$tmp/$m.b" --log "$tmp/$m.b.jsonl"
    check "$m: bf16 losses within 1e-3 of the fp32 CPU run's" -- ckpt close "$tmp/$m.b.jsonl" "$tmp/$m.c.jsonl" 1e-3
    check "$m: bf16 differs from fp32 (the GEMMs did round)" -- ckpt differ "$tmp/$m.b.jsonl" "$tmp/$m.g.jsonl"
    expect 0 "stopped at step 3 of 6" "$m: stopped at step 3 in bf16" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --device cuda --ckpt "$tmp/$m.br" --log "$tmp/$m.br.jsonl" --stop-at 3
    expect 0 "done: 6 steps" "$m: resumed in bf16" -- "$run" train "$models/$m.so" --device cuda --ckpt "$tmp/$m.br" --resume
    check "$m: bf16 resume bit-identical" -- ckpt same "$tmp/$m.b/checkpoint.safetensors" "$tmp/$m.br/checkpoint.safetensors"
    check "$m: bf16 resumed log identical" -- ckpt logs "$tmp/$m.b.jsonl" "$tmp/$m.br.jsonl"
  done
  expect 0 "stopped at step 3 of 6" "bf16 run to cross to fp32" -- \
    "$run" train "$models/small.so" "${flags[@]}" --device cuda --ckpt "$tmp/bx" --stop-at 3
  expect 0 "note: resuming in fp32, the checkpoint was written in bf16" "resumed in fp32, with a note" -- \
    "$run" train "$models/small.so" --device cuda --precision fp32 --ckpt "$tmp/bx" --resume
  # another GPU: a note too (the same kind on another ordinal is not one)
  expect 0 "stopped at step 3 of 6" "a bf16 run to resume on another GPU" -- \
    "$run" train "$models/small.so" "${flags[@]}" --device cuda --ckpt "$tmp/by" --stop-at 3
  expect 0 "^done: " "... resumed on the same GPU" -- \
    "$run" train "$models/small.so" --device cuda --ckpt "$tmp/by" --resume --steps 4
  check "... with no note" -- bash -c "! grep -q 'note: resuming on' '$tmp/out'"
  ckpt rewrite "$tmp/by/checkpoint.safetensors" "$tmp/by/other.safetensors" device "cuda:1 NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB)"
  mv "$tmp/by/other.safetensors" "$tmp/by/checkpoint.safetensors"
  expect 0 "note: resuming on cuda:0 .*, the checkpoint was written on cuda:1 NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB)" \
    "resumed on another GPU, with a note" -- "$run" train "$models/small.so" --device cuda --ckpt "$tmp/by" --resume
  # a checkpoint that records no device (older ones): resumed, nothing to compare
  ckpt drop "$tmp/by/checkpoint.safetensors" "$tmp/by/other.safetensors" device
  mv "$tmp/by/other.safetensors" "$tmp/by/checkpoint.safetensors"
  expect 0 "^done: " "a checkpoint without its device resumed on the device" -- \
    "$run" train "$models/small.so" --device cuda --ckpt "$tmp/by" --resume --steps 8
  expect 0 "persuasion" "eval in bf16" -- \
    "$run" eval "$models/small.so" --device cuda --ckpt "$tmp/small.c" --context 16 --batch 4 --max-tokens 128
  # sampling in bf16: the KV cache holds bf16 rows of q, k, v (and gated
  # attention's gate reads decoding's bf16 y); greedy text the same as
  # recomputing the window in bf16
  for m in small small_gated; do
    expect 0 "" "$m: greedy sample in bf16 with the KV cache" -- \
      "$run" sample "$models/$m.so" --device cuda --ckpt "$tmp/$m.c" --length 24 --temperature 0 --prompt "It is"
    cp "$tmp/out" "$tmp/$m.sample.bf16"
    expect 0 "" "$m: greedy sample in bf16 recomputing the window" -- \
      "$run" sample "$models/$m.so" --device cuda --ckpt "$tmp/$m.c" --length 24 --temperature 0 --prompt "It is" \
      --no-cache
    check "$m: bf16 greedy text the same with and without the cache" -- cmp "$tmp/$m.sample.bf16" "$tmp/out"
  done
  expect 2 "--precision bf16 needs --device cuda" "--precision bf16 on the CPU" -- \
    "$run" train "$models/small.so" --precision bf16 --ckpt "$tmp/none"
  expect 2 "unknown precision \`fp16\`" "--precision fp16" -- \
    "$run" eval "$models/small.so" --device cuda --precision fp16
  ;;

gpu_modules)
  # The tensor-core attention is a module of its own (docs/gpu.md, "The
  # kernel cache"): compiled, cached and listed by info only where a run
  # uses it (bf16, head size 64 or 128; the emulated device passes for
  # sm_80+), with the cache's miss, hit and damage handling. A fresh cache,
  # as on CI.
  export TLM_TEST_DEVICE=emulated XDG_CACHE_HOME=$tmp/cache
  "$tlmc" "$root/examples/tiny.tlm" -o "$tmp/tiny.so" > /dev/null
  one=(--device cuda --steps 1 --context 16 --batch 2 --eval-every 0 --eval-batches 1 --threads 1)
  tc_line() { grep -A1 '^  tensor-core attention ' "$tmp/out"; }
  expect 0 "^  tensor-core attention   10 kernels, not cached" "info: tiny (head size 64) lists the TC module" -- \
    "$run" info "$tmp/tiny.so" --device cuda
  tc_entry=$(tc_line | tail -1 | tr -d ' ')
  check "info: the TC module's cache entry is under the fresh cache" -- test "${tc_entry#"$tmp/cache/tlm/kernels/"}" != "$tc_entry"
  expect 0 "^  runtime " "info: small (head size 16)" -- "$run" info "$models/small.so" --device cuda
  check "info: small does not list the TC module (it does not use it)" -- bash -c "! grep -q 'tensor-core' '$tmp/out'"
  expect 0 "" "info: tiny with TLM_GPU_ATTENTION=scalar" -- env TLM_GPU_ATTENTION=scalar "$run" info "$tmp/tiny.so" --device cuda
  check "info: TLM_GPU_ATTENTION=scalar does not list the TC module" -- bash -c "! grep -q 'tensor-core attention ' '$tmp/out'"
  expect 0 "kernels: compiled in" "tiny in fp32: one step" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --precision fp32 --ckpt "$tmp/fp32"
  check "tiny in fp32 compiled no TC module" -- test ! -e "$tc_entry"
  expect 0 "kernels: compiled in .*, cached for the next run" "tiny in bf16: the TC module compiled (a miss)" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/bf16"
  check "the TC module's entry written" -- test -s "$tc_entry"
  expect 0 "^  tensor-core attention   10 kernels, cached" "info: the TC module is cached" -- \
    "$run" info "$tmp/tiny.so" --device cuda
  expect 0 "kernels: from the cache (nothing compiled)" "tiny in bf16 again: every module a hit" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/bf16" --overwrite
  # damage: a payload byte flipped, then the entry cut short
  printf '\x5a' | dd of="$tc_entry" bs=1 seek=2000 conv=notrunc status=none
  expect 0 "kernel cache entry $tc_entry is unusable (.*); removed, compiling again" \
    "a damaged TC entry: noticed, removed and compiled again" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/bf16" --overwrite
  check "the note is the only line on stderr" -- test "$(wc -l < "$tmp/err")" = 1
  check "the TC entry rebuilt" -- test -s "$tc_entry"
  truncate -s 100 "$tc_entry"
  expect 0 "kernel cache entry $tc_entry is unusable" "a TC entry cut short: compiled again" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/bf16" --overwrite
  expect 0 "kernels: from the cache (nothing compiled)" "then a hit again" -- \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/bf16" --overwrite
  # TLM_GPU_ATTENTION_ROWS=16: the forward's and dq's warps take 16 query
  # rows where they take 32 on the emulated sm_90 (their kernels are in the
  # same module): the banner says so, and the step's bits are the same
  expect 0 "^attention: tensor cores, 16 rows a warp (TLM_GPU_ATTENTION_ROWS=16); CUDA graphs: on$" \
    "tiny in bf16 with 16 rows a warp" -- env TLM_GPU_ATTENTION_ROWS=16 \
    "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/rows16"
  check "... its checkpoint the same bits as 32 rows a warp" -- \
    ckpt same "$tmp/bf16/checkpoint.safetensors" "$tmp/rows16/checkpoint.safetensors"
  expect 0 "in bf16 (the default): attention: tensor cores, 16 rows a warp (TLM_GPU_ATTENTION_ROWS=16); CUDA graphs: on$" \
    "info says it too" -- env TLM_GPU_ATTENTION_ROWS=16 "$run" info "$tmp/tiny.so" --device cuda
  expect 0 "in bf16 (the default): attention: tensor cores; CUDA graphs: on$" "auto: the default" -- \
    env TLM_GPU_ATTENTION_ROWS=auto "$run" info "$tmp/tiny.so" --device cuda
  expect 0 "in bf16 (the default): attention: scalar (head size 16; tensor cores: 64 or 128); CUDA graphs: on$" \
    "head size 16: nothing to change" -- env TLM_GPU_ATTENTION_ROWS=16 "$run" info "$models/small.so" --device cuda
  "$tlmc" "$root/tests/model/models.tlm" --model heads128 -o "$tmp/heads128.so" > /dev/null
  expect 0 "in bf16 (the default): attention: tensor cores; CUDA graphs: on$" \
    "head size 128, on the tensor cores: nothing to change (16 rows a warp there already)" -- \
    env TLM_GPU_ATTENTION_ROWS=16 "$run" info "$tmp/heads128.so" --device cuda
  expect 1 "^tlm-run info: TLM_GPU_ATTENTION_ROWS=32: expected auto or 16$" "a value other than auto or 16 is refused" \
    -- env TLM_GPU_ATTENTION_ROWS=32 "$run" info "$tmp/tiny.so" --device cuda
  expect 1 "^tlm-run train: TLM_GPU_ATTENTION_ROWS=32: expected auto or 16$" "... by train too" -- \
    env TLM_GPU_ATTENTION_ROWS=32 "$run" train "$tmp/tiny.so" "${one[@]}" --ckpt "$tmp/rows32"
  check "... before it made anything" -- test ! -e "$tmp/rows32/checkpoint.safetensors"
  ;;

resume_exact)
  # N steps straight vs. stopped at step k and resumed: bit-identical
  # tensors and logs. k = 13 is off the checkpoint, log and eval cadence and
  # in the middle of small_hope's 3-step period (its summed gradients must
  # survive); AdamW with 2 micro-batches (and 2 threads), SGD with momentum.
  flags=(--context 32 --batch 8 --accumulate 2 --steps 30 --log-every 1 --eval-every 10
         --eval-batches 2 --ckpt-every 7)
  for m in small small_sgd small_hope; do
    opt=adamw; [ $m = small_sgd ] && opt=sgd
    threads=1; [ $m = small ] && threads=2
    flags+=(--threads $threads)   # the last --threads wins
    expect 0 "done: 30 steps" "$m: 30 steps straight" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --ckpt "$tmp/$m.a" --log "$tmp/$m.a.jsonl"
    expect 0 "stopped at step 13 of 30" "$m: stopped at step 13" -- \
      "$run" train "$models/$m.so" "${flags[@]}" --ckpt "$tmp/$m.b" --log "$tmp/$m.b.jsonl" --stop-at 13
    # A crash after the checkpoint leaves later records and a torn line in
    # the log; the resumed run drops them.
    printf '{"step":14,"loss":1}\n{"step":15,"lo' >> "$tmp/$m.b.jsonl"
    expect 0 "done: 30 steps" "$m: resumed with no flags (the checkpoint's settings)" -- \
      "$run" train "$models/$m.so" --ckpt "$tmp/$m.b" --resume
    check "$m: checkpoints bit-identical" -- ckpt same "$tmp/$m.a/checkpoint.safetensors" "$tmp/$m.b/checkpoint.safetensors"
    check "$m: logged losses identical" -- ckpt logs "$tmp/$m.a.jsonl" "$tmp/$m.b.jsonl"
    if [ $m = small_hope ]; then
      check "$m: the slow level's summed gradients in the checkpoint (2 layers x 4 tensors)" -- \
        test "$(ckpt count "$tmp/$m.a/checkpoint.safetensors" optimizer.grad_sum.model.layers.)" = 8
    else
      check "$m: Llama names and $opt state in the checkpoint" -- ckpt layout "$tmp/$m.a/checkpoint.safetensors" $opt
    fi
  done

  # Ctrl-C: the step in flight finishes, a checkpoint is written, exit 130;
  # wherever that happened, resuming gives the run that was not interrupted.
  flags=(--threads 1 --context 32 --batch 8 --steps 100000 --log-every 1 --eval-every 0 --eval-batches 1)
  "$run" train "$models/small.so" "${flags[@]}" --ckpt "$tmp/int" --log "$tmp/int.jsonl" > "$tmp/int.out" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    [ "$(cat "$tmp/int.jsonl" 2>/dev/null | wc -l)" -ge 4 ] && break
    sleep 0.05
  done
  kill -INT $pid
  wait $pid; rc=$?
  k=$(ckpt meta "$tmp/int/checkpoint.safetensors" step)
  check "SIGINT: exit 130, 'interrupted at step $k', checkpoint at step $k" -- \
    bash -c "[ $rc = 130 ] && grep -q 'interrupted at step $k of' '$tmp/int.out'"
  stop=$((k + 5))
  expect 0 "stopped at step $stop" "resume after SIGINT, up to step $stop" -- \
    "$run" train "$models/small.so" --ckpt "$tmp/int" --resume --stop-at $stop
  expect 0 "stopped at step $stop" "the same $stop steps uninterrupted" -- \
    "$run" train "$models/small.so" "${flags[@]}" --ckpt "$tmp/straight" --log "$tmp/straight.jsonl" --stop-at $stop
  check "interrupted + resumed == straight" -- \
    ckpt same "$tmp/int/checkpoint.safetensors" "$tmp/straight/checkpoint.safetensors"
  check "interrupted + resumed logs == straight logs" -- ckpt logs "$tmp/int.jsonl" "$tmp/straight.jsonl"
  ;;

resume_rules)
  c=$tmp/c
  expect 0 "done: 10 steps" "a 10-step run" -- "$run" train "$models/small.so" "${quick[@]}" --steps 10 --ckpt "$c"
  expect 1 "already holds a checkpoint.*--resume" "train again without --resume" -- \
    "$run" train "$models/small.so" "${quick[@]}" --steps 10 --ckpt "$c"
  expect 1 "\-\-batch is 4, the checkpoint's is 8" "resume with another --batch" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --batch 4
  expect 1 "\-\-context is 16, the checkpoint's is 32" "resume with another --context" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --context 16
  expect 1 "\-\-seed is 7" "resume with another --seed" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --seed 7
  expect 1 "\-\-lr is 0.1" "resume with another --lr" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --lr 0.1
  expect 1 "decay-embeddings" "resume with --decay-embeddings" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --decay-embeddings
  expect 1 "a checkpoint of model .small., not .small_sgd." "resume with another model" -- \
    "$run" train "$models/small_sgd.so" --ckpt "$c" --resume --steps 20
  head -c 5000 "$austen/emma.txt" > "$tmp/emma5k.txt"
  expect 1 "differs from the checkpoint's" "resume on other data" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --data "$tmp/emma5k.txt"
  expect 1 "past --steps 5" "resume with --steps below the checkpoint's step" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 5
  expect 0 "nothing to do" "resume at the last step" -- "$run" train "$models/small.so" --ckpt "$c" --resume
  expect 1 "\-\-stop-at 5 is not past the checkpoint's step 10" "resume with --stop-at behind the checkpoint" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 20 --stop-at 5
  expect 0 "done: 15 steps" "resume with --steps raised to 15" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 15
  check "the checkpoint is at step 15" -- test "$(ckpt meta "$c/checkpoint.safetensors" step)" = 15
  expect 0 "1 thread" "a resumed run keeps the checkpoint's thread count" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 16
  expect 0 "note: resuming with 2 threads" "resume with another --threads: a note" -- \
    "$run" train "$models/small.so" --ckpt "$c" --resume --steps 17 --threads 2
  expect 1 "no checkpoint at" "--resume with no checkpoint" -- \
    "$run" train "$models/small.so" --ckpt "$tmp/none" --resume
  check "... creates nothing" -- test ! -e "$tmp/none"
  expect 0 "done: 3 steps" "--overwrite starts afresh" -- \
    "$run" train "$models/small.so" "${quick[@]}" --steps 3 --ckpt "$c" --overwrite
  check "the checkpoint is at step 3" -- test "$(ckpt meta "$c/checkpoint.safetensors" step)" = 3
  expect 0 "done: 0 steps" "--steps 0: validation and a step-0 checkpoint" -- \
    "$run" train "$models/small.so" "${quick[@]}" --steps 0 --ckpt "$tmp/zero"
  check "the step-0 checkpoint" -- test "$(ckpt meta "$tmp/zero/checkpoint.safetensors" step)" = 0
  # a checkpoint's relative --data names a file from the folder its run
  # started in: a resume from elsewhere says whose path it is
  mkdir -p "$tmp/from/a" "$tmp/from/b"
  cp "$austen/emma.txt" "$tmp/from/a/text.txt"
  (cd "$tmp/from/a" && "$run" train "$models/small.so" "${quick[@]}" --steps 1 --data text.txt --ckpt ../ck) > /dev/null
  cd "$tmp/from/b" || exit 1 # (not a subshell: expect's failures must count)
  expect 1 "text.txt: No such file or directory (the checkpoint's --data, relative to the folder its run started in: give --data to name it from here)" \
    "a resume elsewhere of a run on a relative --data: said whose path it is" -- \
    "$run" train "$models/small.so" --ckpt ../ck --resume --steps 2
  expect 0 "done: 2 steps" "... and with --data naming it from here: resumed" -- \
    "$run" train "$models/small.so" --ckpt ../ck --resume --steps 2 --data ../a/text.txt
  cd - > /dev/null || exit 1
  ;;

bad_flags)
  s=$models/small.so
  for cmd in train eval sample; do
    expect 0 "usage: tlm-run $cmd" "$cmd --help" -- "$run" $cmd --help
    expect 2 "no MODEL.so" "$cmd without a model" -- "$run" $cmd
    expect 2 "unknown option .--frobnicate." "$cmd --frobnicate" -- "$run" $cmd "$s" --frobnicate
    # no abbreviations (getopt_long's prefixes): a flag added later would
    # change what one meant; the flags it may have meant are named
    expect 2 "unknown option .--thr. (did you mean --threads?)" "$cmd --thr 1: no abbreviations" -- \
      "$run" $cmd "$s" --thr 1
    expect 2 "unknown option .--thr. (did you mean --threads?)" "$cmd --thr=1 the same" -- "$run" $cmd "$s" --thr=1
    expect 2 "unknown option .--thr. (did you mean --threads?)" "$cmd --thr (no value): the same" -- \
      "$run" $cmd "$s" --thr
    expect 2 "more than one model" "$cmd with two models" -- "$run" $cmd "$s" "$s"
    expect 1 "cannot open" "$cmd on a missing model file" -- "$run" $cmd "$tmp/nope.so"
    expect 2 "\-\-threads must be between 1" "$cmd --threads 0" -- "$run" $cmd "$s" --threads 0
    # an empty path is a slip: --ckpt "" was joined into /checkpoint.safetensors
    expect 2 "^tlm-run $cmd: MODEL.so is empty: it needs a path" "$cmd ''" -- "$run" $cmd ""
    expect 2 "^tlm-run $cmd: \-\-ckpt is empty: it needs a path" "$cmd --ckpt ''" -- "$run" $cmd "$s" --ckpt ""
  done
  check "nothing was written at /checkpoint.safetensors" -- test ! -e /checkpoint.safetensors
  expect 2 "unknown option .--eval. (did you mean --eval-every or --eval-batches?)" "train --eval: the flags it may mean" \
    -- "$run" train "$s" --eval 3
  expect 0 "^batch 3$" "train --batch=3 whole" -- "$run" train "$s" --dry-run --batch=3 --ckpt "$tmp/w"
  expect 2 "\-\-data is empty" "train --data ''" -- "$run" train "$s" --data ""
  expect 2 "\-\-val is empty" "train --val ''" -- "$run" train "$s" --val ""
  expect 2 "^tlm-run train: --data given twice: training reads one text or folder (put the texts in one folder)" \
    "train --data twice: refused, not the first dropped" -- "$run" train "$s" --data a.txt --data b.txt
  expect 2 "^tlm-run train: --val given twice" "train --val twice" -- "$run" train "$s" --val a.txt --val b.txt
  expect 2 "^tlm-run train: --log needs a value, not the option .--resume." "train --log --resume: a forgotten log path" -- \
    "$run" train "$s" --log --resume
  # a warm-up as long as the run: a note in the banner (stdout)
  expect 0 "^note: the warm-up (100 steps) lasts the whole run (2 steps): the learning rate climbs to 6e-05 of lr 0.003 at the last step (lower --warmup)$" \
    "a warm-up as long as the run: a note" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --warmup 100 --lr 3e-3 --ckpt "$tmp/warm" --data "$root/data/austen/emma.txt"
  check "... on stdout" -- grep -q '^note: the warm-up' "$tmp/out"
  expect 0 "" "a shorter warm-up: no note" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --warmup 1 --ckpt "$tmp/warm2" --data "$root/data/austen/emma.txt"
  check "... none" -- bash -c "! grep -q '^note: the warm-up' '$tmp/out' '$tmp/err'"
  # another command's name, or '_' for '-': the option meant
  expect 2 "unknown option .--max-tokens. (did you mean --length?)" "sample --max-tokens: eval's name" -- \
    "$run" sample "$s" --max-tokens 5
  expect 2 "unknown option .--length. (did you mean --context?)" "eval --length: the window" -- \
    "$run" eval "$s" --length 5
  expect 2 "unknown option .--eval_every. (did you mean --eval-every?)" "train --eval_every" -- \
    "$run" train "$s" --eval_every 5
  expect 2 "unknown option .--bogus_flag. (see" "train --bogus_flag: nothing offered" -- "$run" train "$s" --bogus_flag
  expect 2 "\-\-seed: .18446744073709551616. is out of range (at most 9223372036854775807)" "sample --seed 2^64" -- \
    "$run" sample "$s" --seed 18446744073709551616
  expect 2 "\-\-data is empty" "probe --data ''" -- "$run" probe "$s" --data ""
  expect 2 "\-\-choices is empty" "eval --choices ''" -- "$run" eval "$s" --choices ""
  expect 2 "\-\-tokenizer is empty" "sample --tokenizer ''" -- "$run" sample "$s" --tokenizer ""
  expect 2 "\-\-output is empty" "tokenize -o ''" -- "$run" tokenize --tokenizer "$tmp/t.json" -o "" "$s"
  expect 0 "^log (none)$" "train --log '': no log (how a resume stops the checkpoint's)" -- \
    "$run" train "$s" --dry-run --log ""
  # a path that is not UTF-8: the checkpoint's settings (JSON) could not
  # hold it (the checkpoint was written, and nothing could read it)
  latin1=$(printf 'caf\351.txt')
  cp "$root/data/austen/persuasion.txt" "$tmp/$latin1"
  for flag in --data --val --log; do
    # (patterns that do not cross the byte: grep's . matches no invalid one)
    expect 2 "the path is not UTF-8" "train $flag with a Latin-1 name" -- \
      "$run" train "$s" --steps 1 --ckpt "$tmp/latin1" $flag "$tmp/$latin1"
    check "  the message names $flag" -- grep -q -- "^tlm-run train: $flag $tmp/caf" "$tmp/err"
  done
  check "  nothing written" -- test ! -e "$tmp/latin1"
  # a path near PATH_MAX: the message keeps its reason (a 512-byte message
  # once cut it off behind the path); a longer one loses its middle
  deep=$tmp/$(printf 'd%.0s' $(seq 200))
  for i in $(seq 18); do deep=$deep/$(printf 'd%.0s' $(seq 200)); done
  mkdir -p "$deep"
  expect 1 "$deep/missing.txt: No such file or directory$" "train --data, a path of ${#deep} bytes" -- \
    "$run" train "$s" --steps 1 --ckpt "$tmp/deep" --data "$deep/missing.txt"
  long=$deep$(printf '/.%.0s' $(seq 600))/missing.txt
  expect 1 "^tlm-run train: .* \.\.\. .*/missing.txt: File name too long$" "train --data, a path of ${#long} bytes" -- \
    "$run" train "$s" --steps 1 --ckpt "$tmp/deep" --data "$long"
  check "  nothing written" -- test ! -e "$tmp/deep"
  expect 2 "\-\-steps must be between 0 and" "train --steps -1" -- "$run" train "$s" --steps -1
  expect 2 "not an integer" "train --steps abc" -- "$run" train "$s" --steps abc
  expect 2 "not an integer" "train --steps 10x" -- "$run" train "$s" --steps 10x
  expect 2 "\-\-steps needs a value" "train --steps (no value)" -- "$run" train "$s" --steps
  expect 2 "\-\-lr must be > 0" "train --lr 0" -- "$run" train "$s" --lr 0
  expect 2 "\-\-lr must be > 0" "train --lr=-1" -- "$run" train "$s" --lr=-1
  # above 0 as a number, 0 as the float the trainer computes in (an eps
  # of 0 made the second step's loss NaN)
  expect 2 "\-\-eps 1e-50 is 0 as a float32, which the trainer computes in" "train --eps 1e-50" -- \
    "$run" train "$s" --eps 1e-50
  expect 2 "\-\-lr 1e-320 is 0 as a float32" "train --lr 1e-320" -- "$run" train "$s" --lr 1e-320
  # (and a closed bound's: a grad_clip of 0 turns clipping off, which
  # 1e-320 does not ask for)
  expect 2 "\-\-grad-clip 1e-320 is 0 as a float32" "train --grad-clip 1e-320" -- "$run" train "$s" --grad-clip 1e-320
  # more threads than OpenBLAS's build runs (Debian's: 64): said, not silent
  expect 0 "cpu, 64 threads" "bench --threads 100: runs 64" -- \
    "$run" bench "$s" --threads 100 --steps 1 --warmup 0 --profile 0 --batch 2 --context 16
  check "... and says why" -- \
    grep -q "^tlm-run bench: note: --threads 100: this build runs at most 64 threads (its OpenBLAS's limit)$" "$tmp/err"
  expect 0 "" "train --grad-clip 0 --dry-run: off, as documented" -- "$run" train "$s" --grad-clip 0 --dry-run
  expect 2 "not a finite number" "train --lr nan" -- "$run" train "$s" --lr nan
  expect 2 "not a finite number" "train --lr inf" -- "$run" train "$s" --lr inf
  # numbers as a .tlm file writes them: no hexadecimal (strtod's 0x10 = 16),
  # no white space; a forgotten value is said to be one
  expect 2 "\-\-lr: \`0x10\` is not a decimal number" "train --lr 0x10" -- "$run" train "$s" --lr 0x10
  expect 2 "\-\-lr: \` 3e-3\` is not a decimal number" "train --lr ' 3e-3'" -- "$run" train "$s" --lr " 3e-3"
  expect 2 "\-\-batch: \` 5\` is not an integer" "train --batch ' 5'" -- "$run" train "$s" --batch " 5"
  expect 2 "\-\-batch needs a value, not the option \`\-\-dry-run\`" "train --batch --dry-run" -- \
    "$run" train "$s" --batch --dry-run
  expect 2 "\-\-temperature: \`0x1\` is not a decimal number" "sample --temperature 0x1" -- \
    "$run" sample "$s" --temperature 0x1
  expect 0 "^lr 150$" "train --lr 1.5e+2: a decimal with a signed exponent" -- "$run" train "$s" --dry-run --lr 1.5e+2
  expect 2 "\-\-min-lr must be >= 0" "train --min-lr -1" -- "$run" train "$s" --min-lr -1
  # min_lr's default is a tenth of lr as the flags leave it; a model's own
  # min_lr stays; a decay that would end above its peak is refused.
  expect 0 "^min_lr 1e-05$" "train --lr 1e-4: the default min_lr follows, a tenth of it" -- \
    "$run" train "$s" --dry-run --lr 1e-4
  # ... as a decimal: 0.003 / 10 in binary would print as 0.00030000000000000003
  expect 0 "^min_lr 0.0003$" "train --lr 0.003: the default min_lr prints as 0.0003" -- \
    "$run" train "$s" --dry-run --lr 0.003
  expect 0 "^min_lr 0.005$" "train --lr 0.01: small_sgd's own min_lr stays" -- \
    "$run" train "$models/small_sgd.so" --dry-run --lr 0.01
  expect 2 "min_lr 0.005 is above lr 0.001: the linear schedule would raise the rate" \
    "train --lr 0.001 below small_sgd's min_lr" -- "$run" train "$models/small_sgd.so" --dry-run --lr 0.001
  expect 2 "min_lr 0.0002 is above lr 0.0001: the cosine schedule" "train --lr 1e-4 --min-lr 2e-4" -- \
    "$run" train "$s" --dry-run --lr 1e-4 --min-lr 2e-4
  expect 0 "^lr_schedule constant$" "a constant schedule ignores min_lr" -- \
    "$run" train "$s" --dry-run --lr 1e-4 --min-lr 2e-4 --lr-schedule constant
  expect 0 "^note: \-\-min-lr is not an argument of this run's lr_schedule, constant: it changes nothing$" \
    "  and says so" -- "$run" train "$s" --dry-run --lr 1e-4 --min-lr 2e-4 --lr-schedule constant
  expect 0 "^note: \-\-momentum is not an argument of this run's optimizer, adamw: it changes nothing$" \
    "--momentum under adamw: noted" -- "$run" train "$s" --dry-run --momentum 0.5
  check "  on stderr: --dry-run's stdout stays key-value lines" -- \
    bash -c "'$run' train '$s' --dry-run --momentum 0.5 2> /dev/null | grep -qv '^note'"
  check "  and not in its settings" -- bash -c "! '$run' train '$s' --dry-run --momentum 0.5 | grep -q '^momentum'"
  expect 0 "^usage: tlm-run train " "tlm-run help train: train's help" -- "$run" help train
  expect 2 "unknown command .nope." "tlm-run help nope" -- "$run" help nope
  expect 2 "\-\-batch must be between 1 and" "train --batch 0" -- "$run" train "$s" --batch 0
  expect 2 "\-\-batch must be between 1 and 1048576" "train --batch 10^12" -- "$run" train "$s" --batch 1000000000000
  expect 2 "\-\-seed must be between 0 and 9007199254740991 (got 18446744073709551616)" "train --seed 2^64: its range" -- \
    "$run" train "$s" --seed 18446744073709551616
  expect 2 "\-\-batch must be between 1 and 1048576 (got 99999999999999999999)" "train --batch 10^20" -- \
    "$run" train "$s" --batch 99999999999999999999
  expect 2 "\-\-batch 6 is not divisible by --accumulate 4" "train --batch 6 --accumulate 4" -- \
    "$run" train "$s" --batch 6 --accumulate 4
  expect 2 "\-\-accumulate 3" "train --accumulate 3 (the model's batch 16)" -- "$run" train "$s" --accumulate 3
  expect 2 "longer than the model's context (64)" "train --context 65" -- "$run" train "$s" --context 65
  expect 2 "\-\-eval-batches must be between 1 and" "train --eval-batches 0" -- "$run" train "$s" --eval-batches 0
  expect 2 "contradict" "train --resume --overwrite" -- "$run" train "$s" --resume --overwrite
  expect 2 "unknown device .tpu." "train --device tpu" -- "$run" train "$s" --device tpu
  # --precision's value checked where it is read: in `--precision --steps
  # 1` it is --steps (the 1 was taken for a second model)
  for c in train eval sample probe bench; do
    expect 2 "unknown precision .--steps. (known: bf16, fp32)" "$c --precision --steps 1" -- \
      "$run" $c "$s" --precision --steps 1
  done
  expect 2 "longer than the model's context" "eval --context 65" -- "$run" eval "$s" --context 65
  expect 2 "\-\-batch must be between 1" "eval --batch 0" -- "$run" eval "$s" --batch 0
  expect 2 "\-\-max-tokens must be at least 1" "eval --max-tokens 0" -- "$run" eval "$s" --max-tokens 0
  expect 2 "\-\-temperature must be >= 0" "sample --temperature -1" -- "$run" sample "$s" --temperature -1
  expect 2 "\-\-top-k must be between 0" "sample --top-k -1" -- "$run" sample "$s" --top-k -1
  expect 2 "not an integer" "sample --length x" -- "$run" sample "$s" --length x
  check "no checkpoint folder was created" -- test ! -e "$tmp/checkpoints"
  ;;

bad_data)
  s=$models/small.so
  t=(train "$s" "${quick[@]}" --steps 2)
  : > "$tmp/empty.txt"
  mkdir -p "$tmp/emptydir" "$tmp/notxt"
  echo hi > "$tmp/notxt/readme.md"
  printf 'too short' > "$tmp/short.txt"
  printf 'caf\xc3\xa9 %.0s' $(seq 40) > "$tmp/utf8.txt"
  expect 1 "No such file" "train --data missing" -- "$run" "${t[@]}" --data "$tmp/missing.txt" --ckpt "$tmp/c"
  expect 1 "empty" "train --data an empty file" -- "$run" "${t[@]}" --data "$tmp/empty.txt" --ckpt "$tmp/c"
  expect 1 "no .txt files or .bin token shards in this directory" "train --data an empty folder" -- "$run" "${t[@]}" --data "$tmp/emptydir" --ckpt "$tmp/c"
  expect 1 "no .txt files or .bin token shards in this directory" "train --data a folder without .txt" -- "$run" "${t[@]}" --data "$tmp/notxt" --ckpt "$tmp/c"
  expect 1 "too short.*a window needs 33" "train --data shorter than a window" -- \
    "$run" "${t[@]}" --data "$tmp/short.txt" --ckpt "$tmp/c"
  expect 1 "Not a directory" "train --data under a file" -- "$run" "${t[@]}" --data "$tmp/short.txt/x" --ckpt "$tmp/c"
  # root reads anything: as root, the command runs as nobody (util-linux's
  # setpriv), so that the check runs everywhere
  printf 'x%.0s' $(seq 100) > "$tmp/locked.txt"; chmod 000 "$tmp/locked.txt"
  as_user=()
  [ "$(id -u)" = 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  expect 1 "Permission denied" "train --data unreadable" -- \
    "${as_user[@]}" "$run" "${t[@]}" --data "$tmp/locked.txt" --ckpt "$tmp/c"
  # a validation text the training data holds too (here through a link)
  # trains, with a note: its loss is on trained text; the bundled pair is not
  ln -s "$austen/persuasion.txt" "$tmp/held_out.txt"
  expect 0 "^note: the validation text $tmp/held_out.txt is training data too: its loss measures text the model trains on" \
    "train --val inside --data: a note" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --data "$austen" --val "$tmp/held_out.txt" --ckpt "$tmp/cv"
  expect 0 "done: 1 step" "train on the bundled data and validation" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$tmp/cv" --overwrite
  check "... no note" -- bash -c "! grep -q 'training data too' '$tmp/out'"
  rm -rf "$tmp/cv"
  expect 1 "No such file" "train --val missing" -- "$run" "${t[@]}" --val "$tmp/missing.txt" --ckpt "$tmp/c"
  expect 1 "too short" "train --val shorter than a window" -- "$run" "${t[@]}" --val "$tmp/short.txt" --ckpt "$tmp/c"
  expect 1 "/nonexistent/austen.*(the default training data, in /nonexistent, from \$TLM_DATA; --data FILE names other)" \
    "the bundled data missing (\$TLM_DATA): where it was looked for" -- env TLM_DATA=/nonexistent "$run" "${t[@]}" --ckpt "$tmp/c"
  expect 1 "holds byte 195, but the model's vocabulary has only 128" "UTF-8 text for a 128-token model" -- \
    "$run" train "$models/ascii.so" "${quick[@]}" --steps 2 --data "$tmp/utf8.txt" --ckpt "$tmp/c"
  check "no checkpoint was written" -- test ! -e "$tmp/c"
  expect 1 "cannot write the log" "train --log in a missing folder" -- \
    "$run" "${t[@]}" --log "$tmp/missing/log.jsonl" --ckpt "$tmp/c"
  # a start that fails leaves none of the folders it made and keeps the ones
  # that were there, however the path is spelled: three folders down, a
  # trailing slash, a `..` over a folder that was there (empty: it must stay)
  mkdir -p "$tmp/kept" "$tmp/old_empty"
  for ckpt in kept/new1/new2 kept/n1/n2/ new_dir/../old_empty; do
    expect 1 "cannot write the log" "train --log in a missing folder, --ckpt $ckpt" -- \
      "$run" "${t[@]}" --log "$tmp/missing/log.jsonl" --ckpt "$tmp/$ckpt"
  done
  check "... no checkpoint folder left, the folders that were there kept" -- \
    bash -c "test ! -e '$tmp/c' && test ! -e '$tmp/kept/new1' && test ! -e '$tmp/kept/n1' && test ! -e '$tmp/new_dir' &&
      test -d '$tmp/kept' && test -d '$tmp/old_empty'"
  expect 1 "cannot create or write the checkpoint folder" "train --ckpt under a file" -- \
    "$run" "${t[@]}" --ckpt "$tmp/short.txt/ckpt"
  expect 0 "no validation" "train --data without --val: no validation" -- \
    "$run" "${t[@]}" --data "$tmp/utf8.txt" --ckpt "$tmp/ok"
  expect 1 "No such file" "eval --data missing" -- "$run" eval "$s" --ckpt "$tmp/ok" --data "$tmp/missing.txt"
  expect 1 "too short" "eval --data shorter than a window" -- "$run" eval "$s" --ckpt "$tmp/ok" --data "$tmp/short.txt"
  expect 1 "empty" "eval --data empty" -- "$run" eval "$s" --ckpt "$tmp/ok" --data "$tmp/empty.txt"
  # Special files are refused before they are opened (a FIFO would wait for
  # a writer forever, a device never ends); timeout turns a hang into a failure.
  mkfifo "$tmp/fifo.txt"
  mkdir -p "$tmp/fifodir" "$tmp/fifockpt"
  mkfifo "$tmp/fifodir/a.txt" "$tmp/fifockpt/checkpoint.safetensors"
  expect 1 "fifo.txt is a FIFO (named pipe), not a regular file" "train --data a FIFO" -- \
    timeout 20 "$run" "${t[@]}" --data "$tmp/fifo.txt" --ckpt "$tmp/c"
  expect 1 "a.txt is a FIFO (named pipe), not a regular file" "train --data a folder holding a FIFO" -- \
    timeout 20 "$run" "${t[@]}" --data "$tmp/fifodir" --ckpt "$tmp/c"
  expect 1 "/dev/zero is a character device, not a regular file" "eval --data /dev/zero" -- \
    timeout 20 "$run" eval "$s" --ckpt "$tmp/ok" --data /dev/zero
  expect 1 "checkpoint.safetensors is a FIFO (named pipe), not a regular file" "eval: a FIFO as the checkpoint" -- \
    timeout 20 "$run" eval "$s" --ckpt "$tmp/fifockpt"
  expect 1 "checkpoint.safetensors is a FIFO (named pipe), not a regular file" "train --resume: a FIFO as the checkpoint" -- \
    timeout 20 "$run" "${t[@]}" --ckpt "$tmp/fifockpt" --resume
  ;;

bad_checkpoint)
  s=$models/small.so
  good=$trained/checkpoint.safetensors
  expect 1 "no checkpoint at" "eval without a checkpoint" -- "$run" eval "$s" --ckpt "$tmp/none"
  expect 1 "no checkpoint at" "sample without a checkpoint" -- "$run" sample "$s" --ckpt "$tmp/none"
  # a --ckpt that is neither a file nor a folder: said, not "train first"
  mkfifo "$tmp/ckfifo"
  expect 1 "\-\-ckpt $tmp/ckfifo is a FIFO (named pipe), not a checkpoint or its folder" "sample --ckpt a FIFO" -- \
    timeout 20 "$run" sample "$s" --ckpt "$tmp/ckfifo"
  expect 1 "\-\-ckpt /dev/null is a character device" "eval --ckpt /dev/null" -- "$run" eval "$s" --ckpt /dev/null
  mkdir -p "$tmp/dir/checkpoint.safetensors"
  expect 1 "not a regular file" "a folder in the checkpoint's place" -- "$run" eval "$s" --ckpt "$tmp/dir"
  expect 1 "a checkpoint of model .small., not .other." "another model's checkpoint" -- \
    "$run" eval "$models/other.so" --ckpt "$trained"
  expect 1 "written for a different .small.: model.layers.0.mlp.gate_proj.weight is F32 \[192, 64\] there, F32 \[160, 64\] here" \
    "the same model name with other shapes" -- "$run" eval "$models/small160.so" --ckpt "$trained"
  expect 1 "a checkpoint of model .small., not .small_sgd." "resume another model's checkpoint" -- \
    "$run" train "$models/small_sgd.so" --ckpt "$trained" --resume --steps 400
  # The same names and shapes, another architecture: the checkpoint's
  # config tells them apart (the shapes alone let 8 heads run 4 heads' weights)
  h8="trained as a .small. with heads 4; this model.so has heads 8"
  expect 1 "$h8" "eval, 8 heads on 4 heads' checkpoint" -- "$run" eval "$models/small_h8.so" --ckpt "$trained"
  expect 1 "$h8" "sample, the same" -- "$run" sample "$models/small_h8.so" --ckpt "$trained" --length 1
  expect 1 "$h8" "export, the same" -- "$run" export "$models/small_h8.so" --ckpt "$trained" -o "$tmp/h8.gguf"
  check "  nothing exported" -- test ! -e "$tmp/h8.gguf"
  cp -r "$trained" "$tmp/h8resume"
  expect 1 "$h8" "resume, the same" -- "$run" train "$models/small_h8.so" --ckpt "$tmp/h8resume" --resume --steps 400
  check "  the checkpoint unchanged" -- cmp -s "$good" "$tmp/h8resume/checkpoint.safetensors"
  # a real setting told in its shortest digits (1e-05, not 1.0000000000000001e-05)
  sed 's/^model small {/model small {\n    norm_eps = 1e-6;/' "$here/models.tlm" > "$tmp/eps6.tlm"
  "$tlmc" "$tmp/eps6.tlm" --model small -o "$tmp/eps6.so" > /dev/null
  expect 1 "trained as a .small. with norm_eps 1e-05; this model.so has norm_eps 1e-06 (was the model recompiled?" \
    "another norm_eps: both in their shortest digits" -- "$run" eval "$tmp/eps6.so" --ckpt "$trained"
  # The checksum as docs/runtime.md defines it, computed again in numpy; a
  # checkpoint with the checksum written before 2026-12-06 still loads
  check "the checksum: the definition's value (numpy)" -- \
    test "$(ckpt checksum "$good")" = "$(ckpt meta "$good" checksum)"
  ckpt legacy "$good" "$tmp/legacy.safetensors"
  expect 0 "" "a checkpoint with the old checksum (FNV-1a) loads" -- \
    "$run" sample "$s" --ckpt "$tmp/legacy.safetensors" --length 1
  "$py" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-5] ^= 1; open(sys.argv[2], 'wb').write(b)" \
    "$tmp/legacy.safetensors" "$tmp/legacy_flip.safetensors"
  expect 1 "checksum mismatch: the file is damaged" "... and a flipped bit in it does not" -- \
    "$run" sample "$s" --ckpt "$tmp/legacy_flip.safetensors" --length 1
  # The checkpoint's ABI: 6 (before the bf16 activation gradient, a kernel
  # change) is read by today's 7; 5 and what is not a version are refused
  mkdir -p "$tmp/abi"
  for v in 6 7; do
    ckpt retag "$good" "$tmp/abi/checkpoint.safetensors" abi_version "$v"
    expect 0 "" "a checkpoint of ABI $v loads" -- "$run" sample "$s" --ckpt "$tmp/abi" --length 1
  done
  for v in 5 8 7x "" 99999999999999999999; do
    ckpt retag "$good" "$tmp/abi/checkpoint.safetensors" abi_version "$v"
    expect 1 "written with ABI version $v; this tlm-run reads checkpoints of versions 6 to 7" \
      "a checkpoint of ABI '$v' is refused" -- "$run" eval "$s" --ckpt "$tmp/abi" --max-tokens 64 --batch 1
  done
  # A step in the metadata that is not a whole number (an edited file:
  # the checksum covers the tensors) is shown as unknown, never as a
  # number atoll made of it, and --dry-run's resume refuses it
  expect 0 "checkpoint .* (step [1-9][0-9]*), windows" "eval shows a checkpoint's step" -- \
    "$run" eval "$s" --ckpt "$good" --max-tokens 64 --batch 1
  mkdir -p "$tmp/badstep"
  for v in 12abc -3 99999999999999999999 ""; do
    ckpt retag "$good" "$tmp/badstep/checkpoint.safetensors" step "$v"
    expect 0 "checkpoint .* (step unknown), windows" "eval shows step '$v' as unknown" -- \
      "$run" eval "$s" --ckpt "$tmp/badstep" --max-tokens 64 --batch 1
    expect 1 "no valid step in the metadata" "train --resume --dry-run refuses step '$v'" -- \
      "$run" train "$s" --ckpt "$tmp/badstep" --resume --steps 400 --dry-run
  done
  # The run state of a checkpoint edited with its checksum made again: a
  # token count past 2^62 (near 2^63 it overflowed the count, and the run
  # wrote a checkpoint this check refuses), a metadata step or token count
  # other than the tensor's, and a count at 2^62 that the steps left would
  # pass: refused by --resume before its first step, the checkpoint kept
  mkdir -p "$tmp/state"
  big=9223372036854775000 edge=4611686018427387904
  for c in "train.tokens_seen $big tokens_seen $big|train.tokens_seen is $big, past the 2^62 tokens" \
           "train.step 1099511627777 step 1099511627777|train.step is 1099511627777, past the 1099511627776 steps" \
           "step 7|the metadata's step (7) is not train.step (300)" \
           "train.tokens_seen $edge|the metadata's tokens_seen (307200) is not train.tokens_seen ($edge)" \
           "train.tokens_seen $edge tokens_seen $edge|its $edge tokens trained on and the 100 steps left of 1024 tokens each would pass 2^62 tokens"; do
    # shellcheck disable=SC2086
    ckpt rewrite "$good" "$tmp/state/checkpoint.safetensors" ${c%%|*}
    cp "$tmp/state/checkpoint.safetensors" "$tmp/before"
    expect 1 "^tlm-run train: $tmp/state/checkpoint.safetensors: .*${c#*|}" "resume with ${c%%|*}: refused" -- \
      "$run" train "$s" --ckpt "$tmp/state" --resume --steps 400
    check "... no step trained, the checkpoint kept" -- \
      bash -c "! grep -q '^step' '$tmp/out' && cmp -s '$tmp/before' '$tmp/state/checkpoint.safetensors'"
  done
  # a setting out of range in the checkpoint's record (an edited or
  # damaged file, not the command line): named as the checkpoint's, exit 1
  settings=$("$py" -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
s = json.loads(json.loads(f.read(n))["__metadata__"]["settings"]); s["eps"] = 1e-50; print(json.dumps(s))' "$good")
  ckpt rewrite "$good" "$tmp/state/checkpoint.safetensors" settings "$settings"
  expect 1 "^tlm-run train: the checkpoint's eps 1e-50 is 0 as a float32, which the trainer computes in (the least is 1e-45): is the file damaged?$" \
    "resume of a checkpoint whose eps is 0 as a float: the checkpoint's, exit 1" -- \
    "$run" train "$s" --ckpt "$tmp/state" --resume --steps 400
  expect 1 "^tlm-run train: --steps 1099511627776 of 8388608 tokens each would pass 2^62 tokens" \
    "a fresh run of 2^40 steps of 2^23 tokens: refused before its first step" -- \
    "$run" train "$s" --data "$austen/persuasion.txt" --ckpt "$tmp/huge" --threads 1 --steps 1099511627776 \
    --batch 131072 --accumulate 131072 --context 64 --eval-batches 1
  # Every damaged copy: exit 1 with one line, from eval, sample and resume.
  ckpt corrupt "$good" "$tmp/bad" > "$tmp/list"
  n=0 bad=0
  while read -r f; do
    n=$((n + 1))
    for cmd in "eval $s --ckpt $f --max-tokens 64 --batch 1" "sample $s --ckpt $f --length 1"; do
      # shellcheck disable=SC2086
      "$run" $cmd > "$tmp/out" 2> "$tmp/err"; rc=$?
      if [ $rc != 1 ] || [ "$(wc -l < "$tmp/err")" != 1 ]; then
        echo "FAIL: $(basename "$f"): tlm-run ${cmd%% *}: exit $rc"; head -3 "$tmp/err"; bad=1
      fi
    done
  done < "$tmp/list"
  [ $bad = 0 ] && echo "ok: $n damaged checkpoints (truncations, flipped bytes, garbage) rejected by eval and sample"
  [ $bad = 0 ] || fail=1
  mkdir -p "$tmp/resume"
  cp "$tmp/bad/flip_$(( $(stat -c %s "$good") - 1 )).safetensors" "$tmp/resume/checkpoint.safetensors"
  expect 1 "checksum mismatch" "resume from a checkpoint with its last byte flipped" -- \
    "$run" train "$s" --ckpt "$tmp/resume" --resume --steps 400
  expect 1 "not a tlm checkpoint" "a safetensors file of something else" -- \
    "$run" eval "$s" --ckpt "$tmp/bad/foreign.safetensors"
  # --ckpt naming a file that is not a checkpoint (the model itself, a
  # text, a foreign safetensors file): train refuses to write over it, even
  # with --overwrite, and leaves it as it was.
  cp "$s" "$tmp/model_copy.so"
  printf 'notes\n' > "$tmp/notes.txt"
  for f in "$tmp/model_copy.so" "$tmp/notes.txt" "$tmp/bad/foreign.safetensors"; do
    cp "$f" "$tmp/before"
    for flag in "" --overwrite; do
      # shellcheck disable=SC2086
      expect 1 "is a file that holds no checkpoint" "train --ckpt $(basename "$f") $flag" -- \
        "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$f" $flag
    done
    check "... $(basename "$f") is untouched" -- cmp "$f" "$tmp/before"
  done
  cp "$good" "$tmp/named.safetensors"
  expect 0 "done: 1 step," "train --ckpt FILE --overwrite over a checkpoint still starts afresh" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$tmp/named.safetensors" --overwrite
  ;;

nan)
  # --lr 1e30: the first update throws the weights to ~1e30, the next loss
  # is NaN. The trainer does not apply that step; tlm-run stops with exit 1
  # and the step-1 checkpoint stays valid.
  expect 1 "step 2: the loss is NaN.*ckpt/checkpoint.safetensors (step 1), is intact" "--lr 1e30 stops on NaN" -- \
    "$run" train "$models/small.so" "${quick[@]}" --steps 20 --lr 1e30 --ckpt "$tmp/ckpt" --ckpt-every 1 \
    --log "$tmp/log.jsonl"
  check "the last checkpoint is step 1" -- test "$(ckpt meta "$tmp/ckpt/checkpoint.safetensors" step)" = 1
  # it loads: eval reads it whole (step 1), and then refuses its NaN loss,
  # the weights that step 1 threw to ~1e30
  expect 1 "the loss is NaN: did the run of $tmp/ckpt/checkpoint.safetensors diverge?" \
    "... and it loads (eval: read, its loss NaN)" -- \
    "$run" eval "$models/small.so" --ckpt "$tmp/ckpt" --max-tokens 64 --batch 1
  check "... eval read it: step 1" -- grep -q "(step 1)" "$tmp/out"
  check "the log has no record past step 1" -- diff <(ckpt log_steps "$tmp/log.jsonl") <(printf '1\n0\n')
  expect 1 "step 2: the loss is NaN" "resuming it fails the same way" -- \
    "$run" train "$models/small.so" --ckpt "$tmp/ckpt" --resume
  check "... blaming the learning rate or the weight decay" -- \
    grep -q "the loss is NaN (is the learning rate, or the weight decay, too high?), stopping" "$tmp/err"
  # A model whose initial weights give NaN (a Titans memory's inner_lr far
  # past stability, within its range): not the learning rate's doing, and
  # no NaN printed as a validation result
  cat > "$tmp/unstable.tlm" <<'TLM'
model unstable {
    vocab = 256; context = 64; d_model = 32; layers = 2; heads = 2; d_ff = 64;
    mixer = titans; chunk = 1; inner_lr = 1e6;
}
TLM
  "$tlmc" "$tmp/unstable.tlm" -o "$tmp/unstable.so" > /dev/null
  one=(--context 64 --batch 2 --threads 1 --eval-batches 1)
  expect 1 "step 0: the validation loss is NaN before any update (the initial weights): the model's settings make it diverge, not the learning rate (a Titans inner_lr too large?); no checkpoint was written" \
    "NaN at step 0's validation: refused, blaming the model" -- \
    "$run" train "$tmp/unstable.so" "${one[@]}" --steps 3 --ckpt "$tmp/unstable"
  check "... no val line with nan" -- bash -c "! grep -q 'val loss nan' '$tmp/out'"
  expect 1 "step 1: the loss is NaN before any update (the initial weights): the model's settings make it diverge, not the learning rate" \
    "NaN at step 1 (no validation): the same cause" -- \
    "$run" train "$tmp/unstable.so" "${one[@]}" --steps 3 --data "$austen/emma.txt" --ckpt "$tmp/unstable"
  expect 0 "done: 0 steps" "a step-0 checkpoint of it (no validation)" -- \
    "$run" train "$tmp/unstable.so" "${one[@]}" --steps 0 --data "$austen/emma.txt" --ckpt "$tmp/unstable0"
  expect 1 "the loss is NaN: .*unstable0/checkpoint.safetensors is untrained (step 0): the model's settings make its initial weights diverge (a Titans inner_lr too large?)$" \
    "eval of the untrained checkpoint: no 'did the run diverge?'" -- \
    "$run" eval "$tmp/unstable.so" --ckpt "$tmp/unstable0" --max-tokens 64 --batch 1 --threads 1
  expect 1 "not finite (NaN or Inf): .*unstable0/checkpoint.safetensors is untrained (step 0)" \
    "... nor in sample (the NaN comes some tokens in)" -- "$run" sample "$tmp/unstable.so" --ckpt "$tmp/unstable0" --prompt ab --length 60 --temperature 0 --threads 1
  ;;

eval)
  s=$models/small.so
  p=$austen/persuasion.txt
  expect 0 "persuasion.txt .* 4,096 " "eval 64 windows of Persuasion" -- \
    "$run" eval "$s" --ckpt "$trained" --data "$p" --max-tokens 4096 --context 64
  cp "$tmp/out" "$tmp/a"
  sed 's/^/    /' "$tmp/a"
  read -r loss ppl bpb <<< "$(awk '/persuasion/ {print $3, $4, $5}' "$tmp/a")"
  check "ppl = exp(loss), bits/byte = loss / ln 2 (loss $loss, ppl $ppl, bpb $bpb)" -- \
    "$py" -c "import math,sys; l,p,b=map(float,sys.argv[1:]); sys.exit(not (abs(math.exp(l)-p) < 1e-3*p+2e-3 and abs(l/math.log(2)-b) < 2e-4))" \
    "$loss" "$ppl" "$bpb"
  check "the speed on a line of its own" -- grep -qE '^4,096 tokens in [0-9.]+ s: [0-9]+ tokens/s$' "$tmp/a"
  expect 0 "" "the same again" -- "$run" eval "$s" --ckpt "$trained" --data "$p" --max-tokens 4096 --context 64
  check "deterministic: identical output (but the speed)" -- \
    cmp <(grep -v ' tokens/s$' "$tmp/a") <(grep -v ' tokens/s$' "$tmp/out")
  expect 0 "" "one window at a time (--batch 1)" -- \
    "$run" eval "$s" --ckpt "$trained" --data "$p" --max-tokens 4096 --context 64 --batch 1
  loss1=$(awk '/persuasion/ {print $3}' "$tmp/out")
  check "the batch size does not change the loss ($loss vs $loss1)" -- \
    "$py" -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 2e-4)" "$loss" "$loss1"
  expect 0 "kjv.txt" "two texts, two rows (Persuasion by default and the KJV)" -- \
    "$run" eval "$s" --ckpt "$trained/checkpoint.safetensors" --data "$p" --data "$root/data/kjv/kjv.txt" --max-tokens 2048
  check "the default text is Persuasion" -- bash -c "'$run' eval '$s' --ckpt '$trained' --max-tokens 64 | grep -q persuasion.txt"
  expect 0 " 64 " "--max-tokens below a window: one window" -- \
    "$run" eval "$s" --ckpt "$trained" --max-tokens 10 --context 64
  # The checkpoint is a Llama state dict: PyTorch gets the same loss. Also
  # with a tied head, which the checkpoint does not store twice.
  expect 0 "done: 30 steps" "train a model with a tied head" -- \
    "$run" train "$models/small_tied.so" "${quick[@]}" --steps 30 --ckpt "$tmp/tied"
  check "no lm_head.weight in the tied model's checkpoint" -- \
    test "$(ckpt count "$tmp/tied/checkpoint.safetensors" lm_head.)" = 0
  expect 0 "persuasion" "eval the tied model" -- \
    "$run" eval "$models/small_tied.so" --ckpt "$tmp/tied" --data "$p" --max-tokens 2048 --context 64
  tied_loss=$(awk '/persuasion/ {print $3}' "$tmp/out")
  # it trained on windows of 32: at 64, the untrained positions are noted
  check "... windows of 64 past its training's 32: a note says so" -- grep -qx "tlm-run eval: note: .*tied/checkpoint.safetensors was trained on windows of 32 tokens; these are 64, and the positions past 32 were never trained" "$tmp/err"
  expect 0 "persuasion" "... at --context 32: no note" -- \
    "$run" eval "$models/small_tied.so" --ckpt "$tmp/tied" --data "$p" --max-tokens 256 --context 32
  check "... no note" -- test ! -s "$tmp/err"
  expect 0 "rho" "... probe at 64: the same note" -- \
    "$run" probe "$models/small_tied.so" --ckpt "$tmp/tied" --data "$p" --windows 1 --batch 1 --context 64
  check "... the same note" -- grep -q "^tlm-run probe: note: .* windows of 32 tokens; these are 64," "$tmp/err"
  expect 0 "" "... sample 31 tokens from a prompt of 2 (the last never fed back: windows of 32): no note" -- \
    "$run" sample "$models/small_tied.so" --ckpt "$tmp/tied" --prompt "It" --length 31
  check "... no note" -- test ! -s "$tmp/err"
  expect 0 "" "... sample 32 tokens from a prompt of 2: a note for windows of 33" -- \
    "$run" sample "$models/small_tied.so" --ckpt "$tmp/tied" --prompt "It" --length 32
  check "... a note: these are 33" -- grep -q "^tlm-run sample: note: .* windows of 32 tokens; these are 33," "$tmp/err"
  for c in "$trained/checkpoint.safetensors 64 $loss" "$tmp/tied/checkpoint.safetensors 32 $tied_loss"; do
    set -- $c
    "$py" "$here/check_llama.py" "$1" "$p" 64 "$2" "$3" > "$tmp/llama" 2>&1; rc=$?
    if [ $rc = 0 ]; then echo "ok: PyTorch reference, $(basename "$(dirname "$1")")"; sed 's/^/    /' "$tmp/llama"
    else no_reference $rc "$tmp/llama" "loss against PyTorch's, $1"; fi
  done
  ;;

probe)
  # rho per layer (method.md's probe) on the trained model: one row per
  # layer, reproducible, and equal to PyTorch's on the same windows.
  s=$models/small.so
  p=$austen/persuasion.txt
  expect 0 "rho" "probe the trained model" -- \
    "$run" probe "$s" --ckpt "$trained" --data "$p" --windows 6 --batch 4 --context 64 --threads 1
  cp "$tmp/out" "$tmp/probe"
  sed 's/^/    /' "$tmp/probe"
  check "one row per layer" -- test "$(grep -cE '^ +[0-9]+ +[0-9]+ +-?[0-9.]+$' "$tmp/probe")" = 2
  expect 0 "rho" "probe again, other batching" -- \
    "$run" probe "$s" --ckpt "$trained" --data "$p" --windows 6 --batch 5 --context 64 --threads 2
  check "the same rho" -- diff <(grep -E '^ +[0-9]' "$tmp/probe") <(grep -E '^ +[0-9]' "$tmp/out")
  "$py" "$here/check_probe.py" "$trained/checkpoint.safetensors" "$p" 64 6 "$tmp/probe" > "$tmp/torch" 2>&1; rc=$?
  if [ $rc = 0 ]; then echo "ok: PyTorch gives the same rho"; sed 's/^/    /' "$tmp/torch"
  else no_reference $rc "$tmp/torch" "rho against PyTorch's"; fi
  expect 1 "no checkpoint" "probe without a checkpoint" -- "$run" probe "$s" --ckpt "$tmp/none"
  head -c 200 "$p" > "$tmp/short.txt" # 3 windows of 64 tokens (each needs one token more)
  expect 0 '"windows":3,"context":64,' "probe --json of a short text: the windows it averaged over" -- \
    "$run" probe "$s" --ckpt "$trained" --data "$tmp/short.txt" --windows 100 --context 64 --threads 1 --json
  expect 2 "^tlm-run probe: --data given twice: probe reads one text (eval scores several)" \
    "probe --data twice: refused, not the first dropped" -- \
    "$run" probe "$s" --ckpt "$trained" --data "$p" --data "$tmp/short.txt"
  # checked before it sizes the batch: a usage error, not "out of memory"
  expect 2 "\-\-context 2147483647 is longer than the model's context (64)" "probe --context 2^31 - 1" -- \
    "$run" probe "$s" --ckpt "$trained" --data "$p" --context 2147483647
  expect 2 "unknown option" "probe with a bad flag" -- "$run" probe "$s" --frobnicate
  ;;

sample)
  s=$models/small.so
  prompt="It is a truth universally acknowledged"
  sample() { "$run" sample "$s" --ckpt "$trained" --prompt "$prompt" --length 80 "$@"; }
  expect 0 "^$prompt" "sample: the prompt, then text" -- sample --seed 7
  cp "$tmp/out" "$tmp/a"
  sed 's/^/    /' "$tmp/a"
  check "prompt + 80 bytes + a newline" -- test "$(wc -c < "$tmp/a")" -ge $(( ${#prompt} + 81 ))
  expect 0 "" "the same seed" -- sample --seed 7
  check "the same seed, the same text" -- cmp "$tmp/a" "$tmp/out"
  # sleeping OpenMP threads decode with OpenBLAS on one thread (model.c):
  # the same bits, so the same sampled text, as spinning ones and as one
  for t in "OMP_WAIT_POLICY=passive 2" "OMP_WAIT_POLICY=active 2" "OMP_WAIT_POLICY=passive 1"; do
    expect 0 "" "${t% *}, --threads ${t#* }" -- env "${t% *}" "$run" sample "$s" --ckpt "$trained" --prompt "$prompt" \
      --length 80 --seed 7 --threads "${t#* }"
    cp "$tmp/out" "$tmp/threads.${t// /_}"
  done
  check "... the same text all three ways" -- bash -c 'cmp "$0" "$1" && cmp "$0" "$2"' \
    "$tmp/threads.OMP_WAIT_POLICY=passive_2" "$tmp/threads.OMP_WAIT_POLICY=active_2" "$tmp/threads.OMP_WAIT_POLICY=passive_1"
  expect 0 "" "another seed" -- sample --seed 8
  check "another seed, other text" -- bash -c "! cmp -s '$tmp/a' '$tmp/out'"
  expect 0 "" "greedy" -- sample --temperature 0 --seed 1
  cp "$tmp/out" "$tmp/g"
  expect 0 "" "greedy, another seed" -- sample --temperature 0 --seed 2
  check "greedy ignores the seed" -- cmp "$tmp/g" "$tmp/out"
  expect 0 "" "top-k 1 is greedy" -- sample --top-k 1 --temperature 1
  check "top-k 1 == greedy" -- cmp "$tmp/g" "$tmp/out"
  # --prompt-file: the same prompt from a file, and from standard input,
  # gives the same text; its bytes may be any (a NUL), printed as they are
  printf %s "$prompt" > "$tmp/prompt.txt"
  expect 0 "^$prompt" "--prompt-file, greedy" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt-file "$tmp/prompt.txt" --length 80 --temperature 0
  check "--prompt-file == --prompt" -- cmp "$tmp/g" "$tmp/out"
  expect 0 "^$prompt" "--prompt-file - (standard input), greedy" -- bash -c \
    '"$0" sample "$1" --ckpt "$2" --prompt-file - --length 80 --temperature 0 < "$3"' "$run" "$s" "$trained" "$tmp/prompt.txt"
  check "--prompt-file - == --prompt" -- cmp "$tmp/g" "$tmp/out"
  printf 'a\0b' > "$tmp/nul.txt"
  expect 0 "" "--prompt-file with a NUL byte" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt-file "$tmp/nul.txt" --length 4 --temperature 0
  check "... printed whole, then 4 bytes and a newline" -- \
    bash -c "head -c 3 '$tmp/out' | cmp -s - '$tmp/nul.txt' && [ \$(wc -c < '$tmp/out') -ge 8 ]"
  expect 2 "\-\-prompt and \-\-prompt-file: give one of them" "--prompt with --prompt-file" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt x --prompt-file "$tmp/nul.txt"
  expect 1 "\-\-prompt-file $tmp/missing.txt: cannot open" "--prompt-file missing" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt-file "$tmp/missing.txt"
  expect 1 "is a directory, not a regular file" "--prompt-file a folder" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt-file "$tmp"
  # the KV cache against recomputing the window: within the context (38 +
  # 26 bytes of 64) greedy text is the same
  expect 0 "" "greedy with the KV cache" -- sample --temperature 0 --length 26
  cp "$tmp/out" "$tmp/kv"
  expect 0 "" "greedy recomputing the window (--no-cache)" -- sample --temperature 0 --length 26 --no-cache
  check "within the context: the same text with and without the cache" -- cmp "$tmp/kv" "$tmp/out"
  check "... and it is not empty" -- test "$(wc -c < "$tmp/kv")" -ge $(( ${#prompt} + 27 ))
  expect 0 "" "beyond the context without the cache (a window sliding byte by byte)" -- \
    sample --temperature 0 --length 200 --no-cache
  long=$(printf 'Emma Woodhouse, handsome, clever, and rich, %.0s' 1 2 3 4 5)
  expect 0 "" "a prompt longer than the context (the window slides)" -- \
    "$run" sample "$s" --ckpt "$trained" --prompt "$long" --length 100
  check "... printed whole, then 100 bytes" -- bash -c "head -c ${#long} '$tmp/out' | cmp -s - <(printf %s '$long')"
  expect 0 "" "--length 0: the prompt alone" -- "$run" sample "$s" --ckpt "$trained" --prompt "abc" --length 0
  check "... 'abc' and a newline" -- cmp "$tmp/out" <(printf 'abc\n')
  expect 0 "" "no prompt" -- "$run" sample "$s" --ckpt "$trained" --length 20
  # no prompt starts after a newline (byte 10): a model of 2 tokens cannot
  # read it, which is said as the start's, not as a prompt the user gave
  printf 'model v2 { vocab = 2; context = 4; d_model = 2; layers = 1; heads = 1; d_ff = 1;\n  train { batch = 1; steps = 1; eval_batches = 1; } }\n' > "$tmp/v2.tlm"
  printf '\0\1\1\0\1\0\0\1\1\1' > "$tmp/bits.txt"
  "$tlmc" "$tmp/v2.tlm" -o "$tmp/v2.so" && "$run" train "$tmp/v2.so" --data "$tmp/bits.txt" --ckpt "$tmp/v2" --threads 1 > /dev/null
  expect 1 "with no --prompt, sampling starts after a newline (byte 10), outside the model's 2 tokens" \
    "sample without a prompt on a model of 2 tokens" -- "$run" sample "$tmp/v2.so" --ckpt "$tmp/v2" --length 3
  expect 1 "the prompt holds byte 97, outside the model's 2 tokens" "  and with one it cannot read" -- \
    "$run" sample "$tmp/v2.so" --ckpt "$tmp/v2" --length 3 --prompt a
  # A model trained on one repeated sentence says it back, greedily.
  fox="the quick brown fox jumps over the lazy dog. "
  for _ in $(seq 200); do printf %s "$fox"; done > "$tmp/fox.txt"
  expect 0 "done: 100 steps" "train on a repeated sentence" -- \
    "$run" train "$s" --threads 1 --steps 100 --warmup 10 --data "$tmp/fox.txt" --ckpt "$tmp/fox"
  expect 0 "" "greedy sample of it" -- \
    "$run" sample "$s" --ckpt "$tmp/fox" --prompt "the quick" --temperature 0 --length 126
  sed 's/^/    /' "$tmp/out"
  check "greedy sampling reproduces the sentence" -- \
    cmp "$tmp/out" <(printf '%s%s%s\n' "$fox" "$fox" "$fox" | head -c 135; echo)
  # Standard output gone: sample stops at the first failed write, with the
  # reason, instead of generating its --length to nowhere
  expect 1 "^tlm-run sample: cannot write to standard output: No space left on device$" \
    "sample --length 2147483647 > /dev/full: exit 1 at once" -- \
    timeout 20 bash -c "exec '$run' sample '$s' --ckpt '$trained' --length 2147483647 > /dev/full"
  # A diverged checkpoint (one step at lr 1e30: weights ~1e30, logits NaN):
  # sample refuses it, and eval's downstream accuracies are not numbers
  # (NaN log-likelihoods made the first choice win every item). Made
  # without validation (--data, no --val): the run's final validation
  # would stop it, NaN, before its checkpoint
  expect 1 "step 1: the validation loss is NaN (is the learning rate, or the weight decay, too high?); no checkpoint was written" "with validation, the run stops there" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --lr 1e30 --warmup 0 --ckpt "$tmp/diverged"
  expect 0 "done: 1 step" "a diverged checkpoint" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --lr 1e30 --warmup 0 --ckpt "$tmp/diverged" --data "$austen/emma.txt"
  expect 1 "the model's logits are not finite (NaN or Inf): did the run of .*diverged/checkpoint.safetensors diverge?" \
    "sample it: exit 1" -- "$run" sample "$s" --ckpt "$tmp/diverged" --prompt abc --length 10 --temperature 0
  check "  the prompt, no drawn bytes" -- cmp "$tmp/out" <(printf 'abc\n')
  printf '%s\n' '{"context": "It is a truth universally", "choices": [" acknowledged", " known", " a"], "label": 1}' \
    '{"context": "Anne", "choices": [" Elliot", " was"], "label": 1}' > "$tmp/choices.jsonl"
  printf '%s\n' '{"text": "It is a truth universally acknowledged"}' > "$tmp/cloze.jsonl"
  expect 0 '"accuracy":null,"accuracy_norm":null' "eval --choices on it: accuracy null" -- \
    "$run" eval "$s" --ckpt "$tmp/diverged" --choices "$tmp/choices.jsonl" --cloze "$tmp/cloze.jsonl" --json
  check "  cloze's accuracy and log-likelihood null too" -- grep -q '"kind":"cloze".*"accuracy":null,"target_loglik":null' "$tmp/out"
  # a text's loss on it is NaN: refused as sample refuses it, with no row
  # or JSON line saying "nan" or null under exit 0
  expect 1 "^tlm-run eval: .*persuasion.txt: the loss is NaN: did the run of .*diverged/checkpoint.safetensors diverge?$" \
    "eval a text on it: exit 1" -- "$run" eval "$s" --ckpt "$tmp/diverged" --max-tokens 64 --context 32
  check "  no row for the text" -- bash -c "! grep -q 'persuasion.txt ' '$tmp/out'"
  expect 1 "the loss is NaN: did the run of" "eval --json: exit 1" -- \
    "$run" eval "$s" --ckpt "$tmp/diverged" --max-tokens 64 --context 32 --json
  check "  no JSON line" -- test ! -s "$tmp/out"
  ;;

sizes)
  # Sizes the runtime cannot represent or this machine cannot hold: exit 1
  # with one line naming the numbers and what to lower, before anything is
  # allocated (never a crash or the OOM killer). A tiny model with a 2^20
  # context, and a text longer than one window of it.
  cat > "$tmp/long.tlm" <<'EOF'
model long {
    vocab = 256; context = 1048576; d_model = 32; layers = 1; heads = 2; d_ff = 64;
    train { batch = 1; steps = 1; }
}
model long_titans : long { mixer = titans; chunk = 16; }
model long_deep : long { layers = 256; }
EOF
  for m in long long_titans long_deep; do
    expect 0 "" "tlmc --model $m (context 2^20)" -- "$tlmc" "$tmp/long.tlm" --model $m -o "$tmp/$m.so"
  done
  cat "$austen/emma.txt" "$austen/mansfield_park.txt" | head -c 1100000 > "$tmp/long.txt"
  big=(--batch 1048576 --context 1048576)
  for m in long long_titans; do
    expect 1 "batch 1048576 × 1048576 tokens = 1,099,511,627,776 tokens at once, more than the 2,147,483,647 .*lower the batch or the context" \
      "$m: train --batch 2^20 --context 2^20" -- \
      "$run" train "$tmp/$m.so" "${big[@]}" --steps 1 --threads 1 --data "$tmp/long.txt" --ckpt "$tmp/c"
    expect 1 "1,099,511,627,776 tokens at once" "$m: eval --batch 2^20 --context 2^20" -- \
      "$run" eval "$tmp/$m.so" "${big[@]}" --ckpt "$tmp/none"
  done
  expect 1 "batch 1048576 × 1024 tokens is too large: logits has 256 values per token, 274,877,906,944 in all" \
    "eval --batch 2^20 --context 1024: N × vocab past 2^31" -- \
    "$run" eval "$tmp/long.so" --batch 1048576 --context 1024 --ckpt "$tmp/none"
  # 4 × 2^20 tokens fit the ops, but 256 layers' activations need 1.5 TiB
  # (attention keeps a log-sum-exp per token and head, so the one-layer
  # model needs only 11.7 GiB, which a machine may have): refused by what
  # the process may take.
  expect 1 "out of memory: batch 4 × 1048576 tokens needs [0-9.]* GiB, [0-9.]* GiB available (\(MemAvailable\|cgroup\|RLIMIT\)" \
    "train --batch 4 --context 2^20: more than this machine has" -- \
    env -u TLM_MEMORY_LIMIT "$run" train "$tmp/long_deep.so" --batch 4 --context 1048576 --steps 1 --threads 1 --data "$tmp/long.txt" --ckpt "$tmp/c"
  # A cap in TLM_MEMORY_LIMIT (for tests and users who want one).
  for cmd in "train --steps 1 --threads 1 --data $tmp/long.txt --ckpt $tmp/c" "eval --ckpt $tmp/none"; do
    # shellcheck disable=SC2086
    expect 1 "out of memory: batch 4 × 1048576 tokens needs [0-9.]* GiB, 64.0 MiB available (TLM_MEMORY_LIMIT); lower the batch or the context" \
      "TLM_MEMORY_LIMIT=64M: ${cmd%% *} --batch 4 --context 2^20 (titans)" -- \
      env TLM_MEMORY_LIMIT=64M "$run" $cmd "$tmp/long_titans.so" --batch 4 --context 1048576
  done
  expect 1 "TLM_MEMORY_LIMIT=lots is not a size" "TLM_MEMORY_LIMIT=lots" -- \
    env TLM_MEMORY_LIMIT=lots "$run" eval "$tmp/long.so" --context 64 --ckpt "$tmp/none"
  expect 0 "done: 2 steps" "a run that fits under TLM_MEMORY_LIMIT=64M" -- \
    env TLM_MEMORY_LIMIT=64M "$run" train "$tmp/long.so" --batch 2 --context 64 --steps 2 --threads 1 \
    --data "$tmp/long.txt" --eval-batches 1 --ckpt "$tmp/fits"
  # The optimizer's state counts too: this model's parameters and gradients
  # (2 × 54 MiB) fit under a 200 MiB cap, with AdamW's two moments they do not.
  cat > "$tmp/wide.tlm" <<'EOF'
model wide {
    vocab = 256; context = 16; d_model = 512; layers = 4; heads = 8; d_ff = 1536;
    train { batch = 1; steps = 1; }
}
EOF
  expect 0 "" "tlmc wide" -- "$tlmc" "$tmp/wide.tlm" -o "$tmp/wide.so"
  expect 1 "out of memory: batch 1 × 16 tokens needs [0-9.]* MiB, 200.0 MiB available (TLM_MEMORY_LIMIT); the parameters, gradients and optimizer state alone need [0-9.]* MiB" \
    "TLM_MEMORY_LIMIT=200M: AdamW's moments do not fit" -- \
    env TLM_MEMORY_LIMIT=200M "$run" train "$tmp/wide.so" --steps 1 --threads 1 --data "$tmp/long.txt" --ckpt "$tmp/c"
  expect 0 "" "TLM_MEMORY_LIMIT=200M: train with SGD (one moment) fits" -- \
    env TLM_MEMORY_LIMIT=200M "$run" train "$tmp/wide.so" --optimizer sgd --steps 1 --threads 1 \
    --data "$tmp/long.txt" --eval-batches 1 --ckpt "$tmp/wide_sgd"
  check "no checkpoint from the refused runs" -- test ! -e "$tmp/c"
  ;;

gpu_check)
  # scripts/gpu_prepare.sh bundles this build; scripts/gpu_check.sh on the
  # bundle exits 77 with a SKIPPED line where there is no GPU (never 0), and
  # with the test switch runs its checks on the emulated device, so that the
  # script itself is checked without a GPU.
  build=$(cd "$(dirname "$run")/.." && pwd)
  expect 0 "gpu_prepare: .* holds" "gpu_prepare.sh bundles the build" -- "$root/scripts/gpu_prepare.sh" --no-build "$build" "$tmp/bundle"
  # the paper presets only a GPU's run of the script reaches (its 440M steps,
  # named outside comments) are in the bundle and load, with the settings
  # PyTorch's peer reads
  presets=$(grep -v '^ *#' "$root/scripts/gpu_check.sh" | grep -oE '\b[a-z0-9_]+_440m\b' | sort -u)
  check "gpu_check.sh's GPU steps name the 440M presets" -- test -n "$presets"
  for m in $presets; do
    expect 0 "model $m:" "the bundle holds $m.so for gpu_check.sh's GPU steps" -- "$run" info "$tmp/bundle/models/$m.so"
  done
  check "the bundle holds transformer_440m.json for PyTorch's peer" -- test -s "$tmp/bundle/models/transformer_440m.json"
  expect 0 "^The project's GPU check" "gpu_check.sh --help: its header" -- "$root/scripts/gpu_check.sh" --help
  expect 2 "unknown option" "gpu_check.sh -x" -- "$root/scripts/gpu_check.sh" -x
  env -u TLM_TEST_DEVICE "$root/scripts/gpu_check.sh" "$tmp/bundle" > "$tmp/gpu" 2>&1; rc=$?
  sed 's/^/    /' "$tmp/gpu"
  if ldconfig -p | grep -q 'libcuda\.so\.1 '; then
    check "gpu_check.sh on a GPU machine: exit 0" -- test $rc = 0
  elif [ $rc = 77 ] && grep -q '^gpu_check: SKIPPED' "$tmp/gpu"; then
    echo "ok: gpu_check.sh: no GPU here: exit 77 and a SKIPPED line, not 0"
  else
    echo "FAIL: gpu_check.sh without a GPU: exit $rc, wanted 77 with a SKIPPED line"; fail=1
  fi
  expect 0 "^gpu_check: all [1-9][0-9]* GPU checks passed (on the emulated device)" \
    "gpu_check.sh on the emulated device (TLM_TEST_DEVICE=emulated)" -- \
    env TLM_TEST_DEVICE=emulated GPU_CHECK_LOGS="$tmp/logs" "$root/scripts/gpu_check.sh" "$tmp/bundle"
  sed 's/^/    /' "$tmp/out"
  # each check's whole output kept, under a name any transfer keeps
  check "the logs: one file a check, plain names" -- \
    bash -c "test \"\$(ls '$tmp/logs' | grep -c '^[A-Za-z0-9._-]*\.out\$')\" -ge 25 && ! ls '$tmp/logs' | grep -q '[^A-Za-z0-9._-]'"
  check "... the second run of tiny took its kernels from the cache" -- \
    grep -q "^kernels: .*from the cache (nothing compiled)" "$tmp/logs/train_tiny__second_.out"
  check "... the profile's kernel table is whole in its file" -- \
    grep -q "^  device kernels and GEMMs" "$tmp/logs/profile_tiny__each_kernel.out"
  check "... the run with TLM_GPU_ATTENTION_ROWS=16 ran the 16-rows kernels (its banner, its kernel table)" -- \
    bash -c "grep -q '^attention: tensor cores, 16 rows a warp' '$tmp/logs/tiny_bf16__TLM_GPU_ATTENTION_ROWS_16.out' &&
             grep -q 'tlm_attention_tc_fwd_d64_rows16' '$tmp/logs/profile_tiny__TLM_GPU_ATTENTION_ROWS_16__each_kernel.out' &&
             ! grep -q 'tlm_attention_tc_fwd_d64_rows16' '$tmp/logs/profile_tiny__each_kernel.out'"
  # a check past its limit is a FAIL row, and the script goes on to the next
  one_line_statuses=none expect 1 "^gpu_check: FAILED" "gpu_check.sh with GPU_CHECK_LIMIT=1: checks time out" -- \
    env TLM_TEST_DEVICE=emulated GPU_CHECK_LIMIT=1 "$root/scripts/gpu_check.sh" "$tmp/bundle"
  check "... a FAIL row says so, and later checks still ran" -- \
    bash -c "grep -q '^gpu_check: models vs CPU .*FAIL *timed out after 1 s (GPU_CHECK_LIMIT)' '$tmp/out' && grep -q '^gpu_check: profile tiny_titans' '$tmp/out'"
  ;;

profile)
  # train --profile: the table, the log's record (model/profile.h), and the
  # same trajectory as without it; on the CPU and the emulated device
  s=$models/small.so
  expect 0 "done: 3 steps" "3 steps unprofiled" -- "$run" train "$s" "${quick[@]}" --steps 3 --ckpt "$tmp/plain"
  expect 0 "profile: 3 steps" "3 steps with --profile" -- \
    "$run" train "$s" "${quick[@]}" --steps 3 --ckpt "$tmp/prof" --log "$tmp/prof.jsonl" --profile
  sed 's/^/    /' "$tmp/out" | grep -A40 '^    profile:'
  check "the table: ops by time, GFLOP/s, busy share" -- \
    grep -qE '^  mlp_backward +6 +[0-9.]+ +[0-9.]+% +[0-9.]+ +[0-9.]+%$' "$tmp/out"
  check "the table then has the time outside the ops" -- grep -q '^  outside the ops ' "$tmp/out"
  check "... and the threads' busy and idle shares" -- \
    grep -qE '^  1 thread: busy [0-9.]+% of the step, idle or waiting [0-9.]+% \([0-9.]+ thread-ms a step\)$' "$tmp/out"
  check "the log's profile record" -- ckpt profile "$tmp/prof.jsonl" 3 mlp mlp_backward attention attention_backward qkv head loss
  check "... with the threads and their busy shares" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])['profile']
assert r['threads'] == 1 and r['waits_spin'] is False and all('busy' in o for o in r['ops']), r" "$tmp/prof.jsonl"
  check "profiling changes nothing in the run" -- \
    ckpt same "$tmp/plain/checkpoint.safetensors" "$tmp/prof/checkpoint.safetensors"
  # three threads: libgomp replaces threads after smaller teams (OpenBLAS's
  # small GEMMs), whose clocks the profile must note again
  expect 0 "profile: 3 steps" "--profile at 3 threads" -- env OMP_WAIT_POLICY=passive \
    "$run" train "$s" --threads 3 --context 32 --batch 8 --eval-batches 2 --steps 3 --ckpt "$tmp/prof3" \
    --log "$tmp/prof3.jsonl" --profile
  check "... every op's CPU time and busy share in range" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])['profile']
assert r['threads'] == 3 and 0 <= r['busy'] <= 1, r
bad = [o for o in r['ops'] if not (o['cpu_seconds'] >= 0 and 0 <= o['busy'] <= 1)]
assert not bad, bad" "$tmp/prof3.jsonl"
  expect 0 "profile: 2 steps" "--profile on the emulated device" -- \
    env TLM_TEST_DEVICE=emulated XDG_CACHE_HOME="$work/gpu-cache" "$run" train "$models/small_titans.so" \
    --threads 1 --context 16 --batch 2 --steps 2 --device cuda --precision fp32 --ckpt "$tmp/dev" \
    --log "$tmp/dev.jsonl" --profile
  check "the device's profile record" -- ckpt profile "$tmp/dev.jsonl" 2 titans titans_backward linear linear_dw
  check "... without busy shares (the host waits on the device)" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])['profile']
assert 'threads' not in r and not any('busy' in o for o in r['ops']), r" "$tmp/dev.jsonl"
  check "... and without --profile-kernels no device table (nothing waited for within the ops)" -- \
    bash -c '! grep -q "device kernels" "$0" && ! grep -q "\"kernels\"" "$1"' "$tmp/out" "$tmp/dev.jsonl"
  expect 2 "^tlm-run train: --profile-kernels times a device's kernels: it needs --device cuda" \
    "--profile-kernels on the CPU: a usage error" -- "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$tmp/k" --profile-kernels
  expect 2 "^tlm-run bench: --profile-kernels times a device's kernels: it needs --device cuda" \
    "bench --profile-kernels on the CPU: a usage error" -- "$run" bench "$s" --profile-kernels
  expect 0 "profile: 2 steps" "--profile-kernels on the emulated device" -- \
    env TLM_TEST_DEVICE=emulated XDG_CACHE_HOME="$work/gpu-cache" "$run" train "$models/small_titans.so" \
    --threads 1 --context 16 --batch 2 --steps 2 --device cuda --precision fp32 --ckpt "$tmp/dev" --overwrite \
    --log "$tmp/dev.jsonl" --profile-kernels
  check "the device table under the ops': GEMMs with GFLOP/s, the memory's kernels, the optimizer's" -- bash -c '
    grep -q "^  device kernels and GEMMs, each waited for" "$0" &&
    grep -qE "^  linear: gemm [NT][NT] f32->f32 +[0-9]+ +[0-9.]+ +[0-9.]+% +[0-9.]+$" "$0" &&
    grep -qE "^  titans(_backward)?: tlm_titans" "$0" && grep -q "^  outside the ops: tlm_adamw" "$0"' "$tmp/out"
  check "... and in the log: each op's kernels within the op's time, all within the steps'" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])['profile']
ks = r['kernels']
assert ks and all(set(k) == {'op', 'kernel', 'calls', 'seconds', 'share', 'gflops'} for k in ks), ks
ops = {o['op']: o['seconds'] for o in r['ops']}
for op in ops:
    inside = sum(k['seconds'] for k in ks if k['op'] == op)
    assert inside <= ops[op], (op, inside, ops[op])
assert all(k['op'] is None or k['op'] in ops for k in ks), ks
assert sum(k['seconds'] for k in ks) <= r['step_seconds'], r
assert any(k['gflops'] for k in ks if k['kernel'].startswith('gemm')), ks" "$tmp/dev.jsonl"
  ;;

outputs)
  # Output that cannot be written is said (exit 1), not lost with exit 0; a
  # closed standard output stops train with a checkpoint; a folder or FIFO
  # where the checkpoint goes is refused before training; text larger than
  # the memory left is refused unread; a linker killed by a signal is named.
  s=$models/small.so
  expect 1 "^tlm-run info: cannot write to standard output: No space left on device$" "info > /dev/full" -- \
    bash -c '"$0" info "$1" > /dev/full' "$run" "$s"
  expect 1 "^tlm-run bench: cannot write to standard output: No space left on device$" "bench --json > /dev/full" -- \
    bash -c '"$0" bench "$1" --threads 1 --batch 1 --context 8 --steps 1 --warmup 0 --profile 0 --json > /dev/full' \
    "$run" "$s"
  expect 1 "^tlmc: cannot write to standard output: No space left on device$" "tlmc --report=json > /dev/full" -- \
    bash -c '"$0" "$1" --model small --report=json > /dev/full' "$tlmc" "$here/models.tlm"
  bash -c '"$0" train "$1" --threads 1 --batch 1 --context 8 --steps 100000 --log-every 1 --eval-every 0 \
    --ckpt "$2" 2> "$3" | head -1 > /dev/null; echo "${PIPESTATUS[0]}" > "$4"' \
    "$run" "$s" "$tmp/piped" "$tmp/piped.err" "$tmp/piped.status"
  sed 's/^/    /' "$tmp/piped.err"
  check "train | head -1: exit 141 (SIGPIPE's)" -- test "$(cat "$tmp/piped.status")" = 141
  check "... saying why on stderr, and where the checkpoint is, in one line" -- grep -q \
    "^tlm-run train: cannot write to standard output (Broken pipe): stopped at step [0-9]* of 100000; checkpoint $tmp/piped/checkpoint.safetensors (continue with --resume)\$" \
    "$tmp/piped.err"
  check "... its only line" -- test "$(wc -l < "$tmp/piped.err")" = 1
  check "... with a checkpoint of the steps it trained" -- \
    test "$(ckpt meta "$tmp/piped/checkpoint.safetensors" step)" -ge 1
  bash -c '"$0" train "$1" --threads 1 --batch 1 --context 8 --steps 100000 --log-every 1 --eval-every 0 \
    --ckpt "$2" > /dev/full 2> "$3"; echo $? > "$4"' "$run" "$s" "$tmp/full" "$tmp/full.err" "$tmp/full.status"
  check "train > /dev/full: stops with exit 1" -- test "$(cat "$tmp/full.status")" = 1
  check "... saying why, and where the checkpoint is" -- grep -q \
    "^tlm-run train: cannot write to standard output (No space left on device): stopped at step [0-9]* of 100000; checkpoint $tmp/full/checkpoint.safetensors (continue with --resume)\$" \
    "$tmp/full.err"
  check "... in one line (it said so twice)" -- test "$(wc -l < "$tmp/full.err")" = 1
  check "... with a checkpoint" -- test "$(ckpt meta "$tmp/full/checkpoint.safetensors" step)" -ge 1
  mkdir -p "$tmp/dir/checkpoint.safetensors"
  expect 1 "checkpoint.safetensors is a directory: train writes its checkpoint under that name" \
    "a folder by the checkpoint's name: refused before training" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/dir" --overwrite
  expect 1 "checkpoint.safetensors is a directory" "... by --dry-run too" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/dir" --overwrite --dry-run
  mkdir "$tmp/fifo" && mkfifo "$tmp/fifo/checkpoint.safetensors"
  expect 1 "checkpoint.safetensors is a FIFO" "a FIFO by the checkpoint's name: refused" -- \
    timeout 60 "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/fifo"
  # a dangling symbolic link where the checkpoint goes: refused before the
  # first step, as the write would refuse it after every step before it
  ln -s nowhere "$tmp/dangling.safetensors"
  expect 1 "^tlm-run train: $tmp/dangling.safetensors is a symbolic link to a file that does not exist" \
    "--ckpt a dangling link: refused before training" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/dangling.safetensors"
  check "... no step trained" -- bash -c "! grep -q '^step' '$tmp/out'"
  expect 1 "dangling.safetensors is a symbolic link to a file that does not exist" "... by --dry-run too" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/dangling.safetensors" --dry-run
  mkdir "$tmp/dlink" && ln -s nowhere "$tmp/dlink/checkpoint.safetensors"
  expect 1 "^tlm-run train: $tmp/dlink/checkpoint.safetensors is a symbolic link to a file that does not exist" \
    "DIR/checkpoint.safetensors a dangling link: refused by --dry-run" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/dlink" --dry-run
  # a checkpoint written over the data it trains on (a checkpoint file is
  # text to train on, and --overwrite lets a checkpoint be replaced):
  # refused before training, as --log is, the data kept
  expect 0 "done: 1 step" "a checkpoint to train on" -- "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$tmp/own"
  cp "$tmp/own/checkpoint.safetensors" "$tmp/own.safetensors"
  cp "$tmp/own.safetensors" "$tmp/own.orig"
  expect 1 "^tlm-run train: $tmp/own.safetensors is also the data ($tmp/own.safetensors): writing it would destroy it" \
    "--ckpt naming the --data file: refused" -- "$run" train "$s" "${quick[@]}" --steps 1 \
    --data "$tmp/own.safetensors" --ckpt "$tmp/own.safetensors" --overwrite
  check "... the data kept" -- cmp "$tmp/own.safetensors" "$tmp/own.orig"
  expect 1 "own.safetensors is also the data" "... by --dry-run too" -- "$run" train "$s" "${quick[@]}" --steps 1 \
    --data "$tmp/own.safetensors" --ckpt "$tmp/own.safetensors" --overwrite --dry-run
  expect 1 "own.safetensors is also the data" "--ckpt naming the --val file: refused" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --data "$austen/emma.txt" --val "$tmp/own.safetensors" \
    --ckpt "$tmp/own.safetensors" --overwrite
  mkdir "$tmp/texts" && cp "$tmp/own.safetensors" "$tmp/texts/a.txt"
  expect 1 "^tlm-run train: $tmp/texts/a.txt is also a text of the data" "--ckpt naming a text of the --data folder: refused" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --data "$tmp/texts" --ckpt "$tmp/texts/a.txt" --overwrite
  check "... the text kept" -- cmp "$tmp/texts/a.txt" "$tmp/own.orig"
  head -c 3000000 /dev/zero | tr '\0' 'a' > "$tmp/big.txt"
  expect 1 "big.txt: the text (2.9 MiB) does not fit in memory (2.0 MiB available, TLM_MEMORY_LIMIT)" \
    "text larger than the memory left: refused unread" -- \
    env TLM_MEMORY_LIMIT=2M "$run" train "$s" "${quick[@]}" --steps 1 --data "$tmp/big.txt" --ckpt "$tmp/big"
  printf '#!/bin/sh\nulimit -c 0\nkill -BUS $$\n' > "$tmp/ld_bus"
  chmod +x "$tmp/ld_bus"
  expect 1 "ld_bus was killed by signal 7 (Bus error): is the disk of the output full?" \
    "tlmc: a linker killed by SIGBUS is named" -- \
    env TLM_LD="$tmp/ld_bus" "$tlmc" "$here/models.tlm" --model small -o "$tmp/bus.so"
  check "... and leaves no file" -- bash -c "! ls '$tmp' | grep -q '^bus\.so'"
  # a signal that ends tlmc while its linker runs: the linker is stopped
  # and waited for before the temporaries go, so none is written after
  # (a slow linker here: it would write its output 3 s on)
  printf '#!/bin/sh\nout=\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\ntouch "%s/ld_started"\nsleep 3\necho x > "$out"\n' \
    "$tmp" > "$tmp/ld_slow"
  chmod +x "$tmp/ld_slow"
  mkdir -p "$tmp/slow"
  env TLM_LD="$tmp/ld_slow" "$tlmc" "$here/models.tlm" --model small -o "$tmp/slow/m.so" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do [ -e "$tmp/ld_started" ] && break; sleep 0.02; done
  kill -TERM "$pid"
  status=0; wait "$pid" || status=$?
  check "tlmc: SIGTERM while linking: exit 143" -- test "$status" = 143
  sleep 4
  check "... nothing left in the output's folder once the linker would have written" -- \
    bash -c "[ -z \"\$(ls -A '$tmp/slow')\" ]"
  # two runs given one --log: the second is refused while the first writes
  # it (renamed over, the first's records went to a file no name reaches)
  "$run" train "$s" "${quick[@]}" --steps 100000 --log-every 1 --eval-every 0 --ckpt "$tmp/logA" \
    --log "$tmp/shared.jsonl" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1 500); do [ -s "$tmp/shared.jsonl" ] && break; sleep 0.02; done
  expect 1 "^tlm-run train: --log $tmp/shared.jsonl is in use by another tlm-run train" \
    "a second run on a log the first is writing: refused" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/logB" --log "$tmp/shared.jsonl"
  kill -INT "$pid"; wait "$pid"
  check "... the first run's records are in the log" -- grep -q '"step":2,' "$tmp/shared.jsonl"
  check "... no checkpoint folder made for the second" -- test ! -e "$tmp/logB"
  expect 0 "done: 2 steps" "... the log free again: written" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/logB" --log "$tmp/shared.jsonl"
  # --log over a file that is not a log (notes, a text): refused, the file
  # kept and no checkpoint folder made; an empty file or a log is written
  printf 'my notes\n' > "$tmp/notes.txt"
  expect 1 "notes.txt holds something other than a training log (it does not start with a JSON record of a step)" \
    "--log naming a file of notes: refused" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/notes" --log "$tmp/notes.txt"
  check "... the notes kept" -- test "$(cat "$tmp/notes.txt")" = "my notes"
  check "... no checkpoint folder made" -- test ! -e "$tmp/notes"
  : > "$tmp/empty.jsonl"
  expect 0 "done: 2 steps" "--log naming an empty file: written" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/elog" --log "$tmp/empty.jsonl"
  expect 0 "done: 2 steps" "--log naming a log: written afresh" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/elog" --log "$tmp/empty.jsonl" --overwrite
  printf '{"profile": {}}\n' > "$tmp/profile_first.jsonl"
  expect 0 "done: 2 steps" "--log naming a log that starts with its --profile record: written" -- \
    "$run" train "$s" "${quick[@]}" --steps 2 --ckpt "$tmp/elog" --log "$tmp/profile_first.jsonl" --overwrite
  # a resume whose log is gone (or holds none of the run's records): said,
  # since the log then holds only the records after the checkpoint
  "$run" train "$s" "${quick[@]}" --steps 4 --ckpt "$tmp/lost" --log "$tmp/lost.jsonl" --stop-at 2 > /dev/null
  rm "$tmp/lost.jsonl"
  expect 0 "^note: the log $tmp/lost.jsonl was not there; it holds this run's records from step 3 on$" \
    "a resume without its log: a note" -- "$run" train "$s" --ckpt "$tmp/lost" --resume
  "$run" train "$s" "${quick[@]}" --steps 4 --ckpt "$tmp/lost2" --log "$tmp/lost2.jsonl" --stop-at 2 > /dev/null
  printf '{"step":"x"}\n' > "$tmp/lost2.jsonl"
  expect 0 "^note: the log $tmp/lost2.jsonl held no record of this run up to the checkpoint's step; it holds" \
    "a resume over a log of no records: a note" -- "$run" train "$s" --ckpt "$tmp/lost2" --resume
  ;;

bench)
  # tlm-run bench: random tokens, no data files, nothing written
  s=$models/small.so
  peak_line="MFU [0-9.]*% (of 1 thread x [0-9]* GFLOP/s, this CPU's multiply-add peak on \(8\|16\)-float vectors, measured)"
  expect 0 "^2 steps in [0-9.]* s: [0-9.]* steps/s, [0-9]* tokens/s, [0-9.]* GFLOP/s, $peak_line$" "bench on the CPU" -- \
    "$run" bench "$s" --threads 1 --batch 2 --context 16 --steps 2 --warmup 1 --profile 1
  check "bench: the profile table" -- grep -q '^  mlp_backward ' "$tmp/out"
  check "bench writes nothing (the folder holds only the test's files)" -- \
    test -z "$(ls -A "$tmp" | grep -v '^out$\|^err$\|^check$')"
  expect 0 '"tokens_per_s"' "bench --json" -- "$run" bench "$s" --threads 1 --batch 2 --context 16 --steps 1 --json
  check "bench --json: one JSON object with the figures and the profile" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['steps'] == 1 and r['batch'] == 2 and r['context'] == 16 and r['tokens_per_s'] > 0, r
assert r['peak'] == 'measured' and r['peak_gflops'] > 0 and 0 < r['mfu'] <= 1, r
assert any(o['op'] == 'mlp' for o in r['profile']['ops']), r" "$tmp/out"
  # MFU never above 100%: a peak measured too low (a loop bound by memory
  # or by one chain's latency rather than the FMA pipes) would put a step
  # with real work past it; 20 steps of 4 x 64 run at 15-25% here
  expect 0 '"mfu"' "bench --json, 20 steps of 4 x 64" -- \
    "$run" bench "$s" --threads 1 --batch 4 --context 64 --steps 20 --warmup 2 --profile 0 --json
  check "bench: MFU in (0, 1] against the measured peak" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert 0 < r['mfu'] <= 1 and abs(r['gflops'] / r['peak_gflops'] - r['mfu']) < 1e-4, r" "$tmp/out"
  # Titans' memory: its share of the model's FLOP count, a third forward
  expect 0 '"titans"' "bench --json of a Titans model" -- \
    "$run" bench "$models/small_titans.so" --threads 1 --batch 2 --context 16 --steps 1 --warmup 1 --json
  check "bench: the memory's ops have GFLOP/s, from 8 and 16 N H hd^2 flops" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
ops = {o['op']: o for o in r['profile']['ops']}
N, H, hd = 2 * 16, 4, 16  # small_titans: batch 2 x 16 tokens, 4 heads of 16
for name, k in (('titans', 8), ('titans_backward', 16)):
    o = ops[name]
    want = k * N * H * hd * hd * o['calls'] / o['seconds'] / 1e9
    assert o['gflops'] and abs(o['gflops'] - want) <= 0.006 + 1e-3 * want, (name, o, want)
print(ops['titans']['gflops'], ops['titans_backward']['gflops'])" "$tmp/out"
  # more threads than cores: the peak counts the cores, not the threads
  # (the CPUs this process may use, as the runtime counts them: nproc would
  # follow OMP_NUM_THREADS)
  cores=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))') && over=$((cores + 2))
  expect 0 "MFU [0-9.]*% (of $cores cores\\? x [0-9]* GFLOP/s, .*, measured; $over threads on $cores cores\\?)$" \
    "bench with more threads than cores: MFU of the cores' peak" -- \
    "$run" bench "$s" --threads "$over" --batch 2 --context 16 --steps 1 --warmup 1 --profile 0
  expect 0 '"cores"' "... and in --json" -- \
    "$run" bench "$s" --threads "$over" --batch 2 --context 16 --steps 1 --warmup 1 --profile 0 --json
  check "bench --json: threads and cores, the peak of the cores" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['threads'] == int(sys.argv[2]) and r['cores'] == int(sys.argv[3]), r
assert 0 < r['mfu'] <= 1 and abs(r['gflops'] / r['peak_gflops'] - r['mfu']) < 1e-4, r" "$tmp/out" "$over" "$cores"
  expect 0 "cuda:0 .*, fp32, batch 2 x 8 tokens" "bench on the emulated device" -- \
    env TLM_TEST_DEVICE=emulated XDG_CACHE_HOME="$work/gpu-cache" "$run" bench "$models/small_gated.so" \
    --threads 1 --batch 2 --context 8 --steps 1 --warmup 1 --profile 1 --device cuda --precision fp32
  check "bench on a GPU: train's attention and graphs line" -- \
    grep -q '^attention: scalar (fp32); CUDA graphs: on$' "$tmp/out"
  check "... where the kernels came from" -- grep -qE '^kernels: (compiled in [0-9.]+ s|from the cache)' "$tmp/out"
  check "... and the device memory held" -- grep -qE '^1 step in .*, mem [0-9.]+ GiB$' "$tmp/out"
  expect 0 '"device_memory"' "bench --json on the emulated device" -- \
    env TLM_TEST_DEVICE=emulated XDG_CACHE_HOME="$work/gpu-cache" "$run" bench "$models/small_gated.so" \
    --threads 1 --batch 2 --context 8 --steps 1 --warmup 0 --profile 0 --device cuda --precision fp32 --json
  check "bench --json on a GPU: memory in bytes, the attention and graphs line" -- python3 -c "
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r['device_memory'] > 0 and r['attention_graphs'].startswith('attention: scalar (fp32)'), r" "$tmp/out"
  # TLM_CPU_CAPABILITY lowers the level of the runtime's own kernels
  # (tlm_rt/cpu_level.h): named in bench's output and info, checked
  expect 0 '"cpu_level": "x86-64"' "bench --json under TLM_CPU_CAPABILITY=x86-64" -- env TLM_CPU_CAPABILITY=x86-64 \
    "$run" bench "$s" --threads 1 --batch 2 --context 16 --steps 1 --json
  expect 0 "^the runtime's CPU kernels (attention, norms, RoPE, AdamW) run at: x86-64-v3" \
    "info under TLM_CPU_CAPABILITY=x86-64-v3" -- env TLM_CPU_CAPABILITY=x86-64-v3 "$run" info "$s"
  # which OpenBLAS kernels the linear maps run, and the variable that chose
  # them (some machines set it for every process)
  expect 0 "^the linear maps' GEMMs run: OpenBLAS's Prescott kernels (OPENBLAS_CORETYPE=Prescott)$" \
    "info names OpenBLAS's kernels and OPENBLAS_CORETYPE" -- env OPENBLAS_CORETYPE=Prescott "$run" info "$s"
  expect 0 "^the linear maps' GEMMs run: OpenBLAS's [A-Za-z0-9]* kernels$" "... or OpenBLAS's own pick" -- \
    env -u OPENBLAS_CORETYPE "$run" info "$s"
  expect 0 "^the linear maps' GEMMs run: OpenBLAS's [A-Za-z0-9]* kernels (OPENBLAS_CORETYPE=no-such-core not applied)$" \
    "... and says when OpenBLAS ignored the variable" -- env OPENBLAS_CORETYPE=no-such-core "$run" info "$s"
  # a step that diverges is named by its number in the whole run: the
  # warm-up's steps count (each phase once counted from 1)
  sed 's/adamw(lr = 3e-3/adamw(lr = 1e30/' "$here/models.tlm" > "$tmp/diverge.tlm"
  expect 0 "" "tlmc: small at a learning rate of 1e30" -- "$tlmc" "$tmp/diverge.tlm" --model small -o "$tmp/diverge.so"
  for w in 0 1; do
    expect 1 "^tlm-run bench: step 2: the loss or gradient norm is not finite$" \
      "bench --warmup $w: the diverging step numbered in the whole run" -- \
      "$run" bench "$tmp/diverge.so" --threads 1 --batch 2 --context 16 --steps 3 --warmup $w --profile 0
  done
  expect 0 '"blas_kernels": "Prescott"' "bench --json names OpenBLAS's kernels" -- env OPENBLAS_CORETYPE=Prescott \
    "$run" bench "$s" --threads 1 --batch 2 --context 16 --steps 1 --json
  for cmd in bench info train eval sample probe; do
    ckpt_flag=(--ckpt "$tmp/refused")
    case $cmd in bench|info) ckpt_flag=() ;; esac
    expect 1 "^tlm-run $cmd: TLM_CPU_CAPABILITY=avx2: expected x86-64, x86-64-v3 or x86-64-v4$" \
      "$cmd refuses a TLM_CPU_CAPABILITY that names no level" -- env TLM_CPU_CAPABILITY=avx2 "$run" $cmd "$s" \
      "${ckpt_flag[@]}"
  done
  check "... and trains nothing" -- test ! -e "$tmp/refused"
  # attention's AVX-512 and AVX2 kernels give the same bits (block_gemm.h):
  # three training steps either way, the same weights (on a CPU without
  # AVX-512 both runs take the AVX2 build, and this shows nothing)
  expect 0 "done: 3 steps" "3 steps" -- "$run" train "$s" "${quick[@]}" --steps 3 --ckpt "$tmp/native"
  expect 0 "done: 3 steps" "3 steps at x86-64-v3" -- env TLM_CPU_CAPABILITY=x86-64-v3 \
    "$run" train "$s" "${quick[@]}" --steps 3 --ckpt "$tmp/v3"
  check "TLM_CPU_CAPABILITY=x86-64-v3 trains to the same bits" -- \
    ckpt same "$tmp/native/checkpoint.safetensors" "$tmp/v3/checkpoint.safetensors"
  expect 2 "--steps" "bench --steps 0" -- "$run" bench "$s" --steps 0
  expect 2 "longer than the model's context" "bench --context too long" -- "$run" bench "$s" --context 100000
  expect 2 "needs --device cuda" "bench --precision bf16 on the CPU" -- "$run" bench "$s" --precision bf16
  expect 1 "nonexistent" "bench of a missing model" -- "$run" bench "$tmp/nonexistent.so"
  ;;

progress)
  s=$models/small.so
  expect 0 "done: 20 steps" "stdout a file" -- \
    "$run" train "$s" "${quick[@]}" --steps 20 --log-every 5 --eval-every 10 --ckpt "$tmp/a"
  cp "$tmp/out" "$tmp/plain"
  sed 's/^/    /' "$tmp/plain"
  check "a plain line at steps 1, 5, 10, 15, 20" -- \
    diff <(grep -o '^step *[0-9]*/20  loss' "$tmp/plain" | awk '{print $2}') <(printf '1/20\n5/20\n10/20\n15/20\n20/20\n')
  check "validations at 0, 10, 20 on lines of their own" -- \
    test "$(grep -c '^step *[0-9]*/20  val loss .* ppl .* bits/byte' "$tmp/plain")" = 3
  check "no carriage returns or escapes" -- bash -c "! grep -q $'[\r\033]' '$tmp/plain'"
  # One step: "1 step", and the tokens counted in full (a step of 8 x 32),
  # not as 0.00M.
  expect 0 "^done: 1 step, 256 tokens in " "a 1-step run's last line" -- \
    "$run" train "$s" "${quick[@]}" --steps 1 --ckpt "$tmp/one"
  check "... and its first: training 1 step," -- grep -q '^training 1 step, 8 x 32 tokens a step' "$tmp/out"
  # util-linux's script fakes a terminal (without it the case fails)
  script -qec "'$run' train '$s' ${quick[*]} --steps 20 --log-every 5 --eval-every 10 --ckpt '$tmp/b'" /dev/null \
    > "$tmp/tty" 2>&1
  check "on a terminal: one line redrawn with \\r and ESC[K" -- grep -q $'\r\033\[Kstep' "$tmp/tty"
  check "... showing step/total, loss, lr, tok/s and the ETA" -- \
    grep -qE $'step +[0-9]+/20  loss [0-9.]+  lr [0-9.e+-]+  [0-9.kM]+ tok/s  ETA' "$tmp/tty"
  check "... validation lines of their own" -- test "$(grep -c 'val loss' "$tmp/tty")" = 3
  check "... and no plain per-step lines" -- bash -c "! grep -q 'grad norm' '$tmp/tty'"
  ;;

shards)
  # Training and evaluation on pre-tokenized shards (docs/data.md): a BPE
  # tokenizer of 512 tokens trained on Emma, the other novels tokenized
  # into a folder of shards (one per novel), Persuasion into a shard for
  # validation, and a model with a vocabulary of 512.
  sed -e 's/^model small {/model bpe {/' -e 's/vocab   = 256;  .*/vocab   = 512;/' -e 's/width - 128/192 - 128/' \
    "$here/models.tlm" | awk '/^model bpe/ {on=1} on {print} on && /^}/ {exit}' > "$tmp/bpe.tlm"
  expect 0 "" "compile a model with 512 tokens" -- "$tlmc" "$tmp/bpe.tlm" -o "$tmp/bpe.so"
  expect 0 "" "train a 512-token BPE tokenizer on Emma" -- \
    "$run" tokenizer train --vocab 512 "$austen/emma.txt" -o "$tmp/tok.json"
  mkdir -p "$tmp/shards"
  for b in emma mansfield_park northanger_abbey pride_and_prejudice sense_and_sensibility; do
    "$run" tokenize --tokenizer "$tmp/tok.json" "$austen/$b.txt" -o "$tmp/shards/$b.bin" 2>/dev/null || { echo "FAIL: tokenize $b"; fail=1; }
  done
  "$run" tokenize --tokenizer "$tmp/tok.json" "$austen/persuasion.txt" -o "$tmp/val.bin" 2>/dev/null || { echo "FAIL: tokenize persuasion"; fail=1; }
  bpe=(--threads 1 --context 64 --batch 16 --eval-batches 4)
  expect 0 "done: 150 steps" "train on a folder of shards, validated on a shard" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --steps 150 --eval-every 50 --log-every 50 --data "$tmp/shards" \
    --val "$tmp/val.bin" --ckpt "$tmp/c" --log "$tmp/c.jsonl"
  sed 's/^/    /' "$tmp/out"
  check "the banner: 5 shards, their tokens and tokenizer" -- grep -q "shards (5 shards), .*M tokens" "$tmp/out"
  check "the validation loss falls below 0.8 x its start" -- "$py" -c "
import json, sys
v = [json.loads(l) for l in open(sys.argv[1]) if 'val_loss' in l]
assert len(v) == 4 and v[-1]['val_loss'] < 0.8 * v[0]['val_loss'], v
print(v[0]['val_loss'], '->', v[-1]['val_loss'])" "$tmp/c.jsonl"
  hash=$("$run" tokenizer info --tokenizer "$tmp/tok.json" | awk '/^hash/ {print $2}')
  check "the checkpoint records the tokenizer's hash ($hash)" -- \
    test -n "$hash" -a "$(ckpt meta "$tmp/c/checkpoint.safetensors" tokenizer)" = "$hash"

  # bits per byte: loss x tokens / (bytes x ln 2), the shard's own counts
  expect 0 "val.bin" "eval on the validation shard" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/val.bin" --context 64 --max-tokens 32768 --threads 1
  sed 's/^/    /' "$tmp/out"
  read -r loss ppl bpb <<< "$(awk '/val.bin/ {print $3, $4, $5}' "$tmp/out")"
  "$run" tokenize --info "$tmp/val.bin" > "$tmp/info"
  check "bits/byte = loss x tokens / (bytes x ln 2) (loss $loss, bpb $bpb)" -- "$py" -c "
import math, sys
l, p, b, n, nb = map(float, sys.argv[1:])
assert abs(math.exp(l) - p) < 1e-3 * p + 2e-3 and abs(l * n / (nb * math.log(2)) - b) < 2e-4, (l, p, b, n, nb)
assert nb > 1.5 * n   # a BPE token covers several bytes: bits/byte well below loss / ln 2
" "$loss" "$ppl" "$bpb" "$(awk '/^tokens/ {print $2}' "$tmp/info")" "$(awk '/^bytes/ {print $2}' "$tmp/info")"
  p=$austen/persuasion.txt
  expect 1 "$p is text, but the checkpoint .* reads tokens of tokenizer ${hash:0:16}\.\.\.: tokenize it first: tlm-run tokenize --tokenizer TOKENIZER $p -o persuasion.txt.bin$" \
    "eval on text with a checkpoint trained on shards: the command that tokenizes it, into the current folder" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$p" --context 64
  expect 1 "tokenize it first: tlm-run tokenize --tokenizer $tmp/tok.json $p -o" "... with --tokenizer: named in it" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$p" --context 64 --tokenizer "$tmp/tok.json"
  expect 1 "$p is text, but the run reads tokens of tokenizer ${hash:0:16}" "eval --check --tokenizer refuses the text too" -- \
    "$run" eval "$tmp/bpe.so" --check --data "$p" --context 64 --tokenizer "$tmp/tok.json"
  expect 0 "^ok: 1 text" "eval --check --tokenizer takes the shard" -- \
    "$run" eval "$tmp/bpe.so" --check --data "$tmp/val.bin" --context 64 --tokenizer "$tmp/tok.json"
  printf 'too short a text\n' > "$tmp/short.txt"
  expect 1 "$tmp/short.txt is text, but the checkpoint .*: tokenize it first" \
    "eval on a text shorter than a window: refused as text, not as too short" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/short.txt" --context 64
  expect 1 "$p is text, but the checkpoint" "probe on text with a checkpoint trained on shards" -- \
    "$run" probe "$tmp/bpe.so" --ckpt "$tmp/c" --data "$p" --context 64 --threads 1
  expect 0 "" "probe on the validation shard" -- \
    "$run" probe "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/val.bin" --context 64 --threads 1
  expect 1 "needs --tokenizer with that tokenizer" "sample a checkpoint trained on shards without its tokenizer" -- \
    "$run" sample "$tmp/bpe.so" --ckpt "$tmp/c" --length 5
  expect 0 "^It was" "sample through the tokenizer (greedy, KV cache)" -- \
    "$run" sample "$tmp/bpe.so" --ckpt "$tmp/c" --tokenizer "$tmp/tok.json" --prompt "It was" --length 40 \
    --temperature 0 --threads 1
  cp "$tmp/out" "$tmp/sample_cached"
  expect 0 "^It was" "sample through the tokenizer (greedy, window recomputed)" -- \
    "$run" sample "$tmp/bpe.so" --ckpt "$tmp/c" --tokenizer "$tmp/tok.json" --prompt "It was" --length 40 \
    --temperature 0 --threads 1 --no-cache
  check "the same 40 tokens with and without the KV cache" -- cmp -s "$tmp/out" "$tmp/sample_cached"
  check "40 tokens decode to more than 40 bytes of text" -- \
    test "$(tail -c +7 "$tmp/sample_cached" | tr -d '\n' | wc -c)" -gt 40
  "$run" tokenizer train --vocab 300 "$austen/persuasion.txt" -o "$tmp/tok300.json" 2>/dev/null
  expect 1 "was trained with tokenizer" "sample through another tokenizer" -- \
    "$run" sample "$tmp/bpe.so" --ckpt "$tmp/c" --tokenizer "$tmp/tok300.json" --length 5

  # The model names its tokenizer (`tokenizer = "tok.json"` in its .tlm,
  # vocab derived): model.so records the path and hash; train takes only
  # shards of it, sample and eval use it without --tokenizer.
  "$py" "$root/scripts/gen_shard.py" "$tmp/other.bin" --tokens 5000 --vocab 512
  sed -e 's/^model bpe {/model bpetok {/' -e 's/vocab   = 512;/tokenizer = "tok.json";/' "$tmp/bpe.tlm" > "$tmp/bpetok.tlm"
  expect 0 "" "compile a model that names its tokenizer" -- "$tlmc" "$tmp/bpetok.tlm" -o "$tmp/bpetok.so"
  expect 0 "tokenizer $tmp/tok.json (${hash:0:16}...)" "info shows the model's tokenizer" -- "$run" info "$tmp/bpetok.so"
  expect 0 "vocab 512" "its vocab is the tokenizer's" -- "$run" info "$tmp/bpetok.so"
  expect 1 "is text, but the model reads tokens of its tokenizer" "train a tokenizer's model on text" -- \
    "$run" train "$tmp/bpetok.so" "${bpe[@]}" --steps 1 --data "$austen/persuasion.txt" --ckpt "$tmp/t1"
  expect 1 "but the model's tokenizer" "train a tokenizer's model on another tokenizer's shard" -- \
    "$run" train "$tmp/bpetok.so" "${bpe[@]}" --steps 1 --data "$tmp/other.bin" --ckpt "$tmp/t1"
  expect 0 "done: 10 steps" "train a tokenizer's model on its shards" -- \
    "$run" train "$tmp/bpetok.so" "${bpe[@]}" --steps 10 --data "$tmp/shards" --val "$tmp/val.bin" --ckpt "$tmp/t1"
  expect 0 "^It was" "sample through the model's tokenizer, no --tokenizer" -- \
    "$run" sample "$tmp/bpetok.so" --ckpt "$tmp/t1" --prompt "It was" --length 10 --threads 1
  # the tokenizer moved since the model was compiled: said as the model's,
  # and --tokenizer finds it where it is now
  mv "$tmp/tok.json" "$tmp/tok_moved.json"
  expect 1 "tok.json.*(the tokenizer the model was compiled with; \-\-tokenizer PATH names another)" \
    "sample when the model's tokenizer has moved" -- "$run" sample "$tmp/bpetok.so" --ckpt "$tmp/t1" --length 5
  expect 0 "" "  --tokenizer where it is now" -- \
    "$run" sample "$tmp/bpetok.so" --ckpt "$tmp/t1" --tokenizer "$tmp/tok_moved.json" --length 5 --threads 1
  mv "$tmp/tok_moved.json" "$tmp/tok.json"
  expect 0 "done: 1 step," "train on text (bytes) with the same model" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --steps 1 --data "$austen/persuasion.txt" --ckpt "$tmp/text"
  check "a checkpoint trained on text records the tokenizer \"bytes\"" -- \
    test "$(ckpt meta "$tmp/text/checkpoint.safetensors" tokenizer)" = bytes
  expect 1 "trained on text as bytes, not with a tokenizer; drop --tokenizer" "sample a checkpoint trained on text through a tokenizer" -- \
    "$run" sample "$tmp/bpe.so" --ckpt "$tmp/text" --tokenizer "$tmp/tok.json" --length 5
  expect 1 "trained on bytes" "eval on a shard with a checkpoint trained on text" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/text" --data "$tmp/val.bin" --context 64
  expect 1 "made with the tokenizer\|tokenized with tokenizer" "eval on a shard of another tokenizer" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/other.bin" --context 64
  expect 1 "the validation data .* is tokenized with tokenizer .*, the training data .* with tokenizer .*: tokenize both with one" \
    "validation data of another tokenizer" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --steps 1 --data "$tmp/shards" --val "$tmp/other.bin" --ckpt "$tmp/x"
  expect 1 "the validation data $austen/persuasion.txt is text, but the training data .* is tokenized with tokenizer ${hash:0:16}\.\.\.: tokenize it first: tlm-run tokenize --tokenizer TOKENIZER $austen/persuasion.txt -o persuasion.txt.bin$" \
    "validation text for shards: the command that tokenizes it" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --steps 1 --data "$tmp/shards" --val "$austen/persuasion.txt" --ckpt "$tmp/x"
  expect 1 "the training data $austen/emma.txt is text, but the validation data .*val.bin is tokenized .*(or give --val a text too)" \
    "training text with validation shards" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --steps 1 --data "$austen/emma.txt" --val "$tmp/val.bin" --ckpt "$tmp/x"

  # Resume from shards: bit-identical to the run that was not stopped.
  flags=(--threads 1 --context 32 --batch 8 --steps 20 --log-every 1 --eval-every 5 --eval-batches 2
         --ckpt-every 6 --data "$tmp/shards" --val "$tmp/val.bin")
  expect 0 "done: 20 steps" "20 steps straight on shards" -- \
    "$run" train "$tmp/bpe.so" "${flags[@]}" --ckpt "$tmp/ra" --log "$tmp/ra.jsonl"
  expect 0 "stopped at step 9 of 20" "stopped at step 9" -- \
    "$run" train "$tmp/bpe.so" "${flags[@]}" --ckpt "$tmp/rb" --log "$tmp/rb.jsonl" --stop-at 9
  expect 0 "done: 20 steps" "resumed" -- "$run" train "$tmp/bpe.so" --ckpt "$tmp/rb" --resume
  check "checkpoints bit-identical" -- ckpt same "$tmp/ra/checkpoint.safetensors" "$tmp/rb/checkpoint.safetensors"
  check "logged losses identical" -- ckpt logs "$tmp/ra.jsonl" "$tmp/rb.jsonl"
  mv "$tmp/shards/emma.bin" "$tmp/emma.bin"
  expect 1 "differs from the checkpoint's" "resume with other shards" -- \
    "$run" train "$tmp/bpe.so" --ckpt "$tmp/rb" --resume --steps 30
  mv "$tmp/emma.bin" "$tmp/shards/emma.bin"

  # Damaged shards: one line, exit 1.
  s=$tmp/val.bin
  { printf 'TLMSHARX'; tail -c +9 "$s"; } > "$tmp/magic.bin"
  expect 1 "not a token shard" "a wrong magic" -- "$run" train "$tmp/bpe.so" "${bpe[@]}" --data "$tmp/magic.bin" --ckpt "$tmp/x"
  { head -c 8 "$s"; printf '\003\000\000\000'; tail -c +13 "$s"; } > "$tmp/version.bin"
  expect 1 "shard version 3" "a wrong version" -- "$run" train "$tmp/bpe.so" "${bpe[@]}" --data "$tmp/version.bin" --ckpt "$tmp/x"
  head -c 100000 "$s" > "$tmp/trunc.bin"
  expect 1 "truncated" "a truncated body" -- "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/trunc.bin"
  head -c 20 "$s" > "$tmp/header.bin"
  expect 1 "header.bin: truncated: the header is cut short (20 bytes; a header has at least 64)" "a truncated header" -- \
    "$run" eval "$tmp/bpe.so" --ckpt "$tmp/c" --data "$tmp/header.bin"
  expect 1 "has only 256 tokens" "ids past the model's vocabulary" -- \
    "$run" train "$models/small.so" "${quick[@]}" --data "$s" --ckpt "$tmp/x"
  { head -c 72 "$s"; printf '\377\377'; tail -c +75 "$s"; } > "$tmp/badid.bin"
  expect 1 "token 1 is 65535, outside the shard's vocabulary (512)" "an id past the shard's vocabulary" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --data "$tmp/badid.bin" --ckpt "$tmp/x"
  mkdir -p "$tmp/mixed" && cp "$s" "$tmp/mixed/a.bin" && cp "$tmp/other.bin" "$tmp/mixed/b.bin"
  expect 1 "another tokenizer than the shards before it" "a folder of shards of two tokenizers" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --data "$tmp/mixed" --ckpt "$tmp/x"
  "$py" "$root/scripts/gen_shard.py" "$tmp/short.bin" --tokens 10 --vocab 512
  expect 1 "data too short" "a shard shorter than a window" -- \
    "$run" train "$tmp/bpe.so" "${bpe[@]}" --data "$tmp/short.bin" --ckpt "$tmp/x"
  ;;

shards_memory)
  # Training memory does not grow with the corpus: a 64 MB shard (32M
  # tokens) and a 64 KB one give the same peak resident memory within 8 MB
  # (the 1 GB run is scripts/shard_memory.sh, outside ctest).
  "$py" "$root/scripts/gen_shard.py" "$tmp/big.bin" --tokens 33554432 --eot 0
  "$py" "$root/scripts/gen_shard.py" "$tmp/small.bin" --tokens 32768 --eot 0
  for s in small big; do
    expect 0 "done: 5 steps" "5 steps on the $s shard" -- \
      /usr/bin/time -f "maxrss %M" -o "$tmp/$s.rss" "$run" train "$models/small.so" "${quick[@]}" --steps 5 \
      --eval-every 0 --data "$tmp/$s.bin" --ckpt "$tmp/c$s"
  done
  small=$(awk '/maxrss/ {print $2}' "$tmp/small.rss") big=$(awk '/maxrss/ {print $2}' "$tmp/big.rss")
  check "peak RSS ${big} kB with the 64 MB shard, ${small} kB with the 64 KB one: within 8 MB" -- \
    test $((big - small)) -lt 8192
  ;;

*)
  echo "run.sh: unknown case $case_"; exit 2 ;;
esac

exit $fail
