"""One step of an operator's job: a KernelGen command (`new`, `optimize`, `bench`) in a subprocess of
its own, so a batch gets exactly what a user typing the command gets.

- **Without the imports.** A local batch worker forks its steps from itself, having imported what
  they import once (kernelgen.batch.stepfork): the same CLI, minus ~4-7 s of imports per step.
- **It ends with the batch.** The step ties itself to the worker that started it
  (kernelgen.lifetime: PR_SET_PDEATHSIG), and everything it starts ties itself to it, so a batch
  killed with SIGKILL leaves no step holding a GPU. It runs in a process group of its own: at its
  time limit the group is killed, and a worker told to stop interrupts the group (SIGINT, as Ctrl-C
  would: `new` then removes its staging folder) before killing it.
- **What it says.** Every line goes to the operator's log; its progress lines (`• ...`) go to
  `on_step` and, with the second each arrived, into its phases (kernelgen.batch.phases); its
  `error:` lines, its last lines, and the first line that says the device ran out of memory are kept
  for the job's reason.
- `KERNELGEN_BATCH_STEP_WRAPPER` puts a command in front of every step, e.g. `py-spy record -o
  /tmp/prof/step.svg --` or `nsys profile -o /tmp/prof/step --`, to see inside a step on a GPU.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TypeVar

from kernelgen.batch import phases
from kernelgen.batch.resume import StepRecord
from kernelgen.batch.stepfork import ForkedStep, fork_step, forking
from kernelgen.fsutil import now
from kernelgen.lifetime import child_env

Step = Callable[[str], None]
Proc = TypeVar("Proc", subprocess.Popen, ForkedStep)
PROGRESS_MARK = "•"  # what `kernelgen.cli.progress` puts before each step it prints
TAIL_LINES = 12  # a step's last lines kept for its reason: a traceback ends with the exception and its notes
WRAPPER_ENV = "KERNELGEN_BATCH_STEP_WRAPPER"
STOP_GRACE_S = 10.0  # after SIGINT, how long a step may take to clean up before it is killed
# `python -m kernelgen ARGS`, tied to the process that starts it (a string: the batch imports no CLI)
BOOT = "from kernelgen.lifetime import tie_to_parent; tie_to_parent(); from kernelgen.cli import main; main()"
# What PyTorch, the CUDA runtime, cuBLAS and Ascend say when the device's memory ran out. Triton's
# "out of resource: shared memory" is a kernel's launch configuration, not the device's memory.
OUT_OF_MEMORY = re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation|"
                           r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|NPU out of memory|HIP out of memory")

_running: set[subprocess.Popen | ForkedStep] = set()
_running_lock = threading.Lock()
# A stop asked (from a signal handler, on the main thread) while a step was being started there: run
# once that step is tracked, so it is stopped with the others (kernelgen.batch.worker).
_starting = 0
_deferred: list[Callable[[], None]] = []


@dataclass
class StepOutput:
    record: StepRecord
    errors: list[str] = field(default_factory=list)  # the CLI's `error:` / `hint:` lines
    tail: list[str] = field(default_factory=list)  # its last lines that were not progress: a traceback's last line is there
    out_of_memory: str = ""  # the first line that said the device's memory ran out


def kernelgen_command(*args: str) -> list[str]:
    wrapper = shlex.split(os.environ.get(WRAPPER_ENV, ""))
    return [*wrapper, sys.executable, "-c", BOOT, *args]


def run_step(name: str, args: list[str], log_file: Path, timeout_s: float, on_step: Step,
             env: dict[str, str] | None = None) -> StepOutput:
    """Run one CLI command (in `env`, else this process's environment); its output goes to the log,
    its progress lines to `on_step`."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    out = StepOutput(StepRecord(step=name, exit_code=None, seconds=0.0))
    marks: list[tuple[float, str]] = []
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    with open(log_file, "a", encoding="utf-8") as log:
        log.write(f"\n[{now()}] $ kernelgen {' '.join(args)}\n")
        log.flush()
        proc = start_tracked(lambda: _start(args, env))
        timed_out = threading.Event()
        timer = threading.Timer(timeout_s, lambda: (timed_out.set(), _signal_group(proc, signal.SIGKILL)))
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                _take(line, out, tail, marks, t0, on_step)
            rc = proc.wait()
        finally:
            timer.cancel()
            untrack(proc)
        killed = timed_out.is_set()
        seconds = round(time.monotonic() - t0, 2)
        out.record = StepRecord(step=name, exit_code=None if killed else rc, seconds=seconds,
                                phases=phases.split(name, marks, seconds))
        split = ", ".join(f"{k.split(': ', 1)[1]} {v:.1f} s" for k, v in out.record.phases.items())
        log.write(f"[{now()}] exit {rc}{' (step timeout)' if killed else ''} after {seconds:.1f} s ({split})\n")
    out.tail = list(tail)
    return out


def _start(args: list[str], env: dict[str, str] | None) -> subprocess.Popen | ForkedStep:
    """The step: forked from this worker where it preloaded the imports (kernelgen.batch.stepfork),
    else a fresh process; either way in a session of its own (no terminal: it prints into a pipe)."""
    if forking() and not os.environ.get(WRAPPER_ENV):
        return fork_step(args, child_env(env))
    return subprocess.Popen(kernelgen_command(*args), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", env=child_env(env),
                            start_new_session=True)


def _take(line: str, out: StepOutput, tail: deque[str], marks: list[tuple[float, str]], t0: float, on_step: Step) -> None:
    text = line.strip()
    if not out.out_of_memory and OUT_OF_MEMORY.search(text):
        out.out_of_memory = text
    if text.startswith(PROGRESS_MARK):
        progress = text.lstrip(PROGRESS_MARK).strip()
        marks.append((time.monotonic() - t0, progress))
        on_step(progress)
    elif text.startswith(("error:", "hint:")) or (out.errors and line.startswith("  ")):
        out.errors.append(text)
    elif text:
        tail.append(text)


def start_tracked(start: Callable[[], Proc]) -> Proc:
    """`start()`'s process, tracked (see `track`). A stop asked meanwhile (`when_started`) runs once it
    is tracked: a worker told to stop between the fork and the tracking would see no step to stop and
    stop its service while the step ran on (on the CPU, a batch stopped by SIGTERM as a step started
    saw that step start a second service for its worker)."""
    global _starting
    _starting += 1
    try:
        proc = start()
        track(proc)
    finally:
        _starting -= 1
        if not _starting and _deferred:
            _deferred.pop()()
    return proc


def when_started(stop: Callable[[], None]) -> None:
    """Run `stop` now, or, where it interrupted `start_tracked` (a signal handler runs between two
    lines of the main thread), as soon as that step is tracked."""
    if _starting:
        _deferred.append(stop)
    else:
        stop()


def track(proc: subprocess.Popen | ForkedStep) -> None:
    """`proc`'s process group is stopped with the steps by `stop_running_steps` until `untrack`: a step,
    or the baselines timed beside one (kernelgen.batch.ahead)."""
    with _running_lock:
        _running.add(proc)


def untrack(proc: subprocess.Popen | ForkedStep) -> None:
    with _running_lock:
        _running.discard(proc)


def _signal_group(proc: subprocess.Popen | ForkedStep, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_running_steps() -> None:
    """Interrupt every step this process runs (their process groups, SIGINT as Ctrl-C), then kill
    what is left after STOP_GRACE_S: a worker told to stop leaves no step behind."""
    with _running_lock:
        procs = list(_running)
    for proc in procs:
        _signal_group(proc, signal.SIGINT)
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        _signal_group(proc, signal.SIGKILL)
