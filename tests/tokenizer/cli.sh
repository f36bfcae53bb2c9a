#!/bin/sh
# tlm-run tokenizer's command line: exit codes (0 ok, 1 error, 2 usage),
# one-line messages, standard input, and encode | decode on a corpus.
# Usage: cli.sh TLM_RUN REFDIR WORKDIR
set -u
tlm=$1 ref=$2 work=$3
mkdir -p "$work"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# expect STATUS DESCRIPTION COMMAND...: the status, and on failure one line
# on stderr starting with "tlm-run tokenizer:".
expect() {
  want=$1 what=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err" </dev/null
  got=$?
  [ "$got" = "$want" ] || fail "$what: exit $got, want $want: $(cat "$work/err")"
  if [ "$want" != 0 ]; then
    lines=$(wc -l <"$work/err")
    [ "$lines" = 1 ] || fail "$what: $lines lines on stderr"
    grep -q '^tlm-run tokenizer\{0,1\}: ' "$work/err" || fail "$what: stderr is not 'tlm-run tokenizer: ...' (or tokenize)"
  fi
}

gpt2=$ref/gpt2
printf 'QQ== 0\nnot a rank line\n' >"$work/bad.model"
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": null' >"$work/bad.json"
printf '12 x3\n' >"$work/bad.ids"
printf '1 2 99999999\n' >"$work/big.ids"
printf 'Hello, world.\n' >"$work/hello.txt"
mkdir -p "$work/emptydir"

expect 2 "no action" "$tlm" tokenizer
expect 2 "unknown action" "$tlm" tokenizer frobnicate --tokenizer "$gpt2"
expect 2 "no --tokenizer" "$tlm" tokenizer encode
expect 2 "unknown flag" "$tlm" tokenizer encode --tokenizer "$gpt2" --bogus
expect 2 "--bos on decode" "$tlm" tokenizer decode --tokenizer "$gpt2" --bos
expect 1 "missing tokenizer" "$tlm" tokenizer info --tokenizer "$work/nonexistent"
expect 1 "folder without encoder.json" "$tlm" tokenizer info --tokenizer "$work/emptydir"
grep -q "emptydir is a folder without GPT-2's encoder.json and vocab.bpe" "$work/err" || fail "an empty folder: $(cat "$work/err")"
# an empty file is said to be empty, not an empty rank file (whatever its name)
: >"$work/empty.json"
expect 1 "an empty tokenizer.json" "$tlm" tokenizer info --tokenizer "$work/empty.json"
grep -q "empty.json is empty (expected a tokenizer.json or a tiktoken rank file)" "$work/err" || fail "an empty file: $(cat "$work/err")"
printf ' \n' >"$work/blank.json"
expect 1 "a blank tokenizer.json" "$tlm" tokenizer info --tokenizer "$work/blank.json"
grep -q "blank.json is empty but for white space" "$work/err" || fail "a blank file: $(cat "$work/err")"
expect 1 "bad rank file" "$tlm" tokenizer info --tokenizer "$work/bad.model"
expect 1 "truncated tokenizer.json" "$tlm" tokenizer info --tokenizer "$work/bad.json"
# a file refused at its first line (a model's .tlm given as the tokenizer)
# is said to be no tokenizer, and how it was read
printf 'model m {\n' >"$work/model.tlm"
expect 1 "a .tlm given as the tokenizer" "$tlm" tokenizer info --tokenizer "$work/model.tlm"
grep -q "model.tlm is not a tokenizer: it does not start with \`{\` (a tokenizer.json), so it was read as a tiktoken rank file, and line 1" \
  "$work/err" || fail "a .tlm as the tokenizer: $(cat "$work/err")"
# an empty token in a rank file is said to be empty, not bad base64
printf 'QQ== 0\n 1\n' >"$work/empty_token.model"
expect 1 "a rank file's empty token" "$tlm" tokenizer info --tokenizer "$work/empty_token.model"
grep -q "line 2: the token is empty" "$work/err" || fail "an empty token: $(cat "$work/err")"
# A rank file whose last token is a megabyte of one letter: every split of
# it was looked up (hashing both sides), n^2 bytes, minutes to load.
i=0
while [ $i -lt 256 ]; do
  printf "%s %d\n" "$(printf "\\$(printf %03o $i)" | base64)" $i
  i=$((i + 1))
