#!/usr/bin/env bash
# The project's GPU check, run on a machine with an NVIDIA GPU from the
# bundle scripts/gpu_prepare.sh made on the CPU machine (nothing is built
# here). A preflight first (tlm-run info --device cuda: the driver and NVRTC
# open, or the script stops with exit 1). It runs, on the GPU (no test
# switch), the most telling first:
#   1. the tensor cores' primitives (gpu.mma's program: mma.sync and
#      ldmatrix's fragment layouts against float64 products) and the
#      tensor-core attention against the scalar kernels (gpu.attention_tc's);
#      then every runtime kernel against its CPU op (gpu.basic, mixers,
#      optim, linear, bf16, decode's test programs);
#   then what issue 9's target is measured by, before the rest, so that a
#   run cut short still has it: the 440M transformer preset at context 2048
#   in bf16 (tokens/s, MFU, memory), bench's profile of it (its attention's
#   and MLP's shares, then each kernel's and GEMM's time), PyTorch's bf16
#   run of the same model (bench/gpu_peer.py) for the ratio, then the 440M
#   run and profile again with TLM_GPU_ATTENTION_ROWS=16 (the tensor-core
#   forward's and dq's warps at 16 query rows, not sm_90's 32: which layout
#   is faster on the hardware);
#   2. the small models of all four architectures against the CPU runtime
#      (heads64's, heads128's and heads64_gated's bf16 attention on the tensor cores
#      among them): loss, gradients and parameters after three AdamW
#      steps (model.gpu's program, its bounds); training from CUDA graphs against training op
#      by op, bit for bit (model.gpu_graphs's program), and the graph API's
#      capture and replay (gpu.graphs's); sampling's KV cache against the
#      CPU's full forward, and the bf16 cache against the device's own bf16
#      forward with TLM_GPU_ATTENTION=scalar as ctest runs it
#      (model.kv_cache_gpu and model.kv_cache_gpu_bf16's program);
#   3. tlm-run train of each example model, twice: the second must take
#      its kernels from the cache (a FAIL row otherwise);
#   4. the 440M transformer preset again, each switch off in turn
#      (TLM_GPU_ATTENTION=scalar, 4 steps; TLM_CUDA_GRAPHS=0, 10 steps), and
#      fp32 (4 steps); the 440M Titans preset in bf16 (10 steps);
#   5. data parallelism's GPU path: a 1-rank `mpirun -np 1 tlm-run train`
#      job, whose gradient chain runs over NCCL (runtime/dist/nccl_chain.c),
#      against the same run without mpirun, bit for bit (the bundle's
#      Open MPI, else the machine's; SKIPPED, not a pass, where neither is
#      there);
#   6. bench's profile of the 440M Titans preset: its memory's and MLP's
#      shares, then each kernel's time;
#   7. PyTorch's fp32 run of the 440M model (TF32 off, as tlm's fp32 run);
# then prints a table, with each timed run's attention kernels and CUDA
# graphs as its banner says them. Each check has a time limit
# (GPU_CHECK_LIMIT seconds, default 150): a check that hangs costs one FAIL
# row, not the device's session. Each check's whole output is kept in
# GPU_CHECK_LOGS (default: $OUT/gpu_check_logs where $OUT is set, as the
# device tool sets it), one file a check, named after it; the speed and
# profile runs train on the bundled texts without validation (--data, no
# --val): their figures are the steps'.
#   scripts/gpu_check.sh [BUNDLE]      (default gpu-bundle)
# Exit status: 0 every check ran and passed; 1 a check failed, timed out,
# or was SKIPPED (not run: never a pass); 77 SKIPPED: no GPU here. With TLM_TEST_DEVICE=emulated it runs steps 1
# to 3 on the emulated device instead (the graphs and bf16 cache programs on
# one model; not gpu.attention_tc's, which ctest runs), the 440M block and
# step 4 (its two switches) on the tiny model, its PyTorch peer on the CPU,
# and step 6 on tiny_titans (how CI checks this script: a few seconds a step).
set -uo pipefail
case ${1:-} in
  -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
  -*) echo "gpu_check: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "gpu_check: one argument at most: [BUNDLE]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
emulated=0
[ "${TLM_TEST_DEVICE:-}" = emulated ] && emulated=1
if [ $emulated = 0 ]; then
  if ! nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null; then
    echo "gpu_check: SKIPPED: no GPU visible (nvidia-smi): not a pass"; exit 77
  fi
fi
bundle=$(cd "${1:-gpu-bundle}" 2>/dev/null && pwd) ||
  { echo "gpu_check: no bundle ${1:-gpu-bundle}: run scripts/gpu_prepare.sh on the CPU machine and carry it"; exit 1; }
