#!/bin/sh
# Regenerates the picture in docs/editors.md: a .tlm file highlighted by the
# TextMate grammar (docs/editors-example.html), screenshotted by headless
# Chromium (docs/editors-example.png). Needs node, editors/vscode/node_modules
# and chromium (apt-get install chromium).
#   tests/editors/picture.sh [FILE.tlm]
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${1:-$root/tests/editors/samples/example.tlm}
html=$root/docs/editors-example.html
png=$root/docs/editors-example.png

node "$root/tests/editors/vscode/render.js" "$src" >"$html"

# The page is 14px DejaVu Sans Mono (about 8.5px a column, 20.3px a line) in
# 16px/20px of padding: size the window to the text.
size=$(awk '{ if (length($0) > w) w = length($0) } END { printf "%d,%d", w * 8.6 + 64, NR * 20.3 + 36 }' "$src")
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --force-device-scale-factor=1 \
  --window-size="$size" --screenshot="$png" "file://$html" 2>/dev/null
echo "wrote $html and $png ($size)"
