"""The tuning memory's database: one SQLite file per user, in KernelGen's cache directory.

WAL mode, so readers never wait for a writer and many batch workers may record rounds at once (each
write is one short transaction; a writer waits up to BUSY_MS for another's). The schema carries a
version (SQLite's `user_version`) and every change to it is one more entry of MIGRATIONS, applied
in order inside one exclusive transaction by whichever process opens the file first; a file from a
newer KernelGen is refused, never downgraded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Iterable, Iterator

from kernelgen.errors import TuningMemoryError
from kernelgen.memory.model import MemoryEntry
from kernelgen.verify.judge.peaks import cache_dir

FILE_NAME = "tuning-memory.sqlite3"
# A batch of 8 workers each recording a round takes milliseconds; 30 s covers a disk that stalls.
BUSY_MS = 30_000

# Migration k takes the schema from version k to k + 1.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE entries (
        id INTEGER PRIMARY KEY,
        device TEXT NOT NULL, capability TEXT NOT NULL, torch_version TEXT NOT NULL, triton_version TEXT NOT NULL,
        family TEXT NOT NULL, shape_class TEXT NOT NULL, dtype TEXT NOT NULL,
        knob TEXT NOT NULL, value TEXT NOT NULL,             -- the value as JSON
        speedup REAL NOT NULL, noise REAL NOT NULL, verdict TEXT NOT NULL,
        operator TEXT NOT NULL, round INTEGER NOT NULL, shapes TEXT NOT NULL,   -- the case as JSON
        origin TEXT NOT NULL, recorded_at TEXT NOT NULL, source TEXT NOT NULL,
        -- a round recorded twice (a resumed run) or a file imported twice adds nothing
        UNIQUE (device, operator, round, knob, value, dtype, shapes, origin)
    );
    CREATE INDEX entries_by_device_family ON entries (device, family, dtype);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
_COLUMNS = ("device", "capability", "torch_version", "triton_version", "family", "shape_class", "dtype", "knob", "value",
            "speedup", "noise", "verdict", "operator", "round", "shapes", "origin", "recorded_at", "source")
_JSON = {"value", "shapes"}


def memory_path() -> Path:
    """KERNELGEN_MEMORY, else the cache directory's file (KERNELGEN_CACHE_DIR, XDG_CACHE_HOME, ~/.cache)."""
    return Path(os.environ.get("KERNELGEN_MEMORY") or cache_dir() / FILE_NAME)


class TuningMemory:
    """An open memory. `with TuningMemory() as mem: mem.add([...]); mem.entries(device=...)`."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else memory_path()
        self._db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")  # WAL stays consistent; a power cut may lose the last round
            self._migrate()
        except (sqlite3.DatabaseError, OSError, TuningMemoryError) as e:
            if self._db is not None:
                self._db.close()
            raise e if isinstance(e, TuningMemoryError) else self._refuse(e) from None

    def _refuse(self, e: Exception) -> TuningMemoryError:
        if isinstance(e, sqlite3.DatabaseError):
            return TuningMemoryError(f"{self.path}: not a readable tuning memory ({e})",
                                     hint=f"move it aside (mv {self.path} {self.path}.damaged); the next judged round starts "
                                          "a new one, and `kernelgen memory import` can refill it from an export")
        return TuningMemoryError(f"{self.path}: cannot open the tuning memory ({e})",
                                 hint="set KERNELGEN_MEMORY to a writable file, or KERNELGEN_CACHE_DIR to a writable folder")

    def __enter__(self) -> "TuningMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        assert self._db is not None
        self._db.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise TuningMemoryError(f"{self.path}: schema version {version}, written by a newer KernelGen (this one knows "
                                    f"up to {SCHEMA_VERSION})", hint="upgrade KernelGen, or point KERNELGEN_MEMORY elsewhere")
        self._db.execute("BEGIN EXCLUSIVE")  # another process may be migrating the same file right now
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            for k in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[k].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {k + 1}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def add(self, entries: Iterable[MemoryEntry]) -> int:
        """Record entries in one transaction; returns how many were new."""
        rows = [tuple(json.dumps(getattr(e, c), sort_keys=True) if c in _JSON else getattr(e, c) for c in _COLUMNS)
                for e in entries]
        if not rows:
            return 0
        marks = ", ".join("?" * len(_COLUMNS))
        self._db.execute("BEGIN IMMEDIATE")
        try:
            before = self._db.total_changes
            self._db.executemany(f"INSERT OR IGNORE INTO entries ({', '.join(_COLUMNS)}) VALUES ({marks})", rows)
            added = self._db.total_changes - before
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return added

    def entries(self, **where: object) -> list[tuple[int, MemoryEntry]]:
        """(id, entry) pairs, oldest first; `where` filters on columns (device=..., family=..., id=...)."""
        return list(self._select(where))

    def _select(self, where: dict[str, object]) -> Iterator[tuple[int, MemoryEntry]]:
        clause, args = _where(where)
        for row in self._db.execute(f"SELECT id, {', '.join(_COLUMNS)} FROM entries{clause} ORDER BY id", args):
            data = {c: json.loads(v) if c in _JSON else v for c, v in zip(_COLUMNS, row[1:])}
            yield int(row[0]), MemoryEntry.model_validate(data)

    def forget(self, **where: object) -> int:
        """Delete the entries matching `where` (at least one filter); returns how many went."""
        if not any(v is not None for v in where.values()):
            raise TuningMemoryError("forget needs a filter (an id, a device, a family, an operator or an origin)",
                                    hint="to forget everything, delete the file: " + str(self.path))
        clause, args = _where(where)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            gone = self._db.execute(f"DELETE FROM entries{clause}", args).rowcount
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return gone


def _where(where: dict[str, object]) -> tuple[str, list[object]]:
    used = {k: v for k, v in where.items() if v is not None}
    unknown = [k for k in used if k not in _COLUMNS and k != "id"]
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}")
    if not used:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k in used), list(used.values())
