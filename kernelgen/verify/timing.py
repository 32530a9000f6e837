"""How KernelGen times a call: one loop per device, used alike by the judge (PyTorch eager,
torch.compile, the peer libraries, the device ceilings) and by the sandboxed worker (candidates).

On a GPU: device events around every repetition, the L2 cache flushed before each (a 256 MB write,
as `triton.testing.do_bench` does); every repetition is returned, so the caller can pair and trim
them. Under the CPU interpreter: the wall clock around each call, a dry run that is labelled as such
everywhere and never decides anything.

**The clock is bound before any candidate runs.** The worker times a candidate inside the
candidate's own process, so nothing the loop uses is looked up when it runs: `bind_clock` takes, once,
the builtin `time.perf_counter` itself and the C-level methods of PyTorch's event and tensor base
classes (`_CudaEventBase.record` / `.elapsed_time`, `TensorBase.zero_`) and the stream to record on.
`torch.cuda.Event.elapsed_time` is a Python method a candidate can replace with one
`functools.update_wrapper`; the C method under it cannot be rebound (its class is immutable), and the
one captured here is called whatever the attribute says later. `Seal` notes the code of the loop
itself, so a candidate that rewrites it (`run_reps.__code__ = ...`) is refused a timing. This is
in-process evidence: the judge bounds every claim with its own clock (kernelgen.verify.judge.wallclock).
"""

from __future__ import annotations

import time
import types
from dataclasses import dataclass, fields
from typing import Any, Callable

from kernelgen.verify.adaptive import Plan
from kernelgen.verify.samples import median, summarize  # noqa: F401 - summarize: what every caller imports from here

FLUSH_BYTES = 256 << 20  # larger than any L2 we time on (H100 50 MB, H200 60 MB)

_now = time.perf_counter  # bound at import: the worker imports this module before any candidate


@dataclass(frozen=True)
class Clock:
    """Everything a timing loop calls, captured once (see the module's docstring)."""

    kind: str  # cpu | cuda | npu
    now: Callable[[], float]
    sync: Callable[[], Any] | None = None
    event: Callable[[], Any] | None = None  # a new timing event
    record: Callable[[Any, Any], Any] | None = None  # record(event, stream)
    elapsed: Callable[[Any, Any], float] | None = None  # elapsed(start, end) in ms
    stream: Any = None
    zero: Callable[[Any], Any] | None = None  # zero(tensor): the L2 flush
    flush: Any = None  # the FLUSH_BYTES buffer it writes


def _c_level(cls: type, name: str) -> tuple[type, Any]:
    """The first class in `cls`'s MRO whose `name` is not a Python function (a C method that cannot
    be rebound through that class), and that method; the attribute as it is now if none is."""
    for klass in cls.__mro__:
        member = klass.__dict__.get(name)
        if member is not None and not isinstance(member, types.FunctionType):
            return klass, member
    return cls, getattr(cls, name)


def bind_clock(kind: str) -> Clock:
    """The clock of `kind`, bound now (in the worker: before any candidate is imported)."""
    if kind == "cpu":
        return Clock(kind="cpu", now=_now)
    import functools

    import torch

    mod = torch.npu if kind == "npu" else torch.cuda  # type: ignore[attr-defined]
    event_cls, elapsed = _c_level(mod.Event, "elapsed_time")
    _, record = _c_level(mod.Event, "record")
    _, zero = _c_level(torch.Tensor, "zero_")
    sync = getattr(torch._C, "_cuda_synchronize", None) if kind == "cuda" else None
    return Clock(kind=kind, now=_now, sync=sync or mod.synchronize, event=functools.partial(event_cls, enable_timing=True),
                 record=record, elapsed=elapsed, stream=mod.current_stream(), zero=zero,
                 flush=torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=kind))


