"""The judge's front door for the rest of KernelGen: check or time one operator's kernel and get a
`RunRecord` back — a verdict, or why there is none (the worker timed out or crashed).

Before anything runs, the folder's integrity record is checked (kernelgen.verify.judge.integrity); the
kernel is read once, and those bytes are what is checked, timed and reported (their sha256 is in the
result); the operator folder is compared before and after the judged calls.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

from kernelgen.devices import DeviceInfo
from kernelgen.errors import OperatorDirError
from kernelgen.opdir import OperatorDir
from kernelgen.spec.reference import run_as_module
from kernelgen.verify.judge.trusted import render_baseline, render_trusted
from kernelgen.verify.judge import integrity
from kernelgen.verify.judge.accuracy import DEFAULT_SEEDS, check_accuracy
from kernelgen.verify.judge.judge import Judge, KernelSource, Origin
from kernelgen.verify.judge.performance import measure_performance
from kernelgen.verify.results import RunRecord, Violation
from kernelgen.verify.judge.scrub import scrub
from kernelgen.verify.judge.session import Spares, WorkerFailure


def load_baseline(op: OperatorDir) -> Callable[..., Any]:
    """The reference the judge runs: the operator folder's baseline file (checked by the integrity
    record first). A baseline an LLM wrote (the spec had no reference) is untrusted code: it never
    runs in the judge but in a sandboxed worker of its own (kernelgen.verify.judge.llmbaseline.WorkerBaseline)."""
    return baseline_function(op.file("baseline").read_text(encoding="utf-8"), str(op.file("baseline")), op.name)


def baseline_function(source: str, filename: str, name: str) -> Callable[..., Any]:
    """The function `name` of a baseline file's text, as the judge runs it."""
    fn = run_as_module(source, filename, f"kernelgen_baseline_{name}").get(name)
    if not callable(fn):
        raise OperatorDirError(f"{filename}: defines no function {name!r}")
    return fn


def require_trusted_files(op: OperatorDir) -> None:
    """The integrity record's check; a folder from before such records holds its rendered scripts to
    what KernelGen renders now, then gets a record."""
    if integrity.load(op.path) is not None:
        integrity.require_intact(op.path, op.name)
        return
    for name, text in render_trusted(op.spec).items():
        path = op.path / name
        if name != "conftest.py" and (not path.is_file() or path.read_text(encoding="utf-8") != text):
            raise integrity.IntegrityError(
                f"{path} is missing or differs from what KernelGen renders; it decides verdicts, so nothing is run",
                hint=f"`kernelgen refresh {op.path}` renders it again (the rounds are kept)")
    if op.spec.reference is not None and op.file("baseline").read_text(encoding="utf-8") != render_baseline(op.spec):
        raise integrity.IntegrityError(f"{op.file('baseline')} differs from the spec's reference",
                                       hint=f"`kernelgen refresh {op.path}` renders it again")
    path = op.path / "conftest.py"
    if not path.is_file():
        from kernelgen.fsutil import atomic_write

        atomic_write(path, render_trusted(op.spec)["conftest.py"])
    integrity.record(op.path, op.name)


def open_judge(op: OperatorDir, device: DeviceInfo, *, spare: Spares | None = None, prestart: bool = True) -> Judge:
    """A judge for this operator, after the integrity check (IntegrityError, exit 2, when it fails).
    Its first worker starts before the judge sizes its arena (or is `spare`, started earlier still),
    so the worker's imports and device start overlap the judge's; `prestart=False`: no such worker
    (the caller has a warm one to give it)."""
    try:
        require_trusted_files(op)
    except BaseException:
        if spare is not None:
            spare.close()
        raise
    sha = hashlib.sha256(op.file("baseline").read_bytes()).hexdigest()
    if op.spec.reference is None:
        from kernelgen.verify.judge.llmbaseline import WorkerBaseline

        return Judge(op.spec, device, WorkerBaseline(device, op.file("baseline").read_text(encoding="utf-8"), op.name),
                     spare=spare, prestart=prestart, baseline_sha256=sha)
    return Judge(op.spec, device, load_baseline(op), spare=spare, prestart=prestart, baseline_sha256=sha)


