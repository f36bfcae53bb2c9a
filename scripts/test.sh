#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then ctest; then the
# sanitizer build's share (scripts/sanitize_all.sh).
#   scripts/test.sh [CTEST_ARGS...]   (e.g. -R tokenizer; they go to the first ctest)
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
case ${1:-} in -h | --help) script_help "$0"; exit 0 ;; esac # the rest go to ctest
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
# Then the tests labelled `sanitize` (unit, kernel, reader and model tests)
# once more under AddressSanitizer and UBSan, in build-sanitize.
bash scripts/sanitize_all.sh -L sanitize
