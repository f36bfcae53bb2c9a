#!/usr/bin/env bash
# GGUF export tests (tlm-run export; docs/export.md). One case per ctest test:
#
#   run.sh CASE TLMC TLM_RUN DUMP_LOGPROBS SOURCE_ROOT WORK_DIR
#
# `prepare` compiles models.tlm, trains the tapered model and its uniform
# twin for 600 steps and exports each as f32, f16 and q8_0 into
# WORK_DIR/models (the fixture of the others); `reader` checks the files with
# the independent reader check_gguf.py; `parity_NAME` runs them in llama.cpp
# (parity.mjs); `refusals` the errors. A missing tool or package fails.
set -u
case_=$1 tlmc=$2 run=$3 dump=$4 root=$5 work=$6
py=${TLM_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
models=$work/models
. "$here/../expect.sh"   # expect, check, start_case
start_case "$work/$case_"
held_out=$root/data/austen/persuasion.txt

case $case_ in

prepare)
  rm -rf "$models"
  mkdir -p "$models"
  for m in taper uniform gated titans hope gelu ascii; do
    expect 0 "" "tlmc --model $m" -- "$tlmc" "$here/models.tlm" --model "$m" -o "$models/$m.so"
  done
  for m in taper uniform; do
    # the five novels but Persuasion, the held-out text of the parity tests
    expect 0 "done: 600 steps" "train $m, 600 steps" -- \
      "$run" train "$models/$m.so" --ckpt "$models/ck_$m" --threads 1 --overwrite
    for t in f32 f16 q8_0; do
      f=$models/$m-$t.gguf
      expect 0 "$f: .* step 600, $t, [0-9]* bytes" "export $m --type $t" -- \
        "$run" export "$models/$m.so" --ckpt "$models/ck_$m" -o "$f" --type "$t"
      size=$(stat -c %s "$f" 2>/dev/null)
      check "$m-$t.gguf: the printed size is the file's ($size bytes)" -- grep -q " $size bytes" "$tmp/out"
      cp "$tmp/out" "$models/$m-$t.out"
    done
  done
  check "taper q8_0: the ffn_down of widths 136 and 80 stay f16, and the export says so" -- \
    grep -qx "kept f16 (rows not a multiple of 32): blk.1.ffn_down.weight, blk.2.ffn_down.weight" "$models/taper-q8_0.out"
  check "uniform q8_0: every matrix quantised" -- bash -c "! grep -q 'kept f16' '$models/uniform-q8_0.out'"
  ;;

reader)
  for m in taper:deci uniform:llama; do
    for t in f32 f16 q8_0; do
      check "${m%%:*}-$t.gguf: header, metadata, offsets and values against the checkpoint" -- \
        "$py" "$here/check_gguf.py" "$models/${m%%:*}-$t.gguf" "$models/ck_${m%%:*}/checkpoint.safetensors" "$t" "${m##*:}"
    done
  done
  # The reader must see damage: a tensor's byte, the version, an offset.
  ck=$models/ck_taper/checkpoint.safetensors
  f=$models/taper-f32.gguf
  size=$(stat -c %s "$f")
  cp "$f" "$tmp/byte.gguf"; printf '\x55' | dd of="$tmp/byte.gguf" bs=1 seek=$((size - 7)) conv=notrunc 2>/dev/null
  cp "$f" "$tmp/version.gguf"; printf '\x02' | dd of="$tmp/version.gguf" bs=1 seek=4 conv=notrunc 2>/dev/null
  head -c $((size - 64)) "$f" > "$tmp/short.gguf"
  for bad in byte version short; do
    check "the reader rejects $bad.gguf" -- bash -c "! '$py' '$here/check_gguf.py' '$tmp/$bad.gguf' '$ck' f32 deci"
  done
  check "the reader rejects a q8_0 file read as f16" -- \
    bash -c "! '$py' '$here/check_gguf.py' '$models/taper-q8_0.gguf' '$ck' f16 deci"
  # q8_0 asked for where no matrix has rows of whole 32-blocks: all f16, and
  # general.file_type 1 (f16) without a quantization_version
  expect 0 "" "tlmc --model narrow (d_model 48, width 80)" -- "$tlmc" "$here/models.tlm" --model narrow -o "$tmp/narrow.so"
  # trained on windows of 16 of its 256: context_length is 16 (llama.cpp's
  # n_ctx_train), and the export says it is not the model's
  expect 0 "done: 2 steps" "train narrow, 2 steps" -- \
    "$run" train "$tmp/narrow.so" --ckpt "$tmp/ck_narrow" --steps 2 --batch 2 --threads 1 --context 16
  expect 0 "q8_0" "export narrow --type q8_0" -- \
    "$run" export "$tmp/narrow.so" --ckpt "$tmp/ck_narrow" -o "$tmp/narrow.gguf" --type q8_0
  check "... context_length 16, the training windows, said" -- \
    grep -qx "context_length 16: the checkpoint's training windows, not the model's context (256)" "$tmp/out"
  check "narrow-q8_0.gguf: every matrix f16, file type f16, context_length 16" -- \
    "$py" "$here/check_gguf.py" "$tmp/narrow.gguf" "$tmp/ck_narrow/checkpoint.safetensors" q8_0 llama
  # 40 layers of them: the list of what stayed f16 names all 282 matrices
  # (a fixed buffer once cut it short after about 180, mid-name, exit 0)
  expect 0 "" "tlmc --model deep (narrow, 40 layers)" -- "$tlmc" "$here/models.tlm" --model deep -o "$tmp/deep.so"
  expect 0 "done: 1 step" "train deep, 1 step" -- \
    "$run" train "$tmp/deep.so" --ckpt "$tmp/ck_deep" --steps 1 --batch 2 --threads 1
  expect 0 "q8_0" "export deep --type q8_0" -- \
    "$run" export "$tmp/deep.so" --ckpt "$tmp/ck_deep" -o "$tmp/deep.gguf" --type q8_0
  check "... its kept-f16 line names all 282 matrices, the last one whole" -- bash -c \
    "grep '^kept f16' '$tmp/out' | tr ',' '\n' | grep -c '\.weight\$' | grep -qx 282 && grep -q 'blk\.39\.ffn_down\.weight, output\.weight\$' '$tmp/out'"
  ;;

