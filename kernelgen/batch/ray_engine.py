"""The Ray engine: every operator is one Ray task holding one device (`num_gpus=1`; `{"NPU": 1}` on
Ascend; one CPU for the Triton interpreter when the cluster has no accelerator). Ray places the task
and schedules across hosts; KernelGen adds no scheduler of its own.

The task gets the spec's text and whatever an earlier run left of the operator folder, runs the same
job as a local worker in a scratch folder on its node, and sends the operator folder back after every
finished round and at the end (kernelgen.batch.checkpoint): the driver's `--out` always holds the
last finished round, so a task whose worker died is resumed by the next run, as a local one is. Every
node needs KernelGen installed (and, for an LLM backend, its configuration); the driver's files are
not shared with the nodes.

Its steps run as a local worker's do: pinned to the device Ray gave the task (the pinning variable is
set from Ray's accelerator ids, whatever Ray itself set), with a device lock per device of the node
as a second guard (a step left running by a killed worker still holds it while it times), and with
the driver's OMP_NUM_THREADS, not the 1 that Ray sets in a one-CPU task."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from kernelgen.batch import artifacts
from kernelgen.batch.checkpoint import FolderShipper
from kernelgen.batch.engine import EngineUnavailableError, Event, OnEvent, error_result, serialized
from kernelgen.batch.job import JobRequest, run_job
from kernelgen.batch.resume import JobResult
from kernelgen.batch.services import SERVICE_IDLE_S
from kernelgen.batch.targets import Target
from kernelgen.devices import PIN_VARS
from kernelgen.errors import UsageError
from kernelgen.fsutil import now
from kernelgen.verify.judge.devicelock import ENV as LOCK_ENV

INSTALL_HINT = "pip install 'kernelgen[ray]' (or pip install ray) here and on every node of the cluster"
ACCELERATORS = {"cuda": "GPU", "npu": "NPU"}  # device kind -> Ray resource name
# The device locks of a node's devices, shared by every task on the node (Target.env names the files).
LOCK_DIR = Path(tempfile.gettempdir()) / "kernelgen-device-locks"
SCRATCH_PREFIX = "kernelgen-batch-"  # a task's scratch folder on its node: <prefix><name>-pid<worker pid>-*
DRIVER_ENV = ("OMP_NUM_THREADS",)  # set by Ray in a task (to its CPU count); the steps get the driver's


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


def _placement(device: str) -> tuple[str, list[str]]:
    """Where Ray placed this task: (a label for reports, the ids of its devices)."""
    import ray

    node = ray.util.get_node_ip_address()
    resource = ACCELERATORS.get(device)
    if resource is None:  # a CPU task has no device id: the worker process tells the slots apart
        return f"{node} cpu (pid {os.getpid()})", []
    ids = [str(i) for i in ray.get_runtime_context().get_accelerator_ids().get(resource, [])]
    return f"{node} {resource} {','.join(ids)}", ids


def step_env(device: str, ids: list[str], driver_env: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """The environment of a task's steps: `environ` (the Ray worker's), pinned to the task's devices
    `ids` with their node-wide device lock (a lock the user set is kept), and the driver's values of
    DRIVER_ENV in place of Ray's."""
    env = {k: v for k, v in environ.items() if k not in DRIVER_ENV}
    env.update(driver_env)
    if not environ.get("KERNELGEN_SERVICE_IDLE"):  # the task's service serves nobody once the batch is over
        env["KERNELGEN_SERVICE_IDLE"] = str(SERVICE_IDLE_S)
    if ids:
        lock_dir = None if environ.get(LOCK_ENV) else LOCK_DIR
        env.update(Target(device, ",".join(ids), 0).env(lock_dir))  # type: ignore[arg-type]
    else:
        env["KERNELGEN_DEVICE"] = device if device in ACCELERATORS else "cpu"
    return env


class Note(NamedTuple):
    """What a task tells the driver while it runs: it started, a step, or a copy of its folder."""

    name: str
    kind: str  # start | step | folder
    where: str
    message: str = ""
    folder: bytes = b""  # with kind == "folder": the operator folder (artifacts.pack)
    log: str = ""  # with kind == "folder": the job's log since the last copy


class Inbox:
    """A Ray actor (no CPU of its own) that collects the tasks' notes for the driver.
    Tasks send without waiting: a task blocked on a Ray call lends its CPU to the next task, which
    would put two operators on one worker slot."""

    def __init__(self) -> None:
        self.items: list[Note] = []

    def put(self, item: Note) -> None:
        self.items.append(item)

    def take(self) -> list[Note]:
        items, self.items = self.items, []
        return items


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _scratch(name: str) -> Path:
    """A fresh scratch folder for this task, named with its worker's pid. A worker that was killed
    never removed its own: those of dead workers on this node are removed first."""
    tmp = Path(tempfile.gettempdir())
    for old in tmp.glob(f"{SCRATCH_PREFIX}*-pid*-*"):
        m = re.search(r"-pid(\d+)-", old.name)  # operator names have no '-': the pid is unambiguous
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{name}-pid{os.getpid()}-", dir=tmp))


