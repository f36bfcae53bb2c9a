#!/usr/bin/env bash
# Studies end to end: `tlmc --plan` against a golden (the repository's path
# shown as <repo>), the usage errors of --study/--variant, and, when tlm-run
# is built, a variant compiled with --study/--variant carrying the study's
# train settings as its defaults (read back with `tlm-run info`).
#   study.sh TLMC REPO [TLM-RUN]
set -u
tlmc=$1; repo=$2; run=${3:-}
dir=$repo/tests/frontend/studies
fail() { echo "FAIL: $*"; exit 1; }

plan=$("$tlmc" --plan "$dir/plan.tlm") || fail "--plan exited $?"
real=$(cd "$repo" && pwd -P)
plan=${plan//"$real"/<repo>}
diff -u "$dir/plan.expected" <(printf '%s\n' "$plan") || fail "the plan differs from plan.expected"
printf '%s' "$plan" | python3 -c 'import json, sys; json.load(sys.stdin)' || fail "the plan is not JSON"

expect_usage() {       # expect_usage MESSAGE ARGS...: exit 2 and one line naming the problem
  local want=$1; shift
  local out; out=$("$tlmc" "$@" 2>&1); local rc=$?
  [ $rc = 2 ] || fail "tlmc $*: exit $rc, expected 2"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "tlmc $*: more than one line: $out"
  [[ $out == *"$want"* ]] || fail "tlmc $*: '$out' does not say '$want'"
}
expect_usage "no study \`nope\`" --plan --study nope "$dir/plan.tlm"
expect_usage "has no variant \`ratio=2\`; its variants are: shape=linear,ratio=1.5, shape=cosine,ratio=1.5, uniform" \
  --study small --variant ratio=2 "$dir/plan.tlm"
expect_usage "--variant needs --study" --variant uniform "$dir/plan.tlm"
expect_usage "-o with --study needs --variant" --study small -o "$(mktemp -u)" "$dir/plan.tlm"
out=$("$tlmc" --plan "$repo/examples/tiny.tlm" 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == *"defines no studies"* ]] || fail "--plan without studies: exit $rc, $out"

# A path that is not UTF-8 (here its folder's name, Latin-1): the plan is
# JSON and could not hold it, so the study is refused (tlm-run study said
# "the plan is not JSON" once, blaming the plan)
latin1=$(mktemp -d)/$(printf 'caf\351')
mkdir -p "$latin1"
head -c 4096 "$repo/data/austen/emma.txt" > "$latin1/e.txt"
sed 's#"\.\./\.\./\.\./data/[a-z]*/[a-z]*\.txt"#"e.txt"#g' "$dir/plan.tlm" > "$latin1/plan.tlm"
grep -q '"e.txt"' "$latin1/plan.tlm" || fail "the Latin-1 copy of plan.tlm names no e.txt"
out=$("$tlmc" --plan "$latin1/plan.tlm" 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == *"data \`e.txt\` is not UTF-8"*"the study plan (JSON) cannot hold"* ]] ||
  fail "a study in a Latin-1 folder: exit $rc, $out"
rm -rf "$(dirname "$latin1")"

[ -n "$run" ] || { echo "ok (plan only: no tlm-run or no code generator in this build)"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$tlmc" "$dir/plan.tlm" --study small --variant shape=linear,ratio=1.5 -o "$tmp/v.so" || fail "--variant -o exited $?"
info=$("$run" info "$tmp/v.so") || fail "tlm-run info exited $?"
for want in "batch = 2; context = 16; steps = 3;" "adamw(lr = 0.003," "eval_every = 0;" "d_ff 96 " "d_ff 32 "; do
  [[ $info == *"$want"* ]] || fail "tlm-run info of the variant lacks '$want':"$'\n'"$info"
done
# The same model compiled on its own keeps the file's defaults.
"$tlmc" "$dir/plan.tlm" --model tiny -o "$tmp/m.so" || fail "--model -o exited $?"
info=$("$run" info "$tmp/m.so")
[[ $info == *"batch = 8;"* && $info == *"steps = 1000;"* ]] || fail "the plain model has the study's settings: $info"
echo ok
