"""One kernel's plans in a run: each recorded once per input layout (the dtypes, shapes and strides of the
call's inputs, which is all a plan depends on) in the kernel's own worker, then held by the judge's replay
worker. The scaled-value cases share their spec case's plan: replaying it on values 16x larger or smaller
is itself a check that the launches do not depend on values.
"""

from __future__ import annotations

from typing import Any

from kernelgen.verify.judge.recorded import Recorded, record
from kernelgen.verify.judge.seedcalls import make_room
from kernelgen.verify.plan import Plan


def layout(inputs: list[Any]) -> tuple:
    return tuple((str(t.dtype), tuple(t.shape), tuple(t.stride())) for t in inputs)


class CandidatePlans:
    def __init__(self, judge: Any, kernel: Any, worker: Any, slot: str):
        self.judge, self.kernel, self.worker, self.slot = judge, kernel, worker, slot
        self._recorded: dict[tuple, Recorded] = {}

    def recorded(self, key: str, inputs: list[Any], expected: tuple, *, again: bool = False) -> Recorded:
        """The plan on `inputs`' layout (recorded on these inputs unless one already is; `again`: record
        anew, one call with no warm-up, whatever is held)."""
        sig = layout(inputs)
        if not again and sig in self._recorded:
            return self._recorded[sig]
        make_room(self.worker, inputs, expected)
        self.judge.put(self.worker, key, inputs)
        try:
            rec = record(self.judge, self.kernel, self.worker, self.slot, key, inputs, warmup=not again,
                         calls=1 if again else 2)
        finally:
            if not self.worker.closed:
                self.judge.drop(self.worker, key)
        self.judge.note(self.kernel, rec.notes)
        if not again:
            self._recorded[sig] = rec
        return rec

    def hold(self, plan: Plan) -> str:
        """`plan`'s id in the replay worker (sent there first if it does not hold it)."""
        return self.judge.replayer.hold(self.kernel, plan)

    def replay_worker(self) -> Any:
        return self.judge.replayer.worker()


# --- a perf case: the plan at its shape, and the wrapper's host time --------------------------------
HOST_CALLS = 50  # calls in a host-time request: far below the launch queue's depth (~1000)
HOST_BUDGET_MS = 20.0  # ...fewer for long kernels: their device work drains after the request


def _host_us(judge: Any, worker: Any, slot: str, key: str, call_ms: float) -> float | None:
    """The wrapper's host time per call, µs, on the judge's clock: `calls` calls the candidate's worker
    makes without waiting for the device, less a round trip (then drained, outside the measurement)."""
    import math

    from kernelgen.verify.timing import judge_clock

    now = judge_clock("cpu").now
    rtt = math.inf
    for _ in range(3):
        t0 = now()
        worker.request({"op": "sync"})
        rtt = min(rtt, (now() - t0) * 1e3)
    calls = max(3, min(HOST_CALLS, math.floor(HOST_BUDGET_MS / max(call_ms, 1e-3))))
    t0 = now()
    reply = worker.request({"op": "host", "slot": slot, "key": key, "params": judge.spec.param_defaults, "calls": calls})
    wall = (now() - t0) * 1e3
    worker.request({"op": "sync"})
    return max(0.0, wall - rtt) / calls * 1e3 if reply.ok else None


def plan_at(judge: Any, kernel: Any, key: str, inputs: list[Any], res: Any) -> str | None:
    """`kernel` recorded on these inputs in its own worker, its host path timed there (not on the
    interpreter, where it means nothing); the plan's id in the replay worker, or None with `res.wrong`
    (and, for a refusal, `res.violations`) saying why. `res`: a timed.KernelOnCase. A kernel's plan on a
    layout is recorded once per judge: an optimizing judge times the best again every round, and its
    bytes, and so its plan, have not changed."""
    sig = (kernel.sha256, layout(inputs))
    held = judge.perf_plans.get(sig)
    if held is None:
        held = judge.perf_plans[sig] = _record_for_timing(judge, kernel, key, inputs)
    rec, host_us = held
    res.violations += rec.evidence
    if rec.error:
        lines = [ln for ln in rec.error.strip().splitlines() if ln.strip()]
        res.wrong = f"raised: {lines[-1] if lines else 'an error'}"
        return None
    if rec.refusal is not None or rec.plan is None:
        code, message = rec.refusal or ("not-replayable", "no plan")
        res.violations.append((code, message))
        res.wrong = f"refused ({code}): {message}"
        return None
    res.host_us = host_us
    res.configs = [s.describe() for s in rec.plan.launches()] + [f"kernels {hash_text(judge.replayer.extracted(kernel).source)}"]
    return judge.replayer.hold(kernel, rec.plan)


def _record_for_timing(judge: Any, kernel: Any, key: str, inputs: list[Any]) -> tuple[Recorded, float | None]:
    worker, slot = judge.load(kernel)
    judge.place(worker, key, inputs, resident=False)
    try:
        rec = record(judge, kernel, worker, slot, key, inputs)
        judge.note(kernel, rec.notes)
        host_us = None
        if rec.plan is not None and not judge.device.interpreter:
            host_us = _host_us(judge, worker, slot, key, rec.call_ms)
        return rec, host_us
    finally:
        if not worker.closed:
            judge.drop(worker, key)


def hash_text(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]
