# SPDX-License-Identifier: Apache-2.0
"""tests/spref/bugs.py -- the planted-bug suite: real sequence-parallel bugs
of the field, each planted in the simulated ranks of sp.py, with the public
report it comes from and the defect class the checker must name.

Each case builds the ranks' tensors and says how to check them: the method
the framework claims, the problem's masks and documents, which tensors the
framework dumps (and whether it dumps its own token map), the compute type,
and the expected defect with words the localisation must contain."""

import numpy as np

import sp


class Case:
    def __init__(self, name, report, method, P, problem, build, expect, where=(), names=None,
                 tokens=False, layout="bshd", dtype="f32", note="", ulysses_degree=0):
        self.name, self.report, self.method, self.P = name, report, method, P
        self.problem, self.build, self.expect, self.where = problem, build, expect, tuple(where)
        self.names = names or ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv")
        self.tokens, self.layout, self.dtype, self.note = tokens, layout, dtype, note
        self.ulysses_degree = ulysses_degree

    def check_args(self):
        """Keyword arguments of ulysses.check (the same options the CLI gets)."""
        pb = self.problem
        kw = dict(causal=pb.causal, window=pb.window, layout=self.layout, dtype=self.dtype)
        if pb.docs is not None:
            kw["docs"] = pb.docs
        if self.ulysses_degree:
            kw["ulysses_degree"] = self.ulysses_degree
        return kw

    def cli_args(self):
        pb = self.problem
        a = ["--method", self.method, "--layout", self.layout, "--dtype", self.dtype]
        if pb.causal:
            a.append("--causal")
        if pb.window:
            a += ["--window", str(pb.window)]
        if pb.docs is not None:
            a += ["--doc-lens", ",".join(str(int(x)) for x in np.diff(pb.docs))]
        if self.ulysses_degree:
            a += ["--ulysses-degree", str(self.ulysses_degree)]
        return a


# The problems (small: N <= 301, H <= 12, d = 16, P <= 4).
def causal_gqa(**kw):
    return sp.Problem(1, 128, 4, 2, 16, causal=True, seed=kw.pop("seed", 1), **kw)


