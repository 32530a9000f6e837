"""What a judged round teaches the memory: every value its search timed, per perf case x dtype.

An offline round's candidates are values of one knob, each timed against the best on every case
(kernelgen.optimize.search); an LLM's round is one whole-file change, recorded as knob "change" with
its CHANGE line as the value. Untimed cases (wrong, pruned, the interpreter's) teach nothing.
"""

from __future__ import annotations

from kernelgen.devices import DeviceFacts
from kernelgen.fsutil import now
from kernelgen.memory.model import MemoryEntry
from kernelgen.memory.shapes import shape_class
from kernelgen.record.state import CaseResult, RoundRecord

CHANGE_KNOB = "change"


def round_entries(record: RoundRecord, *, operator: str, family: str, facts: DeviceFacts) -> list[MemoryEntry]:
    """The entries round `record` measured; [] for an unjudged (interpreter) round."""
    if not record.judged or facts.interpreter:
        return []
    knob = record.hypothesis.knob if record.hypothesis is not None else ""
    timed: list[tuple[str, object, CaseResult]] = []
    if knob:
        for cand in record.candidates:
            if cand.pruned or not cand.knobs or knob not in cand.knobs:
                continue
            timed += [(knob, cand.knobs[knob], c) for c in cand.cases]
    elif record.change and record.cases:
        timed += [(CHANGE_KNOB, " ".join(record.change.split())[:200], c) for c in record.cases]
    stamp = now()
    out = []
    for k, value, c in timed:
        if c.speedup is None or c.verdict not in ("win", "loss", "neutral"):
            continue
        out.append(MemoryEntry(device=facts.name, capability=facts.compute_capability or "", torch_version=facts.torch_version,
                               triton_version=facts.triton_version, family=family, shape_class=shape_class(c.shapes),
                               dtype=c.dtype, knob=k, value=value, speedup=c.speedup, noise=c.noise, verdict=c.verdict,
                               operator=operator, round=record.round, shapes=c.shapes, recorded_at=stamp))
    return out
