#!/usr/bin/env bash
# tlmc -o and tlm-run info: a model.so round trip, one kernel per distinct
# width, a generic-CPU build, and every kind of bad shared object rejected
# with exit status 1 and a one-line reason (never a crash).
# Any step that fails outside expect() fails the test (set -e, and the ERR
# trap says where), so a broken setup cannot pass as a refused file.
set -euo pipefail
trap 'echo "FAIL: line $LINENO: a step failed (exit $?)"' ERR
tlmc=$1; run=$2; root=$3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
fail=0
. "$here/../expect.sh"   # expect, check
one_line_statuses=1   # a command without its model prints its whole usage (exit 2)

tiny=$root/examples/tiny.tlm
expect 0 "" "compile tiny" -- "$tlmc" "$tiny" -o "$tmp/tiny.so"
expect 0 "6 specialisations" "tlm-run info tiny.so" -- "$run" info "$tmp/tiny.so"
for w in 1040 960 800 576 416 336; do grep -q " $w " "$tmp/out" || { echo "FAIL: width $w missing from info"; fail=1; }; done
expect 0 "model.layers.5.mlp.down_proj.weight" "info --params" -- "$run" info "$tmp/tiny.so" --params
expect 0 "ops 0..[0-9]*$" "info --buffers (placements and lifetimes)" -- "$run" info --buffers "$tmp/tiny.so"
# One printer: the tables info lists are the ones tlmc --emit-ir prints.
"$tlmc" --emit-ir --model tiny "$tiny" | sed '/^ops (/,/^$/d' | sed -n '/^buffers (/,$p' > "$tmp/ir_tables"
"$run" info "$tmp/tiny.so" --params --buffers | sed -n '/^buffers (/,$p' > "$tmp/info_tables"
if [ ! -s "$tmp/ir_tables" ] || ! diff -u "$tmp/ir_tables" "$tmp/info_tables" > "$tmp/diff"; then
  echo "FAIL: info --buffers and tlmc --emit-ir print the buffers and plans differently:"; head -20 "$tmp/diff"; fail=1
else echo "ok: info and --emit-ir print the same buffers and plans"; fi
for table in "layers (" "kernels (" "params ("; do
  cmp -s <("$tlmc" --emit-ir --model tiny "$tiny" | sed -n "/^$table/,/^\$/{/^\$/!p}") <("$run" info --params "$tmp/tiny.so" | sed -n "/^$table/,/^\$/{/^\$/!p}") \
    && echo "ok: info and --emit-ir print the same $table...)" \
    || { echo "FAIL: info and --emit-ir print $table...) differently"; fail=1; }
done
# a '%' in the output's folder (lld's temporary is named from the path with
# each '%' made random: it once went to a folder that does not exist)
mkdir -p "$tmp/100%s"
expect 0 "" "compile into a folder named 100%s" -- "$tlmc" "$tiny" --model tiny_uniform -o "$tmp/100%s/u%d.so"
check "  the model is there" -- test -s "$tmp/100%s/u%d.so"
expect 0 "" "compile the uniform twin" -- "$tlmc" "$tiny" --model tiny_uniform -o "$tmp/uniform.so"
expect 0 "1 specialisations" "uniform model has one kernel" -- "$run" info "$tmp/uniform.so"
expect 0 "" "generic x86-64 code" -- "$tlmc" --cpu x86-64 "$tiny" -o "$tmp/generic.so"
expect 0 "model tiny" "info on the generic build" -- "$run" info "$tmp/generic.so"
expect 0 "the CPU kernels use: x86-64's baseline" "info says what the generic kernels need" -- "$run" info "$tmp/generic.so"
expect 0 "done: 1 step" "the generic build trains here" -- \
  "$run" train "$tmp/generic.so" --steps 1 --batch 1 --threads 1 --eval-every 0 --ckpt "$tmp/generic.ck"
# Kernels for an extension this CPU lacks are refused before they run (they
# would die of SIGILL): Bulldozer's XOP, which no other x86 CPU has.
expect 0 "" "kernels for AMD Bulldozer (XOP)" -- "$tlmc" --cpu bdver1 "$tiny" -o "$tmp/bdver1.so"
expect 0 "the CPU kernels use: .*xop" "info lists XOP" -- "$run" info "$tmp/bdver1.so"
if grep -qw xop /proc/cpuinfo; then
  echo "ok: (this CPU has XOP: the refusal is not exercised here)"
