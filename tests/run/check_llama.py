"""A tlm checkpoint is a Llama state dict: load its parameters into the
PyTorch reference model of tests/reference/tapered_llama.py (strict: every
name and shape must match, nothing left over) and check that its loss on the
first windows of a text is what `tlm-run eval` printed.

  check_llama.py CHECKPOINT TEXT CONTEXT WINDOWS LOSS
"""
import json
import math
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
try:
    import torch
    import tapered_llama
except ImportError as e:   # the reference model is optional for this test
    print(f"skip: {e}")
    sys.exit(77)
import st  # noqa: E402


def load_model(path):
    """The float64 reference model with a checkpoint's parameters (strictly:
    every name and shape must match), and how many tensors it took."""
    tensors, meta = st.load(path)
    config = tapered_llama.Config(json.loads(meta["config"]))
    state = {k: torch.from_numpy(v).double() for k, v in tensors.items()
             if not k.startswith(("optimizer.", "train."))}
    model = tapered_llama.TaperedLlama(config).double()
    model.load_state_dict(state, strict=True)
    return model, len(state)


def windows(text, T, n):
    """The first n consecutive windows of a text as inputs and targets."""
    with open(text, "rb") as f:
        data = torch.tensor(list(f.read(n * T + 1)), dtype=torch.long)
    x = torch.stack([data[i * T:(i + 1) * T] for i in range(n)])
    y = torch.stack([data[i * T + 1:(i + 1) * T + 1] for i in range(n)])
    return x, y


def main():
    path, text, T, n, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    model, count = load_model(path)
    x, y = windows(text, T, n)
    with torch.no_grad():
        loss = tapered_llama.loss_fn(model(x), y).item()
    print(f"PyTorch loss {loss:.6f}, tlm-run eval {want:.4f}")
    if not math.isclose(loss, want, abs_tol=2e-4):
        print("FAIL: the losses differ")
        sys.exit(1)
    print(f"ok: {count} tensors load strictly into the PyTorch Llama")


if __name__ == "__main__":
    main()
