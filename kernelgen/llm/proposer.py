"""The Proposer the `openai` and `replay` backends use: the optimization prompt (kernelgen.llm.prompts)
with the device's facts, the current best, its measurements, the diagnosis and every earlier round,
then kernelgen.llm.repair's check-and-repair loop (the repair prompt, within the configured repair
budget). The exchanges of the round are copied into `rounds/round_<k>/llm/`, beside the candidates
they produced.

With `candidates` N > 1 the model is asked N times, one proposal per request, each request listing
the CHANGE lines of the proposals before it ("propose a different idea"). One request asking for N
files was the alternative; separate requests were chosen because each reply then holds one file, so
the reply parser, the malformed-reply budget and the repair loop work per candidate unchanged, one
truncated or broken reply costs one candidate and not all N, and no reply has to fit N whole files
under max_tokens. The price is N copies of the prompt's tokens.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

from kernelgen.devices import DeviceInfo
from kernelgen.llm.recording import LLM_DIR
from kernelgen.opdir import OperatorDir
from kernelgen.optimize.proposal import Proposal, RoundContext


@dataclass
class LLMProposer:
    op: OperatorDir
    device: DeviceInfo
    setup: Any  # kernelgen.llm.setup.LLMSetup
    session: Any  # kernelgen.llm.Session
    name: str = "openai"
    remembered: list[Any] = field(default_factory=list)  # the tuning memory's entries for this device and family

    @classmethod
    def create(cls, backend: str, op: OperatorDir, device: DeviceInfo, options: dict[str, Any]) -> "LLMProposer":
        from kernelgen.llm.setup import connect, prepare

        from kernelgen.optimize.remember import recalled

        setup = prepare(backend, options)  # ConfigError (exit 2) before any round starts
        return cls(op=op, device=device, setup=setup, session=connect(setup, op.path), name=setup.backend,
                   remembered=recalled(op.spec, device))

    @property
    def candidates(self) -> int:
        return max(1, int(getattr(self.setup, "candidates", 1)))

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        """`candidates` proposals, in the order they were asked for, each checked (and repaired) by
        the trusted harness; a candidate with no usable reply comes back as a failed check."""
        from kernelgen.llm.history import history
        from kernelgen.llm.prompts import optimization_messages
        from kernelgen.llm.repair import write_and_repair

        perf_run = ctx.best.performance
        perf = perf_run.performance if perf_run is not None else None
        entries = history(ctx.state)
        before = self._exchanges()
        n = self.candidates
        proposals: list[Proposal] = []
        for c in range(1, n + 1):
            messages = optimization_messages(
                self.op.spec, ctx.best_source, device=self.device, performance=perf, diagnosis=ctx.diagnosis,
                history=entries, best_round=ctx.best.round, round_k=ctx.round, candidate=c, candidates=n,
                earlier=[p.change for p in proposals], remembered=self.remembered, shipped=ctx.state.best_round)
            outcome = write_and_repair(self.session, self.op, self.device, messages, round_k=ctx.round,
                                       repairs=self.setup.repairs, purpose="optimize", tag=f"candidate-{c}" if n > 1 else "",
                                       check=self._check(ctx))
            proposals.append(self._proposal(ctx, outcome))
        self._keep_exchanges(ctx.round, before)
        return proposals

    def repair_initial(self, ctx: RoundContext) -> Proposal:
        """Round 0 ended without a correct kernel: the same repair loop `kernelgen new` continues with
        (kernelgen.llm.earlier), from round 0's closest kernel and its verdict, in this round's folder."""
        from kernelgen.llm.earlier import from_round
        from kernelgen.llm.repair import write_and_repair

        earlier = from_round(self.op.path, ctx.best)
        if earlier is None:
            from kernelgen.errors import GenerationError

            raise GenerationError(f"{self.op.name}: round 0 left no kernel and verdict to repair",
                                  hint=f"run `kernelgen new {self.op.path / 'spec.yaml'} --force`")
        before = self._exchanges()
        outcome = write_and_repair(self.session, self.op, self.device, earlier.messages(self.op.spec), round_k=ctx.round,
                                   repairs=self.setup.repairs, purpose="repair", check=self._check(ctx),
                                   first_number=earlier.next_number, failed=earlier.kept)
        self._keep_exchanges(ctx.round, before)
        proposal = self._proposal(ctx, outcome)
        cause = outcome.best.parsed.cause if outcome.best is not None else ""
        proposal.change = f"repair of round 0's kernel{f': {cause}' if cause else ''}"
        proposal.attempts = earlier.lines() + proposal.attempts
        return proposal

    def _exchanges(self) -> set:
        folder = self.op.path / LLM_DIR
        return set(folder.iterdir()) if folder.is_dir() else set()

    def _keep_exchanges(self, k: int, before: set) -> None:
        """The prompts and replies of round k, copied beside its candidates."""
        rdir = self.op.round_dir(k) / LLM_DIR
        for f in sorted(self._exchanges() - before):
            rdir.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, rdir / f.name)

    def _check(self, ctx: RoundContext) -> Any:
        """Each attempt checked by the loop's judge (one per operator, its workers reused), or by a
        judge of its own when the round has none."""
        from kernelgen.verify.judge.runner import run_accuracy

        return lambda path: run_accuracy(self.op, self.device, kernel=path, judge=ctx.judge)

    def _proposal(self, ctx: RoundContext, outcome: Any) -> Proposal:  # outcome: kernelgen.llm.repair.RepairOutcome
        best = outcome.best
        if best is None:
            from kernelgen.verify.results import RunRecord

            # No usable reply within the malformed-reply budget: a rejected candidate, the best unchanged.
            failed = RunRecord(kind="accuracy", status="error", exit_code=None, duration_s=0.0,
                               stderr_tail="no usable reply: " + "; ".join(outcome.attempts[-3:]))
            return Proposal(source=ctx.best_source, change="no usable reply", reason="", backend=self.name,
                            tokens=outcome.tokens, attempts=outcome.attempts, checked=failed, model_notes=outcome.notes)
        parsed = best.parsed
        return Proposal(
            source=best.source, change=parsed.change or "(the model named no change)",
            reason=parsed.reason or "", backend=self.name, tokens=outcome.tokens, attempts=outcome.attempts,
            checked=best.run, model=self.session.model, claimed_type=parsed.change_type or None,
            model_notes=outcome.notes,
        )

    def next_directions(self, ctx: RoundContext) -> str:
        return "the next round asks the model again with this round's outcome in its history."
