"""Which device generated code runs on: CUDA (ROCm also reports as cuda), Ascend NPU where
`torch_npu` is importable, otherwise the CPU through Triton's interpreter."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Literal

DeviceChoice = Literal["auto", "cuda", "npu", "cpu"]

# The label every number taken under the interpreter carries, on screen, in the log and the report.
DRY_RUN_LABEL = "interpreter dry run — not a measurement"
INTERPRETER_WARNING = (
    "CPU / Triton interpreter: timings are NOT measurements (the interpreter runs kernels in numpy, "
    "thousands of times slower than a GPU); use them only as a dry run."
)


@dataclass(frozen=True)
class DeviceInfo:
    kind: Literal["cuda", "npu", "cpu"]
    torch_device: str  # what torch.empty(..., device=...) takes
    interpreter: bool  # Triton runs through TRITON_INTERPRET=1

    def child_env(self) -> dict[str, str]:
        """Variables a child process needs before it imports a kernel."""
        env = {"KERNELGEN_DEVICE": self.kind}
        if self.interpreter:
            env["TRITON_INTERPRET"] = "1"
        return env


def _npu_available() -> bool:
    if importlib.util.find_spec("torch_npu") is None:
        return False
    import torch
    import torch_npu  # noqa: F401  (registers torch.npu)

    return bool(getattr(torch, "npu", None) and torch.npu.is_available())


def resolve_device(choice: str = "auto") -> DeviceInfo:
    """Pick the device; `auto` prefers CUDA, then NPU, then the CPU interpreter."""
    import torch

    from kernelgen.errors import UsageError

    if choice == "auto":
        choice = os.environ.get("KERNELGEN_DEVICE", "auto")
    if choice == "auto":
        if torch.cuda.is_available():
            choice = "cuda"
        elif _npu_available():
            choice = "npu"
        else:
            choice = "cpu"
    if choice == "cuda":
        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA (or ROCm) device is visible to PyTorch", hint="use --device cpu")
        return DeviceInfo("cuda", "cuda", interpreter=False)
    if choice == "npu":
        if not _npu_available():
            raise UsageError("--device npu: torch_npu is not importable or sees no NPU", hint="use --device cpu")
        return DeviceInfo("npu", "npu", interpreter=False)
    if choice == "cpu":
        return DeviceInfo("cpu", "cpu", interpreter=True)
    raise UsageError(f"unknown device {choice!r}; choose auto, cuda, npu or cpu")


def device_name(info: DeviceInfo) -> str:
    import torch

    if info.kind == "cuda":
        return torch.cuda.get_device_name()
    if info.kind == "npu":
        return str(torch.npu.get_device_name())  # type: ignore[attr-defined]
    return "cpu (Triton interpreter)"


def synchronize(info: DeviceInfo) -> None:
    import torch

    if info.kind == "cuda":
        torch.cuda.synchronize()
    elif info.kind == "npu":
        torch.npu.synchronize()  # type: ignore[attr-defined]
