"""`kernelgen new`: spec -> four files -> verified -> measured -> round 0 of the log.

Everything that can fail because of the user's input (the spec, the backend configuration, an
operator the offline generator cannot serve) fails before anything is written. The whole of round 0
— files, accuracy check, timing, state and log — happens in a staging folder that is renamed into
place only when round 0 is finished; an existing output is moved aside, never overwritten. An LLM's
exchanges are written beside the staging folder as they happen (kernelgen.llm.transcript), so a run
that fails or is interrupted keeps every reply, and the same command again reuses them. A finished
round 0 without a correct kernel is continued, not redone: with an LLM, `new` again (with or without
--force) sends its closest kernel and the judge's verdict first (kernelgen.llm.earlier), and moves the
old folder aside at the end. A verdict the repair loop reached on the kernel's very bytes is not
computed again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelgen.backends import FirstKernel, KernelWriter, kernel_writer
from kernelgen.devices import DeviceInfo, resolve_device
from kernelgen.errors import InterruptedRunError, KernelGenError, OutputExistsError
from kernelgen.fsutil import atomic_write, move_aside, now
from kernelgen.llm.recording import LLM_DIR
from kernelgen.opdir import OperatorDir, operator_status
from kernelgen.verify.judge.trusted import render_baseline, write_trusted_files
from kernelgen.record.analysis import analyse_operator
from kernelgen.record.oplog import write_log
from kernelgen.record.state import STATE_FILE, DispatchRecord, OpState, RoundRecord, save_state
from kernelgen.spec.given import read_spec
from kernelgen.verify.judge import integrity
from kernelgen.verify.judge.runner import open_judge, run_accuracy, run_performance
from kernelgen.verify.judge.judge import KernelSource
from kernelgen.verify.judge.devicelock import waits_said
from kernelgen.verify.judge.session import Spares, early_worker
from kernelgen.verify.results import RunRecord

if TYPE_CHECKING:
    from kernelgen.llm.earlier import EarlierAttempts
    from kernelgen.spec import OperatorSpec
    from kernelgen.llm.transcript import Transcript

Step = Callable[[str], None]


@dataclass
class NewResult:
    op: OperatorDir
    state: OpState
    correct: bool
    moved_aside: Path | None
    replaced_incomplete: bool = False  # the folder moved aside was a half-made one (round 0 never finished)


def _check_and_time(op: OperatorDir, record: RoundRecord, device: DeviceInfo, *, measure: bool, on_step: Step,
                    spare: Spares | None = None, service: Service | None = None, known: RunRecord | None = None) -> None:
    """Accuracy first; performance only for a kernel that passed (a wrong kernel has no speed). In the
    KernelGen service when there is one (`service`: the handle and the device as the user chose it).
    `known`: the repair loop's verdict, taken as it is when it is about these very bytes (the same
    kernel and spec draw the same inputs: checking again took half of `new`'s time on the CPU)."""
    source = op.file("triton").read_text(encoding="utf-8")
    if known is not None and known.accuracy is not None and known.accuracy.kernel_sha256 == KernelSource(source, "", "file").sha256:
        record.accuracy = known
        on_step(f"{op.name}: {record.kernel_file} was checked in the repair loop ({'correct' if known.passed else 'not correct'}); "
                "not checked again")
        if known.passed and measure:
            with open_judge(op, device, spare=spare) as judge:
                on_step(f"{op.name}: measuring performance")
                record.performance = run_performance(op, device, judge=judge)
        return
    if service is not None:
        from kernelgen.serve.commands import check_remotely

        done = check_remotely(service.handle, service.choice, op.path, measure=measure, kernel_label=record.kernel_file,
                              on_step=on_step, note=service.note)
        if done is not None and done.accuracy is not None:
            record.accuracy, record.performance = done.accuracy, done.performance
            return
    # One judge for both: its worker compiles the kernel once and the timing reuses it (a second
    # worker would pay the torch import, the device context and every JIT compile again).
    with open_judge(op, device, spare=spare) as judge:
        on_step(f"{op.name}: checking accuracy of {record.kernel_file} on {device.kind}")
        with waits_said(on_step, op.name):
            record.accuracy = run_accuracy(op, device, judge=judge)
        if record.accuracy.passed and measure:
            on_step(f"{op.name}: measuring performance")
            with waits_said(on_step, op.name):
                record.performance = run_performance(op, device, judge=judge)


