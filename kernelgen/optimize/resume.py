"""Nothing lost and everything resumes: a round interrupted half-way (Ctrl-C, SIGKILL) is moved aside
and redone by the same command; finished rounds, round 0 included, are never redone; a kept kernel is
promoted atomically, the one it replaces copied into best_history/ first."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Callable

from kernelgen.errors import UsageError
from kernelgen.fsutil import atomic_write, move_aside
from kernelgen.opdir import ROUNDS_DIR, OperatorDir
from kernelgen.record.oplog import unjudged_rounds
from kernelgen.record.state import OpState, RoundRecord, save_state

Step = Callable[[str], None]
HISTORY_DIR = "best_history"
_ROUND_DIR = re.compile(r"^round_(\d+)$")


def finished_rounds(state: OpState) -> int:
    return sum(1 for r in state.rounds if r.round >= 1 and r.finished_at is not None)


def start_round(state: OpState, *, judged: bool) -> RoundRecord | None:
    """The round the next one starts from: the best; where rounds cannot be timed (`judged` False), the
    newest correct unjudged round after it, so rounds build on each other instead of each starting
    again from round 0. Where they can be, the best: a candidate is timed against what it replaces,
    and an untimed base may be slower than the shipped kernel."""
    best = state.best()
    later = unjudged_rounds(state) if not judged else []
    return later[-1] if later else best


def recover(op: OperatorDir, state: OpState, on_step: Step = lambda s: None) -> list[str]:
    """Make the directory agree with the last finished round: a partial round's record is dropped and
    its folder moved aside (kept, not deleted), and `<name>_triton.py` is the best round's kernel."""
    notes: list[str] = []
    r0 = next((r for r in state.rounds if r.round == 0), None)
    if r0 is None or r0.finished_at is None:
        raise UsageError(f"{op.path}: round 0 (`kernelgen new`) never finished",
                         hint=f"run `kernelgen new {op.path / 'spec.yaml'} --force` (the old folder is moved aside)")
    for r in [r for r in state.rounds if r.finished_at is None]:
        state.rounds.remove(r)
        notes.append(f"round {r.round} was interrupted; it is redone")
    recorded = {r.round for r in state.rounds}
    rounds_dir = op.path / ROUNDS_DIR
    for d in sorted(rounds_dir.iterdir()) if rounds_dir.is_dir() else []:
        m = _ROUND_DIR.match(d.name)
        if d.is_dir() and m and int(m.group(1)) not in recorded:
            moved = move_aside(d)
            notes.append(f"partial {d.relative_to(op.path)} kept as {moved.relative_to(op.path)}")
    if state.best_round is not None and state.best() is None:
        kept = [r for r in state.rounds if r.kept]
        state.best_round = kept[-1].round if kept else None
    best = state.best()
    if best is not None:
        source = (op.path / best.kernel_file).read_text(encoding="utf-8")
        current = op.file("triton")
        if not current.is_file() or current.read_text(encoding="utf-8") != source:
            kept_copy = keep_previous(op, current, "unpromoted")
            atomic_write(current, source)
            notes.append(f"{current.name} restored to round {best.round}'s kernel"
                         + (f" (the file found there is kept as {kept_copy.relative_to(op.path)})" if kept_copy else ""))
    save_state(op.path, state)
    for n in notes:
        on_step(f"{op.name}: {n}")
    return notes


def keep_previous(op: OperatorDir, path: Path, tag: str) -> Path | None:
    """Copy the file about to be replaced into best_history/ under a name that says what it was."""
    if not path.is_file():
        return None
    dest = op.path / HISTORY_DIR
    dest.mkdir(exist_ok=True)
    target = dest / f"{tag}_{path.name}"
    n = 1
    while target.exists():
        if target.read_bytes() == path.read_bytes():
            return target
        target = dest / f"{tag}.{n}_{path.name}"
        n += 1
    shutil.copy2(path, target)
    return target


def promote(op: OperatorDir, state: OpState, source: str) -> None:
    """Make `source` the operator's kernel; the current best's file goes to best_history/ first."""
    keep_previous(op, op.file("triton"), f"round_{state.best_round}")
    atomic_write(op.file("triton"), source)
