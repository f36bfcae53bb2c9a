"""Shared helpers of the PyTorch reference checks."""
import os
import subprocess
import sys

try:
    import numpy as np  # noqa: F401
    import torch
except ImportError as e:  # the setup script installs python3-torch
    sys.exit(f"reference check needs PyTorch and numpy for {sys.executable}: "
             f"{e}. Install them (Debian: apt-get install python3-torch "
             f"python3-numpy, as scripts/setup.sh does) or point TLM_PYTHON "
             f"at a python that has them.")

torch.set_default_dtype(torch.float64)


class Report:
    """Collects comparisons; prints one line each and fails at the end."""

    def __init__(self, name):
        self.name = name
        self.failures = 0
        self.worst = {}

    def compare(self, what, got, ref, tol, kind="rel"):
        """max |got - ref| / max |ref| <= tol (got: float32 from C, ref: the
        float64 PyTorch recomputation)."""
        got = torch.as_tensor(got, dtype=torch.float64)
        ref = torch.as_tensor(ref, dtype=torch.float64).detach()
        if tuple(got.shape) != tuple(ref.shape):
            print(f"FAIL {what}: shape {tuple(got.shape)} vs {tuple(ref.shape)}")
            self.failures += 1
            return
        scale = ref.abs().max().item() if ref.numel() else 0.0
        diff = (got - ref).abs().max().item() if ref.numel() else 0.0
        err = diff / (scale if scale > 0 else 1.0)
        ok = err <= tol
        print(f"  {'ok  ' if ok else 'FAIL'} {what:<44} rel err {err:.2e}"
              f"  (bound {tol:.0e})")
        self.worst[kind] = max(self.worst.get(kind, 0.0), err)
        if not ok:
            self.failures += 1

    def check(self, what, cond):
        print(f"  {'ok  ' if cond else 'FAIL'} {what}")
        if not cond:
            self.failures += 1

    def finish(self):
        for kind, err in sorted(self.worst.items()):
            print(f"{self.name}: worst {kind} error {err:.2e}")
        if self.failures:
            print(f"{self.name}: {self.failures} failure(s)")
            sys.exit(1)
        print(f"{self.name}: all comparisons passed")


def run_dumper(exe, out):
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    r = subprocess.run([exe, out], capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        sys.exit(f"{exe} failed with exit code {r.returncode}")
