#!/usr/bin/env bash
# Every numeric training setting end to end, at both ends of its range:
#
#   settings.sh TLMC TLM_RUN WORK_DIR
#
# The bounds are written down here, from docs/language.md, not read from
# abi/tlm_train_settings.h: the test proves that tlmc accepts each bound in a
# train { } block, that the compiled model carries it to `tlm-run train
# --dry-run` unchanged, that tlm-run's flag accepts it too, and that one step
# past it is refused by both (tlmc: exit 1 with a message naming the setting;
# tlm-run: exit 2 with one line naming the flag). It also checks the
# defaults that `tlm-run train --help` states against a model without a
# train { } block, and --dry-run's --resume path on a checkpoint.
set -u
tlmc=$1 run=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1       # a default checkpoints/ folder would land here
fail=0

# name in train {}, flag, smallest, largest, one below, one above, how a
# train { } block writes it (@ stands for the value; the optimizer and
# schedule these settings need are in the models below).
bounds=$(cat <<'EOF'
batch        --batch        1       1048576           0        1048577          batch = @;
context      --context      1       1048576           0        1048577          context = @;
steps        --steps        0       1099511627776     -1       1099511627777    steps = @;
lr           --lr           1e-45   1e30              0        1.0000001e30     optimizer = adamw(lr = @);
beta1        --beta1        0       0.9999999         -1e-300  0.99999991       optimizer = adamw(betas = (@, 0.9));
beta2        --beta2        0       0.9999999         -1e-300  0.99999991       optimizer = adamw(betas = (0.9, @));
eps          --eps          1e-45   1                 0        1.0000001        optimizer = adamw(eps = @);
weight_decay --weight-decay 0       1e30              -1e-300  1.0000001e30     optimizer = adamw(weight_decay = @);
momentum     --momentum     0       0.9999999         -1e-300  0.99999991       optimizer = sgd(momentum = @);
warmup       --warmup       0       1099511627776     -1       1099511627777    lr_schedule = cosine(warmup = @);
min_lr       --min-lr       0       1e30              -1e-300  1.0000001e30     lr_schedule = cosine(min_lr = @);
seed         --seed         0       9007199254740991  -1       9007199254740992 seed = @;
grad_clip    --grad-clip    0       1e30              -1e-300  1.0000001e30     grad_clip = @;
accumulate   --accumulate   1       1048576           0        1048577          accumulate = @;
eval_every   --eval-every   0       1099511627776     -1       1099511627777    eval_every = @;
eval_batches --eval-batches 1       1048576           0        1048577          eval_batches = @;
ckpt_every   --ckpt-every   0       1099511627776     -1       1099511627777    ckpt_every = @;
log_every    --log-every    0       1099511627776     -1       1099511627777    log_every = @;
EOF
)
# The settings that only SGD takes (with an AdamW model they are not in force).
sgd_only=" momentum "
adamw_only=" beta1 beta2 eps "

ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# A model as small as tlmc allows, with the longest context a training
# context may have, so that context's largest value fits it.
arch='vocab = 2; context = 1048576; d_model = 2; layers = 1; heads = 1; d_ff = 1;'
model() {   # model FILE TRAIN-BLOCK-BODY: writes FILE.tlm (the model's name: FILE as a name)
  printf 'model %s {\n    %s\n    train {\n%s\n    }\n}\n' "${1//[^A-Za-z0-9_]/_}" "$arch" "$2" > "$1.tlm"
}

# The train { } block that sets every setting to column $1 (3: smallest,
# 4: largest) under the given optimizer and schedule.
block() {
  local col=$1 optimizer=$2 schedule=$3 opt_args=() sched_args=() name flag v
  while read -r name flag lo hi below above how; do
    case $col in 3) v=$lo ;; 4) v=$hi ;; esac
    case $name in
      lr) opt_args+=("lr = $v") ;;
      beta1) [ "$optimizer" = adamw ] && opt_args+=("betas = ($v, $v)") ;;
      beta2) ;;   # with beta1: both at the same end
      eps) [ "$optimizer" = adamw ] && opt_args+=("eps = $v") ;;
      weight_decay) opt_args+=("weight_decay = $v") ;;
      momentum) [ "$optimizer" = sgd ] && opt_args+=("momentum = $v") ;;
      warmup) sched_args+=("warmup = $v") ;;
      min_lr) [ "$schedule" != constant ] && sched_args+=("min_lr = $v") ;;
      *) echo "        $name = $v;" ;;
    esac
  done <<< "$bounds"
  local IFS=,
  echo "        optimizer = $optimizer(${opt_args[*]});"
  echo "        lr_schedule = $schedule(${sched_args[*]});"
}

