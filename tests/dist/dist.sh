#!/usr/bin/env bash
# Data-parallel training under mpirun (docs/runtime.md "Several
# processes"), on the tiny models of tests/dist/models.tlm. One case per
# ctest test:
#
#   dist.sh CASE TLMC TLM_RUN SOURCE_ROOT WORK_DIR MPIRUN
#
# (study: tlm-run study under mpirun, one process whose trainings are not
# the launcher's ranks.)
#
# Every rank runs one thread, like the single process it is compared with
# (the same thread count gives the same bits). `mpirun --oversubscribe`
# lets three ranks share two cores; `--bind-to none` keeps them from being
# pinned to one.
set -u
case_=$1 tlmc=$2 run=$3 root=$4 work=$5 mpirun=$6
py=${TLM_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
models=$work/models

. "$here/../expect.sh"   # expect, check, start_case
start_case "$work/$case_"
same() { "$py" "$root/tests/crash/same.py" "$@"; }
# Under mpirun stderr also carries mpirun's own report of a rank's exit:
# our message is checked by count instead of "the only line".
one_line_statuses=none
mpi() { local np=$1; shift; "$mpirun" --oversubscribe --allow-run-as-root --bind-to none -np "$np" "$@"; }
# count PATTERN: how many lines of the last expect's output hold it
count() { cat "$tmp/out" "$tmp/err" | grep -c -- "$1"; }
once() {
  local n; n=$(count "$1")
  if [ "$n" = 1 ]; then echo "ok: '$1' told once"; else echo "FAIL: '$1' told $n times"; cat "$tmp/err"; fail=1; fi
}

train() { "$run" train "$models/$1.so" --threads 1 --overwrite "${@:2}"; }

# equal MODEL [STEPS]: STEPS (its train block's, default 20) steps of 12
# sequences in micro-batches of 2 on 1, 2 and 3 ranks give one process's
# checkpoint and log, bit for bit; so does a micro-batch of 6 (one per rank
# on 2 ranks against 2 in one process).
equal() {
  local m=$1 steps=${2:-20}
  expect 0 "done: $steps steps" "$m: one process, 6 micro-batches" -- train "$m" --ckpt one --accumulate 6 --log one.jsonl
  for np in 1 2 3; do
    local a=$((6 / np))
    expect 0 "done: $steps steps" "$m: $np rank(s), $a micro-batches each" -- \
      mpi "$np" "$run" train "$models/$m.so" --threads 1 --overwrite --ckpt "p$np" --accumulate "$a" --log "p$np.jsonl"
    check "$m: $np rank(s): the checkpoint's tensors bit-identical to one process's" -- \
      same ckpt one/checkpoint.safetensors "p$np/checkpoint.safetensors"
    check "$m: $np rank(s): the same losses and gradient norms logged" -- same log one.jsonl "p$np.jsonl"
    # mpirun gives the ranks a terminal even when its output goes to a file
    check "$m: $np rank(s): plain lines in a file, no live line" -- \
      sh -c "grep -q 'grad norm' '$tmp/out' && ! grep -q \"\$(printf '\\r')\" '$tmp/out'"
  done
  if [ "$m" = tiny ]; then
    expect 0 "done: 20 steps" "one process, 2 micro-batches of 6" -- train tiny --ckpt one6 --accumulate 2
    expect 0 "on 2 ranks, 1 micro-batch of 6" "2 ranks, 1 micro-batch of 6 each" -- \
      mpi 2 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt two6
    check "2 ranks of one micro-batch each: bit-identical to one process" -- \
      same ckpt one6/checkpoint.safetensors two6/checkpoint.safetensors
  fi
}

case $case_ in

compile)
  mkdir -p "$models"
  for m in tiny tiny_gated tiny_titans tiny_hope wide; do
    expect 0 "" "tlmc --model $m" -- "$tlmc" "$here/models.tlm" --model "$m" -o "$models/$m.so"
  done
  ;;

equal_tiny) equal tiny ;;
equal_gated) equal tiny_gated ;;
equal_titans) equal tiny_titans ;;
equal_hope) equal tiny_hope ;;
# three buckets: the chain starts during the last micro-batch's backward
equal_wide) equal wide 6 ;;