parity_taper | parity_uniform)
  m=${case_#parity_}
  node=${TLM_NODE:-node}
  check "llama.cpp runs $m's GGUF files as tlm does" -- "$node" "$here/parity.mjs" "$run" "$dump" "$models" "$m" "$held_out"
  cat "$tmp/check"
  ;;

refusals)
  for m in gated:"Gated Attention" titans:Titans hope:Hope-attention gelu:GELU ascii:"256"; do
    expect 1 "${m##*:}" "export ${m%%:*}: refused, naming what llama.cpp lacks" -- \
      "$run" export "$models/${m%%:*}.so" -o "$tmp/${m%%:*}.gguf"
    check "export ${m%%:*}: no file written" -- bash -c "[ -z \"\$(ls '$tmp' | grep gguf)\" ]"
  done
  # The checkpoint errors are eval's, word for word.
  s=$models/taper.so
  for c in "$tmp/none" "$models/ck_uniform"; do
    "$run" eval "$s" --ckpt "$c" --max-tokens 64 > /dev/null 2> "$tmp/eval.err"
    expect 1 "" "export with --ckpt $(basename "$c")" -- "$run" export "$s" --ckpt "$c" -o "$tmp/x.gguf"
    check "the same message as eval's" -- diff <(sed 's/^tlm-run eval:/tlm-run export:/' "$tmp/eval.err") "$tmp/err"
  done
  ck=(--ckpt "$models/ck_taper")
  expect 1 "the folder .* does not exist" "a folder that does not exist" -- \
    "$run" export "$s" "${ck[@]}" -o "$tmp/no/such/dir/x.gguf"
  mkdir -p "$tmp/adir"
  expect 1 "adir is a folder: name the file to write" "a folder in the target's place" -- "$run" export "$s" "${ck[@]}" -o "$tmp/adir"
  check "no temporary left behind" -- bash -c "[ -z \"\$(ls '$tmp' | grep '\\.tmp\\.')\" ]"
  echo keep > "$tmp/keep.gguf"
  expect 1 "Titans" "a refused export leaves the target as it was" -- "$run" export "$models/titans.so" -o "$tmp/keep.gguf"
  check "the old file intact" -- grep -qx keep "$tmp/keep.gguf"
  # a run that diverged (a learning rate of 1e30: NaN at step 2) keeps its
  # step-1 checkpoint, whose weights of about 1e29 float16 cannot hold:
  # f16 and q8_0 are refused, naming the tensor; f32 holds them
  "$run" train "$s" --ckpt "$tmp/ck_div" --steps 4 --batch 2 --threads 1 --lr 1e30 --grad-clip 0 --ckpt-every 1 \
    > /dev/null 2>&1
  for t in f16 q8_0; do
    expect 1 "token_embd.weight has weights up to .*, beyond .*float16.* (did the run diverge? --type f32 keeps them)" \
      "export --type $t of a diverged run's weights: refused" -- \
      "$run" export "$s" --ckpt "$tmp/ck_div" -o "$tmp/div.gguf" --type $t
  done
  check "... no file written" -- test ! -e "$tmp/div.gguf"
  expect 0 "step 1, f32" "... --type f32 writes them" -- "$run" export "$s" --ckpt "$tmp/ck_div" -o "$tmp/div.gguf"
  expect 2 "expected f32, f16 or q8_0" "--type q4_0" -- "$run" export "$s" "${ck[@]}" -o "$tmp/x.gguf" --type q4_0
  expect 2 "no output file" "no -o" -- "$run" export "$s" "${ck[@]}"
  expect 2 "output given twice (.*x.gguf., then .*y.gguf.): the command writes one output" "-o twice" -- \
    "$run" export "$s" "${ck[@]}" -o "$tmp/x.gguf" -o "$tmp/y.gguf"
  # an empty path is a usage error, not the root ("" joined with "/")
  expect 2 "MODEL.so is empty" "an empty MODEL.so" -- "$run" export "" "${ck[@]}" -o "$tmp/x.gguf"
  expect 2 "--output is empty" "-o ''" -- "$run" export "$s" "${ck[@]}" -o ""
  expect 2 "--ckpt is empty" "--ckpt ''" -- "$run" export "$s" --ckpt "" -o "$tmp/x.gguf"
  ;;

*)
  echo "unknown case $case_"
  exit 2
  ;;
esac
exit $fail
