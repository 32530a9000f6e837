"""Decide the family (label) of a reference seen over its frame and the load role of every input."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.frame.graph import FrameGraph
from kernelgen.offline.frame.view import FrameView
from kernelgen.offline.unsupported import unsupported

ROLE_PRIORITY = ("full", "col", "row", "scalar")
REDUCE_OPS = ("sum", "max", "min")


@dataclass
class Classification:
    """What kind of kernel a reference needs (not to be confused with an optimization plan)."""

    family: str  # pointwise | row_reduction | softmax | layernorm | rmsnorm | matmul
    roles: list[str]  # per input: full | col | row | scalar | mm
    summary: str


def _role(candidates: set[str]) -> str:
    for r in ROLE_PRIORITY:
        if r in candidates:
            return r
    return "full"  # shapes that broadcast differently per case: generic strided loads


def classify(view: FrameView) -> Classification:
    g = view.graph
    live = g.live()
    ops = {g.node(i).op for i in live}
    roles = ["mm" if inp.is_mm_operand else _role(inp.roles) for inp in view.inputs]
    has_reduce = bool(ops & set(REDUCE_OPS))
    if view.has_matmul:
        if has_reduce:
            unsupported("a matmul mixed with a reduction")
        family = "matmul"
    elif not has_reduce:
        family = "pointwise"
    else:
        full_out = any(o.space == "full" for o in view.outputs)
        if not full_out:
            family = "row_reduction"
        elif "max" in ops and "exp" in ops:
            family = "softmax"
        elif ops & {"rsqrt", "sqrt"} and "ncols" in ops:
            family = "layernorm" if _centres(g, live) else "rmsnorm"
        else:
            family = "row_reduction"
    inputs = ", ".join(
        f"{inp.name}[{'T' if inp.transposed else ''}{roles[i]}]" for i, inp in enumerate(view.inputs)
    )
    names = [inp.name for inp in view.inputs]
    exprs = "; ".join(_describe(g, o, names) for o in g.outputs)
    summary = f"{family}: {exprs} over {len(view.inputs)} input(s) ({inputs})"
    return Classification(family, roles, summary)


def _centres(g: FrameGraph, live: set[int]) -> bool:
    """A `x - mean` node: a full value minus a per-row value built from a sum."""
    for i in live:
        n = g.node(i)
        if n.op == "sub" and len(n.args) == 2:
            b = g.node(n.args[1])
            if b.op == "div" and [g.node(x).op for x in b.args] == ["sum", "ncols"]:
                return True
    return False


def _describe(g: FrameGraph, i: int, names: list[str], depth: int = 0) -> str:
    n = g.node(i)
    if n.op == "input":
        return names[n.attrs["index"]]
    if n.op == "param":
        return n.attrs["name"]
    if n.op == "const":
        return repr(n.attrs["value"])
    if n.op == "ncols":
        return "n"
    if depth > 3:
        return "…"
    return f"{n.op}(" + ", ".join(_describe(g, a, names, depth + 1) for a in n.args) + ")"
