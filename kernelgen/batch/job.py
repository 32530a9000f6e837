"""One operator's job, run by a worker (a local worker process or a Ray task): `kernelgen new`, then
`kernelgen optimize`, then `kernelgen bench --json` as the final measurement.

Each step is the CLI in a subprocess (kernelgen.batch.step), so a batch gets exactly what a user
typing the commands gets, and this module is the one place that knows those commands. Exit codes
carry the outcome (0 done, 1 the kernel failed, 2 the input is wrong); a step whose output says the
device ran out of memory makes the job `memory`, whatever its exit code, so that memory never counts
as a wrong kernel (the local engine retries it alone: kernelgen.batch.local).

`new` measures round 0 (eager, torch.compile, the peer libraries: what `bench` would time) in the
same judge that checked it, where the kernel is compiled already. `optimize` diagnoses from that
record instead of timing round 0 again (its basis, kernelgen.verify.judge.measurebasis, is this
device, tool, precision policy and perf cases), and a kept round's record carries round 0's baseline
timings beside its own. So the best round's record is the final measurement wherever its basis is
still this batch's and it holds every baseline; `bench` runs only where it does not (a folder from an
older KernelGen, a round re-timed without torch.compile). On an H100 these two repeats cost 25-28 s
and 22-37 s per KernelBench problem (2026-11-27)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.batch.ahead import Ahead, in_background
from kernelgen.batch.basis import JobBasis, save_basis, spec_data
from kernelgen.batch.outcome import bench_reason, out_of_memory, why
from kernelgen.batch.resume import ENDED, FINAL_FILE, JobResult, load_job, phase_of, save_job
from kernelgen.batch.step import OUT_OF_MEMORY, Step, StepOutput, run_step
from kernelgen.errors import KernelGenError
from kernelgen.fsutil import atomic_write, now
from kernelgen.record.state import load_state


class AheadOf(BaseModel):
    """An operator still in the queue, as much of it as timing its baselines ahead needs."""

    model_config = ConfigDict(extra="forbid")

    name: str
    spec_file: str
    log_file: str


class JobRequest(BaseModel):
    """What a worker needs to run one operator; crosses process and host boundaries as JSON."""

    model_config = ConfigDict(extra="forbid")

    name: str
    spec_file: str  # where this worker reads the spec
    spec_label: str  # the spec as the user named it, for messages
    out_root: str  # parent folder of the operator folder
    log_file: str
    rounds: int | None = None
    backend: str = "auto"
    device: str = "auto"
    options: list[str] = Field(default_factory=list)  # LLM flags, as `new` and `optimize` take them
    step_timeout_s: float = 3600.0
    spec_data: dict[str, Any] | None = None  # the spec as data (the driver derived it once); None: read here
    basis: JobBasis | None = None  # what else decides the result (kernelgen.batch.basis); None: not compared
    need_bytes: int | None = None  # its estimated peak GPU memory (kernelgen.batch.footprint)
    attempt: int = 1  # 2: run again alone after running out of memory beside other operators
    ahead: bool = False  # time its baselines ahead, beside `new` (kernelgen.batch.ahead)
    ahead_bytes: int | None = None  # what that takes on the GPU (kernelgen.batch.footprint.ahead_bytes)
    ahead_next: AheadOf | None = None  # an operator still queued whose baselines this job times ahead, after its own
    derive_s: float = 0.0  # the driver's seconds on its spec (derived from a KernelBench file, memory estimated)


def _round0_outcome(op_dir: Path) -> str:
    try:
        r0 = next(r for r in load_state(op_dir).rounds if r.round == 0)
    except (OSError, ValueError, StopIteration):
        return ""
    return r0.outcome


def _llm_flags(req: JobRequest) -> list[str]:
    return ["--backend", req.backend, "--device", req.device, *req.options]


def request_spec(req: JobRequest) -> dict[str, Any]:
    """The spec as data: as the driver sent it, else read (derived from a KernelBench file) here."""
    if req.spec_data is not None:
        return req.spec_data
    from kernelgen.spec.given import read_spec

    return spec_data(read_spec(Path(req.spec_file), run_reference=False).spec)


def _final_from_best(op_dir: Path, basis: JobBasis | None) -> bool:
    """The best round's measurement as the final one, where it is what `kernelgen bench` would take now:
    taken with this KernelGen on this device, precision policy and perf cases, with every baseline
    bench times (round 0's by `new`; a kept round's carries round 0's eager, torch.compile and peer
    timings, taken on the same inputs). False (bench runs) otherwise, or without a basis to compare."""
    from kernelgen.spec.load import load_spec
    from kernelgen.verify.judge.measurebasis import changes, final_baselines

    if basis is None:
        return False
    try:
        state = load_state(op_dir)
        spec = load_spec(op_dir / "spec.yaml", run_reference=False)
    except (OSError, ValueError, KernelGenError):
        return False
    best = state.best()
    perf = best.performance.performance if best is not None and best.performance is not None else None
    kind, _, name = basis.device.partition(":")
    kind = kind.strip()
    interpreter = kind == "cpu"
    if perf is None or changes(perf, spec, kind=kind, interpreter=interpreter, name=name.strip() if name else None,
                               baselines=final_baselines(interpreter)):
        return False
    if basis.tool != perf.tool:  # the batch's own reading of the tool (kernelgen.batch.basis.tool_identity)
        return False
    assert best is not None and best.performance is not None
    atomic_write(op_dir / FINAL_FILE, best.performance.model_dump_json(indent=2))
    return True


def _measured_outcome(op_dir: Path) -> tuple[str, str]:
    """(status, reason) of the final measurement in FINAL_FILE, written from the best round's."""
    from kernelgen.verify.results import RunRecord

    record = RunRecord.model_validate_json((op_dir / FINAL_FILE).read_text(encoding="utf-8"))
    if record.passed:
        return "finished", ""
    said = record.stderr_tail or ""
    if OUT_OF_MEMORY.search(said):
        return "memory", out_of_memory("new", next(ln for ln in said.splitlines() if OUT_OF_MEMORY.search(ln)))
    return "failed", bench_reason(op_dir, None)


