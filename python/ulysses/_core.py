# SPDX-License-Identifier: Apache-2.0
"""attention, attention_backward, shard and check: thin calls into
libulysses (the blocked kernel, the plan layer's layout, the checker)."""

import ctypes
import json

import numpy as np

from . import _lib
from ._lib import AttnDesc, SpPlan, Layout, RankPart, CheckProblem, CheckRank, CheckReport
from ._tensors import to_numpy, to_bshd, from_bshd, check_layout, like, elem_name

_DTYPES = {"f32": (np.float32, _lib.ULY_F32), "float32": (np.float32, _lib.ULY_F32),
           "f64": (np.float64, _lib.ULY_F64), "float64": (np.float64, _lib.ULY_F64)}


def _ptr(a, ctype=ctypes.c_void_p):
    return a.ctypes.data_as(ctype) if a is not None else None


def _compute_dtype(dtype, q):
    if dtype is None:
        return "f64" if elem_name(q) == "f64" else "f32"
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in _DTYPES:
        raise ValueError("dtype %r: the kernel computes in f32 or f64" % (dtype,))
    return "f64" if "64" in name else "f32"


def _offsets(docs, cu_seqlens, B, N):
    """Document offsets (B, D+1) int64 from docs ((B, D+1) or (D+1,)) or
    cu_seqlens ((D+1,), packed tokens); None without documents."""
    if docs is not None and cu_seqlens is not None:
        raise ValueError("docs and cu_seqlens both give the documents: use one")
    src, name = (docs, "docs") if docs is not None else (cu_seqlens, "cu_seqlens")
    if src is None:
        return None, 0
    off = to_numpy(src)
    if off.dtype.kind not in "iu":
        raise ValueError("%s: expected integer offsets, got %s" % (name, off.dtype))
    off = off.astype(np.int64)
    if off.ndim == 1:
        off = np.tile(off, (B, 1))
    if off.ndim != 2 or off.shape[0] != B or off.shape[1] < 2:
        raise ValueError("%s has shape %s, expected (D+1,) or (B, D+1) with B = %d"
                         % (name, tuple(off.shape), B))
    if np.any(off[:, 0] != 0) or np.any(off[:, -1] != N) or np.any(np.diff(off, axis=1) < 0):
        raise ValueError("%s: offsets must start at 0, not decrease and end at the sequence "
                         "length %d" % (name, N))
    return np.ascontiguousarray(off), off.shape[1] - 1


def _desc(B, N, H, Hkv, d, causal, window, scale, dt, off, D):
    a = AttnDesc()
    a.batch, a.seq, a.heads, a.kv_heads, a.head_dim = B, N, H, Hkv, d
    a.causal = 1 if causal else 0
    a.window = int(window or 0)
    a.scale = float(scale or 0.0)
    a.dtype = dt
    a.doc_offsets = _ptr(off, _lib.P_i64) if off is not None else None
    a.docs = D
    return a


class _Problem:
    """The inputs of one attention call, in bshd and the compute type."""

    def __init__(self, q, k, v, causal, window, cu_seqlens, docs, scale, layout, dtype):
        check_layout(layout)
        self.layout = layout
        self.ref = q
        self.in_elem = elem_name(q)
        self.cname = _compute_dtype(dtype, q)
        npdt, self.dt = _DTYPES[self.cname]
        qa = to_bshd(to_numpy(q, npdt), layout, "q")
        ka = to_bshd(to_numpy(k, npdt), layout, "k")
        va = to_bshd(to_numpy(v, npdt), layout, "v")
        B, N, H, d = qa.shape
        if ka.shape != va.shape:
            raise ValueError("k has shape %s and v %s in layout %s: they must agree"
                             % (tuple(k.shape), tuple(v.shape), layout))
        if ka.shape[0] != B or ka.shape[1] != N or ka.shape[3] != d:
            raise ValueError("k has shape %s in layout %s, expected the batch, sequence and head_dim "
                             "of q %s" % (tuple(k.shape), layout, tuple(q.shape)))
        Hkv = ka.shape[2]
        if Hkv == 0 or H % Hkv:
            raise ValueError("q has %d heads and k %d in layout %s: the query heads must be a multiple "
                             "of the KV heads" % (H, Hkv, layout))
        self.B, self.N, self.H, self.Hkv, self.d = B, N, H, Hkv, d
        self.q, self.k, self.v = (np.ascontiguousarray(x) for x in (qa, ka, va))
        self.npdt = npdt
        self.off, D = _offsets(docs, cu_seqlens, B, N)
        self.desc = _desc(B, N, H, Hkv, d, causal, window, scale, self.dt, self.off, D)
        _lib.check_status(_lib.fn("uly_attn_desc_check")(ctypes.byref(self.desc)), "attention")

    def lse_in(self, lse, name="lse"):
        a = to_numpy(lse, self.npdt)
        want = (self.H, self.N) if self.layout == "thd" else (self.B, self.H, self.N)
        if a.shape != want:
            raise ValueError("%s has shape %s, expected %s in layout %s"
                             % (name, tuple(a.shape), want, self.layout))
        return np.ascontiguousarray(a.reshape(self.B, self.H, self.N))

    def lse_out(self, lse):
        return lse[0] if self.layout == "thd" else lse

    def out(self, a, keep):
        return like(self.ref, from_bshd(a, self.layout), keep, self.in_elem)


