"""Checks of a derived spec that need real numbers (small CPU tensors): the forward must not draw random
numbers of its own, and which 16-bit dtypes the reference runs in."""

from __future__ import annotations

import math

from kernelgen.errors import ProblemFileError
from kernelgen.spec.kernelbench.source import ProblemSource
from kernelgen.spec.model import OperatorSpec
from kernelgen.spec.reference import load_reference
from kernelgen.spec.sampling import draw_inputs


def _smallest(spec: OperatorSpec) -> dict[str, list[int]]:
    return min(spec.test_cases, key=lambda c: sum(math.prod(s) for s in c.values()))


def _outputs(out: object) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _same(a: object, b: object) -> bool:
    import torch

    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    equal = a == b
    if a.is_floating_point():
        equal |= a.isnan() & b.isnan()
    return bool(equal.all())


def check_deterministic(src: ProblemSource, spec: OperatorSpec) -> None:
    """Run the reference twice on the same inputs under different global seeds: a forward that draws
    (nn.Dropout in training mode) has no single right answer for a kernel to match."""
    import torch

    fn = load_reference(spec)
    inputs = draw_inputs(spec, _smallest(spec), "float32", 0, "cpu")
    runs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        try:
            with torch.no_grad():
                runs.append(_outputs(fn(*inputs)))
        except Exception as e:  # noqa: BLE001 - the problem's forward failing on real numbers
            raise ProblemFileError(src.path, f"Model's forward fails on small CPU inputs {_smallest(spec)}: "
                                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
    if not all(_same(a, b) for a, b in zip(*runs)):
        drawn = _random_calls(fn, inputs, spec)
        raise ProblemFileError(src.path, f"the forward draws random numbers ({drawn or 'e.g. nn.Dropout in training mode'}): "
                                         "two runs on the same inputs with different seeds differ, so no kernel has one right answer")


_RANDOM = ("rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "normal", "bernoulli", "multinomial",
           "randperm", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def _random_calls(fn: object, inputs: list, spec: OperatorSpec) -> str:
    """The random-number calls a forward makes and where: `torch.randn at line 34 of the reference (`h0 =
    torch.randn(...)`)`; "" where none is seen at the torch-function level."""
    import torch
    from torch.overrides import TorchFunctionMode

    seen: list[str] = []

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            name = getattr(func, "__name__", "")
            p = (kwargs or {}).get("p", args[1] if len(args) > 1 and name.endswith("dropout") else 1.0)
            if name in _RANDOM and not (name.endswith("dropout") and (p == 0 or not (kwargs or {}).get("training", True))):
                seen.append(f"torch.{name}{_caller_line(spec)}")
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Watch():
        try:
            fn(*inputs)  # type: ignore[operator]
        except Exception:  # noqa: BLE001 - what it drew before failing is still named
            pass
    return ", ".join(dict.fromkeys(seen))


NUMERIC_FLOPS = 500e6  # above this a case's 16-bit runs are tried on meta tensors (CPU fp16 convolutions are slow)


def runnable_dtypes(spec: OperatorSpec, candidates: tuple[str, ...]) -> list[str]:
    """The candidate dtypes the reference runs in on the CPU, with finite results wherever float32's are.
    Where the smallest case costs more than NUMERIC_FLOPS, the dtypes it runs in on meta tensors: level
    3's ResNetBasicBlock (its own 10x3x224x224 is its smallest case, 4 GFLOP) spent 148 s in CPU float16
    and bfloat16 convolutions (2 cores, 2026-11-27). They are reported beside float32, which decides."""
    import torch

    fn = load_reference(spec)
    case = _smallest(spec)
    if _flops(fn, spec, case) > NUMERIC_FLOPS:
        return [d for d in candidates if _runs_on_meta(fn, spec, case, d)]
    with torch.no_grad():
        base = _outputs(fn(*draw_inputs(spec, case, "float32", 0, "cpu")))
    ok = []
    for dtype in candidates:
        try:
            with torch.no_grad():
                outs = _outputs(fn(*draw_inputs(spec, case, dtype, 0, "cpu")))
        except Exception:  # noqa: BLE001 - an op without a kernel in this dtype: not a dtype of this problem
            continue
        if all(not (b.is_floating_point() and b.isfinite().all() and not o.isfinite().all()) for b, o in zip(base, outs)):
            ok.append(dtype)
    return ok


def _caller_line(spec: OperatorSpec) -> str:
    """` (line 34 of the reference: `h0 = torch.randn(...)`)`: the reference's innermost frame calling now."""
    import sys

    from kernelgen.spec.reference import PRELUDE, reference_filename

    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != reference_filename(spec):
        frame = frame.f_back
    if frame is None:
        return ""
    n = frame.f_lineno - PRELUDE.count("\n")
    lines = (spec.reference or "").splitlines()
    return f" (line {n} of the reference: `{lines[n - 1].strip()}`)" if 1 <= n <= len(lines) else ""


def _runs_on_meta(fn: object, spec: OperatorSpec, case: dict, dtype: str) -> bool:
    import torch

    from kernelgen.spec.sampling import torch_dtype

    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    try:
        fn(*args)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - an op without this dtype: not a dtype of this problem
        return False
    return True


def _flops(fn: object, spec: OperatorSpec, case: dict) -> float:
    """The case's FLOPs, counted on meta tensors (0 where they cannot be)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from kernelgen.spec.sampling import torch_dtype

    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, "float32")), device="meta") for i in spec.inputs]
    counter = FlopCounterMode(display=False)
    try:
        with counter:
            fn(*args)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - an op without a meta kernel: the CPU runs decide
        return 0.0
    return float(counter.get_total_flops())