def run_job(req: JobRequest, target: str = "", on_step: Step = lambda s: None, env: dict[str, str] | None = None) -> JobResult:
    """Run what is left of one operator; finished operators come back as they were, marked skipped.
    The steps run in `env` (a Ray task pins them there), else in this process's environment."""
    op_dir = Path(req.out_root) / req.name
    phase, found = phase_of(op_dir, request_spec(req), req.basis, req.rounds)
    if phase == "done":
        stored = load_job(op_dir)
        assert stored is not None
        return stored.model_copy(update={"skipped": True})
    result = JobResult(name=req.name, spec=req.spec_label, status="error", rounds=req.rounds, target=target,
                       started_at=now(), resumed=found, attempts=req.attempt, derive_s=req.derive_s)
    if found:
        on_step(f"earlier run: {found}")
    return _Job(req, result, op_dir, on_step, env).run(phase)


class _Job:
    """The steps of one job and how each ending reads."""

    def __init__(self, req: JobRequest, result: JobResult, op_dir: Path, on_step: Step, env: dict[str, str] | None):
        self.req, self.result, self.op_dir, self.on_step, self.env = req, result, op_dir, on_step, env

    def step(self, name: str, args: list[str]) -> StepOutput:
        out = run_step(name, args, Path(self.req.log_file), self.req.step_timeout_s, self.on_step, self.env)
        self.result.steps.append(out.record)
        return out

    def say(self, said: str, more: str = "") -> None:
        """A line of the job's own (not a step's): into the operator's log (with `more`) and its progress."""
        with open(self.req.log_file, "a", encoding="utf-8") as log:
            log.write(f"[{now()}] {said}{more}\n")
        self.on_step(said)

    def end(self, status: str, reason: str = "") -> JobResult:
        r = self.result
        r.status, r.reason, r.finished_at = status, reason.replace(self.req.spec_file, self.req.spec_label), now()  # type: ignore[assignment]
        if status in ENDED and self.op_dir.is_dir():
            if self.req.basis is not None:
                save_basis(self.op_dir, self.req.basis)  # what the verdict was reached with (a failed round 0 too)
            save_job(self.op_dir, r)  # written last: its presence means finished
        return r

    def failed_step(self, out: StepOutput, default: str) -> JobResult | None:
        """The job's end when a step did not succeed (None when it did)."""
        rc = out.record.exit_code
        if rc == 0:
            return None
        if out.out_of_memory:
            return self.end("memory", out_of_memory(out.record.step, out.out_of_memory))
        if rc == 2:
            return self.end("invalid", why(out, "the spec or the configuration was refused"))
        if rc == 1 and out.record.step == "new" and self.op_dir.is_dir() and _round0_outcome(self.op_dir):
            return self.end("failed", f"round 0: {_round0_outcome(self.op_dir)}")
        if rc == 1 and out.record.step == "optimize":
            return self.end("failed", why(out, "optimization failed"))
        if rc == 1 and out.record.step == "bench" and (self.op_dir / FINAL_FILE).is_file():
            return self.end("failed", bench_reason(self.op_dir, out))
        return self.end("error", why(out, default))

    def new(self, phase: str) -> JobResult | None:
        """`new`, with the baselines timed ahead beside it where asked; the job's end if it failed."""
        req = self.req
        force = ["--force"] if phase == "redo" else []
        ahead = None
        if req.ahead:  # its compiles and the peers' start run while the kernel is generated and checked
            log = Path(req.log_file)
            ahead = Ahead(req.spec_file, req.device, log.with_name(f"{log.stem}.baselines.log"), self.env)
        # `new` measures round 0 in full (eager, torch.compile, the peers) in the judge that checked it:
        # `optimize` diagnoses from that measurement and the final one reuses it (see the module's docstring)
        out = self.step("new", ["new", req.spec_file, "--out", req.out_root, *_llm_flags(req), *force])
        if ahead is not None:  # waited for by new's measurement already, unless the kernel was never timed
            self.result.baselines = ahead.finish(stop=out.record.exit_code != 0 or not self._timed())
        if req.ahead_next is not None and out.record.exit_code == 0 and req.rounds != 0:  # the next operator's
            # compiles run while this one optimizes
            nxt = req.ahead_next
            log = Path(nxt.log_file)
            in_background(Ahead(nxt.spec_file, req.device, log.with_name(f"{log.stem}.baselines.log"), self.env))
            self.say(f"timing {nxt.name}'s baselines ahead, beside this operator's rounds")
        return self.failed_step(out, "kernelgen new did not finish")

    def _timed(self) -> bool:
        try:
            r0 = next(r for r in load_state(self.op_dir).rounds if r.round == 0)
        except (OSError, ValueError, StopIteration):
            return False
        return r0.performance is not None

    def run(self, phase: str) -> JobResult:
        req, flags = self.req, _llm_flags(self.req)
        if phase in ("new", "redo"):
            ended = self.new(phase)
            if ended is not None:
                return ended
        if req.basis is not None:
            save_basis(self.op_dir, req.basis)
        if req.rounds != 0:
            rounds = ["--rounds", str(req.rounds)] if req.rounds is not None else []
            ended = self.failed_step(self.step("optimize", ["optimize", str(self.op_dir), *rounds, *flags]),
                                     "kernelgen optimize did not finish")
            if ended is not None:
                return ended
        if _final_from_best(self.op_dir, req.basis):
            self.say("final measurement: the best round's, taken in full on this device with this KernelGen; not timed again",
                     f" ({FINAL_FILE})")
            return self.end(*_measured_outcome(self.op_dir))
        out = self.step("bench", ["bench", str(self.op_dir), "--device", req.device, "--json", str(self.op_dir / FINAL_FILE)])
        return self.failed_step(out, "kernelgen bench did not finish") or self.end("finished")
