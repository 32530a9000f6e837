"""The judge's own clock around every timing request: the least device time the worker's calls can
have taken, and so the least it may claim.

A worker's timings come from the candidate's own process. However they were produced, the judge's
wall clock from sending a timing request to its answer (plus any device work still queued after it,
found by the sync that follows) holds the calls' real device time, and things the judge measured
itself: an empty timing request to this worker (no call: the round trip, the request's handling and
the loop's fixed cost, with no candidate code running), what each repetition of the loop costs
around a call that does nothing (`LoopCost`, measured in the judge's process on the same device),
and the candidate's host time per call (the judge's clock around a request of untimed calls).

    claimed device time >= wall - empty request - loop cost - host time the device may have idled

The claim is the number the record will use (the faster half's mean, kernelgen.verify.samples)
times every call of the request, warm-up included: a sum of the claimed times could be padded by a
few made-up slow repetitions that the faster half never sees. The bound is one-sided: every subtracted term is an upper estimate, so an honest kernel is never flagged.
The L2 flush before each repetition takes 60-90 us on an H100/H200, longer than the host needs to
issue a repetition (10-40 us), so the device, not the host, paces the loop and the bound is tight,
to within the flush's own jitter. Where the host is slower (a wrapper of many launches), the idle
device time is subtracted (`host_call_ms`), and the bound says less. Every term assumes the worker
runs when the judge does: a busy host (a batch's compiles beside it) puts the wall clock above the
bound with no lie at all. Since every timing is a replay in KernelGen's own worker, a claim under the
bound is asked again and, when it persists, noted beside the case's timing (kernelgen.verify.judge.timed),
never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.verify.samples import summarize
from kernelgen.verify.timing import LoopCost

# A claim may fall this far below the floor before it is called forged, and this much more: the faster
# half's mean sits below the mean by about half the spread (a few % with the L2 flushed), and a host
# hiccup (7.7 ms once seen) would have to happen on two requests in a row. The interpreter's timings
# decide nothing and vary by tens of %: there only a gross lie is called one.
KEEP = {"cpu": 0.5, "gpu": 0.8}
SLACK_MS = {"cpu": 5.0, "gpu": 1.0}
HOST_MARGIN = 1.2  # the candidate's host time per call, measured over tens of calls, can vary by this much
LOOP_MARGIN = 1.5  # likewise the trusted loop's host share (tens of us, more on a loaded host)
FLUSH_MARGIN = 0.9  # the device part of a repetition at its least


@dataclass(frozen=True)
class Request:
    """One timing request as the judge saw it."""

    reps: int
    warmup: int
    wall_ms: float  # send to answer, plus device work still queued at the answer
    empty_ms: float  # the judge's clock around an empty timing request to this worker
    host_call_ms: float | None  # the candidate's host time per call, as the judge measured it (None: not known)


def overhead_ms(req: Request, cost: LoopCost, *, cpu: bool) -> float:
    """An upper estimate of the part of `req.wall_ms` that was not the calls' device time."""
    out = req.empty_ms + cost.fixed_ms + req.reps * cost.per_rep_ms / FLUSH_MARGIN
    if cpu:  # no device: each call's time is the timing, host work included
        return out
    if req.host_call_ms is None:
        return float("inf")
    host = HOST_MARGIN * req.host_call_ms
    # The device idles within a repetition only when the host takes longer to issue it than the
    # device takes to run its flush, events and call; warm-up calls (no flush) run back to back.
    idle = max(0.0, LOOP_MARGIN * cost.host_rep_ms + host - FLUSH_MARGIN * cost.per_rep_ms)
    return out + req.reps * idle + req.warmup * host


def claimed_ms(times: list[float], warmup: int) -> float:
    """The device time a request's answer claims, as the record would use it: every call, warm-up
    included, at the faster half's mean."""
    return (len(times) + warmup) * summarize(times).ms if times else 0.0


def check(times: list[float], req: Request, cost: LoopCost, *, cpu: bool) -> str | None:
    """Why `times` cannot be true for `req` (a message), or None when they fit the judge's clock."""
    floor = req.wall_ms - overhead_ms(req, cost, cpu=cpu)
    claim = claimed_ms(times, req.warmup)
    where = "cpu" if cpu else "gpu"
    if claim >= KEEP[where] * floor - SLACK_MS[where]:
        return None
    return (f"the worker's timings put {req.reps} timed and {req.warmup} warm-up calls at {claim:.3f} ms of device time, "
            f"but the judge's own clock saw {req.wall_ms:.3f} ms, of which at most {req.wall_ms - floor:.3f} ms was "
            f"anything else: at least {floor:.3f} ms of calls")


def describe(claim_ms: float, floor_ms: float) -> str:
    """The cross-check of a case's requests in one line, for the results."""
    if floor_ms <= 0:
        return f"claimed {claim_ms:.3f} ms of device time; the judge's clock bounds nothing here (host-bound or small)"
    return f"claimed {claim_ms:.3f} ms of device time; the judge's clock allows no less than {floor_ms:.3f} ms"
