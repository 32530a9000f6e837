"""What the judge checks a candidate on: the spec's test cases, and cases it generates so that a kernel
right only on the spec's shapes and layouts does not pass.

Generated per run (from the run's random seed base, so they cannot be known in advance):
- **strided**: every input a view with element stride 2 along its last dim;
- **transposed**: every input of rank >= 2 stored column-major (same values);
- **sliced**: every input a slice inside a larger buffer (storage offset > 0, padded rows);
- **random-shape**: the first test case with every dim size renamed consistently (equal sizes stay
  equal, so broadcasts and matmul inner dims still agree) and the first input's last dim above 1024,
  checked against the reference on meta tensors first;
- **scaled x16 / x1/16**: float inputs drawn as usual, then scaled (a value-triggered branch, such
  as `|x| > 8`, shows up; standard-normal data never reaches it).
On the CPU interpreter, bfloat16 cases are skipped with a note: the interpreter has no bfloat16
arithmetic, so an honest kernel computing in bf16 would be reported wrong there.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from kernelgen.nodynamo import without_dynamo
from kernelgen.spec import Case, OperatorSpec, ToleranceSpec, draw_inputs, load_reference, torch_dtype

# Seeds are offset per purpose from the run's random base, so no two draws of one run coincide.
SEED_STRIDE = 7919  # between the seeds of one case
STALE_OFFSET = 20_000  # the refill of the stale-output probe
VARIANT_OFFSET = 40_000  # the generated cases
PERF_SEED = 1234  # perf inputs: fixed, so eager, compile, the best and the candidate see the same data

CONTINUOUS_INITS = ("randn", "normal", "uniform", "rand")
LAST_DIM_RANGE = (1025, 2100)  # above 1024: one block of 1024 columns per row no longer covers it
RANDOM_DIM_RANGE = (2, 7)


@dataclass(frozen=True)
class CheckCase:
    case: int  # the spec's test case it is, or derives from
    shapes: Case
    dtype: str
    variant: str = ""  # "" | strided | transposed | sliced | random-shape | scaled x16 | scaled x1/16
    seeds: tuple[int, ...] = ()
    scale: float = 1.0


@dataclass
class CheckPlan:
    cases: list[CheckCase] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def checkable_dtypes(spec: OperatorSpec, interpreter: bool) -> tuple[list[str], list[str]]:
    """(dtypes to check here, notes on the ones skipped)."""
    if not interpreter:
        return list(spec.dtypes), []
    keep = [d for d in spec.dtypes if d != "bfloat16" and not any(i.dtype == "bfloat16" for i in spec.inputs)]
    notes = []
    if len(keep) < len(spec.dtypes):
        notes.append("bfloat16 not checked here: Triton's CPU interpreter has no bfloat16 arithmetic (an honest kernel "
                     "computing in bf16 returns garbage there); it is checked on a GPU")
    return keep, notes


def plan_checks(spec: OperatorSpec, *, seeds: tuple[int, ...], base: int, interpreter: bool) -> CheckPlan:
    dtypes, notes = checkable_dtypes(spec, interpreter)
    plan = CheckPlan(skipped=notes)
    for ci, case in enumerate(spec.test_cases):
        for dtype in dtypes:
            plan.cases.append(CheckCase(ci, case, dtype, seeds=tuple(base + s * SEED_STRIDE + ci for s in seeds)))
    rng = random.Random(base)
    first = spec.test_cases[0]
    variants: list[tuple[str, Case, float]] = [("strided", first, 1.0), ("transposed", first, 1.0), ("sliced", first, 1.0)]
    shaped = random_shapes(spec, first, rng)
    if shaped is not None:
        variants.append(("random-shape", shaped, 1.0))
    else:
        plan.skipped.append("random-shape: no consistent renaming of the first test case's dims ran on the reference")
    if any(i.init.split("(")[0] in CONTINUOUS_INITS for i in spec.inputs):
        variants += [("scaled x16", first, 16.0), ("scaled x1/16", first, 1 / 16)]
    for vi, (name, shapes, scale) in enumerate(variants):
        for dtype in dtypes:
            plan.cases.append(CheckCase(0, shapes, dtype, variant=name, seeds=(base + VARIANT_OFFSET + vi,), scale=scale))
    return plan


def random_shapes(spec: OperatorSpec, case: Case, rng: random.Random) -> Case | None:
    """The case with every dim size > 1 renamed consistently, the first input's last dim above 1024."""
    import torch

    sizes = sorted({d for shape in case.values() for d in shape if d > 1})
    first_last = case[spec.inputs[0].name][-1] if case[spec.inputs[0].name] else None
    try:
        fn = load_reference(spec)
    except Exception:  # noqa: BLE001 - a reference that fails to load is reported elsewhere
        return None
    for _ in range(8):
        mapping = {d: rng.randint(*RANDOM_DIM_RANGE) for d in sizes}
        if first_last is not None and first_last > 1:
            mapping[first_last] = rng.randint(*LAST_DIM_RANGE)
        shapes = {k: [mapping.get(d, d) for d in v] for k, v in case.items()}
        args = [torch.empty(shapes[i.name], dtype=torch_dtype(spec.input_dtype(i, spec.dtypes[0])), device="meta")
                for i in spec.inputs]
        try:
            without_dynamo(lambda: fn(*args, **spec.param_defaults))  # noqa: B023 - called at once
        except NotImplementedError:
            return shapes  # no meta kernel: the real run will tell
        except Exception:  # noqa: BLE001 - this renaming does not fit the reference: try another
            continue
        return shapes
    return None


