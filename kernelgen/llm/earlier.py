"""Failures that resume: a round 0 that ended without a correct kernel is where the next LLM run starts,
not a blank page.

`kernelgen new` again on such a folder (with or without --force), and `kernelgen optimize` on it, send
the model the kernel that run kept (its closest attempt), the judge's full verdict on exactly those
bytes, and one line per earlier reply, as a repair request; the repair loop (kernelgen.llm.repair)
goes on from there, its attempts numbered after the earlier ones. Before, `new --force` sent a prompt
byte-identical to the first, and `optimize` refused the folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kernelgen.llm.client import Messages
from kernelgen.llm.prompts import repair_messages
from kernelgen.llm.repair import verdict
from kernelgen.record.state import RoundRecord, load_state
from kernelgen.spec import OperatorSpec
from kernelgen.verify.results import RunRecord

_ATTEMPT_RE = re.compile(r"\battempt (\d+)\b")
_FILE_RE = re.compile(r"^attempt_(\d+)_")


@dataclass(frozen=True)
class EarlierAttempts:
    """The round 0 an LLM run continues from."""

    folder: Path  # the operator folder it was found in
    source: str  # the kernel that run kept: its closest attempt
    run: RunRecord  # the judge's verdict on exactly those bytes
    attempts: list[str]  # one line per earlier reply (of that run and of any it continued)
    kept: int  # the attempt number the kept kernel came from (0: unknown)
    next_number: int  # the first attempt number of the run that continues

    def messages(self, spec: OperatorSpec) -> Messages:
        """The first request of the run that continues: a repair of the kept kernel, with its verdict
        and every earlier attempt's line."""
        kind, _ = verdict(self.run)
        return repair_messages(spec, self.source, self.run, verdict=kind, attempt=self.kept or None, earlier=self.attempts)

    def lines(self) -> list[str]:
        """The earlier attempts as the continuing round's record lists them, before its own."""
        return [a if a.startswith("earlier run: ") else f"earlier run: {a}" for a in self.attempts]


def _numbers(r0: RoundRecord, folder: Path) -> tuple[int, int]:
    """(the attempt the kept kernel came from, the highest attempt number used so far)."""
    kernel = folder / r0.kernel_file
    used, kept = [0], 0
    for line in r0.attempts:
        used += [int(n) for n in _ATTEMPT_RE.findall(line)]
    round0 = kernel.parent
    for path in sorted(round0.glob("attempt_*.py")) if round0.is_dir() else []:
        found = _FILE_RE.match(path.name)
        if found:
            used.append(int(found.group(1)))
            if kernel.is_file() and path.read_bytes() == kernel.read_bytes():
                kept = int(found.group(1))
    return kept, max(used)


def failed_round0(folder: Path) -> EarlierAttempts | None:
    """What an operator folder's round 0 left when it finished without a correct kernel; None for a
    folder with a correct kernel, a half-made one, or one whose record cannot be read."""
    try:
        state = load_state(folder)
    except (OSError, ValueError):
        return None
    r0 = next((r for r in state.rounds if r.round == 0), None)
    if state.best_round is not None or r0 is None or r0.finished_at is None or r0.accuracy is None or r0.accuracy.passed:
        return None
    return from_round(folder, r0)


def from_round(folder: Path, r0: RoundRecord) -> EarlierAttempts | None:
    """A failed round's kernel, verdict and attempt lines (None without a kernel file or a verdict)."""
    kernel = Path(folder) / r0.kernel_file
    if r0.accuracy is None or not kernel.is_file():
        return None
    kept, used = _numbers(r0, Path(folder))
    return EarlierAttempts(folder=Path(folder), source=kernel.read_text(encoding="utf-8"), run=r0.accuracy,
                           attempts=list(r0.attempts), kept=kept, next_number=used + 1)
