"""Sharing one GPU between several KernelGen processes without spoiling each other's timings.

Set `KERNELGEN_DEVICE_LOCK=/path/to/lockfile` and run several `kernelgen new` / `optimize`
processes at once (a batch's `--per-gpu N` workers do): correctness checks (case by case: a timing
waiting for the device gets it between two cases), spot checks and drawing perf inputs take the lock
shared (they may overlap each other), timed sections take it exclusively
(nothing else of ours runs on the device while a timing is taken). Process start-up and imports
overlap freely; a first call's JIT compile runs inside a check, under the shared lock. Writers go first:
a reader passes a turnstile that a waiting writer holds, so a stream of checks cannot starve a
timing. Unset, the lock does nothing. A judge whose workers run on another GPU of the host
(kernelgen.devices.DeviceInfo.pin) takes that GPU's lock, named by DeviceInfo.lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Iterator

ENV = "KERNELGEN_DEVICE_LOCK"


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
def device_lock(exclusive: bool, path: str | None = None) -> Iterator[None]:
    """The lock of the device at `path` (a judge's other GPU names its own); by default the one
    KERNELGEN_DEVICE_LOCK names. Locks of different files are independent: two GPUs time at once."""
    path = path or os.environ.get(ENV)
    if not path:
        yield
        return
    turnstile = path + ".turnstile"
    if exclusive:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(path, fcntl.LOCK_EX):
            yield
    else:
        with _flock(turnstile, fcntl.LOCK_EX):
            pass  # wait behind any writer that is queued
        with _flock(path, fcntl.LOCK_SH):
            yield
