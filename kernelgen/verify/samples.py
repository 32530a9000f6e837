"""Statistics of timed repetitions: the timing of record, its spread, and the median's confidence
interval (what kernelgen.verify.adaptive stops on)."""

from __future__ import annotations

import math

from kernelgen.verify.results import KernelTiming

Z95 = 1.96  # two-sided 95% normal quantile, for the median's order-statistic interval


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[(n - 1) // 2] + s[n // 2]) / 2 if n else 0.0


def median_ci(xs: list[float]) -> float:
    """Relative half-width of a distribution-free 95% confidence interval of the median: the order
    statistics x(j), x(k) with j, k = n/2 -/+ 1.96 sqrt(n)/2 (the number of samples below the median
    is binomial(n, 1/2); normal approximation). No assumption on the shape of the distribution, which
    is skewed (interference only adds time) and often has two modes. Under 6 samples it is the whole
    range (coverage 1 - 2^(1-n): 94% at 5); infinite under 2."""
    n = len(xs)
    med = median(xs)
    if n < 2 or med <= 0:
        return math.inf
    s = sorted(xs)
    half = Z95 * math.sqrt(n) / 2
    j = max(0, math.floor(n / 2 - half))
    k = min(n - 1, math.ceil(n / 2 + half) - 1)
    return (s[k] - s[j]) / (2 * med)


def summarize(times: list[float]) -> KernelTiming:
    """The timing of record: the mean of the faster half of the repetitions (interference only ever
    adds time, and a median of a two-mode sample can land in either mode), with the spread between
    the 20th and 80th percentile as the noise it carries, and the median's confidence interval."""
    xs = sorted(times)
    n = len(xs)
    lower = xs[: max(1, (n + 1) // 2)]
    ms = sum(lower) / len(lower)
    p20, p80 = xs[int(0.2 * (n - 1))], xs[int(0.8 * (n - 1))]
    ci = median_ci(xs)
    return KernelTiming(ms=ms, ms_min=xs[0], ms_max=xs[-1], spread=(p80 - p20) / ms if ms else 0.0, reps=n,
                        ci=ci if math.isfinite(ci) else None)
