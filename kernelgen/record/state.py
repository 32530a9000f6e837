"""The per-operator record (`state.json` beside the generated files): every round, its candidate,
its results and whether it was kept. Saved atomically after each step, so an interrupted run
resumes from the last finished round. `optimization_log.md` is rendered from it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.fsutil import atomic_write
from kernelgen.llm.usage import TokenUsage
from kernelgen.verify.results import RunRecord

STATE_FILE = "state.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


ChangeType = Literal["initial", "parameters", "interface", "logic", "none"]


class RoundRecord(_Model):
    round: int
    started_at: str
    finished_at: str | None = None
    backend: str
    change: str = ""  # one line: what the candidate changed
    change_type: ChangeType = "initial"
    reason: str = ""  # why this change, and what it should do
    kernel_file: str  # relative to the op dir: rounds/round_<k>/<name>_triton.py
    diff: str = ""
    accuracy: RunRecord | None = None
    performance: RunRecord | None = None
    kept: bool = False
    outcome: str = ""  # what happened, in words (rejected because..., kept: x1.08 over round 2)
    attempts: list[str] = Field(default_factory=list)  # repair history within the round
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    extra: dict[str, object] = Field(default_factory=dict)  # room for the optimizer's analysis


class OpState(_Model):
    name: str
    created_at: str
    backend: str
    device: str
    baseline_by_llm: bool = False
    generation_note: str = ""  # e.g. the offline generator's summary of what it traced
    rounds: list[RoundRecord] = Field(default_factory=list)
    best_round: int | None = None
    stopped_because: str = ""

    @property
    def tokens(self) -> TokenUsage:
        total = TokenUsage()
        for r in self.rounds:
            total = total.add(r.tokens)
        return total

    def best(self) -> RoundRecord | None:
        if self.best_round is None:
            return None
        return next((r for r in self.rounds if r.round == self.best_round), None)


def load_state(op_dir: Path) -> OpState:
    return OpState.model_validate_json((Path(op_dir) / STATE_FILE).read_text(encoding="utf-8"))


def save_state(op_dir: Path, state: OpState) -> None:
    atomic_write(Path(op_dir) / STATE_FILE, state.model_dump_json(indent=2))
