"""Several kernels timed on one case, the way every timing of KernelGen is taken: by replaying their
plans, never by calling their Python.

For each kernel: its plan at this shape, recorded in its own worker, where the wrapper's host time per
call is taken too, on the judge's clock (kernelgen.verify.judge.plans.plan_at: reported beside the
device time, never mixed into it); a spot check (a replay at this shape, poisoned, compared with the
baseline in the judge); a short probe for how long a replay takes; then rounds of timing interleaved
across the kernels (who goes first rotates per round, so none always runs after a cold cache or a
clock change) until every median is as sharp as the keep rule can use (kernelgen.verify.adaptive).
Every kernel is replayed by one loop in the judge's replay worker, which never imports a candidate;
each timing request is compared with the judge's own clock (kernelgen.verify.judge.wallclock) and the
queue checked empty after it: checks of the measurement, not of the candidate, whose code never runs in
the replay worker. A disagreement (a busy host) is asked again; one that persists is said beside the
case's timing, never a verdict (as one, it refused two honest kernels of eleven on a busy H100 host).
The paired ratio of two kernels is taken per round, the median kept: both saw the same conditions.

**Timed calls are checked.** Before every timing request the inputs change in place (`_Rotation`: each
rolled by a random shift, same tensors, addresses and version counters), so a result cached on anything
but the inputs' content is wrong in the next request. Every request keeps the outputs of calls the
judge drew (all of them under the interpreter; one on a GPU, whose outputs are large), and after the
request the judge decides whether to read them (`_Sampler`): always on the interpreter; on a GPU with
probability READ_SHARE, and at least once per kernel per case. A kept output that differs from the
baseline on the rolled inputs is `timed-output-wrong`. Which calls are kept, and whether they are read,
the candidate cannot see: every timing request has the same structure, checked or not.

The spot check and the timed outputs are decided by the oracle's rule like every other check
(kernelgen.verify.judge.oracle): against the case's float64 truth, eager running under the user's
precision policy -- at a perf shape whole where it fits, else in batch slices, a timed output's then on
a judge-chosen sample of an eighth of the batch rows (kernelgen.verify.judge.bigtruth).
"""

from __future__ import annotations

import math
import secrets
import statistics
from dataclasses import dataclass, field
from typing import Any

from kernelgen.verify.judge import wallclock
from kernelgen.verify.adaptive import Plan
from kernelgen.spec import draw_inputs
from kernelgen.verify.judge.bigtruth import CaseTruth, case_truth
from kernelgen.verify.judge.compare import as_tuple, compare_outputs
from kernelgen.verify.judge.devicelock import device_lock
from kernelgen.verify.judge.devicememory import release_cache
from kernelgen.verify.judge.inputs import DrawnInputs
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.judge.plans import HOST_BUDGET_MS, HOST_CALLS, plan_at
from kernelgen.verify.judge.precision import applied
from kernelgen.verify.poison import draw_fills
from kernelgen.verify.protocol import OtherValue, Reply
from kernelgen.verify.judge.session import WorkerSession
from kernelgen.verify.timing import LoopCost, judge_clock, loop_cost, median, summarize

DEFERRED_MS = 5.0  # a worker with nothing queued answers a sync in well under a millisecond
TRIES = 3  # timing requests before a disagreement with the judge's clock is reported: a host hiccup passes
# On a GPU, a third of the timing requests have their kept output read back and compared (at least one
# per kernel and case): reading and comparing a perf case's output costs about what the old check of
# the last call did, once per request read (an 8 GiB output: ~2 s), while a kernel wrong in a share f of
# its timed calls is caught with probability 1 - (1 - f / 3) ** requests.
READ_SHARE = 1 / 3
ROTATION_SEEDS = 1 << 31  # the seeds inputs are drawn anew with between timing requests (perf cases: PERF_SEED + i)


