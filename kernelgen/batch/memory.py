"""Memory that fits: before an operator starts on a GPU that other operators of the batch share
(`--per-gpu N`), its perf case's memory need is compared with the GPU's free memory, and it waits for
room — or a smaller operator that fits goes first — instead of failing with an out-of-memory error.

- **The need** (`perf_memory_need`): the reference run once on shape-only ('meta') tensors at the
  perf case, the bytes alive at once tracked tensor by tensor (inputs, intermediates, outputs: what
  eager holds at its peak), plus a second copy of the inputs and of the outputs (the sandboxed worker
  holds its own, and the candidate's outputs beside eager's). The largest over the perf cases and
  timed dtypes. An estimate: torch.compile's workspace and the allocator's rounding are not in it.
- **The room**: the GPU's free memory as the driver reports it (`nvidia-smi`, so the batch's driver
  opens no CUDA context of its own), and at most its total less what the operators running there
  reserved (one that just started has not allocated yet).
- An operator alone on its GPU always starts: waiting could not make room, and if it does not fit,
  its own out-of-memory error says so.
"""

from __future__ import annotations

import subprocess
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kernelgen.batch.job import JobRequest
from kernelgen.batch.targets import Target

GiB = 1 << 30
POLL_S = 2.0  # how often a waiting operator looks at the free memory again
Probe = Callable[[str], "tuple[int, int] | None"]  # device id -> (free, total) bytes, None when unknown


def _live_peak(spec: Any, case: dict[str, list[int]], dtype: str) -> tuple[int, int, int]:
    """(peak bytes alive, input bytes, output bytes) of the reference on meta tensors."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from kernelgen.spec import load_reference, torch_dtype

    alive = {"now": 0, "peak": 0}

    def count(t: Any) -> None:
        size = t.numel() * t.element_size()
        alive["now"] += size
        alive["peak"] = max(alive["peak"], alive["now"])
        weakref.finalize(t, lambda: alive.__setitem__("now", alive["now"] - size))

    class Track(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            if getattr(func, "is_view", False):
                return out  # a view shares its base's memory
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor) and not any(t is a for a in args):  # an in-place op returns its input
                    count(t)
            return out

    inputs = [torch.empty(case[i.name], dtype=torch_dtype(spec.input_dtype(i, dtype)), device="meta") for i in spec.inputs]
    for t in inputs:
        count(t)
    with Track():
        out = load_reference(spec)(*inputs, **spec.param_defaults)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if isinstance(o, torch.Tensor)]
    return alive["peak"], sum(t.numel() * t.element_size() for t in inputs), sum(o.numel() * o.element_size() for o in outs)


def perf_memory_need(spec: Any) -> int | None:
    """Bytes an operator's perf case needs on the device (see the module's docstring); None when the
    reference cannot run on meta tensors."""
    need = None
    for case in spec.effective_perf_cases:
        for dtype in spec.effective_perf_dtypes:
            try:
                peak, inputs, outputs = _live_peak(spec, case, dtype)
            except Exception:  # noqa: BLE001 - a reference without meta kernels: no estimate, no gate
                return None
            need = max(need or 0, peak + inputs + outputs)
    return need


def job_memory_need(job: JobRequest) -> int | None:
    from kernelgen.spec.given import read_spec

    try:
        return perf_memory_need(read_spec(Path(job.spec_file)).spec)
    except Exception:  # noqa: BLE001 - a spec that does not read is the job's to report, not the scheduler's
        return None


def nvidia_smi_probe(device_id: str) -> tuple[int, int] | None:
    """(free, total) bytes of one GPU as the driver reports them; None without nvidia-smi."""
    try:
        text = subprocess.run(["nvidia-smi", "--query-gpu=memory.free,memory.total", "--format=csv,noheader,nounits",
                               "-i", device_id], capture_output=True, text=True, timeout=20, check=True).stdout
        free, total = (int(v) for v in text.strip().splitlines()[0].split(","))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return free << 20, total << 20


def _gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


@dataclass
class JobQueue:
    """The batch's queue of operators, taken by workers as their GPU has room for them."""

    jobs: list[JobRequest]
    need_of: Callable[[JobRequest], int | None] = job_memory_need  # asked once per operator, when it must wait its turn
    probe: Probe | None = None  # None: no memory gate (the CPU, an NPU, or no way to ask)
    on_wait: Callable[[JobRequest, Target, str], None] = lambda job, target, message: None
    poll_s: float = POLL_S

    def __post_init__(self) -> None:
        self._cond = threading.Condition()
        self._running: dict[tuple, dict[str, int]] = {}  # device -> {operator: bytes reserved}
        self._told: set[str] = set()
        self.needs: dict[str, int | None] = {}

    def _gates(self, target: Target) -> bool:
        return self.probe is not None and target.kind == "cuda" and target.device_id is not None

    def _need(self, job: JobRequest) -> int | None:
        if job.name not in self.needs:
            self.needs[job.name] = self.need_of(job)
        return self.needs[job.name]

    def _fits(self, job: JobRequest, target: Target, room: tuple[int, int] | None) -> bool:
        need = self._need(job)
        if need is None or room is None:
            return True
        free, total = room
        return need <= min(free, total - sum(self._running.get(target.device_key, {}).values()))

    def take(self, target: Target) -> JobRequest | None:
        """The first operator that fits on `target`'s GPU now (waiting while none does and others run
        there); None when the queue is empty."""
        with self._cond:
            while self.jobs:
                here = self._running.setdefault(target.device_key, {})
                gated = self._gates(target) and bool(here)
                room = self.probe(str(target.device_id)) if gated else None  # type: ignore[misc]
                job = next((j for j in self.jobs if not gated or self._fits(j, target, room)), None)
                if job is not None:
                    self.jobs.remove(job)
                    # reserved until it ends: free memory shows its need only once it has allocated
                    here[job.name] = (self._need(job) or 0) if self._gates(target) else 0
                    return job
                first = self.jobs[0]
                if first.name not in self._told and room is not None:
                    self._told.add(first.name)
                    self.on_wait(first, target, f"waiting for room on {target.label}: its perf case needs about "
                                                f"{_gib(self._need(first) or 0)}, {_gib(room[0])} free and "
                                                f"{len(here)} operator(s) of the batch running there")
                self._cond.wait(self.poll_s)
            return None

    def done(self, target: Target, job: JobRequest) -> None:
        with self._cond:
            self._running.get(target.device_key, {}).pop(job.name, None)
            self._cond.notify_all()
