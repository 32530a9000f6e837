"""The timing verdict, decided in the judge's process.

Per perf case x dtype, on inputs the judge draws on the device:
- a **spot check**: the candidate must be right at this shape too (a kernel right only on the small
  test shapes is not timed as a win);
- the candidate (and the current best, when given) timed in their workers, **interleaved** in rounds
  so both see the same clocks and neighbours, each repetition with the L2 flushed
  (kernelgen.verify.timing); every timed call must launch Triton, the last one's output must be right,
  and the worker must have no work left queued when it says it is done;
- PyTorch eager, `torch.compile` of the reference and the peer libraries (kernelgen.verify.peers)
  timed here, on the same inputs;
- bytes and FLOPs: the minimum bytes (inputs read once, outputs written once); FLOPs from the spec, or
  counted by PyTorch's flop counter on the reference when the spec gives none (a matmul is then
  judged in TFLOP/s);
- the right ceiling: read bandwidth for read-dominated kernels (a reduction writes almost nothing),
  copy bandwidth for read + write, the matmul rate for compute-bound ones. A timing beyond its ceiling
  by more than 5% is invalid, never a win.
Under the CPU interpreter all of this is a dry run on the first test case, labelled as such.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from kernelgen.devices import INTERPRETER_WARNING
from kernelgen.spec import Case
from kernelgen.verify import peers as peer_libs
from kernelgen.verify.compare import compare
from kernelgen.verify.devicelock import device_lock
from kernelgen.verify.inputs import PERF_SEED, checkable_dtypes
from kernelgen.verify.judge import Judge, KernelSource, LoadError, static_problems
from kernelgen.verify.poison import draw_fills
from kernelgen.verify.protocol import OtherValue
from kernelgen.verify.results import DevicePeaks, PerfCase, PerformanceResult, Violation
from kernelgen.verify.session import WorkerSession
from kernelgen.verify.timing import host_overhead_us, rep_times, summarize

ROUNDS = 3  # interleaved rounds of candidate and best
REP_MS = 40.0  # per kernel per round: ~100+ repetitions of a 0.3 ms kernel
CEILING_SLACK = 1.05  # 5% above a measured ceiling is beyond noise: the kernel skipped work
READ_DOMINATED = 0.1  # writes under 10% of the bytes: judged against the read ceiling
DEFERRED_MS = 5.0  # a worker with nothing queued answers a sync in well under a millisecond


def _as_tuple(x: Any) -> tuple:
    return tuple(x) if type(x) in (tuple, list) else (x,)


def _nbytes(ts: Any) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


def counted_flops(reference: Callable[..., Any], inputs: list[Any], params: dict[str, Any]) -> int | None:
    """FLOPs of one reference call, counted by PyTorch (matmuls, convolutions, attention); None when
    it counts nothing (pointwise work is not counted, and is memory-bound anyway)."""
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with FlopCounterMode(display=False) as counter:
            reference(*inputs, **params)
    except Exception:  # noqa: BLE001 - a reference the counter cannot trace is simply not counted
        return None
    total = counter.get_total_flops()
    return int(total) if total else None


def judge_against_peaks(pc: PerfCase, peaks: DevicePeaks | None, read_bytes: int, write_bytes: int) -> None:
    """Classify the case (memory- or compute-bound), pick its ceiling, reject impossible timings."""
    if peaks is None or pc.kernel is None:
        return
    ridge = (peaks.matmul_tflops * 1e12) / (peaks.copy_gbps * 1e9) if peaks.matmul_tflops else None
    intensity = (pc.flops / pc.bytes) if pc.flops and pc.bytes else 0.0
    if ridge and intensity > ridge:
        pc.bound, pc.ceiling = "compute", "matmul"
        pc.frac_peak = (pc.tflops or 0) / peaks.matmul_tflops
        limit, what = peaks.matmul_tflops, f"{pc.tflops or 0:.0f} TFLOP/s exceeds the measured matmul rate {peaks.matmul_tflops:.0f}"
        value = pc.tflops or 0
    else:
        read_only = write_bytes < READ_DOMINATED * (read_bytes + write_bytes) and peaks.read_gbps
        pc.bound, pc.ceiling = "memory", "read" if read_only else "copy"
        ceiling = peaks.read_gbps if read_only else peaks.copy_gbps
        pc.frac_peak = (pc.gbps or 0) / ceiling
        limit, value = ceiling, pc.gbps or 0
        what = f"{value:.0f} GB/s exceeds the measured {pc.ceiling} bandwidth {ceiling:.0f} GB/s"
    if value > CEILING_SLACK * limit:
        pc.valid = False
        pc.invalid_reason = f"{what}: not a speedup, a measurement that cannot be true"


def _timing_rounds(judge: Judge, timed: list[tuple[WorkerSession, str]], key: str, out_limit: int,
                   rounds: int) -> tuple[list[list[float]], list[list[float]], list[Any], list[tuple[str, str]]]:
    """Per kernel: every repetition's time, each round's summary, the last timed output; and the
    (code, message) problems found on the way."""
    reps: list[list[float]] = [[] for _ in timed]
    round_ms: list[list[float]] = [[] for _ in timed]
    last: list[Any] = [None] * len(timed)
    problems: list[tuple[str, str]] = []
    for r in range(rounds):
        for i in [(r + j) % len(timed) for j in range(len(timed))]:  # who goes first rotates per round
            worker, slot = timed[i]
            reply = worker.request({"op": "time", "slot": slot, "key": key, "params": judge.spec.param_defaults,
                                    "rep_ms": REP_MS, "warmup_ms": 10, "out_offset": 0, "out_limit": out_limit})
            if not reply.ok:
                raise _TimedCallFailed(reply.error)
            if reply.launches < reply.calls:
                problems.append(("timed-call-no-launch", f"{reply.calls} timed calls launched only {reply.launches} Triton "
                                 "kernels; a call that launches nothing returned a cached or host-computed result"))
            t0 = time.perf_counter()
            worker.request({"op": "sync"})
            waited = (time.perf_counter() - t0) * 1e3
            if waited > DEFERRED_MS and not judge.device.interpreter:
                problems.append(("deferred-work", f"the worker still had {waited:.1f} ms of work queued after saying it was done"))
            reps[i] += reply.times_ms
            round_ms[i].append(summarize(reply.times_ms).ms)
            last[i] = reply.outputs
    return reps, round_ms, last, problems


class _TimedCallFailed(Exception):
    pass


def measure_performance(judge: Judge, kernel: KernelSource, *, compare_with: KernelSource | None = None,
                        with_eager: bool = True, with_compile: bool | None = None, with_peers: bool | None = None,
                        peaks: DevicePeaks | None = None, rounds: int = ROUNDS,
                        log: Callable[[str], None] = lambda s: None) -> PerformanceResult:
    """Time `kernel` (against `compare_with`, the current best, when given) on every perf case."""
    import torch
    import triton

    spec, device = judge.spec, judge.device
    res = PerformanceResult(op=spec.name, kernel=kernel.name, kernel_sha256=kernel.sha256, device=device.kind,
                            device_name=torch.cuda.get_device_name() if device.kind == "cuda" else device.kind,
                            interpreter=device.interpreter, measured=not device.interpreter, peaks=peaks,
                            torch_version=torch.__version__, triton_version=triton.__version__)
    static = static_problems(spec, kernel)
    if static:
        res.violations = [Violation(code=c, message=m) for c, m in static]
        return res
    kernels = [kernel] + ([compare_with] if compare_with is not None else [])
    try:
        timed = [judge.load(k) for k in kernels]
    except LoadError as e:
        res.error = f"import failed: {e}"
        return res
    res.sandbox = list(judge.sandbox_notes)
    for code, message in judge.load_violations.get(kernel.sha256, []):
        res.violations.append(Violation(code=code, message=message))
    if device.interpreter:
        dtypes, _ = checkable_dtypes(spec, True)
        cases, dtypes = spec.test_cases[:1], dtypes[:1]
        res.note = INTERPRETER_WARNING + " Dry run on test_cases[0] instead of perf_cases; torch.compile and peers not timed."
        with_compile, with_peers = False, False
    else:
        cases, dtypes = spec.effective_perf_cases, spec.effective_perf_dtypes
        with_compile = True if with_compile is None else with_compile
        with_peers = True if with_peers is None else with_peers
    compiled_ref = torch.compile(judge.baseline) if with_compile else None
    for ci, case in enumerate(cases):
        for dtype in dtypes:
            try:
                pc = _measure_case(judge, res, timed, ci, case, dtype, compiled_ref=compiled_ref, with_eager=with_eager,
                                   with_peers=bool(with_peers), rounds=rounds)
            except _TimedCallFailed as e:
                res.error = f"case {ci} {dtype} (timed): {e}"
                return res
            if pc is None:
                return res
            res.cases.append(pc)
            log(", ".join([pc.label, *pc.facts()]) + ("" if res.measured else " [interpreter: not a measurement]"))
    return res


def _measure_case(judge: Judge, res: PerformanceResult, timed: list[tuple[WorkerSession, str]], ci: int, case: Case,
                  dtype: str, *, compiled_ref: Any, with_eager: bool, with_peers: bool, rounds: int) -> PerfCase | None:
    import torch

    from kernelgen.spec import draw_inputs

    spec, device = judge.spec, judge.device
    params = spec.param_defaults
    inputs = draw_inputs(spec, case, dtype, PERF_SEED + ci, device.torch_device, on_device=not device.interpreter)
    expected = _as_tuple(judge.baseline(*inputs, **params))
    read_b, write_b = _nbytes(inputs), _nbytes(expected)
    flops, source = spec.flop_count(case), "spec"
    if flops is None:
        flops, source = counted_flops(judge.baseline, inputs, params), "counted"
    pc = PerfCase(case=ci, shapes=case, dtype=dtype, bytes=read_b + write_b, flops=flops,
                  flops_source=source if flops else "")
    key = f"perf{ci}-{dtype}"
    out_limit = judge.arena_bytes // 2
    fill, _ = draw_fills()
    for worker, slot in {w: (w, s) for w, s in timed}.values():
        judge.put(worker, key, inputs)
    worker, slot = timed[0]
    reply = judge.call(worker, slot, key, mode="guarded", fill=fill, out_limit=out_limit)
    if not reply.ok:
        res.error = f"case {ci} {dtype}: {reply.error}"
        return None
    for v in (reply.report.violations if reply.report else []):
        if not any(x.code == v.get("code") for x in res.violations):
            res.violations.append(Violation(code=v.get("code", "worker-report"), message=f"case {ci} {dtype}: {v.get('message', '')}"))
    problem = _check_outputs(judge, worker, reply.outputs, expected, dtype, fill)
    if problem:
        pc.valid, pc.spot_check = False, problem
        pc.invalid_reason = f"wrong at the perf shape: {problem}"
    with device_lock(exclusive=True):  # nothing else of ours on the device while timing
        reps, round_ms, last, problems = _timing_rounds(judge, timed, key, out_limit, rounds)
    for code, message in problems:
        if not any(x.code == code for x in res.violations):
            res.violations.append(Violation(code=code, message=f"case {ci} {dtype}: {message}"))
    wrong = _check_outputs(judge, worker, last[0], expected, dtype, None)
    if wrong:
        res.violations.append(Violation(code="timed-output-wrong", message=f"case {ci} {dtype}: the output of the last timed call is wrong: {wrong}"))
    pc.kernel = summarize(reps[0])
    if len(timed) > 1:
        pc.compare = summarize(reps[1])
        ratios = [b / k for k, b in zip(round_ms[0], round_ms[1]) if k]
        pc.speedup_vs_compare = statistics.median(ratios) if ratios else None
        pc.pair_noise = (max(ratios) - min(ratios)) / pc.speedup_vs_compare if ratios and pc.speedup_vs_compare else None
    if not device.interpreter:
        host = worker.request({"op": "host", "slot": slot, "key": key, "params": params})
        pc.host_us = host.host_us
    if compiled_ref is not None:
        try:
            compiled_ref(*inputs, **params)  # compile outside the timed region (seconds of CPU work)
        except Exception as e:  # noqa: BLE001 - a compile failure is reported, not fatal
            res.note = (res.note + f" torch.compile failed on case {ci} {dtype}: {type(e).__name__}.").strip()
            compiled_ref = None
    with device_lock(exclusive=True):
        if with_eager:
            pc.eager = summarize(rep_times(lambda: judge.baseline(*inputs, **params), device.kind))
            if not device.interpreter:
                pc.eager_host_us = host_overhead_us(lambda: judge.baseline(*inputs, **params), device.kind)
        if compiled_ref is not None:
            pc.compiled = summarize(rep_times(lambda: compiled_ref(*inputs, **params), device.kind))
        if with_peers:
            _time_peers(judge, res, pc, inputs, expected, dtype)
    secs = pc.kernel.ms * 1e-3 if pc.kernel else None
    if secs:
        pc.gbps = pc.bytes / secs / 1e9
        pc.tflops = pc.flops / secs / 1e12 if pc.flops else None
        pc.speedup_eager = pc.eager.ms / pc.kernel.ms if pc.eager else None
        pc.speedup_compile = pc.compiled.ms / pc.kernel.ms if pc.compiled else None
    judge_against_peaks(pc, res.peaks, read_b, write_b)
    for w, _ in {w: (w, s) for w, s in timed}.values():
        judge.drop(w, key)
    del inputs, expected
    if device.kind == "cuda":
        torch.cuda.empty_cache()
    return pc


def _check_outputs(judge: Judge, worker: WorkerSession, values: list[Any] | None, expected: tuple, dtype: str,
                   fill: Any) -> str:
    """"" when the returned values match the baseline; otherwise what is wrong."""
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


def _time_peers(judge: Judge, res: PerformanceResult, pc: PerfCase, inputs: list[Any], expected: tuple, dtype: str) -> None:
    import torch

    found, notes = peer_libs.candidates(judge.spec, judge.baseline, inputs)
    for note in notes:
        if note not in res.note:
            res.note = (res.note + f" {note}.").strip()
    for peer in found:
        try:
            with torch.no_grad(), peer.context():
                out = _as_tuple(peer.call())
                ok = len(out) == len(expected) and all(
                    compare(o, e, judge.spec.tolerance_for(dtype)).passed for o, e in zip(out, expected))
                if not ok:
                    continue  # not the same function: not a peer of this operator
                pc.peers[peer.name] = summarize(rep_times(peer.call, judge.device.kind))
        except Exception:  # noqa: BLE001 - a peer that cannot run this shape is no peer here
            continue
