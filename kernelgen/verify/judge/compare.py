"""Comparing one output the candidate returned with the baseline's, in the judge.

Floats pass where |got - expected| <= atol + rtol * |expected| (`torch.isclose`, in float64), where
both are NaN, or where both are the same infinity: NaN or Inf where the baseline is finite never
passes, nor does a finite value where it is infinite. Given the float64 truth (kernelgen.verify.judge.oracle),
floats are measured against it instead, and an output no worse than a stated multiple of eager's own
error against it passes too. Integers and booleans must match eager exactly.
Elements still holding this call's poison fill are reported as never written, with where they lie
(rows, columns, a tail, scattered), so a grid that misses the last block is obvious at once.
Output strides: where the baseline's output is contiguous, the candidate's must be too (a
column-major output breaks every `.view()` downstream); where eager follows a non-contiguous input's
layout, any dense layout is accepted.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelgen.spec import ToleranceSpec
from kernelgen.verify.judge import oracle as oracle_rule
from kernelgen.verify.poison import Fill, poisoned_mask


def as_tuple(x: Any) -> tuple:
    """A call's return value as the tuple of its outputs (exactly a tuple or list: a subclass such as
    a named tuple is one output, as the judge counts them)."""
    return tuple(x) if type(x) in (tuple, list) else (x,)


class Comparison(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passed: bool
    message: str = ""
    total: int = 0
    mismatches: int = 0
    nonfinite: int = 0
    unwritten: int = 0
    unwritten_first: list[int] | None = None
    unwritten_last: list[int] | None = None
    unwritten_pattern: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_index: list[int] | None = None
    got: float | None = None
    expected: float | None = None
    # Against the float64 truth (kernelgen.verify.judge.oracle), where one ran: its precision, both
    # errors, and which rule passed ("tolerance", or "eager-multiple": within m x eager's error).
    oracle: str = ""
    truth_max_err: float | None = None
    eager_max_err: float | None = None
    truth_rmse: float | None = None
    eager_rmse: float | None = None
    rule: str = ""
    eager: float | None = None  # eager's value at the worst index, where the truth is what is reported


def _fmt(v: float) -> str:
    return repr(v) if math.isfinite(v) else str(v)


def _short(v: float) -> str:
    return f"{v:.7g}" if math.isfinite(v) else str(v)


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _is_dense(t: Any) -> bool:
    """Non-overlapping and without gaps: some permutation of the dims is contiguous."""
    dims = sorted((s, d) for s, d in zip(t.stride(), t.shape) if d > 1)
    expected = 1
    for s, d in dims:
        if s != expected:
            return False
        expected *= d
    return True


def layout_problem(got: Any, expected: Any) -> str:
    """Why the candidate's output layout is not acceptable, or ""."""
    if expected.is_contiguous():
        if not got.is_contiguous():
            return (f"strides {list(got.stride())} but the baseline's output is contiguous {list(expected.stride())} "
                    "(a transposed or padded output breaks .view() in the caller)")
        return ""
    if not _is_dense(got):
        return f"strides {list(got.stride())} leave gaps or overlap; the baseline's output is dense {list(expected.stride())}"
    return ""


def unwritten_pattern(mask: Any) -> str:
    """Where the never-written elements of an output lie, in words a kernel engineer acts on."""
    import torch

    n = int(mask.sum())
    if n == 0:
        return ""
    if mask.dim() == 0:
        return "the single element"
    cols = mask.shape[-1]
    rows2d = mask.reshape(-1, cols)
    flat = mask.reshape(-1)
    idx = torch.nonzero(flat).reshape(-1)
    first, last = int(idx[0]), int(idx[-1])
    if last - first + 1 == n and last == flat.numel() - 1 and first > 0:
        return f"the tail: flat elements {first}-{last} (a grid that stops short, e.g. floor instead of ceil division)"
    bad_rows = torch.nonzero(rows2d.any(dim=1)).reshape(-1)
    bad_cols = torch.nonzero(rows2d.any(dim=0)).reshape(-1)
    if rows2d.shape[0] == 1:  # one row: rows and columns say nothing the flat indices do not
        pass
    elif rows2d[bad_rows].all() and len(bad_rows) < rows2d.shape[0]:
        r0, r1 = int(bad_rows[0]), int(bad_rows[-1])
        span = "contiguous" if r1 - r0 + 1 == len(bad_rows) else "not contiguous"
        return f"whole rows: {len(bad_rows)} of {rows2d.shape[0]} rows ({r0}-{r1}, {span}), every column"
    elif rows2d[:, bad_cols].all() and len(bad_cols) < cols:
        c0, c1 = int(bad_cols[0]), int(bad_cols[-1])
        return f"whole columns {c0}-{c1} of every row ({len(bad_cols)} of {cols}): the column blocks stop short"
    if last - first + 1 == n:
        return f"one block: flat elements {first}-{last}"
    return f"scattered: {n} elements between flat {first} and {last}"


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for d in reversed(shape):
        out.append(flat % d if d else 0)
        flat //= d if d else 1
    return list(reversed(out))