def kernel_source(op: OperatorDir, kernel: Path | None, origin: Origin | None = None) -> KernelSource:
    path = Path(kernel) if kernel else op.file("triton")
    if not path.is_file():
        raise OperatorDirError(f"{path}: no such kernel file")
    return KernelSource(source=path.read_text(encoding="utf-8"), name=op.file("triton").name, origin=origin or "file")


def _failure_record(kind: str, e: WorkerFailure, started: float) -> RunRecord:
    return RunRecord(kind=kind, status=e.status, exit_code=None, duration_s=time.monotonic() - started,  # type: ignore[arg-type]
                     stderr_tail=scrub(e.message))


def _folder_violation(op: OperatorDir, before: integrity.Snapshot) -> Violation | None:
    changes = integrity.diff(before, integrity.snapshot(op.path))
    return Violation(code="folder-changed", message=integrity.describe(changes)) if changes else None


def run_accuracy(op: OperatorDir, device: DeviceInfo, *, kernel: Path | None = None, source: KernelSource | None = None,
                 seeds: int | None = None, base: int | None = None, judge: Judge | None = None,
                 spare: Spares | None = None, log: Callable[[str], None] = lambda s: None) -> RunRecord:
    """Every planned accuracy check of the operator's kernel (or `kernel`, or `source`); `base`: the
    seed its inputs are drawn from (by default a hash of the kernel and the spec: the same kernel, the
    same verdict); `spare`: a worker started earlier for the judge this opens (session.early_worker)."""
    started = time.monotonic()
    own = judge is None
    judge = judge or open_judge(op, device, spare=spare)
    src = source or kernel_source(op, kernel)
    before = integrity.snapshot(op.path)
    try:
        # the device lock is check_accuracy's, shared case by case
        result = check_accuracy(judge, src, seeds=tuple(range(seeds)) if seeds else DEFAULT_SEEDS, base=base, log=log)
    except WorkerFailure as e:
        return _failure_record("accuracy", e, started)
    finally:
        if own:
            judge.close()
    changed = _folder_violation(op, before)
    if changed:
        result.violations.append(changed)
        result.correct = False
    return RunRecord(kind="accuracy", status="ok" if result.correct else "failed", exit_code=0 if result.correct else 1,
                     duration_s=time.monotonic() - started, accuracy=result)


def run_performance(op: OperatorDir, device: DeviceInfo, *, kernel: Path | None = None, source: KernelSource | None = None,
                    compare: KernelSource | None = None, no_compile: bool = False, no_eager: bool = False,
                    no_peers: bool = False, fresh: bool = False, judge: Judge | None = None,
                    spare: Spares | None = None, graph: bool = False,
                    log: Callable[[str], None] = lambda s: None) -> RunRecord:
    """The kernel timed on every perf case (against `compare`, the current best, when given);
    `fresh`: the baselines timed again rather than taken from the cache; `spare` as run_accuracy's;
    `graph`: each case's plan timed captured in a CUDA graph too (a GPU only)."""
    from kernelgen.verify.judge.compilewarm import compile_needed, load_beside_compiler
    from kernelgen.verify.judge.peaks import device_peaks

    started = time.monotonic()
    own = judge is None
    judge = judge or open_judge(op, device, spare=spare)
    src = source or kernel_source(op, kernel)
    before = integrity.snapshot(op.path)
    try:
        if compile_needed(judge, with_compile=not no_compile, fresh=fresh):
            load_beside_compiler(judge, src)
        perf = measure_performance(judge, src, compare_with=compare, with_eager=not no_eager,
                                   with_compile=False if no_compile else None, with_peers=False if no_peers else None,
                                   peaks=device_peaks(device), fresh=fresh, graph=graph, log=log)
    except WorkerFailure as e:
        return _failure_record("performance", e, started)
    finally:
        if own:
            judge.close()
    changed = _folder_violation(op, before)
    if changed:
        perf.violations.append(changed)
    return RunRecord(kind="performance", status="ok" if perf.ok else "failed", exit_code=0 if perf.ok else 1,
                     duration_s=time.monotonic() - started, performance=perf)


def save_record(path: Path, record: RunRecord) -> None:
    """A run's typed result as JSON (`bench --json`, a round's accuracy.json), written atomically."""
    from kernelgen.fsutil import atomic_write

    atomic_write(path, record.model_dump_json(indent=2))
