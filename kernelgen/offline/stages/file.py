"""The file of a program of stages: its kernels, the host path and its dispatch table, rendered through
templates/offline/<family>.py.j2 (which extends stages.py.j2)."""

from __future__ import annotations

from kernelgen.offline.dispatch import Route, knobs_assignment, table
from kernelgen.offline.naming import Names
from kernelgen.offline.runtime import RUNTIME_IMPORT, with_runtime_import
from kernelgen.offline.selfcheck import main_context
from kernelgen.offline.stages import host
from kernelgen.offline.stages.analysis import StageAnalysis, route_input
from kernelgen.offline.stages.launch import CONFIG
from kernelgen.render import render
from kernelgen.spec import OperatorSpec


def stage_file(spec: OperatorSpec, analysis: StageAnalysis, routes_: list[Route], family: str,
               summary: str | None = None) -> str:
    """The file: `routes_[0]` is the base knobs (_KNOBS), any other route a _DISPATCH entry; `family`
    (its template) and `summary`: what the family that writes it calls it."""
    knobs = routes_[0].knobs
    names = Names(spec)
    g, prog, kernels = analysis.traced.graph, analysis.program, list(analysis.kernels)
    ctx = host.context(g, prog, list(names.inputs), kernels, analysis.anchors)
    for s, k in zip(ctx["stages"], kernels):
        buffers = (s["operand_buffers"] if s["kind"] == "matmul" or s["anchored"] else []) + [p.buffer for p in k.ports]
        s["pointers"], s["n_tensors"] = buffers + list(k.params_used), len(buffers)
    kinds = {s["kind"] for s in ctx["stages"] if not s["anchored"]}
    uses = {"matmul": "matmul" in kinds, "tiles": bool(kinds - {"matmul"})}  # the helpers the file calls
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
    return with_runtime_import(render(
        f"offline/{family}.py.j2", runtime_import=RUNTIME_IMPORT,
        name=spec.name, description=" ".join(spec.description.split()) or spec.name,
        summary=summary or analysis.summary,
        knobs=", ".join(f"{k}={'auto' if v is None else v}" for k, v in knobs.model_dump().items()),
        knob_lines=knobs_assignment("_KNOBS", knobs.model_dump()),
        dispatch=table(routes_, spec) if len(routes_) > 1 else [],
        kernels=kernels, needs_prod=any("_prod" in getattr(k, "helpers", ()) for k in kernels), family=family,
        stages=ctx["stages"], binds=ctx["binds"], checks=ctx["checks"], temps=ctx["temps"],
        outputs=ctx["outputs"], output_names=[o["name"] for o in ctx["outputs"]],
        temp_names=[t["name"] for t in ctx["temps"]], returns=ctx["returns"],
        inputs=list(names.inputs), ranks=ranks, route=route, out_dtypes=out_dtypes,
        signature=spec.signature, config=CONFIG, main=main_context(spec, names), uses=uses,
        aligned=aligned(names.inputs),
    ))


def aligned(inputs: list[str]) -> str:
    """The wrapper's test that every input starts on 16 bytes (Triton specialises pointers on it)."""
    ptrs = [f"{n}.data_ptr()" for n in inputs]
    return f"not {ptrs[0]} & 15" if len(ptrs) == 1 else f"not ({' | '.join(ptrs)}) & 15"
