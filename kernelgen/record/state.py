"""The per-operator record (`state.json` beside the generated files): every round, its candidate,
its results and whether it was kept. Saved atomically after each step, so an interrupted run
resumes from the last finished round. `optimization_log.md` is rendered from it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kernelgen.fsutil import atomic_write
from kernelgen.record.usage import TokenUsage
from kernelgen.opdir import STATE_FILE  # noqa: F401 - re-exported: the record's readers import it from here
from kernelgen.record.analysis import OperatorAnalysis
from kernelgen.verify.results import RunRecord



class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


ChangeType = Literal["initial", "parameters", "interface", "logic", "none"]
# A knob setting of the offline generator, as stored: kernelgen.offline validates it by family.
KnobValue = int | float | bool | str | None


class Diagnosis(_Model):
    """The bottleneck analysis a round starts from: the current best's measured numbers against the
    device's ceilings (kernelgen.optimize.diagnose writes it)."""

    round: int  # the round whose measurements are analysed (the best when the round started)
    measured: bool  # False under the interpreter: nothing here is a measurement
    speedup_eager: float | None = None  # geomean over the perf cases
    speedup_compile: float | None = None
    min_frac_peak: float | None = None  # the worst case's fraction of its ceiling
    bound: str = "unknown"  # memory | compute | unknown (the worst case's)
    target: float | None = None
    lines: list[str] = Field(default_factory=list)  # the analysis in words, numbers included

    @property
    def target_met(self) -> bool:
        return self.target is not None and self.speedup_eager is not None and self.speedup_eager >= self.target


class KeepDecision(_Model):
    """Why a candidate was kept or not: its speedup over the best, timed in the same process, against
    the noise threshold it had to beat."""

    keep: bool
    speedup: float | None = None  # geomean over the best; None when it was not timed
    threshold: float  # 1 + the measured noise of both timings (never below 1 + MIN_NOISE)
    reason: str


Verdict = Literal["win", "loss", "neutral", "wrong", "unjudged"]


class CaseResult(_Model):
    """A kernel against the current best on one perf case x dtype, timed interleaved in one process."""

    case: int
    dtype: str
    shapes: dict[str, list[int]]
    best_ms: float | None = None
    ms: float | None = None
    speedup: float | None = None  # best / this: the median of the per-round paired ratios
    noise: float = 0.0  # the speedup had to leave 1 by more than this (spreads of both, the pair's own spread)
    verdict: Verdict = "unjudged"
    note: str = ""  # why: "same launches as the best", "wrong at this shape: ...", "no device: not timed"
    device: str = ""  # where this and the best were timed (cuda:3): a search may spread candidates over GPUs

    @property
    def label(self) -> str:
        first = next(iter(self.shapes.values()), [])
        return f"{'x'.join(map(str, first))} {self.dtype}"


class CandidateRecord(_Model):
    """One value (or one proposal) a round's search tried."""

    label: str  # "BLOCK_SIZE=8192", "algorithm='online'", "proposal 2"
    knobs: dict[str, KnobValue] | None = None
    kernel_file: str = ""  # relative to the op dir
    pruned: str = ""  # why it was not timed, in words with numbers ("" when it was)
    cases: list[CaseResult] = Field(default_factory=list)


class DispatchRecord(_Model):
    """One entry of a kernel's dispatch table: the setting that won at one perf case, and why."""

    dtype: str
    shapes: dict[str, list[int]]
    knobs: dict[str, KnobValue]
    reason: str


class Hypothesis(_Model):
    """What a round tries and why, from the diagnosis's numbers."""

    knob: str = ""  # the one knob (or algorithmic variant) it moves; "" for an LLM's proposal
    problem: str = ""  # the measured symptom ("log_softmax 4096x50257 bf16 at 34% of copy: rows of 50257 ...")
    idea: str = ""  # the change
    expected: str = ""  # the effect expected, in numbers
    cases: list[str] = Field(default_factory=list)  # the perf cases it targets


