#!/usr/bin/env python3
"""An independent GGUF reader, written from the GGUF specification
(ggml/docs/gguf.md), checking a file tlm-run export wrote against the
checkpoint it came from (numpy only):

  check_gguf.py FILE.gguf CHECKPOINT.safetensors TYPE ARCH

- header: magic "GGUF", version 3, counts that match what follows;
- every metadata key with the value type llama.cpp reads it as (u32, f32,
  string, bool, arrays of int32 or strings), the per-layer arrays of `deci`,
  context_length the window the checkpoint's run trained on;
- tensor infos: llama.cpp's names and shapes (ne[0] = columns), offsets at
  multiples of general.alignment (32), in order, not overlapping, inside
  the file, the data section starting at an aligned offset;
- values: the checkpoint's, with q_proj/k_proj rows permuted into
  llama.cpp's RoPE layout (convert_hf_to_gguf.py's permute, reimplemented
  here): f32 bit-exact, f16 equal to numpy's float16 rounding, q8_0 blocks
  with scale fp16(max|x|/127) and every value within half a step; matrices
  with rows not a multiple of 32 f16 under q8_0, norms f32;
- the vocabulary: 256 tokens, token i is byte i in GPT-2's byte-to-unicode
  characters, no merges, no BOS/EOS added.
Exit 0 when all hold, 1 with a FAIL line per problem."""
import json
import os
import struct
import sys

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "reference"))
sys.path.insert(0, os.path.join(here, "..", "tokenizer"))
import st  # noqa: E402
from bpe_reference import bytes_to_unicode  # noqa: E402  GPT-2's table, character -> byte

problems = []


def fail(msg):
    problems.append(msg)
    print("FAIL:", msg)


class Reader:
    def __init__(self, raw):
        self.raw, self.at = raw, 0

    def take(self, fmt):
        n = struct.calcsize(fmt)
        if self.at + n > len(self.raw):
            raise ValueError(f"truncated at byte {self.at}")
        v = struct.unpack_from("<" + fmt, self.raw, self.at)
        self.at += n
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        if self.at + n > len(self.raw):
            raise ValueError(f"string of {n} bytes past the end at {self.at}")
        s = self.raw[self.at:self.at + n]
        self.at += n
        return s


# gguf_type: (name, struct format); STRING 8 and ARRAY 9 are read apart
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


def value(r, t):
    if t in SCALARS:
        return t, r.take(SCALARS[t])
    if t == STRING:
        return t, r.string()
    if t == ARRAY:
        it, n = r.take("I"), r.take("Q")
        if it == ARRAY:
            raise ValueError("nested arrays")
        return (ARRAY, it), [value(r, it)[1] for _ in range(n)]
    raise ValueError(f"unknown value type {t}")


def read(path):
    raw = open(path, "rb").read()
    r = Reader(raw)
    magic, version, ntensors, nkv = r.take("4s"), r.take("I"), r.take("Q"), r.take("Q")
    if magic != b"GGUF":
        raise ValueError(f"magic {magic!r}")
    if version != 3:
        fail(f"version {version}, expected 3")
    kv = {}
    for _ in range(nkv):
        k = r.string().decode()
        if k in kv:
            fail(f"key {k} twice")
        kv[k] = value(r, r.take("I"))
    tensors = []
    for _ in range(ntensors):
        name = r.string().decode()
        nd = r.take("I")
        ne = [r.take("Q") for _ in range(nd)]
        tensors.append((name, ne, r.take("I"), r.take("Q")))
    return raw, kv, tensors, r.at


def permute(w, heads):
    # convert_hf_to_gguf.py, LlamaModel.permute (n_head_kv == n_head)
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(gname):
    table = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
    parts = gname.split(".")
    if parts[0] in table:
        return table[parts[0]] + ".weight"
    layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
    if parts[0] == "blk" and parts[2] in layer:
        return f"model.layers.{parts[1]}.{layer[parts[2]]}.weight"
    return None


GGML = {0: ("f32", 4, 1), 1: ("f16", 2, 1), 8: ("q8_0", 34, 32)}  # name, bytes per block, values per block


