"""The timing verdict, decided in the judge's process.

Per perf case x dtype, on inputs the judge draws on the device:
- a **spot check**: the candidate must be right at this shape too (a kernel right only on the small
  test shapes is not timed as a win);
- the candidate (and the current best, when given) timed in their workers, **interleaved** in rounds
  so both see the same clocks and neighbours, each repetition with the L2 flushed
  (kernelgen.verify.timing); every timed call must launch Triton, the last one's output must be right,
  and the worker must have no work left queued when it says it is done;
- PyTorch eager, `torch.compile` of the reference and the peer libraries (kernelgen.verify.judge.peers)
  timed here, on the same inputs, or taken from the baseline cache: timed earlier, or ahead of the
  kernel by a judge-side process of their own (kernelgen.verify.judge.baselinetimes);
- bytes and FLOPs: the minimum bytes (inputs read once, outputs written once); FLOPs from the spec, or
  counted by PyTorch's flop counter on the reference when the spec gives none (a matmul is then
  judged in TFLOP/s);
- the right ceiling: read bandwidth for read-dominated kernels (a reduction writes almost nothing),
  copy bandwidth for read + write, the matmul rate of the case's dtype and precision for
  compute-bound ones (float32 against tf32x3 / FP32, or TF32 where the user's precision policy lets one
  of the case's products -- a matmul, a convolution, as PyTorch's flop counter names them -- use it:
  kernelgen.verify.judge.precision, applied alike to eager, torch.compile and the candidate). A timing
  beyond its ceiling by more than 5% is invalid, never a win.
Under the CPU interpreter all of this is a dry run on the first test case, labelled as such.
"""

from __future__ import annotations

from typing import Any, Callable

from kernelgen.devices import INTERPRETER_WARNING
from kernelgen.nodynamo import without_dynamo
from kernelgen.spec import Case
from kernelgen.verify.judge.baselinetimes import Peers, References, await_claimed, say_cached
from kernelgen.verify.judge.compare import as_tuple
from kernelgen.verify.judge.devicelock import device_lock
from kernelgen.verify.judge.inputs import PERF_SEED, DrawnInputs
from kernelgen.verify.judge.measurebasis import timed_cases_of, tool_version
from kernelgen.verify.judge.devicememory import LATE_PEERS_BYTES, peers_after_kernel
from kernelgen.verify.judge.judge import Judge, KernelSource, LoadError, static_problems
from kernelgen.precision import precision_policy
from kernelgen.verify.judge.precision import applied
from kernelgen.verify.results import DevicePeaks, PerfCase, PerformanceResult, Violation
from kernelgen.verify.judge.timed import paired, time_case
from kernelgen.verify.replay.extract import ExtractError
from kernelgen.verify.timing import summarize
from kernelgen.verify.judge.wallclock import describe as describe_check

# Timing stops as soon as every median is as sharp as the keep rule can use (kernelgen.verify.adaptive);
# these only cap it: at most ROUNDS interleaved rounds (three at least when paired with the best), and
# ROUNDS x REP_MS of timed device time per kernel (fixed rounds cost 3 x 40 ms, whatever the kernel).
ROUNDS = 5
REP_MS = 30.0
CEILING_SLACK = 1.05  # 5% above a measured ceiling is beyond noise: the kernel skipped work
READ_DOMINATED = 0.1  # writes under 10% of the bytes: judged against the read ceiling


def _nbytes(ts: Any) -> int:
    import torch

    return sum(t.numel() * t.element_size() for t in ts if isinstance(t, torch.Tensor))


# PyTorch's flop counter's names for convolutions; every other op it counts multiplies matrices
_CONV_OPS = ("convolution", "_convolution", "cudnn_convolution", "convolution_backward", "conv")


def _on_meta(inputs: list[Any]) -> list[Any]:
    """Shape-only twins of `inputs` (same sizes, strides and dtypes): what the flop counter needs."""
    import torch

    return [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta") if isinstance(t, torch.Tensor) else t
            for t in inputs]


