"""The operator analysis that opens `optimization_log.md` (the seed's stage-1 document): per perf case
x dtype, the minimum bytes moved and the FLOPs, the arithmetic intensity against the ridge point of
the case's own precision, whether the case is memory- or compute-bound, the best possible time at
the ceiling, and the strategies that follows from it.

Each case is judged in its own precision, by the rule the judge times against
(`DevicePeaks.matmul_rate`): a float32 case with TF32 off against the float32 rate (or a third of
TF32's, where that is higher: fp32 accuracy on tensor cores), with TF32 on against TF32's, 16-bit
cases against their tensor-core rate. A float32 GEMM at 46.5 FLOP/byte is compute-bound against
float32's ridge (~17 FLOP/byte on an H100), though memory-bound against bf16's (~240).

Bytes and FLOPs come from the reference run on shape-only ('meta') tensors — nothing is allocated, so
a 1 GiB perf case costs nothing — with FLOPs from the spec's `flops`, else counted by
`torch.utils.flop_counter.FlopCounterMode`. They do not depend on the device; the ceilings do, and
are swapped in (`with_ceilings`) when the operator is first measured on a device.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.fsutil import now
from kernelgen.record.text import si
from kernelgen.nodynamo import without_dynamo
from kernelgen.spec import OperatorSpec, torch_dtype
from kernelgen.verify.results import DevicePeaks, RunRecord

# Below this share of written bytes a kernel is read-dominated and judged against the read ceiling.
READ_DOMINATED = 0.125
SMS_REFERENCE = 132  # an H100 / H200: rows fewer than two per SM leave the GPU half idle
LONG_ROW = 8192  # elements: beyond this a row no longer fits one program's registers comfortably


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Ceilings(_Model):
    """What the device can do at best: measured (kernelgen.verify.judge.peaks) or reference figures."""

    device_name: str
    measured: bool  # False: reference figures, not this machine's
    copy_gbps: float  # bytes read + written per second / 1e9
    read_gbps: float | None = None  # read-only streaming
    matmul_tflops: float | None = None  # bf16 tensor-core matmul
    matmul: dict[str, float] = Field(default_factory=dict)  # per precision: bfloat16, float16, float32 (TF32 off), tf32
    source: str

    def matmul_rate(self, dtype: str, *, tf32: bool) -> tuple[float | None, str]:
        """The matmul ceiling of `dtype` in this precision mode and its name, by the judge's own rule."""
        peaks = DevicePeaks(device_name=self.device_name, copy_gbps=self.copy_gbps, matmul_tflops=self.matmul_tflops,
                            matmul=self.matmul, measured_at="", torch_version="")
        return peaks.matmul_rate(dtype, tf32=tf32)

    def ridge(self, dtype: str, *, tf32: bool) -> float | None:
        """FLOPs per byte at which `dtype`'s matmul ceiling and the copy ceiling take equal time."""
        rate, _ = self.matmul_rate(dtype, tf32=tf32)
        return rate * 1e12 / (self.copy_gbps * 1e9) if rate else None


REFERENCE_CEILINGS = Ceilings(
    device_name="NVIDIA H200 (reference figures)", measured=False, copy_gbps=4250.0, read_gbps=4440.0,
    matmul_tflops=790.0, matmul={"bfloat16": 790.0, "float16": 790.0, "float32": 67.0, "tf32": 494.0},
    source=("reference figures, NOT this machine: NVIDIA H200 with PyTorch 2.11, measured 2026-11-22 — copy "
            "4.25 TB/s, a read-only reduction 4.44 TB/s, bf16 cuBLAS 8192^3 ~700-790 TFLOP/s (the top of the "
            "range is used, so best times are lower bounds; float16 taken as bf16's); float32 67 and TF32 494 "
            "TFLOP/s are NVIDIA's H200 datasheet figures (dense), not measured"),
)


