"""The keep rule and the early stops: a candidate is kept only when it beats the best, timed in the
same process, by more than the measured noise of both timings; a run stops at the target or at the
device ceiling."""

from __future__ import annotations

from kernelgen.devices import DRY_RUN_LABEL
from kernelgen.optimize.diagnose import CEILING_FRACTION
from kernelgen.record.state import Diagnosis, KeepDecision
from kernelgen.verify.results import PerformanceResult

# A candidate must beat the best by more than the run-to-run noise of either timing; never by less
# than 1%, the spread do_bench medians show between identical runs of a bandwidth-bound kernel.
MIN_NOISE = 0.01


def decide_keep(perf: PerformanceResult | None) -> KeepDecision:
    if perf is None:
        return KeepDecision(keep=False, threshold=1 + MIN_NOISE, reason="no performance result")
    if not perf.ok:
        why = perf.error or "; ".join(v.message for v in perf.violations) or \
            "; ".join(c.invalid_reason for c in perf.cases if not c.valid)
        return KeepDecision(keep=False, threshold=1 + MIN_NOISE, reason=f"the timing run is not valid: {why.splitlines()[-1] if why else 'unknown'}")
    speedup = perf.geomean("speedup_vs_compare")
    spreads = [t.spread for c in perf.cases for t in (c.kernel, c.compare) if t is not None]
    noise = max(spreads + [MIN_NOISE])
    threshold = 1 + noise
    if speedup is None:
        return KeepDecision(keep=False, threshold=threshold, reason="not timed against the current best")
    label = "" if perf.measured else f" [{DRY_RUN_LABEL}]"
    if speedup > threshold:
        return KeepDecision(keep=True, speedup=speedup, threshold=threshold,
                            reason=f"x{speedup:.3f} over the best, beyond the noise threshold x{threshold:.3f}{label}")
    verdict = "slower" if speedup < 1 else "not faster beyond the noise"
    return KeepDecision(keep=False, speedup=speedup, threshold=threshold,
                        reason=f"x{speedup:.3f} over the best: {verdict} (threshold x{threshold:.3f}){label}")


def at_ceiling(diag: Diagnosis) -> bool:
    return diag.min_frac_peak is not None and diag.min_frac_peak >= CEILING_FRACTION


def stop_reason(diag: Diagnosis) -> str | None:
    if diag.target_met:
        return f"target met: geomean x{diag.speedup_eager:.2f} vs eager >= x{diag.target:g} (round {diag.round})"
    if at_ceiling(diag):
        return (f"at the device ceiling: every perf case reaches >= {100 * diag.min_frac_peak:.0f}% of the measured "
                f"{diag.bound}-bound peak (round {diag.round}); what is left is within the noise")
    return None
