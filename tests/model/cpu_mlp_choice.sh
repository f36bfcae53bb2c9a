#!/bin/sh
# tlmc records each width's CPU implementation in model.so and tlm-run info
# prints it with tlmc's reason: by tlmc's rule every width of narrow_tail,
# its width 8 included, runs the generated kernels; --cpu-mlp blas sends
# every width to the BLAS twin; a value tlmc does not know is a usage error
# (exit 2) that writes nothing.
#   cpu_mlp_choice.sh TLMC TLM_RUN MODEL_DIR MODELS_TLM
set -u
tlmc=$1 run=$2 dir=$3 models=$4
fail() { echo "FAIL: $*"; exit 1; }

info=$("$run" info "$dir/narrow_tail.so") || fail "tlm-run info narrow_tail.so"
[ "$(echo "$info" | grep -c 'CPU: generated kernels (tlmc.s rule')" = 3 ] ||
    fail "all 3 widths of narrow_tail should run the generated kernels by tlmc's rule"
echo "$info" | grep -A1 'width 8 ' | grep -q 'CPU: generated kernels' || fail "width 8: not the generated kernels"

info=$("$run" info "$dir/taper_swiglu_blas.so") || fail "tlm-run info taper_swiglu_blas.so"
[ "$(echo "$info" | grep -c 'CPU: OpenBLAS (asked for with tlmc --cpu-mlp)')" = 3 ] ||
    fail "--cpu-mlp blas should put all 3 widths on the BLAS twin"

out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT
"$tlmc" "$models" --model taper_swiglu --cpu-mlp fast -o "$out/m.so" 2>"$out/err"
rc=$?
[ "$rc" = 2 ] || fail "--cpu-mlp fast: exit $rc, not 2"
grep -q -- "--cpu-mlp takes auto, generated or blas, not .fast." "$out/err" || fail "message: $(cat "$out/err")"
[ ! -e "$out/m.so" ] || fail "--cpu-mlp fast wrote a model"
echo PASS
