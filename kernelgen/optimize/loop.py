"""`kernelgen optimize` for one operator: diagnose the current best, run a round
(kernelgen.optimize.round), write the log and plot, and stop at the target, at the device ceiling,
after --rounds, or when the proposer has nothing left. A folder with no correct kernel yet gets a
repair round first where the proposer can repair (kernelgen.optimize.repair: an LLM's).

One judge (kernelgen.verify.judge.judge) serves every round of an operator: its workers compile a kernel
once and time it in every later round, instead of a fresh process per check. Judges on other GPUs
(`--gpus`, or lent by idle batch workers: kernelgen.optimize.pool) time candidates in searches only.
state.json is saved after every step (kernelgen.optimize.resume makes an interrupted run pick up
where it stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from kernelgen.devices import DeviceInfo
from kernelgen.errors import GenerationError, UsageError
from kernelgen.opdir import OperatorDir, is_operator_dir, open_operator, operator_dirs_under, operator_status
from kernelgen.optimize.decide import at_ceiling, stop_reason
from kernelgen.optimize.diagnose import diagnose
from kernelgen.optimize.pool import JudgePool
from kernelgen.optimize.proposal import Proposer, RoundContext
from kernelgen.optimize.remember import remember
from kernelgen.optimize.repair import can_repair, repair_round
from kernelgen.optimize.resume import finished_rounds, recover
from kernelgen.optimize.round import run_round
from kernelgen.record.oplog import write_log
from kernelgen.record.state import OpState, load_state, save_state
from kernelgen.verify.judge.judge import RESIDENT_BYTES, Judge, KernelSource
from kernelgen.verify.judge.runner import open_judge, run_performance, save_record

Step = Callable[[str], None]


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


def _measure_best_if_needed(op: OperatorDir, state: OpState, device: DeviceInfo, judge: Judge, on_step: Step) -> None:
    """The diagnosis needs the best kernel's numbers on this device: measure them when round 0 was
    not timed (`new --no-bench`), or its measurement's basis differs from now (another device or GPU
    model, another KernelGen, PyTorch or Triton, precision policy or perf cases:
    kernelgen.verify.judge.measurebasis). One `new` took seconds earlier in the same batch is used as
    it is: timing it again cost 25-28 s per KernelBench problem on an H100."""
    from kernelgen.verify.judge.measurebasis import changes, device_name

    best = state.best()
    if best is None:
        return
    perf = best.performance.performance if best.performance else None
    why = (changes(perf, op.spec, kind=device.kind, interpreter=device.interpreter, name=device_name(device)) if perf is not None
           else ["it was not timed (`kernelgen new --no-bench`)"])
    if not why:
        on_step(f"{op.name}: round {best.round}'s measurement is used as it is (taken on this {perf.device_name} with this "
                f"KernelGen, precision policy and perf cases)")
        return
    on_step(f"{op.name}: measuring round {best.round}'s kernel on {device.kind} before diagnosing it: {'; '.join(why)}")
    # The diagnosis reads the fraction of the ceiling and the speedup over eager: torch.compile and the
    # peer libraries (seconds of compilation per case x dtype) wait for `kernelgen bench`.
    # Loaded as the rounds load it (generated offline: the shared worker), so the rounds reuse its compiles.
    source = KernelSource((op.path / best.kernel_file).read_text(encoding="utf-8"), op.file("triton").name,
                          "offline" if best.backend == "offline" else "llm")
    best.performance = run_performance(op, device, source=source, judge=judge, no_compile=True, no_peers=True)
    save_record(op.round_dir(best.round) / "performance.json", best.performance)
    save_state(op.path, state)
    write_log(op.path, state, op.spec)


def optimize_operator(op: OperatorDir, device: DeviceInfo, proposer: Proposer, *, rounds: int | None = None,
                      target: float | None = None, on_step: Step = lambda s: None,
                      search_devices: Sequence[DeviceInfo] = ()) -> OptimizeOutcome:
    """Run until `rounds` optimization rounds are finished in total (not this many more), the target
    is met, the kernel is at the ceiling, or the proposer has nothing left. `search_devices`: other
    GPUs whose judges time candidates in the rounds' searches."""
    rounds = op.spec.max_rounds if rounds is None else rounds
    target = target if target is not None else op.spec.target_speedup
    state = load_state(op.path)
    notes = recover(op, state, on_step)
    if state.best() is None and not can_repair(proposer):
        raise GenerationError(f"{op.name}: no correct kernel to start from (round 0 did not pass)",
                              hint=f"with an LLM (--backend openai) optimize repairs it first; or fix or regenerate "
                                   f"the kernel (`kernelgen test {op.path}` shows why)")
    state.stopped_because = ""
    home = open_judge(op, device)
    home.resident_bytes = RESIDENT_BYTES  # every round times the same perf cases again
    home.keep_spare = True  # an LLM's candidates each get a worker of their own: the next one is started early
    judges = JudgePool(home, search_devices, on_step=_prefixed(on_step, op.name))
    try:
        if state.best() is None and not repair_round(op, state, proposer, device, home, _prefixed(on_step, op.name)):
            why = "no correct kernel yet: the repair round's is not correct either; `kernelgen optimize` again repairs it"
        else:
            why = _rounds(op, state, device, proposer, judges, rounds, target, on_step)
    finally:
        judges.close()
    state.stopped_because = why
    save_state(op.path, state)
    _after_round(op, state)
    on_step(f"{op.name}: stopped — {why}")
    return OptimizeOutcome(op, state, why, notes)


def _rounds(op: OperatorDir, state: OpState, device: DeviceInfo, proposer: Proposer, judges: JudgePool, rounds: int,
            target: float, on_step: Step) -> str:
    """Rounds until a stop condition; returns why it stopped."""
    judge = judges.home
    _measure_best_if_needed(op, state, device, judge, on_step)
    done_before = finished_rounds(state)
    while True:
        best = state.best()
        assert best is not None
        perf = best.performance.performance if best.performance else None
        diag = diagnose(perf, best.round, target)
        why = stop_reason(diag)
        if why:
            return why
        done = finished_rounds(state)
        if done >= rounds:
            if done == done_before:  # nothing ran: say why, not just that it stopped
                return (f"{done} round(s) already finished; --rounds is a total, not a count of more rounds, "
                        f"so pass --rounds {done + 3} for three more")
            return f"{done} optimization round(s) finished (--rounds {rounds})"
        k = max(r.round for r in state.rounds) + 1
        step = _prefixed(on_step, f"{op.name} round {k} ({done + 1}/{rounds})")
        step("diagnosis: " + " ".join(diag.lines[-2:]))
        if not run_round(op, state, k, proposer, diag, device, judge, step, spare_judges=judges.spares):
            source = (op.path / best.kernel_file).read_text(encoding="utf-8")
            return f"nothing left to try: {proposer.next_directions(RoundContext(op, state, k, best, source, diag, judge))}"
        remember(op.spec, state.rounds[-1], device, step)  # judged rounds only: the interpreter's teach nothing
        _after_round(op, state)


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


