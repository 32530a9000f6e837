"""Baseline timings — PyTorch eager, torch.compile of the reference, the peer libraries — measured once
and kept per user, so `bench` after `new`, and every round, does not time (and compile) them again.

An entry is keyed by everything its number depends on: the baseline's bytes, the inputs' recipe and
the parameters, the case's shapes and dtype, the device (name, capability), the versions (Python,
torch, Triton, CUDA, the peer libraries), the precision settings in force (TF32 for matmuls and
convolutions, float32 matmul precision, reduced-precision reductions, TRITON_F32_DEFAULT), and the
source of the timing strategy itself (kernelgen.verify.timing): a change to how KernelGen times
makes every entry stale at once. `fresh=True` (`kernelgen bench --fresh`) times them again.

Only the judge reads and writes these files (a worker's sandbox reaches neither the cache folder nor
anything else under $HOME); a file that does not parse is timed again, never trusted.

**Claims.** A judge-side process that times an operator's baselines ahead of its kernel
(kernelgen.verify.judge.ahead) claims each entry it is about to write: a `.claim` file beside it naming
its pid and the process's start time. A judge that finds an entry missing but claimed by a live
process (not itself) waits for that entry (`wait`) instead of compiling and timing the same baseline
again beside it; a claim whose process is gone (killed) counts for nothing, and a claim released
without its entry (a compile that failed there) leaves the judge to time it as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelgen.fsutil import atomic_write
from kernelgen.verify.judge.peaks import cache_dir
from kernelgen.precision import conv_tf32_enabled, tf32_enabled
from kernelgen.verify.results import KernelTiming

Kind = Literal["eager", "compile", "peers"]
CLAIM_SUFFIX = ".claim"
WAIT_LIMIT_S = 1200.0  # a claimed entry is waited for at most this long: its process's peer child alone may take 600 s
_POLL_S = 0.25
_TIMING_SOURCE = Path(__file__).parent.parent / "timing.py"


class BaselineEntry(BaseModel):
    """One cached measurement of one baseline kind on one case x dtype."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind
    measured_at: str  # ISO time, UTC
    device_name: str
    timing: KernelTiming | None = None  # eager or compile; None: it could not run (note says why)
    host_us: float | None = None  # eager's host time per call
    peers: dict[str, KernelTiming] = {}
    notes: list[str] = []  # the peers' run: libraries missing, a peer that crashed


def _versions() -> dict[str, str]:
    import torch
    import triton

    out = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__,
           "cuda": str(torch.version.cuda)}
    for dist in ("flag_gems", "liger_kernel"):
        try:
            out[dist] = version(dist.replace("_", "-"))
        except PackageNotFoundError:
            out[dist] = ""
    return out


def precision_settings() -> dict[str, Any]:
    """Every setting that changes what a baseline computes, or how fast."""
    import torch

    return {"matmul_tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "fp32_precision": torch.get_float32_matmul_precision(),
            "bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "triton_f32_default": os.environ.get("TRITON_F32_DEFAULT", ""),
            # The judge times float32 baselines inside matmul_precision(KERNELGEN_TF32), not the globals above,
            # its convolutions in KERNELGEN_CONV_TF32's mode.
            "kernelgen_tf32": tf32_enabled(), "kernelgen_conv_tf32": conv_tf32_enabled()}


def device_identity(kind: str) -> dict[str, str]:
    import torch

    if kind == "cuda" and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return {"kind": kind, "name": torch.cuda.get_device_name(), "capability": f"{major}.{minor}"}
    return {"kind": kind, "name": kind, "capability": ""}


