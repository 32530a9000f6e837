"""A KernelBench-format problem file as code: read it, name it, run its module-level code (its size
globals optionally replaced), and find `Model`, `get_inputs` and `get_init_inputs` in it.

A problem's sizes are module-level assignments of literal numbers (`batch_size = 128`,
`N = 2048 * 2`, `input_shape = (32768,)`, `layer_sizes = [16384, 16384]`: a list shrinks as a tuple
does, and stays a list); everything computed from them (`bias_shape = (out_channels, 1, 1)`) is
computed again when they are replaced, so shrunk sizes stay consistent.
"""

from __future__ import annotations

import ast
import re
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgen.errors import ProblemFileError

Size = int | tuple[int, ...] | list[int]
_LEVEL_RE = re.compile(r"^level(\d+)$", re.IGNORECASE)
_NUMBERED_RE = re.compile(r"^(\d+)_(.+)$")


def problem_name(path: str | Path) -> str:
    """`.../level2/12_Gemm_Multiply_LeakyReLU.py` -> `kb2_12_gemm_multiply_leakyrelu`; a file outside
    a `levelN` folder: `kb_<slug of its name>`."""
    p = Path(path)

    def slug(s: str) -> str:
        return re.sub(r"_+", "_", re.sub(r"[^a-z0-9]+", "_", s.lower())).strip("_") or "problem"

    level = _LEVEL_RE.match(p.parent.name)
    numbered = _NUMBERED_RE.match(p.stem)
    if level and numbered:
        return f"kb{int(level.group(1))}_{int(numbered.group(1))}_{slug(numbered.group(2))}"
    return f"kb_{slug(p.stem)}"


@dataclass(frozen=True)
class ProblemSource:
    path: Path
    text: str  # the file's text, trailing whitespace removed from each line (YAML keeps it readable)
    tree: ast.Module
    sizes: dict[str, Size]  # module-level names assigned a literal int or tuple of ints, as evaluated
    constants: dict[str, bool | int | float] = field(default_factory=dict)  # names assigned a literal number (`s = 3.14`)

    def run(self, overrides: dict[str, Size] | None = None) -> dict[str, Any]:
        """Execute the module (sizes in `overrides` replaced) and return its namespace."""
        tree = self.tree
        if overrides:
            tree = _Override(overrides).visit(ast.parse(self.text, filename=str(self.path)))
            ast.fix_missing_locations(tree)
        namespace: dict[str, Any] = {"__name__": "kernelgen_kernelbench_problem", "__file__": str(self.path)}
        code = compile(tree, str(self.path), "exec")
        try:
            exec(code, namespace)  # noqa: S102 - the user's own problem file, as KernelBench runs it
        except Exception as e:  # noqa: BLE001 - any failure of the user's code is reported with its line
            raise ProblemFileError(self.path, f"running it raises {type(e).__name__}: {e}{where(e, self)}") from None
        return namespace


class _Override(ast.NodeTransformer):
    def __init__(self, values: dict[str, Size]) -> None:
        self.values = values

    def visit_Module(self, node: ast.Module) -> ast.Module:  # noqa: N802 - ast's naming
        for stmt in node.body:
            for name, _, replace in _assignments(stmt):
                if name in self.values:
                    replace(_literal(self.values[name]))
        return node


def _literal(value: Size) -> ast.expr:
    """A size as the source writes it: a list stays a list (`layer_sizes + [n]` needs one)."""
    if isinstance(value, list):
        return ast.List(elts=[ast.Constant(v) for v in value], ctx=ast.Load())
    return ast.Constant(value)


def _assignments(stmt: ast.stmt) -> list[tuple[str, ast.expr, Any]]:
    """(name, value, a setter of the value) of each name a module-level statement assigns:
    `n = 4`, `n: int = 4`, `h = w = 128` and `h, w = 128, 128`."""
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [(stmt.target.id, stmt.value, lambda v: setattr(stmt, "value", v))]
    if not isinstance(stmt, ast.Assign):
        return []
    if all(isinstance(t, ast.Name) for t in stmt.targets):  # equal sizes stay equal: one value for all
        return [(t.id, stmt.value, lambda v: setattr(stmt, "value", v)) for t in stmt.targets]  # type: ignore[attr-defined]
    if len(stmt.targets) != 1:
        return []
    target = stmt.targets[0]
    if (isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(target.elts) == len(stmt.value.elts)
            and all(isinstance(t, ast.Name) for t in target.elts)):
        elts = stmt.value.elts
        return [(t.id, elts[i], lambda v, i=i: elts.__setitem__(i, v)) for i, t in enumerate(target.elts)]  # type: ignore[attr-defined]
    return []


def where(exc: BaseException, src: ProblemSource) -> str:
    """` (line 12: `x = foo`)`: the innermost frame of the problem file in the exception's traceback."""
    lineno = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == str(src.path):
            lineno = frame.lineno
    if lineno is None:
        return ""
    lines = src.text.splitlines()
    text = lines[lineno - 1].strip() if 1 <= lineno <= len(lines) else ""
    return f" (line {lineno}: `{text}`)" if text else f" (line {lineno})"


def _literal_size(node: ast.expr) -> Size | None:
    """The value of an expression made only of int literals and arithmetic (`2048 * 2`, `(32768,)`,
    `[400, 800]`)."""
    if any(isinstance(n, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)) for n in ast.walk(node)):
        return None
    try:
        value = eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})  # noqa: S307 - literals only
    except Exception:  # noqa: BLE001 - not a size
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def read_problem(path: str | Path) -> ProblemSource:
    p = Path(path)
    if not p.is_file():
        raise ProblemFileError(p, "no such file")
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProblemFileError(p, f"cannot be read: {e}") from None
    text = "\n".join(line.rstrip() for line in raw.expandtabs(4).splitlines()).rstrip("\n") + "\n"  # lines keep their numbers
    try:
        tree = ast.parse(text, filename=str(p))
    except SyntaxError as e:
        raise ProblemFileError(p, f"does not parse: {e.msg} (line {e.lineno})") from None
    sizes: dict[str, Size] = {}
    constants: dict[str, bool | int | float] = {}
    for stmt in tree.body:
        for name, node, _ in _assignments(stmt):
            value = _literal_size(node)
            if value is not None:
                sizes[name] = value
            else:
                sizes.pop(name, None)  # reassigned from something else: not a size of its own
            number = _literal_number(node)
            if number is not None:
                constants[name] = number
            else:
                constants.pop(name, None)
    return ProblemSource(p, text, tree, sizes, constants)


def _literal_number(node: ast.expr) -> bool | int | float | None:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (bool, int, float)) else None


@dataclass(frozen=True)
class ProblemCode:
    """What a run of the module defines that KernelGen uses."""

    model: type
    get_inputs: Any
    get_init_inputs: Any


def problem_code(src: ProblemSource, namespace: dict[str, Any]) -> ProblemCode:
    import torch

    model = namespace.get("Model")
    missing = [n for n in ("get_inputs", "get_init_inputs") if not callable(namespace.get(n))]
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise ProblemFileError(src.path, "defines no `class Model(nn.Module)`: a KernelBench problem is a Model with "
                                         "get_inputs() and get_init_inputs() beside it")
    if missing:
        raise ProblemFileError(src.path, f"defines no {' and no '.join(f'{m}()' for m in missing)}: KernelBench calls "
                                         "Model(*get_init_inputs()) and then forward(*get_inputs())")
    return ProblemCode(model, namespace["get_inputs"], namespace["get_init_inputs"])
