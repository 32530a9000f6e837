"""The baselines of one perf case — PyTorch eager, torch.compile of the reference, the peer libraries —
as the judge's measurement gets them: from the per-user cache (kernelgen.verify.judge.baselines), or
timed in the judge's process (eager, torch.compile) and in the peers' own child process
(kernelgen.verify.judge.peerproc), then cached.

An entry missing from the cache but claimed by a live process is being timed there now: a judge-side
process that times an operator's baselines while its kernel is still generated and checked
(kernelgen.verify.judge.ahead). The judge waits for that entry rather than compile and time the same
baseline beside it (on an H100 the torch.compile and peer baselines of a KernelBench problem took
51 of `bench`'s 76 s, 2026-11-27); it times it itself only where the claim ends without an entry.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kernelgen.verify.judge.baselines import BaselineCache, BaselineEntry, Kind, spec_recipe
from kernelgen.verify.judge.devicelock import device_lock
from kernelgen.verify.judge.judge import Judge
from kernelgen.verify.judge.peerproc import PeerJob, PeerRun
from kernelgen.precision import PrecisionPolicy
from kernelgen.verify.judge.precision import applied
from kernelgen.verify.results import KernelTiming, PerfCase, PerformanceResult
from kernelgen.verify.timing import host_overhead_us, rep_times, summarize

Cell = tuple[int, dict[str, list[int]], str]  # (perf case index, its shapes, dtype)


def baseline_cache(judge: Judge, *, fresh: bool) -> BaselineCache | None:
    """The judge's baseline cache; None for a baseline whose bytes the judge was not told (nothing
    to key it by). Under the interpreter it keeps dry runs, labelled as such like every number there."""
    if not judge.baseline_sha256:
        return None
    return BaselineCache(judge.baseline_sha256, spec_recipe(judge.spec), judge.device.kind, fresh=fresh)


def await_claimed(cache: BaselineCache | None, kinds: list[Kind], cells: list[Cell],
                  log: Callable[[str], None] = lambda s: None) -> float:
    """Wait until no entry of `kinds` x `cells` is claimed by another live process; the seconds waited.
    Before the judge draws a perf case whose inputs are large (kernelgen.verify.judge.devicememory):
    the process timing the baselines ahead then holds no copy of them beside the judge's."""
    if cache is None:
        return 0.0
    t0 = time.monotonic()
    claimed = [(k, case, dtype) for k in kinds for _, case, dtype in cells if cache.claimed(k, case, dtype)]
    if claimed:
        log(f"waiting for the baselines being timed ahead ({len(claimed)} entries) before drawing the perf inputs")
    for kind, case, dtype in claimed:
        cache.wait(kind, case, dtype)
    return time.monotonic() - t0


class References:
    """Eager and torch.compile of the reference on one case: from the cache (waiting for an entry timed
    ahead elsewhere), or timed here (and cached)."""

    def __init__(self, judge: Judge, *, fresh: bool, with_eager: bool, with_compile: bool, policy: PrecisionPolicy):
        self.judge, self.with_eager, self.with_compile, self.policy = judge, with_eager, with_compile, policy
        self.cache = baseline_cache(judge, fresh=fresh)
        self._compiled: Any = None
        self.waited_s = 0.0  # on entries timed ahead by another process
        # where a case's seconds went (compile, device lock, timing): a KernelBench problem's baselines
        # took 66 s beside its kernel on an H100 (2026-12-07), and which of the three is issue 39's question
        self.seconds: dict[str, float] = {}

    def _spent(self, what: str, since: float) -> float:
        now = time.monotonic()
        self.seconds[what] = self.seconds.get(what, 0.0) + now - since
        return now

    def compiled(self) -> Any:
        import torch

        if self._compiled is None:  # built only when a case needs it timed: nothing compiles on a cache hit
            self._compiled = torch.compile(self.judge.baseline)
        return self._compiled

    def _cached(self, kind: Kind, pc: PerfCase) -> BaselineEntry | None:
        if self.cache is None:
            return None
        t0 = time.monotonic()
        entry = self.cache.wait(kind, pc.shapes, pc.dtype)  # at once unless another process claims it
        self.waited_s += time.monotonic() - t0
        return entry

    def _store(self, kind: Kind, pc: PerfCase, timing: KernelTiming, host_us: float | None = None) -> BaselineEntry:
        if self.cache is not None:
            return self.cache.put(kind, pc.shapes, pc.dtype, timing=timing, host_us=host_us)
        return BaselineEntry(kind=kind, measured_at="", device_name="", timing=timing, host_us=host_us)

    def time(self, res: PerformanceResult, pc: PerfCase, inputs: list[Any]) -> None:
        judge = self.judge
        device, params = judge.device, judge.spec.param_defaults
        eager = self._cached("eager", pc) if self.with_eager else None
        compiled = self._cached("compile", pc) if self.with_compile else None
        from_cache = [e.measured_at for e in (eager, compiled) if e is not None]
        time_compile = self.with_compile and compiled is None
        t = time.monotonic()
        if time_compile:
            try:
                with applied(self.policy):  # Inductor's matmul templates read the mode when they compile
                    self.compiled()(*inputs, **params)  # compile outside the timed region (seconds of CPU work)
            except Exception as e:  # noqa: BLE001 - a compile failure is reported, not fatal
                # its first line too: the type alone (InternalTorchDynamoError, which wraps the cause) told
                # nothing when every baselines-ahead process on an H100 failed this way (2026-11-28)
                why = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")[:300]
                res.note = (res.note + f" torch.compile failed on case {pc.case} {pc.dtype}: {type(e).__name__}"
                            + (f": {why}" if why else "") + ".").strip()
                time_compile = False
            t = self._spent("compile", t)
        with device_lock(exclusive=True, path=device.lock), applied(self.policy):
            t = self._spent("device lock", t)
            if self.with_eager and eager is None:
                call = lambda: judge.baseline(*inputs, **params)  # noqa: E731
                eager = self._store("eager", pc, summarize(rep_times(call, device.kind)),
                                    None if device.interpreter else host_overhead_us(call, device.kind))
                t = self._spent("timing eager", t)
            if time_compile:
                compiled = self._store("compile", pc, summarize(rep_times(lambda: self.compiled()(*inputs, **params), device.kind)))
                self._spent("timing torch.compile", t)
        if eager is not None:
            pc.eager, pc.eager_host_us = eager.timing, eager.host_us
        if compiled is not None:
            pc.compiled = compiled.timing
        pc.baselines_measured_at = min(from_cache, default="")


