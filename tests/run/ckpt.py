"""Checks of tlm-run's checkpoints and JSON-lines logs for tests/run/run.sh,
with the plain safetensors reader of tests/reference/st.py (numpy only):

  ckpt.py same A B              every tensor of two checkpoints bit-identical
  ckpt.py logs A B              two logs equal but for timings
  ckpt.py differ A B            two logs' training losses not all equal
  ckpt.py profile LOG STEPS OP... the --profile record: STEPS steps, each OP timed
  ckpt.py meta FILE KEY         print a __metadata__ value
  ckpt.py layout FILE OPT       Llama names, optimizer state (adamw|sgd), run state
  ckpt.py learned LOG RATIO     the last val_loss < RATIO x the first
  ckpt.py count FILE PREFIX     how many tensors' names start with PREFIX
  ckpt.py log_steps LOG         the steps of the training records, then of the validations
  ckpt.py corrupt FILE OUTDIR   damaged copies: truncations, byte flips, garbage
  ckpt.py checksum FILE         the checksum as docs/runtime.md defines it
  ckpt.py legacy FILE OUT       a copy with the checksum of checkpoints before
                                2026-12-06 (FNV-1a over every byte)
  ckpt.py retag FILE OUT KEY V  a copy with __metadata__ KEY set to V and
                                the checksum made again: an edited file
  ckpt.py rewrite FILE OUT K V...  the same for several KEY VALUE pairs, a
                                tensor's name (train.step) setting its
                                first element to the integer V
  ckpt.py drop FILE OUT KEY...     FILE without those metadata keys, the
                                checksum made again (a checkpoint from
                                before they were written)
"""
import json
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import st  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def same(a, b):
    ta, _ = st.load(a)
    tb, _ = st.load(b)
    if sorted(ta) != sorted(tb):
        fail(f"different tensors: {sorted(set(ta) ^ set(tb))[:5]}")
    diff = [k for k in ta if ta[k].dtype != tb[k].dtype or ta[k].tobytes() != tb[k].tobytes()]
    if diff:
        fail(f"{len(diff)} of {len(ta)} tensors differ, e.g. {diff[:3]}")
    print(f"ok: {len(ta)} tensors bit-identical")


def logs(a, b):
    timing = {"elapsed", "tokens_per_s"}
    ra = [{k: v for k, v in r.items() if k not in timing} for r in records(a)]
    rb = [{k: v for k, v in r.items() if k not in timing} for r in records(b)]
    if ra != rb:
        for i, (x, y) in enumerate(zip(ra, rb)):
            if x != y:
                fail(f"record {i} differs: {x} vs {y}")
        fail(f"{len(ra)} vs {len(rb)} records")
    print(f"ok: {len(ra)} log records equal")


def close(a, b, tol):
    """The training losses of two logs agree to a relative tol, step by step
    (runs that crossed devices: the same math in another order)."""
    la = {r["step"]: r["loss"] for r in records(a) if "loss" in r}
    lb = {r["step"]: r["loss"] for r in records(b) if "loss" in r}
    if sorted(la) != sorted(lb):
        fail(f"steps differ: {sorted(la)} vs {sorted(lb)}")
    worst = max(abs(la[s] - lb[s]) / abs(la[s]) for s in la)
    if worst > float(tol):
        fail(f"losses differ by {worst:.3g} relative, more than {tol}")
    print(f"ok: {len(la)} losses within {worst:.2g} relative")


def differ(a, b):
    """Two runs whose math should differ (bf16 against fp32) did: some
    training loss is not equal, so the comparison above it is not vacuous."""
    la = {r["step"]: r["loss"] for r in records(a) if "loss" in r}
    lb = {r["step"]: r["loss"] for r in records(b) if "loss" in r}
    if not la or la == lb:
        fail("the two logs have the same losses")
    print(f"ok: {sum(la[s] != lb.get(s) for s in la)} of {len(la)} losses differ")


def profile(path, steps, *ops):
    """The log's last record is train --profile's: the steps profiled, each
    named op kind with calls and time, the GEMM-shaped ones with GFLOP/s,
    shares that add up to the steps' time with what ran outside the ops."""
    rec = records(path)[-1].get("profile")
    if rec is None:
        fail("the log's last record is not a profile")
    if rec["steps"] != int(steps):
        fail(f"{rec['steps']} steps profiled, wanted {steps}")
    by_op = {o["op"]: o for o in rec["ops"]}
    for op in ops:
        o = by_op.get(op)
        if not o or o["calls"] < 1 or not o["seconds"] > 0:
            fail(f"op {op} not timed: {o}")
    for op in ("mlp", "mlp_backward", "qkv", "head_backward"):
        if op in by_op and not (by_op[op]["gflops"] or 0) > 0:
            fail(f"{op} has no GFLOP/s")
    total = sum(o["share"] for o in rec["ops"])
    ops_s = sum(o["seconds"] for o in rec["ops"])
    if not (0 < total <= 1 + 1e-6) or abs(ops_s + rec["outside_ops_seconds"] - rec["step_seconds"]) > 1e-6 * rec["step_seconds"] + 1e-9:
        fail(f"shares add up to {total}, ops {ops_s} s + outside {rec['outside_ops_seconds']} s vs {rec['step_seconds']} s")
    threads = rec.get("threads")
    if threads is not None:  # a CPU run's busy shares (model/profile.h)
        if not (threads >= 1 and 0 <= rec["busy"] <= 1 and rec["cpu_seconds"] >= 0 and rec["waits_spin"] in (True, False)):
            fail(f"the run's busy share: {threads} threads, busy {rec['busy']}, {rec['cpu_seconds']} s of CPU time")
        for o in rec["ops"]:
            if not (0 <= o["busy"] <= 1 and o["cpu_seconds"] >= 0):
                fail(f"op {o['op']}: busy {o['busy']}, {o['cpu_seconds']} s of CPU time")
    elif any("busy" in o for o in rec["ops"]):
        fail("busy shares per op without the run's threads")
    where = f", {threads} thread(s) busy {100 * rec['busy']:.1f}%" if threads is not None else ""
    print(f"ok: {len(rec['ops'])} op kinds timed over {rec['steps']} steps, {100 * total:.1f}% of the step in ops{where}")