def run_reps(fn: Callable[[], Any], clock: Clock, *, reps: int, warmup: int) -> list[float]:
    """Milliseconds of each of `reps` timed calls of `fn`, after `warmup` untimed ones. The caller
    (the judge) decides both counts; the loop uses nothing but `clock` and its arguments."""
    if clock.event is None:
        now = clock.now
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(reps):
            t0 = now()
            fn()
            out.append((now() - t0) * 1e3)
        return out
    event, record, stream, zero, flush = clock.event, clock.record, clock.stream, clock.zero, clock.flush
    starts = [event() for _ in range(reps)]
    ends = [event() for _ in range(reps)]
    for _ in range(warmup):
        fn()
    for start, end in zip(starts, ends):
        zero(flush)
        record(start, stream)
        fn()
        record(end, stream)
    clock.sync()
    return [clock.elapsed(s, e) for s, e in zip(starts, ends)]


def host_calls(fn: Callable[[], Any], clock: Clock, *, calls: int) -> float:
    """Microseconds of host time per call, without waiting for the device (the caller syncs after):
    50 calls stay far below the launch queue's depth (~1000), so the loop measures Python and launch
    cost only. In the worker this is the worker's own claim; the judge times the request itself."""
    t0 = clock.now()
    for _ in range(calls):
        fn()
    return (clock.now() - t0) / calls * 1e6


class Seal:
    """The state of trusted functions and the clock when the worker started: code, defaults and
    closure cells of each function, the identity of every field of the clock, the flush buffer's
    address and size. `broken()` names what changed since."""

    def __init__(self, functions: list[Callable[..., Any]], clock: Clock):
        self._functions = [(f, self._state(f)) for f in functions]
        self._clock = clock
        self._fields = [(f.name, getattr(clock, f.name)) for f in fields(clock)]
        self._flush = self._buffer(clock)

    @staticmethod
    def _state(f: Any) -> tuple:
        # identities only: comparing values could run a candidate's __eq__
        return (f.__code__, f.__defaults__, f.__kwdefaults__, *(c.cell_contents for c in f.__closure__ or ()))

    def broken(self) -> list[str]:
        changed = [f"{f.__qualname__} changed" for f, state in self._functions
                   if len(self._state(f)) != len(state) or any(a is not b for a, b in zip(self._state(f), state))]
        changed += [f"the clock's {name} replaced" for name, value in self._fields if getattr(self._clock, name) is not value]
        if self._buffer(self._clock) != self._flush:  # a flush resized to nothing would leave the L2 warm
            changed.append("the L2 flush buffer resized or moved")
        return changed

    @staticmethod
    def _buffer(clock: Clock) -> tuple[int, int] | None:
        return None if clock.flush is None else (clock.flush.data_ptr(), clock.flush.numel())


class Stopwatch:
    """The worker's timer: its clock and loop bound when the worker starts, before any candidate."""

    def __init__(self, kind: str):
        self.clock = bind_clock(kind)
        self._reps, self._host = run_reps, host_calls
        # Python functions among the clock's parts (an NPU's event methods may have no C layer) are sealed too.
        python = [getattr(self.clock, f.name) for f in fields(self.clock) if isinstance(getattr(self.clock, f.name), types.FunctionType)]
        self._seal = Seal([run_reps, host_calls, *python], self.clock)

    @property
    def seal(self) -> Seal:
        return self._seal

    def broken(self) -> list[str]:
        """What changed in the loop's code or the clock (rebinding a module's name changes nothing:
        the functions used are the ones captured here)."""
        return self._seal.broken()

    def reps(self, fn: Callable[[], Any], *, reps: int, warmup: int) -> list[float]:
        return self._reps(fn, self.clock, reps=reps, warmup=warmup)

    def host_us(self, fn: Callable[[], Any], *, calls: int) -> float:
        return self._host(fn, self.clock, calls=calls)


# --- the judge's own timings (eager, torch.compile, peers, ceilings) -------------------------------
_CLOCKS: dict[tuple[str, int], Clock] = {}
_COSTS: dict[int, "LoopCost"] = {}


