#!/usr/bin/env bash
# How `tlm-run train` survives crashes, full disks and signals, on the model
# of crash.tlm. One case per ctest test:
#
#   crash.sh CASE TLMC TLM_RUN SOURCE_ROOT WORK_DIR
#
#   points     kill -9 at each test-hook point (TLM_TEST_KILL_AT), resumed to
#              the end: bit-exact with an uninterrupted run (campaign.sh)
#   random     kill -9 at random moments from a seeded, printed schedule
#              (seed TLM_CRASH_SEED, default 20261; TLM_CRASH_KILLS, default 5)
#   disk_full  --log on a device or FIFO is refused; a log or checkpoint
#              write past a file-size limit (ulimit -f, write() fails with
#              EFBIG) stops with exit 1 and the last checkpoint intact;
#              export, tokenize and tlmc -o past one: exit 1, the old
#              file kept, no temporary
#   signals    SIGINT, SIGTERM and SIGHUP stop at a step boundary with a checkpoint
#              and the log flushed (exit 130, 143); a second SIGINT stops at
#              once; resuming after each gives the uninterrupted run; one
#              during a validation stops at that validation's step
#   leftovers  a start removes the stale temporaries of its checkpoint and
#              log and nothing else; a folder in use by a run is refused
#   outputs    every command's output file (tlmc -o, tokenize -o, tokenizer
#              train -o, export -o):
#              a FIFO, a folder or a link to nothing is refused; one of the
#              command's inputs is refused and stays as it was; a link to a
#              file has that file replaced and stays a link; SIGINT in the
#              middle of a write leaves no temporary; train --log
#              naming a bundled novel or the checkpoint not yet written,
#              a --ckpt too long for a path, a shard cut short mid-run
#   address_limit  under an address-space limit (ulimit -v, ulimit -d),
#              which OpenBLAS meets by retrying a failed mapping forever:
#              every command at limits from 100 MiB up in 64 MiB steps
#              exits 0, or 1 with one line, within the timeout, and runs
#              once the limit is 2 GiB; the two refusals (OpenBLAS's start,
#              its threads' buffers) are each met on the way
set -u
case_=$1 tlmc=$2 run=$3 root=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
py=${TLM_CRASH_PYTHON:-python3}
tmp=$work/$case_
rm -rf "$tmp" && mkdir -p "$tmp" && cd "$tmp" || exit 1
fail=0

case $case_ in
points) exec "$here/campaign.sh" "$tlmc" "$run" "$root" "$tmp" points ;;
random) exec "$here/campaign.sh" "$tlmc" "$run" "$root" "$tmp" random "${TLM_CRASH_KILLS:-5}" \
          "${TLM_CRASH_SEED:-20261}" ;;
esac

. "$here/../expect.sh"   # expect, check
same() { "$py" "$here/same.py" "$@"; }
# wait_for SECONDS COMMAND...: poll until the command succeeds
wait_for() {
  local n=$(($1 * 100)); shift
  for _ in $(seq $n); do "$@" && return 0; sleep 0.01; done
  return 1
}
lines() { [ -e "$1" ] && [ "$(wc -l < "$1")" -ge "$2" ]; }

"$tlmc" "$here/crash.tlm" -o crash.so || exit 1
head -c 65536 "$root/data/austen/emma.txt" > train.txt
tail -c 16384 "$root/data/austen/persuasion.txt" > val.txt
data=(--data train.txt --val val.txt --threads 1)

case $case_ in