def _round0(op: OperatorDir, spec_text: str, writer: KernelWriter, dev: DeviceInfo,
            on_step: Step) -> tuple[OpState, RoundRecord, RunRecord | None]:
    """Write the files and round 0's record into the (staging) folder; nothing checked yet, but the
    repair loop's verdict on the kernel, where an LLM wrote it, comes back with them."""
    spec = op.spec
    write_trusted_files(op.path, spec, spec_text, render_baseline(spec))
    generated: FirstKernel = writer.write(op, dev, on_step)
    if generated.baseline_source is not None:
        atomic_write(op.file("baseline"), render_baseline(spec, generated.baseline_source, llm_written=True))
        integrity.record(op.path, spec.name)  # the LLM's baseline is the reference from now on
    atomic_write(op.file("triton"), generated.source)
    round0 = op.round_dir(0)
    round0.mkdir(parents=True, exist_ok=True)
    shutil.copy2(op.file("triton"), round0 / op.file("triton").name)
    state = OpState(name=spec.name, created_at=now(), backend=generated.backend, device=dev.kind,
                    baseline_by_llm=generated.baseline_source is not None, generation_note=generated.note,
                    rendered_spec=spec_text,
                    analysis=analyse_operator(spec, None, reference=generated.baseline_source))
    record = RoundRecord(round=0, started_at=now(), backend=generated.backend, change="initial kernel",
                         change_type="initial", kernel_file=f"rounds/round_0/{op.file('triton').name}",
                         attempts=generated.attempts, tokens=generated.tokens, reason=generated.note,
                         model_notes=generated.model_notes,
                         dispatch=[DispatchRecord.model_validate(d) for d in generated.dispatch])
    state.rounds.append(record)
    return state, record, generated.checked


def _earlier(final: Path, spec: OperatorSpec, spec_text: str, backend: str) -> EarlierAttempts | None:
    """The finished round 0 without a correct kernel that an LLM run continues from: the same spec, a
    reference to check against (an LLM's own baseline is not carried over), not the offline generator."""
    from kernelgen.backends import resolve_backend
    from kernelgen.llm.earlier import failed_round0

    spec_file = final / "spec.yaml"
    if (spec.reference is None or resolve_backend(backend) == "offline" or not spec_file.is_file()
            or spec_file.read_text(encoding="utf-8") != spec_text):
        return None
    return failed_round0(final)


def _transcript_for(writer: KernelWriter, out_root: Path, name: str, on_step: Step) -> Transcript | None:
    """Where an LLM's exchanges are written as they happen: beside the staging folder, so a failed or
    interrupted run keeps them; a run with the endpoint reuses an unfinished earlier run's replies."""
    if writer.backend == "offline":
        return None
    from kernelgen.llm.transcript import answered, start_transcript

    transcript = start_transcript(out_root, name, resume=writer.backend == "openai")
    writer.transcript = transcript  # type: ignore[attr-defined] - an LLMWriter
    if transcript.earlier is not None:
        on_step(f"{name}: an earlier run stopped before round 0 finished; its {len(answered(transcript.earlier))} "
                f"recorded replies in {transcript.earlier} answer the same requests before the model is asked")
    return transcript


def _say_where(error: BaseException, transcript: Transcript | None) -> None:
    """The error names where the exchanges are and how to reuse them (a domain error in its hint; any
    other in a note under its traceback)."""
    text = transcript.kept() if transcript is not None else ""
    if not text:
        return
    if isinstance(error, KernelGenError):
        error.hint = f"{error.hint}; {text}" if error.hint else text
    else:
        error.add_note(f"kernelgen new: {text}")


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
    no_service: bool = False,
    note: Step | None = None,
) -> NewResult:
    # The judge and the worker that will check the kernel start first: the KernelGen service (found,
    # or started now), else a worker of this process's own; their imports and device start (~5 s) run
    # while the spec's reference is tried and the kernel generated, instead of after.
    from kernelgen.serve.commands import service_handle

    handle = service_handle(device, note or on_step, no_service=no_service)
    service = Service(handle, device, note or on_step) if handle is not None else None
    with (contextlib.nullcontext() if service is not None else early_worker(device)) as spare:
        return _new_operator(Path(spec_path), out_root=out_root, backend=backend, device=device, force=force,
                             llm_options=llm_options, measure=measure, on_step=on_step, spare=spare, service=service)


