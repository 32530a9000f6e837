"""Trace a spec's PyTorch reference into the offline IR, and check the trace holds for every case.

`make_fx` records the ATen ops the reference runs on small real inputs (the spec's own test
shapes); kernelgen.offline.frame.lowering turns each recorded graph into the IR. Every test case is
traced and the structures must agree, which catches shape-dependent Python in the reference.

Scalar params are found by tracing with sentinel values: a literal equal to a sentinel becomes the
param; a second trace with the defaults must differ exactly there. Nothing here guesses from the
operator's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Union

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelgen.offline.frame.graph import Graph, Node
from kernelgen.offline.frame.lowering import DECOMPOSE, Lowered, lower, strip_leading_ones
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import FLOAT_DTYPES, OperatorSpec, draw_inputs, load_reference


# --- how an output's dtype follows the inputs' (the same for every case dtype of the spec) --------
@dataclass(frozen=True)
class LikeInput:
    """The output has the dtype of input `index` (x + bias: like x)."""

    index: int


@dataclass(frozen=True)
class FixedDtype:
    """The output always has this dtype (a comparison: bool; `.float()`: float32)."""

    dtype: str


@dataclass(frozen=True)
class Promoted:
    """The output has the dtype PyTorch promotes these inputs to (x + bias with x float16 and bias
    float32: float32). In the spec's cases they share one dtype, so this is LikeInput there."""

    indices: tuple[int, ...]


@dataclass(frozen=True)
class DtypeTable:
    """The output dtype per case dtype, when neither rule above fits."""

    by_case_dtype: dict[str, str]


DtypeRule = Union[LikeInput, FixedDtype, Promoted, DtypeTable]


@dataclass
class InputInfo:
    name: str
    roles: set[str]  # which of full/col/row/scalar this input's shape allows in every traced case
    is_mm_operand: bool = False
    transposed: bool = False


@dataclass
class OutputInfo:
    space: str  # "full" or "row"
    keepdim: bool  # row outputs: [..., 1] (True) or [...] (False)
    dtype_rule: DtypeRule


@dataclass
class Traced:
    graph: Graph
    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    returns_tuple: bool
    params: list[str]
    has_matmul: bool
    # inputs the wrapper requires to share one dtype: set when the reference would not run with
    # mixed float dtypes, so how it promotes them is unknown (empty: it promotes as Promoted says)
    same_dtype_inputs: list[int] = field(default_factory=list)


def _decompositions() -> dict:
    from torch._decomp import get_decompositions

    return get_decompositions(DECOMPOSE)


def _sample_inputs(spec: OperatorSpec, case: dict, dtype: str) -> list[torch.Tensor]:
    """Inputs drawn the way the harness draws them (each input's `init`), on the CPU: the trace
    must see the values the kernel will be checked on (integer ranges, masks)."""
    return draw_inputs(spec, case, dtype, 0, "cpu")


