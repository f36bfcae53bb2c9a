#!/usr/bin/env python3
"""The tensor-core attention kernels' machine code, counted without a GPU.

attention_tc.cu's kernels issue one instruction a cycle a warp scheduler,
and a tensor-core mma (HMMA) of m16n8k16 keeps the tensor cores of that
scheduler busy for a few cycles: every other instruction of a tile (masks,
exponentials, conversions, addresses) competes with the products for issue
slots. So the instructions a key tile costs, besides its HMMAs, bound how
near the kernels can come to the tensor cores' rate. This counts them: the
source (common.cuh, mma.cuh, attention_tc.cu, as the runtime concatenates
them) goes through NVRTC to PTX and ptxas to a CUBIN for --arch; every
SASS instruction of sm_70 and later is 16 bytes, so a kernel's .text size
over 16 is its instruction count. A key tile's share is measured by
building the source a second time with the walk calling each tile twice
(attention_tc_walk's `tile(...)`): the difference is one tile's code, and
the difference in the PTX's mma.sync lines its HMMAs, and in its
ldmatrix lines its shared-memory reads: each ldmatrix.x4 reads 512 bytes,
and an SM's shared memory gives 128 bytes a cycle, so a tile with few
HMMAs an ldmatrix waits on shared memory, not on the tensor cores.

Each tile is counted twice: with attention_tc_masked() made true (every
tile masked: the diagonal tiles' code) and made false (the tiles below the
diagonal, all but one in 32 at context 2048). --versus REV counts git
revision REV's source as it is in the same run (the peer: the kernels
before a change; a revision without attention_tc_masked() has one version
of each tile) and prints the ratios of the other instructions a product
(a tile may hold more rows than the peer's).

Static counts, not timings: what an instruction costs in cycles (an
exponential on the special-function unit, a shared-memory load), the
latencies the warps hide, and the memory traffic are for a GPU to measure
(scripts/gpu_check.sh's profile). Needs the CUDA toolkit (libnvrtc, ptxas).

usage: attention_sass.py [--arch sm_90] [--versus REV]
"""
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile

from one_line_args import Parser

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "backend"))
import model_file  # noqa: E402  (tests/backend: the ELF section headers)

ROOT = os.path.dirname(HERE)
FILES = ["runtime/gpu/common.cuh", "runtime/gpu/mma.cuh", "runtime/gpu/attention_tc.cu"]
WALK_CALL = "tile(as + buf * TILE, bs + buf * TILE, r0);"
TWICE = WALK_CALL + " tile(as + buf * TILE + 8, bs + buf * TILE + 8, r0);"


def fail(message):
    sys.exit(f"attention_sass.py: {message}")


def toolkit():
    """libnvrtc and ptxas, from the toolkit tlm's build uses."""
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"] + sorted(glob.glob("/usr/local/cuda-*"))
    for root in roots:
        libs = sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
        ptxas = os.path.join(root, "bin", "ptxas")
        if root and libs and os.access(ptxas, os.X_OK):
            return ctypes.CDLL(libs[0]), ptxas
    fail("no CUDA toolkit (libnvrtc and ptxas under $CUDA_HOME or /usr/local/cuda)")


def ptx_of(nvrtc, source, arch):
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"attention_tc.cu", 0, None, None):
        fail("nvrtcCreateProgram failed")
    include = "-I" + os.path.join(os.path.dirname(os.path.dirname(nvrtc._name)), "include")
    opts = [f"--gpu-architecture=compute_{arch[3:]}".encode(), b"-std=c++17", b"-default-device", include.encode()]
    status = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    if status:
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, log)
        fail("NVRTC: " + log.value.decode(errors="replace").strip().splitlines()[0])
    nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(prog, ptx)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    return ptx.value.decode()


