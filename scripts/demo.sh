#!/usr/bin/env bash
# The main job: set up, build, then compile and report the example models.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
tlmc=build/compiler/tlmc
echo
echo "== tlmc --report examples/tiny.tlm"
"$tlmc" --report examples/tiny.tlm
for f in examples/paper/*.tlm; do
  [ -e "$f" ] || continue
  echo
  echo "== tlmc $f"
  "$tlmc" "$f"
done