def _sentinels(spec: OperatorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, p in enumerate(spec.params):
        if p.type == "float":
            out[p.name] = 0.4142135 + 0.0173 * i  # unlikely to collide with a literal in user code
        elif p.type == "int":
            out[p.name] = 7919 + 13 * i
    return out


def _trace_once(fn: Callable, inputs: list[torch.Tensor], params: dict[str, Any],
                sentinels: dict[str, Any]) -> tuple[Lowered, Any]:
    def call(*xs: torch.Tensor) -> Any:
        return fn(*xs, **params)

    try:
        gm = make_fx(call, decomposition_table=_decompositions())(*inputs)
    except Exception as e:  # noqa: BLE001 - the reference is user code; any failure means "cannot trace"
        unsupported(f"tracing the reference failed ({type(e).__name__}: {str(e).splitlines()[0][:200]})")
    return lower(gm, sentinels), call(*inputs)


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


def _frame(low: Lowered) -> tuple[int, ...]:
    """The output frame of one trace: [M, N] for a matmul, else the inputs' broadcast shape."""
    g = low.graph
    mm = next((n for n in g.nodes if n.op == "mm"), None)
    if mm is None:
        return tuple(torch.broadcast_shapes(*low.input_shapes)) if low.input_shapes else ()
    ia, ib = (g.nodes[i].attrs["index"] for i in mm.args)
    a_shape, b_shape = low.input_shapes[ia], low.input_shapes[ib]
    m = a_shape[1] if low.mm_operands[ia] else a_shape[0]
    n = b_shape[0] if low.mm_operands[ib] else b_shape[1]
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


def trace_reference(spec: OperatorSpec) -> Traced:
    """Trace every test case (and every float dtype of the first) and check they agree."""
    if spec.reference is None:
        unsupported("a spec without a `reference`")
    for p in spec.params:
        if p.type == "bool":
            unsupported(f"the bool param {p.name!r}")
    fn = load_reference(spec)
    sentinels = _sentinels(spec)
    float_dtypes = [d for d in spec.dtypes if d in FLOAT_DTYPES]
    dtype0 = float_dtypes[0] if float_dtypes else spec.dtypes[0]

    first: Lowered | None = None
    roles: list[set[str]] | None = None
    out_kinds: list[list[tuple[str, bool]]] = []
    returns_tuple = False
    for case in spec.test_cases[:6]:
        low, ret = _trace_once(fn, _sample_inputs(spec, case, dtype0), sentinels, sentinels)
        g = low.graph
        returns_tuple = isinstance(ret, (tuple, list))
        rets = list(ret) if returns_tuple else [ret]
        if first is None:
            first = low
        elif g.signature() != first.graph.signature():
            unsupported("the traced graph changes with the input shape (shape-dependent Python in the reference)")
        elif [n.attrs.get("value") for n in g.nodes] != [n.attrs.get("value") for n in first.graph.nodes]:
            unsupported("a literal in the traced graph changes with the input shape (e.g. x.shape[-1] used as a number)")
        frame = _frame(low)
        case_roles = [_roles(s, frame) for s in low.input_shapes]
        roles = case_roles if roles is None else [r & c for r, c in zip(roles, case_roles)]
        out_kinds.append([_output_kind(tuple(r.shape), frame) for r in rets])

    assert first is not None and roles is not None
    graph = first.graph
    if any(o != out_kinds[0] for o in out_kinds):
        unsupported("outputs whose kind (per element or per row) changes with the input shape")

    # Params: a trace with the default values must differ from the sentinel trace exactly at the
    # param positions; a difference elsewhere means Python computed with the param before tracing.
    case0 = spec.test_cases[0]
    if spec.params:
        low_def, _ = _trace_once(fn, _sample_inputs(spec, case0, dtype0), spec.param_defaults, {})
        if low_def.graph.signature() != _strip_params(graph).signature():
            unsupported("the traced graph depends on a param's value (control flow on a param)")
        for n_def, n_sen in zip(low_def.graph.nodes, graph.nodes):
            if n_sen.op == "const" and n_def.attrs.get("value") != n_sen.attrs.get("value"):
                unsupported("a param used in arithmetic that Python evaluates before tracing "
                            "(write it as a tensor expression, e.g. x * scale, not x * (1 - scale))")

    # Output dtypes per case dtype.
    per_dtype: dict[str, list[str]] = {}
    for d in spec.dtypes:
        low_d, ret = _trace_once(fn, _sample_inputs(spec, case0, d), sentinels, sentinels)
        if low_d.graph.signature() != graph.signature():
            unsupported(f"the traced graph differs between dtypes ({dtype0} vs {d})")
        rets = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        per_dtype[d] = [str(r.dtype).replace("torch.", "") for r in rets]

    promoting = _promoting_inputs(spec, fn, case0, len(out_kinds[0]))
    outputs = [OutputInfo(space, keepdim, _dtype_rule(spec, per_dtype, k, promoting[k] if promoting else set()))
               for k, (space, keepdim) in enumerate(out_kinds[0])]
    used = {n.attrs["index"] for n in graph.nodes if n.op == "input" and n.id in graph.live()}
    same_dtype = [] if promoting is not None else [i for i in _case_dtype_inputs(spec) if i in used]
    inputs_info = [
        InputInfo(name=inp.name, roles=roles[i], is_mm_operand=i in first.mm_operands,
                  transposed=first.mm_operands.get(i, False))
        for i, inp in enumerate(spec.inputs)
    ]
    return Traced(graph=graph, inputs=inputs_info, outputs=outputs, returns_tuple=returns_tuple,
                  params=[p.name for p in spec.params if p.type != "bool"],
                  has_matmul=any(n.op == "mm" for n in graph.nodes),
                  same_dtype_inputs=same_dtype if len(same_dtype) > 1 else [])


def _strip_params(graph: Graph) -> Graph:
    nodes = []
    for n in graph.nodes:
        if n.op == "param":
            nodes.append(Node(n.id, "const", n.args, {"value": None}, n.space, n.dtype))
        else:
            nodes.append(n)
    return Graph(nodes, graph.outputs)


def _case_dtype_inputs(spec: OperatorSpec) -> list[int]:
    """The inputs that take the case dtype (no dtype of their own in the spec)."""
    if not any(d in FLOAT_DTYPES for d in spec.dtypes):
        return []
    return [i for i, inp in enumerate(spec.inputs) if inp.dtype is None]


def _promoting_inputs(spec: OperatorSpec, fn: Callable, case: dict, n_outputs: int) -> list[set[int]] | None:
    """Per output, the inputs whose dtype PyTorch promotes into it: the reference is run with
    every case-dtype input in float16 but one in float32, and an output that turns float32
    follows that input too (x + bias: both inputs; rms_norm's `(...).to(x.dtype)`: x alone).
    A mix the reference refuses (a float16 @ float32 matmul) teaches nothing: PyTorch raises
    there too. None when the reference does not even run in float16."""
    free = _case_dtype_inputs(spec)
    if len(free) < 2:
        return [set() for _ in range(n_outputs)]

    def dtypes(ret: Any) -> list[torch.dtype]:
        return [r.dtype for r in (ret if isinstance(ret, (tuple, list)) else [ret])]

    half = _sample_inputs(spec, case, "float16")
    try:
        base = dtypes(fn(*half, **spec.param_defaults))
    except Exception:  # noqa: BLE001 - user code that cannot run in float16 on the CPU
        return None
    found: list[set[int]] = [set() for _ in range(n_outputs)]
    for j in free:
        mixed = [t.float() if i == j else t for i, t in enumerate(half)]
        try:
            outs = dtypes(fn(*mixed, **spec.param_defaults))
        except Exception:  # noqa: BLE001 - the reference refuses this mix
            continue
        for k, (b, o) in enumerate(zip(base, outs)):
            if b == torch.float16 and o == torch.float32:
                found[k].add(j)
    return found


def _dtype_rule(spec: OperatorSpec, per_dtype: dict[str, list[str]], k: int, promoting: set[int]) -> DtypeRule:
    outs = {d: v[k] for d, v in per_dtype.items()}
    for i, inp in enumerate(spec.inputs):
        if all(outs[d] == spec.input_dtype(inp, d) for d in outs):
            return Promoted(tuple(sorted(promoting | {i}))) if promoting - {i} else LikeInput(i)
    if len(set(outs.values())) == 1:
        return FixedDtype(next(iter(outs.values())))
    return DtypeTable(outs)
