"""Triton expressions for the values of a stage: pointwise ops through kernelgen.offline.frontend.exprs (the
classic generator's table), plus what the n-dimensional IR adds (isnan, frame indices)."""

from __future__ import annotations

import kernelgen.offline.frontend.exprs as exprs
from kernelgen.offline.frontend.ir import Graph, Value

EXTRA = {
    "isnan": "({a} != {a})",
    "isinf": '(tl.abs({a}) == float("inf"))',
    "isfinite": '(tl.abs({a}) < float("inf"))',
}


def var(g: Graph, u: int) -> str:
    """How a value is named in a kernel: params by name, literals inline, the rest v<id>."""
    v = g[u]
    if v.op == "param":
        return v.attrs["name"]
    if v.op == "const":
        return exprs.literal(v.attrs["value"])
    if v.op == "size":
        return f"c{u}"
    if v.op == "full":
        return exprs.literal(v.attrs["value"])
    return f"v{u}"


def pointwise(g: Graph, v: Value) -> str:
    args = [var(g, a) for a in v.args]
    if v.op in EXTRA:
        return EXTRA[v.op].format(a=args[0])
    return exprs.pointwise(v, args, [g[a] for a in v.args])  # type: ignore[arg-type]


def is_scalar_leaf(v: Value) -> bool:
    return v.op in ("param", "const", "size", "full")