def attention(q, k, v, *, causal=False, window=0, cu_seqlens=None, docs=None, scale=None,
              layout="bshd", dtype=None, keep_dtype=False):
    """Attention forward by libulysses's blocked kernel (uly_attn_fwd).

    q (B, N, H, d), k and v (B, N, Hkv, d) in layout "bshd"; (B, H, N, d) in
    "bhsd"; (T, H, d) in "thd" (one row of packed tokens, documents from
    cu_seqlens).  Returns (o, lse): o in q's layout, lse (B, H, N) ((H, T) in
    thd), the natural log of each row's sum of exponentials of the scaled
    scores.  dtype: "f32" or "f64" (default f64 for float64 inputs, else
    f32); keep_dtype returns o in the input's element type.
    """
    pb = _Problem(q, k, v, causal, window, cu_seqlens, docs, scale, layout, dtype)
    o = np.empty((pb.B, pb.N, pb.H, pb.d), pb.npdt)
    lse = np.empty((pb.B, pb.H, pb.N), pb.npdt)
    st = _lib.fn("uly_attn_fwd")(ctypes.byref(pb.desc), None, _ptr(pb.q), _ptr(pb.k), _ptr(pb.v),
                                 _ptr(o), _ptr(lse))
    _lib.check_status(st, "attention")
    return pb.out(o, keep_dtype), like(pb.ref, pb.lse_out(lse), False, pb.in_elem)


def attention_backward(q, k, v, o, lse, do, *, causal=False, window=0, cu_seqlens=None, docs=None,
                       scale=None, layout="bshd", dtype=None, keep_dtype=False):
    """Attention backward by uly_attn_bwd from the forward's o and lse and
    the output gradient do; returns (dq, dk, dv) in the layout of q, k, v."""
    pb = _Problem(q, k, v, causal, window, cu_seqlens, docs, scale, layout, dtype)
    oa = to_bshd(to_numpy(o, pb.npdt), layout, "o")
    da = to_bshd(to_numpy(do, pb.npdt), layout, "do")
    for name, a in (("o", oa), ("do", da)):
        if a.shape != pb.q.shape:
            raise ValueError("%s has shape %s in layout %s, expected q's shape" % (name, tuple(a.shape), layout))
    oa, da = np.ascontiguousarray(oa), np.ascontiguousarray(da)
    la = pb.lse_in(lse)
    dq = np.empty_like(pb.q)
    dk = np.empty_like(pb.k)
    dv = np.empty_like(pb.v)
    st = _lib.fn("uly_attn_bwd")(ctypes.byref(pb.desc), None, _ptr(pb.q), _ptr(pb.k), _ptr(pb.v),
                                 _ptr(oa), _ptr(la), _ptr(da), _ptr(dq), _ptr(dk), _ptr(dv))
    _lib.check_status(st, "attention_backward")
    return tuple(pb.out(x, keep_dtype) for x in (dq, dk, dv))


# ------------------------------------------------------------------ plan

def _method(method):
    m = ctypes.c_int()
    st = _lib.fn("uly_method_parse")(str(method).encode(), ctypes.byref(m))
    _lib.check_status(st, "method %r" % (method,))
    return m.value


def _placement(placement):
    p = ctypes.c_int()
    st = _lib.fn("uly_placement_parse")(str(placement).encode(), ctypes.byref(p))
    _lib.check_status(st, "placement %r" % (placement,))
    return p.value