else
  lacks="its CPU kernels use .*xop.*, which this CPU lacks"
  expect 1 "$lacks" "train refuses kernels for a CPU with XOP" -- \
    "$run" train "$tmp/bdver1.so" --steps 1 --batch 1 --threads 1 --ckpt "$tmp/bdver1.ck"
  check "  before writing a checkpoint" -- test ! -e "$tmp/bdver1.ck/checkpoint.safetensors"
  expect 1 "$lacks" "so does eval (on the generic build's checkpoint)" -- \
    "$run" eval "$tmp/bdver1.so" --ckpt "$tmp/generic.ck" --threads 1
  expect 1 "$lacks" "and bench" -- "$run" bench "$tmp/bdver1.so" --steps 1 --threads 1
  expect 0 "not all on this CPU" "info says so" -- "$run" info "$tmp/bdver1.so"
fi
expect 2 "unknown CPU .pentium-9000." "unknown --cpu: a usage error, before any work" -- "$tlmc" --cpu pentium-9000 "$tiny" -o "$tmp/x.so"
check "no model.so written for it" -- test ! -e "$tmp/x.so"

# One kernel specialisation per distinct width, at paper scale.
paper=$root/examples/paper/transformer_440m.tlm
"$tlmc" --report=json --model transformer_440m "$paper" > "$tmp/report.json"
distinct=$($py -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["models"][0]["distinct_widths"]))' "$tmp/report.json")
expect 0 "" "compile the 440M preset" -- "$tlmc" --time "$paper" -o "$tmp/p440.so"
cat "$tmp/err"
expect 0 "kernels ($distinct specialisations" "kernels == distinct widths ($distinct)" -- "$run" info "$tmp/p440.so"

# Bad input to tlmc -o.
expect 1 "cannot write\|No such file" "tlmc -o into a missing directory" -- "$tlmc" "$tiny" -o "$tmp/no/such/dir/x.so"
for arch in gated titans hope; do
  expect 0 "" "compile tiny_$arch" -- "$tlmc" "$root/examples/tiny_$arch.tlm" -o "$tmp/$arch.so"
  expect 0 "model tiny_$arch" "info on tiny_$arch" -- "$run" info "$tmp/$arch.so"
done
grep -q "CMS: 2 levels, updated every 1, 4 steps" "$tmp/out" || { echo "FAIL: hope's CMS periods missing from info"; fail=1; }

