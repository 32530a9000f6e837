"""When and where an operator of a local batch starts: on a GPU only when its estimated peak memory
(kernelgen.batch.footprint) fits there, so that memory never decides a result (issue 39: 8 of 64
KernelBench problems ended as "error" or "failed" with a CUDA out-of-memory error at `--per-gpu 3`).

Per GPU, with its workers (`--per-gpu`, or `auto`) taking operators from one shared queue:

- **The room**: the GPU's free memory as the driver reports it (`nvidia-smi`: the driver opens no
  CUDA context of its own), and at most its total less what the operators of the batch already
  running there reserved (one that just started has not allocated yet).
- **Fits**: the first operator in the queue whose need is within the room starts; a smaller one
  that fits goes before a larger one that does not.
- **Alone**: an operator needing more than LARGE_SHARE of the GPU, and one that ran out of memory
  beside others (retried), start only on a GPU where nothing of the batch runs, and nothing else
  starts there until they end. The estimate errs, and beside others an error is an out-of-memory.
- **No starving**: the operator at the head of the queue, once it has waited CLAIM_AFTER_S (or at
  once when nothing else can start either), claims one GPU, which then takes nothing else until the
  claimant fits there; a large one is not kept waiting for ever by a stream of small ones.
- An operator on an idle GPU always starts: waiting could not make room -- except one retried alone,
  which first waits (up to DRAIN_S) for the GPU's free memory to reach its need: what the operators
  before it held is freed only as their processes end (on 4x H100, 2026-11-27, two retries "alone"
  started on a GPU with 51 and 16 GiB of 80 free and ran out of memory again, beside another process
  holding the rest: PyTorch's message named its pid, not what it was). If it runs out of memory there, the batch reports it as `memory`
  (kernelgen.batch.local), never as a wrong kernel.

Without a reading of the GPU's memory (the CPU, no nvidia-smi) only the workers limit what runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from kernelgen.batch.job import JobRequest
from kernelgen.batch.targets import Target

GiB = 1 << 30
POLL_S = 2.0  # how often a waiting operator looks at the free memory again
# Over half the GPU: no second such operator fits beside it anyway, and the estimate's error would
# land on the operators sharing it.
LARGE_SHARE = 0.5
CLAIM_AFTER_S = 30.0  # about one small operator's time: smaller ones may go first for that long
# A retry waits this long at most for an idle GPU's memory to drain: a step's processes and their CUDA
# contexts were gone within 20 s of a killed batch on an H100; beyond that, what holds the memory is
# not the batch's, and waiting could not make room.
DRAIN_S = 60.0
Probe = Callable[[str], "tuple[int, int] | None"]  # device id -> (free, total) bytes, None when unknown
Device = tuple  # Target.device_key


def gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


@dataclass
class _Gpu:
    running: dict[str, int] = field(default_factory=dict)  # operator -> bytes reserved
    alone: str = ""  # an operator running alone here
    claimed: str = ""  # the head of the queue, waiting for this GPU to have room for it


@dataclass
class JobQueue:
    """The batch's queue of operators, taken by workers as their GPU has room for them."""

    jobs: list[JobRequest]
    probe: Probe | None = None  # None: no memory gate (the CPU, an NPU, or no way to ask)
    on_wait: Callable[[JobRequest, Target, str], None] = lambda job, target, message: None
    poll_s: float = POLL_S
    claim_after_s: float = CLAIM_AFTER_S
    drain_s: float = DRAIN_S

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._gpus: dict[Device, _Gpu] = {}
        self._alone: set[str] = set()  # operators retried alone
        self._shared: set[str] = set()  # operators that had another of the batch beside them at some point
        self._told: set[tuple[str, str]] = set()
        self._waiting_since: dict[str, float] = {}
        self._draining: dict[str, float] = {}  # retried operators waiting for an idle GPU's memory, since
        self._ahead: set[str] = set()  # operators whose baselines a running one times ahead
        self._closed = False  # the batch is stopping: nothing more starts

    # --- what an operator needs ---------------------------------------------------------------
    def need(self, job: JobRequest) -> int | None:
        return job.need_bytes

    def _gated(self, target: Target) -> bool:
        return self.probe is not None and target.kind == "cuda" and target.device_id is not None

    def _runs_alone(self, job: JobRequest, room: tuple[int, int] | None) -> bool:
        need = self.need(job)
        return job.name in self._alone or (need is not None and room is not None and need > LARGE_SHARE * room[1])

    def _fits(self, job: JobRequest, gpu: _Gpu, room: tuple[int, int] | None) -> bool:
        need = self.need(job)
        if need is None or room is None:
            return True
        free, total = room
        return need <= min(free, total - sum(gpu.running.values()))

    def _can_start(self, job: JobRequest, gpu: _Gpu, room: tuple[int, int] | None) -> bool:
        if gpu.alone or (gpu.claimed and gpu.claimed != job.name):
            return False
        if not gpu.running:  # an idle GPU: waiting could not make room, but for what is still draining
            return job.name not in self._alone or self._drained(job, room)
        return not self._runs_alone(job, room) and self._fits(job, gpu, room)

    def _drained(self, job: JobRequest, room: tuple[int, int] | None) -> bool:
        """Whether a retried operator may start on an idle GPU: its need is free there, or it has
        waited DRAIN_S for that (or nothing says how much is free)."""
        need = self.need(job)
        if need is None or room is None or room[0] >= min(need, room[1]):
            return True
        since = self._draining.setdefault(job.name, time.monotonic())
        return time.monotonic() - since >= self.drain_s

    # --- taking and giving back ---------------------------------------------------------------
    def take(self, target: Target) -> JobRequest | None:
        """The first operator that may start on `target`'s GPU now (waiting while none may and others
        run there); None when the queue is empty or closed."""
        with self._cond:
            while self.jobs and not self._closed:
                gpu = self._gpus.setdefault(target.device_key, _Gpu())
                room = self.probe(str(target.device_id)) if self._gated(target) else None  # type: ignore[misc]
                head = self.jobs[0]
                if not self._can_start(head, gpu, room):
                    since = self._waiting_since.setdefault(head.name, time.monotonic())
                    if time.monotonic() - since >= self.claim_after_s:
                        self._claim(head, gpu)
                job = next((j for j in self.jobs if self._can_start(j, gpu, room)), None)
                if job is not None:
                    return self._start(job, target, gpu, room)
                self._claim(head, gpu)
                self._wait(head, target, gpu, room)
            return None

    def _start(self, job: JobRequest, target: Target, gpu: _Gpu, room: tuple[int, int] | None) -> JobRequest:
        self.jobs.remove(job)
        self._waiting_since.pop(job.name, None)
        self._draining.pop(job.name, None)
        for other in self._gpus.values():
            if other.claimed == job.name:
                other.claimed = ""
        if self._runs_alone(job, room):
            gpu.alone = job.name
        if gpu.running:
            self._shared.update([job.name, *gpu.running])
        # reserved until it ends: free memory shows its need only once it has allocated
        gpu.running[job.name] = (self.need(job) or 0) if self._gated(target) else 0
        return job

    def _claim(self, head: JobRequest, gpu: _Gpu) -> None:
        if not gpu.alone and not gpu.claimed and not any(g.claimed == head.name for g in self._gpus.values()):
            gpu.claimed = head.name  # the head waits here; nothing else starts here meanwhile

    def _wait(self, head: JobRequest, target: Target, gpu: _Gpu, room: tuple[int, int] | None) -> None:
        if gpu.claimed == head.name and (head.name, target.label) not in self._told:
            self._told.add((head.name, target.label))
            self.on_wait(head, target, self._why_waiting(head, target, gpu, room))
        self._cond.wait(self.poll_s)

    def _why_waiting(self, job: JobRequest, target: Target, gpu: _Gpu, room: tuple[int, int] | None) -> str:
        need = self.need(job)
        if job.name in self._alone and not gpu.running and room is not None:
            return (f"waiting for {target.label}'s memory to drain: it ran out of memory beside other operators and needs "
                    f"about {gib(need or 0)}, {gib(room[0])} free (at most {self.drain_s:.0f} s)")
        if job.name in self._alone:
            return f"waiting for {target.label} to be idle: it ran out of memory beside other operators and runs again alone"
        if self._runs_alone(job, room) and room is not None and need is not None:
            return (f"waiting for {target.label} to be idle: it needs about {gib(need)} of the GPU's {gib(room[1])}, "
                    f"so it runs alone")
        return (f"waiting for room on {target.label}: it needs about {gib(need or 0)}, "
                f"{gib(room[0]) if room else 'an unknown amount'} free and {len(gpu.running)} operator(s) of the batch "
                f"running there")

    def upcoming(self, target: Target, job: JobRequest) -> JobRequest | None:
        """The operator at the head of the queue, for `job` (just taken for `target`) to time its
        baselines ahead (kernelgen.batch.ahead), once each: where they are timed ahead at all and, on a
        GPU whose memory is read, where they fit beside what runs there (`job` has not allocated yet)."""
        with self._cond:
            head = next((j for j in self.jobs if j.ahead and j.name not in self._ahead), None)
            if head is None:
                return None
            if self._gated(target):
                room = self.probe(str(target.device_id))  # type: ignore[misc]
                gpu = self._gpus.setdefault(target.device_key, _Gpu())
                if room is None or head.ahead_bytes is None or head.ahead_bytes > min(
                        room[0] - (job.need_bytes or 0), room[1] - sum(gpu.running.values())):
                    return None
            self._ahead.add(head.name)
            return head

    def close(self) -> None:
        """Start nothing more: every `take`, waiting or to come, returns None. A stopping batch closes its
        queue first: an operator waiting for room would otherwise start on the memory its stopped
        neighbours free, in a worker the stop never saw (what fits a SIGTERM'd batch on 4x H100,
        2026-11-27: two services and a peer process started 8 s after the command had returned)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def done(self, target: Target, job: JobRequest) -> None:
        with self._cond:
            gpu = self._gpus.setdefault(target.device_key, _Gpu())
            gpu.running.pop(job.name, None)
            if gpu.alone == job.name:
                gpu.alone = ""
            self._cond.notify_all()

    def retry_alone(self, job: JobRequest) -> None:
        """Back at the head of the queue, to run again alone on an idle GPU."""
        with self._cond:
            self._alone.add(job.name)
            self._shared.discard(job.name)
            self.jobs.insert(0, job)
            self._cond.notify_all()

    def had_company(self, job: JobRequest) -> bool:
        """Whether another operator of the batch ran on its GPU at some time while it ran."""
        with self._cond:
            return job.name in self._shared
