"""One optimization round, start to end:

    proposals (one hypothesis, several values; or an LLM's candidates)
      -> search: each timed against the best per perf case (GPU only)
      -> compose: one kernel from what won where (a knob change, or a dispatch table)
      -> the full accuracy check of that kernel
      -> the final judgement: timed against the best again, interleaved; kept if it wins somewhere and
         loses nowhere, beyond the noise of each case
On the CPU interpreter nothing is timed for a decision: the round checks its first candidate's
correctness and is recorded unjudged, and the shipped kernel stays as it was.
Every candidate, its results, prompt and reply stay in `rounds/round_<k>/`; state.json is saved after
every step, so a killed round is recognised and redone (kernelgen.optimize.resume).
"""

from __future__ import annotations

import time
from typing import Callable

from kernelgen.devices import DRY_RUN_LABEL, DeviceInfo
from kernelgen.errors import KernelGenError
from kernelgen.fsutil import atomic_write, move_aside, now
from kernelgen.opdir import ROUNDS_DIR, OperatorDir
from kernelgen.optimize.changes import classify_change, unified_diff
from kernelgen.optimize.decide import MIN_NOISE, case_results, decide_cases
from kernelgen.optimize.lessons import lessons
from kernelgen.optimize.proposal import Proposal, Proposer, RoundContext
from kernelgen.optimize.resume import HISTORY_DIR, promote, start_round
from kernelgen.optimize.search import search, winners
from kernelgen.record.oplog import idea_disagreement
from kernelgen.record.state import CandidateRecord, Diagnosis, KeepDecision, OpState, RoundRecord, save_state
from kernelgen.verify.judge.judge import Judge, KernelSource
from kernelgen.verify.results import RunRecord
from kernelgen.verify.judge.runner import run_accuracy, run_performance, save_record

Step = Callable[[str], None]
CANDIDATES_DIR = "candidates"


def apply_proposal(record: RoundRecord, proposal: Proposal, best_source: str, best_file: str, op: OperatorDir) -> None:
    """The proposal's change, reason, detected type, diff and knobs, written into the round's record."""
    record.change = proposal.change
    record.reason = proposal.reason
    record.backend = proposal.backend
    record.change_type = classify_change(best_source, proposal.source, op.name)
    record.diff = unified_diff(best_source, proposal.source, best_file, record.kernel_file)
    record.knobs, record.knob, record.knob_from, record.knob_to = proposal.knobs, proposal.knob, proposal.knob_from, proposal.knob_to
    record.dispatch = list(proposal.dispatch)
    record.model, record.claimed_type = proposal.model, proposal.claimed_type
    record.model_notes = list(proposal.model_notes)
    record.hypothesis = proposal.hypothesis or record.hypothesis  # the one applied, its idea written from its change
    wrong = idea_disagreement(record)
    if wrong:  # a proposer's bug: never recorded, so never logged (record.oplog refuses it as well)
        raise KernelGenError(f"{op.name}: round {record.round}'s proposal cannot be recorded: {wrong}")


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def _origin(proposer: Proposer) -> str:
    return "offline" if proposer.name == "offline" else "llm"


def _record_candidates(op: OperatorDir, k: int, proposals: list[Proposal]) -> list[CandidateRecord]:
    out = []
    for i, p in enumerate(proposals, 1):
        rel = f"{ROUNDS_DIR}/round_{k}/{CANDIDATES_DIR}/{i}_{op.file('triton').name}"
        atomic_write(op.path / rel, p.source)
        label = f"{p.knob}={p.knob_to!r}" if p.knob else f"proposal {i}" + (f": {p.change}" if p.change else "")
        out.append(CandidateRecord(label=label[:120], knobs=p.knobs, kernel_file=rel))
    return out


def _choose(proposer: Proposer, ctx: RoundContext, proposals: list[Proposal], records: list[CandidateRecord],
            judge: Judge, spare_judges: Callable[[int], list[Judge]], best: KernelSource, on_step: Step) -> Proposal | None:
    """The kernel this round puts forward: searched per case when there is a device to time on."""
    usable = []
    for r, p in zip(records, proposals):
        if p.checked is not None and not p.checked.passed:  # an LLM's, rejected after its repairs
            r.pruned = f"rejected by the judge: {_first_line(p.checked.describe())}"
        else:
            usable.append((r, p))
    if not usable:
        return proposals[0]  # its failed check is the round's verdict
    if judge.device.interpreter:
        return usable[0][1]
    judges = [judge, *spare_judges(len(usable) - 1)]  # candidates beyond the first may go to other GPUs
    on_step(f"searching {len(usable)} candidate(s) against round {ctx.best.round} on every perf case"
            + (f", over {len(judges)} devices ({', '.join(j.device.label for j in judges)})" if len(judges) > 1 else ""))
    search(judges, best, [(r, KernelSource(p.source, best.name, _origin(proposer))) for r, p in usable], on_step=on_step)
    won = winners(records)
    compose = getattr(proposer, "compose", None)
    if compose is not None:
        return compose(ctx, proposals, records, won)
    # Whole files (an LLM's): the one that wins most and loses nowhere, if any.
    clean = [i for i, r in enumerate(records) if r.cases and not any(c.verdict in ("loss", "wrong") for c in r.cases)]
    ranked = sorted(clean, key=lambda i: -sum(1 for v in won.values() if v == i))
    return proposals[ranked[0]] if ranked and any(v == ranked[0] for v in won.values()) else None