def _plan(method, P, H, ulysses_degree, placement):
    m = _method(method)
    U = int(ulysses_degree or 0)
    if U == 0 and _lib.fn("uly_method_name")(m) == b"usp":
        U = _lib.fn("uly_plan_usp_degree")(int(H), int(P))
    plan = SpPlan()
    st = _lib.fn("uly_sp_plan_init")(ctypes.byref(plan), m, int(P), U, _placement(placement))
    _lib.check_status(st, "plan")
    return plan


class Shard:
    """What one rank holds under a method (the plan layer's uly_layout_part).

    tokens: global token indices of the rank's sequence shard, in row order
    (numpy int64); segments: [(begin, count), ...] the same as ranges; heads,
    kv_heads: the query and KV heads the rank computes after the method's
    all-to-all (all heads when the method has none); group_tokens: rows of
    the all-to-all's sequence; u, j: group member and ring position."""

    def __init__(self, part, method, P, rank):
        self.method, self.P, self.rank = method, P, rank
        self.u, self.j = part.u, part.j
        self.segments = [(int(part.tok_begin[s]), int(part.tok_count[s])) for s in range(part.nseg)]
        self.tokens = np.concatenate([np.arange(b, b + c, dtype=np.int64) for b, c in self.segments]) \
            if self.segments else np.zeros(0, np.int64)
        self.group_tokens = int(part.group_tokens)
        self.heads = np.arange(part.head_begin, part.head_begin + part.head_count, dtype=np.int64)
        self.kv_heads = np.arange(part.kv_begin, part.kv_begin + part.kv_count, dtype=np.int64)

    def __getitem__(self, key):  # dict-style access
        return getattr(self, key)

    def __repr__(self):
        return ("Shard(method=%r, rank=%d of %d, segments=%s, heads=%d-%d, kv_heads=%d-%d)"
                % (self.method, self.rank, self.P, self.segments, self.heads[0] if len(self.heads) else 0,
                   self.heads[-1] if len(self.heads) else -1, self.kv_heads[0] if len(self.kv_heads) else 0,
                   self.kv_heads[-1] if len(self.kv_heads) else -1))


def shard(method, P, rank, seq, heads=1, kv_heads=None, ulysses_degree=0, placement="ulysses-inner"):
    """The tokens and heads rank `rank` of P holds under `method` for a
    sequence of `seq` tokens and `heads` query heads (`kv_heads` KV heads,
    default heads), from the library's plan layer (one source: the checker
    and the library's own methods use the same map)."""
    if not 0 <= int(rank) < int(P):
        raise ValueError("rank %d: expected 0..%d" % (rank, int(P) - 1))
    Hkv = heads if kv_heads is None else kv_heads
    plan = _plan(method, P, heads, ulysses_degree, placement)
    a = _desc(1, int(seq), int(heads), int(Hkv), 1, 0, 0, 0.0, _lib.ULY_F64, None, 0)
    L = Layout()
    st = _lib.fn("uly_layout_init")(ctypes.byref(L), ctypes.byref(a), ctypes.byref(plan))
    _lib.check_status(st, "shard")
    part = RankPart()
    _lib.fn("uly_layout_part")(ctypes.byref(L), int(rank), ctypes.byref(part))
    return Shard(part, method, int(P), int(rank))


# ----------------------------------------------------------------- check

_CHECK_TENSORS = ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv")
_ALIASES = {"dout": "do", "out": "o"}


def _elem(dtype, q):
    name = dtype if dtype is not None else elem_name(q)
    e = ctypes.c_int()
    st = _lib.fn("uly_elem_parse")(str(name).encode(), ctypes.byref(e))
    _lib.check_status(st, "dtype %r" % (name,))
    return e.value


