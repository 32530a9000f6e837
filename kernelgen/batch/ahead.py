"""An operator's baselines (eager, torch.compile, the peer libraries) timed ahead of its kernel: a job
starts kernelgen.verify.judge.ahead when it starts `new`, so their compiles (51 of the 76 s `bench`
took on level 2's Conv2D_ReLU_BiasAdd on an H100, 2026-11-27) run while the kernel is generated and
checked, and `new`'s measurement finds them in the baseline cache (waiting for what is still being
timed: kernelgen.verify.judge.baselinetimes). Timings still take the device lock one at a time.

**The next operator's too.** A local worker is told which operator is likely to come after the one it
starts (kernelgen.batch.placement.JobQueue.upcoming: the head of the queue, where its baselines' memory
fits beside this operator's). Once this operator's `new` is done, that operator's baselines are timed
ahead in the background while this one optimizes; when it starts (here or on another GPU of the same
model), its own process finds them timed or claimed, and its judge waits for what is still claimed.

The process is forked from the worker like a step (kernelgen.batch.stepfork), else exec'd; it ties
itself to the worker and runs in a process group of its own, stopped with the steps when the worker
is told to stop. Its output goes to `<operator>.baselines.log` beside the operator's log. Its seconds
are the job's `baselines` record: time beside `new`, not added to the job's own.

`KERNELGEN_BATCH_BASELINES`: `auto` (the default: on a GPU; under the CPU interpreter a measurement
times eager alone, a dry run that costs less than the process's start), `on`, `off`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from kernelgen.batch.phases import baseline_split
from kernelgen.batch.resume import StepRecord
from kernelgen.batch.step import STOP_GRACE_S, start_tracked, untrack
from kernelgen.batch.stepfork import ForkedStep, fork_step, forking
from kernelgen.errors import UsageError
from kernelgen.fsutil import now
from kernelgen.lifetime import child_env

ENV = "KERNELGEN_BATCH_BASELINES"
ENTRY = "kernelgen.verify.judge.ahead"
STEP = "baselines"  # its record's name


def wanted(device: str, env: dict[str, str] | None = None) -> bool:
    """Whether a job on `device` (as `new` is told it; `auto` reads the worker's KERNELGEN_DEVICE) times
    its baselines ahead."""
    environ = os.environ if env is None else env
    choice = environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", "on", "off"):
        raise UsageError(f"{ENV}={choice}: choose auto, on or off")
    if choice != "auto":
        return choice == "on"
    kind = environ.get("KERNELGEN_DEVICE", "auto") if device == "auto" else device
    return kind not in ("cpu", "auto")


class Ahead:
    """The process timing one operator's baselines, started at once."""

    def __init__(self, spec_file: str, device: str, log_file: Path, env: dict[str, str] | None = None):
        self.log_file = log_file
        self.started = time.monotonic()
        self.ended: float | None = None
        self.split: dict[str, float] = {}  # where its cases' seconds went, from its lines (kernelgen.batch.phases)
        args = [spec_file, "--device", device]
        if forking():
            self.proc: subprocess.Popen | ForkedStep = start_tracked(lambda: fork_step(args, child_env(env), ENTRY))
        else:
            self.proc = start_tracked(lambda: subprocess.Popen(
                [sys.executable, "-m", ENTRY, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, errors="replace", env=child_env(env), start_new_session=True))
        self._reader = threading.Thread(target=self._copy, name="baselines ahead", daemon=True)
        self._reader.start()

    def _copy(self) -> None:
        """Its output into its log, as it comes; its end is when its output ends."""
        assert self.proc.stdout is not None
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "a", encoding="utf-8") as log:
            log.write(f"\n[{now()}] baselines timed ahead ({ENTRY})\n")
            log.flush()
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                for part, sec in baseline_split(line).items():
                    self.split[part] = self.split.get(part, 0.0) + sec
        self.ended = time.monotonic()

    def finish(self, *, stop: bool, limit_s: float = 3600.0) -> StepRecord:
        """Its record, once it has ended: waited for (at most `limit_s`), or, with `stop` (its timings are
        no longer wanted), interrupted as Ctrl-C would (its claims released), then killed."""
        if stop:
            self._signal(signal.SIGINT)
            limit_s = STOP_GRACE_S
        try:
            rc: int | None = self.proc.wait(timeout=limit_s)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            rc = None
            self.proc.wait()
        finally:
            untrack(self.proc)
        self._reader.join(timeout=5.0)
        seconds = (self.ended or time.monotonic()) - self.started
        # the rest: the process's start and imports, and the peers' child it waits for after the cases
        phases = {**self.split, "start and peers": max(0.0, seconds - sum(self.split.values()))} if self.split else {}
        return StepRecord(step=STEP, exit_code=rc, seconds=round(seconds, 2),
                          phases={f"{STEP}: {k}": round(v, 2) for k, v in phases.items()})

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


_background: list[Ahead] = []  # the next operators' (see the module's docstring), until reaped


def in_background(ahead: Ahead) -> None:
    """Keep `ahead` running past this job; reaped by a later `reap_background`."""
    reap_background()
    _background.append(ahead)


def reap_background(*, wait: bool = False) -> None:
    """Collect the background processes that ended; with `wait`, wait for the rest too (the worker is
    done, but the operator they time may be starting on another GPU and wait for them). A worker told
    to stop interrupts them with its steps (kernelgen.batch.step.stop_running_steps)."""
    for ahead in list(_background):
        if wait or ahead.proc.poll() is not None:
            ahead.finish(stop=False)
            _background.remove(ahead)
