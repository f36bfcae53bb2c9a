"""Comparisons for the crash tests, with the standard library only (it runs
after every trial, so it must start fast):

  same.py ckpt A B    the two checkpoints hold the same tensors (names,
                      dtypes, shapes) with bit-identical bytes; the metadata
                      (elapsed seconds, ...) is not compared
  same.py log A B     the two JSON-lines logs hold the same records but for
                      the timings (elapsed, tokens_per_s), every line whole
  same.py step FILE   the checkpoint's train step (from its metadata)
Exit 0 when they agree, 1 with a one-line reason."""
import json
import struct
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    return header, meta, raw[8 + n:]


def ckpt(a, b):
    ha, _, da = load(a)
    hb, _, db = load(b)
    if ha != hb:
        names = sorted(k for k in set(ha) | set(hb) if ha.get(k) != hb.get(k))
        fail(f"different tensor tables: {names[:3]}")
    diff = [k for k, t in ha.items() if da[slice(*t["data_offsets"])] != db[slice(*t["data_offsets"])]]
    if diff or da != db:
        fail(f"{len(diff)} of {len(ha)} tensors differ, e.g. {sorted(diff)[:3]}")
    print(f"ok: {len(ha)} tensors bit-identical")


def records(path):
    with open(path) as f:
        text = f.read()
    if text and not text.endswith("\n"):
        fail(f"{path}: a torn last line")
    timing = {"elapsed", "tokens_per_s"}
    return [{k: v for k, v in json.loads(line).items() if k not in timing} for line in text.splitlines()]


def log(a, b):
    ra, rb = records(a), records(b)
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x != y:
            fail(f"record {i} differs: {x} vs {y}")
    if len(ra) != len(rb):
        fail(f"{len(ra)} vs {len(rb)} records")
    print(f"ok: {len(ra)} log records equal")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "ckpt":
        ckpt(*args)
    elif cmd == "log":
        log(*args)
    elif cmd == "step":
        print(load(args[0])[1]["step"])
    else:
        fail(f"unknown command {cmd}")
