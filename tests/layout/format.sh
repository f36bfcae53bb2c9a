#!/usr/bin/env bash
# Every C file git tracks is formatted as .clang-format says, so a reformat
# never hides in a change again: run `git ls-files '*.c' '*.h' | xargs
# clang-format-19 -i` before committing. Fails (never skips) when
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
echo "ok: ${#files[@]} files formatted as .clang-format says"
