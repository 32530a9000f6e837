"""What the spec implies but does not spell out, derived once for the prompt's spec section:

- every input's dtype (fixed in the spec, or the case dtype) and rank;
- the sizes the reference requires to be equal (`bias[0] == x[1]`), from its symbolic run
  (kernelgen.spec.symbolic), or, where it cannot run symbolically, those equal in every case;
- every output's dtype (the reference on shape-only 'meta' tensors, per dtype) and its shape as a
  rule over the input sizes (kernelgen.spec.outshapes), with its value at the performance case.

Nothing here is a guess: a rule is stated only when it reproduces every test and performance case,
and an output rule that cannot be derived says so.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kernelgen.spec import OperatorSpec
from kernelgen.spec.outshapes import OutputShape
from kernelgen.spec.shapes import Case


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputFact(_Fact):
    name: str
    dtype: str  # "the case dtype" or "int64 (fixed)"
    rank: str  # "rank 2", "rank 1 to 4"
    init: str  # how the harness draws its values
    lifted: str = ""  # a KernelBench problem's module tensor it is: "parameter `gemm.weight`" ("" for other inputs)


class OutputFact(_Fact):
    name: str
    dtype: str  # "the case dtype", "float32 for every case dtype", "float16 -> float32, ..."
    shape: str  # "the shape of x", "[`x[0]`, `conv2d_weight[0]`, `x[2] - conv2d_weight[2] + 1`, ...]"
    checked: str = ""  # "[16, 128, 1022, 1022] at the performance case; checked on every test case"


class SpecFacts(_Fact):
    inputs: list[InputFact]
    relations: list[str]  # "`bias[0]` == `x[-1]`"
    outputs: list[OutputFact]


def _cases(spec: OperatorSpec) -> list[Case]:
    return list(spec.test_cases) + list(spec.perf_cases)


def _rank_text(ranks: set[int]) -> str:
    lo, hi = min(ranks), max(ranks)
    return f"rank {lo}" if lo == hi else f"rank {lo} to {hi}"


def input_facts(spec: OperatorSpec) -> list[InputFact]:
    from kernelgen.spec.kernelbench.readback import read_back

    cases = _cases(spec)
    view = read_back(spec)
    lifted = view.lifted if view else {}
    out = []
    for inp in spec.inputs:
        ranks = {len(c[inp.name]) for c in cases}
        dtype = f"{inp.dtype} (fixed, whatever the case dtype)" if inp.dtype else "the case dtype"
        what = f"{lifted[inp.name].kind} `{lifted[inp.name].key}`" if inp.name in lifted else ""
        out.append(InputFact(name=inp.name, dtype=dtype, rank=_rank_text(ranks), init=inp.init, lifted=what))
    return out


def _dims(name: str, cases: list[Case]) -> list[tuple[str, list[int]]]:
    """(label, size in each case) for every dimension of one input: positive indices when its rank
    is the same in every case, negative (from the last) otherwise."""
    ranks = {len(c[name]) for c in cases}
    if len(ranks) == 1:
        r = ranks.pop()
        return [(f"{name}[{i}]", [c[name][i] for c in cases]) for i in range(r)]
    lo = min(ranks)
    return [(f"{name}[-{k}]", [c[name][-k] for c in cases]) for k in range(1, lo + 1)]


def _relations_in_cases(spec: OperatorSpec) -> list[str]:
    """Each dimension of a later input that equals a dimension of an earlier input in every case.
    Earlier inputs are searched from their last dimension (broadcasting aligns trailing dims);
    dimensions that are 1 everywhere relate to nothing."""
    cases = _cases(spec)
    names = spec.input_names
    found = []
    for j, later in enumerate(names):
        same = next((earlier for earlier in names[:j] if all(c[later] == c[earlier] for c in cases)), None)
        if same is not None:
            found.append(f"`{later}` has the shape of `{same}`")
            continue
        for label, sizes in _dims(later, cases):
            if all(s == 1 for s in sizes):
                continue
            match = next((other for earlier in names[:j] for other, osizes in reversed(_dims(earlier, cases))
                          if osizes == sizes), None)
            if match is not None:
                found.append(f"`{label}` == `{match}`")
    return found


def _relations_required(spec: OperatorSpec, equal: list[tuple[str, str]]) -> list[str]:
    """The sizes the reference makes equal (spec.symbolic), one input at a time: `sin` has the shape
    of `cos` when every dimension of it is, else each dimension on its own."""
    same = dict(equal)
    ranks = {n: len(spec.effective_perf_cases[0][n]) for n in spec.input_names}

    def canon(label: str) -> str:
        return same.get(label, label)

    found = []
    for j, later in enumerate(spec.input_names):
        mine = [canon(f"{later}[{d}]") for d in range(ranks[later])]
        twin = next((e for e in spec.input_names[:j] if ranks[e] == ranks[later] and ranks[later] > 0
                     and mine == [canon(f"{e}[{d}]") for d in range(ranks[e])]), None)
        if twin is not None:
            found.append(f"`{later}` has the shape of `{twin}`")
            continue
        found += [f"`{later}[{d}]` == `{m}`" for d, m in enumerate(mine) if m != f"{later}[{d}]"]
    return found


def shape_relations(spec: OperatorSpec) -> list[str]:
    """The sizes the reference requires to be equal, read from its symbolic run; where it cannot run
    symbolically, the ones equal in every test and performance case."""
    from kernelgen.spec.symbolic import trace_reference

    trace = trace_reference(spec)
    return _relations_required(spec, trace.equal) if trace is not None else _relations_in_cases(spec)


def _dtype_rule(by_dtype: dict[str, str]) -> str:
    if all(got == case for case, got in by_dtype.items()):
        return "the case dtype"
    if len(set(by_dtype.values())) == 1:
        return f"{next(iter(by_dtype.values()))} for every case dtype"
    return ", ".join(f"{case} -> {got}" for case, got in by_dtype.items())


def _at(shapes: list[list[int]], where: str) -> str:
    return ", ".join(str(s) for s in shapes) + f" {where}" if shapes else ""


def _shape_fact(o: OutputShape) -> tuple[str, str]:
    """(the rule, where it was checked) of one output's shape (kernelgen.spec.outshapes)."""
    if not o.derived:
        return o.rule, f"no rule stated: {o.note}"
    perf = _at(o.at_perf, "at the performance case" + ("s" if len(o.at_perf) > 1 else ""))
    return o.rule, f"{perf}; checked on every test case" if perf else "checked on every test case"


