#!/usr/bin/env bash
# Downstream scoring in `tlm-run eval` and the bundled sets. One case per
# ctest test:
#
#   downstream.sh CASE TLMC TLM_RUN SOURCE_ROOT WORK_DIR
#
# `model` compiles tests/run/models.tlm's small Transformer and Titans
# models and trains them briefly into WORK_DIR (a fixture for the others).
set -u
case_=$1 tlmc=$2 run=$3 root=$4 work=$5
py=${TLM_PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
models=$work/models
sets=$root/data/downstream

. "$here/../expect.sh"   # expect, check, start_case
start_case "$work/$case_"

small=$models/small.so
ck=$models/small.ckpt
T=64   # the small models' context
eval_small() { "$run" eval "$small" --ckpt "$ck" --threads 1 "$@"; }

case $case_ in

regenerate)
  # The bundled sets are what the script makes, byte for byte.
  check "make_downstream.py runs" -- "$py" "$root/scripts/make_downstream.py" --root "$root" --out "$tmp/sets"
  for f in persuasion_cloze persuasion_next kjv_cloze kjv_next; do
    check "$f.jsonl is reproduced byte for byte" -- cmp "$sets/$f.jsonl" "$tmp/sets/$f.jsonl"
  done
  check "no other files" -- test "$(ls "$tmp/sets" | tr '\n' ' ')" = "kjv_cloze.jsonl kjv_next.jsonl persuasion_cloze.jsonl persuasion_next.jsonl "
  check "every item is well formed: cloze ends on a word of >= 3 letters, 4 choices, label in range, no overlap with the context" -- "$py" - "$sets" <<'EOF'
import json, re, sys, os
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    items = [json.loads(l) for l in open(os.path.join(d, f))]
    assert 100 <= len(items) <= 400, (f, len(items))
    for it in items:
        if f.endswith("_cloze.jsonl"):
            assert re.search(r"\s[A-Za-z]{3,}$", it["text"]), it
        else:
            assert len(it["choices"]) == 4 and 0 <= it["label"] < 4 and len(set(it["choices"])) == 4, it
            assert all(c.startswith(" ") for c in it["choices"]), it
    if f.endswith("_next.jsonl"):
        labels = [it["label"] for it in items]
        assert all(labels.count(k) >= len(items) // 8 for k in range(4)), labels   # shuffled
    print(f, len(items), "items")
EOF
  ;;

model)
  mkdir -p "$models"
  for m in small small_titans ascii; do
    expect 0 "" "tlmc --model $m" -- "$tlmc" "$root/tests/run/models.tlm" --model "$m" -o "$models/$m.so"
  done
  expect 0 "done: 150 steps" "train small, 150 steps" -- \
    "$run" train "$small" --steps 150 --eval-every 150 --eval-batches 2 --ckpt "$ck" --threads 1 --overwrite
  expect 0 "done: 40 steps" "train small_titans, 40 steps" -- \
    "$run" train "$models/small_titans.so" --steps 40 --eval-every 40 --eval-batches 2 --ckpt "$models/titans.ckpt" \
    --threads 1 --overwrite
  expect 0 "done: 1 step," "train ascii (128 tokens), 1 step" -- \
    "$run" train "$models/ascii.so" --steps 1 --eval-batches 1 --ckpt "$models/ascii.ckpt" --threads 1 --overwrite \
    --data "$root/data/kjv/kjv.txt"
  ;;

hand)
  # Each log-likelihood against `tlm-run eval --data` on a text holding
  # exactly the window: loglik(choice | context) = -(loss(context + choice)
  # x its predictions - loss(context) x its predictions), the losses from
  # the windows code path (--json gives 17 digits). The window is T + 1 =
  # 65 bytes, so the third item's context is cut from the left, and the
  # fourth item's first choice (75 bytes) is scored on its last 64.
  long="Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, for his own amusement, never took up any book"
  cat > hand.jsonl <<EOF
{"context": "It is a truth universally", "choices": [" acknowledged", " known", " a"], "label": 0}

