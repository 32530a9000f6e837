"""What decides an operator's result in a batch, so that running the same command again redoes an
operator only when one of these changed, and says which:

- the spec, compared as data (the validated spec's fields), never as text: a KernelBench problem's
  `.py` file and the `spec.yaml` derived from it never match as text, and a rerun redid 55 of 64
  finished problems for that (issue 39); comments, key order and quoting in a YAML spec change
  nothing either;
- the tool: KernelGen's version and the hash of every file of the installed package and templates
  (the hash the KernelGen service is keyed on);
- the device: its kind, and the GPU model where `nvidia-smi` names it (a result taken on an A100 is
  not an H100's);
- the options that reach the steps: the backend and the LLM flags. `--rounds` is compared apart: a
  finished operator with more rounds than asked counts (kernelgen.batch.resume).

An operator folder keeps its basis in `batch_basis.json`, written when the batch first works on it.
A folder without one (made by `kernelgen new` itself, or by a KernelGen before this file existed) is
trusted on its spec alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelgen.fsutil import atomic_write

BASIS_FILE = "batch_basis.json"


class JobBasis(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str  # "kernelgen 0.1.0, files 1a2b3c4d5e6f"
    device: str  # "cuda: NVIDIA H100 80GB HBM3", or only the kind ("cuda", "cpu") where no model is known
    backend: str
    options: list[str] = []  # the LLM flags, as `new` and `optimize` take them


def tool_identity() -> str:
    import kernelgen
    from kernelgen.verify.judge.service.place import tool_digest

    return f"kernelgen {kernelgen.__version__}, files {tool_digest()[:12]}"


def spec_data(spec: Any) -> dict[str, Any]:
    """The spec as data: what two specs are compared by."""
    return spec.model_dump(mode="json")


def spec_changes(before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The fields of the spec that differ, in the spec's order."""
    return [k for k in dict.fromkeys([*now, *before]) if before.get(k) != now.get(k)]


def folder_spec(op_dir: Path) -> dict[str, Any] | None:
    """The operator folder's own spec.yaml as data; None when it does not read as a spec."""
    from kernelgen.errors import KernelGenError
    from kernelgen.opdir import SPEC_FILE
    from kernelgen.spec.load import load_spec

    try:
        return spec_data(load_spec(Path(op_dir) / SPEC_FILE, run_reference=False))
    except (KernelGenError, OSError, ValueError):
        return None


def same_device(before: str, now: str) -> bool:
    """The same device, or the same kind where one side knows no model (a Ray cluster's task, a host
    without nvidia-smi)."""
    kind = lambda d: d.split(":", 1)[0].strip()  # noqa: E731
    return before == now or (kind(before) == kind(now) and (":" not in before or ":" not in now))


def basis_changes(before: JobBasis, now: JobBasis) -> list[str]:
    """What differs, in words; [] when nothing that decides the result did."""
    out = []
    if before.tool != now.tool:
        out.append(f"KernelGen changed ({before.tool} -> {now.tool})")
    if not same_device(before.device, now.device):
        out.append(f"the device changed ({before.device} -> {now.device})")
    if before.backend != now.backend:
        out.append(f"the backend changed ({before.backend} -> {now.backend})")
    if before.options != now.options:
        out.append(f"the LLM options changed ({' '.join(before.options) or 'none'} -> {' '.join(now.options) or 'none'})")
    return out


def load_basis(op_dir: Path) -> JobBasis | None:
    try:
        return JobBasis.model_validate_json((Path(op_dir) / BASIS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def save_basis(op_dir: Path, basis: JobBasis) -> None:
    atomic_write(Path(op_dir) / BASIS_FILE, json.dumps(basis.model_dump(mode="json"), indent=2))