class CaseAnalysis(_Model):
    case: int
    shapes: dict[str, list[int]]
    dtype: str
    read_bytes: int
    written_bytes: int | None = None  # None: the reference's outputs could not be derived
    flops: int | None = None
    flops_from: Literal["spec", "counted", "unknown"] = "unknown"
    intensity: float | None = None  # FLOPs per byte
    bound: Literal["memory", "compute", "unknown"] = "unknown"
    ceiling: str = ""  # which ceiling bounds it: "copy 4250 GB/s", "read 4440 GB/s", "matmul 51 TFLOP/s (FP32, TF32 off)"
    ridge: float | None = None  # FLOP/byte where this case's precision turns compute-bound
    best_us: float | None = None  # the time at the ceiling: no kernel can be faster

    @property
    def bytes(self) -> int | None:
        return None if self.written_bytes is None else self.read_bytes + self.written_bytes

    def cells(self) -> list[str]:
        shapes = " ".join(f"{k}{v}" for k, v in self.shapes.items())
        flops = "—" if not self.flops else si(self.flops, "FLOP") + (" (spec)" if self.flops_from == "spec" else "")
        if self.intensity is None:
            intensity = "—"
        elif self.intensity == 0 and self.flops_from == "counted":
            intensity = "≈0"  # no matmul-like FLOPs; elementwise ones are not counted
        else:
            intensity = f"{self.intensity:.3g}" if self.intensity < 1000 else f"{self.intensity:.0f}"
        best = "—" if self.best_us is None else _time(self.best_us)
        return [shapes, self.dtype, "—" if self.bytes is None else si(self.bytes, "B"), flops, intensity,
                self.bound, self.ceiling or "—", best]


class OperatorAnalysis(_Model):
    written_at: str
    ceilings: Ceilings
    tf32: bool = False  # the precision mode float32 cases were judged in (KERNELGEN_TF32, or the measured run's)
    cases: list[CaseAnalysis] = Field(default_factory=list)
    strategies: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    HEADERS: ClassVar[tuple[str, ...]] = ("perf case", "dtype", "min bytes", "FLOPs", "FLOP/byte", "bound", "ceiling",
                                          "best possible")


def _time(us: float) -> str:
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


# --- device-independent facts ------------------------------------------------------------------------
def _reference_fn(spec: OperatorSpec, source: str | None):  # noqa: ANN202 - the reference callable or None
    from kernelgen.spec.reference import PRELUDE, load_reference, run_as_module

    if source is None:
        return load_reference(spec) if spec.reference else None
    return run_as_module(PRELUDE + source, f"<baseline of {spec.name}>", f"kernelgen_baseline_{spec.name}").get(spec.name)