batch)
  expect 2 "--batch 8 is not divisible by 3 ranks x --accumulate 1" "batch 8 on 3 ranks: a usage error" -- \
    mpi 3 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt b --batch 8
  once "is not divisible"
  expect 2 "--batch 12 is not divisible by 2 ranks x --accumulate 4" "batch 12 on 2 ranks of 4 micro-batches" -- \
    mpi 2 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt b --accumulate 4
  once "is not divisible"
  check "no checkpoint written" -- test ! -e b/checkpoint.safetensors
  # A start-up failure on rank 1 alone: held back there, told by rank 0.
  expect 2 "rank 1 of 2: tlm-run train: --lr must be > 0" "a bad flag on rank 1 alone: rank 0 names it" -- \
    "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
    -np 1 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt c : \
    -np 1 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt c --lr -1
  once "lr must be"
  # A dry run on every rank: the settings, and how the ranks share the
  # step's micro-batches (it once crashed joining a chain it never made)
  expect 0 "^ranks 2 (2 micro-batches a rank)$" "a dry run on 2 ranks" -- \
    timeout 60 "$mpirun" --oversubscribe --allow-run-as-root --bind-to none -np 2 \
    "$run" train "$models/tiny.so" --threads 1 --ckpt d --batch 8 --accumulate 2 --dry-run
  check "... accumulate is the step's micro-batches over the ranks" -- grep -q '^accumulate 4$' "$tmp/out"
  ;;

mismatch)
  # Ranks started with different commands (mpirun's `-np 1 A : -np 1 B`)
  # run one job or none: rank 0 names the first rank that differs, every
  # rank exits 1 before the first step. A different --stop-at or --help on
  # one rank would leave the others waiting in a collective: `timeout`
  # turns such a hang into a failure here.
  pair() { # pair PATTERN DESCRIPTION -- RANK0_ARGS... -- RANK1_ARGS...
    local pattern=$1 what=$2; shift 3
    local a0=() a1=(); while [ "$1" != -- ]; do a0+=("$1"); shift; done; shift; a1=("$@")
    expect 1 "$pattern" "$what" -- timeout 30 "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
      -np 1 "$run" train "${a0[@]}" --threads 1 : -np 1 "$run" train "${a1[@]}" --threads 1
    once "rank 1 of 2"
  }
  tiny=("$models/tiny.so" --ckpt m --overwrite --steps 2)
  data=$root/data/austen
  pair "rank 1 of 2 has different training settings from rank 0's (--lr differs, the first that does)" "another --lr on rank 1, named" -- \
    "${tiny[@]}" -- "${tiny[@]}" --lr 0.01
  check "rank 0 took back the checkpoint folder it had made" -- test ! -e m
  # a launcher's variables that say 2 processes where MPI sees 1 (another
  # MPI's mpiexec): each would train the whole batch alone
  expect 1 "started as one of 2 processes (OMPI_COMM_WORLD_SIZE) but MPI sees this one alone" \
    "OMPI_COMM_WORLD_SIZE=2 without mpirun: refused" -- \
    env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 timeout 60 "$run" train "${tiny[@]}" --threads 1
  check "... before making the checkpoint folder" -- test ! -e m
  pair "rank 1 of 2 has different training settings from rank 0's (--stop-at differs" "another --stop-at on rank 1 (a hang before)" -- \
    "${tiny[@]}" --steps 4 --stop-at 2 -- "${tiny[@]}" --steps 4 --stop-at 3
  pair "rank 1 of 2 was given different flags from rank 0's (--help or --dry-run" "--help on rank 1 alone (a hang before)" -- \
    "${tiny[@]}" -- "${tiny[@]}" --help
  pair "rank 1 of 2 read different training data from rank 0's" "other data on rank 1" -- \
    "${tiny[@]}" --data "$data/emma.txt" -- "${tiny[@]}" --data "$data/persuasion.txt"
  pair "rank 1 of 2 loaded a different model.so from rank 0's" "another model on rank 1" -- \
    "${tiny[@]}" -- "$models/wide.so" --ckpt m --overwrite --steps 2
  expect 0 "stopped at step 1" "one process stops at step 1" -- train tiny --ckpt old --accumulate 2 --stop-at 1
  cp -r old new
  expect 0 "stopped at step 2" "... and goes on to step 2 in a copy" -- \
    "$run" train "$models/tiny.so" --threads 1 --ckpt new --resume --stop-at 2
  pair "rank 1 of 2 resumed a different checkpoint from rank 0's" "rank 1 resumes a stale copy" -- \
    "$models/tiny.so" --ckpt new --resume --stop-at 3 -- "$models/tiny.so" --ckpt old --resume --stop-at 3
  check "the checkpoint rank 0 resumed is untouched" -- test "$(same step new/checkpoint.safetensors)" = 2
  # the same data named two ways is the same data
  expect 0 "done: 2 steps" "one folder named two ways on two ranks" -- \
    "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
    -np 1 "$run" train "${tiny[@]}" --threads 1 --data "$data" : \
    -np 1 "$run" train "${tiny[@]}" --threads 1 --data "$data/../austen/"
  ;;