@dataclass(frozen=True)
class LoopCost:
    """What `run_reps` costs around calls that do nothing, measured in the judge's process on the
    same device: the wall clock the judge sees for a request is this plus the calls' own time."""

    fixed_ms: float  # per request: creating the events before, reading them after, the final sync
    per_rep_ms: float  # per repetition, as the wall clock sees it: the flush and two events on the device
    host_rep_ms: float  # per repetition, the host's share: launching the flush and recording two events


def _nothing() -> None:
    return None


def loop_cost(clock: Clock) -> LoopCost:
    """`clock`'s LoopCost, measured once per process: medians of three runs at 4 and 36 repetitions
    (the wall clock is linear in the count), and the host's enqueue time alone at 36."""
    if id(clock) in _COSTS:
        return _COSTS[id(clock)]

    def wall(n: int) -> float:
        t0 = clock.now()
        run_reps(_nothing, clock, reps=n, warmup=0)
        return (clock.now() - t0) * 1e3

    run_reps(_nothing, clock, reps=4, warmup=1)  # first use: allocations, the events' pool
    small, large = median([wall(4) for _ in range(3)]), median([wall(36) for _ in range(3)])
    per_rep = max(0.0, (large - small) / 32)
    host = per_rep
    if clock.event is not None:
        starts, ends = [clock.event() for _ in range(36)], [clock.event() for _ in range(36)]
        t0 = clock.now()
        for s, e in zip(starts, ends):
            clock.zero(clock.flush)  # type: ignore[misc]
            clock.record(s, clock.stream)  # type: ignore[misc]
            clock.record(e, clock.stream)  # type: ignore[misc]
        host = (clock.now() - t0) * 1e3 / 36
        clock.sync()  # type: ignore[misc]
    _COSTS[id(clock)] = LoopCost(fixed_ms=max(0.0, small - 4 * per_rep), per_rep_ms=per_rep, host_rep_ms=host)
    return _COSTS[id(clock)]


def judge_clock(kind: str) -> Clock:
    """This process's clock for `kind` on the current device (the judge's: trusted)."""
    index = 0
    if kind == "cuda":
        import torch

        index = torch.cuda.current_device()
    key = (kind, index)
    if key not in _CLOCKS:
        _CLOCKS[key] = bind_clock(kind)
    return _CLOCKS[key]


def synchronize(kind: str) -> None:
    if kind in ("cuda", "npu"):
        import torch

        (torch.npu if kind == "npu" else torch.cuda).synchronize()  # type: ignore[attr-defined]


def rep_times(fn: Callable[[], Any], kind: str, *, warmup_ms: float = 25, rep_ms: float = 100) -> list[float]:
    """Milliseconds of each timed repetition of `fn`, timed in this process until the median is as
    sharp as the keep rule can use (kernelgen.verify.adaptive), within `rep_ms` of timed calls."""
    clock = judge_clock(kind)
    plan = Plan.alone(rep_ms, interpreter=kind == "cpu")
    if plan.interpreter:
        return run_reps(fn, clock, reps=plan.cpu_reps, warmup=1)
    est = median(run_reps(fn, clock, reps=2, warmup=1))
    reps = plan.reps(est, loop_cost(clock).per_rep_ms)
    times = run_reps(fn, clock, reps=reps, warmup=plan.warmup(est, warmup_ms))
    rounds = 1
    while not plan.done([times], rounds):
        times += run_reps(fn, clock, reps=reps, warmup=0)
        rounds += 1
    return times


def host_overhead_us(fn: Callable[[], Any], kind: str, calls: int = 50) -> float:
    """Host microseconds per call in this process (the judge's own baselines), the device drained
    before and after."""
    clock = judge_clock(kind)
    fn()
    synchronize(kind)
    us = host_calls(fn, clock, calls=calls)
    synchronize(kind)
    return us
