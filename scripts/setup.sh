#!/usr/bin/env bash
# Installs everything tlm needs on Debian 12 (as root, or with sudo), skipping
# what is already present, then configures and builds into ./build.
#   scripts/setup.sh            install + build
#   scripts/setup.sh --no-build install only
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" --no-build -- "$@"
[ $# = 0 ] || { [ $# = 1 ] && [ "$1" = --no-build ]; } ||
  { echo "setup.sh: takes only --no-build (see setup.sh --help)" >&2; exit 2; }
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config re2c bison
  llvm-19-dev clang-19 clang-format-19 lld-19 libclang-rt-19-dev libomp-19-dev
  libzstd-dev libopenblas-dev libopenblas0-openmp openmpi-bin libopenmpi-dev
  python3 python3-torch python3-numpy python3-mpmath
  vim-nox emacs-nox valgrind librsvg2-bin
)
if ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all system packages present"
fi

# Editor tests use npm packages installed locally (never globally).
# Reinstalled when package-lock.json is newer than the last install.
if [ -f editors/vscode/package.json ] &&
   { [ ! -f editors/vscode/node_modules/.package-lock.json ] ||
     [ editors/vscode/package-lock.json -nt editors/vscode/node_modules/.package-lock.json ]; }; then
  echo "setup: installing npm packages for the editor tests"
  (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error)
fi

# The tokenizer parity tests' reference encoders and vocabularies
# (tests/tokenizer), the same way.
if [ -f tests/tokenizer/package.json ] &&
   { [ ! -f tests/tokenizer/node_modules/.package-lock.json ] ||
     [ tests/tokenizer/package-lock.json -nt tests/tokenizer/node_modules/.package-lock.json ]; }; then
  echo "setup: installing npm packages for the tokenizer tests"
  (cd tests/tokenizer && npm ci --no-audit --no-fund --loglevel=error)
fi

# The GGUF export tests' llama.cpp (tests/export: node-llama-cpp, pinned),
# the same way; --omit=optional leaves out the prebuilt binaries for other
# systems and for CUDA and Vulkan (about 650 MB): package.json names the
# Linux x64 CPU one as a dependency of its own.
if [ -f tests/export/package.json ] &&
   { [ ! -f tests/export/node_modules/.package-lock.json ] ||
     [ tests/export/package-lock.json -nt tests/export/node_modules/.package-lock.json ]; }; then
  echo "setup: installing npm packages for the export tests"
  (cd tests/export && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
fi

if [ "${1:-}" = "--no-build" ]; then exit 0; fi
gen=()
if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build -j"$(nproc)"
