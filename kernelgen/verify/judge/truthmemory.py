"""What the float64 truth needs and may take (kernelgen.verify.judge.bigtruth decides how to compute it
within that): the whole run's bytes, and the budget -- `KERNELGEN_TRUTH_MEMORY` bytes where set (the hook
tests force bigtruth's other paths with it), else the caller's own (the peers' process), else half the
device's free memory, or of the host's where the truth runs there."""

from __future__ import annotations

import os
from typing import Any

from kernelgen.errors import UsageError

MEMORY_ENV = "KERNELGEN_TRUTH_MEMORY"
FREE_SHARE = 0.5  # of the device's (or host's) free memory the truth may take
INTERMEDIATES = 4  # output-sized float64 tensors a reference holds at once (a chain of a few ops)


def truth_budget(device: Any, instead: int | None = None) -> int:
    """Bytes the truth may take at once on `device`: KERNELGEN_TRUTH_MEMORY, else `instead` where the
    caller has a budget of its own (the peers' process), else half its free memory."""
    import torch

    given = os.environ.get(MEMORY_ENV, "").strip()
    if given:
        try:
            return int(float(given))
        except ValueError:
            raise UsageError(f"{MEMORY_ENV}={given!r} is not a number of bytes",
                             hint=f"unset {MEMORY_ENV} (half the free memory), or give bytes, e.g. 4e9") from None
    if instead is not None:
        return instead
    kind = getattr(device, "type", str(device))
    backend = getattr(torch, kind, None)
    if kind != "cpu" and backend is not None and hasattr(backend, "mem_get_info"):
        free, _ = backend.mem_get_info(device)
        return int(free * FREE_SHARE)
    return host_budget()


def host_budget() -> int:
    """Half the host memory available now (MemAvailable), or 8 GiB where the system does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(int(line.split()[1]) * 1024 * FREE_SHARE)
    except OSError:
        pass
    return 8 << 30


def float64_need(inputs: list[Any], eager: tuple) -> int:
    """Bytes the whole float64 run takes: the inputs in float64 and INTERMEDIATES output-sized float64 tensors."""
    return sum(bytes64(t) for t in inputs) + INTERMEDIATES * sum(bytes64(e) for e in eager)


def bytes64(t: Any) -> int:
    """A tensor's bytes in float64 (its own size where it is not floating point); 0 for a non-tensor."""
    import torch

    if not isinstance(t, torch.Tensor):
        return 0
    return t.numel() * (8 if t.dtype.is_floating_point else t.element_size())
