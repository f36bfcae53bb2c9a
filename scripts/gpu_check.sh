#!/usr/bin/env bash
# The project's GPU check, run on a machine with an NVIDIA GPU from the
# bundle scripts/gpu_prepare.sh made on the CPU machine (nothing is built
# here). It runs, on the GPU (no test switch):
#   1. every runtime kernel against its CPU op (gpu.basic, mixers, optim,
#      linear's test programs);
#   2. the small models of all four architectures against the CPU runtime:
#      loss, gradients and parameters after three AdamW steps (model.gpu's
#      program, its bounds);
#   3. tlm-run train of each example model, twice: the first run compiles
#      the kernels, the second takes them from the cache;
#   3b. data parallelism's GPU path: a 1-rank `mpirun -np 1 tlm-run train`
#      job, whose gradient chain runs over NCCL (runtime/dist/nccl_chain.c),
#      against the same run without mpirun, bit for bit (the bundle's
#      Open MPI where the machine has none; SKIPPED, not a pass, where
#      neither is there);
#   4. the 440M transformer preset, 20 steps at context 2048 (fp32: bf16 is
#      not built yet), for tokens/s, MFU and memory, and the same model in
#      PyTorch (bench/gpu_peer.py: fp32 with TF32 off, as tlm's run, and
#      bf16 autocast, its best) for the ratio;
# then prints a table.
#   scripts/gpu_check.sh [BUNDLE]      (default gpu-bundle)
# Exit status: 0 every check ran and passed; 1 a check failed; 77 SKIPPED:
# no GPU here (never a pass). With TLM_TEST_DEVICE=emulated it runs steps 1
# to 3 on the emulated device instead, and the PyTorch peer on the tiny
# model on the CPU (how CI checks this script).
set -uo pipefail
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
rows=()
row() { rows+=("$(printf '%-34s %-6s %s' "$1" "$2" "$3")"); }

# run NAME -- command...: one check, timed; its output kept in $work/NAME.out
run() {
  local name=$1; shift 2
  local t0=$SECONDS
  if "$@" > "$work/$name.out" 2>&1; then row "$name" ok "$((SECONDS - t0)) s"
  else row "$name" FAIL "$((SECONDS - t0)) s, exit $? (see below)"; fail=1; tail -20 "$work/$name.out"; fi
}

for t in test_gpu_basic test_gpu_mixers test_gpu_optim test_gpu_linear test_gpu_bf16 test_gpu_decode; do run "${t#test_}" -- "$bin/$t"; done
run "models vs CPU" -- "$bin/test_gpu_model" "$models"/{taper_swiglu,gelu_tied,odd_sizes,gated_headwise,gated_elementwise,hope_cms,titans_chunked,titans_exact}.so
grep -E '^[a-z_]+ +loss' "$work/models vs CPU.out" | sed 's/^/    /'
run "sampling's KV cache vs CPU" -- "$bin/test_kv_cache" --device "$models"/{taper_swiglu,gated_headwise,hope_cms,titans_chunked}.so

# tok/s, MFU and memory of a run's last logged step; compile or cache line
step_figures() {
  local line
  line=$(grep -E '^step +[0-9]+/[0-9]+ +loss' "$1" | tail -1)
  echo "$(echo "$line" | grep -oE '[0-9.]+[kM]? tok/s')$(echo "$line" | grep -oE '  MFU [0-9.]+%')$(echo "$line" | grep -oE '  mem [0-9.]+ GiB'); $(grep -E '^kernels:' "$1")"
}
steps=20 context=256 batch=8
[ $emulated = 1 ] && steps=2 context=16 batch=2
for m in tiny tiny_gated tiny_hope tiny_titans; do
  for pass in first second; do
    run "train $m ($pass)" -- "$bin/tlm-run" train "$models/$m.so" --device cuda --steps $steps --context $context \
      --batch $batch --eval-every 0 --eval-batches 1 --log-every 5 --ckpt "$work/$m" --overwrite
    [ -s "$work/train $m ($pass).out" ] && rows+=("    $(step_figures "$work/train $m ($pass).out")")
  done
