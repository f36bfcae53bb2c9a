#!/usr/bin/env bash
# The CPU machine's half of the GPU check. A GPU machine here has the CUDA
# toolkit, CMake and PyTorch but no LLVM, re2c, bison or OpenBLAS, so
# everything is built here and carried there as one folder (the device
# tool's `carry`), which scripts/gpu_check.sh runs:
#   BUNDLE/bin     tlm-run and the GPU test programs (the kernels', the
#                  tensor cores', the graphs' and the whole models')
#   BUNDLE/libs.tar.gz, which gpu_check.sh unpacks:
#     lib          the shared libraries they need that a bare machine lacks
#                  (OpenBLAS and its Fortran runtime, libgomp)
#     mpi          Open MPI's launcher and plugins (scripts/bundle_mpi.sh)
#   BUNDLE/models  the test models and the examples, compiled by tlmc, and
#                  the settings of two of them for PyTorch's peer
#
#   scripts/gpu_prepare.sh [--no-build] [BUILD_DIR [BUNDLE]]   (defaults: build, gpu-bundle)
# --no-build: take the build's files as they are (the test does, from ctest).
# The bundle must stay under the device tool's 64 MiB; the script says its size.
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" --no-build -- "$@"
cd "$(dirname "$0")/.."
build_first=1
if [ "${1:-}" = --no-build ]; then build_first=0; shift; fi
[ $# -le 2 ] || { echo "gpu_prepare.sh: at most BUILD_DIR and BUNDLE (see gpu_prepare.sh --help)" >&2; exit 2; }
build=${1:-build}
bundle=${2:-gpu-bundle}
# BUNDLE is replaced whole: only an earlier bundle (its .gpu-bundle, written
# as soon as the folder is made, so a run that failed halfway is one too;
# or, from before that file, bin/tlm-run and models/) or an empty or new
# folder, never a folder of other files
if [ -e "$bundle" ] && [ ! -f "$bundle/.gpu-bundle" ] && ! { [ -f "$bundle/bin/tlm-run" ] && [ -d "$bundle/models" ]; } &&
  [ -n "$(ls -A "$bundle" 2>/dev/null || echo x)" ]; then
  echo "gpu_prepare: $bundle holds other files (not an earlier bundle): give a new or empty folder" >&2
  exit 1
fi
[ $build_first = 1 ] && cmake --build "$build" -j"$(nproc)" --target tlm-run tlmc test_gpu_basic test_gpu_mixers test_gpu_optim \
  test_gpu_linear test_gpu_bf16 test_gpu_decode test_gpu_mma test_gpu_attention_tc test_graphs test_gpu_model \
  test_gpu_graphs test_kv_cache dump_model tlm_test_models >/dev/null
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/models"
echo "a bundle of scripts/gpu_prepare.sh, which replaces this folder when run on it again" > "$bundle/.gpu-bundle"
cp "$build/runtime/tlm-run" "$bundle/bin/"
for t in test_gpu_basic test_gpu_mixers test_gpu_optim test_gpu_linear test_gpu_bf16 test_gpu_decode test_gpu_mma \
         test_gpu_attention_tc test_graphs; do cp "$build/tests/gpu/$t" "$bundle/bin/"; done
for t in test_gpu_model test_gpu_graphs test_kv_cache; do cp "$build/tests/model/$t" "$bundle/bin/"; done
# test_gpu_mma reads mma.cuh, its neighbours and tests/gpu/mma_kernels.cu
# from the carried working tree (gpu_check.sh gives it the paths).
for m in taper_swiglu gelu_tied odd_sizes heads64 heads128 heads64_gated gated_headwise gated_elementwise hope_cms titans_chunked \
         titans_exact tiny tiny_gated tiny_hope tiny_titans; do
  cp "$build/tests/model/$m.so" "$bundle/models/"
done
for m in transformer_440m titans_440m; do
  TLM_STDLIB=stdlib "$build/compiler/tlmc" "examples/paper/$m.tlm" -o "$bundle/models/$m.so"
done
# The settings PyTorch's peer (bench/gpu_peer.py) rebuilds the models from.
for m in tiny transformer_440m; do
  "$build/tests/model/dump_model" "$bundle/models/$m.so" --settings > "$bundle/models/$m.json"
done
# The libraries outside glibc and the CUDA toolkit.
for bin in "$bundle"/bin/*; do ldd "$bin"; done | awk '/=> \// {print $3}' | sort -u |
  grep -E 'openblas|gfortran|quadmath|gomp|libomp|libmpi|open-rte|open-pal|hwloc|libevent|libudev' | while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
# Open MPI, which the GPU machine lacks, for gpu_check.sh's 1-rank NCCL job.
scripts/bundle_mpi.sh "$bundle/mpi" >/dev/null ||
  echo "gpu_prepare: no Open MPI here to bundle: gpu_check.sh's NCCL job will be SKIPPED"
# The libraries travel compressed (gpu_check.sh unpacks them): Debian's
# OpenBLAS alone is 36 MB, and the bundle and the working tree share the
# device tool's 64 MiB.
tar -czf "$bundle/libs.tar.gz" -C "$bundle" lib $([ -d "$bundle/mpi" ] && echo mpi)
rm -rf "$bundle/lib" "$bundle/mpi"
echo "gpu_prepare: $bundle holds $(du -sh "$bundle" | cut -f1): carry it and run scripts/gpu_check.sh $bundle"