class BaselineCache:
    """The entries of one operator's baseline on one device, in the per-user cache folder."""

    def __init__(self, baseline_sha256: str, spec_recipe: dict[str, Any], device_kind: str, *,
                 root: Path | None = None, fresh: bool = False):
        self.root = (root or cache_dir()) / "baselines"
        self.fresh = fresh
        self.device = device_identity(device_kind)
        self._common = {"baseline": baseline_sha256, "recipe": spec_recipe, "device": self.device,
                        "versions": _versions(), "precision": precision_settings(),
                        "timing": hashlib.sha256(_TIMING_SOURCE.read_bytes()).hexdigest()}

    def _path(self, kind: Kind, shapes: dict[str, list[int]], dtype: str) -> Path:
        key = json.dumps({**self._common, "kind": kind, "shapes": shapes, "dtype": dtype}, sort_keys=True)
        return self.root / f"{kind}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def get(self, kind: Kind, shapes: dict[str, list[int]], dtype: str) -> BaselineEntry | None:
        """The cached entry, or None (none yet, `fresh`, or a file that does not parse)."""
        if self.fresh:
            return None
        path = self._path(kind, shapes, dtype)
        try:
            entry = BaselineEntry.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            return None
        return entry if entry.kind == kind else None

    def claim(self, kind: Kind, shapes: dict[str, list[int]], dtype: str) -> None:
        """Say that this process is timing that entry now (see the module's docstring)."""
        path = self._path(kind, shapes, dtype).with_suffix(CLAIM_SUFFIX)
        atomic_write(path, json.dumps({"pid": os.getpid(), "started": _started(os.getpid())}))

    def release(self, kind: Kind, shapes: dict[str, list[int]], dtype: str) -> None:
        """Drop this process's claim on that entry (written or not)."""
        path = self._path(kind, shapes, dtype).with_suffix(CLAIM_SUFFIX)
        if _claimant(path) == os.getpid():
            path.unlink(missing_ok=True)

    def claimed(self, kind: Kind, shapes: dict[str, list[int]], dtype: str) -> bool:
        """Whether another live process claims that entry (never under `fresh`: nothing cached is read)."""
        if self.fresh:
            return False
        pid = _claimant(self._path(kind, shapes, dtype).with_suffix(CLAIM_SUFFIX))
        return pid is not None and pid != os.getpid()

    def wait(self, kind: Kind, shapes: dict[str, list[int]], dtype: str,
             limit_s: float = WAIT_LIMIT_S) -> BaselineEntry | None:
        """The entry, waiting for it while another live process claims it (at most `limit_s`); None
        when it is not there once no live claim is left (that process failed or was killed)."""
        deadline = time.monotonic() + limit_s
        while True:
            entry = self.get(kind, shapes, dtype)
            if entry is not None or not self.claimed(kind, shapes, dtype) or time.monotonic() > deadline:
                return entry
            time.sleep(_POLL_S)

    def put(self, kind: Kind, shapes: dict[str, list[int]], dtype: str, *, timing: KernelTiming | None = None,
            host_us: float | None = None, peers: dict[str, KernelTiming] | None = None,
            notes: list[str] | None = None) -> BaselineEntry:
        entry = BaselineEntry(kind=kind, measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              device_name=self.device["name"], timing=timing, host_us=host_us, peers=peers or {},
                              notes=notes or [])
        path = self._path(kind, shapes, dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, entry.model_dump_json(indent=2))
        return entry


def _started(pid: int) -> str:
    """The process's start time as the kernel counts it (/proc/PID/stat field 22): with the pid, it names
    one process, not a later one that reused the number. Empty where /proc cannot say; "dead" for a
    process that has ended and not been waited for yet (a zombie: killed before it released its claims)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()  # after the name, which may hold spaces
    except OSError:
        return ""
    return "dead" if fields[0] in ("Z", "X") else fields[19]


def _claimant(path: Path) -> int | None:
    """The pid of the live process whose claim `path` is; None when there is none (no file, an
    unreadable one, or its process is gone)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        pid, started = int(data["pid"]), str(data["started"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, someone else's: the start time below decides
    now = _started(pid)
    return pid if now == started and now != "dead" else None


def spec_recipe(spec: Any) -> dict[str, Any]:
    """What of the spec decides the inputs a baseline is timed on and how it is called."""
    return spec.model_dump(mode="json", include={"inputs", "params"})
