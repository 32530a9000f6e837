"""What the spec implies but does not spell out, derived once for the prompt's spec section:

- every input's dtype (fixed in the spec, or the case dtype) and rank;
- shape relations between inputs that hold in every test and perf case (`bias[0] == x[-1]`);
- every output's dtype and shape rule, from running the reference on shape-only ('meta') tensors
  for each dtype (no memory touched, no kernel run).

Nothing here is a guess: a relation is stated only when every case shows it, and an output rule the
meta run cannot derive says so.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kernelgen.spec import OperatorSpec
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
    shape: str  # "the shape of x", "x's shape without its last dimension", ...


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


def shape_relations(spec: OperatorSpec) -> list[str]:
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


def _dtype_rule(by_dtype: dict[str, str]) -> str:
    if all(got == case for case, got in by_dtype.items()):
        return "the case dtype"
    if len(set(by_dtype.values())) == 1:
        return f"{next(iter(by_dtype.values()))} for every case dtype"
    return ", ".join(f"{case} -> {got}" for case, got in by_dtype.items())


def _shape_rule(spec: OperatorSpec, out_shapes: list[list[int]], cases: list[Case]) -> str:
    for name in spec.input_names:
        if all(s == c[name] for s, c in zip(out_shapes, cases)):
            return f"the shape of `{name}`"
    for name in spec.input_names:
        if all(s == c[name][:-1] for s, c in zip(out_shapes, cases)):
            return f"`{name}`'s shape without its last dimension"
        if all(s == c[name][:-1] + [1] for s, c in zip(out_shapes, cases)):
            return f"`{name}`'s shape with its last dimension 1"
    ranks = {len(s) for s in out_shapes}
    if len(ranks) == 1:  # dimension by dimension: [`a[0]`, `b[1]`]
        dims = [d for name in spec.input_names for d in _dims(name, cases)]
        labels = [next((lab for lab, sizes in dims if sizes == [s[k] for s in out_shapes]), None) for k in range(ranks.pop())]
        if labels and all(labels):
            return "[" + ", ".join(f"`{lab}`" for lab in labels) + "]"
    return "; ".join(f"{s} for test case {i}" for i, s in enumerate(out_shapes[:4])) + (" ..." if len(out_shapes) > 4 else "")


def _meta_outputs(spec: OperatorSpec, case: Case, dtype: str) -> list[tuple[list[int], str]]:
    import torch

    from kernelgen.nodynamo import without_dynamo
    from kernelgen.spec import load_reference, torch_dtype

    fn = load_reference(spec)
    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    out = without_dynamo(lambda: fn(*args, **spec.param_defaults))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs]


def output_facts(spec: OperatorSpec) -> list[OutputFact]:
    if spec.reference is None:
        return [OutputFact(name=o.name, dtype=f"{o.dtype} (fixed)" if o.dtype else "as your baseline returns it",
                           shape="as your baseline returns it") for o in spec.outputs]
    try:
        by_dtype = {d: _meta_outputs(spec, spec.test_cases[0], d) for d in spec.dtypes}
        per_case = [_meta_outputs(spec, c, spec.dtypes[0]) for c in spec.test_cases]
    except Exception as e:  # noqa: BLE001 - a reference without meta kernels: the rule stays unstated
        why = f"not derivable on meta tensors ({type(e).__name__}); run the reference in your head"
        return [OutputFact(name=o.name, dtype=f"{o.dtype} (fixed)" if o.dtype else why, shape=why) for o in spec.outputs]
    facts = []
    for k, o in enumerate(spec.outputs):
        dtypes = {d: outs[k][1] for d, outs in by_dtype.items() if k < len(outs)}
        shapes = [outs[k][0] for outs in per_case if k < len(outs)]
        facts.append(OutputFact(name=o.name, dtype=_dtype_rule(dtypes) if dtypes else "unknown",
                                shape=_shape_rule(spec, shapes, list(spec.test_cases)) if shapes else "unknown"))
    return facts


def spec_facts(spec: OperatorSpec) -> SpecFacts:
    return SpecFacts(inputs=input_facts(spec), relations=shape_relations(spec), outputs=output_facts(spec))
