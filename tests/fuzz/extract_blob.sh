#!/usr/bin/env bash
# Writes the model descriptor (the bytes of the tlm_model_blob symbol) of a
# compiled model.so to stdout: the seeds of fuzz_blob (corpus-blob/).
#   extract_blob.sh build/tests/model/tiny.so > corpus-blob/tiny.blob
set -euo pipefail
so=$1
read -r addr size < <(nm -D -S "$so" | awk '$4 == "tlm_model_blob" { print $1, $2 }')
# The section holding it: its address and file offset (readelf -SW, with
# the "[ N]" index column taken out so the fields line up).
read -r vaddr off < <(readelf -SW "$so" | sed 's/^ *\[ *[0-9]*\]//' |
  awk -v a=$((16#$addr)) '$3 ~ /^[0-9a-f]+$/ && $5 ~ /^[0-9a-f]+$/ {
    cmd = "printf %d 0x" $3; cmd | getline v; close(cmd)
    cmd = "printf %d 0x" $5; cmd | getline s; close(cmd)
    if (v > 0 && a >= v && a < v + s) print $3, $4 }')
skip=$((16#$addr - 16#$vaddr + 16#$off))
tail -c +$((skip + 1)) "$so" | head -c $((16#$size))
