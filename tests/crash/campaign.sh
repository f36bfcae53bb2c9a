#!/usr/bin/env bash
# The crash campaign: training runs of crash.tlm killed with SIGKILL, each
# kill followed by a restart (--resume once a checkpoint exists) until the
# run finishes. Every finished run must hold the tensors of an uninterrupted
# run bit for bit and the same log records, and no temporary file may be
# left in its folders (a start removes what a killed checkpoint or log
# write left).
#
#   campaign.sh TLMC TLM_RUN SOURCE_ROOT WORK_DIR points
#   campaign.sh TLMC TLM_RUN SOURCE_ROOT WORK_DIR random KILLS SEED
#
# points: one trial per test-hook point (TLM_TEST_KILL_AT, see
# runtime/train/test_hook.h), and chains of them; each kill must happen.
# random: KILLS kills in trials of one to four, each at a hook point with a
# random count or a `kill -9` from outside after a random delay, drawn from
# bash's RANDOM seeded with SEED. The schedule is printed; the same seed
# replays it (the outside kills up to timing). Prints the figures; exit 0
# when every trial matched.
set -u
tlmc=$1 run=$2 root=$3 work=$4 mode=$5
here=$(cd "$(dirname "$0")" && pwd)
py=${TLM_CRASH_PYTHON:-python3}
mkdir -p "$work" && cd "$work" || exit 1

"$tlmc" "$here/crash.tlm" -o crash.so || exit 1
head -c 65536 "$root/data/austen/emma.txt" > train.txt
tail -c 16384 "$root/data/austen/persuasion.txt" > val.txt
steps=40
flags=(--data train.txt --val val.txt --threads 1 --steps $steps --ckpt-every 5 --log-every 1
       --eval-every 10 --eval-batches 2)

now_ms() { echo $(($(date +%s%N) / 1000000)); }
rm -rf ref
t0=$(now_ms)
if ! "$run" train crash.so "${flags[@]}" --ckpt ref/ckpt --log ref/log.jsonl > ref.out 2>&1; then
  echo "FAIL: the uninterrupted run"; cat ref.out; exit 1
fi
ref_ms=$(($(now_ms) - t0))
echo "uninterrupted run: $steps steps in $ref_ms ms"

trials=0 matched=0 exact=0 stale=0 kills=0 hook_kills=0 outside_kills=0 resumes=0 fresh=0 missed=0 leftovers=0 failed=0

temps() { find "$1" -name '*.tmp.*' | wc -l; }

# launch DIR SPEC: one start of the trial in DIR (resumed when it has a
# checkpoint), killed as SPEC says (POINT:N, after:MS or none); sets rc.
launch() {
  local dir=$1 spec=$2 resume=() hook=()
  if [ -e "$dir/ckpt/checkpoint.safetensors" ]; then resume=(--resume); resumes=$((resumes + 1))
  else fresh=$((fresh + 1)); fi
  case $spec in
    none) ;;
    after:*) ;;
    *) hook=("TLM_TEST_KILL_AT=$spec") ;;
  esac
  env "${hook[@]}" "$run" train crash.so "${flags[@]}" --ckpt "$dir/ckpt" --log "$dir/log.jsonl" "${resume[@]}" \
    > "$dir/out" 2> "$dir/err" &
  local pid=$!
  if [ "${spec%%:*}" = after ]; then
    local ms=${spec#after:}
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    kill -9 $pid 2>/dev/null
  fi
  { wait $pid; } 2> /dev/null   # not bash's "Killed" notice
  rc=$?
}