def run_round(op: OperatorDir, state: OpState, k: int, proposer: Proposer, diag: Diagnosis, device: DeviceInfo,
              judge: Judge, on_step: Step = lambda s: None, *,
              spare_judges: Callable[[int], list[Judge]] = lambda n: []) -> bool:
    """Run round k to the end; False (and nothing recorded) when the proposer has nothing left.
    `spare_judges(n)`: up to n judges on other GPUs, for the search's candidates. It starts from the
    best round, or where nothing is timed from the newest correct unjudged one (resume.start_round)."""
    best = start_round(state, judged=not device.interpreter)
    assert best is not None
    best_source = (op.path / best.kernel_file).read_text(encoding="utf-8")
    best_kernel = KernelSource(best_source, op.file("triton").name, "offline" if best.backend == "offline" else "llm")
    rdir = op.round_dir(k)
    name = op.file("triton").name
    record = RoundRecord(round=k, started_at=now(), backend=proposer.name, change_type="none",
                         kernel_file=f"{ROUNDS_DIR}/round_{k}/{name}", base_round=best.round, diagnosis=diag,
                         judged=not device.interpreter, dispatch=list(best.dispatch))
    ctx = RoundContext(op=op, state=state, round=k, best=best, best_source=best_source, diagnosis=diag, judge=judge)
    # Recorded before proposing: an LLM proposer writes its attempts into the round folder, and a
    # kill during the proposal must leave a round that `recover` recognises as partial.
    rdir.mkdir(parents=True, exist_ok=False)
    state.rounds.append(record)
    save_state(op.path, state)
    on_step(f"proposing ({proposer.name}) from round {best.round}")
    clock = time.monotonic()
    proposals = proposer.propose(ctx)
    record.seconds["propose"] = round(time.monotonic() - clock, 2)
    if not proposals:
        state.rounds.remove(record)
        save_state(op.path, state)
        move_aside(rdir) if any(rdir.iterdir()) else rdir.rmdir()
        return False
    record.hypothesis = proposals[0].hypothesis
    for p in proposals:  # every proposal's tokens were paid for, chosen or not
        record.tokens = record.tokens.add(p.tokens)
        record.attempts += p.attempts
    record.candidates = _record_candidates(op, k, proposals)
    save_state(op.path, state)
    clock = time.monotonic()
    chosen = _choose(proposer, ctx, proposals, record.candidates, judge, spare_judges, best_kernel, on_step)
    record.seconds["search"] = round(time.monotonic() - clock, 2)
    record.candidates += list(getattr(proposer, "pruned", []))  # values the rules dropped untimed, with why
    if chosen is None:
        return _finish(op, state, record, proposer, ctx, None, KeepDecision(
            keep=False, threshold=1 + MIN_NOISE, reason="no candidate was faster beyond the noise on any perf case"), on_step)
    atomic_write(rdir / name, chosen.source)
    for fname, text in chosen.files.items():
        atomic_write(rdir / fname, text)
    apply_proposal(record, chosen, best_source, best.kernel_file, op)
    save_state(op.path, state)
    decision = _judge_candidate(op, state, record, chosen, _origin(proposer), best, best_kernel, device, judge, on_step)
    return _finish(op, state, record, proposer, ctx, chosen, decision, on_step)


