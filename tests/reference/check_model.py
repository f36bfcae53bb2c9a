#!/usr/bin/env python3
"""Checks a whole compiled model against PyTorch: forward, backward and
AdamW training steps.

Runs tests/model/dump_model on MODEL.so, which writes the parameters, one
forward/backward pass (logits, loss, every gradient) and S optimizer steps
(the batches, losses, norms, learning rates, the parameters after each
step) to a safetensors file. Then rebuilds the model here as a plain
PyTorch module (tapered_llama.py, HF-Llama names, a width per layer), loads
the same parameters and compares:

  parameter table   names and shapes equal the module's; the decay mask is
                    "matrices decay, embedding and norms do not"; the
                    initialisation has the table's mean and std
  forward           logits and loss against float64 torch:
                    max|c - ref| / max|ref| and ||c - ref|| / ||ref|| <= 1e-5
  backward          every gradient, the same two measures <= 1e-4
  training          torch.optim.AdamW with the same two param groups,
                    clip_grad_norm_, the lr schedule from torch's schedulers
                    and the same micro-batches (loss / k each), S steps from
                    the same start, in float64 (and float32 beside it):
                    learning rates <= 1e-6, every weight after every dumped
                    step within 1e-4 max|p| of the tensor plus an allowance
                    for weights whose gradient is within float32 rounding of
                    zero (see PARAM_TOL). When every step was dumped, each
                    step is also replayed from tlm's own parameters before
                    it (teacher forcing, see check_training): its loss and
                    gradient norm <= 1e-5, its update (the same bound, the
                    allowance of that step alone) and AdamW's moments after
                    the last step, none of them moved by the drift of the
                    trajectory; the free-running losses, norms and moments
                    are then printed as that drift, and the free-running
                    weights' allowance also covers the gradients' drift
                    (the float64 gradient at tlm's parameters against the
                    free-running replay's). Otherwise (--final-only)
                    the free-running losses and norms <= 1e-5 and the
                    moments are checked as before.

The mixers: the Llama attention, gated attention (elementwise or headwise
gate), Titans (chunked matrix memory) and hope_attention (CMS levels). A
CMS level with period P > 1 is replayed as tlm's trainer documents it: its
clipped gradients summed over P steps, then one AdamW step of its own
(bias correction by its own update count, the lr of the global step); the
parameters after every dumped step are compared as above, and the slow
levels' parameters must be bit-for-bit unchanged between their updates.

Each comparison also prints what float32 PyTorch gets against the same
float64 reference, as a yardstick for float32 rounding.

usage: check_model.py DUMP_MODEL_EXE MODEL.so OUT.safetensors [dump_model options]
"""
import json
import math
import os
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Report, torch  # noqa: E402  (exits with a clear message without torch)
import st  # noqa: E402
import tapered_llama as tl  # noqa: E402
from check_optim import torch_lrs  # noqa: E402

# SequentialLR passes an epoch to its schedulers, which torch 1.13 warns about
warnings.filterwarnings("ignore", message="The epoch parameter")

