"""The Proposer the `openai` and `replay` backends use: the optimization prompt (kernelgen.llm.prompts)
with the current best, its measurements and the diagnosis, then kernelgen.llm.repair's check-and-repair
loop (the repair prompt, within the configured repair budget). The exchanges of the round are
copied into `rounds/round_<k>/llm/`, beside the candidate they produced."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

from kernelgen.devices import DeviceInfo
from kernelgen.opdir import OperatorDir
from kernelgen.optimize.proposal import Proposal, RoundContext
from kernelgen.record.state import OpState


def history_lines(state: OpState) -> list[str]:
    """Earlier rounds and their outcomes, so the model does not repeat a rejected change."""
    out = []
    for r in state.rounds:
        if r.round == 0 or r.finished_at is None:
            continue
        out.append(f"round {r.round} ({r.change_type}): {r.change} -> {r.outcome}")
    return out


@dataclass
class LLMProposer:
    op: OperatorDir
    device: DeviceInfo
    setup: Any  # kernelgen.llm.setup.LLMSetup
    session: Any  # kernelgen.llm.Session
    name: str = "openai"

    @classmethod
    def create(cls, backend: str, op: OperatorDir, device: DeviceInfo, options: dict[str, Any]) -> "LLMProposer":
        from kernelgen.llm.setup import connect, prepare

        setup = prepare(backend, options)  # ConfigError (exit 2) before any round starts
        return cls(op=op, device=device, setup=setup, session=connect(setup, op.path), name=setup.backend)

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        from kernelgen.llm.repair import write_and_repair
        from kernelgen.llm.prompts import optimization_messages
        from kernelgen.llm.recording import LLM_DIR

        perf_run = ctx.best.performance
        peaks = perf_run.performance.peaks if perf_run and perf_run.performance else None
        messages = optimization_messages(
            self.op.spec, ctx.best_source, "\n".join(ctx.diagnosis.lines), history_lines(ctx.state),
            device=self.device, measurements=perf_run, peaks=peaks, round_k=ctx.round)
        llm_dir = self.op.path / LLM_DIR
        before = set(llm_dir.iterdir()) if llm_dir.is_dir() else set()
        outcome = write_and_repair(self.session, self.op, self.device, messages, round_k=ctx.round,
                                   repairs=self.setup.repairs, purpose="optimize")
        new_files = sorted(set(llm_dir.iterdir()) - before) if llm_dir.is_dir() else []
        rdir = self.op.round_dir(ctx.round) / LLM_DIR
        for f in new_files:  # prompt and reply of this round, beside its candidate
            rdir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, rdir / f.name)
        best = outcome.best
        if best is None:
            from kernelgen.verify.results import RunRecord

            # No usable reply within the malformed-reply budget: a rejected round, the best unchanged.
            failed = RunRecord(kind="accuracy", status="error", exit_code=None, duration_s=0.0,
                               stderr_tail="no usable reply: " + "; ".join(outcome.attempts[-3:]))
            return [Proposal(source=ctx.best_source, change="no usable reply", reason="", backend=self.name,
                             tokens=outcome.tokens, attempts=outcome.attempts, checked=failed)]
        parsed = best.parsed
        return [Proposal(
            source=best.source, change=parsed.change or "(the model named no change)",
            reason=parsed.reason or "", backend=self.name, tokens=outcome.tokens, attempts=outcome.attempts,
            checked=best.run, model=self.session.model, claimed_type=parsed.change_type or None,
        )]

    def next_directions(self, ctx: RoundContext) -> str:
        return "the next round asks the model again with this round's outcome in its history."