{"context": "Anne", "choices": [" Elliot", " was"], "label": 1}
{"context": "$long", "choices": [" but the Baronetage", " at all", " of sermons", " with pleasure"], "label": 0}
{"context": "Anne", "choices": [" had been a very pretty girl, but her bloom had vanished early; and as even", " was"], "label": 0}
EOF
  # a cloze item the model gets right: its target is the model's own
  # greedy continuation of the context, cut after the first word
  prompt="She was"
  expect 0 "" "greedy sample of \"$prompt\"" -- \
    "$run" sample "$small" --ckpt "$ck" --threads 1 --prompt "$prompt" --temperature 0 --length 30
  word=$("$py" -c "import sys, re; s = open(sys.argv[1]).read()[len(sys.argv[2]):]; print(re.match(r'\s\S+', s).group(0).strip())" "$tmp/out" "$prompt")
  printf '{"text": "%s %s"}\n{"text": "Captain Wentworth"}\n{"text": "It was a fine day at Uppercross  \\n"}\n' \
    "$prompt" "$word" > cloze.jsonl
  expect 0 '"kind":"cloze"' "eval --choices --cloze --json --items" -- \
    eval_small --choices hand.jsonl --cloze cloze.jsonl --json --items
  check "the fourth item's choice cut to the window: a note on stderr" -- grep -q \
    "^note: hand.jsonl: 1 continuation of more than the window's 64 tokens, scored on its last 64 tokens only" "$tmp/err"
  cp "$tmp/out" "$tmp/items"
  sed 's/^/    /' "$tmp/items"
  check "each log-likelihood equals the difference of eval's losses on the window (<= 1e-5 relative)" -- \
    "$py" - "$tmp/items" "$run" "$small" "$ck" "$T" <<'EOF'
import json, subprocess, sys
items, run, so, ck, T = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
n = 0
def total_loss(text):
    """The summed loss of every prediction in text (one window of len - 1)."""
    if len(text) < 2:
        return 0.0
    with open("w.txt", "wb") as f:
        f.write(text)
    out = subprocess.run([run, "eval", so, "--ckpt", ck, "--threads", "1", "--data", "w.txt", "--context",
                          str(len(text) - 1), "--json"], capture_output=True, check=True, text=True).stdout
    j = json.loads(out)
    assert j["kind"] == "text" and j["tokens"] == len(text) - 1, j
    return j["loss"] * (len(text) - 1)
def want(context, cont):
    full = (context + cont)[-(T + 1):]
    return -(total_loss(full) - total_loss(full[:max(1, len(full) - len(cont))]))
lines = [json.loads(l) for l in open(items)]
choices = [json.loads(l) for l in open("hand.jsonl") if l.strip()]
cloze = [json.loads(l) for l in open("cloze.jsonl")]
got = [l for l in lines if l["kind"] == "choices_item"]
assert [g["line"] for g in got] == [1, 3, 4, 5], got          # the blank line 2 is skipped, numbering kept
for item, g in zip(choices, got):
    for c, ll, nb in zip(item["choices"], g["loglik"], g["bytes"]):
        w = want(item["context"].encode(), c.encode())
        assert abs(ll - w) <= 1e-5 * abs(w), (item["context"][:20], c, ll, w)
        assert nb == len(c.encode())
        n += 1
def split(text):
    b = text.encode().rstrip()
    cut = max(b.rfind(b" "), b.rfind(b"\n"))
    return b[:cut], b[cut:]
got = [l for l in lines if l["kind"] == "cloze_item"]
for item, g in zip(cloze, got):
    ctx, target = split(item["text"])
    w = want(ctx, target)
    assert abs(g["loglik"] - w) <= 1e-5 * abs(w), (item, g, w)
    n += 1
print(n, "log-likelihoods checked")
EOF
  check "the summaries: accuracy = argmax matches the label, per byte likewise, chance = mean 1/choices; cloze: accuracy and mean target log-likelihood" -- \
    "$py" - "$tmp/items" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
