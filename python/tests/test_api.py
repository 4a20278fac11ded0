# SPDX-License-Identifier: Apache-2.0
"""The Python package against the library's own driver and against torch.

- ulysses.attention / attention_backward are bitwise equal to
  `ulysses attn --out/--dq/--dk/--dv --dtype f32` on three awkward shapes
  (uneven N, GQA with a window, packed documents); bhsd and thd (with
  cu_seqlens) give the same bits as bshd (with docs);
- within doc/kernels.md's fp32 bounds of a torch float64 autograd reference,
  and the f64 kernel within its 1e-11 / 1e-9 (where torch is importable);
- f16 inputs are computed in f32 and returned in f16 when asked;
- shard() is the plan layer's map: the tokens of the ranks cover 0..N-1 once,
  zigzag rank r holds chunks r and 2P-1-r, Ulysses ranks split the heads;
- save_dump writes safetensors that load_dump reads back exactly (f16, f32,
  f64, i32, i64, torch bf16), and never replaces a file unasked;
- bad input is a ValueError naming the tensor and the layout.
"""

import atexit
import os
import shutil
import sys
import tempfile

import numpy as np

import ulysses
from util import Failures, run

F = Failures()
W = tempfile.mkdtemp(prefix="uly-pytest-")
atexit.register(shutil.rmtree, W, True)

SHAPES = [
    # name, B, N, H, Hkv, d, causal, window, docs (offsets per row or None)
    ("uneven N", 1, 301, 4, 4, 16, True, 0, None),
    ("GQA 8/2, window", 2, 128, 8, 2, 32, True, 40, None),
    ("documents", 2, 200, 4, 2, 16, True, 0, np.array([[0, 50, 130, 200], [0, 7, 7, 200]], np.int64)),
]


def npy(name, a):
    path = os.path.join(W, name)
    np.save(path, a)
    return path


