#!/usr/bin/env python3
"""Training throughput of tlm beside PyTorch on the same model.

For each thread count, alternately (so both see the same machine load):
  tlm      tests/model/dump_model MODEL.so --time STEPS --threads N: the
           compiled model's generated MLP kernels and tlm_trainer_step
           (forward, backward, clipping, AdamW), float32
  pytorch  the same model rebuilt from the settings dump_model prints
           (tests/reference/tapered_llama.py: same widths, heads, norms,
           RoPE, tied or not), float32, AdamW with the same param groups,
           clip_grad_norm_, at its settings for N threads (two, or three):
           torch.set_num_threads(N) (OpenBLAS with N threads too), one
           torch thread with N OpenBLAS threads, and, where Debian's
           OpenMP-threaded OpenBLAS is installed, N torch threads over it;
           the best one is the peer. Where torch's own kernels default
           to AVX2 on a CPU with AVX-512 (Debian's torch 1.13 does on some
           Intel Xeons), each setting also runs with
           ATEN_CPU_CAPABILITY=avx512 and the better counts.
           OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for PyTorch's
           command only (reported when the machine sets them), and the
           OpenBLAS kernel it ran (openblas_get_corename) is printed.
Both take a fresh random batch every step, run one warm-up step outside the
clock, and report tokens (batch x sequence) per second; the best of
--repeat runs counts. Not a test: numbers depend on the machine and its load
(on a machine whose cores are busy, OpenMP's spinning threads slow both
down at 2+ threads; OMP_WAIT_POLICY=PASSIVE avoids that).

usage: train_bench.py DUMP_MODEL MODEL.so [--threads 1,2] [--steps 5]
                      [--repeat 2] [--batch 8] [--seq 256]
       train_bench.py --torch-worker JSON_SETTINGS THREADS STEPS   (internal)
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "reference"))
from one_line_args import Parser, positive  # noqa: E402 (bench/, beside this script)


AVX2 = False  # --avx2: both run their AVX2 code paths (see main)


# Debian's OpenMP-threaded OpenBLAS (libopenblas0-openmp): PyTorch's third
# setting, libblas.so.3 from it, so that its BLAS shares torch's OpenMP pool.
OPENMP_BLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
OPENMP_BLAS = os.path.exists(os.path.join(OPENMP_BLAS_DIR, "libblas.so.3"))


def env_for(threads, blas_threads=None, peer=False, blas_dir=None, aten=None):
    env = dict(os.environ)
    if aten:
        env["ATEN_CPU_CAPABILITY"] = aten
    if blas_dir:
        env["LD_LIBRARY_PATH"] = blas_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(blas_threads or threads)
    if peer:
        for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            env.pop(k, None)
    if AVX2:
        env["OPENBLAS_CORETYPE"] = "Haswell"
        if not peer:  # tlm-run's own kernels (attention, norms, RoPE, AdamW)
            env["TLM_CPU_CAPABILITY"] = "x86-64-v3"
        if peer:
            env["ATEN_CPU_CAPABILITY"] = "avx2"
            env["DNNL_MAX_CPU_ISA"] = "AVX2"  # oneDNN's own dispatch (torch 1.13 bundles oneDNN 2.6)
    return env


def openblas_corename():
    """The OpenBLAS kernel this process loaded (torch links it), or '?'."""
    import ctypes
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "openblas" in line.split()[-1]})
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_char_p
        return f"{fn().decode()} ({os.path.basename(lib)})"
    return "?"


def run_tlm(exe, so, threads, steps, batch, seq):
    cmd = [exe, so, "--time", str(steps), "--threads", str(threads), "--batch", str(batch), "--seq", str(seq)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env_for(threads))
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_torch(settings, threads, blas_threads, steps, blas_dir=None, aten=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(settings), str(threads), str(steps)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env_for(threads, blas_threads, True, blas_dir, aten))
    if r.returncode != 0:
        sys.exit(f"pytorch worker failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def torch_worker(settings, threads, steps):
    import torch
    import tapered_llama as tl
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = tl.Config(settings["model"])
    tr = settings["train"]
    model = tl.TaperedLlama(c).float()
    with torch.no_grad():     # the initialisation does not matter for speed; keep it sane
        for n, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0, 0.02)
    params = dict(model.named_parameters())
    groups = [{"params": [p for n, p in params.items() if tl.decays(n)], "weight_decay": tr["weight_decay"]},
              {"params": [p for n, p in params.items() if not tl.decays(n)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=tr["lr"], betas=(tr["beta1"], tr["beta2"]), eps=tr["eps"])
    B, T, V, k = settings["batch"], settings["seq"], c.vocab, tr["accumulate"]
    micro = B // k
    t0, loss = 0.0, 0.0
    for step in range(steps + 1):
        if step == 1:
            t0 = time.perf_counter()
        data = torch.randint(0, V, (B, T + 1))
        opt.zero_grad(set_to_none=True)
        for i in range(k):
            x, y = data[i * micro:(i + 1) * micro, :-1], data[i * micro:(i + 1) * micro, 1:]
            loss = tl.loss_fn(model(x), y) / k
            loss.backward()
        if tr["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), tr["grad_clip"])
        opt.step()
    sec = time.perf_counter() - t0
    print(json.dumps({"threads": torch.get_num_threads(), "seconds": sec, "tokens_per_s": B * T * steps / sec,
                      "last_loss": float(loss) * k, "torch": torch.__version__, "blas": openblas_corename(),
                      "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"), "aten": aten_capability(torch)}))


def aten_default():
    """PyTorch's own choice of kernels on this CPU, asked of a fresh process."""
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.__config__.show())"],
                       capture_output=True, text=True, env=env_for(1, peer=True))
    line = next((x for x in r.stdout.splitlines() if "CPU capability usage" in x), "")
    return line.split(":")[-1].strip() or "?"


