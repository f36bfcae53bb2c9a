#!/usr/bin/env bash
# tlmc's command line: exit statuses, flags, report formats, -D, --plot,
# --print-keywords.
set -u
tlmc=$1; root=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3
fail=0
status() {   # status WANT DESCRIPTION -- command...
  local want=$1 what=$2; shift 3
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, wanted $want"; cat "$tmp/err"; fail=1
  else
    echo "ok: $what (exit $got)"
  fi
}
has() {      # has FILE PATTERN DESCRIPTION
  if ! grep -q -- "$2" "$1"; then echo "FAIL: $3: no '$2' in:"; cat "$1"; fail=1; fi
}

tiny=$root/examples/tiny.tlm
status 0 "--help" -- "$tlmc" --help;                     has "$tmp/out" "usage: tlmc" "--help"
status 0 "--version" -- "$tlmc" --version;               has "$tmp/out" "^tlmc [0-9]" "--version"
# the build (this executable's SHA-256) and the code generator, so that a
# rebuilt tlmc is told apart from the old one (a study's recipe reads it):
# a copy with one byte more is another build, a plain copy the same
has "$tmp/out" "^tlmc [0-9][^ ]* (model ABI [0-9]*, build [0-9a-f]\{12\}, \(LLVM [0-9.]*\|no code generator\))$" "--version's build"
cp "$tmp/out" "$tmp/version"
cp "$tlmc" "$tmp/copy_tlmc" && "$tmp/copy_tlmc" --version > "$tmp/copy_version"
cp "$tlmc" "$tmp/rebuilt_tlmc" && printf '\0' >> "$tmp/rebuilt_tlmc" && "$tmp/rebuilt_tlmc" --version > "$tmp/rebuilt_version"
if cmp -s "$tmp/version" "$tmp/copy_version" && ! cmp -s "$tmp/version" "$tmp/rebuilt_version" && grep -q build "$tmp/rebuilt_version"; then
  echo "ok: --version: a copy the same build, another executable another"
else
  echo "FAIL: --version: a copy and another executable: $(cat "$tmp/version" "$tmp/copy_version" "$tmp/rebuilt_version")"; fail=1
fi
status 0 "--help-settings" -- "$tlmc" --help-settings;   has "$tmp/out" "d_ff" "--help-settings"
status 2 "no input" -- "$tlmc";                          has "$tmp/err" "no input file" "no input"
status 2 "unknown option" -- "$tlmc" --frobnicate "$tiny"; has "$tmp/err" "unknown option" "unknown option"
status 2 "no abbreviations" -- "$tlmc" --rep "$tiny";     has "$tmp/err" "unknown option .--rep. (did you mean --report?)" "--rep"
status 2 "--rep=json the same" -- "$tlmc" --rep=json "$tiny"; has "$tmp/err" "unknown option .--rep. (did you" "--rep=json"
status 0 "--report=json whole" -- "$tlmc" --report=json "$tiny"
status 2 "--mod (no value): the same" -- "$tlmc" "$tiny" --mod; has "$tmp/err" "unknown option .--mod. (did you mean --model?)" "--mod"
status 2 "two inputs" -- "$tlmc" "$tiny" "$tiny"
status 2 "an empty input path" -- "$tlmc" "";            has "$tmp/err" "input file is empty" "an empty input path"
status 2 "-o ''" -- "$tlmc" "$tiny" -o "";               has "$tmp/err" "\-o is empty" "-o ''"
status 2 "--plot ''" -- "$tlmc" "$tiny" --plot "";       has "$tmp/err" "\-\-plot is empty" "--plot ''"
# an empty folder to search is not the root (where "/" joined to it led)
status 2 "-I ''" -- "$tlmc" -I "" "$tiny";               has "$tmp/err" "^tlmc: -I is empty: it needs a path" "-I ''"
status 2 "--stdlib ''" -- "$tlmc" --stdlib "" "$tiny";   has "$tmp/err" "^tlmc: --stdlib is empty: it needs a path" "--stdlib ''"
status 2 "bad report format" -- "$tlmc" --report=xml "$tiny"
status 2 "bad color" -- "$tlmc" --color=sometimes "$tiny"
status 2 "-D without =" -- "$tlmc" -D ratio "$tiny";     has "$tmp/err" "NAME=VALUE" "-D without ="
status 2 "-D unknown param" -- "$tlmc" -D ratoi=2 "$tiny"; has "$tmp/err" "did you mean .ratio." "-D typo"
status 1 "-D bad value" -- "$tlmc" -D 'ratio=1 +' "$tiny"; has "$tmp/err" "^-D ratio:1:" "-D syntax error location"
status 2 "--model unknown" -- "$tlmc" --model nope "$tiny"
status 2 "--model without argument" -- "$tlmc" "$tiny" --model
status 1 "missing file" -- "$tlmc" "$tmp/nope.tlm";      has "$tmp/err" "No such file" "missing file"
status 0 "check prints nothing" -- "$tlmc" --check "$tiny"
[ -s "$tmp/out" ] && { echo "FAIL: --check printed output"; fail=1; }
status 0 "summary" -- "$tlmc" "$tiny";                   has "$tmp/out" "tiny: 6 layers" "summary"

