#!/usr/bin/env bash
# The test suite under AddressSanitizer and UBSan (and LeakSanitizer): a
# build with -DTLM_SANITIZE=ON in build-sanitize, then ctest there. Any
# report fails the test that triggered it (-fno-sanitize-recover=all);
# tests/sanitize/ctest_env.cmake sets the sanitizers' options and the leak
# suppressions. What is not instrumented: the kernels tlmc generates into
# model.so (LLVM writes them), OpenBLAS, the OpenMP runtime, Python.
#
#   scripts/sanitize_all.sh                 every test (editors' excepted)
#   scripts/sanitize_all.sh -L sanitize     the labelled subset scripts/test.sh runs
#   scripts/sanitize_all.sh -R model        any other ctest selection
#   TLM_SANITIZE_BUILD   the build folder (default build-sanitize)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
case ${1:-} in -h | --help) script_help "$0"; exit 0 ;; esac # the rest go to ctest
cd "$(dirname "$0")/.."
build=${TLM_SANITIZE_BUILD:-build-sanitize}
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
# The editors' tests check grammars, not C; the fuzzers have their own
# sanitizers (tests/fuzz).
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTLM_SANITIZE=ON -DTLM_FUZZ=OFF \
  -DTLM_SKIP_DIRS=editors >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" "$@"
