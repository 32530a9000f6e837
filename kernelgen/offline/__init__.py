"""The offline generator: correct, fast Triton kernels for common operator families, no LLM needed.

    kern = generate_kernel(spec)            # shape-aware default heuristics in the file
    kern = generate_kernel(spec, {"num_warps": 8})   # one knob fixed, the rest default
    kern = generate_kernel(spec, knobs, dispatch=[DispatchEntry(...), ...])  # per-shape routes
    kern = first_kernel(spec, sm_count=132)     # round 0: per perf case, the algorithm the analysis picks
    kern.knobs                              # the typed knobs baked in (kernelgen.offline.knobs)
    space = knob_space(spec)                # what the optimize loop may vary (None: the file's heuristic)
    prune(spec, "algorithm", space["algorithm"], kern.knobs, shapes, "bfloat16", 132)  # before timing

The kernel is derived from the spec's `reference` (traced to ATen ops), never from its name.
Operators outside the families raise UnsupportedOperatorError saying how to configure an LLM.

The pipeline, one module per job:
    analysis.py   the two below, once per spec content (cached)
    trace.py      run the reference on every test case (make_fx), check the traces agree, learn
                  each input's role and each output's dtype rule          -> Traced
    lowering.py   one fx graph -> the IR of ir.py (nodes in a frame: full / row / scalar)
    classify.py   the family and each input's load role                   -> Classification
    knobs.py      the typed knobs of each family and their candidates
    dispatch.py   per-shape dispatch entries and the routes they make (base knobs + overrides)
    rowgen.py     per-node statements of pointwise and row kernels (exprs.py: one op, one expression)
    fusion.py     which row reductions fold into one read pass (online softmax, Welford)
    nd/           everything the families above refuse that stays within reductions over any dims,
                  norms, losses, scans, batched matmuls and their epilogues: a symbolic-shape trace
                  cut into stages (one kernel each) joined by buffers (kernelgen.offline.nd)
    rowvariants.py  the online and split row kernels built on both
    matgen.py     the epilogue statements of matmul kernels
    selfcheck.py  the generated file's __main__ block
    codegen.py    everything above as data for templates/offline/<family>.py.j2 (shared pieces in
                  _macros.py.j2), rendered through kernelgen.render
    launch.py     a Python model of the generated _launch_config (what a knob value launches)
    pruning.py    the rules that drop knob values before anything is timed
    round0.py     round 0's dispatch table from the analysis (algorithm, tile, warps per perf case)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelgen.offline.analysis import analyse, route
from kernelgen.offline.dispatch import DispatchEntry
from kernelgen.offline.knobs import Knobs
from kernelgen.spec import OperatorSpec

if TYPE_CHECKING:
    from kernelgen.offline.pruning import Pruned

__all__ = ["DispatchEntry", "OfflineKernel", "first_kernel", "generate_kernel", "knob_space", "prune"]


@dataclass(frozen=True)
class OfflineKernel:
    source: str  # full text of <name>_triton.py
    family: str  # pointwise | row_reduction | softmax | layernorm | rmsnorm | matmul | nd
    knobs: Knobs  # the knob settings baked into the source (the base route)
    summary: str  # one line: what was traced
    dispatch: tuple[DispatchEntry, ...] = ()  # the per-shape entries routed to their own knobs


def generate_kernel(spec: OperatorSpec, knobs: Knobs | Mapping[str, Any] | None = None,
                    dispatch: list[DispatchEntry] | None = None) -> OfflineKernel:
    """Trace `spec.reference`, pick the family, emit the kernel file with `knobs` baked in: the
    family's typed knobs, or a dict overriding some of their defaults (ValueError if unknown).
    `dispatch`: measured cases routed to their own knobs (kernelgen.offline.dispatch); ValueError
    naming the entry when one cannot be served (an unknown input, a knob the family lacks, online
    for reductions that need a pass per level)."""
    import copy

    from kernelgen.offline.codegen import generate_source
    from kernelgen.offline.knobs import resolve

    if route(spec.model_dump_json()) == "nd":
        from kernelgen.offline.nd import generate_nd

        source, nd_knobs, summary = generate_nd(spec, knobs, dispatch)
        return OfflineKernel(source=source, family="nd", knobs=nd_knobs, summary=summary)
    traced, kind = analyse(spec.model_dump_json())
    traced = copy.deepcopy(traced)  # codegen annotates the graph; keep the cached copy clean
    resolved = resolve(kind.family, knobs)
    entries = [e if isinstance(e, DispatchEntry) else DispatchEntry.model_validate(e) for e in dispatch or []]
    source = generate_source(spec, traced, kind, resolved, entries)
    return OfflineKernel(source=source, family=kind.family, knobs=resolved, summary=kind.summary, dispatch=tuple(entries))


def first_kernel(spec: OperatorSpec, sm_count: int | None = None) -> OfflineKernel:
    """Round 0's kernel: the family's default knobs, and a dispatch table giving each perf case x dtype
    the row algorithm, tile and warps the analysis picks for a device of `sm_count` SMs (None: 132,
    an H100/H200): kernelgen.offline.round0. Pointwise and matmul files keep their heuristics."""
    from kernelgen.offline.round0 import first_dispatch

    if route(spec.model_dump_json()) == "nd":
        return generate_kernel(spec)  # no row-algorithm choice to make: its tile heuristics decide per call
    return generate_kernel(spec, None, dispatch=first_dispatch(spec, sm_count))


def knob_space(spec: OperatorSpec) -> dict[str, list[Any]]:
    """The tunable variables of the spec's family and their candidate values (first = default)."""
    from kernelgen.offline.knobs import knobs_class

    if route(spec.model_dump_json()) == "nd":
        from kernelgen.offline.nd.knobs import NdKnobs

        return NdKnobs.space()
    _, kind = analyse(spec.model_dump_json())
    return knobs_class(kind.family).space()


def prune(spec: OperatorSpec, knob: str, values: list[Any], base: Knobs | Mapping[str, Any],
          shapes: Mapping[str, list[int]], dtype: str, sm_count: int | None) -> list[Pruned]:
    """Which values of `knob` are worth timing at one case (input name -> shape, in `dtype`, on a
    device of `sm_count` SMs; None: 132), each with the reason: kernelgen.offline.pruning."""
    from kernelgen.offline.pruning import prune as _prune

    if route(spec.model_dump_json()) == "nd":
        from kernelgen.offline.nd import prune_nd

        return prune_nd(spec, knob, values, base)
    return _prune(spec, knob, values, base, dict(shapes), dtype, sm_count)
