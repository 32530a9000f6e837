"""The device as the prompts describe it: the driver's facts (kernelgen.devices.device_facts) and the
measured ceilings (the cache kernelgen.verify.judge.peaks writes, or the ones a performance run carried).

`prompt_device` is the one place the prompts get it from; tests replace `device_facts` and
`known_peaks` in this module to stand in for a GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernelgen.devices import DeviceFacts, DeviceInfo, device_facts

if TYPE_CHECKING:
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
