"""Typed results that cross the process boundary: the child harness writes them as JSON, the parent
validates them here (an untrusted candidate shares the child's process, so the parent never takes
a result it cannot parse at face value)."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Violation(_Model):
    """One broken rule of the trust model, under a stable name (see kernelgen.verify.staticcheck / guard)."""

    code: str  # e.g. "torch-compute-in-wrapper", "no-triton-launch", "unwritten-output"
    message: str


class CaseCheck(_Model):
    """One comparison of candidate against baseline: a test case × dtype × seed × call order."""

    case: int
    shapes: dict[str, list[int]]
    dtype: str
    seed: int
    order: Literal["candidate-first", "baseline-first"]
    passed: bool
    output: str = ""  # which output, for multi-output ops
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int = 0
    total: int = 0
    nonfinite: int = 0  # NaN/Inf where the baseline is finite (among the mismatches)
    unwritten: int = 0  # still holding the guard's poison: never written by the kernel
    # Where the unwritten elements lie (the verify engineer's fields, declared here so the LLM path can
    # read them): first and last unwritten index, and the pattern they form ("rows", "blocks", "tail").
    unwritten_first: list[int] | None = None
    unwritten_last: list[int] | None = None
    unwritten_pattern: str = ""  # "" when none
    worst_index: list[int] | None = None
    got: float | None = None
    expected: float | None = None
    message: str = ""


class AccuracyResult(_Model):
    op: str
    kernel: str  # path of the kernel file checked
    device: str
    interpreter: bool
    compiled: bool  # imported and defines the entry function
    correct: bool  # every check passed and no violation
    seeds: list[int]
    input_seed_base: int | None = None  # random per run: inputs cannot be predicted at import time
    checks: list[CaseCheck] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    error: str | None = None  # an exception raised by the candidate, with its last frames

    @property
    def failed_checks(self) -> list[CaseCheck]:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        n_ok = sum(c.passed for c in self.checks)
        head = f"{n_ok}/{len(self.checks)} checks passed"
        if self.violations:
            head += "; violations: " + ", ".join(sorted({v.code for v in self.violations}))
        if self.error:
            head += f"; error: {self.error.splitlines()[-1] if self.error else ''}"
        return head


class DevicePeaks(_Model):
    """A device's measured ceilings (not datasheet figures)."""

    device_name: str
    copy_gbps: float  # bytes read + written per second / 1e9, large device-to-device copy
    matmul_tflops: float | None = None  # large bf16 cuBLAS matmul
    measured_at: str  # ISO date
    torch_version: str


class KernelTiming(_Model):
    ms: float  # median
    ms_min: float
    ms_max: float
    spread: float  # (p80 - p20) / median: the run-to-run noise this number carries


