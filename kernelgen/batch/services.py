"""The KernelGen services (kernelgen.verify.judge.service) a batch's steps judge in.

Each worker gets a service of its own: `KERNELGEN_BATCH_WORKER=<its label>` is part of the
environment a service is keyed on, so two workers sharing a GPU never find each other's service busy
and fall back to judging in a fresh process (a torch import, a CUDA context and a worker start, ~5 s
each time on an H100). Those services serve nobody once the batch is over (their keys hold the
batch's own variables), so:

- **The worker owns it** (`WorkerService`): it starts its service as its own child, tied to it
  (kernelgen.lifetime: PR_SET_PDEATHSIG), before its first step, and stops it when it ends. So a
  service dies with its worker however the batch ends: SIGTERM, Ctrl-C, SIGKILL of the driver (the
  worker dies with the driver, the service with the worker, its fork server and workers with it).
  A service left to its steps instead would be started by the first step that found none, in a
  session of its own, and a step that started one as the batch was stopped left a service the batch
  never saw (issue 39: two services and a peer process started 8 s after a SIGTERM'd batch returned).
- **The batch stops the rest** (`stop_batch_services`): one a step started when its worker's was gone
  (never in a batch that runs as it should), stopped when the batch ends. Should one outlive even
  that, it stops by itself after SERVICE_IDLE_S without a command (unless the user set
  KERNELGEN_SERVICE_IDLE), holding no tensors meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelgen.serve.client import Handle

WORKER_ENV = "KERNELGEN_BATCH_WORKER"
# Steps follow each other within a second or two: two minutes without one means the batch is gone.
SERVICE_IDLE_S = 120
STOP_WAIT_S = 5.0  # a service told to stop ends within its accept loop's tick (0.5 s), its fork server with it


def service_settings(label: str) -> dict[str, str]:
    """The variables a batch worker's steps run with, so they judge in a service of the worker's own."""
    out = {WORKER_ENV: label}
    if not os.environ.get("KERNELGEN_SERVICE_IDLE"):
        out["KERNELGEN_SERVICE_IDLE"] = str(SERVICE_IDLE_S)
    return out


class WorkerService:
    """A batch worker's own service: started (not waited for) at once, waited for before the first
    step, so that no step finds it still starting and starts another; stopped with the worker."""

    def __init__(self, device: str):
        from kernelgen.serve import client

        self.proc: subprocess.Popen | None = None
        self.handle: Handle | None = None
        self.why = ""
        try:
            self.handle = client.prepare(device, tied=True)
        except (client.Unusable, OSError) as e:  # the steps then judge without it, as without any service
            self.why = str(e)
        if self.handle is not None:
            self.proc = self.handle.started  # None: one of this worker's label answers already

    def wait(self) -> str:
        """Wait until it answers; why its steps will judge without it ("" when they will use it)."""
        from kernelgen.serve import client

        if self.handle is None:
            return self.why
        try:
            sock, _ = client.wait_ready(self.handle)
        except client.Unusable as e:
            return str(e)
        sock.close()
        return ""

    def stop(self) -> None:
        """Ask it to stop (SIGTERM: it unlinks its socket and closes its fork server), kill it if it
        has not within STOP_WAIT_S. Not one this worker did not start."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_batch_services(lend_dir: Path) -> list[int]:
    """Stop every service of this user whose environment names this batch's lend folder (every
    worker's steps run with it); the pids asked to stop."""
    from kernelgen.lending import ENV as LEND_ENV
    from kernelgen.serve.client import stop_matching

    try:
        return stop_matching(lambda env: env.get(LEND_ENV) == str(lend_dir))
    except Exception:  # noqa: BLE001 - no runtime folder, a service that does not answer: they idle out
        return []