disk_full)
  flags=("${data[@]}" --steps 20 --ckpt-every 5 --log-every 1 --eval-every 10 --eval-batches 2)
  expect 1 "/dev/full is a character device, not a regular file" "--log /dev/full is refused" -- \
    timeout 30 "$run" train crash.so "${flags[@]}" --ckpt dev --log /dev/full
  check "nothing was trained" -- test ! -e dev/checkpoint.safetensors
  mkfifo fifo
  expect 1 "fifo is a FIFO" "--log on a FIFO is refused, not waited on" -- \
    timeout 30 "$run" train crash.so "${flags[@]}" --ckpt fifo.ck --log fifo
  # /dev/stdout redirected to a file is that file: renaming the log over it
  # would replace what the output had written there.
  echo "kept" > out.txt
  expect 1 "/dev/stdout is the file standard output goes to" "--log /dev/stdout into a file is refused" -- \
    bash -c "exec '$run' train crash.so ${flags[*]} --ckpt out.ck --log /dev/stdout >> out.txt"
  check "the file standard output went to keeps its line" -- test "$(head -1 out.txt)" = kept
  echo "kept" > err.txt
  check "--log /dev/stderr into a file: exit 1, the message there, the file kept" -- \
    bash -c "'$run' train crash.so ${flags[*]} --ckpt err.ck --log /dev/stderr 2>> err.txt; test \$? = 1 &&
             test \"\$(head -1 err.txt)\" = kept && grep -q '/dev/stderr is the file standard error goes to' err.txt"

  # ulimit -f counts 1024-byte blocks. The model, copied to memory on
  # loading, must fit (its size depends on the host's vector width: 48 to
  # 74 KiB so far), and the log of 2000 steps (~240 KiB) must not; stdout
  # goes to /dev/null, out of the limit's way.
  expect 1 "cannot write the log big.jsonl: File too large; stopped at step [0-9]*, no checkpoint was written" \
    "a log record past ulimit -f 192: exit 1" -- \
    bash -c "ulimit -f 192; exec '$run' train crash.so ${data[*]} --steps 2000 --ckpt-every 0 --log-every 1 --eval-every 0 --ckpt big --log big.jsonl > /dev/null"

  expect 0 "stopped at step 10" "10 of 20 steps, a checkpoint at step 10" -- \
    "$run" train crash.so "${flags[@]}" --ckpt ck --log ck.jsonl --stop-at 10
  expect 1 "cannot write the checkpoint: .*File too large; stopped at step 15, the last checkpoint, ck/checkpoint.safetensors (step 10), is intact" \
    "resumed under ulimit -f 300, too small for the next checkpoint: exit 1" -- \
    bash -c "ulimit -f 300; exec '$run' train crash.so --ckpt ck --resume"
  check "no temporary file left beside the checkpoint" -- test "$(ls ck)" = checkpoint.safetensors
  expect 1 "cannot write the checkpoint: .*File too large" \
    "a fresh run's first checkpoint past ulimit -f 300: exit 1" -- \
    bash -c "ulimit -f 300; exec '$run' train crash.so ${data[*]} --steps 2 --eval-every 0 --ckpt fresh1/fresh2"
  check "... and the folders it made for that checkpoint are gone" -- test ! -e fresh1
  check "the checkpoint is still the one of step 10" -- test "$(same step ck/checkpoint.safetensors)" = 10
  expect 0 "done: 20 steps" "the old checkpoint resumes once there is room" -- \
    "$run" train crash.so --ckpt ck --resume
  expect 0 "done: 20 steps" "20 steps uninterrupted" -- \
    "$run" train crash.so "${flags[@]}" --ckpt straight --log straight.jsonl
  check "full disk + resume == uninterrupted: tensors" -- same ckpt ck/checkpoint.safetensors straight/checkpoint.safetensors
  check "full disk + resume == uninterrupted: log" -- same log ck.jsonl straight.jsonl

  # The other writers past a file-size limit: an error (EFBIG), the old
  # file kept and no temporary left, not a death by SIGXFSZ mid-write
  # (the model, 48 to 74 KiB, must load and its f32 GGUF, 166 KiB, must
  # not fit; a shard of 64 KiB of text is ~100 KiB; the model's kernels
  # object is more than 8 KiB on any host).
  echo old > big.gguf
  expect 1 "big.gguf: cannot write: File too large" "export past ulimit -f 120: exit 1" -- \
    bash -c "ulimit -f 120; exec '$run' export crash.so --ckpt straight -o big.gguf"
  check "  the old file kept, no temporary" -- bash -c "test \"\$(cat big.gguf)\" = old && test -z \"\$(ls big.gguf.tmp.* 2>/dev/null)\""
  expect 0 "" "a tokenizer for the next case" -- "$run" tokenizer train --vocab 300 train.txt -o tok.json
  echo old > shard.bin
  expect 1 "shard.bin.*File too large" "tokenize past ulimit -f 16: exit 1" -- \
    bash -c "ulimit -f 16; exec '$run' tokenize --tokenizer tok.json train.txt -o shard.bin"
  check "  the old file kept, no temporary" -- bash -c "test \"\$(cat shard.bin)\" = old && test -z \"\$(ls shard.bin.tmp.* 2>/dev/null)\""
  cp crash.so old.so
  expect 1 "^tlmc: crash: cannot write /tmp/tlmc-[A-Za-z0-9]*/kernels.o: File too large$" "tlmc past ulimit -f 8: exit 1" -- \
    bash -c "ulimit -f 8; exec '$tlmc' '$here/crash.tlm' -o crash.so"
  check "  the old model.so kept, tlmc's temporary folder removed" -- bash -c \
    "cmp -s old.so crash.so && d=\$(grep -o '/tmp/tlmc-[A-Za-z0-9]*' '$tmp/err') && test -n \"\$d\" && test ! -e \"\$d\""
  ;;