done >"$work/long.model"
printf "%s 256\n" "$(head -c 1000000 /dev/zero | tr '\0' a | base64 -w0)" >>"$work/long.model"
expect 0 "a rank file with a 1 MB token loads in seconds" timeout 20 "$tlm" tokenizer info --tokenizer "$work/long.model"
expect 1 "missing input" "$tlm" tokenizer encode --tokenizer "$gpt2" "$work/nonexistent.txt"
# `-` is standard input, as no FILE is (and as sample's --prompt-file -)
"$tlm" tokenizer encode --tokenizer "$gpt2" "$work/hello.txt" >"$work/ids_file" || fail "encode of a file"
"$tlm" tokenizer encode --tokenizer "$gpt2" - <"$work/hello.txt" >"$work/ids_dash" || fail "encode of -: $?"
cmp -s "$work/ids_file" "$work/ids_dash" || fail "encode of - differs from encode of the file"
"$tlm" tokenizer decode --tokenizer "$gpt2" - <"$work/ids_file" >"$work/text_dash" || fail "decode of -: $?"
cmp -s "$work/hello.txt" "$work/text_dash" || fail "decode of - does not give the text back"
# a full disk on standard output: one line (it said so twice), exit 1
expect 1 "encode > /dev/full" sh -c '"$0" tokenizer encode --tokenizer "$1" "$2" > /dev/full' "$tlm" "$gpt2" "$work/hello.txt"
grep -q 'No space left on device' "$work/err" || fail "encode > /dev/full: not the reason: $(cat "$work/err")"
expect 1 "decode of text" "$tlm" tokenizer decode --tokenizer "$gpt2" "$work/bad.ids"
expect 1 "decode of an id past the vocabulary" "$tlm" tokenizer decode --tokenizer "$gpt2" "$work/big.ids"
expect 1 "--bos without a BOS token" "$tlm" tokenizer encode --bos --tokenizer "$gpt2" "$work/hello.txt"
# decode quotes the word that is not an id, nothing after it
printf '65 66 abc 67\n' >"$work/word.ids"
expect 1 "decode of a word" "$tlm" tokenizer decode --tokenizer "$gpt2" "$work/word.ids"
grep -q 'holds `abc`, not a token id' "$work/err" || fail "decode of a word: $(cat "$work/err")"
printf '65 -5\n66\n' >"$work/neg.ids"
expect 1 "decode of a negative id" "$tlm" tokenizer decode --tokenizer "$gpt2" "$work/neg.ids"
grep -q 'holds `-5`, not a token id' "$work/err" || fail "decode of a negative id: $(cat "$work/err")"
# a flag of another action is a usage error naming the action, whatever its value
expect 2 "--vocab on encode" "$tlm" tokenizer encode --vocab 5 --tokenizer "$gpt2" "$work/hello.txt"
grep -q -- '--vocab applies to train only, not encode' "$work/err" || fail "--vocab on encode: $(cat "$work/err")"
expect 2 "-o on info" "$tlm" tokenizer info -o "$work/x" --tokenizer "$gpt2"
grep -q -- '-o applies to train only, not info' "$work/err" || fail "-o on info: $(cat "$work/err")"
expect 2 "--special on train" "$tlm" tokenizer train --special --vocab 300 "$work/hello.txt" -o "$work/t.json"
grep -q -- '--special applies to encode only, not train' "$work/err" || fail "--special on train: $(cat "$work/err")"
# GPT-2's vocab.bpe empty or cut in half: the merges cannot make the vocabulary
mkdir -p "$work/cut"
cp "$gpt2/encoder.json" "$work/cut/encoder.json"
: >"$work/cut/vocab.bpe"
expect 1 "an empty vocab.bpe" "$tlm" tokenizer info --tokenizer "$work/cut"
grep -q 'no merge makes token 256 .*cut short' "$work/err" || fail "an empty vocab.bpe: $(cat "$work/err")"
head -n "$(($(wc -l <"$gpt2/vocab.bpe") / 2))" "$gpt2/vocab.bpe" >"$work/cut/vocab.bpe"
expect 1 "a vocab.bpe cut in half" "$tlm" tokenizer info --tokenizer "$work/cut"
grep -q 'cut short' "$work/err" || fail "a vocab.bpe cut in half: $(cat "$work/err")"
expect 0 "help" "$tlm" tokenizer --help
expect 0 "encode a file" "$tlm" tokenizer encode --tokenizer "$gpt2" "$work/hello.txt"
[ "$(cat "$work/out")" = "15496 11 995 13 198" ] || fail "encode hello: $(cat "$work/out")"

