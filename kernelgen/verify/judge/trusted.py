"""The files an operator folder holds for the judge — spec.yaml, the baseline, the rendered accuracy
and performance tests, conftest.py — rendered by KernelGen (never by an LLM), and the integrity
record that holds them to those bytes in every later run."""

from __future__ import annotations

from pathlib import Path

from kernelgen.fsutil import atomic_write
from kernelgen.opdir import SPEC_FILE
from kernelgen.render import render
from kernelgen.spec import OperatorSpec
from kernelgen.spec.reference import PRELUDE
from kernelgen.verify.judge import integrity


def render_baseline(spec: OperatorSpec, reference: str | None = None, *, llm_written: bool = False) -> str:
    return render("files/baseline.py.j2", spec=spec, prelude=PRELUDE.strip(), reference=(reference or spec.reference or "").rstrip() + "\n",
                  llm_written=llm_written)


def render_trusted(spec: OperatorSpec) -> dict[str, str]:
    """The test files (file name -> text): rendered by KernelGen, never by an LLM."""
    from kernelgen.verify.judge.accuracy import DEFAULT_SEEDS

    return {
        f"{spec.name}_accuracy.py": render("files/accuracy.py.j2", spec=spec, seeds=len(DEFAULT_SEEDS)),
        f"{spec.name}_performance.py": render("files/performance.py.j2", spec=spec),
        "conftest.py": render("files/conftest.py.j2", spec=spec),
    }


def write_trusted_files(op_dir: Path, spec: OperatorSpec, spec_text: str, baseline: str) -> None:
    """spec.yaml, the baseline and the test files, then the integrity record that holds them (and
    the installed tool) to these bytes in every later run."""
    atomic_write(Path(op_dir) / SPEC_FILE, spec_text)
    atomic_write(Path(op_dir) / f"{spec.name}_baseline.py", baseline)
    for name, text in render_trusted(spec).items():
        atomic_write(Path(op_dir) / name, text)
    integrity.record(Path(op_dir), spec.name)
