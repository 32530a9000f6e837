"""The tuning memory (the seeds' stage 5): what every judged round measured, per device, so the next
operator of the same family starts from it.

    with TuningMemory() as mem:                 # ~/.cache/kernelgen/tuning-memory.sqlite3 (WAL)
        mem.add(round_entries(record, operator="softmax", family="softmax", facts=facts))
        advise([e for _, e in mem.entries(device=facts.name)], device=..., family=..., dtype=..., shapes=...)
    export_memory(mem, Path("h100.json")); import_memory(mem, Path("h100.json"))   # imported: hypotheses

    model.py     MemoryEntry (one measured effect) and MemoryExport (the shared JSON file)
    store.py     the SQLite file: schema version, migrations, concurrent writers
    shapes.py    shape classes: which cases are alike
    learn.py     a judged round -> entries (interpreter rounds: none)
    recall.py    entries -> advice for one case, best first
    transfer.py  export / import (validated; a foreign or damaged file is refused)

Nothing in verify/ imports this package: the judge's verdicts never depend on what was remembered.
"""

from kernelgen.memory.learn import round_entries
from kernelgen.memory.model import MemoryEntry, MemoryExport
from kernelgen.memory.recall import Advice, advise
from kernelgen.memory.store import SCHEMA_VERSION, TuningMemory, memory_path
from kernelgen.memory.transfer import export_memory, import_memory, read_export

__all__ = ["Advice", "MemoryEntry", "MemoryExport", "SCHEMA_VERSION", "TuningMemory", "advise", "export_memory",
           "import_memory", "memory_path", "read_export", "round_entries"]
