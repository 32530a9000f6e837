"""A program of stages from the front end's trace: the IR cut into stages (schedule.py) and one kernel
per stage -- the engine's own (pointwise, reduce, scan: emit_tile.py; matmul: emit_matmul.py) or, for
a stage kind a family brings (anchors.py), that family's."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelgen.offline.frontend.trace import Traced
from kernelgen.offline.naming import Names
from kernelgen.offline.stages.access import StageKernel
from kernelgen.offline.stages.anchors import AnchorKind
from kernelgen.offline.stages.emit_matmul import matmul_kernel
from kernelgen.offline.stages.emit_tile import tile_kernel
from kernelgen.offline.stages.program import Program
from kernelgen.offline.stages.schedule import schedule
from kernelgen.spec import OperatorSpec


@dataclass(frozen=True)
class StageAnalysis:
    traced: Traced
    program: Program
    kernels: tuple[StageKernel, ...]  # one per stage, in launch order (no knob changes their text)
    summary: str
    anchors: dict[str, AnchorKind]  # the stage kinds a family brought (kind -> its emitter, plan, launch)


def analyse(spec: OperatorSpec, traced: Traced, anchors: tuple[AnchorKind, ...] = ()) -> StageAnalysis:
    """The program of `traced` and its kernels (scheduling and emitting every stage costs ~10-50 ms:
    the route keeps the result for round 0, every file and pruning)."""
    names = Names(spec)
    g = traced.graph
    prog = schedule(g, list(names.inputs), list(names.outputs))
    emitters = {"matmul": matmul_kernel, **{a.kind: a.kernel for a in anchors}}  # the rest are tile stages
    kernels = tuple(emitters.get(st.kind, tile_kernel)(g, st, prog.buffers, f"_{spec.name}_stage{st.id}_kernel")
                    for st in prog.stages)
    kinds = [st.kind for st in prog.stages]
    summary = f"nd: {len(prog.stages)} stage(s) ({', '.join(kinds)}) over {len(spec.inputs)} input(s)"
    return StageAnalysis(traced, prog, kernels, summary, {a.kind: a for a in anchors})


def route_input(spec: OperatorSpec) -> str:
    """The input whose dtype is the case dtype: it keys the output dtypes and the dispatch table."""
    return next((i.name for i in spec.inputs if i.dtype is None), spec.input_names[0])


def dispatch_key(spec: OperatorSpec, shapes: dict[str, list[int]]) -> tuple[int, int]:
    """A case's dispatch key: the route input seen as [product of its leading dims, its last dim]."""
    shape = shapes[route_input(spec)]
    return (max(math.prod(shape[:-1]), 1), max(shape[-1], 1)) if shape else (1, 1)
