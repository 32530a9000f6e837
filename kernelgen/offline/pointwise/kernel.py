"""Kernel text of the pointwise family: per tile of the frame, loads, one statement per IR node,
stores (kernelgen.offline.frame.emitter has what it shares with the row kernels)."""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.offline.frame.emitter import REDUCTIONS, Emitter, partial, row_offsets, signature
from kernelgen.offline.frame.graph import FrameGraph
from kernelgen.offline.naming import Names
from kernelgen.offline.pointwise.knobs import PointwiseKnobs
from kernelgen.offline.unsupported import unsupported


@dataclass
class PointwiseKernel:
    params: list[tuple[str, str]]  # (argument, comment)
    pointers: list[str]  # the launch's first arguments: the wrapper's tensors and scalar params
    sizes: list[str]  # the rest, from the wrapper's plan: the frame's sizes and strides
    body: list[str]  # after the program's index arithmetic: row offsets, loads, statements, stores


def pointwise_kernel(graph: FrameGraph, roles: list[str], names: Names, params: list[str],
                     knobs: PointwiseKnobs) -> PointwiseKernel:
    """The per-tile statements after the program's index arithmetic (which the template writes)."""
    mode = knobs.grid
    em = Emitter(graph, roles, names, mode, knobs.eviction, knobs.erf)
    args, launch, sizes = signature(graph, roles, names, ["full"] * len(graph.outputs), params)
    size_knobs = [("BLOCK_R", "rows per program"), ("BLOCK_C", "columns per program")] if mode == "2d" \
        else [("BLOCK_SIZE", "elements per program")]
    args += [(f"{k}: tl.constexpr", c) for k, c in size_knobs]
    used = {graph.node(i).attrs["index"] for i in graph.live() if graph.node(i).op == "input"}
    body = row_offsets(em, used)
    for n in graph.nodes:
        if not em.emits(n):
            continue
        if n.op == "input":
            body.append(em.load(n))
        else:
            if n.op in REDUCTIONS:
                unsupported("a reduction in a pointwise kernel")
            body.append(em.statement(n))
    offs = "rows[:, None] * n_cols + cols[None, :]" if mode == "2d" else "offs"
    full = "[BLOCK_R, BLOCK_C]" if mode == "2d" else "[BLOCK_SIZE]"
    for k, oid in enumerate(graph.outputs):
        n = graph.node(oid)
        val = em.var(n)
        if n.space == "scalar":
            val = f"(tl.zeros({full}, tl.float32) + {val})"
        elif mode == "2d" and partial(graph, oid, roles):
            val = f"tl.broadcast_to({val}, {full})"
        name = names.outputs[k]
        body.append(f"tl.store({name}_ptr + {offs}, {val}.to({name}_ptr.dtype.element_ty), mask=mask)")
    return PointwiseKernel(args, launch, sizes, body)
