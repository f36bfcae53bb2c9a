#!/bin/sh
# The keyword-coverage test of one editor: every name `tlmc --print-keywords`
# prints must be highlighted as its class by that editor's grammar.
#   keywords.sh TLMC vscode|vim|emacs TOOL   (TOOL: node, vim or emacs)
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 TLMC vscode|vim|emacs TOOL" >&2
  exit 2
fi
tlmc=$1 editor=$2 tool=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
list=$(mktemp) log=$(mktemp)
trap 'rm -f "$list" "$log"' EXIT

if ! "$tlmc" --print-keywords >"$list"; then
  echo "keywords: $tlmc --print-keywords failed" >&2
  exit 1
fi
# Every class of the contract must be there, or its names go unchecked.
for class in keyword setting train_setting study_setting mixer mlp value function builtin constant variable schedule; do
  if ! grep -q "^$class " "$list"; then
    echo "keywords: $tlmc --print-keywords prints no $class names" >&2
    exit 1
  fi
done

case $editor in
  vscode) "$tool" "$here/vscode/keywords.js" "$list" ;;
  vim) "$tool" -N -u NONE -i NONE -n -es --cmd "set rtp^=$root/editors/vim" \
         -S "$here/vim/run.vim" -- keywords "$list" ;;
  emacs) "$tool" -Q --batch -L "$root/editors/emacs" -l "$here/emacs/run.el" keywords "$list" ;;
  *) echo "keywords: unknown editor $editor" >&2; exit 2 ;;
esac >"$log" 2>&1
status=$?
cat "$log"
# Both the exit status and the checker's own `ok`: a Vim without +eval
# would skip the whole script and still exit 0.
if [ $status -ne 0 ] || ! grep -q "^$editor keywords: ok" "$log"; then
  echo "keywords: $editor grammar does not cover tlmc's names (status $status)" >&2
  exit 1
fi
