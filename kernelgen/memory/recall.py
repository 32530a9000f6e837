"""What the memory advises for one perf case: the knob values that won on alike cases (same device,
family and dtype, within kernelgen.memory.shapes.RECALL_DISTANCE), best first.

Advice, never a verdict: round 0 re-times what it is given against its own kernel, the planner
proposes it as a hypothesis that its search times, and the LLM reads the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelgen.memory.model import MemoryEntry
from kernelgen.memory.shapes import RECALL_DISTANCE, distance


@dataclass(frozen=True)
class Advice:
    knob: str
    value: object
    speedup: float  # the best win remembered for it on an alike case
    entry: MemoryEntry  # that win

    def describe(self) -> str:
        return self.entry.describe()


def advise(entries: list[MemoryEntry], *, device: str, family: str, dtype: str,
           shapes: dict[str, list[int]]) -> list[Advice]:
    """One Advice per (knob, value) that won on an alike case, the largest remembered win first; a
    value that also lost on an alike case is left out (its effect depends on more than the shape)."""
    near = [e for e in entries if e.device == device and e.family == family and e.dtype == dtype and e.shapes
            and distance(e.shapes, shapes) <= RECALL_DISTANCE]
    best: dict[tuple[str, str], MemoryEntry] = {}
    lost: set[tuple[str, str]] = set()
    for e in near:
        key = (e.knob, repr(e.value))
        if e.verdict == "loss":
            lost.add(key)
        elif e.verdict == "win" and (key not in best or e.speedup > best[key].speedup):
            best[key] = e
    wins = [e for key, e in best.items() if key not in lost]
    return [Advice(e.knob, e.value, e.speedup, e) for e in sorted(wins, key=lambda e: -e.speedup)]
