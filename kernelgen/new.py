"""`kernelgen new`: spec -> four files -> verified -> measured -> round 0 of the log.

Everything that can fail because of the user's input (the spec, the backend configuration, an
operator the offline generator cannot serve) fails before anything is written. Files are written
into a staging directory that is renamed into place, and an existing output is moved aside, never
overwritten.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelgen.backends import kernel_writer
from kernelgen.devices import DeviceInfo, resolve_device
from kernelgen.errors import OutputExistsError
from kernelgen.fsutil import atomic_write, move_aside, now
from kernelgen.opdir import SPEC_FILE, OperatorDir, render_baseline, render_trusted
from kernelgen.record.oplog import write_log
from kernelgen.record.state import OpState, RoundRecord, save_state
from kernelgen.spec import OperatorSpec, load_spec
from kernelgen.verify.runner import run_accuracy, run_performance

Step = Callable[[str], None]


@dataclass
class NewResult:
    op: OperatorDir
    state: OpState
    correct: bool
    moved_aside: Path | None


def write_trusted_files(op_dir: Path, spec: OperatorSpec, spec_text: str, baseline: str) -> None:
    atomic_write(op_dir / SPEC_FILE, spec_text)
    atomic_write(op_dir / f"{spec.name}_baseline.py", baseline)
    for kind, text in render_trusted(spec).items():
        atomic_write(op_dir / f"{spec.name}_{kind}.py", text)


def _check_and_time(op: OperatorDir, record: RoundRecord, device: DeviceInfo, *, measure: bool, on_step: Step) -> None:
    """Accuracy first; performance only for a kernel that passed (a wrong kernel has no speed)."""
    on_step(f"{op.name}: checking accuracy of {record.kernel_file} on {device.kind}")
    record.accuracy = run_accuracy(op, device)
    if record.accuracy.passed and measure:
        on_step(f"{op.name}: measuring performance")
        record.performance = run_performance(op, device)


def new_operator(
    spec_path: str | Path,
    *,
    out_root: str | Path = "generated",
    backend: str = "auto",
    device: str = "auto",
    force: bool = False,
    llm_options: dict | None = None,
    measure: bool = True,
    on_step: Step = lambda s: None,
) -> NewResult:
    spec_path = Path(spec_path)
    spec = load_spec(spec_path)
    spec_text = spec_path.read_text(encoding="utf-8")
    dev = resolve_device(device)
    final = Path(out_root) / spec.name
    if final.exists() and not force:
        raise OutputExistsError(f"{final} already exists", hint="pass --force to regenerate; the old directory is moved aside, not deleted")
    on_step(f"{spec.name}: generating the kernel ({backend})")
    writer = kernel_writer(backend, spec, llm_options)  # refusals and configuration errors: before any write

    Path(out_root).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.staging-", dir=out_root))
    try:
        write_trusted_files(staging, spec, spec_text, render_baseline(spec))
        op = OperatorDir(staging, spec)
        generated = writer.write(op, dev, on_step)
        if generated.baseline_source is not None:
            atomic_write(op.file("baseline"), render_baseline(spec, generated.baseline_source, llm_written=True))
        atomic_write(op.file("triton"), generated.source)
        round0 = op.round_dir(0)
        round0.mkdir(parents=True, exist_ok=True)
        shutil.copy2(op.file("triton"), round0 / op.file("triton").name)
        moved = move_aside(final) if final.exists() else None
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    op = OperatorDir(final, spec)
    state = OpState(name=spec.name, created_at=now(), backend=generated.backend, device=dev.kind,
                    baseline_by_llm=generated.baseline_source is not None, generation_note=generated.note)
    record = RoundRecord(round=0, started_at=now(), backend=generated.backend, change="initial kernel",
                         change_type="initial", kernel_file=f"rounds/round_0/{op.file('triton').name}",
                         attempts=generated.attempts, tokens=generated.tokens,
                         reason=generated.note, model_notes=generated.model_notes)
    state.rounds.append(record)
    save_state(final, state)
    write_log(final, state, spec)
    _check_and_time(op, record, dev, measure=measure, on_step=on_step)
    record.finished_at = now()
    correct = bool(record.accuracy and record.accuracy.passed)
    record.kept = correct
    record.outcome = "correct: the starting point for optimization" if correct else f"not correct: {record.accuracy.describe() if record.accuracy else 'not run'}"
    if correct:
        state.best_round = 0
    save_state(final, state)
    write_log(final, state, spec)
    return NewResult(op=op, state=state, correct=correct, moved_aside=moved)
