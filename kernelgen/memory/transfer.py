"""`kernelgen memory export` / `import`: the memory as a JSON file a team can share.

An imported entry keeps its numbers but is stored as origin "imported": another device's (or
another team's) measurement is a hypothesis here, proposed and re-timed like any other, never a
verdict. A file that is not JSON, not an export of this memory, or not valid is refused whole,
with what is wrong, and nothing is stored.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from kernelgen.errors import TuningMemoryError
from kernelgen.fsutil import atomic_write, now
from kernelgen.memory.model import EXPORT_FORMAT, MemoryEntry, MemoryExport
from kernelgen.memory.store import SCHEMA_VERSION, TuningMemory


def export_memory(memory: TuningMemory, out: Path, **where: object) -> int:
    """Write the entries matching `where` (all by default) to `out`; returns how many."""
    entries = [e for _, e in memory.entries(**where)]
    doc = MemoryExport(format=EXPORT_FORMAT, schema_version=SCHEMA_VERSION, exported_at=now(), entries=entries)
    atomic_write(Path(out), doc.model_dump_json(indent=1) + "\n")
    return len(entries)


def read_export(path: Path) -> MemoryExport:
    """The file validated, or TuningMemoryError saying why it is refused."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TuningMemoryError(f"{path}: cannot read it ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TuningMemoryError(f"{path}: not JSON ({e}); nothing imported",
                                hint="import a file written by `kernelgen memory export`") from None
    if not isinstance(data, dict) or data.get("format") != EXPORT_FORMAT:
        raise TuningMemoryError(f'{path}: not a KernelGen tuning-memory export (no "format": "{EXPORT_FORMAT}"); nothing imported',
                                hint="import a file written by `kernelgen memory export`")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise TuningMemoryError(f"{path}: schema version {version}, newer than this KernelGen's {SCHEMA_VERSION}; nothing imported",
                                hint="upgrade KernelGen on this machine")
    try:
        return MemoryExport.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:5])
        raise TuningMemoryError(f"{path}: {e.error_count()} problem(s), nothing imported: {problems}") from None


def import_memory(memory: TuningMemory, path: Path) -> tuple[int, int]:
    """Store a file's entries as hypotheses; returns (entries in the file, new ones stored)."""
    doc = read_export(path)
    imported = [MemoryEntry.model_validate({**e.model_dump(), "origin": "imported", "source": e.source or Path(path).name})
                for e in doc.entries]
    return len(imported), memory.add(imported)
