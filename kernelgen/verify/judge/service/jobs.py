"""The work a command hands the service: the same runner calls (kernelgen.verify.judge.runner) the
command would make in its own process — integrity check of the operator folder, kernel read once,
fresh inputs, the judge's own clock — with two differences only: the workers come from the fork
server, and a kernel file that passed cleanly keeps its worker for the next command (pool.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from kernelgen.devices import INTERPRETER_WARNING, resolve_device
from kernelgen.opdir import open_operator
from kernelgen.verify.judge.devicelock import waits_said
from kernelgen.verify.judge.runner import kernel_source, open_judge, run_accuracy, run_performance
from kernelgen.verify.judge.service.pool import WarmPool, clean
from kernelgen.verify.judge.service.wire import Done, JobRequest, Step, WorkerUse

Emit = Callable[[Step], None]


def describe(req: JobRequest) -> str:
    """The command a job stands for, as `kernelgen serve --status` shows it."""
    job = req.job
    verb = {"accuracy": "test", "performance": "bench", "check": "new (round 0's checks)"}[job.kind]
    return f"{verb} {job.op_dir}"


def run_job(req: JobRequest, pool: WarmPool, emit: Emit) -> Done:
    """One command's judging; domain errors (kernelgen.errors) propagate to the daemon, which sends them."""
    job = req.job
    dev = resolve_device(req.device)
    op = open_operator(job.op_dir)
    kernel = job.kernel if job.kind != "check" else None  # round 0 checks the folder's own kernel
    source = kernel_source(op, Path(kernel) if kernel else None)
    warm = pool.has(dev, op.name, source.sha256)
    judge = open_judge(op, dev, prestart=not warm)  # a warm worker needs no spare beside it
    uses: list[WorkerUse] = []
    accuracy = performance = None
    try:
        lent = pool.lend(judge, source.sha256)
        if lent is not None:
            uses.append(WorkerUse(pid=lent, kernel_sha256=source.sha256, reused=True))
        if job.kind == "accuracy":
            emit(Step(text=f"{op.name}: checking accuracy on {dev.kind}"))
            accuracy = run_accuracy(op, dev, source=source, seeds=job.seeds, base=job.seed, judge=judge)
        elif job.kind == "performance":
            if dev.interpreter:
                emit(Step(text=INTERPRETER_WARNING, warning=True))
            emit(Step(text=f"{op.name}: timing on {dev.kind}"))
            performance = run_performance(op, dev, source=source, no_compile=job.no_compile, no_peers=job.no_peers,
                                          fresh=job.fresh, judge=judge, graph=job.graph)
        else:
            emit(Step(text=f"{op.name}: checking accuracy of {job.kernel_label} on {dev.kind}"))
            say = lambda text: emit(Step(text=text))  # noqa: E731 - one line, said twice
            with waits_said(say, op.name):
                accuracy = run_accuracy(op, dev, source=source, judge=judge)
            if accuracy.passed and job.measure:
                emit(Step(text=f"{op.name}: measuring performance"))
                with waits_said(say, op.name):
                    performance = run_performance(op, dev, source=source, judge=judge)
        kept = pool.keep(judge, source.sha256) if clean(accuracy, performance) else None
        if kept is not None and lent is None:
            uses.append(WorkerUse(pid=kept, kernel_sha256=source.sha256, reused=False))
    finally:
        judge.close()
    return Done(op_name=op.name, device_kind=dev.kind, interpreter=dev.interpreter, accuracy=accuracy,
                performance=performance, workers=uses)
