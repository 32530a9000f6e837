"""Sharing one GPU between several KernelGen processes without spoiling each other's timings.

Set `KERNELGEN_DEVICE_LOCK=/path/to/lockfile` and run several `kernelgen new` / `optimize`
processes at once (a batch's `--per-gpu N` workers do): correctness checks (case by case: a timing
waiting for the device gets it between two cases), spot checks and drawing perf inputs take the lock
shared (they may overlap each other), timed sections take it exclusively
(nothing else of ours runs on the device while a timing is taken). Process start-up and imports
overlap freely; a first call's JIT compile runs inside a check, under the shared lock. Writers go first:
a reader passes a turnstile that a waiting writer holds, so a stream of checks cannot starve a
timing. Unset, the lock does nothing.

A peer library's first call at a shape (FlagGems compiles and autotunes there: up to its 60 s budget,
kernelgen.verify.judge.peerproc) is a *warm-up*: shared like a check, but a timing waits for it before
it takes the turnstile, not at it. Behind the turnstile, one warm-up held every check of the GPU for
as long as it ran: on an H100 with three KernelBench problems at once, round 0's checks took 58-96 s
and their baselines waited 46-57 s for the device (2026-12-08), where the checks alone take 5-14 s.
Now checks go on beside a warm-up; timings still never overlap one, and a waiting timing holds the
warm-ups' own turnstile, so a stream of warm-ups cannot starve it either. Every taker takes the files
in one order (warm-ups' turnstile, warm-ups, turnstile, lock): no two wait on each other. A check's
first case, which compiles the kernel, is a warm-up too.

A judge whose workers run on another GPU of the host (kernelgen.devices.DeviceInfo.pin) takes that GPU's
lock, named by DeviceInfo.lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from typing import Callable, Iterator

ENV = "KERNELGEN_DEVICE_LOCK"
_WAITED = [0.0]  # seconds this process has waited to take a device lock, all takes together
SAY_WAIT_S = 0.5  # less is the files' own cost, not a queue


@contextlib.contextmanager
def _flock(path: str, mode: int) -> Iterator[None]:
    # The folder may not exist yet: a batch names <out>/_batch/locks/cuda0.lock before any worker ran,
    # and a user may point KERNELGEN_DEVICE_LOCK into a fresh folder (on an H100 the first timing
    # failed with FileNotFoundError here before this).
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextlib.contextmanager
def device_lock(exclusive: bool, path: str | None = None, *, warmup: bool = False) -> Iterator[None]:
    """The lock of the device at `path` (a judge's other GPU names its own); by default the one
    KERNELGEN_DEVICE_LOCK names. Locks of different files are independent: two GPUs time at once.
    `warmup` (shared only): work that may hold the device for a minute -- a peer's first call, a check's
    first case (the kernel's compile) -- which a timing waits for before the turnstile (above)."""
    path = path or os.environ.get(ENV)
    if not path:
        yield
        return
    turnstile, warm = path + ".turnstile", path + ".warm"
    t0 = time.monotonic()
    with contextlib.ExitStack() as held:
        if exclusive:
            for name in (warm + ".turnstile", warm, turnstile, path):
                held.enter_context(_flock(name, fcntl.LOCK_EX))
        else:
            if warmup:
                held.enter_context(_behind(warm + ".turnstile", warm))
            held.enter_context(_behind(turnstile, path))
        _WAITED[0] += time.monotonic() - t0
        yield


@contextlib.contextmanager
def _behind(turnstile: str, path: str) -> Iterator[None]:
    """`path` shared, once no writer is queued at `turnstile`."""
    with _flock(turnstile, fcntl.LOCK_EX):
        pass  # wait behind any writer that is queued
    with _flock(path, fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def waits_said(say: Callable[[str], None], name: str) -> Iterator[None]:
    """Says how long the work inside waited for the device (other processes' checks and timings on it),
    where it waited at all: `<name>: waited 41.3 s for the device` -- a batch reads it into a phase of
    its own (kernelgen.batch.phases), so a queue on the GPU is not taken for the kernel's own time."""
    before = _WAITED[0]
    yield
    waited = _WAITED[0] - before
    if waited >= SAY_WAIT_S:
        say(f"{name}: waited {waited:.1f} s for the device")
