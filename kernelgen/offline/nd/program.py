"""An n-dimensional program: the front end's trace cut into stages (schedule.py), one kernel per
stage, and the file around them -- the host path and its dispatch table -- rendered through
templates/offline/nd.py.j2."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Union

from kernelgen.offline.dispatch import Route, literal, table
from kernelgen.offline.frontend.trace import Traced, traced_spec
from kernelgen.offline.naming import Names
from kernelgen.offline.nd import host
from kernelgen.offline.nd.emit_conv import ConvKernel, conv_kernel
from kernelgen.offline.nd.emit_matmul import MatmulKernel, matmul_kernel
from kernelgen.offline.nd.emit_tile import TileKernel, tile_kernel
from kernelgen.offline.nd.launch import CONFIG
from kernelgen.offline.nd.schedule import schedule
from kernelgen.offline.nd.stages import Program
from kernelgen.offline.selfcheck import main_context
from kernelgen.render import render
from kernelgen.spec import OperatorSpec

StageKernel = Union[TileKernel, MatmulKernel, ConvKernel]
EMITTERS = {"matmul": matmul_kernel, "conv": conv_kernel}  # the anchored stage kinds; the rest are tiles


@dataclass(frozen=True)
class NdAnalysis:
    traced: Traced
    program: Program
    kernels: tuple[StageKernel, ...]  # one per stage, in launch order (no knob changes their text)
    summary: str


def analyse_nd(spec: OperatorSpec) -> NdAnalysis:
    names = Names(spec)
    traced = traced_spec(spec.model_dump_json())
    g = traced.graph
    prog = schedule(g, list(names.inputs), list(names.outputs))
    kernels = tuple(EMITTERS.get(st.kind, tile_kernel)(g, st, prog.buffers, f"_{spec.name}_stage{st.id}_kernel")
                    for st in prog.stages)
    kinds = [st.kind for st in prog.stages]
    summary = f"nd: {len(prog.stages)} stage(s) ({', '.join(kinds)}) over {len(spec.inputs)} input(s)"
    return NdAnalysis(traced, prog, kernels, summary)


@functools.lru_cache(maxsize=64)
def analyse_nd_cached(spec_json: str) -> NdAnalysis:
    # generate, prune and round 0 ask for it in turn; scheduling and emitting every stage costs ~10-50 ms
    return analyse_nd(OperatorSpec.model_validate_json(spec_json))


def has_conv(spec_json: str) -> bool:
    """Whether the reference's trace computes a convolution (a `conv` value its outputs depend on):
    the conv family's programs, which the nd family leaves to it."""
    g = traced_spec(spec_json).graph
    return any(g[u].op == "conv" for u in g.live())


def route_input(spec: OperatorSpec) -> str:
    """The input whose dtype is the case dtype: it keys the output dtypes and the dispatch table."""
    return next((i.name for i in spec.inputs if i.dtype is None), spec.input_names[0])


def dispatch_key(spec: OperatorSpec, shapes: dict[str, list[int]]) -> tuple[int, int]:
    """A case's dispatch key: the route input seen as [product of its leading dims, its last dim]."""
    import math

    shape = shapes[route_input(spec)]
    return (max(math.prod(shape[:-1]), 1), max(shape[-1], 1)) if shape else (1, 1)


def generate_nd_source(spec: OperatorSpec, analysis: NdAnalysis, routes_: list[Route], family: str = "nd",
                       summary: str | None = None) -> str:
    """The file: `routes_[0]` is the base knobs (_KNOBS), any other route a _DISPATCH entry; `family`
    and `summary`: what the family that writes it calls it (a conv program is an nd program whose
    first stage is a convolution)."""
    knobs = routes_[0].knobs
    names = Names(spec)
    g, prog, kernels = analysis.traced.graph, analysis.program, list(analysis.kernels)
    ctx = host.context(g, prog, list(names.inputs), kernels)
    for s, k in zip(ctx["stages"], kernels):
        buffers = (s["operand_buffers"] if s["kind"] in EMITTERS else []) + [p.buffer for p in k.ports]
        s["pointers"] = buffers + list(k.params_used)
    route = route_input(spec)
    route_index = spec.input_names.index(route)
    out_dtypes: list[tuple[str, list[str]]] = []
    seen = set()
    for d, outs in analysis.traced.out_dtypes.items():
        key = spec.input_dtype(spec.inputs[route_index], d)
        if key in seen:
            continue
        seen.add(key)
        out_dtypes.append((host.DTYPE[key], [host.DTYPE[o] for o in outs]))
    ranks = [len(spec.test_cases[0][n]) for n in spec.input_names]
    return render(
        "offline/nd.py.j2",
        name=spec.name, description=" ".join(spec.description.split()) or spec.name,
        summary=summary or analysis.summary,
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        knob_items=[(k, literal(v)) for k, v in knobs.model_dump().items()],
        dispatch=table(routes_, spec) if len(routes_) > 1 else [],
        kernels=kernels, needs_prod=any(getattr(k, "needs_prod", False) for k in kernels), family=family,
        has_conv=any(k.kind == "conv" for k in kernels),
        stages=ctx["stages"], binds=ctx["binds"], checks=ctx["checks"], temps=ctx["temps"],
        outputs=ctx["outputs"], output_names=[o["name"] for o in ctx["outputs"]],
        temp_names=[t["name"] for t in ctx["temps"]], returns=ctx["returns"],
        inputs=list(names.inputs), ranks=ranks, route=route, out_dtypes=out_dtypes,
        signature=spec.signature, config=CONFIG, main=main_context(spec, names),
    )
