"""Writing files so that nothing a user made is lost: atomic replace, and moving aside instead of
overwriting."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`: a reader (or
    a crash) sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def timestamp() -> str:
    """For file names: 20261122-143005."""
    return datetime.now().strftime("%Y%m%d-%H%M%S")


def now() -> str:
    """For records: 2026-11-22T14:30:05."""
    return datetime.now().isoformat(timespec="seconds")


def move_aside(path: Path) -> Path:
    """Rename `path` to `<path>.previous-<timestamp>[-n]` and return the new name."""
    path = Path(path)
    base = path.with_name(f"{path.name}.previous-{timestamp()}")
    target, n = base, 1
    while target.exists():
        target = base.with_name(f"{base.name}-{n}")
        n += 1
    os.replace(path, target)
    return target