def _meta_dtypes(spec: OperatorSpec, case: Case, dtype: str) -> list[str]:
    from kernelgen.spec.outshapes import meta_shapes

    return [d for _, d in meta_shapes(spec, case, dtype)]


def output_facts(spec: OperatorSpec) -> list[OutputFact]:
    from kernelgen.spec.outshapes import output_shapes

    if spec.reference is None:
        return [OutputFact(name=o.name, dtype=f"{o.dtype} (fixed)" if o.dtype else "as your baseline returns it",
                           shape="as your baseline returns it") for o in spec.outputs]
    try:
        by_dtype = {d: _meta_dtypes(spec, spec.test_cases[0], d) for d in spec.dtypes}
        shapes = output_shapes(spec)
    except Exception as e:  # noqa: BLE001 - a reference without meta kernels: the rule stays unstated
        why = f"not derivable on meta tensors ({type(e).__name__}); run the reference in your head"
        return [OutputFact(name=o.name, dtype=f"{o.dtype} (fixed)" if o.dtype else why, shape=why) for o in spec.outputs]
    facts = []
    for k, o in enumerate(spec.outputs):
        dtypes = {d: outs[k] for d, outs in by_dtype.items() if k < len(outs)}
        rule, checked = _shape_fact(shapes[k]) if k < len(shapes) else ("unknown", "")
        facts.append(OutputFact(name=o.name, dtype=_dtype_rule(dtypes) if dtypes else "unknown", shape=rule,
                                checked=checked))
    return facts


def spec_facts(spec: OperatorSpec) -> SpecFacts:
    return SpecFacts(inputs=input_facts(spec), relations=shape_relations(spec), outputs=output_facts(spec))


def fixed_lines(spec: OperatorSpec) -> list[str]:
    """The sizes the problem fixes (kernelgen.spec.fixedsizes), grouped by input and reason:
    "`x[1]` = 64, `x[2]` = 256 (the reference requires them)"."""
    from kernelgen.spec.fixedsizes import fixed_sizes

    groups: dict[tuple[str, str], list[str]] = {}
    for f in fixed_sizes(spec):
        groups.setdefault((f.label.partition("[")[0], f.why), []).append(f"`{f.label}` = {f.value}")
    return [", ".join(sizes) + f" ({why})" for (_, why), sizes in groups.items()]
