"""Who writes kernels — the offline generator, an OpenAI-compatible LLM, or a recorded LLM run — chosen
in one place, for `kernelgen new` (the first kernel) and `kernelgen optimize` (the proposals).

Every choice is validated before anything is written: an operator the offline generator cannot
serve, or an LLM configuration with no endpoint, fails here with a UsageError (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

from kernelgen.errors import UsageError
from kernelgen.record.usage import TokenUsage

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.opdir import OperatorDir
    from kernelgen.optimize.proposal import Proposer
    from kernelgen.spec import OperatorSpec
    from kernelgen.verify.judge.session import WorkerSession

Backend = Literal["offline", "openai", "replay"]
BACKEND_CHOICES = ("auto", "offline", "openai", "replay")
Step = Callable[[str], None]


def resolve_backend(requested: str) -> Backend:
    """`auto` is openai only when an endpoint or key is configured; offline otherwise."""
    if requested not in BACKEND_CHOICES:
        raise UsageError(f"unknown backend {requested!r}; choose {', '.join(BACKEND_CHOICES)}")
    if requested == "auto":
        from kernelgen.llm.config import llm_configured

        return "openai" if llm_configured() else "offline"
    return requested  # type: ignore[return-value]


@dataclass
class FirstKernel:
    """Round 0's kernel, from whichever backend wrote it."""

    source: str
    backend: Backend
    note: str = ""
    baseline_source: str | None = None  # only when an LLM wrote the reference (description-only spec)
    tokens: TokenUsage = field(default_factory=TokenUsage)
    attempts: list[str] = field(default_factory=list)
    model_notes: list[str] = field(default_factory=list)  # an LLM's design note and stated causes -> RoundRecord.model_notes
    dispatch: list[dict[str, Any]] = field(default_factory=list)  # the offline kernel's dispatch table -> RoundRecord.dispatch
    checked: Any = None  # an LLM's repair loop's verdict (RunRecord) on these very bytes: `new` does not check them again


class KernelWriter(Protocol):
    backend: Backend

    def write(self, op: OperatorDir, device: DeviceInfo, on_step: Step) -> FirstKernel:
        """The first kernel, written into (and checked inside) the staged operator folder."""


@dataclass
class OfflineWriter:
    """The offline generator routes the spec at construction -- one trace, every family's examine --
    so an operator outside its families is refused before `kernelgen new` writes anything; write()
    renders round 0's file from that route, once."""

    spec: OperatorSpec
    backend: Backend = "offline"

    def __post_init__(self) -> None:
        from kernelgen.offline import route

        self._routed = route(self.spec)

    def write(self, op: OperatorDir, device: DeviceInfo, on_step: Step) -> FirstKernel:
        from kernelgen.devices import device_facts

        # round 0 from the analysis: each perf case's algorithm for this device's SMs (132 assumed on the interpreter)
        kern = self._routed.first_kernel(None if device.interpreter else device_facts(device).sm_count)
        return FirstKernel(source=kern.source, backend="offline", note=kern.summary,
                           dispatch=[e.model_dump() for e in kern.dispatch])


@dataclass
class LLMWriter:
    setup: Any  # kernelgen.llm.setup.LLMSetup, validated before anything is written
    backend: Backend = "openai"
    transcript: Any = None  # kernelgen.llm.transcript.Transcript: where `new` keeps the exchanges as they happen
    earlier: Any = None  # kernelgen.llm.earlier.EarlierAttempts: a failed round 0 this run continues from

    def write(self, op: OperatorDir, device: DeviceInfo, on_step: Step) -> FirstKernel:
        from kernelgen.llm.generate import generate

        got = generate(self.setup, op, device, on_step=on_step, transcript=self.transcript, earlier=self.earlier)
        return FirstKernel(source=got.source, backend=self.backend, note=got.note, baseline_source=got.baseline_source,
                           tokens=got.tokens, attempts=got.attempts, model_notes=got.model_notes, checked=got.checked)


def kernel_writer(requested: str, spec: OperatorSpec, llm_options: dict[str, Any] | None = None) -> KernelWriter:
    backend = resolve_backend(requested)
    if backend == "offline":
        if spec.reference is None:
            raise UsageError("the spec has no `reference`; the offline generator derives kernels from it",
                             hint="add a reference, or use --backend openai so the LLM writes the baseline too")
        return OfflineWriter(spec)
    from kernelgen.llm.setup import prepare

    return LLMWriter(prepare(backend, llm_options or {}), backend=backend)


