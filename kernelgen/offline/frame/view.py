"""The reference seen over its output frame, for the pointwise, row and matmul families: the frame
graph (kernelgen.offline.frame.project), each input's possible roles in every test case (the whole
frame, a column vector, a row vector, a scalar), each output's space and dtype rule.

The frame of a case is the inputs' broadcast shape, or [M, N] for a matmul; an input whose shape
is the frame's last dim alone is a column vector (a bias), one whose shape is the frame's leading
dims is a row vector (a per-row gate). Roles come from the spec's own test cases (the shapes the
kernel is checked on), outputs' shapes from running the reference on shape-only tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from kernelgen.offline.frame.graph import FrameGraph
from kernelgen.offline.frame.project import Projection, project
from kernelgen.offline.frontend.outputs import DtypeRule, dtype_rule, case_dtype_inputs, output_shapes, promoting_inputs
from kernelgen.offline.frontend.trace import Traced
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import OperatorSpec, load_reference

VIEWED_CASES = 6  # test cases whose shapes decide the inputs' roles and the outputs' spaces


@dataclass
class InputInfo:
    name: str
    roles: set[str]  # which of full/col/row/scalar this input's shape allows in every test case
    is_mm_operand: bool = False
    transposed: bool = False


@dataclass
class OutputInfo:
    space: str  # "full" or "row"
    keepdim: bool  # row outputs: [..., 1] (True) or [...] (False)
    dtype_rule: DtypeRule


@dataclass
class FrameView:
    graph: FrameGraph
    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    returns_tuple: bool
    params: list[str]
    has_matmul: bool
    # inputs the wrapper requires to share one dtype: set when the reference would not run with
    # mixed float dtypes, so how it promotes them is unknown (empty: it promotes as Promoted says)
    same_dtype_inputs: list[int] = field(default_factory=list)


def strip_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) - 1 and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def frame_view(spec: OperatorSpec, traced: Traced) -> FrameView:
    """The view of the front end's trace (NotServed naming what the frame families do not serve)."""
    projection = project(traced.graph)
    fn = load_reference(spec)
    roles: list[set[str]] | None = None
    out_kinds: list[list[tuple[str, bool]]] = []
    for case in spec.test_cases[:VIEWED_CASES]:
        shapes = [tuple(case[n]) for n in spec.input_names]
        frame = _frame(projection, shapes)
        case_roles = [_roles(s, frame) for s in shapes]
        roles = case_roles if roles is None else [r & c for r, c in zip(roles, case_roles)]
        out_kinds.append([_output_kind(s, frame) for s in output_shapes(spec, fn, case)])
    assert roles is not None
    if any(o != out_kinds[0] for o in out_kinds):
        unsupported("outputs whose kind (per element or per row) changes with the input shape")
    graph = projection.graph
    promoting = promoting_inputs(spec, fn, len(out_kinds[0]))
    outputs = [OutputInfo(space, keepdim, dtype_rule(spec, traced.out_dtypes, k, promoting[k] if promoting else set()))
               for k, (space, keepdim) in enumerate(out_kinds[0])]
    used = {n.attrs["index"] for n in graph.nodes if n.op == "input" and n.id in graph.live()}
    same_dtype = [] if promoting is not None else [i for i in case_dtype_inputs(spec) if i in used]
    inputs = [InputInfo(name=inp.name, roles=roles[i], is_mm_operand=i in projection.mm_operands,
                        transposed=projection.mm_operands.get(i, False))
              for i, inp in enumerate(spec.inputs)]
    return FrameView(graph=graph, inputs=inputs, outputs=outputs, returns_tuple=traced.graph.returns_tuple,
                     params=list(traced.params), has_matmul=any(n.op == "mm" for n in graph.nodes),
                     same_dtype_inputs=same_dtype if len(same_dtype) > 1 else [])


def _roles(shape: tuple[int, ...], frame: tuple[int, ...]) -> set[str]:
    s = strip_leading_ones(shape)
    f = strip_leading_ones(frame)
    roles = set()
    if s == f:
        roles.add("full")
    if len(f) >= 1 and s == (f[-1],):
        roles.add("col")
    if len(f) >= 1 and s == strip_leading_ones(tuple(f[:-1]) + (1,)):
        roles.add("row")
    if math.prod(s) == 1:
        roles.add("scalar")
    return roles


def _frame(projection: Projection, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The output frame of one case: [M, N] for a matmul, else the inputs' broadcast shape."""
    import torch  # ~1 s: only when a spec is analysed, not when kernelgen.offline is imported

    g = projection.graph
    mm = next((n for n in g.nodes if n.op == "mm"), None)
    if mm is None:
        try:
            return tuple(torch.broadcast_shapes(*shapes)) if shapes else ()
        except RuntimeError:
            unsupported(f"inputs whose shapes do not broadcast together ({', '.join(map(str, map(list, shapes)))})")
    ia, ib = (g.nodes[i].attrs["index"] for i in mm.args)
    a_shape, b_shape = shapes[ia], shapes[ib]
    m = a_shape[1] if projection.mm_operands[ia] else a_shape[0]
    n = b_shape[0] if projection.mm_operands[ib] else b_shape[1]
    return (m, n)


def _output_kind(shape: tuple[int, ...], frame: tuple[int, ...]) -> tuple[str, bool]:
    """(space, keepdim) of an output of `shape` in `frame`."""
    if strip_leading_ones(shape) == strip_leading_ones(frame):
        kind = ("full", len(shape) > len(frame))
    elif len(frame) >= 1 and strip_leading_ones(shape) == strip_leading_ones(tuple(frame[:-1]) + (1,)) and len(shape) == len(frame):
        kind = ("row", True)
    elif len(frame) >= 1 and shape == tuple(frame[:-1]):
        kind = ("row", False)
    else:
        unsupported(f"an output of shape {list(shape)} that is neither the broadcast shape {list(frame)} nor one value per row")
    if len(shape) > len(frame):
        unsupported("an output of higher rank than its inputs")
    return kind
