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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
from one_line_args import Parser  # noqa: E402  (bench/: a usage error in one line)


ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("out")
ap.add_argument("--tokens", type=int, required=True)
ap.add_argument("--vocab", type=int, default=256)
ap.add_argument("--eot", type=int, default=-1)
ap.add_argument("--doc", type=int, default=4096)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
# The header's ranges (runtime/tokenizer/shard.c checks them on reading):
# the vocabulary a uint32 of at most INT32_MAX, the end-of-text id an int32,
# -1 or below the vocabulary; the count and the byte count (4 a token) uint64.
MAX_VOCAB, MAX_TOKENS = (1 << 31) - 1, ((1 << 64) - 1) // 4
if not 1 <= a.vocab <= MAX_VOCAB:
    ap.error(f"argument --vocab: must be from 1 to {MAX_VOCAB}, not {a.vocab}")
if not -1 <= a.eot < a.vocab:
    ap.error(f"argument --eot: must be -1 (none) or an id below --vocab ({a.vocab}), not {a.eot}")
if not 0 <= a.tokens <= MAX_TOKENS:
    ap.error(f"argument --tokens: must be from 0 to {MAX_TOKENS}, not {a.tokens}")
if a.eot >= 0 and a.vocab < 2:
    ap.error(f"argument --eot: a --vocab of 1 leaves no id besides the end-of-text id {a.eot}")
if a.doc < 1:
    ap.error(f"argument --doc: must be at least 1, not {a.doc}")
folder = os.path.dirname(os.path.abspath(a.out))
if not os.path.isdir(folder):
    sys.exit(f"gen_shard.py: {a.out}: no folder {folder}")
if os.path.isdir(a.out):
    sys.exit(f"gen_shard.py: {a.out} is a folder")
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
try:
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
except OSError as e:  # an unwritable folder, a full disk: one line, no partial file left
    if os.path.exists(tmp):
        os.remove(tmp)
    sys.exit(f"gen_shard.py: cannot write {e.filename or a.out}: {e.strerror or e}")