# Bad shared objects.
expect 2 "^tlm-run: no command given$" "tlm-run without arguments: the reason, then the usage" -- "$run"
expect 2 "^usage: tlm-run COMMAND" "... and the usage" -- "$run"
expect 2 "unknown command" "unknown command" -- "$run" frobnicate "$tmp/tiny.so"
expect 2 "unknown option" "unknown option" -- "$run" info --frobnicate "$tmp/tiny.so"
expect 2 "unknown option \`-x\`" "unknown short option" -- "$run" info -x "$tmp/tiny.so"
expect 2 "takes no value" "a switch given a value" -- "$run" info --params=all "$tmp/tiny.so"
expect 2 "more than one model" "two models" -- "$run" info "$tmp/tiny.so" "$tmp/uniform.so"
expect 0 "usage: tlm-run info" "info --help" -- "$run" info --help
expect 2 "^tlm-run info: no MODEL.so given (see .tlm-run info --help.)$" "info without a model: one line, as every command" -- "$run" info
expect 1 "cannot open .*nope.so: No such file" "missing model file" -- "$run" info "$tmp/nope.so"
expect 1 "is a directory, not a regular file" "a directory" -- "$run" info "$tmp"
mkfifo "$tmp/fifo.so"
expect 1 "is a FIFO (named pipe), not a regular file" "a FIFO (refused, not waited on)" -- "$run" info "$tmp/fifo.so"
echo "just text" > "$tmp/text.so"
expect 1 "is not a compiled model (not an ELF shared object)" "a text file" -- "$run" info "$tmp/text.so"
# seal IN OUT: IN with the integrity trailer tlmc appends (model_file.py),
# for files made here that should get past it.
seal() { "$py" -c 'import sys; sys.path.insert(0, sys.argv[3]); import model_file as m
d = open(sys.argv[1], "rb").read(); open(sys.argv[2], "wb").write(d + m.trailer(d))' "$1" "$2" "$here"; }
foreign=$(ls /usr/lib/x86_64-linux-gnu/libz.so.1 /lib/x86_64-linux-gnu/libm.so.6 2>/dev/null | head -1)
cp "$foreign" "$tmp/foreign.so"
expect 1 "has no integrity trailer: it is not a compiled tlm model" "a foreign shared object ($(basename "$foreign"))" \
  -- "$run" info "$tmp/foreign.so"
seal "$tmp/foreign.so" "$tmp/foreign_sealed.so"
expect 1 "is not a compiled tlm model (no tlm_abi_magic)" "a foreign shared object with a trailer" \
  -- "$run" info "$tmp/foreign_sealed.so"
size=$(stat -c %s "$tmp/tiny.so")
for cut in 16 64 1000 $((size / 2)) $((size - 100)) $((size - 48)); do
  head -c "$cut" "$tmp/tiny.so" > "$tmp/cut.so"
  expect 1 "\(truncated\|has no integrity trailer\).*recompile it with this tlmc" \
    "truncated to $cut of $size bytes: said, with what to do" -- "$run" info "$tmp/cut.so"
done
: > "$tmp/empty.so"
expect 1 "empty.so is empty (0 bytes): compile the model with tlmc$" "an empty file" -- "$run" info "$tmp/empty.so"
# Damage inside the descriptor (found by its symbol, tlm_model_blob): the
# file's hash refuses it first; with the trailer recomputed over the
# damaged file, the descriptor's own checksum still does.
"$py" - "$tmp/tiny.so" "$tmp" "$here" <<'PY'
import os, sys
sys.path.insert(0, sys.argv[3])
import model_file
image, _ = model_file.split(open(sys.argv[1], 'rb').read())
off, size = model_file.symbol(image, 'tlm_model_blob')
assert size > 256, f'tlm_model_blob is {size} bytes'
damaged = bytearray(image)
damaged[off + 200] ^= 0x5A
damaged = bytes(damaged)
with open(os.path.join(sys.argv[2], 'damaged.so'), 'wb') as f:
    f.write(damaged + model_file.trailer(image))         # the trailer of the intact file
with open(os.path.join(sys.argv[2], 'damaged_sealed.so'), 'wb') as f:
    f.write(damaged + model_file.trailer(damaged))
PY
expect 1 "damaged.so is damaged: its SHA-256 is not the one tlmc recorded" "a damaged descriptor" \
  -- "$run" info "$tmp/damaged.so"
expect 1 "damaged_sealed.so: model descriptor is damaged (checksum mismatch)$" \
  "a damaged descriptor under a recomputed trailer" -- "$run" info "$tmp/damaged_sealed.so"
version=$(sed -n 's/^#define TLM_ABI_VERSION \([0-9]*\)u.*/\1/p' "$root/abi/tlm_abi.h")
test -n "$version"
# Hand-made objects: wrong magic, another ABI version, missing symbols.
cat > "$tmp/fake.c" <<'C'
#include "tlm_abi.h"
#ifndef MAGIC
#define MAGIC TLM_ABI_MAGIC
#endif
#ifndef VERSION
#define VERSION TLM_ABI_VERSION
#endif
const uint32_t tlm_abi_magic = MAGIC;
const uint32_t tlm_abi_version = VERSION;
C
abi="-I$root/abi"
cc -shared -fPIC $abi -DMAGIC=0x12345678u -o "$tmp/magic.so" "$tmp/fake.c"
cc -shared -fPIC $abi -DVERSION=999 -o "$tmp/version.so" "$tmp/fake.c"
cc -shared -fPIC $abi -o "$tmp/nosyms.so" "$tmp/fake.c"
expect 1 "has no integrity trailer" "a hand-made object without the trailer" -- "$run" info "$tmp/magic.so"
for f in magic version nosyms; do seal "$tmp/$f.so" "$tmp/${f}_sealed.so"; done
expect 1 "magic_sealed.so has a wrong magic number" "wrong magic number" -- "$run" info "$tmp/magic_sealed.so"
expect 1 "was compiled for model ABI version 999; this tlm-run reads version $version (recompile it" \
  "another ABI version" -- "$run" info "$tmp/version_sealed.so"
expect 1 "nosyms_sealed.so lacks the symbol tlm_model_blob" "missing symbols" -- "$run" info "$tmp/nosyms_sealed.so"
exit $fail
