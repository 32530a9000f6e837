"""Reductions and the composites built on them: sum, mean, max/min (with their indices), prod,
argmax/argmin, var/std/var_mean, logsumexp, softmax and log_softmax over any dims, and the layer,
group, batch and instance norms (written out here: their ATen decompositions use as_strided on
intermediates, which no kernel of ours can address). A 1x1 convolution is a batched matmul."""

from __future__ import annotations

from typing import Any

from kernelgen.offline.frontend import shapes as S
from kernelgen.offline.frontend.ir import NoValue
from kernelgen.offline.frontend.lower_views import _dims, view
from kernelgen.offline.unsupported import unsupported

NEG_INF = float("-inf")


def reduce(b: Any, kind: str, x: int, dims: tuple[int, ...], keepdim: bool, dtype: str = "float32", **attrs: Any) -> int:
    xs = b.v(x).shape
    shape = tuple(S.ONE if i in dims else d for i, d in enumerate(xs))
    r = b.add("reduce", (x,), shape, dtype, kind=kind, dims=dims, **attrs)
    return r if keepdim else (view(b, r, "squeeze", dims=dims) if dims else r)


def count(b: Any, x: int, dims: tuple[int, ...]) -> int:
    """The number of elements reduced over, as a float size."""
    n = S.prod(b.v(x).shape[d] for d in dims)
    return b.add("size", (), (), "float32", expr=n) if not n.is_number else b.scalar(float(n))


def mean(b: Any, x: int, dims: tuple[int, ...], keepdim: bool) -> int:
    s = reduce(b, "sum", x, dims, True)
    m = b.add("div", (s, count(b, x, dims)), b.v(s).shape, "float32")
    return m if keepdim else view(b, m, "squeeze", dims=dims)


def variance(b: Any, x: int, dims: tuple[int, ...], correction: float, keepdim: bool) -> int:
    return reduce(b, "var", x, dims, keepdim, correction=float(correction))


def _keepdim(args: list, kwargs: dict, at: int) -> bool:
    return bool(args[at] if len(args) > at else kwargs.get("keepdim", False))


