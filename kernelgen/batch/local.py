"""The local engine: one worker process per device of this host, each pinned by its environment,
each taking the next operator from one shared queue when it is done with the last. A device runs
one operator at a time, so no timing shares its device with other work of the batch. Workers that
share a GPU (`--per-gpu`) take the next operator only when its perf case fits the GPU's free memory
(kernelgen.batch.memory).

When the queue is empty, a worker's device would sit idle while other operators still optimize: it
is lent to them instead (kernelgen.lending), a token in the batch's lend folder that an operator
claims for its rounds' searches. Tokens are taken back when the batch ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from kernelgen.batch.engine import Event, OnEvent, error_result, serialized
from kernelgen.batch.job import JobRequest
from kernelgen.batch.memory import JobQueue, Probe, nvidia_smi_probe
from kernelgen.batch.resume import JobResult
from kernelgen.batch.targets import Target
from kernelgen.lending import ENV as LEND_ENV
from kernelgen.lending import LendToken, lend, withdraw_all
from kernelgen.verify.judge.devicelock import ENV as LOCK_ENV


class WorkerProcess:
    """A `kernelgen.batch.worker` process for one target, spoken to over its stdin and stdout."""

    def __init__(self, target: Target, env: dict[str, str], log_dir: Path):
        self.target = target
        log_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(log_dir / f"worker-{target.label.replace(':', '').replace('#', '_')}.log", "a", encoding="utf-8")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kernelgen.batch.worker", "--target", target.label],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env,
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

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


class LocalEngine:
    name = "local"

    def __init__(self, targets: list[Target], work_dir: Path, probe: Probe | None = nvidia_smi_probe):
        self.targets = targets
        self.device = targets[0].kind
        self.work_dir = Path(work_dir)
        self.probe = probe  # a GPU's (free, total) memory, for the operators that share it

    @property
    def lend_dir(self) -> Path:
        return self.work_dir / "lend"

    def worker_env(self, target: Target) -> dict[str, str]:
        """A worker's environment: pinned to its device, with its device lock, and the lend folder
        its operators claim idle devices from."""
        return {**os.environ, **target.env(self.work_dir / "locks"), LEND_ENV: str(self.lend_dir)}

    def _lend(self, target: Target) -> None:
        """Offer an idle device to the operators still optimizing. Not a CPU worker's: nothing is
        timed for a decision under the interpreter, so no search would use it."""
        if target.kind == "cpu" or target.device_id is None:
            return
        lend(self.lend_dir, LendToken(kind=target.kind, device_id=target.device_id,
                                      lock=self.worker_env(target).get(LOCK_ENV) or None))

    def describe(self) -> str:
        kind = "Triton-interpreter worker(s) on the CPU" if self.device == "cpu" else f"{self.device} device(s)"
        return f"local: {len(self.targets)} {kind} ({', '.join(t.label for t in self.targets)})"

    def run(self, jobs: list[JobRequest], on_event: OnEvent) -> list[JobResult]:
        emit = serialized(on_event)
        shared = len({t.device_key for t in self.targets}) < len(self.targets)  # --per-gpu > 1
        pending = JobQueue(list(jobs), probe=self.probe if self.device == "cuda" and shared else None,
                           on_wait=lambda job, target, message: emit(Event(job.name, "step", target.label, message)))
        results: dict[str, JobResult] = {}
        workers: list[WorkerProcess] = []
        withdraw_all(self.lend_dir)  # a killed earlier run's tokens name devices that are busy now
        busy = {t.device_key: sum(u.device_key == t.device_key for u in self.targets) for t in self.targets}
        busy_lock = threading.Lock()

        def idle(target: Target) -> None:
            """A worker is done: the device is lent once the last of the workers sharing it is."""
            with busy_lock:
                busy[target.device_key] -= 1
                last = busy[target.device_key] == 0
            if last:
                self._lend(target)

        def serve(target: Target) -> None:
            worker: WorkerProcess | None = None
            try:
                while True:
                    job = pending.take(target)  # waits while its GPU has no room for the next one (kernelgen.batch.memory)
                    if job is None:
                        if worker is not None:  # its device is idle from here on, once the workers sharing it are
                            worker.close()
                            worker = None
                        idle(target)
                        return
                    if worker is None or not worker.alive:
                        worker = WorkerProcess(target, self.worker_env(target), self.work_dir / "logs")
                        workers.append(worker)
                    emit(Event(job.name, "start", target.label))
                    try:
                        result = worker.run(job, emit)
                    finally:
                        pending.done(target, job)
                    results[job.name] = result
                    emit(Event(job.name, "done", target.label, result=result))
            finally:
                if worker is not None:
                    worker.close()

        threads = [threading.Thread(target=serve, args=(t,), name=f"kernelgen-{t.label}", daemon=True) for t in self.targets]
        for t in threads:
            t.start()
        try:
            for t in threads:
                while t.is_alive():
                    t.join(timeout=0.5)
        except KeyboardInterrupt:
            for w in workers:
                if w.alive:
                    w.proc.terminate()
            raise
        finally:
            withdraw_all(self.lend_dir)
        return [results.get(j.name) or error_result(j, "", "never ran") for j in jobs]