def decode(kind, blob, n):
    if kind == "f32":
        return np.frombuffer(blob, "<f4", n), None
    if kind == "f16":
        return np.frombuffer(blob, "<f2", n).astype(np.float32), None
    blocks = np.frombuffer(blob, np.dtype([("d", "<f2"), ("qs", "i1", 32)]), n // 32)
    d = blocks["d"].astype(np.float32)
    return (d[:, None] * blocks["qs"].astype(np.float32)).reshape(-1), blocks


def main():
    path, ckpt, want_type, want_arch = sys.argv[1:5]
    params, meta = st.load(ckpt)
    params = {k: v for k, v in params.items() if not k.startswith(("optimizer.", "train."))}
    config = json.loads(meta["config"])
    # the window the weights were trained on: the run's --context, else the model's
    trained = json.loads(meta.get("settings", "{}")).get("context") or config["context"]
    raw, kv, tensors, head_end = read(path)
    U32, F32, STR, BOOL = 4, 6, STRING, 7
    I32S, STRS = (ARRAY, 5), (ARRAY, STRING)

    def expect(k, t, v=None):
        if k not in kv:
            return fail(f"missing key {k}")
        if kv[k][0] != t:
            return fail(f"{k}: value type {kv[k][0]}, expected {t}")
        if v is not None and kv[k][1] != v:
            fail(f"{k} = {kv[k][1]!r}, expected {v!r}")

    arch = kv.get("general.architecture", (None, b""))[1].decode()
    if arch != want_arch:
        fail(f"architecture {arch}, expected {want_arch}")
    L, H, hd, widths = config["layers"], config["heads"], config["head_dim"], config["widths"]
    expect("general.architecture", STR, want_arch.encode())
    expect("general.alignment", U32, 32)
    # q8_0 asked for, but no matrix with rows of whole 32-blocks: an f16 file
    some_q8 = want_type == "q8_0" and any(len(ne) == 2 and ne[0] % 32 == 0 for ne in (t[1] for t in tensors))
    file_type = {"f32": 0, "f16": 1, "q8_0": 7 if some_q8 else 1}[want_type]
    expect("general.file_type", U32, file_type)
    if some_q8:
        expect("general.quantization_version", U32, 2)
    elif "general.quantization_version" in kv:
        fail("general.quantization_version in a file with no quantised tensor")
    expect(f"{arch}.context_length", U32, trained)
    expect(f"{arch}.embedding_length", U32, config["d_model"])
    expect(f"{arch}.block_count", U32, L)
    expect(f"{arch}.vocab_size", U32, config["vocab"])
    if arch == "deci":
        expect(f"{arch}.feed_forward_length", I32S, widths)
        expect(f"{arch}.attention.head_count", I32S, [H] * L)
        expect(f"{arch}.attention.head_count_kv", I32S, [H] * L)
    else:
        if len(set(widths)) != 1:
            fail(f"llama architecture for widths {widths}")
        expect(f"{arch}.feed_forward_length", U32, widths[0])
        expect(f"{arch}.attention.head_count", U32, H)
        expect(f"{arch}.attention.head_count_kv", U32, H)
    expect(f"{arch}.attention.key_length", U32, hd)
    expect(f"{arch}.attention.value_length", U32, hd)
    expect(f"{arch}.rope.dimension_count", U32, hd)
    expect(f"{arch}.attention.layer_norm_rms_epsilon", F32, np.float32(config["norm_eps"]))
    expect(f"{arch}.rope.freq_base", F32, np.float32(config["rope_base"]))
    b2u = {b: c for c, b in bytes_to_unicode().items()}
    expect("tokenizer.ggml.model", STR, b"gpt2")
    expect("tokenizer.ggml.tokens", STRS, [b2u[i].encode() for i in range(256)])
    expect("tokenizer.ggml.token_type", I32S, [1] * 256)
    expect("tokenizer.ggml.merges", STRS, [])
    expect("tokenizer.ggml.add_bos_token", BOOL, False)
    expect("tokenizer.ggml.add_eos_token", BOOL, False)
    expect("tokenizer.ggml.bos_token_id", U32)
    expect("tokenizer.ggml.eos_token_id", U32)

    align = 32
    data_start = (head_end + align - 1) // align * align
    if any(raw[head_end:data_start]):
        fail("the padding before the data is not zeros")
    seen, end = set(), 0
    for name, ne, t, off in tensors:
        if t not in GGML:
            fail(f"{name}: type {t}")
            continue
        kind, bb, bv = GGML[t]
        n = int(np.prod(ne))
        nbytes = n // bv * bb
        if off % align:
            fail(f"{name}: offset {off} not a multiple of {align}")
        if off < end:
            fail(f"{name}: offset {off} overlaps the previous tensor (ends at {end})")
        end = off + nbytes
        if data_start + end > len(raw):
            fail(f"{name}: data past the end of the file")
            continue
        hf = hf_name(name)
        if hf not in params:
            fail(f"{name}: no checkpoint tensor {hf}")
            continue
        seen.add(hf)
        ref = params[hf].astype(np.float32)
        if list(ne) != list(reversed(ref.shape)):
            fail(f"{name}: ne {ne}, checkpoint shape {list(ref.shape)}")
            continue
        if ".attn_q." in name or ".attn_k." in name:
            ref = permute(ref, H)
        want = "f32" if ref.ndim == 1 else want_type
        if want == "q8_0" and ne[0] % 32:
            want = "f16"
        if kind != want:
            fail(f"{name}: {kind}, expected {want}")
            continue
        got, blocks = decode(kind, raw[data_start + off:data_start + end], n)
        x = ref.reshape(-1)
        if kind == "f32" and got.tobytes() != x.tobytes():
            fail(f"{name}: f32 values differ from the checkpoint")
        if kind == "f16" and got.tobytes() != x.astype(np.float16).astype(np.float32).tobytes():
            fail(f"{name}: f16 values are not the checkpoint's rounded to float16")
        if kind == "q8_0":
            xb = x.reshape(-1, 32)
            d = (np.abs(xb).max(axis=1) / np.float32(127)).astype(np.float32)
            if blocks["d"].tobytes() != d.astype(np.float16).tobytes():
                fail(f"{name}: q8_0 scales are not fp16(max|x| / 127)")
            err = np.abs(got.reshape(-1, 32) - xb).max(axis=1)
            tol = blocks["d"].astype(np.float32) * 0.5 + np.abs(d - blocks["d"].astype(np.float32)) * 127 + 1e-7
            if (err > tol).any():
                fail(f"{name}: q8_0 values off by more than half a step")
    if data_start + end > len(raw):
        fail("the file ends before its last tensor")
    missing = set(params) - seen
    if missing:
        fail(f"checkpoint tensors not in the file: {sorted(missing)}")
    if config["tie_embeddings"] != ("lm_head.weight" not in seen):
        fail("tied/untied output does not match the checkpoint")
    print(f"{os.path.basename(path)}: {arch}, {want_type}, {len(tensors)} tensors, {len(kv)} keys, "
          f"{len(raw)} bytes: {'FAIL' if problems else 'ok'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
