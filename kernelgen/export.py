"""`kernelgen export OP_DIR`: the best kernel as a PyTorch operator, for use inside a model.

Writes `OP_DIR/<name>_op.py` (rendered from templates/export/), which registers the kernel as
`torch.library.custom_op("kernelgen::<name>", mutates_args=())` with a fake implementation (the
PyTorch reference run on fake tensors), so `torch.compile(fullgraph=True)` traces through it without
a graph break and CUDA graphs capture it. The kernel file is imported by path, as verified; it imports
KernelGen's host runtime (kernelgen.runtime.v1), of which the module carries the pieces the kernel uses
(kernelgen.runtime.inline), served to the kernel where KernelGen is not installed: both exports run on a
machine with torch and triton alone.

Only the verified bytes are exported: `<name>_triton.py` must be the best round's kernel.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from kernelgen import __version__
from kernelgen.errors import UsageError
from kernelgen.fsutil import atomic_write, move_aside
from kernelgen.opdir import OperatorDir, open_operator, operator_status
from kernelgen.record.state import load_state
from kernelgen.render import render
from kernelgen.runtime.inline import inline, inline_imports, runtime_imports
from kernelgen.spec import OperatorSpec

MODULE_SUFFIX = "_op.py"
_PY_TYPES = {"float": "float", "int": "int", "bool": "bool"}


@dataclass
class ExportResult:
    op: OperatorDir
    path: Path  # the module written
    round: int  # whose kernel it registers
    moved_aside: Path | None  # an earlier, different module, kept
    unchanged: bool = False


def module_source(spec: OperatorSpec, *, round_k: int, op_dir_expr: str, kernel_source: str = "") -> str:
    """The exported module's text. `op_dir_expr`: Python for the folder holding the kernel files;
    `kernel_source`: the kernel's, whose host runtime imports the module serves where KernelGen is missing."""
    runtime = [{"module": imp.module, "names": list(imp.names), "code": inline(imp.module, imp.names).rstrip()}
               for imp in runtime_imports(kernel_source)] if kernel_source else []
    params = [f"{i}: torch.Tensor" for i in spec.input_names]
    params += [f"{p.name}: {_PY_TYPES[p.type]} = {p.default!r}" for p in spec.params]
    call = spec.input_names + [f"{p.name}={p.name}" for p in spec.params]
    n_out = len(spec.outputs)
    returns = "torch.Tensor" if n_out == 1 else "tuple[" + ", ".join(["torch.Tensor"] * n_out) + "]"
    description = " ".join((spec.description or f"KernelGen's {spec.name}").split()).replace('"""', "'''")
    return render("export/op_module.py.j2", name=spec.name, version=__version__, date=date.today().isoformat(),
                  round=round_k, op_dir=op_dir_expr, typed_params=", ".join(params), call_args=", ".join(call),
                  call_example=", ".join(spec.input_names), return_type=returns, n_outputs=n_out, description=description,
                  runtime=runtime)


def _verified_round(op: OperatorDir) -> int:
    """The best round, provided `<name>_triton.py` holds exactly its (verified) kernel."""
    status = operator_status(op.path)
    if not status.complete:
        raise UsageError(f"{op.path}: {status.reason}; there is no verified kernel to export", hint=status.hint)
    state = load_state(op.path)
    best = state.best()
    if best is None:
        raise UsageError(f"{op.path}: no correct kernel to export (round 0 did not pass, or the best failed an edited spec)",
                         hint=f"`kernelgen test {op.path}` shows why; fix the spec and run `kernelgen refresh {op.path}`")
    kernel, verified = op.file("triton"), op.path / best.kernel_file
    if not kernel.is_file() or kernel.read_bytes() != verified.read_bytes():
        raise UsageError(f"{kernel} is not round {best.round}'s verified kernel ({best.kernel_file}): it was edited or replaced, "
                         "and only verified code is exported",
                         hint=f"keep your version elsewhere and copy {verified} over it, or check yours with "
                              f"`kernelgen test {op.path} --kernel YOUR_FILE`")
    if not op.file("baseline").is_file():
        raise UsageError(f"{op.file('baseline')} is missing: the fake implementation runs the reference from it",
                         hint=f"restore it with `kernelgen refresh {op.path}`")
    return best.round