status 0 "-D ratio=1.75" -- "$tlmc" --report -D ratio=1.75 --model tiny "$tiny"
has "$tmp/out" "      0     1200  1.744" "-D changes the widths"
status 0 "-D with an expression" -- "$tlmc" --report -Dratio=7/4 --model tiny "$tiny"
has "$tmp/out" "      0     1200  1.744" "-D expression"
status 0 "-D with spaces around the name" -- "$tlmc" --report -D ' ratio = 7/4' --model tiny "$tiny"
has "$tmp/out" "      0     1200  1.744" "-D ' ratio = 7/4'"
status 2 "-D with only spaces for a name" -- "$tlmc" -D ' =1' "$tiny"; has "$tmp/err" "NAME=VALUE" "-D ' =1'"
# A -D value is checked like a param's value (-D 'ratio=mean()' once crashed
# tlmc: the evaluator read an argument that was not there).
status 1 "-D ratio=mean()" -- "$tlmc" -D 'ratio=mean()' "$tiny"; has "$tmp/err" "takes 1 argument" "-D mean()"
status 1 "-D ratio=pow(2)" -- "$tlmc" -D 'ratio=pow(2)' "$tiny"; has "$tmp/err" "takes 2 arguments" "-D pow(2)"
status 1 "-D ratio=nope(1)" -- "$tlmc" -D 'ratio=nope(1)' "$tiny"; has "$tmp/err" "unknown function .nope." "-D nope(1)"
status 1 "-D ratio=adamw(lr = 1)" -- "$tlmc" -D 'ratio=adamw(lr = 1)' "$tiny"
has "$tmp/err" "expected a number, found .adamw" "-D adamw(...)"

# one output: a second -o is refused, not the first dropped
status 2 "-o twice" -- "$tlmc" "$tiny" -o "$tmp/a.so" -o "$tmp/b.so"
has "$tmp/err" "-o given twice (.*a.so., then .*b.so.)" "-o twice"
[ ! -e "$tmp/a.so" ] && [ ! -e "$tmp/b.so" ] || { echo "FAIL: -o twice wrote a file"; fail=1; }

