"""`tlm-run probe` against PyTorch: load the checkpoint into the reference
model of tests/reference/tapered_llama.py, take every block's residual
stream z (what post_attention_layernorm reads) and its output h, and compute
rho_l = mean over tokens of cos(h - z, z) on the same windows.

  check_probe.py CHECKPOINT TEXT CONTEXT WINDOWS PROBE_OUTPUT
"""
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
try:
    import torch
    from check_llama import load_model, windows
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)


def main():
    path, text, T, n, probe = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    model, _ = load_model(path)
    x, _ = windows(text, T, n)
    seen = {}
    for l, block in enumerate(model.model.layers):
        block.post_attention_layernorm.register_forward_hook(
            lambda mod, inp, out, l=l: seen.__setitem__(("z", l), inp[0]))
        block.register_forward_hook(lambda mod, inp, out, l=l: seen.__setitem__(("h", l), out))
    with torch.no_grad():
        model(x)
    want = []
    for l in range(len(model.model.layers)):
        z, h = seen[("z", l)], seen[("h", l)]
        want.append(torch.nn.functional.cosine_similarity(h - z, z, dim=-1).mean().item())
    got = [float(m.group(1)) for m in re.finditer(r"^\s*\d+\s+\d+\s+(-?[0-9.]+)\s*$", open(probe).read(), re.M)]
    print("PyTorch rho", " ".join(f"{v:.4f}" for v in want))
    print("tlm-run    ", " ".join(f"{v:.4f}" for v in got))
    if len(got) != len(want) or any(abs(a - b) > 2e-4 for a, b in zip(got, want)):
        print("FAIL: the probes differ")
        sys.exit(1)
    print("ok: rho per layer matches PyTorch")


if __name__ == "__main__":
    main()