@dataclass
class KernelOnCase:
    """One kernel's result on one case."""

    wrong: str = ""  # "" when its outputs matched the baseline here (spot check and the timed calls read back)
    configs: list[str] = field(default_factory=list)  # its launches' kernel, grid and constants
    reps: list[float] = field(default_factory=list)  # every timed repetition, ms
    round_ms: list[float] = field(default_factory=list)  # each round's summary, ms
    violations: list[tuple[str, str]] = field(default_factory=list)
    host_us: float | None = None  # host time per call on the judge's clock (the worker's own figure is not used)
    calls: int = 0  # timed calls, and the Triton launches the worker says they made: its claim,
    launches: int = 0  # which can only count against it (timed-call-no-launch)
    claimed_ms: float = 0.0  # device time its timing requests claimed, warm-up included...
    floor_ms: float = 0.0  # ...and the least the judge's clock allowed them (kernelgen.verify.judge.wallclock)
    graph_reps: list[float] = field(default_factory=list)  # the plan captured in a CUDA graph, timed (bench --graph)
    disturbed: list[str] = field(default_factory=list)  # timing requests the judge's clock or queue disagreed with, retried

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


def _wrong(judge: Judge, worker: WorkerSession, values: list[Any] | None, expected: tuple, dtype: str, fill: Any,
           truth: CaseTruth) -> str:
    """What is wrong with one call's outputs by the oracle's rule against `truth`, or ""."""
    if values is None or len(values) != len(expected):
        return f"returned {0 if values is None else len(values)} value(s), the baseline {len(expected)}"
    got = []
    for value, exp in zip(values, expected):
        if isinstance(value, OtherValue):
            return f"returned a {value.type_name}, not a tensor"
        got.append(judge.read(worker, value, max_bytes=2 * exp.numel() * exp.element_size() + 4096))
    return next((c.message for c in compare_outputs(got, expected, judge.spec.tolerance_for(dtype), fill, truth=truth)
                 if not c.passed), "")


def _truth(judge: Judge, inputs: list[Any], expected: tuple, dtype: str, *, sample: bool = False) -> CaseTruth:
    """The truth of the case the kernels ran on (`sample`: a judge-chosen share of the batch rows, where
    it is computed in slices)."""
    return case_truth(judge.baseline, inputs, judge.spec.param_defaults, expected, sample=sample,
                      tol=judge.spec.tolerance_for(dtype))


