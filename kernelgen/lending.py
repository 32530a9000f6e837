"""Idle GPUs of a local batch lent to the operators still optimizing, for their rounds' searches.

A `kernelgen batch --engine local` worker whose queue ran empty leaves a token in the lend folder
that KERNELGEN_LEND_DIR names (the batch sets it for every worker): a small JSON file naming its
device and that device's lock. An operator still optimizing claims tokens at the start of a round's
search with a non-blocking flock on the token file and holds it until the operator is done. The
kernel drops a flock when the last descriptor of it closes, so a claim ends with its process, crashed
or not; the descriptor is not inherited by the sandboxed workers (Python opens files
non-inheritable), so no worker outlives it holding the claim.

Nothing else of the batch runs on a lent GPU (its worker has stopped), the flock keeps a second
claimant off it, and its device lock, taken while timing, keeps KernelGen runs outside the batch
that share the lock apart as well.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelgen.fsutil import atomic_write

ENV = "KERNELGEN_LEND_DIR"
SUFFIX = ".lend"


class LendToken(BaseModel):
    """What a token says: the device (as the host names it: what CUDA_VISIBLE_DEVICES takes) and its lock."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str  # cuda | npu
    device_id: str
    lock: str | None = None  # its device-lock file; None: it has none


@dataclass
class Loan:
    """A claimed token: the device is this process's until `release` (or until the process ends)."""

    token: LendToken
    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor drops the flock
            self.fd = None


def _file_name(token: LendToken) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{token.kind}{token.device_id}") + SUFFIX


def lend(lend_dir: Path, token: LendToken) -> Path:
    """Offer a device: written whole (a claimant never reads half a token)."""
    path = Path(lend_dir) / _file_name(token)
    atomic_write(path, token.model_dump_json())
    return path


def withdraw_all(lend_dir: Path) -> None:
    """Take back every token (a batch's start and end): a claim already made stays valid, since its
    holder keeps the open file."""
    for path in Path(lend_dir).glob(f"*{SUFFIX}"):
        path.unlink(missing_ok=True)


def lent(lend_dir: Path) -> list[LendToken]:
    """The tokens on offer, claimed or not (for a person, or a test, to look at)."""
    out = []
    for path in sorted(Path(lend_dir).glob(f"*{SUFFIX}")):
        try:
            out.append(LendToken.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValidationError):
            continue
    return out


def claim(kind: str, limit: int, *, lend_dir: Path | None = None, exclude: set[str] | frozenset[str] = frozenset()) -> list[Loan]:
    """Up to `limit` unclaimed devices of `kind` from the lend folder (KERNELGEN_LEND_DIR unless
    given), none whose id is in `exclude`; never waits for one."""
    folder = lend_dir or (Path(os.environ[ENV]) if os.environ.get(ENV) else None)
    if folder is None or limit <= 0 or not Path(folder).is_dir():
        return []
    loans: list[Loan] = []
    for path in sorted(Path(folder).glob(f"*{SUFFIX}")):
        if len(loans) >= limit:
            break
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:  # withdrawn meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            token = LendToken.model_validate(json.loads(os.read(fd, 1 << 16)))
        except (OSError, ValueError):  # claimed by someone else (BlockingIOError), or not a token
            os.close(fd)
            continue
        if token.kind != kind or token.device_id in exclude:
            os.close(fd)
            continue
        loans.append(Loan(token, path, fd))
    return loans