# requests that would drop one another: refused, one line each
status 2 "--check --report" -- "$tlmc" --check --report "$tiny"; has "$tmp/err" "choose one" "--check --report"
status 2 "--report --check" -- "$tlmc" --report --check "$tiny"; has "$tmp/err" "choose one" "--report --check"
status 2 "--report --plan" -- "$tlmc" --report --plan "$tiny"; has "$tmp/err" "leave out --report" "--report --plan"
status 2 "--time without -o" -- "$tlmc" --time "$tiny"; has "$tmp/err" "give -o FILE.so" "--time"
status 2 "--model twice" -- "$tlmc" --model tiny --model other "$tiny"; has "$tmp/err" "--model given twice" "--model twice"
# --study limits --check and --report to the study: another model's error
# is not the study's
cat > "$tmp/sb.tlm" <<'TLM'
model a { vocab = 256; context = 64; d_model = 64; layers = 2; heads = 2; d_ff = 128; }
model b : a { d_ff = 0; }
study s { variants = [a]; baseline = a; seeds = 1; train { steps = 2; } }
TLM
status 1 "--check: model b's error" -- "$tlmc" --check "$tmp/sb.tlm"
status 0 "--check --study s: the study alone" -- "$tlmc" --check --study s "$tmp/sb.tlm"
status 0 "--report --study s: the study alone" -- "$tlmc" --report --study s "$tmp/sb.tlm"
has "$tmp/out" "^study s: 1 variant" "--report --study: the study's table"
if grep -q "^model b" "$tmp/out"; then echo "FAIL: --report --study s reported model b"; fail=1; fi
status 2 "--report=json --study s" -- "$tlmc" --report=json --study s "$tmp/sb.tlm"; has "$tmp/err" "is --plan" "json --study"
status 2 "--plot --study s" -- "$tlmc" --plot "$tmp/x.svg" --study s "$tmp/sb.tlm"; has "$tmp/err" "needs --variant" "plot --study"
status 2 "--emit-ir --study s" -- "$tlmc" --emit-ir --study s "$tmp/sb.tlm"; has "$tmp/err" "needs --variant" "emit-ir --study"
status 2 "--study twice" -- "$tlmc" --study s --study t "$tmp/sb.tlm"; has "$tmp/err" "--study given twice" "--study twice"
status 2 "--plan -o" -- "$tlmc" --plan -o "$tmp/p.so" "$tmp/sb.tlm"; has "$tmp/err" "leave out -o" "--plan -o"
status 2 "--plan --plot" -- "$tlmc" --plan --plot "$tmp/p.svg" "$tmp/sb.tlm"; has "$tmp/err" "leave out --plot" "--plan --plot"
[ ! -e "$tmp/p.so" ] && [ ! -e "$tmp/p.svg" ] || { echo "FAIL: --plan with an output wrote it"; fail=1; }

status 0 "--report=json" -- "$tlmc" --report=json "$tiny"
if ! $py -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["models"][0]; assert m["name"]=="tiny"; assert sum(x["d_ff"] for x in m["layers_table"])==6*688; assert m["totals"]["params"]==m["baseline"]["params"]' "$tmp/out"; then
  echo "FAIL: JSON report"; fail=1
else echo "ok: JSON report parses and the budget holds"; fi

status 0 "--plot" -- "$tlmc" --plot "$tmp/w.svg" "$tiny"
if ! $py -c 'import sys, xml.dom.minidom as m; d=m.parse(sys.argv[1]); assert len(d.getElementsByTagName("polyline"))==2' "$tmp/w.svg"; then
  echo "FAIL: --plot SVG"; fail=1
else echo "ok: --plot writes an SVG with one line per model"; fi
status 1 "--plot to an unwritable path" -- "$tlmc" --plot /nonexistent/dir/w.svg "$tiny"

status 0 "--print-keywords" -- "$tlmc" --print-keywords
for want in "keyword model" "setting d_ff" "train_setting optimizer" "mixer titans" "mlp gelu" \
            "builtin sigmoid" "constant pi" "variable t" "schedule cosine" "schedule normalize" \
            "value headwise" "function uniform"; do
  has "$tmp/out" "^$want\$" "--print-keywords has $want"
done

has "$tmp/out" "^keyword study\$" "--print-keywords has study"
has "$tmp/out" "^study_setting baseline\$" "--print-keywords has study settings"
status 0 "--help-settings lists tokenizer and the study settings" -- "$tlmc" --help-settings
has "$tmp/out" "^  tokenizer " "--help-settings has tokenizer"
has "$tmp/out" "^  seeds " "--help-settings has seeds"

# A param that holds a schedule's name: -D swaps the schedule.
sweep=$root/examples/studies/schedule_ratio.tlm
status 0 "-D shape=linear" -- "$tlmc" --report -D shape=linear --model tiny "$sweep"
has "$tmp/out" "      1      400" "-D shape=linear makes the widths linear"
status 0 "default shape" -- "$tlmc" --report --model tiny "$sweep"
has "$tmp/out" "      1      432" "the default shape is cosine"