# standard input, and encode | decode gives the bytes back
printf 'Hello, world.\n' | "$tlm" tokenizer encode --tokenizer "$gpt2" >"$work/stdin.ids" ||
  fail "encode from standard input"
[ "$(cat "$work/stdin.ids")" = "15496 11 995 13 198" ] || fail "encode from standard input: $(cat "$work/stdin.ids")"
for tok in "$gpt2" "$ref/llama3/tokenizer.model"; do
  head -c 200000 "$(dirname "$0")/../../data/kjv/kjv.txt" >"$work/kjv.txt"
  "$tlm" tokenizer encode --tokenizer "$tok" "$work/kjv.txt" | "$tlm" tokenizer decode --tokenizer "$tok" >"$work/kjv.back" ||
    fail "encode | decode with $tok"
  cmp -s "$work/kjv.txt" "$work/kjv.back" || fail "encode | decode with $tok: not the same bytes"
done
# ids far past stdio's buffer, and their text, onto a full disk: the reason said
expect 1 "encode of 200 kB > /dev/full" sh -c '"$0" tokenizer encode --tokenizer "$1" "$2" > /dev/full' "$tlm" "$gpt2" "$work/kjv.txt"
grep -q "cannot write to standard output: No space left on device" "$work/err" || fail "encode > /dev/full: $(cat "$work/err")"
"$tlm" tokenizer encode --tokenizer "$gpt2" "$work/kjv.txt" >"$work/kjv.ids"
expect 1 "decode of 200 kB > /dev/full" sh -c '"$0" tokenizer decode --tokenizer "$1" "$2" > /dev/full' "$tlm" "$gpt2" "$work/kjv.ids"
grep -q "cannot write to standard output: No space left on device" "$work/err" || fail "decode > /dev/full: $(cat "$work/err")"

# train: usage, bad data, and the file written whole (no temporary left)
expect 2 "train without --vocab" "$tlm" tokenizer train "$work/hello.txt" -o "$work/t.json"
expect 2 "train without -o" "$tlm" tokenizer train --vocab 300 "$work/hello.txt"
expect 2 "train without data" "$tlm" tokenizer train --vocab 300 -o "$work/t.json"
expect 2 "train -o twice" "$tlm" tokenizer train --vocab 300 "$work/hello.txt" -o "$work/t1.json" -o "$work/t2.json"
grep -q "output given twice" "$work/err" || fail "train -o twice: $(cat "$work/err")"
expect 2 "tokenize -o twice" "$tlm" tokenize --tokenizer "$gpt2" "$work/hello.txt" -o "$work/s1.bin" -o "$work/s2.bin"
grep -q "output given twice" "$work/err" || fail "tokenize -o twice: $(cat "$work/err")"
expect 2 "train --vocab 256" "$tlm" tokenizer train --vocab 256 "$work/hello.txt" -o "$work/t.json"
expect 2 "train --tokenizer" "$tlm" tokenizer train --tokenizer "$gpt2" --vocab 300 "$work/hello.txt" -o "$work/t.json"
expect 1 "train on a missing file" "$tlm" tokenizer train --vocab 300 "$work/nonexistent.txt" -o "$work/t.json"
expect 1 "train into a missing folder" "$tlm" tokenizer train --vocab 300 "$work/kjv.txt" -o "$work/no/such/t.json"
expect 0 "train" "$tlm" tokenizer train --vocab 400 "$work/kjv.txt" -o "$work/t.json"
grep -q ': 400 tokens, ' "$work/err" && ! grep -q 'stopped short' "$work/err" || fail "train's summary: $(cat "$work/err")"
# a text too small for the vocabulary asked: the summary says where and why it stopped
expect 0 "train short of --vocab" "$tlm" tokenizer train --vocab 1000 "$work/hello.txt" -o "$work/short.json"
grep -q ': 266 tokens (stopped short of --vocab 1000: no pair of tokens was left' "$work/err" ||
  fail "train short of --vocab: $(cat "$work/err")"