FWD_TOL = 1e-5      # logits and loss: float32 forward vs float64
GRAD_TOL = 1e-4     # gradients: float32 backward vs float64
SCALAR_TOL = 1e-5   # per-step losses, gradient norms
LR_TOL = 1e-6       # learning rates (float32 in tlm)
# Parameters after S AdamW steps: every element within
#     PARAM_TOL * max|p_ref| + allowance_i
# of float64 PyTorch. An AdamW step moves a weight by lr * m^ / (sqrt(v^) +
# eps), a function of the gradient's direction over the steps more than of
# its size, so gradient errors of ~1e-6 relative (the backward above) change
# a typical update by about as much: far below PARAM_TOL after a few steps.
# The exception is a weight whose gradient is within float32 rounding of
# zero, where m^ / sqrt(v^) may differ by O(1) (even flip sign: up to 2 lr
# per step) in any float32 implementation, torch's included; later steps
# then see slightly different parameters, so their gradients differ by more
# than rounding. allowance_i is that sensitivity, accumulated over the steps
# of the float64 replay: the change of the update under a gradient error
# delta = NOISE_FACTOR x the float32 replay's (float32 torch's max gradient
# error on that tensor at that step, at least 1e-6 max|g|):
#     lr * min(delta (1 + rho) / (sqrt(v^) + eps), 2 (1 + rho)),
#     rho = |m^| / (sqrt(v^) + eps).
# For a well-conditioned weight it is ~1e-4 lr, far below PARAM_TOL max|p|,
# so a wrong update rule (lr, decay mask, bias correction, clipping,
# accumulation) moves nearly every weight out of bounds. The plain
# max|c - ref| / max|ref|, the norm-wise error and the error relative to
# the update are printed, with float32 torch's beside them.
PARAM_TOL = 1e-4
NOISE_FACTOR = 10
# AdamW's m and v after the last step, per tensor: linear in the gradients
# of all steps, so their error is that of the gradients along the two
# trajectories, which drift apart through the ill-conditioned weights above
# (for float32 torch as for tlm). Norm-wise error <= max(STATE_TOL,
# NOISE_FACTOR x float32 torch's); elementwise 10x that.
STATE_TOL = 1e-4


def rel_errs(got, ref):
    """(max|got - ref| / max|ref|, ||got - ref|| / ||ref||) in float64"""
    got = torch.as_tensor(got, dtype=torch.float64)
    ref = torch.as_tensor(ref, dtype=torch.float64).detach()
    diff = got - ref
    scale = ref.abs().max().item() if ref.numel() else 0.0
    norm = ref.norm().item() if ref.numel() else 0.0
    mx = diff.abs().max().item() if ref.numel() else 0.0
    return mx / (scale if scale > 0 else 1.0), diff.norm().item() / (norm if norm > 0 else 1.0)


class Checker(Report):
    def close(self, what, got, ref, tol, kind, yardstick=None, info=False):
        """got (from tlm) against ref (float64 torch); yardstick: float32
        torch against the same ref, printed for scale; info: printed, not
        checked."""
        got = torch.as_tensor(got)
        ref = torch.as_tensor(ref).detach()
        if tuple(got.shape) != tuple(ref.shape):
            print(f"  FAIL {what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}")
            self.failures += 1
            return
        mx, nw = rel_errs(got, ref)
        ok = mx <= tol and nw <= tol
        extra = ""
        if yardstick is not None:
            ymx, ynw = rel_errs(yardstick, ref)
            extra = f"  [torch f32 {ymx:.1e} / {ynw:.1e}]"
        if info:
            print(f"  info {what:<52} max {mx:.2e}  norm {nw:.2e}{extra}")
            return
        print(f"  {'ok  ' if ok else 'FAIL'} {what:<52} max {mx:.2e}  norm {nw:.2e}  (bound {tol:.0e}){extra}")
        self.worst[kind] = max(self.worst.get(kind, 0.0), mx, nw)
        if not ok:
            self.failures += 1


def run_dumper(exe, so, out, args):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    r = subprocess.run([exe, so, out] + args, capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(f"{exe} failed with exit code {r.returncode}")


def build(c, dtype, d, prefix):
    model = tl.TaperedLlama(c).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.as_tensor(d[prefix + name]))
    return model


def lr_schedule(tr, steps):
    """The learning rate of steps 0..steps-1 from torch's schedulers
    (check_optim.torch_lrs: LinearLR warm-up, then CosineAnnealingLR /
    LinearLR / constant, min_lr after the schedule's end)."""
    if tr["warmup"] > 0:
        return torch_lrs(tr["schedule"], tr["lr"], tr["min_lr"], tr["warmup"], tr["steps"], steps)
    # no warm-up: torch_lrs's LinearLR would divide by zero; the decay alone
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=tr["lr"])
    sch = torch.optim.lr_scheduler
    if tr["schedule"] == "cosine":
        s = sch.CosineAnnealingLR(opt, T_max=tr["steps"], eta_min=tr["min_lr"])
    elif tr["schedule"] == "linear":
        s = sch.LinearLR(opt, 1.0, tr["min_lr"] / tr["lr"], total_iters=tr["steps"])
    else:
        s = sch.ConstantLR(opt, 1.0, total_iters=0)
    out = []
    for k in range(steps):
        lr = opt.param_groups[0]["lr"]
        out.append(tr["min_lr"] if tr["schedule"] != "constant" and k >= tr["steps"] else lr)
        opt.step()
        s.step()
    return out


