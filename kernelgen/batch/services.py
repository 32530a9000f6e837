"""The KernelGen services (kernelgen.verify.judge.service) a batch's steps judge in.

Each worker gets a service of its own: `KERNELGEN_BATCH_WORKER=<its label>` is part of the
environment a service is keyed on, so two workers sharing a GPU never find each other's service busy
and fall back to judging in a fresh process (a torch import, a CUDA context and a worker start, ~5 s
each time on an H100). Those services serve nobody once the batch is over (their keys hold the
batch's own variables), so the batch stops them when it ends; a batch killed with SIGKILL cannot, and
its services stop by themselves after SERVICE_IDLE_S without a command (unless the user set
KERNELGEN_SERVICE_IDLE), holding no tensors meanwhile.
"""

from __future__ import annotations

import os
from pathlib import Path

WORKER_ENV = "KERNELGEN_BATCH_WORKER"
# Steps follow each other within a second or two: two minutes without one means the batch is gone.
SERVICE_IDLE_S = 120


def service_settings(label: str) -> dict[str, str]:
    """The variables a batch worker's steps run with, so they judge in a service of the worker's own."""
    out = {WORKER_ENV: label}
    if not os.environ.get("KERNELGEN_SERVICE_IDLE"):
        out["KERNELGEN_SERVICE_IDLE"] = str(SERVICE_IDLE_S)
    return out


def stop_batch_services(lend_dir: Path) -> list[int]:
    """Stop every service of this user whose environment names this batch's lend folder (every
    worker's steps run with it); the pids asked to stop."""
    from kernelgen.lending import ENV as LEND_ENV
    from kernelgen.serve.client import stop_matching

    try:
        return stop_matching(lambda env: env.get(LEND_ENV) == str(lend_dir))
    except Exception:  # noqa: BLE001 - no runtime folder, a service that does not answer: they idle out
        return []
