"""Where a local batch runs: the devices `--gpus` names, each a `Target` whose environment pins one
worker process to one device (`CUDA_VISIBLE_DEVICES`, or `ASCEND_RT_VISIBLE_DEVICES` on Ascend).

Without a GPU, `--gpus N` means N Triton-interpreter workers on the CPU (their timings stay
labelled as dry runs) and `--gpus all` means one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelgen.errors import UsageError
from kernelgen.verify.devicelock import ENV as LOCK_ENV

Kind = Literal["cuda", "npu", "cpu"]
PIN_VARS: dict[str, str] = {"cuda": "CUDA_VISIBLE_DEVICES", "npu": "ASCEND_RT_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class Target:
    kind: Kind
    device_id: str | None  # as the pinning variable takes it ("3", or a GPU UUID); None on the CPU
    slot: int

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.device_id}" if self.device_id is not None else f"cpu#{self.slot}"

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


def _ids_from_env(var: str, count: int) -> list[str]:
    """Device ids as the pinning variable names them: the ones it already lists, else 0..count-1."""
    listed = [s.strip() for s in os.environ.get(var, "").split(",") if s.strip()]
    return listed[:count] if var in os.environ else [str(i) for i in range(count)]


def visible_devices(device: str = "auto") -> tuple[Kind, list[str]]:
    """The accelerator kind and the ids of every device of that kind this host shows."""
    from kernelgen.devices import resolve_device

    info = resolve_device(device)
    if info.kind == "cuda":
        import torch

        return "cuda", _ids_from_env(PIN_VARS["cuda"], torch.cuda.device_count())
    if info.kind == "npu":
        import torch

        return "npu", _ids_from_env(PIN_VARS["npu"], torch.npu.device_count())  # type: ignore[attr-defined]
    return "cpu", []


def parse_gpus(gpus: str, kind: Kind, ids: list[str]) -> list[Target]:
    """`all`, a count `N`, or a comma-separated list of ids (`0,1`; one id alone as `3,`)."""
    gpus = gpus.strip()
    if gpus == "all":
        if kind == "cpu":
            return [Target("cpu", None, 0)]
        return [Target(kind, d, i) for i, d in enumerate(ids)]
    if gpus.isdigit():
        n = int(gpus)
        if n < 1:
            raise UsageError(f"--gpus {gpus}: give at least one worker", hint="--gpus all, a count such as 2, or ids such as 0,1")
        if kind == "cpu":
            return [Target("cpu", None, i) for i in range(n)]
        if n > len(ids):
            raise UsageError(f"--gpus {n}: only {len(ids)} {kind} device(s) are visible ({', '.join(ids) or 'none'})",
                             hint=f"--gpus all, or a count up to {len(ids)}")
        return [Target(kind, d, i) for i, d in enumerate(ids[:n])]
    wanted = [s.strip() for s in gpus.split(",") if s.strip()]
    if not wanted or "," not in gpus:
        raise UsageError(f"--gpus {gpus!r}: not understood", hint="--gpus all, a count such as 2, or ids such as 0,1 (one id alone: 3,)")
    if kind == "cpu":
        raise UsageError(f"--gpus {gpus}: no GPU is visible, so there are no ids to pick",
                         hint="give a count (--gpus 2) for that many Triton-interpreter workers on the CPU")
    unknown = [w for w in wanted if w not in ids]
    if unknown:
        raise UsageError(f"--gpus {gpus}: {', '.join(unknown)} not among the visible {kind} devices ({', '.join(ids)})",
                         hint=f"ids as {PIN_VARS[kind]} / nvidia-smi name them")
    if len(set(wanted)) != len(wanted):
        raise UsageError(f"--gpus {gpus}: an id is named twice")
    return [Target(kind, d, i) for i, d in enumerate(wanted)]


def plan_targets(gpus: str, device: str = "auto") -> list[Target]:
    kind, ids = visible_devices(device)
    return parse_gpus(gpus, kind, ids)