def _case_facts(spec: OperatorSpec, fn: Any, ci: int, case: dict[str, list[int]], dtype: str) -> tuple[CaseAnalysis, str]:
    """Bytes and FLOPs of one case x dtype; the second value is a note when something is unknown."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    args = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    c = CaseAnalysis(case=ci, shapes=case, dtype=dtype, read_bytes=sum(a.numel() * a.element_size() for a in args))
    if spec.flops:
        c.flops, c.flops_from = spec.flop_count(case), "spec"
    if fn is None:
        return c, "no reference to run: output bytes unknown"
    try:
        with FlopCounterMode(display=False) as counter:
            out = without_dynamo(lambda: fn(*args, **spec.param_defaults))
    except Exception as e:  # noqa: BLE001 - e.g. an op without a meta kernel: the analysis says so
        return c, f"the reference could not run on shape-only tensors ({type(e).__name__}: {str(e)[:120]}): output bytes unknown"
    outs = out if isinstance(out, (tuple, list)) else (out,)
    c.written_bytes = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
    if c.flops is None:
        c.flops, c.flops_from = int(counter.get_total_flops()), "counted"
    return c, ""


def _judge(c: CaseAnalysis, ceil: Ceilings, tf32: bool) -> CaseAnalysis:
    """Intensity, bound, ceiling and best time of one case against `ceil`, in the case's own precision
    (a new object)."""
    c = c.model_copy()  # the stored facts stay as they were
    if c.bytes is None:
        c.intensity, c.bound, c.ceiling, c.ridge, c.best_us = None, "unknown", "", None, None
        return c
    c.intensity = (c.flops or 0) / c.bytes if c.bytes else None
    read_only = c.written_bytes is not None and c.written_bytes <= READ_DOMINATED * c.read_bytes
    mem_gbps = ceil.read_gbps if read_only and ceil.read_gbps else ceil.copy_gbps
    mem_us, mem_label = c.bytes / (mem_gbps * 1e3), f"{'read' if mem_gbps != ceil.copy_gbps else 'copy'} {mem_gbps:.0f} GB/s"
    rate, precision = ceil.matmul_rate(c.dtype, tf32=tf32)
    comp_us = (c.flops or 0) / (rate * 1e6) if rate else 0.0
    c.ridge = rate * 1e12 / (mem_gbps * 1e9) if rate else None
    compute = c.ridge is not None and c.intensity is not None and c.intensity >= c.ridge
    c.bound = "compute" if compute else "memory"
    c.ceiling = f"matmul {rate:.0f} TFLOP/s ({precision})" if compute else mem_label
    c.best_us = max(mem_us, comp_us)
    return c


def _ridge_text(c: CaseAnalysis) -> str:
    return f"{c.ridge:.0f}" if c.ridge else "unknown"


# --- what to try ------------------------------------------------------------------------------------
def _row_facts(spec: OperatorSpec) -> tuple[int, int] | None:
    """(longest row, fewest rows) over the perf cases, for operators that work along the last dim."""
    if spec.category not in ("reduction", "softmax", "normalization"):
        return None
    first = spec.inputs[0].name
    rows = [(case[first][-1], math.prod(case[first][:-1]) or 1) for case in spec.effective_perf_cases]
    return max(r[0] for r in rows), min(r[1] for r in rows)


def strategies(spec: OperatorSpec, cases: list[CaseAnalysis], ceil: Ceilings) -> list[str]:
    """A few lines: what the analysis says to do, before any kernel is timed."""
    lines = []
    memory = [c for c in cases if c.bound == "memory"]
    compute = [c for c in cases if c.bound == "compute"]
    if memory:
        worst = max(memory, key=lambda c: c.intensity or 0)
        level = (f"intensity up to {worst.intensity:.3g} FLOP/byte against {worst.dtype}'s ridge of "
                 f"{_ridge_text(worst)} FLOP/byte" if worst.intensity else "no matmul FLOPs")
        lines.append(f"Memory-bound ({len(memory)} of {len(cases)} case(s); {level}): time is bytes / bandwidth, so "
                     "move every byte once — one pass that reads each "
                     "input once and writes each output once, the whole chain fused, no intermediate tensor in memory.")
        lines.append("Wide contiguous loads (16 bytes per thread: 4 fp32 or 8 fp16/bf16 elements), enough programs to keep "
                     "every SM streaming, and for 2-byte dtypes arithmetic in fp32 registers with one rounding at the store.")
    if compute:
        ridges = ", ".join(sorted({f"{c.dtype} {_ridge_text(c)}" for c in compute}))
        lines.append(f"Compute-bound ({len(compute)} case(s), intensity above the ridge of their precision: {ridges} "
                     "FLOP/byte): tensor-core tiles "
                     "(BLOCK_M/BLOCK_N 64-256, BLOCK_K 32-64, multiples of 16), a software-pipelined K loop "
                     "(num_stages 3-5), grouped program order for L2 reuse, fp32 accumulation and the epilogue applied in "
                     "registers before the single store.")
    rows = _row_facts(spec)
    if rows is not None:
        longest, fewest = rows
        if longest > LONG_ROW:
            what = ("online softmax: a running max and sum in one pass, then one normalising pass whose re-read mostly "
                    "hits L2" if spec.category == "softmax" else
                    "a loop over row blocks with a running accumulator (a split-row two-stage reduction when rows are few)")
            lines.append(f"Rows of up to {longest} elements do not fit one program's registers: {what}.")
        else:
            lines.append(f"Rows of at most {longest} elements fit one program: one program per row, the whole row in "
                         "registers (BLOCK = the next power of two), one read and one write.")
        if fewest < 2 * SMS_REFERENCE:
            lines.append(f"As few as {fewest} rows: under two per SM of a {SMS_REFERENCE}-SM GPU — split rows over several "
                         "programs (two-stage) or run persistent programs.")
    return lines


# --- the analysis, and its ceilings -------------------------------------------------------------------
def ceilings_from(peaks: DevicePeaks | None) -> Ceilings:
    if peaks is None:
        return REFERENCE_CEILINGS
    read = getattr(peaks, "read_gbps", None)  # being added to DevicePeaks; absent in older caches
    return Ceilings(device_name=peaks.device_name, measured=True, copy_gbps=peaks.copy_gbps, read_gbps=read,
                    matmul_tflops=peaks.matmul_tflops, matmul=dict(peaks.matmul),
                    source=f"measured on {peaks.device_name} on {peaks.measured_at} (torch {peaks.torch_version})")


def with_ceilings(analysis: OperatorAnalysis, spec: OperatorSpec, peaks: DevicePeaks | None,
                  tf32: bool | None = None) -> OperatorAnalysis:
    """The same bytes and FLOPs judged against another device's ceilings (no torch needed), float32
    cases in precision mode `tf32` (default: the one the analysis was judged in)."""
    ceil = ceilings_from(peaks)
    mode = analysis.tf32 if tf32 is None else tf32
    cases = [_judge(c, ceil, mode) for c in analysis.cases]
    notes = [n for n in analysis.notes if not n.startswith(_CEILING_NOTES)] + _ceiling_notes(ceil, cases, mode)
    return OperatorAnalysis(written_at=now(), ceilings=ceil, tf32=mode, cases=cases,
                            strategies=strategies(spec, cases, ceil), notes=notes)


_CEILING_NOTES = ("No device measured yet", "The matmul ceiling is bf16", "Each case is judged in its own precision")


def _ceiling_notes(ceil: Ceilings, cases: list[CaseAnalysis], tf32: bool) -> list[str]:
    notes = []
    if not ceil.measured:
        notes.append("No device measured yet: the ceilings below are reference figures, not this machine's. The analysis "
                     "is redone with measured ceilings when the operator is first timed on a GPU.")
    ridges = ", ".join(f"{d} {r}" for d, r in sorted({(c.dtype, round(c.ridge)) for c in cases if c.ridge}))
    if ridges:
        mode = "on (KERNELGEN_TF32=1)" if tf32 else "off (KERNELGEN_TF32 unset)"
        notes.append(f"Each case is judged in its own precision, TF32 {mode}: ridge points {ridges} FLOP/byte "
                     "(its dtype's matmul ceiling over its memory ceiling).")
    return notes


def analyse_operator(spec: OperatorSpec, peaks: DevicePeaks | None, *, reference: str | None = None,
                     tf32: bool | None = None) -> OperatorAnalysis:
    """Analyse every perf case x perf dtype. `reference`: a baseline's source when the spec has none;
    `tf32`: the precision mode of float32 cases (default: the user's, KERNELGEN_TF32)."""
    facts, notes = [], []
    try:
        fn = _reference_fn(spec, reference)
    except Exception as e:  # noqa: BLE001 - an LLM-written baseline may not even define cleanly
        fn = None
        notes.append(f"the reference could not be defined ({type(e).__name__}: {str(e)[:120]})")
    for ci, case in enumerate(spec.effective_perf_cases):
        for dtype in spec.effective_perf_dtypes:
            c, note = _case_facts(spec, fn, ci, case, dtype)
            facts.append(c)
            if note and note not in notes:
                notes.append(note)
    if any(c.flops_from == "counted" for c in facts):
        notes.append("FLOPs: the spec gives no `flops`, so they were counted by FlopCounterMode, which counts matmul, "
                     "convolution and attention only; elementwise arithmetic shows as — (it is far below the ridge).")
    if tf32 is None:
        from kernelgen.precision import tf32_enabled

        tf32 = tf32_enabled()
    return with_ceilings(OperatorAnalysis(written_at=now(), ceilings=REFERENCE_CEILINGS, cases=facts, notes=notes),
                         spec, peaks, tf32)


def latest_peaks(runs: Iterable[RunRecord | None]) -> DevicePeaks | None:
    """The most recent measured ceilings among these runs (they carry the device's cached peaks)."""
    found = None
    for run in runs:
        perf = run.performance if run is not None else None
        if perf is not None and perf.measured and perf.peaks is not None:
            found = perf.peaks
    return found


def latest_tf32(runs: Iterable[RunRecord | None]) -> bool | None:
    """The precision mode of the most recent measured run with a float32 case (None: none)."""
    found = None
    for run in runs:
        perf = run.performance if run is not None else None
        if perf is not None and perf.measured and perf.tf32 is not None and any(c.dtype == "float32" for c in perf.cases):
            found = perf.tf32
    return found


def needs_ceilings(analysis: OperatorAnalysis, peaks: DevicePeaks | None, tf32: bool | None = None) -> bool:
    """True when `peaks` are measured ceilings (or `tf32` a precision mode) the analysis was not judged
    against yet; also for an analysis written before each precision had its own rate."""
    if tf32 is not None and tf32 != analysis.tf32:
        return True
    if peaks is None:
        return False
    c = analysis.ceilings
    return (not c.measured or c.device_name != peaks.device_name or c.copy_gbps != peaks.copy_gbps
            or c.matmul != dict(peaks.matmul))
