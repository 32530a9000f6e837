"""Reductions and the composites built on them: sum, mean, max/min (with their indices), prod,
argmax/argmin, var/std/var_mean, logsumexp, softmax and log_softmax over any dims, and the layer,
group, batch and instance norms (written out here: their ATen decompositions use as_strided on
intermediates, which no kernel of ours can address). The op table's handlers come first, then
the expansions they share."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.call import Builder, Call
from kernelgen.offline.frontend.ir import FLOATS, NoValue
from kernelgen.offline.frontend.lower_views import _dims, view
from kernelgen.offline.unsupported import unsupported

NEG_INF = float("-inf")


def reduce(b: Builder, kind: str, x: int, dims: tuple[int, ...], keepdim: bool, dtype: str = "float32", **attrs: Any) -> int:
    xs = b.v(x).shape
    shape = tuple(S.ONE if i in dims else d for i, d in enumerate(xs))
    r = b.add("reduce", (x,), shape, dtype, kind=kind, dims=dims, **attrs)
    return r if keepdim else (view(b, r, "squeeze", dims=dims) if dims else r)


def count(b: Builder, x: int, dims: tuple[int, ...]) -> int:
    """The number of elements reduced over, as a float size."""
    n = S.prod(b.v(x).shape[d] for d in dims)
    return b.add("size", (), (), "float32", expr=n) if not n.is_number else b.scalar(float(n))


def mean(b: Builder, x: int, dims: tuple[int, ...], keepdim: bool) -> int:
    s = reduce(b, "sum", x, dims, True)
    m = b.add("div", (s, count(b, x, dims)), b.v(s).shape, "float32")
    return m if keepdim else view(b, m, "squeeze", dims=dims)


def variance(b: Builder, x: int, dims: tuple[int, ...], correction: float, keepdim: bool) -> int:
    return reduce(b, "var", x, dims, keepdim, correction=float(correction))


def _keep(c: Call, at: int) -> bool:
    return bool(c.args[at] if len(c.args) > at else c.kwargs.get("keepdim", False))


def _dims_arg(c: Call) -> Any:
    return c.args[1] if len(c.args) > 1 else c.kwargs.get("dim")


def sum_or_mean(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    dims, keep = _dims(_dims_arg(c), b.v(x).rank), _keep(c, 2)
    if c.kwargs.get("dtype") is not None and str(c.kwargs["dtype"]).replace("torch.", "") not in FLOATS:
        unsupported("an integer-typed reduction")
    if c.base == "mean":
        return mean(b, x, dims, keep)
    return reduce(b, "sum", x, dims, keep, c.dtype if b.v(x).is_float else "int64")


def amax_or_amin(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    return reduce(b, c.base[1:], x, _dims(_dims_arg(c), b.v(x).rank), _keep(c, 2), c.dtype)


def max_or_min(b: Builder, c: Call) -> Any:
    """torch.max / torch.min: of two tensors (maximum), of everything, or along a dim with indices."""
    if c.overload in ("other", "default") and len(c.args) == 2:
        return b.add("maximum" if c.base == "max" else "minimum", (b.operand(c.args[0]), b.operand(c.args[1])),
                     b.shape_of(c.node), c.dtype)
    x = b.operand(c.args[0])
    rank = b.v(x).rank
    if c.overload == "default":
        return reduce(b, c.base, x, tuple(range(rank)), False, c.dtype)
    dims, keep = _dims(c.args[1], rank), _keep(c, 2)
    return [reduce(b, c.base, x, dims, keep, c.dtype), reduce(b, "arg" + c.base, x, dims, keep, "int64")]


def argmax_or_argmin(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    dim = c.arg(1, "dim")
    return reduce(b, c.base, x, _dims(dim, b.v(x).rank), _keep(c, 2) and dim is not None, "int64")


def prod(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    whole = c.overload == "default"
    dims = _dims(c.args[1] if len(c.args) > 1 and not whole else None, b.v(x).rank)
    return reduce(b, "prod", x, dims, _keep(c, 2) if not whole else False, c.dtype)


def var_or_var_mean(b: Builder, c: Call) -> Any:
    x = b.operand(c.args[0])
    dims = _dims(_dims_arg(c), b.v(x).rank)
    correction = c.kwargs.get("correction")
    if correction is None:
        unbiased = c.kwargs.get("unbiased", c.args[2] if len(c.args) > 2 and isinstance(c.args[2], bool) else True)
        correction = 1 if unbiased else 0
    keep = bool(c.kwargs.get("keepdim", False))
    var = variance(b, x, dims, correction, keep)
    return var if c.base == "var" else [var, mean(b, x, dims, keep)]


def lower_logsumexp(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    return logsumexp(b, x, _dims(c.args[1], b.v(x).rank), _keep(c, 2))


def lower_softmax(b: Builder, c: Call) -> int:
    x = b.operand(c.args[0])
    return softmax(b, x, (c.args[1] % b.v(x).rank,), log="log" in c.base)


def lower_layer_norm(b: Builder, c: Call) -> list:
    x = b.operand(c.args[0])
    return layer_norm(b, x, len(c.args[1]), c.args[2], c.args[3], c.args[4])


def lower_group_norm(b: Builder, c: Call) -> list:
    x = b.operand(c.args[0])
    return group_norm(b, x, c.args[1], c.args[2], int(c.args[6]), float(c.args[7]))


def lower_batch_norm(b: Builder, c: Call) -> list:
    return batch_norm(b, c.node, c.base, c.overload, b.operand(c.args[0]), c.args)


def any_or_all(b: Builder, c: Call) -> None:
    b.operand(c.args[0])
    unsupported(f"torch.{c.base}")


def logsumexp(b: Builder, x: int, dims: tuple[int, ...], keepdim: bool) -> int:
    shape = b.v(x).shape
    m = reduce(b, "max", x, dims, True)
    # an all -inf row: torch gives -inf, not the nan of -inf - -inf
    safe = b.add("where", (b.add("eq", (m, b.scalar(NEG_INF)), b.v(m).shape, "bool"), b.scalar(0.0), m), b.v(m).shape)
    e = b.add("exp", (b.add("sub", (x, safe), shape),), shape)
    out = b.add("add", (b.add("log", (reduce(b, "sum", e, dims, True),), b.v(m).shape), safe), b.v(m).shape)
    return out if keepdim else view(b, out, "squeeze", dims=dims)


def softmax(b: Builder, x: int, dims: tuple[int, ...], *, log: bool) -> int:
    shape = b.v(x).shape
    m = reduce(b, "max", x, dims, True)
    shifted = b.add("sub", (x, m), shape)
    e = b.add("exp", (shifted,), shape)
    s = reduce(b, "sum", e, dims, True)
    if log:
        return b.add("sub", (shifted, b.add("log", (s,), b.v(s).shape)), shape)
    return b.add("div", (e, s), shape)


def _normalise(b: Builder, x: int, dims: tuple[int, ...], eps: float) -> tuple[int, int, int]:
    """(y, mean, rstd) of x over dims: y = (x - mean) * rsqrt(var + eps), biased variance."""
    shape = b.v(x).shape
    mu = mean(b, x, dims, True)
    var = variance(b, x, dims, 0, True)
    rstd = b.add("rsqrt", (b.add("add", (var, b.scalar(eps)), b.v(var).shape),), b.v(var).shape)
    y = b.add("mul", (b.add("sub", (x, mu), shape), rstd), shape)
    return y, mu, rstd


def _affine(b: Builder, y: int, weight: Any, bias: Any) -> int:
    shape = b.v(y).shape
    if weight is not None:
        y = b.add("mul", (y, b.operand(weight) if not isinstance(weight, int) else weight), shape)
    if bias is not None:
        y = b.add("add", (y, b.operand(bias) if not isinstance(bias, int) else bias), shape)
    return y


def layer_norm(b: Builder, x: int, k: int, weight: Any, bias: Any, eps: float) -> list:
    rank = b.v(x).rank
    y, mu, rstd = _normalise(b, x, tuple(range(rank - k, rank)), float(eps))
    return [_affine(b, y, weight, bias), mu, rstd]


def group_norm(b: Builder, x: int, weight: Any, bias: Any, groups: int, eps: float) -> list:
    from torch.utils._sympy.functions import FloorDiv

    xs = b.v(x).shape
    n, c, rest = xs[0], xs[1], S.prod(xs[2:])
    grouped = view(b, x, "reshape", (n, S.expr(groups), FloorDiv(c, groups), rest))
    y, _, _ = _normalise(b, grouped, (2, 3), eps)
    gshape = (S.ONE, S.expr(groups), FloorDiv(c, groups), S.ONE)
    w = view(b, b.operand(weight), "reshape", gshape) if weight is not None else None
    bb = view(b, b.operand(bias), "reshape", gshape) if bias is not None else None
    out = view(b, _affine(b, y, w, bb), "reshape", xs)
    stat = NoValue("group_norm's saved statistics")
    return [out, stat, stat]


def batch_norm(b: Builder, n: Any, base: str, overload: str, x: int, args: list) -> list:
    """_native_batch_norm_legit(x, w, b, running_mean, running_var, training, momentum, eps) and its
    variants: batch statistics in training, the running ones otherwise."""

    if base == "_native_batch_norm_legit" and overload == "no_stats":
        weight, bias, training, eps = args[1], args[2], bool(args[3]), float(args[5])
        rm = rv = None
    elif base == "_native_batch_norm_legit_no_training":
        weight, bias, rm, rv, eps, training = args[1], args[2], args[3], args[4], float(args[6]), False
    else:
        weight, bias, rm, rv, training, eps = args[1], args[2], args[3], args[4], bool(args[5]), float(args[7])
    xs = b.v(x).shape
    rank = len(xs)
    per_channel = (xs[1],) + (S.ONE,) * (rank - 2)

    def channel(t: Any) -> int | None:
        return None if t is None else view(b, b.operand(t), "reshape", per_channel)

    if training:
        y, _, _ = _normalise(b, x, tuple(d for d in range(rank) if d != 1), eps)
    else:
        if rm is None:
            unsupported("batch norm in eval mode without running statistics")
        shape = xs
        rstd = b.add("rsqrt", (b.add("add", (channel(rv), b.scalar(eps)), per_channel),), per_channel)
        y = b.add("mul", (b.add("sub", (x, channel(rm)), shape), rstd), shape)
    out = _affine(b, y, channel(weight), channel(bias))
    stat = NoValue("batch norm's saved or running statistics")
    extra = 4 if base == "_native_batch_norm_legit_functional" else 2
    return [out] + [stat] * extra
