"""One operator's job, run by a worker (a local worker process or a Ray task): `kernelgen new`, then
`kernelgen optimize`, then `kernelgen bench --json` as the final measurement.

Each step is the CLI in a subprocess, so a batch gets exactly what a user typing the commands
gets, and this module is the one place that knows those commands. Exit codes carry the outcome
(0 done, 1 the kernel failed, 2 the input is wrong); every line a step prints goes to the
operator's log, and its `•` progress lines go to `on_step`."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.batch.resume import FINAL_FILE, JobResult, StepRecord, load_job, phase_of, save_job
from kernelgen.fsutil import now
from kernelgen.record.state import load_state
from kernelgen.record.text import clip
from kernelgen.verify.results import RunRecord

Step = Callable[[str], None]
PROGRESS_MARK = "•"  # what `kernelgen.cli.progress` puts before each step it prints
TAIL_LINES = 12  # a step's last lines kept for its reason: a traceback ends with the exception and its notes
REASON_CHARS = 600  # a reason is one cell of the report: long enough for an exception and its note
_EXCEPTION_RE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*:|^[A-Za-z_][\w.]*(Error|Exception)$")


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


@dataclass
class StepOutput:
    record: StepRecord
    errors: list[str] = field(default_factory=list)  # the CLI's `error:` / `hint:` lines
    tail: list[str] = field(default_factory=list)  # its last lines that were not progress: a traceback's last line is there


def kernelgen_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelgen", *args]


def run_step(name: str, args: list[str], log_file: Path, timeout_s: float, on_step: Step,
             env: dict[str, str] | None = None) -> StepOutput:
    """Run one CLI command (in `env`, else this process's environment); its output goes to the log,
    its progress lines to `on_step`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    cmd = kernelgen_command(*args)
    t0 = time.monotonic()
    errors: list[str] = []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with open(log_file, "a", encoding="utf-8") as log:
        log.write(f"\n[{now()}] $ kernelgen {' '.join(args)}\n")
        log.flush()
        # Same process group as the worker: stopping the batch stops its steps.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", env=env)
        timed_out = threading.Event()

        def stop() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout_s, stop)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                text = line.strip()
                if text.startswith(PROGRESS_MARK):
                    on_step(text.lstrip(PROGRESS_MARK).strip())
                elif text.startswith(("error:", "hint:")) or (errors and line.startswith("  ")):
                    errors.append(text)
                elif text:
                    tail.append(text)
            rc = proc.wait()
        finally:
            timer.cancel()
        killed = timed_out.is_set()
        log.write(f"[{now()}] exit {rc}{' (step timeout)' if killed else ''}\n")
    record = StepRecord(step=name, exit_code=None if killed else rc, seconds=round(time.monotonic() - t0, 2))
    return StepOutput(record, errors, list(tail))


def _last_words(tail: list[str]) -> str:
    """What a step that printed no `error:` said last: a traceback's exception line (and the notes under
    it), else its last line."""
    exc = max((i for i, line in enumerate(tail) if _EXCEPTION_RE.match(line)), default=None)
    if exc is not None:
        return " ".join(tail[exc:])
    return tail[-1] if tail else ""


def _why(out: StepOutput, default: str) -> str:
    """The failing step's own reason, as it said it (its `error:` lines, else the end of what it printed),
    never a pointer to the log alone."""
    step, rc = out.record.step, out.record.exit_code
    if rc is None:
        return f"{step}: no result within the step timeout ({out.record.seconds:.0f} s)"
    text = " ".join(e.removeprefix("error:").strip() for e in out.errors[:4])
    if not text:
        said = _last_words(out.tail)
        text = f"{default}: `kernelgen {step}` exit {rc}" + (f": {said}" if said else " without a word")
    return clip(text, REASON_CHARS)