done
# Data parallelism over NCCL: one rank under mpirun runs the chain (NCCL's
# communicator of one, its broadcast) and must give the plain run's bits.
# The machine's own mpirun, else the bundle's Open MPI; NCCL from the CUDA
# toolkit or from PyTorch's pip package (nvidia-nccl).
command -v mpirun >/dev/null || { [ -f "$work/mpi/env.sh" ] && . "$work/mpi/env.sh"; }
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2 '; then
  nccl_dir=$("${TLM_PYTHON:-python3}" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null) &&
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$nccl_dir
fi
if [ $emulated = 0 ] && command -v mpirun >/dev/null; then
  nccl_args=(train "$models/tiny_hope.so" --device cuda --steps $steps --context $context --batch $batch
    --accumulate 2 --eval-every 0 --eval-batches 1 --overwrite)
  run "NCCL: plain run" -- "$bin/tlm-run" "${nccl_args[@]}" --ckpt "$work/nccl_plain"
  run "NCCL: mpirun -np 1" -- mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH "$bin/tlm-run" "${nccl_args[@]}" \
    --ckpt "$work/nccl_mpi"
  run "NCCL: the same bits" -- "${TLM_PYTHON:-python3}" "$root/tests/crash/same.py" ckpt \
    "$work/nccl_plain/checkpoint.safetensors" "$work/nccl_mpi/checkpoint.safetensors"
elif [ $emulated = 0 ]; then
  row "NCCL: mpirun -np 1" SKIPPED "no mpirun on this machine and none in the bundle: not run, not a pass"
fi

# The attention and MLP kernels' shares of the step (train --profile, which
# waits for each op: its own run, not the timed ones above)
shares() {
  awk '$1 ~ /^(attention|mlp)(_backward)?$/ { k = $1; sub(/_backward/, "", k); s[k] += $4 }
       END { printf "attention %.1f%%, MLP %.1f%% of the step (forward + backward)", s["attention"], s["mlp"] }' "$1"
}
pm=transformer_440m pargs=(--context 2048 --batch 8)
[ $emulated = 1 ] && pm=tiny pargs=(--context $context --batch $batch)
run "profile $pm" -- "$bin/tlm-run" train "$models/$pm.so" --device cuda --steps 3 "${pargs[@]}" --eval-every 0 \
  --eval-batches 1 --profile --ckpt "$work/profile"
grep -q '^  mlp ' "$work/profile $pm.out" && rows+=("    $(shares "$work/profile $pm.out")")

py=${TLM_PYTHON:-python3}
# peer NAME MODEL PEER_ARGS...: PyTorch's tokens/s on the model's settings
peer() {
  local name=$1 model=$2; shift 2
  run "$name" -- env LD_LIBRARY_PATH="$machine_ld" "$py" "$root/bench/gpu_peer.py" "$models/$model.json" "$@"
  local tps
  tps=$(grep -o '"tokens_per_s": [0-9.]*' "$work/$name.out" | grep -oE '[0-9.]+$')
  [ -n "$tps" ] && rows+=("    PyTorch $(printf '%.0f' "$tps") tok/s")
}
if [ $emulated = 0 ]; then
  for p in bf16 fp32; do
    run "train transformer_440m $p" -- "$bin/tlm-run" train "$models/transformer_440m.so" --device cuda \
      --precision $p --steps 20 --context 2048 --batch 8 --eval-every 0 --eval-batches 1 --log-every 5 \
      --ckpt "$work/t440$p"
    rows+=("    $(step_figures "$work/train transformer_440m $p.out")")
  done
  peer "pytorch 440m fp32" transformer_440m --device cuda --precision fp32 --steps 20 --batch 8 --seq 2048
  peer "pytorch 440m bf16" transformer_440m --device cuda --precision bf16 --steps 20 --batch 8 --seq 2048
else
  peer "pytorch tiny (CPU)" tiny --device cpu --steps 2 --batch $batch --seq $context
fi

printf '%-34s %-6s %s\n' check result detail
printf '%s\n' "${rows[@]}"
checks=$(printf '%s\n' "${rows[@]}" | grep -c ' ok ')
rm -rf "$work"
if [ $fail = 0 ]; then echo "gpu_check: all $checks GPU checks passed$([ $emulated = 1 ] && echo ' (on the emulated device)')"; exit 0; fi
echo "gpu_check: FAILED"; exit 1
