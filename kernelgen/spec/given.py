"""A spec from the file a user gives: an operator spec in YAML, read as written, or a KernelBench-format
problem (`.py`), derived into one (kernelgen.spec.kernelbench). Either way the text is what the
operator folder keeps as its `spec.yaml`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelgen.spec.load import load_spec
from kernelgen.spec.model import OperatorSpec

PROBLEM_SUFFIX = ".py"


@dataclass(frozen=True)
class GivenSpec:
    spec: OperatorSpec
    text: str  # spec.yaml's text: the file as written, or the derived YAML
    derived: bool  # True: derived from a problem file


def is_problem_file(path: str | Path) -> bool:
    return Path(path).suffix == PROBLEM_SUFFIX


def read_spec(path: str | Path, *, run_reference: bool = True, extra_dtypes: bool = True) -> GivenSpec:
    """The spec of a YAML file or a KernelBench-format problem file; SpecError / ProblemFileError if none.
    `extra_dtypes` False: a problem file's spec checks float32 only (kernelgen.spec.kernelbench.derive)."""
    p = Path(path)
    if is_problem_file(p):
        from kernelgen.spec.kernelbench import derive_spec

        derived = derive_spec(p, extra_dtypes=extra_dtypes)
        return GivenSpec(derived.spec, derived.text, True)
    spec = load_spec(p, run_reference=run_reference)
    return GivenSpec(spec, p.read_text(encoding="utf-8"), False)