work=$(mktemp -d)
tar -xzf "$bundle/libs.tar.gz" -C "$work" ||
  { echo "gpu_check: cannot unpack $bundle/libs.tar.gz: run scripts/gpu_prepare.sh again"; exit 1; }
# The bundle's libraries for tlm's programs only: PyTorch's peer keeps the
# machine's own (its BLAS must not meet the bundle's OpenMP OpenBLAS).
machine_ld=${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TLM_DATA=$root/data
export XDG_CACHE_HOME=$work/cache
bin=$bundle/bin models=$bundle/models
fail=0

# Preflight, in a second and compiling nothing: info --device cuda opens the
# driver and NVRTC, as every step after it must. tlm-run looks for NVRTC and
# cuBLASLt in the CPU machine's toolkit folder (baked in at build time), then
# on the loader's path; where this machine keeps them elsewhere (lib64, the
# targets folder, PyTorch's nvidia/cuNN/lib), that folder is added. Without
# a device no check can pass: stop here rather than spend the device's time
# on steps that all fail the same way.
if ! "$bin/tlm-run" info "$models/tiny.so" --device cuda > "$work/preflight.out" 2>&1; then
  nvrtc=$(grep -a -o 'libnvrtc\.so\.[0-9][0-9]*' "$bin/tlm-run" | head -1)
  nvcc_dir=$(dirname "$(command -v nvcc || echo /none/nvcc)")
  pip_dir=$(LD_LIBRARY_PATH=$machine_ld "${TLM_PYTHON:-python3}" -c \
    'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu'"${nvrtc##*.}"'", "lib"))' 2>/dev/null)
  for d in "$nvcc_dir/../lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $pip_dir; do
    if [ -n "$nvrtc" ] && [ -e "$d/$nvrtc" ]; then
      echo "gpu_check: $nvrtc from $d"; export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d; break
    fi
  done
  if ! "$bin/tlm-run" info "$models/tiny.so" --device cuda > "$work/preflight.out" 2>&1; then
    echo "gpu_check: FAILED: tlm-run cannot open the device, so no check can run:"; head -3 "$work/preflight.out"
    rm -rf "$work"; exit 1
  fi
fi
sed -n '/^device /,/^kernels for/p' "$work/preflight.out" | sed 's/^/gpu_check: /'
rows=()
# Each row is also printed as it is made, so that a run cut short by the
# device's time limit still shows what it did; the table follows at the end.
row() { rows+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); echo "gpu_check: ${rows[-1]}"; }
detail() { rows+=("    $1"); echo "gpu_check:     $1"; }

# Each check's output: a file of its own in $logs (kept: the device tool
# brings $OUT back) or $work, named after the check in characters any file
# transfer keeps ("train tiny (first)" -> train_tiny__first_.out).
logs=${GPU_CHECK_LOGS:-${OUT:+$OUT/gpu_check_logs}}
if [ -n "$logs" ] && ! mkdir -p "$logs"; then echo "gpu_check: cannot make $logs"; logs=; fi
outdir=${logs:-$work}
out_of() { printf '%s/%s.out' "$outdir" "$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '_')"; }
limit=${GPU_CHECK_LIMIT:-150}
current= # the running check's timeout
stopped() { [ -n "$current" ] && kill -TERM "$current" 2> /dev/null; echo "gpu_check: stopped by SIG$1"; exit "$2"; }
trap 'stopped INT 130' INT
trap 'stopped TERM 143' TERM
cp "$work/preflight.out" "$(out_of preflight)" 2>/dev/null

# run NAME -- command...: one check, timed and limited to $limit seconds
# (then TERM, and KILL 10 s on); its output in $(out_of NAME)
run() {
  local name=$1; shift 2
  local t0=$SECONDS out status=0
  out=$(out_of "$name")
  # in the background, so that a signal to the script reaches the check
  # too (timeout runs it in a process group of its own; trap below)
  timeout -k 10 "$limit" "$@" > "$out" 2>&1 &
  current=$!
  wait "$current" || status=$?
  current=
  if [ $status = 0 ]; then row "$name" ok "$((SECONDS - t0)) s"
  elif [ $status = 124 ] || [ $status = 137 ]; then
    row "$name" FAIL "timed out after $limit s (GPU_CHECK_LIMIT)"; fail=1; tail -20 "$out"
  else row "$name" FAIL "$((SECONDS - t0)) s, exit $status (see below)"; fail=1; tail -20 "$out"; fi
}