def counted_products(reference: Callable[..., Any], inputs: list[Any], params: dict[str, Any]) -> dict[str, int]:
    """FLOPs of one reference call per kind of product, "matmul" and "conv", counted by PyTorch
    (matmuls, convolutions, attention); empty when it counts nothing (pointwise work is not counted,
    and is memory-bound anyway) or cannot trace the reference. Counted on shape-only copies of the
    inputs where the reference runs on them: on the real ones it was one more eager run at the perf
    shape, whose output and intermediates the judge's allocator then kept (6.4 GB for level 1's ReLU)."""
    from torch.utils.flop_counter import FlopCounterMode

    def count(args: list[Any]) -> FlopCounterMode:
        with FlopCounterMode(display=False) as counter:
            reference(*args, **params)
        return counter

    counter = None
    for args in (_on_meta, list):  # the real inputs only where the reference needs their values
        try:
            counter = without_dynamo(lambda: count(args(inputs)))  # noqa: B023 - called at once; the counter's
            break  # dispatch would import torch._dynamo: 3.4 s (H200)
        except Exception:  # noqa: BLE001 - a reference the counter cannot trace is simply not counted
            continue
    if counter is None:
        return {}
    kinds: dict[str, int] = {}
    for op, flops in counter.get_flop_counts().get("Global", {}).items():
        kind = "conv" if str(op).split(".")[-1] in _CONV_OPS else "matmul"
        kinds[kind] = kinds.get(kind, 0) + int(flops)
    return {k: v for k, v in kinds.items() if v}


def counted_flops(reference: Callable[..., Any], inputs: list[Any], params: dict[str, Any]) -> int | None:
    """FLOPs of one reference call, counted by PyTorch; None when it counts nothing."""
    return sum(counted_products(reference, inputs, params).values()) or None


def judge_against_peaks(pc: PerfCase, peaks: DevicePeaks | None, read_bytes: int, write_bytes: int, *,
                        tf32: bool = False) -> None:
    """Classify the case (memory- or compute-bound), pick its ceiling, reject impossible timings."""
    if peaks is None or pc.kernel is None:
        return
    rate, precision = peaks.matmul_rate(pc.dtype, tf32=tf32)
    ridge = (rate * 1e12) / (peaks.copy_gbps * 1e9) if rate else None
    intensity = (pc.flops / pc.bytes) if pc.flops and pc.bytes else 0.0
    if rate and ridge and intensity > ridge:
        pc.bound, pc.ceiling, pc.precision = "compute", "matmul", precision
        value = pc.tflops or 0
        pc.frac_peak = value / rate
        limit, what = rate, f"{value:.0f} TFLOP/s exceeds the measured {precision} matmul rate {rate:.0f}"
        tf32_rate = peaks.matmul.get("tf32")
        if pc.dtype == "float32" and not tf32 and tf32_rate and value <= CEILING_SLACK * tf32_rate:
            what += (" (as fast as TF32, which is off for this case's products under the precision policy: the kernel "
                     "multiplies in reduced precision; KERNELGEN_TF32=1, or --precision tf32, allows it)")
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


def timed_cases(judge: Judge) -> tuple[list[Case], list[str]]:
    """The perf cases and dtypes timed here (kernelgen.verify.judge.measurebasis.timed_cases_of)."""
    return timed_cases_of(judge.spec, judge.device.interpreter)


