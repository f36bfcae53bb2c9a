#!/usr/bin/env python3
"""Derives the bundled downstream sets (data/downstream/*.jsonl) from the
held-out texts, deterministically: the same files, byte for byte, on every
run and every Python 3 (a generator of our own, not `random`, whose
algorithms have changed between versions).

  persuasion_cloze.jsonl    cloze passages from Persuasion
  kjv_cloze.jsonl           cloze passages from the King James Bible
  persuasion_next.jsonl     "which sentence comes next", from Persuasion
  kjv_next.jsonl            the same from the King James Bible

Cloze items ({"text": ...}, the LAMBADA layout): two to four consecutive
sentences (at most MAX_CLOZE_BYTES) (verses) of one paragraph (chapter), ending at the end of a
sentence with its final punctuation and closing quotes removed, so the text
ends on its target: the last word, of at least 3 letters.

Next-sentence items ({"context", "choices", "label"}): the two sentences
before the true one as the context (one when two are longer than
MAX_CONTEXT_BYTES); the choices are the true sentence and three distractors
drawn from the same book (at least 50 sentences away, of a length within
0.8 to 1.25 times the true one's, so that length gives little away), each
with a leading space, in an order shuffled with the fixed seed.

usage: make_downstream.py [--root ROOT] [--out DIR]
  ROOT: the repository (default: this script's folder's parent);
  DIR: where the sets go (default: ROOT/data/downstream)
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from one_line_args import Parser  # noqa: E402  (bench/: a usage error in one line)

SEED = 20261203
# Sizes: small enough that examples/tiny.tlm scores all four sets in well
# under a minute on one core (data/README.md has the time).
CLOZE_ITEMS = 200      # per book
NEXT_ITEMS = 150       # per book
MAX_CLOZE_BYTES = 200  # a passage of a few sentences
MAX_CONTEXT_BYTES = 120
# bytes of a true next sentence; a distractor has at most 1.25 times as many,
# so every choice (with its leading space) fits a byte-level window of 64
MIN_SENTENCE, MAX_SENTENCE = 16, 49


class SplitMix64:
    """A small, fully specified generator (splitmix64)."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        """Uniform in [0, n) (rejection sampling: no modulo bias)."""
        limit = (1 << 64) - (1 << 64) % n
        while True:
            r = self.next()
            if r < limit:
                return r % n

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


SENTENCE_END = re.compile(r'(?<=[.!?])["\']?(?=\s+["\']?[A-Z])')


def persuasion_paragraphs(text):
    """The novel's paragraphs, each one line with single spaces, without the
    title page and the chapter headings."""
    start = text.index("Chapter 1")
    paragraphs = []
    for block in re.split(r"\n\s*\n", text[start:]):
        p = " ".join(block.split())
        if p and not re.fullmatch(r"Chapter \d+", p):
            paragraphs.append(p)
    return paragraphs


def split_sentences(paragraph):
    """A paragraph's sentences: split after . ! ? (and a closing quote)
    before a capital letter. Crude, but the same on every run."""
    out, last = [], 0
    for m in SENTENCE_END.finditer(paragraph):
        out.append(paragraph[last:m.end()].strip())
        last = m.end()
    out.append(paragraph[last:].strip())
    return [s for s in out if s]


def persuasion_units(path):
    """Paragraphs as lists of sentences."""
    with open(path, encoding="ascii") as f:
        return [split_sentences(p) for p in persuasion_paragraphs(f.read())]


def kjv_units(path):
    """Chapters as lists of verses (a verse serves as a sentence)."""
    with open(path, encoding="ascii") as f:
        text = f.read()
    return [[v.strip() for v in ch.split("\n") if v.strip()] for ch in re.split(r"\n\s*\n", text)]


CLOZE_END = re.compile(r"^(.*\s)([A-Za-z]{3,})[.!?;:,'\"]*$", re.S)


def cloze_items(units, rng, count):
    """Passages of 2-4 sentences ending on a word of >= 3 letters, drawn at
    random start positions without overlap."""
    candidates = []
    for u, sentences in enumerate(units):
        for i in range(len(sentences)):
            for n in (4, 3, 2):
                if i + n > len(sentences):
                    continue
                text = " ".join(sentences[i:i + n])
                m = CLOZE_END.match(text)
                if m and len(text) <= MAX_CLOZE_BYTES:
                    candidates.append((u, i, n, m.group(1) + m.group(2)))
                    break
    rng.shuffle(candidates)
    used, out = set(), []
    for u, i, n, text in candidates:
        if any((u, k) in used for k in range(i, i + n)):
            continue
        used.update((u, k) for k in range(i, i + n))
        out.append((u, i, text))
        if len(out) == count:
            break
    out.sort()  # book order, so the file reads like the book
    return [{"text": text} for _, _, text in out]


def next_items(units, rng, count):
    """Context: the two sentences before the true one (one when two are too
    long); choices: the true one and three distractors from elsewhere in
    the book, of about its length."""
    flat = [s for sentences in units for s in sentences]
    index = {}
    for u, sentences in enumerate(units):
        for i in range(len(sentences)):
            index[(u, i)] = len(index)
    candidates = []
    for u, sentences in enumerate(units):
        for i in range(1, len(sentences)):
            true = sentences[i]
            if not MIN_SENTENCE <= len(true) <= MAX_SENTENCE:
                continue
            for k in (2, 1):
                context = " ".join(sentences[max(0, i - k):i])
                if len(context) <= MAX_CONTEXT_BYTES:
                    candidates.append((u, max(0, i - k), i, context, true))
                    break
    rng.shuffle(candidates)
    used, out = set(), []
    for u, first, i, context, true in candidates:
        if any((u, k) in used for k in range(first, i + 1)):
            continue
        where = index[(u, i)]
        distractors = []
        for _ in range(10000):
            j = rng.below(len(flat))
            s = flat[j]
            if (abs(j - where) >= 50 and 0.8 * len(true) <= len(s) <= 1.25 * len(true) and s != true
                    and s not in distractors):
                distractors.append(s)
                if len(distractors) == 3:
                    break
        if len(distractors) < 3:
            continue
        used.update((u, k) for k in range(first, i + 1))
        choices = [true] + distractors
        order = list(range(4))
        rng.shuffle(order)
        out.append((u, first, {"context": context, "choices": [" " + choices[o] for o in order],
                               "label": order.index(0)}))
        if len(out) == count:
            break
    out.sort(key=lambda t: (t[0], t[1]))
    return [item for _, _, item in out]


def write(path, items):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="ascii", newline="\n") as f:
            for item in items:
                f.write(json.dumps(item, ensure_ascii=True) + "\n")
        os.replace(tmp, path)
    except OSError:  # no partial file left behind
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def fail(message):
    sys.exit(f"make_downstream.py: {message}")


def main():
    ap = Parser(description="Derives data/downstream/*.jsonl from the held-out texts.")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--out")
    args = ap.parse_args()
    root = args.root
    out = args.out or os.path.join(root, "data", "downstream")
    # the inputs read (and checked) before anything is written: a wrong
    # --root leaves no empty DIR behind
    sources = {"persuasion": (persuasion_units, os.path.join(root, "data", "austen", "persuasion.txt")),
               "kjv": (kjv_units, os.path.join(root, "data", "kjv", "kjv.txt"))}
    books = {}
    for name, (units, path) in sources.items():
        try:
            books[name] = units(path)
        except OSError as e:
            fail(f"{path}: {e.strerror or e} (--root {root}: the repository, with data/austen and data/kjv)")
        except (UnicodeDecodeError, ValueError) as e:  # not ASCII, no "Chapter 1"
            fail(f"{path}: not the bundled held-out text ({e})")
    try:
        os.makedirs(out, exist_ok=True)
        for b, (name, units) in enumerate(sorted(books.items())):
            # one generator per book and kind, so that changing one set leaves the others
            write(os.path.join(out, f"{name}_cloze.jsonl"), cloze_items(units, SplitMix64(SEED + 2 * b), CLOZE_ITEMS))
            write(os.path.join(out, f"{name}_next.jsonl"), next_items(units, SplitMix64(SEED + 2 * b + 1), NEXT_ITEMS))
    except OSError as e:  # DIR a file, an unwritable folder, a full disk
        fail(f"cannot write {e.filename or out}: {e.strerror or e}")
    for f in sorted(os.listdir(out)):
        if f.endswith(".jsonl"):
            with open(os.path.join(out, f), "rb") as fh:
                print(f"{f}: {sum(1 for _ in fh)} items")


if __name__ == "__main__":
    main()
