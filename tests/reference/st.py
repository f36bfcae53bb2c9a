"""A minimal safetensors reader and writer in plain Python + numpy, written
from the format description (https://huggingface.co/docs/safetensors), so the
reference checks do not depend on the `safetensors` package and double as an
interoperability test of the C writer and reader."""
import json
import struct

import numpy as np

DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4",
    "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?",
}


def entries(path):
    """Returns ([(name, header entry, its bytes)] in header order, metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    return [(name, info, data[info["data_offsets"][0]:info["data_offsets"][1]]) for name, info in header.items()], meta


def load(path):
    """Returns ({name: ndarray}, metadata dict)."""
    items, meta = entries(path)
    out = {}
    for name, info, data in items:
        arr = np.frombuffer(data, dtype=DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).copy()
    return out, meta


def save(path, tensors, metadata=None):
    """tensors: {name: ndarray} (float32, float64, int64, int32, uint8...)."""
    names = {np.dtype(v): k for k, v in DTYPES.items()}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, arr in tensors.items():
        arr = np.asarray(arr)  # (ascontiguousarray would make 0-d arrays 1-d)
        code = names[np.dtype(arr.dtype).newbyteorder("=")]
        b = arr.astype(DTYPES[code]).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
