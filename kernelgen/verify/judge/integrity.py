"""Integrity across runs: what decided the last verdict is what decides the next one.

At `kernelgen new` (and `kernelgen refresh`), `integrity.json` records the sha256 of the operator's
spec, baseline and rendered test scripts, and of every file of the installed tool (its Python and
its templates). Before every run they are checked: a change is reported by name, with what to do,
and nothing runs. During a run the operator folder is snapshotted before and after each judged
call; anything that appeared, vanished or changed meanwhile is a violation (`folder-changed`) —
where the worker's sandbox holds, nothing can, and this is the net where it does not.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelgen.errors import UsageError
from kernelgen.fsutil import atomic_write, now

MANIFEST_FILE = "integrity.json"
SPEC_FILE = "spec.yaml"


class IntegrityError(UsageError):
    """Something that decides verdicts changed since it was recorded."""


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    recorded_at: str
    files: dict[str, str]  # operator file -> sha256
    tool: dict[str, str]  # kernelgen's own files (relative to the package) -> sha256


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=1)
def tool_files() -> dict[str, str]:
    """sha256 of every file of the installed kernelgen package and its templates."""
    import kernelgen
    from kernelgen.render import templates_dir

    pkg = Path(kernelgen.__file__).resolve().parent
    out = {}
    for root, prefix in ((pkg, "kernelgen"), (templates_dir(), "templates")):
        for p in sorted(root.rglob("*")):
            if p.is_file() and p.suffix in (".py", ".j2") and "__pycache__" not in p.parts:
                out[f"{prefix}/{p.relative_to(root)}"] = _sha(p)
    return out


def operator_files(op_dir: Path, name: str) -> list[str]:
    return [SPEC_FILE, f"{name}_baseline.py", f"{name}_accuracy.py", f"{name}_performance.py", "conftest.py"]


def record(op_dir: Path, name: str) -> Manifest:
    op_dir = Path(op_dir)
    manifest = Manifest(recorded_at=now(), files={f: _sha(op_dir / f) for f in operator_files(op_dir, name)},
                        tool=tool_files())
    atomic_write(op_dir / MANIFEST_FILE, manifest.model_dump_json(indent=2))
    return manifest


def load(op_dir: Path) -> Manifest | None:
    path = Path(op_dir) / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, ValueError):
        raise IntegrityError(f"{path}: the integrity record is damaged",
                             hint=f"if you trust the folder as it is, `kernelgen refresh {op_dir}` records it again") from None


def check(op_dir: Path, name: str) -> list[str]:
    """What changed since the manifest was recorded ([] when nothing did, or there is none)."""
    op_dir = Path(op_dir)
    manifest = load(op_dir)
    if manifest is None:
        return []
    problems = []
    when = manifest.recorded_at
    for f, digest in manifest.files.items():
        p = op_dir / f
        if not p.is_file():
            problems.append(f"{f} is missing (it was recorded {when})")
        elif _sha(p) != digest:
            if f == SPEC_FILE:
                problems.append(f"{f} changed since the tests were rendered ({when}): `kernelgen refresh {op_dir}` "
                                "re-renders them and re-verifies the best kernel, keeping the rounds")
            elif f.endswith("_baseline.py"):
                problems.append(f"{f} changed since {when}, and it decides correctness: restore it; to change the "
                                f"reference, edit spec.yaml's `reference` and run `kernelgen refresh {op_dir}`")
            else:
                problems.append(f"{f} differs from what KernelGen rendered ({when}), and it decides verdicts: "
                                f"`kernelgen refresh {op_dir}` renders it again")
    tool = tool_files()
    changed = sorted(k for k in set(tool) | set(manifest.tool) if tool.get(k) != manifest.tool.get(k))
    if changed:
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        problems.append(f"KernelGen's installed files changed since this folder was verified ({when}): {shown}. If you "
                        f"upgraded KernelGen, run `kernelgen refresh {op_dir}`; if you did not, something modified the "
                        "installation: reinstall it")
    return problems


def require_intact(op_dir: Path, name: str) -> None:
    problems = check(op_dir, name)
    if problems:
        raise IntegrityError(f"{op_dir}: " + "; ".join(problems[:1]) + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                             hint="\n".join(problems[1:4]) or None)


# --- the folder during a run --------------------------------------------------------------------
Snapshot = dict[str, tuple[int, int]]


def snapshot(op_dir: Path) -> Snapshot:
    out: Snapshot = {}
    root = Path(op_dir)
    for p in root.rglob("*"):
        try:
            if p.is_file():
                st = p.stat()
                out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns)
        except OSError:
            continue
    return out


def diff(before: Snapshot, after: Snapshot) -> list[str]:
    changes = [f"{p} appeared" for p in sorted(set(after) - set(before))]
    changes += [f"{p} vanished" for p in sorted(set(before) - set(after))]
    changes += [f"{p} changed" for p in sorted(set(before) & set(after)) if before[p] != after[p]]
    return changes


def describe(changes: list[str]) -> str:
    return "the operator folder changed while the candidate ran: " + ", ".join(changes[:5]) + (
        f" and {len(changes) - 5} more" if len(changes) > 5 else "")
