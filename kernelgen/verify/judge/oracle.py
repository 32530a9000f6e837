"""The one rule every comparison that can fail a kernel is decided by: its error against the reference
run in float64 on the same inputs (the truth), beside eager's own error against it.

A 16-bit reference rounds at every step, so its output is not the right answer, only one rounding of
it: level 2's 41 (GEMM + training-mode BatchNorm) in float16 has eager at 1.3623 where a kernel keeping
float32 between its stages gave 1.3486 and the float64 truth says which is closer. A float32
convolution under cuDNN's TF32 (PyTorch's default) is off the truth by 1.05e-3 at level 1's 62
(8x32x512x512, 5x9 kernel; 6e-6 with TF32 off): held to eager's output at a fixed 1e-4, a tf32x3 kernel
5.1e-4 from it was refused (22,500,212 of 131,088,384 elements). So an output element passes when

- it is within the dtype's tolerance of the truth (|got - truth| <= atol + rtol * |truth|), or
- the whole output is no worse than a stated multiple of eager's own error against the truth, in
  root-mean-square and in every element: rmse(got) <= m * rmse(eager) + atol / 10 and each
  |got - truth| <= atol + rtol * |truth| + m * max|eager - truth|, with m = 2 for float32 and 3 for
  float16 and bfloat16 (torch._dynamo.utils.same with fp64_ref: the rule Inductor's accuracy checks
  use). The per-element half is this judge's own: a rmse alone lets one wrong element of a million
  through.

Eager runs under the user's precision policy (kernelgen.precision): a float32 convolution
kernel using one TF32 product passes by the second rule exactly when eager's cuDNN convolution may use
TF32 too; with TF32 off, eager is IEEE and the kernel must be IEEE-class (tf32x3 or IEEE). Non-finite
values are judged against eager: NaN or Inf where eager is finite never passes; where eager overflows
and the truth is finite, a finite value within tolerance of the truth passes (it is better than eager).

The numbers are gathered slab by slab (`Tally`): an output too large for float64 copies on the device
(KernelBench's Frobenius norm, 1.9 G elements) is judged in pieces, and a truth computed in batch slices
or on a sample of rows (kernelgen.verify.judge.bigtruth) is judged by the same rule. Which truth, and
what it cost, is in kernelgen.verify.judge.bigtruth; this module is the rule.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator

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
    and which precision it is ("float64", "float32", or "" when none ran). The caller runs it with
    TF32 off (a float32 truth is IEEE float32)."""
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
        except torch.OutOfMemoryError:
            raise  # not the op's limit but the device's: the caller computes the truth another way
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


class FullTruth:
    """One output's truth held whole (float64, or IEEE float32 where nothing finer fits), handed out in
    slabs of rows; `label` names it in every verdict, `eager_under` the policy eager ran under."""

    def __init__(self, t: Any, label: str, eager_under: str = "", note: str = "",
                 policy_ref: Callable[[], Any] | None = None):
        self.t, self.label, self.eager_under, self.note = t, label, eager_under, note
        # the reference under the policy's TF32 (kernelgen.verify.judge.tf32ref), computed on first use
        self.policy_ref = policy_ref

    def slabs(self, step: int) -> Iterator[tuple[int, int, Any]]:
        """(first row, end row, the truth of those rows in float64) along dim 0, `step` rows at a time."""
        import torch

        if self.t.dim() == 0:
            yield 0, 1, self.t.to(torch.float64)
            return
        for lo in range(0, self.t.shape[0], step):
            hi = min(lo + step, self.t.shape[0])
            yield lo, hi, self.t[lo:hi].to(torch.float64)


def mismatches(g: Any, e: Any, t: Any, atol: float, rtol: float) -> tuple[Any, Any]:
    """(elements that fail the truth's tolerance, the bound each had); g, e, t in float64. With t = e it
    is the plain tolerance against eager (torch.isclose with equal_nan)."""
    import torch

    bound = atol + rtol * t.abs()
    fin_e, fin_t, fin_g = torch.isfinite(e), torch.isfinite(t), torch.isfinite(g)
    near_truth = fin_g & fin_t & ((g - t).abs() <= bound)
    like_eager = torch.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
    ok = torch.where(fin_e & fin_t, near_truth, like_eager | (~fin_e & near_truth))
    return ~ok, torch.where(fin_t, bound, atol + rtol * e.abs())


class Worst:
    """The failing element furthest beyond its bound (NaN/Inf first), with its values."""

    def __init__(self, rank: float, flat: int, got: float, truth: float, eager: float):
        self.rank, self.flat, self.got, self.truth, self.eager = rank, flat, got, truth, eager