# tok/s, MFU and memory of a run's last logged step; compile or cache line
step_figures() {
  local line
  line=$(grep -E '^step +[0-9]+/[0-9]+ +loss' "$1" | tail -1)
  echo "$(echo "$line" | grep -oE '[0-9.]+[kM]? tok/s')$(echo "$line" | grep -oE '  MFU [0-9.]+%')$(echo "$line" | grep -oE '  mem [0-9.]+ GiB'); $(grep -E '^kernels:' "$1")"
}
# the banner's attention kernels and CUDA graphs line
kernels_used() { grep -E '^attention: ' "$1" || echo "(no attention/graphs line in the banner)"; }
steps=20 context=256 batch=8
[ $emulated = 1 ] && steps=2 context=16 batch=2
# The timed runs train on the bundled texts without validation (--data and
# no --val): their figures are the steps', and no validation pass (about
# 7 s at 440M with the scalar attention) is spent on them.
no_val=(--data "$TLM_DATA/austen")

# The speed and profile runs' checkpoints (5.3 GB each at 440M: the
# weights and AdamW's two moments in fp32) are never read: they go to a RAM
# disk where it has room for two (the atomic replace keeps the old one until
# the new one is whole), else beside the rest in $work, on the disk.
throwaway=$work
shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
if [ "${shm_kb:-0}" -gt $((12 * 1024 * 1024)) ] && shm=$(mktemp -d /dev/shm/tlm-gpu-check.XXXXXX); then
  throwaway=$shm
  trap 'rm -rf "$shm"' EXIT
fi
# speed NAME MODEL STEPS SWITCH [FLAGS...]: a timed run with SWITCH (an
# environment setting) and its figures and kernels in the table
speed() {
  local name=$1 model=$2 steps=$3 switch=$4; shift 4
  run "$name" -- env "$switch" "$bin/tlm-run" train "$models/$model.so" --device cuda "${speed_args[@]}" "$@" \
    --steps "$steps" --log-every $((steps / 2)) "${no_val[@]}" --ckpt "$throwaway/speed" --overwrite
  detail "$(step_figures "$(out_of "$name")")"
  detail "$(kernels_used "$(out_of "$name")")"
}
speed_args=(--context 2048 --batch 8)
[ $emulated = 1 ] && speed_args=(--context $context --batch $batch)

