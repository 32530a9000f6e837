"""The earlier rounds as the optimization prompt shows them, read from the typed record
(kernelgen.record.state.RoundRecord): each round's full change, its claimed and detected type, the
model's full reason, what it said while repairing, the outcome, the numbers per case, and for a
candidate that was not kept, its diff (bounded by lines, with how many were left out).

Everything here was written by a model or printed by a candidate: it goes through
`scrub_candidate_text` before it reaches a prompt.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kernelgen.llm.untrusted import scrub_candidate_text
from kernelgen.record.state import OpState, RoundRecord

DIFF_LINES = 60  # a diff beyond this shows its first lines and "N more lines"


class HistoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    round: int
    base_round: int | None
    verdict: str  # kept | reverted | rejected | unjudged | initial
    backend: str
    change: str
    claimed_type: str | None
    detected_type: str
    reason: str
    outcome: str
    cases: list[str] = Field(default_factory=list)  # the numbers per case x dtype
    model_notes: list[str] = Field(default_factory=list)  # design note, stated causes
    attempts: list[str] = Field(default_factory=list)
    diff: str = ""  # only for a candidate that was not kept
    diff_more_lines: int = 0


def bounded_diff(diff: str, limit: int = DIFF_LINES) -> tuple[str, int]:
    lines = diff.rstrip("\n").splitlines()
    if len(lines) <= limit:
        return "\n".join(lines), 0
    return "\n".join(lines[:limit]), len(lines) - limit


def _verdict(r: RoundRecord) -> str:
    """kept, rejected (not correct), reverted (correct, timed, not faster), or unjudged: correct and
    never timed (no device could), so neither kept nor reverted, and the next round builds on it."""
    if r.round == 0:
        return "initial"
    if r.kept:
        return "kept"
    if r.accuracy is None or not r.accuracy.passed:
        return "rejected"
    if not r.judged:
        return "unjudged"
    return "reverted"


def _case_lines(r: RoundRecord) -> list[str]:
    perf = r.performance.performance if r.performance else None
    if perf is None:
        return []
    dry = "" if perf.measured else " [interpreter dry run]"
    lines = []
    for c in perf.cases:
        parts = list(c.facts())
        if c.speedup_vs_compare is not None:
            parts.append(f"x{c.speedup_vs_compare:.3f} vs round {r.base_round}'s kernel in the same process")
        lines.append(f"{c.label}: " + (", ".join(parts) or "not timed") + dry)
    return lines


def _entry(r: RoundRecord) -> HistoryEntry:
    verdict = _verdict(r)
    diff, more = bounded_diff(r.diff) if verdict in ("reverted", "rejected") and r.diff else ("", 0)
    clean = scrub_candidate_text
    return HistoryEntry(
        round=r.round, base_round=r.base_round, verdict=verdict, backend=r.backend, change=clean(r.change),
        claimed_type=r.claimed_type, detected_type=r.change_type, reason=clean(r.reason), outcome=clean(r.outcome),
        cases=[clean(c) for c in _case_lines(r)], model_notes=[clean(n) for n in r.model_notes],
        attempts=[clean(a) for a in r.attempts], diff=clean(diff), diff_more_lines=more,
    )


def history(state: OpState) -> list[HistoryEntry]:
    """Every finished round, oldest first (round 0 included: its design note is the model's own)."""
    return [_entry(r) for r in state.rounds if r.finished_at is not None]