resume)
  # Uninterrupted: one process, micro-batches of 6.
  expect 0 "done: 20 steps" "one process, 20 steps" -- train tiny_hope --ckpt full --accumulate 2 --log full.jsonl
  expect 0 "stopped at step 10" "2 ranks stop at step 10" -- \
    mpi 2 "$run" train "$models/tiny_hope.so" --threads 1 --overwrite --ckpt a --stop-at 10 --log a.jsonl
  cp -r a b
  cp a.jsonl b.jsonl
  expect 0 "resuming at step 10" "2 ranks resume" -- \
    mpi 2 "$run" train "$models/tiny_hope.so" --threads 1 --ckpt a --resume --log a.jsonl
  check "stopped and resumed on 2 ranks: bit-identical to the uninterrupted run" -- \
    same ckpt full/checkpoint.safetensors a/checkpoint.safetensors
  check "... and the same log" -- same log full.jsonl a.jsonl
  expect 0 "resuming at step 10" "one process resumes the 2 ranks' checkpoint" -- \
    "$run" train "$models/tiny_hope.so" --threads 1 --ckpt b --resume --log b.jsonl
  check "resumed by one process (2 micro-batches): bit-identical" -- \
    same ckpt full/checkpoint.safetensors b/checkpoint.safetensors
  expect 0 "stopped at step 10" "one process, 2 micro-batches, stops at step 10" -- \
    train tiny_hope --ckpt c --accumulate 2 --stop-at 10
  cp -r c d
  expect 0 "resuming at step 10" "2 ranks resume one process's checkpoint" -- \
    mpi 2 "$run" train "$models/tiny_hope.so" --threads 1 --ckpt c --resume
  check "resumed on 2 ranks: bit-identical" -- same ckpt full/checkpoint.safetensors c/checkpoint.safetensors
  expect 2 "2 micro-batches, which 3 ranks cannot share" "3 ranks cannot share 2 micro-batches" -- \
    mpi 3 "$run" train "$models/tiny_hope.so" --threads 1 --ckpt d --resume
  once "cannot share"
  expect 1 "--accumulate 1 on 3 ranks runs 3 micro-batches a step, the checkpoint's steps run 2" \
    "3 ranks x 1 micro-batch: another micro-batch size, refused in the flag's terms" -- \
    mpi 3 "$run" train "$models/tiny_hope.so" --threads 1 --ckpt d --resume --accumulate 1
  once "micro-batches a step"
  expect 0 "resuming at step 10" "2 ranks x --accumulate 1: the checkpoint's 2 micro-batches, accepted" -- \
    mpi 2 "$run" train "$models/tiny_hope.so" --threads 1 --ckpt d --resume --accumulate 1 --stop-at 11
  ;;

