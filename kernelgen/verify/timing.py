"""How KernelGen times a call: one strategy per device, behind one function, used alike by the judge
(for PyTorch eager, torch.compile and the peer libraries) and by the worker (for candidate kernels).

On a GPU: device events around every repetition, the L2 cache flushed before each (a 256 MB write,
as `triton.testing.do_bench` does), warm-up first; all repetitions are returned, so the caller can
pair and trim them. Under the CPU interpreter: a wall clock on three calls, a dry run that is
labelled as such everywhere and never decides anything.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kernelgen.verify.results import KernelTiming

FLUSH_BYTES = 256 << 20  # larger than any L2 we time on (H100 50 MB, H200 60 MB)
MAX_REPS = 2000


def _device_module(kind: str) -> Any:
    import torch

    return torch.npu if kind == "npu" else torch.cuda  # type: ignore[attr-defined]


def synchronize(kind: str) -> None:
    if kind in ("cuda", "npu"):
        _device_module(kind).synchronize()


def rep_times(fn: Callable[[], Any], kind: str, *, warmup_ms: float = 25, rep_ms: float = 100) -> list[float]:
    """Milliseconds of each timed repetition of `fn` (at least 3)."""
    if kind == "cpu":
        fn()
        out = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
        return out
    import torch

    mod = _device_module(kind)
    cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=kind)
    fn()
    mod.synchronize()
    start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    mod.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = min(MAX_REPS, max(3, int(rep_ms / estimate)))
    starts = [mod.Event(enable_timing=True) for _ in range(n)]
    ends = [mod.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        cache.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    mod.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def summarize(times: list[float]) -> KernelTiming:
    """The timing of record: the mean of the faster half of the repetitions (interference only ever
    adds time, and a median of a two-mode sample can land in either mode), with the spread between
    the 20th and 80th percentile as the noise it carries."""
    xs = sorted(times)
    n = len(xs)
    lower = xs[: max(1, (n + 1) // 2)]
    ms = sum(lower) / len(lower)
    p20, p80 = xs[int(0.2 * (n - 1))], xs[int(0.8 * (n - 1))]
    return KernelTiming(ms=ms, ms_min=xs[0], ms_max=xs[-1], spread=(p80 - p20) / ms if ms else 0.0, reps=n)


def host_overhead_us(fn: Callable[[], Any], kind: str, calls: int = 50) -> float:
    """Microseconds of host time per call, without waiting for the device: 50 calls stay far below
    the launch queue's depth (~1000), so the loop measures Python and launch cost only."""
    fn()
    synchronize(kind)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    synchronize(kind)
    return (t1 - t0) / calls * 1e6