argmax = lambda v: max(range(len(v)), key=lambda i: (v[i], -i))
it = [l for l in lines if l["kind"] == "choices_item"]
s = [l for l in lines if l["kind"] == "choices"][0]
assert s["items"] == 4 and s["data"] == "hand.jsonl", s
assert s["accuracy"] == sum(argmax(i["loglik"]) == i["label"] for i in it) / 4, s
assert s["accuracy_norm"] == sum(argmax([a / b for a, b in zip(i["loglik"], i["bytes"])]) == i["label"] for i in it) / 4, s
assert abs(s["chance"] - (1/3 + 1/2 + 1/4 + 1/2) / 4) < 1e-15, s
it = [l for l in lines if l["kind"] == "cloze_item"]
s = [l for l in lines if l["kind"] == "cloze"][0]
assert s["items"] == 3 and s["accuracy"] == sum(i["correct"] for i in it) / 3, s
assert abs(s["target_loglik"] - sum(i["loglik"] for i in it) / 3) < 1e-12, s
print("accuracy", s["accuracy"], "target loglik", s["target_loglik"])
EOF
  # cloze's "correct" against greedy sampling (the KV-cache decoder): the
  # target is right exactly when greedy decoding of the context begins with it
  check "cloze: right exactly when greedy sampling reproduces the target (the first item is, by construction)" -- \
    "$py" - "$tmp/items" "$run" "$small" "$ck" <<'EOF'
import json, subprocess, sys
items, run, so, ck = sys.argv[1:5]
got = [json.loads(l) for l in open(items) if '"cloze_item"' in l]
cloze = [json.loads(l)["text"].rstrip() for l in open("cloze.jsonl")]
assert got[0]["correct"], got[0]
for text, g in zip(cloze, got):
    cut = max(text.rfind(" "), text.rfind("\n"))
    ctx, target = text[:cut], text[cut:]
    out = subprocess.run([run, "sample", so, "--ckpt", ck, "--threads", "1", "--prompt", ctx, "--temperature", "0",
                          "--length", str(len(target))], capture_output=True, check=True, text=True).stdout
    greedy = out[len(ctx):len(ctx) + len(target)]
    assert (greedy == target) == g["correct"], (ctx, target, greedy, g)
    print(repr(target), "greedy", repr(greedy), g["correct"])
EOF
  expect 0 "hand.jsonl" "the table (without --json)" -- eval_small --choices hand.jsonl --cloze cloze.jsonl
  sed 's/^/    /' "$tmp/out"
  check "the table holds the summaries' numbers" -- bash -c "grep -q '^hand.jsonl  *4  ' '$tmp/out' && grep -q '^cloze.jsonl  *3  ' '$tmp/out'"
  ;;

pytorch)
  # The bundled sets' first items (and the hand-made long one) scored by
  # the float64 PyTorch reference model, for the Transformer and for Titans
  # (whose chunked memory must not see the right padding of a batch).
  head -n 40 "$sets/persuasion_next.jsonl" > next.jsonl
  head -n 10 "$sets/kjv_next.jsonl" >> next.jsonl
  head -n 40 "$sets/persuasion_cloze.jsonl" > cloze.jsonl
  head -n 10 "$sets/kjv_cloze.jsonl" >> cloze.jsonl
  for m in small small_titans; do
    c=$ck; [ $m = small_titans ] && c=$models/titans.ckpt
    # a few items each model gets right: the target is its own greedy
    # continuation of the context, cut after the first word
    cp cloze.jsonl "cloze_$m.jsonl"
    for prompt in "She was" "It was not" "Anne had" "Mr Elliot" "And the LORD"; do
      "$run" sample "$models/$m.so" --ckpt "$c" --threads 1 --prompt "$prompt" --temperature 0 --length 30 > sample.out
      "$py" -c "import sys, re, json; s = open(sys.argv[1]).read()[len(sys.argv[2]):]; w = re.match(r'\s\S+', s)