def _relayout(t: Any, variant: str) -> Any:
    """The same values in another memory layout."""
    import torch

    if t.dim() == 0 or t.numel() <= 1:
        return t
    if variant == "strided":
        big = torch.empty(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        view = big[..., ::2]
        view.copy_(t)
        return view
    if variant == "transposed" and t.dim() >= 2:
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if variant == "sliced":
        pad = 3
        big = torch.empty(*t.shape[:-1], t.shape[-1] + 2 * pad, dtype=t.dtype, device=t.device)
        view = big[..., pad: pad + t.shape[-1]]
        view.copy_(t)
        return view
    return t


def draw(spec: OperatorSpec, check: CheckCase, seed: int, device: str) -> list[Any]:
    """The inputs of one check: drawn per `init`, scaled, laid out as the variant says."""
    inputs = draw_inputs(spec, check.shapes, check.dtype, seed, device)
    out = []
    for inp, t in zip(spec.inputs, inputs):
        if check.scale != 1.0 and t.dtype.is_floating_point and inp.init.split("(")[0] in CONTINUOUS_INITS:
            t = (t.double() * check.scale).to(t.dtype)
        out.append(_relayout(t, check.variant) if check.variant in ("strided", "transposed", "sliced") else t)
    return out


def tolerance_of(spec: OperatorSpec, check: CheckCase) -> ToleranceSpec:
    """The tolerance a check compares with: the spec's for its dtype; for inputs scaled up by s, the
    absolute part times s**2. Rounding error grows with the magnitude of what is summed, not of the
    result: x16 inputs to linear_bias_gelu (K = 80) make products of ~256 and sums of ~2000, whose fp32
    rounding (~1e-3) is far above atol 1e-4 where the sum cancels to ~2.5 — an honest kernel failed
    there on an H100 (3 of 6144 elements, 2.4e-3 off). s**2 covers a product of two scaled inputs; a
    value-triggered branch still shows, its error being of the order of the values themselves."""
    tol = spec.tolerance_for(check.dtype)
    if check.scale > 1:
        return tol.model_copy(update={"atol": tol.atol * check.scale ** 2})
    return tol


class DrawnInputs(list):
    """Inputs drawn by `draw_inputs(spec, case, dtype, seed, on the device)`, which say so: a worker
    can draw the same ones itself instead of receiving them through host memory (Judge.place)."""

    def __init__(self, tensors: list[Any], case: Case, dtype: str, seed: int):
        super().__init__(tensors)
        self.recipe = (case, dtype, seed)
