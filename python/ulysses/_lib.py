# SPDX-License-Identifier: Apache-2.0
"""ctypes bindings of libulysses: the library's structs, mirrored field by
field from include/ulysses_plan.h and include/ulysses_check.h, and the
prototypes of the functions the package calls.

The library is found, in order, at the path in the environment variable
ULYSSES_LIBRARY, at the path recorded when the package was built or
installed (ulysses/_paths.py), or by ctypes.util.find_library("ulysses").
"""

import ctypes
import ctypes.util
import os

c_int = ctypes.c_int
c_i64 = ctypes.c_int64
c_u64 = ctypes.c_uint64
c_dbl = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
P_i64 = ctypes.POINTER(c_i64)
P_dbl = ctypes.POINTER(c_dbl)

ULY_OK = 0
ULY_F32, ULY_F64 = 0, 1
# uly_elem (ulysses_npy.h)
ELEM_F16, ELEM_BF16, ELEM_F32, ELEM_F64, ELEM_I32, ELEM_I64 = range(6)
# uly_tlayout (ulysses_check.h)
LAYOUTS = {"bshd": 0, "bhsd": 1, "thd": 2}


class AttnDesc(ctypes.Structure):
    """struct uly_attn_desc (ulysses_plan.h)."""
    _fields_ = [
        ("batch", c_i64), ("seq", c_i64), ("heads", c_i64), ("kv_heads", c_i64),
        ("head_dim", c_i64), ("causal", c_int), ("window", c_i64), ("scale", c_dbl),
        ("dtype", c_int),             # enum uly_dtype
        ("doc_offsets", P_i64), ("docs", c_i64),
    ]


class SpPlan(ctypes.Structure):
    """struct uly_sp_plan."""
    _fields_ = [("method", c_int), ("P", c_int), ("U", c_int), ("R", c_int),
                ("placement", c_int), ("zigzag", c_int)]


class Layout(ctypes.Structure):
    """struct uly_layout."""
    _fields_ = [("a", AttnDesc), ("p", SpPlan), ("rep", c_int), ("kv_min", c_i64)]


class RankPart(ctypes.Structure):
    """struct uly_rank_part."""
    _fields_ = [
        ("u", c_int), ("j", c_int), ("nseg", c_int),
        ("tok_begin", c_i64 * 2), ("tok_count", c_i64 * 2),
        ("tokens", c_i64), ("group_tokens", c_i64),
        ("head_begin", c_i64), ("head_count", c_i64),
        ("kv_begin", c_i64), ("kv_count", c_i64), ("kvg_count", c_i64),
    ]


NT = 5  # ULY_CHK_NT: o, lse, dq, dk, dv


class CheckProblem(ctypes.Structure):
    """struct uly_check_problem (ulysses_check.h)."""
    _fields_ = [("a", AttnDesc), ("plan", SpPlan), ("elem", c_int),
                ("max_imbalance", c_dbl), ("atol_scale", c_dbl)]


class CheckRank(ctypes.Structure):
    """struct uly_check_rank."""
    _fields_ = [("rows", c_i64), ("tokens", P_i64),
                ("q", P_dbl), ("k", P_dbl), ("v", P_dbl),
                ("o", P_dbl), ("lse", P_dbl), ("dout", P_dbl),
                ("dq", P_dbl), ("dk", P_dbl), ("dv", P_dbl),
                ("lse_plan", c_int)]


class CheckCell(ctypes.Structure):
    """struct uly_check_cell."""
    _fields_ = [("tensor", c_int), ("rank", c_int), ("seg", c_int), ("chunk", c_int),
                ("tok_begin", c_i64), ("tok_count", c_i64),
                ("head_begin", c_i64), ("head_count", c_i64),
                ("n", c_u64), ("bad", c_u64), ("nonfinite", c_u64),
                ("max_err", c_dbl), ("ref_at_max", c_dbl), ("worst", c_dbl)]


class CheckReport(ctypes.Structure):
    """struct uly_check_report."""
    _fields_ = [("present", c_int * NT), ("atol", c_dbl * NT), ("rtol", c_dbl * NT),
                ("ncells", c_int), ("cells", ctypes.POINTER(CheckCell)),
                ("pass_", c_int), ("defect", c_int),
                ("where", ctypes.c_char * 512), ("summary", ctypes.c_char * 1024),
                ("evidence", ctypes.c_char * 1024),
                ("P", c_int), ("work", P_dbl), ("imbalance", c_dbl),
                ("imbalance_ref", c_dbl), ("imbalance_bound", c_dbl)]


