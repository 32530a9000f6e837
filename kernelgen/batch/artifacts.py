"""Operator folders as bytes, for a Ray task on another host: the driver ships what an earlier run
left (so the task resumes it) and takes back the whole folder, with any copy the task moved aside.

What comes back replaces the driver's folder: the task started from that folder and only adds to it
(`new --force` and `optimize` move things aside, they never delete), so nothing is lost."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from kernelgen.fsutil import move_aside, timestamp


def pack(root: Path, names: list[str]) -> bytes:
    """A gzipped tar of the entries `names` directly under `root` (missing ones are left out)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in names:
            if (Path(root) / name).exists():
                tar.add(Path(root) / name, arcname=name)
    return buf.getvalue()


def operator_entries(root: Path, name: str) -> list[str]:
    """The operator folder, the copies moved aside from it (`<name>.previous-*`), and the LLM exchanges
    of a `new` that did not finish (`<name>.llm-unfinished-*`, kernelgen.llm.transcript): the next run
    reuses those replies, so they come back from a task's node too."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.name == name or p.name.startswith((f"{name}.previous-", f"{name}.llm-unfinished-")))


def _extract(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():  # only plain files and folders, inside dest
            target = (dest / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(dest.resolve()):
                raise ValueError(f"refusing archive entry {member.name!r}")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # pragma: no cover - Python before 3.10.12 / 3.11.4
            tar.extractall(dest)


def unpack(root: Path, data: bytes) -> list[Path]:
    """Put the entries of `data` under `root`: a folder of the same name is replaced by the one that
    continued it; a moved-aside copy keeps a free name. Returns the paths written."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=root))
    written: list[Path] = []
    try:
        _extract(data, staging)
        for entry in sorted(staging.iterdir()):
            final = root / entry.name
            if ".previous-" in entry.name:
                if final.exists():
                    final = root / f"{entry.name}-{timestamp()}"
                os.replace(entry, final)
            elif final.exists():
                old = move_aside(final)  # a sibling on the same file system, then gone once the new one is in
                os.replace(entry, final)
                shutil.rmtree(old)
            else:
                os.replace(entry, final)
            written.append(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written
