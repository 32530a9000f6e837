"""Do the traced sizes follow the input? One trace is taken on one test case; the kernel written from
it must serve every shape the judge gives it (the other test cases, a random renaming of the first,
KernelBench's own sizes). A size the trace holds as a number where the reference computes it from
the input is a kernel that is right only at the traced shape, which the judge finds at round 0
("shape [7, 128, 1, 1] but the baseline gives [7, 128, 2, 2]"). These checks find it before any
kernel is written, and say which size and why:

- an input dim the trace holds as a number that some case gives another value (an op that reads
  the size as a Python int: aten.max_pool1d did, the trace's case then fixed for every shape);
- an output whose traced sizes, evaluated at a case's input sizes, differ from the reference's own
  output shape there (run on shape-only meta tensors: no memory, at KernelBench's sizes too).
"""

from __future__ import annotations

from typing import Any, Callable

import sympy
import torch

from kernelgen.offline.frontend.ir import Graph, Value
from kernelgen.offline.unsupported import unsupported
from kernelgen.spec import OperatorSpec


def stated_cases(spec: OperatorSpec) -> list[dict[str, list[int]]]:
    """Every case the spec states, test cases first, then the perf cases not among them."""
    out = list(spec.test_cases)
    return out + [c for c in spec.perf_cases if c not in out]


def case_shapes(spec: OperatorSpec) -> tuple:
    """Each stated case as its inputs' shapes in input order (what fxwalk.lower's `cases` takes)."""
    return tuple([list(c[i.name]) for i in spec.inputs] for c in stated_cases(spec))


def input_ranks(values: list[Value]) -> list[int]:
    """The traced inputs' ranks, in input order."""
    inputs = sorted((v for v in values if v.op == "input"), key=lambda v: v.attrs["index"])
    return [v.rank for v in inputs]


def _alike(spec: OperatorSpec, graph: Graph) -> list[dict[str, list[int]]]:
    """The stated cases whose inputs have the traced ranks: the ones the graph's sizes speak of (a
    pointwise spec may state cases of other ranks, each served by a trace of its own rank)."""
    ranks = input_ranks(graph.values)
    return [c for c in stated_cases(spec) if [len(c[i.name]) for i in spec.inputs] == ranks]


def _label(spec: OperatorSpec, case: dict) -> str:
    return "the perf case" if case in spec.perf_cases and case not in spec.test_cases else "a test case"


def numbered_dims(graph: Graph) -> int:
    """How many input dims the trace holds as numbers (fewer: a kernel for more shapes)."""
    return sum(e.is_number for v in graph.values if v.op == "input" for e in v.shape)


def check_inputs(spec: OperatorSpec, graph: Graph) -> None:
    """Every input dim the trace holds as a number has that size in every stated case of its ranks."""
    for v in graph.values:
        if v.op != "input":
            continue
        inp = spec.inputs[v.attrs["index"]]
        for d, e in enumerate(v.shape):
            if not e.is_number:
                continue
            for case in _alike(spec, graph):
                got = case[inp.name][d]
                if got != int(e):
                    unsupported(f"a trace that fixes {inp.name}.shape[{d}] to {int(e)} (an op of the reference reads "
                                f"it as a number), where {_label(spec, case)} has {got}: a kernel from this trace "
                                "would serve one size only")


def size_at(e: sympy.Expr, symbols: dict[str, tuple[int, int]], shapes: list[list[int]]) -> int | None:
    """The size `e` at one case: `shapes` the inputs' shapes in input order, `symbols` the graph's map of
    symbol -> (input, dim); None where a symbol is not an input's dim."""
    sizes = {name: shapes[i][d] for name, (i, d) in symbols.items()}
    got = sympy.sympify(e).xreplace({s: sympy.Integer(sizes[s.name]) for s in e.free_symbols if s.name in sizes})
    return int(got) if got.is_number else None


def _meta_outputs(spec: OperatorSpec, fn: Callable, case: dict) -> list[list[int]] | None:
    """The reference's output shapes on meta tensors; None where an op has no meta kernel."""
    from kernelgen.nodynamo import without_dynamo
    from kernelgen.spec import torch_dtype

    dtype = spec.dtypes[0]
    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    try:
        out = without_dynamo(lambda: fn(*args, **spec.param_defaults))
    except Exception:  # noqa: BLE001 - no meta kernel (or a value read): this check cannot say
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [list(o.shape) for o in outs if isinstance(o, torch.Tensor)]


def check_outputs(spec: OperatorSpec, fn: Callable, graph: Graph) -> None:
    """The traced output shapes, at the input sizes of every stated case of its ranks, are the reference's there."""
    names = [i.name for i in spec.inputs]
    for case in _alike(spec, graph):
        shapes = [case[n] for n in names]
        truth = _meta_outputs(spec, fn, case)
        if truth is None or len(truth) != len(graph.outputs):
            continue
        for k, (o, want) in enumerate(zip(graph.outputs, truth)):
            got = [size_at(e, graph.symbols, shapes) for e in graph[o].shape]
            if got != want:
                shown = ", ".join(str(g) if g is not None else "?" for g in got)
                unsupported(f"a trace whose output {k} has shape [{shown}] at {_label(spec, case)} "
                            f"({', '.join(f'{n}: {case[n]}' for n in names)}), where the reference gives {want}: "
                            "a size was fixed to the traced case")