# trial NAME STRICT SPEC...: kills as the SPECs say, then a start without a
# kill; STRICT: every hook kill must happen.
trial() {
  local name=$1 strict=$2; shift 2
  local dir=$work/trial-$name spec ok=1 ran=1
  rm -rf "$dir" && mkdir -p "$dir"
  trials=$((trials + 1))
  for spec in "$@"; do
    launch "$dir" "$spec"
    if [ $rc = 137 ]; then
      kills=$((kills + 1))
      [ "${spec%%:*}" = after ] && outside_kills=$((outside_kills + 1)) || hook_kills=$((hook_kills + 1))
      local left; left=$(temps "$dir")
      [ "$left" -gt 0 ] && leftovers=$((leftovers + 1))
      case $spec in ckpt_write:* | ckpt_rename:* | log_rewrite:*)
        if [ "$left" = 0 ]; then echo "FAIL: $name: the kill at $spec left no temporary file"; ok=0; fi ;;
      esac
    elif [ $rc = 0 ] && [ "$strict" = 0 ]; then
      missed=$((missed + 1))   # the run finished before the kill
      break
    else
      echo "FAIL: $name: $spec: exit $rc"; tail -3 "$dir/err" "$dir/out"; ok=0 ran=0; break
    fi
  done
  if [ $ran = 1 ]; then
    launch "$dir" none
    if [ $rc != 0 ]; then echo "FAIL: $name: the last start: exit $rc"; tail -3 "$dir/err" "$dir/out"; ok=0 ran=0; fi
  fi
  if [ $ran = 1 ] && [ "$(temps "$dir")" != 0 ]; then
    echo "FAIL: $name: temporary files left after a successful start:"; find "$dir" -name '*.tmp.*'
    ok=0 stale=$((stale + 1))
  fi
  local same=$ran
  if [ $ran = 1 ] && ! "$py" "$here/same.py" ckpt ref/ckpt/checkpoint.safetensors "$dir/ckpt/checkpoint.safetensors" \
       > "$dir/same" 2>&1; then
    echo "FAIL: $name: the final checkpoint differs from the uninterrupted run's: $(cat "$dir/same")"; ok=0 same=0
  fi
  if [ $ran = 1 ] && ! "$py" "$here/same.py" log ref/log.jsonl "$dir/log.jsonl" > "$dir/same" 2>&1; then
    echo "FAIL: $name: the log differs from the uninterrupted run's: $(cat "$dir/same")"; ok=0 same=0
  fi
  [ $same = 1 ] && exact=$((exact + 1))
  if [ $ok = 1 ]; then
    matched=$((matched + 1)); echo "ok: $name: $*"; rm -rf "$dir"
  else
    failed=$((failed + 1)); echo "    (kept in $dir)"
  fi
}

case $mode in
points)
  trial step 1 step:7
  trial step-before-checkpoint 1 step:3 step:2     # a fresh restart, then a resumed run killed
  trial ckpt-write-first 1 ckpt_write:1            # no checkpoint yet: a fresh restart
  trial ckpt-write 1 ckpt_write:3
  trial ckpt-rename-first 1 ckpt_rename:1
  trial ckpt-rename 1 ckpt_rename:4
  trial log-write 1 log_write:12
  trial log-rewrite 1 step:13 log_rewrite:1        # a resume killed while it rewrites the log
  trial chain 1 ckpt_write:2 ckpt_rename:2 log_write:9 step:4 log_rewrite:1 ckpt_write:1 log_write:1
  ;;
random)
  want=$6 seed=$7
  echo "seed $seed (replay: campaign.sh ... random $want $seed)"
  RANDOM=$seed
  points=(step ckpt_write ckpt_rename log_write log_rewrite)
  counts=($steps $((steps / 5)) $((steps / 5)) $((steps + 5)) 1)
  n=0
  while [ $kills -lt "$want" ]; do
    k=$((1 + RANDOM % 4)) specs=()
    for _ in $(seq $k); do
      if [ $((RANDOM % 2)) = 0 ]; then
        p=$((RANDOM % ${#points[@]}))
        specs+=("${points[$p]}:$((1 + RANDOM % ${counts[$p]}))")
      else
        specs+=("after:$((RANDOM % (ref_ms + ref_ms / 5 + 1)))")
      fi
    done
    n=$((n + 1))
    trial "random-$n" 0 "${specs[@]}"
    [ $n -ge $((want * 2 + 10)) ] && break   # runs too fast to be killed: stop rather than loop
  done
  ;;
*) echo "usage: campaign.sh TLMC TLM_RUN SOURCE_ROOT WORK_DIR points | random KILLS SEED"; exit 2 ;;
esac

echo "campaign ($mode${seed:+, seed $seed}): $trials trials, $kills kills ($hook_kills at hook points," \
     "$outside_kills from outside), $resumes resumes, $fresh fresh starts, $missed kills missed (the run" \
     "had finished); $leftovers kills left temporary files, $stale trials had some left after their last" \
     "start; $exact of $trials trials bit-exact (tensors and log) with the uninterrupted run; $failed failed"
[ $failed = 0 ] && [ $matched = $trials ] && [ $kills -gt 0 ]
