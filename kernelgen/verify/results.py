"""Typed results: what the judge decided about a candidate (accuracy, timing), as it is stored in
state.json, shown in the log and the terminal, and written by `kernelgen bench --json`.

The judge builds these in its own process from what it compared and timed itself; nothing here is
filled in by a candidate. Every text that came from a candidate (an exception, printed output) is
scrubbed of secrets before it is put into one (kernelgen.verify.judge.scrub)."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.precision import PrecisionPolicy


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Violation(_Model):
    """One broken rule of the trust model, under a stable name (see kernelgen.verify.judge.staticcheck / guard)."""

    code: str  # e.g. "torch-compute-in-wrapper", "no-triton-launch", "unwritten-output"
    message: str


CallKind = Literal["guarded", "second-fill", "plain", "stale-probe", "perf-shape"]


class CaseCheck(_Model):
    """One comparison of candidate against baseline: a case x dtype x seed x kind of call."""

    case: int  # the spec's test case it is, or derives from
    variant: str = ""  # "" for the spec's case; strided | transposed | sliced | random-shape | scaled x16 ...
    shapes: dict[str, list[int]]
    dtype: str
    seed: int
    call: CallKind = "guarded"
    passed: bool
    output: str = ""  # which output, for multi-output ops
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatches: int = 0
    total: int = 0
    nonfinite: int = 0  # NaN/Inf where the baseline is finite (among the mismatches)
    unwritten: int = 0  # still holding the guard's poison: never written by the kernel
    unwritten_first: list[int] | None = None  # index of the first element never written
    unwritten_last: list[int] | None = None
    unwritten_pattern: str = ""  # rows / columns / tail / scattered, in words
    worst_index: list[int] | None = None
    got: float | None = None
    expected: float | None = None  # eager's value, or the truth's where one ran (`oracle`)
    # Against the reference run in float64 (kernelgen.verify.judge.oracle): its precision ("" where
    # none ran: an integer output, or no higher precision), the kernel's and eager's errors against
    # it, and which rule passed: "tolerance", or "eager-multiple" (no worse than m x eager's error).
    oracle: str = ""
    truth_max_err: float | None = None
    eager_max_err: float | None = None
    truth_rmse: float | None = None
    eager_rmse: float | None = None
    rule: str = ""
    eager: float | None = None  # eager's value at the worst index, beside the truth's
    decides: bool = True  # a check of a dtype that decides the verdict (the spec's primary_dtypes)
    message: str = ""

    @property
    def kind(self) -> str:
        """The kind of check: the spec's case, or the generated variant."""
        return self.variant or "test case"

    @property
    def label(self) -> str:
        shapes = " ".join(f"{k}{v}" for k, v in self.shapes.items())
        extra = f" {self.variant}" if self.variant else ""
        return f"case {self.case}{extra} {shapes} {self.dtype} seed {self.seed} ({self.call})"

    def same_failure(self, other: "CaseCheck") -> bool:
        """The same failure seen by another call of the same check (guarded, second fill, plain)."""
        return (self.case, self.variant, self.dtype, self.seed, self.message) == \
            (other.case, other.variant, other.dtype, other.seed, other.message)


