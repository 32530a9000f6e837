"""Trace a reference with symbolic shapes, once per test case, and check the traces agree.

`make_fx(tracing_mode="symbolic")` records ATen ops with every input dimension a symbol (`s0`, ...):
the IR's shapes are expressions over them, so one generated wrapper serves every shape. Duck sizing
is off: two dims that merely happen to be equal in a test case keep separate symbols; only dims the
reference itself requires to agree (a matmul's inner dim) are unified by PyTorch's shape guards.
Composite activations and losses are decomposed into pointwise ops and plain reductions; norms,
softmax and the anchors (matmul, scans, pooling, attention) stay whole and are lowered by
the op table (kernelgen.offline.frontend.optable), which knows what they compute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from kernelgen.offline.frontend.ir import Graph
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import FLOAT_DTYPES, OperatorSpec, draw_inputs, load_reference

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


@dataclass
class Traced:
    graph: Graph
    case: dict[str, list[int]]  # the test case it was traced on
    out_dtypes: dict[str, list[str]]  # case dtype -> the reference's output dtypes
    params: list[str]


def _sample(spec: OperatorSpec, case: dict, dtype: str) -> list[torch.Tensor]:
    return draw_inputs(spec, case, dtype, 0, "cpu")


def trace_graph(fn: Callable, inputs: list[torch.Tensor], params: dict[str, Any], sent: dict[str, Any]) -> Any:
    """(fx graph module, its ShapeEnv) of one symbolic trace."""
    from torch.fx.experimental import _config as fx_config
    from torch.fx.experimental.proxy_tensor import make_fx

    def call(*xs: torch.Tensor) -> Any:
        return fn(*xs, **params)

    try:
        with fx_config.patch(use_duck_shape=False):
            gm = make_fx(call, tracing_mode="symbolic", decomposition_table=_decompositions())(*inputs)
    except Exception as e:  # noqa: BLE001 - the reference is user code: any failure means "cannot trace"
        unsupported(f"tracing the reference with symbolic shapes failed ({type(e).__name__}: "
                    f"{str(e).splitlines()[0][:200] if str(e) else ''})")
    return gm


def trace_reference(spec: OperatorSpec) -> Traced:
    """Lower every test case's symbolic trace (at most four) and check the structures agree."""
    from kernelgen.offline.frontend.fxwalk import lower

    if spec.reference is None:
        unsupported("a spec without a `reference`")
    if any(p.type == "bool" for p in spec.params):
        unsupported("a bool param")
    fn = load_reference(spec)
    sent = sentinels(spec)
    floats = [d for d in spec.dtypes if d in FLOAT_DTYPES]
    dtype0 = floats[0] if floats else spec.dtypes[0]
    first: Graph | None = None
    for case in spec.test_cases[:4]:
        graph = lower(trace_graph(fn, _sample(spec, case, dtype0), sent, sent), sent, len(spec.inputs))
        if first is None:
            first = graph
        elif graph.signature() != first.signature():
            unsupported("a traced graph that changes with the input shape (shape-dependent Python in the reference)")
    assert first is not None
    if spec.params:
        plain = lower(trace_graph(fn, _sample(spec, spec.test_cases[0], dtype0), spec.param_defaults, {}), {},
                      len(spec.inputs))
        if plain.signature() != _without_params(first).signature():
            unsupported("a param the traced graph depends on through Python (control flow on it, or arithmetic "
                        "Python evaluates before tracing: write it as a tensor expression, e.g. x * scale)")
    return Traced(graph=first, case=spec.test_cases[0], out_dtypes=output_dtypes(spec, fn),
                  params=[p.name for p in spec.params])


def _without_params(graph: Graph) -> Graph:
    """The graph as a trace with the params' defaults would record it (params are literals there)."""
    from dataclasses import replace

    values = [replace(v, op="const", attrs={"value": None}) if v.op == "param" else v for v in graph.values]
    return Graph(values, graph.outputs, graph.returns_tuple, graph.symbols)


def output_dtypes(spec: OperatorSpec, fn: Callable) -> dict[str, list[str]]:
    """The reference's output dtypes per case dtype, from a run on shape-only (meta) tensors."""
    from kernelgen.spec import torch_dtype

    out: dict[str, list[str]] = {}
    case = spec.test_cases[0]
    for d in spec.dtypes:
        args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, d)), device="meta") for i in spec.inputs]
        try:
            ret = fn(*args, **spec.param_defaults)
        except Exception:  # noqa: BLE001 - no meta kernel: a small real run on the CPU instead
            ret = fn(*_sample(spec, case, d), **spec.param_defaults)
        rets = ret if isinstance(ret, (tuple, list)) else (ret,)
        out[d] = [str(r.dtype).replace("torch.", "") for r in rets]
    return out
