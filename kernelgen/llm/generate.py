"""The first kernel of `kernelgen new`, written by an LLM: generated, checked by the trusted harness,
repaired within the budgets; the best attempt comes back with the story of how it was reached."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from kernelgen.errors import GenerationError
from kernelgen.llm.prompts import generation_messages
from kernelgen.llm.recording import LLM_DIR
from kernelgen.llm.repair import MALFORMED_BUDGET, write_and_repair
from kernelgen.llm.setup import LLMSetup, connect
from kernelgen.llm.transcript import Transcript
from kernelgen.record.usage import TokenUsage
from kernelgen.verify.results import RunRecord

if TYPE_CHECKING:
    from kernelgen.devices import DeviceInfo
    from kernelgen.llm.earlier import EarlierAttempts
    from kernelgen.opdir import OperatorDir

Step = Callable[[str], None]


@dataclass
class LLMKernel:
    """What the LLM wrote for round 0, and how it got there."""

    source: str
    note: str  # who wrote it, after how many replies
    baseline_source: str | None = None  # only when the spec had no reference
    tokens: TokenUsage = field(default_factory=TokenUsage)
    attempts: list[str] = field(default_factory=list)
    model_notes: list[str] = field(default_factory=list)  # the model's design note and stated causes (scrubbed)
    checked: RunRecord | None = None  # the judge's verdict on exactly `source`, from the repair loop


def generate(llm: LLMSetup, op: OperatorDir, device: DeviceInfo, on_step: Step = lambda s: None,
             transcript: Transcript | None = None, earlier: EarlierAttempts | None = None) -> LLMKernel:
    """The first kernel for `kernelgen new`: generated, checked, repaired; the best attempt returned.
    GenerationError only when no candidate even compiled. The exchanges are written to `transcript`
    as they happen (kernelgen.llm.transcript; default: the operator folder's `llm/`). `earlier`: a
    failed round 0 to continue from (its kernel and verdict, as a repair request), not a blank start."""
    spec = op.spec
    transcript = transcript or Transcript(folder=op.path / LLM_DIR)
    session = connect(llm, op.path, record_dir=transcript.folder, resume_from=transcript.earlier)
    want_baseline = spec.reference is None and earlier is None
    if earlier is not None:
        on_step(f"{spec.name}: continuing from the {len(earlier.attempts)} earlier attempt(s) in {earlier.folder}: "
                f"its closest kernel{f' (attempt {earlier.kept})' if earlier.kept else ''} and why it failed go first")
    messages = earlier.messages(spec) if earlier is not None else generation_messages(spec, device, want_baseline=want_baseline)
    try:
        outcome = write_and_repair(session, op, device, messages, round_k=0, repairs=llm.repairs,
                                   purpose="repair" if earlier is not None else "generate", want_baseline=want_baseline,
                                   on_step=on_step, first_number=earlier.next_number if earlier is not None else 1,
                                   failed=earlier.kept if earlier is not None else 0)
        if outcome.best is None or not outcome.compiled:
            story = "\n".join(f"  {a}" for a in outcome.attempts) or "  (no attempts)"
            raise GenerationError(f"{spec.name}: no candidate kernel compiled within the budgets "
                                  f"({MALFORMED_BUDGET} malformed replies in a row, {llm.repairs} repairs):\n{story}")
    finally:
        transcript.reused = getattr(session.backend, "reused", 0)
    best = outcome.best
    source = "replayed from " + str(llm.replay_dir) if llm.backend == "replay" else f"written by {session.model} at {session.backend.endpoint}"
    n = len(outcome.attempts)
    note = f"{source}; {n} repl{'y' if n == 1 else 'ies'}, " + ("correct at attempt " + str(best.number) if best.correct
                                                                else f"no correct kernel within the budget: kept attempt {best.number}, the closest")
    if outcome.baseline_source is not None:
        note += "; the spec had no reference, so the LLM wrote the baseline too"
    if earlier is not None:
        note += f"; continued from {len(earlier.attempts)} earlier attempt(s) in {earlier.folder}"
    return LLMKernel(source=best.source, note=note, baseline_source=outcome.baseline_source, tokens=outcome.tokens,
                     attempts=(earlier.lines() if earlier is not None else []) + outcome.attempts,
                     model_notes=outcome.notes, checked=best.run)
