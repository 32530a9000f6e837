"""Triton expressions for the values of a stage: pointwise ops through the front end's expression
table (kernelgen.offline.frontend.exprs), leaves by name or as literals."""

from __future__ import annotations

import kernelgen.offline.frontend.exprs as exprs
from kernelgen.offline.frontend.ir import Graph, Value


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
    return exprs.pointwise(v, [var(g, a) for a in v.args], [g[a] for a in v.args])


def is_scalar_leaf(v: Value) -> bool:
    return v.op in ("param", "const", "size", "full")
