#!/usr/bin/env bash
# Open MPI as a folder that runs on a machine without it: the GPU machine
# has no mpirun, and scripts/gpu_check.sh's 1-rank NCCL job needs one.
# Copies Debian's Open MPI packages (launcher, libraries, plugins, help
# texts, settings) with their paths kept under DEST, and writes
# DEST/env.sh, which a script sources to use them:
#   scripts/bundle_mpi.sh DEST
#   . DEST/env.sh     # PATH, LD_LIBRARY_PATH and the relocation variables
#   mpirun --allow-run-as-root -np 1 -x LD_LIBRARY_PATH tlm-run train ...
# Debian's Open MPI is built for /usr; these variables move it:
# OPAL_PREFIX (Open MPI's own files), OPAL_SYSCONFDIR (its settings, which
# Debian keeps in /etc), PMIX_MCA_mca_base_component_path (the PMIx
# plugins) and HWLOC_PLUGINS_PATH. The libraries the packages need beside
# glibc and libstdc++ (libevent, hwloc, PMIx) travel too; the network
# plugins' libraries (UCX, libfabric, verbs, PSM) do not: one machine needs
# none, and Open MPI skips a plugin whose library is missing.
# dist.bundled_mpi runs 2 ranks from such a folder with the system's Open
# MPI hidden. Exit status: 0 bundled; 1 Open MPI is not installed here, or
# DEST holds other files (below); 2 bad usage.
set -euo pipefail
. "$(dirname "$0")/script_args.sh"
script_args "$0" -- "$@"
[ $# = 1 ] && [ -n "$1" ] || { echo "bundle_mpi.sh: takes one DEST folder (see bundle_mpi.sh --help)" >&2; exit 2; }
dest=$1
# DEST is replaced whole: only an earlier bundle (its .bundle_mpi, written
# as soon as the folder is made, so a run that failed halfway is one too)
# or an empty or new folder, never a folder of other files
if [ -e "$dest" ] && [ ! -f "$dest/.bundle_mpi" ] && [ -n "$(ls -A "$dest" 2>/dev/null || echo x)" ]; then
  echo "bundle_mpi.sh: $dest holds other files (not an earlier bundle): give a new or empty folder" >&2
  exit 1
fi
packages="openmpi-bin openmpi-common libopenmpi3 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15
  libhwloc-plugins libpmix2"
for p in $packages; do
  dpkg -L "$p" >/dev/null 2>&1 || { echo "bundle_mpi: package $p is not installed (scripts/setup.sh installs it)"; exit 1; }
done
rm -rf "$dest"
mkdir -p "$dest"
echo "a bundle of scripts/bundle_mpi.sh, which replaces this folder when run on it again" > "$dest/.bundle_mpi"
dest=$(cd "$dest" && pwd)
# Files and links, not folders; documentation, manuals, headers, Java,
# Fortran and OpenSHMEM stay behind (a C program's mpirun needs none).
for p in $packages; do dpkg -L "$p"; done | sort -u |
  grep -vE '^/usr/share/(doc|man|lintian)/|/include/|java|mpifh|usempi|oshmem|/libmca_common_(ofi|ucx|verbs)' |
  while read -r f; do
    if [ -f "$f" ] || [ -L "$f" ]; then
      mkdir -p "$dest$(dirname "$f")"
      cp -a "$f" "$dest$f"
    fi
  done
# The settings: Debian keeps them outside the packages' prefix.
mkdir -p "$dest/etc"
cp -a /etc/openmpi "$dest/etc/"
lib=/usr/lib/x86_64-linux-gnu
[ -x "$dest/usr/bin/orterun" ] && [ -e "$dest$lib/libmpi.so.40" ] ||
  { echo "bundle_mpi: Open MPI's files are not where Debian 12 keeps them"; exit 1; }
ln -sf orterun "$dest/usr/bin/mpirun"
cat > "$dest/env.sh" <<'EOF'
# Sourced: use the Open MPI of this folder (scripts/bundle_mpi.sh).
mpi_home=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$mpi_home/usr
export OPAL_SYSCONFDIR=$mpi_home/etc/openmpi
export PMIX_MCA_mca_base_component_path=$mpi_home/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
export HWLOC_PLUGINS_PATH=$mpi_home/usr/lib/x86_64-linux-gnu/hwloc
export PATH=$mpi_home/usr/bin:$PATH
export LD_LIBRARY_PATH=$mpi_home/usr/lib/x86_64-linux-gnu:$mpi_home/usr/lib/x86_64-linux-gnu/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
EOF
echo "bundle_mpi: $dest holds Open MPI ($(du -sh "$dest" | cut -f1)): source $dest/env.sh"
