"""The Ray engine: every operator is one Ray task holding one device (`num_gpus=1`; `{"NPU": 1}` on
Ascend; one CPU for the Triton interpreter when the cluster has no accelerator). Ray pins the task
to its device and schedules across hosts; KernelGen adds no scheduler of its own.

The task gets the spec's text and whatever an earlier run left of the operator folder, runs the same
job as a local worker in a scratch folder on its node, and returns the whole operator folder, which
lands in the driver's `--out`. Every node needs KernelGen installed (and, for an LLM backend, its
configuration); the driver's files are not shared with the nodes."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kernelgen.batch import artifacts
from kernelgen.batch.engine import EngineUnavailableError, Event, OnEvent, error_result, serialized
from kernelgen.batch.job import JobRequest, run_job
from kernelgen.batch.resume import JobResult
from kernelgen.errors import UsageError

INSTALL_HINT = "pip install 'kernelgen[ray]' (or pip install ray) here and on every node of the cluster"
ACCELERATORS = {"cuda": "GPU", "npu": "NPU"}  # device kind -> Ray resource name


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EngineUnavailableError("--engine ray needs Ray, which is not installed", hint=INSTALL_HINT) from None
    return ray


def task_resources(device: str) -> dict[str, Any]:
    """What one operator's task asks of Ray."""
    if device == "cuda":
        return {"num_gpus": 1, "num_cpus": 1}
    if device == "npu":
        return {"resources": {"NPU": 1}, "num_cpus": 1}
    return {"num_cpus": 1}


def _where(device: str) -> str:
    import ray

    ids = ray.get_runtime_context().get_accelerator_ids()
    node = ray.util.get_node_ip_address()
    resource = ACCELERATORS.get(device)
    # A CPU task has no device id: the worker process tells the slots apart.
    return f"{node} {resource} {','.join(map(str, ids.get(resource, [])))}" if resource else f"{node} cpu (pid {os.getpid()})"


class Inbox:
    """A Ray actor (no CPU of its own) that collects the tasks' progress events for the driver.
    Tasks send without waiting: a task blocked on a Ray call lends its CPU to the next task, which
    would put two operators on one worker slot."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str, str, str]] = []

    def put(self, item: tuple[str, str, str, str]) -> None:
        self.items.append(item)

    def take(self) -> list[tuple[str, str, str, str]]:
        items, self.items = self.items, []
        return items


def run_remote(request_json: str, spec_text: str, folder: bytes, inbox: Any) -> tuple[str, bytes, str]:
    """The task body, on whichever node Ray picked: returns (result JSON, operator folder, log text)."""
    req = JobRequest.model_validate_json(request_json)
    scratch = Path(tempfile.mkdtemp(prefix=f"kernelgen-batch-{req.name}-"))
    try:
        out_root = scratch / "out"
        artifacts.unpack(out_root, folder)
        spec_file = scratch / "spec" / Path(req.spec_label).name
        spec_file.parent.mkdir()
        spec_file.write_text(spec_text, encoding="utf-8")
        log = scratch / "job.log"
        local = req.model_copy(update={"spec_file": str(spec_file), "out_root": str(out_root), "log_file": str(log)})
        where = _where(req.device)
        inbox.put.remote((req.name, "start", where, ""))
        result = run_job(local, where, on_step=lambda msg: inbox.put.remote((req.name, "step", where, msg)))
        text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
        return result.model_dump_json(), artifacts.pack(out_root, artifacts.operator_entries(out_root, req.name)), text
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class RayEngine:
    name = "ray"

    def __init__(self, address: str | None, device: str = "auto"):
        self.ray = import_ray()
        self.address = address
        if not self.ray.is_initialized():
            try:
                self.ray.init(address=address or None, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
                raise EngineUnavailableError(f"--ray-address {address}: no Ray cluster reachable ({e})",
                                             hint="start one with `ray start --head`, or leave out --ray-address for a local one") from None
        self.resources = {k: float(v) for k, v in self.ray.cluster_resources().items()}
        self.device = self._device(device)

    def _device(self, device: str) -> str:
        if device == "auto":
            return next((kind for kind, res in ACCELERATORS.items() if self.resources.get(res, 0) > 0), "cpu")
        res = ACCELERATORS.get(device)
        if res and self.resources.get(res, 0) <= 0:
            raise UsageError(f"--device {device}: the Ray cluster has no {res} resource", hint="--device auto uses what it has")
        return device

    def describe(self) -> str:
        res = ACCELERATORS.get(self.device, "CPU")
        where = self.address or "a local Ray instance"
        return f"ray: {where}, {self.resources.get(res, 0):g} {res} (one operator per {res})"

    def run(self, jobs: list[JobRequest], on_event: OnEvent) -> list[JobResult]:
        ray = self.ray
        emit = serialized(on_event)
        inbox = ray.remote(num_cpus=0)(Inbox).remote()
        task = ray.remote(run_remote).options(**task_resources(self.device), max_retries=0)
        pending: dict[Any, JobRequest] = {}
        for job in jobs:
            root = Path(job.out_root)
            folder = artifacts.pack(root, [job.name])
            spec_text = Path(job.spec_file).read_text(encoding="utf-8")
            pending[task.remote(job.model_dump_json(), spec_text, folder, inbox)] = job
        results: dict[str, JobResult] = {}

        def drain() -> None:
            for name, kind, where, message in ray.get(inbox.take.remote()):
                emit(Event(name, kind, where, message))

        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                drain()
                for ref in ready:
                    job = pending.pop(ref)
                    results[job.name] = self._collect(ref, job)
                    emit(Event(job.name, "done", results[job.name].target, result=results[job.name]))
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        finally:
            ray.kill(inbox)
        return [results[j.name] for j in jobs]

    def _collect(self, ref: Any, job: JobRequest) -> JobResult:
        try:
            result_json, folder, log_text = self.ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a task that died (node lost, worker crash) is one failed job
            return error_result(job, "", f"the Ray task failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        artifacts.unpack(Path(job.out_root), folder)
        log = Path(job.log_file)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(log_text)
        return JobResult.model_validate_json(result_json)