class _Requests:
    """One kernel's requests on one case, each timing checked against the judge's clock."""

    def __init__(self, judge: Judge, worker: WorkerSession, slot: str, key: str, res: KernelOnCase, cost: LoopCost,
                 checks: "_Checks | None" = None):
        self.worker, self.slot, self.key, self.res, self.cost = worker, slot, key, res, cost
        self.checks = checks  # None: nothing rotated or kept
        self.cpu = judge.device.interpreter
        self.params = judge.spec.param_defaults
        self.now = judge_clock("cpu").now
        self.rtt = math.inf
        self.empty_ms = math.inf
        self.host_call_ms: float | None = None
        self.est = 0.0

    def sync(self) -> float:
        """How long the worker took to answer a sync, ms: its queued device work, plus the round trip
        (the fastest one seen is the round trip every bound uses)."""
        t0 = self.now()
        self.worker.request({"op": "sync"})
        ms = (self.now() - t0) * 1e3
        self.rtt = min(self.rtt, ms)
        return ms

    def empty(self) -> None:
        """The judge's clock around an empty timing request (no call: no candidate code runs in it),
        after a sync has drained anything queued; the larger of two, an upper estimate."""
        self.sync()
        walls = []
        for _ in range(2):
            t0 = self.now()
            self.worker.request({"op": "time", "plan": self.slot, "key": self.key, "reps": 0, "warmup": 0})
            walls.append((self.now() - t0) * 1e3)
        self.empty_ms = max(walls)

    def host(self, calls: int) -> None:
        """The replay's host time per call, for the wall-clock bound: the judge's clock around `calls`
        replays without waiting for the device (then drained, outside the measurement). An upper
        estimate (less the round trip only). The wrapper's own host time, the one reported, was taken
        where it was recorded (plans.plan_at)."""
        self.sync()
        self.sync()
        t0 = self.now()
        reply = self.worker.request({"op": "host", "plan": self.slot, "key": self.key, "calls": calls})
        wall = (self.now() - t0) * 1e3
        self.sync()
        if reply.ok:
            self.host_call_ms = max(0.0, wall - self.rtt) / calls

    def time(self, reps: int, warmup: int, *, read: bool | None = None) -> Reply:
        """One timing request, on inputs rotated just before it, keeping the outputs of the calls the
        judge drew; then those outputs read and compared, or released (`read`: drawn when None). Asked
        again (TRIES in all) while the judge's clock or queue disagree with it: see `disturbed`."""
        held = self.checks.rotation.next(self.worker) if self.checks is not None else None
        keep = self.checks.keep(reps + warmup) if self.checks is not None else []
        req = {"op": "time", "plan": self.slot, "key": self.key, "reps": reps, "warmup": warmup, "keep": keep}
        reply = self._timed(req, reps, warmup)
        if self.checks is not None and keep:
            if self.checks.kept(self, held or [], reply.ok, read) and held is not self.checks.rotation.inputs:
                del held  # the rotated inputs, their eager outputs, truth and read-back: room for the next request
                release_cache(self.checks.judge)
        return reply

    def _timed(self, req: dict[str, Any], reps: int, warmup: int) -> Reply:
        for _ in range(TRIES):
            t0 = self.now()
            reply = self.worker.request(req)
            wall = (self.now() - t0) * 1e3
            if not reply.ok:
                return reply
            waited = self.sync()
            deferred = waited > DEFERRED_MS and not self.cpu
            seen = wallclock.Request(reps=reps, warmup=warmup, wall_ms=wall + max(0.0, waited - self.rtt),
                                     empty_ms=self.empty_ms, host_call_ms=self.host_call_ms)
            forged = self._forged(reply, seen)
            if not (deferred or forged):
                break
        self.res.disturbed += [f"{why}, {TRIES} requests in a row" for why in (
            deferred and f"{waited:.1f} ms of device work still queued after the replay's answer", forged) if why]
        if reply.launches < reply.calls:
            self.res.violations.append(("timed-call-no-launch", f"{reply.calls} timed calls launched only {reply.launches} "
                                        "Triton kernels: a call that launches nothing returned a cached or host-computed result"))
        self.res.calls += reply.calls
        self.res.launches += reply.launches
        self.res.claimed_ms += wallclock.claimed_ms(reply.times_ms, warmup)
        self.res.floor_ms += max(0.0, seen.wall_ms - wallclock.overhead_ms(seen, self.cost, cpu=self.cpu))
        return reply

    def _forged(self, reply: Reply, seen: wallclock.Request) -> str | None:
        if len(reply.times_ms) != seen.reps or any(not (t >= 0 and math.isfinite(t)) for t in reply.times_ms):
            return f"the worker answered {len(reply.times_ms)} timings for {seen.reps} timed calls, or timings that are no durations"
        return wallclock.check(reply.times_ms, seen, self.cost, cpu=self.cpu)


class _Rotation:
    """The case's inputs, drawn anew before every timing request (same recipe, a seed of the judge's) into
    the buffers each worker holds: a result cached on anything but their content is wrong in the next
    request. Inputs without a recipe (not drawn by `draw_inputs`) are not rotated."""

    def __init__(self, judge: Judge, inputs: list[Any], key: str, *, enabled: bool):
        self.judge, self.inputs, self.key = judge, inputs, key
        # A search reads no timed output back (its winner is timed again in full): nothing to rotate for.
        self.recipe = getattr(inputs, "recipe", None) if enabled else None
        self.rotated: set[int] = set()  # id() of the workers whose buffers hold other inputs than the case's own

    def next(self, worker: WorkerSession) -> list[Any]:
        """Rotate `worker`'s inputs; the inputs it now holds (the judge's copy)."""
        if self.recipe is None:
            return self.inputs
        case, dtype, _ = self.recipe
        device = self.judge.device
        seed = ROTATION_SEEDS + secrets.randbelow(1 << 30)  # the judge's: never known in advance
        new = DrawnInputs(draw_inputs(self.judge.spec, case, dtype, seed, device.torch_device,
                                      on_device=not device.interpreter), case, dtype, seed)
        self.judge.redraw(worker, self.key, new)
        self.rotated.add(id(worker))
        return new  # the judge's copy lives as long as the request's check needs it

    def restore(self, worker: WorkerSession) -> None:
        """The case's own inputs back in `worker`'s buffers (a resident case is spot-checked on them next time)."""
        if id(worker) in self.rotated and not worker.closed:
            self.rotated.discard(id(worker))
            with device_lock(exclusive=False, path=self.judge.device.lock):
                self.judge.redraw(worker, self.key, self.inputs)


