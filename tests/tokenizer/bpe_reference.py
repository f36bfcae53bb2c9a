#!/usr/bin/python3
"""A slow reference for tlm's byte-level BPE, written from the algorithm.

Pre-tokenization: GPT-2's pattern with Python's re, the classes spelled out
from unicodedata (\\p{L}, \\p{N}) and Unicode's White_Space list (\\s); bytes
that are not valid UTF-8 become lone surrogates (surrogateescape), which are
in none of the classes, as tlm treats them.

Training: count the pre-tokens; repeatedly count every adjacent pair over
all pre-tokens from scratch, take the highest count, ties to the smallest
(left id, right id), merge it everywhere left to right; the merged bytes
get the next id unless they already are a token. Stops at vocab - 1 tokens
or when no pair is left; <|endoftext|> is the last id.

Encoding: apply, inside each pre-token, the lowest-ranked merge present
(leftmost among equals) until none applies.

    bpe_reference.py TLM_RUN WORKDIR DATA_DIR [GPT2_DIR]

trains tlm and the reference on small corpora and compares the vocabularies
and merges exactly, then compares encodings (invalid UTF-8 included) with
the trained tokenizers and, given GPT2_DIR (encoder.json + vocab.bpe), with
GPT-2's vocabulary.
"""
import json
import os
import random
import re
import subprocess
import sys
import unicodedata

