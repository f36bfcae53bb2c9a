#!/usr/bin/env python3
"""Checks tlm_rt's Titans memory op against the recurrence in PyTorch.

`test_titans --dump FILE` (tests/runtime/test_titans.c) runs the C forward
and backward on packed qkv [B,T,3,H,D] with random unit q, k, v in (-1, 1),
theta in (0.001, 0.1), eta and alpha in (0.05, 0.95), for seven cases: a
small shape (B=2 T=40 H=2 D=16) and the tiny model's head size (B=1 T=256
H=2 D=64), each at chunk C = 1 (the exact recurrence) and C = 16; then
B=2 T=40 D=16 at C = 3 (several chunks per checkpoint segment), B=1 T=200
D=64 at C = 64 (titans_440m's chunk, T not a multiple of it) and B=1 T=150
D=16 at C = 100 (the op splits a chunk into blocks of at most 64 tokens).
The op computes each chunk in its chunk-parallel (matrix-product) form; here the
recurrence is written as plainly as possible in float64,
    e_t = M0 k_t - v_t        (M0: the memory at the start of t's chunk)
    S_t = eta_t S_{t-1} - theta_t * 2 e_t k_t^T
    M_t = (1 - alpha_t) M_{t-1} + S_t,   y_t = M_t q_t,
and autograd gives the gradients of sum(y * dy) with respect to q, k, v,
theta, eta and alpha. Bounds: y 1e-5, gradients 1e-4 (max |err| / max |ref|).

usage: check_titans.py TEST_TITANS_EXE OUT_DIR
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Report, torch  # noqa: E402
import st  # noqa: E402

Y_TOL = 1e-5
GRAD_TOL = 1e-4


def titans(q, k, v, theta, eta, alpha, C):
    """q, k, v [B,T,H,D]; theta, eta, alpha [B,T,H] -> y [B,T,H,D]."""
    B, T, H, D = q.shape
    M = q.new_zeros(B, H, D, D)
    S = q.new_zeros(B, H, D, D)
    M0 = M
    ys = []
    for t in range(T):
        if t % C == 0:
            M0 = M
        kt, vt, qt = k[:, t], v[:, t], q[:, t]  # [B,H,D]
        e = torch.einsum("bhij,bhj->bhi", M0, kt) - vt
        G = 2 * e.unsqueeze(-1) * kt.unsqueeze(-2)
        S = eta[:, t, :, None, None] * S - theta[:, t, :, None, None] * G
        M = (1 - alpha[:, t, :, None, None]) * M + S
        ys.append(torch.einsum("bhij,bhj->bhi", M, qt))
    return torch.stack(ys, dim=1)


def main():
    exe, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "titans.safetensors")
    r = subprocess.run([exe, "--dump", path], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(f"{exe} --dump failed with exit code {r.returncode}")
    d, meta = st.load(path)
    rep = Report("check_titans")
    for c, (B, T, H, D, C) in enumerate(json.loads(meta["cases"])):
        print(f"B={B} T={T} H={H} D={D} chunk={C}")
        g = lambda n: torch.tensor(d[f"c{c}.{n}"], dtype=torch.float64)  # noqa: E731
        qkv = g("qkv").requires_grad_()
        sc = g("scalars").requires_grad_()
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        y = titans(q, k, v, sc[0], sc[1], sc[2], C).reshape(B, T, H * D)
        dy = g("dy")
        (y * dy).sum().backward()
        rep.compare("y", d[f"c{c}.y"], y, Y_TOL, "y")
        if C > 1:  # the chunked form must differ from the exact recurrence
            with torch.no_grad():
                y1 = titans(q, k, v, sc[0], sc[1], sc[2], 1).reshape(B, T, H * D)
                diff = ((y1 - y).abs().max() / y.abs().max()).item()
            rep.check(f"chunk {C} differs from chunk 1 on these inputs (rel {diff:.1e})",
                      diff > 1e-3)
        dqkv, dsc = d[f"c{c}.dqkv"], d[f"c{c}.dscalars"]
        for i, n in enumerate(("dq", "dk", "dv")):
            rep.compare(n, dqkv[:, :, i], qkv.grad[:, :, i], GRAD_TOL, "grad")
        for i, n in enumerate(("dtheta", "deta", "dalpha")):
            rep.compare(n, dsc[i], sc.grad[i], GRAD_TOL, "grad")
    rep.finish()


if __name__ == "__main__":
    main()