killed)
  # Rank 1 dies (SIGKILL) at step 7, between its backward and the update;
  # the checkpoint of step 5 is rank 0's, whole.
  expect_status=0
  "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
    -np 1 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt k : \
    -np 1 -x TLM_TEST_KILL_AT=step:7 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt k \
    >"$tmp/out" 2>"$tmp/err" || expect_status=$?
  if [ "$expect_status" != 0 ]; then echo "ok: the job failed (exit $expect_status)"
  else echo "FAIL: the job exited 0"; fail=1; fi
  if grep -q "rank 1 .*exited on signal 9" "$tmp/out" "$tmp/err"; then echo "ok: mpirun names rank 1 and SIGKILL"
  else echo "FAIL: no line names rank 1:"; cat "$tmp/err"; fail=1; fi
  once "rank 1 .*exited on signal 9"
  check "the last checkpoint (step 5) stays" -- test "$(same step k/checkpoint.safetensors)" = 5
  check "no temporary file left beside it" -- test "$(ls -A k)" = checkpoint.safetensors
  expect 0 "done: 20 steps" "it resumes" -- "$run" train "$models/tiny.so" --threads 1 --ckpt k --resume
  ;;

nan)
  # Rank 1's loss is NaN at step 7: every rank stops there, rank 0 tells.
  expect 1 "step 7: the loss is NaN on rank 1 of 2" "a NaN on rank 1 stops both" -- \
    "$mpirun" --oversubscribe --allow-run-as-root --bind-to none \
    -np 1 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt n : \
    -np 1 -x TLM_TEST_KILL_AT=nan_loss:7 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt n
  once "the loss is NaN"
  check "the last checkpoint (step 5) stays" -- test "$(same step n/checkpoint.safetensors)" = 5
  ;;

signals)
  # stop_job CKPT SIGNAL WHO: 2 ranks train into CKPT; at step 5 SIGNAL goes
  # to WHO (mpirun, or rank1); every rank stops after the same step, with
  # one "interrupted" line naming the signal and rank 0's checkpoint of
  # that step. Sets status (mpirun's) and stopped (the step).
  stop_job() {
    local ckpt=$1 sig=$2 who=$3 job kids reached=
    "$mpirun" --oversubscribe --allow-run-as-root --bind-to none -np 2 \
      "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt "$ckpt" --steps 100000 >"$tmp/out" 2>"$tmp/err" &
    job=$!   # mpirun; the ranks are its children
    for _ in $(seq 300); do
      kids=$(pgrep -P "$job" -f "tlm-run train" | sort -n)
      [ "$(echo "$kids" | wc -w)" = 2 ] && grep -q "step  *5/" "$tmp/out" && reached=1 && break
      sleep 0.1
    done
    [ -n "$reached" ] || { echo "FAIL: the job never reached step 5 in 30 s"; fail=1; }
    if [ "$who" = mpirun ]; then kill -"$sig" "$job"; else kill -"$sig" "$(echo "$kids" | tail -1)"; fi
    status=0
    wait "$job" || status=$?
    stopped=$(sed -n "s/.*interrupted at step \([0-9]*\) of 100000 (SIG$sig).*/\1/p" "$tmp/out")
    if [ -n "$stopped" ]; then echo "ok: SIG$sig to $who: interrupted at step $stopped"
    else echo "FAIL: no 'interrupted at step ... (SIG$sig)'"; cat "$tmp/out" "$tmp/err" | tail -5; fail=1; fi
    once "interrupted at step"
    check "the checkpoint is at that step" -- test "$(same step "$ckpt"/checkpoint.safetensors)" = "$stopped"
  }
  # SIGTERM to rank 1 alone: rank 0's checkpoint is one process's stopped
  # at that step.
  stop_job s TERM rank1
  if [ "$status" != 0 ]; then echo "ok: the job's status is $status"; else echo "FAIL: status 0"; fail=1; fi
  expect 0 "stopped at step $stopped" "one process stops at the same step" -- \
    train tiny --ckpt one --steps 100000 --accumulate 2 --stop-at "$stopped"
  check "the ranks' checkpoint is one process's, bit for bit" -- \
    same ckpt one/checkpoint.safetensors s/checkpoint.safetensors
  # SIGUSR1 to mpirun itself: Open MPI passes it on to every rank at once
  # (its Ctrl-C reaches them as SIGTERM a second late, SIGKILL a second
  # after).
  stop_job u USR1 mpirun
  if [ "$status" = 138 ]; then echo "ok: mpirun's status is 138 (SIGUSR1's)"; else echo "FAIL: status $status"; fail=1; fi
  ;;

