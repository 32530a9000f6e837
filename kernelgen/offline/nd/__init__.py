"""The n-dimensional generator: what the classic families (pointwise over a broadcast frame, one
reduction over the last dim, a 2-D matmul with a pointwise epilogue) refuse, within reductions over
any dims (argmax, prod, p-norms, down to a scalar), normalizations over any dims (layer, group,
batch, instance, RMS), losses, scans (cumsum, cumprod, reversed, exclusive, masked), batched and
n-D matmuls with epilogues (diag, triu/tril, bias, activations, row reductions and norms after
them), as a program of stages.

    trace.py      symbolic-shape traces of every test case, checked to agree     -> ir.Graph
    lower.py      ATen -> IR (lower_ops.py: pointwise and views; lower_reduce.py: reductions, norms)
    schedule.py   the IR cut into stages and the buffers between them            -> stages.Program
    frames.py     where each value of a stage lives in its frame; which dims merge
    access.py     how a stage's kernel names its loads and stores
    emit_tile.py  kernels of pointwise, reduce (emit_reduce.py) and scan stages
    emit_matmul.py  kernels of matmul stages
    host.py       the wrapper's plan, as data for templates/offline/nd_program.py.j2
    program.py    the file
    knobs.py      the family's knobs
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kernelgen.spec import OperatorSpec

if TYPE_CHECKING:
    from kernelgen.offline.pruning import Pruned


def resolve_nd(knobs: Any) -> Any:
    from pydantic import ValidationError

    from kernelgen.offline.nd.knobs import NdKnobs

    if isinstance(knobs, NdKnobs):
        return knobs
    given = dict(knobs or {})
    unknown = [k for k in given if k not in NdKnobs.model_fields]
    if unknown:
        raise ValueError(f"unknown knob {unknown[0]!r} for the nd family; known: {', '.join(NdKnobs.model_fields)}")
    try:
        return NdKnobs.model_validate(given)
    except ValidationError as e:
        err = e.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "?"
        raise ValueError(f"knob {name}={given.get(name)!r} is not valid for the nd family: {err['msg']}") from None


def generate_nd(spec: OperatorSpec, knobs: Mapping[str, Any] | Any | None = None,
                dispatch: list | None = None) -> tuple[str, Any, str]:
    """The program's source, the knobs baked into it, and a one-line summary of what was traced
    (kernelgen.offline.generate_kernel wraps them in its OfflineKernel)."""
    from kernelgen.offline.nd.program import analyse_nd_cached, generate_nd_source

    if dispatch:
        raise ValueError("the nd family has no per-shape dispatch table yet: one setting serves every shape")
    resolved = resolve_nd(knobs)
    analysis = analyse_nd_cached(spec.model_dump_json())
    source = generate_nd_source(spec, analysis, resolved)
    return source, resolved, analysis.summary


def prune_nd(spec: OperatorSpec, knob: str, values: list, base: Any) -> list["Pruned"]:
    """The nd family has no launch model to prune with yet: every valid value is timed."""
    from kernelgen.offline.pruning import Pruned

    out = []
    base = resolve_nd(base)
    for v in values:
        try:
            resolve_nd({**base.model_dump(), knob: v})
            out.append(Pruned(v, True, "no pruning rules for the nd family: timed"))
        except ValueError as e:
            out.append(Pruned(v, False, str(e)))
    return out