def layout(path, opt):
    t, meta = st.load(path)
    params = [k for k in t if not k.startswith(("optimizer.", "train."))]
    want = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
            "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
            "model.layers.0.self_attn.v_proj.weight", "model.layers.0.self_attn.o_proj.weight",
            "model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
            "model.layers.1.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight",
            "model.layers.1.mlp.down_proj.weight"}
    if not want <= set(params):
        fail(f"missing Llama names: {sorted(want - set(params))}")
    if t["model.layers.0.mlp.up_proj.weight"].shape != (192, 64) or t["model.layers.1.mlp.up_proj.weight"].shape != (64, 64):
        fail("the tapered widths are not 192, 64")
    kinds = ["exp_avg", "exp_avg_sq"] if opt == "adamw" else ["momentum_buffer"]
    for p in params:
        if t[p].dtype.str != "<f4":
            fail(f"{p} is {t[p].dtype}")
        for k in kinds:
            s = t.get(f"optimizer.{k}.{p}")
            if s is None or s.shape != t[p].shape:
                fail(f"no optimizer.{k}.{p} of its shape")
    others = {"exp_avg", "exp_avg_sq", "momentum_buffer"} - set(kinds)
    if any(k.split(".")[1] in others for k in t if k.startswith("optimizer.")):
        fail("state of another optimizer")
    for name, shape in (("train.step", (1,)), ("train.tokens_seen", (1,)), ("train.data_rng", (4,))):
        if name not in t or t[name].dtype.str != "<i8" or t[name].shape != shape:
            fail(f"{name} is not I64 {shape}")
    for key in ("format", "model", "abi_version", "param_fingerprint", "step", "tokens_seen", "settings", "checksum"):
        if key not in meta:
            fail(f"no {key} in the metadata")
    if int(meta["step"]) != int(t["train.step"][0]):
        fail("the metadata's step is not train.step")
    settings = json.loads(meta["settings"])
    if int(meta["tokens_seen"]) != int(meta["step"]) * settings["batch"] * settings["context"]:
        fail("tokens_seen is not step x batch x context")
    print(f"ok: {len(params)} parameters with Llama names, {opt} state, run state; model {meta['model']} step {meta['step']}")


def learned(path, ratio):
    val = [r for r in records(path) if "val_loss" in r]
    if len(val) < 2:
        fail("fewer than two validations")
    first, last = val[0]["val_loss"], val[-1]["val_loss"]
    for r in val:
        if abs(r["val_ppl"] - 2.718281828459045 ** r["val_loss"]) > 1e-6 * r["val_ppl"] or \
           abs(r["val_bpb"] - r["val_loss"] / 0.6931471805599453) > 1e-6:
            fail(f"val_ppl / val_bpb disagree with val_loss: {r}")
    if not last < float(ratio) * first:
        fail(f"val loss {first:.4f} -> {last:.4f}: not below {ratio} x")
    for r in records(path):
        if "loss" in r and set(r) != {"step", "loss", "lr", "grad_norm", "tokens_per_s", "elapsed"}:
            fail(f"a step record's fields: {sorted(r)}")
        if "val_loss" in r and set(r) != {"step", "val_loss", "val_ppl", "val_bpb"}:
            fail(f"a validation record's fields: {sorted(r)}")
    print(f"ok: val loss {first:.4f} -> {last:.4f} ({last / first:.2f} x)")


def log_steps(path):
    rs = records(path)
    print(" ".join(str(r["step"]) for r in rs if "loss" in r))
    print(" ".join(str(r["step"]) for r in rs if "val_loss" in r))


