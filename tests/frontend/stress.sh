#!/usr/bin/env bash
# Hostile inputs: tlmc must answer each with a clear error (exit 1) or a
# result (exit 0) within seconds: never crash, hang or blow the stack.
set -u
tlmc=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

expect() {   # expect NAME WANT_STATUS PATTERN FILE
  local name=$1 want=$2 pattern=$3 file=$4 start end out status
  start=$(date +%s.%N)
  out=$(timeout 60 "$tlmc" --check --color=never "$file" 2>&1); status=$?
  end=$(date +%s.%N)
  printf '%-28s exit %3d  %6.2fs  %s\n' "$name" "$status" "$(echo "$end - $start" | bc)" \
    "$(printf '%s' "$out" | head -1 | cut -c1-90)"
  if [ "$status" != "$want" ]; then echo "  FAIL: wanted exit $want"; fail=1; fi
  if [ -n "$pattern" ] && ! printf '%s' "$out" | grep -q -- "$pattern"; then
    echo "  FAIL: output lacks '$pattern'"; fail=1
  fi
}

python3 - "$tmp" <<'PY'
import os, random, sys
d = sys.argv[1]
def w(name, data):
    open(os.path.join(d, name), 'wb').write(data if isinstance(data, bytes) else data.encode())
w('parens.tlm', 'param p = ' + '(' * 100000 + '1' + ')' * 100000 + ';\n')
w('brackets.tlm', 'param p = ' + '[' * 100000 + ']' * 100000 + ';\n')
w('unary.tlm', 'param p = ' + '-' * 100000 + '1;\n')
w('long_sum.tlm', 'param p = ' + '+'.join(['1'] * 200000) + ';\n')
w('huge_number.tlm', 'param p = 1' + '0' * 100000 + ';\n')
w('long_name.tlm', 'param ' + 'a' * 1000000 + ' = 1;\n')
random.seed(1)
w('junk.bin', bytes(random.getrandbits(8) for _ in range(10 * 1024 * 1024)))
w('junk_ascii.tlm', ''.join(random.choice('(){}[];=+-*/<>?:,. model param x 1 2e') for _ in range(10 * 1024 * 1024)))
lines = ['param p%d = %d;' % (i, i) for i in range(600000)]
w('big_valid.tlm', '\n'.join(lines) + '\n')
body = ''.join('    %s = %s;\n' % kv for kv in [('vocab', 256), ('context', 64), ('d_model', 64), ('layers', 4), ('heads', 4), ('d_ff', 128)])
chain = 'model m0 {\n' + body + '}\n' + ''.join('model m%d : m%d { layers = %d; }\n' % (i, i - 1, 1 + i % 8) for i in range(1, 3000))
w('model_chain.tlm', chain)
sched = 'schedule f0(x) = x;\n' + ''.join('schedule f%d(x) = f%d(x);\n' % (i, i - 1) for i in range(1, 20000))
w('schedule_chain.tlm', sched + 'model m {\n' + body.replace('d_ff = 128', 'd_ff = f19999(128)') + '}\n')
params = 'param p0 = 1;\n' + ''.join('param p%d = p%d + 1;\n' % (i, i - 1) for i in range(1, 20000))
w('param_chain.tlm', params + 'model m {\n' + body.replace('d_ff = 128', 'd_ff = 128 + 0 * p19999') + '}\n')
# A mean is computed once per model, not once per layer: three nested at
# 4096 layers are 3 x 4096 evaluations, not 4096^4 (the step budget's end
# once, at 1,500 layers already for normalize(s) = s / mean(s)).
w('nested_mean.tlm', 'model m {\n' + body.replace('layers = 4', 'layers = 4096').replace('d_ff = 128', 'd_ff = 128 + 0 * mean(mean(mean(l)))') + '}\n')
# ... also behind 30 schedules that pass two arguments on (a frame's
# identity is an id, not a copy of its callers', which doubled a level)
deep = 'schedule s0(a, b) = (a + b) / mean(a + b);\n' + ''.join('schedule s%d(a, b) = s%d(a, b);\n' % (i, i - 1) for i in range(1, 31))
w('deep_mean.tlm', deep + 'model m {\n' + body.replace('layers = 4', 'layers = 4096').replace('d_ff = 128', 'd_ff = 128 * s30(1 + t, 1)') + '    monotone = false;\n}\n')
# What the step budget still stops: each schedule calling the one below it
# twice, 2^40 calls a layer.
doubling = 'schedule d0(x) = x;\n' + ''.join('schedule d%d(x) = d%d(x) + d%d(x);\n' % (i, i - 1, i - 1) for i in range(1, 41))
w('doubling.tlm', doubling + 'model m {\n' + body.replace('d_ff = 128', 'd_ff = 128 + 0 * d40(l)') + '}\n')
w('many_errors.tlm', 'model m { x = ; }\n' * 5000)
# Every model and study of the file is checked, however many (a fixed array
# once left those past the 4096th model and the 256th study unchecked).
many = ''.join('model m%d {\n%s}\n' % (i, body) for i in range(5000))
w('many_models.tlm', many + 'model last : nowhere { }\n')
w('many_studies.tlm', 'model m {\n' + body + '}\n' +
  ''.join('study s%d { variants = [m]; baseline = m; seeds = 1; }\n' % i for i in range(300)) +
  'study last { variants = [m]; baseline = m; seeds = 0; }\n')
