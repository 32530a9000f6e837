"""The truth a candidate is measured against: the reference run in float64 on the same inputs.

A 16-bit reference rounds at every step, so its output is not the right answer, only one rounding of
it: level 2's 41 (GEMM + training-mode BatchNorm) in float16 has eager at 1.3623 where a kernel keeping
float32 between its stages gave 1.3486 and the float64 truth says which is closer. So the judge runs
the reference a second time with every floating input upcast exactly to float64 (float32 where an op
has no float64 kernel), and an output element passes when

- it is within the dtype's tolerance of the truth (|got - truth| <= atol + rtol * |truth|), or
- the whole output is no worse than a stated multiple of eager's own error against the truth, in
  root-mean-square and in every element: rmse(got) <= m * rmse(eager) + atol / 10 and each
  |got - truth| <= atol + rtol * |truth| + m * max|eager - truth|, with m = 2 for float32 and 3 for
  float16 and bfloat16 (torch._dynamo.utils.same with fp64_ref: the rule Inductor's accuracy checks
  use). The per-element half is this judge's own: a rmse alone lets one wrong element of a million
  through.

Eager runs in the user's TF32 mode (kernelgen.verify.judge.precision), so a float32 matmul kernel
using TF32 passes by the second rule exactly when eager uses TF32 too: a kernel is held to eager's
precision class, never to a stricter one. Non-finite values are judged against eager, as before: NaN
or Inf where eager is finite never passes; where eager overflows and the truth is finite, a finite
value within tolerance of the truth passes (it is better than eager).
"""

from __future__ import annotations

import math
from typing import Any, Callable

MULTIPLIER = {"float32": 2.0, "float16": 3.0, "bfloat16": 3.0}
_TRUTH_DTYPES = ("float64", "float32")


def multiplier(dtype: Any) -> float:
    return MULTIPLIER.get(str(dtype).removeprefix("torch."), 2.0)


def _upcast(t: Any, dtype: Any) -> Any:
    """`t` in `dtype`, same strides (eager's output layout follows its inputs'); non-floats as they are."""
    import torch

    if not isinstance(t, torch.Tensor) or not t.dtype.is_floating_point or t.dtype == dtype:
        return t.clone() if isinstance(t, torch.Tensor) else t
    out = torch.empty_strided(t.size(), t.stride(), dtype=dtype, device=t.device)
    out.copy_(t)
    return out


def truth(baseline: Callable[..., Any], inputs: list[Any], params: dict[str, Any], expected: tuple) -> tuple[tuple, str]:
    """Per output, the reference's answer in float64 (float32 where an op has none), or None where no
    higher precision applies (an integer output, a float64 one, or an output whose shape differs);
    and which precision it is ("float64", "float32", or "" when none ran)."""
    import torch

    floats = [e.dtype for e in expected if isinstance(e, torch.Tensor) and e.dtype.is_floating_point]
    if not floats or all(d == torch.float64 for d in floats):
        return tuple(None for _ in expected), ""
    for name in _TRUTH_DTYPES:
        dtype = getattr(torch, name)
        if all(d.itemsize >= dtype.itemsize for d in floats):
            break  # float32 outputs gain nothing from a float32 truth
        try:
            with torch.no_grad():
                out = baseline(*[_upcast(t, dtype) for t in inputs], **params)
        except Exception:  # noqa: BLE001 - an op without this dtype (or a reference that insists on its own): try the next
            continue
        outs = tuple(out) if type(out) in (tuple, list) else (out,)
        if len(outs) != len(expected):
            continue
        return tuple(_usable(o, e) for o, e in zip(outs, expected)), name
    return tuple(None for _ in expected), ""


def _usable(t: Any, e: Any) -> Any:
    import torch

    ok = (isinstance(t, torch.Tensor) and isinstance(e, torch.Tensor) and e.dtype.is_floating_point
          and t.dtype.is_floating_point and t.dtype.itemsize > e.dtype.itemsize and tuple(t.shape) == tuple(e.shape))
    return t.to(torch.float64) if ok else None


def mismatches(g: Any, e: Any, t: Any, atol: float, rtol: float) -> tuple[Any, Any]:
    """(elements that fail the truth's tolerance, the bound each had); g, e, t in float64."""
    import torch

    bound = atol + rtol * t.abs()
    fin_e, fin_t, fin_g = torch.isfinite(e), torch.isfinite(t), torch.isfinite(g)
    near_truth = fin_g & fin_t & ((g - t).abs() <= bound)
    like_eager = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    ok = torch.where(fin_e & fin_t, near_truth, like_eager | (~fin_e & near_truth))
    return ~ok, torch.where(fin_t, bound, atol + rtol * e.abs())


class Relative:
    """The second rule's numbers for one output: the kernel's and eager's error against the truth."""

    def __init__(self, g: Any, e: Any, t: Any, bad: Any, bound: Any, atol: float, m: float):
        import torch

        both = torch.isfinite(e) & torch.isfinite(t)
        usable = both & torch.isfinite(g)
        n = int(both.sum())
        self.m = m
        self.kernel_max = _max((g - t).abs()[usable])
        self.eager_max = _max((e - t).abs()[both])
        self.kernel_rmse = _rmse((g - t)[usable], n)
        self.eager_rmse = _rmse((e - t)[both], n)
        # every failing element is one the rule may excuse (finite where eager and the truth are)
        excusable = bool((bad <= usable).all())
        within = bool(((g - t).abs()[bad] <= bound[bad] + m * self.eager_max).all()) if excusable else False
        self.passed = excusable and within and self.kernel_rmse <= m * self.eager_rmse + atol / 10

    def describe(self) -> str:
        """The second rule with both errors: `3x eager's error (max/rms: kernel 0.602/0.0308, eager 0.0058/0.000935)`."""
        return (f"{self.m:g}x eager's error (max/rms: kernel {self.kernel_max:.3g}/{self.kernel_rmse:.3g}, "
                f"eager {self.eager_max:.3g}/{self.eager_rmse:.3g})")


def _max(x: Any) -> float:
    return float(x.max()) if x.numel() else 0.0


def _rmse(x: Any, n: int) -> float:
    return math.sqrt(float((x * x).sum()) / n) if n else 0.0