def lower_reduction(b: Any, n: Any, base: str, overload: str, args: list, kwargs: dict, dtype: str) -> Any:
    """The handlers above, by op; NotImplemented for an op that is no reduction."""
    if base not in ("sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "var", "var_mean",
                    "logsumexp", "_softmax", "_log_softmax", "softmax", "log_softmax", "native_layer_norm",
                    "native_group_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                    "native_batch_norm", "_native_batch_norm_legit_no_training", "any", "all"):
        return NotImplemented
    x = b.operand(args[0])
    rank = b.v(x).rank
    if base in ("sum", "mean"):
        dims = _dims(args[1] if len(args) > 1 else kwargs.get("dim"), rank)
        keep = _keepdim(args, kwargs, 2)
        if kwargs.get("dtype") is not None and str(kwargs["dtype"]).replace("torch.", "") not in ("float32", "float16", "bfloat16", "float64"):
            unsupported("an integer-typed reduction")
        if base == "mean":
            return mean(b, x, dims, keep)
        out_dtype = dtype if b.v(x).is_float else "int64"
        return reduce(b, "sum", x, dims, keep, out_dtype)
    if base in ("amax", "amin"):
        return reduce(b, base[1:], x, _dims(args[1] if len(args) > 1 else kwargs.get("dim"), rank), _keepdim(args, kwargs, 2), dtype)
    if base in ("max", "min"):
        if overload == "default":
            return reduce(b, base, x, tuple(range(rank)), False, dtype)
        dims = _dims(args[1], rank)
        keep = _keepdim(args, kwargs, 2)
        return [reduce(b, base, x, dims, keep, dtype), reduce(b, "arg" + base, x, dims, keep, "int64")]
    if base in ("argmax", "argmin"):
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        return reduce(b, base, x, _dims(dim, rank), _keepdim(args, kwargs, 2) and dim is not None, "int64")
    if base == "prod":
        dims = _dims(args[1] if len(args) > 1 and overload != "default" else None, rank)
        return reduce(b, "prod", x, dims, _keepdim(args, kwargs, 2) if overload != "default" else False, dtype)
    if base in ("var", "var_mean"):
        dims = _dims(args[1] if len(args) > 1 else kwargs.get("dim"), rank)
        correction = kwargs.get("correction")
        if correction is None:
            unbiased = kwargs.get("unbiased", args[2] if len(args) > 2 and isinstance(args[2], bool) else True)
            correction = 1 if unbiased else 0
        keep = bool(kwargs.get("keepdim", False))
        var = variance(b, x, dims, correction, keep)
        return var if base == "var" else [var, mean(b, x, dims, keep)]
    if base == "logsumexp":
        return logsumexp(b, x, _dims(args[1], rank), _keepdim(args, kwargs, 2))
    if base in ("_softmax", "_log_softmax", "softmax", "log_softmax"):
        return softmax(b, x, (args[1] % rank,), log="log" in base)
    if base == "native_layer_norm":
        return layer_norm(b, x, len(args[1]), args[2], args[3], args[4])
    if base == "native_group_norm":
        return group_norm(b, x, args[1], args[2], int(args[6]), float(args[7]))
    if base in ("any", "all"):
        unsupported(f"torch.{base}")
    return batch_norm(b, n, base, overload, x, args)


def logsumexp(b: Any, x: int, dims: tuple[int, ...], keepdim: bool) -> int:
    shape = b.v(x).shape
    m = reduce(b, "max", x, dims, True)
    # an all -inf row: torch gives -inf, not the nan of -inf - -inf
    safe = b.add("where", (b.add("eq", (m, b.scalar(NEG_INF)), b.v(m).shape, "bool"), b.scalar(0.0), m), b.v(m).shape)
    e = b.add("exp", (b.add("sub", (x, safe), shape),), shape)
    out = b.add("add", (b.add("log", (reduce(b, "sum", e, dims, True),), b.v(m).shape), safe), b.v(m).shape)
    return out if keepdim else view(b, out, "squeeze", dims=dims)


def softmax(b: Any, x: int, dims: tuple[int, ...], *, log: bool) -> int:
    shape = b.v(x).shape
    m = reduce(b, "max", x, dims, True)
    shifted = b.add("sub", (x, m), shape)
    e = b.add("exp", (shifted,), shape)
    s = reduce(b, "sum", e, dims, True)
    if log:
        return b.add("sub", (shifted, b.add("log", (s,), b.v(s).shape)), shape)
    return b.add("div", (e, s), shape)


def _normalise(b: Any, x: int, dims: tuple[int, ...], eps: float) -> tuple[int, int, int]:
    """(y, mean, rstd) of x over dims: y = (x - mean) * rsqrt(var + eps), biased variance."""
    shape = b.v(x).shape
    mu = mean(b, x, dims, True)
    var = variance(b, x, dims, 0, True)
    rstd = b.add("rsqrt", (b.add("add", (var, b.scalar(eps)), b.v(var).shape),), b.v(var).shape)
    y = b.add("mul", (b.add("sub", (x, mu), shape), rstd), shape)
    return y, mu, rstd


def _affine(b: Any, y: int, weight: Any, bias: Any) -> int:
    shape = b.v(y).shape
    if weight is not None:
        y = b.add("mul", (y, b.operand(weight) if not isinstance(weight, int) else weight), shape)
    if bias is not None:
        y = b.add("add", (y, b.operand(bias) if not isinstance(bias, int) else bias), shape)
    return y


def layer_norm(b: Any, x: int, k: int, weight: Any, bias: Any, eps: float) -> list:
    rank = b.v(x).rank
    y, mu, rstd = _normalise(b, x, tuple(range(rank - k, rank)), float(eps))
    return [_affine(b, y, weight, bias), mu, rstd]


def group_norm(b: Any, x: int, weight: Any, bias: Any, groups: int, eps: float) -> list:
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


def batch_norm(b: Any, n: Any, base: str, overload: str, x: int, args: list) -> list:
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


def conv1x1(b: Any, n: Any, args: list, dtype: str) -> int:
    """A convolution is served only when it is a batched matmul: 1x1 kernel, stride 1, no padding,
    no dilation, one group, not transposed."""
    x, w, bias, stride, padding, dilation, transposed, _, groups = args[:9]
    ws = b.v(b.operand(w)).shape
    if (transposed or groups != 1 or any(int(s) != 1 for s in stride) or any(int(p) != 0 for p in padding)
            or any(int(d) != 1 for d in dilation) or any(not S.is_one(k) for k in ws[2:])):
        unsupported("a convolution (the offline generator serves 1x1 convolutions only, as a batched matmul; "
                    "other kernels, strides, padding or groups need an LLM)")
    xv = b.operand(x)
    xs = b.v(xv).shape
    bsz, cin, rest = xs[0], xs[1], xs[2:]
    cout = ws[0]
    x3 = view(b, xv, "reshape", (bsz, cin, S.prod(rest)))
    w2 = view(b, view(b, b.operand(w), "reshape", (cout, cin)), "unsqueeze", dim=0)
    w3 = view(b, w2, "expand", (bsz, cout, cin))
    y = b.add("mm", (w3, x3), (bsz, cout, S.prod(rest)), dtype)
    if bias is not None:
        bias3 = view(b, view(b, b.operand(bias), "reshape", (cout, S.ONE)), "unsqueeze", dim=0)
        y = b.add("add", (y, bias3), (bsz, cout, S.prod(rest)), dtype)
    return view(b, y, "reshape", (bsz, cout) + tuple(rest))