# The attention, Titans memory and MLP kernels' shares of the step: bench's
# profile (each op waited for), 3 steps after a warm-up step and a timed
# one, so that loading the kernels and planning the GEMMs on a first step
# stays out of it (train --profile's would count them), and no checkpoint
# is written
# shares FILE OP...: each op's share, forward and backward together, from
# the table after the "profile:" line; fails when an op is not in it
shares() {
  local file=$1; shift
  awk -v ops="$*" 'BEGIN { n = split(ops, o, " ") }
       /^profile: / { table = 1; next }
       /^  device kernels/ { table = 0 }
       table && /^  / { k = $1; sub(/_backward$/, "", k); s[k] += $4; seen[k] = 1 }
       END { for (i = 1; i <= n; i++) {
               if (!(o[i] in seen)) missing = 1
               printf "%s%s %.1f%%", (i > 1 ? ", " : ""), o[i], s[o[i]]
             }
             print " of the step (forward + backward)"; exit missing }' "$file"
}
pargs=(--context 2048 --batch 8)
[ $emulated = 1 ] && pargs=(--context $context --batch $batch)
# profile MODEL MIXER: the shares, then each kernel's and GEMM's time
# (--profile-kernels: each also waited for, so its op shares are not the
# ones above): the whole profile in the log and its file, for the next
# round of kernel work. SWITCH (an environment setting, optional) is named
# in the rows' names.
profile() {
  local pm=$1 mixer=$2 switch=${3:-TLM_GPU_ATTENTION=auto} name=$1 line
  [ $# -ge 3 ] && name="$pm, $3"
  local bench_args=("$models/$pm.so" --device cuda "${pargs[@]}" --warmup 1 --steps 1 --profile 3)
  run "profile $name" -- env "$switch" "$bin/tlm-run" bench "${bench_args[@]}"
  if line=$(shares "$(out_of "profile $name")" "$mixer" mlp); then detail "$line"
  else row "shares of $name's step" FAIL "no $mixer or mlp row in the profile: $line"; fail=1; fi
  run "profile $name, each kernel" -- env "$switch" "$bin/tlm-run" bench "${bench_args[@]}" --profile-kernels
  if grep -q '^  device kernels and GEMMs' "$(out_of "profile $name, each kernel")"; then
    sed -n '/^profile: /,$p' "$(out_of "profile $name, each kernel")" | sed 's/^/gpu_check:   | /'
  else row "the kernels of $name's step" FAIL "no device table in the profile"; fail=1; fi
}

py=${TLM_PYTHON:-python3}
# peer NAME MODEL PEER_ARGS...: PyTorch's tokens/s on the model's settings
peer() {
  local name=$1 model=$2 tps; shift 2
  run "$name" -- env LD_LIBRARY_PATH="$machine_ld" "$py" "$root/bench/gpu_peer.py" "$models/$model.json" "$@"
  tps=$(grep -o '"tokens_per_s": [0-9.]*' "$(out_of "$name")" | grep -oE '[0-9.]+$')
  [ -n "$tps" ] && detail "PyTorch $(printf '%.0f' "$tps") tok/s, attention $(grep -o '"attention": "[a-z_]*"' \
    "$(out_of "$name")" | cut -d'"' -f4)"
}

# 1. The tensor cores first: mma.sync and ldmatrix's fragment layouts on
# this GPU, which only the emulator's reading of the PTX ISA has checked so
# far; then every runtime kernel.
run "gpu_mma (mma.sync, ldmatrix)" -- "$bin/test_gpu_mma" "$root/runtime/gpu" "$root/tests/gpu/mma_kernels.cu"
# (ctest's gpu.attention_tc runs it on the emulated device: 7 s saved here)
[ $emulated = 0 ] && run "gpu_attention_tc" -- "$bin/test_gpu_attention_tc"
for t in test_gpu_basic test_gpu_mixers test_gpu_optim test_gpu_linear test_gpu_bf16 test_gpu_decode; do run "${t#test_}" -- "$bin/$t"; done

# Issue 9's measure next: the 440M preset's speed, its profile and the
# peer's (on the emulated device: the tiny model, its peer on the CPU);
# then the tensor-core forward's and dq's warps at 16 query rows, where
# they take 32 on sm_90 (TLM_GPU_ATTENTION_ROWS, docs/gpu.md): which of the
# two layouts is faster, measured on the hardware, not modelled
if [ $emulated = 0 ]; then
  speed "440m bf16 (the default)" transformer_440m 20 TLM_GPU_ATTENTION=auto
  profile transformer_440m attention
  peer "pytorch 440m bf16" transformer_440m --device cuda --precision bf16 --steps 20 --batch 8 --seq 2048
  speed "440m bf16, TLM_GPU_ATTENTION_ROWS=16" transformer_440m 10 TLM_GPU_ATTENTION_ROWS=16
  profile transformer_440m attention TLM_GPU_ATTENTION_ROWS=16
else
  speed "tiny bf16 (the default)" tiny 2 TLM_GPU_ATTENTION=auto
  profile tiny attention
  peer "pytorch tiny (CPU)" tiny --device cpu --steps 2 --batch $batch --seq $context
  speed "tiny bf16, TLM_GPU_ATTENTION_ROWS=16" tiny 2 TLM_GPU_ATTENTION_ROWS=16
  profile tiny attention TLM_GPU_ATTENTION_ROWS=16
fi

# 2. The models against the CPU
run "models vs CPU" -- "$bin/test_gpu_model" "$models"/{taper_swiglu,gelu_tied,odd_sizes,heads64,heads128,heads64_gated,gated_headwise,gated_elementwise,hope_cms,titans_chunked,titans_exact}.so
grep -E '^[a-z_0-9]+ +loss' "$(out_of "models vs CPU")" | sed 's/^/    /'
# CUDA graphs: the same bits as plain launches (the emulated device: one
# model, for time)
graph_models=("$models"/{taper_swiglu,heads128,hope_cms}.so) kv_models=("$models"/{taper_swiglu,gated_headwise,hope_cms,titans_chunked}.so)
[ $emulated = 1 ] && graph_models=("$models/taper_swiglu.so") kv_models=("$models/taper_swiglu.so")
run "graphs: the same bits as op by op" -- "$bin/test_gpu_graphs" "${graph_models[@]}"
run "graphs: capture and replay" -- "$bin/test_graphs"
run "sampling's KV cache vs CPU" -- "$bin/test_kv_cache" --device "${kv_models[@]}"
# the bf16 cache against the device's bf16 forward, scalar attention both
# sides (the tensor-core forward rounds P to bf16, decoding does not)
run "bf16 KV cache (scalar attention)" -- env TLM_GPU_ATTENTION=scalar "$bin/test_kv_cache" --device --bf16 "${kv_models[@]}"

# 3. Each example model twice: the second run must take its kernels from
# the cache the first one filled
for m in tiny tiny_gated tiny_hope tiny_titans; do
  for pass in first second; do
    name="train $m ($pass)"
    run "$name" -- "$bin/tlm-run" train "$models/$m.so" --device cuda --steps $steps --context $context \
      --batch $batch --log-every 5 "${no_val[@]}" --ckpt "$work/$m" --overwrite
    [ -s "$(out_of "$name")" ] || continue
    detail "$(step_figures "$(out_of "$name")")"
    [ $pass = first ] && detail "$(kernels_used "$(out_of "$name")")"
    if [ $pass = second ] && ! grep -q "^kernels: .*from the cache (nothing compiled)" "$(out_of "$name")"; then
      row "$m: kernels from the cache" FAIL "the second run compiled: $(grep -E '^kernels:' "$(out_of "$name")")"; fail=1
    fi
  done
done

# 4. What the tensor cores and CUDA graphs buy, each switched off in turn
# in the same session (fewer steps for the two comparisons: the figures are
# the last logged step's, well past the graphs' capture at the second step)
if [ $emulated = 0 ]; then
  # (the scalar attention's runs, about 10 s a step on an H100, 4 steps:
  # the last logged figure is of steps 3 and 4)
  speed "440m bf16, TLM_GPU_ATTENTION=scalar" transformer_440m 4 TLM_GPU_ATTENTION=scalar
  speed "440m bf16, TLM_CUDA_GRAPHS=0" transformer_440m 10 TLM_CUDA_GRAPHS=0
  speed "440m fp32" transformer_440m 4 TLM_GPU_ATTENTION=auto --precision fp32
  speed "titans 440m bf16" titans_440m 10 TLM_GPU_ATTENTION=auto
else
  speed "tiny bf16, TLM_GPU_ATTENTION=scalar" tiny 2 TLM_GPU_ATTENTION=scalar
  speed "tiny bf16, TLM_CUDA_GRAPHS=0" tiny 2 TLM_CUDA_GRAPHS=0
fi

# 5. Data parallelism over NCCL: one rank under mpirun runs the chain
# (NCCL's communicator of one, its broadcast) and must give the plain run's
# bits. The bundle's Open MPI, else the machine's mpirun: tlm-run loads the
# bundle's libmpi (LD_LIBRARY_PATH above), which another launcher (an
# MPICH, another Open MPI) may not start; NCCL from the CUDA toolkit or from
# PyTorch's pip package (nvidia-nccl).
if [ -f "$work/mpi/env.sh" ]; then . "$work/mpi/env.sh"; fi
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  nccl_dir=$("$py" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl_dir
fi
if [ $emulated = 0 ] && command -v mpirun >/dev/null; then
  nccl_args=(train "$models/tiny_hope.so" --device cuda --steps $steps --context $context --batch $batch
    --accumulate 2 "${no_val[@]}" --overwrite)
  run "NCCL: plain run" -- "$bin/tlm-run" "${nccl_args[@]}" --ckpt "$work/nccl_plain"
  run "NCCL: mpirun -np 1" -- mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH "$bin/tlm-run" "${nccl_args[@]}" \
    --ckpt "$work/nccl_mpi"
  run "NCCL: the same bits" -- "$py" "$root/tests/crash/same.py" ckpt \
    "$work/nccl_plain/checkpoint.safetensors" "$work/nccl_mpi/checkpoint.safetensors"
elif [ $emulated = 0 ]; then
  row "NCCL: mpirun -np 1" SKIPPED "no mpirun on this machine and none in the bundle: not run, not a pass"; skipped=1
fi

# 6. Titans' profile; 7. the peer in fp32
if [ $emulated = 0 ]; then
  profile titans_440m titans
  peer "pytorch 440m fp32" transformer_440m --device cuda --precision fp32 --steps 5 --batch 8 --seq 2048
else
  profile tiny_titans titans
fi

printf '%-34s %-6s %s\n' check result detail
printf '%s\n' "${rows[@]}"
checks=$(printf '%s\n' "${rows[@]}" | grep -c ' ok ')
rm -rf "$work"
[ -n "$logs" ] && echo "gpu_check: each check's output is in $logs"
if [ $fail = 0 ] && [ "${skipped:-0}" = 0 ]; then
  echo "gpu_check: all $checks GPU checks passed$([ $emulated = 1 ] && echo ' (on the emulated device)')"; exit 0
fi
[ $fail = 0 ] && { echo "gpu_check: the $checks checks that ran passed, but not every check ran (SKIPPED above): not a pass"; exit 1; }
echo "gpu_check: FAILED"; exit 1