signals)
  # A run long enough to be signalled; the same run stopped at step S
  # straight is the reference for the resumed one.
  long=("${data[@]}" --steps 100000 --ckpt-every 0 --log-every 1 --eval-every 0 --eval-batches 1)
  for sig in INT TERM HUP; do
    num=$(kill -l $sig)
    "$run" train crash.so "${long[@]}" --ckpt $sig --log $sig.jsonl > $sig.out 2> $sig.err &
    pid=$!
    wait_for 30 lines $sig.jsonl 5
    kill -$sig $pid
    wait $pid; rc=$?
    k=$(same step $sig/checkpoint.safetensors 2>/dev/null)
    check "SIG$sig: exit $((128 + num)), a checkpoint at the step it announces ($k)" -- \
      bash -c "[ $rc = $((128 + num)) ] && grep -q 'interrupted at step $k of 100000 (SIG$sig); checkpoint' $sig.out"
    check "SIG$sig: a notice on stderr" -- grep -q "stopping after this step, with a checkpoint" $sig.err
    check "SIG$sig: the log flushed up to step $k" -- bash -c "tail -1 $sig.jsonl | grep -q '^{\"step\":$k,.*}\$'"
    stop=$((k + 4))
    expect 0 "stopped at step $stop" "SIG$sig: resumed up to step $stop" -- \
      "$run" train crash.so --ckpt $sig --resume --stop-at $stop
    expect 0 "stopped at step $stop" "SIG$sig: $stop steps uninterrupted" -- \
      "$run" train crash.so "${long[@]}" --ckpt $sig.straight --log $sig.straight.jsonl --stop-at $stop
    check "SIG$sig: interrupted + resumed == uninterrupted: tensors" -- \
      same ckpt $sig/checkpoint.safetensors $sig.straight/checkpoint.safetensors
    check "SIG$sig: interrupted + resumed == uninterrupted: log" -- same log $sig.jsonl $sig.straight.jsonl
  done

  # signal_twice SIG NAME: a slow run (a big batch; a checkpoint every
  # step) into NAME, sent SIG, then SIG again while the first waits for
  # the step; its status in rc
  slow=("${data[@]}" --batch 1024 --steps 100000 --ckpt-every 1 --log-every 1 --eval-every 0 --eval-batches 1)
  signal_twice() {
    "$run" train crash.so "${slow[@]}" --ckpt "$2" --log "$2.jsonl" > "$2.out" 2> "$2.err" &
    local pid=$!
    wait_for 60 lines "$2.jsonl" 3
    kill -"$1" $pid
    wait_for 30 grep -q "stopping after this step" "$2.err"
    kill -"$1" $pid
    wait $pid; rc=$?
  }

  # Two SIGHUPs, as a closed terminal sends (the shell's, then the
  # kernel's as the session ends): still a stop at a step, with a checkpoint
  signal_twice HUP hup2
  k=$(same step hup2/checkpoint.safetensors 2>/dev/null)
  check "two SIGHUPs: exit 129, a checkpoint at the step it announces ($k), not a stop at once" -- \
    bash -c "[ $rc = 129 ] && grep -q 'interrupted at step $k of 100000 (SIGHUP); checkpoint' hup2.out && ! grep -q 'stopped at once' hup2.err"

  # Started ignoring SIGHUP (nohup), a run trains on through it; SIGINT
  # then stops it as usual
  (trap '' HUP; exec "$run" train crash.so "${long[@]}" --ckpt nohup --log nohup.jsonl > nohup.out 2> nohup.err) &
  pid=$!
  wait_for 30 lines nohup.jsonl 3
  kill -HUP $pid
  n=$(wc -l < nohup.jsonl)
  wait_for 30 lines nohup.jsonl $((n + 3))
  kill -INT $pid
  wait $pid; rc=$?
  check "SIGHUP ignored (nohup): trains on through it, then SIGINT stops it (exit 130)" -- \
    bash -c "[ $rc = 130 ] && grep -q 'interrupted at step .* (SIGINT)' nohup.out && ! grep -q SIGHUP nohup.out nohup.err"

  # Two SIGINTs: the second exits at once.
  signal_twice INT twice
  check "two SIGINTs: exit 130 at once" -- \
    bash -c "[ $rc = 130 ] && grep -q 'stopped at once; the last checkpoint is intact' twice.err && ! grep -q 'interrupted at step' twice.out"
  k=$(same step twice/checkpoint.safetensors 2>/dev/null)
  stop=$((k + 2))
  expect 0 "stopped at step $stop" "two SIGINTs: the checkpoint (step $k) resumes, up to step $stop" -- \
    "$run" train crash.so --ckpt twice --resume --stop-at $stop
  check "two SIGINTs: no temporary file left after the resumed start" -- \
    test "$(find . -path './twice*' -name '*.tmp.*' | wc -l)" = 0
  expect 0 "stopped at step $stop" "two SIGINTs: $stop steps uninterrupted" -- \
    "$run" train crash.so "${slow[@]}" --ckpt twice.straight --log twice.straight.jsonl --stop-at $stop
  check "two SIGINTs + resumed == uninterrupted: tensors" -- \
    same ckpt twice/checkpoint.safetensors twice.straight/checkpoint.safetensors
  check "two SIGINTs + resumed == uninterrupted: log" -- same log twice.jsonl twice.straight.jsonl

  # SIGINT in the middle of a validation (raised there by the test hook):
  # the run stops at that step, with its checkpoint, not after another step
  expect 130 "^interrupted at step 2 of 10 (SIGINT); checkpoint" "SIGINT during step 2's validation: stopped there" -- \
    env TLM_TEST_KILL_AT=validation:2 "$run" train crash.so "${data[@]}" --steps 10 --eval-every 2 --eval-batches 2 \
    --ckpt val_int
  check "... with step 2's checkpoint" -- test "$(same step val_int/checkpoint.safetensors 2>&1)" = 2
  # ... and in the final validation: the run is complete and says so, with
  # the signal's status all the same (a script's loop over runs stops)
  expect 130 "^done: 4 steps, .*; checkpoint val_end/checkpoint.safetensors (SIGINT came at the end: the run is complete)$" \
    "SIGINT during the final validation: done, exit 130" -- \
    env TLM_TEST_KILL_AT=validation:3 "$run" train crash.so "${data[@]}" --steps 4 --eval-every 2 --eval-batches 2 \
    --ckpt val_end
  check "... with step 4's checkpoint" -- test "$(same step val_end/checkpoint.safetensors 2>&1)" = 4

  # Two SIGINTs before the run's first checkpoint: nothing to resume, and
  # said so (not "the last checkpoint is intact")
  slow0=("${data[@]}" --batch 1024 --steps 100000 --ckpt-every 0 --log-every 1 --eval-every 0 --eval-batches 1)
  "$run" train crash.so "${slow0[@]}" --ckpt none --log none.jsonl > none.out 2> none.err &
  pid=$!
  wait_for 60 lines none.jsonl 2
  kill -INT $pid
  wait_for 30 grep -q "stopping after this step" none.err
  kill -INT $pid
  wait $pid; rc=$?
  check "two SIGINTs before the first checkpoint: exit 130, nothing saved and said so" -- \
    bash -c "[ $rc = 130 ] && grep -q \"stopped at once, before the run's first checkpoint: nothing was saved\" none.err && test ! -e none/checkpoint.safetensors"
  check "... and the folder it made for the checkpoint is gone" -- test ! -e none
  # ... and two as the first checkpoint is written (the test hook raises
  # them before its rename): its temporary goes too, and so the folder
  # (it was left, a temporary of the whole file in it, for the next start)
  expect 130 "stopped at once, before the run's first checkpoint: nothing was saved" \
    "two SIGINTs while the first checkpoint is written: exit 130" -- \
    env TLM_TEST_KILL_AT=ckpt_signals "$run" train crash.so "${data[@]}" --steps 2 --eval-every 0 --ckpt mid_write
  check "... no temporary left, nor the folder" -- test ! -e mid_write
  # ... and once a checkpoint is there: the last one intact, no temporary
  expect 0 "done: 2 steps" "a run with a checkpoint" -- "$run" train crash.so "${data[@]}" --steps 2 --eval-every 0 \
    --ckpt mid_write2
  cp mid_write2/checkpoint.safetensors step2.safetensors
  expect 130 "stopped at once; the last checkpoint is intact" "two SIGINTs while its next checkpoint is written" -- \
    env TLM_TEST_KILL_AT=ckpt_signals "$run" train crash.so "${data[@]}" --steps 4 --eval-every 0 --ckpt mid_write2 \
    --resume
  check "... the last checkpoint intact and alone in its folder" -- \
    bash -c "cmp mid_write2/checkpoint.safetensors step2.safetensors && [ \"\$(ls -A mid_write2)\" = checkpoint.safetensors ]"

  # SIGUSR1 before the loop's handler (raised by the test hook once set-up
  # is done; mpirun passes one on whenever it gets it): noted, and the run
  # stops after its first step with a checkpoint, not killed by the
  # signal's default
  expect 138 "^interrupted at step 1 of 5 (SIGUSR1); checkpoint" "SIGUSR1 during set-up: stopped after step 1" -- \
    env TLM_TEST_KILL_AT=setup "$run" train crash.so "${data[@]}" --steps 5 --eval-every 0 --ckpt usr1
  check "... with step 1's checkpoint" -- test "$(same step usr1/checkpoint.safetensors 2>&1)" = 1
  ;;

