"""Timings the candidate cannot forge, and timing no longer than the keep rule needs: the worker's clock
bound before any candidate runs (C-level methods captured, not attributes looked up when timing), the
seal on the loop's code, the judge's wall-clock bound on what a worker may claim, and the adaptive
plan's statistics."""

from __future__ import annotations

import functools
import math
import time

import pytest

from kernelgen.verify import timing

from kernelgen.verify.judge import wallclock
from kernelgen.verify.adaptive import MIN_REPS, REQUEST_MS, Plan
from kernelgen.verify.samples import median_ci, summarize
from kernelgen.verify.timing import LoopCost, Stopwatch, _c_level

GPU_LOOP = LoopCost(fixed_ms=0.05, per_rep_ms=0.09, host_rep_ms=0.012)  # H100-like: a 256 MB flush per repetition
CPU_LOOP = LoopCost(fixed_ms=0.01, per_rep_ms=0.001, host_rep_ms=0.001)


def _sleep_2ms() -> None:
    time.sleep(0.002)


# --- the clock is bound before candidate code runs ------------------------------------------------
def test_a_rebound_perf_counter_or_timing_function_changes_nothing_the_stopwatch_measures(monkeypatch):
    watch = Stopwatch("cpu")  # the worker binds it before it imports any candidate
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() / 1000)  # a clock 1000x slow
    monkeypatch.setattr(timing, "run_reps", lambda fn, clock, *, reps, warmup: [1e-6] * reps)
    monkeypatch.setattr(timing, "_now", time.perf_counter)
    times = watch.reps(_sleep_2ms, reps=3, warmup=0)
    assert len(times) == 3 and min(times) >= 1.5, times
    assert watch.host_us(_sleep_2ms, calls=2) >= 1500
    assert watch.broken() == []  # rebinding a module's name does not touch what was captured


def test_the_c_method_under_a_python_attribute_is_captured_and_survives_update_wrapper():
    # torch.cuda.Event.elapsed_time is a Python method over _CudaEventBase's C one; the same shape on
    # the CPU: a Python override of a C method of bytearray.
    class Event(bytearray):
        def hex(self):  # noqa: A003 - the Python layer, as torch.cuda.Event.elapsed_time is
            return super().hex()

    class Faster:
        def hex(self):  # noqa: A003
            return "forged"

    owner, captured = _c_level(Event, "hex")
    assert owner is bytearray and captured is bytearray.__dict__["hex"]
    functools.update_wrapper(Event, Faster, assigned=("hex",), updated=())  # the attack, a setattr on the class
    assert Event(b"\x01").hex() == "forged"
    assert captured(Event(b"\x01")) == "01"


def test_a_rewritten_loop_or_clock_breaks_the_seal():
    watch = Stopwatch("cpu")
    code = timing.run_reps.__code__
    try:
        timing.run_reps.__code__ = (lambda fn, clock, *, reps, warmup: [1e-6] * reps).__code__
        assert any("run_reps" in b for b in watch.broken())
    finally:
        timing.run_reps.__code__ = code
    assert watch.broken() == []
    object.__setattr__(watch.clock, "now", lambda: 0.0)
    assert any("now" in b for b in watch.broken())


def test_a_resized_flush_buffer_breaks_the_seal():
    import torch

    clock = timing.Clock(kind="cpu", now=time.perf_counter, flush=torch.empty(1024, dtype=torch.int32))
    seal = timing.Seal([timing.run_reps], clock)
    assert seal.broken() == []
    clock.flush.resize_(0)  # the L2 would stay warm between repetitions
    assert seal.broken() == ["the L2 flush buffer resized or moved"]


# --- the judge's wall-clock bound -----------------------------------------------------------------
def _gpu_request(reps: int, call_ms: float, host_call_ms: float, *, warmup: int = 0, empty_ms: float = 0.3) -> wallclock.Request:
    """The wall clock an honest worker's request takes: each repetition paced by the slower of the
    device (flush, events, call) and the host (issuing the flush, events and call)."""
    per_rep = max(GPU_LOOP.per_rep_ms + call_ms, GPU_LOOP.host_rep_ms + host_call_ms)
    wall = empty_ms + reps * per_rep + warmup * max(call_ms, host_call_ms)
    return wallclock.Request(reps=reps, warmup=warmup, wall_ms=wall, empty_ms=empty_ms, host_call_ms=host_call_ms)


@pytest.mark.parametrize("call_ms, host_call_ms", [(1.0, 0.03), (0.2, 0.03), (0.005, 0.03), (0.02, 0.3), (2.0, 5.0)])
def test_an_honest_timing_is_never_flagged_device_or_host_bound(call_ms, host_call_ms):
    req = _gpu_request(40, call_ms, host_call_ms, warmup=5)
    assert wallclock.check([call_ms] * 40, req, GPU_LOOP, cpu=False) is None