# A chain of parents is at most 4096 long: each model walks its own, so
# 20,000 chained models took 20 s once all were checked.
# Each model reads its file's top-level train blocks from a list made once:
# found by a walk over the file's items per model, 60,000 models (5 MB)
# took 138 s, past the 60 s this script allows.
w('flat_models.tlm', ''.join('model m%d {\n%s}\n' % (i, body) for i in range(60000)) + 'train { steps = 7; }\n')
w('long_chain.tlm', 'model m0 {\n' + body + '}\n' + ''.join('model m%d : m%d { }\n' % (i, i - 1) for i in range(1, 20000)))
# The size limit: a file of exactly 64 MiB is read, one byte more is not.
model = ('model m {\n' + body + '}\n').encode()
pad = 64 * 1024 * 1024 - len(model) - 5
w('size_limit.tlm', model + b'/*' + b' ' * pad + b'*/\n')
w('size_over.tlm', model + b'/*' + b' ' * (pad + 1) + b'*/\n')
# The deepest model tlmc takes: its memory plans (two, of ~50,000 buffers)
# are made in seconds; a first fit that sorted the placed buffers for each
# new one took over a minute.
w('deepest.tlm', 'model m {\n' + body.replace('layers = 4', 'layers = 4096').replace('d_model = 64', 'd_model = 16').replace('heads = 4', 'heads = 2').replace('d_ff = 128', 'd_ff = 32') + '}\n')
w('huge_layers.tlm', 'model m {\n' + body.replace('layers = 4', 'layers = 1e300') + '}\n')
PY

expect parens           1 "nested too deeply" "$tmp/parens.tlm"
expect brackets         1 "nested too deeply" "$tmp/brackets.tlm"
expect unary            1 "nested too deeply" "$tmp/unary.tlm"
expect long_sum         1 "nested too deeply: more than 1000 levels of operators, calls or parentheses (a chain such as a + b + c counts a level a term)" "$tmp/long_sum.tlm"
expect long_sum_once    1 "^1 error\.$"       "$tmp/long_sum.tlm"
expect huge_number      1 "out of range"      "$tmp/huge_number.tlm"
expect long_name        0 ""                  "$tmp/long_name.tlm"
expect junk_binary      1 "error"             "$tmp/junk.bin"
expect junk_ascii       1 "error"             "$tmp/junk_ascii.tlm"
expect big_valid        0 ""                  "$tmp/big_valid.tlm"
expect model_chain      0 ""                  "$tmp/model_chain.tlm"
expect schedule_chain   1 "nested too deeply" "$tmp/schedule_chain.tlm"
expect param_chain      1 "nested too deeply" "$tmp/param_chain.tlm"
expect nested_mean      0 ""                  "$tmp/nested_mean.tlm"
expect doubling         1 "too long"          "$tmp/doubling.tlm"
expect deep_mean        0 ""                  "$tmp/deep_mean.tlm"
expect many_errors      1 "too many errors"   "$tmp/many_errors.tlm"
expect huge_layers      1 "between 1 and"     "$tmp/huge_layers.tlm"
expect many_models      1 "unknown model"     "$tmp/many_models.tlm"
expect flat_models      0 ""                  "$tmp/flat_models.tlm"
expect long_chain       1 "more than 4096"    "$tmp/long_chain.tlm"
expect many_studies     1 "study last"        "$tmp/many_studies.tlm"
expect size_limit       0 ""                  "$tmp/size_limit.tlm"
expect size_over        1 "file too large"    "$tmp/size_over.tlm"
expect missing_file     1 "cannot read"       "$tmp/does-not-exist.tlm"
expect directory        1 "is a directory"    "$tmp"
start=$(date +%s.%N)
timeout 40 "$tlmc" --emit-ir "$tmp/deepest.tlm" > "$tmp/deepest.ir"; status=$?
printf '%-28s exit %3d  %6.2fs  %s\n' deepest_plan "$status" "$(echo "$(date +%s.%N) - $start" | bc)" \
  "$(grep -c '' "$tmp/deepest.ir") lines of IR"
if [ "$status" != 0 ] || ! grep -q '^plan ' "$tmp/deepest.ir"; then
  echo "  FAIL: wanted the IR with its memory plans within 40 s"; fail=1
fi
exit $fail