def measure_performance(judge: Judge, kernel: KernelSource, *, compare_with: KernelSource | None = None,
                        with_eager: bool = True, with_compile: bool | None = None, with_peers: bool | None = None,
                        peaks: DevicePeaks | None = None, rounds: int = ROUNDS, fresh: bool = False,
                        graph: bool = False, log: Callable[[str], None] = lambda s: None) -> PerformanceResult:
    """Time `kernel` (against `compare_with`, the current best, when given) on every perf case. The
    baselines (eager, torch.compile, peers) come from the per-user cache where it has them, unless
    `fresh` (kernelgen.verify.judge.baselines). `graph`: each case's plan timed in a CUDA graph too."""
    import torch
    import triton

    spec, device = judge.spec, judge.device
    policy = precision_policy()
    res = PerformanceResult(op=spec.name, kernel=kernel.name, kernel_sha256=kernel.sha256, device=device.kind,
                            device_name=torch.cuda.get_device_name() if device.kind == "cuda" else device.kind,
                            interpreter=device.interpreter, measured=not device.interpreter, peaks=peaks,
                            tf32=policy.matmul_tf32, precision=policy, torch_version=torch.__version__,
                            triton_version=triton.__version__)
    static = static_problems(spec, kernel)
    if static:
        res.violations = [Violation(code=c, message=m) for c, m in static]
        return res
    kernels = [kernel] + ([compare_with] if compare_with is not None else [])
    try:
        judge.replayer.extracted(kernel)  # what a replay defines of the file: nothing of it runs before this holds
        for k in kernels:
            judge.load(k)
    except ExtractError as e:
        res.violations = [Violation(code=e.code, message=e.message)]
        return res
    except LoadError as e:
        res.error = f"import failed: {e}"
        return res
    res.sandbox = list(judge.sandbox_notes)
    for code, message in judge.load_violations.get(kernel.sha256, []):
        res.violations.append(Violation(code=code, message=message))
    cases, dtypes = timed_cases(judge)
    if "float32" in dtypes:
        res.note = f"Precision: {policy.describe()}."
    if device.interpreter:
        res.note = (INTERPRETER_WARNING + " Dry run on test_cases[0] instead of perf_cases; torch.compile and peers not timed. "
                    + res.note).strip()
        with_compile, with_peers = False, False
    else:
        with_compile = True if with_compile is None else with_compile
        with_peers = True if with_peers is None else with_peers
    res.tool = tool_version()
    res.baselines = [b for b, asked in (("eager", with_eager), ("compile", with_compile), ("peers", with_peers)) if asked]
    refs = References(judge, fresh=fresh, with_eager=with_eager, with_compile=with_compile, policy=policy)
    cells = [(ci, case, dtype) for ci, case in enumerate(cases) for dtype in dtypes]
    large = peers_after_kernel(judge.spec, cells)
    if large:  # baselines timed ahead in another process: finished before the judge holds a copy of large inputs
        refs.waited_s += await_claimed(refs.cache, ["eager", "compile", "peers"], cells, log)
    late = with_peers and large
    peers = Peers(judge, refs.cache, cells, log) if with_peers and not late else None
    try:
        for ci, case in enumerate(cases):
            for dtype in dtypes:
                pc = _measure_case(judge, res, kernels, ci, case, dtype, refs, rounds=rounds, graph=graph)
                res.cases.append(pc)
                log(", ".join([pc.label, *pc.facts()]) + ("" if res.measured else " [interpreter: not a measurement]"))
        if late and res.cases:
            log(f"the peer libraries are timed after the kernel: a case's inputs take {LATE_PEERS_BYTES >> 30} GiB or more")
            peers = Peers(judge, refs.cache, cells, log)
        if peers is not None and res.cases:
            peers.fill(res)
    finally:
        if peers is not None:
            peers.cancel()
    waited = refs.waited_s + (peers.waited_s if peers is not None else 0.0)
    if waited >= 1.0:
        log(f"waited {waited:.1f} s for the baselines timed ahead in another process")
    say_cached(res)
    for note in judge.notes.get(kernel.sha256, []):  # e.g. autotune's first config only, on the interpreter
        res.note = (res.note + f" {note}.").strip()
    return res


def perf_inputs(judge: Judge, ci: int, case: Case, dtype: str) -> tuple[list[Any], tuple]:
    """The inputs of perf case `ci` (a fixed seed: eager, compile, the best and every candidate see the
    same data, in every round) and the baseline's outputs on them."""
    from kernelgen.spec import draw_inputs

    kept = judge.kept(perf_key(ci, dtype))
    if kept is not None:
        return kept
    device = judge.device
    with device_lock(exclusive=False, path=device.lock):  # device work: never beside another process's timing
        inputs = DrawnInputs(draw_inputs(judge.spec, case, dtype, PERF_SEED + ci, device.torch_device,
                                         on_device=not device.interpreter), case, dtype, PERF_SEED + ci)
        with applied():  # eager as the user runs it: the timed outputs' spot check measures its error
            expected = as_tuple(judge.baseline(*inputs, **judge.spec.param_defaults))
    judge.keep(perf_key(ci, dtype), inputs, expected)
    return inputs, expected