# (name, restype, argtypes); a function missing from the library is left
# out and reported when called.
_PROTOS = [
    ("uly_last_error", c_char_p, []),
    ("uly_strerror", c_char_p, [c_int]),
    ("uly_free", None, [c_void_p]),
    ("uly_attn_desc_check", c_int, [ctypes.POINTER(AttnDesc)]),
    ("uly_attn_fwd", c_int, [ctypes.POINTER(AttnDesc), c_void_p, c_void_p, c_void_p, c_void_p,
                             c_void_p, c_void_p]),
    ("uly_attn_bwd", c_int, [ctypes.POINTER(AttnDesc), c_void_p, c_void_p, c_void_p, c_void_p,
                             c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
    ("uly_method_parse", c_int, [c_char_p, ctypes.POINTER(c_int)]),
    ("uly_method_name", c_char_p, [c_int]),
    ("uly_method_traits", c_int, [c_int]),
    ("uly_placement_parse", c_int, [c_char_p, ctypes.POINTER(c_int)]),
    ("uly_plan_usp_degree", c_int, [c_i64, c_int]),
    ("uly_sp_plan_init", c_int, [ctypes.POINTER(SpPlan), c_int, c_int, c_int, c_int]),
    ("uly_layout_init", c_int, [ctypes.POINTER(Layout), ctypes.POINTER(AttnDesc),
                                ctypes.POINTER(SpPlan)]),
    ("uly_layout_part", None, [ctypes.POINTER(Layout), c_int, ctypes.POINTER(RankPart)]),
    ("uly_elem_parse", c_int, [c_char_p, ctypes.POINTER(c_int)]),
    ("uly_check_run", c_int, [ctypes.POINTER(CheckProblem), ctypes.POINTER(CheckRank),
                              ctypes.POINTER(CheckReport)]),
    ("uly_check_report_json", c_void_p, [ctypes.POINTER(CheckProblem), ctypes.POINTER(CheckReport)]),
    ("uly_check_report_free", None, [ctypes.POINTER(CheckReport)]),
]


class UlyssesError(RuntimeError):
    """A libulysses call failed; .status is the uly_status code."""

    def __init__(self, what, status, detail=""):
        self.status = status
        msg = "%s: %s" % (what, detail or "status %d" % status)
        super().__init__(msg)


class BadInput(UlyssesError, ValueError):
    """The library refused the arguments (ULY_EINVAL and the like)."""


def _candidates():
    env = os.environ.get("ULYSSES_LIBRARY")
    if env:
        return [("ULYSSES_LIBRARY", env)]
    out = []
    try:
        from . import _paths
        if getattr(_paths, "LIBRARY", None):
            out.append(("the recorded path", _paths.LIBRARY))
    except ImportError:
        pass
    found = ctypes.util.find_library("ulysses")
    if found:
        out.append(("find_library", found))
    return out


_lib = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for how, path in _candidates():
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s): %s" % (path, how, e))
            if how == "ULYSSES_LIBRARY":
                break
            continue
        for name, res, args in _PROTOS:
            fn = getattr(handle, name, None)
            if fn is not None:
                fn.restype = res
                fn.argtypes = args
        _lib = handle
        return _lib
    raise OSError("libulysses not found: " + ("; ".join(tried) if tried else
                  "set ULYSSES_LIBRARY to the path of libulysses.so (build tree: src/.libs/libulysses.so)"))


def fn(name):
    f = getattr(lib(), name, None)
    if f is None:
        raise OSError("libulysses has no %s (a library older than this package?)" % name)
    return f


def last_error():
    return (fn("uly_last_error")() or b"").decode("utf-8", "replace")


def check_status(st, what):
    if st == ULY_OK:
        return
    detail = last_error() or (fn("uly_strerror")(st) or b"").decode()
    if st == 1:  # ULY_EINVAL
        raise BadInput(what, st, detail)
    raise UlyssesError(what, st, detail)
