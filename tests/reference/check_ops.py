#!/usr/bin/env python3
"""Checks the tlm_rt ops against PyTorch.

Runs the C dumper (tests/runtime/dump_ops.c), which evaluates every op on
random float32 inputs and writes inputs, outputs and gradients to a
safetensors file; then recomputes each op here with PyTorch autograd in
float64 from the same float32 inputs and compares:
    forward outputs   max|c - torch| / max|torch| <= 1e-5
    gradients         max|c - torch| / max|torch| <= 1e-4
Gradients are those of sum(out * R) for the dumped R (of the mean loss for
cross-entropy and the tiny model).

usage: check_ops.py DUMP_OPS_EXE OUT_DIR
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Report, run_dumper, torch  # noqa: E402
import st  # noqa: E402

F = torch.nn.functional
FWD, GRAD = 1e-5, 1e-4


def leaf(d, name):
    return torch.tensor(d[name], dtype=torch.float64, requires_grad=True)


def const(d, name):
    return torch.tensor(d[name], dtype=torch.float64)


def rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(T, D, base):
    # Hugging Face Llama: inv_freq over even indices, emb = cat(freqs, freqs)
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):
    """x: [B, T, H, D]; cos, sin: [T, D]"""
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return x * c + rotate_half(x) * s


def attention(q, k, v):
    """q, k, v: [B, T, H, D] -> y [B, T, H*D], log-sum-exp of the scaled
    scores [B, T, H] (F.scaled_dot_product_attention is not in torch 1.13:
    written out)."""
    B, T, H, D = q.shape
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    s = qh @ kh.transpose(-1, -2) / math.sqrt(D)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    y = (p @ vh).transpose(1, 2).reshape(B, T, H * D)
    return y, torch.logsumexp(s, dim=-1).transpose(1, 2)


def main():
    exe, outdir = sys.argv[1], sys.argv[2]
    path = os.path.join(outdir, "ops.safetensors")
    run_dumper(exe, path)
    d, meta = st.load(path)
    eps = float(meta["rmsnorm_eps"])
    rep = Report("check_ops")

    def fwd(what, got, ref):
        rep.compare(what, got, ref, FWD, "forward")

    def grad(what, got, ref):
        rep.compare(what, got, ref, GRAD, "gradient")

    print("embedding")
    table = leaf(d, "embedding.table")
    out = table[torch.tensor(d["embedding.ids"]).long()]
    (out * const(d, "embedding.R")).sum().backward()
    fwd("embedding out", d["embedding.out"], out)
    grad("embedding dtable", d["embedding.dtable"], table.grad)

    for op in ("rmsnorm", "rmsnorm_heads"):
        print(op)
        x, w = leaf(d, f"{op}.x"), leaf(d, f"{op}.w")
        N, W = x.shape
        if op == "rmsnorm":
            out = rms(x, w, eps)
            rstd = torch.rsqrt(x.pow(2).mean(-1) + eps)
        else:
            H = d[f"{op}.rstd"].size // N
            xh = x.view(N, H, W // H)
            out = rms(xh, w.view(H, W // H), eps).reshape(N, W)
            rstd = torch.rsqrt(xh.pow(2).mean(-1) + eps).reshape(-1)
        (out * const(d, f"{op}.R")).sum().backward()
        fwd(f"{op} out", d[f"{op}.out"], out)
        fwd(f"{op} rstd", d[f"{op}.rstd"], rstd)
        grad(f"{op} dx", d[f"{op}.dx"], x.grad)
        grad(f"{op} dw", d[f"{op}.dw"], w.grad)

    print("l2norm")
    x = leaf(d, "l2norm.x")
    out = x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + float(meta["l2norm_eps"]))
    (out * const(d, "l2norm.R")).sum().backward()
    fwd("l2norm out", d["l2norm.out"], out)
    grad("l2norm dx", d["l2norm.dx"], x.grad)

    print("linear")
    x, w = leaf(d, "linear.x"), leaf(d, "linear.w")
    y = F.linear(x, w)
    (y * const(d, "linear.R")).sum().backward()
    fwd("linear y", d["linear.y"], y)
    grad("linear dx", d["linear.dx"], x.grad)
    grad("linear dw", d["linear.dw"], w.grad)

    print("rope (rotate_half)")
    x = leaf(d, "rope.x")
    B, T, H, D = x.shape
    cos, sin = rope_tables(T, D, float(meta["rope_base"]))
    out = apply_rope(x, cos, sin)
    (out * const(d, "rope.R")).sum().backward()
    fwd("rope out", d["rope.out"], out)
    grad("rope dx", d["rope.dx"], x.grad)

    print("attention")
    q, k, v = (leaf(d, f"attention.{n}") for n in "qkv")
    y, lse = attention(q, k, v)
    (y * const(d, "attention.R")).sum().backward()
    fwd("attention y", d["attention.y"], y)
    fwd("attention lse", d["attention.lse"], lse)
    for n, t in zip("qkv", (q, k, v)):
        grad(f"attention d{n}", d[f"attention.d{n}"], t.grad)

    print("elementwise")
    acts = {
        "silu": F.silu,
        "sigmoid": torch.sigmoid,
        "gelu": lambda t: F.gelu(t, approximate="tanh"),
    }
    for op, f in acts.items():
        x = leaf(d, f"{op}.x")
        out = f(x)
        (out * const(d, f"{op}.R")).sum().backward()
        fwd(f"{op} out", d[f"{op}.out"], out)
        grad(f"{op} dx", d[f"{op}.dx"], x.grad)
    g, u = leaf(d, "swiglu.g"), leaf(d, "swiglu.u")
    h = F.silu(g) * u
    (h * const(d, "swiglu.R")).sum().backward()
    fwd("swiglu h", d["swiglu.h"], h)
    grad("swiglu dg", d["swiglu.dg"], g.grad)
    grad("swiglu du", d["swiglu.du"], u.grad)
    y, g = leaf(d, "sigmoid_gate.y"), leaf(d, "sigmoid_gate.g")
    out = y * torch.sigmoid(g)[:, None]
    (out * const(d, "sigmoid_gate.R")).sum().backward()
    fwd("sigmoid_gate out", d["sigmoid_gate.out"], out)
    grad("sigmoid_gate dy", d["sigmoid_gate.dy"], y.grad)
    grad("sigmoid_gate dg", d["sigmoid_gate.dg"], g.grad)

    for op in ("mlp_swiglu", "mlp_gelu"):
        print(op)
        x = leaf(d, f"{op}.x")
        wu, wd = leaf(d, f"{op}.w_up"), leaf(d, f"{op}.w_down")
        up = F.linear(x, wu)
        if op == "mlp_swiglu":
            wg = leaf(d, f"{op}.w_gate")
            gate = F.linear(x, wg)
            h = F.silu(gate) * up
        else:
            h = F.gelu(up, approximate="tanh")
        out = const(d, f"{op}.out0") + F.linear(h, wd)
        (out * const(d, f"{op}.R")).sum().backward()
        fwd(f"{op} out (+= residual)", d[f"{op}.out"], out)
        fwd(f"{op} pre_up", d[f"{op}.pre_up"], up)
        grad(f"{op} dx", d[f"{op}.dx"], x.grad)
        grad(f"{op} dw_up", d[f"{op}.dw_up"], wu.grad)
        grad(f"{op} dw_down", d[f"{op}.dw_down"], wd.grad)
        if op == "mlp_swiglu":
            fwd(f"{op} pre_gate", d[f"{op}.pre_gate"], gate)
            grad(f"{op} dw_gate", d[f"{op}.dw_gate"], wg.grad)

    print("crossentropy")
    z = leaf(d, "crossentropy.logits")
    tgt = torch.tensor(d["crossentropy.targets"]).long()
    loss = F.cross_entropy(z, tgt, ignore_index=-1)
    loss.backward()
    losses = F.cross_entropy(z.detach(), tgt, ignore_index=-1, reduction="none")
    fwd("crossentropy loss (mean)", d["crossentropy.loss"], loss)
    fwd("crossentropy per-row losses", d["crossentropy.losses"], losses)
    fwd("crossentropy lse", d["crossentropy.lse"], torch.logsumexp(z.detach(), -1))
    grad("crossentropy dlogits", d["crossentropy.dlogits"], z.grad)

    print("tiny model (2 layers, tapered MLP, tied head)")
    P = {k[len("tiny."):]: leaf(d, k) for k in d
         if k.startswith("tiny.model.")}
    ids = torch.tensor(d["tiny.ids"]).long()
    tgt = torch.tensor(d["tiny.targets"]).long()
    E = P["model.embed_tokens.weight"]
    V, C = E.shape
    B, T = ids.shape
    nl = 1 + max(int(k.split(".")[2]) for k in P if k.startswith("model.layers."))
    D = 8
    H = C // D
    cos, sin = rope_tables(T, D, float(meta["rope_base"]))
    h = E[ids]
    for li in range(nl):
        pre = f"model.layers.{li}."
        xn = rms(h, P[pre + "input_layernorm.weight"], eps)
        if pre + "self_attn.qkv_proj.weight" in P:
            q, k, v = F.linear(xn, P[pre + "self_attn.qkv_proj.weight"]).split(C, -1)
        else:
            q, k, v = (F.linear(xn, P[pre + f"self_attn.{n}_proj.weight"]) for n in "qkv")
        q, k, v = (t.reshape(B, T, H, D) for t in (q, k, v))
        y, _ = attention(apply_rope(q, cos, sin), apply_rope(k, cos, sin), v)
        if pre + "self_attn.g_proj.weight" in P:
            y = y * torch.sigmoid(F.linear(xn, P[pre + "self_attn.g_proj.weight"]))
        z = h + F.linear(y, P[pre + "self_attn.o_proj.weight"])
        zn = rms(z, P[pre + "post_attention_layernorm.weight"], eps)
        up = F.linear(zn, P[pre + "mlp.up_proj.weight"])
        if pre + "mlp.gate_proj.weight" in P:
            act = F.silu(F.linear(zn, P[pre + "mlp.gate_proj.weight"])) * up
        else:
            act = F.gelu(up, approximate="tanh")
        h = z + F.linear(act, P[pre + "mlp.down_proj.weight"])
    logits = F.linear(rms(h, P["model.norm.weight"], eps), E)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
    loss.backward()
    fwd("tiny logits", d["tiny.logits"], logits)
    fwd("tiny loss", d["tiny.loss"], loss)
    for name, p in P.items():
        grad(f"tiny grad {name[len('model.'):]}", d[f"tiny.grad.{name}"], p.grad)

    print("safetensors written by Python, read by C (dump_ops --read)")
    check_interop(exe, outdir, rep)
    rep.finish()


def check_interop(exe, outdir, rep):
    """A file from the Python writer (another implementation of the spec:
    other dtypes, a scalar, an empty tensor, keys in another order, no
    header padding) must be read by the C reader with the same contents."""
    import json
    import struct
    import subprocess
    import numpy as np
    rng = np.random.default_rng(0)
    tensors = {
        "z.last": rng.standard_normal((3, 5)).astype(np.float32),
        "a.f64": rng.standard_normal(7),
        "m.i64": np.array([-(2 ** 62), 3, 2 ** 40], dtype=np.int64),
        "m.i32": np.array([[1, -2], [3, 4]], dtype=np.int32),
        "b.bytes": np.frombuffer(b"hello\x00\xff", dtype=np.uint8),
        "scalar": np.array(2.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    path = os.path.join(outdir, "from_python.safetensors")
    st.save(path, tensors, {"format": "pt", "note": "caf\u00e9"})
    # strip the padding: the header length need not be a multiple of 8
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = raw[8:8 + n].rstrip(b" ")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + raw[8 + n:])
    out = subprocess.run([exe, "--read", path], capture_output=True, text=True).stdout
    got = {}
    meta = {}
    for line in out.splitlines():
        if line.startswith("meta "):
            k, v = line[5:].split("=", 1)
            meta[k] = v
        elif line.startswith("tensor "):
            _, name, dtype, shape, total = line.split(" ")
            got[name] = (dtype, json.loads(shape), float(total))
    rep.check(f"C reader lists all {len(tensors)} tensors", sorted(got) == sorted(tensors))
    rep.check("metadata read back", meta == {"format": "pt", "note": "caf\u00e9"})
    for name, arr in tensors.items():
        if name not in got:
            continue
        dtype, shape, total = got[name]
        want = float(arr.astype(np.float64).sum())
        rep.check(f"{name}: {dtype} {shape}, sum {total:.6g}",
                  shape == list(arr.shape) and abs(total - want) <= 1e-6 * max(1.0, abs(want)))


if __name__ == "__main__":
    main()
