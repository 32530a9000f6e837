"""The optimize loop's side of the tuning memory: each judged round written into it, and what it
holds about this device and family read back for the proposers (kernelgen.memory).

The memory advises; it never decides. A write that fails (a damaged file, a full disk) is reported
and the run goes on: losing one round's entries costs less than losing the round.
"""

from __future__ import annotations

from typing import Callable

from kernelgen.devices import DeviceFacts, DeviceInfo, device_facts
from kernelgen.errors import TuningMemoryError, UnsupportedOperatorError
from kernelgen.memory import MemoryEntry, TuningMemory, round_entries
from kernelgen.record.state import RoundRecord
from kernelgen.spec import OperatorSpec

Step = Callable[[str], None]


def family_of(spec: OperatorSpec) -> str:
    """The offline generator's family of the spec (what its knobs mean), else the spec's category."""
    if spec.reference is not None:
        try:
            from kernelgen.offline import family_of as offline_family

            return offline_family(spec)
        except (UnsupportedOperatorError, ValueError, ImportError):
            pass
    return spec.category


def remember(spec: OperatorSpec, record: RoundRecord, device: DeviceInfo, on_step: Step = lambda s: None,
             facts: DeviceFacts | None = None) -> int:
    """Write what round `record` measured; nothing on the interpreter or for an unjudged round.
    Returns how many entries were new."""
    if device.interpreter or not record.judged:
        return 0
    facts = facts or device_facts(device)
    entries = round_entries(record, operator=spec.name, family=family_of(spec), facts=facts)
    if not entries:
        return 0
    try:
        with TuningMemory() as mem:
            added = mem.add(entries)
    except TuningMemoryError as e:
        on_step(f"tuning memory not updated: {e.message}")
        return 0
    on_step(f"tuning memory: {added} new entr{'y' if added == 1 else 'ies'} from round {record.round}")
    return added


def recalled(spec: OperatorSpec, device: DeviceInfo, facts: DeviceFacts | None = None) -> list[MemoryEntry]:
    """Every entry about this device and the spec's family ([] on the interpreter, or when the memory
    cannot be read: advice is optional)."""
    if device.interpreter:
        return []
    facts = facts or device_facts(device)
    try:
        with TuningMemory() as mem:
            return [e for _, e in mem.entries(device=facts.name, family=family_of(spec))]
    except TuningMemoryError:
        return []