def bits_equal(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


rng = np.random.default_rng(26)
cases = []
for name, B, N, H, Hkv, d, causal, window, docs in SHAPES:
    q = rng.uniform(-1, 1, (B, N, H, d)).astype(np.float32)
    k = rng.uniform(-1, 1, (B, N, Hkv, d)).astype(np.float32)
    v = rng.uniform(-1, 1, (B, N, Hkv, d)).astype(np.float32)
    do = rng.uniform(-1, 1, (B, N, H, d)).astype(np.float32)
    kw = dict(causal=causal, window=window, docs=docs)
    o, lse = ulysses.attention(q, k, v, **kw)
    dq, dk, dv = ulysses.attention_backward(q, k, v, o, lse, do, **kw)
    F.ok(o.dtype == np.float32 and lse.shape == (B, H, N), "%s: o %s, lse %s" % (name, o.dtype, lse.shape))
    tag = name.replace(" ", "_").replace(",", "").replace("/", "_")
    args = ["attn", "--dtype", "f32", "--q", npy(tag + "_q.npy", q), "--k", npy(tag + "_k.npy", k),
            "--v", npy(tag + "_v.npy", v), "--dout", npy(tag + "_do.npy", do)]
    outs = {t: os.path.join(W, "%s_cli_%s.npy" % (tag, t)) for t in ("out", "dq", "dk", "dv")}
    for t, p in outs.items():
        args += ["--" + t, p]
    if causal:
        args.append("--causal")
    if window:
        args += ["--window", str(window)]
    if docs is not None:
        args += ["--docs", npy(tag + "_docs.npy", docs)]
    run(args + ["--repeat", "1", "--warmup", "0"])
    for t, mine in (("out", o), ("dq", dq), ("dk", dk), ("dv", dv)):
        F.ok(bits_equal(mine, np.load(outs[t])), "%s: %s not bitwise equal to ulysses attn --%s" % (name, t, t))
    print("%-18s B=%d N=%d H=%d Hkv=%d d=%d: O, dQ, dK, dV bitwise equal to ulysses attn" % (name, B, N, H, Hkv, d))
    # the same problem in the other layouts
    t4 = lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    o2, lse2 = ulysses.attention(t4(q), t4(k), t4(v), layout="bhsd", **kw)
    g2 = ulysses.attention_backward(t4(q), t4(k), t4(v), o2, lse2, t4(do), layout="bhsd", **kw)
    F.ok(bits_equal(o2, t4(o)) and bits_equal(lse2, lse) and
         all(bits_equal(a, t4(b)) for a, b in zip(g2, (dq, dk, dv))), "%s: bhsd differs from bshd" % name)
    if B == 1 or docs is not None:
        # thd: the batch rows packed one after the other, documents as cu_seqlens
        cu = [0]
        for b in range(B):
            rowdocs = docs[b] if docs is not None else np.array([0, N])
            cu += [int(x) + b * N for x in rowdocs[1:]]
        cu = np.array(cu, np.int64)
        pack = lambda x: np.ascontiguousarray(x.reshape(B * N, x.shape[2], x.shape[3]))
        o3, lse3 = ulysses.attention(pack(q), pack(k), pack(v), layout="thd", cu_seqlens=cu,
                                     causal=causal, window=window)
        o4, lse4 = ulysses.attention(pack(q)[None], pack(k)[None], pack(v)[None], docs=cu,
                                     causal=causal, window=window)
        F.ok(bits_equal(o3, o4[0]) and bits_equal(lse3, lse4[0]),
             "%s: thd with cu_seqlens differs from bshd with the same docs" % name)
        # and the packed rows are the rows attended apart (other tiling: not bitwise)
        F.ok(np.allclose(o3, pack(o), rtol=3e-5, atol=3e-6) and
             np.allclose(lse3, lse.transpose(1, 0, 2).reshape(H, B * N), rtol=3e-5, atol=3e-6),
             "%s: thd's packed rows differ from the rows attended apart" % name)
    cases.append((name, q, k, v, do, kw, o, lse, dq, dk, dv))

# ------------------------------------------------------------ torch float64
try:
    import torch
except Exception:
    torch = None
if torch is None:
    print("torch not importable: skipped the float64 autograd comparison")
else:
    torch.set_num_threads(1)

    def torch_ref(q, k, v, do, causal, window, docs):
        Q, K, V, dO = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v, do))
        B, N, H, d = q.shape
        g = H // k.shape[2]
        Kx, Vx = K.repeat_interleave(g, dim=2), V.repeat_interleave(g, dim=2)
        S = torch.einsum("bihd,bjhd->bhij", Q, Kx) / d ** 0.5
        i = torch.arange(N)[:, None]
        j = torch.arange(N)[None, :]
        vis = torch.ones(N, N, dtype=torch.bool)
        if causal:
            vis &= j <= i
        if window:
            vis &= (i - j < window) if causal else ((i - j).abs() < window)
        vis = vis.expand(B, N, N).clone()
        if docs is not None:
            for b in range(B):
                doc = torch.zeros(N, dtype=torch.long)
                for t in range(len(docs[b]) - 1):
                    doc[int(docs[b][t]):int(docs[b][t + 1])] = t
                vis[b] &= doc[:, None] == doc[None, :]
        S = S.masked_fill(~vis[:, None], float("-inf"))
        lse = torch.logsumexp(S, dim=-1)
        O = torch.einsum("bhij,bjhd->bihd", torch.softmax(S, dim=-1), Vx)
        O.backward(dO.detach())
        return [x.detach().numpy() for x in (O, lse, Q.grad, K.grad, V.grad)]

    for name, q, k, v, do, kw, o, lse, dq, dk, dv in cases:
        ref = torch_ref(q, k, v, do, kw["causal"], kw["window"], kw["docs"])
        o64, lse64 = ulysses.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), **kw)
        g64 = ulysses.attention_backward(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                         o64, lse64, do.astype(np.float64), **kw)
        worst = 0.0
        for tn, mine, mine64, r, (atol, rtol) in zip(
                ("O", "LSE", "dQ", "dK", "dV"), (o, lse, dq, dk, dv), (o64, lse64) + tuple(g64), ref,
                [(3e-6, 3e-5)] * 2 + [(2e-5, 2e-4)] * 3):
            use = np.abs(mine.astype(np.float64) - r) / (atol + rtol * np.abs(r))
            use64 = np.abs(mine64 - r) / (1e-11 + 1e-9 * np.abs(r))
            F.ok(np.all(np.isfinite(mine)) and use.max() <= 1, "%s: f32 %s off torch float64 (%.2f of the bound)"
                 % (name, tn, use.max()))
            F.ok(mine64.dtype == np.float64 and use64.max() <= 1, "%s: f64 %s off torch float64 (%.2f of the bound)"
                 % (name, tn, use64.max()))
            worst = max(worst, use.max())
        print("%-18s within doc/kernels.md's fp32 bounds of torch float64 (worst %.3f of the bound); f64 kernel "
              "within 1e-11 + 1e-9 |ref|" % (name, worst))
    # torch tensors in, torch tensors out; bf16 computed in f32
    name, q, k, v, do, kw, o, lse, dq, dk, dv = cases[0]
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    to, tl = ulysses.attention(tq, tk, tv, **kw)
    F.ok(isinstance(to, torch.Tensor) and bits_equal(to.numpy(), o), "torch f32 tensors: not the numpy bits")
    bq, bk, bv = (x.to(torch.bfloat16) for x in (tq, tk, tv))
    bo, _ = ulysses.attention(bq, bk, bv, keep_dtype=True, **kw)
    fo, _ = ulysses.attention(bq.float(), bk.float(), bv.float(), **kw)
    F.ok(bo.dtype == torch.bfloat16 and torch.equal(bo, fo.to(torch.bfloat16)),
         "torch bf16: not f32 on the widened inputs, rounded to bf16")
    print("torch tensors: f32 bitwise as numpy; bf16 computed in f32 and returned in bf16")

    # the dump hook of doc/check.md on a torch attention (bhsd), then the check of that dump
    def torch_attn(q, k, v):
        s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    HD = os.path.join(W, "hooked")
    attn = ulysses.dump_attention(torch_attn, HD, 0, metadata={"layer": 3})
    x = [torch.rand(1, 4, 96, 16, dtype=torch.float32, requires_grad=True) for _ in range(3)]
    out = attn(*x)
    (out * torch.linspace(-1, 1, 16)).sum().backward()
    got, meta = ulysses.load_dump(HD, 0)
    F.ok(sorted(got) == ["dk", "do", "dq", "dv", "k", "o", "q", "v"] and meta.get("layer") == "3",
         "dump_attention saved %s, metadata %s" % (sorted(got), meta))
    rep = ulysses.check("ring", [got], causal=True, layout="bhsd")
    F.ok(rep["verdict"] == "pass", "the hooked torch attention's dump fails the check: %s" % rep["summary"])
    got["dk"] = got["dk"] * 0.5
    rep = ulysses.check("ring", [got], causal=True, layout="bhsd")
    F.ok(rep["verdict"] == "fail" and rep["defect"].startswith("backward"),
         "a halved dK in the hooked dump: %s %s" % (rep["defect"], rep["summary"]))
    print("dump_attention: a torch attention's q, k, v, o, do, dq, dk, dv dumped (bhsd) and checked: pass; "
          "with dK halved: %s" % rep["defect"])

