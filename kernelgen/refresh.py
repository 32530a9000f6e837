"""`kernelgen refresh OP_DIR`: the folder's `spec.yaml` was edited (shapes, dtypes, tolerances, perf
cases); render the trusted tests from it again, re-verify the best kernel against them, and record
the refresh — keeping every round and its history.

Nothing is lost: the files it replaces (an edited `_accuracy.py` included) are kept under
`refreshes/refresh_<n>/`, the spec the tests were rendered from before is kept there too, and the
best round's timings on the old perf cases move into the refresh's record when the perf cases change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from kernelgen.devices import resolve_device
from kernelgen.errors import InterruptedRunError, OperatorDirError, SpecError, UsageError
from kernelgen.fsutil import atomic_write, now
from kernelgen.opdir import SPEC_FILE, OperatorDir, is_operator_dir, operator_status
from kernelgen.verify.judge.trusted import render_baseline, render_trusted
from kernelgen.verify.judge import integrity
from kernelgen.record.analysis import analyse_operator, latest_peaks
from kernelgen.record.oplog import write_log
from kernelgen.record.state import OpState, RefreshRecord, load_state, save_state
from kernelgen.spec import OperatorSpec, load_spec, validate_spec_data
from kernelgen.verify.judge.runner import run_accuracy, run_performance

Step = Callable[[str], None]
REFRESH_DIR = "refreshes"


@dataclass
class RefreshResult:
    op: OperatorDir
    state: OpState
    record: RefreshRecord | None  # None: nothing had changed, nothing was run

    @property
    def passed(self) -> bool:
        return self.record is None or self.record.passed


# --- what changed -----------------------------------------------------------------------------------
def _case(case: dict[str, list[int]]) -> str:
    return " ".join(f"{k}{v}" for k, v in case.items())


def _added_removed(what: str, old: list, new: list, label: Callable = str) -> list[str]:
    added = [label(x) for x in new if x not in old]
    removed = [label(x) for x in old if x not in new]
    lines = []
    if added:
        lines.append(f"{what} added: " + ", ".join(f"`{a}`" for a in added))
    if removed:
        lines.append(f"{what} removed: " + ", ".join(f"`{r}`" for r in removed))
    return lines


def spec_changes(old: OperatorSpec | None, new: OperatorSpec) -> list[str]:
    """What an edit of spec.yaml changed, in words; [] when nothing that matters did."""
    if old is None:
        return ["the spec the tests were rendered from was not recorded (a folder from before `kernelgen refresh`): "
                "every test re-rendered from spec.yaml"]
    lines = _added_removed("test cases", old.test_cases, new.test_cases, _case)
    lines += _added_removed("perf cases", old.effective_perf_cases, new.effective_perf_cases, _case)
    lines += _added_removed("dtypes", old.dtypes, new.dtypes)
    lines += _added_removed("timed dtypes", old.effective_perf_dtypes, new.effective_perf_dtypes)
    for d in sorted(set(old.dtypes) | set(new.dtypes)):
        a, b = old.tolerance_for(d), new.tolerance_for(d)
        if a != b:
            lines.append(f"tolerance {d}: atol {a.atol:g} -> {b.atol:g}, rtol {a.rtol:g} -> {b.rtol:g}")
    if old.reference != new.reference:
        lines.append("reference changed: the baseline is rendered from the new one")
    for field in ("inputs", "params", "outputs"):
        if getattr(old, field) != getattr(new, field):
            lines.append(f"{field} changed: the kernel's signature must follow ({old.signature} -> {new.signature})")
    for field in ("flops", "description", "category", "target_speedup", "max_rounds", "hints"):
        if getattr(old, field) != getattr(new, field):
            lines.append(f"{field}: {getattr(old, field)!r} -> {getattr(new, field)!r}")
    return lines


def _timing_inputs(spec: OperatorSpec) -> tuple:
    """What a timing depends on: a change here makes the best round's timings stale. (The interpreter
    times test_cases[0] in the first timed dtype, so those count too.)"""
    return (spec.effective_perf_cases, spec.effective_perf_dtypes, spec.test_cases[:1], spec.reference,
            spec.inputs, spec.params, spec.flops)


def _rendered_spec(state: OpState) -> OperatorSpec | None:
    if not state.rendered_spec:
        return None
    try:
        return validate_spec_data(yaml.safe_load(state.rendered_spec), "<the spec the tests were rendered from>",
                                  run_reference=False)
    except (SpecError, yaml.YAMLError):
        return None


# --- the refresh ------------------------------------------------------------------------------------
def _open(op_dir: Path) -> tuple[OperatorSpec, OpState, str]:
    if not op_dir.is_dir():
        raise OperatorDirError(f"{op_dir}: no such directory", hint="give the folder `kernelgen new` wrote, e.g. generated/broadcast")
    if not is_operator_dir(op_dir):
        raise OperatorDirError(f"{op_dir}: not an operator directory (no {SPEC_FILE})", hint="create one with `kernelgen new SPEC.yaml`")
    status = operator_status(op_dir)
    if not status.complete:
        raise UsageError(f"{op_dir}: {status.reason}; there is no tested kernel to refresh", hint=status.hint)
    spec = load_spec(op_dir / SPEC_FILE)  # the edited spec, fully checked: a SpecError names file, field and line
    state = load_state(op_dir)
    if spec.name != state.name:
        raise UsageError(f"{op_dir / SPEC_FILE}: name: {state.name!r} -> {spec.name!r} renames the operator, whose files "
                         "are named after it", hint=f"put the name back to {state.name!r}, or start a new operator with `kernelgen new`")
    return spec, state, (op_dir / SPEC_FILE).read_text(encoding="utf-8")


def _files(op: OperatorDir) -> dict[Path, str]:
    """Every trusted file as KernelGen renders it from the folder's spec now."""
    spec = op.spec
    files = {op.path / name: text for name, text in render_trusted(spec).items()}
    if spec.reference is not None:
        files[op.file("baseline")] = render_baseline(spec)
    # else: the LLM wrote the baseline (the spec has no reference) and it stays as it is
    return files