leftovers)
  flags=("${data[@]}" --steps 10 --ckpt-every 5 --log-every 1 --eval-every 0 --eval-batches 1)
  expect 0 "done: 10 steps" "a 10-step run" -- "$run" train crash.so "${flags[@]}" --ckpt ck --log log.jsonl
  # What a crash leaves, beside what it does not.
  touch ck/checkpoint.safetensors.tmp.a1B2c3 ck/checkpoint.safetensors.tmp.A1b2C3.tmp.x9Y8z7 log.jsonl.tmp.Qw3rTy
  touch ck/checkpoint.safetensors.tmp.notes ck/checkpoint.safetensors.tmp.abcdefg ck/other.safetensors.tmp.a1B2c3 \
        ck/notes.txt ck/checkpoint.safetensors.tmp.a1B2c3.bak log.jsonl.tmpxyzabc log.jsonl.tmp.a1.b2
  mkdir ck/checkpoint.safetensors.tmp.dirdir
  ln -s notes.txt ck/checkpoint.safetensors.tmp.lnklnk
  expect 0 "removed 2 temporary files of an interrupted checkpoint write" "resumed: the stale temporaries go" -- \
    "$run" train crash.so --ckpt ck --resume --steps 20
  check "only the stale temporaries of the checkpoint went" -- test "$(ls ck | tr '\n' ' ')" = \
    "checkpoint.safetensors checkpoint.safetensors.tmp.a1B2c3.bak checkpoint.safetensors.tmp.abcdefg checkpoint.safetensors.tmp.dirdir checkpoint.safetensors.tmp.lnklnk checkpoint.safetensors.tmp.notes notes.txt other.safetensors.tmp.a1B2c3 "
  check "only the stale temporary of the log went" -- test "$(ls | grep '^log' | tr '\n' ' ')" = \
    "log.jsonl log.jsonl.tmp.a1.b2 log.jsonl.tmpxyzabc "

  # One run at a time in a checkpoint folder.
  long=("${data[@]}" --steps 100000 --ckpt-every 1 --log-every 0 --eval-every 0 --eval-batches 1)
  "$run" train crash.so "${long[@]}" --ckpt busy > busy.out 2>&1 &
  pid=$!
  wait_for 30 test -e busy/checkpoint.safetensors
  expect 1 "busy is in use by another tlm-run train" "a second run on a folder in use is refused" -- \
    timeout 20 "$run" train crash.so --ckpt busy --resume
  expect 1 "busy is in use by another tlm-run train" "so is a dry run of one" -- \
    timeout 20 "$run" train crash.so --ckpt busy --overwrite --dry-run
  kill -TERM $pid
  wait $pid
  k=$(same step busy/checkpoint.safetensors)
  expect 0 "stopped at step $((k + 1))" "the folder is free once the run stopped" -- \
    timeout 60 "$run" train crash.so --ckpt busy --resume --stop-at $((k + 1))
  ;;

