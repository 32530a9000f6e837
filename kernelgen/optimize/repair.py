"""`kernelgen optimize` on a folder whose round 0 never passed: one round repairs the newest failed kernel
through the proposer's `repair_initial` (an LLM's: the same repair loop `kernelgen new` continues with,
kernelgen.llm.earlier) before any optimization round. A correct kernel from it is the first correct
one, so it is kept without a timing to beat, promoted, and the rounds after it start from it. The
offline generator has no repair: its kernel is the generator's, and a wrong one is a bug to report.
"""

from __future__ import annotations

import time
from typing import Callable

from kernelgen.devices import DeviceInfo
from kernelgen.fsutil import atomic_write, now
from kernelgen.opdir import ROUNDS_DIR, OperatorDir
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.proposal import Proposer, RoundContext
from kernelgen.optimize.resume import promote
from kernelgen.optimize.round import apply_proposal
from kernelgen.record.state import KeepDecision, OpState, RoundRecord, save_state
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.judge.runner import run_accuracy, save_record

Step = Callable[[str], None]


def can_repair(proposer: Proposer) -> bool:
    return callable(getattr(proposer, "repair_initial", None))


def repair_round(op: OperatorDir, state: OpState, proposer: Proposer, device: DeviceInfo, judge: Judge,
                 on_step: Step = lambda s: None) -> bool:
    """Round k repairs the newest failed round's kernel; True when the result is correct (it is then
    the best, promoted to `<name>_triton.py`)."""
    base = max((r for r in state.rounds if r.finished_at is not None), key=lambda r: r.round)
    k = base.round + 1
    name = op.file("triton").name
    base_source = (op.path / base.kernel_file).read_text(encoding="utf-8")
    record = RoundRecord(round=k, started_at=now(), backend=proposer.name, change_type="none",
                         kernel_file=f"{ROUNDS_DIR}/round_{k}/{name}", base_round=base.round,
                         diagnosis=diagnose(None, base.round, op.spec.target_speedup), judged=not device.interpreter)
    op.round_dir(k).mkdir(parents=True, exist_ok=False)
    state.rounds.append(record)
    save_state(op.path, state)
    on_step(f"round {base.round} has no correct kernel: repairing it ({proposer.name}) before any optimization round")
    clock = time.monotonic()
    proposal = proposer.repair_initial(RoundContext(op, state, k, base, base_source, record.diagnosis, judge))  # type: ignore[attr-defined]
    record.seconds["propose"] = round(time.monotonic() - clock, 2)
    record.tokens, record.attempts = proposal.tokens, list(proposal.attempts)
    atomic_write(op.round_dir(k) / name, proposal.source)
    apply_proposal(record, proposal, base_source, base.kernel_file, op)
    checked = proposal.checked
    sha = KernelSource(proposal.source, name, "llm").sha256
    record.accuracy = checked if checked is not None and checked.accuracy and checked.accuracy.kernel_sha256 == sha else \
        run_accuracy(op, device, source=KernelSource(proposal.source, name, "llm"), judge=judge)
    save_record(op.round_dir(k) / "accuracy.json", record.accuracy)
    passed = record.accuracy.passed
    if passed:
        promote(op, state, proposal.source)
        record.kept, state.best_round = True, k
        record.outcome = f"correct: round {base.round}'s kernel repaired; the starting point for optimization"
        record.decision = KeepDecision(keep=True, threshold=1.0, reason="the first correct kernel: nothing to time it against")
    else:
        why = (record.accuracy.describe().strip().splitlines() or ["not correct"])[0][:300]
        record.outcome = f"still not correct: {why}"
        record.decision = KeepDecision(keep=False, threshold=1.0, reason=f"rejected by the judge: {why}")
    record.lessons = [record.outcome]
    record.next_directions = "optimization rounds from this kernel" if passed else "`kernelgen optimize` again repairs this round's kernel"
    record.finished_at = now()
    save_state(op.path, state)
    return passed
