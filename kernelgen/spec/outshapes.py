"""Each output's shape as a rule over the inputs' dimensions, derived symbolically (spec.symbolic) and
checked on every test case and every performance case against the reference run on shape-only
('meta') tensors. A rule that does not reproduce every case is not stated: the shapes per case are,
and the reason why.

    out: [x[0], conv2d_weight[0], x[2] - conv2d_weight[2] + 1, x[3] - conv2d_weight[3] + 1]
         -> [16, 128, 1022, 1022] at the performance case
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.spec.model import OperatorSpec
from kernelgen.spec.shapes import Case
from kernelgen.spec.symbolic import SymbolicTrace, trace_reference


class OutputShape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    rule: str  # "the shape of `x`", "[`x[0]`, `conv2d_weight[0]`, `x[2] - conv2d_weight[2] + 1`]", or the shapes per case
    dims: list[str] = Field(default_factory=list)  # the rule's dimensions ("x[2] - conv2d_weight[2] + 1"); [] when not derived
    derived: bool  # True: a symbolic rule that reproduced every case
    at_perf: list[list[int]] = Field(default_factory=list)  # the shape at each performance case
    at_tests: list[list[int]] = Field(default_factory=list)  # the shape at each test case
    note: str = ""  # why no rule is stated


def meta_shapes(spec: OperatorSpec, case: Case, dtype: str | None = None) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each output of the reference run on shape-only tensors."""
    import torch

    from kernelgen.nodynamo import without_dynamo
    from kernelgen.spec.reference import load_reference
    from kernelgen.spec.sampling import torch_dtype

    fn = load_reference(spec)
    dtype = dtype or spec.dtypes[0]
    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    out = without_dynamo(lambda: fn(*args, **spec.param_defaults))  # meta kernels would import it: 3.4 s
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs if isinstance(o, torch.Tensor)]


def _rule(dims: list[str], spec: OperatorSpec, ranks: dict[str, int]) -> str:
    """The rule in words where it is a common one, else its dimensions."""
    if not dims:
        return "[] (a 0-dim tensor)"
    for inp in spec.inputs:
        own = [f"{inp.name}[{d}]" for d in range(ranks[inp.name])]
        if dims == own:
            return f"the shape of `{inp.name}`"
        if own and dims == own[:-1]:
            return f"`{inp.name}`'s shape without its last dimension"
        if own and dims == own[:-1] + ["1"]:
            return f"`{inp.name}`'s shape with its last dimension 1"
    return "[" + ", ".join(f"`{d}`" for d in dims) + "]"


def _reproduces(trace: SymbolicTrace, k: int, cases: list[Case], truth: list[list[list[int]]]) -> bool:
    exprs = trace.outputs[k]
    for case, shapes in zip(cases, truth):
        if k >= len(shapes) or len(shapes[k]) != len(exprs):
            return False
        if [trace.evaluate(e, case) for e in exprs] != shapes[k]:
            return False
    return True


def _per_case(shapes: list[list[int]]) -> str:
    shown = "; ".join(f"{s} in test case {i}" for i, s in enumerate(shapes[:4]))
    return shown + (" ..." if len(shapes) > 4 else "")


def _group_rules(spec: OperatorSpec, k: int, cases: list[Case], truth: list[list[list[int]]]) -> tuple[str, list[str]] | None:
    """One rule for output k over cases whose inputs have the same ranks: traced at the group's first
    case (the performance case where it is in the group, else a test case), checked on all of them."""
    for case in cases[:2]:
        trace = trace_reference(spec, case)
        if trace is not None and k < len(trace.outputs) and _reproduces(trace, k, cases, truth):
            dims = [trace.render(e) for e in trace.outputs[k]]
            return _rule(dims, spec, {n: len(case[n]) for n in spec.input_names}), dims
    return None


def output_shapes(spec: OperatorSpec) -> list[OutputShape]:
    """One entry per output the reference returns. Cases whose inputs differ in rank get a rule each;
    one rule is stated when they all read the same (`x`'s shape with its last dimension 1)."""
    tests, perfs = list(spec.test_cases), list(spec.effective_perf_cases)
    cases = perfs + tests  # the performance case first: it is the one the kernel is timed on
    truth = [[shape for shape, _ in meta_shapes(spec, c)] for c in cases]
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, case in enumerate(cases):
        groups.setdefault(tuple(len(case[n]) for n in spec.input_names), []).append(i)
    found = []
    for k in range(len(truth[0])):
        at_perf = [shapes[k] for shapes in truth[: len(perfs)] if k < len(shapes)]
        at_tests = [shapes[k] for shapes in truth[len(perfs):] if k < len(shapes)]
        name = spec.outputs[k].name if k < len(spec.outputs) else f"output {k}"
        rules = [_group_rules(spec, k, [cases[i] for i in idx], [truth[i] for i in idx]) for idx in groups.values()]
        if all(r is not None for r in rules) and len({r[0] for r in rules}) == 1:  # type: ignore[index]
            rule, dims = rules[0]  # type: ignore[misc]
            found.append(OutputShape(name=name, rule=rule, dims=dims if len(rules) == 1 else [], derived=True,
                                     at_perf=at_perf, at_tests=at_tests))
            continue
        why = ("no rule over the input sizes reproduces every case" if any(r is None for r in rules)
               else "the cases' ranks differ and so do their rules")
        found.append(OutputShape(name=name, rule=_per_case(at_tests), derived=False, at_perf=at_perf,
                                 at_tests=at_tests, note=why))
    return found