class Peers:
    """The peers' timings per case: from the cache; waited for where another process claims them (it
    is timing them ahead); else from a child process started at once, before the kernel's own timings
    (its start and FlagGems' compiles overlap them), one for every case missing."""

    def __init__(self, judge: Judge, cache: BaselineCache | None, cases: list[Cell], log: Callable[[str], None]):
        self.judge, self.cache, self.log = judge, cache, log
        self.cached = {(ci, dtype): e for ci, case, dtype in cases
                       if (e := cache.get("peers", case, dtype) if cache else None) is not None}
        self.ahead = [c for c in cases if (c[0], c[2]) not in self.cached and cache is not None
                      and cache.claimed("peers", c[1], c[2])]
        todo = [c for c in cases if (c[0], c[2]) not in self.cached and c not in self.ahead]
        self.jobs = [job for job in [self._start(todo)] if job is not None]
        self.waited_s = 0.0

    def _start(self, todo: list[Cell]) -> PeerJob | None:
        if not todo:
            return None
        self.log("timing the peer libraries (FlagGems, Liger-Kernel) in a process of their own, started now")
        return PeerJob(self.judge.spec, self.judge.device.torch_device, todo, self.judge.device.lock)

    def _collect_ahead(self) -> None:
        """The entries timed ahead, once there; a child of our own for those whose claim ended without one."""
        t0 = time.monotonic()
        missing = []
        for ci, case, dtype in self.ahead:
            entry = self.cache.wait("peers", case, dtype) if self.cache is not None else None
            if entry is None:
                missing.append((ci, case, dtype))
            else:
                self.cached[(ci, dtype)] = entry
        self.ahead = []
        self.waited_s += time.monotonic() - t0
        self.jobs += [job for job in [self._start(missing)] if job is not None]

    def fill(self, res: PerformanceResult) -> None:
        self._collect_ahead()
        run = PeerRun()
        for job in self.jobs:
            got = job.result()
            run.timings.update(got.timings)
            run.notes += [n for n in got.notes if n not in run.notes]
        notes: list[str] = list(run.notes)
        for pc in res.cases:
            entry = self.cached.get((pc.case, pc.dtype))
            if entry is not None:
                pc.peers = dict(entry.peers)
                pc.baselines_measured_at = min(filter(None, [pc.baselines_measured_at, entry.measured_at]))
                notes += entry.notes
            elif self.jobs:
                pc.peers = run.timings.get((pc.case, pc.dtype), {})
                if self.cache is not None and (pc.case, pc.dtype) in run.timings:
                    self.cache.put("peers", pc.shapes, pc.dtype, peers=pc.peers, notes=run.notes)
        for note in dict.fromkeys(notes):
            res.note = (res.note + f" {note}.").strip()

    def cancel(self) -> None:
        for job in self.jobs:
            job.cancel()


def say_cached(res: PerformanceResult) -> None:
    """One line in the result's note: which baselines came from the cache, and when they were timed."""
    cached = sorted({pc.baselines_measured_at for pc in res.cases if pc.baselines_measured_at})
    if not cached:
        return
    when = cached[0] if len(cached) == 1 else f"{cached[0]} to {cached[-1]}"
    n = sum(1 for pc in res.cases if pc.baselines_measured_at)
    res.note = (res.note + f" Baselines (eager, torch.compile, peers) of {n} of {len(res.cases)} case(s) from the "
                f"cache, timed {when} on this device with these versions; `kernelgen bench --fresh` times them again.").strip()
