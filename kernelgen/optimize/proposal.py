"""What a proposer hands the optimization loop, and what it is given: one small protocol, so the loop
does not care whether the candidates came from the offline plan, an LLM, or a test's script."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelgen.record.usage import TokenUsage
from kernelgen.opdir import OperatorDir
from kernelgen.record.state import ChangeType, Diagnosis, DispatchRecord, Hypothesis, KnobValue, OpState, RoundRecord
from kernelgen.verify.results import RunRecord


@dataclass
class RoundContext:
    op: OperatorDir
    state: OpState
    round: int
    best: RoundRecord  # the current best round
    best_source: str
    diagnosis: Diagnosis
    judge: Any = None  # the operator's long-lived kernelgen.verify.judge.judge.Judge (None: each check opens its own)


@dataclass
class Proposal:
    """One candidate kernel file and what it claims to change."""

    source: str  # the candidate <name>_triton.py
    change: str  # one line: what changed
    reason: str  # why, and the effect expected
    backend: str
    tokens: TokenUsage = field(default_factory=TokenUsage)
    files: dict[str, str] = field(default_factory=dict)  # saved beside the candidate: prompt.md, reply.md
    # A proposer that gates its own candidates (the LLM path checks and repairs inside one call) hands
    # back the trusted harness's verdict on exactly this source, so the loop does not run it twice.
    checked: RunRecord | None = None
    attempts: list[str] = field(default_factory=list)
    # The offline planner: the full knob setting, and the one knob it moved.
    knobs: dict[str, KnobValue] | None = None
    knob: str = ""
    knob_from: KnobValue = None
    knob_to: KnobValue = None
    hypothesis: Hypothesis | None = None  # what the round tries and why, in numbers
    dispatch: list[DispatchRecord] = field(default_factory=list)  # the kernel's dispatch table
    # An LLM: which model wrote it, and the change type it claimed.
    model: str = ""
    claimed_type: ChangeType | None = None
    model_notes: list[str] = field(default_factory=list)  # -> RoundRecord.model_notes


class Proposer(Protocol):
    name: str

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        """This round's candidates (several when the proposer searches); [] when nothing is left to try."""

    def next_directions(self, ctx: RoundContext) -> str:
        """One line for the log's lessons: what this proposer would try next."""
