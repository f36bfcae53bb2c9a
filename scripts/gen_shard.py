#!/usr/bin/env python3
"""Writes a token shard (runtime/tokenizer/shard.h, version 2) of generated
ids, fast, without a tokenizer: for tests and benchmarks of training on
corpora larger than memory.

  gen_shard.py OUT --tokens N [--vocab V] [--eot ID] [--doc LEN] [--seed S]

The ids are a block of 2^20 pseudo-random ids below V (the end-of-text id
left out) repeated until N tokens are written, with ID after every LEN
tokens (a document). The tokenizer hash is SHA-256 of b"gen_shard V", the
byte count 4 bytes a token. Written atomically (temporary file, rename)."""
import argparse
import hashlib
import os
import random
import struct
import sys
from array import array

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--tokens", type=int, required=True)
ap.add_argument("--vocab", type=int, default=256)
ap.add_argument("--eot", type=int, default=-1)
ap.add_argument("--doc", type=int, default=4096)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
if not (1 <= a.vocab <= 1 << 31) or a.eot >= a.vocab or a.tokens < 0 or a.doc < 1:
    sys.exit("gen_shard.py: bad arguments")
width = 2 if a.vocab <= 65536 else 4
rng = random.Random(a.seed)
block_len = 1 << 20
hi = a.vocab - 1
ids = [rng.randint(0, hi) for _ in range(block_len)]
if a.eot >= 0:
    ids = [i if i != a.eot else (i + 1) % a.vocab for i in ids]
    for k in range(a.doc, block_len, a.doc + 1):
        ids[k] = a.eot
block = array("H" if width == 2 else "I", ids)
if sys.byteorder != "little":
    block.byteswap()
block = block.tobytes()
header = b"TLMSHARD" + struct.pack("<IIQ", 2, width, a.tokens) + hashlib.sha256(b"gen_shard %d" % a.vocab).digest()
header += struct.pack("<IiQ", a.vocab, a.eot, 4 * a.tokens)
tmp = a.out + ".tmp%d" % os.getpid()
with open(tmp, "wb") as f:
    f.write(header)
    left = a.tokens * width
    while left > 0:
        chunk = block[: min(left, len(block))]
        f.write(chunk)
        left -= len(chunk)
    f.flush()
    os.fsync(f.fileno())
os.rename(tmp, a.out)
