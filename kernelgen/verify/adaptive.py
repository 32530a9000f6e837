"""How long to time: until the median is as sharp as the keep rule can use, and no longer.

The keep rule (kernelgen.optimize.decide) calls a case a win only when the paired speedup leaves 1 by
more than the noise of both timings and of the pairing, and never by less than 1% (its MIN_NOISE).
A timing whose median is known to within half of that noise decides exactly what a longer one would,
so each kernel is timed until the distribution-free 95% confidence interval of its median
(kernelgen.verify.timing.median_ci) has a half-width under max(1%, its own p20-p80 spread) / 2, with
at least MIN_REPS repetitions (below that the spread itself is a guess). With the spread as the
floor, that takes about ten repetitions whatever the noise (the interval shrinks as 1/sqrt(n)
faster than the spread is estimated), so a 5 ms kernel costs a few repetitions where fixed 40 ms
rounds cost eight, and a 20 us kernel a few dozen where they cost hundreds.

Candidate and best are still timed interleaved, in rounds (who goes first rotates), since the pairing
is what cancels clock and neighbour drift: at least PAIRED_ROUNDS when there is a best to pair with,
one when a kernel is timed alone, more only while some kernel is not yet sharp, within a budget of
timed device time per kernel. Each request carries at least REQUEST_MS of device work, so that the
judge's wall-clock bound on it (kernelgen.verify.judge.wallclock) has something to resolve.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernelgen.verify.samples import median_ci, summarize

MIN_NOISE = 0.01  # the keep rule's floor (kernelgen.optimize.decide.MIN_NOISE): under 1% nothing is decided
MIN_REPS = 10  # per kernel: below this the p20-p80 spread is the difference of two samples
PAIRED_ROUNDS = 3  # the pair noise is the range of per-round ratios: three rounds, as before
REQUEST_MS = 8.0  # device work per timing request: 8x the wall-clock bound's absolute slack (1 ms)
WARMUP_MS = 5.0  # untimed calls before the first timed repetition of a request
MAX_REQUEST_REPS = 400  # ~1600 queue entries at most: the launch queue blocks, nothing breaks
CPU_REPS = 3  # the interpreter's dry run: three calls, as before (nothing is decided on them)


@dataclass(frozen=True)
class Plan:
    min_rounds: int
    max_rounds: int
    budget_ms: float  # claimed device time of timed calls, per kernel, over all rounds
    interpreter: bool = False
    cpu_reps: int = CPU_REPS

    @classmethod
    def alone(cls, budget_ms: float, *, interpreter: bool) -> "Plan":
        return cls(min_rounds=1, max_rounds=8, budget_ms=budget_ms, interpreter=interpreter)

    @classmethod
    def paired(cls, kernels: int, *, rounds: int, round_ms: float, interpreter: bool) -> "Plan":
        """`rounds` and `round_ms` as callers gave them when rounds were fixed: at most that many
        rounds (at least PAIRED_ROUNDS when pairing, if allowed), within rounds x round_ms per kernel."""
        least = min(PAIRED_ROUNDS, rounds) if kernels > 1 else 1
        return cls(min_rounds=least, max_rounds=max(rounds, least), budget_ms=rounds * round_ms, interpreter=interpreter)

    def reps(self, est_ms: float, per_rep_ms: float = 0.0) -> int:
        """Repetitions per request for a kernel whose call takes about `est_ms` (`per_rep_ms`: the
        flush and events around each)."""
        if self.interpreter:
            return self.cpu_reps
        n = max(math.ceil(MIN_REPS / self.min_rounds), math.ceil(REQUEST_MS / max(est_ms + per_rep_ms, 1e-4)))
        fits = math.floor(self.budget_ms / (self.min_rounds * max(est_ms, 1e-6)))  # large kernels: few repetitions
        return max(2, min(n, MAX_REQUEST_REPS, fits))

    def warmup(self, est_ms: float, warmup_ms: float = WARMUP_MS) -> int:
        if self.interpreter:
            return 1
        return min(100, math.floor(warmup_ms / max(est_ms, 1e-4)))

    @staticmethod
    def sharp(times: list[float]) -> bool:
        """Whether the median is known to within half the noise the keep rule will use."""
        if len(times) < MIN_REPS:
            return False
        return median_ci(times) <= max(MIN_NOISE, summarize(times).spread) / 2

    def done(self, times: list[list[float]], rounds: int) -> bool:
        """After `rounds` rounds, with every kernel's repetitions so far."""
        if rounds < (1 if self.interpreter else self.min_rounds):
            return False
        if self.interpreter or rounds >= self.max_rounds:
            return True
        return all(self.sharp(t) for t in times) or max(sum(t) for t in times) >= self.budget_ms