def check(method, shards, *, causal=False, window=0, docs=None, cu_seqlens=None, scale=None,
          layout="bshd", dtype=None, ulysses_degree=0, placement="ulysses-inner", max_imbalance=0.0,
          atol_scale=0.0, lse_plan=False):
    """Check what P ranks computed against the float64 reference
    (uly_check_run) and return the report as a dict (the same JSON as
    `ulysses check --json`).

    shards: one dict per rank with q, k, v and any of o, lse, do, dq, dk, dv
    (arrays or tensors in `layout`), and optionally tokens (the rank's global
    token indices, when the framework's shard map is not the method's).
    dtype: the framework's compute type, which sets the tolerances (default:
    q's element type).  lse_plan: the LSE is in the method's own layout
    (uly_plan_lse_layout) rather than over the rank's tokens."""
    check_layout(layout)
    if not shards:
        raise ValueError("check: no shards")
    P = len(shards)
    ranks = (CheckRank * P)()
    keep = []
    B = H = Hkv = d = None
    N = 0
    q0 = None
    for r, sh in enumerate(shards):
        t = {_ALIASES.get(k, k): x for k, x in sh.items()}
        unknown = sorted(set(t) - set(_CHECK_TENSORS) - {"tokens"})
        if unknown:
            raise ValueError("rank %d: unknown tensor %s (expected %s, tokens)"
                             % (r, ", ".join(unknown), ", ".join(_CHECK_TENSORS)))
        for need in ("q", "k", "v"):
            if need not in t:
                raise ValueError("rank %d: tensor %s missing" % (r, need))
        if q0 is None:
            q0 = t["q"]
        conv = {}
        for name in _CHECK_TENSORS:
            if name not in t or t[name] is None:
                continue
            a = to_numpy(t[name], np.float64)
            if name == "lse":
                conv[name] = np.ascontiguousarray(a).ravel()
                continue
            conv[name] = np.ascontiguousarray(to_bshd(a, layout, "rank %d: %s" % (r, name)))
        qb, kb = conv["q"], conv["k"]
        if B is None:
            B, H, d = qb.shape[0], qb.shape[2], qb.shape[3]
            Hkv = kb.shape[2]
        if qb.shape[0] != B or qb.shape[2] != H or qb.shape[3] != d or kb.shape[2] != Hkv:
            raise ValueError("rank %d: q has shape %s and k %s, rank 0 had q (B, n, H, d) = (%d, n, %d, %d) "
                             "and %d KV heads (layout %s)" % (r, tuple(t["q"].shape), tuple(t["k"].shape),
                                                              B, H, d, Hkv, layout))
        for name in ("k", "v", "o", "do", "dq", "dk", "dv"):
            if name in conv and conv[name].shape[:2] != qb.shape[:2]:
                raise ValueError("rank %d: %s has shape %s, q %s: the batch and rows must agree (layout %s)"
                                 % (r, name, tuple(t[name].shape), tuple(t["q"].shape), layout))
        rows = qb.shape[1]
        N += rows
        R = ranks[r]
        R.rows = rows
        if "tokens" in t and t["tokens"] is not None:
            tok = np.ascontiguousarray(to_numpy(t["tokens"]).astype(np.int64).ravel())
            if tok.shape[0] != rows:
                raise ValueError("rank %d: tokens has %d entries for %d rows" % (r, tok.shape[0], rows))
            conv["tokens"] = tok
            R.tokens = _ptr(tok, _lib.P_i64)
        for name, field in (("q", "q"), ("k", "k"), ("v", "v"), ("o", "o"), ("lse", "lse"),
                            ("do", "dout"), ("dq", "dq"), ("dk", "dk"), ("dv", "dv")):
            if name in conv:
                setattr(R, field, _ptr(conv[name], _lib.P_dbl))
        R.lse_plan = 1 if lse_plan else 0
        keep.append(conv)
    pb = CheckProblem()
    off, D = _offsets(docs, cu_seqlens, B, N)
    pb.a = _desc(B, N, H, Hkv, d, causal, window, scale, _lib.ULY_F64, off, D)
    pb.plan = _plan(method, P, H, ulysses_degree, placement)
    pb.elem = _elem(dtype, q0)
    pb.max_imbalance = float(max_imbalance or 0.0)
    pb.atol_scale = float(atol_scale or 0.0)
    rep = CheckReport()
    st = _lib.fn("uly_check_run")(ctypes.byref(pb), ranks, ctypes.byref(rep))
    try:
        _lib.check_status(st, "check")
        js = _lib.fn("uly_check_report_json")(ctypes.byref(pb), ctypes.byref(rep))
        if not js:
            raise MemoryError("check: the report could not be written")
        try:
            text = ctypes.string_at(js).decode("utf-8")
        finally:
            _lib.fn("uly_free")(js)
    finally:
        _lib.fn("uly_check_report_free")(ctypes.byref(rep))
    del keep
    return json.loads(text)