def _from_extra(data: dict) -> dict:
    """A round recorded before its analysis had fields (an `extra` dict): the same facts, typed."""
    extra = dict(data.pop("extra", None) or {})
    decision = extra.get("decision")
    if isinstance(decision, dict):
        decision = {"keep": decision.get("keep", False), "speedup": decision.get("speedup_vs_best"),
                    "threshold": decision.get("threshold", 1.01), "reason": decision.get("reason", "")}
    knobs = extra.get("knobs")
    renamed = {"base_round": extra.get("base_round"), "diagnosis": extra.get("diagnosis"), "decision": decision,
               "lessons": extra.get("lessons"), "next_directions": extra.get("next"),
               "knobs": {k: None if v == "auto" else v for k, v in knobs.items()} if isinstance(knobs, dict) else None,
               "knob": extra.get("knob"), "knob_from": extra.get("from"), "knob_to": extra.get("to"),
               "model": extra.get("model"), "claimed_type": extra.get("claimed_type") or None}
    return {**data, **{k: v for k, v in renamed.items() if v is not None}}


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
    seconds: dict[str, float] = Field(default_factory=dict)  # wall time per phase: propose, search, accuracy, timing
    base_round: int | None = None  # the best round this one started from
    diagnosis: Diagnosis | None = None
    decision: KeepDecision | None = None
    lessons: list[str] = Field(default_factory=list)  # what worked, what failed and why
    next_directions: str = ""  # what the proposer would try next
    knobs: dict[str, KnobValue] | None = None  # the offline generator's full setting baked into this kernel
    knob: str = ""  # the one knob an offline round changed (with knob_from -> knob_to)
    knob_from: KnobValue = None
    knob_to: KnobValue = None
    hypothesis: Hypothesis | None = None
    candidates: list[CandidateRecord] = Field(default_factory=list)  # what the round's search timed
    cases: list[CaseResult] = Field(default_factory=list)  # the final candidate against the best, per case
    dispatch: list[DispatchRecord] = Field(default_factory=list)  # this kernel's dispatch table
    judged: bool = True  # False on the CPU interpreter: nothing kept, promoted or rejected on its timings
    model: str = ""  # the LLM that wrote the candidate
    claimed_type: ChangeType | None = None  # the change type the LLM claimed (change_type is detected from the diff)
    # What the LLM said in words, scrubbed: round 0's design note, and the cause it stated before each
    # repair ("attempt 2: the grid used floor division ..."). Shown in the log and the next prompts.
    model_notes: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _untyped_extra(cls, data: object) -> object:
        return _from_extra(data) if isinstance(data, dict) and "extra" in data else data


class RefreshRecord(_Model):
    """One `kernelgen refresh`: the folder's spec.yaml was edited, the trusted tests re-rendered from
    it and the best kernel re-verified; the rounds before it are kept as they were."""

    index: int  # 1, 2, ...
    at: str
    after_round: int  # the last round recorded when it ran: the log shows it after that round
    changes: list[str]  # what the edit changed, in words (cases, dtypes, tolerances added or removed)
    kept_dir: str = ""  # where the files it replaced are kept, relative to the op dir
    round: int | None = None  # the round whose kernel was re-verified (the best)
    kernel_file: str = ""
    accuracy: RunRecord | None = None
    performance: RunRecord | None = None
    # The best round's timings on the perf cases before the edit: the round's record now holds the
    # new ones (or none, to be measured by the next optimize), and these are kept here.
    superseded_performance: RunRecord | None = None
    passed: bool = False
    outcome: str = ""


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
    rendered_spec: str = ""  # the spec.yaml text the trusted tests were last rendered from ("" before refresh existed)
    analysis: OperatorAnalysis | None = None  # the operator analysis that opens the log
    refreshes: list[RefreshRecord] = Field(default_factory=list)

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
