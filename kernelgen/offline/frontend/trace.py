"""Trace a spec's reference once per test case, with symbolic shapes, into the IR every family reads,
and check that the trace holds for every case, every dtype and any value of the params.

`make_fx(tracing_mode="symbolic")` records the ATen ops the reference runs, every input dimension a
symbol (`s0`, ...): the IR's shapes are expressions over them, so one generated wrapper serves every
shape. Duck sizing is off: two dims that merely happen to be equal in a test case keep separate
symbols; only dims the reference itself requires to agree (a matmul's inner dim) are unified by
PyTorch's shape guards. Composite activations and losses are decomposed into pointwise ops and plain
reductions; norms, softmax and the anchors (matmul, scans, pooling, attention) stay whole and are
lowered by the op table (kernelgen.offline.frontend.optable), which knows what they compute.

Scalar params are found by tracing with sentinel values: a literal equal to a sentinel becomes the
param; a trace with the defaults must differ exactly there. Nothing here guesses from the
operator's name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import torch
import torch.nn.functional as F

from kernelgen.offline.frontend.follow import case_shapes, check_inputs, check_outputs, input_ranks, numbered_dims
from kernelgen.offline.frontend.fxwalk import lower
from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.frontend.outputs import output_dtypes, sample_inputs
from kernelgen.offline.unsupported import NotServed, unsupported
from kernelgen.spec import FLOAT_DTYPES, OperatorSpec, load_reference

A = torch.ops.aten
DECOMPOSE = [
    A.gelu, A.silu, A.mish, A.hardtanh, A.hardswish, A.hardsigmoid, A.leaky_relu, A.elu, A.celu, A.selu,
    A.softplus, A.relu6, A.threshold, A.logit, A.sgn, A.xlogy, A.hardshrink, A.softshrink, A.lerp, A.addcmul,
    A.addcdiv, A.glu, A.log_sigmoid_forward, A.frac, A.addmm, A.linear, A.nll_loss_forward, A.linalg_vector_norm,
    A.mse_loss, A.smooth_l1_loss, A.huber_loss, A.binary_cross_entropy, A.soft_margin_loss, A.margin_ranking_loss,
    A.hinge_embedding_loss, A.norm, A.std, A.std_mean, A.nan_to_num, A.baddbmm, A.addmv, A.mv, A.dot, A.square,
]
SENTINEL_FLOAT = 0.4142135  # + 0.0173 per param: unlikely to collide with a literal in user code
SENTINEL_INT = 7919
TRACED_CASES = 4  # test cases traced and compared: each symbolic trace costs 0.05-0.25 s


def sentinels(spec: OperatorSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, p in enumerate(spec.params):
        if p.type == "float":
            out[p.name] = SENTINEL_FLOAT + 0.0173 * i
        elif p.type == "int":
            out[p.name] = SENTINEL_INT + 13 * i
    return out


def _decompositions() -> dict:
    from torch._decomp import get_decompositions

    return get_decompositions(DECOMPOSE)


class SizeGeneric(torch.overrides.TorchFunctionMode):
    """While tracing, ops whose composite implementation reads a size as a Python int (specialising
    the trace to the traced case) are called as their size-generic equivalent, which computes the
    same values. aten.max_pool1d's CPU fast path reads the length: level 1's 41 (MaxPool1d, k 8,
    dilation 3) traced at x[23, 25, 27] fixed x.shape[2] to 27 for every shape, and its kernel was
    refused at x[11, 13, 15] ("the reference needs 27 there"); max_pool1d_with_indices does not."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.max_pool1d:
            return torch.max_pool1d_with_indices(*args, **kwargs)[0]
        if func is F.max_pool1d and not kwargs.get("return_indices", len(args) > 6 and args[6]):
            return F.max_pool1d_with_indices(*args, **kwargs)[0]
        return func(*args, **kwargs)


@dataclass
class Traced:
    graph: Graph  # the IR of the kept trace (trace_reference says which)
    case: dict[str, list[int]]  # the test case it was traced on (the first with the fewest numbered input dims)
    out_dtypes: dict[str, list[str]]  # case dtype -> the reference's output dtypes
    params: list[str]


def trace_graph(fn: Callable, inputs: list[torch.Tensor], params: dict[str, Any]) -> Any:
    """The fx graph module of one symbolic trace."""
    from torch.fx.experimental import _config as fx_config
    from torch.fx.experimental.proxy_tensor import make_fx

    def call(*xs: torch.Tensor) -> Any:
        return fn(*xs, **params)

    try:
        with fx_config.patch(use_duck_shape=False), SizeGeneric():
            gm = make_fx(call, tracing_mode="symbolic", decomposition_table=_decompositions())(*inputs)
    except Exception as e:  # noqa: BLE001 - the reference is user code: any failure means "cannot trace"
        unsupported(f"tracing the reference with symbolic shapes failed ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200] if str(e) else ''})")
    return gm