def _keep(op: OperatorDir, n: int, replaced: dict[Path, str], old_spec_text: str) -> str:
    """Copy what is about to be replaced into refreshes/refresh_<n>/; returns that folder (relative)."""
    rel = f"{REFRESH_DIR}/refresh_{n}"
    dest = op.path / rel
    for path in replaced:
        if path.is_file():
            atomic_write(dest / path.name, path.read_bytes())
    if old_spec_text:
        atomic_write(dest / "spec.before.yaml", old_spec_text)
    return rel if dest.is_dir() else ""


def refresh_operator(op_dir: str | Path, *, device: str = "auto", measure: bool = True,
                     on_step: Step = lambda s: None) -> RefreshResult:
    op_dir = Path(op_dir)
    spec, state, spec_text = _open(op_dir)
    op = OperatorDir(op_dir, spec)
    old = _rendered_spec(state)
    changes = spec_changes(old, spec)
    stale = {p: text for p, text in _files(op).items()
             if not p.is_file() or p.read_text(encoding="utf-8") != text}
    drift = integrity.check(op.path, spec.name) if not changes and not stale else []
    if not changes and not stale and not drift:
        return RefreshResult(op, state, None)
    dev = resolve_device(device)
    if not changes and stale:
        changes = ["spec.yaml unchanged; re-rendered " + ", ".join(p.name for p in stale) + " (edited by hand)"]
    elif not changes:
        changes = ["the files that decide verdicts are unchanged, but " + drift[0].split(": ", 1)[-1].split(". If")[0]
                   + "; the best kernel is verified again with this KernelGen"]
    n = len(state.refreshes) + 1
    candidate = state.best_round
    if candidate is None:  # the best failed an earlier refresh, or round 0 never passed: retry that kernel
        candidate = state.refreshes[-1].round if state.refreshes and state.refreshes[-1].round is not None else 0
    round_rec = next(r for r in state.rounds if r.round == candidate)
    finished = [r.round for r in state.rounds if r.finished_at is not None]
    record = RefreshRecord(index=n, at=now(), after_round=max(finished), changes=changes, round=candidate,
                           kernel_file=round_rec.kernel_file)
    record.kept_dir = _keep(op, n, stale, state.rendered_spec)
    for path, text in stale.items():
        atomic_write(path, text)
    integrity.record(op.path, spec.name)  # these files, and this KernelGen, decide from now on
    on_step(f"{spec.name}: re-rendered the tests from the edited spec.yaml ({len(changes)} change(s))")
    try:
        on_step(f"{spec.name}: re-verifying round {candidate}'s kernel against the edited spec on {dev.kind}")
        kernel = op.path / round_rec.kernel_file
        record.accuracy = run_accuracy(op, dev, kernel=kernel)
        record.passed = record.accuracy.passed
        if old is None or _timing_inputs(old) != _timing_inputs(spec):
            # the round's timings were taken on other inputs: they move here, and the round gets new
            # ones (or none, and `optimize` measures it before its first diagnosis)
            record.superseded_performance, round_rec.performance = round_rec.performance, None
            if record.passed and measure:
                on_step(f"{spec.name}: timing round {candidate}'s kernel on the edited perf cases")
                record.performance = round_rec.performance = run_performance(op, dev, kernel=kernel)
    except KeyboardInterrupt:
        raise InterruptedRunError(
            f"interrupted: {op_dir}'s tests are re-rendered from the edited spec.yaml but round {candidate}'s kernel "
            "was not re-verified, and nothing was recorded", hint="run the same command again: it re-verifies") from None
    _record(op, state, record, spec_text, candidate)
    return RefreshResult(op, state, record)


def _record(op: OperatorDir, state: OpState, record: RefreshRecord, spec_text: str, candidate: int) -> None:
    spec = op.spec
    if record.passed:
        record.outcome = f"round {candidate}'s kernel passes the edited spec; it stays the best"
        state.best_round = candidate
    else:
        record.outcome = (f"round {candidate}'s kernel fails the edited spec: no correct kernel now. Put spec.yaml back and "
                          "run `kernelgen refresh` again, or regenerate with `kernelgen new SPEC --force`")
        state.best_round = None
    if state.baseline_by_llm and spec.reference is not None:
        state.baseline_by_llm = False  # the spec has a reference now: the baseline was rendered from it
    state.rendered_spec = spec_text
    state.stopped_because = ""  # why the last run stopped need not hold for the edited spec
    runs = [r.performance for r in state.rounds] + [f.performance for f in state.refreshes] + [record.performance]
    baseline = op.file("baseline")
    source = baseline.read_text(encoding="utf-8") if state.baseline_by_llm and baseline.is_file() else None
    state.analysis = analyse_operator(spec, latest_peaks(runs), reference=source)
    state.refreshes.append(record)
    for kind, run in (("accuracy", record.accuracy), ("performance", record.performance)):
        if run is not None:
            atomic_write(op.path / REFRESH_DIR / f"refresh_{record.index}" / f"{kind}.json", run.model_dump_json(indent=2))
    save_state(op.path, state)
    write_log(op.path, state, spec)