# --dry-run's value of each setting, as `key value` lines.
dry() { "$run" train "$@" --dry-run; }

# same NUMBER NUMBER: equal as doubles (awk reads numbers as strtod does).
same() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 == b + 0) }'; }

# expect_values OUTPUT COLUMN OPTIMIZER SCHEDULE WHAT: every setting in force
# under OPTIMIZER and SCHEDULE is at its bound (column 3 or 4) in the dry
# run's OUTPUT.
expect_values() {
  local out=$1 col=$2 optimizer=$3 schedule=$4 what=$5 name flag lo hi below above how want got
  while read -r name flag lo hi below above how; do
    case $optimizer in
      adamw) [[ $sgd_only == *" $name "* ]] && continue ;;
      sgd) [[ $adamw_only == *" $name "* ]] && continue ;;
    esac
    [ "$schedule" = constant ] && [ "$name" = min_lr ] && continue
    case $col in 3) want=$lo ;; 4) want=$hi ;; esac
    got=$(awk -v k="$name" '$1 == k { print $2 }' "$out")
    if [ -z "$got" ]; then bad "$what: no \`$name\` in the dry run"; sed 's/^/    /' "$out"
    elif same "$got" "$want"; then ok "$what: $name $got"
    else bad "$what: $name is $got, wanted $want"; fi
  done <<< "$bounds"
}

# ---- every setting at its smallest and largest, through tlmc and tlm-run ----

for optimizer in adamw sgd; do
  schedule=cosine
  [ $optimizer = sgd ] && schedule=constant      # also: min_lr not in force
  for end in lo hi; do
    col=3; [ $end = hi ] && col=4
    [ $end = hi ] && [ $optimizer = adamw ] && schedule=linear
    m=${end}_$optimizer
    model "$m" "$(block $col $optimizer $schedule)"
    if ! "$tlmc" "$m.tlm" -o "$m.so" > "$m.tlmc" 2>&1; then
      bad "tlmc $m.tlm (every setting at its $end end)"; cat "$m.tlm" "$m.tlmc"; continue
    fi
    ok "tlmc accepts every setting at its $end end ($optimizer, $schedule)"
    if ! dry "$m.so" > "$m.out" 2> "$m.err"; then
      bad "tlm-run train $m.so --dry-run: exit $?"; cat "$m.err"; continue
    fi
    expect_values "$m.out" $col $optimizer $schedule "$m.so"

    # The flags take the same bounds: the other end's values on this model.
    other=4; [ $col = 4 ] && other=3
    flags=()
    while read -r name flag lo hi below above how; do
      case $other in 3) flags+=("$flag" "$lo") ;; 4) flags+=("$flag" "$hi") ;; esac
    done <<< "$bounds"
    if dry "$m.so" "${flags[@]}" > "$m.flags.out" 2> "$m.flags.err"; then
      expect_values "$m.flags.out" $other $optimizer $schedule "$m.so with every flag at its other end"
    else
      bad "tlm-run train $m.so --dry-run with every flag at its other end: exit $?"; cat "$m.flags.err"
    fi
  done
done
check_nothing_written() {
  if [ -e checkpoints ]; then bad "a dry run wrote $(find checkpoints | head -3)"; else ok "dry runs wrote nothing"; fi
}
check_nothing_written

# ---- one step past each bound: refused by both ----

while read -r name flag lo hi below above how; do
  label=$name
  case $name in beta1) label='betas\[0\]' ;; beta2) label='betas\[1\]' ;; esac
  for v in "$below" "$above"; do
    case=past_${name}_${v}
    model "$case" "        ${how//@/$v}"
    "$tlmc" --check "$case.tlm" > "$case.out" 2>&1; rc=$?
    if [ $rc = 1 ] && grep -q "error: $label must be" "$case.out"; then ok "tlmc refuses $name = $v"
    else bad "tlmc $name = $v: exit $rc, wanted 1 and \"$label must be\""; cat "$case.out"; fi
    "$run" train lo_adamw.so --dry-run "$flag" "$v" > "$case.run" 2> "$case.err"; rc=$?
    if [ $rc = 2 ] && [ "$(wc -l < "$case.err")" = 1 ] && grep -q -- "^tlm-run train: $flag must be" "$case.err"
    then ok "tlm-run refuses $flag $v"
    else bad "tlm-run train --dry-run $flag $v: exit $rc, wanted 2 and one line \"$flag must be\""; cat "$case.err"; fi
  done
