#!/usr/bin/env bash
# The project's GPU check, for a machine with an NVIDIA GPU and the CUDA
# toolkit (run it on the device machine when a session is lent one):
# builds, then runs the generated CUDA kernels on the GPU against the float64
# reference (tests/codegen/test_cuda_gpu.c), and prints a summary table.
# The build is CPU-only apart from that; tlm-run has no CUDA backend yet.
#   scripts/gpu_check.sh [BUILD_DIR]
# Exit status: 0 every check ran and passed; 1 a check failed or the build
# did; 77 SKIPPED, the checks could not run here (no CUDA toolkit, no
# usable GPU, or no check reported): never a pass, so a wrapper that only
# tests for 0 does not read a skip as one.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: no GPU visible"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTLM_FUZZ=OFF -DTLM_SKIP_DIRS=editors >/dev/null || exit 1
fi
cmake --build "$build" -j"$(nproc)" --target codegen_test_cuda_gpu codegen_test_cuda_nvrtc >/dev/null || exit 1
out=$(mktemp)
"$build/tests/codegen/codegen_test_cuda_gpu" > "$out" 2>&1; status=$?
grep -E '^(ok|FAIL)' "$out" | awk '{ n[$1]++ } END { printf "%-6s %6s\n", "result", "checks"; for (k in n) printf "%-6s %6d\n", k, n[k] }'
grep -E '^FAIL|PASS|SKIP|GPU|device|sm_' "$out" | head -20
checks=$(grep -c '^ok' "$out")
case $status in
  0)
    if [ "$checks" = 0 ]; then
      echo "gpu_check: SKIPPED: the GPU test exited 0 without reporting a check; full output: $out"; exit 77
    fi
    echo "gpu_check: all $checks GPU kernel checks passed" ;;
  77) echo "gpu_check: SKIPPED: the GPU checks did not run (no CUDA toolkit or no usable GPU): not a pass"
      rm -f "$out"; exit 77 ;;
  *) echo "gpu_check: FAILED (exit $status); full output: $out"; exit 1 ;;
esac
rm -f "$out"
