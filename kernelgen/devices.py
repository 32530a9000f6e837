"""Which device generated code runs on: CUDA (ROCm also reports as cuda), Ascend NPU where
`torch_npu` is importable, otherwise the CPU through Triton's interpreter."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

DeviceChoice = Literal["auto", "cuda", "npu", "cpu"]

# The label every number taken under the interpreter carries, on screen, in the log and the report.
DRY_RUN_LABEL = "interpreter dry run — not a measurement"
INTERPRETER_WARNING = (
    "CPU / Triton interpreter: timings are NOT measurements (the interpreter runs kernels in numpy, "
    "thousands of times slower than a GPU); use them only as a dry run."
)


# The variable that pins a process to some of this host's devices, per kind. Ids are as the variable
# takes them ("3", or a GPU UUID); a pinned process sees its one device as <kind>:0.
PIN_VARS: dict[str, str] = {"cuda": "CUDA_VISIBLE_DEVICES", "npu": "ASCEND_RT_VISIBLE_DEVICES"}


@dataclass(frozen=True)
class DeviceInfo:
    kind: Literal["cuda", "npu", "cpu"]
    torch_device: str  # what torch.empty(..., device=...) takes, in this process
    interpreter: bool  # Triton runs through TRITON_INTERPRET=1
    # Where the judge's sandboxed workers run, when not where this process runs: the id their
    # PIN_VARS variable is set to (a worker on another GPU of the host; inputs and outputs cross
    # through host memory, so the judge's own tensors stay on `torch_device`). On the CPU only a name.
    pin: str | None = None
    lock: str | None = None  # that device's lock file (kernelgen.verify.judge.devicelock); None: KERNELGEN_DEVICE_LOCK

    @property
    def label(self) -> str:
        """The device as a person names it: cuda:3 for a pinned one, else the kind (with the id this
        process is pinned to by the environment, where it names exactly one)."""
        if self.pin is not None:
            return f"{self.kind}:{self.pin}"
        own = os.environ.get(PIN_VARS.get(self.kind, ""), "")
        return f"{self.kind}:{own}" if own and "," not in own else self.kind

    def elsewhere(self, pin: str, lock: str | None) -> "DeviceInfo":
        """The same kind of device with workers on device `pin` (its lock `lock`), judged from here."""
        return replace(self, pin=pin, lock=lock)

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


def make_current(info: DeviceInfo) -> None:
    """Make `info.torch_device` this thread's current device (CUDA and NPU keep one per thread):
    what timings and the driver's facts use when they name no device."""
    import torch

    if info.kind == "cuda" and ":" in info.torch_device:
        torch.cuda.set_device(info.torch_device)
    elif info.kind == "npu" and ":" in info.torch_device:
        torch.npu.set_device(info.torch_device)  # type: ignore[attr-defined]


def synchronize(info: DeviceInfo) -> None:
    import torch

    if info.kind == "cuda":
        torch.cuda.synchronize()
    elif info.kind == "npu":
        torch.npu.synchronize()  # type: ignore[attr-defined]


class DeviceFacts(BaseModel):
    """What a kernel writer needs to know about the device, read from the driver (never measured,
    never guessed): the prompt's device section. Measured ceilings live in kernelgen.verify.judge.peaks.
    A field the driver does not report is None and is left out of the prompt."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["cuda", "npu", "cpu"]
    name: str
    interpreter: bool  # kernels run through TRITON_INTERPRET=1: nothing timed here is a measurement
    sm_count: int | None = None  # streaming multiprocessors (compute units on ROCm, AI cores on an NPU)
    l2_bytes: int | None = None
    smem_per_sm_bytes: int | None = None  # shared memory per SM
    smem_per_block_bytes: int | None = None  # the most one program may use (the opt-in limit where reported)
    regs_per_sm: int | None = None  # 32-bit registers per SM
    warp_size: int | None = None
    compute_capability: str | None = None  # "9.0"; ROCm: the gfx architecture name
    torch_version: str
    triton_version: str


def _triton_version() -> str:
    try:
        import triton

        return str(triton.__version__)
    except Exception:  # noqa: BLE001 - an installation without Triton still has facts to state
        return "not installed"


def _positive(props: Any, name: str) -> int | None:
    value = getattr(props, name, None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _cuda_facts(props: Any) -> dict[str, Any]:
    """Fields of torch.cuda.get_device_properties; attributes an older torch lacks stay None."""
    arch = str(getattr(props, "gcnArchName", "") or "")
    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    capability = arch.split(":")[0] if arch.startswith("gfx") else (f"{major}.{minor}" if major is not None else None)
    return {
        "sm_count": _positive(props, "multi_processor_count"),
        "l2_bytes": _positive(props, "L2_cache_size"),
        "smem_per_sm_bytes": _positive(props, "shared_memory_per_multiprocessor"),
        "smem_per_block_bytes": _positive(props, "shared_memory_per_block_optin") or _positive(props, "shared_memory_per_block"),
        "regs_per_sm": _positive(props, "regs_per_multiprocessor"),
        "warp_size": _positive(props, "warp_size"),
        "compute_capability": capability,
    }


def device_facts(info: DeviceInfo) -> DeviceFacts:
    """The device's static properties and the library versions, as the driver reports them."""
    import torch

    versions = {"torch_version": str(torch.__version__), "triton_version": _triton_version()}
    if info.kind == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return DeviceFacts(kind="cuda", name=str(props.name), interpreter=info.interpreter, **_cuda_facts(props), **versions)
    if info.kind == "npu":
        props = torch.npu.get_device_properties(torch.npu.current_device())  # type: ignore[attr-defined]
        return DeviceFacts(kind="npu", name=str(getattr(props, "name", "Ascend NPU")), interpreter=info.interpreter,
                           sm_count=_positive(props, "cube_core_num"), l2_bytes=_positive(props, "L2_cache_size"), **versions)
    return DeviceFacts(kind="cpu", name=device_name(info), interpreter=True, **versions)
