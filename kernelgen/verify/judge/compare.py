"""Comparing the outputs the candidate returned with the baseline's, in the judge, by the oracle's one
rule (kernelgen.verify.judge.oracle): against the case's float64 truth (kernelgen.verify.judge.bigtruth:
whole, in batch slices, or on a sample of rows), within the dtype's tolerance of it or no worse than a
stated multiple of eager's own error against it. Every check that can fail a kernel comes here with a
truth: the test cases, the generated ones, the perf-shape spot check, the timed outputs. Without one
(a float64 output: eager is the truth; the ablation probe) floats pass within the tolerance of eager,
where both are NaN, or where both are the same infinity. NaN or Inf where the baseline is finite never
passes, nor does a finite value where it is infinite. Integers and booleans must match eager exactly.
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
from kernelgen.verify.judge.bigtruth import NotSeparable
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


def compare(got: Any, expected: Any, tol: ToleranceSpec, fill: Fill | None = None, *, truth: Any = None,
            oracle: str = "") -> Comparison:
    """`got` against eager's `expected` by the oracle's rule: against `truth` where given for a float
    output (a float64 tensor of the same shape, `oracle` naming its precision, or a truth of
    kernelgen.verify.judge.bigtruth, which names itself and may cover a sample of rows), else within
    the tolerance of eager (integers and booleans: exactly). Slab by slab along dim 0, CHUNK elements
    at a time: no float64 copy of a whole huge output is ever made."""
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
    floating = expected.dtype.is_floating_point
    source = None
    if floating and truth is not None:
        source = truth if hasattr(truth, "slabs") else oracle_rule.FullTruth(truth, oracle)
    tally, failing = _tally(got, expected, tol, source)
    policy_ref = getattr(source, "policy_ref", None)
    if floating and not tally.rule() and policy_ref is not None:
        allowed = policy_ref()  # what one TF32 product makes here, where the policy allows it (tf32ref)
        if allowed is not None:
            tally, failing = _tally(got, expected, tol, source, allowed)
    return _verdict(tally, got, expected, tol, fill, failing, source)


def _tally(got: Any, expected: Any, tol: ToleranceSpec, source: Any, allowed: Any = None) -> tuple[Any, list[tuple[int, Any]]]:
    """The oracle's numbers over one output, slab by slab along dim 0 (CHUNK elements at a time), and the
    failing mask of each slab with a failure. `allowed`: the reference under the precision policy's TF32
    (kernelgen.verify.judge.tf32ref), whose error counts as eager's where it is the larger."""
    import torch

    floating = expected.dtype.is_floating_point
    tally = oracle_rule.Tally(tol.atol, tol.rtol, oracle_rule.multiplier(expected.dtype), relative=source is not None,
                              policy=allowed is not None)
    row = expected[0].numel() if expected.dim() else 1
    failing: list[tuple[int, Any]] = []
    for lo, hi, t in (source.slabs(max(1, CHUNK // max(1, row))) if source is not None else _rows(expected, row)):
        g, e = (got[lo:hi], expected[lo:hi]) if expected.dim() else (got, expected)
        if not floating:
            bad = tally.add_exact(g, e, lo * row)
        else:
            g64, e64 = g.to(torch.float64), e.to(torch.float64)
            p64 = None if allowed is None else (allowed[lo:hi] if expected.dim() else allowed).to(device=g64.device, dtype=torch.float64)
            bad = tally.add(g64, e64, e64 if t is None else t.to(device=g64.device, dtype=torch.float64), lo * row, p64)
            del g64, e64, p64
        if bool(bad.any()):
            failing.append((lo, bad))
    return tally, failing


def compare_outputs(got: list[Any], expected: tuple, tol: ToleranceSpec, fill: Fill | None = None, *,
                    truth: Any = None) -> list[Comparison]:
    """Every output of one call against eager's by the oracle's rule, the truth being the case's
    (kernelgen.verify.judge.bigtruth.CaseTruth). A truth in batch slices whose proof fails on a later
    slice is replaced, once and for every later comparison of the case, by the truth computed another way."""
    truths = truth.outputs if truth is not None else tuple(None for _ in expected)
    try:
        return [compare(g, e, tol, fill, truth=t) for g, e, t in zip(got, expected, truths)]
    except NotSeparable:
        again = truth.retry()
        truth.outputs, truth.how, truth.retry = again.outputs, again.how, None
        return [compare(g, e, tol, fill, truth=t) for g, e, t in zip(got, expected, truth.outputs)]


def _rows(expected: Any, row: int) -> Any:
    """Slabs of eager's output itself (no truth): (first row, end row, None)."""
    if expected.dim() == 0:
        yield 0, 1, None
        return
    step = max(1, CHUNK // max(1, row))
    for lo in range(0, expected.shape[0], step):
        yield lo, min(lo + step, expected.shape[0]), None


def _verdict(tally: Any, got: Any, expected: Any, tol: ToleranceSpec, fill: Fill | None, failing: list[tuple[int, Any]],
             source: Any) -> Comparison:
    """The Comparison the tally makes, with the message a kernel engineer acts on where it failed."""
    rule = tally.rule()
    out = Comparison(passed=bool(rule), total=tally.total, mismatches=tally.bad, rule=rule,
                     max_abs_err=_finite_or_none(tally.max_abs), max_rel_err=_finite_or_none(tally.max_rel))
    if source is not None:
        out.oracle, out.truth_max_err, out.eager_max_err = source.label, tally.kernel_max, tally.eager_max
        out.truth_rmse, out.eager_rmse = tally.kernel_rmse, tally.eager_rmse
    if out.passed:
        return out
    out.nonfinite = tally.nonfinite
    _unwritten(out, got, failing, fill)
    worst = tally.worst
    out.worst_index = _unravel(worst.flat, tuple(expected.shape)) if expected.dim() else []
    out.got, out.expected = _finite_or_none(worst.got), _finite_or_none(worst.truth)
    parts = []
    if out.nonfinite:
        parts.append(f"{out.nonfinite} NaN/Inf where the baseline is finite")
    if out.unwritten:
        parts.append(f"{out.unwritten} never written ({out.unwritten_pattern}; first {out.unwritten_first}, "
                     f"last {out.unwritten_last})")
    if tally.bad_finite:
        parts.append(f"{tally.bad_finite} finite but off: max abs err {tally.max_abs:.3g}, max rel err {tally.max_rel:.3g}")
    head = f"{tally.bad} of {tally.total} elements differ ({'; '.join(parts)}); worst at {out.worst_index}: got {_fmt(worst.got)}"
    if source is None:
        tol_txt = f"atol {tol.atol:g}, rtol {tol.rtol:g}" if expected.dtype.is_floating_point else "exact match required"
        out.message = f"{head}, expected {_fmt(worst.truth)} ({tol_txt})"
        return out
    out.eager = _finite_or_none(worst.eager)
    under = f" under {source.eager_under}" if source.eager_under else ""
    out.message = (f"{head}, {source.label} truth {_short(worst.truth)}, eager {_short(worst.eager)} "
                   f"(atol {tol.atol:g}, rtol {tol.rtol:g}, or {tally.describe()}). Max abs err {tally.kernel_max:.3g} "
                   f"against the {source.label} truth; eager's own {tally.eager_max:.3g}{under}: {tally.why_not()}"
                   + (f" (the truth: {source.note})" if source.note else ""))
    return out


def _unwritten(out: Comparison, got: Any, failing: list[tuple[int, Any]], fill: Fill | None) -> None:
    """The failing elements still holding this call's poison: how many, where, and the pattern (a
    mask of the whole output, on the host, made only when some are found)."""
    import torch

    if fill is None or str(got.dtype).removeprefix("torch.") not in fill.floats:
        return  # integers and booleans: the second fill tells those apart
    mask = None
    for lo, bad in failing:
        piece = bad & poisoned_mask(got[lo:lo + bad.shape[0]] if got.dim() else got, fill)
        if bool(piece.any()):
            if mask is None:
                mask = torch.zeros(got.shape, dtype=torch.bool)
            if got.dim():
                mask[lo:lo + bad.shape[0]] = piece.cpu()
            else:
                mask = piece.cpu()
    if mask is None:
        return
    out.unwritten = int(mask.sum())
    idx = torch.nonzero(mask.reshape(-1)).reshape(-1)
    shape = tuple(got.shape)
    out.unwritten_first, out.unwritten_last = _unravel(int(idx[0]), shape), _unravel(int(idx[-1]), shape)
    out.unwritten_pattern = unwritten_pattern(mask)


def agree(a: Any, b: Any, tol: ToleranceSpec) -> int:
    """How many elements of two outputs of the same call on the same inputs disagree (beyond the
    tolerance, NaN matching NaN): an honest kernel never depends on memory it did not write."""
    import torch

    if a.shape != b.shape or a.dtype != b.dtype or a.numel() == 0:
        return 0
    if a.dtype.is_floating_point:
        return int((~torch.isclose(a.to(torch.float64), b.to(torch.float64), rtol=tol.rtol, atol=tol.atol, equal_nan=True)).sum())
    return int((a != b).sum())
