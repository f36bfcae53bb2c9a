#!/usr/bin/env python3
"""The PyTorch peer of scripts/gpu_check.sh: the model of a settings line
(tests/model/dump_model MODEL.so --settings, as bench/train_bench.py builds
it: tests/reference/tapered_llama.py, same widths, heads, norms, RoPE, tie)
trained for STEPS steps on random tokens with AdamW, clipping and the
model's param groups, at PyTorch's best setting for the device: on a GPU
bf16 autocast (fp32 master weights) or fp32 with TF32 off, as the tlm run it
is compared with; on the CPU fp32 with every core. Softmax attention runs
through PyTorch's fused causal kernel (scaled_dot_product_attention:
FlashAttention in bf16 on a GPU, its memory-efficient kernel in fp32)
where the torch has it, else as plain products
that keep [B, H, T, T] scores (Debian's torch 1.13); the JSON line says
which. One warm-up step outside the clock; prints one JSON line:
tokens/s, seconds, peak memory, attention.

usage: gpu_peer.py SETTINGS.json [--device cuda|cpu] [--precision fp32|bf16]
                   [--steps N] [--batch B] [--seq T]
  N, B, T at least 1; T at most the model's context (the settings' model
  "context"); --device cuda:K picks a GPU.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from one_line_args import Parser, positive  # noqa: E402 (bench/, beside this script)


def device(text):
    """argparse type: cpu, cuda or cuda:N."""
    kind, _, index = text.partition(":")
    if text in ("cpu", "cuda") or kind == "cuda" and index.isascii() and index.isdigit():
        return text
    raise argparse.ArgumentTypeError(f"must be cuda, cuda:N or cpu, not {text!r}")


def read_settings(path, tl):
    """The settings line dump_model MODEL.so --settings wrote; one line and
    exit 1 when the file is missing, unreadable or not such a line."""
    what = "not the JSON line of dump_model MODEL.so --settings"
    try:
        with open(path) as f:
            settings = json.load(f)
    except OSError as e:
        sys.exit(f"gpu_peer: {path}: {e.strerror or e}")
    except (ValueError, UnicodeDecodeError) as e:
        sys.exit(f"gpu_peer: {path}: {what} ({e})")
    try:
        tl.Config(settings["model"])
        for k in ("weight_decay", "lr", "beta1", "beta2", "eps", "grad_clip"):
            float(settings["train"][k])
    except KeyError as e:
        sys.exit(f"gpu_peer: {path}: {what} (no {e})")
    except (TypeError, ValueError) as e:
        sys.exit(f"gpu_peer: {path}: {what} ({e})")
    return settings


def main():
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("settings")
    ap.add_argument("--device", default="cuda", type=device)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--steps", type=positive, default=20)
    ap.add_argument("--batch", type=positive, default=8)
    ap.add_argument("--seq", type=positive, default=2048)
    a = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        sys.exit(f"gpu_peer: PyTorch is missing for {sys.executable} ({e})")
    import tapered_llama as tl
    settings = read_settings(a.settings, tl)
    context = int(settings["model"].get("context", 0) or 0)
    if context > 0 and a.seq > context:
        ap.error(f"argument --seq: {a.seq} is longer than the model's context ({context}) in {a.settings}")
    dev = torch.device(a.device)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            why = "finds no GPU" if torch.backends.cuda.is_built() else "was built without CUDA"
            sys.exit(f"gpu_peer: --device {a.device}, but this torch ({torch.__version__}, {sys.executable}) {why}")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            sys.exit(f"gpu_peer: --device {a.device}, but this machine has {torch.cuda.device_count()} GPU(s)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    tl.FAST_ATTENTION = True
    c = tl.Config(settings["model"])
    tr = settings["train"]
    model = tl.TaperedLlama(c).float().to(dev)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.02)
    params = dict(model.named_parameters())
    groups = [{"params": [p for n, p in params.items() if tl.decays(n)], "weight_decay": tr["weight_decay"]},
              {"params": [p for n, p in params.items() if not tl.decays(n)], "weight_decay": 0.0}]
    hyper = dict(lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"])
    try:  # the fused CUDA AdamW where this torch has it (its best setting), else the default
        opt = torch.optim.AdamW(groups, fused=dev.type == "cuda", **hyper)
    except TypeError:
        opt = torch.optim.AdamW(groups, **hyper)
    B, T, V = a.batch, a.seq, c.vocab
    # The fused kernel checked against the plain products on a short fp32
    # batch (TF32 off on a GPU), logit by logit (a mean loss would hide a
    # wrong mask): a wrong peer must not pass for a fast one.
    attention_diff = None
    if tl.fast_attention_available():
        probe = torch.randint(0, V, (1, min(T, 128)), device=dev)
        with torch.no_grad():
            fast = model(probe)
            tl.FAST_ATTENTION = False
            plain = model(probe)
            tl.FAST_ATTENTION = True
        attention_diff = float((fast - plain).norm() / plain.norm())
        if not attention_diff <= 1e-4:
            sys.exit(f"gpu_peer: the fused attention's logits are {attention_diff:.3g} from the plain products'")
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0, loss = 0.0, 0.0
    for step in range(a.steps + 1):
        if step == 1:
            sync()
            t0 = time.perf_counter()
        data = torch.randint(0, V, (B, T + 1), device=dev)
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = tl.loss_fn(model(data[:, :-1]), data[:, 1:])
        loss.backward()
        if tr["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
    sync()
    sec = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if dev.type == "cuda" else 0
    print(json.dumps({"device": a.device, "precision": a.precision, "steps": a.steps, "batch": B, "seq": T,
                      "seconds": sec, "tokens_per_s": B * T * a.steps / sec, "last_loss": float(loss),
                      "peak_memory": peak, "torch": torch.__version__,
                      "attention": "scaled_dot_product_attention" if tl.fast_attention_available() else "plain",
                      "attention_check": attention_diff}))


if __name__ == "__main__":
    main()
