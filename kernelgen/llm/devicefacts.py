"""The device as the prompts describe it: the driver's facts (kernelgen.devices.device_facts) and the
measured ceilings (the cache kernelgen.verify.judge.peaks writes, or the ones a performance run carried).

`prompt_device` is the one place the prompts get it from; tests replace `device_facts` and
`known_peaks` in this module to stand in for a GPU. `precision_facts` is the one place they read the
float32 precision policy (what the judge holds eager and the kernel to, and the ceiling it implies).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from kernelgen.devices import DeviceFacts, DeviceInfo, device_facts

if TYPE_CHECKING:
    from kernelgen.spec import OperatorSpec
    from kernelgen.verify.results import DevicePeaks


@dataclass(frozen=True)
class PromptDevice:
    facts: DeviceFacts | None  # None: no device given; the kernel is written for an unspecified CUDA GPU
    peaks: DevicePeaks | None  # measured ceilings; None when never measured on this device

    @property
    def read_gbps(self) -> float | None:
        """The measured read-only bandwidth, where the judge's peaks carry one."""
        value = getattr(self.peaks, "read_gbps", None)
        return float(value) if isinstance(value, (int, float)) else None


def known_peaks(device: DeviceInfo) -> DevicePeaks | None:
    """The device's measured ceilings if they were measured before (the cache of kernelgen.verify.judge.peaks);
    never measures here: a prompt is no reason to spend a minute on a benchmark."""
    if device.interpreter or device.kind != "cuda":
        return None
    from kernelgen.devices import device_name
    from kernelgen.verify.judge.peaks import cache_dir
    from kernelgen.verify.results import DevicePeaks

    try:
        name = device_name(device)
        cached = json.loads((cache_dir() / "peaks.json").read_text())
        for key, value in cached.items():
            if key.startswith(f"{name} |"):
                return DevicePeaks.model_validate(value)
    except Exception:  # noqa: BLE001 - no cache, a damaged one, or no CUDA: the prompt goes without
        return None
    return None


def prompt_device(device: DeviceInfo | None, peaks: DevicePeaks | None = None) -> PromptDevice:
    """Facts and ceilings for the prompt. `peaks`: the ceilings a performance run measured against,
    preferred over the cache (they are the ones its fractions of peak were computed from)."""
    if device is None:
        return PromptDevice(facts=None, peaks=peaks)
    facts = device_facts(device)
    if facts.interpreter:
        return PromptDevice(facts=facts, peaks=None)  # nothing is measured on the interpreter
    return PromptDevice(facts=facts, peaks=peaks if peaks is not None else known_peaks(device))


class PrecisionFacts(BaseModel):
    """Float32 products as the judge and the ceilings take them (kernelgen.precision)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tf32: bool  # float32 matmuls may use TF32 (KERNELGEN_TF32): eager's, the ceilings' and tl.dot's default
    conv_tf32: bool  # float32 convolutions may use TF32 (KERNELGEN_CONV_TF32: cuDNN's default, on)
    dot: str  # what `tl.dot` on float32 operands should multiply in on an NVIDIA GPU: "tf32" or "tf32x3"
    multiple: float  # a kernel passes within this multiple of eager's own error against the float64 truth
    ceiling: str  # the float32 matmul ceiling the cost lines use ("tf32x3: ..., 126 TFLOP/s"); "" unmeasured


def precision_facts(peaks: DevicePeaks | None) -> PrecisionFacts:
    """The one place the prompts read the precision policy: the user's TF32 modes, the oracle's
    multiple, and the matmul ceiling they imply. With TF32 off (PyTorch's default), fp32 accuracy on
    the tensor cores is three TF32 products (tf32x3): what the offline generator uses on NVIDIA GPUs
    and the rate the ceiling is (a third of TF32's, above FP32's); "ieee" is FP32 on the FMA units."""
    from kernelgen.verify.judge.oracle import multiplier
    from kernelgen.precision import conv_tf32_enabled, tf32_enabled

    tf32 = tf32_enabled()
    rate, name = peaks.matmul_rate("float32", tf32=tf32) if peaks is not None else (None, "")
    return PrecisionFacts(tf32=tf32, conv_tf32=conv_tf32_enabled(), dot="tf32" if tf32 else "tf32x3",
                          multiple=multiplier("float32"), ceiling=f"{name}, {rate:.0f} TFLOP/s" if rate else "")


def cost_lines(spec: OperatorSpec, peaks: DevicePeaks | None) -> list[str]:
    """The operator analysis (kernelgen.record.analysis) as the prompt states it: per perf case x dtype,
    the bytes and FLOPs, bound and ceiling in the case's own precision, the best possible time. The
    same numbers the log opens with."""
    from kernelgen.record.analysis import analyse_operator

    try:
        analysis = analyse_operator(spec, peaks, tf32=precision_facts(peaks).tf32)
    except Exception:  # noqa: BLE001 - a reference that cannot be analysed: the prompt goes without
        return []
    lines = []
    for c in analysis.cases:
        shapes, dtype, moved, flops, intensity, bound, ceiling, best = c.cells()
        work = f"at least {moved} to move" + (f", {flops} ({intensity} FLOP/byte)" if flops != "—" else "")
        lines.append(f"`{shapes}` {dtype}: {work}; {bound}-bound against {ceiling}; {best} at best")
    where = ("this device's measured ceilings" if analysis.ceilings.measured
             else f"{analysis.ceilings.device_name}, not this machine")
    lines.append(f"Ceilings: {where}. " + " ".join(n for n in analysis.notes if n.startswith("Each case is judged")))
    return lines