class Tally:
    """The rule's numbers over one output, added slab by slab: counts, both errors against the truth,
    how far the failing elements are beyond the tolerance, and the worst of them. `relative`: a truth
    other than eager is given, so the second rule (m x eager's error) may excuse what the first refuses."""

    def __init__(self, atol: float, rtol: float, m: float, *, relative: bool, policy: bool = False):
        self.atol, self.rtol, self.m, self.relative = atol, rtol, m, relative
        self.policy = policy  # eager's error is the worse of eager's and one TF32 product's (tf32ref)
        self.total = self.bad = self.bad_finite = self.nonfinite = self.n_both = 0
        self.max_abs = self.max_rel = -math.inf  # over finite errors against the truth
        self.kernel_max = self.eager_max = self.kernel_sq = self.eager_sq = 0.0
        self.excusable = True  # every failing element is finite where eager and the truth are
        self.excess = -math.inf  # the largest |got - truth| - tolerance over the failing elements
        self.worst: Worst | None = None

    def add(self, g: Any, e: Any, t: Any, offset: int, p: Any = None) -> Any:
        """One slab (float64, same shape; `offset`: the flat index of its first element); its failing mask.
        `p`: the reference under the policy's TF32, where it applies: eager's error is the larger of the two."""
        import torch

        bad, bound = mismatches(g, e, t, self.atol, self.rtol)
        diff = (g - t).abs()
        finite = torch.isfinite(diff)
        self.total += g.numel()
        self.bad += int(bad.sum())
        if bool(finite.any()):
            self.max_abs = max(self.max_abs, float(diff[finite].max()))
            self.max_rel = max(self.max_rel, float((diff / t.abs().clamp_min(1e-12))[finite].max()))
        if self.relative:
            both = torch.isfinite(e) & torch.isfinite(t)
            usable = both & torch.isfinite(g)
            self.n_both += int(both.sum())
            self.kernel_max = max(self.kernel_max, _max(diff[usable]))
            allowed = (e - t).abs()
            if p is not None:
                allowed = torch.maximum(allowed, torch.nan_to_num((p - t).abs(), nan=0.0, posinf=0.0))
            self.eager_max = max(self.eager_max, _max(allowed[both]))
            self.kernel_sq += float((diff[usable] ** 2).sum())
            self.eager_sq += float((allowed[both] ** 2).sum())
            self.excusable = self.excusable and bool((bad <= usable).all())
        if bool(bad.any()):
            self.nonfinite += int((bad & ~torch.isfinite(g) & torch.isfinite(e)).sum())
            self.bad_finite += int((bad & finite).sum())
            excess = torch.where(finite, diff - bound, torch.full_like(diff, math.inf))
            excess = torch.where(bad, excess, torch.full_like(excess, -math.inf)).reshape(-1)
            i = int(torch.argmax(excess))
            rank = float(excess[i])
            self.excess = max(self.excess, rank if math.isfinite(rank) else self.excess)
            if self.worst is None or rank > self.worst.rank:
                self.worst = Worst(rank, offset + i, float(g.reshape(-1)[i]), float(t.reshape(-1)[i]), float(e.reshape(-1)[i]))
        return bad

    def add_exact(self, got: Any, expected: Any, offset: int) -> Any:
        """One slab of an integer or boolean output: equal to eager's, in its own dtype (float64 would
        round above 2**53); its failing mask."""
        import torch

        bad = got != expected
        self.total += got.numel()
        n = int(bad.sum())
        if n:
            self.bad += n
            i = int(torch.argmax(bad.reshape(-1).to(torch.int8)))
            if self.worst is None:
                self.worst = Worst(math.inf, offset + i, float(got.reshape(-1)[i]), float(expected.reshape(-1)[i]),
                                   float(expected.reshape(-1)[i]))
        return bad

    @property
    def kernel_rmse(self) -> float:
        return math.sqrt(self.kernel_sq / self.n_both) if self.n_both else 0.0

    @property
    def eager_rmse(self) -> float:
        return math.sqrt(self.eager_sq / self.n_both) if self.n_both else 0.0

    @property
    def rms_bound(self) -> float:
        return self.m * self.eager_rmse + self.atol / 10

    @property
    def element_bound(self) -> float:
        """How far beyond the tolerance an element may be under the second rule: m x eager's max error."""
        return self.m * self.eager_max

    def rule(self) -> str:
        """"tolerance", "eager-multiple" (excused by the second rule), or "" (failed)."""
        if not self.bad:
            return "tolerance"
        if self.relative and self.excusable and self.excess <= self.element_bound and self.kernel_rmse <= self.rms_bound:
            return "eager-multiple"
        return ""

    def describe(self) -> str:
        """The second rule with both errors: `2x eager's error (max/rms: kernel 0.602/0.0308, eager 0.0058/0.000935)`."""
        whose = "the policy's error (eager's, or one TF32 product's where larger)" if self.policy else "eager's error"
        return (f"{self.m:g}x {whose} (max/rms: kernel {self.kernel_max:.3g}/{self.kernel_rmse:.3g}, "
                f"eager {self.eager_max:.3g}/{self.eager_rmse:.3g})")

    def why_not(self) -> str:
        """Which half of the second rule the kernel breaks, with the bound it breaks."""
        if not self.excusable:
            return "NaN/Inf where eager and the truth are finite is never excused"
        parts = []
        if self.excess > self.element_bound:
            parts.append(f"its worst element is {self.excess:.3g} beyond the tolerance, over the bound {self.m:g}x "
                         f"eager's {self.eager_max:.3g} = {self.element_bound:.3g}")
        if self.kernel_rmse > self.rms_bound:
            parts.append(f"its rms error {self.kernel_rmse:.3g} is over the bound {self.m:g}x eager's "
                         f"{self.eager_rmse:.3g} + atol/10 = {self.rms_bound:.3g}")
        return "; ".join(parts)


def _max(x: Any) -> float:
    return float(x.max()) if x.numel() else 0.0
