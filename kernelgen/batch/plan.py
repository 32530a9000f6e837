"""Which operators a batch runs: the spec files named or found in the folders named, each checked
before any work starts. A spec that does not validate (or repeats another's name) stays in the
plan with its reason, so it shows in the report; the rest of the batch goes on without it.

Which dtypes each operator is checked in (`--dtypes`): `deciding` keeps only the dtypes that decide
its verdict (a KernelBench problem's float32; a YAML spec's `primary_dtypes`), `all` every dtype the
spec lists (a KernelBench problem's float16 and bfloat16 beside float32, where its reference runs in
them), `auto` (the default) `deciding` for KernelBench problems and `all` for YAML specs: KernelBench
judges float32 only, and each extra dtype repeated every check of every round on the GPU, while a
YAML spec's dtypes are the ones its author asked for. The spec a batch decided on is what `new` gets
(written under `_batch/specs/`): derived once, here, not again in every worker."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kernelgen.errors import ProblemFileError, SpecError, UsageError
from kernelgen.spec.given import PROBLEM_SUFFIX, GivenSpec, is_problem_file, read_spec
from kernelgen.spec.load import validate_spec_data

SPEC_SUFFIXES = (".yaml", ".yml", PROBLEM_SUFFIX)  # a .py file is a KernelBench-format problem
DTYPE_CHOICES = ("auto", "deciding", "all")


@dataclass(frozen=True)
class PlannedOp:
    spec_path: Path  # absolute
    label: str  # the spec as the user named it
    name: str  # the operator's name; for a spec that cannot be read, its file name without suffix
    problem: str = ""  # why it cannot run; empty when it can
    spec: Any = None  # the validated spec (OperatorSpec), derived once here for a KernelBench file
    text: str = ""  # the spec's YAML where it is not the file as given (derived, or narrowed to its deciding dtypes)
    seconds: float = 0.0  # spent reading (deriving) it here

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


def _deciding_only(given: GivenSpec) -> GivenSpec:
    """A YAML spec narrowed to its deciding dtypes (`primary_dtypes`): its tolerances and perf dtypes
    of the others dropped too. Written back as YAML, so its comments are not kept."""
    spec = given.spec
    keep = spec.deciding_dtypes
    if keep == spec.dtypes:
        return given
    data = yaml.safe_load(given.text)
    data["dtypes"] = keep
    for key in ("perf_dtypes", "primary_dtypes"):
        if data.get(key):
            data[key] = [d for d in data[key] if d in keep]
    if isinstance(data.get("tolerance"), dict):
        data["tolerance"] = {d: t for d, t in data["tolerance"].items() if d in keep}
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    return GivenSpec(validate_spec_data(yaml.safe_load(text), run_reference=False), text, given.derived)


def read_planned(path: Path, dtypes: str = "auto") -> tuple[Any, str]:
    """(the spec, its YAML where `new` must get that rather than the file) of one spec file under the
    `--dtypes` choice; SpecError / ProblemFileError when it has none."""
    if dtypes not in DTYPE_CHOICES:
        raise UsageError(f"--dtypes {dtypes}: choose {', '.join(DTYPE_CHOICES)}")
    problem = is_problem_file(path)
    deciding = dtypes == "deciding" or (dtypes == "auto" and problem)
    # `kernelgen new` runs a YAML spec's reference in the worker
    given = read_spec(path, run_reference=False, extra_dtypes=not deciding)
    if deciding and not problem:
        given = _deciding_only(given)
    return given.spec, given.text if given.derived or given.text != path.read_text(encoding="utf-8") else ""


def plan_specs(paths: list[Path], dtypes: str = "auto") -> list[PlannedOp]:
    """One entry per spec file, in the order given (folders sorted by file name)."""
    planned: list[PlannedOp] = []
    first_by_name: dict[str, str] = {}
    for path in find_specs(paths):
        label = str(path)
        t0 = time.monotonic()
        try:
            spec, text = read_planned(path, dtypes)
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
        planned.append(PlannedOp(path.resolve(), label, spec.name, spec=spec, text=text, seconds=time.monotonic() - t0))
    return planned