class AccuracyResult(_Model):
    op: str
    kernel: str  # the kernel file checked, as named by the caller
    kernel_sha256: str = ""  # of the exact bytes that were checked (and may be promoted), with the runtime's below
    runtime: list[str] = []  # `<module> <sha256>` of each KernelGen host runtime module the kernel imports
    device: str
    interpreter: bool
    compiled: bool  # imported and defines the entry function
    correct: bool  # every expected check of a deciding dtype ran and passed, and no violation
    seeds: list[int]
    # Every input of the run is drawn from this (the kernel's and the spec's hash, unless given):
    # the same kernel gets the same verdict, and `kernelgen test OP_DIR --seed N` replays a run.
    input_seed_base: int | None = None
    checks_expected: int = 0  # planned by the judge before the first call; fewer done is a failure
    deciding_dtypes: list[str] = Field(default_factory=list)  # whose checks decide (empty: every dtype)
    checks_deciding: int = 0  # of checks_expected, those of a deciding dtype
    checks: list[CaseCheck] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # what could not be checked here, and why
    reported: list[str] = Field(default_factory=list)  # what a dtype that does not decide got wrong
    sandbox: list[str] = Field(default_factory=list)  # what the worker's sandbox could not enforce here
    error: str | None = None  # an exception raised by the candidate, with its last frames
    precision: PrecisionPolicy | None = None  # what eager ran under, the kernel's error measured against (None: older runs)

    @property
    def failed_checks(self) -> list[CaseCheck]:
        return [c for c in self.checks if not c.passed]

    def failure_lines(self, limit: int = 5) -> list[str]:
        """One line per failing check: its kind, case, input shapes, dtype and seed, the calls that saw
        it (guarded, second-fill, plain say the same thing: once) and what was wrong."""
        groups: list[tuple[CaseCheck, list[str]]] = []
        for c in self.failed_checks:
            same = next((g for g in groups if g[0].same_failure(c)), None)
            if same is None:
                groups.append((c, [c.call]))
            else:
                same[1].append(c.call)
        lines = []
        for c, calls in groups[:limit]:
            shapes = " ".join(f"{k}{v}" for k, v in c.shapes.items())
            tag = "" if c.decides else " [reported; this dtype does not decide]"
            lines.append(f"{c.kind} (case {c.case}) {shapes} {c.dtype} seed {c.seed} ({', '.join(calls)}){tag}: {c.message}")
        if len(groups) > limit:
            lines.append(f"... and {len(groups) - limit} more failing checks")
        return lines

    def truth_errors(self) -> str:
        """Per dtype, the largest error against the float64 truth of the kernel and of eager, over every
        check that had one: how much room the kernel leaves, where it passed."""
        parts = []
        for dtype in dict.fromkeys(c.dtype for c in self.checks if c.truth_max_err is not None):
            mine = [c for c in self.checks if c.dtype == dtype and c.truth_max_err is not None]
            kernel = max(c.truth_max_err or 0.0 for c in mine)
            eager = max(c.eager_max_err or 0.0 for c in mine)
            parts.append(f"{dtype} {kernel:.3g} (eager {eager:.3g})")
        return "; ".join(parts)

    def summary(self) -> str:
        deciding = [c for c in self.checks if c.decides]
        n_ok = sum(c.passed for c in deciding)
        head = f"{n_ok}/{self.checks_deciding or self.checks_expected or len(deciding)} checks passed"
        if self.deciding_dtypes:
            head = f"{n_ok}/{self.checks_deciding} {'/'.join(self.deciding_dtypes)} checks passed (they decide)"
            others = [c for c in self.checks if not c.decides]
            n_other = self.checks_expected - self.checks_deciding
            if n_other:
                head += f"; other dtypes {sum(c.passed for c in others)}/{n_other} (reported beside them)"
        if self.violations:
            head += "; violations: " + ", ".join(sorted({v.code for v in self.violations}))
        if self.error:
            first, last = self.error.strip().splitlines()[0], self.error.strip().splitlines()[-1]
            where = first.split("): ")[0] + ")" if "): " in first and first != last else ""
            head += f"; error{' in ' + where if where else ''}: {last}"
        if self.input_seed_base is not None:
            head += f"; inputs from seed {self.input_seed_base} (--seed {self.input_seed_base} replays them)"
        return head


class DevicePeaks(_Model):
    """A device's measured ceilings (not datasheet figures; kernelgen.verify.judge.peaks)."""

    schema_version: int = 1  # what was measured (kernelgen.verify.judge.peaks.PEAKS_SCHEMA); a cache of another is measured again
    device_name: str
    copy_gbps: float  # bytes read + written per second / 1e9, large device-to-device copy
    read_gbps: float | None = None  # bytes read per second / 1e9: the best of several read-only kernels
    read_by_kernel: dict[str, float] = Field(default_factory=dict)  # each read-only kernel's GB/s, the best is read_gbps
    matmul_tflops: float | None = None  # large bf16 cuBLAS matmul
    # TFLOP/s of large cuBLAS matmuls per precision: "bfloat16", "float16", "float32" (TF32 off), "tf32"
    matmul: dict[str, float] = Field(default_factory=dict)
    measured_at: str  # ISO date
    torch_version: str

    def matmul_rate(self, dtype: str, *, tf32: bool) -> tuple[float | None, str]:
        """The matmul ceiling for `dtype` in this precision mode, and its name: float32 against the
        FP32 rate (or TF32's, when TF32 is on), 16-bit types against their tensor-core rate; a dtype
        with no rate of its own against the fastest measured one (never an honest kernel invalid)."""
        key = "tf32" if dtype == "float32" and tf32 else dtype
        rates = dict(self.matmul) or ({"bfloat16": self.matmul_tflops} if self.matmul_tflops else {})
        if key == "float32" and rates.get("tf32") and rates["tf32"] / 3 > rates.get("float32", 0):
            # fp32 accuracy on tensor cores: three TF32 products per multiply-add (tf32x3, what cuBLAS
            # calls FP32 emulation); faster than that, a kernel multiplies in TF32 itself
            return rates["tf32"] / 3, "tf32x3: a third of the TF32 rate, above FP32's; TF32 off"
        if key in rates:
            return rates[key], {"float32": "FP32, TF32 off", "tf32": "TF32"}.get(key, key)
        if not rates:
            return None, ""
        best = max(rates, key=lambda k: rates[k])
        return rates[best], f"{best}: the fastest measured, none for {dtype}"


