# SPDX-License-Identifier: Apache-2.0
"""Dump hooks for PyTorch: what each rank of a framework calls to write
the dump `ulysses check` reads.  Needs torch (imported by the caller)."""

from .dump import save_dump


def dump_attention(attn, directory, rank, *, metadata=None, call=0):
    """Wrap an attention function attn(q, k, v, *args, **kw) -> o (or (o,
    lse, ...)): call number `call` (0: the first) saves q, k, v, o (and lse
    when attn returns it) and, once its backward has run, do, dq, dk, dv --
    the gradients of the tensors that require them -- to
    DIR/rank{rank}.safetensors.  Other calls pass through.  The tensors are
    copied to the CPU as they are (bf16 stays bf16)."""
    state = {"n": 0}

    def wrapped(q, k, v, *args, **kwargs):
        res = attn(q, k, v, *args, **kwargs)
        n = state["n"]
        state["n"] += 1
        if n != call:
            return res
        o = res[0] if isinstance(res, (tuple, list)) else res
        saved = {"q": q.detach().cpu(), "k": k.detach().cpu(), "v": v.detach().cpu(), "o": o.detach().cpu()}
        if isinstance(res, (tuple, list)) and len(res) > 1 and getattr(res[1], "dim", None) is not None:
            saved["lse"] = res[1].detach().cpu()
        grads = {name: x for name, x in (("do", o), ("dq", q), ("dk", k), ("dv", v)) if x.requires_grad}

        def write():
            save_dump(directory, rank, metadata=metadata, overwrite=True, **saved)

        if not grads:
            write()
            return res

        def hook(name):
            def h(g):
                saved[name] = g.detach().cpu()
                if all(k2 in saved for k2 in grads):
                    write()
            return h

        for name, x in grads.items():
            x.register_hook(hook(name))
        return res

    return wrapped


def dump_forward_hook(directory, rank, *, metadata=None):
    """A forward hook for a module whose forward is attention(q, k, v, ...)
    -> o: module.register_forward_hook(dump_forward_hook(DIR, rank)) saves
    the first call's q, k, v and o (the forward only)."""
    state = {"done": False}

    def hook(module, inputs, output):
        if state["done"]:
            return
        state["done"] = True
        o = output[0] if isinstance(output, (tuple, list)) else output
        q, k, v = inputs[:3]
        save_dump(directory, rank, metadata=metadata, overwrite=True,
                  q=q.detach().cpu(), k=k.detach().cpu(), v=v.detach().cpu(), o=o.detach().cpu())

    return hook