def export_operator(op_dir: str | Path, *, out: str | Path | None = None) -> ExportResult:
    op = open_operator(op_dir)
    round_k = _verified_round(op)
    path = Path(out) if out is not None else op.path / f"{op.name}{MODULE_SUFFIX}"
    if path.is_dir():
        path = path / f"{op.name}{MODULE_SUFFIX}"
    if path.suffix != ".py":
        raise UsageError(f"--out {path}: the module must be a .py file (or a folder to put {op.name}{MODULE_SUFFIX} in)")
    if path.parent.resolve() == op.path.resolve():
        op_dir_expr = "Path(__file__).resolve().parent"
    else:
        op_dir_expr = f"Path({str(op.path.resolve())!r})  # the operator folder this module was exported from"
    text = module_source(op.spec, round_k=round_k, op_dir_expr=op_dir_expr,
                         kernel_source=op.file("triton").read_text(encoding="utf-8"))
    moved = None
    if path.is_file():
        if _same_but_date(path.read_text(encoding="utf-8"), text):
            return ExportResult(op, path, round_k, None, unchanged=True)
        moved = move_aside(path)  # an earlier export, perhaps edited: kept, never overwritten
    atomic_write(path, text)
    return ExportResult(op, path, round_k, moved)


def _same_but_date(old: str, new: str) -> bool:
    def strip(t: str) -> str:
        return re.sub(r"^(Exported by KernelGen \S+) on \d{4}-\d{2}-\d{2} ", r"\1 ", t, count=1, flags=re.MULTILINE)

    return strip(old) == strip(new)


# --- KernelBench's ModelNew -------------------------------------------------------------------------
KERNELBENCH_SUFFIX = "_kernelbench.py"


def _without_main(source: str) -> str:
    """The kernel file without its `if __name__ == "__main__":` self-check (KernelBench imports the file)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    for node in reversed(tree.body):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
                and node.test.left.id == "__name__"):
            del lines[node.lineno - 1: node.end_lineno]
    return "\n".join(lines).rstrip() + "\n"


def _state_access(key: str, kind: str) -> str:
    """Python reaching a parameter or buffer from ModelNew's forward: `self.gemm.weight`."""
    parts = key.split(".")
    if all(p.isidentifier() for p in parts):
        return "self." + key
    return f"self.get_{kind}({key!r})"


def kernelbench_parts(spec: OperatorSpec) -> tuple[str, list[str], list[str]]:
    """(the problem's source, the forward's argument names, the kernel's arguments from ModelNew's forward)
    of a spec `kernelgen new PROBLEM.py` derived; UsageError for any other spec."""
    from kernelgen.spec.kernelbench.readback import read_back

    view = read_back(spec)
    if view is None:
        raise UsageError(f"{spec.name}: its spec was not derived from a KernelBench-format problem file (no Model built "
                         "in its reference), so there is no Model for a ModelNew", hint="use `kernelgen export OP_DIR` for a torch op")
    calls = [_state_access(view.lifted[i].key, view.lifted[i].kind) if i in view.lifted else i for i in spec.input_names]
    calls += [f"{p.name}={p.name}" for p in spec.params if p.name in view.forward]  # forward's plain numbers (`A * s`)
    return view.problem, view.forward, calls


def export_kernelbench(op_dir: str | Path, *, out: str | Path | None = None) -> ExportResult:
    """Write the ModelNew file KernelBench's evaluator loads (templates/export/kernelbench_model_new.py.j2)."""
    op = open_operator(op_dir)
    round_k = _verified_round(op)
    problem, forward, calls = kernelbench_parts(op.spec)
    path = Path(out) if out is not None else op.path / f"{op.name}{KERNELBENCH_SUFFIX}"
    if path.is_dir():
        path = path / f"{op.name}{KERNELBENCH_SUFFIX}"
    text = render("export/kernelbench_model_new.py.j2", name=op.name, version=__version__, date=date.today().isoformat(),
                  round=round_k, kernel=inline_imports(_without_main(op.file("triton").read_text(encoding="utf-8"))).rstrip(),
                  problem=problem.rstrip(), forward_args=", ".join(forward), call_args=", ".join(calls))
    moved = None
    if path.is_file():
        if _same_but_date(path.read_text(encoding="utf-8"), text):
            return ExportResult(op, path, round_k, None, unchanged=True)
        moved = move_aside(path)
    atomic_write(path, text)
    return ExportResult(op, path, round_k, moved)