def corrupt(path, outdir):
    """Writes damaged copies and prints their paths, one a line."""
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    end = 8 + hlen
    os.makedirs(outdir, exist_ok=True)
    cases = {}
    for n in (0, 4, 8, 9, end // 2, end - 1, end, end + 1, end + 1000, len(raw) // 2, len(raw) - 1):
        cases[f"trunc_{n}"] = raw[:n]
    rng = random.Random(1)
    # the length field, the header's JSON (structure, names, metadata) and the data
    spots = [0, 3, 7, 8, end - 1] + sorted(rng.sample(range(9, end - 1), 40))
    spots += [end, end + 1, len(raw) - 1] + sorted(rng.sample(range(end, len(raw)), 12))
    for p in spots:
        b = bytearray(raw)
        b[p] ^= 0xFF
        cases[f"flip_{p}"] = bytes(b)
    # the lowest bit: letters and digits stay letters and digits, so the JSON
    # often stays valid and the checksum (or a shape or offset check) must
    # catch the change
    for p in sorted(rng.sample(range(9, end - 1), 40)):
        b = bytearray(raw)
        b[p] ^= 0x01
        cases[f"bit_{p}"] = bytes(b)
    meta = raw[8:end].decode()
    for old, new in (('"step":"', '"step":"1'), ('model.norm.weight', 'model.norm.weighu'),
                     ('"lr":0.0030', '"lr":0.0040')):
        if old in meta:
            cases["edit_" + old.strip('":.').replace('"', "").replace(":", "_")] = \
                raw[:8] + meta.replace(old, new, 1).encode()[:hlen].ljust(hlen) + raw[end:]
    cases["garbage"] = bytes(rng.getrandbits(8) for _ in range(4096))
    cases["text"] = b"not a checkpoint\n"
    cases["bigheader"] = struct.pack("<Q", 1 << 40) + b"{}"
    # a well-formed safetensors file that is not a tlm checkpoint
    hdr = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    cases["foreign"] = struct.pack("<Q", len(hdr)) + hdr + b"\0\0\0\0"
    for name, data in cases.items():
        out = os.path.join(outdir, name + ".safetensors")
        with open(out, "wb") as f:
            f.write(data)
        print(out)


FNV_OFFSET, FNV_PRIME, MASK = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a(h, data):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def fnv_str(h, s):
    return fnv1a(h, s.encode() + b"\0")


def sum64(data):
    """The sum of mix(word + index x K) over the little-endian words (the
    last zero-padded), mod 2^64; mix is splitmix64's finaliser."""
    import numpy as np
    words = np.frombuffer(data + b"\0" * (-len(data) % 8), dtype="<u8").astype(np.uint64)
    x = words + np.arange(1, len(words) + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return int(x.sum(dtype=np.uint64))


def parts(path):
    """(tensors in the order of their data as (name, dtype, shape, bytes), metadata)"""
    items, meta = st.entries(path)
    items.sort(key=lambda item: item[1]["data_offsets"][0])
    return [(name, info["dtype"], info["shape"], data) for name, info, data in items], meta


def checksum(path, legacy=False):
    tensors, meta = parts(path)
    h = FNV_OFFSET
    for name, dtype, shape, data in tensors:
        for s in (name, dtype, "[" + ", ".join(str(d) for d in shape) + "]"):
            h = fnv_str(h, s)
        h = fnv1a(h, data) if legacy else fnv1a(h, struct.pack("<Q", sum64(data)))
    for key in sorted(k for k in meta if k != "checksum"):
        h = fnv_str(fnv_str(h, key), meta[key])
    return ("" if legacy else "sum64:") + f"{h:016x}"


def legacy(path, out):
    tensors, meta = st.load(path)
    meta["checksum"] = checksum(path, legacy=True)
    st.save(out, tensors, meta)


def retag(path, out, key, value):
    tensors, meta = st.load(path)
    meta[key] = value
    st.save(out, tensors, meta)
    meta["checksum"] = checksum(out)
    st.save(out, tensors, meta)


def drop(path, out, *keys):
    tensors, meta = st.load(path)
    for key in keys:
        meta.pop(key, None)
    st.save(out, tensors, meta)
    meta["checksum"] = checksum(out)
    st.save(out, tensors, meta)


def rewrite(path, out, *pairs):
    tensors, meta = st.load(path)
    for key, value in zip(pairs[::2], pairs[1::2]):
        if key in tensors:
            a = tensors[key].copy()
            a.flat[0] = int(value)
            tensors[key] = a
        else:
            meta[key] = value
    st.save(out, tensors, meta)
    meta["checksum"] = checksum(out)
    st.save(out, tensors, meta)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "same":
        same(*args)
    elif cmd == "logs":
        logs(*args)
    elif cmd == "close":
        close(*args)
    elif cmd == "profile":
        profile(*args)
    elif cmd == "differ":
        differ(*args)
    elif cmd == "meta":
        print(st.load(args[0])[1][args[1]])
    elif cmd == "layout":
        layout(*args)
    elif cmd == "learned":
        learned(*args)
    elif cmd == "count":
        print(sum(k.startswith(args[1]) for k in st.load(args[0])[0]))
    elif cmd == "log_steps":
        log_steps(*args)
    elif cmd == "corrupt":
        corrupt(*args)
    elif cmd == "checksum":
        print(checksum(args[0]))
    elif cmd == "legacy":
        legacy(*args)
    elif cmd == "retag":
        retag(*args)
    elif cmd == "rewrite":
        rewrite(*args)
    elif cmd == "drop":
        drop(*args)
    else:
        fail(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