ls "$work" | grep -q '\.tmp\.' && fail "train left a temporary file"
"$tlm" tokenizer encode --tokenizer "$work/t.json" "$work/kjv.txt" | "$tlm" tokenizer decode --tokenizer "$work/t.json" >"$work/kjv.back2" ||
  fail "encode | decode with the trained tokenizer"
cmp -s "$work/kjv.txt" "$work/kjv.back2" || fail "encode | decode with the trained tokenizer: not the same bytes"
"$tlm" tokenizer info --tokenizer "$work/t.json" | grep -q '^vocab     400$' || fail "the trained tokenizer has not 400 tokens"

# tokenize: a shard of two documents, each followed by <|endoftext|>, reads
# back to the documents' bytes; its header; damaged shards are refused.
printf 'First document.\n' >"$work/doc1.txt"
printf 'Second one, \xc3\xa9t\xc3\xa9.' >"$work/doc2.txt"
mkdir -p "$work/docs" && cp "$work/doc1.txt" "$work/docs/a.txt" && cp "$work/doc2.txt" "$work/docs/b.txt"
expect 2 "tokenize without -o" "$tlm" tokenize --tokenizer "$gpt2" "$work/doc1.txt"
expect 2 "tokenize --eot and --no-eot" "$tlm" tokenize --tokenizer "$gpt2" --eot x --no-eot "$work/doc1.txt" -o "$work/s.bin"
expect 1 "tokenize --eot not a token" "$tlm" tokenize --tokenizer "$gpt2" --eot "not one token" "$work/doc1.txt" -o "$work/s.bin"
expect 2 "tokenize --eot ''" "$tlm" tokenize --tokenizer "$gpt2" --eot "" "$work/doc1.txt" -o "$work/s.bin"
# an empty path is a usage slip, not "cannot open : No such file or directory"
expect 2 "tokenize ''" "$tlm" tokenize --tokenizer "$gpt2" "" -o "$work/s.bin"
grep -q "DATA is empty: it needs a path" "$work/err" || fail "tokenize '': $(cat "$work/err")"
for action in encode decode; do
  expect 2 "$action ''" "$tlm" tokenizer $action --tokenizer "$gpt2" ""
  grep -q "FILE is empty: it needs a path" "$work/err" || fail "$action '': $(cat "$work/err")"
done
expect 2 "train ''" "$tlm" tokenizer train --vocab 300 "" -o "$work/t.json"
grep -q "DATA is empty: it needs a path" "$work/err" || fail "train '': $(cat "$work/err")"
: >"$work/empty.txt" && rm -f "$work/of_empty.bin"
expect 1 "tokenize an empty text" "$tlm" tokenize --tokenizer "$gpt2" "$work/empty.txt" -o "$work/of_empty.bin"
grep -q "no text to tokenize: $work/empty.txt holds none$" "$work/err" || fail "tokenize an empty text: $(cat "$work/err")"
[ ! -e "$work/of_empty.bin" ] || fail "tokenize an empty text wrote $work/of_empty.bin"
# a tokenizer.json saved with a byte order mark reads as the file without it
tok300=$(dirname "$0")/../frontend/tokenizer/tok300.json
printf '\357\273\277' >"$work/bom.json" && cat "$tok300" >>"$work/bom.json"
expect 0 "a tokenizer.json with a BOM" "$tlm" tokenize --tokenizer "$work/bom.json" --no-eot "$work/doc1.txt" -o "$work/bom.bin"
expect 0 "... the same without" "$tlm" tokenize --tokenizer "$tok300" --no-eot "$work/doc1.txt" -o "$work/nobom.bin"
cmp -s "$work/bom.bin" "$work/nobom.bin" || fail "a BOM changed the shard"
# a vocabulary id out of range names the token and the id
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); v = t["model"]["vocab"]; v[list(v)[5]] = 10000; json.dump(t, open(sys.argv[2], "w"))' \
  "$tok300" "$work/gap.json"
