# SPDX-License-Identifier: Apache-2.0
"""Tensors in and out: numpy arrays and (when torch is importable) torch
tensors, the field's layouts, and the element type names."""

import numpy as np

try:  # torch is optional: only needed to pass torch tensors
    import torch as _torch
except Exception:  # pragma: no cover - depends on the machine
    _torch = None

LAYOUTS = ("bshd", "bhsd", "thd")
_NP_NAMES = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
             np.dtype(np.int32): "i32", np.dtype(np.int64): "i64"}


def is_torch(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def elem_name(x):
    """The element type of an array or tensor: f16, bf16, f32, f64, i32, i64."""
    if is_torch(x):
        names = {_torch.float16: "f16", _torch.bfloat16: "bf16", _torch.float32: "f32",
                 _torch.float64: "f64", _torch.int32: "i32", _torch.int64: "i64"}
        if x.dtype not in names:
            raise ValueError("unsupported torch dtype %s" % x.dtype)
        return names[x.dtype]
    a = np.asarray(x)
    if a.dtype not in _NP_NAMES:
        raise ValueError("unsupported dtype %s (f16, f32, f64, i32, i64; bf16 as a torch tensor)" % a.dtype)
    return _NP_NAMES[a.dtype]


def to_numpy(x, dtype=None):
    """A numpy copy/view of x on the CPU; bf16 tensors become float32
    (exact).  dtype: convert to this numpy dtype."""
    if is_torch(x):
        t = x.detach().cpu()
        if t.dtype == _torch.bfloat16 or (t.dtype.is_floating_point and t.dtype not in
                                          (_torch.float16, _torch.float32, _torch.float64)):
            t = t.float()
        a = t.numpy()
    else:
        a = np.asarray(x)
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    return a


def to_bshd(a, layout, name):
    """(B, n, H, d) view of a tensor given in `layout` (4-d for bshd and
    bhsd, 3-d (n, H, d) for thd)."""
    want = 3 if layout == "thd" else 4
    if a.ndim != want:
        shape = "(T, H, d)" if layout == "thd" else ("(B, N, H, d)" if layout == "bshd" else "(B, H, N, d)")
        raise ValueError("%s has shape %s: layout %s expects %d dimensions %s"
                         % (name, tuple(a.shape), layout, want, shape))
    if layout == "thd":
        return a[None]
    if layout == "bhsd":
        return a.transpose(0, 2, 1, 3)
    return a


def from_bshd(a, layout):
    """Back from (B, n, H, d) to `layout`."""
    if layout == "thd":
        return a[0]
    if layout == "bhsd":
        return np.ascontiguousarray(a.transpose(0, 2, 1, 3))
    return a


def check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError("layout %r: expected one of %s" % (layout, ", ".join(LAYOUTS)))


def like(ref, a, keep, in_elem):
    """Return a as ref's kind: a torch tensor when ref is one; in the input's
    element type when keep is true."""
    if keep and in_elem in ("f16", "bf16") and not is_torch(ref):
        a = a.astype(np.float16)
    if is_torch(ref):
        t = _torch.from_numpy(np.ascontiguousarray(a))
        if keep:
            t = t.to(ref.dtype)
        return t
    if keep and in_elem in ("f32", "f64"):
        a = a.astype(np.float32 if in_elem == "f32" else np.float64, copy=False)
    return a