def test_a_device_bound_timing_claimed_twice_as_fast_is_flagged():
    req = _gpu_request(20, 1.0, 0.03, warmup=2)
    message = wallclock.check([0.5] * 20, req, GPU_LOOP, cpu=False)
    assert message and "judge's own clock" in message


def test_padding_the_slower_half_does_not_buy_a_faster_record():
    # The sum of these claims matches the wall clock; the record (the faster half's mean) would halve it.
    req = _gpu_request(20, 1.0, 0.03)
    padded = [0.5] * 10 + [1.5] * 10
    assert sum(padded) == pytest.approx(20.0)
    assert wallclock.check(padded, req, GPU_LOOP, cpu=False)


def test_a_small_host_bound_kernel_is_not_flagged_even_when_forged():
    # 5 us of device time behind 300 us of Python: the wall clock says nothing about the device
    req = _gpu_request(40, 0.005, 0.3)
    assert wallclock.check([0.0025] * 40, req, GPU_LOOP, cpu=False) is None


def test_without_the_host_time_nothing_is_bounded_on_a_gpu():
    req = wallclock.Request(reps=10, warmup=0, wall_ms=100.0, empty_ms=0.3, host_call_ms=None)
    assert wallclock.check([1e-6] * 10, req, GPU_LOOP, cpu=False) is None


def test_the_interpreter_flags_only_a_gross_lie():
    req = wallclock.Request(reps=3, warmup=1, wall_ms=4 * 3.0 + 1.0, empty_ms=0.8, host_call_ms=None)
    assert wallclock.check([2.5, 3.5, 3.0], req, CPU_LOOP, cpu=True) is None
    assert wallclock.check([0.003] * 3, req, CPU_LOOP, cpu=True)


# --- adaptive timing --------------------------------------------------------------------------------
def test_the_median_interval_is_the_order_statistics():
    xs = [float(i) for i in range(1, 21)]  # n=20: the 95% interval is x(6)..x(15)
    assert median_ci(xs) == pytest.approx((15 - 6) / (2 * 10.5))
    assert median_ci([1.0, 2.0, 4.0]) == pytest.approx((4 - 1) / (2 * 2.0))  # few samples: the whole range
    assert math.isinf(median_ci([1.0]))
    assert summarize(xs).ci == pytest.approx(median_ci(xs))


def test_large_kernels_get_few_repetitions_and_small_ones_enough_for_the_bound():
    plan = Plan.paired(2, rounds=5, round_ms=30.0, interpreter=False)
    assert plan.min_rounds == 3 and plan.max_rounds == 5
    assert plan.reps(22.0, 0.09) == 2  # a 22 ms float32 matmul: the budget allows two per round
    assert plan.reps(1.0, 0.09) == max(math.ceil(MIN_REPS / 3), math.ceil(REQUEST_MS / 1.09))
    assert plan.reps(0.01, 0.09) * 0.1 >= REQUEST_MS  # each request carries that much device work
    assert Plan.paired(2, rounds=2, round_ms=20.0, interpreter=False).min_rounds == 2  # a search asks for two


def test_timing_stops_when_the_median_is_sharp_and_not_before_the_paired_rounds():
    plan = Plan.paired(2, rounds=5, round_ms=30.0, interpreter=False)
    steady = [1.0 + 0.001 * (i % 5) for i in range(12)]
    assert not plan.done([steady, steady], 2)  # pairing needs three rounds
    assert plan.done([steady, steady], 3)
    assert Plan.sharp(steady) and not Plan.sharp(steady[:MIN_REPS - 1])
    # Under 1% of spread but a tail the median's interval still reaches: not yet sharp, so more rounds,
    # up to the cap; a spread as wide as the interval is sharp already (the keep rule's noise is that wide).
    tail = [1.0] * 9 + [1.02] * 3
    assert not Plan.sharp(tail) and not plan.done([steady, tail], 3)
    assert Plan.sharp(tail + [1.0] * 12)
    assert plan.done([steady, tail], 5)
    assert Plan.sharp([1.0, 3.0] * 6)
    assert plan.done([steady, [50.0] * 4], 3)  # 200 ms spent of a 150 ms budget


def test_the_interpreter_dry_run_is_one_round_of_three_calls():
    plan = Plan.paired(2, rounds=5, round_ms=30.0, interpreter=True)
    assert plan.reps(3.0) == 3 and plan.warmup(3.0) == 1
    assert not plan.done([[]], 0) and plan.done([[3.0] * 3], 1)