if w: print(json.dumps({'text': sys.argv[2] + ' ' + w.group(0).strip()}))" sample.out "$prompt" >> "cloze_$m.jsonl"
    done
    expect 0 '"kind":"cloze"' "$m: eval --json --items (batch 5: mixed lengths per batch)" -- \
      "$run" eval "$models/$m.so" --ckpt "$c" --threads 1 --batch 5 --choices next.jsonl --cloze "cloze_$m.jsonl" --json --items
    cp "$tmp/out" "$tmp/$m.items"
    grep -v _item "$tmp/$m.items" | sed 's/^/    /'
    check "$m: some cloze items right" -- grep -q '"correct":true' "$tmp/$m.items"
    "$py" "$here/check_downstream.py" "$c/checkpoint.safetensors" "$T" "$tmp/$m.items" next.jsonl "cloze_$m.jsonl" \
      > "$tmp/check" 2>&1 && echo "ok: $m: the scores match the PyTorch reference" || {
      echo "FAIL: $m: the scores differ from the PyTorch reference (or it cannot run)"; fail=1; }
    grep -v "^ok" "$tmp/check" | sed 's/^/    /' | tail -12
  done
  expect 0 "" "the same with batch 1" -- eval_small --batch 1 --choices next.jsonl --cloze cloze_small.jsonl --json --items
  check "batching changes the scores only by rounding (<= 1e-5 relative)" -- "$py" - "$tmp/small.items" "$tmp/out" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b)
for x, y in zip(a, b):
    for k in ("loglik",):
        if k in x:
            u = x[k] if isinstance(x[k], list) else [x[k]]
            v = y[k] if isinstance(y[k], list) else [y[k]]
            assert all(abs(p - q) <= 1e-5 * abs(q) for p, q in zip(u, v)), (x, y)
print(len(a), "lines compared")
EOF
  ;;

