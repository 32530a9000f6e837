"""A process as /proc shows it, for tests that say a process ended: one that exited and waits to be
reaped (a zombie) has ended -- it holds nothing, and whoever adopted it may reap it late."""

from __future__ import annotations

import time
from pathlib import Path


def state(pid: int) -> str | None:
    """The state letter /proc gives for `pid` (R, S, Z, ...); None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    return state(pid) not in (None, "Z", "X")


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether `pid` ends within `within_s` seconds (or has already)."""
    end = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True
