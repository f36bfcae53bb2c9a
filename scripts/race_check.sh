#!/usr/bin/env bash
# Data-race check of the runtime's OpenMP code: the threaded runtime tests
# built with clang's ThreadSanitizer against LLVM's OpenMP runtime (libomp),
# run with Archer (libarcher.so, in libomp-19-dev), the OMPT tool that tells
# TSan what OpenMP's barriers, tasks and reductions synchronise. Without it
# every parallel region would report the runtime's own hand-off as a race
# (and gcc's libgomp cannot be instrumented at all).
#
#   scripts/race_check.sh [BUILD_DIR]     (default build-tsan)
#   TLM_RACE_THREADS   OpenMP threads (default 4; 2 or more)
#
# The ops run a loop in parallel only above a size (TLM_PAR_MIN_* in
# runtime/include/tlm_rt/ops.h), which the tests' small shapes rarely
# reach: this build reads a copy of ops.h with those thresholds at 1 (put
# first on the quote-include path), so every such loop is split across the
# threads. The results do not depend on the thresholds (ops.h says so; the
# tests check the numbers). OpenBLAS runs single-threaded: it is not
# instrumented, and its own thread pool is not OpenMP's.
# Exit status 1 on any race report or failed test.
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" -- "$@"
[ $# -le 1 ] || { echo "race_check.sh: takes at most BUILD_DIR (see race_check.sh --help)" >&2; exit 2; }
cd "$(dirname "$0")/.."
build=${1:-build-tsan}
threads=${TLM_RACE_THREADS:-4}
cc=$(command -v clang-19 || command -v clang || true)
archer=$(ls /usr/lib/llvm-19/lib/libarcher.so 2>/dev/null || true)
if [ -z "$cc" ] || [ -z "$archer" ]; then
  echo "race_check: needs clang-19 and libarcher.so (apt-get install clang-19 libomp-19-dev)" >&2
  exit 1
fi

over="$PWD/$build/par-min-1"
mkdir -p "$over/tlm_rt"
sed -E 's/^(#define TLM_PAR_MIN_[A-Z]+) +[0-9]+/\1 1/' runtime/include/tlm_rt/ops.h >"$over/tlm_rt/ops.h.new"
if [ "$(grep -cE '^#define TLM_PAR_MIN_[A-Z]+ 1( |$)' "$over/tlm_rt/ops.h.new")" -lt 3 ]; then
  echo "race_check: the TLM_PAR_MIN_* thresholds of ops.h were not found; update this script" >&2
  exit 1
fi
# only touched when it changes, so a rerun does not rebuild everything
cmp -s "$over/tlm_rt/ops.h.new" "$over/tlm_rt/ops.h" || mv "$over/tlm_rt/ops.h.new" "$over/tlm_rt/ops.h"
rm -f "$over/tlm_rt/ops.h.new"

gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
CC=$cc cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTLM_FUZZ=OFF \
  -DTLM_SKIP_DIRS="codegen;editors;frontend" \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer -iquote $over" \
  -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread >/dev/null
tests=(test_determinism test_titans test_ops_grad test_optim test_matvec test_attention_decode)
cmake --build "$build" -j2 --target "${tests[@]}" >/dev/null

# OpenBLAS's pthread build, as ctest runs runtime_determinism: the OpenMP
# build's GEMMs follow omp_set_num_threads, and their bits the thread count
# (docs/performance.md, one thread pool), which that test holds still.
blas_pthread=$(ls -d /usr/lib/*-linux-gnu/openblas-pthread 2>/dev/null | head -1 || true)

fail=0
for t in "${tests[@]}"; do
  log="$build/race_$t.log"
  start=$(date +%s)
  rc=0
  LD_LIBRARY_PATH=$blas_pthread OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1 OMP_TOOL_LIBRARIES="$archer" \
    ARCHER_OPTIONS=verbose=1 \
    TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=0 exitcode=66 history_size=4" \
    "$build/tests/runtime/$t" >"$log" 2>&1 || rc=$?
  races=$(grep -c '^WARNING: ThreadSanitizer' "$log" || true)
  if ! grep -q 'Archer detected OpenMP application with TSan' "$log"; then
    echo "race_check: $t: Archer was not loaded (see $log)"
    fail=1
  elif [ "$rc" != 0 ] || [ "$races" != 0 ]; then
    echo "race_check: $t: exit status $rc, $races race reports (see $log)"
    fail=1
  else
    echo "race_check: $t: no races, $threads threads ($(($(date +%s) - start)) s)"
  fi
done
exit "$fail"
