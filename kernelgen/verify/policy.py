"""What a worker's sandbox enforces, as the judge decides it and the worker receives it (JSON), and
the worker's report of what it could enforce. Both sides import this; it runs nothing.

The judge fills the policy (kernelgen.verify.judge.confinement: the import path, what may be read,
the cgroups it made); the worker's bootstrap applies it before any candidate is imported
(kernelgen.verify.worker.sandbox).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_FILE_LIMIT = 256 << 20  # a Triton cache entry is < 10 MB; a candidate may not fill the disk
DEFAULT_CPU_MEMORY = 8 << 30  # the interpreter on test shapes needs < 3 GB of address space (torch + triton)
DEFAULT_PROCESS_HEADROOM = 64  # ptxas and gcc (Triton's compile steps) need a few


@dataclass
class SandboxPolicy:
    scratch: Path  # the only writable folder
    read_paths: list[str] = field(default_factory=list)  # Python, site-packages, the kernelgen package
    list_paths: list[str] = field(default_factory=list)  # folders whose names may be listed, not read
    interpreter: bool = True  # CPU interpreter: an address-space limit is possible
    file_limit: int = DEFAULT_FILE_LIMIT
    cpu_memory: int = DEFAULT_CPU_MEMORY
    cgroups: list[str] = field(default_factory=list)  # cgroup folders the judge made for this worker
    namespaces: bool = True
    landlock: bool = True
    role: str = "record"  # what runs inside: a candidate being recorded, or replays of its plan (kernelgen.verify.worker.server)


@dataclass
class SandboxReport:
    """What was enforced, and what could not be, in words a person reads once."""

    enforced: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"enforced": self.enforced, "missing": self.missing}
