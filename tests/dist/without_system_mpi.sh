#!/usr/bin/env bash
# without_system_mpi.sh MPI_BUNDLE command...: runs the command as on a
# machine without Open MPI, through the bundle scripts/bundle_mpi.sh made.
# In a mount namespace of its own (unshare, root), every file and folder
# of Debian's Open MPI packages is covered (folders by an empty one, files
# by /dev/null), so a launcher, library, plugin, help text or setting
# missing from the bundle fails the command instead of being found in /usr.
set -eu
bundle=$1; shift
[ "$(id -u)" = 0 ] || { echo "without_system_mpi.sh: needs root (a mount namespace)"; exit 1; }
if [ -z "${TLM_IN_NAMESPACE:-}" ]; then
  TLM_IN_NAMESPACE=1 exec unshare --mount --propagation private "$0" "$bundle" "$@"
fi
empty=$(mktemp -d)
for p in openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc-plugins; do dpkg -L "$p"; done | sort -u |
  while read -r f; do
    case $f in /usr/lib/x86_64-linux-gnu/openmpi | /usr/lib/x86_64-linux-gnu/pmix2 | /usr/share/openmpi | \
      /usr/lib/x86_64-linux-gnu/hwloc | /etc/openmpi) mount --bind "$empty" "$f" ;;
    esac
    if [ -f "$f" ] && [ ! -L "$f" ] && [[ $f == /usr/bin/* || $f == /usr/lib/x86_64-linux-gnu/lib* ]]; then
      mount --bind /dev/null "$f"
    fi
  done
if [ -s /usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/mca_pml_ob1.so ] || [ -s /usr/bin/orterun ]; then
  echo "without_system_mpi.sh: the system's Open MPI is still visible"; exit 1
fi
. "$bundle/env.sh"
exec "$@"
