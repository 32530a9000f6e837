"""Each output's shape as a rule over the inputs' dimensions, derived symbolically (spec.symbolic) and
checked on every test case and every performance case against the reference run on shape-only
('meta') tensors. A rule that does not reproduce every case is not stated: the shapes per case are,
and the reason why.

    out: [x[0], conv2d_weight[0], x[2] - conv2d_weight[2] + 1, x[3] - conv2d_weight[3] + 1]
         -> [16, 128, 1022, 1022] at the performance case

Where the symbolic run pins a size it only passed through (a pooling's meta kernel specialises its
length; a KernelBench model built once per size is picked by its sizes), each dim the symbolic rule
does not reproduce is fitted over the cases instead (`fit_dim`): one input dim, as itself, plus or
times a constant, or floor-divided (a max pool's `x[2] - 13`, an MLP's `network_4_weight[0]`), or a
constant; a fitted form other than the dim itself is checked on probes too (the reference on meta
tensors with that dim moved by 1 to 8), and none is stated where two forms fit the cases.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.spec.model import OperatorSpec
from kernelgen.spec.rnnshapes import rnn_shapes
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
    with rnn_shapes():
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


MAX_FACTOR = 8  # a stride or scale up to this: pooling and transposed convolutions use 1 to 4
PROBES = range(1, MAX_FACTOR + 1)  # a fitted dim moved by each of these, on meta tensors


def _render_fit(label: str, a: int, b: int, s: int) -> str:
    """`x[2]`, `x[2] - 13`, `2*x[2] + 1`, `(x[2] - 5) // 2`."""
    head = label if a == 1 else f"{a}*{label}"
    term = f"{head} {'-' if b < 0 else '+'} {abs(b)}" if b else head
    return f"({term}) // {s}" if s > 1 else term


def _forms(xs: list[int], ys: list[int]) -> list[tuple[int, int, int]]:
    """Every (a, b, s) with y = (a*x + b) // s in each case: a = 1 and s = 1 first, b unique."""
    found = []
    for a in range(1, MAX_FACTOR + 1):
        b = ys[0] - a * xs[0]
        if all(y == a * x + b for x, y in zip(xs, ys)):
            found.append((a, b, 1))
    for s in range(2, MAX_FACTOR + 1):  # s*y <= x + b < s*y + s: the b every case allows
        lo = max(s * y - x for x, y in zip(xs, ys))
        hi = min(s * y - x + s - 1 for x, y in zip(xs, ys))
        found += [(1, b, s) for b in range(lo, hi + 1)]
    return found


def _probe_agrees(spec: OperatorSpec, k: int, j: int, label: str, form: tuple[int, int, int], case: Case) -> bool:
    """The fitted form against the reference on meta tensors with the dim moved (a probe it refuses
    says nothing: a KernelBench module built at one size)."""
    name, _, rest = label.partition("[")
    d = int(rest.rstrip("]"))
    a, b, s = form
    for step in PROBES:
        moved = {n: [v + step if (n, i) == (name, d) else v for i, v in enumerate(dims)] for n, dims in case.items()}
        try:
            got = meta_shapes(spec, moved)
        except Exception:  # noqa: BLE001 - the reference refuses this size
            continue
        if k >= len(got) or j >= len(got[k][0]) or got[k][0][j] != (a * moved[name][d] + b) // s:
            return False
    return True


def fit_dim(spec: OperatorSpec, k: int, j: int, cases: list[Case], ys: list[int]) -> str | None:
    """Dim j of output k as a rule over one input dim that reproduces every case (`x[2] - 13`), or the
    constant it is in every case; None where no form fits, or two do."""
    fits = []
    for inp in spec.inputs:
        ranks = {len(c[inp.name]) for c in cases}
        if len(ranks) != 1:
            continue
        for d in range(ranks.pop()):
            xs = [c[inp.name][d] for c in cases]
            if len(set(xs)) < 2:
                continue  # a size the cases keep: it says nothing the constant does not
            label = f"{inp.name}[{d}]"
            forms = _forms(xs, ys)
            if forms and forms[0] == (1, 0, 1):
                return label  # the dim itself: the first input that has it (equal dims name the first)
            fits += [(label, tuple(xs), f) for f in forms if _probe_agrees(spec, k, j, label, f, cases[-1])]
    if len(set(ys)) == 1 and not fits:
        return str(ys[0])
    # one form of one size (dims equal in every case are one size: the first input's names it)
    if not fits or len({(xs, f) for _, xs, f in fits}) > 1:
        return None
    label, _, (a, b, s) = fits[0]
    return _render_fit(label, a, b, s)


def _fitted(spec: OperatorSpec, k: int, cases: list[Case], truth: list[list[list[int]]]) -> list[str] | None:
    """Output k's dims: the symbolic expression where it reproduces every case, else fitted (fit_dim)."""
    if any(k >= len(t) for t in truth) or len({len(t[k]) for t in truth}) != 1:
        return None
    trace = trace_reference(spec, cases[0])
    exprs = trace.outputs[k] if trace is not None and k < len(trace.outputs) else []
    dims = []
    for j in range(len(truth[0][k])):
        ys = [t[k][j] for t in truth]
        if j < len(exprs) and len(exprs) == len(truth[0][k]) and all(trace.evaluate(exprs[j], c) == y for c, y in zip(cases, ys)):
            rendered = trace.render(exprs[j])
            if not rendered.lstrip("-").isdigit() or len(set(ys)) == 1:
                dims.append(rendered)
                continue
        fitted = fit_dim(spec, k, j, cases, ys)
        if fitted is None:
            return None
        dims.append(fitted)
    return dims


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
        if len(groups) == 1 and rules[0] is None:
            dims = _fitted(spec, k, cases, truth)
            ranks = {n: len(cases[0][n]) for n in spec.input_names}
            rules = [(_rule(dims, spec, ranks), dims)] if dims is not None else rules
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