profile)
  expect 0 "communication" "--profile on 2 ranks: compute, communication, wait" -- \
    mpi 2 "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt p --profile --log p.jsonl
  check "rank 0 of 2 in the table" -- grep -q "rank 0 of 2, a step: compute" "$tmp/out"
  check "rank 1 of 2 in the table (gathered by rank 0)" -- grep -q "rank 1 of 2, a step: compute" "$tmp/out"
  check "each rank's split in the log" -- grep -q '"per_rank": \[{"step_seconds": [0-9.e-]*, "comm_seconds"' p.jsonl
  check "comm_seconds and wait_seconds in the log's profile" -- \
    grep -q '"ranks": 2, "comm_seconds": [0-9.e-]*, "wait_seconds"' p.jsonl
  check "tiny's one bucket: passed on after the backward" -- \
    grep -q "this rank passed on 0 of its 20 gradient buckets during the backward" "$tmp/out"
  # wide's three buckets: on rank 0, whose sum waits on no one, the two
  # above the embedding's go during the backward, every step.
  expect 0 "communication" "--profile on 2 ranks, wide" -- \
    mpi 2 "$run" train "$models/wide.so" --threads 1 --overwrite --ckpt w --profile --log w.jsonl
  check "wide: 12 of 18 buckets during the backward (rank 0)" -- \
    grep -q "this rank passed on 12 of its 18 gradient buckets during the backward" "$tmp/out"
  check "the counts in the log" -- grep -q '"buckets": 18, "early_buckets": 12' w.jsonl
  ;;

emulated)
  # The device path's chain on the emulated device (TLM_TEST_DEVICE, device
  # memory is host memory): its stand-in for NCCL runs the same chain over
  # MPI with the device's additions. 2 ranks against one process, in fp32
  # and in bf16, Hope's slow level included.
  export TLM_TEST_DEVICE=emulated
  for p in fp32 bf16; do
    expect 0 "done: 10 steps" "emulated device, $p: one process, 2 micro-batches" -- \
      train tiny_hope --device cuda --precision "$p" --steps 10 --ckpt "one_$p" --accumulate 2
    expect 0 "done: 10 steps" "emulated device, $p: 2 ranks" -- \
      mpi 2 -x TLM_TEST_DEVICE "$run" train "$models/tiny_hope.so" --device cuda --precision "$p" --steps 10 \
      --threads 1 --overwrite --ckpt "two_$p"
    check "emulated device, $p: 2 ranks bit-identical to one process" -- \
      same ckpt "one_$p/checkpoint.safetensors" "two_$p/checkpoint.safetensors"
  done
  ;;

emulated_overlap)
  # The device path's overlap (docs/gpu.md "Streams and events"): on wide's
  # three buckets, 2 ranks of 2 micro-batches queue the chain on the comm
  # stream during the last backward (rank 0: the two buckets above the
  # embedding's, every step) and give one process's bits. Then the
  # negative check: with the compute stream's wait for the chain moved
  # after the optimizer at step 1 (test hook chain_no_wait), the emulated
  # device's deferred comm stream leaves the gradients unreduced when the
  # optimizer reads them, and the result must differ. Last, a NaN on one
  # rank before its chain started.
  export TLM_TEST_DEVICE=emulated
  expect 0 "done: 2 steps" "emulated device, wide: one process, 4 micro-batches" -- \
    train wide --device cuda --precision fp32 --steps 2 --ckpt one --accumulate 4
  expect 0 "done: 2 steps" "emulated device, wide: 2 ranks of 2 micro-batches, --profile" -- \
    mpi 2 -x TLM_TEST_DEVICE "$run" train "$models/wide.so" --device cuda --precision fp32 --steps 2 \
    --threads 1 --overwrite --ckpt two --accumulate 2 --profile --log two.jsonl
  check "rank 0 queued 4 of its 6 buckets during the backward" -- \
    grep -q "this rank passed on 4 of its 6 gradient buckets during the backward" "$tmp/out"
  check "the counts in the log" -- grep -q '"buckets": 6, "early_buckets": 4' two.jsonl
  check "2 ranks with the chain beside the backward: bit-identical to one process" -- \
    same ckpt one/checkpoint.safetensors two/checkpoint.safetensors
  expect 0 "done: 2 steps" "2 ranks, the optimizer not waiting for the chain at step 1" -- \
    mpi 2 -x TLM_TEST_DEVICE -x TLM_TEST_KILL_AT=chain_no_wait:1 "$run" train "$models/wide.so" --device cuda \
    --precision fp32 --steps 2 --threads 1 --overwrite --ckpt nowait --accumulate 2
  expect 1 "tensors differ" "without the wait the parameters differ from one process's" -- \
    same ckpt one/checkpoint.safetensors nowait/checkpoint.safetensors
  # Rank 1's second micro-batch's loss is NaN: it starts its chain after
  # the loop, as rank 0 expects of it, and both stop with one line.
  expect 1 "step 1: the loss is NaN on rank 1 of 2" "a NaN on rank 1 before its chain started" -- \
    "$mpirun" --oversubscribe --allow-run-as-root --bind-to none -x TLM_TEST_DEVICE \
    -np 1 "$run" train "$models/wide.so" --device cuda --precision fp32 --steps 2 --threads 1 --overwrite \
    --ckpt nan --accumulate 2 : \
    -np 1 -x TLM_TEST_KILL_AT=nan_loss:2 "$run" train "$models/wide.so" --device cuda --precision fp32 --steps 2 \
    --threads 1 --overwrite --ckpt nan --accumulate 2
  once "the loss is NaN"
  ;;

