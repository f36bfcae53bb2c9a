#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
