"""Which operators a batch runs: the spec files named or found in the folders named, each checked
before any work starts. A spec that does not validate (or repeats another's name) stays in the
plan with its reason, so it shows in the report; the rest of the batch goes on without it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kernelgen.errors import ProblemFileError, SpecError, UsageError
from kernelgen.spec.given import PROBLEM_SUFFIX, is_problem_file, read_spec

SPEC_SUFFIXES = (".yaml", ".yml", PROBLEM_SUFFIX)  # a .py file is a KernelBench-format problem


@dataclass(frozen=True)
class PlannedOp:
    spec_path: Path  # absolute
    label: str  # the spec as the user named it
    name: str  # the operator's name; for a spec that cannot be read, its file name without suffix
    problem: str = ""  # why it cannot run; empty when it can
    spec: Any = None  # the validated spec (OperatorSpec), derived once here for a KernelBench file

    @property
    def valid(self) -> bool:
        return not self.problem


def find_specs(paths: list[Path]) -> list[Path]:
    """The spec files: every file named, and every *.yaml / *.yml / *.py directly inside a folder named."""
    if not paths:
        raise UsageError("no spec given", hint="kernelgen batch operator_specs/ (a folder of specs) or SPEC.yaml ...")
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            inside = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in SPEC_SUFFIXES)
            if not inside:
                raise UsageError(f"{p}: no *.yaml spec or *.py KernelBench problem in this folder")
            found += inside
        elif p.is_file():
            found.append(p)
        else:
            raise UsageError(f"{p}: no such file or folder")
    unique: list[Path] = []
    for f in found:
        if f.resolve() not in {u.resolve() for u in unique}:
            unique.append(f)
    return unique


def _name_of_unreadable(path: Path) -> str:
    if is_problem_file(path):
        from kernelgen.spec.kernelbench import problem_name

        return problem_name(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        name = data.get("name") if isinstance(data, dict) else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        name = None
    return name if isinstance(name, str) and name else path.stem


def _one_line(message: str) -> str:
    """A multi-line spec error as one table cell: the problems joined by `;`."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    return "; ".join(lines[1:] if len(lines) > 1 else lines)


def plan_specs(paths: list[Path]) -> list[PlannedOp]:
    """One entry per spec file, in the order given (folders sorted by file name)."""
    planned: list[PlannedOp] = []
    first_by_name: dict[str, str] = {}
    for path in find_specs(paths):
        label = str(path)
        try:
            spec = read_spec(path, run_reference=False).spec  # `kernelgen new` runs a YAML spec's reference in the worker
        except ProblemFileError as e:
            planned.append(PlannedOp(path.resolve(), label, _name_of_unreadable(path), e.why))
            continue
        except SpecError as e:
            planned.append(PlannedOp(path.resolve(), label, _name_of_unreadable(path), _one_line(e.message)))
            continue
        if spec.name in first_by_name:
            planned.append(PlannedOp(path.resolve(), label, spec.name,
                                     f"duplicate operator name {spec.name!r}: {first_by_name[spec.name]} has it too"))
            continue
        first_by_name[spec.name] = label
        planned.append(PlannedOp(path.resolve(), label, spec.name, spec=spec))
    return planned