@dataclass
class Service:
    """The KernelGen service round 0's checks go to (kernelgen.serve), and where its notes are said."""

    handle: Any
    choice: str
    note: Step


def _new_operator(spec_path: Path, *, out_root: str | Path, backend: str, device: str, force: bool,
                  llm_options: dict | None, measure: bool, on_step: Step, spare: Spares | None,
                  service: Service | None = None) -> NewResult:
    given = read_spec(spec_path)  # a YAML spec as written, or one derived from a KernelBench-format .py
    spec, spec_text = given.spec, given.text
    dev = resolve_device(device)
    final = Path(out_root) / spec.name
    # A folder that `kernelgen new` started and never finished (state.json saying round 0 is not
    # done, as an interrupted run of an older KernelGen left) holds nothing to keep working on: it
    # is moved aside like --force would, rather than blocking the command that fixes it.
    half_made = final.exists() and (final / STATE_FILE).is_file() and not operator_status(final).complete
    earlier = _earlier(final, spec, spec_text, backend) if final.exists() and not half_made else None
    if final.exists() and not force and not half_made and earlier is None:
        raise OutputExistsError(f"{final} already exists", hint="pass --force to regenerate; the old directory is moved aside, not deleted")
    on_step(f"{spec.name}: generating the kernel ({backend})")
    try:
        writer = kernel_writer(backend, spec, llm_options)  # refusals and configuration errors: before any write
    except KeyboardInterrupt:
        raise InterruptedRunError(f"interrupted before anything was written ({final} "
                                  f"{'is unchanged' if final.exists() else 'was not created'})",
                                  hint="run the same command again") from None

    if earlier is not None:
        writer.earlier = earlier  # type: ignore[attr-defined] - an LLMWriter
    Path(out_root).mkdir(parents=True, exist_ok=True)
    transcript = _transcript_for(writer, Path(out_root), spec.name, on_step)
    # Interrupting leaves NO folder rather than one to resume: all of round 0 runs in the staging
    # folder and the rename is the last step, so `generated/<name>/` exists only once round 0 is
    # finished, and `optimize`, `report` and a second `new` never meet a half-made one. Resuming
    # would save little (the offline generator takes seconds; an LLM's exchanges are kept, see
    # kernelgen.llm.transcript) and would need a half-made folder that every other command understands.
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.staging-", dir=out_root))
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp's 0700 would make the operator folder private once renamed
    moved: Path | None = None
    try:
        op = OperatorDir(staging, spec)
        state, record, checked = _round0(op, spec_text, writer, dev, on_step)
        _check_and_time(op, record, dev, measure=measure, on_step=on_step, spare=spare, service=service, known=checked)
        record.finished_at = now()
        correct = bool(record.accuracy and record.accuracy.passed)
        record.kept = correct
        record.outcome = ("correct: the starting point for optimization" if correct
                          else f"not correct: {record.accuracy.describe() if record.accuracy else 'not run'}")
        if correct:
            state.best_round = 0
        save_state(staging, state)
        write_log(staging, state, spec)
        if transcript is not None:
            transcript.finish(staging / LLM_DIR)
        moved = move_aside(final) if final.exists() else None
        os.replace(staging, final)
    except KeyboardInterrupt:
        raise _interrupted(staging, final, moved, transcript) from None
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        _say_where(e, transcript)
        raise
    if transcript is not None:
        transcript.discard()
    return NewResult(op=OperatorDir(final, spec), state=state, correct=correct, moved_aside=moved, replaced_incomplete=half_made)


def _interrupted(staging: Path, final: Path, moved: Path | None, transcript: Transcript | None) -> InterruptedRunError:
    """Undo the staging and say exactly what is (and is not) on disk now."""
    if moved is not None and not final.exists():
        os.replace(moved, final)  # interrupted between moving the old folder aside and renaming the new one
    shutil.rmtree(staging, ignore_errors=True)
    where = f"{final} is unchanged" if final.exists() else f"{final} was not created"
    hint = "run the same command again: it starts round 0 over"
    kept = transcript.kept() if transcript is not None else ""
    if kept:
        hint += f"; {kept}"
    return InterruptedRunError(f"interrupted: no operator folder was written ({where}; nothing half-made is left behind)", hint=hint)