expect 1 "a vocabulary id out of range" "$tlm" tokenizer info --tokenizer "$work/gap.json"
grep -q "the id of the vocabulary's token 6 (in file order) 10000 is out of range" "$work/err" || fail "an id out of range: $(cat "$work/err")"
expect 0 "tokenize" "$tlm" tokenize --tokenizer "$gpt2" "$work/doc1.txt" "$work/doc2.txt" -o "$work/s.bin"
expect 0 "tokenize a folder" "$tlm" tokenize --tokenizer "$gpt2" "$work/docs" -o "$work/s2.bin"
head -c 3000000 /dev/zero | tr '\0' 'a' >"$work/big_doc.txt"
rm -f "$work/big.bin"
expect 1 "tokenize a document larger than the memory left" \
  env TLM_MEMORY_LIMIT=2M "$tlm" tokenize --tokenizer "$gpt2" "$work/big_doc.txt" -o "$work/big.bin"
grep -q 'big_doc.txt: the document (2.9 MiB) does not fit in memory (2.0 MiB available, TLM_MEMORY_LIMIT)' "$work/err" ||
  fail "tokenize over the memory budget: $(cat "$work/err")"
[ -e "$work/big.bin" ] && fail "tokenize over the memory budget left $work/big.bin"
cmp -s "$work/s.bin" "$work/s2.bin" || fail "a folder's shard differs from its files' shard"
ls "$work" | grep -q '\.tmp\.' && fail "tokenize left a temporary file"
expect 0 "tokenize --info" "$tlm" tokenize --info "$work/s.bin" --tokenizer "$gpt2"
grep -q '^width     2$' "$work/out" && grep -q '^eot       50256$' "$work/out" || fail "the shard's header: $(cat "$work/out")"
grep -q "^bytes     $(cat "$work/doc1.txt" "$work/doc2.txt" | wc -c)\$" "$work/out" ||
  fail "the shard's byte count is not the documents' size: $(cat "$work/out")"
"$tlm" tokenize --dump "$work/s.bin" | "$tlm" tokenizer decode --tokenizer "$gpt2" >"$work/s.back"
printf 'First document.\n<|endoftext|>Second one, \xc3\xa9t\xc3\xa9.<|endoftext|>' | cmp -s - "$work/s.back" ||
  fail "the shard does not decode to the documents and their end-of-text tokens"
"$tlm" tokenize --dump "$work/s.bin" >"$work/s.ids"
expect 1 "tokenize --dump > /dev/full" sh -c '"$0" tokenize --dump "$1" > /dev/full' "$tlm" "$work/s.bin"
{ "$tlm" tokenizer encode --tokenizer "$gpt2" "$work/doc1.txt" | tr '\n' ' '; printf '50256 '
  "$tlm" tokenizer encode --tokenizer "$gpt2" "$work/doc2.txt" | tr '\n' ' '; printf '50256\n'; } >"$work/s.want"
cmp -s "$work/s.ids" "$work/s.want" || fail "the shard's ids are not the documents' ids: $(cat "$work/s.ids")"
expect 0 "tokenize with Llama 3 (4-byte tokens, <|end_of_text|>)" "$tlm" tokenize --tokenizer "$ref/llama3/tokenizer.model" \
  "$work/doc1.txt" -o "$work/l.bin"
