"""The replay module of a kernel file: only what a replay may define, read from the file's bytes by the
judge (pure AST: nothing of the file runs here).

It keeps, each on the line it had (a Triton error names the same line in both files):
- the imports of Triton and `math`,
- every module-level function decorated with `@triton.jit` (its other decorators, autotune and
  heuristics, dropped: the recording resolved them, and the plan carries the constants they chose),
- the module-level constants those functions read (in their bodies, defaults or decorators), where
  each is a literal expression: numbers, strings, tuples, arithmetic, Triton dtypes, `tl.constexpr(...)`,
  `triton.cdiv`, `triton.next_power_of_2` and `math` functions of those.
Anything else a @triton.jit function reads from the module — a Python function or class of the file, a
value computed by Python — would run the candidate's Python in the replay: it is refused
(`not-replayable`), naming it and its line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

KEPT_MODULES = ("triton", "math")  # imports a replay module keeps (triton's submodules included)
PURE_CALLS = {"triton.language.constexpr", "triton.language.core.constexpr", "triton.cdiv", "triton.next_power_of_2"}
JIT = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit"}


class ExtractError(Exception):
    """What a replay cannot define; `message` names it and its line."""

    code = "not-replayable"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Extracted:
    source: str  # the replay module, line for line where it keeps something, blank elsewhere
    kernels: tuple[str, ...]  # the @triton.jit functions it defines


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


class _Module:
    def __init__(self, tree: ast.Module):
        self.aliases: dict[str, str] = {}  # local name -> the module path it denotes ('tl' -> 'triton.language')
        self.imports: list[ast.stmt] = []
        self.jit: dict[str, tuple[ast.FunctionDef, ast.expr]] = {}  # name -> (def, its jit decorator)
        self.bound: dict[str, ast.stmt] = {}  # every other module-level binding, last one wins
        for node in tree.body:
            self._statement(node)

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node)
        elif isinstance(node, ast.FunctionDef):
            jit = next((d for d in node.decorator_list if self.path(d.func if isinstance(d, ast.Call) else d) in JIT), None)
            if jit is not None:
                self.jit[node.name] = (node, jit)
                self.bound.pop(node.name, None)
            else:
                self.bound[node.name] = node
                self.jit.pop(node.name, None)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        self.bound[name.id] = node
                        self.jit.pop(name.id, None)
        elif isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef)):
            self.bound[node.name] = node

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        kept = getattr(node, "level", 0) == 0 and all(n.split(".")[0] in KEPT_MODULES for n in names)
        for a in node.names:
            local = a.asname or a.name.split(".")[0]
            if isinstance(node, ast.Import):
                path = a.name if a.asname else a.name.split(".")[0]
            else:
                path = f"{node.module}.{a.name}"
            if kept:
                self.aliases[local] = path
            else:
                self.bound[local] = node
        if kept:
            self.imports.append(node)

    def path(self, node: ast.AST) -> str | None:
        parts = _dotted(node)
        if not parts or parts[0] not in self.aliases:
            return None
        return ".".join([self.aliases[parts[0]], *parts[1:]])


def _loaded(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _locals(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    names |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return names


class _Constants:
    """The module constants the kept functions read, each checked to be a literal expression."""

    def __init__(self, module: _Module):
        self.module = module
        self.kept: dict[str, ast.stmt] = {}

    def read_by(self, fn: ast.FunctionDef, jit: ast.expr) -> None:
        own = _locals(fn)
        outside = _loaded(fn.args) | _loaded(jit) | {n for stmt in fn.body for n in _loaded(stmt)}
        for name in sorted(outside - own):
            self._need(name, f"@triton.jit {fn.name}")

    def _need(self, name: str, reader: str) -> None:
        m = self.module
        if name in m.aliases or name in m.jit or name in self.kept or name not in m.bound:
            return  # an import, a kernel, already kept, or not the module's (a builtin, or a NameError the front end says)
        node = m.bound[name]
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if value is None or (isinstance(node, ast.Assign) and not all(isinstance(t, ast.Name) for t in node.targets)):
            what = "a Python function or class" if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) \
                else "a module a replay does not import" if isinstance(node, (ast.Import, ast.ImportFrom)) \
                else "a name bound by Python code"
            raise ExtractError(f"line {node.lineno}: {reader} reads {name!r}, {what} of the file; a replay defines only "
                               "the file's @triton.jit functions and literal module constants, never its Python")
        self._literal(value, name, node.lineno)
        self.kept[name] = node
        for inner in sorted(_loaded(value)):
            self._need(inner, f"the constant {name}")

    def _literal(self, node: ast.AST, name: str, line: int) -> None:
        ok = (ast.Constant, ast.Tuple, ast.List, ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp,
              ast.Subscript, ast.Slice, ast.Load, ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.Name,
              ast.Attribute, ast.Call, ast.keyword)
        for sub in ast.walk(node):
            bad = not isinstance(sub, ok)
            if isinstance(sub, ast.Attribute):
                bad = bad or sub.attr.startswith("_") or self.module.path(sub) is None
            if isinstance(sub, ast.Call):
                path = self.module.path(sub.func) or ""
                bad = bad or not (path in PURE_CALLS or (path.startswith("math.") and path.count(".") == 1))
            if bad:
                raise ExtractError(f"line {line}: the module constant {name!r}, read by a @triton.jit function, is computed "
                                   f"by Python ({ast.unparse(sub)[:80]}); a replay defines only literal constants")


def extract(source: str) -> Extracted:
    """The replay module of `source` (which parses: the static check ran first); ExtractError names what
    a replay cannot define."""
    tree = ast.parse(source)
    module = _Module(tree)
    if not module.jit:
        raise ExtractError("the file defines no module-level @triton.jit function")
    constants = _Constants(module)
    for fn, jit in module.jit.values():
        constants.read_by(fn, jit)
    lines = source.splitlines()
    out = [""] * len(lines)
    for node in [*module.imports, *constants.kept.values()]:
        out[node.lineno - 1] = ast.unparse(node)
    for fn, jit in module.jit.values():
        for first, last in ((jit.lineno - 1, jit.end_lineno), (fn.lineno - 1, fn.end_lineno)):
            out[first:last] = lines[first:last]
        if not lines[jit.lineno - 1].lstrip().startswith("@"):
            raise ExtractError(f"line {jit.lineno}: the @triton.jit decorator shares its line with other code")
    return Extracted(source="\n".join(out) + "\n", kernels=tuple(module.jit))