def text_sizes(cubin):
    """{kernel: bytes of its .text.<kernel> section} of an ELF64 CUBIN (the
    section headers read by the model.so tests' reader)."""
    with open(cubin, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        fail(f"{cubin}: not a 64-bit ELF file")
    return {name[len(".text."):]: size for name, _type, _offset, size, _addr in model_file.sections(elf)
            if name.startswith(".text.")}


def mma_counts(ptx):
    """{kernel: (mma.sync lines, ldmatrix lines)} of a PTX module."""
    counts = {}
    for part in re.split(r"\n(?=\.visible \.entry |\.entry )", ptx):
        m = re.search(r"\.entry (\w+)", part)
        if m:
            counts[m.group(1)] = (part.count("mma.sync.aligned"), part.count("ldmatrix.sync.aligned"))
    return counts


MASKED_BODY = "{ return k0 + attention_tc_BK - 1 > r0; }"


def count(nvrtc, ptxas, source, arch, work):
    """{kernel: (instructions, HMMAs, ldmatrix, registers, spilled bytes)} of one source."""
    ptx = ptx_of(nvrtc, source, arch)
    ptx_path, cubin = os.path.join(work, "k.ptx"), os.path.join(work, "k.cubin")
    with open(ptx_path, "w") as f:
        f.write(ptx)
    run = subprocess.run([ptxas, f"-arch={arch}", "-O3", "-v", ptx_path, "-o", cubin], capture_output=True, text=True)
    if run.returncode:
        fail("ptxas: " + (run.stderr.strip().splitlines() or ["failed"])[0])
    props = re.findall(r"Function properties for (\w+)\n.*?(\d+) bytes spill stores.*?\n.*?Used (\d+) registers",
                       run.stderr)
    regs = {k: (int(r), int(sp)) for k, sp, r in props}
    mmas = mma_counts(ptx)
    return {k: (v // 16,) + mmas.get(k, (0, 0)) + regs.get(k, (0, 0)) for k, v in text_sizes(cubin).items()}


def per_tile(nvrtc, ptxas, source, arch, work):
    """{kernel: (instructions, registers, spills, tile instructions, tile HMMAs, tile ldmatrix)}:
    a tile's by counting the source again with the walk calling each tile twice."""
    if WALK_CALL not in source:
        fail(f"attention_tc.cu no longer calls `{WALK_CALL}` in its walk: update this script")
    once = count(nvrtc, ptxas, source, arch, work)
    twice = count(nvrtc, ptxas, source.replace(WALK_CALL, TWICE), arch, work)
    return {k: (n, r, sp, twice[k][0] - n, twice[k][1] - m, twice[k][2] - ld)
            for k, (n, m, ld, r, sp) in once.items()}


def versions(nvrtc, ptxas, source, arch, work):
    """(the kernels as built, [(name, per_tile)]): the source's one version of
    each tile, or its masked and unmasked tiles."""
    if MASKED_BODY not in source:
        tiles = per_tile(nvrtc, ptxas, source, arch, work)
        return {k: v[:3] for k, v in tiles.items()}, [("one version", tiles)]
    built = {k: (n, r, sp) for k, (n, m, ld, r, sp) in count(nvrtc, ptxas, source, arch, work).items()}
    return built, [(name, per_tile(nvrtc, ptxas, source.replace(MASKED_BODY, "{ return %s; }" % value), arch, work))
                   for name, value in (("masked", "true"), ("unmasked", "false"))]


def source_at(rev):
    texts = []
    for path in FILES:
        if rev:
            run = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:{path}"], capture_output=True, text=True)
            if run.returncode:
                fail(f"git show {rev}:{path}: " + (run.stderr.strip().splitlines() or ["failed"])[0])
            texts.append(run.stdout)
        else:
            with open(os.path.join(ROOT, path)) as f:
                texts.append(f.read())
    return "\n".join(texts) + "\n"


def other_per_hmma(tile_instr, tile_hmma):
    return (tile_instr - tile_hmma) / tile_hmma if tile_hmma else float("nan")


def table(title, counted, peer=None):
    """One row a kernel: its instructions, registers and spills as built,
    then each version's tile: instructions, HMMAs, the other instructions an
    HMMA, and against the peer's same version (or its only one): peer is
    its [(name, per_tile)]."""
    built, tiles = counted
    print(title)
    names = [name for name, _ in tiles]
    print(f"{'kernel':17} {'instr':>6} {'regs':>4} {'spill':>5} | " +
          " | ".join(f"{n + ' tile':>14} {'HMMA':>4} {'other/HMMA':>10} {'HMMA/LDSM':>9}" +
                     ("  vs peer" if peer else "") for n in names))
    for k in sorted(built):
        n, r, sp = built[k]
        cells = []
        for name, rows in tiles:
            tn, tm, tl = rows[k][3:]
            cell = f"{tn:14} {tm:4} {other_per_hmma(tn, tm):10.2f} {tm / tl if tl else float('nan'):9.2f}"
            if peer:  # the other instructions a product, against the peer's: tiles may hold more rows
                theirs = dict(peer).get(name, peer[0][1])  # the same version, or the peer's only one
                pn, pm = theirs[k][3:5] if k in theirs else (0, 0)
                cell += f"  {other_per_hmma(tn, tm) / other_per_hmma(pn, pm):5.2f}x" if pm and tm else "       "
            cells.append(cell)
        print(f"{k.replace('tlm_attention_tc_', ''):17} {n:6} {r:4} {sp:5} | " + " | ".join(cells))


def main():
    ap = Parser(description="SASS instructions of the tensor-core attention kernels, per kernel and per key tile")
    ap.add_argument("--arch", default="sm_90", help="ptxas target (default sm_90)")
    ap.add_argument("--versus", metavar="REV", help="also count git revision REV's kernels (the peer)")
    args = ap.parse_args()
    if not re.fullmatch(r"sm_[0-9]{2,3}a?", args.arch):
        ap.error(f"--arch takes a target such as sm_90, not {args.arch!r}")
    nvrtc, ptxas = toolkit()
    with tempfile.TemporaryDirectory() as work:
        peer = versions(nvrtc, ptxas, source_at(args.versus), args.arch, work) if args.versus else None
        ours = versions(nvrtc, ptxas, source_at(None), args.arch, work)
    print(f"SASS instructions for {args.arch} (ptxas -O3): static counts of code, not timings. A tile: the code\n"
          "of one step of a kernel's walk (64 keys, or 64 queries for dk, dv; a loop ptxas kept, as over\n"
          "head size 128's two halves, is counted once); 'other/HMMA': its instructions besides the\n"
          "tensor-core products, per product; 'HMMA/LDSM': products per ldmatrix.x4 (512 bytes of\n"
          "shared memory read); 'spill': bytes ptxas spilled a thread.")
    if peer:
        table(f"\npeer: {args.versus}", peer)
    table("\nworking tree", ours, peer[1] if peer else None)


if __name__ == "__main__":
    main()
