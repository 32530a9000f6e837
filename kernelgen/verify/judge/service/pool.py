"""Warm workers kept between commands: the second `kernelgen test` of a kernel file finds its worker
with the file imported and every Triton specialisation compiled and loaded (1.4 s for a warm accuracy
pass against 7.2 s cold, H200, issue 32).

A worker is kept only for the one kernel file it ran — the same bytes (sha256), the same operator
name, the same device — and only after a command in which that kernel passed with no violation of
any kind (a kernel that tampered with its worker, even once, never gets that worker back: the
tamper snapshot is rebased after it reports). Anything else is closed as before. A kept worker is
idle: it holds no inputs (the judge dropped them) and only its own kernel's module.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from kernelgen.devices import DeviceInfo
from kernelgen.verify.judge.judge import Judge
from kernelgen.verify.judge.replayer import KeptReplay
from kernelgen.verify.judge.session import WorkerSession
from kernelgen.verify.results import RunRecord

# Each idle worker keeps its device context (~500 MiB of GPU memory on an H100) and its host memory;
# a few cover the commands of one working session (test, bench, test again) on a few operators.
DEFAULT_LIMIT = 4
# A kept worker saves the next command on its kernel a start (~5 s); that command comes within
# seconds (a batch's `new` then `bench`) or within a minute (a person's `test` then `bench`). Later
# than 90 s it is likely never, and the worker's GPU memory is better given back: after a batch,
# nvidia-smi showed zygote workers holding 0.9-13 GB each (issue 39).
WARM_IDLE_S = 90.0

Key = tuple[str, str | None, str, str]  # device kind, pin, operator name, kernel sha256


@dataclass
class Kept:
    worker: WorkerSession
    slot: str
    violations: list[tuple[str, str]]
    replay: KeptReplay | None = None
    since: float = field(default_factory=time.monotonic)

    def pids(self) -> list[int]:
        return [self.worker.proc.pid, *([self.replay.worker.proc.pid] if self.replay is not None else [])]

    def close(self) -> None:
        self.worker.close()
        if self.replay is not None:
            self.replay.close()


def clean(*records: RunRecord | None) -> bool:
    """Whether every run passed with nothing against it (no violation, no failure, no folder change)."""
    for r in records:
        if r is not None and (r.status != "ok" or r.all_violations() or (r.performance is not None and r.performance.error)):
            return False
    return any(r is not None for r in records)


class WarmPool:
    def __init__(self, limit: int | None = None):
        self.limit = DEFAULT_LIMIT if limit is None else limit
        self._kept: OrderedDict[Key, Kept] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(device: DeviceInfo, operator: str, kernel_sha: str) -> Key:
        return (device.kind, device.pin, operator, kernel_sha)

    def has(self, device: DeviceInfo, operator: str, kernel_sha: str) -> bool:
        with self._lock:
            return self.key(device, operator, kernel_sha) in self._kept

    def lend(self, judge: Judge, kernel_sha: str) -> int | None:
        """Give `judge` the kept worker of this kernel, if any and alive; its pid, or None."""
        with self._lock:
            kept = self._kept.pop(self.key(judge.device, judge.spec.name, kernel_sha), None)
        if kept is None:
            return None
        if not judge.adopt(kernel_sha, kept.worker, kept.slot, kept.violations):
            if kept.replay is not None:
                kept.replay.close()
            return None
        if kept.replay is None or not judge.replayer.adopt(kept.replay):
            judge.replayer.prestart()  # beside the recording, not after it
        return kept.worker.proc.pid

    def keep(self, judge: Judge, kernel_sha: str) -> int | None:
        """Take this kernel's worker out of `judge` (call only after a clean run: `clean`) and keep it;
        its pid, or None. The least recently used one beyond the limit is closed."""
        if self.limit <= 0:
            return None
        released = judge.release(kernel_sha)
        if released is None:
            return None
        worker, slot, violations = released
        if violations:
            worker.close()
            return None
        evicted = []
        kept = Kept(worker, slot, violations, replay=judge.replayer.release())
        with self._lock:
            old = self._kept.pop(self.key(judge.device, judge.spec.name, kernel_sha), None)
            if old is not None:
                evicted.append(old)
            self._kept[self.key(judge.device, judge.spec.name, kernel_sha)] = kept
            while len(self._kept) > self.limit:
                evicted.append(self._kept.popitem(last=False)[1])
        for k in evicted:
            k.close()
        return worker.proc.pid

    def expire(self, max_idle_s: float) -> int:
        """Close every worker kept longer than `max_idle_s` without a command; how many."""
        now = time.monotonic()
        with self._lock:
            old = [key for key, k in self._kept.items() if now - k.since > max_idle_s]
            gone = [self._kept.pop(key) for key in old]
        for k in gone:
            k.close()
        return len(gone)

    def pids(self) -> set[int]:
        with self._lock:
            return {pid for k in self._kept.values() for pid in k.pids()}

    def describe(self) -> list[tuple[int, str, str, float]]:
        """(pid, operator, kernel sha256, seconds idle) of every kept worker, its replay worker's beside
        it (the operator's name followed by "(replays)")."""
        now = time.monotonic()
        with self._lock:
            return [(pid, key[2] if i == 0 else f"{key[2]} (replays)", key[3], now - k.since)
                    for key, k in self._kept.items() for i, pid in enumerate(k.pids())]

    def close(self) -> None:
        with self._lock:
            kept, self._kept = list(self._kept.values()), OrderedDict()
        for k in kept:
            k.close()