def _bench_reason(op_dir: Path, out: StepOutput) -> str:
    """Why the final measurement did not pass, from its own record: each INVALID case with its reason."""
    try:
        perf = RunRecord.model_validate_json((op_dir / FINAL_FILE).read_text(encoding="utf-8")).performance
    except (OSError, ValueError):
        perf = None
    if perf is None:
        return _why(out, "the final measurement did not pass")
    parts = [f"{' '.join(f'{k}{v}' for k, v in c.shapes.items())} {c.dtype}: INVALID: {c.invalid_reason or 'no reason recorded'}"
             for c in perf.cases if not c.valid]
    parts += [f"violation {v.code}: {v.message}" for v in perf.violations]
    if perf.error:
        parts.append(perf.error.strip().splitlines()[-1])
    return clip("the final measurement did not pass: " + "; ".join(parts), REASON_CHARS) if parts else \
        _why(out, "the final measurement did not pass")


def _round0_outcome(op_dir: Path) -> str:
    try:
        r0 = next(r for r in load_state(op_dir).rounds if r.round == 0)
    except (OSError, ValueError, StopIteration):
        return ""
    return r0.outcome


def _llm_flags(req: JobRequest) -> list[str]:
    return ["--backend", req.backend, "--device", req.device, *req.options]


def run_job(req: JobRequest, target: str = "", on_step: Step = lambda s: None, env: dict[str, str] | None = None) -> JobResult:
    """Run what is left of one operator; finished operators come back as they were, marked skipped.
    The steps run in `env` (a Ray task pins them there), else in this process's environment."""
    op_dir = Path(req.out_root) / req.name
    log = Path(req.log_file)
    spec_text = Path(req.spec_file).read_text(encoding="utf-8")
    phase, found = phase_of(op_dir, spec_text, req.rounds)
    if phase == "done":
        stored = load_job(op_dir)
        assert stored is not None
        return stored.model_copy(update={"skipped": True})
    result = JobResult(name=req.name, spec=req.spec_label, status="error", rounds=req.rounds, target=target,
                       started_at=now(), resumed=found)
    if found:
        on_step(f"earlier run: {found}")

    def step(name: str, args: list[str]) -> StepOutput:
        out = run_step(name, args, log, req.step_timeout_s, on_step, env)
        result.steps.append(out.record)
        return out

    def end(status: str, reason: str = "") -> JobResult:
        result.status, result.reason, result.finished_at = status, reason.replace(req.spec_file, req.spec_label), now()  # type: ignore[assignment]
        if status in ("finished", "failed") and op_dir.is_dir():
            save_job(op_dir, result)  # written last: its presence means finished
        return result

    if phase in ("new", "redo"):
        force = ["--force"] if phase == "redo" else []
        # `bench` below times the final kernel against everything, and with rounds to run `optimize` times
        # round 0 itself (its kernel, eager) before diagnosing it: timing round 0 here too (torch.compile
        # and the peers compile per case x dtype, tens of seconds on a GPU) would be thrown away, also
        # with --rounds 0, where the final kernel is round 0's and `bench` times it again.
        out = step("new", ["new", req.spec_file, "--out", req.out_root, *_llm_flags(req), *force, "--no-bench"])
        rc = out.record.exit_code
        if rc == 2:
            return end("invalid", _why(out, "the spec or the configuration was refused"))
        if rc == 1 and op_dir.is_dir() and _round0_outcome(op_dir):
            return end("failed", f"round 0: {_round0_outcome(op_dir)}")
        if rc != 0:
            return end("error", _why(out, "kernelgen new did not finish"))
    if req.rounds != 0:
        rounds = ["--rounds", str(req.rounds)] if req.rounds is not None else []
        out = step("optimize", ["optimize", str(op_dir), *rounds, *_llm_flags(req)])
        rc = out.record.exit_code
        if rc in (1, 2):
            return end("failed" if rc == 1 else "invalid", _why(out, "optimization failed"))
        if rc != 0:
            return end("error", _why(out, "kernelgen optimize did not finish"))
    out = step("bench", ["bench", str(op_dir), "--device", req.device, "--json", str(op_dir / FINAL_FILE)])
    rc = out.record.exit_code
    if rc == 0:
        return end("finished")
    if rc == 1 and (op_dir / FINAL_FILE).is_file():
        return end("failed", _bench_reason(op_dir, out))
    return end("error", _why(out, "kernelgen bench did not finish"))
