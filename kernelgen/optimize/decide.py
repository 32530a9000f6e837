"""The keep rule and the early stops.

A candidate is judged per perf case x dtype against the best, timed interleaved in the same worker:
a case is a win when the paired speedup leaves 1 by more than the noise of both timings and of the
pairing itself (never by less than 1%), a loss when it falls below by as much, neutral otherwise —
and neutral without timing when it launches exactly what the best launches. A round is kept when it
wins somewhere and loses nowhere; where it wins on some cases and loses on others, the planner puts
the winning setting behind a dispatch table for those cases only. Under the CPU interpreter nothing is
decided on timings: the round is unjudged. A run stops at the target or at the device ceiling."""

from __future__ import annotations

import math

from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.optimize.diagnose import CEILING_FRACTION
from kernelgen.record.state import CaseResult, Diagnosis, KeepDecision, Verdict
from kernelgen.verify.results import PerformanceResult

# A candidate must beat the best by more than the run-to-run noise of either timing; never by less
# than 1%, the spread do_bench medians show between identical runs of a bandwidth-bound kernel.
MIN_NOISE = 0.01


def noise_of(*spreads: float | None) -> float:
    return max([s for s in spreads if s is not None] + [MIN_NOISE])


def case_verdict(speedup: float | None, noise: float) -> Verdict:
    if speedup is None:
        return "unjudged"
    if speedup > 1 + noise:
        return "win"
    if speedup < 1 / (1 + noise):
        return "loss"
    return "neutral"


def case_results(perf: PerformanceResult) -> list[CaseResult]:
    """Each perf case of a candidate timed against the best (`compare`), with its verdict."""
    out = []
    for c in perf.cases:
        r = CaseResult(case=c.case, dtype=c.dtype, shapes=c.shapes, best_ms=c.compare.ms if c.compare else None,
                       ms=c.kernel.ms if c.kernel else None, speedup=c.speedup_vs_compare)
        if not perf.measured:
            r.note = "CPU interpreter: not a measurement"
        elif not c.valid:
            r.verdict, r.note = "wrong", c.invalid_reason
        else:
            r.noise = noise_of(c.kernel.spread if c.kernel else None, c.compare.spread if c.compare else None, c.pair_noise)
            r.verdict = case_verdict(r.speedup, r.noise)
        out.append(r)
    return out


def decide_cases(cases: list[CaseResult], *, measured: bool) -> KeepDecision:
    """Kept when it wins somewhere and loses nowhere, each beyond its own noise."""
    if not measured:
        return KeepDecision(keep=False, threshold=1 + MIN_NOISE, reason=f"unjudged: {DRY_RUN_LABEL}; the best stays")
    wins = [c for c in cases if c.verdict == "win"]
    losses = [c for c in cases if c.verdict in ("loss", "wrong")]
    speedups = [c.speedup for c in cases if c.speedup]
    g = math.exp(sum(math.log(x) for x in speedups) / len(speedups)) if speedups else None
    threshold = 1 + max([c.noise for c in cases] + [MIN_NOISE])
    if losses:
        lost = "; ".join(f"{c.label} x{c.speedup:.3f} (noise ±{100 * c.noise:.1f}%)" if c.speedup else f"{c.label}: {c.note}"
                         for c in losses)
        return KeepDecision(keep=False, speedup=g, threshold=threshold, reason=f"slower beyond the noise on {lost}")
    if not wins:
        return KeepDecision(keep=False, speedup=g, threshold=threshold,
                            reason="no case faster beyond its noise" + (f" (geomean x{g:.3f})" if g else ""))
    won = ", ".join(f"{c.label} x{c.speedup:.3f}" for c in wins)
    return KeepDecision(keep=True, speedup=g, threshold=threshold,
                        reason=f"faster beyond the noise on {won}; no case slower" + (f" (geomean x{g:.3f})" if g else ""))


def at_ceiling(diag: Diagnosis) -> bool:
    return diag.min_frac_peak is not None and diag.min_frac_peak >= CEILING_FRACTION


def stop_reason(diag: Diagnosis) -> str | None:
    if diag.target_met:
        return f"target met: geomean x{diag.speedup_eager:.2f} vs eager >= x{diag.target:g} (round {diag.round})"
    if at_ceiling(diag):
        return (f"at the device ceiling: every perf case reaches >= {100 * diag.min_frac_peak:.0f}% of the measured "
                f"{diag.bound}-bound peak (round {diag.round}); what is left is within the noise")
    return None