def head_tail_document_major(docs, P):
    """PyTorch's _PerDocumentHeadTailLoadBalancer before PR #189902: each
    document cut into 2P chunks, rank j's pair (j, 2P-1-j), the rearranged
    indices laid out document-major (all of document 0's pairs, then
    document 1's...), then a contiguous cut into P shards (torch.chunk).
    A valid permutation -- the numbers stay right -- but with mixed lengths
    the cuts fall inside documents and a rank gets a document's whole causal
    tail."""
    order = []
    for b, e in zip(docs[:-1], docs[1:]):
        L = e - b
        edges = [b + (L * c) // (2 * P) for c in range(2 * P + 1)]
        for j in range(P):
            order += list(range(edges[j], edges[j + 1])) + list(range(edges[2 * P - 1 - j], edges[2 * P - j]))
    order = np.asarray(order, np.int64)
    n = len(order) // P
    return [order[r * n:(r + 1) * n] for r in range(P)]


def swap_chunks(ranks, r, P, N):
    """Rank r's output rows put back in the wrong order: its zigzag chunks
    r and 2P-1-r exchanged (equal chunk sizes), in every query-side output."""
    c = N // (2 * P)
    t = ranks[r]
    for n in ("o", "dq"):
        t[n] = np.concatenate([t[n][:, c:], t[n][:, :c]], axis=1)
    t["lse"] = np.concatenate([t["lse"][:, :, c:], t["lse"][:, :, :c]], axis=2)
    return ranks


def gqa_padded_separately(H, Hkv, P):
    """vllm-omni PR #5716's head padding: the query heads padded to a
    multiple of the SP degree (8 -> 9) and the KV heads too (2 -> 3, the
    padding a copy of the last one), the group size taken from the padded
    counts (9 / 3 = 3 instead of 8 / 2 = 4).  The KV head each real query
    head then reads."""
    Hp = -(-H // P) * P
    Hkvp = -(-Hkv // P) * P
    g = Hp // Hkvp
    return [min(h // g, Hkv - 1) for h in range(H)]   # padded KV heads copy the last real one


def cases():
    P = 4
    out = []
    pb = causal_gqa()
    out.append(Case("zeroed kernel output", "TransformerEngine PR #3536", "ring", P, pb,
                    lambda: sp.ring_sp(pb, P, "ring", zero_kernel=True), "zero-output", ["every rank", "O is exactly zero"],
                    names=("q", "k", "v", "o", "lse"),
                    note="the attention kernel returns zeros; the CP test compared against the same backend"))
    pb2 = sp.Problem(1, 128, 4, 2, 16, causal=False, seed=2)
    out.append(Case("stale K/V in ring backward", "NVIDIA-NeMo/Automodel PR #3157 (diffusers #14265)", "ring", P,
                    pb2, lambda: sp.ring_sp(pb2, P, "ring", stale_kv_bwd=True), "backward", ["every rank", "O and LSE right"],
                    note="every backward step recomputes against the K/V saved at step 0"))
    pb3 = causal_gqa(seed=3)
    out.append(Case("a layer without SP", "NVIDIA-NeMo/Automodel #3507", "zigzag", P, pb3,
                    lambda: sp.ring_sp(pb3, P, "zigzag", own_shard_only=True), "no-sequence-parallelism",
                    ["every rank", "own tokens only"],
                    note="the layer runs plain attention on each rank's shard"))
    pb4 = sp.Problem(1, 128, 12, 12, 16, causal=True, seed=4)
    split = [np.arange(0, 4), np.arange(4, 8), np.arange(8, 12), np.arange(0)]
    out.append(Case("[4,4,4,0] head split", "DeepSpeed PR #8316", "ulysses", P, pb4,
                    lambda: sp.ulysses_sp(pb4, P, head_split=split), "head-split", ["heads 3-11"],
                    note="12 heads on SP 4 split against a stale head count, [4,4,4,0] out and [3,3,3,3] back"))
    pb5 = sp.Problem(1, 96, 8, 2, 16, causal=True, seed=5)
    out.append(Case("broken GQA ratio (8/2 padded to 9/3)", "vllm-omni PR #5716", "ulysses", 3, pb5,
                    lambda: sp.ulysses_sp(pb5, 3, kv_of_head=gqa_padded_separately(8, 2, 3)), "kv-head",
                    ["head 3", "attended KV head 1, expected KV head 0"], note="Q and KV heads padded separately (28/7 -> 28/8 there)"))
    pb6 = causal_gqa(seed=6)
    out.append(Case("swapped zigzag chunk", "no single report: the chunk pairing (r, 2P-1-r) every zigzag implementation must undo",
                    "zigzag", P, pb6, lambda: swap_chunks(sp.ring_sp(pb6, P, "zigzag"), 1, P, 128), "chunk-swap",
                    ["rank 1, tokens 16-31 (zigzag chunk 1), 96-111 (zigzag chunk 6)"], note="rank 1 puts its chunks 1 and 6 back in the wrong order"))
    pb7 = causal_gqa(seed=7, docs=[0, 32, 96, 128])
    out.append(Case("documents crossing at a shard edge",
                    "NeMo Speech #15339, TransformerEngine #1930, pytorch #152261", "ring", P, pb7,
                    lambda: sp.ring_sp(pb7, P, "ring", local_docs=True), "document-mask", ["ranks 1-3"],
                    note="per-shard cu_seqlens: each rank numbers its documents from 0, so keys of another "
                         "document on another shard pass the mask"))
    docs8 = [0, 24, 128]
    pb8 = causal_gqa(seed=8, docs=docs8)
    toks8 = head_tail_document_major(docs8, P)
    out.append(Case("balancer right but imbalanced", "pytorch PR #189902", "zigzag", P, pb8,
                    lambda: sp.ring_sp(pb8, P, "zigzag", tokens=toks8), "imbalance", ["rank 2", "imbalanced"], tokens=True,
                    note="document-major head-tail indices cut contiguously; the dump carries the ranks' tokens"))
    pb9 = causal_gqa(seed=9)
    out.append(Case("bf16 partials in the merge", "zhuzilin/ring-flash-attention #42", "zigzag", P, pb9,
                    lambda: sp.ring_sp(pb9, P, "zigzag", bf16=True), "precision", ["every rank", "bf16"],
                    note="the running output rounded to bf16 after every ring step, checked as f32 compute"))
    return out


def correct_cases():
    """The same simulations without a bug: each must pass."""
    pb = causal_gqa(seed=11)
    pbd = sp.Problem(2, 150, 8, 2, 16, causal=True, docs=[0, 50, 150], seed=12)
    pbw = sp.Problem(1, 256, 4, 4, 16, causal=False, window=40, seed=13)
    return [
        Case("ulysses", "-", "ulysses", 4, pb, lambda: sp.ulysses_sp(pb, 4), "none"),
        Case("ring", "-", "ring", 4, pb, lambda: sp.ring_sp(pb, 4, "ring"), "none"),
        Case("zigzag", "-", "zigzag", 4, pb, lambda: sp.ring_sp(pb, 4, "zigzag"), "none", layout="bhsd"),
        Case("allgather", "-", "allgather", 3, pb, lambda: sp.allgather_sp(pb, 3), "none"),
        Case("zigzag, documents, B=2, N=150", "-", "zigzag", 4, pbd, lambda: sp.ring_sp(pbd, 4, "zigzag"), "none"),
        Case("ulysses, window", "-", "ulysses", 2, pbw, lambda: sp.ulysses_sp(pbw, 2), "none"),
        Case("ring, thd", "-", "ring", 4, pb, lambda: sp.ring_sp(pb, 4, "ring"), "none", layout="thd"),
        Case("usp 2 x 2, documents, B=2", "-", "usp", 4, pbd, lambda: sp.usp_sp(pbd, 4, 2), "none",
             ulysses_degree=2),
    ]


# ------------------------------------------------------------ the data pipeline

def data_pipeline(P, N, docs, roll_per_shard=False, seed=21):
    """An SP data pipeline on zigzag shards: token ids, next-token labels
    (ignore_index -100 at each document's last token), positions restarting
    per document, per-token losses and the token-weighted loss.  With
    roll_per_shard each rank builds its labels by rolling its own shard's ids
    (torch.roll(input_ids, -1) after sharding; Megatron-LM #673,
    NVIDIA-NeMo/Automodel PR #3544)."""
    import ulysses
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 50000, N).astype(np.int64)
    labels = np.full(N, -100, np.int64)
    pos = np.zeros(N, np.int64)
    for b, e in zip(docs[:-1], docs[1:]):
        labels[b:e - 1] = ids[b + 1:e]
        pos[b:e] = np.arange(e - b)
    loss = rng.uniform(0.5, 4.0, N).astype(np.float32)
    shards = [ulysses.shard("zigzag", P, r, N).tokens for r in range(P)]
    labs = [np.roll(ids[t], -1) if roll_per_shard else labels[t] for t in shards]
    # per-token losses where the rank's labels count, and their token-weighted mean
    losses = [np.where(lab != -100, loss[t], np.float32(0)) for t, lab in zip(shards, labs)]
    tot = sum(float(x.astype(np.float64).sum()) for x in losses)
    cnt = sum(int((lab != -100).sum()) for lab in labs)
    mean = np.array([tot / cnt], np.float32)
    return [dict(input_ids=ids[t][None], labels=lab[None], position_ids=pos[t][None], loss=x[None],
                 loss_reduced=mean) for t, lab, x in zip(shards, labs, losses)]
