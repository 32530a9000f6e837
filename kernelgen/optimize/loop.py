"""`kernelgen optimize`: diagnose the current best -> propose a candidate -> gate it through the trusted
harness -> time it against the best in the same process -> keep it only if faster beyond the noise.

Each round's candidate, results (accuracy.json, performance.json), prompt and reply live in
`rounds/round_<k>/`; state.json is saved after every step (kernelgen.optimize.resume makes an
interrupted run pick up where it stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelgen.devices import DeviceInfo
from kernelgen.errors import GenerationError, UsageError
from kernelgen.fsutil import atomic_write, move_aside, now
from kernelgen.opdir import ROUNDS_DIR, OperatorDir, is_operator_dir, open_operator, operator_dirs_under, operator_status
from kernelgen.optimize.changes import classify_change, unified_diff
from kernelgen.optimize.decide import MIN_NOISE, at_ceiling, decide_keep, stop_reason
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.proposal import Proposal, Proposer, RoundContext
from kernelgen.optimize.resume import HISTORY_DIR, finished_rounds, promote, recover
from kernelgen.record.oplog import write_log
from kernelgen.record.state import Diagnosis, KeepDecision, OpState, RoundRecord, load_state, save_state
from kernelgen.verify.results import RunRecord
from kernelgen.verify.runner import kernel_source, run_accuracy, run_performance

Step = Callable[[str], None]


# --- one round ------------------------------------------------------------------------------------
def _save_run(path: Path, run) -> None:  # noqa: ANN001 - RunRecord
    atomic_write(path, run.model_dump_json(indent=2))


def _apply(record: RoundRecord, proposal: Proposal, best_source: str, best_file: str, op: OperatorDir) -> None:
    record.change = proposal.change
    record.reason = proposal.reason
    record.backend = proposal.backend
    record.change_type = classify_change(best_source, proposal.source, op.name)
    record.diff = unified_diff(best_source, proposal.source, best_file, record.kernel_file)
    record.knobs, record.knob, record.knob_from, record.knob_to = proposal.knobs, proposal.knob, proposal.knob_from, proposal.knob_to
    record.model, record.claimed_type = proposal.model, proposal.claimed_type
    record.model_notes = list(proposal.model_notes)
    record.tokens = record.tokens.add(proposal.tokens)


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


def run_round(op: OperatorDir, state: OpState, k: int, proposer: Proposer, diag: Diagnosis, device: DeviceInfo,
              on_step: Step = lambda s: None) -> bool:
    """Run round k to the end; False (and nothing recorded) when the proposer has nothing left."""
    best = state.best()
    assert best is not None
    best_path = op.path / best.kernel_file
    best_source = best_path.read_text(encoding="utf-8")
    rdir = op.round_dir(k)
    name = op.file("triton").name
    record = RoundRecord(round=k, started_at=now(), backend=proposer.name, change_type="none",
                         kernel_file=f"{ROUNDS_DIR}/round_{k}/{name}", base_round=best.round, diagnosis=diag)
    ctx = RoundContext(op=op, state=state, round=k, best=best, best_source=best_source, diagnosis=diag)
    # Recorded before proposing: an LLM proposer writes its attempts into the round folder, and a
    # kill during the proposal must leave a round that `recover` recognises as partial.
    rdir.mkdir(parents=True, exist_ok=False)
    state.rounds.append(record)
    save_state(op.path, state)
    on_step(f"proposing a candidate ({proposer.name}) from round {best.round}")
    proposals = proposer.propose(ctx)
    if not proposals:
        state.rounds.remove(record)
        save_state(op.path, state)
        if any(rdir.iterdir()):
            move_aside(rdir)
        else:
            rdir.rmdir()
        return False
    proposal = proposals[0]
    candidate = rdir / name
    atomic_write(candidate, proposal.source)
    for fname, text in proposal.files.items():
        atomic_write(rdir / fname, text)
    _apply(record, proposal, best_source, best.kernel_file, op)
    record.attempts += proposal.attempts
    save_state(op.path, state)
    # An LLM proposer has already checked (and repaired) its candidate with the trusted harness;
    # the offline planner's candidate is checked here. Either way there is one repair loop, the LLM's.
    if proposal.checked is not None:
        record.accuracy = proposal.checked
    else:
        on_step(f"gating the candidate ({record.change_type}: {record.change[:60]}) through the accuracy harness")
        record.accuracy = run_accuracy(op, device, kernel=candidate)
    _save_run(rdir / "accuracy.json", record.accuracy)
    if not record.accuracy.passed:
        record.attempts.append(f"{record.change} rejected: {_first_line(record.accuracy.describe())}")
    save_state(op.path, state)

    if record.accuracy.passed:
        on_step(f"timing the candidate against round {best.round} in the same process")
        # The baselines (eager and torch.compile of the reference) do not change between rounds:
        # they are timed once (round 0, or when the best is first measured on this device) and
        # reused; a round times only the candidate against the best, in the same process. On an
        # H200 this cut a round's exclusive device time from ~1 s to ~0.5 s per case x dtype.
        record.performance = run_performance(op, device, kernel=candidate, compare=kernel_source(op, best_path), no_compile=True,
                                             no_eager=True)
        _reuse_baseline_timings(record.performance, best.performance)
        _save_run(rdir / "performance.json", record.performance)
        save_state(op.path, state)
        decision = decide_keep(record.performance.performance)
        if not record.performance.passed and decision.keep:  # a child that failed is never a win
            decision = KeepDecision(keep=False, speedup=decision.speedup, threshold=decision.threshold,
                                    reason=f"the timing run failed: {_first_line(record.performance.describe())}")
    else:
        decision = KeepDecision(keep=False, threshold=1 + MIN_NOISE,
                                reason=f"rejected by the harness: {_first_line(record.accuracy.describe())}")
    record.decision = decision
    if decision.keep:
        on_step(f"keeping round {k}: {decision.reason}")
        promote(op, state, proposal.source)
        record.kept = True
        record.outcome = f"kept: {decision.reason}; promoted to {name} (round {best.round}'s kernel kept in {HISTORY_DIR}/)"
        state.best_round = k
    else:
        on_step(f"round {k} not kept: {decision.reason}")
        record.outcome = (f"rejected: {decision.reason[len('rejected by the harness: '):]}" if not record.accuracy.passed
                          else f"reverted to round {best.round}: {decision.reason}")
    new_best = state.best()
    assert new_best is not None
    after = ctx if not decision.keep else RoundContext(op, state, k, new_best, proposal.source, diag)
    record.lessons = lessons(record, decision, best.round)
    record.next_directions = proposer.next_directions(after)
    record.finished_at = now()
    save_state(op.path, state)
    return True


def lessons(record: RoundRecord, decision: KeepDecision, base_round: int) -> list[str]:
    """What worked, what failed and why — from the numbers of this round."""
    if record.accuracy is None or not record.accuracy.passed:
        why = _first_line(record.accuracy.describe()) if record.accuracy else "not checked"
        return [f"Failed: `{record.change}` produced a kernel the harness rejected ({why}); "
                f"the {record.change_type} change is not safe as written."]
    if decision.keep:
        return [f"Worked: `{record.change}` ({record.change_type}) gave x{decision.speedup:.3f} over round {base_round}, "
                f"beyond the noise threshold x{decision.threshold:.3f}; later rounds build on it."]
    if decision.speedup is None:
        return [f"Inconclusive: `{record.change}` was correct but could not be timed ({decision.reason})."]
    direction = "slower" if decision.speedup < 1 else "no faster beyond the noise"
    return [f"Did not help: `{record.change}` was {direction} (x{decision.speedup:.3f} over round {base_round}, "
            f"threshold x{decision.threshold:.3f}); round {base_round} stays the best, and this setting is not retried."]


# --- the operator loop ----------------------------------------------------------------------------
@dataclass
class OptimizeOutcome:
    op: OperatorDir
    state: OpState
    stopped_because: str
    notes: list[str]


def _after_round(op: OperatorDir, state: OpState) -> None:
    from kernelgen.record.plot import write_plot

    write_log(op.path, state, op.spec)
    write_plot(op.path, state)


def _reuse_baseline_timings(run: RunRecord | None, source: RunRecord | None) -> None:
    """Fill each case's eager and torch.compile timings from the same case x dtype measured
    earlier on this device (the reference is the same code on the same inputs)."""
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
    if known:
        perf.note = (perf.note + " Eager and torch.compile timings reused from the best round's measurement "
                     "(same device, shapes, dtypes); only the candidate and the best were timed in this round.").strip()


def _measure_best_if_needed(op: OperatorDir, state: OpState, device: DeviceInfo, on_step: Step) -> None:
    """The diagnosis needs the best kernel's numbers on this device: measure them when round 0 was
    not timed (`new --no-bench`) or was timed elsewhere (generated on a CPU, optimized on a GPU)."""
    best = state.best()
    perf = best.performance.performance if best and best.performance else None
    if best is None or (perf is not None and perf.device == device.kind):
        return
    on_step(f"{op.name}: measuring round {best.round}'s kernel on {device.kind} before diagnosing it")
    best.performance = run_performance(op, device, kernel=op.path / best.kernel_file)
    _save_run(op.round_dir(best.round) / "performance.json", best.performance)
    save_state(op.path, state)
    write_log(op.path, state, op.spec)


def optimize_operator(op: OperatorDir, device: DeviceInfo, proposer: Proposer, *, rounds: int | None = None,
                      target: float | None = None, on_step: Step = lambda s: None) -> OptimizeOutcome:
    """Run until `rounds` optimization rounds are finished in total (not this many more), the target
    is met, the kernel is at the ceiling, or the proposer has nothing left."""
    rounds = op.spec.max_rounds if rounds is None else rounds
    target = target if target is not None else op.spec.target_speedup
    state = load_state(op.path)
    notes = recover(op, state, on_step)
    if state.best() is None:
        raise GenerationError(f"{op.name}: no correct kernel to start from (round 0 did not pass)",
                              hint=f"fix or regenerate the kernel (`kernelgen test {op.path}` shows why)")
    state.stopped_because = ""
    _measure_best_if_needed(op, state, device, on_step)
    done_before = finished_rounds(state)
    while True:
        best = state.best()
        assert best is not None
        perf = best.performance.performance if best.performance else None
        diag = diagnose(perf, best.round, target)
        why = stop_reason(diag)
        if why:
            break
        done = finished_rounds(state)
        if done >= rounds:
            why = f"{done} optimization round(s) finished (--rounds {rounds})"
            if done == done_before:  # nothing ran: say why, not just that it stopped
                why = (f"{done} round(s) already finished; --rounds is a total, not a count of more rounds, "
                       f"so pass --rounds {done + 3} for three more")
            break
        k = max(r.round for r in state.rounds) + 1
        step = _prefixed(on_step, f"{op.name} round {k} ({done + 1}/{rounds})")
        step("diagnosis: " + " ".join(diag.lines[-2:]))
        if not run_round(op, state, k, proposer, diag, device, step):
            why = f"nothing left to try: {proposer.next_directions(RoundContext(op, state, k, best, (op.path / best.kernel_file).read_text(encoding='utf-8'), diag))}"
            break
        _after_round(op, state)
    state.stopped_because = why
    save_state(op.path, state)
    _after_round(op, state)
    on_step(f"{op.name}: stopped — {why}")
    return OptimizeOutcome(op, state, why, notes)


def _prefixed(on_step: Step, prefix: str) -> Step:
    return lambda msg: on_step(f"{prefix}: {msg}")


# --- choosing operators -------------------------------------------------------------
def reached_target(op: OperatorDir, target: float | None = None) -> bool:
    try:
        state = load_state(op.path)
    except (OSError, ValueError):
        return False
    best = state.best()
    if best is None or best.performance is None or best.performance.performance is None:
        return False
    d = diagnose(best.performance.performance, best.round, target if target is not None else op.spec.target_speedup)
    return d.target_met or at_ceiling(d)


def select_operators(paths: list[Path], *, cwd: Path | None = None, root: Path = Path("generated"),
                     target: float | None = None, on_skip: Step = lambda s: None) -> list[OperatorDir]:
    """The named operators; else the current directory if it is one; else every operator under
    `root` that has not reached its target (folders whose round 0 never finished are skipped, each
    named through `on_skip`, so one of them does not stop the others)."""
    if paths:
        return [open_operator(p) for p in paths]
    cwd = cwd or Path.cwd()
    if is_operator_dir(cwd):
        return [open_operator(cwd)]
    if not root.is_dir():
        raise UsageError(f"no operator folder given, the current directory is not one, and {root}/ does not exist",
                         hint="kernelgen optimize generated/<name>, or run `kernelgen new SPEC.yaml` first")
    ops = []
    for d in operator_dirs_under(root):
        status = operator_status(d)
        if not status.complete:
            on_skip(f"skipping {d}: {status.reason}; {status.hint}")
            continue
        try:
            ops.append(open_operator(d))
        except UsageError as e:  # e.g. an edited spec.yaml that no longer validates
            on_skip(f"skipping {d}: {e.message}")
    return [op for op in ops if not reached_target(op, target)]


