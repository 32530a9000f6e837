"""Writing files so that nothing a user made is lost: atomic replace, and moving aside instead of
overwriting."""

from __future__ import annotations

import os
import shutil
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
    return datetime.now().strftime("%Y%m%d-%H%M%S")


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


def keep_copy(path: Path, dest_dir: Path) -> Path | None:
    """Copy `path` into `dest_dir` (created) before it is replaced; returns the copy, None if absent."""
    path = Path(path)
    if not path.exists():
        return None
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / path.name
    n = 1
    while target.exists():
        target = dest_dir / f"{path.stem}.{n}{path.suffix}"
        n += 1
    shutil.copy2(path, target)
    return target
