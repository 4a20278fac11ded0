# SPDX-License-Identifier: Apache-2.0
"""tests/spref/sp.py -- sequence-parallel attention the way each method's
ranks compute it, simulated in one process with NumPy.

P ranks each hold a shard of the sequence (the library's shard map, asked
through ulysses.shard: the plan layer is the one source).  Collectives are
array reshuffles: an all-to-all moves head blocks between ranks (Ulysses),
a ring hop hands a K/V chunk and its gradient accumulators to the next rank
(ring, zigzag), an all-gather concatenates every rank's K/V and a
reduce-scatter sums the K/V gradients (allgather).  Ring steps merge their
partial outputs by the log-sum-exp (online softmax).  Everything is float64
(the dumps are float32), written for reading, not speed.

A rank's tensors are bshd: q, o, do, dq (B, n_r, H, d); k, v, dk, dv
(B, n_r, Hkv, d); lse (B, H, n_r).  Each method returns one dict per rank.
The planted bugs (bugs.py) are the keyword switches of these functions.
"""

import numpy as np

import ulysses


class Problem:
    """A global attention problem: q, k, v, do uniform in [-1, 1) (values
    exact in float32), the mask and the documents (offsets (D+1,) shared by
    every batch row, or None)."""

    def __init__(self, B, N, H, Hkv, d, causal=False, window=0, docs=None, seed=0):
        self.B, self.N, self.H, self.Hkv, self.d = B, N, H, Hkv, d
        self.causal, self.window = causal, window
        self.docs = None if docs is None else np.asarray(docs, np.int64)
        self.scale = 1.0 / np.sqrt(d)
        rng = np.random.default_rng(seed)
        u = lambda *s: rng.uniform(-1, 1, s).astype(np.float32).astype(np.float64)
        self.q, self.k, self.v = u(B, N, H, d), u(B, N, Hkv, d), u(B, N, Hkv, d)
        self.do = u(B, N, H, d)
        # document index of every token (all 0 without documents)
        self.doc_of = np.zeros(N, np.int64)
        if self.docs is not None:
            for i in range(len(self.docs) - 1):
                self.doc_of[self.docs[i]:self.docs[i + 1]] = i

    def visible(self, qpos, kpos, doc_of=None):
        """(nq, nk) mask of the query positions against the key positions;
        doc_of: the document ids the mask compares (default the true ones)."""
        doc_of = self.doc_of if doc_of is None else doc_of
        i, j = qpos[:, None], kpos[None, :]
        vis = doc_of[qpos][:, None] == doc_of[kpos][None, :]
        if self.causal:
            vis &= j <= i
        if self.window:
            vis &= (i - j < self.window) if self.causal else (np.abs(i - j) < self.window)
        return vis


def group_map(pb, heads):
    """The KV head each of the query heads `heads` reads (GQA: H / Hkv query
    heads per KV head)."""
    return np.asarray(heads) // (pb.H // pb.Hkv)


# ------------------------------------------------------------- one block

