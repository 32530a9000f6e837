"""The local engine: worker processes on the devices of this host (`--per-gpu` of them per GPU), each
pinned by its environment, each taking the next operator from one shared queue when it is done with
the last, and only when that operator's estimated memory fits its GPU (kernelgen.batch.placement).

An operator that runs out of GPU memory beside other operators runs again alone on an idle GPU; one
that runs out alone is reported as `memory`, with what it needs and what the GPU has, never as a
wrong kernel.

When the queue is empty, a worker's device would sit idle while other operators still optimize: it
is lent to them instead (kernelgen.lending), a token in the batch's lend folder that an operator
claims for its rounds' searches. Tokens are taken back when the batch ends.

Nothing outlives the batch: each worker ties itself to the batch (kernelgen.lifetime), runs in a
process group of its own and owns the KernelGen service its steps judge in (kernelgen.batch.services).
On Ctrl-C or SIGTERM the queue is closed first (an operator waiting for room would otherwise start on
the memory its stopped neighbours free), then every worker is told to stop at once (it interrupts its
step, waits for it and stops its service), and the batch returns only once they are gone: nothing of
it starts after it returned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kernelgen.batch.engine import Event, OnEvent, error_result, serialized
from kernelgen.batch.job import AheadOf, JobRequest
from kernelgen.batch.outcome import memory_reason
from kernelgen.batch.placement import JobQueue, Probe
from kernelgen.batch.resume import JobResult
from kernelgen.batch.services import service_settings, stop_batch_services
from kernelgen.batch.targets import Target
from kernelgen.gpus import gpu_memory, gpu_model
from kernelgen.lending import ENV as LEND_ENV
from kernelgen.lending import LendToken, lend, withdraw_all
from kernelgen.lifetime import child_env
from kernelgen.verify.judge.devicelock import ENV as LOCK_ENV

# An operator whose worker the batch stopped (Ctrl-C, SIGTERM, `timeout`): not an error of the kernel or the
# tool -- three rows of a KernelBench batch stopped by `timeout -s INT` read "error ... died (exit 143)" (2026-12-08)
STOPPED = "stopped with the batch before it ended: the same command resumes it"
STOP_WAIT_S = 30.0  # a worker told to stop gives its step 10 s to clean up (kernelgen.batch.step), then exits
STOP_JOIN_S = 5.0  # a worker thread, once its worker is gone, only records the operator's end


class WorkerProcess:
    """A `kernelgen.batch.worker` process for one target, spoken to over its stdin and stdout."""

    def __init__(self, target: Target, env: dict[str, str], log_dir: Path):
        self.target = target
        log_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(log_dir / f"worker-{target.label.replace(':', '').replace('#', '_')}.log", "a", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelgen.batch.worker", "--target", target.label],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=child_env(env),
            start_new_session=True,  # its group holds it and its steps' helpers: killed together
        )

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, job: JobRequest, emit: OnEvent) -> JobResult:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(job.model_dump_json() + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # reported below, with its exit status
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "step" in message:
                emit(Event(job.name, "step", self.target.label, str(message["step"])))
            elif "result" in message:
                return JobResult.model_validate(message["result"])
        status = self.proc.wait()
        return error_result(job, self.target.label, f"the worker process for {self.target.label} died (exit {status}); "
                                                    f"a later run resumes this operator")

    def tell_stop(self) -> None:
        """SIGTERM: it interrupts its step, waits for it and stops its service, then exits."""
        if self.alive:
            self.proc.terminate()

    def stop(self, deadline: float | None = None) -> None:
        """Tell it to stop, wait for it (until `deadline`, a time.monotonic(); default STOP_WAIT_S from
        now), then kill what is left of its group."""
        self.tell_stop()
        left = (time.monotonic() + STOP_WAIT_S if deadline is None else deadline) - time.monotonic()
        try:
            self.proc.wait(timeout=max(0.0, left))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.stop()
        self.proc.wait()
        self._stderr.close()


class LocalEngine:
    name = "local"

    def __init__(self, targets: list[Target], work_dir: Path, probe: Probe | None = gpu_memory):
        self.targets = targets
        self.device = targets[0].kind
        self.work_dir = Path(work_dir)
        self.probe = probe  # a GPU's (free, total) memory

    @property
    def lend_dir(self) -> Path:
        return self.work_dir / "lend"

    def worker_env(self, target: Target) -> dict[str, str]:
        """A worker's environment: pinned to its device, with its device lock, the lend folder its
        operators claim idle devices from, and a KernelGen service of its own for its steps."""
        return {**os.environ, **target.env(self.work_dir / "locks"), LEND_ENV: str(self.lend_dir),
                **service_settings(target.label)}

    def _lend(self, target: Target) -> None:
        """Offer an idle device to the operators still optimizing. Not a CPU worker's: nothing is
        timed for a decision under the interpreter, so no search would use it."""
        if target.kind == "cpu" or target.device_id is None:
            return
        lend(self.lend_dir, LendToken(kind=target.kind, device_id=target.device_id,
                                      lock=self.worker_env(target).get(LOCK_ENV) or None))

    def device_model(self) -> str:
        if self.device != "cuda":
            return self.device
        model = gpu_model(sorted({t.device_id for t in self.targets if t.device_id is not None}))
        return f"cuda: {model}" if model else "cuda"

    def describe(self) -> str:
        kind = "Triton-interpreter worker(s) on the CPU" if self.device == "cpu" else f"{self.device} device(s)"
        return f"local: {len(self.targets)} {kind} ({', '.join(t.label for t in self.targets)})"

    def run(self, jobs: list[JobRequest], on_event: OnEvent) -> list[JobResult]:
        run = _Run(self, jobs, serialized(on_event))
        withdraw_all(self.lend_dir)  # a killed earlier run's tokens name devices that are busy now
        threads = [threading.Thread(target=run.serve, args=(t,), name=f"kernelgen-{t.label}", daemon=True) for t in self.targets]
        previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() else None
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)
        except KeyboardInterrupt:
            run.stop()
            for t in threads:  # their workers are gone: each records its operator's end and returns
                t.join(timeout=STOP_JOIN_S)
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
            withdraw_all(self.lend_dir)
            stop_batch_services(self.lend_dir)
        return [run.results.get(j.name) or error_result(j, "", "never ran") for j in jobs]


def _interrupt(signum: int, frame: object) -> None:  # noqa: ARG001 - a signal handler's signature
    raise KeyboardInterrupt  # SIGTERM stops the batch as Ctrl-C does: its workers and their steps with it


class _Run:
    """One call of LocalEngine.run: its queue, its workers and their results."""

    def __init__(self, engine: LocalEngine, jobs: list[JobRequest], emit: OnEvent):
        self.engine, self.emit = engine, emit
        self.pending = JobQueue(list(jobs), probe=engine.probe if engine.device == "cuda" else None,
                                on_wait=lambda job, target, message: emit(Event(job.name, "step", target.label, message)))
        self.results: dict[str, JobResult] = {}
        self.workers: list[WorkerProcess] = []
        self.stopping = threading.Event()
        self.workers_lock = threading.Lock()  # a worker is started before the batch stops (and is stopped), or never
        self.busy = {t.device_key: sum(u.device_key == t.device_key for u in engine.targets) for t in engine.targets}
        self.busy_lock = threading.Lock()

    def idle(self, target: Target) -> None:
        """A worker is done: the device is lent once the last of the workers sharing it is."""
        with self.busy_lock:
            self.busy[target.device_key] -= 1
            last = self.busy[target.device_key] == 0
        if last and not self.stopping.is_set():
            self.engine._lend(target)

    def stop(self) -> None:
        """Nothing more starts; every worker is told to stop at once, then waited for: STOP_WAIT_S in all,
        not each (one after the other, N workers could keep a stopped batch alive N times as long)."""
        with self.workers_lock:
            self.stopping.set()
            workers = list(self.workers)
        self.pending.close()
        for w in workers:
            w.tell_stop()
        deadline = time.monotonic() + STOP_WAIT_S
        for w in workers:
            w.stop(deadline)

    def _worker(self, target: Target, worker: WorkerProcess | None) -> WorkerProcess | None:
        """`worker` while it lives, else a new one; None once the batch is stopping."""
        with self.workers_lock:
            if self.stopping.is_set():
                return None
            if worker is None or not worker.alive:
                worker = WorkerProcess(target, self.engine.worker_env(target), self.engine.work_dir / "logs")
                self.workers.append(worker)
        return worker

    def serve(self, target: Target) -> None:
        worker: WorkerProcess | None = None
        try:
            while not self.stopping.is_set():
                job = self.pending.take(target)  # waits while its GPU has no room for the next one
                if job is None:
                    break
                fresh = self._worker(target, worker)
                if fresh is None:
                    break
                worker = fresh
                if job.attempt == 1:
                    self.emit(Event(job.name, "start", target.label))
                self.one(worker, target, self._with_next(target, job))
        finally:
            if worker is not None:  # its device is idle from here on, once the workers sharing it are
                worker.close()
            self.idle(target)

    def _with_next(self, target: Target, job: JobRequest) -> JobRequest:
        """`job`, told which queued operator's baselines to time ahead while it optimizes (kernelgen.batch.ahead)."""
        nxt = self.pending.upcoming(target, job) if job.ahead else None
        if nxt is None:
            return job
        return job.model_copy(update={"ahead_next": AheadOf(name=nxt.name, spec_file=nxt.spec_file, log_file=nxt.log_file)})

    def one(self, worker: WorkerProcess, target: Target, job: JobRequest) -> None:
        try:
            result = worker.run(job, self.emit)
        finally:
            self.pending.done(target, job)
        if result.status == "error" and self.stopping.is_set():  # its worker was stopped with the batch, not broken
            result = result.model_copy(update={"status": "pending", "reason": STOPPED})
        if result.status == "memory" and job.attempt == 1 and self.pending.had_company(job):
            self.emit(Event(job.name, "step", target.label, f"{result.reason}; it runs again alone on an idle GPU"))
            self.pending.retry_alone(job.model_copy(update={"attempt": 2}))
            return
        if result.status == "memory":
            room = self.engine.probe(str(target.device_id)) if self.engine.probe and target.device_id else None
            result = result.model_copy(update={"reason": memory_reason(result.reason, job.need_bytes, room, target.label)})
        self.results[job.name] = result
        self.emit(Event(job.name, "done", target.label, result=result))
