#!/usr/bin/env bash
# The long crash campaign of `tlm-run train`: hundreds of kill -9s, at the
# test hook's points (TLM_TEST_KILL_AT, runtime/train/test_hook.h) and at
# random moments, each followed by a restart (--resume once a checkpoint
# exists) until the run finishes; every finished run must match an
# uninterrupted one bit for bit (tensors and log) and leave no temporary
# file. ctest's crash.points and crash.random are the short version
# (tests/crash/campaign.sh does the work).
#
#   scripts/crash_campaign.sh [--kills N] [--seed S] [--build DIR] [--work DIR]
#
#   --kills N   kills in all (default 300)
#   --seed S    the schedule's seed, 0 .. 32767 (default: from the clock;
#               printed, and the same seed replays the same schedule)
#   --build DIR the build folder with compiler/tlmc and runtime/tlm-run
#               (default: build)
#   --work DIR  where the runs go (default: a new folder under /tmp; kept
#               only when a trial fails)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
kills=300 seed=$(($(date +%s) % 32768)) build=$root/build work=
while [ $# -gt 0 ]; do
  case $1 in
    --kills | --seed | --build | --work)
      [ $# -ge 2 ] || { echo "crash_campaign.sh: $1 needs a value (see --help)" >&2; exit 2; }
      case $1 in --kills) kills=$2 ;; --seed) seed=$2 ;; --build) build=$2 ;; --work) work=$2 ;; esac
      shift 2 ;;
    -h | --help) . "$root/scripts/script_args.sh" && script_help "$0"; exit 0 ;;
    *) echo "crash_campaign.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
# counts before the reference run, not after it
case $kills in '' | *[!0-9]* | ??????????*) echo "crash_campaign.sh: --kills takes a whole number of 1 or more, not \`$kills\`" >&2; exit 2 ;; esac
kills=$((10#$kills)) # 08 is eight, not a bad octal number
[ "$kills" -ge 1 ] || { echo "crash_campaign.sh: --kills takes a whole number of 1 or more, not \`$kills\`" >&2; exit 2; }
case $seed in '' | *[!0-9]* | ??????*) echo "crash_campaign.sh: --seed takes a whole number from 0 to 32767, not \`$seed\`" >&2; exit 2 ;; esac
seed=$((10#$seed))
[ "$seed" -le 32767 ] || { echo "crash_campaign.sh: --seed takes a whole number from 0 to 32767, not \`$seed\`" >&2; exit 2; }
for tool in compiler/tlmc runtime/tlm-run; do
  [ -x "$build/$tool" ] || { echo "crash_campaign.sh: no $build/$tool (build first, or give --build)" >&2; exit 2; }
done
[ -n "$work" ] || work=$(mktemp -d /tmp/tlm-crash.XXXXXX)
echo "crash campaign: $kills kills, seed $seed, in $work"
"$root/tests/crash/campaign.sh" "$build/compiler/tlmc" "$build/runtime/tlm-run" "$root" "$work" random "$kills" "$seed"
rc=$?
[ $rc = 0 ] && rm -rf "$work"
exit $rc
