# SPDX-License-Identifier: Apache-2.0
"""The training step of tests/bench_train.c in PyTorch (CPU, fp32), for the
ratio in doc/performance.md ("Training step, round three").  Not a test:
nothing depends on it, and it needs torch (Debian: python3-torch).

The same GPT-2 as src/train.c: learned positions, pre-LayerNorm blocks,
causal multi-head attention (the private SDPA math path of torch 1.13 when
present, else softmax(q k^T / sqrt(d)) v written out), GELU (tanh), tied
LM head, mean cross-entropy, then clip_grad_norm_ to 1 and AdamW (lr 1e-3,
betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on the matrices).  Threads:
torch.set_num_threads(--threads, default OMP_NUM_THREADS or 1).

    python3 tests/bench_train_torch.py [--layers L] [--channels C] [--heads H]
        [--seq N] [--vocab V] [--batch B] [--steps K] [--repeat R] [--threads T]

Prints the medians of R repetitions of K steps (after one warm-up step):
tokens/s and GFLOP/s by wall clock and by this process's CPU time, with the
FLOP count of tests/bench_train.c.
"""
import argparse
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.stderr.write("bench_train_torch: torch is not installed (Debian: apt-get install python3-torch)\n")
    sys.exit(77)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("layers", 4), ("channels", 256), ("heads", 8), ("seq", 1024), ("vocab", 256),
                          ("batch", 4), ("steps", 2), ("repeat", 3)):
        ap.add_argument("--" + name, type=int, default=default)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    a = ap.parse_args()
    if min(a.layers, a.channels, a.heads, a.seq, a.vocab, a.batch, a.steps, a.repeat, a.threads) < 1 or \
            a.channels % a.heads:
        sys.stderr.write("bench_train_torch: sizes must be positive, channels a multiple of heads\n")
        sys.exit(2)
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    L, C, H, N, V, B = a.layers, a.channels, a.heads, a.seq, a.vocab, a.batch
    d = C // H
    sdpa = getattr(F, "_scaled_dot_product_attention", None)

    def lin(o, i, std=0.02):
        return torch.nn.Parameter(torch.randn(o, i) * std)

    def zeros(n):
        return torch.nn.Parameter(torch.zeros(n))

    def ones(n):
        return torch.nn.Parameter(torch.ones(n))

    rstd = 0.02 / math.sqrt(2 * L)
    P = {"wte": lin(V, C), "wpe": lin(N, C), "lnf_w": ones(C), "lnf_b": zeros(C)}
    for l in range(L):
        P.update({f"ln1_w{l}": ones(C), f"ln1_b{l}": zeros(C), f"qkv_w{l}": lin(3 * C, C), f"qkv_b{l}": zeros(3 * C),
                  f"att_w{l}": lin(C, C, rstd), f"att_b{l}": zeros(C), f"ln2_w{l}": ones(C), f"ln2_b{l}": zeros(C),
                  f"fc_w{l}": lin(4 * C, C), f"fc_b{l}": zeros(4 * C), f"prj_w{l}": lin(C, 4 * C, rstd),
                  f"prj_b{l}": zeros(C)})
    decay = [p for k, p in P.items() if p.dim() == 2]
    other = [p for k, p in P.items() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    mask = torch.full((N, N), float("-inf")).triu(1)

    def attention(q, k, v):
        if sdpa is not None:
            r = sdpa(q, k, v, None, 0.0, False, True)  # mask, dropout, need_attn_weights, is_causal
            return r[0] if isinstance(r, tuple) else r
        s = q @ k.transpose(-2, -1) / math.sqrt(d) + mask
        return torch.softmax(s, dim=-1) @ v

    def model(tok):
        x = P["wte"][tok] + P["wpe"][torch.arange(N)]
        for l in range(L):
            h = F.layer_norm(x, (C,), P[f"ln1_w{l}"], P[f"ln1_b{l}"])
            q, k, v = F.linear(h, P[f"qkv_w{l}"], P[f"qkv_b{l}"]).split(C, dim=-1)
            q, k, v = (t.view(B, N, H, d).transpose(1, 2) for t in (q, k, v))
            y = attention(q, k, v).transpose(1, 2).reshape(B, N, C)
            x = x + F.linear(y, P[f"att_w{l}"], P[f"att_b{l}"])
            h = F.layer_norm(x, (C,), P[f"ln2_w{l}"], P[f"ln2_b{l}"])
            h = F.gelu(F.linear(h, P[f"fc_w{l}"], P[f"fc_b{l}"]), approximate="tanh")
            x = x + F.linear(h, P[f"prj_w{l}"], P[f"prj_b{l}"])
        x = F.layer_norm(x, (C,), P["lnf_w"], P["lnf_b"])
        return x @ P["wte"].t()

    data = torch.randint(0, V, (B, N + 1))
    tok, tgt = data[:, :N], data[:, 1:]

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(tok).reshape(-1, V), tgt.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(P.values()), 1.0)
        opt.step()
        return float(loss)

    np_ = sum(p.numel() for p in P.values())
    T = B * N
    flops = (3 * 2 * T * C * (3 * C + 9 * C) * L + 3 * 2 * T * C * V + 3.5 * 4 * d * H * B * N * (N + 1) / 2 * L
             + 12 * np_)
    step()
    wall, cpu = [], []
    for _ in range(a.repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.steps):
            step()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    mw, mc = statistics.median(wall), statistics.median(cpu)
    la = os.getloadavg()
    print(f"bench train (torch {torch.__version__}, {a.threads} thread{'s' if a.threads > 1 else ''}, "
          f"attention {'_scaled_dot_product_attention' if sdpa else 'written out'}): L={L} C={C} H={H} N={N} V={V} "
          f"B={B}, {a.steps} steps x {a.repeat} repetitions, load average {la[0]:.2f} {la[1]:.2f} {la[2]:.2f}")
    print(f"step FLOPs {flops:.4g}, {np_} parameters")
    print(f"{'step (wall)':34s} {a.steps * T / mw:12.1f} tokens/s {a.steps * flops / mw / 1e9:12.2f} GFLOP/s")
    print(f"{'step (CPU)':34s} {a.steps * T / mc:12.1f} tokens/s {a.steps * flops / mc / 1e9:12.2f} GFLOP/s")


if __name__ == "__main__":
    main()
