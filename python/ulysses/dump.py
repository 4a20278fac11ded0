# SPDX-License-Identifier: Apache-2.0
"""save_dump / load_dump: the per-rank dump files `ulysses check` reads,
DIR/rank{r}.safetensors, written and read in pure Python (no library).

The safetensors format: an 8-byte little-endian header length, a JSON
header {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
"__metadata__": {key: text}} padded with spaces to a multiple of 8, then
the tensors' bytes (little-endian, C order)."""

import json
import os
import struct
import tempfile

import numpy as np

from ._tensors import is_torch, _torch

_NP_TO_ST = {np.dtype("<f2"): "F16", np.dtype("<f4"): "F32", np.dtype("<f8"): "F64",
             np.dtype("<i4"): "I32", np.dtype("<i8"): "I64"}
_ST_TO_NP = {"F16": "<f2", "F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "BF16": "<u2"}


def _raw(name, x):
    """(safetensors dtype, shape, bytes) of an array or tensor."""
    if is_torch(x):
        t = x.detach().cpu().contiguous()
        if t.dtype == _torch.bfloat16:
            bits = t.view(_torch.int16).numpy().astype("<i2", copy=False)
            return "BF16", list(t.shape), bits.tobytes()
        if t.dtype.is_floating_point and t.dtype not in (_torch.float16, _torch.float32, _torch.float64):
            t = t.float()
        x = t.numpy()
    a = np.asarray(x)
    if a.dtype == np.bool_ or a.dtype.kind not in "fi":
        raise ValueError("save_dump: tensor %s has dtype %s (f16, f32, f64, i32, i64; bf16 as a torch tensor)"
                         % (name, a.dtype))
    le = a.dtype.newbyteorder("<")
    if le not in _NP_TO_ST:
        raise ValueError("save_dump: tensor %s has dtype %s (f16, f32, f64, i32, i64; bf16 as a torch tensor)"
                         % (name, a.dtype))
    a = np.ascontiguousarray(a, dtype=le)
    return _NP_TO_ST[le], list(a.shape), a.tobytes()


def save_dump(directory, rank, metadata=None, overwrite=False, **tensors):
    """Write DIR/rank{rank}.safetensors with the given tensors (q, k, v, o,
    lse, do, dq, dk, dv, tokens, input_ids, ...: numpy arrays or torch
    tensors; torch bf16 is stored as BF16) and optional metadata (a dict;
    values that are not text are stored as JSON).  The directory is made if
    needed; an existing file is kept (FileExistsError) unless overwrite.
    The file appears whole or not at all.  Returns its path."""
    if not tensors:
        raise ValueError("save_dump: no tensors")
    rank = int(rank)
    if rank < 0:
        raise ValueError("save_dump: rank %d is negative" % rank)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "rank%d.safetensors" % rank)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError("save_dump: %s exists (pass overwrite=True to replace it)" % path)
    header, blobs, pos = {}, [], 0
    for name, x in tensors.items():
        dt, shape, data = _raw(name, x)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    if metadata:
        header["__metadata__"] = {str(k): v if isinstance(v, str) else json.dumps(v)
                                  for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    fd, tmp = tempfile.mkstemp(prefix=".rank%d." % rank, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def load_dump(directory, rank=None, path=None):
    """Read DIR/rank{rank}.safetensors (or `path`) back: (tensors, metadata),
    tensors a dict of numpy arrays (BF16 widened to float32, exactly)."""
    if path is None:
        path = os.path.join(directory, "rank%d.safetensors" % int(rank))
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: truncated safetensors header" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError("%s: header length %d beyond the file (%d bytes)" % (path, n, len(data)))
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    body = data[8 + n:]
    out = {}
    for name, h in header.items():
        if h["dtype"] not in _ST_TO_NP:
            raise ValueError("%s: tensor %s has unknown dtype %s" % (path, name, h["dtype"]))
        b, e = h["data_offsets"]
        if not 0 <= b <= e <= len(body):
            raise ValueError("%s: tensor %s: data_offsets beyond the file" % (path, name))
        a = np.frombuffer(body[b:e], dtype=_ST_TO_NP[h["dtype"]]).reshape(h["shape"])
        if h["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.copy()
    return out, meta