def aten_capability(torch):
    """The vector code path PyTorch's own kernels run (AVX2, AVX512, ...)."""
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage" in line:
            return line.split(":")[-1].strip()
    return "?"


def thread_list(text):
    """argparse type: --threads 1,2 as [1, 2], each at least 1."""
    try:
        return [positive(t) for t in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected thread counts of at least 1 such as 1,2, not {text!r}")


def require_torch():
    """PyTorch in this Python (the peer runs in sys.executable), checked
    before anything is timed: without it the peer would fail only after
    tlm's runs, with a traceback. One line and exit 1 if it is missing."""
    # found, not imported: the timed processes are the workers, and this one
    # stays light (importing torch here took a second and its memory)
    if importlib.util.find_spec("torch") is None:
        sys.exit(f"train_bench.py: PyTorch is missing for {sys.executable} (No module named 'torch'): Debian's "
                 f"python3-torch at /usr/bin/python3 has it (scripts/setup.sh installs it; TLM_PYTHON picks the "
                 f"python)")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --check-args OPTIONS: train_bench.sh asks, before it compiles the
    # model, whether the options it will pass are good (exit 2 if not)
    checking = len(sys.argv) > 1 and sys.argv[1] == "--check-args"
    ap.add_argument("dump_model")
    ap.add_argument("model_so")
    ap.add_argument("--threads", type=thread_list, default=[1, 2])
    ap.add_argument("--steps", type=positive, default=5)
    ap.add_argument("--repeat", type=positive, default=2)
    ap.add_argument("--batch", type=positive, default=8)
    ap.add_argument("--seq", type=positive, default=256)
    ap.add_argument("--avx2", action="store_true",
                    help="the AVX2 code paths on any x86-64 CPU: OpenBLAS's Haswell kernels for both, PyTorch's "
                         "ATEN_CPU_CAPABILITY=avx2 (train_bench.sh compiles the model with tlmc --cpu x86-64-v3)")
    a = ap.parse_args(["dump_model", "model.so"] + sys.argv[2:] if checking else None)
    if checking:
        return
    require_torch()
    if not (os.path.isfile(a.dump_model) and os.access(a.dump_model, os.X_OK)):
        sys.exit(f"train_bench.py: {a.dump_model} is missing or not executable (tests/model/dump_model of a build)")
    if not os.path.isfile(a.model_so):
        sys.exit(f"train_bench.py: {a.model_so} is missing")
    global AVX2
    AVX2 = a.avx2
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":")[1].split() for line in f if line.startswith("flags")), [])
    # Debian's torch 1.13 may pick its AVX2 kernels on a CPU that has
    # AVX-512 (its cpuinfo does not know every model): then the peer also
    # runs with ATEN_CPU_CAPABILITY=avx512, and each column is its better.
    atens = [None]
    default_aten = aten_default() if not AVX2 else "AVX2"
    if (not AVX2 and default_aten != "AVX512"
            and all(x in flags for x in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))):
        atens.append("avx512")
    rows = []
    for threads in a.threads:
        # PyTorch's settings for N threads: N torch threads; 1 torch thread
        # with N OpenBLAS threads (the same as the first when N is 1).
        # and, where Debian's OpenMP OpenBLAS is installed, N torch threads
        # over it (one pool for both).
        peers = [(threads, threads, None)] + ([(1, threads, None)] if threads > 1 else [])
        if threads > 1 and OPENMP_BLAS:
            peers.append((threads, threads, OPENMP_BLAS_DIR))
        best_tlm, best_torch, settings = None, {}, None
        for _ in range(a.repeat):
            r = run_tlm(a.dump_model, a.model_so, threads, a.steps, a.batch, a.seq)
            settings = {"model": r["model"], "train": r["train"], "batch": r["batch"], "seq": r["seq"]}
            if best_tlm is None or r["tokens_per_s"] > best_tlm["tokens_per_s"]:
                best_tlm = r
            for peer in peers:
                for aten in atens:
                    p = run_torch(settings, peer[0], peer[1], a.steps, peer[2], aten)
                    if peer not in best_torch or p["tokens_per_s"] > best_torch[peer]["tokens_per_s"]:
                        best_torch[peer] = p
        rows.append((threads, best_tlm, best_torch))
        m = settings["model"]
    first = next(iter(rows[0][2].values()))
    set_env = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ]
    simd = [x for x in ("avx2", "fma", "avx512f", "avx512bw", "avx512_bf16") if x in flags]
    print(f"model {m['name']}: d_model {m['d_model']}, {m['layers']} layers, widths {m['widths']}, "
          f"{m['heads']} x {m['head_dim']} heads, vocab {m['vocab']}, {m['mlp']}, mixer {m.get('mixer', 'attention')}")
    print(f"training step: batch {a.batch} x {a.seq} tokens, AdamW, clip, float32; {a.steps} timed steps "
          f"after one warm-up, best of {a.repeat}; torch {first['torch']} ({default_aten} kernels by default), "
          f"OpenBLAS kernel {first['blas']}; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; cpu flags: {' '.join(simd)}")
    if set_env and not AVX2:
        print(f"unset for PyTorch's command only: {', '.join(set_env)}")
    if AVX2:
        print("AVX2 code paths forced for both: tlm's kernels for x86-64-v3 (the model's by tlmc --cpu, the "
              "runtime's by TLM_CPU_CAPABILITY), OPENBLAS_CORETYPE=Haswell, "
              "PyTorch's ATEN_CPU_CAPABILITY=avx2")
    if len(atens) > 1:
        won = sorted({p["aten"] for _, _, best in rows for p in best.values()})
        print(f"PyTorch also ran with ATEN_CPU_CAPABILITY=avx512 (its default here is {default_aten}); "
              f"each torch column is the better of the two, which ran {' and '.join(won)} kernels")
    print()
    print(f"tlm's OpenBLAS: {tlm_blas_build(a.dump_model)}; PyTorch's OpenMP-BLAS column: "
          f"{OPENMP_BLAS_DIR if OPENMP_BLAS else '(not installed: libopenblas0-openmp)'}")
    print(f"{'threads':>7} | {'tlm tokens/s':>12} | {'torch N thr':>11} | {'torch 1 + BLAS N':>16} | "
          f"{'torch N, OpenMP BLAS':>20} | {'tlm / best torch':>16} | {'tlm s/step':>10}")
    print("-" * 111)
    for threads, t, p in rows:
        own = p[(threads, threads, None)]["tokens_per_s"]
        blas = p[(1, threads, None)]["tokens_per_s"] if (1, threads, None) in p and threads > 1 else None
        ompb = p[(threads, threads, OPENMP_BLAS_DIR)]["tokens_per_s"] if (threads, threads, OPENMP_BLAS_DIR) in p else None
        best = max(own, blas or 0, ompb or 0)
        blas_col = f"{blas:>16.0f}" if blas else f"{'(same)':>16}"
        omp_col = f"{ompb:>20.0f}" if ompb else f"{'(same)' if threads == 1 else '-':>20}"
        print(f"{threads:>7} | {t['tokens_per_s']:>12.0f} | {own:>11.0f} | {blas_col} | {omp_col} | "
              f"{t['tokens_per_s'] / best:>16.2f} | {t['seconds'] / a.steps:>10.3f}")


def tlm_blas_build(exe):
    """Which OpenBLAS build tlm's binary loads (ldd): pthread or OpenMP."""
    r = subprocess.run(["ldd", exe], capture_output=True, text=True)
    line = next((x for x in r.stdout.splitlines() if "libopenblas" in x and "=>" in x), "")
    path = os.path.realpath(line.split("=>")[1].split()[0]) if line else "?"
    return f"{'OpenMP' if 'openmp' in path else 'pthread' if 'pthread' in path else '?'} build ({path})"


if __name__ == "__main__":
    main()