class PerfCase(_Model):
    case: int
    shapes: dict[str, list[int]]
    dtype: str
    bytes: int  # minimum bytes: every input read once, every output written once
    flops: int | None = None
    kernel: KernelTiming | None = None
    compare: KernelTiming | None = None  # the current best, timed in the same process (optimize)
    eager: KernelTiming | None = None
    compiled: KernelTiming | None = None  # torch.compile of the reference
    gbps: float | None = None
    tflops: float | None = None
    frac_peak: float | None = None  # of the copy bandwidth (memory-bound) or matmul peak
    bound: Literal["memory", "compute", "unknown"] = "unknown"
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    speedup_vs_compare: float | None = None
    valid: bool = True
    invalid_reason: str = ""
    spot_check: str = ""  # "" when the output at this shape matched the reference
    # Host time to issue one call (Python wrapper + launch), no device sync: what dominates at
    # small shapes, where the kernel itself takes a few microseconds.
    host_us: float | None = None
    eager_host_us: float | None = None

    @property
    def label(self) -> str:
        return "case {} {} {}".format(self.case, " ".join(f"{k}{v}" for k, v in self.shapes.items()), self.dtype)

    # The columns of every perf table (terminal and log), so both show the same numbers.
    CELL_HEADERS: ClassVar[tuple[str, ...]] = ("kernel ms", "eager ms", "compile ms", "x eager", "x compile", "GB/s", "TFLOP/s", "% of peak")

    def cells(self) -> list[str]:
        def fmt(x: float | None, spec: str) -> str:
            return "—" if x is None else format(x, spec)

        pct = fmt(None if self.frac_peak is None else 100 * self.frac_peak, ".0f")
        return [
            fmt(self.kernel and self.kernel.ms, ".4f"), fmt(self.eager and self.eager.ms, ".4f"),
            fmt(self.compiled and self.compiled.ms, ".4f"), fmt(self.speedup_eager, ".2f"),
            fmt(self.speedup_compile, ".2f"), fmt(self.gbps, ".0f"), fmt(self.tflops, ".1f"),
            pct if pct == "—" else pct + "%",
        ]

    def facts(self) -> list[str]:
        """The measured numbers, in the one wording the screen, the log's diagnosis and the LLM
        prompt share."""
        parts = []
        if self.kernel:
            parts.append(f"{self.kernel.ms:.4g} ms (spread {100 * self.kernel.spread:.0f}%)")
        if self.gbps is not None:
            parts.append(f"{self.gbps:.0f} GB/s")
        if self.tflops is not None:
            parts.append(f"{self.tflops:.1f} TFLOP/s")
        if self.frac_peak is not None:
            parts.append(f"{100 * self.frac_peak:.0f}% of the {self.bound}-bound ceiling")
        if self.speedup_eager is not None:
            parts.append(f"x{self.speedup_eager:.2f} vs eager")
        if self.speedup_compile is not None:
            parts.append(f"x{self.speedup_compile:.2f} vs torch.compile")
        if not self.valid:
            parts.append(f"INVALID: {self.invalid_reason}")
        return parts


class PerformanceResult(_Model):
    op: str
    kernel: str
    device: str
    device_name: str
    interpreter: bool
    measured: bool  # False under the interpreter: the numbers are not measurements
    note: str = ""
    torch_version: str
    triton_version: str
    peaks: DevicePeaks | None = None
    cases: list[PerfCase] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.violations and all(c.valid for c in self.cases)

    def geomean(self, attr: str) -> float | None:
        vals = [getattr(c, attr) for c in self.cases if getattr(c, attr)]
        if not vals or len(vals) != len(self.cases):
            return None
        return math.exp(sum(math.log(v) for v in vals) / len(vals))


RunStatus = Literal["ok", "failed", "timeout", "crash", "error"]


class RunRecord(_Model):
    """What the isolated runner saw of one child process."""

    kind: Literal["accuracy", "performance"]
    status: RunStatus  # ok: exit 0 with a result; failed: a result that says no; timeout/crash: no result
    exit_code: int | None
    signal: str | None = None
    duration_s: float
    stderr_tail: str = ""
    accuracy: AccuracyResult | None = None
    performance: PerformanceResult | None = None
    violations: list[Violation] = Field(default_factory=list)  # found before running (static checks)

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    def all_violations(self) -> list[Violation]:
        found = list(self.violations)
        if self.accuracy:
            found += self.accuracy.violations
        if self.performance:
            found += self.performance.violations
        return found

    def describe(self) -> str:
        """A few lines a person (or a model, in a repair prompt) can act on."""
        if self.status == "timeout":
            return f"timed out after {self.duration_s:.0f} s (the process group was killed)"
        if self.status == "crash":
            sig = f" ({self.signal})" if self.signal else ""
            return f"crashed with exit status {self.exit_code}{sig}\n{self.stderr_tail}"
        lines = [f"{v.code}: {v.message}" for v in self.all_violations()]
        if self.accuracy:
            if self.accuracy.error:
                lines.append(self.accuracy.error)
            for c in self.accuracy.failed_checks[:5]:
                lines.append(c.message)
        if self.performance and self.performance.error:
            lines.append(self.performance.error)
        if self.status == "error" and not lines:
            lines.append(self.stderr_tail)
        return "\n".join(lines) if lines else "ok"