expect 0 "tokenize --info of a Llama 3 shard" "$tlm" tokenize --info "$work/l.bin"
grep -q '^width     4$' "$work/out" && grep -q '^eot       128001$' "$work/out" || fail "the Llama 3 shard's header: $(cat "$work/out")"
expect 1 "a shard made with another tokenizer" "$tlm" tokenize --info "$work/l.bin" --tokenizer "$gpt2"
head -c 80 "$work/s.bin" >"$work/trunc.bin"
expect 1 "a truncated shard" "$tlm" tokenize --info "$work/trunc.bin"
{ cat "$work/s.bin"; printf 'x'; } >"$work/trail.bin"
expect 1 "a shard with trailing bytes" "$tlm" tokenize --info "$work/trail.bin"
{ printf 'TLMSHARX'; tail -c +9 "$work/s.bin"; } >"$work/magic.bin"
expect 1 "a shard with a wrong magic" "$tlm" tokenize --info "$work/magic.bin"
{ head -c 8 "$work/s.bin"; printf '\003\000\000\000'; tail -c +13 "$work/s.bin"; } >"$work/version.bin"
expect 1 "a shard of version 3" "$tlm" tokenize --dump "$work/version.bin"
# version 1: the 64-byte header without the byte count, still read
{ head -c 8 "$work/s.bin"; printf '\001\000\000\000'; head -c 64 "$work/s.bin" | tail -c +13; tail -c +73 "$work/s.bin"; } >"$work/v1.bin"
expect 0 "a shard of version 1" "$tlm" tokenize --dump "$work/v1.bin"
cmp -s "$work/out" "$work/s.ids" || fail "the version-1 shard's ids differ"
{ head -c 72 "$work/s.bin"; printf '\377\377'; tail -c +75 "$work/s.bin"; } >"$work/badid.bin"
expect 1 "a shard with an id past the vocabulary" "$tlm" tokenize --dump "$work/badid.bin"
: >"$work/empty.bin"
expect 1 "an empty shard file" "$tlm" tokenize --info "$work/empty.bin"

# tokenize on threads: the text is cut into parts at newlines after a letter
# or digit (tlm_tok_split_point), each part encoded on its own; the shard must
# hold exactly the ids of encoding each document whole, for any --threads.
# A hostile text (contractions, digits, CRLF, punctuation before newlines,
# non-ASCII letters, emoji) of 1.2 MB makes parts of every kind of boundary.
/usr/bin/python3 - "$work/hostile.txt" <<'PY' || fail "writing the hostile text (python3)"
import random, sys
r = random.Random(7)
pieces = ["word", "Word", "WORD", "l33t", "123", "4567890", "'s", "'LL", " ", "  ", "\t", "\n", "\r\n", "\n\n",
          "...", "!?", "\u2014", "\u00e9", "\u65e5\u672c\u8a9e", "\U0001F600\U0001F389", " x", "\u00a0", "don't",
          "I'm", "(", ")", "-\n", "a\n", "9\n", ".\n", "\n ", " \n"]
open(sys.argv[1], "w", encoding="utf-8").write("".join(r.choice(pieces) for _ in range(420000)))
PY
head -c 1500000 "$(dirname "$0")/../../data/kjv/kjv.txt" >"$work/kjv1500.txt"
for tok in "$gpt2" "$ref/llama3/tokenizer.model"; do
  { "$tlm" tokenizer encode --tokenizer "$tok" "$work/hostile.txt" &&
    "$tlm" tokenizer encode --tokenizer "$tok" "$work/kjv1500.txt"; } | tr '\n' ' ' | sed 's/ $//' >"$work/whole.ids"
  echo >>"$work/whole.ids"
  for threads in 1 3; do
    expect 0 "tokenize --threads $threads" "$tlm" tokenize --tokenizer "$tok" --no-eot --threads "$threads" \
      "$work/hostile.txt" "$work/kjv1500.txt" -o "$work/threads$threads.bin"
    "$tlm" tokenize --dump "$work/threads$threads.bin" >"$work/threads.ids"
    cmp -s "$work/threads.ids" "$work/whole.ids" ||
      fail "tokenize --threads $threads with $tok: not the ids of encoding each document whole"
  done
done
expect 2 "tokenize --threads 0" "$tlm" tokenize --tokenizer "$gpt2" --threads 0 "$work/hello.txt" -o "$work/x.bin"

if [ "$fails" != 0 ]; then
  echo "tokenizer cli: $fails failure(s)"
  exit 1
fi
echo "tokenizer cli: all checks passed"
