#!/usr/bin/env bash
# bench/attention_sass.py on this tree (NVRTC and ptxas, no GPU): it counts
# all ten tensor-core attention kernels (the forward and dq at head size 64
# twice: 32 and 16 rows a warp), none spills, and the forward's
# key tile below the diagonal at head size 64 keeps within 6 instructions
# besides each HMMA (4.75 when written; 18.25 before, with expf, to_bf16's
# integer rounding and the mask on every tile: docs/gpu.md, Tensor cores).
# Every tile, masked or not, within 8 (3.4 to 7.0 when written).
#
#   attention_sass.sh SOURCE_ROOT WORK_DIR
set -u
root=$1
. "$root/tests/expect.sh"
start_case "$2"
py=${TLM_PYTHON:-/usr/bin/python3}

check "attention_sass.py runs" -- sh -c "'$py' '$root/bench/attention_sass.py' > '$tmp/out' 2>&1"
cat "$tmp/out"
# the working tree's rows: kernel instr regs spill | then, for each version of a
# tile (masked and unmasked, or one): instructions, HMMAs, other instructions an HMMA
awk '/^working tree/ {on = 1; next} on && /^(fwd|bwd)_/' "$tmp/out" > "$tmp/rows"
check "ten kernels counted" -- test "$(wc -l < "$tmp/rows")" = 10
check "no kernel spills" -- awk '$4 != 0 {bad = 1} END {exit bad}' "$tmp/rows"
check "the forward's tile below the diagonal, head size 64: at most 6 other instructions an HMMA" -- \
  awk '$1 == "fwd_d64" {found = 1; if (!($NF <= 6)) bad = 1} END {exit bad || !found}' "$tmp/rows"
check "every tile with products: at most 8 other instructions an HMMA, in each version" -- \
  awk -F'|' '{for (i = 2; i <= NF; i++) {split($i, f, " "); if (f[2] > 0 && !(f[3] <= 8)) bad = 1}} END {exit bad}' \
  "$tmp/rows"
exit $fail
