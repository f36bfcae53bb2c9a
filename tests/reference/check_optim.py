#!/usr/bin/env python3
"""Checks tlm_rt's optimisers, clipping and lr schedules against torch.optim.

The C dumper (tests/runtime/dump_optim.c) runs AdamW (cosine schedule) and
SGD with momentum and dampening (linear schedule) for 12 steps on a block
of three tensors with a per-tensor weight-decay mask, clipping the global
gradient norm to 1 first. Here the same steps are replayed in float32 with
    torch.nn.utils.clip_grad_norm_, torch.optim.AdamW / SGD (two param
    groups: decay and no decay), and the schedules built from torch's
    LinearLR (warm-up) + CosineAnnealingLR / LinearLR in SequentialLR,
and the parameters after every step, the norms and the learning rates are
compared (relative error bounds below).

usage: check_optim.py DUMP_OPTIM_EXE OUT_DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Report, run_dumper, torch  # noqa: E402
import st  # noqa: E402

sched_mod = torch.optim.lr_scheduler
PARAM_TOL = 1e-5  # float32 vs float32: different rounding only
LR_TOL = 1e-6


def torch_lrs(kind, max_lr, min_lr, warmup, total, steps):
    """The learning rate torch's schedulers give for steps 0..steps-1
    (after `total`, the schedule holds min_lr: CosineAnnealingLR alone
    would start rising again, a restart nobody asked for)."""
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float32))
    opt = torch.optim.SGD([p], lr=max_lr)
    warm = sched_mod.LinearLR(opt, start_factor=1.0 / warmup, end_factor=1.0,
                              total_iters=warmup - 1)
    if kind == "cosine":
        after = sched_mod.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr)
    elif kind == "linear":
        after = sched_mod.LinearLR(opt, start_factor=1.0, end_factor=min_lr / max_lr,
                                   total_iters=total - warmup)
    else:
        after = sched_mod.ConstantLR(opt, factor=1.0, total_iters=0)
    s = sched_mod.SequentialLR(opt, [warm, after], milestones=[warmup])
    out = []
    for step in range(steps):
        lr = opt.param_groups[0]["lr"]
        if kind != "constant" and step >= total:
            lr = min_lr
        out.append(lr)
        opt.step()
        s.step()
    return out


def replay(kind, d, meta, rep):
    cfg = json.loads(meta[kind])
    sc = json.loads(meta[kind + ".schedule"])
    max_norm = float(meta["max_norm"])
    spans = json.loads(meta["spans"])
    grads = torch.tensor(d["grads"])
    S = grads.shape[0]
    lrs = torch_lrs(sc["kind"], sc["max_lr"], sc["min_lr"], sc["warmup"], sc["total"], S)
    rep.compare(f"{kind} learning rates ({sc['kind']})", d[kind + ".lr"], lrs, LR_TOL, "lr")

    p0 = torch.tensor(d["p0"])
    params = [torch.nn.Parameter(p0[o:o + n].clone()) for o, n, _ in spans]
    decay = [p for p, (_, _, dec) in zip(params, spans) if dec]
    no_decay = [p for p, (_, _, dec) in zip(params, spans) if not dec]
    wd = cfg["weight_decay"]
    groups = [{"params": decay, "weight_decay": wd},
              {"params": no_decay, "weight_decay": 0.0}]
    if kind == "adamw":
        opt = torch.optim.AdamW(groups, lr=sc["max_lr"], betas=tuple(cfg["betas"]),
                                eps=cfg["eps"])
    else:
        opt = torch.optim.SGD(groups, lr=sc["max_lr"], momentum=cfg["momentum"],
                              dampening=cfg["dampening"], nesterov=cfg["nesterov"])
    norms, worst, clipped = [], 0.0, 0
    for s in range(S):
        for p, (o, n, _) in zip(params, spans):
            p.grad = grads[s, o:o + n].clone()
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        norms.append(norm.item())
        clipped += norm.item() > max_norm
        for g in opt.param_groups:
            g["lr"] = lrs[s]
        opt.step()
        got = torch.tensor(d[kind + ".after"][s])
        ref = torch.cat([p.detach() for p in params])
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    rep.compare(f"{kind} gradient norms", d[kind + ".norm"], norms, 1e-6, "norm")
    rep.check(f"{kind}: clipping was active on {clipped} of {S} steps", 0 < clipped < S)
    print(f"  {'ok  ' if worst <= PARAM_TOL else 'FAIL'} {kind} parameters after each of "
          f"{S} steps: worst rel err {worst:.2e}  (bound {PARAM_TOL:.0e})")
    rep.worst["params"] = max(rep.worst.get("params", 0.0), worst)
    if worst > PARAM_TOL:
        rep.failures += 1


def main():
    exe, outdir = sys.argv[1], sys.argv[2]
    path = os.path.join(outdir, "optim.safetensors")
    run_dumper(exe, path)
    d, meta = st.load(path)
    rep = Report("check_optim")
    torch.set_default_dtype(torch.float32)
    print("learning-rate schedules (warm-up 5, total 20, 25 steps)")
    sc = json.loads(meta["lr.schedule"])
    for kind in ("constant", "cosine", "linear"):
        ref = torch_lrs(kind, sc["max_lr"], sc["min_lr"], sc["warmup"], sc["total"], 25)
        rep.compare(f"lr schedule {kind}", d["lr." + kind], ref, LR_TOL, "lr")
    print("AdamW (decay mask, clipping, cosine schedule)")
    replay("adamw", d, meta, rep)
    print("SGD momentum + dampening (decay mask, clipping, linear schedule)")
    replay("sgd", d, meta, rep)
    rep.finish()


if __name__ == "__main__":
    main()