bad_input)
  printf '{"context": "a", "choices": [" b"], "label": 0}\n' > good.jsonl
  bad() {   # bad NAME CONTENT PATTERN [--cloze]
    local name=$1 content=$2 pattern=$3 flag=${4:---choices}
    printf '%b' "$content" > "$name.jsonl"
    expect 1 "$pattern" "$name" -- eval_small $flag "$name.jsonl"
  }
  bad malformed '{"context": "a", "choices": [" b"], "label": 0}\n{"context": "a",\n' 'malformed.jsonl:2: JSON'
  bad not_object '[1, 2]\n' 'not_object.jsonl:1: an item must be a JSON object, not an array'
  bad no_context '{"choices": [" b"], "label": 0}\n' 'no_context.jsonl:1: the item has no "context"'
  bad no_choices '{"context": "a", "label": 0}\n' 'no_choices.jsonl:1: the item has no "choices"'
  bad no_label '{"context": "a", "choices": [" b"]}\n' 'no_label.jsonl:1: the item has no "label"'
  bad context_type '{"context": 3, "choices": [" b"], "label": 0}\n' 'context_type.jsonl:1: "context" must be a string, not a number'
  bad label_range '\n{"context": "a", "choices": [" b", " c"], "label": 2}\n' 'label_range.jsonl:2: "label" must be an integer from 0 to 1'
  bad label_negative '{"context": "a", "choices": [" b", " c"], "label": -1}\n' 'label_negative.jsonl:1: "label" must be an integer'
  bad label_real '{"context": "a", "choices": [" b", " c"], "label": 0.5}\n' 'label_real.jsonl:1: "label" must be an integer'
  bad empty_choices '{"context": "a", "choices": [], "label": 0}\n' 'empty_choices.jsonl:1: "choices" is empty'
  bad empty_choice '{"context": "a", "choices": [" b", ""], "label": 0}\n' 'empty_choice.jsonl:1: choice 1 is empty'
  bad choice_type '{"context": "a", "choices": [" b", 7], "label": 0}\n' 'choice_type.jsonl:1: choice 1 is not a string'
  bad empty_context '{"context": "", "choices": [" b"], "label": 0}\n' 'empty_context.jsonl:1: choice 0 has no context'
  bad empty '' 'empty.jsonl: no items'
  bad blank '\n  \n\t\n' 'blank.jsonl: no items (no JSON line in it)'
  bad utf8 '{"context": "a", "choices": [" b"], "label": 0}\n{"context": "\xff", "choices": [" b"], "label": 0}\n' 'utf8.jsonl:2: JSON: invalid UTF-8'
  bad cloze_one_word '{"text": "word"}\n' 'cloze_one_word.jsonl:1: "text" needs a word before its last word' --cloze
  bad cloze_blank '{"text": "   "}\n' 'cloze_blank.jsonl:1: "text" needs a word' --cloze
  bad cloze_no_text '{"passage": "a b"}\n' 'cloze_no_text.jsonl:1: the item has no "text"' --cloze
  expect 1 "cloze_one_word.jsonl:1" "a bad set after a good one is refused before any scoring" -- \
    eval_small --choices good.jsonl --cloze cloze_one_word.jsonl --json
  check "... with nothing on stdout" -- test ! -s "$tmp/out"
  expect 1 "missing.jsonl" "a missing file" -- eval_small --choices "$tmp/missing.jsonl"
  expect 1 "a directory" "a directory" -- eval_small --cloze "$tmp"
  expect 1 "a FIFO" "a FIFO is refused, not waited on" -- bash -c "mkfifo '$tmp/fifo' && exec \"\$@\"" _ \
    "$run" eval "$small" --ckpt "$ck" --threads 1 --choices "$tmp/fifo"
  # a UTF-8 byte-order mark (Windows editors write one) is skipped, as
  # tokenizer.json's is: the same scores as without it; one past the start
  # is text, and no JSON
  printf '\357\273\277' > bom.jsonl && cat good.jsonl >> bom.jsonl
  expect 0 '"items":1' "a set with a byte-order mark" -- eval_small --choices bom.jsonl --json
  sed 's/bom.jsonl/good.jsonl/' "$tmp/out" > bom.out
  expect 0 '"items":1' "... the same set without it" -- eval_small --choices good.jsonl --json
  check "... the same scores" -- cmp -s bom.out "$tmp/out"
  bad bom_late '{"context": "a", "choices": [" b"], "label": 0}\n\357\273\277{"context": "a", "choices": [" b"], "label": 0}\n' \
    'bom_late.jsonl:2: JSON'
  # UTF-8 is scored as its bytes; a 128-token model cannot read them
  printf '{"context": "caf\\u00e9", "choices": [" na\xc3\xafve", " b"], "label": 0}\n' > utf8_ok.jsonl
  expect 0 '"items":1' "UTF-8 text (an escape and raw bytes) is scored as bytes" -- eval_small --choices utf8_ok.jsonl --json
  expect 1 "utf8_ok.jsonl:1: the context: byte 195 is outside the model's vocabulary of 128" "bytes beyond a 128-token vocabulary" -- \
    "$run" eval "$models/ascii.so" --ckpt "$models/ascii.ckpt" --threads 1 --choices utf8_ok.jsonl
  expect 2 "--items goes with --json" "--items without --json" -- eval_small --choices good.jsonl --items
  expect 2 "--json" "probe --json takes no value" -- "$run" probe "$small" --ckpt "$ck" --json=yes
  expect 1 "trained on text as bytes, not with a tokenizer" "--tokenizer with a checkpoint trained on bytes" -- \
    eval_small --choices good.jsonl --tokenizer good.jsonl
  # --check: the same reading and checks, no checkpoint, nothing scored
  expect 0 "^ok: 1 text and 2 sets fit model small (windows of 64 tokens)$" "eval --check of a text and two sets" -- \
    "$run" eval "$small" --check --data "$root/data/kjv/kjv.txt" --choices good.jsonl --cloze "$here/../study/cloze.jsonl"
  expect 1 "empty.jsonl: no items" "eval --check: a set with no items" -- "$run" eval "$small" --check --choices empty.jsonl
  printf x > one_byte.txt
  expect 1 "one_byte.txt: data too short: 1 token, a window needs 65" "eval --check: a text shorter than a window" -- \
    "$run" eval "$small" --check --data one_byte.txt
  expect 1 "byte 195 is outside the model's vocabulary of 128" "eval --check: bytes beyond a 128-token vocabulary" -- \
    "$run" eval "$models/ascii.so" --check --choices utf8_ok.jsonl
  expect 2 "--check reads no checkpoint and scores nothing: drop --ckpt" "eval --check --ckpt" -- \
    "$run" eval "$small" --check --ckpt "$ck" --choices good.jsonl
  ;;

