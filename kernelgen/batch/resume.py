"""What is left of one operator, read from its folder: nothing, the whole job, or optimize + bench.

An operator is finished when its folder holds `batch_job.json` (written last, atomically) for the
same `--rounds` (or more) and nothing that decides its result changed (kernelgen.batch.basis: the
spec as data, the tool, the device, the options). Rounds already finished are `kernelgen optimize`'s
to resume. A folder whose round 0 never finished, or where something that decides the result
changed, is redone, and the reason says what changed: `kernelgen new --force` moves the old folder
aside (`<name>.previous-<time>`), it never deletes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelgen.batch.basis import JobBasis, basis_changes, folder_spec, load_basis, spec_changes
from kernelgen.fsutil import atomic_write
from kernelgen.opdir import SPEC_FILE
from kernelgen.record.state import load_state

JOB_FILE = "batch_job.json"  # the job's result, in the operator folder: present = finished
FINAL_FILE = "final_perf.json"  # `kernelgen bench --json` of the best kernel, after optimize

Phase = Literal["new", "redo", "optimize", "done"]
Status = Literal["finished", "failed", "invalid", "memory", "error", "pending"]
STAGES = ("derive", "new", "baselines", "optimize", "bench")  # where a job's seconds go, in the report's stage line
ENDED = ("finished", "failed")  # what a batch_job.json holds: a verdict on the kernel, kept by a rerun


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepRecord(_Model):
    step: str  # new | optimize | bench | baselines (timed ahead, beside new)
    exit_code: int | None  # None: killed at the step timeout
    seconds: float
    phases: dict[str, float] = Field(default_factory=dict)  # where the step's seconds went (kernelgen.batch.phases)


class JobResult(_Model):
    """One operator's outcome; crosses process and host boundaries as JSON."""

    name: str
    spec: str  # the spec as the user named it
    status: Status  # finished: correct and measured; failed: ran, kernel wrong or untimed;
    #                 invalid: the input (spec, offline coverage, LLM configuration); memory: out of the
    #                 GPU's memory, also alone on an idle GPU (never a verdict on the kernel);
    #                 error: crash, timeout; pending: not reached yet (in a report written while it runs) or
    #                 stopped with the batch (kernelgen.batch.local.STOPPED)
    reason: str = ""
    rounds: int | None = None  # the --rounds asked for (None: each spec's max_rounds)
    steps: list[StepRecord] = Field(default_factory=list)
    target: str = ""  # where it ran: cuda:0, cpu#1, node 10.0.0.2 gpu 3
    started_at: str = ""
    finished_at: str = ""
    resumed: str = ""  # what an earlier run had left and how it was continued
    skipped: bool = False  # finished by an earlier run; nothing was redone
    attempts: int = 1  # 2: out of memory beside other operators, then run again alone on an idle GPU
    derive_s: float = 0.0  # the driver's seconds on its spec before it started (kernelgen.batch.plan)
    baselines: StepRecord | None = None  # its baselines timed ahead, beside `new` (kernelgen.batch.ahead): not in `seconds`

    @property
    def correct(self) -> bool:
        return self.status == "finished"

    @property
    def seconds(self) -> float:
        return round(sum(s.seconds for s in self.steps), 2)

    @property
    def stages(self) -> dict[str, float]:
        """Its seconds per stage (STAGES): the driver's derivation, each step, and its baselines timed
        beside `new` (those overlap `new`, so the stages add up to more than `seconds`)."""
        out = {stage: 0.0 for stage in STAGES}
        out["derive"] = self.derive_s
        out["baselines"] = self.baselines.seconds if self.baselines is not None else 0.0
        for s in self.steps:
            out[s.step] = out.get(s.step, 0.0) + s.seconds
        return {k: round(v, 2) for k, v in out.items()}

    @property
    def phases(self) -> dict[str, float]:
        """Seconds per phase over every step, in the order they ran."""
        out: dict[str, float] = {}
        for s in self.steps:
            for name, sec in (s.phases or {s.step: s.seconds}).items():
                out[name] = round(out.get(name, 0.0) + sec, 2)
        return out


def load_job(op_dir: Path) -> JobResult | None:
    try:
        return JobResult.model_validate_json((Path(op_dir) / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def save_job(op_dir: Path, result: JobResult) -> None:
    atomic_write(Path(op_dir) / JOB_FILE, result.model_dump_json(indent=2))


def _covers(done: int | None, asked: int | None) -> bool:
    return done == asked or (done is not None and asked is not None and done >= asked)


def phase_of(op_dir: Path, spec: dict[str, Any], basis: JobBasis | None, rounds: int | None) -> tuple[Phase, str]:
    """The next step for this operator, and (when an earlier run left something) what was found.
    `spec`: the spec given now, as data (kernelgen.batch.basis.spec_data); `basis`: what else decides
    the result now (None: not compared)."""
    op_dir = Path(op_dir)
    if not op_dir.exists():
        return "new", ""
    if not (op_dir / SPEC_FILE).is_file():
        return "redo", f"{op_dir.name}/ is not an operator folder; it is moved aside"
    changed = _what_changed(op_dir, spec, basis)
    if changed:
        return "redo", f"{changed} since the earlier run; the old folder is moved aside"
    try:
        state = load_state(op_dir)
    except (OSError, ValueError):
        return "redo", "round 0 never finished (no readable state.json); the old folder is moved aside"
    r0 = next((r for r in state.rounds if r.round == 0), None)
    if r0 is None or r0.finished_at is None:
        return "redo", "round 0 never finished; the old folder is moved aside"
    job = load_job(op_dir)
    if job is not None and job.status in ENDED and _covers(job.rounds, rounds):
        return "done", "finished in an earlier run"
    done = sum(1 for r in state.rounds if r.round >= 1 and r.finished_at)
    return "optimize", f"round 0 done, {done} optimization round(s) done: optimize resumes"


def _what_changed(op_dir: Path, spec: dict[str, Any], basis: JobBasis | None) -> str:
    before = folder_spec(op_dir)
    if before is None:
        return f"{op_dir.name}/{SPEC_FILE} no longer reads as a spec"
    fields = spec_changes(before, spec)
    if fields:
        return f"the spec changed ({', '.join(fields)})"
    kept = load_basis(op_dir)
    changes = basis_changes(kept, basis) if kept is not None and basis is not None else []
    return "; ".join(changes)
