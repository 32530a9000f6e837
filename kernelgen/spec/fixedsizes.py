"""The input sizes a problem fixes: the ones no correct input of it can change, so a kernel may
specialise on them and generated cases must keep them. Every other size is free (the test cases,
the performance case and generated random shapes vary it).

A size is fixed when
- the spec says so (an input's `fixed_dims`, written by the KernelBench derivation for the sizes the
  Model's constructor or a draw fixes): the judge's generated cases keep it (verify/judge/inputs.py);
- the reference pins it to a constant (spec.symbolic: a LayerNorm's normalized shape, a `view` to a
  literal size) — the reference itself refuses any other value;
- it is the kernel size of a convolution's weight (`conv2d_weight[2:]` = the Conv2d's kernel_size):
  the Model builds its weight with that size, and every input KernelBench gives it has it;
- a drawn index ranges over it (`targets` drawn as `randint(0, 10)` index `predictions[1]` = 10):
  a smaller size would make the draw out of range.
Each holds in every test and performance case, or it is not stated.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kernelgen.spec.model import OperatorSpec
from kernelgen.spec.shapes import Case


class FixedSize(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str  # "x[1]"
    value: int
    why: str  # "the reference requires it", "`conv2d`'s kernel_size", "the draw of `targets` ranges over it"


def _holds(label: str, value: int, cases: list[Case]) -> bool:
    name, _, rest = label.partition("[")
    dim = int(rest.rstrip("]"))
    return all(name in c and dim < len(c[name]) and c[name][dim] == value for c in cases)


def _declared(spec: OperatorSpec) -> list[FixedSize]:
    cases = list(spec.test_cases) + list(spec.perf_cases)
    return [FixedSize(label=f"{inp.name}[{d}]", value=cases[0][inp.name][d], why="the spec's fixed_dims")
            for inp in spec.inputs for d in inp.fixed_dims if cases and d < len(cases[0][inp.name])]


def _pinned(spec: OperatorSpec) -> list[FixedSize]:
    from kernelgen.spec.symbolic import trace_reference

    trace = trace_reference(spec)
    if trace is None:
        return []
    return [FixedSize(label=label, value=value, why="the reference requires it")
            for label, value in trace.pinned.items()]


def _kernel_sizes(spec: OperatorSpec) -> list[FixedSize]:
    from kernelgen.spec.hyperparams import problem_model
    from kernelgen.spec.kernelbench.readback import read_back

    view, model = read_back(spec), problem_model(spec)
    if view is None or model is None:
        return []
    found = []
    for name, lifted in view.lifted.items():
        owner, _, leaf = lifted.key.rpartition(".")
        try:
            module = model.get_submodule(owner)
        except AttributeError:
            continue
        kernel = getattr(module, "kernel_size", None)
        if leaf != "weight" or not isinstance(kernel, tuple):
            continue
        for k, size in enumerate(kernel):  # a conv weight is [out, in / groups, *kernel] (transposed: [in, out / groups, *kernel])
            found.append(FixedSize(label=f"{name}[{2 + k}]", value=int(size), why=f"`{owner}`'s kernel_size"))
    return found


def _draw_ranges(spec: OperatorSpec) -> list[FixedSize]:
    from kernelgen.spec.init import parse_init

    found = []
    cases = list(spec.test_cases) + list(spec.perf_cases)
    for inp in spec.inputs:
        plan = parse_init(inp.init)
        if plan.generator != "randint" or len(plan.args) != 2 or float(plan.args[1]) <= 2:
            continue  # a mask or a sign (randint(0, 2)) indexes nothing
        bound = int(plan.args[1])
        for other in spec.inputs:
            if other.name == inp.name:
                continue
            for d in range(min(len(c[other.name]) for c in cases)):
                label = f"{other.name}[{d}]"
                if _holds(label, bound, cases):
                    found.append(FixedSize(label=label, value=bound, why=f"`{inp.name}` is drawn as {inp.init} over it"))
    return found


def fixed_sizes(spec: OperatorSpec) -> list[FixedSize]:
    """Every fixed size once (the first reason found), in the inputs' order; only those that hold in
    every test and performance case."""
    cases = list(spec.test_cases) + list(spec.perf_cases)
    seen: dict[str, FixedSize] = {}
    for f in _pinned(spec) + _kernel_sizes(spec) + _draw_ranges(spec) + _declared(spec):  # the most specific reason first
        if f.label not in seen and _holds(f.label, f.value, cases):
            seen[f.label] = f
    order = {inp.name: i for i, inp in enumerate(spec.inputs)}

    def key(f: FixedSize) -> tuple[int, int]:
        name, _, rest = f.label.partition("[")
        return order.get(name, len(order)), int(rest.rstrip("]"))

    return sorted(seen.values(), key=key)
