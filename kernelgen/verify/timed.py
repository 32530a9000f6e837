"""Several kernels timed on one case, in their workers, the way every timing of KernelGen is taken.

For each kernel: a spot check (a guarded call at this shape, compared with the baseline in the judge,
its launch configurations recorded), then rounds of timing interleaved across the kernels (who goes
first rotates per round, so none always runs after a cold cache or a clock change), every timed
call counted for launches, the worker's queue checked empty after each timing, and the last timed
output compared again. The paired ratio of two kernels is taken per round and the median kept: both
saw the same round's conditions.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from kernelgen.verify.compare import compare
from kernelgen.verify.devicelock import device_lock
from kernelgen.verify.judge import Judge, KernelSource
from kernelgen.verify.poison import draw_fills
from kernelgen.verify.protocol import OtherValue
from kernelgen.verify.session import WorkerSession
from kernelgen.verify.timing import summarize

DEFERRED_MS = 5.0  # a worker with nothing queued answers a sync in well under a millisecond


@dataclass
class KernelOnCase:
    """One kernel's result on one case."""

    wrong: str = ""  # "" when its outputs matched the baseline here (spot check and last timed call)
    configs: list[str] = field(default_factory=list)  # its launches' kernel, grid and constants
    reps: list[float] = field(default_factory=list)  # every timed repetition, ms
    round_ms: list[float] = field(default_factory=list)  # each round's summary, ms
    violations: list[tuple[str, str]] = field(default_factory=list)
    host_us: float | None = None

    @property
    def timed(self) -> bool:
        return bool(self.reps)


def paired(best: KernelOnCase, cand: KernelOnCase) -> tuple[float | None, float | None]:
    """(speedup of `cand` over `best`: the median over rounds of best / cand, and the spread of those
    per-round ratios relative to it)."""
    ratios = [b / c for b, c in zip(best.round_ms, cand.round_ms) if c]
    if not ratios:
        return None, None
    med = statistics.median(ratios)
    return med, (max(ratios) - min(ratios)) / med if med else None


def _wrong(judge: Judge, worker: WorkerSession, values: list[Any] | None, expected: tuple, dtype: str, fill: Any) -> str:
    if values is None or len(values) != len(expected):
        return f"returned {0 if values is None else len(values)} value(s), the baseline {len(expected)}"
    for value, exp in zip(values, expected):
        if isinstance(value, OtherValue):
            return f"returned a {value.type_name}, not a tensor"
        got = judge.read(worker, value, max_bytes=2 * exp.numel() * exp.element_size() + 4096)
        c = compare(got, exp, judge.spec.tolerance_for(dtype), fill)
        if not c.passed:
            return c.message
    return ""


def time_case(judge: Judge, kernels: list[KernelSource], inputs: list[Any], expected: tuple, dtype: str, *,
              rounds: int, rep_ms: float, host: bool = False, key: str | None = None,
              check_last: bool = True) -> list[KernelOnCase]:
    """Spot-check and time every kernel on these inputs; results in the order of `kernels`.
    `key`: the inputs are a perf case the judge keeps resident (Judge.keep), so a worker that already
    holds them is not sent them again. `check_last=False` (a search, whose winner is checked and
    timed again in full) skips reading back the last timed call's outputs."""
    placed = [judge.load(k) for k in kernels]
    results = [KernelOnCase() for _ in kernels]
    resident = key is not None
    key = key or "timed-case"
    out_limit = judge.arena_bytes // 2
    params = judge.spec.param_defaults
    # Everything but the timing holds the device lock shared: other KernelGen processes on this GPU
    # (a batch's --per-gpu workers) may check beside it, but none of them times while it runs.
    with device_lock(exclusive=False, path=judge.device.lock):
        for worker in {id(w): w for w, _ in placed}.values():
            judge.place(worker, key, inputs, resident=resident)
    try:
        fill, _ = draw_fills()
        with device_lock(exclusive=False, path=judge.device.lock):
            for (worker, slot), res in zip(placed, results):
                reply = judge.call(worker, slot, key, mode="guarded", fill=fill, out_limit=out_limit)
                if not reply.ok:
                    res.wrong = f"raised: {reply.error.strip().splitlines()[-1] if reply.error.strip() else 'an error'}"
                    continue
                if reply.report is not None:
                    res.configs = list(reply.report.configs)
                    res.violations += [(v.get("code", "worker-report"), v.get("message", "")) for v in reply.report.violations]
                res.wrong = _wrong(judge, worker, reply.outputs, expected, dtype, fill)
        live = [i for i, r in enumerate(results) if not r.wrong]
        last: dict[int, Any] = {}
        with device_lock(exclusive=True, path=judge.device.lock):  # nothing else of ours on that device while timing
            for r in range(rounds):
                for i in [live[(r + j) % len(live)] for j in range(len(live))] if live else []:
                    worker, slot = placed[i]
                    for attempt in range(2):
                        reply = worker.request({"op": "time", "slot": slot, "key": key, "params": params, "rep_ms": rep_ms,
                                                "warmup_ms": 10, "out_offset": 0, "out_limit": out_limit})
                        if not reply.ok:
                            break
                        waited = _sync_ms(worker)
                        # A slow answer once can be the host (a page fault, the scheduler: 7.7 ms was seen on an
                        # honest kernel on an H100); work really deferred past the timing is slow every time.
                        if waited <= DEFERRED_MS or judge.device.interpreter:
                            break
                        if attempt == 1:
                            results[i].violations.append(("deferred-work", f"the worker still had {waited:.1f} ms of work "
                                                          "queued after saying it was done, twice in a row"))
                    if not reply.ok:
                        results[i].wrong = f"raised while timed: {reply.error.strip().splitlines()[-1] if reply.error.strip() else ''}"
                        continue
                    if reply.launches < reply.calls:
                        results[i].violations.append(("timed-call-no-launch", f"{reply.calls} timed calls launched only "
                                                      f"{reply.launches} Triton kernels: a call that launches nothing returned "
                                                      "a cached or host-computed result"))
                    results[i].reps += reply.times_ms
                    results[i].round_ms.append(summarize(reply.times_ms).ms)
                    last[i] = reply.outputs
        with device_lock(exclusive=False, path=judge.device.lock):
            for i, outputs in last.items() if check_last else ():
                wrong = _wrong(judge, placed[i][0], outputs, expected, dtype, None)
                if wrong:
                    results[i].violations.append(("timed-output-wrong", f"the output of the last timed call is wrong: {wrong}"))
        if host and live and not judge.device.interpreter:
            worker, slot = placed[live[0]]
            with device_lock(exclusive=True, path=judge.device.lock):
                results[live[0]].host_us = worker.request({"op": "host", "slot": slot, "key": key, "params": params}).host_us
    finally:
        for worker in {id(w): w for w, _ in placed}.values() if not resident else ():
            if not worker.closed:
                judge.drop(worker, key)
    return results


def _sync_ms(worker: WorkerSession) -> float:
    """How long the worker took to answer a sync, ms: its queued device work, plus the round trip."""
    t0 = time.perf_counter()
    worker.request({"op": "sync"})
    return (time.perf_counter() - t0) * 1e3