class KernelTiming(_Model):
    ms: float  # the mean of the faster half of the repetitions (kernelgen.verify.samples.summarize)
    ms_min: float
    ms_max: float
    spread: float  # (p80 - p20) / ms: the run-to-run noise this number carries
    reps: int = 0
    ci: float | None = None  # relative half-width of the median's 95% confidence interval (what timing stops on)


class PerfCase(_Model):
    case: int
    shapes: dict[str, list[int]]
    dtype: str
    bytes: int  # minimum bytes: every input read once, every output written once
    flops: int | None = None
    kernel: KernelTiming | None = None
    compare: KernelTiming | None = None  # the current best, timed in the same process (optimize)
    graph: KernelTiming | None = None  # the kernel's plan captured in a CUDA graph and timed (bench --graph, GPU)
    eager: KernelTiming | None = None
    compiled: KernelTiming | None = None  # torch.compile of the reference
    gbps: float | None = None
    tflops: float | None = None
    frac_peak: float | None = None  # of the right ceiling: read, copy (read + write) or matmul
    bound: Literal["memory", "compute", "unknown"] = "unknown"
    ceiling: Literal["read", "copy", "matmul", ""] = ""  # which measured ceiling frac_peak is against
    precision: str = ""  # which matmul rate, for a compute-bound case: "FP32, TF32 off", "TF32", "bfloat16", ...
    flops_source: Literal["spec", "counted", ""] = ""  # the spec's `flops`, or PyTorch's flop counter on the reference
    peers: dict[str, KernelTiming] = Field(default_factory=dict)  # peer libraries (Liger-Kernel, FlagGems) on the same inputs
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    speedup_vs_compare: float | None = None  # the median over interleaved rounds of best / candidate
    pair_noise: float | None = None  # (max - min) / median of those per-round ratios
    valid: bool = True
    invalid_reason: str = ""
    spot_check: str = ""  # "" when the output at this shape matched the reference
    # The violations that concern this case (timed-output-wrong, timed-call-no-launch, ... and those found on
    # import, which concern every case): any one refuses its timing, which is then shown as no number.
    violations: list[Violation] = Field(default_factory=list)
    # Host time to issue one call (Python wrapper + launch), no device sync: what dominates at
    # small shapes, where the kernel itself takes a few microseconds. The kernel's is the judge's
    # clock around the worker's calls (the worker's own figure is not used).
    host_us: float | None = None
    eager_host_us: float | None = None
    launches_per_call: float | None = None  # Triton launches per timed call: the worker's own count, a claim
    timing_check: str = ""  # the judge's clock against the device time the worker claimed (kernelgen.verify.judge.wallclock)
    # When eager, torch.compile and the peers were timed, where they came from the per-user cache
    # (kernelgen.verify.judge.baselines); "" when they were timed in this run.
    baselines_measured_at: str = ""

    @property
    def label(self) -> str:
        return "case {} {} {}".format(self.case, " ".join(f"{k}{v}" for k, v in self.shapes.items()), self.dtype)

    @property
    def timing_stands(self) -> bool:
        """Whether this case's timing counts: valid (right at the perf shape, within its ceiling) and
        concerned by no violation."""
        return self.valid and not self.violations

    def verdict(self) -> str:
        """'ok', or what refused this case's timing: each violation's code, an invalid case's reason."""
        parts = list(dict.fromkeys(v.code for v in self.violations))
        if not self.valid:
            parts.append(f"INVALID: {self.invalid_reason}")
        return "; ".join(parts) if parts else "ok"

    # The columns of every perf table (terminal and log), so both show the same numbers.
    CELL_HEADERS: ClassVar[tuple[str, ...]] = ("kernel ms", "eager ms", "compile ms", "x eager", "x compile", "GB/s", "TFLOP/s", "% of peak")

    def cells(self) -> list[str]:
        # Significant digits, not fixed decimals: an interpreter dry run's x0.000377 must not read
        # as 0.00, and a GPU's 3,456 GB/s needs no decimals.
        def fmt(x: float | None, digits: int) -> str:
            if x is None:
                return "—"
            if x == 0 or not math.isfinite(x):
                return format(x, "g")
            if abs(x) >= 10 ** (digits - 1):
                return f"{x:.0f}"
            return f"{x:.{digits - 1 - math.floor(math.log10(abs(x)))}f}"

        pct = "—" if self.frac_peak is None else f"{100 * self.frac_peak:.0f}%"
        cells = [
            fmt(self.kernel and self.kernel.ms, 4), fmt(self.eager and self.eager.ms, 4),
            fmt(self.compiled and self.compiled.ms, 4), fmt(self.speedup_eager, 3),
            fmt(self.speedup_compile, 3), fmt(self.gbps, 3), fmt(self.tflops, 3), pct,
        ]
        if not self.timing_stands:  # a refused timing shows no number: only eager's and torch.compile's stay
            cells = [c if i in (1, 2) else "—" for i, c in enumerate(cells)]
        return cells

    def facts(self) -> list[str]:
        """The measured numbers, in the one wording the screen, the log's diagnosis and the LLM
        prompt share. A refused timing has none: only what refused it."""
        if not self.timing_stands:
            return [f"timing refused: {self.verdict()}"]
        parts = []
        if self.kernel:
            parts.append(f"{self.kernel.ms:.4g} ms (spread {100 * self.kernel.spread:.0f}%)")
        if self.graph:
            parts.append(f"{self.graph.ms:.4g} ms as a CUDA graph")
        if self.gbps is not None:
            parts.append(f"{self.gbps:.0f} GB/s")
        if self.tflops is not None:
            parts.append(f"{self.tflops:.1f} TFLOP/s")
        if self.frac_peak is not None:
            rate = f" ({self.precision} matmul rate)" if self.bound == "compute" and self.precision else ""
            parts.append(f"{100 * self.frac_peak:.0f}% of the {self.bound}-bound ceiling{rate}")
        if self.speedup_eager is not None:
            parts.append(f"x{self.speedup_eager:.2f} vs eager")
        if self.speedup_compile is not None:
            parts.append(f"x{self.speedup_compile:.2f} vs torch.compile")
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
    tf32: bool | None = None  # float32 matmuls may use TF32: eager, torch.compile and the kernel alike (precision.matmul)
    precision: PrecisionPolicy | None = None  # the policy eager, torch.compile and the kernel ran under (None: older runs)
    kernel_sha256: str = ""
    cases: list[PerfCase] = Field(default_factory=list)
    violations: list[Violation] = Field(default_factory=list)
    sandbox: list[str] = Field(default_factory=list)
    error: str | None = None
    # What it was measured under besides the fields above (kernelgen.verify.judge.measurebasis): the tool
    # that took it, and the baselines timed (or taken from the cache) beside the kernel: eager, compile, peers.
    tool: str = ""
    baselines: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and not self.violations and all(c.valid for c in self.cases)

    def geomean(self, attr: str) -> float | None:
        """Over every case, or None where one has no such number (or its timing was refused)."""
        vals = [getattr(c, attr) for c in self.cases if c.timing_stands and getattr(c, attr)]
        if not vals or len(vals) != len(self.cases):
            return None
        return math.exp(sum(math.log(v) for v in vals) / len(vals))


RunStatus = Literal["ok", "failed", "timeout", "crash", "error"]


class RunRecord(_Model):
    """One run of the judge over a candidate: its verdict, or why there is none (the worker timed out
    or crashed)."""

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
            lines += self.accuracy.failure_lines(5)
        if self.performance and self.performance.error:
            lines.append(self.performance.error)
        if self.status == "error" and not lines:
            lines.append(self.stderr_tail)
        return "\n".join(lines) if lines else "ok"