# ------------------------------------------------------------------ f16
name, q, k, v, do, kw, o, lse, dq, dk, dv = cases[1]
h = [x.astype(np.float16) for x in (q, k, v)]
oh, _ = ulysses.attention(*h, keep_dtype=True, **kw)
of, _ = ulysses.attention(*[x.astype(np.float32) for x in h], **kw)
F.ok(oh.dtype == np.float16 and bits_equal(oh, of.astype(np.float16)), "f16: not f32 rounded to f16")
o2, _ = ulysses.attention(*h, **kw)
F.ok(o2.dtype == np.float32, "f16 inputs without keep_dtype: expected f32 output, got %s" % o2.dtype)
print("f16 inputs: computed in f32, returned in f16 with keep_dtype")

# ----------------------------------------------------------------- shard
N, H, Hkv = 301, 8, 2
for method in ("ulysses", "ring", "zigzag", "allgather", "usp"):
    for P in (1, 2, 3, 4):
        parts = [ulysses.shard(method, P, r, seq=N, heads=H, kv_heads=Hkv) for r in range(P)]
        toks = np.concatenate([p.tokens for p in parts])
        F.ok(np.array_equal(np.sort(toks), np.arange(N)), "shard %s P=%d: tokens do not cover 0..N-1 once"
             % (method, P))
        if method in ("zigzag", "allgather"):
            # chunks of uly_split(N, 2P): rank r holds chunks r and 2P-1-r
            sizes = [N // (2 * P) + (c < N % (2 * P)) for c in range(2 * P)]
            starts = np.concatenate([[0], np.cumsum(sizes)])
            for r, p in enumerate(parts):
                want = np.concatenate([np.arange(starts[r], starts[r + 1]),
                                       np.arange(starts[2 * P - 1 - r], starts[2 * P - r])])
                F.ok(np.array_equal(p.tokens, want), "shard %s P=%d rank %d: not chunks %d and %d"
                     % (method, P, r, r, 2 * P - 1 - r))
        if method == "ulysses":
            heads = np.concatenate([p.heads for p in parts])
            F.ok(np.array_equal(heads, np.arange(H)), "shard ulysses P=%d: heads not split over the ranks" % P)
            for p in parts:
                F.ok(np.array_equal(p.kv_heads, np.unique(p.heads // (H // Hkv))),
                     "shard ulysses P=%d rank %d: KV heads %s for query heads %s" % (P, p.rank, p.kv_heads, p.heads))
        if method in ("ring", "zigzag", "allgather"):
            F.ok(all(np.array_equal(p.heads, np.arange(H)) for p in parts), "shard %s: every rank has every head" % method)
print("shard: tokens cover 0..N-1 once for every method and P = 1..4; zigzag chunks r and 2P-1-r; heads split")
try:
    ulysses.shard("nosuch", 4, 0, seq=10)
    F.ok(False, "shard: unknown method accepted")
except ValueError as e:
    F.ok("nosuch" in str(e), "shard: unknown method message %r" % str(e))

# ----------------------------------------------------------- save_dump
D = os.path.join(W, "dump")
tensors = dict(q=cases[0][1], lse=cases[0][7].astype(np.float64), h=cases[0][1].astype(np.float16),
               tokens=np.arange(5, dtype=np.int64), ids=np.arange(7, dtype=np.int32))
if torch is not None:
    tensors["b"] = torch.from_numpy(cases[0][1]).to(torch.bfloat16)
path = ulysses.save_dump(D, 3, metadata={"method": "zigzag", "causal": True}, **tensors)
F.ok(path.endswith("rank3.safetensors"), "save_dump: path %s" % path)
back, meta = ulysses.load_dump(D, 3)
for kname, x in tensors.items():
    want = x.float().numpy() if torch is not None and isinstance(x, torch.Tensor) else x
    F.ok(np.array_equal(back[kname], want) and back[kname].shape == tuple(want.shape),
         "save_dump round trip: %s differs" % kname)
F.ok(meta == {"method": "zigzag", "causal": "true"}, "save_dump metadata: %r" % meta)
# and with the library's reader (uly_tfile), as ulysses check reads it
import ctypes  # noqa: E402
from ulysses import _lib  # noqa: E402


class TInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("elem", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8), ("count", ctypes.c_size_t)]


L = _lib.lib()
L.uly_tfile_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
L.uly_tfile_count.argtypes = [ctypes.c_void_p]
L.uly_tfile_info.argtypes = [ctypes.c_void_p, ctypes.c_int]
L.uly_tfile_info.restype = ctypes.POINTER(TInfo)
L.uly_tfile_read_f64.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p]
L.uly_tfile_meta.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
L.uly_tfile_meta.restype = ctypes.c_char_p
L.uly_tfile_close.argtypes = [ctypes.c_void_p]
fh = ctypes.c_void_p()
F.ok(L.uly_tfile_open(path.encode(), ctypes.byref(fh)) == 0, "uly_tfile_open: %s" % _lib.last_error())
ST_ELEM = {"h": "f16", "q": "f32", "lse": "f64", "ids": "i32", "tokens": "i64", "b": "bf16"}
ELEMS = ["f16", "bf16", "f32", "f64", "i32", "i64"]
F.ok(L.uly_tfile_count(fh) == len(tensors), "uly_tfile_count: %d tensors" % L.uly_tfile_count(fh))
for i in range(L.uly_tfile_count(fh)):
    ti = L.uly_tfile_info(fh, i).contents
    nm = ti.name.decode()
    buf = np.empty(ti.count, np.float64)
    F.ok(L.uly_tfile_read_f64(fh, i, 0, ti.count, buf.ctypes.data) == 0, "uly_tfile_read_f64 %s" % nm)
    want = back[nm].astype(np.float64).ravel()
    F.ok(ELEMS[ti.elem] == ST_ELEM[nm] and tuple(ti.shape[:ti.ndim]) == back[nm].shape and
         np.array_equal(buf, want), "the library reads tensor %s differently (%s)" % (nm, ELEMS[ti.elem]))
F.ok(L.uly_tfile_meta(fh, b"method") == b"zigzag", "uly_tfile_meta method")
L.uly_tfile_close(fh)
with open(path, "rb") as f:
    raw = f.read()
F.ok(int.from_bytes(raw[:8], "little") % 8 == 0, "safetensors header not padded to 8 bytes")
try:
    ulysses.save_dump(D, 3, q=cases[0][1])
    F.ok(False, "save_dump replaced an existing file")
except FileExistsError:
    pass
print("save_dump: f16, f32, f64, i32, i64%s round trip exactly (load_dump and the library's uly_tfile); "
      "an existing file is kept"
      % (", torch bf16" if torch is not None else ""))

# ------------------------------------------------------------ bad input
q, k, v = cases[0][1], cases[0][2], cases[0][3]
for what, call, needle in [
        ("layout", lambda: ulysses.attention(q, k, v, layout="thd"), "layout thd"),
        ("kv heads", lambda: ulysses.attention(q, k[:, :, :3], v[:, :, :3]), "multiple of the KV heads"),
        ("k vs v", lambda: ulysses.attention(q, k, v[:, :100]), "must agree"),
        ("docs", lambda: ulysses.attention(q, k, v, docs=np.array([0, 10, 20])), "end at the sequence length"),
        ("dtype", lambda: ulysses.attention(q, k, v, dtype="f16"), "f32 or f64")]:
    try:
        call()
        F.ok(False, "bad input accepted: %s" % what)
    except ValueError as e:
        F.ok(needle in str(e), "bad input %s: message %r lacks %r" % (what, str(e), needle))
# check(): bad input is refused by the library with its message (a token held twice)
sh = [dict(q=q[:, :150], k=k[:, :150], v=v[:, :150], tokens=np.arange(150)),
      dict(q=q[:, 150:], k=k[:, 150:], v=v[:, 150:], tokens=np.arange(151))]
try:
    ulysses.check("ring", sh, causal=True)
    F.ok(False, "check: a token held twice accepted")
except ValueError as e:
    F.ok("token" in str(e), "check: the message %r does not name the token" % str(e))
    print("check, bad input: %s" % e)
print("bad input: ValueError naming the tensor and layout")
F.exit()
