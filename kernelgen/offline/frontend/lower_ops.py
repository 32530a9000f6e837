"""The ATen ops of kernelgen.offline.frontend.lower, one handler each (pointwise, views, reductions, the
composite norms, the anchors). Each returns a value id, a tuple of them for multi-result ops, or
None for an op with no value (an assertion, a running statistic written back)."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from kernelgen.offline.frame.lowering import BINARY, CASTS, UNARY
from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import FLOATS, Multi, NoValue
from kernelgen.offline.frontend.lower_views import _dims, view
from kernelgen.offline.unsupported import unsupported

IDENTITY = {"clone", "alias", "detach", "lift_fresh_copy", "contiguous"}
RESHAPES = {"view", "reshape", "_unsafe_view"}
EXTRA_UNARY = {"isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite"}
POW_TABLE = {2: "square", 0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal", 3: "cube"}
NORMS = ("native_layer_norm", "native_group_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
         "native_batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit.no_stats")


def _dt(n: Any) -> str:
    val = n.meta.get("val")
    return str(val.dtype).replace("torch.", "") if isinstance(val, torch.Tensor) else "float32"


def lower_call(b: Any, n: Any, ns: str, base: str, args: list, kwargs: dict) -> Any:

    overload = n.target._overloadname
    dtype = _dt(n)
    if base in CASTS or base == "convert_element_type":
        return cast(b, b.operand(args[0]), kwargs.get("dtype") or (args[1] if len(args) > 1 else None))
    if base in IDENTITY:
        return b.operand(args[0])
    if base == "copy_":
        if args[0].op == "placeholder":
            return None  # a running statistic written back into an input: not part of the result
        unsupported("an in-place copy into an intermediate value")
    if base in ("empty", "empty_like", "empty_strided", "new_empty"):
        return NoValue("an uninitialised tensor (torch.empty)")
    if base == "scalar_tensor":
        return b.scalar(args[0])
    if base in ("full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "new_zeros", "new_ones", "new_full"):
        value = {"zeros": 0, "zeros_like": 0, "new_zeros": 0, "ones": 1, "ones_like": 1, "new_ones": 1}.get(base)
        if value is None:
            value = args[1] if len(args) > 1 else kwargs.get("fill_value")
        shape = b.shape_of(n)
        if not shape:
            return b.scalar(value)
        return b.add("full", (), shape, dtype, value=value.item() if isinstance(value, torch.Tensor) else value)
    if base in RESHAPES or (base == "view" and overload == "default"):
        return view(b, b.operand(args[0]), "reshape", b.shape_of(n))
    if base == "expand":
        return view(b, b.operand(args[0]), "expand", b.shape_of(n))
    if base == "broadcast_in_dim":
        x = b.operand(args[0])
        for d in range(len(args[1])):
            if d not in args[2]:
                x = view(b, x, "unsqueeze", dim=d)
        return view(b, x, "expand", b.shape_of(n))
    if base == "unsqueeze":
        return view(b, b.operand(args[0]), "unsqueeze", dim=args[1] % (b.v(b.operand(args[0])).rank + 1))
    if base == "squeeze":
        x = b.operand(args[0])
        rank = b.v(x).rank
        given = range(rank) if overload == "default" else ([args[1]] if overload == "dim" else args[1])
        dims = tuple(d % max(rank, 1) for d in given if S.is_one(b.v(x).shape[d % max(rank, 1)]))
        return view(b, x, "squeeze", dims=dims) if dims else x
    if base in ("permute", "t", "transpose", "numpy_T"):
        x = b.operand(args[0])
        rank = b.v(x).rank
        if base == "permute":
            perm = tuple(d % rank for d in args[1])
        elif base == "transpose":
            perm = list(range(rank))
            d0, d1 = args[1] % rank, args[2] % rank
            perm[d0], perm[d1] = perm[d1], perm[d0]
            perm = tuple(perm)
        else:
            perm = tuple(reversed(range(rank)))
        return view(b, x, "permute", perm=perm) if perm != tuple(range(rank)) else x
    if base == "slice":
        x = b.operand(args[0])
        dim = (args[1] if len(args) > 1 else 0) % b.v(x).rank
        start = args[2] if len(args) > 2 and args[2] is not None else 0
        step = args[4] if len(args) > 4 else 1
        start = S.expr(start)
        if start.is_number and int(start) < 0:
            start = start + b.v(x).shape[dim]
        return view(b, x, "slice", b.shape_of(n), dim=dim, start=start, step=int(step))
    if base == "select":
        x = b.operand(args[0])
        dim = args[1] % b.v(x).rank
        index = S.expr(args[2])
        if index.is_number and int(index) < 0:
            index = index + b.v(x).shape[dim]
        return view(b, x, "select", b.shape_of(n), dim=dim, index=index)
    if base == "flip":
        x = b.operand(args[0])
        return view(b, x, "flip", dims=tuple(d % b.v(x).rank for d in args[1]))
    if base in UNARY or base in EXTRA_UNARY:
        op = UNARY.get(base) or EXTRA_UNARY[base]
        return b.add(op, (b.operand(args[0]),), b.shape_of(n), dtype)
    if base in ("max", "min") and overload in ("other", "default") and len(args) == 2:
        return b.add("maximum" if base == "max" else "minimum", (b.operand(args[0]), b.operand(args[1])), b.shape_of(n), dtype)
    if base in BINARY:
        return binary(b, n, BINARY[base], args, kwargs, dtype)
    if base == "where":
        return b.add("where", tuple(b.operand(a) for a in args[:3]), b.shape_of(n), dtype)
    if base == "masked_fill":
        return b.add("where", (b.operand(args[1]), b.operand(args[2]), b.operand(args[0])), b.shape_of(n), dtype)
    if base in ("clamp", "clamp_min", "clamp_max"):
        return clamp(b, n, base, args, kwargs, dtype)
    from kernelgen.offline.frontend import lower_reduce

    handled = lower_reduce.lower_reduction(b, n, base, overload, args, kwargs, dtype)
    if handled is not NotImplemented:
        return Multi(handled) if isinstance(handled, list) else handled
    if base in ("mm", "bmm"):
        return b.add("mm", (b.operand(args[0]), b.operand(args[1])), b.shape_of(n), dtype)
    if base == "convolution":
        return lower_reduce.conv1x1(b, n, args, dtype)
    if base in ("cumsum", "cumprod"):
        x = b.operand(args[0])
        return b.add("scan", (x,), b.shape_of(n), dtype, kind="sum" if base == "cumsum" else "prod",
                     dim=args[1] % max(b.v(x).rank, 1))
    if base == "gather":
        x, index = b.operand(args[0]), b.operand(args[2])
        return b.add("gather", (x, index), b.shape_of(n), dtype, dim=args[1] % b.v(x).rank)
    if base == "cat":
        parts = [b.operand(t) for t in args[0]]
        dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0))
        rank = max(b.v(p).rank for p in parts)
        parts = [p for p in parts if b.v(p).rank == rank]  # legacy 1-D empty tensors are skipped by torch.cat
        return b.add("cat", tuple(parts), b.shape_of(n), dtype, dim=dim % rank)
    if base in ("triu", "tril"):
        return triangle(b, n, base, b.operand(args[0]), args[1] if len(args) > 1 else kwargs.get("diagonal", 0), dtype)
    if base.startswith(("max_pool", "avg_pool", "adaptive_", "_adaptive_")):
        from kernelgen.offline.frontend.lower_pool import pool

        got = pool(b, n, base, args, kwargs, dtype)
        return Multi(got) if isinstance(got, list) else got
    if base.startswith("_scaled_dot_product") or base == "scaled_dot_product_attention":
        from kernelgen.offline.frontend.lower_attention import OPS, attention

        if base not in OPS:
            unsupported(f"the attention op {base}")
        return Multi(attention(b, n, base, args, kwargs, dtype))
    unsupported(f"the op {ns}.{base}.{overload}")


def cast(b: Any, x: int, target: Any) -> int:
    if target is None:
        return x
    target = str(target).replace("torch.", "")
    src = b.v(x)
    if target in FLOATS and src.is_float:
        return x  # float -> float: fp32 inside the kernel, rounded once at the store
    if target == src.dtype:
        return x
    return b.add("cast", (x,), src.shape, target)


def binary(b: Any, n: Any, op: str, args: list, kwargs: dict, dtype: str) -> int:
    if op == "div" and kwargs.get("rounding_mode") is not None:
        unsupported(f"division with rounding_mode={kwargs['rounding_mode']!r}")
    shape = b.shape_of(n)
    x, y = b.operand(args[0]), b.operand(args[1])
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 and op in ("add", "sub") else 1)
    if op in ("add", "sub", "rsub") and alpha != 1:
        y = b.add("mul", (y, b.scalar(alpha)), b.v(y).shape, dtype)
    if op == "rsub":
        x, y, op = y, x, "sub"
    if op == "pow":
        e = args[1]
        if isinstance(e, (int, float)) and not isinstance(e, bool):
            if e == 1:
                return x
            if e in POW_TABLE:
                return b.add(POW_TABLE[e], (x,), shape, dtype)
        unsupported("pow with an exponent other than -1, -0.5, 0.5, 1, 2 or 3")
    return b.add(op, (x, y), shape, dtype)


def clamp(b: Any, n: Any, base: str, args: list, kwargs: dict, dtype: str) -> int:
    x = b.operand(args[0])
    lo = args[1] if base != "clamp_max" and len(args) > 1 else kwargs.get("min")
    hi = (args[2] if len(args) > 2 else kwargs.get("max")) if base == "clamp" else (args[1] if base == "clamp_max" else None)
    shape = b.shape_of(n)
    if lo is not None:
        x = b.add("maximum", (x, b.operand(lo)), shape, dtype)
    if hi is not None:
        x = b.add("minimum", (x, b.operand(hi)), shape, dtype)
    return x


def triangle(b: Any, n: Any, base: str, x: int, diagonal: Any, dtype: str) -> int:
    """triu / tril over the last two dims: where(col - row >= k, x, 0) (tril: <= k), built from ramps."""
    shape = b.v(x).shape
    rows, cols = shape[-2], shape[-1]
    r = view(b, b.add("iota", (), (rows,), "int64"), "unsqueeze", dim=1)
    c = b.add("iota", (), (cols,), "int64")
    diff = b.add("sub", (c, r), (rows, cols), "int64")
    keep = b.add("ge" if base == "triu" else "le", (diff, b.scalar(int(diagonal))), (rows, cols), "bool")
    return b.add("where", (keep, x, b.scalar(0.0 if dtype in FLOATS else 0)), b.shape_of(n), dtype)


def sym_size(e: Any) -> sympy.Expr:
    return S.expr(e)
