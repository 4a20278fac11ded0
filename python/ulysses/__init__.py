# SPDX-License-Identifier: Apache-2.0
"""ulysses: an exact reference for sequence-parallel attention, over
libulysses (ctypes and numpy; torch tensors accepted when torch is
importable).

    o, lse = ulysses.attention(q, k, v, causal=True, layout="bhsd")
    dq, dk, dv = ulysses.attention_backward(q, k, v, o, lse, do, causal=True, layout="bhsd")
    s = ulysses.shard("zigzag", 4, 1, seq=1024)          # s.tokens, s.heads
    ulysses.save_dump("dump", rank, q=q, k=k, v=v, o=o)  # for `ulysses check dump`
    report = ulysses.check("zigzag", shards, causal=True)

doc/check.md describes the package, the checker and its report.
"""

from ._lib import UlyssesError, BadInput
from ._core import attention, attention_backward, shard, check, Shard
from .dump import save_dump, load_dump
from .hooks import dump_attention, dump_forward_hook

__version__ = "0.1.0"
__all__ = ["attention", "attention_backward", "shard", "check", "save_dump", "load_dump", "Shard",
           "UlyssesError", "BadInput", "library_path",
           "dump_attention", "dump_forward_hook"]


def library_path():
    """The path of the loaded libulysses."""
    from . import _lib
    return _lib.lib()._name
