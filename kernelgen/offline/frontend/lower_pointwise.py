"""The op table's handlers for pointwise work and its leaves: casts, copies, constants, unary and
binary ops (kernelgen.offline.frontend.exprs names them), where, clamp, triu/tril. Each takes the
builder and the call and returns a value id, a list of them for a multi-result op, or None for a
call with no value (a running statistic written back)."""

from __future__ import annotations

from typing import Any

import torch

from kernelgen.offline.frontend.call import Builder, Call
from kernelgen.offline.frontend.exprs import POW_EXPONENTS
from kernelgen.offline.frontend.ir import FLOATS, NoValue
from kernelgen.offline.frontend.lower_views import view
from kernelgen.offline.unsupported import unsupported

# constant tensors and the value they hold (None: the call's fill_value)
FILLS = {"full": None, "full_like": None, "new_full": None, "zeros": 0, "zeros_like": 0, "new_zeros": 0,
         "ones": 1, "ones_like": 1, "new_ones": 1}


def cast(b: Builder, c: Call) -> int:
    """A dtype change: float -> float is no value (fp32 inside the kernel, rounded once at the store)."""
    x = b.operand(c.args[0])
    target = c.kwargs.get("dtype") or (c.args[1] if len(c.args) > 1 else None)
    if target is None:
        return x
    target = str(target).replace("torch.", "")
    src = b.v(x)
    if target in FLOATS and src.is_float:
        return x
    if target == src.dtype:
        return x
    return b.add("cast", (x,), src.shape, target)


def identity(b: Builder, c: Call) -> int:
    return b.operand(c.args[0])


def copy_into(b: Builder, c: Call) -> None:
    if c.args[0].op == "placeholder":
        return None  # a running statistic written back into an input: not part of the result
    unsupported("an in-place copy into an intermediate value")


def uninitialised(b: Builder, c: Call) -> NoValue:
    return NoValue("an uninitialised tensor (torch.empty)")


def scalar_tensor(b: Builder, c: Call) -> int:
    return b.scalar(c.args[0])


def filled(b: Builder, c: Call) -> int:
    value = FILLS[c.base]
    if value is None:
        value = c.arg(1, "fill_value")
    shape = b.shape_of(c.node)
    if not shape:
        return b.scalar(value)
    return b.add("full", (), shape, c.dtype, value=value.item() if isinstance(value, torch.Tensor) else value)


def unary(op: str) -> Any:
    """The handler of an ATen op that is the IR's unary `op`."""
    def lower(b: Builder, c: Call) -> int:
        return b.add(op, (b.operand(c.args[0]),), b.shape_of(c.node), c.dtype)
    return lower


def binary(op: str) -> Any:
    """The handler of an ATen op that is the IR's binary `op`: add and sub scale their second
    operand by alpha; rsub(x, y, alpha) is y - alpha * x."""
    def lower(b: Builder, c: Call) -> int:
        if op == "div" and c.kwargs.get("rounding_mode") is not None:
            unsupported(f"division with rounding_mode={c.kwargs['rounding_mode']!r}")
        x, y = b.operand(c.args[0]), b.operand(c.args[1])
        if c.base == "rsub":
            x, y = y, x
        alpha = c.kwargs.get("alpha", c.args[2] if len(c.args) > 2 and c.base in ("add", "sub") else 1)
        if op in ("add", "sub") and alpha != 1:
            y = b.add("mul", (y, b.scalar(alpha)), b.v(y).shape, c.dtype)
        return b.add(op, (x, y), b.shape_of(c.node), c.dtype)
    return lower


def power(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    b.operand(c.args[1])  # the exponent, a literal (kept in the graph, as every operand is)
    e = c.args[1]
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        if e == 1:
            return x
        if e in POW_EXPONENTS:
            return b.add(POW_EXPONENTS[e], (x,), b.shape_of(c.node), c.dtype)
    unsupported("pow with an exponent other than -1, -0.5, 0.5, 1, 2 or 3")


def where(b: Builder, c: Call) -> int:
    return b.add("where", tuple(b.operand(a) for a in c.args[:3]), b.shape_of(c.node), c.dtype)


def masked_fill(b: Builder, c: Call) -> int:
    return b.add("where", (b.operand(c.args[1]), b.operand(c.args[2]), b.operand(c.args[0])), b.shape_of(c.node), c.dtype)


def clamp(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    lo = c.args[1] if c.base != "clamp_max" and len(c.args) > 1 else c.kwargs.get("min")
    hi = (c.args[2] if len(c.args) > 2 else c.kwargs.get("max")) if c.base == "clamp" else (
        c.args[1] if c.base == "clamp_max" else None)
    shape = b.shape_of(c.node)
    if lo is not None:
        x = b.add("maximum", (x, b.operand(lo)), shape, c.dtype)
    if hi is not None:
        x = b.add("minimum", (x, b.operand(hi)), shape, c.dtype)
    return x


def triangle(b: Builder, c: Call) -> int:
    """triu / tril over the last two dims: where(col - row >= k, x, 0) (tril: <= k), built from ramps."""
    x = b.operand(c.args[0])
    diagonal = c.arg(1, "diagonal", 0)
    shape = b.v(x).shape
    rows, cols = shape[-2], shape[-1]
    r = view(b, b.add("iota", (), (rows,), "int64"), "unsqueeze", dim=1)
    col = b.add("iota", (), (cols,), "int64")
    diff = b.add("sub", (col, r), (rows, cols), "int64")
    keep = b.add("ge" if c.base == "triu" else "le", (diff, b.scalar(int(diagonal))), (rows, cols), "bool")
    return b.add("where", (keep, x, b.scalar(0.0 if c.dtype in FLOATS else 0)), b.shape_of(c.node), c.dtype)
