"""What every batch engine keeps to: run a list of jobs, one operator at a time per device, report
progress as events, and return one result per job."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Literal, Protocol

from kernelgen.batch.job import JobRequest
from kernelgen.batch.resume import JobResult
from kernelgen.errors import UsageError

EventKind = Literal["start", "step", "done"]


@dataclass(frozen=True)
class Event:
    op: str
    kind: EventKind
    target: str = ""  # the device (or worker) it runs on: cuda:0, cpu#1, node 10.0.0.2 GPU 3
    message: str = ""
    result: JobResult | None = None  # with kind == "done"


OnEvent = Callable[[Event], None]


class Engine(Protocol):
    name: str
    device: str  # the device kind the jobs run on: cuda | npu | cpu

    def describe(self) -> str:
        """One line: where the work runs (for the screen and the report)."""

    def device_model(self) -> str:
        """The device results are taken on, as a rerun compares it (kernelgen.batch.basis): the kind, and
        the model where known ("cuda: NVIDIA H100 80GB HBM3")."""

    def run(self, jobs: list[JobRequest], on_event: OnEvent) -> list[JobResult]:
        """Run every job; results in the order of `jobs`. `on_event` is called from one thread at a time."""


class EngineUnavailableError(UsageError):
    """The engine asked for cannot run here (not installed, no cluster at that address)."""


def serialized(on_event: OnEvent) -> OnEvent:
    """`on_event`, called by one thread at a time (engines report from several)."""
    lock = threading.Lock()

    def call(event: Event) -> None:
        with lock:
            on_event(event)

    return call


def error_result(job: JobRequest, target: str, reason: str) -> JobResult:
    return JobResult(name=job.name, spec=job.spec_label, status="error", reason=reason, rounds=job.rounds, target=target)