def check_table(rep, c, d, table):
    print("parameter table")
    model = tl.TaperedLlama(c)
    want = {n: tuple(p.shape) for n, p in model.named_parameters()}
    got = {p["name"]: tuple(p["shape"]) for p in table}
    rep.check(f"{len(got)} parameters, names and shapes as in HF Llama "
              f"(widths {c.widths}, {'tied' if c.tie else 'untied'} head)", got == want)
    if got != want:
        print(f"    missing: {sorted(set(want) - set(got))}\n    unexpected: {sorted(set(got) - set(want))}")
        print(f"    shapes: {[(n, got[n], want[n]) for n in got if n in want and got[n] != want[n]]}")
    wrong = [p["name"] for p in table if p["decay"] != tl.decays(p["name"])]
    rep.check("decay mask: matrices yes, embedding and norms no", not wrong)
    if wrong:
        print(f"    wrong decay flag: {wrong}")
    if c.mixer == "hope_attention":
        wrong = [f"{p['name']} (period {p.get('period')}, want {tl.period(c, p['name'])})" for p in table
                 if p.get("period") != tl.period(c, p["name"])]
        rep.check(f"update periods: CMS level I every cms[I] of {c.cms} steps, the rest every step", not wrong)
        if wrong:
            print(f"    {wrong}")
    # Initialisation: ones exactly; normal with the table's std (mean within
    # 5 standard errors, std within 5 standard errors of its estimate).
    bad = []
    for p in table:
        w = torch.as_tensor(d["init." + p["name"]], dtype=torch.float64).reshape(-1)
        if p["init"] == "ones":
            if not bool((w == 1).all()):
                bad.append(p["name"])
            continue
        n, std = w.numel(), p["init_std"]
        if abs(w.mean().item()) > 5 * std / math.sqrt(n) or abs(w.std().item() / std - 1) > 5 / math.sqrt(2 * n):
            bad.append(f"{p['name']} (mean {w.mean().item():.2e}, std {w.std().item():.4g} vs {std:.4g})")
    rep.check("initialisation: norms 1, matrices N(0, table std)", not bad)
    if bad:
        print(f"    {bad}")


