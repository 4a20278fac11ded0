#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Blocked attention (`ulysses bench kernel`) against PyTorch's CPU attention.

PyTorch side: the private SDPA math path torch._scaled_dot_product_attention_math
(softmax(Q K^T / sqrt(d)) V, materialising the N x N scores per head), or with
--explicit the same written out; fp32, B = 1, (B, H, N, d) tensors, uniform in
[-1, 1).  Forward timed under torch.no_grad(); backward timed alone after a
forward with gradients; forward+backward timed together.  torch.set_num_threads
and OPENBLAS_NUM_THREADS (set in the environment before torch is imported, as
torch itself runs) equal the thread count given.

ulysses side: `ulysses bench kernel --seq N --heads H --head-dim d --threads T
--json`, whose medians are GFLOP/s of 4 N^2 d H (forward) and 3.5 times that
(forward+backward); times are recovered from them, and the backward alone is the
difference of the two medians.

The two alternate (--rounds rounds, each a median of --repeat repetitions), so
both see the same load; ratios are torch time / ulysses time per round, and their
median.  A benchmark, never a test: nothing in `make check` depends on torch.

    OPENBLAS_NUM_THREADS=1 tests/bench_attn_torch.py --ulysses ./ulysses --head-dim 64
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ulysses", default="./ulysses", help="the ulysses program (default ./ulysses)")
    p.add_argument("--seq", type=int, default=4096, help="sequence length N (default 4096)")
    p.add_argument("--heads", type=int, default=8, help="heads H (default 8)")
    p.add_argument("--head-dim", type=int, default=64, help="head dimension d (default 64)")
    p.add_argument("--threads", type=int, default=1, help="threads on both sides (default 1)")
    p.add_argument("--repeat", type=int, default=3, help="repetitions per round, medians (default 3)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--explicit", action="store_true",
                   help="torch: softmax(Q K^T s) V written out instead of the SDPA math path")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = p.parse_args()
    for name in ("seq", "heads", "head_dim", "threads", "repeat", "rounds"):
        if getattr(a, name) < 1:
            p.error("--%s must be >= 1" % name.replace("_", "-"))
    return a


def torch_times(torch, a):
    """Medians (seconds) of forward, backward alone, forward+backward."""
    g = torch.Generator().manual_seed(1)
    shape = (1, a.heads, a.seq, a.head_dim)
    q, k, v, do = (torch.rand(shape, generator=g) * 2 - 1 for _ in range(4))
    scale = a.head_dim ** -0.5

    def attn(q, k, v):
        if a.explicit:
            return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v
        return torch._scaled_dot_product_attention_math(q, k, v)[0]

    tf, tb, tfb = [], [], []
    for it in range(a.repeat + 1):  # the first one warms up
        with torch.no_grad():
            t0 = time.perf_counter()
            attn(q, k, v)
            t1 = time.perf_counter()
        qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
        o = attn(qg, kg, vg)
        t2 = time.perf_counter()
        o.backward(do)
        t3 = time.perf_counter()
        del o
        qg, kg, vg = (x.clone().requires_grad_(True) for x in (q, k, v))
        t4 = time.perf_counter()
        attn(qg, kg, vg).backward(do)
        t5 = time.perf_counter()
        if it:
            tf.append(t1 - t0)
            tb.append(t3 - t2)
            tfb.append(t5 - t4)
    return statistics.median(tf), statistics.median(tb), statistics.median(tfb)


def ulysses_times(a):
    cmd = [a.ulysses, "bench", "kernel", "--seq", str(a.seq), "--heads", str(a.heads),
           "--head-dim", str(a.head_dim), "--threads", str(a.threads), "--repeat", str(a.repeat),
           "--gemm-size", "1024", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("bench_attn_torch: %s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    j = json.loads(r.stdout)
    ffl = 4.0 * a.seq * a.seq * a.head_dim * a.heads
    tf = ffl / (j["fwd_gflops"]["median"] * 1e9)
    tfb = 3.5 * ffl / (j["fwdbwd_gflops"]["median"] * 1e9)
    return tf, tfb - tf, tfb, j.get("blas_core", "unknown")


def main():
    a = parse()
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    try:
        import torch
    except ImportError as e:
        sys.exit("bench_attn_torch: cannot import torch (%s); Debian: apt-get install python3-torch" % e)
    torch.set_num_threads(a.threads)
    rounds = []
    core = "unknown"
    for _ in range(a.rounds):
        t = torch_times(torch, a)
        u = ulysses_times(a)
        core = u[3]
        rounds.append((t, u[:3], os.getloadavg()[0]))
    names = ("forward", "backward", "fwd+bwd")
    ratio = [[r[0][i] / r[1][i] for r in rounds] for i in range(3)]
    if a.json:
        out = {"bench": "attn_torch", "torch": torch.__version__,
               "torch_path": "explicit" if a.explicit else "sdpa_math", "seq": a.seq, "heads": a.heads,
               "head_dim": a.head_dim, "threads": a.threads, "blas_core": core,
               "rounds": [{"torch_s": list(r[0]), "ulysses_s": list(r[1]), "load": r[2]} for r in rounds],
               "torch_over_ulysses": {n: statistics.median(ratio[i]) for i, n in enumerate(names)}}
        print(json.dumps(out))
        return
    print("attention vs torch %s (%s), N %d, H %d, d %d, %d thread(s), OpenBLAS core %s"
          % (torch.__version__, "explicit softmax" if a.explicit else "SDPA math path", a.seq, a.heads,
             a.head_dim, a.threads, core))
    print("round  load | torch fwd    bwd  fwd+bwd (s) | ulysses fwd    bwd  fwd+bwd (s) | torch / ulysses: fwd   bwd  fwd+bwd")
    for k, r in enumerate(rounds):
        print("%5d %5.2f | %9.3f %6.3f %8.3f     | %11.3f %6.3f %8.3f     |                  %5.2f %5.2f %5.2f"
              % (k + 1, r[2], *r[0], *r[1], *(r[0][i] / r[1][i] for i in range(3))))
    print("median ratio (torch / ulysses): forward %.2f, backward %.2f, forward+backward %.2f"
          % tuple(statistics.median(x) for x in ratio))


if __name__ == "__main__":
    main()
