# The checks of the shell tests (sourced by tests/run/run.sh,
# tests/crash/crash.sh and tests/backend/model_so.sh). They need $tmp, a
# scratch folder, and set fail=1 on a failure, so that a script runs every
# check, then exits with the result. Both work under `set -e`.

# expect STATUS PATTERN DESCRIPTION -- command...: the exit status must be
# STATUS and PATTERN (grep) must be in stdout or stderr; a failure (1) or a
# usage error (2) must be exactly one line on stderr (the statuses in
# $one_line_statuses, "1 2" unless the script sets it).
expect() {
  local want=$1 pattern=$2 what=$3 got=0; shift 4
  "$@" >"$tmp/out" 2>"$tmp/err" || got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, wanted $want"; head -5 "$tmp/err" "$tmp/out"; fail=1; return 0
  fi
  if [ -n "$pattern" ] && ! grep -q -- "$pattern" "$tmp/out" "$tmp/err"; then
    echo "FAIL: $what: no '$pattern' in the output:"; head -5 "$tmp/err" "$tmp/out"; fail=1; return 0
  fi
  if [[ " ${one_line_statuses:-1 2} " == *" $want "* ]] && [ "$(wc -l < "$tmp/err")" != 1 ]; then
    echo "FAIL: $what: the error is not one line:"; cat "$tmp/err"; fail=1; return 0
  fi
  echo "ok: $what"
}

# check DESCRIPTION -- command...: the command must succeed (its first
# lines are shown either way).
check() {
  local what=$1; shift 2
  if "$@" >"$tmp/check" 2>&1; then echo "ok: $what"; sed 's/^/    /' "$tmp/check" | head -3
  else echo "FAIL: $what"; cat "$tmp/check"; fail=1; fi
}

# start_case DIR: DIR, emptied, becomes $tmp and the current folder, and
# fail=0: how each case of a shell test starts.
start_case() {
  tmp=$1
  rm -rf "$tmp"
  mkdir -p "$tmp"
  cd "$tmp" || exit 1
  fail=0
}