class _Checks:
    """What makes timed calls checked, for one case: the inputs rotated before each timing request, the
    calls whose outputs each request keeps, and which requests' kept outputs are read and compared."""

    def __init__(self, judge: Judge, inputs: list[Any], expected: tuple, key: str, dtype: str, *, read: bool):
        self.judge, self.expected, self.dtype, self.may_read = judge, expected, dtype, read
        self.rotation = _Rotation(judge, inputs, key, enabled=read)
        self.truth: CaseTruth | None = None  # the case's own inputs' truth, once the spot check made it
        self.interpreter = judge.device.interpreter
        self.read_for: set[int] = set()  # id() of the results some request was read for
        self._random = secrets.SystemRandom()

    def keep(self, calls: int) -> list[int]:
        """The calls (counted from the first warm-up call) whose outputs the worker keeps: every one under
        the interpreter (small outputs), one on a GPU (a perf case's output can take GiBs)."""
        if calls <= 0:
            return []
        return list(range(calls)) if self.interpreter else [self._random.randrange(calls)]

    def kept(self, r: "_Requests", held: list[Any], ok: bool, read: bool | None) -> bool:
        """After a timing request: read its kept outputs and compare them, or release them; whether they were read."""
        if read is None:
            read = self.may_read and (self.interpreter or self._random.random() < READ_SHARE)
        read = read and ok
        reply = r.worker.request({"op": "kept", "plan": r.slot, "read": read, "out_offset": 0,
                                  "out_limit": self.judge.arena_bytes // 2})
        if not read:
            return False
        self.read_for.add(id(r.res))
        if not reply.ok:
            r.res.wrong = f"its timed outputs could not be read: {_error_line(reply)}"
            return True
        if held is self.rotation.inputs:
            expected = self.expected
            self.truth = self.truth or _truth(self.judge, held, expected, self.dtype)
            truth = self.truth
        else:
            with applied():
                expected = as_tuple(self.judge.baseline(*held, **self.judge.spec.param_defaults))
            truth = _truth(self.judge, held, expected, self.dtype, sample=True)
        n = len(expected)
        for call in range(max(1, len(reply.outputs) // max(n, 1))):
            wrong = _wrong(self.judge, r.worker, reply.outputs[call * n:(call + 1) * n], expected, self.dtype, None, truth)
            if wrong:
                r.res.violations.append(("timed-output-wrong", f"the output of a timed call the judge chose after the "
                                         f"calls is wrong: {wrong}"))
                return True
        return True


def _error_line(reply: Reply) -> str:
    return reply.error.strip().splitlines()[-1] if reply.error.strip() else "an error"


def time_case(judge: Judge, kernels: list[KernelSource], inputs: list[Any], expected: tuple, dtype: str, *,
              rounds: int, rep_ms: float, key: str | None = None, check_last: bool = True,
              graph: bool = False) -> list[KernelOnCase]:
    """Record, spot-check and time every kernel on these inputs; results in the order of `kernels`.
    `rounds`, `rep_ms`: at most that many interleaved rounds, within rounds x rep_ms of timed device
    time per kernel (kernelgen.verify.adaptive.Plan.paired). `key`: the inputs are a perf case the
    judge keeps resident (Judge.keep), so a replay worker that already holds them is not sent them
    again. `check_last=False` (a search, whose winner is checked and timed again in full) reads back no
    timed call's outputs (every request still keeps some: they look alike). `graph` (a GPU): each plan
    is also timed captured in a CUDA graph, beside (never instead of) its replays."""
    results = [KernelOnCase() for _ in kernels]
    resident = key is not None
    key = key or "timed-case"
    out_limit = judge.arena_bytes // 2
    checks = _Checks(judge, inputs, expected, key, dtype, read=check_last)
    release_cache(judge)  # the baseline's intermediates: room for the recording worker's run at this shape
    # Everything but the timing holds the device lock shared: other KernelGen processes on this GPU
    # (a batch's --per-gpu workers) may check beside it, but none of them times while it runs.
    with device_lock(exclusive=False, path=judge.device.lock):
        plan_ids = [plan_at(judge, k, key, inputs, res) for k, res in zip(kernels, results)]
        worker = judge.replayer.worker()
        judge.place(worker, key, inputs, resident=resident)
    try:
        fill, _ = draw_fills()
        with device_lock(exclusive=False, path=judge.device.lock):
            for plan_id, res in zip(plan_ids, results):
                if plan_id is None:
                    continue
                reply = worker.request(judge.replay_request(plan_id, key, fill=fill, out_limit=out_limit))
                if not reply.ok:
                    res.wrong = f"raised: {_error_line(reply)}"
                    continue
                checks.truth = checks.truth or _truth(judge, inputs, expected, dtype)
                res.wrong = _wrong(judge, worker, reply.outputs, expected, dtype, fill, checks.truth)
        live = [i for i, r in enumerate(results) if not r.wrong]
        placed = [(worker, plan_id or "") for plan_id in plan_ids]
        if checks.rotation.recipe is not None:  # reads are of rotated inputs, each with a truth of its own:
            checks.truth = None  # the spot check's (float64, up to half the free memory) is not kept while timing
        release_cache(judge)  # ...nor its read-back outputs and comparisons (kernelgen.verify.judge.devicememory)
        with device_lock(exclusive=True, path=judge.device.lock):  # nothing else of ours on that device while timing
            _time_rounds(judge, placed, results, live, key, checks, rounds=rounds, rep_ms=rep_ms)
            if graph and judge.device.kind == "cuda":
                for i in live:
                    reply = worker.request({"op": "graph", "plan": plan_ids[i], "key": key, "warmup": 3,
                                            "reps": max(10, min(200, len(results[i].reps)))})
                    results[i].graph_reps = list(reply.times_ms) if reply.ok else []
    finally:
        if not worker.closed:
            if resident:
                checks.rotation.restore(worker)
            else:
                judge.drop(worker, key)
    return results


def _time_rounds(judge: Judge, placed: list[tuple[WorkerSession, str]], results: list[KernelOnCase], live: list[int],
                 key: str, checks: _Checks, *, rounds: int, rep_ms: float) -> None:
    """Host time and a probe per kernel, then interleaved rounds until the plan is done; then one more
    request, read, for a kernel none of whose requests the draw picked to read."""
    cpu = judge.device.interpreter
    cost = loop_cost(judge_clock(judge.device.kind))
    plan = Plan.paired(len(live), rounds=rounds, round_ms=rep_ms, interpreter=cpu)
    requests = {i: _Requests(judge, *placed[i], key, results[i], cost, checks) for i in live}
    for i, r in requests.items():
        r.empty()
        if cpu:
            continue  # host time and a probe mean nothing here
        probe = r.time(2, 1)
        if not _ok(probe, results[i]):
            continue
        r.est = median(probe.times_ms)
        r.host(max(3, min(HOST_CALLS, math.floor(HOST_BUDGET_MS / max(r.est, 1e-3)))))
    timing = [i for i in live if not _stopped(results[i])]
    done = 0
    while timing and not plan.done([results[i].reps for i in timing], done):
        for i in [timing[(done + j) % len(timing)] for j in range(len(timing))]:
            r = requests[i]
            reply = r.time(plan.reps(r.est, cost.per_rep_ms), plan.warmup(r.est))
            if _ok(reply, results[i]) and reply.times_ms:
                results[i].reps += reply.times_ms
                results[i].round_ms.append(summarize(reply.times_ms).ms)
        timing = [i for i in timing if not _stopped(results[i])]
        done += 1
    for i in [i for i in live if checks.may_read and id(results[i]) not in checks.read_for and not _stopped(results[i])]:
        r = requests[i]
        _ok(r.time(plan.reps(r.est, cost.per_rep_ms), plan.warmup(r.est), read=True), results[i])


def _ok(reply: Reply, res: KernelOnCase) -> bool:
    """Whether a timing answer is one to keep; a failed one makes the kernel wrong here, with the
    violations the worker reported with it (a timing loop it found changed)."""
    if reply.ok:
        return True
    res.wrong = f"raised while timed: {_error_line(reply)}"
    if reply.report is not None:
        res.violations += [(v.get("code", "worker-report"), v.get("message", "")) for v in reply.report.violations]
    return False


def _stopped(res: KernelOnCase) -> bool:
    """No more timing for a kernel that failed."""
    return bool(res.wrong)