def block_fwd(pb, q, k, v, vis, kv_of):
    """Attention of q (B, nq, Hq, d) over k, v (B, nk, Hk, d) where vis
    (nq, nk) allows; query head h reads KV head kv_of[h].  Returns the
    partial (o, lse): o (B, nq, Hq, d), lse (B, Hq, nq); a row that sees no
    key gets o = 0, lse = -inf."""
    s = np.einsum("bihd,bjhd->bhij", q, k[:, :, kv_of]) * pb.scale
    s = np.where(vis[None, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(l > 0, m[..., 0] + np.log(np.where(l > 0, l, 1.0)), -np.inf)
        o = np.einsum("bhij,bjhd->bihd", p / np.where(l > 0, l, 1.0)[..., None], v[:, :, kv_of])
    return o, lse


def round_bf16(x):
    """Round to bfloat16 (nearest even) and back, as a GPU ring storing its
    partials in bf16 does."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return b.view(np.float32).astype(np.float64)


def merge(o, lse, o_t, lse_t, bf16=False):
    """The online-softmax merge of a running (o, lse) with one more partial:
    lse' = log(e^lse + e^lse_t), o' = e^(lse - lse') o + e^(lse_t - lse') o_t."""
    m = np.maximum(lse, lse_t)
    ms = np.where(np.isfinite(m), m, 0.0)
    w, w_t = np.exp(lse - ms), np.exp(lse_t - ms)
    tot = w + w_t
    with np.errstate(divide="ignore"):
        new = np.where(tot > 0, ms + np.log(np.where(tot > 0, tot, 1.0)), -np.inf)
    a = np.where(tot > 0, w / np.where(tot > 0, tot, 1.0), 0.0).transpose(0, 2, 1)[..., None]
    a_t = np.where(tot > 0, w_t / np.where(tot > 0, tot, 1.0), 0.0).transpose(0, 2, 1)[..., None]
    out = a * o + a_t * o_t
    return (round_bf16(out) if bf16 else out), new


def block_bwd(pb, q, k, v, do, lse, delta, vis, kv_of, Hk):
    """Gradients of one block from the final lse (B, Hq, nq) and
    delta = rowsum(do * o) (B, Hq, nq): dq (B, nq, Hq, d) and dk, dv
    (B, nk, Hk, d) summed over the query heads of each KV head."""
    s = np.einsum("bihd,bjhd->bhij", q, k[:, :, kv_of]) * pb.scale
    fin = np.isfinite(lse)[..., None]
    p = np.where(vis[None, None] & fin, np.exp(s - np.where(fin, lse[..., None], 0.0)), 0.0)
    dv_h = np.einsum("bhij,bihd->bjhd", p, do)
    dp = np.einsum("bihd,bjhd->bhij", do, v[:, :, kv_of])
    ds = p * (dp - delta[..., None])
    dq = np.einsum("bhij,bjhd->bihd", ds, k[:, :, kv_of]) * pb.scale
    dk_h = np.einsum("bhij,bihd->bjhd", ds, q) * pb.scale
    dk = np.zeros(k.shape[:2] + (Hk, pb.d))
    dv = np.zeros_like(dk)
    for h, g in enumerate(kv_of):
        dk[:, :, g] += dk_h[:, :, h]
        dv[:, :, g] += dv_h[:, :, h]
    return dq, dk, dv


def rows(pb, toks):
    """A rank's inputs: its token rows of q, k, v, do."""
    return {n: getattr(pb, n)[:, toks] for n in ("q", "k", "v", "do")}


# ----------------------------------------------------------------- Ulysses

def ulysses_sp(pb, P, head_split=None, kv_of_head=None):
    """DeepSpeed-Ulysses: sequence shards; an all-to-all trades them for head
    shards (every token, the rank's heads), local attention, and the inverse
    all-to-all back.  head_split: the query heads each rank computes (default
    the plan's); kv_of_head: the KV head each query head reads (default
    h // (H / Hkv))."""
    parts = [ulysses.shard("ulysses", P, r, pb.N, pb.H, pb.Hkv) for r in range(P)]
    toks = [p.tokens for p in parts]
    sh = [rows(pb, t) for t in toks]
    pos = np.concatenate(toks)                            # the all-to-all's row order
    split = head_split or [p.heads for p in parts]       # heads of the forward all-to-all
    back = [p.heads for p in parts]                       # heads of the way back
    kv_map = group_map(pb, np.arange(pb.H)) if kv_of_head is None else np.asarray(kv_of_head)
    vis = pb.visible(pos, pos)
    out = [dict(q=s["q"], k=s["k"], v=s["v"], do=s["do"], tokens=t,
                o=np.zeros_like(s["q"]), lse=np.zeros((pb.B, pb.H, len(t))),
                dq=np.zeros_like(s["q"]), dk=np.zeros_like(s["k"]), dv=np.zeros_like(s["v"]))
           for s, t in zip(sh, toks)]
    for r in range(P):
        hs = np.asarray(split[r], np.int64)
        kvs = np.unique(kv_map[hs]) if len(hs) else np.zeros(0, np.int64)
        kv_of = np.searchsorted(kvs, kv_map[hs])
        # all-to-all: every rank's rows of the heads hs (and of their KV heads)
        Q = np.concatenate([s["q"][:, :, hs] for s in sh], axis=1)
        K = np.concatenate([s["k"][:, :, kvs] for s in sh], axis=1)
        V = np.concatenate([s["v"][:, :, kvs] for s in sh], axis=1)
        dO = np.concatenate([s["do"][:, :, hs] for s in sh], axis=1)
        O, L = block_fwd(pb, Q, K, V, vis, kv_of)
        dQ, dK, dV = block_bwd(pb, Q, K, V, dO, L, (dO * O).sum(-1).transpose(0, 2, 1), vis, kv_of, len(kvs))
        # the inverse all-to-all: rank s gets its rows; the receiver reads as
        # many heads as its own plan says (back[r]), padding what is missing
        nb = len(back[r])
        take = min(nb, len(hs))
        start = 0
        for s in range(P):
            n = len(toks[s])
            sl = slice(start, start + n)
            start += n
            out[s]["o"][:, :, back[r][:take]] = O[:, sl, :take]
            out[s]["lse"][:, back[r][:take], :] = L[:, :take, sl]
            out[s]["dq"][:, :, back[r][:take]] = dQ[:, sl, :take]
            out[s]["dk"][:, :, kvs] += dK[:, sl]            # replicated KV heads: summed
            out[s]["dv"][:, :, kvs] += dV[:, sl]
    return out


# -------------------------------------------------------------------- ring

def ring_sp(pb, P, method="ring", tokens=None, bf16=False, zero_kernel=False, stale_kv_bwd=False,
            local_docs=False, own_shard_only=False):
    """Ring attention (method "ring": contiguous shards; "zigzag": chunks r
    and 2P-1-r): P steps; at step t rank r attends the K/V chunk of rank
    (r - t) mod P and merges the partial into its running (o, lse); after each
    step the chunk moves to rank r+1.  The backward runs the ring again, the
    chunk carrying its dK, dV accumulators, which come home after P hops.
    tokens: the ranks' token indices (a framework's own balancer) instead of
    the method's map.  The other switches are the planted bugs (bugs.py)."""
    toks = tokens or [ulysses.shard(method, P, r, pb.N, pb.H, pb.Hkv).tokens for r in range(P)]
    sh = [rows(pb, t) for t in toks]
    kv_of = group_map(pb, np.arange(pb.H))
    # document ids the mask compares: with local_docs each shard numbers its
    # own documents from 0 (per-shard cu_seqlens)
    doc_ids = []
    for t in toks:
        ids = pb.doc_of[t]
        doc_ids.append(ids - ids.min() if local_docs and len(ids) else ids)

    def vis(r, src):
        if local_docs:
            full = np.zeros(pb.N, np.int64)
            i, j = toks[r][:, None], toks[src][None, :]
            m = doc_ids[r][:, None] == doc_ids[src][None, :]
            return m & pb.visible(toks[r], toks[src], doc_of=full)
        return pb.visible(toks[r], toks[src])

    out = []
    for r in range(P):
        o = np.zeros_like(sh[r]["q"])
        lse = np.full((pb.B, pb.H, len(toks[r])), -np.inf)
        for t in range(1 if own_shard_only else P):
            src = (r - t) % P
            o_t, l_t = block_fwd(pb, sh[r]["q"], sh[src]["k"], sh[src]["v"], vis(r, src), kv_of)
            if zero_kernel:
                o_t = np.zeros_like(o_t)
            o, lse = merge(o, lse, o_t, l_t, bf16=bf16)
        out.append(dict(q=sh[r]["q"], k=sh[r]["k"], v=sh[r]["v"], do=sh[r]["do"], o=o, lse=lse,
                        tokens=toks[r]))
    # backward: buf[r] is the chunk rank r holds: (src, k, v, dk, dv)
    buf = [dict(src=r, k=sh[r]["k"], v=sh[r]["v"], dk=np.zeros_like(sh[r]["k"]),
                dv=np.zeros_like(sh[r]["v"])) for r in range(P)]
    dq = [np.zeros_like(s["q"]) for s in sh]
    delta = [(out[r]["do"] * out[r]["o"]).sum(-1).transpose(0, 2, 1) for r in range(P)]
    for t in range(1 if own_shard_only else P):
        for r in range(P):
            b = buf[r]
            # stale_kv_bwd: the step's K/V are the ones saved at step 0 (the local chunk)
            k, v = (sh[r]["k"], sh[r]["v"]) if stale_kv_bwd else (b["k"], b["v"])
            g_q, g_k, g_v = block_bwd(pb, sh[r]["q"], k, v, out[r]["do"], out[r]["lse"], delta[r],
                                      vis(r, b["src"]), kv_of, pb.Hkv)
            dq[r] += g_q
            b["dk"] = b["dk"] + g_k
            b["dv"] = b["dv"] + g_v
        if not own_shard_only:
            buf = [buf[(r - 1) % P] for r in range(P)]     # one hop: r-1 -> r
    for r in range(P):
        assert buf[r]["src"] == r                          # the gradients are home
        out[r].update(dq=dq[r], dk=buf[r]["dk"], dv=buf[r]["dv"])
    return out


# --------------------------------------------------------------- allgather

def allgather_sp(pb, P):
    """Llama 3's context parallelism: zigzag shards of the queries, K and V
    all-gathered (every rank holds every key), local attention; the K/V
    gradients reduce-scattered back to their owners."""
    toks = [ulysses.shard("allgather", P, r, pb.N, pb.H, pb.Hkv).tokens for r in range(P)]
    sh = [rows(pb, t) for t in toks]
    kv_of = group_map(pb, np.arange(pb.H))
    kpos = np.concatenate(toks)                                   # all-gather order
    K = np.concatenate([s["k"] for s in sh], axis=1)
    V = np.concatenate([s["v"] for s in sh], axis=1)
    out, dK, dV = [], np.zeros_like(K), np.zeros_like(V)
    for r in range(P):
        vis = pb.visible(toks[r], kpos)
        o, lse = block_fwd(pb, sh[r]["q"], K, V, vis, kv_of)
        delta = (sh[r]["do"] * o).sum(-1).transpose(0, 2, 1)
        g_q, g_k, g_v = block_bwd(pb, sh[r]["q"], K, V, sh[r]["do"], lse, delta, vis, kv_of, pb.Hkv)
        dK += g_k                                                 # the reduce-scatter's sum
        dV += g_v
        out.append(dict(q=sh[r]["q"], k=sh[r]["k"], v=sh[r]["v"], do=sh[r]["do"], o=o, lse=lse, dq=g_q,
                        tokens=toks[r]))
    start = 0
    for r in range(P):
        n = len(toks[r])
        out[r].update(dk=dK[:, start:start + n], dv=dV[:, start:start + n])
        start += n
    return out


# --------------------------------------------------------------------- USP

def usp_sp(pb, P, U):
    """USP (Ulysses inside each group of U ranks, a zigzag ring across the
    R = P / U groups): an all-to-all inside the group trades the members'
    token shards for head shards over the group's chunk pair; ring steps
    between the members of equal u (the same heads) of the R groups; the
    inverse all-to-all.  The K/V gradients travel with their chunk and
    come home after R hops; replicated KV heads are summed on the way back."""
    parts = [ulysses.shard("usp", P, r, pb.N, pb.H, pb.Hkv, ulysses_degree=U) for r in range(P)]
    R = P // U
    at = {(p.u, p.j): r for r, p in enumerate(parts)}
    sh = [rows(pb, p.tokens) for p in parts]
    kv_map = group_map(pb, np.arange(pb.H))
    # after the all-to-all: rank r holds its heads over its group's chunk (members in order)
    grp = {}
    for r, p in enumerate(parts):
        members = [at[(u, p.j)] for u in range(U)]
        hs = p.heads
        kvs = np.unique(kv_map[hs])
        grp[r] = dict(members=members, hs=hs, kvs=kvs, kv_of=np.searchsorted(kvs, kv_map[hs]),
                      pos=np.concatenate([parts[m].tokens for m in members]),
                      q=np.concatenate([sh[m]["q"][:, :, hs] for m in members], axis=1),
                      k=np.concatenate([sh[m]["k"][:, :, kvs] for m in members], axis=1),
                      v=np.concatenate([sh[m]["v"][:, :, kvs] for m in members], axis=1),
                      do=np.concatenate([sh[m]["do"][:, :, hs] for m in members], axis=1))
    for r, p in enumerate(parts):                   # the ring over the R groups
        g = grp[r]
        o = np.zeros_like(g["q"])
        lse = np.full((pb.B, len(g["hs"]), len(g["pos"])), -np.inf)
        for t in range(R):
            s_ = grp[at[(p.u, (p.j - t) % R)]]
            o_t, l_t = block_fwd(pb, g["q"], s_["k"], s_["v"], pb.visible(g["pos"], s_["pos"]), g["kv_of"])
            o, lse = merge(o, lse, o_t, l_t)
        g.update(o=o, lse=lse, delta=(g["do"] * o).sum(-1).transpose(0, 2, 1), dq=np.zeros_like(g["q"]))
    buf = {r: dict(src=r, dk=np.zeros_like(grp[r]["k"]), dv=np.zeros_like(grp[r]["v"])) for r in range(P)}
    for t in range(R):
        for r, p in enumerate(parts):
            g, b = grp[r], buf[r]
            s_ = grp[b["src"]]
            g_q, g_k, g_v = block_bwd(pb, g["q"], s_["k"], s_["v"], g["do"], g["lse"], g["delta"],
                                      pb.visible(g["pos"], s_["pos"]), g["kv_of"], len(g["kvs"]))
            g["dq"] += g_q
            b["dk"] = b["dk"] + g_k
            b["dv"] = b["dv"] + g_v
        buf = {r: buf[at[(p.u, (p.j - 1) % R)]] for r, p in enumerate(parts)}   # one hop along the ring
    out = []
    for r, p in enumerate(parts):                   # the inverse all-to-all to rank r's rows
        n = len(p.tokens)
        t = dict(q=sh[r]["q"], k=sh[r]["k"], v=sh[r]["v"], do=sh[r]["do"], tokens=p.tokens,
                 o=np.zeros_like(sh[r]["q"]), lse=np.zeros((pb.B, pb.H, n)), dq=np.zeros_like(sh[r]["q"]),
                 dk=np.zeros_like(sh[r]["k"]), dv=np.zeros_like(sh[r]["v"]))
        for m in grp[r]["members"]:
            g, b = grp[m], buf[m]
            assert b["src"] == m
            start = sum(len(parts[x].tokens) for x in g["members"][:g["members"].index(r)])
            sl = slice(start, start + n)
            t["o"][:, :, g["hs"]] = g["o"][:, sl]
            t["lse"][:, g["hs"], :] = g["lse"][:, :, sl]
            t["dq"][:, :, g["hs"]] = g["dq"][:, sl]
            t["dk"][:, :, g["kvs"]] += b["dk"][:, sl]
            t["dv"][:, :, g["kvs"]] += b["dv"][:, sl]
        out.append(t)
    return out


# ------------------------------------------------------------------- dumps

TO_LAYOUT = {"bshd": lambda x: x, "bhsd": lambda x: np.ascontiguousarray(x.transpose(0, 2, 1, 3)),
             "thd": lambda x: x[0]}


def dump(directory, ranks, layout="bshd", names=("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv"),
         tokens=False, dtype=np.float32):
    """Write each rank's tensors as a framework would: DIR/rank{r}.safetensors
    (ulysses.save_dump) in `layout` and `dtype`; the LSE (B, H, n) as is
    ((H, n) in thd).  tokens: also the rank's global token indices."""
    for r, t in enumerate(ranks):
        ts = {}
        for n in names:
            x = t[n]
            if n == "lse":
                ts[n] = (x[0] if layout == "thd" else x).astype(dtype)
            else:
                ts[n] = TO_LAYOUT[layout](x).astype(dtype)
        if tokens:
            ts["tokens"] = np.asarray(t["tokens"], np.int64)
        ulysses.save_dump(directory, r, overwrite=True, **ts)


def shards_of(ranks, layout="bshd", names=("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv"), tokens=False,
              dtype=np.float32):
    """The same tensors as dump() writes, for ulysses.check in-process."""
    out = []
    for t in ranks:
        s = {}
        for n in names:
            x = t[n]
            s[n] = ((x[0] if layout == "thd" else x) if n == "lse" else TO_LAYOUT[layout](x)).astype(dtype)
        if tokens:
            s["tokens"] = np.asarray(t["tokens"], np.int64)
        out.append(s)
    return out
