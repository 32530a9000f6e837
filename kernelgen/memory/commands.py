"""`kernelgen memory list|show|export|import|forget`: one call per command, each opening the user's
memory (kernelgen.memory.store.memory_path) for as long as it takes."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from kernelgen.errors import TuningMemoryError
from kernelgen.memory.model import MemoryEntry
from kernelgen.memory.store import TuningMemory
from kernelgen.memory.transfer import export_memory, import_memory


def list_entries(**where: object) -> tuple[Path, list[tuple[int, MemoryEntry]]]:
    with TuningMemory() as mem:
        return mem.path, mem.entries(**where)


def show_entry(entry_id: int) -> MemoryEntry:
    with TuningMemory() as mem:
        found = mem.entries(id=entry_id)
        if not found:
            raise TuningMemoryError(f"no entry {entry_id} in {mem.path}", hint="`kernelgen memory list` shows the ids")
    return found[0][1]


def export_to(out: Path, **where: object) -> int:
    with TuningMemory() as mem:
        return export_memory(mem, out, **where)


def import_from(path: Path) -> tuple[int, int]:
    with TuningMemory() as mem:
        return import_memory(mem, path)


def forget_entries(**where: object) -> int:
    with TuningMemory() as mem:
        return mem.forget(**where)


def entries_table(rows: list[tuple[int, MemoryEntry]]) -> Table:
    table = Table("id", "device", "family", "case", "knob = value", "x speedup", "noise", "verdict", "learned in", "origin")
    for i, e in rows:
        table.add_row(str(i), e.device, e.family, e.case, f"{e.knob} = {e.value!r}"[:60], f"{e.speedup:.3f}",
                      f"{100 * e.noise:.1f}%", e.verdict, f"{e.operator} round {e.round}", e.origin)
    return table