CHUNK = 1 << 26  # elements compared at once on the device: 512 MB per float64 copy


def _clean_in_chunks(got: Any, expected: Any, tol: ToleranceSpec) -> Comparison | None:
    """The comparison of a huge output slab by slab along dim 0 (float64 copies of one slab at a time):
    a passing Comparison when nothing differs, else None (the caller reports in full)."""
    import torch

    step = max(1, CHUNK // max(1, expected[0].numel()))
    max_abs = max_rel = 0.0
    for i in range(0, expected.shape[0], step):
        g, e = got[i:i + step].to(torch.float64), expected[i:i + step].to(torch.float64)
        if expected.dtype.is_floating_point:
            if bool((~torch.isclose(g, e, rtol=tol.rtol, atol=tol.atol, equal_nan=True)).any()):
                return None
        elif bool((got[i:i + step] != expected[i:i + step]).any()):
            return None
        diff = (g - e).abs()
        finite = torch.isfinite(diff)
        if bool(finite.any()):
            max_abs = max(max_abs, float(diff[finite].max()))
            max_rel = max(max_rel, float((diff / e.abs().clamp_min(1e-12))[finite].max()))
        del g, e, diff, finite
    return Comparison(passed=True, total=expected.numel(), max_abs_err=_finite_or_none(max_abs),
                      max_rel_err=_finite_or_none(max_rel))


def compare(got: Any, expected: Any, tol: ToleranceSpec, fill: Fill | None = None, *, truth: Any = None,
            oracle: str = "") -> Comparison:
    """`got` against eager's `expected`, or against `truth` (float64, same shape; `oracle` names its
    precision) where given for a float output."""
    import torch

    if tuple(got.shape) != tuple(expected.shape):
        return Comparison(passed=False, message=f"shape {list(got.shape)} but the baseline gives {list(expected.shape)}")
    if got.dtype != expected.dtype:
        return Comparison(passed=False, message=f"dtype {got.dtype} but the baseline gives {expected.dtype}")
    total = expected.numel()
    layout = layout_problem(got, expected) if total else ""
    if layout:
        return Comparison(passed=False, total=total, message=layout)
    if total == 0:
        return Comparison(passed=True, total=0)
    truth = truth if truth is not None and expected.dtype.is_floating_point else None
    if total > CHUNK and got.dim() and got.shape[0] > 1:
        clean = _clean_in_chunks(got, expected if truth is None else truth, tol)
        if clean is not None:
            return clean.model_copy(update={"oracle": oracle if truth is not None else ""})
        # mismatches in a huge output: the full report from host memory (a float64 copy of KernelBench's
        # 1.9 G-element Frobenius output is 15 GB, more than a GPU running the case has left)
        got, expected = got.cpu(), expected.cpu()
        truth = truth.cpu() if truth is not None else None
    g, e = got.to(torch.float64), expected.to(torch.float64)
    t = truth.to(device=g.device, dtype=torch.float64) if truth is not None else e
    bad, bound = _mismatches(got, expected, g, e, t if truth is not None else None, tol)
    n_bad = int(bad.sum())
    diff = (g - t).abs()
    finite = torch.isfinite(diff)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else float("nan")
    rel = diff / t.abs().clamp_min(1e-12)
    max_rel = float(rel[finite].max()) if bool(finite.any()) else float("nan")
    out = Comparison(passed=n_bad == 0, total=total, mismatches=n_bad, max_abs_err=_finite_or_none(max_abs),
                     max_rel_err=_finite_or_none(max_rel), rule="tolerance" if n_bad == 0 else "")
    relative = None
    if truth is not None:
        relative = oracle_rule.Relative(g, e, t, bad, bound, tol.atol, oracle_rule.multiplier(expected.dtype))
        out.oracle, out.truth_max_err, out.eager_max_err = oracle, relative.kernel_max, relative.eager_max
        out.truth_rmse, out.eager_rmse = relative.kernel_rmse, relative.eager_rmse
        if n_bad and relative.passed:
            out.passed, out.rule = True, "eager-multiple"
    if not n_bad or out.passed:
        return out
    out.nonfinite = int((bad & ~torch.isfinite(g) & torch.isfinite(e)).sum())
    _unwritten(out, got, bad, fill)
    # Worst = largest excess over the allowed bound; NaN/Inf mismatches rank first.
    excess = torch.where(finite, diff - bound, torch.full_like(diff, float("inf")))
    excess = torch.where(bad, excess, torch.full_like(excess, -float("inf")))
    flat = int(torch.argmax(excess.reshape(-1)))
    out.worst_index = _unravel(flat, tuple(expected.shape)) if expected.dim() else []
    gv, ev = float(g.reshape(-1)[flat]), float(t.reshape(-1)[flat])
    out.got, out.expected = _finite_or_none(gv), _finite_or_none(ev)
    tol_txt = f"atol {tol.atol:g}, rtol {tol.rtol:g}" if expected.dtype.is_floating_point else "exact match required"
    eager_txt = ""
    if relative is not None:
        out.eager = _finite_or_none(float(e.reshape(-1)[flat]))
        eager_txt = f", eager {_short(float(e.reshape(-1)[flat]))}"
        tol_txt += f", or {relative.describe()}"
    parts = []
    if out.nonfinite:
        parts.append(f"{out.nonfinite} NaN/Inf where the baseline is finite")
    if out.unwritten:
        parts.append(f"{out.unwritten} never written ({out.unwritten_pattern}; first {out.unwritten_first}, "
                     f"last {out.unwritten_last})")
    n_finite_bad = int((bad & finite).sum())
    if n_finite_bad:
        parts.append(f"{n_finite_bad} finite but off: max abs err {max_abs:.3g}, max rel err {max_rel:.3g}")
    want = f"{oracle} truth {_short(ev)}" if relative is not None else f"expected {_fmt(ev)}"
    out.message = (f"{n_bad} of {total} elements differ ({'; '.join(parts)}); worst at {out.worst_index}: "
                   f"got {_fmt(gv)}, {want}{eager_txt} ({tol_txt})")
    return out


def _mismatches(got: Any, expected: Any, g: Any, e: Any, t: Any, tol: ToleranceSpec) -> tuple[Any, Any]:
    """(the elements that fail, the bound each had): against the truth `t` where given, else eager."""
    import torch

    if t is not None:
        return oracle_rule.mismatches(g, e, t, tol.atol, tol.rtol)
    if expected.dtype.is_floating_point:
        return ~torch.isclose(g, e, rtol=tol.rtol, atol=tol.atol, equal_nan=True), tol.atol + tol.rtol * e.abs()
    return got != expected, torch.zeros_like(e)  # in the integer dtype itself: float64 would round above 2**53


def _unwritten(out: Comparison, got: Any, bad: Any, fill: Fill | None) -> None:
    """The failing elements still holding this call's poison: how many, where, and the pattern."""
    import torch

    mask = poisoned_mask(got, fill) if fill is not None else None
    if mask is None:
        return
    unwritten = bad & mask
    out.unwritten = int(unwritten.sum())
    if out.unwritten:
        idx = torch.nonzero(unwritten.reshape(-1)).reshape(-1)
        shape = tuple(got.shape)
        out.unwritten_first, out.unwritten_last = _unravel(int(idx[0]), shape), _unravel(int(idx[-1]), shape)
        out.unwritten_pattern = unwritten_pattern(unwritten)


def agree(a: Any, b: Any, tol: ToleranceSpec) -> int:
    """How many elements of two outputs of the same call on the same inputs disagree (beyond the
    tolerance, NaN matching NaN): an honest kernel never depends on memory it did not write."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype or a.numel() == 0:
        return 0
    if a.dtype.is_floating_point:
        return int((~torch.isclose(a.to(torch.float64), b.to(torch.float64), rtol=tol.rtol, atol=tol.atol, equal_nan=True)).sum())
    return int((a != b).sum())