study)
  # tlm-run study under mpirun: one process, whose trainings are plain
  # processes (each took mpirun's variables for its own: the second
  # failed in MPI_Init, and the study with it)
  cat > study.tlm <<'TLM'
model a { vocab = 256; context = 16; d_model = 16; layers = 1; heads = 2; d_ff = 32; }
model b : a { d_ff = 48; }
study s {
    variants = [a, b];
    baseline = b;
    seeds = 1;
    train { steps = 4; batch = 2; context = 16; eval_every = 2; eval_batches = 1; ckpt_every = 2; log_every = 2; }
}
TLM
  TLMC=$tlmc expect 0 "study s: 2 runs" "a study under mpirun -np 1: both runs train" -- \
    mpi 1 "$run" study study.tlm --out st --threads 1 --jobs 2 --eval-tokens 1000
  check "... both runs' results" -- test -s st/runs/a/seed1/result.json -a -s st/runs/b/seed1/result.json
  # as two processes: two studies in one folder, one refused by its lock
  # and mpirun ending the other; refused before anything starts
  TLMC=$tlmc expect 2 "a study is one process" "a study under mpirun -np 2 is refused" -- \
    mpi 2 "$run" study study.tlm --out st2 --threads 1
  check "... and nothing made" -- test ! -e st2
  # another command under mpirun -np 2 runs whole in each rank, which the
  # first says once; with -np 1 nothing is said
  expect 0 "note: started as one of 2 processes (OMPI_COMM_WORLD_SIZE): each runs .info. whole" \
    "info under mpirun -np 2: a note" -- mpi 2 "$run" info "$models/tiny.so"
  once "note: started as one of"
  expect 0 "" "info under mpirun -np 1" -- mpi 1 "$run" info "$models/tiny.so"
  check "... says nothing of processes" -- sh -c "! grep -q 'started as one of' '$tmp/err'"
  ;;
bundled_mpi)
  # scripts/bundle_mpi.sh's Open MPI (how gpu_check.sh gets an mpirun on a
  # GPU machine without one), with the system's hidden: 2 ranks give one
  # process's bits.
  expect 0 "bundle_mpi: .* holds Open MPI" "bundle_mpi.sh copies Open MPI" -- "$root/scripts/bundle_mpi.sh" "$tmp/mpi"
  expect 0 "done: 20 steps" "one process, 2 micro-batches" -- train tiny --ckpt one --accumulate 2
  expect 0 "done: 20 steps" "2 ranks from the bundle, the system's Open MPI hidden" -- \
    "$here/without_system_mpi.sh" "$tmp/mpi" mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 \
    -x LD_LIBRARY_PATH "$run" train "$models/tiny.so" --threads 1 --overwrite --ckpt two
  check "the bundle's 2 ranks bit-identical to one process" -- same ckpt one/checkpoint.safetensors two/checkpoint.safetensors
  ;;

*) echo "unknown case $case_"; exit 2 ;;
esac
exit $fail
