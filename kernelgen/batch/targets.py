"""Where a local batch runs: the devices `--gpus` names, each a `Target` whose environment pins one
worker process to one device (`CUDA_VISIBLE_DEVICES`, or `ASCEND_RT_VISIBLE_DEVICES` on Ascend).

Without a GPU, `--gpus N` means N Triton-interpreter workers on the CPU (their timings stay
labelled as dry runs) and `--gpus all` means one. `--per-gpu N` gives each GPU N workers; `auto` (the
default) gives it AUTO_WORKERS, fewer where the host has few CPU cores: how many of them actually
run at once is the memory's to decide (kernelgen.batch.placement)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelgen.devices import PIN_VARS
from kernelgen.errors import UsageError
from kernelgen.gpus import pick_ids, visible_devices
from kernelgen.verify.judge.devicelock import ENV as LOCK_ENV

Kind = Literal["cuda", "npu", "cpu"]
# Workers per GPU under `--per-gpu auto`. An operator's wall time is mostly CPU work (process starts,
# imports, JIT compiles, generation), which the workers sharing a GPU overlap while every timing holds
# the GPU alone (its device lock); three kept one H100 busy in the issue-39 runs, and each worker
# wants about two cores of its own.
AUTO_WORKERS = 3
CORES_PER_WORKER = 2


def workers_per_gpu(per_gpu: str | int, gpus: int) -> int:
    """`--per-gpu` as a number of workers per GPU (`auto`: AUTO_WORKERS where the cores allow)."""
    text = str(per_gpu).strip()
    if text == "auto":
        return max(1, min(AUTO_WORKERS, (os.cpu_count() or 1) // (CORES_PER_WORKER * max(1, gpus))))
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--per-gpu {per_gpu}: a count of workers per GPU (at least one), or auto")
    return int(text)


@dataclass(frozen=True)
class Target:
    kind: Kind
    device_id: str | None  # as the pinning variable takes it ("3", or a GPU UUID); None on the CPU
    slot: int
    share: int = 0  # which of the device's workers (--per-gpu): 0 for the first

    @property
    def label(self) -> str:
        if self.device_id is None:
            return f"cpu#{self.slot}"
        return f"{self.kind}:{self.device_id}" + (f"#{self.share}" if self.share else "")

    @property
    def device_key(self) -> tuple[str, str | None]:
        """The device itself: the same for every worker sharing it."""
        return (self.kind, self.device_id if self.device_id is not None else str(self.slot))

    def env(self, lock_dir: Path | None = None) -> dict[str, str]:
        """Variables for the worker process: its one device, and a device lock of its own as a second
        guard (one operator at a time per device already keeps timings apart). A lock the user set
        is kept: it may be shared with KernelGen runs outside this batch."""
        if self.kind == "cpu":
            return {"KERNELGEN_DEVICE": "cpu"}
        env = {PIN_VARS[self.kind]: str(self.device_id), "KERNELGEN_DEVICE": self.kind}
        if lock_dir is not None and not os.environ.get(LOCK_ENV):
            env[LOCK_ENV] = str(Path(lock_dir) / f"{self.kind}{self.device_id}.lock")
        return env


def parse_gpus(gpus: str, kind: Kind, ids: list[str], per_gpu: int = 1) -> list[Target]:
    """`all`, a count `N`, or a comma-separated list of ids (`0,1`; one id alone as `3,`); without
    a GPU, a count of Triton-interpreter workers. `per_gpu` workers share each GPU: their generation,
    compilation and checks overlap, while every timing holds the GPU's lock alone (a check holds it
    shared), so no timing runs beside other work of theirs on that GPU."""
    if per_gpu < 1:
        raise UsageError(f"--per-gpu {per_gpu}: at least one worker per GPU")
    if kind != "cpu" and per_gpu > 1:
        return [Target(t.kind, t.device_id, t.slot * per_gpu + j, share=j)
                for t in parse_gpus(gpus, kind, ids) for j in range(per_gpu)]
    if kind == "cpu":
        gpus = gpus.strip()
        if gpus == "all":
            return [Target("cpu", None, 0)]
        if gpus.isdigit() and int(gpus) >= 1:
            return [Target("cpu", None, i) for i in range(int(gpus))]
        if "," in gpus:
            raise UsageError(f"--gpus {gpus}: no GPU is visible, so there are no ids to pick",
                             hint="give a count (--gpus 2) for that many Triton-interpreter workers on the CPU")
    return [Target(kind, d, i) for i, d in enumerate(pick_ids(gpus, kind, ids))]


def plan_targets(gpus: str, device: str = "auto", per_gpu: str | int = "auto") -> list[Target]:
    kind, ids = visible_devices(device)
    if kind == "cpu":
        workers_per_gpu(per_gpu, 1)  # refused if it is not a count or auto; meaningless without a GPU
        return parse_gpus(gpus, kind, ids)
    return parse_gpus(gpus, kind, ids, workers_per_gpu(per_gpu, len(pick_ids(gpus, kind, ids))))