def trace_reference(spec: OperatorSpec) -> Traced:
    """Lower every test case's symbolic trace (the first TRACED_CASES) and check the structures agree,
    then that the params and the dtypes do not change the graph. The graph kept is, among the traces
    of the first case's ranks, the first with the fewest input dims held as numbers (frontend/follow.py:
    a size 1 in a test case is a constant to the trace, and a kernel from it serves that size only);
    its sizes must follow the input at every stated case of those ranks. Made once per spec: the route
    (kernelgen.offline.registry) hands it to every family and keeps it with the family's analysis."""
    if spec.reference is None:
        unsupported("a spec without a `reference`")
    for p in spec.params:
        if p.type == "bool":
            unsupported(f"the bool param {p.name!r}")
    fn = load_reference(spec)
    sent = sentinels(spec)
    floats = [d for d in spec.dtypes if d in FLOAT_DTYPES]
    dtype0 = floats[0] if floats else spec.dtypes[0]
    stated = case_shapes(spec)
    graphs: list[tuple[dict, Graph]] = []
    for case in spec.test_cases[:TRACED_CASES]:
        graph = lower(trace_graph(fn, sample_inputs(spec, case, dtype0), sent), sent, len(spec.inputs), stated)
        if graphs and graph.signature() != graphs[0][1].signature():
            unsupported("a traced graph that changes with the input shape (shape-dependent Python in the reference)")
        graphs.append((case, graph))
    alike = [cg for cg in graphs if input_ranks(cg[1].values) == input_ranks(graphs[0][1].values)]
    case, first = min(alike, key=lambda cg: numbered_dims(cg[1]))
    check_inputs(spec, first)
    check_outputs(spec, fn, first)
    if spec.params:
        _check_params(spec, fn, first, dtype0, case)
    _check_dtypes(spec, fn, first, sent, dtype0, case)
    return Traced(graph=first, case=case, out_dtypes=output_dtypes(spec, fn),
                  params=[p.name for p in spec.params])


def _same_literal(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _check_params(spec: OperatorSpec, fn: Callable, traced: Graph, dtype0: str, case: dict) -> None:
    """A trace with the params' defaults must be the sentinel trace with each param a literal: any
    other difference means Python computed with a param before tracing (control flow on it, or
    `x * (1 - scale)`, whose `1 - scale` becomes a literal of its own). `case`: the one `traced` was traced on."""
    plain = lower(trace_graph(fn, sample_inputs(spec, case, dtype0), spec.param_defaults), {}, len(spec.inputs),
                  case_shapes(spec))
    defaults = spec.param_defaults
    expected = [replace(v, op="const", attrs={"value": defaults[v.attrs["name"]]}) if v.op == "param" else v
                for v in traced.values]
    if plain.signature() != Graph(expected, traced.outputs, traced.returns_tuple, traced.symbols).signature():
        unsupported("a param the traced graph depends on through Python (control flow on it)")
    for got, want in zip(plain.values, expected):
        if got.op == "const" and not _same_literal(got.attrs.get("value"), want.attrs.get("value")):
            unsupported("a param used in arithmetic that Python evaluates before tracing "
                        "(write it as a tensor expression, e.g. x * scale, not x * (1 - scale))")


def _check_dtypes(spec: OperatorSpec, fn: Callable, traced: Graph, sent: dict[str, Any], dtype0: str, case: dict) -> None:
    """The first case traced in every other dtype must give the same graph: a reference that branches
    on its inputs' dtype would otherwise be served with the first dtype's kernel. A dtype the trace
    itself fails in (an op with no float16 kernel on the CPU) proves nothing and is skipped."""
    for d in spec.dtypes:
        if d == dtype0:
            continue
        try:
            graph = lower(trace_graph(fn, sample_inputs(spec, case, d), sent), sent, len(spec.inputs), case_shapes(spec))
        except NotServed:
            continue
        if _structure(graph) != _structure(traced):
            unsupported(f"a traced graph that differs between dtypes ({dtype0} vs {d}): the reference branches on its dtype")


def _structure(graph: Graph) -> tuple:
    """The graph's ops and how they connect, without dtypes (which follow the case dtype)."""
    return tuple((v.op, v.args, tuple(sorted(v.attrs))) for v in graph.values), tuple(graph.outputs)