outputs)
  "$run" tokenizer train --vocab 300 train.txt -o tok.json > /dev/null || exit 1
  "$run" train crash.so --data train.txt --val val.txt --threads 1 --steps 1 --eval-every 0 --ckpt ck > /dev/null || exit 1
  cp "$here/crash.tlm" src.tlm
  mkfifo fifo
  mkdir folder
  ln -s missing.bin dangling
  for target in fifo folder dangling; do
    expect 1 "$target is" "tlmc -o $target is refused" -- timeout 60 "$tlmc" src.tlm -o $target
    expect 1 "$target is" "tokenize -o $target is refused" -- \
      timeout 30 "$run" tokenize --tokenizer tok.json val.txt -o $target
    expect 1 "$target is" "export -o $target is refused" -- timeout 30 "$run" export crash.so --ckpt ck -o $target
  done
  # /dev/stdout: a pipe is named as one; a file standard output is
  # redirected to (appended to) would be replaced by the rename
  expect 1 "/dev/stdout is a FIFO (named pipe), not a regular file" "export -o /dev/stdout into a pipe" -- \
    bash -c "set -o pipefail; '$run' export crash.so --ckpt ck -o /dev/stdout | cat"
  echo kept > appended.gguf
  expect 1 "/dev/stdout is the file standard output goes to" "export -o /dev/stdout >> FILE" -- \
    bash -c "'$run' export crash.so --ckpt ck -o /dev/stdout >> appended.gguf"
  expect 1 "/dev/stdout is the file standard output goes to" "tokenize -o /dev/stdout >> FILE" -- \
    bash -c "'$run' tokenize --tokenizer tok.json val.txt -o /dev/stdout >> appended.gguf"
  check "  the file is as it was" -- grep -qx kept appended.gguf
  check "the FIFO, the folder and the link are as they were" -- \
    test -p fifo -a -d folder -a -L dangling -a ! -e missing.bin
  cp src.tlm src.keep
  cp val.txt val.keep
  cp tok.json tok.keep
  cp ck/checkpoint.safetensors ck.keep
  cp crash.so so.keep
  expect 1 "is also the source" "tlmc -o its own source is refused" -- "$tlmc" src.tlm -o src.tlm
  expect 1 "is also the source" "tlmc --plot its own source is refused" -- "$tlmc" --plot src.tlm src.tlm
  check "  ... before printing anything" -- test ! -s "$tmp/out"
  expect 1 "is also a document" "tokenize -o its own input is refused" -- \
    "$run" tokenize --tokenizer tok.json val.txt -o val.txt
  expect 1 "is also the tokenizer" "tokenize -o its tokenizer is refused" -- \
    "$run" tokenize --tokenizer tok.json val.txt -o tok.json
  expect 1 "is also a text to train on" "tokenizer train -o its own text is refused" -- \
    "$run" tokenizer train --vocab 260 val.txt -o val.txt
  # a text of a DATA folder, reached by a name that is not the folder's
  mkdir texts
  cp val.txt texts/b.txt
  expect 1 "is also a text to train on" "tokenizer train -o a text of its DATA folder is refused" -- \
    "$run" tokenizer train --vocab 260 texts -o ./texts/../texts/b.txt
  expect 1 "would become a text of texts" "tokenizer train -o a new .txt in its DATA folder is refused" -- \
    "$run" tokenizer train --vocab 260 texts -o texts/new.txt
  check "  nothing written there" -- test ! -e texts/new.txt
  expect 1 "would become a text of texts" "tokenize -o a new .txt in its DATA folder is refused" -- \
    "$run" tokenize --tokenizer tok.json texts -o texts/new.txt
  check "  nothing written there" -- test ! -e texts/new.txt
  # a tokenizer that is a folder (GPT-2's encoder.json and vocab.bpe)
  mkdir -p gpt2dir && cp tok.json gpt2dir/tokenizer.json
  expect 1 "inside the tokenizer's folder gpt2dir" "tokenize -o a file of its tokenizer's folder is refused" -- \
    "$run" tokenize --tokenizer gpt2dir val.txt -o gpt2dir/tokenizer.json
  check "  the tokenizer is as it was" -- cmp -s tok.json gpt2dir/tokenizer.json
  expect 1 "is also a document" "tokenize -o a text of its DATA folder is refused" -- \
    "$run" tokenize --tokenizer tok.json texts -o texts/b.txt
  check "  the folder's text is as it was" -- cmp -s texts/b.txt val.keep
  # train --log: its first write replaced the file it names
  cp train.txt train.keep
  tr=(train crash.so --threads 1 --steps 2 --eval-every 0)
  expect 1 "is also the data" "train --log the data is refused" -- "$run" "${tr[@]}" --data train.txt --ckpt ckl --log train.txt
  expect 1 "is also the data" "train --log the validation text is refused" -- \
    "$run" "${tr[@]}" --data train.txt --val val.txt --ckpt ckl --log val.txt
  expect 1 "is also a text of the data" "train --log a text of the DATA folder is refused" -- \
    "$run" "${tr[@]}" --data texts --ckpt ckl --log texts/b.txt
  expect 1 "is also the model" "train --log the model is refused" -- "$run" "${tr[@]}" --data train.txt --ckpt ckl --log crash.so
  # ... and a new file the next run on the folder would read as data
  expect 1 "\-\-log texts/log.txt would become a text of texts" "train --log a new .txt in its DATA folder is refused" -- \
    "$run" "${tr[@]}" --data texts --ckpt ckl --log texts/log.txt
  expect 1 "\-\-log texts/log.txt would become a text of texts" "  (in its --val folder too)" -- \
    "$run" "${tr[@]}" --data train.txt --val texts --ckpt ckl --log texts/log.txt
  expect 1 "\-\-log texts/log.txt would become a text of texts" "  (refused by --dry-run as by a run)" -- \
    "$run" "${tr[@]}" --data texts --ckpt cknew --log texts/log.txt --dry-run
  expect 1 "\-\-log texts/log.txt would become a text of texts" "  (before the checkpoint folder is made)" -- \
    "$run" "${tr[@]}" --data texts --ckpt cknew --log texts/log.txt
  check "  no checkpoint folder made" -- test ! -e cknew
  check "  nothing written there" -- test ! -e texts/log.txt
  mkdir shards
  "$run" tokenize --tokenizer tok.json val.txt -o shards/a.bin > /dev/null 2>&1
  sed 's/vocab   = 256;/vocab   = 300;/' "$here/crash.tlm" > v300.tlm && "$tlmc" v300.tlm -o v300.so || exit 1
  expect 1 "\-\-log shards/log.bin would become a shard of shards" "train --log a new .bin in a folder of shards is refused" -- \
    "$run" train v300.so --threads 1 --steps 2 --eval-every 0 --data shards --ckpt ckl --log shards/log.bin
  check "  nothing written there" -- test ! -e shards/log.bin
  # a checkpoint folder named like a text, in the DATA folder: not read
  expect 0 "" "train --ckpt texts/run.txt (a folder) in its DATA folder" -- \
    "$run" "${tr[@]}" --data texts --ckpt texts/run.txt --log ""
  expect 0 "" "  the folder is not a text: a resume on the same data" -- \
    "$run" "${tr[@]}" --data texts --ckpt texts/run.txt --log "" --resume --steps 3
  rm -r texts/run.txt
  expect 1 "is also the checkpoint" "train --log the checkpoint is refused" -- \
    "$run" "${tr[@]}" --data train.txt --ckpt ck --resume --steps 3 --log ck/checkpoint.safetensors
  check "  the inputs are as they were (data, text, model, checkpoint)" -- sh -c 'cmp -s train.txt train.keep &&
    cmp -s val.txt val.keep && cmp -s texts/b.txt val.keep && cmp -s crash.so so.keep && cmp -s ck/checkpoint.safetensors ck.keep'
  expect 1 "is also the model" "export -o the model is refused" -- "$run" export crash.so --ckpt ck -o crash.so
  expect 1 "is also the checkpoint" "export -o the checkpoint is refused" -- \
    "$run" export crash.so --ckpt ck -o ck/checkpoint.safetensors
  check "the inputs are as they were: the source" -- cmp -s src.tlm src.keep
  check "  (the text, the tokenizer)" -- sh -c 'cmp -s val.txt val.keep && cmp -s tok.json tok.keep'
  check "  (the model, the checkpoint)" -- sh -c 'cmp -s crash.so so.keep && cmp -s ck/checkpoint.safetensors ck.keep'

  # A link to a file: the file is replaced, the link stays.
  echo old > real.bin
  ln -s real.bin link.bin
  expect 0 "" "tokenize -o a link to a file" -- "$run" tokenize --tokenizer tok.json val.txt -o link.bin
  check "the link stays a link and its file holds the shard" -- \
    sh -c 'test -L link.bin && "$1" tokenize --info real.bin' sh "$run"

  # SIGINT while a shard is written: no temporary is left, the old file stays.
  for _ in 1 2 3 4 5 6 7 8; do cat "$root"/data/austen/*.txt; done > big.txt
  echo old > shard.bin
  for delay in 0.2 0.4; do
    timeout --preserve-status -s INT $delay "$run" tokenize --tokenizer tok.json --threads 1 big.txt -o shard.bin > /dev/null 2>&1
    st=$?
    check "interrupted after ${delay}s (exit $st, 130 when SIGINT ended it): no temporary left" -- \
      sh -c 'test "$(ls -a | grep -c "\.tmp\.")" = 0'
    if [ $st = 130 ]; then check "  and the old file stays" -- grep -qx old shard.bin
    elif [ $delay = 0.2 ]; then echo "FAIL: the shard was written in under 0.2 s: make big.txt bigger"; fail=1; fi
  done
  # the other signals that end a process (a reader gone, a timer, a user's):
  # they left the temporary once, as only INT, TERM and HUP removed it
  for sig in PIPE ALRM USR1 QUIT; do
    timeout --preserve-status -s $sig 0.2 "$run" tokenize --tokenizer tok.json --threads 1 big.txt -o shard.bin > /dev/null 2>&1
    st=$?
    check "SIG$sig after 0.2s (exit $st, $((128 + $(kill -l $sig))) when it ended it): no temporary left" -- \
      sh -c 'test "$(ls -a | grep -c "\.tmp\.")" = 0'
  done
  # train --log naming an input that no flag names: the bundled novels
  # (TLM_DATA here: copies), training and validation, were replaced by the
  # log; and the checkpoint the run is about to write, before it exists
  mkdir -p bundled/austen
  for f in "$root"/data/austen/*.txt; do head -c 20000 "$f" > "bundled/austen/$(basename "$f")"; done
  cp bundled/austen/emma.txt emma.before
  for novel in emma persuasion; do
    TLM_DATA=$PWD/bundled expect 1 "bundled/austen/$novel.txt is also the bundled" \
      "train --log a bundled novel ($novel) is refused" -- \
      "$run" train crash.so --threads 1 --steps 1 --eval-batches 1 --ckpt bundled.ck --log bundled/austen/$novel.txt
  done
  check "the bundled novel unchanged" -- cmp -s emma.before bundled/austen/emma.txt
  expect 1 "fresh.ck/checkpoint.safetensors is also the checkpoint" \
    "train --log the checkpoint not yet written is refused" -- \
    "$run" train crash.so "${data[@]}" --steps 2 --ckpt fresh.ck --log fresh.ck/checkpoint.safetensors
  # a --ckpt that is a FIFO: refused at once, --dry-run too (it failed
  # after the data was loaded, "cannot list the folder")
  for dry in "" --dry-run; do
    expect 1 "--ckpt fifo is a FIFO (named pipe), not a folder or a checkpoint file" "train --ckpt on a FIFO $dry" -- \
      timeout 30 "$run" train crash.so "${data[@]}" --steps 2 --ckpt fifo $dry
  done
  # a --ckpt whose checkpoint (and its temporaries) would be longer than a
  # path may be: refused before training, not after it (every step lost)
  deep=deep; for _ in $(seq 20); do deep=$deep/$(printf 'd%.0s' $(seq 199)); done
  mkdir -p "$deep"
  expect 1 "the checkpoint's path, or its name, is longer than" "a --ckpt too long for a path: refused first" -- \
    "$run" train crash.so "${data[@]}" --steps 50 --ckpt "$deep/$(printf 'x%.0s' $(seq 70))"
  check "... before a step ran" -- bash -c "! grep -q 'step ' '$tmp/out'"
  # a name of 245 bytes leaves no room for NAME.tmp.XXXXXX (255 at most);
  # one of 244 does, and trains
  expect 1 "the checkpoint's path, or its name, is longer than" "a --ckpt whose name leaves no room for its temporary" -- \
    "$run" train crash.so "${data[@]}" --steps 50 --ckpt "$(printf 'n%.0s' $(seq 233)).safetensors"
  expect 0 "" "a --ckpt name of 244 bytes trains" -- \
    "$run" train crash.so "${data[@]}" --steps 2 --ckpt "$(printf 'n%.0s' $(seq 232)).safetensors"
  # tlmc's output: lld writes through a temporary of its own, 11 bytes
  # longer than tlmc's: names of 234 to 244 bytes were too long for it
  for len in 234 244 255; do
    name=$(printf 'm%.0s' $(seq $((len - 3)))).so
    expect 0 "" "tlmc -o a name of $len bytes" -- "$tlmc" "$here/crash.tlm" -o "$name"
    check "  it loads; no temporary left" -- bash -c "'$run' info '$name' > /dev/null && ! ls -a | grep -q '\.tmp'"
    rm -f "$name"
  done
  # a token shard cut short while training reads it (through its mapping):
  # SIGBUS killed the run ("Bus error", exit 135); now one line, exit 1
  "$run" tokenize --tokenizer tok.json train.txt -o cut.bin > /dev/null || exit 1
  "$run" train v300.so --data cut.bin --threads 1 --steps 1000000 --ckpt-every 0 --eval-every 0 --log-every 1 \
    --ckpt cut.ck --log cut.jsonl > /dev/null 2> cut.err &
  pid=$!
  wait_for 60 lines cut.jsonl 3
  : > cut.bin
  status=0; wait $pid || status=$?
  check "a shard cut short mid-training: exit 1 (got $status)" -- test "$status" = 1
  check "... and one line saying so" -- grep -q "a token shard it was reading was cut short or replaced" cut.err
  # any other SIGBUS (here kill -BUS) ends the process as it would have
  "$run" tokenize --tokenizer tok.json train.txt -o bus.bin > /dev/null || exit 1
  "$run" train v300.so --data bus.bin --threads 1 --steps 1000000 --ckpt-every 0 --eval-every 0 --log-every 1 \
    --ckpt bus.ck --log bus.jsonl > /dev/null 2> bus.err &
  pid=$!
  wait_for 60 lines bus.jsonl 3
  kill -BUS $pid
  status=0; wait $pid || status=$?
  check "kill -BUS mid-training: the signal's status, 135 (got $status), no shard blamed" -- \
    bash -c "test $status = 135 && ! grep -q 'token shard' bus.err"
  ;;

address_limit)
  # Each command at each limit: a hang (the timeout's 124) or a crash fails.
  # OMP_NUM_THREADS=2 makes OpenBLAS map two buffers when it starts (one
  # on a machine of one CPU), whatever the machine's count.
  printf 'model lim_titans { vocab = 256; context = 32; d_model = 32; layers = 2; heads = 2;\n  d_ff = 64; mixer = titans; chunk = 8; }\n' > titans.tlm
  "$tlmc" titans.tlm -o titans.so || exit 1
  "$run" train crash.so "${data[@]}" --steps 2 --ckpt base > /dev/null || exit 1
  cmds=("train crash.so ${data[*]} --threads 2 --steps 2 --eval-every 0 --ckpt ck"
        "sample crash.so --ckpt base --length 8 --threads 2"
        "eval crash.so --ckpt base --data val.txt --threads 2"
        "bench titans.so --steps 1 --batch 2 --threads 2")
  : > all.err
  for mib in $(seq 100 64 2000) 2048; do
    for c in "${cmds[@]}"; do
      rm -rf ck
      status=0
      OMP_NUM_THREADS=2 bash -c "ulimit -v $((mib * 1024)); exec timeout 30 '$run' $c" > one.out 2> one.err || status=$?
      cat one.err >> all.err
      if [ "$status" = 0 ] && [ "$mib" = 2048 ]; then continue; fi
      if [ "$status" = 0 ] || { [ "$status" = 1 ] && [ "$(wc -l < one.err)" = 1 ]; }; then continue; fi
      echo "FAIL: ${c%% *} under ulimit -v ${mib} MiB: exit $status"; head -3 one.err; fail=1
    done
  done
  check "every command under every limit: exit 0, or 1 with one line; each ran at 2 GiB" -- test "$fail" = 0
  check "... refused before OpenBLAS's start where it could not" -- \
    grep -q "^tlm-run: the address-space limit (ulimit -v) leaves no room for the [0-9]* MiB OpenBLAS maps when it starts" all.err
  check "... and before its threads' buffers" -- \
    grep -q "^tlm-run train: the address-space limit (ulimit -v) leaves no room for OpenBLAS's buffers for 2 threads" all.err
  expect 1 "^tlm-run: the address-space limit (ulimit -d) leaves no room for the 128 MiB OpenBLAS maps when it starts (128 MiB for each of 1 thread:" \
    "ulimit -d too small for OpenBLAS's start: one line, exit 1" -- \
    env OMP_NUM_THREADS=1 bash -c "ulimit -d 100000; exec timeout 60 '$run' info crash.so"
  ;;

*) echo "unknown case $case_"; exit 2 ;;
esac
exit $fail