def perf_key(ci: int, dtype: str) -> str:
    """The name perf case `ci` in `dtype` is kept under, in the judge and its workers."""
    return f"perf-{ci}-{dtype}"


def resident_key(judge: Judge, ci: int, dtype: str) -> str | None:
    """`perf_key` when the judge keeps that case resident (its workers may too), else None."""
    key = perf_key(ci, dtype)
    return key if judge.kept(key) is not None else None


def _measure_case(judge: Judge, res: PerformanceResult, kernels: list[KernelSource], ci: int, case: Case, dtype: str,
                  refs: References, *, rounds: int, graph: bool = False) -> PerfCase:
    import torch

    spec, device = judge.spec, judge.device
    params = spec.param_defaults
    inputs, expected = perf_inputs(judge, ci, case, dtype)
    read_b, write_b = _nbytes(inputs), _nbytes(expected)
    products = counted_products(judge.baseline, inputs, params)  # which kinds, for the precision of the ceiling
    flops, source = spec.flop_count(case), "spec"
    if flops is None:
        flops, source = sum(products.values()) or None, "counted"
    pc = PerfCase(case=ci, shapes=case, dtype=dtype, bytes=read_b + write_b, flops=flops,
                  flops_source=source if flops else "")
    timed = time_case(judge, kernels, inputs, expected, dtype, rounds=rounds, rep_ms=REP_MS, key=resident_key(judge, ci, dtype),
                      graph=graph)
    mine = timed[0]
    for code, message in [v for t in timed for v in t.violations]:
        if not any(x.code == code for x in res.violations):
            res.violations.append(Violation(code=code, message=f"case {ci} {dtype}: {message}"))
    # on this case's line too: what the kernel did on import concerns every case, the rest this one
    pc.violations = [Violation(code=c, message=m) for c, m in [*judge.load_violations.get(kernels[0].sha256, []), *mine.violations]]
    if mine.wrong:
        pc.valid, pc.spot_check = False, mine.wrong
        pc.invalid_reason = f"wrong at the perf shape: {mine.wrong}"
    pc.kernel = summarize(mine.reps) if mine.timed else None
    pc.host_us = mine.host_us
    pc.graph = summarize(mine.graph_reps) if mine.graph_reps else None
    pc.launches_per_call = mine.launches / mine.calls if mine.calls else None
    pc.timing_check = describe_check(mine.claimed_ms, mine.floor_ms) if mine.timed else ""
    if mine.disturbed:  # the measurement's own cross-checks, not the kernel's: said beside its timing
        pc.timing_check += "; disturbed: " + "; ".join(dict.fromkeys(mine.disturbed))
    if len(timed) > 1 and timed[1].timed and mine.timed:
        pc.compare = summarize(timed[1].reps)
        pc.speedup_vs_compare, pc.pair_noise = paired(timed[1], mine)
    expected = None  # eager's outputs were the spot check's: not held while eager and torch.compile run again
    refs.time(res, pc, inputs)
    secs = pc.kernel.ms * 1e-3 if pc.kernel else None
    if secs:
        pc.gbps = pc.bytes / secs / 1e9
        pc.tflops = pc.flops / secs / 1e12 if pc.flops else None
        pc.speedup_eager = pc.eager.ms / pc.kernel.ms if pc.eager else None
        pc.speedup_compile = pc.compiled.ms / pc.kernel.ms if pc.compiled else None
    judge_against_peaks(pc, res.peaks, read_b, write_b, tf32=refs.policy.tf32_for(set(products)))
    del inputs, expected
    if device.kind == "cuda":
        torch.cuda.empty_cache()  # eager's, torch.compile's and the peers' outputs (kept inputs stay allocated)
    return pc