def make_proposer(requested: str, op: OperatorDir, device: DeviceInfo, llm_options: dict[str, Any] | None = None) -> Proposer:
    """The proposer of optimization rounds: the offline planner, or an LLM (configuration checked now)."""
    backend = resolve_backend(requested)
    if backend == "offline":
        from kernelgen.devices import device_facts
        from kernelgen.optimize.planner import OfflinePlanner
        from kernelgen.optimize.remember import family_of, recalled

        if device.interpreter:  # no SM count for the few-rows rule, and nothing remembered (nothing is timed there)
            return OfflinePlanner(op.spec)
        facts = device_facts(device)  # the SM count feeds the few-rows rule (rows < 2 x SMs: split the row)
        return OfflinePlanner(op.spec, sm_count=facts.sm_count, remembered=recalled(op.spec, device, facts),
                              family=family_of(op.spec), device_name=facts.name)
    from kernelgen.llm.proposer import LLMProposer

    return LLMProposer.create(backend, op, device, llm_options or {})


@dataclass(frozen=True)
class OfflineVerdict:
    """Whether the offline generator can build a spec (for `kernelgen validate`): "yes" means its kernel
    was generated and, unless the caller said not to run it, matched the reference on the smallest test
    case in float32 in a sandboxed interpreter worker (kernelgen.verify.judge.firstrun)."""

    ok: bool
    detail: str  # the family it would use, or why it cannot
    ran: str = ""  # what the first run did ("" when it was not asked for)
    seconds: float = 0.0  # the first run's time (not the worker's start)

    def describe(self) -> str:
        if self.ok:
            how = self.ran or "generated, not run (--no-run)"
            return f"offline: yes ({self.detail}; {how})"
        return f"offline: no ({self.detail}); needs an LLM backend (--backend openai; `kernelgen config` shows the settings)"


def offline_verdict(spec: OperatorSpec, *, run: bool = True, worker: WorkerSession | None = None) -> OfflineVerdict:
    """Try the offline generator, as `kernelgen new --backend offline` would; with `run`, also run the
    kernel it writes once (in `worker`, or one started for it) before saying yes."""
    from kernelgen.offline import NotServed, first_kernel, generate_kernel

    if spec.reference is None:
        return OfflineVerdict(False, "the spec has no `reference` to derive a kernel from")
    try:
        kernel = first_kernel(spec) if run else generate_kernel(spec)  # first_kernel: what `new` writes
    except NotServed as e:
        return OfflineVerdict(False, f"does not support {e.what}")
    detail = kernel.summary or kernel.family
    if not run:
        return OfflineVerdict(True, detail)
    from kernelgen.verify.judge.firstrun import first_dtype, first_run_worker, run_first_case
    from kernelgen.verify.judge.judge import KernelSource

    if first_dtype(spec) is None:
        return OfflineVerdict(True, detail, ran="generated, not run: the CPU interpreter has no bfloat16 arithmetic")

    src = KernelSource(kernel.source, f"{spec.name}_triton.py", "offline")
    if worker is None:
        with first_run_worker() as own:
            result = run_first_case(spec, src, own)
    else:
        result = run_first_case(spec, src, worker)
    if not result.passed:
        return OfflineVerdict(False, f"the generated kernel failed its own check: {result.why} (run on {result.case})",
                              seconds=result.seconds)
    return OfflineVerdict(True, detail, ran=f"its kernel matched the reference on {result.case} in the CPU interpreter, "
                                            f"{result.seconds:.1f} s{cpu_build(spec, result.seconds)}", seconds=result.seconds)


CPU_BUILD_S = 600  # what `kernelgen new` on a 2-core CPU should take at most (issue 38)


def cpu_build(spec: OperatorSpec, seconds: float) -> str:
    """What `kernelgen new` on this CPU costs, from the one run's `seconds`: its accuracy check makes
    3 calls per seed of every planned check (42 for a KernelBench spec), each about that long. Measured
    (2026-11-27, 2 shared cores): level 2's 46 ran once in 14.2 s and built in 571 s, level 1's 41 in
    4.2 s and 171 s; under a few seconds a run, the build's fixed cost (~8 s) dominates."""
    from kernelgen.verify.judge.accuracy import COMPARED_CALLS, DEFAULT_SEEDS
    from kernelgen.verify.judge.inputs import plan_checks

    calls = sum(len(c.seeds) * COMPARED_CALLS for c in plan_checks(spec, seeds=DEFAULT_SEEDS, base=0, interpreter=True).cases)
    total = calls * seconds
    about = "under a minute" if total < 60 else f"~{total / 60:.0f} min"
    said = f"; `kernelgen new` on the CPU makes {calls} calls like it, {about}"
    return said if total <= CPU_BUILD_S else said + f": over the {CPU_BUILD_S // 60} min a CPU build should take, build it on a GPU"
