#!/bin/sh
# Checks `tlmc --print-keywords` against the compiler's sources where its
# lists are kept by hand beside the code that decides (the editor grammars
# are checked against --print-keywords, so a name missing there would be
# missing everywhere, unnoticed):
#   keyword   the keyword rules of lang/lexer.re ("use" { t = USE; ... })
#   builtin   the table of builtin_arity() in compiler/eval.c
#   variable, constant   the names classify_name() in compiler/eval.c
#             resolves to REF_LAYER_VAR and REF_PI
#   sources.sh TLMC [SOURCE_ROOT]
set -u
export LC_ALL=C
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 TLMC [SOURCE_ROOT]" >&2
  exit 2
fi
tlmc=$1
root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

if ! "$tlmc" --print-keywords >"$dir/printed"; then
  echo "sources: $tlmc --print-keywords failed" >&2
  exit 1
fi
lexer=$root/lang/lexer.re eval=$root/compiler/eval.c
sed -n 's/^[[:space:]]*"\([A-Za-z_][A-Za-z0-9_]*\)"[[:space:]]*{[[:space:]]*t = [A-Z_]*;.*/\1/p' "$lexer" >"$dir/keyword"
grep -o '{"[A-Za-z_][A-Za-z0-9_]*", *[0-9]*, *[0-9A-Z_]*}' "$eval" | sed 's/{"\([^"]*\)".*/\1/' >"$dir/builtin"
grep 'return REF_LAYER_VAR;' "$eval" | grep -o 'strcmp([a-z]*, "[^"]*")' | sed 's/.*"\(.*\)")/\1/' >"$dir/variable"
grep 'return REF_PI;' "$eval" | grep -o 'strcmp([a-z]*, "[^"]*")' | sed 's/.*"\(.*\)")/\1/' >"$dir/constant"

status=0
for class in keyword builtin variable constant; do
  case $class in keyword) from=$lexer ;; *) from=$eval ;; esac
  if [ ! -s "$dir/$class" ]; then
    # The source changed shape: teach this script where the names are now.
    echo "sources: found no $class names in $from; update tests/editors/sources.sh" >&2
    status=1
    continue
  fi
  sort -u "$dir/$class" >"$dir/$class.src"
  sed -n "s/^$class //p" "$dir/printed" | sort -u >"$dir/$class.tlmc"
  for name in $(comm -23 "$dir/$class.src" "$dir/$class.tlmc"); do
    echo "sources: $class \`$name\` is in $from but not in tlmc --print-keywords (compiler/vocabulary.c or tlmc.c)" >&2
    status=1
  done
  for name in $(comm -13 "$dir/$class.src" "$dir/$class.tlmc"); do
    echo "sources: tlmc --print-keywords prints $class \`$name\`, which $from does not have" >&2
    status=1
  done
done
[ $status -eq 0 ] && echo "sources: ok ($(cat "$dir"/*.src | wc -l) names)"
exit $status
