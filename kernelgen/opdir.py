"""An operator directory (`generated/<name>/`): finding one, and where its files are. The files
KernelGen renders into it for the judge live in kernelgen.verify.judge.trusted."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kernelgen.errors import OperatorDirError, SpecError
from kernelgen.spec import OperatorSpec, load_spec

SPEC_FILE = "spec.yaml"
ROUNDS_DIR = "rounds"
STATE_FILE = "state.json"  # the typed record of the rounds: kernelgen.record.state


@dataclass(frozen=True)
class OperatorDir:
    path: Path
    spec: OperatorSpec

    @property
    def name(self) -> str:
        return self.spec.name

    def file(self, kind: str) -> Path:
        """kind: triton | baseline | accuracy | performance."""
        return self.path / f"{self.name}_{kind}.py"

    def round_dir(self, k: int) -> Path:
        return self.path / ROUNDS_DIR / f"round_{k}"


def is_operator_dir(path: Path) -> bool:
    return (Path(path) / SPEC_FILE).is_file()


def operator_dirs_under(root: Path) -> list[Path]:
    """The live operator folders directly under `root`: not the copies `new --force` moved aside
    (`<name>.previous-<time>`) nor a staging folder of an interrupted `new` (`.<name>.staging-*`)."""
    return [
        d for d in sorted(Path(root).iterdir())
        if d.is_dir() and is_operator_dir(d) and ".previous-" not in d.name and not d.name.startswith(".")
    ]


@dataclass(frozen=True)
class OperatorStatus:
    """Whether a folder holds a tested operator: round 0 (`kernelgen new`) finished, so its kernel
    was checked (correct or not). `optimize` skips an incomplete folder and `report` marks it,
    instead of stopping at it or calling an untested kernel incorrect."""

    path: Path
    complete: bool
    reason: str = ""  # why not complete, in words a table cell can hold
    hint: str = ""  # how to fix it

    @property
    def label(self) -> str:
        return "complete" if self.complete else f"incomplete: {self.reason}"


def operator_status(path: str | Path) -> OperatorStatus:
    """Read from state.json's own words (round 0's `finished_at`) without the typed record, which
    lives a layer above (kernelgen.record.state); a state.json that does not parse is unreadable."""
    p = Path(path)
    redo = f"run `kernelgen new {p / SPEC_FILE} --out {p.parent}` again (the folder is moved aside, not deleted)"
    if not (p / STATE_FILE).is_file():
        return OperatorStatus(p, False, f"not tested: no {STATE_FILE} (`kernelgen new` never finished here)", redo)
    try:
        data = json.loads((p / STATE_FILE).read_text(encoding="utf-8"))
        rounds = data["rounds"]
        r0 = next((r for r in rounds if r["round"] == 0), None)
    except (OSError, ValueError, KeyError, TypeError):
        return OperatorStatus(p, False, f"unreadable {STATE_FILE}", redo)
    if r0 is None or not r0.get("finished_at"):
        return OperatorStatus(p, False, "not tested: round 0 never finished (`kernelgen new` was interrupted)", redo)
    return OperatorStatus(p, True)


def open_operator(path: str | Path) -> OperatorDir:
    p = Path(path)
    if not p.is_dir():
        raise OperatorDirError(f"{p}: no such directory", hint="give the folder `kernelgen new` wrote, e.g. generated/broadcast")
    if not is_operator_dir(p):
        raise OperatorDirError(f"{p}: not an operator directory (no {SPEC_FILE})",
                               hint="create one with `kernelgen new SPEC.yaml`")
    try:
        spec = load_spec(p / SPEC_FILE, run_reference=False)
    except SpecError as e:
        raise OperatorDirError(f"{p}: its {SPEC_FILE} is no longer valid:\n{e.message}") from None
    return OperatorDir(p, spec)
