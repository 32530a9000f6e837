"""What is left of one operator, read from its folder: nothing, the whole job, or optimize + bench.

An operator is finished when its folder holds `batch_job.json` (written last, atomically) for the
same `--rounds`. Rounds already finished are `kernelgen optimize`'s to resume. A folder whose round 0
never finished, or whose spec.yaml is not the spec given now, is redone: `kernelgen new --force`
moves the old folder aside (`<name>.previous-<time>`), it never deletes it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelgen.fsutil import atomic_write
from kernelgen.opdir import SPEC_FILE
from kernelgen.record.state import load_state

JOB_FILE = "batch_job.json"  # the job's result, in the operator folder: present = finished
FINAL_FILE = "final_perf.json"  # `kernelgen bench --json` of the best kernel, after optimize

Phase = Literal["new", "redo", "optimize", "done"]
Status = Literal["finished", "failed", "invalid", "error", "pending"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepRecord(_Model):
    step: str  # new | optimize | bench
    exit_code: int | None  # None: killed at the step timeout
    seconds: float


class JobResult(_Model):
    """One operator's outcome; crosses process and host boundaries as JSON."""

    name: str
    spec: str  # the spec as the user named it
    status: Status  # finished: correct and measured; failed: ran, kernel wrong or untimed;
    #                 invalid: the input (spec, offline coverage, LLM configuration); error: crash, timeout;
    #                 pending: not reached yet (only in a report written while the batch runs)
    reason: str = ""
    rounds: int | None = None  # the --rounds asked for (None: each spec's max_rounds)
    steps: list[StepRecord] = Field(default_factory=list)
    target: str = ""  # where it ran: cuda:0, cpu#1, node 10.0.0.2 gpu 3
    started_at: str = ""
    finished_at: str = ""
    resumed: str = ""  # what an earlier run had left and how it was continued
    skipped: bool = False  # finished by an earlier run; nothing was redone

    @property
    def correct(self) -> bool:
        return self.status == "finished"


def load_job(op_dir: Path) -> JobResult | None:
    try:
        return JobResult.model_validate_json((Path(op_dir) / JOB_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def save_job(op_dir: Path, result: JobResult) -> None:
    atomic_write(Path(op_dir) / JOB_FILE, result.model_dump_json(indent=2))


def _covers(done: int | None, asked: int | None) -> bool:
    return done == asked or (done is not None and asked is not None and done >= asked)


def phase_of(op_dir: Path, spec_text: str, rounds: int | None) -> tuple[Phase, str]:
    """The next step for this operator, and (when an earlier run left something) what was found."""
    op_dir = Path(op_dir)
    if not op_dir.exists():
        return "new", ""
    spec = op_dir / SPEC_FILE
    if not spec.is_file():
        return "redo", f"{op_dir.name}/ is not an operator folder; it is moved aside"
    if spec.read_text(encoding="utf-8") != spec_text:
        return "redo", "the spec changed since the earlier run; the old folder is moved aside"
    try:
        state = load_state(op_dir)
    except (OSError, ValueError):
        return "redo", "round 0 never finished (no readable state.json); the old folder is moved aside"
    r0 = next((r for r in state.rounds if r.round == 0), None)
    if r0 is None or r0.finished_at is None:
        return "redo", "round 0 never finished; the old folder is moved aside"
    job = load_job(op_dir)
    if job is not None and job.status in ("finished", "failed") and _covers(job.rounds, rounds):
        return "done", "finished in an earlier run"
    done = sum(1 for r in state.rounds if r.round >= 1 and r.finished_at)
    return "optimize", f"round 0 done, {done} optimization round(s) done: optimize resumes"
