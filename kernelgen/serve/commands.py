"""The library side of `kernelgen test` and `kernelgen bench` (and of `new`'s round 0 checks): through
the KernelGen service when it can be used, in this process otherwise — the same runner, the same
verdicts either way (tests/serve/test_service.py holds them to that).

In-process, the worker starts before this process imports torch (session.early_worker); through the
service, this process imports neither: it sends the folder's path and prints what comes back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelgen.serve import client
from kernelgen.verify.judge.service.wire import AccuracyJob, CheckJob, Done, JobRequest, PerformanceJob
from kernelgen.verify.results import RunRecord

Say = Callable[[str], None]


def _quiet(text: str) -> None:
    pass


@dataclass
class Checked:
    record: RunRecord
    kernel: Path  # the kernel file the record is about, as the user named it


def service_handle(device: str, note: Say, *, no_service: bool = False) -> client.Handle | None:
    """The service this command will use (started now if none answers, without waiting for it), or
    None: disabled, or unusable (a note says why)."""
    if no_service:
        return None
    try:
        return client.prepare(device)
    except client.Unusable as e:
        note(f"the KernelGen service cannot be used ({e}); running in this process")
        return None


def check_remotely(handle: client.Handle | None, device: str, op_dir: Path, *, measure: bool, kernel_label: str,
                   on_step: Say, note: Say) -> Done | None:
    """`kernelgen new`'s round 0 checks through the service; None: do them in this process."""
    if handle is None:
        return None
    job = CheckJob(op_dir=str(Path(op_dir).resolve()), measure=measure, kernel_label=kernel_label)
    return client.run(handle, JobRequest(device=device, job=job), on_step, on_step, note)


def _remote(device: str, job: AccuracyJob | PerformanceJob, no_service: bool, on_step: Say, warn: Say,
            note: Say) -> Done | None:
    handle = service_handle(device, note, no_service=no_service)
    if handle is None:
        return None
    done = client.run(handle, JobRequest(device=device, job=job), on_step, warn, note)
    if done is not None and (done.accuracy if job.kind == "accuracy" else done.performance) is None:
        note("the KernelGen service answered without a result; running in this process")
        return None
    return done


def _abs(path: Path | None) -> str | None:
    return str(Path(path).resolve()) if path is not None else None


def test_operator(op_dir: Path, *, device: str = "auto", kernel: Path | None = None, seeds: int = 3,
                  seed: int | None = None, no_service: bool = False, on_step: Say = _quiet, warn: Say = _quiet, note: Say = _quiet) -> Checked:
    """`kernelgen test`: every planned accuracy check of the operator's kernel (or `kernel`), drawn
    from the seed base `seed` (None: a hash of the kernel and the spec)."""
    job = AccuracyJob(op_dir=_abs(op_dir), kernel=_abs(kernel), seeds=seeds, seed=seed)
    done = _remote(device, job, no_service, on_step, warn, note)
    if done is not None:
        return Checked(done.accuracy, kernel or Path(op_dir) / f"{done.op_name}_triton.py")
    from kernelgen.verify.judge.session import early_worker

    with early_worker(device) as spare:
        from kernelgen.devices import resolve_device
        from kernelgen.opdir import open_operator
        from kernelgen.verify.judge.runner import run_accuracy

        op = open_operator(op_dir)
        dev = resolve_device(device)
        on_step(f"{op.name}: checking accuracy on {dev.kind}")
        record = run_accuracy(op, dev, kernel=kernel, seeds=seeds, base=seed, spare=spare)
    return Checked(record, kernel or op.file("triton"))


def bench_operator(op_dir: Path, *, device: str = "auto", kernel: Path | None = None, no_compile: bool = False,
                   no_peers: bool = False, fresh: bool = False, json_out: Path | None = None, no_service: bool = False,
                   graph: bool = False, on_step: Say = _quiet, warn: Say = _quiet, note: Say = _quiet) -> Checked:
    """`kernelgen bench`: the kernel timed against eager, torch.compile and the peers (`json_out`: the
    typed result written there too; `graph`: its plan timed in a CUDA graph too)."""
    job = PerformanceJob(op_dir=_abs(op_dir), kernel=_abs(kernel), no_compile=no_compile, no_peers=no_peers, fresh=fresh,
                         graph=graph)
    done = _remote(device, job, no_service, on_step, warn, note)
    if done is not None:
        checked = Checked(done.performance, kernel or Path(op_dir) / f"{done.op_name}_triton.py")
    else:
        checked = _bench_here(op_dir, device, kernel, no_compile, no_peers, fresh, on_step, warn, graph)
    if json_out is not None:
        from kernelgen.fsutil import atomic_write

        atomic_write(json_out, checked.record.model_dump_json(indent=2))
    return checked


def _bench_here(op_dir: Path, device: str, kernel: Path | None, no_compile: bool, no_peers: bool, fresh: bool,
                on_step: Say, warn: Say, graph: bool = False) -> Checked:
    from kernelgen.verify.judge.session import early_worker

    with early_worker(device) as spare:
        from kernelgen.devices import INTERPRETER_WARNING, resolve_device
        from kernelgen.opdir import open_operator
        from kernelgen.verify.judge.runner import run_performance

        op = open_operator(op_dir)
        dev = resolve_device(device)
        if dev.interpreter:
            warn(INTERPRETER_WARNING)
        on_step(f"{op.name}: timing on {dev.kind}")
        record = run_performance(op, dev, kernel=kernel, no_compile=no_compile, no_peers=no_peers, fresh=fresh,
                                 spare=spare, graph=graph)
    return Checked(record, kernel or op.file("triton"))