WHITE_SPACE = ("\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
               "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def char_class(major):
    parts, start, prev = [], None, None
    for cp in range(0x110000):
        hit = unicodedata.category(chr(cp))[0] == major
        if hit and start is None:
            start = cp
        if not hit and start is not None:
            parts.append(f"{re.escape(chr(start))}-{re.escape(chr(cp - 1))}")
            start = None
    return "".join(parts)


L, N, S = char_class("L"), char_class("N"), re.escape(WHITE_SPACE)
GPT2 = re.compile(rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")


def pretokens(data: bytes):
    text = data.decode("utf-8", "surrogateescape")
    return [m.group(0).encode("utf-8", "surrogateescape") for m in GPT2.finditer(text)]


def train(datas, vocab):
    counts = {}
    for d in datas:
        for p in pretokens(d):
            counts[p] = counts.get(p, 0) + 1
    words = [[list(p), c] for p, c in counts.items()]
    tokens = [bytes([b]) for b in range(256)]
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    while len(tokens) < vocab - 1:
        pairs = {}
        for syms, c in words:
            for a, b in zip(syms, syms[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        (a, b), _ = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        merged = tokens[a] + tokens[b]
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        c = ids[merged]
        merges.append((a, b))
        for w in words:
            s, out, i = w[0], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(c)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            w[0] = out
    return tokens, merges


def encode(tokens, merges, data):
    ids = {t: i for i, t in enumerate(tokens)}
    rank = {m: r for r, m in enumerate(merges)}
    out = []
    for p in pretokens(data):
        syms = [ids[bytes([b])] for b in p]
        while True:
            best = None
            for i in range(len(syms) - 1):
                r = rank.get((syms[i], syms[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            syms[i:i + 2] = [ids[tokens[syms[i]] + tokens[syms[i + 1]]]]
        out.extend(syms)
    return out


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


BYTE_OF = bytes_to_unicode()


def from_bytelevel(s):
    return bytes(BYTE_OF[ch] for ch in s)


def read_hf(path):
    with open(path, encoding="utf-8") as f:
        j = json.load(f)
    vocab = j["model"]["vocab"]
    tokens = [None] * len(vocab)
    for s, i in vocab.items():
        tokens[i] = from_bytelevel(s)
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    for m in j["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        merges.append((ids[from_bytelevel(a)], ids[from_bytelevel(b)]))
    specials = [(t["id"], t["content"]) for t in j.get("added_tokens", [])]
    return tokens, merges, specials


def read_gpt2(d):
    with open(os.path.join(d, "encoder.json"), encoding="utf-8") as f:
        enc = json.load(f)
    tokens = [None] * len(enc)
    for s, i in enc.items():
        tokens[i] = s.encode() if s == "<|endoftext|>" else from_bytelevel(s)
    ids = {t: i for i, t in enumerate(tokens)}
    merges = []
    with open(os.path.join(d, "vocab.bpe"), encoding="utf-8") as f:
        for line in f.read().split("\n")[1:]:
            if line:
                a, b = line.split(" ")
                merges.append((ids[from_bytelevel(a)], ids[from_bytelevel(b)]))
    return tokens, merges


def tlm_encode(tlm, tok, path):
    r = subprocess.run([tlm, "tokenizer", "encode", "--tokenizer", tok, path], capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"FAIL tlm-run tokenizer encode: {r.stderr.decode(errors='replace')}")
    return [int(x) for x in r.stdout.split()]


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    tlm, work, data = sys.argv[1:4]
    gpt2 = sys.argv[4] if len(sys.argv) == 5 else None
    os.makedirs(work, exist_ok=True)
    rng = random.Random(13)
    with open(os.path.join(data, "austen", "persuasion.txt"), "rb") as f:
        austen = f.read()
    with open(os.path.join(data, "kjv", "kjv.txt"), "rb") as f:
        kjv = f.read()
    hostile = ("naïve café 日本語 Ελληνικά 123 4567 I'm don't 👍🏽👍🏽 🙂🙂 \t\t x  y\n\n\r\n <|endoftext|> "
               "aaaaaaaa abababab").encode()
    invalid = bytes(rng.randrange(256) for _ in range(3000)) + b"\xff\xfe \xc3( \xe2\x82 \xf0\x9f\x99 \xed\xa0\x80"
    ties = b"ab ba ab ba cd dc cd dc xy yx " * 40
    # words over two letters: later merges spell bytes that are already tokens
    twoletter = " ".join("".join(rng.choice("ab") for _ in range(rng.randrange(1, 14))) for _ in range(3000)).encode()
    cases = [
        ("austen", [austen[:40000], austen[100000:120000]], 700),
        ("kjv", [kjv[:30000]], 500),
        ("hostile", [hostile * 20, invalid], 600),
        ("ties", [ties], 300),
        ("two letters", [twoletter], 420),
    ]
    failures = 0
    for name, datas, vocab in cases:
        paths = []
        for k, d in enumerate(datas):
            p = os.path.join(work, f"{name}-{k}.txt")
            with open(p, "wb") as f:
                f.write(d)
            paths.append(p)
        out = os.path.join(work, f"{name}.json")
        r = subprocess.run([tlm, "tokenizer", "train", "--vocab", str(vocab), *paths, "-o", out], capture_output=True)
        if r.returncode != 0:
            print(f"FAIL {name}: tlm-run tokenizer train: {r.stderr.decode(errors='replace')}")
            failures += 1
            continue
        tokens, merges = train(datas, vocab)
        got_tokens, got_merges, specials = read_hf(out)
        want_specials = [(len(tokens), "<|endoftext|>")]
        if got_tokens != tokens or got_merges != merges or specials != want_specials:
            d = next((i for i, (x, y) in enumerate(zip(got_merges, merges)) if x != y), min(len(got_merges), len(merges)))
            print(f"FAIL {name}: tlm {len(got_tokens)} tokens {len(got_merges)} merges, reference {len(tokens)} "
                  f"tokens {len(merges)} merges; first different merge {d}: tlm {got_merges[d:d + 3]} "
                  f"reference {merges[d:d + 3]}")
            failures += 1
            continue
        for k, (d, p) in enumerate(zip(datas, paths)):
            want, got = encode(tokens, merges, d), tlm_encode(tlm, out, p)
            if want != got:
                print(f"FAIL {name}: encoding of data {k} differs from the reference")
                failures += 1
        print(f"{name}: {len(merges)} merges, vocabulary {len(tokens) + 1}: same as the reference"
              + (f" ({len(merges) - (len(tokens) - 256)} merges made an existing token)" if len(merges) > len(tokens) - 256 else ""))
    if gpt2:
        tokens, merges = read_gpt2(gpt2)
        for k, d in enumerate([invalid, hostile + invalid[:500], b"\x80\x80 abc\xff\xffdef \xc0\xaf"]):
            p = os.path.join(work, f"gpt2-invalid-{k}.txt")
            with open(p, "wb") as f:
                f.write(d)
            want, got = encode(tokens, merges, d), tlm_encode(tlm, gpt2, p)
            if want != got:
                print(f"FAIL GPT-2 invalid UTF-8 case {k}: tlm and the reference differ")
                failures += 1
        print("GPT-2 on invalid UTF-8: compared with the reference")
    if failures:
        raise SystemExit(f"bpe reference: {failures} failure(s)")
    print("bpe reference: all merges and encodings match")


if __name__ == "__main__":
    main()