json)
  # --json: one object per set, in the documented layout, numbers with 17
  # digits; the same numbers as the table.
  p=$root/data/austen/persuasion.txt
  expect 0 "" "eval --json on two texts and two sets" -- \
    eval_small --data "$p" --data "$root/data/kjv/kjv.txt" --max-tokens 4096 --json \
    --choices "$sets/persuasion_next.jsonl" --cloze "$sets/kjv_cloze.jsonl"
  cp "$tmp/out" json.out
  sed 's/^/    /' json.out
  expect 0 "" "the same as a table" -- eval_small --data "$p" --data "$root/data/kjv/kjv.txt" --max-tokens 4096 \
    --choices "$sets/persuasion_next.jsonl" --cloze "$sets/kjv_cloze.jsonl"
  cp "$tmp/out" table.out
  check "four objects with exactly the documented keys; the table's numbers" -- \
    "$py" - json.out table.out "$p" "$sets" <<'EOF'
import json, math, sys
lines = open(sys.argv[1]).read().splitlines()
table = open(sys.argv[2]).read()
p, sets = sys.argv[3], sys.argv[4]
objs = [json.loads(l) for l in lines]
keys = [list(o) for o in objs]
assert keys == [["kind", "data", "tokens", "loss", "ppl", "bpb"]] * 2 + \
    [["kind", "data", "items", "accuracy", "accuracy_norm", "chance"], ["kind", "data", "items", "accuracy", "target_loglik"]], keys
assert [o["kind"] for o in objs] == ["text", "text", "choices", "cloze"]
assert objs[0]["data"] == p and objs[2]["data"] == sets + "/persuasion_next.jsonl", objs
t = objs[0]
assert t["tokens"] == 4096 and abs(t["ppl"] - math.exp(t["loss"])) < 1e-12 * t["ppl"] and abs(t["bpb"] - t["loss"] / math.log(2)) < 1e-12
assert f"{t['loss']:.4f}" in table and f"{objs[2]['accuracy']:.4f}" in table and f"{objs[3]['target_loglik']:.4f}" in table
assert objs[2]["items"] == 150 and objs[2]["chance"] == 0.25 and objs[3]["items"] == 200
assert any(len(l.split(":")[-1]) > 12 for l in lines), "17 digits"
print(objs[2], objs[3])
EOF
  expect 0 '"kind":"probe"' "probe --json" -- "$run" probe "$small" --ckpt "$ck" --threads 1 --windows 4 --json
  cp "$tmp/out" probe.json
  expect 0 "rho" "probe's table" -- "$run" probe "$small" --ckpt "$ck" --threads 1 --windows 4
  check "probe --json: {kind, windows, context, rho: one per layer}, the table's numbers" -- \
    "$py" - probe.json "$tmp/out" <<'EOF'
import json, re, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1
o = json.loads(lines[0])
assert list(o) == ["kind", "windows", "context", "rho"] and o["kind"] == "probe" and len(o["rho"]) == 2, o
head = re.search(r": (\d+) windows? of (\d+) tokens?$", open(sys.argv[2]).read().splitlines()[0])
assert head and o["windows"] == int(head.group(1)) == 4 and o["context"] == int(head.group(2)), (o, head)
rows = [float(m.group(1)) for m in re.finditer(r"^\s*\d+\s+\d+\s+(-?[0-9.]+)\s*$", open(sys.argv[2]).read(), re.M)]
assert [f"{r:.4f}" for r in o["rho"]] == [f"{r:.4f}" for r in rows], (o, rows)
print(o)
EOF
  ;;