# Classic Mac line endings (a lone CR): a line comment ends there, and the
# messages count the lines (the whole file was one comment: "defines no models")
printf '// c\rmodel x { vocab = 256; context = 8; d_model = 8; layers = 1; heads = 1; d_ff = 8; }\r' > "$tmp/cr.tlm"
status 0 "a file of lone-CR line endings" -- "$tlmc" --report "$tmp/cr.tlm"
has "$tmp/out" "^model x: " "... reads its model"
printf '// c\rmodel x { vocab = 256; oops }\r' > "$tmp/cr2.tlm"
status 1 "a lone-CR file's error" -- "$tlmc" --report "$tmp/cr2.tlm"
has "$tmp/err" "cr2.tlm:2:" "... is on its second line"
printf 'model x { tokenizer = "abc\rvocab = 256; }\r' > "$tmp/cr3.tlm"
status 1 "a string that a lone CR ends" -- "$tlmc" --report "$tmp/cr3.tlm"
has "$tmp/err" "cr3.tlm:1:23: error: unterminated string" "... is unterminated on its line"

status 0 "stdlib checks cleanly" -- "$tlmc" --check "$root/stdlib/schedules.tlm"
status 1 "stdlib path is honoured" -- "$tlmc" --stdlib "$tmp" "$tiny"
has "$tmp/err" "cannot find module .std.schedules." "--stdlib"

# A module that is there but cannot be read: each path's hint says why (a
# missing one is "not found", as before).
ln -s loopb.tlm "$tmp/loopa.tlm"; ln -s loopa.tlm "$tmp/loopb.tlm"; ln -s nowhere.tlm "$tmp/dangling.tlm"
printf 'use loopa;\nuse dangling;\nuse absent;\n' > "$tmp/unreadable.tlm"
status 1 "use of unreadable modules" -- "$tlmc" --check "$tmp/unreadable.tlm"
has "$tmp/err" "hint: cannot read .*/loopa.tlm: Too many levels of symbolic links$" "... a symlink loop"
has "$tmp/err" "hint: cannot read .*/dangling.tlm: No such file or directory (a dangling symbolic link)$" \
    "... a dangling symlink"
has "$tmp/err" "hint: not found: .*/absent.tlm$" "... a missing module"

# A UTF-8 byte-order mark that starts a file is skipped, in a module too
# (tests/frontend/errors/lex_byte_order_mark.tlm: columns count after it).
printf '\xef\xbb\xbfparam bom_width = 64;\n' > "$tmp/bommod.tlm"
printf '\xef\xbb\xbfuse bommod;\nmodel m { vocab = 256; context = 32; d_model = 32; layers = 2; heads = 2; d_ff = bom_width; }\n' \
    > "$tmp/bom.tlm"
status 0 "a file and its module that start with a byte-order mark" -- "$tlmc" --check "$tmp/bom.tlm"

# A message that quotes a string shows a bidi control in it as \uXXXX, and
# the source line shows it as ?, so that a terminal does not reorder the rest
# of the line.
printf 'model m { vocab = 256; context = 32; d_model = 32; layers = 2; heads = 2; d_ff = 64; tokenizer = "a\xe2\x80\xaeb.json"; }\n' \
    > "$tmp/bidi_path.tlm"
status 1 "a path with a bidi control" -- "$tlmc" --check "$tmp/bidi_path.tlm"
has "$tmp/err" 'tokenizer `a\\u202Eb.json`' "... is quoted escaped"
has "$tmp/err" 'warning: bidirectional control character U+202E in a string' "... and warned about"
if LC_ALL=C grep -q $'\xe2\x80\xae' "$tmp/err"; then
  echo "FAIL: a bidi control printed as it is:"; cat "$tmp/err"; fail=1
else echo "ok: ... and never printed as it is"; fi
# ... and so does the file's name in a message's location
cp "$tmp/bidi_path.tlm" "$tmp/x"$'\xe2\x80\xae'"y.tlm"
status 1 "a file whose name holds a bidi control" -- "$tlmc" --check "$tmp/x"$'\xe2\x80\xae'"y.tlm"
has "$tmp/err" 'x\\u202Ey\.tlm:1:' "... is named escaped in the location"
if LC_ALL=C grep -q $'\xe2\x80\xae' "$tmp/err"; then
  echo "FAIL: the file's name printed as it is:"; cat "$tmp/err"; fail=1
else echo "ok: ... and its name never printed as it is"; fi
exit $fail