done <<< "$bounds"

# ---- the defaults --help states are the ones a model without train {} gets ----

printf 'model plain {\n    %s\n}\n' "${arch/context = 1048576/context = 64}" > plain.tlm
"$tlmc" plain.tlm -o plain.so && dry plain.so > plain.out 2> plain.err || { bad "plain.so: $(cat plain.err)"; }
"$run" train --help > help.out
lr=$(awk '$1 == "lr" { print $2 }' plain.out)
while read -r name flag lo hi below above how; do
  [[ $sgd_only == *" $name "* ]] && continue                  # adamw is the default
  # The line after the flag's help: "[lo, hi], default X".
  stated=$(awk -v f="$flag" '$1 == f { on = 1 } on && /default / { sub(/.*default /, ""); print; exit }' help.out)
  got=$(awk -v k="$name" '$1 == k { print $2 }' plain.out)
  case $stated in
    "the model's context") want=64 ;;
    "lr / 10") want=$(awk -v lr="$lr" 'BEGIN { printf "%.17g", lr / 10 }') ;;
    *) want=$stated ;;
  esac
  if [ -n "$stated" ] && [ -n "$got" ] && same "$got" "$want"; then ok "default $name $got (--help: $stated)"
  else bad "default $name: --help says \"$stated\", a model without train {} gets \"$got\""; fi
done <<< "$bounds"

# ---- --dry-run --resume: the checkpoint's settings, checked as a run checks them ----

cat > tiny.tlm <<'EOF'
model tiny {
    vocab = 256; context = 16; d_model = 8; layers = 1; heads = 2; d_ff = 8;
    train { batch = 2; steps = 2; eval_batches = 1; seed = 5; optimizer = sgd(lr = 0.01); }
}
EOF
if "$tlmc" tiny.tlm -o tiny.so && "$run" train tiny.so --threads 1 --ckpt ck > train.out 2>&1; then
  ok "a 2-step run of tiny.so"
  "$run" train tiny.so --ckpt ck --resume --steps 3 --dry-run > resume.out 2>&1; rc=$?
  if [ $rc = 0 ] && grep -qx "resume_step 2" resume.out && grep -qx "seed 5" resume.out && grep -qx "steps 3" resume.out \
     && grep -qx "momentum 0.9" resume.out; then ok "--resume --dry-run: the checkpoint's settings, --steps raised"
  else bad "--resume --dry-run: exit $rc"; cat resume.out; fi
  "$run" train tiny.so --ckpt ck --resume --dry-run --momentum 0.5 > resume.out 2>&1; rc=$?
  if [ $rc = 1 ] && grep -q -- "--momentum is 0.5, the checkpoint's is 0.9" resume.out; then ok "--resume --dry-run checks the trajectory"
  else bad "--resume --dry-run --momentum 0.5: exit $rc"; cat resume.out; fi
  "$run" train tiny.so --ckpt ck --resume --dry-run --steps 1 > resume.out 2>&1; rc=$?
  if [ $rc = 1 ] && grep -q "past --steps 1" resume.out; then ok "--resume --dry-run checks the step"
  else bad "--resume --dry-run --steps 1: exit $rc"; cat resume.out; fi
  "$run" train tiny.so --ckpt ck --dry-run > resume.out 2>&1; rc=$?
  if [ $rc = 1 ] && grep -q "already holds a checkpoint" resume.out; then ok "--dry-run without --resume refuses a used folder, as a run does"
  else bad "--dry-run on a used folder: exit $rc"; cat resume.out; fi
  [ "$(ls ck)" = checkpoint.safetensors ] && ok "the checkpoint folder holds only the checkpoint" || bad "ck: $(ls ck)"
else
  bad "training tiny.so"; cat train.out
fi
check_nothing_written

exit $fail
