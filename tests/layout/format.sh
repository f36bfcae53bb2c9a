#!/usr/bin/env bash
# Every C file git tracks is formatted as .clang-format says, and every CUDA
# file as .clang-format-cuda says, so a reformat never hides in a change
# again: run `git ls-files '*.c' '*.h' | xargs clang-format-19 -i` and
# `git ls-files '*.cu' '*.cuh' | xargs clang-format-19 -i
# --style=file:.clang-format-cuda` before committing. Fails (never skips) when
# clang-format-19 is missing: scripts/setup.sh installs it.
set -euo pipefail
cd "$1"
command -v clang-format-19 >/dev/null || { echo "FAIL: clang-format-19 is not installed (run scripts/setup.sh)"; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h')
if ((${#files[@]} < 100)); then echo "FAIL: only ${#files[@]} C files found in $1"; exit 1; fi
if ! clang-format-19 --dry-run -Werror "${files[@]}" 2>/tmp/tlm-format.$$; then
    grep -E "^[^ ].*: error:" /tmp/tlm-format.$$ | sed 's/: error: code should be clang-formatted.*//' | sort -u | head -20
    rm -f /tmp/tlm-format.$$
    echo "FAIL: the files above are not formatted (clang-format-19 -i FILE)"
    exit 1
fi
rm -f /tmp/tlm-format.$$
# The CUDA sources have a style of their own (.clang-format-cuda; clang-format
# takes one configuration per directory, and runtime/gpu holds both kinds).
mapfile -t cuda < <(git ls-files '*.cu' '*.cuh')
if ((${#cuda[@]} < 15)); then echo "FAIL: only ${#cuda[@]} CUDA files found in $1"; exit 1; fi
if ! clang-format-19 --style=file:.clang-format-cuda --dry-run -Werror "${cuda[@]}" 2>/tmp/tlm-format.$$; then
    grep -E "^[^ ].*: error:" /tmp/tlm-format.$$ | sed 's/: error: code should be clang-formatted.*//' | sort -u | head -20
    rm -f /tmp/tlm-format.$$
    echo "FAIL: the CUDA files above are not formatted (clang-format-19 -i --style=file:.clang-format-cuda FILE)"
    exit 1
fi
rm -f /tmp/tlm-format.$$
echo "ok: ${#files[@]} C files formatted as .clang-format says, ${#cuda[@]} CUDA files as .clang-format-cuda says"