def _judge_candidate(op: OperatorDir, state: OpState, record: RoundRecord, chosen: Proposal, origin: str,
                     best: RoundRecord, best_kernel: KernelSource, device: DeviceInfo, judge: Judge,
                     on_step: Step) -> KeepDecision:
    """The chosen candidate's accuracy (every planned check, unless its proposer already ran them on
    these bytes), then, where it passed on a device, its timing against the best round's: keep or not."""
    # An LLM proposer has already checked (and repaired) its candidate with the trusted judge; the
    # planner's is checked here. Either way there is one repair loop, the LLM's.
    name, rdir = op.file("triton").name, op.round_dir(record.round)
    candidate = KernelSource(chosen.source, name, origin)
    if chosen.checked is not None and chosen.checked.accuracy and chosen.checked.accuracy.kernel_sha256 == candidate.sha256:
        record.accuracy = chosen.checked
    else:
        on_step(f"checking the candidate ({record.change[:60]}) with every planned check")
        clock = time.monotonic()
        record.accuracy = run_accuracy(op, device, source=candidate, judge=judge)
        record.seconds["accuracy"] = round(time.monotonic() - clock, 2)
    save_record(rdir / "accuracy.json", record.accuracy)
    save_state(op.path, state)
    if not record.accuracy.passed:
        decision = KeepDecision(keep=False, threshold=1 + MIN_NOISE,
                                reason=f"rejected by the judge: {_first_line(record.accuracy.describe())}")
    elif device.interpreter:
        shipped = state.best_round
        decision = KeepDecision(keep=False, threshold=1 + MIN_NOISE,
                                reason=f"unjudged (no device): correct ({record.accuracy.accuracy.summary() if record.accuracy.accuracy else 'checked'}); "
                                       f"{DRY_RUN_LABEL}, so the shipped kernel stays round {shipped}'s, and the next round "
                                       f"starts from this one")
    else:
        on_step(f"timing the candidate against round {best.round}, interleaved, on every perf case")
        clock = time.monotonic()
        # Eager, torch.compile and the peers were timed with the best round on these same inputs (and
        # are copied over below); timing the peers again cost ~20 s a round on an H100.
        record.performance = run_performance(op, device, source=candidate, compare=best_kernel, no_compile=True, no_eager=True,
                                             no_peers=True, judge=judge)
        record.seconds["timing"] = round(time.monotonic() - clock, 2)
        _reuse_baseline_timings(record.performance, best.performance)
        save_record(rdir / "performance.json", record.performance)
        perf = record.performance.performance
        record.cases = case_results(perf) if perf else []
        decision = decide_cases(record.cases, measured=True) if perf and record.performance.passed else KeepDecision(
            keep=False, threshold=1 + MIN_NOISE, reason=f"the timing run failed: {_first_line(record.performance.describe())}")
    return decision


def _finish(op: OperatorDir, state: OpState, record: RoundRecord, proposer: Proposer, ctx: RoundContext,
            chosen: Proposal | None, decision: KeepDecision, on_step: Step) -> bool:
    best = ctx.best
    record.decision = decision
    name = op.file("triton").name
    if decision.keep and chosen is not None:
        on_step(f"keeping round {record.round}: {decision.reason}")
        promote(op, state, chosen.source)
        record.kept = True
        record.outcome = f"kept: {decision.reason}; promoted to {name} (round {best.round}'s kernel kept in {HISTORY_DIR}/)"
        state.best_round = record.round
        after = RoundContext(op, state, record.round, record, chosen.source, ctx.diagnosis, ctx.judge)
    else:
        on_step(f"round {record.round} not kept: {decision.reason}")
        if chosen is not None and record.accuracy is not None and not record.accuracy.passed:
            record.outcome = f"rejected: {decision.reason[len('rejected by the judge: '):]}"
        elif not record.judged:
            record.outcome = decision.reason
        else:
            record.outcome = f"reverted to round {best.round}: {decision.reason}"
        after = ctx
    # The judge keeps only the workers of what the next round starts from (the best's, and an unjudged
    # correct candidate's): losing candidates and repair attempts are let go.
    keep = {KernelSource(after.best_source, name, "file").sha256}
    if chosen is not None and not record.judged and record.accuracy is not None and record.accuracy.passed:
        keep.add(KernelSource(chosen.source, name, "file").sha256)
    ctx.judge.retain(keep)
    record.lessons = lessons(record, decision, best.round)
    record.next_directions = proposer.next_directions(after)
    record.finished_at = now()
    save_state(op.path, state)
    return True


def _reuse_baseline_timings(run: RunRecord | None, source: RunRecord | None) -> None:
    """Fill each case's eager and torch.compile timings from the same case x dtype measured earlier on
    this device (the reference is the same code on the same inputs)."""
    perf = run.performance if run else None
    ref = source.performance if source else None
    if perf is None or ref is None or ref.device != perf.device:
        return
    known = {(c.case, c.dtype): c for c in ref.cases}
    for c in perf.cases:
        old = known.get((c.case, c.dtype))
        if old is None or c.kernel is None:
            continue
        if old.eager is not None:
            c.eager, c.eager_host_us = old.eager, old.eager_host_us
            c.speedup_eager = old.eager.ms / c.kernel.ms
        if old.compiled is not None:
            c.compiled = old.compiled
            c.speedup_compile = old.compiled.ms / c.kernel.ms
        c.peers = c.peers or old.peers
    if perf.cases and all((c.case, c.dtype) in known and c.kernel is not None for c in perf.cases):
        perf.baselines = list(ref.baselines)  # every case carries them: as full as the best's (kernelgen.batch.job)
    if known:
        perf.note = (perf.note + " Eager, torch.compile and peer timings reused from the best round's measurement "
                     "(same device, shapes, dtypes); only the candidate and the best were timed in this round.").strip()