def forward_backward(c, d, dtype):
    model = build(c, dtype, d, "param.")
    tokens = torch.as_tensor(d["tokens"]).long()
    targets = torch.as_tensor(d["targets"]).long()
    logits = model(tokens)
    loss = tl.loss_fn(logits, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def check_forward_backward(rep, c, d, names):
    print(f"forward and backward on a batch of {d['tokens'].shape[0]} x {d['tokens'].shape[1]} tokens "
          f"({int((d['targets'] < 0).sum())} targets ignored)")
    ref = forward_backward(c, d, torch.float64)
    f32 = forward_backward(c, d, torch.float32)
    rep.close("logits", d["logits"], ref[0], FWD_TOL, "forward", f32[0])
    rep.close(f"loss ({float(d['loss']):.6f})", d["loss"], ref[1], FWD_TOL, "forward", f32[1])
    for n in names:
        rep.close(f"grad {n}", d["grad." + n], ref[2][n], GRAD_TOL, "gradient", f32[2][n])


class Replay:
    """The dumped optimizer steps in PyTorch: the same micro-batches
    (loss / k each), clip_grad_norm_, the lr schedule, AdamW with the two
    param groups, from the dumped start. step(s) runs step s and returns
    (loss, norm before clipping); the clipped gradients stay in .grad.

    Parameters with an update period P > 1 (hope's slow CMS levels) have an
    AdamW of their own per P: their clipped gradients are summed over the
    steps, and at global step s + 1 = P, 2P, ... that optimizer steps once
    with the sum as the gradient (its own step count, so its own bias
    correction; the lr of step s), and the sum restarts. .used holds, per
    parameter updated at the last step, the gradient its update used."""

    def __init__(self, c, d, tr, table, dtype):
        self.model = build(c, dtype, d, "param.")
        self.params = dict(self.model.named_parameters())
        decay = {p["name"]: p["decay"] for p in table}
        self.period = {p["name"]: int(p.get("period", 1)) for p in table}
        self.opts, self.opt_of = {}, {}
        for P in sorted(set(self.period.values())):
            names = [n for n in self.params if self.period[n] == P]
            groups = [{"params": [self.params[n] for n in names if decay[n]], "weight_decay": tr["weight_decay"]},
                      {"params": [self.params[n] for n in names if not decay[n]], "weight_decay": 0.0}]
            groups = [g for g in groups if g["params"]]
            self.opts[P] = torch.optim.AdamW(groups, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]),
                                             eps=tr["eps"])
            for n in names:
                self.opt_of[n] = self.opts[P]
        self.sums = {n: torch.zeros_like(p) for n, p in self.params.items() if self.period[n] > 1}
        self.used = {}
        self.tr = tr
        self.lrs = lr_schedule(tr, tr["run"])
        self.xs = torch.as_tensor(d["train.tokens"]).long()
        self.ys = torch.as_tensor(d["train.targets"]).long()

    def step(self, s):
        k = self.tr["accumulate"]
        micro = self.tr["batch"] // k
        self.model.zero_grad(set_to_none=False)
        total = 0.0
        for i in range(k):
            x, y = self.xs[s, i * micro:(i + 1) * micro], self.ys[s, i * micro:(i + 1) * micro]
            loss = tl.loss_fn(self.model(x), y)
            (loss / k).backward()
            total += loss.item() / k
        plist = list(self.params.values())
        if self.tr["grad_clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(plist, self.tr["grad_clip"]).item()
        else:
            norm = torch.norm(torch.stack([p.grad.norm() for p in plist])).item()
        self.used = {}
        for P, opt in self.opts.items():
            names = [n for n in self.params if self.period[n] == P]
            if P > 1:
                for n in names:
                    self.sums[n] += self.params[n].grad
                if (s + 1) % P != 0:
                    continue
                for n in names:
                    self.params[n].grad.copy_(self.sums[n])
                    self.sums[n].zero_()
            for g in opt.param_groups:
                g["lr"] = self.lrs[s]
            opt.step()
            for n in names:
                self.used[n] = self.params[n].grad
        return total, norm

    def load(self, d, prefix):
        """sets the parameters to the dumped ones (teacher forcing: the next
        step starts from tlm's parameters; the optimizer state stays)"""
        with torch.no_grad():
            for n, p in self.params.items():
                p.copy_(torch.as_tensor(d[prefix + n]))

    def state(self, name, key):
        """AdamW's state of a parameter (zeros before its first update)"""
        st = self.opt_of[name].state[self.params[name]]
        return st[key] if key in st else torch.zeros_like(self.params[name])


def update_allowance(replay, replay32, s, names, delta_floor=None, drift=None):
    """The sensitivity of this step's update to a gradient error (see
    PARAM_TOL), per weight of the parameters updated at step s, with the
    gradient the update used (a slow CMS level's: the sum over its
    period). delta_floor (a dict, updated): a running maximum of delta per
    tensor, for the teacher-forced check, whose moments hold the errors of
    the earlier steps' gradients too. drift (a dict of tensors): a larger
    gradient error to allow, weight by weight, for the free-running check:
    how far the gradient at tlm's own parameters is from the free-running
    replay's (see check_training)."""
    tr = replay.tr
    b1, b2, eps = tr["beta1"], tr["beta2"], tr["eps"]
    out = {}
    for n in names:
        if n not in replay.used:
            continue
        g, g32 = replay.used[n], replay32.used[n].double()
        delta = NOISE_FACTOR * max((g32 - g).abs().max().item(), 1e-6 * g.abs().max().item())
        if delta_floor is not None:
            delta = delta_floor[n] = max(delta_floor.get(n, 0.0), delta)
        if drift is not None and n in drift:
            delta = torch.clamp(drift[n], min=delta)  # weight by weight
        t = float(replay.state(n, "step"))
        denom = (replay.state(n, "exp_avg_sq") / (1 - b2 ** t)).sqrt() + eps
        rho = (replay.state(n, "exp_avg") / (1 - b1 ** t)).abs() / denom
        out[n] = replay.lrs[s] * torch.minimum(delta * (1 + rho) / denom, 2 * (1 + rho))
    return out


def check_training(rep, c, d, tr, table, names):
    """Two replays of the dumped steps. Free-running: float64 torch from the
    same start, compared with tlm after every dumped step (the parameters,
    with the accumulated allowance of PARAM_TOL). Teacher-forced, when every
    step's parameters were dumped: each step starts from tlm's parameters
    before it, so its loss, gradient norm, the AdamW moments (linear in the
    gradients, which then never drift) and its one-step update are checked
    without the drift of the trajectory: a weight whose gradient is within
    rounding of zero may take the other sign in tlm (an AdamW step of up to
    2 lr the other way, as in float32 torch), and in some models (Titans,
    the slow CMS levels' summed gradients) that moves the later losses and
    norms by more than SCALAR_TOL, float32 torch's included. With teacher
    forcing the free-running losses, norms and moments are printed as the
    drift, not checked."""
    S = tr["run"]
    if S == 0:
        return
    print(f"training: {S} AdamW steps, batch {tr['batch']} in {tr['accumulate']} micro-batch(es) of "
          f"{tr['seq']} tokens, {tr['schedule']} schedule (warm-up {tr['warmup']} of {tr['steps']}), "
          f"clip {tr['grad_clip']}, weight decay {tr['weight_decay']}")
    ref = Replay(c, d, tr, table, torch.float64)
    f32 = Replay(c, d, tr, table, torch.float32)
    forced = all(f"step{k}.{names[0]}" in d for k in range(1, S + 1))
    if forced:
        tf = Replay(c, d, tr, table, torch.float64)
        tf32 = Replay(c, d, tr, table, torch.float32)
        tf_delta = {}
        tf_scalars = []
    start = {n: torch.as_tensor(d["param." + n], dtype=torch.float64) for n in names}
    allow = {n: torch.zeros_like(start[n]) for n in names}
    losses, norms = [], []
    for s in range(S):
        loss, norm = ref.step(s)
        loss32, norm32 = f32.step(s)
        losses.append((loss, loss32))
        norms.append((norm, norm32))
        key = f"step{s + 1}."
        drift = None
        if forced:
            before = "param." if s == 0 else f"step{s}."
            tf.load(d, before)
            tf32.load(d, before)
            tf_scalars.append(tf.step(s) + tf32.step(s))
            # Once a weight within rounding of a zero gradient has stepped
            # the other way (above), tlm's later gradients differ from the
            # free-running replay's by more than rounding: by as much as
            # the float64 gradients at tlm's parameters and at the replay's
            # do. That difference is the gradient error the free-running
            # comparison must allow this step (the one-step check below
            # stays as strict): a sanitizer build on an Intel Xeon, whose
            # rounding differed in the last bits, once drifted past the
            # float32 replay's allowance on one weight of odd_sizes.
            drift = {n: (tf.used[n] - ref.used[n]).abs() for n in names if n in tf.used and n in ref.used}
        for n, a in update_allowance(ref, f32, s, names, drift=drift).items():
            allow[n] += a
        if key + names[0] in d:
            check_params(rep, s + 1, d, key, names, ref, f32, start, allow)
            check_periods(rep, s + 1, d, names, ref)
        if forced:
            prev = {n: torch.as_tensor(d[before + n], dtype=torch.float64) for n in names}
            one = {n: torch.zeros_like(prev[n]) for n in names}
            one.update(update_allowance(tf, tf32, s, names, tf_delta))
            check_params(rep, s + 1, d, key, names, tf, tf32, prev, one, "one step from tlm's")
    rep.close("learning rates", d["train.lr"], torch.tensor(ref.lrs), LR_TOL, "lr")
    if forced:
        col = list(zip(*tf_scalars))
        rep.close("step losses (from tlm's parameters)", d["train.loss"], torch.tensor(col[0]), SCALAR_TOL,
                  "step scalars", torch.tensor(col[2]))
        rep.close("gradient norms (before clipping; from tlm's)", d["train.grad_norm"], torch.tensor(col[1]),
                  SCALAR_TOL, "step scalars", torch.tensor(col[3]))
    rep.close("step losses" + (" (free-running: the drift)" if forced else ""), d["train.loss"],
              torch.tensor([x[0] for x in losses]), SCALAR_TOL, "step scalars",
              torch.tensor([x[1] for x in losses]), info=forced)
    rep.close("gradient norms (before clipping)" + (" (free-running)" if forced else ""), d["train.grad_norm"],
              torch.tensor([x[0] for x in norms]), SCALAR_TOL, "step scalars",
              torch.tensor([x[1] for x in norms]), info=forced)
    if tr["grad_clip"] > 0:
        print(f"       clipping active on {sum(x[0] > tr['grad_clip'] for x in norms)} of {S} steps")
    if forced:
        check_moments(rep, d, names, tf, tf32, S, "from tlm's parameters")
    check_moments(rep, d, names, ref, f32, S, "free-running: the drift" if forced else "", info=forced)


def check_params(rep, step, d, key, names, ref, f32, start, allow, label=""):
    """The parameters after a step: every weight within PARAM_TOL max|p| +
    its allowance. Prints the worst over the tensors of max|c - ref| /
    max|ref|, ||c - ref|| / ||ref|| and max|c - ref| / max|ref - start|,
    and the same for float32 torch."""
    w = {"max": (0.0, ""), "norm": 0.0, "upd": 0.0, "max32": 0.0, "upd32": 0.0}
    beyond, unexplained, worst = 0, 0, (0.0, "")
    for n in names:
        got = torch.as_tensor(d[key + n], dtype=torch.float64)
        r = ref.params[n].detach()
        r32 = f32.params[n].detach().double()
        mx, nw = rel_errs(got, r)
        if mx > w["max"][0]:
            w["max"] = (mx, n)
        w["norm"] = max(w["norm"], nw)
        w["max32"] = max(w["max32"], rel_errs(r32, r)[0])
        moved = (r - start[n]).abs().max().item()
        if moved > 0:
            w["upd"] = max(w["upd"], (got - r).abs().max().item() / moved)
            w["upd32"] = max(w["upd32"], (r32 - r).abs().max().item() / moved)
        err = (got - r).abs().reshape(-1)
        plain = PARAM_TOL * r.abs().max().item()
        beyond += int((err > plain).sum())
        excess = err - plain - allow[n].reshape(-1)
        unexplained += int((excess > 0).sum())
        i = int(excess.argmax())
        if excess[i] > worst[0]:
            worst = (excess[i].item(), f"{n}[{i}]: |c - ref| {err[i].item():.2e}, PARAM_TOL max|p| "
                                       f"{plain:.2e}, allowance {allow[n].reshape(-1)[i].item():.2e}")
    what = f"parameters after step {step}" + (f" ({label})" if label else "")
    if unexplained:
        print(f"  FAIL {what}: {unexplained} weights beyond the bound and their "
              f"allowance, the worst {worst[1]}")
        rep.failures += 1
    else:
        print(f"  ok   {what}: max rel {w['max'][0]:.2e} ({w['max'][1]}), "
              f"norm {w['norm']:.1e}, of the update {w['upd']:.1e}; {beyond} weights beyond "
              f"{PARAM_TOL:.0e} max|p|, all within their allowance")
    print(f"         [torch f32: max rel {w['max32']:.1e}, of the update {w['upd32']:.1e}]")
    kind = "params" + (" one step" if label else "")
    rep.worst[f"{kind} (max rel)"] = max(rep.worst.get(f"{kind} (max rel)", 0.0), w["max"][0])
    rep.worst[f"{kind} (norm)"] = max(rep.worst.get(f"{kind} (norm)", 0.0), w["norm"])


def check_periods(rep, step, d, names, ref):
    """A slow CMS level's parameters (period P > 1) after a step: exactly
    those of the step before unless the step is a multiple of P; at a
    multiple of P, changed (an update that moved none of its weights is
    not one). The comparison with torch is check_params's."""
    slow = sorted({P for P in ref.period.values() if P > 1})
    if not slow:
        return
    before = f"step{step - 1}." if step > 1 else "param."
    if before + names[0] not in d:
        return
    for P in slow:
        group = [n for n in names if ref.period[n] == P]
        changed = [n for n in group if not (d[f"step{step}.{n}"] == d[before + n]).all()]
        if step % P == 0:
            ok = len(changed) == len(group)
            what = f"updated: all {len(group)} tensors moved" if ok else \
                f"updated: only {len(changed)} of {len(group)} tensors moved"
        else:
            ok = not changed
            what = "unchanged, bit for bit" if ok else f"{len(changed)} tensors changed ({changed[0]}, ...)"
        print(f"  {'ok  ' if ok else 'FAIL'} period-{P} CMS level ({len(group)} tensors) at step {step}: {what}")
        if not ok:
            rep.failures += 1


def check_moments(rep, d, names, ref, f32, S, label="", info=False):
    """AdamW's moments after the last step, per tensor (worst printed);
    info: printed, not checked"""
    for moment, key in (("m", "exp_avg"), ("v", "exp_avg_sq")):
        worst_max, worst_norm, worst32, bad = 0.0, (0.0, ""), 0.0, 0
        for n in names:
            r = ref.state(n, key)
            mx, nw = rel_errs(d[f"adam.{moment}.{n}"], r)
            worst_max = max(worst_max, mx)
            if nw > worst_norm[0]:
                worst_norm = (nw, n)
            y = rel_errs(f32.state(n, key), r)[1]
            worst32 = max(worst32, y)
            tol = max(STATE_TOL, NOISE_FACTOR * y)
            bad += nw > tol or mx > 10 * tol
        tag = "info" if info else "ok  " if not bad else "FAIL"
        print(f"  {tag} AdamW {moment} after step {S}{f' ({label})' if label else ''}: norm {worst_norm[0]:.2e} "
              f"({worst_norm[1]}), max {worst_max:.2e}  (bounds {STATE_TOL:.0e} or {NOISE_FACTOR} x torch f32; "
              f"10x elementwise)  "
              f"[torch f32 norm {worst32:.1e}]")
        if not info:
            rep.worst["adam state"] = max(rep.worst.get("adam state", 0.0), worst_norm[0])
            rep.failures += bad


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    exe, so, out = sys.argv[1:4]
    run_dumper(exe, so, out, sys.argv[4:])
    d, meta = st.load(out)
    cfg, table, tr = (json.loads(meta[k]) for k in ("model", "params", "train"))
    c = tl.Config(cfg)
    names = [p["name"] for p in table]
    torch.manual_seed(0)
    mixer = c.mixer
    if mixer == "gated_attention":
        mixer += f" ({c.gate} gate)"
    elif mixer == "titans":
        mixer += f" (chunk {c.chunk}, inner_lr {c.inner_lr:g}, {tr['seq']} tokens)"
    elif mixer == "hope_attention":
        mixer += f" (cms {c.cms})"
    print(f"model {cfg['name']}: {mixer}, {cfg['mlp']}, d_model {c.d_model}, {c.heads} x {c.head_dim} heads, "
          f"widths {c.widths}, vocab {c.vocab}, norm_eps {c.eps:g}, rope_base {c.rope_base:g}, "
          f"{'tied' if c.tie else 'untied'} head")
    rep = Checker(f"check_model {cfg['name']}")
    check_table(rep, c, d, table)
    check_forward_backward(rep, c, d, names)
    check_training(rep, c, d, tr, table, names)
    rep.finish()


if __name__ == "__main__":
    main()