tokenizer)
  # A checkpoint trained on shards scores text with its tokenizer: --tokenizer
  # is required and must be that tokenizer (the hash in the checkpoint).
  austen=$root/data/austen
  sed -e 's/^model small {/model bpe {/' -e 's/vocab   = 256;  .*/vocab   = 320;/' -e 's/width - 128/192 - 128/' \
    "$root/tests/run/models.tlm" | awk '/^model bpe/ {on=1} on {print} on && /^}/ {exit}' > bpe.tlm
  expect 0 "" "compile a model of 320 tokens" -- "$tlmc" bpe.tlm -o bpe.so
  head -c 200000 "$austen/emma.txt" > emma.txt
  expect 0 "" "train a 300-token tokenizer" -- "$run" tokenizer train --vocab 300 emma.txt -o tok.json
  expect 0 "" "train another (280 tokens)" -- "$run" tokenizer train --vocab 280 emma.txt -o other.json
  expect 0 "" "tokenize" -- "$run" tokenize --tokenizer tok.json emma.txt -o emma.bin
  expect 0 "done: 2 steps" "train 2 steps on the shard" -- \
    "$run" train bpe.so --threads 1 --context 64 --batch 4 --eval-batches 1 --steps 2 --data emma.bin --ckpt c
  head -n 5 "$sets/persuasion_next.jsonl" > next.jsonl
  head -n 5 "$sets/persuasion_cloze.jsonl" > cloze.jsonl
  expect 1 "needs --tokenizer" "no --tokenizer: refused, one line" -- \
    "$run" eval bpe.so --ckpt c --threads 1 --choices next.jsonl
  expect 1 "other.json is tokenizer .*, but the checkpoint .* was trained with tokenizer" "another tokenizer: refused" -- \
    "$run" eval bpe.so --ckpt c --threads 1 --cloze cloze.jsonl --tokenizer other.json
  expect 1 "tok_missing.json" "a missing tokenizer file" -- \
    "$run" eval bpe.so --ckpt c --threads 1 --cloze cloze.jsonl --tokenizer tok_missing.json
  expect 0 '"kind":"cloze"' "the checkpoint's tokenizer: scored" -- \
    "$run" eval bpe.so --ckpt c --threads 1 --choices next.jsonl --cloze cloze.jsonl --tokenizer tok.json --json --items
  cp "$tmp/out" items
  check "with subword tokens: each log-likelihood equals eval's losses on a shard of the context's and the continuation's ids" -- \
    "$py" - items "$run" "$T" <<'EOF'
import json, struct, subprocess, sys
run, T = sys.argv[2], int(sys.argv[3])
lines = [json.loads(l) for l in open(sys.argv[1])]
assert [l for l in lines if l["kind"] == "choices"][0]["items"] == 5
assert [l for l in lines if l["kind"] == "cloze"][0]["items"] == 5
def ids_of(text):
    """tlm-run tokenize's ids of text, and the shard's header"""
    open("t.txt", "wb").write(text)
    subprocess.run([run, "tokenize", "--tokenizer", "tok.json", "--no-eot", "t.txt", "-o", "t.bin"], check=True,
                   capture_output=True)
    raw = open("t.bin", "rb").read()
    width, count = struct.unpack_from("<IQ", raw, 12)
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return list(struct.unpack_from(fmt, raw, 72)), raw[:72]
def total_loss(ids, header):
    if len(ids) < 2:
        return 0.0
    h = bytearray(header)
    struct.pack_into("<Q", h, 16, len(ids))
    width = struct.unpack_from("<I", h, 12)[0]
    open("w.bin", "wb").write(bytes(h) + struct.pack("<%d%s" % (len(ids), "H" if width == 2 else "I"), *ids))
    out = subprocess.run([run, "eval", "bpe.so", "--ckpt", "c", "--threads", "1", "--data", "w.bin", "--context",
                          str(len(ids) - 1), "--json"], capture_output=True, check=True, text=True).stdout
    j = json.loads(out)
    assert j["tokens"] == len(ids) - 1, j
    return j["loss"] * (len(ids) - 1)
def want(context, cont):
    c, header = ids_of(context)
    k, _ = ids_of(cont)
    full = (c + k)[-(T + 1):]
    return -(total_loss(full, header) - total_loss(full[:max(1, len(full) - len(k))], header))
items = [json.loads(l) for l in open("next.jsonl")][:2]
got = [l for l in lines if l["kind"] == "choices_item"][:2]
n = 0
for item, g in zip(items, got):
    for c, ll in zip(item["choices"], g["loglik"]):
        w = want(item["context"].encode(), c.encode())
        assert abs(ll - w) <= 1e-5 * abs(w), (c, ll, w)
        n += 1
for item, g in zip([json.loads(l) for l in open("cloze.jsonl")][:2], [l for l in lines if l["kind"] == "cloze_item"]):
    t = item["text"].encode()
    cut = t.rfind(b" ")
    w = want(t[:cut], t[cut:])
    assert abs(g["loglik"] - w) <= 1e-5 * abs(w), (g, w)
    n += 1
print(n, "log-likelihoods checked")
EOF
  ;;

*) echo "unknown case $case_"; exit 2 ;;
esac
exit $fail