def run_remote(request_json: str, spec_text: str, folder: bytes, inbox: Any,
               driver_env: dict[str, str]) -> tuple[str, bytes, str]:
    """The task body, on whichever node Ray picked: returns (result JSON, operator folder, the log
    since the last copy sent)."""
    req = JobRequest.model_validate_json(request_json)
    scratch = _scratch(req.name)
    try:
        out_root = scratch / "out"
        artifacts.unpack(out_root, folder)
        spec_file = scratch / "spec" / Path(req.spec_file).name  # the driver's file: a derived spec is YAML
        spec_file.parent.mkdir()
        spec_file.write_text(spec_text, encoding="utf-8")
        log = scratch / "job.log"
        local = req.model_copy(update={"spec_file": str(spec_file), "out_root": str(out_root), "log_file": str(log)})
        where, ids = _placement(req.device)
        env = step_env(req.device, ids, driver_env, dict(os.environ))
        shown = " ".join(f"{k}={env[k]}" for k in (*PIN_VARS.values(), LOCK_ENV, *DRIVER_ENV) if k in env)
        log.write_text(f"\n[{now()}] ray task on {where}, worker pid {os.getpid()}: {shown or 'no pinning variable set'}\n",
                       encoding="utf-8")
        inbox.put.remote(Note(req.name, "start", where))

        def ship(data: bytes, text: str, what: str) -> None:
            inbox.put.remote(Note(req.name, "folder", where, what, data, text))

        with FolderShipper(out_root, req.name, log, ship) as shipper:
            result = run_job(local, where, on_step=lambda msg: inbox.put.remote(Note(req.name, "step", where, msg)), env=env)
        data, text = shipper.final()
        return result.model_dump_json(), data, text
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

    def device_model(self) -> str:
        return self.device  # the cluster's nodes may hold several models: the kind is what is compared

    def describe(self) -> str:
        res = ACCELERATORS.get(self.device, "CPU")
        where = self.address or "a local Ray instance"
        return f"ray: {where}, {self.resources.get(res, 0):g} {res} (one operator per {res})"

    def run(self, jobs: list[JobRequest], on_event: OnEvent) -> list[JobResult]:
        ray = self.ray
        emit = serialized(on_event)
        inbox = ray.remote(num_cpus=0)(Inbox).remote()
        task = ray.remote(run_remote).options(**task_resources(self.device), max_retries=0)
        driver_env = {k: os.environ[k] for k in DRIVER_ENV if k in os.environ}
        pending: dict[Any, JobRequest] = {}
        for job in jobs:
            # the operator folder and an unfinished `new`'s LLM exchanges, whose replies the task reuses
            entries = [e for e in artifacts.operator_entries(Path(job.out_root), job.name) if ".previous-" not in e]
            folder = artifacts.pack(Path(job.out_root), entries)
            spec_text = Path(job.spec_file).read_text(encoding="utf-8")
            pending[task.remote(job.model_dump_json(), spec_text, folder, inbox, driver_env)] = job
        landing = Landing({j.name: j for j in jobs}, emit)
        results: dict[str, JobResult] = {}

        def drain() -> None:
            for note in ray.get(inbox.take.remote()):
                landing.receive(note)

        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                drain()
                for ref in ready:
                    job = pending.pop(ref)
                    results[job.name] = self._collect(ref, job, landing)
                    emit(Event(job.name, "done", results[job.name].target, result=results[job.name]))
            drain()  # a copy a task sent just before it died may arrive after its death was noticed
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        finally:
            ray.kill(inbox)
        return [results[j.name] for j in jobs]

    def _collect(self, ref: Any, job: JobRequest, landing: Landing) -> JobResult:
        try:
            result_json, folder, log_text = self.ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a task that died (worker killed, node lost) is one failed job
            first = str(e).splitlines()[0] if str(e) else ""
            return error_result(job, landing.placed.get(job.name, ""),
                                f"the Ray task failed: {type(e).__name__}: {first} {landing.kept(job.name)}; "
                                f"a later run resumes this operator")
        landing.land(job, folder, log_text)
        return JobResult.model_validate_json(result_json)


class Landing:
    """The driver's side of the tasks' notes: progress events, and each operator folder that comes
    back (a copy after a round, the whole folder at the end) put into `--out` with its log."""

    def __init__(self, jobs: dict[str, JobRequest], emit: OnEvent):
        self.jobs, self.emit = jobs, emit
        self.placed: dict[str, str] = {}  # where Ray placed each task
        self.saved: dict[str, str] = {}  # what the last copy of each folder held
        self.landed: set[str] = set()  # operators whose final folder is in: later copies are older

    def receive(self, note: Note) -> None:
        if note.kind == "start":
            self.placed[note.name] = note.where
            self.emit(Event(note.name, "start", note.where))
        elif note.kind == "step":
            self.emit(Event(note.name, "step", note.where, note.message))
        elif note.kind == "folder" and note.name not in self.landed:
            self._put(self.jobs[note.name], note.folder, note.log)
            self.saved[note.name] = note.message
            self.emit(Event(note.name, "step", note.where, f"{note.message}: the folder is back in --out"))

    def land(self, job: JobRequest, folder: bytes, log_text: str) -> None:
        self._put(job, folder, log_text)
        self.landed.add(job.name)

    def kept(self, name: str) -> str:
        if name in self.saved:
            return f"(--out keeps its folder as of the last round that finished: {self.saved[name]})"
        return "(no round finished in this run)"

    @staticmethod
    def _put(job: JobRequest, folder: bytes, log_text: str) -> None:
        artifacts.unpack(Path(job.out_root), folder)
        log = Path(job.log_file)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as f:
            f.write(log_text)
