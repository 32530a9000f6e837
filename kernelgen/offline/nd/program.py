"""An n-dimensional program's file: trace, schedule, one kernel per stage, the host path, rendered
through templates/offline/nd_program.py.j2."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kernelgen.offline.naming import Names
from kernelgen.offline.nd import host
from kernelgen.offline.nd.emit_matmul import matmul_kernel
from kernelgen.offline.nd.emit_tile import tile_kernel
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.nd.schedule import schedule
from kernelgen.offline.nd.stages import Program
from kernelgen.offline.frontend.trace import Traced, trace_reference
from kernelgen.offline.selfcheck import main_context
from kernelgen.render import render
from kernelgen.spec import OperatorSpec

# Launch heuristics of the generated file (its _tile_config): a reduction whose elements fit 16384
# (64 KB of fp32 per program) is read once into registers; pointwise programs hold 4096 elements.
CONFIG = {"single": 16384, "tile": 4096, "pointwise": 4096, "scan": 1024}


@dataclass(frozen=True)
class NdAnalysis:
    traced: Traced
    program: Program
    summary: str


def analyse_nd(spec: OperatorSpec) -> NdAnalysis:
    names = Names(spec)
    traced = trace_reference(spec)
    g = traced.graph
    prog = schedule(g, list(names.inputs), list(names.outputs))
    kinds = [st.kind for st in prog.stages]
    summary = f"nd: {len(prog.stages)} stage(s) ({', '.join(kinds)}) over {len(spec.inputs)} input(s)"
    return NdAnalysis(traced, prog, summary)


def _rename_temps(prog: Program, taken: set[str]) -> None:
    """Temporaries named clear of the spec's inputs and outputs."""
    for b in list(prog.buffers.values()):
        if b.kind == "temp" and b.name in taken:
            raise AssertionError("a temporary named like an input")  # temps are t<k>; Names keeps inputs apart


def generate_nd_source(spec: OperatorSpec, analysis: NdAnalysis, knobs: Any = None) -> str:
    from kernelgen.offline.dispatch import literal
    from kernelgen.offline.nd.knobs import NdKnobs

    knobs = knobs or NdKnobs()
    names = Names(spec)
    g: Graph = analysis.traced.graph
    prog = analysis.program
    kernels: list[Any] = []
    for st in prog.stages:
        kname = f"_{spec.name}_stage{st.id}_kernel"
        if st.kind == "matmul":
            kernels.append(matmul_kernel(g, st, prog.buffers, kname))
        else:
            kernels.append(tile_kernel(g, st, prog.buffers, kname))
    ctx = host.context(g, prog, list(names.inputs), kernels)
    for s, k in zip(ctx["stages"], kernels):
        buffers = ([] if s["kind"] != "matmul" else s["operand_buffers"]) + [p.buffer for p in k.ports]
        s["pointers"] = buffers + list(k.params_used)
    route = next((i.name for i in spec.inputs if i.dtype is None), spec.input_names[0])
    route_index = spec.input_names.index(route)
    out_dtypes = []
    seen = set()
    for d, outs in analysis.traced.out_dtypes.items():
        key = spec.input_dtype(spec.inputs[route_index], d)
        if key in seen:
            continue
        seen.add(key)
        out_dtypes.append((host.DTYPE[key], [host.DTYPE[o] for o in outs]))
    ranks = [len(spec.test_cases[0][n]) for n in spec.input_names]
    return render(
        "offline/nd_program.py.j2",
        name=spec.name, description=" ".join(spec.description.split()) or spec.name,
        summary=analysis.summary,
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        knob_items=[(k, literal(v)) for k, v in knobs.model_dump().items()],
        kernels=kernels, needs_prod=any(getattr(k, "needs_prod", False) for k in kernels),
        stages=ctx["stages"], binds=ctx["binds"], checks=ctx["checks"], temps=ctx["temps"],
        outputs=ctx["outputs"], output_names=[o["name"] for o in ctx["outputs"]],
        temp_names=[t["name"] for t in ctx["temps"]], returns=ctx["returns"],
        inputs=list(names.inputs), ranks=ranks, route=route, out_dtypes=out_dtypes,
        signature=spec.signature, config=CONFIG, main=main_context(spec, names),
    )


@functools.lru_cache(maxsize=64)
def analyse_nd_cached(spec_json: str) -> NdAnalysis:
    # Tracing every test case symbolically costs 0.2-1 s; validate, generate and the knob space ask for it in turn.
    return analyse_nd(OperatorSpec.model_validate_json(spec_json))
